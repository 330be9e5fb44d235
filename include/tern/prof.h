/* tern prof layer: the profiler. It consumes the simulator's events (tern_event: every instruction, DMA
 * transfer and semaphore wait with picosecond start and end) and produces three things: a Chrome trace-event
 * JSON file that Perfetto and chrome://tracing open (streamed to disk as events arrive, one track per engine
 * and per DMA queue, aggregated into time bins past a size limit so long programs stay bounded), a summary
 * with the metrics the Neuron profiler reports (total time, per-engine active %, DMA activity, MFU, HFU, MBU,
 * top instructions by time), and an SVG timeline that opens in any browser. Metric definitions follow AWS
 * (SDK tools/neuron-explorer/profile-schema-reference.rst; ../shared/reference/trainium-arch.md §12) and are
 * spelled out in docs/profiler.md. Memory stays bounded whatever the program's length: the trace is never
 * held in memory, the SVG and the aggregated part of the trace are binned on a fixed grid. */
#ifndef TERN_PROF_H
#define TERN_PROF_H

#include <stdint.h>
#include <stdio.h>

#include "tern/arch.h"
#include "tern/base.h"
#include "tern/isa.h"
#include "tern/sim.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TERN_PROF_DEFAULT_MAX_TRACE_EVENTS 1000000u
#define TERN_PROF_TOP_N 10
#define TERN_PROF_MAX_QUEUES 64 /* DMA queue tracks; higher queue ids share the last track */

typedef struct {
    const char *trace_path;    /* Chrome trace-event JSON; NULL = no trace */
    const char *svg_path;      /* SVG timeline; NULL = none */
    uint64_t max_trace_events; /* slices written one by one before binning; 0 = the default (10^6) */
    char name[64];             /* core or machine name: the trace's process name, the titles */
    /* machine figures for the metrics (tern_prof_opts_from_machine fills them) */
    unsigned pe_rows, pe_cols;                 /* TensorE PE array */
    double clock_hz[TERN_ENGINE_COUNT];        /* engine clocks: cycle counts in slices; [TENSOR] sets the peak */
    double hbm_bandwidth;                      /* bytes/s available to this core (0 = unknown: no MBU) */
    double model_flops;                        /* FLOPs the model needs (MFU); 0 = the hardware FLOPs */
    unsigned svg_width;                        /* plot width in pixels; 0 = 1600 */
} tern_prof_opts;

/* Zero everything and set the defaults (no files, default limit, no machine figures). */
void tern_prof_opts_init(tern_prof_opts *o);
/* Fill the machine figures of o from a machine (a core, chip or instance: its NeuronCore), leaving the
 * paths, limits and model FLOPs alone: name, PE rows/cols, engine clocks (Sync runs at the ScalarE clock,
 * which is not published, as in the simulator), and the HBM bandwidth one core can use, taken as the chip's
 * HBM bandwidth divided by its cores (each core's fair share when all stream at once; 0 for a bare core
 * file, which describes no HBM). */
void tern_prof_opts_from_machine(const tern_machine *m, tern_prof_opts *o);

/* One line of the top-instructions table: an opcode on an engine (engine == TERN_ENGINE_COUNT: the DMA
 * queues, i.e. the transfers themselves rather than the instructions that triggered them). */
typedef struct {
    tern_opcode opcode;
    tern_engine engine;
    uint64_t count;
    int64_t total_ps;
    double percent; /* of the total time */
} tern_prof_top;

typedef struct {
    char name[64];
    int64_t total_ps;                           /* the run's end: last event end or the simulator's time */
    int64_t busy_ps[TERN_ENGINE_COUNT];         /* time with at least one instruction executing */
    double active_pct[TERN_ENGINE_COUNT];       /* busy / total */
    int64_t wait_ps[TERN_ENGINE_COUNT];         /* time blocked on semaphores */
    uint64_t instructions[TERN_ENGINE_COUNT];   /* instructions executed */
    uint64_t instructions_total;
    uint64_t engine_flops[TERN_ENGINE_COUNT];   /* as reported by the simulator (TensorE: 2 x MACs) */
    int64_t dma_busy_ps;                        /* time with at least one transfer in flight (any queue) */
    double dma_active_pct;
    uint64_t dma_bytes, dma_transfers;
    double dma_avg_bytes;                       /* per transfer */
    unsigned dma_queues_used;
    uint64_t hbm_bytes;                         /* bytes DMA read from or wrote to HBM */
    double hardware_flops, model_flops;         /* TensorE FLOPs executed; FLOPs the model needs */
    double peak_flops;                          /* 2 x PE rows x PE cols x TensorE clock */
    double hbm_bandwidth;                       /* bytes/s (0 = unknown) */
    double hfu_pct, mfu_pct, mbu_pct;           /* 0 when time, peak or bandwidth is 0 */
    uint64_t trace_slices;                      /* slices written to the trace (0 without a trace) */
    int trace_aggregated;                       /* the limit was reached: later events were binned */
    int64_t trace_bin_ps;                       /* width of the aggregation bins (when aggregated) */
    unsigned top_count;
    tern_prof_top top[TERN_PROF_TOP_N];         /* by total time, descending */
} tern_prof_summary;

typedef struct tern_prof tern_prof;

/* Open the output files (errors name the path and the reason) and get ready for events. */
tern_status tern_prof_create(const tern_prof_opts *o, tern_prof **out, tern_error *err);
/* Record one event; usable directly as the simulator's on_event with ctx = the tern_prof. Events on one
 * engine or queue must come in order of start time (the simulator's promise); engines interleave freely.
 * I/O errors are remembered and reported by tern_prof_finish. */
void tern_prof_event(void *ctx, const tern_event *ev);
/* Complete the trace and the SVG, close the files and compute the summary. stats (may be NULL) supplies the
 * run's total time when it ends after the last event, and whatever the events did not carry (TensorE FLOPs
 * from its MAC count, DMA and HBM bytes, instruction counts). Call once. */
tern_status tern_prof_finish(tern_prof *p, const tern_run_stats *stats, tern_prof_summary *out, tern_error *err);
void tern_prof_summary_print(FILE *f, const tern_prof_summary *s);
void tern_prof_free(tern_prof *p);

/* Track names used in the trace and the SVG: "TensorE", "VectorE", "ScalarE", "GpSimdE", "SyncE". */
const char *tern_prof_engine_track(tern_engine e);

#ifdef __cplusplus
}
#endif
#endif
