/* Permute with explicit (source, target) pairs from inside a kernel (tern_kernel_permute; the `collective`
 * instruction with operation 4 and its pairs in HBM operand B; docs/multichip.md "Collectives inside kernels"),
 * and all-to-allv with MPI_Alltoallv's displacements in B (3 x n x n). On 8 ranks of trn1.32xlarge the pairs
 * 0->5, 5->0, 3->7, 6->1 (from an input, and computed inside the kernel by memsets): every target's result is
 * its source's bits (tern_collective_reference), the others' zeros, the compute after it (x 2) waits for it, its
 * time equals tern_collective_time's for the same pairs, timing-only gives the same picoseconds, and every program
 * survives the binary and text round trips (TERN_CHECK_ROUNDTRIP). A send/receive (one pair) across the EFA of
 * 2xtrn1.32xlarge takes the fabric's time for that route, above the same send inside a chip. All-to-allv over 4
 * ranks with displacements that reverse and space the blocks matches the reference (zeros where no block lands)
 * in the time of the same counts back to back. Errors: a repeated target, a rank outside the launch, an odd
 * element count, ranks whose pairs differ, a displacement past the buffer and a negative one. */
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

#define MAXR 8
#define ROWS 128
#define COLS 256
#define COUNT (ROWS * COLS)

static tern_core_config CFG;

/* x -> permute by the pairs (an input "pr" [np, 2], or np pairs set by memsets inside the kernel) -> y; z = 2 y */
static tern_kernel *build_permute(unsigned np, const int32_t *inkernel, tern_dtype pdt)
{
    tern_kernel *k = NULL;
    tern_error err;
    if (tern_kernel_create(&CFG, "permute", &k, &err))
        return NULL;
    tern_view x = tern_kernel_input2d(k, "x", TERN_DTYPE_FP32, ROWS, COLS);
    tern_view pr;
    if (inkernel) {
        pr = tern_kernel_hbm_tensor(k, "pr", TERN_KIO_SCRATCH, TERN_DTYPE_INT32, 2, (uint64_t[]){1, 2 * np});
        tern_view pt = tern_kernel_sbuf(k, TERN_DTYPE_INT32, 1, 2 * np, "pt");
        for (unsigned i = 0; i < 2 * np; i++)
            tern_kernel_memset(k, TERN_ENGINE_VECTOR, tern_view_block(k, pt, 0, 1, i, i + 1), (float)inkernel[i]);
        tern_kernel_store(k, pr, pt);
    } else {
        pr = tern_kernel_input2d(k, "pr", pdt, np, 2);
    }
    tern_view y = tern_kernel_hbm_tensor(k, "y", TERN_KIO_OUTPUT, TERN_DTYPE_FP32, 2, (uint64_t[]){ROWS, COLS});
    tern_view z = tern_kernel_output2d(k, "z", TERN_DTYPE_FP32, ROWS, COLS);
    tern_view t = tern_kernel_sbuf(k, TERN_DTYPE_FP32, ROWS, COLS, "t");
    tern_kernel_permute(k, y, x, pr, 0);
    tern_kernel_load(k, t, y);
    tern_kernel_tensor_scalar(k, TERN_ENGINE_VECTOR, t, t, TERN_ALU_MULT, 2.0f, TERN_ALU_BYPASS, 0.0f);
    tern_kernel_store(k, z, t);
    return k;
}

static float X[MAXR][COUNT];

typedef struct {
    int rc;
    char msg[1024];
    int64_t time_ps;
    tern_ranks_coll coll;
    float y[MAXR][COUNT], z[MAXR][COUNT];
} outcome;

/* Run k over R ranks of machine (nodes instances); rank r's "pr" (or "cnt") input is tab[r] (n int32). */
static void launch(const char *machine, unsigned R, unsigned nodes, tern_kernel *k, const char *tname,
                   int32_t (*tab)[64], unsigned n, tern_sim_mode mode, outcome *o)
{
    memset(o, 0, sizeof *o);
    tern_error err = {0};
    tern_rt_ranks_opts ro;
    memset(&ro, 0, sizeof ro);
    ro.ranks = R;
    ro.nodes = nodes;
    ro.mode = mode;
    ro.threads = 1;
    tern_rt_ranks *rt = NULL;
    tern_ranks_result res;
    memset(&res, 0, sizeof res);
    tern_status st = tern_rt_ranks_create(machine, &ro, &k, 1, &rt, &err);
    for (unsigned r = 0; !st && r < R; r++) {
        if (tab)
            st = tern_rt_ranks_write(rt, r, tname, tab[r], sizeof(int32_t) * n, &err);
        if (!st && mode == TERN_MODE_FUNCTIONAL)
            st = tern_rt_ranks_write(rt, r, "x", X[r], sizeof X[r], &err);
    }
    if (!st)
        st = tern_rt_ranks_execute(rt, &res, &err);
    for (unsigned r = 0; !st && mode == TERN_MODE_FUNCTIONAL && r < R; r++)
        if ((st = tern_rt_ranks_read(rt, r, "y", o->y[r], sizeof o->y[r], &err)) == TERN_OK)
            st = tern_rt_ranks_read(rt, r, "z", o->z[r], sizeof o->z[r], &err);
    if (st) {
        o->rc = 1;
        snprintf(o->msg, sizeof o->msg, "%s", err.msg);
    } else {
        o->time_ps = res.time_ps;
        if (res.ncolls == 1)
            o->coll = res.colls[0];
        else
            o->rc = 2;
    }
    tern_ranks_result_free(&res);
    tern_rt_ranks_free(rt);
}

static tern_fabric *fabric(const char *machine, unsigned R, unsigned nodes)
{
    tern_fabric *f = NULL;
    tern_fabric_opts fo;
    memset(&fo, 0, sizeof fo);
    fo.ranks = R;
    fo.nodes = nodes;
    tern_error err;
    CHECK_MSG(tern_fabric_load(machine, &fo, &f, &err) == TERN_OK, "%s", err.msg);
    return f;
}

static outcome A, B;
static int32_t T[MAXR][64];

/* A's results against the collective layer: bits from tern_collective_reference on the pairs (zeros off the
 * targets), z = 2 y, the time tern_collective_time gives, and timing-only's picoseconds equal */
static void check_permute(const char *machine, unsigned R, unsigned nodes, const unsigned *pairs, unsigned np)
{
    tern_fabric *f = fabric(machine, R, nodes);
    tern_coll_desc d;
    memset(&d, 0, sizeof d);
    d.op = TERN_COLL_PERMUTE;
    d.dtype = TERN_DTYPE_FP32;
    d.count = COUNT;
    d.pairs = pairs;
    d.npairs = np;
    tern_coll_algo algo;
    tern_error err;
    CHECK(tern_collective_resolve(f, &d, &algo, &err) == TERN_OK);
    tern_coll_result cr;
    CHECK(tern_collective_time(f, &d, &cr, &err) == TERN_OK);
    const void *in[MAXR];
    for (unsigned r = 0; r < R; r++)
        in[r] = X[r];
    static float want[COUNT];
    for (unsigned r = 0; r < R; r++) {
        memset(want, 0, sizeof want);
        CHECK(tern_collective_reference(f, &d, algo, in, r, want, &err) == TERN_OK);
        int target = 0, twice = 1;
        for (unsigned p = 0; p < np; p++)
            if (pairs[2 * p + 1] == r) {
                target = 1;
                CHECK_MSG(!memcmp(A.y[r], X[pairs[2 * p]], sizeof A.y[r]), "%s rank %u: not rank %u's buffer",
                          machine, r, pairs[2 * p]);
            }
        CHECK_MSG(!memcmp(A.y[r], want, sizeof want), "%s rank %u (%s): differs from the reference", machine, r,
                  target ? "a target" : "no target: zeros");
        for (unsigned i = 0; i < COUNT; i++)
            twice &= A.z[r][i] == A.y[r][i] * 2.0f;
        CHECK_MSG(twice, "%s rank %u: the compute after the permute did not read its result", machine, r);
    }
    CHECK_EQ_INT(A.coll.time_ps, cr.time_ps);
    CHECK_EQ_INT(A.coll.algo, TERN_ALGO_DIRECT);
    CHECK_EQ_INT(A.coll.op, TERN_COLL_PERMUTE);
    CHECK_EQ_INT(B.rc, 0);
    CHECK_EQ_INT(B.time_ps, A.time_ps);
    CHECK_EQ_INT(B.coll.end_ps, A.coll.end_ps);
    tern_fabric_free(f);
}

static void test_permute(void)
{
    TEST_BEGIN("permute pairs in a kernel");
    const unsigned pairs[8] = {0, 5, 5, 0, 3, 7, 6, 1};
    int32_t p32[8];
    for (unsigned i = 0; i < 8; i++)
        p32[i] = (int32_t)pairs[i];
    for (unsigned r = 0; r < 8; r++)
        memcpy(T[r], p32, sizeof p32);
    tern_kernel *k = build_permute(4, NULL, TERN_DTYPE_INT32);
    CHECK(k != NULL);
    launch("trn1.32xlarge", 8, 0, k, "pr", T, 8, TERN_MODE_FUNCTIONAL, &A);
    CHECK_MSG(A.rc == 0, "functional: %s", A.msg);
    launch("trn1.32xlarge", 8, 0, k, "pr", T, 8, TERN_MODE_TIMING_ONLY, &B);
    check_permute("trn1.32xlarge", 8, 0, pairs, 4);
    printf("permute 0->5, 5->0, 3->7, 6->1 over 8 trn1 ranks, %d fp32 elements: %.3f us, program %.3f us\n", COUNT,
           A.coll.time_ps / 1e6, A.time_ps / 1e6);
    outcome *keep = malloc(sizeof *keep);
    *keep = A;

    /* the same pairs set inside the kernel (memsets, then a store the permute waits for): the same results */
    tern_kernel *k2 = build_permute(4, p32, TERN_DTYPE_INT32);
    CHECK(k2 != NULL);
    launch("trn1.32xlarge", 8, 0, k2, NULL, NULL, 0, TERN_MODE_FUNCTIONAL, &A);
    CHECK_MSG(A.rc == 0, "in-kernel pairs: %s", A.msg);
    CHECK(!memcmp(A.y, keep->y, sizeof A.y) && !memcmp(A.z, keep->z, sizeof A.z));
    CHECK_MSG(A.coll.time_ps == keep->coll.time_ps && A.coll.start_ps > keep->coll.start_ps,
              "in-kernel pairs: collective %llu ps from %lld (input pairs: %llu ps from %lld)",
              (unsigned long long)A.coll.time_ps, (long long)A.coll.start_ps, (unsigned long long)keep->coll.time_ps,
              (long long)keep->coll.start_ps);
    free(keep);
    tern_kernel_free(k2);

    /* errors, each at the join or the run, naming the pair, the ranks and the values */
    for (unsigned r = 0; r < 8; r++)
        T[r][3] = 5; /* 5 -> 5: target 5 already used by pair 0 */
    launch("trn1.32xlarge", 8, 0, k, "pr", T, 8, TERN_MODE_TIMING_ONLY, &B);
    CHECK_MSG(B.rc == 1 && strstr(B.msg, "permute pair 1 (5 -> 5): target already used by another pair"), "'%s'",
              B.msg);
    for (unsigned r = 0; r < 8; r++)
        T[r][3] = 9;
    launch("trn1.32xlarge", 8, 0, k, "pr", T, 8, TERN_MODE_TIMING_ONLY, &B);
    CHECK_MSG(B.rc == 1 && strstr(B.msg, "rank 0: permute pair 1's target is rank 9, outside the launch's 0..7"),
              "'%s'", B.msg);
    for (unsigned r = 0; r < 8; r++)
        T[r][3] = 0;
    T[4][6] = 2; /* rank 4 alone reads 2 -> 7 */
    launch("trn1.32xlarge", 8, 0, k, "pr", T, 8, TERN_MODE_TIMING_ONLY, &B);
    CHECK_MSG(B.rc == 1 && strstr(B.msg, "ranks disagree on the permute pairs: ranks 0..3 pass 4 pairs"), "'%s'",
              B.msg);
    printf("%s\n", B.msg);
    tern_kernel_free(k);
    tern_error err;
    k = build_permute(2, NULL, TERN_DTYPE_FP32);
    CHECK(k == NULL || tern_kernel_status(k, &err) != TERN_OK);
    if (k)
        CHECK_STR_CONTAINS(err.msg, "pairs 'pr' must be an HBM int32 tensor");
    tern_kernel_free(k);
    if (tern_kernel_create(&CFG, "odd", &k, &err) == TERN_OK) {
        tern_view x = tern_kernel_input2d(k, "x", TERN_DTYPE_FP32, ROWS, COLS);
        tern_view y = tern_kernel_output2d(k, "y", TERN_DTYPE_FP32, ROWS, COLS);
        tern_view pr = tern_kernel_input2d(k, "pr", TERN_DTYPE_INT32, 1, 3);
        tern_kernel_permute(k, y, x, pr, 0);
        CHECK(tern_kernel_status(k, &err) != TERN_OK);
        CHECK_STR_CONTAINS(err.msg, "an even number of int32 elements, not 3");
        tern_kernel_free(k);
    }
}

/* The instruction's own rules, on assembly text: pairs with replica groups, an odd element count in B. */
static void test_rules(void)
{
    TEST_BEGIN("permute pairs: instruction rules");
    static const char *const bad[2][2] = {
        {"imm_i0=4 imm_i1=2", "permute pairs (B) name ranks of the whole launch: replica groups imm_i1 must be 0, not 2"},
        {"imm_i0=4", "permute pairs (B) are (source, target) rank pairs: an even number of int32 elements, not 7"}};
    for (int c = 0; c < 2; c++) {
        char path[] = "/tmp/tern_permute_XXXXXX.s";
        int fd = mkstemps(path, 2);
        CHECK(fd >= 0);
        FILE *fp = fdopen(fd, "w");
        fprintf(fp, ".machine trn1.32xlarge\n.semaphores 64\n.tensor x input fp32 [128,64] @0x1000\n"
                    ".tensor pr input int32 [1,8] @0x9000\n.tensor y output fp32 [128,64] @0x9040\n\n.engine sync\n"
                    "    collective dst=hbm[0:1]+0x9040:fp32[[64,128],[1,64]] in0=hbm[0:1]+0x1000:fp32[[64,128],[1,64]] "
                    "in1=hbm[0:1]+0x9000:int32[[%d,1],[1,%d]] %s signal=s21\n",
                c ? 7 : 8, c ? 7 : 8, bad[c][0]);
        fclose(fp);
        tern_kernel *k = NULL;
        tern_error err = {0};
        CHECK(tern_kernel_open(&CFG, path, &k, &err) == TERN_OK);
        for (unsigned r = 0; r < 8; r++)
            for (unsigned i = 0; i < 8; i++)
                T[r][i] = (int32_t)i;
        launch("trn1.32xlarge", 8, 0, k, "pr", T, 8, TERN_MODE_TIMING_ONLY, &B);
        CHECK_MSG(B.rc == 1 && strstr(B.msg, bad[c][1]), "'%s'", B.msg);
        tern_kernel_free(k);
        remove(path);
    }
}

/* send/receive: one pair, rank 2 -> rank 5 across the EFA of 2xtrn1.32xlarge (4 ranks on each instance), against
 * rank 2 -> rank 3 on one chip */
static void test_send_recv(void)
{
    TEST_BEGIN("send/receive in a kernel");
    tern_kernel *k = build_permute(1, NULL, TERN_DTYPE_INT32);
    const unsigned far[2] = {2, 5}, near[2] = {2, 3};
    for (unsigned r = 0; r < 8; r++)
        T[r][0] = 2, T[r][1] = 5;
    launch("2xtrn1.32xlarge", 8, 2, k, "pr", T, 2, TERN_MODE_FUNCTIONAL, &A);
    CHECK_MSG(A.rc == 0, "send/recv over EFA: %s", A.msg);
    launch("2xtrn1.32xlarge", 8, 2, k, "pr", T, 2, TERN_MODE_TIMING_ONLY, &B);
    check_permute("2xtrn1.32xlarge", 8, 2, far, 1);
    uint64_t efa = A.coll.time_ps;
    for (unsigned r = 0; r < 8; r++)
        T[r][1] = 3;
    launch("2xtrn1.32xlarge", 8, 2, k, "pr", T, 2, TERN_MODE_FUNCTIONAL, &A);
    CHECK_MSG(A.rc == 0, "send/recv in a chip: %s", A.msg);
    launch("2xtrn1.32xlarge", 8, 2, k, "pr", T, 2, TERN_MODE_TIMING_ONLY, &B);
    check_permute("2xtrn1.32xlarge", 8, 2, near, 1);
    printf("send/receive of %d fp32 elements: 2 -> 5 over EFA %.3f us, 2 -> 3 on one chip %.3f us\n", COUNT,
           efa / 1e6, A.coll.time_ps / 1e6);
    CHECK_MSG(efa > A.coll.time_ps, "over EFA %llu ps, on one chip %llu ps", (unsigned long long)efa,
              (unsigned long long)A.coll.time_ps);
    tern_kernel_free(k);
}

/* all-to-allv over 4 ranks with counts, send and receive displacements in one [3n, n] int32 table */
static void test_alltoallv_displs(void)
{
    TEST_BEGIN("all-to-allv displacements in a kernel");
    const unsigned n = 4;
    tern_kernel *k = NULL;
    tern_error err;
    CHECK(tern_kernel_create(&CFG, "a2av", &k, &err) == TERN_OK);
    tern_view x = tern_kernel_input2d(k, "x", TERN_DTYPE_FP32, ROWS, COLS);
    tern_view cnt = tern_kernel_input2d(k, "cnt", TERN_DTYPE_INT32, 3 * n, n);
    tern_view y = tern_kernel_hbm_tensor(k, "y", TERN_KIO_OUTPUT, TERN_DTYPE_FP32, 2, (uint64_t[]){ROWS, COLS});
    tern_view z = tern_kernel_output2d(k, "z", TERN_DTYPE_FP32, ROWS, COLS);
    tern_view t = tern_kernel_sbuf(k, TERN_DTYPE_FP32, ROWS, COLS, "t");
    tern_kernel_all_to_allv(k, y, x, cnt, 0, TERN_ALGO_RING);
    tern_kernel_load(k, t, y);
    tern_kernel_tensor_scalar(k, TERN_ENGINE_VECTOR, t, t, TERN_ALU_MULT, 2.0f, TERN_ALU_BYPASS, 0.0f);
    tern_kernel_store(k, z, t);
    CHECK(tern_kernel_status(k, &err) == TERN_OK);
    /* i sends ((i + 2j) mod 3) x 40 elements to j: block for j in slot n-1-j of 128 at offset 3; j receives the
     * block from i in slot n-1-i at offset 7 */
    uint64_t vc[16], sd[16], rd[16];
    for (unsigned i = 0; i < n; i++)
        for (unsigned j = 0; j < n; j++) {
            vc[i * n + j] = (uint64_t)((i + 2 * j) % 3) * 40;
            sd[i * n + j] = (n - 1 - j) * 128 + 3;
            rd[j * n + i] = (n - 1 - i) * 128 + 7;
        }
    for (unsigned r = 0; r < n; r++)
        for (unsigned e = 0; e < 16; e++) {
            T[r][e] = (int32_t)vc[e];
            T[r][16 + e] = (int32_t)sd[e];
            T[r][32 + e] = (int32_t)rd[e];
        }
    launch("trn1.32xlarge", n, 0, k, "cnt", T, 48, TERN_MODE_FUNCTIONAL, &A);
    CHECK_MSG(A.rc == 0, "functional: %s", A.msg);
    launch("trn1.32xlarge", n, 0, k, "cnt", T, 48, TERN_MODE_TIMING_ONLY, &B);
    CHECK_MSG(B.rc == 0, "timing-only: %s", B.msg);
    tern_fabric *f = fabric("trn1.32xlarge", n, 0);
    tern_coll_desc d;
    memset(&d, 0, sizeof d);
    d.op = TERN_COLL_ALL_TO_ALLV;
    d.dtype = TERN_DTYPE_FP32;
    d.count = COUNT;
    d.algo = TERN_ALGO_RING;
    d.vcounts = vc;
    d.sdispls = sd;
    d.rdispls = rd;
    tern_coll_result cr, packed;
    CHECK(tern_collective_time(f, &d, &cr, &err) == TERN_OK);
    const void *in[MAXR] = {X[0], X[1], X[2], X[3]};
    static float want[COUNT];
    for (unsigned r = 0; r < n; r++) {
        memset(want, 0, sizeof want); /* the kernel writes 0 where no block lands; the reference leaves it */
        CHECK(tern_collective_reference(f, &d, TERN_ALGO_RING, in, r, want, &err) == TERN_OK);
        CHECK_MSG(!memcmp(A.y[r], want, sizeof want), "rank %u: differs from the reference", r);
        /* one block by hand: from member 1, (1 + 2r) mod 3 x 40 elements */
        uint64_t c = vc[1 * n + r];
        CHECK(c == 0 || (A.y[r][rd[r * n + 1]] == X[1][sd[1 * n + r]] &&
                         A.y[r][rd[r * n + 1] + c - 1] == X[1][sd[1 * n + r] + c - 1]));
        int twice = 1;
        for (unsigned i = 0; i < COUNT; i++)
            twice &= A.z[r][i] == A.y[r][i] * 2.0f;
        CHECK(twice);
    }
    d.sdispls = d.rdispls = NULL;
    CHECK(tern_collective_time(f, &d, &packed, &err) == TERN_OK);
    CHECK_EQ_INT(A.coll.time_ps, cr.time_ps);
    CHECK_EQ_INT(cr.time_ps, packed.time_ps);
    CHECK_EQ_INT(B.time_ps, A.time_ps);
    printf("all-to-allv with displacements over 4 trn1 ranks: %.3f us (ring), as back to back\n",
           A.coll.time_ps / 1e6);
    /* errors: a receive block past the buffer, a negative send displacement */
    for (unsigned r = 0; r < n; r++)
        T[r][32 + 2 * n + 0] = COUNT - 20; /* rdispls[2][0]: member 2 receives 40 elements from member 0 */
    launch("trn1.32xlarge", n, 0, k, "cnt", T, 48, TERN_MODE_TIMING_ONLY, &B);
    char want_msg[160];
    snprintf(want_msg, sizeof want_msg, "member 2's block from member 0 (%llu elements at receive offset %d) ends "
             "past the buffer's %d elements", (unsigned long long)vc[0 * n + 2], COUNT - 20, COUNT);
    CHECK_MSG(B.rc == 1 && strstr(B.msg, want_msg), "'%s'", B.msg);
    for (unsigned r = 0; r < n; r++)
        T[r][32 + 2 * n + 0] = (int32_t)rd[2 * n + 0];
    T[1][16 + 5] = -4;
    launch("trn1.32xlarge", n, 0, k, "cnt", T, 48, TERN_MODE_TIMING_ONLY, &B);
    CHECK_MSG(B.rc == 1 && strstr(B.msg, "rank 1: all-to-allv send displacement [1][1] is -4, not >= 0"), "'%s'",
              B.msg);
    tern_fabric_free(f);
    tern_kernel_free(k);
}

/* The same collective with its table computed inside the kernel, as a kernel that routes its own data would:
 * iota and one VectorE op per part (counts[i][j] = 3 (4i + j), with an empty block 0 -> 0; sdispls[i][j] = 20 j +
 * 3, overlapping send blocks, which is allowed; rdispls[j][i] = 50 (3 - i) + 1), stored to an HBM scratch tensor
 * the collective waits for. tests/cli/test_launch_mpi.sh runs this program (saved as assembly) over K processes. */
static void test_alltoallv_computed(void)
{
    TEST_BEGIN("all-to-allv table computed in a kernel");
    const unsigned n = 4;
    tern_kernel *k = NULL;
    tern_error err;
    CHECK(tern_kernel_create(&CFG, "a2av_meta", &k, &err) == TERN_OK);
    tern_view x = tern_kernel_input2d(k, "x", TERN_DTYPE_FP32, ROWS, COLS);
    tern_view meta = tern_kernel_hbm_tensor(k, "meta", TERN_KIO_SCRATCH, TERN_DTYPE_INT32, 2, (uint64_t[]){12, 4});
    tern_view t = tern_kernel_sbuf(k, TERN_DTYPE_INT32, 4, 12, "mt");
    tern_view c = tern_view_block(k, t, 0, 4, 0, 4), sd = tern_view_block(k, t, 0, 4, 4, 8),
              rd = tern_view_block(k, t, 0, 4, 8, 12);
    tern_kernel_iota(k, c, 0, 4); /* 4 p + i */
    tern_kernel_tensor_scalar(k, TERN_ENGINE_VECTOR, c, c, TERN_ALU_MULT, 3.0f, TERN_ALU_BYPASS, 0.0f);
    tern_kernel_iota(k, sd, 0, 0);
    tern_kernel_tensor_scalar(k, TERN_ENGINE_VECTOR, sd, sd, TERN_ALU_MULT, 20.0f, TERN_ALU_ADD, 3.0f);
    tern_kernel_iota(k, rd, 0, 0);
    tern_kernel_tensor_scalar(k, TERN_ENGINE_VECTOR, rd, rd, TERN_ALU_MULT, -50.0f, TERN_ALU_ADD, 151.0f);
    for (unsigned part = 0; part < 3; part++)
        tern_kernel_store(k, tern_view_block(k, meta, 4 * part, 4 * part + 4, 0, 4),
                          tern_view_block(k, t, 0, 4, 4 * part, 4 * part + 4));
    tern_view y = tern_kernel_hbm_tensor(k, "y", TERN_KIO_OUTPUT, TERN_DTYPE_FP32, 2, (uint64_t[]){ROWS, COLS});
    tern_view z = tern_kernel_output2d(k, "z", TERN_DTYPE_FP32, ROWS, COLS);
    tern_view u = tern_kernel_sbuf(k, TERN_DTYPE_FP32, ROWS, COLS, "u");
    tern_kernel_all_to_allv(k, y, x, meta, 0, TERN_ALGO_RING);
    tern_kernel_load(k, u, y);
    tern_kernel_tensor_scalar(k, TERN_ENGINE_VECTOR, u, u, TERN_ALU_MULT, 2.0f, TERN_ALU_BYPASS, 0.0f);
    tern_kernel_store(k, z, u);
    CHECK_MSG(tern_kernel_status(k, &err) == TERN_OK, "%s", err.msg);
    launch("trn1.32xlarge", n, 0, k, NULL, NULL, 0, TERN_MODE_FUNCTIONAL, &A);
    CHECK_MSG(A.rc == 0, "functional: %s", A.msg);
    uint64_t vc[16], sdv[16], rdv[16];
    for (unsigned i = 0; i < n; i++)
        for (unsigned j = 0; j < n; j++) {
            vc[i * n + j] = 3 * (4 * i + j);
            sdv[i * n + j] = 20 * j + 3;
            rdv[j * n + i] = 50 * (3 - i) + 1;
        }
    tern_fabric *f = fabric("trn1.32xlarge", n, 0);
    tern_coll_desc d;
    memset(&d, 0, sizeof d);
    d.op = TERN_COLL_ALL_TO_ALLV;
    d.dtype = TERN_DTYPE_FP32;
    d.count = COUNT;
    d.algo = TERN_ALGO_RING;
    d.vcounts = vc;
    d.sdispls = sdv;
    d.rdispls = rdv;
    tern_coll_result cr;
    CHECK(tern_collective_time(f, &d, &cr, &err) == TERN_OK);
    const void *in[MAXR] = {X[0], X[1], X[2], X[3]};
    static float want[COUNT];
    for (unsigned r = 0; r < n; r++) {
        memset(want, 0, sizeof want);
        CHECK(tern_collective_reference(f, &d, TERN_ALGO_RING, in, r, want, &err) == TERN_OK);
        CHECK_MSG(!memcmp(A.y[r], want, sizeof want), "rank %u: differs from the reference of the computed table", r);
    }
    CHECK(A.y[2][151] == X[0][3 + 40] && A.y[2][1] == X[3][3 + 40] && A.y[0][151] == 0.0f); /* block 0 -> 0: empty */
    CHECK_EQ_INT(A.coll.time_ps, cr.time_ps);
    tern_fabric_free(f);
    tern_kernel_free(k);
}

int main(void)
{
    tern_error err;
    setenv("TERN_CHECK_ROUNDTRIP", "1", 1);
    if (tern_core_config_load("trn1.32xlarge", &CFG, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    for (unsigned r = 0; r < MAXR; r++)
        for (unsigned i = 0; i < COUNT; i++)
            X[r][i] = (float)(r * 10000 + i) * 0.25f - 3.0f;
    test_permute();
    test_rules();
    test_send_recv();
    test_alltoallv_displs();
    test_alltoallv_computed();
    return check_report();
}
