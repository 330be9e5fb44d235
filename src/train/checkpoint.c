/* Training checkpoints: everything a run needs to resume bit-exactly - the step count, the caller's data
 * position and order tag, and every weight with its optimizer state - in one little-endian file closed by a
 * CRC-32 (docs/training.md has the layout). Writing goes to a temporary file renamed over the destination, so a
 * crash mid-write leaves the previous checkpoint whole. Loading parses and checks the whole file (magic,
 * version, CRC, optimizer, each weight's name, shape and state count against the trainer's) before anything in
 * the trainer changes; a problem is named with its byte offset. */
#include "train_internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CKPT_MAGIC "TERNCKPT"
#define CKPT_VERSION 1u

typedef struct {
    uint8_t *b;
    size_t n, cap;
    int oom;
} wbuf;

static void put(wbuf *w, const void *p, size_t n)
{
    if (w->oom)
        return;
    if (w->n + n > w->cap) {
        size_t cap = w->cap ? w->cap : 4096;
        while (cap < w->n + n)
            cap *= 2;
        uint8_t *nb = realloc(w->b, cap);
        if (!nb) {
            w->oom = 1;
            return;
        }
        w->b = nb;
        w->cap = cap;
    }
    memcpy(w->b + w->n, p, n);
    w->n += n;
}

static void put_u32(wbuf *w, uint32_t v)
{
    uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    put(w, b, 4);
}

static void put_u64(wbuf *w, uint64_t v)
{
    put_u32(w, (uint32_t)v);
    put_u32(w, (uint32_t)(v >> 32));
}

static void put_floats(wbuf *w, const float *f, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &f[i], 4);
        put_u32(w, u);
    }
}

tern_status tern_train_save_checkpoint(const tern_trainer *t, const char *path, uint64_t data_pos, uint64_t order,
                                       tern_error *err)
{
    tern_status sst = train_sync_host(t, err); /* device-resident weights and state: the current ones */
    if (sst)
        return sst;
    wbuf w = {0};
    put(&w, CKPT_MAGIC, 8);
    put_u32(&w, CKPT_VERSION);
    put_u32(&w, (uint32_t)t->o.optimizer);
    put_u64(&w, t->step);
    put_u64(&w, data_pos);
    put_u64(&w, order);
    put_u32(&w, (uint32_t)t->nw);
    for (size_t i = 0; i < t->nw; i++) {
        const train_weight *wt = &t->w[i];
        uint32_t nl = (uint32_t)strlen(wt->name);
        put_u32(&w, nl);
        put(&w, wt->name, nl);
        put_u32(&w, (uint32_t)wt->rank);
        for (int d = 0; d < wt->rank; d++)
            put_u64(&w, (uint64_t)wt->dims[d]);
        put_u32(&w, (uint32_t)wt->n_state);
        put_floats(&w, wt->val, wt->count);
        for (int k = 0; k < wt->n_state; k++)
            put_floats(&w, wt->state[k], wt->count);
    }
    if (!w.oom)
        put_u32(&w, tern_crc32(w.b, w.n));
    if (w.oom) {
        free(w.b);
        return tern_error_set(err, TERN_ERR_NOMEM, "checkpoint: out of memory");
    }
    size_t pl = strlen(path) + 8;
    char *tmp = malloc(pl);
    tern_status st = TERN_OK;
    if (!tmp) {
        free(w.b);
        return tern_error_set(err, TERN_ERR_NOMEM, "checkpoint: out of memory");
    }
    snprintf(tmp, pl, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        st = tern_error_set(err, TERN_ERR_IO, "checkpoint: cannot write '%s': %s", tmp, strerror(errno));
    } else {
        size_t wr = fwrite(w.b, 1, w.n, f);
        int failed = fflush(f) != 0;
        failed |= fclose(f) != 0; /* closed whether or not the flush failed */
        if (failed || wr != w.n)
            st = tern_error_set(err, TERN_ERR_IO, "checkpoint: writing '%s' failed after %zu of %zu bytes", tmp, wr,
                                w.n);
        else if (rename(tmp, path) != 0)
            st = tern_error_set(err, TERN_ERR_IO, "checkpoint: cannot rename '%s' to '%s': %s", tmp, path,
                                strerror(errno));
        if (st)
            remove(tmp);
    }
    free(tmp);
    free(w.b);
    return st;
}

typedef struct {
    const uint8_t *b;
    size_t n, at;
    const char *path;
    tern_error *err;
    int bad;
} rbuf;

static int need(rbuf *r, size_t n, const char *what)
{
    if (r->bad)
        return 0;
    if (r->n - r->at < n) {
        tern_error_set(r->err, TERN_ERR_PARSE, "checkpoint '%s': truncated at byte %zu (%s needs %zu bytes, %zu left)",
                       r->path, r->at, what, n, r->n - r->at);
        r->bad = 1;
        return 0;
    }
    return 1;
}

static uint32_t get_u32(rbuf *r, const char *what)
{
    if (!need(r, 4, what))
        return 0;
    const uint8_t *p = r->b + r->at;
    r->at += 4;
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get_u64(rbuf *r, const char *what)
{
    uint64_t lo = get_u32(r, what);
    return lo | (uint64_t)get_u32(r, what) << 32;
}

static int fail_at(rbuf *r, size_t at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail_at(rbuf *r, size_t at, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    tern_error_set(r->err, TERN_ERR_PARSE, "checkpoint '%s': byte %zu: %s", r->path, at, msg);
    r->bad = 1;
    return -1;
}

tern_status tern_train_load_checkpoint(tern_trainer *t, const char *path, uint64_t *data_pos, uint64_t *order,
                                       tern_error *err)
{
    /* device-resident weights: the host copies current first, so a weight the file leaves alone keeps its value */
    tern_status sst = train_sync_host(t, err);
    if (sst)
        return sst;
    FILE *f = fopen(path, "rb");
    if (!f)
        return tern_error_set(err, TERN_ERR_IO, "checkpoint: cannot open '%s': %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    uint8_t *b = malloc(cap);
    while (b) {
        n += fread(b + n, 1, cap - n, f);
        if (n < cap)
            break;
        uint8_t *nb = realloc(b, cap * 2);
        if (!nb) {
            free(b);
            b = NULL;
        } else {
            b = nb;
            cap *= 2;
        }
    }
    fclose(f);
    if (!b)
        return tern_error_set(err, TERN_ERR_NOMEM, "checkpoint: out of memory reading '%s'", path);
    rbuf r = {b, n, 0, path, err, 0};
    float **vals = calloc(t->nw * 3 + 1, sizeof *vals);
    if (!vals) {
        free(b);
        return tern_error_set(err, TERN_ERR_NOMEM, "checkpoint: out of memory");
    }
    if (need(&r, 8, "the magic") && memcmp(b, CKPT_MAGIC, 8))
        fail_at(&r, 0, "not a tern checkpoint (no TERNCKPT magic)");
    r.at = 8;
    if (!r.bad && n >= 12) {
        uint32_t crc = (uint32_t)b[n - 4] | (uint32_t)b[n - 3] << 8 | (uint32_t)b[n - 2] << 16 |
                       (uint32_t)b[n - 1] << 24;
        if (crc != tern_crc32(b, n - 4))
            fail_at(&r, n - 4, "CRC-32 mismatch: the file says %08x, its bytes give %08x", (unsigned)crc,
                    (unsigned)tern_crc32(b, n - 4));
        r.n = n - 4; /* the fields end where the CRC starts */
    }
    size_t at = r.at;
    uint32_t ver = get_u32(&r, "the version");
    if (!r.bad && ver != CKPT_VERSION)
        fail_at(&r, at, "version %u, this tern reads version %u", (unsigned)ver, CKPT_VERSION);
    at = r.at;
    uint32_t opt = get_u32(&r, "the optimizer");
    if (!r.bad && opt != (uint32_t)t->o.optimizer)
        fail_at(&r, at, "written by optimizer #%u, this run uses #%d", (unsigned)opt, (int)t->o.optimizer);
    uint64_t step = get_u64(&r, "the step");
    uint64_t pos = get_u64(&r, "the data position");
    uint64_t ord = get_u64(&r, "the data order");
    at = r.at;
    uint32_t nw = get_u32(&r, "the weight count");
    if (!r.bad && nw != t->nw)
        fail_at(&r, at, "%u weights, the model has %zu", (unsigned)nw, t->nw);
    for (size_t i = 0; i < t->nw && !r.bad; i++) {
        train_weight *w = &t->w[i];
        at = r.at;
        uint32_t nl = get_u32(&r, "a weight name's length");
        if (!need(&r, nl, "a weight name"))
            break;
        if (nl != strlen(w->name) || memcmp(b + r.at, w->name, nl)) {
            fail_at(&r, at, "weight #%zu: the checkpoint names another weight, the model has '%s'", i, w->name);
            break;
        }
        r.at += nl;
        at = r.at;
        uint32_t rank = get_u32(&r, "a rank");
        if (!r.bad && rank != (uint32_t)w->rank)
            fail_at(&r, at, "weight '%s': rank %u, the model's is %d", w->name, (unsigned)rank, w->rank);
        for (int d = 0; d < w->rank && !r.bad; d++) {
            at = r.at;
            uint64_t dim = get_u64(&r, "a dimension");
            if (!r.bad && dim != (uint64_t)w->dims[d])
                fail_at(&r, at, "weight '%s': dimension %d is %llu, the model's is %lld", w->name, d,
                        (unsigned long long)dim, (long long)w->dims[d]);
        }
        at = r.at;
        uint32_t ns = get_u32(&r, "a state count");
        if (!r.bad && ns != (uint32_t)w->n_state)
            fail_at(&r, at, "weight '%s': %u state tensors, this run keeps %d", w->name, (unsigned)ns, w->n_state);
        for (int k = 0; k <= w->n_state && !r.bad; k++) {
            if (!need(&r, w->count * 4, "weight data"))
                break;
            float *v = malloc(w->count * sizeof(float) + 1);
            vals[i * 3 + (size_t)k] = v;
            if (!v) {
                tern_error_set(err, TERN_ERR_NOMEM, "checkpoint: out of memory");
                r.bad = 1;
                break;
            }
            for (size_t e = 0; e < w->count; e++) {
                uint32_t u = get_u32(&r, "weight data");
                memcpy(&v[e], &u, 4);
            }
        }
    }
    if (!r.bad && r.at != r.n)
        fail_at(&r, r.at, "%zu bytes after the last weight", r.n - r.at);
    for (size_t i = 0; i < t->nw; i++)
        for (int k = 0; k < 3; k++) {
            float *v = vals[i * 3 + (size_t)k];
            if (!v)
                continue;
            if (r.bad) {
                free(v);
                continue;
            }
            float **dst = k == 0 ? &t->w[i].val : &t->w[i].state[k - 1];
            free(*dst);
            *dst = v;
        }
    free(vals);
    free(b);
    if (r.bad)
        return err->code;
    t->step = step;
    t->dev_valid = 0; /* the next step sets the loaded weights and state on the device */
    if (data_pos)
        *data_pos = pos;
    if (order)
        *order = ord;
    return TERN_OK;
}

uint64_t tern_train_step_count(const tern_trainer *t)
{
    return t->step;
}
