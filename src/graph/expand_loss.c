/* Expansions of the two classification losses, as ONNX's own function bodies define them:
 * NegativeLogLikelihoodLoss(input [N, C, d...], target [N, d...], weight [C]?) picks -input[n, target, d...] with
 * GatherElements along the class axis, weighs it by weight[target] (Gather), zeroes ignore_index positions (the
 * index itself replaced by 0 first so the gathers stay in range) and reduces: none, sum, or mean = sum of losses
 * over sum of the weights used (the count of positions not ignored when there are no weights).
 * SoftmaxCrossEntropyLoss is LogSoftmax over the class axis (its optional second output) followed by that loss. */
#include "graph_internal.h"
#include "expand.h"

#include <string.h>

/* like: a value with the input's type and shape (the input itself, or SCE's scores when the input is their
 * log-softmax, a new value whose shape inference has not reached yet) */
static tern_status nll(xb *b, int input, int like, int target, int weight, int out)
{
    const tern_graph_node *n = &b->g->nodes[b->node];
    const tern_graph_value *x = xb_val(b, like), *t = xb_val(b, target);
    const char *red = tern_graph_attr_string(n, "reduction", "mean");
    int mode = !strcmp(red, "none") ? 0 : !strcmp(red, "sum") ? 1 : !strcmp(red, "mean") ? 2 : -1;
    if (mode < 0)
        return xb_fail(b, TERN_ERR_INVALID, "reduction \"%s\" is not none, sum or mean", red), b->st;
    if (x->rank < 2 || t->rank != x->rank - 1)
        return xb_fail(b, TERN_ERR_INVALID, "input rank %d and target rank %d: expected [N, C, d...] and [N, d...]",
                       x->rank, t->rank),
               b->st;
    if (!tern_elem_is_float(x->type) || (t->type != TERN_ELEM_INT32 && t->type != TERN_ELEM_INT64))
        return xb_fail(b, TERN_ERR_INVALID, "input is %s and target %s: expected a float input and int32/int64 "
                       "targets", tern_elem_name(x->type), tern_elem_name(t->type)),
               b->st;
    int64_t t1[TERN_GRAPH_MAX_RANK];
    int r = x->rank;
    for (int d = 0; d < r; d++) {
        int64_t want = d == 0 ? x->dims[0] : d == 1 ? 1 : x->dims[d];
        if (d != 1 && t->dims[d == 0 ? 0 : d - 1] != want)
            return xb_fail(b, TERN_ERR_INVALID, "target dim %d is %lld, input dim %d is %lld", d == 0 ? 0 : d - 1,
                           (long long)t->dims[d == 0 ? 0 : d - 1], d, (long long)want),
                   b->st;
        t1[d] = want;
    }
    if (weight >= 0) {
        const tern_graph_value *w = xb_val(b, weight);
        if (w->rank != 1 || w->dims[0] != x->dims[1] || w->type != x->type)
            return xb_fail(b, TERN_ERR_INVALID, "weight must be [%lld] %s (one per class)", (long long)x->dims[1],
                           tern_elem_name(x->type)),
                   b->st;
    }
    const tern_graph_attr *ii_attr = tern_graph_node_attr(n, "ignore_index");
    int tt = xb_reshape(b, target, r, t1); /* [N, 1, d...] */
    int mask = -1, zero = xb_scalar_f(b, x->type, 0.0f);
    if (ii_attr) {
        mask = xb_binary(b, "Equal", tt, xb_scalar_i(b, t->type, ii_attr->i));
        int ins[3] = {mask, xb_scalar_i(b, t->type, 0), tt};
        tt = xb_op(b, "Where", 3, ins);
    }
    int ge[2] = {input, tt};
    int picked = xb_op(b, "GatherElements", 2, ge);
    xb_attr_int(b, "axis", 1);
    int loss = xb_unary(b, "Neg", picked), used = -1; /* used: the weight each position carries (for the mean) */
    if (weight >= 0) {
        int gi[2] = {weight, tt};
        used = xb_op(b, "Gather", 2, gi);
        xb_attr_int(b, "axis", 0);
        if (mask >= 0) {
            int wi[3] = {mask, zero, used};
            used = xb_op(b, "Where", 3, wi);
        }
        loss = xb_binary(b, "Mul", loss, used);
    } else if (mask >= 0) {
        int wi[3] = {mask, zero, xb_scalar_f(b, x->type, 1.0f)};
        used = xb_op(b, "Where", 3, wi);
        int li[3] = {mask, zero, loss};
        loss = xb_op(b, "Where", 3, li);
    }
    int64_t all[TERN_GRAPH_MAX_RANK];
    for (int d = 0; d < r - 1; d++)
        all[d] = d;
    if (mode == 0) {
        int ri[2] = {loss, xb_const_i64(b, TERN_ELEM_INT64, 1, (int64_t[]){r - 1}, t->dims)};
        xb_op_to(b, "Reshape", 2, ri, out);
        return b->st;
    }
    loss = xb_reshape(b, loss, r - 1, t->dims);
    if (mode == 1) {
        xb_reduce_sum(b, loss, r - 1, all, 0);
        xb_output_to(b, out);
        return b->st;
    }
    int sum = xb_reduce_sum(b, loss, r - 1, all, 0), den;
    if (used >= 0) {
        int64_t ar[TERN_GRAPH_MAX_RANK];
        for (int d = 0; d < r; d++)
            ar[d] = d;
        den = xb_reduce_sum(b, used, r, ar, 0);
    } else {
        int64_t cnt = 1;
        for (int d = 0; d < r - 1; d++)
            cnt *= t->dims[d];
        den = xb_scalar_f(b, x->type, (float)cnt);
    }
    int di[2] = {sum, den};
    xb_op_to(b, "Div", 2, di, out);
    return b->st;
}

tern_status graph_expand_loss(xb *b, int *done)
{
    const tern_graph_node *n = &b->g->nodes[b->node];
    int out = n->n_outputs > 0 ? n->outputs[0] : -1;
    if (n->op_id == TERN_GOP_NEGATIVE_LOG_LIKELIHOOD_LOSS) {
        if (xb_in(b, 0) < 0 || xb_in(b, 1) < 0)
            return xb_fail(b, TERN_ERR_INVALID, "input and target are required"), b->st;
        if (nll(b, xb_in(b, 0), xb_in(b, 0), xb_in(b, 1), xb_in(b, 2), out))
            return b->st;
        *done = 1;
        return TERN_OK;
    }
    /* SoftmaxCrossEntropyLoss */
    int x = xb_in(b, 0), lab = xb_in(b, 1);
    if (x < 0 || lab < 0)
        return xb_fail(b, TERN_ERR_INVALID, "scores and labels are required"), b->st;
    const tern_graph_value *xv = xb_val(b, x);
    int r = xv->rank;
    if (r < 2)
        return xb_fail(b, TERN_ERR_INVALID, "scores rank %d: expected [N, C, d...]", r), b->st;
    int lp_out = n->n_outputs > 1 ? n->outputs[1] : -1, lp;
    if (b->opset >= 13 || r == 2) {
        lp = xb_op_to(b, "LogSoftmax", 1, &x, lp_out);
        xb_attr_int(b, "axis", 1);
    } else { /* LogSoftmax before opset 13 flattens from its axis: put the classes last, where both agree */
        int64_t perm[TERN_GRAPH_MAX_RANK], back[TERN_GRAPH_MAX_RANK];
        for (int d = 0, k = 0; d < r; d++)
            if (d != 1)
                perm[k++] = d;
        perm[r - 1] = 1;
        for (int d = 0; d < r; d++)
            back[perm[d]] = d;
        int t = xb_transpose(b, x, r, perm);
        t = xb_unary(b, "LogSoftmax", t);
        xb_attr_int(b, "axis", r - 1);
        int tb = xb_op_to(b, "Transpose", 1, &t, lp_out);
        xb_attr_ints(b, "perm", r, back);
        lp = tb;
    }
    if (b->st || nll(b, lp, x, lab, xb_in(b, 2), out))
        return b->st;
    *done = 1;
    return TERN_OK;
}
