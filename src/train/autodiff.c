/* Reverse-mode differentiation of the graph IR. The forward graph keeps its nodes; this file appends, for each
 * forward node on a path from a trained weight to the loss (walked in reverse topological order), the nodes
 * that compute the gradients of its inputs from the gradients of its outputs, by the per-family rules in
 * grad_*.c. Gradients of a value read by several nodes are summed by Add nodes. A node on such a path whose op
 * has no rule stops the pass with an error naming the node and the op: it is never treated as a constant.
 * Also here: the small node builders every rule uses (constants, reshape, reduce, transpose, un-broadcasting),
 * which follow the graph's opset where ONNX moved an attribute to an input. */
#include "ad_internal.h"
#include "graph/op_params.h"
#include "tern/train.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int ad_fail(ad_ctx *a, tern_status code, const char *fmt, ...)
{
    if (a->failed)
        return -1;
    char msg[TERN_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    tern_error_set(a->err, code, "%s", msg);
    a->failed = 1;
    return -1;
}

int ad_fail_node(ad_ctx *a, int node, const char *fmt, ...)
{
    if (a->failed)
        return -1;
    char msg[TERN_ERROR_MSG_MAX - 400], label[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    tern_error_set(a->err, TERN_ERR_UNSUPPORTED, "train: %s: %s", tern_graph_node_label(a->g, node, label, sizeof label),
                   msg);
    a->failed = 1;
    return -1;
}

int ad_grow(ad_ctx *a)
{
    if (a->g->n_values <= a->cap)
        return 0;
    int cap = a->g->n_values * 2 + 16;
    int *gr = realloc(a->grad, (size_t)cap * sizeof *gr);
    if (!gr)
        return ad_fail(a, TERN_ERR_NOMEM, "train: out of memory");
    a->grad = gr;
    unsigned char *nd = realloc(a->needs, (size_t)cap);
    if (!nd)
        return ad_fail(a, TERN_ERR_NOMEM, "train: out of memory");
    a->needs = nd;
    int *rm = realloc(a->rc_map, (size_t)cap * sizeof *rm);
    if (rm)
        a->rc_map = rm;
    int *og = rm ? realloc(a->orig, (size_t)cap * sizeof *og) : NULL;
    if (og)
        a->orig = og;
    unsigned char *ac = og ? realloc(a->act, (size_t)cap) : NULL;
    if (!ac)
        return ad_fail(a, TERN_ERR_NOMEM, "train: out of memory");
    a->act = ac;
    for (int i = a->cap; i < cap; i++) {
        a->grad[i] = -1;
        a->needs[i] = 0;
        a->rc_map[i] = -1;
        a->orig[i] = -1;
        a->act[i] = 0;
    }
    a->cap = cap;
    return 0;
}

tern_status ad_init(ad_ctx *a, tern_graph *g, tern_error *err)
{
    memset(a, 0, sizeof *a);
    a->g = g;
    a->err = err;
    a->opset = tern_graph_opset(g);
    a->prefix = "train.";
    if (ad_grow(a) < 0)
        return err ? err->code : TERN_ERR_NOMEM;
    return TERN_OK;
}

void ad_free(ad_ctx *a)
{
    free(a->grad);
    free(a->needs);
    free(a->rc_map);
    free(a->orig);
    free(a->act);
    free(a->seg_of);
    free(a->mapped);
    free(a->att);
    free(a->att_of);
    a->att = NULL;
    a->att_of = NULL;
    a->grad = NULL;
    a->needs = NULL;
    a->rc_map = a->orig = a->seg_of = a->mapped = NULL;
    a->act = NULL;
}

ad_shape ad_shape_of(const ad_ctx *a, int v)
{
    ad_shape s;
    memset(&s, 0, sizeof s);
    const tern_graph_value *gv = tern_graph_value_at(a->g, v);
    s.rank = gv ? gv->rank : -1;
    for (int d = 0; d < s.rank; d++)
        s.d[d] = gv->dims[d];
    return s;
}

int ad_shape_numel(const ad_shape *s, int64_t *n)
{
    int64_t p = 1;
    if (s->rank < 0)
        return -1;
    for (int d = 0; d < s->rank; d++) {
        if (s->d[d] < 0)
            return -1;
        p *= s->d[d];
    }
    *n = p;
    return 0;
}

static int new_value(ad_ctx *a)
{
    char name[64];
    snprintf(name, sizeof name, "%sv%d", a->prefix, a->counter++);
    int id = graph_add_value(a->g, name);
    if (id < 0)
        return ad_fail(a, TERN_ERR_NOMEM, "train: out of memory");
    if (ad_grow(a) < 0)
        return -1;
    return id;
}

int ad_op(ad_ctx *a, const char *op, int n_in, const int *in)
{
    if (a->failed)
        return -1;
    for (int k = 0; k < n_in; k++)
        if (in[k] < -1 || in[k] >= a->g->n_values)
            return ad_fail(a, TERN_ERR_INVALID, "train: internal: %s operand %d is value %d", op, k, in[k]);
    int y = new_value(a);
    if (y < 0)
        return -1;
    char name[96];
    snprintf(name, sizeof name, "%s%s_%d", a->prefix, op, a->counter++);
    int n = graph_add_node(a->g, op, "", name, n_in, 1, 4);
    if (n < 0)
        return ad_fail(a, TERN_ERR_NOMEM, "train: out of memory");
    for (int k = 0; k < n_in; k++)
        a->g->nodes[n].inputs[k] = in[k];
    a->g->nodes[n].outputs[0] = y;
    a->g->values[y].producer = n;
    return y;
}

int ad_op2(ad_ctx *a, const char *op, int x, int y)
{
    int in[2] = {x, y};
    if (x < 0 || y < 0)
        return ad_fail(a, TERN_ERR_INVALID, "train: internal: %s of a missing operand", op);
    return ad_op(a, op, 2, in);
}

int ad_op1(ad_ctx *a, const char *op, int x)
{
    if (x < 0)
        return ad_fail(a, TERN_ERR_INVALID, "train: internal: %s of a missing operand", op);
    return ad_op(a, op, 1, &x);
}

int ad_last_node(const ad_ctx *a)
{
    return a->g->n_nodes - 1;
}

static tern_graph_attr *new_attr(ad_ctx *a, int node, const char *name)
{
    if (a->failed || node < 0)
        return NULL;
    tern_graph_node *n = &a->g->nodes[node];
    if (n->n_attrs >= 4) { /* ad_op reserves four: no rule sets more */
        ad_fail(a, TERN_ERR_INVALID, "train: internal: too many attributes on %s", n->op);
        return NULL;
    }
    tern_graph_attr *at = &n->attrs[n->n_attrs];
    memset(at, 0, sizeof *at);
    at->name = graph_strdup(name);
    if (!at->name) {
        ad_fail(a, TERN_ERR_NOMEM, "train: out of memory");
        return NULL;
    }
    n->n_attrs++;
    return at;
}

void ad_attr_int(ad_ctx *a, int node, const char *name, int64_t v)
{
    tern_graph_attr *at = new_attr(a, node, name);
    if (at) {
        at->type = TERN_ATTR_INT;
        at->i = v;
    }
}

void ad_attr_float(ad_ctx *a, int node, const char *name, float v)
{
    tern_graph_attr *at = new_attr(a, node, name);
    if (at) {
        at->type = TERN_ATTR_FLOAT;
        at->f = v;
    }
}

void ad_attr_ints(ad_ctx *a, int node, const char *name, int n, const int64_t *v)
{
    tern_graph_attr *at = new_attr(a, node, name);
    if (!at)
        return;
    at->type = TERN_ATTR_INTS;
    at->ints = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    if (!at->ints) {
        ad_fail(a, TERN_ERR_NOMEM, "train: out of memory");
        return;
    }
    memcpy(at->ints, v, sizeof(int64_t) * (size_t)n);
    at->n = (size_t)n;
}

static int const_value(ad_ctx *a, tern_host_tensor *t)
{
    if (!t)
        return ad_fail(a, TERN_ERR_NOMEM, "train: out of memory");
    int id = new_value(a);
    if (id < 0) {
        tern_host_tensor_free(t);
        return -1;
    }
    tern_graph_value *v = &a->g->values[id];
    v->constant = t;
    v->flags = TERN_VALUE_INITIALIZER;
    v->type = t->type;
    v->rank = t->rank;
    for (int d = 0; d < t->rank; d++)
        v->dims[d] = t->dims[d];
    return id;
}

int ad_const_fv(ad_ctx *a, int rank, const int64_t *dims, const float *data)
{
    if (a->failed)
        return -1;
    tern_host_tensor *t = NULL;
    if (tern_host_tensor_new(TERN_ELEM_FLOAT, rank, dims, &t, a->err))
        return ad_fail(a, TERN_ERR_NOMEM, "train: constant: %s", a->err ? a->err->msg : "");
    if (data)
        memcpy(t->f, data, t->count * sizeof(float));
    return const_value(a, t);
}

int ad_const_f(ad_ctx *a, float v)
{
    return ad_const_fv(a, 0, NULL, &v);
}

int ad_const_i64(ad_ctx *a, int n, const int64_t *vals)
{
    if (a->failed)
        return -1;
    tern_host_tensor *t = NULL;
    int64_t d = n;
    if (tern_host_tensor_new(TERN_ELEM_INT64, 1, &d, &t, a->err))
        return ad_fail(a, TERN_ERR_NOMEM, "train: constant: %s", a->err ? a->err->msg : "");
    for (int k = 0; k < n; k++)
        t->i[k] = vals[k];
    return const_value(a, t);
}

int ad_reshape(ad_ctx *a, int x, const ad_shape *to)
{
    int shp = ad_const_i64(a, to->rank, to->d);
    return ad_op2(a, "Reshape", x, shp);
}

/* ReduceSum takes its axes as an input from opset 13, the other reductions from opset 18. */
int ad_reduce(ad_ctx *a, const char *op, int x, int n_axes, const int64_t *axes, int keepdims)
{
    int as_input = graph_reduce_axes_from_input(tern_op_lookup("", op), a->opset);
    int y;
    if (as_input && n_axes > 0) {
        int ax = ad_const_i64(a, n_axes, axes);
        y = ad_op2(a, op, x, ax);
    } else {
        y = ad_op1(a, op, x);
        if (n_axes > 0)
            ad_attr_ints(a, ad_last_node(a), "axes", n_axes, axes);
    }
    ad_attr_int(a, ad_last_node(a), "keepdims", keepdims);
    return y;
}

int ad_transpose(ad_ctx *a, int x, int rank, const int64_t *perm)
{
    int y = ad_op1(a, "Transpose", x);
    ad_attr_ints(a, ad_last_node(a), "perm", rank, perm);
    return y;
}

int ad_expand(ad_ctx *a, int x, const ad_shape *to)
{
    int shp = ad_const_i64(a, to->rank, to->d);
    return ad_op2(a, "Expand", x, shp);
}

int ad_unbroadcast(ad_ctx *a, int gid, const ad_shape *from, const ad_shape *to)
{
    if (gid < 0 || a->failed)
        return -1;
    int64_t axes[TERN_GRAPH_MAX_RANK];
    int n = 0, lead = from->rank - to->rank;
    if (lead < 0)
        return ad_fail(a, TERN_ERR_INVALID, "train: internal: un-broadcast from rank %d to rank %d", from->rank,
                       to->rank);
    for (int i = 0; i < from->rank; i++) {
        int j = i - lead;
        if (j < 0 || (to->d[j] == 1 && from->d[i] != 1))
            axes[n++] = i;
    }
    int y = gid;
    if (n > 0)
        y = ad_reduce(a, "ReduceSum", y, n, axes, 1);
    if (lead > 0) /* keepdims leaves `from`'s rank: drop the leading axes */
        y = ad_reshape(a, y, to);
    return y;
}

int ad_needs(const ad_ctx *a, int v)
{
    v = ad_unmap(a, v); /* a recomputed copy needs what its original needs */
    return v >= 0 && v < a->cap && a->needs[v];
}

void ad_accum(ad_ctx *a, int v, int gid)
{
    v = ad_unmap(a, v); /* gradients gather on the original value, whichever copy a rule read */
    if (a->failed || gid < 0 || !ad_needs(a, v))
        return;
    if (ad_grow(a) < 0)
        return;
    if (a->grad[v] < 0) {
        a->grad[v] = gid;
        return;
    }
    int s = ad_op2(a, "Add", a->grad[v], gid);
    if (s >= 0)
        a->grad[v] = s;
}

static ad_rule rule_of_id(int id)
{
    ad_rule r = NULL;
    if (grad_elementwise_rule(id, &r) || grad_linear_rule(id, &r) || grad_reduce_rule(id, &r) ||
        grad_layout_rule(id, &r) || grad_norm_rule(id, &r) || grad_index_rule(id, &r) || grad_conv_rule(id, &r))
        return r;
    return NULL;
}

ad_rule ad_rule_for(const tern_graph_node *n)
{
    return rule_of_id(n->op_id); /* the op registry's id: fused "tern" ops have their own, which no rule takes */
}

int tern_train_op_has_gradient(tern_op_id id)
{
    return id > TERN_GOP_UNKNOWN && id < TERN_GOP_COUNT && rule_of_id((int)id) != NULL;
}

tern_status ad_backward(ad_ctx *a, int n_fwd, int loss)
{
    tern_graph *g = a->g;
    if (a->recompute && ad_recompute_plan(a, n_fwd, a->recompute) < 0) /* before needs spreads past the weights */
        return a->err->code;
    /* which values depend on a trained weight: forward order, float outputs only (an integer or bool result,
     * such as an ArgMax or a comparison, carries no gradient) */
    for (int i = 0; i < n_fwd; i++) {
        const tern_graph_node *n = &g->nodes[i];
        int any = 0;
        for (int k = 0; k < n->n_inputs; k++)
            any |= ad_needs(a, n->inputs[k]);
        if (!any)
            continue;
        for (int k = 0; k < n->n_outputs; k++)
            if (n->outputs[k] >= 0 && tern_elem_is_float(g->values[n->outputs[k]].type))
                a->needs[n->outputs[k]] = 1;
    }
    if (!ad_needs(a, loss))
        return tern_error_set(a->err, TERN_ERR_INVALID,
                              "train: the loss '%s' does not depend on any trained weight", g->values[loss].name);
    ad_shape ls = ad_shape_of(a, loss);
    int64_t n1 = 0;
    if (ad_shape_numel(&ls, &n1) || n1 != 1)
        return tern_error_set(a->err, TERN_ERR_INVALID, "train: the loss '%s' must be a scalar (one element)",
                              g->values[loss].name);
    if (ad_attention_plan(a, n_fwd) < 0) /* attention blocks with one fused backward (grad_attention.c) */
        return a->err->code;
    float one = 1.0f;
    int seed = ad_const_fv(a, ls.rank, ls.d, &one); /* may grow a->grad: made before the store */
    a->grad[loss] = seed;
    for (int i = n_fwd - 1; i >= 0 && !a->failed; i--) {
        if (a->seg_of) { /* recomputation: the segment's forward copies before its first rule */
            int dy = -1, y = -1, need = 0;
            for (int k = 0; k < g->nodes[i].n_outputs && dy < 0; k++)
                if ((y = g->nodes[i].outputs[k]) >= 0)
                    dy = a->grad[y];
            for (int k = 0; k < g->nodes[i].n_inputs; k++)
                need |= ad_needs(a, g->nodes[i].inputs[k]);
            if (dy >= 0 && need && ad_recompute_enter(a, i, n_fwd, dy, y) < 0)
                return a->err->code;
        }
        const tern_graph_node *n = &g->nodes[i];
        ad_fwd f;
        memset(&f, 0, sizeof f);
        f.index = i;
        if (n->n_inputs > AD_MAX_IO || n->n_outputs > AD_MAX_IO) {
            int any = 0;
            for (int k = 0; k < n->n_outputs; k++)
                any |= n->outputs[k] >= 0 && a->grad[n->outputs[k]] >= 0;
            if (any) {
                ad_fail_node(a, i, "more than %d inputs or outputs on a differentiated node", AD_MAX_IO);
                return a->err->code;
            }
            continue;
        }
        f.n_in = n->n_inputs;
        f.n_out = n->n_outputs;
        int any_dy = 0, any_need = 0;
        for (int k = 0; k < n->n_inputs; k++) {
            f.in[k] = n->inputs[k];
            any_need |= ad_needs(a, f.in[k]);
        }
        for (int k = 0; k < n->n_outputs; k++) {
            f.out[k] = n->outputs[k];
            f.dy[k] = f.out[k] >= 0 ? a->grad[f.out[k]] : -1;
            any_dy |= f.dy[k] >= 0;
        }
        if (!any_dy || !any_need)
            continue;
        for (int k = 0; k < f.n_in; k++)
            if (ad_needs(a, f.in[k])) {
                ad_shape s = ad_shape_of(a, f.in[k]);
                int64_t cnt;
                if (ad_shape_numel(&s, &cnt)) {
                    ad_fail_node(a, i, "input '%s' has no static shape (bind the batch and sequence dims)",
                                 g->values[f.in[k]].name);
                    return a->err->code;
                }
            }
        int blk = ad_attention_block_of(a, i);
        if (blk >= 0) { /* the whole attention block in one tern.AttentionGrad; its interior gets no gradient */
            if (ad_attention_grad(a, blk, f.dy[0]) < 0 && !a->failed)
                ad_fail_node(a, i, "fused attention gradient failed");
            continue;
        }
        ad_rule r = ad_rule_for(n);
        if (!r) {
            int w = -1;
            for (int k = 0; k < f.n_in && w < 0; k++)
                if (ad_needs(a, f.in[k]))
                    w = f.in[k];
            ad_fail_node(a, i, "op %s%s%s has no gradient rule, and its input '%s' depends on a trained weight",
                         n->domain, n->domain[0] ? "." : "", n->op, g->values[w].name);
            return a->err->code;
        }
        for (int k = 0; k < f.n_in; k++) /* under recomputation the rule reads the segment's copies */
            f.in[k] = ad_map(a, f.in[k]);
        for (int k = 0; k < f.n_out; k++)
            f.out[k] = ad_map(a, f.out[k]);
        if (r(a, &f) < 0 && !a->failed)
            ad_fail_node(a, i, "gradient rule failed");
    }
    return a->failed ? a->err->code : TERN_OK;
}
