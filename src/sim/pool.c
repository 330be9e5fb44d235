/* Fork-join pool for the simulator's hot paths (matmul tiles). Workers sleep on a condition variable; a job
 * is a function and a part count; parts are claimed with an atomic counter. Which thread runs a part never
 * matters: each part writes disjoint outputs computed the same way. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "sim/pool.h"

struct tern_pool {
    unsigned nthreads; /* including the caller */
    pthread_t *workers;
    pthread_mutex_t mu;
    pthread_cond_t work_cv, done_cv;
    unsigned long generation;
    int stop;
    pool_fn fn;
    void *ctx;
    unsigned nparts;
    atomic_uint next;
    unsigned active; /* workers still in the current job */
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

static void *worker(void *arg)
{
    tern_pool *p = arg;
    unsigned long seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->stop && p->generation == seen)
            pthread_cond_wait(&p->work_cv, &p->mu);
        if (p->stop)
            break;
        seen = p->generation;
        pthread_mutex_unlock(&p->mu);
        run_parts(p);
        pthread_mutex_lock(&p->mu);
        if (--p->active == 0)
            pthread_cond_signal(&p->done_cv);
    }
    pthread_mutex_unlock(&p->mu);
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
    pthread_cond_init(&p->done_cv, NULL);
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
    pthread_cond_broadcast(&p->work_cv);
    pthread_mutex_unlock(&p->mu);
    for (unsigned i = 0; i + 1 < p->nthreads; i++)
        pthread_join(p->workers[i], NULL);
    free(p->workers);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->work_cv);
    pthread_cond_destroy(&p->done_cv);
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
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->ctx = ctx;
    p->nparts = nparts;
    atomic_store(&p->next, 0);
    p->active = p->nthreads - 1;
    p->generation++;
    pthread_cond_broadcast(&p->work_cv);
    pthread_mutex_unlock(&p->mu);
    run_parts(p);
    pthread_mutex_lock(&p->mu);
    while (p->active > 0)
        pthread_cond_wait(&p->done_cv, &p->mu);
    pthread_mutex_unlock(&p->mu);
}
