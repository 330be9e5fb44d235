/* Every machine in the built-in catalogue loads, is named after its file, carries a source for every figure,
 * and its derived peaks agree within 7% with every published headline figure (the "published" blocks in the
 * files, and an independent table below transcribed from the AWS Neuron documentation). Also checks the
 * derivation formula itself by arithmetic on the engine parameters. */
#include "check.h"
#include "tern/arch.h"

#define TOL 0.07

/* Independent copy of the headline figures (AWS Neuron SDK pages under about-neuron/arch/neuron-hardware/), kept
 * here so a wrong "published" block in a data file cannot hide a wrong derivation. */
static const struct {
    const char *machine, *key;
    double value;
} HEADLINES[] = {
    {"neuroncore-v2", "core_flops_bf16", 92e12},         {"neuroncore-v3", "core_flops_bf16", 79e12},
    {"neuroncore-v3", "core_flops_fp8", 158e12},         {"neuroncore-v4", "core_flops_mxfp8", 315e12},
    {"neuroncore-v4", "core_flops_fp32", 20e12},         {"trainium1", "chip_flops_bf16", 190e12},
    {"trainium1", "chip_flops_fp32", 47.5e12},           {"trainium2", "chip_flops_bf16", 667e12},
    {"trainium2", "chip_flops_fp8", 1299e12},            {"trainium3", "chip_flops_bf16", 671e12},
    {"trainium3", "chip_flops_mxfp8", 2517e12},          {"trn1.32xlarge", "total_flops_bf16", 3040e12},
    {"trn1.32xlarge", "total_flops_fp32", 760e12},       {"trn2.48xlarge", "total_flops_bf16", 10.7e15},
    {"trn2.48xlarge", "total_flops_fp8", 20.8e15},       {"trn2-ultraserver", "total_flops_bf16", 42.8e15},
    {"trn3-ultraserver-gen1", "total_flops_mxfp8", 161088e12},
    {"trn3-ultraserver-gen2", "total_flops_bf16", 96624e12},
    {"trn2.48xlarge", "total_hbm_bytes", 1536.0 * 1024 * 1024 * 1024},
    {"trn2.48xlarge", "total_hbm_bandwidth", 46.4e12},   {"trn1.2xlarge", "total_hbm_bandwidth", 820.0 * 1024 * 1024 * 1024},
    {"trn3-ultraserver-gen2", "total_hbm_bandwidth", 705.6e12},
    {"trainium2", "chip_sbuf_bytes", 224.0 * 1024 * 1024},
    {"neuroncore-v2", "core_dma_bandwidth", 272e9},      {"neuroncore-v4", "core_dma_bandwidth", 528e9},
};

static const char *const CATALOGUE[] = {
    "neuroncore-v2", "neuroncore-v3", "neuroncore-v4", "trainium1",        "trainium2",
    "trainium3",     "trn1.2xlarge",  "trn1.32xlarge", "trn1n.32xlarge",   "trn2.48xlarge",
    "trn2u.48xlarge", "trn2-ultraserver", "trn3-ultraserver-gen1", "trn3-ultraserver-gen2",
};

static void test_list(void)
{
    TEST_BEGIN("list");
    tern_machine_entry *e;
    size_t n;
    tern_error err;
    CHECK_MSG(tern_machine_list(&e, &n, &err) == TERN_OK, "list failed: %s", err.msg);
    CHECK_EQ_INT(n, TERN_ARRAY_LEN(CATALOGUE));
    for (size_t i = 0; i < TERN_ARRAY_LEN(CATALOGUE); i++) {
        bool found = false;
        for (size_t j = 0; j < n; j++)
            if (!strcmp(e[j].name, CATALOGUE[i]))
                found = true;
        CHECK_MSG(found, "catalogue lacks %s", CATALOGUE[i]);
    }
    for (size_t j = 1; j < n; j++)
        CHECK_MSG(e[j - 1].kind <= e[j].kind, "list not sorted by kind at %s", e[j].name);
    tern_machine_list_free(e);
}

static void test_every_machine(void)
{
    for (size_t i = 0; i < TERN_ARRAY_LEN(CATALOGUE); i++) {
        TEST_BEGIN(CATALOGUE[i]);
        tern_machine *m;
        tern_error err;
        tern_status st = tern_machine_load(CATALOGUE[i], &m, &err);
        CHECK_MSG(st == TERN_OK, "%s failed to load: %s", CATALOGUE[i], err.msg);
        if (st != TERN_OK)
            continue;
        CHECK_MSG(!strcmp(tern_machine_name(m), CATALOGUE[i]), "name %s != file %s", tern_machine_name(m),
                  CATALOGUE[i]);
        CHECK(tern_machine_fact_count(m) > 10);
        for (size_t f = 0; f < tern_machine_fact_count(m); f++) {
            const tern_fact *fa = tern_machine_fact(m, f);
            CHECK_MSG(fa->source && strlen(fa->source) > 8, "%s: %s has no real source", CATALOGUE[i], fa->path);
        }
        tern_peaks p;
        tern_machine_peaks(m, &p);
        CHECK_MSG(tern_machine_published_count(m) >= 4, "%s: only %zu published figures", CATALOGUE[i],
                  tern_machine_published_count(m));
        for (size_t k = 0; k < tern_machine_published_count(m); k++) {
            const tern_published *pub = tern_machine_published(m, k);
            double der = -1;
            CHECK_EQ_INT(tern_peaks_get(&p, pub->key, &der), TERN_OK);
            double rel = der / pub->value_si - 1;
            CHECK_MSG(fabs(rel) <= TOL, "%s %s: derived %.6g vs published %.6g (%g %s, %s): %+.1f%% beyond 7%%",
                      CATALOGUE[i], pub->key, der, pub->value_si, pub->value, pub->unit, pub->source, rel * 100);
        }
        for (size_t h = 0; h < TERN_ARRAY_LEN(HEADLINES); h++) {
            if (strcmp(HEADLINES[h].machine, CATALOGUE[i]))
                continue;
            double der = -1;
            CHECK_EQ_INT(tern_peaks_get(&p, HEADLINES[h].key, &der), TERN_OK);
            CHECK_MSG(fabs(der / HEADLINES[h].value - 1) <= TOL, "%s %s: derived %.6g vs headline %.6g",
                      CATALOGUE[i], HEADLINES[h].key, der, HEADLINES[h].value);
        }
        /* The derivation, by hand: rows x cols x 2 x clock x rate x cores. */
        const tern_core_spec *k = tern_machine_core(m);
        double bf16 = (double)k->tensor.pe_rows * k->tensor.pe_cols * 2 * k->tensor.clock_hz *
                      k->tensor.macs_per_pe_cycle[TERN_ARCH_BF16];
        CHECK_NEAR(p.core_flops[TERN_ARCH_BF16], bf16, 1);
        CHECK_NEAR(p.total_flops[TERN_ARCH_BF16], bf16 * p.cores, 1e3);
        CHECK_NEAR(p.core_flops[TERN_ARCH_FP32], p.core_flops[TERN_ARCH_BF16] / 4, 1);
        CHECK_NEAR(p.core_dma_bandwidth, k->dma.engines * k->dma.bandwidth_per_engine, 1);
        CHECK_EQ_INT(k->dma.engines, 16);
        CHECK_EQ_INT(k->dma.queues_per_engine, 16);
        CHECK_EQ_INT(k->costs.min_ii, 64);
        tern_machine_free(m);
    }
}

/* Spot checks of the hierarchy and specific figures the rest of tern relies on. */
static void test_figures(void)
{
    TEST_BEGIN("figures");
    tern_machine *m;
    tern_error err;
    CHECK_EQ_INT(tern_machine_load("trn2.48xlarge", &m, &err), TERN_OK);
    tern_peaks p;
    tern_machine_peaks(m, &p);
    CHECK_EQ_INT(p.chips, 16);
    CHECK_EQ_INT(p.cores, 128);
    CHECK_NEAR(p.total_hbm_bytes, 1536.0 * 1024 * 1024 * 1024, 0);
    CHECK_NEAR(p.total_flops[TERN_ARCH_BF16] / 1e15, 10.066, 0.001);
    CHECK_EQ_INT(tern_machine_kind_of(m), TERN_MACHINE_INSTANCE);
    CHECK(tern_machine_instance(m)->topology == TERN_TOPOLOGY_TORUS_2D);
    CHECK_EQ_INT(tern_machine_instance(m)->topology_dims[1], 4);
    CHECK(!tern_machine_instance(m)->has_price);
    CHECK_STR_CONTAINS(tern_machine_source(m, "chip.hbm.bandwidth"), "trainium2.rst");
    CHECK(tern_machine_conflict_count(m) >= 3);
    const tern_core_spec *k = tern_machine_core(m);
    CHECK_NEAR(k->tensor.clock_hz, 2.4e9, 0);
    CHECK_NEAR(k->tensor.macs_per_pe_cycle[TERN_ARCH_FP8], 2, 0);
    CHECK_EQ_INT(k->sbuf.bytes_per_partition, 224 * 1024);
    CHECK_EQ_INT(k->sbuf.usable_bytes_per_partition, 212984);
    CHECK_EQ_INT(k->psum.banks, 8);
    CHECK_NEAR(k->dma.fixed_cost_s, 1.3e-6, 1e-15);
    CHECK_NEAR(k->dma.hwdge_cost_s, 600e-9, 1e-15);
    tern_machine_free(m);

    CHECK_EQ_INT(tern_machine_load("trn1.2xlarge", &m, &err), TERN_OK);
    CHECK(tern_machine_instance(m)->has_price);
    CHECK(tern_machine_instance(m)->topology == TERN_TOPOLOGY_NONE);
    CHECK_NEAR(tern_machine_chip(m)->hbm_bandwidth, 820.0 * 1024 * 1024 * 1024, 1);
    CHECK_NEAR(tern_machine_core(m)->dma.hwdge_cost_s, 0, 0);
    tern_machine_free(m);

    CHECK_EQ_INT(tern_machine_load("trn2-ultraserver", &m, &err), TERN_OK);
    CHECK_EQ_INT(tern_machine_kind_of(m), TERN_MACHINE_SYSTEM);
    CHECK_STR_CONTAINS(tern_machine_instance(m)->built_from, "trn2u.48xlarge");
    CHECK_EQ_INT(tern_machine_instance(m)->topology_dims[2], 4);
    tern_machine_free(m);

    CHECK_EQ_INT(tern_machine_load("neuroncore-v4", &m, &err), TERN_OK);
    CHECK(tern_machine_chip(m) == NULL && tern_machine_instance(m) == NULL);
    tern_machine_peaks(m, &p);
    CHECK_NEAR(p.core_flops[TERN_ARCH_MXFP8] / 1e12, 314.57, 0.01);
    CHECK_NEAR(p.total_flops[TERN_ARCH_BF16], p.core_flops[TERN_ARCH_BF16], 0);
    CHECK_NEAR(p.chip_flops[TERN_ARCH_BF16], 0, 0);
    tern_machine_free(m);

    /* By path, the same as by name. */
    CHECK_EQ_INT(tern_machine_load("data/machines/trainium3.json", &m, &err), TERN_OK);
    CHECK_STR_CONTAINS(tern_machine_name(m), "trainium3");
    tern_machine_free(m);
}

static void test_keys(void)
{
    TEST_BEGIN("keys");
    tern_arch_dtype dt;
    CHECK_EQ_INT(tern_arch_dtype_from_name("bf16", &dt), TERN_OK);
    CHECK_EQ_INT(dt, TERN_ARCH_BF16);
    CHECK_EQ_INT(tern_arch_dtype_from_name("int8", &dt), TERN_ERR_NOT_FOUND);
    CHECK(tern_peaks_key_valid("total_flops_mxfp4"));
    CHECK(tern_peaks_key_valid("core_sbuf_bytes"));
    CHECK(!tern_peaks_key_valid("total_flops_int8"));
    CHECK(!tern_peaks_key_valid("hbm"));
}

int main(void)
{
    test_list();
    test_every_machine();
    test_figures();
    test_keys();
    return check_report();
}
