/* Machine-file loader: finds a machine by name or path, parses it with cJSON, resolves the files it references
 * (chip -> core, instance -> chip, system -> chip and optionally the instance it is built from), and
 * validates every field against the schema in docs/machines.md: required keys, JSON types, units of the right
 * kind, ranges, integrality, unknown keys (with a did-you-mean), duplicate keys, reference cycles and
 * cross-field rules. Every figure must carry a source; the loader keeps figures, sources, conflicts and
 * published headline figures so `tern info` can show where each number came from. All state lives in the
 * loader context and the returned machine. */
#include "tern/arch.h"

#include "arch/units.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define SCHEMA_ID "tern-machine/1"
#define MAX_DEPTH 8
#define MAX_FILE_BYTES (4u << 20)

struct tern_machine {
    tern_machine_kind kind;
    char name[64];
    char *description;
    char *path;
    tern_core_spec core;
    tern_chip_spec chip;
    tern_instance_spec inst;
    tern_fact *facts;
    size_t nfacts, capfacts;
    tern_conflict *conflicts;
    size_t nconflicts, capconflicts;
    tern_published *published;
    size_t npublished, cappublished;
};

/* One file being parsed. */
typedef struct {
    tern_machine *m;
    const char *file;  /* path as shown in messages */
    const char *fname; /* interned basename, recorded in facts */
    tern_error *err;
    char *const *stack; /* canonical paths of the files being loaded, outermost first (cycle detection) */
    int depth;
    tern_machine_kind kind;
} ctx;

/* ---------------------------------------------------------------------------------------------- strings */

/* snprintf that truncates silently: messages and paths here are bounded by design. */
static void bprintf(char *buf, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void bprintf(char *buf, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, cap, fmt, ap);
    va_end(ap);
    (void)n;
}

static char *dupstr(const char *s)
{
    if (!s)
        return NULL;
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

static void copy_str(char *dst, size_t cap, const char *src)
{
    bprintf(dst, cap, "%s", src);
}

static const char *basename_of(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

static const char *json_type_name(const cJSON *j)
{
    if (!j)
        return "nothing";
    if (cJSON_IsNull(j))
        return "null";
    if (cJSON_IsBool(j))
        return "a boolean";
    if (cJSON_IsNumber(j))
        return "a number";
    if (cJSON_IsString(j))
        return "a string";
    if (cJSON_IsArray(j))
        return "an array";
    if (cJSON_IsObject(j))
        return "an object";
    return "an invalid value";
}

/* Short rendering of a JSON value for messages. */
static void render(const cJSON *j, char *buf, size_t cap)
{
    if (!j) {
        bprintf(buf, cap, "(missing)");
    } else if (cJSON_IsNumber(j)) {
        bprintf(buf, cap, "%.15g", j->valuedouble);
    } else if (cJSON_IsString(j)) {
        bprintf(buf, cap, "\"%.60s\"", j->valuestring);
    } else if (cJSON_IsBool(j)) {
        bprintf(buf, cap, "%s", cJSON_IsTrue(j) ? "true" : "false");
    } else if (cJSON_IsNull(j)) {
        bprintf(buf, cap, "null");
    } else {
        char *p = cJSON_PrintUnformatted(j);
        bprintf(buf, cap, "%.60s%s", p ? p : "?", p && strlen(p) > 60 ? "..." : "");
        free(p);
    }
}

static void join_path(char *out, size_t cap, const char *prefix, const char *key)
{
    if (prefix && *prefix)
        bprintf(out, cap, "%s.%s", prefix, key);
    else
        bprintf(out, cap, "%s", key);
}

static size_t edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 63 || lb > 63)
        return 99;
    size_t row[64];
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t cost = tolower((unsigned char)a[i - 1]) == tolower((unsigned char)b[j - 1]) ? 0 : 1;
            size_t best = diag + cost;
            if (row[j] + 1 < best)
                best = row[j] + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

/* ------------------------------------------------------------------------------------------------ errors */

static bool fail(ctx *c, tern_status code, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static bool fail(ctx *c, tern_status code, const char *path, const char *fmt, ...)
{
    char what[TERN_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (path && *path)
        tern_error_set(c->err, code, "machine %s: field %s: %s", c->file, path, what);
    else
        tern_error_set(c->err, code, "machine %s: %s", c->file, what);
    return false;
}

/* ------------------------------------------------------------------------------------ recorded figures */

static bool grow(void **arr, size_t *cap, size_t n, size_t elem)
{
    if (n < *cap)
        return true;
    size_t nc = *cap ? *cap * 2 : 32;
    void *p = realloc(*arr, nc * elem);
    if (!p)
        return false;
    *arr = p;
    *cap = nc;
    return true;
}

static bool nomem(ctx *c)
{
    return fail(c, TERN_ERR_NOMEM, NULL, "out of memory");
}

static bool add_fact(ctx *c, const char *path, const char *text, double value, double si, const char *unit,
                     const char *source, const char *note)
{
    tern_machine *m = c->m;
    if (!grow((void **)&m->facts, &m->capfacts, m->nfacts, sizeof *m->facts))
        return nomem(c);
    tern_fact *f = &m->facts[m->nfacts];
    memset(f, 0, sizeof *f);
    f->file = dupstr(c->fname);
    f->path = dupstr(path);
    f->text = text ? dupstr(text) : NULL;
    f->value = value;
    f->value_si = si;
    f->unit = dupstr(unit ? unit : "");
    f->source = dupstr(source);
    f->note = note ? dupstr(note) : NULL;
    m->nfacts++;
    if (!f->file || !f->path || !f->unit || !f->source || (text && !f->text) || (note && !f->note))
        return nomem(c);
    return true;
}

/* ------------------------------------------------------------------------------------ object checking */

/* Reject keys outside allowed (typos) and duplicate keys; obj must be an object. */
static bool check_keys(ctx *c, const cJSON *obj, const char *path, const char *const *allowed, size_t nallowed)
{
    for (const cJSON *k = obj->child; k; k = k->next) {
        bool ok = false;
        for (size_t i = 0; i < nallowed; i++)
            if (strcmp(k->string, allowed[i]) == 0)
                ok = true;
        char full[256];
        join_path(full, sizeof full, path, k->string);
        if (!ok) {
            const char *best = NULL;
            size_t bestd = 3;
            for (size_t i = 0; i < nallowed; i++) {
                size_t d = edit_distance(k->string, allowed[i]);
                if (d < bestd) {
                    bestd = d;
                    best = allowed[i];
                }
            }
            if (best)
                return fail(c, TERN_ERR_INVALID, full, "unknown key \"%s\" (did you mean \"%s\"?)", k->string,
                            best);
            return fail(c, TERN_ERR_INVALID, full, "unknown key \"%s\"", k->string);
        }
        for (const cJSON *o = obj->child; o != k; o = o->next)
            if (strcmp(o->string, k->string) == 0)
                return fail(c, TERN_ERR_INVALID, full, "duplicate key \"%s\"", k->string);
    }
    return true;
}

#define CHECK_KEYS(c, obj, path, ...)                                                                        \
    do {                                                                                                     \
        static const char *const allowed_[] = {__VA_ARGS__};                                                 \
        if (!check_keys((c), (obj), (path), allowed_, sizeof allowed_ / sizeof allowed_[0]))                 \
            return false;                                                                                    \
    } while (0)

/* Fetch a child object that must be present (or, if optional, may be absent: *out = NULL). */
static bool get_object(ctx *c, const cJSON *parent, const char *prefix, const char *key, bool required,
                       const cJSON **out)
{
    char path[256];
    join_path(path, sizeof path, prefix, key);
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(parent, key);
    *out = NULL;
    if (!j) {
        if (required)
            return fail(c, TERN_ERR_INVALID, path, "missing (expected an object)");
        return true;
    }
    if (!cJSON_IsObject(j)) {
        char v[96];
        render(j, v, sizeof v);
        return fail(c, TERN_ERR_INVALID, path, "expected an object, got %s %s", json_type_name(j), v);
    }
    *out = j;
    return true;
}

/* A plain string (not a sourced figure): references, names, descriptions. */
static bool get_plain_string(ctx *c, const cJSON *parent, const char *prefix, const char *key, bool required,
                             size_t maxlen, const char **out)
{
    char path[256];
    join_path(path, sizeof path, prefix, key);
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(parent, key);
    *out = NULL;
    if (!j) {
        if (required)
            return fail(c, TERN_ERR_INVALID, path, "missing (expected a string)");
        return true;
    }
    if (!cJSON_IsString(j)) {
        char v[96];
        render(j, v, sizeof v);
        return fail(c, TERN_ERR_INVALID, path, "expected a string, got %s %s", json_type_name(j), v);
    }
    if (j->valuestring[0] == '\0')
        return fail(c, TERN_ERR_INVALID, path, "expected a non-empty string, got \"\"");
    if (strlen(j->valuestring) > maxlen)
        return fail(c, TERN_ERR_RANGE, path, "string longer than %zu characters: \"%.40s...\"", maxlen,
                    j->valuestring);
    *out = j->valuestring;
    return true;
}

/* Common part of a sourced figure {"value", "unit", "source", "note"}: checks keys, source, note. */
static bool figure_common(ctx *c, const cJSON *j, const char *path, const char **source, const char **note)
{
    if (!cJSON_IsObject(j)) {
        char v[96];
        render(j, v, sizeof v);
        return fail(c, TERN_ERR_INVALID, path,
                    "expected a sourced figure {\"value\": ..., \"unit\": ..., \"source\": ...}, got %s %s",
                    json_type_name(j), v);
    }
    CHECK_KEYS(c, j, path, "value", "unit", "source", "note");
    char sub[256];
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(j, "source");
    join_path(sub, sizeof sub, path, "source");
    if (!s)
        return fail(c, TERN_ERR_INVALID, sub, "missing: every figure must name its public source");
    if (!cJSON_IsString(s) || s->valuestring[0] == '\0') {
        char v[96];
        render(s, v, sizeof v);
        return fail(c, TERN_ERR_INVALID, sub, "expected a non-empty string naming the source, got %s %s",
                    json_type_name(s), v);
    }
    *source = s->valuestring;
    *note = NULL;
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(j, "note");
    if (n) {
        join_path(sub, sizeof sub, path, "note");
        if (!cJSON_IsString(n)) {
            char v[96];
            render(n, v, sizeof v);
            return fail(c, TERN_ERR_INVALID, sub, "expected a string, got %s %s", json_type_name(n), v);
        }
        *note = n->valuestring;
    }
    if (!cJSON_GetObjectItemCaseSensitive(j, "value")) {
        join_path(sub, sizeof sub, path, "value");
        return fail(c, TERN_ERR_INVALID, sub, "missing");
    }
    return true;
}

typedef struct {
    arch_unit_kind unit;
    double lo, hi; /* in SI */
    bool integer;
} numrule;

/* A numeric sourced figure at prefix.key; returns its SI value in *out. present (may be NULL) tells whether
 * an optional figure was there. */
static bool get_num_at(ctx *c, const cJSON *j, const char *path, numrule r, double *out)
{
    const char *source, *note;
    if (!figure_common(c, j, path, &source, &note))
        return false;
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, "value");
    const cJSON *u = cJSON_GetObjectItemCaseSensitive(j, "unit");
    char vpath[256], upath[256];
    join_path(vpath, sizeof vpath, path, "value");
    join_path(upath, sizeof upath, path, "unit");
    if (!cJSON_IsNumber(v)) {
        char rv[96];
        render(v, rv, sizeof rv);
        return fail(c, TERN_ERR_INVALID, vpath, "expected a number, got %s %s", json_type_name(v), rv);
    }
    double scale = 1.0;
    const char *unit = "";
    if (r.unit == ARCH_UNIT_NONE) {
        if (u) {
            char ru[96];
            render(u, ru, sizeof ru);
            return fail(c, TERN_ERR_INVALID, upath, "this figure is dimensionless: omit \"unit\" (got %s)", ru);
        }
    } else {
        if (!u)
            return fail(c, TERN_ERR_INVALID, upath, "missing (expected one of: %s)", arch_unit_accepted(r.unit));
        if (!cJSON_IsString(u)) {
            char ru[96];
            render(u, ru, sizeof ru);
            return fail(c, TERN_ERR_INVALID, upath, "expected a string, got %s %s", json_type_name(u), ru);
        }
        unit = u->valuestring;
        if (!arch_unit_scale(r.unit, unit, &scale))
            return fail(c, TERN_ERR_INVALID, upath, "unit \"%s\" is not one of: %s", unit,
                        arch_unit_accepted(r.unit));
    }
    double raw = v->valuedouble;
    double si = raw * scale;
    const char *siu = arch_unit_si_name(r.unit);
    if (!isfinite(si) || si < r.lo || si > r.hi) {
        if (scale != 1.0)
            return fail(c, TERN_ERR_RANGE, path, "value %.15g %s (= %g %s) is out of range [%g, %g] %s", raw, unit,
                        si, siu, r.lo, r.hi, siu);
        return fail(c, TERN_ERR_RANGE, path, "value %.15g%s%s is out of range [%g, %g]%s%s", raw, *unit ? " " : "",
                    unit, r.lo, r.hi, *siu ? " " : "", siu);
    }
    if (r.integer && si != floor(si))
        return fail(c, TERN_ERR_INVALID, path, "expected a whole number, got %.15g%s%s", raw, *unit ? " " : "",
                    unit);
    *out = si;
    return add_fact(c, path, NULL, raw, si, unit, source, note);
}

static bool get_num(ctx *c, const cJSON *parent, const char *prefix, const char *key, bool required, numrule r,
                    double *out, bool *present)
{
    char path[256];
    join_path(path, sizeof path, prefix, key);
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(parent, key);
    if (present)
        *present = j != NULL;
    if (!j) {
        if (required)
            return fail(c, TERN_ERR_INVALID, path, "missing (expected a sourced figure%s%s)",
                        r.unit == ARCH_UNIT_NONE ? "" : " in ", r.unit == ARCH_UNIT_NONE ? "" : arch_unit_accepted(r.unit));
        *out = 0;
        return true;
    }
    return get_num_at(c, j, path, r, out);
}

static bool get_uint(ctx *c, const cJSON *parent, const char *prefix, const char *key, arch_unit_kind unit,
                     double lo, double hi, unsigned *out)
{
    double v;
    numrule r = {unit, lo, hi, true};
    if (!get_num(c, parent, prefix, key, true, r, &v, NULL))
        return false;
    *out = (unsigned)v;
    return true;
}

static bool get_u64(ctx *c, const cJSON *parent, const char *prefix, const char *key, arch_unit_kind unit,
                    double lo, double hi, uint64_t *out)
{
    double v;
    numrule r = {unit, lo, hi, true};
    if (!get_num(c, parent, prefix, key, true, r, &v, NULL))
        return false;
    *out = (uint64_t)v;
    return true;
}

static bool get_dbl(ctx *c, const cJSON *parent, const char *prefix, const char *key, arch_unit_kind unit,
                    double lo, double hi, double *out)
{
    numrule r = {unit, lo, hi, false};
    return get_num(c, parent, prefix, key, true, r, out, NULL);
}

/* A string-valued sourced figure ({"value": "NeuronCore-v3", "source": ...}). */
static bool get_text(ctx *c, const cJSON *parent, const char *prefix, const char *key, char *dst, size_t cap)
{
    char path[256], vpath[256];
    join_path(path, sizeof path, prefix, key);
    join_path(vpath, sizeof vpath, path, "value");
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(parent, key);
    if (!j)
        return fail(c, TERN_ERR_INVALID, path, "missing (expected a sourced figure with a string value)");
    const char *source, *note;
    if (!figure_common(c, j, path, &source, &note))
        return false;
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, "value");
    if (!cJSON_IsString(v) || v->valuestring[0] == '\0') {
        char rv[96];
        render(v, rv, sizeof rv);
        return fail(c, TERN_ERR_INVALID, vpath, "expected a non-empty string, got %s %s", json_type_name(v), rv);
    }
    if (cJSON_GetObjectItemCaseSensitive(j, "unit")) {
        char upath[256];
        join_path(upath, sizeof upath, path, "unit");
        return fail(c, TERN_ERR_INVALID, upath, "a text figure has no unit");
    }
    if (strlen(v->valuestring) >= cap)
        return fail(c, TERN_ERR_RANGE, vpath, "longer than %zu characters: \"%s\"", cap - 1, v->valuestring);
    copy_str(dst, cap, v->valuestring);
    return add_fact(c, path, v->valuestring, 0, 0, "", source, note);
}

/* A map dtype -> figure ("macs_per_pe_cycle", "elems_per_cycle"); required lists the dtypes that must be
 * present. */
static bool get_dtype_map(ctx *c, const cJSON *parent, const char *prefix, const char *key, numrule r,
                          const tern_arch_dtype *required, size_t nrequired, double *out)
{
    char path[256];
    const cJSON *obj;
    if (!get_object(c, parent, prefix, key, true, &obj))
        return false;
    join_path(path, sizeof path, prefix, key);
    for (int i = 0; i < TERN_ARCH_DTYPE_COUNT; i++)
        out[i] = 0;
    for (const cJSON *k = obj->child; k; k = k->next) {
        char kpath[256];
        join_path(kpath, sizeof kpath, path, k->string);
        tern_arch_dtype dt;
        if (tern_arch_dtype_from_name(k->string, &dt) != TERN_OK)
            return fail(c, TERN_ERR_INVALID, kpath,
                        "unknown data type \"%s\" (expected fp32, tf32, bf16, fp16, fp8, mxfp8, mxfp4)", k->string);
        for (const cJSON *o = obj->child; o != k; o = o->next)
            if (strcmp(o->string, k->string) == 0)
                return fail(c, TERN_ERR_INVALID, kpath, "duplicate key \"%s\"", k->string);
        if (!get_num_at(c, k, kpath, r, &out[dt]))
            return false;
    }
    for (size_t i = 0; i < nrequired; i++) {
        if (!cJSON_GetObjectItemCaseSensitive(obj, tern_arch_dtype_name(required[i]))) {
            char kpath[256];
            join_path(kpath, sizeof kpath, path, tern_arch_dtype_name(required[i]));
            return fail(c, TERN_ERR_INVALID, kpath, "missing (required data type)");
        }
    }
    return true;
}

/* ------------------------------------------------------------------------------------------ file access */

static bool file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static bool valid_name(const char *s)
{
    if (!s[0] || s[0] == '.' || strlen(s) >= 64)
        return false;
    for (const char *p = s; *p; p++)
        if (!isalnum((unsigned char)*p) && *p != '.' && *p != '_' && *p != '-')
            return false;
    return true;
}

static bool looks_like_path(const char *s)
{
    size_t n = strlen(s);
    return strchr(s, '/') != NULL || (n > 5 && strcmp(s + n - 5, ".json") == 0);
}

/* The source tree's data/ while it exists (a build tree's tern uses the files being edited), else the installed
 * copy under PREFIX/share/tern (make install), so an installed tern works once the source is gone. */
#ifndef TERN_INSTALL_DATA_DIR
#define TERN_INSTALL_DATA_DIR TERN_DATA_DIR
#endif
const char *tern_machine_builtin_dir(void)
{
    struct stat st;
    if (stat(TERN_DATA_DIR "/machines", &st) == 0 && S_ISDIR(st.st_mode))
        return TERN_DATA_DIR "/machines";
    return TERN_INSTALL_DATA_DIR "/machines";
}

/* Search directories in order: first_dir (may be NULL), $TERN_MACHINE_PATH entries, the built-in dir.
 * Calls fn(dir, arg) for each until it returns true. */
typedef bool (*dir_fn)(const char *dir, void *arg);

static bool for_each_dir(const char *first_dir, dir_fn fn, void *arg)
{
    if (first_dir && fn(first_dir, arg))
        return true;
    const char *env = getenv("TERN_MACHINE_PATH");
    if (env && *env) {
        const char *p = env;
        while (*p) {
            const char *e = strchr(p, ':');
            size_t n = e ? (size_t)(e - p) : strlen(p);
            if (n > 0 && n < PATH_MAX) {
                char dir[PATH_MAX];
                memcpy(dir, p, n);
                dir[n] = '\0';
                if (fn(dir, arg))
                    return true;
            }
            p += n;
            if (*p == ':')
                p++;
        }
    }
    return fn(tern_machine_builtin_dir(), arg);
}

typedef struct {
    const char *name;
    char found[PATH_MAX];
    char searched[768];
} find_arg;

static bool find_in_dir(const char *dir, void *arg)
{
    find_arg *a = arg;
    char cand[PATH_MAX];
    bprintf(cand, sizeof cand, "%s/%s.json", dir, a->name);
    size_t used = strlen(a->searched);
    if (used < sizeof a->searched - 1)
        bprintf(a->searched + used, sizeof a->searched - used, "%s%s", used ? ", " : "", dir);
    if (file_exists(cand)) {
        copy_str(a->found, sizeof a->found, cand);
        return true;
    }
    return false;
}

static char *read_file_text(const char *path, size_t *len, tern_error *err)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        tern_error_set(err, TERN_ERR_IO, "machine %s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    char *buf = malloc(MAX_FILE_BYTES + 1);
    if (!buf) {
        fclose(f);
        tern_error_set(err, TERN_ERR_NOMEM, "machine %s: out of memory", path);
        return NULL;
    }
    size_t n = fread(buf, 1, MAX_FILE_BYTES + 1, f);
    bool bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        tern_error_set(err, TERN_ERR_IO, "machine %s: read error", path);
        return NULL;
    }
    if (n > MAX_FILE_BYTES) {
        free(buf);
        tern_error_set(err, TERN_ERR_RANGE, "machine %s: file larger than %u bytes", path, MAX_FILE_BYTES);
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

/* ------------------------------------------------------------------------------------- section parsers */

static bool load_file(tern_machine *m, const char *path, char *const *stack, int depth, tern_error *err,
                      unsigned kind_mask, const char *referrer, const char *ref_field);

/* Resolve reference `name` found at field path of the current file and load it into c->m. */
static bool load_reference(ctx *c, const char *field, const char *name, unsigned kind_mask, tern_machine *into)
{
    if (!valid_name(name))
        return fail(c, TERN_ERR_INVALID, field,
                    "\"%s\" is not a machine name (letters, digits, '.', '_', '-'; no '/')", name);
    char dir[PATH_MAX];
    copy_str(dir, sizeof dir, c->stack[c->depth]);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = '\0';
    find_arg a = {.name = name};
    if (!for_each_dir(dir, find_in_dir, &a))
        return fail(c, TERN_ERR_NOT_FOUND, field, "no machine file \"%s.json\" found (searched: %s)", name,
                    a.searched);
    return load_file(into, a.found, c->stack, c->depth + 1, c->err, kind_mask, c->file, field);
}

static bool parse_engine(ctx *c, const cJSON *core, const char *prefix, const char *key, tern_engine_spec *e,
                         bool with_cores, unsigned *cores)
{
    const cJSON *o;
    char path[256];
    join_path(path, sizeof path, prefix, key);
    if (!get_object(c, core, prefix, key, true, &o))
        return false;
    if (with_cores)
        CHECK_KEYS(c, o, path, "clock", "lanes", "elems_per_cycle", "cores");
    else
        CHECK_KEYS(c, o, path, "clock", "lanes", "elems_per_cycle");
    if (!get_dbl(c, o, path, "clock", ARCH_UNIT_HZ, 1e8, 1e10, &e->clock_hz))
        return false;
    if (!get_uint(c, o, path, "lanes", ARCH_UNIT_NONE, 1, 4096, &e->lanes))
        return false;
    if (with_cores && !get_uint(c, o, path, "cores", ARCH_UNIT_NONE, 1, 256, cores))
        return false;
    static const tern_arch_dtype req[] = {TERN_ARCH_FP32, TERN_ARCH_BF16};
    numrule r = {ARCH_UNIT_ELEM_RATE, 1, 65536, false};
    return get_dtype_map(c, o, path, "elems_per_cycle", r, req, 2, e->elems_per_cycle);
}

static bool parse_core(ctx *c, const cJSON *root)
{
    tern_core_spec *k = &c->m->core;
    const cJSON *core, *o;
    if (!get_object(c, root, "", "core", true, &core))
        return false;
    CHECK_KEYS(c, core, "core", "version", "tensor", "vector", "scalar", "gpsimd", "sbuf", "psum", "dma", "costs");
    if (!get_text(c, core, "core", "version", k->version, sizeof k->version))
        return false;

    if (!get_object(c, core, "core", "tensor", true, &o))
        return false;
    CHECK_KEYS(c, o, "core.tensor", "pe_rows", "pe_cols", "clock", "macs_per_pe_cycle", "moving_free_max",
               "mm_init_latency", "fast_load_stationary_factor");
    if (!get_uint(c, o, "core.tensor", "pe_rows", ARCH_UNIT_NONE, 1, 4096, &k->tensor.pe_rows) ||
        !get_uint(c, o, "core.tensor", "pe_cols", ARCH_UNIT_NONE, 1, 4096, &k->tensor.pe_cols) ||
        !get_dbl(c, o, "core.tensor", "clock", ARCH_UNIT_HZ, 1e8, 1e10, &k->tensor.clock_hz))
        return false;
    static const tern_arch_dtype req[] = {TERN_ARCH_FP32, TERN_ARCH_TF32, TERN_ARCH_BF16, TERN_ARCH_FP16,
                                          TERN_ARCH_FP8};
    numrule rate = {ARCH_UNIT_MAC_RATE, 1.0 / 64, 64, false};
    if (!get_dtype_map(c, o, "core.tensor", "macs_per_pe_cycle", rate, req, 5, k->tensor.macs_per_pe_cycle))
        return false;
    if (!get_uint(c, o, "core.tensor", "moving_free_max", ARCH_UNIT_NONE, 1, 1 << 20, &k->tensor.moving_free_max) ||
        !get_uint(c, o, "core.tensor", "mm_init_latency", ARCH_UNIT_CYCLES, 0, 1e6,
                  &k->tensor.mm_init_latency_cycles) ||
        !get_dbl(c, o, "core.tensor", "fast_load_stationary_factor", ARCH_UNIT_NONE, 1, 64,
                 &k->tensor.fast_load_stationary_factor))
        return false;

    if (!parse_engine(c, core, "core", "vector", &k->vector, false, NULL) ||
        !parse_engine(c, core, "core", "scalar", &k->scalar, false, NULL) ||
        !parse_engine(c, core, "core", "gpsimd", &k->gpsimd, true, &k->gpsimd_cores))
        return false;

    if (!get_object(c, core, "core", "sbuf", true, &o))
        return false;
    CHECK_KEYS(c, o, "core.sbuf", "partitions", "bytes_per_partition", "usable_bytes_per_partition", "access_init");
    if (!get_uint(c, o, "core.sbuf", "partitions", ARCH_UNIT_NONE, 1, 1024, &k->sbuf.partitions) ||
        !get_u64(c, o, "core.sbuf", "bytes_per_partition", ARCH_UNIT_BYTES, 1, 1ull << 30,
                 &k->sbuf.bytes_per_partition) ||
        !get_u64(c, o, "core.sbuf", "usable_bytes_per_partition", ARCH_UNIT_BYTES, 1, 1ull << 30,
                 &k->sbuf.usable_bytes_per_partition) ||
        !get_uint(c, o, "core.sbuf", "access_init", ARCH_UNIT_CYCLES, 0, 1e6, &k->sbuf.access_init_cycles))
        return false;
    if (k->sbuf.usable_bytes_per_partition > k->sbuf.bytes_per_partition)
        return fail(c, TERN_ERR_RANGE, "core.sbuf.usable_bytes_per_partition",
                    "%llu bytes exceeds core.sbuf.bytes_per_partition (%llu bytes)",
                    (unsigned long long)k->sbuf.usable_bytes_per_partition,
                    (unsigned long long)k->sbuf.bytes_per_partition);
    if (k->tensor.pe_rows > k->sbuf.partitions)
        return fail(c, TERN_ERR_RANGE, "core.tensor.pe_rows",
                    "%u PE rows exceed core.sbuf.partitions (%u): the contraction dimension is read across "
                    "partitions", k->tensor.pe_rows, k->sbuf.partitions);

    if (!get_object(c, core, "core", "psum", true, &o))
        return false;
    CHECK_KEYS(c, o, "core.psum", "partitions", "banks", "bank_bytes");
    if (!get_uint(c, o, "core.psum", "partitions", ARCH_UNIT_NONE, 1, 1024, &k->psum.partitions) ||
        !get_uint(c, o, "core.psum", "banks", ARCH_UNIT_NONE, 1, 64, &k->psum.banks) ||
        !get_u64(c, o, "core.psum", "bank_bytes", ARCH_UNIT_BYTES, 4, 1 << 20, &k->psum.bank_bytes))
        return false;
    if (k->tensor.pe_cols > k->psum.partitions)
        return fail(c, TERN_ERR_RANGE, "core.tensor.pe_cols",
                    "%u PE columns exceed core.psum.partitions (%u): each column writes one PSUM partition",
                    k->tensor.pe_cols, k->psum.partitions);

    if (!get_object(c, core, "core", "dma", true, &o))
        return false;
    CHECK_KEYS(c, o, "core.dma", "engines", "queues_per_engine", "bandwidth_per_engine", "fixed_cost", "hwdge_cost",
               "descriptor_cost", "transfer_cost", "descriptor_max");
    numrule hw = {ARCH_UNIT_TIME, 0, 1e-3, false};
    /* optional (issue 11): a queue ring's per-transfer occupancy on one engine, and the largest descriptor */
    numrule ring = {ARCH_UNIT_TIME, 0, 1e-3, false}, dmax = {ARCH_UNIT_BYTES, 1, 1ull << 40, false};
    if (!get_uint(c, o, "core.dma", "engines", ARCH_UNIT_NONE, 1, 256, &k->dma.engines) ||
        !get_uint(c, o, "core.dma", "queues_per_engine", ARCH_UNIT_NONE, 1, 256, &k->dma.queues_per_engine) ||
        !get_dbl(c, o, "core.dma", "bandwidth_per_engine", ARCH_UNIT_BANDWIDTH, 1e6, 1e13,
                 &k->dma.bandwidth_per_engine) ||
        !get_dbl(c, o, "core.dma", "fixed_cost", ARCH_UNIT_TIME, 0, 1e-3, &k->dma.fixed_cost_s) ||
        !get_dbl(c, o, "core.dma", "descriptor_cost", ARCH_UNIT_TIME, 0, 1e-5, &k->dma.descriptor_cost_s) ||
        !get_num(c, o, "core.dma", "hwdge_cost", false, hw, &k->dma.hwdge_cost_s, NULL) ||
        !get_num(c, o, "core.dma", "transfer_cost", false, ring, &k->dma.transfer_cost_s, NULL) ||
        !get_num(c, o, "core.dma", "descriptor_max", false, dmax, &k->dma.descriptor_max_bytes, NULL))
        return false;

    if (!get_object(c, core, "core", "costs", true, &o))
        return false;
    CHECK_KEYS(c, o, "core.costs", "min_ii", "vector_static_overhead", "gpsimd_start", "dynamic_copy_min_ii",
               "act_read_accumulator", "semaphore_wake", "tensor_raw_latency", "vector_raw_latency",
               "scalar_raw_latency", "gpsimd_raw_latency", "launch");
    numrule wake = {ARCH_UNIT_TIME, 0, 1e-5, false}, raw = {ARCH_UNIT_CYCLES, 0, 1e6, false};
    numrule launch = {ARCH_UNIT_TIME, 0, 1e-2, false};
    /* optional: read-after-write latency on one engine (cycles) and the per-run launch cost (issue 11) */
    return get_num(c, o, "core.costs", "tensor_raw_latency", false, raw, &k->costs.raw_latency[0], NULL) &&
           get_num(c, o, "core.costs", "vector_raw_latency", false, raw, &k->costs.raw_latency[1], NULL) &&
           get_num(c, o, "core.costs", "scalar_raw_latency", false, raw, &k->costs.raw_latency[2], NULL) &&
           get_num(c, o, "core.costs", "gpsimd_raw_latency", false, raw, &k->costs.raw_latency[3], NULL) &&
           get_num(c, o, "core.costs", "launch", false, launch, &k->costs.launch_s, NULL) &&
           get_num(c, o, "core.costs", "semaphore_wake", false, wake, &k->costs.semaphore_wake_s, NULL) &&
           get_uint(c, o, "core.costs", "min_ii", ARCH_UNIT_CYCLES, 1, 1e6, &k->costs.min_ii) &&
           get_uint(c, o, "core.costs", "vector_static_overhead", ARCH_UNIT_CYCLES, 0, 1e6,
                    &k->costs.vector_static_overhead) &&
           get_uint(c, o, "core.costs", "gpsimd_start", ARCH_UNIT_CYCLES, 0, 1e6, &k->costs.gpsimd_start) &&
           get_uint(c, o, "core.costs", "dynamic_copy_min_ii", ARCH_UNIT_CYCLES, 0, 1e6,
                    &k->costs.dynamic_copy_min_ii) &&
           get_uint(c, o, "core.costs", "act_read_accumulator", ARCH_UNIT_CYCLES, 0, 1e6,
                    &k->costs.act_read_accumulator);
}

static bool parse_chip(ctx *c, const cJSON *root)
{
    tern_chip_spec *k = &c->m->chip;
    const cJSON *chip, *o;
    const char *core_name;
    if (!get_object(c, root, "", "chip", true, &chip))
        return false;
    CHECK_KEYS(c, chip, "chip", "core", "cores", "hbm", "neuronlink", "cc_cores", "dma_bandwidth", "collectives");
    if (!get_plain_string(c, chip, "chip", "core", true, 63, &core_name))
        return false;
    if (!load_reference(c, "chip.core", core_name, 1u << TERN_MACHINE_CORE, c->m))
        return false;
    if (!get_uint(c, chip, "chip", "cores", ARCH_UNIT_NONE, 1, 1024, &k->cores))
        return false;
    if (!get_object(c, chip, "chip", "hbm", true, &o))
        return false;
    CHECK_KEYS(c, o, "chip.hbm", "capacity", "bandwidth", "stacks");
    if (!get_u64(c, o, "chip.hbm", "capacity", ARCH_UNIT_BYTES, 1 << 20, 64.0 * 1024 * 1024 * 1024 * 1024,
                 &k->hbm_bytes) ||
        !get_dbl(c, o, "chip.hbm", "bandwidth", ARCH_UNIT_BANDWIDTH, 1e9, 1e15, &k->hbm_bandwidth) ||
        !get_uint(c, o, "chip.hbm", "stacks", ARCH_UNIT_NONE, 1, 64, &k->hbm_stacks))
        return false;
    if (!get_object(c, chip, "chip", "neuronlink", true, &o))
        return false;
    CHECK_KEYS(c, o, "chip.neuronlink", "version", "links", "bandwidth");
    if (!get_text(c, o, "chip.neuronlink", "version", k->neuronlink_version, sizeof k->neuronlink_version) ||
        !get_uint(c, o, "chip.neuronlink", "links", ARCH_UNIT_NONE, 0, 64, &k->neuronlink_links) ||
        !get_dbl(c, o, "chip.neuronlink", "bandwidth", ARCH_UNIT_BANDWIDTH, 0, 1e15, &k->neuronlink_bandwidth))
        return false;
    if (!get_uint(c, chip, "chip", "cc_cores", ARCH_UNIT_NONE, 0, 1024, &k->cc_cores) ||
        !get_dbl(c, chip, "chip", "dma_bandwidth", ARCH_UNIT_BANDWIDTH, 1e9, 1e15, &k->dma_bandwidth))
        return false;
    /* Optional collective-runtime figures (the fabric model, docs/multichip.md); absent = 0. */
    if (!get_object(c, chip, "chip", "collectives", false, &o))
        return false;
    if (o) {
        CHECK_KEYS(c, o, "chip.collectives", "launch_cost", "setup_cost", "dma_engines");
        numrule t = {ARCH_UNIT_TIME, 0, 1, false};
        numrule e = {ARCH_UNIT_NONE, 1, 1024, true};
        double v;
        if (!get_num(c, o, "chip.collectives", "launch_cost", true, t, &k->cc_launch_cost_s, NULL) ||
            !get_num(c, o, "chip.collectives", "setup_cost", true, t, &k->cc_setup_cost_s, NULL) ||
            !get_num(c, o, "chip.collectives", "dma_engines", true, e, &v, NULL))
            return false;
        k->cc_dma_engines = (unsigned)v;
    }
    return true;
}

static bool parse_topology(ctx *c, const char *path, tern_instance_spec *k)
{
    const char *t = k->topology_text;
    char word[32] = "";
    int n = 0;
    if (sscanf(t, "%31s%n", word, &n) != 1)
        return fail(c, TERN_ERR_INVALID, path, "empty topology");
    const char *rest = t + n;
    while (*rest == ' ')
        rest++;
    unsigned want;
    if (strcmp(word, "none") == 0) {
        k->topology = TERN_TOPOLOGY_NONE;
        want = 0;
    } else if (strcmp(word, "ring") == 0) {
        k->topology = TERN_TOPOLOGY_RING;
        want = 1;
    } else if (strcmp(word, "2d-torus") == 0) {
        k->topology = TERN_TOPOLOGY_TORUS_2D;
        want = 2;
    } else if (strcmp(word, "3d-torus") == 0) {
        k->topology = TERN_TOPOLOGY_TORUS_3D;
        want = 3;
    } else if (strcmp(word, "switch") == 0) {
        k->topology = TERN_TOPOLOGY_SWITCH;
        want = 0;
    } else if (strcmp(word, "switch-2level") == 0) {
        k->topology = TERN_TOPOLOGY_SWITCH_2LEVEL;
        want = 2;
    } else {
        return fail(c, TERN_ERR_INVALID, path,
                    "unknown topology \"%s\" (expected none, ring N, 2d-torus AxB, 3d-torus AxBxC, switch, "
                    "switch-2level GxN)", t);
    }
    k->topology_ndims = 0;
    if (want == 0) {
        if (*rest)
            return fail(c, TERN_ERR_INVALID, path, "topology \"%s\" takes no dimensions", t);
    } else {
        const char *p = rest;
        while (k->topology_ndims < 3) {
            char *end;
            errno = 0;
            unsigned long d = strtoul(p, &end, 10);
            if (end == p || errno || d == 0 || d > 100000)
                return fail(c, TERN_ERR_INVALID, path, "bad dimensions in topology \"%s\"", t);
            k->topology_dims[k->topology_ndims++] = (unsigned)d;
            p = end;
            if (*p != 'x')
                break;
            p++;
        }
        if (*p || k->topology_ndims != want)
            return fail(c, TERN_ERR_INVALID, path, "topology \"%s\" needs %u dimension%s written like %s", t, want,
                        want == 1 ? "" : "s", want == 1 ? "\"ring 4\"" : want == 2 ? "\"4x4\"" : "\"4x4x4\"");
    }
    uint64_t prod = 1; /* checked, though each dimension is at most 100000: a wrapped product could match */
    for (unsigned i = 0; i < k->topology_ndims; i++)
        tern_mul_u64(prod, k->topology_dims[i], &prod);
    if (k->topology == TERN_TOPOLOGY_NONE && k->chips != 1)
        return fail(c, TERN_ERR_INVALID, path, "topology \"none\" needs exactly 1 chip, the machine has %u",
                    k->chips);
    if (k->topology_ndims && prod != k->chips)
        return fail(c, TERN_ERR_INVALID, path, "topology \"%s\" has %llu chips, but the machine has %u", t,
                    (unsigned long long)prod, k->chips);
    return true;
}

static bool parse_price(ctx *c, const cJSON *sec, const char *prefix, tern_instance_spec *k)
{
    char path[256];
    join_path(path, sizeof path, prefix, "price");
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(sec, "price");
    if (!p)
        return fail(c, TERN_ERR_INVALID, path,
                    "missing (give a sourced price {\"value\", \"unit\": \"USD/h\", \"region\", \"source\"} or "
                    "null when no public source is known)");
    if (cJSON_IsNull(p)) {
        k->has_price = false;
        return true;
    }
    if (!cJSON_IsObject(p)) {
        char v[96];
        render(p, v, sizeof v);
        return fail(c, TERN_ERR_INVALID, path, "expected an object or null, got %s %s", json_type_name(p), v);
    }
    CHECK_KEYS(c, p, path, "value", "unit", "region", "source", "note");
    const char *region;
    if (!get_plain_string(c, p, path, "region", true, sizeof k->price_region - 1, &region))
        return false;
    /* The figure itself: reuse the numeric reader on a copy without "region". */
    cJSON *copy = cJSON_Duplicate(p, 1);
    if (!copy)
        return nomem(c);
    cJSON_DeleteItemFromObjectCaseSensitive(copy, "region");
    numrule r = {ARCH_UNIT_PRICE, 0.001, 1e6, false};
    bool ok = get_num_at(c, copy, path, r, &k->price_usd_per_hour);
    cJSON_Delete(copy);
    if (!ok)
        return false;
    k->has_price = true;
    copy_str(k->price_region, sizeof k->price_region, region);
    copy_str(k->price_source, sizeof k->price_source,
             cJSON_GetObjectItemCaseSensitive(p, "source")->valuestring);
    return true;
}

static bool parse_instance(ctx *c, const cJSON *root, bool system)
{
    tern_instance_spec *k = &c->m->inst;
    const char *sec_name = system ? "system" : "instance";
    const cJSON *sec, *o;
    const char *chip_name;
    if (!get_object(c, root, "", sec_name, true, &sec))
        return false;
    if (system)
        CHECK_KEYS(c, sec, sec_name, "chip", "chips", "interconnect", "efa_bandwidth", "efa_latency", "vcpus",
                   "host_memory", "price", "built_from");
    else
        CHECK_KEYS(c, sec, sec_name, "chip", "chips", "interconnect", "efa_bandwidth", "efa_latency", "vcpus",
                   "host_memory", "price");
    char field[64];
    bprintf(field, sizeof field, "%s.chip", sec_name);
    if (!get_plain_string(c, sec, sec_name, "chip", true, 63, &chip_name))
        return false;
    if (!load_reference(c, field, chip_name, 1u << TERN_MACHINE_CHIP, c->m))
        return false;
    if (!get_uint(c, sec, sec_name, "chips", ARCH_UNIT_NONE, 1, 1000000, &k->chips))
        return false;

    char ipath[64];
    bprintf(ipath, sizeof ipath, "%s.interconnect", sec_name);
    if (!get_object(c, sec, sec_name, "interconnect", true, &o))
        return false;
    CHECK_KEYS(c, o, ipath, "topology", "link_bandwidth_per_chip", "scaleup_bandwidth_per_chip", "link_latency");
    numrule bw0 = {ARCH_UNIT_BANDWIDTH, 0, 1e15, false};
    char tpath[96];
    bprintf(tpath, sizeof tpath, "%s.topology", ipath);
    if (!get_text(c, o, ipath, "topology", k->topology_text, sizeof k->topology_text) ||
        !parse_topology(c, tpath, k) ||
        !get_dbl(c, o, ipath, "link_bandwidth_per_chip", ARCH_UNIT_BANDWIDTH, 0, 1e15, &k->link_bandwidth_per_chip) ||
        !get_num(c, o, ipath, "scaleup_bandwidth_per_chip", false, bw0, &k->scaleup_bandwidth_per_chip, NULL))
        return false;
    numrule lat0 = {ARCH_UNIT_TIME, 0, 1, false};
    if (!get_num(c, o, ipath, "link_latency", false, lat0, &k->link_latency_s, NULL))
        return false;
    if (!get_dbl(c, sec, sec_name, "efa_bandwidth", ARCH_UNIT_BANDWIDTH, 0, 1e16, &k->efa_bandwidth) ||
        !get_num(c, sec, sec_name, "efa_latency", false, lat0, &k->efa_latency_s, NULL))
        return false;
    numrule cpus = {ARCH_UNIT_NONE, 1, 1e7, true};
    numrule host = {ARCH_UNIT_BYTES, 1 << 20, 1e18, true};
    double v;
    if (!get_num(c, sec, sec_name, "vcpus", false, cpus, &v, NULL))
        return false;
    k->vcpus = (unsigned)v;
    if (!get_num(c, sec, sec_name, "host_memory", false, host, &v, NULL))
        return false;
    k->host_memory_bytes = (uint64_t)v;
    if (!parse_price(c, sec, sec_name, k))
        return false;

    if (system) {
        if (!get_object(c, sec, sec_name, "built_from", false, &o))
            return false;
        if (o) {
            CHECK_KEYS(c, o, "system.built_from", "instance", "count");
            const char *iname;
            unsigned count;
            if (!get_plain_string(c, o, "system.built_from", "instance", true, 63, &iname) ||
                !get_uint(c, o, "system.built_from", "count", ARCH_UNIT_NONE, 1, 100000, &count))
                return false;
            /* Load the building block into a scratch machine: only to check it is consistent. */
            tern_machine *part = calloc(1, sizeof *part);
            if (!part)
                return nomem(c);
            bool ok = load_reference(c, "system.built_from.instance", iname, 1u << TERN_MACHINE_INSTANCE, part);
            if (ok && (unsigned long long)part->inst.chips * count != k->chips)
                ok = fail(c, TERN_ERR_INVALID, "system.built_from.count",
                          "%u x %s (%u chips each) = %llu chips, but system.chips is %u", count, iname,
                          part->inst.chips, (unsigned long long)part->inst.chips * count, k->chips);
            if (ok && strcmp(part->chip.name, c->m->chip.name) != 0)
                ok = fail(c, TERN_ERR_INVALID, "system.built_from.instance",
                          "%s is built from chip \"%s\", but system.chip is \"%s\"", iname, part->chip.name,
                          c->m->chip.name);
            tern_machine_free(part);
            if (!ok)
                return false;
            copy_str(k->built_from, sizeof k->built_from, iname);
            k->built_from_count = count;
        }
    }
    return true;
}

static bool parse_conflicts(ctx *c, const cJSON *root)
{
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(root, "conflicts");
    if (!arr)
        return true;
    if (!cJSON_IsArray(arr)) {
        char v[96];
        render(arr, v, sizeof v);
        return fail(c, TERN_ERR_INVALID, "conflicts", "expected an array, got %s %s", json_type_name(arr), v);
    }
    int i = 0;
    for (const cJSON *e = arr->child; e; e = e->next, i++) {
        char path[64];
        bprintf(path, sizeof path, "conflicts[%d]", i);
        if (!cJSON_IsObject(e)) {
            char v[96];
            render(e, v, sizeof v);
            return fail(c, TERN_ERR_INVALID, path, "expected an object, got %s %s", json_type_name(e), v);
        }
        CHECK_KEYS(c, e, path, "field", "picked", "other", "note");
        const char *field, *picked, *other, *note;
        if (!get_plain_string(c, e, path, "field", true, 200, &field) ||
            !get_plain_string(c, e, path, "picked", true, 1000, &picked) ||
            !get_plain_string(c, e, path, "other", true, 1000, &other) ||
            !get_plain_string(c, e, path, "note", false, 1000, &note))
            return false;
        tern_machine *m = c->m;
        if (!grow((void **)&m->conflicts, &m->capconflicts, m->nconflicts, sizeof *m->conflicts))
            return nomem(c);
        tern_conflict *k = &m->conflicts[m->nconflicts++];
        k->file = dupstr(c->fname);
        k->field = dupstr(field);
        k->picked = dupstr(picked);
        k->other = dupstr(other);
        k->note = note ? dupstr(note) : NULL;
        if (!k->file || !k->field || !k->picked || !k->other || (note && !k->note))
            return nomem(c);
    }
    return true;
}

static arch_unit_kind published_unit(const char *key)
{
    if (strstr(key, "_flops_"))
        return ARCH_UNIT_FLOPS;
    size_t n = strlen(key);
    if (n > 6 && strcmp(key + n - 6, "_bytes") == 0)
        return ARCH_UNIT_BYTES;
    if (n > 10 && strcmp(key + n - 10, "_bandwidth") == 0)
        return ARCH_UNIT_BANDWIDTH;
    return ARCH_UNIT_NONE;
}

static bool parse_published(ctx *c, const cJSON *root)
{
    const cJSON *obj;
    if (!get_object(c, root, "", "published", false, &obj))
        return false;
    if (!obj)
        return true;
    for (const cJSON *k = obj->child; k; k = k->next) {
        char path[128];
        join_path(path, sizeof path, "published", k->string);
        if (!tern_peaks_key_valid(k->string))
            return fail(c, TERN_ERR_INVALID, path, "unknown key \"%s\" (expected a derived-figure key such as "
                        "chip_flops_bf16 or total_hbm_bandwidth)", k->string);
        bool chip_level = strncmp(k->string, "chip_", 5) == 0;
        bool core_level = strncmp(k->string, "core_", 5) == 0;
        if ((chip_level && c->kind < TERN_MACHINE_CHIP) ||
            (!chip_level && !core_level && c->kind < TERN_MACHINE_INSTANCE))
            return fail(c, TERN_ERR_INVALID, path, "\"%s\" does not apply to a %s file", k->string,
                        tern_machine_kind_name(c->kind));
        for (const cJSON *o = obj->child; o != k; o = o->next)
            if (strcmp(o->string, k->string) == 0)
                return fail(c, TERN_ERR_INVALID, path, "duplicate key \"%s\"", k->string);
        numrule r = {published_unit(k->string), 1e-9, 1e25, false};
        double si;
        if (!get_num_at(c, k, path, r, &si))
            return false;
        tern_machine *m = c->m;
        if (!grow((void **)&m->published, &m->cappublished, m->npublished, sizeof *m->published))
            return nomem(c);
        tern_published *p = &m->published[m->npublished++];
        const tern_fact *f = &m->facts[m->nfacts - 1];
        p->file = dupstr(c->fname);
        p->key = dupstr(k->string);
        p->unit = dupstr(f->unit);
        p->source = dupstr(f->source);
        p->value = f->value;
        p->value_si = si;
        if (!p->file || !p->key || !p->unit || !p->source)
            return nomem(c);
    }
    return true;
}

static const char *const KIND_NAMES[] = {"core", "chip", "instance", "system"};

/* Parse one file into m (the top-level file fills name/description/kind; referenced files only fill their
 * own section). stack holds canonical paths of files being loaded, depth is this file's index. */
static bool load_file(tern_machine *m, const char *path, char *const *stack, int depth, tern_error *err,
                      unsigned kind_mask, const char *referrer, const char *ref_field)
{
    char canon[PATH_MAX];
    if (!realpath(path, canon)) {
        tern_error_set(err, TERN_ERR_IO, "machine %s: cannot open: %s", path, strerror(errno));
        return false;
    }
    for (int i = 0; i < depth; i++) {
        if (strcmp(stack[i], canon) == 0) {
            char chain[768] = "";
            for (int j = i; j < depth; j++) {
                size_t used = strlen(chain);
                bprintf(chain + used, sizeof chain - used, "%s -> ", basename_of(stack[j]));
            }
            size_t used = strlen(chain);
            bprintf(chain + used, sizeof chain - used, "%s", basename_of(canon));
            tern_error_set(err, TERN_ERR_INVALID, "machine %s: field %s: reference cycle: %s", referrer, ref_field,
                           chain);
            return false;
        }
    }
    if (depth >= MAX_DEPTH) {
        tern_error_set(err, TERN_ERR_RANGE, "machine %s: field %s: references nested deeper than %d files",
                       referrer, ref_field, MAX_DEPTH);
        return false;
    }
    char *newstack[MAX_DEPTH + 1];
    for (int i = 0; i < depth; i++)
        newstack[i] = stack[i];
    newstack[depth] = canon;

    size_t len;
    char *text = read_file_text(path, &len, err);
    if (!text)
        return false;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (!root) {
        size_t off = end ? (size_t)(end - text) : 0;
        if (off > len)
            off = len;
        unsigned line = 1, col = 1;
        for (size_t i = 0; i < off; i++) {
            if (text[i] == '\n') {
                line++;
                col = 1;
            } else {
                col++;
            }
        }
        char near[24] = "";
        size_t k = 0;
        for (size_t i = off; i < len && k < sizeof near - 1 && text[i] != '\n'; i++)
            near[k++] = text[i];
        near[k] = '\0';
        tern_error_set(err, TERN_ERR_PARSE, "machine %s: malformed JSON at line %u, column %u (byte %zu), near \"%s\"",
                       path, line, col, off, near);
        free(text);
        return false;
    }
    free(text);

    ctx c = {.m = m, .file = path, .fname = basename_of(path), .err = err, .stack = newstack, .depth = depth};
    bool ok = false;
    const char *schema, *kind, *name, *desc;
    if (!cJSON_IsObject(root)) {
        fail(&c, TERN_ERR_INVALID, NULL, "expected a JSON object at top level, got %s", json_type_name(root));
        goto done;
    }
    if (!get_plain_string(&c, root, "", "schema", true, 64, &schema))
        goto done;
    if (strcmp(schema, SCHEMA_ID) != 0) {
        fail(&c, TERN_ERR_UNSUPPORTED, "schema", "expected \"%s\", got \"%s\"", SCHEMA_ID, schema);
        goto done;
    }
    if (!get_plain_string(&c, root, "", "kind", true, 16, &kind))
        goto done;
    int ki = -1;
    for (int i = 0; i < 4; i++)
        if (strcmp(kind, KIND_NAMES[i]) == 0)
            ki = i;
    if (ki < 0) {
        fail(&c, TERN_ERR_INVALID, "kind", "expected \"core\", \"chip\", \"instance\" or \"system\", got \"%s\"",
             kind);
        goto done;
    }
    c.kind = (tern_machine_kind)ki;
    if (!(kind_mask & (1u << ki))) {
        const char *want = (kind_mask & (1u << TERN_MACHINE_CORE))   ? "core"
                           : (kind_mask & (1u << TERN_MACHINE_CHIP)) ? "chip"
                                                                     : "instance";
        tern_error_set(err, TERN_ERR_INVALID, "machine %s: field %s: %s is a %s file, expected a %s", referrer,
                       ref_field, basename_of(path), kind, want);
        goto done;
    }
    {
        static const char *const top_core[] = {"schema", "kind", "name", "description", "core", "published",
                                               "conflicts"};
        static const char *const top_chip[] = {"schema", "kind", "name", "description", "chip", "published",
                                               "conflicts"};
        static const char *const top_inst[] = {"schema", "kind", "name", "description", "instance", "published",
                                               "conflicts"};
        static const char *const top_sys[] = {"schema", "kind", "name", "description", "system", "published",
                                              "conflicts"};
        static const char *const *const tops[] = {top_core, top_chip, top_inst, top_sys};
        if (!check_keys(&c, root, "", tops[ki], 7))
            goto done;
    }
    if (!get_plain_string(&c, root, "", "name", true, 63, &name) ||
        !get_plain_string(&c, root, "", "description", true, 200, &desc))
        goto done;
    if (!valid_name(name)) {
        fail(&c, TERN_ERR_INVALID, "name", "\"%s\" is not a valid machine name (letters, digits, '.', '_', '-')",
             name);
        goto done;
    }
    switch (c.kind) {
    case TERN_MACHINE_CORE:
        copy_str(m->core.name, sizeof m->core.name, name);
        ok = parse_core(&c, root);
        break;
    case TERN_MACHINE_CHIP:
        copy_str(m->chip.name, sizeof m->chip.name, name);
        ok = parse_chip(&c, root);
        break;
    case TERN_MACHINE_INSTANCE:
    case TERN_MACHINE_SYSTEM:
        copy_str(m->inst.name, sizeof m->inst.name, name);
        ok = parse_instance(&c, root, c.kind == TERN_MACHINE_SYSTEM);
        break;
    }
    ok = ok && parse_conflicts(&c, root) && parse_published(&c, root);
    if (ok && depth == 0) {
        m->kind = c.kind;
        copy_str(m->name, sizeof m->name, name);
        m->description = dupstr(desc);
        m->path = dupstr(path);
        if (!m->description || !m->path)
            ok = nomem(&c);
    }
done:
    cJSON_Delete(root);
    return ok;
}

/* ---------------------------------------------------------------------------------------------- public */

tern_status tern_machine_find(const char *name_or_path, char *path, size_t cap, tern_error *err)
{
    TERN_ASSERT(path && cap > 0);
    path[0] = '\0';
    if (!name_or_path || !*name_or_path)
        return tern_error_set(err, TERN_ERR_INVALID, "machine: empty name");
    if (looks_like_path(name_or_path)) {
        if (strlen(name_or_path) >= cap)
            return tern_error_set(err, TERN_ERR_RANGE, "machine %.80s...: path too long", name_or_path);
        if (!file_exists(name_or_path))
            return tern_error_set(err, TERN_ERR_NOT_FOUND, "machine %s: no such file", name_or_path);
        copy_str(path, cap, name_or_path);
        return TERN_OK;
    }
    if (!valid_name(name_or_path))
        return tern_error_set(err, TERN_ERR_NOT_FOUND,
                              "machine \"%s\": not a machine name (letters, digits, '.', '_', '-')", name_or_path);
    find_arg a = {.name = name_or_path};
    if (!for_each_dir(NULL, find_in_dir, &a)) {
        /* Short names for a generation: the form it is usually rented as (a file of that name wins). */
        static const char *const alias[][2] = {{"trn1", "trn1.2xlarge"}, {"trn2", "trn2.48xlarge"}, {"trn3", "trainium3"}};
        for (size_t i = 0; i < sizeof alias / sizeof alias[0]; i++)
            if (!strcmp(name_or_path, alias[i][0]))
                return tern_machine_find(alias[i][1], path, cap, err);
        return tern_error_set(err, TERN_ERR_NOT_FOUND, "machine \"%s\": not found (searched: %s)", name_or_path,
                              a.searched);
    }
    if (strlen(a.found) >= cap)
        return tern_error_set(err, TERN_ERR_RANGE, "machine %s: path too long", a.found);
    copy_str(path, cap, a.found);
    return TERN_OK;
}

tern_status tern_machine_load(const char *name_or_path, tern_machine **out, tern_error *err)
{
    TERN_ASSERT(out);
    *out = NULL;
    tern_error_clear(err);
    char path[PATH_MAX];
    tern_status st = tern_machine_find(name_or_path, path, sizeof path, err);
    if (st != TERN_OK)
        return st;
    tern_machine *m = calloc(1, sizeof *m);
    if (!m)
        return tern_error_set(err, TERN_ERR_NOMEM, "machine %s: out of memory", path);
    tern_error local;
    tern_error *e = err ? err : &local;
    if (!load_file(m, path, NULL, 0, e, 0xFu, "", "")) {
        tern_machine_free(m);
        return e->code;
    }
    *out = m;
    return TERN_OK;
}

void tern_machine_free(tern_machine *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->nfacts; i++) {
        tern_fact *f = &m->facts[i];
        free((void *)f->file);
        free((void *)f->path);
        free((void *)f->text);
        free((void *)f->unit);
        free((void *)f->source);
        free((void *)f->note);
    }
    for (size_t i = 0; i < m->nconflicts; i++) {
        tern_conflict *k = &m->conflicts[i];
        free((void *)k->file);
        free((void *)k->field);
        free((void *)k->picked);
        free((void *)k->other);
        free((void *)k->note);
    }
    for (size_t i = 0; i < m->npublished; i++) {
        tern_published *p = &m->published[i];
        free((void *)p->file);
        free((void *)p->key);
        free((void *)p->unit);
        free((void *)p->source);
    }
    free(m->facts);
    free(m->conflicts);
    free(m->published);
    free(m->description);
    free(m->path);
    free(m);
}

tern_machine_kind tern_machine_kind_of(const tern_machine *m) { return m->kind; }

const char *tern_machine_kind_name(tern_machine_kind kind)
{
    return (unsigned)kind < 4 ? KIND_NAMES[kind] : "unknown";
}

const char *tern_machine_name(const tern_machine *m) { return m->name; }
const char *tern_machine_description(const tern_machine *m) { return m->description; }
const char *tern_machine_path(const tern_machine *m) { return m->path; }
const tern_core_spec *tern_machine_core(const tern_machine *m) { return &m->core; }

const tern_chip_spec *tern_machine_chip(const tern_machine *m)
{
    return m->kind >= TERN_MACHINE_CHIP ? &m->chip : NULL;
}

const tern_instance_spec *tern_machine_instance(const tern_machine *m)
{
    return m->kind >= TERN_MACHINE_INSTANCE ? &m->inst : NULL;
}

size_t tern_machine_fact_count(const tern_machine *m) { return m->nfacts; }

const tern_fact *tern_machine_fact(const tern_machine *m, size_t i)
{
    return i < m->nfacts ? &m->facts[i] : NULL;
}

const char *tern_machine_source(const tern_machine *m, const char *path)
{
    for (size_t i = 0; i < m->nfacts; i++)
        if (strcmp(m->facts[i].path, path) == 0)
            return m->facts[i].source;
    return NULL;
}

size_t tern_machine_conflict_count(const tern_machine *m) { return m->nconflicts; }

const tern_conflict *tern_machine_conflict(const tern_machine *m, size_t i)
{
    return i < m->nconflicts ? &m->conflicts[i] : NULL;
}

size_t tern_machine_published_count(const tern_machine *m) { return m->npublished; }

const tern_published *tern_machine_published(const tern_machine *m, size_t i)
{
    return i < m->npublished ? &m->published[i] : NULL;
}

/* ------------------------------------------------------------------------------------------- catalogue */

typedef struct {
    tern_machine_entry *v;
    size_t n, cap;
    tern_error *err;
    bool failed;
} list_arg;

static bool list_dir(const char *dir, void *arg)
{
    list_arg *a = arg;
    DIR *d = opendir(dir);
    if (!d)
        return false; /* a missing directory in the search path is not an error */
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        const char *fn = de->d_name;
        size_t n = strlen(fn);
        if (fn[0] == '.' || n <= 5 || strcmp(fn + n - 5, ".json") != 0 || n - 5 >= 64)
            continue;
        char name[64];
        memcpy(name, fn, n - 5);
        name[n - 5] = '\0';
        bool seen = false;
        for (size_t i = 0; i < a->n; i++)
            if (strcmp(a->v[i].name, name) == 0)
                seen = true;
        if (seen || !valid_name(name))
            continue;
        char path[PATH_MAX];
        bprintf(path, sizeof path, "%s/%s", dir, fn);
        tern_machine *m;
        if (tern_machine_load(path, &m, a->err) != TERN_OK) {
            a->failed = true;
            break;
        }
        if (!grow((void **)&a->v, &a->cap, a->n, sizeof *a->v)) {
            tern_machine_free(m);
            tern_error_set(a->err, TERN_ERR_NOMEM, "machine list: out of memory");
            a->failed = true;
            break;
        }
        tern_machine_entry *e = &a->v[a->n++];
        memset(e, 0, sizeof *e);
        copy_str(e->name, sizeof e->name, name);
        e->kind = m->kind;
        copy_str(e->description, sizeof e->description, m->description);
        copy_str(e->path, sizeof e->path, path);
        tern_machine_free(m);
    }
    closedir(d);
    return a->failed; /* stop early only on failure */
}

static int entry_cmp(const void *x, const void *y)
{
    const tern_machine_entry *a = x, *b = y;
    if (a->kind != b->kind)
        return (int)a->kind - (int)b->kind;
    return strcmp(a->name, b->name);
}

tern_status tern_machine_list(tern_machine_entry **out, size_t *count, tern_error *err)
{
    TERN_ASSERT(out && count);
    *out = NULL;
    *count = 0;
    tern_error local;
    list_arg a = {.err = err ? err : &local};
    tern_error_clear(a.err);
    for_each_dir(NULL, list_dir, &a);
    if (a.failed) {
        free(a.v);
        return a.err->code;
    }
    if (a.n)
        qsort(a.v, a.n, sizeof *a.v, entry_cmp);
    *out = a.v;
    *count = a.n;
    return TERN_OK;
}

void tern_machine_list_free(tern_machine_entry *entries) { free(entries); }
