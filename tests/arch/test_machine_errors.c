/* The loader rejects broken machine files with a message that names the file, the field path, the problem
 * and the offending value: missing field, wrong JSON type, out of range, wrong unit, unknown key (typo),
 * missing source, malformed JSON, missing or wrong-kind referenced file, reference cycles, inconsistent
 * topology and cross-field rules. Each case mutates a copy of a catalogue file in a temporary directory. */
#include <cjson/cJSON.h>
#include <stdarg.h>
#include <unistd.h>

#include "check.h"
#include "tern/arch.h"

typedef struct {
    char dir[256];
} tmp;

static cJSON *read_json(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return cJSON_Parse(buf);
}

static void write_text(const tmp *t, const char *file, const char *text)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", t->dir, file);
    FILE *f = fopen(path, "wb");
    if (!f) {
        perror(path);
        exit(2);
    }
    fputs(text, f);
    fclose(f);
}

static void write_json(const tmp *t, const char *file, const cJSON *j)
{
    char *s = cJSON_Print(j);
    write_text(t, file, s);
    free(s);
}

static cJSON *catalogue(const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "data/machines/%s.json", name);
    cJSON *j = read_json(path);
    if (!j) {
        fprintf(stderr, "cannot read %s\n", path);
        exit(2);
    }
    return j;
}

/* Walk a dotted path ("core.sbuf.partitions") to an item. */
static cJSON *at(cJSON *j, const char *path)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *tok = strtok(buf, "."); tok && j; tok = strtok(NULL, "."))
        j = cJSON_GetObjectItemCaseSensitive(j, tok);
    if (!j) {
        fprintf(stderr, "test bug: no %s\n", path);
        exit(2);
    }
    return j;
}

/* Load dir/file, expect failure with code, and every needle in the message. */
static void expect_error(const tmp *t, const char *file, tern_status code, ...)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", t->dir, file);
    tern_machine *m = (tern_machine *)1;
    tern_error err;
    tern_status st = tern_machine_load(path, &m, &err);
    CHECK_MSG(st == code, "%s: expected status %s, got %s (%s)", file, tern_status_name(code), tern_status_name(st),
              st ? err.msg : "loaded");
    CHECK(m == NULL);
    if (st == TERN_OK) {
        tern_machine_free(m);
        return;
    }
    va_list ap;
    va_start(ap, code);
    for (const char *needle = va_arg(ap, const char *); needle; needle = va_arg(ap, const char *))
        CHECK_STR_CONTAINS(err.msg, needle);
    va_end(ap);
}

/* Mutate a copy of catalogue file `base` with fn, write it as file, expect an error. */
#define CASE(name_, base_, file_, mutation_, code_, ...)                                                     \
    do {                                                                                                     \
        TEST_BEGIN(name_);                                                                                   \
        cJSON *j_ = catalogue(base_);                                                                        \
        mutation_;                                                                                           \
        write_json(&t, file_, j_);                                                                           \
        cJSON_Delete(j_);                                                                                    \
        expect_error(&t, file_, code_, __VA_ARGS__, NULL);                                                   \
    } while (0)

static void set_num(cJSON *fig, double v) { cJSON_SetNumberValue(cJSON_GetObjectItemCaseSensitive(fig, "value"), v); }

static void set_str(cJSON *obj, const char *key, const char *v)
{
    cJSON_ReplaceItemInObjectCaseSensitive(obj, key, cJSON_CreateString(v));
}

static void rename_key(cJSON *obj, const char *from, const char *to)
{
    cJSON *item = cJSON_DetachItemFromObjectCaseSensitive(obj, from);
    cJSON_AddItemToObject(obj, to, item);
}

int main(void)
{
    tmp t;
    snprintf(t.dir, sizeof t.dir, "/tmp/tern_arch_errXXXXXX");
    if (!mkdtemp(t.dir)) {
        perror("mkdtemp");
        return 2;
    }
    /* A valid local core the chip cases can refer to. */
    cJSON *c0 = catalogue("neuroncore-v3");
    write_json(&t, "neuroncore-v3.json", c0);
    cJSON_Delete(c0);

    CASE("missing field", "neuroncore-v3", "missing.json",
         cJSON_DeleteItemFromObjectCaseSensitive(at(j_, "core.sbuf"), "partitions"), TERN_ERR_INVALID,
         "missing.json", "core.sbuf.partitions", "missing");
    CASE("wrong type", "neuroncore-v3", "wrongtype.json",
         set_str(at(j_, "core.sbuf.partitions"), "value", "many"), TERN_ERR_INVALID, "wrongtype.json",
         "core.sbuf.partitions.value", "expected a number", "\"many\"");
    CASE("out of range", "neuroncore-v3", "range.json", set_num(at(j_, "core.sbuf.partitions"), 2000),
         TERN_ERR_RANGE, "range.json", "core.sbuf.partitions", "2000", "[1, 1024]");
    CASE("clock range", "neuroncore-v3", "clock.json",
         (set_num(at(j_, "core.tensor.clock"), 50), set_str(at(j_, "core.tensor.clock"), "unit", "MHz")),
         TERN_ERR_RANGE, "clock.json", "core.tensor.clock", "50 MHz", "out of range");
    CASE("not whole", "neuroncore-v3", "frac.json", set_num(at(j_, "core.dma.engines"), 15.5), TERN_ERR_INVALID,
         "frac.json", "core.dma.engines", "15.5", "whole number");
    CASE("wrong unit", "neuroncore-v3", "unit.json", set_str(at(j_, "core.tensor.clock"), "unit", "GB/s"),
         TERN_ERR_INVALID, "unit.json", "core.tensor.clock.unit", "\"GB/s\"", "GHz");
    CASE("unit on count", "neuroncore-v3", "unit2.json", cJSON_AddStringToObject(at(j_, "core.dma.engines"), "unit", "GHz"),
         TERN_ERR_INVALID, "unit2.json", "core.dma.engines.unit", "dimensionless", "GHz");
    CASE("unknown key", "neuroncore-v3", "typo.json", rename_key(at(j_, "core.sbuf"), "partitions", "partitons"),
         TERN_ERR_INVALID, "typo.json", "core.sbuf.partitons", "unknown key", "did you mean \"partitions\"");
    CASE("unknown top key", "neuroncore-v3", "typo2.json", cJSON_AddStringToObject(j_, "colour", "red"),
         TERN_ERR_INVALID, "typo2.json", "colour", "unknown key");
    CASE("unknown dtype", "neuroncore-v3", "dtype.json",
         rename_key(at(j_, "core.tensor.macs_per_pe_cycle"), "fp8", "int8"), TERN_ERR_INVALID, "dtype.json",
         "core.tensor.macs_per_pe_cycle.int8", "unknown data type");
    CASE("missing dtype", "neuroncore-v3", "dtype2.json",
         cJSON_DeleteItemFromObjectCaseSensitive(at(j_, "core.tensor.macs_per_pe_cycle"), "fp32"),
         TERN_ERR_INVALID, "dtype2.json", "core.tensor.macs_per_pe_cycle.fp32", "missing");
    CASE("missing source", "neuroncore-v3", "nosource.json",
         cJSON_DeleteItemFromObjectCaseSensitive(at(j_, "core.tensor.clock"), "source"), TERN_ERR_INVALID,
         "nosource.json", "core.tensor.clock.source", "missing", "source");
    CASE("empty source", "neuroncore-v3", "emptysource.json", set_str(at(j_, "core.psum.banks"), "source", ""),
         TERN_ERR_INVALID, "emptysource.json", "core.psum.banks.source", "non-empty");
    CASE("bare number", "neuroncore-v3", "bare.json",
         cJSON_ReplaceItemInObjectCaseSensitive(at(j_, "core.psum"), "banks", cJSON_CreateNumber(8)),
         TERN_ERR_INVALID, "bare.json", "core.psum.banks", "sourced figure", "8");
    CASE("usable above total", "neuroncore-v3", "usable.json",
         set_num(at(j_, "core.sbuf.usable_bytes_per_partition"), 300000), TERN_ERR_RANGE, "usable.json",
         "core.sbuf.usable_bytes_per_partition", "300000");
    CASE("array wider than SBUF", "neuroncore-v3", "rows.json", set_num(at(j_, "core.tensor.pe_rows"), 256),
         TERN_ERR_RANGE, "rows.json", "core.tensor.pe_rows", "256", "partitions (128)");
    CASE("bad kind", "neuroncore-v3", "kind.json", set_str(j_, "kind", "gpu"), TERN_ERR_INVALID, "kind.json",
         "field kind", "\"gpu\"");
    CASE("bad schema", "neuroncore-v3", "schema.json", set_str(j_, "schema", "tern-machine/9"),
         TERN_ERR_UNSUPPORTED, "schema.json", "tern-machine/9");
    CASE("unknown published key", "trainium2", "pub.json",
         (set_str(at(j_, "chip"), "core", "neuroncore-v3"),
          rename_key(at(j_, "published"), "chip_flops_bf16", "chip_flops_bf61")),
         TERN_ERR_INVALID, "pub.json", "published.chip_flops_bf61", "unknown key");
    CASE("published level", "neuroncore-v3", "publevel.json",
         cJSON_AddItemToObject(at(j_, "published"), "total_hbm_bytes",
                               cJSON_Duplicate(at(j_, "published.core_sbuf_bytes"), 1)),
         TERN_ERR_INVALID, "publevel.json", "published.total_hbm_bytes", "core file");
    CASE("missing core", "trainium2", "nocore.json", set_str(at(j_, "chip"), "core", "neuroncore-v9"),
         TERN_ERR_NOT_FOUND, "nocore.json", "chip.core", "neuroncore-v9", "no machine file", "searched");
    CASE("reference is a path", "trainium2", "slash.json", set_str(at(j_, "chip"), "core", "../etc/x"),
         TERN_ERR_INVALID, "slash.json", "chip.core", "../etc/x");
    CASE("self cycle", "trainium2", "selfchip.json", set_str(at(j_, "chip"), "core", "selfchip"), TERN_ERR_INVALID,
         "selfchip.json", "chip.core", "cycle", "selfchip.json -> selfchip.json");
    CASE("wrong kind reference", "trainium2", "kindref.json", set_str(at(j_, "chip"), "core", "trn2.48xlarge"),
         TERN_ERR_INVALID, "kindref.json", "chip.core", "instance file", "expected a core");
    CASE("instance cycle", "trn2.48xlarge", "selfinst.json", set_str(at(j_, "instance"), "chip", "selfinst"),
         TERN_ERR_INVALID, "selfinst.json", "instance.chip", "cycle");
    CASE("topology mismatch", "trn2.48xlarge", "topo.json",
         set_str(at(j_, "instance.interconnect.topology"), "value", "2d-torus 4x3"), TERN_ERR_INVALID, "topo.json",
         "instance.interconnect.topology", "12 chips", "16");
    CASE("topology unknown", "trn2.48xlarge", "topo2.json",
         set_str(at(j_, "instance.interconnect.topology"), "value", "hypercube 4"), TERN_ERR_INVALID, "topo2.json",
         "instance.interconnect.topology", "hypercube");
    CASE("missing price", "trn2.48xlarge", "price.json",
         cJSON_DeleteItemFromObjectCaseSensitive(at(j_, "instance"), "price"), TERN_ERR_INVALID, "price.json",
         "instance.price", "missing");
    CASE("built_from mismatch", "trn2-ultraserver", "ultra.json", set_num(at(j_, "system.built_from.count"), 3),
         TERN_ERR_INVALID, "ultra.json", "system.built_from.count", "48 chips", "64");
    CASE("duplicate key", "neuroncore-v3", "dup.json",
         cJSON_AddItemToObject(at(j_, "core.psum"), "banks", cJSON_Duplicate(at(j_, "core.psum.banks"), 1)),
         TERN_ERR_INVALID, "dup.json", "core.psum.banks", "duplicate");

    TEST_BEGIN("malformed JSON");
    write_text(&t, "broken.json", "{\n  \"schema\": \"tern-machine/1\",\n  \"kind\": \"core\"\n  \"name\": \"x\"\n}\n");
    expect_error(&t, "broken.json", TERN_ERR_PARSE, "broken.json", "malformed JSON", "line 4", NULL);
    write_text(&t, "empty.json", "");
    expect_error(&t, "empty.json", TERN_ERR_PARSE, "empty.json", "malformed JSON", NULL);
    write_text(&t, "array.json", "[1, 2]");
    expect_error(&t, "array.json", TERN_ERR_INVALID, "array.json", "top level", NULL);

    TEST_BEGIN("not found");
    tern_machine *m = NULL;
    tern_error err;
    CHECK_EQ_INT(tern_machine_load("no-such-machine", &m, &err), TERN_ERR_NOT_FOUND);
    CHECK_STR_CONTAINS(err.msg, "no-such-machine");
    CHECK_EQ_INT(tern_machine_load("/nonexistent/x.json", &m, &err), TERN_ERR_NOT_FOUND);
    CHECK_STR_CONTAINS(err.msg, "/nonexistent/x.json");
    CHECK_EQ_INT(tern_machine_load("bad name!", &m, &err), TERN_ERR_NOT_FOUND);
    CHECK_EQ_INT(tern_machine_load("", &m, &err), TERN_ERR_INVALID);
    CHECK(m == NULL);

    /* TERN_MACHINE_PATH: a name resolves in the user's directory first, and the catalogue listing fails on a
     * broken file there, naming it. */
    TEST_BEGIN("machine path");
    setenv("TERN_MACHINE_PATH", t.dir, 1);
    CHECK_EQ_INT(tern_machine_load("neuroncore-v3", &m, &err), TERN_OK);
    if (m) {
        CHECK_STR_CONTAINS(tern_machine_path(m), t.dir);
        tern_machine_free(m);
    }
    tern_machine_entry *e;
    size_t n;
    CHECK(tern_machine_list(&e, &n, &err) != TERN_OK);
    CHECK_STR_CONTAINS(err.msg, t.dir);
    unsetenv("TERN_MACHINE_PATH");

    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", t.dir);
    if (system(cmd) != 0)
        fprintf(stderr, "warning: could not remove %s\n", t.dir);
    return check_report();
}
