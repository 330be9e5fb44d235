/* tern_lib_linear_ln: the linear layer with a layer norm of each output row in its epilogue must give the bits of
 * tern_lib_linear_residual into a temporary followed by tern_lib_layernorm (with and without bias, residual and
 * beta; ragged row tiles; one and two output tiles per row; v2's identity-matmul transposes and v3's transpose_pe),
 * in less predicted time; a row too wide for one wave of PSUM groups is declined (0, nothing emitted) and the
 * caller's two kernels then run; a gamma of the wrong length is an error naming it. tern_lib_linear_ext with
 * weights_first (the first weight block loaded before the rows) gives the same bits as without, and with pre_out
 * (pre-LN models) both the layer's output and the norm's are those of the two separate kernels. */
#include "../kernel/kernel_test_util.h"
#include "tern/kernel_lib.h"

typedef struct {
    uint64_t M, K, N;
    int bias, residual, beta;
    tern_act_func act;
} ln_case;

/* Fills and writes the kernel's inputs a, w, g and (when present) b, be, r from seeds seed .. seed+5. */
static void write_inputs(tern_kernel *k, tern_core *core, uint64_t M, uint64_t K, uint64_t N, uint64_t seed, int bias,
                         int beta, int residual)
{
    tern_error err;
    float *x = malloc(sizeof(float) * (M * K + K * N + 3 * N + M * N));
    float *xa = x, *xw = xa + M * K, *xb = xw + K * N, *xg = xb + N, *xe = xg + N, *xr = xe + N;
    ktu_fill(xa, (size_t)(M * K), TERN_DTYPE_FP32, seed);
    ktu_fill(xw, (size_t)(K * N), TERN_DTYPE_BF16, seed + 1);
    ktu_fill(xb, N, TERN_DTYPE_FP32, seed + 2);
    ktu_fill(xg, N, TERN_DTYPE_FP32, seed + 3);
    ktu_fill(xe, N, TERN_DTYPE_FP32, seed + 4);
    ktu_fill(xr, (size_t)(M * N), TERN_DTYPE_FP32, seed + 5);
    CHECK_EQ_INT(tern_kernel_write_f32(k, core, "a", xa, M * K, &err), TERN_OK);
    CHECK_EQ_INT(tern_kernel_write_f32(k, core, "w", xw, K * N, &err), TERN_OK);
    CHECK_EQ_INT(tern_kernel_write_f32(k, core, "g", xg, N, &err), TERN_OK);
    if (bias)
        CHECK_EQ_INT(tern_kernel_write_f32(k, core, "b", xb, N, &err), TERN_OK);
    if (beta)
        CHECK_EQ_INT(tern_kernel_write_f32(k, core, "be", xe, N, &err), TERN_OK);
    if (residual)
        CHECK_EQ_INT(tern_kernel_write_f32(k, core, "r", xr, M * N, &err), TERN_OK);
    free(x);
}

/* Builds and runs one variant (fused or not; 2: fused through tern_lib_linear_ext with weights_first) and returns
 * its output and predicted time. */
static int run_variant(const char *machine, const ln_case *c, int fused, float *out, int64_t *time_ps)
{
    tern_core_config cfg;
    tern_core *core = ktu_core(machine, &cfg);
    tern_error err;
    tern_kernel *k = NULL;
    tern_kernel_create(&cfg, fused ? "fused" : "separate", &k, &err);
    const uint64_t M = c->M, K = c->K, N = c->N;
    tern_view a = tern_kernel_input2d(k, "a", TERN_DTYPE_FP32, M, K);
    tern_view w = tern_kernel_input2d(k, "w", TERN_DTYPE_BF16, K, N);
    tern_view b = c->bias ? tern_kernel_hbm_tensor(k, "b", TERN_KIO_INPUT, TERN_DTYPE_FP32, 1, &N) : tern_view_none();
    tern_view r = c->residual ? tern_kernel_input2d(k, "r", TERN_DTYPE_FP32, M, N) : tern_view_none();
    tern_view g = tern_kernel_hbm_tensor(k, "g", TERN_KIO_INPUT, TERN_DTYPE_FP32, 1, &N);
    tern_view be = c->beta ? tern_kernel_hbm_tensor(k, "be", TERN_KIO_INPUT, TERN_DTYPE_FP32, 1, &N) : tern_view_none();
    tern_view y = tern_kernel_output2d(k, "y", TERN_DTYPE_FP32, M, N);
    int took = 1;
    if (fused == 2) {
        tern_linear_ext x = {r, g, be, 1e-5f, 1, tern_view_none()};
        took = tern_lib_linear_ext(k, y, a, w, b, c->act, &x);
    } else if (fused) {
        took = tern_lib_linear_ln(k, y, a, w, b, c->act, r, g, be, 1e-5f);
    } else {
        uint64_t shape[2] = {M, N};
        tern_view t = tern_kernel_hbm_tensor(k, "t", TERN_KIO_SCRATCH, TERN_DTYPE_FP32, 2, shape);
        tern_lib_linear_residual(k, t, a, w, b, c->act, r);
        tern_lib_layernorm(k, y, t, g, be, 1e-5f);
    }
    CHECK_MSG(tern_kernel_status(k, &err) == TERN_OK, "build failed: %s", err.msg);
    if (took) {
        write_inputs(k, core, M, K, N, 21, c->bias, c->beta, c->residual);
        tern_run_stats st;
        CHECK_EQ_INT(tern_kernel_run(k, core, &st, &err), TERN_OK);
        CHECK_EQ_INT(tern_kernel_read_f32(k, core, "y", out, M * N, &err), TERN_OK);
        *time_ps = st.time_ps;
    } else {
        CHECK_EQ_INT(tern_program_instr_count(tern_kernel_program(k)), 0); /* declined: nothing emitted */
    }
    tern_kernel_free(k);
    tern_core_free(core);
    return took;
}

static void same_bits(const char *machine, const ln_case *c)
{
    char name[200];
    snprintf(name, sizeof name, "linear+layernorm %s M=%llu K=%llu N=%llu bias=%d residual=%d beta=%d act=%d",
             machine, (unsigned long long)c->M, (unsigned long long)c->K, (unsigned long long)c->N, c->bias,
             c->residual, c->beta, (int)c->act);
    TEST_BEGIN(name);
    size_t n = (size_t)(c->M * c->N);
    float *o[2] = {malloc(sizeof(float) * n), malloc(sizeof(float) * n)};
    int64_t t[2] = {0, 0};
    int took = run_variant(machine, c, 1, o[0], &t[0]);
    CHECK_MSG(took == 1, "the fused kernel declined");
    run_variant(machine, c, 0, o[1], &t[1]);
    size_t diff = 0, first = 0;
    for (size_t i = 0; i < n; i++)
        if (memcmp(&o[0][i], &o[1][i], 4) != 0 && diff++ == 0)
            first = i;
    CHECK_MSG(diff == 0, "%zu of %zu differ, first at %zu: %.9g vs %.9g", diff, n, first, o[0][first], o[1][first]);
    CHECK_MSG(t[0] < t[1], "fused %lld ps, not faster than separate %lld ps", (long long)t[0], (long long)t[1]);
    int64_t tw = 0;
    CHECK(run_variant(machine, c, 2, o[1], &tw) == 1);
    CHECK_MSG(memcmp(o[0], o[1], n * sizeof(float)) == 0, "weights_first changed the outputs");
    free(o[0]);
    free(o[1]);
}

/* pre_out: kernel 0 = tern_lib_linear_ext writing the norm to y and the layer's output to p; kernel 1 = the layer
 * into p, then tern_lib_layernorm(y, p). Both outputs must agree bit for bit. */
static void pre_out_case(const char *machine, uint64_t M, uint64_t K, uint64_t N)
{
    char name[160];
    snprintf(name, sizeof name, "linear+layernorm %s M=%llu K=%llu N=%llu keeping the pre-norm output", machine,
             (unsigned long long)M, (unsigned long long)K, (unsigned long long)N);
    TEST_BEGIN(name);
    tern_core_config cfg;
    tern_core *core = ktu_core(machine, &cfg);
    tern_error err;
    float *o[2][2];
    int64_t t[2] = {0, 0};
    for (int v = 0; v < 2; v++) {
        tern_kernel *k = NULL;
        tern_kernel_create(&cfg, v ? "separate" : "fused", &k, &err);
        tern_view a = tern_kernel_input2d(k, "a", TERN_DTYPE_FP32, M, K);
        tern_view w = tern_kernel_input2d(k, "w", TERN_DTYPE_BF16, K, N);
        tern_view b = tern_kernel_hbm_tensor(k, "b", TERN_KIO_INPUT, TERN_DTYPE_FP32, 1, &N);
        tern_view r = tern_kernel_input2d(k, "r", TERN_DTYPE_FP32, M, N);
        tern_view g = tern_kernel_hbm_tensor(k, "g", TERN_KIO_INPUT, TERN_DTYPE_FP32, 1, &N);
        tern_view be = tern_kernel_hbm_tensor(k, "be", TERN_KIO_INPUT, TERN_DTYPE_FP32, 1, &N);
        tern_view p = tern_kernel_output2d(k, "p", TERN_DTYPE_FP32, M, N);
        tern_view y = tern_kernel_output2d(k, "y", TERN_DTYPE_FP32, M, N);
        if (v == 0) {
            tern_linear_ext xo = {r, g, be, 1e-5f, 0, p};
            CHECK(tern_lib_linear_ext(k, y, a, w, b, TERN_ACT_COPY, &xo) == 1);
        } else {
            tern_lib_linear_residual(k, p, a, w, b, TERN_ACT_COPY, r);
            tern_lib_layernorm(k, y, p, g, be, 1e-5f);
        }
        CHECK_MSG(tern_kernel_status(k, &err) == TERN_OK, "build failed: %s", err.msg);
        write_inputs(k, core, M, K, N, 31, 1, 1, 1);
        tern_run_stats st;
        CHECK_EQ_INT(tern_kernel_run(k, core, &st, &err), TERN_OK);
        t[v] = st.time_ps;
        for (int q = 0; q < 2; q++) {
            o[v][q] = malloc(sizeof(float) * M * N);
            CHECK_EQ_INT(tern_kernel_read_f32(k, core, q ? "y" : "p", o[v][q], M * N, &err), TERN_OK);
        }
        tern_kernel_free(k);
    }
    CHECK_MSG(memcmp(o[0][0], o[1][0], sizeof(float) * M * N) == 0, "the layer's outputs differ");
    CHECK_MSG(memcmp(o[0][1], o[1][1], sizeof(float) * M * N) == 0, "the norms differ");
    CHECK_MSG(t[0] < t[1], "fused %lld ps, not faster than separate %lld ps", (long long)t[0], (long long)t[1]);
    for (int v = 0; v < 2; v++)
        free(o[v][0]), free(o[v][1]);
    tern_core_free(core);
}

static void bad_gamma(void)
{
    TEST_BEGIN("linear+layernorm: a gamma of the wrong length is an error naming it");
    tern_core_config cfg;
    tern_error err;
    tern_core_config_load("neuroncore-v2", &cfg, &err);
    tern_kernel *k = NULL;
    tern_kernel_create(&cfg, "bad", &k, &err);
    const uint64_t N = 64, G = 63;
    tern_view a = tern_kernel_input2d(k, "a", TERN_DTYPE_FP32, 8, 32);
    tern_view w = tern_kernel_input2d(k, "w", TERN_DTYPE_BF16, 32, N);
    tern_view g = tern_kernel_hbm_tensor(k, "g", TERN_KIO_INPUT, TERN_DTYPE_FP32, 1, &G);
    int took = tern_lib_linear_ln(k, tern_kernel_output2d(k, "y", TERN_DTYPE_FP32, 8, N), a, w, tern_view_none(),
                                  TERN_ACT_COPY, tern_view_none(), g, tern_view_none(), 1e-5f);
    CHECK_EQ_INT(took, 1);
    CHECK(tern_kernel_status(k, &err) != TERN_OK);
    CHECK_STR_CONTAINS(err.msg, "layer norm gamma");
    CHECK_STR_CONTAINS(err.msg, "[64]");
    tern_kernel_free(k);
}

int main(void)
{
    const ln_case v2[] = {
        {128, 768, 768, 1, 1, 1, TERN_ACT_COPY},      /* BERT-base's out-projection + residual + LN */
        {200, 256, 300, 1, 0, 1, TERN_ACT_COPY},      /* a ragged row tile, one output tile per row */
        {77, 300, 1024, 0, 1, 0, TERN_ACT_GELU_TANH}, /* no bias, no beta, an activation */
        {130, 128, 520, 1, 1, 1, TERN_ACT_RELU},      /* a ragged second output tile */
    };
    for (size_t i = 0; i < sizeof v2 / sizeof v2[0]; i++)
        same_bits("neuroncore-v2", &v2[i]);
    const ln_case v3 = {150, 384, 768, 1, 1, 1, TERN_ACT_COPY};
    same_bits("neuroncore-v3", &v3);
    TEST_BEGIN("linear+layernorm: a row of 16 output tiles is declined, nothing emitted");
    const ln_case wide = {64, 128, 8192, 1, 0, 1, TERN_ACT_COPY};
    float dummy = 0;
    int64_t t = 0;
    CHECK_EQ_INT(run_variant("neuroncore-v2", &wide, 1, &dummy, &t), 0);
    pre_out_case("neuroncore-v2", 128, 768, 768);
    pre_out_case("neuroncore-v2", 200, 256, 300);
    pre_out_case("neuroncore-v3", 130, 384, 520);
    bad_gamma();
    return check_report();
}
