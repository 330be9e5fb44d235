/* The published NKI tutorial kernels that calibrate tern's timing model (../shared/reference/calibration.md C6),
 * rebuilt with tern's kernel API from the tutorials' public descriptions (aws-neuron-sdk general/nki/tutorials/
 * matrix_multiplication.rst, layernorm.rst, fused_mamba.rst at SDK 2.20-2.23): the matmul tutorial's "original
 * tiled" kernel, LayerNorm version 1 and fused Mamba version 1. Each builder appends the kernel to k and records
 * errors in k (check tern_kernel_status). Header-only so bench_calibration and tests/kernel/test_calib_tutorials
 * build the same programs. Where a tutorial leaves a choice to the Neuron compiler (buffer count of a loop, the
 * engine of an nki.language operation) the choice made here is stated beside it. */
#ifndef TERN_BENCH_TUTORIAL_KERNELS_H
#define TERN_BENCH_TUTORIAL_KERNELS_H

#include <stdint.h>

#include "tern/kernel.h"

/* Buffers of each tile rotated by a loop: the Neuron compiler allocates several for an affine_range loop so the
 * next iteration's loads overlap this one's compute; tern's rebuild takes a small fixed ring. */
#define TUT_RING 4

/* Stores are triggered from GpSimd's instruction stream (idle in these kernels): a store waits for its tile's
 * last instruction, and on the Sync stream that wait would hold back the next iteration's loads, which the Neuron
 * compiler schedules ahead of it. */
static inline void tut_store(tern_kernel *k, tern_view dst, tern_view src)
{
    tern_kernel_dma_copy_on(k, TERN_ENGINE_GPSIMD, dst, src, -1);
}

/* Loads go to one queue, as an NKI kernel's nl.load calls do (the Neuron profile shows a kernel's input DMAs on
 * one queue, qSyncIO0: nki/deep-dives/nki_perf_guide.rst), not round-robin over queues as tern's builder
 * would choose. */
static inline void tut_load(tern_kernel *k, tern_view dst, tern_view src) { tern_kernel_dma_copy(k, dst, src, 0); }

/* Matmul tutorial, "original tiled": out[M,N] = lhsT[K,M]^T @ rhs[K,N], M tiles of 128, N tiles of 512, K tiles
 * of 128; the innermost loop loads both operand tiles and accumulates into one PSUM tile, which is copied to SBUF
 * (VectorE) and stored after the K loop. No operand reuse across iterations. */
static inline void tut_matmul_tiled(tern_kernel *k, uint64_t M, uint64_t N, uint64_t K)
{
    tern_view lhsT = tern_kernel_input2d(k, "lhsT", TERN_DTYPE_BF16, K, M);
    tern_view rhs = tern_kernel_input2d(k, "rhs", TERN_DTYPE_BF16, K, N);
    tern_view out = tern_kernel_output2d(k, "out", TERN_DTYPE_BF16, M, N);
    tern_view lt[TUT_RING], rt[TUT_RING];
    for (int i = 0; i < TUT_RING; i++) {
        lt[i] = tern_kernel_sbuf(k, TERN_DTYPE_BF16, 128, 128, "lhsT_tile");
        rt[i] = tern_kernel_sbuf(k, TERN_DTYPE_BF16, 128, 512, "rhs_tile");
    }
    unsigned it = 0;
    for (uint64_t m = 0; m < M / 128; m++)
        for (uint64_t n = 0; n < N / 512; n++) {
            tern_view ps = tern_kernel_psum(k, TERN_DTYPE_FP32, 128, 512, "res_psum");
            for (uint64_t kk = 0; kk < K / 128; kk++, it++) {
                tern_view l = lt[it % TUT_RING], r = rt[it % TUT_RING];
                tut_load(k, l, tern_view_block(k, lhsT, kk * 128, kk * 128 + 128, m * 128, m * 128 + 128));
                tut_load(k, r, tern_view_block(k, rhs, kk * 128, kk * 128 + 128, n * 512, n * 512 + 512));
                tern_kernel_matmul(k, ps, l, r, kk > 0);
            }
            tern_view sb = tern_kernel_sbuf(k, TERN_DTYPE_BF16, 128, 512, "res_sb");
            tern_kernel_tensor_copy(k, TERN_ENGINE_VECTOR, sb, ps);
            tut_store(k, tern_view_block(k, out, m * 128, m * 128 + 128, n * 512, n * 512 + 512), sb);
            tern_kernel_release(k, sb);
            tern_kernel_release(k, ps);
        }
}

/* A [P, n] SBUF tile holding the HBM row [1, n] on every partition (a partition-axis broadcast_to of a loaded
 * row): one DMA whose source rows all start at the row. */
static inline void tut_load_bcast(tern_kernel *k, tern_view dst, tern_view row)
{
    tern_view src = row;
    src.ap.num_partitions = dst.ap.num_partitions;
    src.ap.partition_step = 0;
    tut_load(k, dst, src);
}

/* LayerNorm tutorial, version 1 (nki.language only), fp32 [rows, cols]: per 128-row tile, mean by a VectorE
 * reduction (N cycles), the variance as mean(x^2) - mean^2 with the square on VectorE (2N) and its mean on
 * ScalarE (an activation with accumulation, N) -- the tutorial's "N ScalarE + 2N VectorE" --, rsqrt(var + eps)
 * in two small instructions, the shift and the scale as two VectorE passes (2N), then * gamma + beta with the
 * broadcast parameter rows (two tensor_tensor passes). */
static inline void tut_layernorm_v1(tern_kernel *k, uint64_t rows, uint32_t cols)
{
    tern_view x = tern_kernel_input2d(k, "x", TERN_DTYPE_FP32, rows, cols);
    tern_view gam = tern_kernel_input2d(k, "gamma", TERN_DTYPE_FP32, 1, cols);
    tern_view bet = tern_kernel_input2d(k, "beta", TERN_DTYPE_FP32, 1, cols);
    tern_view y = tern_kernel_output2d(k, "y", TERN_DTYPE_FP32, rows, cols);
    tern_view g = tern_kernel_sbuf(k, TERN_DTYPE_FP32, 128, cols, "gamma_bcast");
    tern_view b = tern_kernel_sbuf(k, TERN_DTYPE_FP32, 128, cols, "beta_bcast");
    tut_load_bcast(k, g, gam);
    tut_load_bcast(k, b, bet);
    const float inv_n = 1.0f / (float)cols;
    /* Buffers: two input tiles in turn (the next tile loads while this one is computed), one work tile, and the
     * output written over the input once the shift has read it -- gamma and beta take 2 x 32 KiB per partition
     * at 8192 columns, so this is what fits in SBUF. */
    tern_view xs[2], t, mean, msq, var;
    xs[0] = tern_kernel_sbuf(k, TERN_DTYPE_FP32, 128, cols, "input_sb");
    xs[1] = tern_kernel_sbuf(k, TERN_DTYPE_FP32, 128, cols, "input_sb");
    t = tern_kernel_sbuf(k, TERN_DTYPE_FP32, 128, cols, "work");
    mean = tern_kernel_sbuf(k, TERN_DTYPE_FP32, 128, 1, "mean");
    msq = tern_kernel_sbuf(k, TERN_DTYPE_FP32, 128, 1, "mean_sq");
    var = tern_kernel_sbuf(k, TERN_DTYPE_FP32, 128, 1, "var");
    unsigned it = 0;
    for (uint64_t r0 = 0; r0 < rows; r0 += 128, it++) {
        uint32_t P = (uint32_t)(rows - r0 < 128 ? rows - r0 : 128);
        tern_view xt = tern_view_block(k, xs[it % 2], 0, P, 0, cols), tt = tern_view_block(k, t, 0, P, 0, cols);
        tern_view mn = tern_view_block(k, mean, 0, P, 0, 1), ms = tern_view_block(k, msq, 0, P, 0, 1);
        tern_view vr = tern_view_block(k, var, 0, P, 0, 1);
        tut_load(k, xt, tern_view_block(k, x, r0, r0 + P, 0, cols));
        tern_kernel_tensor_reduce(k, mn, xt, TERN_ALU_ADD, 1, 0);
        tern_kernel_tensor_scalar(k, TERN_ENGINE_VECTOR, mn, mn, TERN_ALU_MULT, inv_n, TERN_ALU_BYPASS, 0);
        tern_kernel_tensor_tensor(k, TERN_ENGINE_VECTOR, tt, xt, xt, TERN_ALU_MULT);
        tern_kernel_activation(k, tt, tt, TERN_ACT_COPY, inv_n, tern_view_none(), tern_view_none(), ms);
        tern_kernel_tensor_tensor(k, TERN_ENGINE_VECTOR, vr, mn, mn, TERN_ALU_MULT);
        tern_kernel_tensor_tensor(k, TERN_ENGINE_VECTOR, vr, ms, vr, TERN_ALU_SUBTRACT);
        tern_kernel_tensor_scalar(k, TERN_ENGINE_VECTOR, vr, vr, TERN_ALU_ADD, 1e-5f, TERN_ALU_BYPASS, 0);
        tern_kernel_activation(k, vr, vr, TERN_ACT_RSQRT, 1.0f, tern_view_none(), tern_view_none(),
                               tern_view_none());
        tern_kernel_tensor_scalar_ap(k, TERN_ENGINE_VECTOR, tt, xt, TERN_ALU_SUBTRACT, mn, 0, TERN_ALU_BYPASS,
                                     tern_view_none(), 0, 0);
        tern_kernel_tensor_scalar_ap(k, TERN_ENGINE_VECTOR, tt, tt, TERN_ALU_MULT, vr, 0, TERN_ALU_BYPASS,
                                     tern_view_none(), 0, 0);
        tern_kernel_tensor_tensor(k, TERN_ENGINE_VECTOR, xt, tt, tern_view_block(k, g, 0, P, 0, cols), TERN_ALU_MULT);
        tern_kernel_tensor_tensor(k, TERN_ENGINE_VECTOR, xt, xt, tern_view_block(k, b, 0, P, 0, cols), TERN_ALU_ADD);
        tut_store(k, tern_view_block(k, y, r0, r0 + P, 0, cols), xt);
    }
}

/* Fused Mamba tutorial, version 1 (batch 1), fp32: delta, u [channels, seq], A [channels, state], B, C
 * [state, seq]. For each state and each 128-channel tile: load delta and A's column, deltaA = exp(delta * A) on
 * ScalarE, load u and B's row (broadcast to the partitions), deltaBu = delta * u * B (two VectorE passes), the
 * associative scan of deltaA and deltaBu (tensor_tensor_scan), times C's broadcast row, accumulated over the
 * states into an SBUF accumulator per channel tile; the accumulators are stored at the end. */
static inline void tut_mamba_v1(tern_kernel *k, uint32_t channels, uint32_t seq, uint32_t state)
{
    tern_view delta = tern_kernel_input2d(k, "delta", TERN_DTYPE_FP32, channels, seq);
    tern_view u = tern_kernel_input2d(k, "u", TERN_DTYPE_FP32, channels, seq);
    tern_view A = tern_kernel_input2d(k, "A", TERN_DTYPE_FP32, channels, state);
    tern_view B = tern_kernel_input2d(k, "B", TERN_DTYPE_FP32, state, seq);
    tern_view C = tern_kernel_input2d(k, "C", TERN_DTYPE_FP32, state, seq);
    tern_view out = tern_kernel_output2d(k, "out", TERN_DTYPE_FP32, channels, seq);
    uint32_t tiles = channels / 128;
    tern_view acc[16];
    if (tiles > 16)
        tiles = 16;
    for (uint32_t c = 0; c < tiles; c++) {
        acc[c] = tern_kernel_sbuf(k, TERN_DTYPE_FP32, 128, seq, "scanC_accum");
        tern_kernel_memset(k, TERN_ENGINE_VECTOR, acc[c], 0.0f);
    }
    for (uint32_t s = 0; s < state; s++)
        for (uint32_t c = 0; c < tiles; c++) {
            uint64_t c0 = (uint64_t)c * 128;
            tern_view d = tern_kernel_sbuf(k, TERN_DTYPE_FP32, 128, seq, "delta_i");
            tern_view a = tern_kernel_sbuf(k, TERN_DTYPE_FP32, 128, 1, "A_i");
            tern_view da = tern_kernel_sbuf(k, TERN_DTYPE_FP32, 128, seq, "deltaA");
            tern_view ui = tern_kernel_sbuf(k, TERN_DTYPE_FP32, 128, seq, "u_i");
            tern_view bi = tern_kernel_sbuf(k, TERN_DTYPE_FP32, 128, seq, "B_i");
            tern_view du = tern_kernel_sbuf(k, TERN_DTYPE_FP32, 128, seq, "deltaU");
            tern_view sc = tern_kernel_sbuf(k, TERN_DTYPE_FP32, 128, seq, "scan_res");
            tern_view ci = tern_kernel_sbuf(k, TERN_DTYPE_FP32, 128, seq, "C_i");
            tut_load(k, d, tern_view_block(k, delta, c0, c0 + 128, 0, seq));
            tut_load(k, a, tern_view_block(k, A, c0, c0 + 128, s, s + 1));
            tern_kernel_activation(k, da, d, TERN_ACT_EXP, 1.0f, tern_view_none(), a, tern_view_none());
            tut_load(k, ui, tern_view_block(k, u, c0, c0 + 128, 0, seq));
            tut_load_bcast(k, bi, tern_view_block(k, B, s, s + 1, 0, seq));
            tern_kernel_tensor_tensor(k, TERN_ENGINE_VECTOR, du, d, ui, TERN_ALU_MULT);
            tern_kernel_tensor_tensor(k, TERN_ENGINE_VECTOR, du, du, bi, TERN_ALU_MULT);
            tern_kernel_tensor_tensor_scan(k, sc, da, du, TERN_ALU_MULT, TERN_ALU_ADD, 0.0f);
            tut_load_bcast(k, ci, tern_view_block(k, C, s, s + 1, 0, seq));
            tern_kernel_tensor_tensor(k, TERN_ENGINE_VECTOR, sc, sc, ci, TERN_ALU_MULT);
            tern_kernel_tensor_tensor(k, TERN_ENGINE_VECTOR, acc[c], acc[c], sc, TERN_ALU_ADD);
            tern_kernel_release(k, ci);
            tern_kernel_release(k, sc);
            tern_kernel_release(k, du);
            tern_kernel_release(k, bi);
            tern_kernel_release(k, ui);
            tern_kernel_release(k, da);
            tern_kernel_release(k, a);
            tern_kernel_release(k, d);
        }
    for (uint32_t c = 0; c < tiles; c++)
        tut_store(k, tern_view_block(k, out, (uint64_t)c * 128, (uint64_t)c * 128 + 128, 0, seq), acc[c]);
}

#endif
