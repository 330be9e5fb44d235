/* tern's kernel library: tested kernels built with the kernel API (kernel.h). Each function appends its
 * instructions to a kernel under construction, reading and writing the views it is given, so library kernels
 * compose into bigger ones. Each is checked against a float64 reference in tests/kernel/. */
#ifndef TERN_KERNEL_LIB_H
#define TERN_KERNEL_LIB_H

#include "tern/kernel.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Blocking of the GEMM, in tiles (a tile is 128 x 128 stationary, 128 x 512 moving on NeuronCore-v2). The
 * defaults (0) are the NKI matrix-multiplication tutorial's fully optimised kernel: 16 x 2 x 8 tiles, i.e.
 * blocks of M=2048, N=1024, K=1024, SBUF accumulators in the input dtype. */
typedef struct {
    unsigned tiles_in_block_m, tiles_in_block_n, tiles_in_block_k;
    int acc_dtype; /* tern_dtype of the SBUF accumulators across K blocks; -1 = the lhsT dtype (tutorial) */
} tern_gemm_opts;

void tern_gemm_opts_default(tern_gemm_opts *o);

/* out[M,N] = lhsT[K,M]^T @ rhs[K,N] with HBM views of any M, N, K (ragged edges handled), inputs in any
 * TensorE dtype (fp8 e4m3/e5m2, bf16, fp16, fp32), out in any float dtype. Blocked as in the NKI tutorial:
 * rhs loads hoisted out of the M loop, lhsT loads out of the N-tile loop, one PSUM accumulation group per
 * output tile per K block, partial sums accumulated in SBUF across K blocks. */
void tern_lib_gemm(tern_kernel *k, tern_view out, tern_view lhsT, tern_view rhs, const tern_gemm_opts *opts);

#ifdef __cplusplus
}
#endif
#endif
