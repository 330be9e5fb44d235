/* What-if machines: a user's own files (a 256x256 PE array, twice the SBUF, a bigger instance) load from any
 * directory, their references resolve next to them first (shadowing the catalogue), and every derived figure
 * follows the files: 4x the PEs gives 4x the FLOPS at every level, doubled SBUF doubles SBUF capacity,
 * doubled chips doubles totals, and what did not change stays put. */
#include <cjson/cJSON.h>
#include <unistd.h>

#include "check.h"
#include "tern/arch.h"

static char dir[256];

static cJSON *catalogue(const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "data/machines/%s.json", name);
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        exit(2);
    }
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return cJSON_Parse(buf);
}

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

static void set_num(cJSON *j, const char *path, double v)
{
    cJSON_SetNumberValue(cJSON_GetObjectItemCaseSensitive(at(j, path), "value"), v);
}

static void save(cJSON *j, const char *file)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    char *s = cJSON_Print(j);
    FILE *f = fopen(path, "wb");
    if (!f || !s) {
        perror(path);
        exit(2);
    }
    fputs(s, f);
    fclose(f);
    free(s);
    cJSON_Delete(j);
}

static tern_machine *load(const char *file)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    tern_machine *m = NULL;
    tern_error err;
    if (tern_machine_load(path, &m, &err) != TERN_OK) {
        fprintf(stderr, "NOT OK load %s: %s\n", file, err.msg);
        CHECK(0);
    }
    return m;
}

static tern_peaks peaks_of(const char *name_or_file, bool local)
{
    tern_peaks p;
    memset(&p, 0, sizeof p);
    tern_machine *m = NULL;
    tern_error err;
    if (local) {
        m = load(name_or_file);
    } else if (tern_machine_load(name_or_file, &m, &err) != TERN_OK) {
        fprintf(stderr, "NOT OK load %s: %s\n", name_or_file, err.msg);
        CHECK(0);
    }
    if (m) {
        tern_machine_peaks(m, &p);
        tern_machine_free(m);
    }
    return p;
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/tern_whatifXXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 2;
    }
    /* big-core: a 256x256 array (which needs 256 SBUF and PSUM partitions) with twice the SBUF per partition. */
    cJSON *c = catalogue("neuroncore-v3");
    cJSON_ReplaceItemInObjectCaseSensitive(c, "name", cJSON_CreateString("big-core"));
    set_num(c, "core.tensor.pe_rows", 256);
    set_num(c, "core.tensor.pe_cols", 256);
    set_num(c, "core.sbuf.partitions", 256);
    set_num(c, "core.psum.partitions", 256);
    set_num(c, "core.sbuf.bytes_per_partition", 448); /* KiB, as in the file */
    save(c, "big-core.json");
    /* big-chip -> big-core (found next to it), big-inst -> big-chip, 32 chips in an 8x4 torus. */
    cJSON *ch = catalogue("trainium2");
    cJSON_ReplaceItemInObjectCaseSensitive(ch, "name", cJSON_CreateString("big-chip"));
    cJSON_ReplaceItemInObjectCaseSensitive(at(ch, "chip"), "core", cJSON_CreateString("big-core"));
    save(ch, "big-chip.json");
    cJSON *in = catalogue("trn2.48xlarge");
    cJSON_ReplaceItemInObjectCaseSensitive(in, "name", cJSON_CreateString("big-inst"));
    cJSON_ReplaceItemInObjectCaseSensitive(at(in, "instance"), "chip", cJSON_CreateString("big-chip"));
    set_num(in, "instance.chips", 32);
    cJSON_ReplaceItemInObjectCaseSensitive(at(in, "instance.interconnect.topology"), "value",
                                           cJSON_CreateString("2d-torus 8x4"));
    save(in, "big-inst.json");

    tern_peaks base = peaks_of("trn2.48xlarge", false);
    tern_peaks bc = peaks_of("big-core.json", true);
    tern_peaks bchip = peaks_of("big-chip.json", true);
    tern_peaks bi = peaks_of("big-inst.json", true);

    TEST_BEGIN("256x256 array");
    for (int d = 0; d < TERN_ARCH_DTYPE_COUNT; d++) {
        CHECK_NEAR(bc.core_flops[d], 4 * base.core_flops[d], 1);
        CHECK_NEAR(bchip.chip_flops[d], 4 * base.chip_flops[d], 1);
        CHECK_NEAR(bi.total_flops[d], 8 * base.total_flops[d], 1e3);
    }
    CHECK_NEAR(bc.core_flops[TERN_ARCH_BF16] / 1e12, 314.57, 0.01); /* 256*256*2*2.4e9 */

    TEST_BEGIN("SBUF");
    /* 2x partitions x 2x bytes per partition. */
    CHECK_NEAR(bc.core_sbuf_bytes, 4 * base.core_sbuf_bytes, 0);
    CHECK_NEAR(bchip.chip_sbuf_bytes, 4 * base.chip_sbuf_bytes, 0);
    CHECK_NEAR(bc.core_psum_bytes, 2 * base.core_psum_bytes, 0);

    TEST_BEGIN("unchanged figures");
    CHECK_NEAR(bi.chip_hbm_bytes, base.chip_hbm_bytes, 0);
    CHECK_NEAR(bi.total_hbm_bytes, 2 * base.total_hbm_bytes, 0);
    CHECK_NEAR(bi.core_dma_bandwidth, base.core_dma_bandwidth, 0);
    CHECK_EQ_INT(bi.cores, 256);

    /* Only SBUF doubled, nothing else: FLOPS unchanged. */
    TEST_BEGIN("double SBUF only");
    cJSON *s = catalogue("neuroncore-v3");
    set_num(s, "core.sbuf.bytes_per_partition", 448);
    save(s, "sbuf2.json");
    tern_peaks s2 = peaks_of("sbuf2.json", true);
    CHECK_NEAR(s2.core_sbuf_bytes, 2 * base.core_sbuf_bytes, 0);
    CHECK_NEAR(s2.core_flops[TERN_ARCH_BF16], base.core_flops[TERN_ARCH_BF16], 0);

    /* A local file named like a catalogue core shadows it for references from that directory. */
    TEST_BEGIN("shadowing");
    cJSON *fast = catalogue("neuroncore-v3");
    set_num(fast, "core.tensor.clock", 4.8);
    save(fast, "neuroncore-v3.json");
    save(catalogue("trainium2"), "trainium2.json");
    tern_peaks sh = peaks_of("trainium2.json", true);
    CHECK_NEAR(sh.chip_flops[TERN_ARCH_BF16], 2 * base.chip_flops[TERN_ARCH_BF16], 1);
    tern_peaks builtin = peaks_of("trainium2", false);
    CHECK_NEAR(builtin.chip_flops[TERN_ARCH_BF16], base.chip_flops[TERN_ARCH_BF16], 0);

    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "warning: could not remove %s\n", dir);
    return check_report();
}
