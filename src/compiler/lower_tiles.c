/* Tile helpers shared by the family lowering files (lower_elementwise.c, lower_reduce.c, lower_axis.c,
 * lower_linear.c, lower_norm.c, lower_index.c, lower_layout.c): scratch values shaped like a tensor, strided
 * copies of up to CC_MAX_RANK dims in one or a few DMAs, numpy broadcasting materialised by zero-stride copies,
 * moving axes innermost and back, [p, w] SBUF tiles and their VectorE / ScalarE one-liners, and the elementwise
 * driver (tile_ew_apply) that runs a tile program over the flattened tensors in blocks of 128 x CHUNK.
 *
 * How the general lowerings work: an op over an axis (reductions, arg-reductions, softmaxes, scans) first moves
 * that axis (or those axes) innermost with one strided DMA into a scratch tensor, works on [rows, cols] tiles of
 * 128 partitions, and moves the result back; elementwise ops materialise broadcasts with zero-stride DMAs and work
 * on fp32 tiles of the flattened tensor. Scalar operands that ONNX passes as inputs (Clip's min and max, Pad's
 * pads, CumSum's axis, TopK's k...) must be compile-time constants, as every shape-like input must. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "compiler/lower_tiles.h"
#include "graph/graph_internal.h"
#include "graph/op_params.h"

/* ---- shapes ---- */

/* A scratch tensor shaped like (rank, dims), not bound to a graph value; release with tile_tmp_free. */
cc_value *tile_tmp_value(compile_ctx *c, cc_value *t, tern_dtype dt, int rank, const int64_t *dims)
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

void tile_tmp_free(compile_ctx *c, cc_value *t)
{
    if (t && t->placed && t->flat.region >= 0)
        tern_kernel_release(c->k, t->flat);
    if (t)
        t->placed = 0;
}

/* ---- strided copies ---- */

/* One element of src repeated over n contiguous elements of dst (a scalar broadcast, e.g. a per-step scalar of the
 * optimizer times a weight-sized tensor). As one HBM-to-HBM DMA its zero-step source makes every element a
 * descriptor: 8.5 ns each, ~7 GB/s, 21 ms for GPT-2's 38.6M-element embedding. Instead the element is broadcast
 * once into a [128, W] SBUF tile and the tile stored over dst in contiguous [128, W] blocks (4 KiB rows: the DMA
 * curve's flat part), the tail as the remaining full rows and one short row. A copy either way: the same bits. */
#define TILE_FILL_W 1024u
#define TILE_FILL_ELEMS ((int64_t)128 * TILE_FILL_W)
static void tile_fill_copy(compile_ctx *c, cc_value *dst, int64_t dst_off, cc_value *src, int64_t src_off, int64_t n)
{
    if (dst_off < 0 || src_off < 0) {
        cc_fail(c, TERN_ERR_RANGE, "a copy starts before its tensor");
        return;
    }
    tern_view t = tern_kernel_sbuf(c->k, src->dt, 128, TILE_FILL_W, "fill");
    uint32_t w = TILE_FILL_W;
    int32_t zero = 0, one = 1;
    cc_copy(c, t, cc_view(c, src, (uint64_t)src_off, 128, 0, 1, &w, &zero));
    int64_t i = 0;
    for (; i + TILE_FILL_ELEMS <= n && cc_ok(c); i += TILE_FILL_ELEMS)
        cc_copy(c, cc_view(c, dst, (uint64_t)(dst_off + i), 128, TILE_FILL_W, 1, &w, &one), t);
    uint32_t rows = (uint32_t)((n - i) / TILE_FILL_W), rest = (uint32_t)((n - i) % TILE_FILL_W);
    if (rows && cc_ok(c)) {
        cc_copy(c, cc_view(c, dst, (uint64_t)(dst_off + i), rows, TILE_FILL_W, 1, &w, &one),
                tern_view_slice(c->k, t, 0, 0, rows, 1));
        i += (int64_t)rows * TILE_FILL_W;
    }
    if (rest && cc_ok(c))
        cc_copy(c, cc_view(c, dst, (uint64_t)(dst_off + i), 1, 0, 1, &rest, &one),
                tern_view_block(c->k, t, 0, 1, 0, rest));
    tern_kernel_release(c->k, t);
}

/* Each of R source elements (element off + r * rstep) repeated over W contiguous elements of dst (from dst_off, rows
 * W apart): the broadcast of a [..., 1] tensor over a last axis (a norm's statistics, the gradient of a
 * ReduceSum). As one DMA its zero-step innermost dim makes every element a descriptor (8.5 ns each: 1.1 ms for a
 * [2048, 1024] fp32 broadcast); here 128 rows at a time land in a [p, 1] tile, VectorE copies it over a [p, W]
 * tile through a zero-step read, and the tile is stored with one descriptor per row. Same dtype: the bits are
 * copied, not converted. */
#define TILE_ROWB_W 4096u
static void tile_row_bcast_copy(compile_ctx *c, cc_value *dst, uint64_t dst_off, cc_value *src, uint64_t off,
                                int64_t rstep, uint64_t R, uint64_t W)
{
    uint32_t one = 1;
    int32_t unit = 1;
    for (uint64_t g = 0; g < R && cc_ok(c); g += PARTS) {
        uint32_t p = (uint32_t)(R - g < PARTS ? R - g : PARTS);
        tern_view e = tern_kernel_sbuf(c->k, src->dt, p, 1, "rowb_in");
        tern_kernel_load(c->k, e, cc_view(c, src, (uint64_t)((int64_t)off + (int64_t)g * rstep), p, rstep, 1, &one,
                                          &unit));
        for (uint64_t w0 = 0; w0 < W && cc_ok(c); w0 += TILE_ROWB_W) {
            uint32_t wc = (uint32_t)(W - w0 < TILE_ROWB_W ? W - w0 : TILE_ROWB_W);
            tern_view t = tern_kernel_sbuf(c->k, src->dt, p, wc, "rowb");
            tern_view eb = e;
            eb.ap.dims[0].step = 0;
            eb.ap.dims[0].num = wc;
            tern_kernel_tensor_copy(c->k, VE, t, eb);
            tern_kernel_store(c->k, cc_view(c, dst, dst_off + g * W + w0, p, (int64_t)W, 1, &wc, &unit), t);
            tern_kernel_release(c->k, t);
        }
        tern_kernel_release(c->k, e);
    }
}

/* dst[i] = src[i] over an n-d index space: dst at element dst_off with strides dst_st, src at src_off with src_st
 * (zero strides broadcast, negative strides reverse). Dims that are contiguous with each other in both are
 * merged; what still exceeds the DMA pattern (a partition dim and four free dims) is split into several DMAs
 * along the outermost dims. */
void tile_copy_nd(compile_ctx *c, cc_value *dst, int64_t dst_off, const int64_t *dst_st, cc_value *src, int64_t src_off,
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
    if (n == 1 && ss[0] == 0 && ds[0] == 1 && dst->dt == src->dt && od[0] >= 4 * TILE_FILL_ELEMS) {
        tile_fill_copy(c, dst, dst_off, src, src_off, od[0]);
        return;
    }
    if (n > 5 || (n == 5 && od[0] > 65535)) { /* split the outermost dim */
        for (int64_t i = 0; i < od[0] && cc_ok(c); i++)
            tile_copy_nd(c, dst, dst_off + i * ds[0], ds + 1, src, src_off + i * ss[0], ss + 1, n - 1, od + 1);
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
void tile_gather_copy(compile_ctx *c, cc_value *dst, cc_value *src, int64_t src_off, int rank, const int64_t *dims,
                      const int64_t *st)
{
    int64_t dst_st[CC_MAX_RANK + 2], s = 1;
    for (int d = rank - 1; d >= 0; d--) {
        dst_st[d] = s;
        s *= dims[d];
    }
    tile_copy_nd(c, dst, 0, dst_st, src, src_off, st, rank, dims);
}

/* x broadcast (numpy rules) to y's shape: x itself when the shapes match, else a scratch copy in tmp. */
cc_value *tile_bcast(compile_ctx *c, cc_value *x, const cc_value *y, cc_value *tmp)
{
    if (cc_same_shape(x, y))
        return x;
    int64_t xs[CC_MAX_RANK], st[CC_MAX_RANK];
    cc_strides(x, xs);
    for (int d = 0; d < y->rank; d++) {
        int xd = d - (y->rank - x->rank);
        st[d] = (xd < 0 || x->dims[xd] == 1) ? 0 : xs[xd];
    }
    if (!tile_tmp_value(c, tmp, x->dt, y->rank, y->dims))
        return NULL;
    tile_gather_copy(c, tmp, x, 0, y->rank, y->dims, st);
    return tmp;
}

void tile_bcast_free(compile_ctx *c, cc_value *tmp, cc_value *used)
{
    if (used == tmp)
        tile_tmp_free(c, tmp);
}

/* Moves the axes marked in red[] innermost (kept axes first, each group in order): x itself when that is already
 * the layout, else a scratch copy in tmp. rows = product of kept dims, cols = product of moved dims. */
cc_value *tile_axes_last(compile_ctx *c, cc_value *x, const int *red, cc_value *tmp, uint64_t *rows, uint64_t *cols)
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
    if (!tile_tmp_value(c, tmp, x->dt, x->rank, dims))
        return NULL;
    tile_gather_copy(c, tmp, x, 0, x->rank, dims, st);
    return tmp;
}

/* The inverse of tile_axes_last for a single axis: y (x's shape) from t laid out as [other dims..., axis]. */
void tile_axis_back(compile_ctx *c, cc_value *y, cc_value *t, int axis)
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
    tile_gather_copy(c, y, t, 0, y->rank, y->dims, st);
}

/* ---- tiles ---- */

tern_view tile_new(compile_ctx *c, uint32_t p, uint32_t w, const char *name)
{
    return tern_kernel_sbuf(c->k, TERN_DTYPE_FP32, p, w ? w : 1, name);
}

void tile_ts(compile_ctx *c, tern_view d, tern_view a, tern_alu_op op0, float s0, tern_alu_op op1, float s1)
{
    tern_kernel_tensor_scalar(c->k, VE, d, a, op0, s0, op1, s1);
}

void tile_ts_ap(compile_ctx *c, tern_view d, tern_view a, tern_alu_op op0, tern_view s0, tern_alu_op op1, tern_view s1)
{
    tern_kernel_tensor_scalar_ap(c->k, VE, d, a, op0, s0, 0.0f, op1, s1, 0.0f, 0);
}

void tile_tt(compile_ctx *c, tern_view d, tern_view a, tern_view b, tern_alu_op op)
{
    tern_kernel_tensor_tensor(c->k, VE, d, a, b, op);
}

void tile_act(compile_ctx *c, tern_view d, tern_view a, tern_act_func f, float scale)
{
    tern_kernel_activation(c->k, d, a, f, scale, tern_view_none(), tern_view_none(), tern_view_none());
}

/* ---- elementwise: fp32 tiles of the flattened tensors ---- */

/* y = f(xs...) elementwise; every xs[i] has y's element count (broadcast beforehand). int_tiles: integer tiles
 * (int32) instead of fp32, for the bitwise ops. */
void tile_ew_apply(compile_ctx *c, cc_value *const *xs, int nx, cc_value *y, ew_fn fn, const ew_ctx *ctx, int int_tiles)
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

/* ---- the helpers of the fast special cases: rows x cols views, one-DMA strided copies and
 * broadcasts into scratch tensors ---- */

void tile_rows_cols(const cc_value *x, uint64_t *rows, uint64_t *cols)
{
    *cols = x->rank > 0 ? (uint64_t)x->dims[x->rank - 1] : 1;
    if (*cols == 0)
        *cols = 1;
    *rows = x->numel / *cols;
}

tern_view tile_flat2d(compile_ctx *c, cc_value *x)
{
    uint64_t r, cl;
    tile_rows_cols(x, &r, &cl);
    return cc_view2d(c, x, 0, r, cl, cl);
}

/* Copy src (viewed with `rank` dims `dims` and element strides `st`, starting at element `off`) into the
 * contiguous tensor dst: one DMA whose source pattern has at most a partition dim and four free dims after
 * merging dims that are contiguous with each other. Zero strides broadcast. */
void tile_strided_copy(compile_ctx *c, cc_value *dst, uint64_t dst_off, cc_value *src, uint64_t off, int rank,
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
    if (n == 1 && os[0] == 0 && dst->dt == src->dt && total >= 4 * (uint64_t)TILE_FILL_ELEMS) {
        tile_fill_copy(c, dst, (int64_t)dst_off, src, (int64_t)off, (int64_t)total);
        return;
    }
    /* [R rows, W copies of each row's element]: through SBUF (tile_row_bcast_copy) */
    if (n >= 2 && n <= 3 && os[n - 1] == 0 && os[n - 2] != 0 && od[n - 1] >= 64 && dst->dt == src->dt &&
        tern_dtype_size(src->dt) >= 2 && llabs(os[n - 2]) <= INT32_MAX) {
        uint64_t R = (uint64_t)od[n - 2], W = (uint64_t)od[n - 1];
        uint64_t outer = n == 3 ? (uint64_t)od[0] : 1;
        for (uint64_t i = 0; i < outer && cc_ok(c); i++)
            tile_row_bcast_copy(c, dst, dst_off + i * R * W, src, (uint64_t)((int64_t)off + (int64_t)i * (n == 3 ? os[0] : 0)),
                                os[n - 2], R, W);
        return;
    }
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
cc_value *tile_broadcast_to(compile_ctx *c, cc_value *x, cc_value *out, cc_value *tmp)
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
    tile_strided_copy(c, tmp, 0, x, 0, out->rank, out->dims, st);
    return tmp;
}

void tile_release_tmp(compile_ctx *c, cc_value *tmp, cc_value *used)
{
    if (used == tmp && tmp->flat.region >= 0)
        tern_kernel_release(c->k, tmp->flat);
}
