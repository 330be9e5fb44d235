/* Gradients of the convolution and pooling ops, built from convolutions and layout ops the compiler already
 * lowers (it has no ConvTranspose and no scatter). For Conv (groups 1, strides and dilations 1, explicit pads):
 * dX is the convolution of dY with the kernel transposed over its channel axes and flipped spatially (a Gather
 * of reversed indices per spatial axis) under pads k-1-p; dW is the convolution of X with dY taken as the kernel,
 * batch and channel axes swapped on both (the batch becomes the contraction). Pooling with windows that tile the
 * input (kernel = strides, no pads): the output gradient is repeated over each window (Reshape, Expand,
 * Reshape), AveragePool divides it by the window size; MaxPool gives it to the first maximum of each window,
 * as PyTorch does. GlobalAveragePool spreads it evenly. Anything else
 * stops the pass naming the node and the attribute. */
#include "ad_internal.h"

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

static int g_conv(ad_ctx *a, const ad_fwd *f)
{
    const tern_graph_node *n = &a->g->nodes[f->index];
    ad_shape sx = ad_shape_of(a, f->in[0]), sw = ad_shape_of(a, f->in[1]);
    int nsp = sx.rank - 2;
    if (nsp < 1 || nsp > 2)
        return ad_fail_node(a, f->index, "Conv over %d spatial axes has no gradient rule (1 or 2)", nsp);
    if (tern_graph_attr_int(n, "group", 1) != 1)
        return ad_fail_node(a, f->index, "grouped Conv has no gradient rule yet");
    if (!attr_all(n, "strides", 1, nsp) || !attr_all(n, "dilations", 1, nsp))
        return ad_fail_node(a, f->index, "Conv with strides or dilations other than 1 has no gradient rule yet");
    const char *ap = tern_graph_attr_string(n, "auto_pad", "NOTSET");
    if (strcmp(ap, "NOTSET"))
        return ad_fail_node(a, f->index, "Conv auto_pad=%s has no gradient rule (explicit pads only)", ap);
    if (f->n_in > 2 && f->in[2] >= 0 && ad_needs(a, f->in[2]))
        return ad_fail_node(a, f->index, "internal: a trained Conv bias is split off before differentiation");
    size_t np = 0;
    const int64_t *pads = graph_attr_ints(n, "pads", &np);
    int64_t pb[2] = {0, 0}, pe[2] = {0, 0};
    if (pads && (int)np == 2 * nsp)
        for (int d = 0; d < nsp; d++) {
            pb[d] = pads[d];
            pe[d] = pads[nsp + d];
        }
    int64_t swap[4] = {1, 0, 2, 3};
    int dy = f->dy[0];
    if (ad_needs(a, f->in[0])) {
        int wt = ad_transpose(a, f->in[1], sw.rank, swap); /* [Ci, Co, k...] */
        for (int d = 0; d < nsp; d++) {
            int64_t k = sw.d[2 + d], rev[64];
            if (k > 64)
                return ad_fail_node(a, f->index, "kernel of %lld along axis %d (at most 64)", (long long)k, d);
            for (int64_t i = 0; i < k; i++)
                rev[i] = k - 1 - i;
            wt = ad_op2(a, "Gather", wt, ad_const_i64(a, (int)k, rev));
            ad_attr_int(a, ad_last_node(a), "axis", 2 + d);
        }
        int64_t p2[4];
        for (int d = 0; d < nsp; d++) {
            p2[d] = sw.d[2 + d] - 1 - pb[d];
            p2[nsp + d] = sw.d[2 + d] - 1 - pe[d];
            if (p2[d] < 0 || p2[nsp + d] < 0)
                return ad_fail_node(a, f->index, "pads larger than kernel - 1 have no gradient rule");
        }
        int gx = ad_op2(a, "Conv", dy, wt);
        ad_attr_ints(a, ad_last_node(a), "pads", 2 * nsp, p2);
        ad_accum(a, f->in[0], gx);
    }
    if (ad_needs(a, f->in[1])) {
        int xt = ad_transpose(a, f->in[0], sx.rank, swap); /* [Ci, N, H...] */
        int dyt = ad_transpose(a, dy, sx.rank, swap);      /* [Co, N, OH...] */
        int64_t p2[4];
        for (int d = 0; d < nsp; d++) {
            p2[d] = pb[d];
            p2[nsp + d] = pe[d];
        }
        int gw = ad_op2(a, "Conv", xt, dyt); /* [Ci, Co, k...] */
        ad_attr_ints(a, ad_last_node(a), "pads", 2 * nsp, p2);
        ad_accum(a, f->in[1], ad_transpose(a, gw, sw.rank, swap));
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
    const int64_t perm2[6] = {0, 1, 2, 4, 3, 5}; /* its own inverse */
    int xw = ad_reshape(a, f->in[0], &split);
    if (nsp == 2)
        xw = ad_transpose(a, xw, 6, perm2);
    xw = ad_reshape(a, xw, &win);
    int mask = as_float(a, ad_op2(a, "Equal", xw, ad_reshape(a, f->out[0], &one)));
    int before = ad_op2(a, "CumSum", mask, ad_const_i64(a, 1, (const int64_t[]){-1}));
    ad_attr_int(a, ad_last_node(a), "exclusive", 1);
    int first = ad_op2(a, "Mul", mask, as_float(a, ad_op2(a, "Equal", before, ad_const_f(a, 0.0f))));
    int g = ad_op2(a, "Mul", first, ad_reshape(a, f->dy[0], &one));
    if (nsp == 2) {
        wsplit = split;
        wsplit.d[3] = sy->d[3];
        wsplit.d[4] = ks[0];
        g = ad_transpose(a, ad_reshape(a, g, &wsplit), 6, perm2);
    }
    return ad_reshape(a, g, sx);
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
    if (nsp < 1 || nsp > 2 || !ks || (int)nk != nsp)
        return ad_fail_node(a, f->index, "pooling over %d spatial axes has no gradient rule (1 or 2)", nsp);
    int tiles = st && (int)ns == nsp && strcmp(tern_graph_attr_string(n, "auto_pad", "NOTSET"), "NOTSET") == 0 &&
                tern_graph_attr_int(n, "ceil_mode", 0) == 0 && attr_all(n, "dilations", 1, nsp);
    for (size_t i = 0; pads && i < np; i++)
        tiles &= pads[i] == 0;
    for (int d = 0; d < nsp && tiles; d++)
        tiles = ks[d] == st[d] && sx.d[2 + d] == sy.d[2 + d] * ks[d];
    if (!tiles)
        return ad_fail_node(a, f->index,
                            "%s whose windows do not tile the input (kernel = strides, no pads, sizes a multiple) "
                            "has no gradient rule yet",
                            n->op);
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
