/* `tern plan --model model.onnx`: a transformer exported to ONNX (PyTorch's exporter) read back into the
 * configuration the planner takes, so that it is planned exactly like the equivalent config.json
 * (docs/planner.md, "ONNX models"). Nothing is timed from the ONNX graph itself: its repeated layer structure is
 * recognised and its weights' shapes give the sizes.
 *
 *  - layers: the scaled dot-product attentions graph_match_attention finds (MatMul [scale] [mask] Softmax MatMul,
 *    the pattern tern's attention fusion takes), one per layer;
 *  - heads and head_dim: the attention's Q [B, heads, S, head_dim];
 *  - key/value heads: the head-split Reshape above K ([.., n x head_dim] -> [.., n, head_dim]);
 *  - hidden size and vocabulary: the token embedding, the Gather of a constant [vocab, hidden] table by the ids;
 *  - intermediate size and gating: the weight MatMuls that are not attention projections nor the LM head:
 *    per layer one [hidden, F] and one [F, hidden] (GELU MLP) or two [hidden, F] and one [F, hidden] (SwiGLU);
 *  - causal or bidirectional: the attention mask, a constant lower-triangular one (causal) or none (encoder);
 *  - the norm: LayerNormalization (or its decomposition, x - ReduceMean(x)) or RMSNorm (no mean subtracted);
 *  - positions: the rows of the position table added to the embedding (GPT-2, BERT) or of the rotary cos/sin
 *    tables (Llama); without one, the Hugging Face default;
 *  - tied embeddings: the LM head's weight holds the embedding's values.
 * The family follows: causal + RMSNorm + gated MLP is Llama, causal + LayerNorm + GELU MLP is GPT-2, bidirectional
 * + LayerNorm + GELU MLP is BERT; any other combination is refused, naming it. The recovered fields are written
 * as a config.json text and parsed by tern_model_cfg_parse, so the two paths give the same tern_model_cfg. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/graph_internal.h"
#include "plan_internal.h"
#include "tern/graph.h"

#define MAX_VISIT 512

typedef struct {
    const tern_graph *g;
    const char *src;
    char *notes; /* JSON object members "field":"how", comma separated */
    size_t nn, ncap;
    int oom;
} rctx;

static void note(rctx *r, const char *field, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void note(rctx *r, const char *field, const char *fmt, ...)
{
    char how[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(how, sizeof how, fmt, ap);
    va_end(ap);
    for (char *p = how; *p; p++) /* JSON-safe: names are quoted with single quotes */
        if (*p == '"' || *p == '\\' || (unsigned char)*p < 0x20)
            *p = '\'';
    size_t need = strlen(field) + strlen(how) + 8;
    if (r->nn + need + 1 > r->ncap) {
        size_t cap = (r->ncap + need + 1) * 2;
        char *p = realloc(r->notes, cap);
        if (!p) {
            r->oom = 1;
            return;
        }
        r->notes = p, r->ncap = cap;
    }
    r->nn += (size_t)snprintf(r->notes + r->nn, r->ncap - r->nn, "%s\"%s\":\"%s\"", r->nn ? "," : "", field, how);
}

static const tern_graph_value *val(const rctx *r, int id) { return tern_graph_value_at(r->g, id); }
static const tern_graph_node *nd(const rctx *r, int i) { return tern_graph_node_at(r->g, i); }
static int is_const(const rctx *r, int id) { return id >= 0 && val(r, id)->constant != NULL; }

/* A weight MatMul / Gemm: a constant 2-D weight as input 1; *in, *out its [in, out] sizes. */
static int weight_matmul(const rctx *r, int i, int64_t *in, int64_t *out)
{
    const tern_graph_node *n = nd(r, i);
    if ((n->op_id != TERN_GOP_MATMUL && n->op_id != TERN_GOP_GEMM) || n->domain[0] || n->n_inputs < 2 ||
        !is_const(r, n->inputs[1]))
        return 0;
    const tern_graph_value *w = val(r, n->inputs[1]);
    if (w->rank != 2)
        return 0;
    int t = n->op_id == TERN_GOP_GEMM && tern_graph_attr_int(n, "transB", 0);
    *in = w->dims[t ? 1 : 0], *out = w->dims[t ? 0 : 1];
    return 1;
}

/* Walks back from value v through the producers (not past a weight MatMul, nor into constants) breadth first;
 * returns the first node for which want() holds, or -1. */
typedef int (*want_fn)(const rctx *r, int node, void *arg);
static int walk_back(const rctx *r, int v, want_fn want, void *arg)
{
    int queue[MAX_VISIT], head = 0, tail = 0;
    queue[tail++] = v;
    while (head < tail) {
        int x = queue[head++];
        const tern_graph_value *xv = val(r, x);
        if (!xv || xv->constant || xv->producer < 0)
            continue;
        int p = xv->producer;
        if (want(r, p, arg))
            return p;
        int64_t a, b;
        if (weight_matmul(r, p, &a, &b))
            continue;
        const tern_graph_node *n = nd(r, p);
        for (int k = 0; k < n->n_inputs && tail < MAX_VISIT; k++)
            if (n->inputs[k] >= 0 && !is_const(r, n->inputs[k])) {
                int seen = 0;
                for (int j = 0; j < tail && !seen; j++)
                    seen = queue[j] == n->inputs[k];
                if (!seen)
                    queue[tail++] = n->inputs[k];
            }
    }
    return -1;
}

/* The head split: Reshape of [.., n x D] (rank <= 3) to rank 4 with D last. */
static int want_head_split(const rctx *r, int i, void *arg)
{
    const tern_graph_node *n = nd(r, i);
    int64_t D = *(int64_t *)arg;
    if (n->op_id != TERN_GOP_RESHAPE || n->domain[0])
        return 0;
    const tern_graph_value *in = val(r, n->inputs[0]), *out = val(r, n->outputs[0]);
    return in->rank >= 2 && in->rank <= 3 && out->rank == 4 && out->dims[3] == D && in->dims[in->rank - 1] > 0 &&
           in->dims[in->rank - 1] % D == 0;
}

static int want_weight(const rctx *r, int i, void *arg)
{
    (void)arg;
    int64_t a, b;
    return weight_matmul(r, i, &a, &b);
}

/* The rotary tables: a Mul by a constant [.., P, D] on the Q path; *P its rows. */
static int want_rotary(const rctx *r, int i, void *arg)
{
    int64_t *pd = arg; /* [0] = D in, [1] = P out */
    const tern_graph_node *n = nd(r, i);
    if (n->op_id != TERN_GOP_MUL || n->domain[0])
        return 0;
    for (int k = 0; k < 2; k++) {
        const tern_graph_value *c = val(r, n->inputs[k]);
        if (c->constant && c->rank >= 2 && c->dims[c->rank - 1] == pd[0] && c->dims[c->rank - 2] > 1) {
            pd[1] = c->dims[c->rank - 2];
            return 1;
        }
    }
    return 0;
}

/* The first weight MatMul reading v, following single-input shape ops and Transposes forward; -1 if none. */
static int walk_forward(const rctx *r, int v)
{
    int cnt = tern_graph_node_count(r->g);
    for (int depth = 0; depth < 16; depth++) {
        int next = -1;
        for (int i = 0; i < cnt; i++) {
            const tern_graph_node *n = nd(r, i);
            if (n->n_inputs < 1 || n->inputs[0] != v)
                continue;
            int64_t a, b;
            if (weight_matmul(r, i, &a, &b))
                return i;
            if (n->op_id == TERN_GOP_TRANSPOSE || n->op_id == TERN_GOP_RESHAPE || n->op_id == TERN_GOP_CAST)
                next = n->outputs[0];
        }
        if (next < 0)
            return -1;
        v = next;
    }
    return -1;
}

/* Is the mask of attention m a constant causal one? 1 yes, 0 a mask that is not, -1 none. */
static int causal_mask(const rctx *r, const graph_att_match *m)
{
    if (m->mask < 0)
        return -1;
    const tern_graph_value *mv = val(r, m->mask);
    const tern_host_tensor *t = mv->constant;
    if (!t || t->rank < 2)
        return 0;
    int64_t R = t->dims[t->rank - 2], C = t->dims[t->rank - 1];
    if (R < 2 || C < 2 || (size_t)(R * C) > t->count)
        return 0;
    for (int64_t i = 0; i < R; i++)
        for (int64_t j = 0; j < C; j++) {
            double x = tern_host_tensor_get(t, (size_t)(i * C + j));
            int masked = m->mask_mode == 3 ? x <= -1e4 : m->mask_mode == 1 ? x != 0 : x == 0;
            int unmasked_ok = m->mask_mode == 3 ? x == 0 : 1;
            if (j > i ? !masked : (masked || !unmasked_ok))
                return 0;
        }
    return 1;
}

static tern_status fail(rctx *r, tern_error *err, tern_status code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static tern_status fail(rctx *r, tern_error *err, tern_status code, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return tern_error_set(err, code, "%s: %s", r->src, msg);
}

/* The op counts of a graph that is not a transformer, for the refusal ("6 Conv, 5 Relu, ..."): the first 24
 * distinct ops in graph order. */
static void op_summary(const rctx *r, char *buf, size_t len)
{
    enum { MAXOPS = 24 };
    const char *ops[MAXOPS];
    int counts[MAXOPS], nops = 0, more = 0, cnt = tern_graph_node_count(r->g);
    for (int i = 0; i < cnt; i++) {
        const char *op = nd(r, i)->op;
        int k = 0;
        while (k < nops && strcmp(ops[k], op))
            k++;
        if (k < nops)
            counts[k]++;
        else if (nops < MAXOPS)
            ops[nops] = op, counts[nops++] = 1;
        else
            more = 1;
    }
    size_t at = 0;
    buf[0] = 0;
    for (int k = 0; k < nops && at + 48 < len; k++)
        at += (size_t)snprintf(buf + at, len - at, "%s%d %s", k ? ", " : "", counts[k], ops[k]);
    if (more && at + 8 < len)
        snprintf(buf + at, len - at, ", ...");
}

static tern_status recover(rctx *r, char *cfg, size_t cfglen, tern_error *err)
{
    const tern_graph *g = r->g;
    int cnt = tern_graph_node_count(g);
    /* attentions, in graph order */
    int64_t L = 0, H = -1, D = -1, KV = -1, rot_P = -1;
    int causal = -2, *proj = calloc((size_t)cnt + 1, sizeof *proj);
    if (!proj)
        return tern_error_set(err, TERN_ERR_NOMEM, "%s: out of memory", r->src);
    tern_status st = TERN_OK;
    int softmaxes = 0;
    for (int i = 0; i < cnt && st == TERN_OK; i++) {
        if (nd(r, i)->op_id != TERN_GOP_SOFTMAX || nd(r, i)->domain[0])
            continue;
        softmaxes++;
        graph_att_match m;
        if (!graph_match_attention(g, i, &m))
            continue;
        const tern_graph_value *q = val(r, m.q);
        char lbl[160];
        tern_graph_node_label(g, i, lbl, sizeof lbl);
        if (q->rank != 4) {
            st = fail(r, err, TERN_ERR_UNSUPPORTED,
                      "attention at %s has a rank-%d Q; the heads axis of [batch, heads, seq, head_dim] cannot be "
                      "told",
                      lbl, q->rank);
            break;
        }
        int64_t h = q->dims[1], d = q->dims[3];
        int64_t dd = d;
        int ks = walk_back(r, m.kt, want_head_split, &dd);
        int qs = walk_back(r, m.q, want_head_split, &dd);
        if (ks < 0 || qs < 0) {
            st = fail(r, err, TERN_ERR_UNSUPPORTED,
                      "num_key_value_heads: no head-split Reshape ([.., n x %lld] -> [.., n, %lld]) above the %s "
                      "of the attention at %s",
                      (long long)d, (long long)d, ks < 0 ? "K" : "Q", lbl);
            break;
        }
        const tern_graph_value *kin = val(r, nd(r, ks)->inputs[0]), *qin = val(r, nd(r, qs)->inputs[0]);
        int64_t kv = kin->dims[kin->rank - 1] / d, hq = qin->dims[qin->rank - 1] / d;
        if (hq != h) {
            st = fail(r, err, TERN_ERR_UNSUPPORTED,
                      "the attention at %s has %lld query heads but its head split makes %lld", lbl, (long long)h,
                      (long long)hq);
            break;
        }
        int c = causal_mask(r, &m);
        if (c == 0) {
            st = fail(r, err, TERN_ERR_UNSUPPORTED,
                      "the attention at %s has a mask that is not a constant causal (lower-triangular) one; the "
                      "planner takes causal decoders and unmasked encoders",
                      lbl);
            break;
        }
        if (L == 0) {
            H = h, D = d, KV = kv, causal = c;
        } else if (h != H || d != D || kv != KV || c != causal) {
            st = fail(r, err, TERN_ERR_UNSUPPORTED,
                      "the layers differ: attention %lld (at %s) has %lld heads of %lld, %lld key/value heads, %s; "
                      "the first has %lld heads of %lld, %lld key/value heads, %s (the planner composes identical "
                      "layers)",
                      (long long)L, lbl, (long long)h, (long long)d, (long long)kv, c > 0 ? "causal" : "unmasked",
                      (long long)H, (long long)D, (long long)KV, causal > 0 ? "causal" : "unmasked");
            break;
        }
        /* the projections: Q, K, V (a fused QKV is one node) and the output projection */
        int pq = walk_back(r, nd(r, qs)->inputs[0], want_weight, NULL);
        int pk = walk_back(r, nd(r, ks)->inputs[0], want_weight, NULL);
        int pv = walk_back(r, m.v, want_weight, NULL);
        int po = walk_forward(r, nd(r, m.pv)->outputs[0]);
        if (pq < 0 || pk < 0 || pv < 0 || po < 0) {
            st = fail(r, err, TERN_ERR_UNSUPPORTED, "the attention at %s: no weight MatMul for its %s projection",
                      lbl, pq < 0 ? "Q" : pk < 0 ? "K" : pv < 0 ? "V" : "output");
            break;
        }
        proj[pq] = proj[pk] = proj[pv] = proj[po] = 1;
        if (L == 0) {
            int64_t pd[2] = {d, -1};
            if (walk_back(r, m.q, want_rotary, pd) >= 0)
                rot_P = pd[1];
        }
        L++;
    }
    if (st != TERN_OK) {
        free(proj);
        return st;
    }
    if (L == 0) {
        char ops[400];
        op_summary(r, ops, sizeof ops);
        free(proj);
        return fail(r, err, TERN_ERR_UNSUPPORTED,
                    "not a transformer: no scaled dot-product attention (MatMul, [scale], [mask], Softmax, MatMul "
                    "over [batch, heads, seq, head_dim]) in the graph (%d Softmax node%s); its ops: %s",
                    softmaxes, softmaxes == 1 ? "" : "s", ops);
    }
    /* the token embedding: Gather of a constant 2-D table by non-constant indices */
    int emb = -1;
    for (int i = 0; i < cnt && emb < 0; i++) {
        const tern_graph_node *n = nd(r, i);
        if (n->op_id == TERN_GOP_GATHER && !n->domain[0] && is_const(r, n->inputs[0]) && !is_const(r, n->inputs[1]) &&
            val(r, n->inputs[0])->rank == 2 && tern_graph_attr_int(n, "axis", 0) == 0)
            emb = i;
    }
    if (emb < 0) {
        free(proj);
        return fail(r, err, TERN_ERR_UNSUPPORTED,
                    "hidden_size and vocab_size: no token embedding (a Gather of a constant [vocab, hidden] table by "
                    "the input ids) in the graph");
    }
    const tern_graph_value *et = val(r, nd(r, emb)->inputs[0]);
    int64_t V = et->dims[0], W = et->dims[1];
    note(r, "vocab_size", "rows of the token embedding '%s' [%lld, %lld]", et->name, (long long)V, (long long)W);
    note(r, "hidden_size", "columns of the token embedding '%s'", et->name);
    note(r, "num_hidden_layers", "%lld attentions (MatMul-Softmax-MatMul) found", (long long)L);
    note(r, "num_attention_heads", "the attentions' Q [batch, %lld, seq, %lld]", (long long)H, (long long)D);
    note(r, "num_key_value_heads", "the head-split Reshape above K: %lld x %lld", (long long)KV, (long long)D);
    /* position table added to the embedding */
    int64_t P = -1;
    int e_out = nd(r, emb)->outputs[0];
    for (int i = 0; i < cnt && P < 0; i++) {
        const tern_graph_node *n = nd(r, i);
        if (n->op_id != TERN_GOP_ADD || n->domain[0] || (n->inputs[0] != e_out && n->inputs[1] != e_out))
            continue;
        int o = n->inputs[0] == e_out ? n->inputs[1] : n->inputs[0];
        const tern_graph_value *ov = val(r, o);
        const tern_graph_value *tab = NULL;
        if (ov->constant)
            tab = ov;
        else if (ov->producer >= 0 && nd(r, ov->producer)->op_id == TERN_GOP_GATHER &&
                 is_const(r, nd(r, ov->producer)->inputs[0]))
            tab = val(r, nd(r, ov->producer)->inputs[0]);
        if (tab && tab->rank >= 2 && tab->dims[tab->rank - 1] == W) {
            P = tab->dims[tab->rank - 2];
            note(r, "max_position_embeddings", "rows of the position table '%s' added to the embedding", tab->name);
        }
    }
    /* weight MatMuls outside the attentions: the MLP and the LM head */
    int64_t F = -1, n_up = 0, n_down = 0, n_sq = 0;
    int head = -1, last = -1;
    for (int i = 0; i < cnt; i++) { /* the LM head: the graph's last weight MatMul, [hidden, vocab] */
        int64_t a, b;
        if (weight_matmul(r, i, &a, &b))
            last = i;
    }
    if (last >= 0 && !proj[last]) {
        int64_t a, b;
        weight_matmul(r, last, &a, &b);
        if (a == W && b == V)
            head = last;
    }
    for (int i = 0; i < cnt; i++) {
        int64_t a, b;
        if (proj[i] || i == head || !weight_matmul(r, i, &a, &b))
            continue;
        if (a == W && b == W)
            n_sq++;
        else if (a == W && (F < 0 || b == F))
            F = b, n_up++;
        else if (b == W && a == F)
            n_down++;
    }
    if (F < 0 && (n_sq == 2 * L || n_sq == 3 * L)) /* an MLP as wide as the model */
        F = W, n_up = n_sq - L, n_down = L;
    free(proj);
    if (F < 0 || n_down != L || (n_up != L && n_up != 2 * L))
        return fail(r, err, TERN_ERR_UNSUPPORTED,
                    "intermediate_size: the MLP weights do not repeat per layer: %lld [%lld, F] and %lld [F, %lld] "
                    "weight MatMuls (F = %lld) for %lld layers (a GELU MLP has one of each per layer, SwiGLU two and "
                    "one; a mixture of experts is not recognised from ONNX: give its config.json)",
                    (long long)n_up, (long long)W, (long long)n_down, (long long)W, (long long)F, (long long)L);
    int gated = n_up == 2 * L;
    note(r, "intermediate_size", "%lld [%lld, %lld] and %lld [%lld, %lld] weight MatMuls outside the attentions "
         "(%s MLP)", (long long)n_up, (long long)W, (long long)F, (long long)n_down, (long long)F, (long long)W,
         gated ? "gated, SwiGLU" : "GELU");
    /* the norm */
    int layernorm = 0, reducemean = 0;
    for (int i = 0; i < cnt; i++) {
        const tern_graph_node *n = nd(r, i);
        if (n->domain[0])
            continue;
        if (n->op_id == TERN_GOP_LAYER_NORMALIZATION)
            layernorm = 1;
        if (n->op_id == TERN_GOP_REDUCE_MEAN)
            reducemean = 1;
        if (n->op_id == TERN_GOP_SUB) {
            const tern_graph_value *s = val(r, n->inputs[1]);
            if (s->producer >= 0 && nd(r, s->producer)->op_id == TERN_GOP_REDUCE_MEAN &&
                nd(r, s->producer)->inputs[0] == n->inputs[0])
                layernorm = 1;
        }
    }
    int rms = !layernorm && reducemean;
    if (!layernorm && !rms)
        return fail(r, err, TERN_ERR_UNSUPPORTED, "no normalisation (LayerNormalization, x - ReduceMean(x), or "
                                                  "RMSNorm's ReduceMean(x^2)) in the graph");
    /* tied embeddings: the head's weight holds the embedding's values */
    int tied = 0;
    if (head >= 0) {
        const tern_graph_value *hw = val(r, nd(r, head)->inputs[1]);
        int t = nd(r, head)->op_id == TERN_GOP_GEMM && tern_graph_attr_int(nd(r, head), "transB", 0);
        tied = 1;
        for (int64_t v = 0; v < V && tied; v++)
            for (int64_t c = 0; c < W && tied; c++) {
                size_t at = t ? (size_t)(v * W + c) : (size_t)(c * V + v);
                tied = tern_host_tensor_get(hw->constant, at) == tern_host_tensor_get(et->constant, (size_t)(v * W + c));
            }
        note(r, "tie_word_embeddings", "the LM head's weight '%s' %s the token embedding's values", hw->name,
             tied ? "holds" : "differs from");
    } else {
        note(r, "tie_word_embeddings", "no LM head [%lld, %lld] in the graph; taken as tied (no extra weights)",
             (long long)W, (long long)V);
        tied = 1;
    }
    const char *fam;
    if (causal > 0 && rms && gated)
        fam = "llama";
    else if (causal > 0 && layernorm && !gated)
        fam = "gpt2";
    else if (causal < 0 && layernorm && !gated)
        fam = "bert";
    else
        return fail(r, err, TERN_ERR_UNSUPPORTED,
                    "a %s transformer with %s and a %s MLP is not an architecture the planner has (causal + RMSNorm "
                    "+ SwiGLU: Llama; causal + LayerNorm + GELU: GPT-2; unmasked + LayerNorm + GELU: BERT)",
                    causal > 0 ? "causal" : "bidirectional", rms ? "RMSNorm" : "LayerNorm", gated ? "gated" : "GELU");
    note(r, "model_type", "%s attention, %s, %s MLP", causal > 0 ? "causal" : "unmasked", rms ? "RMSNorm" : "LayerNorm",
         gated ? "gated" : "GELU");
    if (!strcmp(fam, "gpt2") && KV != H)
        return fail(r, err, TERN_ERR_UNSUPPORTED,
                    "a GPT-2-style model with %lld key/value heads for %lld query heads: GPT-2 has no grouped-query "
                    "attention", (long long)KV, (long long)H);
    if (!strcmp(fam, "gpt2") && !tied)
        return fail(r, err, TERN_ERR_UNSUPPORTED,
                    "a GPT-2-style model whose LM head is not tied to the embedding: GPT-2's config has no untied "
                    "head");
    if (!strcmp(fam, "llama")) {
        if (rot_P > 0) {
            P = rot_P;
            note(r, "max_position_embeddings", "rows of the rotary cos/sin tables on Q");
        } else {
            P = 2048;
            note(r, "max_position_embeddings", "no rotary table found: the Hugging Face default 2048");
        }
    } else if (P < 0) {
        return fail(r, err, TERN_ERR_UNSUPPORTED,
                    "max_position_embeddings: no position table [positions, %lld] added to the token embedding",
                    (long long)W);
    }
    note(r, "head_dim", "the attentions' Q: %lld", (long long)D);
    int n;
    if (!strcmp(fam, "gpt2"))
        n = snprintf(cfg, cfglen,
                     "{\"model_type\":\"gpt2\",\"n_embd\":%lld,\"n_layer\":%lld,\"n_head\":%lld,\"n_inner\":%lld,"
                     "\"vocab_size\":%lld,\"n_positions\":%lld,\"head_dim\":%lld}",
                     (long long)W, (long long)L, (long long)H, (long long)F, (long long)V, (long long)P, (long long)D);
    else if (!strcmp(fam, "bert"))
        n = snprintf(cfg, cfglen,
                     "{\"model_type\":\"bert\",\"hidden_size\":%lld,\"intermediate_size\":%lld,"
                     "\"num_attention_heads\":%lld,\"num_hidden_layers\":%lld,\"vocab_size\":%lld,"
                     "\"max_position_embeddings\":%lld,\"head_dim\":%lld}",
                     (long long)W, (long long)F, (long long)H, (long long)L, (long long)V, (long long)P, (long long)D);
    else
        n = snprintf(cfg, cfglen,
                     "{\"model_type\":\"llama\",\"hidden_size\":%lld,\"intermediate_size\":%lld,"
                     "\"num_attention_heads\":%lld,\"num_key_value_heads\":%lld,\"num_hidden_layers\":%lld,"
                     "\"vocab_size\":%lld,\"max_position_embeddings\":%lld,\"head_dim\":%lld,"
                     "\"tie_word_embeddings\":%s}",
                     (long long)W, (long long)F, (long long)H, (long long)KV, (long long)L, (long long)V, (long long)P,
                     (long long)D, tied ? "true" : "false");
    if (!strcmp(fam, "bert"))
        note(r, "type_vocab_size", "not recovered (token types are not told from the graph): the Hugging Face "
                                   "default 2");
    if (n < 0 || (size_t)n >= cfglen)
        return fail(r, err, TERN_ERR_RANGE, "the recovered config does not fit its buffer");
    return r->oom ? tern_error_set(err, TERN_ERR_NOMEM, "%s: out of memory", r->src) : TERN_OK;
}

/* ---- where a malformed file breaks: a walk of the protobuf wire format along ONNX's message schema ---- */
typedef struct pb_schema pb_schema;
typedef struct {
    int field;
    const char *name;
    const pb_schema *sub; /* a nested message, or NULL */
} pb_field;
struct pb_schema {
    const char *name;
    const pb_field *fields;
};
static const pb_schema pb_model, pb_graph, pb_node, pb_attr, pb_tensor, pb_vinfo, pb_opset;
static const pb_field f_model[] = {{1, "ir_version", NULL},     {2, "producer_name", NULL}, {3, "producer_version", NULL},
                                   {4, "domain", NULL},         {5, "model_version", NULL}, {6, "doc_string", NULL},
                                   {7, "graph", &pb_graph},     {8, "opset_import", &pb_opset},
                                   {14, "metadata_props", NULL}, {20, "training_info", NULL}, {25, "functions", NULL},
                                   {0, NULL, NULL}};
static const pb_field f_graph[] = {{1, "node", &pb_node},         {2, "name", NULL},          {5, "initializer", &pb_tensor},
                                   {10, "doc_string", NULL},      {11, "input", &pb_vinfo},   {12, "output", &pb_vinfo},
                                   {13, "value_info", &pb_vinfo}, {14, "quantization_annotation", NULL},
                                   {15, "sparse_initializer", NULL}, {0, NULL, NULL}};
static const pb_field f_node[] = {{1, "input", NULL},  {2, "output", NULL},          {3, "name", NULL},
                                  {4, "op_type", NULL}, {5, "attribute", &pb_attr},  {6, "doc_string", NULL},
                                  {7, "domain", NULL},  {0, NULL, NULL}};
static const pb_field f_attr[] = {{1, "name", NULL},  {2, "f", NULL},           {3, "i", NULL},           {4, "s", NULL},
                                  {5, "t", &pb_tensor}, {6, "g", &pb_graph},    {7, "floats", NULL},      {8, "ints", NULL},
                                  {9, "strings", NULL}, {10, "tensors", &pb_tensor}, {11, "graphs", &pb_graph},
                                  {13, "doc_string", NULL}, {20, "type", NULL}, {21, "ref_attr_name", NULL},
                                  {0, NULL, NULL}};
static const pb_field f_tensor[] = {{1, "dims", NULL},        {2, "data_type", NULL},  {4, "float_data", NULL},
                                    {5, "int32_data", NULL},  {6, "string_data", NULL}, {7, "int64_data", NULL},
                                    {8, "name", NULL},        {9, "raw_data", NULL},   {10, "double_data", NULL},
                                    {11, "uint64_data", NULL}, {12, "doc_string", NULL}, {13, "external_data", NULL},
                                    {14, "data_location", NULL}, {0, NULL, NULL}};
static const pb_field f_vinfo[] = {{1, "name", NULL}, {2, "type", NULL}, {3, "doc_string", NULL}, {0, NULL, NULL}};
static const pb_field f_opset[] = {{1, "domain", NULL}, {2, "version", NULL}, {0, NULL, NULL}};
static const pb_schema pb_model = {"ModelProto", f_model}, pb_graph = {"graph", f_graph}, pb_node = {"node", f_node},
                       pb_attr = {"attribute", f_attr}, pb_tensor = {"tensor", f_tensor}, pb_vinfo = {"value_info", f_vinfo},
                       pb_opset = {"opset_import", f_opset};

static int pb_varint(const uint8_t *b, size_t *at, size_t end, uint64_t *v)
{
    *v = 0;
    for (int sh = 0; sh < 64; sh += 7) {
        if (*at >= end)
            return 0;
        uint8_t c = b[(*at)++];
        *v |= (uint64_t)(c & 0x7f) << sh;
        if (!(c & 0x80))
            return 1;
    }
    return 0;
}

/* 1 and a message in why when [start, end) of a message of schema s (path names it) breaks the wire format. */
static int pb_walk(const uint8_t *b, size_t start, size_t end, size_t file_end, const pb_schema *s, const char *path,
                   int depth, char *why, size_t wl)
{
    int counts[32] = {0};
    size_t at = start;
    while (at < end) {
        size_t tag_at = at;
        uint64_t tag, len;
        if (!pb_varint(b, &at, end, &tag)) {
            snprintf(why, wl, "at byte %zu: a field tag of %s is cut off (the message ends at byte %zu)", tag_at,
                     path, end);
            return 1;
        }
        uint64_t fno = tag >> 3;
        unsigned wt = (unsigned)(tag & 7);
        const pb_field *f = NULL;
        for (const pb_field *x = s->fields; x->name; x++)
            if ((uint64_t)x->field == fno)
                f = x;
        char fname[512];
        int k = f && f->field < 32 ? counts[f->field]++ : 0;
        if (f && f->sub)
            snprintf(fname, sizeof fname, "%s.%s[%d]", path, f->name, k);
        else if (f)
            snprintf(fname, sizeof fname, "%s.%s", path, f->name);
        else
            snprintf(fname, sizeof fname, "%s.(field %llu)", path, (unsigned long long)fno);
        if (fno == 0) {
            snprintf(why, wl, "at byte %zu: %s has a field number 0 (tag byte 0x%02x), which protobuf forbids",
                     tag_at, path, b[tag_at]);
            return 1;
        }
        switch (wt) {
        case 0:
            if (!pb_varint(b, &at, end, &len)) {
                snprintf(why, wl, "at byte %zu: %s, a varint, is cut off or longer than 10 bytes", tag_at, fname);
                return 1;
            }
            break;
        case 1:
        case 5: {
            size_t w = wt == 1 ? 8 : 4;
            if (end - at < w) {
                snprintf(why, wl, "at byte %zu: %s, a %zu-byte fixed field, is cut off at byte %zu", tag_at, fname,
                         w, end);
                return 1;
            }
            at += w;
            break;
        }
        case 2: {
            size_t len_at = at;
            if (!pb_varint(b, &at, end, &len)) {
                snprintf(why, wl, "at byte %zu: the length of %s is cut off", tag_at, fname);
                return 1;
            }
            if (len > end - at) {
                /* look inside what is there for the innermost field that is cut */
                if (f && f->sub && depth < 16 &&
                    pb_walk(b, at, end, file_end, f->sub, fname, depth + 1, why, wl))
                    return 1;
                snprintf(why, wl,
                         "at byte %zu: %s declares %llu bytes (its length at byte %zu) but only %zu remain before "
                         "%s at byte %zu",
                         tag_at, fname, (unsigned long long)len, len_at, end - at,
                         end == file_end ? "the end of the file" : "the end of its message", end);
                return 1;
            }
            if (f && f->sub && depth < 16 && pb_walk(b, at, at + (size_t)len, file_end, f->sub, fname, depth + 1, why, wl))
                return 1;
            at += (size_t)len;
            break;
        }
        default:
            snprintf(why, wl, "at byte %zu: %s has wire type %u (tag byte 0x%02x), not one protobuf's messages use "
                              "(0, 1, 2, 5)",
                     tag_at, fname, wt, b[tag_at]);
            return 1;
        }
    }
    return 0;
}

/* Where the file at path breaks the wire format, into why (empty when it does not, or cannot be read). */
static void pb_locate(const char *path, char *why, size_t wl)
{
    why[0] = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return;
    uint8_t *b = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n == cap) {
            if (cap >= ((size_t)1 << 32))
                break;
            cap = cap ? 2 * cap : 65536;
            uint8_t *nb = realloc(b, cap);
            if (!nb)
                break;
            b = nb;
        }
        size_t r = fread(b + n, 1, cap - n, f);
        n += r;
        if (r == 0)
            break;
    }
    fclose(f);
    if (b)
        pb_walk(b, 0, n, n, &pb_model, "ModelProto", 0, why, wl);
    free(b);
}

int plan_is_onnx_path(const char *path)
{
    size_t n = strlen(path);
    return n >= 5 && !strcmp(path + n - 5, ".onnx");
}

tern_status plan_cfg_from_onnx(const char *path, tern_model_cfg *out, char **config_json, char **inferred,
                               tern_error *err)
{
    *config_json = NULL;
    *inferred = NULL;
    tern_graph *g = NULL;
    tern_error e2 = {0};
    if (tern_graph_load_onnx(path, &g, &e2)) {
        char why[1024];
        pb_locate(path, why, sizeof why);
        return tern_error_set(err, e2.code ? e2.code : TERN_ERR_PARSE, "model '%s': not a readable ONNX model: %s%s%s",
                              path, e2.msg, why[0] ? "; " : "", why);
    }
    /* symbolic input dims (a dynamic batch) are bound to 1: the structure, not the run, is what is read */
    int bound = 0;
    for (int k = 0; k < tern_graph_input_count(g); k++) {
        const tern_graph_value *in = tern_graph_value_at(g, tern_graph_input_id(g, k));
        int64_t dims[TERN_GRAPH_MAX_RANK];
        int sym = 0;
        for (int d = 0; d < in->rank; d++) {
            dims[d] = in->dims[d] >= 0 ? in->dims[d] : 1;
            sym |= in->dims[d] < 0;
            if (in->dims[d] < 0 && d > 0) {
                tern_error_set(err, TERN_ERR_UNSUPPORTED,
                               "model '%s': input '%s' has a symbolic dim%s%s%s at axis %d; only the batch (axis 0) "
                               "may be symbolic: export with a fixed sequence length (the position tables, mask and "
                               "rotary tables are read at that length)",
                               path, in->name, in->dim_names[d] ? " '" : "", in->dim_names[d] ? in->dim_names[d] : "",
                               in->dim_names[d] ? "'" : "", d);
                tern_graph_free(g);
                return err ? err->code : TERN_ERR_UNSUPPORTED;
            }
        }
        if (sym && in->rank > 0) {
            char nm[256];
            snprintf(nm, sizeof nm, "%s", in->name);
            if (tern_graph_set_input_shape(g, nm, in->rank, dims, &e2)) {
                tern_graph_free(g);
                return tern_error_set(err, e2.code, "model '%s': input '%s': %s", path, nm, e2.msg);
            }
            bound++;
        }
    }
    if (tern_graph_infer(g, &e2) || tern_graph_fold_constants(g, NULL, &e2)) {
        tern_graph_free(g);
        return tern_error_set(err, e2.code ? e2.code : TERN_ERR_INVALID,
                              "model '%s': its shapes could not be inferred: %s", path, e2.msg);
    }
    rctx r = {g, path, NULL, 0, 0, 0};
    if (bound)
        note(&r, "symbolic_dims", "the symbolic dims of %d graph input%s bound to 1 to read the structure", bound,
             bound == 1 ? "" : "s");
    char cfg[1024];
    tern_status st = recover(&r, cfg, sizeof cfg, err);
    tern_graph_free(g);
    if (st == TERN_OK) {
        char srcname[600];
        snprintf(srcname, sizeof srcname, "%s (the config recovered from the ONNX graph)", path);
        st = tern_model_cfg_parse(cfg, strlen(cfg), srcname, out, err);
    }
    if (st == TERN_OK) {
        size_t cl = strlen(cfg) + 1, nl = r.nn + 3;
        *config_json = malloc(cl);
        *inferred = malloc(nl);
        if (!*config_json || !*inferred) {
            free(*config_json), free(*inferred);
            *config_json = *inferred = NULL;
            st = tern_error_set(err, TERN_ERR_NOMEM, "%s: out of memory", path);
        } else {
            memcpy(*config_json, cfg, cl);
            snprintf(*inferred, nl, "{%s}", r.notes ? r.notes : "");
        }
    }
    free(r.notes);
    return st;
}
