/* The tern executable format (.tern): a fixed header, the model's inputs and outputs, a string table (the
 * model's names for them and the machine, any length), one embedded program per NeuronCore (the .tprog format of
 * the isa layer), the constants each core needs in HBM, and free-form JSON metadata — little-endian, written
 * field by field, with a CRC-32 over everything after the checksum field. The decoder trusts nothing: every
 * count is checked against the bytes present before anything is allocated, every field against its range, and
 * each error names the byte offset. It also reads version 1 (fixed 48-byte names, no string table, no machine
 * fingerprint). Layout: docs/runtime.md. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tern/runtime.h"

#include <zlib.h>

enum {
    X_MAGIC = 0,
    X_VERSION = 8,
    X_CHECKSUM = 12,
    X_CORES = 16,
    X_INPUTS = 20,
    X_OUTPUTS = 24,
    X_CONSTS = 28,
    X_META = 32,
    X_RESERVED = 36, /* version 1: reserved (0); version 2: string table bytes */
    X_STRTAB = 36,
    X_MACHINE = 40,  /* version 1: machine name[56]; version 2: four u32 below, then 40 reserved bytes */
    X_MACHINE_REF = 40,
    X_MACHINE_NAME = 44,
    X_FINGERPRINT = 48,
    X_FIGURES = 52,
    X_V2_RESERVED = 56,
    X_HEADER = 96,
    X_MACHINE_LEN = X_HEADER - X_MACHINE,
    /* version 1: name[48] dtype rank split text_bytes shape[8] x i64, reserved 4;
     * version 2: model-name string u32, name[48], dtype rank split text_bytes, shape[8] x i64 */
    X_IO_RECORD = 120,
    X_MAX_CORES = 1024,
};
#define X_NO_STRING 0xFFFFFFFFu /* a string-table reference to no string */

const char *tern_exe_io_name(const tern_exe_io *io) { return io->model_name ? io->model_name : io->name; }

const char *tern_exe_machine(const tern_exe *x) { return x->machine_ref ? x->machine_ref : x->machine; }

/* 64-bit FNV-1a: a stable, dependency-free hash for shortened file names. */
static uint64_t fnv1a64(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
    return h;
}

/* Escape name into buf while whole escapes fit in limit bytes; returns the length of the whole escaped name and
 * sets *kept_at_keep to the length written when the text first passed keep bytes (0 if it never did). */
static size_t escape_name(const char *name, char *buf, size_t limit, size_t keep, size_t *kept_at_keep)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t full = 0;
    *kept_at_keep = 0;
    for (const uint8_t *p = (const uint8_t *)name; *p; p++) {
        int plain = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_' ||
                    *p == '-' || (*p == '.' && p != (const uint8_t *)name);
        size_t w = plain ? 1 : 3;
        if (full + w > keep && !*kept_at_keep)
            *kept_at_keep = full;
        if (full + w <= limit) {
            if (plain) {
                buf[full] = (char)*p;
            } else {
                buf[full] = '%';
                buf[full + 1] = hex[*p >> 4];
                buf[full + 2] = hex[*p & 15];
            }
        }
        full += w;
    }
    return full;
}

size_t tern_name_to_filename(const char *name, char *out, size_t cap)
{
    char buf[TERN_NAME_FILENAME_MAX];
    size_t keep_len, n = escape_name(name, buf, TERN_NAME_FILENAME_MAX - 8, 200, &keep_len);
    if (n > TERN_NAME_FILENAME_MAX - 8) /* too long: the first 200 bytes, '~', the hash of the whole name */
        n = keep_len + (size_t)snprintf(buf + keep_len, sizeof buf - keep_len, "~%016llx",
                                        (unsigned long long)fnv1a64(name));
    buf[n] = '\0';
    if (cap)
        snprintf(out, cap, "%s", buf);
    return n;
}

void tern_exe_init(tern_exe *x) { memset(x, 0, sizeof *x); }

void tern_exe_free(tern_exe *x)
{
    if (x->programs)
        for (unsigned c = 0; c < x->cores; c++)
            tern_program_free(&x->programs[c]);
    free(x->programs);
    for (size_t i = 0; x->inputs && i < x->num_inputs; i++)
        free(x->inputs[i].model_name);
    for (size_t i = 0; x->outputs && i < x->num_outputs; i++)
        free(x->outputs[i].model_name);
    free(x->inputs);
    free(x->outputs);
    free(x->machine_ref);
    free(x->machine_name);
    free(x->machine_figures);
    for (size_t i = 0; i < x->num_consts; i++)
        free(x->consts[i].data);
    free(x->consts);
    free(x->metadata_json);
    memset(x, 0, sizeof *x);
}

/* Both saturate at UINT64_MAX when the product does not fit (io_check refuses such a shape, so a decoded
 * executable never gets there; a caller sizing a buffer from one built in memory sees an impossible size). */
uint64_t tern_exe_io_elems(const tern_exe_io *io)
{
    uint64_t n;
    unsigned rank = io->rank < TERN_EXE_MAX_RANK ? io->rank : TERN_EXE_MAX_RANK;
    tern_dims_product(io->shape, (int)rank, 1, 0, &n, "", NULL);
    return n;
}

uint64_t tern_exe_io_bytes(const tern_exe_io *io)
{
    uint64_t n;
    tern_mul_u64(tern_exe_io_elems(io), io->text_bytes ? io->text_bytes : tern_dtype_size(io->dtype), &n);
    return n;
}

/* ---- little-endian buffer ---- */
typedef struct {
    uint8_t *p;
    size_t len, cap;
    int oom;
} wbuf;

static void wb_put(wbuf *b, const void *src, size_t n)
{
    if (b->oom)
        return;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n)
            cap *= 2;
        uint8_t *q = realloc(b->p, cap);
        if (!q) {
            b->oom = 1;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
    if (src)
        memcpy(b->p + b->len, src, n);
    else
        memset(b->p + b->len, 0, n);
    b->len += n;
}

static void wb_u32(wbuf *b, uint32_t v)
{
    uint8_t x[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    wb_put(b, x, 4);
}

static void wb_u64(wbuf *b, uint64_t v)
{
    wb_u32(b, (uint32_t)v);
    wb_u32(b, (uint32_t)(v >> 32));
}

static void wb_pad8(wbuf *b) { wb_put(b, NULL, (8 - b->len % 8) % 8); }

static uint32_t rd32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static uint64_t rd64(const uint8_t *p) { return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32; }
static void put32(uint8_t *p, uint32_t v) { p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8), p[2] = (uint8_t)(v >> 16), p[3] = (uint8_t)(v >> 24); }

static int io_check(const tern_exe_io *io, char *why, size_t n)
{
    size_t len = strnlen(io->name, TERN_TENSOR_NAME_MAX);
    if (len == 0 || len >= TERN_TENSOR_NAME_MAX) {
        snprintf(why, n, "name must be 1..%d characters", TERN_TENSOR_NAME_MAX - 1);
        return -1;
    }
    if ((unsigned)io->dtype >= TERN_DTYPE_COUNT) {
        snprintf(why, n, "'%s': dtype %d unknown", io->name, (int)io->dtype);
        return -1;
    }
    if (io->rank > TERN_EXE_MAX_RANK) {
        snprintf(why, n, "'%s': rank %u above %d", io->name, io->rank, TERN_EXE_MAX_RANK);
        return -1;
    }
    if (io->text_bytes && (io->text_bytes > 255 || io->dtype != TERN_DTYPE_UINT8)) {
        snprintf(why, n, "'%s': text cells of %u bytes in dtype %s (must be 1..255 bytes, uint8)", io->name,
                 io->text_bytes, tern_dtype_name(io->dtype));
        return -1;
    }
    for (unsigned d = 0; d < io->rank; d++) /* 0 is allowed: a zero-size input or output */
        if (io->shape[d] < 0 || io->shape[d] > (int64_t)UINT32_MAX) {
            snprintf(why, n, "'%s': dimension %u is %lld (must be 0..%u)", io->name, d, (long long)io->shape[d],
                     UINT32_MAX);
            return -1;
        }
    /* Each dimension in range is not enough: their product times the element size must fit too (INT64_MAX, so
     * offsets derived from it stay signed-safe), or a wrapped small size would pass every later check. */
    uint64_t bytes;
    tern_error e;
    char what[TERN_TENSOR_NAME_MAX + 2];
    snprintf(what, sizeof what, "'%s'", io->name);
    if (tern_dims_product(io->shape, (int)io->rank, io->text_bytes ? io->text_bytes : tern_dtype_size(io->dtype),
                          INT64_MAX, &bytes, what, &e)) {
        size_t l = strnlen(e.msg, n - 1); /* cut to the caller's buffer */
        memcpy(why, e.msg, l);
        why[l] = '\0';
        return -1;
    }
    return 0;
}

/* The string table: NUL-terminated strings in a fixed order (machine reference, machine name, machine figures
 * when present, then each input's and each output's model name), so a decoded file re-encodes to the same bytes. */
static uint32_t strtab_add(wbuf *t, const char *s)
{
    if (!s || !*s)
        return X_NO_STRING;
    uint32_t off = (uint32_t)t->len;
    wb_put(t, s, strlen(s) + 1);
    return off;
}

static void put_io(wbuf *b, const tern_exe_io *io, uint32_t name_off)
{
    uint8_t r[X_IO_RECORD];
    memset(r, 0, sizeof r);
    put32(r, name_off);
    memcpy(r + 4, io->name, strnlen(io->name, TERN_TENSOR_NAME_MAX - 1));
    r[52] = (uint8_t)io->dtype;
    r[53] = (uint8_t)io->rank;
    r[54] = (uint8_t)(io->split_batch != 0);
    r[55] = (uint8_t)io->text_bytes;
    for (unsigned d = 0; d < TERN_EXE_MAX_RANK; d++) {
        uint64_t v = d < io->rank ? (uint64_t)io->shape[d] : 0;
        for (int k = 0; k < 8; k++)
            r[56 + 8 * d + k] = (uint8_t)(v >> (8 * k));
    }
    wb_put(b, r, sizeof r);
}

/* Two inputs (or two outputs) may share neither the model's name nor the program tensor. */
static int names_check(const tern_exe_io *v, size_t n, const char *kind, char *why, size_t len)
{
    for (size_t i = 0; i < n; i++) {
        if (v[i].model_name && !v[i].model_name[0]) {
            snprintf(why, len, "%s %zu ('%s'): empty model name", kind, i, v[i].name);
            return -1;
        }
        for (size_t j = 0; j < i; j++) {
            if (!strcmp(tern_exe_io_name(&v[i]), tern_exe_io_name(&v[j]))) {
                snprintf(why, len, "%ss %zu and %zu are both called '%s'", kind, j, i, tern_exe_io_name(&v[i]));
                return -1;
            }
            if (!strcmp(v[i].name, v[j].name)) {
                snprintf(why, len, "%ss '%s' and '%s' are both program tensor '%s'", kind, tern_exe_io_name(&v[j]),
                         tern_exe_io_name(&v[i]), v[i].name);
                return -1;
            }
        }
    }
    return 0;
}

tern_status tern_exe_encode(const tern_exe *x, uint8_t **out, size_t *len, tern_error *err)
{
    *out = NULL;
    *len = 0;
    char why[200];
    if (x->cores == 0 || x->cores > X_MAX_CORES)
        return tern_error_set(err, TERN_ERR_INVALID, "executable encode: %u cores (must be 1..%d)", x->cores, X_MAX_CORES);
    for (size_t i = 0; i < x->num_inputs + x->num_outputs; i++) {
        const tern_exe_io *io = i < x->num_inputs ? &x->inputs[i] : &x->outputs[i - x->num_inputs];
        if (io_check(io, why, sizeof why))
            return tern_error_set(err, TERN_ERR_INVALID, "executable encode: %s %s", i < x->num_inputs ? "input" : "output", why);
    }
    if (names_check(x->inputs, x->num_inputs, "input", why, sizeof why) ||
        names_check(x->outputs, x->num_outputs, "output", why, sizeof why))
        return tern_error_set(err, TERN_ERR_INVALID, "executable encode: %s", why);
    wbuf t = {0}; /* the string table */
    uint32_t mref = strtab_add(&t, tern_exe_machine(x)), mname = strtab_add(&t, x->machine_name);
    uint32_t mfig = strtab_add(&t, x->machine_figures);
    uint32_t *name_off = malloc((x->num_inputs + x->num_outputs + 1) * sizeof *name_off);
    if (!name_off) {
        free(t.p);
        return tern_error_set(err, TERN_ERR_NOMEM, "executable encode: out of memory");
    }
    for (size_t i = 0; i < x->num_inputs + x->num_outputs; i++)
        name_off[i] = strtab_add(&t, tern_exe_io_name(i < x->num_inputs ? &x->inputs[i] : &x->outputs[i - x->num_inputs]));
    if (t.len > UINT32_MAX - 8 || t.oom) {
        free(t.p);
        free(name_off);
        return tern_error_set(err, t.oom ? TERN_ERR_NOMEM : TERN_ERR_INVALID, "executable encode: string table of %zu bytes",
                              t.len);
    }
    wbuf b = {0};
    wb_put(&b, TERN_EXE_MAGIC, 8);
    wb_u32(&b, TERN_EXE_VERSION);
    wb_u32(&b, 0); /* checksum, filled last */
    wb_u32(&b, x->cores);
    wb_u32(&b, (uint32_t)x->num_inputs);
    wb_u32(&b, (uint32_t)x->num_outputs);
    wb_u32(&b, (uint32_t)x->num_consts);
    size_t meta_len = x->metadata_json ? strlen(x->metadata_json) : 0;
    wb_u32(&b, (uint32_t)meta_len);
    wb_u32(&b, (uint32_t)t.len);
    wb_u32(&b, mref);
    wb_u32(&b, mname);
    wb_u32(&b, x->machine_fingerprint);
    wb_u32(&b, mfig);
    wb_put(&b, NULL, X_HEADER - X_V2_RESERVED);
    for (size_t i = 0; i < x->num_inputs; i++)
        put_io(&b, &x->inputs[i], name_off[i]);
    for (size_t i = 0; i < x->num_outputs; i++)
        put_io(&b, &x->outputs[i], name_off[x->num_inputs + i]);
    free(name_off);
    wb_put(&b, t.p, t.len);
    wb_pad8(&b);
    free(t.p);
    for (unsigned c = 0; c < x->cores; c++) {
        uint8_t *prog = NULL;
        size_t plen = 0;
        tern_status st = tern_program_encode(&x->programs[c], &prog, &plen, err);
        if (st) {
            free(b.p);
            return tern_error_prefix(err, "executable encode: core %u: ", c);
        }
        wb_u64(&b, plen);
        wb_put(&b, prog, plen);
        wb_pad8(&b);
        free(prog);
    }
    for (size_t i = 0; i < x->num_consts; i++) {
        const tern_exe_const *k = &x->consts[i];
        if (k->core >= x->cores) {
            free(b.p);
            return tern_error_set(err, TERN_ERR_INVALID, "executable encode: constant %zu on core %u of %u", i, k->core,
                                  x->cores);
        }
        wb_u32(&b, k->core);
        wb_u32(&b, 0);
        wb_u64(&b, k->hbm_addr);
        wb_u64(&b, k->bytes);
        wb_put(&b, k->data, k->bytes);
        wb_pad8(&b);
    }
    wb_put(&b, x->metadata_json, meta_len);
    wb_pad8(&b);
    if (b.oom) {
        free(b.p);
        return tern_error_set(err, TERN_ERR_NOMEM, "executable encode: out of memory");
    }
    put32(b.p + X_CHECKSUM, tern_crc32(b.p + X_CORES, b.len - X_CORES));
    *out = b.p;
    *len = b.len;
    return TERN_OK;
}

static tern_status fail(tern_exe *out, tern_error *err, tern_status code, size_t off, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static tern_status fail(tern_exe *out, tern_error *err, tern_status code, size_t off, const char *fmt, ...)
{
    char msg[TERN_ERROR_MSG_MAX - 64];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    tern_exe_free(out);
    return tern_error_set(err, code, "executable decode: offset %zu: %s", off, msg);
}

/* One I/O record. Version 1: name[48] at 0, the fields at 48, 4 reserved bytes at 116; version 2: a
 * string-table reference at 0 (read by the caller), name[48] at 4, the fields at 52. */
static tern_status read_io(const uint8_t *r, size_t off, unsigned version, tern_exe_io *io, tern_exe *out,
                           tern_error *err)
{
    memset(io, 0, sizeof *io);
    size_t at = version >= 2 ? 4 : 0, f = at + TERN_TENSOR_NAME_MAX;
    size_t nlen = strnlen((const char *)r + at, TERN_TENSOR_NAME_MAX);
    if (nlen == 0 || nlen >= TERN_TENSOR_NAME_MAX)
        return fail(out, err, TERN_ERR_PARSE, off + at, "input/output name empty or not NUL-terminated");
    for (size_t i = nlen; i < TERN_TENSOR_NAME_MAX; i++)
        if (r[at + i])
            return fail(out, err, TERN_ERR_PARSE, off + at + i, "non-zero byte after an input/output name");
    memcpy(io->name, r + at, nlen);
    io->dtype = (tern_dtype)r[f];
    io->rank = r[f + 1];
    if (r[f + 2] > 1)
        return fail(out, err, TERN_ERR_PARSE, off + f + 2, "'%s': split flag %u invalid (0 or 1)", io->name, r[f + 2]);
    io->split_batch = r[f + 2];
    io->text_bytes = r[f + 3];
    for (unsigned d = 0; d < TERN_EXE_MAX_RANK; d++)
        io->shape[d] = (int64_t)rd64(r + f + 4 + 8 * d);
    char why[200];
    if (io_check(io, why, sizeof why))
        return fail(out, err, TERN_ERR_PARSE, off + f, "%s", why);
    for (unsigned d = io->rank; d < TERN_EXE_MAX_RANK; d++)
        if (io->shape[d])
            return fail(out, err, TERN_ERR_PARSE, off + f + 4 + 8 * d, "'%s': dimension %u set beyond rank %u",
                        io->name, d, io->rank);
    return TERN_OK;
}

/* The string table is read in the order the encoder writes it: each reference must be the next string (or
 * X_NO_STRING where a string may be absent), so an accepted file re-encodes to the same bytes. */
typedef struct {
    const uint8_t *p;
    size_t base, len, next; /* file offset of the table, its length, offset of the next string in it */
} strtab;

static tern_status strtab_take(strtab *t, uint32_t ref, size_t ref_off, int optional, const char *what, char **dst,
                               tern_exe *out, tern_error *err)
{
    *dst = NULL;
    if (ref == X_NO_STRING && optional)
        return TERN_OK;
    if (ref != t->next)
        return fail(out, err, TERN_ERR_PARSE, ref_off, "%s: string-table offset %u, expected %zu", what, ref, t->next);
    const uint8_t *s = t->p + t->next;
    const uint8_t *nul = t->next < t->len ? memchr(s, 0, t->len - t->next) : NULL;
    if (!nul)
        return fail(out, err, TERN_ERR_PARSE, t->base + t->next, "%s: string not NUL-terminated in the table", what);
    size_t n = (size_t)(nul - s);
    if (n == 0)
        return fail(out, err, TERN_ERR_PARSE, t->base + t->next, "%s: empty string", what);
    if (!(*dst = malloc(n + 1)))
        return fail(out, err, TERN_ERR_NOMEM, t->base + t->next, "out of memory");
    memcpy(*dst, s, n + 1);
    t->next += n + 1;
    return TERN_OK;
}

tern_status tern_exe_decode(const uint8_t *buf, size_t len, tern_exe *out, tern_error *err)
{
    tern_exe_init(out);
    if (len < 8 || memcmp(buf, TERN_EXE_MAGIC, 8))
        return fail(out, err, TERN_ERR_PARSE, 0, "not a tern executable (magic %s)", TERN_EXE_MAGIC);
    if (len < X_HEADER)
        return fail(out, err, TERN_ERR_PARSE, len, "truncated: %zu bytes, the header needs %d", len, X_HEADER);
    uint32_t version = rd32(buf + X_VERSION);
    if (version < TERN_EXE_VERSION_MIN || version > TERN_EXE_VERSION)
        return fail(out, err, TERN_ERR_UNSUPPORTED, X_VERSION, "version %u unsupported (this build reads versions %d..%d)",
                    version, TERN_EXE_VERSION_MIN, TERN_EXE_VERSION);
    uint32_t crc = tern_crc32(buf + X_CORES, len - X_CORES);
    if (crc != rd32(buf + X_CHECKSUM))
        return fail(out, err, TERN_ERR_PARSE, X_CHECKSUM, "checksum mismatch (file says 0x%08x, contents 0x%08x)",
                    rd32(buf + X_CHECKSUM), crc);
    uint32_t cores = rd32(buf + X_CORES), nin = rd32(buf + X_INPUTS), nout = rd32(buf + X_OUTPUTS);
    uint32_t nconst = rd32(buf + X_CONSTS), meta = rd32(buf + X_META);
    if (cores == 0 || cores > X_MAX_CORES)
        return fail(out, err, TERN_ERR_PARSE, X_CORES, "%u cores (must be 1..%d)", cores, X_MAX_CORES);
    uint32_t strtab_len = 0;
    if (version < 2) {
        if (rd32(buf + X_RESERVED))
            return fail(out, err, TERN_ERR_PARSE, X_RESERVED, "reserved field not zero");
        size_t mlen = strnlen((const char *)buf + X_MACHINE, X_MACHINE_LEN);
        if (mlen >= X_MACHINE_LEN)
            return fail(out, err, TERN_ERR_PARSE, X_MACHINE, "machine name not NUL-terminated");
        memcpy(out->machine, buf + X_MACHINE, mlen);
    } else {
        strtab_len = rd32(buf + X_STRTAB);
        for (size_t i = X_V2_RESERVED; i < X_HEADER; i++)
            if (buf[i])
                return fail(out, err, TERN_ERR_PARSE, i, "reserved header byte not zero");
        out->machine_fingerprint = rd32(buf + X_FINGERPRINT);
    }
    size_t off = X_HEADER;
    if ((uint64_t)nin + nout > (len - off) / X_IO_RECORD)
        return fail(out, err, TERN_ERR_PARSE, X_INPUTS, "%u inputs and %u outputs do not fit in %zu bytes", nin, nout,
                    len - off);
    size_t strtab_at = off + ((size_t)nin + nout) * X_IO_RECORD;
    if (strtab_len > len - strtab_at)
        return fail(out, err, TERN_ERR_PARSE, X_STRTAB, "string table of %u bytes overruns the file", strtab_len);
    strtab tab = {buf + strtab_at, strtab_at, strtab_len, 0};
    out->inputs = calloc(nin ? nin : 1, sizeof *out->inputs);
    out->outputs = calloc(nout ? nout : 1, sizeof *out->outputs);
    out->programs = calloc(cores, sizeof *out->programs);
    if (!out->inputs || !out->outputs || !out->programs)
        return fail(out, err, TERN_ERR_NOMEM, off, "out of memory");
    tern_status st;
    if (version >= 2) {
        if ((st = strtab_take(&tab, rd32(buf + X_MACHINE_REF), X_MACHINE_REF, 1, "machine reference", &out->machine_ref,
                              out, err)) ||
            (st = strtab_take(&tab, rd32(buf + X_MACHINE_NAME), X_MACHINE_NAME, 1, "machine name", &out->machine_name,
                              out, err)) ||
            (st = strtab_take(&tab, rd32(buf + X_FIGURES), X_FIGURES, 1, "machine figures", &out->machine_figures, out,
                              err)))
            return st;
        if (out->machine_ref)
            snprintf(out->machine, sizeof out->machine, "%s", out->machine_ref);
    }
    for (uint32_t i = 0; i < nin + nout; i++, off += X_IO_RECORD) {
        tern_exe_io *io = i < nin ? &out->inputs[i] : &out->outputs[i - nin];
        if ((st = read_io(buf + off, off, version, io, out, err)))
            return st;
        if (i < nin)
            out->num_inputs = i + 1;
        else
            out->num_outputs = i - nin + 1;
        if (version >= 2 && (st = strtab_take(&tab, rd32(buf + off), off, 0, io->name, &io->model_name, out, err)))
            return st;
    }
    if (tab.next != tab.len)
        return fail(out, err, TERN_ERR_PARSE, strtab_at + tab.next, "%zu unreferenced bytes in the string table",
                    tab.len - tab.next);
    char why[200];
    if (names_check(out->inputs, out->num_inputs, "input", why, sizeof why) ||
        names_check(out->outputs, out->num_outputs, "output", why, sizeof why))
        return fail(out, err, TERN_ERR_PARSE, X_HEADER, "%s", why);
    off += strtab_len;
    off += (8 - off % 8) % 8;
    if (off > len)
        return fail(out, err, TERN_ERR_PARSE, len, "truncated in the string table's padding");
    out->cores = cores;
    for (unsigned c = 0; c < cores; c++)
        tern_program_init(&out->programs[c]);
    for (unsigned c = 0; c < cores; c++) {
        if (len - off < 8)
            return fail(out, err, TERN_ERR_PARSE, off, "truncated before core %u's program", c);
        uint64_t plen = rd64(buf + off);
        if (plen > len - off - 8)
            return fail(out, err, TERN_ERR_PARSE, off, "core %u's program of %llu bytes overruns the file", c,
                        (unsigned long long)plen);
        tern_error e2;
        if (tern_program_decode(buf + off + 8, (size_t)plen, &out->programs[c], &e2))
            return fail(out, err, e2.code, off + 8, "core %u: %s", c, e2.msg);
        off += 8 + (size_t)plen;
        off += (8 - off % 8) % 8;
        if (off > len)
            return fail(out, err, TERN_ERR_PARSE, len, "truncated in core %u's padding", c);
    }
    if (nconst > (len - off) / 24)
        return fail(out, err, TERN_ERR_PARSE, X_CONSTS, "%u constants do not fit in the %zu bytes left", nconst, len - off);
    out->consts = calloc(nconst ? nconst : 1, sizeof *out->consts);
    if (!out->consts)
        return fail(out, err, TERN_ERR_NOMEM, off, "out of memory");
    for (uint32_t i = 0; i < nconst; i++) {
        if (len - off < 24)
            return fail(out, err, TERN_ERR_PARSE, off, "truncated in constant %u", i);
        tern_exe_const *k = &out->consts[i];
        k->core = rd32(buf + off);
        if (k->core >= cores || rd32(buf + off + 4))
            return fail(out, err, TERN_ERR_PARSE, off, "constant %u: core %u of %u (or reserved bytes set)", i, k->core,
                        cores);
        k->hbm_addr = rd64(buf + off + 8);
        k->bytes = rd64(buf + off + 16);
        if (k->bytes > len - off - 24)
            return fail(out, err, TERN_ERR_PARSE, off + 16, "constant %u: %llu bytes overrun the file", i,
                        (unsigned long long)k->bytes);
        k->data = malloc(k->bytes ? k->bytes : 1);
        if (!k->data)
            return fail(out, err, TERN_ERR_NOMEM, off, "constant %u: out of memory", i);
        memcpy(k->data, buf + off + 24, k->bytes);
        out->num_consts = i + 1;
        off += 24 + (size_t)k->bytes;
        off += (8 - off % 8) % 8;
        if (off > len)
            return fail(out, err, TERN_ERR_PARSE, len, "truncated in constant %u's padding", i);
    }
    if (meta > len - off)
        return fail(out, err, TERN_ERR_PARSE, X_META, "metadata of %u bytes overruns the file", meta);
    if (meta) {
        out->metadata_json = malloc(meta + 1);
        if (!out->metadata_json)
            return fail(out, err, TERN_ERR_NOMEM, off, "out of memory");
        memcpy(out->metadata_json, buf + off, meta);
        out->metadata_json[meta] = '\0';
    }
    off += meta;
    off += (8 - off % 8) % 8;
    if (off != len)
        return fail(out, err, TERN_ERR_PARSE, off, "%zu trailing bytes", len - off);
    /* Every input and output must be a tensor of every core's program, except a zero-size one: it has no bytes to
     * place, so the program has no tensor for it. */
    for (size_t i = 0; i < out->num_inputs + out->num_outputs; i++) {
        const tern_exe_io *io = i < out->num_inputs ? &out->inputs[i] : &out->outputs[i - out->num_inputs];
        if (tern_exe_io_elems(io) == 0)
            continue;
        for (unsigned c = 0; c < cores; c++)
            if (!tern_program_find_tensor(&out->programs[c], io->name))
                return fail(out, err, TERN_ERR_PARSE, X_HEADER, "'%s' is not a tensor of core %u's program", io->name, c);
    }
    return TERN_OK;
}

/* fwrite that also extends the running CRC-32 (zlib's, the same value tern_crc32 gives in one piece). */
static int put_crc(FILE *f, const void *p, size_t n, uLong *crc)
{
    const Bytef *b = p;
    for (size_t left = n; left > 0;) {
        uInt chunk = left > (1u << 30) ? (1u << 30) : (uInt)left;
        *crc = crc32(*crc, b, chunk);
        b += chunk;
        left -= chunk;
    }
    return fwrite(p, 1, n, f) == n ? 0 : -1;
}

/* Streams the executable: everything before the constants is encoded in memory (small), each constant's bytes are
 * written from the executable itself, so saving a model's weights needs no second copy of them. The bytes are
 * those tern_exe_encode makes. */
tern_status tern_exe_save(const tern_exe *x, const char *path, tern_error *err)
{
    tern_exe head = *x; /* shares x's records: no constants and no metadata, put back in the header below */
    head.num_consts = 0;
    head.metadata_json = NULL;
    for (size_t i = 0; i < x->num_consts; i++)
        if (x->consts[i].core >= x->cores)
            return tern_error_set(err, TERN_ERR_INVALID, "executable encode: constant %zu on core %u of %u", i,
                                  x->consts[i].core, x->cores);
    uint8_t *b = NULL;
    size_t n = 0;
    tern_status st = tern_exe_encode(&head, &b, &n, err);
    if (st)
        return st;
    size_t meta_len = x->metadata_json ? strlen(x->metadata_json) : 0;
    put32(b + X_CONSTS, (uint32_t)x->num_consts);
    put32(b + X_META, (uint32_t)meta_len);
    FILE *f = fopen(path, "wb");
    if (!f) {
        free(b);
        return tern_error_set(err, TERN_ERR_IO, "saving %s: cannot open for writing", path);
    }
    static const uint8_t zeros[8];
    uLong crc = crc32(0L, Z_NULL, 0);
    /* the header up to the checksum is outside the CRC; the checksum is written last, in place */
    int bad = fwrite(b, 1, X_CORES, f) != X_CORES || put_crc(f, b + X_CORES, n - X_CORES, &crc);
    free(b);
    for (size_t i = 0; i < x->num_consts && !bad; i++) {
        const tern_exe_const *k = &x->consts[i];
        uint8_t rec[24];
        put32(rec, k->core);
        put32(rec + 4, 0);
        put32(rec + 8, (uint32_t)k->hbm_addr);
        put32(rec + 12, (uint32_t)(k->hbm_addr >> 32));
        put32(rec + 16, (uint32_t)k->bytes);
        put32(rec + 20, (uint32_t)(k->bytes >> 32));
        bad = put_crc(f, rec, sizeof rec, &crc) || put_crc(f, k->data, (size_t)k->bytes, &crc) ||
              put_crc(f, zeros, (8 - k->bytes % 8) % 8, &crc);
    }
    if (!bad)
        bad = put_crc(f, x->metadata_json ? x->metadata_json : "", meta_len, &crc) ||
              put_crc(f, zeros, (8 - meta_len % 8) % 8, &crc);
    uint8_t sum[4];
    put32(sum, (uint32_t)crc);
    if (!bad)
        bad = fseek(f, X_CHECKSUM, SEEK_SET) != 0 || fwrite(sum, 1, 4, f) != 4;
    if (fclose(f) || bad)
        return tern_error_set(err, TERN_ERR_IO, "saving %s: write failed", path);
    return TERN_OK;
}

/* fread of n bytes that extends the running CRC-32. */
static int get_crc(FILE *f, void *dst, size_t n, uLong *crc)
{
    if (fread(dst, 1, n, f) != n)
        return -1;
    const Bytef *b = dst;
    for (size_t left = n; left > 0;) {
        uInt chunk = left > (1u << 30) ? (1u << 30) : (uInt)left;
        *crc = crc32(*crc, b, chunk);
        b += chunk;
        left -= chunk;
    }
    return 0;
}

/* n bytes of the file appended to b (and to the CRC). */
static int copy_crc(FILE *f, wbuf *b, uint64_t n, uLong *crc)
{
    wb_put(b, NULL, (size_t)n);
    return b->oom || get_crc(f, b->p + b->len - n, (size_t)n, crc);
}

/* A version-2 file read piece by piece: each constant's bytes go straight from the file into their own buffer and
 * the rest (a few MB) is decoded by tern_exe_decode as a file whose constants are empty, so a loaded executable's
 * weights are held once. Returns -1 on anything unexpected: the caller then decodes the whole file, whose message
 * names the problem and its offset. */
static int load_streamed(FILE *f, uint64_t size, tern_exe *out, tern_error *err)
{
    uint8_t hdr[X_HEADER];
    uLong crc = crc32(0L, Z_NULL, 0);
    wbuf syn = {0};
    void **data = NULL;
    uint64_t *bytes = NULL;
    uint32_t nconst = 0, got = 0;
    int rc = -1;
    if (size < X_HEADER || fread(hdr, 1, X_HEADER, f) != X_HEADER || memcmp(hdr, TERN_EXE_MAGIC, 8) ||
        rd32(hdr + X_VERSION) < 2 || rd32(hdr + X_VERSION) > TERN_EXE_VERSION)
        return -1;
    crc = crc32(crc, hdr + X_CORES, X_HEADER - X_CORES);
    wb_put(&syn, hdr, X_HEADER);
    uint32_t cores = rd32(hdr + X_CORES), nin = rd32(hdr + X_INPUTS), nout = rd32(hdr + X_OUTPUTS);
    uint32_t meta = rd32(hdr + X_META), strtab_len = rd32(hdr + X_STRTAB);
    nconst = rd32(hdr + X_CONSTS);
    uint64_t pos = X_HEADER, n = ((uint64_t)nin + nout) * X_IO_RECORD + strtab_len;
    if (cores == 0 || cores > X_MAX_CORES || n > size - pos)
        goto done;
    n += (8 - (pos + n) % 8) % 8;
    if (n > size - pos || copy_crc(f, &syn, n, &crc))
        goto done;
    pos += n;
    for (unsigned c = 0; c < cores; c++) {
        if (size - pos < 8 || copy_crc(f, &syn, 8, &crc))
            goto done;
        uint64_t plen = rd64(syn.p + syn.len - 8);
        pos += 8;
        if (plen > size - pos)
            goto done;
        plen += (8 - (pos + plen) % 8) % 8;
        if (plen > size - pos || copy_crc(f, &syn, plen, &crc))
            goto done;
        pos += plen;
    }
    if (nconst > (size - pos) / 24 || !(data = calloc(nconst + 1, sizeof *data)) ||
        !(bytes = calloc(nconst + 1, sizeof *bytes)))
        goto done;
    for (; got < nconst; got++) {
        uint8_t rec[24], pad[8];
        if (size - pos < 24 || get_crc(f, rec, 24, &crc))
            goto done;
        pos += 24;
        uint64_t b = rd64(rec + 16), p = (8 - b % 8) % 8;
        if (b > size - pos || p > size - pos - b || !(data[got] = malloc(b ? (size_t)b : 1)) ||
            get_crc(f, data[got], (size_t)b, &crc) || get_crc(f, pad, (size_t)p, &crc))
            goto done;
        pos += b + p;
        bytes[got] = b;
        memset(rec + 16, 0, 8); /* the decoded stand-in holds no bytes */
        wb_put(&syn, rec, 24);
    }
    n = meta + (8 - meta % 8) % 8;
    if (n != size - pos || copy_crc(f, &syn, n, &crc) || syn.oom || (uint32_t)crc != rd32(hdr + X_CHECKSUM))
        goto done;
    put32(syn.p + X_CHECKSUM, tern_crc32(syn.p + X_CORES, syn.len - X_CORES));
    if (tern_exe_decode(syn.p, syn.len, out, err) != TERN_OK)
        goto done;
    for (uint32_t i = 0; i < nconst; i++) {
        free(out->consts[i].data);
        out->consts[i].data = data[i];
        out->consts[i].bytes = bytes[i];
        data[i] = NULL;
    }
    rc = 0;
done:
    for (uint32_t i = 0; data && i < got + (got < nconst); i++)
        free(data[i]);
    free(data);
    free(bytes);
    free(syn.p);
    return rc;
}

tern_status tern_exe_load(const char *path, tern_exe *out, tern_error *err)
{
    tern_exe_init(out);
    FILE *f = fopen(path, "rb");
    if (!f)
        return tern_error_set(err, TERN_ERR_IO, "loading %s: cannot open", path);
    if (fseek(f, 0, SEEK_END) != 0) {
        fclose(f);
        return tern_error_set(err, TERN_ERR_IO, "loading %s: cannot seek", path);
    }
    long size = ftell(f);
    rewind(f);
    if (size < 0) {
        fclose(f);
        return tern_error_set(err, TERN_ERR_IO, "loading %s: cannot size", path);
    }
    if (load_streamed(f, (uint64_t)size, out, err) == 0) {
        fclose(f);
        return TERN_OK;
    }
    tern_exe_init(out); /* the whole file, for the message that names what is wrong (or a version-1 file) */
    rewind(f);
    uint8_t *b = malloc((size_t)size + 1);
    size_t got = b ? fread(b, 1, (size_t)size, f) : 0;
    fclose(f);
    if (!b || got != (size_t)size) {
        free(b);
        return tern_error_set(err, TERN_ERR_IO, "loading %s: read failed", path);
    }
    tern_status st = tern_exe_decode(b, (size_t)size, out, err);
    free(b);
    if (st)
        return tern_error_prefix(err, "loading %s: ", path);
    return TERN_OK;
}
