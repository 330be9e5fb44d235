/* The norm family's shape inference: BatchNormalization and InstanceNormalization (per-channel parameters),
 * LayerNormalization (with its Mean and InvStdDev outputs), LRN and MeanVarianceNormalization. Moved out of
 * infer.c's one switch; infer_node dispatches here by op id. */
#include "infer_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* BATCH_NORMALIZATION, INSTANCE_NORMALIZATION */
tern_status graph_infer_batch_instance_norm(ictx *c)
{
    const tern_graph_node *n = c->n;
    const tern_op_id id = (tern_op_id)c->n->op_id;
    tern_status st;
    int nin = id == TERN_GOP_BATCH_NORMALIZATION ? 5 : 3;
    for (int k = 0; k < nin; k++)
        if ((st = need_float(c, k)))
            return st;
    if ((st = need_rank(c, 0)))
        return st;
    if (id == TERN_GOP_BATCH_NORMALIZATION && tern_graph_attr_int(n, "training_mode", 0))
        return ifail(c, TERN_ERR_UNSUPPORTED, "training_mode=1 is not supported (inference only)");
    const tern_graph_value *x = V(c, 0);
    if (x->rank < 2)
        return ifail(c, TERN_ERR_INVALID, "input rank %d below 2", x->rank);
    for (int k = 1; k < nin; k++) {
        const tern_graph_value *p = V(c, k);
        if (p->rank >= 0 && x->dims[1] >= 0 && (p->rank != 1 || (p->dims[0] >= 0 && p->dims[0] != x->dims[1])))
            return ifail(c, TERN_ERR_INVALID, "input %d \"%s\" must be [%lld]", k, p->name,
                         (long long)x->dims[1]);
    }
    same_as(c, 0, x, x->type);
    for (int k = 1; k < n->n_outputs; k++)
        if (OUT(c, k))
            return ifail(c, TERN_ERR_UNSUPPORTED, "training outputs (mean/var) are not supported");
    return TERN_OK;
}

/* LAYER_NORMALIZATION */
tern_status graph_infer_layer_norm(ictx *c)
{
    const tern_graph_node *n = c->n;
    tern_status st;
    int64_t dims[TERN_GRAPH_MAX_RANK];
    if ((st = need_rank(c, 0)) || (st = need_float(c, 0)) || (st = need_float(c, 1)))
        return st;
    const tern_graph_value *x = V(c, 0);
    int ax;
    if (graph_norm_axis(tern_graph_attr_int(n, "axis", -1), x->rank, &ax, c->why, sizeof c->why, "axis"))
        return ifail(c, TERN_ERR_INVALID, "%s", c->why);
    same_as(c, 0, x, x->type);
    for (int d = 0; d < x->rank; d++)
        dims[d] = d < ax ? x->dims[d] : 1;
    set_out(c, 1, TERN_ELEM_FLOAT, x->rank, dims);
    set_out(c, 2, TERN_ELEM_FLOAT, x->rank, dims);
    return TERN_OK;
}

/* LRN, MEAN_VARIANCE_NORMALIZATION: a float input, the output of its shape */
tern_status graph_infer_lrn_mvn(ictx *c)
{
    tern_status st;
    if ((st = need(c, 0)))
        return st;
    if ((st = need_float(c, 0)))
        return st;
    same_as(c, 0, V(c, 0), V(c, 0)->type);
    return TERN_OK;
}
