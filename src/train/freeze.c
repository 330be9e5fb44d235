/* Initializers that training keeps constant. ONNX cannot tell a PyTorch parameter from a buffer
 * (register_buffer): both are float initializers. So:
 *  - --freeze NAME (tern_train_opts.freeze: exact names or fnmatch(3) globs, "blocks.*.cos", "blocks.0.*" as a
 *    prefix) keeps every initializer it matches constant; a pattern matching no initializer is an error naming it;
 *  - by default (unless no_auto_freeze) an additive attention mask is constant: a float initializer whose every
 *    element is 0 or at most -1e4 (-inf included: the float32 minimum, -1e4 and -1e9 masks of HF exports) and
 *    whose every use is, through Slice / Unsqueeze / Squeeze / Reshape / Expand / float Cast / Identity (as
 *    operand 0), an operand of an Add whose result goes, through float Casts, into a Softmax: the mask position
 *    of the attention the fusion matches (graph_match_attention). PyTorch makes such masks buffers; a learned
 *    additive bias (random values) does not pass the value test.
 * Non-float and one-element initializers were never trained (step_graph.c). Tensor / pipeline layouts decide on
 * the whole model (tensor_parallel.c) and hand each segment program the list by exact name (freeze_exact). */
#include <fnmatch.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "train_internal.h"

struct train_frozen_list {
    size_t n;
    char **name;
    const char **why;
};


static const char *pattern_of(const tern_train_opts *o, const char *name)
{
    for (size_t k = 0; k < o->n_freeze; k++)
        if (o->freeze[k] && (!strcmp(o->freeze[k], name) || !fnmatch(o->freeze[k], name, 0)))
            return o->freeze[k];
    return NULL;
}

static int float_cast(const tern_graph *g, const tern_graph_node *n)
{
    (void)g;
    return n->op_id == TERN_GOP_CAST && tern_graph_attr_int(n, "to", 0) == 1; /* to float32 */
}

/* Does y (an Add's result) go, through float Casts / Identity, only into Softmax nodes (at least one)? */
static int into_softmax(const tern_graph *g, int y, int depth)
{
    int uses = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const tern_graph_node *n = &g->nodes[i];
        for (int k = 0; k < n->n_inputs; k++) {
            if (n->inputs[k] != y)
                continue;
            uses++;
            if (n->op_id == TERN_GOP_SOFTMAX && k == 0)
                continue;
            if (depth < 4 && k == 0 && n->n_outputs >= 1 && n->outputs[0] >= 0 &&
                (n->op_id == TERN_GOP_IDENTITY || float_cast(g, n)) && into_softmax(g, n->outputs[0], depth + 1))
                continue;
            return 0;
        }
    }
    if (g->values[y].flags & TERN_VALUE_OUTPUT)
        return 0;
    return uses > 0;
}

/* Is every use of v a mask position (see the top)? */
static int mask_uses(const tern_graph *g, int v, int depth)
{
    int uses = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const tern_graph_node *n = &g->nodes[i];
        for (int k = 0; k < n->n_inputs; k++) {
            if (n->inputs[k] != v)
                continue;
            uses++;
            int y = n->n_outputs >= 1 ? n->outputs[0] : -1;
            if (y < 0)
                return 0;
            if (n->op_id == TERN_GOP_ADD) {
                if (!into_softmax(g, y, 0))
                    return 0;
                continue;
            }
            int layout = n->op_id == TERN_GOP_SLICE || n->op_id == TERN_GOP_UNSQUEEZE || n->op_id == TERN_GOP_SQUEEZE ||
                         n->op_id == TERN_GOP_RESHAPE || n->op_id == TERN_GOP_EXPAND ||
                         n->op_id == TERN_GOP_IDENTITY || float_cast(g, n);
            if (!layout || k != 0 || depth >= 8 || !mask_uses(g, y, depth + 1))
                return 0;
        }
    }
    if (g->values[v].flags & TERN_VALUE_OUTPUT)
        return 0;
    return uses > 0;
}

static int mask_values(const tern_host_tensor *c)
{
    if (!c->f)
        return 0;
    for (size_t e = 0; e < c->count; e++)
        if (!(c->f[e] == 0.0f || c->f[e] <= -1e4f)) /* NaN fails too */
            return 0;
    return 1;
}

const char *train_frozen_why(const tern_graph *g, int v, const tern_train_opts *o)
{
    const tern_graph_value *gv = &g->values[v];
    if (!(gv->flags & TERN_VALUE_INITIALIZER) || !gv->constant)
        return NULL;
    if (gv->name && pattern_of(o, gv->name))
        return "--freeze";
    if (!o->no_auto_freeze && gv->constant->type == TERN_ELEM_FLOAT && gv->constant->count >= 2 &&
        mask_values(gv->constant) && mask_uses(g, v, 0))
        return "attention mask";
    return NULL;
}

void train_frozen_free(tern_trainer *t)
{
    struct train_frozen_list *l = t->frozen;
    if (!l)
        return;
    for (size_t k = 0; k < l->n; k++)
        free(l->name[k]);
    free(l->name);
    free(l->why);
    free(l);
    t->frozen = NULL;
}

tern_status train_freeze_check(tern_trainer *t, int record, tern_error *err)
{
    const tern_graph *g = t->g;
    const tern_train_opts *o = &t->o;
    for (size_t k = 0; k < o->n_freeze && !t->freeze_exact; k++) {
        const char *p = o->freeze[k];
        int hit = 0;
        for (int v = 0; p && v < g->n_values && !hit; v++)
            hit = (g->values[v].flags & TERN_VALUE_INITIALIZER) && g->values[v].name &&
                  (!strcmp(p, g->values[v].name) || !fnmatch(p, g->values[v].name, 0));
        if (!hit)
            return tern_error_set(err, TERN_ERR_INVALID, "train: --freeze '%s' names no initializer of %s",
                                  p ? p : "(null)", t->path ? t->path : "the model");
    }
    if (!record)
        return TERN_OK;
    train_frozen_free(t);
    struct train_frozen_list *l = calloc(1, sizeof *l);
    if (!l)
        return tern_error_set(err, TERN_ERR_NOMEM, "train: out of memory");
    t->frozen = l;
    for (int v = 0; v < g->n_values; v++) {
        const tern_graph_value *gv = &g->values[v];
        /* listed: the float tensors that would otherwise be trained */
        if (!gv->constant || gv->constant->type != TERN_ELEM_FLOAT || gv->constant->count < 2)
            continue;
        const char *why = train_frozen_why(g, v, o);
        if (!why)
            continue;
        char **nn = realloc(l->name, sizeof *nn * (l->n + 1));
        if (nn)
            l->name = nn;
        const char **nw = realloc(l->why, sizeof *nw * (l->n + 1));
        if (nw)
            l->why = nw;
        char *s = nn && nw ? malloc(strlen(gv->name ? gv->name : "") + 1) : NULL;
        if (!s)
            return tern_error_set(err, TERN_ERR_NOMEM, "train: out of memory");
        strcpy(s, gv->name ? gv->name : "");
        l->name[l->n] = s;
        l->why[l->n++] = why;
    }
    return TERN_OK;
}

size_t tern_train_frozen_count(const tern_trainer *t) { return t && t->frozen ? t->frozen->n : 0; }

const char *tern_train_frozen_name(const tern_trainer *t, size_t i, const char **why)
{
    if (!t || !t->frozen || i >= t->frozen->n)
        return NULL;
    if (why)
        *why = t->frozen->why[i];
    return t->frozen->name[i];
}
