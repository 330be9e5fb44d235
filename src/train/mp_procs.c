/* A tensor/pipeline layout over MPI processes (docs/training.md, "Over MPI processes"): the unit a process holds is
 * a data replica - tp x pp consecutive ranks of the layout's order, its pipeline stages and tensor groups - so the
 * activations between stages, the tensor all-reduces and a replica's micro-batches stay inside one process, and only
 * the data replicas' gradient collectives (on the machine's fabric, joined by each process for its own replicas)
 * cross processes. Every process then holds the all-reduced gradient and runs every (stage, tensor rank)'s update on
 * it, as each replica's ranks do, so the weights are everywhere and process 0 writes them. With ZeRO-1 a process
 * updates its replicas' blocks only; the reduce-scattered gradient blocks (for the global norm) and, for a
 * checkpoint, the state blocks travel between processes here. */
#include "mp_procs.h"

#include <stdlib.h>
#include <string.h>

tern_status train_mp_procs_setup(tern_fabric *fab, const tern_transport *tr, int64_t tp, int64_t pp, int64_t dp,
                                 unsigned char **dlocal, int64_t *d0, tern_error *err)
{
    *d0 = 0;
    if (!(*dlocal = malloc((size_t)dp)))
        return tern_error_set(err, TERN_ERR_NOMEM, "train: out of memory");
    memset(*dlocal, 1, (size_t)dp);
    if (!tr)
        return TERN_OK;
    unsigned K = tr->nprocs;
    if (K > 1 && dp < 2)
        return tern_error_set(err, TERN_ERR_INVALID,
                              "train: %u MPI processes for a layout with 1 data replica (tp=%lld, pp=%lld): a process "
                              "holds whole data replicas (dp=N), so run it without mpirun",
                              K, (long long)tp, (long long)pp);
    tern_status st = tern_fabric_set_transport(fab, tr, err);
    if (st)
        return tern_error_prefix(err, "train: layout tp=%lld,pp=%lld,dp=%lld over MPI processes: ", (long long)tp,
                                 (long long)pp, (long long)dp);
    int64_t per = tp * pp;
    *d0 = -1;
    for (int64_t d = 0; d < dp; d++) {
        unsigned o = tern_fabric_rank_owner(fab, (unsigned)(d * per));
        for (int64_t k = 1; k < per; k++) {
            unsigned q = tern_fabric_rank_owner(fab, (unsigned)(d * per + k));
            if (q != o)
                return tern_error_set(err, TERN_ERR_INVALID,
                                      "train: layout tp=%lld,pp=%lld,dp=%lld over %u MPI processes: data replica %lld "
                                      "(ranks %lld..%lld) would span processes %u and %u; a process holds whole data "
                                      "replicas (whole chips each): give a process count that divides dp",
                                      (long long)tp, (long long)pp, (long long)dp, K, (long long)d,
                                      (long long)(d * per), (long long)(d * per + per - 1), o, q);
        }
        (*dlocal)[d] = o == tr->me;
        if ((*dlocal)[d] && *d0 < 0)
            *d0 = d;
    }
    TERN_ASSERT(*d0 >= 0); /* tern_fabric_set_transport gives every process a chip with ranks */
    return TERN_OK;
}

tern_status train_mp_procs_merge(const tern_transport *tr, tern_status st, uint64_t key, double *v, size_t n,
                                 tern_error *err)
{
    if (!tr)
        return st;
    if ((st = tern_transport_agree(tr, st, key, err)))
        return st;
    _Static_assert(sizeof(double) == sizeof(uint64_t), "double: 64 bits");
    uint64_t *w = malloc(sizeof *w * (n ? n : 1));
    if (!w) /* the others would wait in the allreduce: end them all */
        tr->abort(tr->ctx, "train: out of memory merging the micro-batches' losses and times");
    memcpy(w, v, sizeof *w * n);
    tern_error e2;
    if (tr->allreduce(tr->ctx, w, n, TERN_XOP_SUM, &e2))
        tr->abort(tr->ctx, e2.msg);
    memcpy(v, w, sizeof *w * n);
    free(w);
    return TERN_OK;
}

tern_status train_mp_procs_max(const tern_transport *tr, tern_status st, uint64_t key, double *v, tern_error *err)
{
    if (!tr)
        return st;
    if ((st = tern_transport_agree(tr, st, key, err)))
        return st;
    uint64_t w;
    memcpy(&w, v, sizeof w);
    tern_error e2;
    if (tr->allreduce(tr->ctx, &w, 1, TERN_XOP_MAX, &e2))
        tr->abort(tr->ctx, e2.msg);
    memcpy(v, &w, sizeof w);
    return TERN_OK;
}

tern_status train_mp_procs_blocks(const tern_transport *tr, const unsigned char *dlocal, int64_t dp, size_t Z,
                                  float *const *vec, const size_t *len, size_t n, tern_error *err)
{
    (void)err;
    if (!tr)
        return TERN_OK;
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += len ? len[i] : (size_t)dp * Z;
    size_t words = (total * sizeof(float) + 7) / 8;
    uint64_t *w = calloc(words + 1, sizeof *w);
    if (!w) /* the others would wait in the allreduce: end them all */
        tr->abort(tr->ctx, "train: out of memory exchanging the ZeRO-1 blocks");
    unsigned char *b = (unsigned char *)w;
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        size_t L = len ? len[i] : (size_t)dp * Z;
        for (int64_t d = 0; d < dp; d++) {
            size_t lo = (size_t)d * Z, hi = lo + Z < L ? lo + Z : L;
            if (dlocal[d] && lo < hi)
                memcpy(b + (at + lo) * sizeof(float), vec[i] + lo, (hi - lo) * sizeof(float));
        }
        at += L;
    }
    /* in chunks, so that a count always fits MPI's int */
    tern_error e2;
    for (size_t o = 0; o < words; o += (size_t)1 << 28)
        if (tr->allreduce(tr->ctx, w + o, words - o < ((size_t)1 << 28) ? words - o : (size_t)1 << 28, TERN_XOP_SUM,
                          &e2))
            tr->abort(tr->ctx, e2.msg);
    at = 0;
    for (size_t i = 0; i < n; i++) {
        size_t L = len ? len[i] : (size_t)dp * Z;
        memcpy(vec[i], b + at * sizeof(float), L * sizeof(float));
        at += L;
    }
    free(w);
    return TERN_OK;
}
