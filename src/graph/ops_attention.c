/* The host reference of tern.AttentionGrad, the fused attention backward (lowered on chip by
 * src/compiler/lower_attention_bwd.c). For each query head h (K/V head h / kv_rep) of
 * O = softmax(scale * Q K^T [+ causal mask]) V it takes the forward's per-row statistic LSE (the logsumexp of the
 * scaled, masked scores: P = exp(scale * Q K^T - LSE) reproduces the probabilities without a max/sum pass) and
 * the output gradient dO, and gives
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
    for (int k = 0; k < 6; k++)
        if ((st = ereq(c, k, 1)))
            return st;
    const tern_host_tensor *Q = IN(0), *K = IN(1), *V = IN(2), *O = IN(3), *dO = IN(4), *L = IN(5);
    const int r = Q->rank;
    const int64_t rep = tern_graph_attr_int(c->n, "kv_rep", 1), causal = tern_graph_attr_int(c->n, "causal", 0);
    if (r < 2 || K->rank != r || V->rank != r || rep < 1)
        return efail(c, TERN_ERR_INVALID, "Q, K, V of ranks %d, %d, %d with kv_rep %lld", r, K->rank, V->rank,
                     (long long)rep);
    const int64_t Sq = Q->dims[r - 2], D = Q->dims[r - 1], Sk = K->dims[r - 2], Dv = V->dims[r - 1];
    const float scale = tern_graph_attr_float(c->n, "scale", D > 0 ? 1.0f / sqrtf((float)D) : 1.0f);
    const size_t BH = Sq && D ? Q->count / (size_t)(Sq * D) : 0, BHkv = BH / (size_t)rep;
    if (BHkv * (size_t)rep != BH || (size_t)(Sk * D) * BHkv != K->count || (size_t)(Sk * Dv) * BHkv != V->count ||
        (size_t)(Sq * Dv) * BH != O->count || O->count != dO->count || (size_t)Sq * BH != L->count)
        return efail(c, TERN_ERR_INVALID, "operand sizes do not match (infer checks the shapes)");
    tern_host_tensor *g[3] = {NULL, NULL, NULL};
    const tern_host_tensor *like[3] = {Q, K, V};
    tern_error te;
    for (int k = 0; k < 3; k++) /* all three computed (wanted or not: ekeep drops the rest) */
        if (tern_host_tensor_new(Q->type, r, like[k]->dims, &g[k], &te)) {
            for (int j = 0; j < k; j++)
                tern_host_tensor_free(g[j]);
            return efail(c, te.code, "output %d: %s", k, te.msg);
        }
    double *acc = calloc((size_t)(Sq * D + Sk * D + Sk * Dv) + 2 * (size_t)Sk + 1, sizeof(double));
    if (!acc) {
        for (int k = 0; k < 3; k++)
            tern_host_tensor_free(g[k]);
        return efail(c, TERN_ERR_NOMEM, "no memory for the gradient accumulators");
    }
    double *dq = acc, *dk = dq + Sq * D, *dv = dk + Sk * D, *p = dv + Sk * Dv, *ds = p + Sk;
    for (size_t kv = 0; kv < BHkv; kv++) {
        memset(dk, 0, sizeof(double) * (size_t)(Sk * (D + Dv)));
        const float *k = K->f + kv * (size_t)(Sk * D), *v = V->f + kv * (size_t)(Sk * Dv);
        for (size_t h = kv * (size_t)rep; h < (kv + 1) * (size_t)rep; h++) {
            const float *q = Q->f + h * (size_t)(Sq * D), *o = O->f + h * (size_t)(Sq * Dv),
                        *go = dO->f + h * (size_t)(Sq * Dv);
            memset(dq, 0, sizeof(double) * (size_t)(Sq * D));
            for (int64_t i = 0; i < Sq; i++) {
                double delta = 0, lse = L->f[h * (size_t)Sq + (size_t)i];
                for (int64_t u = 0; u < Dv; u++)
                    delta += (double)go[i * Dv + u] * o[i * Dv + u];
                for (int64_t j = 0; j < Sk; j++) {
                    if (causal && j > i) {
                        p[j] = ds[j] = 0;
                        continue;
                    }
                    double s = 0, dp = 0;
                    for (int64_t u = 0; u < D; u++)
                        s += (double)q[i * D + u] * k[j * D + u];
                    for (int64_t u = 0; u < Dv; u++)
                        dp += (double)go[i * Dv + u] * v[j * Dv + u];
                    p[j] = exp(scale * s - lse);
                    ds[j] = p[j] * (dp - delta) * scale;
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
