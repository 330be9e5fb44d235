/* Read-after-write latency on one engine (issue 11): an instruction that reads bytes the previous instruction on
 * its engine wrote starts only after that write is readable, core.costs.<engine>_raw_latency cycles after the
 * writer's occupancy. VectorE: the architecture guide's 100 extra cycles for back-to-back dependent instructions,
 * so 32 dependent tensor_scalar take 31 x 100 cycles longer than 32 independent ones (before, both took 515 cycles
 * each). ScalarE: dependent one-element activations 189 ns apart (the performance guide's figure, from which the
 * ScalarE latency is inferred). Disjoint bytes, other partitions and other engines are not dependent. */
#include "../check.h"
#include "sim_test_util.h"

#define N 515 /* fp32 elements per partition: 515 cycles per tensor_scalar */

/* 32 VectorE tensor_scalar on [128, N] fp32: dependent (each reads the previous one's output) or independent
 * (each reads the same input and writes its own output). */
static int64_t chain(tern_core *core, int dependent, int other_partitions)
{
    tern_program prog;
    tern_program_init(&prog);
    tern_error err;
    const uint64_t row = N * 4;
    for (int k = 0; k < 32; k++) {
        tern_instr t = st_instr(TERN_OP_TENSOR_SCALAR, TERN_ENGINE_VECTOR);
        t.op0 = TERN_ALU_ADD;
        t.op1 = TERN_ALU_BYPASS;
        t.imm0.f = 1.0f;
        uint64_t src = dependent ? (uint64_t)k * row : 0, dst = (uint64_t)(k + 1) * row;
        /* other_partitions: the read overlaps the previous write's bytes, but in partitions it did not write */
        unsigned sp = other_partitions && (k & 1) ? 64 : 0, dp = sp; /* k-1 wrote the other half */
        t.ap[TERN_AP_DST] = st_ap1(TERN_MEM_SBUF, TERN_DTYPE_FP32, dp, 64, dst, N);
        t.ap[TERN_AP_IN0] = st_ap1(TERN_MEM_SBUF, TERN_DTYPE_FP32, sp, 64, src, N);
        CHECK(tern_program_append(&prog, &t, &err) == TERN_OK);
    }
    tern_run_stats st;
    CHECK_MSG(tern_core_run(core, &prog, &st, &err) == TERN_OK, "run: %s", err.msg);
    tern_program_free(&prog);
    return st.time_ps;
}

static int64_t activations(tern_core *core, int count)
{
    tern_program prog;
    tern_program_init(&prog);
    tern_error err;
    for (int k = 0; k < count; k++) {
        tern_instr a = st_instr(TERN_OP_ACTIVATION, TERN_ENGINE_SCALAR);
        a.func = TERN_ACT_EXP;
        a.imm0.f = 1;
        a.ap[TERN_AP_DST] = st_ap1(TERN_MEM_SBUF, TERN_DTYPE_FP32, 0, 1, (uint64_t)(k + 1) * 64, 1);
        a.ap[TERN_AP_IN0] = st_ap1(TERN_MEM_SBUF, TERN_DTYPE_FP32, 0, 1, (uint64_t)k * 64, 1);
        CHECK(tern_program_append(&prog, &a, &err) == TERN_OK);
    }
    tern_run_stats st;
    CHECK_MSG(tern_core_run(core, &prog, &st, &err) == TERN_OK, "run: %s", err.msg);
    tern_program_free(&prog);
    return st.time_ps;
}

int main(void)
{
    tern_core *core = st_core("neuroncore-v2");
    const tern_timing_config *tc = &tern_core_get_config(core)->timing;
    double vhz = tc->clock_hz[TERN_ENGINE_VECTOR];

    TEST_BEGIN("32 dependent VectorE instructions take 31 x 100 cycles longer than 32 independent ones");
    CHECK_NEAR(tc->raw_latency[TERN_ENGINE_VECTOR], 100, 0);
    int64_t dep = chain(core, 1, 0), ind = chain(core, 0, 0);
    /* independent: back to back at N cycles each, plus the last one's 100-cycle visibility latency */
    CHECK_NEAR((double)ind, 32 * N / vhz * 1e12 + 100 / vhz * 1e12, 40);
    CHECK_NEAR((double)(dep - ind), 31 * 100 / vhz * 1e12, 40);
    printf("VectorE x32 (N=%d): independent %.1f ns, dependent %.1f ns (+%.0f cycles each)\n", N, ind * 1e-3,
           dep * 1e-3, (double)(dep - ind) * 1e-12 * vhz / 31);

    TEST_BEGIN("reads of other partitions are not dependent");
    CHECK_EQ_INT(chain(core, 1, 1), ind);

    TEST_BEGIN("dependent one-element ScalarE activations 189 ns apart");
    int64_t one = activations(core, 1), four = activations(core, 4);
    CHECK_NEAR((double)(four - one) / 3, 189000, 500);

    TEST_BEGIN("timing-only predicts the same");
    tern_core_config cfg = *tern_core_get_config(core);
    tern_core_options o = {0};
    o.mode = TERN_MODE_TIMING_ONLY;
    tern_core *t = NULL;
    tern_error err;
    CHECK(tern_core_create(&cfg, &o, &t, &err) == TERN_OK);
    CHECK_EQ_INT(chain(t, 1, 0), dep);
    tern_core_free(t);
    tern_core_free(core);
    return check_report();
}
