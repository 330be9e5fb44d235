/* Tensor parallelism, Megatron-style: the pair rule that finds the column- and row-parallel linear layers and the
 * weights they split (docs/training.md, "Tensor and pipeline parallelism"); tensor_parallel.c plans the layout.
 *
 * The pair rule. A MatMul (or Gemm, transA = 0) whose second input is a 2-D weight [K, N] or a Transpose of one
 * (PyTorch's nn.Linear) starts a pair (a); every node that reads its output, and every node reading theirs, must be
 * one the rule can follow, until a MatMul/Gemm (b) reads one of those values, split along its last axis, with a
 * 2-D weight whose K is that axis. MatMuls beside a reading a's input with a 2-D weight of the same K (SwiGLU's up
 * beside its gate, or separate Q, K and V projections, whose heads the pair then splits) join it column-parallel
 * (tried first; the pair of a alone when that fails). Each value of the pair carries a split axis (a's columns at
 * first): elementwise
 * nodes (other inputs scalar constants, a bias of the columns, or a constant broadcast along the split axis: the
 * causal mask); one Split of a's columns with constant sizes (a fused QKV: the columns become groups, each split
 * tp ways); a Reshape that carries the split axis into heads or back (tp must divide the axis it starts); a
 * Transpose; an Unsqueeze and an Expand along other axes (grouped-query attention's repeat of the K/V heads, the
 * Expand target rewritten per shard); a Slice along other axes and a Concat of pair values along another axis
 * (rotary embeddings); a MatMul of two values split along the same batch axis (per-head scores and context); a
 * softmax along another axis. A node whose outputs the plan knows as constants (a Shape of a pair value) runs in
 * no program. No value of the pair but b's output may be read outside it (nor be a model output). The pair is
 * then column-parallel a (weight and bias split along N, within each group), the nodes between on N / tp columns
 * (H / tp heads: Split sizes and Reshape targets rewritten per rank), and row-parallel b (weight split along K):
 * each tensor rank's b gives a partial sum, all-reduced before its readers (Megatron's g), and the pair's input
 * gradient is all-reduced in the backward (Megatron's f). A Gemm b's own bias is added on tensor rank 0 only. A
 * linear layer that starts no pair stays replicated (every tensor rank runs it, as Megatron runs the layers between
 * its parallel regions); tp > 1 on a model with no pair is refused with the first linear layer and why it starts
 * none; tp not dividing the columns, a Split part or the heads is refused naming the node.
 *
 * Key/value heads tp exceeds (grouped-query attention, as NxD): when tp is a multiple of a K or V projection's heads,
 * each rank holds one head, replicated over rep = tp / heads ranks (its weights split tp / rep ways, rank r taking
 * block r / rep); the repeat for the query heads (Unsqueeze, Expand, Reshape) gives each rank its H / tp query heads
 * as without replication, and pipeline_parallel.c sums the replicas' gradients over the rep ranks sharing a head. */
#include "mp_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int is_weight_val(const tern_graph *g, int v, const unsigned char *isw)
{
    return v >= 0 && v < g->n_values && isw[v];
}

int mp_is_linear(const tern_graph_node *n)
{
    return n->op_id == TERN_GOP_MATMUL || n->op_id == TERN_GOP_GEMM;
}

/* the value's scalar-constant status: an initializer or Constant output of one element */
static int is_scalar_const(const tern_graph *g, int v)
{
    if (v < 0)
        return 1;
    const tern_graph_value *gv = &g->values[v];
    if (gv->constant)
        return gv->constant->count <= 1;
    if (gv->producer >= 0 && g->nodes[gv->producer].op_id == TERN_GOP_CONSTANT) {
        int64_t n = 1;
        for (int d = 0; d < gv->rank; d++)
            n *= gv->dims[d] < 0 ? 2 : gv->dims[d];
        return gv->rank >= 0 && n <= 1;
    }
    return 0;
}

/* The weight behind linear node n's second input: a 2-D weight, or a Transpose (perm 1, 0) of one (PyTorch's
 * nn.Linear exports x W^T so); *w the weight's value, *trans 1 when the node multiplies by its transpose (a Gemm's
 * transB counted in). K and N of the product; 0 when the form is not one the rule splits. */
int mp_linear_kn(const tern_graph *g, const unsigned char *isw, const tern_graph_node *n, int *w, int64_t *k,
                 int64_t *nn, int *trans)
{
    int v = n->n_inputs > 1 ? n->inputs[1] : -1, tr = 0;
    if (v < 0)
        return 0;
    if (!isw[v]) {
        int pr = g->values[v].producer;
        if (pr < 0 || g->nodes[pr].op_id != TERN_GOP_TRANSPOSE || g->nodes[pr].n_inputs < 1)
            return 0;
        const tern_graph_node *tn = &g->nodes[pr];
        size_t np = 0;
        const int64_t *perm = graph_attr_ints(tn, "perm", &np);
        if (tn->inputs[0] < 0 || !isw[tn->inputs[0]] || (perm && (np != 2 || perm[0] != 1 || perm[1] != 0)))
            return 0;
        v = tn->inputs[0];
        tr = 1;
    }
    if (g->values[v].rank != 2)
        return 0;
    if (n->op_id == TERN_GOP_GEMM && tern_graph_attr_int(n, "transA", 0))
        return 0;
    if (n->op_id == TERN_GOP_GEMM && tern_graph_attr_int(n, "transB", 0))
        tr ^= 1;
    const int64_t *wd = g->values[v].dims;
    *w = v;
    *trans = tr;
    *k = tr ? wd[1] : wd[0];
    *nn = tr ? wd[0] : wd[1];
    return 1;
}

tern_status mp_add_wspec(mp_plan *p, const char *name, int axis, int rank0, const mp_pair *grp, int rep,
                         int64_t blk, tern_error *err)
{
    for (int i = 0; i < p->nws; i++)
        if (!strcmp(p->ws[i].name, name))
            return tern_error_set(err, TERN_ERR_UNSUPPORTED,
                                  "train: tensor parallelism: weight '%s' is read by two linear pairs (or twice in "
                                  "one); the rule splits a weight in one place only",
                                  name);
    mp_wspec *nw = realloc(p->ws, sizeof *nw * (size_t)(p->nws + 1));
    if (!nw)
        return train_oom(err);
    p->ws = nw;
    p->ws[p->nws].name = train_strdup(name);
    p->ws[p->nws].axis = axis;
    p->ws[p->nws].rank0_only = rank0;
    p->ws[p->nws].ngroups = grp ? grp->ngroups : 1;
    if (grp)
        memcpy(p->ws[p->nws].groups, grp->groups, sizeof grp->groups);
    p->ws[p->nws].rep = rep > 1 ? rep : 1;
    p->ws[p->nws].blk = blk;
    if (!p->ws[p->nws].name)
        return train_oom(err);
    p->nws++;
    return TERN_OK;
}

const mp_wspec *mp_wspec_of(const mp_plan *p, const char *name)
{
    for (int i = 0; i < p->nws; i++)
        if (!strcmp(p->ws[i].name, name))
            return &p->ws[i];
    return NULL;
}

static int norm_axis(int64_t ax, int rank)
{
    return (int)(ax < 0 ? ax + rank : ax);
}

/* The int64 values of a constant (plan-graph) value; -1 when not constant or too long. */
static int const_ints(const tern_graph *g, int v, int64_t *out, int cap)
{
    if (v < 0 || !g->values[v].constant || (int)g->values[v].constant->count > cap)
        return -1;
    const tern_host_tensor *c = g->values[v].constant;
    for (size_t e = 0; e < c->count; e++)
        out[e] = (int64_t)tern_host_tensor_get(c, e);
    return (int)c->count;
}

/* Every output of node i is a constant of the plan graph (folded shape arithmetic). */
int mp_known_const(const tern_graph *g, int i)
{
    const tern_graph_node *nd = &g->nodes[i];
    int any = 0;
    for (int q = 0; q < nd->n_outputs; q++) {
        int v = nd->outputs[q];
        if (v < 0)
            continue;
        if (!g->values[v].constant)
            return 0;
        any = 1;
    }
    return any;
}

/* Value v computes from constants alone (no weight, no data): a mask buffer's Slice and Cast, which the plan's
 * inference leaves unfolded when the mask is large (GPT-2's 1024 x 1024 causal buffer). */
static int const_only(const tern_graph *g, const unsigned char *isw, int v, int depth)
{
    const tern_graph_value *gv = &g->values[v];
    if (gv->constant)
        return 1;
    if (isw[v] || (gv->flags & TERN_VALUE_INPUT) || depth > 16 || gv->producer < 0)
        return 0;
    const tern_graph_node *nd = &g->nodes[gv->producer];
    for (int q = 0; q < nd->n_inputs; q++)
        if (nd->inputs[q] >= 0 && !const_only(g, isw, nd->inputs[q], depth + 1))
            return 0;
    return 1;
}

/* Tries the pair starting at node i (docs in the header); 1 with *pair filled, 0 with why[] saying why not, -1
 * when it is a pair the layout cannot split (why[] names the node and the numbers). Each value of the pair has a
 * split axis (sax): a's columns, moved by Transpose, carried into heads by a Reshape, the batch axis of a product
 * of two values of the pair (attention's heads). */
static int try_pair(const tern_graph *g, const unsigned char *isw, const unsigned char *taken, int i, int64_t tp,
                    int allow_co, mp_pair *pair, char *why, size_t wl)
{
    const tern_graph_node *na = &g->nodes[i];
    char lab[256], la[256];
    int w;
    int64_t k, n;
    int tb;
    memset(pair, 0, sizeof *pair);
    if (!mp_linear_kn(g, isw, na, &w, &k, &n, &tb)) {
        snprintf(why, wl, "%s has no 2-D weight as its second input (or a transposed first input)",
                 tern_graph_node_label(g, i, lab, sizeof lab));
        return 0;
    }
    tern_graph_node_label(g, i, la, sizeof la);
    unsigned char *in = calloc((size_t)g->n_nodes + 1, 1), *pre = calloc((size_t)g->n_values + 1, 1);
    int *sax = malloc(sizeof(int) * ((size_t)g->n_values + 1));
    mp_fix *fix = calloc((size_t)g->n_nodes + 1, sizeof *fix);
    /* Key/value heads replicated when tp exceeds them (NxD's rule): each value also carries its root - the linear
     * layer it comes from (0: a, 1 + c: co[c]; -2 mixed) - and its replication rep (0 not decided yet, then 1 or
     * the tp / heads ranks sharing a head), decided at the Reshape into heads and pushed back to the root's
     * earlier values (its weights, its bias); rax marks grouped-query attention's repeat (an Expand of the axis
     * after the heads), which the Reshape merging the two axes ends (rep 1 again: H / tp query heads a rank). */
    int *root = malloc(sizeof(int) * ((size_t)g->n_values + 1));
    unsigned char *rep = calloc((size_t)g->n_values + 1, 1), *rax = calloc((size_t)g->n_values + 1, 1);
    if (!in || !pre || !sax || !fix || !root || !rep || !rax) {
        free(in), free(pre), free(sax), free(fix), free(root), free(rep), free(rax);
        snprintf(why, wl, "out of memory");
        return 0;
    }
    for (int v = 0; v < g->n_values; v++)
        sax[v] = root[v] = -1;
    int nfix = 0, ngroups = 1, heads = 0, wb0, tbc;
    int64_t groups[TERN_GRAPH_MAX_RANK] = {n}, kc, nc;
    /* per root: its rep (0 undecided), the Reshape that decided it and its heads, whether a node mixed its values
     * with another root's (leak) or rewrote a shape of them (rfix) before the rep was decided, its columns */
    int rrep[MP_MAX_CO + 1] = {0}, rnode[MP_MAX_CO + 1];
    int64_t rheads[MP_MAX_CO + 1] = {0}, rcols[MP_MAX_CO + 1] = {n};
    unsigned char leak[MP_MAX_CO + 1] = {0}, rfix[MP_MAX_CO + 1] = {0};
    in[i] = 1;
    int y0 = na->outputs[0];
    const tern_graph_value *yv = &g->values[y0];
    if (yv->rank < 1 || yv->dims[yv->rank - 1] != n) {
        snprintf(why, wl, "%s's output has no static shape ending in its %lld columns", la, (long long)n);
        free(in), free(pre), free(sax), free(fix), free(root), free(rep), free(rax);
        return 0;
    }
    sax[y0] = yv->rank - 1;
    pre[y0] = 1;
    root[y0] = 0;
    int b = -1, ok = 1;
    for (int j = i + 1; j < g->n_nodes && ok == 1; j++) {
        const tern_graph_node *nj = &g->nodes[j];
        int reads = 0, r0 = -1;
        for (int q = 0; q < nj->n_inputs; q++)
            if (nj->inputs[q] >= 0 && sax[nj->inputs[q]] >= 0) {
                reads = 1;
                if (r0 < 0)
                    r0 = nj->inputs[q];
            }
        if (!reads) {
            const tern_graph_value *cv;
            if (allow_co && b < 0 && pair->nco < MP_MAX_CO && !taken[j] && nj->op_id == TERN_GOP_MATMUL &&
                nj->n_inputs == 2 && nj->inputs[0] == na->inputs[0] && nj->n_outputs >= 1 && nj->outputs[0] >= 0 &&
                mp_linear_kn(g, isw, nj, &wb0, &kc, &nc, &tbc) && kc == k && (nc % tp == 0 || tp % nc == 0) &&
                (cv = &g->values[nj->outputs[0]])->rank >= 1 && cv->dims[cv->rank - 1] == nc) {
                /* a column-parallel MatMul beside a on the same input (SwiGLU's gate and up; K and V beside Q,
                 * whose columns tp may exceed when they are replicated key/value heads: checked at the end) */
                rcols[1 + pair->nco] = nc;
                root[nj->outputs[0]] = 1 + pair->nco;
                pair->co[pair->nco++] = j;
                in[j] = 1;
                sax[nj->outputs[0]] = cv->rank - 1;
                pre[nj->outputs[0]] = 1;
            }
            continue;
        }
        if (mp_known_const(g, j))
            continue; /* a Shape of a value of the pair: the plan knows it, no program runs it */
        tern_graph_node_label(g, j, lab, sizeof lab);
        if (b >= 0) {
            snprintf(why, wl, "%s reads a value of the pair from %s after its row-parallel layer", lab, la);
            ok = 0;
            break;
        }
        if (taken[j]) {
            snprintf(why, wl, "%s already belongs to another pair", lab);
            ok = 0;
            break;
        }
        /* the pair values it reads: their root (oroot, -2 when they come from several linear layers) and
         * replication (urep; a replicated value may meet no value of another replication, rmix) */
        int urep = 0, rmix = 0, rfrom = -1, xrax = 0, oroot = -3;
        for (int q = 0; q < nj->n_inputs; q++) {
            int v = nj->inputs[q];
            if (v < 0 || sax[v] < 0)
                continue;
            int e = rep[v] > 1 ? rep[v] : 1;
            if (oroot != -3 && e != (urep > 1 ? urep : 1))
                rmix = 1;
            if (e > 1 || urep == 0)
                urep = rep[v];
            if (e > 1)
                rfrom = root[v];
            xrax |= rax[v];
            oroot = oroot == -3 ? root[v] : oroot == root[v] ? oroot : -2;
        }
        for (int q = 0; oroot == -2 && q < nj->n_inputs; q++)
            if (nj->inputs[q] >= 0 && sax[nj->inputs[q]] >= 0 && root[nj->inputs[q]] >= 0)
                leak[root[nj->inputs[q]]] = 1;
        if (urep > 1 || rmix) {
            int op = nj->op_id;
            tern_op_family fr = tern_op_family_of((tern_op_id)op);
            int fine = !rmix && (op == TERN_GOP_RESHAPE ? xrax
                                 : (fr == TERN_OP_FAMILY_ELEMENTWISE_UNARY || fr == TERN_OP_FAMILY_ELEMENTWISE_BINARY ||
                                    fr == TERN_OP_FAMILY_ELEMENTWISE_VARIADIC ||
                                    fr == TERN_OP_FAMILY_ELEMENTWISE_SELECT || op == TERN_GOP_TRANSPOSE ||
                                    op == TERN_GOP_UNSQUEEZE || op == TERN_GOP_SLICE || op == TERN_GOP_CONCAT ||
                                    op == TERN_GOP_EXPAND) &&
                                       !xrax);
            if (!fine) {
                char lr[256];
                int rf = rfrom >= 0 ? rfrom : 0;
                snprintf(why, wl,
                         "tp=%lld does not divide the %lld heads of %.120s (the attention after %.120s): tp may "
                         "exceed only key/value heads, which are then replicated over tp / heads ranks (tp a "
                         "multiple of them, as NxD does) and repeated for the query heads (grouped-query attention's "
                         "Unsqueeze, Expand and Reshape), but %.120s reads them %s",
                         (long long)tp, (long long)rheads[rf], tern_graph_node_label(g, rnode[rf], lr, sizeof lr), la,
                         lab, rmix ? "beside values that are not replicated so" : "before they are repeated");
                ok = -1;
                break;
            }
        }
        int x0 = nj->n_inputs ? nj->inputs[0] : -1, s0 = x0 >= 0 ? sax[x0] : -1;
        int wb;
        int64_t k2, n2;
        int tb2;
        if (mp_is_linear(nj) && s0 >= 0 && s0 == g->values[x0].rank - 1 &&
            mp_linear_kn(g, isw, nj, &wb, &k2, &n2, &tb2) && k2 == g->values[x0].dims[s0] &&
            !(nj->n_inputs > 1 && sax[nj->inputs[1]] >= 0) && (ngroups == 1 || heads)) {
            b = j;
            in[j] = 1;
            continue; /* its output is outside the pair */
        }
        tern_op_family f = tern_op_family_of((tern_op_id)nj->op_id);
        int out_sax = -1, out_pre = 0, out_rax = 0, nfix0 = nfix;
        const tern_graph_value *xr = &g->values[r0];
        int sr = sax[r0];
        if (f == TERN_OP_FAMILY_ELEMENTWISE_UNARY || f == TERN_OP_FAMILY_ELEMENTWISE_BINARY ||
            f == TERN_OP_FAMILY_ELEMENTWISE_VARIADIC || f == TERN_OP_FAMILY_ELEMENTWISE_SELECT) {
            int allpre = 1;
            for (int q = 0; q < nj->n_inputs && ok; q++) {
                int v = nj->inputs[q];
                if (v < 0)
                    continue;
                if (sax[v] >= 0) {
                    if (sax[v] != sr || g->values[v].rank != xr->rank) {
                        snprintf(why, wl, "%s combines values of the pair split along different axes", lab);
                        ok = 0;
                    }
                    allpre &= pre[v];
                    continue;
                }
                if (is_scalar_const(g, v))
                    continue;
                const tern_graph_value *ov = &g->values[v];
                if (is_weight_val(g, v, isw) && ov->rank == 1 && sr == xr->rank - 1 && ov->dims[0] == xr->dims[sr] &&
                    nj->op_id == TERN_GOP_ADD && pre[r0])
                    continue; /* a bias of the split columns */
                int al = sr - (xr->rank - ov->rank);
                if ((ov->constant || const_only(g, isw, v, 0)) && ov->rank >= 0 && ov->rank <= xr->rank &&
                    (al < 0 || ov->dims[al] == 1))
                    continue; /* a constant broadcast along the split axis (attention's mask) */
                snprintf(why, wl, "%s reads '%s', neither a value of the pair, a scalar constant, a bias of its "
                         "columns nor a constant broadcast along its split axis",
                         lab, ov->name);
                ok = 0;
            }
            out_sax = sr;
            out_pre = allpre && nj->n_outputs && nj->outputs[0] >= 0 && g->values[nj->outputs[0]].rank == xr->rank;
        } else if (nj->op_id == TERN_GOP_SPLIT) {
            int ax = norm_axis(tern_graph_attr_int(nj, "axis", 0), xr->rank);
            int64_t sz[TERN_GRAPH_MAX_RANK];
            int ns = nj->n_inputs > 1 ? const_ints(g, nj->inputs[1], sz, TERN_GRAPH_MAX_RANK) : -1;
            if (ax != sr || ns < 2 || !pre[r0] || ngroups > 1 || r0 != x0) {
                snprintf(why, wl, "%s is not a Split of the columns (constant sizes, on a's output) the rule takes",
                         lab);
                ok = 0;
            } else {
                for (int q = 0; q < ns && ok == 1; q++)
                    if (sz[q] % tp) {
                        snprintf(why, wl, "tp=%lld does not divide part %d (%lld columns) of %s after %s",
                                 (long long)tp, q, (long long)sz[q], lab, la);
                        ok = -1;
                    }
                ngroups = ns;
                memcpy(groups, sz, sizeof sz);
                fix[nfix].node = j;
                fix[nfix].n = ns;
                for (int q = 0; q < ns; q++)
                    fix[nfix].v[q] = sz[q] / tp;
                nfix++;
                out_sax = sr;
            }
        } else if (nj->op_id == TERN_GOP_RESHAPE) {
            int yo = nj->outputs[0];
            const tern_graph_value *ov = yo >= 0 ? &g->values[yo] : NULL;
            int t = -1;
            if (ov && ov->rank > 0 && r0 == x0) {
                int64_t pin = 1, pout = 1;
                for (int d = 0; d < sr; d++)
                    pin *= xr->dims[d];
                for (int d = 0; d < ov->rank && t < 0; d++) {
                    if (pout == pin) { /* the split axis starts output axis d: split into d.. or merged into d */
                        int64_t acc = 1;
                        int e = d;
                        while (e < ov->rank && acc < xr->dims[sr])
                            acc *= ov->dims[e++];
                        int64_t acc2 = 1;
                        int e2 = sr;
                        while (e2 < xr->rank && acc2 < ov->dims[d])
                            acc2 *= xr->dims[e2++];
                        /* each side covering at least one axis of the other: a leading axis of 1 (a micro-batch
                         * of one row) before the split axis starts nothing */
                        if ((acc == xr->dims[sr] && e > d) || (acc2 == ov->dims[d] && e2 > sr))
                            t = d;
                    }
                    pout *= ov->dims[d];
                }
            }
            int rho = root[r0];
            if (t >= 0 && ov && urep > 1 &&
                !(sr + 2 <= xr->rank && xr->dims[sr] * xr->dims[sr + 1] == ov->dims[t])) {
                snprintf(why, wl, "%s does not merge the %lld replicated key/value heads of %s and their repeat into "
                         "the query heads", lab, (long long)xr->dims[sr], la);
                ok = -1;
            } else if (t < 0 || !ov) {
                snprintf(why, wl, "%s reshapes the split axis of the pair from %s in a way the rule cannot follow", lab,
                         la);
                ok = 0;
            } else if (ov->dims[t] % tp && tp % ov->dims[t] == 0 && ov->rank > xr->rank && urep == 0 && rho >= 0 &&
                       ngroups == 1 && !leak[rho] && !rfix[rho] && rrep[rho] == 0 && tp / ov->dims[t] < 256) {
                /* tp exceeds the heads: each rank holds one, rep = tp / heads ranks share it (key/value heads; the
                 * repeat for the query heads must follow, or a reader refuses them above) */
                int R = (int)(tp / ov->dims[t]);
                rrep[rho] = R;
                rnode[rho] = j;
                rheads[rho] = ov->dims[t];
                for (int v = 0; v < g->n_values; v++)
                    if (root[v] == rho && rep[v] == 0)
                        rep[v] = (unsigned char)R;
                urep = R;
                heads = 1;
                fix[nfix].node = j;
                fix[nfix].n = ov->rank;
                for (int d = 0; d < ov->rank; d++)
                    fix[nfix].v[d] = d == t ? 1 : ov->dims[d];
                nfix++;
                out_sax = t;
            } else if (ov->dims[t] % tp && tp % ov->dims[t] == 0 && ov->rank > xr->rank) {
                snprintf(why, wl, "tp=%lld does not divide the %lld heads of %s (the attention after %s), and they "
                         "cannot be replicated over tp / heads ranks: %s",
                         (long long)tp, (long long)ov->dims[t], lab, la,
                         ngroups > 1 ? "they come from a fused projection's Split (replication needs separate key "
                                       "and value projections)"
                         : rho < 0 || (rho >= 0 && leak[rho]) ? "they are computed from more than one linear layer"
                                                              : "their columns were reshaped before");
                ok = -1;
            } else if (ov->dims[t] % tp) {
                snprintf(why, wl, "tp=%lld does not divide the %lld heads of %s (the attention after %s)%s",
                         (long long)tp, (long long)ov->dims[t], lab, la,
                         tp % ov->dims[t] && ov->rank > xr->rank
                             ? ", nor is it a multiple of them (key/value heads are replicated when tp is a multiple "
                               "of them, as NxD does; query heads must divide evenly)"
                             : "");
                ok = -1;
            } else {
                if (urep > 1)
                    urep = 1; /* the repeat merged into the query heads: H / tp a rank, as without replication */
                if (ov->rank > xr->rank)
                    heads = 1;
                fix[nfix].node = j;
                fix[nfix].n = ov->rank;
                for (int d = 0; d < ov->rank; d++)
                    fix[nfix].v[d] = d == t ? ov->dims[d] / tp : ov->dims[d];
                nfix++;
                out_sax = t;
            }
        } else if (nj->op_id == TERN_GOP_UNSQUEEZE && r0 == x0 && nj->n_outputs && nj->outputs[0] >= 0) {
            /* new axes of 1 (grouped-query attention's repeat of the K/V heads): the split axis moves past those
             * inserted before it */
            int64_t ax[TERN_GRAPH_MAX_RANK];
            int nu = nj->n_inputs > 1 ? const_ints(g, nj->inputs[1], ax, TERN_GRAPH_MAX_RANK) : -1;
            size_t nax = 0;
            const int64_t *aa = nu < 0 ? graph_attr_ints(nj, "axes", &nax) : NULL;
            if (nu < 0 && aa && nax <= TERN_GRAPH_MAX_RANK) {
                nu = (int)nax;
                memcpy(ax, aa, nax * sizeof *ax);
            }
            int orank = g->values[nj->outputs[0]].rank;
            if (nu >= 1 && orank == xr->rank + nu) {
                unsigned char ins[TERN_GRAPH_MAX_RANK] = {0};
                for (int q = 0; q < nu; q++) {
                    int d = norm_axis(ax[q], orank);
                    if (d >= 0 && d < orank)
                        ins[d] = 1;
                }
                for (int d = 0, e = 0; d < orank; d++)
                    if (!ins[d] && e++ == sr)
                        out_sax = d;
            }
        } else if (nj->op_id == TERN_GOP_EXPAND && r0 == x0 && nj->n_inputs == 2 && nj->n_outputs &&
                   nj->outputs[0] >= 0) {
            /* a broadcast along other axes (the repeat of the K/V heads); the target shape is rewritten for the
             * shard's split axis */
            int64_t shp[TERN_GRAPH_MAX_RANK];
            const tern_graph_value *ov = &g->values[nj->outputs[0]];
            int ns = const_ints(g, nj->inputs[1], shp, TERN_GRAPH_MAX_RANK);
            int t = sr + (ov->rank - xr->rank), u = sr + 1; /* u: the input's axis after the heads */
            if (urep > 1 && ns == ov->rank && ov->rank >= xr->rank && t >= 0 && ov->dims[t] == xr->dims[sr] &&
                u < xr->rank && xr->dims[u] == 1 && shp[t + 1] == ov->dims[t + 1]) {
                /* replicated key/value heads repeated for the query heads along the next axis: rank r holds the
                 * one head and its n / rep repeats, so that merged they are its H / tp query heads */
                if (ov->dims[t + 1] % urep) {
                    snprintf(why, wl, "tp=%lld does not divide the %lld query heads of %s (%lld key/value heads "
                             "repeated %lld times each, after %s)",
                             (long long)tp, (long long)(xr->dims[sr] * ov->dims[t + 1]), lab, (long long)xr->dims[sr],
                             (long long)ov->dims[t + 1], la);
                    ok = -1;
                } else {
                    fix[nfix].node = j;
                    fix[nfix].n = ns;
                    for (int d = 0; d < ns; d++)
                        fix[nfix].v[d] = d == t ? (shp[d] == 1 ? 1 : shp[d] * urep / tp)
                                         : d == t + 1 ? shp[d] / urep
                                                      : shp[d];
                    nfix++;
                    out_sax = t;
                    out_rax = 1;
                }
            } else if (urep <= 1 && ns == ov->rank && ov->rank >= xr->rank && t >= 0 && ov->dims[t] == xr->dims[sr] &&
                       nfix < g->n_nodes) {
                fix[nfix].node = j;
                fix[nfix].n = ns;
                for (int d = 0; d < ns; d++)
                    fix[nfix].v[d] = d == t && shp[d] != 1 ? shp[d] / tp : shp[d];
                nfix++;
                out_sax = t;
            }
        } else if (nj->op_id == TERN_GOP_SLICE && r0 == x0 && nj->n_inputs >= 4) {
            /* a slice along other axes (rotary embeddings' halves of the head size) */
            int64_t ax[TERN_GRAPH_MAX_RANK], st0[TERN_GRAPH_MAX_RANK], en0[TERN_GRAPH_MAX_RANK];
            int nax = const_ints(g, nj->inputs[3], ax, TERN_GRAPH_MAX_RANK);
            int good = nax >= 1 && const_ints(g, nj->inputs[1], st0, TERN_GRAPH_MAX_RANK) == nax &&
                       const_ints(g, nj->inputs[2], en0, TERN_GRAPH_MAX_RANK) == nax;
            for (int q = 0; good && q < nax; q++)
                good = norm_axis(ax[q], xr->rank) != sr;
            if (good)
                out_sax = sr;
        } else if (nj->op_id == TERN_GOP_CONCAT && nj->n_outputs && nj->outputs[0] >= 0) {
            /* values of the pair joined along another axis (rotary embeddings' rotate-half) */
            int good = norm_axis(tern_graph_attr_int(nj, "axis", 0), xr->rank) != sr;
            for (int q = 0; good && q < nj->n_inputs; q++) /* (the same replication: rmix refused above) */
                good = nj->inputs[q] >= 0 && sax[nj->inputs[q]] == sr && g->values[nj->inputs[q]].rank == xr->rank;
            if (good)
                out_sax = sr;
        } else if (nj->op_id == TERN_GOP_TRANSPOSE && r0 == x0) {
            size_t np = 0;
            const int64_t *perm = graph_attr_ints(nj, "perm", &np);
            for (int d = 0; d < (int)np; d++)
                if (perm[d] == sr)
                    out_sax = d;
            if (!perm || (int)np != xr->rank)
                out_sax = xr->rank - 1 - sr;
        } else if (nj->op_id == TERN_GOP_MATMUL && nj->n_inputs == 2 && nj->inputs[0] >= 0 && nj->inputs[1] >= 0 &&
                   sax[nj->inputs[0]] >= 0 && sax[nj->inputs[1]] >= 0 && sax[nj->inputs[0]] == sax[nj->inputs[1]] &&
                   sr < xr->rank - 2) {
            out_sax = sr; /* a product per head: the heads are a batch axis */
        } else if ((nj->op_id == TERN_GOP_SOFTMAX || nj->op_id == TERN_GOP_LOG_SOFTMAX) &&
                   norm_axis(tern_graph_attr_int(nj, "axis", -1), xr->rank) != sr) {
            out_sax = sr;
        }
        if (ok == 1 && out_sax < 0) {
            snprintf(why, wl, "%s (%s) reads what %s computes and is neither elementwise, a Split, Reshape or "
                     "Transpose of its split axis, a product per head, a softmax along another axis, nor a "
                     "row-parallel linear layer",
                     lab, nj->op, la);
            ok = 0;
        }
        if (ok != 1)
            break;
        in[j] = 1;
        if (nfix > nfix0 && oroot >= 0)
            rfix[oroot] = 1;
        for (int q = 0; q < nj->n_outputs; q++)
            if (nj->outputs[q] >= 0) {
                sax[nj->outputs[q]] = out_sax;
                pre[nj->outputs[q]] = (unsigned char)out_pre;
                root[nj->outputs[q]] = oroot;
                rep[nj->outputs[q]] = (unsigned char)urep;
                rax[nj->outputs[q]] = (unsigned char)out_rax;
            }
    }
    if (ok == 1 && b < 0) {
        snprintf(why, wl, "no row-parallel MatMul/Gemm reads what %s computes", la);
        ok = 0;
    }
    /* every linear layer's columns split tp / rep ways (rep: its heads replicated) */
    for (int c = 0; ok == 1 && c <= pair->nco; c++) {
        int64_t ways = tp / (rrep[c] > 1 ? rrep[c] : 1);
        if (rcols[c] % ways) {
            snprintf(why, wl, "tp=%lld does not divide the %lld columns of %s", (long long)tp, (long long)rcols[c],
                     tern_graph_node_label(g, c ? pair->co[c - 1] : i, lab, sizeof lab));
            ok = -1;
        }
    }
    if (ok == -1 && pair->nco) /* the layers beside a may belong elsewhere: the try of a alone says */
        ok = 0;
    for (int k3 = 0; ok == 1 && k3 < g->n_outputs; k3++)
        if (sax[g->outputs[k3]] >= 0) {
            snprintf(why, wl, "'%s', a value inside the pair from %s, is a model output", g->values[g->outputs[k3]].name,
                     la);
            ok = 0;
        }
    unsigned char *nrep = ok == 1 ? calloc((size_t)g->n_nodes + 1, 1) : NULL;
    if (ok == 1 && !nrep) {
        snprintf(why, wl, "out of memory");
        ok = 0;
    }
    for (int j = 0; nrep && j < g->n_nodes; j++) { /* a node's replication: its output's (pushed back) */
        int v = in[j] && g->nodes[j].n_outputs ? g->nodes[j].outputs[0] : -1;
        nrep[j] = (unsigned char)(v >= 0 && rep[v] > 1 ? rep[v] : 1);
    }
    free(sax), free(pre), free(root), free(rep), free(rax);
    if (ok != 1) {
        free(in), free(fix);
        return ok;
    }
    pair->nrep = nrep;
    pair->a = i;
    pair->b = b;
    pair->n = n;
    pair->in = in;
    pair->ngroups = ngroups;
    memcpy(pair->groups, groups, sizeof groups);
    pair->fix = fix;
    pair->nfix = nfix;
    pair->heads = heads;
    return 1;
}

static int is_co(const mp_pair *pr, int j)
{
    for (int c = 0; c < pr->nco; c++)
        if (pr->co[c] == j)
            return 1;
    return 0;
}

tern_status mp_find_pairs(tern_trainer *t, mp_plan *p, const unsigned char *isw, tern_error *err)
{
    tern_graph *g = p->g;
    unsigned char *taken = calloc((size_t)g->n_nodes + 1, 1);
    if (!taken)
        return train_oom(err);
    char why[768] = "", first[768] = "";
    tern_status st = TERN_OK;
    for (int i = 0; i < g->n_nodes && !st; i++) {
        if (taken[i] || !mp_is_linear(&g->nodes[i]))
            continue;
        mp_pair pr;
        int got = try_pair(g, isw, taken, i, p->tp, 1, &pr, why, sizeof why);
        if (got == 0) /* the linear layers beside it may belong elsewhere: the pair of a alone */
            got = try_pair(g, isw, taken, i, p->tp, 0, &pr, why, sizeof why);
        if (got < 0) {
            st = tern_error_set(err, TERN_ERR_INVALID, "train: tensor parallelism: %s", why);
            break;
        }
        if (!got) {
            if (!first[0])
                snprintf(first, sizeof first, "%s", why);
            continue;
        }
        char lab[256];
        if (pr.n % (p->tp / pr.nrep[pr.a])) {
            free(pr.in);
            free(pr.fix);
            free(pr.nrep);
            st = tern_error_set(err, TERN_ERR_INVALID,
                                "train: tensor parallelism: tp=%lld does not divide the %lld columns of %s "
                                "(the linear pair's hidden width)",
                                (long long)p->tp, (long long)pr.n, tern_graph_node_label(g, i, lab, sizeof lab));
            break;
        }
        mp_pair *np = realloc(p->pairs, sizeof *np * (size_t)(p->npairs + 1));
        if (!np) {
            free(pr.in);
            free(pr.fix);
            free(pr.nrep);
            st = train_oom(err);
            break;
        }
        p->pairs = np;
        p->pairs[p->npairs++] = pr;
        for (int j = 0; j < g->n_nodes; j++)
            taken[j] |= pr.in[j];
        /* the weights it splits */
        const tern_graph_node *na = &g->nodes[pr.a], *nb = &g->nodes[pr.b];
        int wa = -1, wb = -1, tba = 0, tbb = 0;
        int64_t k0, n0;
        mp_linear_kn(g, isw, na, &wa, &k0, &n0, &tba);
        mp_linear_kn(g, isw, nb, &wb, &k0, &n0, &tbb);
        st = mp_add_wspec(p, g->values[wa].name, tba ? 0 : 1, 0, &pr, pr.nrep[pr.a], 0, err);
        if (!st && na->op_id == TERN_GOP_GEMM && na->n_inputs > 2 && na->inputs[2] >= 0) {
            int c = na->inputs[2];
            if (!is_weight_val(g, c, isw) || g->values[c].rank != 1 || g->values[c].dims[0] != pr.n)
                st = tern_error_set(err, TERN_ERR_UNSUPPORTED,
                                    "train: tensor parallelism: %s's bias '%s' is not a trained vector of its %lld "
                                    "columns",
                                    tern_graph_node_label(g, pr.a, lab, sizeof lab), g->values[c].name,
                                    (long long)pr.n);
            else
                st = mp_add_wspec(p, g->values[c].name, 0, 0, &pr, pr.nrep[pr.a], 0, err);
        }
        for (int c = 0; c < pr.nco && !st; c++) {
            int wc = -1, tbcc = 0;
            mp_linear_kn(g, isw, &g->nodes[pr.co[c]], &wc, &k0, &n0, &tbcc);
            st = mp_add_wspec(p, g->values[wc].name, tbcc ? 0 : 1, 0, NULL, pr.nrep[pr.co[c]], 0, err);
        }
        for (int j = 0; j < g->n_nodes && !st; j++)
            if (pr.in[j] && j != pr.a && j != pr.b && !is_co(&pr, j))
                for (int q = 0; q < g->nodes[j].n_inputs && !st; q++) {
                    int v = g->nodes[j].inputs[q];
                    if (is_weight_val(g, v, isw))
                        st = mp_add_wspec(p, g->values[v].name, 0, 0, &pr, pr.nrep[j], 0, err);
                }
        if (!st)
            st = mp_add_wspec(p, g->values[wb].name, tbb ? 1 : 0, 0, NULL, 1, 0, err);
        if (!st && nb->op_id == TERN_GOP_GEMM && nb->n_inputs > 2 && nb->inputs[2] >= 0) {
            int c = nb->inputs[2];
            if (!is_weight_val(g, c, isw) && !is_scalar_const(g, c))
                st = tern_error_set(err, TERN_ERR_UNSUPPORTED,
                                    "train: tensor parallelism: %s's bias '%s' is neither a trained weight nor a "
                                    "scalar",
                                    tern_graph_node_label(g, pr.b, lab, sizeof lab), g->values[c].name);
            else if (is_weight_val(g, c, isw))
                st = mp_add_wspec(p, g->values[c].name, -1, 1, NULL, 1, 0, err);
        }
    }
    free(taken);
    (void)t;
    if (!st && p->npairs == 0)
        st = tern_error_set(err, TERN_ERR_UNSUPPORTED,
                            "train: tensor parallelism (tp=%lld): the model has no column/row-parallel linear pair "
                            "(MatMul/Gemm, elementwise nodes, MatMul/Gemm): %s",
                            (long long)p->tp, first[0] ? first : "it has no MatMul or Gemm");
    return st;
}
