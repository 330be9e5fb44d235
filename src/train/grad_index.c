/* Gradients of the indexing ops. Gather along axis 0 (an embedding lookup) scatters the output gradient back
 * into the table, adding the rows of repeated indices, in one of two forms chosen by the table's rows V:
 *   - V < GRAPH_SCATTER_ROWS_MIN (src/graph/expand.h): OneHot(indices, V)^T x dY, a [V, N] x [N, D] matmul on
 *     TensorE; each row of the table sums its indices' gradient rows in index order (the matmul's contraction);
 *   - larger tables (a real vocabulary: GPT-2's 50,257 rows, where the one-hot product would cost V x N x D and
 *     OneHot's depth is capped): ScatterND(G, indices, dY, reduction "add"), which the compiler lowers as a row
 *     scatter-add (src/compiler/lower_scatter_add.c: blocks of 128 indices; a row's gradient rows summed in index
 *     order within a block, the block sums added in block order). G is the table's gradient so far when another
 *     use of the table already gave one (a tied output projection), so the scatter adds into it in place;
 *     otherwise zeros.
 * Negative indices count from the end in both forms, as OneHot and ScatterND count them. */
#include "ad_internal.h"
#include "../graph/expand.h"

#include <string.h>

/* A string attribute on a node this layer added (ad_op reserves four attribute slots; ScatterND takes one). */
static int attr_string(ad_ctx *a, int node, const char *name, const char *v)
{
    tern_graph_node *n = &a->g->nodes[node];
    if (n->n_attrs >= 4)
        return ad_fail(a, TERN_ERR_INVALID, "train: internal: too many attributes on %s", n->op);
    tern_graph_attr *at = &n->attrs[n->n_attrs];
    memset(at, 0, sizeof *at);
    at->type = TERN_ATTR_STRING;
    at->name = graph_strdup(name);
    at->s = graph_strdup(v);
    n->n_attrs++; /* counted before the check so the graph frees what was allocated */
    if (!at->name || !at->s)
        return ad_fail(a, TERN_ERR_NOMEM, "train: out of memory");
    return 0;
}

static int g_gather(ad_ctx *a, const ad_fwd *f)
{
    const tern_graph_node *n = &a->g->nodes[f->index];
    int64_t axis = tern_graph_attr_int(n, "axis", 0);
    if (ad_needs(a, f->in[1]))
        return ad_fail_node(a, f->index, "Gather: indices carry no gradient");
    ad_shape sd = ad_shape_of(a, f->in[0]), si = ad_shape_of(a, f->in[1]);
    if (axis < 0)
        axis += sd.rank;
    if (axis != 0)
        return ad_fail_node(a, f->index, "Gather along axis %lld has no gradient rule (axis 0 only)", (long long)axis);
    int64_t nidx = 1, rest = 1;
    for (int d = 0; d < si.rank; d++)
        nidx *= si.d[d];
    for (int d = 1; d < sd.rank; d++)
        rest *= sd.d[d];
    int64_t depth = sd.d[0];
    if (!ad_needs(a, f->in[0]))
        return 0;
    if (depth >= GRAPH_SCATTER_ROWS_MIN) {
        ad_shape idx2 = {.rank = 2, .d = {nidx, 1}}, upd = {.rank = 2, .d = {nidx, rest}};
        ad_shape tab = {.rank = 2, .d = {depth, rest}};
        int prev = a->grad[f->in[0]];
        int base;
        if (prev >= 0)
            base = ad_reshape(a, prev, &tab);
        else
            base = ad_expand(a, ad_const_f(a, 0.0f), &tab);
        int in[3] = {base, ad_reshape(a, f->in[1], &idx2), ad_reshape(a, f->dy[0], &upd)};
        int s = ad_op(a, "ScatterND", 3, in);
        if (s < 0)
            return -1;
        if (attr_string(a, ad_last_node(a), "reduction", "add"))
            return -1;
        int g = ad_reshape(a, s, &sd);
        if (prev >= 0)
            a->grad[f->in[0]] = g; /* the scatter added into the earlier gradient: it replaces it */
        else
            ad_accum(a, f->in[0], g);
        return a->failed ? -1 : 0;
    }
    ad_shape flat_i = {.rank = 1, .d = {nidx}}, flat_g = {.rank = 2, .d = {nidx, rest}};
    int idx = ad_reshape(a, f->in[1], &flat_i);
    float vals[2] = {0.0f, 1.0f};
    int64_t two = 2;
    int in[3] = {idx, ad_const_i64(a, 1, &depth), ad_const_fv(a, 1, &two, vals)};
    int oh = ad_op(a, "OneHot", 3, in); /* [N, V] */
    ad_attr_int(a, ad_last_node(a), "axis", -1);
    int g = ad_op2(a, "MatMul", ad_transpose(a, oh, 2, (const int64_t[]){1, 0}), ad_reshape(a, f->dy[0], &flat_g));
    ad_accum(a, f->in[0], ad_reshape(a, g, &sd));
    return 0;
}

int grad_index_rule(int op_id, ad_rule *out)
{
    switch (op_id) {
    case TERN_GOP_GATHER:
        *out = g_gather;
        return 1;
    default:
        return 0;
    }
}
