/* `tern info`: the machine catalogue on the command line. With no machine it lists the catalogue (or just
 * the names, for scripts); with a NAME or --machine PATH it prints one machine as a readable table (hierarchy,
 * engines, memories, DMA, cost constants, interconnect, derived peaks against published figures, conflicts,
 * price) or as JSON for tools. Unknown machines and options are usage errors (exit 2); a machine file that
 * fails to load is a failure of the work (exit 1, the loader's message on stderr). */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "tern/arch.h"

static void info_usage(FILE *out)
{
    fprintf(out,
            "usage: tern info [--names]\n"
            "       tern info NAME|PATH [--json] [--sources]\n"
            "       tern info --machine PATH [--json] [--sources]\n"
            "\n"
            "Without a machine: list the catalogue (name, kind, description); --names prints only the names.\n"
            "With a machine: describe it; --json prints machine-readable JSON with the derived peaks;\n"
            "--sources adds every figure with its public source. Names are looked up in $TERN_MACHINE_PATH,\n"
            "then in %s.\n",
            tern_machine_builtin_dir());
}

/* ------------------------------------------------------------------------------------ number formats */

static const char *fmt_bytes(double b, char *buf, size_t cap)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    int u = 0;
    while (b >= 1024.0 && u < 5) {
        b /= 1024.0;
        u++;
    }
    snprintf(buf, cap, "%.*f %s", b == floor(b) ? 0 : 2, b, units[u]);
    return buf;
}

static const char *fmt_rate(double v, const char *unit, char *buf, size_t cap)
{
    static const char *const prefixes[] = {"", "K", "M", "G", "T", "P", "E"};
    int p = 0;
    while (fabs(v) >= 1000.0 && p < 6) {
        v /= 1000.0;
        p++;
    }
    snprintf(buf, cap, "%.*f %s%s", v == floor(v) ? 0 : (fabs(v) < 10 ? 2 : 1), v, prefixes[p], unit);
    return buf;
}

static const char *fmt_time(double s, char *buf, size_t cap)
{
    if (s >= 1e-3)
        snprintf(buf, cap, "%g ms", s * 1e3);
    else if (s >= 1e-6)
        snprintf(buf, cap, "%g us", s * 1e6);
    else
        snprintf(buf, cap, "%g ns", s * 1e9);
    return buf;
}

static void print_elems(const double *v)
{
    bool first = true;
    for (int d = 0; d < TERN_ARCH_DTYPE_COUNT; d++) {
        if (v[d] <= 0)
            continue;
        printf("%s%s %g", first ? "" : ", ", tern_arch_dtype_name((tern_arch_dtype)d), v[d]);
        first = false;
    }
}

/* ------------------------------------------------------------------------------------------ listing */

static int list_machines(bool names_only)
{
    tern_machine_entry *entries;
    size_t n;
    tern_error err;
    if (tern_machine_list(&entries, &n, &err) != TERN_OK) {
        fprintf(stderr, "tern info: %s\n", err.msg);
        return 1;
    }
    if (!names_only)
        printf("%-24s %-9s %s\n", "NAME", "KIND", "DESCRIPTION");
    for (size_t i = 0; i < n; i++) {
        if (names_only)
            printf("%s\n", entries[i].name);
        else
            printf("%-24s %-9s %s\n", entries[i].name, tern_machine_kind_name(entries[i].kind),
                   entries[i].description);
    }
    tern_machine_list_free(entries);
    return 0;
}

/* ------------------------------------------------------------------------------------------- table */

static void print_table(const tern_machine *m, bool sources)
{
    char a[64], b[64], c[64];
    const tern_core_spec *k = tern_machine_core(m);
    const tern_chip_spec *ch = tern_machine_chip(m);
    const tern_instance_spec *in = tern_machine_instance(m);
    tern_peaks p;
    tern_machine_peaks(m, &p);

    printf("%s (%s): %s\n", tern_machine_name(m), tern_machine_kind_name(tern_machine_kind_of(m)),
           tern_machine_description(m));
    printf("file: %s\n\n", tern_machine_path(m));

    printf("Hierarchy\n");
    if (in)
        printf("  %-9s %-24s %u chips, %u NeuronCores%s%s%s\n", tern_machine_kind_name(tern_machine_kind_of(m)),
               in->name, in->chips, p.cores, in->built_from[0] ? " (" : "", in->built_from,
               in->built_from[0] ? ")" : "");
    if (in && in->built_from[0])
        printf("  %-9s %-24s x %u\n", "built of", in->built_from, in->built_from_count);
    if (ch)
        printf("  %-9s %-24s %u NeuronCores\n", "chip", ch->name, ch->cores);
    printf("  %-9s %-24s %s\n\n", "core", k->name, k->version);

    printf("Engines (per NeuronCore)\n");
    printf("  TensorE   %u x %u PEs at %s; MACs per PE per cycle: ", k->tensor.pe_rows, k->tensor.pe_cols,
           fmt_rate(k->tensor.clock_hz, "Hz", a, sizeof a));
    print_elems(k->tensor.macs_per_pe_cycle);
    printf("\n            moving tile <= %u, MM init latency %u cycles, fast LoadStationary %gx\n",
           k->tensor.moving_free_max, k->tensor.mm_init_latency_cycles, k->tensor.fast_load_stationary_factor);
    const struct {
        const char *name;
        const tern_engine_spec *e;
    } engines[] = {{"VectorE", &k->vector}, {"ScalarE", &k->scalar}, {"GpSimdE", &k->gpsimd}};
    for (size_t i = 0; i < 3; i++) {
        printf("  %-9s ", engines[i].name);
        if (engines[i].e == &k->gpsimd)
            printf("%u cores, ", k->gpsimd_cores);
        printf("%u lanes at %s; elements per cycle: ", engines[i].e->lanes,
               fmt_rate(engines[i].e->clock_hz, "Hz", a, sizeof a));
        print_elems(engines[i].e->elems_per_cycle);
        printf("\n");
    }

    printf("\nMemories\n");
    printf("  SBUF      %u partitions x %s (usable %s) = %s per core\n", k->sbuf.partitions,
           fmt_bytes((double)k->sbuf.bytes_per_partition, a, sizeof a),
           fmt_bytes((double)k->sbuf.usable_bytes_per_partition, b, sizeof b),
           fmt_bytes(p.core_sbuf_bytes, c, sizeof c));
    printf("  PSUM      %u partitions x %u banks x %s = %s per core\n", k->psum.partitions, k->psum.banks,
           fmt_bytes((double)k->psum.bank_bytes, a, sizeof a), fmt_bytes(p.core_psum_bytes, b, sizeof b));
    if (ch)
        printf("  HBM       %s per chip at %s, %u stacks\n", fmt_bytes((double)ch->hbm_bytes, a, sizeof a),
               fmt_rate(ch->hbm_bandwidth, "B/s", b, sizeof b), ch->hbm_stacks);

    printf("\nDMA (per NeuronCore)\n");
    printf("  %u engines x %u queues, %s per engine, %s fixed cost per transfer", k->dma.engines,
           k->dma.queues_per_engine, fmt_rate(k->dma.bandwidth_per_engine, "B/s", a, sizeof a),
           fmt_time(k->dma.fixed_cost_s, b, sizeof b));
    if (k->dma.hwdge_cost_s > 0)
        printf(", hardware DGE %s per instruction", fmt_time(k->dma.hwdge_cost_s, c, sizeof c));
    else
        printf(", no hardware DGE");
    printf("\n\nCost-model constants (engine cycles)\n");
    printf("  MIN_II %u, VectorE static overhead %u, SBUF/PSUM access init %u, GpSimd start %u,\n"
           "  dynamic-address copy %u, activation accumulator read %u, MM init latency %u\n",
           k->costs.min_ii, k->costs.vector_static_overhead, k->sbuf.access_init_cycles, k->costs.gpsimd_start,
           k->costs.dynamic_copy_min_ii, k->costs.act_read_accumulator, k->tensor.mm_init_latency_cycles);

    if (ch) {
        printf("\nInterconnect\n");
        printf("  chip      %s, %u links, %s per chip; %u CC-cores; chip DMA %s (published)\n",
               ch->neuronlink_version, ch->neuronlink_links, fmt_rate(ch->neuronlink_bandwidth, "B/s", a, sizeof a),
               ch->cc_cores, fmt_rate(ch->dma_bandwidth, "B/s", b, sizeof b));
    }
    if (in) {
        printf("  topology  %s, %s per chip", in->topology_text,
               fmt_rate(in->link_bandwidth_per_chip, "B/s", a, sizeof a));
        if (in->scaleup_bandwidth_per_chip > 0)
            printf(", %s per chip between servers", fmt_rate(in->scaleup_bandwidth_per_chip, "B/s", b, sizeof b));
        printf("\n  EFA       %s (%g Gbps)\n", fmt_rate(in->efa_bandwidth, "B/s", a, sizeof a),
               in->efa_bandwidth * 8 / 1e9);
        if (in->vcpus || in->host_memory_bytes)
            printf("  host      %u vCPUs, %s memory\n", in->vcpus, fmt_bytes((double)in->host_memory_bytes, a, sizeof a));
    }

    printf("\nDerived peaks (dense)          per core       per chip          total\n");
    for (int d = 0; d < TERN_ARCH_DTYPE_COUNT; d++) {
        if (p.core_flops[d] <= 0)
            continue;
        printf("  %-6s TFLOPS           %12.1f   %12.1f   %12.1f\n", tern_arch_dtype_name((tern_arch_dtype)d),
               p.core_flops[d] / 1e12, p.chip_flops[d] / 1e12, p.total_flops[d] / 1e12);
    }
    printf("  SBUF MiB                %12.1f   %12.1f   %12.1f\n", p.core_sbuf_bytes / 1048576.0,
           p.chip_sbuf_bytes / 1048576.0, p.total_sbuf_bytes / 1048576.0);
    printf("  DMA GB/s                %12.1f   %12.1f   %12.1f\n", p.core_dma_bandwidth / 1e9,
           p.chip_dma_bandwidth / 1e9, p.total_dma_bandwidth / 1e9);
    if (ch) {
        printf("  HBM GiB                              %12.1f   %12.1f\n", p.chip_hbm_bytes / 1073741824.0,
               p.total_hbm_bytes / 1073741824.0);
        printf("  HBM TB/s                             %12.3f   %12.3f\n", p.chip_hbm_bandwidth / 1e12,
               p.total_hbm_bandwidth / 1e12);
    }
    printf("  cores %u, chips %u; VectorE %s, ScalarE %s FP32 elements per core\n", p.cores, p.chips,
           fmt_rate(p.core_vector_elems_per_s, "/s", a, sizeof a), fmt_rate(p.core_scalar_elems_per_s, "/s", b, sizeof b));

    size_t np = tern_machine_published_count(m);
    if (np) {
        printf("\nPublished vs derived\n");
        for (size_t i = 0; i < np; i++) {
            const tern_published *pub = tern_machine_published(m, i);
            double der = 0;
            tern_peaks_get(&p, pub->key, &der);
            double scale = pub->value_si / pub->value;
            printf("  %-22s published %10g %-7s derived %10.4g %-7s %+6.1f%%   [%s]\n", pub->key, pub->value, pub->unit,
                   der / scale, pub->unit, (der / pub->value_si - 1) * 100, pub->source);
        }
    }
    size_t nc = tern_machine_conflict_count(m);
    if (nc) {
        printf("\nConflicting sources (tern's pick first)\n");
        for (size_t i = 0; i < nc; i++) {
            const tern_conflict *cf = tern_machine_conflict(m, i);
            printf("  %s (%s)\n    picked: %s\n    other:  %s\n", cf->field, cf->file, cf->picked, cf->other);
            if (cf->note)
                printf("    note:   %s\n", cf->note);
        }
    }
    if (in) {
        printf("\nPrice\n");
        if (in->has_price)
            printf("  $%.2f per hour on demand (region: %s) [%s]\n", in->price_usd_per_hour, in->price_region,
                   in->price_source);
        else
            printf("  none: no public on-demand price found in the sources tern uses\n");
    }
    if (sources) {
        printf("\nFigures and sources\n");
        for (size_t i = 0; i < tern_machine_fact_count(m); i++) {
            const tern_fact *f = tern_machine_fact(m, i);
            if (f->text)
                printf("  %-48s %-18s %s [%s]\n", f->path, f->text, "", f->source);
            else
                printf("  %-48s %-12g %-6s [%s]\n", f->path, f->value, f->unit, f->source);
        }
    }
}

/* -------------------------------------------------------------------------------------------- JSON */

static cJSON *dtype_object(const double *v)
{
    cJSON *o = cJSON_CreateObject();
    for (int d = 0; d < TERN_ARCH_DTYPE_COUNT; d++)
        if (v[d] > 0)
            cJSON_AddNumberToObject(o, tern_arch_dtype_name((tern_arch_dtype)d), v[d]);
    return o;
}

static cJSON *engine_object(const tern_engine_spec *e)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "clock_hz", e->clock_hz);
    cJSON_AddNumberToObject(o, "lanes", e->lanes);
    cJSON_AddItemToObject(o, "elems_per_cycle", dtype_object(e->elems_per_cycle));
    return o;
}

static cJSON *build_json(const tern_machine *m, bool sources)
{
    const tern_core_spec *k = tern_machine_core(m);
    const tern_chip_spec *ch = tern_machine_chip(m);
    const tern_instance_spec *in = tern_machine_instance(m);
    tern_peaks p;
    tern_machine_peaks(m, &p);

    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "name", tern_machine_name(m));
    cJSON_AddStringToObject(root, "kind", tern_machine_kind_name(tern_machine_kind_of(m)));
    cJSON_AddStringToObject(root, "description", tern_machine_description(m));
    cJSON_AddStringToObject(root, "path", tern_machine_path(m));
    cJSON_AddStringToObject(root, "units", "SI: Hz, bytes, bytes/s, seconds, FLOPS; costs in engine cycles");

    cJSON *core = cJSON_AddObjectToObject(root, "core");
    cJSON_AddStringToObject(core, "name", k->name);
    cJSON_AddStringToObject(core, "version", k->version);
    cJSON *t = cJSON_AddObjectToObject(core, "tensor");
    cJSON_AddNumberToObject(t, "pe_rows", k->tensor.pe_rows);
    cJSON_AddNumberToObject(t, "pe_cols", k->tensor.pe_cols);
    cJSON_AddNumberToObject(t, "clock_hz", k->tensor.clock_hz);
    cJSON_AddItemToObject(t, "macs_per_pe_cycle", dtype_object(k->tensor.macs_per_pe_cycle));
    cJSON_AddNumberToObject(t, "moving_free_max", k->tensor.moving_free_max);
    cJSON_AddNumberToObject(t, "mm_init_latency_cycles", k->tensor.mm_init_latency_cycles);
    cJSON_AddNumberToObject(t, "fast_load_stationary_factor", k->tensor.fast_load_stationary_factor);
    cJSON_AddItemToObject(core, "vector", engine_object(&k->vector));
    cJSON_AddItemToObject(core, "scalar", engine_object(&k->scalar));
    cJSON *g = engine_object(&k->gpsimd);
    cJSON_AddNumberToObject(g, "cores", k->gpsimd_cores);
    cJSON_AddItemToObject(core, "gpsimd", g);
    cJSON *sb = cJSON_AddObjectToObject(core, "sbuf");
    cJSON_AddNumberToObject(sb, "partitions", k->sbuf.partitions);
    cJSON_AddNumberToObject(sb, "bytes_per_partition", (double)k->sbuf.bytes_per_partition);
    cJSON_AddNumberToObject(sb, "usable_bytes_per_partition", (double)k->sbuf.usable_bytes_per_partition);
    cJSON_AddNumberToObject(sb, "access_init_cycles", k->sbuf.access_init_cycles);
    cJSON *ps = cJSON_AddObjectToObject(core, "psum");
    cJSON_AddNumberToObject(ps, "partitions", k->psum.partitions);
    cJSON_AddNumberToObject(ps, "banks", k->psum.banks);
    cJSON_AddNumberToObject(ps, "bank_bytes", (double)k->psum.bank_bytes);
    cJSON *dm = cJSON_AddObjectToObject(core, "dma");
    cJSON_AddNumberToObject(dm, "engines", k->dma.engines);
    cJSON_AddNumberToObject(dm, "queues_per_engine", k->dma.queues_per_engine);
    cJSON_AddNumberToObject(dm, "bandwidth_per_engine", k->dma.bandwidth_per_engine);
    cJSON_AddNumberToObject(dm, "fixed_cost_s", k->dma.fixed_cost_s);
    if (k->dma.hwdge_cost_s > 0)
        cJSON_AddNumberToObject(dm, "hwdge_cost_s", k->dma.hwdge_cost_s);
    else
        cJSON_AddNullToObject(dm, "hwdge_cost_s");
    cJSON *co = cJSON_AddObjectToObject(core, "costs");
    cJSON_AddNumberToObject(co, "min_ii", k->costs.min_ii);
    cJSON_AddNumberToObject(co, "vector_static_overhead", k->costs.vector_static_overhead);
    cJSON_AddNumberToObject(co, "gpsimd_start", k->costs.gpsimd_start);
    cJSON_AddNumberToObject(co, "dynamic_copy_min_ii", k->costs.dynamic_copy_min_ii);
    cJSON_AddNumberToObject(co, "act_read_accumulator", k->costs.act_read_accumulator);

    if (ch) {
        cJSON *c = cJSON_AddObjectToObject(root, "chip");
        cJSON_AddStringToObject(c, "name", ch->name);
        cJSON_AddNumberToObject(c, "cores", ch->cores);
        cJSON_AddNumberToObject(c, "hbm_bytes", (double)ch->hbm_bytes);
        cJSON_AddNumberToObject(c, "hbm_bandwidth", ch->hbm_bandwidth);
        cJSON_AddNumberToObject(c, "hbm_stacks", ch->hbm_stacks);
        cJSON_AddStringToObject(c, "neuronlink_version", ch->neuronlink_version);
        cJSON_AddNumberToObject(c, "neuronlink_links", ch->neuronlink_links);
        cJSON_AddNumberToObject(c, "neuronlink_bandwidth", ch->neuronlink_bandwidth);
        cJSON_AddNumberToObject(c, "cc_cores", ch->cc_cores);
        cJSON_AddNumberToObject(c, "dma_bandwidth_published", ch->dma_bandwidth);
    }
    if (in) {
        cJSON *o = cJSON_AddObjectToObject(root, tern_machine_kind_name(tern_machine_kind_of(m)));
        cJSON_AddStringToObject(o, "name", in->name);
        cJSON_AddNumberToObject(o, "chips", in->chips);
        cJSON_AddStringToObject(o, "topology", in->topology_text);
        cJSON_AddNumberToObject(o, "link_bandwidth_per_chip", in->link_bandwidth_per_chip);
        cJSON_AddNumberToObject(o, "scaleup_bandwidth_per_chip", in->scaleup_bandwidth_per_chip);
        cJSON_AddNumberToObject(o, "efa_bandwidth", in->efa_bandwidth);
        cJSON_AddNumberToObject(o, "vcpus", in->vcpus);
        cJSON_AddNumberToObject(o, "host_memory_bytes", (double)in->host_memory_bytes);
        if (in->built_from[0]) {
            cJSON *bf = cJSON_AddObjectToObject(o, "built_from");
            cJSON_AddStringToObject(bf, "instance", in->built_from);
            cJSON_AddNumberToObject(bf, "count", in->built_from_count);
        }
        if (in->has_price) {
            cJSON *pr = cJSON_AddObjectToObject(o, "price");
            cJSON_AddNumberToObject(pr, "usd_per_hour", in->price_usd_per_hour);
            cJSON_AddStringToObject(pr, "region", in->price_region);
            cJSON_AddStringToObject(pr, "source", in->price_source);
        } else {
            cJSON_AddNullToObject(o, "price");
        }
    }

    cJSON *pk = cJSON_AddObjectToObject(root, "peaks");
    cJSON_AddNumberToObject(pk, "cores", p.cores);
    cJSON_AddNumberToObject(pk, "chips", p.chips);
    cJSON_AddNumberToObject(pk, "cores_per_chip", p.cores_per_chip);
    cJSON_AddItemToObject(pk, "core_flops", dtype_object(p.core_flops));
    cJSON_AddItemToObject(pk, "chip_flops", dtype_object(p.chip_flops));
    cJSON_AddItemToObject(pk, "total_flops", dtype_object(p.total_flops));
    static const char *const scalar_keys[] = {
        "core_sbuf_bytes",    "core_sbuf_usable_bytes", "core_psum_bytes",     "chip_sbuf_bytes",
        "total_sbuf_bytes",   "core_dma_bandwidth",     "chip_dma_bandwidth",  "total_dma_bandwidth",
        "chip_hbm_bytes",     "chip_hbm_bandwidth",     "total_hbm_bytes",     "total_hbm_bandwidth",
        "total_link_bandwidth", "total_efa_bandwidth"};
    for (size_t i = 0; i < sizeof scalar_keys / sizeof scalar_keys[0]; i++) {
        double v = 0;
        tern_peaks_get(&p, scalar_keys[i], &v);
        cJSON_AddNumberToObject(pk, scalar_keys[i], v);
    }
    cJSON_AddNumberToObject(pk, "core_vector_elems_per_s", p.core_vector_elems_per_s);
    cJSON_AddNumberToObject(pk, "core_scalar_elems_per_s", p.core_scalar_elems_per_s);
    cJSON_AddNumberToObject(pk, "core_gpsimd_elems_per_s", p.core_gpsimd_elems_per_s);

    cJSON *pubs = cJSON_AddArrayToObject(root, "published");
    for (size_t i = 0; i < tern_machine_published_count(m); i++) {
        const tern_published *pub = tern_machine_published(m, i);
        double der = 0;
        tern_peaks_get(&p, pub->key, &der);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "key", pub->key);
        cJSON_AddNumberToObject(o, "published", pub->value_si);
        cJSON_AddNumberToObject(o, "derived", der);
        cJSON_AddNumberToObject(o, "derived_over_published", der / pub->value_si);
        cJSON_AddStringToObject(o, "as_published", "");
        char txt[64];
        snprintf(txt, sizeof txt, "%g %s", pub->value, pub->unit);
        cJSON_ReplaceItemInObject(o, "as_published", cJSON_CreateString(txt));
        cJSON_AddStringToObject(o, "source", pub->source);
        cJSON_AddStringToObject(o, "file", pub->file);
        cJSON_AddItemToArray(pubs, o);
    }
    cJSON *cfs = cJSON_AddArrayToObject(root, "conflicts");
    for (size_t i = 0; i < tern_machine_conflict_count(m); i++) {
        const tern_conflict *cf = tern_machine_conflict(m, i);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "file", cf->file);
        cJSON_AddStringToObject(o, "field", cf->field);
        cJSON_AddStringToObject(o, "picked", cf->picked);
        cJSON_AddStringToObject(o, "other", cf->other);
        if (cf->note)
            cJSON_AddStringToObject(o, "note", cf->note);
        cJSON_AddItemToArray(cfs, o);
    }
    if (sources) {
        cJSON *fs = cJSON_AddArrayToObject(root, "sources");
        for (size_t i = 0; i < tern_machine_fact_count(m); i++) {
            const tern_fact *f = tern_machine_fact(m, i);
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "file", f->file);
            cJSON_AddStringToObject(o, "path", f->path);
            if (f->text) {
                cJSON_AddStringToObject(o, "value", f->text);
            } else {
                cJSON_AddNumberToObject(o, "value", f->value);
                cJSON_AddStringToObject(o, "unit", f->unit);
                cJSON_AddNumberToObject(o, "value_si", f->value_si);
            }
            cJSON_AddStringToObject(o, "source", f->source);
            if (f->note)
                cJSON_AddStringToObject(o, "note", f->note);
            cJSON_AddItemToArray(fs, o);
        }
    }
    return root;
}

/* --------------------------------------------------------------------------------------------- main */

int tern_cmd_info(int argc, char **argv)
{
    bool json = false, names = false, sources = false;
    const char *machine = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            info_usage(stdout);
            return 0;
        } else if (!strcmp(a, "--json")) {
            json = true;
        } else if (!strcmp(a, "--names")) {
            names = true;
        } else if (!strcmp(a, "--sources")) {
            sources = true;
        } else if (!strcmp(a, "--machine") || !strncmp(a, "--machine=", 10)) {
            const char *v = a[9] == '=' ? a + 10 : tern_arg_value("tern info", argc, argv, &i, "a file path");
            if (!v || !*v) {
                if (v)
                    fprintf(stderr, "tern info: --machine= needs a value (a file path)\n");
                info_usage(stderr);
                return 2;
            }
            if (machine) {
                fprintf(stderr, "tern info: more than one machine given ('%s' and '%s')\n", machine, v);
                info_usage(stderr);
                return 2;
            }
            machine = v;
        } else if (a[0] == '-' && a[1] != '\0') {
            fprintf(stderr, "tern info: unknown option '%s'\n", a);
            info_usage(stderr);
            return 2;
        } else {
            if (machine) {
                fprintf(stderr, "tern info: more than one machine given ('%s' and '%s')\n", machine, a);
                info_usage(stderr);
                return 2;
            }
            machine = a;
        }
    }
    if (!machine) {
        if (json || sources) {
            fprintf(stderr, "tern info: %s needs a machine\n", json ? "--json" : "--sources");
            info_usage(stderr);
            return 2;
        }
        return list_machines(names);
    }
    if (names) {
        fprintf(stderr, "tern info: --names lists the catalogue and takes no machine\n");
        info_usage(stderr);
        return 2;
    }

    tern_error err;
    char path[4096];
    if (tern_machine_find(machine, path, sizeof path, &err) != TERN_OK) {
        fprintf(stderr, "tern info: unknown machine: %s\n", err.msg);
        fprintf(stderr, "usage: tern info NAME|PATH [--json] [--sources]   (tern info lists the catalogue)\n");
        return 2;
    }
    tern_machine *m;
    if (tern_machine_load(machine, &m, &err) != TERN_OK) {
        fprintf(stderr, "tern info: %s\n", err.msg);
        return 1;
    }
    int rc = 0;
    if (json) {
        cJSON *root = build_json(m, sources);
        char *text = root ? cJSON_Print(root) : NULL;
        if (text) {
            printf("%s\n", text);
        } else {
            fprintf(stderr, "tern info: out of memory\n");
            rc = 1;
        }
        free(text);
        cJSON_Delete(root);
    } else {
        print_table(m, sources);
    }
    tern_machine_free(m);
    return rc;
}
