/* Gradients of the elementwise ops: the binary arithmetic ops with NumPy broadcasting (each operand's gradient
 * is summed back over the axes it was broadcast along), the activations, and the pointwise math functions.
 * Activations whose derivative is a function of their output (Sigmoid, Tanh, Exp, Sqrt) use the forward output,
 * as PyTorch's autograd does, so no value is computed twice. */
#include "ad_internal.h"

#include <math.h>
#include <string.h>

/* dy summed back to operand k's shape */
static void give(ad_ctx *a, const ad_fwd *f, int k, int gid)
{
    if (!ad_needs(a, f->in[k]))
        return;
    ad_shape from = ad_shape_of(a, f->out[0]), to = ad_shape_of(a, f->in[k]);
    ad_accum(a, f->in[k], ad_unbroadcast(a, gid, &from, &to));
}

static int g_add(ad_ctx *a, const ad_fwd *f)
{
    give(a, f, 0, f->dy[0]);
    give(a, f, 1, f->dy[0]);
    return 0;
}

static int g_sum(ad_ctx *a, const ad_fwd *f)
{
    for (int k = 0; k < f->n_in; k++)
        give(a, f, k, f->dy[0]);
    return 0;
}

static int g_sub(ad_ctx *a, const ad_fwd *f)
{
    give(a, f, 0, f->dy[0]);
    if (ad_needs(a, f->in[1]))
        give(a, f, 1, ad_op1(a, "Neg", f->dy[0]));
    return 0;
}

static int g_mul(ad_ctx *a, const ad_fwd *f)
{
    if (ad_needs(a, f->in[0]))
        give(a, f, 0, ad_op2(a, "Mul", f->dy[0], f->in[1]));
    if (ad_needs(a, f->in[1]))
        give(a, f, 1, ad_op2(a, "Mul", f->dy[0], f->in[0]));
    return 0;
}

/* y = a / b: da = dy / b, db = -dy * y / b */
static int g_div(ad_ctx *a, const ad_fwd *f)
{
    if (ad_needs(a, f->in[0]))
        give(a, f, 0, ad_op2(a, "Div", f->dy[0], f->in[1]));
    if (ad_needs(a, f->in[1]))
        give(a, f, 1, ad_op1(a, "Neg", ad_op2(a, "Div", ad_op2(a, "Mul", f->dy[0], f->out[0]), f->in[1])));
    return 0;
}

static void give_x(ad_ctx *a, const ad_fwd *f, int gid)
{
    ad_accum(a, f->in[0], gid);
}

static int g_neg(ad_ctx *a, const ad_fwd *f)
{
    give_x(a, f, ad_op1(a, "Neg", f->dy[0]));
    return 0;
}

static int g_identity(ad_ctx *a, const ad_fwd *f)
{
    give_x(a, f, f->dy[0]);
    return 0;
}

/* Dropout outside training mode is the identity; in training mode (a mask output or training_mode input) the
 * mask is random and tern does not train through it yet. */
static int g_dropout(ad_ctx *a, const ad_fwd *f)
{
    if (f->n_in >= 3 && f->in[2] >= 0) {
        const tern_graph_value *t = tern_graph_value_at(a->g, f->in[2]);
        if (!t->constant || tern_host_tensor_get(t->constant, 0) != 0)
            return ad_fail_node(a, f->index, "Dropout in training mode has no gradient rule yet");
    }
    give_x(a, f, f->dy[0]);
    return 0;
}

/* Where(x > 0, dy, 0): the subgradient 0 at x = 0, as PyTorch */
static int g_relu(ad_ctx *a, const ad_fwd *f)
{
    int zero = ad_const_f(a, 0.0f);
    int pos = ad_op2(a, "Greater", f->out[0], zero);
    int in[3] = {pos, f->dy[0], zero};
    give_x(a, f, ad_op(a, "Where", 3, in));
    return 0;
}

static int g_leaky(ad_ctx *a, const ad_fwd *f)
{
    float alpha = tern_graph_attr_float(&a->g->nodes[f->index], "alpha", 0.01f);
    int zero = ad_const_f(a, 0.0f);
    int pos = ad_op2(a, "Greater", f->in[0], zero);
    int neg = ad_op2(a, "Mul", f->dy[0], ad_const_f(a, alpha));
    int in[3] = {pos, f->dy[0], neg};
    give_x(a, f, ad_op(a, "Where", 3, in));
    return 0;
}

static int g_sigmoid(ad_ctx *a, const ad_fwd *f)
{
    int one_m = ad_op2(a, "Sub", ad_const_f(a, 1.0f), f->out[0]);
    give_x(a, f, ad_op2(a, "Mul", f->dy[0], ad_op2(a, "Mul", f->out[0], one_m)));
    return 0;
}

static int g_tanh(ad_ctx *a, const ad_fwd *f)
{
    int one_m = ad_op2(a, "Sub", ad_const_f(a, 1.0f), ad_op2(a, "Mul", f->out[0], f->out[0]));
    give_x(a, f, ad_op2(a, "Mul", f->dy[0], one_m));
    return 0;
}

static int g_exp(ad_ctx *a, const ad_fwd *f)
{
    give_x(a, f, ad_op2(a, "Mul", f->dy[0], f->out[0]));
    return 0;
}

static int g_log(ad_ctx *a, const ad_fwd *f)
{
    give_x(a, f, ad_op2(a, "Div", f->dy[0], f->in[0]));
    return 0;
}

static int g_sqrt(ad_ctx *a, const ad_fwd *f)
{
    give_x(a, f, ad_op2(a, "Div", ad_op2(a, "Mul", f->dy[0], ad_const_f(a, 0.5f)), f->out[0]));
    return 0;
}

static int g_reciprocal(ad_ctx *a, const ad_fwd *f)
{
    give_x(a, f, ad_op1(a, "Neg", ad_op2(a, "Mul", f->dy[0], ad_op2(a, "Mul", f->out[0], f->out[0]))));
    return 0;
}

static int g_abs(ad_ctx *a, const ad_fwd *f)
{
    give_x(a, f, ad_op2(a, "Mul", f->dy[0], ad_op1(a, "Sign", f->in[0])));
    return 0;
}

static int g_softplus(ad_ctx *a, const ad_fwd *f)
{
    give_x(a, f, ad_op2(a, "Mul", f->dy[0], ad_op1(a, "Sigmoid", f->in[0])));
    return 0;
}

/* d erf(x) = 2/sqrt(pi) exp(-x^2) */
static int g_erf(ad_ctx *a, const ad_fwd *f)
{
    int x = f->in[0];
    int e = ad_op1(a, "Exp", ad_op1(a, "Neg", ad_op2(a, "Mul", x, x)));
    give_x(a, f, ad_op2(a, "Mul", f->dy[0], ad_op2(a, "Mul", e, ad_const_f(a, (float)(2.0 / sqrt(M_PI))))));
    return 0;
}

/* GELU, erf form: Phi(x) + x phi(x); tanh form: 0.5 (1 + t) + 0.5 x (1 - t^2) c (1 + 3 k x^2),
 * t = tanh(c (x + k x^3)), c = sqrt(2/pi), k = 0.044715 */
static int g_gelu(ad_ctx *a, const ad_fwd *f)
{
    const char *approx = tern_graph_attr_string(&a->g->nodes[f->index], "approximate", "none");
    int x = f->in[0], x2 = ad_op2(a, "Mul", x, x), d;
    if (!strcmp(approx, "tanh")) {
        const float c = (float)sqrt(2.0 / M_PI), k = 0.044715f;
        int inner = ad_op2(a, "Mul", ad_const_f(a, c),
                           ad_op2(a, "Add", x, ad_op2(a, "Mul", ad_const_f(a, k), ad_op2(a, "Mul", x2, x))));
        int t = ad_op1(a, "Tanh", inner);
        int left = ad_op2(a, "Mul", ad_const_f(a, 0.5f), ad_op2(a, "Add", ad_const_f(a, 1.0f), t));
        int sech2 = ad_op2(a, "Sub", ad_const_f(a, 1.0f), ad_op2(a, "Mul", t, t));
        int dinner = ad_op2(a, "Mul", ad_const_f(a, c),
                            ad_op2(a, "Add", ad_const_f(a, 1.0f), ad_op2(a, "Mul", ad_const_f(a, 3.0f * k), x2)));
        int right = ad_op2(a, "Mul", ad_op2(a, "Mul", ad_const_f(a, 0.5f), x), ad_op2(a, "Mul", sech2, dinner));
        d = ad_op2(a, "Add", left, right);
    } else if (!strcmp(approx, "none")) {
        int cdf = ad_op2(a, "Mul", ad_const_f(a, 0.5f),
                         ad_op2(a, "Add", ad_const_f(a, 1.0f),
                                ad_op1(a, "Erf", ad_op2(a, "Mul", x, ad_const_f(a, (float)(1.0 / sqrt(2.0)))))));
        int pdf = ad_op2(a, "Mul", ad_op1(a, "Exp", ad_op2(a, "Mul", x2, ad_const_f(a, -0.5f))),
                         ad_const_f(a, (float)(1.0 / sqrt(2.0 * M_PI))));
        d = ad_op2(a, "Add", cdf, ad_op2(a, "Mul", x, pdf));
    } else {
        return ad_fail_node(a, f->index, "Gelu approximate=\"%s\" has no gradient rule", approx);
    }
    give_x(a, f, ad_op2(a, "Mul", f->dy[0], d));
    return 0;
}

/* Pow(x, p) with a constant scalar exponent: p x^(p-1) */
static int g_pow(ad_ctx *a, const ad_fwd *f)
{
    if (ad_needs(a, f->in[1]))
        return ad_fail_node(a, f->index, "Pow: the exponent depends on a trained weight (no gradient rule)");
    const tern_graph_value *e = tern_graph_value_at(a->g, f->in[1]);
    if (!e->constant || e->constant->count != 1)
        return ad_fail_node(a, f->index, "Pow: only a constant scalar exponent has a gradient rule");
    float p = (float)tern_host_tensor_get(e->constant, 0);
    int x = f->in[0], d;
    if (p == 1.0f)
        d = ad_const_f(a, 1.0f);
    else if (p == 2.0f)
        d = ad_op2(a, "Mul", x, ad_const_f(a, 2.0f));
    else if (p == 3.0f)
        d = ad_op2(a, "Mul", ad_op2(a, "Mul", x, x), ad_const_f(a, 3.0f));
    else
        d = ad_op2(a, "Mul", ad_op2(a, "Pow", x, ad_const_f(a, p - 1.0f)), ad_const_f(a, p));
    ad_shape from = ad_shape_of(a, f->out[0]), to = ad_shape_of(a, x);
    ad_accum(a, x, ad_unbroadcast(a, ad_op2(a, "Mul", f->dy[0], d), &from, &to));
    return 0;
}

/* Where(c, x, y): dx = Where(c, dy, 0), dy = Where(c, 0, dy) */
static int g_where(ad_ctx *a, const ad_fwd *f)
{
    int zero = ad_const_f(a, 0.0f);
    if (ad_needs(a, f->in[1])) {
        int in[3] = {f->in[0], f->dy[0], zero};
        give(a, f, 1, ad_op(a, "Where", 3, in));
    }
    if (ad_needs(a, f->in[2])) {
        int in[3] = {f->in[0], zero, f->dy[0]};
        give(a, f, 2, ad_op(a, "Where", 3, in));
    }
    return 0;
}

/* a float-to-float Cast: the gradient cast back to the operand's type */
static int g_cast(ad_ctx *a, const ad_fwd *f)
{
    tern_elem_type t = tern_graph_value_at(a->g, f->in[0])->type;
    if (!tern_elem_is_float(t))
        return 0;
    if (t == tern_graph_value_at(a->g, f->out[0])->type) {
        give_x(a, f, f->dy[0]);
        return 0;
    }
    int y = ad_op1(a, "Cast", f->dy[0]);
    ad_attr_int(a, ad_last_node(a), "to", (int64_t)t);
    give_x(a, f, y);
    return 0;
}

int grad_elementwise_rule(int op_id, ad_rule *out)
{
    static const struct {
        int id;
        ad_rule fn;
    } tab[] = {{TERN_GOP_ADD, g_add},         {TERN_GOP_SUB, g_sub},
               {TERN_GOP_MUL, g_mul},         {TERN_GOP_DIV, g_div},
               {TERN_GOP_SUM, g_sum},         {TERN_GOP_NEG, g_neg},
               {TERN_GOP_IDENTITY, g_identity}, {TERN_GOP_DROPOUT, g_dropout},
               {TERN_GOP_RELU, g_relu},       {TERN_GOP_LEAKY_RELU, g_leaky},
               {TERN_GOP_SIGMOID, g_sigmoid}, {TERN_GOP_TANH, g_tanh},
               {TERN_GOP_EXP, g_exp},         {TERN_GOP_LOG, g_log},
               {TERN_GOP_SQRT, g_sqrt},       {TERN_GOP_RECIPROCAL, g_reciprocal},
               {TERN_GOP_ABS, g_abs},         {TERN_GOP_SOFTPLUS, g_softplus},
               {TERN_GOP_ERF, g_erf},         {TERN_GOP_GELU, g_gelu},
               {TERN_GOP_POW, g_pow},         {TERN_GOP_WHERE, g_where},
               {TERN_GOP_CAST, g_cast}};
    for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++)
        if (op_id == tab[i].id) {
            *out = tab[i].fn;
            return 1;
        }
    return 0;
}
