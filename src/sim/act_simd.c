/* ScalarE's activation rows with AVX-512, giving exactly exec_scalar.c's values (act_eval): the fp32 affine step
 * t = in * sc + b (a product and a sum, each rounded: this file is compiled with -ffp-contract=off so they never
 * fuse), then the function of t.
 *   - copy and relu are fp32 operations on t, the same IEEE operations as the scalar loop, so the same bits.
 *   - exp, sigmoid, silu, tanh and both GELUs are act_eval's double expressions, operation for operation, with libm's
 *     exp and erfc replaced by vector ones (exp: reduction by ln 2 in two parts, a degree-11 polynomial, scaling
 *     by 2^k; erfc: piecewise polynomials below 4, a rational mapping and exp above, see below) and divisions by
 *     1 + e by a Newton reciprocal: within 2^-43 (relative) of libm's, 2^9 double ulps. Rounding a double to fp32
 *     can only differ between two such values when they lie on either side of an fp32 rounding boundary, so a lane
 *     whose double result is within 2^12 ulps of a midpoint between fp32 values (one lane in 65,536), outside the
 *     normal fp32 range, NaN, or whose exp argument is beyond +-700 is recomputed by act_eval itself.
 *     tests/sim/test_act_exhaustive.c checks every fp32 input of each function against act_eval.
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

/* exp(x) for |x| <= 700 (a normal double result): k = round(x / ln 2) by adding and subtracting 1.5 * 2^52 (the fma
 * rounds x / ln 2 to an integer once), r = x - k ln 2 in two parts (k * ln2_hi exact), the degree-11 Taylor polynomial
 * of exp(r) (|r| <= 0.3466: relative error below 9e-15, 2^-46.7), and 2^k added to its exponent field (k's low bits
 * sit at the bottom of the shifted sum's pattern; the result stays normal for |x| <= 700). */
VT __m512d vexp(__m512d x)
{
    const __m512d inv_ln2 = _mm512_set1_pd(0x1.71547652b82fep0), shift = _mm512_set1_pd(0x1.8p52);
    const __m512d ln2_hi = _mm512_set1_pd(0x1.62e42fee00000p-1); /* 32 significant bits: k * ln2_hi exact */
    const __m512d ln2_lo = _mm512_set1_pd(0x1.a39ef35793c76p-33);
    __m512d kd = _mm512_fmadd_pd(x, inv_ln2, shift);
    __m512d k = _mm512_sub_pd(kd, shift);
    __m512d r = _mm512_fnmadd_pd(k, ln2_hi, x);
    r = _mm512_fnmadd_pd(k, ln2_lo, r);
    static const double c[12] = {1.0,
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
                                 1.0 / 39916800};
    /* even and odd terms in two chains of r^2 */
    __m512d r2 = _mm512_mul_pd(r, r), pe = _mm512_set1_pd(c[10]), po = _mm512_set1_pd(c[11]);
    for (int i = 8; i >= 0; i -= 2) {
        pe = _mm512_fmadd_pd(pe, r2, _mm512_set1_pd(c[i]));
        po = _mm512_fmadd_pd(po, r2, _mm512_set1_pd(c[i + 1]));
    }
    __m512d p = _mm512_fmadd_pd(po, r, pe);
    __m512i e = _mm512_slli_epi64(_mm512_castpd_si512(kd), 52);
    return _mm512_castsi512_pd(_mm512_add_epi64(_mm512_castpd_si512(p), e));
}

/* 1 / d for finite d >= 1: rcp14's 14 bits, doubled twice by Newton steps (r += r (1 - d r)): within 2 ulps, at a
 * fraction of a division's cost. */
VT __m512d vrecip(__m512d d)
{
    const __m512d one = _mm512_set1_pd(1.0);
    __m512d r = _mm512_rcp14_pd(d);
    r = _mm512_fmadd_pd(r, _mm512_fnmadd_pd(d, r, one), r);
    return _mm512_fmadd_pd(r, _mm512_fnmadd_pd(d, r, one), r);
}

/* Lanes whose double y might round to another fp32 than a value near it: within 2^12 double ulps of a midpoint
 * between fp32 values (the low 29 mantissa bits near 1 << 28; one lane in 65,536), or outside the normal fp32 range
 * [2^-126, 2^128) in magnitude (zero and NaN included), each an unsigned compare after a subtraction. */
VT __mmask8 unsure(__m512d y)
{
    const __m512i b = _mm512_castpd_si512(y);
    __m512i low = _mm512_and_si512(_mm512_sub_epi64(b, _mm512_set1_epi64((1 << 28) - (1 << 12))),
                                   _mm512_set1_epi64(0x1FFFFFFF));
    __mmask8 m = _mm512_cmplt_epu64_mask(low, _mm512_set1_epi64(1 << 13));
    __m512i a = _mm512_and_si512(b, _mm512_set1_epi64(INT64_MAX));
    m |= _mm512_cmpge_epu64_mask(_mm512_sub_epi64(a, _mm512_set1_epi64(0x3810000000000000)),  /* 2^-126 */
                                 _mm512_set1_epi64(0x47F0000000000000 - 0x3810000000000000)); /* 2^128 */
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

/* erfc(a) for 0 <= a < 4 without an exponential or a division: on each interval [k/4, (k+1)/4) a degree-11
 * polynomial in s = 8 (a - k/4 - 1/8), its coefficients picked per lane by a two-table permute (relative error below
 * 1e-13, 2^-43.9, inside the 2^12-ulp margin of `unsure`; scripts/gen_erfc_pieces.py, which prints this table: row j,
 * the coefficient of s^j on the sixteen intervals). */
static const double ERFC_PIECES[12][16] = {
    {0x1.b82879728f11ep-1, 0x1.311796a46f064p-1, 0x1.81cd2465e1d96p-2, 0x1.ba36dab91c0e9p-3, 0x1.c9296beb09cf1p-4, 0x1.a8973c4b5c03ep-5, 0x1.612d893085125p-6, 0x1.0678442cc256fp-7, 0x1.5bde729a6b60fp-9, 0x1.9a7c305336483p-11, 0x1.aeb4423e690e5p-13, 0x1.916f7c5f2f766p-15, 0x1.4c144d984e1c3p-17, 0x1.e74930983168ap-20, 0x1.3ce784b41193bp-22, 0x1.6d3126d74b63cp-25},
    {-0x1.1c62fa1e869b6p-3, -0x1.f5f0cdaf15313p-4, -0x1.86e9694134b9ep-4, -0x1.0cab61f084b93p-4, -0x1.45e99bcbb7915p-5, -0x1.5ce595c455b0ap-6, -0x1.499d478bca735p-7, -0x1.12ceb37ff9bc4p-8, -0x1.94624e78e0fafp-10, -0x1.06918b6355624p-11, -0x1.2ce898809244dp-13, -0x1.30538fbb77eccp-15, -0x1.0f9e1b4dd36e0p-17, -0x1.abe09e9144b6bp-20, -0x1.296a70f414064p-22, -0x1.6ce1aa3fd7be1p-25},
    {0x1.1c62fa1e868e0p-9, 0x1.78749a434fda0p-8, 0x1.e8a3c39181e6dp-8, 0x1.d62beb64e84b2p-8, 0x1.6ea6cf452e88bp-8, 0x1.dfbbadedf5d0dp-9, 0x1.0bcfca2194774p-9, 0x1.01a1c847fa1b2p-10, 0x1.ada873606f135p-12, 0x1.37ccd585f57d2p-13, 0x1.8af14828c01a2p-15, 0x1.b5781e9d7c3eap-17, 0x1.a8670aa9998e7p-19, 0x1.690585ca90b66p-21, 0x1.0d88765d31c3cp-23, 0x1.617a9cedde0a1p-26},
    {0x1.6f552dbcc32a6p-11, 0x1.e106c51d1f000p-12, 0x1.c81050216877ep-14, -0x1.7c9d756a1150ep-13, -0x1.4cb3cf0aa0c2dp-12, -0x1.4374d82e04ce3p-12, -0x1.d6631e1a28e86p-13, -0x1.143d1c6f4f018p-13, -0x1.0ea475da3be1ap-14, -0x1.c1ec102e36584p-16, -0x1.407fbd18f138cp-17, -0x1.89e17c074d53bp-19, -0x1.a3737e2a2f04ep-21, -0x1.84522fe880ac3p-23, -0x1.394b1fa67026dp-25, -0x1.b95fa39b39c24p-28},
    {-0x1.196c9cd891b78p-16, -0x1.5529abccc0e44p-15, -0x1.6963c8a394a1dp-15, -0x1.cc60567dcb294p-16, -0x1.ca5083176ccb5p-18, 0x1.f3b8d52d65c4ep-18, 0x1.974c0368b2667p-17, 0x1.5a316520d72b8p-17, 0x1.afe553fa2b882p-18, 0x1.ae59615f47668p-19, 0x1.62d4c6d46e3dcp-20, 0x1.ed4ac7db21646p-22, 0x1.24544f0368669p-23, 0x1.298f8d46e1dddp-25, 0x1.05760ad2038c4p-27, 0x1.8e1fc4118bb47p-30},
    {-0x1.aaba623dca5ddp-19, -0x1.7488b8a8235e5p-20, 0x1.c1242dfed5572p-21, 0x1.1350f4b20d0a3p-19, 0x1.f65d15f218b55p-20, 0x1.f572c4c943c04p-21, 0x1.17d430bcf561ap-24, -0x1.779b1e577f980p-22, -0x1.9973b48a2cbffp-22, -0x1.11dae4733e66cp-22, -0x1.146c4b3df759cp-23, -0x1.c11f270623a85p-25, -0x1.2e7e763d5a5b6p-26, -0x1.577577890f1cap-28, -0x1.4c1fe48b4a95fp-30, -0x1.137172181bf13p-32},
    {0x1.734ea54ebec16p-24, 0x1.9a7944be70c9bp-23, 0x1.52b2666913cb1p-23, 0x1.53bb4d1a6c405p-25, -0x1.fd1c6a0c27660p-25, -0x1.6b16f560014cbp-24, -0x1.d857f405dc9a8p-25, -0x1.0d099d843581bp-26, 0x1.dd78efc780ea7p-28, 0x1.982b287bc3c54p-27, 0x1.267f3c2688b98p-27, 0x1.2add1cac95d66p-28, 0x1.da496d13d01b0p-30, 0x1.330aaa7ca19c8p-31, 0x1.4b981fe86f059p-33, 0x1.2eb292a79e417p-35},
    {0x1.89258d8209c8bp-27, 0x1.65c10cd81e057p-29, -0x1.c7cd9a22cad6fp-28, -0x1.30ac214952cb7p-27, -0x1.3acc793d00527p-28, 0x1.73ffa31290724p-31, 0x1.954ab11fc7042p-29, 0x1.42fcbb7be9ebfp-29, 0x1.ea03bc7fa1a78p-31, -0x1.0283e4ae01d57p-34, -0x1.64f89303b6c8ap-32, -0x1.151f78b64a902p-32, -0x1.176cf6215800bp-33, -0x1.ac9996aff695ep-35, -0x1.085c0eb4877ebp-36, -0x1.0d8c35b4442c0p-38},
    {-0x1.6f65983a0bc6cp-32, -0x1.7098aaf2cca22p-31, -0x1.b62eba140d531p-32, 0x1.e3ea3616bb696p-34, 0x1.8b41d0c6e5fd2p-32, 0x1.1740ab1cd94d2p-32, 0x1.2e4d9dad01d47p-35, -0x1.76fd58c09ea20p-34, -0x1.6aa39268f1d90p-34, -0x1.377e9033a8133p-35, -0x1.22aad23747170p-39, 0x1.1c64e2bd75856p-37, 0x1.d2aed4f55649cp-38, 0x1.cc175cffa63e7p-39, 0x1.510a841ae6eb9p-40, 0x1.888385add6975p-42},
    {-0x1.279199fb960a7p-35, -0x1.043476c831ca5p-40, 0x1.dc37fb5a7e134p-36, 0x1.aae136d34e947p-36, 0x1.79bd61be12feap-39, -0x1.9da10f381ad43p-37, -0x1.71cdbf161c796p-37, -0x1.7bdffc8a79888p-39, 0x1.2fd8ed77c7981p-39, 0x1.61ed443561a58p-39, 0x1.4008f09c68a86p-40, 0x1.0ec9cccb22485p-43, -0x1.aaff7b0e645eap-43, -0x1.64c726a01f8e9p-43, -0x1.5166ab2260340p-44, -0x1.d25c6b6b0ad19p-46},
    {0x1.2095fb3e0d0b2p-40, 0x1.0584f254b5b2cp-39, 0x1.8014194ccd2b3p-41, -0x1.d22baacd9bdedp-41, -0x1.2c962802dcf4cp-40, -0x1.54b3df8da2d68p-42, 0x1.70f6793613a9bp-42, 0x1.9755e93d0f9c7p-42, 0x1.02ee7150e8b23p-43, -0x1.c2bf407ae341cp-45, -0x1.34e038e1e2915p-44, -0x1.18df3e959109dp-45, -0x1.0c84050dd8f75p-48, 0x1.3193e7089ac22p-48, 0x1.f29b208cc976ep-49, 0x1.bd6adc344b937p-50},
    {0x1.73246e74641b8p-44, -0x1.e24e0a08274e1p-47, -0x1.60d5a833fe660p-44, -0x1.977461c19c564p-45, 0x1.6ddc5c5a68104p-46, 0x1.615af8a733f0ep-45, 0x1.07fb3090a48c5p-46, -0x1.30d4a50fff531p-47, -0x1.8c0920809c26cp-47, -0x1.0a7af2c6ef9dcp-48, 0x1.536c90b8f8c2bp-50, 0x1.eef97f2e9a85fp-50, 0x1.ac94c7e2e598ep-51, 0x1.6c20335a75aa6p-54, -0x1.ac2c98616ff6fp-54, -0x1.3fe422f02f5dbp-54},
};

VT __m512d verfc4(__m512d a)
{
    __m512d kf = _mm512_min_pd(_mm512_roundscale_pd(_mm512_mul_pd(a, _mm512_set1_pd(4.0)),
                                                    _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC),
                               _mm512_set1_pd(15.0));
    __m512i k = _mm512_cvtpd_epi64(kf);
    __m512d s = _mm512_mul_pd(_mm512_sub_pd(a, _mm512_fmadd_pd(kf, _mm512_set1_pd(0.25), _mm512_set1_pd(0.125))),
                              _mm512_set1_pd(8.0));
#define PIECE(j) _mm512_permutex2var_pd(_mm512_loadu_pd(ERFC_PIECES[j]), k, _mm512_loadu_pd(ERFC_PIECES[j] + 8))
    /* even and odd coefficients in two chains of s^2 (half the latency of one chain), joined by one fma */
    __m512d s2 = _mm512_mul_pd(s, s), pe = PIECE(10), po = PIECE(11);
    for (int j = 8; j >= 0; j -= 2) {
        pe = _mm512_fmadd_pd(pe, s2, PIECE(j));
        po = _mm512_fmadd_pd(po, s2, PIECE(j + 1));
    }
#undef PIECE
    return _mm512_fmadd_pd(po, s, pe);
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
    __m512d r = _mm512_mul_pd(_mm512_sub_pd(one, t), vrecip(_mm512_add_pd(one, t)));
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
    case TERN_ACT_SIGMOID: y = vrecip(_mm512_add_pd(one, e)); break;
    default: y = _mm512_mul_pd(x, vrecip(_mm512_add_pd(one, e))); break; /* SiLU, GELU-tanh: x / (1 + e) */
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

#if HAVE_X86
/* A 16 x 16 transpose of r in registers: r[c] becomes column c (lane q: row q's element c). */
__attribute__((target("avx512f"), always_inline)) static inline void transpose16(__m512 r[16])
{
    __m512 t[16];
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int b = 0; b < 16; b += 4) {
        __m512d a0 = _mm512_castps_pd(t[b]), a1 = _mm512_castps_pd(t[b + 1]), a2 = _mm512_castps_pd(t[b + 2]),
                a3 = _mm512_castps_pd(t[b + 3]);
        r[b] = _mm512_castpd_ps(_mm512_unpacklo_pd(a0, a2));
        r[b + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a0, a2));
        r[b + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(a1, a3));
        r[b + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(a1, a3));
    }
    for (int b = 0; b < 16; b += 8)
        for (int i = 0; i < 4; i++) {
            t[b + i] = _mm512_shuffle_f32x4(r[b + i], r[b + 4 + i], 0x88);
            t[b + 4 + i] = _mm512_shuffle_f32x4(r[b + i], r[b + 4 + i], 0xdd);
        }
    for (int i = 0; i < 8; i++) {
        r[i] = _mm512_shuffle_f32x4(t[i], t[8 + i], 0x88);
        r[8 + i] = _mm512_shuffle_f32x4(t[i], t[8 + i], 0xdd);
    }
}
#endif

#if HAVE_X86
/* Sixteen rows' sums, each the fp32 chain from +0 in element order (lane q: ((0 + x0) + x1) + ...): sixteen columns
 * at a time are transposed so that one vector add advances all sixteen chains by one element. 0 when a row holds a
 * NaN (the caller's scalar chains then run). */
__attribute__((target("avx512f"))) static int act_sums16_avx512(const float *const rows[16], size_t n, float *sums)
{
    __m512 acc = _mm512_setzero_ps();
    __mmask16 nan = 0;
    for (size_t i = 0; i < n; i += 16) {
        size_t m = n - i < 16 ? n - i : 16;
        __mmask16 mk = (__mmask16)(m == 16 ? 0xFFFFu : (1u << m) - 1u);
        __m512 r[16];
        for (int q = 0; q < 16; q++) {
            r[q] = _mm512_maskz_loadu_ps(mk, rows[q] + i);
            nan |= _mm512_cmp_ps_mask(r[q], r[q], _CMP_UNORD_Q);
        }
        transpose16(r);
        for (size_t c = 0; c < m; c++)
            acc = _mm512_add_ps(acc, r[c]);
    }
    if (nan) /* which NaN's payload an add keeps depends on operand order, which vector code does not fix */
        return 0;
    _mm512_storeu_ps(sums, acc);
    return 1;
}
#endif

int act_row_sums16(const float *const rows[16], size_t n, float *sums)
{
#if HAVE_X86
    return act_sums16_avx512(rows, n, sums);
#else
    (void)rows, (void)n, (void)sums;
    TERN_ASSERT(0);
    return 0;
#endif
}

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
