/* If as the nodes of its branch: with a constant condition (the common case once exporters' shape checks fold),
 * the chosen branch's nodes are copied into the graph in the If's place, reading the enclosing graph's values by
 * name and writing the If's outputs; the other branch disappears. With a run-time condition both branches are
 * copied and each output is Where(cond, then, else), which needs both branches to give it the same static shape
 * (inferred from the enclosing graph's shapes; ONNX lets them differ, and such an If is refused). Branches that hold an If of their own are refused. */
#include "graph_internal.h"
#include "expand.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int copy_attr(const tern_graph_attr *s, tern_graph_attr *d)
{
    memset(d, 0, sizeof *d);
    d->name = graph_strdup(s->name);
    d->type = s->type;
    d->i = s->i;
    d->f = s->f;
    d->n = s->n;
    if (!d->name)
        return -1;
    if (s->s && !(d->s = graph_strdup(s->s)))
        return -1;
    if (s->ints) {
        if (!(d->ints = malloc(sizeof(int64_t) * (s->n ? s->n : 1))))
            return -1;
        memcpy(d->ints, s->ints, sizeof(int64_t) * s->n);
    }
    if (s->floats) {
        if (!(d->floats = malloc(sizeof(float) * (s->n ? s->n : 1))))
            return -1;
        memcpy(d->floats, s->floats, sizeof(float) * s->n);
    }
    if (s->strings) {
        if (!(d->strings = calloc(s->n ? s->n : 1, sizeof(char *))))
            return -1;
        for (size_t k = 0; k < s->n; k++)
            if (!(d->strings[k] = graph_strdup(s->strings[k])))
                return -1;
    }
    if (s->t) {
        tern_error e;
        if (tern_host_tensor_clone(s->t, &d->t, &e))
            return -1;
    }
    return 0;
}

/* copies branch br into the graph; out[k] receives the value holding the branch's output k */
static void inline_branch(xb *b, const tern_graph *br, const char *tag, int *out)
{
    tern_graph *g = b->g;
    int *map = malloc(sizeof(int) * (size_t)(br->n_values ? br->n_values : 1));
    if (!map) {
        xb_fail(b, TERN_ERR_NOMEM, "expansion: out of memory");
        return;
    }
    for (int v = 0; v < br->n_values && !b->st; v++) {
        const tern_graph_value *bv = &br->values[v];
        map[v] = -1;
        if (bv->flags & TERN_VALUE_INITIALIZER) {
            tern_host_tensor *t;
            const tern_host_tensor *c = bv->constant;
            map[v] = c ? xb_const_f(b, TERN_ELEM_FLOAT, 0, NULL, NULL) : -1; /* a slot, refilled below */
            if (map[v] < 0)
                break;
            tern_host_tensor_free(g->values[map[v]].constant);
            g->values[map[v]].constant = NULL;
            if (tern_host_tensor_clone(c, &t, b->err)) {
                b->st = TERN_ERR_NOMEM;
                break;
            }
            tern_graph_value *nv = &g->values[map[v]];
            nv->constant = t;
            nv->type = t->type;
            nv->rank = t->rank;
            for (int d = 0; d < TERN_GRAPH_MAX_RANK; d++)
                nv->dims[d] = d < t->rank ? t->dims[d] : -1;
        } else if (bv->producer < 0) { /* read from the enclosing graph */
            map[v] = graph_lookup(g, bv->name);
            if (map[v] < 0)
                xb_fail(b, TERN_ERR_INVALID, "%s branch reads \"%s\", which the enclosing graph does not define", tag,
                        bv->name);
            else if (g->values[map[v]].producer > b->node) /* the node order knows nothing of a branch's reads */
                xb_fail(b, TERN_ERR_UNSUPPORTED, "%s branch reads \"%s\", computed after the If", tag, bv->name);
        }
    }
    for (int i = 0; i < br->n_nodes && !b->st; i++) {
        const tern_graph_node *s = &br->nodes[i];
        for (int k = 0; k < s->n_attrs; k++)
            if (s->attrs[k].graph) {
                xb_fail(b, TERN_ERR_UNSUPPORTED, "%s branch holds a nested If (\"%s\")", tag, s->name);
                break;
            }
        if (b->st)
            break;
        char name[400];
        snprintf(name, sizeof name, "%.200s/%s/%.150s", g->nodes[b->node].name, tag, s->name);
        int idx = graph_add_node(g, s->op, s->domain, name, s->n_inputs, s->n_outputs, s->n_attrs);
        if (idx < 0) {
            xb_fail(b, TERN_ERR_NOMEM, "expansion: out of memory");
            break;
        }
        tern_graph_node *d = &g->nodes[idx];
        for (int k = 0; k < s->n_attrs; k++) {
            d->n_attrs++;
            if (copy_attr(&s->attrs[k], &d->attrs[k])) {
                xb_fail(b, TERN_ERR_NOMEM, "expansion: out of memory");
                break;
            }
        }
        for (int k = 0; k < s->n_inputs; k++)
            d->inputs[k] = s->inputs[k] >= 0 ? map[s->inputs[k]] : -1;
        for (int k = 0; k < s->n_outputs && !b->st; k++) {
            if (s->outputs[k] < 0)
                continue;
            char vn[400];
            snprintf(vn, sizeof vn, "%.200s/%s/%.150s", g->nodes[b->node].name, tag, br->values[s->outputs[k]].name);
            int id = graph_add_value(g, vn);
            if (id < 0) {
                xb_fail(b, TERN_ERR_NOMEM, "expansion: out of memory");
                break;
            }
            g->nodes[idx].outputs[k] = id;
            map[s->outputs[k]] = id;
        }
        b->last = idx;
    }
    for (int k = 0; k < br->n_outputs && !b->st; k++)
        out[k] = map[br->outputs[k]];
    free(map);
}

static int same_static_shape(const tern_graph_value *a, const tern_graph_value *c)
{
    if (!tern_graph_value_is_static(a) || !tern_graph_value_is_static(c) || a->rank != c->rank || a->type != c->type)
        return 0;
    for (int d = 0; d < a->rank; d++)
        if (a->dims[d] != c->dims[d])
            return 0;
    return 1;
}

/* Shapes for a branch's values from the enclosing graph's (already inferred: they precede the If), so the
 * branches' outputs can be compared before a run-time selection. */
static void infer_branch(xb *b, tern_graph *br)
{
    for (int v = 0; v < br->n_values && !b->st; v++) {
        tern_graph_value *bv = &br->values[v];
        if (!(bv->flags & TERN_VALUE_INPUT) || bv->producer >= 0)
            continue;
        int pv = graph_lookup(b->g, bv->name);
        if (pv < 0) {
            xb_fail(b, TERN_ERR_INVALID, "a branch reads \"%s\", which the enclosing graph does not define",
                    bv->name);
            return;
        }
        const tern_graph_value *p = &b->g->values[pv];
        bv->type = p->type;
        bv->rank = p->rank;
        memcpy(bv->dims, p->dims, sizeof bv->dims);
        tern_host_tensor_free(bv->constant);
        bv->constant = NULL;
        if (p->constant && tern_host_tensor_clone(p->constant, &bv->constant, b->err))
            b->st = TERN_ERR_NOMEM;
    }
    if (!b->st) {
        tern_status st = tern_graph_infer(br, b->err);
        if (st)
            xb_fail(b, st, "a branch does not infer: %s", b->err ? b->err->msg : "");
    }
}

tern_status graph_expand_if(xb *b, int *done)
{
    const tern_graph_node *n = &b->g->nodes[b->node];
    const tern_graph_attr *ta = tern_graph_node_attr(n, "then_branch"), *ea = tern_graph_node_attr(n, "else_branch");
    tern_graph *tb = ta ? ta->graph : NULL, *eb = ea ? ea->graph : NULL;
    int cond = xb_in(b, 0);
    const tern_graph_value *cv = xb_val(b, cond);
    if (!tb || !eb || !cv)
        return TERN_OK; /* a branch that did not import: refused as an unsupported op by inference */
    int nout = n->n_outputs;
    if (tb->n_outputs != nout || eb->n_outputs != nout)
        return xb_fail(b, TERN_ERR_INVALID, "branches give %d and %d outputs for the If's %d", tb->n_outputs,
                       eb->n_outputs, nout),
               b->st;
    if (cv->type != TERN_ELEM_BOOL || graph_numel(cv->rank, cv->dims) != 1)
        return xb_fail(b, TERN_ERR_INVALID, "cond must be one bool (is %s of %lld elements)", tern_elem_name(cv->type),
                       (long long)graph_numel(cv->rank, cv->dims)),
               b->st;
    int *to = malloc(sizeof(int) * (size_t)(2 * nout + 1));
    if (!to)
        return xb_fail(b, TERN_ERR_NOMEM, "expansion: out of memory"), b->st;
    int *eo = to + nout;
    if (cv->constant) {
        const tern_graph *br = cv->constant->i[0] ? tb : eb;
        inline_branch(b, br, cv->constant->i[0] ? "then" : "else", to);
        for (int k = 0; k < nout && !b->st; k++) {
            if (n->outputs[k] < 0)
                continue;
            int ii[1] = {to[k]};
            xb_op_to(b, "Identity", 1, ii, n->outputs[k]);
        }
    } else {
        infer_branch(b, tb);
        infer_branch(b, eb);
        for (int k = 0; k < nout && !b->st; k++)
            if (!same_static_shape(&tb->values[tb->outputs[k]], &eb->values[eb->outputs[k]])) {
                xb_fail(b, TERN_ERR_UNSUPPORTED, "run-time condition: output %d's branches do not have one static "
                        "shape and type (a selection needs both)", k);
                break;
            }
        if (!b->st)
            inline_branch(b, tb, "then", to);
        if (!b->st)
            inline_branch(b, eb, "else", eo);
        for (int k = 0; k < nout && !b->st; k++) {
            if (n->outputs[k] < 0)
                continue;
            int wi[3] = {cond, to[k], eo[k]};
            xb_op_to(b, "Where", 3, wi, n->outputs[k]);
        }
    }
    free(to);
    if (b->st)
        return b->st;
    *done = 1;
    return TERN_OK;
}
