/* Gradients of the indexing ops. Gather along axis 0 (an embedding lookup) scatters the output gradient back
 * into the table, adding the rows of repeated indices: tern's compiler has no ScatterND, so the scatter-add is
 * expressed as OneHot(indices, V)^T x dY, a matmul on TensorE ([V, N] x [N, D]). Negative indices count from the
 * end, as OneHot's do. */
#include "ad_internal.h"

#include <string.h>

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
    ad_shape flat_i = {.rank = 1, .d = {nidx}}, flat_g = {.rank = 2, .d = {nidx, rest}};
    int idx = ad_reshape(a, f->in[1], &flat_i);
    int64_t depth = sd.d[0];
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
