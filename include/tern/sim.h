/* tern sim layer: a simulated NeuronCore. It holds the machine state (SBUF, PSUM, lazily backed HBM, per-engine
 * registers, semaphores, the PE array's stationary operand) and executes a tern_program: five in-order engine
 * streams ordered across engines only by semaphores. Execution is bit-accurate to the number formats (num):
 * Vector/Scalar/GpSimd math in fp32 with casts on read and write; matmul products of 8/16-bit inputs exact in
 * fp32, sums in fp32 (order documented in docs/isa.md). Every hardware rule is checked; a violation names the
 * instruction, the operand, the rule and the value. The core's geometry comes from a tern_core_config, filled
 * from a machine file (arch) or by hand for what-if studies. */
#ifndef TERN_SIM_H
#define TERN_SIM_H

#include <stddef.h>
#include <stdint.h>

#include "tern/base.h"
#include "tern/isa.h"
#include "tern/num.h"

#ifdef __cplusplus
extern "C" {
#endif

struct tern_machine;

/* Timing figures of one NeuronCore (all from the machine file; docs/calibration.md explains each use). */
typedef struct {
    double clock_hz[TERN_ENGINE_COUNT]; /* sequencer clocks; Sync runs at the ScalarE clock (not published) */
    double fp32_matmul_factor;  /* TensorE passes for fp32 operands (1 / fp32 MACs per PE per cycle: 4) */
    unsigned mm_init_latency;   /* cycles: the min(64, N_stationary) term of a matmul */
    double fast_ls_factor;      /* LoadStationary is this much faster than a matmul of the same free size */
    unsigned min_ii;            /* minimum initiation interval, engine cycles */
    unsigned vector_static_overhead; /* VectorE extra latency before a dependant can start, cycles */
    unsigned access_init;       /* SBUF/PSUM access initiation, cycles (ScalarE/GpSimd latency) */
    unsigned gpsimd_start;      /* GpSimd instruction start, cycles */
    unsigned dynamic_copy_min_ii; /* register-addressed copies, cycles */
    unsigned act_read_accumulator; /* ScalarE accumulator read-out, cycles */
    double semaphore_wake_s;       /* a semaphore reaching a waited value -> the waiting engine issues, seconds */
    double raw_latency[TERN_ENGINE_COUNT]; /* cycles between a write and a read of it on the same engine */
    double launch_s;               /* launch and completion of a run (runtime, first instruction fetch), seconds */
    unsigned lanes;             /* VectorE lanes (128) */
    double vector_epc_16, vector_epc_32; /* VectorE elements per cycle for 16-bit and 32-bit data */
    unsigned dma_engines;
    double dma_bandwidth;       /* bytes/s per DMA engine */
    double dma_fixed_s;         /* per transfer, before data moves */
    double dma_descriptor_s;    /* per contiguous buffer on one DMA engine */
    double dma_transfer_s;      /* a queue's ring on one engine takes one transfer per this (pipelined with data) */
    unsigned dma_partitions;    /* SBUF partitions, grouped over the engines (128 / 16 = 8 per engine) */
    double dma_descriptor_max;  /* bytes: longer contiguous runs are split into several descriptors (0: no limit) */
    double hbm_bandwidth;       /* bytes/s, one HBM stack's: what one core reaches (shared by the cores on it) */
    unsigned hbm_stacks;        /* HBM stacks of the chip (1 for a bare core) */
    unsigned cores_per_chip;
    int sbuf_port_conflicts;    /* v2: VectorE and GpSimdE share SBUF access; VectorE and ScalarE share PSUM */
} tern_timing_config;

/* Geometry and limits of one NeuronCore. */
typedef struct {
    char name[64];                 /* machine name, for messages */
    int generation;                /* 2, 3 or 4 (NeuronCore-v2/v3/v4) */
    uint32_t partitions;           /* SBUF and PSUM partitions (128) */
    uint64_t sbuf_partition_bytes; /* usable SBUF bytes per partition */
    uint32_t psum_banks;           /* PSUM banks per partition (8) */
    uint32_t psum_bank_bytes;      /* bytes per bank (2048) */
    uint32_t pe_rows, pe_cols;     /* systolic array: contraction rows x stationary columns (128x128) */
    uint32_t moving_free_max;      /* matmul moving free size limit, fp32 PSUM dst (512 v2/v3, 4096 v4) */
    uint32_t vector_transpose_max; /* VectorE transpose limit (32) */
    uint32_t bn_stats_free_max;    /* bn_stats free size limit (512) */
    uint64_t hbm_bytes;            /* HBM reachable by this core */
    uint32_t num_semaphores;       /* semaphores per core */
    uint32_t num_registers;        /* 32-bit registers per engine sequencer (64) */
    uint32_t dma_queues;           /* DMA queues per engine (16) */
    tern_timing_config timing;
} tern_core_config;

/* Fill a core config from a loaded machine (a core, chip or instance: its NeuronCore is used). */
tern_status tern_core_config_from_machine(const struct tern_machine *m, tern_core_config *cfg, tern_error *err);
/* Load a machine by name or path and fill the config; a cluster (NxINSTANCE, a cluster file) gives its instance's core. */
tern_status tern_core_config_load(const char *name_or_path, tern_core_config *cfg, tern_error *err);

/* ---- timing and events ---- */

/* One thing that took time on the simulated core, reported as it is scheduled (in order of start time per
 * engine or queue). Times are picoseconds from the start of the run. */
typedef enum {
    TERN_EVENT_INSTR = 0, /* an instruction on an engine's sequencer (for DMA triggers: the trigger itself) */
    TERN_EVENT_DMA,       /* a DMA transfer on a queue */
    TERN_EVENT_WAIT       /* an engine blocked on a semaphore before an instruction */
} tern_event_kind;

typedef struct {
    tern_event_kind kind;
    tern_engine engine;    /* issuing engine (for DMA: the engine that triggered it) */
    unsigned queue;        /* DMA queue (TERN_EVENT_DMA) */
    size_t pc;             /* index of the instruction in its engine's stream */
    const tern_instr *ins; /* the instruction (valid during the callback only) */
    int64_t start_ps, end_ps;
    uint64_t flops;        /* 2 x multiply-accumulates for TensorE; elementwise operations elsewhere */
    uint64_t hbm_bytes;    /* bytes read from or written to HBM */
    uint64_t bytes;        /* bytes moved (DMA) or touched (compute) */
    uint32_t wait_sem, wait_value; /* TERN_EVENT_WAIT: what it waited for */
} tern_event;

typedef void (*tern_event_fn)(void *ctx, const tern_event *ev);

typedef enum {
    TERN_MODE_FUNCTIONAL = 0, /* compute results and time */
    TERN_MODE_TIMING_ONLY     /* time only: no arithmetic, no memory contents (control and registers still run) */
} tern_sim_mode;

typedef struct {
    int fill_nan;             /* fresh SBUF/PSUM/HBM reads as NaN (float) to catch uninitialised reads */
    tern_round rounding;      /* RNE (default) or stochastic rounding on every write */
    uint64_t seed;            /* stochastic-rounding seed */
    uint64_t max_instructions;/* guard against endless loops; 0 = default (10^9) */
    int matmul_path;          /* TERN_MATMUL_*: which implementation of the (identical) matmul result */
    unsigned threads;         /* host threads for hot paths; 0 = $TERN_THREADS or the online CPUs */
    tern_sim_mode mode;       /* functional (default) or timing-only */
    tern_event_fn on_event;   /* called for every event when set (the profiler) */
    void *event_ctx;
    uint64_t max_elements;    /* work guard (fuzzing, untrusted programs): a run whose instructions together touch
                                 more elements than this (each instruction counts the partitions x free elements of
                                 every access pattern it has) stops with TERN_ERR_RANGE before the instruction that
                                 would pass it, in both modes; 0 = unlimited */
} tern_core_options;

/* Matmul implementations; all give bit-identical results (docs/isa.md), they differ only in speed. AUTO: for bf16
 * operands the faster kernel on this host (the AVX512-BF16 dot products when the inputs allow, or the fp32 FMA chain
 * on bf16 rows; the environment's TERN_MATMUL=fma|dpbf16 forces one), else the fp32 FMA kernel; FP32: the fp32 FMA
 * kernel on gathered operands only; REFERENCE: the defining loop. TERN_MATMUL_BLAS is the old name of FP32 (the
 * simulator no longer calls a BLAS). */
enum { TERN_MATMUL_AUTO = 0, TERN_MATMUL_REFERENCE = 1, TERN_MATMUL_FP32 = 2 };
#define TERN_MATMUL_BLAS TERN_MATMUL_FP32

typedef struct tern_core tern_core;

tern_status tern_core_create(const tern_core_config *cfg, const tern_core_options *opts, tern_core **out,
                             tern_error *err);
void tern_core_free(tern_core *core);
const tern_core_config *tern_core_get_config(const tern_core *core);
/* The rounding mode and stochastic-rounding seed of the executions that follow (a training step draws a fresh
 * seed per step: the SR stream otherwise repeats, since it restarts with every execution). */
void tern_core_set_rounding(tern_core *core, tern_round rounding, uint64_t seed);

/* Host access to device memory (for binding inputs and reading outputs). */
tern_status tern_core_hbm_write(tern_core *core, uint64_t addr, const void *src, size_t bytes, tern_error *err);
tern_status tern_core_hbm_read(tern_core *core, uint64_t addr, void *dst, size_t bytes, tern_error *err);
/* Device to device: [dst, +bytes) gets the bytes [src, +bytes) holds. copy leaves src as it is (overlapping ranges
 * as memmove). move may instead hand src's host pages to dst: afterwards src holds unspecified bytes (in practice
 * dst's former ones, page by page, or its own), so a caller that moves must no longer read src. Whole pages of
 * tern_core_hbm_page_bytes() that start at the same offset within a page in both ranges move without copying a
 * byte; the rest (and overlapping ranges) is copied. A range outside HBM fails with TERN_ERR_RANGE, changing
 * nothing. */
tern_status tern_core_hbm_copy(tern_core *core, uint64_t dst, uint64_t src, uint64_t bytes, tern_error *err);
tern_status tern_core_hbm_move(tern_core *core, uint64_t dst, uint64_t src, uint64_t bytes, tern_error *err);
/* The granule of the simulator's HBM pages (host memory allocated on first touch): a compiler that places
 * tensors that will be moved onto each other at multiples of it lets tern_core_hbm_move swap them whole. */
uint64_t tern_core_hbm_page_bytes(void);
/* A read-only host pointer to the HBM bytes at addr, for reading a large range without copying it: *bytes (in:
 * wanted, out: given) is cut at the end of addr's page. Valid until the next write to, move in or run on the core;
 * NULL (err set) for a range outside HBM or out of host memory. */
const void *tern_core_hbm_peek(tern_core *core, uint64_t addr, uint64_t *bytes, tern_error *err);
/* Raw bytes of SBUF/PSUM partition p at byte offset (bounds-checked). */
tern_status tern_core_onchip_write(tern_core *core, tern_mem mem, uint32_t partition, uint64_t offset,
                                   const void *src, size_t bytes, tern_error *err);
tern_status tern_core_onchip_read(tern_core *core, tern_mem mem, uint32_t partition, uint64_t offset, void *dst,
                                  size_t bytes, tern_error *err);

/* Static check of one instruction (at index pc of a stream of `count`) against a core geometry: every rule
 * knowable without running. The kernel builder calls it as each instruction is built. */
tern_status tern_instr_check(const tern_core_config *cfg, size_t pc, size_t count, const tern_instr *ins,
                             tern_error *err);

/* Static check of a whole program against the core's rules (what is knowable before running). */
tern_status tern_core_validate(const tern_core *core, const tern_program *prog, tern_error *err);

typedef struct {
    uint64_t instructions[TERN_ENGINE_COUNT]; /* executed per engine */
    uint64_t dma_bytes;                       /* bytes moved by DMA (destination side) */
    uint64_t dma_transfers;                   /* DMA instructions */
    uint64_t hbm_bytes;                       /* bytes DMA read from or wrote to HBM */
    uint64_t macs;                            /* multiply-accumulates done by TensorE */
    int64_t time_ps;                          /* predicted device time of the run */
    int64_t busy_ps[TERN_ENGINE_COUNT];       /* time each engine spent executing instructions */
    int64_t dma_busy_ps;                      /* time at least one DMA transfer was in flight */
} tern_run_stats;

/* Run a program to completion (every stream reaches its end or halt). Deadlock, a rule violation at run time
 * or the instruction guard stop the run with an error naming the engine, the instruction index and the rule. */
tern_status tern_core_run(tern_core *core, const tern_program *prog, tern_run_stats *stats, tern_error *err);

/* Reset the control state a program starts from, as a runtime does before each launch: semaphores and
 * registers to 0, no stationary operand loaded. Memories (SBUF, PSUM, HBM) keep their contents. Without it a
 * second run of a program starts with the first run's final semaphore counts, so its waits pass early. */
void tern_core_reset_control(tern_core *core);

/* Semaphore and register inspection (tests, debugging). */
uint32_t tern_core_semaphore(const tern_core *core, uint32_t sem);
int32_t tern_core_register(const tern_core *core, tern_engine e, uint32_t reg);

#ifdef __cplusplus
}
#endif
#endif
