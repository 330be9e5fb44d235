/* tern base layer: the status codes and error record every layer returns, the invariant-assert macro, and the
 * version string. Runtime failures return a tern_status and fill a tern_error whose message names the object,
 * the rule and the value ("machine trn1.json: field core.sbuf.partitions: expected an integer in [1, 1024], got
 * \"x\""); broken invariants abort through TERN_ASSERT with file and line. Nothing here holds global state. */
#ifndef TERN_BASE_H
#define TERN_BASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    TERN_OK = 0,
    TERN_ERR_INVALID,     /* a value breaks a documented rule */
    TERN_ERR_IO,          /* a file could not be opened, read or written */
    TERN_ERR_PARSE,       /* a file is malformed */
    TERN_ERR_RANGE,       /* a value is outside its allowed range or a capacity overflows */
    TERN_ERR_NOT_FOUND,   /* a named thing (machine, field, tensor) does not exist */
    TERN_ERR_NOMEM,       /* an allocation failed */
    TERN_ERR_UNSUPPORTED  /* valid, but not implemented for this target or generation */
} tern_status;

#define TERN_ERROR_MSG_MAX 1024

typedef struct tern_error {
    tern_status code;
    char msg[TERN_ERROR_MSG_MAX];
} tern_error;

/* Fill err (which may be NULL) with code and a printf-style message; returns code so callers can
 * `return tern_error_set(err, TERN_ERR_RANGE, "...", ...);`. */
tern_status tern_error_set(tern_error *err, tern_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Prefix an existing message with context ("loading trn1.json: " + old message). */
tern_status tern_error_prefix(tern_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

void tern_error_clear(tern_error *err);

/* Short stable name of a status code ("invalid", "io", ...). */
const char *tern_status_name(tern_status code);

const char *tern_version(void);

/* CRC-32 (IEEE 802.3, as zlib's crc32()) of n bytes: the checksum of tern's binary files. */
uint32_t tern_crc32(const void *data, size_t n);

/* Checked size arithmetic: every size computed from an untrusted shape (executables, programs, ONNX, .npy,
 * machine files) goes through these, so a product that does not fit in 64 bits is an error, never a wrap.
 * tern_mul_u64 and tern_add_u64 store a*b (a+b) in *out and return true, or store UINT64_MAX and return false
 * when the exact result does not fit in 64 bits. */
bool tern_mul_u64(uint64_t a, uint64_t b, uint64_t *out);
bool tern_add_u64(uint64_t a, uint64_t b, uint64_t *out);

/* The product dims[0] * ... * dims[rank-1] * elem_bytes (elem_bytes 1 counts elements), checked. A negative
 * dimension, a product that overflows 64 bits, or (limit != 0) one above limit fails with TERN_ERR_RANGE and a
 * message "<what>: dimension product 2048*9*...*43691 overflows 64 bits" (or "... is N bytes, above the limit
 * of L"); *out is then UINT64_MAX. rank 0 gives elem_bytes (a scalar). what names the object (may be ""). */
tern_status tern_dims_product(const int64_t *dims, int rank, uint64_t elem_bytes, uint64_t limit, uint64_t *out,
                              const char *what, tern_error *err);

/* Invariants: a failure here is a bug in tern, never a user error. */
void tern_assert_fail(const char *expr, const char *file, int line) __attribute__((noreturn));
#define TERN_ASSERT(expr) ((expr) ? (void)0 : tern_assert_fail(#expr, __FILE__, __LINE__))

#define TERN_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

#ifdef __cplusplus
}
#endif
#endif
