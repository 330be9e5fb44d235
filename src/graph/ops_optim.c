/* tern.SGDUpdate and tern.AdamUpdate: one weight's fused optimizer step (include/tern/ops.def). Shape inference
 * (every output shaped like the weight, fp32) and the host evaluator, which computes each element with the fp32
 * operations, in the order, of the step graph's node-by-node update (src/train/step_graph.c, build_update):
 *
 *   SGDUpdate(p, g, lr [, buf, coef]):  g *= coef; d = g + p wd; buf = buf mu + d; d = nesterov ? d + buf mu : buf;
 *                                       p' = p - d lr                      (outputs p', buf')
 *   AdamUpdate(p, g, m, v, step, bc2s [, decay, coef]):  g *= coef; pp = adamw ? p decay : p; g += p wd (Adam);
 *                                       m = m b1 + g (1 - b1); v = v b2 + (g g)(1 - b2);
 *                                       p' = pp - (m / (sqrt(v) / bc2s + eps)) step    (outputs p', m', v')
 *
 *   AdamUpdate with lamb = 1 (LAMB's first pass; input 4 is bc1, no decay):  g *= coef; m, v as Adam;
 *                                       r = (m / bc1) / (sqrt(v) / bc2s + eps); r += p wd      (outputs r, m', v')
 *                                       (the trust ratio from ||p||, ||r|| and p - r (trust lr) are other nodes)
 *
 * wd, mu, b1, b2, 1 - b1, 1 - b2 and eps are float attributes (the fp32 values of the unfused graph's constants);
 * an absent optional input is "" (or omitted at the end). Lowered by src/compiler/lower_optim.c. */
#include "eval_internal.h"
#include "infer_internal.h"

#include <math.h>

static int is_adam(const tern_graph_node *n) { return n->op_id == TERN_GOP_ADAM_UPDATE; }

static const char *const sgd_in[] = {"p", "g", "lr", "buf", "coef"};
static const char *const adam_in[] = {"p", "g", "m", "v", "step_size", "bc2_sqrt", "decay", "coef"};

tern_status graph_infer_optim(ictx *c)
{
    const tern_graph_node *n = c->n;
    const int adam = is_adam(n), nin = n->n_inputs;
    const char *const *names = adam ? adam_in : sgd_in;
    const tern_graph_value *p = V(c, 0);
    if (!p)
        return ifail(c, TERN_ERR_INVALID, "input 0 (p, the weight) is absent");
    int64_t cnt = 1;
    for (int d = 0; d < p->rank; d++) {
        if (p->dims[d] < 0)
            return ifail(c, TERN_ERR_INVALID, "the weight has no static shape (dimension %d)", d);
        cnt *= p->dims[d];
    }
    for (int k = 0; k < nin; k++) {
        const tern_graph_value *x = V(c, k);
        int tensor = adam ? k < 4 : (k < 2 || k == 3);
        if (!x) {
            if (k < (adam ? 6 : 3))
                return ifail(c, TERN_ERR_INVALID, "input %d (%s) is absent; it is required", k, names[k]);
            continue;
        }
        if (x->type != TERN_ELEM_FLOAT && x->type != TERN_ELEM_BFLOAT16 && x->type != TERN_ELEM_FLOAT16)
            return ifail(c, TERN_ERR_INVALID, "input %d (%s) is %s; a float tensor is needed", k, names[k],
                         tern_elem_name(x->type));
        int64_t xc = 1;
        for (int d = 0; d < x->rank; d++)
            xc *= x->dims[d];
        if (tensor && (x->rank != p->rank || memcmp(x->dims, p->dims, sizeof(int64_t) * (size_t)p->rank)))
            return ifail(c, TERN_ERR_INVALID, "input %d (%s) must have the weight's shape (%lld elements, rank %d)", k,
                         names[k], (long long)cnt, p->rank);
        if (!tensor && xc != 1)
            return ifail(c, TERN_ERR_INVALID, "input %d (%s) must be one element, has %lld", k, names[k],
                         (long long)xc);
    }
    if (!adam && tern_graph_attr_float(n, "momentum", 0.0f) != 0 && !V(c, 3))
        return ifail(c, TERN_ERR_INVALID, "momentum %g needs input 3 (buf, the momentum buffer)",
                     (double)tern_graph_attr_float(n, "momentum", 0.0f));
    if (adam && tern_graph_attr_int(n, "lamb", 0) && (tern_graph_attr_int(n, "adamw", 0) || (nin > 6 && V(c, 6))))
        return ifail(c, TERN_ERR_INVALID, "lamb = 1 takes no adamw attribute and no input 6 (decay): LAMB's "
                     "decay is r += p weight_decay");
    if (adam && !tern_graph_attr_int(n, "lamb", 0) && tern_graph_attr_int(n, "adamw", 0) &&
        tern_graph_attr_float(n, "weight_decay", 0.0f) != 0 && !V(c, 6))
        return ifail(c, TERN_ERR_INVALID, "AdamW with weight_decay needs input 6 (decay, 1 - lr wd)");
    int nout = adam ? 3 : (V(c, 3) ? 2 : 1);
    if (n->n_outputs > nout)
        return ifail(c, TERN_ERR_INVALID, "%d outputs; %s has %d here", n->n_outputs, n->op, nout);
    for (int k = 0; k < n->n_outputs; k++)
        set_out(c, k, TERN_ELEM_FLOAT, p->rank, p->dims);
    return TERN_OK;
}

static float el(const tern_host_tensor *t, size_t i) { return t->f ? t->f[i] : (float)t->i[i]; }

/* Adam's moments m' = b1 m + (1 - b1) g, v' = b2 v + (1 - b2) g^2 and the denominator sqrt(v') / bc2s + eps, each
 * step rounded to fp32 in the order the node-by-node graph computes it (Adam, AdamW and LAMB's direction). */
static float adam_den(float m0, float v0, float g, float b1, float omb1, float b2, float omb2, float bc2s, float eps,
                      float *m, float *v)
{
    float ma = m0 * b1, mb = g * omb1;
    *m = ma + mb;
    float va = v0 * b2, gg = g * g, vb = gg * omb2;
    *v = va + vb;
    float den = sqrtf(*v);
    den = den / bc2s;
    return den + eps;
}

tern_status graph_ev_optim(const ectx *c)
{
    const tern_graph_node *n = c->n;
    const int adam = is_adam(n);
    tern_status st;
    const int need = adam ? 6 : 3;
    for (int k = 0; k < need; k++)
        if ((st = ereq(c, k, 1)))
            return st;
    const tern_host_tensor *p = IN(0), *g = IN(1);
    const size_t N = p->count;
    const tern_host_tensor *s0 = adam ? IN(2) : IN(3), *s1 = adam ? IN(3) : NULL;
    const tern_host_tensor *lr = adam ? IN(4) : IN(2), *bc2 = adam ? IN(5) : NULL, *decay = adam ? IN(6) : NULL;
    const tern_host_tensor *coef = adam ? IN(7) : IN(4);
    if (g->count != N || (s0 && s0->count != N) || (s1 && s1->count != N) || lr->count != 1 ||
        (bc2 && bc2->count != 1) || (decay && decay->count != 1) || (coef && coef->count != 1))
        return efail(c, TERN_ERR_INVALID, "operand sizes do not match (infer checks the shapes)");
    const float wd = tern_graph_attr_float(n, "weight_decay", 0.0f), mu = tern_graph_attr_float(n, "momentum", 0.0f);
    const float b1 = tern_graph_attr_float(n, "beta1", 0.9f), b2 = tern_graph_attr_float(n, "beta2", 0.999f);
    const float omb1 = tern_graph_attr_float(n, "one_minus_beta1", 0.1f);
    const float omb2 = tern_graph_attr_float(n, "one_minus_beta2", 0.001f);
    const float eps = tern_graph_attr_float(n, "eps", 1e-8f);
    const int nesterov = (int)tern_graph_attr_int(n, "nesterov", 0), adamw = (int)tern_graph_attr_int(n, "adamw", 0);
    const int lamb = adam && tern_graph_attr_int(n, "lamb", 0) != 0;
    if (lamb && (adamw || decay))
        return efail(c, TERN_ERR_INVALID, "lamb = 1 takes no adamw attribute and no input 6 (decay)");
    if (!adam && mu != 0 && !s0)
        return efail(c, TERN_ERR_INVALID, "momentum %g needs input 3 (buf)", (double)mu);
    if (adam && adamw && wd != 0 && !decay)
        return efail(c, TERN_ERR_INVALID, "AdamW with weight_decay needs input 6 (decay)");
    tern_host_tensor *o[3] = {NULL, NULL, NULL};
    const int nout = adam ? 3 : (s0 ? 2 : 1);
    tern_error te;
    for (int k = 0; k < nout; k++)
        if (tern_host_tensor_new(TERN_ELEM_FLOAT, p->rank, p->dims, &o[k], &te)) {
            for (int j = 0; j < k; j++)
                tern_host_tensor_free(o[j]);
            return efail(c, te.code, "output %d: %s", k, te.msg);
        }
    /* volatile-free fp32 arithmetic: every intermediate is a float, as each node's output is */
    const float L = el(lr, 0), C = coef ? el(coef, 0) : 1.0f;
    for (size_t i = 0; i < N; i++) {
        float pi = el(p, i), gi = el(g, i);
        if (coef)
            gi = gi * C;
        if (!adam) {
            float d = gi;
            if (wd != 0) {
                float t = pi * wd;
                d = d + t;
            }
            if (s0) {
                float t = el(s0, i) * mu;
                float buf = t + d;
                o[1]->f[i] = buf;
                if (nesterov) {
                    float u = buf * mu;
                    d = d + u;
                } else {
                    d = buf;
                }
            }
            float t = d * L;
            o[0]->f[i] = pi - t;
        } else if (lamb) {
            float m, v, den = adam_den(el(s0, i), el(s1, i), gi, b1, omb1, b2, omb2, el(bc2, 0), eps, &m, &v);
            float r = m / L;
            r = r / den;
            if (wd != 0) {
                float t = pi * wd;
                r = r + t;
            }
            o[0]->f[i] = r;
            o[1]->f[i] = m;
            o[2]->f[i] = v;
        } else {
            float pp = pi;
            if (adamw && wd != 0)
                pp = pi * el(decay, 0);
            if (!adamw && wd != 0) {
                float t = pi * wd;
                gi = gi + t;
            }
            float m, v, den = adam_den(el(s0, i), el(s1, i), gi, b1, omb1, b2, omb2, el(bc2, 0), eps, &m, &v);
            float r = m / den;
            r = r * L;
            o[0]->f[i] = pp - r;
            o[1]->f[i] = m;
            o[2]->f[i] = v;
        }
    }
    for (int k = 0; k < nout; k++)
        ekeep(c, k, o[k]);
    return TERN_OK;
}
