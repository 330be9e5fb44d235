/* The fused linear layer of the kernel library: out[M, N] = act(a[M, K] @ w[K, N] + bias[N]) with nothing
 * written to HBM but out (docs/kernels.md).
 *  - Rows of a are taken 128 at a time (a row tile: the stationary operand's columns). One DMA loads the rows
 *    in a's dtype; on v2 ScalarE casts them to w's dtype; each 128-column chunk goes through the PE array
 *    (transpose_pe on v3+, in a's dtype; a matmul against an on-chip identity on v2, as lib_transpose does)
 *    into PSUM, from where VectorE copies groups of chunks (one PSUM bank each, casting on v3+) into the row
 *    tile's aT [128, K-chunks x rows] SBUF tile in w's dtype.
 *  - The aT tiles of a block of row tiles (all of M when they fit in 3/8 of SBUF) stay on chip while w
 *    streams through SBUF in column blocks (up to 4 KiB of a weight row, e.g. 2048 bf16 columns), up to three
 *    blocks in flight. A block is loaded in parts along K (about 512 KiB, one DMA each, every full 128-row K
 *    chunk of the part at once; the ragged K tail is a part of its own), so TensorE starts on the first part
 *    while the rest is in flight. Each weight byte is loaded once per block of row tiles.
 *  - Each [rows, <=512] output tile is one PSUM accumulation group over all of K in ascending 128-row K tiles
 *    (as lib_gemm); up to 4 groups are open at once, with the loop over parts outside the loop over them.
 *  - The epilogue is tern_lib_bias_act's, reading PSUM: VectorE tensor_tensor add of the broadcast bias rows
 *    (tern_lib_broadcast_row, once per weight block) into an fp32 SBUF tile and ScalarE activation in place,
 *    or without bias the activation (or a VectorE copy) out of PSUM; one DMA stores the tile, casting to out's
 *    dtype. Every store goes to one DMA queue: stores to the same HBM tensor from different queues would each
 *    wait for the previous one. Every DMA trigger stays on Sync (a queue's completion count only means "these
 *    transfers are done" when one in-order engine feeds the queue), except the fused layer norm's stores, all
 *    on one ScalarE queue.
 *  - tern_lib_linear_ln: the output tiles of a row stay in SBUF until the row's last tile is done, then
 *    tern_lib_layernorm's sequence normalises them (ln_row) before the stores; weights_first
 *    (tern_lib_linear_ext) issues the first weight block before the rows. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernel/builder_internal.h"
#include "tern/kernel_lib.h"

#define LIN_MAX_DEPTH 3u /* weight blocks in flight */
/* Weight loads stay on Sync. Triggering them from GpSimd (tern_kernel_dma_copy_on) lets them run ahead of the
 * stores, but under the timing model's FIFO DMA engines the early weight transfers then delay the latency-critical
 * activation loads and stores queued behind them: BERT-base went from 3.31 to 3.63 ms, so it is not done. */

static uint64_t min_u64(uint64_t a, uint64_t b) { return a < b ? a : b; }
static uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }
static uint64_t align32(uint64_t b) { return (b + 31) & ~(uint64_t)31; }

typedef struct lin_ctx {
    tern_view out, a, w, bias, res;
    tern_act_func act;
    uint64_t M, K, N;
    tern_dtype adt, wdt;
    int pe_mode;    /* v3+: transpose_pe */
    int cast_first; /* cast a to w's dtype before transposing (else the PSUM copy casts) */
    tern_dtype sdt; /* dtype of the rows that go through the PE array */
    tern_dtype pdt; /* PSUM dtype of the transposes */
    uint64_t TK, R, TN; /* K chunk (PE rows), row tile (PE columns), output tile width */
    uint64_t KT, KTF, KR; /* K chunks, full ones, rows of the ragged last one (0: none) */
    uint64_t G;     /* K chunks transposed into one PSUM bank */
    uint64_t MB;    /* row tiles per block of M */
    uint64_t XL;    /* row tiles of a staged in SBUF at once */
    uint64_t WC;    /* output tiles per weight block */
    uint64_t NB;    /* columns per weight block (WC * TN) */
    uint64_t KP;    /* full K chunks per weight part (one DMA each) */
    uint64_t PARTS; /* parts per weight block (the ragged K tail is a part of its own) */
    uint64_t WAVE;  /* output tiles accumulating in PSUM at once */
    uint64_t D;     /* weight blocks in flight */
    uint64_t lookahead; /* row tiles transposed ahead of the first one a wave of matmuls needs */
    uint64_t PB;    /* partitions of the bias tiles */
    int bias_pe;    /* the bias added in PSUM by a K = 1 multiply closing each group (one row tile, fp32 bias) */
    tern_view ones; /* bias_pe: the stationary of those multiplies, [1, PB] ones */
    int qstore;     /* the DMA queue of every store to out */
    tern_view ident;
    /* the fused layer norm (tern_lib_linear_ln) */
    int ln;
    tern_view gamma, beta; /* HBM rows */
    tern_view pre;         /* the output before the norm, stored too (optional) */
    tern_view g_t, b_t, eps_t; /* their broadcast tiles [PB, N], eps [PB, 1] */
    float eps;
    uint64_t BN, NCH; /* bn_stats chunk, chunks per row */
    uint64_t TPR;     /* output tiles per row */
    /* the pair (tern_lib_linear_pair): the first layer's output and the second's input, one SBUF tile [M, N1] */
    tern_view out_sb, a_sb;
    tern_view *keep_rows;   /* the pair's first layer: its staged rows of a stay on chip here (not released) */
    tern_view res_sb;       /* the pair's second layer: its residual is those rows (a view of them, not loaded) */
    tern_view norm_sb;      /* the fused norm's output rows [M, N] fp32 kept in SBUF for the next kernel */
    int norm_store;         /* with norm_sb: whether the rows are stored to out too */
    uint64_t reserve;       /* SBUF bytes per partition the plan leaves to others (the pair's second layer) */
    struct lin_ctx *next;   /* the pair's second layer: its first weight blocks load after this layer's last */
    struct lin_wblock *wb;  /* the weight blocks (nblocks), wloaded of them loaded (or in flight) */
    tern_view *parts_buf;
    uint64_t nblocks, wloaded;
} lin_ctx;

typedef struct lin_wblock {
    tern_view *parts; /* PARTS tiles: [TK, chunks x nw] for each group of KP full K chunks, [KR, nw] for the tail */
    tern_view bias;
    uint64_t n0, nw;
} lin_wblock;

/* Full K chunks per part for blocks of nb columns: about 4 KiB per partition (512 KiB a DMA). */
static uint64_t part_chunks(const lin_ctx *L, uint64_t nb)
{
    uint64_t kp = 4096 / (nb * tern_dtype_size(L->wdt));
    return kp ? kp : 1;
}

/* Bytes per partition of one weight block of `wc` tiles of width `tn` (weights, bias rows). */
static uint64_t wblock_bytes(const lin_ctx *L, uint64_t wc, uint64_t tn)
{
    uint64_t nb = wc * tn, ew = tern_dtype_size(L->wdt), b = 0, kp = part_chunks(L, nb);
    for (uint64_t c0 = 0; c0 < L->KTF; c0 += kp)
        b += align32(min_u64(kp, L->KTF - c0) * nb * ew);
    if (L->KR)
        b += align32(nb * ew);
    if (L->bias.region >= 0)
        b += align32(nb * 4);
    return b;
}

/* Full K chunks [c0, c0+nc) x columns [n0, n0+nw) of w as [TK partitions][nc][nw]: partition p, chunk c reads
 * row (c0 + c)*TK + p, so one DMA fills a [TK, nc*nw] tile whose column block c is K chunk c0 + c. */
static tern_view w_chunks_view(const lin_ctx *L, uint64_t c0, uint64_t nc, uint64_t n0, uint64_t nw)
{
    tern_view v = L->w;
    int64_t s0 = v.ap.dims[0].step, s1 = v.ap.dims[1].step;
    v.ap.offset = (uint64_t)((int64_t)v.ap.offset +
                             ((int64_t)(c0 * L->TK) * s0 + (int64_t)n0 * s1) * (int64_t)tern_dtype_size(L->wdt));
    v.ap.num_partitions = (uint16_t)L->TK;
    v.ap.partition_step = s0;
    v.ap.dims[0].num = (uint32_t)nc;
    v.ap.dims[0].step = (int32_t)(s0 * (int64_t)L->TK);
    v.ap.dims[1].num = (uint32_t)nw;
    v.ap.dims[1].step = (int32_t)s1;
    return v;
}

static void load_bias(tern_kernel *k, const lin_ctx *L, lin_wblock *wb)
{
    tern_view brow = tern_view_rank(&L->bias) == 1 ? tern_view_slice(k, L->bias, 0, wb->n0, wb->n0 + wb->nw, 1)
                                                   : tern_view_block(k, L->bias, 0, 1, wb->n0, wb->n0 + wb->nw);
    if (L->bias_pe) { /* the row on one partition: the moving operand of each group's closing K = 1 multiply */
        wb->bias = tern_kernel_sbuf(k, TERN_DTYPE_FP32, 1, (uint32_t)wb->nw, "linear_bias_row");
        tern_kernel_load(k, wb->bias, kview_row(brow));
        return;
    }
    wb->bias = tern_kernel_sbuf(k, TERN_DTYPE_FP32, (uint32_t)L->PB, (uint32_t)wb->nw, "linear_bias");
    tern_lib_broadcast_row(k, wb->bias, brow);
}

/* One DMA per part, in K order; the bias rows after the first part (before it when there is one part), so
 * neither the first matmuls nor the last wait for them. */
static void load_wblock(tern_kernel *k, const lin_ctx *L, uint64_t b, lin_wblock *wb)
{
    wb->n0 = b * L->NB;
    wb->nw = min_u64(L->NB, L->N - wb->n0);
    wb->bias = kview_invalid();
    int has_bias = L->bias.region >= 0;
    if (has_bias && L->PARTS == 1)
        load_bias(k, L, wb);
    uint64_t p = 0;
    for (uint64_t c0 = 0; c0 < L->KTF; c0 += L->KP, p++) {
        uint64_t nc = min_u64(L->KP, L->KTF - c0);
        wb->parts[p] = tern_kernel_sbuf(k, L->wdt, (uint32_t)L->TK, (uint32_t)(nc * wb->nw), "linear_w");
        tern_kernel_load(k, wb->parts[p], w_chunks_view(L, c0, nc, wb->n0, wb->nw));
        if (p == 0 && has_bias && L->PARTS > 1)
            load_bias(k, L, wb);
    }
    if (L->KR) {
        uint64_t k0 = L->KTF * L->TK;
        wb->parts[p] = tern_kernel_sbuf(k, L->wdt, (uint32_t)L->KR, (uint32_t)wb->nw, "linear_w_tail");
        tern_kernel_load(k, wb->parts[p], tern_view_block(k, L->w, k0, L->K, wb->n0, wb->n0 + wb->nw));
        if (p == 0 && has_bias && L->PARTS > 1)
            load_bias(k, L, wb);
    }
}

static void release_wblock(tern_kernel *k, const lin_ctx *L, lin_wblock *wb)
{
    for (uint64_t p = 0; p < L->PARTS; p++)
        if (wb->parts[p].region >= 0)
            tern_kernel_release(k, wb->parts[p]);
    if (wb->bias.region >= 0)
        tern_kernel_release(k, wb->bias);
}

/* Rows [r0, r0+r) of a, loaded in a's dtype. */
static tern_view load_rows(tern_kernel *k, const lin_ctx *L, uint64_t r0, uint64_t r)
{
    if (L->a_sb.region >= 0) /* the pair's second layer: the rows are on chip already (one row tile) */
        return L->a_sb;
    tern_view x = tern_kernel_sbuf(k, L->adt, (uint32_t)r, (uint32_t)L->K, "linear_a");
    tern_kernel_load(k, x, tern_view_block(k, L->a, r0, r0 + r, 0, L->K));
    return x;
}

/* aT [TK, KT*r] in w's dtype from the staged rows x [r, K] (released here): chunk c is columns [c*r, c*r+r)
 * on partitions [0, rows of chunk c). */
static void transpose_rows(tern_kernel *k, const lin_ctx *L, tern_view x, tern_view aT, uint64_t r)
{
    tern_view src = x;
    if (L->cast_first) {
        src = tern_kernel_sbuf(k, L->wdt, (uint32_t)r, (uint32_t)L->K, "linear_a_cast");
        tern_lib_copy_scalar(k, src, x); /* on v2 only -0 changes (to +0), as v2's transpose does */
        if (!L->keep_rows)
            tern_kernel_release(k, x);
    }
    for (uint64_t g0 = 0; g0 < L->KT && !k->failed;) {
        /* A group: up to G full chunks, or the ragged last chunk alone (one copy needs equal partitions). */
        uint64_t kk = g0 < L->KTF ? L->TK : L->KR;
        uint64_t g1 = g0 < L->KTF ? min_u64(g0 + L->G, L->KTF) : g0 + 1;
        tern_view ps = tern_kernel_psum(k, L->pdt, (uint32_t)kk, (uint32_t)((g1 - g0) * r), "linear_tpsum");
        for (uint64_t c = g0; c < g1; c++) {
            tern_view piece = tern_view_block(k, src, 0, r, c * L->TK, c * L->TK + kk);
            tern_view dst = tern_view_block(k, ps, 0, kk, (c - g0) * r, (c - g0 + 1) * r);
            tern_lib_transpose_block(k, dst, piece, L->ident);
        }
        tern_kernel_tensor_copy(k, TERN_ENGINE_VECTOR, tern_view_block(k, aT, 0, kk, g0 * r, g1 * r), ps);
        tern_kernel_release(k, ps);
        g0 = g1;
    }
    if (L->keep_rows)
        *L->keep_rows = x; /* the rows of a, in a's dtype: the second layer's residual */
    if (!L->keep_rows || src.region != x.region)
        tern_kernel_release(k, src);
}

/* The row tiles of one block of M: staged rows of a (xs) and their transposes (aT), built lazily. */
typedef struct {
    uint64_t mt0, nm; /* first row tile, row tiles */
    uint64_t loaded;  /* row tiles whose rows are loaded (or being loaded) */
    uint64_t built;   /* row tiles transposed */
    tern_view *xs, *aT;
} lin_rows;

static void rows_load_next(tern_kernel *k, const lin_ctx *L, lin_rows *rows)
{
    uint64_t r0 = (rows->mt0 + rows->loaded) * L->R;
    rows->xs[rows->loaded] = load_rows(k, L, r0, min_u64(L->R, L->M - r0));
    rows->loaded++;
}

/* Transpose row tiles up to `last` (in order, each just before the first matmuls that need it, so TensorE
 * interleaves them with the first weight block's work); each one transposed lets the next staged rows load. */
static void rows_ready(tern_kernel *k, const lin_ctx *L, lin_rows *rows, uint64_t last)
{
    while (rows->built <= last && rows->built < rows->nm && !k->failed) {
        uint64_t i = rows->built, r0 = (rows->mt0 + i) * L->R;
        transpose_rows(k, L, rows->xs[i], rows->aT[i], min_u64(L->R, L->M - r0));
        rows->built++;
        if (rows->loaded < rows->nm)
            rows_load_next(k, L, rows);
    }
}

/* The epilogue of tern_lib_bias_act on output tile ps [r, cw] (columns [c0, c0+cw) of weight block wb, rows
 * from row0), reading PSUM: the same instructions, so the same bits; then the store. Releases ps. */
static tern_view epilogue(tern_kernel *k, const lin_ctx *L, tern_view ps, uint64_t row0, uint64_t r,
                          const lin_wblock *wb, uint64_t c0, uint64_t cw, tern_view res)
{
    const int bias_tile = wb->bias.region >= 0 && !L->bias_pe; /* else the bias is in ps already, or none */
    if (L->out_sb.region >= 0) {
        /* The pair's first layer (no residual, no norm): the last instruction writes the on-chip output in its
         * dtype, the same conversion of the same fp32 values as the store's (with RNE rounding). */
        tern_view d = tern_view_block(k, L->out_sb, row0, row0 + r, wb->n0 + c0, wb->n0 + c0 + cw);
        if (bias_tile && L->act != TERN_ACT_COPY) {
            tern_view o = tern_kernel_sbuf(k, TERN_DTYPE_FP32, (uint32_t)r, (uint32_t)cw, "linear_out");
            tern_kernel_tensor_tensor(k, TERN_ENGINE_VECTOR, o, ps, tern_view_block(k, wb->bias, 0, r, c0, c0 + cw),
                                      TERN_ALU_ADD);
            tern_kernel_activation(k, d, o, L->act, 1.0f, kview_invalid(), kview_invalid(), kview_invalid());
            tern_kernel_release(k, o);
        } else if (bias_tile) {
            tern_kernel_tensor_tensor(k, TERN_ENGINE_VECTOR, d, ps, tern_view_block(k, wb->bias, 0, r, c0, c0 + cw),
                                      TERN_ALU_ADD);
        } else if (L->act != TERN_ACT_COPY) {
            tern_kernel_activation(k, d, ps, L->act, 1.0f, kview_invalid(), kview_invalid(), kview_invalid());
        } else {
            tern_kernel_tensor_copy(k, TERN_ENGINE_VECTOR, d, ps);
        }
        tern_kernel_release(k, ps);
        return kview_invalid();
    }
    tern_view o = tern_kernel_sbuf(k, TERN_DTYPE_FP32, (uint32_t)r, (uint32_t)cw, "linear_out");
    if (bias_tile) {
        tern_view b = tern_view_block(k, wb->bias, 0, r, c0, c0 + cw);
        tern_kernel_tensor_tensor(k, TERN_ENGINE_VECTOR, o, ps, b, TERN_ALU_ADD);
        if (L->act != TERN_ACT_COPY)
            tern_kernel_activation(k, o, o, L->act, 1.0f, kview_invalid(), kview_invalid(), kview_invalid());
    } else if (L->act != TERN_ACT_COPY) {
        tern_kernel_activation(k, o, ps, L->act, 1.0f, kview_invalid(), kview_invalid(), kview_invalid());
    } else if (res.region < 0) {
        tern_kernel_tensor_copy(k, TERN_ENGINE_VECTOR, o, ps);
    }
    /* the residual (loaded when the tile's group opened): the fp32 add an Add node after the layer would do */
    if (res.region >= 0) {
        int plain = !bias_tile && L->act == TERN_ACT_COPY; /* o = ps + res, the copy folded in */
        tern_kernel_tensor_tensor(k, TERN_ENGINE_VECTOR, o, plain ? ps : o, res, TERN_ALU_ADD);
        if (res.region != L->res_sb.region) /* a view of the kept rows stays for the other tiles */
            tern_kernel_release(k, res);
    }
    tern_kernel_release(k, ps);
    if (L->ln)
        return o; /* normalised with the rest of its row (ln_row), then stored */
    /* All stores on one queue: stores to out from different queues would each wait for the previous one. */
    tern_kernel_dma_copy(k, tern_view_block(k, L->out, row0, row0 + r, wb->n0 + c0, wb->n0 + c0 + cw), o,
                         L->qstore);
    tern_kernel_release(k, o);
    return kview_invalid();
}

/* The layer norm of one row tile (rows row0.., r of them) whose output tiles o[0..TPR) hold the whole row:
 * tern_lib_layernorm's sequence (bn_stats per chunk of BN columns in row order, bn_aggr, rsqrt(var + eps) on
 * ScalarE, (x - mean) * rstd, * gamma, + beta), tile by tile for the elementwise steps, then the stores. */
static void ln_row(tern_kernel *k, const lin_ctx *L, tern_view *o, uint64_t row0, uint64_t r)
{
    tern_view stats = tern_kernel_sbuf(k, TERN_DTYPE_FP32, (uint32_t)r, (uint32_t)(L->NCH * 6), "linear_ln_stats");
    tern_view mv = tern_kernel_sbuf(k, TERN_DTYPE_FP32, (uint32_t)r, 3, "linear_ln_mv");
    tern_view mean = tern_view_slice(k, mv, 1, 0, 1, 1), var = tern_view_slice(k, mv, 1, 1, 2, 1);
    tern_view rstd = tern_view_slice(k, mv, 1, 2, 3, 1);
    for (uint64_t ch = 0; ch < L->NCH; ch++) {
        uint64_t c0 = ch * L->BN, c1 = min_u64(L->N, c0 + L->BN), j = c0 / L->TN, t0 = j * L->TN;
        tern_kernel_bn_stats(k, tern_view_slice(k, stats, 1, ch * 6, ch * 6 + 6, 1),
                             tern_view_block(k, o[j], 0, r, c0 - t0, c1 - t0));
    }
    tern_kernel_bn_aggr(k, tern_view_slice(k, mv, 1, 0, 2, 1), stats);
    tern_kernel_activation(k, rstd, var, TERN_ACT_RSQRT, 1.0f, tern_view_slice(k, L->eps_t, 0, 0, r, 1),
                           kview_invalid(), kview_invalid());
    for (uint64_t j = 0; j < L->TPR; j++) {
        uint64_t c0 = j * L->TN, cw = min_u64(L->TN, L->N - c0);
        /* Every store from ScalarE's DMA queue, like tern_lib_layernorm's: SyncE's stream (the next kernel's
         * loads) never waits behind the norm. With the pre-norm output kept, the tile is stored as it is and the
         * norm goes to a tile of its own (no wait for that store). */
        tern_view t = o[j];
        if (L->norm_sb.region >= 0) /* the norm's rows written where the next kernel reads them */
            t = tern_view_block(k, L->norm_sb, row0, row0 + r, c0, c0 + cw);
        else if (L->pre.region >= 0)
            t = tern_kernel_sbuf(k, TERN_DTYPE_FP32, (uint32_t)r, (uint32_t)cw, "linear_ln_out");
        if (L->pre.region >= 0)
            tern_kernel_dma_copy_on(k, TERN_ENGINE_SCALAR, tern_view_block(k, L->pre, row0, row0 + r, c0, c0 + cw),
                                    o[j], -1);
        tern_kernel_tensor_scalar_ap(k, TERN_ENGINE_VECTOR, t, o[j], TERN_ALU_SUBTRACT, mean, 0.0f, TERN_ALU_MULT,
                                     rstd, 0.0f, 0);
        tern_kernel_tensor_tensor(k, TERN_ENGINE_VECTOR, t, t, tern_view_block(k, L->g_t, 0, r, c0, c0 + cw),
                                  TERN_ALU_MULT);
        if (L->b_t.region >= 0)
            tern_kernel_tensor_tensor(k, TERN_ENGINE_VECTOR, t, t, tern_view_block(k, L->b_t, 0, r, c0, c0 + cw),
                                      TERN_ALU_ADD);
        if (L->norm_sb.region < 0 || L->norm_store)
            tern_kernel_dma_copy_on(k, TERN_ENGINE_SCALAR, tern_view_block(k, L->out, row0, row0 + r, c0, c0 + cw), t,
                                    -1);
        if (t.region != o[j].region && t.region != L->norm_sb.region)
            tern_kernel_release(k, t);
        tern_kernel_release(k, o[j]);
    }
    tern_kernel_release(k, stats);
    tern_kernel_release(k, mv);
}

/* Every output tile of weight block wb for the nm row tiles whose aT tiles are given (first row row0). Tiles
 * go in waves of WAVE accumulation groups (PSUM banks) open at once, and within a wave the K loop is outside:
 * part by part, each tile takes that part's K chunks, so TensorE starts on the first part while the others
 * are still in flight; each tile still accumulates its K tiles in ascending order in one group. */
static void block_tiles(tern_kernel *k, const lin_ctx *L, lin_rows *rows, const lin_wblock *wb)
{
    const uint64_t nm = rows->nm, row0 = rows->mt0 * L->R, tpr = ceil_div(wb->nw, L->TN), ntiles = nm * tpr;
    const tern_view *aT = rows->aT;
    tern_view ps[16], rs[16], os[16];
    for (uint64_t t0 = 0; t0 < ntiles && !k->failed; t0 += L->WAVE) {
        const uint64_t nt = min_u64(L->WAVE, ntiles - t0);
        rows_ready(k, L, rows, (t0 + nt - 1) / tpr + L->lookahead);
        for (uint64_t p = 0, kt = 0; p < L->PARTS && !k->failed; p++) {
            const uint64_t kt0 = kt, nc = p * L->KP < L->KTF ? min_u64(L->KP, L->KTF - p * L->KP) : 1;
            for (uint64_t t = 0; t < nt && !k->failed; t++) {
                uint64_t i = (t0 + t) / tpr, c0 = (t0 + t) % tpr * L->TN, cw = min_u64(L->TN, wb->nw - c0);
                uint64_t r0 = row0 + i * L->R, r = min_u64(L->R, L->M - r0);
                if (p == 0) {
                    ps[t] = tern_kernel_psum(k, TERN_DTYPE_FP32, (uint32_t)r, (uint32_t)cw, "linear_psum");
                    rs[t] = kview_invalid();
                    if (L->res_sb.region >= 0) { /* on chip already (the pair's first layer's rows) */
                        rs[t] = tern_view_block(k, L->res_sb, r0, r0 + r, wb->n0 + c0, wb->n0 + c0 + cw);
                    } else if (L->res.region >= 0) { /* in flight while the group accumulates */
                        rs[t] = tern_kernel_sbuf(k, TERN_DTYPE_FP32, (uint32_t)r, (uint32_t)cw, "linear_residual");
                        tern_kernel_load(k, rs[t],
                                         tern_view_block(k, L->res, r0, r0 + r, wb->n0 + c0, wb->n0 + c0 + cw));
                    }
                }
                for (uint64_t c = kt0; c < kt0 + nc; c++) {
                    uint64_t kk = c < L->KTF ? L->TK : L->KR, pc = c - kt0;
                    tern_view st = tern_view_block(k, aT[i], 0, kk, c * r, c * r + r);
                    tern_view mv = tern_view_block(k, wb->parts[p], 0, kk, pc * wb->nw + c0, pc * wb->nw + c0 + cw);
                    tern_kernel_matmul(k, ps[t], st, mv, c > 0);
                }
                if (p == L->PARTS - 1) {
                    if (L->bias_pe) /* ps += ones[1, r]^T @ bias[1, cw]: the chain +0 + 1 * b = b on each sum */
                        tern_kernel_matmul(k, ps[t], tern_view_block(k, L->ones, 0, 1, 0, r),
                                           tern_view_block(k, wb->bias, 0, 1, c0, c0 + cw), 1);
                    os[t] = epilogue(k, L, ps[t], r0, r, wb, c0, cw, rs[t]);
                    if (L->ln && (t0 + t) % tpr == tpr - 1) /* the row's last tile: normalise the row */
                        ln_row(k, L, &os[t + 1 - tpr], r0, r);
                }
            }
            kt = kt0 + nc;
        }
    }
}

/* A 2-D HBM view, checked (names the kernel and the operand on failure). */
static int need_hbm_2d(tern_kernel *k, const char *what, const tern_view *v)
{
    char label[48];
    snprintf(label, sizeof label, "linear %s", what);
    if (!kview_ok(k, v, label))
        return 0;
    if (v->ap.mem != TERN_MEM_HBM || tern_view_rank(v) != 2 || v->ap.num_partitions != 1) {
        kfail(k, TERN_ERR_INVALID, "linear: %s must be a 2-D HBM view, is a rank-%u %s view", what,
              tern_view_rank(v), tern_mem_name((tern_mem)v->ap.mem));
        return 0;
    }
    return 1;
}

/* Choose the blocking (row tiles per M block, staged rows, weight block width and depth) for the core's SBUF;
 * 0 (and a recorded error) when even the smallest blocking does not fit. */
static int plan(tern_kernel *k, lin_ctx *L, int quiet)
{
    const uint64_t SB = k->cfg.sbuf_partition_bytes > L->reserve ? k->cfg.sbuf_partition_bytes - L->reserve : 0;
    const uint64_t ew = tern_dtype_size(L->wdt), ea = tern_dtype_size(L->adt);
    const uint64_t MT = ceil_div(L->M, L->R), NT0 = L->TN;
    const uint64_t ident = L->pe_mode ? 0 : align32(L->R * tern_dtype_size(L->sdt));
    const uint64_t aT = align32(L->KT * L->R * ew);
    const uint64_t xs = align32(L->K * ea) + (L->cast_first ? align32(L->K * ew) : 0);
    /* slack: room for the allocator's fragmentation (transient row tiles between long-lived ones) */
    const uint64_t wave = k->cfg.psum_banks / 2 ? (k->cfg.psum_banks / 2 > 16 ? 16 : k->cfg.psum_banks / 2) : 1;
    /* the fused layer norm keeps a wave of output tiles, the gamma and beta rows and the statistics */
    const uint64_t lnb = L->ln ? (L->pre.region >= 0 ? 2 : 1) * wave * align32(NT0 * 4) + 2 * align32(L->N * 4) +
                                     align32(L->NCH * 24) + 96
                               : 0;
    const uint64_t otile = 2 * align32(NT0 * 4) + (L->res.region >= 0 ? wave * align32(NT0 * 4) : 0) + lnb,
                   slack = 1024 + xs;
    /* Descriptor-efficient weight rows (>= 4 KiB per partition row) unless N is narrower. */
    uint64_t wc_target = ceil_div(4096, NT0 * ew);
    if (wc_target < 1)
        wc_target = 1;
    wc_target = min_u64(wc_target, ceil_div(L->N, NT0));
    uint64_t MB = min_u64(MT, (SB * 3 / 8) / aT ? (SB * 3 / 8) / aT : 1);
    uint64_t XL = min_u64(MB, (SB / 8) / xs ? (SB / 8) / xs : 1);
    for (;;) {
        uint64_t fixed = ident + MB * aT + XL * xs + otile + slack;
        uint64_t rem = fixed < SB ? SB - fixed : 0;
        for (uint64_t wc = wc_target; wc >= 1; wc--)
            /* double-buffered at least, unless one block covers all of N (then there is nothing to overlap) */
            for (uint64_t d = LIN_MAX_DEPTH; d >= (ceil_div(L->N, wc * NT0) > 1 ? 2u : 1u); d--)
                if (d * wblock_bytes(L, wc, NT0) <= rem) {
                    L->WC = wc;
                    L->D = d;
                    goto found;
                }
        /* Single-buffered, then narrower output tiles (huge K). */
        for (uint64_t tn = NT0; tn >= 64; tn /= 2)
            if (wblock_bytes(L, 1, tn) <= rem) {
                L->TN = tn;
                L->WC = 1;
                L->D = 1;
                goto found;
            }
        if (XL > 1) {
            XL = 1;
            continue;
        }
        if (MB > 1) {
            MB = 1;
            continue;
        }
        if (quiet)
            return 0;
        kfail(k, TERN_ERR_RANGE,
              "linear: K = %llu is too large for SBUF: a row tile needs %llu bytes per partition (staged rows of a "
              "%llu, twice for reuse, aT %llu, 64 columns of w (%s) %llu, output tiles %llu), %s has %llu",
              (unsigned long long)L->K, (unsigned long long)(ident + aT + xs + otile + slack + wblock_bytes(L, 1, 64)),
              (unsigned long long)xs, (unsigned long long)aT, tern_dtype_name(L->wdt),
              (unsigned long long)wblock_bytes(L, 1, 64), (unsigned long long)otile, k->cfg.name,
              (unsigned long long)SB);
        return 0;
    }
found:
    L->MB = MB;
    L->XL = XL;
    L->NB = L->WC * L->TN;
    L->KP = part_chunks(L, L->NB);
    L->PARTS = ceil_div(L->KTF, L->KP) + (L->KR ? 1 : 0);
    L->WAVE = k->cfg.psum_banks / 2 ? k->cfg.psum_banks / 2 : 1;
    if (L->WAVE > 16)
        L->WAVE = 16;
    uint64_t nb = ceil_div(L->N, L->NB);
    if (L->D > nb)
        L->D = nb;
    /* Whatever SBUF is left stages more rows of a ahead (their loads then never wait for free space). */
    uint64_t used = ident + MB * aT + otile + slack + L->D * wblock_bytes(L, L->WC, L->TN);
    if (used + XL * xs < SB)
        XL = min_u64(MB, (SB - used) / xs);
    L->XL = XL ? XL : 1;
    return 1;
}

void tern_lib_linear(tern_kernel *k, tern_view out, tern_view a, tern_view w, tern_view bias, tern_act_func act)
{
    tern_lib_linear_residual(k, out, a, w, bias, act, tern_view_none());
}

/* A [N] or [1, N] float HBM view (gamma, beta of the fused layer norm). */
static int ln_vector_ok(tern_kernel *k, const char *what, const tern_view *v, uint64_t N)
{
    char label[48];
    snprintf(label, sizeof label, "linear %s", what);
    if (!kview_ok(k, v, label))
        return 0;
    unsigned r = tern_view_rank(v);
    if (!(r == 1 || (r == 2 && tern_view_dim(v, 0) == 1)) || tern_view_dim(v, r - 1) != N ||
        v->ap.mem != TERN_MEM_HBM || !tern_dtype_is_float((tern_dtype)v->ap.dtype)) {
        kfail(k, TERN_ERR_INVALID, "linear: layer norm %s must be a float HBM [%llu] or [1, %llu] view", what,
              (unsigned long long)N, (unsigned long long)N);
        return 0;
    }
    return 1;
}

static int linear_run(tern_kernel *k, tern_view out, tern_view a, tern_view w, tern_view bias, tern_act_func act,
                      tern_view residual, const tern_view *gamma, const tern_view *beta, float eps, int weights_first,
                      tern_view pre);

void tern_lib_linear_residual(tern_kernel *k, tern_view out, tern_view a, tern_view w, tern_view bias,
                              tern_act_func act, tern_view residual)
{
    (void)linear_run(k, out, a, w, bias, act, residual, NULL, NULL, 0.0f, 0, kview_invalid());
}

int tern_lib_linear_ln(tern_kernel *k, tern_view out, tern_view a, tern_view w, tern_view bias, tern_act_func act,
                       tern_view residual, tern_view gamma, tern_view beta, float eps)
{
    return linear_run(k, out, a, w, bias, act, residual, &gamma, &beta, eps, 0, kview_invalid());
}

int tern_lib_linear_ext(tern_kernel *k, tern_view out, tern_view a, tern_view w, tern_view bias, tern_act_func act,
                        const tern_linear_ext *x)
{
    int ln = x->gamma.region >= 0;
    return linear_run(k, out, a, w, bias, act, x->residual, ln ? &x->gamma : NULL, ln ? &x->beta : NULL, x->eps,
                      x->weights_first, ln ? x->pre_out : kview_invalid());
}

/* Checks the operands and fills L's shapes, dtypes and tiling constants (what the plan needs). The pair's
 * on-chip operands are not views yet: with a_on_chip, a is absent and L->M, L->K, L->adt are set by the caller;
 * with out_on_chip, out is absent and odt is its dtype. 0 with an error recorded. */
static int lin_setup(tern_kernel *k, lin_ctx *L, tern_view out, tern_view a, tern_view w, tern_view bias,
                     tern_act_func act, tern_view residual, const tern_view *gamma, const tern_view *beta, float eps,
                     tern_view pre, int a_on_chip, int out_on_chip, tern_dtype odt)
{
    if ((!out_on_chip && !need_hbm_2d(k, "out", &out)) || (!a_on_chip && !need_hbm_2d(k, "a", &a)) ||
        !need_hbm_2d(k, "w", &w))
        return 0;
    uint64_t M = a_on_chip ? L->M : tern_view_dim(&a, 0), K = a_on_chip ? L->K : tern_view_dim(&a, 1);
    tern_dtype adt = a_on_chip ? L->adt : (tern_dtype)a.ap.dtype;
    uint64_t oM = out_on_chip ? M : tern_view_dim(&out, 0), oN = out_on_chip ? tern_view_dim(&w, 1) : tern_view_dim(&out, 1);
    if (!out_on_chip)
        odt = (tern_dtype)out.ap.dtype;
    if (residual.region >= 0 &&
        (!need_hbm_2d(k, "residual", &residual) || !tern_dtype_is_float((tern_dtype)residual.ap.dtype) ||
         tern_view_dim(&residual, 0) != oM || tern_view_dim(&residual, 1) != oN)) {
        if (!k->failed)
            kfail(k, TERN_ERR_INVALID, "linear: residual is a %s [%llu, %llu], must be a float [%llu, %llu] like out",
                  tern_dtype_name((tern_dtype)residual.ap.dtype), (unsigned long long)tern_view_dim(&residual, 0),
                  (unsigned long long)tern_view_dim(&residual, 1), (unsigned long long)oM, (unsigned long long)oN);
        return 0;
    }
    memset(L, 0, sizeof *L);
    L->pre = L->out_sb = L->a_sb = L->res_sb = L->norm_sb = kview_invalid();
    L->res = residual;
    L->out = out;
    L->a = a;
    L->w = w;
    L->bias = bias;
    L->act = act;
    L->M = M;
    L->K = K;
    L->N = tern_view_dim(&w, 1);
    L->adt = adt;
    L->wdt = (tern_dtype)w.ap.dtype;
    if (tern_view_dim(&w, 0) != L->K) {
        kfail(k, TERN_ERR_INVALID, "linear: contraction mismatch: a is [%llu, %llu] but w is [%llu, %llu]",
              (unsigned long long)L->M, (unsigned long long)L->K, (unsigned long long)tern_view_dim(&w, 0),
              (unsigned long long)L->N);
        return 0;
    }
    if (oM != L->M || oN != L->N) {
        kfail(k, TERN_ERR_INVALID,
              "linear: out is [%llu, %llu], expected [%llu, %llu] (a [%llu, %llu] @ w [%llu, %llu])",
              (unsigned long long)oM, (unsigned long long)oN, (unsigned long long)L->M, (unsigned long long)L->N,
              (unsigned long long)L->M, (unsigned long long)L->K, (unsigned long long)L->K, (unsigned long long)L->N);
        return 0;
    }
    if (!tern_dtype_is_float(L->adt) || !ktensor_dtype(L->wdt) || !tern_dtype_is_float(odt)) {
        kfail(k, TERN_ERR_INVALID,
              "linear: a is %s, w is %s, out is %s: w must be a TensorE dtype (fp32, bf16, fp16, fp8), a and out "
              "floats",
              tern_dtype_name(L->adt), tern_dtype_name(L->wdt), tern_dtype_name(odt));
        return 0;
    }
    if (bias.region >= 0) {
        if (!kview_ok(k, &bias, "linear bias"))
            return 0;
        unsigned br = tern_view_rank(&bias);
        if (!(br == 1 || (br == 2 && tern_view_dim(&bias, 0) == 1)) || tern_view_dim(&bias, br - 1) != L->N ||
            bias.ap.mem != TERN_MEM_HBM || !tern_dtype_is_float((tern_dtype)bias.ap.dtype)) {
            char shape[48];
            if (br == 1)
                snprintf(shape, sizeof shape, "[%llu]", (unsigned long long)tern_view_dim(&bias, 0));
            else
                snprintf(shape, sizeof shape, "[%llu, %llu]", (unsigned long long)tern_view_dim(&bias, 0),
                         (unsigned long long)tern_view_dim(&bias, 1));
            kfail(k, TERN_ERR_INVALID, "linear: bias is %s %s in %s, must be a float HBM [%llu] or [1, %llu] (w is "
                  "[%llu, %llu])",
                  shape, tern_dtype_name((tern_dtype)bias.ap.dtype), tern_mem_name((tern_mem)bias.ap.mem),
                  (unsigned long long)L->N, (unsigned long long)L->N, (unsigned long long)L->K,
                  (unsigned long long)L->N);
            return 0;
        }
    }
    if ((unsigned)act >= TERN_ACT_COUNT) {
        kfail(k, TERN_ERR_INVALID, "linear: activation function %d unknown (0..%d)", (int)act, TERN_ACT_COUNT - 1);
        return 0;
    }
    const tern_core_config *c = &k->cfg;
    L->pe_mode = c->generation >= 3;
    /* a's [R, TK] blocks go through the array twice: transposed (R rows contracted, TK stationary columns) and
     * as the stationary aT [TK, R] of the product, so both edges fit the smaller side of the array (the
     * machine's, whatever its shape) */
    L->TK = min_u64(min_u64(c->pe_rows, c->pe_cols), c->partitions);
    L->R = L->TK;
    L->TN = min_u64(c->moving_free_max, c->psum_bank_bytes / 4);
    L->KT = ceil_div(L->K, L->TK);
    L->KTF = L->K / L->TK;
    L->KR = L->K % L->TK;
    /* v3+ transposes a in its own dtype when TensorE takes it (the PSUM copy then casts, for free); v2's
     * identity matmul would cost 4 passes in fp32, so a is cast first there. */
    L->cast_first = L->adt != L->wdt && !(L->pe_mode && ktensor_dtype(L->adt));
    L->sdt = L->cast_first ? L->wdt : L->adt;
    L->pdt = L->pe_mode ? L->sdt : TERN_DTYPE_FP32;
    L->G = c->psum_bank_bytes / (L->R * tern_dtype_size(L->pdt));
    if (L->G < 1)
        L->G = 1;
    L->PB = min_u64(c->partitions, L->M);
    if (L->KTF && (int64_t)w.ap.dims[0].step * (int64_t)L->TK > INT32_MAX) {
        kfail(k, TERN_ERR_RANGE, "linear: w's row stride of %d elements is too large for a 128-row chunk step",
              w.ap.dims[0].step);
        return 0;
    }
    if (gamma) {
        if (!ln_vector_ok(k, "gamma", gamma, L->N) || (beta->region >= 0 && !ln_vector_ok(k, "beta", beta, L->N)))
            return 0;
        if (pre.region >= 0 && (!need_hbm_2d(k, "pre_out", &pre) || tern_view_dim(&pre, 0) != L->M ||
                                tern_view_dim(&pre, 1) != L->N || !tern_dtype_is_float((tern_dtype)pre.ap.dtype))) {
            if (!k->failed)
                kfail(k, TERN_ERR_INVALID, "linear: pre_out must be a float [%llu, %llu] like out",
                      (unsigned long long)L->M, (unsigned long long)L->N);
            return 0;
        }
        L->ln = 1;
        L->pre = pre;
        L->gamma = *gamma;
        L->beta = *beta;
        L->eps = eps;
        L->BN = k->cfg.bn_stats_free_max ? k->cfg.bn_stats_free_max : 512;
        L->NCH = ceil_div(L->N, L->BN);
    }
    return 1;
}

/* The plan, then the layer-norm conditions: 0 (nothing emitted; an error recorded unless quiet) when it does
 * not fit. */
static int lin_plan(tern_kernel *k, lin_ctx *L, int quiet)
{
    if (!plan(k, L, quiet))
        return 0;
    if (L->ln) { /* a row in one weight block and one wave of groups, chunks of the norm inside output tiles */
        L->TPR = ceil_div(L->N, L->TN);
        if (L->NB < L->N || L->TN % L->BN || L->TPR > L->WAVE || L->TPR > 16)
            return 0;
        L->WAVE = L->WAVE / L->TPR * L->TPR;
    }
    L->nblocks = ceil_div(L->N, L->NB);
    return 1;
}

static int lin_alloc_blocks(tern_kernel *k, lin_ctx *L)
{
    L->wb = calloc(L->nblocks, sizeof *L->wb);
    L->parts_buf = calloc(L->nblocks * L->PARTS, sizeof *L->parts_buf);
    if (!L->wb || !L->parts_buf) {
        kfail(k, TERN_ERR_NOMEM, "linear: out of memory");
        return 0;
    }
    for (uint64_t b = 0; b < L->nblocks; b++)
        L->wb[b].parts = L->parts_buf + b * L->PARTS;
    return 1;
}

static void lin_free_blocks(lin_ctx *L)
{
    free(L->parts_buf);
    free(L->wb);
    L->parts_buf = NULL;
    L->wb = NULL;
}

/* Issue the loads of weight blocks up to n (exclusive). After a layer's last block, the pair's second layer's
 * first blocks follow (its weights stream while this layer computes, ahead of nothing else on the queue). */
static void wload_to(tern_kernel *k, lin_ctx *L, uint64_t n)
{
    while (L->wloaded < n && L->wloaded < L->nblocks && !k->failed) {
        load_wblock(k, L, L->wloaded, &L->wb[L->wloaded]);
        L->wloaded++;
    }
    if (L->next && L->wloaded == L->nblocks) {
        lin_ctx *nx = L->next;
        L->next = NULL;
        wload_to(k, nx, min_u64(nx->D, nx->nblocks));
    }
}

/* The layer's instructions (after lin_setup and lin_plan, with the weight blocks allocated). */
static void lin_emit(tern_kernel *k, lin_ctx *L, int weights_first)
{
    L->qstore = (int)kpick_queue(k, TERN_ENGINE_SYNC, -1);
    L->g_t = L->b_t = L->eps_t = kview_invalid();

    const uint64_t MT = ceil_div(L->M, L->R), nblocks = L->nblocks;
    L->ident = kview_invalid();
    /* With one row tile each bias column serves one output group, so a K = 1 multiply closing the group adds it
     * in PSUM for the TensorE time the broadcast takes, without the broadcast tile's evacuation and the add (an
     * fp32 row on at least 16 partitions: then tern_lib_broadcast_row would make the same chain, +0 + 1 * b, on
     * TensorE, and VectorE would add it to the same sum, so the bits are the same). */
    L->bias_pe = L->bias.region >= 0 && MT == 1 && L->PB >= 16 && L->bias.ap.dtype == TERN_DTYPE_FP32;
    L->ones = kview_invalid();
    if (L->bias_pe) {
        L->ones = tern_kernel_sbuf(k, TERN_DTYPE_FP32, 1, (uint32_t)L->PB, "linear_bias_ones");
        tern_kernel_memset(k, TERN_ENGINE_GPSIMD, L->ones, 1.0f);
    }
    if (!L->pe_mode) {
        uint32_t n = (uint32_t)min_u64(L->R, L->M);
        L->ident = tern_kernel_sbuf(k, L->sdt, n, n, "linear_identity");
        tern_lib_identity(k, L->ident);
    }
    tern_view *aT = calloc(L->MB, sizeof *aT), *xs = calloc(L->MB, sizeof *xs);
    if (!aT || !xs) {
        kfail(k, TERN_ERR_NOMEM, "linear: out of memory");
        goto done;
    }
    if (L->ln) { /* the norm's constants first: tiny loads, and TensorE broadcasts them while the rows load */
        L->eps_t = tern_kernel_sbuf(k, TERN_DTYPE_FP32, (uint32_t)L->PB, 1, "linear_ln_eps");
        tern_kernel_memset(k, TERN_ENGINE_GPSIMD, L->eps_t, L->eps);
        L->g_t = tern_kernel_sbuf(k, (tern_dtype)L->gamma.ap.dtype, (uint32_t)L->PB, (uint32_t)L->N, "linear_ln_gamma");
        tern_lib_broadcast_row(k, L->g_t, L->gamma);
        if (L->beta.region >= 0) {
            L->b_t = tern_kernel_sbuf(k, (tern_dtype)L->beta.ap.dtype, (uint32_t)L->PB, (uint32_t)L->N, "linear_ln_beta");
            tern_lib_broadcast_row(k, L->b_t, L->beta);
        }
    }
    for (uint64_t mt0 = 0; mt0 < MT && !k->failed; mt0 += L->MB) {
        lin_rows rows = {mt0, min_u64(L->MB, MT - mt0), 0, 0, xs, aT};
        if (mt0 > 0)
            L->wloaded = 0; /* each block of M streams the weights again */
        /* The block's aT tiles live longest: placed first, so the transient tiles do not split SBUF. */
        for (uint64_t i = 0; i < rows.nm; i++) {
            uint64_t r = min_u64(L->R, L->M - (mt0 + i) * L->R);
            aT[i] = tern_kernel_sbuf(k, L->wdt, (uint32_t)L->TK, (uint32_t)(L->KT * r), "linear_aT");
        }
        /* Rows of a that take no more bytes than twice w: all the staged rows load first and every row tile
         * is transposed before the first matmul (in the shadow of the weight loads). More: the first rows
         * (no more bytes than the first weight block), that block, the other staged rows; each row tile is
         * transposed just ahead of the first matmuls that need it, so TensorE starts before all rows are in.
         * Then the other weight blocks in flight; the remaining rows load as transposes free their space. */
        const uint64_t row_bytes = L->R * L->K * tern_dtype_size(L->adt);
        const uint64_t w0_bytes = L->K * min_u64(L->NB, L->N) * tern_dtype_size(L->wdt);
        const int lazy = rows.nm * row_bytes > 2 * L->K * L->N * tern_dtype_size(L->wdt);
        L->lookahead = lazy ? 1 : rows.nm;
        if (weights_first && mt0 == 0)
            wload_to(k, L, 1);
        rows_load_next(k, L, &rows);
        while (rows.loaded < min_u64(L->XL, rows.nm) && (!lazy || (rows.loaded + 1) * row_bytes <= w0_bytes))
            rows_load_next(k, L, &rows);
        wload_to(k, L, 1);
        while (rows.loaded < min_u64(L->XL, rows.nm))
            rows_load_next(k, L, &rows);
        wload_to(k, L, min_u64(L->D, nblocks));
        for (uint64_t b = 0; b < nblocks && !k->failed; b++) {
            /* Prefetch: the block D-1 ahead goes where the previous block was (its loads wait for TensorE). */
            if (b > 0)
                wload_to(k, L, min_u64(b + L->D, nblocks));
            block_tiles(k, L, &rows, &L->wb[b]);
            release_wblock(k, L, &L->wb[b]);
        }
        for (uint64_t i = 0; i < rows.nm; i++)
            if (!k->failed)
                tern_kernel_release(k, aT[i]);
    }
    if (L->ident.region >= 0 && !k->failed)
        tern_kernel_release(k, L->ident);
    if (L->ones.region >= 0 && !k->failed)
        tern_kernel_release(k, L->ones);
    if (!k->failed) {
        if (L->g_t.region >= 0)
            tern_kernel_release(k, L->g_t);
        if (L->b_t.region >= 0)
            tern_kernel_release(k, L->b_t);
        if (L->eps_t.region >= 0)
            tern_kernel_release(k, L->eps_t);
    }
done:
    free(aT);
    free(xs);
}

/* Returns 0, having emitted nothing, when the layer norm cannot be fused (see tern_lib_linear_ln); else 1. */
static int linear_run(tern_kernel *k, tern_view out, tern_view a, tern_view w, tern_view bias, tern_act_func act,
                      tern_view residual, const tern_view *gamma, const tern_view *beta, float eps, int weights_first,
                      tern_view pre)
{
    lin_ctx L;
    if (!lin_setup(k, &L, out, a, w, bias, act, residual, gamma, beta, eps, pre, 0, 0, TERN_DTYPE_FP32))
        return 1;
    if (!lin_plan(k, &L, L.ln))
        return L.ln && !k->failed ? 0 : 1;
    if (lin_alloc_blocks(k, &L))
        lin_emit(k, &L, weights_first);
    lin_free_blocks(&L);
    return 1;
}

/* An SBUF tile of float rows [at most one row tile, *] (the rows of a a kernel before left on chip), checked. */
static int rows_ok(tern_kernel *k, const char *what, const tern_view *rows)
{
    char label[48];
    snprintf(label, sizeof label, "linear %s", what);
    if (!kview_ok(k, rows, label))
        return 0;
    const tern_core_config *c = &k->cfg;
    const uint64_t T = min_u64(min_u64(c->pe_rows, c->pe_cols), c->partitions);
    if (rows->ap.mem != TERN_MEM_SBUF || tern_view_rank(rows) != 2 || rows->ap.num_partitions == 0 ||
        rows->ap.num_partitions > T || !tern_dtype_is_float((tern_dtype)rows->ap.dtype)) {
        kfail(k, TERN_ERR_INVALID, "linear: %s must be a float 2-D SBUF tile of at most %llu partitions, is a rank-%u "
              "%s %s view of %u partitions",
              what, (unsigned long long)T, tern_view_rank(rows), tern_dtype_name((tern_dtype)rows->ap.dtype),
              tern_mem_name((tern_mem)rows->ap.mem), (unsigned)rows->ap.num_partitions);
        return 0;
    }
    return 1;
}

/* tern_lib_linear_ext on a from HBM, or on rows already in SBUF (rows valid); with norm valid, the fused norm's
 * rows also stay there (stored to out too when store). */
static int rows_run(tern_kernel *k, tern_view out, tern_view a, tern_view rows, tern_view w, tern_view bias,
                    tern_act_func act, const tern_linear_ext *x, tern_view norm, int store)
{
    const int on_chip = rows.region >= 0, ln = x && x->gamma.region >= 0;
    if (on_chip && !rows_ok(k, "rows", &rows))
        return 1;
    lin_ctx L;
    memset(&L, 0, sizeof L);
    if (on_chip) {
        L.M = tern_view_dim(&rows, 0);
        L.K = tern_view_dim(&rows, 1);
        L.adt = (tern_dtype)rows.ap.dtype;
    }
    if (!lin_setup(k, &L, out, on_chip ? tern_view_none() : a, w, bias, act, x ? x->residual : tern_view_none(),
                   ln ? &x->gamma : NULL, ln ? &x->beta : NULL, x ? x->eps : 0.0f, ln ? x->pre_out : kview_invalid(),
                   on_chip, 0, TERN_DTYPE_FP32))
        return 1;
    if (norm.region >= 0) {
        if (!ln) {
            kfail(k, TERN_ERR_INVALID, "linear: rows of the norm kept on chip, but no layer norm is asked for");
            return 1;
        }
        if (!kview_ok(k, &norm, "linear norm rows"))
            return 1;
        if (norm.ap.mem != TERN_MEM_SBUF || norm.ap.dtype != TERN_DTYPE_FP32 || tern_view_rank(&norm) != 2 ||
            tern_view_dim(&norm, 0) != L.M || tern_view_dim(&norm, 1) != L.N) {
            kfail(k, TERN_ERR_INVALID, "linear: the norm's rows must be an fp32 SBUF tile [%llu, %llu]",
                  (unsigned long long)L.M, (unsigned long long)L.N);
            return 1;
        }
        L.reserve = align32(L.N * 4); /* the tile, placed already */
    }
    if (!lin_plan(k, &L, L.ln))
        return L.ln && !k->failed ? 0 : 1;
    if (on_chip)
        L.a_sb = rows;
    L.norm_sb = norm;
    L.norm_store = store;
    if (lin_alloc_blocks(k, &L))
        lin_emit(k, &L, x ? x->weights_first : 0);
    lin_free_blocks(&L);
    return 1;
}

int tern_lib_linear_rows(tern_kernel *k, tern_view out, tern_view rows, tern_view w, tern_view bias, tern_act_func act,
                         const tern_linear_ext *x)
{
    if (!rows_ok(k, "rows", &rows))
        return 1;
    return rows_run(k, out, tern_view_none(), rows, w, bias, act, x, kview_invalid(), 1);
}

int tern_lib_linear_keep_norm(tern_kernel *k, tern_view out, tern_view a, tern_view rows, tern_view w, tern_view bias,
                              tern_act_func act, const tern_linear_ext *x, tern_view norm, int store)
{
    if (!x || x->gamma.region < 0) {
        kfail(k, TERN_ERR_INVALID, "linear: rows of the norm kept on chip, but no layer norm is asked for");
        return 1;
    }
    return rows_run(k, out, a, rows, w, bias, act, x, norm, store);
}

/* The pair on a from HBM, or on rows already in SBUF (rows valid; res_rows: the second layer's residual is those
 * rows, and x's residual is not read). */
static int pair_run(tern_kernel *k, tern_view out, tern_view a, tern_view rows, int res_rows, tern_view w1,
                    tern_view b1, tern_act_func act1, tern_view w2, tern_view b2, tern_act_func act2,
                    const tern_linear_ext *x)
{
    const int on_chip = rows.region >= 0;
    if ((on_chip ? !rows_ok(k, "rows", &rows) : !need_hbm_2d(k, "a", &a)) || !need_hbm_2d(k, "w", &w1) ||
        !need_hbm_2d(k, "w2", &w2))
        return 1;
    const tern_core_config *c = &k->cfg;
    const uint64_t M = tern_view_dim(on_chip ? &rows : &a, 0), N1 = tern_view_dim(&w1, 1);
    const tern_dtype mdt = (tern_dtype)w2.ap.dtype;
    if (!ktensor_dtype(mdt) || tern_view_dim(&w2, 0) != N1) {
        kfail(k, TERN_ERR_INVALID, "linear pair: w2 is %s [%llu, %llu], must be a TensorE dtype with %llu rows (w1 "
              "is [%llu, %llu])",
              tern_dtype_name(mdt), (unsigned long long)tern_view_dim(&w2, 0),
              (unsigned long long)tern_view_dim(&w2, 1), (unsigned long long)N1,
              (unsigned long long)tern_view_dim(&w1, 0), (unsigned long long)N1);
        return 1;
    }
    /* one row tile: the middle [M, N1] is one SBUF tile on M partitions */
    if (M == 0 || M > min_u64(min_u64(c->pe_rows, c->pe_cols), c->partitions))
        return 0;
    int ln = x && x->gamma.region >= 0;
    lin_ctx L1, L2;
    memset(&L1, 0, sizeof L1);
    if (on_chip) {
        L1.M = M;
        L1.K = tern_view_dim(&rows, 1);
        L1.adt = (tern_dtype)rows.ap.dtype;
    }
    const lin_ctx L1in = L1; /* the on-chip shape, for a second setup */
    if (!lin_setup(k, &L1, tern_view_none(), on_chip ? tern_view_none() : a, w1, b1, act1, tern_view_none(), NULL, NULL,
                   0.0f, kview_invalid(), on_chip, 1, mdt))
        return 1;
    memset(&L2, 0, sizeof L2);
    L2.M = M;
    L2.K = N1;
    L2.adt = mdt;
    if (!lin_setup(k, &L2, out, tern_view_none(), w2, b2, act2, x && !res_rows ? x->residual : tern_view_none(),
                   ln ? &x->gamma : NULL, ln ? &x->beta : NULL, x ? x->eps : 0.0f, ln ? x->pre_out : kview_invalid(),
                   1, 0, mdt))
        return 1;
    /* A residual that is the first layer's input (a post-LN FFN: BERT's) is read from the first layer's rows of
     * a, kept on chip, instead of loaded again (the same values: the load would only widen them to fp32). */
    tern_view kept = kview_invalid();
    const int keep = on_chip ? res_rows
                             : x && x->residual.region == a.region && !memcmp(&x->residual.ap, &a.ap, sizeof a.ap);
    if (keep)
        L2.reserve = align32(L1.K * tern_dtype_size(L1.adt));
    /* The second layer's plan as if alone (its staged rows are the middle tile); the first layer's leaves room
     * for the middle tile and the second's first weight blocks (loaded during the first layer), or failing that
     * for the middle tile alone (the second's weights then load after). */
    if (!lin_plan(k, &L2, 1))
        return 0;
    const uint64_t mid = align32(N1 * tern_dtype_size(mdt));
    int prefetch = 1;
    L1.reserve = mid + min_u64(L2.D, L2.nblocks) * wblock_bytes(&L2, L2.WC, L2.TN);
    if (!lin_plan(k, &L1, 1)) {
        prefetch = 0;
        L1 = L1in;
        lin_setup(k, &L1, tern_view_none(), on_chip ? tern_view_none() : a, w1, b1, act1, tern_view_none(), NULL, NULL,
                  0.0f, kview_invalid(), on_chip, 1, mdt);
        L1.reserve = mid;
        if (!lin_plan(k, &L1, 1))
            return 0;
    }
    if (lin_alloc_blocks(k, &L1) && lin_alloc_blocks(k, &L2)) {
        tern_view midt = tern_kernel_sbuf(k, mdt, (uint32_t)M, (uint32_t)N1, "linear_pair_mid");
        L1.out_sb = L2.a_sb = midt;
        if (on_chip)
            L1.a_sb = rows; /* released once transposed, or kept below as the residual */
        L1.next = prefetch ? &L2 : NULL;
        L1.keep_rows = keep ? &kept : NULL;
        lin_emit(k, &L1, x ? x->weights_first : 0); /* the first layer's rows of a (the second's are on chip) */
        L2.res_sb = kept;
        lin_emit(k, &L2, 0); /* releases the middle tile once transposed */
        if (kept.region >= 0 && !k->failed)
            tern_kernel_release(k, kept);
    }
    lin_free_blocks(&L1);
    lin_free_blocks(&L2);
    return 1;
}

int tern_lib_linear_pair(tern_kernel *k, tern_view out, tern_view a, tern_view w1, tern_view b1, tern_act_func act1,
                         tern_view w2, tern_view b2, tern_act_func act2, const tern_linear_ext *x)
{
    return pair_run(k, out, a, kview_invalid(), 0, w1, b1, act1, w2, b2, act2, x);
}

int tern_lib_linear_pair_rows(tern_kernel *k, tern_view out, tern_view rows, int residual_is_rows, tern_view w1,
                              tern_view b1, tern_act_func act1, tern_view w2, tern_view b2, tern_act_func act2,
                              const tern_linear_ext *x)
{
    return pair_run(k, out, kview_invalid(), rows, residual_is_rows, w1, b1, act1, w2, b2, act2, x);
}
