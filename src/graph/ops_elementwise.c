/* The elementwise family's shape inference: ops whose output has their input's shape (unary math, activations,
 * and the same-shape axis ops Softmax, CumSum, Trilu inferred with them), IsNaN/IsInf, Cast/CastLike, and the
 * numpy-broadcast binary, variadic and select ops; and the host reference evaluation of the unary, binary
 * (numpy broadcasting, float and int paths), variadic and select ops and the casts. infer_node dispatches here by
 * op id; eval.c's table names the evaluators. */
#include "infer_internal.h"
#include "eval_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* SQRT, EXP, LOG, TANH, SIGMOID, ERF, RECIPROCAL, FLOOR, CEIL, ROUND, SIN, COS, TAN, ASIN, ACOS, ATAN, SINH, COSH, ASINH, ACOSH, ATANH, SOFTPLUS, SOFTSIGN, LEAKY_RELU, ELU, CELU, SELU, THRESHOLDED_RELU, HARD_SIGMOID, HARD_SWISH, MISH, GELU, SHRINK, SOFTMAX, LOG_SOFTMAX, HARDMAX, NEG, ABS, SIGN, RELU, IDENTITY, NOT, CLIP, DROPOUT, TRILU, CUM_SUM */
tern_status graph_infer_same_shape(ictx *c)
{
    const tern_op_id id = (tern_op_id)c->n->op_id;
    tern_status st;
    if ((st = tern_op_flags(id) & TERN_OPF_FLOAT_IN ? need_float(c, 0) : need(c, 0)))
        return st;
    same_as(c, 0, V(c, 0), V(c, 0)->type);
    if (id == TERN_GOP_DROPOUT)
        same_as(c, 1, V(c, 0), TERN_ELEM_BOOL);
    if (id == TERN_GOP_NOT && V(c, 0)->type != TERN_ELEM_BOOL)
        return ifail(c, TERN_ERR_INVALID, "input must be bool, got %s", tern_elem_name(V(c, 0)->type));
    return TERN_OK;
}

/* IS_NAN, IS_INF */
tern_status graph_infer_is_nan_inf(ictx *c)
{
    tern_status st;
    if ((st = need_float(c, 0)))
        return st;
    same_as(c, 0, V(c, 0), TERN_ELEM_BOOL);
    return TERN_OK;
}

/* CAST, CAST_LIKE */
tern_status graph_infer_cast(ictx *c)
{
    const tern_graph_node *n = c->n;
    const tern_op_id id = (tern_op_id)c->n->op_id;
    tern_status st;
    if ((st = need(c, 0)))
        return st;
    int64_t to;
    if (id == TERN_GOP_CAST_LIKE) {
        if ((st = need(c, 1)))
            return st;
        to = V(c, 1)->type;
    } else {
        const tern_graph_attr *a = tern_graph_node_attr(n, "to");
        if (!a || a->type != TERN_ATTR_INT)
            return ifail(c, TERN_ERR_INVALID, "attribute \"to\" (int) is required");
        to = a->i;
    }
    if (to < 0 || to > 64 || (!tern_elem_is_valid((int)to) && to != TERN_ELEM_STRING))
        return ifail(c, TERN_ERR_UNSUPPORTED, "cast to type %lld is not supported", (long long)to);
    tern_elem_type from = V(c, 0)->type;
    if ((from == TERN_ELEM_STRING) != (to == TERN_ELEM_STRING) &&
        (from == TERN_ELEM_STRING ? to : from) != TERN_ELEM_FLOAT)
        return ifail(c, TERN_ERR_UNSUPPORTED, "cast from %s to %s: text converts only to and from float",
                     tern_elem_name(from), tern_elem_name((tern_elem_type)to));
    same_as(c, 0, V(c, 0), (tern_elem_type)to);
    return TERN_OK;
}

/* ADD, SUB, MUL, DIV, POW, MOD, AND, OR, XOR, EQUAL, LESS, GREATER, LESS_OR_EQUAL, GREATER_OR_EQUAL, BIT_SHIFT, P_RELU, MAX, MIN, SUM, MEAN, WHERE */
tern_status graph_infer_broadcast(ictx *c)
{
    const tern_graph_node *n = c->n;
    const tern_op_id id = (tern_op_id)c->n->op_id;
    tern_status st;
    int64_t dims[TERN_GRAPH_MAX_RANK];
    int r;
    int where = id == TERN_GOP_WHERE, binary = tern_op_family_of(id) == TERN_OP_FAMILY_ELEMENTWISE_BINARY;
    int nin = binary ? 2 : where ? 3 : n->n_inputs;
    if (nin < 1)
        return ifail(c, TERN_ERR_INVALID, "needs at least one input");
    for (int k = 0; k < nin; k++)
        if ((st = need(c, k)))
            return st;
    int first = where ? 1 : 0;
    tern_elem_type t = V(c, first)->type;
    for (int k = first; k < nin; k++)
        if (V(c, k)->type != t && id != TERN_GOP_POW)
            return ifail(c, TERN_ERR_INVALID, "input %d \"%s\" is %s, input %d \"%s\" is %s", first,
                         V(c, first)->name, tern_elem_name(t), k, V(c, k)->name, tern_elem_name(V(c, k)->type));
    if (where && V(c, 0)->type != TERN_ELEM_BOOL)
        return ifail(c, TERN_ERR_INVALID, "condition must be bool, got %s", tern_elem_name(V(c, 0)->type));
    if ((tern_op_flags(id) & TERN_OPF_LOGICAL) && t != TERN_ELEM_BOOL)
        return ifail(c, TERN_ERR_INVALID, "operands must be bool, got %s", tern_elem_name(t));
    if ((st = bcast_inputs(c, 0, nin, &r, dims)))
        return st;
    set_out(c, 0, tern_op_flags(id) & TERN_OPF_COMPARE ? TERN_ELEM_BOOL : t, r, dims);
    return TERN_OK;
}

/* ---- reference evaluation (moved from eval.c) ---- */

static tern_status bshape(const ectx *c, int nin, const tern_host_tensor *const *ts, int *rank, int64_t *dims)
{
    char why[200];
    *rank = ts[0]->rank;
    for (int d = 0; d < ts[0]->rank; d++)
        dims[d] = ts[0]->dims[d];
    for (int k = 1; k < nin; k++) {
        int64_t nd[TERN_GRAPH_MAX_RANK];
        int nr;
        if (graph_broadcast(*rank, dims, ts[k]->rank, ts[k]->dims, &nr, nd, why, sizeof why))
            return efail(c, TERN_ERR_INVALID, "%s", why);
        *rank = nr;
        memcpy(dims, nd, sizeof nd);
    }
    return TERN_OK;
}


/* ---- binary elementwise ---- */
enum {
    B_ADD, B_SUB, B_MUL, B_DIV, B_POW, B_MOD, B_FMOD, B_MAX, B_MIN, B_AND, B_OR, B_XOR, B_EQ, B_LT, B_GT, B_LE, B_GE,
    B_SHL, B_SHR, B_PRELU
};

static int is_cmp(int op) { return op >= B_EQ && op <= B_GE; }

static float fbin(int op, float a, float b)
{
    switch (op) {
    case B_ADD: return a + b;
    case B_SUB: return a - b;
    case B_MUL: return a * b;
    case B_DIV: return a / b;
    case B_POW: return powf(a, b);
    case B_MOD: {
        float r = fmodf(a, b);
        return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
    }
    case B_FMOD: return fmodf(a, b);
    case B_MAX: return isnan(a) || isnan(b) ? NAN : a > b ? a : b;
    case B_MIN: return isnan(a) || isnan(b) ? NAN : a < b ? a : b;
    case B_PRELU: return a < 0 ? a * b : a;
    default: return 0;
    }
}

static int64_t ibin(int op, int64_t a, int64_t b, int is_unsigned)
{
    uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
    switch (op) {
    case B_ADD: return (int64_t)(ua + ub);
    case B_SUB: return (int64_t)(ua - ub);
    case B_MUL: return (int64_t)(ua * ub);
    case B_DIV:
        if (b == 0)
            return 0;
        if (is_unsigned)
            return (int64_t)(ua / ub);
        if (a == INT64_MIN && b == -1)
            return INT64_MIN;
        return a / b;
    case B_MOD:
    case B_FMOD: {
        if (b == 0)
            return 0;
        if (is_unsigned)
            return (int64_t)(ua % ub);
        if (b == -1)
            return 0;
        int64_t r = a % b;
        if (op == B_MOD && r != 0 && ((r < 0) != (b < 0)))
            r += b;
        return r;
    }
    case B_POW: {
        double p = pow((double)a, (double)b);
        return d2i(p);
    }
    case B_MAX: return a > b ? a : b;
    case B_MIN: return a < b ? a : b;
    case B_AND: return a && b;
    case B_OR: return a || b;
    case B_XOR: return (a != 0) != (b != 0);
    case B_SHL: return ub >= 64 ? 0 : (int64_t)(ua << ub);
    case B_SHR: return ub >= 64 ? 0 : (int64_t)(ua >> ub);
    case B_PRELU: return a < 0 ? (int64_t)(ua * ub) : a;
    default: return 0;
    }
}

static int elem_unsigned(tern_elem_type t)
{
    return t == TERN_ELEM_UINT8 || t == TERN_ELEM_UINT16 || t == TERN_ELEM_UINT32 || t == TERN_ELEM_UINT64;
}

static tern_status binary(const ectx *c, int op, const tern_host_tensor *a, const tern_host_tensor *b,
                          tern_host_tensor **res)
{
    *res = NULL;
    if (op != B_POW && a->type != b->type)
        return efail(c, TERN_ERR_INVALID, "operand types differ: %s and %s", tern_elem_name(a->type),
                     tern_elem_name(b->type));
    if ((op == B_AND || op == B_OR || op == B_XOR) && a->type != TERN_ELEM_BOOL)
        return efail(c, TERN_ERR_INVALID, "operands must be bool, got %s", tern_elem_name(a->type));
    const tern_host_tensor *ts[2] = {a, b};
    int rank;
    int64_t dims[TERN_GRAPH_MAX_RANK];
    tern_status st = bshape(c, 2, ts, &rank, dims);
    if (st)
        return st;
    tern_error e;
    tern_elem_type ot = is_cmp(op) ? TERN_ELEM_BOOL : a->type;
    if (tern_host_tensor_new(ot, rank, dims, res, &e))
        return efail(c, e.code, "%s", e.msg);
    tern_host_tensor *o = *res;
    bcit it;
    bcit_init(&it, rank, dims, 2, ts);
    size_t n = o->count;
    int uns = elem_unsigned(a->type);
    if (is_cmp(op)) {
        for (size_t k = 0; k < n; k++, bcit_next(&it)) {
            int r;
            if (a->f || b->f) {
                double x = rd(a, it.off[0]), y = rd(b, it.off[1]);
                r = op == B_EQ ? x == y : op == B_LT ? x < y : op == B_GT ? x > y : op == B_LE ? x <= y : x >= y;
            } else {
                int64_t x = a->i[it.off[0]], y = b->i[it.off[1]];
                if (uns) {
                    uint64_t ux = (uint64_t)x, uy = (uint64_t)y;
                    r = op == B_EQ ? ux == uy : op == B_LT ? ux < uy : op == B_GT ? ux > uy : op == B_LE ? ux <= uy
                                                                                                          : ux >= uy;
                } else
                    r = op == B_EQ ? x == y : op == B_LT ? x < y : op == B_GT ? x > y : op == B_LE ? x <= y : x >= y;
            }
            o->i[k] = r;
        }
    } else if (o->f) {
        if (a->f && b->f && op == B_ADD && a->count == n && b->count == n) {
            for (size_t k = 0; k < n; k++)
                o->f[k] = a->f[k] + b->f[k];
        } else
            for (size_t k = 0; k < n; k++, bcit_next(&it))
                o->f[k] = fbin(op, a->f[it.off[0]], (float)rd(b, it.off[1]));
    } else {
        if (b->f) /* Pow(int, float) */
            for (size_t k = 0; k < n; k++, bcit_next(&it)) {
                double p = pow((double)a->i[it.off[0]], (double)b->f[it.off[1]]);
                o->i[k] = d2i(p);
            }
        else
            for (size_t k = 0; k < n; k++, bcit_next(&it))
                o->i[k] = ibin(op, a->i[it.off[0]], b->i[it.off[1]], uns);
    }
    graph_tensor_normalize(o);
    return TERN_OK;
}

static const struct {
    tern_op_id id;
    int op;
} binops[] = {{TERN_GOP_ADD, B_ADD},           {TERN_GOP_SUB, B_SUB},
              {TERN_GOP_MUL, B_MUL},           {TERN_GOP_DIV, B_DIV},
              {TERN_GOP_POW, B_POW},           {TERN_GOP_MOD, B_MOD},
              {TERN_GOP_AND, B_AND},           {TERN_GOP_OR, B_OR},
              {TERN_GOP_XOR, B_XOR},           {TERN_GOP_EQUAL, B_EQ},
              {TERN_GOP_LESS, B_LT},           {TERN_GOP_GREATER, B_GT},
              {TERN_GOP_LESS_OR_EQUAL, B_LE},  {TERN_GOP_GREATER_OR_EQUAL, B_GE},
              {TERN_GOP_BIT_SHIFT, B_SHL},     {TERN_GOP_P_RELU, B_PRELU}};

tern_status graph_ev_binary(const ectx *c)
{
    int op = -1;
    for (size_t k = 0; k < TERN_ARRAY_LEN(binops); k++)
        if (c->n->op_id == (int)binops[k].id)
            op = binops[k].op;
    if (op == B_MOD && tern_graph_attr_int(c->n, "fmod", 0))
        op = B_FMOD;
    if (op == B_SHL && strcmp(tern_graph_attr_string(c->n, "direction", ""), "RIGHT") == 0)
        op = B_SHR;
    tern_status st;
    if ((st = ereq(c, 0, 0)) || (st = ereq(c, 1, 0)))
        return st;
    if (op == B_MOD && IN(0)->f && !tern_graph_attr_int(c->n, "fmod", 0))
        return efail(c, TERN_ERR_INVALID, "float operands need fmod=1");
    tern_host_tensor *r;
    if ((st = binary(c, op, IN(0), IN(1), &r)))
        return st;
    ekeep(c, 0, r);
    return TERN_OK;
}

/* Max, Min, Sum, Mean: variadic with broadcasting */
tern_status graph_ev_variadic(const ectx *c)
{
    const tern_op_id id = (tern_op_id)c->n->op_id;
    int bop = id == TERN_GOP_MAX ? B_MAX : id == TERN_GOP_MIN ? B_MIN : B_ADD;
    if (c->n_in < 1 || !IN(0))
        return efail(c, TERN_ERR_INVALID, "needs at least one input");
    tern_host_tensor *acc;
    tern_error e;
    if (tern_host_tensor_clone(IN(0), &acc, &e))
        return efail(c, e.code, "%s", e.msg);
    for (int k = 1; k < c->n_in; k++) {
        if (!IN(k))
            continue;
        tern_host_tensor *next;
        tern_status st = binary(c, bop, acc, IN(k), &next);
        tern_host_tensor_free(acc);
        if (st)
            return st;
        acc = next;
    }
    if (id == TERN_GOP_MEAN) {
        if (!acc->f) {
            tern_host_tensor_free(acc);
            return efail(c, TERN_ERR_INVALID, "Mean needs float inputs");
        }
        for (size_t k = 0; k < acc->count; k++)
            acc->f[k] /= (float)c->n_in;
        graph_tensor_normalize(acc);
    }
    ekeep(c, 0, acc);
    return TERN_OK;
}

tern_status graph_ev_where(const ectx *c)
{
    tern_status st;
    if ((st = ereq(c, 0, 0)) || (st = ereq(c, 1, 0)) || (st = ereq(c, 2, 0)))
        return st;
    const tern_host_tensor *ts[3] = {IN(1), IN(2), IN(0)};
    if (IN(0)->type != TERN_ELEM_BOOL)
        return efail(c, TERN_ERR_INVALID, "condition must be bool, got %s", tern_elem_name(IN(0)->type));
    if (IN(1)->type != IN(2)->type)
        return efail(c, TERN_ERR_INVALID, "X and Y types differ: %s and %s", tern_elem_name(IN(1)->type),
                     tern_elem_name(IN(2)->type));
    int rank;
    int64_t dims[TERN_GRAPH_MAX_RANK];
    if ((st = bshape(c, 3, ts, &rank, dims)))
        return st;
    tern_host_tensor *o;
    if ((st = eout(c, 0, IN(1)->type, rank, dims, &o)) || !o)
        return st;
    bcit it;
    bcit_init(&it, rank, dims, 3, ts);
    for (size_t k = 0; k < o->count; k++, bcit_next(&it)) {
        int cond = IN(0)->i[it.off[2]] != 0;
        if (o->f)
            o->f[k] = cond ? IN(1)->f[it.off[0]] : IN(2)->f[it.off[1]];
        else
            o->i[k] = cond ? IN(1)->i[it.off[0]] : IN(2)->i[it.off[1]];
    }
    return TERN_OK;
}

/* ---- unary ---- */
/* In double and without the cancellation of 1 + erf / 1 + tanh for x << 0 (erfc, and 1 + tanh(u) =
 * 2 / (1 + exp(-2u))), rounded once: the fp32 forms lost up to 2^-13 relative for x near -3. */
static float gelu_erf(float x) { return (float)(0.5 * x * erfc(-(double)x * 0.70710678118654752440)); }
static float gelu_tanh(float x)
{
    double u = 0.79788456080286535588 * ((double)x + 0.044715 * (double)x * x * x);
    return (float)(x / (1.0 + exp(-2.0 * u)));
}

tern_status graph_ev_unary(const ectx *c)
{
    tern_status st;
    if ((st = ereq(c, 0, 0)))
        return st;
    const tern_host_tensor *x = IN(0);
    const tern_op_id id = (tern_op_id)c->n->op_id;
    tern_elem_type ot = x->type;
    if (id == TERN_GOP_IS_NAN || id == TERN_GOP_IS_INF)
        ot = TERN_ELEM_BOOL;
    if (id == TERN_GOP_NOT && x->type != TERN_ELEM_BOOL)
        return efail(c, TERN_ERR_INVALID, "input must be bool, got %s", tern_elem_name(x->type));
    int int_ok = id == TERN_GOP_NEG || id == TERN_GOP_ABS || id == TERN_GOP_SIGN ||
                 id == TERN_GOP_RELU || id == TERN_GOP_IDENTITY || id == TERN_GOP_NOT ||
                 id == TERN_GOP_DROPOUT || id == TERN_GOP_CLIP;
    if (!x->f && !int_ok)
        return efail(c, TERN_ERR_INVALID, "input must be a float tensor, got %s", tern_elem_name(x->type));
    tern_host_tensor *o;
    if ((st = eout(c, 0, ot, x->rank, x->dims, &o)))
        return st;
    if (id == TERN_GOP_DROPOUT && IN(2) && IN(2)->count && IN(2)->i && IN(2)->i[0] &&
        !(IN(1) && IN(1)->count && IN(1)->f && IN(1)->f[0] == 0.0f))
        return efail(c, TERN_ERR_UNSUPPORTED, "training_mode=true (random masks) is not supported");
    if (id == TERN_GOP_DROPOUT && WANT_OUT(1)) { /* inference: identity, mask all true */
        tern_host_tensor *m;
        if ((st = eout(c, 1, TERN_ELEM_BOOL, x->rank, x->dims, &m)))
            return st;
        for (size_t k = 0; k < m->count; k++)
            m->i[k] = 1;
    }
    if (!o)
        return TERN_OK;
    size_t n = x->count;
    if (!x->f) {
        double lo = -INFINITY, hi = INFINITY;
        if (id == TERN_GOP_CLIP) {
            if (IN(1))
                lo = rd(IN(1), 0);
            if (IN(2))
                hi = rd(IN(2), 0);
        }
        for (size_t k = 0; k < n; k++) {
            int64_t v = x->i[k];
            switch (id) {
            case TERN_GOP_NEG: v = (int64_t)(0 - (uint64_t)v); break;
            case TERN_GOP_NOT: v = !v; break;
            case TERN_GOP_ABS: v = v < 0 ? (int64_t)(0 - (uint64_t)v) : v; break;
            case TERN_GOP_SIGN: v = (v > 0) - (v < 0); break;
            case TERN_GOP_RELU: v = v < 0 ? 0 : v; break;
            case TERN_GOP_CLIP: v = (double)v < lo ? d2i(lo) : (double)v > hi ? d2i(hi) : v; break;
            default: break; /* Identity, Dropout */
            }
            o->i[k] = v;
        }
        graph_tensor_normalize(o);
        return TERN_OK;
    }
    const float *a = x->f;
    float *r = o->f;
    float alpha = tern_graph_attr_float(c->n, "alpha", NAN), beta = tern_graph_attr_float(c->n, "beta", NAN);
#define MAP(expr)                                                                                                   \
    do {                                                                                                            \
        for (size_t k = 0; k < n; k++) {                                                                            \
            float v = a[k];                                                                                         \
            r[k] = (expr);                                                                                          \
        }                                                                                                           \
    } while (0)
    if (id == TERN_GOP_NEG) MAP(-v);
    else if (id == TERN_GOP_ABS) MAP(fabsf(v));
    else if (id == TERN_GOP_RELU) MAP(v < 0 ? 0.0f : v);
    else if (id == TERN_GOP_SQRT) MAP(sqrtf(v));
    else if (id == TERN_GOP_EXP) MAP(expf(v));
    else if (id == TERN_GOP_LOG) MAP(logf(v));
    else if (id == TERN_GOP_TANH) MAP(tanhf(v));
    else if (id == TERN_GOP_SIGMOID) MAP(v >= 0 ? 1.0f / (1.0f + expf(-v)) : expf(v) / (1.0f + expf(v)));
    else if (id == TERN_GOP_ERF) MAP(erff(v));
    else if (id == TERN_GOP_RECIPROCAL) MAP(1.0f / v);
    else if (id == TERN_GOP_FLOOR) MAP(floorf(v));
    else if (id == TERN_GOP_CEIL) MAP(ceilf(v));
    else if (id == TERN_GOP_ROUND) MAP(nearbyintf(v));
    else if (id == TERN_GOP_SIN) MAP(sinf(v));
    else if (id == TERN_GOP_COS) MAP(cosf(v));
    else if (id == TERN_GOP_TAN) MAP(tanf(v));
    else if (id == TERN_GOP_ASIN) MAP(asinf(v));
    else if (id == TERN_GOP_ACOS) MAP(acosf(v));
    else if (id == TERN_GOP_ATAN) MAP(atanf(v));
    else if (id == TERN_GOP_SINH) MAP(sinhf(v));
    else if (id == TERN_GOP_COSH) MAP(coshf(v));
    else if (id == TERN_GOP_ASINH) MAP(asinhf(v));
    else if (id == TERN_GOP_ACOSH) MAP(acoshf(v));
    else if (id == TERN_GOP_ATANH) MAP(atanhf(v));
    else if (id == TERN_GOP_SOFTPLUS) MAP(v > 20 ? v : log1pf(expf(v)));
    else if (id == TERN_GOP_SOFTSIGN) MAP(v / (1.0f + fabsf(v)));
    else if (id == TERN_GOP_SIGN) MAP(v != v ? v : (float)((v > 0) - (v < 0))); /* np.sign(NaN) = NaN */
    else if (id == TERN_GOP_IS_NAN) {
        for (size_t k = 0; k < n; k++)
            o->i[k] = isnan(a[k]) != 0;
    } else if (id == TERN_GOP_IS_INF) {
        int neg = (int)tern_graph_attr_int(c->n, "detect_negative", 1), pos = (int)tern_graph_attr_int(c->n, "detect_positive", 1);
        for (size_t k = 0; k < n; k++)
            o->i[k] = isinf(a[k]) && ((a[k] > 0 && pos) || (a[k] < 0 && neg));
    } else if (id == TERN_GOP_LEAKY_RELU) {
        float al = isnan(alpha) ? 0.01f : alpha;
        MAP(v < 0 ? al * v : v);
    } else if (id == TERN_GOP_ELU) {
        float al = isnan(alpha) ? 1.0f : alpha;
        MAP(v < 0 ? al * (expf(v) - 1.0f) : v);
    } else if (id == TERN_GOP_CELU) {
        float al = isnan(alpha) ? 1.0f : alpha;
        MAP(v != v ? v : fmaxf(0.0f, v) + fminf(0.0f, al * (expf(v / al) - 1.0f))); /* fmaxf would drop a NaN */
    } else if (id == TERN_GOP_SELU) {
        float al = isnan(alpha) ? 1.67326319217681884765625f : alpha;
        float ga = tern_graph_attr_float(c->n, "gamma", 1.05070102214813232421875f);
        MAP(v <= 0 ? ga * (al * expf(v) - al) : ga * v);
    } else if (id == TERN_GOP_THRESHOLDED_RELU) {
        float al = isnan(alpha) ? 1.0f : alpha;
        MAP(v > al ? v : 0.0f);
    } else if (id == TERN_GOP_HARD_SIGMOID) {
        float al = isnan(alpha) ? 0.2f : alpha, be = isnan(beta) ? 0.5f : beta;
        MAP(v != v ? v : fmaxf(0.0f, fminf(1.0f, al * v + be)));
    } else if (id == TERN_GOP_HARD_SWISH) /* the definition's alpha = 1/6 in fp32, times x (not x / 6) */
        MAP(v * fmaxf(0.0f, fminf(1.0f, v * (1.0f / 6.0f) + 0.5f)));
    else if (id == TERN_GOP_MISH) MAP(v * tanhf(v > 20 ? v : log1pf(expf(v))));
    else if (id == TERN_GOP_GELU) {
        const char *ap = tern_graph_attr_string(c->n, "approximate", "none");
        if (strcmp(ap, "tanh") == 0)
            MAP(gelu_tanh(v));
        else if (strcmp(ap, "none") == 0)
            MAP(gelu_erf(v));
        else
            return efail(c, TERN_ERR_INVALID, "approximate \"%.40s\" is not \"none\" or \"tanh\"", ap);
    } else if (id == TERN_GOP_SHRINK) {
        float bias = tern_graph_attr_float(c->n, "bias", 0.0f), lambd = tern_graph_attr_float(c->n, "lambd", 0.5f);
        MAP(v < -lambd ? v + bias : v > lambd ? v - bias : 0.0f);
    } else if (id == TERN_GOP_CLIP) {
        float lo = -INFINITY, hi = INFINITY;
        if (c->opset < 11) {
            lo = tern_graph_attr_float(c->n, "min", -INFINITY);
            hi = tern_graph_attr_float(c->n, "max", INFINITY);
        } else {
            if (IN(1) && IN(1)->count)
                lo = (float)rd(IN(1), 0);
            if (IN(2) && IN(2)->count)
                hi = (float)rd(IN(2), 0);
        }
        MAP(isnan(v) ? v : v < lo ? lo : v > hi ? hi : v);
    } else /* Identity, Dropout */
        MAP(v);
#undef MAP
    graph_tensor_normalize(o);
    return TERN_OK;
}

/* Text <-> float32 (numpy's str() and str->float32, tern_f32_format / tern_f32_parse), as the device does. */
static tern_status cast_text(const ectx *c, const tern_host_tensor *x, tern_host_tensor *o)
{
    for (size_t e = 0; e < x->count; e++) {
        if (x->s && o->s) {
            tern_error er;
            if (tern_host_tensor_set_text(o, e, x->s[e], strlen(x->s[e]), &er))
                return efail(c, er.code, "%s", er.msg);
        } else if (x->s) {
            if (tern_f32_parse(x->s[e], strlen(x->s[e]), &o->f[e]))
                return efail(c, TERN_ERR_INVALID, "element %zu \"%.40s\" is not a number", e, x->s[e]);
        } else {
            char text[TERN_F32_TEXT_MAX];
            size_t len = tern_f32_format(x->f[e], text);
            tern_error er;
            if (tern_host_tensor_set_text(o, e, text, len, &er))
                return efail(c, er.code, "%s", er.msg);
        }
    }
    return TERN_OK;
}

static tern_status cast_to(const ectx *c, const tern_host_tensor *x, tern_elem_type to, int k)
{
    if (!tern_elem_is_valid((int)to) && to != TERN_ELEM_STRING)
        return efail(c, TERN_ERR_UNSUPPORTED, "cast to type %d (%s) is not supported", (int)to, tern_elem_name(to));
    if ((x->type == TERN_ELEM_STRING) != (to == TERN_ELEM_STRING) &&
        (x->type == TERN_ELEM_STRING ? to : x->type) != TERN_ELEM_FLOAT)
        return efail(c, TERN_ERR_UNSUPPORTED, "cast from %s to %s: text converts only to and from float",
                     tern_elem_name(x->type), tern_elem_name(to));
    tern_host_tensor *o;
    tern_status st = eout(c, k, to, x->rank, x->dims, &o);
    if (st || !o)
        return st;
    if (x->s || o->s)
        return cast_text(c, x, o);
    for (size_t e = 0; e < x->count; e++) {
        if (o->f)
            o->f[e] = x->f ? x->f[e]
                           : (x->type == TERN_ELEM_UINT64 ? (float)(uint64_t)x->i[e] : (float)x->i[e]);
        else if (x->i)
            o->i[e] = x->i[e];
        else {
            float v = x->f[e];
            if (to == TERN_ELEM_BOOL)
                o->i[e] = v != 0;
            else if (isnan(v))
                o->i[e] = 0;
            else if (v >= 9.2233720e18f)
                o->i[e] = INT64_MAX;
            else if (v <= -9.2233720e18f)
                o->i[e] = INT64_MIN;
            else
                o->i[e] = (int64_t)v;
        }
    }
    graph_tensor_normalize(o);
    return TERN_OK;
}

tern_status graph_ev_cast(const ectx *c)
{
    tern_status st;
    if ((st = ereq(c, 0, 0)))
        return st;
    if (c->n->op_id == TERN_GOP_CAST_LIKE) {
        if ((st = ereq(c, 1, 0)))
            return st;
        return cast_to(c, IN(0), IN(1)->type, 0);
    }
    const tern_graph_attr *to = tern_graph_node_attr(c->n, "to");
    if (!to || to->type != TERN_ATTR_INT)
        return efail(c, TERN_ERR_INVALID, "attribute \"to\" (int) is required");
    return cast_to(c, IN(0), (tern_elem_type)(to->i < 0 || to->i > 64 ? 0 : to->i), 0);
}
