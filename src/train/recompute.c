/* Activation recomputation (checkpointing) for the reverse pass. The model's forward nodes are cut into segments
 * of about as many activation nodes each; the loss joins the last. Just before the reverse pass reaches a segment
 * (any but the last, whose backward starts at once), the segment's forward nodes are emitted again as copies,
 * and its gradient rules read the copies instead of the originals. The originals' values then have no reader
 * after the forward, so the compiler frees them there (scratch storage is released after a value's last reader)
 * and reuses their bytes. The copies are the same ops on the same inputs in the same order, so every value, and
 * the losses and weights, are bit for bit those of the run without recomputation. The cost is a second forward
 * of every segment but the last.
 *
 * Which nodes are copied: those with a float output that is not constant and is interior (no node after the
 * segment reads it: a value the next segment or a later rule reads is alive anyway), and with an input that is
 * an activation (the data, token ids, or a value computed from them), not only weights and constants.
 *
 * Order: the step graph keeps its build order under recomputation (step_graph.c), so the copies run where they
 * were appended. One more guard keeps them there: a copy that reads no other copy reads its smallest float input
 * through a barrier Where(e == e, x, x), with e the first element of the gradient arriving at the segment. The
 * result is x bit for bit (both branches are x, so a NaN in e changes nothing), and it makes the copy wait for
 * the later segments' backward. The barrier is usually a bias, a few bytes. */
#include "ad_internal.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* An activation: a value that depends on the data (or another per-step input that is not a weight), as marked by
 * ad_recompute_plan; values computed from weights and constants alone are not. */
static int is_activation(const ad_ctx *a, int v)
{
    return v >= 0 && v < a->cap && a->act[v];
}

/* Node i is copied when it computes a float activation from at least one activation input. */
static int copyable(const ad_ctx *a, int i)
{
    const tern_graph_node *n = &a->g->nodes[i];
    int out = 0, in = 0;
    for (int k = 0; k < n->n_outputs; k++) {
        int v = n->outputs[k];
        if (v >= 0 && !a->g->values[v].constant && tern_elem_is_float(a->g->values[v].type))
            out = 1;
    }
    for (int k = 0; k < n->n_inputs; k++)
        in |= is_activation(a, n->inputs[k]);
    for (int k = 0; k < n->n_attrs; k++)
        if (n->attrs[k].type == TERN_ATTR_GRAPH)
            return 0; /* a subgraph is not copied */
    return out && in;
}

int ad_recompute_plan(ad_ctx *a, int n_fwd, int segments)
{
    free(a->seg_of);
    a->seg_of = NULL;
    a->n_seg = 0;
    if (segments == 0 || n_fwd < 2)
        return 0;
    /* activations, in forward order; a->needs holds only the trained weights yet */
    tern_graph *g = a->g;
    for (int k = 0; k < g->n_inputs; k++) {
        int v = g->inputs[k];
        if (!g->values[v].constant && !ad_needs(a, v)) /* the data (token ids too), masks, targets */
            a->act[v] = 1;
    }
    for (int i = 0; i < n_fwd; i++) {
        const tern_graph_node *n = &g->nodes[i];
        int any = 0;
        for (int k = 0; k < n->n_inputs; k++)
            any |= is_activation(a, n->inputs[k]);
        for (int k = 0; any && k < n->n_outputs; k++) {
            int v = n->outputs[k];
            if (v >= 0 && !g->values[v].constant)
                a->act[v] = 1;
        }
    }
    /* the model's forward only: the loss's backward follows it at once, so the loss joins the last segment */
    int nm = a->n_model > 0 && a->n_model < n_fwd ? a->n_model : n_fwd;
    int acts = 0;
    for (int i = 0; i < nm; i++)
        acts += copyable(a, i);
    if (segments < 0) /* Chen et al.'s sqrt(n) checkpoints: about sqrt(n) segments of sqrt(n) nodes */
        segments = (int)lround(sqrt((double)acts));
    if (segments > acts)
        segments = acts;
    if (segments < 2)
        return 0;
    a->seg_of = malloc(sizeof(int) * (size_t)n_fwd);
    if (!a->seg_of)
        return ad_fail(a, TERN_ERR_NOMEM, "train: out of memory");
    /* segment s holds the nodes after s x acts / segments activation nodes and up to (s + 1) x acts / segments */
    int run = 0;
    for (int i = 0; i < n_fwd; i++) {
        int c = i < nm && copyable(a, i);
        int s = i >= nm ? segments - 1 : c ? (int)((int64_t)run * segments / acts) : (i ? a->seg_of[i - 1] : 0);
        a->seg_of[i] = s;
        run += c;
    }
    a->n_seg = segments;
    a->cur_seg = -1;
    return 0;
}

static int copy_attr(ad_ctx *a, tern_graph_attr *d, const tern_graph_attr *s)
{
    memset(d, 0, sizeof *d);
    d->name = graph_strdup(s->name);
    d->type = s->type;
    d->i = s->i;
    d->f = s->f;
    d->n = s->n;
    int bad = !d->name;
    if (s->s)
        bad |= !(d->s = graph_strdup(s->s));
    if (s->ints) {
        d->ints = malloc(sizeof(int64_t) * (s->n ? s->n : 1));
        if (d->ints)
            memcpy(d->ints, s->ints, sizeof(int64_t) * s->n);
        bad |= !d->ints;
    }
    if (s->floats) {
        d->floats = malloc(sizeof(float) * (s->n ? s->n : 1));
        if (d->floats)
            memcpy(d->floats, s->floats, sizeof(float) * s->n);
        bad |= !d->floats;
    }
    if (s->strings) {
        d->strings = calloc(s->n ? s->n : 1, sizeof(char *));
        bad |= !d->strings;
        for (size_t k = 0; d->strings && k < s->n; k++)
            bad |= !(d->strings[k] = graph_strdup(s->strings[k]));
    }
    if (s->t && tern_host_tensor_clone(s->t, &d->t, NULL))
        bad = 1;
    return bad ? ad_fail(a, TERN_ERR_NOMEM, "train: out of memory") : 0;
}

/* Forget the previous segment's substitutions: a value kept for segment s + 1 is an ordinary value again
 * when segment s is differentiated. */
static void clear_map(ad_ctx *a)
{
    for (int k = 0; k < a->n_mapped; k++)
        a->rc_map[a->mapped[k]] = -1;
    a->n_mapped = 0;
}

static int map_set(ad_ctx *a, int orig, int copy)
{
    if (a->n_mapped == a->cap_mapped) {
        int cap = a->cap_mapped ? a->cap_mapped * 2 : 64;
        int *m = realloc(a->mapped, sizeof(int) * (size_t)cap);
        if (!m)
            return ad_fail(a, TERN_ERR_NOMEM, "train: out of memory");
        a->mapped = m;
        a->cap_mapped = cap;
    }
    a->mapped[a->n_mapped++] = orig;
    a->rc_map[orig] = copy;
    a->orig[copy] = orig;
    return 0;
}

/* Emits segment s's copies (its nodes [first, last]); dy is the gradient arriving at the segment's value at. */
static int emit_segment(ad_ctx *a, int s, int first, int last, int dy, int at)
{
    tern_graph *g = a->g;
    /* the barrier's condition: e == e for the first element e of dy (true unless e is NaN; either way x) */
    ad_shape flat = {.rank = 1, .d = {0}};
    ad_shape sd = ad_shape_of(a, at); /* the gradient's own shape is inferred only later */
    int64_t nd;
    if (ad_shape_numel(&sd, &nd) || nd < 1)
        return ad_fail(a, TERN_ERR_INVALID, "train: recompute: a gradient without a static shape");
    flat.d[0] = nd;
    int64_t zero = 0;
    int e = ad_op2(a, "Gather", ad_reshape(a, dy, &flat), ad_const_i64(a, 1, &zero));
    int cond = ad_op2(a, "Equal", e, e);
    if (cond < 0)
        return -1;
    /* kept: a value of the segment that a node after it reads (the next segment's forward, a later backward
     * rule) or a graph output: it stays alive anyway, so its node need not run again */
    unsigned char *kept = calloc((size_t)g->n_values + 1, 1);
    if (!kept)
        return ad_fail(a, TERN_ERR_NOMEM, "train: out of memory");
    for (int j = last + 1; j < g->n_nodes; j++)
        for (int k = 0; k < g->nodes[j].n_inputs; k++)
            if (g->nodes[j].inputs[k] >= 0 && g->nodes[j].inputs[k] < g->n_values)
                kept[g->nodes[j].inputs[k]] = 1;
    for (int k = 0; k < g->n_outputs; k++)
        kept[g->outputs[k]] = 1;
    int nv0 = g->n_values;
    for (int i = first; i <= last && !a->failed; i++) {
        int interior = 0;
        for (int k = 0; k < g->nodes[i].n_outputs; k++) {
            int o = g->nodes[i].outputs[k];
            interior |= o >= 0 && o < nv0 && !kept[o];
        }
        if (!copyable(a, i) || !interior)
            continue;
        /* inputs: the segment's own copies where there are; a copy reading none of them reads its smallest
         * float input through the barrier, so that it waits for the backward */
        int nin = g->nodes[i].n_inputs, nout = g->nodes[i].n_outputs, nat = g->nodes[i].n_attrs;
        int in[64], has_copy = 0, small = -1;
        int64_t small_n = INT64_MAX;
        if (nin > 64 || nout > 64) {
            free(kept);
            return ad_fail_node(a, i, "recompute: more than 64 inputs or outputs");
        }
        for (int k = 0; k < nin; k++) {
            int v = g->nodes[i].inputs[k];
            in[k] = ad_map(a, v);
            has_copy |= in[k] != v;
            if (v >= 0 && in[k] == v && !g->values[v].constant && tern_elem_is_float(g->values[v].type)) {
                ad_shape sv = ad_shape_of(a, v);
                int64_t nv;
                if (!ad_shape_numel(&sv, &nv) && nv < small_n) {
                    small_n = nv;
                    small = k;
                }
            }
        }
        if (!has_copy && small >= 0) {
            int v = in[small];
            int w[3] = {cond, v, v};
            int b = ad_op(a, "Where", 3, w);
            if (b < 0 || ad_grow(a) < 0 || map_set(a, v, b) < 0) {
                free(kept);
                return -1;
            }
            a->g->values[b].type = a->g->values[v].type;
            a->g->values[b].rank = a->g->values[v].rank;
            memcpy(a->g->values[b].dims, a->g->values[v].dims, sizeof a->g->values[v].dims);
            for (int k = 0; k < nin; k++)
                if (g->nodes[i].inputs[k] == v)
                    in[k] = b;
        }
        char name[96];
        snprintf(name, sizeof name, "%src%d_%d", a->prefix, s, a->counter++);
        int nn = graph_add_node(g, g->nodes[i].op, g->nodes[i].domain, name, nin, nout, nat);
        if (nn < 0) {
            free(kept);
            return ad_fail(a, TERN_ERR_NOMEM, "train: out of memory");
        }
        tern_graph_node *cp = &g->nodes[nn];
        const tern_graph_node *src = &g->nodes[i];
        cp->op_id = src->op_id;
        for (int k = 0; k < nin; k++)
            cp->inputs[k] = in[k];
        for (int k = 0; k < nat; k++)
            copy_attr(a, &g->nodes[nn].attrs[k], &g->nodes[i].attrs[k]);
        g->nodes[nn].n_attrs = nat;
        for (int k = 0; k < nout; k++) {
            int o = g->nodes[i].outputs[k];
            if (o < 0) {
                g->nodes[nn].outputs[k] = -1;
                continue;
            }
            char vn[96];
            snprintf(vn, sizeof vn, "%src%d_v%d", a->prefix, s, a->counter++);
            int y = graph_add_value(g, vn);
            if (y < 0 || ad_grow(a) < 0) {
                ad_fail(a, TERN_ERR_NOMEM, "train: out of memory");
                break;
            }
            tern_graph_value *yv = &g->values[y], *ov = &g->values[o];
            yv->type = ov->type;
            yv->rank = ov->rank;
            memcpy(yv->dims, ov->dims, sizeof ov->dims);
            yv->producer = nn;
            g->nodes[nn].outputs[k] = y;
            if (map_set(a, o, y) < 0)
                break;
        }
    }
    free(kept);
    return a->failed ? -1 : 0;
}

int ad_recompute_enter(ad_ctx *a, int i, int n_fwd, int dy, int y)
{
    if (!a->seg_of || i < 0 || i >= n_fwd)
        return 0;
    int s = a->seg_of[i];
    if (s == a->cur_seg)
        return 0;
    clear_map(a);
    a->cur_seg = s;
    if (s == a->n_seg - 1 || dy < 0)
        return 0; /* the last segment's backward follows its forward: nothing to gain */
    int first = i, last = i;
    while (first > 0 && a->seg_of[first - 1] == s)
        first--;
    while (last + 1 < n_fwd && a->seg_of[last + 1] == s)
        last++;
    a->recomputed++;
    return emit_segment(a, s, first, last, dy, y);
}

int ad_map(const ad_ctx *a, int v)
{
    return v >= 0 && v < a->cap && a->rc_map[v] >= 0 ? a->rc_map[v] : v;
}

int ad_unmap(const ad_ctx *a, int v)
{
    return v >= 0 && v < a->cap && a->orig[v] >= 0 ? a->orig[v] : v;
}
