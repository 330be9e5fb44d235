/* Layout lowerings (their rules: the array at the end, cc_rules_layout): views (Reshape, Flatten, Squeeze,
 * Unsqueeze, Identity alias their input), Transpose, Concat, Slice, Split and Expand as strided DMAs, Trilu, Tile,
 * Pad, DepthToSpace and SpaceToDepth as strided DMAs; Resize/Upsample as one constant interpolation matrix per resized axis, computed on
 * the host as ONNX's reference does (every mode and coordinate transformation); EyeLike, OneHot and TopK. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "compiler/lower_tiles.h"
#include "graph/graph_internal.h"
#include "graph/op_params.h"

/* ---- Trilu ---- */

static int lower_trilu(compile_ctx *c)
{
    const tern_graph_node *n = cc_node(c);
    cc_value *x = cc_in(c, 0);
    cc_value *y = cc_out(c, 0, cc_out_dtype(c, 0));
    if (!x || !y)
        return 1;
    int64_t kk = 0;
    if (cc_in_id(c, 1) >= 0) {
        cc_value *kv = cc_in(c, 1);
        if (!kv || !kv->is_const_scalar) {
            cc_fail(c, TERN_ERR_UNSUPPORTED, "Trilu with a run-time k");
            return 1;
        }
        kk = (int64_t)kv->const_scalar;
    }
    int upper = (int)tern_graph_attr_int(n, "upper", 1);
    if (x->rank < 2) {
        cc_fail(c, TERN_ERR_INVALID, "Trilu of rank %d", x->rank);
        return 1;
    }
    uint64_t R = (uint64_t)x->dims[x->rank - 2], C = (uint64_t)x->dims[x->rank - 1];
    if (R * C == 0)
        return 1;
    uint64_t batches = x->numel / (R * C);
    if (kk > 1000000000LL)
        kk = 1000000000LL;
    if (kk < -1000000000LL)
        kk = -1000000000LL;
    for (uint64_t b = 0; b < batches && cc_ok(c); b++)
        for (uint64_t r0 = 0; r0 < R && cc_ok(c); r0 += PARTS)
            for (uint64_t c0 = 0; c0 < C && cc_ok(c); c0 += CHUNK) {
                uint32_t p = (uint32_t)(R - r0 < PARTS ? R - r0 : PARTS);
                uint32_t w = (uint32_t)(C - c0 < CHUNK ? C - c0 : CHUNK);
                tern_view t = tile_new(c, p, w, "trilu_in"), o = tile_new(c, p, w, "trilu_out");
                uint64_t off = b * R * C + r0 * C + c0;
                tern_kernel_load(c->k, t, cc_view2d(c, x, off, p, w, C));
                /* value = (c0 + j) - (r0 + p) - k: keep value >= 0 (upper) or <= 0 (lower) */
                int32_t steps[1] = {1};
                tern_kernel_affine_select(c->k, o, t, upper ? TERN_ALU_IS_GE : TERN_ALU_IS_LE,
                                          (int32_t)((int64_t)c0 - (int64_t)r0 - kk), -1, steps, 0.0f);
                tern_kernel_store(c->k, cc_view2d(c, y, off, p, w, C), o);
                tern_kernel_release(c->k, t);
                tern_kernel_release(c->k, o);
            }
    return 1;
}

/* ---- layout ops ---- */

static int lower_tile(compile_ctx *c)
{
    cc_value *x = cc_in(c, 0), *rp = cc_in(c, 1);
    cc_value *y = cc_out(c, 0, x ? x->dt : TERN_DTYPE_FP32);
    if (!x || !y)
        return 1;
    if (!rp || !rp->host) {
        cc_fail(c, TERN_ERR_UNSUPPORTED, "Tile with run-time repeats");
        return 1;
    }
    /* y viewed as [r0, d0, r1, d1, ...] reads x with stride 0 over each repeat */
    int64_t dims[2 * CC_MAX_RANK], st[2 * CC_MAX_RANK], xs[CC_MAX_RANK];
    cc_strides(x, xs);
    for (int d = 0; d < x->rank; d++) {
        dims[2 * d] = (int64_t)tern_host_tensor_get(rp->host, (size_t)d);
        st[2 * d] = 0;
        dims[2 * d + 1] = x->dims[d];
        st[2 * d + 1] = xs[d];
    }
    int64_t dst_st[2 * CC_MAX_RANK], s = 1;
    for (int d = 2 * x->rank - 1; d >= 0; d--) {
        dst_st[d] = s;
        s *= dims[d];
    }
    tile_copy_nd(c, y, 0, dst_st, x, 0, st, 2 * x->rank, dims);
    return 1;
}

/* Fill n elements of y from element off with value v: memset tiles stored to HBM. */
static void fill(compile_ctx *c, cc_value *y, uint64_t off, uint64_t n, float v)
{
    uint64_t W = n < CHUNK ? n : CHUNK;
    if (n == 0)
        return;
    uint64_t R = n / W, rem = n % W;
    uint32_t p0 = (uint32_t)(R < PARTS ? R : PARTS);
    tern_view t = tern_kernel_sbuf(c->k, y->dt, p0 ? p0 : 1, (uint32_t)W, "fill");
    tern_kernel_memset(c->k, VE, t, v);
    for (uint64_t r0 = 0; r0 < R && cc_ok(c); r0 += PARTS) {
        uint32_t p = (uint32_t)(R - r0 < PARTS ? R - r0 : PARTS);
        tern_kernel_store(c->k, cc_view2d(c, y, off + r0 * W, p, W, W), tern_view_block(c->k, t, 0, p, 0, W));
    }
    if (rem)
        tern_kernel_store(c->k, cc_view2d(c, y, off + R * W, 1, rem, rem), tern_view_block(c->k, t, 0, 1, 0, rem));
    tern_kernel_release(c->k, t);
}

static int lower_pad(compile_ctx *c)
{
    const tern_graph_node *n = cc_node(c);
    cc_value *x = cc_in(c, 0);
    cc_value *y = cc_out(c, 0, x ? x->dt : TERN_DTYPE_FP32);
    if (!x || !y)
        return 1;
    const char *mode = tern_graph_attr_string(n, "mode", "constant");
    /* pads and value by opset, as inference and the evaluator read them (graph_pad_decode) */
    int64_t opset = tern_graph_opset(c->g);
    cc_value *pv = opset >= 11 ? cc_in(c, 1) : NULL;
    graph_pad_args pa;
    char why[160];
    tern_status st = graph_pad_decode(n, opset, pv != NULL, pv ? pv->host : NULL, 0, NULL, &pa, why, sizeof why);
    if (st) {
        cc_fail(c, st, "Pad: %s", why);
        return 1;
    }
    if (!pa.known) {
        cc_fail(c, TERN_ERR_UNSUPPORTED, "Pad with run-time pads");
        return 1;
    }
    const int64_t *pads = pa.pads;
    if (cc_in_id(c, 3) >= 0) {
        cc_fail(c, TERN_ERR_UNSUPPORTED, "Pad with an axes input");
        return 1;
    }
    float value = (float)pa.value;
    int h = 0;
    float v;
    if (opset >= 11 && !tile_const_scalar_in(c, 2, NULL, &v, &h)) /* a run-time fill value is refused there */
        return 1;
    if (h)
        value = v;
    int r = x->rank;
    int64_t ys[CC_MAX_RANK], xs[CC_MAX_RANK];
    cc_strides(y, ys);
    cc_strides(x, xs);
    for (int d = 0; d < r; d++)
        if (pads[d] < 0 || pads[r + d] < 0) {
            cc_fail(c, TERN_ERR_UNSUPPORTED, "Pad with negative pads (cropping)");
            return 1;
        }
    int edge = !strcmp(mode, "edge"), reflect = !strcmp(mode, "reflect");
    if (!edge && !reflect && strcmp(mode, "constant")) {
        cc_fail(c, TERN_ERR_UNSUPPORTED, "Pad mode '%s'", mode);
        return 1;
    }
    if (!edge && !reflect)
        fill(c, y, 0, y->numel, value);
    int64_t off = 0;
    for (int d = 0; d < r; d++)
        off += pads[d] * ys[d];
    tile_copy_nd(c, y, off, ys, x, 0, xs, r, x->dims);
    if (edge || reflect) { /* axis by axis, each border slice copied from inside y */
        for (int d = 0; d < r && cc_ok(c); d++) {
            int64_t b = pads[d], e = pads[r + d], len = x->dims[d];
            if (reflect && (b >= len || e >= len)) {
                cc_fail(c, TERN_ERR_UNSUPPORTED, "reflect Pad of %lld on an axis of %lld", (long long)(b > e ? b : e),
                        (long long)len);
                return 1;
            }
            int64_t dims[CC_MAX_RANK], base = 0;
            for (int q = 0; q < r; q++) { /* axes < d: full (padded); axes > d: the interior */
                dims[q] = q < d ? y->dims[q] : q == d ? 1 : x->dims[q];
                if (q > d)
                    base += pads[q] * ys[q];
            }
            for (int64_t i = 0; i < b + e && cc_ok(c); i++) {
                int64_t to = i < b ? i : b + len + (i - b); /* position in y along d */
                int64_t from;
                if (i < b)
                    from = edge ? b : b + (b - i);
                else
                    from = edge ? b + len - 1 : b + len - 1 - (i - b + 1);
                tile_copy_nd(c, y, base + to * ys[d], ys, y, base + from * ys[d], ys, r, dims);
            }
        }
    }
    return 1;
}

static int lower_depth_space(compile_ctx *c)
{
    const tern_graph_node *n = cc_node(c);
    cc_value *x = cc_in(c, 0);
    cc_value *y = cc_out(c, 0, x ? x->dt : TERN_DTYPE_FP32);
    if (!x || !y)
        return 1;
    if (x->rank != 4) {
        cc_fail(c, TERN_ERR_UNSUPPORTED, "%s of rank %d (4-D NCHW only)", n->op, x->rank);
        return 1;
    }
    int64_t b = tern_graph_attr_int(n, "blocksize", 1);
    int64_t N = x->dims[0], C = x->dims[1], H = x->dims[2], W = x->dims[3];
    int64_t dims[6], st[6];
    if (n->op_id == TERN_GOP_DEPTH_TO_SPACE) {
        int64_t Cp = C / (b * b);
        int crd = !strcmp(tern_graph_attr_string(n, "mode", "DCR"), "CRD");
        /* y[n, c', h, b1, w, b2] */
        int64_t d6[6] = {N, Cp, H, b, W, b};
        int64_t s6[6] = {C * H * W, crd ? b * b * H * W : H * W, W, crd ? b * H * W : b * Cp * H * W, 1,
                         crd ? H * W : Cp * H * W};
        memcpy(dims, d6, sizeof d6);
        memcpy(st, s6, sizeof s6);
    } else {
        /* y[n, b1, b2, c, h', w'] = x[n, c, h' * b + b1, w' * b + b2] */
        int64_t d6[6] = {N, b, b, C, H / b, W / b};
        int64_t s6[6] = {C * H * W, W, 1, H * W, b * W, b};
        memcpy(dims, d6, sizeof d6);
        memcpy(st, s6, sizeof s6);
    }
    tile_gather_copy(c, y, x, 0, 6, dims, st);
    return 1;
}

/* ---- Resize / Upsample: one constant interpolation matrix per resized axis ---- */

typedef struct {
    int mode;            /* 0 nearest, 1 linear, 2 cubic */
    const char *ctm;     /* coordinate_transformation_mode */
    const char *nearest; /* nearest_mode */
    double a;            /* cubic_coeff_a */
    int exclude;         /* exclude_outside */
} rs_opts;

static int cmp_nb(const void *pa, const void *pb)
{
    const double *a = pa, *b = pb; /* {distance, index} */
    if (a[0] != b[0])
        return a[0] < b[0] ? -1 : 1;
    return a[1] < b[1] ? -1 : a[1] > b[1];
}

/* W[out_w][in_w]: output o = sum_i W[o][i] * input i, as ONNX's reference (resize.py: interpolate_1d_with_x)
 * computes it, in double. outside[o] = 1 where tf_crop_and_resize extrapolates (row of zeros). */
static void resize_weights(const rs_opts *op, int64_t in_w, int64_t out_w, double scale, double roi0, double roi1,
                           double *W, int *outside)
{
    memset(W, 0, sizeof(double) * (size_t)(in_w * out_w));
    for (int64_t o = 0; o < out_w; o++) {
        double x = (double)o, ow = scale * (double)in_w, xo;
        outside[o] = 0;
        if (!strcmp(op->ctm, "align_corners"))
            xo = ow == 1 ? 0.0 : x * (double)(in_w - 1) / (ow - 1);
        else if (!strcmp(op->ctm, "asymmetric"))
            xo = x / scale;
        else if (!strcmp(op->ctm, "tf_crop_and_resize")) {
            xo = ow == 1 ? (roi1 - roi0) * (double)(in_w - 1) / 2 : x * (roi1 - roi0) * (double)(in_w - 1) / (ow - 1);
            xo += roi0 * (double)(in_w - 1);
            if (xo < 0 || xo > (double)(in_w - 1)) {
                outside[o] = 1;
                continue;
            }
        } else if (!strcmp(op->ctm, "pytorch_half_pixel"))
            xo = ow == 1 ? -0.5 : (x + 0.5) / scale - 0.5;
        else /* half_pixel (and tf_half_pixel_for_nn, rejected before) */
            xo = (x + 0.5) / scale - 0.5;
        double xi = floor(xo), ratio = xo == xi ? 1.0 : xo - xi;
        double cf[4];
        int n;
        if (op->mode == 2) {
            double A = op->a, r = ratio;
            cf[0] = ((A * (r + 1) - 5 * A) * (r + 1) + 8 * A) * (r + 1) - 4 * A;
            cf[1] = ((A + 2) * r - (A + 3)) * r * r + 1;
            cf[2] = ((A + 2) * (1 - r) - (A + 3)) * (1 - r) * (1 - r) + 1;
            cf[3] = ((A * ((1 - r) + 1) - 5 * A) * ((1 - r) + 1) + 8 * A) * ((1 - r) + 1) - 4 * A;
            n = 4;
        } else if (op->mode == 1) {
            cf[0] = 1 - ratio;
            cf[1] = ratio;
            n = 2;
        } else {
            n = 2;
            if (xo == xi) {
                cf[0] = 0;
                cf[1] = 1;
            } else if (!strcmp(op->nearest, "round_prefer_ceil")) {
                cf[0] = ratio < 0.5;
                cf[1] = ratio >= 0.5;
            } else if (!strcmp(op->nearest, "floor")) {
                cf[0] = 1;
                cf[1] = 0;
            } else if (!strcmp(op->nearest, "ceil")) {
                cf[0] = 0;
                cf[1] = 1;
            } else { /* round_prefer_floor */
                cf[0] = ratio <= 0.5;
                cf[1] = ratio > 0.5;
            }
        }
        /* the n nearest positions of the edge-padded input, ties to the smaller index */
        int64_t pad = (n + 1) / 2, len = in_w + 2 * pad;
        double xp = xo + (double)pad, cand[16][2];
        int nc = 0;
        for (int64_t i = (int64_t)floor(xp) - n; i <= (int64_t)floor(xp) + n && nc < 16; i++)
            if (i >= 0 && i < len) {
                cand[nc][0] = fabs(xp - (double)i);
                cand[nc][1] = (double)i;
                nc++;
            }
        qsort(cand, (size_t)nc, sizeof cand[0], cmp_nb);
        int64_t idx[4];
        int m = nc < n ? nc : n;
        for (int i = 0; i < m; i++)
            idx[i] = (int64_t)cand[i][1];
        for (int i = 1; i < m; i++) /* ascending */
            for (int j = i; j > 0 && idx[j - 1] > idx[j]; j--) {
                int64_t t = idx[j];
                idx[j] = idx[j - 1];
                idx[j - 1] = t;
            }
        if (op->exclude) {
            double sum = 0;
            for (int i = 0; i < m; i++) {
                int64_t orig = idx[i] - pad;
                if (orig < 0 || orig >= in_w)
                    cf[i] = 0;
                sum += cf[i];
            }
            for (int i = 0; i < m; i++)
                cf[i] /= sum;
        }
        for (int i = 0; i < m; i++) {
            int64_t orig = idx[i] - pad;
            orig = orig < 0 ? 0 : orig >= in_w ? in_w - 1 : orig;
            W[o * in_w + orig] += cf[i];
        }
    }
}

static int lower_resize(compile_ctx *c)
{
    const tern_graph_node *n = cc_node(c);
    cc_value *x = cc_in(c, 0);
    cc_value *y = cc_out(c, 0, x ? x->dt : TERN_DTYPE_FP32);
    if (!x || !y)
        return 1;
    int upsample = n->op_id == TERN_GOP_UPSAMPLE, old = upsample || tern_graph_opset(c->g) < 11;
    const char *mode = tern_graph_attr_string(n, "mode", "nearest");
    rs_opts op = {!strcmp(mode, "cubic") ? 2 : !strcmp(mode, "nearest") ? 0 : 1,
                  old ? "asymmetric" : tern_graph_attr_string(n, "coordinate_transformation_mode", "half_pixel"),
                  old ? "floor" : tern_graph_attr_string(n, "nearest_mode", "round_prefer_floor"),
                  tern_graph_attr_float(n, "cubic_coeff_a", -0.75f), (int)tern_graph_attr_int(n, "exclude_outside", 0)};
    if (strcmp(mode, "nearest") && strcmp(mode, "linear") && strcmp(mode, "bilinear") && strcmp(mode, "cubic")) {
        cc_fail(c, TERN_ERR_UNSUPPORTED, "%s mode '%s'", n->op, mode);
        return 1;
    }
    if (!strcmp(op.ctm, "tf_half_pixel_for_nn")) {
        cc_fail(c, TERN_ERR_UNSUPPORTED, "Resize coordinate_transformation_mode '%s'", op.ctm);
        return 1;
    }
    float extrap = tern_graph_attr_float(n, "extrapolation_value", 0.0f);
    cc_value *roi = old ? NULL : cc_in(c, 1), *scales = cc_in(c, old ? 1 : 2), *sizes = old ? NULL : cc_in(c, 3);
    const tern_graph_attr *sa = upsample ? tern_graph_node_attr(n, "scales") : NULL;
    if ((roi && !roi->host) || (scales && !scales->host) || (sizes && !sizes->host)) {
        cc_fail(c, TERN_ERR_UNSUPPORTED, "%s with run-time roi, scales or sizes", n->op);
        return 1;
    }
    int r = x->rank;
    cc_value cur = *x, nxt;
    int have_tmp = 0;
    for (int d = 0; d < r && cc_ok(c); d++) {
        int64_t in_w = x->dims[d], out_w = y->dims[d];
        double scale;
        if (sizes && sizes->host->count == (size_t)r)
            scale = (double)out_w / (double)in_w;
        else if (scales && scales->host->count == (size_t)r)
            scale = (double)(float)tern_host_tensor_get(scales->host, (size_t)d);
        else if (sa && sa->n == (size_t)r)
            scale = (double)sa->floats[d];
        else
            scale = (double)out_w / (double)in_w;
        double roi0 = 0, roi1 = 1;
        if (roi && roi->host->count == (size_t)(2 * r)) {
            roi0 = tern_host_tensor_get(roi->host, (size_t)d);
            roi1 = tern_host_tensor_get(roi->host, (size_t)(r + d));
        }
        if (in_w == 0 || out_w == 0)
            return 1;
        double *W = malloc(sizeof(double) * (size_t)(in_w * out_w));
        int *outside = malloc(sizeof(int) * (size_t)out_w);
        tern_host_tensor *wt = NULL, *et = NULL;
        tern_error e;
        int64_t wd[2] = {in_w, out_w};
        if (!W || !outside || tern_host_tensor_new(TERN_ELEM_FLOAT, 2, wd, &wt, &e) ||
            tern_host_tensor_new(TERN_ELEM_FLOAT, 1, &out_w, &et, &e)) {
            free(W);
            free(outside);
            tern_host_tensor_free(wt);
            cc_fail(c, TERN_ERR_NOMEM, "out of memory for Resize weights");
            return 1;
        }
        resize_weights(&op, in_w, out_w, scale, roi0, roi1, W, outside);
        int ident = in_w == out_w, ext = 0;
        for (int64_t o = 0; o < out_w; o++) {
            ext |= outside[o];
            et->f[o] = outside[o] ? extrap : 0.0f;
            for (int64_t i = 0; i < in_w; i++) {
                wt->f[i * out_w + o] = (float)W[o * in_w + i]; /* stored transposed: [in_w, out_w] */
                ident &= W[o * in_w + i] == (o == i ? 1.0 : 0.0);
            }
        }
        ident &= !ext;
        free(W);
        free(outside);
        if (!ident) {
            /* lhsT [in_w, rows] = cur with axis d first; P [rows, out_w] = lhsT^T @ Wt; next = P with the axis back */
            uint64_t rows = cur.numel / (uint64_t)in_w;
            int64_t pd[CC_MAX_RANK], pst[CC_MAX_RANK], cs[CC_MAX_RANK];
            cc_strides(&cur, cs);
            pd[0] = in_w;
            pst[0] = cs[d];
            for (int q = 0, k = 1; q < r; q++)
                if (q != d) {
                    pd[k] = cur.dims[q];
                    pst[k++] = cs[q];
                }
            cc_value lt, pv;
            int64_t ndims[CC_MAX_RANK];
            memcpy(ndims, cur.dims, sizeof ndims);
            ndims[d] = out_w;
            int64_t pdims[2] = {(int64_t)rows, out_w};
            if (tile_tmp_value(c, &lt, TERN_DTYPE_FP32, r, pd) && tile_tmp_value(c, &pv, TERN_DTYPE_FP32, 2, pdims)) {
                tile_gather_copy(c, &lt, &cur, 0, r, pd, pst);
                tern_gemm_opts go;
                tern_gemm_opts_default(&go);
                go.acc_dtype = TERN_DTYPE_FP32;
                go.tiles_in_block_m = 8;
                tern_view wv = cc_const2d(c, wt, TERN_DTYPE_FP32, (uint64_t)in_w, (uint64_t)out_w, 0);
                tern_lib_gemm(c->k, cc_view2d(c, &pv, 0, rows, (uint64_t)out_w, (uint64_t)out_w),
                              cc_view2d(c, &lt, 0, (uint64_t)in_w, rows, rows), wv, &go);
                if (ext) {
                    tern_view ev = cc_const2d(c, et, TERN_DTYPE_FP32, 1, (uint64_t)out_w, 0);
                    tern_view pw = cc_view2d(c, &pv, 0, rows, (uint64_t)out_w, (uint64_t)out_w);
                    tern_lib_bias_act(c->k, pw, pw, ev, TERN_ACT_COPY);
                }
                tile_tmp_free(c, &lt);
                int last = 1;
                for (int q = d + 1; q < r; q++)
                    last &= x->dims[q] == y->dims[q];
                cc_value *dst = last ? y : tile_tmp_value(c, &nxt, TERN_DTYPE_FP32, r, ndims);
                if (dst) {
                    pv.rank = r; /* P is [others..., out_w]: move the axis back */
                    tile_axis_back(c, dst, &pv, d);
                }
                tile_tmp_free(c, &pv);
                if (have_tmp)
                    tile_tmp_free(c, &cur);
                if (last) {
                    have_tmp = 0;
                    cur = *y;
                    tern_host_tensor_free(wt);
                    tern_host_tensor_free(et);
                    return 1;
                }
                if (dst) {
                    cur = nxt;
                    have_tmp = 1;
                }
            }
        }
        tern_host_tensor_free(wt);
        tern_host_tensor_free(et);
    }
    /* no axis changed (or the last changed axis was written to y above) */
    if (cc_ok(c))
        cc_copy(c, cc_view2d(c, y, 0, 1, y->numel, y->numel), cc_view2d(c, &cur, 0, 1, cur.numel, cur.numel));
    if (have_tmp)
        tile_tmp_free(c, &cur);
    return 1;
}

/* ---- EyeLike, OneHot, TopK ---- */

static int lower_eyelike(compile_ctx *c)
{
    cc_value *x = cc_in(c, 0);
    cc_value *y = cc_out(c, 0, cc_out_dtype(c, 0));
    if (!x || !y)
        return 1;
    if (y->rank != 2) {
        cc_fail(c, TERN_ERR_INVALID, "EyeLike of rank %d", y->rank);
        return 1;
    }
    int64_t k = tern_graph_attr_int(cc_node(c), "k", 0);
    uint64_t R = (uint64_t)y->dims[0], C = (uint64_t)y->dims[1];
    for (uint64_t r0 = 0; r0 < R && cc_ok(c); r0 += PARTS)
        for (uint64_t c0 = 0; c0 < C && cc_ok(c); c0 += CHUNK) {
            uint32_t p = (uint32_t)(R - r0 < PARTS ? R - r0 : PARTS), w = (uint32_t)(C - c0 < CHUNK ? C - c0 : CHUNK);
            tern_view one = tile_new(c, p, w, "eye_one"), o = tile_new(c, p, w, "eye");
            tern_kernel_memset(c->k, VE, one, 1.0f);
            int32_t steps[1] = {1};
            /* keep where (c0 + j) - (r0 + p) - k == 0 */
            tern_kernel_affine_select(c->k, o, one, TERN_ALU_IS_EQ, (int32_t)((int64_t)c0 - (int64_t)r0 - k), -1,
                                      steps, 0.0f);
            tern_kernel_store(c->k, cc_view2d(c, y, r0 * C + c0, p, w, C), o);
            tern_kernel_release(c->k, one);
            tern_kernel_release(c->k, o);
        }
    return 1;
}

static int lower_onehot(compile_ctx *c)
{
    const tern_graph_node *n = cc_node(c);
    cc_value *idx = cc_in(c, 0), *depth = cc_in(c, 1), *vals = cc_in(c, 2);
    cc_value *y = cc_out(c, 0, cc_out_dtype(c, 0));
    if (!idx || !depth || !vals || !y)
        return 1;
    if (!depth->is_const_scalar) {
        cc_fail(c, TERN_ERR_UNSUPPORTED, "OneHot with a run-time depth");
        return 1;
    }
    int64_t D = (int64_t)depth->const_scalar;
    int64_t axis = cc_norm_axis(tern_graph_attr_int(n, "axis", -1), y->rank);
    if (D <= 0 || D > (int64_t)ROW_MAX || axis < 0 || axis >= y->rank) {
        cc_fail(c, TERN_ERR_UNSUPPORTED, "OneHot of depth %lld on axis %lld", (long long)D, (long long)axis);
        return 1;
    }
    /* rows = every index, columns = depth; laid out [indices..., depth], then the depth axis moved into place */
    uint64_t rows = idx->numel;
    cc_value t;
    int64_t td[CC_MAX_RANK];
    int tr = 0;
    for (int d = 0; d < y->rank; d++)
        if (d != axis)
            td[tr++] = y->dims[d];
    td[tr++] = D;
    int direct = axis == y->rank - 1;
    cc_value *yt = direct ? y : tile_tmp_value(c, &t, y->dt, tr, td);
    if (!yt)
        return 1;
    for (uint64_t r0 = 0; r0 < rows && cc_ok(c); r0 += PARTS) {
        uint32_t p = (uint32_t)(rows - r0 < PARTS ? rows - r0 : PARTS), w = (uint32_t)D;
        tern_view iv = tile_new(c, p, 1, "oh_idx"), s = tile_new(c, p, 1, "oh_tmp"), o = tile_new(c, p, w, "oh");
        tern_view on = tile_new(c, p, 1, "oh_on"), off = tile_new(c, p, 1, "oh_off");
        tern_kernel_load(c->k, iv, cc_view2d(c, idx, r0, p, 1, 1));
        uint32_t one = 1;
        int32_t zero = 0;
        tern_kernel_load(c->k, off, cc_view(c, vals, 0, p, 0, 1, &one, &zero)); /* values[0] on every partition */
        tern_kernel_load(c->k, on, cc_view(c, vals, 1, p, 0, 1, &one, &zero));
        tile_ts(c, s, iv, TERN_ALU_IS_LT, 0.0f, TERN_ALU_MULT, (float)D); /* negative indices count from the end */
              tile_tt(c, iv, iv, s, TERN_ALU_ADD);
        tern_kernel_iota(c->k, o, 0, 0);
        tile_ts_ap(c, o, o, TERN_ALU_IS_EQ, iv, TERN_ALU_BYPASS, tern_view_none());
        tile_tt(c, on, on, off, TERN_ALU_SUBTRACT); /* off + eq * (on - off) */
              tile_ts_ap(c, o, o, TERN_ALU_MULT, on, TERN_ALU_ADD, off);
        tern_kernel_store(c->k, cc_view2d(c, yt, r0 * (uint64_t)D, p, (uint64_t)D, (uint64_t)D), o);
        tern_kernel_release(c->k, iv);
        tern_kernel_release(c->k, s);
        tern_kernel_release(c->k, o);
        tern_kernel_release(c->k, on);
        tern_kernel_release(c->k, off);
    }
    if (!direct) {
        tile_axis_back(c, y, yt, (int)axis);
        tile_tmp_free(c, &t);
    }
    return 1;
}

/* K rounds over vals [p, w] with column indices idx: the best value goes to ov's column j, its first index (the
 * lowest among equal values, as ONNX breaks ties) to oi's, and that one position is knocked out (-3e38 added) so
 * an equal value elsewhere is the next round's pick. */
static void topk_pick(compile_ctx *c, tern_view vals, tern_view idx, tern_view s, int64_t K, tern_view ov, tern_view oi)
{
    uint32_t p = vals.ap.num_partitions;
    for (int64_t j = 0; j < K; j++) {
        tern_view mj = tern_view_block(c->k, ov, 0, p, (uint64_t)j, (uint64_t)j + 1);
        tern_view ij = tern_view_block(c->k, oi, 0, p, (uint64_t)j, (uint64_t)j + 1);
        tern_kernel_tensor_reduce(c->k, mj, vals, TERN_ALU_MAX, 1, 0);
        tile_ts_ap(c, s, vals, TERN_ALU_IS_EQ, mj, TERN_ALU_BYPASS, tern_view_none());
        tile_ts(c, s, s, TERN_ALU_MULT, -IDX_BIG, TERN_ALU_ADD, IDX_BIG);
        tile_tt(c, s, s, idx, TERN_ALU_ADD);
        tern_kernel_tensor_reduce(c->k, ij, s, TERN_ALU_MIN, 1, 0);
        tile_ts_ap(c, s, idx, TERN_ALU_IS_EQ, ij, TERN_ALU_BYPASS, tern_view_none());
        tile_ts(c, s, s, TERN_ALU_MULT, -3.0e38f, TERN_ALU_BYPASS, 0.0f);
        tile_tt(c, vals, vals, s, TERN_ALU_ADD);
    }
}

/* TopK over rows longer than max8's 16384 (a vocabulary's logits), k <= 8: per row tile, each chunk of ROW_MAX
 * columns gives its best min(k, width) candidates (value, column) by topk_pick into [p, k * chunks] tiles
 * (unused slots: the lowest float at column 2^24 - 1, which loses every tie), and topk_pick over the candidates
 * gives the row's k, sorted, ties by the lower index. Values are the input's own (largest=0: of -x, negated
 * back). */
static void topk_long(compile_ctx *c, cc_value *xt, cc_value *vt, cc_value *it, uint64_t rows, uint64_t cols, int64_t K,
                      int largest)
{
    uint64_t nch = (cols + ROW_MAX - 1) / ROW_MAX, nc = nch * (uint64_t)K;
    for (uint64_t r0 = 0; r0 < rows && cc_ok(c); r0 += PARTS) {
        uint32_t p = (uint32_t)(rows - r0 < PARTS ? rows - r0 : PARTS);
        tern_view t = tile_new(c, p, ROW_MAX, "tkl_in"), s = tile_new(c, p, ROW_MAX, "tkl_tmp");
        tern_view id = tile_new(c, p, ROW_MAX, "tkl_iota");
        tern_view cv = tile_new(c, p, (uint32_t)nc, "tkl_cand"), ci = tile_new(c, p, (uint32_t)nc, "tkl_cidx");
        tern_view cs = tile_new(c, p, (uint32_t)nc, "tkl_ctmp");
        tern_view ov = tile_new(c, p, 8, "tkl_val"), oi = tile_new(c, p, 8, "tkl_idx");
        tern_kernel_memset(c->k, VE, cv, -3.40282347e38f);
        tern_kernel_memset(c->k, VE, ci, IDX_BIG - 1.0f);
        for (uint64_t ch = 0; ch < nch && cc_ok(c); ch++) {
            uint64_t c0 = ch * ROW_MAX, w = cols - c0 < ROW_MAX ? cols - c0 : ROW_MAX;
            int64_t kc = (int64_t)w < K ? (int64_t)w : K;
            tern_view tw = tern_view_block(c->k, t, 0, p, 0, w), sw = tern_view_block(c->k, s, 0, p, 0, w);
            tern_view iw = tern_view_block(c->k, id, 0, p, 0, w);
            tern_kernel_load(c->k, tw, cc_view2d(c, xt, r0 * cols + c0, p, w, cols));
            if (!largest)
                tile_ts(c, tw, tw, TERN_ALU_MULT, -1.0f, TERN_ALU_BYPASS, 0.0f);
            tern_kernel_iota(c->k, iw, (int32_t)c0, 0);
            uint64_t b = ch * (uint64_t)K;
            topk_pick(c, tw, iw, sw, kc, tern_view_block(c->k, cv, 0, p, b, b + (uint64_t)kc),
                      tern_view_block(c->k, ci, 0, p, b, b + (uint64_t)kc));
        }
        topk_pick(c, cv, ci, cs, K, ov, oi);
        tern_view vk = tern_view_block(c->k, ov, 0, p, 0, (uint64_t)K);
        if (!largest)
            tile_ts(c, vk, vk, TERN_ALU_MULT, -1.0f, TERN_ALU_BYPASS, 0.0f);
        tern_kernel_store(c->k, cc_view2d(c, vt, r0 * (uint64_t)K, p, (uint64_t)K, (uint64_t)K), vk);
        tern_kernel_store(c->k, cc_view2d(c, it, r0 * (uint64_t)K, p, (uint64_t)K, (uint64_t)K),
                          tern_view_block(c->k, oi, 0, p, 0, (uint64_t)K));
        tern_view all[] = {t, s, id, cv, ci, cs, ov, oi};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
            tern_kernel_release(c->k, all[i]);
    }
}

static int lower_topk(compile_ctx *c)
{
    const tern_graph_node *n = cc_node(c);
    cc_value *x = cc_in(c, 0), *kv = cc_in(c, 1);
    if (!x || !kv)
        return 1;
    if (!kv->is_const_scalar) {
        cc_fail(c, TERN_ERR_UNSUPPORTED, "TopK with a run-time k");
        return 1;
    }
    int64_t K = (int64_t)kv->const_scalar, axis = cc_norm_axis(tern_graph_attr_int(n, "axis", -1), x->rank);
    int largest = (int)tern_graph_attr_int(n, "largest", 1);
    if (axis < 0 || axis >= x->rank || K < 1 || K > 8 || K > x->dims[axis] || x->dims[axis] >= (int64_t)IDX_BIG) {
        cc_fail(c, TERN_ERR_UNSUPPORTED, "TopK of k=%lld over %lld elements (k <= 8 over fewer than 2^24)",
                (long long)K,
                (long long)(axis >= 0 && axis < x->rank ? x->dims[axis] : 0));
        return 1;
    }
    if (!tern_graph_attr_int(n, "sorted", 1)) {
        cc_fail(c, TERN_ERR_UNSUPPORTED, "TopK with sorted=0");
        return 1;
    }
    cc_value *yv = cc_out(c, 0, cc_out_dtype(c, 0)), *yi = cc_out(c, 1, TERN_DTYPE_INT32);
    if (!yv || !yi)
        return 1;
    int red[CC_MAX_RANK] = {0};
    red[axis] = 1;
    uint64_t rows, cols;
    cc_value tin, tv, ti;
    cc_value *xt = tile_axes_last(c, x, red, &tin, &rows, &cols);
    if (!xt)
        return 1;
    int direct = axis == x->rank - 1;
    int64_t od[CC_MAX_RANK];
    for (int d = 0, k = 0; d < x->rank; d++)
        if (d != axis)
            od[k++] = x->dims[d];
    od[x->rank - 1] = K;
    cc_value *vt = direct ? yv : tile_tmp_value(c, &tv, yv->dt, x->rank, od);
    cc_value *it = direct ? yi : tile_tmp_value(c, &ti, TERN_DTYPE_INT32, x->rank, od);
    if (cols > 16384 && vt && it) /* longer than max8 takes: chunked */
        topk_long(c, xt, vt, it, rows, cols, K, largest);
    for (uint64_t r0 = 0; r0 < rows && cols <= 16384 && vt && it && cc_ok(c); r0 += PARTS) {
        uint32_t p = (uint32_t)(rows - r0 < PARTS ? rows - r0 : PARTS), w = (uint32_t)(cols < 8 ? 8 : cols);
        tern_view t = tile_new(c, p, w, "tk_in"), s = tile_new(c, p, w, "tk_tmp"), id = tile_new(c, p, w, "tk_iota");
        tern_view m8 = tile_new(c, p, 8, "tk_max8"), ix = tile_new(c, p, 8, "tk_idx");
        tern_view tv_ = tern_view_block(c->k, t, 0, p, 0, cols);
        if (w > cols) /* max8 reads at least 8: pad with the lowest float */
            tern_kernel_memset(c->k, VE, t, -3.40282347e38f);
        tern_kernel_load(c->k, tv_, cc_view2d(c, xt, r0 * cols, p, cols, cols));
        if (!largest) /* smallest: the largest of -x */
            tile_ts(c, tv_, tv_, TERN_ALU_MULT, -1.0f, TERN_ALU_BYPASS, 0.0f);
        tern_kernel_max8(c->k, m8, t);
        tern_kernel_iota(c->k, id, 0, 0);
        for (int64_t j = 0; j < K; j++) { /* index of value j: the first position holding it */
            tern_view mj = tern_view_block(c->k, m8, 0, p, (uint64_t)j, (uint64_t)j + 1);
            tile_ts_ap(c, s, t, TERN_ALU_IS_EQ, mj, TERN_ALU_BYPASS, tern_view_none());
            tile_ts(c, s, s, TERN_ALU_MULT, -IDX_BIG, TERN_ALU_ADD, IDX_BIG);
            tile_tt(c, s, s, id, TERN_ALU_ADD);
            tern_kernel_tensor_reduce(c->k, tern_view_block(c->k, ix, 0, p, (uint64_t)j, (uint64_t)j + 1), s,
                                      TERN_ALU_MIN, 1, 0);
        }
        if (!largest)
            tile_ts(c, m8, m8, TERN_ALU_MULT, -1.0f, TERN_ALU_BYPASS, 0.0f);
        tern_kernel_store(c->k, cc_view2d(c, vt, r0 * (uint64_t)K, p, (uint64_t)K, (uint64_t)K),
                          tern_view_block(c->k, m8, 0, p, 0, (uint64_t)K));
        tern_kernel_store(c->k, cc_view2d(c, it, r0 * (uint64_t)K, p, (uint64_t)K, (uint64_t)K),
                          tern_view_block(c->k, ix, 0, p, 0, (uint64_t)K));
        tern_kernel_release(c->k, t);
        tern_kernel_release(c->k, s);
        tern_kernel_release(c->k, id);
        tern_kernel_release(c->k, m8);
        tern_kernel_release(c->k, ix);
    }
    if (!direct) {
        if (vt) {
            tile_axis_back(c, yv, vt, (int)axis);
            tile_tmp_free(c, &tv);
        }
        if (it) {
            tile_axis_back(c, yi, it, (int)axis);
            tile_tmp_free(c, &ti);
        }
    }
    tile_bcast_free(c, &tin, xt);
    return 1;
}

/* ---- the fast special cases (tried before this file's general rules; each applies function says why it
 * declines, and a node without input 0 is taken so that the rule reports it) ---- */

static int lower_alias(compile_ctx *c)
{
    cc_alias(c, 0, 0);
    return 1;
}

static int lower_expand(compile_ctx *c)
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
    tile_strided_copy(c, y, 0, x, 0, y->rank, y->dims, st);
    return 1;
}

static int lower_transpose(compile_ctx *c)
{
    const tern_graph_node *n = cc_node(c);
    char why[160];
    if (cc_transpose_folds(c, why, sizeof why)) {
        /* folded into its readers: the output is the input's storage, read transposed (lower_linear.c) */
        cc_value *y = cc_alias(c, 0, 0);
        if (y)
            y->tview = 1;
        return 1;
    }
    cc_value *x = cc_in(c, 0);
    /* narrow storage (compile.c): read only as a linear layer's run-time weight, stored in the matmul dtype */
    int id = cc_out_id(c, 0);
    cc_value *y = cc_out(c, 0, id >= 0 && c->v[id].narrow ? c->o->matmul_dtype : x ? x->dt : TERN_DTYPE_FP32);
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
        tern_view *vo = malloc(sizeof(tern_view) * (size_t)batches + 1), *vi = malloc(sizeof(tern_view) * (size_t)batches + 1);
        if (!vo || !vi) {
            free(vo), free(vi);
            cc_fail(c, TERN_ERR_NOMEM, "out of memory");
            return 1;
        }
        for (uint64_t b = 0; b < batches && cc_ok(c); b++) {
            vo[b] = cc_view2d(c, y, b * R * C, C, R, R);
            vi[b] = cc_view2d(c, x, b * R * C, R, C, C);
        }
        if (cc_ok(c)) /* one pipelined stream over the batch slices (kernel_lib.h) */
            tern_lib_transpose_exact_n(c->k, (size_t)batches, vo, vi);
        free(vo), free(vi);
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
        tern_view *vo = malloc(sizeof(tern_view) * (size_t)slices + 1), *vi = malloc(sizeof(tern_view) * (size_t)slices + 1);
        if (!vo || !vi) {
            free(vo), free(vi);
            cc_fail(c, TERN_ERR_NOMEM, "out of memory");
            return 1;
        }
        for (uint64_t sl = 0; sl < slices && cc_ok(c); sl++) {
            uint64_t xo = 0, yo = 0;
            for (int d = 0; d < no; d++) {
                xo += (uint64_t)(idx[d] * ox[d]);
                yo += (uint64_t)(idx[d] * oy[d]);
            }
            /* in: [R rows (stride xs[p]), C contiguous]; out: [C rows (stride ys[q]), R contiguous] */
            vo[sl] = cc_view2d(c, y, yo, C, R, (uint64_t)ys[q]);
            vi[sl] = cc_view2d(c, x, xo, R, C, (uint64_t)xs[p]);
            for (int d = no - 1; d >= 0; d--) {
                if (++idx[d] < odims[d])
                    break;
                idx[d] = 0;
            }
        }
        if (cc_ok(c)) /* one pipelined stream over the slices (kernel_lib.h) */
            tern_lib_transpose_exact_n(c->k, (size_t)slices, vo, vi);
        free(vo), free(vi);
        return 1;
    }
    tile_strided_copy(c, y, 0, x, 0, y->rank, y->dims, st);
    return 1;
}

/* ---- Concats in place (concat.in_place) ----
 * A Concat along an axis with nothing but size-1 dimensions before it (a batch-1 NCHW tensor's channels) lays each
 * input out as one contiguous run of its output. When the inputs are fp32 activations this compiler places itself
 * (not graph inputs, outputs or constants, each input once), they can be placed there from the start: the Concat's
 * output is then a view of its inputs' runs and it copies nothing. A DenseNet block concatenates all earlier
 * features again for every layer (Concat(x0, f1), Concat(x0, f1, f2), ...): with one buffer for the block, each
 * feature is written once where every later Concat wants it, instead of the block's features being copied once
 * per layer. Planned before lowering, in node order: a Concat joins the buffer of its first input when every
 * input already planned sits at the offset it wants, else starts a buffer of its own when none is planned yet,
 * else keeps its copies. A value whose producer places it otherwise (a view of another, another dtype) is simply
 * copied into its run by the Concat, so the plan can only save copies, never change a byte. */
static int concat_member_ok(compile_ctx *c, int id)
{
    if (id < 0)
        return 0;
    const tern_graph_value *gv = tern_graph_value_at(c->g, id);
    const cc_value *x = &c->v[id];
    return gv->type == TERN_ELEM_FLOAT && gv->producer >= 0 && !gv->constant &&
           !(gv->flags & (TERN_VALUE_INPUT | TERN_VALUE_OUTPUT)) && !x->narrow && !x->out_as && !x->tview &&
           !x->early && gv->rank >= 1;
}

static uint64_t value_numel(const tern_graph_value *gv)
{
    uint64_t n = 1;
    for (int d = 0; d < gv->rank; d++) {
        if (gv->dims[d] <= 0 || n > (uint64_t)INT32_MAX / (uint64_t)gv->dims[d])
            return 0; /* unknown, empty or too large for one flat view: not planned */
        n *= (uint64_t)gv->dims[d];
    }
    return n;
}

void cc_concat_plan(compile_ctx *c)
{
    tern_graph *g = c->g;
    int nn = tern_graph_node_count(g);
    for (int i = 0; i < nn; i++) {
        const tern_graph_node *n = tern_graph_node_at(g, i);
        if (n->op_id != TERN_GOP_CONCAT || n->n_outputs < 1 || n->n_inputs < 1 || !concat_member_ok(c, n->outputs[0]))
            continue;
        const tern_graph_value *yv = tern_graph_value_at(g, n->outputs[0]);
        int64_t axis = cc_norm_axis(tern_graph_attr_int(n, "axis", 0), yv->rank);
        int outer_one = axis >= 0 && axis < yv->rank;
        for (int d = 0; d < axis && outer_one; d++)
            outer_one = yv->dims[d] == 1;
        uint64_t ytotal = value_numel(yv);
        if (!outer_one || !ytotal)
            continue;
        /* the inputs: each once, each a planned or plannable fp32 activation */
        int ok = 1;
        uint64_t sum = 0;
        for (int k = 0; k < n->n_inputs && ok; k++) {
            int id = n->inputs[k];
            ok = concat_member_ok(c, id) && value_numel(tern_graph_value_at(g, id)) > 0;
            for (int j = 0; j < k && ok; j++)
                ok = n->inputs[j] != id;
            if (ok)
                sum += value_numel(tern_graph_value_at(g, id));
        }
        if (!ok || sum != ytotal || c->v[n->outputs[0]].home)
            continue;
        const cc_value *x0 = &c->v[n->inputs[0]];
        int home = x0->home;
        uint64_t base = home ? x0->home_off : 0, at = base, end = home ? c->homes[home - 1].numel : 0;
        for (int k = 0; k < n->n_inputs && ok; k++) {
            const cc_value *x = &c->v[n->inputs[k]];
            /* a planned input where this Concat wants it; an unplanned one only past everything the buffer holds
             * (two Concats extending one prefix with different values would otherwise share a run) */
            ok = x->home ? x->home == home && x->home_off == at : at >= end;
            at += value_numel(tern_graph_value_at(g, n->inputs[k]));
        }
        if (!ok || at > (uint64_t)INT32_MAX) /* the buffer stays one flat view */
            continue;
        if (!home) {
            cc_home *h = realloc(c->homes, sizeof *h * (size_t)(c->nhomes + 1));
            if (!h)
                return; /* an optimisation only */
            c->homes = h;
            h[c->nhomes] = (cc_home){0, TERN_DTYPE_FP32, -1, -1, tern_view_none()};
            home = ++c->nhomes;
        }
        cc_home *h = &c->homes[home - 1];
        at = base;
        for (int k = 0; k < n->n_inputs; k++) {
            cc_value *x = &c->v[n->inputs[k]];
            x->home = home;
            x->home_off = at;
            at += value_numel(tern_graph_value_at(g, n->inputs[k]));
        }
        cc_value *y = &c->v[n->outputs[0]];
        y->home = home;
        y->home_off = base;
        if (at > h->numel)
            h->numel = at;
    }
    /* each buffer lives from its first member's placement to the last node reading any member (or producing one
     * nobody reads) */
    for (int id = 0; id < c->nv; id++) {
        cc_value *x = &c->v[id];
        if (x->home <= 0)
            continue;
        cc_home *h = &c->homes[x->home - 1];
        int prod = tern_graph_value_at(g, id)->producer;
        if (x->last_use > h->last_use)
            h->last_use = x->last_use;
        if (prod > h->last_use)
            h->last_use = prod;
    }
}

int cc_home_place(compile_ctx *c, cc_value *x, int id, tern_dtype dt)
{
    cc_home *h = &c->homes[x->home - 1];
    if (dt != h->dt || x->home_off + x->numel > h->numel)
        return 0;
    if (h->owner < 0) {
        char name[32];
        snprintf(name, sizeof name, "t%u", c->names++);
        h->flat = tern_kernel_hbm_tensor(c->k, name, TERN_KIO_SCRATCH, dt, 1, &h->numel);
        if (h->flat.region < 0)
            return 0;
        h->owner = id;
        x->owner = id;
        x->scratch = 1;
        if (x->last_use < h->last_use)
            x->last_use = h->last_use; /* the buffer outlives this value while any member is read */
    } else {
        const cc_value *o = &c->v[h->owner];
        if (o->released)
            return 0;
        x->owner = h->owner;
        x->scratch = 0;
    }
    x->flat = h->flat;
    x->flat.ap.offset += x->home_off * tern_dtype_size(dt);
    x->flat.ap.dims[0].num = (uint32_t)x->numel;
    x->placed = 1;
    return 1;
}

static int lower_concat(compile_ctx *c)
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
            if (outer == 1 && y->home && x->home == y->home && dst.region == src.region &&
                dst.ap.offset == src.ap.offset && x->dt == y->dt)
                c->concats_in_place++; /* placed there by its producer (cc_concat_plan): nothing to copy */
            else
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

static int lower_slice(compile_ctx *c)
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
        tile_strided_copy(c, y, 0, x, (uint64_t)off, y->rank, y->dims, st2);
    return 1;
}

static int lower_split(compile_ctx *c)
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

static const cc_rule layout_rules[] = {
    {TERN_GOP_IDENTITY, "view.alias", NULL, lower_alias},
    {TERN_GOP_RESHAPE, "view.alias", NULL, lower_alias},
    {TERN_GOP_FLATTEN, "view.alias", NULL, lower_alias},
    {TERN_GOP_SQUEEZE, "view.alias", NULL, lower_alias},
    {TERN_GOP_UNSQUEEZE, "view.alias", NULL, lower_alias},
    {TERN_GOP_TRANSPOSE, "transpose.copy", NULL, lower_transpose},
    {TERN_GOP_CONCAT, "concat.copy", NULL, lower_concat},
    {TERN_GOP_SLICE, "slice.copy", NULL, lower_slice},
    {TERN_GOP_SPLIT, "split.copy", NULL, lower_split},
    {TERN_GOP_EXPAND, "expand.copy", NULL, lower_expand},
    {TERN_GOP_TRILU, "trilu", NULL, lower_trilu},
    {TERN_GOP_TILE, "tile.copy", NULL, lower_tile},
    {TERN_GOP_PAD, "pad.copy", NULL, lower_pad},
    {TERN_GOP_DEPTH_TO_SPACE, "depth_space.copy", NULL, lower_depth_space},
    {TERN_GOP_SPACE_TO_DEPTH, "depth_space.copy", NULL, lower_depth_space},
    {TERN_GOP_RESIZE, "resize", NULL, lower_resize},
    {TERN_GOP_UPSAMPLE, "resize", NULL, lower_resize},
    {TERN_GOP_EYE_LIKE, "eyelike", NULL, lower_eyelike},
    {TERN_GOP_ONE_HOT, "onehot", NULL, lower_onehot},
    {TERN_GOP_TOP_K, "topk", NULL, lower_topk},
};
const cc_rule_set cc_rules_layout = CC_RULE_SET("lower_layout.c", layout_rules);
