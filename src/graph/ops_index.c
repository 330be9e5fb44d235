/* The index family's shape inference: Gather, GatherElements, GatherND, ScatterND/ScatterElements, OneHot,
 * NonZero and Compress (data-dependent sizes stay unknown), and TopK. Moved out of infer.c's one switch;
 * infer_node dispatches here by op id. */
#include "infer_internal.h"

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
