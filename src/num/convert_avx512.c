/* AVX-512 kernels (F+BW+VL, plus AVX512_BF16 for fp32 -> bf16 RNE): the rounding core of num_internal.h done on
 * 16 lanes at a time, and the stochastic-rounding generator evaluated lane-wise on counters offset + i. Compiled
 * with a target attribute so the library still loads on hosts without AVX-512; convert.c calls in only after
 * __builtin_cpu_supports says yes. Lengths that are not a multiple of the block go to the portable kernel with
 * the counter offset advanced, so results never depend on where a block boundary falls.
 *
 * VCVTNE2PS2BF16 is used for bf16 RNE blocks without fp32 denormals: the instruction treats denormal inputs as
 * zero (verified on Zen 4: 0x00400000 -> 0x0000) where tern keeps bf16 subnormals (0x0040), so a block holding one
 * is redone by the integer kernel. Its NaN rule (sign and top payload kept, quiet bit set) is tern's, as is that
 * of VCVTPS2PH; test_num_simd holds both to the portable path. */
#include "num/num_internal.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#define T512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,avx2,f16c")))
#define INL512 static inline __attribute__((always_inline, target("avx512f,avx512bw,avx512vl,avx512bf16,avx2,f16c")))

INL512 __m512i lowbias(__m512i x)
{
    x = _mm512_xor_si512(x, _mm512_srli_epi32(x, 16));
    x = _mm512_mullo_epi32(x, _mm512_set1_epi32(0x7FEB352D));
    x = _mm512_xor_si512(x, _mm512_srli_epi32(x, 15));
    x = _mm512_mullo_epi32(x, _mm512_set1_epi32((int)0x846CA68Bu));
    return _mm512_xor_si512(x, _mm512_srli_epi32(x, 16));
}

/* Draws for counters c0 .. c0+15 (64-bit; a carry out of the low word is propagated per lane). */
INL512 __m512i draws16(num_key key, uint64_t c0)
{
    const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    __m512i base = _mm512_set1_epi32((int)(uint32_t)c0);
    __m512i lo = _mm512_add_epi32(base, iota);
    __m512i hi = _mm512_set1_epi32((int)(uint32_t)(c0 >> 32));
    __mmask16 carry = _mm512_cmplt_epu32_mask(lo, base);
    hi = _mm512_mask_add_epi32(hi, carry, hi, _mm512_set1_epi32(1));
    __m512i h = lowbias(_mm512_xor_si512(lo, _mm512_set1_epi32((int)key.k0)));
    return lowbias(_mm512_add_epi32(_mm512_xor_si512(h, hi), _mm512_set1_epi32((int)key.k1)));
}

/* num_encode_fmt on 16 lanes. */
INL512 __m512i enc16(num_fmt f, __m512i u, int sr, int sat, __m512i r)
{
    const __m512i one = _mm512_set1_epi32(1);
    __m512i a = _mm512_and_si512(u, _mm512_set1_epi32(0x7FFFFFFF));
    __m512i s = _mm512_slli_epi32(_mm512_srli_epi32(u, 31), (unsigned)f.sign_shift);
    __m512i eff = _mm512_srli_epi32(a, 23);
    __mmask16 isnorm = _mm512_cmpge_epu32_mask(eff, _mm512_set1_epi32(128 - f.b));
    __m512i nn = _mm512_sub_epi32(a, _mm512_set1_epi32((127 - f.b) << 23));
    __m512i sig = _mm512_and_si512(a, _mm512_set1_epi32(0x7FFFFF));
    __mmask16 effnz = _mm512_test_epi32_mask(eff, eff);
    sig = _mm512_mask_or_epi32(sig, effnz, sig, _mm512_set1_epi32(0x800000));
    __m512i ks = _mm512_sub_epi32(_mm512_set1_epi32(151 - f.b - f.m), _mm512_max_epu32(eff, one));
    __m512i n = _mm512_mask_blend_epi32(isnorm, sig, nn);
    __m512i k = _mm512_mask_blend_epi32(isnorm, ks, _mm512_set1_epi32(23 - f.m));
    __m512i mag;
    if (!sr) {
        __m512i kk = _mm512_min_epu32(k, _mm512_set1_epi32(31));
        __m512i q = _mm512_srlv_epi32(n, kk);
        __m512i halfm1 = _mm512_sub_epi32(_mm512_sllv_epi32(one, _mm512_sub_epi32(kk, one)), one);
        __m512i t = _mm512_add_epi32(_mm512_add_epi32(n, halfm1), _mm512_and_si512(q, one));
        mag = _mm512_srlv_epi32(t, kk);
    } else {
        __m512i q = _mm512_srlv_epi32(n, k); /* counts >= 32 give 0, as the scalar core's k >= 32 case */
        __m512i msk = _mm512_sub_epi32(_mm512_sllv_epi32(one, k), one);
        __m512i rem = _mm512_and_si512(n, msk);
        __m512i c32 = _mm512_set1_epi32(32);
        __m512i fr = _mm512_or_si512(_mm512_sllv_epi32(rem, _mm512_sub_epi32(c32, k)),
                                     _mm512_srlv_epi32(n, _mm512_sub_epi32(k, c32)));
        __mmask16 up = _mm512_cmplt_epu32_mask(_mm512_add_epi32(fr, r), fr);
        mag = _mm512_mask_add_epi32(q, up, q, one);
    }
    __m512i ovf_code = _mm512_set1_epi32((int)(sat ? f.maxmag : f.infmag));
    mag = _mm512_mask_mov_epi32(mag, _mm512_cmpgt_epu32_mask(mag, _mm512_set1_epi32((int)f.maxmag)), ovf_code);
    __m512i infa = _mm512_set1_epi32(0x7F800000);
    mag = _mm512_mask_mov_epi32(mag, _mm512_cmpeq_epi32_mask(a, infa), ovf_code);
    __mmask16 isnan = _mm512_cmpgt_epu32_mask(a, infa);
    if (isnan) {
        __m512i nanc;
        if (f.has_inf)
            nanc = _mm512_or_si512(
                _mm512_and_si512(_mm512_srli_epi32(a, (unsigned)(23 - f.m)), _mm512_set1_epi32((1 << f.m) - 1)),
                _mm512_set1_epi32((int)(f.infmag | (1u << (f.m - 1)))));
        else
            nanc = _mm512_set1_epi32((int)f.infmag);
        mag = _mm512_mask_mov_epi32(mag, isnan, nanc);
    }
    return _mm512_or_si512(s, mag);
}

NUM_INLINE T512 void enc_loop512(num_fmt f, int width, int shift, void *dst, const float *src, size_t n,
                                 const tern_convert_opts *o)
{
    int sr = o->round == TERN_ROUND_STOCHASTIC, sat = o->overflow == TERN_OVERFLOW_SATURATE;
    num_key key = num_key_of(o->seed);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512i u = _mm512_loadu_si512((const void *)(src + i));
        __m512i r = sr ? draws16(key, o->offset + i) : _mm512_setzero_si512();
        __m512i c = enc16(f, u, sr, sat, r);
        if (width == 1)
            _mm_storeu_si128((__m128i *)((uint8_t *)dst + i), _mm512_cvtepi32_epi8(c));
        else if (width == 2)
            _mm256_storeu_si256((__m256i *)((uint16_t *)dst + i), _mm512_cvtepi32_epi16(c));
        else
            _mm512_storeu_si512((void *)((uint32_t *)dst + i), _mm512_slli_epi32(c, (unsigned)shift));
    }
    (void)shift;
}

/* bf16 RNE: hardware conversion for blocks of 32 without fp32 denormals, the integer kernel for the others. */
static T512 void bf16_rne512(uint16_t *dst, const float *src, size_t n, int sat)
{
    const __m512i absm = _mm512_set1_epi32(0x7FFFFFFF);
    const __m512i mantmax = _mm512_set1_epi32(0x7FFFFF - 1), one = _mm512_set1_epi32(1);
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m512i u0 = _mm512_loadu_si512((const void *)(src + i));
        __m512i u1 = _mm512_loadu_si512((const void *)(src + i + 16));
        __m512i a0 = _mm512_and_si512(u0, absm), a1 = _mm512_and_si512(u1, absm);
        /* denormal: a - 1 <= 0x7FFFFE (unsigned) */
        __mmask16 bad0 = _mm512_cmple_epu32_mask(_mm512_sub_epi32(a0, one), mantmax);
        __mmask16 bad1 = _mm512_cmple_epu32_mask(_mm512_sub_epi32(a1, one), mantmax);
        __m512i r;
        if (__builtin_expect((bad0 | bad1) == 0, 1)) {
            r = (__m512i)_mm512_cvtne2ps_pbh(_mm512_castsi512_ps(u1), _mm512_castsi512_ps(u0));
            if (sat) {
                __mmask32 isinf = _mm512_cmpeq_epi16_mask(_mm512_and_si512(r, _mm512_set1_epi16(0x7FFF)),
                                                           _mm512_set1_epi16(0x7F80));
                __m512i fix = _mm512_or_si512(_mm512_and_si512(r, _mm512_set1_epi16((short)0x8000)),
                                              _mm512_set1_epi16(0x7F7F));
                r = _mm512_mask_blend_epi16(isinf, r, fix);
            }
        } else {
            __m512i z = _mm512_setzero_si512();
            __m256i c0 = _mm512_cvtepi32_epi16(enc16(NUM_FMT_BF16, u0, 0, sat, z));
            __m256i c1 = _mm512_cvtepi32_epi16(enc16(NUM_FMT_BF16, u1, 0, sat, z));
            r = _mm512_inserti64x4(_mm512_castsi256_si512(c0), c1, 1);
        }
        _mm512_storeu_si512((void *)(dst + i), r);
    }
    if (i < n) {
        tern_convert_opts o = {TERN_ROUND_RNE, sat ? TERN_OVERFLOW_SATURATE : TERN_OVERFLOW_INF, 0, 0};
        num_portable_from_f32(TERN_DTYPE_BF16, dst + i, src + i, n - i, &o);
    }
}

/* fp16 RNE: VCVTPS2PH is exact RNE with subnormals and payload-keeping quiet NaNs; only saturation is added. */
static T512 void fp16_rne512(uint16_t *dst, const float *src, size_t n, int sat)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256i h = _mm512_cvtps_ph(_mm512_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        if (sat) {
            __mmask16 isinf = _mm256_cmpeq_epi16_mask(_mm256_and_si256(h, _mm256_set1_epi16(0x7FFF)),
                                                      _mm256_set1_epi16(0x7C00));
            __m256i fix = _mm256_or_si256(_mm256_and_si256(h, _mm256_set1_epi16((short)0x8000)),
                                          _mm256_set1_epi16(0x7BFF));
            h = _mm256_mask_blend_epi16(isinf, h, fix);
        }
        _mm256_storeu_si256((__m256i *)(dst + i), h);
    }
    if (i < n) {
        tern_convert_opts o = {TERN_ROUND_RNE, sat ? TERN_OVERFLOW_SATURATE : TERN_OVERFLOW_INF, 0, 0};
        num_portable_from_f32(TERN_DTYPE_FP16, dst + i, src + i, n - i, &o);
    }
}

T512 int num_avx512_from_f32(tern_dtype t, void *dst, const float *src, size_t n, const tern_convert_opts *o)
{
    int sr = o->round == TERN_ROUND_STOCHASTIC, sat = o->overflow == TERN_OVERFLOW_SATURATE;
    if (!sr && t == TERN_DTYPE_BF16) {
        bf16_rne512(dst, src, n, sat);
        return 1;
    }
    if (!sr && t == TERN_DTYPE_FP16) {
        fp16_rne512(dst, src, n, sat);
        return 1;
    }
    size_t width = tern_dtype_size(t), m = n & ~(size_t)15;
    switch (t) {
    case TERN_DTYPE_TF32: enc_loop512(NUM_FMT_TF32, 4, 13, dst, src, m, o); break;
    case TERN_DTYPE_BF16: enc_loop512(NUM_FMT_BF16, 2, 0, dst, src, m, o); break;
    case TERN_DTYPE_FP16: enc_loop512(NUM_FMT_FP16, 2, 0, dst, src, m, o); break;
    case TERN_DTYPE_FP8_E4M3: enc_loop512(NUM_FMT_E4M3, 1, 0, dst, src, m, o); break;
    case TERN_DTYPE_FP8_E5M2: enc_loop512(NUM_FMT_E5M2, 1, 0, dst, src, m, o); break;
    case TERN_DTYPE_FP8_E4M3_NEURON: enc_loop512(NUM_FMT_E4M3N, 1, 0, dst, src, m, o); break;
    default: return 0;
    }
    if (m < n) {
        tern_convert_opts tail = *o;
        tail.offset = o->offset + m;
        num_portable_from_f32(t, (unsigned char *)dst + m * width, src + m, n - m, &tail);
    }
    return 1;
}

/* Decoded NaNs come back quiet (bit 22 set), as in num_decode_fmt. */
INL512 __m512i quiet_nans512(__m512i u)
{
    __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7FFFFFFF)),
                                            _mm512_set1_epi32(0x7F800000));
    return _mm512_mask_or_epi32(u, nan, u, _mm512_set1_epi32(0x400000));
}

static T512 void bf16_dec512(float *dst, const uint16_t *src, size_t n)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512i u = _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(src + i))), 16);
        _mm512_storeu_si512((void *)(dst + i), quiet_nans512(u));
    }
    for (; i < n; i++) {
        uint16_t c;
        memcpy(&c, src + i, 2);
        dst[i] = num_u2f(num_decode_fmt(NUM_FMT_BF16, c));
    }
}

static T512 void fp16_dec512(float *dst, const uint16_t *src, size_t n)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 x = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(src + i)));
        _mm512_storeu_si512((void *)(dst + i), quiet_nans512(_mm512_castps_si512(x)));
    }
    for (; i < n; i++) {
        uint16_t c;
        memcpy(&c, src + i, 2);
        dst[i] = num_u2f(num_decode_fmt(NUM_FMT_FP16, c));
    }
}

/* Integers to fp32: widened to int32 and converted with vcvtdq2ps (vcvtudq2ps for uint32), which round to nearest
 * even like C's conversions (exact below 2^24). Tails through masked loads. */
static T512 __attribute__((always_inline)) inline __m512 int_lanes512(tern_dtype t, const uint8_t *s, __mmask16 m)
{
    switch (t) {
    case TERN_DTYPE_INT8: return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(m, s)));
    case TERN_DTYPE_UINT8: return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m, s)));
    case TERN_DTYPE_INT16: return _mm512_cvtepi32_ps(_mm512_cvtepi16_epi32(_mm256_maskz_loadu_epi16(m, s)));
    case TERN_DTYPE_UINT16: return _mm512_cvtepi32_ps(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, s)));
    case TERN_DTYPE_INT32: return _mm512_cvtepi32_ps(_mm512_maskz_loadu_epi32(m, s));
    default: return _mm512_cvtepu32_ps(_mm512_maskz_loadu_epi32(m, s)); /* UINT32 */
    }
}

static T512 void int_dec512(float *dst, tern_dtype t, const void *src, size_t n)
{
    const uint8_t *s = src;
#define INT_DEC(T, ES)                                                                                             \
    do {                                                                                                           \
        size_t i = 0;                                                                                              \
        for (; i + 16 <= n; i += 16)                                                                               \
            _mm512_storeu_ps(dst + i, int_lanes512(T, s + i * (ES), (__mmask16)0xFFFF));                          \
        if (i < n) {                                                                                               \
            __mmask16 m = (__mmask16)((1u << (n - i)) - 1u);                                                       \
            _mm512_mask_storeu_ps(dst + i, m, int_lanes512(T, s + i * (ES), m));                                   \
        }                                                                                                          \
    } while (0)
    switch (t) {
    case TERN_DTYPE_INT8: INT_DEC(TERN_DTYPE_INT8, 1); break;
    case TERN_DTYPE_UINT8: INT_DEC(TERN_DTYPE_UINT8, 1); break;
    case TERN_DTYPE_INT16: INT_DEC(TERN_DTYPE_INT16, 2); break;
    case TERN_DTYPE_UINT16: INT_DEC(TERN_DTYPE_UINT16, 2); break;
    case TERN_DTYPE_INT32: INT_DEC(TERN_DTYPE_INT32, 4); break;
    default: INT_DEC(TERN_DTYPE_UINT32, 4); break;
    }
#undef INT_DEC
}

T512 int num_avx512_to_f32(float *dst, tern_dtype t, const void *src, size_t n)
{
    switch (t) {
    case TERN_DTYPE_BF16: bf16_dec512(dst, src, n); return 1;
    case TERN_DTYPE_FP16: fp16_dec512(dst, src, n); return 1;
    case TERN_DTYPE_INT8:
    case TERN_DTYPE_UINT8:
    case TERN_DTYPE_INT16:
    case TERN_DTYPE_UINT16:
    case TERN_DTYPE_INT32:
    case TERN_DTYPE_UINT32: int_dec512(dst, t, src, n); return 1;
    default: return 0;
    }
}
#else
int num_avx512_from_f32(tern_dtype t, void *dst, const float *src, size_t n, const tern_convert_opts *o)
{
    (void)t, (void)dst, (void)src, (void)n, (void)o;
    return 0;
}
int num_avx512_to_f32(float *dst, tern_dtype t, const void *src, size_t n)
{
    (void)dst, (void)t, (void)src, (void)n;
    return 0;
}
#endif
