/* The training step as one graph. From the imported model: the weights (float initializers of two or more
 * elements) become graph inputs; the loss is appended (cross-entropy as -sum(target * LogSoftmax(logits)) *
 * inv_count, with the smoothed one-hot target rows and 1/count of counted rows fed per step; mean squared
 * error; or a scalar output of the model); the reverse pass appends the gradients; then the global gradient norm,
 * optional clipping by it, and the optimizer update of every weight and its state, written with the same
 * operation order as PyTorch's single-tensor SGD/Adam/AdamW so fp32 runs agree to rounding, and LAMB; SGD, Adam and
 * AdamW as one fused tern.SGDUpdate / tern.AdamUpdate node per weight, LAMB as two around its trust ratio
 * (bit-identical to the node-by-node form, which --no-fused-optimizer and bf16-sr keep). Hyper-parameters
 * that never change are constants; those that change per step (the learning rate and Adam's bias corrections)
 * are scalar inputs. Outputs: the loss read-out, loss, gradient norm, updated weights and state. */
#include "train_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *dup_str(const char *s)
{
    size_t n = strlen(s);
    char *d = malloc(n + 1);
    if (d)
        memcpy(d, s, n + 1);
    return d;
}

static char *fmt_name(const char *prefix, const char *name)
{
    size_t n = strlen(prefix) + strlen(name) + 1;
    char *d = malloc(n);
    if (d)
        snprintf(d, n, "%s%s", prefix, name);
    return d;
}

static int add_input(ad_ctx *a, const char *name, int rank, const int64_t *dims)
{
    tern_graph *g = a->g;
    if (graph_lookup(g, name) >= 0)
        return ad_fail(a, TERN_ERR_INVALID, "train: the model already has a value named '%s'", name);
    int id = graph_add_value(g, name);
    int *in = id >= 0 ? realloc(g->inputs, sizeof(int) * (size_t)(g->n_inputs + 1)) : NULL;
    if (!in)
        return ad_fail(a, TERN_ERR_NOMEM, "train: out of memory");
    g->inputs = in;
    g->inputs[g->n_inputs++] = id;
    tern_graph_value *v = &g->values[id];
    v->flags = TERN_VALUE_INPUT;
    v->type = TERN_ELEM_FLOAT;
    v->rank = rank;
    for (int d = 0; d < rank; d++)
        v->dims[d] = dims[d];
    if (ad_grow(a) < 0)
        return -1;
    return id;
}

/* Cast(v) to ONNX element type `elem` (1 FLOAT, 16 BFLOAT16). Pure BF16 reads each BF16 weight and state
 * through a cast to fp32 and writes each new value through a cast back, which the compiler lowers to a converting
 * copy on the device: the write rounds with the core's mode, so under stochastic rounding it is the update's SR. */
static int cast_to(ad_ctx *a, int v, int elem)
{
    int y = ad_op1(a, "Cast", v);
    ad_attr_int(a, ad_last_node(a), "to", elem);
    return y;
}

/* An optimizer-state input: fp32, or BF16 read through a cast under pure BF16. */
static int add_state_input(ad_ctx *a, const char *name, int rank, const int64_t *dims, int bf16)
{
    int id = add_input(a, name, rank, dims);
    if (id < 0 || !bf16)
        return id;
    a->g->values[id].type = TERN_ELEM_BFLOAT16;
    return cast_to(a, id, TERN_ELEM_FLOAT);
}

static int add_scalar_input(ad_ctx *a, const char *name)
{
    int64_t one = 1;
    return add_input(a, name, 1, &one);
}

/* The step graph is built in dependency order - the forward sorted once, then the loss, the reverse pass (a
 * segment's recomputed forward just before its gradients) and the update appended after what they read - and
 * that order is kept: it is the one that frees a forward activation as soon as its gradient rule has run.
 * graph_sort (Kahn's, breadth first) would start every node as early as its inputs allow: the optimizer's state
 * products during the forward, a rule's forward-only parts (Tanh's 1 - y^2) long before their gradient, and a
 * recomputed segment in the forward, each value then alive for most of the step. The order changes no value.
 * Used under recomputation only: breadth first gives the engines more independent work side by side, and so the
 * shorter step (the digits MLP at batch 1024: 1.16 ms against 1.28 ms, for 1.94 MiB of HBM against 1.63). A
 * graph not in dependency order (none is built) is sorted. */
static tern_status keep_order(tern_graph *g, tern_error *err)
{
    for (int v = 0; v < g->n_values; v++)
        g->values[v].producer = -1;
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i].n_outputs; k++) {
            int v = g->nodes[i].outputs[k];
            if (v < 0)
                continue;
            if (g->values[v].producer >= 0 || (g->values[v].flags & (TERN_VALUE_INPUT | TERN_VALUE_INITIALIZER)))
                return graph_sort(g, err); /* it names the value assigned twice */
            g->values[v].producer = i;
        }
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i].n_inputs; k++) {
            int v = g->nodes[i].inputs[k];
            if (v >= 0 && g->values[v].producer >= i)
                return graph_sort(g, err);
        }
    return TERN_OK;
}

/* Renames value v (an anonymous node output) so it can be a graph output the runtime finds by name. */
static int name_value(ad_ctx *a, int v, const char *name)
{
    tern_graph *g = a->g;
    if (v < 0)
        return -1;
    if (graph_lookup(g, name) >= 0)
        return ad_fail(a, TERN_ERR_INVALID, "train: the model already has a value named '%s'", name);
    /* an Identity keeps the value's own name (other nodes may read it) and gives the output a new one */
    int y = ad_op1(a, "Identity", v);
    if (y < 0)
        return -1;
    char *nm = dup_str(name);
    if (!nm)
        return ad_fail(a, TERN_ERR_NOMEM, "train: out of memory");
    free(g->values[y].name);
    g->values[y].name = nm;
    /* the name table is rebuilt by graph_compact at the end; graph_lookup is not used for it before then */
    return y;
}

/* Cross-entropy and MSE read a model output; the loss-output mode uses one. */
static int find_output(ad_ctx *a, const char *name, const char *what)
{
    tern_graph *g = a->g;
    if (!name)
        return g->n_outputs ? g->outputs[0] : ad_fail(a, TERN_ERR_INVALID, "train: the model has no outputs");
    for (int k = 0; k < g->n_outputs; k++)
        if (!strcmp(g->values[g->outputs[k]].name, name))
            return g->outputs[k];
    return ad_fail(a, TERN_ERR_NOT_FOUND, "train: %s '%s' is not an output of the model", what, name);
}

static int build_loss(tern_trainer *t, ad_ctx *a)
{
    const tern_train_opts *o = &t->o;
    if (o->loss == TERN_LOSS_OUTPUT) {
        if (!o->output)
            return ad_fail(a, TERN_ERR_INVALID, "train: --loss-output needs the name of a scalar model output");
        return find_output(a, o->output, "loss output");
    }
    int y = find_output(a, o->output, "loss input");
    if (y < 0)
        return -1;
    ad_shape sy = ad_shape_of(a, y);
    int64_t n;
    if (ad_shape_numel(&sy, &n) || sy.rank < 1)
        return ad_fail(a, TERN_ERR_INVALID, "train: output '%s' has no static shape", a->g->values[y].name);
    if (!tern_elem_is_float(a->g->values[y].type))
        return ad_fail(a, TERN_ERR_INVALID, "train: output '%s' is %s, the loss needs a float output",
                       a->g->values[y].name, tern_elem_name(a->g->values[y].type));
    t->read_count = (size_t)n;
    int loss;
    if (o->loss == TERN_LOSS_CROSS_ENTROPY) {
        int64_t c = sy.d[sy.rank - 1];
        if (c < 1)
            return ad_fail(a, TERN_ERR_INVALID, "train: output '%s' has no classes", a->g->values[y].name);
        t->classes = c;
        ad_shape flat = {.rank = 2, .d = {n / c, c}};
        int logits = sy.rank == 2 ? y : ad_reshape(a, y, &flat);
        int logp = ad_op1(a, "LogSoftmax", logits);
        ad_attr_int(a, ad_last_node(a), "axis", 1);
        int tgt = add_input(a, TRAIN_TARGET, 2, flat.d);
        int inv = add_scalar_input(a, TRAIN_INV_COUNT);
        t->target_count = (size_t)n;
        int s = ad_reduce(a, "ReduceSum", ad_op2(a, "Mul", tgt, logp), 0, NULL, 0);
        loss = ad_op2(a, "Mul", ad_op1(a, "Neg", s), inv);
    } else {
        int tgt = add_input(a, TRAIN_TARGET, sy.rank, sy.d);
        t->target_count = (size_t)n;
        int d = ad_op2(a, "Sub", y, tgt);
        loss = ad_reduce(a, "ReduceMean", ad_op2(a, "Mul", d, d), 0, NULL, 0);
    }
    ad_shape one = {.rank = 1, .d = {1}};
    return ad_reshape(a, loss, &one);
}

static int scalar_c(ad_ctx *a, double v)
{
    return ad_const_f(a, (float)v);
}

/* Whether the optimizer update is fused: one node per weight (tern.SGDUpdate / tern.AdamUpdate) for SGD, Adam and
 * AdamW, and for LAMB two (tern.AdamUpdate with lamb = 1: the state and direction r; then the trust ratio from the
 * per-tensor norms, node by node as the unfused graph computes it; then tern.SGDUpdate: p - r (trust lr)); the
 * default in fp32, bf16 (fp32 master weights and state) and pure BF16 with round-to-nearest-even (bf16-rne).
 * Pure BF16 with stochastic rounding (bf16-sr) stays node by node: its rounding draws from a stream that depends
 * on each engine's instruction count (sim: sr_stream_of), so the same rounding of the fused kernel's outputs would
 * draw other bits than the unfused graph's (an unbiased rounding still, but not the unfused one bit for bit).
 * --no-fused-optimizer keeps the node-by-node update everywhere. */
static int fused_update(const tern_train_opts *o)
{
    return !o->no_fused_optimizer && (!o->bf16_weights || o->rounding != TERN_ROUND_STOCHASTIC) &&
           (o->optimizer == TERN_OPT_SGD || o->optimizer == TERN_OPT_ADAM || o->optimizer == TERN_OPT_ADAMW ||
            o->optimizer == TERN_OPT_LAMB);
}

/* A fused update node `op` (SGDUpdate or AdamUpdate) with inputs in[0 .. nin) (-1: absent) and 1 + nst outputs
 * (out[0], the weight's, returned; st_out the state's); float attributes fn/fv, then int attributes in_/iv. */
static int opt_node(ad_ctx *a, const char *op, const int *in, int nin, int nst, const char *const *fn,
                    const float *fv, int nf, const char *const *in_, const int *iv, int ni, int *st_out)
{
    tern_graph *gr = a->g;
    int out[3];
    for (int j = 0; j <= nst; j++) {
        char nm[64];
        snprintf(nm, sizeof nm, "%sopt_v%d", a->prefix, a->counter++);
        out[j] = graph_add_value(gr, nm);
        if (out[j] < 0 || ad_grow(a) < 0)
            return ad_fail(a, TERN_ERR_NOMEM, "train: out of memory");
    }
    char name[96];
    snprintf(name, sizeof name, "%s%s_%d", a->prefix, op, a->counter++);
    int n = graph_add_node(gr, op, "tern", name, nin, 1 + nst, 8);
    if (n < 0)
        return ad_fail(a, TERN_ERR_NOMEM, "train: out of memory");
    for (int k = 0; k < nin; k++)
        gr->nodes[n].inputs[k] = in[k];
    for (int j = 0; j <= nst; j++) {
        gr->nodes[n].outputs[j] = out[j];
        gr->values[out[j]].producer = n;
    }
    /* set here, not by ad_attr_*: those keep to the four attributes ad_op reserves, this node has room for 8 */
    tern_graph_node *nd = &gr->nodes[n];
    for (int k = 0; k < nf + ni; k++) {
        tern_graph_attr *at = &nd->attrs[nd->n_attrs];
        memset(at, 0, sizeof *at);
        at->name = dup_str(k < nf ? fn[k] : in_[k - nf]);
        if (!at->name)
            return ad_fail(a, TERN_ERR_NOMEM, "train: out of memory");
        if (k < nf) {
            at->type = TERN_ATTR_FLOAT;
            at->f = fv[k];
        } else {
            at->type = TERN_ATTR_INT;
            at->i = iv[k - nf];
        }
        nd->n_attrs++;
    }
    for (int j = 0; j < nst; j++)
        st_out[j] = out[1 + j];
    return a->failed ? -1 : out[0];
}

/* The fused update node: its inputs in ops_optim.c's order ("" for an absent optional one), its attributes the
 * fp32 values of the constants build_update's nodes would hold, so the kernel's immediates are the same. LAMB:
 * the AdamUpdate (lamb = 1) of r, the trust ratio as the unfused graph's nodes, and SGDUpdate(p, r, trust lr). */
static int fused_node(ad_ctx *a, const tern_train_opts *o, int p, int g, const int *st, int nst, const int *sc,
                      int coef, int *st_out)
{
    int adam = o->optimizer != TERN_OPT_SGD, lamb = o->optimizer == TERN_OPT_LAMB;
    int in[8], nin;
    if (adam) {
        int dec = o->optimizer == TERN_OPT_ADAMW && o->weight_decay != 0 ? sc[2] : -1;
        int v[8] = {p, g, st[0], st[1], lamb ? sc[3] : sc[0], sc[1], dec, coef};
        memcpy(in, v, sizeof v);
        nin = coef >= 0 ? 8 : dec >= 0 ? 7 : 6;
    } else {
        int v[5] = {p, g, sc[0], nst ? st[0] : -1, coef};
        memcpy(in, v, sizeof v);
        nin = coef >= 0 ? 5 : nst ? 4 : 3;
    }
    const char *fn[6] = {"weight_decay", "beta1", "beta2", "one_minus_beta1", "one_minus_beta2", "eps"};
    float fv[6] = {(float)o->weight_decay, (float)o->beta1, (float)o->beta2, (float)(1 - o->beta1),
                   (float)(1 - o->beta2), (float)o->eps};
    if (!adam) {
        const char *sn[2] = {"weight_decay", "momentum"}, *nn = "nesterov";
        float sv[2] = {(float)o->weight_decay, (float)o->momentum};
        int nv = o->nesterov != 0;
        return opt_node(a, "SGDUpdate", in, nin, nst, sn, sv, 2, &nn, &nv, 1, st_out);
    }
    const char *an[2] = {"adamw", "lamb"};
    int av[2] = {o->optimizer == TERN_OPT_ADAMW, lamb};
    int r = opt_node(a, "AdamUpdate", in, nin, 2, fn, fv, 6, an, av, lamb ? 2 : 1, st_out);
    if (!lamb || r < 0)
        return r;
    /* trust = ||p|| ||r|| > 0 ? ||p|| / ||r|| : 1, as build_update's LAMB; then p - r (trust lr) */
    int wn = ad_op1(a, "Sqrt", ad_reduce(a, "ReduceSum", ad_op2(a, "Mul", p, p), 0, NULL, 0));
    int rn = ad_op1(a, "Sqrt", ad_reduce(a, "ReduceSum", ad_op2(a, "Mul", r, r), 0, NULL, 0));
    int w3[3] = {ad_op2(a, "Greater", ad_op2(a, "Mul", wn, rn), scalar_c(a, 0.0)), ad_op2(a, "Div", wn, rn),
                 scalar_c(a, 1.0)};
    int trust = ad_op(a, "Where", 3, w3);
    int u[3] = {p, r, ad_op2(a, "Mul", trust, sc[0])};
    const char *sn[2] = {"weight_decay", "momentum"}, *nn = "nesterov";
    float sv[2] = {0.0f, 0.0f};
    int nv = 0;
    return a->failed ? -1 : opt_node(a, "SGDUpdate", u, 3, 0, sn, sv, 2, &nn, &nv, 1, NULL);
}

/* The update of one weight p with gradient g (times the clipping coefficient coef, when coef >= 0); returns its
 * new value (state outputs via st_out). */
static int build_update(tern_trainer *t, ad_ctx *a, train_weight *w, int p, int g, const int *sc, int coef,
                        int *st_out)
{
    const tern_train_opts *o = &t->o;
    int nst = w->n_state;
    int st[2] = {-1, -1};
    for (int k = 0; k < nst; k++)
        st[k] = add_state_input(a, w->state_in[k], w->rank, w->dims, o->bf16_weights);
    if (fused_update(o))
        return fused_node(a, o, p, g, st, nst, sc, coef, st_out);
    if (coef >= 0)
        g = ad_op2(a, "Mul", g, coef);
    if (o->optimizer == TERN_OPT_SGD) {
        /* torch.optim.SGD: d = g + wd p; buf = mu buf + d; d = nesterov ? d + mu buf : buf; p -= lr d */
        int d = g;
        if (o->weight_decay != 0)
            d = ad_op2(a, "Add", d, ad_op2(a, "Mul", p, scalar_c(a, o->weight_decay)));
        if (o->momentum != 0) {
            int buf = ad_op2(a, "Add", ad_op2(a, "Mul", st[0], scalar_c(a, o->momentum)), d);
            st_out[0] = buf;
            d = o->nesterov ? ad_op2(a, "Add", d, ad_op2(a, "Mul", buf, scalar_c(a, o->momentum))) : buf;
        }
        return ad_op2(a, "Sub", p, ad_op2(a, "Mul", d, sc[0]));
    }
    if (o->optimizer == TERN_OPT_LAMB) {
        /* LAMB (You et al. 2019, as NVIDIA's BERT runs use it): Adam's bias-corrected direction plus decoupled
         * decay, r = m/bc1 / (sqrt(v)/sqrt(bc2) + eps) + wd p, scaled per tensor by the trust ratio
         * ||p|| / ||r|| (1 when either norm is 0): p -= lr trust r */
        int m = ad_op2(a, "Add", ad_op2(a, "Mul", st[0], scalar_c(a, o->beta1)),
                       ad_op2(a, "Mul", g, scalar_c(a, 1 - o->beta1)));
        int v = ad_op2(a, "Add", ad_op2(a, "Mul", st[1], scalar_c(a, o->beta2)),
                       ad_op2(a, "Mul", ad_op2(a, "Mul", g, g), scalar_c(a, 1 - o->beta2)));
        st_out[0] = m;
        st_out[1] = v;
        int denom = ad_op2(a, "Add", ad_op2(a, "Div", ad_op1(a, "Sqrt", v), sc[1]), scalar_c(a, o->eps));
        int r = ad_op2(a, "Div", ad_op2(a, "Div", m, sc[3]), denom);
        if (o->weight_decay != 0)
            r = ad_op2(a, "Add", r, ad_op2(a, "Mul", p, scalar_c(a, o->weight_decay)));
        int wn = ad_op1(a, "Sqrt", ad_reduce(a, "ReduceSum", ad_op2(a, "Mul", p, p), 0, NULL, 0));
        int rn = ad_op1(a, "Sqrt", ad_reduce(a, "ReduceSum", ad_op2(a, "Mul", r, r), 0, NULL, 0));
        int in[3] = {ad_op2(a, "Greater", ad_op2(a, "Mul", wn, rn), scalar_c(a, 0.0)), ad_op2(a, "Div", wn, rn),
                     scalar_c(a, 1.0)};
        int trust = ad_op(a, "Where", 3, in);
        return ad_op2(a, "Sub", p, ad_op2(a, "Mul", r, ad_op2(a, "Mul", trust, sc[0])));
    }
    /* torch.optim.Adam / AdamW (single-tensor): [p *= 1 - lr wd]; [g += wd p]; m = b1 m + (1 - b1) g;
     * v = b2 v + (1 - b2) g g; p -= (lr / bc1) m / (sqrt(v) / sqrt(bc2) + eps) */
    int pp = p;
    if (o->optimizer == TERN_OPT_ADAMW && o->weight_decay != 0)
        pp = ad_op2(a, "Mul", p, sc[2]);
    if (o->optimizer == TERN_OPT_ADAM && o->weight_decay != 0)
        g = ad_op2(a, "Add", g, ad_op2(a, "Mul", p, scalar_c(a, o->weight_decay)));
    int m = ad_op2(a, "Add", ad_op2(a, "Mul", st[0], scalar_c(a, o->beta1)), ad_op2(a, "Mul", g, scalar_c(a, 1 - o->beta1)));
    int v = ad_op2(a, "Add", ad_op2(a, "Mul", st[1], scalar_c(a, o->beta2)),
                   ad_op2(a, "Mul", ad_op2(a, "Mul", g, g), scalar_c(a, 1 - o->beta2)));
    st_out[0] = m;
    st_out[1] = v;
    int denom = ad_op2(a, "Add", ad_op2(a, "Div", ad_op1(a, "Sqrt", v), sc[1]), scalar_c(a, o->eps));
    return ad_op2(a, "Sub", pp, ad_op2(a, "Mul", ad_op2(a, "Div", m, denom), sc[0]));
}

tern_status train_build_step_graph(tern_trainer *t, int grads_only, tern_error *err)
{
    tern_graph *g = t->g;
    const tern_train_opts *o = &t->o;
    ad_ctx a;
    tern_status st = ad_init(&a, g, err);
    if (st)
        return st;
    /* weights: float initializers of two or more elements become inputs (before inference, so no node reading
     * only weights is evaluated into a constant) */
    size_t nw = 0;
    if ((st = train_freeze_check(t, grads_only == TRAIN_GRAPH_STEP || grads_only == TRAIN_GRAPH_UPDATE, err))) {
        ad_free(&a);
        return st;
    }
    for (int v = 0; v < g->n_values; v++) {
        tern_graph_value *gv = &g->values[v];
        if ((gv->flags & TERN_VALUE_INITIALIZER) && gv->constant && gv->constant->type == TERN_ELEM_FLOAT &&
            gv->constant->count >= 2 && !train_frozen_why(g, v, o)) /* freeze.c: kept constant */
            nw++;
    }
    t->w = calloc(nw + 1, sizeof *t->w);
    int *wid = calloc(nw + 1, sizeof *wid);
    int *in = realloc(g->inputs, sizeof(int) * ((size_t)g->n_inputs + nw + 1));
    if (!t->w || !wid || !in) {
        free(wid);
        ad_free(&a);
        return tern_error_set(err, TERN_ERR_NOMEM, "train: out of memory");
    }
    g->inputs = in;
    for (int v = 0; v < g->n_values; v++) {
        tern_graph_value *gv = &g->values[v];
        if (!((gv->flags & TERN_VALUE_INITIALIZER) && gv->constant && gv->constant->type == TERN_ELEM_FLOAT &&
              gv->constant->count >= 2) || train_frozen_why(g, v, o))
            continue;
        train_weight *w = &t->w[t->nw];
        w->name = dup_str(gv->name);
        w->rank = gv->constant->rank;
        memcpy(w->dims, gv->constant->dims, sizeof w->dims);
        w->count = gv->constant->count;
        w->val = gv->constant->f;
        gv->constant->f = NULL;
        tern_host_tensor_free(gv->constant);
        gv->constant = NULL;
        gv->flags = TERN_VALUE_INPUT;
        g->inputs[g->n_inputs++] = v;
        wid[t->nw++] = v;
        if (!w->name) {
            free(wid);
            ad_free(&a);
            return tern_error_set(err, TERN_ERR_NOMEM, "train: out of memory");
        }
    }
    if (t->nw == 0) {
        free(wid);
        ad_free(&a);
        return tern_error_set(err, TERN_ERR_INVALID, "train: model '%s' has no float initializer to train", t->path);
    }
    /* the compiler's Conv takes only a constant bias: a trained one becomes an Add after the convolution */
    int nconv = g->n_nodes;
    for (int i = 0; i < nconv && !a.failed; i++) {
        tern_graph_node *n = &g->nodes[i];
        if (n->op_id != TERN_GOP_CONV || n->n_inputs < 3 || n->inputs[2] < 0 ||
            !(g->values[n->inputs[2]].flags & TERN_VALUE_INPUT) || n->inputs[1] < 0)
            continue;
        int bias = n->inputs[2], y = n->outputs[0];
        const tern_graph_value *wv = &g->values[n->inputs[1]];
        ad_shape bs = {.rank = wv->rank};
        for (int d = 0; d < bs.rank; d++)
            bs.d[d] = d == 1 ? wv->dims[0] : 1;
        n->n_inputs = 2;
        int conv = graph_add_value(g, NULL);
        if (conv < 0 || ad_grow(&a) < 0) {
            ad_fail(&a, TERN_ERR_NOMEM, "train: out of memory");
            break;
        }
        g->nodes[i].outputs[0] = conv;
        int sum = ad_op2(&a, "Add", conv, ad_reshape(&a, bias, &bs));
        if (sum < 0)
            break;
        /* the Add produces the original output value, so every reader keeps its input */
        int last = ad_last_node(&a);
        g->values[sum].producer = -1;
        g->nodes[last].outputs[0] = y;
    }
    /* pure BF16: each weight input holds BF16 (rounded to nearest even from the model's fp32 values once, as
     * PyTorch's module.to(torch.bfloat16)); every reader takes Cast(w, fp32), and the gradient and update are those
     * of that fp32 view */
    for (size_t i = 0; i < t->nw && o->bf16_weights && !a.failed; i++) {
        int v = wid[i], n0 = g->n_nodes;
        tern_convert_opts rne = TERN_CONVERT_OPTS_DEFAULT;
        tern_convert_round_f32(TERN_DTYPE_BF16, t->w[i].val, t->w[i].val, t->w[i].count, &rne, NULL);
        int vf = cast_to(&a, v, TERN_ELEM_FLOAT);
        if (vf < 0)
            break;
        g->values[v].type = TERN_ELEM_BFLOAT16;
        for (int j = 0; j < n0; j++)
            for (int k = 0; k < g->nodes[j].n_inputs; k++)
                if (g->nodes[j].inputs[k] == v)
                    g->nodes[j].inputs[k] = vf;
        for (int k = 0; k < g->n_outputs; k++)
            if (g->outputs[k] == v)
                g->outputs[k] = vf;
        wid[i] = vf;
    }
    if (a.failed || (st = graph_sort(g, err)) || (st = tern_graph_infer(g, err))) {
        free(wid);
        ad_free(&a);
        return a.failed ? err->code : tern_error_prefix(err, "train: ");
    }
    /* Dropout in training mode: Mul(x, mask), the mask a per-step input (the compiler builds no random mask) */
    train_dropout_rewrite(t, &a);
    if (a.failed) {
        free(wid);
        ad_free(&a);
        return err->code;
    }
    a.n_model = g->n_nodes; /* the model's forward; the loss nodes follow */
    int loss = build_loss(t, &a);
    if (loss >= 0) {
        /* the new nodes' types and shapes, which the gradient rules read */
        if ((st = tern_graph_infer(g, err))) {
            free(wid);
            ad_free(&a);
            return tern_error_prefix(err, "train: loss: ");
        }
    }
    if (!a.failed) {
        for (size_t i = 0; i < t->nw; i++)
            a.needs[wid[i]] = 1;
        a.recompute = o->recompute;
        a.no_fused_attention = o->no_fused_attention; /* grad_attention.c */
        a.att_report = &t->att;
        st = ad_backward(&a, g->n_nodes, loss);
        if (st) {
            free(wid);
            ad_free(&a);
            return st;
        }
    }
    /* BatchNormalization trains on batch statistics (grad_norm.c): each node becomes that computation now that the
     * backward pass is built; the model's own nodes (not recomputed copies) update their running statistics,
     * which become step outputs (nbuf of them: weight buf_w[k] gets value buf_v[k]) */
    int nbuf = 0, *buf_w = calloc(2 * t->nw + 1, sizeof(int)), *buf_v = calloc(2 * t->nw + 1, sizeof(int));
    if (!buf_w || !buf_v)
        ad_fail(&a, TERN_ERR_NOMEM, "train: out of memory");
    for (int i = 0, nn = g->n_nodes; i < nn && !a.failed; i++) {
        if (g->nodes[i].op_id != TERN_GOP_BATCH_NORMALIZATION)
            continue;
        /* data parallelism: each rank's own rows' statistics (PyTorch DDP's default); tensor / pipeline
         * parallelism (the only other callers of the split graphs) would cut the node's batch or channels */
        if (grads_only >= TRAIN_GRAPH_GRADS && !t->dp_batchnorm) {
            ad_fail_node(&a, i, "BatchNormalization trains on batch statistics and updates its running statistics "
                                "every step: not supported yet with tensor or pipeline parallelism (--layout); data "
                                "parallelism (--cores) is");
            break;
        }
        int rs[2] = {g->nodes[i].n_inputs > 3 ? g->nodes[i].inputs[3] : -1,
                     g->nodes[i].n_inputs > 4 ? g->nodes[i].inputs[4] : -1};
        int nv[2];
        if (ad_batchnorm_forward(&a, i, &nv[0], &nv[1]) < 0 || i >= a.n_model)
            continue;
        for (int k = 0; k < 2; k++)
            for (size_t j = 0; j < t->nw && nv[k] >= 0; j++)
                if (wid[j] == rs[k]) {
                    for (int q = 0; q < nbuf; q++)
                        if (buf_w[q] == (int)j)
                            ad_fail_node(&a, i, "running statistic '%s' is shared by two BatchNormalization nodes",
                                         t->w[j].name);
                    buf_w[nbuf] = (int)j;
                    buf_v[nbuf++] = nv[k];
                }
    }
    /* accumulation over micro-batches: the micro-step graph outputs gacc + g per weight; the step graph uses
     * (gacc + g) * gscale, gscale = 1 / micro-batches, as PyTorch's loss / K per micro-batch */
    /* data parallelism (data_parallel.c): TRAIN_GRAPH_GRADS outputs each g as it is; TRAIN_GRAPH_UPDATE takes the
     * all-reduced g as an input (train.dp.grad.<w>) times gscale, and the forward and backward go dead */
    int gscale = (t->o.accumulate > 1 && !grads_only) || grads_only == TRAIN_GRAPH_UPDATE
                     ? add_scalar_input(&a, TRAIN_GSCALE)
                     : -1;
    int gmode = grads_only == TRAIN_GRAPH_GRADS || grads_only == TRAIN_GRAPH_MICRO;
    int *gouts = gmode ? calloc(3 * t->nw + 2, sizeof(int)) : NULL;
    int ngout = 0;
    if (gmode && !gouts)
        ad_fail(&a, TERN_ERR_NOMEM, "train: out of memory");
    for (size_t i = 0; i < t->nw && !a.failed && (t->o.accumulate > 1 || grads_only >= TRAIN_GRAPH_GRADS); i++) {
        int gr = a.grad[wid[i]];
        train_weight *w = &t->w[i];
        if (gr < 0)
            continue;
        if (grads_only >= TRAIN_GRAPH_GRADS) {
            char *nm = fmt_name("train.dp.grad.", w->name);
            if (!nm) {
                ad_fail(&a, TERN_ERR_NOMEM, "train: out of memory");
                break;
            }
            free(grads_only == TRAIN_GRAPH_GRADS ? w->acc_out : w->acc_in);
            *(grads_only == TRAIN_GRAPH_GRADS ? &w->acc_out : &w->acc_in) = nm;
            if (grads_only == TRAIN_GRAPH_GRADS)
                gouts[ngout++] = name_value(&a, gr, nm);
            else { /* ad_op2 may grow a.grad: the value first, then the store */
                int scaled = ad_op2(&a, "Mul", add_input(&a, nm, w->rank, w->dims), gscale);
                a.grad[wid[i]] = scaled;
            }
            continue;
        }
        if (!w->acc_in)
            w->acc_in = fmt_name("train.gacc.", w->name);
        if (!w->acc_out)
            w->acc_out = fmt_name("train.gacc.new.", w->name);
        if (!w->acc_in || !w->acc_out) {
            ad_fail(&a, TERN_ERR_NOMEM, "train: out of memory");
            break;
        }
        int acc = add_input(&a, w->acc_in, w->rank, w->dims);
        int sum = ad_op2(&a, "Add", acc, gr);
        if (grads_only)
            gouts[ngout++] = name_value(&a, sum, w->acc_out);
        else { /* ad_op2 may grow a.grad: the value first, then the store */
            int scaled = ad_op2(&a, "Mul", sum, gscale);
            a.grad[wid[i]] = scaled;
        }
    }
    if (gmode) {
        for (size_t i = 0; i < t->nw; i++)
            t->w[i].trained = a.grad[wid[i]] >= 0;
        gouts[ngout++] = name_value(&a, loss, TRAIN_LOSS);
        /* --accumulate: each micro-batch updates the running statistics with its own batch statistics, as
         * PyTorch's model.train() forward does (the micro-step runs micro-batches 1 .. K-1, the step the K-th) */
        for (int k = 0; k < nbuf && !a.failed; k++) {
            train_weight *w = &t->w[buf_w[k]];
            if (w->trained) {
                ad_fail(&a, TERN_ERR_UNSUPPORTED,
                        "train: BatchNormalization running statistic '%s' also gets a gradient", w->name);
                break;
            }
            free(w->out_name);
            if (!(w->out_name = fmt_name("train.new.", w->name))) {
                ad_fail(&a, TERN_ERR_NOMEM, "train: out of memory");
                break;
            }
            int v = o->bf16_weights ? cast_to(&a, buf_v[k], TERN_ELEM_BFLOAT16) : buf_v[k];
            gouts[ngout++] = name_value(&a, v, w->out_name);
        }
        free(wid);
        free(buf_w);
        free(buf_v);
        if (a.failed) {
            free(gouts);
            ad_free(&a);
            return err->code;
        }
        for (int k = 0; k < g->n_outputs; k++)
            g->values[g->outputs[k]].flags &= ~(unsigned)TERN_VALUE_OUTPUT;
        free(g->outputs);
        g->outputs = gouts;
        g->n_outputs = ngout;
        for (int k = 0; k < ngout; k++)
            g->values[gouts[k]].flags |= TERN_VALUE_OUTPUT;
        ad_free(&a);
        if ((st = graph_compact(g, NULL, err)) || (st = graph_sort(g, err)) || (st = tern_graph_infer(g, err)))
            return tern_error_prefix(err, "train: micro-step graph: ");
        return TERN_OK;
    }
    /* global norm over every trained weight's gradient, then clipping */
    int sumsq = -1;
    for (size_t i = 0; i < t->nw && !a.failed; i++) {
        int gr = a.grad[wid[i]];
        t->w[i].trained = gr >= 0;
        if (gr < 0)
            continue;
        int s = ad_reduce(&a, "ReduceSum", ad_op2(&a, "Mul", gr, gr), 0, NULL, 0);
        sumsq = sumsq < 0 ? s : ad_op2(&a, "Add", sumsq, s);
    }
    if (sumsq < 0 && !a.failed)
        ad_fail(&a, TERN_ERR_INVALID, "train: no weight gets a gradient");
    int gnorm = ad_op1(&a, "Sqrt", sumsq), coef = -1;
    if (o->clip_norm > 0)
        coef = ad_op2(&a, "Min", ad_op2(&a, "Div", scalar_c(&a, o->clip_norm), ad_op2(&a, "Add", gnorm, scalar_c(&a, 1e-6))),
                      scalar_c(&a, 1.0));
    int sc[4] = {-1, -1, -1, -1};
    if (o->optimizer == TERN_OPT_SGD) {
        sc[0] = add_scalar_input(&a, TRAIN_LR);
    } else {
        sc[0] = add_scalar_input(&a, TRAIN_STEP_SIZE);
        sc[1] = add_scalar_input(&a, TRAIN_BC2_SQRT);
        if (o->optimizer == TERN_OPT_ADAMW && o->weight_decay != 0)
            sc[2] = add_scalar_input(&a, TRAIN_DECAY);
        if (o->optimizer == TERN_OPT_LAMB)
            sc[3] = add_scalar_input(&a, TRAIN_BC1);
    }
    /* outputs: read-out, loss, grad norm, then per weight its new value, state and gradient */
    int cap = 3 + (int)t->nw * 4;
    int *outs = malloc(sizeof(int) * (size_t)cap), nout = 0;
    if (!outs) {
        free(wid);
        free(buf_w);
        free(buf_v);
        ad_free(&a);
        return tern_error_set(err, TERN_ERR_NOMEM, "train: out of memory");
    }
    ad_shape one = {.rank = 1, .d = {1}};
    if (o->loss != TERN_LOSS_OUTPUT && grads_only != TRAIN_GRAPH_UPDATE) {
        int r = find_output(&a, o->output, "loss input");
        if (r >= 0) {
            t->read_out = dup_str(g->values[r].name);
            outs[nout++] = r;
        }
    }
    if (grads_only != TRAIN_GRAPH_UPDATE)
        outs[nout++] = name_value(&a, loss, TRAIN_LOSS);
    outs[nout++] = name_value(&a, ad_reshape(&a, gnorm, &one), TRAIN_GNORM);
    for (size_t i = 0; i < t->nw && !a.failed; i++) {
        train_weight *w = &t->w[i];
        if (!w->trained)
            continue;
        int gr = a.grad[wid[i]];
        if (o->grads_as_outputs) {
            w->grad_out = fmt_name("train.grad.", w->name);
            w->grad = calloc(w->count, sizeof(float));
            if (!w->grad_out || !w->grad) {
                ad_fail(&a, TERN_ERR_NOMEM, "train: out of memory");
                break;
            }
            outs[nout++] = name_value(&a, gr, w->grad_out);
        }
        w->n_state = o->optimizer == TERN_OPT_SGD ? (o->momentum != 0) : 2;
        for (int k = 0; k < w->n_state; k++) {
            char pre[32];
            snprintf(pre, sizeof pre, "train.state%d.", k);
            w->state_in[k] = fmt_name(pre, w->name);
            snprintf(pre, sizeof pre, "train.state%d.new.", k);
            w->state_out[k] = fmt_name(pre, w->name);
            w->state[k] = calloc(w->count, sizeof(float));
            if (!w->state_in[k] || !w->state_out[k] || !w->state[k])
                ad_fail(&a, TERN_ERR_NOMEM, "train: out of memory");
        }
        w->out_name = fmt_name("train.new.", w->name);
        if (!w->out_name)
            ad_fail(&a, TERN_ERR_NOMEM, "train: out of memory");
        int so[2] = {-1, -1};
        int np = build_update(t, &a, w, wid[i], gr, sc, coef, so);
        if (o->bf16_weights) { /* the device's rounding of the fp32 update to BF16: stochastic under bf16-sr */
            np = cast_to(&a, np, TERN_ELEM_BFLOAT16);
            for (int k = 0; k < w->n_state; k++)
                so[k] = cast_to(&a, so[k], TERN_ELEM_BFLOAT16);
        }
        outs[nout++] = name_value(&a, np, w->out_name);
        for (int k = 0; k < w->n_state; k++)
            outs[nout++] = name_value(&a, so[k], w->state_out[k]);
    }
    /* running statistics: not trained (no gradient reaches them), updated by the step (data parallelism: by the
     * gradient graph, rank 0's; the update graph has none) */
    for (int k = 0; k < nbuf && !a.failed && grads_only != TRAIN_GRAPH_UPDATE; k++) {
        train_weight *w = &t->w[buf_w[k]];
        if (w->trained) {
            ad_fail(&a, TERN_ERR_UNSUPPORTED, "train: BatchNormalization running statistic '%s' also gets a gradient",
                    w->name);
            break;
        }
        w->out_name = fmt_name("train.new.", w->name);
        if (!w->out_name) {
            ad_fail(&a, TERN_ERR_NOMEM, "train: out of memory");
            break;
        }
        int v = o->bf16_weights ? cast_to(&a, buf_v[k], TERN_ELEM_BFLOAT16) : buf_v[k];
        outs[nout++] = name_value(&a, v, w->out_name);
    }
    free(buf_w);
    free(buf_v);
    free(wid);
    if (a.failed) {
        free(outs);
        ad_free(&a);
        return err->code;
    }
    for (int k = 0; k < g->n_outputs; k++)
        g->values[g->outputs[k]].flags &= ~(unsigned)TERN_VALUE_OUTPUT;
    free(g->outputs);
    g->outputs = outs;
    g->n_outputs = nout;
    for (int k = 0; k < nout; k++)
        g->values[outs[k]].flags |= TERN_VALUE_OUTPUT;
    ad_free(&a);
    /* renumbers nothing that is kept, drops nothing reachable, rebuilds the name table for the new names */
    if ((st = graph_compact(g, NULL, err)) || (st = o->recompute ? keep_order(g, err) : graph_sort(g, err)) ||
        (st = tern_graph_infer(g, err)))
        return tern_error_prefix(err, "train: step graph: ");
    t->nodes = (size_t)g->n_nodes;
    return TERN_OK;
}

/* The optimizer update of one weight, for the ZeRO-1 shard update graph (data_parallel.c): the same nodes as the
 * step graph's, so a shard's elements get the bits the whole tensor's update gives them. */
int train_update_nodes(tern_trainer *t, ad_ctx *a, train_weight *w, int p, int g, const int *sc, int *st_out)
{
    return build_update(t, a, w, p, g, sc, -1, st_out);
}
