/* Private to sim: the timing model's rules (timing.c), used by the scheduler in run.c. */
#ifndef TERN_SIM_TIMING_H
#define TERN_SIM_TIMING_H

#include <stdint.h>

#include "tern/sim.h"

/* Cycles the instruction occupies its engine (its initiation interval), in the engine's clock. stat_m and
 * stat_dtype describe the loaded stationary operand (for multiply_moving). */
/* An instruction an engine computes with (not a DMA trigger, not sequencer control). The text conversions were
 * appended after the control opcodes (the opcode numbers are part of the .tprog format), hence two ranges. */
static inline int timing_is_compute_op(unsigned op) { return op < TERN_OP_DMA_COPY || op > TERN_OP_HALT; }

uint64_t timing_cost_cycles(const tern_timing_config *t, tern_engine e, const tern_instr *ins, uint32_t stat_m,
                            uint8_t stat_dtype);
/* Extra cycles after the occupancy before the result is visible to another engine (access latency). */
uint64_t timing_latency_cycles(const tern_timing_config *t, tern_engine e, const tern_instr *ins);
/* cycles at hz to picoseconds (rounded to nearest) */
int64_t timing_ps(double cycles, double hz);

/* A DMA transfer's shape for the queue model. */
typedef struct {
    uint64_t bytes;       /* destination bytes */
    uint64_t hbm_bytes;   /* bytes read from or written to HBM */
    uint64_t descriptors; /* contiguous buffers */
    unsigned engines;     /* DMA engines it is split over */
    int64_t engine_ps;    /* time on each of those engines (descriptors + bytes / bandwidth) */
    int64_t fixed_ps;     /* per-transfer latency before data moves */
    int64_t hbm_ps;       /* time its HBM bytes take at the chip's HBM bandwidth */
} timing_dma;

void timing_dma_plan(const tern_timing_config *t, const tern_instr *ins, timing_dma *out);

/* In-order completion on one DMA queue: a transfer whose data is done at data_end completes at the later of that
 * and the previous completion on its queue (*queue_done, updated). */
static inline int64_t timing_queue_complete(int64_t *queue_done, int64_t data_end)
{
    if (data_end > *queue_done)
        *queue_done = data_end;
    return *queue_done;
}

#endif
