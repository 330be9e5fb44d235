/* Device-resident state (tern_rt_carry): an output that becomes the next execution's input in HBM gives the same
 * bits, execution after execution, as taking it to the host and setting it again; tern_rt_get_input reads a carried
 * input back from HBM, tern_rt_get_output_range any piece of an output; a later tern_rt_set_input replaces a carried
 * value; mismatched or unknown carries and timing-only runs are refused with messages naming them. */
#include "../kernel/kernel_test_util.h"
#include "tern/kernel_lib.h"
#include "tern/runtime.h"

#include <string.h>

/* y[R, N] = x[R, K] @ W[K, N] + b, input xT[K, R] (activations delivered transposed), W and b constants. With
 * K = R = N, y has xT's bytes, so y can feed the next execution as xT. */
static tern_kernel *linear(const tern_core_config *cfg, unsigned rows, unsigned K, unsigned N, const float *w,
                           const float *b)
{
    tern_error err;
    tern_kernel *k = NULL;
    tern_kernel_create(cfg, "linear", &k, &err);
    tern_view xT = tern_kernel_input2d(k, "xT", TERN_DTYPE_FP32, K, rows);
    uint64_t wshape[2] = {K, N}, bshape[2] = {1, N};
    tern_view W = tern_kernel_constant(k, "W", TERN_DTYPE_FP32, 2, wshape, w);
    tern_view B = tern_kernel_constant(k, "b", TERN_DTYPE_FP32, 2, bshape, b);
    tern_view mm = tern_kernel_hbm_tensor(k, "mm", TERN_KIO_SCRATCH, TERN_DTYPE_FP32, 2, (uint64_t[]){rows, N});
    tern_view y = tern_kernel_output2d(k, "y", TERN_DTYPE_FP32, rows, N);
    tern_lib_gemm(k, mm, xT, W, NULL);
    tern_lib_bias_act(k, y, mm, B, TERN_ACT_COPY);
    return k;
}

int main(void)
{
    enum { S = 128 };
    const size_t n = (size_t)S * S, bytes = n * sizeof(float);
    tern_core_config cfg;
    tern_error err;
    tern_core_config_load("trn1.2xlarge", &cfg, &err);
    float *w = malloc(bytes), *b = malloc(sizeof(float) * S), *x0 = malloc(bytes);
    float *ya = malloc(bytes), *yb = malloc(bytes), *got = malloc(bytes), *piece = malloc(bytes);
    ktu_fill(w, n, TERN_DTYPE_FP32, 1);
    for (size_t i = 0; i < n; i++)
        w[i] *= 0.05f; /* keep the repeated products finite and far from zero */
    ktu_fill(b, S, TERN_DTYPE_FP32, 2);
    ktu_fill(x0, n, TERN_DTYPE_FP32, 3);
    tern_kernel *k = linear(&cfg, S, S, S, w, b);
    tern_exe x;
    tern_status st = tern_exe_from_kernel(&x, "trn1.2xlarge", k, &err);
    CHECK_MSG(st == TERN_OK, "%s", err.msg);
    tern_rt *host = NULL, *dev = NULL;
    CHECK_EQ_INT(tern_rt_create(&x, "trn1.2xlarge", NULL, &host, &err), TERN_OK);
    CHECK_EQ_INT(tern_rt_create(&x, "trn1.2xlarge", NULL, &dev, &err), TERN_OK);

    TEST_BEGIN("a carried output feeds the next execution with the bits the host round trip gives");
    tern_run_stats sa, sb;
    CHECK_EQ_INT(tern_rt_set_input(host, "xT", x0, bytes, &err), TERN_OK);
    CHECK_EQ_INT(tern_rt_set_input(dev, "xT", x0, bytes, &err), TERN_OK);
    for (int step = 0; step < 4; step++) {
        CHECK_EQ_INT(tern_rt_execute(host, &sa, &err), TERN_OK);
        CHECK_EQ_INT(tern_rt_execute(dev, &sb, &err), TERN_OK);
        CHECK_EQ_INT(tern_rt_get_output(host, "y", ya, bytes, &err), TERN_OK);
        CHECK_EQ_INT(tern_rt_get_output(dev, "y", yb, bytes, &err), TERN_OK);
        CHECK_MSG(!memcmp(ya, yb, bytes), "execution %d: the carried run's output differs", step + 1);
        CHECK_MSG(sa.time_ps == sb.time_ps, "execution %d: predicted %lld ps vs %lld ps", step + 1,
                  (long long)sa.time_ps, (long long)sb.time_ps);
        CHECK_EQ_INT(tern_rt_set_input(host, "xT", ya, bytes, &err), TERN_OK);
        st = tern_rt_carry(dev, "y", "xT", &err);
        CHECK_MSG(st == TERN_OK, "%s", err.msg);
        TEST_BEGIN("a carried input reads back from HBM as the output it came from");
        memset(got, 0, bytes);
        CHECK_EQ_INT(tern_rt_get_input(dev, "xT", got, bytes, &err), TERN_OK);
        CHECK(!memcmp(got, ya, bytes));
    }
    CHECK(isfinite(ya[0]) && ya[0] != 0);

    TEST_BEGIN("pieces of an output are its bytes");
    for (size_t off = 0; off < bytes; off += 12340)
        CHECK_EQ_INT(tern_rt_get_output_range(dev, "y", off, (char *)piece + off,
                                              bytes - off < 12340 ? bytes - off : 12340, &err),
                     TERN_OK);
    CHECK(!memcmp(piece, yb, bytes));
    CHECK_EQ_INT(tern_rt_get_output_range(dev, "y", bytes - 4, piece, 8, &err), TERN_ERR_RANGE);
    CHECK_STR_CONTAINS(err.msg, "output 'y' holds 65536 bytes");

    TEST_BEGIN("setting a carried input from the host replaces it");
    CHECK_EQ_INT(tern_rt_set_input(dev, "xT", x0, bytes, &err), TERN_OK);
    CHECK_EQ_INT(tern_rt_set_input(host, "xT", x0, bytes, &err), TERN_OK);
    CHECK_EQ_INT(tern_rt_get_input(dev, "xT", got, bytes, &err), TERN_OK);
    CHECK(!memcmp(got, x0, bytes));
    CHECK_EQ_INT(tern_rt_execute(host, NULL, &err), TERN_OK);
    CHECK_EQ_INT(tern_rt_execute(dev, NULL, &err), TERN_OK);
    CHECK_EQ_INT(tern_rt_get_output(host, "y", ya, bytes, &err), TERN_OK);
    CHECK_EQ_INT(tern_rt_get_output(dev, "y", yb, bytes, &err), TERN_OK);
    CHECK(!memcmp(ya, yb, bytes));

    TEST_BEGIN("carries that cannot be are refused, naming them");
    CHECK_EQ_INT(tern_rt_carry(dev, "nope", "xT", &err), TERN_ERR_NOT_FOUND);
    CHECK_STR_CONTAINS(err.msg, "no output named 'nope'");
    CHECK_EQ_INT(tern_rt_carry(dev, "y", "nope", &err), TERN_ERR_NOT_FOUND);
    CHECK_STR_CONTAINS(err.msg, "no input named 'nope'");
    CHECK_EQ_INT(tern_rt_get_input(dev, "xT", got, 4, &err), TERN_ERR_INVALID);
    CHECK_STR_CONTAINS(err.msg, "input 'xT' takes 65536 bytes");
    {
        tern_kernel *k2 = linear(&cfg, S, S, S / 2, w, b); /* y is half of xT */
        tern_exe x2;
        tern_rt *r2 = NULL;
        CHECK_EQ_INT(tern_exe_from_kernel(&x2, "trn1.2xlarge", k2, &err), TERN_OK);
        CHECK_EQ_INT(tern_rt_create(&x2, "trn1.2xlarge", NULL, &r2, &err), TERN_OK);
        CHECK_EQ_INT(tern_rt_get_input(r2, "xT", got, bytes, &err), TERN_ERR_INVALID);
        CHECK_STR_CONTAINS(err.msg, "input 'xT' was not set");
        CHECK_EQ_INT(tern_rt_carry(r2, "y", "xT", &err), TERN_ERR_INVALID);
        CHECK_STR_CONTAINS(err.msg, "output 'y' (32768 bytes of fp32) cannot become input 'xT' (65536 bytes");
        tern_rt_free(r2);
        tern_rt_options o = {0};
        o.mode = TERN_MODE_TIMING_ONLY;
        CHECK_EQ_INT(tern_rt_create(&x, "trn1.2xlarge", &o, &r2, &err), TERN_OK);
        CHECK_EQ_INT(tern_rt_execute(r2, NULL, &err), TERN_OK);
        CHECK_EQ_INT(tern_rt_carry(r2, "y", "xT", &err), TERN_ERR_INVALID);
        CHECK_STR_CONTAINS(err.msg, "a timing-only run computes no values");
        tern_rt_free(r2);
        tern_exe_free(&x2);
        tern_kernel_free(k2);
    }
    tern_rt_free(host);
    tern_rt_free(dev);
    tern_exe_free(&x);
    tern_kernel_free(k);
    free(w);
    free(b);
    free(x0);
    free(ya);
    free(yb);
    free(got);
    free(piece);
    return check_report();
}
