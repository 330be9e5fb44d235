/* Elementwise lowerings. The fast special cases: binary ALU ops on VectorE (broadcasts by one DMA, a trailing
 * size-1 operand as a per-partition scalar), unary ops as one ScalarE activation, Pow by a constant 2, 0.5, 1,
 * -1 or 3, Cast between floats, Dropout at inference and Where. The general rules: activations composed from
 * ScalarE functions and
 * VectorE ALU ops (Clip, LeakyRelu, Elu, Selu, Celu, HardSigmoid, HardSwish, Softsign, PRelu, ThresholdedRelu,
 * Shrink), more math (Mod, Floor, Ceil, Round, Cos, Tan, Sinh, Cosh, Asinh, Acosh, Atanh, Atan, Asin, Acos, IsNaN,
 * IsInf, Not, BitShift, Pow with a tensor exponent, n-ary Sum/Mean/Max/Min, integer Div) and Cast/CastLike in
 * general (float to integer truncates, text casts), each as a tile program run by tile_ew_apply over fp32 (or
 * int32) tiles of the flattened, broadcast operands; they take what the special cases decline. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "compiler/lower_tiles.h"
#include "graph/graph_internal.h"
#include "graph/op_params.h"

/* A unary elementwise op on input 0 into output 0. */
static void unary_op(compile_ctx *c, ew_fn fn, const ew_ctx *ctx)
{
    cc_value *x = cc_in(c, 0);
    cc_value *y = cc_out(c, 0, cc_out_dtype(c, 0));
    if (!x || !y)
        return;
    tile_ew_apply(c, &x, 1, y, fn, ctx, 0);
}

/* A binary (numpy-broadcast) elementwise op of inputs 0 and 1 into output 0. */
static void binary_op(compile_ctx *c, ew_fn fn, const ew_ctx *ctx, int int_tiles)
{
    cc_value *a = cc_in(c, 0), *b = cc_in(c, 1);
    cc_value *y = cc_out(c, 0, cc_out_dtype(c, 0));
    if (!a || !b || !y)
        return;
    cc_value ta, tb;
    cc_value *ba = tile_bcast(c, a, y, &ta);
    cc_value *bb = ba ? tile_bcast(c, b, y, &tb) : NULL;
    if (ba && bb) {
        cc_value *xs[2] = {ba, bb};
        tile_ew_apply(c, xs, 2, y, fn, ctx, int_tiles);
    }
    if (bb)
        tile_bcast_free(c, &tb, bb);
    if (ba)
        tile_bcast_free(c, &ta, ba);
}

static float attr_f(compile_ctx *c, const char *name, float dflt) { return tern_graph_attr_float(cc_node(c), name,
                    dflt); }

/* -- the elementwise tile_new programs --
 * IEEE special values: VectorE's max and min are maxNum/minNum (a NaN operand loses, docs/isa-semantics.md) and a
 * mask product x * (x > t) turns inf into NaN (inf * 0), so the programs below compute ONNX's piecewise
 * definitions with compares and select (which copies the chosen bits: NaN, inf and the sign of zero survive),
 * and where a max/min clamp must stay, put the NaN back afterwards (nan_keep). */

/* o = isnan(x) ? x : o; t is scratch. */
static void nan_keep(compile_ctx *c, tern_view o, tern_view x, tern_view t)
{
    tile_tt(c, t, x, x, TERN_ALU_NOT_EQ);
    tern_kernel_select(c->k, o, t, x, o);
}

/* o = (o == 0) ? x * 0 : o, so a zero result takes x's sign, as floor, ceil and round of a negative x do (for
 * the finite x that reach it: a big or non-finite x is selected whole before). t is scratch. */
static void zero_sign_of(compile_ctx *c, tern_view o, tern_view x, tern_view t, tern_view u)
{
    tile_ts(c, t, o, TERN_ALU_IS_EQ, 0.0f, TERN_ALU_BYPASS, 0.0f);
    tile_ts(c, u, x, TERN_ALU_MULT, 0.0f, TERN_ALU_BYPASS, 0.0f);
    tern_kernel_select(c->k, o, t, u, o);
}

static void f_leaky(compile_ctx *c, const ew_ctx *x, const tern_view *in, tern_view o, const tern_view *s)
{ /* x < 0 ? alpha * x : x (NaN and -0 take the second branch, as the definition's "x >= 0" branch is x) */
    tile_ts(c, s[0], in[0], TERN_ALU_MULT, x->a, TERN_ALU_BYPASS, 0.0f);
    tile_ts(c, s[1], in[0], TERN_ALU_IS_LT, 0.0f, TERN_ALU_BYPASS, 0.0f);
    tern_kernel_select(c->k, o, s[1], s[0], in[0]);
}

static void f_elu(compile_ctx *c, const ew_ctx *x, const tern_view *in, tern_view o, const tern_view *s)
{ /* gamma * (max(x, 0) + alpha * (exp(min(x, 0) / theta) - 1)); Elu: theta 1, gamma 1; Celu: theta alpha */
    tile_ts(c, s[0], in[0], TERN_ALU_MIN, 0.0f, TERN_ALU_BYPASS, 0.0f);
    tile_act(c, s[0], s[0], TERN_ACT_EXP, x->b);
    tile_ts(c, s[0], s[0], TERN_ALU_SUBTRACT, 1.0f, TERN_ALU_MULT, x->a);
    tile_ts(c, o, in[0], TERN_ALU_MAX, 0.0f, TERN_ALU_BYPASS, 0.0f);
    tile_tt(c, o, o, s[0], TERN_ALU_ADD);
    if (x->g != 1.0f)
        tile_ts(c, o, o, TERN_ALU_MULT, x->g, TERN_ALU_BYPASS, 0.0f);
    nan_keep(c, o, in[0], s[0]); /* the min/max split drops a NaN */
}

static void f_hardsigmoid(compile_ctx *c, const ew_ctx *x, const tern_view *in, tern_view o, const tern_view *s)
{ /* max(0, min(1, alpha * x + beta)), times x for HardSwish */
    tern_view t = x->flag ? s[0] : o;
    tile_ts(c, t, in[0], TERN_ALU_MULT, x->a, TERN_ALU_ADD, x->b);
    tile_ts(c, t, t, TERN_ALU_MIN, 1.0f, TERN_ALU_MAX, 0.0f);
    if (!x->flag) /* HardSwish needs none: x * t is NaN for a NaN x whatever t is */
        nan_keep(c, t, in[0], s[1]);
    if (x->flag)
        tile_tt(c, o, in[0], t, TERN_ALU_MULT);
}

static void f_softsign(compile_ctx *c, const ew_ctx *x, const tern_view *in, tern_view o, const tern_view *s)
{ /* x / (1 + |x|) */
    (void)x;
    tile_act(c, s[0], in[0], TERN_ACT_ABS, 1.0f);
    tile_ts(c, s[0], s[0], TERN_ALU_ADD, 1.0f, TERN_ALU_BYPASS, 0.0f);
    tile_tt(c, o, in[0], s[0], TERN_ALU_DIVIDE);
}

static void f_thresholded(compile_ctx *c, const ew_ctx *x, const tern_view *in, tern_view o, const tern_view *s)
{ /* x > alpha ? x : 0 (a select: x * mask would give NaN for -inf and -0 for negative x) */
    tile_ts(c, s[0], in[0], TERN_ALU_IS_GT, x->a, TERN_ALU_BYPASS, 0.0f);
    tile_ts(c, s[1], s[0], TERN_ALU_MULT, 0.0f, TERN_ALU_BYPASS, 0.0f); /* +0: the mask is 0 or 1 */
    tern_kernel_select(c->k, o, s[0], in[0], s[1]);
}

static void f_shrink(compile_ctx *c, const ew_ctx *x, const tern_view *in, tern_view o, const tern_view *s)
{ /* x < -lambd ? x + bias : x > lambd ? x - bias : 0, as two selects (masks times +-inf would be NaN) */
    tile_ts(c, s[0], in[0], TERN_ALU_IS_GT, x->a, TERN_ALU_BYPASS, 0.0f);
    tile_ts(c, s[1], in[0], TERN_ALU_SUBTRACT, x->b, TERN_ALU_BYPASS, 0.0f);
    tile_ts(c, s[2], s[0], TERN_ALU_MULT, 0.0f, TERN_ALU_BYPASS, 0.0f); /* +0 */
    tern_kernel_select(c->k, o, s[0], s[1], s[2]);
    tile_ts(c, s[0], in[0], TERN_ALU_IS_LT, -x->a, TERN_ALU_BYPASS, 0.0f);
    tile_ts(c, s[1], in[0], TERN_ALU_ADD, x->b, TERN_ALU_BYPASS, 0.0f);
    tern_kernel_select(c->k, o, s[0], s[1], o);
}

static void f_clip(compile_ctx *c, const ew_ctx *x, const tern_view *in, tern_view o, const tern_view *s)
{
    tern_lib_clip_tile(c->k, o, in[0], o, s[0], x->a, x->b); /* the convolutions' fused Clip emits the same */
}

static void f_prelu(compile_ctx *c, const ew_ctx *x, const tern_view *in, tern_view o, const tern_view *s)
{ /* x < 0 ? slope * x : x (a select: slope * min(x, 0) is NaN for x >= 0 and an infinite slope) */
    (void)x;
    tile_tt(c, s[0], in[0], in[1], TERN_ALU_MULT);
    tile_ts(c, s[1], in[0], TERN_ALU_IS_LT, 0.0f, TERN_ALU_BYPASS, 0.0f);
    tern_kernel_select(c->k, o, s[1], s[0], in[0]);
}

static void f_not(compile_ctx *c, const ew_ctx *x, const tern_view *in, tern_view o, const tern_view *s)
{
    (void)x;
    (void)s;
    tile_ts(c, o, in[0], TERN_ALU_IS_EQ, 0.0f, TERN_ALU_BYPASS, 0.0f);
}

static void f_isnan(compile_ctx *c, const ew_ctx *x, const tern_view *in, tern_view o, const tern_view *s)
{
    (void)x;
    (void)s;
    tile_tt(c, o, in[0], in[0], TERN_ALU_NOT_EQ);
}

static void f_isinf(compile_ctx *c, const ew_ctx *x, const tern_view *in, tern_view o, const tern_view *s)
{ /* (detect_positive && x == inf) || (detect_negative && x == -inf) */
    tile_ts(c, o, in[0], TERN_ALU_IS_EQ, INFINITY, TERN_ALU_MULT, x->a);
    tile_ts(c, s[0], in[0], TERN_ALU_IS_EQ, -INFINITY, TERN_ALU_MULT, x->b);
    tile_tt(c, o, o, s[0], TERN_ALU_ADD);
}

static void f_floor_ceil(compile_ctx *c, const ew_ctx *x, const tern_view *in, tern_view o, const tern_view *s)
{ /* t = x - fmod(x, 1) (truncation); floor = t - (x < t), ceil = t + (x > t). |x| >= 2^23 (inf included, where
   * fmod gives NaN) is an integer already and is taken whole; a zero result takes x's sign (ceil(-0.5) = -0). */
    tile_ts(c, s[0], in[0], TERN_ALU_MOD, 1.0f, TERN_ALU_BYPASS, 0.0f);
    tile_tt(c, s[0], in[0], s[0], TERN_ALU_SUBTRACT);
    tile_tt(c, s[1], in[0], s[0], x->flag ? TERN_ALU_IS_GT : TERN_ALU_IS_LT);
    tile_tt(c, o, s[0], s[1], x->flag ? TERN_ALU_ADD : TERN_ALU_SUBTRACT);
    zero_sign_of(c, o, in[0], s[0], s[1]);
    tile_act(c, s[0], in[0], TERN_ACT_ABS, 1.0f);
    tile_ts(c, s[0], s[0], TERN_ALU_IS_GE, 8388608.0f, TERN_ALU_BYPASS, 0.0f);
    tern_kernel_select(c->k, o, s[0], in[0], o);
}

static void f_round(compile_ctx *c, const ew_ctx *x, const tern_view *in, tern_view o, const tern_view *s)
{ /* half to even: (|x| + 2^23) - 2^23 rounds in fp32 (RNE) for |x| < 2^23; larger values are integers already */
    (void)x;
    tile_act(c, s[0], in[0], TERN_ACT_ABS, 1.0f);
    tile_ts(c, s[1], s[0], TERN_ALU_ADD, 8388608.0f, TERN_ALU_BYPASS, 0.0f);
    tile_ts(c, s[1], s[1], TERN_ALU_SUBTRACT, 8388608.0f, TERN_ALU_BYPASS, 0.0f);
    tile_ts(c, s[2], s[0], TERN_ALU_IS_GE, 8388608.0f, TERN_ALU_BYPASS, 0.0f);
    tern_kernel_select(c->k, s[1], s[2], s[0], s[1]);
    tile_act(c, s[2], in[0], TERN_ACT_SIGN, 1.0f);
    tile_tt(c, o, s[1], s[2], TERN_ALU_MULT);
    zero_sign_of(c, o, in[0], s[0], s[1]); /* round(-0.3) = -0; ScalarE's sign turns -0 into +0 */
}

/* sin(u) for any u: ScalarE's sin is valid on [-pi, pi], so u is reduced first: ((u + pi) mod 2pi) - pi. */
static void sin_any(compile_ctx *c, tern_view o, tern_view u, float shift, const tern_view *s)
{
    const float pi = 3.14159265358979f, two_pi = 6.28318530717959f;
    tile_ts(c, s[1], u, TERN_ALU_ADD, shift + pi, TERN_ALU_MOD, two_pi);
    tile_ts(c, s[2], s[1], TERN_ALU_IS_LT, 0.0f, TERN_ALU_MULT, two_pi); /* fmod keeps the sign of u */
          tile_tt(c, s[1], s[1], s[2], TERN_ALU_ADD);
    tile_ts(c, s[1], s[1], TERN_ALU_SUBTRACT, pi, TERN_ALU_MAX, -pi);
    tile_ts(c, s[1], s[1], TERN_ALU_MIN, pi, TERN_ALU_BYPASS, 0.0f);
    tile_act(c, o, s[1], TERN_ACT_SIN, 1.0f);
}

static void f_cos(compile_ctx *c, const ew_ctx *x, const tern_view *in, tern_view o, const tern_view *s)
{ /* the reduction's clamps to [-pi, pi] drop NaN (and fmod(inf) = NaN is clamped): put it back */
    (void)x;
    sin_any(c, o, in[0], 1.57079632679490f, s);
    tile_ts(c, s[0], in[0], TERN_ALU_MULT, 0.0f, TERN_ALU_BYPASS, 0.0f); /* 0 for finite x, NaN for inf, NaN */
    tile_tt(c, o, o, s[0], TERN_ALU_ADD);
}

static void f_tan(compile_ctx *c, const ew_ctx *x, const tern_view *in, tern_view o, const tern_view *s)
{
    (void)x;
    sin_any(c, o, in[0], 1.57079632679490f, s); /* cos */
    sin_any(c, s[0], in[0], 0.0f, s);          /* sin */
    tile_tt(c, o, s[0], o, TERN_ALU_DIVIDE);
    tile_ts(c, s[0], in[0], TERN_ALU_MULT, 0.0f, TERN_ALU_BYPASS, 0.0f); /* NaN for inf and NaN (clamped above) */
    tile_tt(c, o, o, s[0], TERN_ALU_ADD);
}

static void f_sinh_cosh(compile_ctx *c, const ew_ctx *x, const tern_view *in, tern_view o, const tern_view *s)
{ /* (e^x -+ e^-x) / 2 */
    tile_act(c, s[0], in[0], TERN_ACT_EXP, 1.0f);
    tile_act(c, s[1], in[0], TERN_ACT_EXP, -1.0f);
    tile_tt(c, o, s[0], s[1], x->flag ? TERN_ALU_ADD : TERN_ALU_SUBTRACT);
    tile_ts(c, o, o, TERN_ALU_MULT, 0.5f, TERN_ALU_BYPASS, 0.0f);
}

static void f_asinh(compile_ctx *c, const ew_ctx *x, const tern_view *in, tern_view o, const tern_view *s)
{ /* sign(x) * ln(|x| + sqrt(x^2 + 1)) */
    (void)x;
    tile_act(c, s[0], in[0], TERN_ACT_SQUARE, 1.0f);
    tile_ts(c, s[0], s[0], TERN_ALU_ADD, 1.0f, TERN_ALU_BYPASS, 0.0f);
    tile_act(c, s[0], s[0], TERN_ACT_SQRT, 1.0f);
    tile_act(c, s[1], in[0], TERN_ACT_ABS, 1.0f);
    tile_tt(c, s[0], s[0], s[1], TERN_ALU_ADD);
    tile_act(c, s[0], s[0], TERN_ACT_LOG, 1.0f);
    tile_act(c, s[1], in[0], TERN_ACT_SIGN, 1.0f);
    tile_tt(c, o, s[0], s[1], TERN_ALU_MULT);
    /* x^2 overflows from |x| ~ 2^64 on: for |x| >= 2^12, asinh(x) = sign(x) (ln|x| + ln 2) within 2^-26 */
    tile_act(c, s[0], in[0], TERN_ACT_ABS, 1.0f);
    tile_act(c, s[1], s[0], TERN_ACT_LOG, 1.0f);
    tile_ts(c, s[1], s[1], TERN_ALU_ADD, 0.693147182f, TERN_ALU_BYPASS, 0.0f);
    tile_act(c, s[2], in[0], TERN_ACT_SIGN, 1.0f);
    tile_tt(c, s[1], s[1], s[2], TERN_ALU_MULT);
    tile_ts(c, s[2], s[0], TERN_ALU_IS_GE, 4096.0f, TERN_ALU_BYPASS, 0.0f);
    tern_kernel_select(c->k, o, s[2], s[1], o);
}

static void f_acosh(compile_ctx *c, const ew_ctx *x, const tern_view *in, tern_view o, const tern_view *s)
{ /* ln(x + sqrt(x^2 - 1)) */
    (void)x;
    tile_act(c, s[0], in[0], TERN_ACT_SQUARE, 1.0f);
    tile_ts(c, s[0], s[0], TERN_ALU_SUBTRACT, 1.0f, TERN_ALU_BYPASS, 0.0f);
    tile_act(c, s[0], s[0], TERN_ACT_SQRT, 1.0f);
    tile_tt(c, s[0], s[0], in[0], TERN_ALU_ADD);
    tile_act(c, o, s[0], TERN_ACT_LOG, 1.0f);
    /* x^2 overflows from |x| ~ 2^64 on: for |x| >= 2^12, acosh(x) = ln x + ln 2 within 2^-26 (NaN for x < 0) */
    tile_act(c, s[0], in[0], TERN_ACT_LOG, 1.0f);
    tile_ts(c, s[0], s[0], TERN_ALU_ADD, 0.693147182f, TERN_ALU_BYPASS, 0.0f);
    tile_act(c, s[1], in[0], TERN_ACT_ABS, 1.0f);
    tile_ts(c, s[1], s[1], TERN_ALU_IS_GE, 4096.0f, TERN_ALU_BYPASS, 0.0f);
    tern_kernel_select(c->k, o, s[1], s[0], o);
}

static void f_atanh(compile_ctx *c, const ew_ctx *x, const tern_view *in, tern_view o, const tern_view *s)
{ /* 0.5 * ln((1 + x) / (1 - x)) */
    (void)x;
    tile_ts(c, s[0], in[0], TERN_ALU_ADD, 1.0f, TERN_ALU_BYPASS, 0.0f);
    tile_ts(c, s[1], in[0], TERN_ALU_MULT, -1.0f, TERN_ALU_ADD, 1.0f);
    tile_tt(c, s[0], s[0], s[1], TERN_ALU_DIVIDE);
    tile_act(c, s[0], s[0], TERN_ACT_LOG, 1.0f);
    tile_ts(c, o, s[0], TERN_ALU_MULT, 0.5f, TERN_ALU_BYPASS, 0.0f);
}

static void f_mod(compile_ctx *c, const ew_ctx *x, const tern_view *in, tern_view o, const tern_view *s)
{ /* fmod; for fmod = 0 (integers) the result takes the divisor's sign: r + b where r * b < 0 */
    tile_tt(c, o, in[0], in[1], TERN_ALU_MOD);
    if (!x->flag) {
        tile_tt(c, s[0], o, in[1], TERN_ALU_MULT);
        tile_ts(c, s[0], s[0], TERN_ALU_IS_LT, 0.0f, TERN_ALU_BYPASS, 0.0f);
        tile_tt(c, s[0], s[0], in[1], TERN_ALU_MULT);
        tile_tt(c, o, o, s[0], TERN_ALU_ADD);
    }
}

static void f_binop(compile_ctx *c, const ew_ctx *x, const tern_view *in, tern_view o, const tern_view *s)
{
    (void)s;
    tern_kernel_tensor_tensor(c->k, x->op == TERN_ALU_POW ? TERN_ENGINE_GPSIMD : VE, o, in[0], in[1], x->op);
}

/* ---- elementwise lowerings ---- */

int tile_need_float(compile_ctx *c, cc_value *x)
{
    if (x && !tern_dtype_is_float(x->dt)) {
        cc_fail(c, TERN_ERR_UNSUPPORTED, "%s on a non-float tensor (%s)", cc_node(c)->op, tern_dtype_name(x->dt));
        return 0;
    }
    return 1;
}

static int lower_activation(compile_ctx *c)
{
    const tern_op_id id = (tern_op_id)cc_node(c)->op_id;
    ew_ctx x = {cc_node(c), 0, 0, 1, 0, TERN_ALU_BYPASS};
    ew_fn fn = NULL;
    if (!tile_need_float(c, cc_in(c, 0)))
        return 1;
    if (id == TERN_GOP_LEAKY_RELU) {
        x.a = attr_f(c, "alpha", 0.01f);
        fn = f_leaky;
    } else if (id == TERN_GOP_ELU) {
        x.a = attr_f(c, "alpha", 1.0f);
        x.b = 1.0f;
        fn = f_elu;
    } else if (id == TERN_GOP_CELU) {
        x.a = attr_f(c, "alpha", 1.0f);
        x.b = 1.0f / x.a;
        fn = f_elu;
    } else if (id == TERN_GOP_SELU) {
        x.a = attr_f(c, "alpha", 1.67326319217681884765625f);
        x.g = attr_f(c, "gamma", 1.05070102214813232421875f);
        x.b = 1.0f;
        fn = f_elu;
    } else if (id == TERN_GOP_HARD_SIGMOID || id == TERN_GOP_HARD_SWISH) {
        x.flag = id == TERN_GOP_HARD_SWISH;
        x.a = x.flag ? 1.0f / 6.0f : attr_f(c, "alpha", 0.2f);
        x.b = x.flag ? 0.5f : attr_f(c, "beta", 0.5f);
        fn = f_hardsigmoid;
    } else if (id == TERN_GOP_SOFTSIGN) {
        fn = f_softsign;
    } else if (id == TERN_GOP_THRESHOLDED_RELU) {
        x.a = attr_f(c, "alpha", 1.0f);
        fn = f_thresholded;
    } else if (id == TERN_GOP_SHRINK) {
        x.a = attr_f(c, "lambd", 0.5f);
        x.b = attr_f(c, "bias", 0.0f);
        fn = f_shrink;
    } else if (id == TERN_GOP_FLOOR || id == TERN_GOP_CEIL) {
        x.flag = id == TERN_GOP_CEIL;
        fn = f_floor_ceil;
    } else if (id == TERN_GOP_ROUND) {
        fn = f_round;
    } else if (id == TERN_GOP_COS) {
        fn = f_cos;
    } else if (id == TERN_GOP_TAN) {
        fn = f_tan;
    } else if (id == TERN_GOP_SINH || id == TERN_GOP_COSH) {
        x.flag = id == TERN_GOP_COSH;
        fn = f_sinh_cosh;
    } else if (id == TERN_GOP_ASINH) {
        fn = f_asinh;
    } else if (id == TERN_GOP_ACOSH) {
        fn = f_acosh;
    } else if (id == TERN_GOP_ATANH) {
        fn = f_atanh;
    } else if (id == TERN_GOP_IS_NAN) {
        fn = f_isnan;
    } else if (id == TERN_GOP_IS_INF) {
        x.a = (float)tern_graph_attr_int(cc_node(c), "detect_positive", 1);
        x.b = (float)tern_graph_attr_int(cc_node(c), "detect_negative", 1);
        fn = f_isinf;
    }
    if (fn)
        unary_op(c, fn, &x);
    return 1;
}

static int lower_not(compile_ctx *c)
{
    ew_ctx x = {cc_node(c), 0, 0, 1, 0, TERN_ALU_BYPASS};
    unary_op(c, f_not, &x);
    return 1;
}

/* A compile-time scalar from input k (or the attribute of older opsets); *have = 0 when absent. */
int tile_const_scalar_in(compile_ctx *c, int k, const char *attr, float *v, int *have)
{
    *have = 0;
    cc_value *x = cc_in(c, k);
    if (cc_in_id(c, k) >= 0) {
        if (!x || !x->is_const_scalar) {
            cc_fail(c, TERN_ERR_UNSUPPORTED, "input %d of %s must be a compile-time scalar", k, cc_node(c)->op);
            return 0;
        }
        *v = (float)x->const_scalar;
        *have = 1;
    } else if (attr && tern_graph_node_attr(cc_node(c), attr)) {
        *v = tern_graph_attr_float(cc_node(c), attr, 0.0f);
        *have = 1;
    }
    return 1;
}

static int lower_clip(compile_ctx *c)
{
    ew_ctx x = {cc_node(c), -INFINITY, INFINITY, 1, 0, TERN_ALU_BYPASS};
    int h;
    float v;
    if (!tile_const_scalar_in(c, 1, "min", &v, &h))
        return 1;
    if (h)
        x.a = v;
    if (!tile_const_scalar_in(c, 2, "max", &v, &h))
        return 1;
    if (h)
        x.b = v;
    unary_op(c, f_clip, &x);
    return 1;
}

static int lower_prelu(compile_ctx *c)
{
    ew_ctx x = {cc_node(c), 0, 0, 1, 0, TERN_ALU_BYPASS};
    if (!tile_need_float(c, cc_in(c, 0)))
        return 1;
    binary_op(c, f_prelu, &x, 0);
    return 1;
}

static int lower_mod(compile_ctx *c)
{
    ew_ctx x = {cc_node(c), 0, 0, 1, (int)tern_graph_attr_int(cc_node(c), "fmod", 0), TERN_ALU_BYPASS};
    binary_op(c, f_mod, &x, 0);
    return 1;
}

static int lower_bitshift(compile_ctx *c)
{
    const char *dir = tern_graph_attr_string(cc_node(c), "direction", "");
    ew_ctx x = {cc_node(c), 0, 0, 1, 0, !strcmp(dir, "LEFT") ? TERN_ALU_SHIFT_LEFT : TERN_ALU_SHIFT_RIGHT};
    if (strcmp(dir, "LEFT") && strcmp(dir, "RIGHT")) {
        cc_fail(c, TERN_ERR_INVALID, "BitShift direction '%s' (LEFT or RIGHT)", dir);
        return 1;
    }
    binary_op(c, f_binop, &x, 1);
    return 1;
}

static int lower_pow_tensor(compile_ctx *c)
{
    ew_ctx x = {cc_node(c), 0, 0, 1, 0, TERN_ALU_POW};
    binary_op(c, f_binop, &x, 0);
    return 1;
}

/* Sum, Mean, Max, Min over any number of broadcast inputs. */
static int lower_nary(compile_ctx *c)
{
    const tern_graph_node *n = cc_node(c);
    tern_alu_op op = n->op_id == TERN_GOP_MAX ? TERN_ALU_MAX : n->op_id == TERN_GOP_MIN ? TERN_ALU_MIN : TERN_ALU_ADD;
    cc_value *y = cc_out(c, 0, cc_out_dtype(c, 0));
    if (!y)
        return 1;
    int m = 0;
    for (int k = 0; k < n->n_inputs && cc_ok(c); k++) {
        cc_value *x = cc_in(c, k), t;
        if (!x)
            continue;
        cc_value *b = tile_bcast(c, x, y, &t);
        if (!b)
            return 1;
        uint64_t N = y->numel;
        if (m == 0)
            cc_copy(c, cc_view2d(c, y, 0, 1, N, N), cc_view2d(c, b, 0, 1, N, N));
        else
            tern_lib_binary(c->k, cc_view2d(c, y, 0, 1, N, N), cc_view2d(c, y, 0, 1, N, N),
                            cc_view2d(c, b, 0, 1, N, N), op);
        tile_bcast_free(c, &t, b);
        m++;
    }
    if (n->op_id == TERN_GOP_MEAN && m > 1)
        tern_lib_scalar(c->k, cc_view2d(c, y, 0, 1, y->numel, y->numel), cc_view2d(c, y, 0, 1, y->numel, y->numel),
                        TERN_ALU_MULT, 1.0f / (float)m);
    return 1;
}

/* ---- casts ---- */

static void f_trunc(compile_ctx *c, const ew_ctx *x, const tern_view *in, tern_view o, const tern_view *s)
{ /* toward zero: x - fmod(x, 1) */
    (void)x;
    tile_ts(c, s[0], in[0], TERN_ALU_MOD, 1.0f, TERN_ALU_BYPASS, 0.0f);
    tile_tt(c, o, in[0], s[0], TERN_ALU_SUBTRACT);
}

/* Cast between text (ONNX string) and float32: GpSimd's text_parse / text_format on SBUF tiles of up to 128 x
 * TEXT_TILE elements, each element a TERN_EXE_TEXT_CELL-byte cell on the text side. */
enum { TEXT_TILE = 32 };
static void lower_cast_text(compile_ctx *c, cc_value *x, cc_value *y, int parse)
{
    const uint64_t W = TERN_EXE_TEXT_CELL, n = parse ? y->numel : x->numel;
    uint64_t w = n < TEXT_TILE ? n : TEXT_TILE, R = w ? n / w : 0, rem = w ? n % w : 0;
    uint64_t nblocks = (R + PARTS - 1) / PARTS + (rem ? 1 : 0);
    for (uint64_t blk = 0; blk < nblocks && cc_ok(c); blk++) {
        uint64_t r0 = blk * PARTS < R ? blk * PARTS : R, off;
        uint32_t p, e;
        if (r0 >= R) { /* the ragged tail: one row */
            p = 1, e = (uint32_t)rem, off = R * w;
        } else {
            p = (uint32_t)(R - r0 < PARTS ? R - r0 : PARTS), e = (uint32_t)w, off = r0 * w;
        }
        tern_view txt = tern_kernel_sbuf(c->k, TERN_DTYPE_UINT8, p, (uint32_t)(e * W), "text");
        tern_view num = tern_kernel_sbuf(c->k, TERN_DTYPE_FP32, p, e, "text_num");
        if (parse) {
            tern_kernel_load(c->k, txt, cc_view2d(c, x, off * W, p, e * W, e * W));
            tern_kernel_text_parse(c->k, num, txt, (unsigned)W);
            tern_kernel_store(c->k, cc_view2d(c, y, off, p, e, e), num);
        } else {
            tern_kernel_load(c->k, num, cc_view2d(c, x, off, p, e, e));
            tern_kernel_text_format(c->k, txt, num, (unsigned)W);
            tern_kernel_store(c->k, cc_view2d(c, y, off * W, p, e * W, e * W), txt);
        }
        tern_kernel_release(c->k, txt);
        tern_kernel_release(c->k, num);
    }
}

/* Cast and CastLike: a DMA converts between device formats (floats round to nearest even); float to integer
 * truncates toward zero first, as ONNX (C casts) does. Text: lower_cast_text. */
static int lower_cast_any(compile_ctx *c)
{
    cc_value *x = cc_in(c, 0);
    cc_value *y = cc_out(c, 0, cc_out_dtype(c, 0));
    if (!x || !y)
        return 1;
    int text_in = tern_graph_value_at(c->g, cc_in_id(c, 0))->type == TERN_ELEM_STRING;
    int text_out = tern_graph_value_at(c->g, cc_out_id(c, 0))->type == TERN_ELEM_STRING;
    if (text_in != text_out) {
        lower_cast_text(c, x, y, text_in);
        return 1;
    }
    if (tern_dtype_is_float(x->dt) && !tern_dtype_is_float(y->dt)) {
        ew_ctx e = {cc_node(c), 0, 0, 1, 0, TERN_ALU_BYPASS};
        tile_ew_apply(c, &x, 1, y, f_trunc, &e, 0);
        return 1;
    }
    cc_copy(c, cc_view2d(c, y, 0, 1, y->numel, y->numel), cc_view2d(c, x, 0, 1, x->numel, x->numel));
    return 1;
}

/* ---- inverse trigonometry ---- */

/* atan(u) for any u: z = min(|u|, 1/|u|) in [0, 1], atan(z) = z * P(z^2) (Abramowitz & Stegun 4.4.49, absolute
 * error below 2e-8), pi/2 - atan(z) when |u| > 1, and u's sign. s[0..2] are used; o may not alias u. */
static void atan_any(compile_ctx *c, tern_view o, tern_view u, const tern_view *s)
{
    static const float a[8] = {-0.3333314528f, 0.1999355085f, -0.1420889944f, 0.1065626393f,
                               -0.0752896400f, 0.0429096138f, -0.0161657367f, 0.0028662257f};
    tile_act(c, s[0], u, TERN_ACT_ABS, 1.0f);
    tile_ts(c, s[1], s[0], TERN_ALU_IS_GT, 1.0f, TERN_ALU_BYPASS, 0.0f); /* big */
          tern_kernel_reciprocal(c->k, s[2], s[0]);
    tern_kernel_select(c->k, s[0], s[1], s[2], s[0]);                 /* z */
    tile_act(c, s[2], s[0], TERN_ACT_SQUARE, 1.0f);                        /* t = z^2 */
    tile_ts(c, o, s[2], TERN_ALU_MULT, a[7], TERN_ALU_BYPASS, 0.0f);
    for (int i = 6; i >= 0; i--)
        tern_kernel_scalar_tensor_tensor(c->k, o, o, TERN_ALU_ADD, a[i], TERN_ALU_MULT, s[2]);
    tern_kernel_scalar_tensor_tensor(c->k, o, o, TERN_ALU_ADD, 1.0f, TERN_ALU_MULT, s[0]); /* atan(z) */
    tile_ts(c, s[2], o, TERN_ALU_MULT, -1.0f, TERN_ALU_ADD, 1.57079632679490f);
    tern_kernel_select(c->k, o, s[1], s[2], o);
    tile_act(c, s[2], u, TERN_ACT_SIGN, 1.0f);
    tile_tt(c, o, o, s[2], TERN_ALU_MULT);
}

static void f_atan(compile_ctx *c, const ew_ctx *x, const tern_view *in, tern_view o, const tern_view *s)
{
    (void)x;
    atan_any(c, o, in[0], s);
}

static void f_asin_acos(compile_ctx *c, const ew_ctx *x, const tern_view *in, tern_view o, const tern_view *s)
{ /* asin(v) = atan(v / sqrt(1 - v^2)); acos = pi/2 - asin */
    tile_act(c, o, in[0], TERN_ACT_SQUARE, 1.0f);
    tile_ts(c, o, o, TERN_ALU_MULT, -1.0f, TERN_ALU_ADD, 1.0f);
    tile_act(c, o, o, TERN_ACT_SQRT, 1.0f);
    tile_tt(c, o, in[0], o, TERN_ALU_DIVIDE);
    tern_kernel_tensor_copy(c->k, VE, in[0], o); /* the input tile_new is free now: atan reads from it */
    atan_any(c, o, in[0], s);
    if (x->flag)
        tile_ts(c, o, o, TERN_ALU_MULT, -1.0f, TERN_ALU_ADD, 1.57079632679490f);
}

static int lower_atrig(compile_ctx *c)
{
    const tern_op_id id = (tern_op_id)cc_node(c)->op_id;
    ew_ctx x = {cc_node(c), 0, 0, 1, id == TERN_GOP_ACOS, TERN_ALU_BYPASS};
    if (!tile_need_float(c, cc_in(c, 0)))
        return 1;
    unary_op(c, id == TERN_GOP_ATAN ? f_atan : f_asin_acos, &x);
    return 1;
}

/* ---- integer division ---- */

static void f_div(compile_ctx *c, const ew_ctx *x, const tern_view *in, tern_view o, const tern_view *s)
{ /* a / b in fp32; integer results truncate toward zero (C, numpy's int division for ONNX) */
    tile_tt(c, x->flag ? s[1] : o, in[0], in[1], TERN_ALU_DIVIDE);
    if (x->flag) {
        tile_ts(c, s[0], s[1], TERN_ALU_MOD, 1.0f, TERN_ALU_BYPASS, 0.0f);
        tile_tt(c, o, s[1], s[0], TERN_ALU_SUBTRACT);
    }
}

static int lower_div(compile_ctx *c)
{
    ew_ctx x = {cc_node(c), 0, 0, 1, !tern_dtype_is_float(cc_out_dtype(c, 0)), TERN_ALU_BYPASS};
    binary_op(c, f_div, &x, 0);
    return 1;
}

/* ---- the fast special cases (tried before this file's general rules; each applies function says why it
 * declines, and a node without input 0 is taken so that the rule reports it) ---- */

static int alu_of(tern_op_id id, tern_alu_op *out)
{
    switch (id) {
    case TERN_GOP_ADD: *out = TERN_ALU_ADD; return 1;
    case TERN_GOP_SUB: *out = TERN_ALU_SUBTRACT; return 1;
    case TERN_GOP_MUL: *out = TERN_ALU_MULT; return 1;
    case TERN_GOP_DIV: *out = TERN_ALU_DIVIDE; return 1;
    case TERN_GOP_MAX: *out = TERN_ALU_MAX; return 1;
    case TERN_GOP_MIN: *out = TERN_ALU_MIN; return 1;
    case TERN_GOP_EQUAL: *out = TERN_ALU_IS_EQ; return 1;
    case TERN_GOP_LESS: *out = TERN_ALU_IS_LT; return 1;
    case TERN_GOP_GREATER: *out = TERN_ALU_IS_GT; return 1;
    case TERN_GOP_LESS_OR_EQUAL: *out = TERN_ALU_IS_LE; return 1;
    case TERN_GOP_GREATER_OR_EQUAL: *out = TERN_ALU_IS_GE; return 1;
    case TERN_GOP_AND: *out = TERN_ALU_LOGICAL_AND; return 1;
    case TERN_GOP_OR: *out = TERN_ALU_LOGICAL_OR; return 1;
    case TERN_GOP_XOR: *out = TERN_ALU_LOGICAL_XOR; return 1;
    default: return 0;
    }
}

/* The shape rule of a trailing column (below), on dims alone: cdims (right-aligned) equal ydims up to some axis k
 * and are 1 from k on, with k > 0; *inner = the product of ydims from k on. Shared with fuse_elementwise.c. */
int cc_trailing_inner(int yrank, const int64_t *ydims, int crank, const int64_t *cdims, uint64_t *inner)
{
    int k = yrank;
    while (k > 0) {
        int xd = k - 1 - (yrank - crank);
        if (xd >= 0 && cdims[xd] != 1)
            break;
        k--;
    }
    if (k == 0)
        return 0;
    uint64_t in = 1;
    for (int d = 0; d < yrank; d++) {
        int xd = d - (yrank - crank);
        int64_t cd = xd < 0 ? 1 : cdims[xd];
        if (d < k && cd != ydims[d])
            return 0;
        if (d >= k)
            in *= (uint64_t)ydims[d];
    }
    *inner = in;
    return 1;
}

/* Whether col broadcasts against full (shaped like y) along trailing axes only: right-aligned, col's dims equal
 * y's up to some axis k and are 1 from k on ([.., S, 1] against [.., S, H]; [N, C, 1, 1] against [N, C, H, W]).
 * Then y is [rows, inner] with inner = y's dims from k on, and col holds one value per row, contiguous. An
 * all-ones col (k = 0: one value for everything) is left to the other rules. */
static int trailing_col(const cc_value *full, const cc_value *col, const cc_value *y, uint64_t *rows, uint64_t *inner)
{
    if (!cc_same_shape(full, y) || y->rank < 1 || col->rank > y->rank || y->numel == 0 || col->numel >= y->numel)
        return 0;
    uint64_t in;
    if (!cc_trailing_inner(y->rank, y->dims, col->rank, col->dims, &in))
        return 0;
    *inner = in;
    *rows = y->numel / in;
    return *rows == col->numel;
}

static int lower_binary(compile_ctx *c)
{
    const tern_graph_node *n = cc_node(c);
    tern_alu_op op = TERN_ALU_ADD;
    alu_of((tern_op_id)n->op_id, &op);
    cc_value *a = cc_in(c, 0), *b = cc_in(c, 1);
    cc_value *y = cc_out(c, 0, cc_out_dtype(c, 0));
    if (!a || !b || !y)
        return 1;
    int commutative = op == TERN_ALU_ADD || op == TERN_ALU_MULT || op == TERN_ALU_MAX || op == TERN_ALU_MIN ||
                      op == TERN_ALU_IS_EQ;
    if (a->is_const_scalar && commutative && !b->is_const_scalar) {
        cc_value *t = a;
        a = b;
        b = t;
    }
    cc_value ta, tb;
    if (b->is_const_scalar && cc_same_shape(a, y)) {
        tern_lib_scalar(c->k, tile_flat2d(c, y), tile_flat2d(c, a), op, (float)b->const_scalar);
        return 1;
    }
    /* x + bias over the last axis: the bias row broadcast on chip. */
    if (op == TERN_ALU_ADD && cc_same_shape(a, y) && y->rank > 0 && b->numel == (uint64_t)y->dims[y->rank - 1] &&
        b->rank > 0 && b->dims[b->rank - 1] == y->dims[y->rank - 1]) { /* not [1, C, 1, 1] with C == W */
        uint64_t r, cl;
        tile_rows_cols(y, &r, &cl);
        tern_lib_bias_act(c->k, tile_flat2d(c, y), tile_flat2d(c, a), cc_view2d(c, b, 0, 1, cl, cl), TERN_ACT_COPY);
        return 1;
    }
    /* x op s with s one run-time element (the optimizer's per-step learning rate, bias corrections and decay,
     * the clipping scale: a weight-sized operand times a [1] input): s read as tensor_scalar's per-partition
     * column through a zero-step view, instead of a weight-sized broadcast copy of s in HBM that the binary op
     * then streams back (a fill pass and a second operand pass over every weight). The same VectorE operation
     * per element as the tensor path, as for the trailing column below (float add, subtract, mult, divide). */
    int arith = op == TERN_ALU_ADD || op == TERN_ALU_SUBTRACT || op == TERN_ALU_MULT || op == TERN_ALU_DIVIDE;
    if (arith && tern_dtype_is_float(a->dt) && tern_dtype_is_float(b->dt) && tern_dtype_is_float(y->dt) &&
        y->numel >= 2 && ((b->numel == 1 && cc_same_shape(a, y)) || (a->numel == 1 && cc_same_shape(b, y)))) {
        int rev = b->numel != 1; /* s op x */
        cc_value *full = rev ? b : a, *s1 = rev ? a : b;
        uint64_t r, cl;
        tile_rows_cols(y, &r, &cl);
        if (r < PARTS && y->numel % PARTS == 0) { /* rows on every partition */
            r = PARTS;
            cl = y->numel / PARTS;
        }
        tern_lib_binary_col(c->k, cc_view2d(c, y, 0, r, cl, cl), cc_view2d(c, full, 0, r, cl, cl),
                            cc_view2d(c, s1, 0, r, 1, 0), op, rev && !commutative);
        return 1;
    }
    /* x op s[row], s broadcast along trailing size-1 axes (RMSNorm's [.., S, 1], squeeze-excitation's
     * [N, C, 1, 1]): rows on partitions and s as tensor_scalar's per-partition column, instead of a broadcast
     * copy (one DMA element per output element). Max/min keep the tensor path (its NaN fix-up). */
    uint64_t cr, ci;
    if (op != TERN_ALU_MAX && op != TERN_ALU_MIN) {
        int rev = !trailing_col(a, b, y, &cr, &ci);
        if (!rev || trailing_col(b, a, y, &cr, &ci)) {
            cc_value *full = rev ? b : a, *col = rev ? a : b;
            tern_lib_binary_col(c->k, cc_view2d(c, y, 0, cr, ci, ci), cc_view2d(c, full, 0, cr, ci, ci),
                                cc_view2d(c, col, 0, cr, 1, 1), op, rev && !commutative);
            return 1;
        }
    }
    cc_value *ba = tile_broadcast_to(c, a, y, &ta);
    cc_value *bb = ba ? tile_broadcast_to(c, b, y, &tb) : NULL;
    if (ba && bb)
        tern_lib_binary(c->k, tile_flat2d(c, y), tile_flat2d(c, ba), tile_flat2d(c, bb), op);
    if (ba)
        tile_release_tmp(c, &ta, ba);
    if (bb)
        tile_release_tmp(c, &tb, bb);
    return 1;
}

static int act_of(const tern_graph_node *n, const tern_graph *g, tern_act_func *f, float *scale)
{
    (void)g;
    *scale = 1.0f;
    switch ((tern_op_id)n->op_id) {
    case TERN_GOP_RELU: *f = TERN_ACT_RELU; return 1;
    case TERN_GOP_TANH: *f = TERN_ACT_TANH; return 1;
    case TERN_GOP_SIGMOID: *f = TERN_ACT_SIGMOID; return 1;
    case TERN_GOP_EXP: *f = TERN_ACT_EXP; return 1;
    case TERN_GOP_LOG: *f = TERN_ACT_LOG; return 1;
    case TERN_GOP_SQRT: *f = TERN_ACT_SQRT; return 1;
    case TERN_GOP_ERF: *f = TERN_ACT_ERF; return 1;
    case TERN_GOP_ABS: *f = TERN_ACT_ABS; return 1;
    case TERN_GOP_RECIPROCAL: *f = TERN_ACT_RECIPROCAL; return 1;
    case TERN_GOP_SOFTPLUS: *f = TERN_ACT_SOFTPLUS; return 1;
    case TERN_GOP_SIN: *f = TERN_ACT_SIN; return 1;
    case TERN_GOP_SIGN: *f = TERN_ACT_SIGN; return 1;
    case TERN_GOP_IDENTITY:
    case TERN_GOP_DROPOUT: *f = TERN_ACT_COPY; return 1;
    case TERN_GOP_NEG:
        *f = TERN_ACT_COPY;
        *scale = -1.0f;
        return 1;
    case TERN_GOP_GELU: {
        const char *ap = tern_graph_attr_string(n, "approximate", "none");
        *f = !strcmp(ap, "tanh") ? TERN_ACT_GELU_TANH : TERN_ACT_GELU;
        return 1;
    }
    default: return 0;
    }
}

static int lower_unary(compile_ctx *c)
{
    tern_act_func f = TERN_ACT_COPY;
    float scale = 1.0f;
    act_of(cc_node(c), c->g, &f, &scale);
    cc_value *x = cc_in(c, 0);
    cc_value *y = cc_out(c, 0, cc_out_dtype(c, 0));
    if (!x || !y)
        return 1;
    if (!tern_dtype_is_float(x->dt) || !tern_dtype_is_float(y->dt)) {
        cc_fail(c, TERN_ERR_UNSUPPORTED, "%s on a non-float tensor (%s)", cc_node(c)->op, tern_dtype_name(x->dt));
        return 1;
    }
    /* ScalarE's affine step adds a +0 bias, so -0 comes out +0: Neg(+0) must be -0 and 1/-0 = -inf, so these two
     * run on VectorE, exactly */
    if (cc_node(c)->op_id == TERN_GOP_NEG)
        tern_lib_scalar(c->k, tile_flat2d(c, y), tile_flat2d(c, x), TERN_ALU_MULT, -1.0f);
    else if (cc_node(c)->op_id == TERN_GOP_RECIPROCAL)
        tern_lib_reciprocal(c->k, tile_flat2d(c, y), tile_flat2d(c, x));
    else
        tern_lib_unary(c->k, tile_flat2d(c, y), tile_flat2d(c, x), f, scale);
    return 1;
}

static int lower_pow(compile_ctx *c)
{
    cc_value *x = cc_in(c, 0), *e = cc_in(c, 1);
    if (!x || !e)
        return 1;
    if (!e->is_const_scalar) {
        cc_fail(c, TERN_ERR_UNSUPPORTED, "Pow with a non-constant exponent");
        return 1;
    }
    double p = e->const_scalar;
    cc_value *y = cc_out(c, 0, TERN_DTYPE_FP32);
    if (!y)
        return 1;
    if (p == 2.0)
        tern_lib_unary(c->k, tile_flat2d(c, y), tile_flat2d(c, x), TERN_ACT_SQUARE, 1.0f);
    else if (p == 0.5)
        tern_lib_unary(c->k, tile_flat2d(c, y), tile_flat2d(c, x), TERN_ACT_SQRT, 1.0f);
    else if (p == 1.0)
        tern_lib_unary(c->k, tile_flat2d(c, y), tile_flat2d(c, x), TERN_ACT_COPY, 1.0f);
    else if (p == -1.0)
        tern_lib_unary(c->k, tile_flat2d(c, y), tile_flat2d(c, x), TERN_ACT_RECIPROCAL, 1.0f);
    else if (p == 3.0) {
        tern_lib_unary(c->k, tile_flat2d(c, y), tile_flat2d(c, x), TERN_ACT_SQUARE, 1.0f);
        tern_lib_binary(c->k, tile_flat2d(c, y), tile_flat2d(c, y), tile_flat2d(c, x), TERN_ALU_MULT);
    } else
        cc_fail(c, TERN_ERR_UNSUPPORTED, "Pow with exponent %g (supported: 2, 0.5, 1, -1, 3)", p);
    return 1;
}

static int lower_cast(compile_ctx *c)
{
    cc_value *x = cc_in(c, 0);
    tern_dtype dt = cc_out_dtype(c, 0);
    if (!x)
        return 1;
    if (tern_dtype_is_float(x->dt) && !tern_dtype_is_float(dt)) {
        cc_fail(c, TERN_ERR_UNSUPPORTED, "Cast from %s to an integer type (ONNX truncates; the DMA rounds)",
                tern_dtype_name(x->dt));
        return 1;
    }
    cc_value *y = cc_out(c, 0, dt);
    if (y)
        cc_copy(c, cc_view2d(c, y, 0, 1, y->numel, y->numel), cc_view2d(c, x, 0, 1, x->numel, x->numel));
    return 1;
}

/* Dropout is the identity at inference; training mode (a random mask) is not built. Its mask output is all true
 * at inference: exporters emit it on every block (Swin-T) though nothing reads it, so an unread mask is left
 * unplaced, and a read one (or a graph output) is filled with ones (bool is stored as uint8). */
static int lower_dropout(compile_ctx *c)
{
    const tern_graph_node *n = cc_node(c);
    cc_value *mode = cc_in(c, 2), *ratio = cc_in(c, 1);
    int training = mode && mode->host && tern_host_tensor_get(mode->host, 0) != 0;
    double r = ratio && ratio->host ? tern_host_tensor_get(ratio->host, 0) : tern_graph_attr_float(n, "ratio", 0.5f);
    if (training && r > 0) {
        cc_fail(c, TERN_ERR_UNSUPPORTED, "Dropout in training mode (ratio %g): a random mask is not built", r);
        return 1;
    }
    if (mode && !mode->host) {
        cc_fail(c, TERN_ERR_UNSUPPORTED, "Dropout's training_mode is computed at run time; only a constant "
                "(false: inference) is supported");
        return 1;
    }
    int mid = cc_out_id(c, 1);
    if (mid >= 0 && c->v[mid].last_use >= 0) {
        cc_value *m = cc_out(c, 1, cc_out_dtype(c, 1));
        const uint64_t W = 2048, P = c->cfg.partitions; /* one SBUF tile of ones, stored over the mask row block by row block */
        uint64_t total = m ? m->numel : 0, cols = total < W ? total : W, rows = cols ? total / cols : 0;
        if (m && total) {
            tern_view t = tern_kernel_sbuf(c->k, m->dt, (uint32_t)(rows < P ? rows : P), (uint32_t)cols, "ones");
            tern_kernel_memset(c->k, TERN_ENGINE_VECTOR, t, 1.0f);
            for (uint64_t r0 = 0; r0 < rows && cc_ok(c); r0 += P) {
                uint32_t p = (uint32_t)(rows - r0 < P ? rows - r0 : P);
                tern_kernel_store(c->k, cc_view2d(c, m, r0 * cols, p, cols, cols),
                                  tern_view_block(c->k, t, 0, p, 0, (uint32_t)cols));
            }
            if (total % cols)
                tern_kernel_store(c->k, cc_view2d(c, m, rows * cols, 1, total % cols, total % cols),
                                  tern_view_block(c->k, t, 0, 1, 0, (uint32_t)(total % cols)));
            tern_kernel_release(c->k, t);
        }
    }
    cc_alias(c, 0, 0); /* the output is the input (lower_layout.c's view.alias) */
    return 1;
}

static int lower_where(compile_ctx *c)
{
    cc_value *cond = cc_in(c, 0), *a = cc_in(c, 1), *b = cc_in(c, 2);
    cc_value *y = cc_out(c, 0, TERN_DTYPE_FP32);
    if (!cond || !a || !b || !y)
        return 1;
    cc_value tc, ta, tb;
    cc_value *bc = tile_broadcast_to(c, cond, y, &tc);
    cc_value *ba = bc ? tile_broadcast_to(c, a, y, &ta) : NULL;
    cc_value *bb = ba ? tile_broadcast_to(c, b, y, &tb) : NULL;
    if (bc && ba && bb) {
        uint64_t rows, cols;
        tile_rows_cols(y, &rows, &cols);
        uint64_t chunk = cols > 4096 ? 4096 : cols, P = c->cfg.partitions;
        for (uint64_t r0 = 0; r0 < rows && cc_ok(c); r0 += P) {
            uint32_t p = (uint32_t)(rows - r0 < P ? rows - r0 : P);
            for (uint64_t c0 = 0; c0 < cols && cc_ok(c); c0 += chunk) {
                uint32_t w = (uint32_t)(cols - c0 < chunk ? cols - c0 : chunk);
                tern_view tcnd = tern_kernel_sbuf(c->k, TERN_DTYPE_FP32, p, w, "where_c");
                tern_view t1 = tern_kernel_sbuf(c->k, TERN_DTYPE_FP32, p, w, "where_a");
                tern_view t2 = tern_kernel_sbuf(c->k, TERN_DTYPE_FP32, p, w, "where_b");
                tern_kernel_load(c->k, tcnd, cc_view2d(c, bc, r0 * cols + c0, p, w, cols));
                tern_kernel_load(c->k, t1, cc_view2d(c, ba, r0 * cols + c0, p, w, cols));
                tern_kernel_load(c->k, t2, cc_view2d(c, bb, r0 * cols + c0, p, w, cols));
                tern_kernel_select(c->k, t1, tcnd, t1, t2);
                tern_kernel_store(c->k, cc_view2d(c, y, r0 * cols + c0, p, w, cols), t1);
                tern_kernel_release(c->k, tcnd);
                tern_kernel_release(c->k, t1);
                tern_kernel_release(c->k, t2);
            }
        }
    }
    if (bc)
        tile_release_tmp(c, &tc, bc);
    if (ba)
        tile_release_tmp(c, &ta, ba);
    if (bb)
        tile_release_tmp(c, &tb, bb);
    return 1;
}

static int pow_const_applies(compile_ctx *c, char *why, size_t len)
{
    cc_value *x = cc_in(c, 0), *b = cc_in(c, 1);
    if (!x)
        return 1;
    if (!(b && b->is_const_scalar &&
          (b->const_scalar == 2.0 || b->const_scalar == 0.5 || b->const_scalar == 1.0 || b->const_scalar == -1.0 ||
           b->const_scalar == 3.0))) {
        snprintf(why, len, "the exponent is not a constant 2, 0.5, 1, -1 or 3");
        return 0;
    }
    return 1;
}

static int two_inputs_applies(compile_ctx *c, char *why, size_t len)
{
    if (!cc_in(c, 0))
        return 1;
    if (cc_node(c)->n_inputs != 2) {
        snprintf(why, len, "%d inputs, not 2", cc_node(c)->n_inputs);
        return 0;
    }
    return 1;
}

static int cast_plain_applies(compile_ctx *c, char *why, size_t len)
{
    cc_value *x = cc_in(c, 0);
    if (!x)
        return 1;
    if (tern_dtype_is_float(x->dt) && !tern_dtype_is_float(cc_out_dtype(c, 0))) {
        snprintf(why, len, "a float to integer cast");
        return 0;
    }
    if (tern_graph_value_at(c->g, cc_in_id(c, 0))->type == TERN_ELEM_STRING ||
        tern_graph_value_at(c->g, cc_out_id(c, 0))->type == TERN_ELEM_STRING) {
        snprintf(why, len, "a cast from or to text");
        return 0;
    }
    return 1;
}

static int float_div_applies(compile_ctx *c, char *why, size_t len)
{
    if (!cc_in(c, 0))
        return 1;
    if (!tern_dtype_is_float(cc_out_dtype(c, 0))) {
        snprintf(why, len, "an integer division");
        return 0;
    }
    return 1;
}

static const cc_rule elementwise_rules[] = {
    {TERN_GOP_ADD, "binary.alu", NULL, lower_binary},
    {TERN_GOP_SUB, "binary.alu", NULL, lower_binary},
    {TERN_GOP_MUL, "binary.alu", NULL, lower_binary},
    {TERN_GOP_DIV, "binary.alu", float_div_applies, lower_binary},
    {TERN_GOP_MAX, "binary.alu", two_inputs_applies, lower_binary},
    {TERN_GOP_MIN, "binary.alu", two_inputs_applies, lower_binary},
    {TERN_GOP_EQUAL, "binary.alu", NULL, lower_binary},
    {TERN_GOP_LESS, "binary.alu", NULL, lower_binary},
    {TERN_GOP_GREATER, "binary.alu", NULL, lower_binary},
    {TERN_GOP_LESS_OR_EQUAL, "binary.alu", NULL, lower_binary},
    {TERN_GOP_GREATER_OR_EQUAL, "binary.alu", NULL, lower_binary},
    {TERN_GOP_AND, "binary.alu", NULL, lower_binary},
    {TERN_GOP_OR, "binary.alu", NULL, lower_binary},
    {TERN_GOP_XOR, "binary.alu", NULL, lower_binary},
    {TERN_GOP_RELU, "unary.act", NULL, lower_unary},
    {TERN_GOP_TANH, "unary.act", NULL, lower_unary},
    {TERN_GOP_SIGMOID, "unary.act", NULL, lower_unary},
    {TERN_GOP_EXP, "unary.act", NULL, lower_unary},
    {TERN_GOP_LOG, "unary.act", NULL, lower_unary},
    {TERN_GOP_SQRT, "unary.act", NULL, lower_unary},
    {TERN_GOP_ERF, "unary.act", NULL, lower_unary},
    {TERN_GOP_ABS, "unary.act", NULL, lower_unary},
    {TERN_GOP_RECIPROCAL, "unary.act", NULL, lower_unary},
    {TERN_GOP_SOFTPLUS, "unary.act", NULL, lower_unary},
    {TERN_GOP_SIN, "unary.act", NULL, lower_unary},
    {TERN_GOP_SIGN, "unary.act", NULL, lower_unary},
    {TERN_GOP_NEG, "unary.act", NULL, lower_unary},
    {TERN_GOP_GELU, "unary.act", NULL, lower_unary},
    {TERN_GOP_POW, "pow.const", pow_const_applies, lower_pow},
    {TERN_GOP_CAST, "cast.convert", cast_plain_applies, lower_cast},
    {TERN_GOP_DROPOUT, "dropout", NULL, lower_dropout},
    {TERN_GOP_WHERE, "where", NULL, lower_where},
    {TERN_GOP_LEAKY_RELU, "activation", NULL, lower_activation},
    {TERN_GOP_ELU, "activation", NULL, lower_activation},
    {TERN_GOP_CELU, "activation", NULL, lower_activation},
    {TERN_GOP_SELU, "activation", NULL, lower_activation},
    {TERN_GOP_HARD_SIGMOID, "activation", NULL, lower_activation},
    {TERN_GOP_HARD_SWISH, "activation", NULL, lower_activation},
    {TERN_GOP_SOFTSIGN, "activation", NULL, lower_activation},
    {TERN_GOP_THRESHOLDED_RELU, "activation", NULL, lower_activation},
    {TERN_GOP_SHRINK, "activation", NULL, lower_activation},
    {TERN_GOP_FLOOR, "activation", NULL, lower_activation},
    {TERN_GOP_CEIL, "activation", NULL, lower_activation},
    {TERN_GOP_ROUND, "activation", NULL, lower_activation},
    {TERN_GOP_COS, "activation", NULL, lower_activation},
    {TERN_GOP_TAN, "activation", NULL, lower_activation},
    {TERN_GOP_SINH, "activation", NULL, lower_activation},
    {TERN_GOP_COSH, "activation", NULL, lower_activation},
    {TERN_GOP_ASINH, "activation", NULL, lower_activation},
    {TERN_GOP_ACOSH, "activation", NULL, lower_activation},
    {TERN_GOP_ATANH, "activation", NULL, lower_activation},
    {TERN_GOP_IS_NAN, "activation", NULL, lower_activation},
    {TERN_GOP_IS_INF, "activation", NULL, lower_activation},
    {TERN_GOP_ATAN, "atrig.series", NULL, lower_atrig},
    {TERN_GOP_ASIN, "atrig.series", NULL, lower_atrig},
    {TERN_GOP_ACOS, "atrig.series", NULL, lower_atrig},
    {TERN_GOP_CLIP, "clip", NULL, lower_clip},
    {TERN_GOP_P_RELU, "prelu", NULL, lower_prelu},
    {TERN_GOP_NOT, "not", NULL, lower_not},
    {TERN_GOP_MOD, "mod", NULL, lower_mod},
    {TERN_GOP_DIV, "div.any", NULL, lower_div},
    {TERN_GOP_BIT_SHIFT, "bitshift", NULL, lower_bitshift},
    {TERN_GOP_POW, "pow.tensor", NULL, lower_pow_tensor},
    {TERN_GOP_SUM, "nary", NULL, lower_nary},
    {TERN_GOP_MEAN, "nary", NULL, lower_nary},
    {TERN_GOP_MAX, "nary", NULL, lower_nary},
    {TERN_GOP_MIN, "nary", NULL, lower_nary},
    {TERN_GOP_CAST, "cast.any", NULL, lower_cast_any},
    {TERN_GOP_CAST_LIKE, "cast.any", NULL, lower_cast_any},
};
const cc_rule_set cc_rules_elementwise = CC_RULE_SET("lower_elementwise.c", elementwise_rules);
