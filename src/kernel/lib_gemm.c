/* Tiled GEMM for the kernel library, structured as the NKI matrix-multiplication tutorial's fully optimised
 * kernel (aws-neuron/nki-samples, tutorials/matrix_multiplication): for each N block, SBUF accumulators for
 * every M block are zeroed; for each K block (in order) the rhs tiles of the block are loaded once, then for
 * each M block the lhsT tiles are loaded and every (bn, bm) output tile gets one PSUM accumulation group over
 * the K tiles, added into its SBUF accumulator by VectorE; finally each row of output tiles is packed and
 * stored. Edges smaller than a tile or block are handled by slicing, so any M, N, K works. */
#include <stdlib.h>
#include <string.h>

#include "kernel/builder_internal.h"
#include "tern/kernel_lib.h"

void tern_gemm_opts_default(tern_gemm_opts *o)
{
    memset(o, 0, sizeof *o);
    o->tiles_in_block_m = 16;
    o->tiles_in_block_n = 2;
    o->tiles_in_block_k = 8;
    o->acc_dtype = -1;
    o->rhs_dtype = -1;
    o->row_bias = tern_view_none();
    o->residual = tern_view_none();
}

/* The bias of output rows [row0, row0 + rows) on chip (fp32 [rows, 1]), or none. */
static tern_view bias_tile(tern_kernel *k, const tern_gemm_opts *o, uint64_t row0, uint32_t rows)
{
    if (o->row_bias.region < 0)
        return tern_view_none();
    tern_view t = tern_kernel_sbuf(k, TERN_DTYPE_FP32, rows, 1, "gemm_bias");
    tern_kernel_load(k, t, tern_view_block(k, o->row_bias, row0, row0 + rows, 0, 1));
    return t;
}

static uint64_t min_u64(uint64_t a, uint64_t b) { return a < b ? a : b; }
static uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

/* An output tile leaving PSUM or an fp32 accumulator (src) for dst: Relu of src * 1 + bias in one activation when
 * relu (bias may be none), else src + bias, else src itself (a PSUM tile as psum + 0, one tensor_scalar, an
 * accumulator as a copy): each rounded once into dst's dtype. */
static void evacuate(tern_kernel *k, tern_view dst, tern_view src, tern_view bias, int relu, int from_psum)
{
    if (relu)
        tern_kernel_activation(k, dst, src, TERN_ACT_RELU, 1.0f, bias, tern_view_none(), tern_view_none());
    else if (bias.region >= 0) /* the one rounding of (src + 0) + bias: a matmul's fp32 sum is never -0 */
        tern_kernel_tensor_scalar_ap(k, TERN_ENGINE_AUTO, dst, src, TERN_ALU_ADD, bias, 0.0f, TERN_ALU_BYPASS,
                                     tern_view_none(), 0.0f, 0);
    else if (from_psum)
        tern_kernel_tensor_scalar(k, TERN_ENGINE_AUTO, dst, src, TERN_ALU_ADD, 0.0f, TERN_ALU_BYPASS, 0.0f);
    else
        tern_kernel_tensor_copy(k, TERN_ENGINE_AUTO, dst, src);
}

/* The residual's epilogue on an output row tile [rows, c1 - c0] (rows from row0, columns [c0, c1) of the output)
 * about to be stored: + residual (in the option's order), then Relu. */
static void residual_epilogue(tern_kernel *k, const tern_gemm_opts *o, tern_view tile, uint64_t row0, uint64_t rows,
                              uint64_t c0, uint64_t c1)
{
    if (o->silu) { /* z * sigmoid(z) or sigmoid(z) * z on the fp32 tile (tern_gemm_opts.silu) */
        tern_view s = tern_kernel_sbuf(k, TERN_DTYPE_FP32, (uint32_t)rows, (uint32_t)(c1 - c0), "gemm_sigmoid");
        tern_kernel_activation(k, s, tile, TERN_ACT_SIGMOID, 1.0f, tern_view_none(), tern_view_none(),
                               tern_view_none());
        if (o->silu == 1)
            tern_kernel_tensor_tensor(k, TERN_ENGINE_AUTO, tile, tile, s, TERN_ALU_MULT);
        else
            tern_kernel_tensor_tensor(k, TERN_ENGINE_AUTO, tile, s, tile, TERN_ALU_MULT);
        tern_kernel_release(k, s);
        return;
    }
    if (o->clip) { /* Clip(z, lo, hi) in place (tern_gemm_opts.clip) */
        tern_view cl = tern_kernel_sbuf(k, TERN_DTYPE_FP32, (uint32_t)rows, (uint32_t)(c1 - c0), "gemm_clamp");
        tern_view nn = tern_kernel_sbuf(k, TERN_DTYPE_FP32, (uint32_t)rows, (uint32_t)(c1 - c0), "gemm_isnan");
        tern_lib_clip_tile(k, tile, tile, cl, nn, o->clip_lo, o->clip_hi);
        tern_kernel_release(k, nn);
        tern_kernel_release(k, cl);
        return;
    }
    if (o->residual.region < 0)
        return;
    tern_view r = tern_kernel_sbuf(k, TERN_DTYPE_FP32, (uint32_t)rows, (uint32_t)(c1 - c0), "gemm_residual");
    tern_kernel_load(k, r, tern_view_block(k, o->residual, row0, row0 + rows, c0, c1));
    if (o->residual_first)
        tern_kernel_tensor_tensor(k, TERN_ENGINE_AUTO, tile, r, tile, TERN_ALU_ADD);
    else
        tern_kernel_tensor_tensor(k, TERN_ENGINE_AUTO, tile, tile, r, TERN_ALU_ADD);
    tern_kernel_release(k, r);
    if (o->relu) /* relu(z * 1 + 0): a Relu activation over the stored sum */
        tern_kernel_activation(k, tile, tile, TERN_ACT_RELU, 1.0f, tern_view_none(), tern_view_none(),
                               tern_view_none());
}

/* The column range [c0, c1) of the side-by-side rhs (the concatenation of rhs[0..n-1] along N) loaded into
 * columns [0, c1 - c0) of the SBUF tile dst, rows [r0, r1): one DMA per rhs the range covers (one for n == 1,
 * the same load as a single GEMM's). */
static void load_cols(tern_kernel *k, tern_view dst, const tern_view *rhs, const uint64_t *col0, unsigned n,
                      uint64_t r0, uint64_t r1, uint64_t c0, uint64_t c1)
{
    for (unsigned j = 0; j < n; j++) {
        uint64_t s0 = col0[j], s1 = col0[j + 1], a = c0 > s0 ? c0 : s0, b = c1 < s1 ? c1 : s1;
        if (a < b)
            tern_kernel_load(k, tern_view_block(k, dst, 0, r1 - r0, a - c0, b - c0),
                             tern_view_block(k, rhs[j], r0, r1, a - s0, b - s0));
    }
}

/* Rows [row0, row0 + rows) of the side-by-side output, columns [c0, c1), stored from the SBUF tile src (its
 * columns [0, c1 - c0)): one DMA per output the range covers. */
static void store_cols(tern_kernel *k, const tern_view *out, tern_view src, const uint64_t *col0, unsigned n,
                       uint64_t row0, uint64_t rows, uint64_t c0, uint64_t c1)
{
    for (unsigned j = 0; j < n; j++) {
        uint64_t s0 = col0[j], s1 = col0[j + 1], a = c0 > s0 ? c0 : s0, b = c1 < s1 ? c1 : s1;
        if (a < b)
            tern_kernel_store(k, tern_view_block(k, out[j], row0, row0 + rows, a - s0, b - s0),
                              tern_view_block(k, src, 0, rows, a - c0, b - c0));
    }
}

/* Where the GEMM's lhsT tiles come from: lhsT in HBM, or (rows) a = lhsT^T [M, K] in HBM, each tile transposed on
 * chip by tern_lib_transpose's instructions into dt. */
typedef struct {
    tern_view src;  /* lhsT [K, M], or a [M, K] */
    int rows;       /* src is a */
    tern_dtype dt;  /* the tiles' dtype */
    tern_view ident; /* rows on v2: the identity the PE array multiplies by (tern_lib_transpose's) */
} gemm_lhs;

#define TR_GROUP 4u /* 128-row strips of a per PSUM bank, as tern_lib_transpose */

/* The lhsT tiles of K tiles k0 .. k0 + tiles_k (of TK rows, K at most) and columns [m0, m0 + bm_len) into
 * tiles[0 .. tiles_k). With a: per 128-row strip of a, one load per 512 columns of the K range; per K tile,
 * every strip's 128 x 128 piece through the PE array into one PSUM bank per 4 strips, and VectorE's copy (casting
 * to dt) into the tile: the pieces, instructions and copies of tern_lib_transpose (its strips and blocks start at
 * multiples of 128 rows and columns, as these do), so the same values as loading them from its output. */
static void load_lhs(tern_kernel *k, const gemm_lhs *L, tern_view *tiles, uint64_t k0, uint64_t tiles_k, uint64_t K,
                     uint64_t TK, uint64_t m0, uint64_t bm_len)
{
    if (!L->rows) {
        for (uint64_t bk = 0; bk < tiles_k; bk++) {
            uint64_t r0 = k0 + bk * TK, r1 = min_u64(r0 + TK, K);
            tiles[bk] = tern_kernel_sbuf(k, L->dt, (uint32_t)(r1 - r0), (uint32_t)bm_len, "gemm_lhsT");
            tern_kernel_load(k, tiles[bk], tern_view_block(k, L->src, r0, r1, m0, m0 + bm_len));
        }
        return;
    }
    const uint64_t T = k->cfg.pe_rows < k->cfg.pe_cols ? k->cfg.pe_rows : k->cfg.pe_cols;
    const uint64_t k1 = min_u64(k0 + tiles_k * TK, K), ns = ceil_div(bm_len, T), CW = T * TR_GROUP;
    const tern_dtype adt = (tern_dtype)L->src.ap.dtype, pdt = k->cfg.generation >= 3 ? adt : TERN_DTYPE_FP32;
    tern_view strips[64];
    if (ns > 64 || TK != T) {
        kfail(k, TERN_ERR_INVALID, "gemm: a row block of %llu rows (at most 64 strips) and K tiles of %llu (the "
              "PE edge %llu) to transpose on chip", (unsigned long long)bm_len, (unsigned long long)TK,
              (unsigned long long)T);
        return;
    }
    for (uint64_t bk = 0; bk < tiles_k; bk++) {
        uint64_t cb = min_u64(TK, k1 - k0 - bk * TK);
        tiles[bk] = tern_kernel_sbuf(k, L->dt, (uint32_t)cb, (uint32_t)bm_len, "gemm_lhsT");
    }
    /* the strips in chunks of 512 columns (tern_lib_transpose's), each chunk's freed before the next is loaded */
    for (uint64_t c0 = k0; c0 < k1 && !k->failed; c0 += CW) {
        uint64_t cw = min_u64(CW, k1 - c0);
        for (uint64_t s = 0; s < ns; s++) {
            uint64_t r0 = m0 + s * T, rb = min_u64(T, m0 + bm_len - r0);
            strips[s] = tern_kernel_sbuf(k, adt, (uint32_t)rb, (uint32_t)cw, "gemm_a");
            tern_kernel_load(k, strips[s], tern_view_block(k, L->src, r0, r0 + rb, c0, c0 + cw));
        }
        for (uint64_t b0 = 0; b0 < cw; b0 += TK) {
            uint64_t bk = (c0 - k0 + b0) / TK, cb = min_u64(TK, cw - b0);
            for (uint64_t g0 = 0; g0 < ns; g0 += TR_GROUP) {
                uint64_t g1 = min_u64(g0 + TR_GROUP, ns), gr = min_u64(bm_len, g1 * T) - g0 * T;
                tern_view ps = tern_kernel_psum(k, pdt, (uint32_t)cb, (uint32_t)gr, "gemm_transpose");
                for (uint64_t s = g0; s < g1; s++) {
                    uint64_t rb = tern_view_dim(&strips[s], 0);
                    tern_lib_transpose_block(k, tern_view_block(k, ps, 0, cb, (s - g0) * T, (s - g0) * T + rb),
                                             tern_view_block(k, strips[s], 0, rb, b0, b0 + cb), L->ident);
                }
                tern_kernel_tensor_copy(k, TERN_ENGINE_VECTOR,
                                        tern_view_block(k, tiles[bk], 0, cb, g0 * T, g0 * T + gr), ps);
                tern_kernel_release(k, ps);
            }
        }
        for (uint64_t s = 0; s < ns; s++)
            tern_kernel_release(k, strips[s]);
    }
}

static void gemm_core(tern_kernel *k, unsigned n_out, const tern_view *outs, gemm_lhs *L, const tern_view *rhss,
                      const tern_gemm_opts *opts_in);

void tern_lib_gemm_multi(tern_kernel *k, unsigned n_out, const tern_view *outs, tern_view lhsT, const tern_view *rhss,
                         const tern_gemm_opts *opts)
{
    gemm_lhs L = {lhsT, 0, (tern_dtype)lhsT.ap.dtype, kview_invalid()};
    if (!kview_ok(k, &lhsT, "gemm lhsT"))
        return;
    gemm_core(k, n_out, outs, &L, rhss, opts);
}

void tern_lib_gemm_multi_rows(tern_kernel *k, unsigned n_out, const tern_view *outs, tern_view a, tern_dtype lhs_dt,
                              const tern_view *rhss, const tern_gemm_opts *opts)
{
    if (!kview_ok(k, &a, "gemm a"))
        return;
    if (tern_view_rank(&a) != 2 || !ktensor_dtype((tern_dtype)a.ap.dtype) || !tern_dtype_is_float(lhs_dt)) {
        kfail(k, TERN_ERR_INVALID, "gemm: a must be 2-D in a TensorE dtype (rank %u, %s) and the lhsT dtype a float (%s)",
              tern_view_rank(&a), tern_dtype_name((tern_dtype)a.ap.dtype), tern_dtype_name(lhs_dt));
        return;
    }
    /* as lhsT [K, M] for the shape checks: a's dims swapped (the view is only read through load_lhs) */
    gemm_lhs L = {a, 1, lhs_dt, kview_invalid()};
    if (k->cfg.generation < 3) {
        const uint64_t T = k->cfg.pe_rows < k->cfg.pe_cols ? k->cfg.pe_rows : k->cfg.pe_cols;
        uint32_t nid = (uint32_t)min_u64(T, tern_view_dim(&a, 0));
        L.ident = tern_kernel_sbuf(k, (tern_dtype)a.ap.dtype, nid, nid, "transpose_identity");
        tern_lib_identity(k, L.ident);
    }
    gemm_core(k, n_out, outs, &L, rhss, opts);
    if (L.ident.region >= 0)
        tern_kernel_release(k, L.ident);
}

void tern_lib_gemm(tern_kernel *k, tern_view out, tern_view lhsT, tern_view rhs, const tern_gemm_opts *opts_in)
{
    tern_lib_gemm_multi(k, 1, &out, lhsT, &rhs, opts_in);
}

#define GEMM_MULTI_MAX 16

static void gemm_core(tern_kernel *k, unsigned n_out, const tern_view *outs, gemm_lhs *L, const tern_view *rhss,
                      const tern_gemm_opts *opts_in)
{
    if (n_out < 1 || n_out > GEMM_MULTI_MAX) {
        kfail(k, TERN_ERR_INVALID, "gemm: %u outputs (1 to %d)", n_out, GEMM_MULTI_MAX);
        return;
    }
    tern_view ov[GEMM_MULTI_MAX], rv[GEMM_MULTI_MAX];
    uint64_t col0[GEMM_MULTI_MAX + 1];
    col0[0] = 0;
    for (unsigned j = 0; j < n_out; j++) {
        ov[j] = outs[j];
        rv[j] = rhss[j];
        if (!kview_ok(k, &ov[j], "gemm out") || !kview_ok(k, &rv[j], "gemm rhs"))
            return;
        if (tern_view_rank(&ov[j]) != 2 || tern_view_rank(&L->src) != 2 || tern_view_rank(&rv[j]) != 2) {
            kfail(k, TERN_ERR_INVALID, "gemm: out, lhsT and rhs must be 2-D (ranks %u, %u, %u)",
                  tern_view_rank(&ov[j]), tern_view_rank(&L->src), tern_view_rank(&rv[j]));
            return;
        }
        if (j > 0 && (ov[j].ap.dtype != ov[0].ap.dtype || rv[j].ap.dtype != rv[0].ap.dtype)) {
            kfail(k, TERN_ERR_INVALID, "gemm: output %u or its rhs has another dtype than output 0's", j);
            return;
        }
        col0[j + 1] = col0[j] + tern_view_dim(&rv[j], 1);
    }
    tern_view out = ov[0], rhs = rv[0];
    tern_gemm_opts opts;
    if (opts_in)
        opts = *opts_in;
    else
        tern_gemm_opts_default(&opts);
    /* the lhsT's [K, M] (a's dims swapped when the tiles are transposed on chip) */
    uint64_t K = tern_view_dim(&L->src, L->rows ? 1 : 0), M = tern_view_dim(&L->src, L->rows ? 0 : 1), N = col0[n_out];
    for (unsigned j = 0; j < n_out; j++) {
        uint64_t Nj = col0[j + 1] - col0[j];
        if (tern_view_dim(&rv[j], 0) != K) {
            kfail(k, TERN_ERR_INVALID, "gemm: contraction mismatch: lhsT is [%llu, %llu], rhs is [%llu, %llu]",
                  (unsigned long long)K, (unsigned long long)M, (unsigned long long)tern_view_dim(&rv[j], 0),
                  (unsigned long long)Nj);
            return;
        }
        if (tern_view_dim(&ov[j], 0) != M || tern_view_dim(&ov[j], 1) != Nj) {
            kfail(k, TERN_ERR_INVALID, "gemm: out is [%llu, %llu], expected [%llu, %llu]",
                  (unsigned long long)tern_view_dim(&ov[j], 0), (unsigned long long)tern_view_dim(&ov[j], 1),
                  (unsigned long long)M, (unsigned long long)Nj);
            return;
        }
    }
    const int float_out = tern_dtype_is_float((tern_dtype)out.ap.dtype);
    if (opts.row_bias.region >= 0 &&
        (!kview_ok(k, &opts.row_bias, "gemm row_bias") || tern_view_rank(&opts.row_bias) != 2 ||
         tern_view_dim(&opts.row_bias, 0) != M || tern_view_dim(&opts.row_bias, 1) != 1 ||
         opts.row_bias.ap.dtype != TERN_DTYPE_FP32 || !float_out)) {
        if (!k->failed)
            kfail(k, TERN_ERR_INVALID, "gemm: row_bias must be fp32 [%llu, 1] with a float out", (unsigned long long)M);
        return;
    }
    if (opts.relu && !float_out) {
        kfail(k, TERN_ERR_INVALID, "gemm: relu needs a float out (out is %s)", tern_dtype_name((tern_dtype)out.ap.dtype));
        return;
    }
    if (opts.residual.region >= 0 &&
        (!kview_ok(k, &opts.residual, "gemm residual") || n_out != 1 || tern_view_rank(&opts.residual) != 2 ||
         tern_view_dim(&opts.residual, 0) != M || tern_view_dim(&opts.residual, 1) != N ||
         opts.residual.ap.dtype != TERN_DTYPE_FP32 || out.ap.dtype != TERN_DTYPE_FP32)) {
        if (!k->failed)
            kfail(k, TERN_ERR_INVALID, "gemm: residual must be fp32 [%llu, %llu] with one fp32 out",
                  (unsigned long long)M, (unsigned long long)N);
        return;
    }
    if ((opts.silu || opts.clip) &&
        (opts.silu > 2 || opts.clip > 1 || (opts.silu && opts.clip) || opts.relu || opts.residual.region >= 0 ||
         out.ap.dtype != TERN_DTYPE_FP32 || (opts.acc_dtype >= 0 && opts.acc_dtype != TERN_DTYPE_FP32) ||
         (opts.acc_dtype < 0 && L->dt != TERN_DTYPE_FP32))) {
        kfail(k, TERN_ERR_INVALID,
              "gemm: silu %d / clip %d need fp32 out and accumulators, one of them, and neither relu nor residual",
              opts.silu, opts.clip);
        return;
    }
    const int evac_relu = opts.relu && opts.residual.region < 0; /* with a residual, Relu comes after the add */
    if (!opts.tiles_in_block_m || !opts.tiles_in_block_n || !opts.tiles_in_block_k) {
        kfail(k, TERN_ERR_INVALID, "gemm: block sizes must be >= 1 tile (got %u x %u x %u)", opts.tiles_in_block_m,
              opts.tiles_in_block_n, opts.tiles_in_block_k);
        return;
    }
    const tern_core_config *c = &k->cfg;
    const uint64_t TM = c->pe_cols, TK = c->pe_rows, TN = c->moving_free_max;
    const uint64_t BM = TM * opts.tiles_in_block_m, BN = TN * opts.tiles_in_block_n, BK = TK * opts.tiles_in_block_k;
    tern_dtype in_l = L->dt, in_r = opts.rhs_dtype >= 0 ? (tern_dtype)opts.rhs_dtype : (tern_dtype)rhs.ap.dtype;
    tern_dtype acc = opts.acc_dtype < 0 ? in_l : (tern_dtype)opts.acc_dtype;
    const uint64_t nbm = ceil_div(M, BM), nbn = ceil_div(N, BN), nbk = ceil_div(K, BK);

    /* SBUF accumulators for one N block: [nbm][tiles_m][tiles_n] tiles of [TM, TN]. */
    size_t nacc = (size_t)nbm * opts.tiles_in_block_m * opts.tiles_in_block_n;
    tern_view *accs = calloc(nacc, sizeof *accs);
    tern_view *rhs_tiles = calloc(opts.tiles_in_block_k, sizeof *rhs_tiles);
    tern_view *lhs_tiles = calloc(opts.tiles_in_block_k, sizeof *lhs_tiles);
    tern_view *bias = calloc(opts.tiles_in_block_m, sizeof *bias); /* one K block: the bias of each row tile */
    if (!accs || !rhs_tiles || !lhs_tiles || !bias) {
        kfail(k, TERN_ERR_NOMEM, "gemm: out of memory");
        goto done;
    }
    for (uint64_t n = 0; n < nbn && !k->failed; n++) {
        uint64_t n0 = n * BN, bn_len = min_u64(BN, N - n0);
        uint64_t tiles_n = ceil_div(bn_len, TN);
        if (nbk == 1 && acc == TERN_DTYPE_FP32) {
            /* One K block: each output tile is one PSUM group. Zeroing an fp32 SBUF accumulator, adding the group
             * into it and copying it into the packed row costs VectorE three passes over the output; one
             * tensor_scalar writes psum + 0 into the packed row instead: the same fp32 sum (+0 + x == x + 0,
             * -0 included) rounded once into the output dtype, as the copy rounded it. */
            uint64_t tiles_k = ceil_div(K, TK);
            for (uint64_t bk = 0; bk < tiles_k; bk++) {
                uint64_t r0 = bk * TK, r1 = min_u64(r0 + TK, K);
                rhs_tiles[bk] = tern_kernel_sbuf(k, in_r, (uint32_t)(r1 - r0), (uint32_t)bn_len, "gemm_rhs");
                load_cols(k, rhs_tiles[bk], rv, col0, n_out, r0, r1, n0, n0 + bn_len);
            }
            for (uint64_t m = 0; m < nbm && !k->failed; m++) {
                uint64_t m0 = m * BM, bm_len = min_u64(BM, M - m0), tiles_m = ceil_div(bm_len, TM);
                load_lhs(k, L, lhs_tiles, 0, tiles_k, K, TK, m0, bm_len);
                for (uint64_t bm = 0; bm < tiles_m; bm++) {
                    accs[bm] = tern_kernel_sbuf(k, (tern_dtype)out.ap.dtype, (uint32_t)min_u64(TM, bm_len - bm * TM),
                                                (uint32_t)bn_len, "gemm_out");
                    bias[bm] = bias_tile(k, &opts, m0 + bm * TM, (uint32_t)min_u64(TM, bm_len - bm * TM));
                }
                for (uint64_t bn = 0; bn < tiles_n; bn++)
                    for (uint64_t bm = 0; bm < tiles_m; bm++) {
                        uint32_t rows = (uint32_t)min_u64(TM, bm_len - bm * TM);
                        uint32_t cols = (uint32_t)min_u64(TN, bn_len - bn * TN);
                        tern_view ps = tern_kernel_psum(k, TERN_DTYPE_FP32, rows, cols, "gemm_psum");
                        for (uint64_t bk = 0; bk < tiles_k; bk++) {
                            uint64_t kk = tern_view_dim(&lhs_tiles[bk], 0);
                            tern_view st = tern_view_block(k, lhs_tiles[bk], 0, kk, bm * TM, bm * TM + rows);
                            tern_view mv = tern_view_block(k, rhs_tiles[bk], 0, kk, bn * TN, bn * TN + cols);
                            tern_kernel_matmul(k, ps, st, mv, bk > 0);
                        }
                        evacuate(k, tern_view_block(k, accs[bm], 0, rows, bn * TN, bn * TN + cols), ps, bias[bm],
                                 evac_relu, 1);
                        tern_kernel_release(k, ps);
                    }
                for (uint64_t bk = 0; bk < tiles_k; bk++)
                    tern_kernel_release(k, lhs_tiles[bk]);
                for (uint64_t bm = 0; bm < tiles_m; bm++) {
                    uint64_t row0 = m0 + bm * TM, rows = tern_view_dim(&accs[bm], 0);
                    residual_epilogue(k, &opts, accs[bm], row0, rows, n0, n0 + bn_len);
                    store_cols(k, ov, accs[bm], col0, n_out, row0, rows, n0, n0 + bn_len);
                    tern_kernel_release(k, accs[bm]);
                    if (bias[bm].region >= 0)
                        tern_kernel_release(k, bias[bm]);
                }
            }
            for (uint64_t bk = 0; bk < tiles_k; bk++)
                tern_kernel_release(k, rhs_tiles[bk]);
            continue;
        }
        for (uint64_t m = 0; m < nbm; m++) {
            uint64_t bm_len = min_u64(BM, M - m * BM), tiles_m = ceil_div(bm_len, TM);
            for (uint64_t bm = 0; bm < tiles_m; bm++)
                for (uint64_t bn = 0; bn < tiles_n; bn++) {
                    uint32_t rows = (uint32_t)min_u64(TM, bm_len - bm * TM);
                    uint32_t cols = (uint32_t)min_u64(TN, bn_len - bn * TN);
                    tern_view *t = &accs[(m * opts.tiles_in_block_m + bm) * opts.tiles_in_block_n + bn];
                    *t = tern_kernel_sbuf(k, acc, rows, cols, "gemm_acc");
                    tern_kernel_memset(k, TERN_ENGINE_AUTO, *t, 0.0f);
                }
        }
        for (uint64_t kb = 0; kb < nbk && !k->failed; kb++) {
            uint64_t k0 = kb * BK, bk_len = min_u64(BK, K - k0), tiles_k = ceil_div(bk_len, TK);
            for (uint64_t bk = 0; bk < tiles_k; bk++) {
                uint64_t r0 = k0 + bk * TK, r1 = min_u64(r0 + TK, K);
                rhs_tiles[bk] = tern_kernel_sbuf(k, in_r, (uint32_t)(r1 - r0), (uint32_t)bn_len, "gemm_rhs");
                load_cols(k, rhs_tiles[bk], rv, col0, n_out, r0, r1, n0, n0 + bn_len);
            }
            for (uint64_t m = 0; m < nbm && !k->failed; m++) {
                uint64_t m0 = m * BM, bm_len = min_u64(BM, M - m0), tiles_m = ceil_div(bm_len, TM);
                load_lhs(k, L, lhs_tiles, k0, tiles_k, K, TK, m0, bm_len);
                for (uint64_t bn = 0; bn < tiles_n; bn++)
                    for (uint64_t bm = 0; bm < tiles_m; bm++) {
                        uint32_t rows = (uint32_t)min_u64(TM, bm_len - bm * TM);
                        uint32_t cols = (uint32_t)min_u64(TN, bn_len - bn * TN);
                        tern_view ps = tern_kernel_psum(k, TERN_DTYPE_FP32, rows, cols, "gemm_psum");
                        for (uint64_t bk = 0; bk < tiles_k; bk++) {
                            uint64_t kk = tern_view_dim(&lhs_tiles[bk], 0);
                            tern_view st = tern_view_block(k, lhs_tiles[bk], 0, kk, bm * TM, bm * TM + rows);
                            tern_view mv = tern_view_block(k, rhs_tiles[bk], 0, kk, bn * TN, bn * TN + cols);
                            tern_kernel_matmul(k, ps, st, mv, bk > 0);
                        }
                        tern_view *a = &accs[(m * opts.tiles_in_block_m + bm) * opts.tiles_in_block_n + bn];
                        tern_kernel_tensor_tensor(k, TERN_ENGINE_AUTO, *a, *a, ps, TERN_ALU_ADD);
                        tern_kernel_release(k, ps);
                    }
                for (uint64_t bk = 0; bk < tiles_k; bk++)
                    tern_kernel_release(k, lhs_tiles[bk]);
            }
            for (uint64_t bk = 0; bk < tiles_k; bk++)
                tern_kernel_release(k, rhs_tiles[bk]);
        }
        /* Pack each row of output tiles and store it. */
        for (uint64_t m = 0; m < nbm && !k->failed; m++) {
            uint64_t m0 = m * BM, bm_len = min_u64(BM, M - m0), tiles_m = ceil_div(bm_len, TM);
            for (uint64_t bm = 0; bm < tiles_m; bm++) {
                uint32_t rows = (uint32_t)min_u64(TM, bm_len - bm * TM);
                tern_view packed = tern_kernel_sbuf(k, (tern_dtype)out.ap.dtype, rows, (uint32_t)bn_len, "gemm_out");
                tern_view bt = bias_tile(k, &opts, m0 + bm * TM, rows);
                for (uint64_t bn = 0; bn < tiles_n; bn++) {
                    tern_view *a = &accs[(m * opts.tiles_in_block_m + bm) * opts.tiles_in_block_n + bn];
                    uint64_t cols = tern_view_dim(a, 1);
                    evacuate(k, tern_view_block(k, packed, 0, rows, bn * TN, bn * TN + cols), *a, bt, evac_relu, 0);
                    tern_kernel_release(k, *a);
                }
                if (bt.region >= 0)
                    tern_kernel_release(k, bt);
                uint64_t row0 = m0 + bm * TM;
                residual_epilogue(k, &opts, packed, row0, rows, n0, n0 + bn_len);
                store_cols(k, ov, packed, col0, n_out, row0, rows, n0, n0 + bn_len);
                tern_kernel_release(k, packed);
            }
        }
    }
done:
    free(accs);
    free(rhs_tiles);
    free(lhs_tiles);
    free(bias);
}

#define GEMM_SUM_MAX 16
#ifndef GSUM_STORE_ENGINE
#define GSUM_STORE_ENGINE TERN_ENGINE_SYNC
#endif

/* The checks of tern_lib_gemm_sum: shapes, one K block per term, a tree using every term and node once. */
static int gemm_sum_check(tern_kernel *k, tern_view out, unsigned nt, const tern_view *lhsT, int rows,
                          const tern_view *rhs, unsigned nn, const tern_gemm_sum_node *nodes, uint64_t BK)
{
    if (nt < 2 || nt > GEMM_SUM_MAX || nn != nt - 1) {
        kfail(k, TERN_ERR_INVALID, "gemm_sum: %u terms and %u additions (2 to %d terms, one addition fewer)", nt, nn,
              GEMM_SUM_MAX);
        return 0;
    }
    if (!kview_ok(k, &out, "gemm_sum out") || tern_view_rank(&out) != 2) {
        if (!k->failed)
            kfail(k, TERN_ERR_INVALID, "gemm_sum: out must be 2-D (rank %u)", tern_view_rank(&out));
        return 0;
    }
    uint64_t M = tern_view_dim(&out, 0), N = tern_view_dim(&out, 1);
    for (unsigned j = 0; j < nt; j++) {
        if (!kview_ok(k, &lhsT[j], "gemm_sum lhsT") || !kview_ok(k, &rhs[j], "gemm_sum rhs"))
            return 0;
        if (tern_view_rank(&lhsT[j]) != 2 || tern_view_rank(&rhs[j]) != 2) {
            kfail(k, TERN_ERR_INVALID, "gemm_sum: term %u: lhsT and rhs must be 2-D (ranks %u, %u)", j,
                  tern_view_rank(&lhsT[j]), tern_view_rank(&rhs[j]));
            return 0;
        }
        uint64_t K = tern_view_dim(&lhsT[j], rows ? 1 : 0), LM = tern_view_dim(&lhsT[j], rows ? 0 : 1);
        if (LM != M || tern_view_dim(&rhs[j], 0) != K || tern_view_dim(&rhs[j], 1) != N) {
            kfail(k, TERN_ERR_INVALID,
                  "gemm_sum: term %u: lhsT [%llu, %llu] and rhs [%llu, %llu] do not make the [%llu, %llu] output", j,
                  (unsigned long long)K, (unsigned long long)LM,
                  (unsigned long long)tern_view_dim(&rhs[j], 0), (unsigned long long)tern_view_dim(&rhs[j], 1),
                  (unsigned long long)M, (unsigned long long)N);
            return 0;
        }
        if (K > BK) {
            kfail(k, TERN_ERR_INVALID, "gemm_sum: term %u contracts over %llu, more than one K block (%llu)", j,
                  (unsigned long long)K, (unsigned long long)BK);
            return 0;
        }
    }
    unsigned used_t[GEMM_SUM_MAX] = {0}, used_n[GEMM_SUM_MAX] = {0};
    for (unsigned i = 0; i < nn; i++) {
        int ops[2] = {nodes[i].a, nodes[i].b};
        for (int o = 0; o < 2; o++) {
            int x = ops[o];
            if (x >= 0 ? (unsigned)x >= nt : (unsigned)(-1 - x) >= i) {
                kfail(k, TERN_ERR_INVALID, "gemm_sum: addition %u: operand %d is neither a term (0..%u) nor an "
                      "earlier addition", i, x, nt - 1);
                return 0;
            }
            if (x >= 0 ? used_t[x]++ : used_n[-1 - x]++) {
                kfail(k, TERN_ERR_INVALID, "gemm_sum: addition %u: operand %d is used twice", i, x);
                return 0;
            }
        }
        if (!tern_dtype_is_float(nodes[i].dt) || (i == nn - 1 && nodes[i].dt != (tern_dtype)out.ap.dtype)) {
            kfail(k, TERN_ERR_INVALID, "gemm_sum: addition %u: dtype %s (a float dtype; the last one out's)", i,
                  tern_dtype_name(nodes[i].dt));
            return 0;
        }
    }
    return 1;
}

/* Term j's product for the output tile at rows [r0, r0 + rows), columns [c0, c0 + cols) of the block's tiles: one
 * PSUM accumulation group over its K tiles in order. */
static tern_view gemm_sum_term(tern_kernel *k, unsigned j, const uint64_t *kt, const uint64_t *kt0,
                               const tern_view *lhs_tiles, const tern_view *rhs_tiles, uint64_t r0, uint32_t rows,
                               uint64_t c0, uint32_t cols)
{
    tern_view ps = tern_kernel_psum(k, TERN_DTYPE_FP32, rows, cols, "gsum_psum");
    for (uint64_t bk = 0; bk < kt[j]; bk++) {
        tern_view lt = lhs_tiles[kt0[j] + bk], rt = rhs_tiles[kt0[j] + bk];
        uint64_t kk = tern_view_dim(&lt, 0);
        tern_kernel_matmul(k, ps, tern_view_block(k, lt, 0, kk, r0, r0 + rows), tern_view_block(k, rt, 0, kk, c0, c0 + cols),
                           bk > 0);
    }
    return ps;
}

void tern_lib_gemm_sum(tern_kernel *k, tern_view out, unsigned n_terms, const tern_view *lhsT, int rows_dt,
                       const tern_view *rhs, unsigned n_nodes, const tern_gemm_sum_node *nodes,
                       const tern_gemm_opts *opts_in)
{
    const int from_rows = rows_dt >= 0;
    tern_gemm_opts opts;
    if (opts_in)
        opts = *opts_in;
    else
        tern_gemm_opts_default(&opts);
    const tern_core_config *c = &k->cfg;
    const uint64_t TM = c->pe_cols, TK = c->pe_rows, TN = c->moving_free_max;
    if (opts.row_bias.region >= 0 || opts.rhs_dtype >= 0 || opts.relu || opts.residual.region >= 0 || opts.silu ||
        opts.clip) {
        kfail(k, TERN_ERR_UNSUPPORTED, "gemm_sum: row_bias, rhs_dtype, relu, residual, silu and clip are tern_lib_gemm's options only");
        return;
    }
    if (!opts.tiles_in_block_m || !opts.tiles_in_block_n || !opts.tiles_in_block_k) {
        kfail(k, TERN_ERR_INVALID, "gemm_sum: block sizes must be >= 1 tile (got %u x %u x %u)", opts.tiles_in_block_m,
              opts.tiles_in_block_n, opts.tiles_in_block_k);
        return;
    }
    const uint64_t BM = TM * opts.tiles_in_block_m, BN = TN * opts.tiles_in_block_n, BK = TK * opts.tiles_in_block_k;
    if (!gemm_sum_check(k, out, n_terms, lhsT, from_rows, rhs, n_nodes, nodes, BK))
        return;
    if (from_rows && !tern_dtype_is_float((tern_dtype)rows_dt)) {
        kfail(k, TERN_ERR_INVALID, "gemm_sum: the lhsT dtype %d is not a float dtype", rows_dt);
        return;
    }
    const uint64_t M = tern_view_dim(&out, 0), N = tern_view_dim(&out, 1);
    const uint64_t nbm = ceil_div(M, BM), nbn = ceil_div(N, BN);
    uint64_t kt[GEMM_SUM_MAX], kt0[GEMM_SUM_MAX + 1]; /* each term's K tiles, and where they start in the arrays */
    kt0[0] = 0;
    for (unsigned j = 0; j < n_terms; j++) {
        kt[j] = ceil_div(tern_view_dim(&lhsT[j], from_rows ? 1 : 0), TK);
        kt0[j + 1] = kt0[j] + kt[j];
    }
    /* two sets of rhs tiles (one per N block) and of lhsT tiles (one per block), so that the next block's loads are
     * issued before this block's stores: the DMA-issuing engine does not hold them behind this block's additions */
    tern_view *rhs_tiles = calloc(2 * kt0[n_terms], sizeof *rhs_tiles);
    tern_view *lhs_tiles = calloc(2 * kt0[n_terms], sizeof *lhs_tiles);
    tern_view *accs = calloc(opts.tiles_in_block_m, sizeof *accs);
    if (!rhs_tiles || !lhs_tiles || !accs) {
        kfail(k, TERN_ERR_NOMEM, "gemm_sum: out of memory");
        goto done;
    }
    /* on v2, transposing on chip multiplies by an identity in each term's dtype (tern_lib_transpose's) */
    tern_view ident[GEMM_SUM_MAX];
    for (unsigned j = 0; j < n_terms; j++) {
        ident[j] = kview_invalid();
        if (from_rows && k->cfg.generation < 3) {
            const uint64_t T = k->cfg.pe_rows < k->cfg.pe_cols ? k->cfg.pe_rows : k->cfg.pe_cols;
            uint32_t nid = (uint32_t)min_u64(T, M);
            ident[j] = tern_kernel_sbuf(k, (tern_dtype)lhsT[j].ap.dtype, nid, nid, "transpose_identity");
            tern_lib_identity(k, ident[j]);
        }
    }
    const uint64_t nblk = nbn * nbm;
    for (uint64_t blk = 0; blk <= nblk && !k->failed; blk++) {
        /* the loads of block blk (N block n, M block m), then the additions and stores of block blk - 1 */
        if (blk < nblk) {
            uint64_t n = blk / nbm, m = blk % nbm, n0 = n * BN, bn_len = min_u64(BN, N - n0);
            uint64_t m0 = m * BM, bm_len = min_u64(BM, M - m0);
            tern_view *rt = &rhs_tiles[(n % 2) * kt0[n_terms]], *lt = &lhs_tiles[(blk % 2) * kt0[n_terms]];
            for (unsigned j = 0; j < n_terms && m == 0; j++) {
                uint64_t K = tern_view_dim(&rhs[j], 0);
                for (uint64_t bk = 0; bk < kt[j]; bk++) {
                    uint64_t r0 = bk * TK, r1 = min_u64(r0 + TK, K);
                    tern_view *t = &rt[kt0[j] + bk];
                    *t = tern_kernel_sbuf(k, (tern_dtype)rhs[j].ap.dtype, (uint32_t)(r1 - r0), (uint32_t)bn_len,
                                          "gsum_rhs");
                    tern_kernel_load(k, *t, tern_view_block(k, rhs[j], r0, r1, n0, n0 + bn_len));
                }
            }
            for (unsigned j = 0; j < n_terms; j++) {
                gemm_lhs L = {lhsT[j], from_rows, from_rows ? (tern_dtype)rows_dt : (tern_dtype)lhsT[j].ap.dtype,
                              ident[j]};
                load_lhs(k, &L, &lt[kt0[j]], 0, kt[j], tern_view_dim(&lhsT[j], from_rows ? 1 : 0), TK, m0, bm_len);
            }
        }
        if (blk == 0)
            continue;
        uint64_t b = blk - 1, n = b / nbm, m = b % nbm, n0 = n * BN, bn_len = min_u64(BN, N - n0);
        uint64_t m0 = m * BM, bm_len = min_u64(BM, M - m0), tiles_m = ceil_div(bm_len, TM), tiles_n = ceil_div(bn_len, TN);
        const tern_view *rt = &rhs_tiles[(n % 2) * kt0[n_terms]], *lt = &lhs_tiles[(b % 2) * kt0[n_terms]];
        for (uint64_t bm = 0; bm < tiles_m; bm++)
            accs[bm] = tern_kernel_sbuf(k, (tern_dtype)out.ap.dtype, (uint32_t)min_u64(TM, bm_len - bm * TM),
                                        (uint32_t)bn_len, "gsum_out");
        for (uint64_t bn = 0; bn < tiles_n; bn++)
            for (uint64_t bm = 0; bm < tiles_m && !k->failed; bm++) {
                uint32_t rows = (uint32_t)min_u64(TM, bm_len - bm * TM);
                uint32_t cols = (uint32_t)min_u64(TN, bn_len - bn * TN);
                /* Each term's product is one PSUM group (the K tiles in order, tern_lib_gemm's), made just before
                 * the addition that reads it and released just after. */
                tern_view res[GEMM_SUM_MAX];
                for (unsigned i = 0; i < n_nodes; i++) {
                    int x_op = nodes[i].a, y_op = nodes[i].b;
                    if (x_op >= 0 && y_op < 0) { /* the node's result first, a term second */
                        x_op = nodes[i].b;
                        y_op = nodes[i].a;
                    }
                    tern_view dst = i == n_nodes - 1 ? tern_view_block(k, accs[bm], 0, rows, bn * TN, bn * TN + cols)
                                                     : tern_kernel_sbuf(k, nodes[i].dt, rows, cols, "gsum_part");
                    tern_view x, y;
                    if (x_op >= 0) { /* two terms: t_x + 0 in fp32 on ScalarE */
                        tern_view px = gemm_sum_term(k, (unsigned)x_op, kt, kt0, lt, rt, bm * TM, rows, bn * TN, cols);
                        x = tern_kernel_sbuf(k, TERN_DTYPE_FP32, rows, cols, "gsum_first");
                        tern_kernel_activation(k, x, px, TERN_ACT_COPY, 1.0f, kview_invalid(), kview_invalid(),
                                               kview_invalid());
                        tern_kernel_release(k, px);
                    } else {
                        x = res[-1 - x_op];
                    }
                    y = y_op >= 0 ? gemm_sum_term(k, (unsigned)y_op, kt, kt0, lt, rt, bm * TM, rows, bn * TN, cols)
                                  : res[-1 - y_op];
                    tern_kernel_tensor_tensor(k, TERN_ENGINE_VECTOR, dst, x, y, TERN_ALU_ADD);
                    tern_kernel_release(k, x);
                    tern_kernel_release(k, y);
                    res[i] = dst;
                }
            }
        for (unsigned j = 0; j < n_terms; j++)
            for (uint64_t bk = 0; bk < kt[j]; bk++)
                tern_kernel_release(k, lt[kt0[j] + bk]);
        if (m == nbm - 1)
            for (unsigned j = 0; j < n_terms; j++)
                for (uint64_t bk = 0; bk < kt[j]; bk++)
                    tern_kernel_release(k, rt[kt0[j] + bk]);
        for (uint64_t bm = 0; bm < tiles_m; bm++) {
            tern_kernel_dma_copy_on(k, GSUM_STORE_ENGINE,
                                    tern_view_block(k, out, m0 + bm * TM, m0 + bm * TM + tern_view_dim(&accs[bm], 0), n0,
                                                    n0 + bn_len),
                                    accs[bm], -1);
            tern_kernel_release(k, accs[bm]);
        }
    }
    for (unsigned j = 0; j < n_terms; j++)
        if (ident[j].region >= 0)
            tern_kernel_release(k, ident[j]);
done:
    free(rhs_tiles);
    free(lhs_tiles);
    free(accs);
}
