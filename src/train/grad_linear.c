/* Gradients of the linear ops. MatMul (NumPy semantics: batched, broadcast batch dims, rank-1 operands
 * promoted) gives dA = dY B^T and dB = A^T dY, each summed back over the batch dims its operand was broadcast
 * along; Gemm (alpha op(A) op(B) + beta C) picks the operand order so that no transpose of a weight is needed
 * for the common nn.Linear export (transB = 1): dX = dY W and dW = dY^T X. Both are plain MatMul and Transpose
 * nodes, so the backward matmuls run on TensorE like the forward ones. */
#include "ad_internal.h"

#include <string.h>

static int swap_last(ad_ctx *a, int x, int rank)
{
    int64_t perm[TERN_GRAPH_MAX_RANK];
    for (int d = 0; d < rank; d++)
        perm[d] = d;
    perm[rank - 2] = rank - 1;
    perm[rank - 1] = rank - 2;
    return ad_transpose(a, x, rank, perm);
}

/* The compiler's batched MatMul of two activations walks the output's batches reading the first operand at the
 * same batch index and the second at (index mod its batch count): right when the first has the output's batch
 * dims and the second a trailing part of them. An operand broadcast otherwise (a size-1 batch axis) is
 * expanded to the output's batch dims first. `rows` x `cols` is the operand's matrix shape, nb the batch rank of
 * the output dims `by`; `second` says which side it is on. */
static int batch_fit(ad_ctx *a, int x, const ad_shape *sx, const ad_shape *by, int nb, int second)
{
    int xb = sx->rank - 2;
    int fits = xb == nb;
    for (int d = 0; d < xb && fits; d++)
        fits = sx->d[d] == by->d[d];
    if (!fits && second) {
        int64_t cnt = 1;
        int suffix = 1;
        for (int d = 0; d < xb; d++) {
            cnt *= sx->d[d];
            suffix &= sx->d[d] == by->d[nb - xb + d];
        }
        fits = cnt == 1 || suffix;
    }
    if (fits)
        return x;
    ad_shape to;
    to.rank = nb + 2;
    for (int d = 0; d < nb; d++)
        to.d[d] = by->d[d];
    to.d[nb] = sx->d[sx->rank - 2];
    to.d[nb + 1] = sx->d[sx->rank - 1];
    return ad_expand(a, x, &to);
}

static ad_shape swapped(const ad_shape *s)
{
    ad_shape t = *s;
    t.d[s->rank - 2] = s->d[s->rank - 1];
    t.d[s->rank - 1] = s->d[s->rank - 2];
    return t;
}

static int g_matmul(ad_ctx *a, const ad_fwd *f)
{
    int A = f->in[0], B = f->in[1];
    ad_shape sa = ad_shape_of(a, A), sb = ad_shape_of(a, B), sy = ad_shape_of(a, f->out[0]);
    /* promote rank-1 operands the way MatMul does: [K] -> [1, K] for A, [K] -> [K, 1] for B */
    ad_shape pa = sa, pb = sb, py = sy;
    if (sa.rank == 1) {
        pa.rank = 2;
        pa.d[0] = 1;
        pa.d[1] = sa.d[0];
        A = ad_reshape(a, A, &pa);
    }
    if (sb.rank == 1) {
        pb.rank = 2;
        pb.d[0] = sb.d[0];
        pb.d[1] = 1;
        B = ad_reshape(a, B, &pb);
    }
    /* the output with the promoted axes restored: batch dims, M, N */
    int nb = (pa.rank > pb.rank ? pa.rank : pb.rank) - 2;
    py.rank = nb + 2;
    for (int d = 0; d < nb; d++) {
        int ia = d - (nb - (pa.rank - 2)), ib = d - (nb - (pb.rank - 2));
        int64_t da = ia >= 0 ? pa.d[ia] : 1, db = ib >= 0 ? pb.d[ib] : 1;
        py.d[d] = da > db ? da : db;
    }
    py.d[nb] = pa.d[pa.rank - 2];
    py.d[nb + 1] = pb.d[pb.rank - 1];
    int dy = f->dy[0];
    if (py.rank != sy.rank)
        dy = ad_reshape(a, dy, &py);
    if (ad_needs(a, f->in[0])) {
        ad_shape tb = swapped(&pb);
        int g = ad_op2(a, "MatMul", dy, batch_fit(a, swap_last(a, B, pb.rank), &tb, &py, nb, 1)); /* batch + [M, K] */
        ad_shape gs = py;
        gs.d[nb + 1] = pa.d[pa.rank - 1];
        g = ad_unbroadcast(a, g, &gs, &pa);
        if (sa.rank == 1)
            g = ad_reshape(a, g, &sa);
        ad_accum(a, f->in[0], g);
    }
    if (ad_needs(a, f->in[1])) {
        ad_shape ta = swapped(&pa);
        int g = ad_op2(a, "MatMul", batch_fit(a, swap_last(a, A, pa.rank), &ta, &py, nb, 0), dy); /* batch + [K, N] */
        ad_shape gs = py;
        gs.d[nb] = pb.d[pb.rank - 2];
        g = ad_unbroadcast(a, g, &gs, &pb);
        if (sb.rank == 1)
            g = ad_reshape(a, g, &sb);
        ad_accum(a, f->in[1], g);
    }
    return 0;
}

static int scaled(ad_ctx *a, int x, float s)
{
    return s == 1.0f ? x : ad_op2(a, "Mul", x, ad_const_f(a, s));
}

static int g_gemm(ad_ctx *a, const ad_fwd *f)
{
    const tern_graph_node *n = &a->g->nodes[f->index];
    int ta = (int)tern_graph_attr_int(n, "transA", 0), tb = (int)tern_graph_attr_int(n, "transB", 0);
    float alpha = tern_graph_attr_float(n, "alpha", 1.0f), beta = tern_graph_attr_float(n, "beta", 1.0f);
    int A = f->in[0], B = f->in[1], C = f->n_in > 2 ? f->in[2] : -1, dy = f->dy[0];
    if (ad_needs(a, A)) {
        /* op(A)' = dY op(B)^T; A' = op(A)' or its transpose */
        int g = ta ? ad_op2(a, "MatMul", tb ? ad_transpose(a, B, 2, (const int64_t[]){1, 0}) : B,
                            ad_transpose(a, dy, 2, (const int64_t[]){1, 0}))
                   : ad_op2(a, "MatMul", dy, tb ? B : ad_transpose(a, B, 2, (const int64_t[]){1, 0}));
        ad_accum(a, A, scaled(a, g, alpha));
    }
    if (ad_needs(a, B)) {
        /* op(B)' = op(A)^T dY; with transB, B' = dY^T op(A) */
        int g = tb ? ad_op2(a, "MatMul", ad_transpose(a, dy, 2, (const int64_t[]){1, 0}),
                            ta ? ad_transpose(a, A, 2, (const int64_t[]){1, 0}) : A)
                   : ad_op2(a, "MatMul", ta ? A : ad_transpose(a, A, 2, (const int64_t[]){1, 0}), dy);
        ad_accum(a, B, scaled(a, g, alpha));
    }
    if (C >= 0 && ad_needs(a, C)) {
        ad_shape sy = ad_shape_of(a, f->out[0]), sc = ad_shape_of(a, C);
        ad_accum(a, C, ad_unbroadcast(a, scaled(a, dy, beta), &sy, &sc));
    }
    return 0;
}

int grad_linear_rule(int op_id, ad_rule *out)
{
    switch (op_id) {
    case TERN_GOP_MATMUL:
        *out = g_matmul;
        return 1;
    case TERN_GOP_GEMM:
        *out = g_gemm;
        return 1;
    default:
        return 0;
    }
}
