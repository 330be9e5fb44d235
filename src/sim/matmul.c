/* TensorE arithmetic: the multiply of one MultiplyMoving instruction, out[m][n] = sum_k S[k][m] * X[k][n].
 *
 * The defined result (docs/isa.md): for each output, acc = +0, then acc = fma(S[k][m], X[k][n], acc) for k
 * ascending (one rounding per step, round-to-nearest-even, subnormals kept); an accumulating instruction then
 * writes old + acc. Products of 8- and 16-bit inputs are exact in fp32, so for them fma and multiply-then-add
 * agree. Three implementations give bit-identical results, checked against each other in tests/sim:
 *   - reference: the loop above in C;
 *   - bf16 dot product (AVX512_BF16): vdpbf16ps adds the products of a pair of bf16 elements one after the
 *     other, the odd element first, each rounded to fp32 (Intel SDM pseudo-code; checked on the host by the
 *     tests). Packing the pair as (k+1 in the even slot, k in the odd slot) therefore replays the sequential
 *     order exactly. The instruction flushes subnormal inputs and results, so this path is taken only when
 *     every nonzero input has magnitude in [2^-50, 2^51): then every product and every partial sum is a
 *     multiple of 2^-114 (never subnormal) and below 2^110 (never overflows). bf16 and fp8 inputs qualify
 *     (their values are exactly bf16 values); otherwise the BLAS path runs.
 *   - BLAS (OpenBLAS sgemm): for K <= 128 its microkernels accumulate each output over k in order with FMA.
 * Work is split over the core's thread pool by rows of the output, so results never depend on thread count. */
#include <cblas.h>
#include <string.h>

#include "sim/matmul.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define HAVE_X86 1
#else
#define HAVE_X86 0
#endif

void matmul_reference(const float *s, const float *x, float *out, uint32_t K, uint32_t M, uint32_t N)
{
    for (uint32_t m = 0; m < M; m++)
        for (uint32_t n = 0; n < N; n++) {
            float acc = 0.0f;
            for (uint32_t k = 0; k < K; k++)
                acc = fmaf(s[(size_t)k * M + m], x[(size_t)k * N + n], acc);
            out[(size_t)m * N + n] = acc;
        }
}

void matmul_blas(const float *s, const float *x, float *out, uint32_t K, uint32_t M, uint32_t N)
{
    /* out[M][N] = s[K][M]^T x[K][N] */
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)M, (int)N, (int)K, 1.0f, s, (int)M, x, (int)N, 0.0f, out,
                (int)N);
}

int bf16_fast_ok(uint16_t b)
{
    unsigned e = (b >> 7) & 0xFFu;
    return (b & 0x7FFFu) == 0 || (e >= 127u - 50u && e < 127u + 51u);
}

int matmul_bf16_supported(void)
{
#if HAVE_X86
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bf16");
#else
    return 0;
#endif
}

void matmul_pack_pairs(const uint16_t *rows, size_t row_stride, uint32_t K, uint32_t W, uint32_t *pairs)
{
    uint32_t K2 = (K + 1) / 2;
    for (uint32_t k2 = 0; k2 < K2; k2++) {
        const uint16_t *lo = rows + (size_t)(2 * k2) * row_stride;
        const uint16_t *hi = 2 * k2 + 1 < K ? lo + row_stride : NULL;
        uint32_t *dst = pairs + (size_t)k2 * W;
        /* even slot (low half) = element k+1, odd slot (high half) = element k: vdpbf16ps adds odd first */
        if (hi)
            for (uint32_t w = 0; w < W; w++)
                dst[w] = (uint32_t)hi[w] | ((uint32_t)lo[w] << 16);
        else
            for (uint32_t w = 0; w < W; w++)
                dst[w] = (uint32_t)lo[w] << 16;
    }
}

#if HAVE_X86
#define MB 6
#define NB 4
__attribute__((target("avx512f,avx512bf16"))) static void bf16_rows(const bf16_job *j, uint32_t m_begin,
                                                                      uint32_t m_end)
{
    const uint32_t K2 = (j->K + 1) / 2, N = j->N, M = j->M;
    for (uint32_t m0 = m_begin; m0 < m_end; m0 += MB) {
        uint32_t mb = m_end - m0 < MB ? m_end - m0 : MB;
        for (uint32_t n0 = 0; n0 < N; n0 += 16 * NB) {
            __mmask16 mask[NB];
            for (int v = 0; v < NB; v++) {
                int64_t left = (int64_t)N - (int64_t)(n0 + 16u * (unsigned)v);
                mask[v] = left >= 16 ? (__mmask16)0xFFFF : left <= 0 ? (__mmask16)0 : (__mmask16)((1u << left) - 1u);
            }
            __m512 acc[MB][NB];
            for (int i = 0; i < MB; i++)
                for (int v = 0; v < NB; v++)
                    acc[i][v] = _mm512_setzero_ps();
            if (mb == MB) {
                for (uint32_t k2 = 0; k2 < K2; k2++) {
                    const uint32_t *xr = j->x + (size_t)k2 * N + n0;
                    __m512bh b[NB];
                    for (int v = 0; v < NB; v++)
                        b[v] = (__m512bh)_mm512_maskz_loadu_epi32(mask[v], xr + 16 * v);
                    const uint32_t *sr = j->s + (size_t)k2 * M + m0;
                    for (int i = 0; i < MB; i++) {
                        __m512bh a = (__m512bh)_mm512_set1_epi32((int)sr[i]);
                        for (int v = 0; v < NB; v++)
                            acc[i][v] = _mm512_dpbf16_ps(acc[i][v], a, b[v]);
                    }
                }
            } else {
                for (uint32_t k2 = 0; k2 < K2; k2++) {
                    const uint32_t *xr = j->x + (size_t)k2 * N + n0;
                    __m512bh b[NB];
                    for (int v = 0; v < NB; v++)
                        b[v] = (__m512bh)_mm512_maskz_loadu_epi32(mask[v], xr + 16 * v);
                    const uint32_t *sr = j->s + (size_t)k2 * M + m0;
                    for (uint32_t i = 0; i < mb; i++) {
                        __m512bh a = (__m512bh)_mm512_set1_epi32((int)sr[i]);
                        for (int v = 0; v < NB; v++)
                            acc[i][v] = _mm512_dpbf16_ps(acc[i][v], a, b[v]);
                    }
                }
            }
            for (uint32_t i = 0; i < mb; i++) {
                float *o = (float *)(void *)(j->out + (size_t)(m0 + i) * j->out_stride) + n0;
                for (int v = 0; v < NB; v++) {
                    if (!mask[v])
                        continue;
                    __m512 r = acc[i][v];
                    if (j->accumulate)
                        r = _mm512_add_ps(_mm512_maskz_loadu_ps(mask[v], o + 16 * v), r);
                    _mm512_mask_storeu_ps(o + 16 * v, mask[v], r);
                }
            }
        }
    }
}

static void bf16_part(void *ctx, unsigned part, unsigned nparts)
{
    const bf16_job *j = ctx;
    uint32_t groups = (j->M + MB - 1) / MB;
    uint32_t g0 = (uint32_t)((uint64_t)groups * part / nparts), g1 = (uint32_t)((uint64_t)groups * (part + 1) / nparts);
    uint32_t m0 = g0 * MB, m1 = g1 * MB < j->M ? g1 * MB : j->M;
    if (m0 < m1)
        bf16_rows(j, m0, m1);
}
#endif

void matmul_bf16_run(tern_pool *pool, const bf16_job *j)
{
#if HAVE_X86
    /* Parts: a fixed function of the shape (rows of the output), so results never depend on threads. */
    unsigned groups = (j->M + MB - 1) / MB;
    unsigned parts = pool_threads(pool);
    if (parts > groups)
        parts = groups;
    if ((uint64_t)j->M * j->N * j->K < 32768)
        parts = 1;
    pool_run(pool, bf16_part, (void *)j, parts ? parts : 1);
#else
    (void)pool;
    (void)j;
    TERN_ASSERT(!"bf16 dot-product path requested on a host without it");
#endif
}
