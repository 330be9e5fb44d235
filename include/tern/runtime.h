/* tern runtime layer: the counterpart of the Neuron runtime. A tern executable (.tern, versioned, see
 * docs/runtime.md) holds one program per NeuronCore, the constants (weights) each core needs in its HBM, and
 * the description of the model's inputs and outputs (name, dtype, shape, how a batch is split over cores). The
 * runtime loads it onto a simulated chip (one simulated core per program, each with its own HBM view), takes
 * inputs, executes, returns outputs and the predicted device time, and can attach the profiler. */
#ifndef TERN_RUNTIME_H
#define TERN_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#include "tern/base.h"
#include "tern/collective.h"
#include "tern/isa.h"
#include "tern/num.h"
#include "tern/sim.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TERN_EXE_MAGIC "TERNEXE1"
/* 2: names (model I/O names, the machine reference) in a string table, any length; the machine's code
 * fingerprint. Version-1 files still load (names as their fixed fields held them, no fingerprint). */
#define TERN_EXE_VERSION 2
#define TERN_EXE_VERSION_MIN 1
#define TERN_EXE_MAX_RANK 8
/* Text (ONNX string) tensors cross the interface as fixed cells of this many bytes per element: the UTF-8 text,
 * NUL-padded (a text of exactly the cell's length has no NUL). The device holds them as uint8 in the same layout. */
#define TERN_EXE_TEXT_CELL 64

/* A model input or output. Its data on core c is rows [c*shape[0]/cores ...) of axis 0 when split, else all of
 * it; on every core it is the program tensor called `name`. The model's own name (an ONNX value name: any
 * length, any character but NUL) is model_name; NULL means the model calls it `name` too. Once the record is
 * part of a tern_exe, model_name is malloc'd and owned by it (tern_exe_free frees it); records handed to
 * tern_exe_from_kernels are copied, so there the caller keeps its own strings. */
typedef struct {
    char name[TERN_TENSOR_NAME_MAX]; /* the program tensor: [A-Za-z0-9_.-], 1..47 characters */
    tern_dtype dtype;
    unsigned rank;
    int64_t shape[TERN_EXE_MAX_RANK];
    int split_batch; /* 1: axis 0 is divided evenly over the cores */
    unsigned text_bytes; /* 0: numbers of dtype; else a text tensor (dtype uint8): one cell of text_bytes bytes
                            per element of shape (TERN_EXE_TEXT_CELL from the compiler; 1..255) */
    char *model_name;    /* the model's name for it (NULL: same as name); see above */
} tern_exe_io;

/* The name the model gives an input or output: model_name, or name when there is none. */
const char *tern_exe_io_name(const tern_exe_io *io);

/* A file name for a tensor name (documented in docs/runtime.md): bytes in [A-Za-z0-9_-] and '.' (except as the
 * first character) are kept, every other byte becomes %XX (two upper-case hex digits), so distinct names give
 * distinct file names and '/' never makes a directory. An escaped name longer than TERN_NAME_FILENAME_MAX - 8
 * bytes keeps its first 200 bytes (whole escapes only) followed by '~' and 16 hex digits of a 64-bit FNV-1a hash
 * of the whole name ('~' never occurs in an unshortened one). Writes at most cap bytes with a NUL (like
 * snprintf) and returns the length of the full result; TERN_NAME_FILENAME_MAX bytes always suffice, leaving room
 * for a ".npy" suffix within a file system's 255-byte name limit. */
#define TERN_NAME_FILENAME_MAX 240
size_t tern_name_to_filename(const char *name, char *out, size_t cap);

/* Constant bytes written into one core's HBM when the executable is loaded (weights); kept across executions. */
typedef struct {
    unsigned core;
    uint64_t hbm_addr;
    uint64_t bytes;
    uint8_t *data;
} tern_exe_const;

typedef struct tern_exe {
    char machine[64];       /* the machine it was compiled for, cut to 63 bytes: kept for source compatibility;
                               tern_exe_machine gives the whole reference */
    unsigned cores;         /* programs, one per NeuronCore */
    tern_program *programs; /* [cores] */
    tern_exe_io *inputs, *outputs;
    size_t num_inputs, num_outputs;
    tern_exe_const *consts;
    size_t num_consts;
    char *metadata_json;    /* free-form: source model, compile options, model FLOPs ... (may be NULL) */
    /* The machine, in full (owned, malloc'd; NULL in an executable built by hand or read from a version-1 file):
     * machine_ref as given to the compiler (catalogue name or path, any length), machine_name its catalogue
     * name, machine_figures the canonical text of the figures the code depends on (tern_machine_code_figures)
     * and machine_fingerprint their fingerprint (tern_machine_code_fingerprint; 0 = not recorded). */
    char *machine_ref, *machine_name, *machine_figures;
    uint32_t machine_fingerprint;
} tern_exe;

/* The machine reference the executable was compiled for: machine_ref, else machine. */
const char *tern_exe_machine(const tern_exe *x);
/* Record the machine on x: loads it (arch layer), fills machine, machine_ref, machine_name, machine_figures and
 * machine_fingerprint. tern_exe_from_kernels calls it. */
tern_status tern_exe_set_machine(tern_exe *x, const char *machine, tern_error *err);

void tern_exe_init(tern_exe *x);
void tern_exe_free(tern_exe *x);
/* Serialise / parse; the parser checks every field and names the byte offset of a problem. */
tern_status tern_exe_encode(const tern_exe *x, uint8_t **out, size_t *len, tern_error *err);
tern_status tern_exe_decode(const uint8_t *buf, size_t len, tern_exe *out, tern_error *err);
tern_status tern_exe_save(const tern_exe *x, const char *path, tern_error *err);
tern_status tern_exe_load(const char *path, tern_exe *out, tern_error *err);
/* Elements and bytes of an input/output (whole model, all cores). */
uint64_t tern_exe_io_elems(const tern_exe_io *io);
uint64_t tern_exe_io_bytes(const tern_exe_io *io); /* elements x dtype size, or x text_bytes for a text tensor */

/* ---- building (runtime/exe_build.c) ---- */
struct tern_kernel;
/* An executable from one built kernel per core: their programs, their constant tensors' data, and the model's
 * inputs and outputs (each must be a tensor of every kernel; whole-model shapes; split_batch as described). */
tern_status tern_exe_from_kernels(tern_exe *x, const char *machine, struct tern_kernel *const *kernels, unsigned cores,
                                  const tern_exe_io *inputs, size_t nin, const tern_exe_io *outputs, size_t nout,
                                  const char *metadata_json, tern_error *err);
/* The same, but the kernels' constant data moves into the executable instead of being copied (the kernels keep
 * their tensors without data): a model's weights are held once. */
tern_status tern_exe_from_kernels_move(tern_exe *x, const char *machine, struct tern_kernel *const *kernels,
                                       unsigned cores, const tern_exe_io *inputs, size_t nin,
                                       const tern_exe_io *outputs, size_t nout, const char *metadata_json,
                                       tern_error *err);
/* One core, inputs and outputs taken from the kernel's own input and output tensors. */
tern_status tern_exe_from_kernel(tern_exe *x, const char *machine, struct tern_kernel *k, tern_error *err);

/* ---- execution ---- */
typedef struct tern_rt tern_rt;

typedef struct {
    tern_sim_mode mode;     /* functional (default) or timing-only */
    tern_round rounding;    /* RNE (default) or stochastic */
    uint64_t seed;
    tern_event_fn on_event; /* profiler callback, called for every core's events (core in ev->... see below) */
    void *event_ctx;
    uint64_t max_instructions; /* per core and execution: tern_core_options.max_instructions (0 = its default) */
    uint64_t max_elements;     /* per core and execution: tern_core_options.max_elements (0 = unlimited) */
    int force_machine;         /* run even if the machine's code fingerprint differs from the executable's */
    /* tern/transport.h (mpirun -np K): a batch split's ranks spread over the K processes by chip (the fabric's
     * owners); this process creates, fills and runs only its own cores, every process gets every core's stats,
     * and the outputs are read on the process that owns core 0 (process 0). Only an executable whose cores run as
     * ranks (a batch split with a gathered output) takes a transport of more than one process. */
    const struct tern_transport *transport;
} tern_rt_options;

/* Load an executable onto a machine (core, chip or instance: its core geometry and timing are used; the
 * executable's core count must fit the chip). A machine whose code fingerprint (tern_machine_code_fingerprint:
 * geometry, PE array, dtype support, engines; never timing) differs from the one the executable records is
 * refused, naming both machines and the figures that differ, unless o->force_machine is set. A version-1
 * executable records no fingerprint: the machine it names is loaded as it is now and its fingerprint used.
 * The executable is copied, except its constants' bytes, which are written into the cores' HBM here: the caller
 * may free x once this returns. */
tern_status tern_rt_create(const tern_exe *x, const char *machine, const tern_rt_options *o, tern_rt **out,
                           tern_error *err);
void tern_rt_free(tern_rt *rt);
/* The loaded executable (its constants carry no data: see tern_rt_create). */
const tern_exe *tern_rt_exe(const tern_rt *rt);
/* Every core's rounding mode and seed for the executions that follow (tern_core_set_rounding). */
void tern_rt_set_rounding(tern_rt *rt, tern_round rounding, uint64_t seed);

/* Inputs and outputs as whole-model arrays in their own dtype (row-major); text tensors as their cells. name is
 * the model's name for it (tern_exe_io_name), or else its program tensor's name (tern_exe_io.name). */
tern_status tern_rt_set_input(tern_rt *rt, const char *name, const void *data, size_t bytes, tern_error *err);
/* 1 when this process holds core c (always without a transport). */
int tern_rt_core_is_local(const tern_rt *rt, unsigned core);
tern_status tern_rt_get_output(tern_rt *rt, const char *name, void *data, size_t bytes, tern_error *err);
/* Bytes [offset, offset + bytes) of an output (the whole-model array's): a large output read piece by piece
 * through a buffer the caches hold (a training step's non-finite check of its updated weights). */
tern_status tern_rt_get_output_range(tern_rt *rt, const char *name, uint64_t offset, void *data, size_t bytes,
                                     tern_error *err);
/* The same bytes without a copy: fn(ctx, at, data, n, err) is called on consecutive pieces of them where HBM holds
 * them (at: the piece's offset from `offset`; data valid during the call only, read-only). Pieces end at the
 * simulator's HBM pages (tern_core_hbm_page_bytes); tensors start 64-byte aligned, so a piece holds whole
 * elements. Stops at fn's first non-zero status, which it returns (a training step's non-finite check of its
 * updated weights reads 0.5 GB this way). */
typedef tern_status (*tern_rt_scan_fn)(void *ctx, uint64_t at, const void *data, size_t n, tern_error *err);
tern_status tern_rt_scan_output(tern_rt *rt, const char *name, uint64_t offset, uint64_t bytes, tern_rt_scan_fn fn,
                                void *ctx, tern_error *err);
/* Device-resident state (docs/runtime.md): the last execution's output `output` becomes input `input` of the
 * executions that follow, moved from HBM to HBM on each core (never through the host), so a training step's
 * updated weights and optimizer state feed the next step where they are. Where both tensors start at the same
 * offset within an HBM page (tern_core_hbm_page_bytes; the trainer compiles with tern_compile_opts.hbm_io_align),
 * their whole pages change owners instead of being copied; the rest is copied. Both must have the same dtype,
 * size and batch split. The input then counts as set and no execution rewrites it, until tern_rt_set_input gives
 * it a host value again. Until the next execution, tern_rt_get_output of the output reads the value where it went
 * (the input), and is refused once that input has been set or carried to again. Functional runs only. */
tern_status tern_rt_carry(tern_rt *rt, const char *output, const char *input, tern_error *err);
/* An input's current value: the host value last set, or what HBM holds for a carried one. */
tern_status tern_rt_get_input(tern_rt *rt, const char *name, void *data, size_t bytes, tern_error *err);
/* Run every core; the predicted time is the slowest core's, plus the on-device gather of split outputs when the
 * cores split a batch (tern_rt_gather). stats (optional) gets the sum over cores, with time_ps = the launch's. */
tern_status tern_rt_execute(tern_rt *rt, tern_run_stats *stats, tern_error *err);
/* Per-core statistics of the last execution. */
const tern_run_stats *tern_rt_core_stats(const tern_rt *rt, unsigned core);
/* The batch split as data parallelism (runtime/batch_ranks.c, docs/runtime.md): an executable whose cores split
 * a batch runs them as the ranks of one multi-rank launch over the machine's fabric, and gathers each split output
 * on the device with an all-gather; the predicted time is the last share's end plus the gathers. NULL when the
 * cores run alone (one core, or no split output). Figures of the last execution. */
typedef struct {
    unsigned ranks;       /* the executable's cores */
    unsigned gathers;     /* all-gathers run (one per split output) */
    int64_t time_ps;      /* the launch: tern_rt_execute's time_ps */
    int64_t compute_ps;   /* when the last share finished and the first gather started */
    int64_t gather_ps;    /* the gathers' times (tern_collective_time for each size), summed */
    int64_t share_max_ps; /* the slowest share alone on its core (timing-only, when the launch was prepared) */
} tern_rt_gather_info;
const tern_rt_gather_info *tern_rt_gather(const tern_rt *rt);

/* ---- one program over many ranks (runtime/multi_rank.c; docs/multichip.md "Programs over ranks") ----
 * A launch over `machine` (an instance, a system, NxINSTANCE or a cluster file; its first o->ranks ranks spread
 * over o->nodes instances, as `tern collective`): one simulated NeuronCore per rank, running kernels[rank]
 * (nkernels == ranks) or kernels[0] on every rank (nkernels == 1, SPMD: the rank id is in register
 * TERN_RANK_REG_ID, collective.h). Collective instructions inside the kernels run over the fabric
 * (tern_ranks_run). The kernels must outlive the launch. More ranks than the machine has, a program count that is
 * neither 1 nor the rank count, or a failed kernel are errors naming the values. */
typedef struct tern_rt_ranks tern_rt_ranks;
typedef struct {
    unsigned ranks, nodes, lnc; /* tern_fabric_opts: 0 = the machine's defaults */
    tern_sim_mode mode;         /* functional (default) or timing-only */
    unsigned threads;           /* host threads per core (0: $TERN_THREADS or the CPUs); never changes results */
    int fill_nan;
    uint64_t max_instructions;
    /* transport.h: spread the ranks' chips over its processes (tern_fabric_set_transport); this process creates,
     * writes, runs and reads only its own ranks (tern_fabric_rank_is_local), the others' are errors. NULL: all. */
    const struct tern_transport *transport;
} tern_rt_ranks_opts;
tern_status tern_rt_ranks_create(const char *machine, const tern_rt_ranks_opts *o, struct tern_kernel *const *kernels,
                                 unsigned nkernels, tern_rt_ranks **out, tern_error *err);
void tern_rt_ranks_free(tern_rt_ranks *rt);
unsigned tern_rt_ranks_count(const tern_rt_ranks *rt);
tern_fabric *tern_rt_ranks_fabric(tern_rt_ranks *rt); /* its fabric (rank order, references) */
tern_core *tern_rt_ranks_core(tern_rt_ranks *rt, unsigned rank);
/* A rank's tensors by name (tern_kernel_write / tern_kernel_read on its core). */
tern_status tern_rt_ranks_write(tern_rt_ranks *rt, unsigned rank, const char *name, const void *data, size_t bytes,
                                tern_error *err);
tern_status tern_rt_ranks_read(tern_rt_ranks *rt, unsigned rank, const char *name, void *data, size_t bytes,
                               tern_error *err);
/* Run every rank's program (constants placed first); res (collective.h's tern_ranks_result, may be NULL) gets the
 * slowest rank's time and every collective's record. */
tern_status tern_rt_ranks_execute(tern_rt_ranks *rt, tern_ranks_result *res, tern_error *err);
const tern_run_stats *tern_rt_ranks_stats(const tern_rt_ranks *rt, unsigned rank);

#ifdef __cplusplus
}
#endif
#endif
