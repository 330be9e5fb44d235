/* Gradients of the reductions: ReduceSum and ReduceMean spread the output gradient back over the reduced axes
 * (reshaped to the keepdims shape, then Expand; the mean divides by the count of reduced elements). The axes
 * come from the attribute or, from the opset that moved them, the constant second input. */
#include "ad_internal.h"

#include <string.h>

/* Reads the reduced axes into red[] (1 = reduced); returns 0, or -1 after failing the pass. */
static int reduced_axes(ad_ctx *a, const ad_fwd *f, int rank, unsigned char *red)
{
    const tern_graph_node *n = &a->g->nodes[f->index];
    size_t na = 0;
    const int64_t *ax = NULL;
    int64_t buf[TERN_GRAPH_MAX_RANK];
    const tern_graph_attr *at = tern_graph_node_attr(n, "axes");
    if (at) {
        ax = at->ints;
        na = at->n;
    } else if (f->n_in > 1 && f->in[1] >= 0) {
        const tern_graph_value *v = tern_graph_value_at(a->g, f->in[1]);
        if (!v->constant)
            return ad_fail_node(a, f->index, "reduction axes are not constant (no gradient rule)");
        na = v->constant->count;
        if (na > TERN_GRAPH_MAX_RANK)
            return ad_fail_node(a, f->index, "%zu reduction axes", na);
        for (size_t k = 0; k < na; k++)
            buf[k] = (int64_t)tern_host_tensor_get(v->constant, k);
        ax = buf;
    }
    memset(red, 0, TERN_GRAPH_MAX_RANK);
    if (na == 0) {
        if (tern_graph_attr_int(n, "noop_with_empty_axes", 0))
            return 0;
        memset(red, 1, (size_t)rank);
        return 0;
    }
    for (size_t k = 0; k < na; k++) {
        int64_t d = ax[k] < 0 ? ax[k] + rank : ax[k];
        if (d < 0 || d >= rank)
            return ad_fail_node(a, f->index, "reduction axis %lld outside rank %d", (long long)ax[k], rank);
        red[d] = 1;
    }
    return 0;
}

static int g_reduce(ad_ctx *a, const ad_fwd *f)
{
    const tern_graph_node *n = &a->g->nodes[f->index];
    int mean = n->op_id == TERN_GOP_REDUCE_MEAN;
    int keep = (int)tern_graph_attr_int(n, "keepdims", 1);
    ad_shape sx = ad_shape_of(a, f->in[0]);
    unsigned char red[TERN_GRAPH_MAX_RANK];
    if (reduced_axes(a, f, sx.rank, red) < 0)
        return -1;
    ad_shape kept = sx;
    int64_t count = 1;
    for (int d = 0; d < sx.rank; d++)
        if (red[d]) {
            count *= sx.d[d];
            kept.d[d] = 1;
        }
    int g = f->dy[0];
    if (!keep)
        g = ad_reshape(a, g, &kept);
    if (mean && count > 0)
        g = ad_op2(a, "Mul", g, ad_const_f(a, (float)(1.0 / (double)count)));
    ad_accum(a, f->in[0], ad_expand(a, g, &sx));
    return 0;
}

int grad_reduce_rule(int op_id, ad_rule *out)
{
    switch (op_id) {
    case TERN_GOP_REDUCE_SUM:
    case TERN_GOP_REDUCE_MEAN:
        *out = g_reduce;
        return 1;
    default:
        return 0;
    }
}
