/* Derived machine figures. Every peak is computed from engine parameters in the machine files
 * (PE rows x PE columns x 2 FLOP per MAC x TensorE clock x MACs per PE per cycle for the dtype, times cores
 * per chip, times chips), never copied from a data sheet: published headline figures are only compared
 * against these (tests/arch, docs/machines.md). Also the data-type key table shared by the loader. */
#include "tern/arch.h"

#include <stddef.h>
#include <string.h>

static const char *const DTYPE_NAMES[TERN_ARCH_DTYPE_COUNT] = {"fp32", "tf32", "bf16", "fp16",
                                                               "fp8",  "mxfp8", "mxfp4"};

const char *tern_arch_dtype_name(tern_arch_dtype dt)
{
    return (unsigned)dt < TERN_ARCH_DTYPE_COUNT ? DTYPE_NAMES[dt] : "unknown";
}

tern_status tern_arch_dtype_from_name(const char *name, tern_arch_dtype *out)
{
    for (int i = 0; i < TERN_ARCH_DTYPE_COUNT; i++) {
        if (strcmp(name, DTYPE_NAMES[i]) == 0) {
            *out = (tern_arch_dtype)i;
            return TERN_OK;
        }
    }
    return TERN_ERR_NOT_FOUND;
}

void tern_machine_peaks(const tern_machine *m, tern_peaks *p)
{
    memset(p, 0, sizeof *p);
    const tern_core_spec *k = tern_machine_core(m);
    const tern_chip_spec *chip = tern_machine_chip(m);
    const tern_instance_spec *inst = tern_machine_instance(m);

    p->cores_per_chip = chip ? chip->cores : 1;
    p->chips = inst ? inst->chips : 1;
    p->cores = p->cores_per_chip * p->chips;

    double pes = (double)k->tensor.pe_rows * (double)k->tensor.pe_cols;
    for (int d = 0; d < TERN_ARCH_DTYPE_COUNT; d++) {
        p->core_flops[d] = pes * 2.0 * k->tensor.clock_hz * k->tensor.macs_per_pe_cycle[d];
        p->chip_flops[d] = chip ? p->core_flops[d] * chip->cores : 0;
        p->total_flops[d] = p->core_flops[d] * p->cores;
    }
    p->core_vector_elems_per_s = k->vector.clock_hz * k->vector.elems_per_cycle[TERN_ARCH_FP32];
    p->core_scalar_elems_per_s = k->scalar.clock_hz * k->scalar.elems_per_cycle[TERN_ARCH_FP32];
    p->core_gpsimd_elems_per_s = k->gpsimd.clock_hz * k->gpsimd.elems_per_cycle[TERN_ARCH_FP32];

    p->core_sbuf_bytes = (double)k->sbuf.partitions * (double)k->sbuf.bytes_per_partition;
    p->core_sbuf_usable_bytes = (double)k->sbuf.partitions * (double)k->sbuf.usable_bytes_per_partition;
    p->core_psum_bytes = (double)k->psum.partitions * (double)k->psum.banks * (double)k->psum.bank_bytes;
    p->chip_sbuf_bytes = chip ? p->core_sbuf_bytes * chip->cores : 0;
    p->total_sbuf_bytes = p->core_sbuf_bytes * p->cores;

    p->core_dma_bandwidth = k->dma.engines * k->dma.bandwidth_per_engine;
    p->chip_dma_bandwidth = chip ? p->core_dma_bandwidth * chip->cores : 0;
    p->total_dma_bandwidth = p->core_dma_bandwidth * p->cores;

    if (chip) {
        p->chip_hbm_bytes = (double)chip->hbm_bytes;
        p->chip_hbm_bandwidth = chip->hbm_bandwidth;
        p->total_hbm_bytes = p->chip_hbm_bytes * p->chips;
        p->total_hbm_bandwidth = p->chip_hbm_bandwidth * p->chips;
    }
    if (inst) {
        p->total_link_bandwidth = inst->link_bandwidth_per_chip * inst->chips;
        p->total_efa_bandwidth = inst->efa_bandwidth;
    }
}

typedef struct {
    const char *key;
    size_t offset;
} scalar_key;

#define SK(field) {#field, offsetof(tern_peaks, field)}
static const scalar_key SCALARS[] = {
    SK(core_sbuf_bytes),     SK(core_sbuf_usable_bytes), SK(core_psum_bytes),    SK(chip_sbuf_bytes),
    SK(total_sbuf_bytes),    SK(core_dma_bandwidth),     SK(chip_dma_bandwidth), SK(total_dma_bandwidth),
    SK(chip_hbm_bytes),      SK(chip_hbm_bandwidth),     SK(total_hbm_bytes),    SK(total_hbm_bandwidth),
    SK(total_link_bandwidth), SK(total_efa_bandwidth),
};
#undef SK

/* Resolve key to a pointer into p; p may be a dummy when only validating. */
static const double *lookup(const tern_peaks *p, const char *key, double *tmp)
{
    static const char *const levels[] = {"core_flops_", "chip_flops_", "total_flops_"};
    for (int l = 0; l < 3; l++) {
        size_t n = strlen(levels[l]);
        if (strncmp(key, levels[l], n) == 0) {
            tern_arch_dtype dt;
            if (tern_arch_dtype_from_name(key + n, &dt) != TERN_OK)
                return NULL;
            return l == 0 ? &p->core_flops[dt] : l == 1 ? &p->chip_flops[dt] : &p->total_flops[dt];
        }
    }
    for (size_t i = 0; i < sizeof SCALARS / sizeof SCALARS[0]; i++)
        if (strcmp(key, SCALARS[i].key) == 0)
            return (const double *)((const char *)p + SCALARS[i].offset);
    if (strcmp(key, "cores") == 0) {
        *tmp = p->cores;
        return tmp;
    }
    if (strcmp(key, "chips") == 0) {
        *tmp = p->chips;
        return tmp;
    }
    return NULL;
}

tern_status tern_peaks_get(const tern_peaks *p, const char *key, double *out)
{
    double tmp;
    const double *v = lookup(p, key, &tmp);
    if (!v)
        return TERN_ERR_NOT_FOUND;
    *out = *v;
    return TERN_OK;
}

bool tern_peaks_key_valid(const char *key)
{
    tern_peaks dummy;
    memset(&dummy, 0, sizeof dummy);
    double tmp;
    return lookup(&dummy, key, &tmp) != NULL;
}
