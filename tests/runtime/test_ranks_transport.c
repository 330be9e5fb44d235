/* The distributed loop of a multi-rank launch (src/sim/rank_run.c, docs/multichip.md "Launches over MPI
 * processes") inside one process: with tern_transport_single as the launch's transport, tern_ranks_run runs each
 * rank alone until it joins the head collective, then every rank up to the last join (instead of one global
 * instruction order); everything must come out as the one-process loop gives it. An SPMD kernel with an
 * all-reduce, VectorE work beside it that shares the core with the collective's neighbours, and an all-gather over
 * replica groups of 4, on 8 ranks of trn1.32xlarge and of 2xtrn1.32xlarge (EFA): every rank's output bits and
 * statistics, every collective's record and the time are identical, functional and timing-only. Errors: a rank
 * whose program lacks the second collective (a deadlock), a rank that gathers a different size (ranks disagree)
 * and two ranks that fail (the earlier in time wins, not the lower rank) give the one-process loop's messages,
 * word for word. (The same loop across processes: test_launch_mpi.sh.) */
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

#define ROWS 64
#define COLS 128
#define RANKS 8
#define SIDE_COLS 2048 /* the work beside the collectives outlasts the all-reduce */
#define SIDE_STEPS 48

static tern_core_config CFG;

/* x -> x*2+1 -> all-reduce -> (+ itself, on GpSimdE) -> all-gather over groups of 4 (of `gather_rows` rows each); w -> six VectorE
 * steps -> side, beside the all-reduce. gather_rows 0: no all-gather. */
static tern_kernel *build(uint64_t gather_rows)
{
    tern_kernel *k = NULL;
    tern_error err;
    if (tern_kernel_create(&CFG, "dist", &k, &err))
        return NULL;
    uint64_t g = gather_rows ? gather_rows : ROWS;
    tern_view x = tern_kernel_input2d(k, "x", TERN_DTYPE_FP32, ROWS, COLS);
    tern_view w = tern_kernel_input2d(k, "w", TERN_DTYPE_FP32, ROWS, SIDE_COLS);
    tern_view pre = tern_kernel_hbm_tensor(k, "pre", TERN_KIO_SCRATCH, TERN_DTYPE_FP32, 2, (uint64_t[]){ROWS, COLS});
    tern_view red = tern_kernel_hbm_tensor(k, "red", TERN_KIO_OUTPUT, TERN_DTYPE_FP32, 2, (uint64_t[]){ROWS, COLS});
    tern_view mid = tern_kernel_hbm_tensor(k, "mid", TERN_KIO_SCRATCH, TERN_DTYPE_FP32, 2, (uint64_t[]){g, COLS});
    tern_view gat = tern_kernel_hbm_tensor(k, "gat", TERN_KIO_OUTPUT, TERN_DTYPE_FP32, 2, (uint64_t[]){g * 4, COLS});
    tern_view side = tern_kernel_output2d(k, "side", TERN_DTYPE_FP32, ROWS, SIDE_COLS);
    tern_view t = tern_kernel_sbuf(k, TERN_DTYPE_FP32, ROWS, COLS, "t");
    tern_view s = tern_kernel_sbuf(k, TERN_DTYPE_FP32, ROWS, SIDE_COLS, "s");
    tern_view u = tern_kernel_sbuf(k, TERN_DTYPE_FP32, (uint32_t)g, COLS, "u");
    tern_kernel_load(k, t, x);
    tern_kernel_tensor_scalar(k, TERN_ENGINE_VECTOR, t, t, TERN_ALU_MULT, 2.0f, TERN_ALU_ADD, 1.0f);
    tern_kernel_store(k, pre, t);
    tern_kernel_collective(k, TERN_KCOLL_ALL_REDUCE, red, pre, TERN_ALU_ADD, 0, 0);
    tern_kernel_load(k, s, w);
    for (int i = 0; i < SIDE_STEPS; i++)
        tern_kernel_tensor_scalar(k, TERN_ENGINE_VECTOR, s, s, TERN_ALU_MULT, i % 2 ? 1.5f : 0.5f, TERN_ALU_ADD,
                                  -0.25f);
    tern_kernel_load(k, u, g == ROWS ? red : tern_view_block(k, red, 0, g, 0, COLS));
    /* GpSimdE shares VectorE's SBUF port on NeuronCore-v2: this step's start depends on the order in which the
     * side work and the collective's completion are committed */
    tern_kernel_tensor_tensor(k, TERN_ENGINE_GPSIMD, u, u, u, TERN_ALU_ADD);
    tern_kernel_store(k, mid, u);
    if (gather_rows)
        tern_kernel_collective(k, TERN_KCOLL_ALL_GATHER, gat, mid, TERN_ALU_ADD, 4, 0);
    tern_kernel_store(k, side, s); /* last in the Sync engine's stream: the loads above do not queue behind it */
    if (tern_kernel_status(k, &err)) {
        fprintf(stderr, "build: %s\n", err.msg);
        tern_kernel_free(k);
        return NULL;
    }
    return k;
}

/* n VectorE steps on a tile of x (wide = 0) or of the 16x wider w: the run passes a small instruction limit early
 * or late in time */
static tern_kernel *build_chain(int wide, int n)
{
    tern_kernel *k = NULL;
    tern_error err;
    if (tern_kernel_create(&CFG, "chain", &k, &err))
        return NULL;
    tern_view x = tern_kernel_input2d(k, "x", TERN_DTYPE_FP32, ROWS, COLS);
    tern_view w = tern_kernel_input2d(k, "w", TERN_DTYPE_FP32, ROWS, SIDE_COLS);
    tern_view o = tern_kernel_output2d(k, "o", TERN_DTYPE_FP32, ROWS, wide ? SIDE_COLS : COLS);
    tern_view t = tern_kernel_sbuf(k, TERN_DTYPE_FP32, ROWS, wide ? SIDE_COLS : COLS, "t");
    tern_kernel_load(k, t, wide ? w : x);
    for (int i = 0; i < n; i++)
        tern_kernel_tensor_scalar(k, TERN_ENGINE_VECTOR, t, t, TERN_ALU_MULT, 0.5f, TERN_ALU_ADD, 1.0f);
    tern_kernel_store(k, o, t);
    if (tern_kernel_status(k, &err)) {
        fprintf(stderr, "build: %s\n", err.msg);
        tern_kernel_free(k);
        return NULL;
    }
    return k;
}

static uint64_t MAX_INSTR; /* 0: the default */

typedef struct {
    int rc;
    char msg[TERN_ERROR_MSG_MAX];
    tern_ranks_result res;
    tern_run_stats stats[RANKS];
    unsigned char *bits[RANKS]; /* red, gat, side of each rank */
    size_t nbits;
} outcome;

static const char *const OUTS[] = {"red", "gat", "side"};

static void launch(const char *machine, unsigned nodes, tern_kernel *const *ks, unsigned nk, tern_sim_mode mode,
                   const tern_transport *tr, outcome *o)
{
    memset(o, 0, sizeof *o);
    tern_error err = {0};
    tern_rt_ranks_opts ro;
    memset(&ro, 0, sizeof ro);
    ro.ranks = RANKS;
    ro.nodes = nodes;
    ro.mode = mode;
    ro.threads = 1;
    ro.transport = tr;
    ro.max_instructions = MAX_INSTR;
    tern_rt_ranks *rt = NULL;
    if (tern_rt_ranks_create(machine, &ro, ks, nk, &rt, &err)) {
        o->rc = 1;
        snprintf(o->msg, sizeof o->msg, "%s", err.msg);
        return;
    }
    float *x = malloc(sizeof *x * ROWS * SIDE_COLS);
    for (unsigned r = 0; x && mode == TERN_MODE_FUNCTIONAL && r < RANKS; r++)
        for (int which = 0; which < 2; which++) {
            size_t n = (size_t)ROWS * (which ? SIDE_COLS : COLS);
            for (size_t i = 0; i < n; i++) {
                uint32_t h = (uint32_t)((r + 1) * 2654435761u) ^ (uint32_t)(i * 40503u) ^ (uint32_t)which * 977u;
                h ^= h >> 13;
                h *= 0x5bd1e995u;
                h ^= h >> 15;
                x[i] = ((float)(h & 0xFFFF) / 65536.0f - 0.5f) * ((h >> 16) % 3 == 0 ? 1e4f : 1.0f);
            }
            CHECK(tern_rt_ranks_write(rt, r, which ? "w" : "x", x, sizeof *x * n, &err) == TERN_OK);
        }
    free(x);
    if (tern_rt_ranks_execute(rt, &o->res, &err)) {
        o->rc = 1;
        snprintf(o->msg, sizeof o->msg, "%s", err.msg);
    } else {
        for (unsigned r = 0; r < RANKS; r++) {
            o->stats[r] = *tern_rt_ranks_stats(rt, r);
            if (mode != TERN_MODE_FUNCTIONAL)
                continue;
            size_t sizes[3] = {(size_t)ROWS * COLS * 4, (size_t)ROWS * 4 * COLS * 4, (size_t)ROWS * SIDE_COLS * 4};
            o->nbits = sizes[0] + sizes[1] + sizes[2];
            o->bits[r] = malloc(o->nbits);
            size_t at = 0;
            for (int i = 0; i < 3; i++) {
                CHECK(tern_rt_ranks_read(rt, r, OUTS[i], o->bits[r] + at, sizes[i], &err) == TERN_OK);
                at += sizes[i];
            }
        }
    }
    tern_rt_ranks_free(rt);
}

static void drop(outcome *o)
{
    tern_ranks_result_free(&o->res);
    for (unsigned r = 0; r < RANKS; r++)
        free(o->bits[r]);
}

static void same(const char *what, const outcome *a, const outcome *b)
{
    CHECK_MSG(a->rc == 0 && b->rc == 0, "%s: failed: '%s' / '%s'", what, a->msg, b->msg);
    if (a->rc || b->rc)
        return;
    CHECK_MSG(a->res.time_ps == b->res.time_ps && a->res.time_ps > 0, "%s: time %lld vs %lld ps", what,
              (long long)a->res.time_ps, (long long)b->res.time_ps);
    CHECK_EQ_INT(b->res.ncolls, a->res.ncolls);
    for (size_t c = 0; c < a->res.ncolls && c < b->res.ncolls; c++) {
        const tern_ranks_coll *x = &a->res.colls[c], *y = &b->res.colls[c];
        CHECK_MSG(x->seq == y->seq && x->op == y->op && x->algo == y->algo && x->count == y->count &&
                      x->start_ps == y->start_ps && x->end_ps == y->end_ps && x->time_ps == y->time_ps,
                  "%s: collective #%zu: %lld..%lld vs %lld..%lld ps", what, c + 1, (long long)x->start_ps,
                  (long long)x->end_ps, (long long)y->start_ps, (long long)y->end_ps);
    }
    for (unsigned r = 0; r < RANKS; r++) {
        CHECK_MSG(!memcmp(&a->stats[r], &b->stats[r], sizeof a->stats[r]), "%s: rank %u's statistics differ (%lld vs "
                  "%lld ps)", what, r, (long long)a->stats[r].time_ps, (long long)b->stats[r].time_ps);
        CHECK_MSG(a->nbits == b->nbits && (!a->nbits || !memcmp(a->bits[r], b->bits[r], a->nbits)),
                  "%s: rank %u's output bits differ", what, r);
    }
}

int main(void)
{
    tern_error err;
    if (tern_core_config_load("trn1.32xlarge", &CFG, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    const tern_transport *one = tern_transport_single();
    tern_kernel *k = build(ROWS), *shortk = build(0), *half = build(ROWS / 2);
    CHECK(k && shortk && half);
    if (!k || !shortk || !half)
        return check_report();
    static const struct {
        const char *machine;
        unsigned nodes;
    } M[] = {{"trn1.32xlarge", 0}, {"2xtrn1.32xlarge", 2}};
    for (size_t m = 0; m < 2; m++)
        for (int timing = 0; timing < 2; timing++) {
            char name[96];
            snprintf(name, sizeof name, "%s %s", M[m].machine, timing ? "timing-only" : "functional");
            TEST_BEGIN(name);
            tern_sim_mode mode = timing ? TERN_MODE_TIMING_ONLY : TERN_MODE_FUNCTIONAL;
            outcome a, b;
            launch(M[m].machine, M[m].nodes, &k, 1, mode, NULL, &a);
            launch(M[m].machine, M[m].nodes, &k, 1, mode, one, &b);
            same(name, &a, &b);
            CHECK_EQ_INT(a.res.ncolls, 2);
            printf("%s: %lld ps, collectives %lld..%lld, %lld..%lld ps\n", name, (long long)a.res.time_ps,
                   a.res.ncolls > 1 ? (long long)a.res.colls[0].start_ps : 0LL,
                   a.res.ncolls > 1 ? (long long)a.res.colls[0].end_ps : 0LL,
                   a.res.ncolls > 1 ? (long long)a.res.colls[1].start_ps : 0LL,
                   a.res.ncolls > 1 ? (long long)a.res.colls[1].end_ps : 0LL);
            drop(&a);
            drop(&b);
        }
    /* errors: the same words from both loops */
    TEST_BEGIN("errors");
    tern_kernel *ks[RANKS];
    for (unsigned r = 0; r < RANKS; r++)
        ks[r] = r == 5 ? shortk : k;
    outcome a, b;
    launch("trn1.32xlarge", 0, ks, RANKS, TERN_MODE_FUNCTIONAL, NULL, &a);
    launch("trn1.32xlarge", 0, ks, RANKS, TERN_MODE_FUNCTIONAL, one, &b);
    CHECK(a.rc && b.rc);
    CHECK_STR_CONTAINS(a.msg, "ranks 0, 1, 2, 3, 4, 6, 7 joined, but these ranks never join it (a deadlock): rank 5");
    CHECK_MSG(!strcmp(a.msg, b.msg), "deadlock: '%s' vs '%s'", a.msg, b.msg);
    drop(&a);
    drop(&b);
    for (unsigned r = 0; r < RANKS; r++)
        ks[r] = r == 2 ? half : k;
    launch("trn1.32xlarge", 0, ks, RANKS, TERN_MODE_FUNCTIONAL, NULL, &a);
    launch("trn1.32xlarge", 0, ks, RANKS, TERN_MODE_FUNCTIONAL, one, &b);
    CHECK(a.rc && b.rc);
    CHECK_STR_CONTAINS(a.msg, "ranks disagree on the count");
    CHECK_MSG(!strcmp(a.msg, b.msg), "disagreement: '%s' vs '%s'", a.msg, b.msg);
    drop(&a);
    drop(&b);
    /* two ranks pass the instruction limit: rank 3 late in time, rank 6 early; both loops name rank 6 (the
     * distributed one still runs ranks after rank 3's failure, up to it) */
    tern_kernel *late = build_chain(1, 40), *early = build_chain(0, 40);
    CHECK(late && early);
    for (unsigned r = 0; r < RANKS; r++)
        ks[r] = r == 3 ? late : r == 6 ? early : k;
    MAX_INSTR = 30;
    launch("trn1.32xlarge", 0, ks, RANKS, TERN_MODE_FUNCTIONAL, NULL, &a);
    launch("trn1.32xlarge", 0, ks, RANKS, TERN_MODE_FUNCTIONAL, one, &b);
    MAX_INSTR = 0;
    CHECK(a.rc && b.rc);
    CHECK_STR_CONTAINS(a.msg, "rank 6: run: more than 30 instructions executed");
    CHECK_MSG(!strcmp(a.msg, b.msg), "the earliest failure: '%s' vs '%s'", a.msg, b.msg);
    drop(&a);
    drop(&b);
    tern_kernel_free(late);
    tern_kernel_free(early);
    tern_kernel_free(k);
    tern_kernel_free(shortk);
    tern_kernel_free(half);
    return check_report();
}
