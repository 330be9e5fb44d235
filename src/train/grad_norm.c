/* Gradients of the normalising ops: Softmax (dx = y (dy - sum(dy y))), LogSoftmax (dx = dy - exp(y) sum(dy))
 * along their axis, LayerNormalization over the trailing axes from `axis`, whose statistics are recomputed
 * in the backward graph (mean, 1/sqrt(var + eps)) rather than taken from the optional forward outputs, so the
 * forward node keeps the fast single-output lowering, and BatchNormalization in training mode.
 *
 * BatchNormalization trains as PyTorch's model.train() runs it, whatever the node's training_mode (an
 * inference-exported graph is the usual input): the output uses the batch's statistics over every axis but the
 * channel axis 1 (mean, biased variance), the gradient flows through them (dx = scale rstd (dy - mean(dy) -
 * xhat mean(dy xhat))), and the running statistics are not read; ad_batchnorm_forward replaces the node by that
 * computation once the backward pass is built and returns the updated running statistics, momentum m as ONNX
 * states it (PyTorch's 1 - momentum): mean' = m mean + (1 - m) batch_mean, var' = m var + (1 - m) batch_var n /
 * (n - 1) (PyTorch's unbiased running variance, n the elements per channel). */
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

/* per-channel [C] -> [1, C, 1, ...] of rank r */
static int chan(ad_ctx *a, int v, int rank, int64_t C)
{
    ad_shape s = {.rank = rank};
    for (int d = 0; d < rank; d++)
        s.d[d] = d == 1 ? C : 1;
    return ad_reshape(a, v, &s);
}

/* The batch statistics of BatchNormalization's input: mean and biased variance (keepdims), 1/sqrt(var + eps), x -
 * mean. Returns 0, or -1 (a->failed set) */
static int bn_stats(ad_ctx *a, int node, int x, int *mean, int *var, int *rstd, int *xc, int64_t *per_chan)
{
    const tern_graph_node *n = &a->g->nodes[node];
    ad_shape sx = ad_shape_of(a, x);
    float eps = tern_graph_attr_float(n, "epsilon", 1e-5f);
    if (sx.rank < 2)
        return ad_fail_node(a, node, "BatchNormalization input of rank %d (at least 2)", sx.rank);
    int64_t axes[TERN_GRAPH_MAX_RANK], cnt = 1;
    int na = 0;
    for (int d = 0; d < sx.rank; d++)
        if (d != 1) {
            axes[na++] = d;
            cnt *= sx.d[d];
        }
    if (cnt < 2)
        return ad_fail_node(a, node, "BatchNormalization in training mode over %lld element(s) per channel (PyTorch "
                                     "refuses fewer than 2)",
                            (long long)cnt);
    *mean = ad_reduce(a, "ReduceMean", x, na, axes, 1);
    *xc = ad_op2(a, "Sub", x, *mean);
    *var = ad_reduce(a, "ReduceMean", ad_op2(a, "Mul", *xc, *xc), na, axes, 1);
    *rstd = ad_op1(a, "Reciprocal", ad_op1(a, "Sqrt", ad_op2(a, "Add", *var, ad_const_f(a, eps))));
    *per_chan = cnt;
    return a->failed ? -1 : 0;
}

static int g_batchnorm(ad_ctx *a, const ad_fwd *f)
{
    for (int k = 1; k < f->n_out; k++)
        if (f->dy[k] >= 0)
            return ad_fail_node(a, f->index, "BatchNormalization's running_mean/running_var outputs carry no gradient");
    if (f->n_in < 5)
        return ad_fail_node(a, f->index, "BatchNormalization with %d inputs (5)", f->n_in);
    ad_shape sx = ad_shape_of(a, f->in[0]);
    int64_t C = sx.d[1], cnt;
    int x = f->in[0], scale = f->in[1], bias = f->in[2], dy = f->dy[0], mean, var, rstd, xc;
    if (bn_stats(a, f->index, x, &mean, &var, &rstd, &xc, &cnt) < 0)
        return -1;
    int64_t axes[TERN_GRAPH_MAX_RANK];
    int na = 0;
    for (int d = 0; d < sx.rank; d++)
        if (d != 1)
            axes[na++] = d;
    int xhat = ad_op2(a, "Mul", xc, rstd);
    if (ad_needs(a, scale))
        ad_accum(a, scale, ad_reduce(a, "ReduceSum", ad_op2(a, "Mul", dy, xhat), na, axes, 0));
    if (ad_needs(a, bias))
        ad_accum(a, bias, ad_reduce(a, "ReduceSum", dy, na, axes, 0));
    if (ad_needs(a, x)) {
        int m1 = ad_reduce(a, "ReduceMean", dy, na, axes, 1);
        int m2 = ad_reduce(a, "ReduceMean", ad_op2(a, "Mul", dy, xhat), na, axes, 1);
        int inner = ad_op2(a, "Sub", ad_op2(a, "Sub", dy, m1), ad_op2(a, "Mul", xhat, m2));
        int sr = ad_op2(a, "Mul", chan(a, scale, sx.rank, C), rstd);
        ad_accum(a, x, ad_op2(a, "Mul", inner, sr));
    }
    return 0;
}

int ad_batchnorm_forward(ad_ctx *a, int node, int *new_mean, int *new_var)
{
    tern_graph *g = a->g;
    tern_graph_node *n = &g->nodes[node];
    *new_mean = *new_var = -1;
    if (n->n_inputs < 5 || n->inputs[0] < 0 || n->inputs[1] < 0 || n->inputs[2] < 0)
        return ad_fail_node(a, node, "BatchNormalization with %d inputs (5)", n->n_inputs);
    int x = n->inputs[0], scale = n->inputs[1], bias = n->inputs[2], rm = n->inputs[3], rv = n->inputs[4];
    int n_out = n->n_outputs, outs[3] = {n->outputs[0], n_out > 1 ? n->outputs[1] : -1, n_out > 2 ? n->outputs[2] : -1};
    float mom = tern_graph_attr_float(n, "momentum", 0.9f);
    ad_shape sx = ad_shape_of(a, x);
    int64_t C = sx.d[1], cnt;
    int mean, var, rstd, xc;
    if (bn_stats(a, node, x, &mean, &var, &rstd, &xc, &cnt) < 0)
        return -1;
    int t = ad_op2(a, "Mul", ad_op2(a, "Mul", xc, rstd), chan(a, scale, sx.rank, C));
    int b = chan(a, bias, sx.rank, C);
    ad_shape sc = {.rank = 1, .d = {C}};
    if (rm >= 0 && rv >= 0) {
        int bm = ad_reshape(a, mean, &sc);
        int bv = ad_op2(a, "Mul", ad_reshape(a, var, &sc), ad_const_f(a, (float)((double)cnt / (double)(cnt - 1))));
        *new_mean = ad_op2(a, "Add", ad_op2(a, "Mul", rm, ad_const_f(a, mom)), ad_op2(a, "Mul", bm, ad_const_f(a, 1 - mom)));
        *new_var = ad_op2(a, "Add", ad_op2(a, "Mul", rv, ad_const_f(a, mom)), ad_op2(a, "Mul", bv, ad_const_f(a, 1 - mom)));
    }
    if (a->failed)
        return -1;
    /* the node becomes the last Add, producing its own output value, so every reader keeps its input */
    n = &g->nodes[node];
    if (graph_node_set_op(n, "", "Add"))
        return ad_fail(a, TERN_ERR_NOMEM, "train: out of memory");
    while (n->n_attrs > 0)
        graph_attr_clear(&n->attrs[--n->n_attrs]);
    n->inputs[0] = t;
    n->inputs[1] = b;
    n->n_inputs = 2;
    n->n_outputs = 1;
    n->outputs[0] = outs[0];
    /* running_mean/running_var outputs (a training-mode export): the updated statistics */
    for (int k = 1; k < 3; k++) {
        int v = k == 1 ? *new_mean : *new_var;
        if (outs[k] < 0 || v < 0)
            continue;
        int id = ad_op1(a, "Identity", v);
        if (id < 0)
            return -1;
        int last = ad_last_node(a);
        g->values[id].producer = -1;
        g->nodes[last].outputs[0] = outs[k];
        g->values[outs[k]].producer = last;
    }
    g->values[outs[0]].producer = node;
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
    case TERN_GOP_BATCH_NORMALIZATION:
        *out = g_batchnorm;
        return 1;
    default:
        return 0;
    }
}
