/* Fork-join pool for the simulator's hot paths (matmul tiles). A job is a function and a part count. Each thread
 * owns a contiguous range of the parts, the same range for every job of that size, and takes its own parts from
 * the front; a thread whose range is done takes the others' from the back. So in a sequence of instructions over
 * the same operands (a layer's accumulating matmuls) a thread computes the same output columns each time, and
 * their PSUM lines stay in its core's cache instead of moving between cores with every instruction (measured: 2
 * to 4 % of a model's host time, docs/performance.md). Each range is one atomic word holding the job's
 * generation, the range's end and its next part, so a worker that wakes late can never run a part of a job that
 * has moved on, and the caller never waits for a worker that has not started: it claims every part nobody else
 * has and waits only for parts in flight. That matters on a shared host, where a worker may be descheduled for
 * milliseconds. Which thread runs a part never matters to a result: each part writes disjoint outputs computed
 * the same way. A posted job (pool_post) does not make its caller wait for those last parts: the caller goes on
 * (the background lane decides what may run beside it) and may post one more job, which workers take up as they
 * finish the first; a job's slot (function, context, part counter) is reused two jobs later, after a wait. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sim/host_threads.h"

#if defined(__x86_64__) || defined(__i386__)
#define cpu_relax() __builtin_ia32_pause()
#else
#define cpu_relax() ((void)0)
#endif

/* range word: generation (24 bits) | end (20 bits) | next part (20 bits) */
#define PART_BITS 20u
#define PART_MASK ((1ull << PART_BITS) - 1)
#define GEN_MASK ((1ull << 24) - 1)
#define MAX_PARTS ((unsigned)PART_MASK)

typedef struct {
    struct tern_pool *p;
    unsigned id;
} worker_arg;

/* One thread's range of a job's parts: generation (24 bits) | end (20 bits) | next (20 bits), a cache line each. Its
 * owner takes parts from the front (next), others from the back (end), both by compare-and-swap on the one word. */
typedef struct {
    _Alignas(64) atomic_ullong w;
} range_word;

/* A job: while it may have parts running (pool_post leaves it so) the slot is not reused; job g + 2 first waits for
 * job g (pool_post) and a job that must not overlap any other first waits for both (pool_run). */
typedef struct {
    _Alignas(64) pool_fn fn;
    void *ctx;
    unsigned nparts;
    unsigned long gen;
    int pending;       /* posted, not yet seen complete by the caller */
    int posted;        /* by pool_post (its caller may go on while workers run parts) */
    atomic_uint done;  /* parts finished */
    _Alignas(64) unsigned char ctx_buf[POOL_CTX_MAX]; /* a posted job's context */
} job_slot;

struct tern_pool {
    unsigned nthreads; /* including the caller */
    pthread_t *workers;
    worker_arg *args;
    pthread_mutex_t mu;
    pthread_cond_t work_cv;
    job_slot slots[2];        /* job g in slots[g % 2] */
    unsigned long generation; /* the caller's count of jobs */
    range_word *ranges;       /* one per thread */
    atomic_ulong gen_atomic; /* generation of the newest job, for workers */
    atomic_int sleepers;     /* workers blocked on work_cv */
    atomic_int stop;
    _Atomic(pool_bg_fn) bg;  /* background work served between jobs (pool_set_background), or NULL */
    _Atomic(void *) bg_ctx;
    long hold_us; /* test aid (TERN_POOL_HOLD_US): a worker sleeps this long before each part of a posted job, and
                     pool_post's caller takes only its own range (the rest at its next post or join) */
};

/* On the pool's own threads: 1 + the worker's index (pool_thread_id); a pool_run there (from background work) runs
 * its parts inline. */
static _Thread_local unsigned on_worker;

/* Claim and run parts of job gen: the thread's own range from the front, then the others' from the back. */
static void run_ranges_n(tern_pool *p, unsigned long gen, unsigned self, unsigned nranges)
{
    const unsigned long long g = (unsigned long long)(gen & GEN_MASK);
    for (unsigned k = 0; k < nranges; k++) {
        unsigned r = (self + k) % p->nthreads;
        atomic_ullong *w = &p->ranges[r].w;
        for (;;) {
            unsigned long long c = atomic_load_explicit(w, memory_order_acquire);
            if ((c >> (2 * PART_BITS)) != g)
                return; /* the job has moved on: this late worker has nothing of it to do */
            unsigned end = (unsigned)((c >> PART_BITS) & PART_MASK), next = (unsigned)(c & PART_MASK);
            if (next >= end)
                break;
            unsigned i;
            unsigned long long nc;
            if (k == 0) {
                i = next;
                nc = c + 1;
            } else {
                i = end - 1;
                nc = c - (1ull << PART_BITS);
            }
            if (!atomic_compare_exchange_weak_explicit(w, &c, nc, memory_order_acq_rel, memory_order_relaxed))
                continue;
            /* the slot is not reused while part i is unfinished, so fn, ctx and nparts are this job's */
            job_slot *js = &p->slots[gen & 1];
            if (p->hold_us && self && js->posted) {
                struct timespec ts = {p->hold_us / 1000000, p->hold_us % 1000000 * 1000};
                nanosleep(&ts, NULL);
            }
            js->fn(js->ctx, i, js->nparts);
            atomic_fetch_add_explicit(&js->done, 1, memory_order_release);
        }
    }
}

static void run_ranges(tern_pool *p, unsigned long gen, unsigned self) { run_ranges_n(p, gen, self, p->nthreads); }

/* Polls for new work before sleeping (a few tens of microseconds): jobs arrive in bursts while a matmul
 * runs; between bursts the worker sleeps rather than take a core the rest of the host may need. */
#define SPIN_POLLS 1000

static int bg_call(tern_pool *p, int run)
{
    pool_bg_fn fn = atomic_load_explicit(&p->bg, memory_order_acquire);
    return fn ? fn(atomic_load_explicit(&p->bg_ctx, memory_order_relaxed), run) : 0;
}

static void *worker(void *arg)
{
    worker_arg *wa = arg;
    tern_pool *p = wa->p;
    unsigned long seen = 0;
    on_worker = wa->id;
    while (!atomic_load(&p->stop)) {
        unsigned long g = atomic_load_explicit(&p->gen_atomic, memory_order_acquire);
        for (unsigned i = 0; i < SPIN_POLLS && g == seen; i++) {
            if (bg_call(p, 1))
                i = 0; /* background work done: keep polling */
            else
                cpu_relax();
            g = atomic_load_explicit(&p->gen_atomic, memory_order_acquire);
        }
        if (g == seen) {
            pthread_mutex_lock(&p->mu);
            atomic_fetch_add(&p->sleepers, 1);
            while (!atomic_load(&p->stop) && (g = atomic_load(&p->gen_atomic)) == seen && !bg_call(p, 0))
                pthread_cond_wait(&p->work_cv, &p->mu);
            atomic_fetch_sub(&p->sleepers, 1);
            pthread_mutex_unlock(&p->mu);
            if (atomic_load(&p->stop))
                break;
        }
        seen = g;
        run_ranges(p, g, wa->id);
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
    tern_pool *p = aligned_alloc(_Alignof(tern_pool), sizeof *p); /* its job slots are cache-line aligned */
    if (!p)
        return NULL;
    memset(p, 0, sizeof *p);
    p->nthreads = threads ? threads : 1;
    const char *hold = getenv("TERN_POOL_HOLD_US");
    p->hold_us = hold ? strtol(hold, NULL, 10) : 0;
    if (p->hold_us < 0 || p->hold_us > 1000000)
        p->hold_us = 0;
    if (p->nthreads > 1) {
        p->ranges = aligned_alloc(64, sizeof *p->ranges * p->nthreads);
        if (!p->ranges)
            p->nthreads = 1; /* run on the caller alone */
        else
            for (unsigned i = 0; i < p->nthreads; i++)
                atomic_init(&p->ranges[i].w, 0);
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->work_cv, NULL);
    if (p->nthreads > 1) {
        p->workers = calloc(p->nthreads - 1, sizeof *p->workers);
        p->args = calloc(p->nthreads - 1, sizeof *p->args);
        if (!p->workers || !p->args) {
            p->nthreads = 1;
            return p;
        }
        for (unsigned i = 0; i + 1 < p->nthreads; i++)
            p->args[i] = (worker_arg){p, i + 1};
        for (unsigned i = 0; i + 1 < p->nthreads; i++)
            if (pthread_create(&p->workers[i], NULL, worker, &p->args[i]) != 0) {
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
    pool_join(p);
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->stop, 1);
    pthread_cond_broadcast(&p->work_cv);
    pthread_mutex_unlock(&p->mu);
    for (unsigned i = 0; i + 1 < p->nthreads; i++)
        pthread_join(p->workers[i], NULL);
    free(p->workers);
    free(p->args);
    free(p->ranges);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->work_cv);
    free(p);
}

unsigned pool_threads(const tern_pool *p) { return p ? p->nthreads : 1; }

unsigned pool_thread_id(void) { return on_worker; }

void pool_set_background(tern_pool *p, pool_bg_fn fn, void *ctx)
{
    if (!p)
        return;
    atomic_store_explicit(&p->bg_ctx, ctx, memory_order_relaxed);
    atomic_store_explicit(&p->bg, fn, memory_order_release);
}

void pool_wake(tern_pool *p)
{
    if (p && atomic_load(&p->sleepers) > 0) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->work_cv);
        pthread_mutex_unlock(&p->mu);
    }
}

/* Spin until every part of slot js's job is done; the caller then knows it complete. */
static void wait_slot(tern_pool *p, job_slot *js)
{
    if (!js->pending)
        return;
    if (js->gen == p->generation)
        run_ranges(p, js->gen, 0); /* parts nobody has claimed (pool_post's caller may leave the others' ranges) */
    for (unsigned spins = 0; atomic_load_explicit(&js->done, memory_order_acquire) != js->nparts; spins++) {
        if (spins < 4096)
            cpu_relax();
        else
            sched_yield();
    }
    js->pending = 0;
}

void pool_join(tern_pool *p)
{
    if (p && p->ranges) {
        wait_slot(p, &p->slots[0]);
        wait_slot(p, &p->slots[1]);
    }
}

int pool_done(tern_pool *p, unsigned long gen)
{
    if (!p || !p->ranges || gen == 0)
        return 1;
    job_slot *js = &p->slots[gen & 1];
    if (js->gen != gen || !js->pending)
        return 1; /* an older job of the slot: complete before the slot was reused */
    if (atomic_load_explicit(&js->done, memory_order_acquire) != js->nparts)
        return 0;
    js->pending = 0;
    return 1;
}

/* Publish job (fn, ctx, nparts) in the next slot (whose previous job is complete) and run the parts this thread can
 * claim (own_only: its own range only); returns its slot. */
static job_slot *start_job(tern_pool *p, pool_fn fn, void *ctx, unsigned nparts, int own_only)
{
    unsigned long gen = ++p->generation;
    job_slot *js = &p->slots[gen & 1];
    js->fn = fn;
    js->ctx = ctx;
    js->nparts = nparts;
    js->gen = gen;
    js->pending = 1;
    atomic_store_explicit(&js->done, 0, memory_order_relaxed);
    /* thread r's range: parts [nparts * r / T, nparts * (r + 1) / T), the same for every job of this size, so a
     * thread computes the same columns (and writes the same PSUM lines) in each instruction of a sequence */
    unsigned long long g = (unsigned long long)(gen & GEN_MASK) << (2 * PART_BITS);
    for (unsigned r = 0; r < p->nthreads; r++) {
        unsigned long long a = (unsigned long long)nparts * r / p->nthreads,
                           b = (unsigned long long)nparts * (r + 1) / p->nthreads;
        atomic_store_explicit(&p->ranges[r].w, g | (b << PART_BITS) | a, memory_order_relaxed);
    }
    atomic_store(&p->gen_atomic, gen); /* publishes the slot and the ranges (release) */
    if (atomic_load(&p->sleepers) > 0) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->work_cv);
        pthread_mutex_unlock(&p->mu);
    }
    run_ranges_n(p, gen, 0, own_only ? 1 : p->nthreads);
    return js;
}

void pool_run(tern_pool *p, pool_fn fn, void *ctx, unsigned nparts)
{
    if (!p || p->nthreads <= 1 || nparts <= 1 || nparts > MAX_PARTS || on_worker) {
        if (!on_worker)
            pool_join(p); /* a job left running may read or write what these parts do */
        for (unsigned i = 0; i < nparts; i++)
            fn(ctx, i, nparts);
        return;
    }
    pool_join(p);
    p->slots[(p->generation + 1) & 1].posted = 0;
    /* every part is claimed on return: wait for those still running on workers */
    wait_slot(p, start_job(p, fn, ctx, nparts, 0));
}

unsigned long pool_post(tern_pool *p, pool_fn fn, const void *ctx, unsigned size, unsigned nparts, int overlap)
{
    if (!p || p->nthreads <= 1 || nparts <= 1 || nparts > MAX_PARTS || on_worker || size > POOL_CTX_MAX) {
        pool_run(p, fn, (void *)ctx, nparts);
        return 0;
    }
    if (overlap) {
        wait_slot(p, &p->slots[(p->generation + 1) & 1]); /* the job before the last: its slot is the next */
        if (p->generation && p->slots[p->generation & 1].pending)
            run_ranges(p, p->generation, 0); /* the last job's unclaimed parts: the new job's ranges replace its */
    } else
        pool_join(p);
    job_slot *js = &p->slots[(p->generation + 1) & 1];
    memcpy(js->ctx_buf, ctx, size);
    js->posted = 1; /* before the job is published: start_job keeps it */
    /* with the test aid, the caller leaves the workers their ranges, so that the job is still running on return */
    js = start_job(p, fn, js->ctx_buf, nparts, p->hold_us != 0);
    return pool_done(p, js->gen) ? 0 : js->gen;
}
