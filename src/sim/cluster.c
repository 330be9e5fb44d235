/* Cluster files (docs/multichip.md, "Cluster files"): a small JSON file that names a machine (an instance or a
 * system, by catalogue name or path), how many of them the cluster has, and optional what-if overrides of the
 * links between and inside them (EFA bandwidth per instance and per-hop latency, NeuronLink bandwidth per chip,
 * scale-up bandwidth and hop latency, the intra-instance topology). The overrides are applied to a copy of the
 * machine's instance description before the fabric is built, so every other figure still comes from the machine
 * file and a cluster file without overrides gives exactly the fabric of "COUNTxMACHINE". Each field is checked:
 * an unknown key, a wrong type, a non-positive bandwidth, a zero count or a topology whose chip count differs
 * from the machine's is an error naming the file, the field, the rule and the value. */
#include "sim/fabric_internal.h"

#include "arch/units.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { CLUSTER_COUNT_MAX = 100000, CLUSTER_CHIPS_MAX = 1u << 22 };

static int looks_like_path(const char *s)
{
    size_t n = strlen(s);
    return strchr(s, '/') != NULL || (n > 5 && strcmp(s + n - 5, ".json") == 0);
}

static char *slurp(const char *path, size_t *len)
{
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        size_t got = fread(buf + n, 1, cap - n, fp);
        n += got;
        if (n < cap)
            break;
        if (cap >= (size_t)1 << 24) { /* a cluster file is a few hundred bytes; refuse anything absurd */
            free(buf);
            buf = NULL;
            break;
        }
        char *nb = realloc(buf, cap * 2 + 1);
        if (!nb) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = nb;
        cap *= 2;
    }
    fclose(fp);
    if (buf) {
        buf[n] = '\0';
        *len = n;
    }
    return buf;
}

/* Parse the file as JSON; NULL with err set (byte offset, line, column) when malformed. */
static cJSON *parse_json(const char *path, const char *text, size_t len, tern_error *err)
{
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (root)
        return root;
    size_t off = end && end >= text ? (size_t)(end - text) : 0;
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
    char near[24];
    size_t k = 0;
    for (size_t i = off; i < len && k < sizeof near - 1 && text[i] != '\n'; i++)
        near[k++] = text[i];
    near[k] = '\0';
    tern_error_set(err, TERN_ERR_PARSE, "file %s: malformed JSON at line %u, column %u (byte %zu), near \"%s\"",
                   path, line, col, off, near);
    return NULL;
}

tern_status tern_cluster_file_sniff(const char *spec, int *is_cluster, tern_error *err)
{
    *is_cluster = 0;
    if (!spec || !looks_like_path(spec))
        return TERN_OK;
    size_t len;
    char *text = slurp(spec, &len);
    if (!text) /* unreadable: the machine loader reports it as an unknown machine */
        return TERN_OK;
    cJSON *root = parse_json(spec, text, len, err);
    free(text);
    if (!root)
        return TERN_ERR_PARSE;
    const cJSON *schema = cJSON_GetObjectItemCaseSensitive(root, "schema");
    *is_cluster = cJSON_IsString(schema) && strncmp(schema->valuestring, "tern-cluster/", 13) == 0;
    cJSON_Delete(root);
    return TERN_OK;
}

typedef struct {
    const char *file;
    tern_error *err;
} ctx;

static tern_status bad(ctx *c, const char *field, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static tern_status bad(ctx *c, const char *field, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return tern_error_set(c->err, TERN_ERR_INVALID, "cluster file %s: field '%s': %s", c->file, field, msg);
}

/* Every key of obj must be one of allowed (NULL-terminated). */
static tern_status known_keys(ctx *c, const cJSON *obj, const char *prefix, const char *const *allowed)
{
    for (const cJSON *it = obj->child; it; it = it->next) {
        int ok = 0;
        for (const char *const *a = allowed; *a; a++)
            ok |= it->string && strcmp(it->string, *a) == 0;
        if (!ok) {
            char accepted[256] = "";
            for (const char *const *a = allowed; *a; a++)
                snprintf(accepted + strlen(accepted), sizeof accepted - strlen(accepted), "%s%s",
                         a == allowed ? "" : ", ", *a);
            char field[192]; /* prefix (up to 167, get_figure's sub) + key */
            snprintf(field, sizeof field, "%s%s", prefix, it->string ? it->string : "?");
            return bad(c, field, "unknown field (accepted here: %s)", accepted);
        }
    }
    return TERN_OK;
}

static tern_status get_string(ctx *c, const cJSON *obj, const char *prefix, const char *key, int required,
                              const char **out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    char field[192]; /* prefix (up to 167, get_figure's sub) + key */
    snprintf(field, sizeof field, "%s%s", prefix, key);
    *out = NULL;
    if (!v)
        return required ? bad(c, field, "required, missing") : TERN_OK;
    if (!cJSON_IsString(v) || !v->valuestring[0])
        return bad(c, field, "must be a non-empty string");
    *out = v->valuestring;
    return TERN_OK;
}

/* A figure {"value": number, "unit": "...", "source": "...", "note": "..."} converted to SI. positive:
 * the value must be > 0 (a bandwidth); otherwise >= 0 (a latency). *set = 0 when the key is absent. */
static tern_status get_figure(ctx *c, const cJSON *obj, const char *prefix, const char *key, arch_unit_kind kind,
                              int positive, double *si, int *set)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    char field[160]; /* prefix + key; sub below adds ".value" and get_string/known_keys add a key to sub */
    snprintf(field, sizeof field, "%s%s", prefix, key);
    *set = 0;
    if (!v)
        return TERN_OK;
    if (!cJSON_IsObject(v))
        return bad(c, field, "must be an object {\"value\": N, \"unit\": \"%s\", \"source\": \"...\"}",
                   arch_unit_si_name(kind));
    static const char *const keys[] = {"value", "unit", "source", "note", NULL};
    char sub[168];
    snprintf(sub, sizeof sub, "%s.", field);
    tern_status st = known_keys(c, v, sub, keys);
    if (st)
        return st;
    const cJSON *val = cJSON_GetObjectItemCaseSensitive(v, "value");
    const cJSON *unit = cJSON_GetObjectItemCaseSensitive(v, "unit");
    snprintf(sub, sizeof sub, "%s.value", field);
    if (!cJSON_IsNumber(val))
        return bad(c, sub, "required number, %s", val ? "not a number" : "missing");
    double x = val->valuedouble;
    if (!isfinite(x) || (positive ? x <= 0 : x < 0))
        return bad(c, sub, "must be %s, got %g", positive ? "> 0" : ">= 0", x);
    snprintf(sub, sizeof sub, "%s.unit", field);
    if (!cJSON_IsString(unit))
        return bad(c, sub, "required string (one of %s)", arch_unit_accepted(kind));
    double scale;
    if (!arch_unit_scale(kind, unit->valuestring, &scale))
        return bad(c, sub, "unit \"%s\" is not one of %s", unit->valuestring, arch_unit_accepted(kind));
    const char *s;
    snprintf(sub, sizeof sub, "%s.", field);
    if ((st = get_string(c, v, sub, "source", 0, &s)) || (st = get_string(c, v, sub, "note", 0, &s)))
        return st;
    *si = x * scale;
    if (!isfinite(*si))
        return bad(c, field, "%g %s overflows a double in SI units", x, unit->valuestring);
    *set = 1;
    return TERN_OK;
}

/* "ring N", "2d-torus AxB", "3d-torus AxBxC" or "switch"; the dimensions' product (computed in 64 bits, so a
 * huge product is reported rather than wrapped) must equal the machine's chip count. */
static tern_status parse_topology(ctx *c, const char *text, unsigned chips, tern_instance_spec *in)
{
    char word[32] = "";
    int n = 0;
    if (sscanf(text, "%31s%n", word, &n) != 1)
        return bad(c, "topology", "empty");
    const char *rest = text + n;
    while (*rest == ' ')
        rest++;
    unsigned want;
    tern_topology_kind kind;
    if (!strcmp(word, "ring")) {
        kind = TERN_TOPOLOGY_RING;
        want = 1;
    } else if (!strcmp(word, "2d-torus")) {
        kind = TERN_TOPOLOGY_TORUS_2D;
        want = 2;
    } else if (!strcmp(word, "3d-torus")) {
        kind = TERN_TOPOLOGY_TORUS_3D;
        want = 3;
    } else if (!strcmp(word, "switch")) {
        kind = TERN_TOPOLOGY_SWITCH;
        want = 0;
    } else {
        return bad(c, "topology", "\"%s\": expected ring N, 2d-torus AxB, 3d-torus AxBxC or switch", text);
    }
    unsigned dims[3] = {1, 1, 1}, nd = 0;
    unsigned long long prod = 1;
    const char *p = rest;
    while (want && nd < want) {
        char *end;
        errno = 0;
        unsigned long long d = strtoull(p, &end, 10);
        if (end == p || errno || d == 0 || d > CLUSTER_CHIPS_MAX)
            return bad(c, "topology", "\"%s\": dimension %u must be an integer in 1..%u", text, nd + 1,
                       (unsigned)CLUSTER_CHIPS_MAX);
        dims[nd++] = (unsigned)d;
        prod *= d; /* each factor <= 2^22, at most 3 of them: fits 64 bits; compared below */
        p = end;
        if (nd < want) {
            if (*p != 'x')
                return bad(c, "topology", "\"%s\": %s takes %u dimensions joined by 'x'", text, word, want);
            p++;
        }
    }
    if (*p)
        return bad(c, "topology", "\"%s\": unexpected \"%s\" after the dimensions", text, p);
    if (want && prod != chips)
        return bad(c, "topology", "\"%s\": %llu chips, but the machine has %u", text, prod, chips);
    in->topology = kind;
    in->topology_ndims = want;
    for (unsigned i = 0; i < 3; i++)
        in->topology_dims[i] = i < want ? dims[i] : 0;
    snprintf(in->topology_text, sizeof in->topology_text, "%s", text);
    return TERN_OK;
}

/* The machine reference: a relative path is taken against the cluster file's directory first. */
static tern_status load_machine(ctx *c, const char *ref, tern_machine **m)
{
    char cand[1024];
    const char *slash = strrchr(c->file, '/');
    if (looks_like_path(ref) && ref[0] != '/' && slash) {
        snprintf(cand, sizeof cand, "%.*s/%s", (int)(slash - c->file), c->file, ref);
        FILE *fp = fopen(cand, "rb");
        if (fp) {
            fclose(fp);
            ref = cand;
        }
    }
    char path[1024];
    tern_status st = tern_machine_find(ref, path, sizeof path, c->err);
    if (st == TERN_ERR_NOT_FOUND)
        return bad(c, "machine", "unknown machine \"%s\" (`tern info` lists the catalogue)", ref);
    if (st)
        return st;
    if ((st = tern_machine_load(ref, m, c->err)))
        return tern_error_prefix(c->err, "cluster file %s: field 'machine': ", c->file);
    return TERN_OK;
}

static tern_status build(ctx *c, const cJSON *root, const tern_fabric_opts *o, tern_fabric **out)
{
    static const char *const top[] = {"schema", "name", "description", "source", "note", "machine", "count",
                                      "efa", "neuronlink", "topology", NULL};
    static const char *const efa_keys[] = {"bandwidth_per_instance", "latency", "note", NULL};
    static const char *const nl_keys[] = {"bandwidth_per_chip", "scaleup_bandwidth_per_chip", "latency", "note",
                                          NULL};
    if (!cJSON_IsObject(root))
        return tern_error_set(c->err, TERN_ERR_INVALID, "cluster file %s: the top level must be an object",
                              c->file);
    tern_status st = known_keys(c, root, "", top);
    if (st)
        return st;
    const char *schema, *name, *machine, *topo, *s;
    if ((st = get_string(c, root, "", "schema", 1, &schema)))
        return st;
    if (strcmp(schema, "tern-cluster/1"))
        return bad(c, "schema", "\"%s\" is not supported (expected \"tern-cluster/1\")", schema);
    if ((st = get_string(c, root, "", "name", 0, &name)) || (st = get_string(c, root, "", "description", 0, &s)) ||
        (st = get_string(c, root, "", "source", 0, &s)) || (st = get_string(c, root, "", "note", 0, &s)) ||
        (st = get_string(c, root, "", "machine", 1, &machine)) ||
        (st = get_string(c, root, "", "topology", 0, &topo)))
        return st;
    if (name && strlen(name) >= 96)
        return bad(c, "name", "longer than 95 characters");
    const cJSON *cnt = cJSON_GetObjectItemCaseSensitive(root, "count");
    if (!cnt)
        return bad(c, "count", "required, missing (the number of instances or systems)");
    if (!cJSON_IsNumber(cnt) || cnt->valuedouble != floor(cnt->valuedouble))
        return bad(c, "count", "must be an integer");
    if (cnt->valuedouble < 1 || cnt->valuedouble > CLUSTER_COUNT_MAX)
        return bad(c, "count", "must be in 1..%d, got %.17g", CLUSTER_COUNT_MAX, cnt->valuedouble);
    unsigned count = (unsigned)cnt->valuedouble;

    const cJSON *efa = cJSON_GetObjectItemCaseSensitive(root, "efa");
    const cJSON *nl = cJSON_GetObjectItemCaseSensitive(root, "neuronlink");
    if (efa && !cJSON_IsObject(efa))
        return bad(c, "efa", "must be an object");
    if (nl && !cJSON_IsObject(nl))
        return bad(c, "neuronlink", "must be an object");
    if ((efa && (st = known_keys(c, efa, "efa.", efa_keys))) ||
        (nl && (st = known_keys(c, nl, "neuronlink.", nl_keys))) ||
        (efa && (st = get_string(c, efa, "efa.", "note", 0, &s))) ||
        (nl && (st = get_string(c, nl, "neuronlink.", "note", 0, &s))))
        return st;

    tern_machine *m = NULL;
    if ((st = load_machine(c, machine, &m)))
        return st;
    const tern_instance_spec *base = tern_machine_instance(m);
    if (!base) {
        st = bad(c, "machine", "\"%s\" is a %s: a cluster needs an instance or a system", machine,
                 tern_machine_kind_name(tern_machine_kind_of(m)));
        goto done;
    }
    tern_instance_spec in = *base;
    if ((unsigned long long)count * in.chips > CLUSTER_CHIPS_MAX) {
        st = bad(c, "count", "%u x %u chips of '%s' = %llu chips, above the limit of %u", count, in.chips,
                 tern_machine_name(m), (unsigned long long)count * in.chips, (unsigned)CLUSTER_CHIPS_MAX);
        goto done;
    }
    double v;
    int set;
    if (efa) {
        if ((st = get_figure(c, efa, "efa.", "bandwidth_per_instance", ARCH_UNIT_BANDWIDTH, 1, &v, &set)))
            goto done;
        if (set)
            in.efa_bandwidth = v;
        if ((st = get_figure(c, efa, "efa.", "latency", ARCH_UNIT_TIME, 0, &v, &set)))
            goto done;
        if (set)
            in.efa_latency_s = v;
    }
    if (nl) {
        if ((st = get_figure(c, nl, "neuronlink.", "bandwidth_per_chip", ARCH_UNIT_BANDWIDTH, 1, &v, &set)))
            goto done;
        if (set)
            in.link_bandwidth_per_chip = v;
        if ((st = get_figure(c, nl, "neuronlink.", "scaleup_bandwidth_per_chip", ARCH_UNIT_BANDWIDTH, 1, &v, &set)))
            goto done;
        if (set) {
            if (base->scaleup_bandwidth_per_chip <= 0) {
                st = bad(c, "neuronlink.scaleup_bandwidth_per_chip",
                         "'%s' has no scale-up link between servers (only a system such as trn2-ultraserver does)",
                         tern_machine_name(m));
                goto done;
            }
            in.scaleup_bandwidth_per_chip = v;
        }
        if ((st = get_figure(c, nl, "neuronlink.", "latency", ARCH_UNIT_TIME, 0, &v, &set)))
            goto done;
        if (set)
            in.link_latency_s = v;
    }
    if (topo) {
        if (tern_machine_kind_of(m) == TERN_MACHINE_SYSTEM && base->built_from_count > 1) {
            st = bad(c, "topology", "'%s' is a system of %u instances; its topology runs through them and is not "
                     "overridden here (override an instance's)", tern_machine_name(m), base->built_from_count);
            goto done;
        }
        if ((st = parse_topology(c, topo, in.chips, &in)))
            goto done;
    }
    if ((st = tern_fabric_build(m, &in, count, o, out, c->err)))
        goto done;
    if (name) {
        tern_fabric_set_name(*out, name);
    } else if (count > 1) {
        char nm[96];
        snprintf(nm, sizeof nm, "%ux%s", count, tern_machine_name(m));
        tern_fabric_set_name(*out, nm);
    }
done:
    tern_machine_free(m);
    return st;
}

tern_status tern_cluster_file_load(const char *path, const tern_fabric_opts *o, tern_fabric **out,
                                   tern_error *err)
{
    *out = NULL;
    size_t len;
    char *text = slurp(path, &len);
    if (!text)
        return tern_error_set(err, TERN_ERR_NOT_FOUND, "cluster file %s: cannot be read", path);
    cJSON *root = parse_json(path, text, len, err);
    free(text);
    if (!root)
        return TERN_ERR_PARSE;
    ctx c = {path, err};
    tern_status st = build(&c, root, o, out);
    cJSON_Delete(root);
    return st;
}
