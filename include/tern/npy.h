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
    TERN_NPY_U8, TERN_NPY_BOOL, TERN_NPY_U32, TERN_NPY_U16, TERN_NPY_U64,
    TERN_NPY_UNICODE, /* '<U<chars>': text, each element `chars` UTF-32LE code units, NUL-padded */
    TERN_NPY_BYTES    /* '|S<chars>': text, each element `chars` bytes, NUL-padded (read only) */
} tern_npy_type;

typedef struct {
    tern_npy_type type;
    int rank;
    int64_t dims[TERN_NPY_MAX_RANK];
    void *data;      /* little-endian, C order */
    unsigned chars;  /* text types: characters per element (1..65536) */
} tern_npy;

tern_status tern_npy_read(const char *path, tern_npy *out, tern_error *err);
tern_status tern_npy_write(const char *path, const tern_npy *a, tern_error *err);
void tern_npy_free(tern_npy *a);
uint64_t tern_npy_count(const tern_npy *a);
size_t tern_npy_type_size(tern_npy_type t);      /* 0 for the text types: see tern_npy_elem_size */
size_t tern_npy_elem_size(const tern_npy *a);     /* bytes per element, text types included */
int tern_npy_is_text(const tern_npy *a);
/* Text arrays <-> tern's fixed text cells (UTF-8, NUL-padded, `cell` bytes per element, see TERN_EXE_TEXT_CELL):
 * an element longer than the cell, an invalid code point or invalid UTF-8 is an error naming the element. */
tern_status tern_npy_text_to_cells(const tern_npy *a, uint8_t *cells, unsigned cell, tern_error *err);
tern_status tern_npy_text_from_cells(tern_npy *out, int rank, const int64_t *dims, const uint8_t *cells,
                                     unsigned cell, tern_error *err); /* a '<U' array as wide as the longest text */
const char *tern_npy_type_descr(tern_npy_type t); /* "<f4", ... */
double tern_npy_get(const tern_npy *a, uint64_t i); /* NaN for the text types */

#ifdef __cplusplus
}
#endif
#endif
