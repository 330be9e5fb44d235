/* The batch split as data parallelism: an executable's cores run as the ranks of one multi-rank launch and its
 * split outputs are gathered on the device (src/runtime/batch_ranks.c; used by src/runtime/rt.c). */
#ifndef TERN_RUNTIME_BATCH_RANKS_H
#define TERN_RUNTIME_BATCH_RANKS_H

#include "tern/runtime.h"

typedef struct tern_batch_ranks tern_batch_ranks;
/* *out NULL (and TERN_OK) when the executable has one core or no split output with bytes: the cores then run
 * alone. An error when the machine's fabric cannot hold the cores as ranks or an output does not fit in HBM. */
tern_status tern_batch_ranks_create(const tern_exe *x, const char *machine, const tern_core_config *cfg,
                                    const struct tern_transport *t, tern_batch_ranks **out, tern_error *err);
/* Under a transport of several processes: 1 when this process owns core c (always 1 otherwise). */
int tern_batch_ranks_local(const tern_batch_ranks *b, unsigned c);
void tern_batch_ranks_free(tern_batch_ranks *b);
/* Run every core's share and the gathers as one launch on cores[0..cores) (NULL: another process's core);
 * per_core gets each core's stats, from every process. */
tern_status tern_batch_ranks_execute(tern_batch_ranks *b, const tern_exe *x, const tern_core_config *cfg,
                                     tern_core *const *cores, tern_run_stats *per_core, tern_error *err);
/* 1 with the whole-model buffer's HBM address (every core) when output index `output` is gathered. */
int tern_batch_ranks_gathered(const tern_batch_ranks *b, size_t output, uint64_t *hbm_addr);
const tern_rt_gather_info *tern_batch_ranks_info(const tern_batch_ranks *b);

#endif
