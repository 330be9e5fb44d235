/* Shape and element-type inference. Nodes are visited in (topological) storage order; each op's rule derives its
 * outputs' type and shape from its inputs' (unknown dims stay -1) and checks operand types and shapes. Shape data
 * flows too: Shape/Size of a fully known value, and any node whose inputs are all constant and whose outputs are
 * small, are evaluated on the host, so the Shape -> Gather -> Unsqueeze -> Concat -> Reshape chains exporters emit
 * resolve to constants once the inputs' symbolic dims are bound. */
#include "graph_internal.h"
#include "op_params.h"
#include "expand.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    tern_graph *g;
    int node;
    const tern_graph_node *n;
    tern_error *err;
    char why[256];
} ictx;

static tern_status ifail(const ictx *c, tern_status code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static tern_status ifail(const ictx *c, tern_status code, const char *fmt, ...)
{
    char msg[TERN_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return graph_node_error(c->g, c->node, c->err, code, "%s", msg);
}

static const tern_graph_value *V(const ictx *c, int k)
{
    return k < c->n->n_inputs && c->n->inputs[k] >= 0 ? &c->g->values[c->n->inputs[k]] : NULL;
}
static const tern_host_tensor *K(const ictx *c, int k)
{
    const tern_graph_value *v = V(c, k);
    return v ? v->constant : NULL;
}
static tern_graph_value *OUT(const ictx *c, int k)
{
    return k < c->n->n_outputs && c->n->outputs[k] >= 0 ? &c->g->values[c->n->outputs[k]] : NULL;
}

static void set_out(const ictx *c, int k, tern_elem_type type, int rank, const int64_t *dims)
{
    tern_graph_value *v = OUT(c, k);
    if (!v)
        return;
    v->type = type;
    v->rank = rank;
    for (int d = 0; d < TERN_GRAPH_MAX_RANK; d++) {
        v->dims[d] = d < rank && dims ? dims[d] : -1;
        free(v->dim_names[d]);
        v->dim_names[d] = NULL;
    }
}

/* keeps the symbolic names of a same-shaped input */
static void same_as(const ictx *c, int k, const tern_graph_value *src, tern_elem_type type)
{
    set_out(c, k, type, src->rank, src->dims);
    tern_graph_value *v = OUT(c, k);
    if (v && v != src)
        for (int d = 0; d < src->rank && d < TERN_GRAPH_MAX_RANK; d++)
            if (src->dim_names[d])
                v->dim_names[d] = graph_strdup(src->dim_names[d]);
}

static tern_status need(const ictx *c, int k)
{
    if (!V(c, k))
        return ifail(c, TERN_ERR_INVALID, "input %d is required", k);
    return TERN_OK;
}

static tern_status need_rank(const ictx *c, int k)
{
    tern_status st = need(c, k);
    if (st)
        return st;
    if (V(c, k)->rank < 0)
        return ifail(c, TERN_ERR_INVALID, "input %d \"%s\" has an unknown rank", k, V(c, k)->name);
    return TERN_OK;
}

static tern_status need_float(const ictx *c, int k)
{
    tern_status st = need(c, k);
    if (st)
        return st;
    if (!tern_elem_is_float(V(c, k)->type))
        return ifail(c, TERN_ERR_INVALID, "input %d \"%s\" must be float, got %s", k, V(c, k)->name,
                     tern_elem_name(V(c, k)->type));
    return TERN_OK;
}

/* An int list from a constant input (1-D int) or attribute; *known = 0 when the input is not constant. */
static tern_status int_list(const ictx *c, int input, const char *attr, int64_t *buf, int max, int *n, int *known,
                            int *given)
{
    *n = 0;
    *known = 1;
    *given = 0;
    if (V(c, input)) {
        *given = 1;
        const tern_host_tensor *t = K(c, input);
        if (!t) {
            *known = 0;
            return TERN_OK;
        }
        if (!t->i || t->rank > 1)
            return ifail(c, TERN_ERR_INVALID, "input %d must be a 1-D integer tensor", input);
        if (t->count > (size_t)max)
            return ifail(c, TERN_ERR_RANGE, "input %d holds %zu values, at most %d allowed", input, t->count, max);
        for (size_t e = 0; e < t->count; e++)
            buf[e] = t->i[e];
        *n = (int)t->count;
        return TERN_OK;
    }
    if (attr) {
        size_t na;
        const int64_t *a = graph_attr_ints(c->n, attr, &na);
        if (a) {
            if (na > (size_t)max)
                return ifail(c, TERN_ERR_RANGE, "attribute %s holds %zu values, at most %d allowed", attr, na, max);
            memcpy(buf, a, na * sizeof *a);
            *n = (int)na;
            *given = 1;
        }
    }
    return TERN_OK;
}

static tern_status bcast_inputs(ictx *c, int first, int count, int *rank, int64_t *dims)
{
    *rank = 0;
    for (int k = first; k < first + count; k++) {
        const tern_graph_value *v = V(c, k);
        if (!v)
            continue;
        if (v->rank < 0) {
            *rank = -1;
            return TERN_OK;
        }
        int64_t nd[TERN_GRAPH_MAX_RANK];
        int nr;
        if (graph_broadcast(*rank, dims, v->rank, v->dims, &nr, nd, c->why, sizeof c->why))
            return ifail(c, TERN_ERR_INVALID, "input %d \"%s\": %s", k, v->name, c->why);
        *rank = nr;
        memcpy(dims, nd, sizeof nd);
    }
    return TERN_OK;
}

static tern_status infer_matmul(ictx *c)
{
    tern_status st;
    if ((st = need_rank(c, 0)) || (st = need_rank(c, 1)))
        return st;
    const tern_graph_value *a = V(c, 0), *b = V(c, 1);
    if (a->rank < 1 || b->rank < 1)
        return ifail(c, TERN_ERR_INVALID, "operands must have rank >= 1 (got %d and %d)", a->rank, b->rank);
    if (a->type != b->type)
        return ifail(c, TERN_ERR_INVALID, "operand types differ: %s and %s", tern_elem_name(a->type),
                     tern_elem_name(b->type));
    int64_t M = a->rank == 1 ? 1 : a->dims[a->rank - 2], Ka = a->dims[a->rank - 1];
    int64_t Kb = b->rank == 1 ? b->dims[0] : b->dims[b->rank - 2], N = b->rank == 1 ? 1 : b->dims[b->rank - 1];
    if (Ka >= 0 && Kb >= 0 && Ka != Kb)
        return ifail(c, TERN_ERR_INVALID, "inner dims differ: \"%s\" has K = %lld, \"%s\" has K = %lld", a->name,
                     (long long)Ka, b->name, (long long)Kb);
    int ra = a->rank > 2 ? a->rank - 2 : 0, rb = b->rank > 2 ? b->rank - 2 : 0, r;
    int64_t dims[TERN_GRAPH_MAX_RANK + 2];
    if (graph_broadcast(ra, a->dims, rb, b->dims, &r, dims, c->why, sizeof c->why))
        return ifail(c, TERN_ERR_INVALID, "batch dims: %s", c->why);
    if (a->rank > 1)
        dims[r++] = M;
    if (b->rank > 1)
        dims[r++] = N;
    if (r > TERN_GRAPH_MAX_RANK)
        return ifail(c, TERN_ERR_RANGE, "result rank above the limit");
    if (c->n->op_id == TERN_GOP_MATMUL_BIAS) {
        const tern_graph_value *bias = V(c, 2), *res = V(c, 3);
        if (!bias || !tern_elem_is_float(a->type))
            return ifail(c, TERN_ERR_INVALID, "needs float A, W and a bias");
        int same = res ? res->rank == r && res->type == a->type : 1;
        for (int d = 0; res && same && d < r; d++)
            same = res->dims[d] == dims[d] || res->dims[d] < 0 || dims[d] < 0;
        if (!same)
            return ifail(c, TERN_ERR_INVALID, "the residual \"%s\" must have the output's type and shape", res->name);
        if (tern_graph_attr_int(c->n, "layernorm", 0)) {
            const tern_graph_value *gm = V(c, 4), *bt = V(c, 5);
            if (!gm || !tern_elem_is_float(gm->type) || (bt && !tern_elem_is_float(bt->type)))
                return ifail(c, TERN_ERR_INVALID, "the fused layer norm needs a float scale (input 4) and bias");
        }
    }
    set_out(c, 0, a->type, r, dims);
    if (c->n->n_outputs > 1) /* the fused layer norm's output next to the layer's (pre-LN fusion) */
        set_out(c, 1, a->type, r, dims);
    return TERN_OK;
}

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
 * LSE [..., Sq, 1]) -> dQ (Q's shape), dK (K's), dV (V's). K and V hold kv_rep times fewer heads in their last batch
 * dim (grouped-query attention: query head h reads K/V head h / kv_rep). */
static tern_status infer_attention_grad(ictx *c)
{
    const tern_graph_value *in[6];
    static const char *const nm[6] = {"Q", "K", "V", "O", "dO", "LSE"};
    for (int i = 0; i < 6; i++) {
        in[i] = V(c, i);
        if (!in[i] || !tern_elem_is_float(in[i]->type))
            return ifail(c, TERN_ERR_INVALID, "input %d (%s) must be a float tensor", i, nm[i]);
    }
    const int r = in[0]->rank;
    const int64_t rep = tern_graph_attr_int(c->n, "kv_rep", 1);
    for (int i = 1; i < 6; i++)
        if (in[i]->rank != r)
            return ifail(c, TERN_ERR_INVALID, "%s has rank %d, Q has rank %d (all six must have one rank)", nm[i],
                         in[i]->rank, r);
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
        in[4]->dims[r - 2] != Sq || in[4]->dims[r - 1] != Dv || in[5]->dims[r - 2] != Sq || in[5]->dims[r - 1] != 1)
        return ifail(c, TERN_ERR_INVALID,
                     "Q [..., %lld, %lld], K [..., %lld, %lld], V [..., %lld, %lld], O [..., %lld, %lld], dO [..., %lld, "
                     "%lld] and LSE [..., %lld, %lld] do not match (K [..., Sk, D], V [..., Sk, Dv], O and dO [..., Sq, "
                     "Dv], LSE [..., Sq, 1])",
                     (long long)Sq, (long long)D, (long long)in[1]->dims[r - 2], (long long)in[1]->dims[r - 1],
                     (long long)in[2]->dims[r - 2], (long long)in[2]->dims[r - 1], (long long)in[3]->dims[r - 2],
                     (long long)in[3]->dims[r - 1], (long long)in[4]->dims[r - 2], (long long)in[4]->dims[r - 1],
                     (long long)in[5]->dims[r - 2], (long long)in[5]->dims[r - 1]);
    for (int i = 0; i < 3; i++)
        set_out(c, i, in[0]->type, r, in[i]->dims);
    return TERN_OK;
}

static tern_status infer_window(ictx *c, const int64_t *kernel, int ceil_mode, int64_t C_out, tern_elem_type t)
{
    const tern_graph_value *x = V(c, 0);
    if (x->rank < 3 || x->rank > 5)
        return ifail(c, TERN_ERR_INVALID, "input rank %d: expected N, C and 1 to 3 spatial dims", x->rank);
    graph_window w;
    if (graph_window_setup(c->n, x->rank - 2, x->dims + 2, kernel, ceil_mode, &w, c->why, sizeof c->why))
        return ifail(c, TERN_ERR_INVALID, "%s", c->why);
    int64_t dims[TERN_GRAPH_MAX_RANK] = {x->dims[0], C_out};
    for (int d = 0; d < w.nsp; d++)
        dims[2 + d] = w.out[d];
    set_out(c, 0, t, x->rank, dims);
    return TERN_OK;
}

static tern_status infer_node(ictx *c)
{
    const tern_graph_node *n = c->n;
    const tern_op_id id = (tern_op_id)n->op_id;
    tern_status st;
    int64_t buf[2 * TERN_GRAPH_MAX_RANK + 2], dims[TERN_GRAPH_MAX_RANK];
    int nb, known, given, r;
    /* fused ops are the only ones outside the default domain tern infers */
    if (n->domain[0] && strcmp(n->domain, "ai.onnx") != 0 && !(tern_op_flags(id) & TERN_OPF_FUSED))
        return ifail(c, TERN_ERR_UNSUPPORTED, "domain \"%s\" is not supported", n->domain);

    /* every id has a case (no default): -Wswitch names an op added to ops.def and missing here; each case returns
     * (-Wimplicit-fallthrough) */
    switch (id) {
    case TERN_GOP_MATMUL_BIAS:
        return infer_matmul(c);
    case TERN_GOP_ATTENTION:
        return infer_attention(c);
    case TERN_GOP_ATTENTION_GRAD:
        return infer_attention_grad(c);
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
    case TERN_GOP_CUM_SUM: {
        if ((st = tern_op_flags(id) & TERN_OPF_FLOAT_IN ? need_float(c, 0) : need(c, 0)))
            return st;
        same_as(c, 0, V(c, 0), V(c, 0)->type);
        if (id == TERN_GOP_DROPOUT)
            same_as(c, 1, V(c, 0), TERN_ELEM_BOOL);
        if (id == TERN_GOP_NOT && V(c, 0)->type != TERN_ELEM_BOOL)
            return ifail(c, TERN_ERR_INVALID, "input must be bool, got %s", tern_elem_name(V(c, 0)->type));
        return TERN_OK;
    }
    case TERN_GOP_IS_NAN:
    case TERN_GOP_IS_INF: {
        if ((st = need_float(c, 0)))
            return st;
        same_as(c, 0, V(c, 0), TERN_ELEM_BOOL);
        return TERN_OK;
    }
    case TERN_GOP_CAST:
    case TERN_GOP_CAST_LIKE: {
        if ((st = need(c, 0)))
            return st;
        int64_t to;
        if (id == TERN_GOP_CAST_LIKE) {
            if ((st = need(c, 1)))
                return st;
            to = V(c, 1)->type;
        } else {
            const tern_graph_attr *a = tern_graph_node_attr(n, "to");
            if (!a || a->type != TERN_ATTR_INT)
                return ifail(c, TERN_ERR_INVALID, "attribute \"to\" (int) is required");
            to = a->i;
        }
        if (to < 0 || to > 64 || (!tern_elem_is_valid((int)to) && to != TERN_ELEM_STRING))
            return ifail(c, TERN_ERR_UNSUPPORTED, "cast to type %lld is not supported", (long long)to);
        tern_elem_type from = V(c, 0)->type;
        if ((from == TERN_ELEM_STRING) != (to == TERN_ELEM_STRING) &&
            (from == TERN_ELEM_STRING ? to : from) != TERN_ELEM_FLOAT)
            return ifail(c, TERN_ERR_UNSUPPORTED, "cast from %s to %s: text converts only to and from float",
                         tern_elem_name(from), tern_elem_name((tern_elem_type)to));
        same_as(c, 0, V(c, 0), (tern_elem_type)to);
        return TERN_OK;
    }
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
    case TERN_GOP_WHERE: {
        int where = id == TERN_GOP_WHERE, binary = tern_op_family_of(id) == TERN_OP_FAMILY_ELEMENTWISE_BINARY;
        int nin = binary ? 2 : where ? 3 : n->n_inputs;
        if (nin < 1)
            return ifail(c, TERN_ERR_INVALID, "needs at least one input");
        for (int k = 0; k < nin; k++)
            if ((st = need(c, k)))
                return st;
        int first = where ? 1 : 0;
        tern_elem_type t = V(c, first)->type;
        for (int k = first; k < nin; k++)
            if (V(c, k)->type != t && id != TERN_GOP_POW)
                return ifail(c, TERN_ERR_INVALID, "input %d \"%s\" is %s, input %d \"%s\" is %s", first,
                             V(c, first)->name, tern_elem_name(t), k, V(c, k)->name, tern_elem_name(V(c, k)->type));
        if (where && V(c, 0)->type != TERN_ELEM_BOOL)
            return ifail(c, TERN_ERR_INVALID, "condition must be bool, got %s", tern_elem_name(V(c, 0)->type));
        if ((tern_op_flags(id) & TERN_OPF_LOGICAL) && t != TERN_ELEM_BOOL)
            return ifail(c, TERN_ERR_INVALID, "operands must be bool, got %s", tern_elem_name(t));
        if ((st = bcast_inputs(c, 0, nin, &r, dims)))
            return st;
        set_out(c, 0, tern_op_flags(id) & TERN_OPF_COMPARE ? TERN_ELEM_BOOL : t, r, dims);
        return TERN_OK;
    }
    case TERN_GOP_MATMUL:
        return infer_matmul(c);
    case TERN_GOP_GEMM: {
        if ((st = need_rank(c, 0)) || (st = need_rank(c, 1)) || (st = need_float(c, 0)))
            return st;
        const tern_graph_value *a = V(c, 0), *b = V(c, 1);
        if (a->rank != 2 || b->rank != 2)
            return ifail(c, TERN_ERR_INVALID, "A and B must be 2-D (got rank %d and %d)", a->rank, b->rank);
        if (b->type != a->type || (V(c, 2) && V(c, 2)->type != a->type))
            return ifail(c, TERN_ERR_INVALID, "A, B and C types differ: %s, %s, %s", tern_elem_name(a->type),
                         tern_elem_name(b->type), V(c, 2) ? tern_elem_name(V(c, 2)->type) : "-");
        int ta = (int)tern_graph_attr_int(n, "transA", 0), tb = (int)tern_graph_attr_int(n, "transB", 0);
        int64_t Ka = a->dims[ta ? 0 : 1], Kb = b->dims[tb ? 1 : 0];
        if (Ka >= 0 && Kb >= 0 && Ka != Kb)
            return ifail(c, TERN_ERR_INVALID, "inner dims differ: op(A) has K = %lld, op(B) has K = %lld",
                         (long long)Ka, (long long)Kb);
        dims[0] = a->dims[ta ? 1 : 0];
        dims[1] = b->dims[tb ? 0 : 1];
        set_out(c, 0, a->type, 2, dims);
        return TERN_OK;
    }
    case TERN_GOP_CONV: {
        if ((st = need_rank(c, 0)) || (st = need_rank(c, 1)) || (st = need_float(c, 0)))
            return st;
        const tern_graph_value *x = V(c, 0), *w = V(c, 1);
        if (w->rank != x->rank)
            return ifail(c, TERN_ERR_INVALID, "weight rank %d differs from input rank %d", w->rank, x->rank);
        if (w->type != x->type || (V(c, 2) && V(c, 2)->type != x->type))
            return ifail(c, TERN_ERR_INVALID, "X, W and B types differ: %s, %s, %s", tern_elem_name(x->type),
                         tern_elem_name(w->type), V(c, 2) ? tern_elem_name(V(c, 2)->type) : "-");
        int64_t group = tern_graph_attr_int(n, "group", 1);
        if (group < 1 || (x->dims[1] >= 0 && w->dims[1] >= 0 && w->dims[1] * group != x->dims[1]))
            return ifail(c, TERN_ERR_INVALID, "group %lld with %lld input channels and weight [%lld, %lld, ...]",
                         (long long)group, (long long)x->dims[1], (long long)w->dims[0], (long long)w->dims[1]);
        int64_t kern[3];
        size_t nk;
        const int64_t *ks = graph_attr_ints(n, "kernel_shape", &nk);
        for (int d = 0; d < x->rank - 2 && d < 3; d++) {
            kern[d] = w->dims[2 + d] >= 0 ? w->dims[2 + d] : (ks && nk == (size_t)x->rank - 2 ? ks[d] : 1);
            if (kern[d] < 0)
                return ifail(c, TERN_ERR_INVALID, "weight spatial dims are unknown");
        }
        return infer_window(c, kern, 0, w->dims[0], x->type);
    }
    case TERN_GOP_MAX_POOL:
    case TERN_GOP_AVERAGE_POOL: {
        if ((st = need_rank(c, 0)) || (id == TERN_GOP_AVERAGE_POOL && (st = need_float(c, 0))))
            return st;
        if (V(c, 0)->type == TERN_ELEM_BOOL)
            return ifail(c, TERN_ERR_INVALID, "input must be numeric, got bool");
        size_t nk;
        const int64_t *ks = graph_attr_ints(n, "kernel_shape", &nk);
        if (!ks || nk != (size_t)V(c, 0)->rank - 2)
            return ifail(c, TERN_ERR_INVALID, "kernel_shape must have %d entries", V(c, 0)->rank - 2);
        if ((st = infer_window(c, ks, (int)tern_graph_attr_int(n, "ceil_mode", 0), V(c, 0)->dims[1], V(c, 0)->type)))
            return st;
        if (OUT(c, 0) && OUT(c, 1))
            set_out(c, 1, TERN_ELEM_INT64, OUT(c, 0)->rank, OUT(c, 0)->dims);
        else if (OUT(c, 1)) { /* indices only: recompute through a scratch of output 0's shape */
            return ifail(c, TERN_ERR_UNSUPPORTED, "Indices output without the values output");
        }
        return TERN_OK;
    }
    case TERN_GOP_GLOBAL_AVERAGE_POOL:
    case TERN_GOP_GLOBAL_MAX_POOL: {
        if ((st = need_rank(c, 0)) || (st = need_float(c, 0)))
            return st;
        const tern_graph_value *x = V(c, 0);
        if (x->rank < 3)
            return ifail(c, TERN_ERR_INVALID, "input rank %d below 3", x->rank);
        for (int d = 0; d < x->rank; d++)
            dims[d] = d < 2 ? x->dims[d] : 1;
        set_out(c, 0, x->type, x->rank, dims);
        return TERN_OK;
    }
    case TERN_GOP_BATCH_NORMALIZATION:
    case TERN_GOP_INSTANCE_NORMALIZATION: {
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
    case TERN_GOP_LAYER_NORMALIZATION: {
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
    case TERN_GOP_REDUCE_SUM:
    case TERN_GOP_REDUCE_MEAN:
    case TERN_GOP_REDUCE_MAX:
    case TERN_GOP_REDUCE_MIN:
    case TERN_GOP_REDUCE_PROD:
    case TERN_GOP_REDUCE_L1:
    case TERN_GOP_REDUCE_L2:
    case TERN_GOP_REDUCE_SUM_SQUARE:
    case TERN_GOP_REDUCE_LOG_SUM:
    case TERN_GOP_REDUCE_LOG_SUM_EXP: {
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
    case TERN_GOP_ARG_MAX:
    case TERN_GOP_ARG_MIN: {
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
    case TERN_GOP_RESHAPE: {
        if ((st = need(c, 0)))
            return st;
        const tern_graph_value *x = V(c, 0);
        if (c->g->opset < 5 || n->n_inputs < 2) {
            if ((st = int_list(c, 99, "shape", buf, TERN_GRAPH_MAX_RANK + 1, &nb, &known, &given)))
                return st;
            if (!given)
                return ifail(c, TERN_ERR_INVALID, "shape is required");
        } else {
            if ((st = need(c, 1)) ||
                (st = int_list(c, 1, NULL, buf, TERN_GRAPH_MAX_RANK + 1, &nb, &known, &given)))
                return st;
            if (!known) {
                const tern_graph_value *s = V(c, 1);
                if (s->rank == 1 && s->dims[0] >= 0) {
                    if (s->dims[0] > TERN_GRAPH_MAX_RANK)
                        return ifail(c, TERN_ERR_RANGE, "target rank %lld above the limit", (long long)s->dims[0]);
                    set_out(c, 0, x->type, (int)s->dims[0], NULL);
                } else
                    set_out(c, 0, x->type, -1, NULL);
                return TERN_OK;
            }
        }
        int64_t in_dims[TERN_GRAPH_MAX_RANK];
        int in_rank = x->rank;
        if (in_rank < 0) { /* unknown input rank: only 0-free targets without -1 resolve */
            in_rank = 0;
            for (int k = 0; k < nb; k++)
                if (buf[k] <= 0) {
                    set_out(c, 0, x->type, nb, NULL);
                    return TERN_OK;
                }
        }
        memcpy(in_dims, x->dims, sizeof in_dims);
        if (x->rank < 0) {
            in_dims[0] = -1;
            in_rank = 1;
        }
        if (graph_reshape_dims(in_rank, in_dims, buf, nb, (int)tern_graph_attr_int(n, "allowzero", 0), dims, c->why,
                               sizeof c->why))
            return ifail(c, TERN_ERR_INVALID, "input \"%s\" to shape: %s", x->name, c->why);
        set_out(c, 0, x->type, nb, dims);
        return TERN_OK;
    }
    case TERN_GOP_FLATTEN: {
        if ((st = need_rank(c, 0)))
            return st;
        const tern_graph_value *x = V(c, 0);
        int64_t axis = tern_graph_attr_int(n, "axis", 1);
        if (axis < -x->rank || axis > x->rank)
            return ifail(c, TERN_ERR_INVALID, "axis %lld outside [%d, %d]", (long long)axis, -x->rank, x->rank);
        if (axis < 0)
            axis += x->rank;
        int64_t d2[2];
        d2[0] = graph_numel((int)axis, x->dims);
        d2[1] = graph_numel(x->rank - (int)axis, x->dims + axis);
        set_out(c, 0, x->type, 2, d2);
        return TERN_OK;
    }
    case TERN_GOP_UNSQUEEZE:
    case TERN_GOP_SQUEEZE: {
        if ((st = need(c, 0)))
            return st;
        const tern_graph_value *x = V(c, 0);
        if ((st = int_list(c, 1, "axes", buf, 2 * TERN_GRAPH_MAX_RANK, &nb, &known, &given)))
            return st;
        if (!known || x->rank < 0) {
            set_out(c, 0, x->type, -1, NULL);
            return TERN_OK;
        }
        if (id == TERN_GOP_UNSQUEEZE) {
            r = x->rank + nb;
            if (!given || r > TERN_GRAPH_MAX_RANK)
                return ifail(c, TERN_ERR_INVALID, given ? "result rank %d above the limit" : "axes are required (%d)",
                             r);
            int is_new[TERN_GRAPH_MAX_RANK] = {0};
            for (int k = 0; k < nb; k++) {
                int a;
                if (graph_norm_axis(buf[k], r, &a, c->why, sizeof c->why, "axis"))
                    return ifail(c, TERN_ERR_INVALID, "%s", c->why);
                if (is_new[a])
                    return ifail(c, TERN_ERR_INVALID, "axis %d given twice", a);
                is_new[a] = 1;
            }
            for (int d = 0, s = 0; d < r; d++)
                dims[d] = is_new[d] ? 1 : x->dims[s++];
        } else {
            int drop[TERN_GRAPH_MAX_RANK] = {0};
            if (!given)
                for (int d = 0; d < x->rank; d++) {
                    if (x->dims[d] < 0) {
                        set_out(c, 0, x->type, -1, NULL);
                        return TERN_OK;
                    }
                    drop[d] = x->dims[d] == 1;
                }
            for (int k = 0; k < nb; k++) {
                int a;
                if (graph_norm_axis(buf[k], x->rank, &a, c->why, sizeof c->why, "axis"))
                    return ifail(c, TERN_ERR_INVALID, "%s", c->why);
                if (x->dims[a] > 1 || x->dims[a] == 0)
                    return ifail(c, TERN_ERR_INVALID, "axis %d of \"%s\" has size %lld, not 1", a, x->name,
                                 (long long)x->dims[a]);
                drop[a] = 1;
            }
            r = 0;
            for (int d = 0; d < x->rank; d++)
                if (!drop[d])
                    dims[r++] = x->dims[d];
        }
        set_out(c, 0, x->type, r, dims);
        return TERN_OK;
    }
    case TERN_GOP_TRANSPOSE: {
        if ((st = need_rank(c, 0)))
            return st;
        const tern_graph_value *x = V(c, 0);
        size_t np;
        const int64_t *p = graph_attr_ints(n, "perm", &np);
        if (p && np != (size_t)x->rank)
            return ifail(c, TERN_ERR_INVALID, "perm has %zu entries for rank %d", np, x->rank);
        int seen[TERN_GRAPH_MAX_RANK] = {0};
        for (int d = 0; d < x->rank; d++) {
            int64_t v = p ? p[d] : x->rank - 1 - d;
            if (v < 0 || v >= x->rank || seen[v])
                return ifail(c, TERN_ERR_INVALID, "perm is not a permutation of 0..%d", x->rank - 1);
            seen[v] = 1;
            dims[d] = x->dims[v];
        }
        set_out(c, 0, x->type, x->rank, dims);
        return TERN_OK;
    }
    case TERN_GOP_CONCAT: {
        if (n->n_inputs < 1)
            return ifail(c, TERN_ERR_INVALID, "needs at least one input");
        int rank = -1;
        for (int k = 0; k < n->n_inputs; k++) {
            if ((st = need(c, k)))
                return st;
            if (V(c, k)->type != V(c, 0)->type)
                return ifail(c, TERN_ERR_INVALID, "input %d \"%s\" is %s, input 0 is %s", k, V(c, k)->name,
                             tern_elem_name(V(c, k)->type), tern_elem_name(V(c, 0)->type));
            if (V(c, k)->rank >= 0) {
                if (rank >= 0 && V(c, k)->rank != rank)
                    return ifail(c, TERN_ERR_INVALID, "input %d \"%s\" has rank %d, others rank %d", k, V(c, k)->name,
                                 V(c, k)->rank, rank);
                rank = V(c, k)->rank;
            }
        }
        if (rank < 0) {
            set_out(c, 0, V(c, 0)->type, -1, NULL);
            return TERN_OK;
        }
        int ax;
        if (graph_norm_axis(tern_graph_attr_int(n, "axis", 1), rank, &ax, c->why, sizeof c->why, "axis"))
            return ifail(c, TERN_ERR_INVALID, "%s", c->why);
        for (int d = 0; d < rank; d++)
            dims[d] = d == ax ? 0 : -1;
        for (int k = 0; k < n->n_inputs; k++) {
            const tern_graph_value *v = V(c, k);
            for (int d = 0; d < rank; d++) {
                int64_t vd = v->rank >= 0 ? v->dims[d] : -1;
                if (d == ax)
                    dims[d] = dims[d] < 0 || vd < 0 ? -1 : dims[d] + vd;
                else if (vd >= 0) {
                    if (dims[d] >= 0 && dims[d] != vd)
                        return ifail(c, TERN_ERR_INVALID, "input %d \"%s\" dim %d is %lld, expected %lld", k, v->name,
                                     d, (long long)vd, (long long)dims[d]);
                    dims[d] = vd;
                }
            }
        }
        set_out(c, 0, V(c, 0)->type, rank, dims);
        return TERN_OK;
    }
    case TERN_GOP_SPLIT: {
        if ((st = need_rank(c, 0)))
            return st;
        const tern_graph_value *x = V(c, 0);
        int ax, nout = n->n_outputs;
        if (graph_norm_axis(tern_graph_attr_int(n, "axis", 0), x->rank, &ax, c->why, sizeof c->why, "axis"))
            return ifail(c, TERN_ERR_INVALID, "%s", c->why);
        int64_t sizes[64];
        if (nout < 1 || nout > 64)
            return ifail(c, TERN_ERR_RANGE, "%d outputs (1 to 64 supported)", nout);
        if ((st = int_list(c, 1, "split", sizes, 64, &nb, &known, &given)))
            return st;
        int64_t dim = x->dims[ax];
        if (given && known) {
            int64_t total = 0;
            if (nb != nout)
                return ifail(c, TERN_ERR_INVALID, "split has %d sizes for %d outputs", nb, nout);
            for (int k = 0; k < nb; k++) {
                if (sizes[k] < 0 || sizes[k] > GRAPH_MAX_ELEMS)
                    return ifail(c, TERN_ERR_INVALID, "split size %lld outside [0, 2^31]", (long long)sizes[k]);
                total += sizes[k];
            }
            if (dim >= 0 && total != dim)
                return ifail(c, TERN_ERR_INVALID, "split sizes sum to %lld, axis %d of \"%s\" has %lld",
                             (long long)total, ax, x->name, (long long)dim);
        } else if (!given && dim >= 0) {
            int64_t chunk = (dim + nout - 1) / nout, total = 0;
            for (int k = 0; k < nout; k++) {
                sizes[k] = dim - total < chunk ? dim - total : chunk;
                total += sizes[k];
            }
        } else
            for (int k = 0; k < nout; k++)
                sizes[k] = -1;
        for (int k = 0; k < nout; k++) {
            memcpy(dims, x->dims, sizeof dims);
            dims[ax] = sizes[k];
            set_out(c, k, x->type, x->rank, dims);
        }
        return TERN_OK;
    }
    case TERN_GOP_SLICE: {
        if ((st = need_rank(c, 0)))
            return st;
        const tern_graph_value *x = V(c, 0);
        int64_t starts[16], ends[16], axes[16], steps[16];
        int ns, ne, na, nst, k1, k2, k3 = 1, k4 = 1, g1, g2, g3, g4;
        if (c->g->opset < 10) {
            if ((st = int_list(c, 99, "starts", starts, 16, &ns, &k1, &g1)) ||
                (st = int_list(c, 99, "ends", ends, 16, &ne, &k2, &g2)) ||
                (st = int_list(c, 99, "axes", axes, 16, &na, &k3, &g3)))
                return st;
            g4 = 0;
            nst = 0;
        } else {
            if ((st = need(c, 1)) || (st = need(c, 2)) || (st = int_list(c, 1, NULL, starts, 16, &ns, &k1, &g1)) ||
                (st = int_list(c, 2, NULL, ends, 16, &ne, &k2, &g2)) ||
                (st = int_list(c, 3, NULL, axes, 16, &na, &k3, &g3)) ||
                (st = int_list(c, 4, NULL, steps, 16, &nst, &k4, &g4)))
                return st;
        }
        memcpy(dims, x->dims, sizeof dims);
        if (!k3) {
            set_out(c, 0, x->type, x->rank, NULL);
            return TERN_OK;
        }
        if (!k1 || !k2 || !k4) { /* positions unknown: the sliced axes' sizes are unknown */
            int cnt = g3 ? na : x->rank;
            for (int k = 0; k < cnt; k++) {
                int a;
                if (graph_norm_axis(g3 ? axes[k] : k, x->rank, &a, c->why, sizeof c->why, "axis"))
                    return ifail(c, TERN_ERR_INVALID, "%s", c->why);
                dims[a] = -1;
            }
            set_out(c, 0, x->type, x->rank, dims);
            return TERN_OK;
        }
        if (ns != ne || (g3 && na != ns) || (g4 && nst != ns))
            return ifail(c, TERN_ERR_INVALID, "starts (%d), ends (%d), axes (%d), steps (%d) lengths differ", ns, ne,
                         g3 ? na : -1, g4 ? nst : -1);
        int used[TERN_GRAPH_MAX_RANK] = {0};
        for (int k = 0; k < ns; k++) {
            int a;
            if (graph_norm_axis(g3 ? axes[k] : k, x->rank, &a, c->why, sizeof c->why, "axis"))
                return ifail(c, TERN_ERR_INVALID, "%s", c->why);
            if (used[a])
                return ifail(c, TERN_ERR_INVALID, "axis %d sliced twice", a);
            used[a] = 1;
            int64_t step = g4 ? steps[k] : 1, s = starts[k], e = ends[k];
            if (step == 0)
                return ifail(c, TERN_ERR_INVALID, "step 0 on axis %d", a);
            dims[a] = x->dims[a] < 0 ? -1 : graph_slice_len(x->dims[a], &s, &e, step);
        }
        set_out(c, 0, x->type, x->rank, dims);
        return TERN_OK;
    }
    case TERN_GOP_GATHER: {
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
    case TERN_GOP_GATHER_ELEMENTS: {
        if ((st = need(c, 0)) || (st = need(c, 1)))
            return st;
        same_as(c, 0, V(c, 1), V(c, 0)->type);
        return TERN_OK;
    }
    case TERN_GOP_EXPAND:
    case TERN_GOP_TILE:
    case TERN_GOP_CONSTANT_OF_SHAPE: {
        int data = id != TERN_GOP_CONSTANT_OF_SHAPE, si = data ? 1 : 0;
        if ((data && (st = need(c, 0))) || (st = need(c, si)))
            return st;
        const tern_graph_value *x = data ? V(c, 0) : NULL;
        tern_elem_type t = x ? x->type : TERN_ELEM_FLOAT;
        if (!data) {
            const tern_graph_attr *v = tern_graph_node_attr(n, "value");
            if (v && (v->type != TERN_ATTR_TENSOR || v->t->count != 1))
                return ifail(c, TERN_ERR_INVALID, "value must be a one-element tensor");
            if (v)
                t = v->t->type;
        }
        if ((st = int_list(c, si, NULL, buf, TERN_GRAPH_MAX_RANK + 1, &nb, &known, &given)))
            return st;
        const tern_graph_value *s = V(c, si);
        if (!known) {
            int len = s->rank == 1 ? (int)s->dims[0] : -1;
            if (len > TERN_GRAPH_MAX_RANK)
                return ifail(c, TERN_ERR_RANGE, "shape length %d above the limit", len);
            if (id == TERN_GOP_EXPAND && len >= 0 && x->rank >= 0)
                len = len > x->rank ? len : x->rank;
            if (id == TERN_GOP_TILE)
                len = x->rank;
            set_out(c, 0, t, len, NULL);
            return TERN_OK;
        }
        if (nb > TERN_GRAPH_MAX_RANK)
            return ifail(c, TERN_ERR_RANGE, "shape length %d above the limit", nb);
        for (int k = 0; k < nb; k++)
            if (buf[k] < 0)
                return ifail(c, TERN_ERR_INVALID, "shape[%d] = %lld is negative", k, (long long)buf[k]);
        if (id == TERN_GOP_EXPAND) {
            if (x->rank < 0) {
                set_out(c, 0, t, -1, NULL);
                return TERN_OK;
            }
            if (graph_broadcast(x->rank, x->dims, nb, buf, &r, dims, c->why, sizeof c->why))
                return ifail(c, TERN_ERR_INVALID, "\"%s\" to the target shape: %s", x->name, c->why);
            set_out(c, 0, t, r, dims);
        } else if (id == TERN_GOP_TILE) {
            if (x->rank >= 0 && nb != x->rank)
                return ifail(c, TERN_ERR_INVALID, "repeats has %d entries for rank %d", nb, x->rank);
            for (int d = 0; d < nb; d++) {
                if (x->rank >= 0 && x->dims[d] > 0 && buf[d] > GRAPH_MAX_ELEMS / x->dims[d])
                    return ifail(c, TERN_ERR_RANGE, "repeats[%d] = %lld overflows the 2^31 element limit", d,
                                 (long long)buf[d]);
                dims[d] = x->rank < 0 || x->dims[d] < 0 ? -1 : x->dims[d] * buf[d];
            }
            set_out(c, 0, t, nb, dims);
        } else
            set_out(c, 0, t, nb, buf);
        return TERN_OK;
    }
    case TERN_GOP_PAD: {
        if ((st = need_rank(c, 0)))
            return st;
        const tern_graph_value *x = V(c, 0);
        if (c->g->opset >= 11 && (st = need(c, 1)))
            return st;
        graph_pad_args pa;
        if ((st = graph_pad_decode(n, c->g->opset, V(c, 1) != NULL, K(c, 1), 0, NULL, &pa, c->why, sizeof c->why)))
            return ifail(c, st, "%s", c->why);
        if (V(c, 3))
            return ifail(c, TERN_ERR_UNSUPPORTED, "the axes input (opset 18) is not supported");
        if (!pa.known) {
            set_out(c, 0, x->type, x->rank, NULL);
            return TERN_OK;
        }
        if (pa.n != 2 * x->rank)
            return ifail(c, TERN_ERR_INVALID, "pads has %d entries for rank %d", pa.n, x->rank);
        const int64_t *pb = pa.pads;
        for (int d = 0; d < x->rank; d++) {
            if (pb[d] < -GRAPH_MAX_ELEMS || pb[d] > GRAPH_MAX_ELEMS || pb[x->rank + d] < -GRAPH_MAX_ELEMS ||
                pb[x->rank + d] > GRAPH_MAX_ELEMS)
                return ifail(c, TERN_ERR_RANGE, "pads on axis %d are out of range", d);
            dims[d] = x->dims[d] < 0 ? -1 : x->dims[d] + pb[d] + pb[x->rank + d];
            if (x->dims[d] >= 0 && dims[d] < 0)
                return ifail(c, TERN_ERR_INVALID, "pads on axis %d make it negative", d);
        }
        set_out(c, 0, x->type, x->rank, dims);
        return TERN_OK;
    }
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
    case TERN_GOP_CONV_TRANSPOSE: {
        if ((st = need_rank(c, 0)) || (st = need_rank(c, 1)) || (st = need_float(c, 0)))
            return st;
        const tern_graph_value *x = V(c, 0), *w = V(c, 1);
        if (x->rank < 3 || x->rank > 5 || w->rank != x->rank)
            return ifail(c, TERN_ERR_INVALID, "input rank %d / weight rank %d: expected N, C and 1 to 3 spatial dims",
                         x->rank, w->rank);
        int64_t group = tern_graph_attr_int(n, "group", 1);
        if (group < 1 || group > GRAPH_MAX_ELEMS)
            return ifail(c, TERN_ERR_INVALID, "group %lld is invalid", (long long)group);
        for (int d = 2; d < w->rank; d++)
            if (w->dims[d] < 0)
                return ifail(c, TERN_ERR_INVALID, "weight spatial dims are unknown");
        graph_window w2;
        if (graph_convtranspose_setup(n, x->rank - 2, x->dims + 2, w->dims + 2, &w2, c->why, sizeof c->why))
            return ifail(c, TERN_ERR_INVALID, "%s", c->why);
        dims[0] = x->dims[0];
        dims[1] = w->dims[1] < 0 ? -1 : w->dims[1] * group;
        for (int d = 0; d < w2.nsp; d++)
            dims[2 + d] = w2.out[d];
        set_out(c, 0, x->type, x->rank, dims);
        return TERN_OK;
    }
    case TERN_GOP_TOP_K: {
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
    case TERN_GOP_GATHER_ND: {
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
    case TERN_GOP_SCATTER_ND:
    case TERN_GOP_SCATTER_ELEMENTS:
    case TERN_GOP_LRN:
    case TERN_GOP_MEAN_VARIANCE_NORMALIZATION: {
        if ((st = need(c, 0)))
            return st;
        int nin = id == TERN_GOP_SCATTER_ND || id == TERN_GOP_SCATTER_ELEMENTS ? 3 : 1;
        for (int k = 1; k < nin; k++)
            if ((st = need(c, k)))
                return st;
        if (nin == 3 && V(c, 2)->type != V(c, 0)->type)
            return ifail(c, TERN_ERR_INVALID, "updates are %s, data is %s", tern_elem_name(V(c, 2)->type),
                         tern_elem_name(V(c, 0)->type));
        if (nin == 1 && (st = need_float(c, 0)))
            return st;
        same_as(c, 0, V(c, 0), V(c, 0)->type);
        return TERN_OK;
    }
    case TERN_GOP_ONE_HOT: {
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
    case TERN_GOP_DEPTH_TO_SPACE:
    case TERN_GOP_SPACE_TO_DEPTH: {
        if ((st = need_rank(c, 0)))
            return st;
        const tern_graph_value *x = V(c, 0);
        int64_t bs = tern_graph_attr_int(n, "blocksize", 0);
        if (x->rank != 4 || bs < 1 || bs > 4096)
            return ifail(c, TERN_ERR_INVALID, "needs a 4-D input and blocksize in [1, 4096]");
        int ds = id == TERN_GOP_DEPTH_TO_SPACE;
        dims[0] = x->dims[0];
        dims[1] = x->dims[1] < 0 ? -1 : ds ? x->dims[1] / (bs * bs) : x->dims[1] * bs * bs;
        dims[2] = x->dims[2] < 0 ? -1 : ds ? x->dims[2] * bs : x->dims[2] / bs;
        dims[3] = x->dims[3] < 0 ? -1 : ds ? x->dims[3] * bs : x->dims[3] / bs;
        if (ds && x->dims[1] >= 0 && x->dims[1] % (bs * bs))
            return ifail(c, TERN_ERR_INVALID, "channels %lld do not divide by blocksize^2", (long long)x->dims[1]);
        set_out(c, 0, x->type, 4, dims);
        return TERN_OK;
    }
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
    case TERN_GOP_UPSAMPLE: {
        if ((st = need_rank(c, 0)))
            return st;
        const tern_graph_value *x = V(c, 0);
        int legacy = id == TERN_GOP_UPSAMPLE || c->g->opset < 11;
        const tern_graph_value *sv = legacy ? V(c, 1) : V(c, 2), *zv = legacy ? NULL : V(c, 3);
        const tern_host_tensor *sc = sv ? sv->constant : NULL, *sz = zv ? zv->constant : NULL;
        if ((sv && !sc) || (zv && !sz) || x->rank < 0 || !tern_graph_value_is_static(x)) {
            set_out(c, 0, x->type, x->rank, NULL);
            return TERN_OK;
        }
        tern_host_tensor *attr_sc = NULL;
        if (!sv && !zv) { /* Upsample-7: scales attribute */
            const tern_graph_attr *a = tern_graph_node_attr(n, "scales");
            if (a && a->type == TERN_ATTR_FLOATS) {
                int64_t nn = (int64_t)a->n;
                if ((st = tern_host_tensor_new(TERN_ELEM_FLOAT, 1, &nn, &attr_sc, c->err)))
                    return st;
                memcpy(attr_sc->f, a->floats, a->n * sizeof(float));
            }
            sc = attr_sc;
        }
        double scale[TERN_GRAPH_MAX_RANK];
        int bad = graph_resize_dims(n, c->g->opset, x->rank, x->dims, sc, sz, dims, scale, c->why, sizeof c->why);
        tern_host_tensor_free(attr_sc);
        if (bad)
            return ifail(c, TERN_ERR_INVALID, "%s", c->why);
        set_out(c, 0, x->type, x->rank, dims);
        return TERN_OK;
    }
    case TERN_GOP_NON_ZERO: {
        if ((st = need_rank(c, 0)))
            return st;
        dims[0] = V(c, 0)->rank ? V(c, 0)->rank : 1;
        dims[1] = -1;
        set_out(c, 0, TERN_ELEM_INT64, 2, dims);
        return TERN_OK;
    }
    case TERN_GOP_COMPRESS: {
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
        memcpy(dims, V(c, 0)->dims, sizeof dims);
        dims[ax] = -1;
        set_out(c, 0, V(c, 0)->type, V(c, 0)->rank, dims);
        return TERN_OK;
    }
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
