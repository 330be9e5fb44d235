/* Dropout in training mode (docs/training.md, "Dropout"). The compiler builds no random mask: each training-mode
 * Dropout becomes Mul(x, mask) with the mask a graph input fed per execution. The mask is defined once, over the
 * tensor as one core training on the step's whole batch sees it: element e of dropout k at step t is kept (as
 * 1 / (1 - ratio)) when the e-th draw of splitmix64 from seed ^ t C1 ^ (k + 1) C2 is at least ratio. splitmix64's
 * e-th draw is a function of e alone (the state advances by a constant), so a program computing part of the
 * tensor - a micro-batch of gradient accumulation, a data replica's chunk, a tensor rank's heads or hidden columns,
 * a sequence-parallel rank's rows - draws exactly its elements' values, and every layout trains with the one-core
 * run's masks. The parts: chunk q of the step (micro-batch m of replica d in the step's row order) is the q-th block
 * of the tensor's leading axis (the batch's rows), and a tensor rank r holds block r of the one axis its program's
 * shape splits tp ways. */
#include "train_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIX_GAMMA 0x9E3779B97F4A7C15ull

/* The e-th draw (0-based) of splitmix64 whose state starts at s: the state after e + 1 advances, mixed */
static uint64_t draw_at(uint64_t s, uint64_t e)
{
    uint64_t z = s + (e + 1) * MIX_GAMMA;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t stream_of(uint64_t seed, uint64_t step, size_t k)
{
    return seed ^ (step * 0xD1B54A32D192ED03ull) ^ ((uint64_t)(k + 1) * 0x8CB92BA72F3D8DD7ull);
}

void train_dropout_mask(uint64_t seed, uint64_t step, size_t k, double ratio, float *mask, size_t count)
{
    uint64_t s = stream_of(seed, step, k);
    float keep = (float)(1.0 / (1.0 - ratio));
    for (size_t e = 0; e < count; e++) {
        double u = (double)(draw_at(s, e) >> 11) * 0x1.0p-53;
        mask[e] = u >= ratio ? keep : 0.0f;
    }
}

void train_dropout_part(uint64_t seed, uint64_t step, const train_dropout *d, int64_t chunk, int64_t trank)
{
    uint64_t s = stream_of(seed, step, d->key);
    float keep = (float)(1.0 / (1.0 - d->ratio));
    int R = d->rank;
    int64_t gstride[TERN_GRAPH_MAX_RANK + 1], off[TERN_GRAPH_MAX_RANK], c[TERN_GRAPH_MAX_RANK];
    gstride[R] = 1;
    for (int a = R - 1; a >= 0; a--)
        gstride[a] = gstride[a + 1] * d->gdims[a];
    for (int a = 0; a < R; a++) {
        off[a] = a == d->split ? trank * d->ldims[a] : 0;
        c[a] = 0;
    }
    /* the chunk's block of the leading axis: whole blocks of the tensor of one chunk */
    uint64_t base = (uint64_t)chunk * (uint64_t)gstride[0];
    if (d->split == TRAIN_DROP_TOKENS) { /* token block trank of the chunk: contiguous */
        base += (uint64_t)trank * (uint64_t)d->count;
        for (size_t e = 0; e < d->count; e++) {
            double u = (double)(draw_at(s, base + e) >> 11) * 0x1.0p-53;
            d->mask[e] = u >= d->ratio ? keep : 0.0f;
        }
        return;
    }
    int64_t inner = R > 0 ? d->ldims[R - 1] : 1;
    size_t e = 0;
    if (R == 0) {
        double u = (double)(draw_at(s, base) >> 11) * 0x1.0p-53;
        d->mask[0] = u >= d->ratio ? keep : 0.0f;
        return;
    }
    while (e < d->count) {
        uint64_t g = base;
        for (int a = 0; a < R; a++)
            g += (uint64_t)(c[a] + off[a]) * (uint64_t)gstride[a + 1]; /* gstride[a + 1]: axis a's stride */
        for (int64_t i = 0; i < inner; i++, e++) {
            double u = (double)(draw_at(s, g + (uint64_t)i) >> 11) * 0x1.0p-53;
            d->mask[e] = u >= d->ratio ? keep : 0.0f;
        }
        for (int a = R - 2; a >= 0; a--) { /* the next run of the last axis */
            if (++c[a] < d->ldims[a])
                break;
            c[a] = 0;
        }
    }
}

/* The training-mode Dropout of ref (the whole model, NULL: none) that reads the value named `in`, and its place k
 * among ref's training-mode Dropouts; -1 when none */
static int is_training(const tern_graph *g, const tern_graph_node *n)
{
    if (n->op_id != TERN_GOP_DROPOUT || n->n_inputs < 3 || n->inputs[2] < 0)
        return 0;
    const tern_graph_value *mv = &g->values[n->inputs[2]];
    return mv->constant && tern_host_tensor_get(mv->constant, 0) != 0;
}

static int ref_dropout(const tern_graph *ref, const char *in, size_t *key)
{
    size_t k = 0;
    for (int i = 0; i < ref->n_nodes; i++) {
        const tern_graph_node *n = &ref->nodes[i];
        if (!is_training(ref, n))
            continue;
        if (n->inputs[0] >= 0 && !strcmp(ref->values[n->inputs[0]].name, in)) {
            *key = k;
            return i;
        }
        k++;
    }
    return -1;
}

static char *mask_name(const char *node)
{
    size_t n = strlen("train.mask.") + strlen(node) + 1;
    char *d = malloc(n);
    if (d)
        snprintf(d, n, "train.mask.%s", node);
    return d;
}

int train_dropout_rewrite(tern_trainer *t, ad_ctx *a)
{
    tern_graph *g = a->g;
    size_t own = 0; /* the place among this graph's training-mode Dropouts (no reference graph) */
    for (int i = 0; i < g->n_nodes && !a->failed; i++) {
        tern_graph_node *n = &g->nodes[i];
        if (!is_training(g, n))
            continue;
        double ratio = 0.5;
        if (n->inputs[1] >= 0) {
            const tern_graph_value *rv = &g->values[n->inputs[1]];
            if (!rv->constant)
                return ad_fail_node(a, i, "Dropout's ratio is not constant");
            ratio = tern_host_tensor_get(rv->constant, 0);
        }
        if (n->n_outputs > 1 && n->outputs[1] >= 0 && tern_graph_value_uses(g, n->outputs[1]) > 0)
            return ad_fail_node(a, i, "Dropout's mask output is read; training mode supports the data output only");
        ad_shape sx = ad_shape_of(a, n->inputs[0]);
        int64_t cnt;
        if (ad_shape_numel(&sx, &cnt) || !(ratio >= 0 && ratio < 1))
            return ad_fail_node(a, i, "Dropout in training mode needs a static shape and a ratio in [0, 1) (%g)", ratio);
        train_dropout dd;
        memset(&dd, 0, sizeof dd);
        dd.key = own++;
        dd.ratio = ratio;
        dd.count = (size_t)cnt;
        dd.rank = sx.rank;
        dd.split = -1;
        dd.ref_node = -1;
        memcpy(dd.ldims, sx.d, sizeof dd.ldims);
        memcpy(dd.gdims, sx.d, sizeof dd.gdims);
        if (t->drop_ref) { /* a layout's program: the whole model's Dropout, its key and tensor */
            const tern_graph *r = t->drop_ref;
            dd.ref_node = ref_dropout(r, g->values[n->inputs[0]].name, &dd.key);
            if (dd.ref_node < 0)
                return ad_fail_node(a, i, "internal: no Dropout of the whole model reads '%s'",
                                    g->values[n->inputs[0]].name);
            const tern_graph_value *rv = &r->values[r->nodes[dd.ref_node].inputs[0]];
            if (rv->rank != sx.rank)
                return ad_fail_node(a, i, "internal: the whole model's Dropout input has rank %d, the program's %d",
                                    rv->rank, sx.rank);
            memcpy(dd.gdims, rv->dims, sizeof dd.gdims);
            /* sequence parallelism inside a row: [1, S b / tp, ...] of [b, S, ...] is token block r of the chunk */
            int tok = sx.rank >= 2 && t->drop_tp > 1 && sx.d[0] == 1 && rv->dims[0] > 1 &&
                      rv->dims[0] * rv->dims[1] == sx.d[1] * t->drop_tp;
            for (int d = 2; d < sx.rank && tok; d++)
                tok = rv->dims[d] == sx.d[d];
            if (tok)
                dd.split = TRAIN_DROP_TOKENS;
            for (int d = 0; d < sx.rank && !tok; d++) {
                if (rv->dims[d] == sx.d[d])
                    continue;
                if (dd.split >= 0 || t->drop_tp < 2 || sx.d[d] <= 0 || rv->dims[d] != sx.d[d] * t->drop_tp) {
                    char gs[128] = "", ls[128] = "";
                    for (int q = 0; q < sx.rank; q++) {
                        size_t gl = strlen(gs), ll = strlen(ls);
                        snprintf(gs + gl, sizeof gs - gl, "%s%lld", q ? "x" : "", (long long)rv->dims[q]);
                        snprintf(ls + ll, sizeof ls - ll, "%s%lld", q ? "x" : "", (long long)sx.d[q]);
                    }
                    return ad_fail_node(a, i,
                                        "Dropout in training mode under the layout: a tensor rank's part (%s) is not "
                                        "the whole tensor (%s) split tp=%lld ways along one axis, so its mask's "
                                        "elements are not known",
                                        ls, gs, (long long)t->drop_tp);
                }
                dd.split = d;
            }
        }
        dd.input = mask_name(n->name);
        dd.mask = calloc(dd.count + 1, sizeof(float));
        train_dropout *nd = realloc(t->drop, sizeof *nd * (t->ndrop + 1));
        if (!dd.input || !dd.mask || !nd) {
            free(dd.input);
            free(dd.mask);
            if (nd)
                t->drop = nd;
            return ad_fail(a, TERN_ERR_NOMEM, "train: out of memory");
        }
        t->drop = nd;
        t->drop[t->ndrop++] = dd;
        if (graph_lookup(g, dd.input) >= 0)
            return ad_fail_node(a, i, "the model already has a value named '%s' (two Dropouts of one name?)", dd.input);
        int x = n->inputs[0];
        int m = graph_add_value(g, dd.input);
        int *ins = m >= 0 ? realloc(g->inputs, sizeof(int) * (size_t)(g->n_inputs + 1)) : NULL;
        if (!ins || ad_grow(a) < 0)
            return ad_fail(a, TERN_ERR_NOMEM, "train: out of memory");
        g->inputs = ins;
        g->inputs[g->n_inputs++] = m;
        tern_graph_value *mv = &g->values[m];
        mv->flags = TERN_VALUE_INPUT;
        mv->type = TERN_ELEM_FLOAT;
        mv->rank = sx.rank;
        for (int d = 0; d < sx.rank; d++)
            mv->dims[d] = sx.d[d];
        n = &g->nodes[i];
        if (graph_node_set_op(n, "", "Mul"))
            return ad_fail(a, TERN_ERR_NOMEM, "train: out of memory");
        n->inputs[0] = x;
        n->inputs[1] = m;
        n->n_inputs = 2;
        n->n_outputs = 1;
        while (n->n_attrs > 0)
            graph_attr_clear(&n->attrs[--n->n_attrs]);
    }
    return a->failed ? -1 : 0;
}

static int exe_reads(const tern_rt *rt, const char *name)
{
    const tern_exe *x = tern_rt_exe(rt);
    for (size_t i = 0; i < x->num_inputs; i++)
        if (!strcmp(tern_exe_io_name(&x->inputs[i]), name))
            return 1;
    return 0;
}

tern_status train_feed_masks(const tern_trainer *t, tern_rt *rt, uint64_t step, int64_t chunk, int64_t trank,
                             tern_error *err)
{
    if (t->o.timing_only) /* no values: a timing-only run reads no input */
        return TERN_OK;
    for (size_t k = 0; k < t->ndrop; k++) {
        const train_dropout *d = &t->drop[k];
        if (!exe_reads(rt, d->input)) /* pruned with the forward (a data-parallel update graph) */
            continue;
        train_dropout_part(t->o.seed, step, d, chunk, trank);
        tern_status st = tern_rt_set_input(rt, d->input, d->mask, d->count * sizeof(float), err);
        if (st)
            return st;
    }
    return TERN_OK;
}

void train_dropout_free(train_dropout *d, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        free(d[k].input);
        free(d[k].mask);
    }
    free(d);
}
