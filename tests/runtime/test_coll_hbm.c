/* A kernel's collectives share each rank's HBM with its own DMA (src/sim/rank_run.c, schedule.c; docs/multichip.md
 * "Collectives and the kernel's DMA share the HBM"). On 2 ranks of trn1.32xlarge (one chip, a core and an HBM stack
 * each), timing-only: an fp32 all-reduce of 4 MiB (ring) and an HBM-to-HBM copy of 32 MiB, alone and together.
 * The collective needs work = 2.5 x 4 MiB / (the core's HBM bandwidth) of its HBM (a reducing pull of 2 MiB: 2 MiB
 * read by the peer, 4 MiB read and written here; a copy of 2 MiB each way) over its data window, the last span_ps
 * of its time; f = work / span.
 * - copy first, covering the whole window: the collective is delayed by f x span = work, exactly; the copy keeps
 *   its time;
 * - collective first, the copy issued behind it and outlasting it: the collective keeps its time; the copy's HBM
 *   work inside the window progresses at 1 / (1 + f), so the copy ends later by span x f / (1 + f) (and by the
 *   collective's trigger, which it is issued behind);
 * - a program whose copy ends before the collective's window keeps the collective's time to the picosecond.
 * The same picoseconds with 2 host threads and through the distributed loop (tern_transport_single). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tern/collective.h"
#include "tern/kernel.h"
#include "tern/kernel_lib.h"
#include "tern/runtime.h"
#include "tern/transport.h"

#define RANKS 2
#define CROWS 128
#define CCOLS 8192 /* 128 x 8192 fp32: 4 MiB all-reduced */
#define BROWS 1024 /* 1024 x 8192 fp32: 32 MiB copied */

static tern_core_config CFG;

enum { COLL = 1, COPY = 2, COPY_FIRST = 4, SMALL_COPY = 8 };

static tern_kernel *build(int what)
{
    tern_kernel *k = NULL;
    tern_error err;
    if (tern_kernel_create(&CFG, "hbm", &k, &err))
        return NULL;
    tern_view x = tern_kernel_input2d(k, "x", TERN_DTYPE_FP32, CROWS, CCOLS);
    tern_view red = tern_kernel_hbm_tensor(k, "red", TERN_KIO_OUTPUT, TERN_DTYPE_FP32, 2, (uint64_t[]){CROWS, CCOLS});
    uint64_t rows = (what & SMALL_COPY) ? 16 : BROWS;
    tern_view b = tern_kernel_input2d(k, "b", TERN_DTYPE_FP32, rows, CCOLS);
    tern_view c = tern_kernel_hbm_tensor(k, "c", TERN_KIO_OUTPUT, TERN_DTYPE_FP32, 2, (uint64_t[]){rows, CCOLS});
    if ((what & COPY) && (what & COPY_FIRST))
        tern_kernel_dma_copy(k, c, b, 0);
    if (what & COLL)
        tern_kernel_collective(k, TERN_KCOLL_ALL_REDUCE, red, x, TERN_ALU_ADD, 0, TERN_ALGO_RING);
    if ((what & COPY) && !(what & COPY_FIRST))
        tern_kernel_dma_copy(k, c, b, 0);
    if (tern_kernel_status(k, &err)) {
        fprintf(stderr, "build: %s\n", err.msg);
        tern_kernel_free(k);
        return NULL;
    }
    return k;
}

typedef struct {
    int rc;
    int64_t time_ps;
    size_t ncolls;
    tern_ranks_coll coll;
} outcome;

static outcome launch(int what, unsigned threads, const tern_transport *tr)
{
    outcome o;
    memset(&o, 0, sizeof o);
    tern_error err = {0};
    tern_kernel *k = build(what);
    CHECK(k != NULL);
    if (!k) {
        o.rc = 1;
        return o;
    }
    tern_rt_ranks_opts ro;
    memset(&ro, 0, sizeof ro);
    ro.ranks = RANKS;
    ro.mode = TERN_MODE_TIMING_ONLY;
    ro.threads = threads;
    ro.transport = tr;
    tern_rt_ranks *rt = NULL;
    tern_ranks_result res;
    memset(&res, 0, sizeof res);
    if (tern_rt_ranks_create("trn1.32xlarge", &ro, &k, 1, &rt, &err) || tern_rt_ranks_execute(rt, &res, &err)) {
        fprintf(stderr, "launch %d: %s\n", what, err.msg);
        o.rc = 1;
    } else {
        o.time_ps = res.time_ps;
        o.ncolls = res.ncolls;
        if (res.ncolls)
            o.coll = res.colls[0];
    }
    tern_ranks_result_free(&res);
    tern_rt_ranks_free(rt);
    tern_kernel_free(k);
    return o;
}

int main(void)
{
    tern_error err;
    if (tern_core_config_load("trn1.32xlarge", &CFG, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    outcome coll = launch(COLL, 1, NULL), copy = launch(COPY, 1, NULL);
    outcome first = launch(COLL | COPY | COPY_FIRST, 1, NULL), behind = launch(COLL | COPY, 1, NULL);
    outcome small = launch(COLL | COPY | COPY_FIRST | SMALL_COPY, 1, NULL);
    CHECK(!coll.rc && !copy.rc && !first.rc && !behind.rc && !small.rc);
    CHECK(coll.ncolls == 1 && first.ncolls == 1 && behind.ncolls == 1 && small.ncolls == 1);
    CHECK_EQ_INT((long long)coll.coll.hbm_delay_ps, 0);

    /* the collective alone: the fabric's figure (tern_collective_time) */
    tern_rt_ranks_opts ro;
    memset(&ro, 0, sizeof ro);
    ro.ranks = RANKS;
    ro.mode = TERN_MODE_TIMING_ONLY;
    tern_rt_ranks *rt = NULL;
    tern_kernel *k = build(COLL);
    CHECK(tern_rt_ranks_create("trn1.32xlarge", &ro, &k, 1, &rt, &err) == TERN_OK);
    tern_coll_desc d;
    memset(&d, 0, sizeof d);
    d.op = TERN_COLL_ALL_REDUCE;
    d.dtype = TERN_DTYPE_FP32;
    d.count = (uint64_t)CROWS * CCOLS;
    d.algo = TERN_ALGO_RING;
    tern_coll_result cr;
    CHECK(tern_collective_time(tern_rt_ranks_fabric(rt), &d, &cr, &err) == TERN_OK);
    tern_rt_ranks_free(rt);
    tern_kernel_free(k);
    CHECK_EQ_INT((long long)coll.coll.time_ps, (long long)cr.time_ps);

    double bw = CFG.timing.hbm_bandwidth; /* the core's HBM (one stack of trainium1's 820 GiB/s) */
    double span = (double)cr.span_ps, work = 2.5 * (double)d.count * 4 / bw * 1e12, f = work / span;
    printf("all-reduce alone %.3f us (data window %.3f us), needs %.3f us of a %.1f GB/s stack: f = %.3f\n",
           cr.time_ps / 1e6, span / 1e6, work / 1e6, bw / 1e9, f);
    CHECK(f > 0.2 && f < 0.5);

    /* copy first: the collective waits f x span = work; the copy (the program's end) keeps its time */
    int64_t want = (int64_t)llround(work);
    printf("copy first: all-reduce %.3f us (+%.3f us, expected +%.3f), program %.3f us (copy alone %.3f us)\n",
           first.coll.time_ps / 1e6, (double)first.coll.hbm_delay_ps / 1e6, work / 1e6, first.time_ps / 1e6,
           copy.time_ps / 1e6);
    CHECK_MSG(llabs((long long)first.coll.hbm_delay_ps - want) <= 2, "delay %llu ps, expected %lld",
              (unsigned long long)first.coll.hbm_delay_ps, (long long)want);
    CHECK_EQ_INT((long long)first.coll.time_ps, (long long)(cr.time_ps + first.coll.hbm_delay_ps));
    CHECK_EQ_INT((long long)(first.coll.end_ps - first.coll.start_ps), (long long)first.coll.time_ps);
    CHECK(first.time_ps >= copy.time_ps && first.time_ps > coll.time_ps);

    /* collective first: it keeps its time; the copy behind it ends later by span x f / (1 + f) */
    CHECK_EQ_INT((long long)behind.coll.time_ps, (long long)cr.time_ps);
    CHECK_EQ_INT((long long)behind.coll.hbm_delay_ps, 0);
    /* (the copy is triggered when the collective's trigger ends, its start_ps, instead of at 0) */
    int64_t grow = behind.time_ps - copy.time_ps - behind.coll.start_ps, want2 = (int64_t)llround(span * f / (1 + f));
    printf("collective first: program %.3f us, the copy +%.3f us (expected +%.3f)\n", behind.time_ps / 1e6,
           grow / 1e6, want2 / 1e6);
    CHECK_MSG(llabs((long long)(grow - want2)) <= 3, "the copy grew %lld ps, expected %lld", (long long)grow,
              (long long)want2);
    CHECK(behind.time_ps > coll.time_ps);

    /* a copy done before the window opens: nothing changes */
    CHECK_EQ_INT((long long)small.coll.time_ps, (long long)cr.time_ps);
    CHECK_EQ_INT((long long)small.coll.hbm_delay_ps, 0);

    /* deterministic: 2 host threads, and the distributed loop in one process */
    for (int w = 0; w < 2; w++) {
        int what = COLL | COPY | (w ? 0 : COPY_FIRST);
        const outcome *ref = w ? &behind : &first;
        outcome t2 = launch(what, 2, NULL), ds = launch(what, 1, tern_transport_single());
        CHECK(!t2.rc && !ds.rc);
        CHECK_EQ_INT((long long)t2.time_ps, (long long)ref->time_ps);
        CHECK_EQ_INT((long long)ds.time_ps, (long long)ref->time_ps);
        CHECK_EQ_INT((long long)t2.coll.end_ps, (long long)ref->coll.end_ps);
        CHECK_EQ_INT((long long)ds.coll.end_ps, (long long)ref->coll.end_ps);
    }
    return check_report();
}
