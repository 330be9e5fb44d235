/* The profiler's binned timeline: per lane a fixed array of time bins sharing one power-of-two width. An event
 * is spread over the bins it covers (each bin records the time covered per opcode family, the clipped first
 * start and last end, and how many events start in it); when an event ends past the grid, pairs of bins merge
 * and the width doubles. Memory is lanes x bins whatever the run's length, which is what keeps the SVG and the
 * aggregated tail of a long trace bounded. Also the opcode families and the text escapes the writers share. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prof/prof_internal.h"

static const char *const FAMILY_NAMES[PROF_FAM_COUNT] = {"matmul", "vector",  "scalar", "gpsimd",
                                                         "dma",    "control", "wait"};

const char *prof_family_name(prof_family f)
{
    return (unsigned)f < PROF_FAM_COUNT ? FAMILY_NAMES[f] : "?";
}

prof_family prof_family_of(unsigned opcode, tern_engine e)
{
    switch (opcode) {
    case TERN_OP_LOAD_STATIONARY:
    case TERN_OP_MULTIPLY_MOVING:
    case TERN_OP_TRANSPOSE_PE: return PROF_FAM_MATMUL;
    case TERN_OP_DMA_COPY:
    case TERN_OP_DMA_GATHER:
    case TERN_OP_DMA_SCATTER: return PROF_FAM_DMA;
    case TERN_OP_NOP:
    case TERN_OP_SEM_WAIT:
    case TERN_OP_SEM_SIGNAL:
    case TERN_OP_BARRIER:
    case TERN_OP_REG_SET:
    case TERN_OP_REG_ALU:
    case TERN_OP_BRANCH:
    case TERN_OP_HALT: return PROF_FAM_CONTROL;
    case PROF_OP_WAIT: return PROF_FAM_WAIT;
    default: break;
    }
    switch (e) {
    case TERN_ENGINE_TENSOR: return PROF_FAM_MATMUL;
    case TERN_ENGINE_VECTOR: return PROF_FAM_VECTOR;
    case TERN_ENGINE_SCALAR: return PROF_FAM_SCALAR;
    case TERN_ENGINE_GPSIMD: return PROF_FAM_GPSIMD;
    default: return PROF_FAM_CONTROL;
    }
}

tern_status prof_grid_init(prof_grid *g, unsigned nlanes, unsigned nbins)
{
    memset(g, 0, sizeof *g);
    g->lane = calloc(nlanes, sizeof *g->lane);
    g->cap = calloc(nlanes, sizeof *g->cap);
    g->hi = calloc(nlanes, sizeof *g->hi);
    if (!g->lane || !g->cap || !g->hi) {
        prof_grid_free(g);
        return TERN_ERR_NOMEM;
    }
    g->nlanes = nlanes;
    g->nbins = nbins;
    g->width = PROF_GRID_MIN_WIDTH;
    return TERN_OK;
}

void prof_grid_free(prof_grid *g)
{
    if (g->lane)
        for (unsigned i = 0; i < g->nlanes; i++)
            free(g->lane[i]);
    free(g->lane);
    free(g->cap);
    free(g->hi);
    memset(g, 0, sizeof *g);
}

static void bin_clear(prof_bin *b)
{
    memset(b, 0, sizeof *b);
    b->first = INT64_MAX;
}

/* Fold b into a (a and b adjacent or the same span). */
static void bin_merge(prof_bin *a, const prof_bin *b)
{
    if (!b->used)
        return;
    if (!a->used) {
        *a = *b;
        return;
    }
    for (int f = 0; f < PROF_FAM_COUNT; f++)
        a->busy[f] += b->busy[f];
    if (b->first < a->first)
        a->first = b->first;
    if (b->last > a->last)
        a->last = b->last;
    a->bytes += b->bytes;
    a->flops += b->flops;
    a->count += b->count;
    a->mixed |= b->mixed || a->op != b->op;
}

/* Halve the resolution: bin i takes bins 2i and 2i+1 (only the part of each lane in use). */
static void grid_coarsen(prof_grid *g)
{
    for (unsigned l = 0; l < g->nlanes; l++) {
        prof_bin *bins = g->lane[l];
        unsigned hi = g->hi[l];
        if (!bins || !hi)
            continue;
        unsigned nhi = (hi + 1) / 2;
        for (unsigned i = 0; i < nhi; i++) {
            prof_bin m = bins[2 * i];
            if (2 * i + 1 < hi)
                bin_merge(&m, &bins[2 * i + 1]);
            bins[i] = m;
        }
        for (unsigned i = nhi; i < hi; i++)
            bin_clear(&bins[i]);
        g->hi[l] = nhi;
    }
    g->width *= 2;
}

/* Make bins [0, need) of a lane exist (capacity doubles, up to nbins). */
static int grid_reserve(prof_grid *g, unsigned lane, unsigned need)
{
    if (need <= g->cap[lane])
        return 0;
    unsigned cap = g->cap[lane] ? g->cap[lane] : 64;
    while (cap < need)
        cap *= 2;
    if (cap > g->nbins)
        cap = g->nbins;
    prof_bin *b = realloc(g->lane[lane], sizeof *b * cap);
    if (!b)
        return -1;
    for (unsigned i = g->cap[lane]; i < cap; i++)
        bin_clear(&b[i]);
    g->lane[lane] = b;
    g->cap[lane] = cap;
    return 0;
}

int prof_grid_add(prof_grid *g, unsigned lane, int64_t start, int64_t end, prof_family fam, unsigned op, uint64_t bytes,
                  uint64_t flops)
{
    if (lane >= g->nlanes)
        lane = g->nlanes - 1;
    if (start < 0)
        start = 0;
    if (end < start)
        end = start;
    /* the grid must hold [start, end) and the bin where a zero-length event starts */
    while (end > (int64_t)g->nbins * g->width || start >= (int64_t)g->nbins * g->width) {
        if (g->width > INT64_MAX / 4 / (int64_t)g->nbins) { /* absurd times: clip rather than overflow */
            int64_t lim = (int64_t)g->nbins * g->width;
            start = start < lim ? start : lim - 1;
            end = end < lim ? end : lim;
            break;
        }
        grid_coarsen(g);
    }
    int64_t w = g->width;
    unsigned i0 = (unsigned)(start / w);
    unsigned i1 = end > start ? (unsigned)((end - 1) / w) : i0;
    if (grid_reserve(g, lane, i1 + 1))
        return -1;
    prof_bin *bins = g->lane[lane];
    if (i1 + 1 > g->hi[lane])
        g->hi[lane] = i1 + 1;
    for (unsigned i = i0; i <= i1; i++) {
        prof_bin *b = &bins[i];
        int64_t lo = (int64_t)i * w, hi = lo + w;
        int64_t s = start > lo ? start : lo, e = end < hi ? end : hi;
        if (!b->used) {
            b->used = 1;
            b->op = (uint16_t)op;
        } else if (b->op != op) {
            b->mixed = 1;
        }
        b->busy[fam] += (float)(e - s);
        if (s < b->first)
            b->first = s;
        if (e > b->last)
            b->last = e;
        if (i == i0) {
            b->count++;
            b->bytes += bytes;
            b->flops += flops;
        }
    }
    return 0;
}

void prof_json_escape(char *out, size_t cap, const char *s)
{
    size_t n = 0;
    for (; *s && n + 7 < cap; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            out[n++] = '\\';
            out[n++] = (char)c;
        } else if (c < 0x20) {
            n += (size_t)snprintf(out + n, cap - n, "\\u%04x", c);
        } else {
            out[n++] = (char)c;
        }
    }
    out[n] = 0;
}

void prof_xml_escape(char *out, size_t cap, const char *s)
{
    size_t n = 0;
    for (; *s && n + 7 < cap; s++) {
        const char *rep = NULL;
        switch (*s) {
        case '&': rep = "&amp;"; break;
        case '<': rep = "&lt;"; break;
        case '>': rep = "&gt;"; break;
        case '"': rep = "&quot;"; break;
        case '\'': rep = "&apos;"; break;
        default: break;
        }
        if (rep) {
            size_t l = strlen(rep);
            memcpy(out + n, rep, l);
            n += l;
        } else if ((unsigned char)*s >= 0x20 || *s == '\t') {
            out[n++] = *s;
        }
    }
    out[n] = 0;
}

/* ---- the buffered writer ---- */

void prof_out_flush(prof_out *w)
{
    if (w->n && fwrite(w->buf, 1, w->n, w->f) != w->n)
        w->failed = 1;
    w->n = 0;
}

void prof_out_mem(prof_out *w, const char *s, size_t len)
{
    if (len > w->cap) {
        prof_out_flush(w);
        if (fwrite(s, 1, len, w->f) != len)
            w->failed = 1;
        return;
    }
    prof_out_need(w, len);
    memcpy(w->buf + w->n, s, len);
    w->n += len;
}

void prof_out_u64(prof_out *w, uint64_t v)
{
    char tmp[24];
    int i = 24;
    do {
        tmp[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    prof_out_mem(w, tmp + i, (size_t)(24 - i));
}

void prof_out_i64(prof_out *w, int64_t v)
{
    if (v < 0) {
        prof_out_mem(w, "-", 1);
        prof_out_u64(w, (uint64_t)0 - (uint64_t)v);
    } else {
        prof_out_u64(w, (uint64_t)v);
    }
}

void prof_out_hex(prof_out *w, uint64_t v)
{
    char tmp[20];
    int i = 20;
    do {
        tmp[--i] = "0123456789abcdef"[v & 15];
        v >>= 4;
    } while (v);
    tmp[--i] = 'x';
    tmp[--i] = '0';
    prof_out_mem(w, tmp + i, (size_t)(20 - i));
}

void prof_out_us(prof_out *w, int64_t ps)
{
    if (ps < 0)
        ps = 0;
    prof_out_u64(w, (uint64_t)(ps / 1000000));
    char frac[7];
    int64_t f = ps % 1000000;
    for (int i = 6; i >= 1; i--) {
        frac[i] = (char)('0' + f % 10);
        f /= 10;
    }
    frac[0] = '.';
    prof_out_mem(w, frac, 7);
}

void prof_out_fmt(prof_out *w, const char *fmt, ...)
{
    char tmp[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n > 0)
        prof_out_mem(w, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}
