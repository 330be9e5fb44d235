/* Fork-join pool for the simulator's hot paths (matmul tiles). Workers sleep on a condition variable; a job
 * is a function and a part count; parts are claimed with an atomic counter. Which thread runs a part never
 * matters: each part writes disjoint outputs computed the same way. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "sim/pool.h"

#if defined(__x86_64__) || defined(__i386__)
#define cpu_relax() __builtin_ia32_pause()
#else
#define cpu_relax() ((void)0)
#endif

struct tern_pool {
    unsigned nthreads; /* including the caller */
    pthread_t *workers;
    pthread_mutex_t mu;
    pthread_cond_t work_cv;
    unsigned long generation;
    int stop;
    pool_fn fn;
    void *ctx;
    unsigned nparts;
    atomic_uint next;
    atomic_ulong gen_atomic;   /* generation, for spinning workers */
    atomic_int stop_atomic;
    atomic_uint active_atomic; /* workers still in the current job */
};

static void run_parts(tern_pool *p)
{
    for (;;) {
        unsigned i = atomic_fetch_add(&p->next, 1);
        if (i >= p->nparts)
            return;
        p->fn(p->ctx, i, p->nparts);
    }
}

/* Spin this many polls for new work before sleeping: jobs arrive every few tens of microseconds while a
 * program runs, and a futex sleep/wake per job costs as much as the job's own overhead. */
#define SPIN_POLLS 20000

static void *worker(void *arg)
{
    tern_pool *p = arg;
    unsigned long seen = 0;
    for (;;) {
        /* Spin first (no lock: the generation is published with a release store), sleep only when idle. */
        unsigned long g = seen;
        for (unsigned i = 0; i < SPIN_POLLS && g == seen && !atomic_load_explicit(&p->stop_atomic, memory_order_relaxed);
             i++) {
            g = atomic_load_explicit(&p->gen_atomic, memory_order_acquire);
            if (g == seen)
                cpu_relax();
        }
        if (g == seen) {
            pthread_mutex_lock(&p->mu);
            while (!p->stop && (g = atomic_load_explicit(&p->gen_atomic, memory_order_acquire)) == seen)
                pthread_cond_wait(&p->work_cv, &p->mu);
            int stop = p->stop;
            pthread_mutex_unlock(&p->mu);
            if (stop)
                break;
        }
        if (atomic_load_explicit(&p->stop_atomic, memory_order_relaxed))
            break;
        seen = g;
        run_parts(p);
        atomic_fetch_sub_explicit(&p->active_atomic, 1, memory_order_release);
    }
    return NULL;
}

unsigned pool_default_threads(void)
{
    const char *env = getenv("TERN_THREADS");
    if (env && *env) {
        long v = strtol(env, NULL, 10);
        if (v >= 1 && v <= 64)
            return (unsigned)v;
    }
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1)
        n = 1;
    return n > 64 ? 64u : (unsigned)n;
}

tern_pool *pool_create(unsigned threads)
{
    tern_pool *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->nthreads = threads ? threads : 1;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->work_cv, NULL);
    if (p->nthreads > 1) {
        p->workers = calloc(p->nthreads - 1, sizeof *p->workers);
        if (!p->workers) {
            p->nthreads = 1;
            return p;
        }
        for (unsigned i = 0; i + 1 < p->nthreads; i++)
            if (pthread_create(&p->workers[i], NULL, worker, p) != 0) {
                p->nthreads = i + 1; /* run with what started */
                break;
            }
    }
    return p;
}

void pool_free(tern_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    atomic_store(&p->stop_atomic, 1);
    pthread_cond_broadcast(&p->work_cv);
    pthread_mutex_unlock(&p->mu);
    for (unsigned i = 0; i + 1 < p->nthreads; i++)
        pthread_join(p->workers[i], NULL);
    free(p->workers);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->work_cv);
    free(p);
}

unsigned pool_threads(const tern_pool *p) { return p ? p->nthreads : 1; }

void pool_run(tern_pool *p, pool_fn fn, void *ctx, unsigned nparts)
{
    if (!p || p->nthreads <= 1 || nparts <= 1) {
        for (unsigned i = 0; i < nparts; i++)
            fn(ctx, i, nparts);
        return;
    }
    p->fn = fn;
    p->ctx = ctx;
    p->nparts = nparts;
    atomic_store(&p->next, 0);
    atomic_store(&p->active_atomic, p->nthreads - 1);
    /* Publish under the lock so a worker going to sleep cannot miss it; spinning workers see the store at once. */
    pthread_mutex_lock(&p->mu);
    p->generation++;
    atomic_store_explicit(&p->gen_atomic, p->generation, memory_order_release);
    pthread_cond_broadcast(&p->work_cv);
    pthread_mutex_unlock(&p->mu);
    run_parts(p);
    /* Workers finish their last part within a job's time: wait by polling, yielding the CPU if it takes long
     * (a worker may be descheduled when the host is busy: spinning against it would only delay it). */
    for (unsigned spins = 0; atomic_load_explicit(&p->active_atomic, memory_order_acquire) != 0; spins++) {
        if (spins < 4096)
            cpu_relax();
        else
            sched_yield();
    }
}
