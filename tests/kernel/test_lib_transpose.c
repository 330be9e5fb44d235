/* The kernel library's transpose: bit-exact against the host transpose for finite fp32/bf16/fp16 data over
 * ragged shapes (1 to 600 rows, 1 to 1100 columns, crossing the 128 blocks, 512-row groups and 512-column
 * chunks), on NeuronCore-v2 (matmul against an on-chip identity) and v3 (transpose mode); the identity tile
 * itself; the documented special values (v2: -0 -> +0, Inf poisons its output row with NaN; v3: bits kept);
 * the build-time errors; and tern_lib_transpose_exact, which keeps every bit on v2 as well. */
#include <math.h>

#include "kernel_test_util.h"
#include "tern/kernel_lib.h"

static tern_kernel *build(const char *machine, tern_core_config *cfg, tern_core **core, unsigned R, unsigned C,
                          tern_dtype in_dt, tern_dtype out_dt)
{
    tern_error err;
    *core = ktu_core(machine, cfg);
    tern_kernel *k = NULL;
    CHECK_EQ_INT(tern_kernel_create(cfg, "transpose", &k, &err), TERN_OK);
    tern_view in = tern_kernel_input2d(k, "x", in_dt, R, C);
    tern_view out = tern_kernel_output2d(k, "y", out_dt, C, R);
    tern_lib_transpose(k, out, in);
    tern_status st = tern_kernel_status(k, &err);
    CHECK_MSG(st == TERN_OK, "build failed: %s", err.msg);
    if (!st) {
        st = tern_core_validate(*core, tern_kernel_program(k), &err);
        CHECK_MSG(st == TERN_OK, "validate failed: %s", err.msg);
    }
    return k;
}

static void run_case(const char *machine, unsigned R, unsigned C, tern_dtype in_dt, tern_dtype out_dt)
{
    char name[160];
    snprintf(name, sizeof name, "transpose %s %ux%u %s->%s", machine, R, C, tern_dtype_name(in_dt),
             tern_dtype_name(out_dt));
    TEST_BEGIN(name);
    tern_core_config cfg;
    tern_core *core;
    tern_error err;
    tern_kernel *k = build(machine, &cfg, &core, R, C, in_dt, out_dt);
    size_t n = (size_t)R * C;
    float *x = malloc(sizeof(float) * n), *y = malloc(sizeof(float) * n);
    ktu_fill(x, n, in_dt, 900 + R * 3 + C);
    tern_status st = tern_kernel_status(k, &err);
    if (!st) {
        CHECK_EQ_INT(tern_kernel_write_f32(k, core, "x", x, n, &err), TERN_OK);
        tern_run_stats stats;
        memset(&stats, 0, sizeof stats);
        st = tern_kernel_run(k, core, &stats, &err);
        CHECK_MSG(st == TERN_OK, "run failed: %s", err.msg);
        /* v2 multiplies by the identity (R*C*min(R,128)-ish MACs); v3 moves data in transpose mode. */
        if (cfg.generation < 3)
            CHECK_MSG(stats.macs > 0, "no TensorE matmul ran (macs %llu)", (unsigned long long)stats.macs);
        CHECK_MSG(stats.instructions[TERN_ENGINE_TENSOR] > 0, "no TensorE instruction ran");
        CHECK_EQ_INT(tern_kernel_read_f32(k, core, "y", y, n, &err), TERN_OK);
        /* Exact: each output is one product x * 1 plus exact zeros (v2), or a bit move (v3); the only rounding
         * is the output cast, the same RNE the host applies here. */
        size_t bad = 0, first = 0;
        for (unsigned r = 0; r < R && !st; r++)
            for (unsigned c = 0; c < C; c++) {
                float want = tern_num_round_f32(out_dt, x[(size_t)r * C + c], NULL, 0);
                if (memcmp(&want, &y[(size_t)c * R + r], 4) != 0 && !bad++)
                    first = (size_t)r * C + c;
            }
        CHECK_MSG(bad == 0, "%zu of %zu elements differ (first at in[%zu, %zu])", bad, n, first / C, first % C);
    }
    free(x);
    free(y);
    tern_kernel_free(k);
    tern_core_free(core);
}

/* -0, Inf and NaN through both generations. */
static void special_values(const char *machine)
{
    char name[96];
    snprintf(name, sizeof name, "transpose %s special values", machine);
    TEST_BEGIN(name);
    const unsigned R = 3, C = 4;
    tern_core_config cfg;
    tern_core *core;
    tern_error err;
    tern_kernel *k = build(machine, &cfg, &core, R, C, TERN_DTYPE_FP32, TERN_DTYPE_FP32);
    float x[12] = {1, -0.0f, 2, 3, 4, 5, INFINITY, 7, 8, 9, 10, 11}, y[12];
    CHECK_EQ_INT(tern_kernel_write_f32(k, core, "x", x, 12, &err), TERN_OK);
    CHECK_EQ_INT(tern_kernel_run(k, core, NULL, &err), TERN_OK);
    CHECK_EQ_INT(tern_kernel_read_f32(k, core, "y", y, 12, &err), TERN_OK);
    if (cfg.generation >= 3) {
        CHECK(memcmp(x + 1, y + 1 * R + 0, 4) == 0); /* -0 kept */
        CHECK(isinf(y[2 * R + 1]) && y[2 * R + 1] > 0);
        CHECK_NEAR(y[3 * R + 2], 11, 0);
    } else {
        /* out row c is column c of in times the identity: 1 * x + 0 * others, so -0 + 0 = +0, and the Inf at
         * in[1, 2] gives Inf * 0 = NaN in every other element of out row 2 (its own stays Inf). */
        CHECK(y[1 * R + 0] == 0 && !signbit(y[1 * R + 0]));
        for (unsigned r = 0; r < R; r++)
            if (r == 1)
                CHECK(isinf(y[2 * R + r]) && y[2 * R + r] > 0);
            else
                CHECK_MSG(isnan(y[2 * R + r]), "out[2, %u] = %g, expected NaN", r, y[2 * R + r]);
        CHECK_NEAR(y[3 * R + 2], 11, 0);
        CHECK_NEAR(y[0 * R + 1], 4, 0);
    }
    tern_kernel_free(k);
    tern_core_free(core);
}

/* tern_lib_transpose_exact: every bit moves (Inf, NaN, -0 included), ragged shapes across the 32-blocks, the
 * 128-row strips and the 512-column chunks, casting on the way when the dtypes differ; on v2 no TensorE work. */
static void exact_case(const char *machine, unsigned R, unsigned C, tern_dtype in_dt, tern_dtype out_dt)
{
    char name[160];
    snprintf(name, sizeof name, "exact transpose %s %ux%u %s->%s", machine, R, C, tern_dtype_name(in_dt),
             tern_dtype_name(out_dt));
    TEST_BEGIN(name);
    tern_core_config cfg;
    tern_error err;
    tern_core *core = ktu_core(machine, &cfg);
    tern_kernel *k = NULL;
    CHECK_EQ_INT(tern_kernel_create(&cfg, "transpose_exact", &k, &err), TERN_OK);
    tern_lib_transpose_exact(k, tern_kernel_output2d(k, "y", out_dt, C, R), tern_kernel_input2d(k, "x", in_dt, R, C));
    tern_status st = tern_kernel_status(k, &err);
    CHECK_MSG(st == TERN_OK, "build failed: %s", err.msg);
    size_t n = (size_t)R * C;
    float *x = malloc(sizeof(float) * n), *y = malloc(sizeof(float) * n);
    ktu_fill(x, n, in_dt, 77 + R + C);
    x[0] = -0.0f;
    if (n > 5) {
        x[n / 2] = INFINITY;
        x[n / 3] = NAN;
        x[n - 2] = -INFINITY;
    }
    if (!st) {
        CHECK_EQ_INT(tern_kernel_write_f32(k, core, "x", x, n, &err), TERN_OK);
        tern_run_stats stats;
        memset(&stats, 0, sizeof stats);
        CHECK_EQ_INT(tern_kernel_run(k, core, &stats, &err), TERN_OK);
        if (cfg.generation < 3)
            CHECK_EQ_INT((int)stats.instructions[TERN_ENGINE_TENSOR], 0);
        CHECK_EQ_INT(tern_kernel_read_f32(k, core, "y", y, n, &err), TERN_OK);
        size_t bad = 0;
        for (unsigned r = 0; r < R; r++)
            for (unsigned c = 0; c < C; c++) {
                float want = tern_num_round_f32(out_dt, x[(size_t)r * C + c], NULL, 0), got = y[(size_t)c * R + r];
                if (isnan(want) ? !isnan(got) : memcmp(&want, &got, 4) != 0)
                    bad++;
            }
        CHECK_MSG(bad == 0, "%zu of %zu elements differ", bad, n);
    }
    free(x);
    free(y);
    tern_kernel_free(k);
    tern_core_free(core);
}

/* The identity tile helper on a non-square tile: ones exactly where partition == column. */
static void identity_tile(void)
{
    TEST_BEGIN("identity tile 100x130 bf16");
    tern_core_config cfg;
    tern_core *core = ktu_core("neuroncore-v2", &cfg);
    tern_error err;
    tern_kernel *k = NULL;
    tern_kernel_create(&cfg, "ident", &k, &err);
    tern_view y = tern_kernel_output2d(k, "y", TERN_DTYPE_BF16, 100, 130);
    tern_view t = tern_kernel_sbuf(k, TERN_DTYPE_BF16, 100, 130, "ident");
    tern_lib_identity(k, t);
    tern_kernel_store(k, y, t);
    CHECK_EQ_INT(tern_kernel_status(k, &err), TERN_OK);
    CHECK_EQ_INT(tern_kernel_run(k, core, NULL, &err), TERN_OK);
    float *v = malloc(sizeof(float) * 100 * 130);
    CHECK_EQ_INT(tern_kernel_read_f32(k, core, "y", v, 100 * 130, &err), TERN_OK);
    size_t bad = 0;
    for (unsigned p = 0; p < 100; p++)
        for (unsigned i = 0; i < 130; i++)
            bad += v[p * 130 + i] != (p == i ? 1.0f : 0.0f);
    CHECK_MSG(bad == 0, "%zu elements of the identity are wrong", bad);
    free(v);
    tern_kernel_free(k);
    tern_core_free(core);
}

static void errors(void)
{
    tern_core_config cfg;
    tern_error err;
    if (tern_core_config_load("neuroncore-v2", &cfg, &err)) {
        fprintf(stderr, "cannot load machine: %s\n", err.msg);
        exit(2);
    }
    tern_kernel *k = NULL;
    TEST_BEGIN("transpose error: out shape");
    tern_kernel_create(&cfg, "tr", &k, &err);
    tern_view in = tern_kernel_input2d(k, "x", TERN_DTYPE_FP32, 10, 20);
    tern_view out = tern_kernel_output2d(k, "y", TERN_DTYPE_FP32, 10, 20);
    tern_lib_transpose(k, out, in);
    CHECK(tern_kernel_status(k, &err) == TERN_ERR_INVALID);
    CHECK_STR_CONTAINS(err.msg, "transpose: out is [10, 20], must be [20, 10] for in [10, 20]");
    tern_kernel_free(k);

    TEST_BEGIN("transpose error: integer dtype");
    tern_kernel_create(&cfg, "tr", &k, &err);
    in = tern_kernel_input2d(k, "x", TERN_DTYPE_INT32, 10, 20);
    out = tern_kernel_output2d(k, "y", TERN_DTYPE_INT32, 20, 10);
    tern_lib_transpose(k, out, in);
    CHECK(tern_kernel_status(k, &err) == TERN_ERR_INVALID);
    CHECK_STR_CONTAINS(err.msg, "transpose: in dtype int32");
    tern_kernel_free(k);
}

int main(void)
{
    static const struct {
        unsigned R, C;
        tern_dtype in, out;
    } cases[] = {
        {1, 1, TERN_DTYPE_FP32, TERN_DTYPE_FP32},     {127, 7, TERN_DTYPE_FP32, TERN_DTYPE_FP32},
        {129, 513, TERN_DTYPE_BF16, TERN_DTYPE_BF16}, {300, 2050, TERN_DTYPE_BF16, TERN_DTYPE_BF16},
        {600, 300, TERN_DTYPE_FP32, TERN_DTYPE_FP32}, {128, 128, TERN_DTYPE_FP16, TERN_DTYPE_FP32},
        {7, 1100, TERN_DTYPE_FP32, TERN_DTYPE_BF16},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_case("neuroncore-v2", cases[i].R, cases[i].C, cases[i].in, cases[i].out);
    run_case("neuroncore-v3", 300, 513, TERN_DTYPE_BF16, TERN_DTYPE_BF16);
    run_case("neuroncore-v3", 129, 200, TERN_DTYPE_FP32, TERN_DTYPE_FP32);
    exact_case("neuroncore-v2", 1, 1, TERN_DTYPE_FP32, TERN_DTYPE_FP32);
    exact_case("neuroncore-v2", 77, 300, TERN_DTYPE_FP32, TERN_DTYPE_FP32);
    exact_case("neuroncore-v2", 300, 1100, TERN_DTYPE_FP32, TERN_DTYPE_FP32);
    exact_case("neuroncore-v2", 129, 64, TERN_DTYPE_FP32, TERN_DTYPE_BF16);
    exact_case("neuroncore-v2", 40, 33, TERN_DTYPE_BF16, TERN_DTYPE_BF16);
    exact_case("neuroncore-v3", 130, 70, TERN_DTYPE_FP32, TERN_DTYPE_FP32);
    special_values("neuroncore-v2");
    special_values("neuroncore-v3");
    identity_tile();
    errors();
    return check_report();
}
