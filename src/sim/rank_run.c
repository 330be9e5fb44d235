/* Programs over ranks (issue 13, "Programs"): one program per rank of a fabric (SPMD: the same program on every
 * rank, which reads its rank id from a register), each rank a simulated NeuronCore, and collective instructions
 * inside the programs running through the collective layer (tern_coll_comm: the same algorithms, checks and
 * fabric timing as `tern collective`). The schedulers of all ranks' cores (schedule.c, sched_*) advance in one
 * global time order: the next instruction committed is the one that can start first on any rank (ties by rank,
 * then engine). When a rank's collective instruction ends its trigger, the rank joins that collective: its source
 * bytes are read from its HBM then (the kernel API's hazard tracking keeps them unchanged until completion anyway).
 * When the last rank joins collective #k, every earlier commit of every rank started no later than that join, so
 * the collective can run at once: it starts when the last rank joined, and not before collective #k-1 completed
 * (a chip's collective engines run a launch's collectives in order), takes the time the fabric gives (the same
 * tern_coll_result.time_ps `tern collective` reports for that size and algorithm), its results are written to
 * every rank's destination, and each rank's completion semaphore is raised at its end. Results and times depend
 * only on the programs, inputs and machine, never on host threads.
 *
 * Errors never hang: ranks that disagree on a collective (operation, size, dtype, reduction, groups, algorithm)
 * are named by tern_coll_comm's check; a rank that finishes or blocks while others wait in a collective it never
 * joins is named with the collective and what each blocked engine waits for. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/core_internal.h"
#include "sim/schedule.h"
#include "sim/coll_sched.h"
#include "tern/collective.h"
#include "tern/transport.h"

/* ---- HBM access patterns as dense host buffers ---- */

/* Walk an HBM pattern (register offset `reg` elements) in dense order; read (write = 0) into or write from buf. */
static tern_status hbm_ap_io(tern_core *core, const tern_ap *ap, int64_t reg, unsigned char *buf, int write,
                             tern_error *err)
{
    size_t es = tern_dtype_size((tern_dtype)ap->dtype);
    uint32_t num[4] = {1, 1, 1, 1};
    int32_t step[4] = {0, 0, 0, 0};
    unsigned nd = ap->ndims;
    for (unsigned k = 0; k < nd; k++) {
        num[4 - nd + k] = ap->dims[k].num;
        step[4 - nd + k] = ap->dims[k].step;
    }
    size_t at = 0;
    for (uint32_t p = 0; p < ap->num_partitions; p++)
        for (uint32_t i0 = 0; i0 < num[0]; i0++)
            for (uint32_t i1 = 0; i1 < num[1]; i1++)
                for (uint32_t i2 = 0; i2 < num[2]; i2++) {
                    int64_t el = reg + (int64_t)p * ap->partition_step + (int64_t)i0 * step[0] +
                                 (int64_t)i1 * step[1] + (int64_t)i2 * step[2];
                    for (uint32_t i3 = 0; i3 < num[3];) {
                        uint32_t run = 1;
                        if (step[3] == 1)
                            run = num[3] - i3;
                        uint64_t addr = ap->offset + (uint64_t)((el + (int64_t)i3 * step[3]) * (int64_t)es);
                        tern_status st = write ? tern_core_hbm_write(core, addr, buf + at, run * es, err)
                                               : tern_core_hbm_read(core, addr, buf + at, run * es, err);
                        if (st)
                            return st;
                        at += run * es;
                        i3 += run;
                    }
                }
    return TERN_OK;
}

/* ---- the run ---- */

typedef struct {
    tern_instr ins;
    unsigned engine;
    size_t pc;
    int64_t t;             /* join time */
    int64_t key_t;         /* the start of the join's step: its place in the global order (with the rank) */
    int64_t dst_reg;       /* the destination's register offset at the join */
    tern_coll_desc desc;
    unsigned *groups;      /* owned */
    uint64_t *vcounts;     /* all-to-allv: the n x n counts (then the displacements) read from B at the join */
    unsigned *pairs;       /* permute: the (source, target) pairs read from B at the join (owned) */
    unsigned char *in, *out; /* owned (functional) */
    uint64_t src_elems, dst_elems;
    unsigned member, group_n;
} join_rec;

typedef struct {
    join_rec *q;
    size_t head, n, cap;
} join_queue;

typedef struct ranks_run ranks_run;
typedef struct {
    ranks_run *run;
    unsigned rank;
} hook_ctx;

struct ranks_run {
    tern_fabric *f;
    unsigned R;
    tern_core *const *cores;
    sched **s;
    join_queue *jq;
    hook_ctx *hc;
    tern_coll_comm *comm;
    int functional;
    int64_t last_end; /* completion of the previous collective */
    tern_ranks_result *res;
    int64_t pick_t;          /* the start of the step being committed */
    const tern_transport *t; /* distributed runs (K processes) */
    const unsigned char *local;
};

static void join_free(join_rec *j)
{
    free(j->groups);
    free(j->vcounts);
    free(j->pairs);
    j->vcounts = NULL;
    j->pairs = NULL;
    free(j->in);
    free(j->out);
    j->groups = NULL;
    j->in = j->out = NULL;
}

/* Replica groups of the instruction's imm_i1 over R ranks: 0 one group of all ranks; g > 0 groups of g
 * consecutive ranks; -g groups of g ranks R/g apart (rank r in group r mod R/g). */
static tern_status make_groups(unsigned R, unsigned rank, int32_t spec, const char *what, unsigned **groups,
                               unsigned *ngroups, unsigned *gsize, unsigned *member, tern_error *err)
{
    *groups = NULL;
    if (spec == 0) {
        *ngroups = 0;
        *gsize = R;
        *member = rank;
        return TERN_OK;
    }
    unsigned g = (unsigned)(spec < 0 ? -(int64_t)spec : spec);
    if (g == 0 || g > R || R % g)
        return tern_error_set(err, TERN_ERR_INVALID,
                              "%s: rank %u: replica groups of %u ranks (imm_i1=%d) do not partition the %u ranks", what,
                              rank, g, spec, R);
    unsigned ng = R / g;
    unsigned *a = malloc(sizeof *a * R);
    if (!a)
        return tern_error_set(err, TERN_ERR_NOMEM, "%s: out of memory", what);
    for (unsigned j = 0; j < ng; j++)
        for (unsigned m = 0; m < g; m++)
            a[j * g + m] = spec > 0 ? j * g + m : j + m * ng;
    *groups = a;
    *ngroups = ng;
    *gsize = g;
    *member = spec > 0 ? rank % g : rank / ng;
    return TERN_OK;
}

static uint64_t blk(uint64_t count, unsigned n, unsigned m) { return count * m / n; }

static tern_status on_join(void *vctx, unsigned engine, size_t pc, const tern_instr *ins, int64_t t, tern_error *err)
{
    hook_ctx *hc = vctx;
    ranks_run *run = hc->run;
    unsigned r = hc->rank;
    join_queue *q = &run->jq[r];
    if (q->n == q->cap) {
        size_t cap = q->cap ? q->cap * 2 : 8;
        join_rec *p = realloc(q->q, cap * sizeof *p);
        if (!p)
            return tern_error_set(err, TERN_ERR_NOMEM, "rank %u: out of memory for its collectives", r);
        q->q = p;
        q->cap = cap;
    }
    join_rec *j = &q->q[q->n];
    memset(j, 0, sizeof *j);
    j->ins = *ins;
    j->engine = engine;
    j->pc = pc;
    j->t = t;
    j->key_t = run->pick_t;
    tern_core *core = run->cores[r];
    const tern_ap *d = &ins->ap[TERN_AP_DST], *a = &ins->ap[TERN_AP_IN0];
    j->dst_reg = ap_reg_offset(core, (tern_engine)engine, d);
    j->src_elems = (uint64_t)a->num_partitions * tern_ap_free_elems(a);
    j->dst_elems = (uint64_t)d->num_partitions * tern_ap_free_elems(d);
    uint64_t seq = tern_coll_comm_seq(run->comm) + (q->n - q->head) + 1;
    char what[96];
    snprintf(what, sizeof what, "collective #%llu (%s, %s #%zu)", (unsigned long long)seq,
             tern_coll_op_name((tern_coll_op)(ins->imm_i0 & 255)), tern_engine_name((tern_engine)engine), pc);
    unsigned ng = 0, gs = 0;
    tern_status st = make_groups(run->R, r, ins->imm_i1, what, &j->groups, &ng, &gs, &j->member, err);
    if (st)
        return st;
    j->group_n = gs;
    tern_coll_desc *cd = &j->desc;
    cd->op = (tern_coll_op)(ins->imm_i0 & 255);
    cd->reduce = ins->op0 == TERN_ALU_MAX ? TERN_REDUCE_MAX : ins->op0 == TERN_ALU_MIN ? TERN_REDUCE_MIN : TERN_REDUCE_SUM;
    cd->dtype = (tern_dtype)a->dtype;
    cd->algo = (tern_coll_algo)(ins->imm_i0 >> 8);
    cd->groups = j->groups;
    cd->ngroups = ng;
    cd->group_size = j->groups ? gs : 0;
    /* The collective layer's count is each rank's full buffer; the kernel's operands are the NKI shapes. */
    switch (cd->op) {
    case TERN_COLL_ALL_GATHER:
        cd->count = j->dst_elems;
        if (j->src_elems * gs != j->dst_elems) {
            join_free(j);
            return tern_error_set(err, TERN_ERR_INVALID,
                                  "%s: rank %u: all-gather over %u ranks of %llu elements each needs a destination of "
                                  "%llu elements, it has %llu",
                                  what, r, gs, (unsigned long long)j->src_elems,
                                  (unsigned long long)(j->src_elems * gs), (unsigned long long)j->dst_elems);
        }
        break;
    case TERN_COLL_REDUCE_SCATTER:
        cd->count = j->src_elems;
        if (j->dst_elems * gs != j->src_elems) {
            join_free(j);
            return tern_error_set(err, TERN_ERR_INVALID,
                                  "%s: rank %u: reduce-scatter of %llu elements over %u ranks gives each %llu "
                                  "elements, its destination has %llu",
                                  what, r, (unsigned long long)j->src_elems, gs,
                                  (unsigned long long)(j->src_elems / gs), (unsigned long long)j->dst_elems);
        }
        break;
    case TERN_COLL_ALL_TO_ALLV:
    case TERN_COLL_PERMUTE: {
        /* B, read from HBM at the join in both modes (it decides the schedule and its time): all-to-allv's n x n
         * counts, optionally followed by the send and receive displacements; permute's (source, target) pairs */
        cd->count = j->src_elems;
        const tern_ap *b = &ins->ap[TERN_AP_IN1];
        if (cd->op == TERN_COLL_PERMUTE && !b->ndims)
            break; /* each group's ring shift */
        int a2av = cd->op == TERN_COLL_ALL_TO_ALLV;
        uint64_t nb = (uint64_t)b->num_partitions * tern_ap_free_elems(b), nn = (uint64_t)gs * gs;
        if (a2av && nb != nn && nb != 3 * nn) {
            join_free(j);
            return tern_error_set(err, TERN_ERR_INVALID,
                                  "%s: rank %u: all-to-allv over %u ranks needs %u x %u counts (B), or 3 x %u x %u "
                                  "(counts, send and receive displacements), it has %llu elements",
                                  what, r, gs, gs, gs, gs, gs, (unsigned long long)nb);
        }
        int32_t *c32 = malloc(sizeof *c32 * (nb ? nb : 1));
        if (a2av)
            j->vcounts = malloc(sizeof *j->vcounts * nb);
        else
            j->pairs = malloc(sizeof *j->pairs * (nb ? nb : 1));
        if (!c32 || (a2av ? !j->vcounts : !j->pairs)) {
            free(c32);
            join_free(j);
            return tern_error_set(err, TERN_ERR_NOMEM, "%s: rank %u: out of memory", what, r);
        }
        if ((st = hbm_ap_io(core, b, ap_reg_offset(core, (tern_engine)engine, b), (unsigned char *)c32, 0, err))) {
            free(c32);
            join_free(j);
            return tern_error_prefix(err, "%s: rank %u: %s: ", what, r, a2av ? "counts" : "pairs");
        }
        static const char *const table[3] = {"count", "send displacement", "receive displacement"};
        for (uint64_t i = 0; i < nb; i++) {
            if (c32[i] < 0 || (!a2av && (uint32_t)c32[i] >= run->R)) {
                if (a2av)
                    tern_error_set(err, TERN_ERR_INVALID,
                                   "%s: rank %u: all-to-allv %s [%llu][%llu] is %d, not >= 0", what, r,
                                   table[i / nn], (unsigned long long)(i % nn / gs), (unsigned long long)(i % gs),
                                   c32[i]);
                else
                    tern_error_set(err, TERN_ERR_INVALID,
                                   "%s: rank %u: permute pair %llu's %s is rank %d, outside the launch's 0..%u",
                                   what, r, (unsigned long long)(i / 2), i % 2 ? "target" : "source", c32[i],
                                   run->R - 1);
                free(c32);
                join_free(j);
                return TERN_ERR_INVALID;
            }
            if (a2av)
                j->vcounts[i] = (uint64_t)c32[i];
            else
                j->pairs[i] = (unsigned)c32[i];
        }
        free(c32);
        if (a2av) {
            cd->vcounts = j->vcounts;
            cd->sdispls = nb == 3 * nn ? j->vcounts + nn : NULL;
            cd->rdispls = nb == 3 * nn ? j->vcounts + 2 * nn : NULL;
        } else {
            cd->pairs = j->pairs;
            cd->npairs = (unsigned)(nb / 2);
            /* pairs span the launch: the collective layer takes no groups with them */
            free(j->groups);
            j->groups = NULL;
            cd->groups = NULL;
            cd->ngroups = cd->group_size = 0;
        }
        break;
    }
    default: cd->count = j->src_elems; break;
    }
    if (run->functional) {
        size_t es = tern_dtype_size(cd->dtype), bytes = (size_t)cd->count * es;
        j->in = malloc(bytes ? bytes : 1);
        j->out = malloc(bytes ? bytes : 1);
        if (!j->in || !j->out) {
            join_free(j);
            return tern_error_set(err, TERN_ERR_NOMEM, "%s: rank %u: out of memory for %llu elements", what, r,
                                  (unsigned long long)cd->count);
        }
        memset(j->in, 0, cd->count * es);
        memset(j->out, 0, cd->count * es);
        unsigned char *src = j->in;
        if (cd->op == TERN_COLL_ALL_GATHER)
            src += blk(cd->count, gs, j->member) * es;
        st = hbm_ap_io(core, a, ap_reg_offset(core, (tern_engine)engine, a), src, 0, err);
        if (st) {
            join_free(j);
            return tern_error_prefix(err, "%s: rank %u: source: ", what, r);
        }
    }
    q->n++;
    return TERN_OK;
}

/* Every rank has joined the collective at the head of its queue: run it and signal each rank at its end. */
static tern_status run_head(ranks_run *run, tern_error *err)
{
    unsigned R = run->R;
    int64_t start = run->last_end;
    unsigned first = R; /* the first rank this process runs (every rank in one process) */
    for (unsigned r = 0; r < R; r++) {
        if (run->local && !run->local[r])
            continue;
        if (first == R)
            first = r;
        join_rec *j = &run->jq[r].q[run->jq[r].head];
        if (j->t > start)
            start = j->t;
    }
    if (run->t) { /* the last join anywhere: the join times of the other processes' ranks */
        uint64_t v = (uint64_t)start;
        if (run->t->allreduce(run->t->ctx, &v, 1, TERN_XOP_MAX, err))
            run->t->abort(run->t->ctx, err->msg);
        start = (int64_t)v;
    }
    for (unsigned r = first; r < R; r++) {
        if (run->local && !run->local[r])
            continue;
        join_rec *j = &run->jq[r].q[run->jq[r].head];
        tern_status st = tern_coll_comm_join(run->comm, r, &j->desc, j->in, j->out, err);
        if (st && run->t) /* the other processes are about to wait for this one in the collective */
            run->t->abort(run->t->ctx, err->msg);
        if (st)
            return st;
    }
    uint64_t seq = tern_coll_comm_seq(run->comm) + 1;
    tern_coll_result cr;
    tern_status st = tern_coll_comm_run(run->comm, &cr, err);
    if (st)
        return st;
    /* HBM shared with the kernels' own DMA: the collective's data moves in the last span_ps of its time, where it
     * needs, on rank r's HBM, work_r = (its bytes there) / (the core's HBM bandwidth) (at most the span), a
     * fraction f_r = work_r / span. DMA already reserved on that HBM inside the window (overlap_r) is split with
     * it in proportion to the demands, which delays the collective by f_r x overlap_r; a collective completes on
     * every rank together, so by the largest delay. Later DMA inside the window pays the same split
     * (schedule.c, hbm_serve). Nothing overlapping: no delay. */
    int64_t span = (int64_t)cr.span_ps, a = start + (int64_t)cr.time_ps - span, delay = 0;
    int64_t *work = NULL;
    if (span > 0) {
        const join_rec *j0 = &run->jq[first].q[run->jq[first].head];
        uint64_t *hb = malloc(sizeof *hb * R);
        work = calloc(R, sizeof *work);
        if (!hb || !work || (st = coll_rank_hbm_bytes(run->f, &j0->desc, hb, err))) {
            free(hb);
            free(work);
            if (!hb || !work)
                st = tern_error_set(err, TERN_ERR_NOMEM, "collective #%llu: out of memory", (unsigned long long)seq);
            if (run->t)
                run->t->abort(run->t->ctx, err->msg);
            return st;
        }
        for (unsigned r = 0; r < R; r++) {
            if (run->local && !run->local[r])
                continue;
            double bw = run->cores[r]->cfg.timing.hbm_bandwidth;
            int64_t w = bw > 0 ? (int64_t)llround((double)hb[r] / bw * 1e12) : 0;
            work[r] = w < span ? w : span;
            int64_t ov = sched_hbm_overlap(run->s[r], a, a + span);
            int64_t dr = ov > 0 ? (int64_t)llround((double)work[r] * (double)ov / (double)span) : 0;
            if (dr > delay)
                delay = dr;
        }
        free(hb);
        if (run->t) { /* the largest delay anywhere */
            uint64_t v = (uint64_t)delay;
            if (run->t->allreduce(run->t->ctx, &v, 1, TERN_XOP_MAX, err))
                run->t->abort(run->t->ctx, err->msg);
            delay = (int64_t)v;
        }
    }
    int64_t end = start + (int64_t)cr.time_ps + delay;
    run->last_end = end;
    for (unsigned r = 0; work && r < R; r++) {
        if (run->local && !run->local[r])
            continue;
        if ((st = sched_hbm_window(run->s[r], a, end, work[r], err))) {
            free(work);
            return st;
        }
    }
    free(work);
    tern_ranks_result *res = run->res;
    if (res) {
        if (res->ncolls == res->cap) {
            size_t cap = res->cap ? res->cap * 2 : 8;
            tern_ranks_coll *p = realloc(res->colls, cap * sizeof *p);
            if (!p)
                return tern_error_set(err, TERN_ERR_NOMEM, "collective #%llu: out of memory for its record",
                                      (unsigned long long)seq);
            res->colls = p;
            res->cap = cap;
        }
        const join_rec *j0 = &run->jq[first].q[run->jq[first].head]; /* the ranks agree (tern_coll_comm_run) */
        tern_ranks_coll *c = &res->colls[res->ncolls++];
        c->seq = seq;
        c->op = j0->desc.op;
        c->algo = cr.algo;
        c->dtype = j0->desc.dtype;
        c->count = j0->desc.count;
        c->start_ps = start;
        c->end_ps = end;
        c->time_ps = (uint64_t)(end - start);
        c->hbm_delay_ps = (uint64_t)delay;
    }
    for (unsigned r = 0; r < R; r++) {
        if (run->local && !run->local[r])
            continue;
        join_queue *q = &run->jq[r];
        join_rec *j = &q->q[q->head];
        if (run->functional) {
            size_t es = tern_dtype_size(j->desc.dtype);
            const unsigned char *from = j->out;
            if (j->desc.op == TERN_COLL_REDUCE_SCATTER)
                from += blk(j->desc.count, j->group_n, j->member) * es;
            st = hbm_ap_io(run->cores[r], &j->ins.ap[TERN_AP_DST], j->dst_reg, (unsigned char *)from, 1, err);
            if (st)
                return tern_error_prefix(err, "collective #%llu: rank %u: destination: ", (unsigned long long)seq, r);
        }
        if ((st = sched_signal(run->s[r], j->ins.signal_sem, end, err)))
            return st;
        join_free(j);
        q->head++;
    }
    return TERN_OK;
}

/* Every remaining rank is blocked or done with collectives still unjoined: name the collective and the ranks. */
static tern_status stuck(ranks_run *run, const int *done, tern_error *err)
{
    unsigned R = run->R;
    unsigned first = R;
    for (unsigned r = 0; r < R && first == R; r++)
        if (run->jq[r].n > run->jq[r].head)
            first = r;
    if (first == R) { /* no collective pending: an ordinary deadlock on some rank */
        for (unsigned r = 0; r < R; r++)
            if (!done[r]) {
                sched_deadlock(run->s[r], err);
                return tern_error_prefix(err, "rank %u: ", r);
            }
        return TERN_OK;
    }
    const join_rec *j = &run->jq[first].q[run->jq[first].head];
    char joined[256] = "", missing[512] = "";
    size_t aj = 0, am = 0;
    for (unsigned r = 0; r < R; r++) {
        int in = run->jq[r].n > run->jq[r].head;
        if (in) {
            if (aj + 16 < sizeof joined)
                aj += (size_t)snprintf(joined + aj, sizeof joined - aj, "%s%u", aj ? ", " : "", r);
        } else if (am + 200 < sizeof missing) {
            char why[160] = "its program ended";
            if (!done[r])
                sched_describe(run->s[r], why, sizeof why);
            am += (size_t)snprintf(missing + am, sizeof missing - am, "%srank %u (%s)", am ? "; " : "", r, why);
        }
    }
    return tern_error_set(err, TERN_ERR_INVALID,
                          "collective #%llu (%s, %s, %llu elements): ranks %s joined, but these ranks never join it "
                          "(a deadlock): %s",
                          (unsigned long long)tern_coll_comm_seq(run->comm) + 1, tern_coll_op_name(j->desc.op),
                          tern_dtype_name(j->desc.dtype), (unsigned long long)j->desc.count, joined, missing);
}

void tern_ranks_result_free(tern_ranks_result *res)
{
    if (!res)
        return;
    free(res->colls);
    memset(res, 0, sizeof *res);
}

/* ---- the run over K processes (docs/multichip.md, "Launches over MPI processes") ----
 * Each process steps only its own ranks (tern_fabric_rank_owner) and meets the others at every collective. The
 * one-process loop commits every rank's steps in (start, rank) order, and a rank's successive starts never
 * decrease (a commit or a collective's completion only moves times later), so that order is the merge of the
 * ranks' own sequences; ranks touch each other only when a collective runs, which the loop does right after the
 * last join of it, the step with the largest (start, rank) among its joins. So a process may run a rank that has
 * not joined the head collective until it joins (all of that precedes the last join), and, once every rank has
 * joined, every rank while its next step comes before that last join; then the collective runs on every process
 * (tern_coll_comm over the transport). Each rank thus commits exactly the steps, in the same order and with the
 * same collective completions, as in one process: the same bits and picoseconds whatever K is. Errors are agreed:
 * after each phase every process learns of any failure, and the earliest in that order (the one a single process
 * would have met first) is every process's result. */

typedef struct {
    int64_t t;
    uint32_t rank, has;
    tern_error e;
} dist_err;

static int key_less(int64_t t, unsigned r, int64_t bt, unsigned br) { return t < bt || (t == bt && r < br); }

/* Send the same bytes to every process; *recv gets every process's, in process order. */
static tern_status dist_allgather(const tern_transport *t, const void *mine, size_t n, void **recv, tern_error *err)
{
    unsigned K = t->nprocs;
    uint64_t *scount = calloc(K, sizeof *scount), *rcount = calloc(K, sizeof *rcount);
    unsigned char *send = malloc(n * K + 1);
    tern_status st = TERN_OK;
    if (!scount || !rcount || !send) {
        st = tern_error_set(err, TERN_ERR_NOMEM, "multi-rank run: out of memory for %zu bytes of messages", n * K);
    } else {
        for (unsigned q = 0; q < K; q++) {
            if (n)
                memcpy(send + q * n, mine, n);
            scount[q] = n;
        }
        st = t->exchange(t->ctx, send, scount, recv, rcount, err);
    }
    free(scount);
    free(rcount);
    free(send);
    return st;
}

/* All processes learn of a failure on any of them; the earliest by (t, rank) wins. */
static tern_status dist_agree(ranks_run *run, dist_err *mine, tern_error *err)
{
    const tern_transport *t = run->t;
    uint64_t any = mine->has;
    tern_status st = t->allreduce(t->ctx, &any, 1, TERN_XOP_MAX, err);
    if (st)
        t->abort(t->ctx, err->msg);
    if (!any)
        return TERN_OK;
    void *recv = NULL;
    if (dist_allgather(t, mine, sizeof *mine, &recv, err))
        t->abort(t->ctx, err->msg);
    const dist_err *all = recv, *best = NULL;
    for (unsigned q = 0; q < t->nprocs; q++)
        if (all[q].has && (!best || key_less(all[q].t, all[q].rank, best->t, best->rank)))
            best = &all[q];
    *err = best->e;
    st = best->e.code ? best->e.code : TERN_ERR_INVALID;
    free(recv);
    return st;
}

static void dist_fail(dist_err *mine, int64_t t, unsigned rank, const tern_error *e)
{
    if (mine->has && !key_less(t, rank, mine->t, mine->rank))
        return;
    mine->has = 1;
    mine->t = t;
    mine->rank = rank;
    mine->e = *e;
}

/* Step local rank r: until it joins the head collective (mode 0), while its next step precedes (bt, br) (mode 1),
 * or until it finishes or blocks (mode 2). */
static void dist_advance(ranks_run *run, unsigned r, int mode, int64_t bt, unsigned br, int *done, dist_err *mine,
                         tern_error *err)
{
    for (;;) {
        if (mode == 0 && run->jq[r].n > run->jq[r].head)
            return;
        int64_t t;
        int k = sched_peek(run->s[r], &t);
        if (k == 0)
            done[r] = 1;
        if (k <= 0)
            return;
        if (mode == 1 && !key_less(t, r, bt, br))
            return;
        /* after a failure, only the steps before it (which one process would also have made, and which may fail
         * earlier) */
        if (mine->has && !key_less(t, r, mine->t, mine->rank))
            return;
        run->pick_t = t;
        if (sched_step(run->s[r], err)) {
            tern_error_prefix(err, "rank %u: ", r);
            dist_fail(mine, t, r, err);
            return;
        }
    }
}

typedef struct {
    uint32_t rank, done, joined, pad;
    uint32_t op, dtype;
    uint64_t count;
    char why[704];
} rank_state;

/* Nothing can proceed and collectives are pending (or a rank is blocked): the error stuck() gives in one process,
 * from every process's ranks. */
static tern_status dist_stuck(ranks_run *run, const int *done, tern_error *err)
{
    unsigned R = run->R;
    size_t nl = 0;
    for (unsigned r = 0; r < R; r++)
        nl += run->local[r];
    rank_state *mine = calloc(nl ? nl : 1, sizeof *mine);
    if (!mine)
        run->t->abort(run->t->ctx, "multi-rank run: out of memory describing a deadlock");
    size_t i = 0;
    for (unsigned r = 0; r < R; r++) {
        if (!run->local[r])
            continue;
        rank_state *s = &mine[i++];
        s->rank = r;
        s->done = (uint32_t)done[r];
        s->joined = run->jq[r].n > run->jq[r].head;
        if (s->joined) {
            const join_rec *j = &run->jq[r].q[run->jq[r].head];
            s->op = j->desc.op;
            s->dtype = j->desc.dtype;
            s->count = j->desc.count;
        }
        if (!done[r])
            sched_describe(run->s[r], s->why, sizeof s->why);
    }
    void *recv = NULL;
    tern_status st = dist_allgather(run->t, mine, nl * sizeof *mine, &recv, err);
    free(mine);
    if (st)
        run->t->abort(run->t->ctx, err->msg);
    rank_state *all = calloc(R, sizeof *all);
    if (!all)
        run->t->abort(run->t->ctx, "multi-rank run: out of memory describing a deadlock");
    /* every process owns at least one rank, and each sent its own in rank order */
    for (unsigned k = 0; k < R; k++) {
        const rank_state *s = (const rank_state *)recv + k;
        all[s->rank] = *s;
    }
    free(recv);
    unsigned first = R;
    for (unsigned r = 0; r < R && first == R; r++)
        if (all[r].joined)
            first = r;
    if (first == R) {
        for (unsigned r = 0; r < R; r++)
            if (!all[r].done) {
                st = tern_error_set(err, TERN_ERR_INVALID, "rank %u: run: deadlock: %s", r, all[r].why);
                free(all);
                return st;
            }
        free(all);
        return TERN_OK;
    }
    char joined[256] = "", missing[512] = "";
    size_t aj = 0, am = 0;
    for (unsigned r = 0; r < R; r++) {
        if (all[r].joined) {
            if (aj + 16 < sizeof joined)
                aj += (size_t)snprintf(joined + aj, sizeof joined - aj, "%s%u", aj ? ", " : "", r);
        } else if (am + 200 < sizeof missing) {
            char why[160] = "its program ended";
            if (!all[r].done) { /* truncated to why[] on purpose: the message stays one line */
                size_t n = 0;
                while (n < sizeof why - 1 && all[r].why[n])
                    n++;
                memcpy(why, all[r].why, n);
                why[n] = '\0';
            }
            am += (size_t)snprintf(missing + am, sizeof missing - am, "%srank %u (%s)", am ? "; " : "", r, why);
        }
    }
    st = tern_error_set(err, TERN_ERR_INVALID,
                        "collective #%llu (%s, %s, %llu elements): ranks %s joined, but these ranks never join it "
                        "(a deadlock): %s",
                        (unsigned long long)tern_coll_comm_seq(run->comm) + 1,
                        tern_coll_op_name((tern_coll_op)all[first].op), tern_dtype_name((tern_dtype)all[first].dtype),
                        (unsigned long long)all[first].count, joined, missing);
    free(all);
    return st;
}

static tern_status dist_loop(ranks_run *run, int *done, dist_err *mine, tern_error *err)
{
    const tern_transport *t = run->t;
    unsigned R = run->R;
    tern_status st;
    for (;;) {
        /* a rank that has not joined the head collective runs until it does (or finishes, or blocks) */
        for (unsigned r = 0; r < R; r++)
            if (run->local[r])
                dist_advance(run, r, 0, 0, 0, done, mine, err);
        if ((st = dist_agree(run, mine, err)))
            return st;
        uint64_t all_in = 1; /* every rank joined the head */
        for (unsigned r = 0; r < R; r++)
            if (run->local[r])
                all_in &= (uint64_t)(run->jq[r].n > run->jq[r].head);
        if ((st = t->allreduce(t->ctx, &all_in, 1, TERN_XOP_MIN, err)))
            t->abort(t->ctx, err->msg);
        if (!all_in) {
            /* a rank that has not joined finished or waits for a semaphore only a collective can raise: the head
             * never runs, so every rank runs as far as it can, as in one process, and the result is said */
            for (unsigned r = 0; r < R; r++)
                if (run->local[r])
                    dist_advance(run, r, 2, 0, 0, done, mine, err);
            if ((st = dist_agree(run, mine, err)))
                return st;
            uint64_t all_done = 1;
            for (unsigned r = 0; r < R; r++)
                if (run->local[r])
                    all_done &= (uint64_t)(done[r] && run->jq[r].n == run->jq[r].head);
            if ((st = t->allreduce(t->ctx, &all_done, 1, TERN_XOP_MIN, err)))
                t->abort(t->ctx, err->msg);
            if (all_done)
                return TERN_OK;
            st = dist_stuck(run, done, err);
            if (!st)
                st = tern_error_set(err, TERN_ERR_INVALID, "multi-rank run: no rank can proceed");
            return st;
        }
        /* the last join: the largest (start, rank) among the head's joins */
        uint64_t lt = 0, lr = 0;
        for (unsigned r = 0; r < R; r++)
            if (run->local[r] && (uint64_t)run->jq[r].q[run->jq[r].head].key_t > lt)
                lt = (uint64_t)run->jq[r].q[run->jq[r].head].key_t;
        if ((st = t->allreduce(t->ctx, &lt, 1, TERN_XOP_MAX, err)))
            t->abort(t->ctx, err->msg);
        for (unsigned r = 0; r < R; r++)
            if (run->local[r] && (uint64_t)run->jq[r].q[run->jq[r].head].key_t == lt && r > lr)
                lr = r;
        if ((st = t->allreduce(t->ctx, &lr, 1, TERN_XOP_MAX, err)))
            t->abort(t->ctx, err->msg);
        /* everything that comes before it, on every rank */
        for (unsigned r = 0; r < R; r++)
            if (run->local[r])
                dist_advance(run, r, 1, (int64_t)lt, (unsigned)lr, done, mine, err);
        if ((st = dist_agree(run, mine, err)))
            return st;
        if ((st = run_head(run, err)))
            dist_fail(mine, (int64_t)lt, (unsigned)lr, err);
        if ((st = dist_agree(run, mine, err)))
            return st;
    }
}

/* After the run: every process gets every rank's statistics (rank 0's process prints them). */
static tern_status dist_share_stats(ranks_run *run, tern_run_stats *stats, tern_error *err)
{
    unsigned R = run->R;
    typedef struct {
        uint64_t rank;
        tern_run_stats s;
    } rec;
    size_t nl = 0;
    for (unsigned r = 0; r < R; r++)
        nl += run->local[r];
    rec *mine = calloc(nl ? nl : 1, sizeof *mine);
    if (!mine)
        return tern_error_set(err, TERN_ERR_NOMEM, "multi-rank run: out of memory");
    size_t i = 0;
    for (unsigned r = 0; r < R; r++)
        if (run->local[r])
            mine[i++] = (rec){r, stats[r]};
    void *recv = NULL;
    tern_status st = dist_allgather(run->t, mine, nl * sizeof *mine, &recv, err);
    free(mine);
    if (st)
        return st;
    for (unsigned k = 0; k < R; k++) {
        const rec *x = (const rec *)recv + k;
        stats[x->rank] = x->s;
    }
    free(recv);
    return TERN_OK;
}

tern_status tern_ranks_run(tern_fabric *f, tern_core *const *cores, const tern_program *const *progs,
                           tern_run_stats *stats, tern_ranks_result *res, tern_error *err)
{
    unsigned R = tern_fabric_ranks(f);
    if (res)
        memset(res, 0, sizeof *res);
    const tern_transport *tr = tern_fabric_transport(f);
    /* under a transport, another process's rank may have no core here (NULL) */
    unsigned c0 = 0;
    while (c0 + 1 < R && !cores[c0])
        c0++;
    if (!cores[c0] || (!tr && c0 != 0))
        return tern_error_set(err, TERN_ERR_INVALID, "multi-rank run: rank %u has no core", c0);
    int functional = cores[c0]->opts.mode == TERN_MODE_FUNCTIONAL;
    for (unsigned r = c0 + 1; r < R; r++) {
        if (!cores[r] && (!tr || tern_fabric_rank_is_local(f, r)))
            return tern_error_set(err, TERN_ERR_INVALID, "multi-rank run: rank %u has no core", r);
        if (cores[r] && (cores[r]->opts.mode == TERN_MODE_FUNCTIONAL) != functional)
            return tern_error_set(err, TERN_ERR_INVALID, "multi-rank run: rank %u's core is %s, rank %u's %s", r,
                                  functional ? "timing-only" : "functional", c0,
                                  functional ? "functional" : "timing-only");
    }
    ranks_run run;
    memset(&run, 0, sizeof run);
    run.f = f;
    run.R = R;
    run.cores = cores;
    run.functional = functional;
    run.res = res;
    run.s = calloc(R, sizeof *run.s);
    run.jq = calloc(R, sizeof *run.jq);
    run.hc = calloc(R, sizeof *run.hc);
    int *done = calloc(R, sizeof *done);
    tern_run_stats *local = stats ? NULL : calloc(R, sizeof *local);
    unsigned char *mine = tr ? calloc(R, 1) : NULL;
    dist_err derr;
    memset(&derr, 0, sizeof derr);
    tern_status st = TERN_OK;
    if (tr) {
        run.t = tr;
        run.local = mine;
        for (unsigned r = 0; mine && r < R; r++)
            mine[r] = (unsigned char)tern_fabric_rank_is_local(f, r);
    }
    if (!run.s || !run.jq || !run.hc || !done || (!stats && !local) || (tr && !mine))
        st = tern_error_set(err, TERN_ERR_NOMEM, "multi-rank run: out of memory for %u ranks", R);
    if (!st)
        st = tern_coll_comm_create(f, &run.comm, err);
    if (!stats)
        stats = local;
    if (st && tr) /* out of memory on this process alone: the others would wait for it */
        tr->abort(tr->ctx, err->msg);
    for (unsigned r = 0; !st && r < R; r++) {
        /* every run starts from zero semaphores and registers (the builder counts from 0), then the rank id and
         * the rank count in the last two registers of every engine */
        if (tr && !mine[r])
            continue;
        tern_core *c = cores[r];
        tern_core_reset_control(c);
        unsigned NR = c->cfg.num_registers;
        if (NR >= 2)
            for (unsigned e = 0; e < TERN_ENGINE_COUNT; e++) {
                c->registers[(size_t)e * NR + NR - 1] = (int32_t)r;
                c->registers[(size_t)e * NR + NR - 2] = (int32_t)R;
            }
        run.hc[r].run = &run;
        run.hc[r].rank = r;
        if ((st = sched_begin(c, progs[r], &stats[r], on_join, &run.hc[r], &run.s[r], err))) {
            tern_error_prefix(err, "rank %u: ", r);
            if (tr)
                dist_fail(&derr, INT64_MIN, r, err);
        }
    }
    if (tr) { /* a bad program on some rank fails every process alike (the lowest such rank is said) */
        st = dist_agree(&run, &derr, err);
        if (!st)
            st = dist_loop(&run, done, &derr, err);
    }
    while (!st && !tr) {
        unsigned pick = R;
        int64_t best = INT64_MAX;
        for (unsigned r = 0; r < R; r++) {
            if (done[r])
                continue;
            int64_t t;
            int k = sched_peek(run.s[r], &t);
            if (k == 0)
                done[r] = 1;
            else if (k > 0 && t < best) {
                best = t;
                pick = r;
            }
        }
        if (pick == R) {
            int all_done = 1;
            for (unsigned r = 0; r < R; r++)
                all_done &= done[r];
            int pending = 0;
            for (unsigned r = 0; r < R; r++)
                pending |= run.jq[r].n > run.jq[r].head;
            if (all_done && !pending)
                break;
            st = stuck(&run, done, err);
            if (!st)
                st = tern_error_set(err, TERN_ERR_INVALID, "multi-rank run: no rank can proceed");
            break;
        }
        size_t before = run.jq[pick].n;
        run.pick_t = best;
        if ((st = sched_step(run.s[pick], err))) {
            tern_error_prefix(err, "rank %u: ", pick);
            break;
        }
        if (run.jq[pick].n == before)
            continue;
        int all = 1; /* a join: run the head collective once every rank has joined it */
        for (unsigned r = 0; r < R && all; r++)
            all = run.jq[r].n > run.jq[r].head;
        if (all && (st = run_head(&run, err)))
            break;
    }
    for (unsigned r = 0; run.s && r < R; r++) {
        tern_status e2 = sched_end(run.s[r], st);
        if (!st && e2)
            st = e2;
    }
    if (tr && !st && (st = dist_share_stats(&run, stats, err)))
        tr->abort(tr->ctx, err->msg);
    int64_t slowest = 0;
    for (unsigned r = 0; r < R; r++) {
        if (!st && stats[r].time_ps > slowest)
            slowest = stats[r].time_ps;
        if (run.jq) {
            for (size_t i = run.jq[r].head; i < run.jq[r].n; i++)
                join_free(&run.jq[r].q[i]);
            free(run.jq[r].q);
        }
    }
    if (res) {
        res->time_ps = slowest;
        if (st)
            tern_ranks_result_free(res);
    }
    tern_coll_comm_free(run.comm);
    free(run.s);
    free(run.jq);
    free(run.hc);
    free(done);
    free(local);
    free(mine);
    return st;
}
