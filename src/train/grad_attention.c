/* The fused attention backward in training. Before the reverse pass walks the forward, every scaled dot-product
 * attention block the graph fusion takes (graph_match_attention, the matcher of passes.c's fuse_attention:
 * MatMul(Q, Kt) [Div|Mul by a constant] [Where or additive mask] Softmax [fp32 Casts] MatMul(P, V)) whose mask is
 * none, causal or additive is planned here; when the reverse pass reaches the block's P V MatMul, one
 * tern.AttentionGrad (src/compiler/lower_attention_bwd.c on chip: Q, K, V, O and dO in, dQ, dK, dV out, the
 * probabilities recomputed in SBUF, never an Sq x Sk tensor in HBM) gives the gradients of Q, Kt and V for the
 * whole block, and the block's interior nodes (the scores, the scaling, the mask, the softmax) get no gradient
 * nodes at all. Since nothing in the backward then reads the scores or the probabilities, the compiler's fusion
 * also turns the block's forward into one tern.Attention.
 *
 * A causal mask (key j > query i masked, a fill at or below -1e4 so its probability is exactly 0; a Where or an
 * additive constant) becomes the kernel's causal attribute, which skips the blocks above the diagonal. Any other
 * mask (a padding mask computed from the data, BERT's attention_mask, added or as masked_fill's Where; a constant
 * buffer such as a local window or a bias) is passed to the kernel as its mask input M, broadcasting to the scores
 * as the forward's Add or Where does, with the forward's mode and fill: the kernel recomputes the forward's masked
 * scores (x = scale S + M, or the fill where the Where puts it, whose scores then get no gradient). A block falls
 * back to the node-by-node gradients (MatMul, Softmax, Where, ... rules), with the reason kept in the trainer's
 * report (tern train prints it), when: the mask depends on a trained weight (a learned position bias: the kernel
 * gives no mask gradient); a head size is above 128 (the PE edge the kernel tiles by); the scale is not
 * positive. A softmax over a matmul's
 * output that is not the pattern at all (Dropout on P, a second reader of the scores or probabilities) is counted
 * and reported the same way. tern_train_opts.no_fused_attention (--no-fused-attention) turns the whole plan off. */
#include "train_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

tern_status graph_infer_node(tern_graph *g, int i, int64_t max_elems, int64_t *budget, tern_error *err);

#define ATT_GRAD_MAX_HEAD 128 /* the kernel's head sizes D, Dv: at most the PE edge (128 on trn1/trn2) */
#define ATT_MASK_FILL_MAX -1e4 /* a masked score at or below this: exp() is exactly 0 in fp32 and double */

static void report(ad_ctx *a, int fused, int node, const char *why)
{
    ad_att_report *r = a->att_report;
    if (!r)
        return;
    if (fused) {
        r->fused++;
        return;
    }
    r->unfused++;
    size_t len = strlen(r->why);
    if (len + 8 >= sizeof r->why)
        return;
    char label[160];
    snprintf(r->why + len, sizeof r->why - len, "%s%s: %s", len ? "; " : "",
             tern_graph_node_label(a->g, node, label, sizeof label), why);
}

/* The mask value's data, evaluating its weight- and data-independent producers on the host when inference left
 * it unevaluated (a 1024 x 1024 causal mask is above inference's small-tensor limit); NULL when it depends on an
 * input. */
static const tern_host_tensor *const_mask(ad_ctx *a, int mask)
{
    tern_graph *g = a->g;
    if (g->values[mask].constant)
        return g->values[mask].constant;
    unsigned char *mark = calloc((size_t)g->n_nodes + 1, 1);
    int *stack = malloc(sizeof(int) * ((size_t)g->n_values + 1));
    int sp = 0, ok = mark && stack;
    if (ok)
        stack[sp++] = mask;
    while (ok && sp > 0) {
        int v = stack[--sp];
        const tern_graph_value *gv = &g->values[v];
        if (gv->constant)
            continue;
        int p = gv->producer;
        if (p < 0 || ad_needs(a, v)) {
            ok = 0;
            break;
        }
        if (mark[p])
            continue;
        mark[p] = 1;
        for (int k = 0; k < g->nodes[p].n_inputs && ok; k++) {
            int u = g->nodes[p].inputs[k];
            if (u >= 0) {
                if (sp >= g->n_values) /* every value is pushed at most once per producer it feeds */
                    ok = 0;
                else
                    stack[sp++] = u;
            }
        }
    }
    int64_t budget = GRAPH_FOLD_BUDGET_ELEMS;
    for (int i = 0; ok && i < g->n_nodes; i++) {
        if (!mark[i])
            continue;
        tern_error e;
        if (graph_infer_node(g, i, GRAPH_FOLD_MAX_ELEMS, &budget, &e) != TERN_OK)
            ok = 0;
    }
    free(mark);
    free(stack);
    return ok ? g->values[mask].constant : NULL;
}

/* 1 when the mask keeps exactly the keys j <= i of query i (every broadcast slice), the masked scores' fill low
 * enough that their probability is exactly 0. */
static int mask_is_causal(ad_ctx *a, const graph_att_match *m, int64_t Sq, int64_t Sk, const char **why)
{
    const tern_host_tensor *t = const_mask(a, m->mask);
    if (!t) {
        *why = "the mask depends on the data (AttentionGrad takes a causal Where mask or an additive one)";
        return 0;
    }
    if (m->mask_mode != 3 && !(m->fill <= ATT_MASK_FILL_MAX)) {
        *why = "the mask's fill is above -1e4 (masked probabilities would not be exactly 0)";
        return 0;
    }
    if (t->rank < 2 || t->dims[t->rank - 2] != Sq || t->dims[t->rank - 1] != Sk) {
        *why = "the mask is not a [.., Sq, Sk] matrix (AttentionGrad takes a causal Where mask or an additive one)";
        return 0;
    }
    size_t n = t->count;
    for (size_t e = 0; e < n; e++) {
        int64_t j = (int64_t)(e % (size_t)Sk), i = (int64_t)(e / (size_t)Sk % (size_t)Sq);
        double x = tern_host_tensor_get(t, e);
        int masked = m->mask_mode == 1 ? x != 0 : m->mask_mode == 2 ? x == 0 : x <= ATT_MASK_FILL_MAX;
        if (m->mask_mode == 3 && !masked && x != 0) {
            *why = "the additive mask is not 0 / <= -1e4 (a bias, not a causal mask)";
            return 0;
        }
        if (masked != (j > i)) {
            *why = "the mask is not the causal triangle (AttentionGrad takes a causal Where mask or an additive one)";
            return 0;
        }
    }
    return 1;
}

/* NULL when the mask value M (mode 3 added, else a Where's condition) can be the kernel's mask input (a float
 * tensor when added, any numeric or bool one for a Where, broadcasting to the scores [qd[0..r-3], Sq, Sk] as the
 * forward's Add or Where does), else why not. */
static const char *kernel_mask(const tern_graph *g, int mask, int mode, int r, const int64_t *qd, int64_t Sq,
                               int64_t Sk)
{
    const tern_graph_value *M = &g->values[mask];
    if (M->rank < 1 || M->rank > r || !(mode == 3 ? tern_elem_is_float(M->type) : tern_elem_is_valid(M->type)))
        return mode == 3 ? "the additive mask is not a float tensor of at most the scores' rank"
                         : "the Where mask is not a tensor of at most the scores' rank";
    for (int d = 0; d < M->rank; d++) {
        int sd = d + r - M->rank;
        int64_t want = sd == r - 1 ? Sk : sd == r - 2 ? Sq : qd[sd];
        if (M->dims[d] != 1 && M->dims[d] != want)
            return "the mask does not broadcast to the scores";
    }
    return NULL;
}

/* Does softmax node i read (through a scale and a mask) a product of two computed values: an attention the
 * pattern did not take? */
static int looks_like_attention(const ad_ctx *a, int i)
{
    const tern_graph *g = a->g;
    int v = g->nodes[i].inputs[0];
    for (int hop = 0; hop < 4 && v >= 0; hop++) {
        int p = g->values[v].producer;
        if (p < 0)
            return 0;
        const tern_graph_node *n = &g->nodes[p];
        if (n->op_id == TERN_GOP_MATMUL && !n->domain[0])
            return n->n_inputs == 2 && !g->values[n->inputs[0]].constant && !g->values[n->inputs[1]].constant &&
                   ad_needs(a, n->inputs[0]) && ad_needs(a, n->inputs[1]);
        if (n->n_inputs < 1 || (n->op_id != TERN_GOP_WHERE && n->op_id != TERN_GOP_ADD && n->op_id != TERN_GOP_MUL &&
                                n->op_id != TERN_GOP_DIV && n->op_id != TERN_GOP_CAST))
            return 0;
        int next = -1; /* the operand that is computed (the other a constant scale, fill or mask) */
        for (int k = n->op_id == TERN_GOP_WHERE ? 1 : 0; k < n->n_inputs; k++)
            if (n->inputs[k] >= 0 && !g->values[n->inputs[k]].constant && ad_needs(a, n->inputs[k]))
                next = n->inputs[k];
        v = next;
    }
    return 0;
}

int ad_attention_plan(ad_ctx *a, int n_fwd)
{
    tern_graph *g = a->g;
    if (a->no_fused_attention)
        return 0;
    for (int i = 0; i < n_fwd && !a->failed; i++) {
        const tern_graph_node *n = &g->nodes[i];
        if (n->op_id != TERN_GOP_SOFTMAX || n->domain[0] || n->n_inputs < 1 || !ad_needs(a, n->inputs[0]))
            continue;
        graph_att_match m;
        if (!graph_match_attention(g, i, &m)) {
            if (looks_like_attention(a, i))
                report(a, 0, i, "not the fused pattern Q Kt [scale] [mask] Softmax P V (Dropout on P, or a second "
                                "reader of the scores or probabilities)");
            continue;
        }
        if (m.pv >= n_fwd || !(ad_needs(a, m.q) || ad_needs(a, m.kt) || ad_needs(a, m.v)))
            continue;
        const tern_graph_value *Q = &g->values[m.q], *V = &g->values[m.v], *KT = &g->values[m.kt];
        int r = Q->rank;
        int64_t Sq = Q->dims[r - 2], D = Q->dims[r - 1], Sk = KT->dims[r - 1], Dv = V->dims[r - 1];
        const char *why = NULL;
        float scale = m.scale_op == 1 ? 1.0f / m.scale : m.scale_op == 2 ? m.scale : 1.0f;
        int causal = 0;
        if (D > ATT_GRAD_MAX_HEAD || Dv > ATT_GRAD_MAX_HEAD)
            why = "a head size above 128 (AttentionGrad tiles the head by the PE edge)";
        else if (!(scale > 0) || !isfinite(scale))
            why = "the scale is not positive";
        else if (m.mask >= 0 && ad_needs(a, m.mask))
            why = "the mask depends on a trained weight (a learned bias: its gradient goes node by node)";
        else if (m.mask >= 0 && !(causal = mask_is_causal(a, &m, Sq, Sk, &why)))
            why = kernel_mask(g, m.mask, m.mask_mode, r, Q->dims, Sq, Sk); /* the kernel applies it */
        int mask = m.mask >= 0 && !causal && !why ? m.mask : -1;
        if (why) {
            report(a, 0, i, why);
            continue;
        }
        ad_att_block *nb = realloc(a->att, sizeof *nb * (size_t)(a->n_att + 1));
        int *pvm = a->att_of ? a->att_of : malloc(sizeof(int) * ((size_t)n_fwd + 1));
        if (!nb || !pvm) {
            free(nb != a->att ? nb : NULL);
            return ad_fail(a, TERN_ERR_NOMEM, "train: out of memory");
        }
        a->att = nb;
        if (!a->att_of)
            for (int k = 0; k <= n_fwd; k++)
                pvm[k] = -1;
        a->att_of = pvm;
        a->n_att_of = n_fwd;
        ad_att_block *b = &a->att[a->n_att];
        b->softmax = i;
        b->pv = m.pv;
        b->q = m.q;
        b->kt = m.kt;
        b->v = m.v;
        b->scale = scale;
        b->causal = causal;
        b->mask = mask;
        b->mask_mode = m.mask_mode;
        b->fill = m.fill;
        pvm[m.pv] = a->n_att++;
        report(a, 1, i, NULL);
    }
    return a->failed ? -1 : 0;
}

int ad_attention_block_of(const ad_ctx *a, int node)
{
    return a->att_of && node >= 0 && node < a->n_att_of ? a->att_of[node] : -1;
}

/* A new value named like autodiff's (for the node's extra outputs). */
static int new_out(ad_ctx *a)
{
    char name[64];
    snprintf(name, sizeof name, "%sv%d", a->prefix, a->counter++);
    int id = graph_add_value(a->g, name);
    if (id < 0)
        return ad_fail(a, TERN_ERR_NOMEM, "train: out of memory");
    return ad_grow(a) < 0 ? -1 : id;
}

/* Is kt Transpose(k) of k's last two axes, read only by the block's Q Kt product? Then K is k itself. */
static int kt_source(const ad_ctx *a, int kt)
{
    const tern_graph *g = a->g;
    int p = g->values[kt].producer;
    if (p < 0 || g->nodes[p].op_id != TERN_GOP_TRANSPOSE || g->nodes[p].domain[0] || tern_graph_value_uses(g, kt) != 1)
        return -1;
    const tern_graph_node *n = &g->nodes[p];
    int r = g->values[kt].rank;
    const tern_graph_attr *pa = tern_graph_node_attr(n, "perm");
    if (!pa || pa->type != TERN_ATTR_INTS || (int)pa->n != r || r < 2)
        return r == 2 && !pa ? n->inputs[0] : -1; /* no perm: reversed axes, a swap only at rank 2 */
    for (int d = 0; d < r; d++)
        if (pa->ints[d] != (d < r - 2 ? d : d == r - 2 ? r - 1 : r - 2))
            return -1;
    return n->inputs[0];
}

int ad_attention_grad(ad_ctx *a, int block, int dout)
{
    if (block < 0 || block >= a->n_att || dout < 0)
        return ad_fail(a, TERN_ERR_INVALID, "train: internal: attention block %d", block);
    const ad_att_block b = a->att[block];
    tern_graph *g = a->g;
    int o = g->nodes[b.pv].outputs[0];
    int ksrc = kt_source(a, b.kt);
    int64_t perm[TERN_GRAPH_MAX_RANK];
    int r = g->values[b.kt].rank;
    for (int d = 0; d < r; d++)
        perm[d] = d < r - 2 ? d : d == r - 2 ? r - 1 : r - 2;
    /* under recomputation the kernel reads the segment's copies */
    int k = ksrc >= 0 ? ad_map(a, ksrc) : ad_transpose(a, ad_map(a, b.kt), r, perm);
    /* inputs: Q, K, V, O, dO, no LSE (the kernel recomputes it), the additive mask */
    int in[7] = {ad_map(a, b.q), k, ad_map(a, b.v), ad_map(a, o), dout, -1, b.mask >= 0 ? ad_map(a, b.mask) : -1};
    const int n_in = b.mask >= 0 ? 7 : 5;
    if (a->failed || k < 0)
        return -1;
    int out[3];
    for (int j = 0; j < 3; j++)
        if ((out[j] = new_out(a)) < 0)
            return -1;
    char name[96];
    snprintf(name, sizeof name, "%sAttentionGrad_%d", a->prefix, a->counter++);
    int n = graph_add_node(g, "AttentionGrad", "tern", name, n_in, 3, 4);
    if (n < 0)
        return ad_fail(a, TERN_ERR_NOMEM, "train: out of memory");
    for (int j = 0; j < n_in; j++)
        g->nodes[n].inputs[j] = in[j];
    for (int j = 0; j < 3; j++) {
        g->nodes[n].outputs[j] = out[j];
        g->values[out[j]].producer = n;
    }
    ad_attr_float(a, n, "scale", b.scale);
    ad_attr_int(a, n, "causal", b.causal);
    if (b.mask >= 0 && b.mask_mode != 3) {
        ad_attr_int(a, n, "mask", b.mask_mode);
        ad_attr_float(a, n, "fill", b.fill);
    }
    ad_accum(a, b.q, out[0]);
    if (ksrc >= 0)
        ad_accum(a, ksrc, out[1]); /* the Transpose making Kt is then differentiated by no one: Kt has no gradient */
    else
        ad_accum(a, b.kt, ad_transpose(a, out[1], r, perm));
    ad_accum(a, b.v, out[2]);
    return a->failed ? -1 : 0;
}

const char *tern_train_attention_report(const tern_trainer *t, int *fused, int *unfused)
{
    if (fused)
        *fused = t ? t->att.fused : 0;
    if (unfused)
        *unfused = t ? t->att.unfused : 0;
    return t ? t->att.why : "";
}
