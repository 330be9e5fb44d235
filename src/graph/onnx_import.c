/* ONNX import: a ModelProto decoded by protobuf-c (bindings generated at build time from Debian's onnx.proto)
 * becomes a tern_graph. Before protobuf-c sees the bytes, a descriptor-driven walk bounds message nesting (protobuf-c
 * recurses without a limit); afterwards every tensor is checked (dims, overflow, data length against dims), every
 * node input must name a known value, every value has at most one producer and the nodes must form a DAG. */
#include "graph_internal.h"

#include "onnx.pb-c.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_NESTING 48
#define MAX_OPSET 17

/* ---- nesting bound ---- */
static int read_varint(const uint8_t **p, const uint8_t *end, uint64_t *out)
{
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (*p >= end)
            return -1;
        uint8_t b = *(*p)++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *out = v;
            return 0;
        }
    }
    return -1;
}

/* Returns the nesting depth reached, or MAX_NESTING + 1 when exceeded. Malformed wire data stops the walk: the
 * decoder reports it. */
static int nesting(const ProtobufCMessageDescriptor *desc, const uint8_t *p, const uint8_t *end, int depth)
{
    if (depth > MAX_NESTING)
        return depth;
    int deepest = depth;
    while (p < end) {
        uint64_t key, v;
        if (read_varint(&p, end, &key))
            return deepest;
        unsigned wire = (unsigned)(key & 7);
        uint64_t field = key >> 3;
        switch (wire) {
        case 0:
            if (read_varint(&p, end, &v))
                return deepest;
            break;
        case 1:
            if (end - p < 8)
                return deepest;
            p += 8;
            break;
        case 5:
            if (end - p < 4)
                return deepest;
            p += 4;
            break;
        case 2: {
            if (read_varint(&p, end, &v) || v > (uint64_t)(end - p))
                return deepest;
            const ProtobufCFieldDescriptor *fd =
                field <= 0x7fffffff ? protobuf_c_message_descriptor_get_field(desc, (unsigned)field) : NULL;
            if (fd && fd->type == PROTOBUF_C_TYPE_MESSAGE) {
                int d = nesting((const ProtobufCMessageDescriptor *)fd->descriptor, p, p + v, depth + 1);
                if (d > deepest)
                    deepest = d;
                if (deepest > MAX_NESTING)
                    return deepest;
            }
            p += v;
            break;
        }
        default: return deepest; /* groups (3, 4) are not in onnx.proto */
        }
    }
    return deepest;
}

/* ---- tensors ---- */
/* Decodes n little-endian elements of type from b into t, starting at element at: the one conversion for
 * raw_data and for external data read in chunks. */
static void decode_le(tern_elem_type type, const uint8_t *b, size_t n, tern_host_tensor *t, size_t at)
{
    size_t es = tern_elem_size(type);
    for (size_t k = 0; k < n; k++) {
        const uint8_t *e = b + k * es;
        size_t o = at + k;
        switch (type) {
        case TERN_ELEM_FLOAT: {
            float f;
            memcpy(&f, e, 4);
            t->f[o] = f;
            break;
        }
        case TERN_ELEM_DOUBLE: {
            double d;
            memcpy(&d, e, 8);
            t->f[o] = (float)d;
            break;
        }
        case TERN_ELEM_FLOAT16: t->f[o] = tern_fp16_to_f32((uint16_t)(e[0] | e[1] << 8)); break;
        case TERN_ELEM_BFLOAT16: t->f[o] = tern_bf16_to_f32((uint16_t)(e[0] | e[1] << 8)); break;
        case TERN_ELEM_BOOL: t->i[o] = e[0] != 0; break;
        case TERN_ELEM_INT8: t->i[o] = (int8_t)e[0]; break;
        case TERN_ELEM_UINT8: t->i[o] = e[0]; break;
        case TERN_ELEM_INT16: {
            int16_t v;
            memcpy(&v, e, 2);
            t->i[o] = v;
            break;
        }
        case TERN_ELEM_UINT16: {
            uint16_t v;
            memcpy(&v, e, 2);
            t->i[o] = v;
            break;
        }
        case TERN_ELEM_INT32: {
            int32_t v;
            memcpy(&v, e, 4);
            t->i[o] = v;
            break;
        }
        case TERN_ELEM_UINT32: {
            uint32_t v;
            memcpy(&v, e, 4);
            t->i[o] = v;
            break;
        }
        default: { /* int64, uint64 */
            int64_t v;
            memcpy(&v, e, 8);
            t->i[o] = v;
            break;
        }
        }
    }
}

/* A decimal string of external_data (offset, length): digits only, no sign, at most 2^64 - 1. */
static int parse_u64(const char *s, uint64_t *out)
{
    uint64_t v = 0;
    if (!s || !s[0])
        return -1;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9' || !tern_mul_u64(v, 10, &v) || !tern_add_u64(v, (uint64_t)(*p - '0'), &v))
            return -1;
    }
    *out = v;
    return 0;
}

/* pread until done: a regular file may return fewer bytes than asked (signals, > 2 GiB requests). */
static int read_at(int fd, void *dst, uint64_t n, uint64_t off)
{
    uint8_t *p = dst;
    while (n) {
        size_t want = n > ((size_t)1 << 30) ? (size_t)1 << 30 : (size_t)n;
        ssize_t r = pread(fd, p, want, (off_t)off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        p += r, n -= (uint64_t)r, off += (uint64_t)r;
    }
    return 0;
}

/* data_location = EXTERNAL: the bytes live in a file named relative to the model's directory. The file is read
 * straight into the host tensor (fp32 and int64 have the host layout) or through a small chunk converted in place,
 * so the weights are never held twice; nothing is allocated before every bound is checked. */
static tern_status external_tensor(const Onnx__TensorProto *tp, const char *what, const char *name, const char *dir,
                                   tern_elem_type type, size_t n, tern_host_tensor **out, tern_error *err)
{
    const char *loc = NULL, *off_s = NULL, *len_s = NULL;
    for (size_t k = 0; k < tp->n_external_data; k++) {
        const Onnx__StringStringEntryProto *e = tp->external_data[k];
        if (!e->key)
            continue;
        if (!strcmp(e->key, "location"))
            loc = e->value;
        else if (!strcmp(e->key, "offset"))
            off_s = e->value;
        else if (!strcmp(e->key, "length"))
            len_s = e->value;
        /* checksum (optional, SHA-1) and keys of other tools are not needed to read the bytes */
    }
    if (type == TERN_ELEM_STRING)
        return tern_error_set(err, TERN_ERR_PARSE, "%s tensor \"%s\": external data cannot hold a string tensor", what,
                              name);
    if (tp->has_raw_data && tp->raw_data.len)
        return tern_error_set(err, TERN_ERR_PARSE,
                              "%s tensor \"%s\": external data and %zu bytes of raw_data both given", what, name,
                              tp->raw_data.len);
    if (!loc || !loc[0])
        return tern_error_set(err, TERN_ERR_PARSE, "%s tensor \"%s\": external data has no location", what, name);
    if (!dir)
        return tern_error_set(err, TERN_ERR_INVALID,
                              "%s tensor \"%s\": external data \"%s\" needs the model's directory (load the model "
                              "from its file, or give a base directory)", what, name, loc);
    if (loc[0] == '/')
        return tern_error_set(err, TERN_ERR_PARSE,
                              "%s tensor \"%s\": external data location \"%s\" is an absolute path; it must be "
                              "relative to the model's directory", what, name, loc);
    for (const char *p = loc; *p;) { /* each path component; ".." would climb out of the directory */
        const char *q = strchr(p, '/');
        size_t len = q ? (size_t)(q - p) : strlen(p);
        if (len == 2 && p[0] == '.' && p[1] == '.')
            return tern_error_set(err, TERN_ERR_PARSE,
                                  "%s tensor \"%s\": external data location \"%s\" has a '..' component, which "
                                  "leaves the model's directory", what, name, loc);
        p += len + (q != NULL);
    }
    uint64_t off = 0, len = 0;
    if (off_s && parse_u64(off_s, &off))
        return tern_error_set(err, TERN_ERR_PARSE,
                              "%s tensor \"%s\": external data offset \"%s\" is not a decimal integer in [0, 2^64)",
                              what, name, off_s);
    if (len_s && parse_u64(len_s, &len))
        return tern_error_set(err, TERN_ERR_PARSE,
                              "%s tensor \"%s\": external data length \"%s\" is not a decimal integer in [0, 2^64)",
                              what, name, len_s);
    size_t es = tern_elem_size(type);
    uint64_t need;
    if (!tern_mul_u64((uint64_t)n, (uint64_t)es, &need))
        return tern_error_set(err, TERN_ERR_RANGE, "%s tensor \"%s\": %zu x %zu-byte elements overflow 64 bits",
                              what, name, n, es);
    size_t plen = strlen(dir) + 1 + strlen(loc) + 1;
    char *path = malloc(plen);
    if (!path)
        return tern_error_set(err, TERN_ERR_NOMEM, "%s tensor \"%s\": out of memory", what, name);
    snprintf(path, plen, "%s/%s", dir, loc);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    free(path);
    if (fd < 0)
        return tern_error_set(err, TERN_ERR_IO, "%s tensor \"%s\": external data file \"%s\" cannot be opened: %s",
                              what, name, loc, strerror(errno));
    struct stat sb;
    tern_status st = TERN_OK;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode))
        st = tern_error_set(err, TERN_ERR_IO, "%s tensor \"%s\": external data \"%s\" is not a regular file", what,
                            name, loc);
    uint64_t size = st ? 0 : (uint64_t)sb.st_size, end;
    if (!st && off > size)
        st = tern_error_set(err, TERN_ERR_PARSE,
                            "%s tensor \"%s\": external data offset %llu is past the end of \"%s\" (%llu bytes)", what,
                            name, (unsigned long long)off, loc, (unsigned long long)size);
    if (!st && !len_s)
        len = size - off; /* no length: the rest of the file */
    if (!st && (!tern_add_u64(off, len, &end) || end > size))
        st = tern_error_set(err, TERN_ERR_PARSE,
                            "%s tensor \"%s\": external data offset %llu + length %llu overruns \"%s\" (%llu bytes)",
                            what, name, (unsigned long long)off, (unsigned long long)len, loc,
                            (unsigned long long)size);
    if (!st && len != need)
        st = tern_error_set(err, TERN_ERR_PARSE,
                            "%s tensor \"%s\": external data length %llu bytes, dims need %llu (%zu x %zu-byte %s)",
                            what, name, (unsigned long long)len, (unsigned long long)need, n, es,
                            tern_elem_name(type));
    tern_host_tensor *t = NULL;
    if (!st && (st = tern_host_tensor_new(type, (int)tp->n_dims, tp->dims, &t, err)))
        tern_error_prefix(err, "%s tensor \"%s\": ", what, name);
    if (!st && (type == TERN_ELEM_FLOAT || type == TERN_ELEM_INT64 || type == TERN_ELEM_UINT64)) {
        /* the host layout already: the file's bytes go straight into the tensor */
        if (read_at(fd, type == TERN_ELEM_FLOAT ? (void *)t->f : (void *)t->i, need, off))
            st = tern_error_set(err, TERN_ERR_IO, "%s tensor \"%s\": reading %llu bytes of \"%s\" at %llu failed",
                                what, name, (unsigned long long)need, loc, (unsigned long long)off);
    } else if (!st && n) {
        enum { CHUNK = 1 << 20 };
        uint8_t *chunk = malloc(CHUNK);
        if (!chunk)
            st = tern_error_set(err, TERN_ERR_NOMEM, "%s tensor \"%s\": out of memory", what, name);
        size_t per = CHUNK / es;
        for (size_t k = 0; k < n && !st; k += per) {
            size_t m = n - k < per ? n - k : per;
            if (read_at(fd, chunk, (uint64_t)m * es, off + (uint64_t)k * es))
                st = tern_error_set(err, TERN_ERR_IO, "%s tensor \"%s\": reading \"%s\" at %llu failed", what, name,
                                    loc, (unsigned long long)(off + (uint64_t)k * es));
            else
                decode_le(type, chunk, m, t, k);
        }
        free(chunk);
    }
    close(fd);
    if (st) {
        tern_host_tensor_free(t);
        return st;
    }
    graph_tensor_normalize(t);
    *out = t;
    return TERN_OK;
}

static tern_status tensor_from_proto(const Onnx__TensorProto *tp, const char *what, const char *dir,
                                     tern_host_tensor **out, tern_error *err)
{
    *out = NULL;
    const char *name = tp->name && tp->name[0] ? tp->name : "(unnamed)";
    if (!tp->has_data_type || (!tern_elem_is_valid(tp->data_type) && tp->data_type != TERN_ELEM_STRING))
        return tern_error_set(err, TERN_ERR_PARSE, "%s tensor \"%s\": data type %d is not a known tensor type", what,
                              name, (int)tp->data_type);
    if (tp->n_dims > TERN_GRAPH_MAX_RANK)
        return tern_error_set(err, TERN_ERR_UNSUPPORTED, "%s tensor \"%s\": rank %zu above the limit %d", what, name,
                              tp->n_dims, TERN_GRAPH_MAX_RANK);
    for (size_t d = 0; d < tp->n_dims; d++)
        if (tp->dims[d] < 0)
            return tern_error_set(err, TERN_ERR_PARSE, "%s tensor \"%s\": dim %zu is negative (%lld)", what, name, d,
                                  (long long)tp->dims[d]);
    if (graph_numel((int)tp->n_dims, tp->dims) < 0)
        return tern_error_set(err, TERN_ERR_RANGE, "%s tensor \"%s\": element count overflows the 2^32 limit", what,
                              name);
    if (tp->segment)
        return tern_error_set(err, TERN_ERR_UNSUPPORTED, "%s tensor \"%s\": segmented tensors are not supported",
                              what, name);
    tern_elem_type type = (tern_elem_type)tp->data_type;
    size_t n = (size_t)graph_numel((int)tp->n_dims, tp->dims), es = tern_elem_size(type);
    if (tp->has_data_location && tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL)
        return external_tensor(tp, what, name, dir, type, n, out, err);
    if (type == TERN_ELEM_STRING) { /* string_data only: ONNX stores no raw form for strings */
        if ((tp->has_raw_data && tp->raw_data.len) || tp->n_string_data != n)
            return tern_error_set(err, TERN_ERR_PARSE,
                                  "%s tensor \"%s\": string_data holds %zu strings%s, dims need %zu", what, name,
                                  tp->n_string_data, tp->has_raw_data && tp->raw_data.len ? " (and raw_data is set)" : "",
                                  n);
        tern_host_tensor *t;
        tern_status st = tern_host_tensor_new(type, (int)tp->n_dims, tp->dims, &t, err);
        for (size_t k = 0; k < n && !st; k++)
            st = tern_host_tensor_set_text(t, k, (const char *)tp->string_data[k].data, tp->string_data[k].len, err);
        if (st) {
            tern_host_tensor_free(t);
            return tern_error_prefix(err, "%s tensor \"%s\": ", what, name);
        }
        *out = t;
        return TERN_OK;
    }
    int raw = tp->has_raw_data && (tp->raw_data.len || n == 0);
    size_t have;
    const char *field;
    switch (type) {
    case TERN_ELEM_FLOAT: have = tp->n_float_data, field = "float_data"; break;
    case TERN_ELEM_DOUBLE: have = tp->n_double_data, field = "double_data"; break;
    case TERN_ELEM_INT64: have = tp->n_int64_data, field = "int64_data"; break;
    case TERN_ELEM_UINT32:
    case TERN_ELEM_UINT64: have = tp->n_uint64_data, field = "uint64_data"; break;
    default: have = tp->n_int32_data, field = "int32_data"; break;
    }
    /* sizes are checked before anything is allocated: a short model cannot ask for gigabytes */
    if (raw && tp->raw_data.len != n * es)
        return tern_error_set(err, TERN_ERR_PARSE,
                              "%s tensor \"%s\": raw_data holds %zu bytes, dims need %zu (%zu x %zu-byte %s)", what,
                              name, tp->raw_data.len, n * es, n, es, tern_elem_name(type));
    if (!raw && have != n)
        return tern_error_set(err, TERN_ERR_PARSE, "%s tensor \"%s\": %s holds %zu elements, dims need %zu", what,
                              name, field, have, n);
    tern_host_tensor *t;
    tern_status st = tern_host_tensor_new(type, (int)tp->n_dims, tp->dims, &t, err);
    if (st)
        return tern_error_prefix(err, "%s tensor \"%s\": ", what, name);
    if (raw) {
        decode_le(type, tp->raw_data.data, n, t, 0);
        *out = t;
        return TERN_OK;
    }
    for (size_t k = 0; k < n; k++) {
        switch (type) {
        case TERN_ELEM_FLOAT: t->f[k] = tp->float_data[k]; break;
        case TERN_ELEM_DOUBLE: t->f[k] = (float)tp->double_data[k]; break;
        case TERN_ELEM_INT64: t->i[k] = tp->int64_data[k]; break;
        case TERN_ELEM_UINT32:
        case TERN_ELEM_UINT64: t->i[k] = (int64_t)tp->uint64_data[k]; break;
        case TERN_ELEM_FLOAT16: t->f[k] = tern_fp16_to_f32((uint16_t)tp->int32_data[k]); break;
        case TERN_ELEM_BFLOAT16: t->f[k] = tern_bf16_to_f32((uint16_t)tp->int32_data[k]); break;
        default: t->i[k] = tp->int32_data[k]; break;
        }
    }
    graph_tensor_normalize(t);
    *out = t;
    return TERN_OK;
}

/* ---- declared types ---- */
static tern_status apply_type(tern_graph_value *v, const Onnx__TypeProto *tp, const char *what, tern_error *err)
{
    if (!tp)
        return TERN_OK; /* no declared type: inference decides (inputs then fail at set/run time) */
    if (tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type)
        return tern_error_set(err, TERN_ERR_UNSUPPORTED, "%s \"%s\": only tensor types are supported", what,
                              v->name);
    const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
    if (tt->has_elem_type && tt->elem_type != 0) {
        if (!tern_elem_is_valid(tt->elem_type) && tt->elem_type != TERN_ELEM_STRING)
            return tern_error_set(err, TERN_ERR_UNSUPPORTED, "%s \"%s\": element type %d (%s) is not supported", what,
                                  v->name, (int)tt->elem_type, tern_elem_name((tern_elem_type)tt->elem_type));
        v->type = (tern_elem_type)tt->elem_type;
    }
    if (!tt->shape)
        return TERN_OK;
    if (tt->shape->n_dim > TERN_GRAPH_MAX_RANK)
        return tern_error_set(err, TERN_ERR_UNSUPPORTED, "%s \"%s\": rank %zu above the limit %d", what, v->name,
                              tt->shape->n_dim, TERN_GRAPH_MAX_RANK);
    v->rank = (int)tt->shape->n_dim;
    for (size_t d = 0; d < tt->shape->n_dim; d++) {
        const Onnx__TensorShapeProto__Dimension *dim = tt->shape->dim[d];
        v->dims[d] = -1;
        if (dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) {
            if (dim->dim_value < 0 || dim->dim_value > GRAPH_MAX_ELEMS)
                return tern_error_set(err, TERN_ERR_PARSE, "%s \"%s\": dim %zu is %lld", what, v->name, d,
                                      (long long)dim->dim_value);
            v->dims[d] = dim->dim_value;
        } else if (dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM && dim->dim_param &&
                   dim->dim_param[0]) {
            v->dim_names[d] = graph_strdup(dim->dim_param);
            if (!v->dim_names[d])
                return tern_error_set(err, TERN_ERR_NOMEM, "out of memory");
        }
    }
    if (tern_graph_value_is_static(v) && graph_numel(v->rank, v->dims) < 0)
        return tern_error_set(err, TERN_ERR_RANGE, "%s \"%s\": element count overflows the 2^32 limit", what,
                              v->name);
    return TERN_OK;
}

/* ---- attributes ---- */
static tern_status import_body(tern_graph *g, const Onnx__GraphProto *gp, const char *dir, int open, tern_error *err);

/* An If branch as its own graph (names it reads from the enclosing graph become unfed inputs), or NULL when it
 * does not import: the If is then refused as an unsupported op, as before branches were read. */
static tern_graph *import_branch(const tern_graph *parent, const Onnx__GraphProto *gp, const char *dir)
{
    tern_graph *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->opset = parent->opset;
    s->ir_version = parent->ir_version;
    tern_error e;
    if (import_body(s, gp, dir, 1, &e)) {
        tern_graph_free(s);
        return NULL;
    }
    return s;
}

static tern_status convert_attr(const tern_graph *g, int node, const Onnx__AttributeProto *ap, tern_graph_attr *a,
                                const char *dir, tern_error *err)
{
    a->name = graph_strdup(ap->name);
    if (!a->name)
        return tern_error_set(err, TERN_ERR_NOMEM, "out of memory");
    if (!ap->name || !ap->name[0])
        return graph_node_error(g, node, err, TERN_ERR_PARSE, "attribute with an empty name");
    int type = ap->has_type ? (int)ap->type : 0;
    if (type == 0) { /* IR < 3 leaves the type out: guess from the fields present */
        if (ap->t)
            type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR;
        else if (ap->g || ap->n_graphs)
            type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH;
        else if (ap->n_ints)
            type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
        else if (ap->n_floats)
            type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS;
        else if (ap->n_strings)
            type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS;
        else if (ap->has_s)
            type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING;
        else if (ap->has_f)
            type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT;
        else
            type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
    }
    switch (type) {
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT:
        a->type = TERN_ATTR_FLOAT;
        a->f = ap->f;
        break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT:
        a->type = TERN_ATTR_INT;
        a->i = ap->i;
        break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING: {
        a->type = TERN_ATTR_STRING;
        a->s = malloc(ap->s.len + 1);
        if (!a->s)
            return tern_error_set(err, TERN_ERR_NOMEM, "out of memory");
        if (ap->s.len)
            memcpy(a->s, ap->s.data, ap->s.len);
        a->s[ap->s.len] = '\0';
        break;
    }
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR: {
        a->type = TERN_ATTR_TENSOR;
        if (!ap->t)
            return graph_node_error(g, node, err, TERN_ERR_PARSE, "attribute \"%s\": tensor attribute without a tensor",
                                    a->name);
        tern_status st = tensor_from_proto(ap->t, "attribute", dir, &a->t, err);
        if (st) {
            char label[400];
            return tern_error_prefix(err, "%s: attribute \"%s\": ", tern_graph_node_label(g, node, label, sizeof label),
                                     a->name);
        }
        break;
    }
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS:
        a->type = TERN_ATTR_FLOATS;
        a->n = ap->n_floats;
        a->floats = malloc((a->n ? a->n : 1) * sizeof(float));
        if (!a->floats)
            return tern_error_set(err, TERN_ERR_NOMEM, "out of memory");
        if (a->n)
            memcpy(a->floats, ap->floats, a->n * sizeof(float));
        break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS:
        a->type = TERN_ATTR_INTS;
        a->n = ap->n_ints;
        a->ints = malloc((a->n ? a->n : 1) * sizeof(int64_t));
        if (!a->ints)
            return tern_error_set(err, TERN_ERR_NOMEM, "out of memory");
        if (a->n)
            memcpy(a->ints, ap->ints, a->n * sizeof(int64_t));
        break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS:
        a->type = TERN_ATTR_STRINGS;
        a->strings = calloc(ap->n_strings ? ap->n_strings : 1, sizeof(char *));
        if (!a->strings)
            return tern_error_set(err, TERN_ERR_NOMEM, "out of memory");
        for (size_t k = 0; k < ap->n_strings; k++) {
            a->strings[k] = malloc(ap->strings[k].len + 1);
            if (!a->strings[k])
                return tern_error_set(err, TERN_ERR_NOMEM, "out of memory");
            a->n = k + 1;
            if (ap->strings[k].len)
                memcpy(a->strings[k], ap->strings[k].data, ap->strings[k].len);
            a->strings[k][ap->strings[k].len] = '\0';
        }
        break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__SPARSE_TENSOR:
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__SPARSE_TENSORS:
        return graph_node_error(g, node, err, TERN_ERR_UNSUPPORTED, "attribute \"%s\": sparse tensors are not supported",
                                a->name);
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH:
        a->type = TERN_ATTR_GRAPH;
        if (ap->g && !strcmp(g->nodes[node].op, "If")) /* other bodies (Loop, Scan) stay markers */
            a->graph = import_branch(g, ap->g, dir);
        break;
    default: a->type = TERN_ATTR_GRAPH; break; /* graph lists, tensor lists, type protos: kept as a marker */
    }
    return TERN_OK;
}

/* ---- model ---- */
static tern_status import_graph(tern_graph *g, const Onnx__ModelProto *m, const char *dir, tern_error *err)
{
    g->ir_version = m->has_ir_version ? m->ir_version : 0;
    g->opset = 0;
    for (size_t k = 0; k < m->n_opset_import; k++) {
        const char *d = m->opset_import[k]->domain;
        if ((!d || !d[0] || strcmp(d, "ai.onnx") == 0) && m->opset_import[k]->has_version)
            g->opset = m->opset_import[k]->version;
    }
    if (g->opset == 0)
        g->opset = m->n_opset_import ? MAX_OPSET : 1; /* only other domains declared: newest default semantics */
    if (g->opset < 1 || g->opset > MAX_OPSET)
        return tern_error_set(err, TERN_ERR_UNSUPPORTED, "model: default-domain opset %lld outside the supported 1..%d",
                              (long long)g->opset, MAX_OPSET);
    const Onnx__GraphProto *gp = m->graph;
    if (!gp)
        return tern_error_set(err, TERN_ERR_PARSE, "model: no graph");
    return import_body(g, gp, dir, 0, err);
}

/* The graph's initializers, inputs, nodes and outputs. open: a subgraph, whose names not defined inside are the
 * enclosing graph's (kept as unfed inputs of that name) */
static tern_status import_body(tern_graph *g, const Onnx__GraphProto *gp, const char *dir, int open, tern_error *err)
{
    tern_status st;
    if (gp->n_sparse_initializer)
        return tern_error_set(err, TERN_ERR_UNSUPPORTED, "model: sparse initializers are not supported");
    if (gp->n_node > 1000000 || gp->n_initializer > 1000000)
        return tern_error_set(err, TERN_ERR_RANGE, "model: %zu nodes / %zu initializers exceed the limit", gp->n_node,
                              gp->n_initializer);

    for (size_t k = 0; k < gp->n_initializer; k++) {
        const Onnx__TensorProto *tp = gp->initializer[k];
        if (!tp->name || !tp->name[0])
            return tern_error_set(err, TERN_ERR_PARSE, "initializer #%zu: empty name", k);
        if (graph_lookup(g, tp->name) >= 0)
            return tern_error_set(err, TERN_ERR_PARSE, "initializer \"%s\": name used twice", tp->name);
        tern_host_tensor *t;
        if ((st = tensor_from_proto(tp, "initializer", dir, &t, err)))
            return st;
        int id = graph_add_value(g, tp->name);
        if (id < 0) {
            tern_host_tensor_free(t);
            return tern_error_set(err, TERN_ERR_NOMEM, "out of memory");
        }
        tern_graph_value *v = &g->values[id];
        v->constant = t;
        v->flags = TERN_VALUE_INITIALIZER;
        v->type = t->type;
        v->rank = t->rank;
        for (int d = 0; d < t->rank; d++)
            v->dims[d] = t->dims[d];
    }
    g->inputs = malloc((gp->n_input ? gp->n_input : 1) * sizeof(int));
    g->outputs = malloc((gp->n_output ? gp->n_output : 1) * sizeof(int));
    if (!g->inputs || !g->outputs)
        return tern_error_set(err, TERN_ERR_NOMEM, "out of memory");
    for (size_t k = 0; k < gp->n_input; k++) {
        const Onnx__ValueInfoProto *vi = gp->input[k];
        if (!vi->name || !vi->name[0])
            return tern_error_set(err, TERN_ERR_PARSE, "graph input #%zu: empty name", k);
        int id = graph_lookup(g, vi->name);
        if (id >= 0 && (g->values[id].flags & TERN_VALUE_INITIALIZER))
            continue; /* IR < 4 lists initializers among the inputs; the initializer's data wins */
        if (id >= 0)
            return tern_error_set(err, TERN_ERR_PARSE, "graph input \"%s\": listed twice", vi->name);
        if ((id = graph_add_value(g, vi->name)) < 0)
            return tern_error_set(err, TERN_ERR_NOMEM, "out of memory");
        g->values[id].flags = TERN_VALUE_INPUT;
        g->inputs[g->n_inputs++] = id;
        if ((st = apply_type(&g->values[id], vi->type, "graph input", err)))
            return st;
    }
    /* outputs of every node first, so nodes may appear in any order in the file */
    for (size_t i = 0; i < gp->n_node; i++) {
        const Onnx__NodeProto *np = gp->node[i];
        if (np->n_input > 100000 || np->n_output > 100000 || np->n_attribute > 100000)
            return tern_error_set(err, TERN_ERR_RANGE, "node #%zu: too many inputs, outputs or attributes", i);
        int idx = graph_add_node(g, np->op_type, np->domain, np->name, (int)np->n_input, (int)np->n_output,
                                 (int)np->n_attribute);
        if (idx < 0)
            return tern_error_set(err, TERN_ERR_NOMEM, "out of memory");
        if (!np->op_type || !np->op_type[0])
            return graph_node_error(g, idx, err, TERN_ERR_PARSE, "empty op type");
        for (size_t k = 0; k < np->n_output; k++) {
            const char *name = np->output[k];
            if (!name || !name[0])
                continue; /* omitted optional output */
            int id = graph_lookup(g, name);
            if (id >= 0)
                return graph_node_error(g, idx, err, TERN_ERR_PARSE, "output \"%s\" is already %s", name,
                                        g->values[id].flags & TERN_VALUE_INPUT         ? "a graph input"
                                        : g->values[id].flags & TERN_VALUE_INITIALIZER ? "an initializer"
                                                                                       : "produced by another node");
            if ((id = graph_add_value(g, name)) < 0)
                return tern_error_set(err, TERN_ERR_NOMEM, "out of memory");
            g->nodes[idx].outputs[k] = id;
        }
        for (size_t k = 0; k < np->n_attribute; k++) {
            tern_graph_attr *a = &g->nodes[idx].attrs[g->nodes[idx].n_attrs++];
            if ((st = convert_attr(g, idx, np->attribute[k], a, dir, err)))
                return st;
        }
    }
    for (size_t i = 0; i < gp->n_node; i++) {
        const Onnx__NodeProto *np = gp->node[i];
        for (size_t k = 0; k < np->n_input; k++) {
            const char *name = np->input[k];
            if (!name || !name[0])
                continue;
            int id = graph_lookup(g, name);
            if (id < 0 && open && (id = graph_add_value(g, name)) >= 0)
                g->values[id].flags = TERN_VALUE_INPUT;
            if (id < 0)
                return graph_node_error(g, (int)i, err, TERN_ERR_PARSE,
                                        "input %zu \"%s\" is not a graph input, initializer or node output", k, name);
            g->nodes[i].inputs[k] = id;
        }
    }
    for (size_t k = 0; k < gp->n_output; k++) {
        const Onnx__ValueInfoProto *vi = gp->output[k];
        int id = vi->name ? graph_lookup(g, vi->name) : -1;
        if (id < 0 && open && vi->name && (id = graph_add_value(g, vi->name)) >= 0)
            g->values[id].flags = TERN_VALUE_INPUT; /* a branch passing an outer value through */
        if (id < 0)
            return tern_error_set(err, TERN_ERR_PARSE, "graph output \"%s\": no node, input or initializer has that name",
                                  vi->name ? vi->name : "");
        g->values[id].flags |= TERN_VALUE_OUTPUT;
        g->outputs[g->n_outputs++] = id;
        if (!(g->values[id].flags & (TERN_VALUE_INPUT | TERN_VALUE_INITIALIZER)) &&
            (st = apply_type(&g->values[id], vi->type, "graph output", err)))
            return st;
    }
    return graph_sort(g, err);
}

tern_status tern_graph_load_onnx_buffer(const void *buf, size_t len, tern_graph **out, tern_error *err)
{
    return tern_graph_load_onnx_buffer_dir(buf, len, NULL, out, err);
}

tern_status tern_graph_load_onnx_buffer_dir(const void *buf, size_t len, const char *dir, tern_graph **out,
                                            tern_error *err)
{
    *out = NULL;
    if (!buf && len)
        return tern_error_set(err, TERN_ERR_INVALID, "onnx: NULL buffer");
    if (len == 0)
        return tern_error_set(err, TERN_ERR_PARSE, "onnx: empty model (0 bytes)");
    const uint8_t *p = buf;
    if (nesting(&onnx__model_proto__descriptor, p, p + len, 0) > MAX_NESTING)
        return tern_error_set(err, TERN_ERR_PARSE, "onnx: messages nested deeper than %d levels", MAX_NESTING);
    Onnx__ModelProto *m = onnx__model_proto__unpack(NULL, len, p);
    if (!m)
        return tern_error_set(err, TERN_ERR_PARSE,
                              "onnx: not a valid ModelProto (%zu bytes: truncated or corrupt protobuf)", len);
    tern_graph *g = calloc(1, sizeof *g);
    if (!g) {
        onnx__model_proto__free_unpacked(m, NULL);
        return tern_error_set(err, TERN_ERR_NOMEM, "onnx: out of memory");
    }
    tern_status st = import_graph(g, m, dir, err);
    onnx__model_proto__free_unpacked(m, NULL);
    if (st) {
        tern_graph_free(g);
        return st;
    }
    *out = g;
    return TERN_OK;
}

tern_status tern_graph_load_onnx(const char *path, tern_graph **out, tern_error *err)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return tern_error_set(err, TERN_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb; /* a directory opens, then "sizes" to LONG_MAX: refuse anything but a regular file */
    if (fstat(fileno(f), &sb) == 0 && !S_ISREG(sb.st_mode)) {
        fclose(f);
        return tern_error_set(err, TERN_ERR_IO, "%s: %s, not an ONNX model file", path,
                              S_ISDIR(sb.st_mode) ? "a directory" : "not a regular file");
    }
    if (fseek(f, 0, SEEK_END) != 0) {
        fclose(f);
        return tern_error_set(err, TERN_ERR_IO, "%s: cannot seek", path);
    }
    long size = ftell(f);
    if (size < 0 || fseek(f, 0, SEEK_SET) != 0) {
        fclose(f);
        return tern_error_set(err, TERN_ERR_IO, "%s: cannot size", path);
    }
    void *buf = malloc(size ? (size_t)size : 1);
    if (!buf) {
        fclose(f);
        return tern_error_set(err, TERN_ERR_NOMEM, "%s: out of memory for %ld bytes", path, size);
    }
    size_t got = fread(buf, 1, (size_t)size, f);
    fclose(f);
    if (got != (size_t)size) {
        free(buf);
        return tern_error_set(err, TERN_ERR_IO, "%s: read %zu of %ld bytes", path, got, size);
    }
    /* external data is named relative to the model file's directory */
    const char *slash = strrchr(path, '/');
    size_t dl = slash ? (size_t)(slash - path) : 1;
    char *dir = malloc(dl + 1);
    if (!dir) {
        free(buf);
        return tern_error_set(err, TERN_ERR_NOMEM, "%s: out of memory", path);
    }
    if (!slash)
        dir[0] = '.';
    else if (dl == 0)
        dir[0] = '/', dl = 1; /* a model in / itself */
    else
        memcpy(dir, path, dl);
    dir[dl] = '\0';
    tern_status st = tern_graph_load_onnx_buffer_dir(buf, (size_t)size, dir, out, err);
    free(dir);
    free(buf);
    if (st)
        tern_error_prefix(err, "%s: ", path);
    return st;
}
