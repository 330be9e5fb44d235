/* The plan of a layout tp x pp x dp (docs/training.md, "Tensor and pipeline parallelism"): the Megatron linear pairs
 * tensor parallelism splits (tp_pairs.c), the pipeline cuts, the segments, and each segment's graphs and programs
 * (every tensor rank runs the same program on its own shards).
 *
 * Pipeline stages. The model's linear layers (MatMul/Gemm with a weight nothing else reads: a tied output
 * projection is none), in order, are split into pp equal runs (pp must divide their count); the cut after stage s
 * is the first place after its last linear layer (and before the next stage's first) where exactly one float
 * activation crosses (values the plan knows as constants - shapes, masks - are constants in every program) and no
 * pair is split; none is refused naming the cut and what crosses. Segments are the pairs and the runs of other
 * nodes between them and the cuts (and a loss segment after a pair that computes the model output). */
#include "mp_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* values produced before position q of ord[] (or the data input) and read at or after it */
static int crossing(const tern_graph *g, const int *ord, int n, int q, const int *pos, int data_val, int *first_v,
                    char *names, size_t nl)
{
    int count = 0;
    size_t used = 0;
    unsigned char *seen = calloc((size_t)g->n_values + 1, 1);
    if (!seen)
        return -1;
    for (int k = q; k < n; k++) {
        const tern_graph_node *nd = &g->nodes[ord[k]];
        for (int i = 0; i < nd->n_inputs; i++) {
            int v = nd->inputs[i];
            if (v < 0 || seen[v] || g->values[v].constant) /* shapes the plan knows: constants in every program */
                continue;
            int pr = g->values[v].producer;
            int before = v == data_val || (pr >= 0 && pos[pr] >= 0 && pos[pr] < q);
            if (!before)
                continue;
            seen[v] = 1;
            if (!count)
                *first_v = v;
            count++;
            if (used + strlen(g->values[v].name) + 4 < nl)
                used += (size_t)snprintf(names + used, nl - used, "%s'%s'", used ? ", " : "", g->values[v].name);
        }
    }
    for (int k = 0; k < g->n_outputs; k++) {
        int v = g->outputs[k], pr = g->values[v].producer;
        if (!seen[v] && pr >= 0 && pos[pr] >= 0 && pos[pr] < q) {
            seen[v] = 1;
            count++;
            if (used + strlen(g->values[v].name) + 16 < nl)
                used += (size_t)snprintf(names + used, nl - used, "%soutput '%s'", used ? ", " : "", g->values[v].name);
        }
    }
    free(seen);
    return count;
}

int mp_pair_of(const mp_plan *p, int node)
{
    for (int i = 0; i < p->npairs; i++)
        if (p->pairs[i].in[node])
            return i;
    return -1;
}

tern_status mp_plan_build(tern_trainer *t, mp_plan *p, tern_error *err)
{
    tern_status st;
    tern_trainer m;
    memset(&m, 0, sizeof m);
    m.o = t->o;
    m.o.batch = p->mb;
    m.path = t->path;
    if ((st = tern_graph_load_onnx(t->path, &m.g, err)) || (st = train_bind_data(&m, err)) ||
        (st = graph_sort(m.g, err))) {
        tern_graph_free(m.g);
        free(m.data_name);
        return st;
    }
    free(m.data_name);
    tern_graph *g = p->g = m.g;
    if (tern_graph_input_count(g) > 1)
        return tern_error_set(err, TERN_ERR_UNSUPPORTED,
                              "train: tensor/pipeline parallelism: model '%s' has %d data inputs; one is supported yet",
                              t->path, tern_graph_input_count(g));
    p->data_val = tern_graph_input_count(g) ? tern_graph_input_id(g, 0) : -1;
    /* initializers kept constant (freeze.c: --freeze, the attention-mask rule), decided on the whole model: no
     * program trains them, and the plan folds what reads them (a mask's Slice, the rotary tables) into constants */
    if ((st = train_freeze_check(&m, 1, err)))
        return st;
    train_frozen_free(t);
    t->frozen = m.frozen;
    m.frozen = NULL;
    size_t nfz = tern_train_frozen_count(t);
    p->frozen = calloc(nfz + 1, sizeof *p->frozen);
    if (!p->frozen)
        return train_oom(err);
    for (size_t k = 0; k < nfz; k++)
        if (!(p->frozen[p->nfrozen++] = train_strdup(tern_train_frozen_name(t, k, NULL))))
            return train_oom(err);
    /* weights (as the step graph finds them) become inputs before inference, so nothing reading them folds */
    unsigned char *isw = calloc((size_t)g->n_values + 1, 1);
    if (!isw)
        return train_oom(err);
    int nwin = 0;
    for (int v = 0; v < g->n_values; v++) {
        tern_graph_value *gv = &g->values[v];
        if ((gv->flags & TERN_VALUE_INITIALIZER) && gv->constant && gv->constant->type == TERN_ELEM_FLOAT &&
            gv->constant->count >= 2 && !train_frozen_why(g, v, &t->o))
            isw[v] = 1, nwin++;
    }
    int *in = realloc(g->inputs, sizeof(int) * (size_t)(g->n_inputs + nwin + 1));
    if (!in) {
        free(isw);
        return train_oom(err);
    }
    g->inputs = in;
    for (int v = 0; v < g->n_values; v++)
        if (isw[v]) {
            tern_graph_value *gv = &g->values[v];
            gv->type = TERN_ELEM_FLOAT;
            gv->rank = gv->constant->rank;
            memcpy(gv->dims, gv->constant->dims, sizeof gv->dims);
            tern_host_tensor_free(gv->constant);
            gv->constant = NULL;
            gv->flags = TERN_VALUE_INPUT;
            g->inputs[g->n_inputs++] = v;
        }
    if ((st = tern_graph_infer(g, err))) {
        free(isw);
        return tern_error_prefix(err, "train: layout plan: ");
    }
    p->wd = calloc((size_t)g->n_nodes + 1, 1);
    if (!p->wd) {
        free(isw);
        return train_oom(err);
    }
    for (int i = 0; i < g->n_nodes; i++) {
        const tern_graph_node *nd = &g->nodes[i];
        int only = nd->op_id != TERN_GOP_CONSTANT && nd->n_inputs > 0;
        for (int q = 0; q < nd->n_inputs && only; q++) {
            int v = nd->inputs[q];
            if (v < 0 || isw[v] || (g->values[v].flags & TERN_VALUE_INITIALIZER))
                continue;
            int pr = g->values[v].producer;
            only = pr >= 0 && (g->nodes[pr].op_id == TERN_GOP_CONSTANT || p->wd[pr]);
        }
        p->wd[i] = (unsigned char)only;
    }
    if ((p->tp > 1 && (st = mp_find_pairs(t, p, isw, err))) || (st = mp_vocab_find(t, p, isw, err))) {
        free(isw);
        return st;
    }
    int n = g->n_nodes;
    int *ord = malloc(sizeof(int) * ((size_t)n + 1)), *pos = malloc(sizeof(int) * ((size_t)n + 1));
    int *segof = malloc(sizeof(int) * ((size_t)n + 1));
    int *cut = calloc((size_t)p->pp + 1, sizeof(int));
    if (!ord || !pos || !segof || !cut) {
        free(isw), free(ord), free(pos), free(segof), free(cut);
        return train_oom(err);
    }
    /* execution order: a pair's nodes contiguous (the nodes between a and b that are not the pair's go first).
     * Nodes whose outputs the plan knows as constants (the shape arithmetic of a dynamic-batch export) run in no
     * program: a program reading one gets the constant (seg_graph), so they never form a segment of their own,
     * which would have nothing to send on (a pair reading the data input directly). */
    int no = 0;
    unsigned char *placed = calloc((size_t)n + 1, 1);
    if (!placed) {
        free(isw), free(ord), free(pos), free(segof), free(cut);
        return train_oom(err);
    }
    for (int i = 0; i < n; i++) {
        pos[i] = -1;
        segof[i] = -1;
    }
    for (int i = 0; i < n; i++) {
        if (placed[i] || g->nodes[i].op_id == TERN_GOP_CONSTANT || p->wd[i] || mp_known_const(g, i))
            continue;
        int pi = mp_pair_of(p, i);
        if (pi >= 0) {
            const mp_pair *pr = &p->pairs[pi];
            for (int j = pr->a + 1; j < pr->b; j++)
                if (!pr->in[j] && !placed[j] && g->nodes[j].op_id != TERN_GOP_CONSTANT && !p->wd[j] &&
                    !mp_known_const(g, j)) {
                    placed[j] = 1;
                    ord[no++] = j;
                }
            for (int j = pr->a; j <= pr->b; j++)
                if (pr->in[j]) {
                    placed[j] = 1;
                    ord[no++] = j;
                }
            continue;
        }
        placed[i] = 1;
        ord[no++] = i;
    }
    free(placed);
    for (int k = 0; k < no; k++)
        pos[ord[k]] = k;
    /* pipeline cuts */
    /* a linear layer: a MatMul/Gemm with a weight (not attention's products of two activations) */
    unsigned char *lin = calloc((size_t)n + 1, 1);
    if (!lin) {
        free(isw), free(ord), free(pos), free(segof), free(cut);
        return train_oom(err);
    }
    /* ... whose weight nothing else reads: a tied output projection (the embedding's transpose) is not a layer */
    int nlin = 0;
    for (int k = 0; k < no; k++) {
        int w, tr;
        int64_t k0, n0;
        lin[ord[k]] = mp_is_linear(&g->nodes[ord[k]]) &&
                      mp_linear_kn(g, isw, &g->nodes[ord[k]], &w, &k0, &n0, &tr) && tern_graph_value_uses(g, w) == 1;
        nlin += lin[ord[k]];
    }
    st = TERN_OK;
    if (p->pp > 1 && (nlin < p->pp || nlin % p->pp) && t->o.vpp > 1) /* interleaved: p->pp is pp x vpp chunks */
        st = tern_error_set(err, TERN_ERR_INVALID,
                            "train: pipeline parallelism: pp=%lld x vpp=%lld = %lld model chunks do not divide the "
                            "model's %d linear layers (MatMul/Gemm with a weight); each chunk takes an equal run of "
                            "them",
                            (long long)(p->pp / t->o.vpp), (long long)t->o.vpp, (long long)p->pp, nlin);
    else if (p->pp > 1 && (nlin < p->pp || nlin % p->pp))
        st = tern_error_set(err, TERN_ERR_INVALID,
                            "train: pipeline parallelism: pp=%lld does not divide the model's %d linear layers "
                            "(MatMul/Gemm with a weight); each stage takes an equal run of them",
                            (long long)p->pp, nlin);
    cut[0] = 0;
    cut[p->pp] = no;
    for (int64_t s = 1; s < p->pp && !st; s++) {
        int want = (int)(s * nlin / p->pp), seen = 0, lo = -1, hi = no;
        for (int k = 0; k < no; k++)
            if (lin[ord[k]]) {
                seen++;
                if (seen == want)
                    lo = k + 1;
                if (seen == want + 1) {
                    hi = k;
                    break;
                }
            }
        int q = lo, found = -1, fv = -1;
        char names[512] = "", lab[256];
        for (; q <= hi && found < 0; q++) {
            if (q > 0 && q < no && mp_pair_of(p, ord[q - 1]) >= 0 &&
                mp_pair_of(p, ord[q - 1]) == mp_pair_of(p, ord[q]))
                continue;
            names[0] = 0;
            int c = crossing(g, ord, no, q, pos, p->data_val, &fv, names, sizeof names);
            if (c < 0) {
                st = train_oom(err);
                break;
            }
            if (c == 1 && fv >= 0 && fv != p->data_val && g->values[fv].type == TERN_ELEM_FLOAT)
                found = q;
        }
        if (!st && found < 0) {
            names[0] = 0;
            int c = crossing(g, ord, no, lo, pos, p->data_val, &fv, names, sizeof names);
            st = tern_error_set(err, TERN_ERR_UNSUPPORTED,
                                "train: pipeline parallelism: no cut for stage %lld after %s (linear layer %d of %d): "
                                "%d values cross there (%s) and no later place before the next linear layer has one "
                                "float activation crossing, which a stage boundary needs",
                                (long long)s, lo > 0 ? tern_graph_node_label(g, ord[lo - 1], lab, sizeof lab) : "?",
                                want, nlin, c, names);
        }
        if (!st)
            cut[s] = found;
        if (!st && cut[s] <= cut[s - 1])
            st = tern_error_set(err, TERN_ERR_INVALID, "train: pipeline parallelism: stage %lld would be empty",
                                (long long)s - 1);
    }
    /* segments: pairs, runs between them, broken at the cuts */
    p->seg = calloc((size_t)no + 1, sizeof *p->seg);
    p->stage_first = calloc((size_t)p->pp + 1, sizeof(int));
    if (!st && (!p->seg || !p->stage_first))
        st = train_oom(err);
    int stage = 0;
    for (int k = 0; k < no && !st; k++) {
        int node = ord[k], pi = mp_pair_of(p, node), vk = mp_vocab_of(p, node);
        while (stage + 1 < p->pp && k >= cut[stage + 1]) {
            stage++;
            p->stage_first[stage] = p->nseg;
        }
        mp_seg *cur = p->nseg ? &p->seg[p->nseg - 1] : NULL;
        int fresh = !cur || cur->pair != pi || cur->stage != stage || (pi >= 0 && cur->nn && segof[ord[k - 1]] < 0);
        if (!fresh && pi >= 0 && cur->nn && mp_pair_of(p, ord[k - 1]) != pi)
            fresh = 1;
        if (cur && (vk || cur->vocab)) /* the vocabulary-parallel embedding and head: a segment each */
            fresh = 1;
        if (fresh) {
            cur = &p->seg[p->nseg++];
            cur->pair = pi;
            cur->vocab = vk;
            cur->stage = stage;
            cur->nodes = malloc(sizeof(int) * ((size_t)no + 1));
            if (!cur->nodes) {
                st = train_oom(err);
                break;
            }
        }
        cur->nodes[cur->nn++] = node;
        segof[node] = p->nseg - 1;
    }
    for (int64_t s = stage + 1; s <= p->pp && !st; s++)
        p->stage_first[s] = p->nseg;
    p->stage_first[p->pp] = p->nseg;
    /* the loss reads the model output; when a pair computes it (its partial sums), a segment of its own after the
     * pair's all-reduce holds the loss; after the vocabulary-parallel head, the cross-entropy across the group */
    if (!st && p->nseg && (p->seg[p->nseg - 1].pair >= 0 || p->seg[p->nseg - 1].vocab == MP_VOCAB_HEAD)) {
        mp_seg *ls = &p->seg[p->nseg++];
        ls->pair = -1;
        ls->vocab = p->seg[p->nseg - 2].vocab == MP_VOCAB_HEAD ? MP_VOCAB_LOSS : 0;
        ls->stage = (int)p->pp - 1;
        ls->nodes = malloc(sizeof(int));
        if (!ls->nodes)
            st = train_oom(err);
        p->stage_first[p->pp] = p->nseg;
    }
    /* crossing values */
    for (int k = 0; k < p->nseg && !st; k++) {
        mp_seg *sg = &p->seg[k];
        sg->xin = malloc(sizeof(int) * ((size_t)g->n_values + 1));
        sg->xout = malloc(sizeof(int) * ((size_t)g->n_values + 1));
        if (!sg->xin || !sg->xout)
            st = train_oom(err);
    }
    p->xv = calloc((size_t)g->n_values + 1, sizeof *p->xv);
    int *xid = malloc(sizeof(int) * ((size_t)g->n_values + 1));
    if (!st && (!p->xv || !xid))
        st = train_oom(err);
    for (int v = 0; xid && v < g->n_values; v++)
        xid[v] = -1;
    for (int k = 0; k < p->nseg && !st; k++) {
        mp_seg *sg = &p->seg[k];
        for (int e = 0; e < sg->nn && !st; e++) {
            const tern_graph_node *nd = &g->nodes[sg->nodes[e]];
            for (int i = 0; i < nd->n_inputs && !st; i++) {
                int v = nd->inputs[i];
                if (v < 0 || isw[v] || v == p->data_val || g->values[v].constant)
                    continue;
                int pr = g->values[v].producer;
                if (pr < 0 || g->nodes[pr].op_id == TERN_GOP_CONSTANT || p->wd[pr] || segof[pr] == k)
                    continue;
                char lab[256];
                if (segof[pr] < 0 || segof[pr] > k) {
                    st = tern_error_set(err, TERN_ERR_INVALID, "train: layout plan: internal: %s reads '%s' out of order",
                                        tern_graph_node_label(g, sg->nodes[e], lab, sizeof lab), g->values[v].name);
                    break;
                }
                const tern_graph_value *gv = &g->values[v];
                int64_t cnt = 1;
                for (int d = 0; d < gv->rank; d++)
                    cnt *= gv->dims[d];
                if (gv->type != TERN_ELEM_FLOAT || gv->rank < 1 || cnt < 2) {
                    st = tern_error_set(err, TERN_ERR_UNSUPPORTED,
                                        "train: layout plan: '%s' (%s, %lld elements) crosses from one program to the "
                                        "next at %s; only float activations of two or more elements can",
                                        gv->name, tern_elem_name(gv->type), (long long)cnt,
                                        tern_graph_node_label(g, sg->nodes[e], lab, sizeof lab));
                    break;
                }
                if (xid[v] < 0) {
                    mp_xv *x = &p->xv[p->nxv];
                    x->name = train_strdup(gv->name);
                    if (!x->name) {
                        st = train_oom(err);
                        break;
                    }
                    x->count = (size_t)cnt;
                    x->rank = gv->rank;
                    memcpy(x->dims, gv->dims, sizeof x->dims);
                    x->from = segof[pr];
                    x->partial = (p->seg[segof[pr]].pair >= 0 && pr == p->pairs[p->seg[segof[pr]].pair].b) ||
                                 p->seg[segof[pr]].vocab == MP_VOCAB_EMBED;
                    xid[v] = p->nxv++;
                    mp_seg *src = &p->seg[segof[pr]];
                    src->xout[src->nxout++] = xid[v];
                }
                int dup = 0;
                for (int q = 0; q < sg->nxin; q++)
                    dup |= sg->xin[q] == xid[v];
                if (!dup)
                    sg->xin[sg->nxin++] = xid[v];
            }
        }
    }
    /* the loss reads the model output: its segment must be the last (or the pair just before a loss segment) */
    if (!st) {
        int y = -1;
        const char *want = t->o.output;
        for (int k = 0; k < g->n_outputs; k++)
            if (!want || !strcmp(g->values[g->outputs[k]].name, want)) {
                y = g->outputs[k];
                break;
            }
        int pr = y >= 0 ? g->values[y].producer : -1;
        mp_seg *ls = &p->seg[p->nseg - 1];
        if (pr >= 0 && ls->nn == 0 && segof[pr] == p->nseg - 2) {
            const tern_graph_value *gv = &g->values[y];
            mp_xv *x = &p->xv[p->nxv];
            int64_t cnt = 1;
            for (int d = 0; d < gv->rank; d++)
                cnt *= gv->dims[d];
            x->name = train_strdup(gv->name);
            if (!x->name)
                st = train_oom(err);
            x->count = (size_t)cnt;
            x->rank = gv->rank;
            memcpy(x->dims, gv->dims, sizeof x->dims);
            x->from = p->nseg - 2;
            x->partial = ls->vocab != MP_VOCAB_LOSS;
            if (ls->vocab == MP_VOCAB_LOSS) { /* the head's logits: a rank's vocabulary columns */
                x->vsplit = 1;
                x->dims[x->rank - 1] = p->vblk;
                x->count = (size_t)(cnt / p->vocab * p->vblk);
                p->vrows = cnt / p->vocab;
            }
            mp_seg *src = &p->seg[p->nseg - 2];
            src->xout[src->nxout++] = p->nxv;
            ls->xin[ls->nxin++] = p->nxv;
            p->nxv++;
            pr = -1;
            ls->last = 1;
        } else if (pr < 0 || segof[pr] != p->nseg - 1)
            st = tern_error_set(err, TERN_ERR_UNSUPPORTED,
                                "train: layout plan: the loss's model output '%s' is not computed by the last "
                                "program of the last stage",
                                y >= 0 ? g->values[y].name : (want ? want : "?"));
        else if (pr >= 0)
            p->seg[p->nseg - 1].last = 1;
    }
    if (!st && p->sp) /* sequence parallelism: the programs between the tensor-parallel regions on row shards */
        st = mp_sp_plan(t, p, isw, err);
    free(xid);
    free(lin);
    free(isw), free(ord), free(pos), free(segof), free(cut);
    return st;
}

void mp_plan_free(mp_plan *p)
{
    for (int i = 0; i < p->nfrozen; i++)
        free(p->frozen[i]);
    free(p->frozen);
    for (int i = 0; i < p->npairs; i++) {
        free(p->pairs[i].in);
        free(p->pairs[i].fix);
        free(p->pairs[i].nrep);
    }
    free(p->pairs);
    for (int i = 0; i < p->nws; i++)
        free(p->ws[i].name);
    free(p->ws);
    for (int i = 0; i < p->nxv; i++)
        free(p->xv[i].name);
    free(p->xv);
    for (int k = 0; p->seg && k < p->nseg; k++) {
        mp_seg *s = &p->seg[k];
        free(s->nodes);
        free(s->xin);
        free(s->xout);
        free(s->xw);
        tern_trainer *m = &s->prog.m;
        train_free_weights(m->w, m->nw);
        train_frozen_free(m);
        free(m->data_name);
        free(m->read_out);
        free(m->scratch);
        train_dropout_free(m->drop, m->ndrop);
        tern_rt_free(m->rt);
        tern_exe_free(&m->exe);
        tern_graph_free(m->g);
        tern_rt_free(s->prog.frt);
        tern_exe_free(&s->prog.fexe);
    }
    free(p->seg);
    free(p->stage_first);
    free(p->wd);
    mp_vocab_free(p);
    tern_graph_free(p->g);
    tern_graph_free(p->gsp);
    memset(p, 0, sizeof *p);
}

void mp_shard_copy(const float *full, float *shard, int rank, const int64_t *dims, int axis, int64_t tp, int64_t r,
                   int back)
{
    size_t outer = 1, inner = 1;
    for (int d = 0; d < axis; d++)
        outer *= (size_t)dims[d];
    for (int d = axis + 1; d < rank; d++)
        inner *= (size_t)dims[d];
    size_t blk = (size_t)(dims[axis] / tp);
    for (size_t o = 0; o < outer; o++) {
        const size_t fo = (o * (size_t)dims[axis] + (size_t)r * blk) * inner, so = o * blk * inner;
        if (back)
            memcpy((float *)full + fo, shard + so, blk * inner * sizeof(float));
        else
            memcpy(shard + so, full + fo, blk * inner * sizeof(float));
    }
}

void mp_shard_copy_g(const float *full, float *shard, int rank, const int64_t *dims, int axis, int64_t tp, int64_t r,
                     int back, int ngroups, const int64_t *groups)
{
    if (ngroups <= 1) {
        mp_shard_copy(full, shard, rank, dims, axis, tp, r, back);
        return;
    }
    size_t outer = 1, inner = 1, len = (size_t)dims[axis], slen = len / (size_t)tp;
    for (int d = 0; d < axis; d++)
        outer *= (size_t)dims[d];
    for (int d = axis + 1; d < rank; d++)
        inner *= (size_t)dims[d];
    for (size_t o = 0; o < outer; o++) {
        size_t goff = 0, soff = 0;
        for (int c = 0; c < ngroups; c++) {
            size_t blk = (size_t)groups[c] / (size_t)tp;
            size_t fo = (o * len + goff + (size_t)r * blk) * inner, so = (o * slen + soff) * inner;
            if (back)
                memcpy((float *)full + fo, shard + so, blk * inner * sizeof(float));
            else
                memcpy(shard + so, full + fo, blk * inner * sizeof(float));
            goff += (size_t)groups[c];
            soff += blk;
        }
    }
}

int64_t mp_shard_len(const mp_wspec *ws, const int64_t *dims, int64_t tp)
{
    return ws->blk > 0 ? ws->blk : dims[ws->axis] / (tp / ws->rep);
}

void mp_shard_copy_ws(const mp_wspec *ws, const float *full, float *shard, int rank, const int64_t *dims, int64_t tp,
                      int64_t r, int back)
{
    if (ws->ngroups > 1) {
        mp_shard_copy_g(full, shard, rank, dims, ws->axis, tp, r, back, ws->ngroups, ws->groups);
        return;
    }
    /* block r / rep of blk along the axis; the part past the axis's end (a padded last block) is zeros */
    size_t outer = 1, inner = 1, len = (size_t)dims[ws->axis], blk = (size_t)mp_shard_len(ws, dims, tp);
    for (int d = 0; d < ws->axis; d++)
        outer *= (size_t)dims[d];
    for (int d = ws->axis + 1; d < rank; d++)
        inner *= (size_t)dims[d];
    size_t lo = (size_t)(r / ws->rep) * blk, n = lo < len ? (len - lo < blk ? len - lo : blk) : 0;
    for (size_t o = 0; o < outer; o++) {
        float *sh = shard + o * blk * inner;
        if (n && back)
            memcpy((float *)full + (o * len + lo) * inner, sh, n * inner * sizeof(float));
        else if (n)
            memcpy(sh, full + (o * len + lo) * inner, n * inner * sizeof(float));
        if (!back)
            memset(sh + n * inner, 0, (blk - n) * inner * sizeof(float));
    }
}

/* A Constant node producing value v with tensor c (taken). */
static tern_status const_node(tern_graph *g, int v, tern_host_tensor *c, tern_error *err)
{
    char nm[64];
    snprintf(nm, sizeof nm, "tern.mp.const.%d", v);
    int id = graph_add_node(g, "Constant", "", nm, 0, 1, 1);
    if (id < 0) {
        tern_host_tensor_free(c);
        return train_oom(err);
    }
    tern_graph_node *n = &g->nodes[id];
    n->outputs[0] = v;
    n->attrs[0].name = graph_strdup("value");
    n->attrs[0].type = TERN_ATTR_TENSOR;
    n->attrs[0].t = c;
    n->n_attrs = 1;
    if (!n->attrs[0].name)
        return train_oom(err);
    graph_value_reset_shape(&g->values[v]);
    g->values[v].flags &= ~(unsigned)(TERN_VALUE_INPUT | TERN_VALUE_INITIALIZER);
    return TERN_OK;
}

/* The graph of segment k for tensor rank r: the model reloaded, the segment's nodes kept (and the Constant nodes
 * they read), its crossing inputs made initializers (placeholders: the step graph turns them into weights, so
 * their gradients are the segment's input gradients), rank r's shards in place of the split weights. with_loss:
 * the loss sum_j ReduceSum(out_j * dy_j) over the crossing outputs, dy_j inputs (not on the last segment, which
 * keeps the model's loss). */
static tern_status seg_graph(tern_trainer *t, mp_plan *p, int k, int64_t r, int with_loss, tern_trainer *m,
                             tern_error *err)
{
    mp_seg *sg = &p->seg[k];
    memset(m, 0, sizeof *m);
    m->o = t->o;
    /* sequence parallelism: a rank's rows (inside a row: one row, its positions on the crossing placeholders) */
    m->o.batch = sg->sp ? (p->sp_sub > 1 ? 1 : p->mb / p->tp) : p->mb;
    const tern_graph *pg = sg->sp && p->gsp ? p->gsp : p->g; /* the plan's constants (folded shapes) for those rows */
    m->o.grads_as_outputs = 0;
    m->o.freeze = (const char *const *)p->frozen; /* the plan's constants by exact name, absent ones allowed */
    m->o.n_freeze = (size_t)p->nfrozen;
    m->o.no_auto_freeze = 1;
    m->freeze_exact = 1;
    m->drop_ref = p->g; /* Dropout masks: keyed and shaped by the whole model's (dropout.c) */
    m->drop_tp = p->tp;
    m->path = t->path;
    tern_status st;
    if ((st = tern_graph_load_onnx(t->path, &m->g, err)) || (st = train_bind_data(m, err)) ||
        (st = graph_sort(m->g, err)))
        return st;
    tern_graph *g = m->g;
    if (g->n_nodes != p->g->n_nodes)
        return tern_error_set(err, TERN_ERR_INVALID, "train: layout plan: internal: the model reloaded differs");
    unsigned char *keep = calloc((size_t)g->n_nodes + 1, 1), *xin = calloc((size_t)g->n_values + 1, 1);
    if (!keep || !xin) {
        free(keep), free(xin);
        return train_oom(err);
    }
    for (int e = 0; e < sg->nn; e++)
        keep[sg->nodes[e]] = 1;
    for (int i = g->n_nodes - 1; i >= 0; i--) /* the Constant and weight-only nodes it reads, transitively */
        if (keep[i])
            for (int q = 0; q < g->nodes[i].n_inputs; q++) {
                int v = g->nodes[i].inputs[q];
                int pr = v >= 0 ? g->values[v].producer : -1;
                if (pr >= 0 && (g->nodes[pr].op_id == TERN_GOP_CONSTANT || p->wd[pr]))
                    keep[pr] = 1;
            }
    /* crossing inputs: placeholders of their shape */
    for (int q = 0; q < sg->nxin && !st; q++) {
        const mp_xv *x = &p->xv[sg->xin[q]];
        int v = graph_lookup(g, x->name);
        if (v < 0) {
            st = tern_error_set(err, TERN_ERR_INVALID, "train: layout plan: internal: no value '%s'", x->name);
            break;
        }
        tern_host_tensor *c;
        const int64_t *xd = sg->sp ? x->sdims : x->dims; /* a row-sharded program reads the rank's rows */
        if ((st = tern_host_tensor_new(TERN_ELEM_FLOAT, x->rank, xd, &c, err)))
            break;
        tern_graph_value *gv = &g->values[v];
        tern_host_tensor_free(gv->constant);
        gv->constant = c;
        gv->flags = TERN_VALUE_INITIALIZER;
        gv->type = TERN_ELEM_FLOAT;
        gv->rank = x->rank;
        memcpy(gv->dims, xd, sizeof gv->dims);
        xin[v] = 1;
    }
    for (int i = 0; i < g->n_nodes && !st; i++) /* the producers are dropped: the placeholders are their values */
        for (int q = 0; q < g->nodes[i].n_outputs; q++)
            if (g->nodes[i].outputs[q] >= 0 && xin[g->nodes[i].outputs[q]]) {
                int v = g->nodes[i].outputs[q];
                g->nodes[i].outputs[q] = graph_add_value(g, NULL);
                if (g->nodes[i].outputs[q] < 0)
                    st = train_oom(err);
                (void)v;
            }
    /* the data input only where the segment reads it */
    int reads = 0;
    if (!st && p->data_val >= 0) {
        int dv = tern_graph_input_id(g, 0);
        for (int i = 0; i < g->n_nodes; i++)
            for (int q = 0; keep[i] && q < g->nodes[i].n_inputs; q++)
                reads |= g->nodes[i].inputs[q] == dv;
        if (!reads) {
            g->values[dv].flags &= ~(unsigned)TERN_VALUE_INPUT;
            g->n_inputs = 0;
            free(m->data_name);
            m->data_name = NULL;
            m->nin = 0;
            m->data_bytes = 0;
            m->data_count = 0;
        }
    }
    /* outputs: the crossing outputs, and the model's on the last segment */
    int *outs = malloc(sizeof(int) * ((size_t)sg->nxout + (size_t)g->n_outputs + 2));
    int nout = 0;
    if (!st && !outs)
        st = train_oom(err);
    for (int q = 0; q < sg->nxout && !st; q++) {
        int v = graph_lookup(g, p->xv[sg->xout[q]].name);
        outs[nout++] = v;
    }
    if (!st && sg->last)
        for (int q = 0; q < g->n_outputs; q++) {
            int v = g->outputs[q], pr = g->values[v].producer;
            if ((pr >= 0 && keep[pr]) || xin[v])
                outs[nout++] = v;
        }
    for (int q = 0; q < g->n_outputs && !st; q++)
        g->values[g->outputs[q]].flags &= ~(unsigned)TERN_VALUE_OUTPUT;
    if (!st) {
        free(g->outputs);
        g->outputs = outs;
        g->n_outputs = nout;
        outs = NULL;
        for (int q = 0; q < nout; q++)
            g->values[g->outputs[q]].flags |= TERN_VALUE_OUTPUT;
    }
    free(outs);
    /* a pair's Reshape targets and Split sizes on a rank's shard: new constant operands (made after compacting) */
    const mp_pair *fp = sg->pair >= 0 ? &p->pairs[sg->pair] : NULL;
    int *fixv = fp ? malloc(sizeof(int) * ((size_t)fp->nfix + 1)) : NULL;
    if (fp && !fixv)
        st = train_oom(err);
    for (int q = 0; fp && q < fp->nfix && !st; q++) {
        char nm[64];
        snprintf(nm, sizeof nm, "tern.mp.fix.%d", q);
        int v = graph_add_value(g, nm);
        if (v < 0) {
            st = train_oom(err);
            break;
        }
        g->nodes[fp->fix[q].node].inputs[1] = v;
        fixv[q] = v;
    }
    char **fixname = NULL;
    if (!st && fp) {
        fixname = calloc((size_t)fp->nfix + 1, sizeof *fixname);
        for (int q = 0; fixname && q < fp->nfix; q++)
            fixname[q] = train_strdup(g->values[fixv[q]].name);
        if (!fixname)
            st = train_oom(err);
    }
    free(fixv);
    if (!st)
        st = graph_compact(g, keep, err);
    /* values a kept node reads that nothing here computes: the plan graph's constants (shapes, masks) */
    unsigned char *made = !st ? calloc((size_t)g->n_values + 1, 1) : NULL;
    if (!st && !made)
        st = train_oom(err);
    for (int i = 0; made && i < g->n_nodes; i++)
        for (int q = 0; q < g->nodes[i].n_outputs; q++)
            if (g->nodes[i].outputs[q] >= 0)
                made[g->nodes[i].outputs[q]] = 1;
    for (int q = 0; fp && fixname && q < fp->nfix && !st; q++) {
        int v = graph_lookup(g, fixname[q]);
        if (v < 0)
            continue; /* the node is not this segment's */
        int64_t d = fp->fix[q].n;
        tern_host_tensor *c;
        if ((st = tern_host_tensor_new(TERN_ELEM_INT64, 1, &d, &c, err)))
            break;
        memcpy(c->i, fp->fix[q].v, (size_t)d * sizeof(int64_t));
        st = const_node(g, v, c, err);
        made[v] = 1;
    }
    for (int q = 0; fp && fixname && q < fp->nfix; q++)
        free(fixname[q]);
    free(fixname);
    int n0 = g->n_nodes;
    for (int i = 0; made && i < n0 && !st; i++)
        for (int q = 0; q < g->nodes[i].n_inputs && !st; q++) {
            int v = g->nodes[i].inputs[q];
            if (v < 0 || made[v] || (g->values[v].flags & (TERN_VALUE_INPUT | TERN_VALUE_INITIALIZER)) ||
                g->values[v].constant)
                continue;
            int pv = graph_lookup(pg, g->values[v].name);
            tern_host_tensor *c = NULL;
            if (pv < 0 || !pg->values[pv].constant) {
                char lab[256];
                st = tern_error_set(err, TERN_ERR_INVALID,
                                    "train: layout plan: internal: %s reads '%s', which no program computes",
                                    tern_graph_node_label(g, i, lab, sizeof lab), g->values[v].name);
                break;
            }
            if ((st = tern_host_tensor_clone(pg->values[pv].constant, &c, err)) || (st = const_node(g, v, c, err)))
                break;
            made[v] = 1;
        }
    free(made);
    free(keep), free(xin);
    /* rank r's shards */
    const mp_pair *pr = sg->pair >= 0 ? &p->pairs[sg->pair] : NULL;
    int split = pr || sg->vocab;
    for (int v = 0; v < g->n_values && !st && split; v++) {
        tern_graph_value *gv = &g->values[v];
        const mp_wspec *ws = gv->constant ? mp_wspec_of(p, gv->name) : NULL;
        if (!ws || ws->axis < 0)
            continue;
        int64_t d[TERN_GRAPH_MAX_RANK];
        memcpy(d, gv->constant->dims, sizeof d);
        d[ws->axis] = mp_shard_len(ws, gv->constant->dims, p->tp);
        tern_host_tensor *c;
        if ((st = tern_host_tensor_new(TERN_ELEM_FLOAT, gv->constant->rank, d, &c, err)))
            break;
        mp_shard_copy_ws(ws, gv->constant->f, c->f, c->rank, gv->constant->dims, p->tp, r, 0);
        tern_host_tensor_free(gv->constant);
        gv->constant = c;
        gv->rank = c->rank;
        memcpy(gv->dims, c->dims, sizeof gv->dims);
    }
    if (!st && sg->sp && p->sp_sub > 1) /* inside a row: every computed shape again from the placeholders */
        split = 1;
    if (!st && split) /* shapes of the split values come again from inference */
        for (int v = 0; v < g->n_values; v++)
            if (!(g->values[v].flags & (TERN_VALUE_INPUT | TERN_VALUE_INITIALIZER)) && !g->values[v].constant)
                graph_value_reset_shape(&g->values[v]);
    if (!st)
        st = graph_compact(g, NULL, err);
    if (!st && sg->vocab == MP_VOCAB_EMBED && !(st = mp_vocab_embed_graph(p, g, err)))
        st = graph_compact(g, NULL, err);
    if (!st && with_loss && !sg->last) {
        ad_ctx a;
        st = ad_init(&a, g, err);
        if (!st) {
            a.prefix = "tern.mp.";
            int acc = -1;
            for (int q = 0; q < sg->nxout && !a.failed; q++) {
                const mp_xv *x = &p->xv[sg->xout[q]];
                char nm[512];
                snprintf(nm, sizeof nm, MP_DY "%s", x->name);
                int y = graph_lookup(g, x->name);
                int dy = graph_add_value(g, nm);
                int *in = dy >= 0 ? realloc(g->inputs, sizeof(int) * (size_t)(g->n_inputs + 1)) : NULL;
                if (!in || ad_grow(&a) < 0) {
                    ad_fail(&a, TERN_ERR_NOMEM, "train: out of memory");
                    break;
                }
                g->inputs = in;
                g->inputs[g->n_inputs++] = dy;
                tern_graph_value *dv = &g->values[dy];
                dv->flags = TERN_VALUE_INPUT;
                dv->type = TERN_ELEM_FLOAT;
                dv->rank = x->rank;
                memcpy(dv->dims, sg->sp ? x->sdims : x->dims, sizeof dv->dims);
                int s = ad_reduce(&a, "ReduceSum", ad_op2(&a, "Mul", y, dy), 0, NULL, 0);
                acc = acc < 0 ? s : ad_op2(&a, "Add", acc, s);
            }
            ad_shape one = {.rank = 1, .d = {1}};
            int l = a.failed ? -1 : ad_op1(&a, "Identity", ad_reshape(&a, acc, &one));
            if (l >= 0) {
                char *nm = train_strdup(MP_LOSS);
                if (!nm) {
                    ad_fail(&a, TERN_ERR_NOMEM, "train: out of memory");
                } else {
                    free(g->values[l].name);
                    g->values[l].name = nm;
                    int *o = realloc(g->outputs, sizeof(int) * (size_t)(g->n_outputs + 1));
                    if (!o) {
                        ad_fail(&a, TERN_ERR_NOMEM, "train: out of memory");
                    } else {
                        g->outputs = o;
                        g->outputs[g->n_outputs++] = l;
                        g->values[l].flags |= TERN_VALUE_OUTPUT;
                    }
                }
            }
            st = a.failed ? err->code : TERN_OK;
            ad_free(&a);
        }
        if (!st)
            st = graph_compact(g, NULL, err);
        m->o.loss = TERN_LOSS_OUTPUT;
        m->o.output = MP_LOSS;
    }
    if (st)
        tern_error_prefix(err, "train: program %d of the layout: ", k);
    return st;
}

/* Dropout in training mode in a segment program: each tensor rank draws its block of the split axis
 * (dropout.c). That block is contiguous in the whole tensor unless the axis is a fused QKV output's (split per
 * group) or the node computes on key/value heads replicated over ranks: those are refused. */
static tern_status drop_check(const mp_plan *p, const mp_seg *sg, const tern_trainer *m, tern_error *err)
{
    const mp_pair *fp = sg->pair >= 0 ? &p->pairs[sg->pair] : NULL;
    for (size_t q = 0; q < m->ndrop; q++) {
        const train_dropout *d = &m->drop[q];
        if (d->split == -1 || d->ref_node < 0)
            continue;
        char lab[256];
        tern_graph_node_label(p->g, d->ref_node, lab, sizeof lab);
        if (!fp && sg->sp && !sg->vocab &&
            (d->split == 0 || d->split == TRAIN_DROP_TOKENS || (p->sp_sub > 1 && d->split == 1 && d->gdims[0] == 1)))
            continue; /* sequence parallelism: rank r's rows or positions, token block r of the micro-batch */
        if (sg->vocab || !fp || d->split < 0)
            return tern_error_set(err, TERN_ERR_UNSUPPORTED,
                                  "train: %s (Dropout in training mode): split %s outside the places whose ranks' mask "
                                  "blocks are known (a tensor-parallel pair's split axis, sequence parallelism's rows "
                                  "or positions)",
                                  lab, d->split < 0 ? "into token blocks" : "along one axis");
        if ((fp->ngroups > 1 && d->gdims[d->split] == fp->n) || (fp->nrep && fp->nrep[d->ref_node] > 1))
            return tern_error_set(err, TERN_ERR_UNSUPPORTED,
                                  "train: %s (Dropout in training mode): on %s, whose tensor ranks do not hold "
                                  "contiguous blocks of axis %d; not built",
                                  lab, fp->nrep && fp->nrep[d->ref_node] > 1 ? "replicated key/value heads"
                                                                              : "a fused QKV output",
                                  d->split);
    }
    return TERN_OK;
}

/* The forward program f's Dropouts as Mul(x, mask) with the gradient program m's mask inputs */
static tern_status fwd_masks(tern_trainer *f, const tern_trainer *m, tern_error *err)
{
    ad_ctx a;
    tern_status st = ad_init(&a, f->g, err);
    if (st)
        return st;
    if (train_dropout_rewrite(f, &a) < 0)
        st = err->code ? err->code : TERN_ERR_INVALID;
    ad_free(&a);
    for (size_t q = 0; !st && q < f->ndrop; q++) {
        size_t j = 0;
        while (j < m->ndrop && strcmp(m->drop[j].input, f->drop[q].input))
            j++;
        if (j == m->ndrop || m->drop[j].count != f->drop[q].count || m->drop[j].key != f->drop[q].key)
            st = tern_error_set(err, TERN_ERR_INVALID,
                                "train: internal: the forward program's Dropout '%s' is not its gradient program's",
                                f->drop[q].input);
    }
    train_dropout_free(f->drop, f->ndrop);
    f->drop = NULL;
    f->ndrop = 0;
    return st;
}

/* Every segment's gradient program (and forward program but on the last), compiled once for all tensor ranks (each
 * runs it on its own shards, fed as inputs). */
tern_status mp_build_programs(tern_trainer *t, mp_plan *p, tern_error *err)
{
    tern_status st = TERN_OK;
    uint64_t hbm = 0;
    for (int k = 0; k < p->nseg && !st; k++) {
        mp_seg *sg = &p->seg[k];
        tern_trainer *m = &sg->prog.m;
        tern_exe_init(&m->exe);
        tern_exe_init(&sg->prog.fexe);
        if (sg->vocab == MP_VOCAB_LOSS) { /* the cross-entropy across the group: programs of its own */
            if ((st = mp_vocab_build(t, p, &hbm, &sg->prog.flops, err)))
                break;
            if (!(sg->xw = calloc(1, sizeof(int))))
                st = train_oom(err);
            continue;
        }
        if ((st = seg_graph(t, p, k, 0, 1, m, err)) || (st = train_build_step_graph(m, TRAIN_GRAPH_GRADS, err)))
            break;
        if ((st = drop_check(p, sg, m, err)))
            break;
        char what[64];
        snprintf(what, sizeof what, "gradient program %d of the layout", k);
        if ((st = train_prune_dead(m->g, err)) ||
            (st = train_compile_load(t, m->g, &m->exe, &m->rt, &sg->prog.flops, &hbm, what, err)))
            break;
        size_t sc = m->target_count > m->read_count ? m->target_count : m->read_count;
        m->scratch = calloc(sc + 1, sizeof(float));
        sg->xw = malloc(sizeof(int) * (m->nw + 1));
        if (!m->scratch || !sg->xw) {
            st = train_oom(err);
            break;
        }
        for (size_t i = 0; i < m->nw; i++) {
            sg->xw[i] = -1;
            for (int q = 0; q < sg->nxin; q++)
                if (!strcmp(p->xv[sg->xin[q]].name, m->w[i].name))
                    sg->xw[i] = sg->xin[q];
        }
        if (st || sg->last)
            continue;
        /* the forward program: the segment without its loss, weights and crossing inputs fed */
        tern_trainer f;
        if ((st = seg_graph(t, p, k, 0, 0, &f, err))) {
            tern_graph_free(f.g);
            free(f.data_name);
            break;
        }
        tern_graph *g = f.g;
        int cnt = 0;
        for (int v = 0; v < g->n_values; v++)
            if ((g->values[v].flags & TERN_VALUE_INITIALIZER) && g->values[v].constant &&
                g->values[v].constant->type == TERN_ELEM_FLOAT && g->values[v].constant->count >= 2 &&
                !train_frozen_why(g, v, &f.o))
                cnt++;
        int *in = realloc(g->inputs, sizeof(int) * (size_t)(g->n_inputs + cnt + 1));
        if (!in) {
            st = train_oom(err);
        } else {
            g->inputs = in;
            for (int v = 0; v < g->n_values; v++) {
                tern_graph_value *gv = &g->values[v];
                if (!((gv->flags & TERN_VALUE_INITIALIZER) && gv->constant && gv->constant->type == TERN_ELEM_FLOAT &&
                      gv->constant->count >= 2) || train_frozen_why(g, v, &f.o))
                    continue;
                gv->type = TERN_ELEM_FLOAT;
                gv->rank = gv->constant->rank;
                memcpy(gv->dims, gv->constant->dims, sizeof gv->dims);
                tern_host_tensor_free(gv->constant);
                gv->constant = NULL;
                gv->flags = TERN_VALUE_INPUT;
                g->inputs[g->n_inputs++] = v;
            }
        }
        snprintf(what, sizeof what, "forward program %d of the layout", k);
        if (!st && ((st = graph_sort(g, err)) || (st = tern_graph_infer(g, err))))
            tern_error_prefix(err, "train: %s: ", what);
        if (!st) /* its Dropouts read the gradient program's masks (the same names, shapes and keys) */
            st = fwd_masks(&f, m, err);
        if (!st)
            st = train_compile_load(t, g, &sg->prog.fexe, &sg->prog.frt, NULL, &hbm, what, err);
        tern_graph_free(g);
        free(f.data_name);
    }
    t->hbm = hbm;
    return st;
}
