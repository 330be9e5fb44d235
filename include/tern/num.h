/* tern num layer: the number formats of a Trainium-class NeuronCore (fp32, tf32, bf16, fp16, three fp8 flavours,
 * 8/16/32-bit integers), exact scalar encode/decode, rounding (round-to-nearest-even and reproducible stochastic
 * rounding), overflow modes, and vectorised bulk conversions dispatched at run time (AVX-512 BF16, AVX2+F16C,
 * portable C) that are bit-identical on every path. docs/numerics.md is the long form of this header.
 *
 * Conventions shared by every function here:
 *  - Float bit patterns travel in the low bits of uint8_t/uint16_t/uint32_t (tf32: a full fp32 pattern whose low 13
 *    mantissa bits are zero).
 *  - opts == NULL means TERN_CONVERT_OPTS_DEFAULT: round-to-nearest-even and IEEE overflow (to inf where the format
 *    has one, to NaN for fp8_e4m3 (e4m3fn), which has none). That is what NeuronCores do unless the compiler is given
 *    --enable-saturate-infinity, which the Neuron compiler reference describes as "Convert +/- infinity values to
 *    MAX/MIN_FLOAT for certain computations"; tern's TERN_OVERFLOW_SATURATE models that flag.
 *  - Stochastic rounding of element `index` draws 32 random bits from tern_num_sr_draw(seed, offset + index), so the
 *    result depends only on (seed, offset + index, value): never on threads, call order, chunking or SIMD path.
 *  - NaN in, NaN out: encoders keep the sign and the top payload bits and set the quiet bit (fp8_e4m3 has a single
 *    NaN per sign, S.1111.111); decoders return a quiet fp32 NaN with sign and payload shifted into place.
 *  - Subnormals of every format are produced and decoded exactly; nothing is flushed to zero.
 *  - fp32 -> integer: round (RNE or SR) then saturate to the type's range; NaN -> 0.
 *
 * Legacy Neuron fp8 (TERN_DTYPE_FP8_E4M3_NEURON): NKI documents nki.language.float8_e4m3 as
 * `dtype(float8_e4m3)` (awsdocs-neuron.readthedocs-hosted.com, nki/api/generated/nki.language.float8_e4m3.html),
 * i.e. ml_dtypes' float8_e4m3, a type distinct from nki.language.float8_e4m3fn ("no inf, NaN represented by
 * 0bS111'1111", Extended range). ml_dtypes/LLVM f8E4M3 follows IEEE 754 conventions: bias 7, +-inf = S.1111.000,
 * NaN = S.1111.{001..111}, max finite S.1110.111 = 240, min normal 2^-6, min subnormal 2^-9. The two are not
 * interchangeable (transformers-neuronx needs --experimental-unsafe-fp8e4m3fn-as-fp8e4m3 to treat one as the other),
 * so tern implements the IEEE-style format here. */
#ifndef TERN_NUM_H
#define TERN_NUM_H

#include "tern/base.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    TERN_DTYPE_FP32,
    TERN_DTYPE_TF32,            /* 1.8.10, stored as 4 bytes (fp32 pattern, low 13 bits zero) */
    TERN_DTYPE_BF16,            /* 1.8.7, bias 127 */
    TERN_DTYPE_FP16,            /* IEEE binary16: 1.5.10, bias 15, max 65504 */
    TERN_DTYPE_FP8_E4M3,        /* OCP e4m3fn: bias 7, no inf, NaN = S.1111.111, max 448 */
    TERN_DTYPE_FP8_E5M2,        /* OCP e5m2: bias 15, IEEE-like inf/NaN, max 57344 */
    TERN_DTYPE_FP8_E4M3_NEURON, /* legacy Neuron float8_e4m3 = IEEE-style e4m3: bias 7, inf S.1111.000, max 240 */
    TERN_DTYPE_INT8,
    TERN_DTYPE_UINT8,
    TERN_DTYPE_INT16,
    TERN_DTYPE_UINT16,
    TERN_DTYPE_INT32,
    TERN_DTYPE_UINT32,
    TERN_DTYPE_COUNT
} tern_dtype;

/* Canonical short name: "fp32", "tf32", "bf16", "fp16", "fp8_e4m3", "fp8_e5m2", "fp8_e4m3_neuron", "int8", "uint8",
 * "int16", "uint16", "int32", "uint32"; "?" for an out-of-range value. */
const char *tern_dtype_name(tern_dtype t);
/* Canonical names and aliases (case-insensitive): float32/f32, tfloat32, bfloat16, float16/half/f16,
 * float8_e4m3fn/e4m3fn/fp8_e4m3fn, float8_e5m2/e5m2, float8_e4m3/fp8_e4m3_legacy (the legacy Neuron type, NKI's
 * spelling; note that the canonical "fp8_e4m3" is OCP e4m3fn), i8/u8/..., uint8_t. Unknown -> TERN_ERR_NOT_FOUND with a message listing the valid names. */
tern_status tern_dtype_from_name(const char *name, tern_dtype *out, tern_error *err);
size_t tern_dtype_size(tern_dtype t); /* storage bytes; 0 for an out-of-range value */
int tern_dtype_is_float(tern_dtype t);
int tern_dtype_is_signed(tern_dtype t); /* floats and signed integers */

/* The fields of a floating-point format, for docs, tests and the simulator. */
typedef struct {
    int bits;          /* meaningful bits in the code (tf32: 19; stored in 32) */
    int exp_bits, man_bits, bias;
    int has_inf;       /* IEEE-like: the all-ones exponent encodes inf (mantissa 0) and NaN */
    uint32_t max_code; /* positive max finite code */
    uint32_t nan_code; /* the canonical positive quiet NaN code */
    uint32_t inf_code; /* positive inf code; 0 when the format has none */
    double max, min_normal, min_subnormal;
} tern_float_format;

/* Fills *out for a float dtype; TERN_ERR_INVALID naming the dtype for an integer one. */
tern_status tern_dtype_float_format(tern_dtype t, tern_float_format *out, tern_error *err);

typedef enum { TERN_ROUND_RNE, TERN_ROUND_STOCHASTIC } tern_round;
/* SATURATE: finite results beyond the max finite value, and +-inf inputs, become +-max. INF: IEEE behaviour, to
 * +-inf where the format has inf, to NaN for fp8_e4m3 (e4m3fn). NaN stays NaN in both. Integers always saturate. */
typedef enum { TERN_OVERFLOW_SATURATE, TERN_OVERFLOW_INF } tern_overflow;
typedef struct {
    tern_round round;
    tern_overflow overflow;
    uint64_t seed;   /* stochastic rounding: generator key */
    uint64_t offset; /* stochastic rounding: counter of element 0 (element i uses offset + i) */
} tern_convert_opts;

#define TERN_CONVERT_OPTS_DEFAULT ((tern_convert_opts){TERN_ROUND_RNE, TERN_OVERFLOW_INF, 0, 0})

/* The counter-based generator behind stochastic rounding: 32 uniform bits, a pure function of (seed, counter).
 * key = splitmix64(seed); h = lowbias32(lo32(counter) ^ lo32(key)); draw = lowbias32((h ^ hi32(counter)) +
 * hi32(key)). For a fixed seed and high counter word it is a bijection of the low word, so any 2^32 consecutive
 * draws are each value exactly once. A rounding that drops a fraction F (as 32-bit fixed point, exact when at most
 * 32 bits are dropped, truncated beyond) rounds the magnitude up iff F + draw >= 2^32: probability F / 2^32. */
uint32_t tern_num_sr_draw(uint64_t seed, uint64_t counter);

/* Scalar decoders: exact. */
float tern_bf16_to_f32(uint16_t bits);
float tern_fp16_to_f32(uint16_t bits);
float tern_tf32_to_f32(uint32_t bits); /* the low 13 bits of a (non-canonical) tf32 pattern are ignored */
float tern_fp8_to_f32(tern_dtype t, uint8_t bits); /* t: one of the three fp8 types; NaN for any other */

/* Scalar encoders; o may be NULL (defaults); index = element index for the stochastic-rounding draw. */
uint16_t tern_f32_to_bf16(float x, const tern_convert_opts *o, uint64_t index);
uint16_t tern_f32_to_fp16(float x, const tern_convert_opts *o, uint64_t index);
uint32_t tern_f32_to_tf32(float x, const tern_convert_opts *o, uint64_t index);
uint8_t tern_f32_to_fp8(tern_dtype t, float x, const tern_convert_opts *o, uint64_t index); /* t not fp8: 0 */

/* Generic scalar forms over every dtype. encode returns the stored bit pattern zero-extended to 32 bits (integers
 * in two's complement truncated to their width; fp32 unchanged); decode takes the same. */
uint32_t tern_num_encode(tern_dtype t, float x, const tern_convert_opts *o, uint64_t index);
float tern_num_decode(tern_dtype t, uint32_t bits);
/* x rounded to t's value set (with t's overflow and NaN rules), returned as fp32. For int32/uint32 the result is
 * the saturated integer converted back to fp32 (itself rounded when above 2^24). */
float tern_num_round_f32(tern_dtype t, float x, const tern_convert_opts *o, uint64_t index);

/* Bulk conversions over n elements (dst and src must not overlap; any alignment). Element i of a stochastic
 * conversion uses counter o->offset + i. Every dtype is accepted; fp32 <-> fp32 is a bit-exact copy. Errors:
 * TERN_ERR_INVALID for NULL pointers with n > 0, NULL err is allowed; TERN_ERR_RANGE for an unknown dtype. */
tern_status tern_convert_from_f32(tern_dtype dst_type, void *dst, const float *src, size_t n,
                                  const tern_convert_opts *o, tern_error *err);
tern_status tern_convert_to_f32(float *dst, tern_dtype src_type, const void *src, size_t n, tern_error *err);
/* dst[i] = tern_num_round_f32(t, src[i], o, i) in bulk (dst may equal src). */
tern_status tern_convert_round_f32(tern_dtype t, float *dst, const float *src, size_t n, const tern_convert_opts *o,
                                   tern_error *err);

/* SIMD dispatch. AUTO picks the best level the host supports, lowered by the environment variable
 * TERN_SIMD=portable|avx2|avx512 (read on every call; an unknown value is ignored; a level the host lacks falls
 * back to the best one it has). avx512 needs AVX-512 F/BW/VL/BF16; avx2 needs AVX2 and F16C. */
typedef enum { TERN_SIMD_AUTO, TERN_SIMD_PORTABLE, TERN_SIMD_AVX2, TERN_SIMD_AVX512 } tern_simd;
const char *tern_num_simd_level(void); /* the level AUTO resolves to now: "avx512bf16", "avx2" or "portable" */
/* The level is worked out once per process; call this after changing TERN_SIMD to re-read it. */
void tern_num_simd_refresh(void);
const char *tern_simd_name(tern_simd s);
int tern_num_simd_supported(tern_simd s); /* can this host run level s (AUTO and PORTABLE: always 1) */
/* As the bulk functions above, on an explicit level (tests, benchmarks): TERN_ERR_UNSUPPORTED if the host lacks it. */
tern_status tern_convert_from_f32_simd(tern_simd s, tern_dtype dst_type, void *dst, const float *src, size_t n,
                                       const tern_convert_opts *o, tern_error *err);
tern_status tern_convert_to_f32_simd(tern_simd s, float *dst, tern_dtype src_type, const void *src, size_t n,
                                     tern_error *err);

/* ---- float32 <-> text, bit for bit as numpy 1.24 (the reference of ONNX's Cast to and from STRING) ---- */
#define TERN_F32_TEXT_MAX 32 /* bytes enough for any tern_f32_format result including the NUL */
/* numpy's str(np.float32(x)) (what `.astype(np.str_)` writes): the shortest digits that round-trip to x (Dragon4
 * "unique": fewest significant digits; among equally short candidates the one closest to x, a tie to the even
 * digit), positional when x == 0 or 1e-4 <= |x| < 1e16 ("1.0", "100.0", "123456790.0", "0.0001", "-0.0"; always a
 * '.' and at least one digit after it), otherwise scientific with at least two exponent digits ("1e-04", "1e-05",
 * "1.5e+16", "3.4028235e+38"); "inf", "-inf", and "nan" for every NaN of either sign. Writes a NUL-terminated
 * string (at most 19 characters: "-9999999000000000.0") and returns its length. Locale-independent, thread-safe. */
size_t tern_f32_format(float x, char buf[TERN_F32_TEXT_MAX]);
/* numpy's object -> float32 cast of a str: Python's float(text) (correctly rounded to double), then the double
 * rounded to float32 to nearest even (two roundings, as numpy does; not strtof). Grammar of Python's float():
 * optional surrounding whitespace, optional sign, decimal digits with an optional '.' (at least one digit),
 * optional exponent (e/E, optional sign, digits), PEP 515 underscores only between two digits, "inf", "infinity"
 * or "nan" in any case with an optional sign; no hex, no "nan(...)", nothing empty. The `len` bytes at s (need not
 * be NUL-terminated; an embedded NUL is invalid) are UTF-8: as in Python, non-ASCII Unicode whitespace counts as
 * a space and a Unicode decimal digit (Nd) as its ASCII digit. NaN gives 0x7FC00000 with the text's sign; overflow
 * gives +-inf, underflow +-0. Returns 0 and sets *out, or -1 for invalid text (leaving *out untouched).
 * Locale-independent, thread-safe; allocates only for texts over 256 bytes (-1 if that fails). */
int tern_f32_parse(const char *s, size_t len, float *out);

#ifdef __cplusplus
}
#endif
#endif
