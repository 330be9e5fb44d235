/* Op lowerings: each turns one graph node into kernel-library calls and DMA copies on the values' HBM places.
 * Conventions: a tensor of shape [..., C] is seen as 2-D [numel / C, C]; broadcasting is materialised by one DMA
 * whose source pattern repeats data with zero strides; views (Reshape & co) alias storage. docs/compiler.md
 * lists every op, how it lowers and its limits. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "compiler/compile_internal.h"
#include "graph/graph_internal.h"
#include "graph/op_params.h"

/* ---- shape helpers ---- */

static void rows_cols(const cc_value *x, uint64_t *rows, uint64_t *cols)
{
    *cols = x->rank > 0 ? (uint64_t)x->dims[x->rank - 1] : 1;
    if (*cols == 0)
        *cols = 1;
    *rows = x->numel / *cols;
}

static tern_view flat2d(cc *c, cc_value *x)
{
    uint64_t r, cl;
    rows_cols(x, &r, &cl);
    return cc_view2d(c, x, 0, r, cl, cl);
}

/* Copy src (viewed with `rank` dims `dims` and element strides `st`, starting at element `off`) into the
 * contiguous tensor dst: one DMA whose source pattern has at most a partition dim and four free dims after
 * merging dims that are contiguous with each other. Zero strides broadcast. */
static void strided_copy(cc *c, cc_value *dst, uint64_t dst_off, cc_value *src, uint64_t off, int rank,
                         const int64_t *dims, const int64_t *st)
{
    int64_t od[CC_MAX_RANK], os[CC_MAX_RANK];
    int n = 0;
    for (int d = 0; d < rank; d++) {
        if (dims[d] == 1)
            continue; /* size-1 dims move nothing */
        if (n > 0 && os[n - 1] == st[d] * dims[d]) {
            od[n - 1] *= dims[d];
            os[n - 1] = st[d];
        } else {
            od[n] = dims[d];
            os[n] = st[d];
            n++;
        }
    }
    if (n == 0) {
        od[0] = 1;
        os[0] = 1;
        n = 1;
    }
    uint64_t total = 1;
    for (int d = 0; d < n; d++)
        total *= (uint64_t)od[d];
    uint32_t parts = 1;
    int64_t pstep = 0;
    int first = 0;
    if (n == 5 || (n > 1 && od[0] <= 65535)) {
        if (od[0] > 65535) {
            cc_fail(c, TERN_ERR_UNSUPPORTED, "a copy with an outer dimension of %lld over 5 dimensions",
                    (long long)od[0]);
            return;
        }
        parts = (uint32_t)od[0];
        pstep = os[0];
        first = 1;
    }
    if (n - first > 4) {
        cc_fail(c, TERN_ERR_UNSUPPORTED, "a copy pattern of %d dimensions after merging (at most 5)", n);
        return;
    }
    uint32_t nums[4];
    int32_t steps[4];
    for (int d = first; d < n; d++) {
        if (od[d] > UINT32_MAX || os[d] > INT32_MAX || os[d] < INT32_MIN) {
            cc_fail(c, TERN_ERR_RANGE, "a copy dimension of %lld (stride %lld) exceeds the access pattern",
                    (long long)od[d], (long long)os[d]);
            return;
        }
        nums[d - first] = (uint32_t)od[d];
        steps[d - first] = (int32_t)os[d];
    }
    tern_view s = cc_view(c, src, off, parts, pstep, (unsigned)(n - first), nums, steps);
    tern_view t = cc_view2d(c, dst, dst_off, 1, total, total);
    cc_copy(c, t, s);
}

/* Row-major strides of x. */
/* x broadcast to the shape (rank, dims) as a view: x itself when the shapes match, else a scratch copy. */
static cc_value *broadcast_to(cc *c, cc_value *x, cc_value *out, cc_value *tmp)
{
    if (cc_same_shape(x, out))
        return x;
    int64_t xs[CC_MAX_RANK], st[CC_MAX_RANK];
    cc_strides(x, xs);
    for (int d = 0; d < out->rank; d++) {
        int xd = d - (out->rank - x->rank);
        st[d] = (xd < 0 || x->dims[xd] == 1) ? 0 : xs[xd];
    }
    memset(tmp, 0, sizeof *tmp);
    *tmp = *out;
    tmp->dt = x->dt;
    tmp->host = NULL;
    tmp->flat = cc_temp(c, x->dt, 1, out->numel);
    if (tmp->flat.region < 0)
        return NULL;
    strided_copy(c, tmp, 0, x, 0, out->rank, out->dims, st);
    return tmp;
}

static void release_tmp(cc *c, cc_value *tmp, cc_value *used)
{
    if (used == tmp && tmp->flat.region >= 0)
        tern_kernel_release(c->k, tmp->flat);
}

/* ---- elementwise ---- */

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

/* Whether col broadcasts against full (shaped like y) along trailing axes only: right-aligned, col's dims equal
 * y's up to some axis k and are 1 from k on ([.., S, 1] against [.., S, H]; [N, C, 1, 1] against [N, C, H, W]).
 * Then y is [rows, inner] with inner = y's dims from k on, and col holds one value per row, contiguous. An
 * all-ones col (k = 0: one value for everything) is left to the other rules. */
static int trailing_col(const cc_value *full, const cc_value *col, const cc_value *y, uint64_t *rows, uint64_t *inner)
{
    if (!cc_same_shape(full, y) || y->rank < 1 || col->rank > y->rank || y->numel == 0 || col->numel >= y->numel)
        return 0;
    int k = y->rank;
    while (k > 0) {
        int xd = k - 1 - (y->rank - col->rank);
        if (xd >= 0 && col->dims[xd] != 1)
            break;
        k--;
    }
    if (k == 0)
        return 0;
    uint64_t in = 1;
    for (int d = 0; d < y->rank; d++) {
        int xd = d - (y->rank - col->rank);
        int64_t cd = xd < 0 ? 1 : col->dims[xd];
        if (d < k && cd != y->dims[d])
            return 0;
        if (d >= k)
            in *= (uint64_t)y->dims[d];
    }
    *inner = in;
    *rows = y->numel / in;
    return *rows == col->numel;
}

static int lower_binary(cc *c)
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
        tern_lib_scalar(c->k, flat2d(c, y), flat2d(c, a), op, (float)b->const_scalar);
        return 1;
    }
    /* x + bias over the last axis: the bias row broadcast on chip. */
    if (op == TERN_ALU_ADD && cc_same_shape(a, y) && y->rank > 0 && b->numel == (uint64_t)y->dims[y->rank - 1] &&
        b->rank > 0 && b->dims[b->rank - 1] == y->dims[y->rank - 1]) { /* not [1, C, 1, 1] with C == W */
        uint64_t r, cl;
        rows_cols(y, &r, &cl);
        tern_lib_bias_act(c->k, flat2d(c, y), flat2d(c, a), cc_view2d(c, b, 0, 1, cl, cl), TERN_ACT_COPY);
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
    cc_value *ba = broadcast_to(c, a, y, &ta);
    cc_value *bb = ba ? broadcast_to(c, b, y, &tb) : NULL;
    if (ba && bb)
        tern_lib_binary(c->k, flat2d(c, y), flat2d(c, ba), flat2d(c, bb), op);
    if (ba)
        release_tmp(c, &ta, ba);
    if (bb)
        release_tmp(c, &tb, bb);
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

static int lower_unary(cc *c)
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
        tern_lib_scalar(c->k, flat2d(c, y), flat2d(c, x), TERN_ALU_MULT, -1.0f);
    else if (cc_node(c)->op_id == TERN_GOP_RECIPROCAL)
        tern_lib_reciprocal(c->k, flat2d(c, y), flat2d(c, x));
    else
        tern_lib_unary(c->k, flat2d(c, y), flat2d(c, x), f, scale);
    return 1;
}

static int lower_pow(cc *c)
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
        tern_lib_unary(c->k, flat2d(c, y), flat2d(c, x), TERN_ACT_SQUARE, 1.0f);
    else if (p == 0.5)
        tern_lib_unary(c->k, flat2d(c, y), flat2d(c, x), TERN_ACT_SQRT, 1.0f);
    else if (p == 1.0)
        tern_lib_unary(c->k, flat2d(c, y), flat2d(c, x), TERN_ACT_COPY, 1.0f);
    else if (p == -1.0)
        tern_lib_unary(c->k, flat2d(c, y), flat2d(c, x), TERN_ACT_RECIPROCAL, 1.0f);
    else if (p == 3.0) {
        tern_lib_unary(c->k, flat2d(c, y), flat2d(c, x), TERN_ACT_SQUARE, 1.0f);
        tern_lib_binary(c->k, flat2d(c, y), flat2d(c, y), flat2d(c, x), TERN_ALU_MULT);
    } else
        cc_fail(c, TERN_ERR_UNSUPPORTED, "Pow with exponent %g (supported: 2, 0.5, 1, -1, 3)", p);
    return 1;
}

static int lower_cast(cc *c)
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

/* ---- views ---- */

static int lower_alias(cc *c)
{
    cc_alias(c, 0, 0);
    return 1;
}

/* Dropout is the identity at inference; training mode (a random mask) is not built. Its mask output is all true
 * at inference: exporters emit it on every block (Swin-T) though nothing reads it, so an unread mask is left
 * unplaced, and a read one (or a graph output) is filled with ones (bool is stored as uint8). */
static int lower_dropout(cc *c)
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
    return lower_alias(c);
}

static int lower_expand(cc *c)
{
    cc_value *x = cc_in(c, 0);
    cc_value *y = cc_out(c, 0, x ? x->dt : TERN_DTYPE_FP32);
    if (!x || !y)
        return 1;
    int64_t xs[CC_MAX_RANK], st[CC_MAX_RANK];
    cc_strides(x, xs);
    for (int d = 0; d < y->rank; d++) {
        int xd = d - (y->rank - x->rank);
        st[d] = (xd < 0 || x->dims[xd] == 1) ? 0 : xs[xd];
    }
    strided_copy(c, y, 0, x, 0, y->rank, y->dims, st);
    return 1;
}

static int lower_transpose(cc *c)
{
    const tern_graph_node *n = cc_node(c);
    cc_value *x = cc_in(c, 0);
    cc_value *y = cc_out(c, 0, x ? x->dt : TERN_DTYPE_FP32);
    if (!x || !y)
        return 1;
    int64_t perm[CC_MAX_RANK];
    const tern_graph_attr *pa = tern_graph_node_attr(n, "perm");
    for (int d = 0; d < x->rank; d++)
        perm[d] = pa && (size_t)d < pa->n ? pa->ints[d] : x->rank - 1 - d;
    int64_t xs[CC_MAX_RANK], st[CC_MAX_RANK];
    cc_strides(x, xs);
    for (int d = 0; d < y->rank; d++)
        st[d] = xs[perm[d]];
    /* The last two axes swapped and the rest kept: TensorE transposes, one per batch slice. */
    int last2 = x->rank >= 2 && perm[x->rank - 1] == x->rank - 2 && perm[x->rank - 2] == x->rank - 1;
    for (int d = 0; d + 2 < x->rank && last2; d++)
        last2 = perm[d] == d;
    if (last2 && tern_dtype_is_float(x->dt) && x->dims[x->rank - 1] >= 32 && x->dims[x->rank - 2] >= 32) {
        uint64_t R = (uint64_t)x->dims[x->rank - 2], C = (uint64_t)x->dims[x->rank - 1];
        uint64_t batches = x->numel / (R * C);
        for (uint64_t b = 0; b < batches && cc_ok(c); b++)
            tern_lib_transpose_exact(c->k, cc_view2d(c, y, b * R * C, C, R, R), cc_view2d(c, x, b * R * C, R, C, C));
        return 1;
    }
    /* The output's innermost dim comes from a strided source dim (e.g. [B,S,H,D] -> [B,H,D,S], attention's K):
     * one DMA would move single elements (a descriptor each). Instead, for every index of the other dims, the
     * 2-D slice [source dim p, source last dim] goes through TensorE's transpose, reading and writing rows. */
    int r = x->rank, p = (int)perm[r - 1], q = -1;
    for (int d = 0; d < r; d++)
        if (perm[d] == r - 1)
            q = d;
    if (r >= 2 && p != r - 1 && q >= 0 && tern_dtype_is_float(x->dt) && x->dims[p] >= 32 && x->dims[r - 1] >= 32) {
        int64_t ys[CC_MAX_RANK], odims[CC_MAX_RANK], idx[CC_MAX_RANK] = {0};
        cc_strides(y, ys);
        int no = 0;
        int64_t ox[CC_MAX_RANK], oy[CC_MAX_RANK]; /* strides of the other dims in x and y */
        for (int d = 0; d < r; d++) /* d: a dim of y other than q and r-1 */
            if (d != q && d != r - 1) {
                odims[no] = y->dims[d];
                oy[no] = ys[d];
                ox[no] = xs[perm[d]];
                no++;
            }
        uint64_t R = (uint64_t)x->dims[p], C = (uint64_t)x->dims[r - 1], slices = x->numel / (R * C);
        for (uint64_t sl = 0; sl < slices && cc_ok(c); sl++) {
            uint64_t xo = 0, yo = 0;
            for (int d = 0; d < no; d++) {
                xo += (uint64_t)(idx[d] * ox[d]);
                yo += (uint64_t)(idx[d] * oy[d]);
            }
            /* in: [R rows (stride xs[p]), C contiguous]; out: [C rows (stride ys[q]), R contiguous] */
            tern_lib_transpose_exact(c->k, cc_view2d(c, y, yo, C, R, (uint64_t)ys[q]),
                                     cc_view2d(c, x, xo, R, C, (uint64_t)xs[p]));
            for (int d = no - 1; d >= 0; d--) {
                if (++idx[d] < odims[d])
                    break;
                idx[d] = 0;
            }
        }
        return 1;
    }
    strided_copy(c, y, 0, x, 0, y->rank, y->dims, st);
    return 1;
}

static int lower_concat(cc *c)
{
    const tern_graph_node *n = cc_node(c);
    cc_value *y = cc_out(c, 0, cc_in(c, 0) ? cc_in(c, 0)->dt : TERN_DTYPE_FP32);
    if (!y)
        return 1;
    int64_t axis = cc_norm_axis(tern_graph_attr_int(n, "axis", 0), y->rank);
    uint64_t outer = 1, inner = 1;
    for (int d = 0; d < axis; d++)
        outer *= (uint64_t)y->dims[d];
    for (int d = (int)axis + 1; d < y->rank; d++)
        inner *= (uint64_t)y->dims[d];
    uint64_t at = 0, total = (uint64_t)y->dims[axis];
    for (int k = 0; k < n->n_inputs && cc_ok(c); k++) {
        cc_value *x = cc_in(c, k);
        if (!x)
            continue;
        uint64_t a = x->rank ? (uint64_t)x->dims[axis] : 1;
        if (x->numel) {
            /* destination rows of this input: outer x (a * inner) at column offset at*inner, row stride total*inner */
            tern_view dst = cc_view2d(c, y, at * inner, outer, a * inner, total * inner);
            tern_view src = cc_view2d(c, x, 0, outer, a * inner, a * inner);
            cc_copy(c, dst, src);
        }
        at += a;
    }
    return 1;
}

/* A Slice input element as an integer, clamped to +-2^62 so huge values (and the double's rounding of INT64_MAX)
 * convert without overflow and keep their meaning (clamped to the dimension below). */
static int64_t slice_i64(double v)
{
    const double lim = 4611686018427387904.0;
    return v != v ? 0 : v < -lim ? -(int64_t)lim : v > lim ? (int64_t)lim : (int64_t)v;
}

static int lower_slice(cc *c)
{
    cc_value *x = cc_in(c, 0);
    cc_value *y = cc_out(c, 0, x ? x->dt : TERN_DTYPE_FP32);
    if (!x || !y)
        return 1;
    cc_value *s = cc_in(c, 1), *e = cc_in(c, 2), *ax = cc_in(c, 3), *stp = cc_in(c, 4);
    if (!s || !e || !s->host || !e->host || (ax && !ax->host) || (stp && !stp->host)) {
        cc_fail(c, TERN_ERR_UNSUPPORTED, "Slice with non-constant starts/ends/axes/steps");
        return 1;
    }
    /* The inputs are checked here against the shape inference gave y, not trusted: below opset 10 inference
     * reads the starts/ends/axes attributes while this reads inputs, so a model mixing the two would otherwise
     * index dims with a wild axis or read outside x (found by fuzz/fuzz_onnx_run.c). */
    size_t n = s->host->count;
    if (y->rank != x->rank || n > (size_t)x->rank || e->host->count != n || (ax && ax->host->count != n) || (stp && stp->host->count != n)) {
        cc_fail(c, TERN_ERR_INVALID, "Slice: %zu starts, %zu ends, %zu axes, %zu steps for rank %d", n,
                e->host->count, ax ? ax->host->count : n, stp ? stp->host->count : n, x->rank);
        return 1;
    }
    int64_t start[CC_MAX_RANK] = {0}, step[CC_MAX_RANK], len[CC_MAX_RANK];
    for (int d = 0; d < x->rank; d++) {
        step[d] = 1;
        len[d] = x->dims[d];
    }
    for (size_t i = 0; i < n; i++) {
        int64_t a = ax ? slice_i64(tern_host_tensor_get(ax->host, i)) : (int64_t)i;
        a = cc_norm_axis(a, x->rank);
        int64_t st = stp ? slice_i64(tern_host_tensor_get(stp->host, i)) : 1;
        if (a < 0 || a >= x->rank || st == 0) {
            cc_fail(c, TERN_ERR_INVALID, "Slice: axis %lld (rank %d), step %lld", (long long)a, x->rank,
                    (long long)st);
            return 1;
        }
        int64_t dim = x->dims[a];
        int64_t b = slice_i64(tern_host_tensor_get(s->host, i)), en = slice_i64(tern_host_tensor_get(e->host, i));
        /* ONNX's clamping, as shape inference does it (graph_slice_len) */
        if (b < 0)
            b = b < -dim ? -1 : b + dim;
        if (en < 0)
            en = en < -dim ? -1 : en + dim;
        if (st > 0) {
            b = b < 0 ? 0 : b > dim ? dim : b;
            en = en < 0 ? 0 : en > dim ? dim : en;
            len[a] = en > b ? (en - b - 1) / st + 1 : 0;
        } else {
            b = b < 0 ? 0 : b > dim - 1 ? dim - 1 : b;
            en = en < -1 ? -1 : en > dim - 1 ? dim - 1 : en;
            len[a] = b > en ? (b - en - 1) / -st + 1 : 0;
        }
        start[a] = b;
        step[a] = st;
    }
    for (int d = 0; d < x->rank; d++)
        if (len[d] != y->dims[d]) {
            cc_fail(c, TERN_ERR_INVALID, "Slice: the inputs give axis %d %lld elements, the inferred shape %lld", d,
                    (long long)len[d], (long long)y->dims[d]);
            return 1;
        }
    int64_t xs[CC_MAX_RANK], st2[CC_MAX_RANK];
    cc_strides(x, xs);
    int64_t off = 0;
    for (int d = 0; d < x->rank; d++) {
        off += start[d] * xs[d];
        st2[d] = xs[d] * step[d];
    }
    if (y->numel)
        strided_copy(c, y, 0, x, (uint64_t)off, y->rank, y->dims, st2);
    return 1;
}

static int lower_split(cc *c)
{
    const tern_graph_node *n = cc_node(c);
    cc_value *x = cc_in(c, 0);
    if (!x)
        return 1;
    int64_t axis = cc_norm_axis(tern_graph_attr_int(n, "axis", 0), x->rank);
    uint64_t outer = 1, inner = 1;
    for (int d = 0; d < axis; d++)
        outer *= (uint64_t)x->dims[d];
    for (int d = (int)axis + 1; d < x->rank; d++)
        inner *= (uint64_t)x->dims[d];
    uint64_t at = 0, total = (uint64_t)x->dims[axis];
    for (int k = 0; k < n->n_outputs && cc_ok(c); k++) {
        cc_value *y = cc_out(c, k, x->dt);
        if (!y)
            continue;
        uint64_t a = (uint64_t)y->dims[axis];
        if (y->numel)
            cc_copy(c, cc_view2d(c, y, 0, outer, a * inner, a * inner),
                    cc_view2d(c, x, at * inner, outer, a * inner, total * inner));
        at += a;
    }
    return 1;
}

/* ---- matmul ---- */

/* out[M, N] = a[M, K] @ w where w is [K, N] (w_view, already in the matmul dtype): a is transposed on chip into
 * the matmul dtype, then the tutorial-blocked GEMM runs. */
static void matmul2d(cc *c, tern_view out, tern_view a, tern_view w, uint64_t M, uint64_t K, uint64_t N)
{
    tern_dtype mdt = c->o->matmul_dtype;
    tern_view aT = cc_temp(c, mdt, K, M);
    tern_lib_transpose(c->k, aT, a);
    tern_gemm_opts go;
    tern_gemm_opts_default(&go);
    go.acc_dtype = TERN_DTYPE_FP32;
    /* SBUF accumulators in fp32 need smaller blocks than the tutorial's bf16 ones. */
    go.tiles_in_block_m = 8;
    tern_lib_gemm(c->k, out, aT, w, &go);
    tern_kernel_release(c->k, aT);
    c->model_flops += 2.0 * (double)M * (double)N * (double)K;
}

/* Contractions up to this length use the fused linear kernel (its row tile of the transposed input stays in
 * SBUF; tern_lib_linear refuses K of about 11,000 and more on NeuronCore-v2); longer ones the HBM route. */
#define LINEAR_MAX_K CC_LINEAR_MAX_K

int cc_node_is_linear(const tern_graph *g, int i)
{
    const tern_graph_node *n = tern_graph_node_at(g, i);
    int gemm = n->op_id == TERN_GOP_GEMM; /* MatMul, Gemm, tern.MatMulBias: the registry's MATMUL flag */
    if (!(tern_op_flags((tern_op_id)n->op_id) & TERN_OPF_MATMUL))
        return 0;
    if (gemm && (tern_graph_attr_int(n, "transA", 0) || tern_graph_attr_float(n, "alpha", 1) != 1.0f ||
                 tern_graph_attr_float(n, "beta", 1) != 1.0f))
        return 0;
    if (n->n_inputs < 2 || n->inputs[0] < 0 || n->inputs[1] < 0)
        return 0;
    const tern_graph_value *a = tern_graph_value_at(g, n->inputs[0]), *b = tern_graph_value_at(g, n->inputs[1]);
    return b->constant && b->rank == 2 && a->rank >= 1 && a->dims[a->rank - 1] >= 1 &&
           a->dims[a->rank - 1] <= LINEAR_MAX_K;
}

static tern_view weight_view(cc *c, cc_value *w, uint64_t K, uint64_t N, int transposed)
{
    /* transposed: the constant is [N, K] (Gemm transB); it is stored as [K, N] in the matmul dtype */
    return cc_const2d(c, w->host, c->o->matmul_dtype, K, N, transposed);
}

static tern_act_func act_named(const char *a)
{
    if (!strcmp(a, "relu"))
        return TERN_ACT_RELU;
    if (!strcmp(a, "gelu"))
        return TERN_ACT_GELU;
    if (!strcmp(a, "gelu_tanh"))
        return TERN_ACT_GELU_TANH;
    return TERN_ACT_COPY;
}

static int lower_matmul(cc *c)
{
    const tern_graph_node *n = cc_node(c);
    int is_gemm = n->op_id == TERN_GOP_GEMM, fused = n->op_id == TERN_GOP_MATMUL_BIAS;
    cc_value *a = cc_in(c, 0), *b = cc_in(c, 1), *bias = (is_gemm || fused) ? cc_in(c, 2) : NULL;
    cc_value *y = cc_out(c, 0, cc_float_out_dtype(c, 0));
    if (!a || !b || !y)
        return 1;
    int transB = is_gemm ? (int)tern_graph_attr_int(n, "transB", 0) : 0;
    if (is_gemm && (tern_graph_attr_int(n, "transA", 0) || tern_graph_attr_float(n, "alpha", 1) != 1.0f ||
                    tern_graph_attr_float(n, "beta", 1) != 1.0f)) {
        cc_fail(c, TERN_ERR_UNSUPPORTED, "Gemm with transA, alpha or beta other than the defaults");
        return 1;
    }
    if (a->rank < 1 || b->rank < 1) {
        cc_fail(c, TERN_ERR_UNSUPPORTED, "MatMul of a scalar");
        return 1;
    }
    uint64_t K = (uint64_t)a->dims[a->rank - 1];
    uint64_t M = a->rank >= 2 ? a->numel / K : 1;
    tern_act_func act = fused ? act_named(tern_graph_attr_string(n, "activation", "none")) : TERN_ACT_COPY;
    if (b->host && b->rank == 2) {
        uint64_t N = (uint64_t)b->dims[transB ? 0 : 1];
        tern_view w = weight_view(c, b, K, N, transB);
        /* One fused kernel: transpose, matmul, bias and activation on chip, straight into y. */
        tern_view bv = tern_view_none();
        cc_value bias_tmp;
        memset(&bias_tmp, 0, sizeof bias_tmp);
        bias_tmp.flat = tern_view_none();
        if (bias && bias->numel == N) {
            bv = cc_view2d(c, bias, 0, 1, N, N);
        } else if (bias && bias->numel == 1) {
            bias_tmp.dt = TERN_DTYPE_FP32;
            bias_tmp.flat = cc_temp(c, TERN_DTYPE_FP32, 1, N);
            strided_copy(c, &bias_tmp, 0, bias, 0, 1, (int64_t[]){(int64_t)N}, (int64_t[]){0});
            bv = cc_view2d(c, &bias_tmp, 0, 1, N, N);
        } else if (bias) {
            cc_fail(c, TERN_ERR_UNSUPPORTED, "bias of %llu elements for %llu outputs",
                    (unsigned long long)bias->numel, (unsigned long long)N);
            return 1;
        }
        tern_view yv = cc_view2d(c, y, 0, M, N, N), av = cc_view2d(c, a, 0, M, K, K);
        cc_value *res = fused && n->n_inputs > 3 ? cc_in(c, 3) : NULL; /* the fused residual Add */
        if (res && res->numel != M * N) {
            cc_fail(c, TERN_ERR_INVALID, "residual of %llu elements for a %llu x %llu output",
                    (unsigned long long)res->numel, (unsigned long long)M, (unsigned long long)N);
            return 1;
        }
        tern_view rv = res ? cc_view2d(c, res, 0, M, N, N) : tern_view_none();
        /* the fused layer norm (passes.c): gamma, beta as [1, N] views */
        int ln = fused && tern_graph_attr_int(n, "layernorm", 0);
        cc_value *lg = ln ? cc_in(c, 4) : NULL, *lb = ln && n->n_inputs > 5 ? cc_in(c, 5) : NULL;
        if (ln && (!lg || lg->numel != N || (lb && lb->numel != N))) {
            cc_fail(c, TERN_ERR_INVALID, "fused layer norm: scale/bias of %llu/%llu elements for %llu outputs",
                    lg ? (unsigned long long)lg->numel : 0ULL, lb ? (unsigned long long)lb->numel : 0ULL,
                    (unsigned long long)N);
            return 1;
        }
        tern_view gv = lg ? cc_view2d(c, lg, 0, 1, N, N) : tern_view_none();
        tern_view btv = lb ? cc_view2d(c, lb, 0, 1, N, N) : tern_view_none();
        float eps = tern_graph_attr_float(n, "epsilon", 1e-5f);
        /* after a kernel that stores its output from ScalarE's queue (the fused attention, a layer norm), SyncE is
         * free while that kernel computes: the first weights then stream meanwhile (the rows wait for the store
         * anyway) */
        tern_linear_ext lx = {rv, gv, btv, eps, a->stored_off_sync, tern_view_none()};
        /* pre-LN fusion: output 0 is the layer's, output 1 the norm's */
        cc_value *z = ln && n->n_outputs > 1 ? cc_out(c, 1, cc_float_out_dtype(c, 1)) : NULL;
        if (ln && n->n_outputs > 1 && !z)
            return 1;
        tern_view outv = z ? cc_view2d(c, z, 0, M, N, N) : yv; /* what the fused kernel writes */
        if (z)
            lx.pre_out = yv;
        if (!ln)
            lx.gamma = lx.beta = tern_view_none();
        /* the layer (with its layer norm when the fused kernel takes it, else the norm separately after) */
        if (K <= LINEAR_MAX_K && tern_lib_linear_ext(c->k, outv, av, w, bv, act, &lx)) {
            y->stored_off_sync = ln; /* the fused norm stores (both outputs) from ScalarE */
            if (z)
                z->stored_off_sync = 1;
        } else {
            /* dst: the layer's output before a layer norm the fused kernel could not take (y itself when it is
             * an output of its own) */
            tern_view dst = ln && !z ? cc_temp(c, TERN_DTYPE_FP32, M, N) : yv;
            lx.gamma = lx.beta = lx.pre_out = tern_view_none();
            if (K <= LINEAR_MAX_K) {
                tern_lib_linear_ext(c->k, dst, av, w, bv, act, &lx);
            } else {
                /* A row tile of the fused kernel would not fit in SBUF: transpose + GEMM through HBM, then the
                 * bias and activation pass. */
                int post = bv.region >= 0 || act != TERN_ACT_COPY;
                tern_view pre = post ? cc_temp(c, TERN_DTYPE_FP32, M, N) : dst;
                matmul2d(c, pre, av, w, M, K, N);
                c->model_flops -= 2.0 * (double)M * (double)N * (double)K; /* counted once below */
                if (bv.region >= 0)
                    tern_lib_bias_act(c->k, dst, pre, bv, act);
                else if (post)
                    tern_lib_unary(c->k, dst, pre, act, 1.0f);
                if (post)
                    tern_kernel_release(c->k, pre);
                if (res)
                    tern_lib_binary(c->k, dst, dst, rv, TERN_ALU_ADD);
            }
            if (ln) {
                tern_lib_layernorm(c->k, outv, dst, gv, btv, eps);
                if (!z)
                    tern_kernel_release(c->k, dst);
                (z ? z : y)->stored_off_sync = 1;
            }
        }
        if (bias_tmp.flat.region >= 0)
            tern_kernel_release(c->k, bias_tmp.flat);
        c->model_flops += 2.0 * (double)M * (double)N * (double)K;
        return 1;
    }
    /* Both operands activations (attention): batched, numpy broadcasting of the batch dims of b. */
    if (a->rank < 2 || b->rank < 2 || bias) {
        cc_fail(c, TERN_ERR_UNSUPPORTED, "MatMul of ranks %d and %d with non-constant weights", a->rank, b->rank);
        return 1;
    }
    uint64_t Ma = (uint64_t)a->dims[a->rank - 2], N = (uint64_t)b->dims[b->rank - 1];
    uint64_t batches = y->numel / (Ma * N);
    int yb = y->rank - 2; /* output batch dims; each operand's batch dims align to their right (numpy) */
    for (uint64_t i = 0; i < batches && cc_ok(c); i++) {
        /* the operands' batch indices for output batch i: a size-1 batch dim of an operand broadcasts */
        uint64_t ai = 0, bi = 0, rest = i, astride = 1, bstride = 1;
        for (int d = yb - 1; d >= 0; d--) {
            uint64_t yd = (uint64_t)y->dims[d], id = rest % yd;
            rest /= yd;
            int da = d - (yb - (a->rank - 2)), db = d - (yb - (b->rank - 2));
            if (da >= 0) {
                uint64_t ad = (uint64_t)a->dims[da];
                ai += (ad == 1 ? 0 : id) * astride;
                astride *= ad;
            }
            if (db >= 0) {
                uint64_t bd = (uint64_t)b->dims[db];
                bi += (bd == 1 ? 0 : id) * bstride;
                bstride *= bd;
            }
        }
        tern_view w = cc_temp(c, c->o->matmul_dtype, K, N);
        cc_copy(c, w, cc_view2d(c, b, bi * K * N, K, N, N)); /* cast the moving operand on the way */
        matmul2d(c, cc_view2d(c, y, i * Ma * N, Ma, N, N), cc_view2d(c, a, ai * Ma * K, Ma, K, K), w, Ma, K, N);
        tern_kernel_release(c->k, w);
    }
    return 1;
}

/* ---- normalisation ---- */

static int lower_softmax(cc *c)
{
    const tern_graph_node *n = cc_node(c);
    cc_value *x = cc_in(c, 0);
    cc_value *y = cc_out(c, 0, TERN_DTYPE_FP32);
    if (!x || !y)
        return 1;
    int64_t axis = cc_norm_axis(tern_graph_attr_int(n, "axis", -1), x->rank);
    if (axis != x->rank - 1) {
        cc_fail(c, TERN_ERR_UNSUPPORTED, "Softmax over axis %lld (only the last axis)", (long long)axis);
        return 1;
    }
    tern_lib_softmax(c->k, flat2d(c, y), flat2d(c, x));
    return 1;
}

static int lower_layernorm(cc *c)
{
    const tern_graph_node *n = cc_node(c);
    cc_value *x = cc_in(c, 0), *g = cc_in(c, 1), *b = cc_in(c, 2);
    cc_value *y = cc_out(c, 0, cc_float_out_dtype(c, 0));
    if (!x || !y)
        return 1;
    int64_t axis = cc_norm_axis(tern_graph_attr_int(n, "axis", -1), x->rank);
    if (axis != x->rank - 1) {
        cc_fail(c, TERN_ERR_UNSUPPORTED, "LayerNormalization over axis %lld (only the last axis)", (long long)axis);
        return 1;
    }
    uint64_t r, cl;
    rows_cols(x, &r, &cl);
    tern_view gv = g ? cc_view2d(c, g, 0, 1, cl, cl) : tern_view_none();
    tern_view bv = b ? cc_view2d(c, b, 0, 1, cl, cl) : tern_view_none();
    tern_lib_layernorm(c->k, flat2d(c, y), flat2d(c, x), gv, bv, tern_graph_attr_float(n, "epsilon", 1e-5f));
    y->stored_off_sync = 1; /* tern_lib_layernorm stores from ScalarE's queue */
    return 1;
}

/* ---- gather ---- */

static int lower_gather(cc *c)
{
    const tern_graph_node *n = cc_node(c);
    cc_value *data = cc_in(c, 0), *idx = cc_in(c, 1);
    cc_value *y = cc_out(c, 0, data ? data->dt : TERN_DTYPE_FP32);
    if (!data || !idx || !y)
        return 1;
    int64_t axis = cc_norm_axis(tern_graph_attr_int(n, "axis", 0), data->rank);
    uint64_t rows = (uint64_t)data->dims[axis], inner = 1, outer = 1;
    for (int d = (int)axis + 1; d < data->rank; d++)
        inner *= (uint64_t)data->dims[d];
    for (int d = 0; d < axis; d++)
        outer *= (uint64_t)data->dims[d];
    if (idx->host) { /* constant indices: one copy per index */
        for (size_t i = 0; i < idx->host->count && cc_ok(c); i++) {
            int64_t r = (int64_t)tern_host_tensor_get(idx->host, i);
            if (r < 0)
                r += (int64_t)rows;
            if (r < 0 || (uint64_t)r >= rows) {
                cc_fail(c, TERN_ERR_RANGE, "index %lld outside axis %lld of size %llu", (long long)r, (long long)axis,
                        (unsigned long long)rows);
                return 1;
            }
            cc_copy(c, cc_view2d(c, y, i * inner, outer, inner, idx->host->count * inner),
                    cc_view2d(c, data, (uint64_t)r * inner, outer, inner, rows * inner));
        }
        return 1;
    }
    if (axis != 0 || !data->host) {
        cc_fail(c, TERN_ERR_UNSUPPORTED, "Gather of run-time indices along axis %lld of a non-constant tensor",
                (long long)axis);
        return 1;
    }
    tern_view table = cc_view2d(c, data, 0, rows, inner, inner);
    tern_lib_embedding(c->k, cc_view2d(c, y, 0, idx->numel, inner, inner), table,
                       cc_view2d(c, idx, 0, idx->numel, 1, 1));
    return 1;
}

/* ---- reductions over the last axis ---- */

static int lower_reduce(cc *c)
{
    const tern_graph_node *n = cc_node(c);
    cc_value *x = cc_in(c, 0);
    cc_value *y = cc_out(c, 0, TERN_DTYPE_FP32);
    if (!x || !y)
        return 1;
    /* axes: attribute (older opsets) or second input */
    int64_t axes[CC_MAX_RANK];
    size_t na = 0;
    const tern_graph_attr *aa = tern_graph_node_attr(n, "axes");
    cc_value *ai = cc_in(c, 1);
    if (aa)
        for (size_t i = 0; i < aa->n && na < CC_MAX_RANK; i++)
            axes[na++] = cc_norm_axis(aa->ints[i], x->rank);
    else if (ai && ai->host)
        for (size_t i = 0; i < ai->host->count && na < CC_MAX_RANK; i++)
            axes[na++] = cc_norm_axis((int64_t)tern_host_tensor_get(ai->host, i), x->rank);
    if (na != 1 || axes[0] != x->rank - 1) {
        cc_fail(c, TERN_ERR_UNSUPPORTED, "%s over axes other than the last one alone", n->op);
        return 1;
    }
    tern_alu_op op = n->op_id == TERN_GOP_REDUCE_MAX ? TERN_ALU_MAX : TERN_ALU_ADD;
    uint64_t rows, cols;
    rows_cols(x, &rows, &cols);
    float scale = n->op_id == TERN_GOP_REDUCE_MEAN ? 1.0f / (float)cols : 1.0f;
    const uint64_t P = c->cfg.partitions; /* rows per tile: the machine's */
    for (uint64_t r0 = 0; r0 < rows && cc_ok(c); r0 += P) {
        uint32_t p = (uint32_t)(rows - r0 < P ? rows - r0 : P);
        if (cols > 40000) {
            cc_fail(c, TERN_ERR_UNSUPPORTED, "%s over %llu elements per row", n->op, (unsigned long long)cols);
            return 1;
        }
        tern_view t = tern_kernel_sbuf(c->k, TERN_DTYPE_FP32, p, (uint32_t)cols, "reduce_in");
        tern_view o = tern_kernel_sbuf(c->k, TERN_DTYPE_FP32, p, 1, "reduce_out");
        tern_kernel_load(c->k, t, cc_view2d(c, x, r0 * cols, p, cols, cols));
        tern_kernel_tensor_reduce(c->k, o, t, op, 1, 0);
        if (scale != 1.0f)
            tern_kernel_tensor_scalar(c->k, TERN_ENGINE_AUTO, o, o, TERN_ALU_MULT, scale, TERN_ALU_BYPASS, 0.0f);
        tern_kernel_store(c->k, cc_view2d(c, y, r0, p, 1, 1), o);
        tern_kernel_release(c->k, t);
        tern_kernel_release(c->k, o);
    }
    return 1;
}

/* ---- where ---- */

static int lower_where(cc *c)
{
    cc_value *cond = cc_in(c, 0), *a = cc_in(c, 1), *b = cc_in(c, 2);
    cc_value *y = cc_out(c, 0, TERN_DTYPE_FP32);
    if (!cond || !a || !b || !y)
        return 1;
    cc_value tc, ta, tb;
    cc_value *bc = broadcast_to(c, cond, y, &tc);
    cc_value *ba = bc ? broadcast_to(c, a, y, &ta) : NULL;
    cc_value *bb = ba ? broadcast_to(c, b, y, &tb) : NULL;
    if (bc && ba && bb) {
        uint64_t rows, cols;
        rows_cols(y, &rows, &cols);
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
        release_tmp(c, &tc, bc);
    if (ba)
        release_tmp(c, &ta, ba);
    if (bb)
        release_tmp(c, &tb, bb);
    return 1;
}

/* ---- the rules ---- */

/* A Reduce node over the last axis alone (its axes decoded as inference reads them, graph_reduce_axes_decode). */
static int reduces_last_axis_only(cc *c, const cc_value *x)
{
    int given = cc_in_id(c, 1) >= 0;
    cc_value *ai = given ? cc_in(c, 1) : NULL;
    graph_axes_args ax;
    char why[160];
    if (graph_reduce_axes_decode(cc_node(c), tern_graph_opset(c->g), given, ai ? ai->host : NULL, &ax, why,
                                 sizeof why) || !ax.known)
        return 0; /* the general rule reports it */
    return ax.n == 1 && cc_norm_axis(ax.axes[0], x->rank) == x->rank - 1; /* no axes: all of them */
}

/* The conditions under which this file's rules are faster than the general ones of the family files (last-axis
 * reductions and norms, constant weights and indices). Each says why when it declines; a node without input 0
 * is taken so that the rule reports it. */
static int softmax_row_applies(cc *c, char *why, size_t len)
{
    const tern_graph_node *n = cc_node(c);
    cc_value *x = cc_in(c, 0);
    if (!x)
        return 1;
    /* before opset 13 the default axis is 1 (and the input is flattened there) */
    if (cc_norm_axis(tern_graph_attr_int(n, "axis", tern_graph_opset(c->g) >= 13 ? -1 : 1), x->rank) != x->rank - 1) {
        snprintf(why, len, "the axis is not the last one");
        return 0;
    }
    /* a row longer than tern_lib_softmax holds on one partition: chunked rule */
    if (!(x->rank > 0 && (uint64_t)x->dims[x->rank - 1] * 4 + 32 <= c->cfg.sbuf_partition_bytes)) {
        snprintf(why, len, "a row of %lld elements does not fit one SBUF partition",
                 x->rank > 0 ? (long long)x->dims[x->rank - 1] : 0LL);
        return 0;
    }
    return 1;
}

static int layernorm_row_applies(cc *c, char *why, size_t len)
{
    cc_value *x = cc_in(c, 0);
    if (!x)
        return 1;
    if (cc_norm_axis(tern_graph_attr_int(cc_node(c), "axis", -1), x->rank) != x->rank - 1) {
        snprintf(why, len, "the axis is not the last one");
        return 0;
    }
    if (cc_out_id(c, 1) >= 0 || cc_out_id(c, 2) >= 0) {
        snprintf(why, len, "the mean or inverse standard deviation output is used");
        return 0;
    }
    return 1;
}

static int gemm_plain_applies(cc *c, char *why, size_t len)
{
    const tern_graph_node *n = cc_node(c);
    cc_value *x = cc_in(c, 0), *b = cc_in(c, 1);
    if (!x)
        return 1;
    if (tern_graph_attr_int(n, "transA", 0) || tern_graph_attr_float(n, "alpha", 1) != 1.0f ||
        tern_graph_attr_float(n, "beta", 1) != 1.0f) {
        snprintf(why, len, "transA, alpha or beta is not the default");
        return 0;
    }
    if (!(b && b->host && b->rank == 2)) {
        snprintf(why, len, "B is not a constant 2-D weight");
        return 0;
    }
    return 1;
}

static int reduce_last_applies(cc *c, char *why, size_t len)
{
    cc_value *x = cc_in(c, 0);
    if (!x)
        return 1;
    if (!reduces_last_axis_only(c, x)) {
        snprintf(why, len, "it does not reduce the last axis alone");
        return 0;
    }
    if (!(x->rank > 0 && x->dims[x->rank - 1] <= 40000)) {
        snprintf(why, len, "the last axis is longer than 40000");
        return 0;
    }
    return 1;
}

static int gather_const_applies(cc *c, char *why, size_t len)
{
    cc_value *x = cc_in(c, 0), *b = cc_in(c, 1);
    if (!x)
        return 1;
    if (!(b && (b->host || (x->host && cc_norm_axis(tern_graph_attr_int(cc_node(c), "axis", 0), x->rank) == 0)))) {
        snprintf(why, len, "the indices are computed and the data is not a constant gathered on axis 0");
        return 0;
    }
    return 1;
}

static int pow_const_applies(cc *c, char *why, size_t len)
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

static int two_inputs_applies(cc *c, char *why, size_t len)
{
    if (!cc_in(c, 0))
        return 1;
    if (cc_node(c)->n_inputs != 2) {
        snprintf(why, len, "%d inputs, not 2", cc_node(c)->n_inputs);
        return 0;
    }
    return 1;
}

static int cast_plain_applies(cc *c, char *why, size_t len)
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

static int float_div_applies(cc *c, char *why, size_t len)
{
    if (!cc_in(c, 0))
        return 1;
    if (!tern_dtype_is_float(cc_out_dtype(c, 0))) {
        snprintf(why, len, "an integer division");
        return 0;
    }
    return 1;
}

#define R(OP, NAME, APPLIES, FN) {TERN_GOP_##OP, NAME, APPLIES, FN}
static const cc_rule core_rules[] = {
    /* binary ALU ops on VectorE, broadcasting materialised by DMA */
    R(ADD, "binary.alu", NULL, lower_binary), R(SUB, "binary.alu", NULL, lower_binary),
    R(MUL, "binary.alu", NULL, lower_binary), R(DIV, "binary.alu", float_div_applies, lower_binary),
    R(MAX, "binary.alu", two_inputs_applies, lower_binary), R(MIN, "binary.alu", two_inputs_applies, lower_binary),
    R(EQUAL, "binary.alu", NULL, lower_binary), R(LESS, "binary.alu", NULL, lower_binary),
    R(GREATER, "binary.alu", NULL, lower_binary), R(LESS_OR_EQUAL, "binary.alu", NULL, lower_binary),
    R(GREATER_OR_EQUAL, "binary.alu", NULL, lower_binary), R(AND, "binary.alu", NULL, lower_binary),
    R(OR, "binary.alu", NULL, lower_binary), R(XOR, "binary.alu", NULL, lower_binary),
    /* unary ops as one ScalarE activation */
    R(RELU, "unary.act", NULL, lower_unary), R(TANH, "unary.act", NULL, lower_unary),
    R(SIGMOID, "unary.act", NULL, lower_unary), R(EXP, "unary.act", NULL, lower_unary),
    R(LOG, "unary.act", NULL, lower_unary), R(SQRT, "unary.act", NULL, lower_unary),
    R(ERF, "unary.act", NULL, lower_unary), R(ABS, "unary.act", NULL, lower_unary),
    R(RECIPROCAL, "unary.act", NULL, lower_unary), R(SOFTPLUS, "unary.act", NULL, lower_unary),
    R(SIN, "unary.act", NULL, lower_unary), R(SIGN, "unary.act", NULL, lower_unary),
    R(NEG, "unary.act", NULL, lower_unary), R(GELU, "unary.act", NULL, lower_unary),
    R(POW, "pow.const", pow_const_applies, lower_pow), R(CAST, "cast.convert", cast_plain_applies, lower_cast),
    R(DROPOUT, "dropout", NULL, lower_dropout), R(WHERE, "where", NULL, lower_where),
    /* views: the output aliases the input's storage */
    R(IDENTITY, "view.alias", NULL, lower_alias), R(RESHAPE, "view.alias", NULL, lower_alias),
    R(FLATTEN, "view.alias", NULL, lower_alias), R(SQUEEZE, "view.alias", NULL, lower_alias),
    R(UNSQUEEZE, "view.alias", NULL, lower_alias),
    /* data movement by DMA */
    R(TRANSPOSE, "transpose.copy", NULL, lower_transpose), R(CONCAT, "concat.copy", NULL, lower_concat),
    R(SLICE, "slice.copy", NULL, lower_slice), R(SPLIT, "split.copy", NULL, lower_split),
    R(EXPAND, "expand.copy", NULL, lower_expand),
    R(GATHER, "gather.const", gather_const_applies, lower_gather),
    /* linear layers and last-axis row ops */
    R(MATMUL, "matmul.linear", NULL, lower_matmul), R(MATMUL_BIAS, "matmul.linear", NULL, lower_matmul),
    R(GEMM, "matmul.linear", gemm_plain_applies, lower_matmul),
    R(SOFTMAX, "softmax.row", softmax_row_applies, lower_softmax),
    R(LAYER_NORMALIZATION, "layernorm.row", layernorm_row_applies, lower_layernorm),
    R(REDUCE_MEAN, "reduce.last", reduce_last_applies, lower_reduce),
    R(REDUCE_SUM, "reduce.last", reduce_last_applies, lower_reduce),
    R(REDUCE_MAX, "reduce.last", reduce_last_applies, lower_reduce),
};
#undef R
const cc_rule_set cc_rules_core = CC_RULE_SET("lower.c", core_rules);
