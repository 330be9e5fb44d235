/* Scalar side of the num layer: dtype names and aliases, storage sizes, the float-format table, and the exact
 * scalar encoders/decoders that every bulk path (portable and SIMD) must match bit for bit. The arithmetic itself
 * is the shared core in num_internal.h; this file maps dtypes onto it and applies the options. */
#include "num/num_internal.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

static const char *const dtype_names[TERN_DTYPE_COUNT] = {
    "fp32", "tf32", "bf16", "fp16", "fp8_e4m3", "fp8_e5m2", "fp8_e4m3_neuron",
    "int8", "uint8", "int16", "uint16", "int32", "uint32",
};
static const size_t dtype_sizes[TERN_DTYPE_COUNT] = {4, 4, 2, 2, 1, 1, 1, 1, 1, 2, 2, 4, 4};

static const struct {
    const char *alias;
    tern_dtype t;
} dtype_aliases[] = {
    {"float32", TERN_DTYPE_FP32},        {"f32", TERN_DTYPE_FP32},
    {"float", TERN_DTYPE_FP32},          {"tfloat32", TERN_DTYPE_TF32},
    {"bfloat16", TERN_DTYPE_BF16},       {"float16", TERN_DTYPE_FP16},
    {"half", TERN_DTYPE_FP16},           {"f16", TERN_DTYPE_FP16},
    {"float8_e4m3fn", TERN_DTYPE_FP8_E4M3}, {"fp8_e4m3fn", TERN_DTYPE_FP8_E4M3},
    {"e4m3fn", TERN_DTYPE_FP8_E4M3},     {"float8_e5m2", TERN_DTYPE_FP8_E5M2},
    {"e5m2", TERN_DTYPE_FP8_E5M2},       {"float8_e4m3", TERN_DTYPE_FP8_E4M3_NEURON},
    {"fp8_e4m3_legacy", TERN_DTYPE_FP8_E4M3_NEURON},
    {"i8", TERN_DTYPE_INT8},             {"u8", TERN_DTYPE_UINT8},
    {"i16", TERN_DTYPE_INT16},           {"u16", TERN_DTYPE_UINT16},
    {"i32", TERN_DTYPE_INT32},           {"u32", TERN_DTYPE_UINT32},
    {"int8_t", TERN_DTYPE_INT8},         {"uint8_t", TERN_DTYPE_UINT8},
    {"int16_t", TERN_DTYPE_INT16},       {"uint16_t", TERN_DTYPE_UINT16},
    {"int32_t", TERN_DTYPE_INT32},       {"uint32_t", TERN_DTYPE_UINT32},
};

const char *tern_dtype_name(tern_dtype t)
{
    return (unsigned)t < TERN_DTYPE_COUNT ? dtype_names[t] : "?";
}

static int name_eq(const char *a, const char *b)
{
    for (; *a && *b; a++, b++)
        if (tolower((unsigned char)*a) != tolower((unsigned char)*b))
            return 0;
    return *a == *b;
}

tern_status tern_dtype_from_name(const char *name, tern_dtype *out, tern_error *err)
{
    if (!name || !out)
        return tern_error_set(err, TERN_ERR_INVALID, "dtype_from_name: %s is NULL", !name ? "name" : "out");
    for (int t = 0; t < TERN_DTYPE_COUNT; t++)
        if (name_eq(name, dtype_names[t])) {
            *out = (tern_dtype)t;
            return TERN_OK;
        }
    for (size_t i = 0; i < TERN_ARRAY_LEN(dtype_aliases); i++)
        if (name_eq(name, dtype_aliases[i].alias)) {
            *out = dtype_aliases[i].t;
            return TERN_OK;
        }
    char list[512];
    size_t len = 0;
    list[0] = '\0';
    for (int t = 0; t < TERN_DTYPE_COUNT && len < sizeof list; t++)
        len += (size_t)snprintf(list + len, sizeof list - len, "%s%s", t ? ", " : "", dtype_names[t]);
    return tern_error_set(err, TERN_ERR_NOT_FOUND, "dtype \"%s\": unknown; valid names: %s (and aliases such as "
                          "float32, bfloat16, float16, float8_e4m3fn, float8_e5m2, float8_e4m3)", name, list);
}

size_t tern_dtype_size(tern_dtype t) { return (unsigned)t < TERN_DTYPE_COUNT ? dtype_sizes[t] : 0; }

int tern_dtype_is_float(tern_dtype t) { return (unsigned)t <= TERN_DTYPE_FP8_E4M3_NEURON; }

int tern_dtype_is_signed(tern_dtype t)
{
    return tern_dtype_is_float(t) || t == TERN_DTYPE_INT8 || t == TERN_DTYPE_INT16 || t == TERN_DTYPE_INT32;
}

/* The rounding-core constants of a float dtype other than fp32; returns 0 for anything else. */
static int fmt_of(tern_dtype t, num_fmt *f)
{
    switch (t) {
    case TERN_DTYPE_TF32: *f = NUM_FMT_TF32; return 1;
    case TERN_DTYPE_BF16: *f = NUM_FMT_BF16; return 1;
    case TERN_DTYPE_FP16: *f = NUM_FMT_FP16; return 1;
    case TERN_DTYPE_FP8_E4M3: *f = NUM_FMT_E4M3; return 1;
    case TERN_DTYPE_FP8_E5M2: *f = NUM_FMT_E5M2; return 1;
    case TERN_DTYPE_FP8_E4M3_NEURON: *f = NUM_FMT_E4M3N; return 1;
    default: return 0;
    }
}

tern_status tern_dtype_float_format(tern_dtype t, tern_float_format *out, tern_error *err)
{
    if (!out)
        return tern_error_set(err, TERN_ERR_INVALID, "dtype_float_format: out is NULL");
    if (!tern_dtype_is_float(t))
        return tern_error_set(err, TERN_ERR_INVALID, "dtype %s (%d): not a floating-point format",
                              tern_dtype_name(t), (int)t);
    tern_float_format r;
    if (t == TERN_DTYPE_FP32) {
        r = (tern_float_format){32, 8, 23, 127, 1, 0x7F7FFFFFu, 0x7FC00000u, 0x7F800000u, 0, 0, 0};
    } else {
        num_fmt f;
        fmt_of(t, &f);
        int eb = f.sign_shift - f.m;
        r.bits = f.sign_shift + 1;
        r.exp_bits = eb;
        r.man_bits = f.m;
        r.bias = f.b;
        r.has_inf = f.has_inf;
        r.max_code = f.maxmag;
        r.inf_code = f.has_inf ? f.infmag : 0;
        r.nan_code = f.has_inf ? (f.infmag | (1u << (f.m - 1))) : f.infmag;
    }
    r.max = (double)tern_num_decode(t, t == TERN_DTYPE_TF32 ? r.max_code << 13 : r.max_code);
    r.min_normal = ldexp(1.0, 1 - r.bias);
    r.min_subnormal = ldexp(1.0, 1 - r.bias - r.man_bits);
    *out = r;
    return TERN_OK;
}

static tern_convert_opts opts_or_default(const tern_convert_opts *o)
{
    return o ? *o : TERN_CONVERT_OPTS_DEFAULT;
}

static uint32_t enc(num_fmt f, float x, const tern_convert_opts *o, uint64_t index)
{
    tern_convert_opts op = opts_or_default(o);
    int sr = op.round == TERN_ROUND_STOCHASTIC;
    uint32_t r = sr ? num_draw(num_key_of(op.seed), op.offset + index) : 0;
    return num_encode_fmt(f, num_f2u(x), sr, op.overflow == TERN_OVERFLOW_SATURATE, r);
}

float tern_bf16_to_f32(uint16_t bits) { return num_u2f(num_decode_fmt(NUM_FMT_BF16, bits)); }
float tern_fp16_to_f32(uint16_t bits) { return num_u2f(num_decode_fmt(NUM_FMT_FP16, bits)); }
float tern_tf32_to_f32(uint32_t bits) { return num_u2f(num_decode_fmt(NUM_FMT_TF32, bits >> 13)); }

float tern_fp8_to_f32(tern_dtype t, uint8_t bits)
{
    num_fmt f;
    if (t < TERN_DTYPE_FP8_E4M3 || t > TERN_DTYPE_FP8_E4M3_NEURON || !fmt_of(t, &f))
        return num_u2f(0x7FC00000u);
    return num_u2f(num_decode_fmt(f, bits));
}

uint16_t tern_f32_to_bf16(float x, const tern_convert_opts *o, uint64_t index)
{
    return (uint16_t)enc(NUM_FMT_BF16, x, o, index);
}
uint16_t tern_f32_to_fp16(float x, const tern_convert_opts *o, uint64_t index)
{
    return (uint16_t)enc(NUM_FMT_FP16, x, o, index);
}
uint32_t tern_f32_to_tf32(float x, const tern_convert_opts *o, uint64_t index)
{
    return enc(NUM_FMT_TF32, x, o, index) << 13;
}
uint8_t tern_f32_to_fp8(tern_dtype t, float x, const tern_convert_opts *o, uint64_t index)
{
    num_fmt f;
    if (t < TERN_DTYPE_FP8_E4M3 || t > TERN_DTYPE_FP8_E4M3_NEURON || !fmt_of(t, &f))
        return 0;
    return (uint8_t)enc(f, x, o, index);
}

static void int_range(tern_dtype t, int64_t *lo, int64_t *hi)
{
    switch (t) {
    case TERN_DTYPE_INT8: *lo = INT8_MIN; *hi = INT8_MAX; break;
    case TERN_DTYPE_UINT8: *lo = 0; *hi = UINT8_MAX; break;
    case TERN_DTYPE_INT16: *lo = INT16_MIN; *hi = INT16_MAX; break;
    case TERN_DTYPE_UINT16: *lo = 0; *hi = UINT16_MAX; break;
    case TERN_DTYPE_INT32: *lo = INT32_MIN; *hi = INT32_MAX; break;
    default: *lo = 0; *hi = UINT32_MAX; break;
    }
}

uint32_t tern_num_encode(tern_dtype t, float x, const tern_convert_opts *o, uint64_t index)
{
    num_fmt f;
    if (t == TERN_DTYPE_FP32)
        return num_f2u(x);
    if (fmt_of(t, &f))
        return t == TERN_DTYPE_TF32 ? enc(f, x, o, index) << 13 : enc(f, x, o, index);
    if ((unsigned)t >= TERN_DTYPE_COUNT)
        return 0;
    tern_convert_opts op = opts_or_default(o);
    int sr = op.round == TERN_ROUND_STOCHASTIC;
    uint32_t r = sr ? num_draw(num_key_of(op.seed), op.offset + index) : 0;
    int64_t lo, hi;
    int_range(t, &lo, &hi);
    int64_t v = num_f32_to_int(num_f2u(x), lo, hi, sr, r);
    uint32_t bits = (uint32_t)(uint64_t)v;
    return tern_dtype_size(t) == 4 ? bits : bits & ((1u << (8 * tern_dtype_size(t))) - 1u);
}

float tern_num_decode(tern_dtype t, uint32_t bits)
{
    num_fmt f;
    switch (t) {
    case TERN_DTYPE_FP32: return num_u2f(bits);
    case TERN_DTYPE_TF32: return tern_tf32_to_f32(bits);
    case TERN_DTYPE_INT8: return (float)(int8_t)(uint8_t)bits;
    case TERN_DTYPE_UINT8: return (float)(uint8_t)bits;
    case TERN_DTYPE_INT16: return (float)(int16_t)(uint16_t)bits;
    case TERN_DTYPE_UINT16: return (float)(uint16_t)bits;
    case TERN_DTYPE_INT32: return (float)(int32_t)bits;
    case TERN_DTYPE_UINT32: return (float)bits;
    default:
        if (fmt_of(t, &f))
            return num_u2f(num_decode_fmt(f, bits & ((2u << f.sign_shift) - 1u)));
        return num_u2f(0x7FC00000u);
    }
}

float tern_num_round_f32(tern_dtype t, float x, const tern_convert_opts *o, uint64_t index)
{
    return tern_num_decode(t, tern_num_encode(t, x, o, index));
}
