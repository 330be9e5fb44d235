/* Op expansions, the shared part: which ops expand, the node builder the expanders use, and the splice that puts
 * an expansion in place of its node. Expanding during inference (rather than lowering each op separately) lets
 * one faithful rewrite reuse everything the primitive ops already have: shape rules, the host reference, constant
 * folding of weight rearrangements, and the device lowering. The new nodes take the expanded node's place in the
 * node array, so the graph stays topologically sorted without a re-sort that could move already inferred nodes. */
#include "graph_internal.h"
#include "expand.h"
#include "op_params.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define XB_MAX_ATTRS 8

int graph_expand_has(int op_id)
{
    switch ((tern_op_id)op_id) {
    case TERN_GOP_LSTM:
    case TERN_GOP_GRU:
    case TERN_GOP_RNN:
    case TERN_GOP_SOFTMAX_CROSS_ENTROPY_LOSS:
    case TERN_GOP_NEGATIVE_LOG_LIKELIHOOD_LOSS:
    case TERN_GOP_EINSUM:
    case TERN_GOP_CONV_TRANSPOSE:
    case TERN_GOP_SCATTER_ND:
    case TERN_GOP_SCATTER_ELEMENTS:
    case TERN_GOP_SCATTER:
    case TERN_GOP_REVERSE_SEQUENCE:
    case TERN_GOP_IF:
        return 1;
    default:
        return 0;
    }
}

int xb_fail(xb *b, tern_status code, const char *fmt, ...)
{
    if (b->st)
        return -1;
    char msg[TERN_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    b->st = graph_node_error(b->g, b->node, b->err, code, "%s", msg);
    if (!b->st)
        b->st = code;
    return -1;
}

int xb_in(const xb *b, int k)
{
    const tern_graph_node *n = &b->g->nodes[b->node];
    return k < n->n_inputs ? n->inputs[k] : -1;
}

const tern_graph_value *xb_val(const xb *b, int id)
{
    return id >= 0 && id < b->g->n_values ? &b->g->values[id] : NULL;
}

static int new_value(xb *b)
{
    char name[300];
    snprintf(name, sizeof name, "%.200s/x%d", b->g->nodes[b->node].name, b->seq++);
    int id = graph_add_value(b->g, name);
    if (id < 0)
        return xb_fail(b, TERN_ERR_NOMEM, "expansion: out of memory");
    return id;
}

int xb_op_to(xb *b, const char *op, int n_in, const int *ins, int out)
{
    if (b->st)
        return -1;
    if (out < 0 && (out = new_value(b)) < 0)
        return -1;
    char name[300];
    snprintf(name, sizeof name, "%.200s/%.40s%d", b->g->nodes[b->node].name, op, b->seq++);
    int idx = graph_add_node(b->g, op, "", name, n_in, 1, XB_MAX_ATTRS);
    if (idx < 0)
        return xb_fail(b, TERN_ERR_NOMEM, "expansion: out of memory");
    tern_graph_node *n = &b->g->nodes[idx];
    for (int k = 0; k < n_in; k++)
        n->inputs[k] = ins[k];
    n->outputs[0] = out;
    b->last = idx;
    return out;
}

int xb_op(xb *b, const char *op, int n_in, const int *ins)
{
    return xb_op_to(b, op, n_in, ins, -1);
}

int xb_output_to(xb *b, int out)
{
    if (b->st)
        return -1;
    if (out >= 0)
        b->g->nodes[b->last].outputs[0] = out;
    return out;
}

static tern_graph_attr *next_attr(xb *b, const char *name, tern_attr_type type)
{
    if (b->st)
        return NULL;
    tern_graph_node *n = &b->g->nodes[b->last];
    TERN_ASSERT(n->n_attrs < XB_MAX_ATTRS);
    tern_graph_attr *a = &n->attrs[n->n_attrs];
    memset(a, 0, sizeof *a);
    a->name = graph_strdup(name);
    if (!a->name) {
        xb_fail(b, TERN_ERR_NOMEM, "expansion: out of memory");
        return NULL;
    }
    a->type = type;
    n->n_attrs++;
    return a;
}

void xb_attr_int(xb *b, const char *name, int64_t v)
{
    tern_graph_attr *a = next_attr(b, name, TERN_ATTR_INT);
    if (a)
        a->i = v;
}

void xb_attr_float(xb *b, const char *name, float v)
{
    tern_graph_attr *a = next_attr(b, name, TERN_ATTR_FLOAT);
    if (a)
        a->f = v;
}

void xb_attr_ints(xb *b, const char *name, int n, const int64_t *v)
{
    tern_graph_attr *a = next_attr(b, name, TERN_ATTR_INTS);
    if (!a)
        return;
    a->ints = malloc(sizeof(int64_t) * (size_t)(n > 0 ? n : 1));
    if (!a->ints) {
        xb_fail(b, TERN_ERR_NOMEM, "expansion: out of memory");
        return;
    }
    if (n > 0)
        memcpy(a->ints, v, sizeof(int64_t) * (size_t)n);
    a->n = (size_t)n;
}

static int const_value(xb *b, tern_elem_type type, int rank, const int64_t *dims, tern_host_tensor **t)
{
    *t = NULL;
    if (b->st)
        return -1;
    int id = new_value(b);
    if (id < 0)
        return -1;
    tern_status st = tern_host_tensor_new(type, rank, dims, t, b->err);
    if (st) {
        b->st = st;
        return -1;
    }
    tern_graph_value *v = &b->g->values[id];
    v->constant = *t;
    v->flags = TERN_VALUE_INITIALIZER;
    v->type = type;
    v->rank = rank;
    for (int d = 0; d < rank; d++)
        v->dims[d] = dims[d];
    return id;
}

int xb_const_i64(xb *b, tern_elem_type type, int rank, const int64_t *dims, const int64_t *v)
{
    tern_host_tensor *t;
    int id = const_value(b, type, rank, dims, &t);
    if (id >= 0 && v)
        for (size_t e = 0; e < t->count; e++)
            t->i[e] = v[e];
    return id;
}

int xb_const_f(xb *b, tern_elem_type type, int rank, const int64_t *dims, const float *v)
{
    tern_host_tensor *t;
    int id = const_value(b, type, rank, dims, &t);
    if (id >= 0 && v) {
        for (size_t e = 0; e < t->count; e++)
            t->f[e] = v[e];
        graph_tensor_normalize(t);
    }
    return id;
}

int xb_scalar_f(xb *b, tern_elem_type type, float v)
{
    return xb_const_f(b, type, 0, NULL, &v);
}

int xb_scalar_i(xb *b, tern_elem_type type, int64_t v)
{
    return xb_const_i64(b, type, 0, NULL, &v);
}

static int ints1(xb *b, int n, const int64_t *v)
{
    int64_t len = n;
    return xb_const_i64(b, TERN_ELEM_INT64, 1, &len, v);
}

int xb_unary(xb *b, const char *op, int x)
{
    return xb_op(b, op, 1, &x);
}

int xb_binary(xb *b, const char *op, int x, int y)
{
    int ins[2] = {x, y};
    return xb_op(b, op, 2, ins);
}

int xb_reshape(xb *b, int x, int rank, const int64_t *dims)
{
    int ins[2] = {x, ints1(b, rank, dims)};
    return xb_op(b, "Reshape", 2, ins);
}

int xb_transpose(xb *b, int x, int rank, const int64_t *perm)
{
    int y = xb_op(b, "Transpose", 1, &x);
    xb_attr_ints(b, "perm", rank, perm);
    return y;
}

int xb_slice(xb *b, int x, int axis, int64_t start, int64_t end)
{
    int64_t ax = axis;
    if (b->opset < 10) {
        int y = xb_op(b, "Slice", 1, &x);
        xb_attr_ints(b, "starts", 1, &start);
        xb_attr_ints(b, "ends", 1, &end);
        xb_attr_ints(b, "axes", 1, &ax);
        return y;
    }
    int ins[4] = {x, ints1(b, 1, &start), ints1(b, 1, &end), ints1(b, 1, &ax)};
    return xb_op(b, "Slice", 4, ins);
}

int xb_gather_index(xb *b, int x, int axis, int64_t index)
{
    int ins[2] = {x, xb_scalar_i(b, TERN_ELEM_INT64, index)};
    int y = xb_op(b, "Gather", 2, ins);
    xb_attr_int(b, "axis", axis);
    return y;
}

int xb_concat(xb *b, int n, const int *ins, int axis)
{
    if (n == 1)
        return ins[0];
    int y = xb_op(b, "Concat", n, ins);
    xb_attr_int(b, "axis", axis);
    return y;
}

int xb_reduce(xb *b, const char *op, int x, int n_axes, const int64_t *axes, int keepdims)
{
    /* axes became an input at opset 13 for ReduceSum, at 18 for the others */
    int y;
    if (!graph_reduce_axes_from_input(tern_op_lookup("", op), b->opset)) {
        y = xb_op(b, op, 1, &x);
        xb_attr_ints(b, "axes", n_axes, axes);
    } else {
        int ins[2] = {x, ints1(b, n_axes, axes)};
        y = xb_op(b, op, 2, ins);
    }
    xb_attr_int(b, "keepdims", keepdims);
    return y;
}

int xb_reduce_sum(xb *b, int x, int n_axes, const int64_t *axes, int keepdims)
{
    return xb_reduce(b, "ReduceSum", x, n_axes, axes, keepdims);
}

int xb_pad(xb *b, int x, int rank, const int64_t *pads)
{
    if (b->opset < 11) {
        int y = xb_op(b, "Pad", 1, &x);
        xb_attr_ints(b, "pads", 2 * rank, pads);
        return y;
    }
    int ins[2] = {x, ints1(b, 2 * rank, pads)};
    return xb_op(b, "Pad", 2, ins);
}

int xb_clip(xb *b, int x, float lo, float hi)
{
    const tern_graph_value *v = xb_val(b, x);
    if (b->opset < 11) {
        int y = xb_op(b, "Clip", 1, &x);
        xb_attr_float(b, "min", lo);
        xb_attr_float(b, "max", hi);
        return y;
    }
    tern_elem_type t = v ? v->type : TERN_ELEM_FLOAT;
    int ins[3] = {x, xb_scalar_f(b, t, lo), xb_scalar_f(b, t, hi)};
    return xb_op(b, "Clip", 3, ins);
}

int xb_cast(xb *b, int x, tern_elem_type to)
{
    int y = xb_op(b, "Cast", 1, &x);
    xb_attr_int(b, "to", (int64_t)to);
    return y;
}

/* Moves the nodes appended since b->first into the expanded node's slot and drops that node. */
static void splice(xb *b)
{
    tern_graph *g = b->g;
    int at = b->node, m = g->n_nodes - b->first;
    tern_graph_node *moved = malloc(sizeof *moved * (size_t)(m ? m : 1));
    TERN_ASSERT(moved != NULL || m == 0);
    memcpy(moved, &g->nodes[b->first], sizeof *moved * (size_t)m);
    graph_node_clear(&g->nodes[at]);
    memmove(&g->nodes[at + m], &g->nodes[at + 1], sizeof *moved * (size_t)(b->first - at - 1));
    memcpy(&g->nodes[at], moved, sizeof *moved * (size_t)m);
    free(moved);
    g->n_nodes = b->first - 1 + m;
    for (int v = 0; v < g->n_values; v++)
        g->values[v].producer = -1;
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i].n_outputs; k++)
            if (g->nodes[i].outputs[k] >= 0)
                g->values[g->nodes[i].outputs[k]].producer = i;
}

tern_status graph_expand_node(tern_graph *g, int i, int *done, tern_error *err)
{
    *done = 0;
    const tern_graph_node *n = &g->nodes[i];
    if (!graph_expand_has(n->op_id))
        return TERN_OK;
    /* every present input needs its rank and dims before the expansion can size its pieces */
    for (int k = 0; k < n->n_inputs; k++) {
        int id = n->inputs[k];
        if (id >= 0 && !tern_graph_value_is_static(&g->values[id]))
            return TERN_OK;
    }
    xb b = {g, i, g->n_nodes, -1, g->opset, err, TERN_OK, 0};
    tern_status st;
    switch ((tern_op_id)n->op_id) {
    case TERN_GOP_LSTM:
    case TERN_GOP_GRU:
    case TERN_GOP_RNN:
        st = graph_expand_rnn(&b, done);
        break;
    case TERN_GOP_EINSUM:
        st = graph_expand_einsum(&b, done);
        break;
    case TERN_GOP_CONV_TRANSPOSE:
        st = graph_expand_convt(&b, done);
        break;
    case TERN_GOP_SCATTER_ND:
    case TERN_GOP_SCATTER_ELEMENTS:
    case TERN_GOP_SCATTER:
        st = graph_expand_scatter(&b, done);
        break;
    case TERN_GOP_REVERSE_SEQUENCE:
        st = graph_expand_reverse_sequence(&b, done);
        break;
    case TERN_GOP_IF:
        st = graph_expand_if(&b, done);
        break;
    default:
        st = graph_expand_loss(&b, done);
        break;
    }
    if (!st && b.st)
        st = b.st;
    if (st || !*done) {
        /* nothing half-built stays: the appended nodes go (values nobody reads are pruned later) */
        while (g->n_nodes > b.first)
            graph_node_clear(&g->nodes[--g->n_nodes]);
        *done = 0;
        return st;
    }
    splice(&b);
    return TERN_OK;
}
