/* AVX2 + F16C kernels: the rounding core of num_internal.h on 8 lanes, the stochastic-rounding generator evaluated
 * lane-wise, a dedicated bf16 RNE kernel (add-0x7FFF-plus-lsb, NaN lanes blended in) and VCVTPS2PH/VCVTPH2PS for
 * fp16 RNE. AVX2 has no unsigned 32-bit compares, so they are done as signed compares after flipping bit 31.
 * Compiled with a target attribute; convert.c calls in only on hosts with AVX2 and F16C. Tails go to the portable
 * kernel with the counter offset advanced. */
#include "num/num_internal.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#define T2 __attribute__((target("avx2,f16c")))
#define INL2 static inline __attribute__((always_inline, target("avx2,f16c")))

INL2 __m256i set1(uint32_t v) { return _mm256_set1_epi32((int)v); }

/* a < b, unsigned */
INL2 __m256i cmplt_u32(__m256i a, __m256i b)
{
    const __m256i bias = set1(0x80000000u);
    return _mm256_cmpgt_epi32(_mm256_xor_si256(b, bias), _mm256_xor_si256(a, bias));
}

INL2 __m256i lowbias(__m256i x)
{
    x = _mm256_xor_si256(x, _mm256_srli_epi32(x, 16));
    x = _mm256_mullo_epi32(x, set1(0x7FEB352Du));
    x = _mm256_xor_si256(x, _mm256_srli_epi32(x, 15));
    x = _mm256_mullo_epi32(x, set1(0x846CA68Bu));
    return _mm256_xor_si256(x, _mm256_srli_epi32(x, 16));
}

INL2 __m256i draws8(num_key key, uint64_t c0)
{
    __m256i base = set1((uint32_t)c0);
    __m256i lo = _mm256_add_epi32(base, _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    /* carry out of the low word: the mask is all-ones (-1) in carried lanes, so subtract it */
    __m256i hi = _mm256_sub_epi32(set1((uint32_t)(c0 >> 32)), cmplt_u32(lo, base));
    __m256i h = lowbias(_mm256_xor_si256(lo, set1(key.k0)));
    return lowbias(_mm256_add_epi32(_mm256_xor_si256(h, hi), set1(key.k1)));
}

/* num_encode_fmt on 8 lanes. All magnitudes compared here are below 2^31 except where noted. */
INL2 __m256i enc8(num_fmt f, __m256i u, int sr, int sat, __m256i r)
{
    const __m256i one = set1(1);
    __m256i a = _mm256_and_si256(u, set1(0x7FFFFFFFu));
    __m256i s = _mm256_slli_epi32(_mm256_srli_epi32(u, 31), f.sign_shift);
    __m256i eff = _mm256_srli_epi32(a, 23);
    __m256i isnorm = _mm256_cmpgt_epi32(eff, set1((uint32_t)(127 - f.b)));
    __m256i nn = _mm256_sub_epi32(a, set1((uint32_t)(127 - f.b) << 23));
    __m256i effnz = _mm256_cmpgt_epi32(eff, _mm256_setzero_si256());
    __m256i sig = _mm256_or_si256(_mm256_and_si256(a, set1(0x7FFFFFu)), _mm256_and_si256(effnz, set1(0x800000u)));
    __m256i ks = _mm256_sub_epi32(set1((uint32_t)(151 - f.b - f.m)), _mm256_max_epu32(eff, one));
    __m256i n = _mm256_blendv_epi8(sig, nn, isnorm);
    __m256i k = _mm256_blendv_epi8(ks, set1((uint32_t)(23 - f.m)), isnorm);
    __m256i mag;
    if (!sr) {
        __m256i kk = _mm256_min_epu32(k, set1(31));
        __m256i q = _mm256_srlv_epi32(n, kk);
        __m256i halfm1 = _mm256_sub_epi32(_mm256_sllv_epi32(one, _mm256_sub_epi32(kk, one)), one);
        __m256i t = _mm256_add_epi32(_mm256_add_epi32(n, halfm1), _mm256_and_si256(q, one));
        mag = _mm256_srlv_epi32(t, kk);
    } else {
        __m256i q = _mm256_srlv_epi32(n, k);
        __m256i rem = _mm256_and_si256(n, _mm256_sub_epi32(_mm256_sllv_epi32(one, k), one));
        __m256i c32 = set1(32);
        __m256i fr = _mm256_or_si256(_mm256_sllv_epi32(rem, _mm256_sub_epi32(c32, k)),
                                     _mm256_srlv_epi32(n, _mm256_sub_epi32(k, c32)));
        __m256i up = cmplt_u32(_mm256_add_epi32(fr, r), fr); /* -1 where the sum wrapped */
        mag = _mm256_sub_epi32(q, up);
    }
    __m256i ovf_code = set1(sat ? f.maxmag : f.infmag);
    mag = _mm256_blendv_epi8(mag, ovf_code, _mm256_cmpgt_epi32(mag, set1(f.maxmag)));
    __m256i infa = set1(0x7F800000u);
    mag = _mm256_blendv_epi8(mag, ovf_code, _mm256_cmpeq_epi32(a, infa));
    __m256i isnan = _mm256_cmpgt_epi32(a, infa); /* a < 2^31: signed compare is fine */
    if (!_mm256_testz_si256(isnan, isnan)) {
        __m256i nanc;
        if (f.has_inf)
            nanc = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(a, 23 - f.m), set1((1u << f.m) - 1u)),
                                   set1(f.infmag | (1u << (f.m - 1))));
        else
            nanc = set1(f.infmag);
        mag = _mm256_blendv_epi8(mag, nanc, isnan);
    }
    return _mm256_or_si256(s, mag);
}

/* Narrow 8 lanes of codes (< 2^16) to 8 uint16 / 8 uint8 in the low bytes of an xmm. */
INL2 __m128i narrow16(__m256i c)
{
    const __m256i shuf = _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, -1, -1, -1, -1, -1, -1, -1, -1, 0, 1, 4, 5, 8, 9,
                                          12, 13, -1, -1, -1, -1, -1, -1, -1, -1);
    __m256i p = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(c, shuf), 0x08); /* qwords 0 and 2 */
    return _mm256_castsi256_si128(p);
}
INL2 __m128i narrow8(__m256i c)
{
    const __m256i shuf = _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 4, 8, 12, -1,
                                          -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
    __m256i p = _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(c, shuf), _mm256_setr_epi32(0, 4, 1, 1, 1, 1, 1, 1));
    return _mm256_castsi256_si128(p);
}

NUM_INLINE T2 void enc_loop2(num_fmt f, int width, int shift, void *dst, const float *src, size_t n,
                             const tern_convert_opts *o)
{
    int sr = o->round == TERN_ROUND_STOCHASTIC, sat = o->overflow == TERN_OVERFLOW_SATURATE;
    num_key key = num_key_of(o->seed);
    for (size_t i = 0; i + 8 <= n; i += 8) {
        __m256i u = _mm256_loadu_si256((const __m256i *)(src + i));
        __m256i r = sr ? draws8(key, o->offset + i) : _mm256_setzero_si256();
        __m256i c = enc8(f, u, sr, sat, r);
        if (width == 1)
            _mm_storel_epi64((__m128i *)((uint8_t *)dst + i), narrow8(c));
        else if (width == 2)
            _mm_storeu_si128((__m128i *)((uint16_t *)dst + i), narrow16(c));
        else
            _mm256_storeu_si256((__m256i *)((uint32_t *)dst + i), _mm256_slli_epi32(c, shift));
    }
}

/* bf16 RNE on the fp32 pattern: (u + 0x7FFF + lsb) >> 16 is exact RNE for finite values, subnormals included
 * (bf16 shares fp32's exponent), and carries into inf on overflow; NaN lanes get the quieted payload. */
static T2 void bf16_rne2(uint16_t *dst, const float *src, size_t n, int sat)
{
    const __m256i one = set1(1), bias = set1(0x7FFF), absm = set1(0x7FFFFFFFu), infa = set1(0x7F800000u);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i u = _mm256_loadu_si256((const __m256i *)(src + i));
        __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), one);
        __m256i r = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, bias), lsb), 16);
        __m256i a = _mm256_and_si256(u, absm);
        __m256i nan = _mm256_cmpgt_epi32(a, infa);
        r = _mm256_blendv_epi8(r, _mm256_or_si256(_mm256_srli_epi32(u, 16), set1(0x40)), nan);
        if (sat) {
            __m256i isinf = _mm256_cmpeq_epi32(_mm256_and_si256(r, set1(0x7FFF)), set1(0x7F80));
            r = _mm256_blendv_epi8(r, _mm256_or_si256(_mm256_and_si256(r, set1(0x8000)), set1(0x7F7F)), isinf);
        }
        _mm_storeu_si128((__m128i *)(dst + i), narrow16(r));
    }
    if (i < n) {
        tern_convert_opts o = {TERN_ROUND_RNE, sat ? TERN_OVERFLOW_SATURATE : TERN_OVERFLOW_INF, 0, 0};
        num_portable_from_f32(TERN_DTYPE_BF16, dst + i, src + i, n - i, &o);
    }
}

static T2 void fp16_rne2(uint16_t *dst, const float *src, size_t n, int sat)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        if (sat) {
            __m128i isinf = _mm_cmpeq_epi16(_mm_and_si128(h, _mm_set1_epi16(0x7FFF)), _mm_set1_epi16(0x7C00));
            __m128i fix = _mm_or_si128(_mm_and_si128(h, _mm_set1_epi16((short)0x8000)), _mm_set1_epi16(0x7BFF));
            h = _mm_blendv_epi8(h, fix, isinf);
        }
        _mm_storeu_si128((__m128i *)(dst + i), h);
    }
    if (i < n) {
        tern_convert_opts o = {TERN_ROUND_RNE, sat ? TERN_OVERFLOW_SATURATE : TERN_OVERFLOW_INF, 0, 0};
        num_portable_from_f32(TERN_DTYPE_FP16, dst + i, src + i, n - i, &o);
    }
}

T2 int num_avx2_from_f32(tern_dtype t, void *dst, const float *src, size_t n, const tern_convert_opts *o)
{
    int sr = o->round == TERN_ROUND_STOCHASTIC, sat = o->overflow == TERN_OVERFLOW_SATURATE;
    if (!sr && t == TERN_DTYPE_BF16) {
        bf16_rne2(dst, src, n, sat);
        return 1;
    }
    if (!sr && t == TERN_DTYPE_FP16) {
        fp16_rne2(dst, src, n, sat);
        return 1;
    }
    size_t width = tern_dtype_size(t), m = n & ~(size_t)7;
    switch (t) {
    case TERN_DTYPE_TF32: enc_loop2(NUM_FMT_TF32, 4, 13, dst, src, m, o); break;
    case TERN_DTYPE_BF16: enc_loop2(NUM_FMT_BF16, 2, 0, dst, src, m, o); break;
    case TERN_DTYPE_FP16: enc_loop2(NUM_FMT_FP16, 2, 0, dst, src, m, o); break;
    case TERN_DTYPE_FP8_E4M3: enc_loop2(NUM_FMT_E4M3, 1, 0, dst, src, m, o); break;
    case TERN_DTYPE_FP8_E5M2: enc_loop2(NUM_FMT_E5M2, 1, 0, dst, src, m, o); break;
    case TERN_DTYPE_FP8_E4M3_NEURON: enc_loop2(NUM_FMT_E4M3N, 1, 0, dst, src, m, o); break;
    default: return 0;
    }
    if (m < n) {
        tern_convert_opts tail = *o;
        tail.offset = o->offset + m;
        num_portable_from_f32(t, (unsigned char *)dst + m * width, src + m, n - m, &tail);
    }
    return 1;
}

INL2 __m256i quiet_nans2(__m256i u)
{
    __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, set1(0x7FFFFFFFu)), set1(0x7F800000u));
    return _mm256_or_si256(u, _mm256_and_si256(nan, set1(0x400000u)));
}

static T2 void dec16_2(float *dst, tern_dtype t, const uint16_t *src, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i h = _mm_loadu_si128((const __m128i *)(src + i));
        __m256i u = t == TERN_DTYPE_BF16 ? _mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)
                                         : _mm256_castps_si256(_mm256_cvtph_ps(h));
        _mm256_storeu_si256((__m256i *)(dst + i), quiet_nans2(u));
    }
    for (; i < n; i++) {
        uint16_t c;
        memcpy(&c, src + i, 2);
        dst[i] = num_u2f(num_decode_fmt(t == TERN_DTYPE_BF16 ? NUM_FMT_BF16 : NUM_FMT_FP16, c));
    }
}

T2 int num_avx2_to_f32(float *dst, tern_dtype t, const void *src, size_t n)
{
    if (t != TERN_DTYPE_BF16 && t != TERN_DTYPE_FP16)
        return 0;
    dec16_2(dst, t, src, n);
    return 1;
}
#else
int num_avx2_from_f32(tern_dtype t, void *dst, const float *src, size_t n, const tern_convert_opts *o)
{
    (void)t, (void)dst, (void)src, (void)n, (void)o;
    return 0;
}
int num_avx2_to_f32(float *dst, tern_dtype t, const void *src, size_t n)
{
    (void)dst, (void)t, (void)src, (void)n;
    return 0;
}
#endif
