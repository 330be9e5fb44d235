/* Shape rules shared by the host evaluator and shape inference, so the two can never disagree: numpy
 * broadcasting, axis normalisation, Reshape's 0/-1 rules, Slice clamping, and Conv/pool window geometry
 * (explicit pads or auto_pad). Unknown dims are -1 and propagate where the rule allows. */
#include "graph_internal.h"

#include <stdio.h>
#include <string.h>

const int64_t *graph_attr_ints(const tern_graph_node *n, const char *name, size_t *count)
{
    const tern_graph_attr *a = tern_graph_node_attr(n, name);
    if (!a || a->type != TERN_ATTR_INTS) {
        *count = 0;
        return NULL;
    }
    *count = a->n;
    return a->ints;
}

int graph_broadcast(int ra, const int64_t *da, int rb, const int64_t *db, int *r, int64_t *d, char *why, size_t wl)
{
    int rank = ra > rb ? ra : rb;
    for (int k = 0; k < rank; k++) {
        int ia = k - (rank - ra), ib = k - (rank - rb);
        int64_t a = ia >= 0 ? da[ia] : 1, b = ib >= 0 ? db[ib] : 1;
        int64_t o;
        if (a == b)
            o = a;
        else if (a == 1)
            o = b;
        else if (b == 1)
            o = a;
        else if (a < 0)
            o = b; /* unknown against n > 1: must be n (or 1) */
        else if (b < 0)
            o = a;
        else {
            snprintf(why, wl, "shapes do not broadcast: dim %d is %lld in one operand and %lld in the other", k,
                     (long long)a, (long long)b);
            return -1;
        }
        d[k] = o;
    }
    *r = rank;
    return 0;
}

int graph_norm_axis(int64_t axis, int rank, int *out, char *why, size_t wl, const char *what)
{
    if (axis < -(int64_t)rank || axis >= rank) {
        snprintf(why, wl, "%s %lld outside [%d, %d] for rank %d", what, (long long)axis, -rank, rank - 1, rank);
        return -1;
    }
    *out = (int)(axis < 0 ? axis + rank : axis);
    return 0;
}

int graph_reshape_dims(int in_rank, const int64_t *in_dims, const int64_t *shape, int n, int allowzero, int64_t *out,
                       char *why, size_t wl)
{
    if (n > TERN_GRAPH_MAX_RANK) {
        snprintf(why, wl, "target rank %d above the limit %d", n, TERN_GRAPH_MAX_RANK);
        return -1;
    }
    int infer_at = -1;
    int64_t known = 1;
    int unknown = 0;
    for (int k = 0; k < n; k++) {
        int64_t s = shape[k];
        if (s == 0 && !allowzero) {
            if (k >= in_rank) {
                snprintf(why, wl, "shape[%d] = 0 copies a dim the rank-%d input does not have", k, in_rank);
                return -1;
            }
            s = in_dims[k];
        } else if (s == -1) {
            if (infer_at >= 0) {
                snprintf(why, wl, "shape has more than one -1 (at %d and %d)", infer_at, k);
                return -1;
            }
            infer_at = k;
            out[k] = -1;
            continue;
        } else if (s < -1) {
            snprintf(why, wl, "shape[%d] = %lld is negative", k, (long long)s);
            return -1;
        }
        out[k] = s;
        if (s < 0)
            unknown = 1;
        else if (s > 0 && known > GRAPH_MAX_NUMEL / s) {
            snprintf(why, wl, "target shape overflows the 2^32 element limit");
            return -1;
        } else
            known *= s;
    }
    int64_t total = graph_numel(in_rank, in_dims);
    if (total < 0 || unknown) {
        if (infer_at >= 0)
            out[infer_at] = -1;
        return 0;
    }
    if (infer_at >= 0) {
        if (known == 0 || total % known) {
            snprintf(why, wl, "cannot infer the -1 dim: %lld elements do not divide by %lld", (long long)total,
                     (long long)known);
            return -1;
        }
        out[infer_at] = total / known;
    } else if (known != total) {
        snprintf(why, wl, "shape asks for %lld elements, the input has %lld", (long long)known, (long long)total);
        return -1;
    }
    return 0;
}

static int64_t clamp64(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

int64_t graph_slice_len(int64_t dim, int64_t *start, int64_t *end, int64_t step)
{
    /* negative positions count from the end; exporters use INT64_MIN/MAX as "to the edge", so never overflow */
    int64_t s = *start, e = *end;
    if (s < 0)
        s = s < -dim ? -1 : s + dim;
    if (e < 0)
        e = e < -dim ? -1 : e + dim;
    if (step > 0) {
        s = clamp64(s, 0, dim);
        e = clamp64(e, 0, dim);
    } else {
        s = clamp64(s, 0, dim - 1);
        e = clamp64(e, -1, dim - 1);
    }
    *start = s;
    *end = e;
    if (step > 0)
        return e > s ? (e - s - 1) / step + 1 : 0;
    if (step == INT64_MIN)
        return s > e ? 1 : 0;
    return s > e ? (s - e - 1) / (-step) + 1 : 0;
}

int graph_window_setup(const tern_graph_node *n, int nsp, const int64_t *in_sp, const int64_t *kernel, int ceil_mode,
                       graph_window *w, char *why, size_t wl)
{
    memset(w, 0, sizeof *w);
    if (nsp < 1 || nsp > 3) {
        snprintf(why, wl, "%d spatial dims (supported: 1 to 3)", nsp);
        return -1;
    }
    w->nsp = nsp;
    size_t ns, nd, np;
    const int64_t *strides = graph_attr_ints(n, "strides", &ns);
    const int64_t *dil = graph_attr_ints(n, "dilations", &nd);
    const int64_t *pads = graph_attr_ints(n, "pads", &np);
    if ((strides && ns != (size_t)nsp) || (dil && nd != (size_t)nsp) || (pads && np != 2 * (size_t)nsp)) {
        snprintf(why, wl, "strides/dilations/pads lengths (%zu/%zu/%zu) do not match %d spatial dims", ns, nd, np, nsp);
        return -1;
    }
    const char *ap = tern_graph_attr_string(n, "auto_pad", "NOTSET");
    int mode = strcmp(ap, "NOTSET") == 0 ? 0 : strcmp(ap, "VALID") == 0 ? 1 : strcmp(ap, "SAME_UPPER") == 0 ? 2
               : strcmp(ap, "SAME_LOWER") == 0                            ? 3
                                                                          : -1;
    if (mode < 0) {
        snprintf(why, wl, "auto_pad \"%.40s\" is not NOTSET, VALID, SAME_UPPER or SAME_LOWER", ap);
        return -1;
    }
    for (int d = 0; d < nsp; d++) {
        w->in[d] = in_sp[d];
        w->k[d] = kernel[d];
        w->stride[d] = strides ? strides[d] : 1;
        w->dil[d] = dil ? dil[d] : 1;
        w->pad_b[d] = pads && mode == 0 ? pads[d] : 0;
        w->pad_e[d] = pads && mode == 0 ? pads[nsp + d] : 0;
        if (w->k[d] < 1 || w->k[d] > (1 << 20) || w->stride[d] < 1 || w->stride[d] > (1 << 20) || w->dil[d] < 1 ||
            w->dil[d] > (1 << 20) || w->pad_b[d] < 0 || w->pad_e[d] < 0 || w->pad_b[d] > (1 << 20) ||
            w->pad_e[d] > (1 << 20)) {
            snprintf(why, wl,
                     "spatial dim %d: kernel %lld, stride %lld, dilation %lld, pads %lld/%lld (kernel, stride, "
                     "dilation must be in [1, 2^20], pads in [0, 2^20])",
                     d, (long long)w->k[d], (long long)w->stride[d], (long long)w->dil[d], (long long)w->pad_b[d],
                     (long long)w->pad_e[d]);
            return -1;
        }
        int64_t in = in_sp[d], ek = (w->k[d] - 1) * w->dil[d] + 1;
        if (in < 0) {
            w->out[d] = -1;
            continue;
        }
        if (mode >= 2) {
            int64_t out = (in + w->stride[d] - 1) / w->stride[d];
            int64_t total = (out - 1) * w->stride[d] + ek - in;
            if (total < 0)
                total = 0;
            w->pad_b[d] = mode == 2 ? total / 2 : total - total / 2;
            w->pad_e[d] = total - w->pad_b[d];
            w->out[d] = out;
            continue;
        }
        int64_t span = in + w->pad_b[d] + w->pad_e[d] - ek;
        if (span < 0) {
            snprintf(why, wl, "spatial dim %d: input %lld (padded %lld) is smaller than the dilated kernel %lld", d,
                     (long long)in, (long long)(in + w->pad_b[d] + w->pad_e[d]), (long long)ek);
            return -1;
        }
        int64_t out = (ceil_mode ? (span + w->stride[d] - 1) / w->stride[d] : span / w->stride[d]) + 1;
        /* ceil mode: the last window must start inside the input or left padding (PyTorch and ONNX agree) */
        if (ceil_mode && (out - 1) * w->stride[d] >= in + w->pad_b[d])
            out--;
        w->out[d] = out;
    }
    return 0;
}

int graph_convtranspose_setup(const tern_graph_node *n, int nsp, const int64_t *in_sp, const int64_t *kernel,
                              graph_window *w, char *why, size_t wl)
{
    memset(w, 0, sizeof *w);
    if (nsp < 1 || nsp > 3) {
        snprintf(why, wl, "%d spatial dims (supported: 1 to 3)", nsp);
        return -1;
    }
    w->nsp = nsp;
    size_t ns, nd, np, nop, nos;
    const int64_t *strides = graph_attr_ints(n, "strides", &ns), *dil = graph_attr_ints(n, "dilations", &nd);
    const int64_t *pads = graph_attr_ints(n, "pads", &np), *opad = graph_attr_ints(n, "output_padding", &nop);
    const int64_t *oshape = graph_attr_ints(n, "output_shape", &nos);
    if ((strides && ns != (size_t)nsp) || (dil && nd != (size_t)nsp) || (pads && np != 2 * (size_t)nsp) ||
        (opad && nop != (size_t)nsp) || (oshape && nos != (size_t)nsp)) {
        snprintf(why, wl, "strides/dilations/pads/output_padding/output_shape lengths do not match %d spatial dims",
                 nsp);
        return -1;
    }
    const char *ap = tern_graph_attr_string(n, "auto_pad", "NOTSET");
    int same = strcmp(ap, "SAME_UPPER") == 0 ? 1 : strcmp(ap, "SAME_LOWER") == 0 ? 2 : 0;
    for (int d = 0; d < nsp; d++) {
        w->in[d] = in_sp[d];
        w->k[d] = kernel[d];
        w->stride[d] = strides ? strides[d] : 1;
        w->dil[d] = dil ? dil[d] : 1;
        int64_t op = opad ? opad[d] : 0;
        if (w->k[d] < 1 || w->k[d] > (1 << 20) || w->stride[d] < 1 || w->stride[d] > (1 << 20) || w->dil[d] < 1 ||
            w->dil[d] > (1 << 20) || op < 0 || op > (1 << 20) || (pads && (pads[d] < 0 || pads[nsp + d] < 0 ||
                                                                            pads[d] > (1 << 20) ||
                                                                            pads[nsp + d] > (1 << 20)))) {
            snprintf(why, wl, "spatial dim %d: kernel, stride, dilation, output_padding or pads out of range", d);
            return -1;
        }
        if (in_sp[d] < 0) {
            w->out[d] = -1;
            continue;
        }
        int64_t full = w->stride[d] * (in_sp[d] - 1) + op + (w->k[d] - 1) * w->dil[d] + 1;
        if (oshape || same) {
            int64_t target = oshape ? oshape[d] : in_sp[d] * w->stride[d];
            int64_t total = full - target;
            if (target < 0 || target > GRAPH_MAX_ELEMS || total < -(1 << 20)) {
                snprintf(why, wl, "output_shape %lld does not fit spatial dim %d (full size %lld)", (long long)target,
                         d, (long long)full);
                return -1;
            }
            /* a negative total (output_shape beyond the full size) pads the end: floor division as ONNX's reference */
            int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);
            w->pad_b[d] = same == 1 ? half : total - half;
            w->pad_e[d] = total - w->pad_b[d];
            w->out[d] = target;
        } else {
            w->pad_b[d] = pads ? pads[d] : 0;
            w->pad_e[d] = pads ? pads[nsp + d] : 0;
            w->out[d] = full - w->pad_b[d] - w->pad_e[d];
            if (w->out[d] < 0) {
                snprintf(why, wl, "spatial dim %d: pads exceed the output size %lld", d, (long long)full);
                return -1;
            }
        }
    }
    return 0;
}
