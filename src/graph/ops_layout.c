/* The layout family's shared code: the parameter decoding (op_params.h) that infer.c, the evaluator and the
 * compiler's Pad rule (lower_layout.c) all read, decoded one way by opset so the three cannot disagree on where
 * an operand lives, and Pad's reference evaluation next to it (the first op moved out of eval.c into its
 * family's file). */
#include "eval_internal.h"
#include "op_params.h"

#include <stdio.h>
#include <string.h>

tern_status graph_pad_decode(const tern_graph_node *n, int64_t opset, int pads_given, const tern_host_tensor *pads_in,
                             int value_given, const tern_host_tensor *value_in, graph_pad_args *a, char *why,
                             size_t wl)
{
    memset(a, 0, sizeof *a);
    a->known = 1;
    a->value_known = 1;
    const int max = 2 * TERN_GRAPH_MAX_RANK;
    if (opset < 11) { /* Pad-2: attributes */
        size_t na;
        const int64_t *p = graph_attr_ints(n, "pads", &na);
        if (p) {
            if (na > (size_t)max) {
                snprintf(why, wl, "attribute pads holds %zu values, at most %d allowed", na, max);
                return TERN_ERR_RANGE;
            }
            memcpy(a->pads, p, na * sizeof *p);
            a->n = (int)na;
        }
        a->value = tern_graph_attr_float(n, "value", 0.0f);
        return TERN_OK;
    }
    if (!pads_given || !pads_in) { /* Pad-11 on: inputs */
        a->known = 0;
    } else {
        if (!pads_in->i || pads_in->rank > 1) {
            snprintf(why, wl, "input 1 must be a 1-D integer tensor");
            return TERN_ERR_INVALID;
        }
        if (pads_in->count > (size_t)max) {
            snprintf(why, wl, "input 1 holds %zu values, at most %d allowed", pads_in->count, max);
            return TERN_ERR_RANGE;
        }
        for (size_t e = 0; e < pads_in->count; e++)
            a->pads[e] = pads_in->i[e];
        a->n = (int)pads_in->count;
    }
    if (value_given && !value_in)
        a->value_known = 0;
    else if (value_in && value_in->count)
        a->value = tern_host_tensor_get(value_in, 0);
    return TERN_OK;
}

/* Pad: constant, reflect and edge modes; negative pads crop. */
tern_status graph_ev_pad(const ectx *c)
{
    tern_status st;
    if ((st = ereq(c, 0, 0)))
        return st;
    const tern_host_tensor *x = IN(0);
    int r = x->rank;
    graph_pad_args pa;
    char why[160];
    if (c->opset >= 11 && !IN(1))
        return efail(c, TERN_ERR_INVALID, "input 1 must be a 1-D integer tensor (missing)");
    if ((st = graph_pad_decode(c->n, c->opset, IN(1) != NULL, IN(1), 0, IN(2), &pa, why, sizeof why)))
        return efail(c, st, "%s", why);
    if (pa.n != 2 * r)
        return efail(c, TERN_ERR_INVALID, "pads has %d entries for rank %d", pa.n, r);
    const int64_t *pads = pa.pads;
    double cval = pa.value;
    if (IN(3))
        return efail(c, TERN_ERR_UNSUPPORTED, "the axes input (opset 18) is not supported");
    const char *mode = tern_graph_attr_string(c->n, "mode", "constant");
    int m = strcmp(mode, "constant") == 0 ? 0 : strcmp(mode, "reflect") == 0 ? 1 : strcmp(mode, "edge") == 0 ? 2 : -1;
    if (m < 0)
        return efail(c, TERN_ERR_INVALID, "mode \"%.40s\" is not constant, reflect or edge", mode);
    int64_t dims[TERN_GRAPH_MAX_RANK];
    for (int d = 0; d < r; d++) {
        dims[d] = x->dims[d] + pads[d] + pads[r + d];
        if (pads[d] < -x->dims[d] || pads[r + d] < -x->dims[d] || dims[d] < 0 || pads[d] > GRAPH_MAX_ELEMS ||
            pads[r + d] > GRAPH_MAX_ELEMS)
            return efail(c, TERN_ERR_INVALID, "pads on axis %d (%lld, %lld) are invalid for size %lld", d,
                         (long long)pads[d], (long long)pads[r + d], (long long)x->dims[d]);
        if (m && (x->dims[d] == 0 || (m == 1 && (pads[d] >= x->dims[d] || pads[r + d] >= x->dims[d]))) &&
            (pads[d] > 0 || pads[r + d] > 0))
            return efail(c, TERN_ERR_INVALID, "%s padding of %lld/%lld on axis %d of size %lld", mode,
                         (long long)pads[d], (long long)pads[r + d], d, (long long)x->dims[d]);
    }
    tern_host_tensor *o;
    if ((st = eout(c, 0, x->type, r, dims, &o)) || !o)
        return st;
    int64_t xs[TERN_GRAPH_MAX_RANK], idx[TERN_GRAPH_MAX_RANK] = {0};
    ev_strides(r, x->dims, xs);
    for (size_t k = 0; k < o->count; k++) {
        int64_t off = 0;
        int outside = 0;
        for (int d = 0; d < r; d++) {
            int64_t p = idx[d] - pads[d], n = x->dims[d];
            if (p < 0 || p >= n) {
                if (m == 0)
                    outside = 1;
                else if (m == 2)
                    p = p < 0 ? 0 : n - 1;
                else if (n == 1)
                    p = 0;
                else {
                    int64_t period = 2 * (n - 1);
                    p = ((p % period) + period) % period;
                    if (p >= n)
                        p = period - p;
                }
            }
            off += p * xs[d];
        }
        if (o->f)
            o->f[k] = outside ? (float)cval : x->f[off];
        else
            o->i[k] = outside ? d2i(cval) : x->i[off];
        ev_next_index(idx, dims, r);
    }
    graph_tensor_normalize(o);
    return TERN_OK;
}
