/* The reduce family's shared parameter decoding (op_params.h): the axes every Reduce op reads, from the attribute
 * or (ReduceSum from opset 13, the others from 18) from input 1, decoded one way for inference, the host evaluator
 * and the compiler's reduction rules (lower.c, lower_reduce.c), which before read them in four places and did not
 * agree on which source wins. */
#include "graph_internal.h"
#include "op_params.h"
#include "infer_internal.h"

#include <stdio.h>
#include <string.h>

int graph_reduce_axes_from_input(int op_id, int64_t opset)
{
    return opset >= (op_id == TERN_GOP_REDUCE_SUM ? 13 : 18);
}

tern_status graph_reduce_axes_decode(const tern_graph_node *n, int64_t opset, int axes_given,
                                     const tern_host_tensor *axes_in, graph_axes_args *a, char *why, size_t wl)
{
    memset(a, 0, sizeof *a);
    a->known = 1;
    const int max = 2 * TERN_GRAPH_MAX_RANK;
    if (!graph_reduce_axes_from_input(n->op_id, opset)) {
        size_t na;
        const int64_t *p = graph_attr_ints(n, "axes", &na);
        if (p) {
            if (na > (size_t)max) {
                snprintf(why, wl, "attribute axes holds %zu values, at most %d allowed", na, max);
                return TERN_ERR_RANGE;
            }
            memcpy(a->axes, p, na * sizeof *p);
            a->n = (int)na;
        }
        return TERN_OK;
    }
    if (!axes_given)
        return TERN_OK;
    if (!axes_in) {
        a->known = 0;
        return TERN_OK;
    }
    if (!axes_in->i || axes_in->rank > 1) {
        snprintf(why, wl, "input 1 must be a 1-D integer tensor");
        return TERN_ERR_INVALID;
    }
    if (axes_in->count > (size_t)max) {
        snprintf(why, wl, "input 1 holds %zu values, at most %d allowed", axes_in->count, max);
        return TERN_ERR_RANGE;
    }
    for (size_t e = 0; e < axes_in->count; e++)
        a->axes[e] = axes_in->i[e];
    a->n = (int)axes_in->count;
    return TERN_OK;
}

/* ---- shape inference (moved out of infer.c's one switch; infer_node dispatches here by op id) ---- */

/* REDUCE_SUM, REDUCE_MEAN, REDUCE_MAX, REDUCE_MIN, REDUCE_PROD, REDUCE_L1, REDUCE_L2, REDUCE_SUM_SQUARE, REDUCE_LOG_SUM, REDUCE_LOG_SUM_EXP */
tern_status graph_infer_reduce(ictx *c)
{
    const tern_graph_node *n = c->n;
    tern_status st;
    int64_t buf[2 * TERN_GRAPH_MAX_RANK + 2];
    int64_t dims[TERN_GRAPH_MAX_RANK];
    int nb, known, r;
    if ((st = need_rank(c, 0)))
        return st;
    const tern_graph_value *x = V(c, 0);
    graph_axes_args ax;
    if ((st = graph_reduce_axes_decode(n, c->g->opset, V(c, 1) != NULL, K(c, 1), &ax, c->why, sizeof c->why)))
        return ifail(c, st, "%s", c->why);
    nb = ax.n;
    known = ax.known;
    memcpy(buf, ax.axes, sizeof ax.axes);
    int keep = (int)tern_graph_attr_int(n, "keepdims", 1);
    if (!known) {
        if (keep)
            set_out(c, 0, x->type, x->rank, NULL);
        else
            set_out(c, 0, x->type, -1, NULL);
        return TERN_OK;
    }
    int red[TERN_GRAPH_MAX_RANK] = {0};
    if (nb == 0) {
        if (tern_graph_attr_int(n, "noop_with_empty_axes", 0)) {
            same_as(c, 0, x, x->type);
            return TERN_OK;
        }
        for (int d = 0; d < x->rank; d++)
            red[d] = 1;
    }
    for (int k = 0; k < nb; k++) {
        int a;
        if (graph_norm_axis(buf[k], x->rank, &a, c->why, sizeof c->why, "axis"))
            return ifail(c, TERN_ERR_INVALID, "%s", c->why);
        red[a] = 1;
    }
    r = 0;
    for (int d = 0; d < x->rank; d++)
        if (!red[d] || keep)
            dims[r++] = red[d] ? 1 : x->dims[d];
    set_out(c, 0, x->type, r, dims);
    return TERN_OK;
}

/* ARG_MAX, ARG_MIN */
tern_status graph_infer_arg_reduce(ictx *c)
{
    const tern_graph_node *n = c->n;
    tern_status st;
    int64_t dims[TERN_GRAPH_MAX_RANK];
    int r;
    if ((st = need_rank(c, 0)))
        return st;
    const tern_graph_value *x = V(c, 0);
    int ax, keep = (int)tern_graph_attr_int(n, "keepdims", 1);
    if (graph_norm_axis(tern_graph_attr_int(n, "axis", 0), x->rank, &ax, c->why, sizeof c->why, "axis"))
        return ifail(c, TERN_ERR_INVALID, "%s", c->why);
    r = 0;
    for (int d = 0; d < x->rank; d++)
        if (d != ax || keep)
            dims[r++] = d == ax ? 1 : x->dims[d];
    set_out(c, 0, TERN_ELEM_INT64, r, dims);
    return TERN_OK;
}
