/* Bulk conversions: argument checks, run-time SIMD dispatch (AVX-512 BF16 / AVX2+F16C / portable, lowered by
 * TERN_SIMD), and the portable kernels, which are the shared scalar core of num_internal.h specialised per format.
 * The SIMD kernels must match these bit for bit, for RNE and for stochastic rounding alike: the SR draw of element
 * i is a function of (seed, offset + i) only. */
#include "num/num_internal.h"

#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

/* ---- dispatch ---- */

/* F16C from CPUID leaf 1 (ECX bit 29): gcc's __builtin_cpu_supports knows "f16c" but clang 14's does not, and
 * <cpuid.h> works in both. The AVX2 check before it already confirms the OS saves the YMM state F16C uses. */
static int cpu_has_f16c(void)
{
#if defined(__x86_64__) || defined(__i386__)
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29)) != 0;
#else
    return 0;
#endif
}

int tern_num_simd_supported(tern_simd s)
{
    switch (s) {
    case TERN_SIMD_AUTO:
    case TERN_SIMD_PORTABLE: return 1;
    case TERN_SIMD_AVX2:
        return __builtin_cpu_supports("avx2") && cpu_has_f16c();
    case TERN_SIMD_AVX512:
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bf16");
    }
    return 0;
}

const char *tern_simd_name(tern_simd s)
{
    switch (s) {
    case TERN_SIMD_AUTO: return "auto";
    case TERN_SIMD_PORTABLE: return "portable";
    case TERN_SIMD_AVX2: return "avx2";
    case TERN_SIMD_AVX512: return "avx512bf16";
    }
    return "?";
}

/* AUTO -> the best supported level, capped by TERN_SIMD; an explicit level is returned as is. The answer
 * depends only on the CPU and the process environment, so it is worked out once (conversions sit on the
 * simulator's hot path); concurrent first calls compute the same value. */
static tern_simd resolve_uncached(void);
static _Atomic int cached = -1;

void tern_num_simd_refresh(void) { cached = -1; }

static tern_simd resolve(tern_simd s)
{
    if (s != TERN_SIMD_AUTO)
        return s;
    int c = cached;
    if (c < 0) {
        c = (int)resolve_uncached();
        cached = c;
    }
    return (tern_simd)c;
}

static tern_simd resolve_uncached(void)
{
    tern_simd cap = TERN_SIMD_AVX512;
    const char *env = getenv("TERN_SIMD");
    if (env) {
        if (!strcmp(env, "portable"))
            cap = TERN_SIMD_PORTABLE;
        else if (!strcmp(env, "avx2"))
            cap = TERN_SIMD_AVX2; /* "avx512", "avx512bf16" and anything else keep the default cap */
    }
    for (tern_simd l = cap; l > TERN_SIMD_PORTABLE; l--)
        if (tern_num_simd_supported(l))
            return l;
    return TERN_SIMD_PORTABLE;
}

const char *tern_num_simd_level(void) { return tern_simd_name(resolve(TERN_SIMD_AUTO)); }

/* ---- portable kernels ---- */

/* width: bytes per code (1, 2, 4); shift: left shift of the stored code (13 for tf32). Always inlined with
 * constant arguments so each format gets its own loop. */
NUM_INLINE void enc_loop(num_fmt f, int width, int shift, void *dst, const float *src, size_t n,
                         const tern_convert_opts *o)
{
    int sr = o->round == TERN_ROUND_STOCHASTIC, sat = o->overflow == TERN_OVERFLOW_SATURATE;
    num_key key = num_key_of(o->seed);
    uint8_t *d8 = dst;
    uint16_t *d16 = dst;
    uint32_t *d32 = dst;
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, src + i, 4);
        uint32_t r = sr ? num_draw(key, o->offset + i) : 0;
        uint32_t c = num_encode_fmt(f, u, sr, sat, r) << shift;
        if (width == 1)
            d8[i] = (uint8_t)c;
        else if (width == 2)
            memcpy(d16 + i, &(uint16_t){(uint16_t)c}, 2);
        else
            memcpy(d32 + i, &c, 4);
    }
}

static void int_loop(tern_dtype t, void *dst, const float *src, size_t n, const tern_convert_opts *o)
{
    int sr = o->round == TERN_ROUND_STOCHASTIC;
    num_key key = num_key_of(o->seed);
    unsigned char *d = dst;
    size_t w = tern_dtype_size(t);
    for (size_t i = 0; i < n; i++) {
        /* One code path for the scalar and bulk forms keeps them identical by construction. */
        uint32_t r = sr ? num_draw(key, o->offset + i) : 0;
        uint32_t u;
        memcpy(&u, src + i, 4);
        int64_t lo, hi;
        switch (t) {
        case TERN_DTYPE_INT8: lo = INT8_MIN; hi = INT8_MAX; break;
        case TERN_DTYPE_UINT8: lo = 0; hi = UINT8_MAX; break;
        case TERN_DTYPE_INT16: lo = INT16_MIN; hi = INT16_MAX; break;
        case TERN_DTYPE_UINT16: lo = 0; hi = UINT16_MAX; break;
        case TERN_DTYPE_INT32: lo = INT32_MIN; hi = INT32_MAX; break;
        default: lo = 0; hi = UINT32_MAX; break;
        }
        uint32_t bits = (uint32_t)(uint64_t)num_f32_to_int(u, lo, hi, sr, r);
        if (w == 1)
            d[i] = (unsigned char)bits;
        else if (w == 2)
            memcpy(d + 2 * i, &(uint16_t){(uint16_t)bits}, 2);
        else
            memcpy(d + 4 * i, &bits, 4);
    }
}

void num_portable_from_f32(tern_dtype t, void *dst, const float *src, size_t n, const tern_convert_opts *o)
{
    switch (t) {
    case TERN_DTYPE_FP32: memcpy(dst, src, n * 4); break;
    case TERN_DTYPE_TF32: enc_loop(NUM_FMT_TF32, 4, 13, dst, src, n, o); break;
    case TERN_DTYPE_BF16: enc_loop(NUM_FMT_BF16, 2, 0, dst, src, n, o); break;
    case TERN_DTYPE_FP16: enc_loop(NUM_FMT_FP16, 2, 0, dst, src, n, o); break;
    case TERN_DTYPE_FP8_E4M3: enc_loop(NUM_FMT_E4M3, 1, 0, dst, src, n, o); break;
    case TERN_DTYPE_FP8_E5M2: enc_loop(NUM_FMT_E5M2, 1, 0, dst, src, n, o); break;
    case TERN_DTYPE_FP8_E4M3_NEURON: enc_loop(NUM_FMT_E4M3N, 1, 0, dst, src, n, o); break;
    default: int_loop(t, dst, src, n, o); break;
    }
}

NUM_INLINE void dec_loop16(num_fmt f, float *dst, const void *src, size_t n)
{
    const unsigned char *s = src;
    for (size_t i = 0; i < n; i++) {
        uint16_t c;
        memcpy(&c, s + 2 * i, 2);
        uint32_t u = num_decode_fmt(f, c);
        memcpy(dst + i, &u, 4);
    }
}

/* 8-bit formats: a 256-entry table on the stack once the run is long enough to pay for it. */
static void dec_loop8(num_fmt f, float *dst, const void *src, size_t n)
{
    const uint8_t *s = src;
    if (n < 512) {
        for (size_t i = 0; i < n; i++)
            dst[i] = num_u2f(num_decode_fmt(f, s[i]));
        return;
    }
    float lut[256];
    for (uint32_t c = 0; c < 256; c++)
        lut[c] = num_u2f(num_decode_fmt(f, c));
    for (size_t i = 0; i < n; i++)
        dst[i] = lut[s[i]];
}

static void portable_to_f32(float *dst, tern_dtype t, const void *src, size_t n)
{
    const unsigned char *s = src;
    switch (t) {
    case TERN_DTYPE_FP32: memcpy(dst, src, n * 4); break;
    case TERN_DTYPE_TF32:
        for (size_t i = 0; i < n; i++) {
            uint32_t u;
            memcpy(&u, s + 4 * i, 4);
            dst[i] = num_u2f(num_decode_fmt(NUM_FMT_TF32, u >> 13));
        }
        break;
    case TERN_DTYPE_BF16: dec_loop16(NUM_FMT_BF16, dst, src, n); break;
    case TERN_DTYPE_FP16: dec_loop16(NUM_FMT_FP16, dst, src, n); break;
    case TERN_DTYPE_FP8_E4M3: dec_loop8(NUM_FMT_E4M3, dst, src, n); break;
    case TERN_DTYPE_FP8_E5M2: dec_loop8(NUM_FMT_E5M2, dst, src, n); break;
    case TERN_DTYPE_FP8_E4M3_NEURON: dec_loop8(NUM_FMT_E4M3N, dst, src, n); break;
    case TERN_DTYPE_INT8:
        for (size_t i = 0; i < n; i++)
            dst[i] = (float)(int8_t)s[i];
        break;
    case TERN_DTYPE_UINT8:
        for (size_t i = 0; i < n; i++)
            dst[i] = (float)s[i];
        break;
    case TERN_DTYPE_INT16:
    case TERN_DTYPE_UINT16:
        for (size_t i = 0; i < n; i++) {
            uint16_t v;
            memcpy(&v, s + 2 * i, 2);
            dst[i] = t == TERN_DTYPE_INT16 ? (float)(int16_t)v : (float)v;
        }
        break;
    default:
        for (size_t i = 0; i < n; i++) {
            uint32_t v;
            memcpy(&v, s + 4 * i, 4);
            dst[i] = t == TERN_DTYPE_INT32 ? (float)(int32_t)v : (float)v;
        }
        break;
    }
}

/* ---- public entry points ---- */

static tern_status check_args(const char *fn, tern_simd s, tern_dtype t, const void *dst, const void *src, size_t n,
                              const tern_convert_opts *o, tern_error *err)
{
    if ((unsigned)t >= TERN_DTYPE_COUNT)
        return tern_error_set(err, TERN_ERR_RANGE, "%s: dtype %d is not a tern_dtype (0..%d)", fn, (int)t,
                              TERN_DTYPE_COUNT - 1);
    if (n && !dst)
        return tern_error_set(err, TERN_ERR_INVALID, "%s: dst is NULL (n = %zu)", fn, n);
    if (n && !src)
        return tern_error_set(err, TERN_ERR_INVALID, "%s: src is NULL (n = %zu)", fn, n);
    if (o && (unsigned)o->round > TERN_ROUND_STOCHASTIC)
        return tern_error_set(err, TERN_ERR_INVALID, "%s: opts.round = %d is not a tern_round", fn, (int)o->round);
    if (o && (unsigned)o->overflow > TERN_OVERFLOW_INF)
        return tern_error_set(err, TERN_ERR_INVALID, "%s: opts.overflow = %d is not a tern_overflow", fn,
                              (int)o->overflow);
    if ((unsigned)s > TERN_SIMD_AVX512)
        return tern_error_set(err, TERN_ERR_RANGE, "%s: simd level %d is not a tern_simd", fn, (int)s);
    if (!tern_num_simd_supported(s))
        return tern_error_set(err, TERN_ERR_UNSUPPORTED, "%s: simd level %s is not supported by this host", fn,
                              tern_simd_name(s));
    return TERN_OK;
}

tern_status tern_convert_from_f32_simd(tern_simd s, tern_dtype dst_type, void *dst, const float *src, size_t n,
                                       const tern_convert_opts *o, tern_error *err)
{
    tern_status st = check_args("convert_from_f32", s, dst_type, dst, src, n, o, err);
    if (st != TERN_OK || n == 0)
        return st;
    tern_convert_opts op = o ? *o : TERN_CONVERT_OPTS_DEFAULT;
    s = resolve(s);
    if (s == TERN_SIMD_AVX512 && num_avx512_from_f32(dst_type, dst, src, n, &op))
        return TERN_OK;
    if (s >= TERN_SIMD_AVX2 && num_avx2_from_f32(dst_type, dst, src, n, &op))
        return TERN_OK;
    num_portable_from_f32(dst_type, dst, src, n, &op);
    return TERN_OK;
}

tern_status tern_convert_to_f32_simd(tern_simd s, float *dst, tern_dtype src_type, const void *src, size_t n,
                                     tern_error *err)
{
    tern_status st = check_args("convert_to_f32", s, src_type, dst, src, n, NULL, err);
    if (st != TERN_OK || n == 0)
        return st;
    s = resolve(s);
    if (s == TERN_SIMD_AVX512 && num_avx512_to_f32(dst, src_type, src, n))
        return TERN_OK;
    if (s >= TERN_SIMD_AVX2 && num_avx2_to_f32(dst, src_type, src, n))
        return TERN_OK;
    portable_to_f32(dst, src_type, src, n);
    return TERN_OK;
}

tern_status tern_convert_from_f32(tern_dtype dst_type, void *dst, const float *src, size_t n,
                                  const tern_convert_opts *o, tern_error *err)
{
    return tern_convert_from_f32_simd(TERN_SIMD_AUTO, dst_type, dst, src, n, o, err);
}

tern_status tern_convert_to_f32(float *dst, tern_dtype src_type, const void *src, size_t n, tern_error *err)
{
    return tern_convert_to_f32_simd(TERN_SIMD_AUTO, dst, src_type, src, n, err);
}

tern_status tern_convert_round_f32(tern_dtype t, float *dst, const float *src, size_t n, const tern_convert_opts *o,
                                   tern_error *err)
{
    tern_status st = check_args("convert_round_f32", TERN_SIMD_AUTO, t, dst, src, n, o, err);
    if (st != TERN_OK || n == 0)
        return st;
    if (t == TERN_DTYPE_FP32) {
        memmove(dst, src, n * 4);
        return TERN_OK;
    }
    tern_convert_opts op = o ? *o : TERN_CONVERT_OPTS_DEFAULT;
    uint64_t base = op.offset;
    enum { CHUNK = 2048 };
    uint32_t buf[CHUNK];
    for (size_t i = 0; i < n; i += CHUNK) {
        size_t m = n - i < CHUNK ? n - i : CHUNK;
        op.offset = base + i; /* element i keeps counter offset + i across chunks */
        tern_convert_from_f32(t, buf, src + i, m, &op, NULL);
        tern_convert_to_f32(dst + i, t, buf, m, NULL);
    }
    return TERN_OK;
}
