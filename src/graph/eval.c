/* The host reference evaluator's core: the per-call context helpers, the generators (Shape, Size,
 * ConstantOfShape, Range, Constant) and the dispatch table by op id; every other op's evaluator sits in its
 * family file (ops_<family>.c) beside its inference and parameter decoding. Float types compute in fp32 and are rounded to their type at the end of the node (float16/bfloat16); integer
 * and bool types compute in int64 with wrap-around (unsigned arithmetic, so overflow is defined) and are wrapped
 * to their width. */
#include "eval_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

tern_status efail(const ectx *c, tern_status code, const char *fmt, ...)
{
    if (!c->err)
        return code;
    char msg[TERN_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return tern_error_set(c->err, code, "%s: %s", c->label, msg);
}

tern_status eout(const ectx *c, int k, tern_elem_type type, int rank, const int64_t *dims, tern_host_tensor **t)
{
    *t = NULL;
    if (!WANT_OUT(k))
        return TERN_OK;
    tern_error e;
    if (tern_host_tensor_new(type, rank, dims, t, &e))
        return efail(c, e.code, "output %d: %s", k, e.msg);
    c->out[k] = *t;
    return TERN_OK;
}

void ekeep(const ectx *c, int k, tern_host_tensor *t)
{
    if (WANT_OUT(k))
        c->out[k] = t;
    else
        tern_host_tensor_free(t);
}

tern_status ereq(const ectx *c, int k, int want_float)
{
    const tern_host_tensor *t = IN(k);
    if (!t)
        return efail(c, TERN_ERR_INVALID, "input %d is required", k);
    if (want_float && !t->f)
        return efail(c, TERN_ERR_INVALID, "input %d must be a float tensor, got %s", k, tern_elem_name(t->type));
    return TERN_OK;
}

tern_status eints(const ectx *c, int k, int64_t *buf, int max, int *n)
{
    const tern_host_tensor *t = IN(k);
    if (!t || !t->i || t->rank > 1)
        return efail(c, TERN_ERR_INVALID, "input %d must be a 1-D integer tensor%s", k, t ? "" : " (missing)");
    if (t->count > (size_t)max)
        return efail(c, TERN_ERR_RANGE, "input %d holds %zu values, at most %d allowed", k, t->count, max);
    for (size_t e = 0; e < t->count; e++)
        buf[e] = t->i[e];
    *n = (int)t->count;
    return TERN_OK;
}



static tern_status ev_shape(const ectx *c)
{
    tern_status st;
    if ((st = ereq(c, 0, 0)))
        return st;
    const tern_host_tensor *x = IN(0);
    int64_t r = x->rank, s = tern_graph_attr_int(c->n, "start", 0), e = tern_graph_attr_int(c->n, "end", r);
    if (s < 0)
        s = s < -r ? 0 : s + r;
    if (e < 0)
        e = e < -r ? 0 : e + r;
    if (s > r)
        s = r;
    if (e > r)
        e = r;
    int64_t n = e > s ? e - s : 0;
    tern_host_tensor *o;
    if ((st = eout(c, 0, TERN_ELEM_INT64, 1, &n, &o)) || !o)
        return st;
    for (int64_t k = 0; k < n; k++)
        o->i[k] = x->dims[s + k];
    return TERN_OK;
}

static tern_status ev_size(const ectx *c)
{
    tern_status st;
    if ((st = ereq(c, 0, 0)))
        return st;
    tern_host_tensor *o;
    if ((st = eout(c, 0, TERN_ELEM_INT64, 0, NULL, &o)) || !o)
        return st;
    o->i[0] = (int64_t)IN(0)->count;
    return TERN_OK;
}

static tern_status ev_constant_of_shape(const ectx *c)
{
    tern_status st;
    int64_t shape[TERN_GRAPH_MAX_RANK + 1];
    int n;
    if ((st = eints(c, 0, shape, TERN_GRAPH_MAX_RANK, &n)))
        return st;
    for (int k = 0; k < n; k++)
        if (shape[k] < 0)
            return efail(c, TERN_ERR_INVALID, "shape[%d] = %lld is negative", k, (long long)shape[k]);
    const tern_graph_attr *v = tern_graph_node_attr(c->n, "value");
    if (v && (v->type != TERN_ATTR_TENSOR || v->t->count != 1))
        return efail(c, TERN_ERR_INVALID, "value must be a one-element tensor");
    tern_host_tensor *o;
    if ((st = eout(c, 0, v ? v->t->type : TERN_ELEM_FLOAT, n, shape, &o)) || !o)
        return st;
    for (size_t k = 0; k < o->count; k++) {
        if (o->f)
            o->f[k] = v ? v->t->f[0] : 0.0f;
        else
            o->i[k] = v->t->i[0];
    }
    return TERN_OK;
}

static tern_status ev_range(const ectx *c)
{
    tern_status st;
    for (int k = 0; k < 3; k++) {
        if ((st = ereq(c, k, 0)))
            return st;
        if (IN(k)->count != 1)
            return efail(c, TERN_ERR_INVALID, "input %d must be a scalar", k);
    }
    tern_elem_type t = IN(0)->type;
    double s = rd(IN(0), 0), l = rd(IN(1), 0), d = rd(IN(2), 0);
    if (d == 0 || isnan(s) || isnan(l) || isnan(d))
        return efail(c, TERN_ERR_INVALID, "delta is 0 or an operand is NaN");
    double nd = ceil((l - s) / d);
    if (nd > (double)GRAPH_MAX_ELEMS)
        return efail(c, TERN_ERR_RANGE, "%g elements exceed the limit", nd);
    int64_t n = nd > 0 ? (int64_t)nd : 0;
    tern_host_tensor *o;
    if ((st = eout(c, 0, t, 1, &n, &o)) || !o)
        return st;
    for (int64_t k = 0; k < n; k++) {
        if (o->f)
            o->f[k] = (float)(s + (double)k * d);
        else
            o->i[k] = (int64_t)((uint64_t)ri(IN(0), 0) + (uint64_t)k * (uint64_t)ri(IN(2), 0));
    }
    graph_tensor_normalize(o);
    return TERN_OK;
}

static tern_status ev_constant(const ectx *c)
{
    if (c->n->n_attrs != 1)
        return efail(c, TERN_ERR_INVALID, "needs exactly one value attribute, has %d", c->n->n_attrs);
    const tern_graph_attr *a = &c->n->attrs[0];
    tern_status st;
    tern_host_tensor *o;
    int64_t n = (int64_t)a->n;
    if (strcmp(a->name, "value") == 0 && a->type == TERN_ATTR_TENSOR) {
        if (!WANT_OUT(0))
            return TERN_OK;
        tern_error e;
        if (tern_host_tensor_clone(a->t, &o, &e))
            return efail(c, e.code, "%s", e.msg);
        c->out[0] = o;
        return TERN_OK;
    }
    if (strcmp(a->name, "value_float") == 0 && a->type == TERN_ATTR_FLOAT) {
        if ((st = eout(c, 0, TERN_ELEM_FLOAT, 0, NULL, &o)) || !o)
            return st;
        o->f[0] = a->f;
    } else if (strcmp(a->name, "value_int") == 0 && a->type == TERN_ATTR_INT) {
        if ((st = eout(c, 0, TERN_ELEM_INT64, 0, NULL, &o)) || !o)
            return st;
        o->i[0] = a->i;
    } else if (strcmp(a->name, "value_floats") == 0 && a->type == TERN_ATTR_FLOATS) {
        if ((st = eout(c, 0, TERN_ELEM_FLOAT, 1, &n, &o)) || !o)
            return st;
        memcpy(o->f, a->floats, a->n * sizeof(float));
    } else if (strcmp(a->name, "value_ints") == 0 && a->type == TERN_ATTR_INTS) {
        if ((st = eout(c, 0, TERN_ELEM_INT64, 1, &n, &o)) || !o)
            return st;
        memcpy(o->i, a->ints, a->n * sizeof(int64_t));
    } else
        return efail(c, TERN_ERR_UNSUPPORTED, "value attribute \"%s\" is not supported", a->name);
    return TERN_OK;
}

/* ---- dispatch ---- */
static const eval_fn table[TERN_GOP_COUNT] = {
    [TERN_GOP_ADD] = graph_ev_binary, [TERN_GOP_SUB] = graph_ev_binary, [TERN_GOP_MUL] = graph_ev_binary, [TERN_GOP_DIV] = graph_ev_binary,
    [TERN_GOP_POW] = graph_ev_binary, [TERN_GOP_MOD] = graph_ev_binary, [TERN_GOP_AND] = graph_ev_binary, [TERN_GOP_OR] = graph_ev_binary,
    [TERN_GOP_XOR] = graph_ev_binary, [TERN_GOP_EQUAL] = graph_ev_binary, [TERN_GOP_LESS] = graph_ev_binary,
    [TERN_GOP_GREATER] = graph_ev_binary, [TERN_GOP_LESS_OR_EQUAL] = graph_ev_binary, [TERN_GOP_GREATER_OR_EQUAL] = graph_ev_binary,
    [TERN_GOP_BIT_SHIFT] = graph_ev_binary, [TERN_GOP_P_RELU] = graph_ev_binary, [TERN_GOP_MAX] = graph_ev_variadic,
    [TERN_GOP_MIN] = graph_ev_variadic, [TERN_GOP_SUM] = graph_ev_variadic, [TERN_GOP_MEAN] = graph_ev_variadic,
    [TERN_GOP_WHERE] = graph_ev_where, [TERN_GOP_NEG] = graph_ev_unary, [TERN_GOP_ABS] = graph_ev_unary, [TERN_GOP_RELU] = graph_ev_unary,
    [TERN_GOP_SQRT] = graph_ev_unary, [TERN_GOP_EXP] = graph_ev_unary, [TERN_GOP_LOG] = graph_ev_unary, [TERN_GOP_TANH] = graph_ev_unary,
    [TERN_GOP_SIGMOID] = graph_ev_unary, [TERN_GOP_ERF] = graph_ev_unary, [TERN_GOP_RECIPROCAL] = graph_ev_unary,
    [TERN_GOP_FLOOR] = graph_ev_unary, [TERN_GOP_CEIL] = graph_ev_unary, [TERN_GOP_ROUND] = graph_ev_unary, [TERN_GOP_SIN] = graph_ev_unary,
    [TERN_GOP_COS] = graph_ev_unary, [TERN_GOP_TAN] = graph_ev_unary, [TERN_GOP_ASIN] = graph_ev_unary, [TERN_GOP_ACOS] = graph_ev_unary,
    [TERN_GOP_ATAN] = graph_ev_unary, [TERN_GOP_SINH] = graph_ev_unary, [TERN_GOP_COSH] = graph_ev_unary, [TERN_GOP_ASINH] = graph_ev_unary,
    [TERN_GOP_ACOSH] = graph_ev_unary, [TERN_GOP_ATANH] = graph_ev_unary, [TERN_GOP_SOFTPLUS] = graph_ev_unary,
    [TERN_GOP_SOFTSIGN] = graph_ev_unary, [TERN_GOP_SIGN] = graph_ev_unary, [TERN_GOP_NOT] = graph_ev_unary,
    [TERN_GOP_IS_NAN] = graph_ev_unary, [TERN_GOP_IS_INF] = graph_ev_unary, [TERN_GOP_LEAKY_RELU] = graph_ev_unary,
    [TERN_GOP_ELU] = graph_ev_unary, [TERN_GOP_CELU] = graph_ev_unary, [TERN_GOP_SELU] = graph_ev_unary,
    [TERN_GOP_THRESHOLDED_RELU] = graph_ev_unary, [TERN_GOP_HARD_SIGMOID] = graph_ev_unary, [TERN_GOP_HARD_SWISH] = graph_ev_unary,
    [TERN_GOP_MISH] = graph_ev_unary, [TERN_GOP_GELU] = graph_ev_unary, [TERN_GOP_SHRINK] = graph_ev_unary, [TERN_GOP_CLIP] = graph_ev_unary,
    [TERN_GOP_IDENTITY] = graph_ev_unary, [TERN_GOP_DROPOUT] = graph_ev_unary, [TERN_GOP_CAST] = graph_ev_cast,
    [TERN_GOP_CAST_LIKE] = graph_ev_cast, [TERN_GOP_RESHAPE] = graph_ev_reshape, [TERN_GOP_FLATTEN] = graph_ev_flatten,
    [TERN_GOP_UNSQUEEZE] = graph_ev_unsqueeze, [TERN_GOP_SQUEEZE] = graph_ev_squeeze, [TERN_GOP_TRANSPOSE] = graph_ev_transpose,
    [TERN_GOP_CONCAT] = graph_ev_concat, [TERN_GOP_SPLIT] = graph_ev_split, [TERN_GOP_SLICE] = graph_ev_slice,
    [TERN_GOP_GATHER] = graph_ev_gather, [TERN_GOP_GATHER_ELEMENTS] = graph_ev_gather_elements, [TERN_GOP_EXPAND] = graph_ev_expand,
    [TERN_GOP_TILE] = graph_ev_tile, [TERN_GOP_PAD] = graph_ev_pad, [TERN_GOP_SHAPE] = ev_shape, [TERN_GOP_SIZE] = ev_size,
    [TERN_GOP_CONSTANT_OF_SHAPE] = ev_constant_of_shape, [TERN_GOP_RANGE] = ev_range,
    [TERN_GOP_CONSTANT] = ev_constant, [TERN_GOP_TRILU] = graph_ev_trilu, [TERN_GOP_CUM_SUM] = graph_ev_cumsum,
    /* the family files' evaluators (ops_<family>.c) */
    [TERN_GOP_RESIZE] = graph_ev_resize, [TERN_GOP_UPSAMPLE] = graph_ev_resize,
    [TERN_GOP_CONV_TRANSPOSE] = graph_ev_convtranspose, [TERN_GOP_TOP_K] = graph_ev_topk,
    [TERN_GOP_GATHER_ND] = graph_ev_gather_nd, [TERN_GOP_SCATTER_ND] = graph_ev_scatter_nd,
    [TERN_GOP_SCATTER_ELEMENTS] = graph_ev_scatter_elements, [TERN_GOP_ONE_HOT] = graph_ev_onehot,
    [TERN_GOP_DEPTH_TO_SPACE] = graph_ev_depth_space, [TERN_GOP_SPACE_TO_DEPTH] = graph_ev_depth_space,
    [TERN_GOP_EYE_LIKE] = graph_ev_eyelike, [TERN_GOP_LRN] = graph_ev_lrn,
    [TERN_GOP_MEAN_VARIANCE_NORMALIZATION] = graph_ev_mvn, [TERN_GOP_NON_ZERO] = graph_ev_nonzero,
    [TERN_GOP_COMPRESS] = graph_ev_compress, [TERN_GOP_MATMUL] = graph_ev_matmul, [TERN_GOP_GEMM] = graph_ev_gemm,
    [TERN_GOP_MATMUL_BIAS] = graph_ev_matmul_bias, [TERN_GOP_CONV] = graph_ev_conv, [TERN_GOP_MAX_POOL] = graph_ev_pool,
    [TERN_GOP_AVERAGE_POOL] = graph_ev_pool, [TERN_GOP_GLOBAL_AVERAGE_POOL] = graph_ev_global_pool,
    [TERN_GOP_GLOBAL_MAX_POOL] = graph_ev_global_pool, [TERN_GOP_BATCH_NORMALIZATION] = graph_ev_batchnorm,
    [TERN_GOP_INSTANCE_NORMALIZATION] = graph_ev_instancenorm, [TERN_GOP_LAYER_NORMALIZATION] = graph_ev_layernorm,
    [TERN_GOP_SOFTMAX] = graph_ev_softmax, [TERN_GOP_LOG_SOFTMAX] = graph_ev_softmax,
    [TERN_GOP_HARDMAX] = graph_ev_softmax, [TERN_GOP_REDUCE_SUM] = graph_ev_reduce,
    [TERN_GOP_REDUCE_MEAN] = graph_ev_reduce, [TERN_GOP_REDUCE_MAX] = graph_ev_reduce,
    [TERN_GOP_REDUCE_MIN] = graph_ev_reduce, [TERN_GOP_REDUCE_PROD] = graph_ev_reduce,
    [TERN_GOP_REDUCE_L1] = graph_ev_reduce, [TERN_GOP_REDUCE_L2] = graph_ev_reduce,
    [TERN_GOP_REDUCE_SUM_SQUARE] = graph_ev_reduce, [TERN_GOP_REDUCE_LOG_SUM] = graph_ev_reduce,
    [TERN_GOP_REDUCE_LOG_SUM_EXP] = graph_ev_reduce, [TERN_GOP_ARG_MAX] = graph_ev_argminmax,
    [TERN_GOP_ARG_MIN] = graph_ev_argminmax, [TERN_GOP_ATTENTION] = graph_ev_attention,
    [TERN_GOP_ATTENTION_GRAD] = graph_ev_attention_grad, [TERN_GOP_SGD_UPDATE] = graph_ev_optim,
    [TERN_GOP_ADAM_UPDATE] = graph_ev_optim,
};

/* The evaluator of an op: the table above, this file's and the family files' (NULL: not evaluated). */
static eval_fn lookup(tern_op_id id)
{
    if ((int)id <= TERN_GOP_UNKNOWN || (int)id >= TERN_GOP_COUNT)
        return NULL;
    return table[id];
}

int tern_graph_eval_supported(const char *domain, const char *op)
{
    return lookup(tern_op_lookup(domain ? domain : "", op)) != NULL;
}

tern_status graph_eval(const tern_graph_node *n, int64_t opset, const char *label, const tern_host_tensor *const *in,
                       tern_host_tensor **out, tern_error *err)
{
    ectx c = {n, opset, label, in, n->n_inputs, out, n->n_outputs, err};
    for (int k = 0; k < n->n_outputs; k++)
        out[k] = NULL;
    eval_fn fn = lookup((tern_op_id)n->op_id);
    if (!fn)
        return efail(&c, TERN_ERR_UNSUPPORTED, "op is not supported by the host evaluator");
    for (int k = 0; k < n->n_inputs; k++)
        if (in[k] && in[k]->count && !in[k]->f && !in[k]->i && !in[k]->s)
            return efail(&c, TERN_ERR_INVALID, "input %d has no data", k);
    tern_status st = fn(&c);
    if (st) {
        for (int k = 0; k < n->n_outputs; k++) {
            tern_host_tensor_free(out[k]);
            out[k] = NULL;
        }
    }
    return st;
}

tern_status tern_graph_eval_node(const tern_graph *g, int i, const tern_host_tensor *const *inputs,
                                 tern_host_tensor **outputs, tern_error *err)
{
    if (!g || i < 0 || i >= g->n_nodes)
        return tern_error_set(err, TERN_ERR_RANGE, "eval: node %d outside [0, %d)", i, g ? g->n_nodes : 0);
    char label[400];
    tern_graph_node_label(g, i, label, sizeof label);
    return graph_eval(&g->nodes[i], g->opset, label, inputs, outputs, err);
}
