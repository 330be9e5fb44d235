/* The index family: shape inference of Gather, GatherElements, GatherND, ScatterND/ScatterElements, OneHot,
 * NonZero and Compress (data-dependent sizes stay unknown) and TopK, and their host reference evaluation
 * (Gather, GatherElements, GatherND, the scatters, OneHot, NonZero, Compress, TopK). infer_node dispatches here
 * by op id; eval.c's table names the evaluators. */
#include "infer_internal.h"
#include "eval_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* GATHER */
tern_status graph_infer_gather(ictx *c)
{
    const tern_graph_node *n = c->n;
    tern_status st;
    int64_t dims[TERN_GRAPH_MAX_RANK];
    int r;
    if ((st = need_rank(c, 0)) || (st = need_rank(c, 1)))
        return st;
    const tern_graph_value *x = V(c, 0), *ind = V(c, 1);
    if (ind->type != TERN_ELEM_INT64 && ind->type != TERN_ELEM_INT32)
        return ifail(c, TERN_ERR_INVALID, "indices must be int32/int64, got %s", tern_elem_name(ind->type));
    int ax;
    if (graph_norm_axis(tern_graph_attr_int(n, "axis", 0), x->rank, &ax, c->why, sizeof c->why, "axis"))
        return ifail(c, TERN_ERR_INVALID, "%s", c->why);
    r = x->rank - 1 + ind->rank;
    if (r > TERN_GRAPH_MAX_RANK)
        return ifail(c, TERN_ERR_RANGE, "result rank %d above the limit", r);
    int q = 0;
    for (int d = 0; d < ax; d++)
        dims[q++] = x->dims[d];
    for (int d = 0; d < ind->rank; d++)
        dims[q++] = ind->dims[d];
    for (int d = ax + 1; d < x->rank; d++)
        dims[q++] = x->dims[d];
    set_out(c, 0, x->type, r, dims);
    return TERN_OK;
}

/* GATHER_ELEMENTS */
tern_status graph_infer_gather_elements(ictx *c)
{
    tern_status st;
    if ((st = need(c, 0)) || (st = need(c, 1)))
        return st;
    same_as(c, 0, V(c, 1), V(c, 0)->type);
    return TERN_OK;
}

/* TOP_K */
tern_status graph_infer_top_k(ictx *c)
{
    const tern_graph_node *n = c->n;
    tern_status st;
    int64_t dims[TERN_GRAPH_MAX_RANK];
    if ((st = need_rank(c, 0)) || (st = need(c, 1)))
        return st;
    const tern_graph_value *x = V(c, 0);
    int ax;
    if (graph_norm_axis(tern_graph_attr_int(n, "axis", -1), x->rank, &ax, c->why, sizeof c->why, "axis"))
        return ifail(c, TERN_ERR_INVALID, "%s", c->why);
    memcpy(dims, x->dims, sizeof dims);
    const tern_host_tensor *k = K(c, 1);
    dims[ax] = k && k->i && k->count == 1 ? k->i[0] : -1;
    if (dims[ax] < -1 || (x->dims[ax] >= 0 && dims[ax] > x->dims[ax]))
        return ifail(c, TERN_ERR_INVALID, "K = %lld outside [0, %lld]", (long long)dims[ax],
                     (long long)x->dims[ax]);
    set_out(c, 0, x->type, x->rank, dims);
    set_out(c, 1, TERN_ELEM_INT64, x->rank, dims);
    return TERN_OK;
}

/* GATHER_ND */
tern_status graph_infer_gather_nd(ictx *c)
{
    const tern_graph_node *n = c->n;
    tern_status st;
    int64_t dims[TERN_GRAPH_MAX_RANK];
    int r;
    if ((st = need_rank(c, 0)) || (st = need_rank(c, 1)))
        return st;
    const tern_graph_value *x = V(c, 0), *ind = V(c, 1);
    int64_t bd = tern_graph_attr_int(n, "batch_dims", 0), q = ind->rank ? ind->dims[ind->rank - 1] : -1;
    if (ind->rank < 1 || bd < 0 || bd >= ind->rank || bd >= x->rank)
        return ifail(c, TERN_ERR_INVALID, "indices rank %d, batch_dims %lld", ind->rank, (long long)bd);
    if (q < 0) {
        set_out(c, 0, x->type, -1, NULL);
        return TERN_OK;
    }
    if (q < 1 || bd + q > x->rank)
        return ifail(c, TERN_ERR_INVALID, "indices' last dim %lld does not fit data rank %d", (long long)q,
                     x->rank);
    r = 0;
    for (int d = 0; d < ind->rank - 1; d++)
        dims[r++] = ind->dims[d];
    for (int d = (int)(bd + q); d < x->rank; d++) {
        if (r >= TERN_GRAPH_MAX_RANK)
            return ifail(c, TERN_ERR_RANGE, "result rank above the limit");
        dims[r++] = x->dims[d];
    }
    set_out(c, 0, x->type, r, dims);
    return TERN_OK;
}

/* SCATTER_ND, SCATTER_ELEMENTS: data, indices and updates of data's type; the output is data's shape */
tern_status graph_infer_scatter(ictx *c)
{
    tern_status st;
    if ((st = need(c, 0)))
        return st;
    for (int k = 1; k < 3; k++)
        if ((st = need(c, k)))
            return st;
    if (V(c, 2)->type != V(c, 0)->type)
        return ifail(c, TERN_ERR_INVALID, "updates are %s, data is %s", tern_elem_name(V(c, 2)->type),
                     tern_elem_name(V(c, 0)->type));
    same_as(c, 0, V(c, 0), V(c, 0)->type);
    return TERN_OK;
}

/* ONE_HOT */
tern_status graph_infer_one_hot(ictx *c)
{
    const tern_graph_node *n = c->n;
    tern_status st;
    int64_t dims[TERN_GRAPH_MAX_RANK];
    int r;
    for (int k = 0; k < 3; k++)
        if ((st = need(c, k)))
            return st;
    const tern_graph_value *ind = V(c, 0);
    if (ind->rank < 0) {
        set_out(c, 0, V(c, 2)->type, -1, NULL);
        return TERN_OK;
    }
    r = ind->rank + 1;
    int ax;
    if (r > TERN_GRAPH_MAX_RANK)
        return ifail(c, TERN_ERR_RANGE, "result rank above the limit");
    if (graph_norm_axis(tern_graph_attr_int(n, "axis", -1), r, &ax, c->why, sizeof c->why, "axis"))
        return ifail(c, TERN_ERR_INVALID, "%s", c->why);
    const tern_host_tensor *dp = K(c, 1);
    double dv = dp && dp->count == 1 ? tern_host_tensor_get(dp, 0) : -1;
    for (int d = 0, s = 0; d < r; d++)
        dims[d] = d == ax ? (dv >= 1 && dv <= (double)GRAPH_MAX_ELEMS ? (int64_t)dv : -1) : ind->dims[s++];
    set_out(c, 0, V(c, 2)->type, r, dims);
    return TERN_OK;
}

/* NON_ZERO */
tern_status graph_infer_non_zero(ictx *c)
{
    tern_status st;
    int64_t dims[TERN_GRAPH_MAX_RANK];
    if ((st = need_rank(c, 0)))
        return st;
    dims[0] = V(c, 0)->rank ? V(c, 0)->rank : 1;
    dims[1] = -1;
    set_out(c, 0, TERN_ELEM_INT64, 2, dims);
    return TERN_OK;
}

/* COMPRESS */
tern_status graph_infer_compress(ictx *c)
{
    const tern_graph_node *n = c->n;
    tern_status st;
    int64_t dims[TERN_GRAPH_MAX_RANK];
    if ((st = need_rank(c, 0)) || (st = need(c, 1)))
        return st;
    const tern_graph_attr *axa = tern_graph_node_attr(n, "axis");
    if (!axa) {
        set_out(c, 0, V(c, 0)->type, 1, NULL);
        return TERN_OK;
    }
    int ax;
    if (graph_norm_axis(axa->i, V(c, 0)->rank, &ax, c->why, sizeof c->why, "axis"))
        return ifail(c, TERN_ERR_INVALID, "%s", c->why);
    for (int d = 0; d < TERN_GRAPH_MAX_RANK; d++) /* a copy of x's dims (a memcpy through V() trips GCC's
                                                    -Warray-bounds once V is an inline of the shared header) */
        dims[d] = V(c, 0)->dims[d];
    dims[ax] = -1;
    set_out(c, 0, V(c, 0)->type, V(c, 0)->rank, dims);
    return TERN_OK;
}

/* ---- reference evaluation (the host evaluator's rules for this family) ---- */

tern_status graph_ev_topk(const ectx *c)
{
    tern_status st;
    if ((st = ereq(c, 0, 0)) || (st = ereq(c, 1, 0)))
        return st;
    const tern_host_tensor *x = IN(0);
    if (!IN(1)->i || IN(1)->count != 1)
        return efail(c, TERN_ERR_INVALID, "K must be a one-element int64 tensor");
    int ax;
    char why[200];
    if (graph_norm_axis(tern_graph_attr_int(c->n, "axis", -1), x->rank, &ax, why, sizeof why, "axis"))
        return efail(c, TERN_ERR_INVALID, "%s", why);
    int64_t K = IN(1)->i[0], n = x->dims[ax];
    if (K < 0 || K > n)
        return efail(c, TERN_ERR_INVALID, "K = %lld outside [0, %lld]", (long long)K, (long long)n);
    int largest = (int)tern_graph_attr_int(c->n, "largest", 1);
    int64_t dims[TERN_GRAPH_MAX_RANK];
    memcpy(dims, x->dims, sizeof dims);
    dims[ax] = K;
    tern_host_tensor *ov, *oi;
    if ((st = eout(c, 0, x->type, x->rank, dims, &ov)) || (st = eout(c, 1, TERN_ELEM_INT64, x->rank, dims, &oi)))
        return st;
    size_t outer = 1, inner = 1;
    for (int d = 0; d < ax; d++)
        outer *= (size_t)x->dims[d];
    for (int d = ax + 1; d < x->rank; d++)
        inner *= (size_t)x->dims[d];
    if (outer == 0 || inner == 0 || K == 0)
        return TERN_OK;
    int64_t *idx = malloc(((size_t)n + 1) * sizeof *idx);
    if (!idx)
        return efail(c, TERN_ERR_NOMEM, "out of memory");
    for (size_t a = 0; a < outer; a++)
        for (size_t b = 0; b < inner; b++) {
            /* stable selection: ties keep the lower index first (ONNX) */
            for (int64_t e = 0; e < n; e++)
                idx[e] = e;
            for (int64_t i = 0; i < K; i++) {
                int64_t best = i;
                for (int64_t j = i + 1; j < n; j++) {
                    size_t pj = (a * (size_t)n + (size_t)idx[j]) * inner + b,
                           pb = (a * (size_t)n + (size_t)idx[best]) * inner + b;
                    double vj = x->f ? x->f[pj] : (double)x->i[pj], vb = x->f ? x->f[pb] : (double)x->i[pb];
                    int better = largest ? vj > vb : vj < vb;
                    if (better || (vj == vb && idx[j] < idx[best]))
                        best = j;
                }
                int64_t t = idx[i];
                idx[i] = idx[best];
                idx[best] = t;
                size_t src = (a * (size_t)n + (size_t)idx[i]) * inner + b, dst = (a * (size_t)K + (size_t)i) * inner + b;
                if (ov) {
                    if (ov->f)
                        ov->f[dst] = x->f[src];
                    else
                        ov->i[dst] = x->i[src];
                }
                if (oi)
                    oi->i[dst] = idx[i];
            }
        }
    free(idx);
    return TERN_OK;
}

tern_status graph_ev_gather_nd(const ectx *c)
{
    tern_status st;
    if ((st = ereq(c, 0, 0)) || (st = ereq(c, 1, 0)))
        return st;
    const tern_host_tensor *x = IN(0), *ind = IN(1);
    int64_t bd = tern_graph_attr_int(c->n, "batch_dims", 0);
    if (!ind->i || ind->rank < 1 || bd < 0 || bd >= ind->rank || bd >= x->rank)
        return efail(c, TERN_ERR_INVALID, "indices must be integer of rank >= 1 with batch_dims < both ranks");
    int64_t q = ind->dims[ind->rank - 1];
    if (q < 1 || bd + q > x->rank)
        return efail(c, TERN_ERR_INVALID, "indices' last dim %lld does not fit data rank %d", (long long)q, x->rank);
    for (int d = 0; d < bd; d++)
        if (x->dims[d] != ind->dims[d])
            return efail(c, TERN_ERR_INVALID, "batch dim %d differs", d);
    int64_t dims[TERN_GRAPH_MAX_RANK];
    int r = 0;
    for (int d = 0; d < ind->rank - 1; d++)
        dims[r++] = ind->dims[d];
    for (int d = (int)(bd + q); d < x->rank; d++) {
        if (r >= TERN_GRAPH_MAX_RANK)
            return efail(c, TERN_ERR_RANGE, "result rank above the limit");
        dims[r++] = x->dims[d];
    }
    tern_host_tensor *o;
    if ((st = eout(c, 0, x->type, r, dims, &o)) || !o)
        return st;
    int64_t xs[TERN_GRAPH_MAX_RANK];
    ev_strides(x->rank, x->dims, xs);
    size_t slice = 1, nb = 1, per_batch;
    for (int d = (int)(bd + q); d < x->rank; d++)
        slice *= (size_t)x->dims[d];
    for (int d = 0; d < bd; d++)
        nb *= (size_t)x->dims[d];
    size_t ntup = ind->count / (size_t)q;
    per_batch = nb ? ntup / nb : 0;
    for (size_t t = 0; t < ntup; t++) {
        size_t batch = per_batch ? t / per_batch : 0;
        int64_t off = 0, rem = (int64_t)batch;
        for (int d = (int)bd - 1; d >= 0; d--) {
            off += (rem % x->dims[d]) * xs[d];
            rem /= x->dims[d];
        }
        for (int64_t k = 0; k < q; k++) {
            int64_t v = ind->i[t * (size_t)q + (size_t)k], dim = x->dims[bd + k];
            if (v < -dim || v >= dim)
                return efail(c, TERN_ERR_RANGE, "index %lld outside axis %lld of size %lld", (long long)v,
                             (long long)(bd + k), (long long)dim);
            off += (v < 0 ? v + dim : v) * xs[bd + k];
        }
        if (o->f)
            memcpy(o->f + t * slice, x->f + off, slice * sizeof(float));
        else
            memcpy(o->i + t * slice, x->i + off, slice * sizeof(int64_t));
    }
    return TERN_OK;
}

static int reduction_kind(const ectx *c, int *kind)
{
    const char *r = tern_graph_attr_string(c->n, "reduction", "none");
    *kind = !strcmp(r, "none") ? 0 : !strcmp(r, "add") ? 1 : !strcmp(r, "mul") ? 2 : -1;
    return *kind < 0;
}

static void combine(tern_host_tensor *o, size_t dst, const tern_host_tensor *u, size_t src, int kind)
{
    if (o->f) {
        float v = u->f[src];
        o->f[dst] = kind == 1 ? o->f[dst] + v : kind == 2 ? o->f[dst] * v : v;
    } else {
        int64_t v = u->i[src];
        o->i[dst] = kind == 1 ? (int64_t)((uint64_t)o->i[dst] + (uint64_t)v)
                    : kind == 2 ? (int64_t)((uint64_t)o->i[dst] * (uint64_t)v)
                                : v;
    }
}

tern_status graph_ev_scatter_nd(const ectx *c)
{
    tern_status st;
    if ((st = ereq(c, 0, 0)) || (st = ereq(c, 1, 0)) || (st = ereq(c, 2, 0)))
        return st;
    const tern_host_tensor *x = IN(0), *ind = IN(1), *u = IN(2);
    int kind;
    if (reduction_kind(c, &kind))
        return efail(c, TERN_ERR_INVALID, "reduction must be none, add or mul");
    if (!ind->i || ind->rank < 1 || u->type != x->type)
        return efail(c, TERN_ERR_INVALID, "indices must be integers, updates of the data's type");
    int64_t q = ind->dims[ind->rank - 1];
    if (q < 1 || q > x->rank)
        return efail(c, TERN_ERR_INVALID, "indices' last dim %lld does not fit data rank %d", (long long)q, x->rank);
    size_t slice = 1, ntup = ind->count / (size_t)q;
    for (int d = (int)q; d < x->rank; d++)
        slice *= (size_t)x->dims[d];
    if (u->count != ntup * slice)
        return efail(c, TERN_ERR_INVALID, "updates hold %zu elements, expected %zu", u->count, ntup * slice);
    tern_host_tensor *o;
    if ((st = eout(c, 0, x->type, x->rank, x->dims, &o)) || !o)
        return st;
    if (o->f)
        memcpy(o->f, x->f, x->count * sizeof(float));
    else
        memcpy(o->i, x->i, x->count * sizeof(int64_t));
    int64_t xs[TERN_GRAPH_MAX_RANK];
    ev_strides(x->rank, x->dims, xs);
    for (size_t t = 0; t < ntup; t++) {
        int64_t off = 0;
        for (int64_t k = 0; k < q; k++) {
            int64_t v = ind->i[t * (size_t)q + (size_t)k], dim = x->dims[k];
            if (v < -dim || v >= dim)
                return efail(c, TERN_ERR_RANGE, "index %lld outside axis %lld of size %lld", (long long)v,
                             (long long)k, (long long)dim);
            off += (v < 0 ? v + dim : v) * xs[k];
        }
        for (size_t e = 0; e < slice; e++)
            combine(o, (size_t)off + e, u, t * slice + e, kind);
    }
    return TERN_OK;
}

tern_status graph_ev_scatter_elements(const ectx *c)
{
    tern_status st;
    if ((st = ereq(c, 0, 0)) || (st = ereq(c, 1, 0)) || (st = ereq(c, 2, 0)))
        return st;
    const tern_host_tensor *x = IN(0), *ind = IN(1), *u = IN(2);
    int kind, ax;
    char why[200];
    if (reduction_kind(c, &kind))
        return efail(c, TERN_ERR_INVALID, "reduction must be none, add or mul");
    if (!ind->i || ind->rank != x->rank || u->rank != x->rank || u->type != x->type)
        return efail(c, TERN_ERR_INVALID, "indices and updates must have the data's rank (and updates its type)");
    for (int d = 0; d < ind->rank; d++)
        if (ind->dims[d] != u->dims[d] || ind->dims[d] > x->dims[d])
            return efail(c, TERN_ERR_INVALID, "indices/updates dim %d does not fit", d);
    if (graph_norm_axis(tern_graph_attr_int(c->n, "axis", 0), x->rank, &ax, why, sizeof why, "axis"))
        return efail(c, TERN_ERR_INVALID, "%s", why);
    tern_host_tensor *o;
    if ((st = eout(c, 0, x->type, x->rank, x->dims, &o)) || !o)
        return st;
    if (o->f)
        memcpy(o->f, x->f, x->count * sizeof(float));
    else
        memcpy(o->i, x->i, x->count * sizeof(int64_t));
    int64_t xs[TERN_GRAPH_MAX_RANK], idx[TERN_GRAPH_MAX_RANK] = {0};
    ev_strides(x->rank, x->dims, xs);
    for (size_t e = 0; e < ind->count; e++) {
        int64_t v = ind->i[e], dim = x->dims[ax], off = 0;
        if (v < -dim || v >= dim)
            return efail(c, TERN_ERR_RANGE, "index %lld outside axis %d of size %lld", (long long)v, ax,
                         (long long)dim);
        for (int d = 0; d < x->rank; d++)
            off += (d == ax ? (v < 0 ? v + dim : v) : idx[d]) * xs[d];
        combine(o, (size_t)off, u, e, kind);
        ev_next_index(idx, ind->dims, x->rank);
    }
    return TERN_OK;
}

tern_status graph_ev_onehot(const ectx *c)
{
    tern_status st;
    if ((st = ereq(c, 0, 0)) || (st = ereq(c, 1, 0)) || (st = ereq(c, 2, 0)))
        return st;
    const tern_host_tensor *ind = IN(0), *vals = IN(2);
    if (IN(1)->count != 1 || vals->count != 2)
        return efail(c, TERN_ERR_INVALID, "depth must have one element and values two");
    double dd = tern_host_tensor_get(IN(1), 0);
    if (!(dd >= 1 && dd <= (double)GRAPH_MAX_ELEMS))
        return efail(c, TERN_ERR_INVALID, "depth %g outside [1, 2^31]", dd);
    int64_t depth = (int64_t)dd;
    int r = ind->rank + 1, ax;
    char why[200];
    if (r > TERN_GRAPH_MAX_RANK)
        return efail(c, TERN_ERR_RANGE, "result rank above the limit");
    if (graph_norm_axis(tern_graph_attr_int(c->n, "axis", -1), r, &ax, why, sizeof why, "axis"))
        return efail(c, TERN_ERR_INVALID, "%s", why);
    int64_t dims[TERN_GRAPH_MAX_RANK];
    for (int d = 0, s = 0; d < r; d++)
        dims[d] = d == ax ? depth : ind->dims[s++];
    tern_host_tensor *o;
    if ((st = eout(c, 0, vals->type, r, dims, &o)) || !o)
        return st;
    size_t outer = 1, inner = 1;
    for (int d = 0; d < ax; d++)
        outer *= (size_t)dims[d];
    for (int d = ax + 1; d < r; d++)
        inner *= (size_t)dims[d];
    for (size_t a = 0; a < outer; a++)
        for (int64_t k = 0; k < depth; k++)
            for (size_t b = 0; b < inner; b++) {
                double iv = tern_host_tensor_get(ind, a * inner + b);
                /* in range first: the cast of a huge or NaN index would be undefined */
                int hot = iv >= -(double)depth && iv < (double)depth &&
                          (int64_t)(iv < 0 ? iv + (double)depth : iv) == k;
                size_t dst = (a * (size_t)depth + (size_t)k) * inner + b;
                if (o->f)
                    o->f[dst] = vals->f[hot];
                else
                    o->i[dst] = vals->i[hot];
            }
    return TERN_OK;
}

tern_status graph_ev_nonzero(const ectx *c)
{
    tern_status st;
    if ((st = ereq(c, 0, 0)))
        return st;
    const tern_host_tensor *x = IN(0);
    int64_t nz = 0;
    for (size_t e = 0; e < x->count; e++)
        nz += tern_host_tensor_get(x, e) != 0;
    int r = x->rank ? x->rank : 1;
    int64_t dims[2] = {r, nz};
    tern_host_tensor *o;
    if ((st = eout(c, 0, TERN_ELEM_INT64, 2, dims, &o)) || !o)
        return st;
    int64_t xs[TERN_GRAPH_MAX_RANK], k = 0;
    ev_strides(x->rank, x->dims, xs);
    for (size_t e = 0; e < x->count; e++)
        if (tern_host_tensor_get(x, e) != 0) {
            for (int d = 0; d < x->rank; d++)
                o->i[d * nz + k] = (int64_t)(e / (size_t)xs[d]) % x->dims[d];
            if (!x->rank)
                o->i[k] = 0;
            k++;
        }
    return TERN_OK;
}

tern_status graph_ev_compress(const ectx *c)
{
    tern_status st;
    if ((st = ereq(c, 0, 0)) || (st = ereq(c, 1, 0)))
        return st;
    const tern_host_tensor *x = IN(0), *cond = IN(1);
    if (cond->type != TERN_ELEM_BOOL || cond->rank != 1)
        return efail(c, TERN_ERR_INVALID, "condition must be a 1-D bool tensor");
    const tern_graph_attr *axa = tern_graph_node_attr(c->n, "axis");
    size_t outer = 1, n = x->count, inner = 1;
    int ax = -1;
    char why[200];
    if (axa) {
        if (graph_norm_axis(axa->i, x->rank, &ax, why, sizeof why, "axis"))
            return efail(c, TERN_ERR_INVALID, "%s", why);
        n = (size_t)x->dims[ax];
        for (int d = 0; d < ax; d++)
            outer *= (size_t)x->dims[d];
        for (int d = ax + 1; d < x->rank; d++)
            inner *= (size_t)x->dims[d];
    }
    int64_t kept = 0;
    for (size_t e = 0; e < cond->count && e < n; e++)
        kept += cond->i[e] != 0;
    int64_t dims[TERN_GRAPH_MAX_RANK];
    int r = 1;
    if (ax >= 0) {
        memcpy(dims, x->dims, sizeof dims);
        dims[ax] = kept;
        r = x->rank;
    } else
        dims[0] = kept;
    tern_host_tensor *o;
    if ((st = eout(c, 0, x->type, r, dims, &o)) || !o)
        return st;
    size_t pos = 0;
    for (size_t a = 0; a < outer; a++)
        for (size_t e = 0; e < n && e < cond->count; e++) {
            if (!cond->i[e])
                continue;
            size_t src = (a * n + e) * inner;
            if (o->f)
                memcpy(o->f + pos, x->f + src, inner * sizeof(float));
            else
                memcpy(o->i + pos, x->i + src, inner * sizeof(int64_t));
            pos += inner;
        }
    return TERN_OK;
}

/* ---- reference evaluation (moved from eval.c) ---- */

tern_status graph_ev_gather(const ectx *c)
{
    tern_status st;
    if ((st = ereq(c, 0, 0)) || (st = ereq(c, 1, 0)))
        return st;
    const tern_host_tensor *x = IN(0), *ind = IN(1);
    if (!ind->i || ind->type == TERN_ELEM_BOOL)
        return efail(c, TERN_ERR_INVALID, "indices must be int32/int64, got %s", tern_elem_name(ind->type));
    int ax;
    char why[200];
    if (graph_norm_axis(tern_graph_attr_int(c->n, "axis", 0), x->rank, &ax, why, sizeof why, "axis"))
        return efail(c, TERN_ERR_INVALID, "%s", why);
    int r = x->rank - 1 + ind->rank;
    if (r > TERN_GRAPH_MAX_RANK)
        return efail(c, TERN_ERR_RANGE, "result rank %d above the limit", r);
    int64_t dims[TERN_GRAPH_MAX_RANK];
    int q = 0;
    for (int d = 0; d < ax; d++)
        dims[q++] = x->dims[d];
    for (int d = 0; d < ind->rank; d++)
        dims[q++] = ind->dims[d];
    for (int d = ax + 1; d < x->rank; d++)
        dims[q++] = x->dims[d];
    int64_t n = x->dims[ax];
    for (size_t k = 0; k < ind->count; k++)
        if (ind->i[k] < -n || ind->i[k] >= n)
            return efail(c, TERN_ERR_RANGE, "index %lld at position %zu outside [%lld, %lld) for axis %d",
                         (long long)ind->i[k], k, (long long)-n, (long long)n, ax);
    tern_host_tensor *o;
    if ((st = eout(c, 0, x->type, r, dims, &o)) || !o)
        return st;
    size_t outer = 1, inner = 1;
    for (int d = 0; d < ax; d++)
        outer *= (size_t)x->dims[d];
    for (int d = ax + 1; d < x->rank; d++)
        inner *= (size_t)x->dims[d];
    size_t pos = 0;
    for (size_t a = 0; a < outer; a++)
        for (size_t k = 0; k < ind->count; k++) {
            int64_t ix = ind->i[k] < 0 ? ind->i[k] + n : ind->i[k];
            size_t src = (a * (size_t)n + (size_t)ix) * inner;
            if (o->f)
                memcpy(o->f + pos, x->f + src, inner * sizeof(float));
            else
                memcpy(o->i + pos, x->i + src, inner * sizeof(int64_t));
            pos += inner;
        }
    return TERN_OK;
}

tern_status graph_ev_gather_elements(const ectx *c)
{
    tern_status st;
    if ((st = ereq(c, 0, 0)) || (st = ereq(c, 1, 0)))
        return st;
    const tern_host_tensor *x = IN(0), *ind = IN(1);
    int ax;
    char why[200];
    if (!ind->i || ind->rank != x->rank)
        return efail(c, TERN_ERR_INVALID, "indices must be integers of the data's rank");
    if (graph_norm_axis(tern_graph_attr_int(c->n, "axis", 0), x->rank, &ax, why, sizeof why, "axis"))
        return efail(c, TERN_ERR_INVALID, "%s", why);
    tern_host_tensor *o;
    if ((st = eout(c, 0, x->type, ind->rank, ind->dims, &o)) || !o)
        return st;
    int64_t xs[TERN_GRAPH_MAX_RANK], idx[TERN_GRAPH_MAX_RANK] = {0};
    ev_strides(x->rank, x->dims, xs);
    for (size_t k = 0; k < o->count; k++) {
        int64_t off = 0, v = ind->i[k];
        if (v < -x->dims[ax] || v >= x->dims[ax])
            return efail(c, TERN_ERR_RANGE, "index %lld outside axis %d of size %lld", (long long)v, ax,
                         (long long)x->dims[ax]);
        if (v < 0)
            v += x->dims[ax];
        for (int d = 0; d < x->rank; d++) {
            int64_t p = d == ax ? v : idx[d];
            if (p >= x->dims[d])
                return efail(c, TERN_ERR_INVALID, "indices dim %d exceeds data dim", d);
            off += p * xs[d];
        }
        if (o->f)
            o->f[k] = x->f[off];
        else
            o->i[k] = x->i[off];
        ev_next_index(idx, ind->dims, x->rank);
    }
    return TERN_OK;
}
