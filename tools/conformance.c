/* ONNX backend node-test runner: every case ONNX's generators write (DIR/test_x/model.onnx with
 * test_data_set_0/input_N.pb and output_N.pb, serialized TensorProtos) is imported, compiled for the simulated
 * trn1 NeuronCore (FP32 matmuls, so comparisons can be tight), run there and compared with ONNX's expected
 * outputs. Each case runs in its own child process under a time limit, so a crash or a hang is one FAIL, not the
 * end of the run. Results: PASS (ran on the device and matched; a node whose outputs all have zero elements is
 * lowered to nothing and counts as lowered), FAIL (mismatch, or an error, crash or timeout
 * after the importer and compiler accepted the model, or a compiler error that is not "unsupported"),
 * UNSUPPORTED (the importer or compiler said the op or a type is not supported, an output's shape depends on
 * run-time data, the case's data contradicts its model, or the graph was computed entirely on the host by
 * constant folding). A per-op table follows, and the last line is
 * `onnx_node_tests: P passed, F failed, U unsupported`. The exit status is 1 when a case of an op the compiler
 * issue requires (MatMul, Gemm, Conv, elementwise ops and activations, Softmax, ...) FAILs, else 0 (its
 * unsupported cases are counted and listed, not failed).
 * docs/conformance.md is the long form. */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "onnx.pb-c.h"
#include "tern/compiler.h"
#include "tern/graph.h"
#include "tern/runtime.h"

#define MACHINE "trn1.2xlarge"
#define MAX_IO 32
#define MSG_MAX 480

/* ---- options ---- */

typedef struct {
    const char *dir;     /* directory holding test_* case directories */
    const char *filter;  /* run only cases whose name contains one of these (comma-separated) */
    const char *log;     /* per-case log file */
    int jobs;
    int timeout_s;
    int verbose;
} opts;

/* snprintf into a path buffer; a path that does not fit is cut (and then not found). */
static void path_fmt(char *out, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void path_fmt(char *out, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(out, len, fmt, ap);
    va_end(ap);
    if (n < 0 && len)
        out[0] = '\0';
}

/* ---- expected / input tensors: TensorProto -> doubles ---- */

typedef struct {
    int type; /* ONNX TensorProto.DataType */
    int rank;
    int64_t dims[TERN_GRAPH_MAX_RANK];
    size_t n;
    double *v;
    char **s; /* STRING tensors: n NUL-terminated texts (v unused) */
    char name[128];
} arr;

static uint8_t *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 1 << 16, n = 0;
    uint8_t *b = malloc(cap);
    while (b) {
        size_t r = fread(b + n, 1, cap - n, f);
        n += r;
        if (n < cap)
            break;
        uint8_t *nb = realloc(b, cap * 2);
        if (!nb) {
            free(b);
            b = NULL;
            break;
        }
        b = nb;
        cap *= 2;
    }
    fclose(f);
    *len = n;
    return b;
}

static double half_to_double(uint16_t h)
{
    float f;
    tern_convert_to_f32(&f, TERN_DTYPE_FP16, &h, 1, NULL);
    return f;
}

static double bf16_to_double(uint16_t h)
{
    float f;
    tern_convert_to_f32(&f, TERN_DTYPE_BF16, &h, 1, NULL);
    return f;
}

/* Parses a serialized TensorProto; returns 0 on success, else writes why into msg. */
static int load_tensor(const char *path, arr *a, char *msg, size_t msz)
{
    memset(a, 0, sizeof *a);
    size_t len = 0;
    uint8_t *buf = read_file(path, &len);
    if (!buf) {
        snprintf(msg, msz, "cannot read %s", path);
        return 1;
    }
    Onnx__TensorProto *t = onnx__tensor_proto__unpack(NULL, len, buf);
    free(buf);
    if (!t) {
        snprintf(msg, msz, "%s is not a TensorProto (a sequence or optional value?)", path);
        return 1;
    }
    int rc = 1;
    a->type = t->data_type;
    if (t->name)
        snprintf(a->name, sizeof a->name, "%s", t->name);
    if (t->n_dims > TERN_GRAPH_MAX_RANK) {
        snprintf(msg, msz, "%s: rank %zu", path, t->n_dims);
        goto done;
    }
    a->rank = (int)t->n_dims;
    a->n = 1;
    for (size_t d = 0; d < t->n_dims; d++) {
        a->dims[d] = t->dims[d];
        a->n *= (size_t)t->dims[d];
    }
    a->v = malloc(sizeof(double) * (a->n ? a->n : 1));
    if (!a->v) {
        snprintf(msg, msz, "out of memory");
        goto done;
    }
    size_t es = tern_elem_size((tern_elem_type)a->type);
    int raw = t->has_raw_data && t->raw_data.len > 0;
    if (a->type == TERN_ELEM_STRING) { /* string_data: one text per element */
        if (t->n_string_data != a->n || !(a->s = calloc(a->n ? a->n : 1, sizeof *a->s))) {
            snprintf(msg, msz, "%s: %zu strings for %zu elements", path, t->n_string_data, a->n);
            goto done;
        }
        for (size_t i = 0; i < a->n; i++) {
            const ProtobufCBinaryData *b = &t->string_data[i];
            if (memchr(b->data, 0, b->len) || !(a->s[i] = malloc(b->len + 1))) {
                snprintf(msg, msz, "%s: string %zu holds a NUL byte", path, i);
                goto done;
            }
            memcpy(a->s[i], b->data, b->len);
            a->s[i][b->len] = '\0';
        }
        rc = 0;
        goto done;
    }
    if (es == 0) {
        snprintf(msg, msz, "%s: element type %d (%s) has no numeric data", path, a->type,
                 tern_elem_name((tern_elem_type)a->type));
        goto done;
    }
    if (raw && t->raw_data.len != a->n * es) {
        snprintf(msg, msz, "%s: raw_data of %zu bytes for %zu elements", path, t->raw_data.len, a->n);
        goto done;
    }
    for (size_t i = 0; i < a->n; i++) {
        const uint8_t *p = raw ? t->raw_data.data + i * es : NULL;
        double v = 0;
        size_t have = 0;
        switch (a->type) {
        case TERN_ELEM_FLOAT: {
            float f = 0;
            if (p)
                memcpy(&f, p, 4);
            else if (i < (have = t->n_float_data))
                f = t->float_data[i];
            v = f;
            break;
        }
        case TERN_ELEM_DOUBLE:
            if (p)
                memcpy(&v, p, 8);
            else if (i < (have = t->n_double_data))
                v = t->double_data[i];
            break;
        case TERN_ELEM_INT64: {
            int64_t x = 0;
            if (p)
                memcpy(&x, p, 8);
            else if (i < (have = t->n_int64_data))
                x = t->int64_data[i];
            v = (double)x;
            break;
        }
        case TERN_ELEM_UINT32:
        case TERN_ELEM_UINT64: {
            uint64_t x = 0;
            if (p)
                memcpy(&x, p, es);
            else if (i < (have = t->n_uint64_data))
                x = t->uint64_data[i];
            v = (double)x;
            break;
        }
        case TERN_ELEM_FLOAT16:
        case TERN_ELEM_BFLOAT16: {
            uint16_t h = 0;
            if (p)
                memcpy(&h, p, 2);
            else if (i < (have = t->n_int32_data))
                h = (uint16_t)t->int32_data[i];
            v = a->type == TERN_ELEM_FLOAT16 ? half_to_double(h) : bf16_to_double(h);
            break;
        }
        default: { /* int32, int16, int8, uint16, uint8, bool: int32_data or raw little-endian */
            int64_t x = 0;
            if (p) {
                switch (a->type) {
                case TERN_ELEM_INT8: x = (int8_t)p[0]; break;
                case TERN_ELEM_UINT8:
                case TERN_ELEM_BOOL: x = p[0]; break;
                case TERN_ELEM_INT16: { int16_t s; memcpy(&s, p, 2); x = s; break; }
                case TERN_ELEM_UINT16: { uint16_t s; memcpy(&s, p, 2); x = s; break; }
                default: { int32_t s; memcpy(&s, p, 4); x = s; break; }
                }
            } else if (i < (have = t->n_int32_data)) {
                x = t->int32_data[i];
            }
            v = (double)x;
            break;
        }
        }
        if (!p && i >= have) {
            snprintf(msg, msz, "%s: %zu elements of data for %zu", path, have, a->n);
            goto done;
        }
        a->v[i] = v;
    }
    rc = 0;
done:
    onnx__tensor_proto__free_unpacked(t, NULL);
    return rc;
}

static void arr_free(arr *a)
{
    if (a->s)
        for (size_t i = 0; i < a->n; i++)
            free(a->s[i]);
    free(a->s);
    a->s = NULL;
    free(a->v);
    a->v = NULL;
}

/* ---- one case (runs in a child process) ---- */

enum { R_PASS, R_FAIL, R_UNSUP };
static const char *const result_name[] = {"PASS", "FAIL", "UNSUPPORTED"};

typedef struct {
    int result;
    char msg[MSG_MAX];
} outcome;

static int set_outcome(outcome *o, int r, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int set_outcome(outcome *o, int r, const char *fmt, ...)
{
    o->result = r;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(o->msg, sizeof o->msg, fmt, ap);
    va_end(ap);
    for (char *p = o->msg; *p; p++)
        if (*p == '\n' || *p == '\t')
            *p = ' ';
    return r;
}

static int count_pb(const char *dir, const char *prefix)
{
    int n = 0;
    char path[4096];
    for (;;) {
        path_fmt(path, sizeof path, "%s/%s_%d.pb", dir, prefix, n);
        struct stat st;
        if (stat(path, &st))
            return n;
        n++;
    }
}

/* Writes host values (doubles) into a device buffer of dtype dt. */
static int to_device(const arr *a, tern_dtype dt, void *out)
{
    size_t es = tern_dtype_size(dt);
    if (tern_dtype_is_float(dt)) {
        float *f = malloc(sizeof(float) * (a->n ? a->n : 1));
        if (!f)
            return 1;
        for (size_t i = 0; i < a->n; i++)
            f[i] = (float)a->v[i];
        tern_status st = tern_convert_from_f32(dt, out, f, a->n, NULL, NULL);
        free(f);
        return st != TERN_OK;
    }
    for (size_t i = 0; i < a->n; i++) {
        double v = a->v[i];
        int64_t x = v > 9.2e18 ? INT64_MAX : v < -9.2e18 ? INT64_MIN : (int64_t)v;
        uint8_t *p = (uint8_t *)out + i * es;
        switch (dt) {
        case TERN_DTYPE_INT8: { int8_t s = (int8_t)x; memcpy(p, &s, 1); break; }
        case TERN_DTYPE_UINT8: { uint8_t s = (uint8_t)x; memcpy(p, &s, 1); break; }
        case TERN_DTYPE_INT16: { int16_t s = (int16_t)x; memcpy(p, &s, 2); break; }
        case TERN_DTYPE_UINT16: { uint16_t s = (uint16_t)x; memcpy(p, &s, 2); break; }
        case TERN_DTYPE_INT32: {
            int32_t s = x > INT32_MAX ? INT32_MAX : x < INT32_MIN ? INT32_MIN : (int32_t)x;
            memcpy(p, &s, 4);
            break;
        }
        case TERN_DTYPE_UINT32: {
            uint32_t s = x > (int64_t)UINT32_MAX ? UINT32_MAX : x < 0 ? 0 : (uint32_t)x;
            memcpy(p, &s, 4);
            break;
        }
        default: return 1;
        }
    }
    return 0;
}

/* Texts into the device's fixed cells (NUL-padded); a text longer than a cell fails. */
static int text_to_device(const arr *a, unsigned cell, void *out)
{
    memset(out, 0, a->n * cell);
    for (size_t i = 0; i < a->n; i++) {
        size_t len = strlen(a->s[i]);
        if (len > cell)
            return 1;
        memcpy((char *)out + i * cell, a->s[i], len);
    }
    return 0;
}

static void from_device(const void *raw, tern_dtype dt, size_t n, double *out)
{
    size_t es = tern_dtype_size(dt);
    for (size_t i = 0; i < n; i++) {
        const uint8_t *p = (const uint8_t *)raw + i * es;
        double v = 0;
        switch (dt) {
        case TERN_DTYPE_INT8: v = (int8_t)p[0]; break;
        case TERN_DTYPE_UINT8: v = p[0]; break;
        case TERN_DTYPE_INT16: { int16_t s; memcpy(&s, p, 2); v = s; break; }
        case TERN_DTYPE_UINT16: { uint16_t s; memcpy(&s, p, 2); v = s; break; }
        case TERN_DTYPE_INT32: { int32_t s; memcpy(&s, p, 4); v = s; break; }
        case TERN_DTYPE_UINT32: { uint32_t s; memcpy(&s, p, 4); v = s; break; }
        default: {
            float f = 0;
            tern_convert_to_f32(&f, dt, p, 1, NULL);
            v = f;
            break;
        }
        }
        out[i] = v;
    }
}

/* Tolerances: ONNX's backend-test defaults (rtol 1e-3, atol 1e-7). Two exceptions, for outputs stored in a
 * narrower format than the reference computed in: float16 (11 significant bits) gets rtol 2^-10, one float16 ulp;
 * bfloat16 (8 bits) gets rtol 2^-7, one bfloat16 ulp, because ONNX 1.12's reference casts to bfloat16 by
 * truncation while tern (like ONNX >= 1.14 and the hardware) rounds to nearest even. */
static int compare(const arr *e, const double *got, tern_dtype got_dt, char *msg, size_t msz)
{
    int is_float = tern_elem_is_float((tern_elem_type)e->type);
    double rtol = 1e-3, atol = 1e-7;
    if (e->type == TERN_ELEM_FLOAT16 || got_dt == TERN_DTYPE_FP16)
        rtol = 1.0 / 1024;
    if (e->type == TERN_ELEM_BFLOAT16 || got_dt == TERN_DTYPE_BF16)
        rtol = 1.0 / 128;
    size_t bad = 0, first = 0;
    double worst = 0;
    for (size_t i = 0; i < e->n; i++) {
        double x = e->v[i], y = got[i];
        int ok;
        if (!is_float)
            ok = x == y;
        else if (isnan(x))
            ok = isnan(y);
        else if (isinf(x))
            ok = x == y;
        else
            ok = fabs(x - y) <= atol + rtol * fabs(x);
        if (!ok) {
            if (!bad)
                first = i;
            bad++;
            double d = fabs(x - y);
            if (isnan(d) || d > worst)
                worst = isnan(d) ? INFINITY : d;
        }
    }
    if (bad)
        snprintf(msg, msz, "%zu of %zu elements differ; first [%zu]: expected %.9g, got %.9g; max |diff| %.3g", bad,
                 e->n, first, e->v[first], got[first], worst);
    return bad != 0;
}

/* Attribute-like inputs: operands ONNX turned from attributes into inputs (opsets 10-13) that fix shapes, axes
 * or scalar parameters. A static-shape compiler (neuronx-cc likewise) needs them at compile time; exporters emit
 * them as constants, while the node tests feed them as inputs. The runner binds such inputs to their test data as
 * initializers; data operands (Gather indices, Pow exponents, Where conditions...) always stay run-time inputs. */
static int param_slot(const char *op, int j)
{
    if (j < 0 || j > 30)
        return 0;
    return (tern_op_info(tern_op_lookup("", op))->const_inputs >> j) & 1u; /* the registry's CONST_MASK */
}

/* The model's fed inputs (graph inputs that are not initializers), in order, and which are attribute-like
 * (param_slot). When some are, *packed receives the model re-serialised with those inputs turned into
 * initializers holding the test data. Returns the number of fed inputs, or -1 when the model does not parse
 * (the importer then reports why). */
static int prepare_model(const uint8_t *bytes, size_t len, const char *data_dir, int nin, char (*names)[128],
                         int *frozen, uint8_t **packed, size_t *packed_len, char *frozen_list, size_t fl_len)
{
    *packed = NULL;
    frozen_list[0] = '\0';
    Onnx__ModelProto *m = onnx__model_proto__unpack(NULL, len, bytes);
    if (!m || !m->graph) {
        if (m)
            onnx__model_proto__free_unpacked(m, NULL);
        return -1;
    }
    Onnx__GraphProto *gp = m->graph;
    int feeds[MAX_IO], nfeed = 0;
    for (size_t i = 0; i < gp->n_input; i++) {
        int init = 0;
        for (size_t j = 0; j < gp->n_initializer && !init; j++)
            init = gp->initializer[j]->name && !strcmp(gp->initializer[j]->name, gp->input[i]->name);
        if (!init && nfeed < MAX_IO)
            feeds[nfeed++] = (int)i;
    }
    int nfrozen = 0;
    for (int k = 0; k < nfeed; k++) {
        const char *nm = gp->input[feeds[k]]->name ? gp->input[feeds[k]]->name : "";
        snprintf(names[k], 128, "%s", nm);
        frozen[k] = 0;
        for (size_t i = 0; i < gp->n_node && !frozen[k]; i++) {
            const Onnx__NodeProto *nd = gp->node[i];
            if (nd->domain && nd->domain[0] && strcmp(nd->domain, "ai.onnx"))
                continue;
            for (size_t j = 0; j < nd->n_input && !frozen[k]; j++)
                frozen[k] = !strcmp(nd->input[j], nm) && param_slot(nd->op_type, (int)j);
        }
        nfrozen += frozen[k];
    }
    if (nfrozen && nfeed == nin) {
        Onnx__TensorProto *ts[MAX_IO];
        char *old_names[MAX_IO];
        int nt = 0, ok = 1;
        for (int k = 0; k < nfeed && ok; k++) {
            if (!frozen[k])
                continue;
            char path[4096];
            path_fmt(path, sizeof path, "%s/input_%d.pb", data_dir, k);
            size_t tl = 0;
            uint8_t *tb = read_file(path, &tl);
            ts[nt] = tb ? onnx__tensor_proto__unpack(NULL, tl, tb) : NULL;
            free(tb);
            if (!ts[nt]) {
                ok = 0;
                break;
            }
            old_names[nt] = ts[nt]->name;
            ts[nt]->name = names[k];
            nt++;
            snprintf(frozen_list + strlen(frozen_list), fl_len - strlen(frozen_list), "%s%s",
                     frozen_list[0] ? "," : "", names[k]);
        }
        Onnx__ValueInfoProto **old_in = gp->input, **new_in = NULL;
        Onnx__TensorProto **old_init = gp->initializer, **new_init = NULL;
        size_t old_nin = gp->n_input, old_ninit = gp->n_initializer;
        if (ok) {
            new_in = malloc(sizeof *new_in * (old_nin ? old_nin : 1));
            new_init = malloc(sizeof *new_init * (old_ninit + (size_t)nt));
            ok = new_in && new_init;
        }
        if (ok) {
            size_t ni = 0;
            for (size_t i = 0; i < old_nin; i++) {
                int drop = 0;
                for (int k = 0; k < nfeed; k++)
                    drop |= frozen[k] && feeds[k] == (int)i;
                if (!drop)
                    new_in[ni++] = old_in[i];
            }
            if (old_ninit)
                memcpy(new_init, old_init, sizeof *new_init * old_ninit);
            memcpy(new_init + old_ninit, ts, sizeof *ts * (size_t)nt);
            gp->input = new_in;
            gp->n_input = ni;
            gp->initializer = new_init;
            gp->n_initializer = old_ninit + (size_t)nt;
            size_t pl = onnx__model_proto__get_packed_size(m);
            *packed = malloc(pl ? pl : 1);
            if (*packed)
                *packed_len = onnx__model_proto__pack(m, *packed);
            gp->input = old_in; /* restore what free_unpacked owns */
            gp->n_input = old_nin;
            gp->initializer = old_init;
            gp->n_initializer = old_ninit;
        }
        free(new_in);
        free(new_init);
        for (int t = 0; t < nt; t++) {
            ts[t]->name = old_names[t];
            onnx__tensor_proto__free_unpacked(ts[t], NULL);
        }
        if (!*packed)
            for (int k = 0; k < nfeed; k++)
                frozen[k] = 0;
    } else {
        for (int k = 0; k < nfeed; k++)
            frozen[k] = 0;
    }
    onnx__model_proto__free_unpacked(m, NULL);
    return nfeed;
}

/* ONNX 1.12's tests store bfloat16 data as uint16 bit patterns (numpy has no bfloat16). */
static void bf16_bits_to_values(arr *a)
{
    for (size_t i = 0; i < a->n; i++)
        a->v[i] = bf16_to_double((uint16_t)a->v[i]);
    a->type = TERN_ELEM_BFLOAT16;
}

static int run_case(const char *case_dir, outcome *o)
{
    char path[4096], data_dir[4096];
    path_fmt(path, sizeof path, "%s/model.onnx", case_dir);
    path_fmt(data_dir, sizeof data_dir, "%s/test_data_set_0", case_dir);
    tern_error err;
    memset(&err, 0, sizeof err);
    tern_graph *g = NULL;
    arr in[MAX_IO], out[MAX_IO];
    int nin = count_pb(data_dir, "input"), nout = count_pb(data_dir, "output");
    int loaded_in = 0, loaded_out = 0;
    tern_exe exe;
    tern_exe_init(&exe);
    tern_rt *rt = NULL;
    int r = R_FAIL;
    char in_names[MAX_IO][128], frozen_list[256];
    int frozen[MAX_IO] = {0};
    if (nin > MAX_IO || nout > MAX_IO || nout == 0) {
        r = set_outcome(o, R_FAIL, "%d inputs, %d outputs in the test data", nin, nout);
        goto done;
    }
    size_t mlen = 0, plen = 0;
    uint8_t *mbytes = read_file(path, &mlen), *packed = NULL;
    if (!mbytes) {
        r = set_outcome(o, R_FAIL, "cannot read %s", path);
        goto done;
    }
    int nfeed = prepare_model(mbytes, mlen, data_dir, nin, in_names, frozen, &packed, &plen, frozen_list,
                              sizeof frozen_list);
    tern_status lst = packed ? tern_graph_load_onnx_buffer(packed, plen, &g, &err)
                             : tern_graph_load_onnx_buffer(mbytes, mlen, &g, &err);
    free(mbytes);
    free(packed);
    if (lst) {
        r = set_outcome(o, err.code == TERN_ERR_UNSUPPORTED ? R_UNSUP : R_FAIL, "import: %s", err.msg);
        goto done;
    }
    if (nfeed != nin) {
        r = set_outcome(o, R_FAIL, "the model has %d inputs, the test data %d", nfeed, nin);
        goto done;
    }
    char msg[MSG_MAX];
    for (; loaded_in < nin; loaded_in++) {
        path_fmt(path, sizeof path, "%s/input_%d.pb", data_dir, loaded_in);
        if (load_tensor(path, &in[loaded_in], msg, sizeof msg)) {
            arr_free(&in[loaded_in]);
            r = set_outcome(o, R_UNSUP, "test data: %s", msg);
            goto done;
        }
    }
    for (; loaded_out < nout; loaded_out++) {
        path_fmt(path, sizeof path, "%s/output_%d.pb", data_dir, loaded_out);
        if (load_tensor(path, &out[loaded_out], msg, sizeof msg)) {
            arr_free(&out[loaded_out]);
            r = set_outcome(o, R_UNSUP, "test data: %s", msg);
            goto done;
        }
    }
    for (int k = 0; k < nin; k++) {
        if (frozen[k])
            continue;
        int id = tern_graph_find_value(g, in_names[k]);
        const tern_graph_value *gv = tern_graph_value_at(g, id);
        if (!gv || !(gv->flags & TERN_VALUE_INPUT)) {
            r = set_outcome(o, R_FAIL, "input '%s' is not an input of the imported graph", in_names[k]);
            goto done;
        }
        if (gv->type == TERN_ELEM_BFLOAT16 && in[k].type == TERN_ELEM_UINT16)
            bf16_bits_to_values(&in[k]);
        if ((int)gv->type != in[k].type && gv->type != TERN_ELEM_UNDEFINED) {
            r = set_outcome(o, R_FAIL, "input '%s' is %s in the model, %s in the data", gv->name,
                            tern_elem_name(gv->type), tern_elem_name((tern_elem_type)in[k].type));
            goto done;
        }
        if (tern_graph_set_input_shape(g, gv->name, in[k].rank, in[k].dims, &err)) {
            /* The data contradicts the model's own declaration (ONNX 1.12's CastLike bfloat16 cases): the case
             * cannot be run as written, which is no fault of tern's. */
            r = set_outcome(o, R_UNSUP, "test data contradicts the model: %s", err.msg);
            goto done;
        }
    }
    for (int k = 0; k < nout; k++) { /* expected bfloat16 outputs: bit patterns as well */
        int id = k < tern_graph_output_count(g) ? tern_graph_output_id(g, k) : -1;
        const tern_graph_value *gv = id >= 0 ? tern_graph_value_at(g, id) : NULL;
        if (gv && gv->type == TERN_ELEM_BFLOAT16 && out[k].type == TERN_ELEM_UINT16)
            bf16_bits_to_values(&out[k]);
    }
    tern_compile_opts co;
    tern_compile_opts_default(&co);
    co.machine = MACHINE;
    co.matmul_dtype = TERN_DTYPE_FP32;
    tern_compile_report rep;
    memset(&rep, 0, sizeof rep);
    if (tern_compile(g, &co, &exe, &rep, &err)) {
        /* An op or type the compiler does not handle is reported as unsupported, and so is an output whose shape
         * depends on the data (NonZero, Compress, Range of run-time bounds): tern compiles static shapes only.
         * Any other compile error (a lowering failure on a supported op) is a bug: FAIL. */
        int unsup = err.code == TERN_ERR_UNSUPPORTED || strstr(err.msg, "unknown dimensions after shape inference");
        r = set_outcome(o, unsup ? R_UNSUP : R_FAIL, "compile: %s", err.msg);
        goto done;
    }
    if (rep.lowered == 0) { /* nodes lowered to nothing for zero-size outputs count as lowered: not here */
        r = set_outcome(o, R_UNSUP, "computed on the host by constant folding; nothing ran on the device");
        goto done;
    }
    tern_rt_options ro;
    memset(&ro, 0, sizeof ro);
    ro.mode = TERN_MODE_FUNCTIONAL;
    if (tern_rt_create(&exe, MACHINE, &ro, &rt, &err)) {
        r = set_outcome(o, R_FAIL, "runtime: %s", err.msg);
        goto done;
    }
    for (int k = 0; k < nin; k++) {
        if (frozen[k])
            continue;
        char io_name[TERN_TENSOR_NAME_MAX];
        tern_compile_io_name(in_names[k], io_name, sizeof io_name);
        const tern_exe_io *io = NULL;
        for (size_t i = 0; i < exe.num_inputs; i++)
            if (!strcmp(exe.inputs[i].name, io_name))
                io = &exe.inputs[i];
        if (!io)
            continue; /* an input the optimised graph no longer reads */
        if (tern_exe_io_elems(io) != in[k].n) {
            r = set_outcome(o, R_FAIL, "input '%s': executable wants %llu elements, data has %zu", in_names[k],
                            (unsigned long long)tern_exe_io_elems(io), in[k].n);
            goto done;
        }
        size_t bytes = (size_t)tern_exe_io_bytes(io);
        void *buf = malloc(bytes ? bytes : 1);
        if (buf && io->text_bytes && !in[k].s) {
            free(buf);
            r = set_outcome(o, R_FAIL, "input '%s': the executable wants text, the data is %s", in_names[k],
                            tern_elem_name((tern_elem_type)in[k].type));
            goto done;
        }
        if (!buf || (io->text_bytes ? text_to_device(&in[k], io->text_bytes, buf) : to_device(&in[k], io->dtype, buf))) {
            free(buf);
            r = set_outcome(o, R_FAIL, "input '%s': cannot convert to %s", in_names[k], tern_dtype_name(io->dtype));
            goto done;
        }
        tern_status st = tern_rt_set_input(rt, io->name, buf, bytes, &err);
        free(buf);
        if (st) {
            r = set_outcome(o, R_FAIL, "set input '%s': %s", in_names[k], err.msg);
            goto done;
        }
    }
    tern_run_stats stats;
    if (tern_rt_execute(rt, &stats, &err)) {
        r = set_outcome(o, R_FAIL, "execute: %s", err.msg);
        goto done;
    }
    if ((int)exe.num_outputs != nout) {
        r = set_outcome(o, R_FAIL, "the executable has %zu outputs, the test data %d", exe.num_outputs, nout);
        goto done;
    }
    for (int k = 0; k < nout; k++) {
        const tern_exe_io *io = &exe.outputs[k];
        if (out[k].name[0]) { /* match by name when the expected tensor carries one */
            char io_name[TERN_TENSOR_NAME_MAX];
            tern_compile_io_name(out[k].name, io_name, sizeof io_name);
            for (size_t i = 0; i < exe.num_outputs; i++)
                if (!strcmp(exe.outputs[i].name, io_name))
                    io = &exe.outputs[i];
        }
        int shape_ok = (int)io->rank == out[k].rank;
        for (int d = 0; shape_ok && d < out[k].rank; d++)
            shape_ok = io->shape[d] == out[k].dims[d];
        if (!shape_ok || tern_exe_io_elems(io) != out[k].n) {
            char es[160] = "", gs[160] = "";
            for (int d = 0; d < out[k].rank; d++)
                snprintf(es + strlen(es), sizeof es - strlen(es), "%s%lld", d ? "," : "", (long long)out[k].dims[d]);
            for (unsigned d = 0; d < io->rank; d++)
                snprintf(gs + strlen(gs), sizeof gs - strlen(gs), "%s%lld", d ? "," : "", (long long)io->shape[d]);
            r = set_outcome(o, R_FAIL, "output '%s': shape [%s], expected [%s]", io->name, gs, es);
            goto done;
        }
        if (io->text_bytes || out[k].s) { /* text: every string exactly */
            if (!io->text_bytes || !out[k].s) {
                r = set_outcome(o, R_FAIL, "output '%s': %s expected, the executable gives %s", io->name,
                                out[k].s ? "text" : "numbers", io->text_bytes ? "text" : "numbers");
                goto done;
            }
            size_t tb = (size_t)tern_exe_io_bytes(io);
            char *cells = malloc(tb ? tb : 1);
            if (!cells || tern_rt_get_output(rt, io->name, cells, tb, &err)) {
                r = set_outcome(o, R_FAIL, "get output '%s': %s", io->name, cells ? err.msg : "no memory");
                free(cells);
                goto done;
            }
            for (size_t i = 0; i < out[k].n; i++) {
                const char *cell = cells + i * io->text_bytes;
                size_t len = strnlen(cell, io->text_bytes);
                if (len != strlen(out[k].s[i]) || memcmp(cell, out[k].s[i], len)) {
                    r = set_outcome(o, R_FAIL, "output '%s' element %zu: '%.*s', expected '%s'", io->name, i, (int)len,
                                    cell, out[k].s[i]);
                    free(cells);
                    goto done;
                }
            }
            free(cells);
            continue;
        }
        size_t bytes = out[k].n * tern_dtype_size(io->dtype);
        void *raw = malloc(bytes ? bytes : 1);
        double *got = malloc(sizeof(double) * (out[k].n ? out[k].n : 1));
        tern_status st = raw && got ? tern_rt_get_output(rt, io->name, raw, bytes, &err) : TERN_ERR_NOMEM;
        if (st) {
            free(raw);
            free(got);
            r = set_outcome(o, R_FAIL, "get output '%s': %s", io->name, st == TERN_ERR_NOMEM ? "no memory" : err.msg);
            goto done;
        }
        from_device(raw, io->dtype, out[k].n, got);
        free(raw);
        int bad = compare(&out[k], got, io->dtype, msg, sizeof msg);
        free(got);
        if (bad) {
            r = set_outcome(o, R_FAIL, "output '%s' (%s): %s", io->name, tern_dtype_name(io->dtype), msg);
            goto done;
        }
    }
    /* Nodes whose outputs all have zero elements are lowered to nothing (no instructions); they count as lowered,
     * so a graph of only such nodes passes once its empty outputs have the expected shapes. */
    char empty_note[96] = "";
    if (rep.lowered_empty)
        snprintf(empty_note, sizeof empty_note, " (%d with only zero-size outputs, lowered to nothing)",
                 rep.lowered_empty);
    r = set_outcome(o, R_PASS, "%d node(s) lowered%s, %zu instructions%s%s", rep.lowered, empty_note,
                    rep.instructions, frozen_list[0] ? "; compile-time inputs: " : "", frozen_list);
done:
    for (int k = 0; k < loaded_in; k++)
        arr_free(&in[k]);
    for (int k = 0; k < loaded_out; k++)
        arr_free(&out[k]);
    tern_rt_free(rt);
    tern_exe_free(&exe);
    tern_graph_free(g);
    return r;
}

/* ---- the op each case tests ---- */

typedef struct {
    char name[128];  /* test_xxx */
    char op[64];     /* table row */
    int result;
    char msg[MSG_MAX];
    double secs;
} test_case;

/* ops.tsv (written by scripts/conformance.sh from ONNX's operator schemas): "test_name<TAB>Op[<TAB>expanded]". */
static void op_from_manifest(const char *manifest, test_case *cs, int n)
{
    FILE *f = fopen(manifest, "r");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = '\0';
        char *tab = strchr(line, '\t');
        if (!tab)
            continue;
        *tab++ = '\0';
        char *tab2 = strchr(tab, '\t');
        int expanded = 0;
        if (tab2) {
            *tab2++ = '\0';
            expanded = !strcmp(tab2, "expanded");
        }
        for (int i = 0; i < n; i++)
            if (!strcmp(cs[i].name, line))
                snprintf(cs[i].op, sizeof cs[i].op, "%.50s%s", tab, expanded ? "[expanded]" : "");
    }
    fclose(f);
}

/* Without a manifest: the op type of the model's first node. */
static void op_from_model(const char *dir, test_case *t)
{
    char path[4096];
    path_fmt(path, sizeof path, "%s/%s/model.onnx", dir, t->name);
    tern_graph *g = NULL;
    tern_error err;
    if (tern_graph_load_onnx(path, &g, &err) == TERN_OK && tern_graph_node_count(g) > 0)
        snprintf(t->op, sizeof t->op, "%s", tern_graph_node_at(g, 0)->op);
    else
        snprintf(t->op, sizeof t->op, "%.40s", t->name + 5);
    tern_graph_free(g);
}

/* The ops whose every case the compiler issue requires to pass: STATUS REQUIRED in include/tern/ops.def. */
static int required_op(const char *op)
{
    return tern_op_info(tern_op_lookup("", op))->status == TERN_OP_STATUS_REQUIRED;
}

/* ---- driver ---- */

static int name_cmp(const void *a, const void *b)
{
    return strcmp(((const test_case *)a)->name, ((const test_case *)b)->name);
}

static int matches_filter(const char *name, const char *filter)
{
    if (!filter || !*filter)
        return 1;
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", filter);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        size_t len = strlen(tok);
        if (len && tok[len - 1] == '$') { /* exact name */
            if (len - 1 == strlen(name) && !strncmp(name, tok, len - 1))
                return 1;
        } else if (strstr(name, tok)) {
            return 1;
        }
    }
    return 0;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

typedef struct {
    pid_t pid;
    int fd;
    int idx;
    double start;
} slot;

static void child_main(const opts *op, const test_case *t, int fd)
{
    alarm((unsigned)op->timeout_s);
    char dir[4096];
    path_fmt(dir, sizeof dir, "%s/%s", op->dir, t->name);
    outcome o;
    memset(&o, 0, sizeof o);
    run_case(dir, &o);
    char line[MSG_MAX + 8];
    int n = snprintf(line, sizeof line, "%d\t%s", o.result, o.msg);
    if (n > 0 && write(fd, line, (size_t)(n < (int)sizeof line ? n : (int)sizeof line - 1)) < 0)
        n = 0;
    close(fd);
}

static void finish(test_case *t, int status, int fd, double secs, int timeout_s)
{
    char buf[MSG_MAX + 16];
    ssize_t n = 0, r;
    while ((size_t)n < sizeof buf - 1 && (r = read(fd, buf + n, sizeof buf - 1 - (size_t)n)) > 0)
        n += r;
    buf[n > 0 ? n : 0] = '\0';
    close(fd);
    t->secs = secs;
    if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        t->result = R_FAIL;
        if (sig == SIGALRM || sig == SIGKILL)
            snprintf(t->msg, sizeof t->msg, "timeout: over %d s", timeout_s);
        else
            snprintf(t->msg, sizeof t->msg, "crash: signal %d (%s)", sig, strsignal(sig));
        return;
    }
    char *tab = strchr(buf, '\t');
    if (!tab || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        t->result = R_FAIL;
        snprintf(t->msg, sizeof t->msg, "crash: child exited with status %d, no result",
                 WIFEXITED(status) ? WEXITSTATUS(status) : -1);
        return;
    }
    *tab = '\0';
    t->result = atoi(buf);
    if (t->result < R_PASS || t->result > R_UNSUP)
        t->result = R_FAIL;
    snprintf(t->msg, sizeof t->msg, "%s", tab + 1);
}

static void usage(FILE *f)
{
    fprintf(f, "usage: conformance [-j JOBS] [-t TIMEOUT_S] [-f FILTER[,FILTER...]] [-l LOG] [-v] DIR\n"
               "  DIR holds ONNX backend node tests (test_*/model.onnx, test_data_set_0/*.pb), e.g.\n"
               "  build/onnx-node-tests/node; DIR/ops.tsv or DIR/../ops.tsv names each case's op.\n"
               "  -f: run only cases whose name contains a FILTER (NAME$ for an exact name).\n"
               "  -v: print every case; default: only those that do not pass.\n"
               "Exit status: 1 when a case of an op the compiler issue requires fails; 2 on usage errors.\n");
}

int main(int argc, char **argv)
{
    opts op = {.jobs = 1, .timeout_s = 20};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int valued = a[0] == '-' && a[1] && strchr("jtfl", a[1]);
        if (valued && (a[2] || i + 1 < argc)) { /* -j 2 or -j2 */
            const char *v = a[2] ? a + 2 : argv[++i];
            if (a[1] == 'j')
                op.jobs = atoi(v);
            else if (a[1] == 't')
                op.timeout_s = atoi(v);
            else if (a[1] == 'f')
                op.filter = v;
            else
                op.log = v;
        } else if (!strcmp(a, "-v")) {
            op.verbose = 1;
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (a[0] != '-' && !op.dir) {
            op.dir = a;
        } else {
            usage(stderr);
            return 2;
        }
    }
    if (!op.dir || op.jobs < 1 || op.timeout_s < 1) {
        usage(stderr);
        return 2;
    }
    DIR *d = opendir(op.dir);
    if (!d) {
        fprintf(stderr, "conformance: cannot open %s: %s\n", op.dir, strerror(errno));
        return 2;
    }
    test_case *cs = NULL;
    int n = 0, cap = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (strncmp(e->d_name, "test_", 5) || !matches_filter(e->d_name, op.filter))
            continue;
        char mp[4096];
        path_fmt(mp, sizeof mp, "%s/%s/model.onnx", op.dir, e->d_name);
        struct stat st;
        if (stat(mp, &st))
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 256;
            test_case *nc = realloc(cs, sizeof *cs * (size_t)cap);
            if (!nc) {
                free(cs);
                closedir(d);
                fprintf(stderr, "conformance: out of memory\n");
                return 2;
            }
            cs = nc;
        }
        memset(&cs[n], 0, sizeof cs[n]);
        snprintf(cs[n].name, sizeof cs[n].name, "%.127s", e->d_name);
        n++;
    }
    closedir(d);
    if (n == 0) {
        fprintf(stderr, "conformance: no test_* cases under %s\n", op.dir);
        free(cs);
        return 2;
    }
    qsort(cs, (size_t)n, sizeof *cs, name_cmp);
    char manifest[4096];
    path_fmt(manifest, sizeof manifest, "%s/ops.tsv", op.dir);
    struct stat mst;
    if (stat(manifest, &mst))
        path_fmt(manifest, sizeof manifest, "%s/../ops.tsv", op.dir);
    op_from_manifest(manifest, cs, n);
    for (int i = 0; i < n; i++)
        if (!cs[i].op[0])
            op_from_model(op.dir, &cs[i]);
    /* Parallel cases share the host's cores: one simulator thread each. */
    if (op.jobs > 1)
        setenv("TERN_THREADS", "1", 0);
    FILE *log = op.log ? fopen(op.log, "w") : NULL;
    if (op.log && !log)
        fprintf(stderr, "conformance: cannot write %s: %s\n", op.log, strerror(errno));
    fflush(stdout);
    slot *slots = calloc((size_t)op.jobs, sizeof *slots);
    if (!slots) {
        free(cs);
        if (log)
            fclose(log);
        return 2;
    }
    int next = 0, running = 0, done = 0;
    double t0 = now_s();
    while (done < n) {
        while (running < op.jobs && next < n) {
            int fds[2];
            if (pipe(fds)) {
                perror("conformance: pipe");
                return 2;
            }
            fflush(NULL);
            pid_t pid = fork();
            if (pid < 0) {
                perror("conformance: fork");
                return 2;
            }
            if (pid == 0) {
                close(fds[0]);
                child_main(&op, &cs[next], fds[1]);
                free(slots);
                free(cs);
                if (log)
                    fclose(log);
                exit(0);
            }
            close(fds[1]);
            for (int s = 0; s < op.jobs; s++)
                if (!slots[s].pid) {
                    slots[s] = (slot){pid, fds[0], next, now_s()};
                    break;
                }
            next++;
            running++;
        }
        int status = 0;
        pid_t pid = waitpid(-1, &status, 0);
        if (pid < 0) {
            if (errno == EINTR)
                continue;
            perror("conformance: waitpid");
            return 2;
        }
        for (int s = 0; s < op.jobs; s++) {
            if (slots[s].pid != pid)
                continue;
            test_case *t = &cs[slots[s].idx];
            finish(t, status, slots[s].fd, now_s() - slots[s].start, op.timeout_s);
            slots[s].pid = 0;
            running--;
            done++;
            if (op.verbose || t->result != R_PASS)
                printf("%-11s %-60s %s: %s\n", result_name[t->result], t->name, t->op, t->msg);
            if (log)
                fprintf(log, "%s\t%s\t%s\t%.2fs\t%s\n", result_name[t->result], t->name, t->op, t->secs, t->msg);
            fflush(stdout);
        }
    }
    free(slots);
    if (log)
        fclose(log);
    /* Per-op table, ops in name order. */
    test_case **byop = malloc(sizeof *byop * (size_t)n);
    if (!byop) {
        free(cs);
        return 2;
    }
    for (int i = 0; i < n; i++)
        byop[i] = &cs[i];
    for (int i = 1; i < n; i++) /* insertion sort by op, stable */
        for (int j = i; j > 0 && strcmp(byop[j - 1]->op, byop[j]->op) > 0; j--) {
            test_case *tmp = byop[j];
            byop[j] = byop[j - 1];
            byop[j - 1] = tmp;
        }
    int tot[3] = {0, 0, 0}, req_fail = 0, req_unsup = 0;
    printf("\n%-34s %6s %6s %6s %6s  %s\n", "op", "cases", "pass", "fail", "unsup", "first reason (fail, else unsupported)");
    for (int i = 0; i < n;) {
        int j = i, cnt[3] = {0, 0, 0};
        const test_case *why_f = NULL, *why_u = NULL;
        while (j < n && !strcmp(byop[j]->op, byop[i]->op)) {
            cnt[byop[j]->result]++;
            if (byop[j]->result == R_FAIL && !why_f)
                why_f = byop[j];
            if (byop[j]->result == R_UNSUP && !why_u)
                why_u = byop[j];
            j++;
        }
        const test_case *why = why_f ? why_f : why_u;
        int req = required_op(byop[i]->op);
        if (req) {
            req_fail += cnt[R_FAIL];
            req_unsup += cnt[R_UNSUP];
        }
        printf("%-34s %6d %6d %6d %6d  %s%.110s\n", byop[i]->op, j - i, cnt[0], cnt[1], cnt[2], req ? "* " : "",
               why ? why->msg : "");
        for (int k = 0; k < 3; k++)
            tot[k] += cnt[k];
        i = j;
    }
    free(byop);
    printf("(* = an op the compiler issue requires: every case must pass; %d of their cases fail, %d are "
           "unsupported)\n", req_fail, req_unsup);
    printf("wall time %.1f s for %d case(s)\n", now_s() - t0, n);
    printf("onnx_node_tests: %d passed, %d failed, %d unsupported\n", tot[R_PASS], tot[R_FAIL], tot[R_UNSUP]);
    free(cs);
    return req_fail ? 1 : 0;
}
