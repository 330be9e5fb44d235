/* Private to the num layer: the per-format constants, the one scalar rounding core every path must agree with, the
 * stochastic-rounding generator, and the entry points of the SIMD kernels. Everything here is static inline so the
 * portable loops specialise per format; the SIMD files re-implement the same arithmetic lane-wise and the tests
 * hold them to bit equality with this file. */
#ifndef TERN_NUM_INTERNAL_H
#define TERN_NUM_INTERNAL_H

#include "tern/num.h"

#include <stdint.h>
#include <string.h>

#define NUM_INLINE static inline __attribute__((always_inline))

/* A float format as the rounding core sees it. Codes are sign | magnitude with the sign at bit `sign_shift`. */
typedef struct {
    int m;           /* mantissa bits */
    int b;           /* exponent bias */
    int has_inf;     /* IEEE-like specials; else e4m3fn style (one NaN per sign, no inf) */
    int sign_shift;  /* exp_bits + m */
    uint32_t maxmag; /* max finite magnitude code */
    uint32_t infmag; /* has_inf: inf code; else the NaN code */
} num_fmt;

#define NUM_FMT_BF16 ((num_fmt){7, 127, 1, 15, 0x7F7Fu, 0x7F80u})
#define NUM_FMT_FP16 ((num_fmt){10, 15, 1, 15, 0x7BFFu, 0x7C00u})
#define NUM_FMT_TF32 ((num_fmt){10, 127, 1, 18, 0x3FBFFu, 0x3FC00u})
#define NUM_FMT_E4M3 ((num_fmt){3, 7, 0, 7, 0x7Eu, 0x7Fu})
#define NUM_FMT_E5M2 ((num_fmt){2, 15, 1, 7, 0x7Bu, 0x7Cu})
#define NUM_FMT_E4M3N ((num_fmt){3, 7, 1, 7, 0x77u, 0x78u})

NUM_INLINE uint32_t num_f2u(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}
NUM_INLINE float num_u2f(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* ---- generator (see tern_num_sr_draw in num.h) ---- */
NUM_INLINE uint64_t num_splitmix64(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}
NUM_INLINE uint32_t num_lowbias32(uint32_t x)
{
    x ^= x >> 16;
    x *= 0x7FEB352Du;
    x ^= x >> 15;
    x *= 0x846CA68Bu;
    x ^= x >> 16;
    return x;
}
typedef struct {
    uint32_t k0, k1;
} num_key;
NUM_INLINE num_key num_key_of(uint64_t seed)
{
    uint64_t k = num_splitmix64(seed);
    return (num_key){(uint32_t)k, (uint32_t)(k >> 32)};
}
NUM_INLINE uint32_t num_draw(num_key k, uint64_t counter)
{
    uint32_t h = num_lowbias32((uint32_t)counter ^ k.k0);
    return num_lowbias32((h ^ (uint32_t)(counter >> 32)) + k.k1);
}

/* ---- the rounding core ----
 * Drop the low k bits of the non-negative integer n (k >= 1). RNE: ties to even. SR: F = the dropped bits as a
 * 32-bit binary fraction (exact for k <= 32, truncated beyond); round up iff F + r >= 2^32. */
NUM_INLINE uint32_t num_shift_round(uint32_t n, uint32_t k, int sr, uint32_t r)
{
    if (sr) {
        uint32_t q = k < 32 ? n >> k : 0;
        uint32_t f;
        if (k < 32)
            f = (n & ((1u << k) - 1u)) << (32 - k);
        else
            f = k - 32 < 32 ? n >> (k - 32) : 0;
        return q + (f + r < f);
    }
    /* Callers pass n < 2^24 whenever k > 31, which rounds to 0 like k = 31. Adding half - 1 plus the kept lsb
     * carries into bit k exactly when rem > half or (rem == half and q odd): branch-free ties-to-even, and no
     * overflow since n <= 0x7F7FFFFF when k <= 23 and n < 2^24 otherwise. */
    uint32_t kk = k < 31 ? k : 31;
    return (n + ((1u << (kk - 1)) - 1u) + ((n >> kk) & 1u)) >> kk;
}

/* Encode fp32 bits u into format f. sat: TERN_OVERFLOW_SATURATE. r: the SR draw (ignored for RNE). */
NUM_INLINE uint32_t num_encode_fmt(num_fmt f, uint32_t u, int sr, int sat, uint32_t r)
{
    uint32_t a = u & 0x7FFFFFFFu, s = (u >> 31) << f.sign_shift;
    if (a >= 0x7F800000u) {
        if (a == 0x7F800000u)
            return s | (sat ? f.maxmag : f.infmag);
        if (!f.has_inf)
            return s | f.infmag;
        return s | f.infmag | ((a >> (23 - f.m)) & ((1u << f.m) - 1u)) | (1u << (f.m - 1));
    }
    uint32_t eff = a >> 23, n, k;
    if (eff >= (uint32_t)(128 - f.b)) {
        n = a - ((uint32_t)(127 - f.b) << 23); /* rebias in place: the carry of rounding walks into the exponent */
        k = (uint32_t)(23 - f.m);
    } else {
        n = (a & 0x7FFFFFu) | (eff ? 0x800000u : 0u);
        k = (uint32_t)(151 - f.b - f.m) - (eff ? eff : 1u); /* align to the format's subnormal ulp */
    }
    uint32_t mag = num_shift_round(n, k, sr, r);
    if (mag > f.maxmag)
        mag = sat ? f.maxmag : f.infmag;
    return s | mag;
}

/* Decode a code of format f to fp32 bits (exact; NaNs come back quiet with sign and payload). */
NUM_INLINE uint32_t num_decode_fmt(num_fmt f, uint32_t c)
{
    uint32_t s = ((c >> f.sign_shift) & 1u) << 31;
    uint32_t mag = c & ((1u << f.sign_shift) - 1u);
    uint32_t e = mag >> f.m, man = mag & ((1u << f.m) - 1u);
    uint32_t emax = (1u << (f.sign_shift - f.m)) - 1u;
    if (!f.has_inf && mag == f.infmag)
        return s | 0x7FC00000u;
    if (f.has_inf && e == emax)
        return s | 0x7F800000u | (man << (23 - f.m)) | (man ? 0x400000u : 0u);
    if (e)
        return s | ((e + (uint32_t)(127 - f.b)) << 23) | (man << (23 - f.m));
    if (f.b == 127 || man == 0)
        return s | (man << (23 - f.m)); /* 8-bit-exponent formats share fp32's subnormal grid */
    /* Normalise: man = 2^p + rest, value = man * 2^(1-b-m). */
    uint32_t p = 31u - (uint32_t)__builtin_clz(man);
    return s | ((p + 1u + (uint32_t)(127 - f.b - f.m)) << 23) | ((man ^ (1u << p)) << (23 - p));
}

/* ---- integers ---- */
NUM_INLINE int64_t num_f32_to_int(uint32_t u, int64_t lo, int64_t hi, int sr, uint32_t r)
{
    uint32_t a = u & 0x7FFFFFFFu;
    if (a > 0x7F800000u)
        return 0;
    int neg = (u >> 31) != 0;
    if (a >= 0x4F800000u) /* |x| >= 2^32 (incl. inf): beyond every integer type */
        return neg ? lo : hi;
    uint32_t eff = a >> 23;
    int64_t mag;
    if (eff >= 150) {
        mag = (int64_t)(((a & 0x7FFFFFu) | 0x800000u)) << (eff - 150);
    } else {
        uint32_t n = (a & 0x7FFFFFu) | (eff ? 0x800000u : 0u);
        mag = num_shift_round(n, 150u - (eff ? eff : 1u), sr, r);
    }
    int64_t v = neg ? -mag : mag;
    return v < lo ? lo : v > hi ? hi : v;
}

/* ---- SIMD entry points (convert_avx2.c, convert_avx512.c). Each handles the float formats it knows and returns
 * 1, or returns 0 and leaves the work to the portable path. ---- */
int num_avx2_from_f32(tern_dtype t, void *dst, const float *src, size_t n, const tern_convert_opts *o);
int num_avx2_to_f32(float *dst, tern_dtype t, const void *src, size_t n);
int num_avx512_from_f32(tern_dtype t, void *dst, const float *src, size_t n, const tern_convert_opts *o);
int num_avx512_to_f32(float *dst, tern_dtype t, const void *src, size_t n);

/* Portable bulk kernels (convert.c), also used by the SIMD files for tails and rare blocks. */
void num_portable_from_f32(tern_dtype t, void *dst, const float *src, size_t n, const tern_convert_opts *o);

#endif
