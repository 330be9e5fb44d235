/* The host reference evaluator, part 2: the numerics ops. MatMul (numpy batching and 1-D promotion), Gemm,
 * Conv (1-3 spatial dims, groups, pads, strides, dilations, auto_pad), max/average/global pools, batch, instance and
 * layer normalisation, softmax family, reductions, arg-max/min and the fused tern.MatMulBias. Products accumulate
 * in fp32 in a fixed order (k ascending), reductions and normalisation statistics in double: this is a reference,
 * not a fast path. */
#include "eval_internal.h"
#include "op_params.h"

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

/* ---- MatMul ---- */
static tern_status matmul(const ectx *c, const tern_host_tensor *a, const tern_host_tensor *b, tern_host_tensor **res)
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
    strides_of(ra, a->dims, ta);
    strides_of(rb, b->dims, tb);
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

static tern_status ev_matmul(const ectx *c)
{
    tern_status st;
    if ((st = ereq(c, 0, 0)) || (st = ereq(c, 1, 0)))
        return st;
    tern_host_tensor *o;
    if ((st = matmul(c, IN(0), IN(1), &o)))
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
static void layernorm_row(const float *p, float *o, size_t inner, const tern_host_tensor *sc,
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

static int known_activation(const char *act)
{
    return !strcmp(act, "none") || !strcmp(act, "relu") || !strcmp(act, "gelu") || !strcmp(act, "gelu_tanh");
}

/* tern.MatMulBias(A, W, bias) activation=...: MatMul, + bias over the last dim, activation */
static tern_status ev_matmul_bias(const ectx *c)
{
    tern_status st;
    if ((st = ereq(c, 0, 1)) || (st = ereq(c, 1, 1)) || (st = ereq(c, 2, 1)))
        return st;
    const char *act = tern_graph_attr_string(c->n, "activation", "none");
    if (!known_activation(act))
        return efail(c, TERN_ERR_INVALID, "activation \"%.40s\" is not none, relu, gelu or gelu_tanh", act);
    tern_host_tensor *o;
    if ((st = matmul(c, IN(0), IN(1), &o)))
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
            layernorm_row(t->f + q * inner, t->f + q * inner, inner, sc, b, eps, NULL, NULL);
    }
    if (z) {
        graph_tensor_normalize(z);
        ekeep(c, 1, z);
    }
    graph_tensor_normalize(o);
    ekeep(c, 0, o);
    return TERN_OK;
}

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
    if ((st = matmul(c, Q, KT, &s)))
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
        strides_of(m->rank, m->dims, ms);
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
    st = matmul(c, s, V, out);
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

static tern_status ev_attention(const ectx *c)
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

static tern_status ev_gemm(const ectx *c)
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

static tern_status ev_conv(const ectx *c)
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

static tern_status ev_pool(const ectx *c)
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

static tern_status ev_global_pool(const ectx *c)
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

/* ---- normalisation ---- */
static tern_status ev_batchnorm(const ectx *c)
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

static tern_status ev_instancenorm(const ectx *c)
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

static tern_status ev_layernorm(const ectx *c)
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
        layernorm_row(x->f + q * inner, o ? o->f + q * inner : NULL, inner, sc, b, eps, om ? &om->f[q] : NULL,
                      oi ? &oi->f[q] : NULL);
    if (o)
        graph_tensor_normalize(o);
    return TERN_OK;
}

static tern_status ev_softmax(const ectx *c)
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

/* ---- reductions ---- */
enum { R_SUM, R_MEAN, R_MAX, R_MIN, R_PROD, R_L1, R_L2, R_SUMSQ, R_LOGSUM, R_LOGSUMEXP };

static tern_status ev_reduce(const ectx *c)
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
    strides_of(x->rank, kd, ks);
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

static tern_status ev_argminmax(const ectx *c)
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

static const eval_fn nn_table[TERN_GOP_COUNT] = {
    [TERN_GOP_MATMUL] = ev_matmul, [TERN_GOP_GEMM] = ev_gemm, [TERN_GOP_CONV] = ev_conv,
    [TERN_GOP_MAX_POOL] = ev_pool, [TERN_GOP_AVERAGE_POOL] = ev_pool, [TERN_GOP_GLOBAL_AVERAGE_POOL] = ev_global_pool,
    [TERN_GOP_GLOBAL_MAX_POOL] = ev_global_pool, [TERN_GOP_BATCH_NORMALIZATION] = ev_batchnorm,
    [TERN_GOP_INSTANCE_NORMALIZATION] = ev_instancenorm, [TERN_GOP_LAYER_NORMALIZATION] = ev_layernorm,
    [TERN_GOP_SOFTMAX] = ev_softmax, [TERN_GOP_LOG_SOFTMAX] = ev_softmax, [TERN_GOP_HARDMAX] = ev_softmax,
    [TERN_GOP_REDUCE_SUM] = ev_reduce, [TERN_GOP_REDUCE_MEAN] = ev_reduce, [TERN_GOP_REDUCE_MAX] = ev_reduce,
    [TERN_GOP_REDUCE_MIN] = ev_reduce, [TERN_GOP_REDUCE_PROD] = ev_reduce, [TERN_GOP_REDUCE_L1] = ev_reduce,
    [TERN_GOP_REDUCE_L2] = ev_reduce, [TERN_GOP_REDUCE_SUM_SQUARE] = ev_reduce, [TERN_GOP_REDUCE_LOG_SUM] = ev_reduce,
    [TERN_GOP_REDUCE_LOG_SUM_EXP] = ev_reduce, [TERN_GOP_ARG_MAX] = ev_argminmax, [TERN_GOP_ARG_MIN] = ev_argminmax,
    [TERN_GOP_MATMUL_BIAS] = ev_matmul_bias, [TERN_GOP_ATTENTION] = ev_attention,
    [TERN_GOP_ATTENTION_GRAD] = graph_ev_attention_grad,
};

eval_fn graph_eval_nn_lookup(tern_op_id id)
{
    return (int)id > TERN_GOP_UNKNOWN && (int)id < TERN_GOP_COUNT ? nn_table[id] : NULL;
}
