/* Private to sim: the core scheduler (schedule.c) as a steppable object, so that a multi-rank run (rank_run.c)
 * can interleave the schedulers of many cores in one global time order and let collective instructions meet.
 * sched_peek finds the engine whose next instruction can start first (ties to the lowest engine), sched_step
 * commits it; a collective instruction calls the hook when its trigger ends and leaves its semaphore to
 * sched_signal, which the multi-rank runner calls with the completion time the fabric gives. tern_core_run is
 * begin + peek/step until done + end, so a single core runs exactly as before. */
#ifndef TERN_SIM_SCHEDULE_H
#define TERN_SIM_SCHEDULE_H

#include <stddef.h>
#include <stdint.h>

#include "sim/core_internal.h"

typedef struct sched sched;

/* coll_instr.c: the collective's executor, reached only outside a multi-rank launch (it refuses the run). */
tern_status exec_op_COLLECTIVE(tern_core *core, const exec_ctx *cx, const tern_instr *ins, tern_error *err);

/* Called when engine `engine` commits the collective instruction `ins` (index pc of its stream); t_ps is the end
 * of its trigger, the time the rank joins the collective. */
typedef tern_status (*sched_coll_fn)(void *ctx, unsigned engine, size_t pc, const tern_instr *ins, int64_t t_ps,
                                     tern_error *err);

/* Validate the program and prepare a run on the core (its current semaphores are the starting values). stats
 * may be NULL. coll_fn NULL: a collective instruction is an error. */
tern_status sched_begin(tern_core *core, const tern_program *prog, tern_run_stats *stats, sched_coll_fn coll_fn,
                        void *coll_ctx, sched **out, tern_error *err);
/* 1: an instruction can start at *t (sched_step commits it); 0: every stream is done; -1: every remaining engine
 * waits on a semaphore nothing committed so far will raise. */
int sched_peek(sched *s, int64_t *t);
tern_status sched_step(sched *s, tern_error *err);
/* Add 1 to semaphore sem at time t (a collective's completion). */
tern_status sched_signal(sched *s, unsigned sem, int64_t t, tern_error *err);
/* HBM shared with the collective engines (multi-rank runs): the ps of this core's DMA HBM reservations that fall
 * in [a, b); and a collective's data window [a, b) needing work_ps of the core's HBM (at its full bandwidth), which
 * later DMA shares in proportion (each ps of DMA HBM work inside it takes 1 + work / (b - a)). Windows come in
 * time order and do not overlap. */
int64_t sched_hbm_overlap(const sched *s, int64_t a, int64_t b);
tern_status sched_hbm_window(sched *s, int64_t a, int64_t b, int64_t work_ps, tern_error *err);
/* The deadlock error naming every blocked engine, and the same description alone. */
tern_status sched_deadlock(sched *s, tern_error *err);
void sched_describe(const sched *s, char *buf, size_t len);
/* Finish (adds the launch cost when st is TERN_OK) and free; returns st. Accepts NULL. */
tern_status sched_end(sched *s, tern_status st);

#endif
