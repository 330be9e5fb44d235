/* The host reference of tern.AttentionGrad, the fused attention backward (lowered on chip by
 * src/compiler/lower_attention_bwd.c). For each query head h (K/V head h / kv_rep) of
 * O = softmax(mask(scale * Q K^T) [+ causal mask]) V (M the optional mask, input 6, broadcasting to the scores:
 * added to them, attribute mask 3, or a Where condition, mask 1 / 2, that replaces the scores where M != 0 / == 0 by
 * the attribute fill, which then get no gradient) it takes the forward's per-row statistic LSE (the logsumexp of the
 * scaled, masked scores: P = exp(scale * Q K^T - LSE) reproduces the probabilities without a max/sum pass) and
 * the output gradient dO (LSE may be omitted: it is then recomputed from the scores), and gives
 *
 *   delta = rowsum(dO * O),  dV = P^T dO,  dP = dO V^T,  dS = P * (dP - delta),  dQ = scale dS K,  dK = scale dS^T Q,
 *
 * dK and dV summed over the kv_rep query heads sharing a K/V head. Causal masks key j > query i (the upper
 * triangle from the top-left corner, torch's is_causal). The inputs are fp32 values (narrower types were
 * rounded to them), every product and sum runs in double, and the results are rounded once to the output type:
 * a reference for the device's bf16/fp32 matmuls, not a bit-exact model of them. */
#include <stdlib.h>
#include <string.h>

#include "eval_internal.h"

tern_status graph_ev_attention_grad(const ectx *c)
{
    tern_status st;
    for (int k = 0; k < 5; k++)
        if ((st = ereq(c, k, 1)))
            return st;
    /* LSE absent: recomputed here from the scores, as the device kernel does */
    const tern_host_tensor *Q = IN(0), *K = IN(1), *V = IN(2), *O = IN(3), *dO = IN(4), *L = IN(5), *M = IN(6);
    const int r = Q->rank;
    const int64_t rep = tern_graph_attr_int(c->n, "kv_rep", 1), causal = tern_graph_attr_int(c->n, "causal", 0);
    const int64_t mode = tern_graph_attr_int(c->n, "mask", 3);
    const double fill = tern_graph_attr_float(c->n, "fill", 0.0f);
    if (M && (mode < 1 || mode > 3))
        return efail(c, TERN_ERR_INVALID, "mask mode %lld (1, 2 or 3)", (long long)mode);
    if (r < 2 || K->rank != r || V->rank != r || rep < 1)
        return efail(c, TERN_ERR_INVALID, "Q, K, V of ranks %d, %d, %d with kv_rep %lld", r, K->rank, V->rank,
                     (long long)rep);
    const int64_t Sq = Q->dims[r - 2], D = Q->dims[r - 1], Sk = K->dims[r - 2], Dv = V->dims[r - 1];
    const float scale = tern_graph_attr_float(c->n, "scale", D > 0 ? 1.0f / sqrtf((float)D) : 1.0f);
    const size_t BH = Sq && D ? Q->count / (size_t)(Sq * D) : 0, BHkv = BH / (size_t)rep;
    if (BHkv * (size_t)rep != BH || (size_t)(Sk * D) * BHkv != K->count || (size_t)(Sk * Dv) * BHkv != V->count ||
        (size_t)(Sq * Dv) * BH != O->count || O->count != dO->count || (L && (size_t)Sq * BH != L->count))
        return efail(c, TERN_ERR_INVALID, "operand sizes do not match (infer checks the shapes)");
    /* the mask's element strides over the scores' dims (0 where it broadcasts) */
    int64_t mst[TERN_GRAPH_MAX_RANK] = {0};
    if (M) {
        int64_t ms[TERN_GRAPH_MAX_RANK];
        if (M->rank > r || M->rank < 1)
            return efail(c, TERN_ERR_INVALID, "mask M of rank %d for scores of rank %d", M->rank, r);
        ev_strides(M->rank, M->dims, ms);
        for (int d = 0; d < M->rank; d++) {
            int sd = d + r - M->rank;
            int64_t want = sd == r - 1 ? Sk : sd == r - 2 ? Sq : Q->dims[sd];
            if (M->dims[d] != 1 && M->dims[d] != want)
                return efail(c, TERN_ERR_INVALID, "mask M dim %d is %lld, the scores' is %lld", d,
                             (long long)M->dims[d], (long long)want);
            mst[sd] = M->dims[d] == 1 ? 0 : ms[d];
        }
    }
    tern_host_tensor *g[3] = {NULL, NULL, NULL};
    const tern_host_tensor *like[3] = {Q, K, V};
    tern_error te;
    for (int k = 0; k < 3; k++) /* all three computed (wanted or not: ekeep drops the rest) */
        if (tern_host_tensor_new(Q->type, r, like[k]->dims, &g[k], &te)) {
            for (int j = 0; j < k; j++)
                tern_host_tensor_free(g[j]);
            return efail(c, te.code, "output %d: %s", k, te.msg);
        }
    double *acc = calloc((size_t)(Sq * D + Sk * D + Sk * Dv) + 3 * (size_t)Sk + 1, sizeof(double));
    if (!acc) {
        for (int k = 0; k < 3; k++)
            tern_host_tensor_free(g[k]);
        return efail(c, TERN_ERR_NOMEM, "no memory for the gradient accumulators");
    }
    double *dq = acc, *dk = dq + Sq * D, *dv = dk + Sk * D, *p = dv + Sk * Dv, *ds = p + Sk, *fixed = ds + Sk;
    for (size_t kv = 0; kv < BHkv; kv++) {
        memset(dk, 0, sizeof(double) * (size_t)(Sk * (D + Dv)));
        const float *k = K->f + kv * (size_t)(Sk * D), *v = V->f + kv * (size_t)(Sk * Dv);
        for (size_t h = kv * (size_t)rep; h < (kv + 1) * (size_t)rep; h++) {
            const float *q = Q->f + h * (size_t)(Sq * D), *o = O->f + h * (size_t)(Sq * Dv),
                        *go = dO->f + h * (size_t)(Sq * Dv);
            int64_t moff = 0; /* head h's offset into the mask */
            size_t rest = h;
            for (int d = r - 3; d >= 0; d--) {
                moff += (int64_t)(rest % (size_t)Q->dims[d]) * mst[d];
                rest /= (size_t)Q->dims[d];
            }
            memset(dq, 0, sizeof(double) * (size_t)(Sq * D));
            for (int64_t i = 0; i < Sq; i++) {
                double delta = 0, mx = -INFINITY, sum = 0;
                for (int64_t u = 0; u < Dv; u++)
                    delta += (double)go[i * Dv + u] * o[i * Dv + u];
                for (int64_t j = 0; j < Sk; j++) { /* the scaled scores first (for the recomputed LSE) */
                    double s = 0;
                    for (int64_t u = 0; u < D; u++)
                        s += (double)q[i * D + u] * k[j * D + u];
                    p[j] = causal && j > i ? -INFINITY : scale * s;
                    fixed[j] = 0; /* 1: a Where mask replaced the score (no gradient reaches it) */
                    if (M) {
                        double mv = tern_host_tensor_get(M, (size_t)(moff + i * mst[r - 2] + j * mst[r - 1]));
                        if (mode == 3)
                            p[j] += mv;
                        else if ((mode == 1) == (mv != 0) && !(causal && j > i))
                            p[j] = fill, fixed[j] = 1;
                    }
                    mx = p[j] > mx ? p[j] : mx;
                }
                for (int64_t j = 0; !L && j < Sk; j++)
                    sum += exp(p[j] - mx);
                const double lse = L ? (double)L->f[h * (size_t)Sq + (size_t)i] : mx + log(sum);
                for (int64_t j = 0; j < Sk; j++) {
                    if (causal && j > i) {
                        p[j] = ds[j] = 0;
                        continue;
                    }
                    double dp = 0;
                    for (int64_t u = 0; u < Dv; u++)
                        dp += (double)go[i * Dv + u] * v[j * Dv + u];
                    p[j] = exp(p[j] - lse);
                    ds[j] = fixed[j] ? 0 : p[j] * (dp - delta) * scale;
                }
                for (int64_t j = 0; j < Sk; j++) {
                    if (p[j] == 0 && ds[j] == 0)
                        continue;
                    for (int64_t u = 0; u < Dv; u++)
                        dv[j * Dv + u] += p[j] * go[i * Dv + u];
                    for (int64_t u = 0; u < D; u++) {
                        dq[i * D + u] += ds[j] * k[j * D + u];
                        dk[j * D + u] += ds[j] * q[i * D + u];
                    }
                }
            }
            for (int64_t u = 0; u < Sq * D; u++)
                g[0]->f[h * (size_t)(Sq * D) + (size_t)u] = (float)dq[u];
        }
        for (int64_t u = 0; u < Sk * D; u++)
            g[1]->f[kv * (size_t)(Sk * D) + (size_t)u] = (float)dk[u];
        for (int64_t u = 0; u < Sk * Dv; u++)
            g[2]->f[kv * (size_t)(Sk * Dv) + (size_t)u] = (float)dv[u];
    }
    free(acc);
    for (int k = 0; k < 3; k++) {
        graph_tensor_normalize(g[k]);
        ekeep(c, k, g[k]);
    }
    return TERN_OK;
}

/* ---- reference evaluation (the host evaluator's rules for this family) ---- */

/* tern.Attention(Q, KT, V [, mask]): softmax(mask(scale(Q @ KT))) @ V, with the attributes of the fusion
 * (passes.c): the same arithmetic as the nodes it replaced (fp32 products, the scale as one fp32 divide or
 * multiply, the Where or Add, softmax statistics in double). In the layout form (attribute "q" present) Q, K and
 * V are read from their sources through the {off, sB, sH, sS, sD} views and the output written through "o" into
 * a tensor of shape "out_shape". */
static tern_status attention_core(const ectx *c, const tern_host_tensor *Q, const tern_host_tensor *KT,
                                  const tern_host_tensor *V, tern_host_tensor **out)
{
    tern_status st;
    int scale_op = (int)tern_graph_attr_int(c->n, "scale_op", 0), mode = (int)tern_graph_attr_int(c->n, "mask", 0);
    float scale = tern_graph_attr_float(c->n, "scale", 1.0f), fill = tern_graph_attr_float(c->n, "fill", 0.0f);
    const tern_host_tensor *m = IN(3);
    if (scale_op < 0 || scale_op > 2 || mode < 0 || mode > 3 || (mode != 0) != (m != NULL))
        return efail(c, TERN_ERR_INVALID, "scale_op %d / mask %d with %s mask input", scale_op, mode,
                     m ? "a" : "no");
    tern_host_tensor *s;
    if ((st = graph_ev_matmul_tensors(c, Q, KT, &s)))
        return st;
    int r = s->rank;
    size_t Sk = (size_t)s->dims[r - 1];
    int64_t mst[TERN_GRAPH_MAX_RANK] = {0}, idx[TERN_GRAPH_MAX_RANK] = {0};
    if (m) {
        if (m->rank > r) {
            tern_host_tensor_free(s);
            return efail(c, TERN_ERR_INVALID, "mask of rank %d for scores of rank %d", m->rank, r);
        }
        int64_t ms[TERN_GRAPH_MAX_RANK];
        ev_strides(m->rank, m->dims, ms);
        for (int d = 0; d < m->rank; d++) {
            int sd = d + r - m->rank;
            if (m->dims[d] != 1 && m->dims[d] != s->dims[sd]) {
                tern_host_tensor_free(s);
                return efail(c, TERN_ERR_INVALID, "mask dim %d is %lld, the scores' is %lld", d,
                             (long long)m->dims[d], (long long)s->dims[sd]);
            }
            mst[sd] = m->dims[d] == 1 ? 0 : ms[d];
        }
    }
    for (size_t e = 0; e < s->count; e++) {
        float x = s->f[e];
        if (scale_op == 1)
            x = x / scale;
        else if (scale_op == 2)
            x = x * scale;
        if (m) {
            int64_t off = 0;
            for (int d = 0; d < r; d++)
                off += idx[d] * mst[d];
            double mv = tern_host_tensor_get(m, (size_t)off);
            if (mode == 1 && mv != 0)
                x = fill;
            else if (mode == 2 && mv == 0)
                x = fill;
            else if (mode == 3)
                x = x + (float)mv;
            ev_next_index(idx, s->dims, r);
        }
        s->f[e] = x;
    }
    for (size_t row = 0; row < s->count / Sk; row++) {
        float *p = s->f + row * Sk;
        double mx = -INFINITY, sum = 0;
        for (size_t e = 0; e < Sk; e++)
            mx = p[e] > mx ? p[e] : mx;
        for (size_t e = 0; e < Sk; e++)
            sum += exp((double)p[e] - mx);
        for (size_t e = 0; e < Sk; e++)
            p[e] = (float)(exp((double)p[e] - mx) / sum);
    }
    st = graph_ev_matmul_tensors(c, s, V, out);
    tern_host_tensor_free(s);
    return st;
}

/* The {off, sB, sH, sS, sD} view attribute `name` over a source of `count` elements and logical dims ld: every
 * address inside the source. */
static tern_status att_view(const ectx *c, const char *name, size_t count, const int64_t *ld, int64_t *v)
{
    const tern_graph_attr *a = tern_graph_node_attr(c->n, name);
    if (!a || a->type != TERN_ATTR_INTS || a->n != 5)
        return efail(c, TERN_ERR_INVALID, "layout attribute \"%s\" must be 5 ints {off, sB, sH, sS, sD}", name);
    int64_t hi = a->ints[0];
    for (int d = 0; d < 5; d++) {
        v[d] = a->ints[d];
        if (v[d] < 0 || v[d] > (int64_t)1 << 40)
            return efail(c, TERN_ERR_INVALID, "layout attribute \"%s\" has %lld at %d (must be 0..2^40)", name,
                         (long long)v[d], d);
        if (d > 0)
            hi += (ld[d - 1] - 1) * v[d];
    }
    if ((uint64_t)hi >= count)
        return efail(c, TERN_ERR_INVALID, "layout \"%s\" reaches element %lld of a tensor of %zu", name,
                     (long long)hi, count);
    return TERN_OK;
}

/* Between a dense logical [B, H, S, D] tensor (or [B, H, D, S] when kt) and its strided layout view
 * {off, sB, sH, sS, sD} with logical dims ld: gather into dense, or scatter from it. Head h is the view's head
 * h / rep (grouped-query K and V: rep query heads share one). */
static void att_move(float *dense, float *strided, const int64_t *v, const int64_t *ld, int kt, int gather,
                     int64_t rep)
{
    size_t n = 0;
    int64_t outer = kt ? ld[3] : ld[2], inner = kt ? ld[2] : ld[3];
    int64_t so = kt ? v[4] : v[3], si = kt ? v[3] : v[4];
    for (int64_t b = 0; b < ld[0]; b++)
        for (int64_t h = 0; h < ld[1]; h++)
            for (int64_t i = 0; i < outer; i++)
                for (int64_t j = 0; j < inner; j++, n++) {
                    float *x = &strided[v[0] + b * v[1] + h / rep * v[2] + i * so + j * si];
                    if (gather)
                        dense[n] = *x;
                    else
                        *x = dense[n];
                }
}

tern_status graph_ev_attention(const ectx *c)
{
    tern_status st;
    if ((st = ereq(c, 0, 1)) || (st = ereq(c, 1, 1)) || (st = ereq(c, 2, 1)))
        return st;
    tern_host_tensor *o;
    if (!tern_graph_node_attr(c->n, "q")) {
        if ((st = attention_core(c, IN(0), IN(1), IN(2), &o)))
            return st;
    } else {
        const tern_graph_attr *da = tern_graph_node_attr(c->n, "dims"), *oa = tern_graph_node_attr(c->n, "out_shape");
        if (!da || da->type != TERN_ATTR_INTS || da->n != 6 || !oa || oa->type != TERN_ATTR_INTS || oa->n < 1 ||
            oa->n > TERN_GRAPH_MAX_RANK)
            return efail(c, TERN_ERR_INVALID, "layout form needs \"dims\" (6 ints) and \"out_shape\"");
        const int64_t *dm = da->ints; /* B, H, Sq, Sk, D, Dv */
        for (int d = 0; d < 6; d++)
            if (dm[d] < 1 || dm[d] > (int64_t)1 << 20)
                return efail(c, TERN_ERR_INVALID, "dims[%d] = %lld", d, (long long)dm[d]);
        int64_t rep = tern_graph_attr_int(c->n, "kv_rep", 1); /* query heads per K/V head */
        if (rep < 1 || dm[1] % rep)
            return efail(c, TERN_ERR_INVALID, "kv_rep %lld does not divide the %lld heads", (long long)rep,
                         (long long)dm[1]);
        int64_t lq[4] = {dm[0], dm[1], dm[2], dm[4]}, lk[4] = {dm[0], dm[1] / rep, dm[3], dm[4]},
                lv[4] = {dm[0], dm[1] / rep, dm[3], dm[5]}, lo[4] = {dm[0], dm[1], dm[2], dm[5]};
        int64_t vq[5], vk[5], vv[5], vo[5], on = 1;
        for (size_t d = 0; d < oa->n; d++)
            on *= oa->ints[d] >= 0 ? oa->ints[d] : 0;
        if (on != dm[0] * dm[1] * dm[2] * dm[5])
            return efail(c, TERN_ERR_INVALID, "out_shape has %lld elements for an output of %lld", (long long)on,
                         (long long)(dm[0] * dm[1] * dm[2] * dm[5]));
        if ((st = att_view(c, "q", IN(0)->count, lq, vq)) || (st = att_view(c, "k", IN(1)->count, lk, vk)) ||
            (st = att_view(c, "v", IN(2)->count, lv, vv)) || (st = att_view(c, "o", (size_t)on, lo, vo)))
            return st;
        tern_host_tensor *t[3] = {NULL, NULL, NULL};
        int64_t qd[4] = {dm[0], dm[1], dm[2], dm[4]}, kd[4] = {dm[0], dm[1], dm[4], dm[3]},
                vd[4] = {dm[0], dm[1], dm[3], dm[5]};
        tern_error e;
        if (tern_host_tensor_new(TERN_ELEM_FLOAT, 4, qd, &t[0], &e) ||
            tern_host_tensor_new(TERN_ELEM_FLOAT, 4, kd, &t[1], &e) ||
            tern_host_tensor_new(TERN_ELEM_FLOAT, 4, vd, &t[2], &e)) {
            for (int k = 0; k < 3; k++)
                tern_host_tensor_free(t[k]);
            return efail(c, e.code, "%s", e.msg);
        }
        int64_t lkf[4] = {dm[0], dm[1], dm[3], dm[4]}, lvf[4] = {dm[0], dm[1], dm[3], dm[5]}; /* every query head */
        att_move(t[0]->f, IN(0)->f, vq, lq, 0, 1, 1);
        att_move(t[1]->f, IN(1)->f, vk, lkf, 1, 1, rep);
        att_move(t[2]->f, IN(2)->f, vv, lvf, 0, 1, rep);
        tern_host_tensor *lo_t = NULL;
        st = attention_core(c, t[0], t[1], t[2], &lo_t);
        for (int k = 0; k < 3; k++)
            tern_host_tensor_free(t[k]);
        if (st)
            return st;
        if ((st = tern_host_tensor_new(TERN_ELEM_FLOAT, (int)oa->n, oa->ints, &o, &e))) {
            tern_host_tensor_free(lo_t);
            return efail(c, e.code, "%s", e.msg);
        }
        att_move(lo_t->f, o->f, vo, lo, 0, 0, 1);
        tern_host_tensor_free(lo_t);
    }
    graph_tensor_normalize(o);
    ekeep(c, 0, o);
    return TERN_OK;
}
