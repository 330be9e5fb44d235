/* The host thread pool (src/sim/host_threads.c): every part of every job runs exactly once, whatever the thread
 * count, the part count and the timing (a worker held up in one part while the others take its range from the
 * back); jobs follow one another with no part of an old job running late in a new one; a thread takes its own
 * range from the front; a pool_run inside a part (on a worker) runs inline; a posted job (pool_post) may still run
 * when its call returns, beside at most the one posted before it, never beside one it must not overlap, and is
 * complete after pool_join or the next pool_run. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "sim/host_threads.h"

enum { MAXP = 1000 };

typedef struct {
    atomic_int runs[MAXP];
    atomic_int order; /* how many parts have started */
    int first_of[MAXP]; /* start position of each part */
    unsigned tid_of[MAXP];
    unsigned nparts;
    unsigned slow_part; /* that part sleeps a while (MAXP: none) */
    atomic_int bad_nparts;
} job;

static void sleep_us(long us)
{
    struct timespec t = {0, us * 1000};
    nanosleep(&t, NULL);
}

static void part_fn(void *ctx, unsigned part, unsigned nparts)
{
    job *j = ctx;
    if (nparts != j->nparts || part >= nparts) {
        atomic_fetch_add(&j->bad_nparts, 1);
        return;
    }
    j->first_of[part] = atomic_fetch_add(&j->order, 1);
    j->tid_of[part] = pool_thread_id();
    if (part == j->slow_part)
        sleep_us(300);
    atomic_fetch_add(&j->runs[part], 1);
}

static void job_init(job *j, unsigned nparts, unsigned slow)
{
    memset(j, 0, sizeof *j);
    j->nparts = nparts;
    j->slow_part = slow;
}

static int all_once(job *j)
{
    for (unsigned i = 0; i < j->nparts; i++)
        if (atomic_load(&j->runs[i]) != 1)
            return 0;
    return atomic_load(&j->bad_nparts) == 0;
}

static void test_every_part_once(void)
{
    TEST_BEGIN("every part of every job once, 1 to 8 threads");
    static job j;
    for (unsigned threads = 1; threads <= 8; threads++) {
        tern_pool *p = pool_create(threads);
        CHECK(p != NULL);
        CHECK_EQ_INT(pool_threads(p), threads);
        int ok = 1;
        /* many jobs back to back, sizes around the thread count and far above it */
        for (unsigned n = 1; n <= 300 && ok; n += n < 20 ? 1 : 37) {
            for (int rep = 0; rep < 20 && ok; rep++) {
                job_init(&j, n, MAXP);
                pool_run(p, part_fn, &j, n);
                ok = all_once(&j);
            }
        }
        CHECK_MSG(ok, "%u threads: a part ran other than once", threads);
        pool_free(p);
    }
}

static void test_slow_part_stolen(void)
{
    TEST_BEGIN("a held-up part: the rest of its range taken by the others, each part once");
    static job j;
    for (unsigned threads = 2; threads <= 4; threads++) {
        tern_pool *p = pool_create(threads);
        for (unsigned slow = 0; slow < 64; slow += 9) {
            job_init(&j, 64, slow);
            pool_run(p, part_fn, &j, 64);
            CHECK_MSG(all_once(&j), "%u threads, slow part %u: a part ran other than once", threads, slow);
        }
        pool_free(p);
    }
}

/* Within one range, the parts one thread ran started in ascending part order if it owns the range (from the
 * front), descending if not (from the back). */
static int ranges_in_order(const job *j, unsigned threads)
{
    for (unsigned r = 0; r < threads; r++) {
        unsigned a = j->nparts * r / threads, b = j->nparts * (r + 1) / threads;
        for (unsigned t = 0; t < threads; t++) {
            int last = -1;
            for (unsigned k = 0; k < b - a; k++) {
                unsigned i = t == r ? a + k : b - 1 - k;
                if (j->tid_of[i] != t)
                    continue;
                if (j->first_of[i] <= last)
                    return 0;
                last = j->first_of[i];
            }
        }
    }
    return 1;
}

static void test_ranges_in_order(void)
{
    TEST_BEGIN("each thread takes its own range from the front, the others' from the back");
    static job j;
    for (unsigned threads = 2; threads <= 3; threads++) {
        tern_pool *p = pool_create(threads);
        int ok = 1;
        for (int rep = 0; rep < 50 && ok; rep++) {
            job_init(&j, 40, rep % 2 ? (unsigned)rep % 40 : MAXP);
            pool_run(p, part_fn, &j, 40);
            ok = all_once(&j) && ranges_in_order(&j, threads);
        }
        CHECK_MSG(ok, "%u threads: parts taken out of their range order", threads);
        pool_free(p);
    }
}

/* A part that itself calls pool_run: on a worker the nested job runs inline. */
typedef struct {
    tern_pool *p;
    atomic_int inner_runs;
} nest;

static void inner_fn(void *ctx, unsigned part, unsigned nparts)
{
    (void)part, (void)nparts;
    atomic_fetch_add(&((nest *)ctx)->inner_runs, 1);
}

static void bg_style_fn(void *ctx, unsigned part, unsigned nparts)
{
    (void)part, (void)nparts;
    nest *n = ctx;
    if (pool_thread_id()) /* only a worker may nest: the caller's pool_run would wait for itself */
        pool_run(n->p, inner_fn, n, 5);
    else
        for (unsigned i = 0; i < 5; i++)
            inner_fn(n, i, 5);
}

static void test_nested_inline(void)
{
    TEST_BEGIN("pool_run on a worker runs inline");
    tern_pool *p = pool_create(3);
    nest n = {p, 0};
    for (int rep = 0; rep < 20; rep++)
        pool_run(p, bg_style_fn, &n, 6);
    CHECK_EQ_INT(atomic_load(&n.inner_runs), 20 * 6 * 5);
    pool_free(p);
}

/* Posted jobs: each part records which jobs were running when it started. */
typedef struct {
    job *j;
    unsigned id;          /* the job's number, from 1 */
    long sleep_caller_us; /* part 0 (the caller's own) sleeps this long, so that a worker claims part 1 */
    long sleep_worker_us; /* part 1 sleeps this long */
} posted_ctx;

static atomic_int active_mask; /* bit id % 30 while one of job id's parts runs */
static atomic_int max_active;  /* most jobs seen running at once */
static atomic_int saw_forbidden; /* a job that must not overlap its predecessor ran beside it */
static unsigned no_overlap_id;   /* that job's id */

static void posted_fn(void *ctx, unsigned part, unsigned nparts)
{
    const posted_ctx *c = ctx;
    int bit = 1 << (c->id % 30);
    int now = atomic_fetch_or(&active_mask, bit) | bit;
    int n = __builtin_popcount((unsigned)now);
    for (int m = atomic_load(&max_active); n > m && !atomic_compare_exchange_weak(&max_active, &m, n);)
        ;
    if (c->id == no_overlap_id && (now & (1 << ((c->id - 1) % 30))))
        atomic_store(&saw_forbidden, 1);
    part_fn(c->j, part, nparts);
    if (part == 0 && c->sleep_caller_us)
        sleep_us(c->sleep_caller_us);
    if (part == 1 && c->sleep_worker_us)
        sleep_us(c->sleep_worker_us);
    atomic_fetch_and(&active_mask, ~bit);
}

static void test_posted(int held)
{
    TEST_BEGIN(held ? "posted jobs with the workers held up (TERN_POOL_HOLD_US: the caller leaves them their ranges)"
                    : "posted jobs: each part once, at most two running, complete after pool_join or pool_run");
    static job js[8];
    if (held)
        setenv("TERN_POOL_HOLD_US", "500", 1); /* read when the pool is made */
    tern_pool *p = pool_create(2);
    unsetenv("TERN_POOL_HOLD_US");
    int left_running = 0, ok = 1;
    for (int rep = 0; rep < 10 && ok; rep++) {
        atomic_store(&max_active, 0);
        no_overlap_id = 6;
        unsigned long gens[8] = {0};
        for (unsigned k = 0; k < 8; k++) {
            job_init(&js[k], 2, MAXP);
            posted_ctx c = {&js[k], k + 1, 2000, k % 2 ? 0 : 8000};
            gens[k] = pool_post(p, posted_fn, &c, sizeof c, 2, k + 1 != no_overlap_id);
            memset(&c, 0, sizeof c); /* the pool kept its own copy */
            left_running += gens[k] != 0;
            if (k >= 2)
                ok &= all_once(&js[k - 2]) && pool_done(p, gens[k - 2]); /* two back: complete */
        }
        pool_join(p);
        for (unsigned k = 0; k < 8; k++)
            ok &= all_once(&js[k]) && pool_done(p, gens[k]);
        ok &= atomic_load(&max_active) <= 2 && !atomic_load(&saw_forbidden);
        /* a pool_run after a posted job: the posted one is complete first */
        job_init(&js[0], 2, MAXP);
        posted_ctx c = {&js[0], 1, 0, 8000};
        unsigned long g = pool_post(p, posted_fn, &c, sizeof c, 2, 1);
        job_init(&js[1], 7, MAXP);
        pool_run(p, part_fn, &js[1], 7);
        ok &= all_once(&js[0]) && all_once(&js[1]) && pool_done(p, g);
    }
    CHECK_MSG(ok, "a posted job ran a part other than once, ran beside more than one job or one it must not "
                  "overlap, or was not complete when it had to be");
    /* a worker holding part 1 for 8 ms while the caller's part 0 takes 2: the call returns before the job ends,
     * once the host has run the worker in time (on a loaded host it may not have: try longer) */
    for (int k = 0; k < 40 && !left_running; k++) {
        job_init(&js[0], 2, MAXP);
        posted_ctx c = {&js[0], 1, 20000, 20000};
        left_running += pool_post(p, posted_fn, &c, sizeof c, 2, 0) != 0;
        pool_join(p);
        CHECK(all_once(&js[0]));
    }
    CHECK_MSG(left_running > 0, "no posted job was still running when pool_post returned");
    if (held) {
        pool_free(p);
        return;
    }
    /* one thread: pool_post runs the job inline and it is complete at once */
    tern_pool *one = pool_create(1);
    job_init(&js[2], 3, MAXP);
    posted_ctx c1 = {&js[2], 3, 0, 0};
    CHECK(pool_post(one, posted_fn, &c1, sizeof c1, 3, 1) == 0);
    CHECK(all_once(&js[2]));
    pool_free(one);
    pool_free(p);
}

int main(void)
{
    test_every_part_once();
    test_slow_part_stolen();
    test_ranges_in_order();
    test_nested_inline();
    test_posted(0);
    test_posted(1);
    return check_report();
}
