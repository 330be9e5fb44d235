/* The host reference evaluator, part 3: less common ops models still use: ConvTranspose, TopK, GatherND,
 * ScatterND, ScatterElements, OneHot, DepthToSpace, SpaceToDepth, EyeLike, LRN, MeanVarianceNormalization,
 * NonZero and Compress (whose output sizes depend on the data). */
#include "eval_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void strides_of(int rank, const int64_t *dims, int64_t *st)
{
    int64_t s = 1;
    for (int d = rank - 1; d >= 0; d--) {
        st[d] = s;
        s *= dims[d];
    }
}

static tern_status ev_convtranspose(const ectx *c)
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

static tern_status ev_topk(const ectx *c)
{
    tern_status st;
    if ((st = ereq(c, 0, 0)) || (st = ereq(c, 1, 0)))
        return st;
    const tern_host_tensor *x = IN(0);
    if (!IN(1)->i || IN(1)->count != 1)
        return efail(c, TERN_ERR_INVALID, "K must be a one-element int64 tensor");
    int ax;
    char why[200];
    if (graph_norm_axis(tern_graph_attr_int(c->n, "axis", -1), x->rank, &ax, why, sizeof why, "axis"))
        return efail(c, TERN_ERR_INVALID, "%s", why);
    int64_t K = IN(1)->i[0], n = x->dims[ax];
    if (K < 0 || K > n)
        return efail(c, TERN_ERR_INVALID, "K = %lld outside [0, %lld]", (long long)K, (long long)n);
    int largest = (int)tern_graph_attr_int(c->n, "largest", 1);
    int64_t dims[TERN_GRAPH_MAX_RANK];
    memcpy(dims, x->dims, sizeof dims);
    dims[ax] = K;
    tern_host_tensor *ov, *oi;
    if ((st = eout(c, 0, x->type, x->rank, dims, &ov)) || (st = eout(c, 1, TERN_ELEM_INT64, x->rank, dims, &oi)))
        return st;
    size_t outer = 1, inner = 1;
    for (int d = 0; d < ax; d++)
        outer *= (size_t)x->dims[d];
    for (int d = ax + 1; d < x->rank; d++)
        inner *= (size_t)x->dims[d];
    if (outer == 0 || inner == 0 || K == 0)
        return TERN_OK;
    int64_t *idx = malloc(((size_t)n + 1) * sizeof *idx);
    if (!idx)
        return efail(c, TERN_ERR_NOMEM, "out of memory");
    for (size_t a = 0; a < outer; a++)
        for (size_t b = 0; b < inner; b++) {
            /* stable selection: ties keep the lower index first (ONNX) */
            for (int64_t e = 0; e < n; e++)
                idx[e] = e;
            for (int64_t i = 0; i < K; i++) {
                int64_t best = i;
                for (int64_t j = i + 1; j < n; j++) {
                    size_t pj = (a * (size_t)n + (size_t)idx[j]) * inner + b,
                           pb = (a * (size_t)n + (size_t)idx[best]) * inner + b;
                    double vj = x->f ? x->f[pj] : (double)x->i[pj], vb = x->f ? x->f[pb] : (double)x->i[pb];
                    int better = largest ? vj > vb : vj < vb;
                    if (better || (vj == vb && idx[j] < idx[best]))
                        best = j;
                }
                int64_t t = idx[i];
                idx[i] = idx[best];
                idx[best] = t;
                size_t src = (a * (size_t)n + (size_t)idx[i]) * inner + b, dst = (a * (size_t)K + (size_t)i) * inner + b;
                if (ov) {
                    if (ov->f)
                        ov->f[dst] = x->f[src];
                    else
                        ov->i[dst] = x->i[src];
                }
                if (oi)
                    oi->i[dst] = idx[i];
            }
        }
    free(idx);
    return TERN_OK;
}

static tern_status ev_gather_nd(const ectx *c)
{
    tern_status st;
    if ((st = ereq(c, 0, 0)) || (st = ereq(c, 1, 0)))
        return st;
    const tern_host_tensor *x = IN(0), *ind = IN(1);
    int64_t bd = tern_graph_attr_int(c->n, "batch_dims", 0);
    if (!ind->i || ind->rank < 1 || bd < 0 || bd >= ind->rank || bd >= x->rank)
        return efail(c, TERN_ERR_INVALID, "indices must be integer of rank >= 1 with batch_dims < both ranks");
    int64_t q = ind->dims[ind->rank - 1];
    if (q < 1 || bd + q > x->rank)
        return efail(c, TERN_ERR_INVALID, "indices' last dim %lld does not fit data rank %d", (long long)q, x->rank);
    for (int d = 0; d < bd; d++)
        if (x->dims[d] != ind->dims[d])
            return efail(c, TERN_ERR_INVALID, "batch dim %d differs", d);
    int64_t dims[TERN_GRAPH_MAX_RANK];
    int r = 0;
    for (int d = 0; d < ind->rank - 1; d++)
        dims[r++] = ind->dims[d];
    for (int d = (int)(bd + q); d < x->rank; d++) {
        if (r >= TERN_GRAPH_MAX_RANK)
            return efail(c, TERN_ERR_RANGE, "result rank above the limit");
        dims[r++] = x->dims[d];
    }
    tern_host_tensor *o;
    if ((st = eout(c, 0, x->type, r, dims, &o)) || !o)
        return st;
    int64_t xs[TERN_GRAPH_MAX_RANK];
    strides_of(x->rank, x->dims, xs);
    size_t slice = 1, nb = 1, per_batch;
    for (int d = (int)(bd + q); d < x->rank; d++)
        slice *= (size_t)x->dims[d];
    for (int d = 0; d < bd; d++)
        nb *= (size_t)x->dims[d];
    size_t ntup = ind->count / (size_t)q;
    per_batch = nb ? ntup / nb : 0;
    for (size_t t = 0; t < ntup; t++) {
        size_t batch = per_batch ? t / per_batch : 0;
        int64_t off = 0, rem = (int64_t)batch;
        for (int d = (int)bd - 1; d >= 0; d--) {
            off += (rem % x->dims[d]) * xs[d];
            rem /= x->dims[d];
        }
        for (int64_t k = 0; k < q; k++) {
            int64_t v = ind->i[t * (size_t)q + (size_t)k], dim = x->dims[bd + k];
            if (v < -dim || v >= dim)
                return efail(c, TERN_ERR_RANGE, "index %lld outside axis %lld of size %lld", (long long)v,
                             (long long)(bd + k), (long long)dim);
            off += (v < 0 ? v + dim : v) * xs[bd + k];
        }
        if (o->f)
            memcpy(o->f + t * slice, x->f + off, slice * sizeof(float));
        else
            memcpy(o->i + t * slice, x->i + off, slice * sizeof(int64_t));
    }
    return TERN_OK;
}

static int reduction_kind(const ectx *c, int *kind)
{
    const char *r = tern_graph_attr_string(c->n, "reduction", "none");
    *kind = !strcmp(r, "none") ? 0 : !strcmp(r, "add") ? 1 : !strcmp(r, "mul") ? 2 : -1;
    return *kind < 0;
}

static void combine(tern_host_tensor *o, size_t dst, const tern_host_tensor *u, size_t src, int kind)
{
    if (o->f) {
        float v = u->f[src];
        o->f[dst] = kind == 1 ? o->f[dst] + v : kind == 2 ? o->f[dst] * v : v;
    } else {
        int64_t v = u->i[src];
        o->i[dst] = kind == 1 ? (int64_t)((uint64_t)o->i[dst] + (uint64_t)v)
                    : kind == 2 ? (int64_t)((uint64_t)o->i[dst] * (uint64_t)v)
                                : v;
    }
}

static tern_status ev_scatter_nd(const ectx *c)
{
    tern_status st;
    if ((st = ereq(c, 0, 0)) || (st = ereq(c, 1, 0)) || (st = ereq(c, 2, 0)))
        return st;
    const tern_host_tensor *x = IN(0), *ind = IN(1), *u = IN(2);
    int kind;
    if (reduction_kind(c, &kind))
        return efail(c, TERN_ERR_INVALID, "reduction must be none, add or mul");
    if (!ind->i || ind->rank < 1 || u->type != x->type)
        return efail(c, TERN_ERR_INVALID, "indices must be integers, updates of the data's type");
    int64_t q = ind->dims[ind->rank - 1];
    if (q < 1 || q > x->rank)
        return efail(c, TERN_ERR_INVALID, "indices' last dim %lld does not fit data rank %d", (long long)q, x->rank);
    size_t slice = 1, ntup = ind->count / (size_t)q;
    for (int d = (int)q; d < x->rank; d++)
        slice *= (size_t)x->dims[d];
    if (u->count != ntup * slice)
        return efail(c, TERN_ERR_INVALID, "updates hold %zu elements, expected %zu", u->count, ntup * slice);
    tern_host_tensor *o;
    if ((st = eout(c, 0, x->type, x->rank, x->dims, &o)) || !o)
        return st;
    if (o->f)
        memcpy(o->f, x->f, x->count * sizeof(float));
    else
        memcpy(o->i, x->i, x->count * sizeof(int64_t));
    int64_t xs[TERN_GRAPH_MAX_RANK];
    strides_of(x->rank, x->dims, xs);
    for (size_t t = 0; t < ntup; t++) {
        int64_t off = 0;
        for (int64_t k = 0; k < q; k++) {
            int64_t v = ind->i[t * (size_t)q + (size_t)k], dim = x->dims[k];
            if (v < -dim || v >= dim)
                return efail(c, TERN_ERR_RANGE, "index %lld outside axis %lld of size %lld", (long long)v,
                             (long long)k, (long long)dim);
            off += (v < 0 ? v + dim : v) * xs[k];
        }
        for (size_t e = 0; e < slice; e++)
            combine(o, (size_t)off + e, u, t * slice + e, kind);
    }
    return TERN_OK;
}

static tern_status ev_scatter_elements(const ectx *c)
{
    tern_status st;
    if ((st = ereq(c, 0, 0)) || (st = ereq(c, 1, 0)) || (st = ereq(c, 2, 0)))
        return st;
    const tern_host_tensor *x = IN(0), *ind = IN(1), *u = IN(2);
    int kind, ax;
    char why[200];
    if (reduction_kind(c, &kind))
        return efail(c, TERN_ERR_INVALID, "reduction must be none, add or mul");
    if (!ind->i || ind->rank != x->rank || u->rank != x->rank || u->type != x->type)
        return efail(c, TERN_ERR_INVALID, "indices and updates must have the data's rank (and updates its type)");
    for (int d = 0; d < ind->rank; d++)
        if (ind->dims[d] != u->dims[d] || ind->dims[d] > x->dims[d])
            return efail(c, TERN_ERR_INVALID, "indices/updates dim %d does not fit", d);
    if (graph_norm_axis(tern_graph_attr_int(c->n, "axis", 0), x->rank, &ax, why, sizeof why, "axis"))
        return efail(c, TERN_ERR_INVALID, "%s", why);
    tern_host_tensor *o;
    if ((st = eout(c, 0, x->type, x->rank, x->dims, &o)) || !o)
        return st;
    if (o->f)
        memcpy(o->f, x->f, x->count * sizeof(float));
    else
        memcpy(o->i, x->i, x->count * sizeof(int64_t));
    int64_t xs[TERN_GRAPH_MAX_RANK], idx[TERN_GRAPH_MAX_RANK] = {0};
    strides_of(x->rank, x->dims, xs);
    for (size_t e = 0; e < ind->count; e++) {
        int64_t v = ind->i[e], dim = x->dims[ax], off = 0;
        if (v < -dim || v >= dim)
            return efail(c, TERN_ERR_RANGE, "index %lld outside axis %d of size %lld", (long long)v, ax,
                         (long long)dim);
        for (int d = 0; d < x->rank; d++)
            off += (d == ax ? (v < 0 ? v + dim : v) : idx[d]) * xs[d];
        combine(o, (size_t)off, u, e, kind);
        ev_next_index(idx, ind->dims, x->rank);
    }
    return TERN_OK;
}

static tern_status ev_onehot(const ectx *c)
{
    tern_status st;
    if ((st = ereq(c, 0, 0)) || (st = ereq(c, 1, 0)) || (st = ereq(c, 2, 0)))
        return st;
    const tern_host_tensor *ind = IN(0), *vals = IN(2);
    if (IN(1)->count != 1 || vals->count != 2)
        return efail(c, TERN_ERR_INVALID, "depth must have one element and values two");
    double dd = tern_host_tensor_get(IN(1), 0);
    if (!(dd >= 1 && dd <= (double)GRAPH_MAX_ELEMS))
        return efail(c, TERN_ERR_INVALID, "depth %g outside [1, 2^31]", dd);
    int64_t depth = (int64_t)dd;
    int r = ind->rank + 1, ax;
    char why[200];
    if (r > TERN_GRAPH_MAX_RANK)
        return efail(c, TERN_ERR_RANGE, "result rank above the limit");
    if (graph_norm_axis(tern_graph_attr_int(c->n, "axis", -1), r, &ax, why, sizeof why, "axis"))
        return efail(c, TERN_ERR_INVALID, "%s", why);
    int64_t dims[TERN_GRAPH_MAX_RANK];
    for (int d = 0, s = 0; d < r; d++)
        dims[d] = d == ax ? depth : ind->dims[s++];
    tern_host_tensor *o;
    if ((st = eout(c, 0, vals->type, r, dims, &o)) || !o)
        return st;
    size_t outer = 1, inner = 1;
    for (int d = 0; d < ax; d++)
        outer *= (size_t)dims[d];
    for (int d = ax + 1; d < r; d++)
        inner *= (size_t)dims[d];
    for (size_t a = 0; a < outer; a++)
        for (int64_t k = 0; k < depth; k++)
            for (size_t b = 0; b < inner; b++) {
                double iv = tern_host_tensor_get(ind, a * inner + b);
                /* in range first: the cast of a huge or NaN index would be undefined */
                int hot = iv >= -(double)depth && iv < (double)depth &&
                          (int64_t)(iv < 0 ? iv + (double)depth : iv) == k;
                size_t dst = (a * (size_t)depth + (size_t)k) * inner + b;
                if (o->f)
                    o->f[dst] = vals->f[hot];
                else
                    o->i[dst] = vals->i[hot];
            }
    return TERN_OK;
}

static tern_status ev_depth_space(const ectx *c)
{
    tern_status st;
    if ((st = ereq(c, 0, 0)))
        return st;
    const tern_host_tensor *x = IN(0);
    int64_t bs = tern_graph_attr_int(c->n, "blocksize", 0);
    int to_space = c->n->op_id == TERN_GOP_DEPTH_TO_SPACE, crd = !strcmp(tern_graph_attr_string(c->n, "mode", "DCR"), "CRD");
    if (x->rank != 4 || bs < 1 || bs > 4096)
        return efail(c, TERN_ERR_INVALID, "needs a 4-D input and blocksize >= 1");
    int64_t N = x->dims[0], C = x->dims[1], H = x->dims[2], W = x->dims[3];
    if (to_space ? C % (bs * bs) : (H % bs || W % bs))
        return efail(c, TERN_ERR_INVALID, "dims do not divide by the block size %lld", (long long)bs);
    int64_t dims[4] = {N, to_space ? C / (bs * bs) : C * bs * bs, to_space ? H * bs : H / bs, to_space ? W * bs : W / bs};
    tern_host_tensor *o;
    if ((st = eout(c, 0, x->type, 4, dims, &o)) || !o)
        return st;
    int64_t oc = dims[1], oh = dims[2], ow = dims[3];
    for (int64_t n = 0; n < N; n++)
        for (int64_t cc = 0; cc < oc; cc++)
            for (int64_t h = 0; h < oh; h++)
                for (int64_t w = 0; w < ow; w++) {
                    int64_t src;
                    if (to_space) {
                        int64_t bh = h % bs, bw = w % bs;
                        int64_t ic = crd ? cc * bs * bs + bh * bs + bw : (bh * bs + bw) * oc + cc;
                        src = ((n * C + ic) * H + h / bs) * W + w / bs;
                    } else {
                        int64_t ic = cc % C, blk = cc / C;
                        src = ((n * C + ic) * H + h * bs + blk / bs) * W + w * bs + blk % bs;
                    }
                    size_t dst = (size_t)(((n * oc + cc) * oh + h) * ow + w);
                    if (o->f)
                        o->f[dst] = x->f[src];
                    else
                        o->i[dst] = x->i[src];
                }
    return TERN_OK;
}

static tern_status ev_eyelike(const ectx *c)
{
    tern_status st;
    if ((st = ereq(c, 0, 0)))
        return st;
    const tern_host_tensor *x = IN(0);
    if (x->rank != 2)
        return efail(c, TERN_ERR_INVALID, "input must be 2-D");
    const tern_graph_attr *dt = tern_graph_node_attr(c->n, "dtype");
    tern_elem_type t = dt && dt->type == TERN_ATTR_INT ? (tern_elem_type)(dt->i < 0 || dt->i > 64 ? 0 : dt->i) : x->type;
    if (!tern_elem_is_valid((int)t))
        return efail(c, TERN_ERR_UNSUPPORTED, "dtype %d is not supported", (int)t);
    int64_t k = tern_graph_attr_int(c->n, "k", 0);
    tern_host_tensor *o;
    if ((st = eout(c, 0, t, 2, x->dims, &o)) || !o)
        return st;
    for (int64_t r = 0; r < x->dims[0]; r++)
        for (int64_t col = 0; col < x->dims[1]; col++)
            if (col - r == k) {
                if (o->f)
                    o->f[r * x->dims[1] + col] = 1.0f;
                else
                    o->i[r * x->dims[1] + col] = 1;
            }
    return TERN_OK;
}

static tern_status ev_lrn(const ectx *c)
{
    tern_status st;
    if ((st = ereq(c, 0, 1)))
        return st;
    const tern_host_tensor *x = IN(0);
    int64_t size = tern_graph_attr_int(c->n, "size", 0);
    if (x->rank < 3 || size < 1)
        return efail(c, TERN_ERR_INVALID, "needs rank >= 3 and size >= 1");
    double alpha = tern_graph_attr_float(c->n, "alpha", 1e-4f), beta = tern_graph_attr_float(c->n, "beta", 0.75f),
           bias = tern_graph_attr_float(c->n, "bias", 1.0f);
    tern_host_tensor *o;
    if ((st = eout(c, 0, x->type, x->rank, x->dims, &o)) || !o)
        return st;
    int64_t C = x->dims[1], sp = 1;
    for (int d = 2; d < x->rank; d++)
        sp *= x->dims[d];
    int64_t lo = (size - 1) / 2, hi = size - 1 - lo;
    for (int64_t n = 0; n < x->dims[0]; n++)
        for (int64_t ch = 0; ch < C; ch++)
            for (int64_t e = 0; e < sp; e++) {
                double sq = 0;
                for (int64_t j = ch - lo; j <= ch + hi; j++)
                    if (j >= 0 && j < C) {
                        double v = x->f[(n * C + j) * sp + e];
                        sq += v * v;
                    }
                size_t q = (size_t)((n * C + ch) * sp + e);
                o->f[q] = (float)(x->f[q] / pow(bias + alpha / (double)size * sq, beta));
            }
    graph_tensor_normalize(o);
    return TERN_OK;
}

static tern_status ev_mvn(const ectx *c)
{
    tern_status st;
    if ((st = ereq(c, 0, 1)))
        return st;
    const tern_host_tensor *x = IN(0);
    size_t na;
    const int64_t *axes = graph_attr_ints(c->n, "axes", &na);
    static const int64_t dflt[] = {0, 2, 3};
    if (!axes) {
        axes = dflt;
        na = 3;
    }
    int red[TERN_GRAPH_MAX_RANK] = {0};
    char why[200];
    for (size_t k = 0; k < na; k++) {
        int a;
        if (graph_norm_axis(axes[k], x->rank, &a, why, sizeof why, "axis"))
            return efail(c, TERN_ERR_INVALID, "%s", why);
        red[a] = 1;
    }
    tern_host_tensor *o;
    if ((st = eout(c, 0, x->type, x->rank, x->dims, &o)) || !o)
        return st;
    /* group index of each element: its coordinates on the kept axes */
    int64_t gd[TERN_GRAPH_MAX_RANK], gs[TERN_GRAPH_MAX_RANK], idx[TERN_GRAPH_MAX_RANK] = {0};
    for (int d = 0; d < x->rank; d++)
        gd[d] = red[d] ? 1 : x->dims[d];
    strides_of(x->rank, gd, gs);
    size_t ng = (size_t)graph_numel(x->rank, gd);
    double *sum = calloc(ng + 1, sizeof *sum), *sq = calloc(ng + 1, sizeof *sq);
    size_t *cnt = calloc(ng + 1, sizeof *cnt), *gi = malloc((x->count + 1) * sizeof *gi);
    if (!sum || !sq || !cnt || !gi) {
        free(sum), free(sq), free(cnt), free(gi);
        return efail(c, TERN_ERR_NOMEM, "out of memory");
    }
    for (size_t e = 0; e < x->count; e++) {
        size_t g = 0;
        for (int d = 0; d < x->rank; d++)
            g += red[d] ? 0 : (size_t)(idx[d] * gs[d]);
        gi[e] = g;
        sum[g] += x->f[e];
        cnt[g]++;
        ev_next_index(idx, x->dims, x->rank);
    }
    for (size_t e = 0; e < x->count; e++) {
        double m = sum[gi[e]] / (double)cnt[gi[e]], v = x->f[e] - m;
        sq[gi[e]] += v * v;
    }
    for (size_t e = 0; e < x->count; e++) {
        double m = sum[gi[e]] / (double)cnt[gi[e]], var = sq[gi[e]] / (double)cnt[gi[e]];
        o->f[e] = (float)((x->f[e] - m) / (sqrt(var) + 1e-9));
    }
    free(sum), free(sq), free(cnt), free(gi);
    graph_tensor_normalize(o);
    return TERN_OK;
}

static tern_status ev_nonzero(const ectx *c)
{
    tern_status st;
    if ((st = ereq(c, 0, 0)))
        return st;
    const tern_host_tensor *x = IN(0);
    int64_t nz = 0;
    for (size_t e = 0; e < x->count; e++)
        nz += tern_host_tensor_get(x, e) != 0;
    int r = x->rank ? x->rank : 1;
    int64_t dims[2] = {r, nz};
    tern_host_tensor *o;
    if ((st = eout(c, 0, TERN_ELEM_INT64, 2, dims, &o)) || !o)
        return st;
    int64_t xs[TERN_GRAPH_MAX_RANK], k = 0;
    strides_of(x->rank, x->dims, xs);
    for (size_t e = 0; e < x->count; e++)
        if (tern_host_tensor_get(x, e) != 0) {
            for (int d = 0; d < x->rank; d++)
                o->i[d * nz + k] = (int64_t)(e / (size_t)xs[d]) % x->dims[d];
            if (!x->rank)
                o->i[k] = 0;
            k++;
        }
    return TERN_OK;
}

static tern_status ev_compress(const ectx *c)
{
    tern_status st;
    if ((st = ereq(c, 0, 0)) || (st = ereq(c, 1, 0)))
        return st;
    const tern_host_tensor *x = IN(0), *cond = IN(1);
    if (cond->type != TERN_ELEM_BOOL || cond->rank != 1)
        return efail(c, TERN_ERR_INVALID, "condition must be a 1-D bool tensor");
    const tern_graph_attr *axa = tern_graph_node_attr(c->n, "axis");
    size_t outer = 1, n = x->count, inner = 1;
    int ax = -1;
    char why[200];
    if (axa) {
        if (graph_norm_axis(axa->i, x->rank, &ax, why, sizeof why, "axis"))
            return efail(c, TERN_ERR_INVALID, "%s", why);
        n = (size_t)x->dims[ax];
        for (int d = 0; d < ax; d++)
            outer *= (size_t)x->dims[d];
        for (int d = ax + 1; d < x->rank; d++)
            inner *= (size_t)x->dims[d];
    }
    int64_t kept = 0;
    for (size_t e = 0; e < cond->count && e < n; e++)
        kept += cond->i[e] != 0;
    int64_t dims[TERN_GRAPH_MAX_RANK];
    int r = 1;
    if (ax >= 0) {
        memcpy(dims, x->dims, sizeof dims);
        dims[ax] = kept;
        r = x->rank;
    } else
        dims[0] = kept;
    tern_host_tensor *o;
    if ((st = eout(c, 0, x->type, r, dims, &o)) || !o)
        return st;
    size_t pos = 0;
    for (size_t a = 0; a < outer; a++)
        for (size_t e = 0; e < n && e < cond->count; e++) {
            if (!cond->i[e])
                continue;
            size_t src = (a * n + e) * inner;
            if (o->f)
                memcpy(o->f + pos, x->f + src, inner * sizeof(float));
            else
                memcpy(o->i + pos, x->i + src, inner * sizeof(int64_t));
            pos += inner;
        }
    return TERN_OK;
}


/* ---- Resize / Upsample ---- */
/* Output sizes from sizes (exact) or scales (floor(in * scale)); fills scale per dim. Shared with inference through
 * graph_resize_dims. */
int graph_resize_dims(const tern_graph_node *n, int64_t opset, int rank, const int64_t *in,
                      const tern_host_tensor *scales, const tern_host_tensor *sizes, int64_t *out, double *scale,
                      char *why, size_t wl)
{
    (void)n;
    (void)opset;
    if (sizes && sizes->count) {
        if (!sizes->i || sizes->count != (size_t)rank) {
            snprintf(why, wl, "sizes must hold %d integers", rank);
            return -1;
        }
        for (int d = 0; d < rank; d++) {
            if (sizes->i[d] < 0 || sizes->i[d] > GRAPH_MAX_ELEMS) {
                snprintf(why, wl, "sizes[%d] = %lld is invalid", d, (long long)sizes->i[d]);
                return -1;
            }
            out[d] = sizes->i[d];
            scale[d] = in[d] > 0 ? (double)out[d] / (double)in[d] : 1.0;
        }
        return 0;
    }
    if (!scales || !scales->f || scales->count != (size_t)rank) {
        snprintf(why, wl, "needs scales (%d floats) or sizes", rank);
        return -1;
    }
    for (int d = 0; d < rank; d++) {
        double s = scales->f[d], o = floor((double)in[d] * s);
        if (!(s > 0) || !(o <= (double)GRAPH_MAX_ELEMS)) {
            snprintf(why, wl, "scales[%d] = %g is invalid", d, s);
            return -1;
        }
        out[d] = (int64_t)o;
        scale[d] = s;
    }
    return 0;
}

static double cubic_w(double a, double t)
{
    t = fabs(t);
    if (t <= 1)
        return ((a + 2) * t - (a + 3)) * t * t + 1;
    if (t < 2)
        return ((a * t - 5 * a) * t + 8 * a) * t - 4 * a;
    return 0;
}

static tern_status ev_resize(const ectx *c)
{
    tern_status st;
    if ((st = ereq(c, 0, 0)))
        return st;
    const tern_host_tensor *x = IN(0), *roi = NULL, *scales, *sizes;
    int upsample = c->n->op_id == TERN_GOP_UPSAMPLE;
    tern_host_tensor *attr_scales = NULL;
    if (upsample || c->opset < 11) {
        scales = IN(1);
        sizes = NULL;
        if (!scales) { /* Upsample-7: scales attribute */
            const tern_graph_attr *a = tern_graph_node_attr(c->n, "scales");
            if (!a || a->type != TERN_ATTR_FLOATS)
                return efail(c, TERN_ERR_INVALID, "scales are required");
            int64_t n = (int64_t)a->n;
            tern_error e;
            if (tern_host_tensor_new(TERN_ELEM_FLOAT, 1, &n, &attr_scales, &e))
                return efail(c, e.code, "%s", e.msg);
            memcpy(attr_scales->f, a->floats, a->n * sizeof(float));
            scales = attr_scales;
        }
    } else {
        roi = IN(1);
        scales = IN(2);
        sizes = IN(3);
    }
    int r = x->rank;
    int64_t out[TERN_GRAPH_MAX_RANK];
    double scale[TERN_GRAPH_MAX_RANK];
    char why[200];
    if (graph_resize_dims(c->n, c->opset, r, x->dims, scales, sizes, out, scale, why, sizeof why)) {
        tern_host_tensor_free(attr_scales);
        return efail(c, TERN_ERR_INVALID, "%s", why);
    }
    tern_host_tensor_free(attr_scales);
    const char *mode = tern_graph_attr_string(c->n, "mode", "nearest");
    const char *ctm = tern_graph_attr_string(c->n, "coordinate_transformation_mode",
                                             upsample || c->opset < 11 ? "asymmetric" : "half_pixel");
    const char *nm = tern_graph_attr_string(c->n, "nearest_mode", upsample || c->opset < 11 ? "floor"
                                                                                             : "round_prefer_floor");
    double a = tern_graph_attr_float(c->n, "cubic_coeff_a", -0.75f);
    int excl = (int)tern_graph_attr_int(c->n, "exclude_outside", 0);
    double extrap = tern_graph_attr_float(c->n, "extrapolation_value", 0.0f);
    int m = !strcmp(mode, "nearest") ? 0 : !strcmp(mode, "linear") || !strcmp(mode, "bilinear") ? 1
            : !strcmp(mode, "cubic")                                                              ? 2
                                                                                                  : -1;
    int t = !strcmp(ctm, "half_pixel") ? 0 : !strcmp(ctm, "pytorch_half_pixel") ? 1 : !strcmp(ctm, "align_corners") ? 2
            : !strcmp(ctm, "asymmetric")                                                                           ? 3
            : !strcmp(ctm, "tf_half_pixel_for_nn")                                                                 ? 4
            : !strcmp(ctm, "tf_crop_and_resize")                                                                   ? 5
                                                                                                                   : -1;
    int nmode = !strcmp(nm, "round_prefer_floor") ? 0 : !strcmp(nm, "round_prefer_ceil") ? 1 : !strcmp(nm, "floor") ? 2
                : !strcmp(nm, "ceil")                                                                              ? 3
                                                                                                                   : -1;
    if (m < 0 || t < 0 || nmode < 0)
        return efail(c, TERN_ERR_UNSUPPORTED, "mode \"%.20s\", coordinate_transformation_mode \"%.30s\" or "
                     "nearest_mode \"%.20s\" is not supported", mode, ctm, nm);
    for (int d = 0; d < r; d++)
        if (x->dims[d] == 0 && out[d] > 0)
            return efail(c, TERN_ERR_INVALID, "dim %d is empty and cannot be resized to %lld", d, (long long)out[d]);
    if (t == 5 && (!roi || !roi->f || roi->count != 2 * (size_t)r))
        return efail(c, TERN_ERR_INVALID, "tf_crop_and_resize needs roi with %d floats", 2 * r);
    tern_host_tensor *o;
    if ((st = eout(c, 0, x->type, r, out, &o)) || !o || o->count == 0)
        return st; /* (an empty output: the per-dim tables below could otherwise be sized by a huge other dim) */
    /* per dim and output coordinate: up to 4 (index, weight) taps; index -1 = outside (extrapolation) */
    int taps = m == 0 ? 1 : m == 1 ? 2 : 4;
    size_t total = 0;
    for (int d = 0; d < r; d++)
        total += (size_t)out[d];
    int64_t *ti = malloc((total * 4 + 1) * sizeof *ti);
    double *tw = malloc((total * 4 + 1) * sizeof *tw);
    unsigned char *outside = calloc(total + 1, 1);
    if (!ti || !tw || !outside) {
        free(ti), free(tw), free(outside);
        return efail(c, TERN_ERR_NOMEM, "out of memory");
    }
    size_t base[TERN_GRAPH_MAX_RANK], pos = 0;
    for (int d = 0; d < r; d++) {
        base[d] = pos;
        int64_t in = x->dims[d];
        for (int64_t j = 0; j < out[d]; j++, pos++) {
            double xo, s = scale[d];
            switch (t) {
            case 0: xo = (j + 0.5) / s - 0.5; break;
            case 1: xo = out[d] > 1 ? (j + 0.5) / s - 0.5 : 0; break;
            case 2: { /* ONNX's reference uses the unrounded resized length in * scale */
                double len = (double)in * s;
                xo = len <= 1 ? 0 : (double)j * (double)(in - 1) / (len - 1);
                break;
            }
            case 3: xo = j / s; break;
            case 4: xo = (j + 0.5) / s; break;
            default: {
                double s0 = roi->f[d], e0 = roi->f[r + d];
                xo = out[d] > 1 ? s0 * (double)(in - 1) + (double)j * (e0 - s0) * (double)(in - 1) / (double)(out[d] - 1)
                                : 0.5 * (s0 + e0) * (double)(in - 1);
                if (xo < 0 || xo > (double)(in - 1))
                    outside[pos] = 1;
                break;
            }
            }
            if (isnan(xo)) /* a NaN roi: outside, and keep the index arithmetic defined */
                outside[pos] = 1, xo = 0;
            xo = xo < -1e12 ? -1e12 : xo > 1e12 ? 1e12 : xo;
            int64_t *ii = ti + pos * 4;
            double *ww = tw + pos * 4;
            if (m == 0) {
                double f = floor(xo);
                int64_t k;
                if (nmode == 2)
                    k = (int64_t)f;
                else if (nmode == 3)
                    k = (int64_t)ceil(xo);
                else if (xo - f == 0.5)
                    k = (int64_t)f + (nmode == 1);
                else
                    k = (int64_t)nearbyint(xo);
                ii[0] = k < 0 ? 0 : k >= in ? in - 1 : k;
                ww[0] = 1;
            } else if (m == 1) {
                double f = floor(xo), fr = xo - f;
                int64_t k0 = (int64_t)f;
                ii[0] = k0 < 0 ? 0 : k0 >= in ? in - 1 : k0;
                ii[1] = k0 + 1 < 0 ? 0 : k0 + 1 >= in ? in - 1 : k0 + 1;
                ww[0] = 1 - fr;
                ww[1] = fr;
            } else {
                double f = floor(xo), fr = xo - f, sum = 0;
                int64_t k0 = (int64_t)f;
                for (int q = 0; q < 4; q++) {
                    int64_t k = k0 - 1 + q;
                    ww[q] = cubic_w(a, fr - (double)(q - 1));
                    if (excl && (k < 0 || k >= in))
                        ww[q] = 0;
                    ii[q] = k < 0 ? 0 : k >= in ? in - 1 : k;
                    sum += ww[q];
                }
                if (excl && sum != 0)
                    for (int q = 0; q < 4; q++)
                        ww[q] /= sum;
            }
        }
    }
    int64_t xs[TERN_GRAPH_MAX_RANK], idx[TERN_GRAPH_MAX_RANK] = {0};
    strides_of(r, x->dims, xs);
    int64_t ncomb = 1;
    for (int d = 0; d < r; d++)
        ncomb *= taps;
    for (size_t e = 0; e < o->count; e++) {
        int out_of_roi = 0;
        for (int d = 0; d < r; d++)
            out_of_roi |= outside[base[d] + (size_t)idx[d]];
        double acc = 0;
        if (out_of_roi)
            acc = extrap;
        else
            for (int64_t comb = 0; comb < ncomb; comb++) {
                int64_t rem = comb, off = 0;
                double wgt = 1;
                for (int d = r - 1; d >= 0; d--) {
                    int q = (int)(rem % taps);
                    rem /= taps;
                    size_t p = (base[d] + (size_t)idx[d]) * 4 + (size_t)q;
                    wgt *= tw[p];
                    off += ti[p] * xs[d];
                }
                if (wgt != 0)
                    acc += wgt * (x->f ? (double)x->f[off] : (double)x->i[off]);
            }
        if (o->f)
            o->f[e] = (float)acc;
        else
            o->i[e] = isnan(acc) ? 0 : acc >= 9223372036854775807.0 ? INT64_MAX
                      : acc <= -9223372036854775808.0 ? INT64_MIN
                                                     : (int64_t)nearbyint(acc);
        ev_next_index(idx, out, r);
    }
    free(ti), free(tw), free(outside);
    graph_tensor_normalize(o);
    return TERN_OK;
}

static const eval_fn extra_table[TERN_GOP_COUNT] = {
    [TERN_GOP_RESIZE] = ev_resize, [TERN_GOP_UPSAMPLE] = ev_resize, [TERN_GOP_CONV_TRANSPOSE] = ev_convtranspose,
    [TERN_GOP_TOP_K] = ev_topk, [TERN_GOP_GATHER_ND] = ev_gather_nd, [TERN_GOP_SCATTER_ND] = ev_scatter_nd,
    [TERN_GOP_SCATTER_ELEMENTS] = ev_scatter_elements, [TERN_GOP_ONE_HOT] = ev_onehot,
    [TERN_GOP_DEPTH_TO_SPACE] = ev_depth_space, [TERN_GOP_SPACE_TO_DEPTH] = ev_depth_space,
    [TERN_GOP_EYE_LIKE] = ev_eyelike, [TERN_GOP_LRN] = ev_lrn, [TERN_GOP_MEAN_VARIANCE_NORMALIZATION] = ev_mvn,
    [TERN_GOP_NON_ZERO] = ev_nonzero, [TERN_GOP_COMPRESS] = ev_compress,
};

eval_fn graph_eval_extra_lookup(tern_op_id id)
{
    return (int)id > TERN_GOP_UNKNOWN && (int)id < TERN_GOP_COUNT ? extra_table[id] : NULL;
}
