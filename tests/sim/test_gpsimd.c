/* GpSimdE: iota, affine_select and partition_reduce against references computed here from NKI's pseudo code,
 * destination casts, the SBUF-only rule and each rule's rejection message. */
#include "check.h"
#include "sim/sim_test_util.h"

#define SB TERN_MEM_SBUF
#define PS TERN_MEM_PSUM
#define GP TERN_ENGINE_GPSIMD
#define F32 TERN_DTYPE_FP32

static tern_core *v2;

/* The affine pattern pseudo-operand: mem none, dims {step, num}. */
static tern_ap pattern(unsigned nd, const int32_t *steps, const uint32_t *nums)
{
    return st_ap(TERN_MEM_NONE, TERN_DTYPE_INT32, 0, 0, 0, nd, steps, nums);
}

static tern_instr iota(tern_ap d, tern_ap pat, int32_t offset, int32_t cm)
{
    tern_instr ins = st_instr(TERN_OP_IOTA, GP);
    ins.imm_i0 = offset;
    ins.imm_i1 = cm;
    ins.ap[TERN_AP_DST] = d;
    ins.ap[TERN_AP_IN0] = pat;
    return ins;
}

static void test_iota(void)
{
    enum { P = 4, W = 3, X = 5 };
    int32_t steps[2] = {10, -1};
    uint32_t nums[2] = {W, X};
    uint32_t o[P * W * X];
    TEST_BEGIN("iota int32: offset + p*cm + w*10 - x over a 2-D pattern");
    tern_instr ins = iota(st_ap1(SB, TERN_DTYPE_INT32, 0, P, 0, W * X), pattern(2, steps, nums), 7, 100);
    ST_EXPECT_OK(v2, &ins);
    st_read_bits(v2, SB, 0, P, 0, TERN_DTYPE_INT32, o, W * X);
    int bad = 0;
    for (int p = 0; p < P; p++)
        for (int w = 0; w < W; w++)
            for (int x = 0; x < X; x++)
                bad += (int32_t)o[(p * W + w) * X + x] != 7 + p * 100 + w * 10 - x;
    CHECK_EQ_INT(bad, 0);

    TEST_BEGIN("iota writes in dst's own (strided, 2-D) order");
    int32_t ds[2] = {1, X};
    uint32_t dn[2] = {X, W}; /* dst walks column-major over a [W][X] block */
    ins = iota(st_ap(SB, TERN_DTYPE_INT32, 0, 1, 512, 2, ds, dn), pattern(2, steps, nums), 0, 0);
    ST_EXPECT_OK(v2, &ins);
    st_read_bits(v2, SB, 0, 1, 512, TERN_DTYPE_INT32, o, W * X);
    bad = 0;
    for (int k = 0; k < W * X; k++) { /* the k-th generated value goes to dst's k-th element */
        int i0 = k / W, i1 = k % W;    /* dst index (i0 < X, i1 < W) -> element i0 * 1 + i1 * X */
        int w = k / X, x = k % X;      /* generated value k = w*10 - x */
        bad += (int32_t)o[i0 + i1 * X] != w * 10 - x;
    }
    CHECK_EQ_INT(bad, 0);

    TEST_BEGIN("iota int32 arithmetic wraps modulo 2^32");
    int32_t s1[1] = {1};
    uint32_t n2[1] = {2};
    ins = iota(st_ap1(SB, TERN_DTYPE_INT32, 0, 1, 1024, 2), pattern(1, s1, n2), INT32_MAX, 0);
    ST_EXPECT_OK(v2, &ins);
    st_read_bits(v2, SB, 0, 1, 1024, TERN_DTYPE_INT32, o, 2);
    CHECK_EQ_HEX(o[0], 0x7FFFFFFFu);
    CHECK_EQ_HEX(o[1], 0x80000000u);

    TEST_BEGIN("iota to fp32 and bf16 rounds; to uint8 saturates");
    int32_t big[1] = {1};
    uint32_t nb[1] = {3};
    ins = iota(st_ap1(SB, TERN_DTYPE_BF16, 0, 2, 2048, 3), pattern(1, big, nb), 257, -300);
    ST_EXPECT_OK(v2, &ins);
    float f[6];
    st_read(v2, SB, 0, 2, 2048, TERN_DTYPE_BF16, f, 3);
    CHECK(f[0] == 256.0f && f[1] == 258.0f && f[2] == 260.0f); /* 257, 258, 259 in bf16 (RNE: 259 -> 260) */
    CHECK(f[3] == -43.0f && f[4] == -42.0f && f[5] == -41.0f);
    ins.ap[TERN_AP_DST] = st_ap1(SB, F32, 0, 1, 2048, 3);
    ins.imm_i0 = 16777217;
    ST_EXPECT_OK(v2, &ins);
    st_read(v2, SB, 0, 1, 2048, F32, f, 3);
    CHECK(f[0] == 16777216.0f && f[1] == 16777218.0f);
    ins.ap[TERN_AP_DST] = st_ap1(SB, TERN_DTYPE_UINT8, 0, 2, 2048, 3);
    ins.imm_i0 = 254;
    ins.imm_i1 = -300;
    ST_EXPECT_OK(v2, &ins);
    st_read_bits(v2, SB, 0, 2, 2048, TERN_DTYPE_UINT8, o, 3);
    CHECK(o[0] == 254 && o[1] == 255 && o[2] == 255 && o[3] == 0 && o[5] == 0);

    TEST_BEGIN("iota rejects a pattern that does not cover dst");
    ins = iota(st_ap1(SB, TERN_DTYPE_INT32, 0, P, 0, 14), pattern(2, steps, nums), 0, 1);
    ST_EXPECT_FAIL(v2, &ins, "operand in0", "15 elements", "14");
    TEST_BEGIN("iota without a pattern generates over the flat free index");
    tern_ap none;
    memset(&none, 0, sizeof none);
    none.offset_reg = TERN_REG_NONE;
    ins = iota(st_ap(SB, TERN_DTYPE_INT32, 0, 2, 3000, 2, (const int32_t[]){3, 1}, (const uint32_t[]){2, 3}), none,
               5, 10);
    ST_EXPECT_OK(v2, &ins);
    st_read_bits(v2, SB, 0, 2, 3000, TERN_DTYPE_INT32, o, 6);
    bad = 0;
    for (int p = 0; p < 2; p++)
        for (int i = 0; i < 6; i++)
            bad += (int32_t)o[p * 6 + i] != 5 + 10 * p + i;
    CHECK_EQ_INT(bad, 0);
    TEST_BEGIN("iota rejects a pattern of more than 4 dims");
    ins = iota(st_ap1(SB, TERN_DTYPE_INT32, 0, P, 0, 15), pattern(2, steps, nums), 0, 1);
    ins.ap[TERN_AP_IN0].ndims = 5;
    ST_EXPECT_FAIL(v2, &ins, "operand in0", "1..4 dims", "has 5");
    TEST_BEGIN("iota rejects a PSUM destination (GpSimd is SBUF-only)");
    ins = iota(st_ap1(PS, TERN_DTYPE_INT32, 0, P, 0, 15), pattern(2, steps, nums), 0, 1);
    ST_EXPECT_FAIL(v2, &ins, "operand dst", "psum", "allowed: SBUF");
    TEST_BEGIN("iota rejects the start-partition rule");
    ins = iota(st_ap1(SB, TERN_DTYPE_INT32, 40, 40, 0, 15), pattern(2, steps, nums), 0, 1);
    ST_EXPECT_FAIL(v2, &ins, "operand dst", "start partition 40");
    TEST_BEGIN("iota cannot issue on VectorE");
    ins = iota(st_ap1(SB, TERN_DTYPE_INT32, 0, P, 0, 15), pattern(2, steps, nums), 0, 1);
    ins.engine = TERN_ENGINE_VECTOR;
    ST_EXPECT_FAIL(v2, &ins, "vector engine", "allowed: gpsimd");
}

static tern_instr asel(tern_alu_op cmp, tern_ap d, tern_ap a, tern_ap pat, int32_t offset, int32_t cm, float on_false)
{
    tern_instr ins = st_instr(TERN_OP_AFFINE_SELECT, GP);
    ins.op0 = (uint8_t)cmp;
    ins.imm_i0 = offset;
    ins.imm_i1 = cm;
    ins.imm1.f = on_false;
    ins.ap[TERN_AP_DST] = d;
    ins.ap[TERN_AP_IN0] = a;
    ins.ap[TERN_AP_IN1] = pat;
    return ins;
}

static void test_affine_select(void)
{
    enum { P = 8, N = 8 };
    float a[P * N], d[P * N];
    for (int i = 0; i < P * N; i++)
        a[i] = (float)i + 0.5f;
    st_write(v2, SB, 0, P, 0, F32, a, N);
    int32_t step[1] = {-1};
    uint32_t num[1] = {N};
    TEST_BEGIN("affine_select causal mask: keep where p - i >= 0, else FP32_MIN -> -inf in bf16");
    tern_instr ins = asel(TERN_ALU_IS_GE, st_ap1(SB, TERN_DTYPE_BF16, 0, P, 512, N), st_ap1(SB, F32, 0, P, 0, N),
                          pattern(1, step, num), 0, 1, -3.4028235e38f);
    ST_EXPECT_OK(v2, &ins);
    st_read(v2, SB, 0, P, 512, TERN_DTYPE_BF16, d, N);
    int bad = 0;
    for (int p = 0; p < P; p++)
        for (int i = 0; i < N; i++) {
            float want = p - i >= 0 ? tern_bf16_to_f32(tern_f32_to_bf16(a[p * N + i], NULL, 0)) : -INFINITY;
            bad += d[p * N + i] != want;
        }
    CHECK_EQ_INT(bad, 0);
    TEST_BEGIN("affine_select same dtype keeps selected bits exactly (fp32 NaN payload)");
    uint32_t nanbits = 0x7FA00001u;
    st_write_bits(v2, SB, 3, 1, 0, F32, &nanbits, 1); /* a[3][0] */
    ins = asel(TERN_ALU_IS_EQ, st_ap1(SB, F32, 0, P, 1024, N), st_ap1(SB, F32, 0, P, 0, N), pattern(1, step, num), 0, 1,
               -1.0f);
    ST_EXPECT_OK(v2, &ins);
    uint32_t bits[P * N];
    st_read_bits(v2, SB, 0, P, 1024, F32, bits, N);
    st_read(v2, SB, 0, P, 1024, F32, d, N);
    CHECK_EQ_HEX(bits[3 * N + 0], 0xBF800000u); /* p=3,i=0: 3 != 0 -> on_false */
    bad = 0;
    for (int p = 0; p < P; p++)
        for (int i = 0; i < N; i++)
            bad += d[p * N + i] != (p == i ? a[p * N + i] : -1.0f);
    CHECK_EQ_INT(bad, 0);
    ins.imm_i0 = -3; /* now p=3, i=0 is selected: value 3 - 3 - 0 = 0 */
    ST_EXPECT_OK(v2, &ins);
    st_read_bits(v2, SB, 3, 1, 1024, F32, bits, 1);
    CHECK_EQ_HEX(bits[0], 0x7FA00001u);
    TEST_BEGIN("affine_select rejects a non-comparison operator");
    ins.op0 = TERN_ALU_ADD;
    ST_EXPECT_FAIL(v2, &ins, "op0", "not a comparison");
    TEST_BEGIN("affine_select rejects on_true of another shape");
    ins.op0 = TERN_ALU_IS_LT;
    ins.ap[TERN_AP_IN0] = st_ap1(SB, F32, 0, P / 2, 0, N);
    ST_EXPECT_FAIL(v2, &ins, "operand in0", "[4, 8]", "[8, 8]");
    TEST_BEGIN("affine_select rejects on_true in PSUM");
    ins.ap[TERN_AP_IN0] = st_ap1(PS, F32, 0, P, 0, N);
    ST_EXPECT_FAIL(v2, &ins, "operand in0", "psum");
    TEST_BEGIN("affine_select rejects a pattern of the wrong size");
    ins.ap[TERN_AP_IN0] = st_ap1(SB, F32, 0, P, 0, N);
    num[0] = N + 1;
    ins.ap[TERN_AP_IN1] = pattern(1, step, num);
    ST_EXPECT_FAIL(v2, &ins, "operand in1", "9 elements", "8");
}

static tern_instr pred(tern_alu_op op, tern_ap d, tern_ap a)
{
    tern_instr ins = st_instr(TERN_OP_PARTITION_REDUCE, GP);
    ins.op0 = (uint8_t)op;
    ins.ap[TERN_AP_DST] = d;
    ins.ap[TERN_AP_IN0] = a;
    return ins;
}

static void test_partition_reduce(void)
{
    enum { P = 8, F = 5 };
    float a[P * F], d[F];
    for (int i = 0; i < P * F; i++)
        a[i] = (float)((i * 29) % 17) * 0.7f - 4.0f;
    a[2 * F + 1] = NAN;
    st_write(v2, SB, 0, P, 0, F32, a, F);
    struct { tern_alu_op op; const char *name; } ops[] = {
        {TERN_ALU_ADD, "add"}, {TERN_ALU_MAX, "max"}, {TERN_ALU_MIN, "min"}, {TERN_ALU_AVERAGE, "average"}};
    for (size_t k = 0; k < 4; k++) {
        char name[96];
        snprintf(name, sizeof name, "partition_reduce %s over 8 partitions, fp32 in partition order", ops[k].name);
        TEST_BEGIN(name);
        tern_instr ins = pred(ops[k].op, st_ap1(SB, F32, 32, 1, 512, F), st_ap1(SB, F32, 0, P, 0, F));
        ST_EXPECT_OK(v2, &ins);
        st_read(v2, SB, 32, 1, 512, F32, d, F);
        int bad = 0;
        for (int f = 0; f < F; f++) {
            float r = a[f];
            for (int p = 1; p < P; p++) {
                float e = a[p * F + f];
                switch (ops[k].op) {
                case TERN_ALU_MAX: r = isnan(r) ? e : isnan(e) ? r : (e > r ? e : r); break;
                case TERN_ALU_MIN: r = isnan(r) ? e : isnan(e) ? r : (e < r ? e : r); break;
                default: r = (float)((double)r + e); break;
                }
            }
            if (ops[k].op == TERN_ALU_AVERAGE)
                r = (float)((double)r / P);
            bad += st_ulps(d[f], r) != 0;
        }
        CHECK_EQ_INT(bad, 0);
    }
    TEST_BEGIN("partition_reduce int32 add is exact; bitwise_or on uint16");
    uint32_t iv[4] = {16777217u, 1u, 0x40000000u, 0x40000000u}, io[2];
    st_write_bits(v2, SB, 0, 2, 1024, TERN_DTYPE_INT32, iv, 2);
    tern_instr ins = pred(TERN_ALU_ADD, st_ap1(SB, TERN_DTYPE_INT32, 0, 1, 2048, 2),
                          st_ap1(SB, TERN_DTYPE_INT32, 0, 2, 1024, 2));
    ST_EXPECT_OK(v2, &ins);
    st_read_bits(v2, SB, 0, 1, 2048, TERN_DTYPE_INT32, io, 2);
    CHECK_EQ_INT(io[0], 16777217u + 0x40000000u);
    CHECK_EQ_HEX(io[1], 0x40000001u);
    uint32_t bv[4] = {0x0101, 0x1000, 0x0010, 0x8000};
    st_write_bits(v2, SB, 0, 4, 1024, TERN_DTYPE_UINT16, bv, 1);
    ins = pred(TERN_ALU_BITWISE_OR, st_ap1(SB, TERN_DTYPE_UINT16, 0, 1, 2048, 1),
               st_ap1(SB, TERN_DTYPE_UINT16, 0, 4, 1024, 1));
    ST_EXPECT_OK(v2, &ins);
    st_read_bits(v2, SB, 0, 1, 2048, TERN_DTYPE_UINT16, io, 1);
    CHECK_EQ_HEX(io[0], 0x9111u);
    TEST_BEGIN("partition_reduce rejects bitwise ops on float data");
    ins.ap[TERN_AP_IN0].dtype = F32;
    ST_EXPECT_FAIL(v2, &ins, "operand in0", "fp32", "integer");
    TEST_BEGIN("partition_reduce rejects a destination of 2 partitions");
    ins = pred(TERN_ALU_ADD, st_ap1(SB, F32, 0, 2, 512, F), st_ap1(SB, F32, 0, P, 0, F));
    ST_EXPECT_FAIL(v2, &ins, "operand dst", "2 partitions", "must be 1");
    TEST_BEGIN("partition_reduce rejects subtract");
    ins = pred(TERN_ALU_SUBTRACT, st_ap1(SB, F32, 0, 1, 512, F), st_ap1(SB, F32, 0, P, 0, F));
    ST_EXPECT_FAIL(v2, &ins, "subtract", "not a partition reduction");
    TEST_BEGIN("partition_reduce rejects a size mismatch and PSUM input");
    ins.op0 = TERN_ALU_ADD;
    ins.ap[TERN_AP_DST] = st_ap1(SB, F32, 0, 1, 512, F - 1);
    ST_EXPECT_FAIL(v2, &ins, "operand dst", "4 elements", "5");
    ins.ap[TERN_AP_DST] = st_ap1(SB, F32, 0, 1, 512, F);
    ins.ap[TERN_AP_IN0] = st_ap1(PS, F32, 0, P, 0, F);
    ST_EXPECT_FAIL(v2, &ins, "operand in0", "psum", "allowed: SBUF");
}

/* affine_select whose input and destination have the same 2- or 4-byte dtype and are rows on chip: the rows path
 * (each element kept or filled in the destination row) for the destination the input itself or rows apart, and
 * the gather-and-scatter path for a destination that overlaps the input one element over; every comparison, both
 * widths; kept elements keep their bits (NaN payloads, -0), the rest are on_false rounded to the dtype. */
static void test_affine_select_rows(void)
{
    enum { P = 6, N = 40, IN = 0, APART = 4096 };
    static const tern_alu_op cmps[] = {TERN_ALU_IS_EQ, TERN_ALU_NOT_EQ, TERN_ALU_IS_GT,
                                       TERN_ALU_IS_GE, TERN_ALU_IS_LT,  TERN_ALU_IS_LE};
    int32_t step[1] = {-1};
    uint32_t num[1] = {N};
    int bad = 0, runs = 0;
    for (int wide = 0; wide < 2; wide++)
        for (unsigned c = 0; c < sizeof cmps / sizeof cmps[0]; c++)
            for (int layout = 0; layout < 3; layout++) { /* 0: apart, 1: in place, 2: one element over (overlap) */
                tern_dtype dt = wide ? F32 : TERN_DTYPE_BF16;
                size_t es = wide ? 4 : 2;
                uint32_t x[P * N], got[P * N];
                for (uint32_t i = 0; i < P * N; i++) {
                    uint32_t r = (i * 2654435761u) ^ (i >> 3) * 40503u;
                    x[i] = wide ? (i % 7 == 0 ? 0x7FA00001u + i : i % 11 == 0 ? 0x80000000u : r)
                                : (i % 7 == 0 ? 0x7FA1u : i % 11 == 0 ? 0x8000u : (r & 0xFFFFu));
                }
                st_write_bits(v2, SB, 0, P, IN, dt, x, N);
                uint64_t doff = layout == 0 ? APART : layout == 1 ? IN : IN + es;
                float on_false = -3.4028235e38f;
                tern_instr ins = asel(cmps[c], st_ap1(SB, dt, 0, P, doff, N), st_ap1(SB, dt, 0, P, IN, N),
                                      pattern(1, step, num), 5, 1, on_false);
                ST_EXPECT_OK(v2, &ins);
                st_read_bits(v2, SB, 0, P, doff, dt, got, N);
                uint32_t fill = wide ? 0xFF7FFFFFu : tern_f32_to_bf16(on_false, NULL, 0);
                for (int p = 0; p < P; p++)
                    for (int i = 0; i < N; i++) {
                        int32_t v = 5 + p - i;
                        int keep = cmps[c] == TERN_ALU_IS_EQ ? v == 0 : cmps[c] == TERN_ALU_NOT_EQ ? v != 0
                                 : cmps[c] == TERN_ALU_IS_GT ? v > 0 : cmps[c] == TERN_ALU_IS_GE ? v >= 0
                                 : cmps[c] == TERN_ALU_IS_LT ? v < 0 : v <= 0;
                        bad += got[p * N + i] != (keep ? x[p * N + i] : fill);
                    }
                runs++;
            }
    TEST_BEGIN("affine_select on same-dtype rows (apart, in place, overlapping) keeps bits or fills, every comparison");
    CHECK_EQ_INT(bad, 0);
    CHECK_EQ_INT(runs, 2 * 6 * 3);
}

int main(void)
{
    v2 = st_core("neuroncore-v2");
    test_iota();
    test_affine_select();
    test_affine_select_rows();
    test_partition_reduce();
    tern_core_free(v2);
    return check_report();
}
