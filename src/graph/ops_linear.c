/* The linear family: shape inference and the host reference evaluation of MatMul (numpy batch broadcasting of
 * both operands), tern.MatMulBias (the fusion's linear layer with bias, residual, activation and layer norm) and
 * Gemm. infer_node dispatches here by op id; eval.c's table names the evaluators. */
#include "infer_internal.h"
#include "eval_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* MatMul (numpy batch broadcasting) and tern.MatMulBias (bias, residual, fused layer norm checked) */
tern_status graph_infer_matmul(ictx *c)
{
    tern_status st;
    if ((st = need_rank(c, 0)) || (st = need_rank(c, 1)))
        return st;
    const tern_graph_value *a = V(c, 0), *b = V(c, 1);
    if (a->rank < 1 || b->rank < 1)
        return ifail(c, TERN_ERR_INVALID, "operands must have rank >= 1 (got %d and %d)", a->rank, b->rank);
    if (a->type != b->type)
        return ifail(c, TERN_ERR_INVALID, "operand types differ: %s and %s", tern_elem_name(a->type),
                     tern_elem_name(b->type));
    int64_t M = a->rank == 1 ? 1 : a->dims[a->rank - 2], Ka = a->dims[a->rank - 1];
    int64_t Kb = b->rank == 1 ? b->dims[0] : b->dims[b->rank - 2], N = b->rank == 1 ? 1 : b->dims[b->rank - 1];
    if (Ka >= 0 && Kb >= 0 && Ka != Kb)
        return ifail(c, TERN_ERR_INVALID, "inner dims differ: \"%s\" has K = %lld, \"%s\" has K = %lld", a->name,
                     (long long)Ka, b->name, (long long)Kb);
    int ra = a->rank > 2 ? a->rank - 2 : 0, rb = b->rank > 2 ? b->rank - 2 : 0, r;
    int64_t dims[TERN_GRAPH_MAX_RANK + 2];
    if (graph_broadcast(ra, a->dims, rb, b->dims, &r, dims, c->why, sizeof c->why))
        return ifail(c, TERN_ERR_INVALID, "batch dims: %s", c->why);
    if (a->rank > 1)
        dims[r++] = M;
    if (b->rank > 1)
        dims[r++] = N;
    if (r > TERN_GRAPH_MAX_RANK)
        return ifail(c, TERN_ERR_RANGE, "result rank above the limit");
    if (c->n->op_id == TERN_GOP_MATMUL_BIAS) {
        const tern_graph_value *bias = V(c, 2), *res = V(c, 3);
        if (!bias || !tern_elem_is_float(a->type))
            return ifail(c, TERN_ERR_INVALID, "needs float A, W and a bias");
        int same = res ? res->rank == r && res->type == a->type : 1;
        for (int d = 0; res && same && d < r; d++)
            same = res->dims[d] == dims[d] || res->dims[d] < 0 || dims[d] < 0;
        if (!same)
            return ifail(c, TERN_ERR_INVALID, "the residual \"%s\" must have the output's type and shape", res->name);
        if (tern_graph_attr_int(c->n, "layernorm", 0)) {
            const tern_graph_value *gm = V(c, 4), *bt = V(c, 5);
            if (!gm || !tern_elem_is_float(gm->type) || (bt && !tern_elem_is_float(bt->type)))
                return ifail(c, TERN_ERR_INVALID, "the fused layer norm needs a float scale (input 4) and bias");
        }
    }
    set_out(c, 0, a->type, r, dims);
    if (c->n->n_outputs > 1) /* the fused layer norm's output next to the layer's (pre-LN fusion) */
        set_out(c, 1, a->type, r, dims);
    return TERN_OK;
}

/* GEMM */
tern_status graph_infer_gemm(ictx *c)
{
    const tern_graph_node *n = c->n;
    tern_status st;
    int64_t dims[TERN_GRAPH_MAX_RANK];
    if ((st = need_rank(c, 0)) || (st = need_rank(c, 1)) || (st = need_float(c, 0)))
        return st;
    const tern_graph_value *a = V(c, 0), *b = V(c, 1);
    if (a->rank != 2 || b->rank != 2)
        return ifail(c, TERN_ERR_INVALID, "A and B must be 2-D (got rank %d and %d)", a->rank, b->rank);
    if (b->type != a->type || (V(c, 2) && V(c, 2)->type != a->type))
        return ifail(c, TERN_ERR_INVALID, "A, B and C types differ: %s, %s, %s", tern_elem_name(a->type),
                     tern_elem_name(b->type), V(c, 2) ? tern_elem_name(V(c, 2)->type) : "-");
    int ta = (int)tern_graph_attr_int(n, "transA", 0), tb = (int)tern_graph_attr_int(n, "transB", 0);
    int64_t Ka = a->dims[ta ? 0 : 1], Kb = b->dims[tb ? 1 : 0];
    if (Ka >= 0 && Kb >= 0 && Ka != Kb)
        return ifail(c, TERN_ERR_INVALID, "inner dims differ: op(A) has K = %lld, op(B) has K = %lld",
                     (long long)Ka, (long long)Kb);
    dims[0] = a->dims[ta ? 1 : 0];
    dims[1] = b->dims[tb ? 0 : 1];
    set_out(c, 0, a->type, 2, dims);
    return TERN_OK;
}

/* ---- reference evaluation (the host evaluator's rules for this family) ---- */

/* ---- MatMul ---- */
tern_status graph_ev_matmul_tensors(const ectx *c, const tern_host_tensor *a, const tern_host_tensor *b,
                                    tern_host_tensor **res)
{
    *res = NULL;
    if (a->rank < 1 || b->rank < 1)
        return efail(c, TERN_ERR_INVALID, "operands must have rank >= 1 (got %d and %d)", a->rank, b->rank);
    if (a->type != b->type)
        return efail(c, TERN_ERR_INVALID, "operand types differ: %s and %s", tern_elem_name(a->type),
                     tern_elem_name(b->type));
    int64_t M = a->rank == 1 ? 1 : a->dims[a->rank - 2], K = a->dims[a->rank - 1];
    int64_t Kb = b->rank == 1 ? b->dims[0] : b->dims[b->rank - 2], N = b->rank == 1 ? 1 : b->dims[b->rank - 1];
    if (K != Kb)
        return efail(c, TERN_ERR_INVALID, "inner dims differ: A is [..., %lld, %lld], B is [..., %lld, %lld]",
                     (long long)M, (long long)K, (long long)Kb, (long long)N);
    int ra = a->rank > 2 ? a->rank - 2 : 0, rb = b->rank > 2 ? b->rank - 2 : 0, rbat;
    int64_t bd[TERN_GRAPH_MAX_RANK];
    char why[200];
    if (graph_broadcast(ra, a->dims, rb, b->dims, &rbat, bd, why, sizeof why))
        return efail(c, TERN_ERR_INVALID, "batch dims: %s", why);
    int64_t dims[TERN_GRAPH_MAX_RANK];
    int r = 0;
    for (int d = 0; d < rbat; d++)
        dims[r++] = bd[d];
    if (a->rank > 1)
        dims[r++] = M;
    if (b->rank > 1)
        dims[r++] = N;
    if (r > TERN_GRAPH_MAX_RANK)
        return efail(c, TERN_ERR_RANGE, "result rank above the limit");
    tern_error e;
    if (tern_host_tensor_new(a->type, r, dims, res, &e))
        return efail(c, e.code, "%s", e.msg);
    tern_host_tensor *o = *res;
    int64_t nb = graph_numel(rbat, bd);
    /* batch offsets through broadcasting: strides in whole matrices */
    int64_t sa[TERN_GRAPH_MAX_RANK], sb[TERN_GRAPH_MAX_RANK], ta[TERN_GRAPH_MAX_RANK], tb[TERN_GRAPH_MAX_RANK];
    ev_strides(ra, a->dims, ta);
    ev_strides(rb, b->dims, tb);
    for (int d = 0; d < rbat; d++) {
        int ia = d - (rbat - ra), ib = d - (rbat - rb);
        sa[d] = ia >= 0 && a->dims[ia] != 1 ? ta[ia] : 0;
        sb[d] = ib >= 0 && b->dims[ib] != 1 ? tb[ib] : 0;
    }
    for (int64_t q = 0; q < nb; q++) {
        int64_t rem = q, oa = 0, ob = 0;
        for (int d = rbat - 1; d >= 0; d--) {
            int64_t ix = rem % bd[d];
            rem /= bd[d];
            oa += ix * sa[d];
            ob += ix * sb[d];
        }
        size_t A0 = (size_t)(oa * M * K), B0 = (size_t)(ob * K * N), O0 = (size_t)(q * M * N);
        if (o->f) {
            const float *A = a->f + A0, *B = b->f + B0;
            float *O = o->f + O0;
            for (int64_t i = 0; i < M; i++)
                for (int64_t k = 0; k < K; k++) {
                    float av = A[i * K + k];
                    const float *Br = B + k * N;
                    float *Or = O + i * N;
                    for (int64_t j = 0; j < N; j++)
                        Or[j] += av * Br[j];
                }
        } else {
            const int64_t *A = a->i + A0, *B = b->i + B0;
            int64_t *O = o->i + O0;
            for (int64_t i = 0; i < M; i++)
                for (int64_t k = 0; k < K; k++)
                    for (int64_t j = 0; j < N; j++)
                        O[i * N + j] = (int64_t)((uint64_t)O[i * N + j] + (uint64_t)A[i * K + k] * (uint64_t)B[k * N + j]);
        }
    }
    graph_tensor_normalize(o);
    return TERN_OK;
}

tern_status graph_ev_matmul(const ectx *c)
{
    tern_status st;
    if ((st = ereq(c, 0, 0)) || (st = ereq(c, 1, 0)))
        return st;
    tern_host_tensor *o;
    if ((st = graph_ev_matmul_tensors(c, IN(0), IN(1), &o)))
        return st;
    ekeep(c, 0, o);
    return TERN_OK;
}

static float activate(const char *act, float v)
{
    if (strcmp(act, "relu") == 0)
        return v < 0 ? 0.0f : v;
    if (strcmp(act, "gelu") == 0)
        return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
    if (strcmp(act, "gelu_tanh") == 0)
        return 0.5f * v * (1.0f + tanhf(0.79788456080286536f * (v + 0.044715f * v * v * v)));
    return v;
}

static int known_activation(const char *act)
{
    return !strcmp(act, "none") || !strcmp(act, "relu") || !strcmp(act, "gelu") || !strcmp(act, "gelu_tanh");
}

/* tern.MatMulBias(A, W, bias) activation=...: MatMul, + bias over the last dim, activation */
tern_status graph_ev_matmul_bias(const ectx *c)
{
    tern_status st;
    if ((st = ereq(c, 0, 1)) || (st = ereq(c, 1, 1)) || (st = ereq(c, 2, 1)))
        return st;
    const char *act = tern_graph_attr_string(c->n, "activation", "none");
    if (!known_activation(act))
        return efail(c, TERN_ERR_INVALID, "activation \"%.40s\" is not none, relu, gelu or gelu_tanh", act);
    tern_host_tensor *o;
    if ((st = graph_ev_matmul_tensors(c, IN(0), IN(1), &o)))
        return st;
    const tern_host_tensor *bias = IN(2);
    int64_t N = o->rank ? o->dims[o->rank - 1] : 1;
    if (bias->count != (size_t)N && bias->count != 1) {
        tern_host_tensor_free(o);
        return efail(c, TERN_ERR_INVALID, "bias has %zu elements, the output's last dim is %lld", bias->count,
                     (long long)N);
    }
    for (size_t k = 0; k < o->count; k++)
        o->f[k] = activate(act, o->f[k] + bias->f[bias->count == 1 ? 0 : k % (size_t)N]);
    const tern_host_tensor *res = IN(3); /* the fused residual, added after the activation */
    if (res) {
        if (res->count != o->count || res->type != o->type) {
            tern_host_tensor_free(o);
            return efail(c, TERN_ERR_INVALID, "residual has %zu elements, the output %zu", res->count, o->count);
        }
        for (size_t k = 0; k < o->count; k++)
            o->f[k] = o->f[k] + res->f[k];
    }
    tern_host_tensor *z = NULL; /* the fused norm's own output, when the layer's stays output 0 */
    if (tern_graph_attr_int(c->n, "layernorm", 0)) { /* the fused LayerNormalization over the last axis */
        const tern_host_tensor *sc = IN(4), *b = IN(5);
        size_t inner = (size_t)N;
        if (!sc || !sc->f || sc->count != inner || (b && (!b->f || b->count != inner))) {
            tern_host_tensor_free(o);
            return efail(c, TERN_ERR_INVALID, "layer norm scale/B must be float vectors of %zu", inner);
        }
        float eps = tern_graph_attr_float(c->n, "epsilon", 1e-5f);
        tern_host_tensor *t = o;
        if (c->n->n_outputs > 1) {
            graph_tensor_normalize(o);
            tern_error e;
            if (tern_host_tensor_clone(o, &z, &e)) {
                tern_host_tensor_free(o);
                return efail(c, e.code, "%s", e.msg);
            }
            t = z;
        }
        for (size_t q = 0; inner && q < t->count / inner; q++)
            graph_ev_layernorm_row(t->f + q * inner, t->f + q * inner, inner, sc, b, eps, NULL, NULL);
    }
    if (z) {
        graph_tensor_normalize(z);
        ekeep(c, 1, z);
    }
    graph_tensor_normalize(o);
    ekeep(c, 0, o);
    return TERN_OK;
}

tern_status graph_ev_gemm(const ectx *c)
{
    tern_status st;
    if ((st = ereq(c, 0, 1)) || (st = ereq(c, 1, 1)))
        return st;
    const tern_host_tensor *a = IN(0), *b = IN(1), *cc = IN(2);
    if (a->rank != 2 || b->rank != 2)
        return efail(c, TERN_ERR_INVALID, "A and B must be 2-D (got rank %d and %d)", a->rank, b->rank);
    if (a->type != b->type || (cc && cc->type != a->type))
        return efail(c, TERN_ERR_INVALID, "A, B and C types differ: %s, %s, %s", tern_elem_name(a->type),
                     tern_elem_name(b->type), cc ? tern_elem_name(cc->type) : "-");
    int ta = (int)tern_graph_attr_int(c->n, "transA", 0), tb = (int)tern_graph_attr_int(c->n, "transB", 0);
    float alpha = tern_graph_attr_float(c->n, "alpha", 1.0f), beta = tern_graph_attr_float(c->n, "beta", 1.0f);
    int64_t M = ta ? a->dims[1] : a->dims[0], K = ta ? a->dims[0] : a->dims[1];
    int64_t Kb = tb ? b->dims[1] : b->dims[0], N = tb ? b->dims[0] : b->dims[1];
    if (K != Kb)
        return efail(c, TERN_ERR_INVALID, "inner dims differ: op(A) is [%lld, %lld], op(B) is [%lld, %lld]",
                     (long long)M, (long long)K, (long long)Kb, (long long)N);
    int64_t dims[2] = {M, N};
    if (cc) {
        int r;
        int64_t bd[TERN_GRAPH_MAX_RANK];
        char why[200];
        if (cc->rank > 2 || graph_broadcast(2, dims, cc->rank, cc->dims, &r, bd, why, sizeof why) || bd[0] != M ||
            bd[1] != N)
            return efail(c, TERN_ERR_INVALID, "C (rank %d) does not broadcast to [%lld, %lld]", cc->rank,
                         (long long)M, (long long)N);
    }
    tern_host_tensor *o;
    if ((st = eout(c, 0, a->type, 2, dims, &o)) || !o)
        return st;
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            float acc = 0;
            for (int64_t k = 0; k < K; k++)
                acc += a->f[ta ? k * M + i : i * K + k] * b->f[tb ? j * K + k : k * N + j];
            float v = alpha * acc;
            if (cc) {
                int64_t ci = cc->rank == 2 ? (cc->dims[0] == 1 ? 0 : i) * cc->dims[1] + (cc->dims[1] == 1 ? 0 : j)
                             : cc->rank == 1 ? (cc->dims[0] == 1 ? 0 : j)
                                             : 0;
                v += beta * cc->f[ci];
            }
            o->f[i * N + j] = v;
        }
    graph_tensor_normalize(o);
    return TERN_OK;
}
