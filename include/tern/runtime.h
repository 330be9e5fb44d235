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
#include "tern/isa.h"
#include "tern/num.h"
#include "tern/sim.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TERN_EXE_MAGIC "TERNEXE1"
#define TERN_EXE_VERSION 1
#define TERN_EXE_MAX_RANK 8
/* Text (ONNX string) tensors cross the interface as fixed cells of this many bytes per element: the UTF-8 text,
 * NUL-padded (a text of exactly the cell's length has no NUL). The device holds them as uint8 in the same layout. */
#define TERN_EXE_TEXT_CELL 64

/* A model input or output. Its data on core c is rows [c*shape[0]/cores ...) of axis 0 when split, else all of
 * it; on every core it is the program tensor of the same name. */
typedef struct {
    char name[TERN_TENSOR_NAME_MAX];
    tern_dtype dtype;
    unsigned rank;
    int64_t shape[TERN_EXE_MAX_RANK];
    int split_batch; /* 1: axis 0 is divided evenly over the cores */
    unsigned text_bytes; /* 0: numbers of dtype; else a text tensor (dtype uint8): one cell of text_bytes bytes
                            per element of shape (TERN_EXE_TEXT_CELL from the compiler; 1..255) */
} tern_exe_io;

/* Constant bytes written into one core's HBM when the executable is loaded (weights); kept across executions. */
typedef struct {
    unsigned core;
    uint64_t hbm_addr;
    uint64_t bytes;
    uint8_t *data;
} tern_exe_const;

typedef struct tern_exe {
    char machine[64];       /* the machine it was compiled for */
    unsigned cores;         /* programs, one per NeuronCore */
    tern_program *programs; /* [cores] */
    tern_exe_io *inputs, *outputs;
    size_t num_inputs, num_outputs;
    tern_exe_const *consts;
    size_t num_consts;
    char *metadata_json;    /* free-form: source model, compile options, model FLOPs ... (may be NULL) */
} tern_exe;

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
} tern_rt_options;

/* Load an executable onto a machine (core, chip or instance: its core geometry and timing are used; the
 * executable's core count must fit the chip). The executable is copied, except its constants' bytes, which are
 * written into the cores' HBM here: the caller may free x once this returns. */
tern_status tern_rt_create(const tern_exe *x, const char *machine, const tern_rt_options *o, tern_rt **out,
                           tern_error *err);
void tern_rt_free(tern_rt *rt);
/* The loaded executable (its constants carry no data: see tern_rt_create). */
const tern_exe *tern_rt_exe(const tern_rt *rt);

/* Inputs and outputs as whole-model arrays in their own dtype (row-major); text tensors as their cells. */
tern_status tern_rt_set_input(tern_rt *rt, const char *name, const void *data, size_t bytes, tern_error *err);
tern_status tern_rt_get_output(tern_rt *rt, const char *name, void *data, size_t bytes, tern_error *err);
/* Run every core; the predicted time is the slowest core's. stats (optional) gets the sum over cores, with
 * time_ps = the slowest core's time. */
tern_status tern_rt_execute(tern_rt *rt, tern_run_stats *stats, tern_error *err);
/* Per-core statistics of the last execution. */
const tern_run_stats *tern_rt_core_stats(const tern_rt *rt, unsigned core);

#ifdef __cplusplus
}
#endif
#endif
