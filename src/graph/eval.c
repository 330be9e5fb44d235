/* The host reference evaluator, part 1: dispatch, elementwise ops (numpy broadcasting, float and int paths),
 * casts, and the data-movement ops (Reshape, Transpose, Concat, Split, Slice, Gather, Expand, Pad, Tile, ...).
 * Float types compute in fp32 and are rounded to their type at the end of the node (float16/bfloat16); integer
 * and bool types compute in int64 with wrap-around (unsigned arithmetic, so overflow is defined) and are wrapped
 * to their width. The numerics ops (MatMul, Conv, pools, norms, reductions) are in eval_nn.c. */
#include "eval_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

tern_status efail(const ectx *c, tern_status code, const char *fmt, ...)
{
    if (!c->err)
        return code;
    char msg[TERN_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return tern_error_set(c->err, code, "%s: %s", c->label, msg);
}

tern_status eout(const ectx *c, int k, tern_elem_type type, int rank, const int64_t *dims, tern_host_tensor **t)
{
    *t = NULL;
    if (!WANT_OUT(k))
        return TERN_OK;
    tern_error e;
    if (tern_host_tensor_new(type, rank, dims, t, &e))
        return efail(c, e.code, "output %d: %s", k, e.msg);
    c->out[k] = *t;
    return TERN_OK;
}

void ekeep(const ectx *c, int k, tern_host_tensor *t)
{
    if (WANT_OUT(k))
        c->out[k] = t;
    else
        tern_host_tensor_free(t);
}

tern_status ereq(const ectx *c, int k, int want_float)
{
    const tern_host_tensor *t = IN(k);
    if (!t)
        return efail(c, TERN_ERR_INVALID, "input %d is required", k);
    if (want_float && !t->f)
        return efail(c, TERN_ERR_INVALID, "input %d must be a float tensor, got %s", k, tern_elem_name(t->type));
    return TERN_OK;
}

tern_status eints(const ectx *c, int k, int64_t *buf, int max, int *n)
{
    const tern_host_tensor *t = IN(k);
    if (!t || !t->i || t->rank > 1)
        return efail(c, TERN_ERR_INVALID, "input %d must be a 1-D integer tensor%s", k, t ? "" : " (missing)");
    if (t->count > (size_t)max)
        return efail(c, TERN_ERR_RANGE, "input %d holds %zu values, at most %d allowed", k, t->count, max);
    for (size_t e = 0; e < t->count; e++)
        buf[e] = t->i[e];
    *n = (int)t->count;
    return TERN_OK;
}


/* ---- broadcasting iterator over up to 3 inputs ---- */
typedef struct {
    int rank, nin;
    int64_t dims[TERN_GRAPH_MAX_RANK], idx[TERN_GRAPH_MAX_RANK], str[3][TERN_GRAPH_MAX_RANK];
    size_t off[3];
} bcit;

static void bcit_init(bcit *b, int rank, const int64_t *dims, int nin, const tern_host_tensor *const *ts)
{
    memset(b, 0, sizeof *b);
    b->rank = rank;
    b->nin = nin;
    for (int d = 0; d < rank; d++)
        b->dims[d] = dims[d];
    for (int k = 0; k < nin; k++) {
        int64_t st[TERN_GRAPH_MAX_RANK];
        ev_strides(ts[k]->rank, ts[k]->dims, st);
        for (int d = 0; d < rank; d++) {
            int id = d - (rank - ts[k]->rank);
            b->str[k][d] = id >= 0 && ts[k]->dims[id] != 1 ? st[id] : 0;
        }
    }
}

static inline void bcit_next(bcit *b)
{
    for (int d = b->rank - 1; d >= 0; d--) {
        b->idx[d]++;
        for (int k = 0; k < b->nin; k++)
            b->off[k] += (size_t)b->str[k][d];
        if (b->idx[d] < b->dims[d])
            return;
        for (int k = 0; k < b->nin; k++)
            b->off[k] -= (size_t)(b->str[k][d] * b->dims[d]);
        b->idx[d] = 0;
    }
}

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

static inline double rd(const tern_host_tensor *t, size_t off) { return t->f ? (double)t->f[off] : (double)t->i[off]; }

/* double -> int64 without undefined behaviour: NaN -> 0, saturating */

/* an integer scalar input as int64, exactly for integer tensors */
static int64_t ri(const tern_host_tensor *t, size_t off) { return t->i ? t->i[off] : d2i((double)t->f[off]); }

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

static tern_status ev_binary(const ectx *c)
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
static tern_status ev_variadic(const ectx *c)
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

static tern_status ev_where(const ectx *c)
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

static tern_status ev_unary(const ectx *c)
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

static tern_status ev_cast(const ectx *c)
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

/* ---- data movement ---- */
static tern_status copy_out(const ectx *c, int k, const tern_host_tensor *x, int rank, const int64_t *dims)
{
    tern_host_tensor *o;
    tern_status st = eout(c, k, x->type, rank, dims, &o);
    if (st || !o)
        return st;
    if (o->count != x->count)
        return efail(c, TERN_ERR_INVALID, "internal: %zu elements into %zu", x->count, o->count);
    if (o->f)
        memcpy(o->f, x->f, x->count * sizeof(float));
    else
        memcpy(o->i, x->i, x->count * sizeof(int64_t));
    return TERN_OK;
}

static tern_status ev_reshape(const ectx *c)
{
    tern_status st;
    if ((st = ereq(c, 0, 0)))
        return st;
    int64_t shape[TERN_GRAPH_MAX_RANK + 1], dims[TERN_GRAPH_MAX_RANK];
    int n;
    if (c->opset < 5 || c->n_in < 2) {
        size_t na;
        const int64_t *s = graph_attr_ints(c->n, "shape", &na);
        if (na > TERN_GRAPH_MAX_RANK)
            return efail(c, TERN_ERR_RANGE, "target rank %zu above the limit", na);
        for (size_t k = 0; k < na; k++)
            shape[k] = s[k];
        n = (int)na;
    } else if ((st = eints(c, 1, shape, TERN_GRAPH_MAX_RANK + 1, &n)))
        return st;
    char why[200];
    if (graph_reshape_dims(IN(0)->rank, IN(0)->dims, shape, n, (int)tern_graph_attr_int(c->n, "allowzero", 0), dims,
                           why, sizeof why))
        return efail(c, TERN_ERR_INVALID, "%s", why);
    return copy_out(c, 0, IN(0), n, dims);
}

static tern_status ev_flatten(const ectx *c)
{
    tern_status st;
    if ((st = ereq(c, 0, 0)))
        return st;
    const tern_host_tensor *x = IN(0);
    int64_t axis = tern_graph_attr_int(c->n, "axis", 1);
    if (axis < -x->rank || axis > x->rank)
        return efail(c, TERN_ERR_INVALID, "axis %lld outside [%d, %d]", (long long)axis, -x->rank, x->rank);
    if (axis < 0)
        axis += x->rank;
    int64_t dims[2] = {1, 1};
    for (int d = 0; d < x->rank; d++)
        dims[d < axis ? 0 : 1] *= x->dims[d];
    return copy_out(c, 0, x, 2, dims);
}

static tern_status axes_of(const ectx *c, int input, const char *attr, int64_t *axes, int *n, int *given)
{
    *n = 0;
    *given = 0;
    if (IN(input)) {
        *given = 1;
        return eints(c, input, axes, TERN_GRAPH_MAX_RANK * 2, n);
    }
    size_t na;
    const int64_t *a = graph_attr_ints(c->n, attr, &na);
    if (a) {
        if (na > TERN_GRAPH_MAX_RANK * 2)
            return efail(c, TERN_ERR_RANGE, "%zu axes", na);
        for (size_t k = 0; k < na; k++)
            axes[k] = a[k];
        *n = (int)na;
        *given = 1;
    }
    return TERN_OK;
}

static tern_status ev_unsqueeze(const ectx *c)
{
    tern_status st;
    if ((st = ereq(c, 0, 0)))
        return st;
    const tern_host_tensor *x = IN(0);
    int64_t axes[TERN_GRAPH_MAX_RANK * 2];
    int n, given;
    if ((st = axes_of(c, 1, "axes", axes, &n, &given)))
        return st;
    int rank = x->rank + n;
    if (!given || rank > TERN_GRAPH_MAX_RANK)
        return efail(c, TERN_ERR_INVALID, given ? "result rank %d above the limit" : "axes are required (rank %d)",
                     rank);
    int is_new[TERN_GRAPH_MAX_RANK] = {0};
    char why[200];
    for (int k = 0; k < n; k++) {
        int a;
        if (graph_norm_axis(axes[k], rank, &a, why, sizeof why, "axis"))
            return efail(c, TERN_ERR_INVALID, "%s", why);
        if (is_new[a])
            return efail(c, TERN_ERR_INVALID, "axis %d given twice", a);
        is_new[a] = 1;
    }
    int64_t dims[TERN_GRAPH_MAX_RANK];
    for (int d = 0, s = 0; d < rank; d++)
        dims[d] = is_new[d] ? 1 : x->dims[s++];
    return copy_out(c, 0, x, rank, dims);
}

static tern_status ev_squeeze(const ectx *c)
{
    tern_status st;
    if ((st = ereq(c, 0, 0)))
        return st;
    const tern_host_tensor *x = IN(0);
    int64_t axes[TERN_GRAPH_MAX_RANK * 2];
    int n, given;
    if ((st = axes_of(c, 1, "axes", axes, &n, &given)))
        return st;
    int drop[TERN_GRAPH_MAX_RANK] = {0};
    char why[200];
    if (!given)
        for (int d = 0; d < x->rank; d++)
            drop[d] = x->dims[d] == 1;
    for (int k = 0; k < n; k++) {
        int a;
        if (graph_norm_axis(axes[k], x->rank, &a, why, sizeof why, "axis"))
            return efail(c, TERN_ERR_INVALID, "%s", why);
        if (x->dims[a] != 1)
            return efail(c, TERN_ERR_INVALID, "axis %d has size %lld, not 1", a, (long long)x->dims[a]);
        drop[a] = 1;
    }
    int64_t dims[TERN_GRAPH_MAX_RANK];
    int r = 0;
    for (int d = 0; d < x->rank; d++)
        if (!drop[d])
            dims[r++] = x->dims[d];
    return copy_out(c, 0, x, r, dims);
}

static tern_status ev_transpose(const ectx *c)
{
    tern_status st;
    if ((st = ereq(c, 0, 0)))
        return st;
    const tern_host_tensor *x = IN(0);
    int r = x->rank;
    int perm[TERN_GRAPH_MAX_RANK];
    size_t np;
    const int64_t *p = graph_attr_ints(c->n, "perm", &np);
    if (p && np != (size_t)r)
        return efail(c, TERN_ERR_INVALID, "perm has %zu entries for rank %d", np, r);
    int seen[TERN_GRAPH_MAX_RANK] = {0};
    for (int d = 0; d < r; d++) {
        int64_t v = p ? p[d] : r - 1 - d;
        if (v < 0 || v >= r || seen[v])
            return efail(c, TERN_ERR_INVALID, "perm is not a permutation of 0..%d", r - 1);
        seen[v] = 1;
        perm[d] = (int)v;
    }
    int64_t dims[TERN_GRAPH_MAX_RANK], xs[TERN_GRAPH_MAX_RANK], ps[TERN_GRAPH_MAX_RANK];
    for (int d = 0; d < r; d++)
        dims[d] = x->dims[perm[d]];
    tern_host_tensor *o;
    if ((st = eout(c, 0, x->type, r, dims, &o)) || !o)
        return st;
    ev_strides(r, x->dims, xs);
    for (int d = 0; d < r; d++)
        ps[d] = xs[perm[d]];
    int64_t idx[TERN_GRAPH_MAX_RANK] = {0};
    size_t off = 0;
    for (size_t k = 0; k < o->count; k++) {
        if (o->f)
            o->f[k] = x->f[off];
        else
            o->i[k] = x->i[off];
        for (int d = r - 1; d >= 0; d--) {
            idx[d]++;
            off += (size_t)ps[d];
            if (idx[d] < dims[d])
                break;
            off -= (size_t)(ps[d] * dims[d]);
            idx[d] = 0;
        }
    }
    return TERN_OK;
}

static tern_status ev_concat(const ectx *c)
{
    tern_status st;
    if ((st = ereq(c, 0, 0)))
        return st;
    const tern_host_tensor *x0 = IN(0);
    int ax;
    char why[200];
    if (!tern_graph_node_attr(c->n, "axis") && c->opset >= 4)
        return efail(c, TERN_ERR_INVALID, "attribute \"axis\" is required");
    if (graph_norm_axis(tern_graph_attr_int(c->n, "axis", 1), x0->rank, &ax, why, sizeof why, "axis"))
        return efail(c, TERN_ERR_INVALID, "%s", why);
    int64_t dims[TERN_GRAPH_MAX_RANK];
    memcpy(dims, x0->dims, sizeof dims);
    dims[ax] = 0;
    for (int k = 0; k < c->n_in; k++) {
        const tern_host_tensor *t = IN(k);
        if (!t)
            return efail(c, TERN_ERR_INVALID, "input %d is missing", k);
        if (t->type != x0->type || t->rank != x0->rank)
            return efail(c, TERN_ERR_INVALID, "input %d is %s rank %d, input 0 is %s rank %d", k,
                         tern_elem_name(t->type), t->rank, tern_elem_name(x0->type), x0->rank);
        for (int d = 0; d < t->rank; d++)
            if (d != ax && t->dims[d] != x0->dims[d])
                return efail(c, TERN_ERR_INVALID, "input %d dim %d is %lld, input 0 has %lld", k, d,
                             (long long)t->dims[d], (long long)x0->dims[d]);
        dims[ax] += t->dims[ax];
    }
    tern_host_tensor *o;
    if ((st = eout(c, 0, x0->type, x0->rank, dims, &o)) || !o)
        return st;
    size_t outer = 1, inner = 1;
    for (int d = 0; d < ax; d++)
        outer *= (size_t)dims[d];
    for (int d = ax + 1; d < x0->rank; d++)
        inner *= (size_t)dims[d];
    size_t orow = (size_t)dims[ax] * inner, pos = 0;
    for (int k = 0; k < c->n_in; k++) {
        const tern_host_tensor *t = IN(k);
        size_t row = (size_t)t->dims[ax] * inner;
        for (size_t q = 0; q < outer; q++) {
            if (o->f)
                memcpy(o->f + q * orow + pos, t->f + q * row, row * sizeof(float));
            else
                memcpy(o->i + q * orow + pos, t->i + q * row, row * sizeof(int64_t));
        }
        pos += row;
    }
    return TERN_OK;
}

static tern_status ev_split(const ectx *c)
{
    tern_status st;
    if ((st = ereq(c, 0, 0)))
        return st;
    const tern_host_tensor *x = IN(0);
    int ax;
    char why[200];
    if (graph_norm_axis(tern_graph_attr_int(c->n, "axis", 0), x->rank, &ax, why, sizeof why, "axis"))
        return efail(c, TERN_ERR_INVALID, "%s", why);
    int nout = c->n_out;
    if (nout < 1)
        return efail(c, TERN_ERR_INVALID, "no outputs");
    int64_t *sizes = calloc((size_t)nout, sizeof *sizes);
    if (!sizes)
        return efail(c, TERN_ERR_NOMEM, "out of memory");
    size_t ns = 0;
    const int64_t *sa = NULL;
    if (IN(1)) {
        if (!IN(1)->i || IN(1)->rank > 1) {
            free(sizes);
            return efail(c, TERN_ERR_INVALID, "split input must be a 1-D int64 tensor");
        }
        sa = IN(1)->i;
        ns = IN(1)->count;
    } else
        sa = graph_attr_ints(c->n, "split", &ns);
    int64_t total = 0, dim = x->dims[ax];
    if (sa) {
        if (ns != (size_t)nout) {
            free(sizes);
            return efail(c, TERN_ERR_INVALID, "split has %zu sizes for %d outputs", ns, nout);
        }
        for (int k = 0; k < nout; k++) {
            if (sa[k] < 0 || sa[k] > dim) {
                free(sizes);
                return efail(c, TERN_ERR_INVALID, "split size %lld outside [0, %lld]", (long long)sa[k],
                             (long long)dim);
            }
            sizes[k] = sa[k];
            total += sa[k];
        }
    } else {
        int64_t chunk = (dim + nout - 1) / nout;
        for (int k = 0; k < nout; k++) {
            sizes[k] = dim - total < chunk ? dim - total : chunk;
            total += sizes[k];
        }
    }
    if (total != dim) {
        free(sizes);
        return efail(c, TERN_ERR_INVALID, "split sizes sum to %lld, axis %d has %lld", (long long)total, ax,
                     (long long)dim);
    }
    size_t outer = 1, inner = 1;
    for (int d = 0; d < ax; d++)
        outer *= (size_t)x->dims[d];
    for (int d = ax + 1; d < x->rank; d++)
        inner *= (size_t)x->dims[d];
    size_t pos = 0, row = (size_t)dim * inner;
    for (int k = 0; k < nout; k++) {
        int64_t dims[TERN_GRAPH_MAX_RANK];
        memcpy(dims, x->dims, sizeof dims);
        dims[ax] = sizes[k];
        tern_host_tensor *o;
        if ((st = eout(c, k, x->type, x->rank, dims, &o))) {
            free(sizes);
            return st;
        }
        size_t orow = (size_t)sizes[k] * inner;
        if (o)
            for (size_t q = 0; q < outer; q++) {
                if (o->f)
                    memcpy(o->f + q * orow, x->f + q * row + pos, orow * sizeof(float));
                else
                    memcpy(o->i + q * orow, x->i + q * row + pos, orow * sizeof(int64_t));
            }
        pos += orow;
    }
    free(sizes);
    return TERN_OK;
}

static tern_status ev_slice(const ectx *c)
{
    tern_status st;
    if ((st = ereq(c, 0, 0)))
        return st;
    const tern_host_tensor *x = IN(0);
    int r = x->rank;
    int64_t starts[16], ends[16], axes[16], steps[16];
    int ns, ne, na = -1, nst = -1;
    if (c->opset < 10) {
        size_t a, b, d;
        const int64_t *s = graph_attr_ints(c->n, "starts", &a), *e = graph_attr_ints(c->n, "ends", &b),
                      *ax = graph_attr_ints(c->n, "axes", &d);
        if (!s || !e || a != b || a > 16 || (ax && d != a))
            return efail(c, TERN_ERR_INVALID, "starts/ends attributes missing or of different lengths");
        ns = ne = (int)a;
        memcpy(starts, s, a * sizeof *s);
        memcpy(ends, e, a * sizeof *e);
        if (ax) {
            memcpy(axes, ax, a * sizeof *ax);
            na = (int)a;
        }
    } else {
        if ((st = eints(c, 1, starts, 16, &ns)) || (st = eints(c, 2, ends, 16, &ne)))
            return st;
        if (IN(3) && (st = eints(c, 3, axes, 16, &na)))
            return st;
        if (IN(4) && (st = eints(c, 4, steps, 16, &nst)))
            return st;
    }
    if (ns != ne || (na >= 0 && na != ns) || (nst >= 0 && nst != ns))
        return efail(c, TERN_ERR_INVALID, "starts (%d), ends (%d), axes (%d), steps (%d) lengths differ", ns, ne, na,
                     nst);
    int64_t b[TERN_GRAPH_MAX_RANK], stp[TERN_GRAPH_MAX_RANK], dims[TERN_GRAPH_MAX_RANK];
    int used[TERN_GRAPH_MAX_RANK] = {0};
    for (int d = 0; d < r; d++) {
        b[d] = 0;
        stp[d] = 1;
        dims[d] = x->dims[d];
    }
    char why[200];
    for (int k = 0; k < ns; k++) {
        int a;
        if (graph_norm_axis(na >= 0 ? axes[k] : k, r, &a, why, sizeof why, "axis"))
            return efail(c, TERN_ERR_INVALID, "%s", why);
        if (used[a])
            return efail(c, TERN_ERR_INVALID, "axis %d sliced twice", a);
        used[a] = 1;
        int64_t step = nst >= 0 ? steps[k] : 1;
        if (step == 0)
            return efail(c, TERN_ERR_INVALID, "step 0 on axis %d", a);
        int64_t s = starts[k], e = ends[k];
        dims[a] = graph_slice_len(x->dims[a], &s, &e, step);
        b[a] = s;
        stp[a] = step;
    }
    tern_host_tensor *o;
    if ((st = eout(c, 0, x->type, r, dims, &o)) || !o)
        return st;
    int64_t xs[TERN_GRAPH_MAX_RANK], idx[TERN_GRAPH_MAX_RANK] = {0};
    ev_strides(r, x->dims, xs);
    for (size_t k = 0; k < o->count; k++) {
        int64_t off = 0;
        for (int d = 0; d < r; d++)
            off += (b[d] + idx[d] * stp[d]) * xs[d];
        if (o->f)
            o->f[k] = x->f[off];
        else
            o->i[k] = x->i[off];
        ev_next_index(idx, dims, r);
    }
    return TERN_OK;
}

static tern_status ev_gather(const ectx *c)
{
    tern_status st;
    if ((st = ereq(c, 0, 0)) || (st = ereq(c, 1, 0)))
        return st;
    const tern_host_tensor *x = IN(0), *ind = IN(1);
    if (!ind->i || ind->type == TERN_ELEM_BOOL)
        return efail(c, TERN_ERR_INVALID, "indices must be int32/int64, got %s", tern_elem_name(ind->type));
    int ax;
    char why[200];
    if (graph_norm_axis(tern_graph_attr_int(c->n, "axis", 0), x->rank, &ax, why, sizeof why, "axis"))
        return efail(c, TERN_ERR_INVALID, "%s", why);
    int r = x->rank - 1 + ind->rank;
    if (r > TERN_GRAPH_MAX_RANK)
        return efail(c, TERN_ERR_RANGE, "result rank %d above the limit", r);
    int64_t dims[TERN_GRAPH_MAX_RANK];
    int q = 0;
    for (int d = 0; d < ax; d++)
        dims[q++] = x->dims[d];
    for (int d = 0; d < ind->rank; d++)
        dims[q++] = ind->dims[d];
    for (int d = ax + 1; d < x->rank; d++)
        dims[q++] = x->dims[d];
    int64_t n = x->dims[ax];
    for (size_t k = 0; k < ind->count; k++)
        if (ind->i[k] < -n || ind->i[k] >= n)
            return efail(c, TERN_ERR_RANGE, "index %lld at position %zu outside [%lld, %lld) for axis %d",
                         (long long)ind->i[k], k, (long long)-n, (long long)n, ax);
    tern_host_tensor *o;
    if ((st = eout(c, 0, x->type, r, dims, &o)) || !o)
        return st;
    size_t outer = 1, inner = 1;
    for (int d = 0; d < ax; d++)
        outer *= (size_t)x->dims[d];
    for (int d = ax + 1; d < x->rank; d++)
        inner *= (size_t)x->dims[d];
    size_t pos = 0;
    for (size_t a = 0; a < outer; a++)
        for (size_t k = 0; k < ind->count; k++) {
            int64_t ix = ind->i[k] < 0 ? ind->i[k] + n : ind->i[k];
            size_t src = (a * (size_t)n + (size_t)ix) * inner;
            if (o->f)
                memcpy(o->f + pos, x->f + src, inner * sizeof(float));
            else
                memcpy(o->i + pos, x->i + src, inner * sizeof(int64_t));
            pos += inner;
        }
    return TERN_OK;
}

static tern_status ev_gather_elements(const ectx *c)
{
    tern_status st;
    if ((st = ereq(c, 0, 0)) || (st = ereq(c, 1, 0)))
        return st;
    const tern_host_tensor *x = IN(0), *ind = IN(1);
    int ax;
    char why[200];
    if (!ind->i || ind->rank != x->rank)
        return efail(c, TERN_ERR_INVALID, "indices must be integers of the data's rank");
    if (graph_norm_axis(tern_graph_attr_int(c->n, "axis", 0), x->rank, &ax, why, sizeof why, "axis"))
        return efail(c, TERN_ERR_INVALID, "%s", why);
    tern_host_tensor *o;
    if ((st = eout(c, 0, x->type, ind->rank, ind->dims, &o)) || !o)
        return st;
    int64_t xs[TERN_GRAPH_MAX_RANK], idx[TERN_GRAPH_MAX_RANK] = {0};
    ev_strides(x->rank, x->dims, xs);
    for (size_t k = 0; k < o->count; k++) {
        int64_t off = 0, v = ind->i[k];
        if (v < -x->dims[ax] || v >= x->dims[ax])
            return efail(c, TERN_ERR_RANGE, "index %lld outside axis %d of size %lld", (long long)v, ax,
                         (long long)x->dims[ax]);
        if (v < 0)
            v += x->dims[ax];
        for (int d = 0; d < x->rank; d++) {
            int64_t p = d == ax ? v : idx[d];
            if (p >= x->dims[d])
                return efail(c, TERN_ERR_INVALID, "indices dim %d exceeds data dim", d);
            off += p * xs[d];
        }
        if (o->f)
            o->f[k] = x->f[off];
        else
            o->i[k] = x->i[off];
        ev_next_index(idx, ind->dims, x->rank);
    }
    return TERN_OK;
}

static tern_status broadcast_to(const ectx *c, const tern_host_tensor *x, int rank, const int64_t *dims)
{
    tern_host_tensor *o;
    tern_status st = eout(c, 0, x->type, rank, dims, &o);
    if (st || !o)
        return st;
    bcit it;
    const tern_host_tensor *ts[1] = {x};
    bcit_init(&it, rank, dims, 1, ts);
    for (size_t k = 0; k < o->count; k++, bcit_next(&it)) {
        if (o->f)
            o->f[k] = x->f[it.off[0]];
        else
            o->i[k] = x->i[it.off[0]];
    }
    return TERN_OK;
}

static tern_status ev_expand(const ectx *c)
{
    tern_status st;
    if ((st = ereq(c, 0, 0)))
        return st;
    int64_t shape[TERN_GRAPH_MAX_RANK + 1], dims[TERN_GRAPH_MAX_RANK];
    int n, r;
    if ((st = eints(c, 1, shape, TERN_GRAPH_MAX_RANK, &n)))
        return st;
    for (int k = 0; k < n; k++)
        if (shape[k] < 0)
            return efail(c, TERN_ERR_INVALID, "shape[%d] = %lld is negative", k, (long long)shape[k]);
    char why[200];
    if (graph_broadcast(IN(0)->rank, IN(0)->dims, n, shape, &r, dims, why, sizeof why))
        return efail(c, TERN_ERR_INVALID, "%s", why);
    return broadcast_to(c, IN(0), r, dims);
}

static tern_status ev_tile(const ectx *c)
{
    tern_status st;
    if ((st = ereq(c, 0, 0)))
        return st;
    const tern_host_tensor *x = IN(0);
    int64_t rep[TERN_GRAPH_MAX_RANK + 1], dims[TERN_GRAPH_MAX_RANK];
    int n;
    if ((st = eints(c, 1, rep, TERN_GRAPH_MAX_RANK + 1, &n)))
        return st;
    if (n != x->rank)
        return efail(c, TERN_ERR_INVALID, "repeats has %d entries for rank %d", n, x->rank);
    for (int d = 0; d < n; d++) {
        if (rep[d] < 0 || (x->dims[d] && rep[d] > GRAPH_MAX_ELEMS / x->dims[d]))
            return efail(c, TERN_ERR_INVALID, "repeats[%d] = %lld is invalid", d, (long long)rep[d]);
        dims[d] = x->dims[d] * rep[d];
    }
    tern_host_tensor *o;
    if ((st = eout(c, 0, x->type, n, dims, &o)) || !o)
        return st;
    int64_t xs[TERN_GRAPH_MAX_RANK], idx[TERN_GRAPH_MAX_RANK] = {0};
    ev_strides(n, x->dims, xs);
    for (size_t k = 0; k < o->count; k++) {
        int64_t off = 0;
        for (int d = 0; d < n; d++)
            off += (idx[d] % x->dims[d]) * xs[d];
        if (o->f)
            o->f[k] = x->f[off];
        else
            o->i[k] = x->i[off];
        ev_next_index(idx, dims, n);
    }
    return TERN_OK;
}


static tern_status ev_shape(const ectx *c)
{
    tern_status st;
    if ((st = ereq(c, 0, 0)))
        return st;
    const tern_host_tensor *x = IN(0);
    int64_t r = x->rank, s = tern_graph_attr_int(c->n, "start", 0), e = tern_graph_attr_int(c->n, "end", r);
    if (s < 0)
        s = s < -r ? 0 : s + r;
    if (e < 0)
        e = e < -r ? 0 : e + r;
    if (s > r)
        s = r;
    if (e > r)
        e = r;
    int64_t n = e > s ? e - s : 0;
    tern_host_tensor *o;
    if ((st = eout(c, 0, TERN_ELEM_INT64, 1, &n, &o)) || !o)
        return st;
    for (int64_t k = 0; k < n; k++)
        o->i[k] = x->dims[s + k];
    return TERN_OK;
}

static tern_status ev_size(const ectx *c)
{
    tern_status st;
    if ((st = ereq(c, 0, 0)))
        return st;
    tern_host_tensor *o;
    if ((st = eout(c, 0, TERN_ELEM_INT64, 0, NULL, &o)) || !o)
        return st;
    o->i[0] = (int64_t)IN(0)->count;
    return TERN_OK;
}

static tern_status ev_constant_of_shape(const ectx *c)
{
    tern_status st;
    int64_t shape[TERN_GRAPH_MAX_RANK + 1];
    int n;
    if ((st = eints(c, 0, shape, TERN_GRAPH_MAX_RANK, &n)))
        return st;
    for (int k = 0; k < n; k++)
        if (shape[k] < 0)
            return efail(c, TERN_ERR_INVALID, "shape[%d] = %lld is negative", k, (long long)shape[k]);
    const tern_graph_attr *v = tern_graph_node_attr(c->n, "value");
    if (v && (v->type != TERN_ATTR_TENSOR || v->t->count != 1))
        return efail(c, TERN_ERR_INVALID, "value must be a one-element tensor");
    tern_host_tensor *o;
    if ((st = eout(c, 0, v ? v->t->type : TERN_ELEM_FLOAT, n, shape, &o)) || !o)
        return st;
    for (size_t k = 0; k < o->count; k++) {
        if (o->f)
            o->f[k] = v ? v->t->f[0] : 0.0f;
        else
            o->i[k] = v->t->i[0];
    }
    return TERN_OK;
}

static tern_status ev_range(const ectx *c)
{
    tern_status st;
    for (int k = 0; k < 3; k++) {
        if ((st = ereq(c, k, 0)))
            return st;
        if (IN(k)->count != 1)
            return efail(c, TERN_ERR_INVALID, "input %d must be a scalar", k);
    }
    tern_elem_type t = IN(0)->type;
    double s = rd(IN(0), 0), l = rd(IN(1), 0), d = rd(IN(2), 0);
    if (d == 0 || isnan(s) || isnan(l) || isnan(d))
        return efail(c, TERN_ERR_INVALID, "delta is 0 or an operand is NaN");
    double nd = ceil((l - s) / d);
    if (nd > (double)GRAPH_MAX_ELEMS)
        return efail(c, TERN_ERR_RANGE, "%g elements exceed the limit", nd);
    int64_t n = nd > 0 ? (int64_t)nd : 0;
    tern_host_tensor *o;
    if ((st = eout(c, 0, t, 1, &n, &o)) || !o)
        return st;
    for (int64_t k = 0; k < n; k++) {
        if (o->f)
            o->f[k] = (float)(s + (double)k * d);
        else
            o->i[k] = (int64_t)((uint64_t)ri(IN(0), 0) + (uint64_t)k * (uint64_t)ri(IN(2), 0));
    }
    graph_tensor_normalize(o);
    return TERN_OK;
}

static tern_status ev_constant(const ectx *c)
{
    if (c->n->n_attrs != 1)
        return efail(c, TERN_ERR_INVALID, "needs exactly one value attribute, has %d", c->n->n_attrs);
    const tern_graph_attr *a = &c->n->attrs[0];
    tern_status st;
    tern_host_tensor *o;
    int64_t n = (int64_t)a->n;
    if (strcmp(a->name, "value") == 0 && a->type == TERN_ATTR_TENSOR) {
        if (!WANT_OUT(0))
            return TERN_OK;
        tern_error e;
        if (tern_host_tensor_clone(a->t, &o, &e))
            return efail(c, e.code, "%s", e.msg);
        c->out[0] = o;
        return TERN_OK;
    }
    if (strcmp(a->name, "value_float") == 0 && a->type == TERN_ATTR_FLOAT) {
        if ((st = eout(c, 0, TERN_ELEM_FLOAT, 0, NULL, &o)) || !o)
            return st;
        o->f[0] = a->f;
    } else if (strcmp(a->name, "value_int") == 0 && a->type == TERN_ATTR_INT) {
        if ((st = eout(c, 0, TERN_ELEM_INT64, 0, NULL, &o)) || !o)
            return st;
        o->i[0] = a->i;
    } else if (strcmp(a->name, "value_floats") == 0 && a->type == TERN_ATTR_FLOATS) {
        if ((st = eout(c, 0, TERN_ELEM_FLOAT, 1, &n, &o)) || !o)
            return st;
        memcpy(o->f, a->floats, a->n * sizeof(float));
    } else if (strcmp(a->name, "value_ints") == 0 && a->type == TERN_ATTR_INTS) {
        if ((st = eout(c, 0, TERN_ELEM_INT64, 1, &n, &o)) || !o)
            return st;
        memcpy(o->i, a->ints, a->n * sizeof(int64_t));
    } else
        return efail(c, TERN_ERR_UNSUPPORTED, "value attribute \"%s\" is not supported", a->name);
    return TERN_OK;
}

static tern_status ev_trilu(const ectx *c)
{
    tern_status st;
    if ((st = ereq(c, 0, 0)))
        return st;
    const tern_host_tensor *x = IN(0);
    if (x->rank < 2)
        return efail(c, TERN_ERR_INVALID, "input rank %d below 2", x->rank);
    int64_t k = IN(1) && IN(1)->count ? ri(IN(1), 0) : 0;
    int upper = (int)tern_graph_attr_int(c->n, "upper", 1);
    if ((st = copy_out(c, 0, x, x->rank, x->dims)) || !c->out[0])
        return st;
    tern_host_tensor *o = c->out[0];
    int64_t R = x->dims[x->rank - 2], C = x->dims[x->rank - 1];
    for (size_t e = 0; e < o->count; e++) {
        int64_t col = (int64_t)(e % (size_t)C), row = (int64_t)((e / (size_t)C) % (size_t)R);
        int keep = upper ? col - row >= k : col - row <= k;
        if (!keep) {
            if (o->f)
                o->f[e] = 0;
            else
                o->i[e] = 0;
        }
    }
    return TERN_OK;
}

static tern_status ev_cumsum(const ectx *c)
{
    tern_status st;
    if ((st = ereq(c, 0, 0)) || (st = ereq(c, 1, 0)))
        return st;
    const tern_host_tensor *x = IN(0);
    int ax;
    char why[200];
    if (graph_norm_axis(ri(IN(1), 0), x->rank, &ax, why, sizeof why, "axis"))
        return efail(c, TERN_ERR_INVALID, "%s", why);
    int excl = (int)tern_graph_attr_int(c->n, "exclusive", 0), rev = (int)tern_graph_attr_int(c->n, "reverse", 0);
    tern_host_tensor *o;
    if ((st = eout(c, 0, x->type, x->rank, x->dims, &o)) || !o)
        return st;
    size_t outer = 1, inner = 1, n = (size_t)x->dims[ax];
    for (int d = 0; d < ax; d++)
        outer *= (size_t)x->dims[d];
    for (int d = ax + 1; d < x->rank; d++)
        inner *= (size_t)x->dims[d];
    for (size_t a = 0; a < outer; a++)
        for (size_t b = 0; b < inner; b++) {
            double acc = 0;
            int64_t iacc = 0;
            for (size_t q = 0; q < n; q++) {
                size_t j = rev ? n - 1 - q : q, off = (a * n + j) * inner + b;
                if (o->f) {
                    if (excl) {
                        o->f[off] = (float)acc;
                        acc += x->f[off];
                    } else {
                        acc += x->f[off];
                        o->f[off] = (float)acc;
                    }
                } else {
                    if (excl) {
                        o->i[off] = iacc;
                        iacc = (int64_t)((uint64_t)iacc + (uint64_t)x->i[off]);
                    } else {
                        iacc = (int64_t)((uint64_t)iacc + (uint64_t)x->i[off]);
                        o->i[off] = iacc;
                    }
                }
            }
        }
    graph_tensor_normalize(o);
    return TERN_OK;
}

/* ---- dispatch ---- */
static const eval_fn table[TERN_GOP_COUNT] = {
    [TERN_GOP_ADD] = ev_binary, [TERN_GOP_SUB] = ev_binary, [TERN_GOP_MUL] = ev_binary, [TERN_GOP_DIV] = ev_binary,
    [TERN_GOP_POW] = ev_binary, [TERN_GOP_MOD] = ev_binary, [TERN_GOP_AND] = ev_binary, [TERN_GOP_OR] = ev_binary,
    [TERN_GOP_XOR] = ev_binary, [TERN_GOP_EQUAL] = ev_binary, [TERN_GOP_LESS] = ev_binary,
    [TERN_GOP_GREATER] = ev_binary, [TERN_GOP_LESS_OR_EQUAL] = ev_binary, [TERN_GOP_GREATER_OR_EQUAL] = ev_binary,
    [TERN_GOP_BIT_SHIFT] = ev_binary, [TERN_GOP_P_RELU] = ev_binary, [TERN_GOP_MAX] = ev_variadic,
    [TERN_GOP_MIN] = ev_variadic, [TERN_GOP_SUM] = ev_variadic, [TERN_GOP_MEAN] = ev_variadic,
    [TERN_GOP_WHERE] = ev_where, [TERN_GOP_NEG] = ev_unary, [TERN_GOP_ABS] = ev_unary, [TERN_GOP_RELU] = ev_unary,
    [TERN_GOP_SQRT] = ev_unary, [TERN_GOP_EXP] = ev_unary, [TERN_GOP_LOG] = ev_unary, [TERN_GOP_TANH] = ev_unary,
    [TERN_GOP_SIGMOID] = ev_unary, [TERN_GOP_ERF] = ev_unary, [TERN_GOP_RECIPROCAL] = ev_unary,
    [TERN_GOP_FLOOR] = ev_unary, [TERN_GOP_CEIL] = ev_unary, [TERN_GOP_ROUND] = ev_unary, [TERN_GOP_SIN] = ev_unary,
    [TERN_GOP_COS] = ev_unary, [TERN_GOP_TAN] = ev_unary, [TERN_GOP_ASIN] = ev_unary, [TERN_GOP_ACOS] = ev_unary,
    [TERN_GOP_ATAN] = ev_unary, [TERN_GOP_SINH] = ev_unary, [TERN_GOP_COSH] = ev_unary, [TERN_GOP_ASINH] = ev_unary,
    [TERN_GOP_ACOSH] = ev_unary, [TERN_GOP_ATANH] = ev_unary, [TERN_GOP_SOFTPLUS] = ev_unary,
    [TERN_GOP_SOFTSIGN] = ev_unary, [TERN_GOP_SIGN] = ev_unary, [TERN_GOP_NOT] = ev_unary,
    [TERN_GOP_IS_NAN] = ev_unary, [TERN_GOP_IS_INF] = ev_unary, [TERN_GOP_LEAKY_RELU] = ev_unary,
    [TERN_GOP_ELU] = ev_unary, [TERN_GOP_CELU] = ev_unary, [TERN_GOP_SELU] = ev_unary,
    [TERN_GOP_THRESHOLDED_RELU] = ev_unary, [TERN_GOP_HARD_SIGMOID] = ev_unary, [TERN_GOP_HARD_SWISH] = ev_unary,
    [TERN_GOP_MISH] = ev_unary, [TERN_GOP_GELU] = ev_unary, [TERN_GOP_SHRINK] = ev_unary, [TERN_GOP_CLIP] = ev_unary,
    [TERN_GOP_IDENTITY] = ev_unary, [TERN_GOP_DROPOUT] = ev_unary, [TERN_GOP_CAST] = ev_cast,
    [TERN_GOP_CAST_LIKE] = ev_cast, [TERN_GOP_RESHAPE] = ev_reshape, [TERN_GOP_FLATTEN] = ev_flatten,
    [TERN_GOP_UNSQUEEZE] = ev_unsqueeze, [TERN_GOP_SQUEEZE] = ev_squeeze, [TERN_GOP_TRANSPOSE] = ev_transpose,
    [TERN_GOP_CONCAT] = ev_concat, [TERN_GOP_SPLIT] = ev_split, [TERN_GOP_SLICE] = ev_slice,
    [TERN_GOP_GATHER] = ev_gather, [TERN_GOP_GATHER_ELEMENTS] = ev_gather_elements, [TERN_GOP_EXPAND] = ev_expand,
    [TERN_GOP_TILE] = ev_tile, [TERN_GOP_PAD] = graph_ev_pad, [TERN_GOP_SHAPE] = ev_shape, [TERN_GOP_SIZE] = ev_size,
    [TERN_GOP_CONSTANT_OF_SHAPE] = ev_constant_of_shape, [TERN_GOP_RANGE] = ev_range,
    [TERN_GOP_CONSTANT] = ev_constant, [TERN_GOP_TRILU] = ev_trilu, [TERN_GOP_CUM_SUM] = ev_cumsum,
    /* the family files' evaluators (ops_<family>.c) */
    [TERN_GOP_RESIZE] = graph_ev_resize, [TERN_GOP_UPSAMPLE] = graph_ev_resize,
    [TERN_GOP_CONV_TRANSPOSE] = graph_ev_convtranspose, [TERN_GOP_TOP_K] = graph_ev_topk,
    [TERN_GOP_GATHER_ND] = graph_ev_gather_nd, [TERN_GOP_SCATTER_ND] = graph_ev_scatter_nd,
    [TERN_GOP_SCATTER_ELEMENTS] = graph_ev_scatter_elements, [TERN_GOP_ONE_HOT] = graph_ev_onehot,
    [TERN_GOP_DEPTH_TO_SPACE] = graph_ev_depth_space, [TERN_GOP_SPACE_TO_DEPTH] = graph_ev_depth_space,
    [TERN_GOP_EYE_LIKE] = graph_ev_eyelike, [TERN_GOP_LRN] = graph_ev_lrn,
    [TERN_GOP_MEAN_VARIANCE_NORMALIZATION] = graph_ev_mvn, [TERN_GOP_NON_ZERO] = graph_ev_nonzero,
    [TERN_GOP_COMPRESS] = graph_ev_compress, [TERN_GOP_MATMUL] = graph_ev_matmul, [TERN_GOP_GEMM] = graph_ev_gemm,
    [TERN_GOP_MATMUL_BIAS] = graph_ev_matmul_bias, [TERN_GOP_CONV] = graph_ev_conv, [TERN_GOP_MAX_POOL] = graph_ev_pool,
    [TERN_GOP_AVERAGE_POOL] = graph_ev_pool, [TERN_GOP_GLOBAL_AVERAGE_POOL] = graph_ev_global_pool,
    [TERN_GOP_GLOBAL_MAX_POOL] = graph_ev_global_pool, [TERN_GOP_BATCH_NORMALIZATION] = graph_ev_batchnorm,
    [TERN_GOP_INSTANCE_NORMALIZATION] = graph_ev_instancenorm, [TERN_GOP_LAYER_NORMALIZATION] = graph_ev_layernorm,
    [TERN_GOP_SOFTMAX] = graph_ev_softmax, [TERN_GOP_LOG_SOFTMAX] = graph_ev_softmax,
    [TERN_GOP_HARDMAX] = graph_ev_softmax, [TERN_GOP_REDUCE_SUM] = graph_ev_reduce,
    [TERN_GOP_REDUCE_MEAN] = graph_ev_reduce, [TERN_GOP_REDUCE_MAX] = graph_ev_reduce,
    [TERN_GOP_REDUCE_MIN] = graph_ev_reduce, [TERN_GOP_REDUCE_PROD] = graph_ev_reduce,
    [TERN_GOP_REDUCE_L1] = graph_ev_reduce, [TERN_GOP_REDUCE_L2] = graph_ev_reduce,
    [TERN_GOP_REDUCE_SUM_SQUARE] = graph_ev_reduce, [TERN_GOP_REDUCE_LOG_SUM] = graph_ev_reduce,
    [TERN_GOP_REDUCE_LOG_SUM_EXP] = graph_ev_reduce, [TERN_GOP_ARG_MAX] = graph_ev_argminmax,
    [TERN_GOP_ARG_MIN] = graph_ev_argminmax, [TERN_GOP_ATTENTION] = graph_ev_attention,
    [TERN_GOP_ATTENTION_GRAD] = graph_ev_attention_grad,
};

/* The evaluator of an op: the table above, this file's and the family files' (NULL: not evaluated). */
static eval_fn lookup(tern_op_id id)
{
    if ((int)id <= TERN_GOP_UNKNOWN || (int)id >= TERN_GOP_COUNT)
        return NULL;
    return table[id];
}

int tern_graph_eval_supported(const char *domain, const char *op)
{
    return lookup(tern_op_lookup(domain ? domain : "", op)) != NULL;
}

tern_status graph_eval(const tern_graph_node *n, int64_t opset, const char *label, const tern_host_tensor *const *in,
                       tern_host_tensor **out, tern_error *err)
{
    ectx c = {n, opset, label, in, n->n_inputs, out, n->n_outputs, err};
    for (int k = 0; k < n->n_outputs; k++)
        out[k] = NULL;
    eval_fn fn = lookup((tern_op_id)n->op_id);
    if (!fn)
        return efail(&c, TERN_ERR_UNSUPPORTED, "op is not supported by the host evaluator");
    for (int k = 0; k < n->n_inputs; k++)
        if (in[k] && in[k]->count && !in[k]->f && !in[k]->i && !in[k]->s)
            return efail(&c, TERN_ERR_INVALID, "input %d has no data", k);
    tern_status st = fn(&c);
    if (st) {
        for (int k = 0; k < n->n_outputs; k++) {
            tern_host_tensor_free(out[k]);
            out[k] = NULL;
        }
    }
    return st;
}

tern_status tern_graph_eval_node(const tern_graph *g, int i, const tern_host_tensor *const *inputs,
                                 tern_host_tensor **outputs, tern_error *err)
{
    if (!g || i < 0 || i >= g->n_nodes)
        return tern_error_set(err, TERN_ERR_RANGE, "eval: node %d outside [0, %d)", i, g ? g->n_nodes : 0);
    char label[400];
    tern_graph_node_label(g, i, label, sizeof label);
    return graph_eval(&g->nodes[i], g->opset, label, inputs, outputs, err);
}
