/* Independent references for the num tests: each format described only by its field widths and special-value
 * rules, decoded with the textbook formula in double (sign * 2^(e-bias) * 1.m, subnormals m * 2^(1-bias-M)), and
 * rounded by searching the sorted table of representable values for the nearest one (ties to the even code). It
 * shares no code with src/num, so a mistake there cannot hide here. */
#ifndef TERN_TESTS_NUM_REF_H
#define TERN_TESTS_NUM_REF_H

#include "tern/num.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    tern_dtype t;
    int ebits, mbits, bias;
    int ieee;      /* all-ones exponent = inf (m = 0) / NaN; else only S.1..1.1..1 is NaN (e4m3fn) */
    int code_shift; /* stored code = code << code_shift (tf32: 13) */
} ref_fmt;

static const ref_fmt REF_FMTS[] = {
    {TERN_DTYPE_TF32, 8, 10, 127, 1, 13},   {TERN_DTYPE_BF16, 8, 7, 127, 1, 0},
    {TERN_DTYPE_FP16, 5, 10, 15, 1, 0},     {TERN_DTYPE_FP8_E4M3, 4, 3, 7, 0, 0},
    {TERN_DTYPE_FP8_E5M2, 5, 2, 15, 1, 0},  {TERN_DTYPE_FP8_E4M3_NEURON, 4, 3, 7, 1, 0},
};
#define REF_NFMTS ((int)(sizeof REF_FMTS / sizeof REF_FMTS[0]))

static inline uint32_t ref_sign_bit(const ref_fmt *f) { return 1u << (f->ebits + f->mbits); }
static inline uint32_t ref_emax(const ref_fmt *f) { return (1u << f->ebits) - 1u; }
static inline uint32_t ref_maxcode(const ref_fmt *f)
{
    return f->ieee ? ((ref_emax(f) << f->mbits) - 1u) : ((ref_emax(f) << f->mbits) | ((1u << f->mbits) - 2u));
}
/* 1 = NaN, 2 = inf, 0 = finite (magnitude code) */
static inline int ref_class(const ref_fmt *f, uint32_t mag)
{
    uint32_t e = mag >> f->mbits, m = mag & ((1u << f->mbits) - 1u);
    if (f->ieee && e == ref_emax(f))
        return m ? 1 : 2;
    if (!f->ieee && mag == ((ref_emax(f) << f->mbits) | ((1u << f->mbits) - 1u)))
        return 1;
    return 0;
}
/* The formula value of a magnitude code, ignoring specials (so maxcode + 1 gives the next value of an unbounded
 * exponent range, which is what decides overflow and the tie at the top). */
static inline double ref_value(const ref_fmt *f, uint32_t mag)
{
    int e = (int)(mag >> f->mbits);
    double m = (double)(mag & ((1u << f->mbits) - 1u));
    if (e == 0)
        return ldexp(m, 1 - f->bias - f->mbits);
    return ldexp(1.0 + ldexp(m, -f->mbits), e - f->bias);
}

typedef struct {
    const ref_fmt *f;
    uint32_t n;  /* entries: magnitude codes 0 .. maxcode + 1 */
    double *v;
} ref_table;

static inline ref_table ref_table_make(const ref_fmt *f)
{
    ref_table t = {f, ref_maxcode(f) + 2u, NULL};
    t.v = malloc(sizeof(double) * t.n);
    for (uint32_t c = 0; c < t.n; c++)
        t.v[c] = ref_value(f, c);
    return t;
}
static inline void ref_table_free(ref_table *t) { free(t->v); }

/* Reference RNE encoding of fp32 x (as stored code, sign included); sat: saturate on overflow. */
static inline uint32_t ref_rne(const ref_table *t, float xf, int sat)
{
    const ref_fmt *f = t->f;
    uint32_t sign = signbit(xf) ? ref_sign_bit(f) : 0, maxc = ref_maxcode(f), c;
    uint32_t nanmag = f->ieee ? ((ref_emax(f) << f->mbits) | (1u << (f->mbits - 1))) : (maxc + 1u);
    uint32_t ovf = sat ? maxc : (f->ieee ? (ref_emax(f) << f->mbits) : nanmag);
    double x = fabs((double)xf);
    if (isnan(xf))
        return (sign | nanmag) << f->code_shift; /* payload checked separately */
    if (isinf(xf))
        return (sign | ovf) << f->code_shift;
    /* largest lo with v[lo] <= x */
    uint32_t lo = 0, hi = t->n - 1;
    if (x >= t->v[hi]) {
        c = maxc + 1u;
    } else {
        while (hi - lo > 1) {
            uint32_t mid = lo + (hi - lo) / 2;
            if (t->v[mid] <= x)
                lo = mid;
            else
                hi = mid;
        }
        double mid = (t->v[lo] + t->v[lo + 1]) / 2; /* exact: one bit finer than the grid */
        if (x < mid)
            c = lo;
        else if (x > mid)
            c = lo + 1;
        else
            c = (lo & 1u) ? lo + 1 : lo;
    }
    if (c > maxc)
        c = ovf;
    return (sign | c) << f->code_shift;
}

/* Deterministic test RNG (xorshift64*), separate from the library's generator. */
static inline uint64_t ref_rand64(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1Dull;
}
static inline float ref_u2f(uint32_t u)
{
    float x;
    memcpy(&x, &u, 4);
    return x;
}
static inline uint32_t ref_f2u(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
}

#if defined(__SANITIZE_ADDRESS__)
#define REF_SCALE 5 /* sanitizer builds: a fifth of the random samples */
#else
#define REF_SCALE 1
#endif

#endif
