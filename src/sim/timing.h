/* Private to sim: the timing model's rules (timing.c), used by the scheduler in schedule.c. */
#ifndef TERN_SIM_TIMING_H
#define TERN_SIM_TIMING_H

#include <stdint.h>

#include "tern/sim.h"

/* Cycles the instruction occupies its engine (its initiation interval), in the engine's clock. stat_m and
 * stat_dtype describe the loaded stationary operand (for multiply_moving). */
/* An instruction an engine computes with: not a DMA trigger (the DMA family), not sequencer control (the control
 * flag). Both come from the instruction table's columns, whatever the opcode numbers. */
static inline int timing_is_compute_op(unsigned op)
{
    const tern_opcode_info *info = tern_opcode_get((tern_opcode)op);
    return info && !(info->flags & TERN_ISA_FLAG_CONTROL) && info->family != TERN_ISA_FAMILY_DMA &&
           info->family != TERN_ISA_FAMILY_COLLECTIVE;
}

uint64_t timing_cost_cycles(const tern_timing_config *t, tern_engine e, const tern_instr *ins, uint32_t stat_m,
                            uint8_t stat_dtype);
/* Extra cycles after the occupancy before the result is visible to another engine (access latency). */
uint64_t timing_latency_cycles(const tern_timing_config *t, tern_engine e, const tern_instr *ins);
/* cycles at hz to picoseconds (rounded to nearest) */
int64_t timing_ps(double cycles, double hz);

/* A DMA transfer's shape for the queue model. An SBUF side maps partitions to engines in groups of
 * partitions / engines (8 of 128 on 16 engines): the transfer uses the engines of the groups it touches, from
 * first_engine on; a transfer with no SBUF side is spread over the engines by descriptors. */
typedef struct {
    uint64_t bytes;       /* destination bytes */
    uint64_t hbm_bytes;   /* bytes read from or written to HBM */
    uint64_t descriptors; /* contiguous runs, each split into descriptors of at most descriptor_max bytes */
    unsigned first_engine;
    unsigned engines;     /* DMA engines it is split over */
    int64_t engine_ps;    /* data time on the busiest of those engines (descriptors + bytes / bandwidth) */
    int64_t fixed_ps;     /* per-transfer latency before data moves (overlaps other transfers) */
    int64_t ring_ps;      /* occupancy of its queue's ring on each engine (pipelined with the data) */
    int64_t hbm_ps;       /* time its HBM bytes take at the core's HBM bandwidth */
} timing_dma;

void timing_dma_plan(const tern_timing_config *t, const tern_instr *ins, timing_dma *out);

/* Read-after-write on one engine: the engine's recent writes (SBUF/PSUM) and when each becomes readable by its
 * next instructions (machine file: core.costs.<engine>_raw_latency). */
#define TIMING_RAW_WRITES 8
typedef struct {
    tern_ap ap[TIMING_RAW_WRITES];
    int64_t ready_ps[TIMING_RAW_WRITES];
    unsigned next;
} timing_raw;

/* The latest time a recent write that ins reads (IN0/IN1/IN2 overlapping a recorded DST/EXTRA: same memory,
 * common partitions, overlapping byte span) becomes readable; 0 if it reads none. */
int64_t timing_raw_ready(const timing_raw *h, const tern_instr *ins);
/* Record ins's writes as readable from ready_ps. */
void timing_raw_note(timing_raw *h, const tern_instr *ins, int64_t ready_ps);

/* In-order completion on one DMA queue: a transfer whose data is done at data_end completes at the later of that
 * and the previous completion on its queue (*queue_done, updated). */
static inline int64_t timing_queue_complete(int64_t *queue_done, int64_t data_end)
{
    if (data_end > *queue_done)
        *queue_done = data_end;
    return *queue_done;
}

#endif
