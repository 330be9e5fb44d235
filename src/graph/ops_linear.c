/* The linear family's shape inference: MatMul (numpy batch broadcasting of both operands), tern.MatMulBias (the
 * fusion's linear layer with bias, residual and layer norm) and Gemm. Moved out of infer.c's one switch;
 * infer_node dispatches here by op id. */
#include "infer_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* MatMul (numpy batch broadcasting) and tern.MatMulBias (bias, residual, fused layer norm checked) */
tern_status graph_infer_matmul(ictx *c)
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

/* GEMM */
tern_status graph_infer_gemm(ictx *c)
{
    const tern_graph_node *n = c->n;
    tern_status st;
    int64_t dims[TERN_GRAPH_MAX_RANK];
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
