/* NumPy .npy arrays for model inputs and outputs (runtime layer). */
#ifndef TERN_NPY_H
#define TERN_NPY_H

#include <stddef.h>
#include <stdint.h>

#include "tern/base.h"
#include "tern/num.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TERN_NPY_MAX_RANK 8

typedef enum {
    TERN_NPY_F32, TERN_NPY_F64, TERN_NPY_F16, TERN_NPY_I64, TERN_NPY_I32, TERN_NPY_I16, TERN_NPY_I8,
    TERN_NPY_U8, TERN_NPY_BOOL, TERN_NPY_U32, TERN_NPY_U16, TERN_NPY_U64
} tern_npy_type;

typedef struct {
    tern_npy_type type;
    int rank;
    int64_t dims[TERN_NPY_MAX_RANK];
    void *data; /* little-endian, C order */
} tern_npy;

tern_status tern_npy_read(const char *path, tern_npy *out, tern_error *err);
tern_status tern_npy_write(const char *path, const tern_npy *a, tern_error *err);
void tern_npy_free(tern_npy *a);
uint64_t tern_npy_count(const tern_npy *a);
size_t tern_npy_type_size(tern_npy_type t);
const char *tern_npy_type_descr(tern_npy_type t); /* "<f4", ... */
double tern_npy_get(const tern_npy *a, uint64_t i);

#ifdef __cplusplus
}
#endif
#endif
