/* ScalarE activation: every function against a float64 reference written here from its textbook definition
 * (<= 1 ulp of fp32 after the fp32 affine step), scale/bias forms, the per-partition reduction, destination
 * rounding, documented out-of-range behaviour, v2-vs-v3 differences and each rule's rejection message. */
#include "check.h"
#include "sim/sim_test_util.h"

#define SB TERN_MEM_SBUF
#define PS TERN_MEM_PSUM
#define SE TERN_ENGINE_SCALAR
#define F32 TERN_DTYPE_FP32

static tern_core *v2, *v3;

static double ref(tern_act_func f, double x)
{
    const double pi = 3.14159265358979323846;
    double s = 1.0 / (1.0 + exp(-x));
    double cdf = 0.5 * (1.0 + erf(x / sqrt(2.0)));
    switch (f) {
    case TERN_ACT_COPY: return x;
    case TERN_ACT_EXP: return exp(x);
    case TERN_ACT_LOG: return log(x);
    case TERN_ACT_TANH: return tanh(x);
    case TERN_ACT_SIGMOID: return s;
    case TERN_ACT_RELU: return x > 0 ? x : 0;
    case TERN_ACT_GELU: return x * cdf;
    /* 0.5 x (1 + tanh(u)) written without the cancellation of 1 + tanh(u) for negative x (at x = -6 that form
     * is off by ~1e-6 relative; this one matches a 50-digit evaluation) */
    case TERN_ACT_GELU_TANH: return x / (1 + exp(-2 * sqrt(2 / pi) * (x + 0.044715 * pow(x, 3))));
    case TERN_ACT_GELU_DX: return cdf + x * exp(-x * x / 2) / sqrt(2 * pi);
    case TERN_ACT_SILU: return x * s;
    case TERN_ACT_SILU_DX: return s + x * s * (1 - s);
    case TERN_ACT_ERF: return erf(x);
    case TERN_ACT_ERF_DX: return 2 / sqrt(pi) * exp(-x * x);
    case TERN_ACT_SOFTPLUS: return x > 30 ? x + exp(-x) : log(1 + exp(x));
    case TERN_ACT_SQRT: return sqrt(x);
    case TERN_ACT_RSQRT: return 1 / sqrt(x);
    case TERN_ACT_RECIPROCAL: return 1 / x;
    case TERN_ACT_SQUARE: return x * x;
    case TERN_ACT_SIN: return sin(x);
    case TERN_ACT_ABS: return fabs(x);
    case TERN_ACT_SIGN: return x > 0 ? 1 : x < 0 ? -1 : 0;
    default: return NAN;
    }
}

static tern_instr act(tern_act_func f, tern_ap d, tern_ap a)
{
    tern_instr ins = st_instr(TERN_OP_ACTIVATION, SE);
    ins.func = (uint8_t)f;
    ins.imm0.f = 1.0f;
    ins.ap[TERN_AP_DST] = d;
    ins.ap[TERN_AP_IN0] = a;
    return ins;
}

/* Positive-domain functions get positive inputs. */
static int positive_only(tern_act_func f)
{
    return f == TERN_ACT_LOG || f == TERN_ACT_SQRT || f == TERN_ACT_RSQRT;
}

static void test_functions(void)
{
    enum { N = 64 };
    float x[N], xp[N], d[N];
    for (int i = 0; i < N; i++) {
        x[i] = -6.0f + 12.0f * (float)i / (N - 1) + 0.013f;
        xp[i] = 0.01f + 0.37f * (float)i;
    }
    st_write(v2, SB, 0, 1, 0, F32, x, N);
    st_write(v2, SB, 0, 1, 1024, F32, xp, N);
    for (int f = 0; f < TERN_ACT_COUNT; f++) {
        char name[96];
        snprintf(name, sizeof name, "activation %s within 1 ulp of the float64 reference", tern_act_name((tern_act_func)f));
        TEST_BEGIN(name);
        const float *in = positive_only((tern_act_func)f) ? xp : x;
        tern_instr ins = act((tern_act_func)f, st_ap1(SB, F32, 0, 1, 2048, N),
                             st_ap1(SB, F32, 0, 1, positive_only((tern_act_func)f) ? 1024 : 0, N));
        ST_EXPECT_OK(v2, &ins);
        st_read(v2, SB, 0, 1, 2048, F32, d, N);
        int bad = 0;
        for (int i = 0; i < N; i++) {
            float want = (float)ref((tern_act_func)f, in[i]);
            if (st_ulps(d[i], want) > 1) {
                if (bad++ < 3)
                    fprintf(stderr, "  %s(%.9g): got %.9g want %.9g\n", tern_act_name((tern_act_func)f), in[i], d[i],
                            want);
            }
        }
        CHECK_EQ_INT(bad, 0);
    }
}

static void test_affine_and_reduce(void)
{
    enum { P = 3, N = 10 };
    float a[P * N], d[P * N], bias[P] = {0.5f, -1.25f, 3.0f}, scale[P] = {2.0f, -0.5f, 0.1f}, sum[P];
    for (int i = 0; i < P * N; i++)
        a[i] = (float)(i % 7) * 0.3f - 1.0f;
    st_write(v2, SB, 0, P, 0, F32, a, N);
    st_write(v2, SB, 0, P, 512, TERN_DTYPE_BF16, bias, 1);
    st_write(v2, PS, 0, P, 0, F32, scale, 1);

    TEST_BEGIN("activation exp(A * imm0 + bias[p]) with a bf16 bias, fp32 affine (two roundings)");
    tern_instr ins = act(TERN_ACT_EXP, st_ap1(SB, F32, 0, P, 1024, N), st_ap1(SB, F32, 0, P, 0, N));
    ins.imm0.f = 0.7f;
    ins.ap[TERN_AP_IN1] = st_ap1(SB, TERN_DTYPE_BF16, 0, P, 512, 1);
    ST_EXPECT_OK(v2, &ins);
    st_read(v2, SB, 0, P, 1024, F32, d, N);
    int bad = 0;
    for (int p = 0; p < P; p++)
        for (int i = 0; i < N; i++) {
            float t = (float)((double)a[p * N + i] * 0.7f);
            t = (float)((double)t + bias[p]);
            bad += st_ulps(d[p * N + i], (float)exp(t)) > 1;
        }
    CHECK_EQ_INT(bad, 0);

    TEST_BEGIN("activation with a [P,1] fp32 scale in PSUM and the add-reduction of fp32 results");
    ins = act(TERN_ACT_TANH, st_ap1(SB, TERN_DTYPE_BF16, 0, P, 1024, N), st_ap1(SB, F32, 0, P, 0, N));
    ins.flags = TERN_FLAG_S0_AP | TERN_FLAG_REDUCE;
    ins.ap[TERN_AP_IN2] = st_ap1(PS, F32, 0, P, 0, 1);
    ins.ap[TERN_AP_EXTRA] = st_ap1(SB, F32, 0, P, 1500, 1);
    ST_EXPECT_OK(v2, &ins);
    st_read(v2, SB, 0, P, 1024, TERN_DTYPE_BF16, d, N);
    st_read(v2, SB, 0, P, 1500, F32, sum, 1);
    bad = 0;
    for (int p = 0; p < P; p++) {
        float acc = 0.0f;
        for (int i = 0; i < N; i++) {
            float y = (float)tanh((float)((double)a[p * N + i] * scale[p]));
            acc = (float)((double)acc + y);
            float yb = tern_bf16_to_f32(tern_f32_to_bf16(y, NULL, 0));
            bad += d[p * N + i] != yb; /* the destination is the bf16 rounding of the fp32 result */
        }
        CHECK_MSG(sum[p] == acc, "partition %d: sum %.9g want %.9g (fp32 results, before the bf16 cast)", p, sum[p],
                  acc);
    }
    CHECK_EQ_INT(bad, 0);

    TEST_BEGIN("activation copy to fp8_e5m2 and fp16 destinations rounds to nearest even");
    float c[4] = {1.1f, 70000.0f, -0.3f, 3.0e-8f}, co[4];
    st_write(v2, SB, 0, 1, 3000, F32, c, 4);
    ins = act(TERN_ACT_COPY, st_ap1(SB, TERN_DTYPE_FP16, 0, 1, 3100, 4), st_ap1(SB, F32, 0, 1, 3000, 4));
    ST_EXPECT_OK(v2, &ins);
    st_read(v2, SB, 0, 1, 3100, TERN_DTYPE_FP16, co, 4);
    CHECK(co[0] == 1.099609375f && isinf(co[1]) && co[2] == -0.300048828125f && co[3] == 0x1p-24f);
    ins.ap[TERN_AP_DST] = st_ap1(SB, TERN_DTYPE_FP8_E5M2, 0, 1, 3200, 4);
    ST_EXPECT_OK(v2, &ins);
    st_read(v2, SB, 0, 1, 3200, TERN_DTYPE_FP8_E5M2, co, 4);
    CHECK(co[0] == 1.0f && isinf(co[1]) && co[2] == -0.3125f && co[3] == 0.0f);

    TEST_BEGIN("activation outside documented ranges computes the exact function (log 2^-70, sin 9)");
    float o[2] = {0x1p-70f, 9.0f}, r[2];
    st_write(v2, SB, 0, 1, 3300, F32, o, 2);
    ins = act(TERN_ACT_LOG, st_ap1(SB, F32, 0, 1, 3400, 1), st_ap1(SB, F32, 0, 1, 3300, 1));
    ST_EXPECT_OK(v2, &ins);
    st_read(v2, SB, 0, 1, 3400, F32, r, 1);
    CHECK(st_ulps(r[0], (float)(-70.0 * log(2.0))) <= 1);
    ins = act(TERN_ACT_SIN, st_ap1(SB, F32, 0, 1, 3400, 1), st_ap1(SB, F32, 0, 1, 3304, 1));
    ST_EXPECT_OK(v2, &ins);
    st_read(v2, SB, 0, 1, 3400, F32, r, 1);
    CHECK(st_ulps(r[0], (float)sin(9.0)) <= 1); /* hardware: ~27.65 (no range reduction), not modelled */

    TEST_BEGIN("activation softplus is stable for large |x|; relu/sign keep NaN; -0 becomes +0 in the bias add");
    float s[4] = {100.0f, -100.0f, NAN, -0.0f}, so[4];
    st_write(v2, SB, 0, 1, 3500, F32, s, 4);
    ins = act(TERN_ACT_SOFTPLUS, st_ap1(SB, F32, 0, 1, 3600, 4), st_ap1(SB, F32, 0, 1, 3500, 4));
    ST_EXPECT_OK(v2, &ins);
    st_read(v2, SB, 0, 1, 3600, F32, so, 4);
    CHECK(so[0] == 100.0f && st_ulps(so[1], (float)exp(-100.0)) <= 1 && isnan(so[2]));
    ins.func = TERN_ACT_SIGN;
    ST_EXPECT_OK(v2, &ins);
    st_read(v2, SB, 0, 1, 3600, F32, so, 4);
    CHECK(so[0] == 1.0f && so[1] == -1.0f && isnan(so[2]) && so[3] == 0.0f && !signbit(so[3])); /* -0 * 1 + 0 = +0 */
    ins.func = TERN_ACT_RELU;
    ST_EXPECT_OK(v2, &ins);
    st_read(v2, SB, 0, 1, 3600, F32, so, 4);
    CHECK(so[0] == 100.0f && so[1] == 0.0f && isnan(so[2]));
}

/* fp32 rows computed in place or into other rows: in place, into disjoint rows of other partitions, and into rows
 * that overlap the input shifted by 3 elements (must read everything before writing, like the gather-scatter). */
static void test_in_place(void)
{
    enum { P = 6, N = 20 };
    float in[P * N], got[P * N + 3], want[P * N];
    for (int i = 0; i < P * N; i++)
        in[i] = (float)((i * 37) % 23) - 11.5f;
    for (int i = 0; i < P * N; i++)
        want[i] = in[i] * 0.5f > 0 ? in[i] * 0.5f : 0.0f;
    TEST_BEGIN("activation in place, into other partitions, and into overlapping rows: read-then-write results");
    st_write(v2, SB, 0, P, 8000, F32, in, N);
    tern_instr ins = act(TERN_ACT_RELU, st_ap1(SB, F32, 0, P, 8000, N), st_ap1(SB, F32, 0, P, 8000, N));
    ins.imm0.f = 0.5f;
    ST_EXPECT_OK(v2, &ins);
    st_read(v2, SB, 0, P, 8000, F32, got, N);
    CHECK(memcmp(got, want, sizeof want) == 0);
    st_write(v2, SB, 0, P, 8000, F32, in, N);
    ins.ap[TERN_AP_DST] = st_ap1(SB, F32, 32, P, 8000, N); /* the same bytes of other partitions */
    ST_EXPECT_OK(v2, &ins);
    st_read(v2, SB, 32, P, 8000, F32, got, N);
    CHECK(memcmp(got, want, sizeof want) == 0);
    st_write(v2, SB, 0, P, 8000, F32, in, N);
    ins.ap[TERN_AP_DST] = st_ap1(SB, F32, 0, P, 8012, N); /* each row shifted 3 elements over its own input */
    ST_EXPECT_OK(v2, &ins);
    st_read(v2, SB, 0, P, 8012, F32, got, N);
    CHECK(memcmp(got, want, sizeof want) == 0);
    st_write(v2, SB, 64, P, 8000, F32, in, N);
    ins.ap[TERN_AP_IN0] = st_ap1(SB, F32, 64, P, 8000, N);
    ins.ap[TERN_AP_DST] = st_ap1(TERN_MEM_PSUM, F32, 64, P, 64, N); /* SBUF -> PSUM */
    ST_EXPECT_OK(v2, &ins);
    st_read(v2, TERN_MEM_PSUM, 64, P, 64, F32, got, N);
    CHECK(memcmp(got, want, sizeof want) == 0);
}

static void test_rules(void)
{
    enum { P = 4, N = 8 };
    tern_instr base = act(TERN_ACT_EXP, st_ap1(SB, F32, 0, P, 1024, N), st_ap1(SB, F32, 0, P, 0, N));
    tern_instr ins;
    TEST_BEGIN("activation rejects an unknown function");
    ins = base;
    ins.func = 99;
    ST_EXPECT_FAIL(v2, &ins, "activation function 99");
    TEST_BEGIN("activation rejects a tf32 bias");
    ins = base;
    ins.ap[TERN_AP_IN1] = st_ap1(SB, TERN_DTYPE_TF32, 0, P, 512, 1);
    ST_EXPECT_FAIL(v2, &ins, "operand in1", "tf32");
    TEST_BEGIN("activation rejects a bias that is not [P,1]");
    ins.ap[TERN_AP_IN1] = st_ap1(SB, F32, 0, 2, 512, 1);
    ST_EXPECT_FAIL(v2, &ins, "operand in1", "bias must be [4, 1]", "[2, 1]");
    TEST_BEGIN("activation rejects a non-fp32 scale operand");
    ins = base;
    ins.flags = TERN_FLAG_S0_AP;
    ins.ap[TERN_AP_IN2] = st_ap1(SB, TERN_DTYPE_BF16, 0, P, 512, 1);
    ST_EXPECT_FAIL(v2, &ins, "operand in2", "scale dtype bf16", "fp32");
    TEST_BEGIN("activation rejects a scale operand without its flag");
    ins.flags = 0;
    ins.ap[TERN_AP_IN2].dtype = F32;
    ST_EXPECT_FAIL(v2, &ins, "operand in2", "unused");
    TEST_BEGIN("activation rejects a reduce result that is not [P,1]");
    ins = base;
    ins.flags = TERN_FLAG_REDUCE;
    ins.ap[TERN_AP_EXTRA] = st_ap1(SB, F32, 0, P, 600, 2);
    ST_EXPECT_FAIL(v2, &ins, "operand extra", "[4, 2]");
    TEST_BEGIN("activation rejects a reduce flag with no result operand");
    ins.ap[TERN_AP_EXTRA].ndims = 0;
    ST_EXPECT_FAIL(v2, &ins, "operand extra");
    TEST_BEGIN("activation rejects mismatched partitions and element counts");
    ins = base;
    ins.ap[TERN_AP_DST] = st_ap1(SB, F32, 0, 2, 1024, N);
    ST_EXPECT_FAIL(v2, &ins, "operand dst", "2 partitions", "4");
    ins.ap[TERN_AP_DST] = st_ap1(SB, F32, 0, P, 1024, N + 1);
    ST_EXPECT_FAIL(v2, &ins, "operand dst", "9 elements", "8");
    TEST_BEGIN("activation reciprocal with a bias: rejected on v2, runs on v3");
    ins = base;
    ins.func = TERN_ACT_RECIPROCAL;
    ins.ap[TERN_AP_IN1] = st_ap1(SB, F32, 0, P, 512, 1);
    ST_EXPECT_FAIL(v2, &ins, "operand in1", "reciprocal", "NeuronCore-v2");
    float ones[P * N], b[P] = {1, 1, 1, 1};
    for (int i = 0; i < P * N; i++)
        ones[i] = 1.0f;
    st_write(v3, SB, 0, P, 0, F32, ones, N);
    st_write(v3, SB, 0, P, 512, F32, b, 1);
    ST_EXPECT_OK(v3, &ins);
    float d[P * N];
    st_read(v3, SB, 0, P, 1024, F32, d, N);
    CHECK(d[0] == 0.5f && d[P * N - 1] == 0.5f);
    TEST_BEGIN("activation rejects the start-partition rule");
    ins = base;
    ins.ap[TERN_AP_IN0] = st_ap1(SB, F32, 8, P, 0, N);
    ST_EXPECT_FAIL(v2, &ins, "operand in0", "start partition 8");
    TEST_BEGIN("activation cannot issue on VectorE");
    ins = base;
    ins.engine = TERN_ENGINE_VECTOR;
    ST_EXPECT_FAIL(v2, &ins, "vector engine", "allowed: scalar");
    TEST_BEGIN("activation reads and writes PSUM");
    ins = base;
    ins.ap[TERN_AP_IN0] = st_ap1(PS, F32, 0, P, 0, N);
    ins.ap[TERN_AP_DST] = st_ap1(PS, F32, 0, P, 256, N);
    st_write(v2, PS, 0, P, 0, F32, ones, N);
    ST_EXPECT_OK(v2, &ins);
    st_read(v2, PS, 0, P, 256, F32, d, N);
    CHECK(d[3] == (float)exp(1.0));
}

/* fp32 input rows to a narrow destination: the function reads the rows in place (the vector and the scalar
 * functions alike) into the buffer the scatter converts; it must equal the dense path (a strided source holding
 * the same values), with a [P,1] scale and bias and the reduction, and with the destination over the input. */
static void test_rows_to_narrow(void)
{
    enum { P = 5, N = 45, SRC = 0, STRIDED = 1024, D1 = 2048, D2 = 3072, SUM1 = 3500, SUM2 = 3600, BIAS = 3700 };
    static const tern_act_func fs[] = {TERN_ACT_COPY, TERN_ACT_RELU, TERN_ACT_EXP, TERN_ACT_GELU_TANH, TERN_ACT_TANH,
                                       TERN_ACT_SIGMOID};
    static const tern_dtype dts[] = {TERN_DTYPE_BF16, TERN_DTYPE_FP16, TERN_DTYPE_FP8_E4M3};
    float x[P * N], x2[P * 2 * N], bias[P], scale[P];
    for (int i = 0; i < P * N; i++) {
        x[i] = (float)((i * 37) % 101) * 0.047f - 2.3f;
        x2[2 * i] = x[i];
        x2[2 * i + 1] = 1e30f; /* never read */
    }
    for (int p = 0; p < P; p++)
        bias[p] = 0.25f * (float)p - 0.5f, scale[p] = 1.0f + 0.125f * (float)p;
    st_write(v2, SB, 0, P, BIAS, F32, bias, 1);
    st_write(v2, PS, 0, P, 64, F32, scale, 1);
    int bad = 0, runs = 0;
    int32_t two = 2;
    uint32_t nn = N;
    for (unsigned f = 0; f < sizeof fs / sizeof fs[0]; f++)
        for (unsigned t = 0; t < sizeof dts / sizeof dts[0]; t++)
            for (int over = 0; over < 2; over++) {
                st_write(v2, SB, 0, P, SRC, F32, x, N);
                st_write(v2, SB, 0, P, STRIDED, F32, x2, 2 * N);
                uint16_t a[P * N], b[P * N];
                float s1[P], s2[P];
                tern_instr ins = act(fs[f], st_ap1(SB, dts[t], 0, P, over ? SRC + 2 : D1, N), st_ap1(SB, F32, 0, P, SRC, N));
                ins.flags = TERN_FLAG_S0_AP | TERN_FLAG_REDUCE;
                ins.ap[TERN_AP_IN1] = st_ap1(SB, F32, 0, P, BIAS, 1);
                ins.ap[TERN_AP_IN2] = st_ap1(PS, F32, 0, P, 64, 1);
                ins.ap[TERN_AP_EXTRA] = st_ap1(SB, F32, 0, P, SUM1, 1);
                ST_EXPECT_OK(v2, &ins);
                ins.ap[TERN_AP_DST] = st_ap1(SB, dts[t], 0, P, D2, N);
                ins.ap[TERN_AP_IN0] = st_ap(SB, F32, 0, P, STRIDED, 1, &two, &nn);
                ins.ap[TERN_AP_EXTRA] = st_ap1(SB, F32, 0, P, SUM2, 1);
                ST_EXPECT_OK(v2, &ins);
                size_t es = tern_dtype_size(dts[t]);
                for (int p = 0; p < P; p++) {
                    tern_error err;
                    tern_core_onchip_read(v2, TERN_MEM_SBUF, (uint32_t)p, over ? SRC + 2 : D1, (uint8_t *)a + p * N * es,
                                          N * es, &err);
                    tern_core_onchip_read(v2, TERN_MEM_SBUF, (uint32_t)p, D2, (uint8_t *)b + p * N * es, N * es, &err);
                }
                st_read(v2, SB, 0, P, SUM1, F32, s1, 1);
                st_read(v2, SB, 0, P, SUM2, F32, s2, 1);
                bad += memcmp(a, b, (size_t)P * N * es) != 0;
                bad += memcmp(s1, s2, sizeof s1) != 0;
                runs++;
            }
    TEST_BEGIN("activation from fp32 rows to bf16 / fp16 / fp8 (rows read in place) = the dense path, bits and sums");
    CHECK_EQ_INT(bad, 0);
    CHECK_EQ_INT(runs, 6 * 3 * 2);
}

/* The reduction's sum is each partition's fp32 chain over its results in element order, from +0, bit for bit: 19
 * partitions (not a multiple of the eight chains, nor of the sixteen the vector path runs together), rows of 1 to 300
 * elements (whole blocks of sixteen and tails), rows whose sum depends on the order (a huge value first and its
 * negation halfway absorb what lies between), a row of -0 only (its sum is +0), a row with NaNs of two payloads (the
 * first one's stays), copy and exp. */
static void test_sum_chain(void)
{
    enum { P = 19, NMAX = 300 };
    static const int lens[] = {1, 15, 16, 33, NMAX};
    static float x[P * NMAX], y[P * NMAX], z[P * NMAX];
    float sum[P];
    int bad = 0, runs = 0;
    for (unsigned li = 0; li < sizeof lens / sizeof lens[0]; li++) {
        const int N = lens[li];
        for (int i = 0; i < P * N; i++) {
            int k = i % N, p = i / N;
            x[i] = p == 5 ? -0.0f : k == 0 && N > 2 ? 1e30f : k == N / 2 && N > 2 ? -1e30f
                                                            : (float)((i * 37) % 101) * 0.01f - 0.4f;
            if (p == 17 && N > 3 && (k == 1 || k == 3)) { /* two NaNs of different payloads in one chain */
                uint32_t nb = k == 1 ? 0x7fc01234u : 0xffc00077u;
                memcpy(&x[i], &nb, 4);
            }
            z[i] = (float)((i * 53) % 97) * 0.05f - 2.0f;
        }
        st_write(v2, SB, 0, P, 0, F32, x, (uint32_t)N);
        st_write(v2, SB, 0, P, 8192, F32, z, (uint32_t)N);
        float nz[P];
        for (int p = 0; p < P; p++)
            nz[p] = -0.0f;
        st_write(v2, SB, 0, P, 12032, F32, nz, 1);
        for (int f = 0; f < 2; f++) {
            tern_instr ins = act(f ? TERN_ACT_EXP : TERN_ACT_COPY, st_ap1(SB, F32, 0, P, 4096, (uint32_t)N),
                                 st_ap1(SB, F32, 0, P, f ? 8192 : 0, (uint32_t)N)); /* exp of small values */
            ins.flags = TERN_FLAG_REDUCE;
            ins.ap[TERN_AP_EXTRA] = st_ap1(SB, F32, 0, P, 12000, 1);
            if (!f) /* a bias of -0 keeps every value, -0 included (x + -0 = x): the copy's rows are x */
                ins.ap[TERN_AP_IN1] = st_ap1(SB, F32, 0, P, 12032, 1);
            ST_EXPECT_OK(v2, &ins);
            st_read(v2, SB, 0, P, 4096, F32, y, (uint32_t)N);
            st_read(v2, SB, 0, P, 12000, F32, sum, 1);
            for (int p = 0; p < P; p++) {
                float acc = 0.0f;
                for (int i = 0; i < N; i++)
                    acc += y[p * N + i];
                if (!f && p == 5) /* the row of -0 went through as -0: its sum is +0, not the row's -0 */
                    bad += y[p * N] != 0.0f || !signbit(y[p * N]) || signbit(acc);
                uint32_t ga, wa;
                memcpy(&ga, &sum[p], 4);
                memcpy(&wa, &acc, 4);
                bad += ga != wa;
            }
            runs++;
        }
    }
    TEST_BEGIN("activation's sum = each partition's fp32 chain in element order, bit for bit");
    CHECK_EQ_INT(bad, 0);
    CHECK_EQ_INT(runs, 10);
}

int main(void)
{
    v2 = st_core("neuroncore-v2");
    v3 = st_core("neuroncore-v3");
    test_functions();
    test_affine_and_reduce();
    test_in_place();
    test_rows_to_narrow();
    test_sum_chain();
    test_rules();
    tern_core_free(v2);
    tern_core_free(v3);
    return check_report();
}
