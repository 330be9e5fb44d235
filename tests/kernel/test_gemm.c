/* The kernel library's GEMM against a float64 reference, over tile-exact and ragged shapes, several blockings,
 * every TensorE input dtype, fp32 and bf16 accumulators; plus bit-exactness of one tile against the documented
 * accumulation order (fp32, k ascending). */
#include <math.h>

#include "kernel_test_util.h"
#include "tern/kernel_lib.h"

typedef struct {
    unsigned M, N, K;
    tern_dtype in, out;
    unsigned bm, bn, bk;
    int acc; /* -1 = input dtype */
} gemm_case;

static double unit_roundoff(tern_dtype dt)
{
    switch (dt) {
    case TERN_DTYPE_FP32: return 0x1p-24;
    case TERN_DTYPE_BF16: return 0x1p-8;
    case TERN_DTYPE_FP16: return 0x1p-11;
    case TERN_DTYPE_FP8_E4M3: return 0x1p-4;
    case TERN_DTYPE_FP8_E5M2: return 0x1p-3;
    default: return 0x1p-24;
    }
}

static void run_case(const char *machine, const gemm_case *c)
{
    char name[160];
    snprintf(name, sizeof name, "gemm %s %ux%ux%u %s->%s block %u/%u/%u acc %s", machine, c->M, c->N, c->K,
             tern_dtype_name(c->in), tern_dtype_name(c->out), c->bm, c->bn, c->bk,
             c->acc < 0 ? "input" : tern_dtype_name((tern_dtype)c->acc));
    TEST_BEGIN(name);
    tern_core_config cfg;
    tern_core *core = ktu_core(machine, &cfg);
    tern_kernel *k = NULL;
    tern_error err;
    CHECK_EQ_INT(tern_kernel_create(&cfg, "gemm", &k, &err), TERN_OK);
    tern_view lhsT = tern_kernel_input2d(k, "lhsT", c->in, c->K, c->M);
    tern_view rhs = tern_kernel_input2d(k, "rhs", c->in, c->K, c->N);
    tern_view out = tern_kernel_output2d(k, "out", c->out, c->M, c->N);
    tern_gemm_opts o;
    tern_gemm_opts_default(&o);
    o.tiles_in_block_m = c->bm;
    o.tiles_in_block_n = c->bn;
    o.tiles_in_block_k = c->bk;
    o.acc_dtype = c->acc;
    tern_lib_gemm(k, out, lhsT, rhs, &o);
    tern_status st = tern_kernel_status(k, &err);
    CHECK_MSG(st == TERN_OK, "build failed: %s", err.msg);
    float *a = malloc(sizeof(float) * c->K * c->M), *b = malloc(sizeof(float) * c->K * c->N);
    float *y = malloc(sizeof(float) * c->M * c->N);
    ktu_fill(a, (size_t)c->K * c->M, c->in, 1 + c->M);
    ktu_fill(b, (size_t)c->K * c->N, c->in, 2 + c->N);
    if (!st) {
        CHECK_EQ_INT(tern_kernel_write_f32(k, core, "lhsT", a, (size_t)c->K * c->M, &err), TERN_OK);
        CHECK_EQ_INT(tern_kernel_write_f32(k, core, "rhs", b, (size_t)c->K * c->N, &err), TERN_OK);
        st = tern_kernel_run(k, core, NULL, &err);
        CHECK_MSG(st == TERN_OK, "run failed: %s", err.msg);
        CHECK_EQ_INT(tern_kernel_read_f32(k, core, "out", y, (size_t)c->M * c->N, &err), TERN_OK);
        tern_dtype acc = c->acc < 0 ? c->in : (tern_dtype)c->acc;
        unsigned kblocks = (c->K + 128 * c->bk - 1) / (128 * c->bk);
        size_t bad = 0;
        double worst = 0;
        for (unsigned m = 0; m < c->M; m++)
            for (unsigned n = 0; n < c->N; n++) {
                double ref = 0, mag = 0;
                for (unsigned kk = 0; kk < c->K; kk++) {
                    double p = (double)a[(size_t)kk * c->M + m] * b[(size_t)kk * c->N + n];
                    ref += p;
                    mag += fabs(p);
                }
                /* fp32 summation over K, one rounding per K block into the accumulator, one to the output. */
                double tol = mag * (c->K * 0x1p-24 + (kblocks + 1) * unit_roundoff(acc)) +
                             fabs(ref) * unit_roundoff(c->out) + 1e-30;
                double e = fabs((double)y[(size_t)m * c->N + n] - ref);
                if (!(e <= tol))
                    bad++;
                if (e / tol > worst)
                    worst = e / tol;
            }
        CHECK_MSG(bad == 0, "%zu of %u elements outside the error bound (worst error/bound %.3g)", bad, c->M * c->N,
                  worst);
    }
    free(a);
    free(b);
    free(y);
    tern_kernel_free(k);
    tern_core_free(core);
}

/* One 128x128x512 tile, fp32 out: must equal a sequential fp32 sum over k exactly. */
static void exact_order(void)
{
    TEST_BEGIN("gemm single tile bit-exact accumulation order");
    const unsigned M = 128, N = 512, K = 128;
    tern_core_config cfg;
    tern_core *core = ktu_core("neuroncore-v2", &cfg);
    tern_kernel *k = NULL;
    tern_error err;
    tern_kernel_create(&cfg, "tile", &k, &err);
    tern_view lhsT = tern_kernel_input2d(k, "lhsT", TERN_DTYPE_BF16, K, M);
    tern_view rhs = tern_kernel_input2d(k, "rhs", TERN_DTYPE_BF16, K, N);
    tern_view out = tern_kernel_output2d(k, "out", TERN_DTYPE_FP32, M, N);
    tern_gemm_opts o;
    tern_gemm_opts_default(&o);
    o.acc_dtype = TERN_DTYPE_FP32;
    tern_lib_gemm(k, out, lhsT, rhs, &o);
    float *a = malloc(sizeof(float) * K * M), *b = malloc(sizeof(float) * K * N), *y = malloc(sizeof(float) * M * N);
    ktu_fill(a, (size_t)K * M, TERN_DTYPE_BF16, 7);
    ktu_fill(b, (size_t)K * N, TERN_DTYPE_BF16, 8);
    tern_kernel_write_f32(k, core, "lhsT", a, (size_t)K * M, &err);
    tern_kernel_write_f32(k, core, "rhs", b, (size_t)K * N, &err);
    CHECK_EQ_INT(tern_kernel_run(k, core, NULL, &err), TERN_OK);
    tern_kernel_read_f32(k, core, "out", y, (size_t)M * N, &err);
    size_t mismatches = 0;
    for (unsigned m = 0; m < M; m++)
        for (unsigned n = 0; n < N; n++) {
            volatile float s = 0.0f;
            for (unsigned kk = 0; kk < K; kk++) {
                volatile float p = a[(size_t)kk * M + m] * b[(size_t)kk * N + n];
                s = s + p;
            }
            /* The accumulator starts at +0 (memset) and adds the PSUM sum once: 0 + s == s. */
            if (memcmp((const void *)&s, &y[(size_t)m * N + n], 4) != 0)
                mismatches++;
        }
    CHECK_MSG(mismatches == 0, "%zu elements differ from the sequential fp32 sum", mismatches);
    free(a);
    free(b);
    free(y);
    tern_kernel_free(k);
    tern_core_free(core);
}

/* rhs_dtype, row_bias, relu and residual (a pointwise convolution's GEMM: fp32 activations cast to bf16 by the loads, the bias
 * added, a residual added and a Relu applied as the tiles leave PSUM or the accumulators): bit for bit the GEMM of the rhs rounded to
 * bf16 beforehand, plus the bias added in fp32 afterwards, then Relu (ScalarE's: x > 0 ? x : NaN stays, else +0).
 * Both paths: one K block, and several (K beyond the block's 128 * bk rows). */
/* fp32 -> bf16, round to nearest even (finite values) */
static float bf16_rne(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    u = (u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u;
    memcpy(&f, &u, 4);
    return f;
}

static float *bias_cast_run(unsigned M, unsigned N, unsigned K, unsigned bk, int fused, int relu, int res, int bf16_out,
                            const float *a, const float *b, const float *bias, const float *rv)
{
    tern_core_config cfg;
    tern_core *core = ktu_core("neuroncore-v2", &cfg);
    tern_kernel *k = NULL;
    tern_error err;
    tern_kernel_create(&cfg, "gemm_bias", &k, &err);
    tern_view lhsT = tern_kernel_input2d(k, "lhsT", TERN_DTYPE_BF16, K, M);
    tern_view rhs = tern_kernel_input2d(k, "rhs", fused ? TERN_DTYPE_FP32 : TERN_DTYPE_BF16, K, N);
    tern_view bv = tern_kernel_input2d(k, "bias", TERN_DTYPE_FP32, M, 1);
    tern_view out = tern_kernel_output2d(k, "out", fused && bf16_out ? TERN_DTYPE_BF16 : TERN_DTYPE_FP32, M, N);
    tern_view resv = tern_kernel_input2d(k, "res", TERN_DTYPE_FP32, M, N);
    tern_gemm_opts o;
    tern_gemm_opts_default(&o);
    o.acc_dtype = TERN_DTYPE_FP32;
    o.tiles_in_block_k = bk;
    if (fused) {
        o.rhs_dtype = TERN_DTYPE_BF16;
        o.row_bias = bv;
        o.relu = relu;
        if (res) {
            o.residual = resv;
            o.residual_first = res == 2;
        }
    }
    tern_lib_gemm(k, out, lhsT, rhs, &o);
    CHECK_EQ_INT(tern_kernel_status(k, &err), TERN_OK);
    float *y = calloc((size_t)M * N, sizeof(float));
    tern_kernel_write_f32(k, core, "lhsT", a, (size_t)K * M, &err);
    tern_kernel_write_f32(k, core, "rhs", b, (size_t)K * N, &err); /* bf16 rhs: rounded (RNE) on the way in */
    tern_kernel_write_f32(k, core, "bias", bias, M, &err);
    tern_kernel_write_f32(k, core, "res", rv, (size_t)M * N, &err);
    CHECK_EQ_INT(tern_kernel_run(k, core, NULL, &err), TERN_OK);
    tern_kernel_read_f32(k, core, "out", y, (size_t)M * N, &err);
    if (!fused)
        for (unsigned m = 0; m < M; m++)
            for (unsigned n = 0; n < N; n++) {
                volatile float v = y[(size_t)m * N + n] + bias[m];
                if (res == 1)
                    v = v + rv[(size_t)m * N + n];
                else if (res == 2)
                    v = rv[(size_t)m * N + n] + v;
                v = relu && !(v > 0) && v == v ? 0.0f : v;
                y[(size_t)m * N + n] = bf16_out ? bf16_rne(v) : v; /* a bf16 out: the fp32 result rounded once */
            }
    tern_kernel_free(k);
    tern_core_free(core);
    return y;
}

/* A [64, 32] GEMM (K 128) with a bias of bias_rows rows and a residual of res_cols columns (0: none), out in
 * out_dt, is refused with a message containing want. */
static void gemm_refused(const char *name, tern_dtype out_dt, unsigned bias_rows, unsigned res_cols, const char *want)
{
    TEST_BEGIN(name);
    tern_core_config cfg;
    tern_core *core = ktu_core("neuroncore-v2", &cfg);
    tern_kernel *k = NULL;
    tern_error err;
    tern_kernel_create(&cfg, "gemm_bad", &k, &err);
    tern_view lhsT = tern_kernel_input2d(k, "lhsT", TERN_DTYPE_BF16, 128, 64);
    tern_view rhs = tern_kernel_input2d(k, "rhs", TERN_DTYPE_BF16, 128, 32);
    tern_view out = tern_kernel_output2d(k, "out", out_dt, 64, 32);
    tern_gemm_opts o;
    tern_gemm_opts_default(&o);
    if (bias_rows)
        o.row_bias = tern_kernel_input2d(k, "bias", TERN_DTYPE_FP32, bias_rows, 1);
    if (res_cols)
        o.residual = tern_kernel_input2d(k, "res", TERN_DTYPE_FP32, 64, res_cols);
    tern_lib_gemm(k, out, lhsT, rhs, &o);
    CHECK(tern_kernel_status(k, &err) != TERN_OK);
    CHECK_STR_CONTAINS(err.msg, want);
    tern_kernel_free(k);
    tern_core_free(core);
}

static void bias_cast(void)
{
    const unsigned shapes[2][4] = {{200, 300, 128, 8}, {130, 257, 300, 1}}; /* M, N, K, bk */
    for (int sh = 0; sh < 2; sh++) {
        unsigned M = shapes[sh][0], N = shapes[sh][1], K = shapes[sh][2], bk = shapes[sh][3];
        char name[128];
        snprintf(name, sizeof name, "gemm %ux%ux%u, %s K block: rhs cast by its loads and the bias fused are exact", M, N,
                 K, bk * 128 >= K ? "one" : "several");
        TEST_BEGIN(name);
        float *a = malloc(sizeof(float) * K * M), *b = malloc(sizeof(float) * K * N), *bias = malloc(sizeof(float) * M);
        float *rv = malloc(sizeof(float) * M * N);
        ktu_fill(a, (size_t)K * M, TERN_DTYPE_BF16, 11);
        ktu_fill(b, (size_t)K * N, TERN_DTYPE_FP32, 12); /* not bf16 values: the cast matters */
        ktu_fill(bias, M, TERN_DTYPE_FP32, 13);
        ktu_fill(rv, (size_t)M * N, TERN_DTYPE_FP32, 14);
        for (int mode = 0; mode < 8; mode++) {
            /* residual: none, after the sum, before it; modes 6 and 7: bias (and Relu) into a bf16 out */
            int relu = mode & 1, res = mode < 6 ? mode >> 1 : 0, bf = mode >= 6;
            float *fused = bias_cast_run(M, N, K, bk, 1, relu, res, bf, a, b, bias, rv),
                  *ref = bias_cast_run(M, N, K, bk, 0, relu, res, bf, a, b, bias, rv);
            size_t diff = 0, nonzero = 0, zero = 0;
            for (size_t i = 0; i < (size_t)M * N; i++) {
                diff += memcmp(&fused[i], &ref[i], 4) != 0;
                nonzero += ref[i] != 0.0f;
                zero += ref[i] == 0.0f;
            }
            CHECK_MSG(diff == 0, "relu %d, residual %d, bf16 out %d: %zu of %u outputs differ", relu, res, bf, diff,
                      M * N);
            CHECK(nonzero > (size_t)M * N / (relu ? 4 : 2));
            if (relu)
                CHECK_MSG(zero > (size_t)M * N / 4, "relu: only %zu zeros", zero);
            free(fused);
            free(ref);
        }
        free(a);
        free(b);
        free(bias);
        free(rv);
    }
    gemm_refused("gemm row_bias of the wrong shape is refused", TERN_DTYPE_FP32, 63, 0,
                 "row_bias must be fp32 [64, 1] with a float out");
    gemm_refused("gemm residual of the wrong shape is refused", TERN_DTYPE_FP32, 0, 31,
                 "residual must be fp32 [64, 32] with one fp32 out");
    /* the residual adds run on fp32 output tiles only */
    gemm_refused("gemm residual with a bf16 out is refused", TERN_DTYPE_BF16, 0, 32,
                 "residual must be fp32 [64, 32] with one fp32 out");
}

int main(void)
{
    const gemm_case cases[] = {
        {128, 512, 128, TERN_DTYPE_BF16, TERN_DTYPE_FP32, 16, 2, 8, TERN_DTYPE_FP32},
        {256, 1024, 512, TERN_DTYPE_BF16, TERN_DTYPE_FP32, 1, 1, 2, TERN_DTYPE_FP32},
        {200, 700, 300, TERN_DTYPE_BF16, TERN_DTYPE_FP32, 1, 1, 1, TERN_DTYPE_FP32},
        {200, 700, 300, TERN_DTYPE_BF16, TERN_DTYPE_BF16, 16, 2, 8, -1},
        {130, 513, 129, TERN_DTYPE_FP16, TERN_DTYPE_FP32, 1, 2, 1, TERN_DTYPE_FP32},
        {96, 300, 260, TERN_DTYPE_FP8_E4M3, TERN_DTYPE_FP32, 1, 1, 1, TERN_DTYPE_FP32},
        {96, 300, 260, TERN_DTYPE_FP8_E5M2, TERN_DTYPE_BF16, 1, 1, 1, TERN_DTYPE_FP32},
        {100, 200, 150, TERN_DTYPE_FP32, TERN_DTYPE_FP32, 1, 1, 1, TERN_DTYPE_FP32},
        {1, 1, 1, TERN_DTYPE_BF16, TERN_DTYPE_FP32, 16, 2, 8, -1},
        {512, 1024, 1024, TERN_DTYPE_BF16, TERN_DTYPE_FP32, 2, 1, 4, -1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_case("neuroncore-v2", &cases[i]);
    const gemm_case v3 = {256, 600, 300, TERN_DTYPE_BF16, TERN_DTYPE_FP32, 2, 2, 2, TERN_DTYPE_FP32};
    run_case("neuroncore-v3", &v3);
    exact_order();
    bias_cast();
    return check_report();
}
