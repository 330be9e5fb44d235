/* ConvTranspose as a convolution: the transposed convolution of x equals an ordinary convolution, stride 1, of x
 * with stride-1 zeros inserted between its elements (a reshape to interleaved unit axes, a zero pad of those axes,
 * a reshape back), padded by dilation*(kernel-1) - pad on each side (plus output_padding at the end; a negative
 * amount crops with Slice), with the weight's in/out channels swapped within each group and its spatial axes
 * reversed (Reshape/Transpose/Reshape and Gathers of reversed indices: folded to a constant when the weight is one,
 * computed on the device when it is a run-time input). The geometry, output_shape and auto_pad included, comes from
 * graph_convtranspose_setup, the rule inference and the host reference use. 3-D becomes a sum of 2-D convolutions
 * over the kernel's depth (conv3d_as_2d). */
#include "graph_internal.h"
#include "expand.h"

/* A 3-D stride-1 convolution as kd 2-D ones (the Conv lowering takes 1-D and 2-D): depth moves into the batch,
 * each kernel depth slice j convolves every input depth, and output depth o sums slice j's result at input depth
 * o + j * dilation. y: [N, C, len...] already padded on H and W by cpads' Conv attributes, not yet on depth. */
static void conv3d_as_2d(xb *b, int y, int wt, int bias, int64_t N, int64_t C, const int64_t *len,
                         const int64_t *cpads, const graph_window *gw, int64_t group, int64_t cout, int out)
{
    if (cpads[0] || cpads[3]) {
        int64_t pads[10] = {0, 0, cpads[0], 0, 0, 0, 0, cpads[3], 0, 0};
        y = xb_pad(b, y, 5, pads);
    }
    int64_t D = len[0] + cpads[0] + cpads[3], span = gw->dil[0] * (gw->k[0] - 1), Do = D - span;
    int64_t Ho = len[1] + cpads[1] + cpads[4] - gw->dil[1] * (gw->k[1] - 1);
    int64_t Wo = len[2] + cpads[2] + cpads[5] - gw->dil[2] * (gw->k[2] - 1);
    if (Do < 1 || Ho < 1 || Wo < 1) {
        xb_fail(b, TERN_ERR_INVALID, "3-D output %lld x %lld x %lld is empty", (long long)Do, (long long)Ho,
                (long long)Wo);
        return;
    }
    int64_t p5[5] = {0, 2, 1, 3, 4}, flat[4] = {N * D, C, len[1], len[2]}, o5[5] = {N, D, cout, Ho, Wo};
    int y2 = xb_reshape(b, xb_transpose(b, y, 5, p5), 4, flat), sum = -1;
    int64_t k2[2] = {gw->k[1], gw->k[2]}, d2[2] = {gw->dil[1], gw->dil[2]};
    int64_t pads2[4] = {cpads[1], cpads[2], cpads[4], cpads[5]};
    for (int64_t j = 0; j < gw->k[0]; j++) {
        int ci[2] = {y2, xb_gather_index(b, wt, 2, j)};
        int c = xb_op(b, "Conv", 2, ci);
        xb_attr_ints(b, "kernel_shape", 2, k2);
        xb_attr_ints(b, "dilations", 2, d2);
        xb_attr_ints(b, "pads", 4, pads2);
        xb_attr_int(b, "group", group);
        c = xb_slice(b, xb_reshape(b, c, 5, o5), 1, j * gw->dil[0], j * gw->dil[0] + Do);
        sum = sum < 0 ? c : xb_binary(b, "Add", sum, c);
    }
    int r = xb_transpose(b, sum, 5, p5); /* [N, Cout, Do, Ho, Wo] */
    if (bias >= 0) {
        int64_t bd[5] = {1, cout, 1, 1, 1};
        r = xb_binary(b, "Add", r, xb_reshape(b, bias, 5, bd));
    }
    xb_output_to(b, out);
}

tern_status graph_expand_convt(xb *b, int *done)
{
    const tern_graph_node *n = &b->g->nodes[b->node];
    int x = xb_in(b, 0), w = xb_in(b, 1), bias = xb_in(b, 2);
    if (x < 0 || w < 0)
        return xb_fail(b, TERN_ERR_INVALID, "input and weight are required"), b->st;
    const tern_graph_value *xv = xb_val(b, x), *wv = xb_val(b, w);
    int r = xv->rank, nsp = r - 2;
    if (r < 3 || r > 5 || wv->rank != r)
        return xb_fail(b, TERN_ERR_INVALID, "input rank %d / weight rank %d: expected N, C and 1 to 3 spatial dims", r,
                       wv->rank),
               b->st;
    if (!tern_elem_is_float(xv->type) || wv->type != xv->type)
        return xb_fail(b, TERN_ERR_INVALID, "input %s and weight %s: expected one float type",
                       tern_elem_name(xv->type), tern_elem_name(wv->type)),
               b->st;
    int64_t group = tern_graph_attr_int(n, "group", 1), cin = xv->dims[1];
    if (group < 1 || cin % group || wv->dims[0] != cin)
        return xb_fail(b, TERN_ERR_INVALID, "group %lld with %lld input channels and weight dim 0 %lld",
                       (long long)group, (long long)cin, (long long)wv->dims[0]),
               b->st;
    graph_window gw;
    char why[256];
    if (graph_convtranspose_setup(n, nsp, xv->dims + 2, wv->dims + 2, &gw, why, sizeof why))
        return xb_fail(b, TERN_ERR_INVALID, "%s", why), b->st;
    size_t nop;
    const int64_t *opad = graph_attr_ints(n, "output_padding", &nop);
    int64_t N = xv->dims[0], cog = wv->dims[1], cout = cog * group;
    /* 1. zeros between the input's elements along strided axes */
    int y = x;
    int64_t len[3];
    int strided = 0;
    for (int d = 0; d < nsp; d++) {
        len[d] = xv->dims[2 + d] * gw.stride[d];
        strided |= gw.stride[d] > 1;
    }
    if (strided) {
        int64_t il[TERN_GRAPH_MAX_RANK], pads[2 * TERN_GRAPH_MAX_RANK] = {0}, back[TERN_GRAPH_MAX_RANK];
        int ri = 2 + 2 * nsp;
        il[0] = N, il[1] = cin, back[0] = N, back[1] = cin;
        for (int d = 0; d < nsp; d++) {
            il[2 + 2 * d] = xv->dims[2 + d];
            il[3 + 2 * d] = 1;
            pads[ri + 3 + 2 * d] = gw.stride[d] - 1;
            back[2 + d] = len[d];
        }
        y = xb_reshape(b, x, ri, il);
        y = xb_pad(b, y, ri, pads);
        y = xb_reshape(b, y, r, back);
    } else
        for (int d = 0; d < nsp; d++)
            len[d] = xv->dims[2 + d];
    /* 2. the convolution's padding; the stride-1 zeros after the last element are not part of the input */
    int64_t cpads[6];
    for (int d = 0; d < nsp; d++) {
        int64_t span = gw.dil[d] * (gw.k[d] - 1), op = opad ? opad[d] : 0;
        int64_t pb = span - gw.pad_b[d], pe = span - gw.pad_e[d] + op - (gw.stride[d] - 1);
        if (pb < 0 || pe < 0) { /* crop what the output does not reach */
            int64_t from = pb < 0 ? -pb : 0, to = pe < 0 ? len[d] + pe : len[d];
            y = xb_slice(b, y, 2 + d, from, to);
            len[d] = to - from;
            pb = pb < 0 ? 0 : pb;
            pe = pe < 0 ? 0 : pe;
        }
        cpads[d] = pb;
        cpads[nsp + d] = pe;
    }
    /* 3. the weight: [Cin, Cout/g, k...] -> [Cout, Cin/g, k...] per group, spatially reversed */
    int64_t wd[TERN_GRAPH_MAX_RANK], perm[TERN_GRAPH_MAX_RANK], wf[TERN_GRAPH_MAX_RANK];
    wd[0] = group, wd[1] = cin / group, wd[2] = cog;
    perm[0] = 0, perm[1] = 2, perm[2] = 1;
    wf[0] = cout, wf[1] = cin / group;
    for (int d = 0; d < nsp; d++) {
        wd[3 + d] = gw.k[d];
        perm[3 + d] = 3 + d;
        wf[2 + d] = gw.k[d];
    }
    int wt = w;
    if (group > 1 || cog > 1 || cin > 1) {
        wt = xb_reshape(b, w, r + 1, wd);
        wt = xb_transpose(b, wt, r + 1, perm);
        wt = xb_reshape(b, wt, r, wf);
    }
    for (int d = 0; d < nsp; d++) {
        if (gw.k[d] < 2)
            continue;
        int64_t rev[1 << 10];
        if (gw.k[d] > (int64_t)(sizeof rev / sizeof rev[0]))
            return xb_fail(b, TERN_ERR_UNSUPPORTED, "kernel dim %d is %lld (the expansion reverses up to 1024)", d,
                           (long long)gw.k[d]),
                   b->st;
        for (int64_t k = 0; k < gw.k[d]; k++)
            rev[k] = gw.k[d] - 1 - k;
        int gi[2] = {wt, xb_const_i64(b, TERN_ELEM_INT64, 1, &gw.k[d], rev)};
        wt = xb_op(b, "Gather", 2, gi);
        xb_attr_int(b, "axis", 2 + d);
    }
    int out = n->n_outputs > 0 ? n->outputs[0] : -1;
    if (nsp == 3) {
        conv3d_as_2d(b, y, wt, bias, N, cin, len, cpads, &gw, group, cout, out);
    } else {
        /* 4. the convolution, writing the node's output */
        int ci[3] = {y, wt, bias};
        xb_op_to(b, "Conv", bias >= 0 ? 3 : 2, ci, out);
        xb_attr_ints(b, "kernel_shape", nsp, gw.k);
        xb_attr_ints(b, "dilations", nsp, gw.dil);
        xb_attr_ints(b, "pads", 2 * nsp, cpads);
        xb_attr_int(b, "group", group);
    }
    if (b->st)
        return b->st;
    *done = 1;
    return TERN_OK;
}
