/* Collectives inside kernels over a multi-rank launch (issue 13, "Programs"): an SPMD kernel computes, all-reduces
 * (or gathers, scatters) in the kernel, and computes again on the result through the collective's semaphore.
 * The outputs must be bit-identical to the host computation around the collective layer's own host reference
 * (tern_collective_reference, what `tern collective --check` compares with) and to tern_collective_run on the same
 * data, for 2, 4 and 8 ranks of trn1.32xlarge, several algorithms and replica groups; the collective's time must be
 * tern_collective_time's for that size; times and bits must not depend on host threads or timing-only mode. Errors:
 * more ranks than the machine has, ranks that disagree (count, operation), a rank that never joins, a collective
 * without a completion semaphore, a collective on a single core. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "tern/collective.h"
#include "tern/kernel.h"
#include "tern/kernel_lib.h"
#include "tern/runtime.h"

#define ROWS 64
#define COLS 96

static tern_core_config CFG;
static const char *MACHINE = "trn1.32xlarge"; /* the machine and --nodes of check_case */
static unsigned NODES;

/* x [ROWS, COLS] -> pre = x * 2 + 1 -> collective -> red; out = red * 0.5 */
static tern_kernel *build(tern_kernel_coll op, int32_t groups, int algo, uint64_t rows_in, uint64_t rows_out)
{
    tern_kernel *k = NULL;
    tern_error err;
    if (tern_kernel_create(&CFG, "coll", &k, &err))
        return NULL;
    tern_view x = tern_kernel_input2d(k, "x", TERN_DTYPE_FP32, rows_in, COLS);
    tern_view pre = tern_kernel_hbm_tensor(k, "pre", TERN_KIO_SCRATCH, TERN_DTYPE_FP32, 2,
                                           (uint64_t[]){rows_in, COLS});
    tern_view red = tern_kernel_hbm_tensor(k, "red", TERN_KIO_OUTPUT, TERN_DTYPE_FP32, 2,
                                           (uint64_t[]){rows_out, COLS});
    tern_view out = tern_kernel_output2d(k, "out", TERN_DTYPE_FP32, rows_out, COLS);
    tern_view t = tern_kernel_sbuf(k, TERN_DTYPE_FP32, (uint32_t)rows_in, COLS, "t");
    tern_kernel_load(k, t, x);
    tern_kernel_tensor_scalar(k, TERN_ENGINE_VECTOR, t, t, TERN_ALU_MULT, 2.0f, TERN_ALU_ADD, 1.0f);
    tern_kernel_store(k, pre, t);
    tern_kernel_collective(k, op, red, pre, TERN_ALU_ADD, groups, algo);
    tern_view u = tern_kernel_sbuf(k, TERN_DTYPE_FP32, (uint32_t)rows_out, COLS, "u");
    tern_kernel_load(k, u, red);
    tern_kernel_tensor_scalar(k, TERN_ENGINE_VECTOR, u, u, TERN_ALU_MULT, 0.5f, TERN_ALU_BYPASS, 0.0f);
    tern_kernel_store(k, out, u);
    if (tern_kernel_status(k, &err)) {
        fprintf(stderr, "build: %s\n", err.msg);
        tern_kernel_free(k);
        return NULL;
    }
    return k;
}

static float xval(unsigned rank, size_t i)
{
    /* values whose sums depend on the association order (mixed magnitudes) */
    uint32_t h = (uint32_t)(rank * 2654435761u) ^ (uint32_t)(i * 40503u);
    h ^= h >> 13;
    h *= 0x5bd1e995u;
    h ^= h >> 15;
    float m = (float)(h & 0xFFFF) / 65536.0f - 0.5f;
    return m * ((h >> 16) % 3 == 0 ? 1e4f : (h >> 16) % 3 == 1 ? 1.0f : 1e-3f);
}

typedef struct {
    float *red, *out;
    int64_t time_ps;
    int64_t coll_start, coll_end;
    uint64_t coll_time;
    tern_coll_algo algo;
} run_out;

static int run_launch(const char *machine, unsigned ranks, tern_kernel *const *ks, unsigned nk, tern_sim_mode mode,
                      unsigned threads, uint64_t rows_in, uint64_t rows_out, run_out *o, tern_error *err)
{
    tern_rt_ranks_opts ro;
    memset(&ro, 0, sizeof ro);
    ro.ranks = ranks;
    ro.nodes = strcmp(machine, MACHINE) ? 0 : NODES;
    ro.mode = mode;
    ro.threads = threads;
    ro.fill_nan = 1; /* a read that does not wait for the collective would see NaN */
    tern_rt_ranks *rt = NULL;
    if (tern_rt_ranks_create(machine, &ro, ks, nk, &rt, err))
        return 1;
    size_t nin = rows_in * COLS, nout = rows_out * COLS;
    float *x = malloc(nin * sizeof *x);
    for (unsigned r = 0; r < ranks; r++) {
        for (size_t i = 0; i < nin; i++)
            x[i] = xval(r, i);
        if (tern_rt_ranks_write(rt, r, "x", x, nin * sizeof *x, err)) {
            free(x);
            tern_rt_ranks_free(rt);
            return 1;
        }
    }
    free(x);
    tern_ranks_result res;
    int rc = 0;
    if (tern_rt_ranks_execute(rt, &res, err)) {
        rc = 1;
    } else {
        o->time_ps = res.time_ps;
        if (res.ncolls == 1) {
            o->coll_start = res.colls[0].start_ps;
            o->coll_end = res.colls[0].end_ps;
            o->coll_time = res.colls[0].time_ps;
            o->algo = res.colls[0].algo;
        }
        o->red = malloc(ranks * nout * sizeof(float));
        o->out = malloc(ranks * nout * sizeof(float));
        for (unsigned r = 0; mode == TERN_MODE_FUNCTIONAL && r < ranks; r++)
            if (tern_rt_ranks_read(rt, r, "red", o->red + r * nout, nout * sizeof(float), err) ||
                tern_rt_ranks_read(rt, r, "out", o->out + r * nout, nout * sizeof(float), err))
                rc = 1;
        tern_ranks_result_free(&res);
    }
    tern_rt_ranks_free(rt);
    return rc;
}

static void free_out(run_out *o)
{
    free(o->red);
    free(o->out);
    memset(o, 0, sizeof *o);
}

/* One case: kernel with `op` over `ranks`, checked against the host. */
static void check_case(const char *name, unsigned ranks, tern_kernel_coll op, int32_t groups, int algo)
{
    TEST_BEGIN(name);
    unsigned g = groups == 0 ? ranks : (unsigned)(groups < 0 ? -groups : groups);
    uint64_t rows_in = ROWS, rows_out = ROWS;
    if (op == TERN_KCOLL_ALL_GATHER)
        rows_in = ROWS / g;
    if (op == TERN_KCOLL_REDUCE_SCATTER)
        rows_out = ROWS / g;
    tern_kernel *k = build(op, groups, algo, rows_in, rows_out);
    CHECK(k != NULL);
    if (!k)
        return;
    tern_error err;
    run_out a, b, c;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    memset(&c, 0, sizeof c);
    int rc = run_launch(MACHINE, ranks, &k, 1, TERN_MODE_FUNCTIONAL, 1, rows_in, rows_out, &a, &err);
    CHECK_MSG(rc == 0, "launch failed: %s", err.msg);
    if (rc) {
        tern_kernel_free(k);
        return;
    }
    /* the host: pre = fl(fl(x * 2) + 1), then the collective layer on those buffers */
    size_t nin = rows_in * COLS, nout = rows_out * COLS;
    uint64_t count = op == TERN_KCOLL_ALL_GATHER ? nout : nin;
    tern_fabric *f = NULL;
    tern_fabric_opts fo = {NODES, ranks, 0};
    CHECK(tern_fabric_load(MACHINE, &fo, &f, &err) == TERN_OK);
    unsigned *grp = NULL;
    tern_coll_desc d;
    memset(&d, 0, sizeof d);
    d.op = (tern_coll_op)op;
    d.reduce = TERN_REDUCE_SUM;
    d.dtype = TERN_DTYPE_FP32;
    d.count = count;
    d.algo = (tern_coll_algo)algo;
    if (groups) {
        unsigned ng = ranks / g;
        grp = malloc(sizeof *grp * ranks);
        for (unsigned j = 0; j < ng; j++)
            for (unsigned m = 0; m < g; m++)
                grp[j * g + m] = groups > 0 ? j * g + m : j + m * ng;
        d.groups = grp;
        d.ngroups = ng;
        d.group_size = g;
    }
    float **in = calloc(ranks, sizeof *in), **cout = calloc(ranks, sizeof *cout);
    for (unsigned r = 0; r < ranks; r++) {
        in[r] = calloc(count, sizeof(float));
        cout[r] = calloc(count, sizeof(float));
        unsigned member = groups == 0 ? r : groups > 0 ? r % g : r / (ranks / g);
        size_t at = op == TERN_KCOLL_ALL_GATHER ? (size_t)(count * member / g) : 0;
        for (size_t i = 0; i < nin; i++) {
            float v = xval(r, i) * 2.0f;
            in[r][at + i] = v + 1.0f;
        }
    }
    tern_coll_algo resolved;
    CHECK(tern_collective_resolve(f, &d, &resolved, &err) == TERN_OK);
    CHECK_MSG(a.algo == resolved, "algorithm %s, the collective layer resolves %s", tern_coll_algo_name(a.algo),
              tern_coll_algo_name(resolved));
    tern_coll_result cr;
    CHECK(tern_collective_run(f, &d, (const void *const *)in, (void *const *)cout, &cr, &err) == TERN_OK);
    tern_coll_result tr;
    CHECK(tern_collective_time(f, &d, &tr, &err) == TERN_OK);
    CHECK_EQ_INT(a.coll_time, tr.time_ps);
    CHECK_EQ_INT(a.coll_end - a.coll_start, tr.time_ps);
    CHECK_MSG(a.time_ps > a.coll_end, "run %lld ps ends before the collective's completion %lld ps",
              (long long)a.time_ps, (long long)a.coll_end);
    float *expect = calloc(count, sizeof(float));
    size_t bad_ref = 0, bad_run = 0, bad_out = 0;
    for (unsigned r = 0; r < ranks; r++) {
        memset(expect, 0, count * sizeof(float));
        CHECK(tern_collective_reference(f, &d, resolved, (const void *const *)in, r, expect, &err) == TERN_OK);
        unsigned member = groups == 0 ? r : groups > 0 ? r % g : r / (ranks / g);
        size_t at = op == TERN_KCOLL_REDUCE_SCATTER ? (size_t)(count * member / g) : 0;
        for (size_t i = 0; i < nout; i++) {
            float got = a.red[r * nout + i];
            bad_ref += memcmp(&got, &expect[at + i], 4) != 0;
            bad_run += memcmp(&got, &cout[r][at + i], 4) != 0;
            float want = expect[at + i] * 0.5f;
            bad_out += memcmp(&a.out[r * nout + i], &want, 4) != 0;
        }
    }
    CHECK_MSG(bad_ref == 0, "%zu elements differ from tern_collective_reference", bad_ref);
    CHECK_MSG(bad_run == 0, "%zu elements differ from tern_collective_run", bad_run);
    CHECK_MSG(bad_out == 0, "%zu elements of the compute after the collective differ", bad_out);
    /* the same with 2 host threads, and timing-only: the same bits and picoseconds */
    rc = run_launch(MACHINE, ranks, &k, 1, TERN_MODE_FUNCTIONAL, 2, rows_in, rows_out, &b, &err);
    CHECK_MSG(rc == 0, "2-thread launch failed: %s", err.msg);
    if (!rc) {
        CHECK_EQ_INT(b.time_ps, a.time_ps);
        CHECK(memcmp(a.out, b.out, ranks * nout * sizeof(float)) == 0);
    }
    rc = run_launch(MACHINE, ranks, &k, 1, TERN_MODE_TIMING_ONLY, 1, rows_in, rows_out, &c, &err);
    CHECK_MSG(rc == 0, "timing-only launch failed: %s", err.msg);
    if (!rc)
        CHECK_EQ_INT(c.time_ps, a.time_ps);
    printf("%s: %u ranks, %s, collective %.3f us of a %.3f us run\n", name, ranks, tern_coll_algo_name(a.algo),
           (double)a.coll_time / 1e6, (double)a.time_ps / 1e6);
    free(expect);
    for (unsigned r = 0; r < ranks; r++) {
        free(in[r]);
        free(cout[r]);
    }
    free(in);
    free(cout);
    free(grp);
    free_out(&a);
    free_out(&b);
    free_out(&c);
    tern_fabric_free(f);
    tern_kernel_free(k);
}

static void check_error(const char *name, unsigned ranks, tern_kernel *const *ks, unsigned nk, const char *want1,
                        const char *want2)
{
    TEST_BEGIN(name);
    tern_error err;
    memset(&err, 0, sizeof err);
    run_out o;
    memset(&o, 0, sizeof o);
    int rc = run_launch("trn1.32xlarge", ranks, ks, nk, TERN_MODE_FUNCTIONAL, 1, ROWS, ROWS, &o, &err);
    CHECK_MSG(rc != 0, "expected an error");
    if (rc) {
        CHECK_STR_CONTAINS(err.msg, want1);
        if (want2)
            CHECK_STR_CONTAINS(err.msg, want2);
        printf("%s: %s\n", name, err.msg);
    }
    free_out(&o);
}

int main(void)
{
    tern_error err;
    if (tern_core_config_load("trn1.32xlarge", &CFG, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    check_case("all-reduce 2 ranks auto", 2, TERN_KCOLL_ALL_REDUCE, 0, TERN_ALGO_AUTO);
    check_case("all-reduce 4 ranks ring", 4, TERN_KCOLL_ALL_REDUCE, 0, TERN_ALGO_RING);
    check_case("all-reduce 8 ranks auto", 8, TERN_KCOLL_ALL_REDUCE, 0, TERN_ALGO_AUTO);
    check_case("all-reduce 8 ranks rdh", 8, TERN_KCOLL_ALL_REDUCE, 0, TERN_ALGO_RDH);
    check_case("all-reduce 8 ranks ring", 8, TERN_KCOLL_ALL_REDUCE, 0, TERN_ALGO_RING);
    check_case("all-reduce 4 ranks groups of 2", 4, TERN_KCOLL_ALL_REDUCE, 2, TERN_ALGO_AUTO);
    check_case("all-reduce 8 ranks strided groups of 4", 8, TERN_KCOLL_ALL_REDUCE, -4, TERN_ALGO_RING);
    check_case("all-gather 4 ranks", 4, TERN_KCOLL_ALL_GATHER, 0, TERN_ALGO_AUTO);
    check_case("reduce-scatter 4 ranks ring", 4, TERN_KCOLL_REDUCE_SCATTER, 0, TERN_ALGO_RING);
    check_case("all-reduce 8 ranks kangaring", 8, TERN_KCOLL_ALL_REDUCE, 0, TERN_ALGO_KANGARING);
    check_case("reduce-scatter 4 ranks kangaring", 4, TERN_KCOLL_REDUCE_SCATTER, 0, TERN_ALGO_KANGARING);
    check_case("all-to-all 4 ranks", 4, TERN_KCOLL_ALL_TO_ALL, 0, TERN_ALGO_AUTO);
    check_case("permute 4 ranks", 4, TERN_KCOLL_PERMUTE, 0, TERN_ALGO_AUTO);
    /* two instances over EFA, 2 ranks on each: the hierarchical all-reduce */
    MACHINE = "2xtrn1.32xlarge";
    NODES = 2;
    check_case("all-reduce 2 x 2 ranks over EFA", 4, TERN_KCOLL_ALL_REDUCE, 0, TERN_ALGO_AUTO);
    check_case("all-gather 2 x 2 ranks over EFA", 4, TERN_KCOLL_ALL_GATHER, 0, TERN_ALGO_AUTO);
    MACHINE = "trn1.32xlarge";
    NODES = 0;

    /* SPMD: every engine's r63 holds the rank id: a load whose source is offset by r63 elements reads
     * x[rank .. rank + COLS) on each rank */
    TEST_BEGIN("rank register");
    {
        tern_kernel *kr = NULL;
        CHECK(tern_kernel_create(&CFG, "rankreg", &kr, &err) == TERN_OK);
        tern_view x = tern_kernel_input2d(kr, "x", TERN_DTYPE_FP32, 2, COLS);
        tern_view o = tern_kernel_output2d(kr, "out", TERN_DTYPE_FP32, 1, COLS);
        tern_view t = tern_kernel_sbuf(kr, TERN_DTYPE_FP32, 1, COLS, "t");
        tern_view row = tern_view_block(kr, x, 0, 1, 0, COLS);
        row.ap.offset_reg = TERN_RANK_REG_ID;
        tern_kernel_load(kr, t, row);
        tern_kernel_store(kr, o, t);
        CHECK(tern_kernel_status(kr, &err) == TERN_OK);
        tern_rt_ranks_opts ro;
        memset(&ro, 0, sizeof ro);
        ro.ranks = 8;
        tern_rt_ranks *rt = NULL;
        CHECK(tern_rt_ranks_create("trn1.32xlarge", &ro, &kr, 1, &rt, &err) == TERN_OK);
        float xin[2 * COLS], got[COLS];
        for (int i = 0; i < 2 * COLS; i++)
            xin[i] = (float)i;
        size_t bad = 0;
        for (unsigned r = 0; rt && r < 8; r++)
            CHECK(tern_rt_ranks_write(rt, r, "x", xin, sizeof xin, &err) == TERN_OK);
        CHECK_MSG(rt && tern_rt_ranks_execute(rt, NULL, &err) == TERN_OK, "%s", err.msg);
        for (unsigned r = 0; rt && r < 8; r++) {
            CHECK(tern_rt_ranks_read(rt, r, "out", got, sizeof got, &err) == TERN_OK);
            for (int i = 0; i < COLS; i++)
                bad += got[i] != (float)(r + (unsigned)i);
        }
        CHECK_MSG(bad == 0, "%zu elements not x[rank + i]", bad);
        tern_rt_ranks_free(rt);
        tern_kernel_free(kr);
    }

    /* overlap: VectorE work that does not touch the collective's tensors runs while the collective is in flight,
     * and only the load of its result waits for the semaphore */
    TEST_BEGIN("independent compute overlaps the collective");
    {
        int64_t t[2] = {0, 0}, alone = 0;
        for (int with = 0; with < 3; with++) {
            tern_kernel *kw = NULL;
            CHECK(tern_kernel_create(&CFG, "overlap", &kw, &err) == TERN_OK);
            tern_view x = tern_kernel_input2d(kw, "x", TERN_DTYPE_FP32, ROWS, COLS);
            tern_view red = tern_kernel_output2d(kw, "red", TERN_DTYPE_FP32, ROWS, COLS);
            tern_view out = tern_kernel_output2d(kw, "out", TERN_DTYPE_FP32, ROWS, COLS);
            if (with < 2)
                tern_kernel_all_reduce(kw, red, x, TERN_ALU_ADD);
            if (with >= 1) { /* ~30 us of VectorE work on its own tile */
                tern_view w = tern_kernel_sbuf(kw, TERN_DTYPE_FP32, 128, 2048, "w");
                tern_kernel_memset(kw, TERN_ENGINE_VECTOR, w, 1.0f);
                for (int i = 0; i < 24; i++)
                    tern_kernel_tensor_scalar(kw, TERN_ENGINE_VECTOR, w, w, TERN_ALU_MULT, 1.0001f, TERN_ALU_ADD,
                                              0.5f);
            }
            tern_view u = tern_kernel_sbuf(kw, TERN_DTYPE_FP32, ROWS, COLS, "u");
            tern_kernel_load(kw, u, with < 2 ? red : x);
            tern_kernel_store(kw, out, u);
            CHECK(tern_kernel_status(kw, &err) == TERN_OK);
            if (with == 2) { /* the work alone, on one core */
                tern_core *core = NULL;
                tern_run_stats st;
                CHECK(tern_core_create(&CFG, NULL, &core, &err) == TERN_OK);
                CHECK(tern_kernel_run(kw, core, &st, &err) == TERN_OK);
                alone = st.time_ps;
                tern_core_free(core);
            } else {
                tern_rt_ranks_opts ro;
                memset(&ro, 0, sizeof ro);
                ro.ranks = 2;
                ro.mode = TERN_MODE_TIMING_ONLY;
                tern_rt_ranks *rt = NULL;
                tern_ranks_result res;
                CHECK(tern_rt_ranks_create("trn1.32xlarge", &ro, &kw, 1, &rt, &err) == TERN_OK);
                CHECK_MSG(rt && tern_rt_ranks_execute(rt, &res, &err) == TERN_OK, "%s", err.msg);
                if (rt) {
                    t[with] = res.time_ps;
                    tern_ranks_result_free(&res);
                }
                tern_rt_ranks_free(rt);
            }
            tern_kernel_free(kw);
        }
        CHECK_MSG(alone > 10000000, "the work alone takes %lld ps, expected > 10 us", (long long)alone);
        CHECK_MSG(t[1] - t[0] < alone / 4,
                  "with the work the run takes %lld ps, without %lld ps: the work (%lld ps alone) did not overlap",
                  (long long)t[1], (long long)t[0], (long long)alone);
        printf("overlap: collective run %.3f us, with %.3f us of independent VectorE work %.3f us\n",
               (double)t[0] / 1e6, (double)alone / 1e6, (double)t[1] / 1e6);
    }

    /* errors */
    tern_kernel *k = build(TERN_KCOLL_ALL_REDUCE, 0, 0, ROWS, ROWS);
    tern_kernel *k_small = build(TERN_KCOLL_ALL_REDUCE, 0, 0, ROWS / 2, ROWS / 2);
    tern_kernel *k_gather = build(TERN_KCOLL_ALL_TO_ALL, 0, 0, ROWS, ROWS);
    check_error("more ranks than the machine", 33, &k, 1, "33", "ranks");
    tern_kernel *mixed[4] = {k, k, k_small, k_small};
    TEST_BEGIN("count mismatch");
    {
        /* k_small has other tensor sizes: write its own input */
        tern_rt_ranks_opts ro;
        memset(&ro, 0, sizeof ro);
        ro.ranks = 4;
        tern_rt_ranks *rt = NULL;
        CHECK(tern_rt_ranks_create("trn1.32xlarge", &ro, mixed, 4, &rt, &err) == TERN_OK);
        if (rt) {
            tern_status st = tern_rt_ranks_execute(rt, NULL, &err);
            CHECK(st != TERN_OK);
            CHECK_STR_CONTAINS(err.msg, "count");
            CHECK_STR_CONTAINS(err.msg, "ranks 0..1");
            CHECK_STR_CONTAINS(err.msg, "ranks 2..3");
            printf("count mismatch: %s\n", err.msg);
            tern_rt_ranks_free(rt);
        }
    }
    tern_kernel *ops[4] = {k, k_gather, k, k};
    check_error("operation mismatch", 4, ops, 4, "operation", "all-to-all");
    /* a rank whose program has no collective */
    tern_kernel *k_none = NULL;
    CHECK(tern_kernel_create(&CFG, "none", &k_none, &err) == TERN_OK);
    {
        tern_view x = tern_kernel_input2d(k_none, "x", TERN_DTYPE_FP32, ROWS, COLS);
        tern_view out = tern_kernel_output2d(k_none, "out", TERN_DTYPE_FP32, ROWS, COLS);
        tern_view t = tern_kernel_sbuf(k_none, TERN_DTYPE_FP32, ROWS, COLS, "t");
        tern_kernel_load(k_none, t, x);
        tern_kernel_store(k_none, out, t);
        tern_kernel_hbm_tensor(k_none, "red", TERN_KIO_OUTPUT, TERN_DTYPE_FP32, 2, (uint64_t[]){ROWS, COLS});
    }
    tern_kernel *never[2] = {k, k_none};
    check_error("a rank never joins", 2, never, 2, "never join", "rank 1");
    /* a rank blocked on a semaphore nothing raises while rank 0 waits in the collective: named with its wait */
    TEST_BEGIN("a blocked rank never joins");
    {
        tern_program p;
        tern_program_init(&p);
        p.num_semaphores = CFG.num_semaphores;
        tern_instr w;
        memset(&w, 0, sizeof w);
        w.opcode = TERN_OP_SEM_WAIT;
        w.engine = TERN_ENGINE_SYNC;
        w.wait_sem = 40;
        w.wait_value = 1;
        w.signal_sem = TERN_SEM_NONE;
        for (int sl = 0; sl < TERN_INSTR_OPERANDS; sl++)
            w.ap[sl].offset_reg = TERN_REG_NONE;
        CHECK(tern_program_append(&p, &w, &err) == TERN_OK);
        tern_kernel *kb = NULL;
        CHECK(tern_kernel_from_program(&CFG, &p, &kb, &err) == TERN_OK);
        tern_kernel *two[2] = {k, kb};
        tern_rt_ranks_opts ro;
        memset(&ro, 0, sizeof ro);
        ro.ranks = 2;
        tern_rt_ranks *rt = NULL;
        CHECK(tern_rt_ranks_create("trn1.32xlarge", &ro, two, 2, &rt, &err) == TERN_OK);
        if (rt) {
            CHECK(tern_rt_ranks_execute(rt, NULL, &err) != TERN_OK);
            CHECK_STR_CONTAINS(err.msg, "never join");
            CHECK_STR_CONTAINS(err.msg, "rank 1 (sync #0 (sem_wait) waits for semaphore 40 >= 1");
            printf("a blocked rank never joins: %s\n", err.msg);
            tern_rt_ranks_free(rt);
        }
        tern_kernel_free(kb);
        tern_program_free(&p);
    }
    /* bf16 with max over 4 ranks: the kernel's bits are the collective layer's */
    TEST_BEGIN("bf16 max all-reduce");
    {
        tern_kernel *kb = NULL;
        CHECK(tern_kernel_create(&CFG, "bf16", &kb, &err) == TERN_OK);
        tern_view x = tern_kernel_input2d(kb, "x", TERN_DTYPE_BF16, ROWS, COLS);
        tern_view o = tern_kernel_output2d(kb, "out", TERN_DTYPE_BF16, ROWS, COLS);
        tern_kernel_all_reduce(kb, o, x, TERN_ALU_MAX);
        CHECK(tern_kernel_status(kb, &err) == TERN_OK);
        tern_rt_ranks_opts ro;
        memset(&ro, 0, sizeof ro);
        ro.ranks = 4;
        tern_rt_ranks *rt = NULL;
        CHECK(tern_rt_ranks_create("trn1.32xlarge", &ro, &kb, 1, &rt, &err) == TERN_OK);
        uint16_t *xs[4], got[ROWS * COLS], want[ROWS * COLS];
        for (unsigned r = 0; r < 4; r++) {
            xs[r] = malloc(sizeof got);
            for (size_t i = 0; i < ROWS * COLS; i++) {
                float v = xval(r, i);
                tern_convert_from_f32(TERN_DTYPE_BF16, &xs[r][i], &v, 1, NULL, NULL);
            }
            if (rt)
                CHECK(tern_rt_ranks_write(rt, r, "x", xs[r], sizeof got, &err) == TERN_OK);
        }
        CHECK_MSG(rt && tern_rt_ranks_execute(rt, NULL, &err) == TERN_OK, "%s", err.msg);
        tern_fabric *f = NULL;
        tern_fabric_opts fo = {0, 4, 0};
        CHECK(tern_fabric_load("trn1.32xlarge", &fo, &f, &err) == TERN_OK);
        tern_coll_desc d;
        memset(&d, 0, sizeof d);
        d.op = TERN_COLL_ALL_REDUCE;
        d.reduce = TERN_REDUCE_MAX;
        d.dtype = TERN_DTYPE_BF16;
        d.count = ROWS * COLS;
        tern_coll_algo algo;
        CHECK(tern_collective_resolve(f, &d, &algo, &err) == TERN_OK);
        size_t bad = 0;
        for (unsigned r = 0; rt && r < 4; r++) {
            CHECK(tern_rt_ranks_read(rt, r, "out", got, sizeof got, &err) == TERN_OK);
            CHECK(tern_collective_reference(f, &d, algo, (const void *const *)xs, r, want, &err) == TERN_OK);
            bad += memcmp(got, want, sizeof got) != 0;
        }
        CHECK_MSG(bad == 0, "%zu ranks differ from the reference", bad);
        for (unsigned r = 0; r < 4; r++)
            free(xs[r]);
        tern_fabric_free(f);
        tern_rt_ranks_free(rt);
        tern_kernel_free(kb);
    }
    /* a collective without its semaphore (a hand-edited program) */
    TEST_BEGIN("missing semaphore");
    {
        tern_program p;
        CHECK(tern_program_copy(&p, tern_kernel_program(k), &err) == TERN_OK);
        tern_stream *s = &p.streams[TERN_ENGINE_SYNC];
        int found = 0;
        for (size_t i = 0; i < s->count; i++)
            if (s->instrs[i].opcode == TERN_OP_COLLECTIVE) {
                s->instrs[i].signal_sem = TERN_SEM_NONE;
                found = 1;
            }
        CHECK(found);
        tern_kernel *kp = NULL;
        CHECK(tern_kernel_from_program(&CFG, &p, &kp, &err) == TERN_OK);
        tern_kernel *two[2] = {kp, kp};
        check_error("missing semaphore", 2, two, 1, "completion semaphore", "collective");
        tern_kernel_free(kp);
        tern_program_free(&p);
    }
    TEST_BEGIN("collective on one core");
    {
        tern_core *core = NULL;
        CHECK(tern_core_create(&CFG, NULL, &core, &err) == TERN_OK);
        tern_status st = tern_kernel_run(k, core, NULL, &err);
        CHECK(st != TERN_OK);
        CHECK_STR_CONTAINS(err.msg, "multi-rank launch");
        tern_core_free(core);
    }
    TEST_BEGIN("collective from SBUF");
    {
        tern_kernel *kb = NULL;
        CHECK(tern_kernel_create(&CFG, "sbuf", &kb, &err) == TERN_OK);
        tern_view t = tern_kernel_sbuf(kb, TERN_DTYPE_FP32, ROWS, COLS, "t");
        tern_view o = tern_kernel_output2d(kb, "out", TERN_DTYPE_FP32, ROWS, COLS);
        tern_kernel_all_reduce(kb, o, t, TERN_ALU_ADD);
        CHECK(tern_kernel_status(kb, &err) != TERN_OK);
        CHECK_STR_CONTAINS(err.msg, "HBM");
        tern_kernel_free(kb);
    }
    /* the CLI on the same kernel saved as assembly text: identical JSON for 1 and 2 host threads, the same time
     * timing-only, and the collective's time the collective layer's */
    TEST_BEGIN("tern launch");
    const char *bin = getenv("TERN_BIN");
    CHECK_MSG(bin != NULL, "TERN_BIN is not set (CTest sets it)");
    if (bin) {
        char dir[] = "/tmp/tern_multi_rank_XXXXXX";
        CHECK(mkdtemp(dir) != NULL);
        char path[128], cmd[512];
        snprintf(path, sizeof path, "%s/allreduce.s", dir);
        CHECK(tern_kernel_save(k, path, &err) == TERN_OK);
        FILE *fs = fopen(path, "r");
        char text[1 << 16];
        size_t n = fs ? fread(text, 1, sizeof text - 1, fs) : 0;
        text[n] = 0;
        if (fs)
            fclose(fs);
        CHECK_STR_CONTAINS(text, "collective");
        char out[3][4096];
        const char *extra[3] = {"--threads 1", "--threads 2", "--timing-only"};
        for (int v = 0; v < 3; v++) {
            snprintf(cmd, sizeof cmd, "%s launch %s --machine trn1.32xlarge --ranks 4 --json %s", bin, path, extra[v]);
            FILE *p = popen(cmd, "r");
            size_t m = p ? fread(out[v], 1, sizeof out[v] - 1, p) : 0;
            out[v][m] = 0;
            int prc = p ? pclose(p) : -1;
            CHECK_MSG(prc == 0, "%s: exit %d", cmd, prc);
        }
        CHECK_MSG(!strcmp(out[0], out[1]), "1 and 2 threads differ:\n%s\n%s", out[0], out[1]);
        CHECK_STR_CONTAINS(out[0], "\"hash\":");
        const char *t0 = strstr(out[0], "\"time_ps\":"), *t2 = strstr(out[2], "\"time_ps\":");
        CHECK(t0 && t2 && atoll(t0 + 10) == atoll(t2 + 10) && atoll(t0 + 10) > 0);
        tern_fabric *f4 = NULL;
        tern_fabric_opts fo4 = {0, 4, 0};
        CHECK(tern_fabric_load("trn1.32xlarge", &fo4, &f4, &err) == TERN_OK);
        tern_coll_desc d4;
        memset(&d4, 0, sizeof d4);
        d4.op = TERN_COLL_ALL_REDUCE;
        d4.dtype = TERN_DTYPE_FP32;
        d4.count = ROWS * COLS;
        tern_coll_result r4;
        CHECK(tern_collective_time(f4, &d4, &r4, &err) == TERN_OK);
        char want[64];
        snprintf(want, sizeof want, "\"time_ps\":%llu}", (unsigned long long)r4.time_ps);
        CHECK_STR_CONTAINS(out[0], want);
        tern_fabric_free(f4);
        printf("tern launch: %s", out[0]);
        snprintf(cmd, sizeof cmd, "%s launch %s --machine trn1.32xlarge --ranks 64 >/dev/null 2>&1", bin, path);
        CHECK_MSG(system(cmd) != 0, "64 ranks on one trn1.32xlarge should fail");
        remove(path);
        rmdir(dir);
    }
    tern_kernel_free(k);
    tern_kernel_free(k_small);
    tern_kernel_free(k_gather);
    tern_kernel_free(k_none);
    return check_report();
}
