/* The conv and pool families: shape inference and the host reference evaluation of Conv, ConvTranspose,
 * MaxPool/AveragePool and the global pools, with the window geometry (kernel, strides, dilations, pads, auto_pad,
 * ceil_mode) they share. infer_node dispatches here by op id; eval.c's table names the evaluators. */
#include "infer_internal.h"
#include "eval_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static tern_status infer_window(ictx *c, const int64_t *kernel, int ceil_mode, int64_t C_out, tern_elem_type t)
{
    const tern_graph_value *x = V(c, 0);
    if (x->rank < 3 || x->rank > 5)
        return ifail(c, TERN_ERR_INVALID, "input rank %d: expected N, C and 1 to 3 spatial dims", x->rank);
    graph_window w;
    if (graph_window_setup(c->n, x->rank - 2, x->dims + 2, kernel, ceil_mode, &w, c->why, sizeof c->why))
        return ifail(c, TERN_ERR_INVALID, "%s", c->why);
    int64_t dims[TERN_GRAPH_MAX_RANK] = {x->dims[0], C_out};
    for (int d = 0; d < w.nsp; d++)
        dims[2 + d] = w.out[d];
    set_out(c, 0, t, x->rank, dims);
    return TERN_OK;
}

/* CONV */
tern_status graph_infer_conv(ictx *c)
{
    const tern_graph_node *n = c->n;
    tern_status st;
    if ((st = need_rank(c, 0)) || (st = need_rank(c, 1)) || (st = need_float(c, 0)))
        return st;
    const tern_graph_value *x = V(c, 0), *w = V(c, 1);
    if (w->rank != x->rank)
        return ifail(c, TERN_ERR_INVALID, "weight rank %d differs from input rank %d", w->rank, x->rank);
    if (w->type != x->type || (V(c, 2) && V(c, 2)->type != x->type))
        return ifail(c, TERN_ERR_INVALID, "X, W and B types differ: %s, %s, %s", tern_elem_name(x->type),
                     tern_elem_name(w->type), V(c, 2) ? tern_elem_name(V(c, 2)->type) : "-");
    int64_t group = tern_graph_attr_int(n, "group", 1);
    if (group < 1 || (x->dims[1] >= 0 && w->dims[1] >= 0 && w->dims[1] * group != x->dims[1]))
        return ifail(c, TERN_ERR_INVALID, "group %lld with %lld input channels and weight [%lld, %lld, ...]",
                     (long long)group, (long long)x->dims[1], (long long)w->dims[0], (long long)w->dims[1]);
    int64_t kern[3];
    size_t nk;
    const int64_t *ks = graph_attr_ints(n, "kernel_shape", &nk);
    for (int d = 0; d < x->rank - 2 && d < 3; d++) {
        kern[d] = w->dims[2 + d] >= 0 ? w->dims[2 + d] : (ks && nk == (size_t)x->rank - 2 ? ks[d] : 1);
        if (kern[d] < 0)
            return ifail(c, TERN_ERR_INVALID, "weight spatial dims are unknown");
    }
    return infer_window(c, kern, 0, w->dims[0], x->type);
}

/* MAX_POOL, AVERAGE_POOL */
tern_status graph_infer_pool(ictx *c)
{
    const tern_graph_node *n = c->n;
    const tern_op_id id = (tern_op_id)c->n->op_id;
    tern_status st;
    if ((st = need_rank(c, 0)) || (id == TERN_GOP_AVERAGE_POOL && (st = need_float(c, 0))))
        return st;
    if (V(c, 0)->type == TERN_ELEM_BOOL)
        return ifail(c, TERN_ERR_INVALID, "input must be numeric, got bool");
    size_t nk;
    const int64_t *ks = graph_attr_ints(n, "kernel_shape", &nk);
    if (!ks || nk != (size_t)V(c, 0)->rank - 2)
        return ifail(c, TERN_ERR_INVALID, "kernel_shape must have %d entries", V(c, 0)->rank - 2);
    if ((st = infer_window(c, ks, (int)tern_graph_attr_int(n, "ceil_mode", 0), V(c, 0)->dims[1], V(c, 0)->type)))
        return st;
    if (OUT(c, 0) && OUT(c, 1))
        set_out(c, 1, TERN_ELEM_INT64, OUT(c, 0)->rank, OUT(c, 0)->dims);
    else if (OUT(c, 1)) { /* indices only: recompute through a scratch of output 0's shape */
        return ifail(c, TERN_ERR_UNSUPPORTED, "Indices output without the values output");
    }
    return TERN_OK;
}

/* GLOBAL_AVERAGE_POOL, GLOBAL_MAX_POOL */
tern_status graph_infer_global_pool(ictx *c)
{
    tern_status st;
    int64_t dims[TERN_GRAPH_MAX_RANK];
    if ((st = need_rank(c, 0)) || (st = need_float(c, 0)))
        return st;
    const tern_graph_value *x = V(c, 0);
    if (x->rank < 3)
        return ifail(c, TERN_ERR_INVALID, "input rank %d below 3", x->rank);
    for (int d = 0; d < x->rank; d++)
        dims[d] = d < 2 ? x->dims[d] : 1;
    set_out(c, 0, x->type, x->rank, dims);
    return TERN_OK;
}

/* CONV_TRANSPOSE */
tern_status graph_infer_conv_transpose(ictx *c)
{
    const tern_graph_node *n = c->n;
    tern_status st;
    int64_t dims[TERN_GRAPH_MAX_RANK];
    if ((st = need_rank(c, 0)) || (st = need_rank(c, 1)) || (st = need_float(c, 0)))
        return st;
    const tern_graph_value *x = V(c, 0), *w = V(c, 1);
    if (x->rank < 3 || x->rank > 5 || w->rank != x->rank)
        return ifail(c, TERN_ERR_INVALID, "input rank %d / weight rank %d: expected N, C and 1 to 3 spatial dims",
                     x->rank, w->rank);
    int64_t group = tern_graph_attr_int(n, "group", 1);
    if (group < 1 || group > GRAPH_MAX_ELEMS)
        return ifail(c, TERN_ERR_INVALID, "group %lld is invalid", (long long)group);
    for (int d = 2; d < w->rank; d++)
        if (w->dims[d] < 0)
            return ifail(c, TERN_ERR_INVALID, "weight spatial dims are unknown");
    graph_window w2;
    if (graph_convtranspose_setup(n, x->rank - 2, x->dims + 2, w->dims + 2, &w2, c->why, sizeof c->why))
        return ifail(c, TERN_ERR_INVALID, "%s", c->why);
    dims[0] = x->dims[0];
    dims[1] = w->dims[1] < 0 ? -1 : w->dims[1] * group;
    for (int d = 0; d < w2.nsp; d++)
        dims[2 + d] = w2.out[d];
    set_out(c, 0, x->type, x->rank, dims);
    return TERN_OK;
}

/* ---- reference evaluation (the host evaluator's rules for this family) ---- */

tern_status graph_ev_convtranspose(const ectx *c)
{
    tern_status st;
    if ((st = ereq(c, 0, 1)) || (st = ereq(c, 1, 1)))
        return st;
    const tern_host_tensor *x = IN(0), *w = IN(1), *b = IN(2);
    if (x->rank < 3 || x->rank > 5 || w->rank != x->rank)
        return efail(c, TERN_ERR_INVALID, "input rank %d / weight rank %d: expected N, C and 1 to 3 spatial dims",
                     x->rank, w->rank);
    int64_t group = tern_graph_attr_int(c->n, "group", 1), N = x->dims[0], C = x->dims[1];
    if (group < 1 || C % group || w->dims[0] != C)
        return efail(c, TERN_ERR_INVALID, "weight [%lld, ...] and group %lld do not fit %lld input channels",
                     (long long)w->dims[0], (long long)group, (long long)C);
    int64_t M = w->dims[1] * group;
    if ((b && (!b->f || b->count != (size_t)M)) || w->type != x->type)
        return efail(c, TERN_ERR_INVALID, "bias must be float [%lld] and W of X's type", (long long)M);
    graph_window win;
    char why[240];
    if (graph_convtranspose_setup(c->n, x->rank - 2, x->dims + 2, w->dims + 2, &win, why, sizeof why))
        return efail(c, TERN_ERR_INVALID, "%s", why);
    int64_t dims[TERN_GRAPH_MAX_RANK] = {N, M};
    for (int d = 0; d < win.nsp; d++)
        dims[2 + d] = win.out[d];
    tern_host_tensor *o;
    if ((st = eout(c, 0, x->type, x->rank, dims, &o)) || !o)
        return st;
    int64_t in[3], out[3], k[3], s[3], dl[3], pb[3];
    int off = 3 - win.nsp;
    for (int d = 0; d < 3; d++) {
        int q = d - off;
        in[d] = q >= 0 ? win.in[q] : 1;
        out[d] = q >= 0 ? win.out[q] : 1;
        k[d] = q >= 0 ? win.k[q] : 1;
        s[d] = q >= 0 ? win.stride[q] : 1;
        dl[d] = q >= 0 ? win.dil[q] : 1;
        pb[d] = q >= 0 ? win.pad_b[q] : 0;
    }
    int64_t cg = C / group, mg = M / group, isz = in[0] * in[1] * in[2], osz = out[0] * out[1] * out[2],
            ksz = k[0] * k[1] * k[2];
    for (int64_t n = 0; n < N; n++)
        for (int64_t m = 0; m < M; m++) {
            float *op = o->f + (n * M + m) * osz;
            for (int64_t e = 0; e < osz; e++)
                op[e] = b ? b->f[m] : 0.0f;
            int64_t g = m / mg, mm = m % mg;
            for (int64_t ci = 0; ci < cg; ci++) {
                int64_t cc = g * cg + ci;
                const float *ip = x->f + (n * C + cc) * isz, *wp = w->f + (cc * mg + mm) * ksz;
                for (int64_t id = 0; id < in[0]; id++)
                    for (int64_t ih = 0; ih < in[1]; ih++)
                        for (int64_t iw = 0; iw < in[2]; iw++) {
                            float xv = ip[(id * in[1] + ih) * in[2] + iw];
                            for (int64_t kd = 0; kd < k[0]; kd++) {
                                int64_t od = id * s[0] + kd * dl[0] - pb[0];
                                if (od < 0 || od >= out[0])
                                    continue;
                                for (int64_t kh = 0; kh < k[1]; kh++) {
                                    int64_t oh = ih * s[1] + kh * dl[1] - pb[1];
                                    if (oh < 0 || oh >= out[1])
                                        continue;
                                    for (int64_t kw = 0; kw < k[2]; kw++) {
                                        int64_t ow = iw * s[2] + kw * dl[2] - pb[2];
                                        if (ow >= 0 && ow < out[2])
                                            op[(od * out[1] + oh) * out[2] + ow] +=
                                                xv * wp[(kd * k[1] + kh) * k[2] + kw];
                                    }
                                }
                            }
                        }
            }
        }
    graph_tensor_normalize(o);
    return TERN_OK;
}

/* ---- reference evaluation (the host evaluator's rules for this family) ---- */

/* ---- Conv and pools ---- */
static tern_status window(const ectx *c, const tern_host_tensor *x, const int64_t *kernel, int ceil_mode,
                          graph_window *w)
{
    char why[240];
    if (x->rank < 3 || x->rank > 5)
        return efail(c, TERN_ERR_INVALID, "input rank %d: expected N, C and 1 to 3 spatial dims", x->rank);
    if (graph_window_setup(c->n, x->rank - 2, x->dims + 2, kernel, ceil_mode, w, why, sizeof why))
        return efail(c, TERN_ERR_INVALID, "%s", why);
    return TERN_OK;
}

/* spatial dims padded to 3 with leading 1s */
static void sp3(const graph_window *w, int64_t *in, int64_t *out, int64_t *k, int64_t *s, int64_t *dl, int64_t *pb)
{
    int off = 3 - w->nsp;
    for (int d = 0; d < 3; d++) {
        int q = d - off;
        in[d] = q >= 0 ? w->in[q] : 1;
        out[d] = q >= 0 ? w->out[q] : 1;
        k[d] = q >= 0 ? w->k[q] : 1;
        s[d] = q >= 0 ? w->stride[q] : 1;
        dl[d] = q >= 0 ? w->dil[q] : 1;
        pb[d] = q >= 0 ? w->pad_b[q] : 0;
    }
}

tern_status graph_ev_conv(const ectx *c)
{
    tern_status st;
    if ((st = ereq(c, 0, 1)) || (st = ereq(c, 1, 1)))
        return st;
    const tern_host_tensor *x = IN(0), *w = IN(1), *b = IN(2);
    int64_t group = tern_graph_attr_int(c->n, "group", 1);
    if (w->rank != x->rank)
        return efail(c, TERN_ERR_INVALID, "weight rank %d differs from input rank %d", w->rank, x->rank);
    int64_t N = x->dims[0], C = x->dims[1], M = w->dims[0];
    if (group < 1 || C % group || M % group || w->dims[1] * group != C)
        return efail(c, TERN_ERR_INVALID, "group %lld does not fit %lld input channels, weight [%lld, %lld, ...]",
                     (long long)group, (long long)C, (long long)M, (long long)w->dims[1]);
    size_t nk;
    const int64_t *ks = graph_attr_ints(c->n, "kernel_shape", &nk);
    if (ks && (nk != (size_t)x->rank - 2 || memcmp(ks, w->dims + 2, nk * sizeof *ks)))
        return efail(c, TERN_ERR_INVALID, "kernel_shape does not match the weight's spatial dims");
    if (w->type != x->type || (b && b->type != x->type))
        return efail(c, TERN_ERR_INVALID, "X, W and B types differ: %s, %s, %s", tern_elem_name(x->type),
                     tern_elem_name(w->type), b ? tern_elem_name(b->type) : "-");
    if (b && (b->rank != 1 || b->dims[0] != M))
        return efail(c, TERN_ERR_INVALID, "bias must be [%lld]", (long long)M);
    graph_window win;
    if ((st = window(c, x, w->dims + 2, 0, &win)))
        return st;
    int64_t dims[TERN_GRAPH_MAX_RANK] = {N, M};
    for (int d = 0; d < win.nsp; d++)
        dims[2 + d] = win.out[d];
    tern_host_tensor *o;
    if ((st = eout(c, 0, x->type, x->rank, dims, &o)) || !o)
        return st;
    int64_t in[3], out[3], k[3], s[3], dl[3], pb[3];
    sp3(&win, in, out, k, s, dl, pb);
    int64_t cg = C / group, mg = M / group, isz = in[0] * in[1] * in[2], osz = out[0] * out[1] * out[2];
    int64_t ksz = k[0] * k[1] * k[2];
    for (int64_t n = 0; n < N; n++)
        for (int64_t m = 0; m < M; m++) {
            float *op = o->f + (n * M + m) * osz;
            float bias = b ? b->f[m] : 0.0f;
            for (int64_t e = 0; e < osz; e++)
                op[e] = bias;
            int64_t g0 = m / mg;
            for (int64_t ci = 0; ci < cg; ci++) {
                const float *ip = x->f + (n * C + g0 * cg + ci) * isz;
                const float *wp = w->f + (m * cg + ci) * ksz;
                for (int64_t kd = 0; kd < k[0]; kd++)
                    for (int64_t kh = 0; kh < k[1]; kh++)
                        for (int64_t kw = 0; kw < k[2]; kw++) {
                            float wv = wp[(kd * k[1] + kh) * k[2] + kw];
                            for (int64_t od = 0; od < out[0]; od++) {
                                int64_t id = od * s[0] - pb[0] + kd * dl[0];
                                if (id < 0 || id >= in[0])
                                    continue;
                                for (int64_t oh = 0; oh < out[1]; oh++) {
                                    int64_t ih = oh * s[1] - pb[1] + kh * dl[1];
                                    if (ih < 0 || ih >= in[1])
                                        continue;
                                    const float *row = ip + (id * in[1] + ih) * in[2];
                                    float *orow = op + (od * out[1] + oh) * out[2];
                                    for (int64_t ow = 0; ow < out[2]; ow++) {
                                        int64_t iw = ow * s[2] - pb[2] + kw * dl[2];
                                        if (iw >= 0 && iw < in[2])
                                            orow[ow] += wv * row[iw];
                                    }
                                }
                            }
                        }
            }
        }
    graph_tensor_normalize(o);
    return TERN_OK;
}

tern_status graph_ev_pool(const ectx *c)
{
    tern_status st;
    int is_max = c->n->op_id == TERN_GOP_MAX_POOL;
    if ((st = ereq(c, 0, !is_max)))
        return st;
    const tern_host_tensor *x = IN(0);
    int col_major = (int)tern_graph_attr_int(c->n, "storage_order", 0) == 1;
    size_t nk;
    const int64_t *ks = graph_attr_ints(c->n, "kernel_shape", &nk);
    if (!ks || nk != (size_t)x->rank - 2)
        return efail(c, TERN_ERR_INVALID, "kernel_shape must have %d entries", x->rank - 2);
    if (!is_max && tern_graph_node_attr(c->n, "dilations")) {
        size_t nd;
        const int64_t *dd = graph_attr_ints(c->n, "dilations", &nd);
        for (size_t q = 0; q < nd; q++)
            if (dd[q] != 1)
                return efail(c, TERN_ERR_UNSUPPORTED, "AveragePool dilations are not supported");
    }
    graph_window win;
    if ((st = window(c, x, ks, (int)tern_graph_attr_int(c->n, "ceil_mode", 0), &win)))
        return st;
    int64_t dims[TERN_GRAPH_MAX_RANK] = {x->dims[0], x->dims[1]};
    for (int d = 0; d < win.nsp; d++)
        dims[2 + d] = win.out[d];
    tern_host_tensor *o, *oi = NULL;
    if ((st = eout(c, 0, x->type, x->rank, dims, &o)))
        return st;
    if (is_max && (st = eout(c, 1, TERN_ELEM_INT64, x->rank, dims, &oi)))
        return st;
    int64_t in[3], out[3], k[3], s[3], dl[3], pb[3];
    sp3(&win, in, out, k, s, dl, pb);
    int include_pad = (int)tern_graph_attr_int(c->n, "count_include_pad", 0);
    int64_t NC = x->dims[0] * x->dims[1], isz = in[0] * in[1] * in[2], osz = out[0] * out[1] * out[2];
    for (int64_t nc = 0; nc < NC; nc++)
        for (int64_t od = 0; od < out[0]; od++)
            for (int64_t oh = 0; oh < out[1]; oh++)
                for (int64_t ow = 0; ow < out[2]; ow++) {
                    double acc = is_max ? -INFINITY : 0.0;
                    int64_t cnt = 0, arg = 0, padcnt = 0;
                    for (int64_t kd = 0; kd < k[0]; kd++)
                        for (int64_t kh = 0; kh < k[1]; kh++)
                            for (int64_t kw = 0; kw < k[2]; kw++) {
                                int64_t id = od * s[0] - pb[0] + kd * dl[0], ih = oh * s[1] - pb[1] + kh * dl[1],
                                        iw = ow * s[2] - pb[2] + kw * dl[2];
                                int inside = id >= 0 && id < in[0] && ih >= 0 && ih < in[1] && iw >= 0 && iw < in[2];
                                /* count_include_pad counts padding cells, not the ceil-mode overhang beyond them */
                                int in_pad = id >= -pb[0] && ih >= -pb[1] && iw >= -pb[2] &&
                                             id < in[0] + (win.nsp >= 3 ? win.pad_e[win.nsp - 3] : 0) &&
                                             ih < in[1] + (win.nsp >= 2 ? win.pad_e[win.nsp - 2] : 0) &&
                                             iw < in[2] + win.pad_e[win.nsp - 1];
                                padcnt += in_pad;
                                if (!inside)
                                    continue;
                                int64_t off = (id * in[1] + ih) * in[2] + iw;
                                double v = x->f ? (double)x->f[nc * isz + off] : (double)x->i[nc * isz + off];
                                if (is_max) {
                                    if (v > acc || cnt == 0) {
                                        acc = v;
                                        /* storage_order=1: the index counts the spatial dims column-major */
                                        arg = nc * isz + (col_major ? (iw * in[1] + ih) * in[0] + id : off);
                                    }
                                } else
                                    acc += v;
                                cnt++;
                            }
                    int64_t oo = nc * osz + (od * out[1] + oh) * out[2] + ow;
                    if (o && o->f)
                        o->f[oo] = (float)(is_max ? acc : acc / (double)(include_pad ? padcnt : cnt ? cnt : 1));
                    else if (o) /* integer MaxPool: an all-padding window gives 0; saturate near 2^63 */
                        o->i[oo] = !cnt ? 0 : acc >= 9223372036854775807.0 ? INT64_MAX
                                          : acc <= -9223372036854775808.0 ? INT64_MIN
                                                                          : (int64_t)acc;
                    if (oi)
                        oi->i[oo] = arg;
                }
    if (o)
        graph_tensor_normalize(o);
    return TERN_OK;
}

tern_status graph_ev_global_pool(const ectx *c)
{
    tern_status st;
    if ((st = ereq(c, 0, 1)))
        return st;
    const tern_host_tensor *x = IN(0);
    if (x->rank < 3)
        return efail(c, TERN_ERR_INVALID, "input rank %d below 3", x->rank);
    int is_max = c->n->op_id == TERN_GOP_GLOBAL_MAX_POOL;
    int64_t dims[TERN_GRAPH_MAX_RANK];
    for (int d = 0; d < x->rank; d++)
        dims[d] = d < 2 ? x->dims[d] : 1;
    tern_host_tensor *o;
    if ((st = eout(c, 0, x->type, x->rank, dims, &o)) || !o)
        return st;
    size_t sp = o->count ? x->count / o->count : 0;
    for (size_t q = 0; q < o->count; q++) {
        double acc = is_max ? -INFINITY : 0.0;
        for (size_t e = 0; e < sp; e++) {
            double v = x->f[q * sp + e];
            acc = is_max ? (v > acc ? v : acc) : acc + v;
        }
        o->f[q] = (float)(is_max ? acc : sp ? acc / (double)sp : 0.0);
    }
    graph_tensor_normalize(o);
    return TERN_OK;
}
