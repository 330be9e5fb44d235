/* Element types (ONNX numbering) and host tensors: the data the evaluator computes on, initializers and folded
 * constants. Float types are held as fp32 values already rounded to their type, integer and bool types as int64
 * values wrapped to their width, so every op body is written twice at most (float, int64). */
#include "graph_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *tern_elem_name(tern_elem_type t)
{
    switch (t) {
    case TERN_ELEM_UNDEFINED: return "undefined";
    case TERN_ELEM_FLOAT: return "float";
    case TERN_ELEM_UINT8: return "uint8";
    case TERN_ELEM_INT8: return "int8";
    case TERN_ELEM_UINT16: return "uint16";
    case TERN_ELEM_INT16: return "int16";
    case TERN_ELEM_INT32: return "int32";
    case TERN_ELEM_INT64: return "int64";
    case TERN_ELEM_STRING: return "string";
    case TERN_ELEM_BOOL: return "bool";
    case TERN_ELEM_FLOAT16: return "float16";
    case TERN_ELEM_DOUBLE: return "double";
    case TERN_ELEM_UINT32: return "uint32";
    case TERN_ELEM_UINT64: return "uint64";
    case TERN_ELEM_BFLOAT16: return "bfloat16";
    }
    return "?";
}

int tern_elem_is_valid(int code)
{
    return (code >= 1 && code <= 13 && code != TERN_ELEM_STRING) || code == TERN_ELEM_BFLOAT16;
}

int tern_elem_is_float(tern_elem_type t)
{
    return t == TERN_ELEM_FLOAT || t == TERN_ELEM_FLOAT16 || t == TERN_ELEM_BFLOAT16 || t == TERN_ELEM_DOUBLE;
}

size_t tern_elem_size(tern_elem_type t)
{
    switch (t) {
    case TERN_ELEM_BOOL:
    case TERN_ELEM_UINT8:
    case TERN_ELEM_INT8: return 1;
    case TERN_ELEM_UINT16:
    case TERN_ELEM_INT16:
    case TERN_ELEM_FLOAT16:
    case TERN_ELEM_BFLOAT16: return 2;
    case TERN_ELEM_FLOAT:
    case TERN_ELEM_INT32:
    case TERN_ELEM_UINT32: return 4;
    case TERN_ELEM_INT64:
    case TERN_ELEM_UINT64:
    case TERN_ELEM_DOUBLE: return 8;
    default: return 0;
    }
}

tern_status tern_elem_to_dtype(tern_elem_type t, tern_dtype *out, tern_error *err)
{
    switch (t) {
    case TERN_ELEM_FLOAT: *out = TERN_DTYPE_FP32; return TERN_OK;
    case TERN_ELEM_FLOAT16: *out = TERN_DTYPE_FP16; return TERN_OK;
    case TERN_ELEM_BFLOAT16: *out = TERN_DTYPE_BF16; return TERN_OK;
    case TERN_ELEM_INT8: *out = TERN_DTYPE_INT8; return TERN_OK;
    case TERN_ELEM_UINT8: *out = TERN_DTYPE_UINT8; return TERN_OK;
    case TERN_ELEM_INT16: *out = TERN_DTYPE_INT16; return TERN_OK;
    case TERN_ELEM_UINT16: *out = TERN_DTYPE_UINT16; return TERN_OK;
    case TERN_ELEM_INT32: *out = TERN_DTYPE_INT32; return TERN_OK;
    case TERN_ELEM_UINT32: *out = TERN_DTYPE_UINT32; return TERN_OK;
    default:
        return tern_error_set(err, TERN_ERR_UNSUPPORTED, "element type %s has no device number format",
                              tern_elem_name(t));
    }
}

/* -1 for a negative dimension or a count above GRAPH_MAX_NUMEL (checked: a product that wraps is above it). */
int64_t graph_numel(int rank, const int64_t *dims)
{
    uint64_t n;
    if (tern_dims_product(dims, rank, 1, (uint64_t)GRAPH_MAX_NUMEL, &n, "", NULL))
        return -1;
    return (int64_t)n;
}

tern_status tern_host_tensor_new(tern_elem_type type, int rank, const int64_t *dims, tern_host_tensor **out,
                                 tern_error *err)
{
    *out = NULL;
    if (!tern_elem_is_valid((int)type) && type != TERN_ELEM_STRING)
        return tern_error_set(err, TERN_ERR_INVALID, "tensor: element type %s (%d) cannot be held",
                              tern_elem_name(type), (int)type);
    if (rank < 0 || rank > TERN_GRAPH_MAX_RANK)
        return tern_error_set(err, TERN_ERR_RANGE, "tensor: rank %d outside [0, %d]", rank, TERN_GRAPH_MAX_RANK);
    for (int d = 0; d < rank; d++)
        if (dims[d] < 0)
            return tern_error_set(err, TERN_ERR_RANGE, "tensor: dim %d is negative (%lld)", d, (long long)dims[d]);
    int64_t n = graph_numel(rank, dims);
    if (n < 0)
        return tern_error_set(err, TERN_ERR_RANGE, "tensor: element count overflows the 2^32 limit");
    tern_host_tensor *t = calloc(1, sizeof *t);
    if (!t)
        return tern_error_set(err, TERN_ERR_NOMEM, "tensor: out of memory");
    t->type = type;
    t->rank = rank;
    for (int d = 0; d < rank; d++)
        t->dims[d] = dims[d];
    t->count = (size_t)n;
    size_t alloc = t->count ? t->count : 1;
    if (tern_elem_is_float(type))
        t->f = calloc(alloc, sizeof(float));
    else if (type == TERN_ELEM_STRING) {
        t->s = calloc(alloc, sizeof(char *));
        for (size_t k = 0; t->s && k < t->count; k++)
            if (!(t->s[k] = calloc(1, 1))) {
                t->count = k; /* free what was made */
                tern_host_tensor_free(t);
                return tern_error_set(err, TERN_ERR_NOMEM, "tensor: out of memory for %lld strings", (long long)n);
            }
    } else
        t->i = calloc(alloc, sizeof(int64_t));
    if (!t->f && !t->i && !t->s) {
        free(t);
        return tern_error_set(err, TERN_ERR_NOMEM, "tensor: out of memory for %lld elements", (long long)n);
    }
    *out = t;
    return TERN_OK;
}

tern_status tern_host_tensor_clone(const tern_host_tensor *t, tern_host_tensor **out, tern_error *err)
{
    tern_status st = tern_host_tensor_new(t->type, t->rank, t->dims, out, err);
    if (st)
        return st;
    if (t->f)
        memcpy((*out)->f, t->f, t->count * sizeof(float));
    else if (t->i)
        memcpy((*out)->i, t->i, t->count * sizeof(int64_t));
    else if (t->s)
        for (size_t k = 0; k < t->count; k++)
            if ((st = tern_host_tensor_set_text(*out, k, t->s[k], strlen(t->s[k]), err))) {
                tern_host_tensor_free(*out);
                *out = NULL;
                return st;
            }
    return TERN_OK;
}

tern_status tern_host_tensor_set_text(tern_host_tensor *t, size_t i, const char *text, size_t len, tern_error *err)
{
    if (!t->s || i >= t->count)
        return tern_error_set(err, TERN_ERR_INVALID, "tensor: element %zu is not a string of this tensor", i);
    /* an empty text may come as NULL (protobuf-c's empty bytes): memchr and memcpy must not see that pointer */
    if (len && memchr(text, 0, len))
        return tern_error_set(err, TERN_ERR_INVALID, "tensor: string element %zu holds a NUL byte", i);
    char *c = malloc(len + 1);
    if (!c)
        return tern_error_set(err, TERN_ERR_NOMEM, "tensor: out of memory for a %zu-byte string", len);
    if (len)
        memcpy(c, text, len);
    c[len] = '\0';
    free(t->s[i]);
    t->s[i] = c;
    return TERN_OK;
}

void tern_host_tensor_free(tern_host_tensor *t)
{
    if (!t)
        return;
    free(t->f);
    free(t->i);
    if (t->s)
        for (size_t k = 0; k < t->count; k++)
            free(t->s[k]);
    free(t->s);
    free(t);
}

double tern_host_tensor_get(const tern_host_tensor *t, size_t i)
{
    if (!t || i >= t->count)
        return 0.0;
    return t->f ? (double)t->f[i] : t->i ? (double)t->i[i] : NAN;
}

void graph_tensor_normalize(tern_host_tensor *t)
{
    size_t n = t->count;
    switch (t->type) {
    case TERN_ELEM_FLOAT16:
        for (size_t k = 0; k < n; k++)
            t->f[k] = tern_fp16_to_f32(tern_f32_to_fp16(t->f[k], NULL, 0));
        break;
    case TERN_ELEM_BFLOAT16:
        for (size_t k = 0; k < n; k++)
            t->f[k] = tern_bf16_to_f32(tern_f32_to_bf16(t->f[k], NULL, 0));
        break;
    case TERN_ELEM_BOOL:
        for (size_t k = 0; k < n; k++)
            t->i[k] = t->i[k] != 0;
        break;
    case TERN_ELEM_INT8:
        for (size_t k = 0; k < n; k++)
            t->i[k] = (int8_t)(uint8_t)(uint64_t)t->i[k];
        break;
    case TERN_ELEM_UINT8:
        for (size_t k = 0; k < n; k++)
            t->i[k] = (uint8_t)(uint64_t)t->i[k];
        break;
    case TERN_ELEM_INT16:
        for (size_t k = 0; k < n; k++)
            t->i[k] = (int16_t)(uint16_t)(uint64_t)t->i[k];
        break;
    case TERN_ELEM_UINT16:
        for (size_t k = 0; k < n; k++)
            t->i[k] = (uint16_t)(uint64_t)t->i[k];
        break;
    case TERN_ELEM_INT32:
        for (size_t k = 0; k < n; k++)
            t->i[k] = (int32_t)(uint32_t)(uint64_t)t->i[k];
        break;
    case TERN_ELEM_UINT32:
        for (size_t k = 0; k < n; k++)
            t->i[k] = (uint32_t)(uint64_t)t->i[k];
        break;
    default: break; /* float, double (held as fp32), int64, uint64 (held as int64 bits) */
    }
}

void tern_graph_release_constant(tern_graph *g, int id)
{
    if (!g || id < 0 || id >= g->n_values)
        return;
    tern_host_tensor_free(g->values[id].constant);
    g->values[id].constant = NULL;
}
