/* Running a program on a core: static validation of every instruction against the core's rules, then an
 * event-driven scheduler over five in-order sequencers. Each engine's next instruction can start at the
 * latest of: its sequencer being free (in order, after the previous instruction's occupancy), the time its
 * semaphore wait was satisfied (semaphore increments are logged with their times), and the shared resources it
 * needs (TensorE's LoadStationary/MultiplyMoving pipelines, v2's SBUF/PSUM ports, DMA engines, HBM). The
 * instruction with the earliest possible start is committed next, executed (functional mode) and timed, so
 * idle time costs nothing to simulate, and the functional results and the predicted times come from one pass.
 * Commit order respects every semaphore, so results never depend on it; timing-only mode runs the same
 * schedule without arithmetic or memory contents and predicts exactly the same times. Cost rules: timing.c. */
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/core_internal.h"
#include "sim/exec_lane.h"
#include "sim/rules.h"
#include "sim/schedule.h"
#include "sim/timing.h"

static int32_t *reg_ptr(tern_core *c, tern_engine e, unsigned r)
{
    return &c->registers[(size_t)e * c->cfg.num_registers + r];
}

static int cmp_holds(tern_cmp_op op, int32_t a, int32_t b)
{
    switch (op) {
    case TERN_CMP_ALWAYS: return 1;
    case TERN_CMP_EQ: return a == b;
    case TERN_CMP_NE: return a != b;
    case TERN_CMP_LT: return a < b;
    case TERN_CMP_LE: return a <= b;
    case TERN_CMP_GT: return a > b;
    case TERN_CMP_GE: return a >= b;
    case TERN_CMP_COUNT: break;
    }
    return 0;
}

/* The executor of each opcode, generated from the instruction table: the FAMILY column picks exec_op_<ID>
 * (core_internal.h), or none for sequencer control, which run_instr executes itself (exec_control). */
#define EXEC_OF_PE(id) exec_op_##id
#define EXEC_OF_VECTOR(id) exec_op_##id
#define EXEC_OF_ACTIVATION(id) exec_op_##id
#define EXEC_OF_GPSIMD(id) exec_op_##id
#define EXEC_OF_TEXT(id) exec_op_##id
#define EXEC_OF_DMA(id) exec_op_##id
#define EXEC_OF_CONTROL(id) NULL
#define EXEC_OF_COLLECTIVE(id) exec_op_##id /* coll_instr.c: refuses a single-core run; rank_run.c runs it */
static const exec_fn executor_of[TERN_OP_COUNT] = {
#define OP(id, name, family, flags, engines, operands, cost, sem) [TERN_OP_##id] = EXEC_OF_##family(id),
#include "tern/isa_table.def"
#undef OP
};

tern_status tern_core_validate(const tern_core *core, const tern_program *prog, tern_error *err)
{
    for (unsigned e = 0; e < TERN_ENGINE_COUNT; e++) {
        const tern_stream *s = &prog->streams[e];
        for (size_t pc = 0; pc < s->count; pc++) {
            exec_ctx cx = {(tern_engine)e, pc, 0, NULL, NULL};
            tern_status st = rules_check_instr(core, &cx, &s->instrs[pc], s->count, err);
            if (st)
                return st;
        }
    }
    return TERN_OK;
}

#define NEVER INT64_MAX

/* Semaphore history: increments with their times, sorted by time, with running values. */
typedef struct {
    int64_t t;
    uint32_t value; /* the semaphore's value from t on */
} sem_point;

typedef struct {
    sem_point *pts;
    size_t n, cap;
    uint32_t base; /* value when the run started */
} sem_log;

typedef struct {
    size_t pc;
    uint64_t seq;
    int done;
    int in_barrier;  /* barrier: already signalled, now waiting */
    int64_t free_ps; /* the sequencer can start its next instruction from here */
} seq_state;

typedef struct {
    tern_core *core;
    const tern_program *prog;
    tern_run_stats *stats;
    int timing_only;
    seq_state ss[TERN_ENGINE_COUNT];
    sem_log *sems;
    /* TensorE: the stationary load and the moving stream overlap (background LoadStationary). */
    int64_t ls_free, mm_free, last_mm_start, last_ls_end;
    uint32_t stat_m;
    uint8_t stat_dtype;
    /* NeuronCore-v2 shared ports: VectorE/GpSimdE on SBUF, VectorE/ScalarE on PSUM. */
    int64_t sbuf_vg_free, psum_vs_free;
    /* DMA: per engine, the time its data path is next free; per engine and queue, the time the queue's ring
     * takes its next transfer and the end of the queue's data on the engine (for round-robin service). */
    unsigned dma_E, dma_Q;
    int64_t *dma_free, *ring_free, *qdata_end;
    int64_t queue_done[256]; /* completion of the last transfer on each DMA queue: queues complete in order */
    int64_t hbm_free;
    int64_t dma_union_end;
    int64_t tensor_busy_until; /* LoadStationary overlaps MultiplyMoving: busy time is their union */
    int64_t wake_ps;           /* semaphore wake latency (machine file) */
    timing_raw raw[TERN_ENGINE_COUNT]; /* recent writes per engine, for read-after-write latency */
    uint64_t elements;         /* work so far, for the max_elements guard */
    sched_coll_fn coll_fn;     /* multi-rank runs (rank_run.c): a collective instruction joins its collective */
    void *coll_ctx;
    uint64_t total;            /* instructions committed, for the max_instructions guard */
    exec_lane *lane;           /* functional single-core runs: the background lane (exec_lane.c) */
    unsigned pick;             /* the engine sched_peek found */
    int64_t pick_t;
    /* Each engine's candidate time as last computed, while nothing it depends on has changed since (cand_ok):
     * its own commits, an increment of the semaphore its next instruction waits for, the shared ports. */
    int64_t cand[TERN_ENGINE_COUNT];
    uint8_t cand_ok[TERN_ENGINE_COUNT];
    /* Multi-rank runs: the HBM shared with the chip's collective engines (rank_run.c). hres: this core's DMA HBM
     * reservations [s, e) that may still overlap a later collective; win: each collective's data window on this
     * core's HBM [a, b) and the HBM work it needs there (ps at the core's HBM bandwidth), in time order. */
    struct { int64_t s, e; } *hres;
    size_t nres, res_head, res_cap;
    struct { int64_t a, b, work; } *win;
    size_t nwin, win_head, win_cap;
    int oom;
} runner;

static tern_status sem_add(runner *r, unsigned s, uint32_t amount, int64_t t, tern_error *err)
{
    sem_log *L = &r->sems[s];
    if (L->n == L->cap) {
        size_t cap = L->cap ? L->cap * 2 : 64;
        sem_point *p = realloc(L->pts, cap * sizeof *p);
        if (!p)
            return tern_error_set(err, TERN_ERR_NOMEM, "run: out of memory for semaphore %u's history", s);
        L->pts = p;
        L->cap = cap;
    }
    size_t i = L->n;
    while (i > 0 && L->pts[i - 1].t > t) { /* increments usually arrive in time order */
        L->pts[i] = L->pts[i - 1];
        L->pts[i].value += amount;
        i--;
    }
    uint32_t before = i > 0 ? L->pts[i - 1].value : L->base;
    L->pts[i].t = t;
    L->pts[i].value = before + amount;
    L->n++;
    r->core->semaphores[s] += amount;
    for (unsigned e = 0; e < TERN_ENGINE_COUNT; e++) /* whose next instruction waits for s: its time again */
        if (r->cand_ok[e] && !r->ss[e].done) {
            const tern_instr *ins = &r->prog->streams[e].instrs[r->ss[e].pc];
            if (ins->wait_sem == s || (ins->opcode == TERN_OP_BARRIER && r->ss[e].in_barrier && ins->signal_sem == s))
                r->cand_ok[e] = 0;
        }
    return TERN_OK;
}

/* When semaphore s reached v (NEVER if not among the increments committed so far). */
static int64_t sem_time(const runner *r, unsigned s, uint32_t v)
{
    const sem_log *L = &r->sems[s];
    if (L->base >= v)
        return 0;
    size_t lo = 0, hi = L->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (L->pts[mid].value >= v)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo < L->n ? L->pts[lo].t : NEVER;
}

static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

static int touches(const tern_instr *ins, tern_mem m)
{
    for (int s = 0; s < TERN_INSTR_OPERANDS; s++)
        if (ins->ap[s].ndims && ins->ap[s].mem == m)
            return 1;
    return 0;
}

static int is_tensor_op(tern_opcode op)
{
    return tern_opcode_get(op)->family == TERN_ISA_FAMILY_PE;
}

static int is_dma_op(tern_opcode op)
{
    return tern_opcode_get(op)->family == TERN_ISA_FAMILY_DMA;
}

/* Does this instruction use v2's shared SBUF (VectorE/GpSimdE) or PSUM (VectorE/ScalarE) port? */
static int uses_sbuf_port(unsigned e, const tern_instr *ins)
{
    return (e == TERN_ENGINE_VECTOR || e == TERN_ENGINE_GPSIMD) && touches(ins, TERN_MEM_SBUF);
}
static int uses_psum_port(unsigned e, const tern_instr *ins)
{
    return (e == TERN_ENGINE_VECTOR || e == TERN_ENGINE_SCALAR) && touches(ins, TERN_MEM_PSUM);
}

/* The earliest time engine e's next instruction can start, or NEVER while it waits on a semaphore no committed
 * instruction will satisfy yet. */
static int64_t candidate(const runner *r, unsigned e)
{
    const seq_state *q = &r->ss[e];
    const tern_instr *ins = &r->prog->streams[e].instrs[q->pc];
    tern_opcode op = (tern_opcode)ins->opcode;
    int64_t t = q->free_ps;
    if (ins->wait_sem != TERN_SEM_NONE) {
        int64_t w = sem_time(r, ins->wait_sem, ins->wait_value);
        if (w == NEVER)
            return NEVER;
        /* satisfied by an increment during this run: the waiter wakes a little after it */
        if (r->sems[ins->wait_sem].base < ins->wait_value)
            w += r->wake_ps;
        t = max64(t, w);
    }
    if (op == TERN_OP_BARRIER && q->in_barrier) {
        int64_t w = sem_time(r, ins->signal_sem, (uint32_t)ins->imm_i0 * TERN_ENGINE_COUNT);
        if (w == NEVER)
            return NEVER;
        t = max64(t, w);
    }
    /* read-after-write on the same engine: a read of what the previous instructions wrote waits for the latency */
    if (timing_is_compute_op(op) && r->core->cfg.timing.raw_latency[e] > 0)
        t = max64(t, timing_raw_ready(&r->raw[e], ins));
    /* TensorE's two pipelines (the PE family): which of them the instruction waits for */
    if (op == TERN_OP_LOAD_STATIONARY)
        t = max64(t, max64(r->ls_free, r->last_mm_start));
    else if (op == TERN_OP_MULTIPLY_MOVING)
        t = max64(t, max64(r->mm_free, r->last_ls_end));
    else if (op == TERN_OP_TRANSPOSE_PE)
        t = max64(t, max64(max64(r->ls_free, r->mm_free), r->last_ls_end));
    if (r->core->cfg.timing.sbuf_port_conflicts && timing_is_compute_op(op) && !is_tensor_op(op)) {
        if (uses_sbuf_port(e, ins))
            t = max64(t, r->sbuf_vg_free);
        if (uses_psum_port(e, ins))
            t = max64(t, r->psum_vs_free);
    }
    return t;
}

static void describe_block(const runner *r, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (unsigned e = 0; e < TERN_ENGINE_COUNT; e++) {
        const seq_state *q = &r->ss[e];
        if (q->done)
            continue;
        const tern_instr *ins = &r->prog->streams[e].instrs[q->pc];
        unsigned sem = ins->wait_sem;
        uint32_t want = ins->wait_value;
        if (ins->opcode == TERN_OP_BARRIER && q->in_barrier) {
            sem = ins->signal_sem;
            want = (uint32_t)ins->imm_i0 * TERN_ENGINE_COUNT;
        }
        int n = snprintf(buf + used, len - used, "%s%s #%zu (%s) waits for semaphore %u >= %u (now %u)",
                         used ? "; " : "", tern_engine_name((tern_engine)e), q->pc,
                         tern_opcode_get((tern_opcode)ins->opcode)->name, sem, want, tern_core_semaphore(r->core, sem));
        if (n < 0 || (size_t)n >= len - used)
            break;
        used += (size_t)n;
    }
}

static void emit(const runner *r, tern_event_kind kind, unsigned e, size_t pc, const tern_instr *ins, int64_t start,
                 int64_t end, uint64_t flops, uint64_t hbm, uint64_t bytes)
{
    if (!r->core->opts.on_event)
        return;
    tern_event ev;
    memset(&ev, 0, sizeof ev);
    ev.kind = kind;
    ev.engine = (tern_engine)e;
    ev.queue = ins->queue;
    ev.pc = pc;
    ev.ins = ins;
    ev.start_ps = start;
    ev.end_ps = end;
    ev.flops = flops;
    ev.hbm_bytes = hbm;
    ev.bytes = bytes;
    if (kind == TERN_EVENT_WAIT) {
        ev.wait_sem = ins->opcode == TERN_OP_BARRIER ? ins->signal_sem : ins->wait_sem;
        ev.wait_value = ins->opcode == TERN_OP_BARRIER ? (uint32_t)ins->imm_i0 * TERN_ENGINE_COUNT : ins->wait_value;
    }
    r->core->opts.on_event(r->core->opts.event_ctx, &ev);
}

/* Elementwise work an instruction does, for the profiler: its output elements. */
static uint64_t elem_ops(const tern_instr *ins)
{
    const tern_ap *d = &ins->ap[TERN_AP_DST];
    return d->ndims ? (uint64_t)d->num_partitions * tern_ap_free_elems(d) : 0;
}

/* Work an instruction does, for the max_elements guard: partitions x free elements of every access pattern in use,
 * from the dims themselves and saturating, so an enormous pattern counts as too much work rather than wrapping to
 * little. */
static uint64_t work_elements(const tern_instr *ins)
{
    uint64_t total = 0;
    for (unsigned k = 0; k < TERN_INSTR_OPERANDS; k++) {
        const tern_ap *a = &ins->ap[k];
        uint64_t n = a->num_partitions ? a->num_partitions : 1;
        if (!a->ndims)
            continue;
        for (unsigned d = 0; d < a->ndims && d < TERN_AP_MAX_DIMS; d++)
            if (__builtin_mul_overflow(n, (uint64_t)a->dims[d].num, &n))
                return UINT64_MAX;
        if (__builtin_add_overflow(total, n, &total))
            return UINT64_MAX;
    }
    return total;
}

/* Control instructions' effects on registers; returns the next pc. */
static size_t exec_control(tern_core *c, unsigned e, const tern_instr *ins, size_t pc)
{
    /* Only these three of the CONTROL family touch registers or the pc; semaphores and halt are run_instr's. */
    TERN_ASSERT(tern_opcode_is_control(ins->opcode));
    if (ins->opcode == TERN_OP_REG_SET) {
        *reg_ptr(c, (tern_engine)e, ins->rd) = ins->imm_i0;
    } else if (ins->opcode == TERN_OP_REG_ALU) {
        int32_t b = (ins->flags & TERN_FLAG_IMM_B) ? ins->imm_i0 : *reg_ptr(c, (tern_engine)e, ins->rb);
        *reg_ptr(c, (tern_engine)e, ins->rd) =
            alu_apply_i32((tern_alu_op)ins->op0, *reg_ptr(c, (tern_engine)e, ins->ra), b);
    } else if (ins->opcode == TERN_OP_BRANCH) {
        int32_t b = (ins->flags & TERN_FLAG_IMM_B) ? ins->imm_i1 : *reg_ptr(c, (tern_engine)e, ins->rb);
        if (cmp_holds((tern_cmp_op)ins->op0, *reg_ptr(c, (tern_engine)e, ins->ra), b))
            return (size_t)ins->imm_i0;
    }
    return pc + 1;
}

/* The end of w ps of HBM work (at the core's full HBM bandwidth) that starts at hs, when collectives share the
 * HBM (multi-rank runs). Inside a collective's data window [a, b), where the collective needs f = work / (b - a) of
 * the bandwidth, the stack is split in proportion to the demands (the DMA's full rate against f): the DMA's HBM
 * work progresses at 1 / (1 + f), so each ps of it inside the window takes 1 + f. Outside every window nothing
 * changes. hs never decreases (hbm_free only grows), so windows that end before it are dropped. */
static int64_t hbm_serve(runner *r, int64_t hs, int64_t w)
{
    while (r->win_head < r->nwin && r->win[r->win_head].b <= hs)
        r->win_head++;
    int64_t cur = hs;
    for (size_t k = r->win_head; k < r->nwin && w > 0; k++) {
        int64_t a = r->win[k].a, b = r->win[k].b, work = r->win[k].work;
        if (cur < a) {
            int64_t run = w < a - cur ? w : a - cur;
            cur += run;
            w -= run;
            if (!w)
                break;
        }
        double g = (double)(b - a + work) / (double)(b - a); /* 1 + f */
        double need = (double)w * g;
        if (need <= (double)(b - cur)) {
            cur += (int64_t)llround(need);
            w = 0;
            break;
        }
        int64_t part = (int64_t)((double)(b - cur) / g);
        w -= part < w ? part : w;
        cur = b;
    }
    return cur + w;
}

/* Remember a DMA's HBM reservation [s, e) for the collectives that may still overlap it; reservations that end
 * before the current commit's start can overlap none (a collective starts after every commit so far). */
static void hbm_note(runner *r, int64_t s, int64_t e)
{
    while (r->res_head < r->nres && r->hres[r->res_head].e <= r->pick_t)
        r->res_head++;
    if (r->res_head > 0 && r->res_head * 2 >= r->nres) {
        memmove(r->hres, r->hres + r->res_head, (r->nres - r->res_head) * sizeof *r->hres);
        r->nres -= r->res_head;
        r->res_head = 0;
    }
    if (r->nres == r->res_cap) {
        size_t cap = r->res_cap ? r->res_cap * 2 : 64;
        void *p = realloc(r->hres, cap * sizeof *r->hres);
        if (!p) {
            r->oom = 1;
            return;
        }
        r->hres = p;
        r->res_cap = cap;
    }
    r->hres[r->nres].s = s;
    r->hres[r->nres].e = e;
    r->nres++;
}

/* A DMA transfer through the queue model; returns its completion time. */
static int64_t dma_transfer(runner *r, unsigned e, size_t pc, const tern_instr *ins, int64_t triggered)
{
    const tern_timing_config *tc = &r->core->cfg.timing;
    timing_dma plan;
    timing_dma_plan(tc, ins, &plan);
    int64_t first = NEVER, end = triggered + plan.fixed_ps;
    unsigned E = r->dma_E, Q = r->dma_Q, q = ins->queue % Q;
    /* On each of its engines the transfer passes its queue's ring (one transfer per ring_ps, in issue order,
     * overlapping the previous transfer's data), then, after the fixed latency, the engine's data path. The data
     * path serves its queues round-robin at packet boundaries: a piece finishes after its own work plus, from
     * each other queue with data pending, at most as much again (never later than behind all of it, FIFO). The
     * pieces already committed keep their times (an approximation: a later arrival does not delay them). */
    for (unsigned k = 0; k < plan.engines; k++) {
        unsigned j = (plan.first_engine + k) % E;
        int64_t *ring = &r->ring_free[(size_t)j * Q + q];
        int64_t rs = max64(triggered, *ring);
        *ring = rs + plan.ring_ps;
        int64_t s = rs + plan.fixed_ps, w = plan.engine_ps;
        int64_t *qe = &r->qdata_end[(size_t)j * Q + q];
        int64_t sq = max64(s, *qe); /* in order behind its own queue's data on this engine */
        int64_t fifo = max64(r->dma_free[j], s) + w, rr = sq + w;
        for (unsigned o = 0; o < Q; o++) {
            int64_t left = o == q ? 0 : r->qdata_end[(size_t)j * Q + o] - sq;
            if (left > 0)
                rr += left < w ? left : w;
        }
        int64_t e_end = rr < fifo ? rr : fifo;
        r->dma_free[j] = fifo;
        *qe = e_end;
        if (s < first)
            first = s;
        end = max64(end, *qe);
    }
    if (plan.hbm_ps) { /* the chip's HBM bandwidth, shared by every transfer */
        int64_t hs = max64(r->hbm_free, first);
        r->hbm_free = r->nwin ? hbm_serve(r, hs, plan.hbm_ps) : hs + plan.hbm_ps;
        end = max64(end, r->hbm_free);
        if (r->coll_fn)
            hbm_note(r, hs, r->hbm_free);
    }
    r->stats->dma_bytes += plan.bytes;
    r->stats->hbm_bytes += plan.hbm_bytes;
    r->stats->dma_transfers++;
    if (first > r->dma_union_end)
        r->stats->dma_busy_ps += end - first;
    else if (end > r->dma_union_end)
        r->stats->dma_busy_ps += end - r->dma_union_end;
    if (end > r->dma_union_end)
        r->dma_union_end = end;
    emit(r, TERN_EVENT_DMA, e, pc, ins, first, end, 0, plan.hbm_bytes, plan.bytes);
    /* A queue completes its transfers in issue order, as the hardware's do: a later, smaller transfer whose data
     * lands first still signals after the earlier ones (the kernel builder reads a queue's count that way). */
    return timing_queue_complete(&r->queue_done[ins->queue], end);
}

/* Commit engine e's next instruction at time t: execute it (functional mode) and time it. */
static tern_status commit(runner *r, unsigned e, int64_t t, tern_error *err)
{
    tern_core *c = r->core;
    const tern_timing_config *tc = &c->cfg.timing;
    seq_state *q = &r->ss[e];
    const tern_instr *ins = &r->prog->streams[e].instrs[q->pc];
    tern_opcode op = (tern_opcode)ins->opcode;
    size_t pc = q->pc, next = pc + 1;
    tern_status st;
    r->cand_ok[e] = 0;
    /* A wait event covers only the time the engine was idle because of the semaphore (TensorE's sequencer is
     * free at issue while its pipelines still work). */
    int64_t idle_from = q->free_ps;
    if (op == TERN_OP_LOAD_STATIONARY)
        idle_from = max64(idle_from, max64(r->ls_free, r->last_mm_start));
    else if (op == TERN_OP_MULTIPLY_MOVING)
        idle_from = max64(idle_from, max64(r->mm_free, r->last_ls_end));
    else if (op == TERN_OP_TRANSPOSE_PE)
        idle_from = max64(idle_from, max64(max64(r->ls_free, r->mm_free), r->last_ls_end));
    if (t > idle_from && (ins->wait_sem != TERN_SEM_NONE || (op == TERN_OP_BARRIER && q->in_barrier)))
        emit(r, TERN_EVENT_WAIT, e, pc, ins, idle_from, t, 0, 0, 0);

    if (c->opts.max_elements) {
        uint64_t w = work_elements(ins);
        if (w > c->opts.max_elements - r->elements)
            return tern_error_set(err, TERN_ERR_RANGE,
                                  "run: %s #%zu would pass the work limit of %llu elements (%llu done, it touches %llu)",
                                  tern_engine_name((tern_engine)e), pc, (unsigned long long)c->opts.max_elements,
                                  (unsigned long long)r->elements, (unsigned long long)w);
        r->elements += w;
    }
    int coll = tern_opcode_get(op)->family == TERN_ISA_FAMILY_COLLECTIVE;
    /* PSUM kept as a broadcast row is written out where something other than its consumers reads it */
    const float *lazy_in0 = r->timing_only ? NULL : psum_lazy_before(c, (tern_engine)e, ins);
    if (coll && !r->coll_fn) { /* outside a multi-rank launch its executor refuses the run, in either mode */
        exec_ctx cx = {(tern_engine)e, pc, q->seq, r->stats, NULL};
        return executor_of[op](c, &cx, ins, err);
    }
    if (tern_opcode_is_control(op)) {
        next = exec_control(c, e, ins, pc);
    } else if (!coll && !r->timing_only) {
        exec_ctx cx = {(tern_engine)e, pc, q->seq, r->stats, lazy_in0};
        if ((st = exec_lane_submit(c, r->lane, executor_of[op], &cx, ins, err)))
            return st;
    }

    uint64_t cycles = timing_cost_cycles(tc, (tern_engine)e, ins, r->stat_m, r->stat_dtype);
    int64_t occ = timing_ps((double)cycles, tc->clock_hz[e]);
    int64_t done = t + occ + timing_ps((double)timing_latency_cycles(tc, (tern_engine)e, ins), tc->clock_hz[e]);
    uint64_t flops = 0;
    if (op == TERN_OP_LOAD_STATIONARY) {
        r->ls_free = r->last_ls_end = t + occ;
        r->stat_m = (ins->flags & TERN_FLAG_DOUBLE_ROW) ? ins->ap[TERN_AP_IN0].dims[1].num
                                                        : (uint32_t)tern_ap_free_elems(&ins->ap[TERN_AP_IN0]);
        r->stat_dtype = ins->ap[TERN_AP_IN0].dtype;
    } else if (op == TERN_OP_MULTIPLY_MOVING) {
        r->mm_free = t + occ;
        r->last_mm_start = t;
        uint64_t macs =
            (uint64_t)ins->ap[TERN_AP_IN0].num_partitions * r->stat_m * tern_ap_free_elems(&ins->ap[TERN_AP_IN0]);
        r->stats->macs += macs;
        flops = 2 * macs;
    } else if (op == TERN_OP_TRANSPOSE_PE) {
        r->ls_free = r->mm_free = r->last_ls_end = t + occ;
    } else if (timing_is_compute_op(op)) {
        flops = elem_ops(ins);
    }
    if (tc->sbuf_port_conflicts && timing_is_compute_op(op) && !is_tensor_op(op)) {
        if (uses_sbuf_port(e, ins))
            r->sbuf_vg_free = t + occ;
        if (uses_psum_port(e, ins))
            r->psum_vs_free = t + occ;
        r->cand_ok[TERN_ENGINE_VECTOR] = r->cand_ok[TERN_ENGINE_GPSIMD] = r->cand_ok[TERN_ENGINE_SCALAR] = 0;
    }
    /* TensorE's two pipelines keep their own times; its sequencer only keeps issue order. */
    q->free_ps = e == TERN_ENGINE_TENSOR ? t : t + occ;
    if (e == TERN_ENGINE_TENSOR) {
        int64_t from = max64(t, r->tensor_busy_until);
        if (t + occ > from)
            r->stats->busy_ps[e] += t + occ - from;
        r->tensor_busy_until = max64(r->tensor_busy_until, t + occ);
    } else {
        r->stats->busy_ps[e] += occ;
    }
    emit(r, TERN_EVENT_INSTR, e, pc, ins, t, t + occ, flops, 0, 0);
    if (timing_is_compute_op(op) && tc->raw_latency[e] > 0)
        timing_raw_note(&r->raw[e], ins, t + occ + timing_ps(tc->raw_latency[e], tc->clock_hz[e]));
    if (is_dma_op(op))
        done = dma_transfer(r, e, pc, ins, t + occ);
    /* A collective joins its collective when its trigger ends; its semaphore is raised by the multi-rank runner
     * (sched_signal) at the completion time the fabric gives, once every rank has joined. */
    if (coll && (st = r->coll_fn(r->coll_ctx, e, pc, ins, t + occ, err)))
        return st;

    if (op == TERN_OP_SEM_SIGNAL) {
        if ((st = sem_add(r, ins->signal_sem, (uint32_t)ins->imm_i0, t + occ, err)))
            return st;
    } else if (op == TERN_OP_BARRIER) {
        if (!q->in_barrier) {
            if ((st = sem_add(r, ins->signal_sem, 1, t + occ, err)))
                return st;
            q->in_barrier = 1;
            return TERN_OK; /* the same instruction comes back to wait for the others */
        }
        q->in_barrier = 0;
    } else if (ins->signal_sem != TERN_SEM_NONE && !coll) {
        if ((st = sem_add(r, ins->signal_sem, 1, done, err)))
            return st;
    }
    if (done > r->stats->time_ps)
        r->stats->time_ps = done;
    r->stats->instructions[e]++;
    q->seq++;
    if (op == TERN_OP_HALT || next >= r->prog->streams[e].count)
        q->done = 1;
    else
        q->pc = next;
    return TERN_OK;
}

static tern_status run_schedule(tern_core *core, const tern_program *prog, tern_run_stats *stats, tern_error *err);

/* Test aid (TERN_CHECK_TIMING=1): a functional run is repeated in timing-only mode on a shadow core that starts
 * from the same registers and semaphores; both must predict exactly the same times and counts. */
static tern_status check_timing_only(tern_core *core, const tern_program *prog, const tern_run_stats *functional,
                                     const int32_t *regs, const uint32_t *sems, tern_error *err)
{
    tern_core_options o = core->opts;
    o.mode = TERN_MODE_TIMING_ONLY;
    o.on_event = NULL;
    o.fill_nan = 0;
    tern_core *shadow = NULL;
    tern_core_config cfg = core->cfg;
    cfg.sbuf_partition_bytes = core->cfg.sbuf_partition_bytes;
    tern_status st = tern_core_create(&cfg, &o, &shadow, err);
    if (st)
        return st;
    memcpy(shadow->registers, regs, (size_t)TERN_ENGINE_COUNT * cfg.num_registers * sizeof *regs);
    memcpy(shadow->semaphores, sems, cfg.num_semaphores * sizeof *sems);
    tern_run_stats t;
    st = run_schedule(shadow, prog, &t, err);
    tern_core_free(shadow);
    if (st)
        return tern_error_prefix(err, "timing-only check: ");
    if (t.time_ps != functional->time_ps || memcmp(t.busy_ps, functional->busy_ps, sizeof t.busy_ps) ||
        t.dma_bytes != functional->dma_bytes || t.macs != functional->macs ||
        memcmp(t.instructions, functional->instructions, sizeof t.instructions))
        return tern_error_set(err, TERN_ERR_INVALID,
                              "timing-only check: timing-only mode predicts %lld ps, functional mode %lld ps",
                              (long long)t.time_ps, (long long)functional->time_ps);
    return TERN_OK;
}

tern_status tern_core_run(tern_core *core, const tern_program *prog, tern_run_stats *stats, tern_error *err)
{
    tern_run_stats local;
    if (!stats)
        stats = &local;
    const char *ct = getenv("TERN_CHECK_TIMING");
    if (!(ct && ct[0] == '1' && core->opts.mode == TERN_MODE_FUNCTIONAL))
        return run_schedule(core, prog, stats, err);
    size_t nregs = (size_t)TERN_ENGINE_COUNT * core->cfg.num_registers;
    int32_t *regs = malloc(nregs * sizeof *regs);
    uint32_t *sems = malloc(core->cfg.num_semaphores * sizeof *sems);
    tern_status st;
    if (!regs || !sems) {
        st = tern_error_set(err, TERN_ERR_NOMEM, "run: out of memory");
    } else {
        memcpy(regs, core->registers, nregs * sizeof *regs);
        memcpy(sems, core->semaphores, core->cfg.num_semaphores * sizeof *sems);
        st = run_schedule(core, prog, stats, err);
        if (!st)
            st = check_timing_only(core, prog, stats, regs, sems, err);
    }
    free(regs);
    free(sems);
    return st;
}

struct sched {
    runner r;
    tern_run_stats local;
};

static void runner_release(runner *r)
{
    if (r->sems)
        for (unsigned s = 0; s < r->core->cfg.num_semaphores; s++)
            free(r->sems[s].pts);
    free(r->sems);
    free(r->dma_free);
    free(r->ring_free);
    free(r->qdata_end);
    free(r->hres);
    free(r->win);
}

tern_status sched_begin(tern_core *core, const tern_program *prog, tern_run_stats *stats, sched_coll_fn coll_fn,
                        void *coll_ctx, sched **out, tern_error *err)
{
    *out = NULL;
    sched *S = calloc(1, sizeof *S);
    if (!S)
        return tern_error_set(err, TERN_ERR_NOMEM, "run: out of memory");
    if (!stats)
        stats = &S->local;
    memset(stats, 0, sizeof *stats);
    tern_status st = tern_core_validate(core, prog, err);
    /* Debug/test aid: every program run must survive the binary and text round trips (docs/isa.md). */
    const char *rt = getenv("TERN_CHECK_ROUNDTRIP");
    if (!st && rt && rt[0] == '1')
        st = tern_program_roundtrip_check(prog, err);
    if (st) {
        free(S);
        return st;
    }
    runner *r = &S->r;
    r->core = core;
    r->prog = prog;
    r->stats = stats;
    r->coll_fn = coll_fn;
    r->coll_ctx = coll_ctx;
    r->timing_only = core->opts.mode == TERN_MODE_TIMING_ONLY;
    r->wake_ps = (int64_t)llround(core->cfg.timing.semaphore_wake_s * 1e12);
    r->sems = calloc(core->cfg.num_semaphores, sizeof *r->sems);
    r->dma_E = core->cfg.timing.dma_engines ? core->cfg.timing.dma_engines : 1;
    r->dma_Q = core->cfg.dma_queues ? core->cfg.dma_queues : 1;
    r->dma_free = calloc(r->dma_E, sizeof *r->dma_free);
    r->ring_free = calloc((size_t)r->dma_E * r->dma_Q, sizeof *r->ring_free);
    r->qdata_end = calloc((size_t)r->dma_E * r->dma_Q, sizeof *r->qdata_end);
    if (!r->sems || !r->dma_free || !r->ring_free || !r->qdata_end) {
        runner_release(r);
        free(S);
        return tern_error_set(err, TERN_ERR_NOMEM, "run: out of memory");
    }
    for (unsigned s = 0; s < core->cfg.num_semaphores; s++)
        r->sems[s].base = core->semaphores[s];
    for (unsigned e = 0; e < TERN_ENGINE_COUNT; e++)
        r->ss[e].done = prog->streams[e].count == 0;
    /* The background lane: single-core functional runs (a multi-rank run's collectives read HBM where they
     * commit); TERN_LANE=0 turns it off (the results are the same either way) */
    const char *ad = getenv("TERN_LANE");
    if (!coll_fn && !r->timing_only && !(ad && ad[0] == '0'))
        r->lane = exec_lane_get(core);
    *out = S;
    return TERN_OK;
}

int sched_peek(sched *S, int64_t *t)
{
    runner *r = &S->r;
    int64_t best = NEVER;
    int all_done = 1;
    unsigned pick = 0;
    for (unsigned e = 0; e < TERN_ENGINE_COUNT; e++) {
        if (r->ss[e].done)
            continue;
        all_done = 0;
        if (!r->cand_ok[e]) {
            r->cand[e] = candidate(r, e);
            r->cand_ok[e] = 1;
        }
        int64_t c = r->cand[e];
        if (c < best) { /* ties go to the lowest engine: deterministic */
            best = c;
            pick = e;
        }
    }
    if (all_done)
        return 0;
    r->pick = pick;
    r->pick_t = best;
    *t = best;
    return best == NEVER ? -1 : 1;
}

tern_status sched_step(sched *S, tern_error *err)
{
    runner *r = &S->r;
    if (++r->total > r->core->opts.max_instructions)
        return tern_error_set(err, TERN_ERR_RANGE,
                              "run: more than %llu instructions executed (endless loop?); last: %s #%zu",
                              (unsigned long long)r->core->opts.max_instructions,
                              tern_engine_name((tern_engine)r->pick), r->ss[r->pick].pc);
    return commit(r, r->pick, r->pick_t, err);
}

tern_status sched_signal(sched *S, unsigned sem, int64_t t, tern_error *err)
{
    runner *r = &S->r;
    TERN_ASSERT(sem < r->core->cfg.num_semaphores);
    tern_status st = sem_add(r, sem, 1, t, err);
    if (!st && t > r->stats->time_ps)
        r->stats->time_ps = t;
    return st;
}

int64_t sched_hbm_overlap(const sched *S, int64_t a, int64_t b)
{
    const runner *r = &S->r;
    int64_t sum = 0;
    for (size_t i = r->res_head; i < r->nres; i++) {
        int64_t s = max64(r->hres[i].s, a), e = r->hres[i].e < b ? r->hres[i].e : b;
        if (e > s)
            sum += e - s;
    }
    return sum;
}

tern_status sched_hbm_window(sched *S, int64_t a, int64_t b, int64_t work_ps, tern_error *err)
{
    runner *r = &S->r;
    if (r->oom)
        return tern_error_set(err, TERN_ERR_NOMEM, "run: out of memory for the DMA's HBM reservations");
    if (work_ps <= 0 || b <= a)
        return TERN_OK;
    if (r->nwin == r->win_cap) {
        size_t cap = r->win_cap ? r->win_cap * 2 : 8;
        void *p = realloc(r->win, cap * sizeof *r->win);
        if (!p)
            return tern_error_set(err, TERN_ERR_NOMEM, "run: out of memory for a collective's HBM window");
        r->win = p;
        r->win_cap = cap;
    }
    r->win[r->nwin].a = a;
    r->win[r->nwin].b = b;
    r->win[r->nwin].work = work_ps < b - a ? work_ps : b - a;
    r->nwin++;
    return TERN_OK;
}

tern_status sched_deadlock(sched *S, tern_error *err)
{
    char why[700];
    describe_block(&S->r, why, sizeof why);
    return tern_error_set(err, TERN_ERR_INVALID, "run: deadlock: %s", why);
}

void sched_describe(const sched *S, char *buf, size_t len) { describe_block(&S->r, buf, len); }

tern_status sched_end(sched *S, tern_status st)
{
    if (!S)
        return st;
    psum_lazy_flush_all(S->r.core); /* the runtime reads the core's memories next */
    /* launch and completion of the run (runtime, first instruction fetch): once per run (machine file) */
    if (!st)
        S->r.stats->time_ps += (int64_t)llround(S->r.core->cfg.timing.launch_s * 1e12);
    runner_release(&S->r);
    free(S);
    return st;
}

static tern_status run_schedule(tern_core *core, const tern_program *prog, tern_run_stats *stats, tern_error *err)
{
    sched *S = NULL;
    tern_status st = sched_begin(core, prog, stats, NULL, NULL, &S, err);
    if (st)
        return st;
    for (;;) {
        int64_t t;
        int k = sched_peek(S, &t);
        if (k == 0)
            break;
        if (k < 0) {
            st = sched_deadlock(S, err);
            break;
        }
        if ((st = sched_step(S, err)))
            break;
    }
    /* every queued transfer finishes before the run ends; one that failed was committed before whatever else
     * stopped the run, so its error is the run's */
    tern_error e2;
    tern_status ls = exec_lane_drain(S->r.lane, &e2);
    if (ls) {
        st = ls;
        if (err)
            *err = e2;
    }
    return sched_end(S, st);
}
