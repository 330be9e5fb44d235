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
 *     (their values are exactly bf16 values); otherwise the fp32 path runs.
 *   - fp32 FMA (AVX-512, or AVX2 + FMA on hosts without it): register-blocked kernels that keep one accumulator per
 *     output and apply the fma chain over k ascending, vectorised across outputs, so they are the reference loop
 *     by construction. For bf16 operands they read the moving rows in place (widened to fp32, exact) against the
 *     stationary packed once per latch into panels. (An earlier version called OpenBLAS sgemm for K <= 128; its
 *     accumulation order depends on the microkernel the library picks for the host CPU, and on an AMD Zen 4 host
 *     it differed from the chain, so the simulator no longer uses a BLAS.) Hosts with neither run the reference.
 * Which of the two runs bf16 operands is chosen per host (matmul_choose_kernel, end of file): the dot products
 * won on AMD Zen 4, the fp32 chain wins on Intel Xeons whose vdpbf16ps issues at a quarter of vfmadd231ps's rate.
 * AMX (TDPBF16PS) is not one of the paths: it adds the accumulator after summing an instruction's products, so
 * it is not the chain once K > 16 (tests/sim/test_amx_semantics.c, docs/isa-semantics.md).
 * Work is split over the core's thread pool by blocks of output columns (and groups of row panels), each output
 * computed whole by one part, so results never depend on the thread count. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sim/matmul.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define HAVE_X86 1
#else
#define HAVE_X86 0
#endif

/* TERN_SIMD caps the vector level as it does for the number conversions (docs/numerics.md): "portable" runs the
 * reference loop, "avx2" the AVX2 kernels; so a test can reach every path on any host. */
static int simd_cap(void)
{
    const char *e = getenv("TERN_SIMD");
    if (!e)
        return 2;
    return !strcmp(e, "portable") ? 0 : !strcmp(e, "avx2") ? 1 : 2;
}

#if HAVE_X86
static int have_avx512f(void) { return simd_cap() >= 2 && __builtin_cpu_supports("avx512f"); }
/* The bf16 kernels' 16-bit masked loads and 256-bit masked stores: AVX-512 BW and VL too. */
static int have_avx512_bwvl(void)
{
    return have_avx512f() && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
}
static int have_avx2_fma(void)
{
    return simd_cap() >= 1 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}
#endif

/* Part `part` of `nparts` of N columns, in whole blocks of `width`: [*c0, *c1). A fixed function of the shape, so
 * the split (and so the result) never depends on the thread count. */
static void col_range(uint32_t N, uint32_t width, unsigned part, unsigned nparts, uint32_t *c0, uint32_t *c1)
{
    uint32_t blocks = (N + width - 1) / width;
    uint32_t b0 = (uint32_t)((uint64_t)blocks * part / nparts), b1 = (uint32_t)((uint64_t)blocks * (part + 1) / nparts);
    *c0 = b0 * width;
    *c1 = b1 * width < N ? b1 * width : N;
}

void matmul_reference(const float *s, const float *x, float *out, uint32_t K, uint32_t M, uint32_t N)
{
    matmul_reference_rows(s, x, N, out, K, M, N);
}

void matmul_reference_rows(const float *s, const float *x, size_t xs, float *out, uint32_t K, uint32_t M, uint32_t N)
{
    for (uint32_t m = 0; m < M; m++)
        for (uint32_t n = 0; n < N; n++) {
            float acc = 0.0f;
            for (uint32_t k = 0; k < K; k++)
                acc = fmaf(s[(size_t)k * M + m], x[(size_t)k * xs + n], acc);
            out[(size_t)m * N + n] = acc;
        }
}

/* A moving operand that is the identity (K == N): how TensorE transposes. The fma chain then reduces to one
 * term: out[m][n] = +0 + s[n][m] (so -0 becomes +0), as long as every stationary value is finite (an infinity or
 * NaN times 0 would poison the chain). Returns 0, having written nothing, when that does not hold. */
int matmul_identity(const float *s, const float *x, float *out, uint32_t K, uint32_t M, uint32_t N)
{
    return matmul_identity_rows(s, x, N, out, K, M, N);
}

int matmul_identity_rows(const float *s, const float *x, size_t xs, float *out, uint32_t K, uint32_t M, uint32_t N)
{
    if (K != N)
        return 0;
    for (uint32_t k = 0; k < K; k++) {
        const float *r = x + (size_t)k * xs;
        for (uint32_t n = 0; n < N; n++)
            if (r[n] != (n == k ? 1.0f : 0.0f))
                return 0;
    }
    for (size_t i = 0; i < (size_t)K * M; i++)
        if (!isfinite(s[i]))
            return 0;
    for (uint32_t m = 0; m < M; m++)
        for (uint32_t n = 0; n < N; n++)
            out[(size_t)m * N + n] = s[(size_t)n * M + m] + 0.0f;
    return 1;
}

int bf16_fast_ok(uint16_t b)
{
    unsigned e = (b >> 7) & 0xFFu;
    return (b & 0x7FFFu) == 0 || (e >= 127u - 50u && e < 127u + 51u);
}

/* 1 when some value of the panels is an infinity or a NaN (exponent all ones); branch-free so it vectorises. */
static int panels_nonfinite(const float *panels, size_t n)
{
    uint32_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &panels[i], 4);
        bad |= (u & 0x7F800000u) == 0x7F800000u;
    }
    return bad != 0;
}

#if HAVE_X86
/* Output row m of a transpose: o[n] (+)= s[n][m] + 0 for n < K, 16 at a time gathered from the panel (stride 6). */
__attribute__((target("avx512f"))) static void transpose_row(const float *src, float *o, uint32_t K, int accumulate)
{
    const __m512i idx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                           _mm512_set1_epi32(PANEL_W));
    const __m512 zero = _mm512_setzero_ps();
    for (uint32_t n = 0; n < K; n += 16) {
        __mmask16 mk = K - n >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (K - n)) - 1u);
        __m512 v = _mm512_add_ps(_mm512_mask_i32gather_ps(zero, mk, idx, src + (size_t)n * PANEL_W, 4), zero);
        if (accumulate)
            v = _mm512_add_ps(_mm512_maskz_loadu_ps(mk, o + n), v);
        _mm512_mask_storeu_ps(o + n, mk, v);
    }
}
#endif

int matmul_identity_panels(const float *panels, uint32_t K, uint32_t M, uint8_t *out, size_t out_stride,
                           int accumulate)
{
    if (panels_nonfinite(panels, matmul_panel_floats(K, M)))
        return 0;
#if HAVE_X86
    const int wide = have_avx512f();
#endif
    for (uint32_t m = 0; m < M; m++) {
        const float *src = panels + (size_t)(m / PANEL_W) * K * PANEL_W + m % PANEL_W;
        float *o = (float *)(void *)(out + (size_t)m * out_stride);
#if HAVE_X86
        if (wide) {
            transpose_row(src, o, K, accumulate);
            continue;
        }
#endif
        if (accumulate)
            for (uint32_t n = 0; n < K; n++)
                o[n] = o[n] + (src[(size_t)n * PANEL_W] + 0.0f);
        else
            for (uint32_t n = 0; n < K; n++)
                o[n] = src[(size_t)n * PANEL_W] + 0.0f;
    }
    return 1;
}

/* 1 when some bf16 value of the K rows of M is an infinity or a NaN (exponent all ones). */
static int bf16_rows_nonfinite(const uint16_t *rows, size_t stride, uint32_t K, uint32_t M)
{
    uint32_t bad = 0;
    for (uint32_t k = 0; k < K; k++) {
        const uint16_t *r = rows + (size_t)k * stride;
        for (uint32_t m = 0; m < M; m++)
            bad |= (r[m] & 0x7F80u) == 0x7F80u;
    }
    return bad != 0;
}

#if HAVE_X86
/* One level of a 16 x 16 register transpose: rows i and i + s (bit s of i clear) exchange the elements whose column
 * has bit s set with the other row's at the column s lower, i.e. bit s of the row and of the column swap. */
#define TR_LEVEL(v, s)                                                                                             \
    do {                                                                                                           \
        __m512i ia_, ib_;                                                                                          \
        {                                                                                                          \
            int a_[16], b_[16];                                                                                    \
            for (int c_ = 0; c_ < 16; c_++) {                                                                      \
                a_[c_] = (c_ & (s)) ? 16 + c_ - (s) : c_;                                                          \
                b_[c_] = (c_ & (s)) ? 16 + c_ : c_ + (s);                                                          \
            }                                                                                                      \
            ia_ = _mm512_loadu_si512(a_);                                                                          \
            ib_ = _mm512_loadu_si512(b_);                                                                          \
        }                                                                                                          \
        for (int i_ = 0; i_ < 16; i_++)                                                                            \
            if (!(i_ & (s))) {                                                                                     \
                __m512 x_ = v[i_], y_ = v[i_ + (s)];                                                               \
                v[i_] = _mm512_permutex2var_ps(x_, ia_, y_);                                                       \
                v[i_ + (s)] = _mm512_permutex2var_ps(x_, ib_, y_);                                                 \
            }                                                                                                      \
    } while (0)

/* out[m][n] (+)= bf16 rows[n][m] widened, + 0, for a block of up to 16 x 16: rows n0.. (nk of them), columns m0.. */
__attribute__((target("avx512f,avx512bw,avx512vl"))) static __mmask16 transpose_block16(const uint16_t *rows,
                                                                                         size_t stride, uint32_t nk,
                                                                                         uint32_t nm, uint8_t *out,
                                                                                         size_t out_stride,
                                                                                         int accumulate)
{
    __m512 v[16];
    const __mmask16 mm = nm >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << nm) - 1u);
    const __mmask16 mk = nk >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << nk) - 1u);
    const __m256i ex = _mm256_set1_epi16(0x7F80);
    __mmask16 bad = 0;
    for (uint32_t i = 0; i < 16; i++) {
        __m256i h = i < nk ? _mm256_maskz_loadu_epi16(mm, rows + (size_t)i * stride) : _mm256_setzero_si256();
        bad |= _mm256_cmpeq_epi16_mask(_mm256_and_si256(h, ex), ex);
        v[i] = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    }
    TR_LEVEL(v, 8);
    TR_LEVEL(v, 4);
    TR_LEVEL(v, 2);
    TR_LEVEL(v, 1);
    const __m512 zero = _mm512_setzero_ps();
    for (uint32_t m = 0; m < nm; m++) {
        float *o = (float *)(void *)(out + (size_t)m * out_stride);
        __m512 r = _mm512_add_ps(v[m], zero);
        if (accumulate)
            r = _mm512_add_ps(_mm512_maskz_loadu_ps(mk, o), r);
        _mm512_mask_storeu_ps(o, mk, r);
    }
    return bad;
}
#endif

int matmul_transpose_bf16(const uint16_t *rows, size_t stride, uint32_t K, uint32_t M, uint8_t *out, size_t out_stride,
                          int accumulate)
{
    /* An overwrite checks the values as it goes (a failure's partial output is then the caller's to overwrite);
     * an accumulation first, since what it adds to cannot be restored. */
    if (accumulate && bf16_rows_nonfinite(rows, stride, K, M))
        return 0;
#if HAVE_X86
    if (have_avx512_bwvl()) {
        unsigned bad = 0;
        for (uint32_t n0 = 0; n0 < K; n0 += 16)
            for (uint32_t m0 = 0; m0 < M; m0 += 16)
                bad |= transpose_block16(rows + (size_t)n0 * stride + m0, stride, K - n0 < 16 ? K - n0 : 16,
                                         M - m0 < 16 ? M - m0 : 16, out + (size_t)m0 * out_stride + (size_t)n0 * 4,
                                         out_stride, accumulate);
        return bad == 0;
    }
#endif
    if (!accumulate && bf16_rows_nonfinite(rows, stride, K, M))
        return 0;
    for (uint32_t m = 0; m < M; m++) {
        float *o = (float *)(void *)(out + (size_t)m * out_stride);
        for (uint32_t n = 0; n < K; n++) {
            uint32_t bits = (uint32_t)rows[(size_t)n * stride + m] << 16;
            float x;
            memcpy(&x, &bits, 4);
            o[n] = accumulate ? o[n] + (x + 0.0f) : x + 0.0f;
        }
    }
    return 1;
}

#if HAVE_X86
/* Row k of W bf16 values is e_k (0x3F80 at k, zeros of either sign elsewhere): 32 lanes at a time. */
__attribute__((target("avx512f,avx512bw"))) static int identity_row_512(const uint16_t *r, uint32_t k, uint32_t W)
{
    const __m512i mag = _mm512_set1_epi16(0x7FFF);
    for (uint32_t n = 0; n < W; n += 32) {
        __mmask32 mk = W - n >= 32 ? (__mmask32)0xFFFFFFFFu : (__mmask32)((1u << (W - n)) - 1u);
        __mmask32 nz = _mm512_mask_test_epi16_mask(mk, _mm512_maskz_loadu_epi16(mk, r + n), mag);
        __mmask32 want = k >= n && k < n + 32 ? (__mmask32)(1u << (k - n)) : 0;
        if (nz != want)
            return 0;
    }
    return r[k] == 0x3F80u;
}
#endif

#if HAVE_X86
__attribute__((target("avx512f"))) static void outer_row512(float sm, const float *x, float *o, uint32_t N, int accumulate)
{
    const __m512 s = _mm512_set1_ps(sm), zero = _mm512_setzero_ps();
    for (uint32_t n = 0; n < N; n += 16) {
        __mmask16 mk = N - n >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (N - n)) - 1u);
        __m512 r = _mm512_fmadd_ps(s, _mm512_maskz_loadu_ps(mk, x + n), zero);
        if (accumulate)
            r = _mm512_add_ps(_mm512_maskz_loadu_ps(mk, o + n), r);
        _mm512_mask_storeu_ps(o + n, mk, r);
    }
}
#endif

int matmul_outer_rows(const float *s, const float *x, uint8_t *out, size_t out_stride, uint32_t M, uint32_t N,
                      int accumulate)
{
#if HAVE_X86
    if (!have_avx512f())
        return 0;
    for (uint32_t m = 0; m < M; m++)
        outer_row512(s[m], x, (float *)(void *)(out + (size_t)m * out_stride), N, accumulate);
    return 1;
#else
    (void)s, (void)x, (void)out, (void)out_stride, (void)M, (void)N, (void)accumulate;
    return 0;
#endif
}

int matmul_bf16_is_identity(const uint16_t *rows, size_t stride, uint32_t K, uint32_t W)
{
    if (K != W)
        return 0;
#if HAVE_X86
    if (simd_cap() >= 2 && __builtin_cpu_supports("avx512bw")) {
        for (uint32_t k = 0; k < K; k++)
            if (!identity_row_512(rows + (size_t)k * stride, k, W))
                return 0;
        return 1;
    }
#endif
    for (uint32_t k = 0; k < K; k++)
        for (uint32_t n = 0; n < W; n++) {
            uint16_t v = rows[(size_t)k * stride + n];
            if (n == k ? v != 0x3F80u : (v & 0x7FFFu) != 0)
                return 0;
        }
    return 1;
}

int matmul_bf16_supported(void)
{
#if HAVE_X86
    return simd_cap() >= 2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512bf16");
#else
    return 0;
#endif
}

/* 1 when v is a nonzero bf16 outside [2^-50, 2^51) (written branch-free so the loops below vectorise). */
static inline uint32_t bf16_bad(uint32_t v)
{
    uint32_t e = (v >> 7) & 0xFFu;
    uint32_t nonzero = (v & 0x7FFFu) != 0;
    return nonzero & ((e < 127u - 50u) | (e >= 127u + 51u));
}

/* Columns [c0, c1) of K rows into pairs; returns nonzero if a value does not qualify. */
#if HAVE_X86
__attribute__((target("avx512f,avx512bw")))
#endif
static uint32_t pack_cols(const uint16_t *rows, size_t row_stride, uint32_t K, uint32_t W, uint32_t c0, uint32_t c1,
                          uint32_t *pairs)
{
    uint32_t bad = 0;
    uint32_t K2 = (K + 1) / 2;
    for (uint32_t k2 = 0; k2 < K2; k2++) {
        const uint16_t *lo = rows + (size_t)(2 * k2) * row_stride;
        uint32_t *dst = pairs + (size_t)k2 * W;
        /* even slot (low half) = element k+1, odd slot (high half) = element k: vdpbf16ps adds odd first */
        if (2 * k2 + 1 < K) {
            const uint16_t *hi = lo + row_stride;
            uint32_t w = c0;
#if HAVE_X86
            /* 16 columns at a time: widen both rows to 32 bits, check the exponent window, interleave. */
            const __m512i m7fff = _mm512_set1_epi32(0x7FFF), mff = _mm512_set1_epi32(0xFF);
            const __m512i elo = _mm512_set1_epi32(127 - 50), ehi = _mm512_set1_epi32(127 + 51);
            __mmask16 badm = 0;
            for (; w + 16 <= c1; w += 16) {
                __m512i a = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(const void *)(lo + w)));
                __m512i b = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(const void *)(hi + w)));
                __m512i ea = _mm512_and_si512(_mm512_srli_epi32(a, 7), mff);
                __m512i eb = _mm512_and_si512(_mm512_srli_epi32(b, 7), mff);
                badm |= _mm512_test_epi32_mask(a, m7fff) &
                        (_mm512_cmplt_epi32_mask(ea, elo) | _mm512_cmpge_epi32_mask(ea, ehi));
                badm |= _mm512_test_epi32_mask(b, m7fff) &
                        (_mm512_cmplt_epi32_mask(eb, elo) | _mm512_cmpge_epi32_mask(eb, ehi));
                _mm512_storeu_si512(dst + w, _mm512_or_si512(b, _mm512_slli_epi32(a, 16)));
            }
            bad |= badm != 0;
#endif
            for (; w < c1; w++) {
                uint32_t a = lo[w], b = hi[w];
                bad |= bf16_bad(a) | bf16_bad(b);
                dst[w] = b | (a << 16);
            }
        } else {
            for (uint32_t w = c0; w < c1; w++) {
                uint32_t a = lo[w];
                bad |= bf16_bad(a);
                dst[w] = a << 16;
            }
        }
    }
    return bad;
}

int matmul_pack_pairs(const uint16_t *rows, size_t row_stride, uint32_t K, uint32_t W, uint32_t *pairs)
{
    return pack_cols(rows, row_stride, K, W, 0, W, pairs) == 0;
}

#if HAVE_X86
#define MB 6
#define NB 4
_Static_assert(MB == PANEL_W, "the AVX-512 kernels' row block is the panel width");
/* One block of ROWS x 64 outputs, accumulators held in registers for the whole k loop. ROWS is a constant
 * at every call site, so the compiler unrolls everything and never spills. */
__attribute__((target("avx512f,avx512bf16"), always_inline)) static inline void
micro(const bf16_job *j, uint32_t m0, uint32_t n0, const __mmask16 *mask, const int ROWS)
{
    const uint32_t K2 = (j->K + 1) / 2, N = j->N, M = j->M;
    __m512 acc[MB][NB];
    for (int i = 0; i < ROWS; i++)
        for (int v = 0; v < NB; v++)
            acc[i][v] = _mm512_setzero_ps();
    for (uint32_t k2 = 0; k2 < K2; k2++) {
        const uint32_t *xr = j->x_pairs + (size_t)k2 * N + n0;
        __m512bh b[NB];
        for (int v = 0; v < NB; v++)
            b[v] = (__m512bh)_mm512_maskz_loadu_epi32(mask[v], xr + 16 * v);
        const uint32_t *sr = j->s + (size_t)k2 * M + m0;
        for (int i = 0; i < ROWS; i++) {
            __m512bh a = (__m512bh)_mm512_set1_epi32((int)sr[i]);
            for (int v = 0; v < NB; v++)
                acc[i][v] = _mm512_dpbf16_ps(acc[i][v], a, b[v]);
        }
    }
    for (int i = 0; i < ROWS; i++) {
        float *o = (float *)(void *)(j->out + (size_t)(m0 + (uint32_t)i) * j->out_stride) + n0;
        for (int v = 0; v < NB; v++) {
            __m512 r = acc[i][v];
            if (j->accumulate)
                r = _mm512_add_ps(_mm512_maskz_loadu_ps(mask[v], o + 16 * v), r);
            _mm512_mask_storeu_ps(o + 16 * v, mask[v], r);
        }
    }
}

__attribute__((target("avx512f,avx512bf16"))) static void bf16_block(const bf16_job *j, uint32_t c0, uint32_t c1)
{
    const uint32_t M = j->M;
    for (uint32_t n0 = c0; n0 < c1; n0 += 16 * NB) {
        __mmask16 mask[NB];
        for (int v = 0; v < NB; v++) {
            int64_t left = (int64_t)c1 - (int64_t)(n0 + 16u * (unsigned)v);
            mask[v] = left >= 16 ? (__mmask16)0xFFFF : left <= 0 ? (__mmask16)0 : (__mmask16)((1u << left) - 1u);
        }
        uint32_t m0 = 0;
        for (; m0 + MB <= M; m0 += MB)
            micro(j, m0, n0, mask, MB);
        switch (M - m0) {
        case 5: micro(j, m0, n0, mask, 5); break;
        case 4: micro(j, m0, n0, mask, 4); break;
        case 3: micro(j, m0, n0, mask, 3); break;
        case 2: micro(j, m0, n0, mask, 2); break;
        case 1: micro(j, m0, n0, mask, 1); break;
        default: break;
        }
    }
}

/* Columns are split into parts of whole 64-column blocks; each part packs and checks its own columns of the
 * moving operand (phase 1), then, if every value qualified, computes them (phase 2). */
static void part_range(const bf16_job *j, unsigned part, unsigned nparts, uint32_t *c0, uint32_t *c1)
{
    col_range(j->N, 16 * NB, part, nparts, c0, c1);
}

static void pack_part(void *ctx, unsigned part, unsigned nparts)
{
    bf16_job *j = ctx;
    uint32_t c0, c1;
    part_range(j, part, nparts, &c0, &c1);
    if (c0 < c1 && pack_cols(j->x_rows, j->x_stride, j->K, j->N, c0, c1, j->x_pairs))
        atomic_store(&j->bad, 1);
}

static void compute_part(void *ctx, unsigned part, unsigned nparts)
{
    const bf16_job *j = ctx;
    uint32_t c0, c1;
    part_range(j, part, nparts, &c0, &c1);
    if (c0 < c1)
        bf16_block(j, c0, c1);
}
#endif

int matmul_bf16_run(tern_pool *pool, bf16_job *j)
{
#if HAVE_X86
    /* Parts: a fixed function of the shape, so results never depend on the thread count. */
    unsigned blocks = (j->N + 16 * NB - 1) / (16 * NB);
    unsigned parts = pool_threads(pool);
    if (parts > blocks)
        parts = blocks;
    if ((uint64_t)j->M * j->N * j->K < 65536)
        parts = 1;
    atomic_store(&j->bad, 0);
    if (!j->prepacked) {
        pool_run(pool, pack_part, j, parts);
        if (atomic_load(&j->bad))
            return 0;
    }
    pool_run(pool, compute_part, j, parts);
    return 1;
#else
    (void)pool;
    (void)j;
    return 0;
#endif
}

/* ---- fp32 path: the fma chain itself, vectorised across outputs (AVX-512), bit-identical to the reference ---- */
typedef struct {
    const float *s, *x;
    float *out;
    uint32_t K, M, N;
    size_t xs;                  /* floats from one row of x to the next (N when dense) */
} f32_job;

#if HAVE_X86
__attribute__((target("avx512f"), always_inline)) static inline void
f32_micro(const f32_job *j, uint32_t m0, uint32_t n0, const __mmask16 *mask, const int ROWS)
{
    __m512 acc[MB][NB];
    for (int i = 0; i < ROWS; i++)
        for (int v = 0; v < NB; v++)
            acc[i][v] = _mm512_setzero_ps();
    for (uint32_t k = 0; k < j->K; k++) {
        const float *xr = j->x + (size_t)k * j->xs + n0;
        __m512 b[NB];
        for (int v = 0; v < NB; v++)
            b[v] = _mm512_maskz_loadu_ps(mask[v], xr + 16 * v);
        const float *sr = j->s + (size_t)k * j->M + m0;
        for (int i = 0; i < ROWS; i++) {
            __m512 a = _mm512_set1_ps(sr[i]);
            for (int v = 0; v < NB; v++)
                acc[i][v] = _mm512_fmadd_ps(a, b[v], acc[i][v]);
        }
    }
    for (int i = 0; i < ROWS; i++)
        for (int v = 0; v < NB; v++)
            _mm512_mask_storeu_ps(j->out + (size_t)(m0 + (uint32_t)i) * j->N + n0 + 16 * v, mask[v], acc[i][v]);
}

__attribute__((target("avx512f"))) static void f32_block(const f32_job *j, uint32_t c0, uint32_t c1)
{
    for (uint32_t n0 = c0; n0 < c1; n0 += 16 * NB) {
        __mmask16 mask[NB];
        for (int v = 0; v < NB; v++) {
            int64_t left = (int64_t)c1 - (int64_t)(n0 + 16u * (unsigned)v);
            mask[v] = left >= 16 ? (__mmask16)0xFFFF : left <= 0 ? (__mmask16)0 : (__mmask16)((1u << left) - 1u);
        }
        uint32_t m0 = 0;
        for (; m0 + MB <= j->M; m0 += MB)
            f32_micro(j, m0, n0, mask, MB);
        switch (j->M - m0) {
        case 5: f32_micro(j, m0, n0, mask, 5); break;
        case 4: f32_micro(j, m0, n0, mask, 4); break;
        case 3: f32_micro(j, m0, n0, mask, 3); break;
        case 2: f32_micro(j, m0, n0, mask, 2); break;
        case 1: f32_micro(j, m0, n0, mask, 1); break;
        default: break;
        }
    }
}

static void f32_part(void *ctx, unsigned part, unsigned nparts)
{
    const f32_job *j = ctx;
    uint32_t c0, c1;
    col_range(j->N, 16 * NB, part, nparts, &c0, &c1);
    if (c0 < c1)
        f32_block(j, c0, c1);
}
#endif

#if HAVE_X86
/* The same chain on AVX2 + FMA hosts (no AVX-512): vfmadd on 8 lanes is fmaf on each, one rounding per step, so
 * the result is the reference loop's bit for bit. 6 rows x 2 vectors of 8 accumulators, 2 moving vectors and one
 * broadcast stationary value fill 15 of the 16 ymm registers. */
#define MB2 6
#define NB2 2
_Static_assert(MB2 == PANEL_W, "the AVX2 kernels' row block is the panel width");
__attribute__((target("avx2,fma"), always_inline)) static inline void
f32_micro_avx2(const f32_job *j, uint32_t m0, uint32_t n0, const __m256i *mask, const int full, const int ROWS)
{
    __m256 acc[MB2][NB2];
    for (int i = 0; i < ROWS; i++)
        for (int v = 0; v < NB2; v++)
            acc[i][v] = _mm256_setzero_ps();
    for (uint32_t k = 0; k < j->K; k++) {
        const float *xr = j->x + (size_t)k * j->xs + n0;
        __m256 b[NB2];
        for (int v = 0; v < NB2; v++)
            b[v] = full ? _mm256_loadu_ps(xr + 8 * v) : _mm256_maskload_ps(xr + 8 * v, mask[v]);
        const float *sr = j->s + (size_t)k * j->M + m0;
        for (int i = 0; i < ROWS; i++) {
            __m256 a = _mm256_broadcast_ss(sr + i);
            for (int v = 0; v < NB2; v++)
                acc[i][v] = _mm256_fmadd_ps(a, b[v], acc[i][v]);
        }
    }
    for (int i = 0; i < ROWS; i++)
        for (int v = 0; v < NB2; v++) {
            float *o = j->out + (size_t)(m0 + (uint32_t)i) * j->N + n0 + 8 * v;
            if (full)
                _mm256_storeu_ps(o, acc[i][v]);
            else
                _mm256_maskstore_ps(o, mask[v], acc[i][v]);
        }
}

__attribute__((target("avx2,fma"))) static void f32_rows_avx2(const f32_job *j, uint32_t n0, const __m256i *mask,
                                                               const int full)
{
    uint32_t m0 = 0;
    for (; m0 + MB2 <= j->M; m0 += MB2)
        f32_micro_avx2(j, m0, n0, mask, full, MB2);
    switch (j->M - m0) {
    case 5: f32_micro_avx2(j, m0, n0, mask, full, 5); break;
    case 4: f32_micro_avx2(j, m0, n0, mask, full, 4); break;
    case 3: f32_micro_avx2(j, m0, n0, mask, full, 3); break;
    case 2: f32_micro_avx2(j, m0, n0, mask, full, 2); break;
    case 1: f32_micro_avx2(j, m0, n0, mask, full, 1); break;
    default: break;
    }
}

__attribute__((target("avx2,fma"))) static void f32_block_avx2(const f32_job *j, uint32_t c0, uint32_t c1)
{
    for (uint32_t n0 = c0; n0 < c1; n0 += 8 * NB2) {
        __m256i mask[NB2];
        int full = n0 + 8 * NB2 <= c1;
        for (int v = 0; v < NB2; v++) {
            int32_t m[8];
            for (int l = 0; l < 8; l++)
                m[l] = n0 + 8u * (unsigned)v + (unsigned)l < c1 ? -1 : 0;
            mask[v] = _mm256_loadu_si256((const __m256i *)(const void *)m);
        }
        /* the full-width case is its own instantiation: plain loads and stores, no mask in the k loop */
        if (full)
            f32_rows_avx2(j, n0, mask, 1);
        else
            f32_rows_avx2(j, n0, mask, 0);
    }
}

static void f32_part_avx2(void *ctx, unsigned part, unsigned nparts)
{
    const f32_job *j = ctx;
    uint32_t c0, c1;
    col_range(j->N, 8 * NB2, part, nparts, &c0, &c1);
    if (c0 < c1)
        f32_block_avx2(j, c0, c1);
}

#endif


/* ---- bf16 moving rows straight from SBUF, fp32 FMA chain (AVX-512, or AVX2 + FMA) ----
 * The moving operand is read as bf16 rows from SBUF and widened block by block (a bf16 value is the high half of
 * the fp32 of the same value, so widening is exact), the chain is the fp32 one above, and outputs go straight to
 * their PSUM rows: no gather of the whole operand into an fp32 buffer and no scatter of the result. The
 * stationary comes in panels (matmul_pack_panels_*), packed once per LoadStationary by the caller. */
typedef struct {
    const float *sp;  /* the stationary in panels of PANEL_W columns: panel p holds k-major rows of PANEL_W values */
    const uint16_t *x;
    size_t x_stride;
    uint8_t *out;
    size_t out_stride;
    uint32_t K, M, N;
    int accumulate;
    uint32_t cblocks, rparts; /* the part grid: column blocks, and row-panel groups per column group */
    const float *acc_row;     /* accumulate onto this row for every output row instead of the rows' own (NULL) */
} bx_job;
_Static_assert(sizeof(bx_job) <= POOL_CTX_MAX, "a posted multiply's context fits the pool's");

size_t matmul_panel_floats(uint32_t K, uint32_t M) { return (size_t)(M + PANEL_W - 1) / PANEL_W * PANEL_W * K; }

/* Row by row: the row widened to fp32 (exact) into a zero-padded buffer, then 6-value pieces to their panels. The
 * per-element form (a bounds test and a 2-byte load per value) cost 14 % of a 2048^3 GEMM's matmul time. Rows
 * [k0, k1) only: parts of a pool job each take a range of rows (their writes are disjoint). */
#define PACK_AHEAD 16
/* SBUF rows lie a partition apart, each on a page of its own, so the hardware prefetcher never follows them and a
 * cold operand (the usual case: DMA'd in a while ago) costs a full miss per line, one row at a time. Asking for the
 * lines PACK_AHEAD rows ahead keeps that many rows' misses in flight. */
static inline void prefetch_row(const void *row, size_t bytes)
{
    for (size_t b = 0; b < bytes; b += 64)
        __builtin_prefetch((const uint8_t *)row + b, 0, 3);
}

/* At row k of a walk over rows [k0, k1) (bytes of each from rows + i * stride): the first PACK_AHEAD rows when the
 * walk starts, then the row PACK_AHEAD ahead. */
static inline void prefetch_ahead(const uint16_t *rows, size_t stride, uint32_t k, uint32_t k0, uint32_t k1,
                                  size_t bytes)
{
    if (k == k0)
        for (uint32_t i = k0; i < k1 && i < k0 + PACK_AHEAD; i++)
            prefetch_row(rows + (size_t)i * stride, bytes);
    if (k + PACK_AHEAD < k1)
        prefetch_row(rows + (size_t)(k + PACK_AHEAD) * stride, bytes);
}
#if HAVE_X86
/* Rows [k0, k1) straight from the bf16 row to each panel: a masked load of the panel's 6 values, widened and
 * stored with a masked 6-lane store (the padding past M loads as +0). Through a widened row buffer instead, half the
 * 24-byte pieces were read across two of the widening's 16-byte stores while those still sat in the store buffer:
 * a failed store-to-load forward per piece, two thirds of the pack's time in perf (ResNet-50). */
__attribute__((target("avx512f,avx512bw,avx512vl"))) static void pack_rows_avx512(const uint16_t *rows, size_t stride,
                                                                                 uint32_t K, uint32_t M,
                                                                                 float *panels, uint32_t k0,
                                                                                 uint32_t k1)
{
    const uint32_t np = (M + PANEL_W - 1) / PANEL_W, full = M / PANEL_W;
    const size_t row_bytes = (size_t)M * 2, pstep = (size_t)K * PANEL_W;
    const __mmask8 six = (__mmask8)((1u << PANEL_W) - 1u), tail = (__mmask8)((1u << (M - full * PANEL_W)) - 1u);
    for (uint32_t k = k0; k < k1; k++) {
        const uint16_t *r = rows + (size_t)k * stride;
        prefetch_ahead(rows, stride, k, k0, k1, row_bytes);
        float *d = panels + (size_t)k * PANEL_W;
        for (uint32_t p = 0; p < np; p++) {
            __m128i h = _mm_maskz_loadu_epi16(p < full ? six : tail, r + (size_t)p * PANEL_W);
            __m256i w = _mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16);
            _mm256_mask_storeu_epi32(d + p * pstep, six, w);
        }
    }
}
#endif

static void pack_panels_rows(const uint16_t *rows, size_t stride, uint32_t K, uint32_t M, float *panels, uint32_t k0,
                             uint32_t k1)
{
#if HAVE_X86
    if (have_avx512_bwvl()) {
        pack_rows_avx512(rows, stride, K, M, panels, k0, k1);
        return;
    }
#endif
    uint32_t np = (M + PANEL_W - 1) / PANEL_W;
    uint32_t row[(PANEL_W * 64 + 16)]; /* M <= 384 here (the PE columns); larger M takes the loop below */
    if (np * PANEL_W > sizeof row / sizeof row[0]) {
        for (uint32_t p = 0; p < np; p++)
            for (uint32_t k = k0; k < k1; k++)
                for (uint32_t i = 0; i < PANEL_W; i++) {
                    uint32_t bits = p * PANEL_W + i < M ? (uint32_t)rows[(size_t)k * stride + p * PANEL_W + i] << 16 : 0;
                    memcpy(&panels[((size_t)p * K + k) * PANEL_W + i], &bits, 4);
                }
        return;
    }
    for (uint32_t m = M; m < np * PANEL_W; m++)
        row[m] = 0;
    const size_t row_bytes = (size_t)M * 2;
    for (uint32_t k = k0; k < k1; k++) {
        const uint16_t *r = rows + (size_t)k * stride;
        prefetch_ahead(rows, stride, k, k0, k1, row_bytes);
        for (uint32_t m = 0; m < M; m++) /* vectorised: a widening shift */
            row[m] = (uint32_t)r[m] << 16;
        float *d = panels + (size_t)k * PANEL_W;
        for (uint32_t p = 0; p < np; p++)
            memcpy(d + (size_t)p * K * PANEL_W, row + p * PANEL_W, PANEL_W * sizeof(float));
    }
}

typedef struct {
    const uint16_t *rows;
    size_t stride;
    uint32_t K, M;
    float *panels;
} pack_job;

static void pack_panels_part(void *ctx, unsigned part, unsigned nparts)
{
    const pack_job *j = ctx;
    uint32_t k0 = (uint32_t)((uint64_t)j->K * part / nparts), k1 = (uint32_t)((uint64_t)j->K * (part + 1) / nparts);
    if (k0 < k1)
        pack_panels_rows(j->rows, j->stride, j->K, j->M, j->panels, k0, k1);
}

/* The pack is bound by the misses on the SBUF rows, not by arithmetic: with a pool, its threads each take a range of
 * rows so their misses overlap (the bits are the same whoever packs a row); small operands stay on the caller. The
 * simulator's latch packs on the committing thread alone (pool NULL): in a model the workers are busy with queued
 * work, and waiting for one cost more than the overlap saved. */
void matmul_pack_panels_bf16(tern_pool *pool, const uint16_t *rows, size_t stride, uint32_t K, uint32_t M,
                             float *panels)
{
    pack_job j = {rows, stride, K, M, panels};
    unsigned parts = 2 * pool_threads(pool); /* two per thread: claimed as threads come free */
    if ((uint64_t)K * M < 4096)
        parts = 1;
    if (parts > K)
        parts = K;
    pool_run(pool, pack_panels_part, &j, parts ? parts : 1);
}

void matmul_pack_panels_f32(const float *s, uint32_t K, uint32_t M, float *panels)
{
    uint32_t np = (M + PANEL_W - 1) / PANEL_W;
    for (uint32_t p = 0; p < np; p++)
        for (uint32_t k = 0; k < K; k++)
            for (uint32_t i = 0; i < PANEL_W; i++)
                panels[((size_t)p * K + k) * PANEL_W + i] = p * PANEL_W + i < M ? s[(size_t)k * M + p * PANEL_W + i] : 0.0f;
}

void matmul_panels_to_f32(const float *panels, uint32_t K, uint32_t M, float *s)
{
    for (uint32_t k = 0; k < K; k++)
        for (uint32_t m = 0; m < M; m++)
            s[(size_t)k * M + m] = panels[((size_t)(m / PANEL_W) * K + k) * PANEL_W + m % PANEL_W];
}

#if HAVE_X86
/* Operands are packed before the k loop because SBUF rows lie a partition apart (a multiple of 4 KiB): read in
 * place, the K rows of a column block all fall into one cache set and evict each other. The moving block
 * (K x 16, widened to fp32: exact) and the stationary panels (K x 6) are contiguous instead. */
#define BX_MAXK 128
__attribute__((target("avx2,fma"), always_inline)) static inline void
bx_micro(const bx_job *j, const float *xp, uint32_t m0, uint32_t n0, const int ROWS, const uint32_t ncols)
{
    __m256 acc[MB2][NB2];
    for (int i = 0; i < ROWS; i++)
        for (int v = 0; v < NB2; v++)
            acc[i][v] = _mm256_setzero_ps();
    const float *sp = j->sp + (size_t)(m0 / PANEL_W) * j->K * PANEL_W;
    for (uint32_t k = 0; k < j->K; k++) {
        const float *xr = xp + (size_t)k * 8 * NB2;
        __m256 b[NB2];
        for (int v = 0; v < NB2; v++)
            b[v] = _mm256_load_ps(xr + 8 * v);
        const float *sr = sp + (size_t)k * PANEL_W;
        for (int i = 0; i < ROWS; i++) {
            __m256 a = _mm256_broadcast_ss(sr + i);
            for (int v = 0; v < NB2; v++)
                acc[i][v] = _mm256_fmadd_ps(a, b[v], acc[i][v]);
        }
    }
    for (int i = 0; i < ROWS; i++) {
        float *o = (float *)(void *)(j->out + (size_t)(m0 + (uint32_t)i) * j->out_stride) + n0;
        const float *old = j->acc_row ? j->acc_row + n0 : o;
        if (ncols < 8 * NB2) { /* the last columns of the operand: only those that exist are written */
            _Alignas(32) float t[8 * NB2];
            for (int v = 0; v < NB2; v++)
                _mm256_store_ps(t + 8 * v, acc[i][v]);
            for (uint32_t c = 0; c < ncols; c++)
                o[c] = j->accumulate ? old[c] + t[c] : t[c];
            continue;
        }
        for (int v = 0; v < NB2; v++) {
            __m256 r = acc[i][v];
            if (j->accumulate)
                r = _mm256_add_ps(_mm256_loadu_ps(old + 8 * v), r); /* old + sum, as the other paths */
            _mm256_storeu_ps(o + 8 * v, r);
        }
    }
}

/* Rows of panels [p0, p1) of outputs for the columns [n0, n0 + ncols) whose moving block is packed in xp. */
__attribute__((target("avx2,fma"), always_inline)) static inline void
bx_rows(const bx_job *j, const float *xp, uint32_t n0, const uint32_t ncols, uint32_t p0, uint32_t p1)
{
    uint32_t m0 = p0 * PANEL_W, m1 = p1 * PANEL_W < j->M ? p1 * PANEL_W : j->M;
    for (; m0 + MB2 <= m1; m0 += MB2)
        bx_micro(j, xp, m0, n0, MB2, ncols);
    switch (m1 - m0) {
    case 5: bx_micro(j, xp, m0, n0, 5, ncols); break;
    case 4: bx_micro(j, xp, m0, n0, 4, ncols); break;
    case 3: bx_micro(j, xp, m0, n0, 3, ncols); break;
    case 2: bx_micro(j, xp, m0, n0, 2, ncols); break;
    case 1: bx_micro(j, xp, m0, n0, 1, ncols); break;
    default: break;
    }
}

/* Columns left over after the 16-wide blocks (a convolution's 7 x 7 = 49 or 14 x 14 = 196 outputs) run through
 * the same vector kernel, their block padded with zeros: each output's chain is still its own fma chain over k
 * ascending, and the padding lanes are computed but never stored. (They used to run one scalar fma at a time,
 * latency-bound, which cost more than the whole vector part of a 128 x 128 x 196 multiply.) */
__attribute__((target("avx2,fma"))) static void bx_tail(const bx_job *j, float *xp, uint32_t n0, uint32_t c1,
                                                         uint32_t p0, uint32_t p1)
{
    const uint32_t ncols = c1 - n0;
    for (uint32_t k = 0; k < j->K; k++) {
        const uint16_t *xr = j->x + (size_t)k * j->x_stride + n0;
        float *dst = xp + (size_t)k * 8 * NB2;
        for (uint32_t c = 0; c < 8 * NB2; c++) {
            uint32_t bits = c < ncols ? (uint32_t)xr[c] << 16 : 0;
            memcpy(&dst[c], &bits, 4);
        }
    }
    bx_rows(j, xp, n0, ncols, p0, p1);
}

__attribute__((target("avx2,fma"))) static void bx_block(const bx_job *j, uint32_t c0, uint32_t c1, uint32_t p0,
                                                          uint32_t p1)
{
    _Alignas(32) float xp[BX_MAXK * 8 * NB2];
    uint32_t n0 = c0;
    for (; n0 + 8 * NB2 <= c1; n0 += 8 * NB2) {
        for (uint32_t k = 0; k < j->K; k++) {
            const uint16_t *xr = j->x + (size_t)k * j->x_stride + n0;
            for (int v = 0; v < NB2; v++) {
                __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)(xr + 8 * v)));
                _mm256_store_ps(xp + (size_t)k * 8 * NB2 + 8 * v, _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
            }
        }
        bx_rows(j, xp, n0, 8 * NB2, p0, p1);
    }
    if (n0 < c1)
        bx_tail(j, xp, n0, c1, p0, p1);
}

/* ---- the same with AVX-512: 6 rows x 4 vectors of 16 accumulators (24 of the 32 zmm registers), the moving
 * block 64 columns wide. The stationary value is broadcast from memory into each fma (embedded broadcast), so a
 * k step is 4 loads, 6 broadcasts and 24 fmas: bound by the two FMA ports, like the chain itself. ---- */
#define NB3 4
#define BW3 (16 * NB3)
__attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) static inline void
bx3_micro(const bx_job *j, const float *xp, uint32_t m0, uint32_t n0, const int ROWS, const int NV, __mmask16 last)
{
    __m512 acc[MB][NB3];
    for (int i = 0; i < ROWS; i++)
        for (int v = 0; v < NV; v++)
            acc[i][v] = _mm512_setzero_ps();
    const float *sp = j->sp + (size_t)(m0 / PANEL_W) * j->K * PANEL_W;
    /* The output rows' lines, written (and with accumulate read) after the k loop, requested for writing before
     * it: their misses (PSUM rows the other thread's part or an evacuation last touched) overlap the fmas. BERT-base
     * 0.4-0.8 % faster, GPT-2 0.3 % (docs/performance.md, session 24). */
    for (int i = 0; i < ROWS; i++) {
        const float *o = (const float *)(const void *)(j->out + (size_t)(m0 + (uint32_t)i) * j->out_stride) + n0;
        for (int v = 0; v < NV; v++)
            __builtin_prefetch(o + 16 * v, 1, 3);
    }
    for (uint32_t k = 0; k < j->K; k++) {
        const float *xr = xp + (size_t)k * BW3;
        __m512 b[NB3];
        for (int v = 0; v < NV; v++)
            b[v] = _mm512_load_ps(xr + 16 * v);
        const float *sr = sp + (size_t)k * PANEL_W;
        for (int i = 0; i < ROWS; i++) {
            __m512 a = _mm512_set1_ps(sr[i]);
            for (int v = 0; v < NV; v++)
                acc[i][v] = _mm512_fmadd_ps(a, b[v], acc[i][v]);
        }
    }
    for (int i = 0; i < ROWS; i++) {
        float *o = (float *)(void *)(j->out + (size_t)(m0 + (uint32_t)i) * j->out_stride) + n0;
        const float *old = j->acc_row ? j->acc_row + n0 : o;
        for (int v = 0; v < NV; v++) {
            __mmask16 mk = v == NV - 1 ? last : (__mmask16)0xFFFF;
            __m512 r = acc[i][v];
            if (j->accumulate)
                r = _mm512_add_ps(_mm512_maskz_loadu_ps(mk, old + 16 * v), r); /* old + sum, as the other paths */
            _mm512_mask_storeu_ps(o + 16 * v, mk, r);
        }
    }
}

__attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) static inline void
bx3_rows_nv(const bx_job *j, const float *xp, uint32_t n0, uint32_t m0, uint32_t m1, const int NV, __mmask16 last)
{
    for (; m0 + MB <= m1; m0 += MB)
        bx3_micro(j, xp, m0, n0, MB, NV, last);
    switch (m1 - m0) {
    case 5: bx3_micro(j, xp, m0, n0, 5, NV, last); break;
    case 4: bx3_micro(j, xp, m0, n0, 4, NV, last); break;
    case 3: bx3_micro(j, xp, m0, n0, 3, NV, last); break;
    case 2: bx3_micro(j, xp, m0, n0, 2, NV, last); break;
    case 1: bx3_micro(j, xp, m0, n0, 1, NV, last); break;
    default: break;
    }
}

/* Columns [n0, n0 + ncols), ncols <= 64, rows of panels [p0, p1): only the vectors that hold columns are
 * computed (the block past ncols is zero padding), and only existing columns are stored. */
__attribute__((target("avx512f,avx512bw,avx512vl"))) static void bx3_rows(const bx_job *j, const float *xp, uint32_t n0,
                                                                           uint32_t ncols, uint32_t p0, uint32_t p1)
{
    uint32_t m0 = p0 * PANEL_W, m1 = p1 * PANEL_W < j->M ? p1 * PANEL_W : j->M;
    int nv = (int)((ncols + 15) / 16);
    uint32_t rem = ncols - 16u * (uint32_t)(nv - 1);
    __mmask16 last = (__mmask16)(rem >= 16 ? 0xFFFFu : (1u << rem) - 1u);
    switch (nv) {
    case 4: bx3_rows_nv(j, xp, n0, m0, m1, 4, last); break;
    case 3: bx3_rows_nv(j, xp, n0, m0, m1, 3, last); break;
    case 2: bx3_rows_nv(j, xp, n0, m0, m1, 2, last); break;
    default: bx3_rows_nv(j, xp, n0, m0, m1, 1, last); break;
    }
}

__attribute__((target("avx512f,avx512bw,avx512vl"))) static void bx3_block(const bx_job *j, uint32_t c0, uint32_t c1,
                                                                            uint32_t p0, uint32_t p1)
{
    _Alignas(64) float xp[BX_MAXK * BW3];
    for (uint32_t n0 = c0; n0 < c1; n0 += BW3) {
        uint32_t ncols = c1 - n0 < BW3 ? c1 - n0 : BW3;
        int nv = (int)((ncols + 15) / 16);
        /* the rows a partition apart, cold: their misses overlapped as in matmul_pack_panels_bf16 */
        for (uint32_t k = 0; k < j->K; k++) {
            const uint16_t *xr = j->x + (size_t)k * j->x_stride + n0;
            float *dst = xp + (size_t)k * BW3;
            prefetch_ahead(j->x + n0, j->x_stride, k, 0, j->K, (size_t)ncols * 2);
            for (int v = 0; v < nv; v++) {
                uint32_t left = ncols - 16u * (uint32_t)v;
                __mmask16 mk = (__mmask16)(left >= 16 ? 0xFFFFu : (1u << left) - 1u);
                __m512i w = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(mk, xr + 16 * v)); /* padding: +0 */
                _mm512_store_si512(dst + 16 * v, _mm512_slli_epi32(w, 16));
            }
        }
        bx3_rows(j, xp, n0, ncols, p0, p1);
    }
}

/* Part `part` of the grid: column group part / rparts (in whole blocks), row-panel group part % rparts. */
static void bx_part_range(const bx_job *j, uint32_t width, unsigned part, unsigned nparts, uint32_t *c0,
                          uint32_t *c1, uint32_t *p0, uint32_t *p1)
{
    unsigned cparts = nparts / j->rparts;
    col_range(j->N, width, part / j->rparts, cparts, c0, c1);
    uint32_t panels = (j->M + PANEL_W - 1) / PANEL_W, r = part % j->rparts;
    *p0 = (uint32_t)((uint64_t)panels * r / j->rparts);
    *p1 = (uint32_t)((uint64_t)panels * (r + 1) / j->rparts);
}

static void bx_part(void *ctx, unsigned part, unsigned nparts)
{
    const bx_job *j = ctx;
    uint32_t c0, c1, p0, p1;
    bx_part_range(j, 8 * NB2, part, nparts, &c0, &c1, &p0, &p1);
    if (c0 < c1 && p0 < p1)
        bx_block(j, c0, c1, p0, p1);
}

static void bx3_part(void *ctx, unsigned part, unsigned nparts)
{
    const bx_job *j = ctx;
    uint32_t c0, c1, p0, p1;
    bx_part_range(j, BW3, part, nparts, &c0, &c1, &p0, &p1);
    if (c0 < c1 && p0 < p1)
        bx3_block(j, c0, c1, p0, p1);
}
#endif

int matmul_f32_bf16x_run(tern_pool *pool, const float *panels, const uint16_t *x_rows, size_t x_stride, uint8_t *out,
                         size_t out_stride, uint32_t K, uint32_t M, uint32_t N, int accumulate, const float *acc_row,
                         unsigned long *job)
{
#if HAVE_X86
    const int wide = have_avx512_bwvl();
    if ((!wide && !have_avx2_fma()) || K > BX_MAXK || K == 0 || M == 0 || N == 0)
        return 0;
    bx_job j = {panels, x_rows, x_stride, out, out_stride, K, M, N, accumulate, 0, 1, accumulate ? acc_row : NULL};
    /* The part grid: column blocks first; when there are fewer blocks than threads (a convolution's 49 or 196
     * columns), groups of row panels too. Each output's chain is computed whole by one part, so any grid gives
     * the same bits. */
    uint32_t width = wide ? BW3 : 8 * NB2;
    unsigned blocks = (N + width - 1) / width, panels_n = (M + PANEL_W - 1) / PANEL_W;
    unsigned threads = pool_threads(pool), cparts = threads < blocks ? threads : blocks, rparts = 1;
    if ((uint64_t)M * N * K < 65536)
        cparts = 1, threads = 1;
    /* More parts than threads when there are the blocks for it: parts are claimed as threads come free, so a thread
     * the host descheduled for a while (a shared host) costs its one part, not half the multiply. */
    if (threads > 1 && blocks >= 2 * threads)
        cparts = blocks < 4 * threads ? blocks : 4 * threads;
    if (cparts < threads) {
        rparts = threads / cparts;
        if (rparts > panels_n)
            rparts = panels_n;
    }
    j.rparts = rparts;
    if (job)
        *job = pool_post(pool, wide ? bx3_part : bx_part, &j, (unsigned)sizeof j, cparts * rparts, 1);
    else
        pool_run(pool, wide ? bx3_part : bx_part, &j, cparts * rparts);
    return 1;
#else
    (void)pool, (void)panels, (void)x_rows, (void)x_stride, (void)out, (void)out_stride, (void)K, (void)M, (void)N;
    (void)accumulate, (void)acc_row, (void)job;
    return 0;
#endif
}

int matmul_f32_supported(void)
{
#if HAVE_X86
    return have_avx512f() || have_avx2_fma();
#else
    return 0;
#endif
}

void matmul_f32_run(tern_pool *pool, const float *s, const float *x, float *out, uint32_t K, uint32_t M, uint32_t N)
{
    matmul_f32_run_rows(pool, s, x, N, out, K, M, N);
}

void matmul_f32_run_rows(tern_pool *pool, const float *s, const float *x, size_t xs, float *out, uint32_t K, uint32_t M,
                         uint32_t N)
{
#if HAVE_X86
    f32_job j = {s, x, out, K, M, N, xs};
    const int wide = have_avx512f();
    if (!wide && !have_avx2_fma()) {
        if (xs == N)
            matmul_reference(s, x, out, K, M, N);
        else
            matmul_reference_rows(s, x, xs, out, K, M, N);
        return;
    }
    /* Parts split the columns; each output's chain is computed whole by one part, so any split gives the
     * same bits. */
    unsigned blocks = wide ? (N + 16 * NB - 1) / (16 * NB) : (N + 8 * NB2 - 1) / (8 * NB2);
    unsigned parts = pool_threads(pool);
    if (parts > blocks)
        parts = blocks;
    if ((uint64_t)M * N * K < 65536)
        parts = 1;
    pool_run(pool, wide ? f32_part : f32_part_avx2, &j, parts ? parts : 1);
#else
    (void)pool;
    matmul_reference_rows(s, x, xs, out, K, M, N);
#endif
}

/* ---- which kernel multiplies bf16 operands on this host ----
 * Both compute the same bits; which is faster depends on the CPU. On the AMD Zen 4 hosts of earlier sessions
 * vdpbf16ps did 32 products per instruction at the rate of vfmadd231ps (16), so the dot products won; on the
 * Intel Xeon with AMX of this session vdpbf16ps ran at 1.62 G/s against 6.68 G/s for vfmadd231ps (zmm, per core:
 * 52 against 107 G products/s), so the fp32 chain wins. Rather than a table of CPUs, the first use times both
 * kernels on one in-cache multiply (K = 128, M = 96, N = 256, single thread, best of 3 alternating runs each,
 * about 2 ms) and keeps the faster for the process. The choice changes speed only, never a result. */
#if HAVE_X86
__attribute__((target("avx512f"))) static double probe_dp(const bf16_job *j)
{
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    bf16_block(j, 0, j->N);
    clock_gettime(CLOCK_MONOTONIC, &b);
    return (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) * 1e-9;
}

static double probe_fma(const bx_job *j)
{
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    bx3_block(j, 0, j->N, 0, (j->M + PANEL_W - 1) / PANEL_W);
    clock_gettime(CLOCK_MONOTONIC, &b);
    return (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) * 1e-9;
}
#endif

static int probe_choice = -1; /* 1: dot products faster on this host; written once under probe_once */
static pthread_once_t probe_once = PTHREAD_ONCE_INIT;

static void probe(void)
{
    probe_choice = 0;
#if HAVE_X86
    if (!matmul_bf16_supported() || !have_avx512f() || !__builtin_cpu_supports("avx512vl"))
        return;
    enum { K = 128, M = 96, N = 256 };
    uint16_t *s = malloc(sizeof *s * K * M), *x = malloc(sizeof *x * K * N);
    uint32_t *sp = malloc(sizeof *sp * (K / 2) * M), *xpairs = malloc(sizeof *xpairs * (K / 2) * N);
    float *panels = malloc(sizeof *panels * matmul_panel_floats(K, M)), *out = malloc(sizeof *out * M * N);
    if (s && x && sp && xpairs && panels && out) {
        uint32_t r = 12345;
        for (size_t i = 0; i < (size_t)K * M; i++)
            s[i] = (uint16_t)(0x3F00u + ((r = r * 1664525u + 1013904223u) >> 24)); /* [0.5, 2) */
        for (size_t i = 0; i < (size_t)K * N; i++)
            x[i] = (uint16_t)(0x3F00u + ((r = r * 1664525u + 1013904223u) >> 24));
        matmul_pack_pairs(s, M, K, M, sp);
        matmul_pack_pairs(x, N, K, N, xpairs);
        matmul_pack_panels_bf16(NULL, s, M, K, M, panels);
        bf16_job dj;
        memset(&dj, 0, sizeof dj);
        dj.s = sp, dj.x_pairs = xpairs, dj.K = K, dj.M = M, dj.N = N, dj.out = (uint8_t *)out;
        dj.out_stride = sizeof(float) * N, dj.prepacked = 1;
        bx_job fj = {panels, x, N, (uint8_t *)out, sizeof(float) * N, K, M, N, 0, 0, 1, NULL};
        double tdp = 1e30, tfma = 1e30;
        for (int t = 0; t < 3; t++) {
            double a = probe_dp(&dj), b = probe_fma(&fj);
            tdp = a < tdp ? a : tdp;
            tfma = b < tfma ? b : tfma;
        }
        probe_choice = tdp < tfma;
    }
    free(s), free(x), free(sp), free(xpairs), free(panels), free(out);
#endif
}

tern_status matmul_choose_kernel(int *use_dp, tern_error *err)
{
    const char *e = getenv("TERN_MATMUL");
    *use_dp = 0;
    if (e && !strcmp(e, "fma"))
        return TERN_OK;
    if (e && !strcmp(e, "dpbf16")) {
        *use_dp = matmul_bf16_supported(); /* a host without AVX512-BF16 has only the chain */
        return TERN_OK;
    }
    if (e && *e && strcmp(e, "auto"))
        return tern_error_set(err, TERN_ERR_INVALID,
                              "environment TERN_MATMUL=\"%s\": not a matmul kernel (fma, dpbf16 or auto)", e);
    pthread_once(&probe_once, probe);
    *use_dp = probe_choice == 1;
    return TERN_OK;
}
