/* Private to sim: the background lane, a window of queued instructions that the pool's workers execute as a dataflow
 * graph while the committing thread goes on (exec_lane.c has the rules that keep every result that of commit
 * order). */
#ifndef TERN_SIM_EXEC_LANE_H
#define TERN_SIM_EXEC_LANE_H

#include <stdint.h>

#include "sim/core_internal.h"

typedef struct exec_lane exec_lane;
typedef tern_status (*lane_exec_fn)(tern_core *core, const exec_ctx *cx, const tern_instr *ins, tern_error *err);

/* The core's lane, created on first use; NULL when the core has one host thread (or no memory): run in place. */
exec_lane *exec_lane_get(tern_core *core);
/* Execute ins (after its checks at commit) with fn: queued on the lane, or here once the queued instructions it
 * conflicts with have finished. An earlier queued instruction's failure comes back instead. lane may be NULL. */
tern_status exec_lane_submit(tern_core *core, exec_lane *lane, lane_exec_fn fn, const exec_ctx *cx,
                             const tern_instr *ins, tern_error *err);
/* Wait for every queued instruction; the first failure's error, if any (the queue is then empty). lane may be
 * NULL. */
tern_status exec_lane_drain(exec_lane *lane, tern_error *err);
/* Instructions queued since the lane was created (tests). */
uint64_t exec_lane_queued(const exec_lane *lane);
/* Of them, those that joined the task queued just before them as one more step of its chain (tests). */
uint64_t exec_lane_chained(const exec_lane *lane);
/* Multiplies the committing thread left running on the pool's workers as it went on (pool_post), and of them those
 * it posted while an earlier one might still run (tests). */
uint64_t exec_lane_posted(const exec_lane *lane, uint64_t *overlapped);
/* The stationary panels at `panels` are about to be repacked: any multiply left running that reads them finishes
 * first. lane may be NULL. */
void exec_lane_panels_written(exec_lane *lane, const float *panels);

#endif
