/* The reduce family's shared parameter decoding (op_params.h): the axes every Reduce op reads, from the attribute
 * or (ReduceSum from opset 13, the others from 18) from input 1, decoded one way for inference, the host evaluator
 * and the compiler's reduction rules (lower_reduce.c), which before read them in four places and did not
 * agree on which source wins. Then the family's shape inference (Reduce*, ArgMax/ArgMin) and host reference
 * evaluation (Reduce*, ArgMax/ArgMin, the Softmax family, whose statistics are reductions, and CumSum). */
#include "graph_internal.h"
#include "op_params.h"
#include "infer_internal.h"
#include "eval_internal.h"

#include <stdio.h>
#include <string.h>

int graph_reduce_axes_from_input(int op_id, int64_t opset)
{
    return opset >= (op_id == TERN_GOP_REDUCE_SUM ? 13 : 18);
}

tern_status graph_reduce_axes_decode(const tern_graph_node *n, int64_t opset, int axes_given,
                                     const tern_host_tensor *axes_in, graph_axes_args *a, char *why, size_t wl)
{
    memset(a, 0, sizeof *a);
    a->known = 1;
    const int max = 2 * TERN_GRAPH_MAX_RANK;
    if (!graph_reduce_axes_from_input(n->op_id, opset)) {
        size_t na;
        const int64_t *p = graph_attr_ints(n, "axes", &na);
        if (p) {
            if (na > (size_t)max) {
                snprintf(why, wl, "attribute axes holds %zu values, at most %d allowed", na, max);
                return TERN_ERR_RANGE;
            }
            memcpy(a->axes, p, na * sizeof *p);
            a->n = (int)na;
        }
        return TERN_OK;
    }
    if (!axes_given)
        return TERN_OK;
    if (!axes_in) {
        a->known = 0;
        return TERN_OK;
    }
    if (!axes_in->i || axes_in->rank > 1) {
        snprintf(why, wl, "input 1 must be a 1-D integer tensor");
        return TERN_ERR_INVALID;
    }
    if (axes_in->count > (size_t)max) {
        snprintf(why, wl, "input 1 holds %zu values, at most %d allowed", axes_in->count, max);
        return TERN_ERR_RANGE;
    }
    for (size_t e = 0; e < axes_in->count; e++)
        a->axes[e] = axes_in->i[e];
    a->n = (int)axes_in->count;
    return TERN_OK;
}

/* ---- shape inference (moved out of infer.c's one switch; infer_node dispatches here by op id) ---- */

/* REDUCE_SUM, REDUCE_MEAN, REDUCE_MAX, REDUCE_MIN, REDUCE_PROD, REDUCE_L1, REDUCE_L2, REDUCE_SUM_SQUARE, REDUCE_LOG_SUM, REDUCE_LOG_SUM_EXP */
tern_status graph_infer_reduce(ictx *c)
{
    const tern_graph_node *n = c->n;
    tern_status st;
    int64_t buf[2 * TERN_GRAPH_MAX_RANK + 2];
    int64_t dims[TERN_GRAPH_MAX_RANK];
    int nb, known, r;
    if ((st = need_rank(c, 0)))
        return st;
    const tern_graph_value *x = V(c, 0);
    graph_axes_args ax;
    if ((st = graph_reduce_axes_decode(n, c->g->opset, V(c, 1) != NULL, K(c, 1), &ax, c->why, sizeof c->why)))
        return ifail(c, st, "%s", c->why);
    nb = ax.n;
    known = ax.known;
    memcpy(buf, ax.axes, sizeof ax.axes);
    int keep = (int)tern_graph_attr_int(n, "keepdims", 1);
    if (!known) {
        if (keep)
            set_out(c, 0, x->type, x->rank, NULL);
        else
            set_out(c, 0, x->type, -1, NULL);
        return TERN_OK;
    }
    int red[TERN_GRAPH_MAX_RANK] = {0};
    if (nb == 0) {
        if (tern_graph_attr_int(n, "noop_with_empty_axes", 0)) {
            same_as(c, 0, x, x->type);
            return TERN_OK;
        }
        for (int d = 0; d < x->rank; d++)
            red[d] = 1;
    }
    for (int k = 0; k < nb; k++) {
        int a;
        if (graph_norm_axis(buf[k], x->rank, &a, c->why, sizeof c->why, "axis"))
            return ifail(c, TERN_ERR_INVALID, "%s", c->why);
        red[a] = 1;
    }
    r = 0;
    for (int d = 0; d < x->rank; d++)
        if (!red[d] || keep)
            dims[r++] = red[d] ? 1 : x->dims[d];
    set_out(c, 0, x->type, r, dims);
    return TERN_OK;
}

/* ARG_MAX, ARG_MIN */
tern_status graph_infer_arg_reduce(ictx *c)
{
    const tern_graph_node *n = c->n;
    tern_status st;
    int64_t dims[TERN_GRAPH_MAX_RANK];
    int r;
    if ((st = need_rank(c, 0)))
        return st;
    const tern_graph_value *x = V(c, 0);
    int ax, keep = (int)tern_graph_attr_int(n, "keepdims", 1);
    if (graph_norm_axis(tern_graph_attr_int(n, "axis", 0), x->rank, &ax, c->why, sizeof c->why, "axis"))
        return ifail(c, TERN_ERR_INVALID, "%s", c->why);
    r = 0;
    for (int d = 0; d < x->rank; d++)
        if (d != ax || keep)
            dims[r++] = d == ax ? 1 : x->dims[d];
    set_out(c, 0, TERN_ELEM_INT64, r, dims);
    return TERN_OK;
}

/* ---- reference evaluation (the host evaluator's rules for this family) ---- */

tern_status graph_ev_softmax(const ectx *c)
{
    tern_status st;
    if ((st = ereq(c, 0, 1)))
        return st;
    const tern_host_tensor *x = IN(0);
    int legacy = c->opset < 13, ax;
    char why[200];
    if (x->rank == 0)
        return efail(c, TERN_ERR_INVALID, "input is a scalar");
    if (graph_norm_axis(tern_graph_attr_int(c->n, "axis", legacy ? 1 : -1), x->rank, &ax, why, sizeof why, "axis"))
        return efail(c, TERN_ERR_INVALID, "%s", why);
    size_t outer = 1, n = 1, inner = 1;
    for (int d = 0; d < x->rank; d++) {
        if (d < ax)
            outer *= (size_t)x->dims[d];
        else if (d == ax || legacy)
            n *= (size_t)x->dims[d];
        else
            inner *= (size_t)x->dims[d];
    }
    tern_host_tensor *o;
    if ((st = eout(c, 0, x->type, x->rank, x->dims, &o)) || !o)
        return st;
    int mode = c->n->op_id == TERN_GOP_LOG_SOFTMAX ? 1 : c->n->op_id == TERN_GOP_HARDMAX ? 2 : 0;
    for (size_t a = 0; a < outer; a++)
        for (size_t b = 0; b < inner; b++) {
            const float *p = x->f + a * n * inner + b;
            float *q = o->f + a * n * inner + b;
            double mx = -INFINITY, sum = 0;
            size_t arg = 0;
            for (size_t e = 0; e < n; e++)
                if (p[e * inner] > mx) {
                    mx = p[e * inner];
                    arg = e;
                }
            if (mode == 2) {
                for (size_t e = 0; e < n; e++)
                    q[e * inner] = e == arg ? 1.0f : 0.0f;
                continue;
            }
            for (size_t e = 0; e < n; e++)
                sum += exp((double)p[e * inner] - mx);
            for (size_t e = 0; e < n; e++)
                q[e * inner] = mode == 1 ? (float)((double)p[e * inner] - mx - log(sum))
                                         : (float)(exp((double)p[e * inner] - mx) / sum);
        }
    graph_tensor_normalize(o);
    return TERN_OK;
}

enum { R_SUM, R_MEAN, R_MAX, R_MIN, R_PROD, R_L1, R_L2, R_SUMSQ, R_LOGSUM, R_LOGSUMEXP };

tern_status graph_ev_reduce(const ectx *c)
{
    int kind = R_SUM;
    switch ((tern_op_id)c->n->op_id) {
    case TERN_GOP_REDUCE_MEAN: kind = R_MEAN; break;
    case TERN_GOP_REDUCE_MAX: kind = R_MAX; break;
    case TERN_GOP_REDUCE_MIN: kind = R_MIN; break;
    case TERN_GOP_REDUCE_PROD: kind = R_PROD; break;
    case TERN_GOP_REDUCE_L1: kind = R_L1; break;
    case TERN_GOP_REDUCE_L2: kind = R_L2; break;
    case TERN_GOP_REDUCE_SUM_SQUARE: kind = R_SUMSQ; break;
    case TERN_GOP_REDUCE_LOG_SUM: kind = R_LOGSUM; break;
    case TERN_GOP_REDUCE_LOG_SUM_EXP: kind = R_LOGSUMEXP; break;
    default: break; /* ReduceSum */
    }
    tern_status st;
    if ((st = ereq(c, 0, 0)))
        return st;
    const tern_host_tensor *x = IN(0);
    graph_axes_args ax;
    char why0[160];
    if ((st = graph_reduce_axes_decode(c->n, c->opset, IN(1) != NULL, IN(1), &ax, why0, sizeof why0)))
        return efail(c, st, "%s", why0);
    const int64_t *axes = ax.axes;
    int na = ax.n;
    int keep = (int)tern_graph_attr_int(c->n, "keepdims", 1);
    int red[TERN_GRAPH_MAX_RANK] = {0};
    char why[200];
    if (na == 0) {
        if (tern_graph_attr_int(c->n, "noop_with_empty_axes", 0)) {
            tern_host_tensor *o;
            if ((st = eout(c, 0, x->type, x->rank, x->dims, &o)) || !o)
                return st;
            if (o->f)
                memcpy(o->f, x->f, x->count * sizeof(float));
            else
                memcpy(o->i, x->i, x->count * sizeof(int64_t));
            return TERN_OK;
        }
        for (int d = 0; d < x->rank; d++)
            red[d] = 1;
    }
    for (int k = 0; k < na; k++) {
        int a;
        if (graph_norm_axis(axes[k], x->rank, &a, why, sizeof why, "axis"))
            return efail(c, TERN_ERR_INVALID, "%s", why);
        red[a] = 1;
    }
    int64_t dims[TERN_GRAPH_MAX_RANK], kd[TERN_GRAPH_MAX_RANK];
    int r = 0;
    for (int d = 0; d < x->rank; d++) {
        kd[d] = red[d] ? 1 : x->dims[d];
        if (!red[d] || keep)
            dims[r++] = kd[d];
    }
    if ((kind == R_MAX || kind == R_MIN) && x->count == 0)
        return efail(c, TERN_ERR_INVALID, "%s of an empty tensor", c->n->op);
    tern_host_tensor *o;
    if ((st = eout(c, 0, x->type, r, dims, &o)) || !o)
        return st;
    int64_t ks[TERN_GRAPH_MAX_RANK], ost[TERN_GRAPH_MAX_RANK], idx[TERN_GRAPH_MAX_RANK] = {0};
    ev_strides(x->rank, kd, ks);
    for (int d = 0; d < x->rank; d++)
        ost[d] = red[d] ? 0 : ks[d];
    double *acc = malloc((o->count ? o->count : 1) * sizeof *acc), *mx = NULL;
    if (!acc)
        return efail(c, TERN_ERR_NOMEM, "out of memory");
    double init = kind == R_MAX ? -INFINITY : kind == R_MIN ? INFINITY : kind == R_PROD ? 1.0 : 0.0;
    for (size_t q = 0; q < o->count; q++)
        acc[q] = init;
    if (kind == R_LOGSUMEXP) {
        mx = malloc((o->count ? o->count : 1) * sizeof *mx);
        if (!mx) {
            free(acc);
            return efail(c, TERN_ERR_NOMEM, "out of memory");
        }
        for (size_t q = 0; q < o->count; q++)
            mx[q] = -INFINITY;
        size_t off = 0;
        for (size_t e = 0; e < x->count; e++) {
            double v = x->f ? x->f[e] : (double)x->i[e];
            if (v > mx[off])
                mx[off] = v;
            for (int d = x->rank - 1; d >= 0; d--) {
                off += (size_t)ost[d];
                if (++idx[d] < x->dims[d])
                    break;
                off -= (size_t)(ost[d] * x->dims[d]);
                idx[d] = 0;
            }
        }
        for (size_t q = 0; q < o->count; q++)
            if (isinf(mx[q]))
                mx[q] = 0;
        memset(idx, 0, sizeof idx);
    }
    int64_t *iacc = NULL;
    int int_exact = !x->f && (kind == R_SUM || kind == R_MAX || kind == R_MIN || kind == R_PROD);
    if (int_exact) {
        iacc = malloc((o->count ? o->count : 1) * sizeof *iacc);
        if (!iacc) {
            free(acc), free(mx);
            return efail(c, TERN_ERR_NOMEM, "out of memory");
        }
        for (size_t q = 0; q < o->count; q++)
            iacc[q] = kind == R_MAX ? INT64_MIN : kind == R_MIN ? INT64_MAX : kind == R_PROD ? 1 : 0;
    }
    size_t off = 0;
    for (size_t e = 0; e < x->count; e++) {
        if (int_exact) {
            int64_t v = x->i[e], *a = &iacc[off];
            switch (kind) {
            case R_SUM: *a = (int64_t)((uint64_t)*a + (uint64_t)v); break;
            case R_PROD: *a = (int64_t)((uint64_t)*a * (uint64_t)v); break;
            case R_MAX: *a = v > *a ? v : *a; break;
            default: *a = v < *a ? v : *a; break;
            }
        } else {
            double v = x->f ? x->f[e] : (double)x->i[e], *a = &acc[off];
            switch (kind) {
            case R_SUM:
            case R_MEAN:
            case R_LOGSUM: *a += v; break;
            case R_MAX: *a = (v > *a || isnan(v)) ? v : *a; break;
            case R_MIN: *a = (v < *a || isnan(v)) ? v : *a; break;
            case R_PROD: *a *= v; break;
            case R_L1: *a += fabs(v); break;
            case R_L2:
            case R_SUMSQ: *a += v * v; break;
            case R_LOGSUMEXP: *a += exp(v - mx[off]); break;
            }
        }
        for (int d = x->rank - 1; d >= 0; d--) {
            off += (size_t)ost[d];
            if (++idx[d] < x->dims[d])
                break;
            off -= (size_t)(ost[d] * x->dims[d]);
            idx[d] = 0;
        }
    }
    size_t per = o->count ? x->count / o->count : 0;
    for (size_t q = 0; q < o->count; q++) {
        if (int_exact) {
            o->i[q] = iacc[q];
            continue;
        }
        double v = acc[q];
        switch (kind) {
        case R_MEAN: v = per ? v / (double)per : NAN; break;
        case R_L2: v = sqrt(v); break;
        case R_LOGSUM: v = log(v); break;
        case R_LOGSUMEXP: v = log(v) + mx[q]; break;
        default: break;
        }
        if (o->f)
            o->f[q] = (float)v;
        else
            o->i[q] = isnan(v) ? 0 : v >= 9.2e18 ? INT64_MAX : v <= -9.2e18 ? INT64_MIN : (int64_t)v;
    }
    free(acc), free(mx), free(iacc);
    graph_tensor_normalize(o);
    return TERN_OK;
}

tern_status graph_ev_argminmax(const ectx *c)
{
    tern_status st;
    if ((st = ereq(c, 0, 0)))
        return st;
    const tern_host_tensor *x = IN(0);
    int ax, is_max = c->n->op_id == TERN_GOP_ARG_MAX;
    char why[200];
    if (graph_norm_axis(tern_graph_attr_int(c->n, "axis", 0), x->rank, &ax, why, sizeof why, "axis"))
        return efail(c, TERN_ERR_INVALID, "%s", why);
    int keep = (int)tern_graph_attr_int(c->n, "keepdims", 1), last = (int)tern_graph_attr_int(c->n, "select_last_index", 0);
    int64_t dims[TERN_GRAPH_MAX_RANK];
    int r = 0;
    for (int d = 0; d < x->rank; d++)
        if (d != ax || keep)
            dims[r++] = d == ax ? 1 : x->dims[d];
    if (x->dims[ax] == 0)
        return efail(c, TERN_ERR_INVALID, "axis %d is empty", ax);
    tern_host_tensor *o;
    if ((st = eout(c, 0, TERN_ELEM_INT64, r, dims, &o)) || !o)
        return st;
    size_t outer = 1, inner = 1, n = (size_t)x->dims[ax];
    for (int d = 0; d < ax; d++)
        outer *= (size_t)x->dims[d];
    for (int d = ax + 1; d < x->rank; d++)
        inner *= (size_t)x->dims[d];
    for (size_t a = 0; a < outer; a++)
        for (size_t b = 0; b < inner; b++) {
            size_t best = 0;
            double bv = 0;
            for (size_t e = 0; e < n; e++) {
                size_t off = (a * n + e) * inner + b;
                double v = x->f ? x->f[off] : (double)x->i[off];
                int better = e == 0 || (is_max ? (last ? v >= bv : v > bv) : (last ? v <= bv : v < bv));
                if (better) {
                    bv = v;
                    best = e;
                }
            }
            o->i[a * inner + b] = (int64_t)best;
        }
    return TERN_OK;
}

/* ---- reference evaluation (moved from eval.c) ---- */

tern_status graph_ev_cumsum(const ectx *c)
{
    tern_status st;
    if ((st = ereq(c, 0, 0)) || (st = ereq(c, 1, 0)))
        return st;
    const tern_host_tensor *x = IN(0);
    int ax;
    char why[200];
    if (graph_norm_axis(ri(IN(1), 0), x->rank, &ax, why, sizeof why, "axis"))
        return efail(c, TERN_ERR_INVALID, "%s", why);
    int excl = (int)tern_graph_attr_int(c->n, "exclusive", 0), rev = (int)tern_graph_attr_int(c->n, "reverse", 0);
    tern_host_tensor *o;
    if ((st = eout(c, 0, x->type, x->rank, x->dims, &o)) || !o)
        return st;
    size_t outer = 1, inner = 1, n = (size_t)x->dims[ax];
    for (int d = 0; d < ax; d++)
        outer *= (size_t)x->dims[d];
    for (int d = ax + 1; d < x->rank; d++)
        inner *= (size_t)x->dims[d];
    for (size_t a = 0; a < outer; a++)
        for (size_t b = 0; b < inner; b++) {
            double acc = 0;
            int64_t iacc = 0;
            for (size_t q = 0; q < n; q++) {
                size_t j = rev ? n - 1 - q : q, off = (a * n + j) * inner + b;
                if (o->f) {
                    if (excl) {
                        o->f[off] = (float)acc;
                        acc += x->f[off];
                    } else {
                        acc += x->f[off];
                        o->f[off] = (float)acc;
                    }
                } else {
                    if (excl) {
                        o->i[off] = iacc;
                        iacc = (int64_t)((uint64_t)iacc + (uint64_t)x->i[off]);
                    } else {
                        iacc = (int64_t)((uint64_t)iacc + (uint64_t)x->i[off]);
                        o->i[off] = iacc;
                    }
                }
            }
        }
    graph_tensor_normalize(o);
    return TERN_OK;
}
