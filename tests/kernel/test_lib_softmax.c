/* The kernel library's row softmax against a float64 reference over ragged row and column counts, fp32 and
 * bf16 data, rows far from zero (where the max subtraction matters) and both generations; the tile form writing
 * its result in another dtype against the tile form and a cast copy; plus the build-time errors for mismatched
 * shapes and rows too long for SBUF. */
#include <math.h>
#include <string.h>

#include "kernel_test_util.h"
#include "tern/kernel_lib.h"

static double unit_roundoff(tern_dtype dt) { return dt == TERN_DTYPE_BF16 ? 0x1p-8 : 0x1p-24; }

/* Values amp * u + offset (u uniform in [-1, 1)), rounded to the dtype, so the reference sees the device's
 * exact inputs. */
static void fill(float *x, size_t n, tern_dtype dt, uint64_t seed, float amp, float offset)
{
    ktu_fill(x, n, TERN_DTYPE_FP32, seed);
    for (size_t i = 0; i < n; i++)
        x[i] = tern_num_round_f32(dt, x[i] * amp + offset, NULL, 0);
}

static void run_case(const char *machine, unsigned R, unsigned C, tern_dtype in_dt, tern_dtype out_dt, float amp,
                     float offset)
{
    char name[160];
    snprintf(name, sizeof name, "softmax %s %ux%u %s->%s amp %g offset %g", machine, R, C, tern_dtype_name(in_dt),
             tern_dtype_name(out_dt), amp, offset);
    TEST_BEGIN(name);
    tern_core_config cfg;
    tern_core *core = ktu_core(machine, &cfg);
    tern_kernel *k = NULL;
    tern_error err;
    CHECK_EQ_INT(tern_kernel_create(&cfg, "softmax", &k, &err), TERN_OK);
    tern_view in = tern_kernel_input2d(k, "x", in_dt, R, C);
    tern_view out = tern_kernel_output2d(k, "y", out_dt, R, C);
    tern_lib_softmax(k, out, in);
    tern_status st = tern_kernel_status(k, &err);
    CHECK_MSG(st == TERN_OK, "build failed: %s", err.msg);
    if (!st) {
        st = tern_core_validate(core, tern_kernel_program(k), &err);
        CHECK_MSG(st == TERN_OK, "validate failed: %s", err.msg);
    }
    size_t n = (size_t)R * C;
    float *x = malloc(sizeof(float) * n), *y = malloc(sizeof(float) * n);
    fill(x, n, in_dt, 11 + R * 7 + C, amp, offset);
    if (!st) {
        CHECK_EQ_INT(tern_kernel_write_f32(k, core, "x", x, n, &err), TERN_OK);
        tern_run_stats stats;
        memset(&stats, 0, sizeof stats);
        st = tern_kernel_run(k, core, &stats, &err);
        CHECK_MSG(st == TERN_OK, "run failed: %s", err.msg);
        /* At least one exp-with-sum activation per row tile, and no TensorE work. */
        CHECK_MSG(stats.instructions[TERN_ENGINE_SCALAR] >= (R + 127) / 128, "%llu ScalarE instructions for %u rows",
                  (unsigned long long)stats.instructions[TERN_ENGINE_SCALAR], R);
        CHECK_EQ_INT(stats.instructions[TERN_ENGINE_TENSOR], 0);
        CHECK_EQ_INT(tern_kernel_read_f32(k, core, "y", y, n, &err), TERN_OK);
        size_t bad = 0;
        double worst = 0;
        for (unsigned r = 0; r < R && !st; r++) {
            const float *xr = x + (size_t)r * C;
            double m = -INFINITY, s = 0;
            for (unsigned c = 0; c < C; c++)
                m = fmax(m, xr[c]);
            for (unsigned c = 0; c < C; c++)
                s += exp(xr[c] - m);
            for (unsigned c = 0; c < C; c++) {
                double ref = exp(xr[c] - m) / s;
                /* fp32 on chip: x - max rounded (relative error 2^-24 * |x - max| in exp's result), exp rounded,
                 * C-term sequential fp32 sum (<= (C-1) * 2^-24 of the sum: all terms positive), reciprocal and
                 * product rounded; then one rounding to the output dtype. */
                double arg = fabs((double)xr[c] - m);
                double rel = (arg + C + 4) * 0x1p-24;
                double tol = fabs(ref) * (rel + unit_roundoff(out_dt) * (1 + rel)) + 1e-40;
                double e = fabs((double)y[(size_t)r * C + c] - ref);
                if (!(e <= tol))
                    bad++;
                if (e / tol > worst)
                    worst = e / tol;
            }
        }
        CHECK_MSG(bad == 0, "%zu of %zu elements outside the error bound (worst error/bound %.3g)", bad, n, worst);
        if (getenv("KT_VERBOSE")) printf("%s: worst %.3g\n", name, worst);
    }
    free(x);
    free(y);
    tern_kernel_free(k);
    tern_core_free(core);
}

static void errors(void)
{
    tern_core_config cfg;
    tern_error err;
    TEST_BEGIN("softmax error: shape mismatch");
    tern_core *core = ktu_core("neuroncore-v2", &cfg);
    tern_kernel *k = NULL;
    tern_kernel_create(&cfg, "sm", &k, &err);
    tern_view in = tern_kernel_input2d(k, "x", TERN_DTYPE_FP32, 3, 7);
    tern_view out = tern_kernel_output2d(k, "y", TERN_DTYPE_FP32, 3, 5);
    tern_lib_softmax(k, out, in);
    CHECK(tern_kernel_status(k, &err) != TERN_OK);
    CHECK_STR_CONTAINS(err.msg, "softmax: out is [3, 5] but in is [3, 7]");
    tern_kernel_free(k);

    TEST_BEGIN("softmax error: row longer than SBUF");
    tern_kernel_create(&cfg, "sm", &k, &err);
    in = tern_kernel_input2d(k, "x", TERN_DTYPE_BF16, 2, 60000);
    out = tern_kernel_output2d(k, "y", TERN_DTYPE_BF16, 2, 60000);
    tern_lib_softmax(k, out, in);
    CHECK(tern_kernel_status(k, &err) == TERN_ERR_RANGE);
    CHECK_STR_CONTAINS(err.msg, "softmax: in has rows of 60000 columns");
    CHECK_STR_CONTAINS(err.msg, "at most 45048 columns");
    tern_kernel_free(k);

    TEST_BEGIN("softmax error: tile form with an out of another shape");
    tern_kernel_create(&cfg, "sm", &k, &err);
    tern_view tx = tern_kernel_sbuf(k, TERN_DTYPE_FP32, 4, 10, "x"), to = tern_kernel_sbuf(k, TERN_DTYPE_BF16, 4, 9, "o");
    tern_lib_softmax_tile_to(k, tx, to);
    CHECK(tern_kernel_status(k, &err) == TERN_ERR_INVALID);
    CHECK_STR_CONTAINS(err.msg, "softmax tile: x must be fp32 and out a float tile of its shape");
    CHECK_STR_CONTAINS(err.msg, "x is fp32 [4, 10], out bf16 [4, 9]");
    tern_kernel_free(k);

    TEST_BEGIN("softmax error: invalid view");
    tern_kernel_create(&cfg, "sm", &k, &err);
    out = tern_kernel_output2d(k, "y", TERN_DTYPE_FP32, 3, 5);
    in.region = -1;
    tern_lib_softmax(k, out, in);
    CHECK(tern_kernel_status(k, &err) != TERN_OK);
    CHECK_STR_CONTAINS(err.msg, "softmax in: invalid view");
    tern_kernel_free(k);
    tern_core_free(core);
}

/* tern_lib_softmax_tile_to writing bf16 (and fp16) equals tern_lib_softmax_tile followed by a cast copy, bit for
 * bit, with rows holding NaN, infinities, huge and subnormal values among ordinary ones. */
static void tile_to_case(const char *machine, tern_dtype pdt)
{
    char name[120];
    snprintf(name, sizeof name, "softmax_tile_to %s %s == softmax_tile + cast copy", machine, tern_dtype_name(pdt));
    TEST_BEGIN(name);
    const unsigned R = 100, C = 300;
    tern_core_config cfg;
    tern_core *core = ktu_core(machine, &cfg);
    tern_kernel *k = NULL;
    tern_error err;
    CHECK_EQ_INT(tern_kernel_create(&cfg, "softmax_to", &k, &err), TERN_OK);
    tern_view in = tern_kernel_input2d(k, "x", TERN_DTYPE_FP32, R, C);
    tern_view o1 = tern_kernel_output2d(k, "copied", pdt, R, C), o2 = tern_kernel_output2d(k, "direct", pdt, R, C);
    tern_view x1 = tern_kernel_sbuf(k, TERN_DTYPE_FP32, R, C, "x1"), x2 = tern_kernel_sbuf(k, TERN_DTYPE_FP32, R, C, "x2");
    tern_view p1 = tern_kernel_sbuf(k, pdt, R, C, "p1"), p2 = tern_kernel_sbuf(k, pdt, R, C, "p2");
    tern_kernel_load(k, x1, in);
    tern_kernel_load(k, x2, in);
    tern_lib_softmax_tile(k, x1);
    tern_kernel_tensor_copy(k, TERN_ENGINE_VECTOR, p1, x1);
    tern_lib_softmax_tile_to(k, x2, p2);
    tern_kernel_store(k, o1, p1);
    tern_kernel_store(k, o2, p2);
    tern_status st = tern_kernel_status(k, &err);
    CHECK_MSG(st == TERN_OK, "build failed: %s", err.msg);
    size_t n = (size_t)R * C, bytes = n * tern_dtype_size(pdt);
    float *x = malloc(sizeof(float) * n);
    fill(x, n, TERN_DTYPE_FP32, 77, 6, 0);
    const float sv[] = {NAN, INFINITY, -INFINITY, 3e38f, -3e38f, 0x1p-149f, -0.0f, 88.0f, -104.0f};
    for (unsigned r = 0; r < R; r += 3) /* a third of the rows get a special value, at varying columns */
        x[(size_t)r * C + (r * 37) % C] = sv[(r / 3) % (sizeof sv / sizeof sv[0])];
    for (unsigned c = 0; c < C; c++) /* row 1: all -inf */
        x[C + c] = -INFINITY;
    unsigned char *b1 = malloc(bytes), *b2 = malloc(bytes);
    if (!st) {
        CHECK_EQ_INT(tern_kernel_write_f32(k, core, "x", x, n, &err), TERN_OK);
        st = tern_kernel_run(k, core, NULL, &err);
        CHECK_MSG(st == TERN_OK, "run failed: %s", err.msg);
        CHECK_EQ_INT(tern_kernel_read(k, core, "copied", b1, bytes, &err), TERN_OK);
        CHECK_EQ_INT(tern_kernel_read(k, core, "direct", b2, bytes, &err), TERN_OK);
        size_t diff = 0;
        for (size_t i = 0; i < n; i++)
            diff += memcmp(b1 + i * tern_dtype_size(pdt), b2 + i * tern_dtype_size(pdt), tern_dtype_size(pdt)) != 0;
        CHECK_MSG(diff == 0, "%zu of %zu elements differ", diff, n);
    }
    free(x);
    free(b1);
    free(b2);
    tern_kernel_free(k);
    tern_core_free(core);
}

int main(void)
{
    tile_to_case("neuroncore-v2", TERN_DTYPE_BF16);
    tile_to_case("neuroncore-v2", TERN_DTYPE_FP16);
    tile_to_case("neuroncore-v3", TERN_DTYPE_BF16);
    static const struct {
        unsigned R, C;
        tern_dtype in, out;
        float amp, offset;
    } cases[] = {
        {1, 1, TERN_DTYPE_FP32, TERN_DTYPE_FP32, 1, 0},
        {127, 7, TERN_DTYPE_FP32, TERN_DTYPE_FP32, 4, 0},
        {129, 513, TERN_DTYPE_FP32, TERN_DTYPE_FP32, 8, 0},
        {300, 2050, TERN_DTYPE_BF16, TERN_DTYPE_BF16, 4, 0},
        {130, 300, TERN_DTYPE_BF16, TERN_DTYPE_FP32, 2, 1000}, /* exp(1000) overflows without the max */
        {64, 1000, TERN_DTYPE_FP32, TERN_DTYPE_BF16, 16, -500},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_case("neuroncore-v2", cases[i].R, cases[i].C, cases[i].in, cases[i].out, cases[i].amp, cases[i].offset);
    run_case("neuroncore-v3", 200, 777, TERN_DTYPE_BF16, TERN_DTYPE_FP32, 4, 0);
    errors();
    return check_report();
}
