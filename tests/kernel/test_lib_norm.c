/* The kernel library's LayerNorm and RMSNorm against float64 references over ragged shapes (rows 1..300,
 * columns 1..2050, crossing the 512-column bn_stats chunks and the 2048-column square chunks), fp32 and bf16,
 * with and without gamma/beta, rows with a large mean (cancellation), both generations; plus the build-time
 * errors (shape mismatch, gamma length, rows too long for SBUF). */
#include <math.h>

#include "kernel_test_util.h"
#include "tern/kernel_lib.h"

static double unit_roundoff(tern_dtype dt) { return dt == TERN_DTYPE_BF16 ? 0x1p-8 : 0x1p-24; }

typedef struct {
    int rms;
    unsigned R, C;
    tern_dtype in, out, par; /* data in, out, gamma/beta */
    int affine;              /* bit 0: gamma, bit 1: beta */
    float offset;            /* added to every input (mean far from zero) */
    float eps;
} norm_case;

static void run_case(const char *machine, const norm_case *c)
{
    char name[192];
    snprintf(name, sizeof name, "%s %s %ux%u %s->%s params %s%s%s offset %g eps %g", c->rms ? "rmsnorm" : "layernorm",
             machine, c->R, c->C, tern_dtype_name(c->in), tern_dtype_name(c->out), tern_dtype_name(c->par),
             c->affine & 1 ? " gamma" : "", c->affine & 2 ? " beta" : "", c->offset, c->eps);
    TEST_BEGIN(name);
    tern_core_config cfg;
    tern_core *core = ktu_core(machine, &cfg);
    tern_kernel *k = NULL;
    tern_error err;
    CHECK_EQ_INT(tern_kernel_create(&cfg, c->rms ? "rmsnorm" : "layernorm", &k, &err), TERN_OK);
    tern_view in = tern_kernel_input2d(k, "x", c->in, c->R, c->C);
    tern_view out = tern_kernel_output2d(k, "y", c->out, c->R, c->C);
    uint64_t shape1[1] = {c->C};
    tern_view g, b;
    memset(&g, 0, sizeof g);
    memset(&b, 0, sizeof b);
    g.region = b.region = -1;
    if (c->affine & 1) /* gamma as [C], beta as [1, C]: both forms are accepted */
        g = tern_kernel_hbm_tensor(k, "gamma", TERN_KIO_INPUT, c->par, 1, shape1);
    if (c->affine & 2)
        b = tern_kernel_input2d(k, "beta", c->par, 1, c->C);
    if (c->rms)
        tern_lib_rmsnorm(k, out, in, g, c->eps);
    else
        tern_lib_layernorm(k, out, in, g, b, c->eps);
    tern_status st = tern_kernel_status(k, &err);
    CHECK_MSG(st == TERN_OK, "build failed: %s", err.msg);
    if (!st) {
        st = tern_core_validate(core, tern_kernel_program(k), &err);
        CHECK_MSG(st == TERN_OK, "validate failed: %s", err.msg);
    }
    size_t n = (size_t)c->R * c->C;
    float *x = malloc(sizeof(float) * n), *y = malloc(sizeof(float) * n);
    float *gv = malloc(sizeof(float) * c->C), *bv = malloc(sizeof(float) * c->C);
    ktu_fill(x, n, TERN_DTYPE_FP32, 300 + n);
    for (size_t i = 0; i < n; i++) /* rows of different scales: 2^(r % 5 - 2) */
        x[i] = tern_num_round_f32(c->in, x[i] * ldexpf(1.0f, (int)((i / c->C) % 5) - 2) + c->offset, NULL, 0);
    ktu_fill(gv, c->C, c->par, 400 + c->C);
    ktu_fill(bv, c->C, c->par, 500 + c->C);
    for (unsigned i = 0; i < c->C; i++) /* gamma in [0.5, 1.5) */
        gv[i] = tern_num_round_f32(c->par, gv[i] * 0.5f + 1.0f, NULL, 0);
    if (!st) {
        CHECK_EQ_INT(tern_kernel_write_f32(k, core, "x", x, n, &err), TERN_OK);
        if (c->affine & 1)
            CHECK_EQ_INT(tern_kernel_write_f32(k, core, "gamma", gv, c->C, &err), TERN_OK);
        if (c->affine & 2)
            CHECK_EQ_INT(tern_kernel_write_f32(k, core, "beta", bv, c->C, &err), TERN_OK);
        st = tern_kernel_run(k, core, NULL, &err);
        CHECK_MSG(st == TERN_OK, "run failed: %s", err.msg);
        CHECK_EQ_INT(tern_kernel_read_f32(k, core, "y", y, n, &err), TERN_OK);
        const double u = 0x1p-24, uo = unit_roundoff(c->out);
        const unsigned C = c->C;
        size_t bad = 0;
        double worst = 0;
        for (unsigned r = 0; r < c->R && !st; r++) {
            const float *xr = x + (size_t)r * C;
            double sum = 0, sq = 0, amax = 0;
            for (unsigned i = 0; i < C; i++) {
                sum += xr[i];
                sq += (double)xr[i] * xr[i];
                amax = fmax(amax, fabs(xr[i]));
            }
            double mean = sum / C, var = 0;
            for (unsigned i = 0; i < C; i++)
                var += ((double)xr[i] - mean) * ((double)xr[i] - mean);
            var /= C;
            double rstd = c->rms ? 1.0 / sqrt(sq / C + (double)c->eps) : 1.0 / sqrt(var + (double)c->eps);
            for (unsigned i = 0; i < C; i++) {
                double gi = c->affine & 1 ? gv[i] : 1.0, bi = c->affine & 2 ? bv[i] : 0.0;
                double xh = c->rms ? xr[i] * rstd : ((double)xr[i] - mean) * rstd;
                double ref = xh * gi + bi, tol;
                if (c->rms) {
                    /* squares rounded, C-term fp32 sum of positive terms (<= C u), * 1/C (2 roundings), + eps,
                     * rsqrt (relative errors halve through the square root), then x * rstd * gamma (2 roundings). */
                    double er = ((C + 4.0) / 2 + 2) * u;
                    tol = fabs(xh * gi) * (er + 3 * u);
                } else {
                    /* bn_stats/bn_aggr: mean and var each rounded from double-accurate values of rounded chunk
                     * statistics: |mean error| <= 4u max|x|, var relative error <= 8u (1 + max x^2 / var);
                     * rstd adds eps and rsqrt roundings; (x - mean) rounded; then * rstd, * gamma, + beta. */
                    double er = 4 * u * (1 + amax * amax / (var + c->eps)) + 3 * u;
                    tol = fabs(gi) * (rstd * 4 * u * amax + fabs(xh) * (er + 3 * u)) + (fabs(xh * gi) + fabs(bi)) * u;
                }
                tol += fabs(ref) * uo + 1e-30;
                double e = fabs((double)y[(size_t)r * C + i] - ref);
                if (!(e <= tol))
                    bad++;
                if (e / tol > worst)
                    worst = e / tol;
            }
        }
        CHECK_MSG(bad == 0, "%zu of %zu elements outside the error bound (worst error/bound %.3g)", bad, n, worst);
        if (getenv("KT_VERBOSE"))
            printf("%s: worst %.3g\n", name, worst);
    }
    free(x);
    free(y);
    free(gv);
    free(bv);
    tern_kernel_free(k);
    tern_core_free(core);
}

static tern_kernel *new_kernel(tern_core_config *cfg)
{
    tern_error err;
    tern_kernel *k = NULL;
    if (tern_kernel_create(cfg, "nk", &k, &err)) {
        fprintf(stderr, "cannot create kernel: %s\n", err.msg);
        exit(2);
    }
    return k;
}

static void errors(void)
{
    tern_core_config cfg;
    tern_error err;
    if (tern_core_config_load("neuroncore-v2", &cfg, &err)) {
        fprintf(stderr, "cannot load machine: %s\n", err.msg);
        exit(2);
    }
    tern_view none;
    memset(&none, 0, sizeof none);
    none.region = -1;

    TEST_BEGIN("layernorm error: shape mismatch");
    tern_kernel *k = new_kernel(&cfg);
    tern_view in = tern_kernel_input2d(k, "x", TERN_DTYPE_FP32, 10, 20);
    tern_view out = tern_kernel_output2d(k, "y", TERN_DTYPE_FP32, 20, 10);
    tern_lib_layernorm(k, out, in, none, none, 1e-5f);
    CHECK(tern_kernel_status(k, &err) == TERN_ERR_INVALID);
    CHECK_STR_CONTAINS(err.msg, "layernorm: out is [20, 10] but in is [10, 20]");
    tern_kernel_free(k);

    TEST_BEGIN("layernorm error: beta length");
    k = new_kernel(&cfg);
    in = tern_kernel_input2d(k, "x", TERN_DTYPE_FP32, 10, 20);
    out = tern_kernel_output2d(k, "y", TERN_DTYPE_FP32, 10, 20);
    tern_view beta = tern_kernel_input2d(k, "beta", TERN_DTYPE_FP32, 1, 19);
    tern_lib_layernorm(k, out, in, none, beta, 1e-5f);
    CHECK(tern_kernel_status(k, &err) == TERN_ERR_INVALID);
    CHECK_STR_CONTAINS(err.msg, "layernorm: beta must be an HBM [20] or [1, 20] view");
    CHECK_STR_CONTAINS(err.msg, "rank 2 with 1 x 19 elements");
    tern_kernel_free(k);

    TEST_BEGIN("layernorm error: row too long");
    k = new_kernel(&cfg);
    in = tern_kernel_input2d(k, "x", TERN_DTYPE_BF16, 2, 20000);
    out = tern_kernel_output2d(k, "y", TERN_DTYPE_BF16, 2, 20000);
    uint64_t shape[1] = {20000};
    tern_view g = tern_kernel_hbm_tensor(k, "g", TERN_KIO_INPUT, TERN_DTYPE_FP32, 1, shape);
    beta = tern_kernel_hbm_tensor(k, "b", TERN_KIO_INPUT, TERN_DTYPE_FP32, 1, shape);
    tern_lib_layernorm(k, out, in, g, beta, 1e-5f);
    CHECK(tern_kernel_status(k, &err) == TERN_ERR_RANGE);
    CHECK_STR_CONTAINS(err.msg, "layernorm: in has rows of 20000 columns");
    tern_kernel_free(k);

    TEST_BEGIN("rmsnorm error: gamma rank");
    k = new_kernel(&cfg);
    in = tern_kernel_input2d(k, "x", TERN_DTYPE_FP32, 10, 20);
    out = tern_kernel_output2d(k, "y", TERN_DTYPE_FP32, 10, 20);
    g = tern_kernel_input2d(k, "g", TERN_DTYPE_FP32, 10, 20);
    tern_lib_rmsnorm(k, out, in, g, 1e-6f);
    CHECK(tern_kernel_status(k, &err) == TERN_ERR_INVALID);
    CHECK_STR_CONTAINS(err.msg, "rmsnorm: gamma must be an HBM [20] or [1, 20] view");
    CHECK_STR_CONTAINS(err.msg, "10 x 20");
    tern_kernel_free(k);

    TEST_BEGIN("rmsnorm error: shape mismatch");
    k = new_kernel(&cfg);
    in = tern_kernel_input2d(k, "x", TERN_DTYPE_FP32, 10, 20);
    out = tern_kernel_output2d(k, "y", TERN_DTYPE_FP32, 10, 21);
    tern_lib_rmsnorm(k, out, in, none, 1e-6f);
    CHECK(tern_kernel_status(k, &err) == TERN_ERR_INVALID);
    CHECK_STR_CONTAINS(err.msg, "rmsnorm: out is [10, 21] but in is [10, 20]");
    tern_kernel_free(k);
}

int main(void)
{
    const norm_case cases[] = {
        {0, 1, 1, TERN_DTYPE_FP32, TERN_DTYPE_FP32, TERN_DTYPE_FP32, 3, 0, 1e-5f},
        {0, 127, 7, TERN_DTYPE_FP32, TERN_DTYPE_FP32, TERN_DTYPE_FP32, 3, 0, 1e-5f},
        {0, 129, 513, TERN_DTYPE_FP32, TERN_DTYPE_FP32, TERN_DTYPE_FP32, 1, 0, 1e-5f},
        {0, 300, 2050, TERN_DTYPE_BF16, TERN_DTYPE_BF16, TERN_DTYPE_BF16, 3, 0, 1e-5f},
        {0, 130, 1000, TERN_DTYPE_FP32, TERN_DTYPE_FP32, TERN_DTYPE_FP32, 2, 8, 1e-3f}, /* mean >> std */
        {0, 64, 300, TERN_DTYPE_BF16, TERN_DTYPE_FP32, TERN_DTYPE_FP32, 0, 0, 1e-5f},
        {1, 1, 1, TERN_DTYPE_FP32, TERN_DTYPE_FP32, TERN_DTYPE_FP32, 1, 0, 1e-6f},
        {1, 127, 7, TERN_DTYPE_FP32, TERN_DTYPE_FP32, TERN_DTYPE_FP32, 1, 0, 1e-6f},
        {1, 129, 513, TERN_DTYPE_BF16, TERN_DTYPE_BF16, TERN_DTYPE_BF16, 1, 0, 1e-6f},
        {1, 300, 2050, TERN_DTYPE_FP32, TERN_DTYPE_BF16, TERN_DTYPE_FP32, 1, 0.5f, 1e-6f},
        {1, 20, 4200, TERN_DTYPE_FP32, TERN_DTYPE_FP32, TERN_DTYPE_FP32, 0, 0, 1e-6f},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_case("neuroncore-v2", &cases[i]);
    const norm_case v3[] = {
        {0, 200, 777, TERN_DTYPE_BF16, TERN_DTYPE_BF16, TERN_DTYPE_FP32, 3, 0, 1e-5f},
        {1, 200, 777, TERN_DTYPE_BF16, TERN_DTYPE_FP32, TERN_DTYPE_BF16, 1, 0, 1e-6f},
    };
    for (size_t i = 0; i < sizeof v3 / sizeof v3[0]; i++)
        run_case("neuroncore-v3", &v3[i]);
    errors();
    return check_report();
}
