/* Programs on disk: save as the binary format or as assembly text (by file extension), load either (by content:
 * the binary magic, else text), and deep-copy a program in memory. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tern/isa.h"

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !strcmp(s + n - m, suffix);
}

tern_status tern_program_save_file(const tern_program *p, const char *path, tern_error *err)
{
    uint8_t *bin = NULL;
    char *text = NULL;
    size_t len = 0;
    tern_status st;
    int as_text = ends_with(path, ".s") || ends_with(path, ".tasm");
    if (as_text) {
        st = tern_program_disasm(p, &text, err);
        len = text ? strlen(text) : 0;
    } else {
        st = tern_program_encode(p, &bin, &len, err);
    }
    if (st)
        return tern_error_prefix(err, "saving %s: ", path);
    FILE *f = fopen(path, "wb");
    if (!f) {
        free(bin);
        free(text);
        return tern_error_set(err, TERN_ERR_IO, "saving %s: cannot open for writing", path);
    }
    size_t wrote = fwrite(as_text ? (const void *)text : (const void *)bin, 1, len, f);
    int closed = fclose(f);
    free(bin);
    free(text);
    if (wrote != len || closed != 0)
        return tern_error_set(err, TERN_ERR_IO, "saving %s: write failed after %zu of %zu bytes", path, wrote, len);
    return TERN_OK;
}

tern_status tern_program_load_file(const char *path, tern_program *out, tern_error *err)
{
    tern_program_init(out);
    FILE *f = fopen(path, "rb");
    if (!f)
        return tern_error_set(err, TERN_ERR_IO, "loading %s: cannot open", path);
    size_t cap = 1 << 16, len = 0;
    uint8_t *buf = malloc(cap + 1);
    for (;;) {
        if (!buf) {
            fclose(f);
            return tern_error_set(err, TERN_ERR_NOMEM, "loading %s: out of memory", path);
        }
        size_t n = fread(buf + len, 1, cap - len, f);
        len += n;
        if (len < cap)
            break;
        cap *= 2;
        uint8_t *nb = realloc(buf, cap + 1);
        if (!nb)
            free(buf);
        buf = nb;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        return tern_error_set(err, TERN_ERR_IO, "loading %s: read error", path);
    }
    tern_status st;
    if (len >= 8 && !memcmp(buf, TERN_PROGRAM_MAGIC, 8)) {
        st = tern_program_decode(buf, len, out, err);
    } else {
        if (memchr(buf, '\0', len)) {
            free(buf);
            return tern_error_set(err, TERN_ERR_PARSE,
                                  "loading %s: neither a tern program (magic %s) nor assembly text (has NUL bytes)",
                                  path, TERN_PROGRAM_MAGIC);
        }
        buf[len] = '\0';
        st = tern_program_asm((const char *)buf, out, err);
    }
    free(buf);
    if (st)
        return tern_error_prefix(err, "loading %s: ", path);
    return TERN_OK;
}

tern_status tern_program_copy(tern_program *dst, const tern_program *src, tern_error *err)
{
    tern_program_init(dst);
    memcpy(dst->machine, src->machine, sizeof dst->machine);
    dst->num_semaphores = src->num_semaphores;
    /* each stream in one allocation of its exact size: a program of millions of instructions grown by doubling
     * would be copied (and its pages faulted in) about twice more */
    for (unsigned e = 0; e < TERN_ENGINE_COUNT; e++) {
        size_t n = src->streams[e].count;
        if (!n)
            continue;
        tern_instr *v = malloc(n * sizeof *v);
        if (!v) {
            tern_program_free(dst);
            return tern_error_set(err, TERN_ERR_NOMEM, "program copy: cannot allocate %zu %s instructions", n,
                                  tern_engine_name((tern_engine)e));
        }
        memcpy(v, src->streams[e].instrs, n * sizeof *v);
        dst->streams[e].instrs = v;
        dst->streams[e].count = dst->streams[e].capacity = n;
    }
    for (size_t t = 0; t < src->num_tensors; t++) {
        tern_status st = tern_program_add_tensor(dst, &src->tensors[t], err);
        if (st) {
            tern_program_free(dst);
            return st;
        }
    }
    return TERN_OK;
}
