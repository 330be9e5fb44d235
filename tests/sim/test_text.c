/* GpSimdE text_parse / text_format (ONNX string tensors on the device): cells of W bytes per element, the numbers
 * against tern_f32_parse / tern_f32_format (checked against numpy in tests/num/test_num_strconv.c), strided
 * operands, the run-time errors (text that is not a number, a text longer than its cell) and every rule's
 * rejection. */
#include "check.h"
#include "sim/sim_test_util.h"

#define SB TERN_MEM_SBUF
#define GP TERN_ENGINE_GPSIMD
#define F32 TERN_DTYPE_FP32
#define U8 TERN_DTYPE_UINT8

static tern_core *v2;

static tern_instr text(tern_opcode op, tern_ap d, tern_ap a, int cell)
{
    tern_instr ins = st_instr(op, GP);
    ins.ap[TERN_AP_DST] = d;
    ins.ap[TERN_AP_IN0] = a;
    ins.imm_i0 = cell;
    return ins;
}

/* Write texts[p * n + i] into partition p's cells at byte offset off. */
static void put_cells(unsigned np, uint64_t off, const char *const *texts, size_t n, size_t cell)
{
    tern_error err;
    uint8_t *row = calloc(n * cell, 1);
    for (unsigned p = 0; p < np; p++) {
        memset(row, 0, n * cell);
        for (size_t i = 0; i < n; i++)
            memcpy(row + i * cell, texts[p * n + i], strlen(texts[p * n + i]));
        if (tern_core_onchip_write(v2, SB, p, off, row, n * cell, &err)) {
            fprintf(stderr, "put_cells: %s\n", err.msg);
            exit(2);
        }
    }
    free(row);
}

static void get_cells(unsigned p, uint64_t off, uint8_t *out, size_t bytes)
{
    tern_error err;
    if (tern_core_onchip_read(v2, SB, p, off, out, bytes, &err)) {
        fprintf(stderr, "get_cells: %s\n", err.msg);
        exit(2);
    }
}

static void test_parse(void)
{
    enum { P = 3, N = 4, W = 16 };
    static const char *const texts[P * N] = {"0.47892547", "NaN", "+INF", "-INF",     "1e-50", " 1_000.5 ",
                                             "-0",          "3.4028236e38", "1.5", "0.1", "16777217", "1e-45"};
    TEST_BEGIN("text_parse: every cell to fp32 as numpy would (through fp64)");
    put_cells(P, 0, texts, N, W);
    tern_instr ins = text(TERN_OP_TEXT_PARSE, st_ap1(SB, F32, 0, P, 4096, N), st_ap1(SB, U8, 0, P, 0, N * W), W);
    ST_EXPECT_OK(v2, &ins);
    float got[P * N];
    st_read(v2, SB, 0, P, 4096, F32, got, N);
    int bad = 0;
    for (int e = 0; e < P * N; e++) {
        float want;
        CHECK(tern_f32_parse(texts[e], strlen(texts[e]), &want) == 0);
        bad += st_f2u(got[e]) != st_f2u(want) && !(isnan(got[e]) && isnan(want));
    }
    CHECK_EQ_INT(bad, 0);
    CHECK(isnan(got[1]) && isinf(got[2]) && got[2] > 0 && isinf(got[3]) && got[3] < 0);
    CHECK(got[4] == 0.0f && got[5] == 1000.5f && st_f2u(got[6]) == 0x80000000u && isinf(got[7]));
    CHECK(got[10] == 16777216.0f);

    TEST_BEGIN("text_parse: a cell filled to its last byte (no NUL) is read whole");
    static const char *const full[1] = {"1234567890.12345"}; /* 16 bytes = W */
    put_cells(1, 8192, full, 1, W);
    ins = text(TERN_OP_TEXT_PARSE, st_ap1(SB, F32, 0, 1, 9000, 1), st_ap1(SB, U8, 0, 1, 8192, W), W);
    ST_EXPECT_OK(v2, &ins);
    st_read(v2, SB, 0, 1, 9000, F32, got, 1);
    CHECK(got[0] == 1234567890.12345f);

    TEST_BEGIN("text_parse: text that is not a number stops the core, naming the cell");
    static const char *const badt[2] = {"2.5", "0x10"};
    put_cells(1, 10000, badt, 2, W);
    ins = text(TERN_OP_TEXT_PARSE, st_ap1(SB, F32, 0, 1, 11000, 2), st_ap1(SB, U8, 0, 1, 10000, 2 * W), W);
    ST_EXPECT_FAIL(v2, &ins, "operand in0", "partition 0, element 1", "\"0x10\"", "not a number");
    static const char *const empty[1] = {""};
    put_cells(1, 10000, empty, 1, W);
    ins = text(TERN_OP_TEXT_PARSE, st_ap1(SB, F32, 0, 1, 11000, 1), st_ap1(SB, U8, 0, 1, 10000, W), W);
    ST_EXPECT_FAIL(v2, &ins, "element 0", "\"\"", "not a number");
}

static void test_format(void)
{
    enum { P = 2, N = 5, W = 24 };
    const float x[P * N] = {0.9767611f, 0.039187793f, 1.0f,      -0.0f,     1e16f,
                            1e-5f,      123456790.0f, INFINITY, -INFINITY, NAN};
    TEST_BEGIN("text_format: numpy's str() per element, NUL-padded cells");
    st_write(v2, SB, 0, P, 0, F32, x, N);
    tern_instr ins = text(TERN_OP_TEXT_FORMAT, st_ap1(SB, U8, 0, P, 1024, N * W), st_ap1(SB, F32, 0, P, 0, N), W);
    ST_EXPECT_OK(v2, &ins);
    int bad = 0;
    for (unsigned p = 0; p < P; p++) {
        uint8_t row[N * W];
        get_cells(p, 1024, row, sizeof row);
        for (int i = 0; i < N; i++) {
            char want[TERN_F32_TEXT_MAX];
            size_t len = tern_f32_format(x[p * N + i], want);
            const uint8_t *c = row + i * W;
            int ok = !memcmp(c, want, len);
            for (size_t k = len; k < W; k++)
                ok &= c[k] == 0;
            bad += !ok;
        }
    }
    CHECK_EQ_INT(bad, 0);
    uint8_t row[N * W];
    get_cells(0, 1024, row, sizeof row);
    CHECK_MSG(!strcmp((const char *)row, "0.9767611"), "cell: got %s", (const char *)row);
    CHECK_MSG(!strcmp((const char *)row + W, "0.039187793"), "cell: got %s", (const char *)row + W);
    CHECK_MSG(!strcmp((const char *)row + 2 * W, "1.0"), "cell: got %s", (const char *)row + 2 * W);
    CHECK_MSG(!strcmp((const char *)row + 3 * W, "-0.0"), "cell: got %s", (const char *)row + 3 * W);
    CHECK_MSG(!strcmp((const char *)row + 4 * W, "1e+16"), "cell: got %s", (const char *)row + 4 * W);

    TEST_BEGIN("text_format then text_parse round-trips every value (strided number operand)");
    int32_t st[2] = {2, 1};
    uint32_t nm[2] = {N, 1};
    float y[2 * N];
    for (int i = 0; i < 2 * N; i++)
        y[i] = i % 2 ? 0.0f : (float)(i + 1) / 7.0f; /* every other element is read */
    st_write(v2, SB, 0, 1, 2048, F32, y, 2 * N);
    ins = text(TERN_OP_TEXT_FORMAT, st_ap1(SB, U8, 0, 1, 4096, N * W), st_ap(SB, F32, 0, 1, 2048, 2, st, nm), W);
    ST_EXPECT_OK(v2, &ins);
    ins = text(TERN_OP_TEXT_PARSE, st_ap1(SB, F32, 0, 1, 8192, N), st_ap1(SB, U8, 0, 1, 4096, N * W), W);
    ST_EXPECT_OK(v2, &ins);
    float back[N];
    st_read(v2, SB, 0, 1, 8192, F32, back, N);
    bad = 0;
    for (int i = 0; i < N; i++)
        bad += st_f2u(back[i]) != st_f2u(y[2 * i]);
    CHECK_EQ_INT(bad, 0);

    TEST_BEGIN("text_format: a text longer than its cell stops the core");
    ins = text(TERN_OP_TEXT_FORMAT, st_ap1(SB, U8, 0, 1, 4096, 2 * 8), st_ap1(SB, F32, 0, 1, 0, 2), 8);
    ST_EXPECT_FAIL(v2, &ins, "operand dst", "element 0", "\"0.9767611\"", "needs 9 bytes", "holds 8");
}

static void test_rules(void)
{
    TEST_BEGIN("text ops reject a cell size outside 1..255");
    tern_instr ins = text(TERN_OP_TEXT_PARSE, st_ap1(SB, F32, 0, 1, 0, 1), st_ap1(SB, U8, 0, 1, 64, 1), 0);
    ST_EXPECT_FAIL(v2, &ins, "imm_i0", "is 0", "1..255");
    ins.imm_i0 = 256;
    ST_EXPECT_FAIL(v2, &ins, "imm_i0", "is 256");
    TEST_BEGIN("text ops reject a text operand that is not uint8 and numbers that are not fp32");
    ins = text(TERN_OP_TEXT_PARSE, st_ap1(SB, F32, 0, 1, 0, 1), st_ap1(SB, TERN_DTYPE_INT8, 0, 1, 64, 8), 8);
    ST_EXPECT_FAIL(v2, &ins, "operand in0", "int8", "must be uint8");
    ins = text(TERN_OP_TEXT_FORMAT, st_ap1(SB, U8, 0, 1, 64, 8), st_ap1(SB, TERN_DTYPE_BF16, 0, 1, 0, 1), 8);
    ST_EXPECT_FAIL(v2, &ins, "operand in0", "bf16", "must be fp32");
    TEST_BEGIN("text ops reject a shape that is not numbers x cells");
    ins = text(TERN_OP_TEXT_PARSE, st_ap1(SB, F32, 0, 2, 0, 3), st_ap1(SB, U8, 0, 2, 64, 23), 8);
    ST_EXPECT_FAIL(v2, &ins, "operand in0", "[2, 23]", "[2, 3]", "8-byte cells");
    ins = text(TERN_OP_TEXT_PARSE, st_ap1(SB, F32, 0, 2, 0, 3), st_ap1(SB, U8, 0, 1, 64, 24), 8);
    ST_EXPECT_FAIL(v2, &ins, "operand in0", "[1, 24]");
    TEST_BEGIN("text ops run on GpSimd only and read SBUF only");
    ins = text(TERN_OP_TEXT_PARSE, st_ap1(SB, F32, 0, 1, 0, 1), st_ap1(SB, U8, 0, 1, 64, 8), 8);
    ins.engine = TERN_ENGINE_VECTOR;
    ST_EXPECT_FAIL(v2, &ins, "vector engine", "allowed: gpsimd");
    ins = text(TERN_OP_TEXT_PARSE, st_ap1(SB, F32, 0, 1, 0, 1), st_ap1(TERN_MEM_PSUM, U8, 0, 1, 64, 8), 8);
    ST_EXPECT_FAIL(v2, &ins, "operand in0", "psum", "allowed: SBUF");
}

int main(void)
{
    v2 = st_core("neuroncore-v2");
    test_parse();
    test_format();
    test_rules();
    tern_core_free(v2);
    return check_report();
}
