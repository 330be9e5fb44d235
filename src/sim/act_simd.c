/* ScalarE's activation rows with AVX-512, giving exactly exec_scalar.c's values (act_eval): the fp32 affine step
 * t = in * sc + b (a product and a sum, each rounded: this file is compiled with -ffp-contract=off so they never
 * fuse), then the function of t.
 *   - copy and relu are fp32 operations on t, the same IEEE operations as the scalar loop, so the same bits.
 *   - exp, sigmoid, silu, tanh and both GELUs are act_eval's double expressions, operation for operation, with libm's
 *     exp and erfc replaced by vector ones (exp: reduction by ln 2 in two parts, a degree-13 polynomial, scaling
 *     by 2^k; erfc: piecewise polynomials below 4, a rational mapping and exp above, see below): within a few
 *     double ulps of libm's. Rounding a double to fp32 can only differ between two such
 *     values when they lie on either side of an fp32 rounding boundary, so a lane whose double result is within
 *     2^8 ulps of a midpoint between fp32 values (one lane in two million), outside the normal fp32 range, NaN,
 *     or whose exp argument is beyond +-700 is recomputed by act_eval itself. tests/sim/test_act_exhaustive.c
 *     checks every fp32 input of each function against act_eval.
 * Functions not listed keep the scalar loop. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sim/act.h"
#include "tern/base.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define HAVE_X86 1
#else
#define HAVE_X86 0
#endif

int act_simd_has(tern_act_func f)
{
    switch (f) {
    case TERN_ACT_COPY:
    case TERN_ACT_RELU:
    case TERN_ACT_EXP:
    case TERN_ACT_SIGMOID:
    case TERN_ACT_SILU:
    case TERN_ACT_GELU:
    case TERN_ACT_GELU_TANH:
    case TERN_ACT_TANH: return 1;
    default: return 0;
    }
}

#if HAVE_X86
static int avx512_ok(void)
{
    const char *e = getenv("TERN_SIMD"); /* "portable" and "avx2" cap the vector level, as for conversions */
    if (e && (!strcmp(e, "portable") || !strcmp(e, "avx2")))
        return 0;
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq");
}

#define VT __attribute__((target("avx512f,avx512dq"), always_inline)) static inline

/* exp(x) for |x| <= 700 (a normal double result). */
VT __m512d vexp(__m512d x)
{
    const __m512d inv_ln2 = _mm512_set1_pd(0x1.71547652b82fep0);
    const __m512d ln2_hi = _mm512_set1_pd(0x1.62e42fee00000p-1); /* 32 significant bits: k * ln2_hi exact */
    const __m512d ln2_lo = _mm512_set1_pd(0x1.a39ef35793c76p-33);
    __m512d k = _mm512_roundscale_pd(_mm512_mul_pd(x, inv_ln2), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512d r = _mm512_fnmadd_pd(k, ln2_hi, x);
    r = _mm512_fnmadd_pd(k, ln2_lo, r); /* |r| <= 0.3466: the degree-13 Taylor polynomial's error is 4e-18 */
    static const double c[14] = {1.0,
                                 1.0,
                                 0.5,
                                 1.0 / 6,
                                 1.0 / 24,
                                 1.0 / 120,
                                 1.0 / 720,
                                 1.0 / 5040,
                                 1.0 / 40320,
                                 1.0 / 362880,
                                 1.0 / 3628800,
                                 1.0 / 39916800,
                                 1.0 / 479001600,
                                 1.0 / 6227020800.0};
    __m512d p = _mm512_set1_pd(c[13]);
    for (int i = 12; i >= 0; i--)
        p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(c[i]));
    return _mm512_scalef_pd(p, k);
}

/* Lanes whose double y might round to another fp32 than a value a few ulps away: within 2^8 double ulps of a
 * midpoint between fp32 values (the low 29 mantissa bits near 1 << 28), or outside the normal fp32 range
 * [2^-126, 2^128) in magnitude (zero and NaN included). */
VT __mmask8 unsure(__m512d y)
{
    __m512i low = _mm512_and_si512(_mm512_castpd_si512(y), _mm512_set1_epi64(0x1FFFFFFF));
    __m512i dist = _mm512_abs_epi64(_mm512_sub_epi64(low, _mm512_set1_epi64(0x10000000)));
    __mmask8 m = _mm512_cmplt_epi64_mask(dist, _mm512_set1_epi64(256));
    __m512d a = _mm512_abs_pd(y);
    m |= _mm512_cmp_pd_mask(a, _mm512_set1_pd(0x1p-126), _CMP_NGE_UQ);
    m |= _mm512_cmp_pd_mask(a, _mm512_set1_pd(0x1p128), _CMP_NLT_UQ);
    return m;
}

/* erfc(a) for 0 <= a <= 26: exp(-a^2) P(t) / (1 + 2a) with t = (a - 3.75) / (a + 3.75) in [-1, 1), P the
 * degree-24 polynomial fitted to (1 + 2a) exp(a^2) erfc(a) (the mapping of Shepherd and Laframboise, Math. Comp.
 * 36 (1981) 249-253; coefficients from scripts/gen_erfc_poly.py, a Chebyshev fit in mpmath converted to powers
 * of t): relative error below 5e-16 in double. a^2 is split exactly (hi + lo, an fma) so that exp(-a^2) loses
 * nothing to the square's rounding: exp(-hi - lo) = exp(-hi) (1 - lo) to within lo^2. */
VT __m512d verfc(__m512d a)
{
    static const double P[25] = {
        0x1.3ccda0b5d5dc2p+0, -0x1.1f367683f89a5p-3, 0x1.d5f294815a405p-9,  0x1.510169d09665bp-4,
        -0x1.bda9309a2949ap-4, 0x1.7a14188a9ce2ap-4,  -0x1.e0d0fa6ddfe85p-5, 0x1.d0b0037d167adp-6,
        -0x1.3f603c398c6c5p-7, 0x1.cc3a0e7d2150cp-10, 0x1.33fb2968decd9p-12, -0x1.303fa4966bc38p-12,
        0x1.b1439865f8d9ep-15, 0x1.778b933adcce7p-16, -0x1.800077b775cf3p-17, -0x1.055686d42aa63p-20,
        0x1.d6339f66a50f8p-20, -0x1.eb803840c0574p-25, -0x1.15be4201dc721p-22, 0x1.8fa9fe49c359bp-26,
        0x1.4c37f59c36e71p-25, -0x1.014cd7201b5adp-28, -0x1.638dcc665be8dp-28, 0x1.561b105822235p-32,
        0x1.d3744857e262bp-32};
    const __m512d k = _mm512_set1_pd(3.75), one = _mm512_set1_pd(1.0);
    __m512d t = _mm512_div_pd(_mm512_sub_pd(a, k), _mm512_add_pd(a, k));
    __m512d p = _mm512_set1_pd(P[24]);
    for (int i = 23; i >= 0; i--)
        p = _mm512_fmadd_pd(p, t, _mm512_set1_pd(P[i]));
    __m512d hi = _mm512_mul_pd(a, a), lo = _mm512_fmsub_pd(a, a, hi);
    __m512d e = vexp(_mm512_sub_pd(_mm512_setzero_pd(), hi));
    e = _mm512_fnmadd_pd(e, lo, e);
    return _mm512_div_pd(_mm512_mul_pd(e, p), _mm512_fmadd_pd(_mm512_set1_pd(2.0), a, one));
}

/* erfc(a) for 0 <= a < 4 without an exponential or a division: on each interval [k/2, (k+1)/2) a degree-16
 * polynomial in s = 4 (a - k/2 - 1/4), its coefficients picked per lane by a permute (relative error below 3e-15,
 * scripts/gen_erfc_pieces.py, which prints this table: row j, the coefficient of s^j on the eight intervals). */
static const double ERFC_PIECES[17][8] = {
    {0x1.728558ee694fcp-1, 0x1.27c6d14c5e341p-2, 0x1.3bcd133aa0ffcp-4, 0x1.b4be201caa4b4p-7, 0x1.7f713f9cc9784p-10, 0x1.a609f7584d32bp-14, 0x1.20c1303550f0ep-18, 0x1.e87470e4f4246p-24},
    {-0x1.0f5d1602f7e41p-2, -0x1.492e42d78d2c5p-3, -0x1.e4652fadcb6b2p-5, -0x1.b055303221015p-7, -0x1.d4143a9dfe965p-10, -0x1.3360ccd23db3ap-13, -0x1.e9b5e8d00ce76p-18, -0x1.d9371e2ff7c35p-23},
    {0x1.0f5d1602f7e41p-6, 0x1.edc5644353c27p-6, 0x1.2ebf3dcc9f22fp-6, 0x1.7a4a8a2bdce13p-8, 0x1.074b60f8df349p-10, 0x1.a6a519a114d70p-14, 0x1.8de3cd290a7c0p-18, 0x1.bba3ac4cf8472p-23},
    {0x1.3c974458cbdf6p-8, -0x1.b6e8591f66e55p-12, -0x1.571d01c5c56bfp-9, -0x1.7148c3d57c311p-10, -0x1.63ef61e824426p-12, -0x1.69cf466ccdf5ep-15, -0x1.9aa489e3cad26p-19, -0x1.0b6a7b0f1b59ep-23},
    {-0x1.040e8a6d82e51p-11, -0x1.349b5eaa1459ap-11, 0x1.93a9a7bb7edb1p-16, 0x1.8a0da54306152p-13, 0x1.38a98327890e7p-14, 0x1.ab0c273ac263ep-17, 0x1.2c7d5ef053eacp-20, 0x1.d06f586093ecdp-25},
    {-0x1.47e5cfee40d45p-14, 0x1.b42a1890ce128p-15, 0x1.8281ce0b35294p-15, -0x1.b22257dd02143p-18, -0x1.5d3b17bbe0c00p-17, -0x1.6935960665098p-19, -0x1.490a4d230e88dp-22, -0x1.3436bc9fc3cb9p-26},
    {0x1.4c0b253ea7263p-17, 0x1.b8477966b3bf1p-18, -0x1.5d0003af70a14p-18, -0x1.25b378c92a32ep-19, 0x1.7cae0d45b1763p-21, 0x1.b2755bfd7350dp-22, 0x1.145464ea289bbp-24, 0x1.4357b5546dde7p-28},
    {0x1.08d946cdb4b59p-20, -0x1.2e0afb0b94c00p-20, -0x1.db43c9738b942p-23, 0x1.8d10fb6bde332p-22, 0x1.5f8313b5c2753p-25, -0x1.52b6263ebd08cp-25, -0x1.647f721c2ebccp-27, -0x1.110de49c4b17ap-30},
    {-0x1.3db6ffa1425e2p-23, -0x1.2db332fb41b4cp-25, 0x1.75672cec0dd51p-24, -0x1.7ec1d1d9f9368p-27, -0x1.0602e33b7fc28p-26, 0x1.75577263970d9p-30, 0x1.567479c9481e9p-30, 0x1.7566beee97972p-33},
    {-0x1.5562353afecb0p-27, 0x1.04105cb84afbap-26, -0x1.cc2254673a6a9p-29, -0x1.d4cf0b6ff1c63p-29, 0x1.8352cd88ea2e2p-30, 0x1.2abb3c2fa3ca8p-32, -0x1.b2c31feca48afp-34, -0x1.99f5c516df4b5p-36},
    {0x1.e5ffdc55c3db6p-30, -0x1.86234ad682ba5p-33, -0x1.a00750111dad6p-31, 0x1.d041ef0c776b4p-32, 0x1.80c130376d8e7p-37, -0x1.cd59245d1d0c5p-35, 0x1.38933d3f3a8f7p-39, 0x1.5d69036186ba7p-39},
    {0x1.6689cd2600923p-34, -0x1.47258ee730133p-33, 0x1.53b13db4b1f83p-34, 0x1.6d7a19a433fbcp-40, -0x1.11325b1c91281p-36, 0x1.09d0ddf126d21p-38, 0x1.807069076833ep-41, -0x1.a04343ab505bfp-43},
    {-0x1.357bb053473c6p-36, 0x1.bd5e14fbade5dp-38, 0x1.ba66fc915ace8p-39, -0x1.2007d40bfe021p-38, 0x1.7ca56911981a4p-40, 0x1.1f87dca2d7362p-44, -0x1.ff327766d3b0fp-44, 0x1.833454a2a7842p-48},
    {-0x1.353a34fbe6c67p-41, 0x1.3da3aadc671d5p-40, -0x1.d4329bcf7aff1p-41, 0x1.2925393bb51b7p-42, 0x1.66a00bbc4069ep-46, -0x1.68d96341811e0p-45, 0x1.2660f7836a888p-47, 0x1.ecb3498124fcdp-51},
    {0x1.5165ace068200p-43, -0x1.72df0eca79b70p-44, 0x1.93bab9820e7e3p-47, 0x1.3695b4b3a9bc3p-46, -0x1.cb1a3be4ea327p-47, 0x1.eaff3215b7b88p-49, -0x1.cd6cada333b4ap-57, -0x1.6e194030a9005p-53},
    {0x1.a90bf4c959e82p-49, -0x1.d7ffe9cc6b716p-48, 0x1.a5261b77733b8p-48, -0x1.abd949ee80276p-49, 0x1.bb09795d0c9cep-51, 0x1.b92cba3b1d621p-58, -0x1.2098fc5c76149p-54, 0x1.e053b6cfd3a19p-57},
    {-0x1.385d348753740p-50, 0x1.a6524cbad62f1p-51, -0x1.5b86e0b61de31p-52, 0x1.4a925dfe734cbp-55, 0x1.5b1ae3c82cd23p-55, -0x1.c5a0cc799f753p-56, 0x1.cdcd9713da7d0p-58, -0x1.a7b7f3a78bc96p-62},
};

VT __m512d verfc4(__m512d a)
{
    __m512d kf = _mm512_min_pd(_mm512_roundscale_pd(_mm512_add_pd(a, a), _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC),
                               _mm512_set1_pd(7.0));
    __m512i k = _mm512_cvtpd_epi64(kf);
    __m512d s = _mm512_mul_pd(_mm512_sub_pd(a, _mm512_fmadd_pd(kf, _mm512_set1_pd(0.5), _mm512_set1_pd(0.25))),
                              _mm512_set1_pd(4.0));
    __m512d p = _mm512_permutexvar_pd(k, _mm512_loadu_pd(ERFC_PIECES[16]));
    for (int j = 15; j >= 0; j--)
        p = _mm512_fmadd_pd(p, s, _mm512_permutexvar_pd(k, _mm512_loadu_pd(ERFC_PIECES[j])));
    return p;
}

/* The erf-form GELU, 0.5 * x * erfc(-x * rsqrt2) as act_eval groups it; erfc(z) = 2 - erfc(-z) for z < 0. */
VT __m512d gelu8(__m512d x, __mmask8 *bad)
{
    const __m512d rsqrt2 = _mm512_set1_pd(0.70710678118654752440);
    __m512d z = _mm512_mul_pd(_mm512_sub_pd(_mm512_setzero_pd(), x), rsqrt2);
    __m512d a = _mm512_abs_pd(z);
    __mmask8 out = _mm512_cmp_pd_mask(a, _mm512_set1_pd(26.0), _CMP_NLE_UQ); /* beyond 26, or NaN */
    __m512d ac = _mm512_mask_blend_pd(out, a, _mm512_setzero_pd());
    __mmask8 near = _mm512_cmp_pd_mask(ac, _mm512_set1_pd(4.0), _CMP_LT_OQ);
    __m512d e = near == 0xFF ? verfc4(ac) : near ? _mm512_mask_blend_pd(near, verfc(ac), verfc4(ac)) : verfc(ac);
    __mmask8 neg = _mm512_cmp_pd_mask(z, _mm512_setzero_pd(), _CMP_LT_OQ);
    e = _mm512_mask_sub_pd(e, neg, _mm512_set1_pd(2.0), e);
    __m512d y = _mm512_mul_pd(_mm512_mul_pd(_mm512_set1_pd(0.5), x), e);
    *bad = out | unsure(y);
    return y;
}

/* tanh: below 1/8 in magnitude its odd Taylor series through x^17 (the next term is under 1e-19 of the sum); up to
 * 20, sign(x) (1 - t) / (1 + t) with t = exp(-2 |x|) (1 - t loses at most 2.2 bits to cancellation at 1/8); beyond
 * 20, +-1 (tanh(20) is within 1e-17 of 1, so libm's double is 1 too). Zeros, subnormals and NaNs fall to act_eval
 * through `unsure`. */
VT __m512d tanh8(__m512d x, __mmask8 *bad)
{
    static const double c[8] = {-1.0 / 3,          2.0 / 15,           -17.0 / 315,          62.0 / 2835,
                                -1382.0 / 155925, 21844.0 / 6081075, -929569.0 / 638512875, 6404582.0 / 10854718875.0};
    const __m512d one = _mm512_set1_pd(1.0);
    __m512d a = _mm512_abs_pd(x), x2 = _mm512_mul_pd(x, x);
    __m512d p = _mm512_set1_pd(c[7]);
    for (int i = 6; i >= 0; i--)
        p = _mm512_fmadd_pd(p, x2, _mm512_set1_pd(c[i]));
    __m512d small = _mm512_add_pd(x, _mm512_mul_pd(x, _mm512_mul_pd(x2, p)));
    __mmask8 big = _mm512_cmp_pd_mask(a, _mm512_set1_pd(20.0), _CMP_GT_OQ);
    __m512d t = vexp(_mm512_mul_pd(_mm512_set1_pd(-2.0), _mm512_min_pd(a, _mm512_set1_pd(20.0))));
    __m512d r = _mm512_div_pd(_mm512_sub_pd(one, t), _mm512_add_pd(one, t));
    r = _mm512_mask_blend_pd(big, r, one);
    /* the sign of x on the magnitude */
    r = _mm512_castsi512_pd(_mm512_or_si512(_mm512_castpd_si512(r),
                                            _mm512_and_si512(_mm512_castpd_si512(x), _mm512_set1_epi64(INT64_MIN))));
    __mmask8 is_small = _mm512_cmp_pd_mask(a, _mm512_set1_pd(0.125), _CMP_LT_OQ);
    __m512d y = _mm512_mask_blend_pd(is_small, r, small);
    *bad = unsure(y) | _mm512_cmp_pd_mask(x, x, _CMP_UNORD_Q); /* a NaN took min's other operand above */
    return y;
}

/* The double part of one function on 8 lanes; *bad gets the lanes act_eval must redo. */
VT __m512d fn8(tern_act_func f, __m512d x, __mmask8 *bad)
{
    const __m512d one = _mm512_set1_pd(1.0), lim = _mm512_set1_pd(700.0);
    __m512d z, y;
    if (f == TERN_ACT_GELU)
        return gelu8(x, bad);
    if (f == TERN_ACT_TANH)
        return tanh8(x, bad);
    switch (f) {
    case TERN_ACT_EXP: z = x; break;
    case TERN_ACT_SIGMOID:
    case TERN_ACT_SILU: z = _mm512_sub_pd(_mm512_setzero_pd(), x); break; /* -x, exact */
    default: {                                                             /* GELU_TANH */
        const __m512d k = _mm512_set1_pd(0.79788456080286535588);
        /* -2.0 * (k * (x + 0.044715 * x * x * x)), evaluated left to right as in act_eval */
        __m512d c = _mm512_mul_pd(_mm512_mul_pd(_mm512_mul_pd(_mm512_set1_pd(0.044715), x), x), x);
        z = _mm512_mul_pd(_mm512_set1_pd(-2.0), _mm512_mul_pd(k, _mm512_add_pd(x, c)));
        break;
    }
    }
    /* every lane below the limit under which the function no longer depends on exp(z) (below): a causal mask's
     * block of scores, computed without the exponential */
    __mmask8 low = _mm512_cmp_pd_mask(z, _mm512_set1_pd(f == TERN_ACT_EXP ? -104.0 : -700.0), _CMP_LT_OQ);
    if (low == 0xFF) {
        *bad = 0;
        return f == TERN_ACT_EXP ? _mm512_setzero_pd() : f == TERN_ACT_SIGMOID ? one : x;
    }
    __mmask8 out = _mm512_cmp_pd_mask(_mm512_abs_pd(z), lim, _CMP_NLE_UQ); /* beyond +-700, or NaN */
    __m512d e = vexp(_mm512_mask_blend_pd(out, z, _mm512_setzero_pd()));
    switch (f) {
    case TERN_ACT_EXP: y = e; break;
    case TERN_ACT_SIGMOID: y = _mm512_div_pd(one, _mm512_add_pd(one, e)); break;
    case TERN_ACT_SILU: y = _mm512_mul_pd(x, _mm512_div_pd(one, _mm512_add_pd(one, e))); break;
    default: y = _mm512_div_pd(x, _mm512_add_pd(one, e)); break;
    }
    *bad = out | unsure(y);
    if (*bad) {
        /* z below -700 (a masked score's exp; -inf included): exp(z) < 2^-1000, so 1 + exp(z) is 1 in double and
         * the other functions come out as with exp(z) = 0; exp itself rounds to fp32 +0 from z < -104 on (below
         * 2^-150, half the least subnormal). Computed here rather than by act_eval, lane by lane (`low`, above). */
        low &= *bad;
        if (low) {
            __m512d y0;
            switch (f) {
            case TERN_ACT_EXP: y0 = _mm512_setzero_pd(); break;
            case TERN_ACT_SIGMOID: y0 = one; break;
            default: y0 = x; break; /* silu: x * 1, gelu_tanh: x / 1 */
            }
            y = _mm512_mask_blend_pd(low, y, y0);
            *bad &= (__mmask8)~low;
        }
    }
    return y;
}

__attribute__((target("avx512f,avx512dq"))) static void row(tern_act_func f, const float *in, float *out, size_t n,
                                                            float sc, float b)
{
    const __m512 vs = _mm512_set1_ps(sc), vb = _mm512_set1_ps(b);
    for (size_t i = 0; i < n; i += 16) {
        __mmask16 mk = n - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - i)) - 1u);
        __m512 t = _mm512_add_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(mk, in + i), vs), vb);
        __m512 r;
        if (f == TERN_ACT_COPY) {
            r = t;
        } else if (f == TERN_ACT_RELU) {
            /* t > 0: t; NaN: t (already quiet: an arithmetic result); else +0 */
            __mmask16 keep = _mm512_cmp_ps_mask(t, _mm512_setzero_ps(), _CMP_NLE_UQ);
            r = _mm512_maskz_mov_ps(keep, t);
        } else {
            __mmask8 bad_lo, bad_hi;
            __m512d lo = fn8(f, _mm512_cvtps_pd(_mm512_castps512_ps256(t)), &bad_lo);
            __m512d hi = fn8(f, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(t), 1))),
                             &bad_hi);
            r = _mm512_insertf32x8(_mm512_castps256_ps512(_mm512_cvtpd_ps(lo)), _mm512_cvtpd_ps(hi), 1);
            __mmask16 bad = (__mmask16)(((unsigned)bad_hi << 8 | bad_lo) & mk);
            if (bad) { /* the rare lanes: act_eval itself, from the same fp32 t */
                float tv[16], rv[16];
                _mm512_storeu_ps(tv, t);
                _mm512_storeu_ps(rv, r);
                for (int l = 0; l < 16; l++)
                    if (bad >> l & 1)
                        rv[l] = (float)act_eval(f, (double)tv[l]);
                r = _mm512_loadu_ps(rv);
            }
        }
        _mm512_mask_storeu_ps(out + i, mk, r);
    }
}
#endif

int act_simd_enabled(void)
{
#if HAVE_X86
    return avx512_ok();
#else
    return 0;
#endif
}

void act_row_simd(tern_act_func f, const float *in, float *out, size_t n, float sc, float b)
{
#if HAVE_X86
    row(f, in, out, n, sc, b);
#else
    (void)f, (void)in, (void)out, (void)n, (void)sc, (void)b;
    TERN_ASSERT(0);
#endif
}
