/* tern arch layer: the machine catalogue. A machine is a NeuronCore, a chip (N cores), an instance (N chips)
 * or a system (N chips across several servers), described by a JSON file in data/machines/ where every
 * figure carries its public source (schema: docs/machines.md). The loader resolves references (a chip names
 * its core, an instance its chip) through a search path, validates every field (type, unit, range, unknown
 * keys, reference cycles) and keeps the figures in SI units. Peak figures (FLOPS per dtype, HBM, DMA, SBUF)
 * are derived from the engine parameters by tern_machine_peaks, never copied from a data sheet, so a what-if
 * file (a 256x256 PE array, twice the SBUF) changes every derived figure. Uses only the base layer. */
#ifndef TERN_ARCH_H
#define TERN_ARCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tern/base.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    TERN_MACHINE_CORE = 0,
    TERN_MACHINE_CHIP,
    TERN_MACHINE_INSTANCE,
    TERN_MACHINE_SYSTEM
} tern_machine_kind;

/* The arch layer's own matmul/engine data-type keys (JSON keys "fp32", "tf32", "bf16", "fp16", "fp8",
 * "mxfp8", "mxfp4"); independent of the num layer on purpose. */
typedef enum {
    TERN_ARCH_FP32 = 0,
    TERN_ARCH_TF32,
    TERN_ARCH_BF16,
    TERN_ARCH_FP16,
    TERN_ARCH_FP8,
    TERN_ARCH_MXFP8,
    TERN_ARCH_MXFP4,
    TERN_ARCH_DTYPE_COUNT
} tern_arch_dtype;

typedef enum {
    TERN_TOPOLOGY_NONE = 0,      /* a single chip */
    TERN_TOPOLOGY_RING,          /* "ring N" */
    TERN_TOPOLOGY_TORUS_2D,      /* "2d-torus AxB" */
    TERN_TOPOLOGY_TORUS_3D,      /* "3d-torus AxBxC" */
    TERN_TOPOLOGY_SWITCH,        /* "switch": one all-to-all switch level */
    TERN_TOPOLOGY_SWITCH_2LEVEL  /* "switch-2level GxN": G groups of N chips, first- and second-level switches */
} tern_topology_kind;

/* Vector, Scalar and GpSimd engines. elems_per_cycle[dt] is 0 where the file lists no figure. */
typedef struct {
    double clock_hz;
    unsigned lanes;
    double elems_per_cycle[TERN_ARCH_DTYPE_COUNT];
} tern_engine_spec;

typedef struct {
    char name[64];
    char version[32]; /* "NeuronCore-v3" */
    struct {
        unsigned pe_rows, pe_cols;
        double clock_hz;
        double macs_per_pe_cycle[TERN_ARCH_DTYPE_COUNT]; /* 0 = dtype not supported by TensorE */
        unsigned moving_free_max;                        /* elements per partition of one moving tile */
        unsigned mm_init_latency_cycles;
        double fast_load_stationary_factor;
    } tensor;
    tern_engine_spec vector, scalar, gpsimd;
    unsigned gpsimd_cores;
    struct {
        unsigned partitions;
        uint64_t bytes_per_partition, usable_bytes_per_partition;
        unsigned access_init_cycles;
    } sbuf;
    struct {
        unsigned partitions, banks;
        uint64_t bank_bytes;
    } psum;
    struct {
        unsigned engines, queues_per_engine;
        double bandwidth_per_engine; /* bytes/s */
        double fixed_cost_s;         /* per transfer (latency before data moves) */
        double descriptor_cost_s;    /* per contiguous buffer handled by one DMA engine */
        double transfer_cost_s;      /* per transfer on one queue of one engine (0 if absent: no such limit) */
        double descriptor_max_bytes; /* largest contiguous run one descriptor moves (0 if absent: no limit) */
        double hwdge_cost_s;         /* per hardware-DGE instruction; 0 = no hardware DGE */
    } dma;
    struct {
        unsigned min_ii, vector_static_overhead, gpsimd_start, dynamic_copy_min_ii, act_read_accumulator;
        double semaphore_wake_s; /* from a semaphore reaching a waited value to the waiter issuing (0 if absent) */
        double raw_latency[4];   /* Tensor, Vector, Scalar, GpSimd: cycles before an instruction may read what the
                                  * previous one on the same engine wrote (0 if absent) */
        double launch_s;         /* launch and completion of one kernel run, seconds (0 if absent) */
    } costs; /* in the issuing engine's cycles, except semaphore_wake_s */
} tern_core_spec;

typedef struct {
    char name[64];
    unsigned cores;
    uint64_t hbm_bytes;
    double hbm_bandwidth; /* bytes/s per chip */
    unsigned hbm_stacks;
    char neuronlink_version[16];
    unsigned neuronlink_links;
    double neuronlink_bandwidth; /* bytes/s per chip, as published for the chip */
    unsigned cc_cores;
    double dma_bandwidth; /* bytes/s per chip, as published (informational; peaks derive their own) */
    /* Collective runtime ("collectives" block, optional; 0 if absent; docs/multichip.md): the interval between
     * back-to-back collective launches, the device-side fixed cost of one collective, and the DMA engines one
     * rank's collective transfers use at a time. */
    double cc_launch_cost_s, cc_setup_cost_s;
    unsigned cc_dma_engines;
} tern_chip_spec;

typedef struct {
    char name[64];
    unsigned chips;
    char topology_text[64];
    tern_topology_kind topology;
    unsigned topology_ndims, topology_dims[3];
    double link_bandwidth_per_chip;     /* bytes/s, chip-to-chip fabric inside the instance or system */
    double scaleup_bandwidth_per_chip;  /* bytes/s, between the servers of a system; 0 if none */
    double efa_bandwidth;               /* bytes/s for the whole instance or system */
    double link_latency_s;              /* one chip-to-chip NeuronLink hop; 0 if not given */
    double efa_latency_s;               /* one EFA hop between instances; 0 if not given */
    unsigned vcpus;                     /* 0 if not given */
    uint64_t host_memory_bytes;         /* 0 if not given */
    bool has_price;
    double price_usd_per_hour;
    char price_region[48];
    char price_source[256];
    char built_from[64];                /* system: the instance it is made of ("" if none) */
    unsigned built_from_count;
} tern_instance_spec;

typedef struct tern_machine tern_machine;

/* Load a machine by catalogue name ("trn2.48xlarge"), by short name ("trn1" = trn1.2xlarge, "trn2" =
 * trn2.48xlarge, "trn3" = trainium3, unless a file of that name exists) or by path (anything containing '/' or
 * ending in ".json"). Names are looked up as NAME.json in each directory of $TERN_MACHINE_PATH (colon-separated) and
 * then in the built-in machine directory (tern_machine_builtin_dir); a reference inside a file is looked up first in that file's
 * own directory. On failure *out is NULL and err names the file, the field path, the problem and the value. */
tern_status tern_machine_load(const char *name_or_path, tern_machine **out, tern_error *err);
void tern_machine_free(tern_machine *m);
/* Resolve a name or path to the file tern_machine_load would read, without loading it: TERN_ERR_NOT_FOUND
 * if there is none (the CLI reports that as an unknown machine, distinct from a broken file). */
tern_status tern_machine_find(const char *name_or_path, char *path, size_t cap, tern_error *err);

tern_machine_kind tern_machine_kind_of(const tern_machine *m);
const char *tern_machine_kind_name(tern_machine_kind kind); /* "core", "chip", "instance", "system" */
const char *tern_machine_name(const tern_machine *m);
const char *tern_machine_description(const tern_machine *m);
const char *tern_machine_path(const tern_machine *m); /* the file it was loaded from */

const tern_core_spec *tern_machine_core(const tern_machine *m);         /* never NULL */
const tern_chip_spec *tern_machine_chip(const tern_machine *m);         /* NULL for a core */
const tern_instance_spec *tern_machine_instance(const tern_machine *m); /* NULL for a core or chip */

/* Every sourced figure that went into the machine, including those of referenced files. */
typedef struct {
    const char *file;   /* file name the figure came from */
    const char *path;   /* "core.sbuf.partitions" */
    const char *text;   /* string value, or NULL for a number */
    double value;       /* as written in the file */
    union {             /* converted to SI (Hz, bytes, bytes/s, seconds, FLOPS, USD/h) */
        double value_si;
#ifndef si_value /* the old name, kept as an alias; POSIX <signal.h> makes si_value a macro, so not beside it */
        double si_value;
#endif
    };
    const char *unit;   /* as written ("" if dimensionless) */
    const char *source;
    const char *note;   /* NULL if none */
} tern_fact;
size_t tern_machine_fact_count(const tern_machine *m);
const tern_fact *tern_machine_fact(const tern_machine *m, size_t i);
/* Source of the figure at path (e.g. "chip.hbm.bandwidth"), or NULL. */
const char *tern_machine_source(const tern_machine *m, const char *path);

/* Where public sources disagree: which value tern picked and what the other source says. */
typedef struct {
    const char *file, *field, *picked, *other, *note;
} tern_conflict;
size_t tern_machine_conflict_count(const tern_machine *m);
const tern_conflict *tern_machine_conflict(const tern_machine *m, size_t i);

/* Published headline figures ("published" block) kept only to check derived peaks against; never used to
 * derive anything. key is a peaks key (see tern_peaks_get), value_si in FLOPS, bytes or bytes/s. */
typedef struct {
    const char *file, *key, *unit, *source;
    double value;
    union {
        double value_si;
#ifndef si_value /* the old name, an alias (see tern_fact) */
        double si_value;
#endif
    };
} tern_published;
size_t tern_machine_published_count(const tern_machine *m);
const tern_published *tern_machine_published(const tern_machine *m, size_t i);

/* Derived figures. "core" = one NeuronCore, "chip" = one chip (0 for a core machine), "total" = the whole
 * machine (equal to core for a core, to chip for a chip). FLOPS count a multiply-add as 2. */
typedef struct {
    unsigned cores_per_chip, chips, cores;
    double core_flops[TERN_ARCH_DTYPE_COUNT];
    double chip_flops[TERN_ARCH_DTYPE_COUNT];
    double total_flops[TERN_ARCH_DTYPE_COUNT];
    double core_vector_elems_per_s, core_scalar_elems_per_s, core_gpsimd_elems_per_s; /* FP32 */
    double core_sbuf_bytes, core_sbuf_usable_bytes, core_psum_bytes;
    double chip_sbuf_bytes, total_sbuf_bytes;
    double core_dma_bandwidth, chip_dma_bandwidth, total_dma_bandwidth;
    double chip_hbm_bytes, chip_hbm_bandwidth, total_hbm_bytes, total_hbm_bandwidth;
    double total_link_bandwidth, total_efa_bandwidth;
} tern_peaks;

void tern_machine_peaks(const tern_machine *m, tern_peaks *out);

/* Look a derived figure up by key: "core_flops_bf16", "chip_flops_fp8", "total_flops_fp32" (any dtype name),
 * "core_sbuf_bytes", "core_sbuf_usable_bytes", "core_psum_bytes", "chip_sbuf_bytes", "total_sbuf_bytes",
 * "core_dma_bandwidth", "chip_dma_bandwidth", "total_dma_bandwidth", "chip_hbm_bytes", "chip_hbm_bandwidth",
 * "total_hbm_bytes", "total_hbm_bandwidth", "cores", "chips". TERN_ERR_NOT_FOUND for an unknown key. */
tern_status tern_peaks_get(const tern_peaks *p, const char *key, double *out);
bool tern_peaks_key_valid(const char *key);

const char *tern_arch_dtype_name(tern_arch_dtype dt);
/* TERN_ERR_NOT_FOUND if name is not a dtype key. */
tern_status tern_arch_dtype_from_name(const char *name, tern_arch_dtype *out);

/* The catalogue: every machine file in the search path ($TERN_MACHINE_PATH, then the built-in directory),
 * first occurrence of a name wins, sorted by kind (core, chip, instance, system) then name. Each entry is
 * fully loaded and validated; the first broken file fails the listing with its error. */
typedef struct {
    char name[64];
    tern_machine_kind kind;
    char description[160];
    char path[512];
} tern_machine_entry;
tern_status tern_machine_list(tern_machine_entry **out, size_t *count, tern_error *err);
void tern_machine_list_free(tern_machine_entry *entries);

/* The figures of a machine that compiled code depends on, as canonical text: one "key=value\n" line per figure
 * in a fixed order (NeuronCore version, PE array, TensorE dtypes, engine lanes, SBUF and PSUM geometry, DMA
 * engines and queues, the chip's cores and HBM bytes) and never a timing figure (clock, bandwidth, latency,
 * throughput). Writes at most cap bytes with a NUL, like snprintf, and returns the full length (under 2048). */
size_t tern_machine_code_figures(const tern_machine *m, char *buf, size_t cap);
/* CRC-32 of that text (never 0): equal for two machines that can run the same code, e.g. a what-if file that
 * changes only timing figures; different for trn1 and trn2. */
uint32_t tern_machine_code_fingerprint(const tern_machine *m);

/* The built-in machine directory: the source tree's data/machines while it exists, else PREFIX/share/tern/machines. */
const char *tern_machine_builtin_dir(void);

#ifdef __cplusplus
}
#endif
#endif
