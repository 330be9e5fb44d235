/* The norm family: shape inference and the host reference evaluation of BatchNormalization and
 * InstanceNormalization (per-channel parameters), LayerNormalization (with its Mean and InvStdDev outputs), LRN and
 * MeanVarianceNormalization (statistics in double). infer_node dispatches here by op id; eval.c's table names the
 * evaluators. */
#include "infer_internal.h"
#include "eval_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* BATCH_NORMALIZATION, INSTANCE_NORMALIZATION */
tern_status graph_infer_batch_instance_norm(ictx *c)
{
    const tern_graph_node *n = c->n;
    const tern_op_id id = (tern_op_id)c->n->op_id;
    tern_status st;
    int nin = id == TERN_GOP_BATCH_NORMALIZATION ? 5 : 3;
    for (int k = 0; k < nin; k++)
        if ((st = need_float(c, k)))
            return st;
    if ((st = need_rank(c, 0)))
        return st;
    /* training_mode=1 (a training-mode export) has shapes: `tern train` runs it (src/train/grad_norm.c); the host
     * evaluation and the compiler refuse it */
    int training = id == TERN_GOP_BATCH_NORMALIZATION && tern_graph_attr_int(n, "training_mode", 0) != 0;
    const tern_graph_value *x = V(c, 0);
    if (x->rank < 2)
        return ifail(c, TERN_ERR_INVALID, "input rank %d below 2", x->rank);
    for (int k = 1; k < nin; k++) {
        const tern_graph_value *p = V(c, k);
        if (p->rank >= 0 && x->dims[1] >= 0 && (p->rank != 1 || (p->dims[0] >= 0 && p->dims[0] != x->dims[1])))
            return ifail(c, TERN_ERR_INVALID, "input %d \"%s\" must be [%lld]", k, p->name,
                         (long long)x->dims[1]);
    }
    same_as(c, 0, x, x->type);
    for (int k = 1; k < n->n_outputs; k++) {
        if (!OUT(c, k))
            continue;
        if (!training)
            return ifail(c, TERN_ERR_UNSUPPORTED, "running_mean/running_var outputs need training_mode=1");
        set_out(c, k, x->type, 1, &x->dims[1]); /* the updated running statistics, [C] */
    }
    return TERN_OK;
}

/* LAYER_NORMALIZATION */
tern_status graph_infer_layer_norm(ictx *c)
{
    const tern_graph_node *n = c->n;
    tern_status st;
    int64_t dims[TERN_GRAPH_MAX_RANK];
    if ((st = need_rank(c, 0)) || (st = need_float(c, 0)) || (st = need_float(c, 1)))
        return st;
    const tern_graph_value *x = V(c, 0);
    int ax;
    if (graph_norm_axis(tern_graph_attr_int(n, "axis", -1), x->rank, &ax, c->why, sizeof c->why, "axis"))
        return ifail(c, TERN_ERR_INVALID, "%s", c->why);
    same_as(c, 0, x, x->type);
    for (int d = 0; d < x->rank; d++)
        dims[d] = d < ax ? x->dims[d] : 1;
    set_out(c, 1, TERN_ELEM_FLOAT, x->rank, dims);
    set_out(c, 2, TERN_ELEM_FLOAT, x->rank, dims);
    return TERN_OK;
}

/* LRN, MEAN_VARIANCE_NORMALIZATION: a float input, the output of its shape */
tern_status graph_infer_lrn_mvn(ictx *c)
{
    tern_status st;
    if ((st = need(c, 0)))
        return st;
    if ((st = need_float(c, 0)))
        return st;
    same_as(c, 0, V(c, 0), V(c, 0)->type);
    return TERN_OK;
}

/* ---- reference evaluation (the host evaluator's rules for this family) ---- */

tern_status graph_ev_lrn(const ectx *c)
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

tern_status graph_ev_mvn(const ectx *c)
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
    ev_strides(x->rank, gd, gs);
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

/* ---- reference evaluation (the host evaluator's rules for this family) ---- */

/* Mean and 1/sqrt(population variance + eps) of n values, in double (the norms' statistics). */
static double row_moments(const float *p, size_t n, float eps, double *inv)
{
    double mean = 0, var = 0;
    for (size_t e = 0; e < n; e++)
        mean += p[e];
    mean /= (double)n;
    for (size_t e = 0; e < n; e++)
        var += (p[e] - mean) * (p[e] - mean);
    var /= (double)n;
    *inv = 1.0 / sqrt(var + eps);
    return mean;
}

/* Layer norm of one row of `inner` values (double statistics, as ev_layernorm): o may equal p. */
void graph_ev_layernorm_row(const float *p, float *o, size_t inner, const tern_host_tensor *sc,
                            const tern_host_tensor *b, float eps, float *mean_out, float *inv_out)
{
    double inv, mean = row_moments(p, inner, eps, &inv);
    if (mean_out)
        *mean_out = (float)mean;
    if (inv_out)
        *inv_out = (float)inv;
    if (o)
        for (size_t e = 0; e < inner; e++)
            o[e] = (float)((p[e] - mean) * inv * sc->f[sc->count == 1 ? 0 : e] + (b ? b->f[b->count == 1 ? 0 : e] : 0.0f));
}

/* ---- normalisation ---- */
tern_status graph_ev_batchnorm(const ectx *c)
{
    tern_status st;
    for (int k = 0; k < 5; k++)
        if ((st = ereq(c, k, 1)))
            return st;
    if (tern_graph_attr_int(c->n, "training_mode", 0))
        return efail(c, TERN_ERR_UNSUPPORTED, "training_mode=1 is not supported (inference only)");
    const tern_host_tensor *x = IN(0);
    if (x->rank < 2)
        return efail(c, TERN_ERR_INVALID, "input rank %d below 2", x->rank);
    int64_t C = x->dims[1];
    for (int k = 1; k < 5; k++)
        if (IN(k)->count != (size_t)C)
            return efail(c, TERN_ERR_INVALID, "input %d has %zu elements, channels are %lld", k, IN(k)->count,
                         (long long)C);
    float eps = tern_graph_attr_float(c->n, "epsilon", 1e-5f);
    tern_host_tensor *o;
    if ((st = eout(c, 0, x->type, x->rank, x->dims, &o)) || !o)
        return st;
    size_t sp = 1;
    for (int d = 2; d < x->rank; d++)
        sp *= (size_t)x->dims[d];
    for (size_t q = 0; q < x->count; q++) {
        size_t ch = (q / sp) % (size_t)C;
        double inv = 1.0 / sqrt((double)IN(4)->f[ch] + eps);
        o->f[q] = (float)(((double)x->f[q] - IN(3)->f[ch]) * inv * IN(1)->f[ch] + IN(2)->f[ch]);
    }
    graph_tensor_normalize(o);
    return TERN_OK;
}

tern_status graph_ev_instancenorm(const ectx *c)
{
    tern_status st;
    for (int k = 0; k < 3; k++)
        if ((st = ereq(c, k, 1)))
            return st;
    const tern_host_tensor *x = IN(0);
    if (x->rank < 3)
        return efail(c, TERN_ERR_INVALID, "input rank %d below 3", x->rank);
    int64_t C = x->dims[1];
    if (IN(1)->count != (size_t)C || IN(2)->count != (size_t)C)
        return efail(c, TERN_ERR_INVALID, "scale/B must have %lld elements", (long long)C);
    float eps = tern_graph_attr_float(c->n, "epsilon", 1e-5f);
    tern_host_tensor *o;
    if ((st = eout(c, 0, x->type, x->rank, x->dims, &o)) || !o)
        return st;
    size_t sp = x->count / (size_t)(x->dims[0] * C > 0 ? x->dims[0] * C : 1);
    for (size_t q = 0; q < (size_t)(x->dims[0] * C); q++) {
        const float *p = x->f + q * sp;
        double inv, mean = row_moments(p, sp, eps, &inv);
        size_t ch = q % (size_t)C;
        for (size_t e = 0; e < sp; e++)
            o->f[q * sp + e] = (float)((p[e] - mean) * inv * IN(1)->f[ch] + IN(2)->f[ch]);
    }
    graph_tensor_normalize(o);
    return TERN_OK;
}

tern_status graph_ev_layernorm(const ectx *c)
{
    tern_status st;
    if ((st = ereq(c, 0, 1)) || (st = ereq(c, 1, 1)))
        return st;
    const tern_host_tensor *x = IN(0), *sc = IN(1), *b = IN(2);
    if (b && !b->f)
        return efail(c, TERN_ERR_INVALID, "B must be float");
    int ax;
    char why[200];
    if (graph_norm_axis(tern_graph_attr_int(c->n, "axis", -1), x->rank, &ax, why, sizeof why, "axis"))
        return efail(c, TERN_ERR_INVALID, "%s", why);
    float eps = tern_graph_attr_float(c->n, "epsilon", 1e-5f);
    size_t inner = 1;
    for (int d = ax; d < x->rank; d++)
        inner *= (size_t)x->dims[d];
    size_t outer = inner ? x->count / inner : 0;
    /* Scale and B broadcast to the normalised shape */
    if ((sc->count != inner && sc->count != 1) || (b && b->count != inner && b->count != 1))
        return efail(c, TERN_ERR_INVALID, "Scale/B have %zu/%zu elements, the normalised shape has %zu", sc->count,
                     b ? b->count : 0, inner);
    int64_t sdims[TERN_GRAPH_MAX_RANK];
    for (int d = 0; d < x->rank; d++)
        sdims[d] = d < ax ? x->dims[d] : 1;
    tern_host_tensor *o, *om, *oi;
    if ((st = eout(c, 0, x->type, x->rank, x->dims, &o)) || (st = eout(c, 1, TERN_ELEM_FLOAT, x->rank, sdims, &om)) ||
        (st = eout(c, 2, TERN_ELEM_FLOAT, x->rank, sdims, &oi)))
        return st;
    for (size_t q = 0; q < outer; q++)
        graph_ev_layernorm_row(x->f + q * inner, o ? o->f + q * inner : NULL, inner, sc, b, eps, om ? &om->f[q] : NULL,
                      oi ? &oi->f[q] : NULL);
    if (o)
        graph_tensor_normalize(o);
    return TERN_OK;
}
