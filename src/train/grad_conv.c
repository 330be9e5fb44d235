/* Gradients of the convolution and pooling ops, built from convolutions and layout ops the compiler already
 * lowers (no scatter). Conv (1-D, 2-D and 3-D, any strides, dilations, groups, depthwise included, explicit pads or
 * auto_pad): dX is the convolution of dY spread stride apart with the kernel flipped spatially (a Gather of
 * reversed indices per axis) and its channel axes swapped within each group, the forward's dilations, under pads
 * dilation*(k-1) - pad (plus the rows a stride left unread at the end; a negative amount crops with a Slice); dW
 * is the convolution of X with dY taken as the kernel, batch and per-group channel axes swapped on both (the batch
 * becomes the contraction), strides the forward's dilations and dilations its strides, cropped to the kernel.
 * Pooling with windows that tile the input (kernel = strides, no pads): the output gradient is repeated over each
 * window (Reshape, Expand, Reshape), AveragePool divides it by the window size; MaxPool gives it to the first
 * maximum of each window, as PyTorch does. Any other pooling (pads, overlapping strides, dilations, ceil_mode,
 * count_include_pad), and 3-D pooling, goes one kernel offset at a time (pool_general). GlobalAveragePool spreads it evenly. Anything
 * else (over 3 spatial axes, a kernel over 64 along an axis, a pooling window over 256 elements) stops the pass
 * naming the node and the attribute. Pooling is 1-D, 2-D or 3-D alike. */
#include "ad_internal.h"

#include <stdlib.h>
#include <string.h>

static int attr_all(const tern_graph_node *n, const char *name, int64_t want, int count)
{
    size_t k = 0;
    const int64_t *v = graph_attr_ints(n, name, &k);
    if (!v)
        return 1;
    for (size_t i = 0; i < k; i++)
        if (v[i] != want)
            return 0;
    return (int)k == count || k == 0;
}

/* Slice of the spatial axes 2.. of x: on axis 2 + d, len[d] elements from st[d], step[d] apart (NULL: 1). */
static int slice_sp(ad_ctx *a, int x, int nsp, const int64_t *st, const int64_t *len, const int64_t *step)
{
    int64_t b[3], e[3], ax[3], sp[3];
    for (int d = 0; d < nsp; d++) {
        int64_t s = step ? step[d] : 1;
        b[d] = st[d];
        e[d] = st[d] + (len[d] - 1) * s + 1;
        ax[d] = 2 + d;
        sp[d] = s;
    }
    int in[5] = {x, ad_const_i64(a, nsp, b), ad_const_i64(a, nsp, e), ad_const_i64(a, nsp, ax),
                 ad_const_i64(a, nsp, sp)};
    return ad_op(a, "Slice", 5, in);
}

/* Pad of the spatial axes 2.. of x (rank 2 + nsp) by pb before and pe after; fill: a float scalar value, or -1 for
 * zeros. */
static int pad_sp(ad_ctx *a, int x, int nsp, const int64_t *pb, const int64_t *pe, int fill)
{
    int rank = 2 + nsp, any = 0;
    int64_t p[2 * 5] = {0};
    for (int d = 0; d < nsp; d++) {
        p[2 + d] = pb[d];
        p[rank + 2 + d] = pe[d];
        any |= pb[d] != 0 || pe[d] != 0;
    }
    if (!any)
        return x;
    int in[3] = {x, ad_const_i64(a, 2 * rank, p), fill};
    return ad_op(a, "Pad", fill >= 0 ? 3 : 2, in);
}

/* Spreads g's elements along axis ax of *sh k apart: Reshape to [..., m, 1, ...], Pad k - 1 zeros after each,
 * Reshape to [..., m k, ...], Slice off the last k - 1, leaving (m - 1) k + 1 with g[j] at j k. *sh is updated. */
static int spread(ad_ctx *a, int g, ad_shape *sh, int ax, int64_t k)
{
    int64_t m = sh->d[ax];
    if (k <= 1 || m <= 1)
        return g;
    ad_shape u = {.rank = sh->rank + 1};
    for (int d = 0, e = 0; d < u.rank; d++)
        u.d[d] = d == ax + 1 ? 1 : sh->d[e++];
    int64_t pads[2 * (TERN_GRAPH_MAX_RANK + 1)] = {0};
    pads[u.rank + ax + 1] = k - 1;
    g = ad_op2(a, "Pad", ad_reshape(a, g, &u), ad_const_i64(a, 2 * u.rank, pads));
    ad_shape w = *sh;
    w.d[ax] = m * k;
    g = ad_reshape(a, g, &w);
    int64_t zero = 0, len = (m - 1) * k + 1, axis = ax;
    int in[4] = {g, ad_const_i64(a, 1, &zero), ad_const_i64(a, 1, &len), ad_const_i64(a, 1, &axis)};
    sh->d[ax] = len;
    return ad_op(a, "Slice", 4, in);
}

/* [N, G*A, B, S...] -> [perm of (N, G, A)..., S...] flattened back to rank 2 + nsp: the channel regrouping of the
 * grouped gradients. p3 permutes the three leading axes (N, G, A); out0/out1 the two leading sizes after. */
static int regroup(ad_ctx *a, int v, const ad_shape *s, int64_t G, const int64_t *p3, int64_t out0, int64_t out1)
{
    int nsp = s->rank - 2;
    ad_shape s5 = {.rank = 3 + nsp}, back = {.rank = s->rank};
    s5.d[0] = s->d[0];
    s5.d[1] = G;
    s5.d[2] = s->d[1] / G;
    int64_t perm[6];
    for (int d = 0; d < 3; d++)
        perm[d] = p3[d];
    for (int d = 0; d < nsp; d++) {
        s5.d[3 + d] = back.d[2 + d] = s->d[2 + d];
        perm[3 + d] = 3 + d;
    }
    back.d[0] = out0;
    back.d[1] = out1;
    return ad_reshape(a, ad_transpose(a, ad_reshape(a, v, &s5), s5.rank, perm), &back);
}

static int g_conv(ad_ctx *a, const ad_fwd *f)
{
    const tern_graph_node *n = &a->g->nodes[f->index];
    ad_shape sx = ad_shape_of(a, f->in[0]), sw = ad_shape_of(a, f->in[1]), sy = ad_shape_of(a, f->out[0]);
    int nsp = sx.rank - 2;
    if (nsp < 1 || nsp > 3 || sw.rank != sx.rank || sy.rank != sx.rank)
        return ad_fail_node(a, f->index, "Conv over %d spatial axes has no gradient rule (1, 2 or 3)", nsp);
    int64_t G = tern_graph_attr_int(n, "group", 1), N = sx.d[0], Co = sw.d[0], Cig = sw.d[1];
    if (G < 1 || sx.d[1] != G * Cig || Co % G)
        return ad_fail_node(a, f->index, "Conv group %lld with %lld input channels and weight [%lld, %lld, ...]",
                            (long long)G, (long long)sx.d[1], (long long)Co, (long long)Cig);
    int64_t Cog = Co / G;
    graph_window gw;
    char why[200];
    if (graph_window_setup(n, nsp, sx.d + 2, sw.d + 2, 0, &gw, why, sizeof why))
        return ad_fail_node(a, f->index, "Conv geometry: %s", why);
    for (int d = 0; d < nsp; d++)
        if (gw.out[d] != sy.d[2 + d])
            return ad_fail_node(a, f->index, "Conv output axis %d: %lld, the geometry gives %lld", 2 + d,
                                (long long)sy.d[2 + d], (long long)gw.out[d]);
    if (f->n_in > 2 && f->in[2] >= 0 && ad_needs(a, f->in[2]))
        return ad_fail_node(a, f->index, "internal: a trained Conv bias is split off before differentiation");
    int dy = f->dy[0];
    if (ad_needs(a, f->in[0])) {
        /* dX: dY spread stride apart, convolved (dilation as the forward's) with the kernel flipped and its
         * channel axes swapped within each group, under pads dilation*(k-1) - pad (a negative one crops) */
        ad_shape sg = sy;
        int g = dy;
        for (int d = 0; d < nsp; d++)
            g = spread(a, g, &sg, 2 + d, gw.stride[d]);
        int wt;
        if (G == 1) {
            int64_t swap[5] = {1, 0, 2, 3, 4};
            wt = ad_transpose(a, f->in[1], sw.rank, swap); /* [Ci, Co, k...] */
        } else {
            /* [G*Cog, Cig, k...] -> [G, Cog, Cig, k...] -> [G, Cig, Cog, k...] -> [G*Cig, Cog, k...] */
            ad_shape s5 = {.rank = 3 + nsp}, back = {.rank = sw.rank};
            s5.d[0] = G;
            s5.d[1] = Cog;
            s5.d[2] = Cig;
            int64_t perm[6] = {0, 2, 1, 3, 4, 5};
            for (int d = 0; d < nsp; d++)
                s5.d[3 + d] = back.d[2 + d] = sw.d[2 + d];
            back.d[0] = G * Cig;
            back.d[1] = Cog;
            wt = ad_reshape(a, ad_transpose(a, ad_reshape(a, f->in[1], &s5), s5.rank, perm), &back);
        }
        for (int d = 0; d < nsp; d++) {
            int64_t k = sw.d[2 + d], rev[64];
            if (k > 64)
                return ad_fail_node(a, f->index, "kernel of %lld along axis %d (at most 64)", (long long)k, 2 + d);
            if (k == 1)
                continue;
            for (int64_t i = 0; i < k; i++)
                rev[i] = k - 1 - i;
            wt = ad_op2(a, "Gather", wt, ad_const_i64(a, (int)k, rev));
            ad_attr_int(a, ad_last_node(a), "axis", 2 + d);
        }
        int64_t p2[6], dil[3], crop[3], len[3];
        int cropped = 0;
        for (int d = 0; d < nsp; d++) {
            int64_t span = gw.dil[d] * (sw.d[2 + d] - 1);
            int64_t r = gw.in[d] + gw.pad_b[d] + gw.pad_e[d] - span - 1 - (gw.out[d] - 1) * gw.stride[d];
            int64_t pb = span - gw.pad_b[d], pe = span - gw.pad_e[d] + r;
            crop[d] = pb < 0 ? -pb : 0;
            p2[d] = pb < 0 ? 0 : pb;
            p2[nsp + d] = pe < 0 ? 0 : pe;
            cropped |= pb < 0 || pe < 0;
            dil[d] = gw.dil[d];
            len[d] = gw.in[d];
        }
        int gx = ad_op2(a, "Conv", g, wt);
        int node = ad_last_node(a);
        ad_attr_ints(a, node, "pads", 2 * nsp, p2);
        ad_attr_ints(a, node, "dilations", nsp, dil);
        ad_attr_int(a, node, "group", G);
        if (cropped)
            gx = slice_sp(a, gx, nsp, crop, len, NULL);
        ad_accum(a, f->in[0], gx);
    }
    if (ad_needs(a, f->in[1])) {
        /* dW: X with batch and (per-group) channel axes swapped, convolved with dY likewise as the kernel, the
         * batch the contraction: strides the forward's dilations, dilations its strides, its pads; the result
         * cropped to the kernel (the last rows a stride leaves unread) and its two leading axes swapped back */
        int xt, dyt;
        if (G == 1) {
            int64_t swap[5] = {1, 0, 2, 3, 4};
            xt = ad_transpose(a, f->in[0], sx.rank, swap); /* [Ci, N, H...] */
            dyt = ad_transpose(a, dy, sx.rank, swap);      /* [Co, N, OH...] */
        } else {
            const int64_t px[3] = {2, 1, 0}, pd[3] = {1, 2, 0};
            xt = regroup(a, f->in[0], &sx, G, px, Cig, G * N); /* [Cig, G*N, H...] */
            dyt = regroup(a, dy, &sy, G, pd, G * Cog, N);      /* [G*Cog, N, OH...] */
        }
        int64_t p2[6], st[3], dil[3], zero[3] = {0, 0, 0}, klen[3];
        int cropped = 0;
        for (int d = 0; d < nsp; d++) {
            p2[d] = gw.pad_b[d];
            p2[nsp + d] = gw.pad_e[d];
            st[d] = gw.dil[d];
            dil[d] = gw.stride[d];
            klen[d] = sw.d[2 + d];
            int64_t kk = (gw.in[d] + gw.pad_b[d] + gw.pad_e[d] - gw.stride[d] * (gw.out[d] - 1) - 1) / gw.dil[d] + 1;
            cropped |= kk != klen[d];
        }
        int gwt = ad_op2(a, "Conv", xt, dyt); /* [Ci(g), Co, k'...] */
        int node = ad_last_node(a);
        ad_attr_ints(a, node, "pads", 2 * nsp, p2);
        ad_attr_ints(a, node, "strides", nsp, st);
        ad_attr_ints(a, node, "dilations", nsp, dil);
        ad_attr_int(a, node, "group", G);
        if (cropped)
            gwt = slice_sp(a, gwt, nsp, zero, klen, NULL);
        int64_t swap[5] = {1, 0, 2, 3, 4};
        ad_accum(a, f->in[1], ad_transpose(a, gwt, sw.rank, swap));
    }
    return 0;
}

/* [N, C, OH, OW] -> [N, C, OH*k0, OW*k1], each element repeated over its window */
static int upsample(ad_ctx *a, int v, const ad_shape *so, const int64_t *k, int nsp)
{
    ad_shape s6 = {.rank = 2 + 2 * nsp}, e6, back = {.rank = 2 + nsp};
    s6.d[0] = back.d[0] = so->d[0];
    s6.d[1] = back.d[1] = so->d[1];
    for (int d = 0; d < nsp; d++) {
        s6.d[2 + 2 * d] = so->d[2 + d];
        s6.d[3 + 2 * d] = 1;
        back.d[2 + d] = so->d[2 + d] * k[d];
    }
    e6 = s6;
    for (int d = 0; d < nsp; d++)
        e6.d[3 + 2 * d] = k[d];
    return ad_reshape(a, ad_expand(a, ad_reshape(a, v, &s6), &e6), &back);
}

static int as_float(ad_ctx *a, int v)
{
    int y = ad_op1(a, "Cast", v);
    ad_attr_int(a, ad_last_node(a), "to", TERN_ELEM_FLOAT);
    return y;
}

/* MaxPool: the gradient goes to the first maximum of each window in row-major order, as PyTorch's kernel picks
 * it (ties are common: a convolution over a blank image region gives equal values). The windows are laid out
 * along a last axis [N, C, O..., k0*k1]; first = (x == max) and no earlier element equal: an exclusive CumSum of
 * the equality mask is 0. */
static int max_pool_grad(ad_ctx *a, const ad_fwd *f, const ad_shape *sx, const ad_shape *sy, const int64_t *ks,
                         int nsp)
{
    int64_t kk = 1;
    for (int d = 0; d < nsp; d++)
        kk *= ks[d];
    ad_shape split = {.rank = 2 + 2 * nsp}, win = {.rank = 3 + nsp}, one = {.rank = 3 + nsp}, wsplit;
    for (int d = 0; d < 2; d++)
        split.d[d] = win.d[d] = one.d[d] = sx->d[d];
    for (int d = 0; d < nsp; d++) {
        split.d[2 + 2 * d] = sy->d[2 + d];
        split.d[3 + 2 * d] = ks[d];
        win.d[2 + d] = one.d[2 + d] = sy->d[2 + d];
    }
    win.d[2 + nsp] = kk;
    one.d[2 + nsp] = 1;
    /* [N, C, O0, k0, O1, k1, ...] -> [N, C, O0, O1, ..., k0, k1, ...] (2-D: {0, 1, 2, 4, 3, 5}, its own
     * inverse) and back by the inverse permutation */
    int64_t perm[8] = {0, 1}, inv[8];
    for (int d = 0; d < nsp; d++) {
        perm[2 + d] = 2 + 2 * d;
        perm[2 + nsp + d] = 3 + 2 * d;
    }
    for (int d = 0; d < split.rank; d++)
        inv[perm[d]] = d;
    int xw = ad_reshape(a, f->in[0], &split);
    if (nsp >= 2)
        xw = ad_transpose(a, xw, split.rank, perm);
    xw = ad_reshape(a, xw, &win);
    int mask = as_float(a, ad_op2(a, "Equal", xw, ad_reshape(a, f->out[0], &one)));
    int before = ad_op2(a, "CumSum", mask, ad_const_i64(a, 1, (const int64_t[]){-1}));
    ad_attr_int(a, ad_last_node(a), "exclusive", 1);
    int first = ad_op2(a, "Mul", mask, as_float(a, ad_op2(a, "Equal", before, ad_const_f(a, 0.0f))));
    int g = ad_op2(a, "Mul", first, ad_reshape(a, f->dy[0], &one));
    if (nsp >= 2) {
        wsplit = split;
        for (int d = 0; d < split.rank; d++)
            wsplit.d[d] = split.d[perm[d]];
        g = ad_transpose(a, ad_reshape(a, g, &wsplit), split.rank, inv);
    }
    return ad_reshape(a, g, sx);
}

/* Pooling with any strides, dilations and pads (explicit or auto_pad, ceil_mode included), one kernel offset
 * at a time: the offset's strided window of x padded (MaxPool: -FLT_MAX, which no window's maximum is) is a Slice;
 * its part of the gradient is put back where the Slice read it (spread stride apart, then padded with zeros to
 * the padded input), the parts summed and the padding cropped off. MaxPool gives each output's gradient to the
 * first offset, in row-major order, whose value equals the maximum (PyTorch's first maximum): a running "taken"
 * mask. AveragePool divides by the count of its window's positions inside the input, or inside input and pads
 * with count_include_pad (a constant per output position, as the forward lowering and PyTorch count). */
static int pool_general(ad_ctx *a, const ad_fwd *f, const ad_shape *sx, const ad_shape *sy, const int64_t *ks,
                        int nsp)
{
    const tern_graph_node *n = &a->g->nodes[f->index];
    int is_max = n->op_id == TERN_GOP_MAX_POOL;
    graph_window gw;
    char why[200];
    if (graph_window_setup(n, nsp, sx->d + 2, ks, (int)tern_graph_attr_int(n, "ceil_mode", 0), &gw, why, sizeof why))
        return ad_fail_node(a, f->index, "%s geometry: %s", n->op, why);
    int64_t pb[3], pe[3], kk = 1, osz = 1;
    for (int d = 0; d < nsp; d++) {
        if (gw.out[d] != sy->d[2 + d] || gw.out[d] < 1)
            return ad_fail_node(a, f->index, "%s output axis %d: %lld, the geometry gives %lld", n->op, 2 + d,
                                (long long)sy->d[2 + d], (long long)gw.out[d]);
        /* ceil_mode: the last window may reach past the end pad; pad that far too (never read as a maximum, and
         * not counted by AveragePool) */
        int64_t need = (gw.out[d] - 1) * gw.stride[d] + gw.dil[d] * (gw.k[d] - 1) + 1;
        pb[d] = gw.pad_b[d];
        pe[d] = need - gw.in[d] - pb[d];
        if (pe[d] < gw.pad_e[d])
            pe[d] = gw.pad_e[d];
        kk *= gw.k[d];
        osz *= gw.out[d];
    }
    if (kk > 256)
        return ad_fail_node(a, f->index, "%s window of %lld elements has no gradient rule (at most 256)", n->op,
                            (long long)kk);
    int dy = f->dy[0], xp = -1, y = f->out[0], taken = -1, up = -1, sum = -1;
    if (is_max) {
        xp = pad_sp(a, f->in[0], nsp, pb, pe, ad_const_f(a, -3.4028234663852886e38f));
    } else {
        /* 1 / count per output position, broadcast over batch and channels */
        int cip = (int)tern_graph_attr_int(n, "count_include_pad", 0);
        int64_t cdims[5] = {1, 1, 1, 1, 1};
        float *inv = malloc(sizeof(float) * (size_t)osz);
        if (!inv)
            return ad_fail(a, TERN_ERR_NOMEM, "train: out of memory");
        for (int64_t o = 0; o < osz; o++) {
            int64_t cnt = 1, rest = o;
            for (int d = nsp - 1; d >= 0; d--) {
                int64_t od = rest % gw.out[d], c = 0;
                rest /= gw.out[d];
                int64_t lo = cip ? -gw.pad_b[d] : 0, hi = cip ? gw.in[d] + gw.pad_e[d] : gw.in[d];
                for (int64_t k = 0; k < gw.k[d]; k++) {
                    int64_t pos = od * gw.stride[d] + k * gw.dil[d] - gw.pad_b[d];
                    c += pos >= lo && pos < hi;
                }
                cnt *= c;
            }
            inv[o] = cnt > 0 ? (float)(1.0 / (double)cnt) : 0.0f;
        }
        for (int d = 0; d < nsp; d++)
            cdims[2 + d] = gw.out[d];
        int ic = ad_const_fv(a, 2 + nsp, cdims, inv);
        free(inv);
        ad_shape sg = *sy;
        up = ad_op2(a, "Mul", dy, ic);
        for (int d = 0; d < nsp; d++)
            up = spread(a, up, &sg, 2 + d, gw.stride[d]);
    }
    for (int64_t o = 0; o < kk && !a->failed; o++) {
        int64_t off[3] = {0, 0, 0}, rest = o, len[3], st[3], before[3], after[3];
        for (int d = nsp - 1; d >= 0; d--) {
            off[d] = rest % gw.k[d];
            rest /= gw.k[d];
        }
        for (int d = 0; d < nsp; d++) {
            st[d] = off[d] * gw.dil[d];
            len[d] = gw.out[d];
            before[d] = st[d];
            after[d] = gw.in[d] + pb[d] + pe[d] - st[d] - ((gw.out[d] - 1) * gw.stride[d] + 1);
        }
        int part;
        if (is_max) {
            int eq = as_float(a, ad_op2(a, "Equal", slice_sp(a, xp, nsp, st, len, gw.stride), y));
            int first = taken < 0 ? eq : ad_op2(a, "Mul", eq, ad_op2(a, "Sub", ad_const_f(a, 1.0f), taken));
            taken = taken < 0 ? first : ad_op2(a, "Add", taken, first);
            ad_shape sg = *sy;
            part = ad_op2(a, "Mul", first, dy);
            for (int d = 0; d < nsp; d++)
                part = spread(a, part, &sg, 2 + d, gw.stride[d]);
        } else {
            part = up;
        }
        part = pad_sp(a, part, nsp, before, after, -1);
        sum = sum < 0 ? part : ad_op2(a, "Add", sum, part);
    }
    int64_t in_len[3];
    for (int d = 0; d < nsp; d++)
        in_len[d] = gw.in[d];
    int any = 0;
    for (int d = 0; d < nsp; d++)
        any |= pb[d] || pe[d];
    ad_accum(a, f->in[0], any ? slice_sp(a, sum, nsp, pb, in_len, NULL) : sum);
    return 0;
}

static int g_pool(ad_ctx *a, const ad_fwd *f)
{
    const tern_graph_node *n = &a->g->nodes[f->index];
    int is_max = n->op_id == TERN_GOP_MAX_POOL;
    ad_shape sx = ad_shape_of(a, f->in[0]), sy = ad_shape_of(a, f->out[0]);
    int nsp = sx.rank - 2;
    size_t nk = 0, ns = 0, np = 0;
    const int64_t *ks = graph_attr_ints(n, "kernel_shape", &nk), *st = graph_attr_ints(n, "strides", &ns);
    const int64_t *pads = graph_attr_ints(n, "pads", &np);
    if (f->n_out > 1 && f->dy[1] >= 0)
        return ad_fail_node(a, f->index, "MaxPool's Indices output carries no gradient");
    if (nsp < 1 || nsp > 3 || !ks || (int)nk != nsp)
        return ad_fail_node(a, f->index, "pooling over %d spatial axes has no gradient rule (1, 2 or 3)", nsp);
    int tiles = st && (int)ns == nsp && strcmp(tern_graph_attr_string(n, "auto_pad", "NOTSET"), "NOTSET") == 0 &&
                tern_graph_attr_int(n, "ceil_mode", 0) == 0 && attr_all(n, "dilations", 1, nsp);
    for (size_t i = 0; pads && i < np; i++)
        tiles &= pads[i] == 0;
    for (int d = 0; d < nsp && tiles; d++)
        tiles = ks[d] == st[d] && sx.d[2 + d] == sy.d[2 + d] * ks[d];
    if (!tiles || nsp == 3) /* 3-D tiles would need rank-8 Transpose / Expand copies the compiler does not lower */
        return pool_general(a, f, &sx, &sy, ks, nsp);
    if (is_max) {
        ad_accum(a, f->in[0], max_pool_grad(a, f, &sx, &sy, ks, nsp));
    } else {
        int up = upsample(a, f->dy[0], &sy, ks, nsp);
        int64_t win = 1;
        for (int d = 0; d < nsp; d++)
            win *= ks[d];
        ad_accum(a, f->in[0], ad_op2(a, "Mul", up, ad_const_f(a, (float)(1.0 / (double)win))));
    }
    return 0;
}

static int g_global_avg(ad_ctx *a, const ad_fwd *f)
{
    ad_shape sx = ad_shape_of(a, f->in[0]);
    int64_t win = 1;
    for (int d = 2; d < sx.rank; d++)
        win *= sx.d[d];
    int g = ad_op2(a, "Mul", f->dy[0], ad_const_f(a, (float)(1.0 / (double)win)));
    ad_accum(a, f->in[0], ad_expand(a, g, &sx));
    return 0;
}

int grad_conv_rule(int op_id, ad_rule *out)
{
    switch (op_id) {
    case TERN_GOP_CONV:
        *out = g_conv;
        return 1;
    case TERN_GOP_MAX_POOL:
    case TERN_GOP_AVERAGE_POOL:
        *out = g_pool;
        return 1;
    case TERN_GOP_GLOBAL_AVERAGE_POOL:
        *out = g_global_avg;
        return 1;
    default:
        return 0;
    }
}
