/* All-to-allv from inside a kernel (tern_kernel_all_to_allv; the `collective` instruction with operation 5 and its
 * n x n int32 counts in HBM operand B; docs/multichip.md "Collectives inside kernels"). On 4 ranks of
 * trn1.32xlarge, counts floor(2 (count/n) ((i+j) mod n) / n) (uneven, with zeros, as `tern collective
 * all-to-allv` uses): every rank's result is bit-identical to tern_collective_reference and zero past its received
 * blocks, the compute after it (x 2) waits for it, its time equals tern_collective_time's, timing-only gives the
 * same picoseconds, and every program survives the binary and text round trips (TERN_CHECK_ROUNDTRIP). Errors:
 * counts of the wrong size, a negative count, ranks whose counts differ, counts of the wrong dtype. */
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

#define RANKS 4
#define ROWS 8
#define COLS 128
#define COUNT (ROWS * COLS)

static tern_core_config CFG;

static tern_kernel *build(unsigned cn, tern_dtype cdt)
{
    tern_kernel *k = NULL;
    tern_error err;
    if (tern_kernel_create(&CFG, "a2av", &k, &err))
        return NULL;
    tern_view x = tern_kernel_input2d(k, "x", TERN_DTYPE_FP32, ROWS, COLS);
    tern_view cnt = tern_kernel_input2d(k, "cnt", cdt, cn, cn);
    tern_view y = tern_kernel_hbm_tensor(k, "y", TERN_KIO_OUTPUT, TERN_DTYPE_FP32, 2, (uint64_t[]){ROWS, COLS});
    tern_view z = tern_kernel_output2d(k, "z", TERN_DTYPE_FP32, ROWS, COLS);
    tern_view t = tern_kernel_sbuf(k, TERN_DTYPE_FP32, ROWS, COLS, "t");
    tern_kernel_all_to_allv(k, y, x, cnt, 0, 0);
    tern_kernel_load(k, t, y);
    tern_kernel_tensor_scalar(k, TERN_ENGINE_VECTOR, t, t, TERN_ALU_MULT, 2.0f, TERN_ALU_BYPASS, 0.0f);
    tern_kernel_store(k, z, t);
    return k;
}

static int32_t C[RANKS][RANKS * RANKS];
static float X[RANKS][COUNT];

typedef struct {
    int rc;
    char msg[1024];
    int64_t time_ps;
    tern_ranks_coll coll;
    float y[RANKS][COUNT], z[RANKS][COUNT];
} outcome;

static void launch(tern_kernel *k, unsigned cn, tern_sim_mode mode, outcome *o)
{
    memset(o, 0, sizeof *o);
    tern_error err = {0};
    tern_rt_ranks_opts ro;
    memset(&ro, 0, sizeof ro);
    ro.ranks = RANKS;
    ro.mode = mode;
    ro.threads = 1;
    tern_rt_ranks *rt = NULL;
    tern_ranks_result res;
    memset(&res, 0, sizeof res);
    tern_status st = tern_rt_ranks_create("trn1.32xlarge", &ro, &k, 1, &rt, &err);
    for (unsigned r = 0; !st && r < RANKS; r++) {
        st = tern_rt_ranks_write(rt, r, "cnt", C[r], sizeof(int32_t) * cn * cn, &err);
        if (!st && mode == TERN_MODE_FUNCTIONAL)
            st = tern_rt_ranks_write(rt, r, "x", X[r], sizeof X[r], &err);
    }
    if (!st)
        st = tern_rt_ranks_execute(rt, &res, &err);
    for (unsigned r = 0; !st && mode == TERN_MODE_FUNCTIONAL && r < RANKS; r++)
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

static outcome A, B;

int main(void)
{
    tern_error err;
    setenv("TERN_CHECK_ROUNDTRIP", "1", 1);
    if (tern_core_config_load("trn1.32xlarge", &CFG, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    uint64_t vc[RANKS * RANKS];
    for (unsigned i = 0; i < RANKS; i++)
        for (unsigned j = 0; j < RANKS; j++) {
            vc[i * RANKS + j] = 2 * (COUNT / RANKS) * ((i + j) % RANKS) / RANKS;
            for (unsigned r = 0; r < RANKS; r++)
                C[r][i * RANKS + j] = (int32_t)vc[i * RANKS + j];
        }
    for (unsigned r = 0; r < RANKS; r++)
        for (unsigned i = 0; i < COUNT; i++)
            X[r][i] = (float)(r * 10000 + i) * 0.25f - 3.0f;

    tern_kernel *k = build(RANKS, TERN_DTYPE_INT32);
    CHECK(k != NULL);
    launch(k, RANKS, TERN_MODE_FUNCTIONAL, &A);
    CHECK_MSG(A.rc == 0, "functional: %s", A.msg);

    /* the reference: the collective layer's definition, and its time */
    tern_fabric *f = NULL;
    tern_fabric_opts fo;
    memset(&fo, 0, sizeof fo);
    fo.ranks = RANKS;
    CHECK(tern_fabric_load("trn1.32xlarge", &fo, &f, &err) == TERN_OK);
    tern_coll_desc d;
    memset(&d, 0, sizeof d);
    d.op = TERN_COLL_ALL_TO_ALLV;
    d.dtype = TERN_DTYPE_FP32;
    d.count = COUNT;
    d.vcounts = vc;
    tern_coll_algo algo;
    CHECK(tern_collective_resolve(f, &d, &algo, &err) == TERN_OK);
    tern_coll_result cr;
    CHECK(tern_collective_time(f, &d, &cr, &err) == TERN_OK);
    const void *in[RANKS] = {X[0], X[1], X[2], X[3]};
    static float want[COUNT];
    for (unsigned r = 0; r < RANKS; r++) {
        memset(want, 0, sizeof want);
        CHECK(tern_collective_reference(f, &d, algo, in, r, want, &err) == TERN_OK);
        uint64_t lo, hi;
        tern_collective_defined(f, &d, r, &lo, &hi);
        uint64_t recv = 0;
        for (unsigned i = 0; i < RANKS; i++)
            recv += vc[i * RANKS + r];
        CHECK_EQ_INT((long long)hi, (long long)recv);
        CHECK_MSG(!memcmp(A.y[r] + lo, want + lo, (hi - lo) * sizeof(float)), "rank %u: received blocks differ", r);
        int zero = 1, twice = 1;
        for (uint64_t i = hi; i < COUNT; i++)
            zero &= A.y[r][i] == 0.0f && !signbit(A.y[r][i]);
        for (uint64_t i = 0; i < COUNT; i++)
            twice &= A.z[r][i] == A.y[r][i] * 2.0f;
        CHECK_MSG(zero, "rank %u: past the received blocks is not 0", r);
        CHECK_MSG(twice, "rank %u: the compute after the collective did not read its result", r);
    }
    /* rank 1 receives from member 0 its block [1], 128 elements at member 0's offset 0 (row 0's count [0][0] = 0) */
    CHECK(A.y[1][0] == X[0][0] && A.y[1][128] == X[1][vc[1 * RANKS + 0]]);
    CHECK_EQ_INT((long long)A.coll.time_ps, (long long)cr.time_ps);
    CHECK_EQ_INT((long long)A.coll.algo, (long long)algo);
    printf("all-to-allv over 4 trn1 ranks, %d fp32 elements each: %.3f us (%s), program %.3f us\n", COUNT,
           A.coll.time_ps / 1e6, tern_coll_algo_name(A.coll.algo), A.time_ps / 1e6);
    launch(k, RANKS, TERN_MODE_TIMING_ONLY, &B);
    CHECK_MSG(B.rc == 0, "timing-only: %s", B.msg);
    CHECK_EQ_INT((long long)B.time_ps, (long long)A.time_ps);
    CHECK_EQ_INT((long long)B.coll.end_ps, (long long)A.coll.end_ps);

    /* errors */
    C[2][5] = -1;
    launch(k, RANKS, TERN_MODE_TIMING_ONLY, &B);
    CHECK_MSG(B.rc == 1 && strstr(B.msg, "rank 2") && strstr(B.msg, "count [1][1]") && strstr(B.msg, "is -1"),
              "negative: '%s'", B.msg);
    C[2][5] = C[2][5 - 1] + 1; /* still a valid matrix for rank 2, but not the others' */
    launch(k, RANKS, TERN_MODE_TIMING_ONLY, &B);
    CHECK_MSG(B.rc == 1 && strstr(B.msg, "disagree") && strstr(B.msg, "counts"), "disagree: '%s'", B.msg);
    printf("%s\n", B.msg);
    tern_kernel_free(k);
    k = build(3, TERN_DTYPE_INT32);
    launch(k, 3, TERN_MODE_TIMING_ONLY, &B);
    CHECK_MSG(B.rc == 1 && strstr(B.msg, "needs 4 x 4 counts") && strstr(B.msg, "9 elements"), "size: '%s'", B.msg);
    printf("%s\n", B.msg);
    tern_kernel_free(k);
    k = build(RANKS, TERN_DTYPE_FP32);
    CHECK(k == NULL || tern_kernel_status(k, &err) != TERN_OK);
    if (k)
        CHECK_MSG(strstr(err.msg, "int32") != NULL, "dtype: '%s'", err.msg);
    tern_kernel_free(k);
    tern_fabric_free(f);
    return check_report();
}
