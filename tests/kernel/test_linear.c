/* The kernel library's fused linear layer (tern_lib_linear): against a float64 reference over ragged M, N, K
 * with and without bias, copy/relu/gelu/gelu_tanh, bf16, fp32 and fp8 weights, on v2 and v3; bit-identical to
 * the unfused sequence the compiler used before (tern_lib_transpose into HBM, tern_lib_gemm with fp32
 * accumulators, tern_lib_bias_act) for K <= 1024; fewer DMA bytes and less simulated time than that sequence
 * for a GPT-2 MLP layer; and the build-time errors. */
#include <math.h>
#include <string.h>

#include "kernel_test_util.h"
#include "tern/kernel_lib.h"

static double unit_roundoff(tern_dtype dt)
{
    switch (dt) {
    case TERN_DTYPE_BF16: return 0x1p-8;
    case TERN_DTYPE_FP16: return 0x1p-11;
    default: return 0x1p-24;
    }
}

static double act_ref(tern_act_func f, double x)
{
    switch (f) {
    case TERN_ACT_COPY: return x;
    case TERN_ACT_RELU: return x > 0 ? x : 0.0;
    case TERN_ACT_GELU: return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
    case TERN_ACT_GELU_TANH: return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
    default: return NAN;
    }
}

typedef struct {
    unsigned M, K, N;
    int bias; /* 0 none, 1 [N], 2 [1, N] */
    tern_act_func act;
    tern_dtype a, w, out;
} lin_case;

static void case_name(char *buf, size_t n, const char *what, const char *machine, const lin_case *c)
{
    snprintf(buf, n, "%s %s %ux%ux%u %s bias%d a %s w %s out %s", what, machine, c->M, c->K, c->N,
             tern_act_name(c->act), c->bias, tern_dtype_name(c->a), tern_dtype_name(c->w), tern_dtype_name(c->out));
}

static tern_view declare_bias(tern_kernel *k, const lin_case *c)
{
    if (!c->bias)
        return tern_view_none();
    uint64_t shape[2] = {1, c->N};
    return c->bias == 1 ? tern_kernel_hbm_tensor(k, "bias", TERN_KIO_INPUT, TERN_DTYPE_FP32, 1, &shape[1])
                        : tern_kernel_hbm_tensor(k, "bias", TERN_KIO_INPUT, TERN_DTYPE_FP32, 2, shape);
}

/* Inputs rounded to their dtypes; bias in [-1/2, 1/2). */
static void make_inputs(const lin_case *c, float **a, float **w, float **b)
{
    *a = malloc(sizeof(float) * c->M * c->K);
    *w = malloc(sizeof(float) * c->K * c->N);
    *b = malloc(sizeof(float) * c->N);
    ktu_fill(*a, (size_t)c->M * c->K, c->a, 11 + c->M + c->K);
    ktu_fill(*w, (size_t)c->K * c->N, c->w, 23 + c->N);
    ktu_fill(*b, c->N, TERN_DTYPE_FP32, 5 + c->N);
    for (unsigned i = 0; i < c->N; i++)
        (*b)[i] *= 0.5f;
}

static void run_case(const char *machine, const lin_case *c)
{
    char name[200];
    case_name(name, sizeof name, "linear", machine, c);
    TEST_BEGIN(name);
    tern_core_config cfg;
    tern_core *core = ktu_core(machine, &cfg);
    tern_kernel *k = NULL;
    tern_error err;
    CHECK_EQ_INT(tern_kernel_create(&cfg, "lin", &k, &err), TERN_OK);
    tern_view a = tern_kernel_input2d(k, "a", c->a, c->M, c->K);
    tern_view w = tern_kernel_input2d(k, "w", c->w, c->K, c->N);
    tern_view bias = declare_bias(k, c);
    tern_view y = tern_kernel_output2d(k, "y", c->out, c->M, c->N);
    tern_lib_linear(k, y, a, w, bias, c->act);
    tern_status st = tern_kernel_status(k, &err);
    CHECK_MSG(st == TERN_OK, "build failed: %s", err.msg);
    float *xa, *xw, *xb, *out = malloc(sizeof(float) * c->M * c->N);
    make_inputs(c, &xa, &xw, &xb);
    if (!st) {
        CHECK_EQ_INT(tern_kernel_write_f32(k, core, "a", xa, (size_t)c->M * c->K, &err), TERN_OK);
        CHECK_EQ_INT(tern_kernel_write_f32(k, core, "w", xw, (size_t)c->K * c->N, &err), TERN_OK);
        if (c->bias)
            CHECK_EQ_INT(tern_kernel_write_f32(k, core, "bias", xb, c->N, &err), TERN_OK);
        st = tern_kernel_run(k, core, NULL, &err);
        CHECK_MSG(st == TERN_OK, "run failed: %s", err.msg);
        CHECK_EQ_INT(tern_kernel_read_f32(k, core, "y", out, (size_t)c->M * c->N, &err), TERN_OK);
        /* The reference sees a rounded to w's dtype (the kernel multiplies in w's dtype). */
        double *ar = malloc(sizeof(double) * c->M * c->K);
        for (size_t i = 0; i < (size_t)c->M * c->K; i++)
            ar[i] = tern_num_round_f32(c->w, xa[i], NULL, 0);
        size_t bad = 0;
        double worst = 0;
        for (unsigned m = 0; m < c->M; m++)
            for (unsigned n = 0; n < c->N; n++) {
                double s = 0, mag = 0;
                for (unsigned kk = 0; kk < c->K; kk++) {
                    double p = ar[(size_t)m * c->K + kk] * xw[(size_t)kk * c->N + n];
                    s += p;
                    mag += fabs(p);
                }
                double bv = c->bias ? xb[n] : 0.0, ref = act_ref(c->act, s + bv);
                /* fp32 sum over K, the bias add, the activation (slope <= 1.13) rounded to fp32, the output cast. */
                double tol = 1.25 * ((c->K + 1) * 0x1p-24 * (mag + fabs(bv))) +
                             fabs(ref) * (2 * 0x1p-24 + unit_roundoff(c->out)) + 1e-30;
                double e = fabs((double)out[(size_t)m * c->N + n] - ref);
                if (!(e <= tol))
                    bad++;
                if (e / tol > worst)
                    worst = e / tol;
            }
        CHECK_MSG(bad == 0, "%zu of %u elements outside the error bound (worst error/bound %.3g)", bad, c->M * c->N,
                  worst);
        free(ar);
    }
    free(xa);
    free(xw);
    free(xb);
    free(out);
    tern_kernel_free(k);
    tern_core_free(core);
}

/* The unfused sequence of the compiler's old MatMul lowering: transpose a into an HBM temporary in w's dtype,
 * GEMM (8 x 2 x 8 tiles, fp32 accumulators) into an fp32 temporary, bias_act (zero bias when only an
 * activation) into y. */
static void unfused(tern_kernel *k, tern_view y, tern_view a, tern_view w, tern_view bias, tern_act_func act,
                    const lin_case *c)
{
    uint64_t kt[2] = {c->K, c->M}, mn[2] = {c->M, c->N};
    tern_view aT = tern_kernel_hbm_tensor(k, "aT_tmp", TERN_KIO_SCRATCH, c->w, 2, kt);
    tern_lib_transpose(k, aT, a);
    tern_gemm_opts go;
    tern_gemm_opts_default(&go);
    go.acc_dtype = TERN_DTYPE_FP32;
    go.tiles_in_block_m = 8;
    int epilogue = c->bias || act != TERN_ACT_COPY;
    tern_view pre = epilogue ? tern_kernel_hbm_tensor(k, "pre_tmp", TERN_KIO_SCRATCH, TERN_DTYPE_FP32, 2, mn) : y;
    tern_lib_gemm(k, pre, aT, w, &go);
    if (!epilogue)
        return;
    if (!c->bias) {
        uint64_t n1[2] = {1, c->N};
        bias = tern_kernel_hbm_tensor(k, "zero_bias", TERN_KIO_SCRATCH, TERN_DTYPE_FP32, 2, n1);
        tern_view t = tern_kernel_sbuf(k, TERN_DTYPE_FP32, 1, c->N, "zero");
        tern_kernel_memset(k, TERN_ENGINE_AUTO, t, 0.0f);
        tern_kernel_store(k, bias, t);
        tern_kernel_release(k, t);
    }
    tern_lib_bias_act(k, y, pre, bias, act);
}

/* Fused and unfused into two outputs of one kernel: the same bits. */
/* special: the bias's first entries -0, +inf, -inf, NaN and the least subnormal (a layer with one row tile adds
 * the bias in PSUM by a K = 1 multiply, the unfused sequence by broadcast and VectorE add: the same bits even
 * there) */
static void bit_identical_bias(const char *machine, const lin_case *c, int special)
{
    char name[200];
    case_name(name, sizeof name, special ? "linear == transpose+gemm+bias_act, special bias values"
                                         : "linear == transpose+gemm+bias_act",
              machine, c);
    TEST_BEGIN(name);
    tern_core_config cfg;
    tern_core *core = ktu_core(machine, &cfg);
    tern_kernel *k = NULL;
    tern_error err;
    CHECK_EQ_INT(tern_kernel_create(&cfg, "lin", &k, &err), TERN_OK);
    tern_view a = tern_kernel_input2d(k, "a", c->a, c->M, c->K);
    tern_view w = tern_kernel_input2d(k, "w", c->w, c->K, c->N);
    tern_view bias = declare_bias(k, c);
    tern_view y1 = tern_kernel_output2d(k, "fused", c->out, c->M, c->N);
    tern_view y2 = tern_kernel_output2d(k, "unfused", c->out, c->M, c->N);
    tern_lib_linear(k, y1, a, w, bias, c->act);
    unfused(k, y2, a, w, bias, c->act, c);
    tern_status st = tern_kernel_status(k, &err);
    CHECK_MSG(st == TERN_OK, "build failed: %s", err.msg);
    float *xa, *xw, *xb;
    make_inputs(c, &xa, &xw, &xb);
    /* Wider inputs so that relu/gelu see both signs and large arguments. */
    for (size_t i = 0; i < (size_t)c->M * c->K; i++)
        xa[i] *= 3.0f;
    if (special && c->N >= 5) {
        const float sv[5] = {-0.0f, INFINITY, -INFINITY, NAN, 0x1p-149f};
        memcpy(xb, sv, sizeof sv);
    }
    size_t n = (size_t)c->M * c->N, bytes = n * tern_dtype_size(c->out);
    unsigned char *o1 = malloc(bytes), *o2 = malloc(bytes);
    if (!st) {
        CHECK_EQ_INT(tern_kernel_write_f32(k, core, "a", xa, (size_t)c->M * c->K, &err), TERN_OK);
        CHECK_EQ_INT(tern_kernel_write_f32(k, core, "w", xw, (size_t)c->K * c->N, &err), TERN_OK);
        if (c->bias)
            CHECK_EQ_INT(tern_kernel_write_f32(k, core, "bias", xb, c->N, &err), TERN_OK);
        st = tern_kernel_run(k, core, NULL, &err);
        CHECK_MSG(st == TERN_OK, "run failed: %s", err.msg);
        CHECK_EQ_INT(tern_kernel_read(k, core, "fused", o1, bytes, &err), TERN_OK);
        CHECK_EQ_INT(tern_kernel_read(k, core, "unfused", o2, bytes, &err), TERN_OK);
        size_t es = tern_dtype_size(c->out), diff = 0, first = n;
        for (size_t i = 0; i < n; i++)
            if (memcmp(o1 + i * es, o2 + i * es, es)) {
                if (!diff)
                    first = i;
                diff++;
            }
        CHECK_MSG(diff == 0, "%zu of %zu elements differ (first at row %zu, column %zu)", diff, n,
                  first / c->N, first % c->N);
    }
    free(xa);
    free(xw);
    free(xb);
    free(o1);
    free(o2);
    tern_kernel_free(k);
    tern_core_free(core);
}

static void bit_identical(const char *machine, const lin_case *c) { bit_identical_bias(machine, c, 0); }

static tern_run_stats time_kernel(const char *machine, const lin_case *c, int fused);

/* TensorE, ScalarE and VectorE instructions of a timing-only run of tern_lib_linear for case c */
static void engine_counts(const char *machine, const lin_case *c, uint64_t out[3])
{
    tern_run_stats s = time_kernel(machine, c, 1);
    out[0] = s.instructions[TERN_ENGINE_TENSOR];
    out[1] = s.instructions[TERN_ENGINE_SCALAR];
    out[2] = s.instructions[TERN_ENGINE_VECTOR];
}

/* With one row tile (M <= 128) the bias costs one K = 1 multiply closing each output group and nothing on
 * ScalarE or VectorE (their counts equal the layer's without bias); with two row tiles it is still broadcast
 * once per weight block and added by VectorE. */
static void bias_in_psum(const char *machine)
{
    TEST_BEGIN("linear: one row tile adds the bias in PSUM (K = 1 multiply per output group)");
    const tern_dtype F = TERN_DTYPE_FP32, B = TERN_DTYPE_BF16;
    const lin_case with = {128, 256, 1024, 1, TERN_ACT_COPY, F, B, F}, without = {128, 256, 1024, 0, TERN_ACT_COPY, F, B, F};
    uint64_t w[3], wo[3];
    engine_counts(machine, &with, w);
    engine_counts(machine, &without, wo);
    CHECK_MSG(w[0] == wo[0] + 4 && w[1] == wo[1] && w[2] == wo[2], /* a LoadStationary and a MultiplyMoving each */
              "M = 128, N = 1024 (2 output groups): TensorE/ScalarE/VectorE %llu/%llu/%llu with bias, %llu/%llu/%llu "
              "without (expected 2 more multiplies, 4 instructions, and nothing else)",
              (unsigned long long)w[0], (unsigned long long)w[1], (unsigned long long)w[2], (unsigned long long)wo[0],
              (unsigned long long)wo[1], (unsigned long long)wo[2]);
    const lin_case two = {200, 256, 1024, 1, TERN_ACT_COPY, F, B, F}, two0 = {200, 256, 1024, 0, TERN_ACT_COPY, F, B, F};
    engine_counts(machine, &two, w);
    engine_counts(machine, &two0, wo);
    CHECK_MSG(w[1] > wo[1], "M = 200: the broadcast bias's ScalarE evacuations expected, %llu against %llu",
              (unsigned long long)w[1], (unsigned long long)wo[1]);
}

/* Two layers in one kernel, the second reading the first's output from HBM (the builder orders the second
 * layer's loads after the first layer's stores): the same bits as the second layer run on its own from the
 * first layer's output. */
static void chained(const char *machine)
{
    char name[96];
    snprintf(name, sizeof name, "linear chained in one kernel %s", machine);
    TEST_BEGIN(name);
    const unsigned M = 130, K = 200, H = 5000, N = 300; /* three weight blocks: loads after stores */
    tern_core_config cfg;
    tern_core *core = ktu_core(machine, &cfg);
    tern_kernel *k1 = NULL, *k2 = NULL;
    tern_error err;
    uint64_t nh = H, nn = N;
    tern_kernel_create(&cfg, "two", &k1, &err);
    tern_view a = tern_kernel_input2d(k1, "a", TERN_DTYPE_FP32, M, K);
    tern_view w1 = tern_kernel_input2d(k1, "w1", TERN_DTYPE_BF16, K, H);
    tern_view b1 = tern_kernel_hbm_tensor(k1, "b1", TERN_KIO_INPUT, TERN_DTYPE_FP32, 1, &nh);
    tern_view w2 = tern_kernel_input2d(k1, "w2", TERN_DTYPE_BF16, H, N);
    tern_view b2 = tern_kernel_hbm_tensor(k1, "b2", TERN_KIO_INPUT, TERN_DTYPE_FP32, 1, &nn);
    tern_view h = tern_kernel_output2d(k1, "h", TERN_DTYPE_FP32, M, H);
    tern_view y = tern_kernel_output2d(k1, "y", TERN_DTYPE_FP32, M, N);
    tern_lib_linear(k1, h, a, w1, b1, TERN_ACT_GELU_TANH);
    /* Unrelated loads on every DMA queue between the layers: a queue's completion count must still mean that
     * the first layer's stores are done when the second layer's loads wait for it. */
    for (unsigned q = 0; q < 8 * cfg.dma_queues; q++) {
        tern_view t = tern_kernel_sbuf(k1, TERN_DTYPE_FP32, 1, N, "unrelated");
        tern_kernel_load(k1, t, b2);
        tern_kernel_release(k1, t);
    }
    tern_lib_linear(k1, y, h, w2, b2, TERN_ACT_COPY);
    tern_kernel_create(&cfg, "one", &k2, &err);
    tern_view h2 = tern_kernel_input2d(k2, "h", TERN_DTYPE_FP32, M, H);
    tern_view w22 = tern_kernel_input2d(k2, "w2", TERN_DTYPE_BF16, H, N);
    tern_view b22 = tern_kernel_hbm_tensor(k2, "b2", TERN_KIO_INPUT, TERN_DTYPE_FP32, 1, &nn);
    tern_view y2 = tern_kernel_output2d(k2, "y", TERN_DTYPE_FP32, M, N);
    tern_lib_linear(k2, y2, h2, w22, b22, TERN_ACT_COPY);
    CHECK_MSG(tern_kernel_status(k1, &err) == TERN_OK, "build failed: %s", err.msg);
    CHECK_MSG(tern_kernel_status(k2, &err) == TERN_OK, "build failed: %s", err.msg);
    float *xa = malloc(sizeof(float) * M * K), *xw1 = malloc(sizeof(float) * K * H), *xb1 = malloc(sizeof(float) * H);
    float *xw2 = malloc(sizeof(float) * H * N), *xb2 = malloc(sizeof(float) * N), *xh = malloc(sizeof(float) * M * H);
    float *o1 = malloc(sizeof(float) * M * N), *o2 = malloc(sizeof(float) * M * N);
    ktu_fill(xa, (size_t)M * K, TERN_DTYPE_FP32, 1);
    ktu_fill(xw1, (size_t)K * H, TERN_DTYPE_BF16, 2);
    ktu_fill(xb1, H, TERN_DTYPE_FP32, 3);
    ktu_fill(xw2, (size_t)H * N, TERN_DTYPE_BF16, 4);
    ktu_fill(xb2, N, TERN_DTYPE_FP32, 5);
    if (!tern_kernel_status(k1, &err) && !tern_kernel_status(k2, &err)) {
        tern_kernel_write_f32(k1, core, "a", xa, (size_t)M * K, &err);
        tern_kernel_write_f32(k1, core, "w1", xw1, (size_t)K * H, &err);
        tern_kernel_write_f32(k1, core, "b1", xb1, H, &err);
        tern_kernel_write_f32(k1, core, "w2", xw2, (size_t)H * N, &err);
        tern_kernel_write_f32(k1, core, "b2", xb2, N, &err);
        CHECK_EQ_INT(tern_kernel_run(k1, core, NULL, &err), TERN_OK);
        tern_kernel_read_f32(k1, core, "h", xh, (size_t)M * H, &err);
        tern_kernel_read_f32(k1, core, "y", o1, (size_t)M * N, &err);
        tern_core *core2 = ktu_core(machine, &cfg);
        tern_kernel_write_f32(k2, core2, "h", xh, (size_t)M * H, &err);
        tern_kernel_write_f32(k2, core2, "w2", xw2, (size_t)H * N, &err);
        tern_kernel_write_f32(k2, core2, "b2", xb2, N, &err);
        CHECK_EQ_INT(tern_kernel_run(k2, core2, NULL, &err), TERN_OK);
        tern_kernel_read_f32(k2, core2, "y", o2, (size_t)M * N, &err);
        size_t diff = 0;
        for (size_t i = 0; i < (size_t)M * N; i++)
            diff += memcmp(&o1[i], &o2[i], 4) != 0;
        CHECK_MSG(diff == 0, "%zu of %u elements of the second layer differ", diff, M * N);
        tern_core_free(core2);
    }
    free(xa);
    free(xw1);
    free(xb1);
    free(xw2);
    free(xb2);
    free(xh);
    free(o1);
    free(o2);
    tern_kernel_free(k1);
    tern_kernel_free(k2);
    tern_core_free(core);
}

/* Timing-only run of a kernel built by `build`; returns the run's stats. */
static tern_run_stats time_kernel(const char *machine, const lin_case *c, int fused)
{
    tern_run_stats stats;
    memset(&stats, 0, sizeof stats);
    tern_core_config cfg;
    tern_error err;
    if (tern_core_config_load(machine, &cfg, &err)) {
        CHECK_MSG(0, "cannot load %s: %s", machine, err.msg);
        return stats;
    }
    tern_core_options o = {0};
    o.mode = TERN_MODE_TIMING_ONLY;
    tern_core *core = NULL;
    if (tern_core_create(&cfg, &o, &core, &err)) {
        CHECK_MSG(0, "cannot create core: %s", err.msg);
        return stats;
    }
    tern_kernel *k = NULL;
    tern_kernel_create(&cfg, fused ? "fused" : "unfused", &k, &err);
    tern_view a = tern_kernel_input2d(k, "a", c->a, c->M, c->K);
    tern_view w = tern_kernel_input2d(k, "w", c->w, c->K, c->N);
    tern_view bias = declare_bias(k, c);
    tern_view y = tern_kernel_output2d(k, "y", c->out, c->M, c->N);
    if (fused)
        tern_lib_linear(k, y, a, w, bias, c->act);
    else
        unfused(k, y, a, w, bias, c->act, c);
    tern_status st = tern_kernel_status(k, &err);
    CHECK_MSG(st == TERN_OK, "build failed: %s", err.msg);
    if (!st) {
        st = tern_kernel_run(k, core, &stats, &err);
        CHECK_MSG(st == TERN_OK, "run failed: %s", err.msg);
    }
    tern_kernel_free(k);
    tern_core_free(core);
    return stats;
}

static void faster_than_unfused(const char *machine, const lin_case *c)
{
    char name[200];
    case_name(name, sizeof name, "linear vs unfused cost", machine, c);
    TEST_BEGIN(name);
    tern_run_stats f = time_kernel(machine, c, 1), u = time_kernel(machine, c, 0);
    printf("%s: fused %.2f us, %.2f MB DMA, %llu transfers; unfused %.2f us, %.2f MB DMA, %llu transfers\n", name,
           f.time_ps * 1e-6, f.dma_bytes * 1e-6, (unsigned long long)f.dma_transfers, u.time_ps * 1e-6,
           u.dma_bytes * 1e-6, (unsigned long long)u.dma_transfers);
    CHECK_MSG(f.dma_bytes > 0 && f.dma_bytes < u.dma_bytes, "DMA bytes: fused %llu, unfused %llu",
              (unsigned long long)f.dma_bytes, (unsigned long long)u.dma_bytes);
    CHECK_MSG(f.time_ps > 0 && f.time_ps < u.time_ps, "time: fused %lld ps, unfused %lld ps", (long long)f.time_ps,
              (long long)u.time_ps);
}

/* ---- errors ---- */

static void expect_error(const char *name, void (*build)(tern_kernel *), const char *n1, const char *n2)
{
    TEST_BEGIN(name);
    tern_core_config cfg;
    tern_error err;
    if (tern_core_config_load("neuroncore-v2", &cfg, &err)) {
        CHECK_MSG(0, "cannot load machine: %s", err.msg);
        return;
    }
    tern_kernel *k = NULL;
    CHECK_EQ_INT(tern_kernel_create(&cfg, "errk", &k, &err), TERN_OK);
    build(k);
    CHECK(tern_kernel_status(k, &err) != TERN_OK);
    CHECK_STR_CONTAINS(err.msg, "kernel errk: linear: ");
    CHECK_STR_CONTAINS(err.msg, n1);
    if (n2)
        CHECK_STR_CONTAINS(err.msg, n2);
    tern_kernel_free(k);
}

static void bad_k(tern_kernel *k)
{
    tern_view a = tern_kernel_input2d(k, "a", TERN_DTYPE_FP32, 4, 9);
    tern_view w = tern_kernel_input2d(k, "w", TERN_DTYPE_BF16, 8, 5);
    tern_view y = tern_kernel_output2d(k, "y", TERN_DTYPE_FP32, 4, 5);
    tern_lib_linear(k, y, a, w, tern_view_none(), TERN_ACT_COPY);
}
static void bad_n(tern_kernel *k)
{
    tern_view a = tern_kernel_input2d(k, "a", TERN_DTYPE_FP32, 4, 9);
    tern_view w = tern_kernel_input2d(k, "w", TERN_DTYPE_BF16, 9, 5);
    tern_view y = tern_kernel_output2d(k, "y", TERN_DTYPE_FP32, 4, 6);
    tern_lib_linear(k, y, a, w, tern_view_none(), TERN_ACT_COPY);
}
static void bad_bias(tern_kernel *k)
{
    tern_view a = tern_kernel_input2d(k, "a", TERN_DTYPE_FP32, 4, 9);
    tern_view w = tern_kernel_input2d(k, "w", TERN_DTYPE_BF16, 9, 5);
    tern_view b = tern_kernel_input2d(k, "b", TERN_DTYPE_FP32, 1, 8);
    tern_view y = tern_kernel_output2d(k, "y", TERN_DTYPE_FP32, 4, 5);
    tern_lib_linear(k, y, a, w, b, TERN_ACT_RELU);
}
static void bad_rank(tern_kernel *k)
{
    uint64_t shape[3] = {2, 3, 9};
    tern_view a = tern_kernel_hbm_tensor(k, "a", TERN_KIO_INPUT, TERN_DTYPE_FP32, 3, shape);
    tern_view w = tern_kernel_input2d(k, "w", TERN_DTYPE_BF16, 9, 5);
    tern_view y = tern_kernel_output2d(k, "y", TERN_DTYPE_FP32, 6, 5);
    tern_lib_linear(k, y, a, w, tern_view_none(), TERN_ACT_COPY);
}
static void bad_mem(tern_kernel *k)
{
    tern_view a = tern_kernel_sbuf(k, TERN_DTYPE_FP32, 4, 9, "a_tile");
    tern_view w = tern_kernel_input2d(k, "w", TERN_DTYPE_BF16, 9, 5);
    tern_view y = tern_kernel_output2d(k, "y", TERN_DTYPE_FP32, 4, 5);
    tern_lib_linear(k, y, a, w, tern_view_none(), TERN_ACT_COPY);
}
static void bad_dtype(tern_kernel *k)
{
    tern_view a = tern_kernel_input2d(k, "a", TERN_DTYPE_FP32, 4, 9);
    tern_view w = tern_kernel_input2d(k, "w", TERN_DTYPE_INT8, 9, 5);
    tern_view y = tern_kernel_output2d(k, "y", TERN_DTYPE_FP32, 4, 5);
    tern_lib_linear(k, y, a, w, tern_view_none(), TERN_ACT_COPY);
}
static void bad_huge_k(tern_kernel *k)
{
    tern_view a = tern_kernel_input2d(k, "a", TERN_DTYPE_FP32, 4, 40000);
    tern_view w = tern_kernel_input2d(k, "w", TERN_DTYPE_BF16, 40000, 5);
    tern_view y = tern_kernel_output2d(k, "y", TERN_DTYPE_FP32, 4, 5);
    tern_lib_linear(k, y, a, w, tern_view_none(), TERN_ACT_COPY);
}

/* tern_lib_linear_residual gives the bits of tern_lib_linear followed by tern_lib_binary's fp32 add. The two
 * kernels run one after the other on one core (fill-NaN memory): before tern_kernel_run reset the semaphores, the
 * second one's waits passed on the first one's counts and it read its output before it was written. */
static void residual_case(const char *machine, uint64_t M, uint64_t K, uint64_t N, int with_bias, tern_act_func act)
{
    char name[160];
    snprintf(name, sizeof name, "linear residual %s M=%llu K=%llu N=%llu bias=%d act=%d: = linear + add", machine,
             (unsigned long long)M, (unsigned long long)K, (unsigned long long)N, with_bias, (int)act);
    TEST_BEGIN(name);
    tern_core_config cfg;
    tern_core *core = ktu_core(machine, &cfg);
    tern_error err;
    tern_kernel *k[2] = {NULL, NULL};
    float *xa = malloc(sizeof(float) * M * K), *xw = malloc(sizeof(float) * K * N), *xb = malloc(sizeof(float) * N);
    float *xr = malloc(sizeof(float) * M * N), *o[2] = {malloc(sizeof(float) * M * N), malloc(sizeof(float) * M * N)};
    ktu_fill(xa, (size_t)M * K, TERN_DTYPE_FP32, 11);
    ktu_fill(xw, (size_t)K * N, TERN_DTYPE_BF16, 12);
    ktu_fill(xb, N, TERN_DTYPE_FP32, 13);
    ktu_fill(xr, (size_t)M * N, TERN_DTYPE_FP32, 14);
    for (int v = 0; v < 2; v++) {
        tern_kernel_create(&cfg, v ? "separate" : "fused", &k[v], &err);
        tern_view a = tern_kernel_input2d(k[v], "a", TERN_DTYPE_FP32, M, K);
        tern_view w = tern_kernel_input2d(k[v], "w", TERN_DTYPE_BF16, K, N);
        tern_view b = with_bias ? tern_kernel_hbm_tensor(k[v], "b", TERN_KIO_INPUT, TERN_DTYPE_FP32, 1, &N)
                                : tern_view_none();
        tern_view r = tern_kernel_input2d(k[v], "r", TERN_DTYPE_FP32, M, N);
        tern_view y = tern_kernel_output2d(k[v], "y", TERN_DTYPE_FP32, M, N);
        if (v == 0) {
            tern_lib_linear_residual(k[v], y, a, w, b, act, r);
        } else {
            tern_lib_linear(k[v], y, a, w, b, act);
            tern_lib_binary(k[v], y, y, r, TERN_ALU_ADD);
        }
        CHECK_MSG(tern_kernel_status(k[v], &err) == TERN_OK, "build failed: %s", err.msg);
        CHECK_EQ_INT(tern_kernel_write_f32(k[v], core, "a", xa, M * K, &err), TERN_OK);
        CHECK_EQ_INT(tern_kernel_write_f32(k[v], core, "w", xw, K * N, &err), TERN_OK);
        if (with_bias)
            CHECK_EQ_INT(tern_kernel_write_f32(k[v], core, "b", xb, N, &err), TERN_OK);
        CHECK_EQ_INT(tern_kernel_write_f32(k[v], core, "r", xr, M * N, &err), TERN_OK);
        CHECK_EQ_INT(tern_kernel_run(k[v], core, NULL, &err), TERN_OK);
        CHECK_EQ_INT(tern_kernel_read_f32(k[v], core, "y", o[v], M * N, &err), TERN_OK);
    }
    size_t diff = 0, first = 0;
    for (size_t i = 0; i < M * N; i++)
        if (memcmp(&o[0][i], &o[1][i], 4) != 0 && diff++ == 0)
            first = i;
    CHECK_MSG(diff == 0, "%zu of %llu differ, first at %zu: %.9g vs %.9g", diff, (unsigned long long)(M * N), first,
              o[0][first], o[1][first]);
    for (int v = 0; v < 2; v++) {
        tern_kernel_free(k[v]);
        free(o[v]);
    }
    free(xa), free(xw), free(xb), free(xr);
    tern_core_free(core);
}

static void bad_residual(tern_kernel *k)
{
    tern_view a = tern_kernel_input2d(k, "a", TERN_DTYPE_FP32, 8, 64);
    tern_view w = tern_kernel_input2d(k, "w", TERN_DTYPE_BF16, 64, 32);
    tern_view r = tern_kernel_input2d(k, "r", TERN_DTYPE_FP32, 8, 31);
    tern_lib_linear_residual(k, tern_kernel_output2d(k, "y", TERN_DTYPE_FP32, 8, 32), a, w, tern_view_none(),
                             TERN_ACT_COPY, r);
}

int main(void)
{
    residual_case("neuroncore-v2", 128, 768, 768, 1, TERN_ACT_COPY);
    residual_case("neuroncore-v2", 77, 300, 700, 0, TERN_ACT_COPY);
    residual_case("neuroncore-v2", 200, 256, 600, 1, TERN_ACT_GELU_TANH);
    residual_case("neuroncore-v3", 130, 512, 520, 0, TERN_ACT_RELU);
    expect_error("linear residual of the wrong shape", bad_residual, "residual", "[8, 31]");
    const tern_dtype F = TERN_DTYPE_FP32, B = TERN_DTYPE_BF16;
    const lin_case ref_v2[] = {
        {1, 64, 10, 1, TERN_ACT_COPY, F, B, F},
        {77, 200, 700, 2, TERN_ACT_RELU, F, B, F},
        {128, 768, 512, 0, TERN_ACT_GELU_TANH, F, B, F},
        {300, 768, 700, 1, TERN_ACT_GELU, F, B, F},
        {77, 3072, 700, 1, TERN_ACT_GELU_TANH, F, B, F},
        {130, 200, 2304, 0, TERN_ACT_COPY, F, B, F},
        {1, 768, 2304, 1, TERN_ACT_GELU_TANH, F, B, B},
        {300, 64, 512, 1, TERN_ACT_RELU, B, B, F},
        {100, 200, 150, 1, TERN_ACT_GELU, F, F, F},      /* fp32 weights */
        {129, 1100, 300, 0, TERN_ACT_RELU, F, F, F},     /* fp32 weights, K > 1024 */
        {64, 256, 300, 1, TERN_ACT_COPY, F, TERN_DTYPE_FP16, F},
        {700, 3072, 10, 1, TERN_ACT_RELU, F, F, F},      /* blocks of M (aT of all M exceeds its SBUF share) */
        {1, 10000, 300, 1, TERN_ACT_COPY, F, B, F},      /* single-buffered, 128-column output tiles */
        {96, 300, 260, 0, TERN_ACT_COPY, F, TERN_DTYPE_FP8_E4M3, F},
    };
    for (size_t i = 0; i < sizeof ref_v2 / sizeof ref_v2[0]; i++)
        run_case("neuroncore-v2", &ref_v2[i]);
    const lin_case ref_v3[] = {
        {200, 300, 600, 1, TERN_ACT_GELU_TANH, F, B, F},
        {128, 3072, 300, 0, TERN_ACT_GELU, F, B, B},
        {50, 130, 77, 1, TERN_ACT_RELU, F, F, F},
    };
    for (size_t i = 0; i < sizeof ref_v3 / sizeof ref_v3[0]; i++)
        run_case("neuroncore-v3", &ref_v3[i]);
    const lin_case ref_v4 = {150, 500, 900, 1, TERN_ACT_GELU, F, B, F};
    run_case("neuroncore-v4", &ref_v4);

    const lin_case same_v2[] = {
        {77, 200, 700, 1, TERN_ACT_RELU, F, B, F},
        {300, 1024, 600, 2, TERN_ACT_GELU_TANH, F, B, F},
        {128, 768, 512, 0, TERN_ACT_GELU, F, B, F},
        {130, 64, 520, 0, TERN_ACT_COPY, F, B, F},
        {129, 384, 1100, 1, TERN_ACT_COPY, F, B, F},
        {64, 200, 300, 1, TERN_ACT_GELU, F, B, B},
        {100, 200, 150, 1, TERN_ACT_RELU, F, F, F},
        {2100, 1024, 40, 1, TERN_ACT_GELU_TANH, F, F, F}, /* two blocks of M */
    };
    for (size_t i = 0; i < sizeof same_v2 / sizeof same_v2[0]; i++)
        bit_identical("neuroncore-v2", &same_v2[i]);
    const lin_case same_v3[] = {
        {200, 768, 300, 1, TERN_ACT_GELU, F, B, F},
        {77, 130, 513, 0, TERN_ACT_COPY, F, B, F},
    };
    for (size_t i = 0; i < sizeof same_v3 / sizeof same_v3[0]; i++)
        bit_identical("neuroncore-v3", &same_v3[i]);
    const lin_case special[] = {
        {128, 256, 700, 1, TERN_ACT_COPY, F, B, F},
        {77, 200, 520, 2, TERN_ACT_GELU, F, B, F},
        {16, 64, 40, 1, TERN_ACT_RELU, F, F, F},
        {200, 256, 600, 1, TERN_ACT_COPY, F, B, F}, /* two row tiles: the broadcast */
    };
    for (size_t i = 0; i < sizeof special / sizeof special[0]; i++)
        bit_identical_bias("neuroncore-v2", &special[i], 1);
    bit_identical_bias("neuroncore-v3", &special[1], 1);
    bias_in_psum("neuroncore-v2");
    bias_in_psum("neuroncore-v3");

    chained("neuroncore-v2");
    chained("neuroncore-v3");

    const lin_case mlp = {128, 768, 3072, 1, TERN_ACT_GELU_TANH, F, B, F};
    faster_than_unfused("neuroncore-v2", &mlp);
    faster_than_unfused("neuroncore-v3", &mlp);

    expect_error("linear error: K mismatch", bad_k, "contraction mismatch: a is [4, 9] but w is [8, 5]", NULL);
    expect_error("linear error: N mismatch", bad_n, "out is [4, 6], expected [4, 5]", NULL);
    expect_error("linear error: bias length", bad_bias, "bias is [1, 8]", "must be a float HBM [5] or [1, 5]");
    expect_error("linear error: rank", bad_rank, "a must be a 2-D HBM view, is a rank-3 hbm view", NULL);
    expect_error("linear error: not HBM", bad_mem, "a must be a 2-D HBM view", "sbuf");
    expect_error("linear error: weight dtype", bad_dtype, "w is int8", "TensorE dtype");
    expect_error("linear error: K too large", bad_huge_k, "K = 40000 is too large for SBUF", NULL);
    return check_report();
}
