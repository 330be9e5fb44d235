/* The SVG timeline: one lane per engine and per DMA queue that saw events, drawn from the profiler's binned
 * grid (at most SVG_BINS columns per lane, so the file is bounded however long the run). Each column is coloured
 * by the opcode family that kept the lane busiest in it, with opacity in quarter steps by how busy the lane
 * was; semaphore waits show in their own colour where nothing ran. Runs of equal columns merge into one
 * rectangle. A time axis with labelled 1-2-5 ticks, a legend and a title with the totals complete it. Plain
 * SVG 1.1, UTF-8, no scripts: it opens in any browser. */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "prof/prof_internal.h"

static const char *const FAMILY_COLOURS[PROF_FAM_COUNT] = {
    "#d62728", /* matmul */
    "#1f77b4", /* vector */
    "#2ca02c", /* scalar */
    "#9467bd", /* gpsimd */
    "#ff7f0e", /* dma */
    "#7f7f7f", /* control */
    "#e5c494", /* wait */
};

#define LEFT 120
#define RIGHT 30
#define TOP 56
#define LANE_H 22
#define LANE_GAP 6
#define STR_(x) #x
#define STR(x) STR_(x)
#define OUT_LIT(w, lit) prof_out_mem((w), (lit), sizeof(lit) - 1)

/* x with two decimals (x >= 0), without printf: the SVG has a few thousand of these */
static void out_fix2(prof_out *w, double x)
{
    uint64_t v = (uint64_t)(x * 100.0 + 0.5);
    prof_out_u64(w, v / 100);
    char frac[3] = {'.', (char)('0' + v / 10 % 10), (char)('0' + v % 10)};
    prof_out_mem(w, frac, 3);
}

static void fmt_tick(char *buf, size_t cap, double ps, double span)
{
    /* one unit for the whole axis, chosen by its span */
    if (span >= 1e9)
        snprintf(buf, cap, "%g ms", ps * 1e-9);
    else if (span >= 1e6)
        snprintf(buf, cap, "%g \xc2\xb5s", ps * 1e-6);
    else if (span >= 1e3)
        snprintf(buf, cap, "%g ns", ps * 1e-3);
    else
        snprintf(buf, cap, "%g ps", ps);
}

static double nice_step(double range)
{
    double raw = range / 8.0;
    double mag = pow(10.0, floor(log10(raw)));
    double m = raw / mag;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * mag;
}

/* Colour class and opacity (quarters) of one bin: -1 when empty. */
static int bin_class(const prof_bin *b, int64_t width, int *quarters)
{
    if (!b->used)
        return -1;
    int best = -1;
    double sum = 0;
    for (int f = 0; f < PROF_FAM_COUNT; f++) {
        if (f == PROF_FAM_WAIT)
            continue;
        sum += b->busy[f];
        if (b->busy[f] > 0 && (best < 0 || b->busy[f] > b->busy[best]))
            best = f;
    }
    if (best < 0) {
        if (b->busy[PROF_FAM_WAIT] <= 0) {
            /* only zero-length events: mark them faintly with their family so they stay visible */
            *quarters = 1;
            return b->op == PROF_OP_WAIT ? PROF_FAM_WAIT : (int)PROF_FAM_CONTROL;
        }
        best = PROF_FAM_WAIT;
        sum = b->busy[PROF_FAM_WAIT];
    }
    double occ = sum / (double)width;
    int q = (int)ceil(occ * 4.0);
    *quarters = q < 1 ? 1 : q > 4 ? 4 : q;
    return best;
}

int prof_svg_write(FILE *file, const prof_grid *g, const tern_prof_summary *s, unsigned width)
{
    char buffer[1 << 16];
    prof_out out = {file, buffer, 0, sizeof buffer, 0}, *f = &out;
    unsigned lanes[PROF_LANES], nl = 0;
    for (unsigned l = 0; l < PROF_LANES && l < g->nlanes; l++)
        if (g->lane[l])
            lanes[nl++] = l;
    const double plot_w = width;
    const int height = TOP + (int)nl * (LANE_H + LANE_GAP) + 90;
    const int total_w = LEFT + (int)width + RIGHT;
    char name[200];
    prof_xml_escape(name, sizeof name, s->name);

    prof_out_fmt(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    prof_out_fmt(f,
                 "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%d\" height=\"%d\" "
                 "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"12\">\n",
                 total_w, height, total_w, height);
    prof_out_fmt(f, "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"white\"/>\n", total_w, height);
    double total_us = (double)s->total_ps * 1e-6;
    prof_out_fmt(f,
                 "<text x=\"%d\" y=\"22\" font-size=\"16\" font-weight=\"bold\">tern profile: %s \xe2\x80\x94 %.3f "
                 "\xc2\xb5s, %" PRIu64 " instructions</text>\n",
                 LEFT, name, total_us, s->instructions_total);
    prof_out_fmt(
        f,
        "<text x=\"%d\" y=\"40\">MFU %.2f%%  HFU %.2f%%  MBU %.2f%%  DMA %" PRIu64 " transfers, %.3f MB, active "
        "%.1f%%</text>\n",
        LEFT, s->mfu_pct, s->hfu_pct, s->mbu_pct, s->dma_transfers, (double)s->dma_bytes * 1e-6, s->dma_active_pct);

    /* time axis span: the run's time, or the grid's extent if events ran past it */
    double span = (double)s->total_ps;
    if (span <= 0)
        span = 1;
    const double px_per_ps = plot_w / span;

    for (unsigned li = 0; li < nl; li++) {
        unsigned l = lanes[li];
        int y = TOP + (int)li * (LANE_H + LANE_GAP);
        char label[48];
        if (l < PROF_LANE_QUEUE0)
            snprintf(label, sizeof label, "%s", tern_prof_engine_track((tern_engine)l));
        else
            snprintf(label, sizeof label, "DMA q%u", l - PROF_LANE_QUEUE0);
        const char *active = "";
        char act[32] = "";
        if (l < PROF_LANE_QUEUE0) {
            snprintf(act, sizeof act, " %.0f%%", s->active_pct[l]);
            active = act;
        }
        prof_out_fmt(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">%s%s</text>\n", LEFT - 8, y + 15, label, active);
        prof_out_fmt(f, "<rect x=\"%d\" y=\"%d\" width=\"%u\" height=\"%d\" fill=\"#f4f4f4\"/>\n", LEFT, y, width,
                     LANE_H);
        const prof_bin *bins = g->lane[l];
        unsigned i = 0;
        const unsigned hi = g->hi[l];
        while (i < hi) {
            int q, c = bin_class(&bins[i], g->width, &q);
            if (c < 0) {
                i++;
                continue;
            }
            unsigned j = i + 1;
            uint64_t count = bins[i].count;
            int q2;
            while (j < hi && bin_class(&bins[j], g->width, &q2) == c && q2 == q)
                count += bins[j++].count;
            double x0 = (double)i * (double)g->width * px_per_ps;
            double x1 = (double)j * (double)g->width * px_per_ps;
            if (x0 >= plot_w)
                break;
            if (x1 > plot_w)
                x1 = plot_w;
            double w = x1 - x0 < 0.5 ? 0.5 : x1 - x0;
            OUT_LIT(f, "<rect x=\"");
            out_fix2(f, LEFT + x0);
            OUT_LIT(f, "\" y=\"");
            prof_out_u64(f, (uint64_t)y);
            OUT_LIT(f, "\" width=\"");
            out_fix2(f, w);
            OUT_LIT(f, "\" height=\"" STR(LANE_H) "\" fill=\"");
            prof_out_str(f, FAMILY_COLOURS[c]);
            OUT_LIT(f, "\" fill-opacity=\"");
            out_fix2(f, q / 4.0);
            OUT_LIT(f, "\"><title>");
            prof_out_str(f, prof_family_name((prof_family)c));
            OUT_LIT(f, ", ");
            prof_out_u64(f, count);
            OUT_LIT(f, " events, ");
            prof_out_us(f, (int64_t)i * g->width);
            OUT_LIT(f, "-");
            prof_out_us(f, (int64_t)j * g->width);
            OUT_LIT(f, " \xc2\xb5s</title></rect>\n");
            i = j;
        }
    }

    /* axis */
    int ay = TOP + (int)nl * (LANE_H + LANE_GAP) + 4;
    prof_out_fmt(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"black\"/>\n", LEFT, ay, LEFT + (int)width,
                 ay);
    double step = nice_step(span);
    for (int k = 0; k <= 20; k++) {
        double t = k * step;
        if (t > span * 1.0000001)
            break;
        double x = LEFT + t * px_per_ps;
        char lbl[32];
        fmt_tick(lbl, sizeof lbl, t, span);
        prof_out_fmt(f, "<line x1=\"%.2f\" y1=\"%d\" x2=\"%.2f\" y2=\"%d\" stroke=\"black\"/>\n", x, ay, x, ay + 5);
        prof_out_fmt(f, "<text x=\"%.2f\" y=\"%d\" text-anchor=\"middle\">%s</text>\n", x, ay + 18, lbl);
    }
    if (s->total_ps <= 0)
        prof_out_fmt(f, "<text x=\"%d\" y=\"%d\">(no simulated time elapsed: events had zero duration)</text>\n", LEFT,
                     ay - 8);

    /* legend */
    int ly = ay + 44;
    for (int fam = 0; fam < PROF_FAM_COUNT; fam++) {
        int x = LEFT + fam * 110;
        prof_out_fmt(f, "<rect x=\"%d\" y=\"%d\" width=\"14\" height=\"14\" fill=\"%s\"/>\n", x, ly - 11,
                     FAMILY_COLOURS[fam]);
        prof_out_fmt(f, "<text x=\"%d\" y=\"%d\">%s</text>\n", x + 20, ly, prof_family_name((prof_family)fam));
    }
    prof_out_fmt(f,
                 "<text x=\"%d\" y=\"%d\" fill=\"#555\">opacity: share of the column's time the lane was busy</text>\n",
                 LEFT, ly + 22);
    prof_out_fmt(f, "</svg>\n");
    prof_out_flush(f);
    return f->failed || ferror(file) ? -1 : 0;
}
