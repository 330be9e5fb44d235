/* Lowerings of further ONNX ops beyond the transformer set of lower.c: activations composed from ScalarE
 * functions and VectorE ALU ops (Clip, LeakyRelu, Elu, Selu, Celu, HardSigmoid, HardSwish, Softsign, PRelu,
 * ThresholdedRelu, Shrink), more elementwise math (Mod, Floor, Ceil, Round, Cos, Tan, Sinh, Cosh, Asinh, Acosh,
 * Atanh, Atan, Asin, Acos, IsNaN, IsInf, Not, BitShift, Pow with a tensor exponent, n-ary Sum/Mean/Max/Min),
 * reductions over any axes (every Reduce* op), ArgMax/ArgMin/Hardmax, Softmax/LogSoftmax over any axis, CumSum,
 * gathers with run-time indices (Gather on any axis, GatherElements, GatherND), Cast/CastLike (float to integer
 * truncates), Gemm with every attribute, LayerNormalization over any axis with its Mean/InvStdDev outputs,
 * InstanceNormalization, MeanVarianceNormalization, LRN and integer Div; the layout ops (Trilu, Tile, Pad,
 * DepthToSpace, SpaceToDepth, Resize/Upsample, EyeLike, OneHot, TopK) are in lower_layout.c, dispatched from the
 * table at the end of this file. Some of these ops are also lowered by lower.c for their common
 * case; the general versions here are what lower.c can hand the others to (docs/conformance.md).
 *
 * How they lower: an op over an axis (reductions, arg-reductions, softmaxes, scans) first moves that axis (or
 * those axes) innermost with one strided DMA into a scratch tensor, works on [rows, cols] tiles of 128 partitions,
 * and moves the result back; elementwise ops materialise broadcasts with zero-stride DMAs and work on fp32 tiles of
 * the flattened tensor.
 * Scalar operands that ONNX passes as inputs (Clip's min and max, Pad's pads, CumSum's axis, TopK's k...) must be
 * compile-time constants, as every shape-like input must. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "compiler/lower_extra_internal.h"
#include "graph/graph_internal.h"
#include "graph/op_params.h"


/* ---- shapes ---- */

/* A scratch tensor shaped like (rank, dims), not bound to a graph value; release with lx_tmp_free. */
cc_value *lx_tmp_value(cc *c, cc_value *t, tern_dtype dt, int rank, const int64_t *dims)
{
    memset(t, 0, sizeof *t);
    t->dt = dt;
    t->rank = rank;
    t->numel = 1;
    for (int d = 0; d < rank; d++) {
        t->dims[d] = dims[d];
        t->numel *= (uint64_t)dims[d];
    }
    t->owner = -1;
    t->flat = cc_temp(c, dt, 1, t->numel ? t->numel : 1);
    t->placed = t->flat.region >= 0;
    return t->placed ? t : NULL;
}

void lx_tmp_free(cc *c, cc_value *t)
{
    if (t && t->placed && t->flat.region >= 0)
        tern_kernel_release(c->k, t->flat);
    if (t)
        t->placed = 0;
}

/* ---- strided copies ---- */

/* dst[i] = src[i] over an n-d index space: dst at element dst_off with strides dst_st, src at src_off with src_st
 * (zero strides broadcast, negative strides reverse). Dims that are contiguous with each other in both are
 * merged; what still exceeds the DMA pattern (a partition dim and four free dims) is split into several DMAs
 * along the outermost dims. */
void lx_copy_nd(cc *c, cc_value *dst, int64_t dst_off, const int64_t *dst_st, cc_value *src, int64_t src_off,
                const int64_t *src_st, int rank, const int64_t *dims)
{
    int64_t od[CC_MAX_RANK + 2], ds[CC_MAX_RANK + 2], ss[CC_MAX_RANK + 2];
    int n = 0;
    for (int d = 0; d < rank; d++) {
        if (dims[d] == 0)
            return;
        if (dims[d] == 1)
            continue;
        if (n > 0 && ds[n - 1] == dst_st[d] * dims[d] && ss[n - 1] == src_st[d] * dims[d]) {
            od[n - 1] *= dims[d];
            ds[n - 1] = dst_st[d];
            ss[n - 1] = src_st[d];
        } else {
            od[n] = dims[d];
            ds[n] = dst_st[d];
            ss[n] = src_st[d];
            n++;
        }
    }
    if (n == 0) {
        od[0] = 1;
        ds[0] = ss[0] = 1;
        n = 1;
    }
    if (n > 5 || (n == 5 && od[0] > 65535)) { /* split the outermost dim */
        for (int64_t i = 0; i < od[0] && cc_ok(c); i++)
            lx_copy_nd(c, dst, dst_off + i * ds[0], ds + 1, src, src_off + i * ss[0], ss + 1, n - 1, od + 1);
        return;
    }
    uint32_t parts = 1;
    int64_t dps = 0, sps = 0;
    int first = 0;
    if (n == 5 || (n > 1 && od[0] <= 65535)) {
        parts = (uint32_t)od[0];
        dps = ds[0];
        sps = ss[0];
        first = 1;
    }
    uint32_t nums[4];
    int32_t dsteps[4], ssteps[4];
    for (int d = first; d < n; d++) {
        if (od[d] > UINT32_MAX || llabs(ds[d]) > INT32_MAX || llabs(ss[d]) > INT32_MAX) {
            cc_fail(c, TERN_ERR_RANGE, "a copy dimension of %lld exceeds the access pattern", (long long)od[d]);
            return;
        }
        nums[d - first] = (uint32_t)od[d];
        dsteps[d - first] = (int32_t)ds[d];
        ssteps[d - first] = (int32_t)ss[d];
    }
    if (dst_off < 0 || src_off < 0) {
        cc_fail(c, TERN_ERR_RANGE, "a copy starts before its tensor");
        return;
    }
    tern_view dv = cc_view(c, dst, (uint64_t)dst_off, parts, dps, (unsigned)(n - first), nums, dsteps);
    tern_view sv = cc_view(c, src, (uint64_t)src_off, parts, sps, (unsigned)(n - first), nums, ssteps);
    cc_copy(c, dv, sv);
}

/* Contiguous dst (shape dims) from src read at src_off with strides st. */
void lx_gather_copy(cc *c, cc_value *dst, cc_value *src, int64_t src_off, int rank, const int64_t *dims,
                    const int64_t *st)
{
    int64_t dst_st[CC_MAX_RANK + 2], s = 1;
    for (int d = rank - 1; d >= 0; d--) {
        dst_st[d] = s;
        s *= dims[d];
    }
    lx_copy_nd(c, dst, 0, dst_st, src, src_off, st, rank, dims);
}

/* x broadcast (numpy rules) to y's shape: x itself when the shapes match, else a scratch copy in tmp. */
static cc_value *bcast(cc *c, cc_value *x, const cc_value *y, cc_value *tmp)
{
    if (cc_same_shape(x, y))
        return x;
    int64_t xs[CC_MAX_RANK], st[CC_MAX_RANK];
    cc_strides(x, xs);
    for (int d = 0; d < y->rank; d++) {
        int xd = d - (y->rank - x->rank);
        st[d] = (xd < 0 || x->dims[xd] == 1) ? 0 : xs[xd];
    }
    if (!lx_tmp_value(c, tmp, x->dt, y->rank, y->dims))
        return NULL;
    lx_gather_copy(c, tmp, x, 0, y->rank, y->dims, st);
    return tmp;
}

void lx_bcast_free(cc *c, cc_value *tmp, cc_value *used)
{
    if (used == tmp)
        lx_tmp_free(c, tmp);
}

/* Moves the axes marked in red[] innermost (kept axes first, each group in order): x itself when that is already
 * the layout, else a scratch copy in tmp. rows = product of kept dims, cols = product of moved dims. */
cc_value *lx_axes_last(cc *c, cc_value *x, const int *red, cc_value *tmp, uint64_t *rows, uint64_t *cols)
{
    int perm[CC_MAX_RANK], np = 0, ident = 1;
    *rows = *cols = 1;
    for (int d = 0; d < x->rank; d++)
        if (!red[d]) {
            perm[np++] = d;
            *rows *= (uint64_t)x->dims[d];
        }
    for (int d = 0; d < x->rank; d++)
        if (red[d]) {
            perm[np++] = d;
            *cols *= (uint64_t)x->dims[d];
        }
    for (int d = 0; d < x->rank; d++)
        if (perm[d] != d && x->dims[perm[d]] != 1)
            ident = 0;
    if (ident)
        return x;
    int64_t xs[CC_MAX_RANK], dims[CC_MAX_RANK], st[CC_MAX_RANK];
    cc_strides(x, xs);
    for (int d = 0; d < x->rank; d++) {
        dims[d] = x->dims[perm[d]];
        st[d] = xs[perm[d]];
    }
    if (!lx_tmp_value(c, tmp, x->dt, x->rank, dims))
        return NULL;
    lx_gather_copy(c, tmp, x, 0, x->rank, dims, st);
    return tmp;
}

/* The inverse of lx_axes_last for a single axis: y (x's shape) from t laid out as [other dims..., axis]. */
void lx_axis_back(cc *c, cc_value *y, cc_value *t, int axis)
{
    int64_t st[CC_MAX_RANK], s = 1;
    st[axis] = 1;
    s = y->dims[axis];
    for (int d = y->rank - 1; d >= 0; d--) {
        if (d == axis)
            continue;
        st[d] = s;
        s *= y->dims[d];
    }
    lx_gather_copy(c, y, t, 0, y->rank, y->dims, st);
}

/* ---- tiles ---- */

tern_view lx_tile(cc *c, uint32_t p, uint32_t w, const char *name)
{
    return tern_kernel_sbuf(c->k, TERN_DTYPE_FP32, p, w ? w : 1, name);
}

void lx_ts(cc *c, tern_view d, tern_view a, tern_alu_op op0, float s0, tern_alu_op op1, float s1)
{
    tern_kernel_tensor_scalar(c->k, VE, d, a, op0, s0, op1, s1);
}

void lx_ts_ap(cc *c, tern_view d, tern_view a, tern_alu_op op0, tern_view s0, tern_alu_op op1, tern_view s1)
{
    tern_kernel_tensor_scalar_ap(c->k, VE, d, a, op0, s0, 0.0f, op1, s1, 0.0f, 0);
}

void lx_tt(cc *c, tern_view d, tern_view a, tern_view b, tern_alu_op op)
{
    tern_kernel_tensor_tensor(c->k, VE, d, a, b, op);
}

static void act(cc *c, tern_view d, tern_view a, tern_act_func f, float scale)
{
    tern_kernel_activation(c->k, d, a, f, scale, tern_view_none(), tern_view_none(), tern_view_none());
}

/* ---- elementwise: fp32 tiles of the flattened tensors ---- */

typedef struct {
    const tern_graph_node *n;
    float a, b, g;   /* op parameters (alpha, beta, gamma, lambd, bias, min, max...) */
    int flag;
    tern_alu_op op;
} ew_ctx;

/* Computes o from in[0..nin) with scratch tiles s[0..2]; all [p, w] fp32. */
typedef void (*ew_fn)(cc *c, const ew_ctx *x, const tern_view *in, tern_view o, const tern_view *s);

/* y = f(xs...) elementwise; every xs[i] has y's element count (broadcast beforehand). int_tiles: integer tiles
 * (int32) instead of fp32, for the bitwise ops. */
static void ew_apply(cc *c, cc_value *const *xs, int nx, cc_value *y, ew_fn fn, const ew_ctx *ctx, int int_tiles)
{
    uint64_t n = y->numel;
    if (n == 0)
        return;
    uint64_t W = n < CHUNK ? n : CHUNK, R = n / W, rem = n % W;
    tern_dtype tdt = int_tiles ? TERN_DTYPE_INT32 : TERN_DTYPE_FP32;
    /* row blocks of 128 x W, then the ragged tail as one row (r0 == R) */
    uint64_t nblocks = (R + PARTS - 1) / PARTS + (rem ? 1 : 0);
    for (uint64_t blk = 0; blk < nblocks && cc_ok(c); blk++) {
        uint64_t r0 = blk * PARTS < R ? blk * PARTS : R;
        uint32_t p, w;
        uint64_t off;
        if (r0 >= R) { /* the ragged tail: one row */
            p = 1;
            w = (uint32_t)rem;
            off = R * W;
        } else {
            p = (uint32_t)(R - r0 < PARTS ? R - r0 : PARTS);
            w = (uint32_t)W;
            off = r0 * W;
        }
        tern_view in[4], s[3];
        for (int i = 0; i < nx; i++) {
            in[i] = tern_kernel_sbuf(c->k, tdt, p, w, "ew_in");
            tern_kernel_load(c->k, in[i], cc_view2d(c, xs[i], off, p, w, w));
        }
        for (int i = 0; i < 3; i++)
            s[i] = tern_kernel_sbuf(c->k, tdt, p, w, "ew_tmp");
        tern_view o = tern_kernel_sbuf(c->k, tdt, p, w, "ew_out");
        fn(c, ctx, in, o, s);
        tern_kernel_store(c->k, cc_view2d(c, y, off, p, w, w), o);
        for (int i = 0; i < nx; i++)
            tern_kernel_release(c->k, in[i]);
        for (int i = 0; i < 3; i++)
            tern_kernel_release(c->k, s[i]);
        tern_kernel_release(c->k, o);
    }
}

/* A unary elementwise op on input 0 into output 0. */
static void unary_op(cc *c, ew_fn fn, const ew_ctx *ctx)
{
    cc_value *x = cc_in(c, 0);
    cc_value *y = cc_out(c, 0, cc_out_dtype(c, 0));
    if (!x || !y)
        return;
    ew_apply(c, &x, 1, y, fn, ctx, 0);
}

/* A binary (numpy-broadcast) elementwise op of inputs 0 and 1 into output 0. */
static void binary_op(cc *c, ew_fn fn, const ew_ctx *ctx, int int_tiles)
{
    cc_value *a = cc_in(c, 0), *b = cc_in(c, 1);
    cc_value *y = cc_out(c, 0, cc_out_dtype(c, 0));
    if (!a || !b || !y)
        return;
    cc_value ta, tb;
    cc_value *ba = bcast(c, a, y, &ta);
    cc_value *bb = ba ? bcast(c, b, y, &tb) : NULL;
    if (ba && bb) {
        cc_value *xs[2] = {ba, bb};
        ew_apply(c, xs, 2, y, fn, ctx, int_tiles);
    }
    if (bb)
        lx_bcast_free(c, &tb, bb);
    if (ba)
        lx_bcast_free(c, &ta, ba);
}

static float attr_f(cc *c, const char *name, float dflt) { return tern_graph_attr_float(cc_node(c), name, dflt); }

/* -- the elementwise lx_tile programs --
 * IEEE special values: VectorE's max and min are maxNum/minNum (a NaN operand loses, docs/isa-semantics.md) and a
 * mask product x * (x > t) turns inf into NaN (inf * 0), so the programs below compute ONNX's piecewise
 * definitions with compares and select (which copies the chosen bits: NaN, inf and the sign of zero survive),
 * and where a max/min clamp must stay, put the NaN back afterwards (nan_keep). */

/* o = isnan(x) ? x : o; t is scratch. */
static void nan_keep(cc *c, tern_view o, tern_view x, tern_view t)
{
    lx_tt(c, t, x, x, TERN_ALU_NOT_EQ);
    tern_kernel_select(c->k, o, t, x, o);
}

/* o = (o == 0) ? x * 0 : o, so a zero result takes x's sign, as floor, ceil and round of a negative x do (for
 * the finite x that reach it: a big or non-finite x is selected whole before). t is scratch. */
static void zero_sign_of(cc *c, tern_view o, tern_view x, tern_view t, tern_view u)
{
    lx_ts(c, t, o, TERN_ALU_IS_EQ, 0.0f, TERN_ALU_BYPASS, 0.0f);
    lx_ts(c, u, x, TERN_ALU_MULT, 0.0f, TERN_ALU_BYPASS, 0.0f);
    tern_kernel_select(c->k, o, t, u, o);
}

static void f_leaky(cc *c, const ew_ctx *x, const tern_view *in, tern_view o, const tern_view *s)
{ /* x < 0 ? alpha * x : x (NaN and -0 take the second branch, as the definition's "x >= 0" branch is x) */
    lx_ts(c, s[0], in[0], TERN_ALU_MULT, x->a, TERN_ALU_BYPASS, 0.0f);
    lx_ts(c, s[1], in[0], TERN_ALU_IS_LT, 0.0f, TERN_ALU_BYPASS, 0.0f);
    tern_kernel_select(c->k, o, s[1], s[0], in[0]);
}

static void f_elu(cc *c, const ew_ctx *x, const tern_view *in, tern_view o, const tern_view *s)
{ /* gamma * (max(x, 0) + alpha * (exp(min(x, 0) / theta) - 1)); Elu: theta 1, gamma 1; Celu: theta alpha */
    lx_ts(c, s[0], in[0], TERN_ALU_MIN, 0.0f, TERN_ALU_BYPASS, 0.0f);
    act(c, s[0], s[0], TERN_ACT_EXP, x->b);
    lx_ts(c, s[0], s[0], TERN_ALU_SUBTRACT, 1.0f, TERN_ALU_MULT, x->a);
    lx_ts(c, o, in[0], TERN_ALU_MAX, 0.0f, TERN_ALU_BYPASS, 0.0f);
    lx_tt(c, o, o, s[0], TERN_ALU_ADD);
    if (x->g != 1.0f)
        lx_ts(c, o, o, TERN_ALU_MULT, x->g, TERN_ALU_BYPASS, 0.0f);
    nan_keep(c, o, in[0], s[0]); /* the min/max split drops a NaN */
}

static void f_hardsigmoid(cc *c, const ew_ctx *x, const tern_view *in, tern_view o, const tern_view *s)
{ /* max(0, min(1, alpha * x + beta)), times x for HardSwish */
    tern_view t = x->flag ? s[0] : o;
    lx_ts(c, t, in[0], TERN_ALU_MULT, x->a, TERN_ALU_ADD, x->b);
    lx_ts(c, t, t, TERN_ALU_MIN, 1.0f, TERN_ALU_MAX, 0.0f);
    if (!x->flag) /* HardSwish needs none: x * t is NaN for a NaN x whatever t is */
        nan_keep(c, t, in[0], s[1]);
    if (x->flag)
        lx_tt(c, o, in[0], t, TERN_ALU_MULT);
}

static void f_softsign(cc *c, const ew_ctx *x, const tern_view *in, tern_view o, const tern_view *s)
{ /* x / (1 + |x|) */
    (void)x;
    act(c, s[0], in[0], TERN_ACT_ABS, 1.0f);
    lx_ts(c, s[0], s[0], TERN_ALU_ADD, 1.0f, TERN_ALU_BYPASS, 0.0f);
    lx_tt(c, o, in[0], s[0], TERN_ALU_DIVIDE);
}

static void f_thresholded(cc *c, const ew_ctx *x, const tern_view *in, tern_view o, const tern_view *s)
{ /* x > alpha ? x : 0 (a select: x * mask would give NaN for -inf and -0 for negative x) */
    lx_ts(c, s[0], in[0], TERN_ALU_IS_GT, x->a, TERN_ALU_BYPASS, 0.0f);
    lx_ts(c, s[1], s[0], TERN_ALU_MULT, 0.0f, TERN_ALU_BYPASS, 0.0f); /* +0: the mask is 0 or 1 */
    tern_kernel_select(c->k, o, s[0], in[0], s[1]);
}

static void f_shrink(cc *c, const ew_ctx *x, const tern_view *in, tern_view o, const tern_view *s)
{ /* x < -lambd ? x + bias : x > lambd ? x - bias : 0, as two selects (masks times +-inf would be NaN) */
    lx_ts(c, s[0], in[0], TERN_ALU_IS_GT, x->a, TERN_ALU_BYPASS, 0.0f);
    lx_ts(c, s[1], in[0], TERN_ALU_SUBTRACT, x->b, TERN_ALU_BYPASS, 0.0f);
    lx_ts(c, s[2], s[0], TERN_ALU_MULT, 0.0f, TERN_ALU_BYPASS, 0.0f); /* +0 */
    tern_kernel_select(c->k, o, s[0], s[1], s[2]);
    lx_ts(c, s[0], in[0], TERN_ALU_IS_LT, -x->a, TERN_ALU_BYPASS, 0.0f);
    lx_ts(c, s[1], in[0], TERN_ALU_ADD, x->b, TERN_ALU_BYPASS, 0.0f);
    tern_kernel_select(c->k, o, s[0], s[1], o);
}

static void f_clip(cc *c, const ew_ctx *x, const tern_view *in, tern_view o, const tern_view *s)
{
    lx_ts(c, o, in[0], TERN_ALU_MAX, x->a, TERN_ALU_MIN, x->b);
    nan_keep(c, o, in[0], s[0]);
}

static void f_prelu(cc *c, const ew_ctx *x, const tern_view *in, tern_view o, const tern_view *s)
{ /* x < 0 ? slope * x : x (a select: slope * min(x, 0) is NaN for x >= 0 and an infinite slope) */
    (void)x;
    lx_tt(c, s[0], in[0], in[1], TERN_ALU_MULT);
    lx_ts(c, s[1], in[0], TERN_ALU_IS_LT, 0.0f, TERN_ALU_BYPASS, 0.0f);
    tern_kernel_select(c->k, o, s[1], s[0], in[0]);
}

static void f_not(cc *c, const ew_ctx *x, const tern_view *in, tern_view o, const tern_view *s)
{
    (void)x;
    (void)s;
    lx_ts(c, o, in[0], TERN_ALU_IS_EQ, 0.0f, TERN_ALU_BYPASS, 0.0f);
}

static void f_isnan(cc *c, const ew_ctx *x, const tern_view *in, tern_view o, const tern_view *s)
{
    (void)x;
    (void)s;
    lx_tt(c, o, in[0], in[0], TERN_ALU_NOT_EQ);
}

static void f_isinf(cc *c, const ew_ctx *x, const tern_view *in, tern_view o, const tern_view *s)
{ /* (detect_positive && x == inf) || (detect_negative && x == -inf) */
    lx_ts(c, o, in[0], TERN_ALU_IS_EQ, INFINITY, TERN_ALU_MULT, x->a);
    lx_ts(c, s[0], in[0], TERN_ALU_IS_EQ, -INFINITY, TERN_ALU_MULT, x->b);
    lx_tt(c, o, o, s[0], TERN_ALU_ADD);
}

static void f_floor_ceil(cc *c, const ew_ctx *x, const tern_view *in, tern_view o, const tern_view *s)
{ /* t = x - fmod(x, 1) (truncation); floor = t - (x < t), ceil = t + (x > t). |x| >= 2^23 (inf included, where
   * fmod gives NaN) is an integer already and is taken whole; a zero result takes x's sign (ceil(-0.5) = -0). */
    lx_ts(c, s[0], in[0], TERN_ALU_MOD, 1.0f, TERN_ALU_BYPASS, 0.0f);
    lx_tt(c, s[0], in[0], s[0], TERN_ALU_SUBTRACT);
    lx_tt(c, s[1], in[0], s[0], x->flag ? TERN_ALU_IS_GT : TERN_ALU_IS_LT);
    lx_tt(c, o, s[0], s[1], x->flag ? TERN_ALU_ADD : TERN_ALU_SUBTRACT);
    zero_sign_of(c, o, in[0], s[0], s[1]);
    act(c, s[0], in[0], TERN_ACT_ABS, 1.0f);
    lx_ts(c, s[0], s[0], TERN_ALU_IS_GE, 8388608.0f, TERN_ALU_BYPASS, 0.0f);
    tern_kernel_select(c->k, o, s[0], in[0], o);
}

static void f_round(cc *c, const ew_ctx *x, const tern_view *in, tern_view o, const tern_view *s)
{ /* half to even: (|x| + 2^23) - 2^23 rounds in fp32 (RNE) for |x| < 2^23; larger values are integers already */
    (void)x;
    act(c, s[0], in[0], TERN_ACT_ABS, 1.0f);
    lx_ts(c, s[1], s[0], TERN_ALU_ADD, 8388608.0f, TERN_ALU_BYPASS, 0.0f);
    lx_ts(c, s[1], s[1], TERN_ALU_SUBTRACT, 8388608.0f, TERN_ALU_BYPASS, 0.0f);
    lx_ts(c, s[2], s[0], TERN_ALU_IS_GE, 8388608.0f, TERN_ALU_BYPASS, 0.0f);
    tern_kernel_select(c->k, s[1], s[2], s[0], s[1]);
    act(c, s[2], in[0], TERN_ACT_SIGN, 1.0f);
    lx_tt(c, o, s[1], s[2], TERN_ALU_MULT);
    zero_sign_of(c, o, in[0], s[0], s[1]); /* round(-0.3) = -0; ScalarE's sign turns -0 into +0 */
}

/* sin(u) for any u: ScalarE's sin is valid on [-pi, pi], so u is reduced first: ((u + pi) mod 2pi) - pi. */
static void sin_any(cc *c, tern_view o, tern_view u, float shift, const tern_view *s)
{
    const float pi = 3.14159265358979f, two_pi = 6.28318530717959f;
    lx_ts(c, s[1], u, TERN_ALU_ADD, shift + pi, TERN_ALU_MOD, two_pi);
    lx_ts(c, s[2], s[1], TERN_ALU_IS_LT, 0.0f, TERN_ALU_MULT, two_pi); /* fmod keeps the sign of u */
          lx_tt(c, s[1], s[1], s[2], TERN_ALU_ADD);
    lx_ts(c, s[1], s[1], TERN_ALU_SUBTRACT, pi, TERN_ALU_MAX, -pi);
    lx_ts(c, s[1], s[1], TERN_ALU_MIN, pi, TERN_ALU_BYPASS, 0.0f);
    act(c, o, s[1], TERN_ACT_SIN, 1.0f);
}

static void f_cos(cc *c, const ew_ctx *x, const tern_view *in, tern_view o, const tern_view *s)
{ /* the reduction's clamps to [-pi, pi] drop NaN (and fmod(inf) = NaN is clamped): put it back */
    (void)x;
    sin_any(c, o, in[0], 1.57079632679490f, s);
    lx_ts(c, s[0], in[0], TERN_ALU_MULT, 0.0f, TERN_ALU_BYPASS, 0.0f); /* 0 for finite x, NaN for inf, NaN */
    lx_tt(c, o, o, s[0], TERN_ALU_ADD);
}

static void f_tan(cc *c, const ew_ctx *x, const tern_view *in, tern_view o, const tern_view *s)
{
    (void)x;
    sin_any(c, o, in[0], 1.57079632679490f, s); /* cos */
    sin_any(c, s[0], in[0], 0.0f, s);          /* sin */
    lx_tt(c, o, s[0], o, TERN_ALU_DIVIDE);
    lx_ts(c, s[0], in[0], TERN_ALU_MULT, 0.0f, TERN_ALU_BYPASS, 0.0f); /* NaN for inf and NaN (clamped above) */
    lx_tt(c, o, o, s[0], TERN_ALU_ADD);
}

static void f_sinh_cosh(cc *c, const ew_ctx *x, const tern_view *in, tern_view o, const tern_view *s)
{ /* (e^x -+ e^-x) / 2 */
    act(c, s[0], in[0], TERN_ACT_EXP, 1.0f);
    act(c, s[1], in[0], TERN_ACT_EXP, -1.0f);
    lx_tt(c, o, s[0], s[1], x->flag ? TERN_ALU_ADD : TERN_ALU_SUBTRACT);
    lx_ts(c, o, o, TERN_ALU_MULT, 0.5f, TERN_ALU_BYPASS, 0.0f);
}

static void f_asinh(cc *c, const ew_ctx *x, const tern_view *in, tern_view o, const tern_view *s)
{ /* sign(x) * ln(|x| + sqrt(x^2 + 1)) */
    (void)x;
    act(c, s[0], in[0], TERN_ACT_SQUARE, 1.0f);
    lx_ts(c, s[0], s[0], TERN_ALU_ADD, 1.0f, TERN_ALU_BYPASS, 0.0f);
    act(c, s[0], s[0], TERN_ACT_SQRT, 1.0f);
    act(c, s[1], in[0], TERN_ACT_ABS, 1.0f);
    lx_tt(c, s[0], s[0], s[1], TERN_ALU_ADD);
    act(c, s[0], s[0], TERN_ACT_LOG, 1.0f);
    act(c, s[1], in[0], TERN_ACT_SIGN, 1.0f);
    lx_tt(c, o, s[0], s[1], TERN_ALU_MULT);
    /* x^2 overflows from |x| ~ 2^64 on: for |x| >= 2^12, asinh(x) = sign(x) (ln|x| + ln 2) within 2^-26 */
    act(c, s[0], in[0], TERN_ACT_ABS, 1.0f);
    act(c, s[1], s[0], TERN_ACT_LOG, 1.0f);
    lx_ts(c, s[1], s[1], TERN_ALU_ADD, 0.693147182f, TERN_ALU_BYPASS, 0.0f);
    act(c, s[2], in[0], TERN_ACT_SIGN, 1.0f);
    lx_tt(c, s[1], s[1], s[2], TERN_ALU_MULT);
    lx_ts(c, s[2], s[0], TERN_ALU_IS_GE, 4096.0f, TERN_ALU_BYPASS, 0.0f);
    tern_kernel_select(c->k, o, s[2], s[1], o);
}

static void f_acosh(cc *c, const ew_ctx *x, const tern_view *in, tern_view o, const tern_view *s)
{ /* ln(x + sqrt(x^2 - 1)) */
    (void)x;
    act(c, s[0], in[0], TERN_ACT_SQUARE, 1.0f);
    lx_ts(c, s[0], s[0], TERN_ALU_SUBTRACT, 1.0f, TERN_ALU_BYPASS, 0.0f);
    act(c, s[0], s[0], TERN_ACT_SQRT, 1.0f);
    lx_tt(c, s[0], s[0], in[0], TERN_ALU_ADD);
    act(c, o, s[0], TERN_ACT_LOG, 1.0f);
    /* x^2 overflows from |x| ~ 2^64 on: for |x| >= 2^12, acosh(x) = ln x + ln 2 within 2^-26 (NaN for x < 0) */
    act(c, s[0], in[0], TERN_ACT_LOG, 1.0f);
    lx_ts(c, s[0], s[0], TERN_ALU_ADD, 0.693147182f, TERN_ALU_BYPASS, 0.0f);
    act(c, s[1], in[0], TERN_ACT_ABS, 1.0f);
    lx_ts(c, s[1], s[1], TERN_ALU_IS_GE, 4096.0f, TERN_ALU_BYPASS, 0.0f);
    tern_kernel_select(c->k, o, s[1], s[0], o);
}

static void f_atanh(cc *c, const ew_ctx *x, const tern_view *in, tern_view o, const tern_view *s)
{ /* 0.5 * ln((1 + x) / (1 - x)) */
    (void)x;
    lx_ts(c, s[0], in[0], TERN_ALU_ADD, 1.0f, TERN_ALU_BYPASS, 0.0f);
    lx_ts(c, s[1], in[0], TERN_ALU_MULT, -1.0f, TERN_ALU_ADD, 1.0f);
    lx_tt(c, s[0], s[0], s[1], TERN_ALU_DIVIDE);
    act(c, s[0], s[0], TERN_ACT_LOG, 1.0f);
    lx_ts(c, o, s[0], TERN_ALU_MULT, 0.5f, TERN_ALU_BYPASS, 0.0f);
}

static void f_mod(cc *c, const ew_ctx *x, const tern_view *in, tern_view o, const tern_view *s)
{ /* fmod; for fmod = 0 (integers) the result takes the divisor's sign: r + b where r * b < 0 */
    lx_tt(c, o, in[0], in[1], TERN_ALU_MOD);
    if (!x->flag) {
        lx_tt(c, s[0], o, in[1], TERN_ALU_MULT);
        lx_ts(c, s[0], s[0], TERN_ALU_IS_LT, 0.0f, TERN_ALU_BYPASS, 0.0f);
        lx_tt(c, s[0], s[0], in[1], TERN_ALU_MULT);
        lx_tt(c, o, o, s[0], TERN_ALU_ADD);
    }
}

static void f_binop(cc *c, const ew_ctx *x, const tern_view *in, tern_view o, const tern_view *s)
{
    (void)s;
    tern_kernel_tensor_tensor(c->k, x->op == TERN_ALU_POW ? TERN_ENGINE_GPSIMD : VE, o, in[0], in[1], x->op);
}

/* ---- elementwise lowerings ---- */

static int need_float(cc *c, cc_value *x)
{
    if (x && !tern_dtype_is_float(x->dt)) {
        cc_fail(c, TERN_ERR_UNSUPPORTED, "%s on a non-float tensor (%s)", cc_node(c)->op, tern_dtype_name(x->dt));
        return 0;
    }
    return 1;
}

static int lower_activation(cc *c)
{
    const tern_op_id id = (tern_op_id)cc_node(c)->op_id;
    ew_ctx x = {cc_node(c), 0, 0, 1, 0, TERN_ALU_BYPASS};
    ew_fn fn = NULL;
    if (!need_float(c, cc_in(c, 0)))
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

static int lower_not(cc *c)
{
    ew_ctx x = {cc_node(c), 0, 0, 1, 0, TERN_ALU_BYPASS};
    unary_op(c, f_not, &x);
    return 1;
}

/* A compile-time scalar from input k (or the attribute of older opsets); *have = 0 when absent. */
int lx_const_scalar_in(cc *c, int k, const char *attr, float *v, int *have)
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

static int lower_clip(cc *c)
{
    ew_ctx x = {cc_node(c), -INFINITY, INFINITY, 1, 0, TERN_ALU_BYPASS};
    int h;
    float v;
    if (!lx_const_scalar_in(c, 1, "min", &v, &h))
        return 1;
    if (h)
        x.a = v;
    if (!lx_const_scalar_in(c, 2, "max", &v, &h))
        return 1;
    if (h)
        x.b = v;
    unary_op(c, f_clip, &x);
    return 1;
}

static int lower_prelu(cc *c)
{
    ew_ctx x = {cc_node(c), 0, 0, 1, 0, TERN_ALU_BYPASS};
    if (!need_float(c, cc_in(c, 0)))
        return 1;
    binary_op(c, f_prelu, &x, 0);
    return 1;
}

static int lower_mod(cc *c)
{
    ew_ctx x = {cc_node(c), 0, 0, 1, (int)tern_graph_attr_int(cc_node(c), "fmod", 0), TERN_ALU_BYPASS};
    binary_op(c, f_mod, &x, 0);
    return 1;
}

static int lower_bitshift(cc *c)
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

static int lower_pow_tensor(cc *c)
{
    ew_ctx x = {cc_node(c), 0, 0, 1, 0, TERN_ALU_POW};
    binary_op(c, f_binop, &x, 0);
    return 1;
}

/* Sum, Mean, Max, Min over any number of broadcast inputs. */
static int lower_nary(cc *c)
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
        cc_value *b = bcast(c, x, y, &t);
        if (!b)
            return 1;
        uint64_t N = y->numel;
        if (m == 0)
            cc_copy(c, cc_view2d(c, y, 0, 1, N, N), cc_view2d(c, b, 0, 1, N, N));
        else
            tern_lib_binary(c->k, cc_view2d(c, y, 0, 1, N, N), cc_view2d(c, y, 0, 1, N, N),
                            cc_view2d(c, b, 0, 1, N, N), op);
        lx_bcast_free(c, &t, b);
        m++;
    }
    if (n->op_id == TERN_GOP_MEAN && m > 1)
        tern_lib_scalar(c->k, cc_view2d(c, y, 0, 1, y->numel, y->numel), cc_view2d(c, y, 0, 1, y->numel, y->numel),
                        TERN_ALU_MULT, 1.0f / (float)m);
    return 1;
}

/* ---- reductions over any axes ---- */

typedef enum { RD_SUM, RD_MEAN, RD_MAX, RD_MIN, RD_PROD, RD_L1, RD_L2, RD_LOGSUM, RD_LOGSUMEXP, RD_SUMSQ } rd_kind;

static int rd_of(tern_op_id id, rd_kind *k)
{
    switch (id) {
    case TERN_GOP_REDUCE_SUM: *k = RD_SUM; return 1;
    case TERN_GOP_REDUCE_MEAN: *k = RD_MEAN; return 1;
    case TERN_GOP_REDUCE_MAX: *k = RD_MAX; return 1;
    case TERN_GOP_REDUCE_MIN: *k = RD_MIN; return 1;
    case TERN_GOP_REDUCE_PROD: *k = RD_PROD; return 1;
    case TERN_GOP_REDUCE_L1: *k = RD_L1; return 1;
    case TERN_GOP_REDUCE_L2: *k = RD_L2; return 1;
    case TERN_GOP_REDUCE_LOG_SUM: *k = RD_LOGSUM; return 1;
    case TERN_GOP_REDUCE_LOG_SUM_EXP: *k = RD_LOGSUMEXP; return 1;
    case TERN_GOP_REDUCE_SUM_SQUARE: *k = RD_SUMSQ; return 1;
    default: return 0;
    }
}

/* Which axes a reduction-like node reduces: attribute "axes" or (opset 13/18) input 1, which must be constant;
 * none given = all, unless noop_with_empty_axes. Returns 0 after recording a failure; *noop for the identity. */
static int reduce_axes(cc *c, int rank, int *red, int *noop)
{
    const tern_graph_node *n = cc_node(c);
    *noop = 0;
    memset(red, 0, sizeof(int) * CC_MAX_RANK);
    cc_value *ai = cc_in_id(c, 1) >= 0 ? cc_in(c, 1) : NULL;
    graph_axes_args ax;
    char why[160];
    tern_status st = graph_reduce_axes_decode(n, tern_graph_opset(c->g), cc_in_id(c, 1) >= 0, ai ? ai->host : NULL,
                                              &ax, why, sizeof why);
    if (st)
        return cc_fail(c, st, "%s: %s", n->op, why), 0;
    if (!ax.known)
        return cc_fail(c, TERN_ERR_UNSUPPORTED, "%s with run-time axes", n->op), 0;
    size_t na = 0;
    for (int i = 0; i < ax.n; i++) {
        int64_t a = cc_norm_axis(ax.axes[i], rank);
        if (a < 0 || a >= rank)
            return cc_fail(c, TERN_ERR_INVALID, "axis %lld outside rank %d", (long long)ax.axes[i], rank), 0;
        red[a] = 1;
        na++;
    }
    if (na == 0) {
        if (tern_graph_attr_int(n, "noop_with_empty_axes", 0))
            *noop = 1;
        else
            for (int d = 0; d < rank; d++)
                red[d] = 1;
    }
    return 1;
}

static int lower_reduce_any(cc *c)
{
    const tern_graph_node *n = cc_node(c);
    rd_kind kind = RD_SUM;
    rd_of((tern_op_id)n->op_id, &kind);
    cc_value *x = cc_in(c, 0);
    tern_dtype odt = cc_out_dtype(c, 0);
    cc_value *y = cc_out(c, 0, odt);
    if (!x || !y)
        return 1;
    int red[CC_MAX_RANK], noop;
    if (!reduce_axes(c, x->rank, red, &noop))
        return 1;
    if (noop) {
        cc_copy(c, cc_view2d(c, y, 0, 1, y->numel, y->numel), cc_view2d(c, x, 0, 1, x->numel, x->numel));
        return 1;
    }
    uint64_t rows, cols;
    cc_value tmp;
    cc_value *xt = lx_axes_last(c, x, red, &tmp, &rows, &cols);
    if (!xt)
        return 1;
    if (cols == 0 || cols > 4 * ROW_MAX) {
        cc_fail(c, TERN_ERR_UNSUPPORTED, "%s over %llu elements per output", n->op, (unsigned long long)cols);
        lx_bcast_free(c, &tmp, xt);
        return 1;
    }
    tern_alu_op op = kind == RD_MAX ? TERN_ALU_MAX : kind == RD_MIN ? TERN_ALU_MIN
                     : kind == RD_PROD ? TERN_ALU_MULT : TERN_ALU_ADD;
    for (uint64_t r0 = 0; r0 < rows && cc_ok(c); r0 += PARTS) {
        uint32_t p = (uint32_t)(rows - r0 < PARTS ? rows - r0 : PARTS), w = (uint32_t)cols;
        tern_view t = lx_tile(c, p, w, "rd_in"), r = lx_tile(c, p, 1, "rd_out"), m = lx_tile(c, p, 1, "rd_max");
        tern_kernel_load(c->k, t, cc_view2d(c, xt, r0 * cols, p, cols, cols));
        switch (kind) {
        case RD_L1: act(c, t, t, TERN_ACT_ABS, 1.0f); break;
        case RD_L2:
        case RD_SUMSQ: act(c, t, t, TERN_ACT_SQUARE, 1.0f); break;
        case RD_LOGSUMEXP: /* max + log(sum(exp(x - max))) */
            tern_kernel_tensor_reduce(c->k, m, t, TERN_ALU_MAX, 1, 1); /* -max */
            tern_kernel_activation(c->k, t, t, TERN_ACT_EXP, 1.0f, m, tern_view_none(), tern_view_none());
            break;
        default: break;
        }
        tern_kernel_tensor_reduce(c->k, r, t, op, 1, 0);
        switch (kind) {
        case RD_MEAN: lx_ts(c, r, r, TERN_ALU_MULT, 1.0f / (float)cols, TERN_ALU_BYPASS, 0.0f); break;
        case RD_L2: act(c, r, r, TERN_ACT_SQRT, 1.0f); break;
        case RD_LOGSUM: act(c, r, r, TERN_ACT_LOG, 1.0f); break;
        case RD_LOGSUMEXP:
            act(c, r, r, TERN_ACT_LOG, 1.0f);
            lx_tt(c, r, r, m, TERN_ALU_SUBTRACT);
            break;
        default: break;
        }
        tern_kernel_store(c->k, cc_view2d(c, y, r0, p, 1, 1), r);
        tern_kernel_release(c->k, t);
        tern_kernel_release(c->k, r);
        tern_kernel_release(c->k, m);
    }
    lx_bcast_free(c, &tmp, xt);
    return 1;
}

/* ---- ops along one axis: ArgMax/ArgMin, Hardmax, Softmax/LogSoftmax, CumSum ---- */

/* idx[p, w] = column index (fp32); cand = eq ? idx : idx +- 2^24, reduced with min (first) or max (last). The
 * row's best value is left in m. */
static void arg_index_m(cc *c, tern_view out, tern_view m, tern_view t, tern_view scratch, tern_view idx,
                        tern_alu_op best, int last)
{
    tern_kernel_tensor_reduce(c->k, m, t, best, 1, 0);
    lx_ts_ap(c, scratch, t, TERN_ALU_IS_EQ, m, TERN_ALU_BYPASS, tern_view_none());
    if (last)
        lx_ts(c, scratch, scratch, TERN_ALU_MULT, IDX_BIG, TERN_ALU_SUBTRACT, IDX_BIG);
    else
        lx_ts(c, scratch, scratch, TERN_ALU_MULT, -IDX_BIG, TERN_ALU_ADD, IDX_BIG);
    lx_tt(c, scratch, scratch, idx, TERN_ALU_ADD);
    tern_kernel_tensor_reduce(c->k, out, scratch, last ? TERN_ALU_MAX : TERN_ALU_MIN, 1, 0);
}

static void arg_index(cc *c, tern_view out, tern_view t, tern_view scratch, tern_view idx, tern_alu_op best, int last)
{
    tern_view m = lx_tile(c, t.ap.num_partitions, 1, "arg_best");
    arg_index_m(c, out, m, t, scratch, idx, best, last);
    tern_kernel_release(c->k, m);
}

typedef enum { AX_ARGMAX, AX_ARGMIN, AX_HARDMAX, AX_SOFTMAX, AX_LOGSOFTMAX, AX_CUMSUM } ax_kind;

/* Rows longer than ROW_MAX columns (a vocabulary's logits) for ArgMax/ArgMin and Softmax/LogSoftmax: each row
 * tile is taken in chunks of ROW_MAX columns, with per-row running statistics in a [p, 5] tile.
 *   arg:     per chunk the best value cm and its first (last) index ci (iota based at the chunk's column); the
 *            running pair (m, bi) takes the chunk's when cm beats m strictly (first index) or ties it too
 *            (select_last_index), as bi += (cm op m) * (ci - bi), m = best(m, cm). Indices stay exact in fp32
 *            (cols < 2^24 is checked).
 *   softmax: one online pass for the row max and the sum of exp (the sum is rescaled by exp(old max - new max)
 *            when a chunk raises the max), then a second pass loads each chunk again and writes
 *            exp(x - max) / sum, or x - (max + log sum) for LogSoftmax. */
static void axis_long(cc *c, ax_kind kind, cc_value *xt, cc_value *yt, uint64_t rows, uint64_t cols, int last)
{
    const int arg = kind == AX_ARGMAX || kind == AX_ARGMIN;
    const tern_alu_op best = kind == AX_ARGMIN ? TERN_ALU_MIN : TERN_ALU_MAX;
    const tern_alu_op beats = kind == AX_ARGMIN ? (last ? TERN_ALU_IS_LE : TERN_ALU_IS_LT)
                                                : (last ? TERN_ALU_IS_GE : TERN_ALU_IS_GT);
    for (uint64_t r0 = 0; r0 < rows && cc_ok(c); r0 += PARTS) {
        uint32_t p = (uint32_t)(rows - r0 < PARTS ? rows - r0 : PARTS);
        tern_view t = lx_tile(c, p, ROW_MAX, "axl_in"), s = lx_tile(c, p, ROW_MAX, "axl_tmp");
        tern_view o = lx_tile(c, p, ROW_MAX, "axl_out"), st = lx_tile(c, p, 5, "axl_stats");
        /* arg: m best value, bi its index; softmax: m = -max, bi = sum of exp(x - max) */
        tern_view m = tern_view_block(c->k, st, 0, p, 0, 1), bi = tern_view_block(c->k, st, 0, p, 1, 2);
        tern_view cm = tern_view_block(c->k, st, 0, p, 2, 3), ci = tern_view_block(c->k, st, 0, p, 3, 4);
        tern_view f = tern_view_block(c->k, st, 0, p, 4, 5);
        for (uint64_t c0 = 0; c0 < cols && cc_ok(c); c0 += ROW_MAX) {
            uint64_t w = cols - c0 < ROW_MAX ? cols - c0 : ROW_MAX;
            tern_view tw = tern_view_block(c->k, t, 0, p, 0, w), sw = tern_view_block(c->k, s, 0, p, 0, w);
            tern_view ow = tern_view_block(c->k, o, 0, p, 0, w);
            tern_kernel_load(c->k, tw, cc_view2d(c, xt, r0 * cols + c0, p, w, cols));
            if (arg) {
                tern_kernel_iota(c->k, ow, (int32_t)c0, 0);
                arg_index_m(c, c0 ? ci : bi, c0 ? cm : m, tw, sw, ow, best, last);
                if (c0) {
                    lx_tt(c, f, cm, m, beats);
                    lx_tt(c, ci, ci, bi, TERN_ALU_SUBTRACT);
                    lx_tt(c, ci, ci, f, TERN_ALU_MULT);
                    lx_tt(c, bi, bi, ci, TERN_ALU_ADD);
                    lx_tt(c, m, m, cm, best);
                }
            } else if (!c0) {
                tern_kernel_tensor_reduce(c->k, m, tw, TERN_ALU_MAX, 1, 1); /* -max */
                tern_kernel_activation(c->k, sw, tw, TERN_ACT_EXP, 1.0f, m, tern_view_none(), bi);
            } else {
                tern_kernel_tensor_reduce(c->k, cm, tw, TERN_ALU_MAX, 1, 1);
                lx_tt(c, cm, cm, m, TERN_ALU_MIN);      /* the new -max */
                lx_tt(c, f, cm, m, TERN_ALU_SUBTRACT);  /* old max - new max <= 0 */
                act(c, f, f, TERN_ACT_EXP, 1.0f);
                lx_tt(c, bi, bi, f, TERN_ALU_MULT);
                tern_kernel_tensor_copy(c->k, VE, m, cm);
                tern_kernel_activation(c->k, sw, tw, TERN_ACT_EXP, 1.0f, m, tern_view_none(), ci);
                lx_tt(c, bi, bi, ci, TERN_ALU_ADD);
            }
        }
        if (arg) {
            tern_kernel_store(c->k, cc_view2d(c, yt, r0, p, 1, 1), bi);
        } else {
            if (kind == AX_LOGSOFTMAX) {
                act(c, ci, bi, TERN_ACT_LOG, 1.0f);
                lx_tt(c, ci, ci, m, TERN_ALU_SUBTRACT); /* log(sum) + max */
            }
            for (uint64_t c0 = 0; c0 < cols && cc_ok(c); c0 += ROW_MAX) {
                uint64_t w = cols - c0 < ROW_MAX ? cols - c0 : ROW_MAX;
                tern_view tw = tern_view_block(c->k, t, 0, p, 0, w), sw = tern_view_block(c->k, s, 0, p, 0, w);
                tern_view ow = tern_view_block(c->k, o, 0, p, 0, w);
                tern_kernel_load(c->k, tw, cc_view2d(c, xt, r0 * cols + c0, p, w, cols));
                if (kind == AX_SOFTMAX) {
                    tern_kernel_activation(c->k, sw, tw, TERN_ACT_EXP, 1.0f, m, tern_view_none(), tern_view_none());
                    lx_ts_ap(c, ow, sw, TERN_ALU_DIVIDE, bi, TERN_ALU_BYPASS, tern_view_none());
                } else {
                    lx_ts_ap(c, ow, tw, TERN_ALU_SUBTRACT, ci, TERN_ALU_BYPASS, tern_view_none());
                }
                tern_kernel_store(c->k, cc_view2d(c, yt, r0 * cols + c0, p, w, cols), ow);
            }
        }
        tern_kernel_release(c->k, t);
        tern_kernel_release(c->k, s);
        tern_kernel_release(c->k, o);
        tern_kernel_release(c->k, st);
    }
}

static int lower_axis_op(cc *c)
{
    const tern_graph_node *n = cc_node(c);
    ax_kind kind = n->op_id == TERN_GOP_ARG_MAX       ? AX_ARGMAX
                   : n->op_id == TERN_GOP_ARG_MIN     ? AX_ARGMIN
                   : n->op_id == TERN_GOP_HARDMAX    ? AX_HARDMAX
                   : n->op_id == TERN_GOP_SOFTMAX    ? AX_SOFTMAX
                   : n->op_id == TERN_GOP_LOG_SOFTMAX ? AX_LOGSOFTMAX
                                                  : AX_CUMSUM;
    cc_value *x = cc_in(c, 0);
    if (!x)
        return 1;
    int64_t opset = tern_graph_opset(c->g);
    int64_t axis;
    int coerce = 0; /* Softmax-family before opset 13: the input is flattened to 2-D at axis */
    if (kind == AX_CUMSUM) {
        cc_value *a = cc_in(c, 1);
        if (!a || !a->is_const_scalar) {
            cc_fail(c, TERN_ERR_UNSUPPORTED, "CumSum with a run-time axis");
            return 1;
        }
        axis = (int64_t)a->const_scalar;
    } else if (kind == AX_ARGMAX || kind == AX_ARGMIN) {
        axis = tern_graph_attr_int(n, "axis", 0);
    } else {
        axis = tern_graph_attr_int(n, "axis", opset >= 13 ? -1 : 1);
        coerce = opset < 13;
    }
    axis = cc_norm_axis(axis, x->rank);
    if (x->rank == 0 || axis < 0 || axis >= x->rank) {
        cc_fail(c, TERN_ERR_INVALID, "axis %lld outside rank %d", (long long)axis, x->rank);
        return 1;
    }
    tern_dtype odt = kind == AX_ARGMAX || kind == AX_ARGMIN ? TERN_DTYPE_INT32 : cc_out_dtype(c, 0);
    cc_value *y = cc_out(c, 0, odt);
    if (!y)
        return 1;
    int red[CC_MAX_RANK] = {0};
    for (int d = 0; d < x->rank; d++)
        red[d] = coerce ? d >= axis : d == axis;
    uint64_t rows, cols;
    cc_value tin, tout;
    cc_value *xt = lx_axes_last(c, x, red, &tin, &rows, &cols);
    if (!xt)
        return 1;
    const int long_ok = kind == AX_ARGMAX || kind == AX_ARGMIN || kind == AX_SOFTMAX || kind == AX_LOGSOFTMAX;
    if (cols > ROW_MAX && (!long_ok || cols >= (uint64_t)IDX_BIG)) {
        cc_fail(c, TERN_ERR_UNSUPPORTED, "%s over %llu elements (at most %u%s)", n->op, (unsigned long long)cols,
                long_ok ? (unsigned)IDX_BIG - 1 : ROW_MAX, long_ok ? ", for exact fp32 indices" : "");
        lx_bcast_free(c, &tin, xt);
        return 1;
    }
    /* Same-shaped results computed in the permuted layout go to a scratch tensor, then back. */
    int same = kind != AX_ARGMAX && kind != AX_ARGMIN;
    cc_value *yt = y;
    if (same && xt != x) {
        yt = lx_tmp_value(c, &tout, y->dt, xt->rank, xt->dims);
        if (!yt) {
            lx_bcast_free(c, &tin, xt);
            return 1;
        }
    }
    int last = (int)tern_graph_attr_int(n, "select_last_index", 0);
    int exclusive = (int)tern_graph_attr_int(n, "exclusive", 0), reverse = (int)tern_graph_attr_int(n, "reverse", 0);
    if (cols > ROW_MAX)
        axis_long(c, kind, xt, same ? yt : y, rows, cols, last);
    for (uint64_t r0 = 0; r0 < rows && cols <= ROW_MAX && cc_ok(c); r0 += PARTS) {
        uint32_t p = (uint32_t)(rows - r0 < PARTS ? rows - r0 : PARTS), w = (uint32_t)cols;
        tern_view t = lx_tile(c, p, w, "ax_in"), s = lx_tile(c, p, w, "ax_tmp"), o = lx_tile(c, p, w, "ax_out");
        tern_view r = lx_tile(c, p, 1, "ax_r"), q = lx_tile(c, p, 1, "ax_q");
        tern_kernel_load(c->k, t, cc_view2d(c, xt, r0 * cols, p, cols, cols));
        switch (kind) {
        case AX_ARGMAX:
        case AX_ARGMIN:
        case AX_HARDMAX:
            tern_kernel_iota(c->k, o, 0, 0);
            arg_index(c, r, t, s, o, kind == AX_ARGMIN ? TERN_ALU_MIN : TERN_ALU_MAX, last);
            if (kind == AX_HARDMAX)
                lx_ts_ap(c, o, o, TERN_ALU_IS_EQ, r, TERN_ALU_BYPASS, tern_view_none());
            break;
        case AX_SOFTMAX:
        case AX_LOGSOFTMAX:
            tern_kernel_tensor_reduce(c->k, r, t, TERN_ALU_MAX, 1, 1); /* -max */
            tern_kernel_activation(c->k, s, t, TERN_ACT_EXP, 1.0f, r, tern_view_none(), q); /* q = sum */
            if (kind == AX_SOFTMAX) {
                lx_ts_ap(c, o, s, TERN_ALU_DIVIDE, q, TERN_ALU_BYPASS, tern_view_none());
            } else {
                act(c, q, q, TERN_ACT_LOG, 1.0f);
                lx_tt(c, q, q, r, TERN_ALU_SUBTRACT); /* log(sum) + max */
                      lx_ts_ap(c, o, t, TERN_ALU_SUBTRACT, q, TERN_ALU_BYPASS, tern_view_none());
            }
            break;
        case AX_CUMSUM: {
            tern_kernel_memset(c->k, VE, s, 0.0f);
            if (reverse) { /* a scan runs forward: reverse the columns on the way in and out */
                tern_view rv = t;
                rv.ap.offset += (uint64_t)(w - 1) * 4;
                rv.ap.dims[rv.ap.ndims - 1].step = -1;
                tern_kernel_tensor_copy(c->k, VE, o, rv);
                tern_kernel_tensor_copy(c->k, VE, t, o);
            }
            tern_kernel_tensor_tensor_scan(c->k, o, t, s, TERN_ALU_ADD, TERN_ALU_ADD, 0.0f);
            if (exclusive) { /* shift right by one: y[0] = 0, y[i] = inclusive[i - 1] */
                tern_kernel_memset(c->k, VE, s, 0.0f);
                if (w > 1)
                    tern_kernel_tensor_copy(c->k, VE, tern_view_block(c->k, s, 0, p, 1, w),
                                            tern_view_block(c->k, o, 0, p, 0, w - 1));
                tern_kernel_tensor_copy(c->k, VE, o, s);
            }
            if (reverse) {
                tern_view rv = o;
                rv.ap.offset += (uint64_t)(w - 1) * 4;
                rv.ap.dims[rv.ap.ndims - 1].step = -1;
                tern_kernel_tensor_copy(c->k, VE, s, rv);
                tern_kernel_tensor_copy(c->k, VE, o, s);
            }
            break;
        }
        }
        if (same)
            tern_kernel_store(c->k, cc_view2d(c, yt, r0 * cols, p, cols, cols), o);
        else
            tern_kernel_store(c->k, cc_view2d(c, y, r0, p, 1, 1), r);
        tern_kernel_release(c->k, t);
        tern_kernel_release(c->k, s);
        tern_kernel_release(c->k, o);
        tern_kernel_release(c->k, r);
        tern_kernel_release(c->k, q);
    }
    if (same && yt != y) {
        if (coerce) { /* the moved group is every axis from `axis` on: already in place */
            cc_copy(c, cc_view2d(c, y, 0, 1, y->numel, y->numel), cc_view2d(c, yt, 0, 1, y->numel, y->numel));
        } else {
            lx_axis_back(c, y, yt, (int)axis);
        }
        lx_tmp_free(c, &tout);
    }
    lx_bcast_free(c, &tin, xt);
    return 1;
}

/* ---- Gemm with every attribute ---- */

static int lower_gemm(cc *c)
{
    const tern_graph_node *n = cc_node(c);
    cc_value *a = cc_in(c, 0), *b = cc_in(c, 1), *cv = cc_in(c, 2);
    cc_value *y = cc_out(c, 0, TERN_DTYPE_FP32);
    if (!a || !b || !y)
        return 1;
    if (a->rank != 2 || b->rank != 2) {
        cc_fail(c, TERN_ERR_INVALID, "Gemm of ranks %d and %d", a->rank, b->rank);
        return 1;
    }
    int ta = (int)tern_graph_attr_int(n, "transA", 0), tb = (int)tern_graph_attr_int(n, "transB", 0);
    float alpha = tern_graph_attr_float(n, "alpha", 1.0f), beta = tern_graph_attr_float(n, "beta", 1.0f);
    uint64_t M = (uint64_t)a->dims[ta ? 1 : 0], K = (uint64_t)a->dims[ta ? 0 : 1];
    uint64_t N = (uint64_t)b->dims[tb ? 0 : 1];
    tern_dtype mdt = c->o->matmul_dtype;
    /* lhsT [K, M] and rhs [K, N] in the matmul dtype */
    tern_view lhsT = cc_temp(c, mdt, K, M);
    if (ta)
        cc_copy(c, lhsT, cc_view2d(c, a, 0, K, M, M));
    else
        tern_lib_transpose(c->k, lhsT, cc_view2d(c, a, 0, M, K, K));
    tern_view rhs;
    int rhs_tmp = 0;
    if (b->host) {
        rhs = cc_const2d(c, b->host, mdt, K, N, tb);
    } else {
        rhs = cc_temp(c, mdt, K, N);
        rhs_tmp = 1;
        if (tb)
            tern_lib_transpose(c->k, rhs, cc_view2d(c, b, 0, N, K, K));
        else
            cc_copy(c, rhs, cc_view2d(c, b, 0, K, N, N));
    }
    tern_gemm_opts go;
    tern_gemm_opts_default(&go);
    go.acc_dtype = TERN_DTYPE_FP32;
    go.tiles_in_block_m = 8;
    int epilogue = alpha != 1.0f || (cv && beta != 0.0f);
    tern_view prod = epilogue ? cc_temp(c, TERN_DTYPE_FP32, M, N) : cc_view2d(c, y, 0, M, N, N);
    tern_lib_gemm(c->k, prod, lhsT, rhs, &go);
    c->model_flops += 2.0 * (double)M * (double)N * (double)K;
    tern_kernel_release(c->k, lhsT);
    if (rhs_tmp)
        tern_kernel_release(c->k, rhs);
    if (epilogue) {
        cc_value pv;
        memset(&pv, 0, sizeof pv);
        pv.dt = TERN_DTYPE_FP32;
        pv.flat = prod;
        pv.rank = 2;
        pv.dims[0] = (int64_t)M;
        pv.dims[1] = (int64_t)N;
        pv.numel = M * N;
        pv.placed = 1;
        tern_view yv = cc_view2d(c, y, 0, 1, M * N, M * N);
        if (cv && beta != 0.0f) {
            cc_value tcb;
            cc_value *cb = bcast(c, cv, y, &tcb);
            if (cb) {
                tern_view cbv = cc_view2d(c, cb, 0, 1, M * N, M * N);
                tern_lib_scalar(c->k, yv, cc_view2d(c, &pv, 0, 1, M * N, M * N), TERN_ALU_MULT, alpha);
                tern_view ct = cc_temp(c, TERN_DTYPE_FP32, 1, M * N);
                tern_lib_scalar(c->k, ct, cbv, TERN_ALU_MULT, beta);
                tern_lib_binary(c->k, yv, yv, ct, TERN_ALU_ADD);
                tern_kernel_release(c->k, ct);
                lx_bcast_free(c, &tcb, cb);
            }
        } else {
            tern_lib_scalar(c->k, yv, cc_view2d(c, &pv, 0, 1, M * N, M * N), TERN_ALU_MULT, alpha);
        }
        tern_kernel_release(c->k, prod);
    }
    return 1;
}

/* ---- normalisations ---- */

/* Per-row statistics and the normalised rows of x[rows, cols]: y = (x - mean) * rstd [* gamma + beta], with mean
 * and rstd = 1/sqrt(var + eps) stored to mean_out / rstd_out when given (NULL: not wanted). */
static void norm_rows(cc *c, cc_value *x, cc_value *y, uint64_t rows, uint64_t cols, float eps, cc_value *gamma,
                      cc_value *beta, cc_value *mean_out, cc_value *rstd_out)
{
    for (uint64_t r0 = 0; r0 < rows && cc_ok(c); r0 += PARTS) {
        uint32_t p = (uint32_t)(rows - r0 < PARTS ? rows - r0 : PARTS), w = (uint32_t)cols;
        tern_view t = lx_tile(c, p, w, "ln_x"), s = lx_tile(c, p, w, "ln_sq");
        tern_view m = lx_tile(c, p, 1, "ln_mean"), v = lx_tile(c, p, 1, "ln_var");
        tern_kernel_load(c->k, t, cc_view2d(c, x, r0 * cols, p, cols, cols));
        tern_kernel_tensor_reduce(c->k, m, t, TERN_ALU_ADD, 1, 0);
        lx_ts(c, m, m, TERN_ALU_MULT, 1.0f / (float)cols, TERN_ALU_BYPASS, 0.0f);
        lx_ts_ap(c, t, t, TERN_ALU_SUBTRACT, m, TERN_ALU_BYPASS, tern_view_none());
        tern_kernel_activation(c->k, s, t, TERN_ACT_SQUARE, 1.0f, tern_view_none(), tern_view_none(), v);
        lx_ts(c, v, v, TERN_ALU_MULT, 1.0f / (float)cols, TERN_ALU_ADD, eps);
        act(c, v, v, TERN_ACT_RSQRT, 1.0f);
        lx_ts_ap(c, t, t, TERN_ALU_MULT, v, TERN_ALU_BYPASS, tern_view_none());
        if (gamma) {
            tern_lib_broadcast_row(c->k, s, cc_view2d(c, gamma, 0, 1, cols, cols));
            lx_tt(c, t, t, s, TERN_ALU_MULT);
        }
        if (beta) {
            tern_lib_broadcast_row(c->k, s, cc_view2d(c, beta, 0, 1, cols, cols));
            lx_tt(c, t, t, s, TERN_ALU_ADD);
        }
        tern_kernel_store(c->k, cc_view2d(c, y, r0 * cols, p, cols, cols), t);
        if (mean_out)
            tern_kernel_store(c->k, cc_view2d(c, mean_out, r0, p, 1, 1), m);
        if (rstd_out)
            tern_kernel_store(c->k, cc_view2d(c, rstd_out, r0, p, 1, 1), v);
        tern_kernel_release(c->k, t);
        tern_kernel_release(c->k, s);
        tern_kernel_release(c->k, m);
        tern_kernel_release(c->k, v);
    }
}

/* A per-column vector (gamma/beta) of `cols` elements: the value itself, or its broadcast to [cols]. */
static cc_value *as_row(cc *c, cc_value *g, uint64_t cols, const int64_t *ndims, int nd, cc_value *tmp)
{
    if (!g || g->numel == cols)
        return g;
    cc_value shape;
    memset(&shape, 0, sizeof shape);
    shape.rank = nd;
    for (int d = 0; d < nd; d++)
        shape.dims[d] = ndims[d];
    return bcast(c, g, &shape, tmp);
}

static int lower_layernorm_any(cc *c)
{
    const tern_graph_node *n = cc_node(c);
    cc_value *x = cc_in(c, 0), *g = cc_in(c, 1), *b = cc_in(c, 2);
    if (!x)
        return 1;
    int64_t axis = cc_norm_axis(tern_graph_attr_int(n, "axis", -1), x->rank);
    if (axis < 0 || axis >= x->rank) {
        cc_fail(c, TERN_ERR_INVALID, "axis %lld outside rank %d", (long long)axis, x->rank);
        return 1;
    }
    uint64_t rows = 1, cols = 1;
    for (int d = 0; d < x->rank; d++)
        *(d < axis ? &rows : &cols) *= (uint64_t)x->dims[d];
    if (cols > ROW_MAX) {
        cc_fail(c, TERN_ERR_UNSUPPORTED, "LayerNormalization over %llu elements", (unsigned long long)cols);
        return 1;
    }
    cc_value *y = cc_out(c, 0, cc_out_dtype(c, 0));
    cc_value *mean = cc_out_id(c, 1) >= 0 ? cc_out(c, 1, TERN_DTYPE_FP32) : NULL;
    cc_value *rstd = cc_out_id(c, 2) >= 0 ? cc_out(c, 2, TERN_DTYPE_FP32) : NULL;
    if (!y)
        return 1;
    cc_value tg, tb;
    cc_value *gr = as_row(c, g, cols, x->dims + axis, x->rank - (int)axis, &tg);
    cc_value *br = as_row(c, b, cols, x->dims + axis, x->rank - (int)axis, &tb);
    norm_rows(c, x, y, rows, cols, tern_graph_attr_float(n, "epsilon", 1e-5f), gr, br, mean, rstd);
    if (gr)
        lx_bcast_free(c, &tg, gr);
    if (br)
        lx_bcast_free(c, &tb, br);
    return 1;
}

static int lower_instancenorm(cc *c)
{
    const tern_graph_node *n = cc_node(c);
    cc_value *x = cc_in(c, 0), *sc = cc_in(c, 1), *bi = cc_in(c, 2);
    cc_value *y = cc_out(c, 0, cc_out_dtype(c, 0));
    if (!x || !sc || !bi || !y)
        return 1;
    if (x->rank < 3) {
        cc_fail(c, TERN_ERR_INVALID, "InstanceNormalization of rank %d", x->rank);
        return 1;
    }
    uint64_t N = (uint64_t)x->dims[0], C = (uint64_t)x->dims[1], rows = N * C, cols = x->numel / (rows ? rows : 1);
    if (cols > ROW_MAX) {
        cc_fail(c, TERN_ERR_UNSUPPORTED, "InstanceNormalization over %llu elements", (unsigned long long)cols);
        return 1;
    }
    norm_rows(c, x, y, rows, cols, tern_graph_attr_float(n, "epsilon", 1e-5f), NULL, NULL, NULL, NULL);
    /* per-row scale and bias: scale[c] for row n * C + c */
    cc_value ts_v, tb_v;
    int64_t d2[2] = {(int64_t)N, (int64_t)C}, st[2] = {0, 1};
    if (!lx_tmp_value(c, &ts_v, TERN_DTYPE_FP32, 2, d2) || !lx_tmp_value(c, &tb_v, TERN_DTYPE_FP32, 2, d2))
        return 1;
    lx_gather_copy(c, &ts_v, sc, 0, 2, d2, st);
    lx_gather_copy(c, &tb_v, bi, 0, 2, d2, st);
    for (uint64_t r0 = 0; r0 < rows && cc_ok(c); r0 += PARTS) {
        uint32_t p = (uint32_t)(rows - r0 < PARTS ? rows - r0 : PARTS), w = (uint32_t)cols;
        tern_view t = lx_tile(c, p, w, "in_y"), s = lx_tile(c, p, 1, "in_s"), b = lx_tile(c, p, 1, "in_b");
        tern_kernel_load(c->k, t, cc_view2d(c, y, r0 * cols, p, cols, cols));
        tern_kernel_load(c->k, s, cc_view2d(c, &ts_v, r0, p, 1, 1));
        tern_kernel_load(c->k, b, cc_view2d(c, &tb_v, r0, p, 1, 1));
        lx_ts_ap(c, t, t, TERN_ALU_MULT, s, TERN_ALU_ADD, b);
        tern_kernel_store(c->k, cc_view2d(c, y, r0 * cols, p, cols, cols), t);
        tern_kernel_release(c->k, t);
        tern_kernel_release(c->k, s);
        tern_kernel_release(c->k, b);
    }
    lx_tmp_free(c, &ts_v);
    lx_tmp_free(c, &tb_v);
    return 1;
}

/* ---- gathers with run-time indices ---- */

static void f_index(cc *c, const ew_ctx *x, const tern_view *in, tern_view o, const tern_view *s)
{ /* o = (idx + dim * (idx < 0)) * stride [+ base] */
    lx_ts(c, s[0], in[0], TERN_ALU_IS_LT, 0.0f, TERN_ALU_MULT, x->a);
    lx_tt(c, s[0], s[0], in[0], TERN_ALU_ADD);
    if (x->flag) {
        lx_ts(c, s[0], s[0], TERN_ALU_MULT, x->b, TERN_ALU_BYPASS, 0.0f);
        lx_tt(c, o, s[0], in[1], TERN_ALU_ADD);
    } else {
        lx_ts(c, o, s[0], TERN_ALU_MULT, x->b, TERN_ALU_BYPASS, 0.0f);
    }
}

/* int32 row ids from run-time indices (negative ones count from the end of an axis of `dim`), times stride, plus
 * an optional per-element base; ids is a fresh scratch value of idx's shape. */
static cc_value *row_ids(cc *c, cc_value *idx, int64_t dim, int64_t stride, cc_value *base, cc_value *ids)
{
    if (!lx_tmp_value(c, ids, TERN_DTYPE_INT32, idx->rank, idx->dims))
        return NULL;
    ew_ctx x = {cc_node(c), (float)dim, (float)stride, 1, base != NULL, TERN_ALU_BYPASS};
    cc_value *xs[2] = {idx, base};
    ew_apply(c, xs, base ? 2 : 1, ids, f_index, &x, 0);
    return ids;
}

static int lower_gather_rt(cc *c)
{
    const tern_graph_node *n = cc_node(c);
    cc_value *data = cc_in(c, 0), *idx = cc_in(c, 1);
    cc_value *y = cc_out(c, 0, data ? data->dt : TERN_DTYPE_FP32);
    if (!data || !idx || !y)
        return 1;
    int64_t axis = cc_norm_axis(tern_graph_attr_int(n, "axis", 0), data->rank);
    if (axis < 0 || axis >= data->rank) {
        cc_fail(c, TERN_ERR_INVALID, "axis %lld outside rank %d", (long long)axis, data->rank);
        return 1;
    }
    uint64_t rows = (uint64_t)data->dims[axis], outer = 1, inner = 1, nidx = idx->numel;
    for (int d = 0; d < data->rank; d++)
        if (d < axis)
            outer *= (uint64_t)data->dims[d];
        else if (d > axis)
            inner *= (uint64_t)data->dims[d];
    if (nidx == 0 || y->numel == 0)
        return 1;
    cc_value ids;
    if (!row_ids(c, idx, (int64_t)rows, 1, NULL, &ids))
        return 1;
    tern_view idv = cc_view2d(c, &ids, 0, nidx, 1, 1);
    if (outer == 1) {
        tern_lib_embedding(c->k, cc_view2d(c, y, 0, nidx, inner, inner), cc_view2d(c, data, 0, rows, inner, inner),
                           idv);
    } else { /* table [rows, outer * inner] (axis first), gathered rows moved back to [outer, n, inner] */
        cc_value tab, got;
        int64_t td[3] = {(int64_t)rows, (int64_t)outer, (int64_t)inner};
        int64_t tst[3] = {(int64_t)inner, (int64_t)(rows * inner), 1};
        int64_t gd[3] = {(int64_t)nidx, (int64_t)outer, (int64_t)inner};
        if (lx_tmp_value(c, &tab, data->dt, 3, td) && lx_tmp_value(c, &got, data->dt, 3, gd)) {
            lx_gather_copy(c, &tab, data, 0, 3, td, tst);
            tern_lib_embedding(c->k, cc_view2d(c, &got, 0, nidx, outer * inner, outer * inner),
                               cc_view2d(c, &tab, 0, rows, outer * inner, outer * inner), idv);
            int64_t yd[3] = {(int64_t)outer, (int64_t)nidx, (int64_t)inner};
            int64_t yst[3] = {(int64_t)inner, (int64_t)(outer * inner), 1};
            lx_gather_copy(c, y, &got, 0, 3, yd, yst);
            lx_tmp_free(c, &got);
            lx_tmp_free(c, &tab);
        }
    }
    lx_tmp_free(c, &ids);
    return 1;
}

static int lower_gather_elements(cc *c)
{
    const tern_graph_node *n = cc_node(c);
    cc_value *data = cc_in(c, 0), *idx = cc_in(c, 1);
    cc_value *y = cc_out(c, 0, data ? data->dt : TERN_DTYPE_FP32);
    if (!data || !idx || !y)
        return 1;
    int64_t axis = cc_norm_axis(tern_graph_attr_int(n, "axis", 0), data->rank);
    if (axis < 0 || axis >= data->rank || idx->rank != data->rank) {
        cc_fail(c, TERN_ERR_INVALID, "axis %lld, data rank %d, indices rank %d", (long long)axis, data->rank,
                idx->rank);
        return 1;
    }
    if (y->numel == 0)
        return 1;
    if (data->numel >= (1u << 24)) {
        cc_fail(c, TERN_ERR_UNSUPPORTED, "GatherElements of a tensor of %llu elements (ids are computed in fp32)",
                (unsigned long long)data->numel);
        return 1;
    }
    /* element ids: base (every other axis' offset, a constant) + idx * stride(axis), gathered as 1-element rows */
    int64_t ds[CC_MAX_RANK];
    cc_strides(data, ds);
    tern_host_tensor *bh = NULL;
    tern_error e;
    int64_t n1 = (int64_t)idx->numel;
    if (tern_host_tensor_new(TERN_ELEM_FLOAT, 1, &n1, &bh, &e)) {
        cc_fail(c, e.code, "%s", e.msg);
        return 1;
    }
    for (uint64_t i = 0; i < idx->numel; i++) {
        uint64_t rem = i;
        int64_t off = 0;
        for (int d = idx->rank - 1; d >= 0; d--) {
            uint64_t id = rem % (uint64_t)idx->dims[d];
            rem /= (uint64_t)idx->dims[d];
            if (d != axis)
                off += (int64_t)id * ds[d];
        }
        bh->f[i] = (float)off;
    }
    cc_value base;
    memset(&base, 0, sizeof base);
    base.dt = TERN_DTYPE_FP32;
    base.rank = idx->rank;
    memcpy(base.dims, idx->dims, sizeof base.dims);
    base.numel = idx->numel;
    base.placed = 1;
    base.flat = cc_const2d(c, bh, TERN_DTYPE_FP32, 1, idx->numel, 0);
    tern_host_tensor_free(bh);
    cc_value ids;
    if (base.flat.region >= 0 && row_ids(c, idx, data->dims[axis], ds[axis], &base, &ids)) {
        tern_lib_embedding(c->k, cc_view2d(c, y, 0, y->numel, 1, 1), cc_view2d(c, data, 0, data->numel, 1, 1),
                           cc_view2d(c, &ids, 0, idx->numel, 1, 1));
        lx_tmp_free(c, &ids);
    }
    return 1;
}

/* ---- casts ---- */

static void f_trunc(cc *c, const ew_ctx *x, const tern_view *in, tern_view o, const tern_view *s)
{ /* toward zero: x - fmod(x, 1) */
    (void)x;
    lx_ts(c, s[0], in[0], TERN_ALU_MOD, 1.0f, TERN_ALU_BYPASS, 0.0f);
    lx_tt(c, o, in[0], s[0], TERN_ALU_SUBTRACT);
}

/* Cast between text (ONNX string) and float32: GpSimd's text_parse / text_format on SBUF tiles of up to 128 x
 * TEXT_TILE elements, each element a TERN_EXE_TEXT_CELL-byte cell on the text side. */
enum { TEXT_TILE = 32 };
static void lower_cast_text(cc *c, cc_value *x, cc_value *y, int parse)
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
static int lower_cast_any(cc *c)
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
        ew_apply(c, &x, 1, y, f_trunc, &e, 0);
        return 1;
    }
    cc_copy(c, cc_view2d(c, y, 0, 1, y->numel, y->numel), cc_view2d(c, x, 0, 1, x->numel, x->numel));
    return 1;
}

/* ---- inverse trigonometry ---- */

/* atan(u) for any u: z = min(|u|, 1/|u|) in [0, 1], atan(z) = z * P(z^2) (Abramowitz & Stegun 4.4.49, absolute
 * error below 2e-8), pi/2 - atan(z) when |u| > 1, and u's sign. s[0..2] are used; o may not alias u. */
static void atan_any(cc *c, tern_view o, tern_view u, const tern_view *s)
{
    static const float a[8] = {-0.3333314528f, 0.1999355085f, -0.1420889944f, 0.1065626393f,
                               -0.0752896400f, 0.0429096138f, -0.0161657367f, 0.0028662257f};
    act(c, s[0], u, TERN_ACT_ABS, 1.0f);
    lx_ts(c, s[1], s[0], TERN_ALU_IS_GT, 1.0f, TERN_ALU_BYPASS, 0.0f); /* big */
          tern_kernel_reciprocal(c->k, s[2], s[0]);
    tern_kernel_select(c->k, s[0], s[1], s[2], s[0]);                 /* z */
    act(c, s[2], s[0], TERN_ACT_SQUARE, 1.0f);                        /* t = z^2 */
    lx_ts(c, o, s[2], TERN_ALU_MULT, a[7], TERN_ALU_BYPASS, 0.0f);
    for (int i = 6; i >= 0; i--)
        tern_kernel_scalar_tensor_tensor(c->k, o, o, TERN_ALU_ADD, a[i], TERN_ALU_MULT, s[2]);
    tern_kernel_scalar_tensor_tensor(c->k, o, o, TERN_ALU_ADD, 1.0f, TERN_ALU_MULT, s[0]); /* atan(z) */
    lx_ts(c, s[2], o, TERN_ALU_MULT, -1.0f, TERN_ALU_ADD, 1.57079632679490f);
    tern_kernel_select(c->k, o, s[1], s[2], o);
    act(c, s[2], u, TERN_ACT_SIGN, 1.0f);
    lx_tt(c, o, o, s[2], TERN_ALU_MULT);
}

static void f_atan(cc *c, const ew_ctx *x, const tern_view *in, tern_view o, const tern_view *s)
{
    (void)x;
    atan_any(c, o, in[0], s);
}

static void f_asin_acos(cc *c, const ew_ctx *x, const tern_view *in, tern_view o, const tern_view *s)
{ /* asin(v) = atan(v / sqrt(1 - v^2)); acos = pi/2 - asin */
    act(c, o, in[0], TERN_ACT_SQUARE, 1.0f);
    lx_ts(c, o, o, TERN_ALU_MULT, -1.0f, TERN_ALU_ADD, 1.0f);
    act(c, o, o, TERN_ACT_SQRT, 1.0f);
    lx_tt(c, o, in[0], o, TERN_ALU_DIVIDE);
    tern_kernel_tensor_copy(c->k, VE, in[0], o); /* the input lx_tile is free now: atan reads from it */
    atan_any(c, o, in[0], s);
    if (x->flag)
        lx_ts(c, o, o, TERN_ALU_MULT, -1.0f, TERN_ALU_ADD, 1.57079632679490f);
}

static int lower_atrig(cc *c)
{
    const tern_op_id id = (tern_op_id)cc_node(c)->op_id;
    ew_ctx x = {cc_node(c), 0, 0, 1, id == TERN_GOP_ACOS, TERN_ALU_BYPASS};
    if (!need_float(c, cc_in(c, 0)))
        return 1;
    unary_op(c, id == TERN_GOP_ATAN ? f_atan : f_asin_acos, &x);
    return 1;
}

/* ---- GatherND, MeanVarianceNormalization, LRN ---- */

/* y (x's shape) from t laid out as lx_axes_last(red) made it: [kept axes..., reduced axes...]. */
static void axes_back(cc *c, cc_value *y, cc_value *t, const int *red)
{
    int order[CC_MAX_RANK], no = 0;
    for (int d = 0; d < y->rank; d++)
        if (!red[d])
            order[no++] = d;
    for (int d = 0; d < y->rank; d++)
        if (red[d])
            order[no++] = d;
    int64_t st[CC_MAX_RANK], s = 1;
    for (int k = y->rank - 1; k >= 0; k--) {
        st[order[k]] = s;
        s *= y->dims[order[k]];
    }
    lx_gather_copy(c, y, t, 0, y->rank, y->dims, st);
}

static int lower_mvn(cc *c)
{
    cc_value *x = cc_in(c, 0);
    cc_value *y = cc_out(c, 0, cc_out_dtype(c, 0));
    if (!x || !y)
        return 1;
    int red[CC_MAX_RANK] = {0};
    const tern_graph_attr *aa = tern_graph_node_attr(cc_node(c), "axes");
    if (aa) {
        for (size_t i = 0; i < aa->n; i++) {
            int64_t a = cc_norm_axis(aa->ints[i], x->rank);
            if (a < 0 || a >= x->rank) {
                cc_fail(c, TERN_ERR_INVALID, "axis %lld outside rank %d", (long long)aa->ints[i], x->rank);
                return 1;
            }
            red[a] = 1;
        }
    } else {
        for (int d = 0; d < x->rank; d++)
            red[d] = d != 1; /* default axes [0, 2, 3]: all but channels */
    }
    uint64_t rows, cols;
    cc_value tin, tout;
    cc_value *xt = lx_axes_last(c, x, red, &tin, &rows, &cols);
    if (!xt)
        return 1;
    if (cols > ROW_MAX) {
        cc_fail(c, TERN_ERR_UNSUPPORTED, "MeanVarianceNormalization over %llu elements", (unsigned long long)cols);
    } else if (xt == x) {
        norm_rows(c, x, y, rows, cols, 1e-18f, NULL, NULL, NULL, NULL);
    } else if (lx_tmp_value(c, &tout, y->dt, xt->rank, xt->dims)) {
        /* ONNX divides by sqrt(var) + 1e-9; rsqrt(var + 1e-18) differs by far less than the tolerance */
        norm_rows(c, xt, &tout, rows, cols, 1e-18f, NULL, NULL, NULL, NULL);
        axes_back(c, y, &tout, red);
        lx_tmp_free(c, &tout);
    }
    lx_bcast_free(c, &tin, xt);
    return 1;
}

static void f_lrn(cc *c, const ew_ctx *x, const tern_view *in, tern_view o, const tern_view *s)
{ /* x / (bias + alpha / size * sum)^beta, the power as exp(beta * ln(.)) (the base is positive) */
    lx_ts(c, s[0], in[1], TERN_ALU_MULT, x->a, TERN_ALU_ADD, x->b);
    act(c, s[0], s[0], TERN_ACT_LOG, 1.0f);
    act(c, s[0], s[0], TERN_ACT_EXP, x->g);
    lx_tt(c, o, in[0], s[0], TERN_ALU_DIVIDE);
}

static int lower_lrn(cc *c)
{
    const tern_graph_node *n = cc_node(c);
    cc_value *x = cc_in(c, 0);
    cc_value *y = cc_out(c, 0, cc_out_dtype(c, 0));
    if (!x || !y)
        return 1;
    if (x->rank < 3) {
        cc_fail(c, TERN_ERR_INVALID, "LRN of rank %d", x->rank);
        return 1;
    }
    if (!need_float(c, x))
        return 1;
    int64_t size = tern_graph_attr_int(n, "size", 1), C = x->dims[1];
    if (C > (int64_t)ROW_MAX) {
        cc_fail(c, TERN_ERR_UNSUPPORTED, "LRN over %lld channels", (long long)C);
        return 1;
    }
    /* x with channels last ([rows, C]) and first ([C, rows], squared: the GEMM's lhsT); sum = sq @ band */
    int red[CC_MAX_RANK] = {0};
    red[1] = 1;
    uint64_t rows, cols;
    cc_value tin, sq, sum, yt;
    cc_value *xl = lx_axes_last(c, x, red, &tin, &rows, &cols);
    if (!xl)
        return 1;
    int64_t fd[2] = {C, (int64_t)rows}, sd[2] = {(int64_t)rows, C};
    if (!lx_tmp_value(c, &sq, TERN_DTYPE_FP32, 2, fd)) {
        lx_bcast_free(c, &tin, xl);
        return 1;
    }
    int64_t st2[2] = {1, C};
    lx_gather_copy(c, &sq, xl, 0, 2, fd, st2);
    tern_lib_unary(c->k, cc_view2d(c, &sq, 0, (uint64_t)C, rows, rows), cc_view2d(c, &sq, 0, (uint64_t)C, rows, rows),
                   TERN_ACT_SQUARE, 1.0f);
    tern_host_tensor *band = NULL;
    tern_error e;
    int64_t bd[2] = {C, C};
    if (tern_host_tensor_new(TERN_ELEM_FLOAT, 2, bd, &band, &e)) {
        cc_fail(c, e.code, "%s", e.msg);
        return 1;
    }
    int64_t lo = (size - 1) / 2, hi = size - 1 - lo; /* window [c - floor((size-1)/2), c + ceil((size-1)/2)] */
    for (int64_t i = 0; i < C; i++)
        for (int64_t j = 0; j < C; j++)
            band->f[i * C + j] = (i >= j - lo && i <= j + hi) ? 1.0f : 0.0f;
    tern_view bv = cc_const2d(c, band, TERN_DTYPE_FP32, (uint64_t)C, (uint64_t)C, 0);
    tern_host_tensor_free(band);
    if (lx_tmp_value(c, &sum, TERN_DTYPE_FP32, 2, sd)) {
        tern_gemm_opts go;
        tern_gemm_opts_default(&go);
        go.acc_dtype = TERN_DTYPE_FP32;
        go.tiles_in_block_m = 8;
        tern_lib_gemm(c->k, cc_view2d(c, &sum, 0, rows, (uint64_t)C, (uint64_t)C),
                      cc_view2d(c, &sq, 0, (uint64_t)C, rows, rows), bv, &go);
        ew_ctx ctx = {n, tern_graph_attr_float(n, "alpha", 1e-4f) / (float)size, tern_graph_attr_float(n, "bias", 1.0f),
                      tern_graph_attr_float(n, "beta", 0.75f), 0, TERN_ALU_BYPASS};
        cc_value *dst = xl == x ? y : lx_tmp_value(c, &yt, y->dt, xl->rank, xl->dims);
        if (dst) {
            cc_value *xs[2] = {xl, &sum};
            sum.rank = xl->rank;
            memcpy(sum.dims, xl->dims, sizeof sum.dims);
            ew_apply(c, xs, 2, dst, f_lrn, &ctx, 0);
            if (dst != y) {
                axes_back(c, y, dst, red);
                lx_tmp_free(c, &yt);
            }
        }
        lx_tmp_free(c, &sum);
    }
    lx_tmp_free(c, &sq);
    lx_bcast_free(c, &tin, xl);
    return 1;
}

static int lower_gather_nd(cc *c)
{
    const tern_graph_node *n = cc_node(c);
    cc_value *data = cc_in(c, 0), *idx = cc_in(c, 1);
    cc_value *y = cc_out(c, 0, data ? data->dt : TERN_DTYPE_FP32);
    if (!data || !idx || !y)
        return 1;
    int64_t b = tern_graph_attr_int(n, "batch_dims", 0);
    int64_t m = idx->rank ? idx->dims[idx->rank - 1] : 0;
    if (idx->rank < 1 || m < 1 || b < 0 || b + m > data->rank || b >= idx->rank) {
        cc_fail(c, TERN_ERR_INVALID, "GatherND of data rank %d, indices rank %d, batch_dims %lld", data->rank,
                idx->rank, (long long)b);
        return 1;
    }
    uint64_t B = 1, inner = 1, per = 1; /* batches, slice elements, slices per batch */
    for (int64_t d = 0; d < b; d++)
        B *= (uint64_t)data->dims[d];
    for (int64_t d = b; d < b + m; d++)
        per *= (uint64_t)data->dims[d];
    for (int64_t d = b + m; d < data->rank; d++)
        inner *= (uint64_t)data->dims[d];
    uint64_t nt = idx->numel / (uint64_t)m; /* index tuples */
    if (nt == 0 || y->numel == 0)
        return 1;
    if (B * per >= (1u << 24) || nt > ROW_MAX * 64) {
        cc_fail(c, TERN_ERR_UNSUPPORTED, "GatherND over %llu slices", (unsigned long long)(B * per));
        return 1;
    }
    /* constant rows: the tuple's dims and strides (in slices); per tuple the batch's first slice */
    tern_host_tensor *hd = NULL, *hs = NULL, *hb = NULL;
    tern_error e;
    int64_t nt64 = (int64_t)nt;
    if (tern_host_tensor_new(TERN_ELEM_FLOAT, 1, &m, &hd, &e) || tern_host_tensor_new(TERN_ELEM_FLOAT, 1, &m, &hs, &e) ||
        tern_host_tensor_new(TERN_ELEM_FLOAT, 1, &nt64, &hb, &e)) {
        tern_host_tensor_free(hd);
        tern_host_tensor_free(hs);
        cc_fail(c, e.code, "%s", e.msg);
        return 1;
    }
    uint64_t stv = 1;
    for (int64_t k = m - 1; k >= 0; k--) {
        hd->f[k] = (float)data->dims[b + k];
        hs->f[k] = (float)stv;
        stv *= (uint64_t)data->dims[b + k];
    }
    for (uint64_t t = 0; t < nt; t++)
        hb->f[t] = (float)((t / (nt / B)) * per);
    tern_view dv = cc_const2d(c, hd, TERN_DTYPE_FP32, 1, (uint64_t)m, 0);
    tern_view sv = cc_const2d(c, hs, TERN_DTYPE_FP32, 1, (uint64_t)m, 0);
    tern_view bv = cc_const2d(c, hb, TERN_DTYPE_FP32, nt, 1, 0);
    tern_host_tensor_free(hd);
    tern_host_tensor_free(hs);
    tern_host_tensor_free(hb);
    cc_value ids;
    int64_t idd[1] = {(int64_t)nt};
    if (!lx_tmp_value(c, &ids, TERN_DTYPE_INT32, 1, idd))
        return 1;
    for (uint64_t r0 = 0; r0 < nt && cc_ok(c); r0 += PARTS) {
        uint32_t p = (uint32_t)(nt - r0 < PARTS ? nt - r0 : PARTS), w = (uint32_t)m;
        tern_view t = lx_tile(c, p, w, "gnd_idx"), s = lx_tile(c, p, w, "gnd_tmp"), dims = lx_tile(c, p, w, "gnd_dims");
        tern_view str = lx_tile(c, p, w, "gnd_str"), r = lx_tile(c, p, 1, "gnd_id"), base = lx_tile(c, p, 1, "gnd_base");
        tern_kernel_load(c->k, t, cc_view2d(c, idx, r0 * (uint64_t)m, p, (uint64_t)m, (uint64_t)m));
        tern_lib_broadcast_row(c->k, dims, dv);
        tern_lib_broadcast_row(c->k, str, sv);
        tern_kernel_load(c->k, base, tern_view_block(c->k, bv, r0, r0 + p, 0, 1));
        lx_ts(c, s, t, TERN_ALU_IS_LT, 0.0f, TERN_ALU_BYPASS, 0.0f); /* negative: from the end of its axis */
              lx_tt(c, s, s, dims, TERN_ALU_MULT);
        lx_tt(c, t, t, s, TERN_ALU_ADD);
        lx_tt(c, t, t, str, TERN_ALU_MULT);
        tern_kernel_tensor_reduce(c->k, r, t, TERN_ALU_ADD, 1, 0);
        lx_tt(c, r, r, base, TERN_ALU_ADD);
        tern_kernel_store(c->k, cc_view2d(c, &ids, r0, p, 1, 1), r);
        tern_kernel_release(c->k, t);
        tern_kernel_release(c->k, s);
        tern_kernel_release(c->k, dims);
        tern_kernel_release(c->k, str);
        tern_kernel_release(c->k, r);
        tern_kernel_release(c->k, base);
    }
    tern_lib_embedding(c->k, cc_view2d(c, y, 0, nt, inner, inner), cc_view2d(c, data, 0, B * per, inner, inner),
                       cc_view2d(c, &ids, 0, nt, 1, 1));
    lx_tmp_free(c, &ids);
    return 1;
}

/* ---- integer division ---- */

static void f_div(cc *c, const ew_ctx *x, const tern_view *in, tern_view o, const tern_view *s)
{ /* a / b in fp32; integer results truncate toward zero (C, numpy's int division for ONNX) */
    lx_tt(c, x->flag ? s[1] : o, in[0], in[1], TERN_ALU_DIVIDE);
    if (x->flag) {
        lx_ts(c, s[0], s[1], TERN_ALU_MOD, 1.0f, TERN_ALU_BYPASS, 0.0f);
        lx_tt(c, o, s[1], s[0], TERN_ALU_SUBTRACT);
    }
}

static int lower_div(cc *c)
{
    ew_ctx x = {cc_node(c), 0, 0, 1, !tern_dtype_is_float(cc_out_dtype(c, 0)), TERN_ALU_BYPASS};
    binary_op(c, f_div, &x, 0);
    return 1;
}

/* ---- the table ---- */

/* The general rules: each takes every node of its op that lower.c's faster special cases decline. */
static const cc_rule extra_rules[] = {
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
    {TERN_GOP_ARG_MAX, "axis.general", NULL, lower_axis_op},
    {TERN_GOP_ARG_MIN, "axis.general", NULL, lower_axis_op},
    {TERN_GOP_HARDMAX, "axis.general", NULL, lower_axis_op},
    {TERN_GOP_SOFTMAX, "axis.general", NULL, lower_axis_op},
    {TERN_GOP_LOG_SOFTMAX, "axis.general", NULL, lower_axis_op},
    {TERN_GOP_CUM_SUM, "axis.general", NULL, lower_axis_op},
    {TERN_GOP_REDUCE_SUM, "reduce.any", NULL, lower_reduce_any},
    {TERN_GOP_REDUCE_MEAN, "reduce.any", NULL, lower_reduce_any},
    {TERN_GOP_REDUCE_MAX, "reduce.any", NULL, lower_reduce_any},
    {TERN_GOP_REDUCE_MIN, "reduce.any", NULL, lower_reduce_any},
    {TERN_GOP_REDUCE_PROD, "reduce.any", NULL, lower_reduce_any},
    {TERN_GOP_REDUCE_L1, "reduce.any", NULL, lower_reduce_any},
    {TERN_GOP_REDUCE_L2, "reduce.any", NULL, lower_reduce_any},
    {TERN_GOP_REDUCE_SUM_SQUARE, "reduce.any", NULL, lower_reduce_any},
    {TERN_GOP_REDUCE_LOG_SUM, "reduce.any", NULL, lower_reduce_any},
    {TERN_GOP_REDUCE_LOG_SUM_EXP, "reduce.any", NULL, lower_reduce_any},
    {TERN_GOP_GEMM, "gemm.general", NULL, lower_gemm},
    {TERN_GOP_GATHER, "gather.runtime", NULL, lower_gather_rt},
    {TERN_GOP_GATHER_ELEMENTS, "gather_elements", NULL, lower_gather_elements},
    {TERN_GOP_GATHER_ND, "gather_nd", NULL, lower_gather_nd},
    {TERN_GOP_LAYER_NORMALIZATION, "layernorm.any", NULL, lower_layernorm_any},
    {TERN_GOP_INSTANCE_NORMALIZATION, "instancenorm", NULL, lower_instancenorm},
    {TERN_GOP_MEAN_VARIANCE_NORMALIZATION, "mvn", NULL, lower_mvn},
    {TERN_GOP_LRN, "lrn", NULL, lower_lrn},
    {TERN_GOP_TRILU, "trilu", NULL, lx_lower_trilu},
    {TERN_GOP_TILE, "tile.copy", NULL, lx_lower_tile},
    {TERN_GOP_PAD, "pad.copy", NULL, lx_lower_pad},
    {TERN_GOP_DEPTH_TO_SPACE, "depth_space.copy", NULL, lx_lower_depth_space},
    {TERN_GOP_SPACE_TO_DEPTH, "depth_space.copy", NULL, lx_lower_depth_space},
    {TERN_GOP_RESIZE, "resize", NULL, lx_lower_resize},
    {TERN_GOP_UPSAMPLE, "resize", NULL, lx_lower_resize},
    {TERN_GOP_EYE_LIKE, "eyelike", NULL, lx_lower_eyelike},
    {TERN_GOP_ONE_HOT, "onehot", NULL, lx_lower_onehot},
    {TERN_GOP_TOP_K, "topk", NULL, lx_lower_topk},
};
const cc_rule_set cc_rules_extra = CC_RULE_SET("lower_extra.c", extra_rules);
