/* VectorE family (and its GpSimd/ScalarE issues): semantics of every instruction against float64 references
 * computed here (with an independent RNE rounding to bf16/fp16/fp8), and one test per rule each must reject,
 * checking that the message names the operand and the value. */
#include "check.h"
#include "sim/core_internal.h" /* alu_apply_f32: the scalar definition the row paths must match bit for bit */
#include "sim/sim_test_util.h"

#define SB TERN_MEM_SBUF
#define PS TERN_MEM_PSUM
#define VE TERN_ENGINE_VECTOR
#define GP TERN_ENGINE_GPSIMD
#define SE TERN_ENGINE_SCALAR
#define F32 TERN_DTYPE_FP32

static tern_core *v2, *v3, *v4;

/* Round-to-nearest-even of x to a float format with `m` mantissa bits, minimum normal exponent emin and largest
 * finite maxv; overflow gives inf (or NaN when nan_on_overflow). Independent of tern's num layer. */
static double ref_round(double x, int m, int emin, double maxv, int nan_on_overflow)
{
    if (x == 0 || x != x || isinf(x))
        return x;
    int ex;
    frexp(x, &ex);
    int e = ex - 1 < emin ? emin : ex - 1;
    double q = ldexp(1.0, e - m);
    double r = nearbyint(x / q) * q;
    if (fabs(r) > maxv)
        return nan_on_overflow ? NAN : copysign(INFINITY, x);
    return r;
}
static double ref_bf16(double x) { return ref_round(x, 7, -126, 3.3895313892515355e38, 0); }
static double ref_fp16(double x) { return ref_round(x, 10, -14, 65504.0, 0); }
static double ref_e4m3(double x) { return ref_round(x, 3, -6, 448.0, 1); }

static float vals(int i) { return (float)((i * 37 % 101) - 50) * 0.173f; }

static void fill(float *v, size_t n, int seed)
{
    for (size_t i = 0; i < n; i++)
        v[i] = vals((int)i + seed);
}

static tern_instr tt(tern_engine e, tern_alu_op op, tern_ap d, tern_ap a, tern_ap b)
{
    tern_instr ins = st_instr(TERN_OP_TENSOR_TENSOR, e);
    ins.op0 = (uint8_t)op;
    ins.ap[TERN_AP_DST] = d;
    ins.ap[TERN_AP_IN0] = a;
    ins.ap[TERN_AP_IN1] = b;
    return ins;
}

static void test_tensor_tensor(void)
{
    enum { P = 4, N = 16 };
    float a[P * N], b[P * N], d[P * N];
    fill(a, P * N, 1);
    fill(b, P * N, 7);
    TEST_BEGIN("tensor_tensor add fp32");
    st_write(v2, SB, 0, P, 0, F32, a, N);
    st_write(v2, SB, 0, P, 256, F32, b, N);
    tern_instr ins = tt(VE, TERN_ALU_ADD, st_ap1(SB, F32, 0, P, 512, N), st_ap1(SB, F32, 0, P, 0, N),
                        st_ap1(SB, F32, 0, P, 256, N));
    ST_EXPECT_OK(v2, &ins);
    st_read(v2, SB, 0, P, 512, F32, d, N);
    int bad = 0;
    for (int i = 0; i < P * N; i++)
        bad += d[i] != (float)((double)a[i] + b[i]);
    CHECK_EQ_INT(bad, 0);

    /* the destination as the first input, as the second input, and shifted 3 elements over the second input
     * (that one must read everything before writing) */
    TEST_BEGIN("tensor_tensor subtract in place, into in1, and shifted over in1: read-then-write results");
    float want[P * N], got[P * N];
    for (int i = 0; i < P * N; i++)
        want[i] = a[i] - b[i];
    const uint64_t offs[3][3] = {{0, 0, 256}, {256, 0, 256}, {268, 0, 256}}; /* dst, in0, in1 */
    for (int c = 0; c < 3; c++) {
        st_write(v2, SB, 0, P, 0, F32, a, N);
        st_write(v2, SB, 0, P, 256, F32, b, N);
        ins = tt(VE, TERN_ALU_SUBTRACT, st_ap1(SB, F32, 0, P, offs[c][0], N), st_ap1(SB, F32, 0, P, offs[c][1], N),
                 st_ap1(SB, F32, 0, P, offs[c][2], N));
        ST_EXPECT_OK(v2, &ins);
        st_read(v2, SB, 0, P, offs[c][0], F32, got, N);
        CHECK_MSG(memcmp(got, want, sizeof want) == 0, "case %d differs", c);
    }
    st_write(v2, SB, 0, P, 0, F32, a, N); /* the inputs again for the tests below */
    st_write(v2, SB, 0, P, 256, F32, b, N);

    TEST_BEGIN("tensor_tensor mult to bf16 rounds once (RNE)");
    ins = tt(VE, TERN_ALU_MULT, st_ap1(SB, TERN_DTYPE_BF16, 0, P, 1024, N), st_ap1(SB, F32, 0, P, 0, N),
             st_ap1(SB, F32, 0, P, 256, N));
    ST_EXPECT_OK(v2, &ins);
    st_read(v2, SB, 0, P, 1024, TERN_DTYPE_BF16, d, N);
    bad = 0;
    for (int i = 0; i < P * N; i++)
        bad += d[i] != (float)ref_bf16((double)(a[i] * b[i]));
    CHECK_EQ_INT(bad, 0);

    TEST_BEGIN("tensor_tensor subtract, in1 in PSUM, strided in0, fp16 dst");
    /* in0: every other element of a 32-element row */
    float wide[P * 2 * N];
    fill(wide, P * 2 * N, 3);
    st_write(v2, SB, 0, P, 2048, F32, wide, 2 * N);
    st_write(v2, PS, 0, P, 0, F32, b, N);
    int32_t st2[1] = {2};
    uint32_t nn[1] = {N};
    ins = tt(VE, TERN_ALU_SUBTRACT, st_ap1(SB, TERN_DTYPE_FP16, 0, P, 4096, N), st_ap(SB, F32, 0, P, 2048, 1, st2, nn),
             st_ap1(PS, F32, 0, P, 0, N));
    ST_EXPECT_OK(v2, &ins);
    st_read(v2, SB, 0, P, 4096, TERN_DTYPE_FP16, d, N);
    bad = 0;
    for (int p = 0; p < P; p++)
        for (int i = 0; i < N; i++)
            bad += d[p * N + i] != (float)ref_fp16((double)(wide[p * 2 * N + 2 * i] - b[p * N + i]));
    CHECK_EQ_INT(bad, 0);

    TEST_BEGIN("tensor_tensor fp8_e4m3 destination saturates to NaN on overflow");
    float big[4] = {100.0f, 460.0f, 0.3f, -1000.0f}, one[4] = {1, 1, 1, 1}, out[4];
    st_write(v2, SB, 0, 1, 8192, F32, big, 4);
    st_write(v2, SB, 0, 1, 8448, F32, one, 4);
    ins = tt(VE, TERN_ALU_MULT, st_ap1(SB, TERN_DTYPE_FP8_E4M3, 0, 1, 8704, 4), st_ap1(SB, F32, 0, 1, 8192, 4),
             st_ap1(SB, F32, 0, 1, 8448, 4));
    ST_EXPECT_OK(v2, &ins);
    st_read(v2, SB, 0, 1, 8704, TERN_DTYPE_FP8_E4M3, out, 4);
    for (int i = 0; i < 4; i++)
        CHECK_MSG(st_ulps(out[i], (float)ref_e4m3(big[i])) == 0, "e4m3(%g): got %g want %g", big[i], out[i],
                  ref_e4m3(big[i]));

    TEST_BEGIN("tensor_tensor max/min: NaN loses to a number (IEEE maxNum)");
    float x[4] = {NAN, 1.0f, -2.0f, NAN}, y[4] = {3.0f, NAN, -1.0f, NAN};
    st_write(v2, SB, 0, 1, 0, F32, x, 4);
    st_write(v2, SB, 0, 1, 256, F32, y, 4);
    ins = tt(VE, TERN_ALU_MAX, st_ap1(SB, F32, 0, 1, 512, 4), st_ap1(SB, F32, 0, 1, 0, 4), st_ap1(SB, F32, 0, 1, 256, 4));
    ST_EXPECT_OK(v2, &ins);
    st_read(v2, SB, 0, 1, 512, F32, out, 4);
    CHECK(out[0] == 3.0f && out[1] == 1.0f && out[2] == -1.0f && isnan(out[3]));
    ins.op0 = TERN_ALU_MIN;
    ST_EXPECT_OK(v2, &ins);
    st_read(v2, SB, 0, 1, 512, F32, out, 4);
    CHECK(out[0] == 3.0f && out[1] == 1.0f && out[2] == -2.0f && isnan(out[3]));

    TEST_BEGIN("tensor_tensor comparisons, divide, mod, abs_max, average");
    float p[4] = {-7.0f, 2.0f, 5.0f, -3.0f}, q[4] = {3.0f, 2.0f, -4.0f, 8.0f};
    st_write(v2, SB, 0, 1, 0, F32, p, 4);
    st_write(v2, SB, 0, 1, 256, F32, q, 4);
    struct { tern_alu_op op; float want[4]; } cases[] = {
        {TERN_ALU_IS_GT, {0, 0, 1, 0}},          {TERN_ALU_IS_GE, {0, 1, 1, 0}},
        {TERN_ALU_IS_EQ, {0, 1, 0, 0}},          {TERN_ALU_NOT_EQ, {1, 0, 1, 1}},
        {TERN_ALU_MOD, {-1, 0, 1, -3}},          {TERN_ALU_ABS_MAX, {7, 2, 5, 8}},
        {TERN_ALU_ABS_MIN, {3, 2, 4, 3}},        {TERN_ALU_AVERAGE, {-2, 2, 0.5f, 2.5f}},
        {TERN_ALU_LOGICAL_XOR, {0, 0, 0, 0}},    {TERN_ALU_DIVIDE, {-7.0f / 3.0f, 1, -1.25f, -0.375f}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        ins.op0 = (uint8_t)cases[c].op;
        ST_EXPECT_OK(v2, &ins);
        st_read(v2, SB, 0, 1, 512, F32, out, 4);
        for (int i = 0; i < 4; i++)
            CHECK_MSG(out[i] == cases[c].want[i], "%s[%d]: got %g want %g", tern_alu_name(cases[c].op), i, out[i],
                      cases[c].want[i]);
    }

    TEST_BEGIN("tensor_tensor bitwise and/xor/shifts on int32 (logical right shift, count masked)");
    uint32_t ia[4] = {0xF0F0F0F0u, 0x80000000u, 0x12345678u, 0xFFFFFFFFu}, ib[4] = {0x0FF00FF0u, 31, 33, 4}, io[4];
    st_write_bits(v2, SB, 0, 1, 0, TERN_DTYPE_INT32, ia, 4);
    st_write_bits(v2, SB, 0, 1, 256, TERN_DTYPE_INT32, ib, 4);
    ins = tt(VE, TERN_ALU_BITWISE_AND, st_ap1(SB, TERN_DTYPE_INT32, 0, 1, 512, 4),
             st_ap1(SB, TERN_DTYPE_INT32, 0, 1, 0, 4), st_ap1(SB, TERN_DTYPE_INT32, 0, 1, 256, 4));
    ST_EXPECT_OK(v2, &ins);
    st_read_bits(v2, SB, 0, 1, 512, TERN_DTYPE_INT32, io, 4);
    CHECK_EQ_HEX(io[0], 0x00F000F0u);
    ins.op0 = TERN_ALU_SHIFT_RIGHT;
    ST_EXPECT_OK(v2, &ins);
    st_read_bits(v2, SB, 0, 1, 512, TERN_DTYPE_INT32, io, 4);
    CHECK_EQ_HEX(io[1], 1u);                 /* logical: 0x80000000 >> 31 */
    CHECK_EQ_HEX(io[2], 0x12345678u >> 1);   /* 33 & 31 = 1 */
    CHECK_EQ_HEX(io[3], 0x0FFFFFFFu);
    ins.op0 = TERN_ALU_SHIFT_LEFT;
    ST_EXPECT_OK(v2, &ins);
    st_read_bits(v2, SB, 0, 1, 512, TERN_DTYPE_INT32, io, 4);
    CHECK_EQ_HEX(io[2], 0x2468ACF0u);
    ins.op0 = TERN_ALU_BITWISE_XOR;
    ST_EXPECT_OK(v2, &ins);
    st_read_bits(v2, SB, 0, 1, 512, TERN_DTYPE_INT32, io, 4);
    CHECK_EQ_HEX(io[0], 0xFF00FF00u);

    TEST_BEGIN("tensor_tensor int32: GpSimd exact and wrapping, VectorE through fp32");
    uint32_t ga[3] = {16777217u, 0x7FFFFFFFu, (uint32_t)-5}, gb[3] = {0, 1, 3}, go[3];
    st_write_bits(v2, SB, 0, 1, 0, TERN_DTYPE_INT32, ga, 3);
    st_write_bits(v2, SB, 0, 1, 256, TERN_DTYPE_INT32, gb, 3);
    ins = tt(GP, TERN_ALU_ADD, st_ap1(SB, TERN_DTYPE_INT32, 0, 1, 512, 3), st_ap1(SB, TERN_DTYPE_INT32, 0, 1, 0, 3),
             st_ap1(SB, TERN_DTYPE_INT32, 0, 1, 256, 3));
    ST_EXPECT_OK(v2, &ins);
    st_read_bits(v2, SB, 0, 1, 512, TERN_DTYPE_INT32, go, 3);
    CHECK_EQ_INT(go[0], 16777217);
    CHECK_EQ_HEX(go[1], 0x80000000u); /* wraps */
    CHECK_EQ_INT((int32_t)go[2], -2);
    ins.engine = VE;
    ST_EXPECT_OK(v2, &ins);
    st_read_bits(v2, SB, 0, 1, 512, TERN_DTYPE_INT32, go, 3);
    CHECK_EQ_INT(go[0], 16777216); /* 2^24 + 1 is not an fp32 */
    CHECK_EQ_HEX(go[1], 0x7FFFFFFFu); /* fp32 2^31 saturates on the int32 cast */

    TEST_BEGIN("tensor_tensor GpSimd uint32 max compares unsigned");
    uint32_t ua[2] = {0xFFFFFFF0u, 5}, ub[2] = {7, 0x90000000u};
    st_write_bits(v2, SB, 0, 1, 0, TERN_DTYPE_UINT32, ua, 2);
    st_write_bits(v2, SB, 0, 1, 256, TERN_DTYPE_UINT32, ub, 2);
    ins = tt(GP, TERN_ALU_MAX, st_ap1(SB, TERN_DTYPE_UINT32, 0, 1, 512, 2), st_ap1(SB, TERN_DTYPE_UINT32, 0, 1, 0, 2),
             st_ap1(SB, TERN_DTYPE_UINT32, 0, 1, 256, 2));
    ST_EXPECT_OK(v2, &ins);
    st_read_bits(v2, SB, 0, 1, 512, TERN_DTYPE_UINT32, go, 2);
    CHECK_EQ_HEX(go[0], 0xFFFFFFF0u);
    CHECK_EQ_HEX(go[1], 0x90000000u);

    TEST_BEGIN("tensor_tensor pow on GpSimd");
    float pa[3] = {2.0f, 9.0f, 10.0f}, pb[3] = {3.0f, 0.5f, -1.0f};
    st_write(v2, SB, 0, 1, 0, F32, pa, 3);
    st_write(v2, SB, 0, 1, 256, F32, pb, 3);
    ins = tt(GP, TERN_ALU_POW, st_ap1(SB, F32, 0, 1, 512, 3), st_ap1(SB, F32, 0, 1, 0, 3), st_ap1(SB, F32, 0, 1, 256, 3));
    ST_EXPECT_OK(v2, &ins);
    st_read(v2, SB, 0, 1, 512, F32, out, 3);
    CHECK(out[0] == 8.0f && out[1] == 3.0f && out[2] == 0.1f);

    /* rules */
    TEST_BEGIN("tensor_tensor rejects pow on VectorE");
    ins.engine = VE;
    ST_EXPECT_FAIL(v2, &ins, "pow", "GpSimd");
    TEST_BEGIN("tensor_tensor rejects both inputs in PSUM");
    ins = tt(VE, TERN_ALU_ADD, st_ap1(SB, F32, 0, P, 0, N), st_ap1(PS, F32, 0, P, 0, N), st_ap1(PS, F32, 0, P, 256, N));
    ST_EXPECT_FAIL(v2, &ins, "operand in1", "PSUM");
    TEST_BEGIN("tensor_tensor rejects a partition-count mismatch");
    ins = tt(VE, TERN_ALU_ADD, st_ap1(SB, F32, 0, P, 0, N), st_ap1(SB, F32, 0, P, 256, N), st_ap1(SB, F32, 0, 2, 512, N));
    ST_EXPECT_FAIL(v2, &ins, "operand in1", "2 partitions", "4");
    TEST_BEGIN("tensor_tensor rejects an element-count mismatch");
    ins = tt(VE, TERN_ALU_ADD, st_ap1(SB, F32, 0, P, 0, N), st_ap1(SB, F32, 0, P, 256, N - 1),
             st_ap1(SB, F32, 0, P, 512, N));
    ST_EXPECT_FAIL(v2, &ins, "operand in0", "15 elements", "16");
    TEST_BEGIN("tensor_tensor rejects bitvec on a float operand");
    ins = tt(VE, TERN_ALU_BITWISE_OR, st_ap1(SB, TERN_DTYPE_INT32, 0, P, 0, N), st_ap1(SB, F32, 0, P, 256, N),
             st_ap1(SB, TERN_DTYPE_INT32, 0, P, 512, N));
    ST_EXPECT_FAIL(v2, &ins, "operand in0", "fp32", "integer");
    TEST_BEGIN("tensor_tensor rejects an unknown ALU operator");
    ins = tt(VE, TERN_ALU_ADD, st_ap1(SB, F32, 0, P, 0, N), st_ap1(SB, F32, 0, P, 256, N), st_ap1(SB, F32, 0, P, 512, N));
    ins.op0 = 200;
    ST_EXPECT_FAIL(v2, &ins, "op0", "200");
    TEST_BEGIN("tensor_tensor rejects a unary operator");
    ins.op0 = TERN_ALU_RSQRT;
    ST_EXPECT_FAIL(v2, &ins, "rsqrt", "unary");
    TEST_BEGIN("tensor_tensor rejects a start partition against the rule");
    ins = tt(VE, TERN_ALU_ADD, st_ap1(SB, F32, 0, 48, 0, N), st_ap1(SB, F32, 16, 48, 256, N),
             st_ap1(SB, F32, 0, 48, 512, N));
    ST_EXPECT_FAIL(v2, &ins, "operand in0", "start partition 16", "48 partitions");
    TEST_BEGIN("tensor_tensor allows start partition 64 for 64 partitions");
    ins = tt(VE, TERN_ALU_ADD, st_ap1(SB, F32, 64, 64, 0, N), st_ap1(SB, F32, 64, 64, 256, N),
             st_ap1(SB, F32, 0, 64, 512, N));
    ST_EXPECT_OK(v2, &ins);
    TEST_BEGIN("tensor_tensor on GpSimd rejects a PSUM operand");
    ins = tt(GP, TERN_ALU_ADD, st_ap1(SB, F32, 0, P, 0, N), st_ap1(SB, F32, 0, P, 256, N), st_ap1(PS, F32, 0, P, 0, N));
    ST_EXPECT_FAIL(v2, &ins, "operand in1", "psum", "allowed: SBUF");
    TEST_BEGIN("tensor_tensor cannot issue on ScalarE");
    ins.engine = SE;
    ST_EXPECT_FAIL(v2, &ins, "scalar engine");
}

static tern_instr ts(tern_engine e, tern_alu_op op0, float s0, tern_alu_op op1, float s1, tern_ap d, tern_ap a)
{
    tern_instr ins = st_instr(TERN_OP_TENSOR_SCALAR, e);
    ins.op0 = (uint8_t)op0;
    ins.op1 = (uint8_t)op1;
    ins.imm0.f = s0;
    ins.imm1.f = s1;
    ins.ap[TERN_AP_DST] = d;
    ins.ap[TERN_AP_IN0] = a;
    return ins;
}

static void test_tensor_scalar(void)
{
    enum { P = 4, N = 8 };
    float a[P * N], d[P * N], col[P] = {1.5f, -2.0f, 0.25f, 3.0f}, col2[P] = {10, 20, 30, 40};
    fill(a, P * N, 11);
    st_write(v2, SB, 0, P, 0, F32, a, N);
    st_write(v2, SB, 0, P, 1024, F32, col, 1);
    st_write(v2, SB, 0, P, 1100, F32, col2, 1);
    TEST_BEGIN("tensor_scalar (A mult 2.5) add 1 with immediates");
    tern_instr ins = ts(VE, TERN_ALU_MULT, 2.5f, TERN_ALU_ADD, 1.0f, st_ap1(SB, F32, 0, P, 256, N),
                        st_ap1(SB, F32, 0, P, 0, N));
    ST_EXPECT_OK(v2, &ins);
    st_read(v2, SB, 0, P, 256, F32, d, N);
    int bad = 0;
    for (int i = 0; i < P * N; i++)
        bad += d[i] != (float)((double)(float)((double)a[i] * 2.5) + 1.0);
    CHECK_EQ_INT(bad, 0);

    TEST_BEGIN("tensor_scalar reverse0: s0 - A; reverse1: s1 / t");
    ins = ts(VE, TERN_ALU_SUBTRACT, 1.0f, TERN_ALU_DIVIDE, 3.0f, st_ap1(SB, F32, 0, P, 256, N),
             st_ap1(SB, F32, 0, P, 0, N));
    ins.flags = TERN_FLAG_REV0 | TERN_FLAG_REV1;
    ST_EXPECT_OK(v2, &ins);
    st_read(v2, SB, 0, P, 256, F32, d, N);
    bad = 0;
    for (int i = 0; i < P * N; i++)
        bad += d[i] != (float)(3.0 / (double)(float)(1.0 - (double)a[i]));
    CHECK_EQ_INT(bad, 0);

    TEST_BEGIN("tensor_scalar per-partition [P,1] operands for s0 and s1");
    ins = ts(VE, TERN_ALU_MULT, 0, TERN_ALU_ADD, 0, st_ap1(SB, F32, 0, P, 256, N), st_ap1(SB, F32, 0, P, 0, N));
    ins.flags = TERN_FLAG_S0_AP | TERN_FLAG_S1_AP;
    ins.ap[TERN_AP_IN1] = st_ap1(SB, F32, 0, P, 1024, 1);
    ins.ap[TERN_AP_IN2] = st_ap1(SB, F32, 0, P, 1100, 1);
    ST_EXPECT_OK(v2, &ins);
    st_read(v2, SB, 0, P, 256, F32, d, N);
    bad = 0;
    for (int p = 0; p < P; p++)
        for (int i = 0; i < N; i++)
            bad += d[p * N + i] != (float)((double)(float)((double)a[p * N + i] * col[p]) + col2[p]);
    CHECK_EQ_INT(bad, 0);

    TEST_BEGIN("tensor_scalar rejects a [P,1] operand of the wrong shape");
    ins.ap[TERN_AP_IN1] = st_ap1(SB, F32, 0, P, 1024, 2);
    ST_EXPECT_FAIL(v2, &ins, "operand in1", "[4, 1]", "[4, 2]");
    TEST_BEGIN("tensor_scalar rejects a non-fp32 scalar operand");
    ins.ap[TERN_AP_IN1] = st_ap1(SB, TERN_DTYPE_BF16, 0, P, 1024, 1);
    ST_EXPECT_FAIL(v2, &ins, "operand in1", "bf16", "fp32");
    TEST_BEGIN("tensor_scalar rejects an operand set without its flag");
    ins.ap[TERN_AP_IN1] = st_ap1(SB, F32, 0, P, 1024, 1);
    ins.flags = TERN_FLAG_S0_AP;
    ST_EXPECT_FAIL(v2, &ins, "operand in2", "unused");

    TEST_BEGIN("tensor_scalar bitvec: (A and 0xF0) shift_right 4 on uint16");
    uint32_t u[4] = {0x12F3, 0xFFFF, 0x0040, 0x00A5}, uo[4];
    st_write_bits(v2, SB, 0, 1, 2048, TERN_DTYPE_UINT16, u, 4);
    ins = ts(VE, TERN_ALU_BITWISE_AND, 0, TERN_ALU_SHIFT_RIGHT, 0, st_ap1(SB, TERN_DTYPE_UINT16, 0, 1, 2100, 4),
             st_ap1(SB, TERN_DTYPE_UINT16, 0, 1, 2048, 4));
    ins.imm0.i = 0xF0;
    ins.imm1.i = 4;
    ST_EXPECT_OK(v2, &ins);
    st_read_bits(v2, SB, 0, 1, 2100, TERN_DTYPE_UINT16, uo, 4);
    CHECK(uo[0] == 0xF && uo[1] == 0xF && uo[2] == 0x4 && uo[3] == 0xA);
    TEST_BEGIN("tensor_scalar rejects mixed bitvec and arithmetic operators");
    ins.op1 = TERN_ALU_ADD;
    ST_EXPECT_FAIL(v2, &ins, "bitwise_and", "add", "mix");
    TEST_BEGIN("tensor_scalar rejects bitvec off VectorE");
    ins.op1 = TERN_ALU_BYPASS;
    ins.engine = GP;
    ST_EXPECT_FAIL(v2, &ins, "bitvec", "gpsimd");
    TEST_BEGIN("tensor_scalar rejects bitvec on a float tensor");
    ins.engine = VE;
    ins.ap[TERN_AP_IN0].dtype = TERN_DTYPE_FP16;
    ST_EXPECT_FAIL(v2, &ins, "operand in0", "fp16", "integer");

    TEST_BEGIN("tensor_scalar on ScalarE v3: (mult, add) runs");
    st_write(v3, SB, 0, P, 0, F32, a, N);
    ins = ts(SE, TERN_ALU_MULT, -1.5f, TERN_ALU_ADD, 0.5f, st_ap1(SB, TERN_DTYPE_BF16, 0, P, 256, N),
             st_ap1(SB, F32, 0, P, 0, N));
    ST_EXPECT_OK(v3, &ins);
    st_read(v3, SB, 0, P, 256, TERN_DTYPE_BF16, d, N);
    bad = 0;
    for (int i = 0; i < P * N; i++)
        bad += d[i] != (float)ref_bf16((double)(float)((double)(float)((double)a[i] * -1.5) + 0.5));
    CHECK_EQ_INT(bad, 0);
    TEST_BEGIN("tensor_scalar on ScalarE v3 rejects (subtract, bypass)");
    ins.op0 = TERN_ALU_SUBTRACT;
    ins.op1 = TERN_ALU_BYPASS;
    ST_EXPECT_FAIL(v3, &ins, "NeuronCore-v3", "(mult, add)", "subtract");
    TEST_BEGIN("tensor_scalar on ScalarE v4 allows (subtract, bypass)");
    st_write(v4, SB, 0, P, 0, F32, a, N);
    ST_EXPECT_OK(v4, &ins);

    TEST_BEGIN("tensor_scalar rsqrt on GpSimd within 1 ulp of 1/sqrt");
    float r[4] = {4.0f, 2.0f, 0.3f, 1e-10f}, ro[4];
    st_write(v2, SB, 0, 1, 3000, F32, r, 4);
    ins = ts(GP, TERN_ALU_RSQRT, 0, TERN_ALU_BYPASS, 0, st_ap1(SB, F32, 0, 1, 3100, 4), st_ap1(SB, F32, 0, 1, 3000, 4));
    ST_EXPECT_OK(v2, &ins);
    st_read(v2, SB, 0, 1, 3100, F32, ro, 4);
    for (int i = 0; i < 4; i++)
        CHECK_MSG(st_ulps(ro[i], (float)(1.0 / sqrt((double)r[i]))) <= 1, "rsqrt(%g) = %.9g", r[i], ro[i]);
    TEST_BEGIN("tensor_scalar on GpSimd rejects ops other than rsqrt");
    ins.op0 = TERN_ALU_ADD;
    ST_EXPECT_FAIL(v2, &ins, "GpSimd", "rsqrt", "add");
}

static void test_stt(void)
{
    enum { P = 2, N = 6 };
    float a[P * N], b[P * N], d[P * N], col[P] = {0.5f, -3.0f};
    fill(a, P * N, 21);
    fill(b, P * N, 5);
    st_write(v2, SB, 0, P, 0, F32, a, N);
    st_write(v2, PS, 0, P, 0, F32, b, N);
    st_write(v2, SB, 0, P, 512, F32, col, 1);
    TEST_BEGIN("scalar_tensor_tensor (A subtract s0) mult B, B in PSUM");
    tern_instr ins = st_instr(TERN_OP_SCALAR_TENSOR_TENSOR, VE);
    ins.op0 = TERN_ALU_SUBTRACT;
    ins.op1 = TERN_ALU_MULT;
    ins.imm0.f = 0.75f;
    ins.ap[TERN_AP_DST] = st_ap1(SB, F32, 0, P, 256, N);
    ins.ap[TERN_AP_IN0] = st_ap1(SB, F32, 0, P, 0, N);
    ins.ap[TERN_AP_IN1] = st_ap1(PS, F32, 0, P, 0, N);
    ST_EXPECT_OK(v2, &ins);
    st_read(v2, SB, 0, P, 256, F32, d, N);
    int bad = 0;
    for (int i = 0; i < P * N; i++)
        bad += d[i] != (float)((double)(float)((double)a[i] - 0.75) * b[i]);
    CHECK_EQ_INT(bad, 0);
    TEST_BEGIN("scalar_tensor_tensor with a [P,1] s0 and reverse1 (B subtract t)");
    ins.op1 = TERN_ALU_SUBTRACT;
    ins.flags = TERN_FLAG_S0_AP | TERN_FLAG_REV1;
    ins.ap[TERN_AP_IN2] = st_ap1(SB, F32, 0, P, 512, 1);
    ST_EXPECT_OK(v2, &ins);
    st_read(v2, SB, 0, P, 256, F32, d, N);
    bad = 0;
    for (int p = 0; p < P; p++)
        for (int i = 0; i < N; i++)
            bad += d[p * N + i] != (float)((double)b[p * N + i] - (double)(float)((double)a[p * N + i] - col[p]));
    CHECK_EQ_INT(bad, 0);
    TEST_BEGIN("scalar_tensor_tensor rejects bitvec operators");
    ins.op0 = TERN_ALU_BITWISE_AND;
    ST_EXPECT_FAIL(v2, &ins, "arithmetic", "bitwise_and");
    TEST_BEGIN("scalar_tensor_tensor rejects in0 and in1 both in PSUM");
    ins.op0 = TERN_ALU_ADD;
    ins.ap[TERN_AP_IN0] = st_ap1(PS, F32, 0, P, 512, N);
    ST_EXPECT_FAIL(v2, &ins, "operand in1", "PSUM");
}

/* Adversarial fp32 bit patterns: signed zeros, infinities, NaNs with different signs and payloads, subnormals,
 * the extremes of the normal range, values whose products and quotients overflow or underflow, then pseudo-random
 * finite values of every exponent. */
static uint32_t adv_bits(uint32_t i)
{
    static const uint32_t special[] = {0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00000u,
                                       0x7fc01234u, 0xffe00001u, 0x7f800001u, 0xff812345u, 0x00000001u, 0x80000001u, 0x007fffffu, 0x807fffffu,
                                       0x00800000u, 0x80800000u, 0x7f7fffffu, 0xff7fffffu, 0x3f800000u, 0xbf800000u,
                                       0x5f000000u, 0x1f000000u, 0x3f800001u, 0x4b000000u, 0x34000000u, 0xc0400000u};
    const uint32_t ns = (uint32_t)(sizeof special / sizeof special[0]);
    if (i < ns)
        return special[i];
    uint32_t x = i * 2654435761u;
    x ^= x >> 15;
    x *= 2246822519u;
    x ^= x >> 13;
    return x;
}

static float bits_f(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint32_t f_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* tensor_scalar and scalar_tensor_tensor on fp32 rows compute in the destination rows (in place, or into rows
 * apart from the inputs) and otherwise through dense gathers; each layout must give, bit for bit, alu_apply_f32
 * element by element, for every arithmetic operator pair, both reverse flags and adversarial values. */
/* Large fp32 tiles computed in the destination rows are split over the host threads by partition: with 4
 * threads the bits are the operators' (checked against the same fp32 operations here) for tensor_tensor in place
 * and into other rows, tensor_scalar with [P,1] scalars, and scalar_tensor_tensor. */
static void test_rows_threads(void)
{
    enum { P = 128, N = 1024 }; /* 128K elements: above the size that splits */
    tern_core_config cfg;
    tern_core_options o;
    tern_error err;
    tern_core *c = NULL;
    memset(&o, 0, sizeof o);
    o.threads = 4;
    if (tern_core_config_load("trn1.2xlarge", &cfg, &err) || tern_core_create(&cfg, &o, &c, &err)) {
        CHECK_MSG(0, "core: %s", err.msg);
        return;
    }
    float *a = malloc(sizeof(float) * P * N), *b = malloc(sizeof(float) * P * N), *d = malloc(sizeof(float) * P * N);
    float col[P], col2[P];
    fill(a, (size_t)P * N, 31);
    fill(b, (size_t)P * N, 32);
    fill(col, P, 33);
    fill(col2, P, 34);
    const uint64_t A = 0, B = 4 * N, D = 8 * N, S0 = 12 * N, S1 = S0 + 64;
    st_write(c, SB, 0, P, A, F32, a, N);
    st_write(c, SB, 0, P, B, F32, b, N);
    st_write(c, SB, 0, P, S0, F32, col, 1);
    st_write(c, SB, 0, P, S1, F32, col2, 1);
    int bad = 0;

    TEST_BEGIN("threads: tensor_tensor into other rows, then in place");
    tern_instr ins = st_instr(TERN_OP_TENSOR_TENSOR, VE);
    ins.op0 = TERN_ALU_MULT;
    ins.ap[TERN_AP_DST] = st_ap1(SB, F32, 0, P, D, N);
    ins.ap[TERN_AP_IN0] = st_ap1(SB, F32, 0, P, A, N);
    ins.ap[TERN_AP_IN1] = st_ap1(SB, F32, 0, P, B, N);
    CHECK_MSG(st_run(c, &ins, &err) == TERN_OK, "%s", err.msg);
    st_read(c, SB, 0, P, D, F32, d, N);
    for (int i = 0; i < P * N; i++)
        bad += d[i] != a[i] * b[i];
    ins.op0 = TERN_ALU_SUBTRACT;
    ins.ap[TERN_AP_IN0] = st_ap1(SB, F32, 0, P, D, N); /* D = D - B */
    CHECK_MSG(st_run(c, &ins, &err) == TERN_OK, "%s", err.msg);
    st_read(c, SB, 0, P, D, F32, d, N);
    for (int i = 0; i < P * N; i++)
        bad += d[i] != a[i] * b[i] - b[i];
    CHECK_EQ_INT(bad, 0);

    TEST_BEGIN("threads: tensor_scalar with [P,1] scalars");
    ins = st_instr(TERN_OP_TENSOR_SCALAR, VE);
    ins.op0 = TERN_ALU_MULT;
    ins.op1 = TERN_ALU_ADD;
    ins.flags = TERN_FLAG_S0_AP | TERN_FLAG_S1_AP;
    ins.ap[TERN_AP_DST] = st_ap1(SB, F32, 0, P, D, N);
    ins.ap[TERN_AP_IN0] = st_ap1(SB, F32, 0, P, A, N);
    ins.ap[TERN_AP_IN1] = st_ap1(SB, F32, 0, P, S0, 1);
    ins.ap[TERN_AP_IN2] = st_ap1(SB, F32, 0, P, S1, 1);
    CHECK_MSG(st_run(c, &ins, &err) == TERN_OK, "%s", err.msg);
    st_read(c, SB, 0, P, D, F32, d, N);
    bad = 0;
    for (int p = 0; p < P; p++)
        for (int i = 0; i < N; i++)
            bad += d[p * N + i] != a[p * N + i] * col[p] + col2[p];
    CHECK_EQ_INT(bad, 0);

    TEST_BEGIN("threads: scalar_tensor_tensor (A subtract s0) mult B");
    ins = st_instr(TERN_OP_SCALAR_TENSOR_TENSOR, VE);
    ins.op0 = TERN_ALU_SUBTRACT;
    ins.op1 = TERN_ALU_MULT;
    ins.imm0.f = 0.75f;
    ins.ap[TERN_AP_DST] = st_ap1(SB, F32, 0, P, D, N);
    ins.ap[TERN_AP_IN0] = st_ap1(SB, F32, 0, P, A, N);
    ins.ap[TERN_AP_IN1] = st_ap1(SB, F32, 0, P, B, N);
    CHECK_MSG(st_run(c, &ins, &err) == TERN_OK, "%s", err.msg);
    st_read(c, SB, 0, P, D, F32, d, N);
    bad = 0;
    for (int i = 0; i < P * N; i++)
        bad += d[i] != (a[i] - 0.75f) * b[i];
    CHECK_EQ_INT(bad, 0);
    free(a);
    free(b);
    free(d);
    tern_core_free(c);
}

/* max and min on fp32 rows take a vector loop when no operand is a NaN, comparisons always (alu.c); select on
 * 4-byte rows computes in the destination rows (exec_vector.c's select_rows). All must give the scalar definitions'
 * bits: every ordered pair of signed zeros, subnormals, infinities and normals (rows without a NaN), rows holding
 * NaNs of both kinds (max and min element by element), and select's predicates (NaNs, -0, subnormals; int32) in
 * every layout. */
static void test_minmax_select_rows(void)
{
    static const uint32_t vals[] = {0x00000000u, 0x80000000u, 0x00000001u, 0x80000001u, 0x007fffffu, 0x00800000u,
                                    0x3f800000u, 0xbf800000u, 0x7f7fffffu, 0xff7fffffu, 0x7f800000u, 0xff800000u,
                                    0x40c00000u, 0x3f800001u};
    enum { NV = sizeof vals / sizeof vals[0], P = 4, N = NV * NV, A = 0, B = 1024, D = 2048, S = 3072 };
    static const uint32_t nans[] = {0x7fc01234u, 0xffc00001u, 0x7f800001u, 0xff812345u};
    uint32_t a[P * N], b[P * N], got[P * N], col[P];
    for (uint32_t p = 0; p < P; p++) {
        for (uint32_t i = 0; i < N; i++) { /* every ordered pair; rows 2 and 3 hold a NaN too */
            a[p * N + i] = vals[i / NV];
            b[p * N + i] = vals[i % NV];
        }
        col[p] = vals[(5 * p + 3) % NV];
    }
    a[2 * N + 17] = nans[0], b[2 * N + 40] = nans[2]; /* row 2: a quiet NaN in one operand, a signalling in the other */
    a[3 * N + 5] = nans[3], b[3 * N + 5] = nans[1];  /* row 3: both NaN in one element */
    st_write_bits(v2, SB, 0, P, S, F32, col, 1);
    static const tern_alu_op mm[] = {TERN_ALU_MAX,   TERN_ALU_MIN,   TERN_ALU_IS_EQ, TERN_ALU_NOT_EQ,
                                     TERN_ALU_IS_GT, TERN_ALU_IS_GE, TERN_ALU_IS_LT, TERN_ALU_IS_LE};
    int bad_tt = 0, bad_ts = 0;
    for (int o = 0; o < (int)(sizeof mm / sizeof mm[0]); o++)
        for (int layout = 0; layout < 2; layout++) { /* 0: in place, 1: apart */
            uint64_t dst = layout == 0 ? A : D;
            st_write_bits(v2, SB, 0, P, A, F32, a, N);
            st_write_bits(v2, SB, 0, P, B, F32, b, N);
            tern_instr ins = tt(VE, mm[o], st_ap1(SB, F32, 0, P, dst, N), st_ap1(SB, F32, 0, P, A, N),
                                st_ap1(SB, F32, 0, P, B, N));
            ST_EXPECT_OK(v2, &ins);
            st_read_bits(v2, SB, 0, P, dst, F32, got, N);
            for (uint32_t i = 0; i < P * N; i++)
                bad_tt += got[i] != f_bits(alu_apply_f32(mm[o], bits_f(a[i]), bits_f(b[i])));
            for (int rev = 0; rev < 2; rev++)
                for (int sap = 0; sap < 3; sap++) { /* the scalar: an immediate 0, 6 or NaN, or a [P, 1] operand */
                    float imm = sap == 0 ? 0.0f : sap == 1 ? 6.0f : bits_f(nans[rev]);
                    st_write_bits(v2, SB, 0, P, A, F32, a, N);
                    ins = ts(VE, mm[o], imm, TERN_ALU_BYPASS, 0.0f, st_ap1(SB, F32, 0, P, dst, N),
                             st_ap1(SB, F32, 0, P, A, N));
                    ins.flags = (uint16_t)(rev ? TERN_FLAG_REV0 : 0);
                    if (sap == 1) {
                        ins.flags |= TERN_FLAG_S0_AP;
                        ins.ap[TERN_AP_IN1] = st_ap1(SB, F32, 0, P, S, 1);
                    }
                    ST_EXPECT_OK(v2, &ins);
                    st_read_bits(v2, SB, 0, P, dst, F32, got, N);
                    for (uint32_t p = 0; p < P; p++)
                        for (uint32_t i = 0; i < N; i++) {
                            float x = bits_f(a[p * N + i]), v = sap == 1 ? bits_f(col[p]) : imm;
                            float e = rev ? alu_apply_f32(mm[o], v, x) : alu_apply_f32(mm[o], x, v);
                            bad_ts += got[p * N + i] != f_bits(e);
                        }
                }
        }
    TEST_BEGIN("max, min, comparisons on fp32 rows (tensor_tensor) = alu_apply_f32: zeros, subnormals, infinities");
    CHECK_EQ_INT(bad_tt, 0);
    TEST_BEGIN("max, min, comparisons against a scalar (tensor_scalar, both orders, NaN scalar) = alu_apply_f32");
    CHECK_EQ_INT(bad_ts, 0);

    /* select: predicate rows of fp32 specials (NaN payloads true, -0 false, subnormals true) or int32 */
    uint32_t pr[P * N], pi[P * N];
    for (uint32_t i = 0; i < P * N; i++) {
        pr[i] = i % 7 == 0 ? nans[i % 4] : i % 7 == 1 ? 0x80000000u : i % 7 == 2 ? 0u : i % 7 == 3 ? 1u : a[i];
        pi[i] = i % 3 == 0 ? 0u : i % 3 == 1 ? 0x80000000u : i;
    }
    enum { C = 4096, Q = 5120 };
    int bad_sel = 0, cases = 0;
    for (int pint = 0; pint < 2; pint++)
        for (int layout = 0; layout < 5; layout++) { /* apart; D is A, B or C; D one element past C (dense path) */
            const uint32_t *pv = pint ? pi : pr;
            uint64_t qa = Q, qb = B, qc = C;
            uint64_t dst = layout == 0 ? D : layout == 1 ? qa : layout == 2 ? qb : layout == 3 ? qc : qc + 4;
            st_write_bits(v2, SB, 0, P, qa, pint ? TERN_DTYPE_INT32 : F32, pv, N);
            st_write_bits(v2, SB, 0, P, qb, F32, a, N);
            st_write_bits(v2, SB, 0, P, qc, F32, b, N);
            tern_instr ins = st_instr(TERN_OP_SELECT, VE);
            ins.ap[TERN_AP_DST] = st_ap1(SB, F32, 0, P, dst, N);
            ins.ap[TERN_AP_IN0] = st_ap1(SB, pint ? TERN_DTYPE_INT32 : F32, 0, P, qa, N);
            ins.ap[TERN_AP_IN1] = st_ap1(SB, F32, 0, P, qb, N);
            ins.ap[TERN_AP_IN2] = st_ap1(SB, F32, 0, P, qc, N);
            ST_EXPECT_OK(v2, &ins);
            st_read_bits(v2, SB, 0, P, dst, F32, got, N);
            for (uint32_t i = 0; i < P * N; i++) {
                int t = pint ? pv[i] != 0 : (pv[i] & 0x7fffffffu) != 0;
                bad_sel += got[i] != (t ? a[i] : b[i]);
            }
            cases++;
        }
    TEST_BEGIN("select on 4-byte rows: NaN/-0/subnormal and int32 predicates, in place on each input, apart, offset");
    CHECK_EQ_INT(bad_sel, 0);
    CHECK_EQ_INT(cases, 10);
}

/* tensor_scalar dividing by powers of two (attention's 1 / sqrt(64)), which take a product by the exact reciprocal,
 * and by their neighbours, which keep the division, both ways round: alu_apply_f32's quotient bit for bit on
 * adversarial values (subnormal quotients, NaN payloads, infinities, signed zeros). */
static void test_divide_pow2(void)
{
    enum { P = 3, N = 150, A = 0, D = 2048 };
    static const uint32_t divs[] = {0x41000000u, 0x3e000000u, 0xc1000000u, 0x3f800000u, 0xbf800000u, 0x00800000u,
                                    0x80800000u, 0x7e800000u, 0x7f000000u, 0x7e000000u, 0x00400000u, 0x41000001u,
                                    0x40ffffffu, 0x00000000u, 0x7f800000u, 0x7fc00000u};
    uint32_t a[P * N], got[P * N];
    for (uint32_t i = 0; i < P * N; i++)
        a[i] = adv_bits(i);
    int bad = 0, runs = 0;
    for (unsigned k = 0; k < sizeof divs / sizeof divs[0]; k++)
        for (int rev = 0; rev < 2; rev++) {
            st_write_bits(v2, SB, 0, P, A, F32, a, N);
            tern_instr ins = ts(VE, TERN_ALU_DIVIDE, bits_f(divs[k]), TERN_ALU_BYPASS, 0.0f,
                                st_ap1(SB, F32, 0, P, D, N), st_ap1(SB, F32, 0, P, A, N));
            ins.flags = (uint16_t)(rev ? TERN_FLAG_REV0 : 0);
            ST_EXPECT_OK(v2, &ins);
            st_read_bits(v2, SB, 0, P, D, F32, got, N);
            for (uint32_t i = 0; i < P * N; i++) {
                float x = bits_f(a[i]), s = bits_f(divs[k]);
                bad += got[i] != f_bits(rev ? alu_apply_f32(TERN_ALU_DIVIDE, s, x) : alu_apply_f32(TERN_ALU_DIVIDE, x, s));
            }
            runs++;
        }
    TEST_BEGIN("tensor_scalar divide by powers of two (a product by the reciprocal) = the quotient bit for bit");
    CHECK_EQ_INT(bad, 0);
    CHECK_EQ_INT(runs, 32);
}

static void test_row_paths(void)
{
    enum { P = 5, N = 67, A = 0, B = 1024, D = 2048, S = 4096, W = 8192 };
    static const tern_alu_op ops[] = {TERN_ALU_BYPASS,  TERN_ALU_ADD,     TERN_ALU_SUBTRACT, TERN_ALU_MULT,
                                      TERN_ALU_DIVIDE,  TERN_ALU_MAX,     TERN_ALU_MIN,      TERN_ALU_ABS_MAX,
                                      TERN_ALU_POW,     TERN_ALU_IS_GE,   TERN_ALU_MOD,      TERN_ALU_AVERAGE};
    const unsigned nops = (unsigned)(sizeof ops / sizeof ops[0]);
    uint32_t a[P * N], b[P * N], a2[P * 2 * N], col[P], col2[P], got[P * N];
    for (uint32_t i = 0; i < P * N; i++) {
        a[i] = adv_bits(i);
        b[i] = adv_bits(P * N - 1 - i + 7);
        a2[2 * i] = a[i];
        a2[2 * i + 1] = 0x7fc0dead; /* never read: the strided operand skips it */
    }
    for (uint32_t p = 0; p < P; p++)
        col[p] = adv_bits(3 * p + 1), col2[p] = adv_bits(5 * p + 2);
    st_write_bits(v2, SB, 0, P, S, F32, col, 1);
    st_write_bits(v2, SB, 0, P, S + 64, F32, col2, 1);
    int32_t step2 = 2;
    uint32_t numN = N;
    int bad_ts = 0, bad_stt = 0, runs = 0;
    for (unsigned i0 = 0; i0 < nops; i0++)
        for (unsigned i1 = 0; i1 < nops; i1++)
            for (int rev = 0; rev < 4; rev++)
                for (int layout = 0; layout < 3; layout++) { /* 0: in place, 1: apart, 2: strided input (dense) */
                    tern_alu_op op0 = ops[i0], op1 = ops[i1];
                    int r0 = rev & 1, r1 = (rev >> 1) & 1;
                    tern_ap ain = layout == 2 ? st_ap(SB, F32, 0, P, W, 1, &step2, &numN) : st_ap1(SB, F32, 0, P, A, N);
                    tern_ap dst = st_ap1(SB, F32, 0, P, layout == 0 ? A : D, N);
                    /* tensor_scalar, s0 from a [P, 1] operand, s1 an immediate */
                    st_write_bits(v2, SB, 0, P, A, F32, a, N);
                    st_write_bits(v2, SB, 0, P, W, F32, a2, 2 * N);
                    tern_instr ins = ts(VE, op0, 0, op1, bits_f(col2[rev]), dst, ain);
                    ins.flags = (uint16_t)(TERN_FLAG_S0_AP | (r0 ? TERN_FLAG_REV0 : 0) | (r1 ? TERN_FLAG_REV1 : 0));
                    ins.ap[TERN_AP_IN1] = st_ap1(SB, F32, 0, P, S, 1);
                    ST_EXPECT_OK(v2, &ins);
                    st_read_bits(v2, SB, 0, P, layout == 0 ? A : D, F32, got, N);
                    for (uint32_t p = 0; p < P; p++)
                        for (uint32_t i = 0; i < N; i++) {
                            float x = bits_f(a[p * N + i]), v0 = bits_f(col[p]), v1 = bits_f(col2[rev]);
                            float t = r0 ? alu_apply_f32(op0, v0, x) : alu_apply_f32(op0, x, v0);
                            float e = r1 ? alu_apply_f32(op1, v1, t) : alu_apply_f32(op1, t, v1);
                            bad_ts += got[p * N + i] != f_bits(e);
                        }
                    /* scalar_tensor_tensor, B in PSUM; s0 an immediate or a [P, 1] operand */
                    st_write_bits(v2, SB, 0, P, A, F32, a, N);
                    st_write_bits(v2, PS, 0, P, B, F32, b, N);
                    ins = st_instr(TERN_OP_SCALAR_TENSOR_TENSOR, VE);
                    ins.op0 = (uint8_t)op0;
                    ins.op1 = (uint8_t)op1;
                    ins.imm0.f = bits_f(col2[rev]);
                    ins.flags = (uint16_t)((r0 ? TERN_FLAG_REV0 : 0) | (r1 ? TERN_FLAG_REV1 : 0));
                    if (i1 & 1) {
                        ins.flags |= TERN_FLAG_S0_AP;
                        ins.ap[TERN_AP_IN2] = st_ap1(SB, F32, 0, P, S, 1);
                    }
                    ins.ap[TERN_AP_DST] = dst;
                    ins.ap[TERN_AP_IN0] = ain;
                    ins.ap[TERN_AP_IN1] = st_ap1(PS, F32, 0, P, B, N);
                    ST_EXPECT_OK(v2, &ins);
                    st_read_bits(v2, SB, 0, P, layout == 0 ? A : D, F32, got, N);
                    for (uint32_t p = 0; p < P; p++)
                        for (uint32_t i = 0; i < N; i++) {
                            float x = bits_f(a[p * N + i]), y = bits_f(b[p * N + i]);
                            float v0 = (i1 & 1) ? bits_f(col[p]) : bits_f(col2[rev]);
                            float t = r0 ? alu_apply_f32(op0, v0, x) : alu_apply_f32(op0, x, v0);
                            float e = r1 ? alu_apply_f32(op1, y, t) : alu_apply_f32(op1, t, y);
                            bad_stt += got[p * N + i] != f_bits(e);
                        }
                    runs++;
                }
    TEST_BEGIN("tensor_scalar on fp32 rows (in place, apart, dense) = alu_apply_f32 bit for bit");
    CHECK_EQ_INT(bad_ts, 0);
    TEST_BEGIN("scalar_tensor_tensor on fp32 rows (in place, apart, dense) = alu_apply_f32 bit for bit");
    CHECK_EQ_INT(bad_stt, 0);
    CHECK_EQ_INT(runs, (int)(nops * nops * 4 * 3));

    TEST_BEGIN("tensor_tensor on fp32 rows (in place, apart, dense) = alu_apply_f32 bit for bit");
    int bad_tt = 0;
    for (unsigned i0 = 0; i0 < nops; i0++)
        for (int layout = 0; layout < 3; layout++) {
            st_write_bits(v2, SB, 0, P, A, F32, a, N);
            st_write_bits(v2, SB, 0, P, W, F32, a2, 2 * N);
            st_write_bits(v2, SB, 0, P, B, F32, b, N);
            tern_ap ain = layout == 2 ? st_ap(SB, F32, 0, P, W, 1, &step2, &numN) : st_ap1(SB, F32, 0, P, A, N);
            tern_instr ins = tt(ops[i0] == TERN_ALU_POW ? GP : VE, ops[i0], st_ap1(SB, F32, 0, P, layout == 0 ? A : D, N),
                                ain, st_ap1(SB, F32, 0, P, B, N));
            ST_EXPECT_OK(v2, &ins);
            st_read_bits(v2, SB, 0, P, layout == 0 ? A : D, F32, got, N);
            for (uint32_t i = 0; i < P * N; i++)
                bad_tt += got[i] != f_bits(alu_apply_f32(ops[i0], bits_f(a[i]), bits_f(b[i])));
        }
    CHECK_EQ_INT(bad_tt, 0);

    TEST_BEGIN("scalar_tensor_tensor whose destination is its second input (its rows read in place) = alu_apply_f32");
    int bad = 0;
    for (unsigned i0 = 0; i0 < nops; i0++) {
        st_write_bits(v2, SB, 0, P, A, F32, a, N);
        st_write_bits(v2, SB, 0, P, B, F32, b, N);
        tern_instr ins = st_instr(TERN_OP_SCALAR_TENSOR_TENSOR, VE);
        ins.op0 = (uint8_t)ops[i0];
        ins.op1 = (uint8_t)ops[nops - 1 - i0];
        ins.imm0.f = 1.5f;
        ins.ap[TERN_AP_DST] = st_ap1(SB, F32, 0, P, B, N);
        ins.ap[TERN_AP_IN0] = st_ap1(SB, F32, 0, P, A, N);
        ins.ap[TERN_AP_IN1] = st_ap1(SB, F32, 0, P, B, N);
        ST_EXPECT_OK(v2, &ins);
        st_read_bits(v2, SB, 0, P, B, F32, got, N);
        for (uint32_t i = 0; i < P * N; i++) {
            float t = alu_apply_f32(ops[i0], bits_f(a[i]), 1.5f);
            bad += got[i] != f_bits(alu_apply_f32(ops[nops - 1 - i0], t, bits_f(b[i])));
        }
    }
    CHECK_EQ_INT(bad, 0);
}

/* scalar_tensor_tensor whose first input is a window of a tile (a depthwise convolution's tap: rows of a padded
 * input tile at a row step, columns at step 1 or 2) and whose destination and second input are fp32 rows: computed
 * straight from the window when the destination overlaps it nowhere (the destination the second input itself, as
 * the convolution accumulates, or rows apart), else through the dense path. Every layout must give alu_apply_f32
 * element by element, for every pair of add / subtract / mult (the window path's operators) and others (the dense
 * path's), both reverse flags, an immediate or a [P, 1] scalar, and adversarial values. */
static void test_stt_window(void)
{
    enum { P = 20, R = 4, C = 9, WP = 24, TILE = 0, ACC = 1024, D = 2048, S = 4096, NS = 26 };
    static const tern_alu_op ops[] = {TERN_ALU_ADD, TERN_ALU_SUBTRACT, TERN_ALU_MULT, TERN_ALU_DIVIDE, TERN_ALU_MAX};
    const unsigned nops = (unsigned)(sizeof ops / sizeof ops[0]);
    static uint32_t tile[P * WP * (R * 2 + 1)], acc[P * R * C], col[P], got[P * R * C];
    const uint32_t TN = WP * (R * 2 + 1); /* tile elements per partition */
    for (uint32_t i = 0; i < P * TN; i++)
        tile[i] = adv_bits(i + 1000);
    /* window element k and accumulator element k: the first NS * NS hold every ordered pair of the special values
     * (NaNs of different payloads and signs, infinities, zeros, subnormals...), the rest pseudo-random values */
    for (uint32_t k = 0; k < P * R * C; k++) {
        uint32_t p = k / (R * C), r = k % (R * C) / C, c = k % C;
        int special = k < NS * NS;
        uint32_t wv = special ? adv_bits(k % NS) : adv_bits(3000 + k), av = special ? adv_bits(k / NS) : adv_bits(977 + k);
        tile[p * TN + (2 * r + 1) * WP + 1 + c] = wv; /* the step-2 windows read these and random ones */
        acc[k] = av;
    }
    for (uint32_t p = 0; p < P; p++)
        col[p] = adv_bits(p % NS); /* NaN scalars among them */
    st_write_bits(v2, SB, 0, P, S, F32, col, 1);
    int bad = 0, runs = 0;
    for (int layout = 0; layout < 4; layout++) /* 0: dst = in1; 1: dst apart; 2: dst over the window; 3: in1 in PSUM */
        for (int cstep = 1; cstep <= 2; cstep++)
            for (unsigned i0 = 0; i0 < nops; i0++)
                for (unsigned i1 = 0; i1 < nops; i1++)
                    for (int rev = 0; rev < 8; rev++) {
                        tern_alu_op op0 = ops[i0], op1 = ops[i1];
                        int r0 = rev & 1, r1 = (rev >> 1) & 1, sap = (rev >> 2) & 1;
                        /* window: rows 2r + 1 of the tile, columns 1 + c * cstep */
                        int32_t steps[2] = {2 * WP, cstep};
                        uint32_t nums[2] = {R, C};
                        uint64_t woff = TILE + (uint64_t)(WP + 1) * 4;
                        tern_ap win = st_ap(SB, F32, 0, P, woff, 2, steps, nums);
                        uint64_t doff = layout == 0 ? ACC : layout == 1 ? D : TILE + 4 * (WP + 3); /* 2: into the window */
                        tern_mem accm = layout == 3 ? PS : SB;
                        st_write_bits(v2, SB, 0, P, TILE, F32, tile, TN);
                        st_write_bits(v2, accm, 0, P, ACC, F32, acc, R * C);
                        tern_instr ins = st_instr(TERN_OP_SCALAR_TENSOR_TENSOR, VE);
                        ins.op0 = (uint8_t)op0;
                        ins.op1 = (uint8_t)op1;
                        ins.imm0.f = bits_f(adv_bits(3 * (uint32_t)rev + 2));
                        ins.flags = (uint16_t)((r0 ? TERN_FLAG_REV0 : 0) | (r1 ? TERN_FLAG_REV1 : 0));
                        if (sap) {
                            ins.flags |= TERN_FLAG_S0_AP;
                            ins.ap[TERN_AP_IN2] = st_ap1(SB, F32, 0, P, S, 1);
                        }
                        ins.ap[TERN_AP_DST] = st_ap1(layout == 3 ? SB : SB, F32, 0, P, layout == 3 ? D : doff, R * C);
                        ins.ap[TERN_AP_IN0] = win;
                        ins.ap[TERN_AP_IN1] = st_ap1(accm, F32, 0, P, ACC, R * C);
                        ST_EXPECT_OK(v2, &ins);
                        st_read_bits(v2, SB, 0, P, layout == 3 ? D : doff, F32, got, R * C);
                        for (uint32_t p = 0; p < P; p++)
                            for (uint32_t r = 0; r < R; r++)
                                for (uint32_t c = 0; c < C; c++) {
                                    uint32_t i = r * C + c;
                                    float x = bits_f(tile[p * TN + (2 * r + 1) * WP + 1 + c * (uint32_t)cstep]);
                                    float y = bits_f(acc[p * R * C + i]);
                                    float v = sap ? bits_f(col[p]) : ins.imm0.f;
                                    float t = r0 ? alu_apply_f32(op0, v, x) : alu_apply_f32(op0, x, v);
                                    float e = r1 ? alu_apply_f32(op1, y, t) : alu_apply_f32(op1, t, y);
                                    bad += got[p * R * C + i] != f_bits(e);
                                }
                        runs++;
                    }
    TEST_BEGIN("scalar_tensor_tensor of a 2-D window (dst = in1, apart, over the window, in1 in PSUM) = alu_apply_f32");
    CHECK_EQ_INT(bad, 0);
    CHECK_EQ_INT(runs, (int)(4 * 2 * nops * nops * 8));
}

/* A chain of scalar_tensor_tensor taps into one accumulator (exec_stt_chain, what the lane runs for a depthwise
 * convolution's consecutive taps) against the same instructions run one by one as a program on a core of one host
 * thread: every SBUF and PSUM byte the same. Chains of 2 to 32 taps, each tap's window a 2-D pattern of the tile
 * (column step 1 or 2, rows 7 to 40 wide), the depthwise operators and others (both swaps), immediate or [P, 1]
 * scalars (NaNs among them), special values in windows and accumulator; layouts where the fused pass applies
 * (windows and scalars apart from the accumulator, which may be in PSUM) and where it must not (a window or the
 * scalars inside the accumulator: each tap then sees the previous taps' writes). */
static void test_stt_chain(void)
{
    enum { P = 19, R = 3, WP = 96, TILE = 0, ACC = 8192, S = 12288, NS = 26 };
    const uint32_t TN = WP * (2 * R + 2); /* tile elements per partition */
    static uint32_t tile[P * WP * (2 * R + 2)], acc[P * R * 40], col[P * 32], a_sb[P * 4096], b_sb[P * 4096],
        a_ps[P * 2048], b_ps[P * 2048];
    tern_core *seq = st_core_threads("neuroncore-v2", 1), *fus = st_core_threads("neuroncore-v2", 1);
    static const tern_alu_op ops[][2] = {{TERN_ALU_MULT, TERN_ALU_ADD}, {TERN_ALU_ADD, TERN_ALU_MULT},
                                         {TERN_ALU_SUBTRACT, TERN_ALU_SUBTRACT}, {TERN_ALU_MULT, TERN_ALU_MULT}};
    static const unsigned lens[] = {2, 3, 8, 9, 25, 32};
    static const uint32_t widths[] = {7, 16, 17, 40};
    int bad = 0, runs = 0;
    for (unsigned li = 0; li < sizeof lens / sizeof lens[0]; li++)
        for (unsigned wi = 0; wi < sizeof widths / sizeof widths[0]; wi++)
            for (unsigned oi = 0; oi < sizeof ops / sizeof ops[0]; oi++)
                for (int v = 0; v < 12; v++) { /* bits 0-1: layout; bit 2: S0 AP; v >= 8: swaps */
                    unsigned n = lens[li];
                    uint32_t C = widths[wi];
                    int layout = v & 3, sap = (v >> 2) & 1, rev = v >= 8 ? (int)(1 + (li + wi) % 3) : 0;
                    uint32_t seed = li * 1000 + wi * 100 + oi * 10 + (uint32_t)v;
                    for (uint32_t i = 0; i < P * TN; i++)
                        tile[i] = (i + seed) % 3 ? adv_bits(200 + (i * 7 + seed) % 5000) : adv_bits((i + seed) % NS);
                    for (uint32_t k = 0; k < P * R * C; k++)
                        acc[k] = k < NS * NS ? adv_bits(k / NS) : adv_bits(977 + k + seed);
                    for (uint32_t i = 0; i < P * 32; i++)
                        col[i] = (i + seed) % 5 ? adv_bits(100 + i) : adv_bits((i + seed) % NS);
                    /* layout 0: the accumulator in SBUF apart; 1: in PSUM; 2: the last tap's window inside the
                     * accumulator; 3: the scalars inside it (S0 AP) or, with immediates, apart as 0 */
                    tern_mem am = layout == 1 ? PS : SB;
                    uint64_t aoff = layout == 1 ? 0 : ACC;
                    tern_core *cores[2] = {seq, fus};
                    for (int k = 0; k < 2; k++) {
                        st_write_bits(cores[k], SB, 0, P, TILE, F32, tile, TN);
                        st_write_bits(cores[k], am, 0, P, aoff, F32, acc, R * C);
                        st_write_bits(cores[k], SB, 0, P, S, F32, col, 32);
                    }
                    tern_instr ins[32];
                    const tern_instr *ip[32];
                    exec_ctx cx[32];
                    for (unsigned t = 0; t < n; t++) {
                        int cstep = 1 + (int)((t + seed) % 2);
                        uint32_t i = t % 3, j = t / 3 % 3;
                        int32_t steps[2] = {2 * WP, cstep};
                        uint32_t nums[2] = {R, C};
                        tern_ap win = st_ap(SB, F32, 0, P, TILE + (uint64_t)(i * WP + j) * 4, 2, steps, nums);
                        if (layout == 2 && t == n - 1) { /* the last window: the accumulator's first row, R times */
                            int32_t s2[2] = {0, 1};
                            win = st_ap(am, F32, 0, P, aoff, 2, s2, nums);
                        }
                        ins[t] = st_instr(TERN_OP_SCALAR_TENSOR_TENSOR, VE);
                        ins[t].op0 = (uint8_t)ops[oi][0];
                        ins[t].op1 = (uint8_t)ops[oi][1];
                        ins[t].imm0.f = bits_f(adv_bits(300 + t + seed));
                        ins[t].flags = (uint16_t)((rev & 1 ? TERN_FLAG_REV0 : 0) | (rev & 2 ? TERN_FLAG_REV1 : 0));
                        if (sap) {
                            ins[t].flags |= TERN_FLAG_S0_AP;
                            ins[t].ap[TERN_AP_IN2] = layout == 3 ? st_ap1(am, F32, 0, P, aoff + 4 * (t % C), 1)
                                                                 : st_ap1(SB, F32, 0, P, S + 4 * t, 1);
                        }
                        ins[t].ap[TERN_AP_DST] = st_ap1(am, F32, 0, P, aoff, R * C);
                        ins[t].ap[TERN_AP_IN0] = win;
                        ins[t].ap[TERN_AP_IN1] = ins[t].ap[TERN_AP_DST];
                        ip[t] = &ins[t];
                        cx[t] = (exec_ctx){VE, t, t, NULL, NULL};
                        if (t)
                            CHECK(stt_chainable(&ins[t - 1], &ins[t]));
                    }
                    tern_program prog;
                    tern_program_init(&prog);
                    tern_error err;
                    for (unsigned t = 0; t < n; t++)
                        CHECK_EQ_INT(tern_program_append(&prog, &ins[t], &err), TERN_OK);
                    CHECK_EQ_INT(tern_core_run(seq, &prog, NULL, &err), TERN_OK);
                    tern_program_free(&prog);
                    CHECK_EQ_INT(exec_stt_chain(fus, cx, ip, n, &err), TERN_OK);
                    st_read_bits(seq, SB, 0, P, 0, F32, a_sb, 4096);
                    st_read_bits(fus, SB, 0, P, 0, F32, b_sb, 4096);
                    st_read_bits(seq, PS, 0, P, 0, F32, a_ps, 2048);
                    st_read_bits(fus, PS, 0, P, 0, F32, b_ps, 2048);
                    int differ = memcmp(a_sb, b_sb, sizeof a_sb) != 0 || memcmp(a_ps, b_ps, sizeof a_ps) != 0;
                    if (differ && bad < 3)
                        fprintf(stderr, "chain of %u, width %u, ops %u, variant %d: bytes differ\n", n, C, oi, v);
                    bad += differ;
                    runs++;
                }
    tern_core_free(seq);
    tern_core_free(fus);
    TEST_BEGIN("chains of scalar_tensor_tensor taps run as one = the same instructions one by one");
    CHECK_EQ_INT(bad, 0);
    CHECK_EQ_INT(runs, 6 * 4 * 4 * 12);
}

static tern_instr tred(tern_alu_op op, int axes, tern_ap d, tern_ap a)
{
    tern_instr ins = st_instr(TERN_OP_TENSOR_REDUCE, VE);
    ins.op0 = (uint8_t)op;
    ins.imm_i0 = axes;
    ins.ap[TERN_AP_DST] = d;
    ins.ap[TERN_AP_IN0] = a;
    return ins;
}

/* tensor_reduce max / min / add over fp32 rows on chip (read in place; max and min out of order): bit for bit the
 * chain acc = x0, acc = alu_apply_f32(op, acc, xk), on rows of signed zeros only (the last zero's sign decides),
 * ties of equal values, NaN rows (the chain itself), rows of 1 to 70 elements (the lane-wise part and its tail), one
 * group per partition and several (an outer dimension), with and without negate. */
static void test_reduce_rows(void)
{
    enum { P = 7, NMAX = 70, IN = 0, OUT = 2048 };
    static const tern_alu_op ops[] = {TERN_ALU_MAX, TERN_ALU_MIN, TERN_ALU_ADD};
    uint32_t x[P * NMAX], got[P * NMAX];
    int bad = 0, runs = 0;
    for (uint32_t n = 1; n <= NMAX; n += n < 40 ? 1 : 9)
        for (int kind = 0; kind < 4; kind++) /* 0: adversarial values, 1: zeros of both signs, 2: ties, 3: NaNs */
            for (unsigned oi = 0; oi < 3; oi++)
                for (int groups = 1; groups <= 2; groups++) {
                    if (n % (uint32_t)groups)
                        continue;
                    for (uint32_t i = 0; i < P * n; i++) {
                        uint32_t r = adv_bits(i * 7 + n + (uint32_t)kind * 1000);
                        x[i] = kind == 0 ? r
                             : kind == 1 ? ((r >> 3) & 1 ? 0x80000000u : 0u)
                             : kind == 2 ? ((r >> 5) & 1 ? 0x40400000u : (r & 0x80000000u) | 0x3f800000u)
                                         : ((r >> 4) % 5 == 0 ? 0x7fc00000u | (r & 0xff) : r & 0x7f7fffffu);
                    }
                    st_write_bits(v2, SB, 0, P, IN, F32, x, n);
                    uint32_t inner = n / (uint32_t)groups;
                    int32_t steps[2] = {(int32_t)inner, 1};
                    uint32_t nums[2] = {(uint32_t)groups, inner};
                    tern_instr ins = tred(ops[oi], 1, st_ap1(SB, F32, 0, P, OUT, (uint32_t)groups),
                                          groups == 1 ? st_ap1(SB, F32, 0, P, IN, n) : st_ap(SB, F32, 0, P, IN, 2, steps, nums));
                    ins.flags = (uint16_t)(kind & 1 ? TERN_FLAG_NEGATE : 0);
                    ST_EXPECT_OK(v2, &ins);
                    st_read_bits(v2, SB, 0, P, OUT, F32, got, (uint32_t)groups);
                    for (uint32_t p = 0; p < P; p++)
                        for (uint32_t g = 0; g < (uint32_t)groups; g++) {
                            const uint32_t *row = x + p * n + g * inner;
                            float acc = bits_f(row[0]);
                            for (uint32_t k = 1; k < inner; k++)
                                acc = alu_apply_f32(ops[oi], acc, bits_f(row[k]));
                            if (kind & 1)
                                acc = -acc;
                            bad += got[p * (uint32_t)groups + g] != f_bits(acc);
                        }
                    runs++;
                }
    TEST_BEGIN("tensor_reduce max / min / add over fp32 rows = the alu_apply_f32 chain bit for bit");
    CHECK_EQ_INT(bad, 0);
    CHECK(runs > 700);
}

/* tensor_copy casting fp32 rows on chip: converted straight from the rows when the destination lies apart from them,
 * through a dense copy otherwise (a strided source, a destination over the source); both must give the same
 * bits, to nearest and stochastically (the draws are keyed by each element's dense index), for every narrow
 * dtype, on adversarial values. */
static void test_cast_rows(void)
{
    enum { P = 9, N = 37, SRC = 0, STRIDED = 1024, D1 = 2048, D2 = 3072 };
    static const tern_dtype dts[] = {TERN_DTYPE_BF16, TERN_DTYPE_FP16, TERN_DTYPE_FP8_E4M3, TERN_DTYPE_FP8_E5M2,
                                     TERN_DTYPE_INT8, TERN_DTYPE_INT32, TERN_DTYPE_TF32};
    uint32_t x[P * N], x2[P * 2 * N], a[P * N], b[P * N];
    for (uint32_t i = 0; i < P * N; i++) {
        x[i] = i % 3 ? adv_bits(i) : 0x3f800000u + (i * 2654435761u >> 12); /* near 1: the roundings differ */
        x2[2 * i] = x[i];
        x2[2 * i + 1] = 0x7fc0beefu; /* never read */
    }
    int bad = 0, runs = 0;
    for (int sr = 0; sr < 2; sr++) {
        tern_core_options o;
        memset(&o, 0, sizeof o);
        o.rounding = sr ? TERN_ROUND_STOCHASTIC : TERN_ROUND_RNE;
        o.seed = 99;
        tern_core_config cfg;
        tern_error err;
        tern_core *c = NULL;
        if (tern_core_config_load("neuroncore-v2", &cfg, &err) || tern_core_create(&cfg, &o, &c, &err)) {
            CHECK_MSG(0, "core: %s", err.msg);
            return;
        }
        for (unsigned t = 0; t < sizeof dts / sizeof dts[0]; t++) {
            st_write_bits(c, SB, 0, P, SRC, F32, x, N);
            st_write_bits(c, SB, 0, P, STRIDED, F32, x2, 2 * N);
            int32_t two = 2;
            uint32_t nn = N;
            /* rows path, then the dense path (strided source) with the same values, same instruction position */
            tern_instr ins = st_instr(TERN_OP_TENSOR_COPY, VE);
            ins.ap[TERN_AP_DST] = st_ap1(SB, dts[t], 0, P, D1, N);
            ins.ap[TERN_AP_IN0] = st_ap1(SB, F32, 0, P, SRC, N);
            ST_EXPECT_OK(c, &ins);
            ins.ap[TERN_AP_DST] = st_ap1(SB, dts[t], 0, P, D2, N);
            ins.ap[TERN_AP_IN0] = st_ap(SB, F32, 0, P, STRIDED, 1, &two, &nn);
            ST_EXPECT_OK(c, &ins);
            st_read_bits(c, SB, 0, P, D1, dts[t], a, N);
            st_read_bits(c, SB, 0, P, D2, dts[t], b, N);
            bad += memcmp(a, b, sizeof a) != 0;
            /* a destination over its own source (the dense path reads everything first) */
            ins.ap[TERN_AP_DST] = st_ap1(SB, dts[t], 0, P, SRC + 4, N);
            ins.ap[TERN_AP_IN0] = st_ap1(SB, F32, 0, P, SRC, N);
            ST_EXPECT_OK(c, &ins);
            st_read_bits(c, SB, 0, P, SRC + 4, dts[t], a, N);
            bad += memcmp(a, b, sizeof a) != 0;
            runs++;
        }
        tern_core_free(c);
    }
    TEST_BEGIN("tensor_copy casts from fp32 rows = the dense path, to nearest and stochastic, every narrow dtype");
    CHECK_EQ_INT(bad, 0);
    CHECK_EQ_INT(runs, 14);
}

static void test_tensor_reduce(void)
{
    enum { P = 3, D1 = 3, D2 = 5 };
    float a[P * D1 * D2], d[P * D1];
    fill(a, P * D1 * D2, 2);
    st_write(v2, SB, 0, P, 0, F32, a, D1 * D2);
    int32_t steps[2] = {D2, 1};
    uint32_t nums[2] = {D1, D2};
    tern_ap a2 = st_ap(SB, F32, 0, P, 0, 2, steps, nums);
    TEST_BEGIN("tensor_reduce add over the innermost dim: [P,3,5] -> [P,3], sequential fp32");
    tern_instr ins = tred(TERN_ALU_ADD, 1, st_ap1(SB, F32, 0, P, 512, D1), a2);
    ST_EXPECT_OK(v2, &ins);
    st_read(v2, SB, 0, P, 512, F32, d, D1);
    int bad = 0;
    for (int g = 0; g < P * D1; g++) {
        float acc = a[g * D2];
        for (int k = 1; k < D2; k++)
            acc = (float)((double)acc + a[g * D2 + k]);
        bad += d[g] != acc;
    }
    CHECK_EQ_INT(bad, 0);
    TEST_BEGIN("tensor_reduce max over both dims with negate");
    ins = tred(TERN_ALU_MAX, 2, st_ap1(SB, F32, 0, P, 512, 1), a2);
    ins.flags = TERN_FLAG_NEGATE;
    ST_EXPECT_OK(v2, &ins);
    st_read(v2, SB, 0, P, 512, F32, d, 1);
    for (int p = 0; p < P; p++) {
        float m = -INFINITY;
        for (int k = 0; k < D1 * D2; k++)
            m = a[p * D1 * D2 + k] > m ? a[p * D1 * D2 + k] : m;
        CHECK_MSG(d[p] == -m, "partition %d: got %g want %g", p, d[p], -m);
    }
    TEST_BEGIN("tensor_reduce subtract folds x0 - x1 - ...");
    float s[4] = {10, 1, 2, 3};
    st_write(v2, SB, 0, 1, 1024, F32, s, 4);
    ins = tred(TERN_ALU_SUBTRACT, 1, st_ap1(SB, F32, 0, 1, 1100, 1), st_ap1(SB, F32, 0, 1, 1024, 4));
    ST_EXPECT_OK(v2, &ins);
    st_read(v2, SB, 0, 1, 1100, F32, d, 1);
    CHECK(d[0] == 4.0f);
    TEST_BEGIN("tensor_reduce bitwise_or on int16");
    uint32_t bits[4] = {0x0001, 0x0100, 0x8000, 0x0010}, bo[1];
    st_write_bits(v2, SB, 0, 1, 1200, TERN_DTYPE_INT16, bits, 4);
    ins = tred(TERN_ALU_BITWISE_OR, 1, st_ap1(SB, TERN_DTYPE_INT16, 0, 1, 1300, 1),
               st_ap1(SB, TERN_DTYPE_INT16, 0, 1, 1200, 4));
    ST_EXPECT_OK(v2, &ins);
    st_read_bits(v2, SB, 0, 1, 1300, TERN_DTYPE_INT16, bo, 1);
    CHECK_EQ_HEX(bo[0], 0x8111u);
    TEST_BEGIN("tensor_reduce rejects negate with a bitvec operator");
    ins.flags = TERN_FLAG_NEGATE;
    ST_EXPECT_FAIL(v2, &ins, "negate", "bitwise_or");
    TEST_BEGIN("tensor_reduce rejects reduce axes 0 and 3 of a 2-D pattern");
    ins = tred(TERN_ALU_ADD, 0, st_ap1(SB, F32, 0, P, 512, 1), a2);
    ST_EXPECT_FAIL(v2, &ins, "operand in0", "imm_i0 = 0", "1..2");
    ins.imm_i0 = 3;
    ST_EXPECT_FAIL(v2, &ins, "imm_i0 = 3");
    TEST_BEGIN("tensor_reduce rejects a destination of the wrong size");
    ins = tred(TERN_ALU_ADD, 1, st_ap1(SB, F32, 0, P, 512, 2), a2);
    ST_EXPECT_FAIL(v2, &ins, "operand dst", "2 elements", "leaves 3");
    TEST_BEGIN("tensor_reduce rejects a non-reduction operator");
    ins = tred(TERN_ALU_DIVIDE, 1, st_ap1(SB, F32, 0, P, 512, 3), a2);
    ST_EXPECT_FAIL(v2, &ins, "divide", "reduction");
}

static tern_instr copy(tern_engine e, tern_ap d, tern_ap a)
{
    tern_instr ins = st_instr(TERN_OP_TENSOR_COPY, e);
    ins.ap[TERN_AP_DST] = d;
    ins.ap[TERN_AP_IN0] = a;
    return ins;
}

static void test_copies(void)
{
    TEST_BEGIN("tensor_copy fp32 -> bf16 rounds to nearest even");
    float f[6] = {1.00390625f, 1.01171875f, 3.14159265f, -65504.3f, 1e-40f, 3.4e38f}, o[6];
    st_write(v2, SB, 0, 1, 0, F32, f, 6);
    tern_instr ins = copy(VE, st_ap1(SB, TERN_DTYPE_BF16, 0, 1, 100, 6), st_ap1(SB, F32, 0, 1, 0, 6));
    ST_EXPECT_OK(v2, &ins);
    st_read(v2, SB, 0, 1, 100, TERN_DTYPE_BF16, o, 6);
    for (int i = 0; i < 6; i++)
        CHECK_MSG(o[i] == (float)ref_bf16(f[i]), "bf16(%g): got %g want %g", f[i], o[i], ref_bf16(f[i]));
    TEST_BEGIN("tensor_copy same dtype is bit-exact (bf16 signalling NaN, -0)");
    uint32_t nb[3] = {0x7F81, 0x8000, 0xFFC1}, nbo[3];
    st_write_bits(v2, SB, 0, 1, 200, TERN_DTYPE_BF16, nb, 3);
    ins = copy(VE, st_ap1(SB, TERN_DTYPE_BF16, 0, 1, 300, 3), st_ap1(SB, TERN_DTYPE_BF16, 0, 1, 200, 3));
    ST_EXPECT_OK(v2, &ins);
    st_read_bits(v2, SB, 0, 1, 300, TERN_DTYPE_BF16, nbo, 3);
    for (int i = 0; i < 3; i++)
        CHECK_EQ_HEX(nbo[i], nb[i]);
    TEST_BEGIN("tensor_copy int32 -> int32 exact beyond 2^24");
    uint32_t iv[2] = {16777217u, 0x80000001u}, ivo[2];
    st_write_bits(v2, SB, 0, 1, 400, TERN_DTYPE_INT32, iv, 2);
    ins = copy(GP, st_ap1(SB, TERN_DTYPE_INT32, 0, 1, 500, 2), st_ap1(SB, TERN_DTYPE_INT32, 0, 1, 400, 2));
    ST_EXPECT_OK(v2, &ins);
    st_read_bits(v2, SB, 0, 1, 500, TERN_DTYPE_INT32, ivo, 2);
    CHECK_EQ_HEX(ivo[0], iv[0]);
    CHECK_EQ_HEX(ivo[1], iv[1]);
    TEST_BEGIN("tensor_copy fp32 -> int8 rounds and saturates; int16 -> uint8 casts through fp32");
    float fi[4] = {300.0f, -2.5f, 3.5f, -1000.0f};
    uint32_t io[4];
    st_write(v2, SB, 0, 1, 600, F32, fi, 4);
    ins = copy(VE, st_ap1(SB, TERN_DTYPE_INT8, 0, 1, 700, 4), st_ap1(SB, F32, 0, 1, 600, 4));
    ST_EXPECT_OK(v2, &ins);
    st_read_bits(v2, SB, 0, 1, 700, TERN_DTYPE_INT8, io, 4);
    CHECK(io[0] == 127 && io[1] == 0xFE && io[2] == 4 && io[3] == 0x80);
    uint32_t neg[1] = {0xFFFF};
    st_write_bits(v2, SB, 0, 1, 800, TERN_DTYPE_INT16, neg, 1);
    ins = copy(VE, st_ap1(SB, TERN_DTYPE_UINT8, 0, 1, 900, 1), st_ap1(SB, TERN_DTYPE_INT16, 0, 1, 800, 1));
    ST_EXPECT_OK(v2, &ins);
    st_read_bits(v2, SB, 0, 1, 900, TERN_DTYPE_UINT8, io, 1);
    CHECK_EQ_INT(io[0], 0); /* -1 saturates to 0 */
    TEST_BEGIN("tensor_copy to a strided 2-D destination leaves the gaps alone");
    float src[6] = {1, 2, 3, 4, 5, 6}, dst[12], sent[12];
    for (int i = 0; i < 12; i++)
        sent[i] = -9.0f;
    st_write(v2, SB, 0, 1, 1000, F32, src, 6);
    st_write(v2, SB, 0, 1, 1100, F32, sent, 12);
    int32_t steps[2] = {4, 2};
    uint32_t nums[2] = {3, 2};
    ins = copy(VE, st_ap(SB, F32, 0, 1, 1100, 2, steps, nums), st_ap1(SB, F32, 0, 1, 1000, 6));
    ST_EXPECT_OK(v2, &ins);
    st_read(v2, SB, 0, 1, 1100, F32, dst, 12);
    float want[12] = {1, -9, 2, -9, 3, -9, 4, -9, 5, -9, 6, -9};
    int bad = 0;
    for (int i = 0; i < 12; i++)
        bad += dst[i] != want[i];
    CHECK_EQ_INT(bad, 0);
    TEST_BEGIN("tensor_copy on ScalarE: rejected on v2, runs on v3");
    ins = copy(SE, st_ap1(SB, F32, 0, 1, 100, 6), st_ap1(SB, F32, 0, 1, 0, 6));
    ST_EXPECT_FAIL(v2, &ins, "Scalar engine", "NeuronCore-v3", "v2");
    st_write(v3, SB, 0, 1, 0, F32, f, 6);
    ST_EXPECT_OK(v3, &ins);
    TEST_BEGIN("tensor_copy on GpSimd rejects PSUM");
    ins = copy(GP, st_ap1(PS, F32, 0, 1, 0, 6), st_ap1(SB, F32, 0, 1, 0, 6));
    ST_EXPECT_FAIL(v2, &ins, "operand dst", "psum", "allowed: SBUF");
    TEST_BEGIN("tensor_copy with a register offset: moves, and rejects out-of-bounds at run time");
    ins = copy(VE, st_ap1(SB, F32, 0, 1, 2000, 2), st_ap1(SB, F32, 0, 1, 0, 2));
    ins.ap[TERN_AP_IN0].offset_reg = 3;
    tern_error e;
    CHECK_EQ_INT(st_run_reg(v2, 3, 2, &ins, &e), TERN_OK); /* elements 2, 3 */
    st_read(v2, SB, 0, 1, 2000, F32, o, 2);
    CHECK(o[0] == f[2] && o[1] == f[3]);
    const tern_core_config *cfg = tern_core_get_config(v2);
    CHECK(st_run_reg(v2, 3, (int32_t)(cfg->sbuf_partition_bytes / 4), &ins, &e) != TERN_OK);
    CHECK_STR_CONTAINS(e.msg, "operand in0");
    CHECK_STR_CONTAINS(e.msg, "outside");

    TEST_BEGIN("tensor_copy_predicated: copies where pred != 0, reverse copies where pred == 0");
    float s4[4] = {1, 2, 3, 4}, d4[4] = {-1, -2, -3, -4}, r4[4];
    uint32_t pr[4] = {0, 1, 255, 0};
    st_write(v2, SB, 0, 1, 3000, F32, s4, 4);
    st_write(v2, SB, 0, 1, 3100, F32, d4, 4);
    st_write_bits(v2, PS, 0, 1, 0, TERN_DTYPE_UINT8, pr, 4);
    ins = st_instr(TERN_OP_TENSOR_COPY_PREDICATED, VE);
    ins.ap[TERN_AP_DST] = st_ap1(SB, F32, 0, 1, 3100, 4);
    ins.ap[TERN_AP_IN0] = st_ap1(SB, F32, 0, 1, 3000, 4);
    ins.ap[TERN_AP_IN1] = st_ap1(PS, TERN_DTYPE_UINT8, 0, 1, 0, 4);
    ST_EXPECT_OK(v2, &ins);
    st_read(v2, SB, 0, 1, 3100, F32, r4, 4);
    CHECK(r4[0] == -1 && r4[1] == 2 && r4[2] == 3 && r4[3] == -4);
    ins.flags = TERN_FLAG_REV0;
    ST_EXPECT_OK(v2, &ins);
    st_read(v2, SB, 0, 1, 3100, F32, r4, 4);
    CHECK(r4[0] == 1 && r4[1] == 2 && r4[2] == 3 && r4[3] == 4);
    TEST_BEGIN("tensor_copy_predicated rejects a signed predicate");
    ins.ap[TERN_AP_IN1].dtype = TERN_DTYPE_INT8;
    ST_EXPECT_FAIL(v2, &ins, "operand in1", "int8", "uint8");
    TEST_BEGIN("tensor_copy_predicated rejects src/dst dtype mismatch");
    ins.ap[TERN_AP_IN1].dtype = TERN_DTYPE_UINT8;
    ins.ap[TERN_AP_IN0].dtype = TERN_DTYPE_BF16;
    ST_EXPECT_FAIL(v2, &ins, "operand in0", "bf16", "fp32");
    TEST_BEGIN("tensor_copy_predicated rejects src and predicate both in PSUM");
    ins.ap[TERN_AP_IN0] = st_ap1(PS, F32, 0, 1, 64, 4);
    ST_EXPECT_FAIL(v2, &ins, "PSUM");

    TEST_BEGIN("select: (A != 0) ? B : C with NaN and -0 predicates");
    float pa[4] = {NAN, -0.0f, 2.0f, 0.0f}, pb[4] = {1, 2, 3, 4}, pc[4] = {5, 6, 7, 8};
    st_write(v2, SB, 0, 1, 4000, F32, pa, 4);
    st_write(v2, SB, 0, 1, 4100, F32, pb, 4);
    st_write(v2, SB, 0, 1, 4200, F32, pc, 4);
    ins = st_instr(TERN_OP_SELECT, VE);
    ins.ap[TERN_AP_DST] = st_ap1(SB, TERN_DTYPE_BF16, 0, 1, 4300, 4);
    ins.ap[TERN_AP_IN0] = st_ap1(SB, F32, 0, 1, 4000, 4);
    ins.ap[TERN_AP_IN1] = st_ap1(SB, F32, 0, 1, 4100, 4);
    ins.ap[TERN_AP_IN2] = st_ap1(SB, F32, 0, 1, 4200, 4);
    ST_EXPECT_OK(v2, &ins);
    st_read(v2, SB, 0, 1, 4300, TERN_DTYPE_BF16, r4, 4);
    CHECK(r4[0] == 1 && r4[1] == 6 && r4[2] == 3 && r4[3] == 8);
    TEST_BEGIN("select rejects a shape mismatch");
    ins.ap[TERN_AP_IN2] = st_ap1(SB, F32, 0, 1, 4200, 3);
    ST_EXPECT_FAIL(v2, &ins, "operand in2", "3 elements", "4");

    TEST_BEGIN("memset: fp32, bf16 rounding of 1/3, int16 exact");
    ins = st_instr(TERN_OP_MEMSET, VE);
    ins.imm0.f = 1.0f / 3.0f;
    ins.ap[TERN_AP_DST] = st_ap1(SB, TERN_DTYPE_BF16, 0, 2, 5000, 3);
    ST_EXPECT_OK(v2, &ins);
    float m[6];
    st_read(v2, SB, 0, 2, 5000, TERN_DTYPE_BF16, m, 3);
    bad = 0;
    for (int i = 0; i < 6; i++)
        bad += m[i] != (float)ref_bf16(1.0f / 3.0f);
    CHECK_EQ_INT(bad, 0);
    ins.ap[TERN_AP_DST] = st_ap1(SB, TERN_DTYPE_INT16, 0, 1, 5100, 2);
    ins.imm0.i = -1234;
    ins.engine = GP;
    ST_EXPECT_OK(v2, &ins);
    uint32_t mi[2];
    st_read_bits(v2, SB, 0, 1, 5100, TERN_DTYPE_INT16, mi, 2);
    CHECK(mi[0] == 0xFB2E && mi[1] == 0xFB2E);
    TEST_BEGIN("memset rejects a value outside the integer dtype");
    ins.ap[TERN_AP_DST].dtype = TERN_DTYPE_INT8;
    ins.imm0.i = 300;
    ST_EXPECT_FAIL(v2, &ins, "operand dst", "300", "int8");
    TEST_BEGIN("memset on GpSimd rejects PSUM");
    ins.imm0.i = 3;
    ins.ap[TERN_AP_DST].mem = PS;
    ST_EXPECT_FAIL(v2, &ins, "operand dst", "psum", "allowed: SBUF");
}

/* An operand read through a window of at most two dimensions per partition (a convolution's tap, a pool's strided
 * view), fp32 or bf16, element steps 1, 2 (the vector rows), 3, -1 and 0 (element by element), row lengths around
 * the 16-lane blocks: activation copy (x * 1 + 0) into dense fp32 rows must give the definition's values element by
 * element, NaN payloads, signalling NaNs (quieted), subnormals and infinities included. */
static void test_window_reads(void)
{
    static const int32_t steps[] = {1, 2, 3, -1, 0};
    static const uint32_t lens[] = {1, 7, 8, 9, 15, 16, 17, 31, 33};
    uint32_t state = 12345;
    uint32_t *src = malloc(sizeof(uint32_t) * 64 * 4096), *got = malloc(sizeof(uint32_t) * 64 * 512);
    for (int bf = 0; bf < 2; bf++) {
        const tern_dtype dt = bf ? TERN_DTYPE_BF16 : F32;
        const unsigned es = bf ? 2 : 4, W = 2048; /* source row of W elements per partition at offset 0 */
        for (unsigned i = 0; i < 64 * W; i++) {
            state = state * 1664525u + 1013904223u;
            uint32_t r = state >> 8;
            static const uint32_t special[] = {0x7FC00001u, 0x7F800001u, 0xFF800000u, 0x80000000u, 0x00000003u,
                                               0xFFA00005u};
            uint32_t u = (r & 15) < 6 ? special[r & 15] : state * 2654435761u;
            src[i] = bf ? (u >> 16) : u;
        }
        st_write_bits(v2, SB, 0, 64, 0, dt, src, W);
        for (unsigned si = 0; si < sizeof steps / sizeof steps[0]; si++)
            for (unsigned li = 0; li < sizeof lens / sizeof lens[0]; li++) {
                const int32_t sc = steps[si];
                const uint32_t nc = lens[li], nr = 3;
                const int32_t sr = 100;
                const uint32_t first = 700; /* element index of (0, 0): room for negative steps */
                char name[128];
                snprintf(name, sizeof name, "window read %s: 3 rows x %u at step %d", tern_dtype_name(dt), nc, sc);
                TEST_BEGIN(name);
                tern_instr ins = st_instr(TERN_OP_ACTIVATION, SE);
                ins.func = TERN_ACT_COPY;
                ins.imm0.f = 1.0f;
                int32_t st2[2] = {sr, sc};
                uint32_t nm2[2] = {nr, nc};
                ins.ap[TERN_AP_IN0] = st_ap(SB, dt, 0, 64, (uint64_t)first * es, 2, st2, nm2);
                ins.ap[TERN_AP_DST] = st_ap1(SB, F32, 0, 64, 65536, nr * nc);
                ST_EXPECT_OK(v2, &ins);
                st_read_bits(v2, SB, 0, 64, 65536, F32, got, nr * nc);
                size_t bad = 0;
                for (uint32_t p = 0; p < 64; p++)
                    for (uint32_t r = 0; r < nr; r++)
                        for (uint32_t c = 0; c < nc; c++) {
                            uint32_t u = src[p * W + (uint32_t)((int32_t)first + (int32_t)r * sr + (int32_t)c * sc)];
                            if (bf)
                                u <<= 16;
                            float x;
                            memcpy(&x, &u, 4);
                            volatile float one = 1.0f, zero = 0.0f;
                            float t = x * one;
                            t = t + zero;
                            uint32_t want;
                            memcpy(&want, &t, 4);
                            bad += got[(size_t)p * nr * nc + r * nc + c] != want;
                        }
                CHECK_MSG(bad == 0, "%zu of %u elements differ from the definition", bad, 64 * nr * nc);
                /* tensor_tensor with fp32 rows as destination and first input and the window second (only the window
                 * gathered) against the same values with the first input laid out with gaps (everything gathered) */
                {
                    tern_instr tt = st_instr(TERN_OP_TENSOR_TENSOR, VE);
                    tt.op0 = (uint8_t)(sc == 2 ? TERN_ALU_MAX : TERN_ALU_SUBTRACT);
                    tt.ap[TERN_AP_IN1] = ins.ap[TERN_AP_IN0];
                    int32_t gs[2] = {(int32_t)nc + 1, 1};
                    uint32_t gn[2] = {nr, nc};
                    uint32_t *rowsv = malloc(sizeof(uint32_t) * 64 * nr * nc), *gapv = calloc((size_t)64 * nr * (nc + 1), 4);
                    for (size_t i = 0; i < (size_t)64 * nr * nc; i++) {
                        state = state * 1664525u + 1013904223u;
                        rowsv[i] = (state & 7) == 0 ? 0x7FC00123u : state;
                    }
                    for (uint32_t p = 0; p < 64; p++)
                        for (uint32_t r = 0; r < nr; r++)
                            memcpy(&gapv[(size_t)p * nr * (nc + 1) + r * (nc + 1)], &rowsv[(size_t)p * nr * nc + r * nc], nc * 4);
                    st_write_bits(v2, SB, 0, 64, 65536, F32, rowsv, nr * nc);
                    st_write_bits(v2, SB, 0, 64, 81920, F32, gapv, nr * (nc + 1));
                    tt.ap[TERN_AP_DST] = st_ap1(SB, F32, 0, 64, 65536, nr * nc);
                    tt.ap[TERN_AP_IN0] = tt.ap[TERN_AP_DST];
                    ST_EXPECT_OK(v2, &tt);
                    uint32_t *r1 = malloc(sizeof(uint32_t) * 64 * nr * nc), *r2 = malloc(sizeof(uint32_t) * 64 * nr * nc);
                    st_read_bits(v2, SB, 0, 64, 65536, F32, r1, nr * nc);
                    tt.ap[TERN_AP_IN0] = st_ap(SB, F32, 0, 64, 81920, 2, gs, gn);
                    tt.ap[TERN_AP_DST] = st_ap1(SB, F32, 0, 64, 98304, nr * nc);
                    ST_EXPECT_OK(v2, &tt);
                    st_read_bits(v2, SB, 0, 64, 98304, F32, r2, nr * nc);
                    size_t diff = 0;
                    for (size_t i = 0; i < (size_t)64 * nr * nc; i++)
                        diff += r1[i] != r2[i];
                    CHECK_MSG(diff == 0, "tensor_tensor: %zu of %u elements differ between the rows and the dense path", diff,
                              64 * nr * nc);
                    free(rowsv);
                    free(gapv);
                    free(r1);
                    free(r2);
                }
                if (!bf)
                    continue;
                /* bf16 to fp32 by tensor_copy: the widening itself, a NaN quieted with its payload kept */
                tern_instr cp = st_instr(TERN_OP_TENSOR_COPY, VE);
                cp.ap[TERN_AP_IN0] = ins.ap[TERN_AP_IN0];
                cp.ap[TERN_AP_DST] = ins.ap[TERN_AP_DST];
                ST_EXPECT_OK(v2, &cp);
                st_read_bits(v2, SB, 0, 64, 65536, F32, got, nr * nc);
                bad = 0;
                for (uint32_t p = 0; p < 64; p++)
                    for (uint32_t r = 0; r < nr; r++)
                        for (uint32_t c = 0; c < nc; c++) {
                            uint32_t u = src[p * W + (uint32_t)((int32_t)first + (int32_t)r * sr + (int32_t)c * sc)] << 16;
                            if ((u & 0x7FFFFFFFu) > 0x7F800000u)
                                u |= 0x400000u;
                            bad += got[(size_t)p * nr * nc + r * nc + c] != u;
                        }
                CHECK_MSG(bad == 0, "tensor_copy: %zu of %u elements differ from the widening", bad, 64 * nr * nc);
            }
    }
    free(src);
    free(got);
}

/* A result written into an on-chip window of two dimensions per partition (a tile's interior inside its padding):
 * fp32 rows through activation copy (x * 1 + 0) into bf16 and fp32 windows at element steps 1, 2 and -1, each element
 * the conversion of its value, the window's gaps untouched; under stochastic rounding each element's draw is the one
 * it gets written as plain rows by the same instruction on a fresh core with the same seed. */
static void test_window_writes(void)
{
    static const int32_t steps[] = {1, 2, -1};
    const uint32_t P = 32, nr = 3, nc = 21, sr = 64, first = 300;
    uint32_t *vals = malloc(sizeof(uint32_t) * P * nr * nc), *got = malloc(sizeof(uint32_t) * P * 512);
    uint32_t state = 99;
    for (size_t i = 0; i < (size_t)P * nr * nc; i++) {
        state = state * 1664525u + 1013904223u;
        vals[i] = (state & 15) == 0 ? 0x7FC00042u : (state & 15) == 1 ? 0x00000005u : 0x3F000000u + (state >> 9);
    }
    for (int bf = 0; bf < 2; bf++)
        for (unsigned si = 0; si < 3; si++) {
            const tern_dtype dt = bf ? TERN_DTYPE_BF16 : F32;
            const int32_t sc = steps[si];
            char name[96];
            snprintf(name, sizeof name, "window write %s: 3 rows x %u at step %d", tern_dtype_name(dt), nc, sc);
            TEST_BEGIN(name);
            st_write_bits(v2, SB, 0, P, 65536, F32, vals, nr * nc);
            for (uint32_t i = 0; i < P * 512; i++)
                got[i] = bf ? 0x1234u : 0x12345678u; /* the gaps' marker */
            st_write_bits(v2, SB, 0, P, 0, dt, got, 512);
            tern_instr ins = st_instr(TERN_OP_ACTIVATION, SE);
            ins.func = TERN_ACT_COPY;
            ins.imm0.f = 1.0f;
            int32_t st2[2] = {(int32_t)sr, sc};
            uint32_t nm2[2] = {nr, nc};
            ins.ap[TERN_AP_IN0] = st_ap1(SB, F32, 0, P, 65536, nr * nc);
            ins.ap[TERN_AP_DST] = st_ap(SB, dt, 0, P, (uint64_t)first * (bf ? 2 : 4), 2, st2, nm2);
            ST_EXPECT_OK(v2, &ins);
            st_read_bits(v2, SB, 0, P, 0, dt, got, 512);
            const tern_convert_opts rne = TERN_CONVERT_OPTS_DEFAULT;
            size_t bad = 0, touched = 0;
            for (uint32_t p = 0; p < P; p++) {
                for (uint32_t r = 0; r < nr; r++)
                    for (uint32_t c = 0; c < nc; c++) {
                        uint32_t u = vals[(size_t)p * nr * nc + r * nc + c];
                        float x;
                        memcpy(&x, &u, 4);
                        volatile float one = 1.0f, zero = 0.0f;
                        float t = x * one;
                        t = t + zero;
                        uint32_t want = tern_num_encode(dt, t, &rne, 0);
                        bad += got[(size_t)p * 512 + (uint32_t)((int32_t)first + (int32_t)r * (int32_t)sr + (int32_t)c * sc)] != want;
                    }
                for (uint32_t i = 0; i < 512; i++)
                    touched += got[(size_t)p * 512 + i] != (bf ? 0x1234u : 0x12345678u);
            }
            CHECK_MSG(bad == 0, "%zu of %u elements differ from their conversion", bad, P * nr * nc);
            CHECK_MSG(touched == (size_t)P * nr * nc, "%zu elements changed, the window has %u", touched, P * nr * nc);
        }
    TEST_BEGIN("window write under stochastic rounding: each element's draw at its dense index");
    uint32_t *rows = malloc(sizeof(uint32_t) * P * nr * nc);
    for (int w = 0; w < 2; w++) {
        tern_core *c = st_core("neuroncore-v2");
        tern_core_set_rounding(c, TERN_ROUND_STOCHASTIC, 7);
        st_write_bits(c, SB, 0, P, 65536, F32, vals, nr * nc);
        tern_instr ins = st_instr(TERN_OP_ACTIVATION, SE);
        ins.func = TERN_ACT_COPY;
        ins.imm0.f = 1.0f;
        int32_t st2[2] = {(int32_t)sr, 2};
        uint32_t nm2[2] = {nr, nc};
        ins.ap[TERN_AP_IN0] = st_ap1(SB, F32, 0, P, 65536, nr * nc);
        ins.ap[TERN_AP_DST] = w ? st_ap(SB, TERN_DTYPE_BF16, 0, P, first * 2, 2, st2, nm2)
                                : st_ap1(SB, TERN_DTYPE_BF16, 0, P, 8192, nr * nc);
        ST_EXPECT_OK(c, &ins);
        if (!w) {
            st_read_bits(c, SB, 0, P, 8192, TERN_DTYPE_BF16, rows, nr * nc);
        } else {
            st_read_bits(c, SB, 0, P, 0, TERN_DTYPE_BF16, got, 512);
            size_t bad = 0;
            for (uint32_t p = 0; p < P; p++)
                for (uint32_t r = 0; r < nr; r++)
                    for (uint32_t k = 0; k < nc; k++)
                        bad += got[(size_t)p * 512 + first + r * sr + 2 * k] != rows[(size_t)p * nr * nc + r * nc + k];
            CHECK_MSG(bad == 0, "%zu of %u elements drew differently from the rows", bad, P * nr * nc);
        }
        tern_core_free(c);
    }
    free(rows);
    free(vals);
    free(got);
}

/* memset over many partitions rounded to nearest: every element has the bits of the value's single conversion
 * (tern_num_encode), on contiguous and 2-D rows, for values that round, overflow, are subnormal or NaN; under
 * stochastic rounding each element is still rounded on its own (both neighbours appear). */
static void test_memset_rows(void)
{
    static const tern_dtype dts[] = {TERN_DTYPE_FP32, TERN_DTYPE_BF16, TERN_DTYPE_FP16, TERN_DTYPE_FP8_E4M3,
                                     TERN_DTYPE_FP8_E5M2};
    const float vals[] = {1.0f / 3.0f, -3.40282347e+38f, 65520.0f, 1e-40f, -0.0f, NAN};
    const tern_convert_opts rne = TERN_CONVERT_OPTS_DEFAULT;
    uint32_t *bits = malloc(sizeof(uint32_t) * 128 * 400);
    for (unsigned t = 0; t < sizeof dts / sizeof dts[0]; t++)
        for (unsigned v = 0; v < sizeof vals / sizeof vals[0]; v++)
            for (int two_d = 0; two_d < 2; two_d++) {
                char name[128];
                snprintf(name, sizeof name, "memset rows: %s of %g, %s", tern_dtype_name(dts[t]), (double)vals[v],
                         two_d ? "[128, 20 x 20]" : "[64, 37]");
                TEST_BEGIN(name);
                tern_instr ins = st_instr(TERN_OP_MEMSET, VE);
                ins.imm0.f = vals[v];
                unsigned np = two_d ? 128 : 64, n = two_d ? 400 : 37;
                int32_t steps[2] = {20, 1};
                uint32_t nums[2] = {20, 20};
                ins.ap[TERN_AP_DST] = two_d ? st_ap(SB, dts[t], 0, np, 8192, 2, steps, nums)
                                            : st_ap1(SB, dts[t], 64, np, 8192, n);
                ST_EXPECT_OK(v2, &ins);
                st_read_bits(v2, SB, two_d ? 0 : 64, np, 8192, dts[t], bits, n);
                uint32_t want = tern_num_encode(dts[t], vals[v], &rne, 0);
                size_t bad = 0;
                for (size_t i = 0; i < (size_t)np * n; i++)
                    bad += bits[i] != want;
                CHECK_MSG(bad == 0, "%zu elements differ from 0x%x", bad, want);
            }
    TEST_BEGIN("memset rows under stochastic rounding: each element rounded on its own");
    tern_core_set_rounding(v2, TERN_ROUND_STOCHASTIC, 7);
    tern_instr ins = st_instr(TERN_OP_MEMSET, VE);
    ins.imm0.f = 1.0f / 3.0f;
    ins.ap[TERN_AP_DST] = st_ap1(SB, TERN_DTYPE_BF16, 0, 128, 8192, 64);
    ST_EXPECT_OK(v2, &ins);
    st_read_bits(v2, SB, 0, 128, 8192, TERN_DTYPE_BF16, bits, 64);
    tern_core_set_rounding(v2, TERN_ROUND_RNE, 0);
    size_t down = 0, up = 0, other = 0;
    for (size_t i = 0; i < 128 * 64; i++) {
        if (bits[i] == 0x3EAA)
            down++;
        else if (bits[i] == 0x3EAB)
            up++;
        else
            other++;
    }
    CHECK_MSG(down > 0 && up > 0 && other == 0, "down %zu, up %zu, other %zu", down, up, other);
    size_t same = 0; /* a partition's 64 draws equal to partition 0's: chance 2^-64 each, unless copied */
    for (size_t p = 1; p < 128; p++)
        same += !memcmp(bits + p * 64, bits, 64 * sizeof *bits);
    CHECK_MSG(same == 0, "%zu partitions repeat partition 0's stochastic roundings", same);
    free(bits);
}

/* bn_stats' definition for one parity of one row: count, mean and sum of squared deviations in double, in element
 * order. */
static void bn_ref(const float *row, uint32_t F, uint32_t par, double *c, double *mean, double *m2)
{
    double n = 0, sm = 0, q = 0;
    for (uint32_t i = par; i < F; i += 2)
        n += 1, sm += row[i];
    double mu = n > 0 ? sm / n : 0.0;
    for (uint32_t i = par; i < F; i += 2) {
        double dv = row[i] - mu;
        q += dv * dv;
    }
    *c = n, *mean = mu, *m2 = q;
}

/* bn_stats bit for bit against its definition (each partition's even and odd chains in double, in element order):
 * 19 partitions (two groups of the vector path's 8 and a rest, not a multiple of the scalar loop's 4), odd and even
 * lengths up to 512, rows in place and strided (the dense path), values of every magnitude with cancellation, and
 * NaNs of two payloads in partition 10 (its group of eight then takes the scalar loop). */
static void test_bn_exact(void)
{
    enum { P = 19, FMAX = 512 };
    static const uint32_t Fs[] = {1, 2, 3, 8, 9, 11, 16, 64, 255, 512};
    static float a[P * FMAX], a2[P * 2 * FMAX], got[P * 6];
    int bad = 0;
    for (unsigned fi = 0; fi < sizeof Fs / sizeof Fs[0]; fi++)
        for (int strided = 0; strided < 2; strided++) {
            uint32_t F = Fs[fi];
            for (uint32_t i = 0; i < P * F; i++) {
                uint32_t r = i * 2654435761u + F;
                float v = (float)((int32_t)(r >> 8) % 20011) * (i % 5 == 0 ? 1e6f : i % 5 == 1 ? 1e-7f : 0.37f);
                uint32_t k = i % F, last_even = (F - 1) & ~1u;
                /* each row's even chain opens with 1e20 and ends with -1e20: what lies between is absorbed, so any
                 * other order shows */
                a[i] = F > 2 && k == 0 ? 1e20f : F > 2 && k == last_even ? -1e20f : v;
                if (i / F == 10 && F > 3 && (k == 1 || k == 3)) { /* two NaNs of different payloads, one chain */
                    uint32_t nb = k == 1 ? 0x7fc01234u : 0xffc00077u;
                    memcpy(&a[i], &nb, 4);
                }
                a2[2 * i] = a[i];
                a2[2 * i + 1] = -7.0f;
            }
            st_write(v2, SB, 0, P, 0, F32, a, F);
            st_write(v2, SB, 0, P, 4096, F32, a2, 2 * F);
            int32_t two = 2;
            tern_instr ins = st_instr(TERN_OP_BN_STATS, VE);
            ins.ap[TERN_AP_DST] = st_ap1(SB, F32, 0, P, 12000, 6);
            ins.ap[TERN_AP_IN0] = strided ? st_ap(SB, F32, 0, P, 4096, 1, &two, &F) : st_ap1(SB, F32, 0, P, 0, F);
            ST_EXPECT_OK(v2, &ins);
            st_read(v2, SB, 0, P, 12000, F32, got, 6);
            for (uint32_t p = 0; p < P; p++)
                for (uint32_t par = 0; par < 2; par++) {
                    double c, mean, m2;
                    bn_ref(a + p * F, F, par, &c, &mean, &m2);
                    bad += f_bits(got[p * 6 + par * 3]) != f_bits((float)c);
                    bad += f_bits(got[p * 6 + par * 3 + 1]) != f_bits((float)mean);
                    bad += f_bits(got[p * 6 + par * 3 + 2]) != f_bits((float)m2);
                }
        }
    TEST_BEGIN("bn_stats = its chains in double bit for bit (19 partitions, lengths 1 to 512, NaNs, rows and strided)");
    CHECK_EQ_INT(bad, 0);
}

static void test_bn(void)
{
    enum { P = 2, F = 11 };
    float a[P * F], st6[P * 6], b2[P * 2];
    fill(a, P * F, 40);
    st_write(v2, SB, 0, P, 0, F32, a, F);
    TEST_BEGIN("bn_stats: (count, mean, count*var) of even then odd elements");
    tern_instr ins = st_instr(TERN_OP_BN_STATS, VE);
    ins.ap[TERN_AP_DST] = st_ap1(SB, F32, 0, P, 1000, 6);
    ins.ap[TERN_AP_IN0] = st_ap1(SB, F32, 0, P, 0, F);
    ST_EXPECT_OK(v2, &ins);
    st_read(v2, SB, 0, P, 1000, F32, st6, 6);
    for (int p = 0; p < P; p++)
        for (int par = 0; par < 2; par++) {
            double c, mean, m2;
            bn_ref(a + p * F, F, (uint32_t)par, &c, &mean, &m2);
            CHECK_EQ_INT(st6[p * 6 + par * 3], (int)c);
            CHECK_MSG(st_ulps(st6[p * 6 + par * 3 + 1], (float)mean) <= 1, "mean got %.9g want %.9g",
                      st6[p * 6 + par * 3 + 1], mean);
            CHECK_MSG(st_ulps(st6[p * 6 + par * 3 + 2], (float)m2) <= 1, "m2 got %.9g want %.9g",
                      st6[p * 6 + par * 3 + 2], m2);
        }
    TEST_BEGIN("bn_aggr of two bn_stats outputs gives the overall mean and population variance");
    ins.ap[TERN_AP_DST] = st_ap1(SB, F32, 0, P, 1024, 6); /* stats of a[0:11] at 1000, of a second tile at 1024 */
    float a2[P * F];
    fill(a2, P * F, 77);
    st_write(v2, SB, 0, P, 2000, F32, a2, F);
    ins.ap[TERN_AP_IN0] = st_ap1(SB, F32, 0, P, 2000, F);
    ST_EXPECT_OK(v2, &ins);
    tern_instr ag = st_instr(TERN_OP_BN_AGGR, VE);
    ag.ap[TERN_AP_DST] = st_ap1(SB, F32, 0, P, 3000, 2);
    ag.ap[TERN_AP_IN0] = st_ap1(SB, F32, 0, P, 1000, 12);
    ST_EXPECT_OK(v2, &ag);
    st_read(v2, SB, 0, P, 3000, F32, b2, 2);
    for (int p = 0; p < P; p++) {
        double s = 0, ss = 0;
        for (int i = 0; i < F; i++)
            s += a[p * F + i] + (double)a2[p * F + i];
        double mean = s / (2 * F);
        for (int i = 0; i < F; i++)
            ss += (a[p * F + i] - mean) * (a[p * F + i] - mean) + (a2[p * F + i] - mean) * (a2[p * F + i] - mean);
        CHECK_MSG(st_ulps(b2[p * 2], (float)mean) <= 4, "mean got %.9g want %.9g", b2[p * 2], mean);
        CHECK_MSG(st_ulps(b2[p * 2 + 1], (float)(ss / (2 * F))) <= 4, "var got %.9g want %.9g", b2[p * 2 + 1],
                  ss / (2 * F));
    }
    TEST_BEGIN("bn_stats rejects F > 512");
    ins.ap[TERN_AP_IN0] = st_ap1(SB, F32, 0, P, 0, 513);
    ST_EXPECT_FAIL(v2, &ins, "operand in0", "513", "512");
    TEST_BEGIN("bn_stats rejects a destination that is not 6 wide");
    ins.ap[TERN_AP_IN0] = st_ap1(SB, F32, 0, P, 0, F);
    ins.ap[TERN_AP_DST] = st_ap1(SB, F32, 0, P, 1024, 5);
    ST_EXPECT_FAIL(v2, &ins, "operand dst", "5 elements", "6");
    TEST_BEGIN("bn_aggr rejects an input that is not a multiple of 3");
    ag.ap[TERN_AP_IN0] = st_ap1(SB, F32, 0, P, 1000, 7);
    ST_EXPECT_FAIL(v2, &ag, "operand in0", "7 elements", "multiple of 3");
    TEST_BEGIN("bn_aggr rejects a destination that is not 2 wide");
    ag.ap[TERN_AP_IN0] = st_ap1(SB, F32, 0, P, 1000, 6);
    ag.ap[TERN_AP_DST] = st_ap1(SB, F32, 0, P, 3000, 3);
    ST_EXPECT_FAIL(v2, &ag, "operand dst", "3 elements", "2");
}

static void test_misc(void)
{
    TEST_BEGIN("reciprocal is IEEE-correctly rounded");
    float x[5] = {3.0f, -7.0f, 0.1f, 0.0f, 1e-39f}, o[8];
    st_write(v2, SB, 0, 1, 0, F32, x, 5);
    tern_instr ins = st_instr(TERN_OP_RECIPROCAL, VE);
    ins.ap[TERN_AP_DST] = st_ap1(SB, F32, 0, 1, 100, 5);
    ins.ap[TERN_AP_IN0] = st_ap1(SB, F32, 0, 1, 0, 5);
    ST_EXPECT_OK(v2, &ins);
    st_read(v2, SB, 0, 1, 100, F32, o, 5);
    for (int i = 0; i < 5; i++)
        CHECK_MSG(st_ulps(o[i], (float)(1.0 / x[i])) == 0, "1/%g: %.9g", x[i], o[i]);

    TEST_BEGIN("transpose_ve [4,6] int16 -> [6,4] bit-exact");
    enum { P = 4, F = 6 };
    uint32_t t[P * F], to[P * F];
    for (int i = 0; i < P * F; i++)
        t[i] = (uint32_t)(0x8000 + i * 0x111);
    st_write_bits(v2, SB, 32, P, 200, TERN_DTYPE_INT16, t, F);
    ins = st_instr(TERN_OP_TRANSPOSE_VE, VE);
    ins.ap[TERN_AP_DST] = st_ap1(PS, TERN_DTYPE_INT16, 0, F, 0, P);
    ins.ap[TERN_AP_IN0] = st_ap1(SB, TERN_DTYPE_INT16, 32, P, 200, F);
    ST_EXPECT_OK(v2, &ins);
    st_read_bits(v2, PS, 0, F, 0, TERN_DTYPE_INT16, to, P);
    int bad = 0;
    for (int p = 0; p < P; p++)
        for (int f = 0; f < F; f++)
            bad += to[f * P + p] != t[p * F + f];
    CHECK_EQ_INT(bad, 0);
    TEST_BEGIN("transpose_ve rejects 33 partitions");
    ins.ap[TERN_AP_IN0] = st_ap1(SB, TERN_DTYPE_INT16, 0, 33, 200, F);
    ins.ap[TERN_AP_DST] = st_ap1(SB, TERN_DTYPE_INT16, 0, F, 3000, 33);
    ST_EXPECT_FAIL(v2, &ins, "operand in0", "[33, 6]", "[32, 32]");
    TEST_BEGIN("transpose_ve rejects a dtype change");
    ins.ap[TERN_AP_IN0] = st_ap1(SB, TERN_DTYPE_INT16, 0, P, 200, F);
    ins.ap[TERN_AP_DST] = st_ap1(SB, F32, 0, F, 3000, P);
    ST_EXPECT_FAIL(v2, &ins, "operand dst", "fp32", "int16");
    TEST_BEGIN("transpose_ve rejects a wrong destination shape");
    ins.ap[TERN_AP_DST] = st_ap1(SB, TERN_DTYPE_INT16, 0, P, 3000, F);
    ST_EXPECT_FAIL(v2, &ins, "operand dst", "[4, 6]", "[6, 4]");

    TEST_BEGIN("transpose_ve row to row (fp32, bf16, fp8: apart, overlapping, strided) = the element moves");
    {
        static const tern_dtype dts[] = {F32, TERN_DTYPE_BF16, TERN_DTYPE_FP8_E4M3};
        static const uint32_t shapes[][2] = {{32, 32}, {32, 7}, {5, 32}, {1, 1}, {17, 29}};
        uint32_t src[32 * 32 * 2], out[32 * 32];
        int bad_t = 0, runs_t = 0;
        for (unsigned di = 0; di < 3; di++)
            for (unsigned si = 0; si < 5; si++)
                for (int layout = 0; layout < 4; layout++) {
                    /* 0: SBUF to PSUM; 1: SBUF rows apart; 2: output rows over the input's (square: in place);
                       3: a strided input */
                    tern_dtype dt = dts[di];
                    uint32_t TP = shapes[si][0], TF = shapes[si][1], mask = tern_dtype_size(dt) == 4 ? 0xffffffffu
                                                                         : tern_dtype_size(dt) == 2 ? 0xffffu : 0xffu;
                    if (layout == 2 && TP != TF)
                        continue;
                    for (uint32_t i = 0; i < 32 * 32 * 2; i++)
                        src[i] = adv_bits(i * 7 + di + si) & mask;
                    int32_t st2 = 2;
                    uint32_t nf = TF;
                    tern_ap in = layout == 3 ? st_ap(SB, dt, 32, TP, 6000, 1, &st2, &nf) : st_ap1(SB, dt, 32, TP, 6000, TF);
                    st_write_bits(v2, SB, 32, TP, 6000, dt, src, layout == 3 ? 2 * TF : TF);
                    tern_mem om = layout == 0 ? PS : SB;
                    uint64_t off = layout == 2 ? 6000 : 9000;
                    unsigned op0 = layout == 2 ? 32 : 0;
                    ins = st_instr(TERN_OP_TRANSPOSE_VE, VE);
                    ins.ap[TERN_AP_IN0] = in;
                    ins.ap[TERN_AP_DST] = st_ap1(om, dt, op0, TF, off, TP);
                    ST_EXPECT_OK(v2, &ins);
                    st_read_bits(v2, om, op0, TF, off, dt, out, TP);
                    for (uint32_t p = 0; p < TP; p++)
                        for (uint32_t f = 0; f < TF; f++)
                            bad_t += out[f * TP + p] != src[p * (layout == 3 ? 2 * TF : TF) + (layout == 3 ? 2 * f : f)];
                    runs_t++;
                }
        CHECK_EQ_INT(bad_t, 0);
        CHECK_EQ_INT(runs_t, 3 * (5 * 4 - 3));
    }

    TEST_BEGIN("max8: the 8 largest, descending, duplicates kept, bf16 output");
    float m[20];
    for (int i = 0; i < 20; i++)
        m[i] = (float)((i * 7) % 13) + 0.1f;
    st_write(v2, SB, 0, 1, 4000, F32, m, 20);
    ins = st_instr(TERN_OP_MAX8, VE);
    ins.ap[TERN_AP_DST] = st_ap1(SB, TERN_DTYPE_BF16, 0, 1, 4200, 8);
    ins.ap[TERN_AP_IN0] = st_ap1(SB, F32, 0, 1, 4000, 20);
    ST_EXPECT_OK(v2, &ins);
    st_read(v2, SB, 0, 1, 4200, TERN_DTYPE_BF16, o, 8);
    float sorted[20];
    memcpy(sorted, m, sizeof m);
    for (int i = 0; i < 20; i++) /* selection sort, descending */
        for (int j = i + 1; j < 20; j++)
            if (sorted[j] > sorted[i]) {
                float tmp = sorted[i];
                sorted[i] = sorted[j];
                sorted[j] = tmp;
            }
    bad = 0;
    for (int i = 0; i < 8; i++)
        bad += o[i] != (float)ref_bf16(sorted[i]);
    CHECK_EQ_INT(bad, 0);
    TEST_BEGIN("max8 rejects fewer than 8 input elements");
    ins.ap[TERN_AP_IN0] = st_ap1(SB, F32, 0, 1, 4000, 7);
    ST_EXPECT_FAIL(v2, &ins, "operand in0", "7 elements", "8..16384");
    TEST_BEGIN("max8 rejects a destination that is not 8 wide");
    ins.ap[TERN_AP_IN0] = st_ap1(SB, F32, 0, 1, 4000, 20);
    ins.ap[TERN_AP_DST] = st_ap1(SB, F32, 0, 1, 4200, 4);
    ST_EXPECT_FAIL(v2, &ins, "operand dst", "4 elements", "exactly 8");

    TEST_BEGIN("tensor_tensor_scan: r = (A[i] mult r) add B[i], fp32 sequential");
    enum { SP = 2, SN = 10 };
    float a[SP * SN], b[SP * SN], d[SP * SN], init[SP] = {0.5f, -1.0f};
    fill(a, SP * SN, 90);
    fill(b, SP * SN, 13);
    st_write(v2, SB, 0, SP, 5000, F32, a, SN);
    st_write(v2, SB, 0, SP, 5100, F32, b, SN);
    st_write(v2, SB, 0, SP, 5200, F32, init, 1);
    ins = st_instr(TERN_OP_TENSOR_TENSOR_SCAN, VE);
    ins.op0 = TERN_ALU_MULT;
    ins.op1 = TERN_ALU_ADD;
    ins.imm0.f = 2.0f;
    ins.ap[TERN_AP_DST] = st_ap1(SB, F32, 0, SP, 5300, SN);
    ins.ap[TERN_AP_IN0] = st_ap1(SB, F32, 0, SP, 5000, SN);
    ins.ap[TERN_AP_IN1] = st_ap1(SB, F32, 0, SP, 5100, SN);
    ST_EXPECT_OK(v2, &ins);
    st_read(v2, SB, 0, SP, 5300, F32, d, SN);
    bad = 0;
    for (int p = 0; p < SP; p++) {
        float r = 2.0f;
        for (int i = 0; i < SN; i++) {
            r = (float)((double)(float)((double)a[p * SN + i] * r) + b[p * SN + i]);
            bad += d[p * SN + i] != r;
        }
    }
    CHECK_EQ_INT(bad, 0);
    TEST_BEGIN("tensor_tensor_scan with a [P,1] initial and reverse0 (r subtract A)");
    ins.op0 = TERN_ALU_SUBTRACT;
    ins.flags = TERN_FLAG_S0_AP | TERN_FLAG_REV0;
    ins.ap[TERN_AP_IN2] = st_ap1(SB, F32, 0, SP, 5200, 1);
    ST_EXPECT_OK(v2, &ins);
    st_read(v2, SB, 0, SP, 5300, F32, d, SN);
    bad = 0;
    for (int p = 0; p < SP; p++) {
        float r = init[p];
        for (int i = 0; i < SN; i++) {
            r = (float)((double)(float)((double)r - a[p * SN + i]) + b[p * SN + i]);
            bad += d[p * SN + i] != r;
        }
    }
    CHECK_EQ_INT(bad, 0);
    TEST_BEGIN("tensor_tensor_scan rejects bitvec operators");
    ins.op1 = TERN_ALU_BITWISE_XOR;
    ST_EXPECT_FAIL(v2, &ins, "arithmetic", "bitwise_xor");
    TEST_BEGIN("tensor_tensor_scan rejects a bf16 initial operand");
    ins.op1 = TERN_ALU_ADD;
    ins.ap[TERN_AP_IN2].dtype = TERN_DTYPE_BF16;
    ST_EXPECT_FAIL(v2, &ins, "operand in2", "bf16", "fp32");
}

int main(void)
{
    v2 = st_core("neuroncore-v2");
    v3 = st_core("neuroncore-v3");
    v4 = st_core("neuroncore-v4");
    test_tensor_tensor();
    test_memset_rows();
    test_window_reads();
    test_window_writes();
    test_tensor_scalar();
    test_stt();
    test_stt_window();
    test_stt_chain();
    test_reduce_rows();
    test_cast_rows();
    test_bn_exact();
    test_row_paths();
    test_divide_pow2();
    test_minmax_select_rows();
    test_rows_threads();
    test_tensor_reduce();
    test_copies();
    test_bn();
    test_misc();
    tern_core_free(v2);
    tern_core_free(v3);
    tern_core_free(v4);
    return check_report();
}
