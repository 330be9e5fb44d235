/* The ALU operators shared by VectorE, GpSimdE and ScalarE (tensor_tensor, tensor_scalar, reductions, scans) and
 * by the sequencers' register ALU. Two semantics: fp32 (every arithmetic operator: inputs are already fp32, one
 * fp32 rounding per operator) and int32 (bitvec operators on bit patterns, GpSimd native integer arithmetic,
 * register arithmetic). Choices where the public docs are silent — all documented in docs/isa-semantics.md:
 *  - max/min follow IEEE maxNum/minNum (C fmaxf/fminf): a NaN operand loses to a number; NaN only if both are NaN.
 *    abs_max/abs_min likewise on |a|, |b|.
 *  - comparisons give 1.0/0.0 (a NaN operand compares false, except not_equal, which is true); logical operators
 *    test (x != 0), so NaN counts as true.
 *  - pow/rsqrt are computed in double and rounded once (within 1 ulp of fp32, usually correctly rounded).
 *  - mod is C fmodf (result has the sign of a), exact.
 *  - int32: add/subtract/mult wrap modulo 2^32; divide truncates toward zero; x/0 = 0 and x%0 = 0 (no trap), and
 *    INT32_MIN / -1 wraps to INT32_MIN; shift counts are masked to 0..31; shift_right is logical (NKI: arithmetic
 *    right shift "not supported"); average is floor((a+b)/2) computed without overflow.
 * Facts: trainium-arch.md §4.1, §8 ("ALU operators exposed by NKI"), SDK nki.api.shared.rst (bitvec vs arithmetic). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "sim/core_internal.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

int alu_is_compare(unsigned op) { return op >= TERN_ALU_IS_EQ && op <= TERN_ALU_IS_LE; }

int alu_is_bitwise(tern_alu_op op)
{
    switch (op) {
    case TERN_ALU_BITWISE_AND:
    case TERN_ALU_BITWISE_OR:
    case TERN_ALU_BITWISE_XOR:
    case TERN_ALU_SHIFT_LEFT:
    case TERN_ALU_SHIFT_RIGHT: return 1;
    case TERN_ALU_BYPASS:
    case TERN_ALU_ADD:
    case TERN_ALU_SUBTRACT:
    case TERN_ALU_MULT:
    case TERN_ALU_DIVIDE:
    case TERN_ALU_MAX:
    case TERN_ALU_MIN:
    case TERN_ALU_ABS_MAX:
    case TERN_ALU_ABS_MIN:
    case TERN_ALU_POW:
    case TERN_ALU_IS_EQ:
    case TERN_ALU_NOT_EQ:
    case TERN_ALU_IS_GT:
    case TERN_ALU_IS_GE:
    case TERN_ALU_IS_LT:
    case TERN_ALU_IS_LE:
    case TERN_ALU_LOGICAL_AND:
    case TERN_ALU_LOGICAL_OR:
    case TERN_ALU_LOGICAL_XOR:
    case TERN_ALU_AVERAGE:
    case TERN_ALU_MOD:
    case TERN_ALU_RSQRT:
    case TERN_ALU_ABS:
    case TERN_ALU_COUNT: return 0;
    }
    return 0;
}

/* Saturating, NaN-to-zero fp32 -> int32 (only used when a bitvec operator reaches the fp32 path, which the
 * family rules prevent; kept total so the function is defined everywhere). */
static int32_t f2i_sat(float x)
{
    if (!(x == x))
        return 0;
    if (x >= 2147483647.0f)
        return INT32_MAX;
    if (x <= -2147483648.0f)
        return INT32_MIN;
    return (int32_t)x;
}

/* Never inlined: inlined into an array loop, GCC may swap fminf's or fmaxf's operands (it treats them as
 * commutative), and with two NaN operands that changes which payload comes back. Every caller, in this file or
 * not, runs this one compiled function. */
__attribute__((noinline)) float alu_apply_f32(tern_alu_op op, float a, float b)
{
    switch (op) {
    case TERN_ALU_BYPASS: return a;
    case TERN_ALU_ADD: return a + b;
    case TERN_ALU_SUBTRACT: return a - b;
    case TERN_ALU_MULT: return a * b;
    case TERN_ALU_DIVIDE: return a / b;
    case TERN_ALU_MAX: return fmaxf(a, b);
    case TERN_ALU_MIN: return fminf(a, b);
    case TERN_ALU_ABS_MAX: return fmaxf(fabsf(a), fabsf(b));
    case TERN_ALU_ABS_MIN: return fminf(fabsf(a), fabsf(b));
    case TERN_ALU_POW: return (float)pow((double)a, (double)b);
    case TERN_ALU_IS_EQ: return a == b ? 1.0f : 0.0f;
    case TERN_ALU_NOT_EQ: return a != b ? 1.0f : 0.0f;
    case TERN_ALU_IS_GT: return a > b ? 1.0f : 0.0f;
    case TERN_ALU_IS_GE: return a >= b ? 1.0f : 0.0f;
    case TERN_ALU_IS_LT: return a < b ? 1.0f : 0.0f;
    case TERN_ALU_IS_LE: return a <= b ? 1.0f : 0.0f;
    case TERN_ALU_LOGICAL_AND: return (a != 0.0f && b != 0.0f) ? 1.0f : 0.0f;
    case TERN_ALU_LOGICAL_OR: return (a != 0.0f || b != 0.0f) ? 1.0f : 0.0f;
    case TERN_ALU_LOGICAL_XOR: return ((a != 0.0f) != (b != 0.0f)) ? 1.0f : 0.0f;
    case TERN_ALU_BITWISE_AND:
    case TERN_ALU_BITWISE_OR:
    case TERN_ALU_BITWISE_XOR:
    case TERN_ALU_SHIFT_LEFT:
    case TERN_ALU_SHIFT_RIGHT: return (float)alu_apply_i32(op, f2i_sat(a), f2i_sat(b));
    case TERN_ALU_AVERAGE: return (a + b) * 0.5f;
    case TERN_ALU_MOD: return fmodf(a, b);
    case TERN_ALU_RSQRT: return (float)(1.0 / sqrt((double)a));
    case TERN_ALU_ABS: return fabsf(a);
    case TERN_ALU_COUNT: break;
    }
    return NAN;
}

/* Integer power with wrap-around; negative exponents give the truncated result (0 unless |a| == 1). */
static int32_t ipow(int32_t a, int32_t b)
{
    if (b < 0) {
        if (a == 1)
            return 1;
        if (a == -1)
            return (b & 1) ? -1 : 1;
        return 0;
    }
    uint32_t base = (uint32_t)a, r = 1u, e = (uint32_t)b;
    while (e) {
        if (e & 1u)
            r *= base;
        base *= base;
        e >>= 1;
    }
    return (int32_t)r;
}

static uint32_t uabs32(int32_t a) { return a < 0 ? 0u - (uint32_t)a : (uint32_t)a; }

int32_t alu_apply_i32(tern_alu_op op, int32_t a, int32_t b)
{
    uint32_t ua = (uint32_t)a, ub = (uint32_t)b;
    switch (op) {
    case TERN_ALU_BYPASS: return a;
    case TERN_ALU_ADD: return (int32_t)(ua + ub);
    case TERN_ALU_SUBTRACT: return (int32_t)(ua - ub);
    case TERN_ALU_MULT: return (int32_t)(ua * ub);
    case TERN_ALU_DIVIDE:
        if (b == 0)
            return 0;
        if (a == INT32_MIN && b == -1)
            return INT32_MIN;
        return a / b;
    case TERN_ALU_MAX: return a > b ? a : b;
    case TERN_ALU_MIN: return a < b ? a : b;
    case TERN_ALU_ABS_MAX: {
        uint32_t x = uabs32(a), y = uabs32(b);
        return (int32_t)(x > y ? x : y);
    }
    case TERN_ALU_ABS_MIN: {
        uint32_t x = uabs32(a), y = uabs32(b);
        return (int32_t)(x < y ? x : y);
    }
    case TERN_ALU_POW: return ipow(a, b);
    case TERN_ALU_IS_EQ: return a == b;
    case TERN_ALU_NOT_EQ: return a != b;
    case TERN_ALU_IS_GT: return a > b;
    case TERN_ALU_IS_GE: return a >= b;
    case TERN_ALU_IS_LT: return a < b;
    case TERN_ALU_IS_LE: return a <= b;
    case TERN_ALU_LOGICAL_AND: return a != 0 && b != 0;
    case TERN_ALU_LOGICAL_OR: return a != 0 || b != 0;
    case TERN_ALU_LOGICAL_XOR: return (a != 0) != (b != 0);
    case TERN_ALU_BITWISE_AND: return (int32_t)(ua & ub);
    case TERN_ALU_BITWISE_OR: return (int32_t)(ua | ub);
    case TERN_ALU_BITWISE_XOR: return (int32_t)(ua ^ ub);
    case TERN_ALU_SHIFT_LEFT: return (int32_t)(ua << (ub & 31u));
    case TERN_ALU_SHIFT_RIGHT: return (int32_t)(ua >> (ub & 31u));
    case TERN_ALU_AVERAGE: {
        int64_t s = (int64_t)a + (int64_t)b;
        return (int32_t)(s >= 0 ? s / 2 : -((-s + 1) / 2));
    }
    case TERN_ALU_MOD:
        if (b == 0 || (a == INT32_MIN && b == -1))
            return 0;
        return a % b;
    case TERN_ALU_RSQRT: /* truncation of 1/sqrt(a): 1 for a == 1, else 0 (a <= 0 has no real result: 0) */
        return a == 1 ? 1 : 0;
    case TERN_ALU_ABS: return (int32_t)uabs32(a);
    case TERN_ALU_COUNT: break;
    }
    return 0;
}

/* Array forms for the hot elementwise paths: the common operators as loops the compiler vectorises, the rest
 * element by element through alu_apply_f32. They give alu_apply_f32's bits, NaN payloads included: when both
 * operands of an arithmetic operator are NaN, the x86 scalar instruction alu_apply_f32 compiles to returns its
 * first operand (quieted), but a vectorised loop may have its operands swapped (the compiler treats + and * as
 * commutative), so each fast loop says explicitly that a NaN first operand wins (nan_first). With one NaN
 * operand, or none, the operation itself already gives the one possible result. */
static inline float nan_first(float a, float r)
{
    uint32_t u;
    memcpy(&u, &a, sizeof u);
    u |= 0x00400000u; /* quieted, as the instruction returns a signalling NaN */
    float q;
    memcpy(&q, &u, sizeof q);
    return a != a ? q : r;
}

/* Cloned for the host's vector width (GCC picks the clone at load time): the loops are single IEEE operations and
 * selects, so every clone gives the same bits; the wider ones make nan_first's select one blend per vector. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define ALU_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define ALU_CLONES
#endif

/* Is any of x[0, n) a NaN? */
ALU_CLONES static int any_nan(const float *x, size_t n)
{
    int r = 0;
    for (size_t i = 0; i < n; i++)
        r |= x[i] != x[i];
    return r;
}

/* max and min without NaN operands. alu_apply_f32's fmaxf and fminf (glibc, x86-64) compare with maxss and minss
 * when neither operand is a NaN: the first operand if it is greater (less), else the second, which also makes the
 * second operand the result for two zeros of either sign. `a > b ? a : b` is exactly that, lane by lane (maxps).
 * With a NaN operand fmaxf and fminf follow IEEE maxNum (a quiet NaN loses to a number, a signalling one wins,
 * quieted), so rows holding a NaN take alu_apply_f32 element by element instead; tests/sim/test_vector.c checks
 * both paths against it on adversarial values. */
#define MINMAX_LOOP(A, B)                                                                                          \
    do {                                                                                                           \
        if (op == TERN_ALU_MAX)                                                                                    \
            for (size_t i = 0; i < n; i++) {                                                                       \
                float a = (A), b = (B);                                                                            \
                x[i] = a > b ? a : b;                                                                              \
            }                                                                                                      \
        else                                                                                                       \
            for (size_t i = 0; i < n; i++) {                                                                       \
                float a = (A), b = (B);                                                                            \
                x[i] = a < b ? a : b;                                                                              \
            }                                                                                                      \
    } while (0)

/* The comparisons give 1.0 or 0.0 whatever the operands (a NaN compares unequal and unordered), so no NaN rule: a
 * switch over them, the operands A and B given per element. */
#define CMP_LOOP(A, B, expr)                                                                                       \
    for (size_t i = 0; i < n; i++) {                                                                               \
        float a = (A), b = (B);                                                                                    \
        x[i] = (expr) ? 1.0f : 0.0f;                                                                               \
    }
#define CMP_SWITCH(A, B)                                                                                           \
    do {                                                                                                           \
        switch (op) {                                                                                              \
        case TERN_ALU_IS_EQ: CMP_LOOP(A, B, a == b) break; /* a Clip's or a Max's NaN test is x != x */          \
        case TERN_ALU_NOT_EQ: CMP_LOOP(A, B, a != b) break;                                                        \
        case TERN_ALU_IS_GT: CMP_LOOP(A, B, a > b) break;                                                          \
        case TERN_ALU_IS_GE: CMP_LOOP(A, B, a >= b) break;                                                         \
        case TERN_ALU_IS_LT: CMP_LOOP(A, B, a < b) break;                                                          \
        default: CMP_LOOP(A, B, a <= b) break; /* TERN_ALU_IS_LE */                                                \
        }                                                                                                          \
    } while (0)

/* x[i] = op(x[i], y[i]) (rev 0) or op(y[i], x[i]) (rev 1) for the operators with a fast loop; 0 if none */
ALU_CLONES static int vv_fast(tern_alu_op op, float *x, const float *y, int rev, size_t n)
{
    if (alu_is_compare(op)) {
        if (rev)
            CMP_SWITCH(y[i], x[i]);
        else
            CMP_SWITCH(x[i], y[i]);
        return 1;
    }
    switch (op) {
    case TERN_ALU_MAX:
    case TERN_ALU_MIN:
        if (any_nan(x, n) || any_nan(y, n))
            return 0;
        if (rev)
            MINMAX_LOOP(y[i], x[i]);
        else
            MINMAX_LOOP(x[i], y[i]);
        return 1;
    case TERN_ALU_BYPASS:
        if (rev)
            for (size_t i = 0; i < n; i++)
                x[i] = y[i];
        return 1;
#define VV_LOOP(expr)                                                                                              \
    if (rev)                                                                                                       \
        for (size_t i = 0; i < n; i++) {                                                                           \
            float a = y[i], b = x[i];                                                                              \
            x[i] = nan_first(a, expr);                                                                             \
        }                                                                                                          \
    else                                                                                                           \
        for (size_t i = 0; i < n; i++) {                                                                           \
            float a = x[i], b = y[i];                                                                              \
            x[i] = nan_first(a, expr);                                                                             \
        }                                                                                                          \
    return 1
    case TERN_ALU_ADD: VV_LOOP(a + b);
    case TERN_ALU_SUBTRACT: VV_LOOP(a - b);
    case TERN_ALU_MULT: VV_LOOP(a * b);
    case TERN_ALU_DIVIDE: VV_LOOP(a / b);
#undef VV_LOOP
    default: return 0;
    }
}

void alu_apply_f32_vv(tern_alu_op op, float *x, const float *y, size_t n)
{
    if (!vv_fast(op, x, y, 0, n))
        for (size_t i = 0; i < n; i++)
            x[i] = alu_apply_f32(op, x[i], y[i]);
}

void alu_apply_f32_vvr(tern_alu_op op, float *x, const float *y, int reverse, size_t n)
{
    if (vv_fast(op, x, y, reverse, n))
        return;
    if (reverse)
        for (size_t i = 0; i < n; i++)
            x[i] = alu_apply_f32(op, y[i], x[i]);
    else
        for (size_t i = 0; i < n; i++)
            x[i] = alu_apply_f32(op, x[i], y[i]);
}

/* s = +-2^k, a normal fp32 whose reciprocal is one too (k in [-126, 126]): *r = 1 / s, exactly. */
static int pow2_recip(float s, float *r)
{
    uint32_t u;
    memcpy(&u, &s, sizeof u);
    uint32_t e = (u >> 23) & 0xFFu;
    if ((u & 0x7FFFFFu) != 0 || e < 1u || e > 253u)
        return 0;
    uint32_t v = (u & 0x80000000u) | ((254u - e) << 23);
    memcpy(r, &v, sizeof v);
    return 1;
}

ALU_CLONES void alu_apply_f32_vs(tern_alu_op op, float *x, float s, int reverse, size_t n)
{
    float b0;
    if (alu_is_compare(op)) { /* masks against a threshold */
        if (reverse)
            CMP_SWITCH(s, x[i]);
        else
            CMP_SWITCH(x[i], s);
        return;
    }
    switch (op) {
    case TERN_ALU_BYPASS:
        if (reverse)
            for (size_t i = 0; i < n; i++)
                x[i] = s;
        return;
#define VS_LOOP(expr)                                                                                              \
    if (reverse)                                                                                                   \
        for (size_t i = 0; i < n; i++) {                                                                           \
            float a = s, b = x[i];                                                                                 \
            x[i] = nan_first(a, expr);                                                                             \
        }                                                                                                          \
    else                                                                                                           \
        for (size_t i = 0; i < n; i++) {                                                                           \
            float a = x[i], b = s;                                                                                 \
            x[i] = nan_first(a, expr);                                                                             \
        }                                                                                                          \
    return
    case TERN_ALU_ADD: VS_LOOP(a + b);
    case TERN_ALU_SUBTRACT: VS_LOOP(a - b);
    case TERN_ALU_MULT: VS_LOOP(a * b);
    case TERN_ALU_DIVIDE:
        /* by a normal power of two (attention's 1 / sqrt(64) = 1 / 8): a product by its reciprocal, which is exact,
         * is the same correctly rounded a * 2^-k as the quotient, at a fraction of a division's cost */
        if (!reverse && pow2_recip(s, &b0)) {
            for (size_t i = 0; i < n; i++) {
                float a = x[i];
                x[i] = nan_first(a, a * b0);
            }
            return;
        }
        VS_LOOP(a / b); /* the norms' and AdamW's divisions by a per-partition scalar */
#undef VS_LOOP
    case TERN_ALU_MAX: /* Relu as max(x, 0), Clip and Relu6 as max then min */
    case TERN_ALU_MIN:
        if (s != s || any_nan(x, n))
            break;
        if (reverse)
            MINMAX_LOOP(s, x[i]);
        else
            MINMAX_LOOP(x[i], s);
        return;
    default: break; /* no vector fast path: the scalar definition below */
    }
    if (reverse)
        for (size_t i = 0; i < n; i++)
            x[i] = alu_apply_f32(op, s, x[i]);
    else
        for (size_t i = 0; i < n; i++)
            x[i] = alu_apply_f32(op, x[i], s);
}
#undef MINMAX_LOOP
#undef CMP_SWITCH
#undef CMP_LOOP

/* ---- scalar_tensor_tensor over a window (a depthwise convolution's tap: window * weight + accumulator) ---- */

static inline int stt_simple(tern_alu_op op) { return op == TERN_ALU_ADD || op == TERN_ALU_SUBTRACT || op == TERN_ALU_MULT; }

static inline float stt_op(tern_alu_op op, float a, float b)
{
    return op == TERN_ALU_ADD ? a + b : op == TERN_ALU_SUBTRACT ? a - b : a * b;
}

/* One operator as alu_apply_f32_vs / alu_apply_f32_vvr compute it: the first operand (after the swap) wins when it
 * is a NaN. */
static inline float stt_apply(tern_alu_op op, int rev, float x, float y)
{
    float a = rev ? y : x, b = rev ? x : y;
    return nan_first(a, stt_op(op, a, b));
}

#if defined(__x86_64__) && defined(__GNUC__)
/* One row of the depthwise form with AVX-512, for rows as short as a 7 x 7 map's 7 (too short for the compiler's
 * 16-lane loop, which left them scalar): masked loads of the window (column step 1, or 2 gathered from two loads by
 * a permute), then the same two IEEE operations and NaN rule as the scalar loop, lane by lane. Masked-off lanes
 * are neither read nor written. */
/* Columns [c, c + left) of a window row (column step 1, or 2 gathered from two loads by a permute); lanes past
 * left are zero and nothing past the row is read. */
__attribute__((target("avx512f"), always_inline)) static inline __m512 dw_load512(const float *x, ptrdiff_t sc,
                                                                                 uint32_t c, uint32_t left, __mmask16 m)
{
    if (sc == 1)
        return _mm512_maskz_loadu_ps(m, x + c);
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    uint32_t k = 2 * left - 1; /* elements 2c, 2c + 2, ...: the first 2 * left - 1 floats from x + 2c */
    __mmask16 mlo = (__mmask16)(k >= 16 ? 0xFFFFu : (1u << k) - 1u);
    __mmask16 mhi = (__mmask16)(k > 16 ? (1u << (k - 16)) - 1u : 0u);
    __m512 lo = _mm512_maskz_loadu_ps(mlo, x + 2 * (size_t)c), hi = _mm512_maskz_loadu_ps(mhi, x + 2 * (size_t)c + 16);
    return _mm512_permutex2var_ps(lo, even, hi);
}

/* One tap on 16 lanes: x * v, then + b, each operator's NaN rule as the scalar loop's (the first operand's NaN wins,
 * quieted). */
__attribute__((target("avx512f"), always_inline)) static inline __m512 dw_step512(__m512 xv, __m512 vv, __m512 b)
{
    const __m512i quiet = _mm512_set1_epi32(0x00400000);
    __m512 t = _mm512_mul_ps(xv, vv);
    t = _mm512_mask_mov_ps(t, _mm512_cmp_ps_mask(xv, xv, _CMP_UNORD_Q),
                           _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(xv), quiet)));
    __m512 r = _mm512_add_ps(t, b);
    return _mm512_mask_mov_ps(r, _mm512_cmp_ps_mask(t, t, _CMP_UNORD_Q),
                              _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(t), quiet)));
}

__attribute__((target("avx512f"))) static void stt_dw_row512(const float *x, ptrdiff_t sc, float v, const float *b,
                                                             float *o, uint32_t nc)
{
    const __m512 vv = _mm512_set1_ps(v);
    for (uint32_t c = 0; c < nc; c += 16) {
        uint32_t left = nc - c < 16 ? nc - c : 16;
        __mmask16 m = (__mmask16)(left == 16 ? 0xFFFFu : (1u << left) - 1u);
        __m512 r = dw_step512(dw_load512(x, sc, c, left, m), vv, _mm512_maskz_loadu_ps(m, b + c));
        _mm512_mask_storeu_ps(o + c, m, r);
    }
}

/* A row of the accumulator through n taps in turn, 16 columns at a time held in a register. */
__attribute__((target("avx512f"))) static void stt_dw_chain_row512(const stt_tap *taps, unsigned n, size_t poff,
                                                                   uint32_t r, const float *v, float *o, uint32_t nc)
{
    for (uint32_t c = 0; c < nc; c += 16) {
        uint32_t left = nc - c < 16 ? nc - c : 16;
        __mmask16 m = (__mmask16)(left == 16 ? 0xFFFFu : (1u << left) - 1u);
        __m512 a = _mm512_maskz_loadu_ps(m, o + c);
        for (unsigned t = 0; t < n; t++)
            a = dw_step512(dw_load512(taps[t].src + poff + (ptrdiff_t)r * taps[t].sr, taps[t].sc, c, left, m),
                           _mm512_set1_ps(v[t]), a);
        _mm512_mask_storeu_ps(o + c, m, a);
    }
}
#define HAVE_STT512 1
#else
#define HAVE_STT512 0
#endif

ALU_CLONES int alu_stt_window(tern_alu_op op0, int rev0, tern_alu_op op1, int rev1, const float *s, float imm, uint32_t P,
                              const float *src, size_t ps, uint32_t nr, ptrdiff_t sr, uint32_t nc, ptrdiff_t sc,
                              const float *acc, size_t as, float *dst, size_t ds)
{
    if (!stt_simple(op0) || !stt_simple(op1))
        return 0;
    /* the depthwise form (mult, then add, no swaps) with column step 1 or 2 in AVX-512 rows; anything else one
     * element at a time */
#if HAVE_STT512
    const int wide = op0 == TERN_ALU_MULT && op1 == TERN_ALU_ADD && !rev0 && !rev1 && (sc == 1 || sc == 2) &&
                     __builtin_cpu_supports("avx512f");
#else
    const int wide = 0;
#endif
    for (uint32_t p = 0; p < P; p++) {
        const float *sp = src + p * ps, *ap = acc + p * as;
        float *dp = dst + p * ds;
        const float v = s ? s[p] : imm;
        for (uint32_t r = 0; r < nr; r++) {
            const float *x = sp + (ptrdiff_t)r * sr;
            const float *b = ap + (size_t)r * nc;
            float *o = dp + (size_t)r * nc;
#if HAVE_STT512
            if (wide) {
                stt_dw_row512(x, sc, v, b, o, nc);
                continue;
            }
#endif
            for (uint32_t c = 0; c < nc; c++)
                o[c] = stt_apply(op1, rev1, stt_apply(op0, rev0, x[(ptrdiff_t)c * sc], v), b[c]);
        }
    }
    return 1;
}

ALU_CLONES int alu_stt_window_chain(tern_alu_op op0, int rev0, tern_alu_op op1, int rev1, const stt_tap *taps, unsigned n,
                                    uint32_t P, size_t ps, uint32_t nr, uint32_t nc, float *acc, size_t as)
{
    if (!stt_simple(op0) || !stt_simple(op1) || n == 0 || n > STT_CHAIN_MAX)
        return 0;
#if HAVE_STT512
    int wide = op0 == TERN_ALU_MULT && op1 == TERN_ALU_ADD && !rev0 && !rev1 && __builtin_cpu_supports("avx512f");
    for (unsigned t = 0; t < n; t++)
        wide &= taps[t].sc == 1 || taps[t].sc == 2;
#else
    const int wide = 0;
#endif
    float v[STT_CHAIN_MAX];
    for (uint32_t p = 0; p < P; p++) {
        for (unsigned t = 0; t < n; t++)
            v[t] = taps[t].s ? taps[t].s[p] : taps[t].imm;
        for (uint32_t r = 0; r < nr; r++) {
            float *o = acc + p * as + (size_t)r * nc;
#if HAVE_STT512
            if (wide) {
                stt_dw_chain_row512(taps, n, p * ps, r, v, o, nc);
                continue;
            }
#endif
            for (uint32_t c = 0; c < nc; c++) {
                float a = o[c];
                for (unsigned t = 0; t < n; t++)
                    a = stt_apply(op1, rev1, stt_apply(op0, rev0, taps[t].src[p * ps + (ptrdiff_t)r * taps[t].sr +
                                                                               (ptrdiff_t)c * taps[t].sc],
                                                          v[t]),
                                  a);
                o[c] = a;
            }
        }
    }
    return 1;
}

/* ---- reductions of one row (tensor_reduce) ---- */

/* The chain acc = x[0], then acc = op(acc, x[k]) for k ascending, for max or min over a row with no NaN: its value
 * is the row's maximum (minimum), and since a tie replaces acc (a > b ? a : b, as fmaxf computes for numbers),
 * among the elements equal to it the chain ends on the last one; equal values differ only in a zero's sign. So the
 * value comes from sixteen lane-wise chains (any order gives it) and a zero's sign from the last zero. 0 when the
 * row holds a NaN or op is neither (the caller runs the chain). */
#if defined(__x86_64__)
/* The sixteen lane-wise chains with AVX-512 (the loop below does not vectorise: GCC keeps its lanes scalar), and
 * the NaN test in the same pass: maxps/minps give the first operand if it is greater (less), else the second, the
 * loop's `v > acc ? v : acc`. A tail's missing lanes keep acc. 0 when the row holds a NaN. */
__attribute__((target("avx512f"))) static int minmax_avx512(int mx, const float *x, size_t n, float *out)
{
    __m512 acc = _mm512_loadu_ps(x);
    __mmask16 nan = _mm512_cmp_ps_mask(acc, acc, _CMP_UNORD_Q);
    size_t k = 16;
    for (; k + 16 <= n; k += 16) {
        __m512 v = _mm512_loadu_ps(x + k);
        nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
        acc = mx ? _mm512_max_ps(v, acc) : _mm512_min_ps(v, acc);
    }
    if (k < n) {
        __m512 v = _mm512_mask_loadu_ps(acc, (__mmask16)((1u << (n - k)) - 1u), x + k);
        nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
        acc = mx ? _mm512_max_ps(v, acc) : _mm512_min_ps(v, acc);
    }
    if (nan)
        return 0;
    *out = mx ? _mm512_reduce_max_ps(acc) : _mm512_reduce_min_ps(acc);
    return 1;
}
#endif

ALU_CLONES static int minmax_lanes(tern_alu_op op, const float *x, size_t n, float *out)
{
    if (any_nan(x, n))
        return 0;
    const int mx = op == TERN_ALU_MAX;
    float m = x[0];
    size_t k = 1;
    if (n >= 32) {
        float acc[16];
        for (int l = 0; l < 16; l++)
            acc[l] = x[l];
        for (k = 16; k + 16 <= n; k += 16)
            for (int l = 0; l < 16; l++) {
                float v = x[k + l];
                acc[l] = mx ? (v > acc[l] ? v : acc[l]) : (v < acc[l] ? v : acc[l]);
            }
        m = acc[0];
        for (int l = 1; l < 16; l++)
            m = mx ? (acc[l] > m ? acc[l] : m) : (acc[l] < m ? acc[l] : m);
    }
    for (; k < n; k++)
        m = mx ? (x[k] > m ? x[k] : m) : (x[k] < m ? x[k] : m);
    *out = m;
    return 1;
}

int alu_reduce_minmax(tern_alu_op op, const float *x, size_t n, float *out, int avx512)
{
    if (n == 0 || (op != TERN_ALU_MAX && op != TERN_ALU_MIN))
        return 0;
    float m;
#if defined(__x86_64__)
    if (avx512 && n >= 16) {
        if (!minmax_avx512(op == TERN_ALU_MAX, x, n, &m))
            return 0;
    } else
#endif
        if (!minmax_lanes(op, x, n, &m))
        return 0;
    (void)avx512;
    if (m == 0.0f)
        for (size_t i = n; i-- > 0;)
            if (x[i] == 0.0f) {
                m = x[i];
                break;
            }
    *out = m;
    return 1;
}

/* ---- bn_stats' chains, eight partitions at once ---- */
#if defined(__x86_64__)
/* An 8 x 8 transpose: r[c] becomes column c (lane q: row q's element c). */
__attribute__((target("avx2"), always_inline)) static inline void transpose8(__m256 r[8])
{
    __m256 t[8], u[8];
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int b = 0; b < 8; b += 4) {
        u[b] = _mm256_shuffle_ps(t[b], t[b + 2], 0x44);
        u[b + 1] = _mm256_shuffle_ps(t[b], t[b + 2], 0xEE);
        u[b + 2] = _mm256_shuffle_ps(t[b + 1], t[b + 3], 0x44);
        u[b + 3] = _mm256_shuffle_ps(t[b + 1], t[b + 3], 0xEE);
    }
    for (int i = 0; i < 4; i++) {
        r[i] = _mm256_permute2f128_ps(u[i], u[4 + i], 0x20);
        r[4 + i] = _mm256_permute2f128_ps(u[i], u[4 + i], 0x31);
    }
}

/* Eight columns [i, i + m) of eight rows, transposed: col[c] lane q = rows[q][i + c] (m <= 8; the rest +0). */
__attribute__((target("avx512f,avx512vl,avx2"), always_inline)) static inline void cols8(const float *const rows[8], size_t i,
                                                                               size_t m, __m256 col[8])
{
    __mmask8 mk = (__mmask8)(m >= 8 ? 0xFFu : (1u << m) - 1u);
    for (int q = 0; q < 8; q++)
        col[q] = _mm256_maskz_loadu_ps(mk, rows[q] + i);
    transpose8(col);
}

/* exec_vector.c's bn_stats chains for eight rows of n floats: per row and parity (even, odd element index), the sum
 * of the elements in double in element order from +0, then, with the means u from those sums, the sum of
 * squared deviations acc + (x - u)^2, each operation rounded (this file never contracts to an fma). Lane q of each
 * vector is row q's chain, so every chain sees the scalar loop's operations in its order. 0 (the scalar loop then
 * runs) when a row holds a NaN. */
__attribute__((target("avx512f,avx512vl,avx2"))) int alu_bn_chains8(const float *const rows[8], size_t n, const double cnt[2],
                                                           double sum[2][8], double mean[2][8], double m2[2][8])
{
    __m512d s[2] = {_mm512_setzero_pd(), _mm512_setzero_pd()};
    __m256 col[8];
    __mmask8 nan = 0;
    for (size_t i = 0; i < n; i += 8) {
        size_t m = n - i < 8 ? n - i : 8;
        cols8(rows, i, m, col);
        for (size_t c = 0; c < m; c++) { /* i is even: element i + c has parity c & 1 */
            nan |= _mm256_cmp_ps_mask(col[c], col[c], _CMP_UNORD_Q);
            s[c & 1] = _mm512_add_pd(s[c & 1], _mm512_cvtps_pd(col[c]));
        }
    }
    if (nan) /* a NaN's payload through the adds depends on operand order, which vector code does not fix */
        return 0;
    __m512d u[2];
    for (int par = 0; par < 2; par++) {
        _mm512_storeu_pd(sum[par], s[par]);
        for (int q = 0; q < 8; q++)
            mean[par][q] = cnt[par] > 0 ? sum[par][q] / cnt[par] : 0.0;
        u[par] = _mm512_loadu_pd(mean[par]);
    }
    __m512d a[2] = {_mm512_setzero_pd(), _mm512_setzero_pd()};
    for (size_t i = 0; i < n; i += 8) {
        size_t m = n - i < 8 ? n - i : 8;
        cols8(rows, i, m, col);
        for (size_t c = 0; c < m; c++) {
            __m512d d = _mm512_sub_pd(_mm512_cvtps_pd(col[c]), u[c & 1]);
            a[c & 1] = _mm512_add_pd(a[c & 1], _mm512_mul_pd(d, d));
        }
    }
    _mm512_storeu_pd(m2[0], a[0]);
    _mm512_storeu_pd(m2[1], a[1]);
    return 1;
}
#endif

/* affine_select over one row of 2- or 4-byte elements whose pattern value is base + i * step (modulo 2^32): y[i] =
 * x[i] where lo <= value <= hi (inverted by inv), else fill, bits copied. (uint32)(v - lo) <= (uint32)(hi - lo) is
 * that test for lo <= hi without a branch, and the loop vectorises. y may be x itself. */
#define AFFINE_SELECT_ROW(NAME, T)                                                                                 \
    ALU_CLONES void NAME(T *y, const T *x, size_t n, uint32_t base, uint32_t step, int32_t lo, int32_t hi, int inv,   \
                         T fill)                                                                                   \
    {                                                                                                              \
        const uint32_t span = (uint32_t)hi - (uint32_t)lo, inv1 = inv ? 1u : 0u;                                  \
        for (size_t i = 0; i < n; i++) {                                                                           \
            uint32_t v = base + (uint32_t)i * step;                                                                \
            uint32_t keep = (uint32_t)((v - (uint32_t)lo) <= span) ^ inv1;                                        \
            T xv = x[i];                                                                                           \
            y[i] = keep ? xv : fill;                                                                               \
        }                                                                                                          \
    }
AFFINE_SELECT_ROW(alu_affine_select_row16, uint16_t)
AFFINE_SELECT_ROW(alu_affine_select_row32, uint32_t)
#undef AFFINE_SELECT_ROW

/* select on 4-byte rows: d[i] = (a[i] & mask) ? b[i] : c[i], bits copied. Sixteen at a time through a local
 * block, both sources loaded (so the loop vectorises whatever the rows' aliasing: d may be a, b or c itself). */
ALU_CLONES void alu_select_bits(uint32_t *d, const uint32_t *a, const uint32_t *b, const uint32_t *c, uint32_t mask,
                                size_t n)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        uint32_t t[16];
        for (int l = 0; l < 16; l++) {
            uint32_t bb = b[i + l], cc = c[i + l];
            t[l] = (a[i + l] & mask) ? bb : cc;
        }
        memcpy(d + i, t, sizeof t);
    }
    for (; i < n; i++)
        d[i] = (a[i] & mask) ? b[i] : c[i];
}

