/* The per-rank graphs the planner simulates, written as ONNX (onnx_writer.c) with every weight a graph input
 * (symbolic: shape only). One transformer layer as one tensor-parallel rank runs it (Megatron-style: QKV and the
 * MLP's first linears column-parallel, the output projections row-parallel, heads split over the ranks, key/value
 * heads replicated when TP exceeds them, the norms and residual adds on the sequence-parallel shard of T/tp
 * tokens), in two graphs: the forward, and the backward (each linear's dX = dY W^T and dW = X^T dY, attention's
 * backward, the norm and activation backward). Where a collective sits between two pieces (all-gather before
 * the QKV and MLP linears, reduce-scatter after the two row-parallel linears) the piece after it takes a new
 * graph input of the collective's output shape: the collective's time comes from the fabric, not from here.
 * Attention runs in key/query blocks of at most 2,048 (the fused tern.Attention's limit), causal blocks above
 * the diagonal skipped, the block results summed, as a flash-attention kernel does; the online-softmax
 * rescaling of the partial results is not in the graph (2 elementwise ops on [B, blk, D] per block, small
 * against the block's two matmuls). docs/planner.md, "What each graph holds", is the long form. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plan/plan_internal.h"
#include "graph/op_params.h"

#define ONNX_FLOAT 1
#define ONNX_INT64 7
#define ONNX_BF16 16
#define MAX_BLOCKS 64

int64_t plan_heads_per_rank(const tern_model_cfg *c, int tp) { return c->heads / tp; }

int64_t plan_kv_heads_per_rank(const tern_model_cfg *c, int tp)
{
    return c->kv_heads >= tp ? c->kv_heads / tp : 1;
}

typedef struct {
    plan_onnx *g;
    const tern_model_cfg *c;
    int E;         /* activation element type */
    int64_t T, Tsp, H, hq, hkv, D, F, mb, seq;
    int tp, ep;
} ctx;

static int in_n(ctx *x, int elem, int rank, const int64_t *d) { return plan_onnx_input(x->g, elem, rank, d); }
static int in1(ctx *x, int64_t a) { return in_n(x, x->E, 1, &a); }
static int in2(ctx *x, int64_t a, int64_t b)
{
    int64_t d[2] = {a, b};
    return in_n(x, x->E, 2, d);
}
static int in3(ctx *x, int elem, int64_t a, int64_t b, int64_t cc)
{
    int64_t d[3] = {a, b, cc};
    return in_n(x, elem, 3, d);
}
static int op1(ctx *x, const char *op, int a) { return plan_onnx_op(x->g, op, 1, &a, 0, NULL); }
static int op2(ctx *x, const char *op, int a, int b)
{
    int v[2] = {a, b};
    return plan_onnx_op(x->g, op, 2, v, 0, NULL);
}
static int mm(ctx *x, int a, int b) { return op2(x, "MatMul", a, b); }
static void out2(ctx *x, int id, int64_t a, int64_t b)
{
    int64_t d[2] = {a, b};
    plan_onnx_output(x->g, id, x->E, 2, d);
}
static void out3(ctx *x, int id, int elem, int64_t a, int64_t b, int64_t cc)
{
    int64_t d[3] = {a, b, cc};
    plan_onnx_output(x->g, id, elem, 3, d);
}
static int reshape(ctx *x, int v, int n, const int64_t *dims)
{
    int s = plan_onnx_const_i64(x->g, n, dims);
    return op2(x, "Reshape", v, s);
}
static int transpose(ctx *x, int v, int n, const int64_t *perm)
{
    plan_attr a = {.name = "perm", .kind = 3, .ints = perm, .nints = n};
    return plan_onnx_op(x->g, "Transpose", 1, &v, 1, &a);
}
static int slice(ctx *x, int v, int64_t axis, int64_t start, int64_t end)
{
    int in[4] = {v, plan_onnx_const_i64(x->g, 1, &start), plan_onnx_const_i64(x->g, 1, &end),
                 plan_onnx_const_i64(x->g, 1, &axis)};
    return plan_onnx_op(x->g, "Slice", 4, in, 0, NULL);
}
/* Between the activation type and fp32 (a no-op when the activations are fp32). */
static int cast(ctx *x, int v, int to)
{
    if (x->E == ONNX_FLOAT)
        return v;
    plan_attr a = {.name = "to", .kind = 1, .i = to};
    return plan_onnx_op(x->g, "Cast", 1, &v, 1, &a);
}
static int softmax(ctx *x, int v)
{
    plan_attr a = {.name = "axis", .kind = 1, .i = -1};
    return plan_onnx_op(x->g, "Softmax", 1, &v, 1, &a);
}
/* A reduction over the last axis, kept: opset 17's ReduceSum takes the axes as an input, ReduceMean (until
 * opset 18) as an attribute. */
static int reduce(ctx *x, const char *op, int v)
{
    int64_t ax = -1;
    plan_attr keep = {.name = "keepdims", .kind = 1, .i = 1};
    if (graph_reduce_axes_from_input(tern_op_lookup("", op), 17)) {
        int in[2] = {v, plan_onnx_const_i64(x->g, 1, &ax)};
        return plan_onnx_op(x->g, op, 2, in, 1, &keep);
    }
    plan_attr a[2] = {{.name = "axes", .kind = 3, .ints = &ax, .nints = 1}, keep};
    return plan_onnx_op(x->g, op, 1, &v, 2, a);
}

static int concat(ctx *x, int n, const int *v, int64_t axis)
{
    plan_attr a = {.name = "axis", .kind = 1, .i = axis};
    return plan_onnx_op(x->g, "Concat", n, v, 1, &a);
}
static int scalar(ctx *x, float f)
{
    int s = plan_onnx_const_f32(x->g, f);
    if (x->E == ONNX_FLOAT)
        return s;
    plan_attr a = {.name = "to", .kind = 1, .i = x->E}; /* folded to a constant by the compiler */
    return plan_onnx_op(x->g, "Cast", 1, &s, 1, &a);
}

/* Norm of rows of width H: RMSNorm (Llama) or LayerNorm (GPT-2, BERT). */
static int norm(ctx *x, int v)
{
    if (x->c->rms_norm) {
        int sq = op2(x, "Mul", v, v);
        int m = reduce(x, "ReduceMean", sq);
        int r = op1(x, "Sqrt", op2(x, "Add", m, scalar(x, 1e-5f)));
        return op2(x, "Mul", op2(x, "Div", v, r), in1(x, x->H));
    }
    int in[3] = {v, in1(x, x->H), in1(x, x->H)};
    plan_attr a[2] = {{.name = "axis", .kind = 1, .i = -1}, {.name = "epsilon", .kind = 2, .f = 1e-5f}};
    return plan_onnx_op(x->g, "LayerNormalization", 3, in, 2, a);
}

/* [m, k] x [k, n] with m split into batches of at most 4,096 rows: the compiler's GEMM keeps an output row
 * block's accumulators in SBUF and refuses m = 8,192 at n >= 1,024 (a batched MatMul of row chunks is the same
 * arithmetic, the chunks one after another). */
static int mm_rows(ctx *x, int a, int64_t m, int64_t k, int b, int64_t n)
{
    if (m <= 4096)
        return mm(x, a, b);
    int64_t ch = 4096;
    while (ch > 128 && m % ch)
        ch /= 2;
    if (m % ch)
        return mm(x, a, b);
    int64_t d3[3] = {m / ch, ch, k}, d2[2] = {m, n};
    return reshape(x, mm(x, reshape(x, a, 3, d3), b), 2, d2);
}

/* A linear layer of the rank's shard: [rows, k] x [k, n] (+ bias for GPT-2 and BERT). */
static int linear(ctx *x, int v, int64_t rows, int64_t k, int64_t n)
{
    int y = mm_rows(x, v, rows, k, in2(x, k, n), n);
    if (!x->c->rms_norm)
        y = op2(x, "Add", y, in1(x, n));
    return y;
}

/* Rows of `heads` heads [T, heads*D] -> [mb*heads, seq, D] and back. */
static int split_heads(ctx *x, int v, int64_t heads)
{
    int64_t d4[4] = {x->mb, x->seq, heads, x->D}, p[4] = {0, 2, 1, 3}, d3[3] = {x->mb * heads, x->seq, x->D};
    return reshape(x, transpose(x, reshape(x, v, 4, d4), 4, p), 3, d3);
}
static int merge_heads(ctx *x, int v, int64_t heads)
{
    int64_t d4[4] = {x->mb, heads, x->seq, x->D}, p[4] = {0, 2, 1, 3}, d2[2] = {x->T, heads * x->D};
    return reshape(x, transpose(x, reshape(x, v, 4, d4), 4, p), 2, d2);
}

static int64_t block_size(int64_t seq)
{
    if (seq <= 2048)
        return seq;
    int64_t b = 2048;
    while (b > 128 && seq % b)
        b /= 2;
    return seq % b ? seq : b;
}

static int gelu(ctx *x, int v)
{
    int e = op1(x, "Erf", op2(x, "Div", v, scalar(x, 1.41421356f)));
    return op2(x, "Mul", op2(x, "Mul", v, scalar(x, 0.5f)), op2(x, "Add", e, scalar(x, 1.0f)));
}

/* The MLP of T rows: SwiGLU or GELU; Mixtral: a router and the experts, each on T*k/E rows (balanced routing). */
static int mlp(ctx *x, int b, int64_t rows)
{
    if (x->c->gated_mlp) {
        int gt = linear(x, b, rows, x->H, x->F), up = linear(x, b, rows, x->H, x->F);
        int s = op2(x, "Mul", gt, op1(x, "Sigmoid", gt));
        return linear(x, op2(x, "Mul", s, up), rows, x->F, x->H);
    }
    return linear(x, gelu(x, linear(x, b, rows, x->H, x->F)), rows, x->F, x->H);
}

/* The attention of [B, seq, D] operands in blocks (the whole-model graph): block pairs over the causal triangle,
 * each a fused attention, summed per query block, the query blocks concatenated. */
static int attention_blocks(ctx *x, int q3, int kt, int v3)
{
    int64_t blk = block_size(x->seq), nb = x->seq / blk;
    if (nb > MAX_BLOCKS)
        nb = MAX_BLOCKS; /* unreachable for seq <= 131072 */
    int scale = plan_onnx_const_f32(x->g, (float)(1.0 / sqrt((double)x->D)));
    int rows[MAX_BLOCKS];
    for (int64_t qb = 0; qb < nb; qb++) {
        int qs = nb > 1 ? slice(x, q3, 1, qb * blk, (qb + 1) * blk) : q3, acc = -1;
        for (int64_t kb = 0; kb < nb && (!x->c->causal || kb <= qb); kb++) {
            int ks = nb > 1 ? slice(x, kt, 2, kb * blk, (kb + 1) * blk) : kt;
            int vs = nb > 1 ? slice(x, v3, 1, kb * blk, (kb + 1) * blk) : v3;
            int p = softmax(x, op2(x, "Mul", mm(x, qs, ks), scale));
            int o = mm(x, p, vs);
            acc = acc < 0 ? o : op2(x, "Add", acc, o);
        }
        rows[qb] = acc;
    }
    return nb > 1 ? concat(x, (int)nb, rows, 1) : rows[0];
}

/* One block pair of the forward: a fused attention of B heads, blk queries against blk keys, added to the query
 * block's running sum. */
static void attn_block_fwd(ctx *x, int64_t B, int64_t blk)
{
    int qs = in3(x, ONNX_FLOAT, B, blk, x->D), kts = in3(x, ONNX_FLOAT, B, x->D, blk);
    int vs = in3(x, ONNX_FLOAT, B, blk, x->D), acc = in3(x, ONNX_FLOAT, B, blk, x->D);
    int scale = plan_onnx_const_f32(x->g, (float)(1.0 / sqrt((double)x->D)));
    int p = softmax(x, op2(x, "Mul", mm(x, qs, kts), scale));
    out3(x, op2(x, "Add", acc, mm(x, p, vs)), ONNX_FLOAT, B, blk, x->D);
}

/* One block pair of the backward: the fused flash-attention backward tern.AttentionGrad (the compiler's
 * lower_attention_bwd.c) of B query heads, blk queries against blk keys, from the forward's Q, K, V, output and
 * per-row logsumexp and the output gradient; it recomputes the probabilities per 128 x 128 tile, forms delta =
 * rowsum(dO * O) itself, and sums the grouped-query heads' dK and dV onto their shared K/V head on chip. The
 * composed kernel is one pass over all block pairs, whose dK / dV stay in PSUM over the query tiles and dQ in
 * SBUF over the key tiles, so the block pair's gradients are not summed through HBM here (as the unfused graph
 * did). Diagonal pairs are timed as full blocks, an overestimate (docs/planner.md). */
static void attn_block_bwd(ctx *x, int64_t B, int64_t blk)
{
    int64_t rep = x->hkv < x->hq ? x->hq / x->hkv : 1, mb = B / x->hq;
    if (B % x->hq)
        mb = B, rep = 1;
    int64_t hq = B / mb, hkv = hq / rep;
    int64_t qd[4] = {mb, hq, blk, x->D}, kd[4] = {mb, hkv, blk, x->D}, ld[4] = {mb, hq, blk, 1};
    int in[6] = {in_n(x, ONNX_FLOAT, 4, qd), in_n(x, ONNX_FLOAT, 4, kd), in_n(x, ONNX_FLOAT, 4, kd),
                 in_n(x, ONNX_FLOAT, 4, qd), in_n(x, ONNX_FLOAT, 4, qd), in_n(x, ONNX_FLOAT, 4, ld)};
    plan_attr at[3] = {{.name = "scale", .kind = 2, .f = (float)(1.0 / sqrt((double)x->D))},
                       {.name = "causal", .kind = 1, .i = 0},
                       {.name = "kv_rep", .kind = 1, .i = rep}};
    int g = plan_onnx_node(x->g, "tern", "AttentionGrad", 6, in, 3, 3, at);
    const int64_t *shape[3] = {qd, kd, kd};
    for (int k = 0; k < 3; k++)
        plan_onnx_output(x->g, g + k, ONNX_FLOAT, 4, shape[k]);
}

/* Mixture of experts, balanced routing: each of the E experts takes te = ceil(T k / E) of the T x k routed rows.
 * Dispatch is a Gather of the token rows in expert order (indices a graph input: the router's top-k is data), the
 * combine a Gather back into token order, the k results weighted by the router's probabilities and summed. With
 * expert parallelism over ep ranks the dispatched rows leave the graph (the all-to-all, timed on the fabric) and
 * each of the rank's E / ep experts takes ep x te rows from the group; its outputs go back by the second
 * all-to-all. */
static int moe_fwd(ctx *x, int b)
{
    int64_t E = x->c->experts, k = x->c->experts_per_tok, te = (x->T * k + E - 1) / E, El = E / x->ep;
    int router = softmax(x, mm_rows(x, b, x->T, x->H, in2(x, x->H, E), E));
    out2(x, router, x->T, E);
    int64_t nd = E * te;
    int disp = op2(x, "Gather", b, in_n(x, ONNX_INT64, 1, &nd)); /* [E te, H] in expert order */
    int outs[256], no = 0;
    if (x->ep > 1)
        out2(x, disp, nd, x->H); /* the dispatch all-to-all */
    for (int64_t e = 0; e < El && no < 256; e++) {
        int64_t rows = x->ep > 1 ? x->ep * te : te;
        int be = x->ep > 1 ? in2(x, rows, x->H) : slice(x, disp, 0, e * te, (e + 1) * te);
        int eo = mlp(x, be, rows);
        if (x->ep > 1)
            out2(x, eo, rows, x->H); /* the combine all-to-all */
        else
            outs[no++] = eo;
    }
    int back = x->ep > 1 ? in2(x, nd, x->H) : concat(x, no, outs, 0);
    /* the combine: for each of the k choices, a Gather of the T tokens' rows, weighted by their probability */
    int acc = -1;
    for (int64_t j = 0; j < k; j++) {
        int64_t t = x->T;
        int tj = op2(x, "Mul", op2(x, "Gather", back, in_n(x, ONNX_INT64, 1, &t)), in2(x, x->T, 1));
        acc = acc < 0 ? tj : op2(x, "Add", acc, tj);
    }
    return acc;
}

/* One layer forward. x_sp: the layer input on the sequence-parallel shard [Tsp, H]. connected: chain the pieces
 * through real values (tp = 1, the whole-model graph) instead of collective outputs as new inputs. */
static int layer_fwd(ctx *x, int x_sp, int connected)
{
    int n1 = norm(x, x_sp);
    int a = n1;
    if (!connected) {
        out2(x, n1, x->Tsp, x->H);
        a = in2(x, x->T, x->H); /* all-gather of n1 over the TP group */
    }
    int q = linear(x, a, x->T, x->H, x->hq * x->D);
    int k = linear(x, a, x->T, x->H, x->hkv * x->D);
    int v = linear(x, a, x->T, x->H, x->hkv * x->D);
    if (x->c->rms_norm) { /* rotary embedding: x * cos + rotate(x) * sin, as two products and a sum */
        q = op2(x, "Add", op2(x, "Mul", q, in2(x, x->T, x->hq * x->D)), op2(x, "Mul", q, in2(x, x->T, x->hq * x->D)));
        k = op2(x, "Add", op2(x, "Mul", k, in2(x, x->T, x->hkv * x->D)),
                op2(x, "Mul", k, in2(x, x->T, x->hkv * x->D)));
    }
    int q3 = cast(x, split_heads(x, q, x->hq), ONNX_FLOAT);
    int k3 = split_heads(x, k, x->hkv), v3 = split_heads(x, v, x->hkv);
    if (x->hkv < x->hq) { /* grouped-query: each K/V head serves hq/hkv query heads */
        int64_t rep[3] = {x->hq / x->hkv, 1, 1};
        int r = plan_onnx_const_i64(x->g, 3, rep);
        k3 = op2(x, "Tile", k3, r);
        v3 = op2(x, "Tile", v3, r);
    }
    int64_t pk[3] = {0, 2, 1};
    int kt = cast(x, transpose(x, k3, 3, pk), ONNX_FLOAT);
    v3 = cast(x, v3, ONNX_FLOAT);
    int att;
    if (connected) {
        att = attention_blocks(x, q3, kt, v3);
    } else { /* the blocks are their own graph (PLAN_G_ATTN_FWD), composed by count */
        int64_t Bh = x->mb * x->hq;
        out3(x, q3, ONNX_FLOAT, Bh, x->seq, x->D);
        out3(x, kt, ONNX_FLOAT, Bh, x->D, x->seq);
        out3(x, v3, ONNX_FLOAT, Bh, x->seq, x->D);
        att = in3(x, ONNX_FLOAT, Bh, x->seq, x->D);
    }
    int ctxv = merge_heads(x, cast(x, att, x->E), x->hq);
    int o = linear(x, ctxv, x->T, x->hq * x->D, x->H);
    int r_in = o;
    if (!connected) {
        out2(x, o, x->T, x->H);
        r_in = in2(x, x->Tsp, x->H); /* reduce-scatter of o */
    }
    int r = op2(x, "Add", x_sp, r_in);
    int n2 = norm(x, r);
    int b = n2;
    if (!connected) {
        out2(x, n2, x->Tsp, x->H);
        b = in2(x, x->T, x->H);
    }
    int m = x->c->experts > 1 ? moe_fwd(x, b) : mlp(x, b, x->T);
    int m_in = m;
    if (!connected) {
        out2(x, m, x->T, x->H);
        m_in = in2(x, x->Tsp, x->H);
    }
    return op2(x, "Add", r, m_in);
}

/* Backward of a linear [rows, k] x [k, n]: dX = dY W^T and dW = X^T dY (both outputs). Returns dX. X is the
 * forward's input [rows, k] (xin; -1: a new graph input), shared by the linears that read the same input (Q, K
 * and V; gate and up), and X^T a Transpose node, as an autograd graph has them. */
static int linear_bwd_x(ctx *x, int dy, int64_t rows, int64_t k, int64_t n, int xin)
{
    int dx = mm_rows(x, dy, rows, n, in2(x, n, k), k);
    int64_t p[2] = {1, 0};
    int dw = mm(x, transpose(x, xin >= 0 ? xin : in2(x, rows, k), 2, p), dy);
    out2(x, op2(x, "Add", dw, in2(x, k, n)), k, n); /* accumulated over row chunks and micro-batches */
    return dx;
}
static int linear_bwd(ctx *x, int dy, int64_t rows, int64_t k, int64_t n)
{
    return linear_bwd_x(x, dy, rows, k, n, -1);
}

static int norm_bwd(ctx *x, int dy, int64_t rows)
{
    int xin = in2(x, rows, x->H);
    int g = op2(x, "Mul", dy, in1(x, x->H));
    int dot = reduce(x, "ReduceMean", op2(x, "Mul", g, xin));
    int rstd = in2(x, rows, 1);
    int dx = op2(x, "Mul", op2(x, "Sub", g, op2(x, "Mul", xin, dot)), rstd);
    if (!x->c->rms_norm)
        dx = op2(x, "Sub", dx, reduce(x, "ReduceMean", g));
    int dgamma = reduce(x, "ReduceSum", op2(x, "Mul", dy, xin));
    out2(x, dgamma, rows, 1);
    return dx;
}

static int mlp_bwd(ctx *x, int dy, int64_t rows)
{
    int dm = linear_bwd(x, dy, rows, x->F, x->H);
    if (x->c->gated_mlp) {
        int gt = in2(x, rows, x->F), up = in2(x, rows, x->F);
        int sig = op1(x, "Sigmoid", gt);
        int s = op2(x, "Mul", gt, sig);
        int du = op2(x, "Mul", dm, s);
        int ds = op2(x, "Mul", dm, up);
        int dsig = op2(x, "Add", sig, op2(x, "Mul", s, op2(x, "Sub", scalar(x, 1.0f), sig)));
        int dg = op2(x, "Mul", ds, dsig);
        int xin = in2(x, rows, x->H); /* the MLP input, read by gate and up */
        return op2(x, "Add", linear_bwd_x(x, dg, rows, x->H, x->F, xin), linear_bwd_x(x, du, rows, x->H, x->F, xin));
    }
    int h = in2(x, rows, x->F);
    int e = op1(x, "Erf", op2(x, "Div", h, scalar(x, 1.41421356f)));
    int pdf = op1(x, "Exp", op2(x, "Mul", op2(x, "Mul", h, h), scalar(x, -0.5f)));
    int dg = op2(x, "Mul", dm, op2(x, "Add", op2(x, "Mul", op2(x, "Add", e, scalar(x, 1.0f)), scalar(x, 0.5f)),
                                    op2(x, "Mul", h, pdf)));
    return linear_bwd(x, dg, rows, x->H, x->F);
}

static void layer_bwd(ctx *x)
{
    /* MLP (the reduce-scattered output's gradient arrives all-gathered: [T, H]) */
    int dy = in2(x, x->T, x->H);
    if (x->c->experts > 1) {
        /* the combine's backward: each routed row's gradient is its token's, weighted (a Gather into expert
         * order), and the router weights' gradient the row-wise dot with the expert output; the experts'
         * backward (after the all-to-all under ep); the dispatch's backward: the rows gathered back into token
         * order and their k copies summed; the router's linear */
        int64_t E = x->c->experts, k = x->c->experts_per_tok, te = (x->T * k + E - 1) / E, El = E / x->ep;
        int64_t nd = E * te;
        int gy = op2(x, "Gather", dy, in_n(x, ONNX_INT64, 1, &nd));
        int dyr = op2(x, "Mul", gy, in2(x, nd, 1));
        out2(x, reduce(x, "ReduceSum", op2(x, "Mul", gy, in2(x, nd, x->H))), nd, 1);
        int outs[256], no = 0;
        if (x->ep > 1)
            out2(x, dyr, nd, x->H);
        for (int64_t e = 0; e < El && no < 256; e++) {
            int64_t rows = x->ep > 1 ? x->ep * te : te;
            int de = x->ep > 1 ? in2(x, rows, x->H) : slice(x, dyr, 0, e * te, (e + 1) * te);
            int dxe = mlp_bwd(x, de, rows);
            if (x->ep > 1)
                out2(x, dxe, rows, x->H);
            else
                outs[no++] = dxe;
        }
        int back = x->ep > 1 ? in2(x, nd, x->H) : concat(x, no, outs, 0);
        int dxm = -1;
        for (int64_t j = 0; j < k; j++) {
            int64_t t = x->T;
            int gj = op2(x, "Gather", back, in_n(x, ONNX_INT64, 1, &t));
            dxm = dxm < 0 ? gj : op2(x, "Add", dxm, gj);
        }
        int dr = linear_bwd(x, softmax(x, in2(x, x->T, E)), x->T, x->H, E);
        out2(x, op2(x, "Add", dr, dxm), x->T, x->H);
    } else {
        out2(x, mlp_bwd(x, dy, x->T), x->T, x->H);
    }
    int dn2 = norm_bwd(x, in2(x, x->Tsp, x->H), x->Tsp);
    out2(x, op2(x, "Add", dn2, in2(x, x->Tsp, x->H)), x->Tsp, x->H);
    /* attention: output projection, then the blocks, then QKV */
    int dctx = linear_bwd(x, in2(x, x->T, x->H), x->T, x->hq * x->D, x->H);
    int64_t Bh = x->mb * x->hq;
    int dO = cast(x, split_heads(x, dctx, x->hq), ONNX_FLOAT);
    /* the blocks are their own graph (PLAN_G_ATTN_BWD, tern.AttentionGrad, which forms delta = rowsum(dO * O)
     * and sums the grouped-query heads' dK and dV onto their K/V head itself); here dO and the block sums */
    out3(x, dO, ONNX_FLOAT, Bh, x->seq, x->D);
    int dQ = cast(x, in3(x, ONNX_FLOAT, Bh, x->seq, x->D), x->E);
    int dK = cast(x, in3(x, ONNX_FLOAT, x->mb * x->hkv, x->seq, x->D), x->E);
    int dV = cast(x, in3(x, ONNX_FLOAT, x->mb * x->hkv, x->seq, x->D), x->E);
    int dq2 = merge_heads(x, dQ, x->hq), dk2 = merge_heads(x, dK, x->hkv), dv2 = merge_heads(x, dV, x->hkv);
    if (x->c->rms_norm) { /* rotary backward: the same two products and sum */
        dq2 = op2(x, "Add", op2(x, "Mul", dq2, in2(x, x->T, x->hq * x->D)),
                  op2(x, "Mul", dq2, in2(x, x->T, x->hq * x->D)));
        dk2 = op2(x, "Add", op2(x, "Mul", dk2, in2(x, x->T, x->hkv * x->D)),
                  op2(x, "Mul", dk2, in2(x, x->T, x->hkv * x->D)));
    }
    int ain = in2(x, x->T, x->H); /* the QKV input, read by the three linears */
    int da = op2(x, "Add", linear_bwd_x(x, dq2, x->T, x->H, x->hq * x->D, ain),
                 op2(x, "Add", linear_bwd_x(x, dk2, x->T, x->H, x->hkv * x->D, ain),
                     linear_bwd_x(x, dv2, x->T, x->H, x->hkv * x->D, ain)));
    out2(x, da, x->T, x->H);
    int dn1 = norm_bwd(x, in2(x, x->Tsp, x->H), x->Tsp);
    out2(x, op2(x, "Add", dn1, in2(x, x->Tsp, x->H)), x->Tsp, x->H);
}

/* An embedding lookup of vl rows: tables above the DMA gather's 65,535 rows are split into parts, each looked
 * up and the parts summed (as the vocabulary-parallel embedding sums its shards' masked lookups). */
static int embed(ctx *x, int64_t vl, int ids)
{
    int64_t parts = (vl + 65534) / 65535, rows = (vl + parts - 1) / parts;
    int e = -1;
    for (int64_t i = 0; i < parts; i++) {
        int g = op2(x, "Gather", in2(x, rows, x->H), ids);
        e = e < 0 ? g : op2(x, "Add", e, g);
    }
    return e;
}

/* Embedding (vocabulary-parallel: each rank gathers from its V/tp rows), final norm, LM head and the loss's
 * softmax over the rank's vocabulary shard. Returns the softmax (fp32 [T, V/tp]). */
static int head_fwd(ctx *x, int h_sp, int connected, int *emb)
{
    int64_t vl = (x->c->vocab + x->tp - 1) / x->tp;
    int64_t td = x->T;
    int ids = in_n(x, ONNX_INT64, 1, &td);
    int e = embed(x, vl, ids);
    if (x->c->family == TERN_MODEL_GPT2 || x->c->family == TERN_MODEL_BERT)
        e = op2(x, "Add", e, in2(x, x->T, x->H)); /* position (and BERT token-type) embeddings */
    *emb = e;
    int n = norm(x, h_sp);
    int a = n;
    if (!connected) {
        out2(x, e, x->T, x->H);
        out2(x, n, x->Tsp, x->H);
        a = in2(x, x->T, x->H);
    }
    int logits = cast(x, mm_rows(x, a, x->T, x->H, in2(x, x->H, vl), vl), ONNX_FLOAT);
    return softmax(x, logits);
}

static void head_bwd(ctx *x)
{
    int64_t vl = (x->c->vocab + x->tp - 1) / x->tp;
    int p = in2(x, x->T, vl), onehot = in2(x, x->T, vl);
    int dl = op2(x, "Sub", p, onehot);
    int da = linear_bwd(x, dl, x->T, x->H, vl);
    out2(x, da, x->T, x->H);
    int dn = norm_bwd(x, in2(x, x->Tsp, x->H), x->Tsp);
    out2(x, dn, x->Tsp, x->H);
}

tern_status plan_build_graph(const tern_model_cfg *c, const plan_shape *s, uint8_t **buf, size_t *len,
                             tern_error *err)
{
    plan_onnx g;
    plan_onnx_init(&g, s->fp32 ? ONNX_FLOAT : ONNX_BF16);
    ctx x = {.g = &g, .c = c, .E = g.elem, .tp = s->tp, .ep = s->ep > 1 ? s->ep : 1, .mb = s->mb, .seq = s->seq};
    x.T = s->mb * s->seq;
    x.Tsp = x.T % s->tp ? x.T : x.T / s->tp;
    x.H = c->hidden;
    x.hq = plan_heads_per_rank(c, s->tp);
    x.hkv = plan_kv_heads_per_rank(c, s->tp);
    x.D = c->head_dim;
    x.F = c->ffn / s->tp;
    int emb;
    switch (s->kind) {
    case PLAN_G_ATTN_FWD: attn_block_fwd(&x, s->mb, s->seq); break;
    case PLAN_G_ATTN_BWD: attn_block_bwd(&x, s->mb, s->seq); break;
    case PLAN_G_ROWS_FWD: {
        int xin = in2(&x, x.Tsp, x.H);
        out2(&x, layer_fwd(&x, xin, 0), x.Tsp, x.H);
        break;
    }
    case PLAN_G_ROWS_BWD: layer_bwd(&x); break;
    case PLAN_G_HEAD_FWD: {
        int p = head_fwd(&x, in2(&x, x.Tsp, x.H), 0, &emb);
        int64_t vl = (c->vocab + s->tp - 1) / s->tp;
        int64_t d[2] = {x.T, vl};
        plan_onnx_output(&g, p, ONNX_FLOAT, 2, d);
        break;
    }
    case PLAN_G_HEAD_BWD: head_bwd(&x); break;
    case PLAN_G_MODEL_FWD: {
        /* the whole model on one core: embedding, every layer chained, final norm, head */
        int64_t td = x.T, vl = c->vocab;
        int ids = in_n(&x, ONNX_INT64, 1, &td);
        int h = embed(&x, vl, ids);
        if (c->family == TERN_MODEL_GPT2 || c->family == TERN_MODEL_BERT)
            h = op2(&x, "Add", h, in2(&x, x.T, x.H));
        for (int l = 0; l < s->layers; l++)
            h = layer_fwd(&x, h, 1);
        int n = norm(&x, h);
        int p = softmax(&x, cast(&x, mm_rows(&x, n, x.T, x.H, in2(&x, x.H, vl), vl), ONNX_FLOAT));
        int64_t d[2] = {x.T, vl};
        plan_onnx_output(&g, p, ONNX_FLOAT, 2, d);
        break;
    }
    }
    tern_status st = plan_onnx_finish(&g, buf, len, err);
    plan_onnx_free(&g);
    return st;
}

double plan_layer_activation_bytes(const tern_model_cfg *c, int tp, int64_t mb, int64_t seq, int fp32,
                                   int recompute)
{
    double e = fp32 ? 4 : 2, T = (double)(mb * seq), H = (double)c->hidden;
    double Tsp = (mb * seq) % tp ? T : T / tp;
    if (recompute) /* full recomputation keeps only the layer input (on the sequence-parallel shard) */
        return Tsp * H * e;
    double hq = (double)plan_heads_per_rank(c, tp), hkv = (double)plan_kv_heads_per_rank(c, tp);
    double D = (double)c->head_dim, F = (double)(c->ffn / tp);
    double k = c->experts > 1 ? (double)c->experts_per_tok : 1;
    /* what the backward graph reads that the forward made: the two norm inputs and their 1/rms (SP shard), the
     * QKV linears' input (all-gathered), Q, K, V (fp32 for attention), the attention output and its merged rows,
     * the softmax statistics, the MLP input (all-gathered), the MLP's first linears' outputs and its product */
    double b = 2 * Tsp * H * e + 2 * Tsp * 4;
    b += T * H * e;
    b += T * (hq + 2 * hkv) * D * 4;
    b += T * hq * D * (4 + e) + T * hq * 4;
    b += T * H * e;
    b += k * T * F * e * (c->gated_mlp ? 3 : 2);
    return b;
}

void plan_composition(const tern_model_cfg *c, int tp, int64_t mb, int64_t seq, plan_compose *out)
{
    int64_t T = mb * seq, r = T;
    if (T > 4096) {
        r = 4096;
        while (r > 128 && T % r)
            r /= 2;
        if (T % r)
            r = T;
    }
    out->rows = r;
    out->chunks = T / r;
    out->blk = block_size(seq);
    int64_t nb = seq / out->blk;
    out->pairs = c->causal ? nb * (nb + 1) / 2 : nb * nb;
    out->B = mb * plan_heads_per_rank(c, tp);
}
