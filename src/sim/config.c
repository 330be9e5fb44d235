/* From a machine description (arch) to the simulated core's geometry: every limit the simulator enforces
 * comes from the machine file, so a what-if file changes the simulated core without code changes. Figures
 * that no public source gives (semaphore count) are tern's documented assumptions, kept here in one place. */
#include <stdio.h>
#include <string.h>

#include "tern/arch.h"
#include "tern/fabric.h"
#include "tern/sim.h"

/* Not published (trainium-arch.md §17 lists the semaphore count as undocumented): tern gives each core 64,
 * enough for the kernel builder's per-engine and per-queue counters. */
#define TERN_ASSUMED_SEMAPHORES 64
/* Published: 64 x 32-bit registers per engine sequencer (trainium-arch.md §2.1, ISA register_alloc). */
#define TERN_REGISTERS_PER_ENGINE 64

static int generation_of(const char *version)
{
    const char *v = strrchr(version, 'v');
    if (v && v[1] >= '1' && v[1] <= '9')
        return v[1] - '0';
    return 2;
}

tern_status tern_core_config_from_machine(const struct tern_machine *m, tern_core_config *cfg, tern_error *err)
{
    const tern_core_spec *core = tern_machine_core(m);
    const tern_chip_spec *chip = tern_machine_chip(m);
    memset(cfg, 0, sizeof *cfg);
    snprintf(cfg->name, sizeof cfg->name, "%s", tern_machine_name(m));
    cfg->generation = generation_of(core->version);
    cfg->partitions = core->sbuf.partitions;
    cfg->sbuf_partition_bytes = core->sbuf.usable_bytes_per_partition;
    cfg->psum_banks = core->psum.banks;
    cfg->psum_bank_bytes = (uint32_t)core->psum.bank_bytes;
    cfg->pe_rows = core->tensor.pe_rows;
    cfg->pe_cols = core->tensor.pe_cols;
    cfg->moving_free_max = core->tensor.moving_free_max;
    cfg->vector_transpose_max = 32;
    cfg->bn_stats_free_max = 512;
    /* A chip's cores address all of its HBM. A bare core file describes no HBM, so tern assumes 16 GiB
     * (half of Trainium1's 32 GiB, one core's share); load a chip or instance for the published figure. */
    cfg->hbm_bytes = chip ? chip->hbm_bytes : (16ull << 30);
    cfg->num_semaphores = TERN_ASSUMED_SEMAPHORES;
    cfg->num_registers = TERN_REGISTERS_PER_ENGINE;
    cfg->dma_queues = core->dma.queues_per_engine;
    tern_timing_config *t = &cfg->timing;
    t->clock_hz[TERN_ENGINE_TENSOR] = core->tensor.clock_hz;
    t->clock_hz[TERN_ENGINE_VECTOR] = core->vector.clock_hz;
    t->clock_hz[TERN_ENGINE_SCALAR] = core->scalar.clock_hz;
    t->clock_hz[TERN_ENGINE_GPSIMD] = core->gpsimd.clock_hz;
    /* The Sync engine's clock is not published; tern runs it at the ScalarE clock (docs/calibration.md). */
    t->clock_hz[TERN_ENGINE_SYNC] = core->scalar.clock_hz;
    double fp32 = core->tensor.macs_per_pe_cycle[TERN_ARCH_FP32];
    t->fp32_matmul_factor = fp32 > 0 ? 1.0 / fp32 : 4.0;
    t->mm_init_latency = core->tensor.mm_init_latency_cycles;
    t->fast_ls_factor = core->tensor.fast_load_stationary_factor > 0 ? core->tensor.fast_load_stationary_factor : 1.0;
    t->min_ii = core->costs.min_ii;
    t->vector_static_overhead = core->costs.vector_static_overhead;
    t->access_init = core->sbuf.access_init_cycles;
    t->gpsimd_start = core->costs.gpsimd_start;
    t->dynamic_copy_min_ii = core->costs.dynamic_copy_min_ii;
    t->act_read_accumulator = core->costs.act_read_accumulator;
    t->semaphore_wake_s = core->costs.semaphore_wake_s;
    t->raw_latency[TERN_ENGINE_TENSOR] = core->costs.raw_latency[0];
    t->raw_latency[TERN_ENGINE_VECTOR] = core->costs.raw_latency[1];
    t->raw_latency[TERN_ENGINE_SCALAR] = core->costs.raw_latency[2];
    t->raw_latency[TERN_ENGINE_GPSIMD] = core->costs.raw_latency[3];
    t->launch_s = core->costs.launch_s;
    t->lanes = core->vector.lanes;
    t->vector_epc_16 = core->vector.elems_per_cycle[TERN_ARCH_BF16] > 0 ? core->vector.elems_per_cycle[TERN_ARCH_BF16]
                                                                        : core->vector.lanes;
    t->vector_epc_32 = core->vector.elems_per_cycle[TERN_ARCH_FP32] > 0 ? core->vector.elems_per_cycle[TERN_ARCH_FP32]
                                                                        : core->vector.lanes;
    t->dma_engines = core->dma.engines;
    t->dma_bandwidth = core->dma.bandwidth_per_engine;
    t->dma_fixed_s = core->dma.fixed_cost_s;
    t->dma_descriptor_s = core->dma.descriptor_cost_s;
    t->dma_transfer_s = core->dma.transfer_cost_s;
    t->dma_descriptor_max = core->dma.descriptor_max_bytes;
    t->dma_partitions = core->sbuf.partitions;
    /* A core reaches HBM through its stack: Trainium2's four banks are each shared by two NeuronCores
     * (aws-neuron-sdk about-neuron/arch/neuron-features/logical-neuroncore-config.rst), Trainium1 has two stacks
     * for its two cores (nki/guides/architecture/trainium_inferentia2_arch.rst), and Neuron Explorer measures MBU
     * against one stack (tools/neuron-explorer/profile-schema-reference.rst). So one core's HBM bandwidth is one
     * stack's: the chip's over its stacks. A bare core file has no HBM figure: its DMA engines are then the only
     * limit. */
    t->hbm_bandwidth = chip ? chip->hbm_bandwidth / (chip->hbm_stacks ? chip->hbm_stacks : 1) : 0;
    t->hbm_stacks = chip && chip->hbm_stacks ? chip->hbm_stacks : 1;
    t->cores_per_chip = chip ? chip->cores : 1;
    /* NeuronCore-v2 serialises VectorE/GpSimdE SBUF access and VectorE/ScalarE PSUM access; v3 lifts both
     * (trainium-arch.md §2.4, ARCH-V2/ARCH-V3). */
    t->sbuf_port_conflicts = cfg->generation <= 2;
    if (cfg->partitions != core->psum.partitions)
        return tern_error_set(err, TERN_ERR_INVALID, "machine %s: SBUF has %u partitions but PSUM %u (must match)",
                              cfg->name, cfg->partitions, core->psum.partitions);
    return TERN_OK;
}

tern_status tern_core_config_load(const char *name_or_path, tern_core_config *cfg, tern_error *err)
{
    tern_machine *m = NULL;
    char base[512]; /* a cluster (NxINSTANCE, a cluster file): the core of the instance it repeats */
    unsigned insts, cl_cores;
    tern_status st = tern_machine_spec_base(name_or_path, base, sizeof base, &insts, &cl_cores, err);
    if (!st)
        st = tern_machine_load(base, &m, err);
    if (st)
        return st;
    st = tern_core_config_from_machine(m, cfg, err);
    tern_machine_free(m);
    return st;
}
