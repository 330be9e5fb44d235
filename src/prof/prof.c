/* The profiler proper: takes the simulator's events one at a time, streams each to the Chrome trace-event
 * file as a complete ("X") slice on its engine's or DMA queue's track, and keeps only running totals (busy-time
 * unions, per-opcode times, byte and FLOP counts) plus two fixed-size grids (the SVG's, and the trace's bins
 * once the slice limit is reached). tern_prof_finish turns the totals into the summary with the metrics AWS's
 * profiler reports (docs/profiler.md) and completes the files. An engine's busy time is the union of its
 * instructions' intervals (streamed: events on one engine arrive in order of start); DMA busy time is the union
 * over all queues, kept as one coalesced interval list per run (queues interleave, so it is merged at the end). */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "prof/prof_internal.h"

#define TRACE_BINS 2048u /* per track, once the trace is aggregated */
#define SVG_BINS 2048u /* per lane: at most ~2000 columns */
#define ENGINE_SUBLANES 4
#define QUEUE_SUBLANES 2
#define TID_QUEUE0 32

typedef struct {
    int64_t s, e;
} interval;

struct tern_prof {
    tern_prof_opts o;
    char name_json[160];
    FILE *trace, *svg;
    prof_out out; /* the trace's buffer */
    int io_failed;
    char io_msg[320];
    int finished;

    /* trace state */
    uint64_t max_slices, slices;
    int aggregated;
    prof_grid tgrid; /* trace tail, one lane per engine / queue (not per sub-lane) */
    int64_t engine_lane_end[TERN_ENGINE_COUNT][ENGINE_SUBLANES];
    int64_t queue_lane_end[TERN_PROF_MAX_QUEUES][QUEUE_SUBLANES];
    uint8_t track_named[TID_QUEUE0 + TERN_PROF_MAX_QUEUES * QUEUE_SUBLANES];

    prof_grid sgrid; /* SVG */
    int svg_enabled;

    /* totals */
    int64_t max_end;
    int64_t cur_s[TERN_ENGINE_COUNT], cur_e[TERN_ENGINE_COUNT], busy[TERN_ENGINE_COUNT];
    int have_cur[TERN_ENGINE_COUNT];
    int64_t wait_ps[TERN_ENGINE_COUNT];
    uint64_t instrs[TERN_ENGINE_COUNT], flops[TERN_ENGINE_COUNT];
    uint64_t dma_bytes, dma_transfers, hbm_bytes;
    uint8_t queue_used[TERN_PROF_MAX_QUEUES];
    interval *dma_iv;
    size_t dma_n, dma_cap;
    size_t queue_last[TERN_PROF_MAX_QUEUES]; /* index + 1 of the queue's latest interval; 0 = none */
    uint64_t top_count[TERN_OP_COUNT][TERN_ENGINE_COUNT + 1];
    int64_t top_ps[TERN_OP_COUNT][TERN_ENGINE_COUNT + 1];
};

static const char *const ENGINE_TRACKS[TERN_ENGINE_COUNT] = {"TensorE", "VectorE", "ScalarE", "GpSimdE", "SyncE"};

const char *tern_prof_engine_track(tern_engine e)
{
    return (unsigned)e < TERN_ENGINE_COUNT ? ENGINE_TRACKS[e] : "?";
}

void tern_prof_opts_init(tern_prof_opts *o)
{
    memset(o, 0, sizeof *o);
    o->max_trace_events = TERN_PROF_DEFAULT_MAX_TRACE_EVENTS;
    snprintf(o->name, sizeof o->name, "NeuronCore");
}

void tern_prof_opts_from_machine(const tern_machine *m, tern_prof_opts *o)
{
    const tern_core_spec *c = tern_machine_core(m);
    const tern_chip_spec *chip = tern_machine_chip(m);
    snprintf(o->name, sizeof o->name, "%s", tern_machine_name(m));
    o->pe_rows = c->tensor.pe_rows;
    o->pe_cols = c->tensor.pe_cols;
    o->clock_hz[TERN_ENGINE_TENSOR] = c->tensor.clock_hz;
    o->clock_hz[TERN_ENGINE_VECTOR] = c->vector.clock_hz;
    o->clock_hz[TERN_ENGINE_SCALAR] = c->scalar.clock_hz;
    o->clock_hz[TERN_ENGINE_GPSIMD] = c->gpsimd.clock_hz;
    o->clock_hz[TERN_ENGINE_SYNC] = c->scalar.clock_hz; /* not published; the simulator's choice too */
    /* MBU's denominator is one HBM stack's bandwidth, as Neuron Explorer defines it (aws-neuron-sdk
     * tools/neuron-explorer/profile-schema-reference.rst: "hbm_max_bandwidth is the maximum HBM bandwidth of a HBM
     * stack"), which is also what the simulator gives a core (sim/config.c). */
    o->hbm_bandwidth = chip && chip->hbm_stacks ? chip->hbm_bandwidth / chip->hbm_stacks : 0;
}

/* ---- trace writing ---- */

static void io_fail(tern_prof *p, const char *what, const char *path)
{
    if (!p->io_failed)
        snprintf(p->io_msg, sizeof p->io_msg, "profiler %s '%s': write failed: %s", what, path, strerror(errno));
    p->io_failed = 1;
}

static void trace_sep(tern_prof *p)
{
    /* the first element (process_name) is written without a comma at create */
    prof_out_mem(&p->out, ",\n", 2);
}

static unsigned engine_tid(unsigned e, unsigned sub)
{
    return 1 + e * ENGINE_SUBLANES + sub;
}

static unsigned queue_tid(unsigned q, unsigned sub)
{
    return TID_QUEUE0 + q * QUEUE_SUBLANES + sub;
}

static void name_track(tern_prof *p, unsigned tid, const char *base, unsigned sub)
{
    if (p->track_named[tid])
        return;
    p->track_named[tid] = 1;
    char name[64];
    if (sub)
        snprintf(name, sizeof name, "%s (%u)", base, sub + 1);
    else
        snprintf(name, sizeof name, "%s", base);
    trace_sep(p);
    prof_out_fmt(&p->out,
                 "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":%u,\"args\":{\"name\":\"%s\"}},\n"
                 "{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":1,\"tid\":%u,\"args\":{\"sort_index\":%u}}",
                 tid, name, tid, tid);
}

/* Pick a sub-lane free at `start`, trying `prefer` first (slices on one track must not overlap in Perfetto;
 * an instruction that starts before the previous one on its engine ended goes to another lane). */
static unsigned pick_sublane(int64_t *ends, unsigned n, unsigned prefer, int64_t start, int64_t end)
{
    unsigned pick = n - 1;
    for (unsigned k = 0; k < n; k++) {
        unsigned i = (prefer + k) % n;
        if (ends[i] <= start) {
            pick = i;
            break;
        }
    }
    if (end > ends[pick])
        ends[pick] = end;
    return pick;
}

#define OUT_LIT(w, lit) prof_out_mem((w), (lit), sizeof(lit) - 1)

/* Compact text of one access pattern, in the assembler's syntax (docs/isa.md): mem[start:num(:step)]+offset
 * (+rN):dtype[[step,num],...]. */
static void put_ap(prof_out *w, const char *key, const tern_ap *ap)
{
    OUT_LIT(w, ",\"");
    prof_out_str(w, key);
    OUT_LIT(w, "\":\"");
    prof_out_str(w, tern_mem_name((tern_mem)ap->mem));
    OUT_LIT(w, "[");
    prof_out_u64(w, ap->start_partition);
    OUT_LIT(w, ":");
    prof_out_u64(w, ap->num_partitions);
    if (ap->partition_step) {
        OUT_LIT(w, ":");
        prof_out_i64(w, ap->partition_step);
    }
    OUT_LIT(w, "]+");
    prof_out_hex(w, ap->offset);
    if (ap->offset_reg != TERN_REG_NONE) {
        OUT_LIT(w, "+r");
        prof_out_u64(w, ap->offset_reg);
    }
    OUT_LIT(w, ":");
    prof_out_str(w, tern_dtype_name((tern_dtype)ap->dtype));
    OUT_LIT(w, "[");
    for (unsigned d = 0; d < ap->ndims && d < TERN_AP_MAX_DIMS; d++) {
        prof_out_mem(w, d ? ",[" : "[", d ? 2 : 1);
        prof_out_i64(w, ap->dims[d].step);
        OUT_LIT(w, ",");
        prof_out_u64(w, ap->dims[d].num);
        OUT_LIT(w, "]");
    }
    OUT_LIT(w, "]\"");
}

static void put_operands(prof_out *w, const tern_instr *ins)
{
    static const char *const keys[TERN_INSTR_OPERANDS] = {"dst", "in0", "in1", "in2", "extra"};
    if (!ins)
        return;
    for (unsigned k = 0; k < TERN_INSTR_OPERANDS; k++)
        if (ins->ap[k].ndims && ins->ap[k].mem != TERN_MEM_NONE)
            put_ap(w, keys[k], &ins->ap[k]);
}

static const char *opcode_name(unsigned op)
{
    const tern_opcode_info *info = op < TERN_OP_COUNT ? tern_opcode_get((tern_opcode)op) : NULL;
    return info ? info->name : "?";
}

static void put_cycles(tern_prof *p, unsigned engine, int64_t dur)
{
    double hz = engine < TERN_ENGINE_COUNT ? p->o.clock_hz[engine] : 0;
    if (hz > 0) {
        OUT_LIT(&p->out, ",\"cycles\":");
        prof_out_u64(&p->out, (uint64_t)llround((double)dur * hz / 1e12));
    }
}

static void trace_slice(tern_prof *p, const tern_event *ev, unsigned engine, unsigned queue, unsigned op, int64_t s,
                        int64_t e)
{
    prof_out *w = &p->out;
    unsigned tid;
    if (ev->kind == TERN_EVENT_DMA) {
        unsigned sub = pick_sublane(p->queue_lane_end[queue], QUEUE_SUBLANES, 0, s, e);
        tid = queue_tid(queue, sub);
        if (!p->track_named[tid]) {
            char base[32];
            snprintf(base, sizeof base, "DMA q%u", queue);
            name_track(p, tid, base, sub);
        }
    } else {
        /* TensorE as AWS's profiler shows it: LoadStationary (and waits) on "TensorE", the MultiplyMoving that
         * runs under it on "TensorMatrix" */
        int matrix = engine == TERN_ENGINE_TENSOR && ev->kind == TERN_EVENT_INSTR &&
                     (op == TERN_OP_MULTIPLY_MOVING || op == TERN_OP_TRANSPOSE_PE);
        unsigned sub = pick_sublane(p->engine_lane_end[engine], ENGINE_SUBLANES, matrix ? 1 : 0, s, e);
        tid = engine_tid(engine, sub);
        if (engine == TERN_ENGINE_TENSOR && sub == 1)
            name_track(p, tid, "TensorMatrix", 0);
        else
            name_track(p, tid, ENGINE_TRACKS[engine], sub);
    }
    trace_sep(p);
    if (ev->kind == TERN_EVENT_WAIT) {
        OUT_LIT(w, "{\"name\":\"wait s");
        prof_out_u64(w, ev->wait_sem);
        OUT_LIT(w, ">=");
        prof_out_u64(w, ev->wait_value);
        OUT_LIT(w, "\",\"cat\":\"wait\"");
    } else {
        OUT_LIT(w, "{\"name\":\"");
        prof_out_str(w, opcode_name(op));
        OUT_LIT(w, "\",\"cat\":\"");
        prof_out_str(w, ev->kind == TERN_EVENT_DMA ? "dma" : prof_family_name(prof_family_of(op, (tern_engine)engine)));
        OUT_LIT(w, "\"");
    }
    OUT_LIT(w, ",\"ph\":\"X\",\"pid\":1,\"tid\":");
    prof_out_u64(w, tid);
    OUT_LIT(w, ",\"ts\":");
    prof_out_us(w, s);
    OUT_LIT(w, ",\"dur\":");
    prof_out_us(w, e - s);
    OUT_LIT(w, ",\"args\":{\"pc\":");
    prof_out_u64(w, ev->pc);
    if (ev->kind == TERN_EVENT_WAIT) {
        OUT_LIT(w, ",\"sem\":");
        prof_out_u64(w, ev->wait_sem);
        OUT_LIT(w, ",\"value\":");
        prof_out_u64(w, ev->wait_value);
        OUT_LIT(w, ",\"before\":\"");
        prof_out_str(w, opcode_name(op));
        OUT_LIT(w, "\"");
        put_cycles(p, engine, e - s);
    } else {
        if (ev->kind == TERN_EVENT_DMA) {
            OUT_LIT(w, ",\"engine\":\"");
            prof_out_str(w, ENGINE_TRACKS[engine]);
            OUT_LIT(w, "\",\"queue\":");
            prof_out_u64(w, queue);
        }
        put_operands(w, ev->ins);
        OUT_LIT(w, ",\"bytes\":");
        prof_out_u64(w, ev->bytes);
        if (ev->hbm_bytes) {
            OUT_LIT(w, ",\"hbm_bytes\":");
            prof_out_u64(w, ev->hbm_bytes);
        }
        if (ev->flops) {
            OUT_LIT(w, ",\"flops\":");
            prof_out_u64(w, ev->flops);
        }
        if (ev->kind == TERN_EVENT_INSTR)
            put_cycles(p, engine, e - s);
    }
    OUT_LIT(w, "}}");
    p->slices++;
}

/* The binned tail of an aggregated trace: one slice per used bin per track, named by its opcode when the bin
 * holds one kind, else "aggregated". */
static void trace_bins(tern_prof *p)
{
    prof_out *w = &p->out;
    const prof_grid *g = &p->tgrid;
    for (unsigned l = 0; l < g->nlanes; l++) {
        const prof_bin *bins = g->lane[l];
        if (!bins)
            continue;
        unsigned tid;
        char base[32];
        if (l < PROF_LANE_QUEUE0) {
            tid = engine_tid(l, 0);
            snprintf(base, sizeof base, "%s", ENGINE_TRACKS[l]);
        } else {
            tid = queue_tid(l - PROF_LANE_QUEUE0, 0);
            snprintf(base, sizeof base, "DMA q%u", l - PROF_LANE_QUEUE0);
        }
        name_track(p, tid, base, 0);
        for (unsigned i = 0; i < g->hi[l]; i++) {
            const prof_bin *b = &bins[i];
            if (!b->used)
                continue;
            double busy = 0;
            for (int fam = 0; fam < PROF_FAM_COUNT; fam++)
                busy += b->busy[fam];
            const char *name = b->mixed ? "aggregated" : b->op == PROF_OP_WAIT ? "wait" : opcode_name(b->op);
            trace_sep(p);
            prof_out_fmt(w, "{\"name\":\"%s\",\"cat\":\"aggregated\",\"ph\":\"X\",\"pid\":1,\"tid\":%u,\"ts\":", name,
                         tid);
            prof_out_us(w, b->first);
            OUT_LIT(w, ",\"dur\":");
            prof_out_us(w, b->last - b->first);
            prof_out_fmt(w, ",\"args\":{\"aggregated\":true,\"count\":%" PRIu32 ",\"busy_us\":", b->count);
            prof_out_us(w, (int64_t)(busy + 0.5));
            for (int fam = 0; fam < PROF_FAM_COUNT; fam++)
                if (b->busy[fam] && b->mixed) {
                    prof_out_fmt(w, ",\"%s_us\":", prof_family_name((prof_family)fam));
                    prof_out_us(w, (int64_t)(b->busy[fam] + 0.5f));
                }
            prof_out_fmt(w, ",\"bytes\":%" PRIu64 ",\"flops\":%" PRIu64 "}}", b->bytes, b->flops);
            p->slices++;
        }
    }
}

/* ---- lifecycle ---- */

tern_status tern_prof_create(const tern_prof_opts *o, tern_prof **out, tern_error *err)
{
    *out = NULL;
    if (!o)
        return tern_error_set(err, TERN_ERR_INVALID, "profiler: no options");
    for (int e = 0; e < TERN_ENGINE_COUNT; e++)
        if (!(o->clock_hz[e] >= 0))
            return tern_error_set(err, TERN_ERR_INVALID, "profiler: %s clock %g Hz must be >= 0", ENGINE_TRACKS[e],
                                  o->clock_hz[e]);
    if (!(o->hbm_bandwidth >= 0) || !(o->model_flops >= 0))
        return tern_error_set(err, TERN_ERR_INVALID, "profiler: HBM bandwidth %g and model FLOPs %g must be >= 0",
                              o->hbm_bandwidth, o->model_flops);
    tern_prof *p = calloc(1, sizeof *p);
    if (!p)
        return tern_error_set(err, TERN_ERR_NOMEM, "profiler: out of memory");
    p->o = *o;
    p->o.name[sizeof p->o.name - 1] = 0;
    prof_json_escape(p->name_json, sizeof p->name_json, p->o.name);
    p->max_slices = o->max_trace_events ? o->max_trace_events : TERN_PROF_DEFAULT_MAX_TRACE_EVENTS;
    tern_status st = TERN_OK;
    if (o->svg_path) {
        p->svg = fopen(o->svg_path, "w");
        if (!p->svg) {
            st = tern_error_set(err, TERN_ERR_IO, "profiler SVG '%s': cannot open for writing: %s", o->svg_path,
                                strerror(errno));
            goto fail;
        }
        if (prof_grid_init(&p->sgrid, PROF_LANES, SVG_BINS)) {
            st = tern_error_set(err, TERN_ERR_NOMEM, "profiler: out of memory");
            goto fail;
        }
        p->svg_enabled = 1;
    }
    if (o->trace_path) {
        p->trace = fopen(o->trace_path, "w");
        if (!p->trace) {
            st = tern_error_set(err, TERN_ERR_IO, "profiler trace '%s': cannot open for writing: %s", o->trace_path,
                                strerror(errno));
            goto fail;
        }
        p->out.f = p->trace;
        p->out.cap = 1u << 20;
        p->out.buf = malloc(p->out.cap);
        if (!p->out.buf) {
            st = tern_error_set(err, TERN_ERR_NOMEM, "profiler: out of memory");
            goto fail;
        }
        prof_out_fmt(&p->out,
                     "{\"traceEvents\":[\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"tid\":0,"
                     "\"args\":{\"name\":\"%s\"}}",
                     p->name_json);
    }
    *out = p;
    return TERN_OK;
fail:
    tern_prof_free(p);
    return st;
}

void tern_prof_free(tern_prof *p)
{
    if (!p)
        return;
    if (p->trace)
        fclose(p->trace);
    if (p->svg)
        fclose(p->svg);
    free(p->out.buf);
    prof_grid_free(&p->tgrid);
    prof_grid_free(&p->sgrid);
    free(p->dma_iv);
    free(p);
}

static void dma_interval(tern_prof *p, unsigned q, int64_t s, int64_t e)
{
    size_t last = p->queue_last[q];
    if (last) {
        interval *iv = &p->dma_iv[last - 1];
        if (s >= iv->s && s <= iv->e) { /* in order and touching: extend (the usual case, bounded memory) */
            if (e > iv->e)
                iv->e = e;
            return;
        }
    }
    if (p->dma_n == p->dma_cap) {
        size_t cap = p->dma_cap ? p->dma_cap * 2 : 1024;
        interval *n = realloc(p->dma_iv, cap * sizeof *n);
        if (!n) {
            p->io_failed = 1;
            snprintf(p->io_msg, sizeof p->io_msg, "profiler: out of memory");
            return;
        }
        p->dma_iv = n;
        p->dma_cap = cap;
    }
    p->dma_iv[p->dma_n++] = (interval){s, e};
    p->queue_last[q] = p->dma_n;
}

void tern_prof_event(void *ctx, const tern_event *ev)
{
    tern_prof *p = ctx;
    if (!p || !ev || p->finished)
        return;
    int64_t s = ev->start_ps < 0 ? 0 : ev->start_ps;
    int64_t e = ev->end_ps < s ? s : ev->end_ps;
    int64_t dur = e - s;
    unsigned engine = (unsigned)ev->engine < TERN_ENGINE_COUNT ? (unsigned)ev->engine : TERN_ENGINE_SYNC;
    unsigned op = ev->ins && ev->ins->opcode < TERN_OP_COUNT ? ev->ins->opcode : TERN_OP_NOP;
    unsigned queue = ev->queue < TERN_PROF_MAX_QUEUES ? ev->queue : TERN_PROF_MAX_QUEUES - 1;
    if (e > p->max_end)
        p->max_end = e;

    unsigned lane;
    prof_family fam;
    unsigned bin_op = op;
    switch (ev->kind) {
    case TERN_EVENT_DMA:
        p->dma_transfers++;
        p->dma_bytes += ev->bytes;
        p->hbm_bytes += ev->hbm_bytes;
        p->queue_used[queue] = 1;
        if (dur > 0)
            dma_interval(p, queue, s, e);
        p->top_count[op][TERN_ENGINE_COUNT]++;
        p->top_ps[op][TERN_ENGINE_COUNT] += dur;
        lane = PROF_LANE_QUEUE0 + queue;
        fam = PROF_FAM_DMA;
        break;
    case TERN_EVENT_WAIT:
        p->wait_ps[engine] += dur;
        lane = engine;
        fam = PROF_FAM_WAIT;
        bin_op = PROF_OP_WAIT;
        if (dur == 0)
            return; /* a wait that did not block is not a wait */
        break;
    default: /* TERN_EVENT_INSTR */
        p->instrs[engine]++;
        p->flops[engine] += ev->flops;
        p->top_count[op][engine]++;
        p->top_ps[op][engine] += dur;
        /* streamed union of the engine's busy intervals (events arrive in order of start per engine) */
        if (dur > 0) {
            if (!p->have_cur[engine]) {
                p->have_cur[engine] = 1;
                p->cur_s[engine] = s;
                p->cur_e[engine] = e;
            } else if (s <= p->cur_e[engine]) {
                if (e > p->cur_e[engine])
                    p->cur_e[engine] = e;
            } else {
                p->busy[engine] += p->cur_e[engine] - p->cur_s[engine];
                p->cur_s[engine] = s;
                p->cur_e[engine] = e;
            }
        }
        lane = engine;
        fam = prof_family_of(op, (tern_engine)engine);
        break;
    }
    if (p->svg_enabled && prof_grid_add(&p->sgrid, lane, s, e, fam, bin_op, ev->bytes, ev->flops)) {
        p->io_failed = 1;
        snprintf(p->io_msg, sizeof p->io_msg, "profiler: out of memory");
    }
    if (!p->trace)
        return;
    if (p->slices < p->max_slices) {
        trace_slice(p, ev, engine, queue, op, s, e);
        return;
    }
    if (!p->aggregated) {
        p->aggregated = 1;
        if (prof_grid_init(&p->tgrid, PROF_LANES, TRACE_BINS)) {
            p->io_failed = 1;
            snprintf(p->io_msg, sizeof p->io_msg, "profiler: out of memory");
        }
    }
    if (p->tgrid.lane && prof_grid_add(&p->tgrid, lane, s, e, fam, bin_op, ev->bytes, ev->flops)) {
        p->io_failed = 1;
        snprintf(p->io_msg, sizeof p->io_msg, "profiler: out of memory");
    }
}

static int cmp_interval(const void *a, const void *b)
{
    const interval *x = a, *y = b;
    return x->s < y->s ? -1 : x->s > y->s ? 1 : 0;
}

static int cmp_top(const void *a, const void *b)
{
    const tern_prof_top *x = a, *y = b;
    if (x->total_ps != y->total_ps)
        return x->total_ps > y->total_ps ? -1 : 1;
    if (x->count != y->count)
        return x->count > y->count ? -1 : 1;
    if (x->opcode != y->opcode)
        return x->opcode < y->opcode ? -1 : 1;
    return x->engine < y->engine ? -1 : x->engine > y->engine;
}

static double pct(double part, double whole)
{
    return whole > 0 ? 100.0 * part / whole : 0.0;
}

static void summarise(tern_prof *p, const tern_run_stats *stats, tern_prof_summary *s)
{
    memset(s, 0, sizeof *s);
    snprintf(s->name, sizeof s->name, "%s", p->o.name);
    s->total_ps = p->max_end;
    if (stats && stats->time_ps > s->total_ps)
        s->total_ps = stats->time_ps;
    const double total = (double)s->total_ps;
    for (int e = 0; e < TERN_ENGINE_COUNT; e++) {
        s->busy_ps[e] = p->busy[e] + (p->have_cur[e] ? p->cur_e[e] - p->cur_s[e] : 0);
        s->active_pct[e] = pct((double)s->busy_ps[e], total);
        s->wait_ps[e] = p->wait_ps[e];
        s->instructions[e] = p->instrs[e];
        s->engine_flops[e] = p->flops[e];
        s->instructions_total += p->instrs[e];
    }
    if (!s->instructions_total && stats)
        for (int e = 0; e < TERN_ENGINE_COUNT; e++) {
            s->instructions[e] = stats->instructions[e];
            s->instructions_total += stats->instructions[e];
        }
    /* DMA busy: union over every queue */
    if (p->dma_n)
        qsort(p->dma_iv, p->dma_n, sizeof *p->dma_iv, cmp_interval);
    int64_t cs = 0, ce = -1;
    for (size_t i = 0; i < p->dma_n; i++) {
        const interval *iv = &p->dma_iv[i];
        if (ce < 0 || iv->s > ce) {
            if (ce >= 0)
                s->dma_busy_ps += ce - cs;
            cs = iv->s;
            ce = iv->e;
        } else if (iv->e > ce) {
            ce = iv->e;
        }
    }
    if (ce >= 0)
        s->dma_busy_ps += ce - cs;
    /* every queue's list is now mixed into one sorted list: later events must not coalesce into it */
    memset(p->queue_last, 0, sizeof p->queue_last);
    s->dma_active_pct = pct((double)s->dma_busy_ps, total);
    s->dma_bytes = p->dma_bytes;
    s->dma_transfers = p->dma_transfers;
    s->hbm_bytes = p->hbm_bytes;
    if (!s->dma_transfers && stats) {
        s->dma_bytes = stats->dma_bytes;
        s->dma_transfers = stats->dma_transfers;
    }
    if (!s->hbm_bytes && stats)
        s->hbm_bytes = stats->hbm_bytes;
    s->dma_avg_bytes = s->dma_transfers ? (double)s->dma_bytes / (double)s->dma_transfers : 0;
    for (int q = 0; q < TERN_PROF_MAX_QUEUES; q++)
        s->dma_queues_used += p->queue_used[q];

    s->hardware_flops = (double)p->flops[TERN_ENGINE_TENSOR];
    if (s->hardware_flops == 0 && stats)
        s->hardware_flops = 2.0 * (double)stats->macs;
    s->model_flops = p->o.model_flops > 0 ? p->o.model_flops : s->hardware_flops;
    s->peak_flops = 2.0 * (double)p->o.pe_rows * (double)p->o.pe_cols * p->o.clock_hz[TERN_ENGINE_TENSOR];
    s->hbm_bandwidth = p->o.hbm_bandwidth;
    const double secs = total * 1e-12;
    s->hfu_pct = pct(s->hardware_flops, s->peak_flops * secs);
    s->mfu_pct = pct(s->model_flops, s->peak_flops * secs);
    s->mbu_pct = pct((double)s->hbm_bytes, s->hbm_bandwidth * secs);

    tern_prof_top all[TERN_OP_COUNT * (TERN_ENGINE_COUNT + 1)];
    unsigned n = 0;
    for (unsigned op = 0; op < TERN_OP_COUNT; op++)
        for (unsigned e = 0; e <= TERN_ENGINE_COUNT; e++)
            if (p->top_count[op][e])
                all[n++] = (tern_prof_top){(tern_opcode)op, (tern_engine)e, p->top_count[op][e], p->top_ps[op][e],
                                           pct((double)p->top_ps[op][e], total)};
    qsort(all, n, sizeof all[0], cmp_top);
    s->top_count = n < TERN_PROF_TOP_N ? n : TERN_PROF_TOP_N;
    memcpy(s->top, all, s->top_count * sizeof all[0]);
}

tern_status tern_prof_finish(tern_prof *p, const tern_run_stats *stats, tern_prof_summary *out, tern_error *err)
{
    if (!p || p->finished)
        return tern_error_set(err, TERN_ERR_INVALID, "profiler: finish called twice (or on no profiler)");
    p->finished = 1;
    tern_prof_summary s;
    summarise(p, stats, &s);
    if (p->trace) {
        if (p->aggregated)
            trace_bins(p);
        s.trace_slices = p->slices;
        s.trace_aggregated = p->aggregated;
        s.trace_bin_ps = p->aggregated ? p->tgrid.width : 0;
        prof_out *w = &p->out;
        if (p->aggregated) {
            trace_sep(p);
            prof_out_fmt(w,
                         "{\"name\":\"process_labels\",\"ph\":\"M\",\"pid\":1,\"tid\":0,\"args\":{\"labels\":"
                         "\"aggregated after %" PRIu64 " slices into bins of %" PRId64 " ps\"}}",
                         p->max_slices, p->tgrid.width);
        }
        prof_out_fmt(w,
                     "\n],\n\"displayTimeUnit\":\"ns\",\n\"otherData\":{\"generator\":\"tern %s\","
                     "\"machine\":\"%s\",\"time_unit\":\"us\",\"total_us\":",
                     tern_version(), p->name_json);
        prof_out_us(w, s.total_ps);
        prof_out_fmt(w, ",\"slices\":%" PRIu64 ",\"max_trace_events\":%" PRIu64 ",\"aggregated\":%s", p->slices,
                     p->max_slices, p->aggregated ? "true" : "false");
        if (p->aggregated) {
            prof_out_str(w, ",\"aggregation\":\"events past max_trace_events binned per track; bin_us is the bin "
                            "width\",\"bin_us\":");
            prof_out_us(w, p->tgrid.width);
        }
        prof_out_str(w, "}}\n");
        prof_out_flush(w);
        if (w->failed)
            io_fail(p, "trace", p->o.trace_path);
        if (ferror(p->trace))
            io_fail(p, "trace", p->o.trace_path);
        if (fclose(p->trace))
            io_fail(p, "trace", p->o.trace_path);
        p->trace = NULL;
    }
    if (p->svg) {
        if (prof_svg_write(p->svg, &p->sgrid, &s, p->o.svg_width ? p->o.svg_width : 1600) || ferror(p->svg))
            io_fail(p, "SVG", p->o.svg_path);
        if (fclose(p->svg))
            io_fail(p, "SVG", p->o.svg_path);
        p->svg = NULL;
    }
    if (out)
        *out = s;
    if (p->io_failed)
        return tern_error_set(err, TERN_ERR_IO, "%s", p->io_msg);
    return TERN_OK;
}

/* ---- the printed summary ---- */

static void fmt_time(char *buf, size_t cap, int64_t ps)
{
    double v = (double)ps;
    if (ps >= 1000000000)
        snprintf(buf, cap, "%.3f ms", v * 1e-9);
    else if (ps >= 1000000)
        snprintf(buf, cap, "%.3f us", v * 1e-6);
    else
        snprintf(buf, cap, "%.3f ns", v * 1e-3);
}

static void fmt_bytes(char *buf, size_t cap, double b)
{
    if (b >= 1e9)
        snprintf(buf, cap, "%.2f GB", b * 1e-9);
    else if (b >= 1e6)
        snprintf(buf, cap, "%.2f MB", b * 1e-6);
    else if (b >= 1e3)
        snprintf(buf, cap, "%.2f kB", b * 1e-3);
    else
        snprintf(buf, cap, "%.0f B", b);
}

void tern_prof_summary_print(FILE *f, const tern_prof_summary *s)
{
    char t[32], t2[32], b[32];
    fmt_time(t, sizeof t, s->total_ps);
    fprintf(f, "profile of %s\n", s->name);
    fprintf(f, "  total time      %s (%" PRIu64 " instructions)\n", t, s->instructions_total);
    fprintf(f, "  %-9s %14s %8s %10s %14s\n", "engine", "busy", "active", "instrs", "sem wait");
    for (int e = 0; e < TERN_ENGINE_COUNT; e++) {
        fmt_time(t, sizeof t, s->busy_ps[e]);
        fmt_time(t2, sizeof t2, s->wait_ps[e]);
        fprintf(f, "  %-9s %14s %7.2f%% %10" PRIu64 " %14s\n", ENGINE_TRACKS[e], t, s->active_pct[e],
                s->instructions[e], t2);
    }
    fmt_time(t, sizeof t, s->dma_busy_ps);
    fmt_bytes(b, sizeof b, (double)s->dma_bytes);
    fprintf(f, "  %-9s %14s %7.2f%% %10" PRIu64 " transfers on %u queues, %s", "DMA", t, s->dma_active_pct,
            s->dma_transfers, s->dma_queues_used, b);
    fmt_bytes(b, sizeof b, s->dma_avg_bytes);
    fprintf(f, ", average %s\n", b);
    if (s->peak_flops > 0)
        fprintf(f, "  MFU %.2f%%  HFU %.2f%%  (model %.4g FLOP, hardware %.4g FLOP, peak %.4g TFLOP/s)\n", s->mfu_pct,
                s->hfu_pct, s->model_flops, s->hardware_flops, s->peak_flops * 1e-12);
    else
        fprintf(f, "  MFU/HFU n/a (no PE array figures)\n");
    fmt_bytes(b, sizeof b, (double)s->hbm_bytes);
    if (s->hbm_bandwidth > 0)
        fprintf(f, "  MBU %.2f%%  (HBM %s at %.4g GB/s available to the core)\n", s->mbu_pct, b,
                s->hbm_bandwidth * 1e-9);
    else
        fprintf(f, "  MBU n/a (HBM %s; the machine gives no HBM bandwidth: use a chip or instance)\n", b);
    if (s->trace_slices)
        fprintf(f, "  trace: %" PRIu64 " slices%s\n", s->trace_slices,
                s->trace_aggregated ? " (aggregated past the limit)" : "");
    if (s->top_count) {
        fprintf(f, "  top instructions by time:\n");
        fprintf(f, "    %-24s %-8s %10s %14s %8s\n", "instruction", "engine", "count", "total", "% time");
        for (unsigned i = 0; i < s->top_count; i++) {
            const tern_prof_top *x = &s->top[i];
            fmt_time(t, sizeof t, x->total_ps);
            fprintf(f, "    %-24s %-8s %10" PRIu64 " %14s %7.2f%%\n", opcode_name(x->opcode),
                    x->engine < TERN_ENGINE_COUNT ? ENGINE_TRACKS[x->engine] : "DMA", x->count, t, x->percent);
        }
    }
}
