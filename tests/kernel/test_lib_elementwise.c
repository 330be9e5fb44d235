/* The kernel library's elementwise kernels (unary activation, binary and scalar ALU ops, per-column bias plus
 * activation) against float64 references over ragged shapes (rows 1, 127, 129, 300; columns 1, 7, 513, 2050,
 * and one wider than a 2048-column chunk), fp32 and bf16, both generations; plus the build-time errors. */
#include <math.h>

#include "kernel_test_util.h"
#include "tern/kernel_lib.h"

static double unit_roundoff(tern_dtype dt) { return dt == TERN_DTYPE_BF16 ? 0x1p-8 : 0x1p-24; }

typedef enum { K_UNARY, K_BINARY, K_SCALAR, K_BIAS } kind;

typedef struct {
    kind kd;
    unsigned R, C;
    tern_dtype in, out;
    int op;      /* tern_act_func (unary, bias) or tern_alu_op (binary, scalar) */
    float s;     /* unary scale / scalar operand */
} ew_case;

static double act_ref(tern_act_func f, double x)
{
    switch (f) {
    case TERN_ACT_COPY: return x;
    case TERN_ACT_EXP: return exp(x);
    case TERN_ACT_TANH: return tanh(x);
    case TERN_ACT_SIGMOID: return 1.0 / (1.0 + exp(-x));
    case TERN_ACT_RELU: return x > 0 ? x : 0.0;
    case TERN_ACT_GELU: return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
    case TERN_ACT_SILU: return x / (1.0 + exp(-x));
    case TERN_ACT_SQUARE: return x * x;
    default: return NAN;
    }
}

static double alu_ref(tern_alu_op op, double a, double b)
{
    switch (op) {
    case TERN_ALU_ADD: return a + b;
    case TERN_ALU_SUBTRACT: return a - b;
    case TERN_ALU_MULT: return a * b;
    case TERN_ALU_DIVIDE: return a / b;
    case TERN_ALU_MAX: return fmax(a, b);
    case TERN_ALU_MIN: return fmin(a, b);
    default: return NAN;
    }
}

static const char *case_op_name(const ew_case *c)
{
    return c->kd == K_UNARY || c->kd == K_BIAS ? tern_act_name((tern_act_func)c->op) : tern_alu_name((tern_alu_op)c->op);
}

static void run_case(const char *machine, const ew_case *c)
{
    static const char *kinds[] = {"unary", "binary", "scalar", "bias_act"};
    char name[160];
    snprintf(name, sizeof name, "%s %s %s %ux%u %s->%s s=%g", kinds[c->kd], case_op_name(c), machine, c->R, c->C,
             tern_dtype_name(c->in), tern_dtype_name(c->out), c->s);
    TEST_BEGIN(name);
    tern_core_config cfg;
    tern_core *core = ktu_core(machine, &cfg);
    tern_kernel *k = NULL;
    tern_error err;
    CHECK_EQ_INT(tern_kernel_create(&cfg, kinds[c->kd], &k, &err), TERN_OK);
    tern_view a = tern_kernel_input2d(k, "a", c->in, c->R, c->C);
    tern_view b;
    tern_view out = tern_kernel_output2d(k, "out", c->out, c->R, c->C);
    size_t n = (size_t)c->R * c->C;
    float *xa = malloc(sizeof(float) * n), *xb = malloc(sizeof(float) * n), *y = malloc(sizeof(float) * n);
    ktu_fill(xa, n, c->in, 100 + n);
    ktu_fill(xb, n, c->in, 200 + n);
    switch (c->kd) {
    case K_UNARY: tern_lib_unary(k, out, a, (tern_act_func)c->op, c->s); break;
    case K_SCALAR: tern_lib_scalar(k, out, a, (tern_alu_op)c->op, c->s); break;
    case K_BINARY:
        b = tern_kernel_input2d(k, "b", c->in, c->R, c->C);
        if (c->op == TERN_ALU_DIVIDE) /* keep divisors away from zero: [0.5, 1.5) */
            for (size_t i = 0; i < n; i++)
                xb[i] = tern_num_round_f32(c->in, xb[i] * 0.5f + 1.0f, NULL, 0);
        tern_lib_binary(k, out, a, b, (tern_alu_op)c->op);
        break;
    case K_BIAS: {
        uint64_t shape[1] = {c->C};
        b = tern_kernel_hbm_tensor(k, "b", TERN_KIO_INPUT, c->in, 1, shape);
        tern_lib_bias_act(k, out, a, b, (tern_act_func)c->op);
        break;
    }
    }
    tern_status st = tern_kernel_status(k, &err);
    CHECK_MSG(st == TERN_OK, "build failed: %s", err.msg);
    if (!st) {
        st = tern_core_validate(core, tern_kernel_program(k), &err);
        CHECK_MSG(st == TERN_OK, "validate failed: %s", err.msg);
    }
    if (!st) {
        CHECK_EQ_INT(tern_kernel_write_f32(k, core, "a", xa, n, &err), TERN_OK);
        if (c->kd == K_BINARY)
            CHECK_EQ_INT(tern_kernel_write_f32(k, core, "b", xb, n, &err), TERN_OK);
        if (c->kd == K_BIAS)
            CHECK_EQ_INT(tern_kernel_write_f32(k, core, "b", xb, c->C, &err), TERN_OK);
        st = tern_kernel_run(k, core, NULL, &err);
        CHECK_MSG(st == TERN_OK, "run failed: %s", err.msg);
        CHECK_EQ_INT(tern_kernel_read_f32(k, core, "out", y, n, &err), TERN_OK);
        size_t bad = 0;
        double worst = 0;
        const double u32 = 0x1p-24, uo = unit_roundoff(c->out);
        for (size_t i = 0; i < n && !st; i++) {
            double ref, tol;
            size_t col = i % c->C;
            switch (c->kd) {
            case K_UNARY: {
                /* ScalarE: x * scale rounded to fp32 (exact for the power-of-two scales; otherwise a relative
                 * error 2^-24 in the argument, which exp turns into 2^-24 * |arg| in the result), the function
                 * evaluated from that and rounded once to fp32, then once to the output dtype. */
                double arg = (double)xa[i] * c->s;
                ref = act_ref((tern_act_func)c->op, arg);
                double cond = c->op == TERN_ACT_EXP ? fabs(arg) : 0;
                double rel = u32 * (1 + cond);
                tol = fabs(ref) * (rel + uo * (1 + rel));
                break;
            }
            case K_BINARY:
            case K_SCALAR: {
                /* VectorE: one fp32 rounding per operator (none for max/min), then the output dtype's. */
                double bv = c->kd == K_BINARY ? xb[i] : (double)c->s;
                ref = alu_ref((tern_alu_op)c->op, xa[i], bv);
                tol = fabs(ref) * (u32 + uo * (1 + u32));
                break;
            }
            default: {
                /* x + b rounded to fp32 on VectorE (relative 2^-24, amplified by at most |arg f'(arg)/f(arg)| <= 4
                 * for these functions on |arg| < 2), the activation rounded to fp32, then to the output dtype. */
                double arg = (double)xa[i] + xb[col];
                ref = act_ref((tern_act_func)c->op, arg);
                double rel = u32 * 6;
                tol = fabs(ref) * (rel + uo * (1 + rel));
                break;
            }
            }
            tol += 1e-40;
            double e = fabs((double)y[i] - ref);
            if (!(e <= tol))
                bad++;
            if (e / tol > worst)
                worst = e / tol;
        }
        CHECK_MSG(bad == 0, "%zu of %zu elements outside the error bound (worst error/bound %.3g)", bad, n, worst);
        if (getenv("KT_VERBOSE"))
            printf("%s: worst %.3g\n", name, worst);
    }
    free(xa);
    free(xb);
    free(y);
    tern_kernel_free(k);
    tern_core_free(core);
}

/* One error case: build with `build`, expect a failed status whose message contains every needle. */
static void expect_error(const char *label, void (*build)(tern_kernel *k), const char *n1, const char *n2)
{
    TEST_BEGIN(label);
    tern_core_config cfg;
    tern_error err;
    if (tern_core_config_load("neuroncore-v2", &cfg, &err)) {
        CHECK_MSG(0, "cannot load machine: %s", err.msg);
        return;
    }
    tern_kernel *k = NULL;
    CHECK_EQ_INT(tern_kernel_create(&cfg, "ew", &k, &err), TERN_OK);
    build(k);
    CHECK(tern_kernel_status(k, &err) != TERN_OK);
    CHECK_STR_CONTAINS(err.msg, n1);
    if (n2)
        CHECK_STR_CONTAINS(err.msg, n2);
    tern_kernel_free(k);
}

static void bad_unary(tern_kernel *k)
{
    tern_view in = tern_kernel_input2d(k, "x", TERN_DTYPE_FP32, 4, 9);
    tern_view out = tern_kernel_output2d(k, "y", TERN_DTYPE_FP32, 4, 8);
    tern_lib_unary(k, out, in, TERN_ACT_EXP, 1.0f);
}
static void bad_binary(tern_kernel *k)
{
    tern_view a = tern_kernel_input2d(k, "a", TERN_DTYPE_FP32, 4, 9);
    tern_view b = tern_kernel_input2d(k, "b", TERN_DTYPE_FP32, 5, 9);
    tern_view out = tern_kernel_output2d(k, "y", TERN_DTYPE_FP32, 4, 9);
    tern_lib_binary(k, out, a, b, TERN_ALU_ADD);
}
static void bad_scalar(tern_kernel *k)
{
    uint64_t shape[3] = {2, 3, 4};
    tern_view in = tern_kernel_hbm_tensor(k, "x", TERN_KIO_INPUT, TERN_DTYPE_FP32, 3, shape);
    tern_view out = tern_kernel_output2d(k, "y", TERN_DTYPE_FP32, 6, 4);
    tern_lib_scalar(k, out, in, TERN_ALU_MULT, 2.0f);
}
static void bad_bias(tern_kernel *k)
{
    tern_view in = tern_kernel_input2d(k, "x", TERN_DTYPE_FP32, 4, 9);
    tern_view bias = tern_kernel_input2d(k, "b", TERN_DTYPE_FP32, 1, 8);
    tern_view out = tern_kernel_output2d(k, "y", TERN_DTYPE_FP32, 4, 9);
    tern_lib_bias_act(k, out, in, bias, TERN_ACT_RELU);
}
static void bad_bitvec(tern_kernel *k)
{
    /* A bitvec operator on float data: the instruction rule, reported through the kernel. */
    tern_view in = tern_kernel_input2d(k, "x", TERN_DTYPE_FP32, 4, 9);
    tern_view out = tern_kernel_output2d(k, "y", TERN_DTYPE_FP32, 4, 9);
    tern_lib_scalar(k, out, in, TERN_ALU_BITWISE_AND, 1.0f);
}

int main(void)
{
    const ew_case cases[] = {
        {K_UNARY, 1, 1, TERN_DTYPE_FP32, TERN_DTYPE_FP32, TERN_ACT_EXP, 1.0f},
        {K_UNARY, 127, 7, TERN_DTYPE_FP32, TERN_DTYPE_FP32, TERN_ACT_TANH, 2.0f},
        {K_UNARY, 129, 513, TERN_DTYPE_BF16, TERN_DTYPE_BF16, TERN_ACT_GELU, 2.0f},
        {K_UNARY, 300, 2050, TERN_DTYPE_BF16, TERN_DTYPE_FP32, TERN_ACT_SILU, 4.0f},
        {K_UNARY, 129, 100, TERN_DTYPE_FP32, TERN_DTYPE_BF16, TERN_ACT_SIGMOID, 0.5f},
        {K_UNARY, 130, 70, TERN_DTYPE_FP32, TERN_DTYPE_FP32, TERN_ACT_RELU, 1.0f},
        {K_UNARY, 64, 64, TERN_DTYPE_FP32, TERN_DTYPE_FP32, TERN_ACT_EXP, 1.0f / 3.0f},
        {K_UNARY, 2, 4100, TERN_DTYPE_FP32, TERN_DTYPE_FP32, TERN_ACT_SQUARE, 1.0f},
        {K_BINARY, 1, 1, TERN_DTYPE_FP32, TERN_DTYPE_FP32, TERN_ALU_ADD, 0},
        {K_BINARY, 127, 513, TERN_DTYPE_FP32, TERN_DTYPE_FP32, TERN_ALU_MULT, 0},
        {K_BINARY, 129, 7, TERN_DTYPE_BF16, TERN_DTYPE_BF16, TERN_ALU_SUBTRACT, 0},
        {K_BINARY, 300, 2050, TERN_DTYPE_BF16, TERN_DTYPE_FP32, TERN_ALU_DIVIDE, 0},
        {K_BINARY, 129, 300, TERN_DTYPE_FP32, TERN_DTYPE_BF16, TERN_ALU_MAX, 0},
        {K_SCALAR, 1, 7, TERN_DTYPE_FP32, TERN_DTYPE_FP32, TERN_ALU_ADD, 0.375f},
        {K_SCALAR, 300, 513, TERN_DTYPE_BF16, TERN_DTYPE_BF16, TERN_ALU_MULT, 3.0f},
        {K_SCALAR, 129, 2050, TERN_DTYPE_FP32, TERN_DTYPE_FP32, TERN_ALU_MIN, 0.25f},
        {K_BIAS, 1, 1, TERN_DTYPE_FP32, TERN_DTYPE_FP32, TERN_ACT_COPY, 0},
        {K_BIAS, 127, 513, TERN_DTYPE_FP32, TERN_DTYPE_FP32, TERN_ACT_RELU, 0},
        {K_BIAS, 300, 2050, TERN_DTYPE_BF16, TERN_DTYPE_BF16, TERN_ACT_GELU, 0},
        {K_BIAS, 129, 7, TERN_DTYPE_FP32, TERN_DTYPE_BF16, TERN_ACT_EXP, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_case("neuroncore-v2", &cases[i]);
    const ew_case v3[] = {
        {K_UNARY, 200, 300, TERN_DTYPE_BF16, TERN_DTYPE_FP32, TERN_ACT_EXP, 2.0f},
        {K_BIAS, 200, 300, TERN_DTYPE_FP32, TERN_DTYPE_FP32, TERN_ACT_SILU, 0},
    };
    for (size_t i = 0; i < sizeof v3 / sizeof v3[0]; i++)
        run_case("neuroncore-v3", &v3[i]);
    expect_error("unary error: shape mismatch", bad_unary, "unary: out is [4, 8] but in is [4, 9]", NULL);
    expect_error("binary error: shape mismatch", bad_binary, "binary: a is [4, 9] but b is [5, 9]", NULL);
    expect_error("scalar error: rank", bad_scalar, "scalar: in must be a 2-D [rows, cols] view, has rank 3", NULL);
    expect_error("bias_act error: bias length", bad_bias, "bias_act: bias is [1, 8] in hbm, must be HBM [9] or [1, 9]",
                 "in is [4, 9]");
    expect_error("scalar error: bitvec on float", bad_bitvec, "tensor_scalar", "integer");
    return check_report();
}
