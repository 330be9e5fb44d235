/* The compiler driver: optimise the graph, place every value in HBM, lower each node with its op's lowering
 * rule (rules.c picks it from the family files' arrays), release scratch tensors after their last reader, and
 * assemble the executable (one program per core, the same program on every core when a batch is split). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compiler/compile_internal.h"
#include "tern/arch.h"
#include "tern/fabric.h"

void tern_compile_opts_default(tern_compile_opts *o)
{
    memset(o, 0, sizeof *o);
    o->machine = "trn1.2xlarge";
    o->matmul_dtype = TERN_DTYPE_BF16;
    o->cores = 1;
    o->default_dim = 1;
}

/* A name that is already a valid program tensor name is kept; any other (too long, or with characters outside
 * [A-Za-z0-9_.-]) becomes its first characters with the others replaced by '_', then '.' and 16 hex digits of a
 * 64-bit FNV-1a hash of the whole name, so two model names never meet in one program tensor (the executable keeps
 * the model's own name in its string table). */
void tern_compile_io_name(const char *onnx_name, char *out, size_t len)
{
    if (len == 0)
        return;
    size_t room = (len < TERN_TENSOR_NAME_MAX ? len : TERN_TENSOR_NAME_MAX) - 1, n = strlen(onnx_name);
    int plain = n > 0 && n <= room;
    for (const char *p = onnx_name; *p && plain; p++)
        plain = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_' ||
                *p == '.' || *p == '-';
    if (plain || room < 17) {
        snprintf(out, len, "%s", onnx_name);
        return;
    }
    uint64_t h = 0xcbf29ce484222325ull;
    for (const char *p = onnx_name; *p; p++)
        h = (h ^ (uint8_t)*p) * 0x100000001b3ull;
    size_t keep = room - 17, k = 0;
    for (const char *p = onnx_name; *p && k < keep; p++, k++) {
        char ch = *p;
        int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_' ||
                 ch == '.' || ch == '-';
        out[k] = ok ? ch : '_';
    }
    snprintf(out + k, len - k, ".%016llx", (unsigned long long)h);
}

tern_status cc_fail(compile_ctx *c, tern_status code, const char *fmt, ...)
{
    if (c->failed)
        return c->err->code;
    char msg[TERN_ERROR_MSG_MAX - 160], label[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (c->node >= 0)
        tern_graph_node_label(c->g, c->node, label, sizeof label);
    else
        snprintf(label, sizeof label, "compile");
    c->failed = 1;
    return tern_error_set(c->err, code, "%s: %s", label, msg);
}

int cc_ok(compile_ctx *c)
{
    if (c->failed)
        return 0;
    tern_error e;
    if (c->k && tern_kernel_status(c->k, &e)) {
        char label[160];
        tern_graph_node_label(c->g, c->node, label, sizeof label);
        c->failed = 1;
        tern_error_set(c->err, e.code, "%s: %s", label, e.msg);
        return 0;
    }
    return 1;
}

const tern_graph_node *cc_node(compile_ctx *c) { return tern_graph_node_at(c->g, c->node); }
int cc_in_id(compile_ctx *c, int k)
{
    const tern_graph_node *n = cc_node(c);
    return k < n->n_inputs ? n->inputs[k] : -1;
}
int cc_out_id(compile_ctx *c, int k)
{
    const tern_graph_node *n = cc_node(c);
    return k < n->n_outputs ? n->outputs[k] : -1;
}

cc_value *cc_in(compile_ctx *c, int k)
{
    int id = cc_in_id(c, k);
    if (id < 0)
        return NULL;
    return c->v[id].placed ? &c->v[id] : NULL;
}

static tern_status dtype_of(compile_ctx *c, const tern_graph_value *gv, tern_dtype *dt)
{
    switch (gv->type) {
    case TERN_ELEM_FLOAT:
    case TERN_ELEM_DOUBLE: *dt = TERN_DTYPE_FP32; return TERN_OK;
    case TERN_ELEM_FLOAT16: *dt = TERN_DTYPE_FP16; return TERN_OK;
    case TERN_ELEM_BFLOAT16: *dt = TERN_DTYPE_BF16; return TERN_OK;
    case TERN_ELEM_INT64:
    case TERN_ELEM_INT32: *dt = TERN_DTYPE_INT32; return TERN_OK; /* indices: int32 on the device */
    case TERN_ELEM_UINT32:
    case TERN_ELEM_UINT64: *dt = TERN_DTYPE_UINT32; return TERN_OK;
    case TERN_ELEM_INT16: *dt = TERN_DTYPE_INT16; return TERN_OK;
    case TERN_ELEM_UINT16: *dt = TERN_DTYPE_UINT16; return TERN_OK;
    case TERN_ELEM_INT8: *dt = TERN_DTYPE_INT8; return TERN_OK;
    case TERN_ELEM_UINT8:
    case TERN_ELEM_BOOL:
    case TERN_ELEM_STRING: *dt = TERN_DTYPE_UINT8; return TERN_OK; /* text: TERN_EXE_TEXT_CELL bytes each */
    default:
        return cc_fail(c, TERN_ERR_UNSUPPORTED, "value '%s' has element type %s, which the device cannot hold",
                       gv->name, tern_elem_name(gv->type));
    }
}

static void shape_from(cc_value *x, const tern_graph_value *gv)
{
    x->rank = gv->rank;
    x->numel = 1;
    for (int d = 0; d < gv->rank; d++) {
        x->dims[d] = gv->dims[d];
        x->numel *= (uint64_t)gv->dims[d];
    }
    if (gv->type == TERN_ELEM_STRING) /* text: a cell of bytes per element (the dims stay the logical ones) */
        x->numel *= TERN_EXE_TEXT_CELL;
}

static tern_view new_tensor(compile_ctx *c, const char *name, tern_kio_kind kind, tern_dtype dt, uint64_t numel)
{
    return tern_kernel_hbm_tensor(c->k, name, kind, dt, 1, &numel); /* numel >= 1: empty values get none */
}

/* "[3, 0, 5]" */
static const char *shape_text(const int64_t *dims, int rank, char *buf, size_t len)
{
    size_t n = (size_t)snprintf(buf, len, "[");
    for (int d = 0; d < rank && n < len; d++)
        n += (size_t)snprintf(buf + n, len - n, "%s%lld", d ? ", " : "", (long long)dims[d]);
    if (n < len)
        snprintf(buf + n, len - n, "]");
    return buf;
}

/* A value with zero elements needs no storage: it is placed with no tensor, and nothing reads or writes it. */
static void place_empty(cc_value *x, tern_dtype dt, int id)
{
    x->dt = dt;
    x->owner = id;
    x->flat = tern_view_none();
    x->scratch = 0;
    x->host = NULL;
    x->placed = 1;
}

static int is_empty_device_value(const cc_value *x) { return x->placed && !x->host && x->numel == 0; }

void cc_strides(const cc_value *x, int64_t *st)
{
    int64_t s = 1;
    for (int d = x->rank - 1; d >= 0; d--) {
        st[d] = s;
        s *= x->dims[d];
    }
}

int cc_dims_equal(int ra, const int64_t *a, int rb, const int64_t *b)
{
    if (ra != rb)
        return 0;
    for (int d = 0; d < ra; d++)
        if (a[d] != b[d])
            return 0;
    return 1;
}

int cc_same_shape(const cc_value *a, const cc_value *b) { return cc_dims_equal(a->rank, a->dims, b->rank, b->dims); }

tern_dtype cc_out_dtype(compile_ctx *c, int k)
{
    const tern_graph_value *gv = tern_graph_value_at(c->g, cc_out_id(c, k));
    switch (gv->type) {
    case TERN_ELEM_FLOAT16: return TERN_DTYPE_FP16;
    case TERN_ELEM_BFLOAT16: return TERN_DTYPE_BF16;
    case TERN_ELEM_BOOL:
    case TERN_ELEM_STRING:
    case TERN_ELEM_UINT8: return TERN_DTYPE_UINT8;
    case TERN_ELEM_INT8: return TERN_DTYPE_INT8;
    case TERN_ELEM_INT16: return TERN_DTYPE_INT16;
    case TERN_ELEM_UINT16: return TERN_DTYPE_UINT16;
    case TERN_ELEM_UINT32:
    case TERN_ELEM_UINT64: return TERN_DTYPE_UINT32;
    case TERN_ELEM_INT32:
    case TERN_ELEM_INT64: return TERN_DTYPE_INT32;
    default: return TERN_DTYPE_FP32;
    }
}

tern_dtype cc_float_out_dtype(compile_ctx *c, int k)
{
    int id = cc_out_id(c, k);
    return id >= 0 && c->v[id].narrow ? c->o->matmul_dtype : TERN_DTYPE_FP32;
}

/* Output names: the training step (and the data-parallel and layout graphs) names each of its outputs by an
 * Identity of an anonymous value (the new weight of an optimizer update, a gradient, the loss). Copying the value
 * into the output's tensor is an HBM round trip of every weight and optimizer state per step. Instead the value is
 * placed as the output's tensor when its producer places it (cc_out), and the Identity becomes a view (cc_alias).
 * Only a node's own output qualifies (a value some lowering places as a view of another keeps the copy), one
 * output per value, and only when the Identity does not change the element type. */
static void plan_output_names(compile_ctx *c)
{
    tern_graph *g = c->g;
    int nn = tern_graph_node_count(g);
    for (int i = 0; i < nn; i++) {
        const tern_graph_node *n = tern_graph_node_at(g, i);
        if (n->op_id != TERN_GOP_IDENTITY || n->n_inputs < 1 || n->n_outputs < 1 || n->inputs[0] < 0 ||
            n->outputs[0] < 0)
            continue;
        int v = n->inputs[0], o = n->outputs[0];
        const tern_graph_value *vv = tern_graph_value_at(g, v), *ov = tern_graph_value_at(g, o);
        if (!(ov->flags & TERN_VALUE_OUTPUT) || (vv->flags & (TERN_VALUE_OUTPUT | TERN_VALUE_INPUT)) ||
            vv->producer < 0 || vv->constant || vv->type != ov->type || c->v[v].out_as)
            continue;
        c->v[v].out_as = o + 1;
    }
}

/* Narrow storage: an fp32 activation made by a linear layer, an attention or a layer norm whose every reader
 * takes it only as a matmul operand (input 0 of a linear layer; Q, K or V of an attention) is stored in the matmul
 * dtype (BF16) instead: its readers would round it to BF16 (RNE) on the way to TensorE anyway, so the store's
 * conversion gives the same bits, at half the bytes through HBM. Graph outputs and values read any other way stay
 * fp32. */
static void plan_narrow(compile_ctx *c)
{
    tern_graph *g = c->g;
    if (c->o->matmul_dtype != TERN_DTYPE_BF16)
        return;
    int nn = tern_graph_node_count(g);
    int *ok = malloc(sizeof(int) * (size_t)(c->nv ? c->nv : 1));
    if (!ok)
        return; /* an optimisation only */
    for (int id = 0; id < c->nv; id++)
        ok[id] = 0;
    for (int i = 0; i < nn; i++) {
        const tern_graph_node *n = tern_graph_node_at(g, i);
        /* Attention's and LayerNormalization's rules store through a cast (tern_lib_layernorm); a Transpose
         * stores through its DMA's or VectorE's cast (a training step's W^T, read as the linear layers' weight) */
        int narrow = (tern_op_flags((tern_op_id)n->op_id) & TERN_OPF_NARROW_STORE) != 0 ||
                     n->op_id == TERN_GOP_TRANSPOSE;
        int lin = cc_node_is_linear(g, i);
        /* outputs: the first; a linear layer's second too (its fused norm's, pre-LN fusion) */
        int nout = lin ? n->n_outputs : 1;
        for (int k = 0; (narrow || lin) && k < nout && k < n->n_outputs; k++) {
            if (n->outputs[k] < 0)
                continue;
            const tern_graph_value *gv = tern_graph_value_at(g, n->outputs[k]);
            if (gv->type == TERN_ELEM_FLOAT && !(gv->flags & TERN_VALUE_OUTPUT))
                ok[n->outputs[k]] = -1; /* a candidate: no reader seen yet */
        }
    }
    for (int i = 0; i < nn; i++) {
        const tern_graph_node *n = tern_graph_node_at(g, i);
        int att = n->op_id == TERN_GOP_ATTENTION, lin = cc_node_is_linear(g, i);
        for (int j = 0; j < n->n_inputs; j++) {
            int id = n->inputs[j];
            if (id < 0 || !ok[id])
                continue;
            const tern_graph_value *pv = tern_graph_value_at(g, id);
            int tr = pv->producer >= 0 && tern_graph_node_at(g, pv->producer)->op_id == TERN_GOP_TRANSPOSE;
            /* a transposed value: only as a MatMul's run-time second operand (cast to the matmul dtype on the way
             * to TensorE by every matmul.linear path); anything else: as the first operand of a linear layer */
            if (tr)
                ok[id] = n->op_id == TERN_GOP_MATMUL && j == 1 && n->inputs[0] != id ? 1 : 0;
            else
                ok[id] = ((att && j <= 2) || (lin && j == 0)) ? 1 : 0;
        }
    }
    for (int id = 0; id < c->nv; id++)
        c->v[id].narrow = ok[id] == 1;
    free(ok);
}

cc_value *cc_out(compile_ctx *c, int k, tern_dtype dt)
{
    int id = cc_out_id(c, k);
    if (id < 0)
        return NULL;
    const tern_graph_value *gv = tern_graph_value_at(c->g, id);
    cc_value *x = &c->v[id];
    shape_from(x, gv);
    if (gv->rank > CC_MAX_RANK) {
        cc_fail(c, TERN_ERR_UNSUPPORTED, "output '%s' has rank %d", gv->name, gv->rank);
        return NULL;
    }
    x->dt = dt;
    x->owner = id;
    if (x->numel == 0) {
        place_empty(x, dt, id);
        return x;
    }
    if (x->home > 0 && cc_home_place(c, x, id, dt))
        return x; /* in a Concat's buffer (cc_concat_plan) */
    char name[TERN_TENSOR_NAME_MAX];
    if (gv->flags & TERN_VALUE_OUTPUT) {
        tern_compile_io_name(gv->name, name, sizeof name);
        x->flat = new_tensor(c, name, TERN_KIO_OUTPUT, dt, x->numel);
    } else if (x->out_as) { /* the graph output its Identity names: this value's storage is that tensor */
        tern_compile_io_name(tern_graph_value_at(c->g, x->out_as - 1)->name, name, sizeof name);
        x->flat = new_tensor(c, name, TERN_KIO_OUTPUT, dt, x->numel);
        x->as_output = 1;
    } else {
        snprintf(name, sizeof name, "t%u", c->names++);
        x->flat = new_tensor(c, name, TERN_KIO_SCRATCH, dt, x->numel);
        x->scratch = 1;
    }
    x->placed = x->flat.region >= 0;
    return x->placed ? x : NULL;
}

cc_value *cc_alias(compile_ctx *c, int k, int j)
{
    int id = cc_out_id(c, k);
    cc_value *src = cc_in(c, j);
    if (id < 0 || !src)
        return NULL;
    const tern_graph_value *gv = tern_graph_value_at(c->g, id);
    cc_value *x = &c->v[id];
    if ((gv->flags & TERN_VALUE_OUTPUT) && src->as_output && src->out_as == id + 1 && src->owner == cc_in_id(c, j)) {
        /* the source was placed as this output's tensor (plan_output_names): a view, no copy */
        int last_use = x->last_use;
        *x = *src;
        shape_from(x, gv);
        x->owner = src->owner;
        x->scratch = 0;
        x->released = 0;
        x->last_use = last_use;
        x->out_as = 0;
        x->as_output = 0;
        c->aliased++;
        return x;
    }
    if (gv->flags & TERN_VALUE_OUTPUT) { /* a graph output needs its own interface tensor: copy */
        x = cc_out(c, k, src->dt);
        if (x)
            cc_copy(c, x->flat, cc_view2d(c, src, 0, 1, src->numel, src->numel));
        return x;
    }
    int last_use = x->last_use; /* this value's own readers, computed before lowering */
    *x = *src;
    shape_from(x, gv);
    x->owner = src->owner;
    x->scratch = 0;
    x->released = 0;
    x->last_use = last_use;
    c->aliased++;
    return x;
}

/* A text constant on the device: one NUL-padded cell per string. */
static tern_view const_text(compile_ctx *c, const tern_host_tensor *t)
{
    uint64_t n = (uint64_t)t->count * TERN_EXE_TEXT_CELL;
    uint8_t *b = calloc(n ? n : 1, 1);
    if (!b) {
        cc_fail(c, TERN_ERR_NOMEM, "out of memory for a text constant of %zu strings", t->count);
        return tern_view_none();
    }
    for (size_t i = 0; i < t->count && !c->failed; i++) {
        size_t len = strlen(t->s[i]);
        if (len > TERN_EXE_TEXT_CELL)
            cc_fail(c, TERN_ERR_UNSUPPORTED, "text constant element %zu is %zu bytes, a device text cell holds %d", i,
                    len, TERN_EXE_TEXT_CELL);
        else
            memcpy(b + i * TERN_EXE_TEXT_CELL, t->s[i], len);
    }
    tern_view v = tern_view_none();
    if (!c->failed) {
        char name[32];
        snprintf(name, sizeof name, "w%u", c->names++);
        uint64_t shape[2] = {1, n};
        v = tern_kernel_constant(c->k, name, TERN_DTYPE_UINT8, 2, shape, b);
    }
    free(b);
    return v;
}

tern_view cc_view(compile_ctx *c, cc_value *x, uint64_t off, uint32_t parts, int64_t part_step, unsigned nd,
                  const uint32_t *nums, const int32_t *steps)
{
    if (x->flat.region < 0 && (x->host ? x->host->count == 0 : x->placed && x->numel == 0)) {
        /* lowerings never see zero-size values except where they skip them (Concat inputs, Split outputs): this
         * is a guard against a wrong answer, reported like any unsupported case */
        const tern_graph_value *gv = tern_graph_value_at(c->g, x->owner);
        cc_fail(c, TERN_ERR_UNSUPPORTED, "%s '%s' has no elements: a zero-size tensor cannot be read or written on "
                "the device", x->host ? "constant" : "value", gv ? gv->name : "?");
        return tern_view_none();
    }
    if (x->host && x->flat.region < 0 && x->host->s) { /* text constant: its cells */
        x->flat = const_text(c, x->host);
    } else if (x->host && x->flat.region < 0) { /* a graph constant used as a tensor: its device copy, once */
        x->flat = cc_const2d(c, x->host, x->dt, 1, x->host->count, 0);
        if (x->flat.region < 0)
            return x->flat;
    }
    tern_view v = x->flat;
    size_t es = tern_dtype_size(x->dt);
    v.ap.offset = x->flat.ap.offset + off * es;
    v.ap.num_partitions = (uint16_t)parts;
    v.ap.partition_step = part_step;
    v.ap.ndims = (uint8_t)nd;
    memset(v.ap.dims, 0, sizeof v.ap.dims);
    for (unsigned d = 0; d < nd; d++) {
        v.ap.dims[d].num = nums[d];
        v.ap.dims[d].step = steps[d];
    }
    return v;
}

tern_view cc_view2d(compile_ctx *c, cc_value *x, uint64_t off, uint64_t rows, uint64_t cols, uint64_t row_stride)
{
    if (rows == 1)
        row_stride = cols <= INT32_MAX ? cols : 0; /* one row never steps: a flat view of 2^31+ elements fits */
    if (rows > UINT32_MAX || cols > UINT32_MAX || row_stride > INT32_MAX) {
        cc_fail(c, TERN_ERR_RANGE, "a view of %llu x %llu (row stride %llu) exceeds the 32-bit access pattern",
                (unsigned long long)rows, (unsigned long long)cols, (unsigned long long)row_stride);
        return tern_view_none();
    }
    uint32_t nums[2] = {(uint32_t)rows, (uint32_t)cols};
    int32_t steps[2] = {(int32_t)row_stride, 1};
    return cc_view(c, x, off, 1, 0, 2, nums, steps);
}

tern_view cc_temp(compile_ctx *c, tern_dtype dt, uint64_t rows, uint64_t cols)
{
    char name[32];
    snprintf(name, sizeof name, "t%u", c->names++);
    uint64_t shape[2] = {rows, cols};
    return tern_kernel_hbm_tensor(c->k, name, TERN_KIO_SCRATCH, dt, 2, shape);
}

tern_view cc_const2d(compile_ctx *c, const tern_host_tensor *t, tern_dtype dt, uint64_t rows, uint64_t cols,
                     int transpose)
{
    if ((uint64_t)t->count != rows * cols) {
        cc_fail(c, TERN_ERR_INVALID, "constant of %zu elements used as %llu x %llu", t->count,
                (unsigned long long)rows, (unsigned long long)cols);
        return tern_view_none();
    }
    size_t n = t->count, es = tern_dtype_size(dt);
    /* the device bytes are made in place, through a small fp32 chunk, and handed to the kernel: a weight is never
     * held in a second full-size buffer on the way */
    enum { CHUNK = 1 << 16 };
    uint8_t *b = malloc(es * (n ? n : 1));
    float *f = malloc(sizeof(float) * CHUNK);
    if (!f || !b) {
        free(f);
        free(b);
        cc_fail(c, TERN_ERR_NOMEM, "out of memory for a constant of %zu elements", n);
        return tern_view_none();
    }
    tern_error e;
    for (size_t at = 0; at < n && !c->failed; at += CHUNK) {
        size_t m = n - at < CHUNK ? n - at : CHUNK;
        if (tern_dtype_is_float(dt)) {
            if (!transpose && t->f)
                memcpy(f, t->f + at, m * sizeof(float));
            else
                for (size_t i = 0; i < m; i++) {
                    size_t k = at + i, src = transpose ? (k % cols) * rows + k / cols : k; /* out[r][c] = in[c][r] */
                    f[i] = (float)tern_host_tensor_get(t, src);
                }
            if (tern_convert_from_f32(dt, b + at * es, f, m, NULL, &e))
                cc_fail(c, e.code, "%s", e.msg);
        } else {
            for (size_t i = 0; i < m; i++) {
                size_t k = at + i;
                double d = tern_host_tensor_get(t, transpose ? (k % cols) * rows + k / cols : k);
                int32_t iv = d > 2147483647.0 ? INT32_MAX : d < -2147483648.0 ? INT32_MIN : (int32_t)d;
                memcpy(b + k * es, &iv, es); /* little-endian: the low bytes */
            }
        }
    }
    free(f);
    tern_view v = tern_view_none();
    if (c->failed) {
        free(b);
        return v;
    }
    char name[32];
    snprintf(name, sizeof name, "w%u", c->names++);
    uint64_t shape[2] = {rows, cols};
    return tern_kernel_constant_take(c->k, name, dt, 2, shape, b);
}

void cc_copy(compile_ctx *c, tern_view dst, tern_view src)
{
    if (!cc_ok(c))
        return;
    tern_kernel_dma_copy(c->k, dst, src, -1);
}

/* ---- the driver ---- */

static void place_constant(compile_ctx *c, int id)
{
    const tern_graph_value *gv = tern_graph_value_at(c->g, id);
    cc_value *x = &c->v[id];
    tern_dtype dt = TERN_DTYPE_FP32; /* set by dtype_of on success; initialised for gcc -O3's flow analysis */
    if (dtype_of(c, gv, &dt))
        return;
    shape_from(x, gv);
    x->dt = dt;
    x->owner = id;
    if (gv->constant && gv->constant->count == 1) {
        x->is_const_scalar = 1;
        x->const_scalar = tern_host_tensor_get(gv->constant, 0);
    }
    /* Constants become device tensors lazily (cc_view): most are consumed as immediates or as matmul weights
     * in the matmul dtype, so a device copy in the value's own dtype is made only if something reads it so. */
    x->host = gv->constant;
    x->flat = tern_view_none();
    x->placed = 1;
}

/* A new --explain row for node i (NULL when out of memory). */
static tern_compile_node_rule *explain_row(compile_ctx *c, int i, const tern_graph_node *n)
{
    if (c->nrules == c->caprules) {
        int cap = c->caprules ? 2 * c->caprules : 64;
        tern_compile_node_rule *r = realloc(c->rules, (size_t)cap * sizeof *r);
        if (!r)
            return NULL;
        c->rules = r;
        c->caprules = cap;
    }
    tern_compile_node_rule *row = &c->rules[c->nrules++];
    memset(row, 0, sizeof *row);
    row->node = i;
    snprintf(row->name, sizeof row->name, "%s", n->name ? n->name : "");
    snprintf(row->op, sizeof row->op, "%s%s%s", n->domain, n->domain[0] ? "." : "", n->op);
    return row;
}

void tern_compile_report_free(tern_compile_report *rep)
{
    if (!rep)
        return;
    free(rep->rules);
    rep->rules = NULL;
    rep->num_rules = 0;
}

void cc_kept_flush(compile_ctx *c)
{
    if (c->kept_id < 0)
        return;
    /* the store the kernel before would have made (from ScalarE's queue, as the attention and the norms make theirs;
     * casting, as theirs, when the value is stored narrower than the kept fp32 rows) */
    tern_kernel_dma_copy_on(c->k, TERN_ENGINE_SCALAR, c->kept_hbm, c->kept_rows, -1);
    tern_kernel_release(c->k, c->kept_rows);
    c->kept_id = -1;
}

static tern_status build_core(compile_ctx *c, const tern_graph *gview)
{
    (void)gview;
    tern_graph *g = c->g;
    int nn = tern_graph_node_count(g);
    c->nv = tern_graph_value_count(g);
    c->v = calloc((size_t)c->nv, sizeof *c->v);
    if (!c->v)
        return tern_error_set(c->err, TERN_ERR_NOMEM, "compile: out of memory");
    c->node = -1;
    c->kept_id = -1;
    /* Last use of every value (storage owners are resolved when aliases are made). */
    for (int id = 0; id < c->nv; id++) {
        c->v[id].last_use = -1;
        c->v[id].owner = id;
    }
    for (int i = 0; i < nn; i++) {
        const tern_graph_node *n = tern_graph_node_at(g, i);
        for (int k = 0; k < n->n_inputs; k++)
            if (n->inputs[k] >= 0)
                c->v[n->inputs[k]].last_use = i;
    }
    for (int i = 0; i < tern_graph_output_count(g); i++)
        c->v[tern_graph_output_id(g, i)].last_use = INT32_MAX;
    /* Inputs and constants. */
    for (int i = 0; i < tern_graph_input_count(g); i++) {
        int id = tern_graph_input_id(g, i);
        const tern_graph_value *gv = tern_graph_value_at(g, id);
        cc_value *x = &c->v[id];
        tern_dtype dt;
        if (dtype_of(c, gv, &dt))
            return c->err->code;
        if (!tern_graph_value_is_static(gv))
            return cc_fail(c, TERN_ERR_INVALID, "input '%s' has unknown dimensions (bind them, e.g. --dim)", gv->name);
        shape_from(x, gv);
        if (x->numel == 0) { /* part of the interface with its true shape, but nothing to place on the device */
            place_empty(x, dt, id);
            continue;
        }
        x->dt = dt;
        x->owner = id;
        char name[TERN_TENSOR_NAME_MAX];
        tern_compile_io_name(gv->name, name, sizeof name);
        x->flat = new_tensor(c, name, TERN_KIO_INPUT, dt, x->numel);
        x->placed = x->flat.region >= 0;
    }
    for (int id = 0; id < c->nv; id++) {
        const tern_graph_value *gv = tern_graph_value_at(g, id);
        if (gv->constant && gv->producer < 0 && !(gv->flags & TERN_VALUE_INPUT) && c->v[id].last_use >= 0)
            place_constant(c, id);
        if (!cc_ok(c))
            return c->err->code;
    }
    plan_narrow(c);
    plan_output_names(c);
    cc_msum_plan(c);
    cc_conv_epi_plan(c);
    cc_fuse_plan(c);
    cc_conv_epi_settle(c);
    cc_conv_narrow(c);
    if (!c->o->no_elementwise_fusion)
        cc_concat_plan(c);
    /* Nodes in order. */
    for (int i = 0; i < nn; i++) {
        c->node = i;
        const tern_graph_node *n = tern_graph_node_at(g, i);
        tern_compile_node_rule *row = NULL;
        if (c->kept_id >= 0 && c->kept_reader != i)
            cc_kept_flush(c);
        if (c->o->explain && !(row = explain_row(c, i, n)))
            return cc_fail(c, TERN_ERR_NOMEM, "out of memory for the --explain rows");
        for (int k = 0; k < n->n_inputs && !cc_fuse_member(c, i) && !cc_msum_member(c, i) && !cc_conv_epi_member(c, i);
             k++)
            if (n->inputs[k] >= 0 && !c->v[n->inputs[k]].placed)
                return cc_fail(c, TERN_ERR_INVALID, "input %d ('%s') has no device placement", k,
                               tern_graph_value_at(g, n->inputs[k])->name);
        int outs = 0, empty_outs = 0, first_empty = -1, first_full = -1;
        for (int k = 0; k < n->n_outputs; k++) {
            const tern_graph_value *ov = n->outputs[k] >= 0 ? tern_graph_value_at(g, n->outputs[k]) : NULL;
            if (!ov)
                continue;
            /* a shape that depends on the data (NonZero, Compress ...) cannot be compiled statically */
            if (!tern_graph_value_is_static(ov))
                return cc_fail(c, TERN_ERR_UNSUPPORTED, "output '%s' has unknown dimensions after shape inference",
                               ov->name);
            outs++;
            if (tern_graph_value_numel(ov) == 0) {
                empty_outs++;
                first_empty = first_empty < 0 ? k : first_empty;
            } else {
                first_full = first_full < 0 ? k : first_full;
            }
        }
        const char *fused_rule = NULL;
        if (cc_msum_node(c, i, &fused_rule)) { /* part of a sum of products (emitted at its root Add) */
            if (row) {
                row->rule = fused_rule;
                row->file = "fuse_matmul_sum.c";
            }
            goto lowered;
        }
        if (cc_conv_epi_node(c, i, &fused_rule)) { /* an Add or Relu its Conv applied (the Conv wrote its output) */
            if (row) {
                row->rule = fused_rule;
                row->file = "lower_cnn.c";
            }
            goto lowered;
        }
        if (cc_fuse_node(c, i, &fused_rule)) { /* a member of an elementwise group (emitted at its last) */
            if (row) {
                row->rule = fused_rule;
                row->file = "fuse_elementwise.c";
            }
            goto lowered;
        }
        tern_op_id opid = (tern_op_id)n->op_id;
        char declined[256];
        const cc_rule *rule = cc_rule_select(c, declined, sizeof declined);
        if (row) {
            snprintf(row->declined, sizeof row->declined, "%s", declined);
            if (rule && !(outs > 0 && empty_outs == outs)) {
                row->rule = rule->name;
                row->file = cc_rule_file(rule);
            }
        }
        if (!rule)
            return cc_fail(c, TERN_ERR_UNSUPPORTED, "op %s%s%s is not supported on the device yet%s%s", n->domain,
                           n->domain[0] ? "." : "", n->op, declined[0] ? " (" : "", declined[0] ? declined : "");
        if (outs > 0 && empty_outs == outs) {
            /* Every output has zero elements: nothing to compute, no storage, no instructions. The node counts as
             * lowered (to an empty piece of program); its rule never sees it. */
            for (int k = 0; k < n->n_outputs; k++) {
                int id = n->outputs[k];
                if (id < 0)
                    continue;
                tern_dtype dt;
                if (dtype_of(c, tern_graph_value_at(g, id), &dt))
                    return c->err->code;
                shape_from(&c->v[id], tern_graph_value_at(g, id));
                place_empty(&c->v[id], dt, id);
            }
            c->lowered_empty++;
            if (row)
                row->rule = "empty";
        } else {
            char s1[96], s2[96];
            if (empty_outs > 0 && !(tern_op_flags(opid) & TERN_OPF_EMPTY_OUTPUTS)) { /* Split skips empty pieces */
                const tern_graph_value *e = tern_graph_value_at(g, n->outputs[first_empty]);
                const tern_graph_value *f = tern_graph_value_at(g, n->outputs[first_full]);
                return cc_fail(c, TERN_ERR_UNSUPPORTED,
                               "output %d ('%s') is a zero-size tensor %s while output %d ('%s') %s is not; an op "
                               "with both empty and non-empty outputs is supported only for Split",
                               first_empty, e->name, shape_text(e->dims, e->rank, s1, sizeof s1), first_full, f->name,
                               shape_text(f->dims, f->rank, s2, sizeof s2));
            }
            for (int k = 0; k < n->n_inputs; k++) {
                int id = n->inputs[k];
                if (id < 0 || !is_empty_device_value(&c->v[id]) || (tern_op_flags(opid) & TERN_OPF_EMPTY_INPUTS))
                    continue; /* Concat skips empty pieces; empty constants are attributes (Resize's roi ...) */
                const tern_graph_value *e = tern_graph_value_at(g, id);
                const tern_graph_value *f = tern_graph_value_at(g, n->outputs[first_full]);
                return cc_fail(c, TERN_ERR_UNSUPPORTED,
                               "input %d ('%s') is a zero-size tensor %s but output '%s' %s is not; reading a "
                               "zero-size tensor to make a non-empty one is supported only for Concat",
                               k, e->name, shape_text(e->dims, e->rank, s1, sizeof s1), f->name,
                               shape_text(f->dims, f->rank, s2, sizeof s2));
            }
            rule->lower(c);
        }
    lowered:
        if (!cc_ok(c))
            return c->err->code;
        c->lowered++;
        /* Release scratch storage whose last reader (through any alias) was this node. */
        for (int k = 0; k < n->n_inputs; k++) {
            int id = n->inputs[k];
            if (id < 0)
                continue;
            int own = c->v[id].owner;
            if (c->v[own].last_use < c->v[id].last_use)
                c->v[own].last_use = c->v[id].last_use;
        }
        for (int k = 0; k < n->n_outputs; k++) {
            int id = n->outputs[k];
            if (id >= 0 && c->v[id].placed && c->v[id].owner != id) {
                int own = c->v[id].owner;
                if (c->v[id].last_use > c->v[own].last_use)
                    c->v[own].last_use = c->v[id].last_use;
            }
        }
        for (int id = 0; id < c->nv; id++) {
            cc_value *x = &c->v[id];
            if (x->placed && x->scratch && !x->released && x->owner == id && x->last_use <= i) {
                tern_kernel_release(c->k, x->flat);
                x->released = 1;
            }
            /* a weight no later node reads: its device copy is made (or it was read as immediates), so the
             * host data goes; aliases of it (last_use folded into the owner's above) are done with it too */
            if (c->release_constants && x->host && x->owner == id && x->last_use >= 0 && x->last_use <= i &&
                !(tern_graph_value_at(g, id)->flags & TERN_VALUE_OUTPUT)) {
                tern_graph_release_constant(g, id);
                x->host = NULL;
            }
        }
        if (c->o->progress)
            c->o->progress(c->o->progress_ctx, i + 1, nn);
    }
    c->node = -1;
    cc_kept_flush(c);
    if (c->at_held) { /* a shared linear-layer transpose whose last reader was lowered another way */
        tern_kernel_release(c->k, c->at_view);
        c->at_held = 0;
    }
    /* Graph outputs that constant folding computed on the host: copy the constant into the output tensor. */
    for (int i = 0; i < tern_graph_output_count(g) && cc_ok(c); i++) {
        int id = tern_graph_output_id(g, i);
        const tern_graph_value *gv = tern_graph_value_at(g, id);
        if (!gv->constant || gv->producer >= 0 || (gv->flags & TERN_VALUE_INPUT))
            continue;
        cc_value *x = &c->v[id];
        if (!x->placed)
            place_constant(c, id);
        if (!cc_ok(c))
            break;
        if (x->numel == 0)
            continue; /* an empty output: nothing to copy */
        cc_value o = *x;
        char name[TERN_TENSOR_NAME_MAX];
        tern_compile_io_name(gv->name, name, sizeof name);
        o.flat = new_tensor(c, name, TERN_KIO_OUTPUT, x->dt, x->numel);
        o.host = NULL;
        o.placed = o.flat.region >= 0;
        if (o.placed)
            cc_copy(c, cc_view2d(c, &o, 0, 1, x->numel, x->numel), cc_view2d(c, x, 0, 1, x->numel, x->numel));
    }
    return cc_ok(c) ? TERN_OK : c->err->code;
}

/* One symbolic dim's value and where it came from ("batch=2", "input 'x' (x.npy)"), for conflict messages. */
typedef struct {
    const char *name;
    int64_t value;
    char from[192];
} dim_bind;

static int input_matches(const tern_graph_value *gv, const char *name)
{
    char a[TERN_TENSOR_NAME_MAX], b[TERN_TENSOR_NAME_MAX];
    if (!strcmp(gv->name, name))
        return 1;
    tern_compile_io_name(gv->name, a, sizeof a);
    tern_compile_io_name(name, b, sizeof b);
    return !strcmp(a, b);
}

/* "[2, 64]", or with gv the model's declared form "[batch, 64]" ('?' for an unnamed unknown dim). */
static void shape_str(char *buf, size_t len, const tern_graph_value *gv, int rank, const int64_t *dims)
{
    size_t at = (size_t)snprintf(buf, len, "[");
    for (int d = 0; d < rank && at < len; d++) {
        const char *sep = d ? ", " : "";
        if (gv && gv->dims[d] < 0)
            at += (size_t)snprintf(buf + at, len - at, "%s%s", sep, gv->dim_names[d] ? gv->dim_names[d] : "?");
        else
            at += (size_t)snprintf(buf + at, len - at, "%s%lld", sep, (long long)dims[d]);
    }
    if (at < len)
        snprintf(buf + at, len - at, "]");
}

/* Record name = value from `from`; a different earlier value is an error naming both. */
static tern_status bind_dim(dim_bind *t, int *n, const char *name, int64_t value, const char *from, tern_error *err)
{
    for (int k = 0; k < *n; k++)
        if (!strcmp(t[k].name, name)) {
            if (t[k].value != value)
                return tern_error_set(err, TERN_ERR_INVALID,
                                      "compile: symbolic dimension '%s' is %lld from %s but %lld from %s", name,
                                      (long long)t[k].value, t[k].from, (long long)value, from);
            return TERN_OK;
        }
    t[*n].name = name;
    t[*n].value = value;
    snprintf(t[*n].from, sizeof t[*n].from, "%s", from);
    (*n)++;
    return TERN_OK;
}

/* The dims of every graph input (out[i][d], whole batch) from the options' named bindings, the shapes given for
 * inputs and default_dim (compiler.h). */
static tern_status resolve_input_dims(const tern_graph *g, const tern_compile_opts *o,
                                      int64_t (*out)[TERN_GRAPH_MAX_RANK], tern_error *err)
{
    int nin = tern_graph_input_count(g), cap = (int)o->num_dims + nin * TERN_GRAPH_MAX_RANK, n = 0;
    dim_bind *t = calloc((size_t)cap + 1, sizeof *t);
    const tern_input_shape **given = calloc((size_t)nin + 1, sizeof *given);
    tern_status st = t && given ? TERN_OK : tern_error_set(err, TERN_ERR_NOMEM, "compile: out of memory");
    for (size_t k = 0; k < o->num_dims && !st; k++) {
        const tern_dim_binding *b = &o->dims[k];
        int declared = 0;
        for (int i = 0; i < nin && !declared; i++) {
            const tern_graph_value *gv = tern_graph_value_at(g, tern_graph_input_id(g, i));
            for (int d = 0; d < gv->rank && !declared; d++)
                declared = gv->dims[d] < 0 && gv->dim_names[d] && !strcmp(gv->dim_names[d], b->name);
        }
        if (!b->name || !b->name[0]) {
            st = tern_error_set(err, TERN_ERR_INVALID, "compile: a dimension binding has no name");
        } else if (b->value < 0) {
            st = tern_error_set(err, TERN_ERR_RANGE, "compile: symbolic dimension '%s' = %lld is negative", b->name,
                                (long long)b->value);
        } else if (!declared) {
            char names[256] = "";
            size_t at = 0;
            for (int i = 0; i < nin; i++) {
                const tern_graph_value *gv = tern_graph_value_at(g, tern_graph_input_id(g, i));
                for (int d = 0; d < gv->rank; d++)
                    if (gv->dims[d] < 0 && gv->dim_names[d] && at < sizeof names &&
                        !strstr(names, gv->dim_names[d])) /* a listing for the message: a repeat is harmless */
                        at += (size_t)snprintf(names + at, sizeof names - at, "%s'%s'", at ? ", " : "",
                                               gv->dim_names[d]);
            }
            st = tern_error_set(err, TERN_ERR_NOT_FOUND,
                                "compile: symbolic dimension '%s' = %lld: no input declares a dimension of that name "
                                "(the inputs' symbolic dimensions: %s)", b->name, (long long)b->value,
                                names[0] ? names : "none");
        } else {
            char from[96];
            snprintf(from, sizeof from, "the binding %.40s=%lld", b->name, (long long)b->value);
            st = bind_dim(t, &n, b->name, b->value, from, err);
        }
    }
    for (size_t k = 0; k < o->num_input_shapes && !st; k++) {
        const tern_input_shape *s = &o->input_shapes[k];
        int i = 0;
        while (i < nin && !input_matches(tern_graph_value_at(g, tern_graph_input_id(g, i)), s->input))
            i++;
        char src[128];
        snprintf(src, sizeof src, "%s%s%s", s->source ? " (" : "", s->source ? s->source : "", s->source ? ")" : "");
        if (i == nin) {
            st = tern_error_set(err, TERN_ERR_NOT_FOUND, "compile: a shape is given for input '%s'%s, but the model "
                                "has no input of that name", s->input, src);
            break;
        }
        const tern_graph_value *gv = tern_graph_value_at(g, tern_graph_input_id(g, i));
        char have[192], want[192];
        shape_str(have, sizeof have, NULL, s->rank, s->dims);
        shape_str(want, sizeof want, gv, gv->rank, gv->dims);
        if (given[i]) {
            st = tern_error_set(err, TERN_ERR_INVALID, "compile: input '%s' is given twice", gv->name);
        } else if (s->rank != gv->rank) {
            st = tern_error_set(err, TERN_ERR_INVALID, "compile: %s%sshape %s does not match input '%s' of shape %s "
                                "(rank %d, the input's is %d)", s->source ? s->source : "", s->source ? ": " : "",
                                have, gv->name, want, s->rank, gv->rank);
        }
        given[i] = s;
        for (int d = 0; d < gv->rank && !st; d++) {
            char from[192];
            snprintf(from, sizeof from, "input '%.60s'%.100s", gv->name, src);
            if (s->dims[d] < 0)
                st = tern_error_set(err, TERN_ERR_RANGE, "compile: input '%s'%s: dimension %d is negative (%lld)",
                                    gv->name, src, d, (long long)s->dims[d]);
            else if (gv->dims[d] >= 0 && gv->dims[d] != s->dims[d])
                st = tern_error_set(err, TERN_ERR_INVALID, "compile: %s%sshape %s does not match input '%s' of shape "
                                    "%s (dimension %d is fixed at %lld)", s->source ? s->source : "",
                                    s->source ? ": " : "", have, gv->name, want, d, (long long)gv->dims[d]);
            else if (gv->dims[d] < 0 && gv->dim_names[d])
                st = bind_dim(t, &n, gv->dim_names[d], s->dims[d], from, err);
        }
    }
    for (int i = 0; i < nin && !st; i++) {
        const tern_graph_value *gv = tern_graph_value_at(g, tern_graph_input_id(g, i));
        for (int d = 0; d < gv->rank; d++) {
            out[i][d] = gv->dims[d] >= 0 ? gv->dims[d] : given[i] ? given[i]->dims[d] : o->default_dim;
            for (int k = 0; k < n && gv->dims[d] < 0 && gv->dim_names[d]; k++)
                if (!strcmp(t[k].name, gv->dim_names[d]))
                    out[i][d] = t[k].value;
        }
    }
    free(t);
    free(given);
    return st;
}

/* own: the graph is the compiler's (tern_compile_onnx), so weights may leave it as they reach the device. */
static tern_status compile_graph(tern_graph *g, const tern_compile_opts *o_in, int own, tern_exe *out,
                                 tern_compile_report *rep, tern_error *err)
{
    tern_compile_opts o;
    if (o_in)
        o = *o_in;
    else
        tern_compile_opts_default(&o);
    if (!o.machine)
        o.machine = "trn1.2xlarge";
    if (o.cores == 0)
        o.cores = 1;
    if (o.default_dim <= 0)
        o.default_dim = 1;
    if (o.matmul_dtype != TERN_DTYPE_BF16 && o.matmul_dtype != TERN_DTYPE_FP32 && o.matmul_dtype != TERN_DTYPE_FP8_E4M3)
        return tern_error_set(err, TERN_ERR_INVALID, "compile: matmul dtype %s not supported (bf16, fp32, fp8_e4m3)",
                              tern_dtype_name(o.matmul_dtype));
    tern_exe_init(out);
    tern_compile_report r;
    memset(&r, 0, sizeof r);
    r.nodes_in = tern_graph_node_count(g);
    /* Bind symbolic input dims; with a batch split, each core sees its share of axis 0. */
    int64_t(*bound)[TERN_GRAPH_MAX_RANK] = calloc((size_t)tern_graph_input_count(g) + 1, sizeof *bound);
    if (!bound)
        return tern_error_set(err, TERN_ERR_NOMEM, "compile: out of memory");
    for (int i = 0; i < tern_graph_input_count(g); i++) {
        const tern_graph_value *gv = tern_graph_value_at(g, tern_graph_input_id(g, i));
        if (gv->rank < 0) {
            free(bound);
            return tern_error_set(err, TERN_ERR_INVALID, "compile: input '%s' has an unknown rank", gv->name);
        }
    }
    tern_status bst = resolve_input_dims(g, &o, bound, err);
    for (int i = 0; i < tern_graph_input_count(g) && !bst; i++) {
        const tern_graph_value *gv = tern_graph_value_at(g, tern_graph_input_id(g, i));
        int64_t dims[TERN_GRAPH_MAX_RANK];
        for (int d = 0; d < gv->rank; d++)
            dims[d] = bound[i][d];
        if (o.cores > 1) {
            if (gv->rank == 0 || dims[0] % o.cores) {
                bst = tern_error_set(err, TERN_ERR_INVALID,
                                     "compile: input '%s': batch %lld does not split evenly over %u cores", gv->name,
                                     gv->rank ? (long long)dims[0] : 0LL, o.cores);
                break;
            }
            /* the model's shapes are only re-derived for a symbolic batch: a fixed one is baked into its
             * Reshape constants, so splitting it would silently compute something else */
            if (gv->dims[0] >= 0) {
                bst = tern_error_set(err, TERN_ERR_UNSUPPORTED,
                                     "compile: input '%s' has a fixed batch of %lld; --cores %u splits only a symbolic "
                                     "batch dimension (export with dynamic_axes and give the batch with --dim)",
                                     gv->name, (long long)gv->dims[0], o.cores);
                break;
            }
            dims[0] /= o.cores;
        }
        bst = tern_graph_set_input_shape(g, gv->name, gv->rank, dims, err);
    }
    free(bound);
    if (bst)
        return bst;
    tern_status st = tern_graph_optimize_flags(g,
                                              (o.no_attention_fusion ? TERN_GRAPH_NO_ATTENTION_FUSION : 0u) |
                                                  (o.no_attention_layouts ? TERN_GRAPH_NO_ATTENTION_LAYOUTS : 0u) |
                                                  (o.no_residual_fusion ? TERN_GRAPH_NO_RESIDUAL_FUSION : 0u) |
                                                  (o.no_layernorm_fusion ? TERN_GRAPH_NO_LAYERNORM_FUSION : 0u) |
                                                  (o.no_fusion ? TERN_GRAPH_NO_FUSION : 0u),
                                              err);
    if (st)
        return st;
    r.nodes_after_opt = tern_graph_node_count(g);
    for (int i = 0; i < r.nodes_after_opt; i++) { /* what the attention fusion made (tern compile prints it) */
        const tern_graph_node *n = tern_graph_node_at(g, i);
        r.fused_attention += n->op_id == TERN_GOP_ATTENTION;
    }
    compile_ctx c;
    memset(&c, 0, sizeof c);
    c.g = g;
    c.o = &o;
    c.err = err;
    c.release_constants = own;
    /* a cluster (NxINSTANCE, a cluster file) compiles for the core of the instance it repeats */
    char base[512];
    unsigned insts = 1, cl_cores = 0;
    if ((st = tern_machine_spec_base(o.machine, base, sizeof base, &insts, &cl_cores, err)) ||
        (st = tern_core_config_load(base, &c.cfg, err)))
        return st;
    /* the batch split spans the cores of a chip, the chips of an instance or the instances of a cluster (the
     * runtime runs them as ranks) */
    unsigned have = c.cfg.timing.cores_per_chip ? c.cfg.timing.cores_per_chip : 1;
    if (cl_cores > have)
        have = cl_cores;
    if (o.cores > have) {
        tern_machine *mm = NULL;
        tern_peaks pk;
        if (tern_machine_load(base, &mm, err) == TERN_OK) {
            tern_machine_peaks(mm, &pk);
            tern_machine_free(mm);
            have = pk.cores > have ? pk.cores : have;
        }
        if (o.cores > have)
            return tern_error_set(err, TERN_ERR_INVALID,
                                  "compile: %u cores requested; %s has %u (%u per chip)", o.cores, o.machine, have,
                                  c.cfg.timing.cores_per_chip);
    }
    if (o.hbm_io_align && (o.hbm_io_align < 64 || (o.hbm_io_align & (o.hbm_io_align - 1))))
        return tern_error_set(err, TERN_ERR_INVALID, "compile: hbm_io_align %llu: not 0 or a power of two >= 64",
                              (unsigned long long)o.hbm_io_align);
    if ((st = tern_kernel_create(&c.cfg, "model", &c.k, err)))
        return st;
    tern_kernel_set_io_align(c.k, o.hbm_io_align);
    st = build_core(&c, g);
    tern_exe_io *ins = NULL, *outs = NULL;
    if (!st) {
        int nin = tern_graph_input_count(g), nout = tern_graph_output_count(g);
        ins = calloc((size_t)nin + 1, sizeof *ins);
        outs = calloc((size_t)nout + 1, sizeof *outs);
        if (!ins || !outs)
            st = tern_error_set(err, TERN_ERR_NOMEM, "compile: out of memory");
        for (int pass = 0; pass < 2 && !st; pass++) {
            int n = pass ? nout : nin;
            for (int i = 0; i < n; i++) {
                int id = pass ? tern_graph_output_id(g, i) : tern_graph_input_id(g, i);
                const tern_graph_value *gv = tern_graph_value_at(g, id);
                tern_exe_io *io = pass ? &outs[i] : &ins[i];
                tern_compile_io_name(gv->name, io->name, sizeof io->name);
                io->model_name = gv->name; /* borrowed: tern_exe_from_kernels copies it */
                io->dtype = c.v[id].dt;
                io->rank = (unsigned)gv->rank;
                for (int d = 0; d < gv->rank; d++)
                    io->shape[d] = gv->dims[d] * (d == 0 ? (int64_t)o.cores : 1);
                io->split_batch = o.cores > 1;
                io->text_bytes = gv->type == TERN_ELEM_STRING ? TERN_EXE_TEXT_CELL : 0;
                if (pass && !c.v[id].placed)
                    st = tern_error_set(err, TERN_ERR_INVALID, "compile: output '%s' is never computed", gv->name);
                if (gv->rank == 0 && o.cores > 1)
                    st = tern_error_set(err, TERN_ERR_INVALID, "compile: scalar '%s' cannot be split over cores",
                                        gv->name);
            }
        }
        if (!st) {
            tern_kernel **ks = malloc(sizeof *ks * o.cores);
            if (!ks) {
                st = tern_error_set(err, TERN_ERR_NOMEM, "compile: out of memory");
            } else {
                for (unsigned k = 0; k < o.cores; k++)
                    ks[k] = c.k; /* the same program on every core, each with its share of the batch */
                char meta[512];
                snprintf(meta, sizeof meta,
                         "{\"compiler\":\"tern %s\",\"machine\":\"%s\",\"matmul_dtype\":\"%s\",\"cores\":%u,"
                         "\"model_flops\":%.17g}",
                         tern_version(), o.machine, tern_dtype_name(o.matmul_dtype), o.cores,
                         c.model_flops * o.cores);
                /* the kernel is freed below: its constants move into the executable, not copied */
                st = tern_exe_from_kernels_move(out, o.machine, ks, o.cores, ins, (size_t)nin, outs, (size_t)nout,
                                                meta, err);
                free(ks);
            }
        }
    }
    if (o.explain) { /* the rows go to the report even on failure: the failing node's says why */
        if (st && c.nrules > 0 && c.rules[c.nrules - 1].node == c.node)
            snprintf(c.rules[c.nrules - 1].why, sizeof c.rules[c.nrules - 1].why, "%.255s", err->msg);
        if (rep) {
            if (st)
                memset(rep, 0, sizeof *rep);
            r.rules = rep->rules = c.rules;
            r.num_rules = rep->num_rules = c.nrules;
        } else {
            free(c.rules);
        }
    }
    cc_fuse_counts(&c, &r.fused_elementwise, &r.elementwise_groups);
    cc_fuse_free(&c);
    cc_msum_counts(&c, &r.matmul_sums, &r.matmul_sum_products);
    cc_msum_free(&c);
    r.fused_conv_relu = c.conv_relus;
    r.fused_conv_add = c.conv_adds;
    r.fused_conv_silu = c.conv_silus;
    r.fused_conv_clip = c.conv_clips;
    r.fused_bn_relu = c.bn_relus;
    r.concat_in_place = c.concats_in_place;
    free(c.conv_epi);
    free(c.homes);
    if (!st) {
        r.lowered = c.lowered;
        r.lowered_empty = c.lowered_empty;
        r.aliased = c.aliased;
        r.instructions = tern_program_instr_count(tern_kernel_program(c.k));
        r.hbm_bytes = tern_kernel_hbm_bytes(c.k);
        for (size_t i = 0; i < out->num_consts; i++)
            if (out->consts[i].core == 0)
                r.weight_bytes += out->consts[i].bytes;
        r.model_flops = c.model_flops * o.cores;
        if (rep)
            *rep = r;
    }
    free(ins);
    free(outs);
    free(c.v);
    tern_kernel_free(c.k);
    return st;
}

tern_status tern_compile(tern_graph *g, const tern_compile_opts *o, tern_exe *out, tern_compile_report *rep,
                         tern_error *err)
{
    return compile_graph(g, o, 0, out, rep, err);
}

tern_status tern_compile_onnx(const char *path, const tern_compile_opts *o, tern_exe *out, tern_compile_report *rep,
                              tern_error *err)
{
    tern_graph *g = NULL;
    tern_status st = tern_graph_load_onnx(path, &g, err);
    if (st)
        return st;
    st = compile_graph(g, o, 1, out, rep, err);
    tern_graph_free(g);
    return st;
}
