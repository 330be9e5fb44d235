/* Device-resident state (tern_rt_carry): an output that becomes the next execution's input in HBM gives the same
 * bits, execution after execution, as taking it to the host and setting it again; tern_rt_get_input reads a carried
 * input back from HBM, tern_rt_get_output_range any piece of an output; a later tern_rt_set_input replaces a carried
 * value; mismatched or unknown carries and timing-only runs are refused with messages naming them. Tensors of
 * several HBM pages placed on page boundaries (tern_kernel_set_io_align) move by handing over whole pages, and
 * give the same bits as the copy that unaligned ones take; the output still reads its value after a carry, and is
 * refused clearly once the input it went to has been set again. */
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

/* Two page-sized state tensors stepped together: ya = a + b, yb = b * 0.75, shape [128, C]; carried ya -> a and
 * yb -> b. align: tern_kernel_set_io_align's (0: the 64 bytes every tensor gets). */
enum { PR = 128, PC = 4200 }; /* 2,150,400 bytes: two whole 1 MiB pages and a piece */
static tern_exe pair_exe(const tern_core_config *cfg, uint64_t align)
{
    tern_error err;
    tern_kernel *k = NULL;
    tern_exe x;
    tern_kernel_create(cfg, "pair", &k, &err);
    tern_kernel_set_io_align(k, align);
    tern_view a = tern_kernel_input2d(k, "a", TERN_DTYPE_FP32, PR, PC);
    tern_view b = tern_kernel_input2d(k, "b", TERN_DTYPE_FP32, PR, PC);
    tern_view ya = tern_kernel_output2d(k, "ya", TERN_DTYPE_FP32, PR, PC);
    tern_view yb = tern_kernel_output2d(k, "yb", TERN_DTYPE_FP32, PR, PC);
    tern_lib_binary(k, ya, a, b, TERN_ALU_ADD);
    tern_lib_scalar(k, yb, b, TERN_ALU_MULT, 0.75f);
    tern_status st = tern_exe_from_kernel(&x, "trn1.2xlarge", k, &err);
    CHECK_MSG(st == TERN_OK, "%s", err.msg);
    tern_kernel_free(k);
    return x;
}

static uint64_t hbm_addr(const tern_exe *x, const char *name)
{
    const tern_program_tensor *t = tern_program_find_tensor(&x->programs[0], name);
    return t ? t->hbm_addr : UINT64_MAX;
}

/* tern_rt_scan_output's pieces, copied back into place (ctx); stops with an error at byte `stop_at` */
typedef struct {
    uint8_t *dst;
    uint64_t next, stop_at;
    int pieces;
} scan_sink;

static tern_status sink(void *ctx, uint64_t at, const void *data, size_t n, tern_error *err)
{
    scan_sink *s = ctx;
    if (at != s->next)
        return tern_error_set(err, TERN_ERR_INVALID, "piece at %llu, expected %llu", (unsigned long long)at,
                              (unsigned long long)s->next);
    if (at + n > s->stop_at)
        return tern_error_set(err, TERN_ERR_RANGE, "sink: stop at %llu", (unsigned long long)s->stop_at);
    memcpy(s->dst + at, data, n);
    s->next = at + n;
    s->pieces++;
    return TERN_OK;
}

/* Steps of the pair on three runtimes: the host round trip, carries between page-aligned tensors, carries
 * between unaligned ones (the copy); every output and predicted time agrees. */
static void pages(const tern_core_config *cfg)
{
    const uint64_t page = tern_core_hbm_page_bytes();
    const size_t n = (size_t)PR * PC, bytes = n * sizeof(float);
    tern_error err;
    tern_exe xa = pair_exe(cfg, page), xu = pair_exe(cfg, 0);
    TEST_BEGIN("inputs and outputs of a page or more start on a page when asked; by default they need not");
    const char *names[4] = {"a", "b", "ya", "yb"};
    for (int i = 0; i < 4; i++)
        CHECK_MSG(hbm_addr(&xa, names[i]) % page == 0, "'%s' at 0x%llx", names[i],
                  (unsigned long long)hbm_addr(&xa, names[i]));
    /* the fallback must be exercised: the unaligned pairs start at different offsets within a page */
    CHECK(((hbm_addr(&xu, "a") ^ hbm_addr(&xu, "ya")) & (page - 1)) != 0);
    CHECK(((hbm_addr(&xu, "b") ^ hbm_addr(&xu, "yb")) & (page - 1)) != 0);
    {
        tern_kernel *k = NULL;
        tern_kernel_create(cfg, "bad", &k, &err);
        tern_kernel_set_io_align(k, 96);
        CHECK_EQ_INT(tern_kernel_status(k, &err), TERN_ERR_INVALID);
        CHECK_STR_CONTAINS(err.msg, "alignment 96: not 0 or a power of two >= 64");
        tern_kernel_free(k);
    }

    float *a0 = malloc(bytes), *b0 = malloc(bytes), *h[2], *d[2], *u[2], *got = malloc(bytes);
    for (int i = 0; i < 2; i++) {
        h[i] = malloc(bytes);
        d[i] = malloc(bytes);
        u[i] = malloc(bytes);
    }
    ktu_fill(a0, n, TERN_DTYPE_FP32, 11);
    ktu_fill(b0, n, TERN_DTYPE_FP32, 12);
    tern_rt *host = NULL, *dev = NULL, *unal = NULL;
    CHECK_EQ_INT(tern_rt_create(&xa, "trn1.2xlarge", NULL, &host, &err), TERN_OK);
    CHECK_EQ_INT(tern_rt_create(&xa, "trn1.2xlarge", NULL, &dev, &err), TERN_OK);
    CHECK_EQ_INT(tern_rt_create(&xu, "trn1.2xlarge", NULL, &unal, &err), TERN_OK);
    tern_rt *rts[3] = {host, dev, unal};
    float **outs[3] = {h, d, u};
    for (int r = 0; r < 3; r++) {
        CHECK_EQ_INT(tern_rt_set_input(rts[r], "a", a0, bytes, &err), TERN_OK);
        CHECK_EQ_INT(tern_rt_set_input(rts[r], "b", b0, bytes, &err), TERN_OK);
    }
    TEST_BEGIN("moved pages and the unaligned copy give the host round trip's bits, step after step");
    for (int step = 0; step < 5; step++) {
        int64_t t[3];
        for (int r = 0; r < 3; r++) {
            tern_run_stats s;
            CHECK_EQ_INT(tern_rt_execute(rts[r], &s, &err), TERN_OK);
            t[r] = s.time_ps;
            CHECK_EQ_INT(tern_rt_get_output(rts[r], "ya", outs[r][0], bytes, &err), TERN_OK);
            CHECK_EQ_INT(tern_rt_get_output(rts[r], "yb", outs[r][1], bytes, &err), TERN_OK);
        }
        for (int i = 0; i < 2; i++) {
            CHECK_MSG(!memcmp(h[i], d[i], bytes), "step %d: %s differs with moved pages", step + 1, names[2 + i]);
            CHECK_MSG(!memcmp(h[i], u[i], bytes), "step %d: %s differs with the copy", step + 1, names[2 + i]);
        }
        CHECK(t[0] == t[1]);
        CHECK_EQ_INT(tern_rt_set_input(host, "a", h[0], bytes, &err), TERN_OK);
        CHECK_EQ_INT(tern_rt_set_input(host, "b", h[1], bytes, &err), TERN_OK);
        for (int r = 1; r < 3; r++) {
            CHECK_MSG(tern_rt_carry(rts[r], "ya", "a", &err) == TERN_OK, "%s", err.msg);
            CHECK_MSG(tern_rt_carry(rts[r], "yb", "b", &err) == TERN_OK, "%s", err.msg);
            /* after a carry the output reads the value it had (where it went), whole or in pieces */
            memset(got, 0, bytes);
            CHECK_EQ_INT(tern_rt_get_output(rts[r], "ya", got, bytes, &err), TERN_OK);
            CHECK_MSG(!memcmp(got, h[0], bytes), "step %d: ya after its carry", step + 1);
            CHECK_EQ_INT(tern_rt_get_output_range(rts[r], "yb", page - 8, got, 16, &err), TERN_OK);
            CHECK(!memcmp(got, (char *)h[1] + page - 8, 16));
            CHECK_EQ_INT(tern_rt_get_input(rts[r], "b", got, bytes, &err), TERN_OK);
            CHECK(!memcmp(got, h[1], bytes));
        }
    }
    CHECK(isfinite(h[0][n - 1]) && h[0][n - 1] != 0 && isfinite(h[1][7]));

    TEST_BEGIN("an output scanned where HBM holds it, page by page, is its bytes, after its carry too");
    {
        scan_sink sk = {(uint8_t *)got, 0, UINT64_MAX, 0};
        memset(got, 0, bytes);
        CHECK_MSG(tern_rt_scan_output(dev, "ya", 0, bytes, sink, &sk, &err) == TERN_OK, "%s", err.msg);
        CHECK(!memcmp(got, h[0], bytes) && sk.next == bytes);
        CHECK(sk.pieces >= 3); /* 2.05 MiB over 1 MiB pages */
        scan_sink part = {(uint8_t *)got, 0, UINT64_MAX, 0}; /* bytes [1000, +5000): pieces at 0.. from there */
        CHECK_EQ_INT(tern_rt_scan_output(unal, "yb", 1000, 5000, sink, &part, &err), TERN_OK);
        CHECK(part.next == 5000 && !memcmp(got, (char *)h[1] + 1000, 5000));
        scan_sink stop = {(uint8_t *)got, 0, page + 100, 0};
        CHECK_EQ_INT(tern_rt_scan_output(dev, "ya", 0, bytes, sink, &stop, &err), TERN_ERR_RANGE);
        CHECK_STR_CONTAINS(err.msg, "sink: stop at");
        CHECK_EQ_INT(tern_rt_scan_output(dev, "ya", 8, bytes, sink, &sk, &err), TERN_ERR_RANGE);
        CHECK_STR_CONTAINS(err.msg, "output 'ya' holds 2150400 bytes");
        CHECK_EQ_INT(tern_rt_scan_output(dev, "nope", 0, 4, sink, &sk, &err), TERN_ERR_NOT_FOUND);
    }

    TEST_BEGIN("an output carried to an input that is set again has no value until the next execution");
    CHECK_EQ_INT(tern_rt_set_input(dev, "a", a0, bytes, &err), TERN_OK);
    CHECK_EQ_INT(tern_rt_get_output(dev, "ya", got, bytes, &err), TERN_ERR_INVALID);
    CHECK_STR_CONTAINS(err.msg, "output 'ya' was carried to an input that has been given another value since");
    CHECK_EQ_INT(tern_rt_get_output_range(dev, "ya", 0, got, 4, &err), TERN_ERR_INVALID);
    {
        scan_sink sk = {(uint8_t *)got, 0, UINT64_MAX, 0};
        CHECK_EQ_INT(tern_rt_scan_output(dev, "ya", 0, 4, sink, &sk, &err), TERN_ERR_INVALID);
        CHECK_STR_CONTAINS(err.msg, "was carried to an input");
    }
    CHECK_EQ_INT(tern_rt_carry(dev, "ya", "a", &err), TERN_ERR_INVALID);
    CHECK_STR_CONTAINS(err.msg, "carry: output 'ya' was carried to an input");
    CHECK_EQ_INT(tern_rt_get_output(dev, "yb", got, bytes, &err), TERN_OK); /* b was not touched */
    CHECK(!memcmp(got, h[1], bytes));
    CHECK_EQ_INT(tern_rt_get_input(dev, "a", got, bytes, &err), TERN_OK);
    CHECK(!memcmp(got, a0, bytes));

    TEST_BEGIN("an output carried twice lands in both inputs; the next execution writes every output again");
    /* dev: a = a0 (host), b = h[1]; carrying yb (its value is in b already) on to a copies it, b keeps it */
    CHECK_MSG(tern_rt_carry(dev, "yb", "b", &err) == TERN_OK, "%s", err.msg); /* there already: nothing moves */
    CHECK_MSG(tern_rt_carry(dev, "yb", "a", &err) == TERN_OK, "%s", err.msg);
    CHECK_EQ_INT(tern_rt_get_input(dev, "a", got, bytes, &err), TERN_OK);
    CHECK(!memcmp(got, h[1], bytes));
    CHECK_EQ_INT(tern_rt_get_input(dev, "b", got, bytes, &err), TERN_OK);
    CHECK(!memcmp(got, h[1], bytes));
    CHECK_EQ_INT(tern_rt_set_input(host, "a", h[1], bytes, &err), TERN_OK);
    CHECK_EQ_INT(tern_rt_set_input(host, "b", h[1], bytes, &err), TERN_OK);
    CHECK_EQ_INT(tern_rt_execute(host, NULL, &err), TERN_OK);
    CHECK_EQ_INT(tern_rt_execute(dev, NULL, &err), TERN_OK);
    for (int i = 0; i < 2; i++) {
        CHECK_EQ_INT(tern_rt_get_output(host, names[2 + i], h[i], bytes, &err), TERN_OK);
        CHECK_EQ_INT(tern_rt_get_output(dev, names[2 + i], d[i], bytes, &err), TERN_OK);
        CHECK_MSG(!memcmp(h[i], d[i], bytes), "%s after the double carry", names[2 + i]);
    }
    for (int r = 0; r < 3; r++)
        tern_rt_free(rts[r]);
    for (int i = 0; i < 2; i++) {
        free(h[i]);
        free(d[i]);
        free(u[i]);
    }
    free(a0);
    free(b0);
    free(got);
    tern_exe_free(&xa);
    tern_exe_free(&xu);
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
    pages(&cfg);
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
