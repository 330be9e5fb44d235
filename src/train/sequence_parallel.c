/* Sequence parallelism (Megatron-LM's, Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
 * Transformer Models"; docs/training.md, "Sequence parallelism"): the plan's part. Under tensor parallelism the
 * nodes between the tensor-parallel regions - LayerNorm/RMSNorm, residual adds, the position embedding's add - run
 * replicated, every tensor rank computing the same [tokens, hidden] rows. With sp = 1 each tensor rank computes
 * only its 1/tp of them: the programs of those segments are compiled for mb / tp rows (whole rows of the
 * micro-batch: tensor rank r holds rows [r mb / tp, (r + 1) mb / tp), which are the tokens [r T / tp, (r + 1) T / tp)
 * of the [T, hidden] activation), every crossing value is held as row shards, gathered before a program that reads
 * it whole (a column-parallel pair, the vocabulary-parallel head, the loss's program) and reduce-scattered instead
 * of all-reduced where a row-parallel layer (or the vocabulary-parallel embedding) leaves partial sums
 * (pipeline_parallel.c runs them). The weights those programs read (the norms') then get partial gradients, summed
 * over the tensor group once a step.
 *
 * A row-sharded program must compute each row from that row alone. It is checked on the model itself: the plan
 * graph is built a second time at mb / tp rows (gsp; its folded shapes are the sharded programs' constants), and
 * every value such a program computes, and every value crossing between programs, must be the full one with its
 * leading (row) axis divided by tp and nothing else changed; a Concat, Split or Gather along that axis (which would
 * mix rows) is refused naming the node. */
#include "mp_internal.h"

#include "graph/op_params.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* the value named like g's v in gsp has v's shape with the leading axis divided by tp */
static int row_shard_of(const tern_graph_value *full, const tern_graph_value *shard, int64_t tp)
{
    if (!shard || full->rank < 1 || shard->rank != full->rank || shard->dims[0] * tp != full->dims[0])
        return 0;
    for (int d = 1; d < full->rank; d++)
        if (shard->dims[d] != full->dims[d])
            return 0;
    return 1;
}

static void dims_text(const tern_graph_value *v, char *buf, size_t n)
{
    size_t u = (size_t)snprintf(buf, n, "[");
    for (int d = 0; d < v->rank && u < n; d++)
        u += (size_t)snprintf(buf + u, n - u, "%s%lld", d ? ", " : "", (long long)v->dims[d]);
    if (u < n)
        snprintf(buf + u, n - u, "]");
}

/* The plan graph at mb / tp rows, its weights (named as p->g's, isw) inputs as there. */
static tern_status load_gsp(tern_trainer *t, mp_plan *p, const unsigned char *isw, tern_error *err)
{
    tern_trainer q;
    memset(&q, 0, sizeof q);
    q.o = t->o;
    q.o.batch = p->mb / p->tp;
    q.path = t->path;
    tern_status st;
    if ((st = tern_graph_load_onnx(t->path, &q.g, err)) || (st = train_bind_data(&q, err)) ||
        (st = graph_sort(q.g, err))) {
        tern_graph_free(q.g);
        free(q.data_name);
        return st;
    }
    free(q.data_name);
    tern_graph *g = p->gsp = q.g;
    int nw = 0;
    for (int v = 0; v < g->n_values; v++) {
        int pv = graph_lookup(p->g, g->values[v].name);
        nw += pv >= 0 && isw[pv] && g->values[v].constant;
    }
    int *in = realloc(g->inputs, sizeof(int) * (size_t)(g->n_inputs + nw + 1));
    if (!in)
        return train_oom(err);
    g->inputs = in;
    for (int v = 0; v < g->n_values; v++) {
        tern_graph_value *gv = &g->values[v];
        int pv = graph_lookup(p->g, gv->name);
        if (pv < 0 || !isw[pv] || !gv->constant)
            continue;
        gv->type = TERN_ELEM_FLOAT;
        gv->rank = gv->constant->rank;
        memcpy(gv->dims, gv->constant->dims, sizeof gv->dims);
        tern_host_tensor_free(gv->constant);
        gv->constant = NULL;
        gv->flags = TERN_VALUE_INPUT;
        g->inputs[g->n_inputs++] = v;
    }
    if ((st = tern_graph_infer(g, err)))
        return tern_error_prefix(err, "train: sp=1 (sequence parallelism): the model on %lld rows a tensor rank: ",
                                 (long long)(p->mb / p->tp));
    if (g->n_nodes != p->g->n_nodes)
        return tern_error_set(err, TERN_ERR_INVALID, "train: sp=1: internal: the model reloaded differs");
    return TERN_OK;
}

/* Whether node i (of a row-sharded segment, inseg marking its nodes) computes from the rows: reads the data (then
 * *reads_data), an activation of another program (marked in rowdep, this rank's rows or positions of it) or a value
 * computed from those here; its outputs marked in rowdep likewise. The others - a position embedding's lookup of
 * its table, say - are the same on every rank and need not be split. */
static int row_dependent(const mp_plan *p, const unsigned char *isw, const unsigned char *inseg, unsigned char *rowdep,
                         int i, int *reads_data)
{
    const tern_graph *g = p->g;
    const tern_graph_node *nd = &g->nodes[i];
    int dep = 0;
    for (int q = 0; q < nd->n_inputs; q++) {
        int v = nd->inputs[q], pr = v >= 0 ? g->values[v].producer : -1;
        if (v < 0 || g->values[v].constant || isw[v])
            continue;
        if (v == p->data_val)
            *reads_data = dep = 1;
        if (pr >= 0 && !inseg[pr] && g->nodes[pr].op_id != TERN_GOP_CONSTANT && !p->wd[pr] && !mp_known_const(g, pr))
            rowdep[v] = 1;
        dep |= rowdep[v];
    }
    for (int q = 0; q < nd->n_outputs; q++)
        if (nd->outputs[q] >= 0)
            rowdep[nd->outputs[q]] = (unsigned char)dep;
    return dep;
}

/* ---- inside a row (p->sp_sub > 1: a micro-batch of mb rows, mb dividing tp) ----
 * Tensor rank r holds tokens [r T / tp, (r + 1) T / tp) of the micro-batch's T = mb x S, a block of positions of one
 * row: its programs see [1, S mb / tp, ...]. The model cannot be loaded at that sequence length (its shapes hold S),
 * so the row-sharded programs are the plan graph's nodes on shard-shaped placeholders, re-inferred, and each node
 * that computes from the rows must work position by position: elementwise ops whose other operands do not span
 * the two token axes (a position table's add would need the rank's positions: refused), Cast, Identity, Dropout
 * (its mask drawn by position, dropout.c), LayerNormalization over the last axis, reductions, Softmax-family ops
 * over the last axis only, and a MatMul of the rows by a weight. Anything else is refused naming the node. */

/* 1 when operand v of a node whose output has rank R does not span axes 0 and 1 (right-aligned broadcasting) */
static int spans_tokens(const tern_graph *g, int v, int R)
{
    const tern_graph_value *x = &g->values[v];
    for (int d = 0; d < x->rank; d++) {
        int ax = d + (R - x->rank);
        if (ax <= 1 && x->dims[d] != 1)
            return 1;
    }
    return 0;
}

/* 1 when node i reads only the last axis for its axis-wise work; why says what it does otherwise */
static int per_position(const tern_graph *g, int i, const unsigned char *rowdep, char *why, size_t wl)
{
    const tern_graph_node *nd = &g->nodes[i];
    int op = nd->op_id, y = nd->n_outputs ? nd->outputs[0] : -1;
    int R = y >= 0 ? g->values[y].rank : 0;
    tern_op_family f = tern_op_family_of((tern_op_id)op);
    if (R < 2) {
        snprintf(why, wl, "its output has rank %d, not [rows, positions, ...]", R);
        return 0;
    }
    if (f == TERN_OP_FAMILY_ELEMENTWISE_UNARY || f == TERN_OP_FAMILY_ELEMENTWISE_BINARY ||
        f == TERN_OP_FAMILY_ELEMENTWISE_VARIADIC || f == TERN_OP_FAMILY_ELEMENTWISE_SELECT ||
        op == TERN_GOP_CAST || op == TERN_GOP_IDENTITY || op == TERN_GOP_DROPOUT) {
        for (int q = 0; q < nd->n_inputs; q++) {
            int v = nd->inputs[q];
            if (v >= 0 && !rowdep[v] && g->values[v].rank >= 0 && spans_tokens(g, v, R)) {
                snprintf(why, wl, "its operand '%s' spans the positions (a rank holds only some of them)",
                         g->values[v].name);
                return 0;
            }
        }
        return 1;
    }
    if (op == TERN_GOP_LAYER_NORMALIZATION || f == TERN_OP_FAMILY_AXIS) {
        int64_t a = tern_graph_attr_int(nd, "axis", -1);
        if (op != TERN_GOP_LAYER_NORMALIZATION && op != TERN_GOP_SOFTMAX && op != TERN_GOP_LOG_SOFTMAX) {
            snprintf(why, wl, "it works along an axis other ops than the softmax family may mix positions on");
            return 0;
        }
        if (a != -1 && a != R - 1) {
            snprintf(why, wl, "it works along axis %lld, not the last", (long long)a);
            return 0;
        }
        return 1;
    }
    if (f == TERN_OP_FAMILY_REDUCE) {
        int given = nd->n_inputs > 1 && nd->inputs[1] >= 0;
        const tern_host_tensor *ax = given ? g->values[nd->inputs[1]].constant : NULL;
        graph_axes_args aa;
        char w2[160];
        if (graph_reduce_axes_decode(nd, tern_graph_opset(g), given, ax, &aa, w2, sizeof w2) || !aa.known ||
            aa.n != 1 || !(aa.axes[0] == -1 || aa.axes[0] == R - 1) || !tern_graph_attr_int(nd, "keepdims", 1)) {
            snprintf(why, wl, "it reduces other axes than the last (keeping it)");
            return 0;
        }
        return 1;
    }
    if (op == TERN_GOP_MATMUL && nd->n_inputs == 2 && nd->inputs[1] >= 0 && !rowdep[nd->inputs[1]] &&
        g->values[nd->inputs[1]].rank == 2)
        return 1;
    snprintf(why, wl, "a %s node is not known to compute each position from that position alone",
             tern_op_info((tern_op_id)op)->name);
    return 0;
}

/* the token-block shard of a crossing value [mb, S, ...]: [1, S mb / tp, ...]; 0 when it has no such shape */
static int token_shard(const mp_plan *p, const mp_xv *xv, int64_t *sd)
{
    if (xv->rank < 2 || xv->dims[0] != p->mb || (xv->dims[1] * p->mb) % p->tp)
        return 0;
    memcpy(sd, xv->dims, sizeof xv->dims);
    sd[0] = 1;
    sd[1] = xv->dims[1] * p->mb / p->tp;
    return 1;
}

/* A check of one node of a row-sharded segment that computes from the rows (reads: it reads the data itself) */
typedef tern_status (*sp_check_fn)(const mp_plan *p, const unsigned char *isw, const unsigned char *rowdep, int i,
                                   int reads, tern_error *err);

/* Marks the row-sharded segments (those between the tensor-parallel regions: mp_seg.sp) and runs check on each of
 * their nodes that computes from the rows (row_dependent), in the segments' order; the first failure stops it. */
static tern_status sp_walk(mp_plan *p, const unsigned char *isw, sp_check_fn check, tern_error *err)
{
    const tern_graph *g = p->g;
    tern_status st = TERN_OK;
    unsigned char *rowdep = calloc((size_t)g->n_values + 1, 1), *inseg = calloc((size_t)g->n_nodes + 1, 1);
    if (!rowdep || !inseg) {
        free(rowdep), free(inseg);
        return train_oom(err);
    }
    for (int k = 0; k < p->nseg && !st; k++) {
        mp_seg *sg = &p->seg[k];
        sg->sp = sg->pair < 0 && !sg->vocab && !sg->last && sg->nn > 0;
        for (int e = 0; e < sg->nn; e++)
            inseg[sg->nodes[e]] = (unsigned char)sg->sp;
        for (int e = 0; e < sg->nn && sg->sp && !st; e++) {
            int i = sg->nodes[e], reads = 0;
            if (row_dependent(p, isw, inseg, rowdep, i, &reads))
                st = check(p, isw, rowdep, i, reads, err);
        }
        for (int e = 0; e < sg->nn; e++)
            inseg[sg->nodes[e]] = 0;
    }
    free(rowdep), free(inseg);
    return st;
}

/* inside a row: the node works position by position and does not read the data */
static tern_status check_sub(const mp_plan *p, const unsigned char *isw, const unsigned char *rowdep, int i, int reads,
                             tern_error *err)
{
    const tern_graph *g = p->g;
    char lab[256], why[200];
    (void)isw;
    if (reads)
        return tern_error_set(err, TERN_ERR_UNSUPPORTED,
                              "train: sp=1 (sequence parallelism) inside a row: %s reads the data between the "
                              "tensor-parallel regions; a rank's positions of it are not fed (give at least tp rows a "
                              "micro-batch)",
                              tern_graph_node_label(g, i, lab, sizeof lab));
    if (!per_position(g, i, rowdep, why, sizeof why))
        return tern_error_set(err, TERN_ERR_UNSUPPORTED,
                              "train: sp=1 (sequence parallelism) inside a row (a micro-batch of %lld row%s over "
                              "tp=%lld): %s, between the tensor-parallel regions, cannot run on a rank's positions: %s",
                              (long long)p->mb, p->mb == 1 ? "" : "s", (long long)p->tp,
                              tern_graph_node_label(g, i, lab, sizeof lab), why);
    return TERN_OK;
}

static tern_status sp_plan_sub(mp_plan *p, const unsigned char *isw, tern_error *err)
{
    const tern_graph *g = p->g;
    char d0[96];
    tern_status st = sp_walk(p, isw, check_sub, err);
    for (int x = 0; x < p->nxv && !st; x++) {
        mp_xv *xv = &p->xv[x];
        if (xv->vsplit)
            continue;
        if (!token_shard(p, xv, xv->sdims) || xv->count % (size_t)p->tp) {
            int v = graph_lookup(g, xv->name);
            if (v >= 0)
                dims_text(&g->values[v], d0, sizeof d0);
            return tern_error_set(err, TERN_ERR_UNSUPPORTED,
                                  "train: sp=1 (sequence parallelism) inside a row: '%s' %s, crossing from program %d "
                                  "to a later one, is not [%lld rows, positions, ...] with tp=%lld dividing its "
                                  "tokens; it cannot be held as blocks of positions",
                                  xv->name, v >= 0 ? d0 : "?", xv->from, (long long)p->mb, (long long)p->tp);
        }
        xv->sp = 1;
    }
    return st;
}

/* whole rows: the node does not work along the row axis, and each value it gives is its full one with the leading
 * axis divided by tp in the plan graph at mb / tp rows (gsp) */
static tern_status check_rows(const mp_plan *p, const unsigned char *isw, const unsigned char *rowdep, int i, int reads,
                              tern_error *err)
{
    const tern_graph *g = p->g, *gs = p->gsp;
    const tern_graph_node *nd = &g->nodes[i];
    int op = nd->op_id;
    char lab[256], d0[96], d1[96];
    (void)rowdep, (void)reads;
    /* nodes that could mix rows while keeping the shapes right: refused along the row axis */
    int ax = -1;
    if (op == TERN_GOP_CONCAT || op == TERN_GOP_SPLIT || op == TERN_GOP_GATHER) {
        int r0 = nd->n_inputs && nd->inputs[0] >= 0 ? g->values[nd->inputs[0]].rank : 1;
        int64_t a = tern_graph_attr_int(nd, "axis", 0);
        ax = (int)(a < 0 ? a + r0 : a);
        /* a Gather from a weight (an embedding's table) reads rows of the table, not of the activation */
        if (op == TERN_GOP_GATHER && nd->n_inputs && nd->inputs[0] >= 0 && isw[nd->inputs[0]])
            ax = -1;
    }
    if (ax == 0)
        return tern_error_set(err, TERN_ERR_UNSUPPORTED,
                              "train: sp=1 (sequence parallelism): %s, between the tensor-parallel regions, works along "
                              "the rows of the micro-batch (axis 0); a tensor rank holds only 1/tp of them there, so it "
                              "cannot run row-sharded",
                              tern_graph_node_label(g, i, lab, sizeof lab));
    for (int q = 0; q < nd->n_outputs; q++) {
        int v = nd->outputs[q];
        if (v < 0 || g->values[v].constant)
            continue;
        int sv = graph_lookup(gs, g->values[v].name);
        const tern_graph_value *sh = sv >= 0 ? &gs->values[sv] : NULL;
        if (row_shard_of(&g->values[v], sh, p->tp))
            continue;
        dims_text(&g->values[v], d0, sizeof d0);
        if (sh)
            dims_text(sh, d1, sizeof d1);
        return tern_error_set(err, TERN_ERR_UNSUPPORTED,
                              "train: sp=1 (sequence parallelism): %s, between the tensor-parallel regions, gives '%s' "
                              "%s on a micro-batch of %lld rows but %s on %lld: not the rows split tp=%lld ways along "
                              "its leading axis, so it does not compute each row from that row alone and cannot run "
                              "row-sharded",
                              tern_graph_node_label(g, i, lab, sizeof lab), g->values[v].name, d0, (long long)p->mb,
                              sh ? d1 : "nothing", (long long)(p->mb / p->tp), (long long)p->tp);
    }
    return TERN_OK;
}

tern_status mp_sp_plan(tern_trainer *t, mp_plan *p, const unsigned char *isw, tern_error *err)
{
    if (p->sp_sub > 1)
        return sp_plan_sub(p, isw, err);
    tern_status st = load_gsp(t, p, isw, err);
    if (st)
        return st;
    const tern_graph *g = p->g, *gs = p->gsp;
    char d0[96];
    st = sp_walk(p, isw, check_rows, err);
    if (st)
        return st;
    for (int x = 0; x < p->nxv; x++) {
        mp_xv *xv = &p->xv[x];
        if (xv->vsplit) /* the LM head's logits: full rows, the rank's vocabulary columns (the loss reads them) */
            continue;
        int v = graph_lookup(g, xv->name), sv = graph_lookup(gs, xv->name);
        if (v < 0 || !row_shard_of(&g->values[v], sv >= 0 ? &gs->values[sv] : NULL, p->tp) || xv->count % p->tp) {
            if (v >= 0)
                dims_text(&g->values[v], d0, sizeof d0);
            return tern_error_set(err, TERN_ERR_UNSUPPORTED,
                                  "train: sp=1 (sequence parallelism): '%s' %s, crossing from program %d to a later "
                                  "one, does not have the micro-batch's %lld rows as its leading axis; it cannot be "
                                  "held as row shards",
                                  xv->name, v >= 0 ? d0 : "?", xv->from, (long long)p->mb);
        }
        xv->sp = 1;
        memcpy(xv->sdims, gs->values[sv].dims, sizeof xv->sdims);
    }
    return TERN_OK;
}
