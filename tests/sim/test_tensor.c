/* TensorE: LoadStationary + MultiplyMoving semantics (overwrite, accumulation groups, every input dtype, ragged
 * shapes), bit-identity of the matmul implementations (reference loop, fp32 FMA chain kernels, AVX512-BF16) including
 * the inputs that must leave the fast path (subnormals, huge values), v3 transpose mode, and every rule. */
#include "check.h"
#include "sim_test_util.h"
#include "sim/matmul.h"

static uint64_t rng_state = 12345;
static double urand(void)
{
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (double)(z >> 11) * 0x1.0p-53;
}

static tern_core *core_with(const char *machine, int path)
{
    tern_core_config cfg;
    tern_error err;
    tern_core *core = NULL;
    tern_core_options o = {0};
    o.matmul_path = path;
    if (tern_core_config_load(machine, &cfg, &err) || tern_core_create(&cfg, &o, &core, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        exit(2);
    }
    return core;
}

/* Program: LS stationary [K,M] of sdt at SBUF offset 0, MM moving [K,N] of xdt at 64 KiB into PSUM offset 0. */
static tern_status run_mm2(tern_core *core, tern_dtype sdt, tern_dtype xdt, unsigned K, unsigned M, unsigned N,
                           int accumulate, tern_error *err)
{
    tern_program prog;
    tern_program_init(&prog);
    tern_instr ls = st_instr(TERN_OP_LOAD_STATIONARY, TERN_ENGINE_TENSOR);
    ls.ap[TERN_AP_IN0] = st_ap1(TERN_MEM_SBUF, sdt, 0, K, 0, M);
    tern_instr mm = st_instr(TERN_OP_MULTIPLY_MOVING, TERN_ENGINE_TENSOR);
    mm.ap[TERN_AP_IN0] = st_ap1(TERN_MEM_SBUF, xdt, 0, K, 65536, N);
    mm.ap[TERN_AP_DST] = st_ap1(TERN_MEM_PSUM, TERN_DTYPE_FP32, 0, M, 0, N);
    if (accumulate)
        mm.flags |= TERN_FLAG_ACCUMULATE;
    tern_status st = tern_program_append(&prog, &ls, err);
    if (!st)
        st = tern_program_append(&prog, &mm, err);
    if (!st)
        st = tern_core_run(core, &prog, NULL, err);
    tern_program_free(&prog);
    return st;
}

static tern_status run_mm(tern_core *core, tern_dtype dt, unsigned K, unsigned M, unsigned N, int accumulate,
                          tern_error *err)
{
    return run_mm2(core, dt, dt, K, M, N, accumulate, err);
}

/* Fill stationary and moving with values of a kind, rounded to dt. kind 0: uniform [-1,1); 1: with subnormal
 * and tiny values (leave the bf16 path); 2: wide exponents; 3: adversarial -- signed zeros, infinities, NaN,
 * values near the format's largest (overflowing partial sums) and pairs that cancel exactly. */
static void fill(float *v, size_t n, tern_dtype dt, int kind)
{
    for (size_t i = 0; i < n; i++) {
        double x = urand() * 2 - 1;
        if (kind == 1 && i % 7 == 0)
            x *= 0x1p-120;
        if (kind == 2)
            x = ldexp(x, (int)(urand() * 40) - 20);
        if (kind == 3) {
            static const double special[] = {0.0, -0.0, INFINITY, -INFINITY, NAN, 3.0e38, -3.0e38, 1.0, -1.0};
            unsigned r = (unsigned)(urand() * 64);
            x = r < 9 ? special[r] : r < 20 ? ldexp(x, 100) : r < 28 ? ldexp(x, -126) : x;
        }
        v[i] = tern_num_round_f32(dt, (float)x, NULL, 0);
    }
}

/* The stationary of dtype sdt, the moving of xdt (the same but for a mixed pair: an fp8 stationary, latched as
 * fp32, against bf16 moving rows read in place). */
static void paths_agree2(tern_dtype sdt, tern_dtype dt, unsigned K, unsigned M, unsigned N, int kind)
{
    char name[160];
    snprintf(name, sizeof name, "matmul paths agree %s%s%s K=%u M=%u N=%u kind %d", sdt != dt ? tern_dtype_name(sdt) : "",
             sdt != dt ? " x " : "", tern_dtype_name(dt), K, M, N, kind);
    TEST_BEGIN(name);
    float *s = malloc(sizeof(float) * K * M), *x = malloc(sizeof(float) * K * N);
    float *out[3], *init = malloc(sizeof(float) * M * N);
    fill(s, (size_t)K * M, sdt, kind);
    fill(x, (size_t)K * N, dt, kind);
    fill(init, (size_t)M * N, TERN_DTYPE_FP32, 0);
    const int paths[3] = {TERN_MATMUL_REFERENCE, TERN_MATMUL_FP32, TERN_MATMUL_AUTO};
    for (int p = 0; p < 3; p++) {
        tern_core *core = core_with("neuroncore-v2", paths[p]);
        tern_error err;
        st_write(core, TERN_MEM_SBUF, 0, K, 0, sdt, s, M);
        st_write(core, TERN_MEM_SBUF, 0, K, 65536, dt, x, N);
        /* first an overwrite, then an accumulate on top of it */
        CHECK_EQ_INT(run_mm2(core, sdt, dt, K, M, N, 0, &err), TERN_OK);
        CHECK_EQ_INT(run_mm2(core, sdt, dt, K, M, N, 1, &err), TERN_OK);
        out[p] = malloc(sizeof(float) * M * N);
        st_read(core, TERN_MEM_PSUM, 0, M, 0, TERN_DTYPE_FP32, out[p], N);
        tern_core_free(core);
    }
    CHECK_MSG(memcmp(out[0], out[1], sizeof(float) * M * N) == 0, "fp32 FMA path differs from the reference loop");
    CHECK_MSG(memcmp(out[0], out[2], sizeof(float) * M * N) == 0, "automatic (bf16) path differs from the reference");
    /* And the reference is the documented fma chain: out = 2 * chain (overwrite then accumulate). */
    size_t bad = 0;
    for (unsigned m = 0; m < M; m++)
        for (unsigned n = 0; n < N; n++) {
            float acc = 0.0f;
            for (unsigned k = 0; k < K; k++)
                acc = fmaf(s[(size_t)k * M + m], x[(size_t)k * N + n], acc);
            float want = acc + acc;
            if (memcmp(&want, &out[0][(size_t)m * N + n], 4) != 0 && !(isnan(want) && isnan(out[0][(size_t)m * N + n])))
                bad++;
        }
    CHECK_MSG(bad == 0, "%zu outputs differ from the fma chain", bad);
    for (int p = 0; p < 3; p++)
        free(out[p]);
    free(s);
    free(x);
    free(init);
}

static void paths_agree(tern_dtype dt, unsigned K, unsigned M, unsigned N, int kind)
{
    paths_agree2(dt, dt, K, M, N, kind);
}

static void semantics(void)
{
    TEST_BEGIN("matmul small exact values");
    tern_core *core = st_core("neuroncore-v2");
    tern_error err;
    /* stationary [K=2, M=3], moving [K=2, N=4] */
    const float s[6] = {1, 2, 3, 4, 5, 6};
    const float x[8] = {1, 0, -1, 2, 0.5f, 1, 0, -2};
    st_write(core, TERN_MEM_SBUF, 0, 2, 0, TERN_DTYPE_BF16, s, 3);
    st_write(core, TERN_MEM_SBUF, 0, 2, 65536, TERN_DTYPE_BF16, x, 4);
    CHECK_EQ_INT(run_mm(core, TERN_DTYPE_BF16, 2, 3, 4, 0, &err), TERN_OK);
    float y[12];
    st_read(core, TERN_MEM_PSUM, 0, 3, 0, TERN_DTYPE_FP32, y, 4);
    for (int m = 0; m < 3; m++)
        for (int n = 0; n < 4; n++)
            CHECK_NEAR(y[m * 4 + n], s[m] * x[n] + s[3 + m] * x[4 + n], 0);
    TEST_BEGIN("matmul accumulation group adds into PSUM");
    CHECK_EQ_INT(run_mm(core, TERN_DTYPE_BF16, 2, 3, 4, 1, &err), TERN_OK);
    st_read(core, TERN_MEM_PSUM, 0, 3, 0, TERN_DTYPE_FP32, y, 4);
    CHECK_NEAR(y[0], 2 * (1 * 1 + 4 * 0.5), 0);
    CHECK_NEAR(y[11], 2 * (3 * 2 + 6 * -2), 0);
    tern_core_free(core);
}

static tern_status run_one_after_ls(tern_core *core, const tern_instr *mm, tern_error *err)
{
    tern_program prog;
    tern_program_init(&prog);
    tern_instr ls = st_instr(TERN_OP_LOAD_STATIONARY, TERN_ENGINE_TENSOR);
    ls.ap[TERN_AP_IN0] = st_ap1(TERN_MEM_SBUF, TERN_DTYPE_BF16, 0, 128, 0, 128);
    tern_program_append(&prog, &ls, err);
    tern_program_append(&prog, mm, err);
    tern_status st = tern_core_run(core, &prog, NULL, err);
    tern_program_free(&prog);
    return st;
}

static tern_instr good_mm(void)
{
    tern_instr mm = st_instr(TERN_OP_MULTIPLY_MOVING, TERN_ENGINE_TENSOR);
    mm.ap[TERN_AP_IN0] = st_ap1(TERN_MEM_SBUF, TERN_DTYPE_BF16, 0, 128, 65536, 512);
    mm.ap[TERN_AP_DST] = st_ap1(TERN_MEM_PSUM, TERN_DTYPE_FP32, 0, 128, 0, 512);
    return mm;
}

#define REJECT(label, core, ins, runner, needle)                                                                \
    do {                                                                                                        \
        TEST_BEGIN(label);                                                                                      \
        tern_error e_;                                                                                          \
        tern_status s_ = runner(core, ins, &e_);                                                                \
        CHECK_MSG(s_ != TERN_OK, "expected a rejection");                                                       \
        if (s_ != TERN_OK)                                                                                      \
            CHECK_STR_CONTAINS(e_.msg, needle);                                                                 \
    } while (0)

static void rules(void)
{
    tern_core *core = st_core("neuroncore-v2");
    float zeros[512] = {0};
    for (unsigned p = 0; p < 128; p++) {
        st_write(core, TERN_MEM_SBUF, p, 1, 0, TERN_DTYPE_BF16, zeros, 512);
        st_write(core, TERN_MEM_SBUF, p, 1, 65536, TERN_DTYPE_BF16, zeros, 512);
    }
    tern_instr ins;

    TEST_BEGIN("good matmul runs");
    ins = good_mm();
    tern_error err;
    CHECK_EQ_INT(run_one_after_ls(core, &ins, &err), TERN_OK);

    ins = st_instr(TERN_OP_LOAD_STATIONARY, TERN_ENGINE_TENSOR);
    ins.ap[TERN_AP_IN0] = st_ap1(TERN_MEM_SBUF, TERN_DTYPE_BF16, 0, 128, 0, 129);
    REJECT("stationary free > 128 PE columns", core, &ins, st_run, "129 exceeds 128 PE columns");
    ins.ap[TERN_AP_IN0] = st_ap1(TERN_MEM_PSUM, TERN_DTYPE_BF16, 0, 128, 0, 128);
    REJECT("stationary in PSUM", core, &ins, st_run, "memory psum not reachable");
    ins.ap[TERN_AP_IN0] = st_ap1(TERN_MEM_SBUF, TERN_DTYPE_INT32, 0, 128, 0, 128);
    REJECT("integer stationary", core, &ins, st_run, "dtype int32 not a TensorE input");
    ins.ap[TERN_AP_IN0] = st_ap1(TERN_MEM_SBUF, TERN_DTYPE_BF16, 16, 32, 0, 128);
    REJECT("start-partition rule", core, &ins, st_run, "start partition 16 not allowed for 32 partitions");
    ins.engine = TERN_ENGINE_VECTOR;
    ins.ap[TERN_AP_IN0] = st_ap1(TERN_MEM_SBUF, TERN_DTYPE_BF16, 0, 128, 0, 128);
    REJECT("load_stationary on VectorE", core, &ins, st_run, "cannot issue on the vector engine");

    {
        /* The PE array keeps its stationary across runs, so this needs a core that never loaded one. */
        tern_core *fresh = st_core("neuroncore-v2");
        ins = good_mm();
        REJECT("multiply_moving without a stationary", fresh, &ins, st_run, "no stationary operand loaded");
        tern_core_free(fresh);
    }
    ins = good_mm();
    ins.ap[TERN_AP_IN0].dims[0].num = 513;
    ins.ap[TERN_AP_DST].dims[0].num = 513;
    REJECT("moving free > 512", core, &ins, run_one_after_ls, "moving free size 513 exceeds 512");
    ins = good_mm();
    ins.ap[TERN_AP_DST].mem = TERN_MEM_SBUF;
    REJECT("matmul writes SBUF", core, &ins, run_one_after_ls, "memory sbuf not reachable here (allowed: PSUM)");
    ins = good_mm();
    ins.ap[TERN_AP_DST].dtype = TERN_DTYPE_BF16;
    REJECT("bf16 PSUM output on v2", core, &ins, run_one_after_ls, "bf16 PSUM output needs NeuronCore-v4");
    ins = good_mm();
    ins.ap[TERN_AP_DST].offset = 1024;
    REJECT("output crosses a PSUM bank", core, &ins, run_one_after_ls, "within one PSUM bank of 2048 bytes");
    ins = good_mm();
    ins.ap[TERN_AP_DST].dims[0].num = 256;
    REJECT("output free differs from moving", core, &ins, run_one_after_ls, "must equal the moving free size 512");
    ins = good_mm();
    ins.ap[TERN_AP_IN0].num_partitions = 64;
    REJECT("contraction mismatch", core, &ins, run_one_after_ls, "contraction 64 differs from the stationary");
    ins = good_mm();
    ins.ap[TERN_AP_DST].num_partitions = 64;
    REJECT("output partitions != stationary free", core, &ins, run_one_after_ls, "must equal the stationary free size 128");
    ins = good_mm();
    ins.ap[TERN_AP_IN0].dtype = TERN_DTYPE_FP32;
    ins.ap[TERN_AP_IN0].dims[0].num = 256;
    ins.ap[TERN_AP_DST].dims[0].num = 256;
    REJECT("fp32 moving with bf16 stationary", core, &ins, run_one_after_ls, "fp32/tf32 pair only with fp32/tf32");
    ins = good_mm();
    ins.flags |= TERN_FLAG_DOUBLE_ROW;
    REJECT("double-row mode", core, &ins, run_one_after_ls, "double-row");

    /* Accumulating onto PSUM written by VectorE is undefined on the hardware: rejected. */
    {
        TEST_BEGIN("accumulate onto non-matmul PSUM data");
        tern_program prog;
        tern_program_init(&prog);
        tern_instr ms = st_instr(TERN_OP_MEMSET, TERN_ENGINE_VECTOR);
        ms.ap[TERN_AP_DST] = st_ap1(TERN_MEM_PSUM, TERN_DTYPE_FP32, 0, 128, 4096, 512);
        ms.signal_sem = 0;
        tern_instr ls = st_instr(TERN_OP_LOAD_STATIONARY, TERN_ENGINE_TENSOR);
        ls.ap[TERN_AP_IN0] = st_ap1(TERN_MEM_SBUF, TERN_DTYPE_BF16, 0, 128, 0, 128);
        tern_instr mm = good_mm();
        mm.ap[TERN_AP_DST].offset = 4096;
        mm.flags |= TERN_FLAG_ACCUMULATE;
        mm.wait_sem = 0;
        mm.wait_value = 1;
        tern_program_append(&prog, &ms, &err);
        tern_program_append(&prog, &ls, &err);
        tern_program_append(&prog, &mm, &err);
        tern_status st = tern_core_run(core, &prog, NULL, &err);
        CHECK(st != TERN_OK);
        CHECK_STR_CONTAINS(err.msg, "accumulate into PSUM not last written by a matmul group");
        tern_program_free(&prog);
    }

    ins = st_instr(TERN_OP_TRANSPOSE_PE, TERN_ENGINE_TENSOR);
    ins.ap[TERN_AP_IN0] = st_ap1(TERN_MEM_SBUF, TERN_DTYPE_BF16, 0, 64, 0, 32);
    ins.ap[TERN_AP_DST] = st_ap1(TERN_MEM_PSUM, TERN_DTYPE_BF16, 0, 32, 0, 64);
    REJECT("transpose mode on v2", core, &ins, st_run, "transpose mode needs NeuronCore-v3");
    tern_core_free(core);

    /* v3: transpose mode works bit-exactly, and its shape rules hold. */
    core = st_core("neuroncore-v3");
    TEST_BEGIN("v3 transpose mode");
    float src[64 * 32], dst[32 * 64];
    for (int i = 0; i < 64 * 32; i++)
        src[i] = tern_num_round_f32(TERN_DTYPE_BF16, (float)(i * 0.37 - 300), NULL, 0);
    st_write(core, TERN_MEM_SBUF, 0, 64, 0, TERN_DTYPE_BF16, src, 32);
    CHECK_EQ_INT(st_run(core, &ins, &err), TERN_OK);
    st_read(core, TERN_MEM_PSUM, 0, 32, 0, TERN_DTYPE_BF16, dst, 64);
    int wrong = 0;
    for (int p = 0; p < 64; p++)
        for (int f = 0; f < 32; f++)
            wrong += dst[f * 64 + p] != src[p * 32 + f];
    CHECK_EQ_INT(wrong, 0);
    ins.ap[TERN_AP_DST] = st_ap1(TERN_MEM_PSUM, TERN_DTYPE_BF16, 0, 64, 0, 32);
    REJECT("transpose output shape", core, &ins, st_run, "shape [64, 32] must be [32, 64]");
    ins.ap[TERN_AP_DST] = st_ap1(TERN_MEM_PSUM, TERN_DTYPE_FP32, 0, 32, 0, 64);
    REJECT("transpose dtype change", core, &ins, st_run, "must match the input's bf16");
    tern_core_free(core);
}

/* The packed moving operand is cached between matmuls; every way of changing SBUF under it must invalidate it. */
static void moving_cache_invalidation(void)
{
    tern_core *core = st_core("neuroncore-v2");
    tern_error err;
    float s[128 * 128], x[128 * 512], y[128 * 512];
    for (int i = 0; i < 128 * 128; i++)
        s[i] = (i % 129 == 0) ? 1.0f : 0.0f; /* identity-ish stationary: out row m = moving row m */
    for (int i = 0; i < 128 * 512; i++)
        x[i] = tern_num_round_f32(TERN_DTYPE_BF16, (float)(i % 1000) * 0.25f, NULL, 0);
    st_write(core, TERN_MEM_SBUF, 0, 128, 0, TERN_DTYPE_BF16, s, 128);
    st_write(core, TERN_MEM_SBUF, 0, 128, 65536, TERN_DTYPE_BF16, x, 512);
    TEST_BEGIN("moving operand cache: first use");
    CHECK_EQ_INT(run_mm(core, TERN_DTYPE_BF16, 128, 128, 512, 0, &err), TERN_OK);
    st_read(core, TERN_MEM_PSUM, 0, 128, 0, TERN_DTYPE_FP32, y, 512);
    CHECK(y[5 * 512 + 7] == x[5 * 512 + 7]);

    TEST_BEGIN("moving operand cache: host write invalidates");
    float v = 3.0f;
    st_write(core, TERN_MEM_SBUF, 5, 1, 65536 + 7 * 2, TERN_DTYPE_BF16, &v, 1);
    CHECK_EQ_INT(run_mm(core, TERN_DTYPE_BF16, 128, 128, 512, 0, &err), TERN_OK);
    st_read(core, TERN_MEM_PSUM, 0, 128, 0, TERN_DTYPE_FP32, y, 512);
    CHECK_NEAR(y[5 * 512 + 7], 3.0f, 0);

    TEST_BEGIN("moving operand cache: an instruction's write invalidates");
    tern_program prog;
    tern_program_init(&prog);
    tern_instr ms = st_instr(TERN_OP_MEMSET, TERN_ENGINE_VECTOR);
    ms.ap[TERN_AP_DST] = st_ap1(TERN_MEM_SBUF, TERN_DTYPE_BF16, 64, 1, 65536 + 100 * 2, 1);
    ms.imm0.f = -7.0f;
    ms.signal_sem = 0;
    tern_instr mm = st_instr(TERN_OP_MULTIPLY_MOVING, TERN_ENGINE_TENSOR);
    mm.ap[TERN_AP_IN0] = st_ap1(TERN_MEM_SBUF, TERN_DTYPE_BF16, 0, 128, 65536, 512);
    mm.ap[TERN_AP_DST] = st_ap1(TERN_MEM_PSUM, TERN_DTYPE_FP32, 0, 128, 0, 512);
    mm.wait_sem = 0;
    mm.wait_value = 1;
    tern_program_append(&prog, &ms, &err);
    tern_program_append(&prog, &mm, &err);
    CHECK_EQ_INT(tern_core_run(core, &prog, NULL, &err), TERN_OK);
    tern_program_free(&prog);
    st_read(core, TERN_MEM_PSUM, 0, 128, 0, TERN_DTYPE_FP32, y, 512);
    CHECK_NEAR(y[64 * 512 + 100], -7.0f, 0);
    CHECK_NEAR(y[5 * 512 + 7], 3.0f, 0);

    TEST_BEGIN("moving operand cache: a DMA write invalidates");
    uint16_t bits = tern_f32_to_bf16(11.0f, NULL, 0);
    CHECK_EQ_INT(tern_core_hbm_write(core, 4096, &bits, 2, &err), TERN_OK);
    tern_program_init(&prog);
    tern_instr d = st_instr(TERN_OP_DMA_COPY, TERN_ENGINE_SYNC);
    d.ap[TERN_AP_DST] = st_ap1(TERN_MEM_SBUF, TERN_DTYPE_BF16, 127, 1, 65536 + 511 * 2, 1);
    d.ap[TERN_AP_IN0] = st_ap1(TERN_MEM_HBM, TERN_DTYPE_BF16, 0, 1, 4096, 1);
    d.signal_sem = 1;
    mm.wait_sem = 1;
    tern_program_append(&prog, &d, &err);
    tern_program_append(&prog, &mm, &err);
    CHECK_EQ_INT(tern_core_run(core, &prog, NULL, &err), TERN_OK);
    tern_program_free(&prog);
    st_read(core, TERN_MEM_PSUM, 0, 128, 0, TERN_DTYPE_FP32, y, 512);
    CHECK_NEAR(y[127 * 512 + 511], 11.0f, 0);

    /* The packed stationary operand is cached too (the same SBUF operand latched again) */
    TEST_BEGIN("stationary operand cache: a second latch gives the same result");
    CHECK_EQ_INT(run_mm(core, TERN_DTYPE_BF16, 128, 128, 512, 0, &err), TERN_OK);
    st_read(core, TERN_MEM_PSUM, 0, 128, 0, TERN_DTYPE_FP32, y, 512);
    CHECK_NEAR(y[5 * 512 + 7], 3.0f, 0);
    TEST_BEGIN("stationary operand cache: host write invalidates");
    float two = 2.0f;
    st_write(core, TERN_MEM_SBUF, 5, 1, 5 * 2, TERN_DTYPE_BF16, &two, 1); /* s[k=5][m=5] = 2 */
    CHECK_EQ_INT(run_mm(core, TERN_DTYPE_BF16, 128, 128, 512, 0, &err), TERN_OK);
    st_read(core, TERN_MEM_PSUM, 0, 128, 0, TERN_DTYPE_FP32, y, 512);
    CHECK_NEAR(y[5 * 512 + 7], 6.0f, 0);
    TEST_BEGIN("stationary operand cache: an instruction's write invalidates");
    tern_program_init(&prog);
    ms.ap[TERN_AP_DST] = st_ap1(TERN_MEM_SBUF, TERN_DTYPE_BF16, 0, 32, 5 * 2, 1); /* s[k < 32][m = 5] = 0 */
    ms.imm0.f = 0.0f;
    ms.signal_sem = 2;
    tern_instr ls = st_instr(TERN_OP_LOAD_STATIONARY, TERN_ENGINE_TENSOR);
    ls.ap[TERN_AP_IN0] = st_ap1(TERN_MEM_SBUF, TERN_DTYPE_BF16, 0, 128, 0, 128);
    ls.wait_sem = 2;
    ls.wait_value = 1;
    mm.wait_sem = TERN_SEM_NONE;
    mm.wait_value = 0;
    tern_program_append(&prog, &ms, &err);
    tern_program_append(&prog, &ls, &err);
    tern_program_append(&prog, &mm, &err);
    tern_status rs = tern_core_run(core, &prog, NULL, &err);
    CHECK_MSG(rs == TERN_OK, "run: %s", err.msg);
    tern_program_free(&prog);
    st_read(core, TERN_MEM_PSUM, 0, 128, 0, TERN_DTYPE_FP32, y, 512);
    CHECK_NEAR(y[5 * 512 + 7], 0.0f, 0);
    CHECK_NEAR(y[6 * 512 + 7], x[6 * 512 + 7], 0);
    tern_core_free(core);
}

/* v3 double-row FP8: [128, 2, F] operands contract over 256 rows (k = 2p + r), at the time of one matmul. */
static void double_row(void)
{
    const unsigned P = 128, M = 96, N = 300;
    float *s = malloc(sizeof(float) * P * 2 * M), *x = malloc(sizeof(float) * P * 2 * N), *y[2];
    fill(s, (size_t)P * 2 * M, TERN_DTYPE_FP8_E4M3, 0);
    fill(x, (size_t)P * 2 * N, TERN_DTYPE_FP8_E5M2, 0);
    const int paths[2] = {TERN_MATMUL_REFERENCE, TERN_MATMUL_AUTO};
    tern_error err;
    for (int pth = 0; pth < 2; pth++) {
        TEST_BEGIN(pth ? "double-row fp8 (fast path)" : "double-row fp8 (reference path)");
        tern_core *core = core_with("neuroncore-v3", paths[pth]);
        st_write(core, TERN_MEM_SBUF, 0, P, 0, TERN_DTYPE_FP8_E4M3, s, 2 * M);
        st_write(core, TERN_MEM_SBUF, 0, P, 65536, TERN_DTYPE_FP8_E5M2, x, 2 * N);
        tern_program prog;
        tern_program_init(&prog);
        int32_t steps_s[2] = {(int32_t)M, 1}, steps_x[2] = {(int32_t)N, 1};
        uint32_t nums_s[2] = {2, M}, nums_x[2] = {2, N};
        tern_instr ls = st_instr(TERN_OP_LOAD_STATIONARY, TERN_ENGINE_TENSOR);
        ls.ap[TERN_AP_IN0] = st_ap(TERN_MEM_SBUF, TERN_DTYPE_FP8_E4M3, 0, P, 0, 2, steps_s, nums_s);
        ls.flags = TERN_FLAG_DOUBLE_ROW;
        tern_instr mm = st_instr(TERN_OP_MULTIPLY_MOVING, TERN_ENGINE_TENSOR);
        mm.ap[TERN_AP_IN0] = st_ap(TERN_MEM_SBUF, TERN_DTYPE_FP8_E5M2, 0, P, 65536, 2, steps_x, nums_x);
        mm.ap[TERN_AP_DST] = st_ap1(TERN_MEM_PSUM, TERN_DTYPE_FP32, 0, M, 0, N);
        mm.flags = TERN_FLAG_DOUBLE_ROW;
        tern_program_append(&prog, &ls, &err);
        tern_program_append(&prog, &mm, &err);
        tern_run_stats stats;
        tern_status st = tern_core_run(core, &prog, &stats, &err);
        CHECK_MSG(st == TERN_OK, "run: %s", err.msg);
        CHECK_EQ_INT(stats.macs, (uint64_t)P * 2 * M * N);
        tern_program_free(&prog);
        y[pth] = malloc(sizeof(float) * M * N);
        st_read(core, TERN_MEM_PSUM, 0, M, 0, TERN_DTYPE_FP32, y[pth], N);
        size_t bad = 0;
        for (unsigned m = 0; m < M; m++)
            for (unsigned n = 0; n < N; n++) {
                float acc = 0.0f;
                for (unsigned p = 0; p < P; p++)
                    for (unsigned r = 0; r < 2; r++)
                        acc = fmaf(s[(size_t)p * 2 * M + r * M + m], x[(size_t)p * 2 * N + r * N + n], acc);
                bad += memcmp(&acc, &y[pth][(size_t)m * N + n], 4) != 0;
            }
        CHECK_MSG(bad == 0, "%zu outputs differ from the fma chain over k = 2p + r", bad);
        tern_core_free(core);
    }
    free(y[0]);
    free(y[1]);

    /* rules */
    int32_t steps[2] = {(int32_t)M, 1};
    uint32_t nums[2] = {2, M};
    tern_instr ls = st_instr(TERN_OP_LOAD_STATIONARY, TERN_ENGINE_TENSOR);
    ls.ap[TERN_AP_IN0] = st_ap(TERN_MEM_SBUF, TERN_DTYPE_FP8_E4M3, 0, P, 0, 2, steps, nums);
    ls.flags = TERN_FLAG_DOUBLE_ROW;
    tern_core *v2 = st_core("neuroncore-v2");
    REJECT("double-row on v2", v2, &ls, st_run, "double-row FP8 needs NeuronCore-v3 or later");
    tern_core_free(v2);
    tern_core *v3 = st_core("neuroncore-v3");
    ls.ap[TERN_AP_IN0].dtype = TERN_DTYPE_BF16;
    REJECT("double-row with bf16", v3, &ls, st_run, "double-row mode needs an fp8 dtype, got bf16");
    ls.ap[TERN_AP_IN0].dtype = TERN_DTYPE_FP8_E4M3;
    ls.ap[TERN_AP_IN0].dims[0].num = 3;
    REJECT("double-row outer size 3", v3, &ls, st_run, "double-row operand must be [P, 2, F]");
    tern_core_free(v3);
    free(s);
    free(x);
}

/* The stationary s [K][M] against the K x K identity (a transpose through the array) on the reference path and on
 * the fast one, an overwrite then an accumulate on top of it: out[path][acc] (caller frees); returns how many
 * outputs differ between the two paths. */
static size_t identity_on_paths(tern_dtype dt, const float *s, unsigned K, unsigned M, float *out[2][2])
{
    const unsigned N = K;
    float *x = calloc((size_t)K * N, sizeof(float));
    for (unsigned k = 0; k < K; k++)
        x[(size_t)k * N + k] = 1.0f;
    const int paths[2] = {TERN_MATMUL_REFERENCE, TERN_MATMUL_AUTO};
    for (int p = 0; p < 2; p++) {
        tern_core *core = core_with("neuroncore-v2", paths[p]);
        tern_error err;
        st_write(core, TERN_MEM_SBUF, 0, K, 0, dt, s, M);
        st_write(core, TERN_MEM_SBUF, 0, K, 65536, dt, x, N);
        for (int acc = 0; acc < 2; acc++) {
            CHECK_EQ_INT(run_mm(core, dt, K, M, N, acc, &err), TERN_OK);
            out[p][acc] = malloc(sizeof(float) * M * N);
            st_read(core, TERN_MEM_PSUM, 0, M, 0, TERN_DTYPE_FP32, out[p][acc], N);
        }
        tern_core_free(core);
    }
    size_t bad = 0;
    for (int acc = 0; acc < 2; acc++)
        for (size_t i = 0; i < (size_t)M * N; i++)
            bad += memcmp(&out[0][acc][i], &out[1][acc][i], 4) != 0;
    free(x);
    return bad;
}

/* A transpose through the array: the moving operand is the identity. The shortcut must give the fma chain's
 * bits (-0 becomes +0, subnormals kept) and must step aside when a stationary value is infinite or NaN. */
static void identity_agrees(int special, tern_dtype dt)
{
    char name[96];
    snprintf(name, sizeof name, "identity moving operand matches the reference (%s, %s)",
             special ? "with inf and NaN" : "signed zeros, subnormals", tern_dtype_name(dt));
    TEST_BEGIN(name);
    const unsigned K = 96, M = 80, N = 96;
    float *s = malloc(sizeof(float) * K * M), *out[2][2];
    fill(s, (size_t)K * M, dt, 2);
    s[5] = -0.0f;
    s[17] = tern_num_round_f32(dt, 0x1p-130f, NULL, 0); /* subnormal in fp32 and bf16 */
    s[18] = -0x1p-149f * (dt == TERN_DTYPE_FP32);
    if (special) {
        s[K * M / 2] = INFINITY;
        s[K * M / 3] = NAN;
    }
    size_t bad = identity_on_paths(dt, s, K, M, out);
    CHECK_MSG(bad == 0, "%zu outputs differ from the reference loop", bad);
    if (!special) {
        CHECK_MSG(signbit(out[1][0][(size_t)5 * N + 0]) == 0, "-0 through the chain must come out +0");
        CHECK_MSG(out[1][0][(size_t)17 * N + 0] == s[17] && s[17] != 0, "subnormal kept");
        CHECK_MSG(out[1][1][(size_t)17 * N + 0] == 2 * s[17], "subnormal accumulated");
    } else {
        /* s[48][0] is infinite: inf * 0 poisons every other output of row m = 0 */
        CHECK_MSG(isnan(out[1][0][0]), "inf * 0 in the chain must give NaN");
    }
    for (int p = 0; p < 2; p++)
        for (int acc = 0; acc < 2; acc++)
            free(out[p][acc]);
    free(s);
}

/* Transposes of every block shape (16-wide register blocks and their tails), from a stationary latched without
 * packing (the fp32-chain hosts): the reference loop's bits, an overwrite then an accumulate on top, with and without
 * infinities and NaNs (which must leave the shortcut for the chain). */
static void transpose_shapes(void)
{
    static const unsigned shapes[][2] = {{1, 1}, {5, 3}, {16, 16}, {17, 33}, {100, 7}, {31, 128}, {128, 64}, {128, 128}};
    for (unsigned t = 0; t < sizeof shapes / sizeof shapes[0]; t++)
        for (int kind = 0; kind < 4; kind += 3) {
            const unsigned K = shapes[t][0], M = shapes[t][1];
            char name[128];
            snprintf(name, sizeof name, "transpose K=%u M=%u kind %d: the reference's bits", K, M, kind);
            TEST_BEGIN(name);
            float *s = malloc(sizeof(float) * K * M), *out[2][2];
            fill(s, (size_t)K * M, TERN_DTYPE_BF16, kind);
            size_t bad = identity_on_paths(TERN_DTYPE_BF16, s, K, M, out);
            CHECK_MSG(bad == 0, "%zu outputs differ from the reference loop", bad);
            for (int p = 0; p < 2; p++)
                for (int acc = 0; acc < 2; acc++)
                    free(out[p][acc]);
            free(s);
        }
}

/* A stationary latched without packing keeps the values it had when latched: a write to its bytes after the latch
 * (an instruction on another engine, ordered by semaphores between the latch and the multiply) must not reach the
 * multiply or a transpose; a latch after the write sees it. A moving operand remembered as the identity stops being
 * one when an instruction or the host writes it. Each program runs on the reference path and on the fast one, on
 * one and on two host threads (the background lane), and must give the same bits. */
static void lazy_latch(void)
{
    TEST_BEGIN("stationary latched, then written: the multiply and the transpose see the latched values");
    const unsigned K = 64, M = 48, N = 40;
    const uint64_t SX = 65536, SI = 131072;
    float *s = malloc(sizeof(float) * K * M), *x = malloc(sizeof(float) * K * N), *id = calloc((size_t)K * K, 4);
    fill(s, (size_t)K * M, TERN_DTYPE_BF16, 0);
    fill(x, (size_t)K * N, TERN_DTYPE_BF16, 0);
    for (unsigned k = 0; k < K; k++)
        id[(size_t)k * K + k] = 1.0f;
    /* outputs: [0] S^T X, [1] S^T (transpose, latched values), [2] S'^T (after the write), [3] S'^T J (J: the
     * identity with column 3 zeroed by an instruction), [4] S'^T J' (and a diagonal 2 written by the host) */
    const uint64_t bank = 2048;
    float *out[2][2][5];
    tern_error err;
    for (int th = 0; th < 2; th++)
        for (int p = 0; p < 2; p++) {
            tern_core_config cfg;
            tern_core_options o = {0};
            o.matmul_path = p ? TERN_MATMUL_AUTO : TERN_MATMUL_REFERENCE;
            o.threads = th ? 2 : 1;
            tern_core *core = NULL;
            if (tern_core_config_load("neuroncore-v2", &cfg, &err) || tern_core_create(&cfg, &o, &core, &err)) {
                fprintf(stderr, "%s\n", err.msg);
                exit(2);
            }
            st_write(core, TERN_MEM_SBUF, 0, K, 0, TERN_DTYPE_BF16, s, M);
            st_write(core, TERN_MEM_SBUF, 0, K, SX, TERN_DTYPE_BF16, x, N);
            st_write(core, TERN_MEM_SBUF, 0, K, SI, TERN_DTYPE_BF16, id, K);
            tern_program prog;
            tern_program_init(&prog);
            tern_instr ls = st_instr(TERN_OP_LOAD_STATIONARY, TERN_ENGINE_TENSOR);
            ls.ap[TERN_AP_IN0] = st_ap1(TERN_MEM_SBUF, TERN_DTYPE_BF16, 0, K, 0, M);
            ls.signal_sem = 0;
            tern_instr ms = st_instr(TERN_OP_MEMSET, TERN_ENGINE_VECTOR); /* S rows 0..7, columns 2..5 */
            ms.ap[TERN_AP_DST] = st_ap1(TERN_MEM_SBUF, TERN_DTYPE_BF16, 0, 8, 2 * 2, 4);
            ms.imm0.f = 9.0f;
            ms.wait_sem = 0;
            ms.wait_value = 1;
            ms.signal_sem = 1;
            tern_instr mm[5];
            for (int i = 0; i < 5; i++) {
                mm[i] = st_instr(TERN_OP_MULTIPLY_MOVING, TERN_ENGINE_TENSOR);
                mm[i].ap[TERN_AP_IN0] = st_ap1(TERN_MEM_SBUF, TERN_DTYPE_BF16, 0, K, i ? SI : SX, i ? K : N);
                mm[i].ap[TERN_AP_DST] = st_ap1(TERN_MEM_PSUM, TERN_DTYPE_FP32, 0, M, (uint64_t)i * bank, i ? K : N);
            }
            mm[0].wait_sem = 1;
            mm[0].wait_value = 1;
            tern_instr ms2 = st_instr(TERN_OP_MEMSET, TERN_ENGINE_VECTOR); /* J: the identity, rows 0..31 of column 3 zeroed */
            ms2.ap[TERN_AP_DST] = st_ap1(TERN_MEM_SBUF, TERN_DTYPE_BF16, 0, 32, SI + 3 * 2, 1);
            ms2.imm0.f = 0.0f;
            ms2.wait_sem = 2;
            ms2.wait_value = 1;
            ms2.signal_sem = 3;
            mm[2].signal_sem = 2;
            mm[3].wait_sem = 3;
            mm[3].wait_value = 1;
            CHECK_EQ_INT(tern_program_append(&prog, &ls, &err), TERN_OK);
            CHECK_EQ_INT(tern_program_append(&prog, &ms, &err), TERN_OK);
            CHECK_EQ_INT(tern_program_append(&prog, &mm[0], &err), TERN_OK);
            CHECK_EQ_INT(tern_program_append(&prog, &mm[1], &err), TERN_OK);
            tern_instr ls2 = ls; /* latched again: S' */
            ls2.signal_sem = TERN_SEM_NONE;
            CHECK_EQ_INT(tern_program_append(&prog, &ls2, &err), TERN_OK);
            CHECK_EQ_INT(tern_program_append(&prog, &mm[2], &err), TERN_OK);
            CHECK_EQ_INT(tern_program_append(&prog, &ms2, &err), TERN_OK);
            CHECK_EQ_INT(tern_program_append(&prog, &mm[3], &err), TERN_OK);
            tern_status st = tern_core_run(core, &prog, NULL, &err);
            CHECK_MSG(st == TERN_OK, "run: %s", err.msg);
            tern_program_free(&prog);
            /* J' from the host: a diagonal 2 (row 20), then the transpose once more through a new program */
            float two = 2.0f;
            st_write(core, TERN_MEM_SBUF, 20, 1, SI + 20 * 2, TERN_DTYPE_BF16, &two, 1);
            tern_program_init(&prog);
            CHECK_EQ_INT(tern_program_append(&prog, &ls2, &err), TERN_OK);
            CHECK_EQ_INT(tern_program_append(&prog, &mm[4], &err), TERN_OK);
            st = tern_core_run(core, &prog, NULL, &err);
            CHECK_MSG(st == TERN_OK, "second run: %s", err.msg);
            tern_program_free(&prog);
            for (int i = 0; i < 5; i++) {
                unsigned w = i ? K : N;
                out[th][p][i] = malloc(sizeof(float) * M * w);
                st_read(core, TERN_MEM_PSUM, 0, M, (uint64_t)i * bank, TERN_DTYPE_FP32, out[th][p][i], w);
            }
            tern_core_free(core);
        }
    size_t bad = 0;
    for (int th = 0; th < 2; th++)
        for (int p = 0; p < 2; p++)
            for (int i = 0; i < 5; i++)
                bad += memcmp(out[th][p][i], out[0][0][i], sizeof(float) * M * (i ? K : N)) != 0;
    CHECK_MSG(bad == 0, "%zu of 20 outputs differ from the reference on one thread", bad);
    /* the values themselves: S[4][3] (row 4, column 3) was 9 only from the write on */
    const float *t1 = out[1][1][1], *t2 = out[1][1][2], *t3 = out[1][1][3], *t4 = out[1][1][4];
    CHECK_MSG(t1[3 * K + 4] == s[4 * M + 3] + 0.0f, "the transpose after the write must see the latched S[4][3]");
    CHECK_MSG(t2[3 * K + 4] == 9.0f, "the transpose after a new latch must see the written S[4][3]");
    /* J's column 3 is zero: so is column 3 of S'^T J, the rest is S'^T's */
    size_t col3 = 0;
    for (unsigned m = 0; m < M; m++)
        col3 += t3[m * K + 3] != 0.0f || t3[m * K + 4] != t2[m * K + 4];
    CHECK_MSG(col3 == 0 && t2[3] != 0.0f,
              "a moving operand written after it was found to be the identity must be multiplied, not transposed");
    CHECK_MSG(t4[5 * K + 20] == 2.0f * t2[5 * K + 20], "a host write to the identity must be seen too");
    for (int th = 0; th < 2; th++)
        for (int p = 0; p < 2; p++)
            for (int i = 0; i < 5; i++)
                free(out[th][p][i]);
    free(s);
    free(x);
    free(id);
}

int main(void)
{
    /* which kernel AUTO runs for bf16 operands in this process (TERN_MATMUL, else the faster on this host) */
    int use_dp = 0;
    tern_error kerr;
    if (matmul_choose_kernel(&use_dp, &kerr)) {
        fprintf(stderr, "%s\n", kerr.msg);
        return 2;
    }
    printf("bf16 matmul kernel: %s\n", use_dp ? "AVX512-BF16 dot products" : "fp32 FMA chain");
    semantics();
    double_row();
    moving_cache_invalidation();
    rules();
    identity_agrees(0, TERN_DTYPE_FP32);
    identity_agrees(1, TERN_DTYPE_FP32);
    identity_agrees(0, TERN_DTYPE_BF16);
    identity_agrees(1, TERN_DTYPE_BF16);
    transpose_shapes();
    lazy_latch();
    paths_agree(TERN_DTYPE_BF16, 128, 128, 512, 0);
    paths_agree(TERN_DTYPE_BF16, 127, 100, 300, 0);
    paths_agree(TERN_DTYPE_BF16, 128, 128, 512, 1);
    paths_agree(TERN_DTYPE_BF16, 64, 128, 512, 2);
    paths_agree(TERN_DTYPE_BF16, 128, 128, 512, 3);
    paths_agree(TERN_DTYPE_BF16, 96, 37, 203, 3);
    paths_agree(TERN_DTYPE_BF16, 128, 128, 49, 3); /* a convolution's 7 x 7 outputs: one 16-wide block short */
    paths_agree(TERN_DTYPE_BF16, 128, 128, 196, 2); /* 14 x 14 */
    paths_agree(TERN_DTYPE_FP16, 128, 128, 512, 0);
    paths_agree(TERN_DTYPE_FP32, 128, 64, 256, 2);
    paths_agree(TERN_DTYPE_FP32, 1, 128, 512, 3); /* an outer product: a bias row added through the array */
    paths_agree(TERN_DTYPE_FP32, 1, 7, 33, 3);
    paths_agree(TERN_DTYPE_FP32, 1, 128, 512, 1);
    paths_agree(TERN_DTYPE_FP8_E4M3, 128, 128, 512, 0);
    paths_agree(TERN_DTYPE_FP8_E5M2, 33, 7, 17, 2);
    paths_agree(TERN_DTYPE_FP8_E4M3_NEURON, 128, 128, 512, 0);
    /* every tail of the chain kernels' blocks: 6-row panels, 16- and 64-column blocks, K from 1 */
    paths_agree(TERN_DTYPE_BF16, 1, 1, 1, 0);
    paths_agree(TERN_DTYPE_BF16, 5, 7, 1, 2);
    paths_agree(TERN_DTYPE_BF16, 128, 128, 15, 3);
    paths_agree(TERN_DTYPE_BF16, 128, 6, 16, 1);
    paths_agree(TERN_DTYPE_BF16, 17, 13, 17, 3);
    paths_agree(TERN_DTYPE_BF16, 128, 128, 63, 2);
    paths_agree(TERN_DTYPE_BF16, 128, 11, 65, 3);
    paths_agree(TERN_DTYPE_BF16, 40, 128, 130, 1);
    paths_agree(TERN_DTYPE_BF16, 128, 1, 511, 3);
    paths_agree2(TERN_DTYPE_FP8_E4M3, TERN_DTYPE_BF16, 128, 100, 77, 0);
    paths_agree2(TERN_DTYPE_FP8_E5M2, TERN_DTYPE_BF16, 64, 31, 200, 2);
    return check_report();
}
