/* Collectives as SPMD programs call them (include/tern/collective.h, tern_coll_comm): each rank joins the next
 * collective with its own description and buffers, and the run checks what a real job gets wrong before anything
 * moves: a rank that never joined (in one process it simply has not called join; under MPI its process has not
 * arrived within the timeout, which would otherwise be a hang), and ranks that disagree on the operation, dtype,
 * reduction, count, algorithm, replica groups, permute pairs or all-to-allv counts and displacements. Each rank's
 * call is reduced to a fixed-size fingerprint (the arrays by a 64-bit hash), fingerprints travel between processes
 * by one gather with a deadline, and every process then reaches the same verdict from the same fingerprints, so a
 * deterministic error is reported identically everywhere (rank 0 prints it) and no process is left waiting. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tern/collective.h"
#include "tern/transport.h"

typedef struct {
    uint32_t joined, op, reduce, dtype, algo, ngroups, group_size, npairs, bufs, channels;
    uint64_t count, groups_h, pairs_h, vcounts_h, sdispls_h, rdispls_h;
} fingerprint;

struct tern_coll_comm {
    tern_fabric *f;
    unsigned R;
    uint64_t seq, timeout_ms;
    unsigned char *joined;
    tern_coll_desc *desc;
    const void **in;
    void **out;
    fingerprint *fp, *all;
    unsigned char *missing;
};

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

tern_status tern_coll_comm_create(tern_fabric *f, tern_coll_comm **out, tern_error *err)
{
    unsigned R = tern_fabric_ranks(f), K = tern_fabric_procs(f);
    tern_coll_comm *c = calloc(1, sizeof *c);
    if (c) {
        c->f = f;
        c->R = R;
        c->timeout_ms = 60000;
        c->joined = calloc(R, 1);
        c->desc = calloc(R, sizeof *c->desc);
        c->in = calloc(R, sizeof *c->in);
        c->out = calloc(R, sizeof *c->out);
        c->fp = calloc(R, sizeof *c->fp);
        c->all = calloc((size_t)R * K, sizeof *c->all);
        c->missing = calloc(K, 1);
    }
    if (!c || !c->joined || !c->desc || !c->in || !c->out || !c->fp || !c->all || !c->missing) {
        tern_coll_comm_free(c);
        return tern_error_set(err, TERN_ERR_NOMEM, "collective communicator: out of memory for %u ranks", R);
    }
    *out = c;
    return TERN_OK;
}

void tern_coll_comm_free(tern_coll_comm *c)
{
    if (!c)
        return;
    free(c->joined);
    free(c->desc);
    free(c->in);
    free(c->out);
    free(c->fp);
    free(c->all);
    free(c->missing);
    free(c);
}

void tern_coll_comm_set_timeout(tern_coll_comm *c, uint64_t ms) { c->timeout_ms = ms; }
uint64_t tern_coll_comm_seq(const tern_coll_comm *c) { return c->seq; }

tern_status tern_coll_comm_join(tern_coll_comm *c, unsigned rank, const tern_coll_desc *d, const void *in,
                                void *out, tern_error *err)
{
    const char *op = tern_coll_op_name(d->op);
    if (rank >= c->R)
        return tern_error_set(err, TERN_ERR_INVALID, "%s #%llu: rank %u out of range (the fabric has %u ranks)", op,
                              (unsigned long long)c->seq + 1, rank, c->R);
    if (!tern_fabric_rank_is_local(c->f, rank))
        return tern_error_set(err, TERN_ERR_INVALID, "%s #%llu: rank %u belongs to process %u, not this one (%u)",
                              op, (unsigned long long)c->seq + 1, rank, tern_fabric_rank_owner(c->f, rank),
                              tern_fabric_proc(c->f));
    if (c->joined[rank])
        return tern_error_set(err, TERN_ERR_INVALID, "%s #%llu: rank %u joined twice", op,
                              (unsigned long long)c->seq + 1, rank);
    if ((in == NULL) != (out == NULL))
        return tern_error_set(err, TERN_ERR_INVALID, "%s #%llu: rank %u gave an %s buffer but no %s buffer", op,
                              (unsigned long long)c->seq + 1, rank, in ? "in" : "out", in ? "out" : "in");
    c->joined[rank] = 1;
    c->desc[rank] = *d;
    c->in[rank] = in;
    c->out[rank] = out;
    fingerprint *p = &c->fp[rank];
    memset(p, 0, sizeof *p);
    p->joined = 1;
    p->op = (uint32_t)d->op;
    p->reduce = (uint32_t)d->reduce;
    p->dtype = (uint32_t)d->dtype;
    p->algo = (uint32_t)d->algo;
    p->channels = d->channels;
    p->count = d->count;
    p->bufs = in != NULL;
    if (d->groups) {
        p->ngroups = d->ngroups;
        p->group_size = d->group_size;
        p->groups_h = fnv(0xcbf29ce484222325ull, d->groups, sizeof *d->groups * (size_t)d->ngroups * d->group_size);
    }
    if (d->op == TERN_COLL_PERMUTE && d->pairs) {
        p->npairs = d->npairs;
        p->pairs_h = fnv(0xcbf29ce484222325ull, d->pairs, sizeof *d->pairs * 2 * (size_t)d->npairs);
    }
    if (d->op == TERN_COLL_ALL_TO_ALLV) {
        size_t n = d->groups ? d->group_size : c->R;
        if (d->vcounts)
            p->vcounts_h = fnv(0xcbf29ce484222325ull, d->vcounts, sizeof *d->vcounts * n * n);
        if (d->sdispls) /* 0: back to back (a table's hash is never 0 in practice) */
            p->sdispls_h = fnv(0xcbf29ce484222325ull, d->sdispls, sizeof *d->sdispls * n * n);
        if (d->rdispls)
            p->rdispls_h = fnv(0xcbf29ce484222325ull, d->rdispls, sizeof *d->rdispls * n * n);
    }
    return TERN_OK;
}

/* "0..3, 7, 9..12" (at most ~200 characters, then "...") */
static void rank_list(const unsigned char *set, unsigned R, char *buf, size_t cap)
{
    size_t at = 0;
    buf[0] = 0;
    for (unsigned r = 0; r < R; r++) {
        if (!set[r])
            continue;
        unsigned e = r;
        while (e + 1 < R && set[e + 1])
            e++;
        if (at + 40 > cap) {
            snprintf(buf + at, cap - at, ", ...");
            return;
        }
        at += (size_t)(e > r ? snprintf(buf + at, cap - at, "%s%u..%u", at ? ", " : "", r, e)
                             : snprintf(buf + at, cap - at, "%s%u", at ? ", " : "", r));
        r = e;
    }
}

typedef enum {
    F_OP, F_DTYPE, F_REDUCE, F_COUNT, F_ALGO, F_GROUPS, F_PAIRS, F_VCOUNTS, F_SDISPLS, F_RDISPLS, F_BUFS, F_COUNT_
} field;
static const char *const FIELD_NAMES[] = {"operation", "dtype", "reduction", "count", "algorithm",
                                          "replica groups", "permute pairs", "all-to-allv counts",
                                          "all-to-allv send displacements", "all-to-allv receive displacements",
                                          "buffers"};

static void value_of(const fingerprint *p, field k, char *buf, size_t cap)
{
    switch (k) {
    case F_OP: snprintf(buf, cap, "%s", tern_coll_op_name((tern_coll_op)p->op)); break;
    case F_DTYPE: snprintf(buf, cap, "%s", tern_dtype_name((tern_dtype)p->dtype)); break;
    case F_REDUCE: snprintf(buf, cap, "%s", tern_reduce_op_name((tern_reduce_op)p->reduce)); break;
    case F_COUNT: snprintf(buf, cap, "%llu elements", (unsigned long long)p->count); break;
    case F_ALGO:
        if (p->channels)
            snprintf(buf, cap, "%s (at most %u ring channels)", tern_coll_algo_name((tern_coll_algo)p->algo),
                     p->channels);
        else
            snprintf(buf, cap, "%s", tern_coll_algo_name((tern_coll_algo)p->algo));
        break;
    case F_GROUPS:
        if (p->ngroups)
            snprintf(buf, cap, "%u groups of %u (hash %016llx)", p->ngroups, p->group_size,
                     (unsigned long long)p->groups_h);
        else
            snprintf(buf, cap, "one group of all ranks");
        break;
    case F_PAIRS: snprintf(buf, cap, "%u pairs (hash %016llx)", p->npairs, (unsigned long long)p->pairs_h); break;
    case F_VCOUNTS: snprintf(buf, cap, "counts hash %016llx", (unsigned long long)p->vcounts_h); break;
    case F_SDISPLS:
    case F_RDISPLS: {
        uint64_t h = k == F_SDISPLS ? p->sdispls_h : p->rdispls_h;
        if (h)
            snprintf(buf, cap, "displacements hash %016llx", (unsigned long long)h);
        else
            snprintf(buf, cap, "none (back to back)");
        break;
    }
    default: snprintf(buf, cap, "%s", p->bufs ? "buffers (functional)" : "no buffers (timing-only)"); break;
    }
}

static int differs(const fingerprint *a, const fingerprint *b, field k)
{
    switch (k) {
    case F_OP: return a->op != b->op;
    case F_DTYPE: return a->dtype != b->dtype;
    case F_REDUCE:
        return a->reduce != b->reduce && (a->op == TERN_COLL_ALL_REDUCE || a->op == TERN_COLL_REDUCE_SCATTER);
    case F_COUNT: return a->count != b->count;
    case F_ALGO: return a->algo != b->algo || a->channels != b->channels;
    case F_GROUPS: return a->ngroups != b->ngroups || a->group_size != b->group_size || a->groups_h != b->groups_h;
    case F_PAIRS: return a->npairs != b->npairs || a->pairs_h != b->pairs_h;
    case F_VCOUNTS: return a->vcounts_h != b->vcounts_h;
    case F_SDISPLS: return a->sdispls_h != b->sdispls_h;
    case F_RDISPLS: return a->rdispls_h != b->rdispls_h;
    default: return a->bufs != b->bufs;
    }
}

/* "ranks 0..31 pass 256 elements, ranks 32..63 pass 512 elements": runs of equal values in rank order */
static void runs_of(const fingerprint *fp, unsigned R, field k, char *buf, size_t cap)
{
    size_t at = 0;
    unsigned shown = 0;
    buf[0] = 0;
    for (unsigned r = 0; r < R;) {
        unsigned e = r;
        while (e + 1 < R && !differs(&fp[r], &fp[e + 1], k))
            e++;
        char v[96];
        value_of(&fp[r], k, v, sizeof v);
        if (shown == 6 || at + 160 > cap) {
            snprintf(buf + at, cap - at, ", ...");
            return;
        }
        at += (size_t)(e > r ? snprintf(buf + at, cap - at, "%sranks %u..%u pass %s", at ? ", " : "", r, e, v)
                             : snprintf(buf + at, cap - at, "%srank %u passes %s", at ? ", " : "", r, v));
        shown++;
        r = e + 1;
    }
}

tern_status tern_coll_comm_run(tern_coll_comm *c, tern_coll_result *res, tern_error *err)
{
    const tern_transport *t = tern_fabric_transport(c->f);
    unsigned R = c->R, K = tern_fabric_procs(c->f);
    uint64_t n = ++c->seq;
    tern_status st = TERN_OK;
    /* the first rank this process joined names the collective in messages before the fingerprints agree */
    const tern_coll_desc *mine = NULL;
    for (unsigned r = 0; r < R && !mine; r++)
        if (c->joined[r])
            mine = &c->desc[r];
    const char *name = mine ? tern_coll_op_name(mine->op) : "collective";
    for (unsigned r = 0; r < R; r++)
        if (!c->joined[r] || !tern_fabric_rank_is_local(c->f, r))
            memset(&c->fp[r], 0, sizeof c->fp[r]);
    if (t && K > 1) {
        if (t->gather(t->ctx, n, c->fp, sizeof *c->fp * R, c->all, c->missing, c->timeout_ms, err)) {
            unsigned char *absent = calloc(R, 1);
            char list[256] = "", msg[2048];
            if (absent) {
                for (unsigned r = 0; r < R; r++)
                    absent[r] = c->missing[tern_fabric_rank_owner(c->f, r)];
                rank_list(absent, R, list, sizeof list);
            }
            free(absent);
            snprintf(msg, sizeof msg,
                     "%s #%llu (%s, %llu elements): ranks %s never joined: %.600s (a deadlock: a process stopped or "
                     "runs a different sequence of collectives)", name, (unsigned long long)n,
                     mine ? tern_dtype_name(mine->dtype) : "?", mine ? (unsigned long long)mine->count : 0ull, list,
                     err->msg);
            t->abort(t->ctx, msg); /* the missing process may wait elsewhere forever: end them all */
        }
        for (unsigned r = 0; r < R; r++)
            c->fp[r] = c->all[(size_t)tern_fabric_rank_owner(c->f, r) * R + r];
    }
    unsigned char *absent = calloc(R, 1);
    char list[512], runs[1024];
    if (!absent) {
        st = tern_error_set(err, TERN_ERR_NOMEM, "%s #%llu: out of memory", name, (unsigned long long)n);
        goto out;
    }
    unsigned first = R, njoined = 0;
    for (unsigned r = 0; r < R; r++) {
        absent[r] = !c->fp[r].joined;
        if (c->fp[r].joined) {
            njoined++;
            if (first == R)
                first = r;
        }
    }
    if (njoined == 0) {
        st = tern_error_set(err, TERN_ERR_INVALID, "collective #%llu: no rank joined", (unsigned long long)n);
        goto out;
    }
    name = tern_coll_op_name((tern_coll_op)c->fp[first].op);
    if (njoined < R) {
        rank_list(absent, R, list, sizeof list);
        char v[96];
        value_of(&c->fp[first], F_DTYPE, v, sizeof v);
        st = tern_error_set(err, TERN_ERR_INVALID,
                            "%s #%llu (%s, %llu elements): rank%s %s never joined (%u of %u ranks did; every rank "
                            "must join each collective, or the others wait forever)", name, (unsigned long long)n, v,
                            (unsigned long long)c->fp[first].count, R - njoined == 1 ? "" : "s", list, njoined, R);
        goto out;
    }
    for (field k = 0; k < F_COUNT_; k++)
        for (unsigned r = 1; r < R; r++)
            if (differs(&c->fp[0], &c->fp[r], k)) {
                runs_of(c->fp, R, k, runs, sizeof runs);
                st = tern_error_set(err, TERN_ERR_INVALID, "%s #%llu: ranks disagree on the %s: %s", name,
                                    (unsigned long long)n, FIELD_NAMES[k], runs);
                goto out;
            }
    /* every process owns at least one rank (tern_fabric_set_transport), so each has the agreed description */
    {
        const tern_coll_desc *d = NULL;
        for (unsigned r = 0; r < R && !d; r++)
            if (tern_fabric_rank_is_local(c->f, r))
                d = &c->desc[r];
        TERN_ASSERT(d);
        if (c->fp[0].bufs)
            st = tern_collective_run(c->f, d, c->in, c->out, res, err);
        else
            st = tern_collective_time(c->f, d, res, err);
    }
out:
    free(absent);
    memset(c->joined, 0, R);
    memset(c->in, 0, sizeof *c->in * R);
    memset(c->out, 0, sizeof *c->out * R);
    return st;
}
