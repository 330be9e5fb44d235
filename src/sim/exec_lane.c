/* The background lane: in a functional single-core run with more than one host thread, the committing thread hands
 * some instructions to a window of up to LANE_CAP queued instructions, which the pool's workers (and the committing
 * thread, whenever it would otherwise wait) execute as a dataflow graph while it goes on with the next ones. The
 * results are those of executing every instruction in commit order, bit for bit, because any two instructions
 * whose bytes conflict (one writes what the other reads or writes) still execute in commit order:
 * - a queued instruction starts only once every earlier queued instruction it conflicts with has finished (named
 *   when it is queued, up to LANE_DEPS of them; with more it waits for every earlier one), so later conflicting
 *   ones wait for it in turn; non-conflicting ones may run at once, on different threads;
 * - an instruction the committing thread executes itself first waits for every queued instruction it conflicts
 *   with (running ready queued work meanwhile rather than spin: the ones it waits for first, then what they wait
 *   for, then the oldest ready);
 * - everything the committing thread executed before an instruction it queues has finished, except a multiply
 *   whose last parts it left to the workers (pool_post): it is tracked by its boxes like a queued instruction, and
 *   an instruction queued or a multiply executed while it runs waits for it first (pool_join) if their bytes
 *   conflict; anything else executed here except a LoadStationary waits for it, as does the run's end; and the
 *   stationary panels it reads are not repacked or reallocated until it has finished (exec_lane_panels_written,
 *   called by exec_tensor.c's cache_slot for a cache entry it refills and where the core's own panels are packed);
 * What goes to the lane: every dma_copy and every VectorE, ScalarE and GpSimdE instruction. Kept where they commit:
 * TensorE (its latched stationary operand and the packed-operand caches are its own state), control, collectives,
 * text, gathers and scatters (their rows come from index values), and any instruction with a register-addressed
 * operand (its address is the registers' at commit).
 * Shared state, kept safe the same way:
 * - bytes: each operand's bounding box of partitions x bytes; PSUM boxes widen to whole banks, which also covers
 *   the per-bank record of who wrote last (psum_mark);
 * - TensorE's packed-operand caches are told about a queued instruction's destination when it is queued, by the
 *   committing thread, which alone reads and writes them (a TensorE instruction that reads those bytes conflicts
 *   and waits for the writer);
 * - each pool worker has its own scratch buffers (core_lane_scratch), and pool_run inside a worker runs inline;
 * - only DMA and collectives reach HBM; gathers, scatters and anything else reaching HBM where it commits wait for
 *   the whole queue, and queued DMAs that touch a new HBM page at once publish it with a compare-and-swap.
 * The run ends (and the runtime reads the core's memories) only once the queue is empty; an error in a queued
 * instruction is reported as the run's error before any later instruction's, as in commit order, and the queued
 * instructions after it are dropped. */
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sim/core_internal.h"
#include "sim/exec_lane.h"
#include "sim/host_threads.h"

#if defined(__x86_64__) || defined(__i386__)
#define cpu_relax() __builtin_ia32_pause()
#else
#define cpu_relax() ((void)0)
#endif

/* A memory box: partitions [p0, p1) x bytes [b0, b1) of one memory (HBM: one partition of byte addresses). */
typedef struct {
    uint8_t mem, write;
    uint32_t p0, p1;
    uint64_t b0, b1;
} lane_box;

#define LANE_CAP 64u /* queued instructions at most (a power of two) */
#define LANE_MM 4u   /* multiplies left running that the lane tracks (the pool runs at most two) */
#define LANE_DEPS 8u /* earlier queued instructions a queued one waits for by name; more: it waits for all */
/* T_EXTEND: the committing thread is adding an instruction to the pending task (a chain), which nobody may claim
 * meanwhile */
enum { T_PENDING = 0, T_RUNNING = 1, T_DONE = 2, T_EXTEND = 3 };
#define NO_FAIL ULONG_MAX

typedef struct {
    const tern_instr *ins;
    lane_exec_fn fn;
    exec_ctx cx;
    unsigned n;
    lane_box box[TERN_INSTR_OPERANDS];
    /* What it waits for, read by claimers before they own the slot (a late reader may see the slot's next
     * occupant's: its claim then fails on the tag), hence atomics. */
    atomic_uint ndeps;
    atomic_int dep_all; /* waits for every earlier one */
    atomic_ulong deps[LANE_DEPS];
    atomic_ulong tag; /* index * 4 + state: a slot's next occupant never passes for this one */
    /* A chain (stt_chainable): instructions queued one after another that this task runs together, ins first. */
    unsigned cn;
    uint64_t first; /* the number of its first instruction among those queued (from 1; TERN_LANE_FAULT) */
    const tern_instr *cins[STT_CHAIN_MAX];
    exec_ctx ccx[STT_CHAIN_MAX];
} lane_task;

struct exec_lane {
    tern_core *core;
    lane_task ring[LANE_CAP];
    atomic_ulong tail;     /* tasks queued so far (written by the committing thread) */
    atomic_ulong frontier; /* tasks [0, frontier) have finished */
    atomic_uint running;   /* tasks being executed now */
    atomic_ulong fail_idx; /* the lowest failed task, or NO_FAIL: later ones are not started */
    pthread_mutex_t fail_mu;
    tern_status st;        /* that task's status and error */
    tern_error err;
    uint64_t queued;        /* instructions queued since the lane was made (exec_lane_queued) */
    uint64_t chained;       /* of them, those queued into the task before them (chain_onto) */
    uint64_t posted;        /* multiplies left running when the committing thread went on (exec_lane_posted) */
    uint64_t overlapped;    /* of them, those posted while another was still tracked */
    unsigned long fault;    /* test aid (TERN_LANE_FAULT=k): the task holding the k-th queued instruction (from 1)
                               fails, none of its instructions run; 0: none */
    /* Multiplies whose parts may still run on the pool's workers (pool_post, at most two): each one's job and
     * boxes, until it is seen complete or joined. */
    unsigned mm_live;
    struct {
        unsigned long job;
        const float *panels; /* the stationary panels it reads */
        unsigned n;
        lane_box box[TERN_INSTR_OPERANDS];
    } mm[LANE_MM];
};

/* The bytes an access pattern can touch (a bounding box). */
static lane_box box_of(const tern_core *core, const tern_ap *ap, int write)
{
    lane_box b;
    int64_t es = (int64_t)tern_dtype_size((tern_dtype)ap->dtype), lo, hi;
    ap_extent(ap, &lo, &hi);
    b.mem = ap->mem;
    b.write = (uint8_t)write;
    if (ap->mem == TERN_MEM_HBM) {
        int64_t pd = ap->partition_step * (int64_t)(ap->num_partitions ? ap->num_partitions - 1 : 0);
        if (pd < 0)
            lo += pd;
        else
            hi += pd;
        b.p0 = 0;
        b.p1 = 1;
    } else {
        b.p0 = ap->start_partition;
        b.p1 = (uint32_t)ap->start_partition + ap->num_partitions;
    }
    int64_t first = (int64_t)ap->offset + lo * es;
    b.b0 = first > 0 ? (uint64_t)first : 0;
    b.b1 = ap->offset + (uint64_t)((hi + 1) * es);
    if (ap->mem == TERN_MEM_PSUM) { /* whole banks */
        uint64_t bank = core->cfg.psum_bank_bytes ? core->cfg.psum_bank_bytes : 1;
        b.b0 -= b.b0 % bank;
        b.b1 = (b.b1 + bank - 1) / bank * bank;
    }
    if (ap->offset_reg != TERN_REG_NONE) { /* anywhere in its partitions */
        b.b0 = 0;
        b.b1 = UINT64_MAX;
    }
    return b;
}

static unsigned boxes_of(const tern_core *core, const tern_instr *ins, lane_box *out)
{
    unsigned n = 0;
    for (int s = 0; s < TERN_INSTR_OPERANDS; s++)
        if (ins->ap[s].ndims && ins->ap[s].mem != TERN_MEM_NONE)
            out[n++] = box_of(core, &ins->ap[s], s == TERN_AP_DST || s == TERN_AP_EXTRA);
    return n;
}

static int conflict(const lane_box *x, const lane_box *y)
{
    return (x->write | y->write) && x->mem == y->mem && x->p0 < y->p1 && y->p0 < x->p1 && x->b0 < y->b1 &&
           y->b0 < x->b1;
}

static int task_done(exec_lane *L, unsigned long i)
{
    if (i < atomic_load_explicit(&L->frontier, memory_order_acquire))
        return 1;
    return atomic_load_explicit(&L->ring[i & (LANE_CAP - 1)].tag, memory_order_acquire) == i * 4 + T_DONE;
}

static int task_ready(exec_lane *L, const lane_task *q, unsigned long k)
{
    if (atomic_load_explicit(&q->dep_all, memory_order_relaxed))
        return atomic_load_explicit(&L->frontier, memory_order_acquire) >= k;
    unsigned nd = atomic_load_explicit(&q->ndeps, memory_order_relaxed);
    for (unsigned i = 0; i < nd && i < LANE_DEPS; i++)
        if (!task_done(L, atomic_load_explicit(&q->deps[i], memory_order_relaxed)))
            return 0;
    return 1;
}

static void advance_frontier(exec_lane *L)
{
    for (;;) {
        unsigned long f = atomic_load(&L->frontier);
        if (f >= atomic_load(&L->tail) ||
            atomic_load_explicit(&L->ring[f & (LANE_CAP - 1)].tag, memory_order_acquire) != f * 4 + T_DONE)
            return;
        atomic_compare_exchange_weak(&L->frontier, &f, f + 1);
    }
}

/* Is task k pending (no thread has claimed it) with every task it waits for finished? */
static int task_claimable(exec_lane *L, const lane_task *q, unsigned long k)
{
    return atomic_load_explicit(&q->tag, memory_order_acquire) == k * 4 + T_PENDING && task_ready(L, q, k);
}

/* Claim and run task k if it is pending and ready: 1 if this thread ran it. */
static int run_task(exec_lane *L, unsigned long k)
{
    lane_task *q = &L->ring[k & (LANE_CAP - 1)];
    unsigned long want = k * 4 + T_PENDING;
    if (!task_claimable(L, q, k))
        return 0;
    atomic_fetch_add(&L->running, 1);
    if (!atomic_compare_exchange_strong(&q->tag, &want, k * 4 + T_RUNNING)) {
        atomic_fetch_sub(&L->running, 1);
        return 0;
    }
    int was = core_on_lane();
    core_set_lane(1);
    tern_error e;
    tern_status st = L->fault && L->fault >= q->first && L->fault < q->first + q->cn
                         ? tern_error_set(&e, TERN_ERR_INVALID, "lane: injected fault at queued instruction %lu (%s #%zu)",
                                          L->fault, tern_engine_name(q->cx.engine), q->cx.pc)
                     : q->cn > 1 ? exec_stt_chain(L->core, q->ccx, q->cins, q->cn, &e)
                                 : q->fn(L->core, &q->cx, q->ins, &e);
    core_set_lane(was);
    if (st) {
        pthread_mutex_lock(&L->fail_mu);
        if (k < atomic_load(&L->fail_idx)) {
            L->st = st;
            L->err = e;
            atomic_store(&L->fail_idx, k);
        }
        pthread_mutex_unlock(&L->fail_mu);
    }
    atomic_store_explicit(&q->tag, k * 4 + T_DONE, memory_order_release);
    atomic_fetch_sub(&L->running, 1);
    advance_frontier(L);
    return 1;
}

/* Run one of the tasks deps[0..nd) that an instruction executed here waits for, or else one they wait for: 1 if
 * this thread ran one. The committing thread runs these before any other queued work, since the instruction, and
 * every instruction after it, waits for them (BERT-base 3 %, GPT-2 2 % faster than oldest first: docs/performance.md).
 * A slot reused meanwhile holds another index in its tag, which run_task refuses. */
static int run_wanted(exec_lane *L, const unsigned long *deps, unsigned nd)
{
    unsigned long stop = atomic_load(&L->fail_idx);
    for (unsigned i = 0; i < nd; i++)
        if (deps[i] < stop && run_task(L, deps[i]))
            return 1;
    for (unsigned i = 0; i < nd; i++) {
        const lane_task *q = &L->ring[deps[i] & (LANE_CAP - 1)];
        if (deps[i] >= stop || task_done(L, deps[i]) || atomic_load_explicit(&q->dep_all, memory_order_relaxed))
            continue;
        unsigned qn = atomic_load_explicit(&q->ndeps, memory_order_relaxed);
        for (unsigned j = 0; j < qn && j < LANE_DEPS; j++) {
            unsigned long k = atomic_load_explicit(&q->deps[j], memory_order_relaxed);
            if (k < stop && k >= atomic_load(&L->frontier) && run_task(L, k))
                return 1;
        }
    }
    return 0;
}

/* Run one queued task whose earlier conflicting tasks have all finished: 1 if this thread ran one (run = 0: only
 * say whether one is ready). */
static int try_run(exec_lane *L, int run)
{
    unsigned long f = atomic_load_explicit(&L->frontier, memory_order_acquire), t = atomic_load(&L->tail),
                  stop = atomic_load(&L->fail_idx);
    for (unsigned long k = f; k < t && k < stop; k++) {
        if (run ? run_task(L, k) : task_claimable(L, &L->ring[k & (LANE_CAP - 1)], k))
            return 1;
    }
    return 0;
}

static int lane_bg(void *ctx, int run) { return try_run(ctx, run); }

exec_lane *exec_lane_get(tern_core *core)
{
    if (core->lane)
        return core->lane;
    tern_pool *p = core_pool(core);
    if (!p || pool_threads(p) < 2)
        return NULL;
    exec_lane *L = calloc(1, sizeof *L);
    core_scratch_set *w = calloc(pool_threads(p) - 1, sizeof *w);
    if (!L || !w) {
        free(L);
        free(w);
        return NULL;
    }
    L->core = core;
    const char *fault = getenv("TERN_LANE_FAULT");
    L->fault = fault ? strtoul(fault, NULL, 10) : 0;
    atomic_store(&L->fail_idx, NO_FAIL);
    pthread_mutex_init(&L->fail_mu, NULL);
    core->scratch_workers = w;
    core->n_scratch_workers = pool_threads(p) - 1;
    core->lane = L;
    pool_set_background(p, lane_bg, L);
    return L;
}

void exec_lane_free(exec_lane *L)
{
    if (!L)
        return;
    pthread_mutex_destroy(&L->fail_mu);
    free(L);
}

uint64_t exec_lane_queued(const exec_lane *L) { return L ? L->queued : 0; }
uint64_t exec_lane_chained(const exec_lane *L) { return L ? L->chained : 0; }
uint64_t exec_lane_posted(const exec_lane *L, uint64_t *overlapped)
{
    if (overlapped)
        *overlapped = L ? L->overlapped : 0;
    return L ? L->posted : 0;
}

/* May ins run on the lane? */
static int lane_ok(const tern_instr *ins)
{
    for (int s = 0; s < TERN_INSTR_OPERANDS; s++)
        if (ins->ap[s].ndims && ins->ap[s].offset_reg != TERN_REG_NONE)
            return 0;
    if (ins->opcode == TERN_OP_DMA_COPY)
        return 1;
    switch (tern_opcode_get((tern_opcode)ins->opcode)->family) {
    case TERN_ISA_FAMILY_VECTOR:
    case TERN_ISA_FAMILY_ACTIVATION:
    case TERN_ISA_FAMILY_GPSIMD: return 1;
    default: return 0;
    }
}

/* Spin until cond holds, running ready tasks here meanwhile. */
#define WAIT_WHILE(L, cond)                                                                                        \
    do {                                                                                                           \
        unsigned spins_ = 0;                                                                                       \
        while (cond) {                                                                                             \
            if (try_run((L), 1)) {                                                                                 \
                spins_ = 0;                                                                                        \
                continue;                                                                                          \
            }                                                                                                      \
            if (++spins_ < 4096)                                                                                   \
                cpu_relax();                                                                                       \
            else                                                                                                   \
                sched_yield();                                                                                     \
        }                                                                                                          \
    } while (0)

/* Every task before the first failure (all of them if none) has finished and nothing runs. */
static int settled(exec_lane *L)
{
    unsigned long f = atomic_load_explicit(&L->frontier, memory_order_acquire), fail = atomic_load(&L->fail_idx);
    return (f >= atomic_load(&L->tail) || (fail != NO_FAIL && f > fail)) && atomic_load(&L->running) == 0;
}

/* Wait for the multiply left running, if any. */
static void join_multiply(exec_lane *L)
{
    if (L->mm_live) {
        pool_join(core_pool(L->core));
        L->mm_live = 0;
    }
}

void exec_lane_panels_written(exec_lane *L, const float *panels)
{
    if (!L)
        return;
    for (unsigned m = 0; m < L->mm_live; m++)
        if (L->mm[m].panels == panels && !pool_done(core_pool(L->core), L->mm[m].job)) {
            join_multiply(L);
            return;
        }
}

/* Does any box of mine[0..n) conflict with a multiply left running? Those seen complete are dropped first. */
static int conflicts_multiply(exec_lane *L, const lane_box *mine, unsigned n)
{
    unsigned k = 0;
    int hit = 0;
    for (unsigned m = 0; m < L->mm_live; m++) {
        if (pool_done(core_pool(L->core), L->mm[m].job))
            continue;
        if (k != m)
            L->mm[k] = L->mm[m];
        for (unsigned i = 0; i < n && !hit; i++)
            for (unsigned j = 0; j < L->mm[k].n && !hit; j++)
                hit = conflict(&mine[i], &L->mm[k].box[j]);
        k++;
    }
    L->mm_live = k;
    return hit;
}

static tern_status take_failure(exec_lane *L, tern_error *err)
{
    join_multiply(L);
    WAIT_WHILE(L, !settled(L));
    tern_status st = L->st;
    if (err)
        *err = L->err;
    /* the tasks after it are dropped, each marked done so that no late claimer runs it; one that won its claim
     * first is waited for; then the queue is empty again */
    unsigned long t = atomic_load(&L->tail);
    for (unsigned long k = atomic_load(&L->frontier); k < t; k++) {
        unsigned long want = k * 4 + T_PENDING;
        atomic_compare_exchange_strong(&L->ring[k & (LANE_CAP - 1)].tag, &want, k * 4 + T_DONE);
    }
    while (atomic_load(&L->running))
        cpu_relax();
    atomic_store(&L->frontier, t);
    atomic_store(&L->fail_idx, NO_FAIL);
    return st;
}

tern_status exec_lane_drain(exec_lane *L, tern_error *err)
{
    if (!L)
        return TERN_OK;
    join_multiply(L);
    WAIT_WHILE(L, !settled(L));
    if (atomic_load(&L->fail_idx) != NO_FAIL)
        return take_failure(L, err);
    return TERN_OK;
}

/* The queued tasks that conflict with boxes mine[0..n): into deps (at most LANE_DEPS; *all when more). */
static unsigned deps_of(exec_lane *L, const lane_box *mine, unsigned n, unsigned long t, unsigned long *deps, int *all)
{
    unsigned nd = 0;
    *all = 0;
    for (unsigned long k = atomic_load_explicit(&L->frontier, memory_order_acquire); k < t; k++) {
        const lane_task *q = &L->ring[k & (LANE_CAP - 1)];
        int hit = 0;
        for (unsigned i = 0; i < n && !hit; i++)
            for (unsigned j = 0; j < q->n && !hit; j++)
                hit = conflict(&mine[i], &q->box[j]);
        /* the boxes first: they are this thread's own writes, while a task's state is the workers' (a line each
         * that moves between the cores) */
        if (!hit || task_done(L, k))
            continue;
        if (nd == LANE_DEPS) {
            *all = 1;
            return nd;
        }
        deps[nd++] = k;
    }
    return nd;
}

static int deps_done(exec_lane *L, const unsigned long *deps, unsigned nd, int all, unsigned long t)
{
    if (all)
        return atomic_load_explicit(&L->frontier, memory_order_acquire) >= t;
    for (unsigned i = 0; i < nd; i++)
        if (!task_done(L, deps[i]))
            return 0;
    return 1;
}

/* Queue ins as one more instruction of the task queued last, when that task has not started and ins continues its
 * chain (stt_chainable: a depthwise convolution's next tap into the same accumulator) and waits for nothing the task
 * does not already wait for: the task then runs its instructions in order, as one (exec_stt_chain). 1 if done. */
static int chain_onto(tern_core *core, exec_lane *L, const tern_instr *ins, const exec_ctx *cx, const lane_box *mine,
                      unsigned n, unsigned long t)
{
    if (t == 0 || t - 1 < atomic_load_explicit(&L->frontier, memory_order_acquire))
        return 0;
    lane_task *q = &L->ring[(t - 1) & (LANE_CAP - 1)];
    unsigned long pend = (t - 1) * 4 + T_PENDING;
    /* only this thread writes a pending task, so these reads are stable unless a worker starts it, which the
     * compare-and-swap below then detects */
    if (atomic_load_explicit(&q->tag, memory_order_acquire) != pend || q->cn >= STT_CHAIN_MAX || q->n != n ||
        !stt_chainable(q->cins[q->cn - 1], ins))
        return 0;
    for (unsigned i = 0; i < n; i++)
        if (q->box[i].mem != mine[i].mem || q->box[i].write != mine[i].write || q->box[i].p0 != mine[i].p0 ||
            q->box[i].p1 != mine[i].p1)
            return 0;
    unsigned long deps[LANE_DEPS];
    int all = 0;
    unsigned nd = deps_of(L, mine, n, t, deps, &all);
    int q_all = atomic_load_explicit(&q->dep_all, memory_order_relaxed);
    unsigned q_nd = atomic_load_explicit(&q->ndeps, memory_order_relaxed);
    if (all && !q_all)
        return 0;
    for (unsigned i = 0; i < nd && !q_all; i++) {
        int covered = deps[i] == t - 1;
        for (unsigned j = 0; j < q_nd && !covered; j++)
            covered = deps[i] == atomic_load_explicit(&q->deps[j], memory_order_relaxed);
        if (!covered)
            return 0;
    }
    if (!atomic_compare_exchange_strong(&q->tag, &pend, (t - 1) * 4 + T_EXTEND))
        return 0; /* a worker started it */
    q->cins[q->cn] = ins;
    q->ccx[q->cn] = *cx;
    q->ccx[q->cn].stats = NULL;
    q->cn++;
    for (unsigned i = 0; i < n; i++) { /* later instructions conflict with the whole chain */
        if (mine[i].b0 < q->box[i].b0)
            q->box[i].b0 = mine[i].b0;
        if (mine[i].b1 > q->box[i].b1)
            q->box[i].b1 = mine[i].b1;
    }
    sbuf_written(core, cx->engine, &ins->ap[TERN_AP_DST]);
    L->queued++;
    L->chained++;
    atomic_store_explicit(&q->tag, (t - 1) * 4 + T_PENDING, memory_order_release);
    return 1;
}

tern_status exec_lane_submit(tern_core *core, exec_lane *L, lane_exec_fn fn, const exec_ctx *cx,
                             const tern_instr *ins, tern_error *err)
{
    if (!L)
        return fn(core, cx, ins, err);
    if (atomic_load(&L->fail_idx) != NO_FAIL)
        return take_failure(L, err);
    unsigned long t = atomic_load(&L->tail);
    lane_box mine[TERN_INSTR_OPERANDS];
    unsigned n = boxes_of(core, ins, mine);
    if (L->mm_live) {
        /* Multiplies left running go on beside an instruction queued here or a multiply whose bytes they do not
         * touch, and beside a LoadStationary (load_stationary waits for them where it would refill panels they
         * read); anything else executed here waits for them first. */
        int beside = lane_ok(ins) || ins->opcode == TERN_OP_MULTIPLY_MOVING || ins->opcode == TERN_OP_LOAD_STATIONARY;
        if (!beside || conflicts_multiply(L, mine, n))
            join_multiply(L);
    }
    if (lane_ok(ins) && chain_onto(core, L, ins, cx, mine, n, t))
        return TERN_OK;
    if (lane_ok(ins)) {
        if (t - atomic_load(&L->frontier) >= LANE_CAP) { /* full: make room */
            WAIT_WHILE(L, t - atomic_load(&L->frontier) >= LANE_CAP && atomic_load(&L->fail_idx) == NO_FAIL);
            if (atomic_load(&L->fail_idx) != NO_FAIL)
                return take_failure(L, err);
        }
        lane_task *q = &L->ring[t & (LANE_CAP - 1)];
        q->ins = ins;
        q->fn = fn;
        q->cx = *cx;
        q->cx.stats = NULL; /* executors never count; the stats belong to the committing thread */
        q->n = n;
        memcpy(q->box, mine, n * sizeof *mine);
        q->cn = 1;
        q->cins[0] = ins;
        q->ccx[0] = q->cx;
        q->first = L->queued + 1;
        unsigned long deps[LANE_DEPS];
        int all = 0;
        unsigned nd = deps_of(L, mine, n, t, deps, &all);
        for (unsigned i = 0; i < nd; i++)
            atomic_store_explicit(&q->deps[i], deps[i], memory_order_relaxed);
        atomic_store_explicit(&q->ndeps, nd, memory_order_relaxed);
        atomic_store_explicit(&q->dep_all, all, memory_order_relaxed);
        /* TensorE's packed-operand caches under what it writes die now, where they are used */
        sbuf_written(core, cx->engine, &ins->ap[TERN_AP_DST]);
        if (ins->ap[TERN_AP_EXTRA].ndims)
            sbuf_written(core, cx->engine, &ins->ap[TERN_AP_EXTRA]);
        atomic_store_explicit(&q->tag, t * 4 + T_PENDING, memory_order_release);
        atomic_store(&L->tail, t + 1);
        L->queued++;
        pool_wake(core_pool(core));
        return TERN_OK;
    }
    /* here: after the queued tasks it conflicts with (every one, for a gather, a scatter or text, whose rows depend
     * on values, or an instruction that reaches HBM) */
    unsigned long deps[LANE_DEPS];
    int all = 0;
    unsigned nd = 0;
    int whole = ins->opcode == TERN_OP_DMA_GATHER || ins->opcode == TERN_OP_DMA_SCATTER ||
                tern_opcode_get((tern_opcode)ins->opcode)->family == TERN_ISA_FAMILY_TEXT;
    for (unsigned i = 0; i < n; i++)
        whole |= mine[i].mem == TERN_MEM_HBM;
    if (whole)
        all = 1;
    else
        nd = deps_of(L, mine, n, t, deps, &all);
    if (all || nd) {
        unsigned spins = 0;
        while (!deps_done(L, deps, nd, all, t) && atomic_load(&L->fail_idx) == NO_FAIL) {
            if (run_wanted(L, deps, nd) || try_run(L, 1)) {
                spins = 0;
                continue;
            }
            if (++spins < 4096)
                cpu_relax();
            else
                sched_yield();
        }
        if (atomic_load(&L->fail_idx) != NO_FAIL)
            return take_failure(L, err);
    }
    if (ins->opcode != TERN_OP_MULTIPLY_MOVING)
        return fn(core, cx, ins, err);
    /* a multiply may leave its last parts to the workers: later instructions wait for them only where they touch
     * its bytes (above) */
    if (L->mm_live == LANE_MM)
        join_multiply(L);
    core->mm_post = 1;
    core->mm_job = 0;
    tern_status st = fn(core, cx, ins, err);
    core->mm_post = 0;
    if (core->mm_job) {
        L->posted++;
        L->overlapped += L->mm_live > 0;
        L->mm[L->mm_live].job = core->mm_job;
        L->mm[L->mm_live].panels = core->mm_panels;
        L->mm[L->mm_live].n = n;
        memcpy(L->mm[L->mm_live].box, mine, n * sizeof *mine);
        L->mm_live++;
    }
    return st;
}
