/* Shape and element-type inference. Nodes are visited in (topological) storage order; each op's rule derives its
 * outputs' type and shape from its inputs' (unknown dims stay -1) and checks operand types and shapes. Shape data
 * flows too: Shape/Size of a fully known value, and any node whose inputs are all constant and whose outputs are
 * small, are evaluated on the host, so the Shape -> Gather -> Unsqueeze -> Concat -> Reshape chains exporters emit
 * resolve to constants once the inputs' symbolic dims are bound. infer_node is one switch over every op id (no
 * default: -Wswitch names a registry row without a case) that dispatches to the rule in the op's family file
 * (ops_elementwise.c, ops_linear.c, ops_conv.c, ops_norm.c, ops_reduce.c, ops_layout.c, ops_index.c, next to
 * each family's parameter decoding); the generators and the fused attention ops are inferred here. */
#include "infer_internal.h"
#include "expand.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* tern.Attention(Q [..., Sq, D], KT [..., D, Sk], V [..., Sk, Dv] [, mask]) -> [..., Sq, Dv] */
static tern_status infer_attention(ictx *c)
{
    const tern_graph_attr *oa = tern_graph_node_attr(c->n, "out_shape");
    if (tern_graph_node_attr(c->n, "q")) { /* the layout form: sources of any shape, the output's shape given */
        const tern_graph_value *q0 = V(c, 0);
        if (!oa || oa->type != TERN_ATTR_INTS || oa->n < 1 || oa->n > TERN_GRAPH_MAX_RANK || !q0 ||
            !tern_elem_is_float(q0->type))
            return ifail(c, TERN_ERR_INVALID, "layout form needs a float Q source and \"out_shape\" (1 to %d ints)",
                         TERN_GRAPH_MAX_RANK);
        int64_t od[TERN_GRAPH_MAX_RANK];
        for (size_t d = 0; d < oa->n; d++) {
            if (oa->ints[d] < 0)
                return ifail(c, TERN_ERR_INVALID, "out_shape[%zu] = %lld", d, (long long)oa->ints[d]);
            od[d] = oa->ints[d];
        }
        set_out(c, 0, q0->type, (int)oa->n, od);
        return TERN_OK;
    }
    const tern_graph_value *q = V(c, 0), *k = V(c, 1), *v = V(c, 2);
    if (!q || !k || !v || q->rank < 2 || k->rank != q->rank || v->rank != q->rank)
        return ifail(c, TERN_ERR_INVALID, "needs Q, KT and V of the same rank >= 2");
    int r = q->rank;
    if (k->dims[r - 2] != q->dims[r - 1] || v->dims[r - 2] != k->dims[r - 1])
        return ifail(c, TERN_ERR_INVALID, "Q [..., %lld, %lld], KT [..., %lld, %lld] and V [..., %lld, %lld] do not chain",
                     (long long)q->dims[r - 2], (long long)q->dims[r - 1], (long long)k->dims[r - 2],
                     (long long)k->dims[r - 1], (long long)v->dims[r - 2], (long long)v->dims[r - 1]);
    int64_t dims[TERN_GRAPH_MAX_RANK];
    memcpy(dims, q->dims, sizeof dims);
    dims[r - 1] = v->dims[r - 1];
    set_out(c, 0, q->type, r, dims);
    return TERN_OK;
}

/* tern.AttentionGrad(Q [..., Sq, D], K [..., Sk, D], V [..., Sk, Dv], O [..., Sq, Dv], dO [..., Sq, Dv],
 * [LSE [..., Sq, 1]], [M]) -> dQ (Q's shape), dK (K's), dV (V's). K and V hold kv_rep times fewer heads in their last
 * batch dim (grouped-query attention: query head h reads K/V head h / kv_rep). M, the forward's mask, broadcasts to
 * the scores [..., Sq, Sk] (rank at most Q's, each dim 1 or the scores'): a float tensor added to them (attribute
 * mask 3, the default), or a Where condition (mask 1: the scores replaced by the fill where M != 0; 2: where 0). */
static tern_status infer_attention_grad(ictx *c)
{
    const tern_graph_value *in[6];
    static const char *const nm[6] = {"Q", "K", "V", "O", "dO", "LSE"};
    const int nin = c->n->n_inputs > 5 && V(c, 5) ? 6 : 5; /* LSE optional: the kernel recomputes it */
    for (int i = 0; i < nin; i++) {
        in[i] = V(c, i);
        if (!in[i] || !tern_elem_is_float(in[i]->type))
            return ifail(c, TERN_ERR_INVALID, "input %d (%s) must be a float tensor", i, nm[i]);
    }
    const int r = in[0]->rank;
    const int64_t rep = tern_graph_attr_int(c->n, "kv_rep", 1);
    for (int i = 1; i < nin; i++)
        if (in[i]->rank != r)
            return ifail(c, TERN_ERR_INVALID, "%s has rank %d, Q has rank %d (all inputs must have one rank)", nm[i],
                         in[i]->rank, r);
    if (nin == 5)
        in[5] = in[4]; /* the LSE checks below then hold trivially on dO's batch dims; its own dims are skipped */
    if (r < 2 || (rep != 1 && r < 3))
        return ifail(c, TERN_ERR_INVALID, "rank %d: needs >= 2 (>= 3 with kv_rep %lld)", r, (long long)rep);
    if (rep < 1 || in[0]->dims[r > 2 ? r - 3 : 0] % rep != 0)
        return ifail(c, TERN_ERR_INVALID, "kv_rep %lld does not divide Q's %lld heads (dim %d)", (long long)rep,
                     (long long)in[0]->dims[r > 2 ? r - 3 : 0], r - 3);
    const int64_t *q = in[0]->dims, Sq = q[r - 2], D = q[r - 1], Sk = in[1]->dims[r - 2], Dv = in[2]->dims[r - 1];
    for (int d = 0; d < r - 2; d++) {
        int64_t kvd = d == r - 3 ? q[d] / rep : q[d];
        if (in[1]->dims[d] != kvd || in[2]->dims[d] != kvd || in[3]->dims[d] != q[d] || in[4]->dims[d] != q[d] ||
            in[5]->dims[d] != q[d])
            return ifail(c, TERN_ERR_INVALID,
                         "batch dim %d: Q has %lld, K %lld, V %lld, O %lld, dO %lld, LSE %lld (K and V: Q's / kv_rep "
                         "%lld on the head dim)",
                         d, (long long)q[d], (long long)in[1]->dims[d], (long long)in[2]->dims[d],
                         (long long)in[3]->dims[d], (long long)in[4]->dims[d], (long long)in[5]->dims[d],
                         (long long)rep);
    }
    if (in[1]->dims[r - 1] != D || in[2]->dims[r - 2] != Sk || in[3]->dims[r - 2] != Sq || in[3]->dims[r - 1] != Dv ||
        in[4]->dims[r - 2] != Sq || in[4]->dims[r - 1] != Dv ||
        (nin == 6 && (in[5]->dims[r - 2] != Sq || in[5]->dims[r - 1] != 1)))
        return ifail(c, TERN_ERR_INVALID,
                     "Q [..., %lld, %lld], K [..., %lld, %lld], V [..., %lld, %lld], O [..., %lld, %lld], dO [..., %lld, "
                     "%lld] and LSE [..., %lld, %lld] do not match (K [..., Sk, D], V [..., Sk, Dv], O and dO [..., Sq, "
                     "Dv], LSE [..., Sq, 1])",
                     (long long)Sq, (long long)D, (long long)in[1]->dims[r - 2], (long long)in[1]->dims[r - 1],
                     (long long)in[2]->dims[r - 2], (long long)in[2]->dims[r - 1], (long long)in[3]->dims[r - 2],
                     (long long)in[3]->dims[r - 1], (long long)in[4]->dims[r - 2], (long long)in[4]->dims[r - 1],
                     (long long)in[5]->dims[r - 2], (long long)in[5]->dims[r - 1]);
    const tern_graph_value *m = V(c, 6);
    const int64_t mode = tern_graph_attr_int(c->n, "mask", 3);
    if (m && (mode < 1 || mode > 3))
        return ifail(c, TERN_ERR_INVALID, "attribute mask is %lld: 1 (Where, the fill where M != 0), 2 (where M == 0) "
                     "or 3 (M added)", (long long)mode);
    if (m) {
        if ((mode == 3 ? !tern_elem_is_float(m->type) : !tern_elem_is_valid(m->type)) || m->rank < 1 || m->rank > r)
            return ifail(c, TERN_ERR_INVALID, "input 6 (the mask M) must be a %s tensor of rank 1..%d (got rank %d)",
                         mode == 3 ? "float" : "numeric or bool", r, m->rank);
        for (int d = 0; d < m->rank; d++) {
            int sd = d + r - m->rank;
            int64_t want = sd == r - 1 ? Sk : sd == r - 2 ? Sq : q[sd];
            if (m->dims[d] != 1 && m->dims[d] != want)
                return ifail(c, TERN_ERR_INVALID, "the mask M's dim %d is %lld, the scores' is %lld (M must broadcast "
                             "to the scores [..., Sq, Sk])", d, (long long)m->dims[d], (long long)want);
        }
    }
    for (int i = 0; i < 3; i++)
        set_out(c, i, in[0]->type, r, in[i]->dims);
    return TERN_OK;
}

static tern_status infer_node(ictx *c)
{
    const tern_graph_node *n = c->n;
    const tern_op_id id = (tern_op_id)n->op_id;
    tern_status st;
    /* fused ops are the only ones outside the default domain tern infers */
    if (n->domain[0] && strcmp(n->domain, "ai.onnx") != 0 && !(tern_op_flags(id) & TERN_OPF_FUSED))
        return ifail(c, TERN_ERR_UNSUPPORTED, "domain \"%s\" is not supported", n->domain);

    /* every id has a case (no default): -Wswitch names an op added to ops.def and missing here; each case returns
     * (-Wimplicit-fallthrough) */
    switch (id) {
    case TERN_GOP_MATMUL_BIAS:
        return graph_infer_matmul(c);
    case TERN_GOP_ATTENTION:
        return infer_attention(c);
    case TERN_GOP_ATTENTION_GRAD:
        return infer_attention_grad(c);
    case TERN_GOP_SGD_UPDATE:
    case TERN_GOP_ADAM_UPDATE:
        return graph_infer_optim(c); /* ops_optim.c */
    case TERN_GOP_SQRT:
    case TERN_GOP_EXP:
    case TERN_GOP_LOG:
    case TERN_GOP_TANH:
    case TERN_GOP_SIGMOID:
    case TERN_GOP_ERF:
    case TERN_GOP_RECIPROCAL:
    case TERN_GOP_FLOOR:
    case TERN_GOP_CEIL:
    case TERN_GOP_ROUND:
    case TERN_GOP_SIN:
    case TERN_GOP_COS:
    case TERN_GOP_TAN:
    case TERN_GOP_ASIN:
    case TERN_GOP_ACOS:
    case TERN_GOP_ATAN:
    case TERN_GOP_SINH:
    case TERN_GOP_COSH:
    case TERN_GOP_ASINH:
    case TERN_GOP_ACOSH:
    case TERN_GOP_ATANH:
    case TERN_GOP_SOFTPLUS:
    case TERN_GOP_SOFTSIGN:
    case TERN_GOP_LEAKY_RELU:
    case TERN_GOP_ELU:
    case TERN_GOP_CELU:
    case TERN_GOP_SELU:
    case TERN_GOP_THRESHOLDED_RELU:
    case TERN_GOP_HARD_SIGMOID:
    case TERN_GOP_HARD_SWISH:
    case TERN_GOP_MISH:
    case TERN_GOP_GELU:
    case TERN_GOP_SHRINK:
    case TERN_GOP_SOFTMAX:
    case TERN_GOP_LOG_SOFTMAX:
    case TERN_GOP_HARDMAX:
    case TERN_GOP_NEG:
    case TERN_GOP_ABS:
    case TERN_GOP_SIGN:
    case TERN_GOP_RELU:
    case TERN_GOP_IDENTITY:
    case TERN_GOP_NOT:
    case TERN_GOP_CLIP:
    case TERN_GOP_DROPOUT:
    case TERN_GOP_TRILU:
    case TERN_GOP_CUM_SUM:
        return graph_infer_same_shape(c);
    case TERN_GOP_IS_NAN:
    case TERN_GOP_IS_INF:
        return graph_infer_is_nan_inf(c);
    case TERN_GOP_CAST:
    case TERN_GOP_CAST_LIKE:
        return graph_infer_cast(c);
    case TERN_GOP_ADD:
    case TERN_GOP_SUB:
    case TERN_GOP_MUL:
    case TERN_GOP_DIV:
    case TERN_GOP_POW:
    case TERN_GOP_MOD:
    case TERN_GOP_AND:
    case TERN_GOP_OR:
    case TERN_GOP_XOR:
    case TERN_GOP_EQUAL:
    case TERN_GOP_LESS:
    case TERN_GOP_GREATER:
    case TERN_GOP_LESS_OR_EQUAL:
    case TERN_GOP_GREATER_OR_EQUAL:
    case TERN_GOP_BIT_SHIFT:
    case TERN_GOP_P_RELU:
    case TERN_GOP_MAX:
    case TERN_GOP_MIN:
    case TERN_GOP_SUM:
    case TERN_GOP_MEAN:
    case TERN_GOP_WHERE:
        return graph_infer_broadcast(c);
    case TERN_GOP_MATMUL:
        return graph_infer_matmul(c);
    case TERN_GOP_GEMM:
        return graph_infer_gemm(c);
    case TERN_GOP_CONV:
        return graph_infer_conv(c);
    case TERN_GOP_MAX_POOL:
    case TERN_GOP_AVERAGE_POOL:
        return graph_infer_pool(c);
    case TERN_GOP_GLOBAL_AVERAGE_POOL:
    case TERN_GOP_GLOBAL_MAX_POOL:
        return graph_infer_global_pool(c);
    case TERN_GOP_BATCH_NORMALIZATION:
    case TERN_GOP_INSTANCE_NORMALIZATION:
        return graph_infer_batch_instance_norm(c);
    case TERN_GOP_LAYER_NORMALIZATION:
        return graph_infer_layer_norm(c);
    case TERN_GOP_REDUCE_SUM:
    case TERN_GOP_REDUCE_MEAN:
    case TERN_GOP_REDUCE_MAX:
    case TERN_GOP_REDUCE_MIN:
    case TERN_GOP_REDUCE_PROD:
    case TERN_GOP_REDUCE_L1:
    case TERN_GOP_REDUCE_L2:
    case TERN_GOP_REDUCE_SUM_SQUARE:
    case TERN_GOP_REDUCE_LOG_SUM:
    case TERN_GOP_REDUCE_LOG_SUM_EXP:
        return graph_infer_reduce(c);
    case TERN_GOP_ARG_MAX:
    case TERN_GOP_ARG_MIN:
        return graph_infer_arg_reduce(c);
    case TERN_GOP_RESHAPE:
        return graph_infer_reshape(c);
    case TERN_GOP_FLATTEN:
        return graph_infer_flatten(c);
    case TERN_GOP_UNSQUEEZE:
    case TERN_GOP_SQUEEZE:
        return graph_infer_squeeze(c);
    case TERN_GOP_TRANSPOSE:
        return graph_infer_transpose(c);
    case TERN_GOP_CONCAT:
        return graph_infer_concat(c);
    case TERN_GOP_SPLIT:
        return graph_infer_split(c);
    case TERN_GOP_SLICE:
        return graph_infer_slice(c);
    case TERN_GOP_GATHER:
        return graph_infer_gather(c);
    case TERN_GOP_GATHER_ELEMENTS:
        return graph_infer_gather_elements(c);
    case TERN_GOP_EXPAND:
    case TERN_GOP_TILE:
    case TERN_GOP_CONSTANT_OF_SHAPE:
        return graph_infer_expand_tile(c);
    case TERN_GOP_PAD:
        return graph_infer_pad(c);
    case TERN_GOP_SHAPE:
    case TERN_GOP_SIZE: {
        if ((st = need(c, 0)))
            return st;
        const tern_graph_value *x = V(c, 0);
        if (id == TERN_GOP_SIZE) {
            set_out(c, 0, TERN_ELEM_INT64, 0, NULL);
            return TERN_OK;
        }
        if (x->rank < 0) {
            set_out(c, 0, TERN_ELEM_INT64, 1, NULL);
            return TERN_OK;
        }
        int64_t rk = x->rank, s = tern_graph_attr_int(n, "start", 0), e = tern_graph_attr_int(n, "end", rk);
        if (s < 0)
            s = s < -rk ? 0 : s + rk;
        if (e < 0)
            e = e < -rk ? 0 : e + rk;
        s = s > rk ? rk : s;
        e = e > rk ? rk : e;
        int64_t len = e > s ? e - s : 0;
        set_out(c, 0, TERN_ELEM_INT64, 1, &len);
        return TERN_OK;
    }
    case TERN_GOP_RANGE: {
        for (int k = 0; k < 3; k++)
            if ((st = need(c, k)))
                return st;
        int64_t len = -1;
        if (K(c, 0) && K(c, 1) && K(c, 2) && K(c, 0)->count == 1 && K(c, 1)->count == 1 && K(c, 2)->count == 1) {
            double s = tern_host_tensor_get(K(c, 0), 0), l = tern_host_tensor_get(K(c, 1), 0),
                   dl = tern_host_tensor_get(K(c, 2), 0);
            double nd = dl != 0 ? ceil((l - s) / dl) : NAN;
            if (!(nd <= (double)GRAPH_MAX_ELEMS))
                return ifail(c, TERN_ERR_RANGE, "length %g is invalid or exceeds the 2^31 limit", nd);
            len = nd > 0 ? (int64_t)nd : 0;
        }
        set_out(c, 0, V(c, 0)->type, 1, &len);
        return TERN_OK;
    }
    case TERN_GOP_CONSTANT: {
        const tern_graph_attr *a = n->n_attrs == 1 ? &n->attrs[0] : NULL;
        if (!a)
            return ifail(c, TERN_ERR_INVALID, "needs exactly one value attribute, has %d", n->n_attrs);
        if (a->type == TERN_ATTR_TENSOR)
            set_out(c, 0, a->t->type, a->t->rank, a->t->dims);
        else if (a->type == TERN_ATTR_FLOAT || a->type == TERN_ATTR_INT)
            set_out(c, 0, a->type == TERN_ATTR_FLOAT ? TERN_ELEM_FLOAT : TERN_ELEM_INT64, 0, NULL);
        else if (a->type == TERN_ATTR_FLOATS || a->type == TERN_ATTR_INTS) {
            int64_t len = (int64_t)a->n;
            set_out(c, 0, a->type == TERN_ATTR_FLOATS ? TERN_ELEM_FLOAT : TERN_ELEM_INT64, 1, &len);
        } else
            return ifail(c, TERN_ERR_UNSUPPORTED, "value attribute \"%s\" is not supported", a->name);
        return TERN_OK;
    }
    case TERN_GOP_CONV_TRANSPOSE:
        return graph_infer_conv_transpose(c);
    case TERN_GOP_TOP_K:
        return graph_infer_top_k(c);
    case TERN_GOP_GATHER_ND:
        return graph_infer_gather_nd(c);
    case TERN_GOP_SCATTER_ND:
    case TERN_GOP_SCATTER_ELEMENTS:
        return graph_infer_scatter(c);
    case TERN_GOP_LRN:
    case TERN_GOP_MEAN_VARIANCE_NORMALIZATION:
        return graph_infer_lrn_mvn(c);
    case TERN_GOP_ONE_HOT:
        return graph_infer_one_hot(c);
    case TERN_GOP_DEPTH_TO_SPACE:
    case TERN_GOP_SPACE_TO_DEPTH:
        return graph_infer_depth_space(c);
    case TERN_GOP_EYE_LIKE: {
        if ((st = need_rank(c, 0)))
            return st;
        const tern_graph_attr *dt = tern_graph_node_attr(n, "dtype");
        int64_t t = dt && dt->type == TERN_ATTR_INT ? dt->i : V(c, 0)->type;
        if (t < 0 || t > 64 || !tern_elem_is_valid((int)t))
            return ifail(c, TERN_ERR_UNSUPPORTED, "dtype %lld is not supported", (long long)t);
        if (V(c, 0)->rank != 2)
            return ifail(c, TERN_ERR_INVALID, "input must be 2-D");
        same_as(c, 0, V(c, 0), (tern_elem_type)t);
        return TERN_OK;
    }
    case TERN_GOP_RESIZE:
    case TERN_GOP_UPSAMPLE:
        return graph_infer_resize(c);
    case TERN_GOP_NON_ZERO:
        return graph_infer_non_zero(c);
    case TERN_GOP_COMPRESS:
        return graph_infer_compress(c);
    case TERN_GOP_UNKNOWN:
    case TERN_GOP_EINSUM:
    case TERN_GOP_LSTM:
    case TERN_GOP_GRU:
    case TERN_GOP_RNN:
    case TERN_GOP_SOFTMAX_CROSS_ENTROPY_LOSS:
    case TERN_GOP_NEGATIVE_LOG_LIKELIHOOD_LOSS:
    case TERN_GOP_IF:
    case TERN_GOP_SCATTER:
    case TERN_GOP_REVERSE_SEQUENCE:
    case TERN_GOP_COUNT:
        break;
    }
    return ifail(c, TERN_ERR_UNSUPPORTED, "op is not supported");
}

/* Evaluates node i from its constant inputs and stores the outputs as constants (shape from the result). */
static tern_status eval_const(tern_graph *g, int i, tern_error *err)
{
    tern_graph_node *n = &g->nodes[i];
    const tern_host_tensor **in = calloc((size_t)n->n_inputs + 1, sizeof *in);
    tern_host_tensor **out = calloc((size_t)n->n_outputs + 1, sizeof *out);
    if (!in || !out) {
        free(in), free(out);
        return tern_error_set(err, TERN_ERR_NOMEM, "out of memory");
    }
    for (int k = 0; k < n->n_inputs; k++)
        in[k] = n->inputs[k] >= 0 ? g->values[n->inputs[k]].constant : NULL;
    char label[400];
    tern_graph_node_label(g, i, label, sizeof label);
    tern_status st = graph_eval(n, g->opset, label, in, out, err);
    if (!st)
        for (int k = 0; k < n->n_outputs; k++) {
            if (n->outputs[k] < 0) {
                tern_host_tensor_free(out[k]);
                continue;
            }
            tern_graph_value *v = &g->values[n->outputs[k]];
            tern_host_tensor_free(v->constant);
            v->constant = out[k];
            if (out[k]) {
                v->type = out[k]->type;
                v->rank = out[k]->rank;
                for (int d = 0; d < TERN_GRAPH_MAX_RANK; d++) {
                    v->dims[d] = d < out[k]->rank ? out[k]->dims[d] : -1;
                    free(v->dim_names[d]);
                    v->dim_names[d] = NULL;
                }
            }
        }
    free(in), free(out);
    return st;
}

/* Infers node i; evaluates it when its inputs are constant and its outputs have at most max_elems elements. */
tern_status graph_infer_node(tern_graph *g, int i, int64_t max_elems, int64_t *budget, tern_error *err);
tern_status graph_infer_node(tern_graph *g, int i, int64_t max_elems, int64_t *budget, tern_error *err)
{
    ictx c = {g, i, &g->nodes[i], err, {0}};
    const tern_graph_node *n = c.n;
    for (int k = 0; k < n->n_inputs; k++) {
        const tern_graph_value *v = V(&c, k);
        if (v && v->type == TERN_ELEM_UNDEFINED)
            return ifail(&c, TERN_ERR_INVALID, "input %d \"%s\" has no known type%s", k, v->name,
                         v->flags & TERN_VALUE_INPUT ? " (graph input without a declared type)" : "");
    }
    if (!(tern_op_flags((tern_op_id)n->op_id) & TERN_OPF_STRING_IN))
        for (int k = 0; k < n->n_inputs; k++) {
            const tern_graph_value *v = V(&c, k);
            if (v && v->type == TERN_ELEM_STRING)
                return ifail(&c, TERN_ERR_UNSUPPORTED, "input %d \"%s\" is a string tensor; only Cast and CastLike "
                             "take strings", k, v->name);
        }
    tern_status st = infer_node(&c);
    if (st)
        return st;
    /* every dim stays below 2^31 and every known element count below 2^32, so later dim arithmetic (a count
     * times a dim) cannot overflow */
    for (int k = 0; k < n->n_outputs; k++) {
        const tern_graph_value *o = OUT(&c, k);
        if (!o || o->rank < 0)
            continue;
        int64_t prod = 1;
        for (int d = 0; d < o->rank; d++) {
            if (o->dims[d] > GRAPH_MAX_ELEMS)
                return ifail(&c, TERN_ERR_RANGE, "output %d \"%s\": dim %d is %lld, above the 2^31 limit", k,
                             o->name, d, (long long)o->dims[d]);
            if (o->dims[d] > 0 && prod > 0)
                prod = prod > GRAPH_MAX_NUMEL / o->dims[d] ? GRAPH_MAX_NUMEL + 1 : prod * o->dims[d];
            if (o->dims[d] == 0)
                prod = 0;
        }
        if (prod > GRAPH_MAX_NUMEL)
            return ifail(&c, TERN_ERR_RANGE, "output %d \"%s\": element count overflows the 2^32 limit", k,
                         o->name);
    }
    /* Shape and Size of a known shape are constants. */
    if ((tern_op_flags((tern_op_id)n->op_id) & TERN_OPF_SHAPE_ONLY) && !n->domain[0] && V(&c, 0) &&
        tern_graph_value_is_static(V(&c, 0)) && OUT(&c, 0)) {
        const tern_graph_value *x = V(&c, 0);
        int64_t len = OUT(&c, 0)->rank == 1 ? OUT(&c, 0)->dims[0] : 0;
        tern_host_tensor *t;
        if ((st = tern_host_tensor_new(TERN_ELEM_INT64, OUT(&c, 0)->rank, &len, &t, err)))
            return st;
        if (n->op_id == TERN_GOP_SIZE)
            t->i[0] = graph_numel(x->rank, x->dims);
        else {
            int64_t rk = x->rank, s = tern_graph_attr_int(n, "start", 0);
            if (s < 0)
                s = s < -rk ? 0 : s + rk;
            for (int64_t k = 0; k < len; k++)
                t->i[k] = x->dims[s + k];
        }
        tern_graph_value *o = OUT(&c, 0);
        tern_host_tensor_free(o->constant);
        o->constant = t;
        return TERN_OK;
    }
    int all_const = 1;
    for (int k = 0; k < n->n_inputs; k++)
        if (V(&c, k) && !V(&c, k)->constant)
            all_const = 0;
    if (!all_const || !tern_graph_eval_supported(n->domain, n->op))
        return TERN_OK;
    int64_t total = 0;
    for (int k = 0; k < n->n_outputs; k++) {
        const tern_graph_value *o = OUT(&c, k);
        if (!o)
            continue;
        int64_t e = o->rank >= 0 ? graph_numel(o->rank, o->dims) : -1;
        if (e < 0) { /* unknown (Range, data-dependent): bound by the inputs' size instead */
            e = 0;
            for (int q = 0; q < n->n_inputs; q++)
                if (V(&c, q))
                    e += (int64_t)V(&c, q)->constant->count;
        }
        total += e;
    }
    if (!(tern_op_flags((tern_op_id)n->op_id) & TERN_OPF_NO_EXPORT_FOLD)) {
        if (total > max_elems || (budget && total > *budget))
            return TERN_OK;
        /* contractions cost up to (input elements) x (output elements): leave huge ones to the device */
        double in_elems = 0;
        for (int q = 0; q < n->n_inputs; q++)
            if (V(&c, q))
                in_elems += (double)V(&c, q)->constant->count;
        if ((tern_op_flags((tern_op_id)n->op_id) & TERN_OPF_HEAVY) && in_elems * (double)total > 2147483648.0)
            return TERN_OK;
        if (budget)
            *budget -= total;
    }
    return eval_const(g, i, err);
}

tern_status tern_graph_infer(tern_graph *g, tern_error *err)
{
    for (int k = 0; k < g->n_inputs; k++) {
        const tern_graph_value *v = &g->values[g->inputs[k]];
        if (v->type == TERN_ELEM_UNDEFINED)
            return tern_error_set(err, TERN_ERR_INVALID, "graph input \"%s\": no element type declared", v->name);
    }
    for (int v = 0; v < g->n_values; v++) {
        tern_graph_value *val = &g->values[v];
        if (val->producer >= 0) {
            graph_value_reset_shape(val);
            tern_host_tensor_free(val->constant);
            val->constant = NULL;
        }
    }
    for (int i = 0; i < g->n_nodes; i++) {
        int expanded; /* an op defined by primitives (expand.c) becomes them here, then they are inferred */
        tern_status st = graph_expand_node(g, i, &expanded, err);
        if (!st && !expanded)
            st = graph_infer_node(g, i, GRAPH_INFER_EVAL_MAX_ELEMS, NULL, err);
        if (st)
            return st;
        i -= expanded;
    }
    return TERN_OK;
}
