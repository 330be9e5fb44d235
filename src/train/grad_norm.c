/* Gradients of the normalising ops: Softmax (dx = y (dy - sum(dy y))), LogSoftmax (dx = dy - exp(y) sum(dy))
 * along their axis, and LayerNormalization over the trailing axes from `axis`, whose statistics are recomputed
 * in the backward graph (mean, 1/sqrt(var + eps)) rather than taken from the optional forward outputs, so the
 * forward node keeps the fast single-output lowering. */
#include "ad_internal.h"

#include <string.h>

static int softmax_axis(ad_ctx *a, const ad_fwd *f, int rank, int64_t *axis)
{
    const tern_graph_node *n = &a->g->nodes[f->index];
    int64_t ax = tern_graph_attr_int(n, "axis", a->opset >= 13 ? -1 : 1);
    if (ax < 0)
        ax += rank;
    if (ax < 0 || ax >= rank)
        return ad_fail_node(a, f->index, "axis outside rank %d", rank);
    /* before opset 13 the op flattens from axis on: the same as a last-axis softmax only when axis is last */
    if (a->opset < 13 && ax != rank - 1)
        return ad_fail_node(a, f->index, "opset %lld %s over axis %lld of rank %d (flattened) has no gradient rule",
                            (long long)a->opset, n->op, (long long)ax, rank);
    *axis = ax;
    return 0;
}

static int g_softmax(ad_ctx *a, const ad_fwd *f)
{
    ad_shape sx = ad_shape_of(a, f->in[0]);
    int64_t ax;
    if (softmax_axis(a, f, sx.rank, &ax) < 0)
        return -1;
    int y = f->out[0];
    int s = ad_reduce(a, "ReduceSum", ad_op2(a, "Mul", f->dy[0], y), 1, &ax, 1);
    ad_accum(a, f->in[0], ad_op2(a, "Mul", y, ad_op2(a, "Sub", f->dy[0], s)));
    return 0;
}

static int g_logsoftmax(ad_ctx *a, const ad_fwd *f)
{
    ad_shape sx = ad_shape_of(a, f->in[0]);
    int64_t ax;
    if (softmax_axis(a, f, sx.rank, &ax) < 0)
        return -1;
    int s = ad_reduce(a, "ReduceSum", f->dy[0], 1, &ax, 1);
    ad_accum(a, f->in[0], ad_op2(a, "Sub", f->dy[0], ad_op2(a, "Mul", ad_op1(a, "Exp", f->out[0]), s)));
    return 0;
}

static int g_layernorm(ad_ctx *a, const ad_fwd *f)
{
    const tern_graph_node *n = &a->g->nodes[f->index];
    ad_shape sx = ad_shape_of(a, f->in[0]);
    int64_t axis = tern_graph_attr_int(n, "axis", -1);
    float eps = tern_graph_attr_float(n, "epsilon", 1e-5f);
    for (int k = 1; k < f->n_out; k++)
        if (f->dy[k] >= 0)
            return ad_fail_node(a, f->index, "a gradient through the mean or inv_std output has no rule");
    if (axis < 0)
        axis += sx.rank;
    if (axis < 0 || axis >= sx.rank)
        return ad_fail_node(a, f->index, "axis outside rank %d", sx.rank);
    int64_t axes[TERN_GRAPH_MAX_RANK];
    int na = 0;
    for (int64_t d = axis; d < sx.rank; d++)
        axes[na++] = d;
    int x = f->in[0], scale = f->in[1], bias = f->n_in > 2 ? f->in[2] : -1, dy = f->dy[0];
    int mean = ad_reduce(a, "ReduceMean", x, na, axes, 1);
    int xc = ad_op2(a, "Sub", x, mean);
    int var = ad_reduce(a, "ReduceMean", ad_op2(a, "Mul", xc, xc), na, axes, 1);
    int rstd = ad_op1(a, "Reciprocal", ad_op1(a, "Sqrt", ad_op2(a, "Add", var, ad_const_f(a, eps))));
    int xhat = ad_op2(a, "Mul", xc, rstd);
    if (ad_needs(a, scale)) {
        ad_shape ss = ad_shape_of(a, scale);
        ad_accum(a, scale, ad_unbroadcast(a, ad_op2(a, "Mul", dy, xhat), &sx, &ss));
    }
    if (bias >= 0 && ad_needs(a, bias)) {
        ad_shape sb = ad_shape_of(a, bias);
        ad_accum(a, bias, ad_unbroadcast(a, dy, &sx, &sb));
    }
    if (ad_needs(a, x)) {
        int gx = ad_op2(a, "Mul", dy, scale);
        int m1 = ad_reduce(a, "ReduceMean", gx, na, axes, 1);
        int m2 = ad_reduce(a, "ReduceMean", ad_op2(a, "Mul", gx, xhat), na, axes, 1);
        int inner = ad_op2(a, "Sub", ad_op2(a, "Sub", gx, m1), ad_op2(a, "Mul", xhat, m2));
        ad_accum(a, x, ad_op2(a, "Mul", inner, rstd));
    }
    return 0;
}

int grad_norm_rule(int op_id, ad_rule *out)
{
    switch (op_id) {
    case TERN_GOP_SOFTMAX:
        *out = g_softmax;
        return 1;
    case TERN_GOP_LOG_SOFTMAX:
        *out = g_logsoftmax;
        return 1;
    case TERN_GOP_LAYER_NORMALIZATION:
        *out = g_layernorm;
        return 1;
    default:
        return 0;
    }
}
