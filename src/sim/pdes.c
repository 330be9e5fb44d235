/* Conservative parallel discrete-event simulation of a collective's schedule (docs/multichip.md, "MPI"). The
 * fabric's chips are spread over K processes (tern_fabric_set_transport); a process serves the events of its own
 * ranks and the reservations of its own resources (the ranks' DMA, its chips' HBM, the links leaving its chips,
 * their EFA share). Time advances in windows [T, T + lookahead): T is the earliest pending event anywhere, and the
 * lookahead is tern_fabric_min_latency_ps, a lower bound on (completion - start) of any transfer, so no event
 * inside a window can create another inside it (an event without pulls completes at its own time; those chains
 * are resolved first, round by round, before any resource is touched). In a window every process sends each
 * pull's reservations (time, rank, pull index, resource, occupancy) to the resource's owner; the owner serves all
 * it received in (time, rank, pull index) order, which is exactly the order of the one-process loop in
 * collective.c, and answers with the end times; completions travel to the events that wait for them. Each
 * resource therefore sees the same reservations in the same order whatever K is, so every picosecond is the same.
 * The functional pass moves each step's data between processes in one exchange per step, in pull order.
 * tern_transport_single, the one-process transport, is here too: it runs this engine without MPI. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/coll_sched.h"
#include "tern/transport.h"

/* ---- the one-process transport ---- */

static tern_status single_exchange(void *ctx, const void *send, const uint64_t *scount, void **recv,
                                   uint64_t *rcount, tern_error *err)
{
    (void)ctx;
    *recv = NULL;
    rcount[0] = scount[0];
    if (scount[0]) {
        if (!(*recv = malloc(scount[0])))
            return tern_error_set(err, TERN_ERR_NOMEM, "transport: out of memory for %llu bytes",
                                  (unsigned long long)scount[0]);
        memcpy(*recv, send, scount[0]);
    }
    return TERN_OK;
}

static tern_status single_allreduce(void *ctx, uint64_t *v, size_t n, tern_xop op, tern_error *err)
{
    (void)ctx, (void)v, (void)n, (void)op, (void)err;
    return TERN_OK;
}

static tern_status single_gather(void *ctx, uint64_t tag, const void *mine, size_t bytes, void *all,
                                 unsigned char *missing, uint64_t timeout_ms, tern_error *err)
{
    (void)ctx, (void)tag, (void)timeout_ms, (void)err;
    memcpy(all, mine, bytes);
    missing[0] = 0;
    return TERN_OK;
}

static void single_abort(void *ctx, const char *msg)
{
    (void)ctx;
    fprintf(stderr, "%s\n", msg);
    abort(); /* one process: nothing else to end */
}

static const tern_transport SINGLE = {1, 0, NULL, single_exchange, single_allreduce, single_gather, single_abort};

const tern_transport *tern_transport_single(void) { return &SINGLE; }

/* ---- per-process outboxes ---- */

typedef struct {
    unsigned char *p;
    size_t n, cap;
} bbuf;

static int bb_put(bbuf *b, const void *data, size_t n)
{
    if (!n)
        return 1; /* nothing to add (data may be NULL: an empty block) */
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->n + n)
            cap *= 2;
        unsigned char *q = realloc(b->p, cap);
        if (!q)
            return 0;
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->n, data, n);
    b->n += n;
    return 1;
}

/* Send every outbox to its process (one exchange) and empty them; *recv holds what came, rcount per process. */
static tern_status flush(const tern_transport *t, bbuf *to, uint64_t *scount, void **recv, uint64_t *rcount,
                         tern_error *err)
{
    size_t total = 0;
    for (unsigned q = 0; q < t->nprocs; q++)
        total += to[q].n;
    unsigned char *send = total ? malloc(total) : NULL;
    if (total && !send)
        return tern_error_set(err, TERN_ERR_NOMEM, "collective engine: out of memory for %zu bytes of messages",
                              total);
    size_t at = 0;
    for (unsigned q = 0; q < t->nprocs; q++) {
        if (to[q].n)
            memcpy(send + at, to[q].p, to[q].n);
        at += to[q].n;
        scount[q] = to[q].n;
        to[q].n = 0;
    }
    tern_status st = t->exchange(t->ctx, send, scount, recv, rcount, err);
    free(send);
    return st;
}

/* ---- the timing engine ---- */

typedef struct {
    uint64_t key, t;
} note; /* event `key` gets an input that completed at t */

typedef struct {
    uint64_t t, i, res, occ;
    uint32_t rank, slot;
} request; /* reserve `res` for `occ` from t, on behalf of pull i of `rank`'s event */

typedef struct {
    request q;
    uint32_t from;
} inbound;

typedef struct {
    uint64_t slot, end;
} reply;

typedef struct {
    tern_fabric *f;
    const coll_plan *p;
    const tern_transport *t;
    unsigned me;
    const unsigned *owner; /* rank -> process */
    uint32_t *deps;
    uint64_t *ready;
    coll_event *heap;
    size_t nh;
    bbuf *notes;
    uint64_t span, done;
    int oom;
} engine;

static void arrive(engine *e, size_t key, uint64_t t)
{
    if (e->ready[key] < t)
        e->ready[key] = t;
    if (--e->deps[key] == 0)
        coll_heap_push(e->heap, &e->nh,
                       (coll_event){e->ready[key], (uint32_t)(key % e->p->R), (uint32_t)(key / e->p->R),
                                    e->p->begin[key] == e->p->begin[key + 1]});
}

static void complete(engine *e, coll_event ev, uint64_t end)
{
    const coll_plan *p = e->p;
    if (end > e->span)
        e->span = end;
    e->done++;
    if ((unsigned)ev.step + 1 >= p->S)
        return;
    size_t key = (size_t)ev.step * p->R + ev.rank, next = key + p->R - ev.rank;
    arrive(e, key + p->R, end);
    for (size_t i = p->rbegin[key]; i < p->rbegin[key + 1]; i++) {
        unsigned r = p->readers[i], q = e->owner[r];
        if (q == e->me)
            arrive(e, next + r, end);
        else if (!bb_put(&e->notes[q], &(note){next + r, end}, sizeof(note)))
            e->oom = 1;
    }
}

static tern_status send_notes(engine *e, uint64_t *scount, uint64_t *rcount, tern_error *err)
{
    void *recv = NULL;
    tern_status st = flush(e->t, e->notes, scount, &recv, rcount, err);
    if (st)
        return st;
    size_t total = 0;
    for (unsigned q = 0; q < e->t->nprocs; q++)
        total += rcount[q];
    const note *n = recv;
    for (size_t i = 0; i < total / sizeof(note); i++)
        arrive(e, n[i].key, n[i].t);
    free(recv);
    return TERN_OK;
}

static int inbound_less(const void *a, const void *b)
{
    const request *x = &((const inbound *)a)->q, *y = &((const inbound *)b)->q;
    if (x->t != y->t)
        return x->t < y->t ? -1 : 1;
    if (x->rank != y->rank)
        return x->rank < y->rank ? -1 : 1;
    if (x->i != y->i)
        return x->i < y->i ? -1 : 1;
    return x->res < y->res ? -1 : x->res > y->res;
}

tern_status coll_pdes_time(tern_fabric *f, const coll_plan *p, const tern_coll_desc *d, uint64_t *span,
                           tern_error *err)
{
    const tern_transport *t = tern_fabric_transport(f);
    unsigned K = t->nprocs, R = p->R, S = p->S;
    size_t es = tern_dtype_size(d->dtype);
    const char *name = tern_coll_op_name(d->op);
    uint64_t L = tern_fabric_min_latency_ps(f);
    if (L == 0)
        return tern_error_set(err, TERN_ERR_UNSUPPORTED,
                              "%s over %u processes: the fabric's smallest transfer latency is 0 ps (dma.fixed_cost "
                              "and link_latency are 0), which leaves the conservative simulation no lookahead",
                              name, K);
    engine e = {f, p, t, t->me, NULL, NULL, NULL, NULL, 0, NULL, 0, 0, 0};
    unsigned *owner = malloc(sizeof *owner * (R ? R : 1));
    uint64_t *scount = calloc(K, sizeof *scount), *rcount = calloc(K, sizeof *rcount);
    bbuf *req = calloc(K, sizeof *req), *rep = calloc(K, sizeof *rep);
    e.notes = calloc(K, sizeof *e.notes);
    e.deps = malloc(sizeof *e.deps * (p->keys ? p->keys : 1));
    e.ready = calloc(p->keys ? p->keys : 1, sizeof *e.ready);
    e.heap = malloc(sizeof *e.heap * (p->keys ? p->keys : 1));
    coll_event *win = malloc(sizeof *win * (p->keys ? p->keys : 1));
    uint64_t *xend = malloc(sizeof *xend * (p->np ? p->np : 1)), *xlat = malloc(sizeof *xlat * (p->np ? p->np : 1));
    inbound *in = NULL;
    void *recv = NULL;
    tern_status st = TERN_OK;
    if (!owner || !scount || !rcount || !req || !rep || !e.notes || !e.deps || !e.ready || !e.heap || !win || !xend ||
        !xlat) {
        st = tern_error_set(err, TERN_ERR_NOMEM, "%s: out of memory for the distributed schedule", name);
        goto done;
    }
    e.owner = owner;
    for (unsigned r = 0; r < R; r++)
        owner[r] = tern_fabric_rank_owner(f, r);
    memcpy(e.deps, p->deps, sizeof *e.deps * p->keys);
    tern_fabric_reset(f);
    for (unsigned r = 0; S && r < R; r++)
        if (owner[r] == e.me)
            coll_heap_push(e.heap, &e.nh, (coll_event){0, r, 0, p->begin[r] == p->begin[r + 1]});
    for (;;) {
        uint64_t T = e.nh ? e.heap[0].t : UINT64_MAX;
        if ((st = t->allreduce(t->ctx, &T, 1, TERN_XOP_MIN, err)))
            goto done;
        if (T == UINT64_MAX)
            break;
        uint64_t W = T > UINT64_MAX - L ? UINT64_MAX : T + L;
        size_t nwin = 0;
        /* events without pulls complete at their own time: settle those chains (across processes) first */
        for (;;) {
            while (e.nh && e.heap[0].t < W) {
                coll_event ev = coll_heap_pop(e.heap, &e.nh);
                size_t key = (size_t)ev.step * R + ev.rank;
                if (p->begin[key] == p->begin[key + 1])
                    complete(&e, ev, ev.t);
                else
                    win[nwin++] = ev;
            }
            /* usually no process has such an event: one reduction says so, and the exchange is skipped */
            uint64_t pending = 0;
            for (unsigned q = 0; q < K; q++)
                pending |= e.notes[q].n != 0;
            if (e.oom || (st = t->allreduce(t->ctx, &pending, 1, TERN_XOP_MAX, err)))
                goto fail;
            if (!pending)
                break;
            if ((st = send_notes(&e, scount, rcount, err)))
                goto fail;
        }
        /* every pull of the window asks its resources' owners */
        size_t nslot = 0;
        for (size_t w = 0; w < nwin; w++) {
            size_t key = (size_t)win[w].step * R + win[w].rank;
            for (size_t i = p->begin[key]; i < p->begin[key + 1]; i++, nslot++) {
                const coll_pull *pl = &p->pull[i];
                tern_fabric_xfer x = {pl->src, pl->dst, pl->n * es, pl->reduce, win[w].t, i, pl->dup};
                uint64_t res[TERN_FABRIC_ROUTE_MAX], occ[TERN_FABRIC_ROUTE_MAX];
                unsigned n = tern_fabric_route_resources(f, &x, res, occ, &xlat[nslot]);
                xend[nslot] = win[w].t;
                for (unsigned k = 0; k < n; k++) {
                    request q = {win[w].t, i, res[k], occ[k], win[w].rank, (uint32_t)nslot};
                    if (!bb_put(&req[tern_fabric_resource_owner(f, res[k])], &q, sizeof q))
                        e.oom = 1;
                }
            }
        }
        if (e.oom || (st = flush(t, req, scount, &recv, rcount, err)))
            goto fail;
        /* serve what came, in the one-process loop's order */
        {
            size_t total = 0;
            for (unsigned q = 0; q < K; q++)
                total += rcount[q] / sizeof(request);
            inbound *grown = realloc(in, sizeof *in * (total ? total : 1));
            if (!grown) {
                e.oom = 1;
                goto fail;
            }
            in = grown;
            const request *rq = recv;
            size_t k = 0;
            for (unsigned q = 0; q < K; q++)
                for (size_t j = 0; j < rcount[q] / sizeof(request); j++, k++)
                    in[k] = (inbound){rq[k], q};
            free(recv);
            recv = NULL;
            qsort(in, total, sizeof *in, inbound_less);
            for (size_t j = 0; j < total; j++) {
                reply r = {in[j].q.slot, tern_fabric_reserve(f, in[j].q.res, in[j].q.t, in[j].q.occ)};
                if (!bb_put(&rep[in[j].from], &r, sizeof r))
                    e.oom = 1;
            }
        }
        if (e.oom || (st = flush(t, rep, scount, &recv, rcount, err)))
            goto fail;
        {
            size_t total = 0;
            for (unsigned q = 0; q < K; q++)
                total += rcount[q] / sizeof(reply);
            const reply *rp = recv;
            for (size_t j = 0; j < total; j++)
                if (rp[j].end > xend[rp[j].slot])
                    xend[rp[j].slot] = rp[j].end;
            free(recv);
            recv = NULL;
        }
        nslot = 0;
        for (size_t w = 0; w < nwin; w++) {
            size_t key = (size_t)win[w].step * R + win[w].rank;
            uint64_t end = win[w].t;
            for (size_t i = p->begin[key]; i < p->begin[key + 1]; i++, nslot++)
                if (xend[nslot] + xlat[nslot] > end)
                    end = xend[nslot] + xlat[nslot];
            complete(&e, win[w], end);
        }
        if (e.oom || (st = send_notes(&e, scount, rcount, err)))
            goto fail;
    }
    {
        uint64_t v[2] = {e.span, e.done};
        if ((st = t->allreduce(t->ctx, &v[0], 1, TERN_XOP_MAX, err)) ||
            (st = t->allreduce(t->ctx, &v[1], 1, TERN_XOP_SUM, err)))
            goto done;
        if (v[1] != p->keys) {
            st = tern_error_set(err, TERN_ERR_INVALID,
                                "%s: the distributed schedule completed %llu of its %zu events (an event waited for "
                                "an input that never came)", name, (unsigned long long)v[1], p->keys);
            goto done;
        }
        *span = v[0];
    }
    goto done;
fail:
    if (e.oom && !st)
        st = tern_error_set(err, TERN_ERR_NOMEM, "%s: out of memory for the distributed schedule's messages", name);
    /* the other processes wait in the next exchange: end the run with this message rather than leave them */
    if (K > 1)
        t->abort(t->ctx, err && err->msg[0] ? err->msg : "collective engine failed");
done:
    for (unsigned q = 0; req && rep && e.notes && q < K; q++) {
        free(req[q].p);
        free(rep[q].p);
        free(e.notes[q].p);
    }
    free(req);
    free(rep);
    free(e.notes);
    free(owner);
    free(scount);
    free(rcount);
    free(e.deps);
    free(e.ready);
    free(e.heap);
    free(win);
    free(xend);
    free(xlat);
    free(in);
    free(recv);
    return st;
}

/* ---- the functional pass ---- */

tern_status coll_pdes_move(tern_fabric *f, const coll_plan *p, const tern_coll_desc *d, const void *const *in,
                           void *const *out, uint64_t *host_bytes, tern_error *err)
{
    const tern_transport *t = tern_fabric_transport(f);
    unsigned K = t->nprocs, me = t->me, R = p->R;
    size_t es = tern_dtype_size(d->dtype);
    const char *name = tern_coll_op_name(d->op);
    unsigned *owner = malloc(sizeof *owner * (R ? R : 1));
    uint64_t *scount = calloc(K, sizeof *scount), *rcount = calloc(K, sizeof *rcount);
    size_t *cursor = calloc(K, sizeof *cursor);
    bbuf *to = calloc(K, sizeof *to);
    tern_status st = TERN_OK;
    uint64_t hb = 0;
    if (!owner || !scount || !rcount || !cursor || !to) {
        st = tern_error_set(err, TERN_ERR_NOMEM, "%s: out of memory", name);
        goto done;
    }
    for (unsigned r = 0; r < R; r++) {
        owner[r] = tern_fabric_rank_owner(f, r);
        if (owner[r] == me && (!in[r] || !out[r])) {
            st = tern_error_set(err, TERN_ERR_INVALID, "%s: rank %u (process %u) has no %s buffer", name, r, me,
                                in[r] ? "out" : "in");
            goto fail;
        }
    }
    if (d->op == TERN_COLL_ALL_REDUCE || d->op == TERN_COLL_ALL_GATHER || d->op == TERN_COLL_REDUCE_SCATTER)
        for (unsigned r = 0; r < R; r++)
            if (owner[r] == me && out[r] != in[r]) {
                memcpy(out[r], in[r], d->count * es);
                hb += 2 * d->count * es;
            }
    for (unsigned s = 0; s < p->S; s++) {
        size_t a = p->begin[(size_t)s * R], b = p->begin[(size_t)(s + 1) * R];
        /* every process knows the whole schedule, so all agree on whether this step crosses processes */
        int crosses = 0;
        for (size_t i = a; i < b && !crosses; i++)
            crosses = owner[p->pull[i].src] != owner[p->pull[i].dst];
        void *recv = NULL;
        if (crosses) {
            for (size_t i = a; i < b; i++) {
                const coll_pull *pl = &p->pull[i];
                if (owner[pl->src] != me || owner[pl->dst] == me)
                    continue;
                const unsigned char *src =
                    (const unsigned char *)(pl->src_in ? in[pl->src] : out[pl->src]) + pl->src_off * es;
                if (!bb_put(&to[owner[pl->dst]], src, pl->n * es)) {
                    st = tern_error_set(err, TERN_ERR_NOMEM, "%s: out of memory for step %u's data", name, s);
                    goto fail;
                }
            }
            if ((st = flush(t, to, scount, &recv, rcount, err)))
                goto fail;
            size_t at = 0;
            for (unsigned q = 0; q < K; q++) {
                cursor[q] = at;
                at += rcount[q];
            }
        }
        for (size_t i = a; i < b; i++) {
            const coll_pull *pl = &p->pull[i];
            if (owner[pl->dst] != me || !pl->n)
                continue; /* another process's, or an empty block (nothing sent for it; recv may be NULL) */
            const unsigned char *src;
            if (owner[pl->src] == me) {
                src = (const unsigned char *)(pl->src_in ? in[pl->src] : out[pl->src]) + pl->src_off * es;
            } else {
                src = (const unsigned char *)recv + cursor[owner[pl->src]];
                cursor[owner[pl->src]] += pl->n * es;
            }
            hb += coll_pull_apply(d, pl, src, in, out); /* the partner (KangaRing) is on dst's chip: here too */
        }
        free(recv);
    }
    if ((st = t->allreduce(t->ctx, &hb, 1, TERN_XOP_SUM, err)))
        goto done;
    *host_bytes = hb;
    goto done;
fail:
    if (K > 1)
        t->abort(t->ctx, err && err->msg[0] ? err->msg : "collective data movement failed");
done:
    for (unsigned q = 0; to && q < K; q++)
        free(to[q].p);
    free(to);
    free(owner);
    free(scount);
    free(rcount);
    free(cursor);
    return st;
}
