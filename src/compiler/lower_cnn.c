/* Lowerings of convolutional-network ops on NCHW tensors (1-D, 2-D and 3-D spatial; 3-D ops are the 2-D
 * machinery run once per output depth and kernel depth offset, each input plane loaded on its own): Conv as im2col + the library
 * GEMM (weights as the stationary operand, one DMA per kernel offset builds the im2col matrix in HBM), depthwise
 * Conv and the pools (MaxPool, AveragePool) as a window walk on VectorE (one strided DMA per kernel offset into
 * SBUF, combined with max / add / multiply-add), GlobalAveragePool / GlobalMaxPool as row reductions, and
 * BatchNormalization (inference) folded at compile time into a per-channel scale and shift. docs/compiler-cnn.md
 * has the details and the limits. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compiler/compile_internal.h"
#include "compiler/lower_tiles.h"

/* ---- geometry ---- */

/* A 1-D, 2-D or 3-D spatial window op on NC[D]HW: sizes, strides, dilations and leading pads (1-D ops use
 * H = 1, 1-D and 2-D ones D = 1). */
typedef struct {
    int64_t N, C, H, W;       /* input */
    int64_t Ho, Wo;           /* output (from shape inference) */
    int64_t kh, kw, sh, sw, dh, dw, ph, pw; /* kernel, strides, dilations, pads at the start */
    int64_t ph_end, pw_end;   /* pads at the end (AveragePool's divisor with count_include_pad) */
    int64_t D, Do, kd, sd, dd, pd, pd_end; /* the depth axis of 3-D ops (1, 1, 1, 1, 1, 0, 0 otherwise) */
} cnn_geom;

static int64_t ints_at(const tern_graph_attr *a, size_t i, int64_t dflt)
{
    return a && i < a->n ? a->ints[i] : dflt;
}

/* Fill g from x (input), y (output), the kernel spatial dims and the node's attributes. */
static int geom_of(compile_ctx *c, cnn_geom *g, const cc_value *x, const cc_value *y, const int64_t *kern)
{
    const tern_graph_node *n = cc_node(c);
    if (x->rank < 3 || x->rank > 5) {
        cc_fail(c, TERN_ERR_UNSUPPORTED, "%s on a rank-%d tensor (1-D, 2-D and 3-D spatial NCHW only)", n->op,
                x->rank);
        return 0;
    }
    int sp = x->rank - 2;
    size_t ih = (size_t)sp - 2; /* the H axis's attribute index (2-D and 3-D) */
    const tern_graph_attr *st = tern_graph_node_attr(n, "strides"), *di = tern_graph_node_attr(n, "dilations"),
                          *pa = tern_graph_node_attr(n, "pads");
    memset(g, 0, sizeof *g);
    g->N = x->dims[0];
    g->C = x->dims[1];
    g->H = sp >= 2 ? x->dims[x->rank - 2] : 1;
    g->W = x->dims[x->rank - 1];
    g->Ho = sp >= 2 ? y->dims[y->rank - 2] : 1;
    g->Wo = y->dims[y->rank - 1];
    g->kh = sp >= 2 ? kern[sp - 2] : 1;
    g->kw = kern[sp - 1];
    g->sh = sp >= 2 ? ints_at(st, ih, 1) : 1;
    g->sw = ints_at(st, (size_t)sp - 1, 1);
    g->dh = sp >= 2 ? ints_at(di, ih, 1) : 1;
    g->dw = ints_at(di, (size_t)sp - 1, 1);
    g->D = sp == 3 ? x->dims[2] : 1;
    g->Do = sp == 3 ? y->dims[2] : 1;
    g->kd = sp == 3 ? kern[0] : 1;
    g->sd = sp == 3 ? ints_at(st, 0, 1) : 1;
    g->dd = sp == 3 ? ints_at(di, 0, 1) : 1;
    const char *ap = tern_graph_attr_string(n, "auto_pad", "NOTSET");
    if (!strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER")) {
        int64_t in[3] = {g->H, g->W, g->D}, out[3] = {g->Ho, g->Wo, g->Do}, k[3] = {g->kh, g->kw, g->kd},
                s[3] = {g->sh, g->sw, g->sd}, d[3] = {g->dh, g->dw, g->dd}, beg[3], end[3];
        for (int i = 0; i < 3; i++) {
            int64_t tot = (out[i] - 1) * s[i] + (k[i] - 1) * d[i] + 1 - in[i];
            if (tot < 0)
                tot = 0;
            beg[i] = !strcmp(ap, "SAME_UPPER") ? tot / 2 : tot - tot / 2;
            end[i] = tot - beg[i];
        }
        g->ph = beg[0], g->pw = beg[1], g->ph_end = end[0], g->pw_end = end[1];
        if (sp == 3)
            g->pd = beg[2], g->pd_end = end[2];
    } else if (!strcmp(ap, "VALID")) {
        /* no padding */
    } else {
        g->ph = sp >= 2 ? ints_at(pa, ih, 0) : 0;
        g->pw = ints_at(pa, (size_t)sp - 1, 0);
        g->ph_end = sp >= 2 ? ints_at(pa, (size_t)sp + ih, 0) : 0;
        g->pw_end = ints_at(pa, (size_t)sp * 2 - 1, 0);
        if (sp == 3)
            g->pd = ints_at(pa, 0, 0), g->pd_end = ints_at(pa, 3, 0);
    }
    if (g->sd < 1 || g->dd < 1 || g->kd < 1 || g->pd < 0) {
        cc_fail(c, TERN_ERR_INVALID, "%s window depth: input %lld, output %lld, kernel %lld, stride %lld, dilation %lld, pad %lld",
                n->op, (long long)g->D, (long long)g->Do, (long long)g->kd, (long long)g->sd, (long long)g->dd,
                (long long)g->pd);
        return 0;
    }
    if (g->sh < 1 || g->sw < 1 || g->dh < 1 || g->dw < 1 || g->kh < 1 || g->kw < 1 || g->ph < 0 || g->pw < 0) {
        cc_fail(c, TERN_ERR_INVALID, "%s window: kernel %lldx%lld, strides %lldx%lld, dilations %lldx%lld, pads %lld,%lld",
                n->op, (long long)g->kh, (long long)g->kw, (long long)g->sh, (long long)g->sw, (long long)g->dh,
                (long long)g->dw, (long long)g->ph, (long long)g->pw);
        return 0;
    }
    return 1;
}

/* ---- constants made at compile time ---- */

static tern_view const_f32(compile_ctx *c, tern_dtype dt, uint64_t rows, uint64_t cols, const float *data)
{
    size_t n = (size_t)(rows * cols), es = tern_dtype_size(dt);
    uint8_t *b = malloc(es * (n ? n : 1));
    if (!b) {
        cc_fail(c, TERN_ERR_NOMEM, "out of memory for a constant of %zu elements", n);
        return tern_view_none();
    }
    tern_error e;
    tern_view v = tern_view_none();
    if (tern_convert_from_f32(dt, b, data, n, NULL, &e)) {
        cc_fail(c, e.code, "%s", e.msg);
    } else {
        char name[32];
        snprintf(name, sizeof name, "w%u", c->names++);
        uint64_t shape[2] = {rows, cols};
        v = tern_kernel_constant(c->k, name, dt, 2, shape, b);
    }
    free(b);
    return v;
}

/* An HBM view with a partition (outer) dim and up to 3 free dims on a kernel view (offset in elements). */
static tern_view hview(tern_view base, uint64_t off, uint32_t parts, int64_t pstep, unsigned nd, const uint32_t *nums,
                       const int32_t *steps)
{
    tern_view v = base;
    v.ap.offset = base.ap.offset + off * tern_dtype_size((tern_dtype)base.ap.dtype);
    v.ap.num_partitions = (uint16_t)parts;
    v.ap.partition_step = pstep;
    v.ap.ndims = (uint8_t)nd;
    memset(v.ap.dims, 0, sizeof v.ap.dims);
    for (unsigned d = 0; d < nd; d++) {
        v.ap.dims[d].num = nums[d];
        v.ap.dims[d].step = steps[d];
    }
    return v;
}

/* Per-row scale and shift: out[r, :] = in[r, :] * scale[r] + shift[r] (scale or shift may be absent, region
 * -1), optionally followed by relu; in and out are contiguous [rows, cols] HBM views (they may be the same). The
 * per-row vectors are fp32 constants [rows, 1]; each row block loads them once as [P, 1] per-partition scalars. */
static void row_affine(compile_ctx *c, tern_view out, tern_view in, tern_view scale, tern_view shift, uint64_t rows,
                       uint64_t cols, int relu)
{
    const uint64_t chunk = 4096, P = c->cfg.partitions;
    for (uint64_t r0 = 0; r0 < rows && cc_ok(c); r0 += P) {
        uint32_t p = (uint32_t)(rows - r0 < P ? rows - r0 : P);
        tern_view st = tern_view_none(), bt = tern_view_none();
        if (scale.region >= 0) {
            st = tern_kernel_sbuf(c->k, TERN_DTYPE_FP32, p, 1, "bn_scale");
            tern_kernel_load(c->k, st, tern_view_block(c->k, scale, r0, r0 + p, 0, 1));
        }
        if (shift.region >= 0) {
            bt = tern_kernel_sbuf(c->k, TERN_DTYPE_FP32, p, 1, "bn_shift");
            tern_kernel_load(c->k, bt, tern_view_block(c->k, shift, r0, r0 + p, 0, 1));
        }
        for (uint64_t c0 = 0; c0 < cols && cc_ok(c); c0 += chunk) {
            uint32_t w = (uint32_t)(cols - c0 < chunk ? cols - c0 : chunk);
            tern_view t = tern_kernel_sbuf(c->k, TERN_DTYPE_FP32, p, w, "affine");
            tern_kernel_load(c->k, t, tern_view_block(c->k, in, r0, r0 + p, c0, c0 + w));
            tern_alu_op op0 = scale.region >= 0 ? TERN_ALU_MULT : TERN_ALU_ADD;
            tern_view s0 = scale.region >= 0 ? st : bt;
            tern_alu_op op1 = scale.region >= 0 && shift.region >= 0 ? TERN_ALU_ADD : TERN_ALU_BYPASS;
            tern_kernel_tensor_scalar_ap(c->k, TERN_ENGINE_AUTO, t, t, op0, s0, 0.0f, op1,
                                         op1 == TERN_ALU_ADD ? bt : tern_view_none(), 0.0f, 0);
            if (relu) /* a fused Relu (fuse.bn_relu): the Relu rule's activation, relu(y * 1 + 0), on the tile */
                tern_kernel_activation(c->k, t, t, TERN_ACT_RELU, 1.0f, tern_view_none(), tern_view_none(),
                                       tern_view_none());
            tern_kernel_store(c->k, tern_view_block(c->k, out, r0, r0 + p, c0, c0 + w), t);
            tern_kernel_release(c->k, t);
        }
        if (st.region >= 0)
            tern_kernel_release(c->k, st);
        if (bt.region >= 0)
            tern_kernel_release(c->k, bt);
    }
}

/* A per-channel vector replicated over the batch as an fp32 [N*C, 1] constant (rows of NCHW are n*C + c). */
static tern_view per_row_const(compile_ctx *c, const double *v, int64_t N, int64_t C)
{
    float *f = malloc(sizeof(float) * (size_t)(N * C));
    if (!f) {
        cc_fail(c, TERN_ERR_NOMEM, "out of memory");
        return tern_view_none();
    }
    for (int64_t n = 0; n < N; n++)
        for (int64_t ch = 0; ch < C; ch++)
            f[n * C + ch] = (float)v[ch];
    tern_view r = const_f32(c, TERN_DTYPE_FP32, (uint64_t)(N * C), 1, f);
    free(f);
    return r;
}

/* ---- padded input tiles ---- */

/* Output rows [oc0, oc0 + on) of a window op read input rows oc0*sh - ph ... : a tile [P, rin, Wp] holds them
 * with the padding materialised (fill value), so every kernel offset is a strided on-chip view of it and the
 * input crosses HBM once, in whole rows (DMA descriptors of W elements, not one per strided element). */
static int64_t tile_rows(const cnn_geom *g, int64_t on) { return (on - 1) * g->sh + (g->kh - 1) * g->dh + 1; }
static int64_t tile_cols(const cnn_geom *g)
{
    int64_t need = (g->Wo - 1) * g->sw + (g->kw - 1) * g->dw + 1;
    return need > g->W + g->pw ? need : g->W + g->pw;
}

#define CNN_TILE_ELEMS 16384 /* padded input tile, per partition (64 KiB in fp32) */
#define CNN_OUT_ELEMS 4096   /* output tile, per partition */

/* Output rows per chunk so that both tiles fit; 0 when even one row does not. */
static int64_t chunk_rows(const cnn_geom *g)
{
    int64_t Wp = tile_cols(g), on = CNN_OUT_ELEMS / g->Wo;
    if (on > g->Ho)
        on = g->Ho;
    while (on > 0 && tile_rows(g, on) * Wp > CNN_TILE_ELEMS)
        on--;
    return on;
}

/* Load the padded input rows for output rows [oc0, oc0 + on) of p planes (plane q at element base + q*pstep of
 * xv, each H x W) into a new fp32 tile [p, rin, Wp]; blank: a plane in the depth padding, all fill (no load). */
static tern_view load_padded(compile_ctx *c, tern_view xv, uint64_t base, int64_t pstep, uint32_t p, const cnn_geom *g,
                             int64_t oc0, int64_t on, float fill, int blank, tern_dtype dt)
{
    int64_t rin = tile_rows(g, on), Wp = tile_cols(g), ih0 = oc0 * g->sh - g->ph;
    uint32_t shape[2] = {(uint32_t)rin, (uint32_t)Wp};
    tern_view t = tern_kernel_tile(c->k, TERN_MEM_SBUF, dt, p, 2, shape, "cnn_in");
    int64_t v0 = ih0 < 0 ? 0 : ih0, v1 = ih0 + rin < g->H ? ih0 + rin : g->H;
    if (v0 > 0 && v0 >= v1)
        v0 = v1;
    if (blank)
        v1 = v0;
    if (blank || ih0 < 0 || ih0 + rin > g->H || g->pw > 0 || Wp > g->W + g->pw)
        tern_kernel_memset(c->k, TERN_ENGINE_AUTO, t, fill);
    if (v1 > v0) {
        tern_view dst = tern_view_slice(c->k, t, 1, (uint64_t)(v0 - ih0), (uint64_t)(v1 - ih0), 1);
        dst = tern_view_slice(c->k, dst, 2, (uint64_t)g->pw, (uint64_t)(g->pw + g->W), 1);
        uint32_t nums[2] = {(uint32_t)(v1 - v0), (uint32_t)g->W};
        int32_t steps[2] = {(int32_t)g->W, 1};
        tern_kernel_load(c->k, dst, hview(xv, base + (uint64_t)(v0 * g->W), p, pstep, 2, nums, steps));
    }
    return t;
}

/* The window of kernel offset (i, j) for the chunk's on x Wo outputs: a strided view of the padded tile. */
static tern_view window_view(compile_ctx *c, tern_view t, const cnn_geom *g, int64_t i, int64_t j, int64_t on)
{
    tern_view v = tern_view_slice(c->k, t, 1, (uint64_t)(i * g->dh), (uint64_t)(i * g->dh + (on - 1) * g->sh + 1),
                                  g->sh);
    return tern_view_slice(c->k, v, 2, (uint64_t)(j * g->dw), (uint64_t)(j * g->dw + (g->Wo - 1) * g->sw + 1), g->sw);
}

/* ---- the window walk (pools, depthwise conv) ---- */

typedef enum { WALK_MAX, WALK_AVG, WALK_DW } walk_mode;

typedef struct {
    walk_mode mode;
    int count_include_pad;     /* AVG */
    const float *dw_weights;   /* DW: [C, kh*kw] */
    const double *dw_bias;     /* DW: [C] or NULL */
    int silu;                  /* DW: then a fused SiLU (fuse.conv_silu): 1 y * sigmoid(y), 2 sigmoid(y) * y */
    int clip;                  /* DW: then a fused Clip (fuse.conv_clip) to [clip_lo, clip_hi] */
    float clip_lo, clip_hi;
} walk_opts;

/* y[r, oh, ow] = combine over kernel offsets (i, j) of x[r, oh*sh + i*dh - ph, ow*sw + j*dw - pw] for the
 * N*C rows r, 128 rows per block and output-row chunks that keep each tile at most 4096 elements: one DMA per
 * offset brings the shifted, strided window into SBUF (positions in the padding keep the fill value: -FLT_MAX
 * for max, 0 otherwise), VectorE combines it into the accumulator. 3-D: per output depth od, the input planes
 * od*sd + a*dd - pd of the kernel depth offsets a in turn (a plane in the depth padding adds nothing: skipped). */
static void window_walk(compile_ctx *c, cc_value *y, cc_value *x, const cnn_geom *g, const walk_opts *wo)
{
    int64_t R = g->N * g->C, HW = g->H * g->W, HoWo = g->Ho * g->Wo, KK = g->kd * g->kh * g->kw;
    int64_t DHW = g->D * HW, OS = g->Do * HoWo; /* per row: input and output elements */
    int64_t ohc = chunk_rows(g);
    if (ohc < 1) {
        cc_fail(c, TERN_ERR_UNSUPPORTED, "input rows of %lld elements with a %lld-row window do not fit SBUF tiles",
                (long long)g->W, (long long)g->kh);
        return;
    }
    float fill = wo->mode == WALK_MAX ? -3.4028234663852886e38f : 0.0f;
    /* Average divisor per output position (compile-time): uniform -> an immediate, else a reciprocal map. */
    float *recip = NULL;
    int uniform = 1;
    float inv0 = 1.0f;
    tern_view recip_map = tern_view_none();
    if (wo->mode == WALK_AVG) {
        recip = malloc(sizeof(float) * (size_t)(OS ? OS : 1));
        if (!recip) {
            cc_fail(c, TERN_ERR_NOMEM, "out of memory");
            return;
        }
        for (int64_t od = 0; od < g->Do; od++)
        for (int64_t oh = 0; oh < g->Ho; oh++)
            for (int64_t ow = 0; ow < g->Wo; ow++) {
                int64_t h0 = oh * g->sh - g->ph, w0 = ow * g->sw - g->pw;
                int64_t lo_h = wo->count_include_pad ? -g->ph : 0, hi_h = wo->count_include_pad ? g->H + g->ph_end : g->H;
                int64_t lo_w = wo->count_include_pad ? -g->pw : 0, hi_w = wo->count_include_pad ? g->W + g->pw_end : g->W;
                int64_t d0 = od * g->sd - g->pd, lo_d = wo->count_include_pad ? -g->pd : 0,
                        hi_d = wo->count_include_pad ? g->D + g->pd_end : g->D, nd = 0;
                for (int64_t a = 0; a < g->kd; a++) {
                    int64_t dpos = d0 + a * g->dd;
                    nd += dpos >= lo_d && dpos < hi_d;
                }
                int64_t nh = 0, nw = 0;
                for (int64_t i = 0; i < g->kh; i++) {
                    int64_t h = h0 + i * g->dh;
                    nh += h >= lo_h && h < hi_h;
                }
                for (int64_t j = 0; j < g->kw; j++) {
                    int64_t w = w0 + j * g->dw;
                    nw += w >= lo_w && w < hi_w;
                }
                float r = nd * nh * nw > 0 ? 1.0f / (float)(nd * nh * nw) : 0.0f;
                recip[od * HoWo + oh * g->Wo + ow] = r;
                if (od == 0 && oh == 0 && ow == 0)
                    inv0 = r;
                else if (r != inv0)
                    uniform = 0;
            }
        if (!uniform)
            recip_map = const_f32(c, TERN_DTYPE_FP32, 1, (uint64_t)OS, recip);
        free(recip);
    }
    tern_view wconst = tern_view_none(), bconst = tern_view_none();
    if (wo->mode == WALK_DW) {
        float *wr = malloc(sizeof(float) * (size_t)(R * KK));
        if (!wr) {
            cc_fail(c, TERN_ERR_NOMEM, "out of memory");
            return;
        }
        for (int64_t r = 0; r < R; r++)
            memcpy(wr + r * KK, wo->dw_weights + (r % g->C) * KK, sizeof(float) * (size_t)KK);
        wconst = const_f32(c, TERN_DTYPE_FP32, (uint64_t)R, (uint64_t)KK, wr);
        free(wr);
        if (wo->dw_bias)
            bconst = per_row_const(c, wo->dw_bias, g->N, g->C);
    }
    tern_view xv = cc_view2d(c, x, 0, 1, x->numel, x->numel), yv = cc_view2d(c, y, 0, 1, y->numel, y->numel);
    const int64_t P = (int64_t)c->cfg.partitions;
    for (int64_t r0 = 0; r0 < R && cc_ok(c); r0 += P) {
        uint32_t p = (uint32_t)(R - r0 < P ? R - r0 : P);
        tern_view wt = tern_view_none(), bt = tern_view_none();
        if (wo->mode == WALK_DW) {
            wt = tern_kernel_sbuf(c->k, TERN_DTYPE_FP32, p, (uint32_t)KK, "dw_w");
            tern_kernel_load(c->k, wt, tern_view_block(c->k, wconst, (uint64_t)r0, (uint64_t)r0 + p, 0, (uint64_t)KK));
            if (bconst.region >= 0) {
                bt = tern_kernel_sbuf(c->k, TERN_DTYPE_FP32, p, 1, "dw_b");
                tern_kernel_load(c->k, bt, tern_view_block(c->k, bconst, (uint64_t)r0, (uint64_t)r0 + p, 0, 1));
            }
        }
        for (int64_t od = 0; od < g->Do && cc_ok(c); od++)
        for (int64_t oc0 = 0; oc0 < g->Ho && cc_ok(c); oc0 += ohc) {
            int64_t on = g->Ho - oc0 < ohc ? g->Ho - oc0 : ohc;
            uint32_t shape[2] = {(uint32_t)on, (uint32_t)g->Wo};
            tern_view acc = tern_kernel_tile(c->k, TERN_MEM_SBUF, TERN_DTYPE_FP32, p, 2, shape, "win_acc");
            tern_view in = tern_view_none();
            int first = 1;
            for (int64_t a = 0; a < g->kd && cc_ok(c); a++) {
                int64_t id = od * g->sd + a * g->dd - g->pd;
                if (id < 0 || id >= g->D)
                    continue;
                if (in.region >= 0)
                    tern_kernel_release(c->k, in);
                in = load_padded(c, xv, (uint64_t)(r0 * DHW + id * HW), DHW, p, g, oc0, on, fill, 0, TERN_DTYPE_FP32);
                for (int64_t i = 0; i < g->kh && cc_ok(c); i++)
                    for (int64_t j = 0; j < g->kw && cc_ok(c); j++) {
                        tern_view t = window_view(c, in, g, i, j, on);
                        if (wo->mode == WALK_DW) {
                            uint64_t wi = (uint64_t)((a * g->kh + i) * g->kw + j);
                            tern_view wk = tern_view_slice(c->k, wt, 1, wi, wi + 1, 1);
                            if (first)
                                tern_kernel_tensor_scalar_ap(c->k, TERN_ENGINE_AUTO, acc, t, TERN_ALU_MULT, wk, 0.0f,
                                                             TERN_ALU_BYPASS, tern_view_none(), 0.0f, 0);
                            else
                                tern_kernel_scalar_tensor_tensor_ap(c->k, acc, t, TERN_ALU_MULT, wk, 0.0f,
                                                                    TERN_ALU_ADD, acc);
                        } else if (first) {
                            tern_kernel_tensor_copy(c->k, TERN_ENGINE_AUTO, acc, t);
                        } else {
                            tern_kernel_tensor_tensor(c->k, TERN_ENGINE_AUTO, acc, acc, t,
                                                      wo->mode == WALK_MAX ? TERN_ALU_MAX : TERN_ALU_ADD);
                        }
                        first = 0;
                    }
            }
            if (first) /* every plane of the window in the depth padding */
                tern_kernel_memset(c->k, TERN_ENGINE_AUTO, acc, fill);
            if (wo->mode == WALK_AVG && uniform) {
                tern_kernel_tensor_scalar(c->k, TERN_ENGINE_AUTO, acc, acc, TERN_ALU_MULT, inv0, TERN_ALU_BYPASS, 0.0f);
            } else if (wo->mode == WALK_AVG) {
                tern_view rm = tern_kernel_tile(c->k, TERN_MEM_SBUF, TERN_DTYPE_FP32, p, 2, shape, "avg_div");
                uint32_t nums[1] = {(uint32_t)(on * g->Wo)};
                int32_t steps[1] = {1};
                tern_kernel_load(c->k, rm, hview(recip_map, (uint64_t)(od * HoWo + oc0 * g->Wo), p, 0, 1, nums, steps));
                tern_kernel_tensor_tensor(c->k, TERN_ENGINE_AUTO, acc, acc, rm, TERN_ALU_MULT);
                tern_kernel_release(c->k, rm);
            } else if (wo->mode == WALK_DW && bt.region >= 0) {
                tern_kernel_tensor_scalar_ap(c->k, TERN_ENGINE_AUTO, acc, acc, TERN_ALU_ADD, bt, 0.0f, TERN_ALU_BYPASS,
                                             tern_view_none(), 0.0f, 0);
            }
            if (wo->mode == WALK_DW && wo->clip) { /* the Clip rule's instructions on y */
                tern_view cl = tern_kernel_tile(c->k, TERN_MEM_SBUF, TERN_DTYPE_FP32, p, 2, shape, "dw_clamp");
                tern_view nn = tern_kernel_tile(c->k, TERN_MEM_SBUF, TERN_DTYPE_FP32, p, 2, shape, "dw_isnan");
                tern_lib_clip_tile(c->k, acc, acc, cl, nn, wo->clip_lo, wo->clip_hi);
                tern_kernel_release(c->k, nn);
                tern_kernel_release(c->k, cl);
            }
            if (wo->mode == WALK_DW && wo->silu) { /* the Sigmoid and the Mul an elementwise pass would run on y */
                tern_view s = tern_kernel_tile(c->k, TERN_MEM_SBUF, TERN_DTYPE_FP32, p, 2, shape, "dw_sigmoid");
                tern_kernel_activation(c->k, s, acc, TERN_ACT_SIGMOID, 1.0f, tern_view_none(), tern_view_none(),
                                       tern_view_none());
                if (wo->silu == 1)
                    tern_kernel_tensor_tensor(c->k, TERN_ENGINE_AUTO, acc, acc, s, TERN_ALU_MULT);
                else
                    tern_kernel_tensor_tensor(c->k, TERN_ENGINE_AUTO, acc, s, acc, TERN_ALU_MULT);
                tern_kernel_release(c->k, s);
            }
            uint32_t nums[1] = {(uint32_t)(on * g->Wo)};
            int32_t steps[1] = {1};
            tern_kernel_store(c->k, hview(yv, (uint64_t)(r0 * OS + od * HoWo + oc0 * g->Wo), p, OS, 1, nums, steps),
                              acc);
            if (in.region >= 0)
                tern_kernel_release(c->k, in);
            tern_kernel_release(c->k, acc);
        }
        if (wt.region >= 0)
            tern_kernel_release(c->k, wt);
        if (bt.region >= 0)
            tern_kernel_release(c->k, bt);
    }
}

/* ---- Conv ---- */

/* Host copy of a constant as doubles (NULL when v is absent). */
static double *host_doubles(compile_ctx *c, const cc_value *v, size_t want)
{
    if (!v)
        return NULL;
    if (!v->host || v->host->count != want) {
        cc_fail(c, TERN_ERR_UNSUPPORTED, "a non-constant or mis-sized parameter (%zu elements expected)", want);
        return NULL;
    }
    double *d = malloc(sizeof(double) * (want ? want : 1));
    if (!d) {
        cc_fail(c, TERN_ERR_NOMEM, "out of memory");
        return NULL;
    }
    for (size_t i = 0; i < want; i++)
        d[i] = tern_host_tensor_get(v->host, i);
    return d;
}

/* Fill the im2col matrix col[Cg*KK, N*OS] of group grp (conv_gemm_group); 0 when the rows do not fit SBUF tiles. */
static int im2col_fill(compile_ctx *c, tern_view col, cc_value *x, const cnn_geom *g, int64_t grp, int64_t Cg)
{
    tern_dtype mdt = c->o->matmul_dtype;
    int64_t KHW = g->kh * g->kw, KK = g->kd * KHW, HoWo = g->Ho * g->Wo, OS = g->Do * HoWo, NP = g->N * OS,
            HW = g->H * g->W, DHW = g->D * HW;
    /* Per image, block of up to 128 channels and chunk of output rows: the padded input rows come on chip once,
     * each kernel offset's strided window is copied (cast to the matmul dtype) into a contiguous tile, alternating
     * VectorE and ScalarE, and stored as a [channels, rows x Wo] block of the im2col rows ci*kh*kw + i*kw + j. */
    int64_t ohc = chunk_rows(g);
    if (ohc < 1) {
        cc_fail(c, TERN_ERR_UNSUPPORTED, "input rows of %lld elements with a %lld-row kernel do not fit SBUF tiles",
                (long long)g->W, (long long)g->kh);
        return 0;
    }
    tern_view xv = cc_view2d(c, x, 0, 1, x->numel, x->numel);
    unsigned flip = 0;
    for (int64_t n = 0; n < g->N && cc_ok(c); n++)
        for (int64_t cb = 0; cb < Cg && cc_ok(c); cb += (int64_t)c->cfg.partitions) {
            uint32_t p = (uint32_t)(Cg - cb < (int64_t)c->cfg.partitions ? Cg - cb : (int64_t)c->cfg.partitions);
            for (int64_t od = 0; od < g->Do && cc_ok(c); od++)
            for (int64_t oc0 = 0; oc0 < g->Ho && cc_ok(c); oc0 += ohc)
            for (int64_t a = 0; a < g->kd && cc_ok(c); a++) {
                int64_t on = g->Ho - oc0 < ohc ? g->Ho - oc0 : ohc, id = od * g->sd + a * g->dd - g->pd;
                int blank = id < 0 || id >= g->D;
                /* an input stored in the matmul dtype (narrow) stays in it: the windows are copies, not casts */
                tern_view in = load_padded(c, xv, (uint64_t)((n * g->C + grp * Cg + cb) * DHW + (blank ? 0 : id) * HW),
                                           DHW, p, g, oc0, on, 0.0f, blank, x->dt == mdt ? mdt : TERN_DTYPE_FP32);
                uint32_t shape[2] = {(uint32_t)on, (uint32_t)g->Wo};
                tern_view ct[2];
                ct[0] = tern_kernel_tile(c->k, TERN_MEM_SBUF, mdt, p, 2, shape, "im2col_a");
                ct[1] = tern_kernel_tile(c->k, TERN_MEM_SBUF, mdt, p, 2, shape, "im2col_b");
                for (int64_t i = 0; i < g->kh && cc_ok(c); i++)
                    for (int64_t j = 0; j < g->kw && cc_ok(c); j++) {
                        tern_view t = ct[flip & 1], win = window_view(c, in, g, i, j, on);
                        if (flip++ & 1)
                            tern_kernel_activation(c->k, t, win, TERN_ACT_COPY, 1.0f, tern_view_none(),
                                                   tern_view_none(), tern_view_none());
                        else
                            tern_kernel_tensor_copy(c->k, TERN_ENGINE_VECTOR, t, win);
                        uint32_t nums[1] = {(uint32_t)(on * g->Wo)};
                        int32_t steps[1] = {1};
                        tern_kernel_store(c->k,
                                          hview(col,
                                                (uint64_t)((cb * KK + a * KHW + i * g->kw + j) * NP + n * OS +
                                                           od * HoWo + oc0 * g->Wo),
                                                p, KK * NP, 1, nums, steps),
                                          t);
                    }
                tern_kernel_release(c->k, ct[1]);
                tern_kernel_release(c->k, ct[0]);
                tern_kernel_release(c->k, in);
            }
        }
    return 1;
}

/* im2col + GEMM for one group: col[Kg = Cg*kh*kw, N*Ho*Wo] (matmul dtype; row ci*kh*kw + i*kw + j holds input
 * channel ci shifted by kernel offset (i, j)), then per image out[Coutg, Ho*Wo] = (W_g^T)^T @ col_n. 3-D:
 * col[Cg*kd*kh*kw, N*Do*Ho*Wo], row (ci*kd + a)*kh*kw + i*kw + j, filled per output depth od from the input plane
 * od*sd + a*dd - pd (a plane in the depth padding: zeros). */
static void conv_gemm_group(compile_ctx *c, cc_value *y, cc_value *x, const cnn_geom *g, int64_t grp, int64_t Cg,
                            int64_t Coutg, int64_t Cout, cc_value *w, tern_view bias, int relu, cc_value *res,
                            int res_first, int silu, int clip, float clip_lo, float clip_hi)
{
    tern_dtype mdt = c->o->matmul_dtype;
    int64_t KHW = g->kh * g->kw, KK = g->kd * KHW, Kg = Cg * KK, HoWo = g->Ho * g->Wo, OS = g->Do * HoWo,
            NP = g->N * OS, HW = g->H * g->W, DHW = g->D * HW;
    /* W_g^T [Kg, Coutg]: the stationary operand (lhsT) of the GEMM. Constant weights are transposed on the host;
     * run-time ones (a weight that is a model input) on chip, cast to the matmul dtype on the way. */
    tern_view lhsT;
    int lhsT_temp = !w->host;
    if (lhsT_temp) {
        lhsT = cc_temp(c, mdt, (uint64_t)Kg, (uint64_t)Coutg);
        tern_lib_transpose(c->k, lhsT,
                           cc_view2d(c, w, (uint64_t)(grp * Coutg * Kg), (uint64_t)Coutg, (uint64_t)Kg, (uint64_t)Kg));
    } else {
        float *wt = malloc(sizeof(float) * (size_t)(Kg * Coutg));
        if (!wt) {
            cc_fail(c, TERN_ERR_NOMEM, "out of memory");
            return;
        }
        for (int64_t co = 0; co < Coutg; co++)
            for (int64_t k = 0; k < Kg; k++)
                wt[k * Coutg + co] = (float)tern_host_tensor_get(w->host, (size_t)((grp * Coutg + co) * Kg + k));
        lhsT = const_f32(c, mdt, (uint64_t)Kg, (uint64_t)Coutg, wt);
        free(wt);
    }
    /* A pointwise convolution (1 x 1 x 1 kernel, unit strides, no padding) multiplies the input itself: the im2col
     * matrix would be x cast to the matmul dtype, row for row, so the GEMM reads x's [Cg, Ho*Wo] rows per image and
     * its DMA casts them (RNE, as the im2col copies round) into the rhs tiles: the same operands, the same
     * products in the same order, without the copy through HBM. */
    int pointwise = KK == 1 && g->sh == 1 && g->sw == 1 && g->sd == 1 && !g->ph && !g->pw && !g->pd && !g->ph_end &&
                    !g->pw_end && !g->pd_end && g->Ho == g->H && g->Wo == g->W && g->Do == g->D;
    tern_view col = tern_view_none();
    if (!pointwise) {
        col = cc_temp(c, mdt, (uint64_t)Kg, (uint64_t)NP);
        if (!cc_ok(c))
            return;
        if (!im2col_fill(c, col, x, g, grp, Cg)) {
            tern_kernel_release(c->k, col);
            return;
        }
    }
    tern_gemm_opts go;
    tern_gemm_opts_default(&go);
    go.acc_dtype = TERN_DTYPE_FP32;
    go.tiles_in_block_m = 8; /* fp32 SBUF accumulators: smaller blocks than the tutorial's bf16 ones */
    go.rhs_dtype = (int)mdt; /* the pointwise case's cast; im2col rows already are */
    if (bias.region >= 0) /* added as the output tiles leave the accumulators: no pass over y of its own */
        go.row_bias = tern_view_block(c->k, bias, (uint64_t)(grp * Coutg), (uint64_t)((grp + 1) * Coutg), 0, 1);
    go.relu = relu;               /* a fused Relu (fuse.conv_relu) */
    go.residual_first = res_first; /* a fused residual Add (fuse.conv_add): its other operand, per image below */
    go.silu = silu;               /* a fused SiLU, Sigmoid and Mul (fuse.conv_silu) */
    go.clip = clip;               /* a fused Clip (fuse.conv_clip) */
    go.clip_lo = clip_lo;
    go.clip_hi = clip_hi;
    for (int64_t n = 0; n < g->N && cc_ok(c); n++) {
        tern_view out = cc_view2d(c, y, (uint64_t)((n * Cout + grp * Coutg) * OS), (uint64_t)Coutg, (uint64_t)OS,
                                  (uint64_t)OS);
        if (res)
            go.residual = cc_view2d(c, res, (uint64_t)((n * Cout + grp * Coutg) * OS), (uint64_t)Coutg, (uint64_t)OS,
                                    (uint64_t)OS);
        tern_view rhs = pointwise ? cc_view2d(c, x, (uint64_t)((n * g->C + grp * Cg) * DHW), (uint64_t)Cg,
                                              (uint64_t)OS, (uint64_t)DHW)
                                  : tern_view_block(c->k, col, 0, (uint64_t)Kg, (uint64_t)(n * OS),
                                                    (uint64_t)((n + 1) * OS));
        tern_lib_gemm(c->k, out, lhsT, rhs, &go);
    }
    if (!pointwise)
        tern_kernel_release(c->k, col);
    if (lhsT_temp)
        tern_kernel_release(c->k, lhsT);
    c->model_flops += 2.0 * (double)Coutg * (double)Kg * (double)NP;
}

/* ---- a convolution's epilogue (fuse.conv_relu, fuse.conv_add) ----
 * After a Conv that takes the GEMM path (not depthwise) and whose output nothing else reads (nor is it a graph
 * output): a Relu, or a residual Add of a tensor of the Conv's shape that is ready before the Conv (its other
 * operand: a ResNet block's shortcut), optionally followed by a Relu that alone reads the Add. The Conv's GEMMs
 * write the last node's output, its fp32 tiles leaving PSUM or the accumulators through the nodes' instructions:
 *   - Relu alone: one ScalarE activation relu(sum * 1 + bias) instead of the bias add (tern_gemm_opts.relu). Node
 *     by node the Conv stores the fp32 sum + bias and the Relu's rule (unary.act) computes relu(y * 1 + 0) from it;
 *     y * 1 is y, y + 0 is y except that -0 becomes +0, which Relu maps to +0 either way; a NaN stays that NaN;
 *   - Add [+ Relu]: the bias add as before, then VectorE's fp32 add of the loaded shortcut tile in the Add's operand
 *     order (tern_gemm_opts.residual), then Relu's activation relu(z * 1 + 0): the instructions binary.alu and
 *     unary.act (or their elementwise group) would run on the stored values.
 * The same bits, without the Conv's store, the other nodes' loads and their passes over the tensor. Off with
 * tern_compile_opts.no_elementwise_fusion (`--no-fuse-elementwise`). */
static int conv_gemm_path(const tern_graph *g, const tern_graph_node *n)
{
    if (n->n_inputs < 2 || n->inputs[1] < 0 || n->inputs[0] < 0 || n->n_outputs != 1 || n->outputs[0] < 0)
        return 0;
    const tern_graph_value *x = tern_graph_value_at(g, n->inputs[0]), *w = tern_graph_value_at(g, n->inputs[1]);
    if (w->rank < 3 || w->rank != x->rank)
        return 0;
    int64_t group = tern_graph_attr_int(n, "group", 1), Cout = w->dims[0], Cg = w->dims[1];
    return !(group > 1 && Cg == 1 && Cout == group); /* depthwise: a window walk on VectorE */
}

/* The only reader of value v (-1: none, several, or v is a graph output or not fp32). */
static int sole_reader(const tern_graph *g, const int *readers, const int *reader, int v)
{
    const tern_graph_value *gv = tern_graph_value_at(g, v);
    if (readers[v] != 1 || (gv->flags & TERN_VALUE_OUTPUT) || gv->type != TERN_ELEM_FLOAT)
        return -1;
    return reader[v];
}

/* A Conv node of the GEMM path whose output (fp32) only node r reads, and that no epilogue has yet; else -1. */
/* A depthwise Conv that lower_conv runs as a window walk: constant weights (a run-time one takes the GEMMs). */
static int depthwise_walk(const tern_graph *g, const tern_graph_node *n)
{
    return n->n_inputs >= 2 && n->inputs[1] >= 0 && !conv_gemm_path(g, n) &&
           tern_graph_value_at(g, n->inputs[1])->constant != NULL;
}

/* The Conv that makes value v, when its epilogue is still free: one that takes the GEMM path, or (walk_ok) a
 * depthwise one run as a window walk; else -1. */
static int conv_source(compile_ctx *c, int v, int walk_ok)
{
    const tern_graph *g = c->g;
    int p = tern_graph_value_at(g, v)->producer;
    if (p < 0)
        return -1;
    const tern_graph_node *n = tern_graph_node_at(g, p);
    if (n->op_id != TERN_GOP_CONV || n->domain[0] || c->conv_epi[p] >= 0 ||
        !(conv_gemm_path(g, n) || (walk_ok && depthwise_walk(g, n))))
        return -1;
    return p;
}

/* The GEMM-path Conv whose output v only node r reads; else -1. */
static int conv_before(compile_ctx *c, const int *readers, const int *reader, int v, int r)
{
    return sole_reader(c->g, readers, reader, v) == r ? conv_source(c, v, 0) : -1;
}

static int is_plain(const tern_graph_node *n, tern_op_id op, int ins)
{
    return n->op_id == (int)op && !n->domain[0] && n->n_inputs == ins && n->n_outputs == 1 && n->outputs[0] >= 0;
}

/* A Relu that alone reads value v (fp32 out), not yet taken; else -1. */
static int relu_after(compile_ctx *c, const int *readers, const int *reader, int v)
{
    int r = sole_reader(c->g, readers, reader, v);
    if (r < 0 || c->conv_epi[r] >= 0 || cc_msum_member(c, r))
        return -1;
    const tern_graph_node *n = tern_graph_node_at(c->g, r);
    if (!is_plain(n, TERN_GOP_RELU, 1) || tern_graph_value_at(c->g, n->outputs[0])->type != TERN_ELEM_FLOAT)
        return -1;
    return r;
}

static int same_shape(const tern_graph_value *a, const tern_graph_value *b)
{
    return cc_dims_equal(a->rank, a->dims, b->rank, b->dims);
}

void cc_conv_epi_plan(compile_ctx *c)
{
    const tern_graph *g = c->g;
    int nn = tern_graph_node_count(g), nv = tern_graph_value_count(g);
    c->conv_relus = c->conv_adds = c->conv_silus = c->conv_clips = c->bn_relus = 0;
    if (c->o->no_elementwise_fusion || nn <= 0)
        return;
    int *readers = calloc((size_t)nv + 1, sizeof *readers), *reader = malloc(((size_t)nv + 1) * sizeof *reader);
    c->conv_epi = malloc((size_t)nn * sizeof *c->conv_epi);
    if (!readers || !reader || !c->conv_epi) {
        free(readers);
        free(reader);
        free(c->conv_epi);
        c->conv_epi = NULL; /* no fusion: every node lowered on its own */
        return;
    }
    for (int i = 0; i < nn; i++) {
        c->conv_epi[i] = -1;
        const tern_graph_node *n = tern_graph_node_at(g, i);
        for (int k = 0; k < n->n_inputs; k++)
            if (n->inputs[k] >= 0) {
                readers[n->inputs[k]]++;
                reader[n->inputs[k]] = i;
            }
    }
    /* residual Adds first: the Conv whose output is one operand, the other operand ready before that Conv (of the
     * two Convs an Add may have, the later) */
    for (int a = 0; a < nn; a++) {
        const tern_graph_node *n = tern_graph_node_at(g, a);
        if (!is_plain(n, TERN_GOP_ADD, 2) || n->inputs[0] < 0 || n->inputs[1] < 0 || n->inputs[0] == n->inputs[1] ||
            cc_msum_member(c, a) || tern_graph_value_at(g, n->outputs[0])->type != TERN_ELEM_FLOAT)
            continue;
        int best = -1;
        for (int side = 0; side < 2; side++) {
            int v = n->inputs[side], o = n->inputs[1 - side], conv = conv_before(c, readers, reader, v, a);
            const tern_graph_value *ov = tern_graph_value_at(g, o);
            if (conv < 0 || ov->type != TERN_ELEM_FLOAT || !same_shape(ov, tern_graph_value_at(g, v)) ||
                !same_shape(ov, tern_graph_value_at(g, n->outputs[0])) || ov->producer >= conv)
                continue;
            if (best < 0 || conv > best)
                best = conv;
        }
        if (best < 0)
            continue;
        int r = relu_after(c, readers, reader, n->outputs[0]);
        c->conv_epi[best] = r >= 0 ? r : a;
        c->conv_epi[a] = best;
        c->conv_adds++;
        if (r >= 0) {
            c->conv_epi[r] = best;
            c->conv_relus++;
        }
    }
    /* SiLU as Sigmoid and Mul: y = Conv(...) read only by s = Sigmoid(y) and Mul(y, s) (either order), s read only
     * by the Mul */
    for (int m = 0; m < nn; m++) {
        const tern_graph_node *n = tern_graph_node_at(g, m);
        if (!is_plain(n, TERN_GOP_MUL, 2) || n->inputs[0] < 0 || n->inputs[1] < 0 || n->inputs[0] == n->inputs[1] ||
            c->conv_epi[m] >= 0 || cc_msum_member(c, m) || tern_graph_value_at(g, n->outputs[0])->type != TERN_ELEM_FLOAT)
            continue;
        for (int side = 0; side < 2; side++) {
            int y = n->inputs[side], sv = n->inputs[1 - side], sn = tern_graph_value_at(g, sv)->producer;
            if (sn < 0 || c->conv_epi[sn] >= 0 || cc_msum_member(c, sn) ||
                !is_plain(tern_graph_node_at(g, sn), TERN_GOP_SIGMOID, 1) ||
                tern_graph_node_at(g, sn)->inputs[0] != y || sole_reader(g, readers, reader, sv) != m ||
                readers[y] != 2 || (tern_graph_value_at(g, y)->flags & TERN_VALUE_OUTPUT) ||
                tern_graph_value_at(g, y)->type != TERN_ELEM_FLOAT ||
                !same_shape(tern_graph_value_at(g, y), tern_graph_value_at(g, n->outputs[0])))
                continue;
            int conv = conv_source(c, y, 1);
            if (conv < 0)
                continue;
            c->conv_epi[conv] = m;
            c->conv_epi[sn] = conv;
            c->conv_epi[m] = conv;
            c->conv_silus++;
            break;
        }
    }
    /* a Clip with compile-time bounds (ReLU6) that alone reads a Conv's output */
    for (int r = 0; r < nn; r++) {
        const tern_graph_node *n = tern_graph_node_at(g, r);
        if (n->op_id != TERN_GOP_CLIP || n->domain[0] || n->n_inputs < 1 || n->n_inputs > 3 || n->n_outputs != 1 ||
            n->outputs[0] < 0 || n->inputs[0] < 0 || c->conv_epi[r] >= 0 || cc_msum_member(c, r) ||
            tern_graph_value_at(g, n->outputs[0])->type != TERN_ELEM_FLOAT)
            continue;
        int bounds = 1;
        for (int k = 1; k < n->n_inputs; k++) {
            const tern_graph_value *bv = n->inputs[k] >= 0 ? tern_graph_value_at(g, n->inputs[k]) : NULL;
            bounds &= !bv || (bv->constant && bv->constant->count == 1);
        }
        int y = n->inputs[0], conv = bounds && sole_reader(g, readers, reader, y) == r ? conv_source(c, y, 1) : -1;
        if (conv < 0)
            continue;
        c->conv_epi[conv] = r;
        c->conv_epi[r] = conv;
        c->conv_clips++;
    }
    /* a Relu that alone reads a BatchNormalization's output (DenseNet's pre-activation): the BN's pass applies it */
    for (int b = 0; b < nn; b++) {
        const tern_graph_node *n = tern_graph_node_at(g, b);
        if (n->op_id != TERN_GOP_BATCH_NORMALIZATION || n->domain[0] || n->n_outputs < 1 || n->outputs[0] < 0 ||
            c->conv_epi[b] >= 0 || tern_graph_attr_int(n, "training_mode", 0))
            continue;
        int r = relu_after(c, readers, reader, n->outputs[0]);
        if (r < 0)
            continue;
        c->conv_epi[b] = r;
        c->conv_epi[r] = b;
        c->bn_relus++;
    }
    for (int r = 0; r < nn; r++) {
        const tern_graph_node *n = tern_graph_node_at(g, r);
        if (!is_plain(n, TERN_GOP_RELU, 1) || n->inputs[0] < 0 || c->conv_epi[r] >= 0 || cc_msum_member(c, r) ||
            tern_graph_value_at(g, n->outputs[0])->type != TERN_ELEM_FLOAT)
            continue;
        int conv = conv_before(c, readers, reader, n->inputs[0], r);
        if (conv < 0)
            continue;
        c->conv_epi[conv] = r;
        c->conv_epi[r] = conv;
        c->conv_relus++;
    }
    free(readers);
    free(reader);
}

int cc_conv_epi_member(const compile_ctx *c, int i)
{
    if (!c->conv_epi || i < 0 || i >= tern_graph_node_count(c->g) || c->conv_epi[i] < 0)
        return 0;
    int op = tern_graph_node_at(c->g, i)->op_id;
    return op != TERN_GOP_CONV && op != TERN_GOP_BATCH_NORMALIZATION;
}

int cc_conv_epi_node(compile_ctx *c, int i, const char **rule)
{
    if (!cc_conv_epi_member(c, i))
        return 0;
    int op = tern_graph_node_at(c->g, i)->op_id;
    if (tern_graph_node_at(c->g, c->conv_epi[i])->op_id == TERN_GOP_BATCH_NORMALIZATION) {
        *rule = "fuse.bn_relu";
        return 1;
    }
    *rule = op == TERN_GOP_ADD    ? "fuse.conv_add"
            : op == TERN_GOP_RELU ? "fuse.conv_relu"
            : op == TERN_GOP_CLIP ? "fuse.conv_clip"
                                  : "fuse.conv_silu";
    return 1;
}

/* The epilogue of Conv node i: the node whose output its GEMMs write (-1: none); whether a Relu ends it; its
 * residual Add node (-1: none), and that Add's other operand with its place in the Add. */
typedef struct {
    int relu, add, res, res_first;
    int silu; /* tern_gemm_opts.silu: 1 Mul(y, Sigmoid(y)), 2 Mul(Sigmoid(y), y); 0 none */
    int clip; /* a Clip (its bounds: the node's, read when the Conv is lowered) */
} conv_epi;

static int conv_epilogue(compile_ctx *c, int i, conv_epi *e)
{
    e->relu = e->silu = e->clip = 0;
    e->add = e->res = -1;
    e->res_first = 0;
    if (!c->conv_epi || c->conv_epi[i] < 0)
        return -1;
    const tern_graph *g = c->g;
    int last = c->conv_epi[i], y = tern_graph_node_at(g, i)->outputs[0];
    if (tern_graph_node_at(g, last)->op_id == TERN_GOP_CLIP) {
        e->clip = 1;
        return last;
    }
    if (tern_graph_node_at(g, last)->op_id == TERN_GOP_MUL) {
        e->silu = tern_graph_node_at(g, last)->inputs[0] == y ? 1 : 2;
        return last;
    }
    e->add = last;
    if (tern_graph_node_at(g, last)->op_id == TERN_GOP_RELU) {
        e->relu = 1;
        int p = tern_graph_value_at(g, tern_graph_node_at(g, last)->inputs[0])->producer;
        e->add = p != i ? p : -1;
    }
    if (e->add >= 0) {
        const tern_graph_node *a = tern_graph_node_at(g, e->add);
        e->res_first = a->inputs[0] != y;
        e->res = a->inputs[e->res_first ? 0 : 1];
    }
    return last;
}

void cc_conv_epi_settle(compile_ctx *c)
{
    const tern_graph *g = c->g;
    int nn = tern_graph_node_count(g);
    for (int i = 0; c->conv_epi && i < nn; i++) {
        conv_epi e;
        int last;
        if (tern_graph_node_at(g, i)->op_id != TERN_GOP_CONV || (last = conv_epilogue(c, i, &e)) < 0 || e.res < 0)
            continue;
        int p = tern_graph_value_at(g, e.res)->producer;
        if (p < 0 || (cc_fuse_emitted_at(c, p) <= i && !cc_msum_member(c, p)))
            continue;
        if (e.relu) {
            c->conv_epi[last] = -1;
            c->conv_relus--;
        }
        c->conv_epi[e.add] = -1;
        c->conv_adds--;
        c->conv_epi[i] = -1;
    }
}

void cc_conv_narrow(compile_ctx *c)
{
    const tern_graph *g = c->g;
    int nn = tern_graph_node_count(g), nv = tern_graph_value_count(g);
    if (c->o->matmul_dtype != TERN_DTYPE_BF16 || c->o->no_elementwise_fusion || nn <= 0)
        return;
    /* per value: 1 when every reader is a GEMM-path Conv reading it as its input, -1 when some reader is not */
    signed char *conv_read = calloc((size_t)nv + 1, 1);
    if (!conv_read)
        return; /* an optimisation only */
    for (int r = 0; r < nn; r++) {
        const tern_graph_node *m = tern_graph_node_at(g, r);
        int conv = m->op_id == TERN_GOP_CONV && !m->domain[0] && conv_gemm_path(g, m);
        for (int k = 0; k < m->n_inputs; k++)
            if (m->inputs[k] >= 0 && conv_read[m->inputs[k]] >= 0)
                conv_read[m->inputs[k]] = (signed char)(conv && k == 0 ? 1 : -1);
    }
    for (int i = 0; i < nn; i++) {
        const tern_graph_node *n = tern_graph_node_at(g, i);
        conv_epi e;
        if (n->op_id != TERN_GOP_CONV || n->domain[0] || !conv_gemm_path(g, n))
            continue;
        int last = conv_epilogue(c, i, &e);
        if (e.res >= 0 || e.silu || e.clip) /* the residual add, the SiLU and the Clip run on the fp32 output tile */
            continue;
        int v = tern_graph_node_at(g, last >= 0 ? last : i)->outputs[0];
        const tern_graph_value *gv = tern_graph_value_at(g, v);
        if (gv->type == TERN_ELEM_FLOAT && !(gv->flags & TERN_VALUE_OUTPUT) && !c->v[v].out_as && conv_read[v] == 1)
            c->v[v].narrow = 1;
    }
    free(conv_read);
}

static int lower_conv(compile_ctx *c)
{
    const tern_graph_node *n = cc_node(c);
    cc_value *x = cc_in(c, 0), *w = cc_in(c, 1), *b = cc_in(c, 2);
    /* with a fused epilogue, the GEMMs write its last node's output (placed as that node's) and the Conv's own is
     * never made */
    conv_epi e;
    int last = conv_epilogue(c, c->node, &e), self = c->node;
    if (last >= 0)
        c->node = last;
    float clip_lo = -INFINITY, clip_hi = INFINITY; /* the fused Clip's bounds, read as its rule reads them */
    if (e.clip) {
        float v;
        int have;
        if (!tile_const_scalar_in(c, 1, "min", &v, &have))
            return 1;
        if (have)
            clip_lo = v;
        if (!tile_const_scalar_in(c, 2, "max", &v, &have))
            return 1;
        if (have)
            clip_hi = v;
    }
    /* stored in the matmul dtype when only convolutions read it (cc_conv_narrow) */
    int yid = cc_out_id(c, 0);
    cc_value *y = cc_out(c, 0, yid >= 0 && c->v[yid].narrow ? c->o->matmul_dtype : TERN_DTYPE_FP32);
    c->node = self;
    cc_value *res = e.res >= 0 && c->v[e.res].placed ? &c->v[e.res] : NULL;
    if (e.res >= 0 && !res) {
        cc_fail(c, TERN_ERR_INVALID, "the residual operand of the fused Add has no device placement");
        return 1;
    }
    if (!x || !w || !y)
        return 1;
    if (w->rank != x->rank) {
        cc_fail(c, TERN_ERR_INVALID, "weight rank %d for input rank %d", w->rank, x->rank);
        return 1;
    }
    int64_t kern[3] = {w->dims[2], w->rank >= 4 ? w->dims[3] : 0, w->rank == 5 ? w->dims[4] : 0};
    cnn_geom g;
    if (!geom_of(c, &g, x, y, kern))
        return 1;
    int64_t group = tern_graph_attr_int(n, "group", 1), Cout = w->dims[0], Cg = w->dims[1];
    if (group < 1 || Cg * group != g.C || Cout % group) {
        cc_fail(c, TERN_ERR_INVALID, "group %lld with %lld input channels and weight [%lld, %lld, ...]",
                (long long)group, (long long)g.C, (long long)Cout, (long long)Cg);
        return 1;
    }
    double *bias = host_doubles(c, b, (size_t)Cout);
    if (b && !bias)
        return 1;
    if (group > 1 && Cg == 1 && Cout == group && w->host) {
        /* depthwise: a window walk on VectorE with per-channel weights as per-partition scalars (constant weights;
         * a run-time weight, as training has, takes the per-group GEMMs below) */
        int64_t KK = g.kd * g.kh * g.kw;
        float *wf = malloc(sizeof(float) * (size_t)(Cout * KK));
        if (!wf) {
            free(bias);
            cc_fail(c, TERN_ERR_NOMEM, "out of memory");
            return 1;
        }
        for (int64_t i = 0; i < Cout * KK; i++)
            wf[i] = (float)tern_host_tensor_get(w->host, (size_t)i);
        walk_opts wo = {WALK_DW, 0, wf, bias, e.silu, e.clip, clip_lo, clip_hi};
        window_walk(c, y, x, &g, &wo);
        c->model_flops += 2.0 * (double)y->numel * (double)KK;
        free(wf);
        free(bias);
        return 1;
    }
    /* The bias is added by the GEMMs as their fp32 outputs leave the accumulators: the same fp32 add, once, that a
     * pass over y would make (tern_gemm_opts.row_bias). */
    tern_view bv = bias ? per_row_const(c, bias, 1, Cout) : tern_view_none();
    for (int64_t grp = 0; grp < group && cc_ok(c); grp++)
        conv_gemm_group(c, y, x, &g, grp, Cg, Cout / group, Cout, w, bv, e.relu, res, e.res_first, e.silu, e.clip,
                        clip_lo, clip_hi);
    free(bias);
    return 1;
}

/* ---- pools ---- */

static int lower_pool(compile_ctx *c)
{
    const tern_graph_node *n = cc_node(c);
    cc_value *x = cc_in(c, 0);
    cc_value *y = cc_out(c, 0, TERN_DTYPE_FP32);
    if (!x || !y)
        return 1;
    if (n->n_outputs > 1 && n->outputs[1] >= 0) {
        cc_fail(c, TERN_ERR_UNSUPPORTED, "MaxPool's Indices output");
        return 1;
    }
    const tern_graph_attr *ks = tern_graph_node_attr(n, "kernel_shape");
    if (!ks || ks->n != (size_t)x->rank - 2) {
        cc_fail(c, TERN_ERR_INVALID, "kernel_shape must have %d entries", x->rank - 2);
        return 1;
    }
    int64_t kern[3] = {ks->ints[0], ks->n > 1 ? ks->ints[1] : 0, ks->n > 2 ? ks->ints[2] : 0};
    cnn_geom g;
    if (!geom_of(c, &g, x, y, kern))
        return 1;
    walk_opts wo = {n->op_id == TERN_GOP_MAX_POOL ? WALK_MAX : WALK_AVG,
                    (int)tern_graph_attr_int(n, "count_include_pad", 0), NULL, NULL, 0, 0, 0.0f, 0.0f};
    window_walk(c, y, x, &g, &wo);
    return 1;
}

static int lower_global_pool(compile_ctx *c)
{
    const tern_graph_node *n = cc_node(c);
    cc_value *x = cc_in(c, 0);
    cc_value *y = cc_out(c, 0, TERN_DTYPE_FP32);
    if (!x || !y)
        return 1;
    int is_max = n->op_id == TERN_GOP_GLOBAL_MAX_POOL;
    uint64_t rows = (uint64_t)(x->dims[0] * x->dims[1]), cols = rows ? x->numel / rows : 0;
    const uint64_t chunk = 8192;
    tern_alu_op op = is_max ? TERN_ALU_MAX : TERN_ALU_ADD;
    const uint64_t P = c->cfg.partitions;
    for (uint64_t r0 = 0; r0 < rows && cc_ok(c); r0 += P) {
        uint32_t p = (uint32_t)(rows - r0 < P ? rows - r0 : P);
        tern_view acc = tern_kernel_sbuf(c->k, TERN_DTYPE_FP32, p, 1, "gpool_acc");
        tern_view part = tern_kernel_sbuf(c->k, TERN_DTYPE_FP32, p, 1, "gpool_part");
        for (uint64_t c0 = 0; c0 < cols && cc_ok(c); c0 += chunk) {
            uint32_t wd = (uint32_t)(cols - c0 < chunk ? cols - c0 : chunk);
            tern_view t = tern_kernel_sbuf(c->k, TERN_DTYPE_FP32, p, wd, "gpool_in");
            tern_kernel_load(c->k, t, cc_view2d(c, x, r0 * cols + c0, p, wd, cols));
            tern_kernel_tensor_reduce(c->k, c0 ? part : acc, t, op, 1, 0);
            if (c0)
                tern_kernel_tensor_tensor(c->k, TERN_ENGINE_AUTO, acc, acc, part, op);
            tern_kernel_release(c->k, t);
        }
        if (!is_max)
            tern_kernel_tensor_scalar(c->k, TERN_ENGINE_AUTO, acc, acc, TERN_ALU_MULT, 1.0f / (float)cols,
                                      TERN_ALU_BYPASS, 0.0f);
        tern_kernel_store(c->k, cc_view2d(c, y, r0, p, 1, 1), acc);
        tern_kernel_release(c->k, part);
        tern_kernel_release(c->k, acc);
    }
    return 1;
}

/* ---- BatchNormalization (inference) ---- */

static int lower_batchnorm(compile_ctx *c)
{
    const tern_graph_node *n = cc_node(c);
    cc_value *x = cc_in(c, 0);
    /* with a fused Relu (fuse.bn_relu) the pass writes the Relu's output, and the BN's own is never made */
    int relu = c->conv_epi && c->conv_epi[c->node] >= 0, self = c->node;
    if (relu)
        c->node = c->conv_epi[self];
    cc_value *y = cc_out(c, 0, TERN_DTYPE_FP32);
    c->node = self;
    if (!x || !y)
        return 1;
    if (tern_graph_attr_int(n, "training_mode", 0)) {
        cc_fail(c, TERN_ERR_UNSUPPORTED, "training_mode=1 (inference only)");
        return 1;
    }
    if (x->rank < 2) {
        cc_fail(c, TERN_ERR_INVALID, "input rank %d below 2", x->rank);
        return 1;
    }
    int64_t N = x->dims[0], C = x->dims[1];
    double *p[4] = {NULL, NULL, NULL, NULL};
    for (int k = 0; k < 4; k++) {
        cc_value *v = cc_in(c, k + 1);
        if (!v || !v->host) {
            cc_fail(c, TERN_ERR_UNSUPPORTED, "input %d (scale, B, mean, var) is not a constant", k + 1);
            break;
        }
        if (!(p[k] = host_doubles(c, v, (size_t)C)))
            break;
    }
    if (cc_ok(c)) {
        /* y = (x - mean) / sqrt(var + eps) * gamma + beta = x * s + (beta - mean * s), folded in double */
        double eps = tern_graph_attr_float(n, "epsilon", 1e-5f);
        for (int64_t ch = 0; ch < C; ch++) {
            double s = p[0][ch] / sqrt(p[3][ch] + eps);
            p[1][ch] = p[1][ch] - p[2][ch] * s;
            p[0][ch] = s;
        }
        uint64_t rows = (uint64_t)(N * C), cols = rows ? x->numel / rows : 0;
        row_affine(c, cc_view2d(c, y, 0, rows, cols, cols), cc_view2d(c, x, 0, rows, cols, cols),
                   per_row_const(c, p[0], N, C), per_row_const(c, p[1], N, C), rows, cols, relu);
    }
    for (int k = 0; k < 4; k++)
        free(p[k]);
    return 1;
}

static const cc_rule cnn_rules[] = {
    {TERN_GOP_CONV, "conv", NULL, lower_conv},
    {TERN_GOP_MAX_POOL, "pool.window", NULL, lower_pool},
    {TERN_GOP_AVERAGE_POOL, "pool.window", NULL, lower_pool},
    {TERN_GOP_GLOBAL_AVERAGE_POOL, "pool.global", NULL, lower_global_pool},
    {TERN_GOP_GLOBAL_MAX_POOL, "pool.global", NULL, lower_global_pool},
    {TERN_GOP_BATCH_NORMALIZATION, "batchnorm.fold", NULL, lower_batchnorm},
};
const cc_rule_set cc_rules_cnn = CC_RULE_SET("lower_cnn.c", cnn_rules);
