/* Private to sim: the TensorE multiply (matmul.c) — the reference loop that defines the result, and the two
 * fast paths that reproduce it bit for bit (AVX512-BF16 dot products; the fp32 FMA chain vectorised). */
#ifndef TERN_SIM_MATMUL_H
#define TERN_SIM_MATMUL_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "sim/host_threads.h"
#include "tern/base.h"

/* out[m*N+n] = fma-chain over k ascending of s[k*M+m] * x[k*N+n], starting from +0. */
void matmul_reference(const float *s, const float *x, float *out, uint32_t K, uint32_t M, uint32_t N);
/* The same when the moving operand is the identity (a transpose): 1 if it applied, 0 (nothing written) if not. */
int matmul_identity(const float *s, const float *x, float *out, uint32_t K, uint32_t M, uint32_t N);

/* The fp32 fma chain vectorised across outputs (AVX-512 or AVX2+FMA), bit-identical to matmul_reference. */
int matmul_f32_supported(void);
void matmul_f32_run(tern_pool *pool, const float *s, const float *x, float *out, uint32_t K, uint32_t M, uint32_t N);
/* The three above with the moving operand's rows xs floats apart (x[k*xs+n]: read in place from SBUF rows). */
void matmul_reference_rows(const float *s, const float *x, size_t xs, float *out, uint32_t K, uint32_t M, uint32_t N);
int matmul_identity_rows(const float *s, const float *x, size_t xs, float *out, uint32_t K, uint32_t M, uint32_t N);
void matmul_f32_run_rows(tern_pool *pool, const float *s, const float *x, size_t xs, float *out, uint32_t K, uint32_t M,
                         uint32_t N);

/* The stationary [K][M] in panels of PANEL_W columns for the kernel below: panel p holds, k-major, the PANEL_W
 * values of columns [p*PANEL_W, p*PANEL_W + PANEL_W) of each row (zero past M). matmul_panel_floats floats.
 * matmul_pack_panels_bf16 spreads rows over the pool's threads (NULL: the caller alone); the same panels either way. */
#define PANEL_W 6
size_t matmul_panel_floats(uint32_t K, uint32_t M);
void matmul_pack_panels_bf16(tern_pool *pool, const uint16_t *rows, size_t stride, uint32_t K, uint32_t M,
                             float *panels);
void matmul_pack_panels_f32(const float *s, uint32_t K, uint32_t M, float *panels);
void matmul_panels_to_f32(const float *panels, uint32_t K, uint32_t M, float *s);

/* matmul_identity for a stationary in panels, written to fp32 rows (row m at out + m*out_stride bytes; accumulate:
 * old + result), the moving operand known to be the K x K identity: 1 if it applied, 0 (nothing written) if a
 * stationary value is not finite. */
int matmul_identity_panels(const float *panels, uint32_t K, uint32_t M, uint8_t *out, size_t out_stride,
                           int accumulate);
/* The same from the stationary's bf16 rows as they lie in SBUF (K rows of M, row k at rows + k*stride), without
 * packing them: out[m][n] (+)= rows[n][m] + 0 for m < M, n < K. 1 if it applied, 0 if a value is an infinity or a
 * NaN: then an accumulation has written nothing, an overwrite possibly part of out (to be overwritten by the caller's
 * general path). */
int matmul_transpose_bf16(const uint16_t *rows, size_t stride, uint32_t K, uint32_t M, uint8_t *out, size_t out_stride,
                          int accumulate);
/* K = 1, an outer product (a bias row added to a tile through the array): out[m][n] (+)= fma(s[m], x[n], +0), the
 * chain of one step, straight into fp32 rows (row m at out + m*out_stride bytes; accumulate: old + product). 1 if
 * done, 0 (nothing written) on hosts without AVX-512 or when TERN_SIMD caps it. */
int matmul_outer_rows(const float *s, const float *x, uint8_t *out, size_t out_stride, uint32_t M, uint32_t N,
                      int accumulate);
/* Is the bf16 operand (K rows of W, row k at rows + k*stride) the identity, zeros of either sign off the diagonal? */
int matmul_bf16_is_identity(const uint16_t *rows, size_t stride, uint32_t K, uint32_t W);

/* bf16 moving rows (row k at x_rows + k*x_stride) times the stationary in panels, the fp32 FMA chain (AVX-512, or
 * AVX2 + FMA), written straight to fp32 output rows (row m at out + m*out_stride bytes; accumulate: old + sum, the
 * old values each row's own, or, acc_row non-NULL, acc_row's N values for every row: a bias broadcast kept lazily).
 * Bit-identical to matmul_reference on the widened operands. Returns 0, having written nothing, on hosts without
 * AVX2 + FMA (or when TERN_SIMD caps below avx2), or for K outside [1, 128]. job non-NULL: the multiply may be
 * left to finish on the pool's workers, beside the one posted before it (pool_post with overlap: the caller knows
 * they touch different bytes); *job gets pool_post's generation (0: complete), and the caller joins it (pool_join)
 * before touching the panels, the rows or the output. */
int matmul_f32_bf16x_run(tern_pool *pool, const float *panels, const uint16_t *x_rows, size_t x_stride, uint8_t *out,
                         size_t out_stride, uint32_t K, uint32_t M, uint32_t N, int accumulate, const float *acc_row,
                         unsigned long *job);

/* Which kernel multiplies bf16 operands: *use_dp = 1 for the AVX512-BF16 dot products, 0 for the fp32 FMA chain.
 * TERN_MATMUL=fma|dpbf16 forces one (dpbf16 falls back to the chain on a host without AVX512-BF16); unset or
 * "auto", the faster on this host, timed once per process. Any other value is an error naming it. */
tern_status matmul_choose_kernel(int *use_dp, tern_error *err);

/* Can this host run the bf16 dot-product path? */
int matmul_bf16_supported(void);
/* Is a bf16 value (bits) one the bf16 path reproduces exactly: zero, or magnitude in [2^-50, 2^51)? */
int bf16_fast_ok(uint16_t b);
/* Pack K rows of W bf16 values (row k at rows + k*row_stride) into ceil(K/2) rows of W pairs; returns 1 if
 * every value qualifies for the bf16 path (bf16_fast_ok), 0 otherwise. */
int matmul_pack_pairs(const uint16_t *rows, size_t row_stride, uint32_t K, uint32_t W, uint32_t *pairs);

typedef struct {
    const uint32_t *s;      /* stationary pairs [ceil(K/2)][M] */
    const uint16_t *x_rows; /* moving operand: K rows of N bf16 values, row k at x_rows + k*x_stride */
    size_t x_stride;
    uint32_t *x_pairs;      /* scratch for the moving pairs [ceil(K/2)][N] */
    uint32_t K, M, N;
    uint8_t *out;           /* row m at out + m*out_stride (bytes), fp32 */
    size_t out_stride;
    int accumulate;         /* out = out + sum instead of out = sum */
    int prepacked;          /* x_pairs already holds the moving pairs (cached): skip packing */
    _Atomic int bad;        /* set when a moving value does not qualify */
} bf16_job;

/* Run the bf16 path; returns 0 (having written nothing) when a moving value does not qualify. */
int matmul_bf16_run(tern_pool *pool, bf16_job *j);

#endif
