/* Vocabulary parallelism, Megatron-LM's VocabParallelEmbedding and vocab_parallel_cross_entropy (docs/training.md,
 * "Tensor and pipeline parallelism"): the token embedding and the LM head split by vocabulary over the tensor ranks.
 *
 * The token embedding is a Gather (axis 0) of a 2-D trained table [V, E] by the model's integer data input. Tensor
 * rank r holds rows [r B, r B + B), B = ceil(V / tp) (the last block padded with zero rows, which no id reaches and
 * which therefore stay zero), and looks up ids - r B where they fall in its block, zeros elsewhere; the ranks'
 * outputs are summed by the tensor group's all-reduce (the segment's output is partial, as a row-parallel layer's).
 * The offset r B is an input of the one program every rank runs (MP_VOFF).
 *
 * The LM head is the linear layer computing the cross-entropy's logits over the same V classes (the embedding's
 * transpose when they are tied, as GPT-2's; any 2-D weight with N = V otherwise), in no Megatron pair: rank r holds
 * its B vocabulary columns (rows of W for x W^T) and computes its logits l_r [rows, B]. The cross-entropy is then
 * computed across the group, never gathering the logits: program 0 takes each row's maximum of l_r (padding columns
 * masked by -1e30), all-reduced with MAX over the group (M); program 1 gives each row's sum of exp(l_r - M), sum of
 * t_r l_r and sum of t_r (t_r the rank's columns of the smoothed one-hot target, zero on ignored rows), all-reduced
 * with SUM (S, T, Ts); program 2 gives the loss, sum over rows of Ts (M + log S) - T, times 1 / (counted rows), and
 * the gradient of the rank's logits, (exp(l_r - M) / S Ts - t_r) / (counted rows), which the head's gradient
 * program takes as its output's gradient; the head's input gradient is all-reduced over the group as a
 * column-parallel layer's. A tied table's two copies (embedding and head) are split alike, so their gradients add
 * shard by shard. */
#include "mp_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int mp_vocab_of(const mp_plan *p, int node)
{
    if (node < 0)
        return 0;
    return node == p->vemb ? MP_VOCAB_EMBED : node == p->vhead ? MP_VOCAB_HEAD : 0;
}

/* the weight value behind v, through a Transpose of a weight (the tied head's) */
static int weight_behind(const tern_graph *g, const unsigned char *isw, int v)
{
    if (v >= 0 && isw[v])
        return v;
    int pr = v >= 0 ? g->values[v].producer : -1;
    if (pr >= 0 && g->nodes[pr].op_id == TERN_GOP_TRANSPOSE && g->nodes[pr].n_inputs >= 1 &&
        g->nodes[pr].inputs[0] >= 0 && isw[g->nodes[pr].inputs[0]])
        return g->nodes[pr].inputs[0];
    return -1;
}

/* the nodes reading weight w, directly or through a Transpose of it */
static int weight_readers(const tern_graph *g, int w)
{
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++)
        for (int q = 0; q < g->nodes[i].n_inputs; q++) {
            int v = g->nodes[i].inputs[q];
            if (v != w)
                continue;
            if (g->nodes[i].op_id == TERN_GOP_TRANSPOSE && g->nodes[i].n_outputs >= 1 && g->nodes[i].outputs[0] >= 0)
                n += tern_graph_value_uses(g, g->nodes[i].outputs[0]);
            else
                n++;
        }
    return n;
}

tern_status mp_vocab_find(tern_trainer *t, mp_plan *p, const unsigned char *isw, tern_error *err)
{
    tern_graph *g = p->g;
    p->vemb = p->vhead = -1;
    for (int k = 0; k < 3; k++)
        p->vce_sec[k] = -1;
    if (p->tp < 2 || p->data_val < 0 || tern_elem_is_float(g->values[p->data_val].type))
        return TERN_OK;
    /* the token embedding: one Gather of a 2-D table by the ids, in no pair */
    int emb = -1, nemb = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const tern_graph_node *nd = &g->nodes[i];
        if (nd->op_id != TERN_GOP_GATHER || nd->n_inputs != 2 || nd->inputs[1] != p->data_val ||
            nd->inputs[0] < 0 || !isw[nd->inputs[0]] || g->values[nd->inputs[0]].rank != 2 ||
            tern_graph_attr_int(nd, "axis", 0) != 0 || mp_pair_of(p, i) >= 0 || nd->n_outputs < 1 ||
            nd->outputs[0] < 0)
            continue;
        emb = i;
        nemb++;
    }
    if (nemb != 1) /* no token embedding, or several tables the ids index: replicated, as before */
        return TERN_OK;
    int wv = g->nodes[emb].inputs[0];
    int64_t V = g->values[wv].dims[0], blk = (V + p->tp - 1) / p->tp;
    /* the LM head: the cross-entropy's logits over the V classes, straight from a linear layer in no pair */
    int head = -1, wh = -1, trans = 0;
    if (t->o.loss == TERN_LOSS_CROSS_ENTROPY) {
        int y = -1;
        for (int k = 0; k < g->n_outputs && y < 0; k++)
            if (!t->o.output || !strcmp(g->values[g->outputs[k]].name, t->o.output))
                y = g->outputs[k];
        int pr = y >= 0 ? g->values[y].producer : -1;
        int64_t k0, n0;
        int w;
        const tern_graph_node *nd = pr >= 0 ? &g->nodes[pr] : NULL;
        if (nd && mp_is_linear(nd) && mp_pair_of(p, pr) < 0 && mp_linear_kn(g, isw, nd, &w, &k0, &n0, &trans) &&
            n0 == V && g->values[y].rank >= 1 && g->values[y].dims[g->values[y].rank - 1] == V &&
            tern_graph_value_uses(g, y) == 1 && (nd->op_id == TERN_GOP_MATMUL || nd->n_inputs < 3) &&
            weight_behind(g, isw, nd->inputs[1]) == w && (w != wv || trans))
            head = pr, wh = w;
    }
    /* each table read by its embedding and head only (a tied one by both) */
    if (weight_readers(g, wv) != 1 + (wh == wv))
        return TERN_OK;
    if (wh >= 0 && wh != wv && weight_readers(g, wh) != 1)
        head = wh = -1;
    p->vemb = emb;
    p->vhead = head;
    p->vocab = V;
    p->vblk = blk;
    if (!(p->vweight[0] = train_strdup(g->values[wv].name)) ||
        (wh >= 0 && !(p->vweight[1] = train_strdup(g->values[wh].name))))
        return train_oom(err);
    tern_status st = mp_add_wspec(p, g->values[wv].name, 0, 0, NULL, 1, blk, err);
    if (!st && wh >= 0 && wh != wv)
        st = mp_add_wspec(p, g->values[wh].name, trans ? 0 : 1, 0, NULL, 1, blk, err);
    return st;
}

tern_status mp_vocab_embed_graph(const mp_plan *p, tern_graph *g, tern_error *err)
{
    int gi = -1;
    for (int i = 0; i < g->n_nodes && gi < 0; i++) {
        const tern_graph_node *nd = &g->nodes[i];
        if (nd->op_id == TERN_GOP_GATHER && nd->n_inputs == 2 && nd->inputs[0] >= 0 &&
            !strcmp(g->values[nd->inputs[0]].name, p->vweight[0]))
            gi = i;
    }
    if (gi < 0)
        return tern_error_set(err, TERN_ERR_INVALID, "train: layout plan: internal: no Gather of '%s' in its program",
                              p->vweight[0]);
    int ids = g->nodes[gi].inputs[1], y = g->nodes[gi].outputs[0];
    const tern_graph_value *iv = &g->values[ids];
    if (iv->rank < 1 || iv->rank >= TERN_GRAPH_MAX_RANK || !tern_graph_value_is_static(iv))
        return tern_error_set(err, TERN_ERR_INVALID,
                              "train: vocabulary-parallel embedding: the ids '%s' have no static shape", iv->name);
    ad_shape ms = {.rank = iv->rank + 1};
    memcpy(ms.d, iv->dims, sizeof(int64_t) * (size_t)iv->rank);
    ms.d[iv->rank] = 1;
    ad_ctx a;
    tern_status st = ad_init(&a, g, err);
    if (st)
        return st;
    a.prefix = "tern.mp.vemb.";
    /* the rank's first row, fed per tensor rank */
    int off = graph_add_value(g, MP_VOFF), raw = graph_add_value(g, "tern.mp.vemb.raw");
    int *in = off >= 0 && raw >= 0 ? realloc(g->inputs, sizeof(int) * (size_t)(g->n_inputs + 1)) : NULL;
    if (!in || ad_grow(&a) < 0) {
        ad_free(&a);
        return train_oom(err);
    }
    g->inputs = in;
    g->inputs[g->n_inputs++] = off;
    g->values[off].flags = TERN_VALUE_INPUT;
    g->values[off].type = TERN_ELEM_INT64;
    g->values[off].rank = 1;
    g->values[off].dims[0] = 1;
    int64_t zero = 0, blk = p->vblk;
    int loc = ad_op2(&a, "Sub", ids, off), z = ad_const_i64(&a, 1, &zero), hi = ad_const_i64(&a, 1, &blk);
    int inr = ad_op2(&a, "And", ad_op2(&a, "GreaterOrEqual", loc, z), ad_op2(&a, "Less", loc, hi));
    int w3[3] = {inr, loc, z};
    int idx = ad_op(&a, "Where", 3, w3);
    int mf = ad_op1(&a, "Cast", inr);
    if (mf >= 0)
        ad_attr_int(&a, ad_last_node(&a), "to", 1); /* FLOAT */
    int prod = ad_op2(&a, "Mul", raw, ad_reshape(&a, mf, &ms));
    if (!a.failed) { /* the Gather reads idx into raw; the mask's Mul writes the segment's output */
        int mn = g->values[prod].producer;
        g->nodes[gi].inputs[1] = idx;
        g->nodes[gi].outputs[0] = raw;
        g->values[raw].producer = gi;
        g->nodes[mn].outputs[0] = y;
        g->values[y].producer = mn;
        g->values[prod].producer = -1;
    }
    st = a.failed ? err->code : TERN_OK;
    ad_free(&a);
    if (!st)
        st = graph_sort(g, err);
    return st ? tern_error_prefix(err, "train: vocabulary-parallel embedding: ") : TERN_OK;
}

static int rows_input(ad_ctx *a, const char *name, int64_t rows, int64_t cols)
{
    int v = train_flat_input(a, name, rows * cols);
    ad_shape s = {.rank = 2, .d = {rows, cols}};
    return ad_reshape(a, v, &s);
}

/* Program `which` of the cross-entropy across the group (the header's 0, 1, 2) for R rows of B columns. */
static tern_status ce_program(tern_trainer *t, const mp_plan *p, int which, tern_exe *exe, tern_rt **rt,
                              uint64_t *hbm, double *flops, tern_error *err)
{
    int64_t R = p->vrows, B = p->vblk;
    tern_graph *g = calloc(1, sizeof *g);
    if (!g)
        return train_oom(err);
    g->opset = 17;
    g->ir_version = 8;
    ad_ctx a;
    tern_status st = ad_init(&a, g, err);
    int outs[2], no = 0;
    if (!st) {
        a.prefix = "tern.mp.ce.";
        int L = rows_input(&a, "tern.mp.ce.l", R, B);
        int lm = ad_op2(&a, "Add", L, train_flat_input(&a, "tern.mp.ce.pad", B)); /* padding columns -1e30 */
        const int64_t ax1 = 1;
        if (which == 0) {
            outs[no++] = train_name_value(&a, ad_reduce(&a, "ReduceMax", lm, 1, &ax1, 0), "tern.mp.ce.max");
        } else {
            int e = ad_op1(&a, "Exp", ad_op2(&a, "Sub", lm, rows_input(&a, "tern.mp.ce.m", R, 1)));
            int tg = rows_input(&a, "tern.mp.ce.t", R, B);
            if (which == 1) {
                int in3[3] = {ad_reduce(&a, "ReduceSum", e, 1, &ax1, 0),
                              ad_reduce(&a, "ReduceSum", ad_op2(&a, "Mul", tg, L), 1, &ax1, 0),
                              ad_reduce(&a, "ReduceSum", tg, 1, &ax1, 0)};
                int c = ad_op(&a, "Concat", 3, in3);
                if (c >= 0)
                    ad_attr_int(&a, ad_last_node(&a), "axis", 0);
                outs[no++] = train_name_value(&a, c, "tern.mp.ce.stats");
            } else {
                int s = train_flat_input(&a, "tern.mp.ce.s", R), tt = train_flat_input(&a, "tern.mp.ce.tl", R);
                int ts = train_flat_input(&a, "tern.mp.ce.ts", R), m = train_flat_input(&a, "tern.mp.ce.m1", R);
                int inv = train_flat_input(&a, "tern.mp.ce.inv", 1);
                ad_shape col = {.rank = 2, .d = {R, 1}}, flat = {.rank = 1, .d = {R * B}}, one = {.rank = 1, .d = {1}};
                int sm = ad_op2(&a, "Div", e, ad_reshape(&a, s, &col));
                int dl = ad_op2(&a, "Mul", ad_op2(&a, "Sub", ad_op2(&a, "Mul", sm, ad_reshape(&a, ts, &col)), tg), inv);
                outs[no++] = train_name_value(&a, ad_reshape(&a, dl, &flat), "tern.mp.ce.dl");
                int lr = ad_op2(&a, "Sub", ad_op2(&a, "Mul", ts, ad_op2(&a, "Add", m, ad_op1(&a, "Log", s))), tt);
                int l = ad_op2(&a, "Mul", ad_reduce(&a, "ReduceSum", lr, 0, NULL, 0), inv);
                outs[no++] = train_name_value(&a, ad_reshape(&a, l, &one), "tern.mp.ce.loss");
            }
        }
        st = a.failed ? err->code : train_set_outputs(g, outs, no, err);
    }
    ad_free(&a);
    if (!st && ((st = graph_compact(g, NULL, err)) || (st = graph_sort(g, err)) || (st = tern_graph_infer(g, err))))
        tern_error_prefix(err, "train: vocabulary-parallel cross-entropy graph %d: ", which);
    char what[64];
    snprintf(what, sizeof what, "vocabulary-parallel cross-entropy program %d", which);
    double f = 0;
    if (!st)
        st = train_compile_load(t, g, exe, rt, &f, hbm, what, err);
    *flops += f;
    tern_graph_free(g);
    return st;
}

tern_status mp_vocab_build(tern_trainer *t, mp_plan *p, uint64_t *hbm, double *flops, tern_error *err)
{
    tern_status st = TERN_OK;
    *flops = 0;
    for (int k = 0; k < 3 && !st; k++) {
        tern_exe_init(&p->vce[k]);
        st = ce_program(t, p, k, &p->vce[k], &p->vcrt[k], hbm, flops, err);
    }
    return st;
}

void mp_vocab_free(mp_plan *p)
{
    for (int k = 0; k < 3; k++) {
        tern_rt_free(p->vcrt[k]);
        p->vcrt[k] = NULL;
        tern_exe_free(&p->vce[k]);
    }
    free(p->vweight[0]);
    free(p->vweight[1]);
    p->vweight[0] = p->vweight[1] = NULL;
}

/* An all-reduce over the tensor group of count floats at buf[r] (NULL: timed only). */
static tern_status group_allreduce(tern_fabric *tpfab, int64_t tp, tern_reduce_op op, float *const *buf, size_t count,
                                   double *secs, tern_error *err)
{
    const void *in[64];
    void *out[64];
    for (int64_t r = 0; r < tp; r++)
        in[r] = out[r] = buf ? buf[r] : NULL;
    tern_coll_desc d;
    memset(&d, 0, sizeof d);
    d.op = TERN_COLL_ALL_REDUCE;
    d.reduce = op;
    d.dtype = TERN_DTYPE_FP32;
    d.count = count;
    d.algo = TERN_ALGO_AUTO;
    tern_coll_result res;
    tern_status st = buf ? tern_collective_run(tpfab, &d, in, out, &res, err)
                         : tern_collective_time(tpfab, &d, &res, err);
    if (st)
        return tern_error_prefix(err, "train: vocabulary-parallel cross-entropy: all-reduce: ");
    *secs += (double)res.time_ps * 1e-12;
    return TERN_OK;
}

static tern_status run_rt(tern_rt *rt, double *secs, tern_error *err)
{
    tern_run_stats rs;
    tern_status st = tern_rt_execute(rt, &rs, err);
    if (!st)
        *secs = (double)rs.time_ps * 1e-12;
    return st;
}

tern_status mp_vocab_ce(tern_trainer *t, mp_plan *p, tern_fabric *tpfab, float *const *l, float *const *dl,
                        const int64_t *labels, size_t rows, float inv, double *loss, double *secs, tern_error *err)
{
    int64_t tp = p->tp, R = p->vrows, B = p->vblk, V = p->vocab;
    size_t rb = (size_t)(R * B);
    tern_status st = TERN_OK;
    if (!l) { /* timing-only: each program once (its time does not depend on the values), the collectives timed */
        for (int k = 0; k < 3 && !st; k++)
            if (p->vce_sec[k] < 0)
                st = run_rt(p->vcrt[k], &p->vce_sec[k], err);
        if (!st) {
            *secs += p->vce_sec[0];
            st = group_allreduce(tpfab, tp, TERN_REDUCE_MAX, NULL, (size_t)R, secs, err);
        }
        if (!st) {
            *secs += p->vce_sec[1];
            st = group_allreduce(tpfab, tp, TERN_REDUCE_SUM, NULL, 3 * (size_t)R, secs, err);
        }
        if (!st)
            *secs += p->vce_sec[2];
        return st;
    }
    if ((int64_t)rows != R)
        return tern_error_set(err, TERN_ERR_INVALID, "train: vocabulary-parallel cross-entropy: %zu labels, %lld rows",
                              rows, (long long)R);
    float *buf = calloc((size_t)tp * (2 * rb + (size_t)B + 4 * (size_t)R) + 1, sizeof(float));
    if (!buf)
        return train_oom(err);
    float *tg[64], *pad[64], *mx[64], *stt[64];
    for (int64_t r = 0; r < tp; r++) {
        tg[r] = buf + (size_t)r * rb;
        pad[r] = buf + (size_t)tp * rb + (size_t)(r * B);
        mx[r] = buf + (size_t)tp * (rb + (size_t)B) + (size_t)(r * R);
        stt[r] = buf + (size_t)tp * (rb + (size_t)B + (size_t)R) + (size_t)(3 * r * R);
    }
    /* each rank's columns of the smoothed one-hot targets (train_ce_targets' rows) and its padding mask */
    float e = (float)t->o.label_smoothing, base = e / (float)V, hot = (1.0f - e) + base;
    for (int64_t i = 0; i < R && !st; i++) {
        int64_t c = labels[i];
        if (c == t->o.ignore_index)
            continue;
        if (c < 0 || c >= V) {
            st = tern_error_set(err, TERN_ERR_RANGE,
                                "train: step %llu: labels row %lld: class %lld outside [0, %lld) (ignore_index %lld)",
                                (unsigned long long)t->step + 1, (long long)i, (long long)c, (long long)V,
                                (long long)t->o.ignore_index);
            break;
        }
        for (int64_t r = 0; r < tp; r++)
            for (int64_t j = 0; j < B && r * B + j < V; j++)
                tg[r][i * B + j] = r * B + j == c ? hot : base;
    }
    for (int64_t r = 0; r < tp; r++)
        for (int64_t j = 0; j < B; j++)
            pad[r][j] = r * B + j < V ? 0.0f : -1e30f; /* exp(-1e30 - M) is 0: padding takes no probability */
    double tmax[3] = {0, 0, 0}, s;
    for (int k = 0; k < 3 && !st; k++) {
        tern_rt *rt = p->vcrt[k];
        for (int64_t r = 0; r < tp && !st; r++) {
            st = tern_rt_set_input(rt, "tern.mp.ce.l", l[r], rb * sizeof(float), err);
            if (!st)
                st = tern_rt_set_input(rt, "tern.mp.ce.pad", pad[r], (size_t)B * sizeof(float), err);
            if (!st && k > 0)
                st = tern_rt_set_input(rt, "tern.mp.ce.m", mx[r], (size_t)R * sizeof(float), err);
            if (!st && k > 0)
                st = tern_rt_set_input(rt, "tern.mp.ce.t", tg[r], rb * sizeof(float), err);
            if (!st && k == 2) {
                const char *nm[4] = {"tern.mp.ce.s", "tern.mp.ce.tl", "tern.mp.ce.ts", "tern.mp.ce.m1"};
                for (int q = 0; q < 4 && !st; q++)
                    st = tern_rt_set_input(rt, nm[q], q < 3 ? stt[r] + q * R : mx[r], (size_t)R * sizeof(float),
                                           err);
                if (!st)
                    st = tern_rt_set_input(rt, "tern.mp.ce.inv", &inv, sizeof inv, err);
            }
            s = 0;
            if (!st)
                st = run_rt(rt, &s, err);
            if (s > tmax[k])
                tmax[k] = s;
            if (!st && k == 0)
                st = tern_rt_get_output(rt, "tern.mp.ce.max", mx[r], (size_t)R * sizeof(float), err);
            if (!st && k == 1)
                st = tern_rt_get_output(rt, "tern.mp.ce.stats", stt[r], 3 * (size_t)R * sizeof(float), err);
            if (!st && k == 2)
                st = tern_rt_get_output(rt, "tern.mp.ce.dl", dl[r], rb * sizeof(float), err);
            if (!st && k == 2 && r == 0) {
                float lv;
                if (!(st = tern_rt_get_output(rt, "tern.mp.ce.loss", &lv, sizeof lv, err)))
                    *loss += (double)lv;
            }
        }
        *secs += tmax[k];
        if (!st && k == 0)
            st = group_allreduce(tpfab, tp, TERN_REDUCE_MAX, mx, (size_t)R, secs, err);
        if (!st && k == 1)
            st = group_allreduce(tpfab, tp, TERN_REDUCE_SUM, stt, 3 * (size_t)R, secs, err);
    }
    free(buf);
    return st;
}
