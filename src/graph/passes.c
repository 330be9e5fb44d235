/* Graph passes over the IR: constant folding (infer + host evaluation of every all-constant node), dead-code
 * removal, pattern fusion (GELU forms, the decomposed layer norm torch exports below opset 17, MatMul/Gemm + bias
 * + activation), the standard pipeline, and a whole-graph run on the host evaluator. Every pass keeps the nodes in
 * topological order: a rewrite puts the fused node in the slot of the pattern's last node, whose inputs all come
 * from earlier nodes. */
#include "graph_internal.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

tern_status graph_infer_node(tern_graph *g, int i, int64_t max_elems, int64_t *budget, tern_error *err);

static tern_status infer_all(tern_graph *g, int64_t max_elems, tern_error *err)
{
    tern_status st = tern_graph_infer(g, err); /* resets derived data, infers with the small limit */
    if (st || max_elems <= GRAPH_INFER_EVAL_MAX_ELEMS)
        return st;
    int64_t budget = GRAPH_FOLD_BUDGET_ELEMS;
    for (int i = 0; i < g->n_nodes; i++)
        if ((st = graph_infer_node(g, i, max_elems, &budget, err)))
            return st;
    return TERN_OK;
}

tern_status tern_graph_fold_constants(tern_graph *g, int *folded, tern_error *err)
{
    if (folded)
        *folded = 0;
    tern_status st = infer_all(g, GRAPH_FOLD_MAX_ELEMS, err);
    if (st)
        return st;
    unsigned char *keep = malloc((size_t)g->n_nodes + 1);
    if (!keep)
        return tern_error_set(err, TERN_ERR_NOMEM, "fold: out of memory");
    int count = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const tern_graph_node *n = &g->nodes[i];
        int all = n->n_outputs > 0;
        for (int k = 0; k < n->n_outputs; k++)
            if (n->outputs[k] >= 0 && !g->values[n->outputs[k]].constant)
                all = 0;
        keep[i] = !all;
        if (all) {
            count++;
            for (int k = 0; k < n->n_outputs; k++)
                if (n->outputs[k] >= 0) {
                    g->values[n->outputs[k]].flags |= TERN_VALUE_INITIALIZER;
                    g->values[n->outputs[k]].producer = -1;
                }
        }
    }
    st = graph_compact(g, keep, err);
    free(keep);
    if (folded)
        *folded = count;
    return st;
}

int tern_graph_prune(tern_graph *g)
{
    unsigned char *live = calloc((size_t)g->n_values + 1, 1), *keep = calloc((size_t)g->n_nodes + 1, 1);
    if (!live || !keep) {
        free(live), free(keep);
        return 0;
    }
    for (int k = 0; k < g->n_outputs; k++)
        live[g->outputs[k]] = 1;
    int removed = 0;
    for (int i = g->n_nodes - 1; i >= 0; i--) {
        const tern_graph_node *n = &g->nodes[i];
        for (int k = 0; k < n->n_outputs; k++)
            if (n->outputs[k] >= 0 && live[n->outputs[k]])
                keep[i] = 1;
        if (!keep[i]) {
            removed++;
            continue;
        }
        for (int k = 0; k < n->n_inputs; k++)
            if (n->inputs[k] >= 0)
                live[n->inputs[k]] = 1;
    }
    /* a kept node's unused optional outputs stay: the compiler skips values nobody reads */
    if (graph_compact(g, keep, NULL) != TERN_OK)
        removed = 0;
    free(live), free(keep);
    return removed;
}

/* ---- fusion ---- */
typedef struct {
    tern_graph *g;
    int *uses;      /* readers per value (+1 for a graph output) */
    int *consumer;  /* the last node reading the value */
    unsigned char *keep, *touched;
    unsigned flags; /* TERN_GRAPH_NO_* */
} fctx;

static int prod(const fctx *f, int v) { return v >= 0 ? f->g->values[v].producer : -1; }
static const tern_graph_node *node(const fctx *f, int i) { return i >= 0 ? &f->g->nodes[i] : NULL; }
static int is_op(const fctx *f, int i, tern_op_id op)
{
    return i >= 0 && !f->touched[i] && f->g->nodes[i].op_id == (int)op && f->g->nodes[i].domain[0] == '\0';
}
static int single(const fctx *f, int v) { return v >= 0 && f->uses[v] == 1; }
/* the unique reader of v, when v has exactly one use */
static int only_user(const fctx *f, int v) { return single(f, v) ? f->consumer[v] : -1; }

static int const_near(const fctx *f, int v, double want, double rel)
{
    if (v < 0 || !f->g->values[v].constant || f->g->values[v].constant->count != 1)
        return 0;
    double x = tern_host_tensor_get(f->g->values[v].constant, 0);
    return fabs(x - want) <= rel * fabs(want) + 1e-12;
}

/* For a binary node, the operand other than v (or -1). */
static int other_input(const tern_graph_node *n, int v)
{
    if (n->n_inputs != 2)
        return -1;
    if (n->inputs[0] == v)
        return n->inputs[1];
    if (n->inputs[1] == v)
        return n->inputs[0];
    return -1;
}

static tern_status rewrite(fctx *f, int at, const char *domain, const char *op, int n_in, const int *ins,
                           int n_attrs, tern_graph_attr *attrs, tern_error *err)
{
    tern_graph_node *n = &f->g->nodes[at];
    int out = n->outputs[0];
    char *name = n->name;
    n->name = NULL;
    graph_node_clear(n);
    n->name = name;
    graph_node_set_op(n, domain, op); /* on failure op and domain stay NULL: the check below */
    n->inputs = malloc((size_t)n_in * sizeof(int));
    n->outputs = malloc(sizeof(int));
    n->attrs = calloc((size_t)(n_attrs ? n_attrs : 1), sizeof(tern_graph_attr));
    if (!n->op || !n->domain || !n->inputs || !n->outputs || !n->attrs) {
        for (int k = 0; k < n_attrs; k++)
            graph_attr_clear(&attrs[k]);
        return tern_error_set(err, TERN_ERR_NOMEM, "fuse: out of memory");
    }
    n->n_inputs = n_in;
    memcpy(n->inputs, ins, (size_t)n_in * sizeof(int));
    n->n_outputs = 1;
    n->outputs[0] = out;
    n->n_attrs = n_attrs;
    for (int k = 0; k < n_attrs; k++)
        n->attrs[k] = attrs[k];
    f->touched[at] = 1;
    return TERN_OK;
}

static void drop(fctx *f, const int *nodes, int count)
{
    for (int k = 0; k < count; k++) {
        f->keep[nodes[k]] = 0;
        f->touched[nodes[k]] = 1;
    }
}

static tern_graph_attr attr_str(const char *name, const char *v)
{
    tern_graph_attr a = {0};
    a.name = graph_strdup(name);
    a.type = TERN_ATTR_STRING;
    a.s = graph_strdup(v);
    return a;
}
static tern_graph_attr attr_int(const char *name, int64_t v)
{
    tern_graph_attr a = {0};
    a.name = graph_strdup(name);
    a.type = TERN_ATTR_INT;
    a.i = v;
    return a;
}
static tern_graph_attr attr_float(const char *name, float v)
{
    tern_graph_attr a = {0};
    a.name = graph_strdup(name);
    a.type = TERN_ATTR_FLOAT;
    a.f = v;
    return a;
}

static tern_graph_attr attr_ints(const char *name, int n, const int64_t *v)
{
    tern_graph_attr a = {0};
    a.name = graph_strdup(name);
    a.type = TERN_ATTR_INTS;
    a.n = (size_t)n;
    a.ints = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    if (a.ints)
        memcpy(a.ints, v, sizeof(int64_t) * (size_t)n);
    return a;
}

/* Outer GELU shape: given h = 1 + t(x) (node add1), find 0.5 * x * h in any association. Fills the final node and
 * the nodes to drop (besides the final); returns 1 on a match. */
static int match_half_x_times(const fctx *f, int h, int x, int *final, int *dropped, int *nd)
{
    int m1 = only_user(f, h);
    if (!is_op(f, m1, TERN_GOP_MUL))
        return 0;
    int o = other_input(node(f, m1), h);
    if (o < 0)
        return 0;
    if (o == x) { /* (x * h) * 0.5 */
        int m2 = only_user(f, f->g->nodes[m1].outputs[0]);
        if (is_op(f, m2, TERN_GOP_MUL) && const_near(f, other_input(node(f, m2), f->g->nodes[m1].outputs[0]), 0.5, 1e-6)) {
            *final = m2;
            dropped[(*nd)++] = m1;
            return 1;
        }
        return 0;
    }
    int po = prod(f, o);
    if (is_op(f, po, TERN_GOP_MUL) && single(f, o)) { /* (0.5 * x) * h */
        int q = other_input(node(f, po), x);
        if (q >= 0 && const_near(f, q, 0.5, 1e-6)) {
            *final = m1;
            dropped[(*nd)++] = po;
            return 1;
        }
        return 0;
    }
    if (const_near(f, o, 0.5, 1e-6)) { /* (0.5 * h) * x */
        int m2 = only_user(f, f->g->nodes[m1].outputs[0]);
        if (is_op(f, m2, TERN_GOP_MUL) && other_input(node(f, m2), f->g->nodes[m1].outputs[0]) == x) {
            *final = m2;
            dropped[(*nd)++] = m1;
            return 1;
        }
    }
    return 0;
}

/* x*0.5*(1+erf(x/sqrt2)) anchored at Erf */
static tern_status fuse_gelu_erf(fctx *f, int i, int *hits, tern_error *err)
{
    const tern_graph_node *e = &f->g->nodes[i];
    if (e->n_inputs != 1 || !single(f, e->inputs[0]))
        return TERN_OK;
    int d = prod(f, e->inputs[0]);
    int x = -1;
    if (is_op(f, d, TERN_GOP_DIV) && f->g->nodes[d].n_inputs == 2 && const_near(f, f->g->nodes[d].inputs[1], M_SQRT2, 1e-4))
        x = f->g->nodes[d].inputs[0];
    else if (is_op(f, d, TERN_GOP_MUL)) {
        const tern_graph_node *m = node(f, d);
        if (m->n_inputs == 2 && const_near(f, m->inputs[1], M_SQRT1_2, 1e-4))
            x = m->inputs[0];
        else if (m->n_inputs == 2 && const_near(f, m->inputs[0], M_SQRT1_2, 1e-4))
            x = m->inputs[1];
    }
    if (x < 0)
        return TERN_OK;
    int a = only_user(f, e->outputs[0]);
    if (!is_op(f, a, TERN_GOP_ADD) || !const_near(f, other_input(node(f, a), e->outputs[0]), 1.0, 1e-6))
        return TERN_OK;
    int final, dropped[8], nd = 0;
    if (!match_half_x_times(f, f->g->nodes[a].outputs[0], x, &final, dropped, &nd))
        return TERN_OK;
    dropped[nd++] = d;
    dropped[nd++] = i;
    dropped[nd++] = a;
    drop(f, dropped, nd);
    tern_graph_attr at = attr_str("approximate", "none");
    (*hits)++;
    return rewrite(f, final, "", "Gelu", 1, &x, 1, &at, err);
}

/* 0.5*x*(1+tanh(sqrt(2/pi)*(x+0.044715*x^3))) anchored at Tanh */
/* cube = x^3 as Pow(x, 3) or as Mul(x, Mul(x, x)) (torch's tanh-GELU export); *pw the node making cube, *sq the
 * squaring Mul (-1 for Pow). */
static int is_cube_of(const fctx *f, int cube, int x, int *pw, int *sq)
{
    int p = prod(f, cube);
    *pw = p;
    *sq = -1;
    if (!single(f, cube))
        return 0;
    if (is_op(f, p, TERN_GOP_POW))
        return f->g->nodes[p].inputs[0] == x && const_near(f, f->g->nodes[p].inputs[1], 3.0, 1e-6);
    if (!is_op(f, p, TERN_GOP_MUL))
        return 0;
    const tern_graph_node *m = &f->g->nodes[p];
    for (int k = 0; k < 2; k++) {
        int sqv = m->inputs[1 - k], q = prod(f, sqv);
        if (m->inputs[k] == x && single(f, sqv) && is_op(f, q, TERN_GOP_MUL) && f->g->nodes[q].inputs[0] == x &&
            f->g->nodes[q].inputs[1] == x) {
            *sq = q;
            return 1;
        }
    }
    return 0;
}

static tern_status fuse_gelu_tanh(fctx *f, int i, int *hits, tern_error *err)
{
    const tern_graph_node *t = &f->g->nodes[i];
    if (t->n_inputs != 1 || !single(f, t->inputs[0]))
        return TERN_OK;
    int ms = prod(f, t->inputs[0]);
    if (!is_op(f, ms, TERN_GOP_MUL))
        return TERN_OK;
    int inner = -1;
    for (int k = 0; k < 2 && inner < 0; k++)
        if (const_near(f, f->g->nodes[ms].inputs[k], 0.7978845608028654, 1e-4))
            inner = f->g->nodes[ms].inputs[1 - k];
    int ad = prod(f, inner);
    if (!single(f, inner) || !is_op(f, ad, TERN_GOP_ADD))
        return TERN_OK;
    int x = -1, mc = -1, pw = -1, sq = -1;
    for (int k = 0; k < 2 && x < 0; k++) {
        int cand = f->g->nodes[ad].inputs[1 - k], m = prod(f, f->g->nodes[ad].inputs[k]);
        if (!is_op(f, m, TERN_GOP_MUL) || !single(f, f->g->nodes[ad].inputs[k]))
            continue;
        for (int q = 0; q < 2; q++) {
            int cube = f->g->nodes[m].inputs[1 - q], p, s2;
            if (const_near(f, f->g->nodes[m].inputs[q], 0.044715, 1e-4) && is_cube_of(f, cube, cand, &p, &s2)) {
                x = cand;
                mc = m;
                pw = p;
                sq = s2;
                break;
            }
        }
    }
    if (x < 0)
        return TERN_OK;
    int a = only_user(f, t->outputs[0]);
    if (!is_op(f, a, TERN_GOP_ADD) || !const_near(f, other_input(node(f, a), t->outputs[0]), 1.0, 1e-6))
        return TERN_OK;
    int final, dropped[12], nd = 0;
    if (!match_half_x_times(f, f->g->nodes[a].outputs[0], x, &final, dropped, &nd))
        return TERN_OK;
    int more[] = {pw, mc, ad, ms, i, a};
    for (size_t k = 0; k < TERN_ARRAY_LEN(more); k++)
        dropped[nd++] = more[k];
    if (sq >= 0)
        dropped[nd++] = sq;
    drop(f, dropped, nd);
    tern_graph_attr at = attr_str("approximate", "tanh");
    (*hits)++;
    return rewrite(f, final, "", "Gelu", 1, &x, 1, &at, err);
}

/* ReduceMean over the last axis only, keepdims=1 */
static int last_axis_mean(const fctx *f, int i)
{
    if (!is_op(f, i, TERN_GOP_REDUCE_MEAN))
        return 0;
    const tern_graph_node *n = node(f, i);
    const tern_graph_value *x = &f->g->values[n->inputs[0]];
    if (tern_graph_attr_int(n, "keepdims", 1) != 1 || x->rank < 1)
        return 0;
    int64_t ax;
    if (n->n_inputs > 1 && n->inputs[1] >= 0) {
        const tern_host_tensor *t = f->g->values[n->inputs[1]].constant;
        if (!t || t->count != 1 || !t->i)
            return 0;
        ax = t->i[0];
    } else {
        size_t na;
        const int64_t *a = graph_attr_ints(n, "axes", &na);
        if (!a || na != 1)
            return 0;
        ax = a[0];
    }
    return ax == -1 || ax == x->rank - 1;
}

static tern_status fuse_layernorm(fctx *f, int i, int *hits, tern_error *err)
{
    if (!last_axis_mean(f, i))
        return TERN_OK;
    tern_graph *g = f->g;
    int x = g->nodes[i].inputs[0], m = g->nodes[i].outputs[0];
    int sub = only_user(f, m);
    if (!is_op(f, sub, TERN_GOP_SUB) || g->nodes[sub].inputs[0] != x || g->nodes[sub].inputs[1] != m)
        return TERN_OK;
    int d = g->nodes[sub].outputs[0];
    if (f->uses[d] != 2)
        return TERN_OK;
    int pw = -1, dv = -1;
    for (int j = sub + 1; j < g->n_nodes; j++)
        for (int k = 0; k < g->nodes[j].n_inputs; k++)
            if (g->nodes[j].inputs[k] == d) {
                if (is_op(f, j, TERN_GOP_POW) && k == 0)
                    pw = j;
                else if (is_op(f, j, TERN_GOP_DIV) && k == 0)
                    dv = j;
            }
    if (pw < 0 || dv < 0 || !const_near(f, g->nodes[pw].inputs[1], 2.0, 1e-6))
        return TERN_OK;
    int rm = only_user(f, g->nodes[pw].outputs[0]);
    if (!last_axis_mean(f, rm))
        return TERN_OK;
    int ad = only_user(f, g->nodes[rm].outputs[0]);
    if (!is_op(f, ad, TERN_GOP_ADD))
        return TERN_OK;
    int epsv = other_input(node(f, ad), g->nodes[rm].outputs[0]);
    if (epsv < 0 || !g->values[epsv].constant || g->values[epsv].constant->count != 1)
        return TERN_OK;
    float eps = (float)tern_host_tensor_get(g->values[epsv].constant, 0);
    int sq = only_user(f, g->nodes[ad].outputs[0]);
    if (!is_op(f, sq, TERN_GOP_SQRT) || only_user(f, g->nodes[sq].outputs[0]) != dv || g->nodes[dv].inputs[1] != g->nodes[sq].outputs[0])
        return TERN_OK;
    int nodes[12] = {i, sub, pw, rm, ad, sq}, nn = 6;
    int final = dv, gamma = -1, beta = -1;
    int64_t C = g->values[x].rank >= 1 ? g->values[x].dims[g->values[x].rank - 1] : -1;
    int mul = only_user(f, g->nodes[dv].outputs[0]);
    if (is_op(f, mul, TERN_GOP_MUL)) {
        int gv = other_input(node(f, mul), g->nodes[dv].outputs[0]);
        if (gv >= 0 && g->values[gv].constant && g->values[gv].rank == 1 && g->values[gv].dims[0] == C &&
            g->values[gv].type == g->values[x].type) {
            gamma = gv;
            nodes[nn++] = dv;
            final = mul;
            int add = only_user(f, g->nodes[mul].outputs[0]);
            if (is_op(f, add, TERN_GOP_ADD)) {
                int bv = other_input(node(f, add), g->nodes[mul].outputs[0]);
                if (bv >= 0 && g->values[bv].constant && g->values[bv].rank == 1 && g->values[bv].dims[0] == C &&
                    g->values[bv].type == g->values[x].type) {
                    beta = bv;
                    nodes[nn++] = mul;
                    final = add;
                }
            }
        }
    }
    if (C < 0 || !tern_elem_is_float(g->values[x].type))
        return TERN_OK;
    if (gamma < 0) { /* no affine part: a ones scale */
        char name[64];
        snprintf(name, sizeof name, "_ln_ones_%d", g->n_values);
        gamma = graph_add_value(g, name);
        if (gamma < 0)
            return tern_error_set(err, TERN_ERR_NOMEM, "fuse: out of memory");
        tern_status st = tern_host_tensor_new(g->values[x].type, 1, &C, &g->values[gamma].constant, err);
        if (st)
            return st;
        for (size_t e = 0; e < g->values[gamma].constant->count; e++)
            g->values[gamma].constant->f[e] = 1.0f;
        g->values[gamma].flags = TERN_VALUE_INITIALIZER;
        g->values[gamma].type = g->values[x].type;
        g->values[gamma].rank = 1;
        g->values[gamma].dims[0] = C;
    }
    drop(f, nodes, nn);
    int ins[3] = {x, gamma, beta};
    tern_graph_attr at[2] = {attr_int("axis", -1), attr_float("epsilon", eps)};
    (*hits)++;
    return rewrite(f, final, "", "LayerNormalization", beta >= 0 ? 3 : 2, ins, 2, at, err);
}

/* MatMul(A, W) + bias [+ act] and Gemm(A, W, bias) [+ act] -> tern.MatMulBias */
static tern_status fuse_matmul_bias(fctx *f, int i, int *hits, tern_error *err)
{
    tern_graph *g = f->g;
    const tern_graph_node *n = &g->nodes[i];
    int a = n->inputs[0], w = n->n_inputs > 1 ? n->inputs[1] : -1, bias = -1, last = i;
    int nodes[4], nn = 0;
    if (w < 0 || !tern_elem_is_float(g->values[a].type) || g->values[w].rank != 2)
        return TERN_OK;
    int64_t N = g->values[w].dims[1];
    int transpose_w = 0;
    if (n->op_id == TERN_GOP_GEMM) {
        if (tern_graph_attr_int(n, "transA", 0) || tern_graph_attr_float(n, "alpha", 1.0f) != 1.0f ||
            tern_graph_attr_float(n, "beta", 1.0f) != 1.0f || n->n_inputs < 3 || n->inputs[2] < 0)
            return TERN_OK;
        if (tern_graph_attr_int(n, "transB", 0)) {
            if (!g->values[w].constant)
                return TERN_OK;
            transpose_w = 1;
            N = g->values[w].dims[0];
        }
        bias = n->inputs[2];
    } else {
        int add = only_user(f, n->outputs[0]);
        if (!is_op(f, add, TERN_GOP_ADD))
            return TERN_OK;
        bias = other_input(node(f, add), n->outputs[0]);
        nodes[nn++] = i;
        last = add;
    }
    if (bias < 0 || !g->values[bias].constant || g->values[bias].rank != 1 || g->values[bias].dims[0] != N ||
        g->values[bias].type != g->values[a].type || g->values[w].type != g->values[a].type)
        return TERN_OK;
    const char *act = "none";
    int nx = only_user(f, g->nodes[last].outputs[0]);
    if (is_op(f, nx, TERN_GOP_RELU))
        act = "relu";
    else if (is_op(f, nx, TERN_GOP_GELU))
        act = strcmp(tern_graph_attr_string(node(f, nx), "approximate", "none"), "tanh") == 0 ? "gelu_tanh" : "gelu";
    if (strcmp(act, "none") != 0) {
        nodes[nn++] = last;
        last = nx;
    }
    if (transpose_w) {
        char name[300];
        snprintf(name, sizeof name, "%.250s_T%d", g->values[w].name, g->n_values);
        int wt = graph_add_value(g, name);
        if (wt < 0)
            return tern_error_set(err, TERN_ERR_NOMEM, "fuse: out of memory");
        const tern_host_tensor *src = g->values[w].constant;
        int64_t dims[2] = {src->dims[1], src->dims[0]};
        tern_status st = tern_host_tensor_new(src->type, 2, dims, &g->values[wt].constant, err);
        if (st)
            return st;
        for (int64_t r = 0; r < dims[0]; r++)
            for (int64_t c = 0; c < dims[1]; c++)
                g->values[wt].constant->f[r * dims[1] + c] = src->f[c * dims[0] + r];
        g->values[wt].flags = TERN_VALUE_INITIALIZER;
        g->values[wt].type = src->type;
        g->values[wt].rank = 2;
        g->values[wt].dims[0] = dims[0];
        g->values[wt].dims[1] = dims[1];
        w = wt;
    }
    drop(f, nodes, nn);
    int ins[3] = {a, w, bias};
    tern_graph_attr at = attr_str("activation", act);
    (*hits)++;
    return rewrite(f, last, "tern", "MatMulBias", 3, ins, 1, &at, err);
}

/* Scaled dot-product attention -> tern.Attention(Q, KT, V [, mask]):
 *   MatMul(Q, KT) [Div|Mul by a constant scalar] [Where(cond, fill, x) | Where(cond, x, fill) | Add(x, mask)]
 *   Softmax(last axis) MatMul(., V)
 * with Q [..., Sq, D], KT [..., D, Sk], V [..., Sk, Dv], the same known batch dims, fp32. Attributes: scale_op
 * (0 none, 1 divide, 2 multiply), scale, mask (0 none, 1 where with the fill on true, 2 where with the fill on
 * false, 3 additive), fill. Fused only for shapes the on-chip lowering takes: D <= 128, Dv <= 512, Sk <= 2048;
 * a mask broadcasts to the scores with its last dim Sk. Casts of fp32 to fp32 around the Softmax (what
 * softmax(x, dtype=torch.float32) and softmax(x.float()) export in LLaMA and T5 code) are taken in; a T5 relative
 * position bias is an additive mask (a constant [1, H, Sq, Sk] once folded). */
#define ATT_MAX_D 128
#define ATT_MAX_DV 512
#define ATT_MAX_SK 2048

static int att_mask_ok(const tern_graph *g, int m, int r, const int64_t *sdims)
{
    const tern_graph_value *mv = &g->values[m];
    if (mv->rank < 1 || mv->rank > r || mv->dims[mv->rank - 1] != sdims[r - 1])
        return 0;
    for (int d = 0; d < mv->rank; d++) {
        int64_t md = mv->dims[mv->rank - 1 - d], sd = sdims[r - 1 - d];
        if (md != 1 && md != sd)
            return 0;
    }
    return 1;
}

/* ---- attention operand layouts ----
 * An operand of the attention is a logical [B, H, S, D] tensor; its layout is a source value plus an element
 * offset and strides {off, sB, sH, sS, sD} into that value's row-major storage. Walking back from the operand
 * through Transpose (permutes the axes), Reshape (same storage) and one output of a Split along the last axis (a
 * window of columns of a wider row) finds the tensor the heads were cut from, so the lowering loads each head
 * straight from it; the output is walked forward through Transpose and Reshape likewise (the merge of the
 * heads). Every intermediate must have a single use; the nodes walked through are dropped.
 * Grouped-query attention (LLaMA's repeat_kv: Unsqueeze, Expand of the new axis, Reshape merging it into the
 * heads) is walked through as well: the operand's head h reads the source's head h / rep (rep query heads share
 * one K/V head), so the repeated K and V are never materialised; an Unsqueeze is a renumbering of the axes. */
#define ATT_MAX_DROP 32
typedef struct {
    int src[3];         /* Q, K, V sources */
    int64_t view[4][5]; /* Q, K (as [B, H, Sk, D]), V, O: {off, sB, sH, sS, sD} */
    int rep[3];         /* Q, K, V: query heads per source head (1, or the GQA group size) */
    int drop[ATT_MAX_DROP], ndrop;
    int split, split_outs; /* the Split walked through (-1: none) and how many of its outputs */
    int at;             /* the node whose output becomes the attention's */
    int64_t out_dims[TERN_GRAPH_MAX_RANK];
    int out_rank;
    int absorbed;       /* nodes walked through */
} att_layout;

static void rowmajor(const tern_graph_value *v, int64_t *st)
{
    int64_t s = 1;
    for (int d = v->rank - 1; d >= 0; d--) {
        st[d] = s;
        s *= v->dims[d];
    }
}

/* repeat_kv: v [B, Hkv*n, S, D] = Reshape(Expand(u [B, Hkv, 1, S, D]) -> [B, Hkv, n, S, D]), the expanded
 * value read only by the reshape. Returns n (> 1) and u's id in *u, or 0. */
static int att_repeat_kv(const fctx *f, int v, int *u)
{
    const tern_graph *g = f->g;
    int p = prod(f, v);
    if (!is_op(f, p, TERN_GOP_RESHAPE))
        return 0;
    int x = g->nodes[p].inputs[0], e = prod(f, x);
    if (!single(f, x) || !is_op(f, e, TERN_GOP_EXPAND))
        return 0;
    int s = g->nodes[e].inputs[0];
    const tern_graph_value *V = &g->values[v], *X = &g->values[x], *S = &g->values[s];
    if (V->rank != 4 || X->rank != 5 || S->rank != 5 || X->type != V->type || S->type != V->type || X->dims[2] < 2)
        return 0;
    if (X->dims[0] != V->dims[0] || X->dims[1] * X->dims[2] != V->dims[1] || X->dims[3] != V->dims[2] ||
        X->dims[4] != V->dims[3])
        return 0;
    for (int d = 0; d < 5; d++)
        if (S->dims[d] != (d == 2 ? 1 : X->dims[d]) || X->dims[d] <= 0)
            return 0;
    *u = s;
    return (int)X->dims[2];
}

/* The axes an Unsqueeze of an output of rank r inserts (ins[a] = 1), from its constant axes input (opset 13+)
 * or attribute; 0 when they are not known. */
static int att_unsqueeze_axes(const fctx *f, const tern_graph_node *n, int r, unsigned char *ins)
{
    int64_t a[TERN_GRAPH_MAX_RANK];
    int na = 0;
    if (n->n_inputs > 1 && n->inputs[1] >= 0) {
        const tern_host_tensor *c = f->g->values[n->inputs[1]].constant;
        if (!c || c->count < 1 || c->count > TERN_GRAPH_MAX_RANK)
            return 0;
        na = (int)c->count;
        for (int k = 0; k < na; k++)
            a[k] = (int64_t)tern_host_tensor_get(c, (size_t)k);
    } else {
        const tern_graph_attr *at = tern_graph_node_attr(n, "axes");
        if (!at || at->type != TERN_ATTR_INTS || at->n < 1 || at->n > TERN_GRAPH_MAX_RANK)
            return 0;
        na = (int)at->n;
        memcpy(a, at->ints, sizeof(int64_t) * (size_t)na);
    }
    memset(ins, 0, TERN_GRAPH_MAX_RANK);
    for (int k = 0; k < na; k++) {
        int64_t x = a[k] < 0 ? a[k] + r : a[k];
        if (x < 0 || x >= r || ins[x])
            return 0;
        ins[x] = 1;
    }
    return 1;
}

/* Operand value v whose logical dim d is v's axis ax[d]: fills the source, the view and the operand's heads per
 * source head (*rep). */
static void att_walk_back(const fctx *f, int v, const int *ax0, const int64_t *ld0, int *src, int64_t *view,
                          int *rep, att_layout *L)
{
    const tern_graph *g = f->g;
    int ax[4] = {ax0[0], ax0[1], ax0[2], ax0[3]}, flat = 0;
    int64_t st[4], off = 0, rm[TERN_GRAPH_MAX_RANK], ld[4] = {ld0[0], ld0[1], ld0[2], ld0[3]};
    *rep = 1;
    for (int guard = 0; guard < 8 && L->ndrop < ATT_MAX_DROP - 4; guard++) {
        int p = prod(f, v);
        if (!single(f, v) || p < 0)
            break;
        const tern_graph_node *n = node(f, p);
        const tern_graph_value *x = &g->values[n->inputs[0]];
        int u = -1, nr;
        unsigned char ins[TERN_GRAPH_MAX_RANK];
        if (!flat && *rep == 1 && ax[1] == 1 && ld[1] == g->values[v].dims[1] && (nr = att_repeat_kv(f, v, &u))) {
            /* v's axes 0, 2, 3 are u's 0, 3, 4; the head axis 1 is u's KV head axis 1, each serving nr heads */
            static const int map[4] = {0, 1, 3, 4};
            for (int d = 0; d < 4; d++)
                ax[d] = map[ax[d]];
            *rep = nr;
            ld[1] /= nr;
            L->drop[L->ndrop++] = p;
            L->drop[L->ndrop++] = prod(f, n->inputs[0]);
            L->absorbed += 2;
            v = u;
            continue;
        }
        if (!flat && is_op(f, p, TERN_GOP_UNSQUEEZE) && att_unsqueeze_axes(f, n, g->values[v].rank, ins)) {
            int nax[4];
            for (int d = 0; d < 4; d++) { /* a logical dim on an inserted axis (size 1) ends the walk */
                if (ins[ax[d]])
                    goto done;
                nax[d] = ax[d];
                for (int e = 0; e < ax[d]; e++)
                    nax[d] -= ins[e];
            }
            memcpy(ax, nax, sizeof ax);
        } else if (!flat && is_op(f, p, TERN_GOP_TRANSPOSE) && x->rank == 4) {
            const tern_graph_attr *pa = tern_graph_node_attr(n, "perm");
            int nax[4];
            for (int d = 0; d < 4; d++) {
                int64_t pe = pa && pa->n == 4 ? pa->ints[ax[d]] : 3 - ax[d];
                if (pe < 0 || pe > 3)
                    goto done;
                nax[d] = (int)pe;
            }
            memcpy(ax, nax, sizeof ax);
        } else if (is_op(f, p, TERN_GOP_RESHAPE) && x->type == g->values[v].type && x->rank >= 1) {
            if (!flat) { /* from here on the storage is addressed flat: the same offsets through a reshape */
                rowmajor(&g->values[v], rm);
                for (int d = 0; d < 4; d++)
                    st[d] = rm[ax[d]];
                flat = 1;
            }
        } else if (flat && off == 0 && (L->split < 0 || L->split == p) && is_op(f, p, TERN_GOP_SPLIT) && x->rank >= 1) {
            int64_t axis = tern_graph_attr_int(n, "axis", 0);
            if (axis < 0)
                axis += x->rank;
            const tern_graph_value *pv = &g->values[v];
            if (axis != x->rank - 1 || pv->rank < 1)
                break;
            int64_t W = x->dims[x->rank - 1], E = pv->dims[pv->rank - 1], o = 0, col = 0;
            int k = -1;
            for (int j = 0; j < n->n_outputs; j++) {
                if (n->outputs[j] == v) {
                    k = j;
                    break;
                }
                if (n->outputs[j] < 0)
                    goto done;
                const tern_graph_value *ov = &g->values[n->outputs[j]];
                o += ov->dims[ov->rank - 1];
            }
            if (k < 0 || E <= 0 || W < E)
                break;
            /* a piece's flat address r*E + e is r*W + o + e in the source: each stride lies wholly in the row
             * index (a multiple of E) or in the column, and the columns stay inside the window */
            for (int d = 0; d < 4; d++)
                if (st[d] % E != 0)
                    col += st[d] * (ld[d] - 1);
            if (col >= E)
                break;
            for (int d = 0; d < 4; d++)
                if (st[d] % E == 0)
                    st[d] = st[d] / E * W;
            off = o;
            L->split = p;
            L->split_outs++;
            L->absorbed++;
            v = n->inputs[0];
            break; /* a split's source is where the walk ends */
        } else {
            break;
        }
        L->drop[L->ndrop++] = p;
        L->absorbed++;
        v = n->inputs[0];
    }
done:
    if (!flat) {
        rowmajor(&g->values[v], rm);
        for (int d = 0; d < 4; d++)
            st[d] = rm[ax[d]];
    }
    *src = v;
    view[0] = off;
    for (int d = 0; d < 4; d++)
        view[1 + d] = st[d];
}

static int att_layouts(const fctx *f, int q, int kt, int v, int pv, att_layout *L)
{
    const tern_graph *g = f->g;
    memset(L, 0, sizeof *L);
    L->split = -1;
    const tern_graph_value *Q = &g->values[q], *KT = &g->values[kt], *V = &g->values[v];
    static const int id[4] = {0, 1, 2, 3}, kax[4] = {0, 1, 3, 2};
    int64_t lq[4] = {Q->dims[0], Q->dims[1], Q->dims[2], Q->dims[3]};
    int64_t lk[4] = {KT->dims[0], KT->dims[1], KT->dims[3], KT->dims[2]};
    int64_t lv[4] = {V->dims[0], V->dims[1], V->dims[2], V->dims[3]};
    att_walk_back(f, q, id, lq, &L->src[0], L->view[0], &L->rep[0], L);
    att_walk_back(f, kt, kax, lk, &L->src[1], L->view[1], &L->rep[1], L);
    att_walk_back(f, v, id, lv, &L->src[2], L->view[2], &L->rep[2], L);
    if (L->rep[0] != 1 || L->rep[1] != L->rep[2]) /* the lowering shares one K/V head among rep query heads */
        return 0;
    if (L->split >= 0) {
        const tern_graph_node *sp = node(f, L->split);
        if (L->split_outs == sp->n_outputs && L->ndrop < ATT_MAX_DROP)
            L->drop[L->ndrop++] = L->split;
    }
    /* the output: Transpose then Reshape, each the single user */
    int o = g->nodes[pv].outputs[0], t = only_user(f, o);
    const tern_graph_value *O = &g->values[o];
    int64_t rm[TERN_GRAPH_MAX_RANK];
    rowmajor(O, rm);
    L->at = pv;
    L->view[3][0] = 0;
    for (int d = 0; d < 4; d++)
        L->view[3][1 + d] = rm[d];
    if (is_op(f, t, TERN_GOP_TRANSPOSE) && L->ndrop < ATT_MAX_DROP - 1) {
        const tern_graph_value *y = &g->values[g->nodes[t].outputs[0]];
        const tern_graph_attr *pa = tern_graph_node_attr(node(f, t), "perm");
        int r2 = only_user(f, g->nodes[t].outputs[0]);
        if (y->rank == 4 && is_op(f, r2, TERN_GOP_RESHAPE) && g->values[g->nodes[r2].outputs[0]].type == O->type) {
            int64_t ry[4];
            rowmajor(y, ry);
            int ok = 1;
            for (int e = 0; e < 4; e++) { /* y's axis e is o's axis perm[e] */
                int64_t pe = pa && pa->n == 4 ? pa->ints[e] : 3 - e;
                if (pe < 0 || pe > 3)
                    ok = 0;
                else
                    L->view[3][1 + pe] = ry[e];
            }
            if (ok) {
                L->drop[L->ndrop++] = pv;
                L->drop[L->ndrop++] = t;
                L->at = r2;
                L->absorbed += 2;
            } else {
                for (int d = 0; d < 4; d++)
                    L->view[3][1 + d] = rm[d];
            }
        }
    }
    const tern_graph_value *Z = &g->values[g->nodes[L->at].outputs[0]];
    L->out_rank = Z->rank;
    memcpy(L->out_dims, Z->dims, sizeof L->out_dims);
    return L->absorbed > 0;
}

/* Is v the scores: MatMul(Q, KT), optionally divided or multiplied by a constant scalar? */
static int att_scores(const fctx *f, int v)
{
    int p = prod(f, v);
    if (is_op(f, p, TERN_GOP_DIV) || is_op(f, p, TERN_GOP_MUL)) {
        const tern_graph_node *d = node(f, p);
        int k0 = d->inputs[0], k1 = d->inputs[1];
        const tern_host_tensor *c0 = f->g->values[k0].constant, *c1 = f->g->values[k1].constant;
        if (c1 && c1->count == 1)
            p = prod(f, k0);
        else if (c0 && c0->count == 1 && d->op_id == TERN_GOP_MUL)
            p = prod(f, k1);
        else
            return 0;
    }
    return is_op(f, p, TERN_GOP_MATMUL);
}

/* Is node c a Cast of an fp32 value to fp32 (what softmax(x.float()) and softmax(x, dtype=torch.float32)
 * export: a no-op the attention can take in)? */
static int att_noop_cast(const fctx *f, int c)
{
    if (!is_op(f, c, TERN_GOP_CAST))
        return 0;
    const tern_graph_node *n = node(f, c);
    return tern_graph_attr_int(n, "to", 0) == 1 && f->g->values[n->inputs[0]].type == TERN_ELEM_FLOAT &&
           f->g->values[n->outputs[0]].type == TERN_ELEM_FLOAT;
}

/* The attention pattern whose Softmax is node i (see above), or 0. Shared by the fusion below and by training's
 * fused attention backward (graph_match_attention). */
static int att_match(const fctx *f, int i, graph_att_match *m)
{
    const tern_graph *g = f->g;
    const tern_graph_node *sm = &g->nodes[i];
    int x = sm->inputs[0], nn = 0, *nodes = m->nodes;
    memset(m, 0, sizeof *m);
    m->softmax = i;
    m->mask = -1;
    /* fp32-to-fp32 Casts before and after the softmax (HF's LLaMA and T5 write both) */
    while (nn < 4 && single(f, x) && att_noop_cast(f, prod(f, x))) {
        nodes[nn++] = prod(f, x);
        x = g->nodes[prod(f, x)].inputs[0];
    }
    const tern_graph_value *xv = &g->values[x];
    int64_t axis = tern_graph_attr_int(sm, "axis", tern_graph_opset(g) >= 13 ? -1 : 1);
    if (xv->rank < 2 || xv->type != TERN_ELEM_FLOAT || (axis != -1 && axis != xv->rank - 1))
        return 0;
    int y = sm->outputs[0], pv = only_user(f, y);
    while (nn < 8 && att_noop_cast(f, pv)) {
        nodes[nn++] = pv;
        y = g->nodes[pv].outputs[0];
        pv = only_user(f, y);
    }
    if (!is_op(f, pv, TERN_GOP_MATMUL) || g->nodes[pv].inputs[0] != y || !single(f, x))
        return 0;
    int mask_mode = 0, mask = -1, scale_op = 0;
    float fill = 0, scale = 1;
    int p = prod(f, x);
    if (is_op(f, p, TERN_GOP_WHERE)) {
        const tern_graph_node *w = node(f, p);
        int cnd = w->inputs[0], t = w->inputs[1], e = w->inputs[2];
        const tern_graph_value *tv = &g->values[t], *ev = &g->values[e];
        if (g->values[cnd].type != TERN_ELEM_BOOL)
            return 0;
        if (tv->constant && tv->constant->count == 1 && single(f, e)) {
            mask_mode = 1, fill = (float)tern_host_tensor_get(tv->constant, 0), x = e;
        } else if (ev->constant && ev->constant->count == 1 && single(f, t)) {
            mask_mode = 2, fill = (float)tern_host_tensor_get(ev->constant, 0), x = t;
        } else {
            return 0;
        }
        mask = cnd;
        nodes[nn++] = p;
        p = prod(f, x);
    } else if (is_op(f, p, TERN_GOP_ADD)) {
        const tern_graph_node *a = node(f, p);
        /* the scores are the operand a matmul (possibly scaled) produced */
        int s0 = a->inputs[0], s1 = a->inputs[1];
        int scores_first = att_scores(f, s0), scores_second = att_scores(f, s1);
        if (scores_first == scores_second) /* both or neither: ambiguous */
            return 0;
        x = scores_first ? s0 : s1;
        mask = scores_first ? s1 : s0;
        if (!single(f, x) || g->values[mask].type != TERN_ELEM_FLOAT)
            return 0;
        mask_mode = 3;
        nodes[nn++] = p;
        p = prod(f, x);
    }
    if (is_op(f, p, TERN_GOP_DIV) || is_op(f, p, TERN_GOP_MUL)) {
        const tern_graph_node *d = node(f, p);
        int divide = d->op_id == TERN_GOP_DIV;
        int sv = d->inputs[1], other = d->inputs[0];
        if (!divide && g->values[other].constant && g->values[other].constant->count == 1)
            sv = d->inputs[0], other = d->inputs[1];
        const tern_graph_value *c = &g->values[sv];
        if (!c->constant || c->constant->count != 1 || !single(f, other))
            return 0;
        scale_op = divide ? 1 : 2;
        scale = (float)tern_host_tensor_get(c->constant, 0);
        x = other;
        nodes[nn++] = p;
        p = prod(f, x);
    }
    if (!is_op(f, p, TERN_GOP_MATMUL))
        return 0;
    int q = g->nodes[p].inputs[0], kt = g->nodes[p].inputs[1], v = g->nodes[pv].inputs[1];
    const tern_graph_value *Q = &g->values[q], *K = &g->values[kt], *V = &g->values[v], *S = &g->values[x];
    int r = Q->rank;
    if (r < 2 || K->rank != r || V->rank != r || S->rank != r || Q->type != TERN_ELEM_FLOAT ||
        K->type != TERN_ELEM_FLOAT || V->type != TERN_ELEM_FLOAT || Q->constant || K->constant || V->constant)
        return 0;
    for (int d = 0; d < r; d++)
        if (Q->dims[d] <= 0 || K->dims[d] <= 0 || V->dims[d] <= 0 || (d < r - 2 && (K->dims[d] != Q->dims[d] ||
                                                                                      V->dims[d] != Q->dims[d])))
            return 0;
    int64_t D = Q->dims[r - 1], Sk = K->dims[r - 1], Dv = V->dims[r - 1];
    if (K->dims[r - 2] != D || V->dims[r - 2] != Sk || D > ATT_MAX_D || Dv > ATT_MAX_DV || Sk > ATT_MAX_SK)
        return 0;
    if (mask >= 0 && !att_mask_ok(g, mask, r, S->dims))
        return 0;
    nodes[nn++] = p;
    nodes[nn++] = i;
    m->n_nodes = nn;
    m->pv = pv, m->qk = p, m->q = q, m->kt = kt, m->v = v, m->mask = mask;
    m->mask_mode = mask_mode, m->scale_op = scale_op, m->fill = fill, m->scale = scale;
    return 1;
}

int graph_match_attention(const tern_graph *g, int softmax, graph_att_match *m)
{
    if (softmax < 0 || softmax >= g->n_nodes || g->nodes[softmax].op_id != TERN_GOP_SOFTMAX ||
        g->nodes[softmax].domain[0])
        return 0;
    size_t nv = (size_t)g->n_values + 1, nn = (size_t)g->n_nodes + 1;
    fctx f = {(tern_graph *)g, calloc(nv, sizeof(int)), malloc(nv * sizeof(int)), NULL, calloc(nn, 1), 0};
    int hit = 0;
    if (f.uses && f.consumer && f.touched) {
        for (int v = 0; v < g->n_values; v++)
            f.consumer[v] = -1;
        for (int i = 0; i < g->n_nodes; i++)
            for (int k = 0; k < g->nodes[i].n_inputs; k++) {
                int v = g->nodes[i].inputs[k];
                if (v >= 0) {
                    f.uses[v]++;
                    f.consumer[v] = i;
                }
            }
        for (int k = 0; k < g->n_outputs; k++)
            f.uses[g->outputs[k]] += 2;
        hit = att_match(&f, softmax, m);
    }
    free(f.uses), free(f.consumer), free(f.touched);
    return hit;
}

static tern_status fuse_attention(fctx *f, int i, int *hits, tern_error *err)
{
    tern_graph *g = f->g;
    graph_att_match m;
    if (!att_match(f, i, &m))
        return TERN_OK;
    int *nodes = m.nodes, nn = m.n_nodes, pv = m.pv, q = m.q, kt = m.kt, v = m.v, mask = m.mask;
    int mask_mode = m.mask_mode, scale_op = m.scale_op;
    float fill = m.fill, scale = m.scale;
    const tern_graph_value *Q = &g->values[q], *K = &g->values[kt], *V = &g->values[v];
    int r = Q->rank;
    int64_t D = Q->dims[r - 1], Sk = K->dims[r - 1], Dv = V->dims[r - 1];
    /* Rank 4 ([B, H, S, D], what transformer exports make): read Q, K, V straight from the tensors the head
     * split came from, and write the output in the layout the merge of the heads wants. */
    att_layout L;
    if (r == 4 && !(f->flags & TERN_GRAPH_NO_ATTENTION_LAYOUTS) && att_layouts(f, q, kt, v, pv, &L)) {
        drop(f, nodes, nn);
        drop(f, L.drop, L.ndrop);
        int ins[4] = {L.src[0], L.src[1], L.src[2], mask};
        int64_t dims[6] = {Q->dims[0], Q->dims[1], Q->dims[2], Sk, D, Dv};
        tern_graph_attr at[11] = {attr_int("scale_op", scale_op), attr_float("scale", scale),
                                  attr_int("mask", mask_mode), attr_float("fill", fill), attr_ints("dims", 6, dims),
                                  attr_ints("q", 5, L.view[0]), attr_ints("k", 5, L.view[1]),
                                  attr_ints("v", 5, L.view[2]), attr_ints("o", 5, L.view[3]),
                                  attr_ints("out_shape", L.out_rank, L.out_dims)};
        if (L.rep[1] > 1) /* grouped-query heads only: other models' nodes stay as they were */
            at[10] = attr_int("kv_rep", L.rep[1]);
        (*hits)++;
        return rewrite(f, L.at, "tern", "Attention", mask >= 0 ? 4 : 3, ins, L.rep[1] > 1 ? 11 : 10, at, err);
    }
    drop(f, nodes, nn);
    int ins[4] = {q, kt, v, mask};
    tern_graph_attr at[4] = {attr_int("scale_op", scale_op), attr_float("scale", scale), attr_int("mask", mask_mode),
                             attr_float("fill", fill)};
    (*hits)++;
    return rewrite(f, pv, "tern", "Attention", mask >= 0 ? 4 : 3, ins, 4, at, err);
}

/* tern.MatMulBias(A, W, bias) followed by Add(y, r) (either order, r of y's exact shape, W constant) ->
 * tern.MatMulBias(A, W, bias, r): the residual added after the activation, in the layer's epilogue. */
static tern_status fuse_residual(fctx *f, int i, int *hits, tern_error *err)
{
    tern_graph *g = f->g;
    const tern_graph_node *n = &g->nodes[i];
    if (f->touched[i] || n->op_id != TERN_GOP_MATMUL_BIAS || n->n_inputs != 3 ||
        !g->values[n->inputs[1]].constant)
        return TERN_OK;
    int y = n->outputs[0], add = only_user(f, y);
    if (!is_op(f, add, TERN_GOP_ADD))
        return TERN_OK;
    int r = other_input(node(f, add), y);
    const tern_graph_value *yv = &g->values[y], *rv = r >= 0 ? &g->values[r] : NULL;
    if (!rv || r == y || rv->type != yv->type || rv->rank != yv->rank || !tern_elem_is_float(rv->type))
        return TERN_OK;
    for (int d = 0; d < yv->rank; d++)
        if (yv->dims[d] <= 0 || rv->dims[d] != yv->dims[d])
            return TERN_OK;
    int ins[4] = {n->inputs[0], n->inputs[1], n->inputs[2], r};
    tern_graph_attr at = attr_str("activation", tern_graph_attr_string(n, "activation", "none"));
    drop(f, &i, 1);
    (*hits)++;
    return rewrite(f, add, "tern", "MatMulBias", 4, ins, 1, &at, err);
}

/* tern.MatMulBias(A, W, bias[, r]) whose only reader is LayerNormalization(y, gamma[, beta]) over the last
 * axis with only its first output -> tern.MatMulBias(A, W, bias, r or -1, gamma, beta or -1), layernorm=1,
 * epsilon: the compiler normalises each output row on chip before storing it. */
/* The LayerNormalization reading y as its input 0 that can be fused into y's linear layer (over the last axis,
 * only its first output, gamma and beta float vectors of N), or -1. With two readers of y (pre-LN models: the
 * residual stream feeds the norm and the next residual add), gamma and beta must not be computed by a node (the
 * fused node sits where the layer is, before the norm). */
static int fusable_layernorm(fctx *f, int y, int two)
{
    tern_graph *g = f->g;
    const tern_graph_value *yv = &g->values[y];
    if (yv->rank < 1 || yv->type != TERN_ELEM_FLOAT)
        return -1;
    for (int ln = 0; ln < g->n_nodes; ln++) {
        if (!is_op(f, ln, TERN_GOP_LAYER_NORMALIZATION))
            continue;
        const tern_graph_node *l = node(f, ln);
        if (l->inputs[0] != y || l->n_inputs < 2 || l->inputs[1] < 0)
            continue;
        int ok = 1;
        for (int k = 1; k < l->n_outputs; k++)
            ok &= l->outputs[k] < 0;
        int64_t ax = tern_graph_attr_int(l, "axis", -1);
        ok &= ax == -1 || ax == yv->rank - 1;
        int64_t N = yv->dims[yv->rank - 1];
        for (int k = 1; k < 3 && k < l->n_inputs && ok; k++) { /* gamma, beta: float vectors of N ([N] or [1, N]) */
            if (l->inputs[k] < 0)
                continue;
            const tern_graph_value *p = &g->values[l->inputs[k]];
            ok = p->type == TERN_ELEM_FLOAT && p->rank >= 1 && p->rank <= 2 && p->dims[p->rank - 1] == N &&
                 (p->rank == 1 || p->dims[0] == 1) && (!two || p->producer < 0);
        }
        return ok ? ln : -1;
    }
    return -1;
}

/* tern.MatMulBias(A, W, bias[, r]) then LayerNormalization over the last axis -> one tern.MatMulBias(A, W, bias,
 * r or -1, gamma, beta or -1) with layernorm=1 and the norm's epsilon: the compiler normalises each output row on
 * chip before storing it. When the norm is y's only reader, the node keeps one output (the norm's, where the norm
 * was); when y has exactly one other reader (pre-LN models), the node keeps y as output 0 and gives the norm as
 * output 1 (where the layer was). */
static tern_status fuse_linear_layernorm(fctx *f, int i, int *hits, tern_error *err)
{
    tern_graph *g = f->g;
    const tern_graph_node *n = &g->nodes[i];
    if (f->touched[i] || n->op_id != TERN_GOP_MATMUL_BIAS || n->n_inputs < 3 ||
        n->n_inputs > 4 || !g->values[n->inputs[1]].constant || tern_graph_node_attr(n, "layernorm"))
        return TERN_OK;
    int y = n->outputs[0], two = f->uses[y] == 2;
    if (f->uses[y] != 1 && !two)
        return TERN_OK;
    int ln = fusable_layernorm(f, y, two);
    if (ln < 0)
        return TERN_OK;
    const tern_graph_node *l = node(f, ln);
    int beta = l->n_inputs > 2 ? l->inputs[2] : -1;
    int ins[6] = {n->inputs[0], n->inputs[1], n->inputs[2], n->n_inputs > 3 ? n->inputs[3] : -1, l->inputs[1], beta};
    tern_graph_attr at[3] = {attr_str("activation", tern_graph_attr_string(n, "activation", "none")),
                             attr_int("layernorm", 1), attr_float("epsilon", tern_graph_attr_float(l, "epsilon", 1e-5f))};
    (*hits)++;
    if (!two) {
        drop(f, &i, 1);
        return rewrite(f, ln, "tern", "MatMulBias", 6, ins, 3, at, err);
    }
    int z = l->outputs[0];
    drop(f, &ln, 1);
    tern_status st = rewrite(f, i, "tern", "MatMulBias", 6, ins, 3, at, err);
    if (st)
        return st;
    tern_graph_node *m = &g->nodes[i]; /* the second output: the norm's */
    int *outs = realloc(m->outputs, 2 * sizeof(int));
    if (!outs)
        return tern_error_set(err, TERN_ERR_NOMEM, "fuse: out of memory");
    m->outputs = outs;
    m->outputs[1] = z;
    m->n_outputs = 2;
    return TERN_OK;
}

static tern_status fuse_round(tern_graph *g, unsigned flags, int *hits, tern_error *err)
{
    fctx f = {g, NULL, NULL, NULL, NULL, flags};
    size_t nv = (size_t)g->n_values + 1, nn = (size_t)g->n_nodes + 1;
    f.uses = calloc(nv, sizeof(int));
    f.consumer = malloc(nv * sizeof(int));
    f.keep = malloc(nn);
    f.touched = calloc(nn, 1);
    tern_status st = TERN_OK;
    if (!f.uses || !f.consumer || !f.keep || !f.touched) {
        st = tern_error_set(err, TERN_ERR_NOMEM, "fuse: out of memory");
        goto done;
    }
    memset(f.keep, 1, nn);
    for (int v = 0; v < g->n_values; v++)
        f.consumer[v] = -1;
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i].n_inputs; k++) {
            int v = g->nodes[i].inputs[k];
            if (v >= 0) {
                f.uses[v]++;
                f.consumer[v] = i;
            }
        }
    for (int k = 0; k < g->n_outputs; k++)
        f.uses[g->outputs[k]] += 2; /* a graph output is never an intermediate */
    int before = *hits;
    /* GELU forms and layer norm first: MatMul fusion then sees Gelu as an activation. */
    for (int i = 0; i < g->n_nodes && !st; i++) {
        if (f.touched[i] || g->nodes[i].domain[0])
            continue;
        if (g->nodes[i].op_id == TERN_GOP_ERF)
            st = fuse_gelu_erf(&f, i, hits, err);
        else if (g->nodes[i].op_id == TERN_GOP_TANH)
            st = fuse_gelu_tanh(&f, i, hits, err);
        else if (g->nodes[i].op_id == TERN_GOP_REDUCE_MEAN)
            st = fuse_layernorm(&f, i, hits, err);
        else if (g->nodes[i].op_id == TERN_GOP_SOFTMAX && !(flags & TERN_GRAPH_NO_ATTENTION_FUSION))
            st = fuse_attention(&f, i, hits, err);
    }
    if (!st && *hits == before)
        for (int i = 0; i < g->n_nodes && !st; i++)
            if (!f.touched[i] && !g->nodes[i].domain[0] &&
                (g->nodes[i].op_id == TERN_GOP_MATMUL || g->nodes[i].op_id == TERN_GOP_GEMM))
                st = fuse_matmul_bias(&f, i, hits, err);
    if (!st && !(flags & TERN_GRAPH_NO_RESIDUAL_FUSION))
        for (int i = 0; i < g->n_nodes && !st; i++)
            st = fuse_residual(&f, i, hits, err);
    /* after the residual: the layer norm comes last in the epilogue (in the round after the residual's) */
    if (!st && *hits == before && !(flags & TERN_GRAPH_NO_LAYERNORM_FUSION))
        for (int i = 0; i < g->n_nodes && !st; i++)
            st = fuse_linear_layernorm(&f, i, hits, err);
    if (!st)
        st = graph_compact(g, f.keep, err);
done:
    free(f.uses), free(f.consumer), free(f.keep), free(f.touched);
    return st;
}

tern_status tern_graph_fuse_flags(tern_graph *g, unsigned flags, int *fused, tern_error *err)
{
    int hits = 0;
    tern_status st = TERN_OK;
    for (int round = 0; round < 16; round++) {
        int before = hits;
        if ((st = fuse_round(g, flags, &hits, err)))
            break;
        if (hits == before && round > 0)
            break;
    }
    if (fused)
        *fused = hits;
    if (st)
        return st;
    return tern_graph_infer(g, err);
}

tern_status tern_graph_fuse(tern_graph *g, int *fused, tern_error *err)
{
    return tern_graph_fuse_flags(g, 0, fused, err);
}

/* The permutation of Transpose node n for rank r (the attribute, or the reversal ONNX defaults to); 0 when the
 * attribute does not fit the rank. */
static int transpose_perm(const tern_graph_node *n, int r, int64_t *perm)
{
    size_t np = 0;
    const int64_t *p = graph_attr_ints(n, "perm", &np);
    if (p && np != (size_t)r)
        return 0;
    for (int d = 0; d < r; d++) {
        perm[d] = p ? p[d] : r - 1 - d;
        if (perm[d] < 0 || perm[d] >= r)
            return 0;
    }
    return 1;
}

/* Transpose(Transpose(x)) whose permutations compose to the identity is x itself: its readers read x. A training
 * step makes one per linear layer (the forward's W^T, the backward's (W^T)^T for dX = dY W), each a weight-sized
 * copy; a transpose moves bits, so the readers see the same values. Not a fusion: always done. The outer
 * Transpose, left unread, is pruned. Returns the pairs folded. */
static int fold_transpose_pairs(tern_graph *g)
{
    int hits = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const tern_graph_node *n = &g->nodes[i];
        if (n->op_id != TERN_GOP_TRANSPOSE || n->domain[0] || n->n_inputs < 1 || n->n_outputs < 1)
            continue;
        int y = n->outputs[0], v = n->inputs[0];
        if (y < 0 || v < 0 || (g->values[y].flags & TERN_VALUE_OUTPUT) || g->values[v].producer < 0)
            continue;
        const tern_graph_node *m = &g->nodes[g->values[v].producer];
        int x = m->n_inputs > 0 ? m->inputs[0] : -1, r = g->values[y].rank;
        if (m->op_id != TERN_GOP_TRANSPOSE || m->domain[0] || x < 0 || r < 1 || r > TERN_GRAPH_MAX_RANK ||
            g->values[x].rank != r || g->values[x].type != g->values[y].type)
            continue;
        int64_t po[TERN_GRAPH_MAX_RANK], pi[TERN_GRAPH_MAX_RANK];
        int ident = transpose_perm(n, r, po) && transpose_perm(m, r, pi);
        for (int d = 0; d < r && ident; d++) /* y[.., i_d, ..] = v[.., i_po[d] ..] = x[.., i_pi[po[d]] ..] */
            ident = pi[po[d]] == d && g->values[x].dims[d] == g->values[y].dims[d];
        if (!ident)
            continue;
        for (int k = i + 1; k < g->n_nodes; k++)
            for (int q = 0; q < g->nodes[k].n_inputs; q++)
                if (g->nodes[k].inputs[q] == y)
                    g->nodes[k].inputs[q] = x;
        hits++;
    }
    return hits;
}

tern_status tern_graph_optimize(tern_graph *g, tern_error *err) { return tern_graph_optimize_flags(g, 0, err); }

tern_status tern_graph_optimize_flags(tern_graph *g, unsigned flags, tern_error *err)
{
    tern_status st;
    if ((st = tern_graph_fold_constants(g, NULL, err)))
        return st;
    fold_transpose_pairs(g);
    tern_graph_prune(g);
    if (!(flags & TERN_GRAPH_NO_FUSION) && (st = tern_graph_fuse_flags(g, flags, NULL, err)))
        return st;
    tern_graph_prune(g);
    return TERN_OK;
}

/* ---- whole-graph run ---- */
tern_status tern_graph_run(const tern_graph *g, const tern_host_tensor *const *inputs, tern_host_tensor **outputs,
                           tern_error *err)
{
    for (int k = 0; k < g->n_outputs; k++)
        outputs[k] = NULL;
    size_t nv = (size_t)g->n_values + 1;
    const tern_host_tensor **vals = calloc(nv, sizeof *vals);
    unsigned char *owned = calloc(nv, 1);
    int *last = malloc(nv * sizeof *last);
    tern_status st = TERN_OK;
    const tern_host_tensor **in = NULL;
    tern_host_tensor **out = NULL;
    int max_in = 1, max_out = 1;
    for (int i = 0; i < g->n_nodes; i++) {
        max_in = g->nodes[i].n_inputs > max_in ? g->nodes[i].n_inputs : max_in;
        max_out = g->nodes[i].n_outputs > max_out ? g->nodes[i].n_outputs : max_out;
    }
    in = calloc((size_t)max_in, sizeof *in);
    out = calloc((size_t)max_out, sizeof *out);
    if (!vals || !owned || !last || !in || !out) {
        st = tern_error_set(err, TERN_ERR_NOMEM, "run: out of memory");
        goto done;
    }
    for (int v = 0; v < g->n_values; v++) {
        last[v] = -1;
        if (g->values[v].constant && g->values[v].producer < 0)
            vals[v] = g->values[v].constant;
    }
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i].n_inputs; k++)
            if (g->nodes[i].inputs[k] >= 0)
                last[g->nodes[i].inputs[k]] = i;
    for (int k = 0; k < g->n_outputs; k++)
        last[g->outputs[k]] = INT_MAX;
    for (int k = 0; k < g->n_inputs; k++) {
        const tern_graph_value *v = &g->values[g->inputs[k]];
        const tern_host_tensor *t = inputs[k];
        if (!t) {
            st = tern_error_set(err, TERN_ERR_INVALID, "run: graph input \"%s\" is missing", v->name);
            goto done;
        }
        if (t->type != v->type || (v->rank >= 0 && t->rank != v->rank)) {
            st = tern_error_set(err, TERN_ERR_INVALID, "run: graph input \"%s\" is %s rank %d, expected %s rank %d",
                                v->name, tern_elem_name(t->type), t->rank, tern_elem_name(v->type), v->rank);
            goto done;
        }
        for (int d = 0; d < t->rank && v->rank >= 0; d++)
            if (v->dims[d] >= 0 && v->dims[d] != t->dims[d]) {
                st = tern_error_set(err, TERN_ERR_INVALID, "run: graph input \"%s\" dim %d is %lld, expected %lld",
                                    v->name, d, (long long)t->dims[d], (long long)v->dims[d]);
                goto done;
            }
        vals[g->inputs[k]] = t;
    }
    for (int i = 0; i < g->n_nodes; i++) {
        const tern_graph_node *n = &g->nodes[i];
        int all_const = 1;
        for (int k = 0; k < n->n_outputs; k++)
            if (n->outputs[k] >= 0 && !g->values[n->outputs[k]].constant)
                all_const = 0;
        if (all_const) { /* inferred constants (shape chains): valid because input dims were checked */
            for (int k = 0; k < n->n_outputs; k++)
                if (n->outputs[k] >= 0)
                    vals[n->outputs[k]] = g->values[n->outputs[k]].constant;
            continue;
        }
        for (int k = 0; k < n->n_inputs; k++) {
            in[k] = n->inputs[k] >= 0 ? vals[n->inputs[k]] : NULL;
            if (n->inputs[k] >= 0 && !in[k]) {
                st = graph_node_error(g, i, err, TERN_ERR_INVALID, "input %d \"%s\" has no value", k,
                                      g->values[n->inputs[k]].name);
                goto done;
            }
        }
        if ((st = tern_graph_eval_node(g, i, in, out, err)))
            goto done;
        for (int k = 0; k < n->n_outputs; k++) {
            if (n->outputs[k] < 0) {
                tern_host_tensor_free(out[k]);
                continue;
            }
            vals[n->outputs[k]] = out[k];
            owned[n->outputs[k]] = 1;
        }
        for (int k = 0; k < n->n_inputs; k++) {
            int v = n->inputs[k];
            if (v >= 0 && last[v] == i && owned[v]) {
                tern_host_tensor_free((tern_host_tensor *)vals[v]);
                vals[v] = NULL;
                owned[v] = 0;
            }
        }
    }
    for (int k = 0; k < g->n_outputs; k++) {
        int v = g->outputs[k];
        if (!vals[v]) {
            st = tern_error_set(err, TERN_ERR_INVALID, "run: graph output \"%s\" was not computed", g->values[v].name);
            goto done;
        }
        if (owned[v]) {
            int dup = 0; /* the same value listed twice as an output */
            for (int q = 0; q < k; q++)
                dup |= g->outputs[q] == v;
            if (!dup) {
                outputs[k] = (tern_host_tensor *)vals[v];
                owned[v] = 0;
                continue;
            }
        }
        tern_error e;
        if (tern_host_tensor_clone(vals[v], &outputs[k], &e)) {
            st = tern_error_set(err, e.code, "run: %s", e.msg);
            goto done;
        }
    }
done:
    if (st && outputs)
        for (int k = 0; k < g->n_outputs; k++) {
            tern_host_tensor_free(outputs[k]);
            outputs[k] = NULL;
        }
    if (owned)
        for (int v = 0; v < g->n_values; v++)
            if (owned[v])
                tern_host_tensor_free((tern_host_tensor *)vals[v]);
    free(vals), free(owned), free(last), free(in), free(out);
    return st;
}
