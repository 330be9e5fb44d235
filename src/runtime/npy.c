/* NumPy .npy files (format version 1.0/2.0, little-endian, C order) for model inputs and outputs: read into an
 * array of a tern element kind, write fp32/int32/... arrays back. Malformed headers are errors naming the file
 * and the problem. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tern/npy.h"

static const struct {
    const char *descr;
    tern_npy_type type;
    size_t size;
} kinds[] = {{"<f4", TERN_NPY_F32, 4}, {"<f8", TERN_NPY_F64, 8}, {"<f2", TERN_NPY_F16, 2},
             {"<i8", TERN_NPY_I64, 8}, {"<i4", TERN_NPY_I32, 4}, {"<i2", TERN_NPY_I16, 2},
             {"|i1", TERN_NPY_I8, 1},  {"|u1", TERN_NPY_U8, 1},  {"|b1", TERN_NPY_BOOL, 1},
             {"<u4", TERN_NPY_U32, 4}, {"<u2", TERN_NPY_U16, 2}, {"<u8", TERN_NPY_U64, 8}};

size_t tern_npy_type_size(tern_npy_type t)
{
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (kinds[i].type == t)
            return kinds[i].size;
    return 0;
}

const char *tern_npy_type_descr(tern_npy_type t)
{
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (kinds[i].type == t)
            return kinds[i].descr;
    return "?";
}

int tern_npy_is_text(const tern_npy *a) { return a->type == TERN_NPY_UNICODE || a->type == TERN_NPY_BYTES; }

size_t tern_npy_elem_size(const tern_npy *a)
{
    return a->type == TERN_NPY_UNICODE ? 4u * a->chars : a->type == TERN_NPY_BYTES ? a->chars
                                                                                    : tern_npy_type_size(a->type);
}

void tern_npy_free(tern_npy *a)
{
    free(a->data);
    memset(a, 0, sizeof *a);
}

/* Saturates at UINT64_MAX when the product does not fit (tern_npy_read refuses such a shape; an array built in
 * memory then never compares equal to a real element count). */
uint64_t tern_npy_count(const tern_npy *a)
{
    uint64_t n;
    tern_dims_product(a->dims, a->rank < TERN_NPY_MAX_RANK ? a->rank : TERN_NPY_MAX_RANK, 1, 0, &n, "", NULL);
    return n;
}

static const char *find_key(const char *h, const char *key)
{
    const char *p = strstr(h, key);
    if (!p)
        return NULL;
    p += strlen(key);
    while (*p == ' ' || *p == ':')
        p++;
    return p;
}

tern_status tern_npy_read(const char *path, tern_npy *out, tern_error *err)
{
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "rb");
    if (!f)
        return tern_error_set(err, TERN_ERR_IO, "%s: cannot open", path);
    uint8_t pre[12];
    if (fread(pre, 1, 10, f) != 10 || memcmp(pre, "\x93NUMPY", 6)) {
        fclose(f);
        return tern_error_set(err, TERN_ERR_PARSE, "%s: not a .npy file (magic)", path);
    }
    uint32_t hlen;
    if (pre[6] == 1) {
        hlen = (uint32_t)pre[8] | (uint32_t)pre[9] << 8;
    } else if (pre[6] == 2 || pre[6] == 3) {
        if (fread(pre + 10, 1, 2, f) != 2) {
            fclose(f);
            return tern_error_set(err, TERN_ERR_PARSE, "%s: truncated header", path);
        }
        hlen = (uint32_t)pre[8] | (uint32_t)pre[9] << 8 | (uint32_t)pre[10] << 16 | (uint32_t)pre[11] << 24;
    } else {
        fclose(f);
        return tern_error_set(err, TERN_ERR_UNSUPPORTED, "%s: .npy format version %u", path, pre[6]);
    }
    if (hlen == 0 || hlen > 65536) {
        fclose(f);
        return tern_error_set(err, TERN_ERR_PARSE, "%s: header length %u", path, hlen);
    }
    char *h = malloc(hlen + 1);
    if (!h || fread(h, 1, hlen, f) != hlen) {
        free(h);
        fclose(f);
        return tern_error_set(err, TERN_ERR_PARSE, "%s: truncated header", path);
    }
    h[hlen] = '\0';
    tern_status st = TERN_OK;
    const char *d = find_key(h, "'descr'");
    const char *fo = find_key(h, "'fortran_order'");
    const char *sh = find_key(h, "'shape'");
    if (!d || !fo || !sh)
        st = tern_error_set(err, TERN_ERR_PARSE, "%s: header lacks descr, fortran_order or shape", path);
    if (!st && strncmp(fo, "False", 5))
        st = tern_error_set(err, TERN_ERR_UNSUPPORTED, "%s: Fortran-ordered arrays are not supported", path);
    size_t es = 0;
    if (!st) {
        int found = 0;
        for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
            if (d[0] == '\'' && !strncmp(d + 1, kinds[i].descr, 3) && d[4] == '\'') {
                out->type = kinds[i].type;
                es = kinds[i].size;
                found = 1;
            }
        if (!found && d[0] == '\'' && (!strncmp(d + 1, "<U", 2) || !strncmp(d + 1, "|S", 2))) {
            char *end;
            long v = strtol(d + 3, &end, 10);
            if (end != d + 3 && *end == '\'' && v >= 1 && v <= 65536) {
                out->type = d[1] == '<' ? TERN_NPY_UNICODE : TERN_NPY_BYTES;
                out->chars = (unsigned)v;
                es = tern_npy_elem_size(out);
                found = 1;
            }
        }
        if (!found) { /* name the descr as numpy wrote it: the quoted word, not the bytes after the key */
            int len = 0;
            const char *q = d[0] == '\'' || d[0] == '"' ? d + 1 : d;
            while (q[len] && q[len] != d[0] && q[len] != ',' && q[len] != '}' && len < 32)
                len++;
            st = tern_error_set(err, TERN_ERR_UNSUPPORTED, "%s: dtype '%.*s' not supported (float32/16/64, int8-64, "
                                "uint8-64, bool, text <U1..65536 / |S1..65536, little-endian)", path, len, q);
        }
    }
    if (!st) {
        if (*sh != '(')
            st = tern_error_set(err, TERN_ERR_PARSE, "%s: malformed shape", path);
        const char *p = sh + 1;
        while (!st && *p && *p != ')') {
            while (*p == ' ' || *p == ',')
                p++;
            if (*p == ')')
                break;
            char *end;
            long long v = strtoll(p, &end, 10);
            if (end == p || v < 0 || out->rank >= TERN_NPY_MAX_RANK)
                st = tern_error_set(err, TERN_ERR_PARSE, "%s: malformed shape (rank at most %d)", path,
                                    TERN_NPY_MAX_RANK);
            else
                out->dims[out->rank++] = v;
            p = end;
        }
    }
    free(h);
    if (!st) {
        /* Checked: a shape whose product wraps must not read as a small array. 16 GiB is the reader's cap. */
        uint64_t bytes, n = tern_npy_count(out);
        st = tern_dims_product(out->dims, out->rank, es ? es : 1, 1ull << 34, &bytes, path, err);
        if (!st) {
            out->data = malloc(bytes ? bytes : 1);
            if (!out->data)
                st = tern_error_set(err, TERN_ERR_NOMEM, "%s: out of memory", path);
            else if (fread(out->data, es, n, f) != n)
                st = tern_error_set(err, TERN_ERR_PARSE, "%s: truncated data (%llu elements expected)", path,
                                    (unsigned long long)n);
        }
    }
    fclose(f);
    if (st)
        tern_npy_free(out);
    return st;
}

tern_status tern_npy_write(const char *path, const tern_npy *a, tern_error *err)
{
    char shape[256] = "";
    size_t used = 0;
    for (int d = 0; d < a->rank; d++)
        used += (size_t)snprintf(shape + used, sizeof shape - used, "%lld,%s", (long long)a->dims[d],
                                 d + 1 < a->rank ? " " : "");
    if (a->rank > 1 && used > 0)
        shape[used - 1] = '\0'; /* numpy writes (2, 3) but (2,) */
    char h[400], descr[16];
    if (a->type == TERN_NPY_UNICODE || a->type == TERN_NPY_BYTES)
        snprintf(descr, sizeof descr, "%s%u", a->type == TERN_NPY_UNICODE ? "<U" : "|S", a->chars);
    else
        snprintf(descr, sizeof descr, "%s", tern_npy_type_descr(a->type));
    int n = snprintf(h, sizeof h, "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", descr, shape);
    size_t total = 10 + (size_t)n + 1;
    size_t pad = (64 - total % 64) % 64;
    FILE *f = fopen(path, "wb");
    if (!f)
        return tern_error_set(err, TERN_ERR_IO, "%s: cannot open for writing", path);
    uint16_t hl = (uint16_t)((size_t)n + pad + 1);
    uint8_t pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (uint8_t)hl, (uint8_t)(hl >> 8)};
    int ok = fwrite(pre, 1, 10, f) == 10 && fwrite(h, 1, (size_t)n, f) == (size_t)n;
    for (size_t i = 0; i < pad && ok; i++)
        ok = fputc(' ', f) != EOF;
    ok = ok && fputc('\n', f) != EOF;
    uint64_t count = tern_npy_count(a);
    size_t es = tern_npy_elem_size(a);
    ok = ok && (count == 0 || fwrite(a->data, es, count, f) == count); /* an empty array is its header alone */
    ok = (fclose(f) == 0) && ok;
    if (!ok)
        return tern_error_set(err, TERN_ERR_IO, "%s: write failed", path);
    return TERN_OK;
}

/* Element i as a double, whatever the stored type (fp16 through num). */
double tern_npy_get(const tern_npy *a, uint64_t i)
{
    const uint8_t *p = (const uint8_t *)a->data + i * tern_npy_elem_size(a);
    switch (a->type) {
    case TERN_NPY_UNICODE:
    case TERN_NPY_BYTES: return NAN;
    case TERN_NPY_F32: { float v; memcpy(&v, p, 4); return v; }
    case TERN_NPY_F64: { double v; memcpy(&v, p, 8); return v; }
    case TERN_NPY_F16: { uint16_t v; memcpy(&v, p, 2); return tern_fp16_to_f32(v); }
    case TERN_NPY_I64: { int64_t v; memcpy(&v, p, 8); return (double)v; }
    case TERN_NPY_U64: { uint64_t v; memcpy(&v, p, 8); return (double)v; }
    case TERN_NPY_I32: { int32_t v; memcpy(&v, p, 4); return v; }
    case TERN_NPY_U32: { uint32_t v; memcpy(&v, p, 4); return v; }
    case TERN_NPY_I16: { int16_t v; memcpy(&v, p, 2); return v; }
    case TERN_NPY_U16: { uint16_t v; memcpy(&v, p, 2); return v; }
    case TERN_NPY_I8: return (int8_t)p[0];
    case TERN_NPY_U8:
    case TERN_NPY_BOOL: return p[0];
    }
    return 0;
}

/* ---- text ---- */

static size_t utf8_put(uint32_t c, uint8_t *o)
{
    if (c < 0x80) {
        o[0] = (uint8_t)c;
        return 1;
    }
    if (c < 0x800) {
        o[0] = (uint8_t)(0xc0 | c >> 6), o[1] = (uint8_t)(0x80 | (c & 0x3f));
        return 2;
    }
    if (c < 0x10000) {
        o[0] = (uint8_t)(0xe0 | c >> 12), o[1] = (uint8_t)(0x80 | ((c >> 6) & 0x3f));
        o[2] = (uint8_t)(0x80 | (c & 0x3f));
        return 3;
    }
    o[0] = (uint8_t)(0xf0 | c >> 18), o[1] = (uint8_t)(0x80 | ((c >> 12) & 0x3f));
    o[2] = (uint8_t)(0x80 | ((c >> 6) & 0x3f)), o[3] = (uint8_t)(0x80 | (c & 0x3f));
    return 4;
}

tern_status tern_npy_text_to_cells(const tern_npy *a, uint8_t *cells, unsigned cell, tern_error *err)
{
    if (!tern_npy_is_text(a))
        return tern_error_set(err, TERN_ERR_INVALID, "npy: a %s array is not text", tern_npy_type_descr(a->type));
    uint64_t n = tern_npy_count(a);
    size_t es = tern_npy_elem_size(a);
    memset(cells, 0, (size_t)n * cell);
    for (uint64_t i = 0; i < n; i++) {
        const uint8_t *e = (const uint8_t *)a->data + i * es;
        uint8_t *o = cells + i * cell;
        size_t used = 0;
        for (unsigned k = 0; k < a->chars; k++) {
            uint32_t c;
            if (a->type == TERN_NPY_BYTES)
                c = e[k];
            else
                c = (uint32_t)e[4 * k] | (uint32_t)e[4 * k + 1] << 8 | (uint32_t)e[4 * k + 2] << 16 |
                    (uint32_t)e[4 * k + 3] << 24;
            if (c == 0)
                break; /* numpy pads with NULs */
            if (a->type == TERN_NPY_UNICODE && (c > 0x10ffff || (c >= 0xd800 && c < 0xe000)))
                return tern_error_set(err, TERN_ERR_INVALID, "npy: text element %llu holds code point 0x%x, not a "
                                      "Unicode scalar value", (unsigned long long)i, c);
            uint8_t u[4];
            size_t m = a->type == TERN_NPY_BYTES ? (u[0] = (uint8_t)c, 1) : utf8_put(c, u);
            if (used + m > cell)
                return tern_error_set(err, TERN_ERR_RANGE, "npy: text element %llu is longer than a device text cell "
                                      "(%u bytes of UTF-8)", (unsigned long long)i, cell);
            memcpy(o + used, u, m);
            used += m;
        }
    }
    return TERN_OK;
}

/* Decodes one UTF-8 sequence at p (len bytes left); 0 on invalid input. */
static size_t utf8_get(const uint8_t *p, size_t len, uint32_t *c)
{
    if (p[0] < 0x80)
        return *c = p[0], 1;
    size_t m = (p[0] & 0xe0) == 0xc0 ? 2 : (p[0] & 0xf0) == 0xe0 ? 3 : (p[0] & 0xf8) == 0xf0 ? 4 : 0;
    if (!m || m > len)
        return 0;
    uint32_t v = p[0] & (0x7fu >> m);
    for (size_t k = 1; k < m; k++) {
        if ((p[k] & 0xc0) != 0x80)
            return 0;
        v = v << 6 | (p[k] & 0x3fu);
    }
    static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (v < min[m] || v > 0x10ffff || (v >= 0xd800 && v < 0xe000))
        return 0;
    *c = v;
    return m;
}

tern_status tern_npy_text_from_cells(tern_npy *out, int rank, const int64_t *dims, const uint8_t *cells,
                                     unsigned cell, tern_error *err)
{
    memset(out, 0, sizeof *out);
    if (rank < 0 || rank > TERN_NPY_MAX_RANK)
        return tern_error_set(err, TERN_ERR_RANGE, "npy: rank %d outside [0, %d]", rank, TERN_NPY_MAX_RANK);
    out->type = TERN_NPY_UNICODE;
    out->rank = rank;
    for (int d = 0; d < rank; d++)
        out->dims[d] = dims[d];
    uint64_t n = tern_npy_count(out);
    unsigned chars = 1; /* numpy's narrowest text dtype is <U1 */
    for (int pass = 0; pass < 2; pass++) {
        if (pass && !(out->data = calloc(n ? (size_t)n * 4u * chars : 1, 1)))
            return tern_error_set(err, TERN_ERR_NOMEM, "npy: out of memory for %llu texts", (unsigned long long)n);
        for (uint64_t i = 0; i < n; i++) {
            const uint8_t *p = cells + i * cell;
            size_t len = strnlen((const char *)p, cell), k = 0;
            unsigned count = 0;
            while (k < len) {
                uint32_t c;
                size_t m = utf8_get(p + k, len - k, &c);
                if (!m) {
                    tern_npy_free(out);
                    return tern_error_set(err, TERN_ERR_INVALID, "npy: text element %llu is not valid UTF-8 (byte %zu)",
                                          (unsigned long long)i, k);
                }
                if (pass) {
                    uint8_t *o = (uint8_t *)out->data + (i * chars + count) * 4u;
                    o[0] = (uint8_t)c, o[1] = (uint8_t)(c >> 8), o[2] = (uint8_t)(c >> 16), o[3] = (uint8_t)(c >> 24);
                }
                count++;
                k += m;
            }
            if (!pass && count > chars)
                chars = count;
        }
    }
    out->chars = chars;
    return TERN_OK;
}
