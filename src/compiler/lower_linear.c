/* Linear layers. The fast rule (matmul.linear): MatMul, tern.MatMulBias and the default Gemm with a constant
 * 2-D weight through the fused linear kernel (bias, activation, residual and layer-norm epilogues) or, for two
 * run-time operands, the tiled GEMM with numpy batch broadcasting. The general rule: Gemm with every attribute
 * (transA, transB, alpha, beta, a broadcast C). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "compiler/lower_tiles.h"
#include "graph/graph_internal.h"
#include "graph/op_params.h"

/* ---- Gemm with every attribute ---- */

static int lower_gemm(compile_ctx *c)
{
    const tern_graph_node *n = cc_node(c);
    cc_value *a = cc_in(c, 0), *b = cc_in(c, 1), *cv = cc_in(c, 2);
    cc_value *y = cc_out(c, 0, TERN_DTYPE_FP32);
    if (!a || !b || !y)
        return 1;
    if (a->rank != 2 || b->rank != 2) {
        cc_fail(c, TERN_ERR_INVALID, "Gemm of ranks %d and %d", a->rank, b->rank);
        return 1;
    }
    int ta = (int)tern_graph_attr_int(n, "transA", 0), tb = (int)tern_graph_attr_int(n, "transB", 0);
    float alpha = tern_graph_attr_float(n, "alpha", 1.0f), beta = tern_graph_attr_float(n, "beta", 1.0f);
    uint64_t M = (uint64_t)a->dims[ta ? 1 : 0], K = (uint64_t)a->dims[ta ? 0 : 1];
    uint64_t N = (uint64_t)b->dims[tb ? 0 : 1];
    tern_dtype mdt = c->o->matmul_dtype;
    /* lhsT [K, M] and rhs [K, N] in the matmul dtype */
    tern_view lhsT = cc_temp(c, mdt, K, M);
    if (ta)
        cc_copy(c, lhsT, cc_view2d(c, a, 0, K, M, M));
    else
        tern_lib_transpose(c->k, lhsT, cc_view2d(c, a, 0, M, K, K));
    tern_view rhs;
    int rhs_tmp = 0;
    if (b->host) {
        rhs = cc_const2d(c, b->host, mdt, K, N, tb);
    } else {
        rhs = cc_temp(c, mdt, K, N);
        rhs_tmp = 1;
        if (tb)
            tern_lib_transpose(c->k, rhs, cc_view2d(c, b, 0, N, K, K));
        else
            cc_copy(c, rhs, cc_view2d(c, b, 0, K, N, N));
    }
    tern_gemm_opts go;
    tern_gemm_opts_default(&go);
    go.acc_dtype = TERN_DTYPE_FP32;
    go.tiles_in_block_m = 8;
    int epilogue = alpha != 1.0f || (cv && beta != 0.0f);
    tern_view prod = epilogue ? cc_temp(c, TERN_DTYPE_FP32, M, N) : cc_view2d(c, y, 0, M, N, N);
    tern_lib_gemm(c->k, prod, lhsT, rhs, &go);
    c->model_flops += 2.0 * (double)M * (double)N * (double)K;
    tern_kernel_release(c->k, lhsT);
    if (rhs_tmp)
        tern_kernel_release(c->k, rhs);
    if (epilogue) {
        cc_value pv;
        memset(&pv, 0, sizeof pv);
        pv.dt = TERN_DTYPE_FP32;
        pv.flat = prod;
        pv.rank = 2;
        pv.dims[0] = (int64_t)M;
        pv.dims[1] = (int64_t)N;
        pv.numel = M * N;
        pv.placed = 1;
        tern_view yv = cc_view2d(c, y, 0, 1, M * N, M * N);
        if (cv && beta != 0.0f) {
            cc_value tcb;
            cc_value *cb = tile_bcast(c, cv, y, &tcb);
            if (cb) {
                tern_view cbv = cc_view2d(c, cb, 0, 1, M * N, M * N);
                tern_lib_scalar(c->k, yv, cc_view2d(c, &pv, 0, 1, M * N, M * N), TERN_ALU_MULT, alpha);
                tern_view ct = cc_temp(c, TERN_DTYPE_FP32, 1, M * N);
                tern_lib_scalar(c->k, ct, cbv, TERN_ALU_MULT, beta);
                tern_lib_binary(c->k, yv, yv, ct, TERN_ALU_ADD);
                tern_kernel_release(c->k, ct);
                tile_bcast_free(c, &tcb, cb);
            }
        } else {
            tern_lib_scalar(c->k, yv, cc_view2d(c, &pv, 0, 1, M * N, M * N), TERN_ALU_MULT, alpha);
        }
        tern_kernel_release(c->k, prod);
    }
    return 1;
}

/* ---- the fast special cases (tried before this file's general rules; each applies function says why it
 * declines, and a node without input 0 is taken so that the rule reports it) ---- */

/* Contractions up to this length use the fused linear kernel (its row tile of the transposed input stays in
 * SBUF; tern_lib_linear refuses K of about 11,000 and more on NeuronCore-v2); longer ones the HBM route. */
#define LINEAR_MAX_K CC_LINEAR_MAX_K

/* out[M, N] = a[M, K] @ w where w is [K, N] (w_view, already in the matmul dtype): a is transposed on chip into
 * the matmul dtype, then the tutorial-blocked GEMM runs. */
#define LINEAR_GROUP_MAX 8 /* linear layers lowered as one GEMM (linear_group) */

/* A GEMM's transposed input, when only this GEMM reads it, is made on chip, tile by tile as the GEMM needs it
 * (tern_lib_gemm_multi_rows: the same instructions per 128 x 128 block as tern_lib_transpose, so the same bits),
 * instead of going through HBM (a write and a read of the input's size), when the outputs side by side span at
 * most two N blocks of the GEMM's: the tiles are made once per N block, so a second block repeats the transposes
 * (TensorE and a VectorE copy of the input's size) that the HBM route makes once; on a v2 core that VectorE copy
 * takes about as long as the write and read through HBM it saves, so wider outputs keep the HBM route. */
static int transpose_on_chip(const compile_ctx *c, const tern_gemm_opts *go, uint64_t N)
{
    return N <= 2 * (uint64_t)c->cfg.moving_free_max * go->tiles_in_block_n;
}

/* The rows per tern_lib_gemm_multi_rows call for an [M, K] input a (dtype adt) and N output columns side by side
 * (dtype odt): its SBUF per partition (the fp32 accumulators of every row block across K blocks, a K block's
 * weight and lhsT tiles, the input's strips of 512 columns, an output row being packed) within the SBUF, less
 * 8 KiB for what else is live; halved until it fits (each call then streams the weights again: the bits do not
 * depend on the row blocks). 0: not even one row block fits (the HBM route then). */
static uint64_t rows_per_call(const compile_ctx *c, const tern_gemm_opts *go, uint64_t M, uint64_t K, uint64_t N,
                              tern_dtype adt, tern_dtype odt)
{
    const uint64_t TM = c->cfg.pe_cols, TK = c->cfg.pe_rows, TN = c->cfg.moving_free_max;
    const uint64_t BM = TM * go->tiles_in_block_m, BN = TN * go->tiles_in_block_n, BK = TK * go->tiles_in_block_k;
    const uint64_t bn = N < BN ? N : BN, tk = (K < BK ? K + TK - 1 : BK) / TK, md = tern_dtype_size(c->o->matmul_dtype);
    const uint64_t budget = c->cfg.sbuf_partition_bytes - 8192;
    for (uint64_t R = M; R >= 1; R = R > BM ? (R / 2 + BM - 1) / BM * BM : 0) {
        uint64_t rb = R < BM ? R : BM, nbm = (R + BM - 1) / BM;
        uint64_t accs = K > BK ? nbm * go->tiles_in_block_m * bn * 4 : go->tiles_in_block_m * bn * tern_dtype_size(odt);
        uint64_t strips = (rb + TM - 1) / TM * TK * 4 * tern_dtype_size(adt); /* tern_lib_transpose's 512 columns */
        uint64_t need = accs + tk * bn * md + tk * rb * md + strips + bn * tern_dtype_size(odt);
        if (need <= budget)
            return R;
        if (R <= BM)
            break;
    }
    return 0;
}

static void matmul2d(compile_ctx *c, tern_view out, tern_view a, tern_view w, uint64_t M, uint64_t K, uint64_t N)
{
    tern_dtype mdt = c->o->matmul_dtype;
    tern_gemm_opts go;
    tern_gemm_opts_default(&go);
    go.acc_dtype = TERN_DTYPE_FP32;
    /* SBUF accumulators in fp32 need smaller blocks than the tutorial's bf16 ones. */
    go.tiles_in_block_m = 8;
    uint64_t R = transpose_on_chip(c, &go, N)
                     ? rows_per_call(c, &go, M, K, N, (tern_dtype)a.ap.dtype, (tern_dtype)out.ap.dtype)
                     : 0;
    if (R) {
        for (uint64_t r0 = 0; r0 < M && cc_ok(c); r0 += R) {
            uint64_t r1 = r0 + R < M ? r0 + R : M;
            tern_view o = tern_view_block(c->k, out, r0, r1, 0, N), ar = tern_view_block(c->k, a, r0, r1, 0, K);
            tern_lib_gemm_multi_rows(c->k, 1, &o, ar, mdt, &w, &go);
        }
    } else {
        tern_view aT = cc_temp(c, mdt, K, M);
        tern_lib_transpose(c->k, aT, a);
        tern_lib_gemm(c->k, out, aT, w, &go);
        tern_kernel_release(c->k, aT);
    }
    c->model_flops += 2.0 * (double)M * (double)N * (double)K;
}

/* The last node after the current one that is a MatMul reading value id as its 2-D input 0 against a run-time
 * 2-D weight (the path below that transposes input 0 through matmul2d); -1 when none. */
static int later_runtime_linear(compile_ctx *c, int id)
{
    const tern_graph *g = c->g;
    int last = -1, nn = tern_graph_node_count(g);
    for (int j = c->node + 1; j < nn; j++) {
        const tern_graph_node *n = tern_graph_node_at(g, j);
        if (n->op_id != TERN_GOP_MATMUL || n->n_inputs < 2 || n->inputs[0] != id || n->inputs[1] < 0)
            continue;
        if (n->n_outputs > 0 && n->outputs[0] >= 0 && c->v[n->outputs[0]].early)
            continue; /* computed already, with the current layer */
        const tern_graph_value *a = tern_graph_value_at(g, id), *b = tern_graph_value_at(g, n->inputs[1]);
        if (a->rank == 2 && b->rank == 2 && !b->constant)
            last = j;
    }
    return last;
}

/* matmul2d for linear layers whose input a (value id, 2-D, [M, K]) may be read by later linear layers with
 * run-time weights: the transpose aT is made by the first and reused by the others (the same bytes, so the same
 * bits), then released after the last. The current layer and the n - 1 layers of its group (linear_group) run
 * as one GEMM with their weights side by side: aT is read once for all of them. */
static void matmul2d_shared(compile_ctx *c, int id, unsigned n, const tern_view *out, tern_view a, const tern_view *w,
                            uint64_t M, uint64_t K)
{
    tern_dtype mdt = c->o->matmul_dtype;
    if (c->at_held && c->at_src != id) { /* a cached transpose of another input: its readers are past */
        tern_kernel_release(c->k, c->at_view);
        c->at_held = 0;
    }
    int last = later_runtime_linear(c, id);
    tern_gemm_opts go;
    tern_gemm_opts_default(&go);
    go.acc_dtype = TERN_DTYPE_FP32;
    go.tiles_in_block_m = 8; /* as matmul2d */
    if (!c->at_held && last < 0 && n == 1) {
        matmul2d(c, out[0], a, w[0], M, K, tern_view_dim(&w[0], 1));
        return;
    }
    uint64_t N = 0;
    for (unsigned j = 0; j < n; j++)
        N += tern_view_dim(&w[j], 1);
    uint64_t R = !c->at_held && last < 0 && transpose_on_chip(c, &go, N)
                     ? rows_per_call(c, &go, M, K, N, (tern_dtype)a.ap.dtype, (tern_dtype)out[0].ap.dtype)
                     : 0;
    if (R) { /* the group's only GEMM: its input transposed on chip */
        for (uint64_t r0 = 0; r0 < M && cc_ok(c); r0 += R) {
            uint64_t r1 = r0 + R < M ? r0 + R : M;
            tern_view o[LINEAR_GROUP_MAX + 1];
            for (unsigned j = 0; j < n; j++)
                o[j] = tern_view_block(c->k, out[j], r0, r1, 0, tern_view_dim(&w[j], 1));
            tern_lib_gemm_multi_rows(c->k, n, o, tern_view_block(c->k, a, r0, r1, 0, K), mdt, w, &go);
        }
        for (unsigned j = 0; j < n; j++)
            c->model_flops += 2.0 * (double)M * (double)tern_view_dim(&w[j], 1) * (double)K;
        return;
    }
    if (!c->at_held) {
        c->at_view = cc_temp(c, mdt, K, M);
        tern_lib_transpose(c->k, c->at_view, a);
        c->at_held = 1;
        c->at_src = id;
    }
    tern_lib_gemm_multi(c->k, n, out, c->at_view, w, &go);
    for (unsigned j = 0; j < n; j++)
        c->model_flops += 2.0 * (double)M * (double)tern_view_dim(&w[j], 1) * (double)K;
    if (last < 0) {
        tern_kernel_release(c->k, c->at_view);
        c->at_held = 0;
    }
}

/* The linear layers after the current one that read the same 2-D input (value id) against a run-time 2-D weight
 * [K, *] that is already placed, with outputs of the current one's dtype: up to cap node indices into nodes.
 * For a folded transpose X^T, the same input is any 2-D Transpose of X (each dW = X^T dY has its own).
 * They are lowered with the current layer as one multi-output GEMM (tern_lib_gemm_multi), their outputs placed
 * now and marked early. */

/* The source of value id when a 2-D Transpose (perm absent or [1, 0]) makes it; else -1. */
static int transpose_src(const tern_graph *g, int id)
{
    const tern_graph_value *v = tern_graph_value_at(g, id);
    if (v->producer < 0 || v->rank != 2)
        return -1;
    const tern_graph_node *t = tern_graph_node_at(g, v->producer);
    if (t->op_id != TERN_GOP_TRANSPOSE || t->n_inputs != 1 || t->inputs[0] < 0)
        return -1;
    const tern_graph_attr *pa = tern_graph_node_attr(t, "perm");
    if (pa && (pa->n != 2 || pa->ints[0] != 1 || pa->ints[1] != 0))
        return -1;
    return t->inputs[0];
}

static int linear_group(compile_ctx *c, int id, tern_dtype odt, uint64_t K, int *nodes, int cap)
{
    const tern_graph *g = c->g;
    int cnt = 0, nn = tern_graph_node_count(g), self = c->node;
    int tsrc = c->v[id].tview ? transpose_src(g, id) : -1;
    for (int j = self + 1; j < nn && cnt < cap; j++) {
        const tern_graph_node *n = tern_graph_node_at(g, j);
        if (n->op_id != TERN_GOP_MATMUL || n->n_inputs != 2 || n->inputs[0] < 0 || n->inputs[1] < 0 ||
            n->inputs[1] == n->inputs[0] || n->n_outputs < 1 || n->outputs[0] < 0)
            continue;
        /* the same input, or (a folded transpose) another Transpose of the same source: the same values, and
         * the later Transpose folds too, for its readers are linear layers */
        if (n->inputs[0] != id && (tsrc < 0 || transpose_src(g, n->inputs[0]) != tsrc))
            continue;
        const tern_graph_value *b = tern_graph_value_at(g, n->inputs[1]), *y = tern_graph_value_at(g, n->outputs[0]);
        const cc_value *bv = &c->v[n->inputs[1]];
        if (b->constant || b->rank != 2 || (uint64_t)b->dims[0] != K || !bv->placed || bv->host || bv->tview ||
            c->v[n->outputs[0]].placed || y->rank != 2 || tern_graph_value_numel(y) == 0)
            continue;
        c->node = j;
        tern_dtype dt = cc_float_out_dtype(c, 0);
        c->node = self;
        if (dt != odt)
            continue;
        nodes[cnt++] = j;
    }
    return cnt;
}

int cc_transpose_folds(compile_ctx *c, char *why, size_t len)
{
    const tern_graph_node *n = cc_node(c);
    const tern_graph *g = c->g;
    if (n->n_inputs < 1 || n->inputs[0] < 0 || n->n_outputs < 1 || n->outputs[0] < 0) {
        snprintf(why, len, "no input or output");
        return 0;
    }
    int src = n->inputs[0], out = n->outputs[0];
    const tern_graph_value *sv = tern_graph_value_at(g, src), *ov = tern_graph_value_at(g, out);
    const cc_value *x = &c->v[src];
    if (sv->rank != 2) {
        snprintf(why, len, "not a 2-D transpose");
        return 0;
    }
    if (c->o->matmul_dtype != TERN_DTYPE_BF16 || !x->placed || x->host || x->tview || x->dt != TERN_DTYPE_BF16) {
        snprintf(why, len, "the input is not a BF16 device value (the matmul dtype)");
        return 0;
    }
    if (ov->flags & TERN_VALUE_OUTPUT) {
        snprintf(why, len, "the output is a graph output");
        return 0;
    }
    int readers = 0, nn = tern_graph_node_count(g);
    for (int j = c->node + 1; j < nn; j++) {
        const tern_graph_node *r = tern_graph_node_at(g, j);
        for (int k = 0; k < r->n_inputs; k++) {
            if (r->inputs[k] != out)
                continue;
            const tern_graph_value *b = r->n_inputs > 1 && r->inputs[1] >= 0 ? tern_graph_value_at(g, r->inputs[1])
                                                                             : NULL;
            if (r->op_id != TERN_GOP_MATMUL || k != 0 || r->n_inputs != 2 || !b || b->rank != 2 || b->constant ||
                r->inputs[1] == out) {
                snprintf(why, len, "node %d (%s) reads the output other than as a linear layer's input", j, r->op);
                return 0;
            }
            readers++;
        }
    }
    if (!readers) {
        snprintf(why, len, "no reader");
        return 0;
    }
    return 1;
}

/* y[M, N] = a[M, K] @ w for a folded transpose a (cc_transpose_folds): a's storage is aT [K, M], the GEMM's
 * lhsT as it is. Row blocks of up to 4,096 rows (the GEMM keeps a block's accumulators in SBUF); each output
 * element's contraction is blocked over K as matmul2d's (the K and N blocks do not depend on M): the same bits
 * as the transpose copy followed by matmul2d's transpose back. */
static void matmul_tview(compile_ctx *c, unsigned n, cc_value *const *y, cc_value *a, const tern_view *w, uint64_t M,
                         uint64_t K)
{
    tern_gemm_opts go;
    tern_gemm_opts_default(&go);
    go.acc_dtype = TERN_DTYPE_FP32;
    go.tiles_in_block_m = 8; /* as matmul2d */
    const uint64_t MB = 4096;
    tern_view yv[LINEAR_GROUP_MAX + 1];
    for (uint64_t m0 = 0; m0 < M && cc_ok(c); m0 += MB) {
        uint64_t mr = M - m0 < MB ? M - m0 : MB;
        for (unsigned j = 0; j < n; j++) {
            uint64_t N = tern_view_dim(&w[j], 1);
            yv[j] = cc_view2d(c, y[j], m0 * N, mr, N, N);
        }
        tern_lib_gemm_multi(c->k, n, yv, cc_view2d(c, a, m0, K, mr, M), w, &go);
    }
    for (unsigned j = 0; j < n; j++)
        c->model_flops += 2.0 * (double)M * (double)tern_view_dim(&w[j], 1) * (double)K;
}

int cc_node_is_linear(const tern_graph *g, int i)
{
    const tern_graph_node *n = tern_graph_node_at(g, i);
    int gemm = n->op_id == TERN_GOP_GEMM; /* MatMul, Gemm, tern.MatMulBias: the registry's MATMUL flag */
    if (!(tern_op_flags((tern_op_id)n->op_id) & TERN_OPF_MATMUL))
        return 0;
    if (gemm && (tern_graph_attr_int(n, "transA", 0) || tern_graph_attr_float(n, "alpha", 1) != 1.0f ||
                 tern_graph_attr_float(n, "beta", 1) != 1.0f))
        return 0;
    if (n->n_inputs < 2 || n->inputs[0] < 0 || n->inputs[1] < 0)
        return 0;
    const tern_graph_value *a = tern_graph_value_at(g, n->inputs[0]), *b = tern_graph_value_at(g, n->inputs[1]);
    return b->constant && b->rank == 2 && a->rank >= 1 && a->dims[a->rank - 1] >= 1 &&
           a->dims[a->rank - 1] <= LINEAR_MAX_K;
}

static tern_view weight_view(compile_ctx *c, cc_value *w, uint64_t K, uint64_t N, int transposed)
{
    /* transposed: the constant is [N, K] (Gemm transB); it is stored as [K, N] in the matmul dtype */
    return cc_const2d(c, w->host, c->o->matmul_dtype, K, N, transposed);
}

static tern_act_func act_named(const char *a)
{
    if (!strcmp(a, "relu"))
        return TERN_ACT_RELU;
    if (!strcmp(a, "gelu"))
        return TERN_ACT_GELU;
    if (!strcmp(a, "gelu_tanh"))
        return TERN_ACT_GELU_TANH;
    return TERN_ACT_COPY;
}

/* A linear layer's operands as lower_matmul takes them (the current node). */
typedef struct {
    cc_value *a, *b, *bias, *y;
    uint64_t M, K, N;
    tern_act_func act;
    int transB;
    /* with a constant 2-D weight: the fused kernel's operands */
    tern_view w, bv, av, outv;
    cc_value bias_tmp; /* a one-element bias broadcast to [1, N] (flat valid), released after the layer */
    cc_value *res, *z; /* the fused residual; the pre-LN fusion's second output (the norm's) */
    int ln;
    tern_linear_ext lx;
} lin_args;

/* The current node's operands: -1 after an error (recorded), 0 for a MatMul that is not a layer with a constant
 * 2-D weight (a, b, y, M, K set), 1 with the fused kernel's operands too. */
static int linear_args(compile_ctx *c, lin_args *la)
{
    const tern_graph_node *n = cc_node(c);
    memset(la, 0, sizeof *la);
    la->bias_tmp.flat = tern_view_none();
    int is_gemm = n->op_id == TERN_GOP_GEMM, fused = n->op_id == TERN_GOP_MATMUL_BIAS;
    cc_value *a = la->a = cc_in(c, 0), *b = la->b = cc_in(c, 1);
    cc_value *bias = la->bias = (is_gemm || fused) ? cc_in(c, 2) : NULL;
    /* an output placed already: by pair_next's probe of this node, for a pair the kernel then declined */
    int yid = cc_out_id(c, 0);
    cc_value *y = la->y = yid >= 0 && c->v[yid].placed ? &c->v[yid] : cc_out(c, 0, cc_float_out_dtype(c, 0));
    if (!a || !b || !y)
        return -1;
    int transB = la->transB = is_gemm ? (int)tern_graph_attr_int(n, "transB", 0) : 0;
    if (is_gemm && (tern_graph_attr_int(n, "transA", 0) || tern_graph_attr_float(n, "alpha", 1) != 1.0f ||
                    tern_graph_attr_float(n, "beta", 1) != 1.0f)) {
        cc_fail(c, TERN_ERR_UNSUPPORTED, "Gemm with transA, alpha or beta other than the defaults");
        return -1;
    }
    if (a->rank < 1 || b->rank < 1) {
        cc_fail(c, TERN_ERR_UNSUPPORTED, "MatMul of a scalar");
        return -1;
    }
    uint64_t K = la->K = (uint64_t)a->dims[a->rank - 1];
    uint64_t M = la->M = a->rank >= 2 ? a->numel / K : 1;
    la->act = fused ? act_named(tern_graph_attr_string(n, "activation", "none")) : TERN_ACT_COPY;
    if (!b->host || b->rank != 2)
        return 0;
    uint64_t N = la->N = (uint64_t)b->dims[transB ? 0 : 1];
    la->w = weight_view(c, b, K, N, transB);
    la->bv = tern_view_none();
    if (bias && bias->numel == N) {
        la->bv = cc_view2d(c, bias, 0, 1, N, N);
    } else if (bias && bias->numel == 1) {
        la->bias_tmp.dt = TERN_DTYPE_FP32;
        la->bias_tmp.flat = cc_temp(c, TERN_DTYPE_FP32, 1, N);
        tile_strided_copy(c, &la->bias_tmp, 0, bias, 0, 1, (int64_t[]){(int64_t)N}, (int64_t[]){0});
        la->bv = cc_view2d(c, &la->bias_tmp, 0, 1, N, N);
    } else if (bias) {
        cc_fail(c, TERN_ERR_UNSUPPORTED, "bias of %llu elements for %llu outputs", (unsigned long long)bias->numel,
                (unsigned long long)N);
        return -1;
    }
    tern_view yv = cc_view2d(c, y, 0, M, N, N);
    la->av = cc_view2d(c, a, 0, M, K, K);
    cc_value *res = la->res = fused && n->n_inputs > 3 ? cc_in(c, 3) : NULL; /* the fused residual Add */
    if (res && res->numel != M * N) {
        cc_fail(c, TERN_ERR_INVALID, "residual of %llu elements for a %llu x %llu output",
                (unsigned long long)res->numel, (unsigned long long)M, (unsigned long long)N);
        return -1;
    }
    tern_view rv = res ? cc_view2d(c, res, 0, M, N, N) : tern_view_none();
    /* the fused layer norm (passes.c): gamma, beta as [1, N] views */
    int ln = la->ln = fused && tern_graph_attr_int(n, "layernorm", 0);
    cc_value *lg = ln ? cc_in(c, 4) : NULL, *lb = ln && n->n_inputs > 5 ? cc_in(c, 5) : NULL;
    if (ln && (!lg || lg->numel != N || (lb && lb->numel != N))) {
        cc_fail(c, TERN_ERR_INVALID, "fused layer norm: scale/bias of %llu/%llu elements for %llu outputs",
                lg ? (unsigned long long)lg->numel : 0ULL, lb ? (unsigned long long)lb->numel : 0ULL,
                (unsigned long long)N);
        return -1;
    }
    tern_view gv = lg ? cc_view2d(c, lg, 0, 1, N, N) : tern_view_none();
    tern_view btv = lb ? cc_view2d(c, lb, 0, 1, N, N) : tern_view_none();
    float eps = tern_graph_attr_float(n, "epsilon", 1e-5f);
    /* after a kernel that stores its output from ScalarE's queue (the fused attention, a layer norm), SyncE is
     * free while that kernel computes: the first weights then stream meanwhile (the rows wait for the store
     * anyway) */
    la->lx = (tern_linear_ext){rv, gv, btv, eps, a->stored_off_sync, tern_view_none()};
    /* pre-LN fusion: output 0 is the layer's, output 1 the norm's */
    int zid = ln && n->n_outputs > 1 ? cc_out_id(c, 1) : -1;
    cc_value *z = la->z = zid >= 0 && c->v[zid].placed ? &c->v[zid]
                          : ln && n->n_outputs > 1 ? cc_out(c, 1, cc_float_out_dtype(c, 1))
                                                   : NULL;
    if (ln && n->n_outputs > 1 && !z)
        return -1;
    la->outv = z ? cc_view2d(c, z, 0, M, N, N) : yv; /* what the fused kernel writes */
    if (z)
        la->lx.pre_out = yv;
    if (!ln)
        la->lx.gamma = la->lx.beta = tern_view_none();
    return 1;
}

/* The node after the current linear layer (operands la) that takes its output as the only reader, when the two
 * can run as one kernel with the middle kept on chip (tern_lib_linear_pair): a linear layer with a constant 2-D
 * weight reading it as its input 0, every other input of which is ready now; -1 when none. */
static int pair_next(compile_ctx *c, const lin_args *la)
{
    const tern_graph *g = c->g;
    const tern_graph_node *self = cc_node(c);
    int yid = self->n_outputs > 0 ? self->outputs[0] : -1, nn = tern_graph_node_count(g), reader = -1;
    if (c->o->no_keep_on_chip || yid < 0 || la->ln || la->res || la->z || la->K > LINEAR_MAX_K || c->v[yid].last_use == INT32_MAX)
        return -1;
    for (int j = c->node + 1; j < nn; j++) {
        const tern_graph_node *n = tern_graph_node_at(g, j);
        for (int i = 0; i < n->n_inputs; i++)
            if (n->inputs[i] == yid) {
                if (reader >= 0 || i != 0)
                    return -1; /* a second reader, or read as another operand */
                reader = j;
            }
    }
    if (reader < 0 || c->v[yid].last_use != reader)
        return -1;
    const tern_graph_node *n = tern_graph_node_at(g, reader);
    int op = n->op_id;
    if (op != TERN_GOP_MATMUL && op != TERN_GOP_MATMUL_BIAS && op != TERN_GOP_GEMM)
        return -1;
    if (op == TERN_GOP_GEMM && (tern_graph_attr_int(n, "transA", 0) || tern_graph_attr_float(n, "alpha", 1) != 1.0f ||
                                tern_graph_attr_float(n, "beta", 1) != 1.0f))
        return -1;
    if (n->n_inputs < 2 || n->inputs[1] < 0 || n->n_outputs < 1 || n->outputs[0] < 0 ||
        c->v[n->outputs[0]].placed || c->v[n->outputs[0]].early)
        return -1;
    const tern_graph_value *w = tern_graph_value_at(g, n->inputs[1]);
    int transB = op == TERN_GOP_GEMM ? (int)tern_graph_attr_int(n, "transB", 0) : 0;
    if (!w->constant || w->rank != 2 || (uint64_t)w->dims[transB ? 1 : 0] != la->N || la->N > LINEAR_MAX_K)
        return -1;
    /* a bias of one element per output (else the layer broadcasts it first), and one row tile (the kernel's
     * other condition, SBUF room for both layers, is its own to judge) */
    uint64_t N2 = (uint64_t)w->dims[transB ? 0 : 1];
    if (op != TERN_GOP_MATMUL && n->n_inputs > 2 && n->inputs[2] >= 0 &&
        (uint64_t)tern_graph_value_numel(tern_graph_value_at(g, n->inputs[2])) != N2)
        return -1;
    if (la->M > c->cfg.partitions || la->M > c->cfg.pe_rows || la->M > c->cfg.pe_cols)
        return -1;
    /* every other input a constant or already computed */
    for (int i = 1; i < n->n_inputs; i++) {
        int id = n->inputs[i];
        if (id >= 0 && !tern_graph_value_at(g, id)->constant && !c->v[id].placed)
            return -1;
    }
    return reader;
}

int cc_readers_only(const compile_ctx *c, int id, int j1, int k1, int j2, int k2)
{
    const tern_graph *g = c->g;
    if (c->v[id].last_use == INT32_MAX)
        return 0; /* a graph output */
    for (int i = 0; i < tern_graph_node_count(g); i++) {
        const tern_graph_node *n = tern_graph_node_at(g, i);
        for (int k = 0; k < n->n_inputs; k++)
            if (n->inputs[k] == id && !(i == j1 && k == k1) && !(i == j2 && k == k2))
                return 0;
    }
    return 1;
}

/* The next node when this layer's layer norm (operands la) can leave its rows on chip for it: the next node is an
 * FFN pair's first layer (a linear layer with a constant weight, no residual and no norm of its own, whose output
 * only the pair's second layer reads, as its input) that takes the rows as its input, the second layer possibly
 * taking them as its residual (post-LN: BERT's; pre-LN, GPT-2's, the rows are the fused node's second output and
 * the residual is its first), and nothing else reads them; -1 otherwise. The kept rows are fp32 whatever the
 * value's storage (bf16 when only matmuls read it: the pair then casts them as the store would have). The pair
 * itself is settled when that node is lowered (lower_matmul stores the rows there if it does not form). */
static int norm_to_pair(compile_ctx *c, const lin_args *la)
{
    const tern_graph *g = c->g;
    const tern_graph_node *self = cc_node(c);
    int yid = self->n_outputs > (la->z ? 1 : 0) ? self->outputs[la->z ? 1 : 0] : -1, j = c->node + 1;
    int nn = tern_graph_node_count(g);
    const cc_value *y = la->z ? la->z : la->y;
    if (c->o->no_keep_on_chip || yid < 0 || !la->ln || !tern_dtype_is_float(y->dt) || j >= nn ||
        la->M > c->cfg.partitions || la->M > c->cfg.pe_rows || la->M > c->cfg.pe_cols || !cc_node_is_linear(g, j) ||
        cc_fuse_member(c, j) || cc_msum_member(c, j) || cc_conv_epi_member(c, j))
        return -1;
    const tern_graph_node *n1 = tern_graph_node_at(g, j);
    if (n1->inputs[0] != yid || n1->n_outputs < 1 || n1->outputs[0] < 0 ||
        (n1->op_id == TERN_GOP_MATMUL_BIAS && (n1->n_inputs > 3 || tern_graph_attr_int(n1, "layernorm", 0))))
        return -1;
    int mid = n1->outputs[0], j2 = -1;
    for (int i = j + 1; i < nn; i++) {
        const tern_graph_node *n = tern_graph_node_at(g, i);
        for (int k = 0; k < n->n_inputs; k++)
            if (n->inputs[k] == mid) {
                if (j2 >= 0 || k != 0)
                    return -1;
                j2 = i;
            }
    }
    if (j2 < 0 || !cc_node_is_linear(g, j2) || c->v[mid].last_use != j2)
        return -1;
    const tern_graph_node *n2 = tern_graph_node_at(g, j2);
    int res = n2->op_id == TERN_GOP_MATMUL_BIAS && n2->n_inputs > 3 && n2->inputs[3] == yid;
    return cc_readers_only(c, yid, j, 0, res ? j2 : -1, 3) ? j : -1;
}

static int lower_matmul(compile_ctx *c)
{
    const tern_graph_node *n = cc_node(c);
    if (n->n_outputs > 0 && n->outputs[0] >= 0 && c->v[n->outputs[0]].early)
        return 1; /* computed with an earlier linear layer (linear_group, or the second of a pair) */
    lin_args la;
    int got = linear_args(c, &la);
    if (got < 0)
        return 1;
    if (got == 0 && c->kept_id >= 0) /* rows kept for this node, which reads its input from HBM: store them first */
        cc_kept_flush(c);
    cc_value *a = la.a, *b = la.b, *y = la.y, *bias = la.bias;
    const uint64_t M = la.M, K = la.K;
    if (got > 0) {
        const uint64_t N = la.N;
        tern_act_func act = la.act;
        tern_view w = la.w, bv = la.bv, av = la.av, outv = la.outv;
        tern_linear_ext lx = la.lx;
        cc_value *z = la.z, *res = la.res;
        int ln = la.ln;
        tern_view yv = cc_view2d(c, y, 0, M, N, N), rv = lx.residual, gv = lx.gamma, btv = lx.beta;
        float eps = lx.eps;
        /* The input's rows kept in SBUF by the kernel before (an attention's merged output, a layer norm's rows):
         * transposed from there. This node must read them only as its input (or, for a pair, the pair's second
         * layer as its residual); else they are stored first. */
        const int in_id = cc_in_id(c, 0), self = c->node;
        tern_view in_rows = c->kept_id >= 0 && c->kept_id == in_id ? c->kept_rows : tern_view_none();
        /* the next layer with the middle on chip (the FFN's two layers), when it is this layer's only reader */
        int j = pair_next(c, &la);
        if (j >= 0) {
            lin_args l2;
            c->node = j;
            int got2 = linear_args(c, &l2);
            int res_rows = in_rows.region >= 0 && got2 > 0 && l2.res && cc_in_id(c, 3) == in_id;
            c->node = self;
            if (got2 < 0)
                return 1;
            if (in_rows.region >= 0 && !cc_readers_only(c, in_id, self, 0, res_rows ? j : -1, 3)) {
                cc_kept_flush(c);
                in_rows = tern_view_none();
                res_rows = 0;
            }
            l2.lx.weights_first = lx.weights_first; /* the pair's: its first layer reads this node's input */
            int took = got2 > 0 && l2.M == M &&
                       (in_rows.region >= 0
                            ? tern_lib_linear_pair_rows(c->k, l2.outv, in_rows, res_rows, w, bv, act, l2.w, l2.bv,
                                                        l2.act, &l2.lx)
                            : tern_lib_linear_pair(c->k, l2.outv, av, w, bv, act, l2.w, l2.bv, l2.act, &l2.lx));
            if (l2.bias_tmp.flat.region >= 0)
                tern_kernel_release(c->k, l2.bias_tmp.flat);
            if (took) {
                if (in_rows.region >= 0)
                    c->kept_id = -1; /* the kernel released them */
                l2.y->early = 1;
                l2.y->stored_off_sync = l2.ln; /* as below */
                if (l2.z)
                    l2.z->stored_off_sync = 1;
                if (la.bias_tmp.flat.region >= 0)
                    tern_kernel_release(c->k, la.bias_tmp.flat);
                c->model_flops += 2.0 * (double)M * (double)N * (double)K + 2.0 * (double)M * (double)l2.N * (double)N;
                return 1;
            }
        }
        if (in_rows.region >= 0 && !cc_readers_only(c, in_id, self, 0, -1, 0)) {
            cc_kept_flush(c);
            in_rows = tern_view_none();
        }
        /* the layer norm's rows kept on chip for the next node, an FFN pair that reads them alone (BERT's block:
         * the attention projection's norm, the FFN's input and residual) */
        int jn = norm_to_pair(c, &la);
        tern_view norm = jn >= 0 ? tern_kernel_sbuf(c->k, TERN_DTYPE_FP32, (uint32_t)M, (uint32_t)N, "linear_norm_rows")
                                 : tern_view_none();
        int took = 0;
        if (norm.region >= 0)
            took = tern_lib_linear_keep_norm(c->k, outv, av, in_rows, w, bv, act, &lx, norm, 0);
        else if (in_rows.region >= 0)
            took = tern_lib_linear_rows(c->k, outv, in_rows, w, bv, act, &lx);
        if (took) {
            if (in_rows.region >= 0)
                c->kept_id = -1; /* the kernel released them */
            if (norm.region >= 0) { /* the norm's rows: output 1 in the pre-LN fusion, else output 0 */
                c->kept_id = n->outputs[z ? 1 : 0];
                c->kept_reader = jn;
                c->kept_rows = norm;
                c->kept_hbm = outv;
            }
            y->stored_off_sync = ln;
            if (z)
                z->stored_off_sync = 1;
            if (la.bias_tmp.flat.region >= 0)
                tern_kernel_release(c->k, la.bias_tmp.flat);
            c->model_flops += 2.0 * (double)M * (double)N * (double)K;
            return 1;
        }
        if (norm.region >= 0)
            tern_kernel_release(c->k, norm);
        if (in_rows.region >= 0)
            cc_kept_flush(c); /* declined (its layer norm): the rows go to HBM as the kernel before would have stored them */
        /* the layer (with its layer norm when the fused kernel takes it, else the norm separately after) */
        if (K <= LINEAR_MAX_K && tern_lib_linear_ext(c->k, outv, av, w, bv, act, &lx)) {
            y->stored_off_sync = ln; /* the fused norm stores (both outputs) from ScalarE */
            if (z)
                z->stored_off_sync = 1;
        } else {
            /* dst: the layer's output before a layer norm the fused kernel could not take (y itself when it is
             * an output of its own) */
            tern_view dst = ln && !z ? cc_temp(c, TERN_DTYPE_FP32, M, N) : yv;
            lx.gamma = lx.beta = lx.pre_out = tern_view_none();
            if (K <= LINEAR_MAX_K) {
                tern_lib_linear_ext(c->k, dst, av, w, bv, act, &lx);
            } else {
                /* A row tile of the fused kernel would not fit in SBUF: transpose + GEMM through HBM, then the
                 * bias and activation pass. */
                int post = bv.region >= 0 || act != TERN_ACT_COPY;
                tern_view pre = post ? cc_temp(c, TERN_DTYPE_FP32, M, N) : dst;
                matmul2d(c, pre, av, w, M, K, N);
                c->model_flops -= 2.0 * (double)M * (double)N * (double)K; /* counted once below */
                if (bv.region >= 0)
                    tern_lib_bias_act(c->k, dst, pre, bv, act);
                else if (post)
                    tern_lib_unary(c->k, dst, pre, act, 1.0f);
                if (post)
                    tern_kernel_release(c->k, pre);
                if (res)
                    tern_lib_binary(c->k, dst, dst, rv, TERN_ALU_ADD);
            }
            if (ln) {
                tern_lib_layernorm(c->k, outv, dst, gv, btv, eps);
                if (!z)
                    tern_kernel_release(c->k, dst);
                (z ? z : y)->stored_off_sync = 1;
            }
        }
        if (la.bias_tmp.flat.region >= 0)
            tern_kernel_release(c->k, la.bias_tmp.flat);
        c->model_flops += 2.0 * (double)M * (double)N * (double)K;
        return 1;
    }
    /* Both operands activations (attention): batched, numpy broadcasting of the batch dims of b. */
    if (a->rank < 2 || b->rank < 2 || bias) {
        cc_fail(c, TERN_ERR_UNSUPPORTED, "MatMul of ranks %d and %d with non-constant weights", a->rank, b->rank);
        return 1;
    }
    uint64_t Ma = (uint64_t)a->dims[a->rank - 2], N = (uint64_t)b->dims[b->rank - 1];
    uint64_t batches = y->numel / (Ma * N);
    /* A second operand without batches (a run-time weight: every linear layer of a training step) and a first
     * operand with all of them: the batches are rows of one [batches * Ma, K] x [K, N] product, so the weight is
     * cast to the matmul dtype once instead of once per batch, and the GEMM runs on row blocks of up to
     * FOLD_ROWS rows (its SBUF accumulators hold a block's rows) instead of Ma. Each output element's
     * contraction is blocked over K exactly as before (the GEMM's K and N blocks do not depend on M): the same
     * bits. */
    if (b->numel == K * N && a->numel == batches * Ma * K && batches > 1) {
        const uint64_t FOLD_ROWS = 2048, rows = batches * Ma;
        int wcopy = b->dt != c->o->matmul_dtype; /* a weight stored in the matmul dtype is read in place */
        tern_view w = wcopy ? cc_temp(c, c->o->matmul_dtype, K, N) : cc_view2d(c, b, 0, K, N, N);
        if (wcopy)
            cc_copy(c, w, cc_view2d(c, b, 0, K, N, N));
        for (uint64_t r0 = 0; r0 < rows && cc_ok(c); r0 += FOLD_ROWS) {
            uint64_t mr = rows - r0 < FOLD_ROWS ? rows - r0 : FOLD_ROWS;
            matmul2d(c, cc_view2d(c, y, r0 * N, mr, N, N), cc_view2d(c, a, r0 * K, mr, K, K), w, mr, K, N);
        }
        if (wcopy)
            tern_kernel_release(c->k, w);
        return 1;
    }
    if (batches == 1 && a->rank == 2 && b->rank == 2 && (a->tview || Ma <= 4096)) {
        /* One layer, or with the later layers reading the same input (Q, K and V; gate and up; their dW =
         * X^T dY) as one GEMM with the weights side by side: the input streams once for all of them. */
        int id = cc_in_id(c, 0), self = c->node, nodes[LINEAR_GROUP_MAX];
        int ng = n->op_id == TERN_GOP_MATMUL ? linear_group(c, id, y->dt, K, nodes, LINEAR_GROUP_MAX) : 0;
        cc_value *ys[LINEAR_GROUP_MAX + 1];
        tern_view w[LINEAR_GROUP_MAX + 1], yv[LINEAR_GROUP_MAX + 1];
        int wcopy[LINEAR_GROUP_MAX + 1];
        ys[0] = y;
        for (int j = 0; j < ng; j++) {
            c->node = nodes[j];
            ys[j + 1] = cc_out(c, 0, y->dt);
            c->node = self;
            if (!ys[j + 1])
                return 1;
            ys[j + 1]->early = 1;
        }
        unsigned cnt = (unsigned)ng + 1;
        for (unsigned j = 0; j < cnt; j++) {
            cc_value *bj = j ? &c->v[tern_graph_node_at(c->g, nodes[j - 1])->inputs[1]] : b;
            uint64_t Nj = (uint64_t)bj->dims[1];
            /* the moving operand in the matmul dtype: cast on the way, or read in place when it is stored so */
            wcopy[j] = bj->dt != c->o->matmul_dtype;
            w[j] = wcopy[j] ? cc_temp(c, c->o->matmul_dtype, K, Nj) : cc_view2d(c, bj, 0, K, Nj, Nj);
            if (wcopy[j])
                cc_copy(c, w[j], cc_view2d(c, bj, 0, K, Nj, Nj));
            yv[j] = cc_view2d(c, ys[j], 0, Ma, Nj, Nj);
        }
        if (a->tview)
            matmul_tview(c, cnt, ys, a, w, Ma, K);
        else
            matmul2d_shared(c, id, cnt, yv, cc_view2d(c, a, 0, Ma, K, K), w, Ma, K);
        for (unsigned j = 0; j < cnt; j++)
            if (wcopy[j])
                tern_kernel_release(c->k, w[j]);
        return 1;
    }
    int yb = y->rank - 2; /* output batch dims; each operand's batch dims align to their right (numpy) */
    for (uint64_t i = 0; i < batches && cc_ok(c); i++) {
        /* the operands' batch indices for output batch i: a size-1 batch dim of an operand broadcasts */
        uint64_t ai = 0, bi = 0, rest = i, astride = 1, bstride = 1;
        for (int d = yb - 1; d >= 0; d--) {
            uint64_t yd = (uint64_t)y->dims[d], id = rest % yd;
            rest /= yd;
            int da = d - (yb - (a->rank - 2)), db = d - (yb - (b->rank - 2));
            if (da >= 0) {
                uint64_t ad = (uint64_t)a->dims[da];
                ai += (ad == 1 ? 0 : id) * astride;
                astride *= ad;
            }
            if (db >= 0) {
                uint64_t bd = (uint64_t)b->dims[db];
                bi += (bd == 1 ? 0 : id) * bstride;
                bstride *= bd;
            }
        }
        /* the moving operand in the matmul dtype: cast on the way, or read in place when it is stored so */
        int wcopy = b->dt != c->o->matmul_dtype;
        tern_view w = wcopy ? cc_temp(c, c->o->matmul_dtype, K, N) : cc_view2d(c, b, bi * K * N, K, N, N);
        if (wcopy)
            cc_copy(c, w, cc_view2d(c, b, bi * K * N, K, N, N));
        tern_view yv = cc_view2d(c, y, i * Ma * N, Ma, N, N), av = cc_view2d(c, a, ai * Ma * K, Ma, K, K);
        if (a->tview) {
            matmul_tview(c, 1, &y, a, &w, Ma, K);
        } else if (batches == 1 && a->rank == 2 && b->rank == 2) {
            /* row blocks of 4,096 (the GEMM keeps a block's accumulators in SBUF): the same bits per element */
            for (uint64_t r0 = 0; r0 < Ma && cc_ok(c); r0 += 4096) {
                uint64_t mr = Ma - r0 < 4096 ? Ma - r0 : 4096;
                matmul2d(c, cc_view2d(c, y, r0 * N, mr, N, N), cc_view2d(c, a, r0 * K, mr, K, K), w, mr, K, N);
            }
        } else {
            matmul2d(c, yv, av, w, Ma, K, N);
        }
        if (wcopy)
            tern_kernel_release(c->k, w);
    }
    return 1;
}

static int gemm_plain_applies(compile_ctx *c, char *why, size_t len)
{
    const tern_graph_node *n = cc_node(c);
    cc_value *x = cc_in(c, 0), *b = cc_in(c, 1);
    if (!x)
        return 1;
    if (tern_graph_attr_int(n, "transA", 0) || tern_graph_attr_float(n, "alpha", 1) != 1.0f ||
        tern_graph_attr_float(n, "beta", 1) != 1.0f) {
        snprintf(why, len, "transA, alpha or beta is not the default");
        return 0;
    }
    if (!(b && b->host && b->rank == 2)) {
        snprintf(why, len, "B is not a constant 2-D weight");
        return 0;
    }
    return 1;
}

static const cc_rule linear_rules[] = {
    {TERN_GOP_MATMUL, "matmul.linear", NULL, lower_matmul},
    {TERN_GOP_MATMUL_BIAS, "matmul.linear", NULL, lower_matmul},
    {TERN_GOP_GEMM, "matmul.linear", gemm_plain_applies, lower_matmul},
    {TERN_GOP_GEMM, "gemm.general", NULL, lower_gemm},
};
const cc_rule_set cc_rules_linear = CC_RULE_SET("lower_linear.c", linear_rules);
