/* Private to sim: a tiny fork-join thread pool owned by a core. Work is split into a fixed number of parts
 * decided by the caller from the problem shape (never from timing), so results never depend on the host's
 * thread count or scheduling. */
#ifndef TERN_SIM_HOST_THREADS_H
#define TERN_SIM_HOST_THREADS_H

typedef struct tern_pool tern_pool;
typedef void (*pool_fn)(void *ctx, unsigned part, unsigned nparts);

/* A pool of `threads` workers in all (the caller counts as one); threads <= 1 runs everything inline. */
tern_pool *pool_create(unsigned threads);
void pool_free(tern_pool *p);
unsigned pool_threads(const tern_pool *p);
/* Run fn(ctx, i, nparts) for i in [0, nparts), spread over the pool; returns when all are done. Parts run in
 * any order and at the same time, so the caller must give them disjoint outputs: a part that writes what
 * another part writes (an overlapping destination pattern) would make the winner depend on scheduling. */
void pool_run(tern_pool *p, pool_fn fn, void *ctx, unsigned nparts);
/* pool_run without the wait at its end: ctx (size bytes, at most POOL_CTX_MAX) is copied into the pool, the caller
 * runs every part it can claim and returns while parts may still run on workers. Returns the job's generation while
 * it may still run, 0 when it is complete (or ran as pool_run: one thread, one part, a worker's own call). overlap:
 * the job may run beside the one posted before it (the caller knows they touch different bytes); else that one is
 * complete first. Each call, and pool_run, first waits for the job posted two before, so at most two run. Only the
 * thread that posts may join, and it must before touching what a running job reads or writes. */
#define POOL_CTX_MAX 128u
unsigned long pool_post(tern_pool *p, pool_fn fn, const void *ctx, unsigned size, unsigned nparts, int overlap);
/* Wait until every posted job is complete. */
void pool_join(tern_pool *p);
/* 1 if the posted job gen is complete (0: none), without waiting. */
int pool_done(tern_pool *p, unsigned long gen);
/* Background work for the workers while no job runs: fn(ctx, 1) runs one piece if one is ready and returns 1 if
 * it ran one; fn(ctx, 0) only says whether one is ready (a worker about to sleep asks). The producer calls
 * pool_wake after queueing a piece. A pool_run inside background work runs its parts inline. Set once, before
 * the work starts; fn and ctx must outlive the pool. */
typedef int (*pool_bg_fn)(void *ctx, int run);
void pool_set_background(tern_pool *p, pool_bg_fn fn, void *ctx);
void pool_wake(tern_pool *p);
/* 0 on a thread that is no pool's worker, else 1 + the worker's index in its pool (< pool_threads). */
unsigned pool_thread_id(void);
/* Host threads to use: $TERN_THREADS if set (1..64), else the online CPUs (at most 64). */
unsigned pool_default_threads(void);

#endif
