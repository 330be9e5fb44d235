/* Elementwise fusion: chains of elementwise nodes of one shape (the backward's GELU and layer-norm gradients, the
 * loss's softmax gradient, the update's arithmetic) computed in one pass over SBUF tiles instead of one HBM round
 * trip per node. Node by node, each elementwise node loads its operands' tiles, runs one instruction (two for a
 * cube) and stores its output; fused, a group's tiles are loaded once, every member's instruction runs on the
 * tiles in node order, and only the values read outside the group (or graph outputs) are stored.
 *
 * Bits: every member runs the instruction its own lowering rule would (lower_elementwise.c's binary.alu,
 * unary.act, pow.const and cast.convert, lower_layout.c's expand.copy), with the same operands in the same order,
 * and writes its output into a tile of the dtype its value would be stored in. An engine reads a tile exactly as
 * the same bytes loaded from HBM, and an elementwise instruction's result does not depend on the tile shape, so
 * every element gets the same operations and roundings: the fused program computes the node-by-node program's
 * values bit for bit (tests/train/test_train_fused_elementwise.sh). Under stochastic rounding (bf16-sr) the draws
 * are keyed by each instruction's engine and sequence number: a different program draws differently there.
 *
 * The operands, as the node-by-node rules take them:
 *   - a value of the group's shape: a tile (a member's output, or loaded);
 *   - a compile-time scalar: tensor_scalar's immediate; a one-element run-time value (the update's learning
 *     rate, the clipping coefficient) and a scalar constant left of a Sub or Div: tensor_scalar's per-partition
 *     column read with a zero step; a [.., R, 1] value broadcast over the last axis: the per-row column;
 *   - a row over the last axis added to the group's shape (a bias): replicated on chip by tern_lib_broadcast_row
 *     once per column chunk, as tern_lib_bias_act does; any other row broadcast: a DMA with partition step 0 (the
 *     exact copy the general path makes in HBM);
 *   - an Expand of a [.., R, 1] value to the group's shape (a norm's statistic): a per-row column its readers take
 *     as tensor_scalar's scalar (x op s, or s op x with REV0 when the Expand is the left operand): the same fp32
 *     operation per element as tensor_tensor on the materialised copy.
 *
 * Grouping (cc_fuse_plan, before lowering): nodes in graph order; a node joins the group(s) that produce its
 * tile operands when the output shapes are equal and no value of the merged group is read by a node outside it
 * that comes before the group's last member (the group is emitted where its last member stands, so its external
 * inputs are ready and its outputs are stored before anyone else reads them). Groups of one node are lowered by
 * their rule as before. */
#include <stdlib.h>
#include <string.h>

#include "compiler/lower_tiles.h"
#include "graph/graph_internal.h"

enum { FZ_MAX_MEMBERS = 40, FZ_MAX_EXT = 20, FZ_CHUNK = 2048, FZ_SBUF_BUDGET = 96 * 1024, FZ_MAX_DISTANCE = 32 };

typedef enum {
    OP_TT,     /* tensor_tensor(op, a, b) on VectorE */
    OP_IMM,    /* tensor_scalar(op, imm) of a on VectorE */
    OP_COLS,   /* tensor_scalar_ap(a, op, column b), REV0 when rev */
    OP_ACT,    /* activation f(scale * a) on ScalarE */
    OP_RECIP,  /* reciprocal(a) on VectorE */
    OP_CUBE,   /* Pow 3: activation square of a, then tensor_tensor mult by a */
    OP_CAST,   /* tensor_copy of a into the output's dtype (the tile itself when the dtype is the same) */
    OP_EXPAND, /* a column value: the per-row column of its input */
} fz_kind;

typedef enum {
    SRC_NONE,
    SRC_MEMBER, /* member m's output tile */
    SRC_FULL,   /* an external value of the group's shape, loaded per tile */
    SRC_ROWB,   /* an external row over the last axis, broadcast by a partition-step-0 DMA per column chunk */
    SRC_BIAS,   /* an external row over the last axis, broadcast by tern_lib_broadcast_row per column chunk */
    SRC_SCOL,   /* an external one-element value as a [p, 1] fp32 column of step 0 */
    SRC_COL,    /* an external [.., R, 1] value as a [p, 1] fp32 column per row tile */
    SRC_COLVAL, /* an Expand member's column */
} fz_src;

typedef struct {
    fz_src src;
    int id; /* the value (external) or member index (SRC_MEMBER, SRC_COLVAL) */
} fz_opnd;

typedef struct {
    int node, out;
    fz_kind kind;
    tern_alu_op op;
    float imm, scale;
    tern_act_func f;
    int rev;
    fz_opnd a, b;
    int stored; /* read outside the group, or a graph output */
} fz_member;

typedef struct {
    int n, dead;
    int rank;
    int64_t dims[CC_MAX_RANK];
    fz_member m[FZ_MAX_MEMBERS];
} fz_group;

struct cc_fusion {
    int nn;
    int *group_of; /* per node: its group, -1 for none */
    int *reader_at, *readers; /* CSR: the nodes reading value v are readers[reader_at[v] .. reader_at[v + 1]) */
    fz_group *groups;
    int ngroups, capgroups;
    int fused_nodes, fused_groups;
};

/* ---- the graph facts a node's rule decides on ---- */

static const tern_graph_value *gval(const tern_graph *g, int v) { return tern_graph_value_at(g, v); }

static int is_const_value(const tern_graph_value *v)
{
    return v->constant && v->producer < 0 && !(v->flags & TERN_VALUE_INPUT);
}
static int is_const_scalar(const tern_graph_value *v) { return is_const_value(v) && v->constant->count == 1; }

static uint64_t numel_of(const tern_graph_value *v)
{
    uint64_t n = 1;
    for (int d = 0; d < v->rank; d++)
        n *= (uint64_t)v->dims[d];
    return n;
}

static int same_dims(const tern_graph_value *a, int rank, const int64_t *dims)
{
    if (a->rank != rank)
        return 0;
    for (int d = 0; d < rank; d++)
        if (a->dims[d] != dims[d])
            return 0;
    return 1;
}

/* lower_elementwise.c's trailing_col on graph values: col equals y up to some axis and is 1 from it on; inner
 * (the product of y's dims from that axis) must be y's last dim here, the columns of the group's [R, C] view. */
static int trailing_col_last(const tern_graph_value *full, const tern_graph_value *col, const tern_graph_value *y)
{
    if (!same_dims(full, y->rank, y->dims) || y->rank < 1 || col->rank > y->rank || numel_of(col) >= numel_of(y))
        return 0;
    uint64_t in;
    if (!cc_trailing_inner(y->rank, y->dims, col->rank, col->dims, &in))
        return 0;
    return in == (uint64_t)y->dims[y->rank - 1] && numel_of(y) / in == numel_of(col);
}

/* x broadcast to y along leading axes only: a row of y's last dim (tile_broadcast_to's zero-stride copy). */
static int row_of(const tern_graph_value *x, const tern_graph_value *y)
{
    if (x->rank < 1 || y->rank < 1 || x->rank > y->rank || x->dims[x->rank - 1] != y->dims[y->rank - 1])
        return 0;
    return numel_of(x) == (uint64_t)y->dims[y->rank - 1] && numel_of(x) < numel_of(y);
}

static tern_dtype store_dtype(const tern_graph_value *v)
{
    switch (v->type) {
    case TERN_ELEM_FLOAT16: return TERN_DTYPE_FP16;
    case TERN_ELEM_BFLOAT16: return TERN_DTYPE_BF16;
    default: return TERN_DTYPE_FP32;
    }
}

/* The first rule of op id is `name` of lower_elementwise.c (or lower_layout.c): the node-by-node lowering this
 * file reproduces. */
static int rule_is(tern_op_id id, const char *name)
{
    const cc_rule *rs[16];
    int n = cc_rules_for(id, rs, 16);
    return n > 0 && !strcmp(rs[0]->name, name);
}

static int act_func(const tern_graph_node *n, tern_act_func *f)
{
    switch ((tern_op_id)n->op_id) {
    case TERN_GOP_RELU: *f = TERN_ACT_RELU; return 1;
    case TERN_GOP_TANH: *f = TERN_ACT_TANH; return 1;
    case TERN_GOP_SIGMOID: *f = TERN_ACT_SIGMOID; return 1;
    case TERN_GOP_EXP: *f = TERN_ACT_EXP; return 1;
    case TERN_GOP_LOG: *f = TERN_ACT_LOG; return 1;
    case TERN_GOP_SQRT: *f = TERN_ACT_SQRT; return 1;
    case TERN_GOP_ERF: *f = TERN_ACT_ERF; return 1;
    case TERN_GOP_ABS: *f = TERN_ACT_ABS; return 1;
    case TERN_GOP_SOFTPLUS: *f = TERN_ACT_SOFTPLUS; return 1;
    case TERN_GOP_SIN: *f = TERN_ACT_SIN; return 1;
    case TERN_GOP_SIGN: *f = TERN_ACT_SIGN; return 1;
    case TERN_GOP_GELU:
        *f = !strcmp(tern_graph_attr_string(n, "approximate", "none"), "tanh") ? TERN_ACT_GELU_TANH : TERN_ACT_GELU;
        return 1;
    default: return 0;
    }
}

/* ---- planning ---- */

/* A tentative group: its nodes in graph order and the members they make. */
typedef struct {
    int n;
    int node[FZ_MAX_MEMBERS];
    fz_member m[FZ_MAX_MEMBERS];
} fz_list;

/* A tile operand: the output of an earlier node of the list (its column, for an Expand) or a loaded value. */
static fz_opnd tile_opnd(const tern_graph *g, const fz_list *L, int upto, int v)
{
    fz_opnd o = {SRC_FULL, v};
    int prod = gval(g, v)->producer;
    for (int j = 0; j < upto && prod >= 0; j++)
        if (L->node[j] == prod) {
            o.src = L->m[j].kind == OP_EXPAND ? SRC_COLVAL : SRC_MEMBER;
            o.id = j;
        }
    return o;
}

/* The member node i = L->node[at] makes, its operands resolved against L's earlier nodes; 0 when its rule is not
 * one reproduced here or an operand cannot be taken so (an Expand's column where a tile is needed). */
static int make_member(const tern_graph *g, const fz_list *L, int at, fz_member *m)
{
    const int i = L->node[at];
    const tern_graph_node *n = tern_graph_node_at(g, i);
    tern_op_id id = (tern_op_id)n->op_id;
    memset(m, 0, sizeof *m);
    m->node = i;
    if (n->n_outputs != 1 || n->outputs[0] < 0 || n->n_inputs < 1 || n->inputs[0] < 0)
        return 0;
    const tern_graph_value *y = gval(g, n->outputs[0]);
    m->out = n->outputs[0];
    if (!tern_elem_is_float(y->type) || y->rank < 1 || y->rank > CC_MAX_RANK || numel_of(y) == 0)
        return 0;
    /* the data operands are floats (an Expand's shape and a Pow's exponent are read as constants) */
    int ndata = id == TERN_GOP_EXPAND || id == TERN_GOP_POW ? 1 : n->n_inputs;
    for (int k = 0; k < n->n_inputs; k++)
        if (n->inputs[k] < 0 || (k < ndata && !tern_elem_is_float(gval(g, n->inputs[k])->type)) ||
            gval(g, n->inputs[k])->rank < 0)
            return 0;
    tern_act_func f = TERN_ACT_COPY;
    if (id == TERN_GOP_ADD || id == TERN_GOP_SUB || id == TERN_GOP_MUL || id == TERN_GOP_DIV) {
        if (n->n_inputs != 2 || !rule_is(id, "binary.alu"))
            return 0;
        tern_alu_op op = id == TERN_GOP_ADD ? TERN_ALU_ADD : id == TERN_GOP_SUB ? TERN_ALU_SUBTRACT
                         : id == TERN_GOP_MUL ? TERN_ALU_MULT : TERN_ALU_DIVIDE;
        int commutative = op == TERN_ALU_ADD || op == TERN_ALU_MULT;
        int va = n->inputs[0], vb = n->inputs[1];
        const tern_graph_value *a = gval(g, va), *b = gval(g, vb);
        if (is_const_value(a) && is_const_value(b))
            return 0;
        if (is_const_scalar(a) && commutative && !is_const_scalar(b)) { /* lower_binary's swap */
            int t = va;
            va = vb;
            vb = t;
            a = gval(g, va);
            b = gval(g, vb);
        }
        m->op = op;
        if (is_const_scalar(b) && same_dims(a, y->rank, y->dims)) {
            m->kind = OP_IMM;
            m->a = tile_opnd(g, L, at, va);
            m->imm = (float)tern_host_tensor_get(b->constant, 0);
        } else if (op == TERN_ALU_ADD && same_dims(a, y->rank, y->dims) && b->rank > 0 &&
                   numel_of(b) == (uint64_t)y->dims[y->rank - 1] && b->dims[b->rank - 1] == y->dims[y->rank - 1]) {
            /* x + bias row: tern_lib_bias_act; a whole [C] value (one row) is that row itself, loaded as it
             * is by the one-partition broadcast */
            m->kind = OP_TT;
            m->a = tile_opnd(g, L, at, va);
            m->b = numel_of(b) == numel_of(y) ? tile_opnd(g, L, at, vb) : (fz_opnd){SRC_BIAS, vb};
            if (m->b.src == SRC_COLVAL)
                return 0;
        } else if (numel_of(y) >= 2 && ((numel_of(b) == 1 && same_dims(a, y->rank, y->dims)) ||
                                        (numel_of(a) == 1 && same_dims(b, y->rank, y->dims)))) {
            int rev = numel_of(b) != 1; /* s op x: a per-partition column of step 0 */
            m->kind = OP_COLS;
            m->a = tile_opnd(g, L, at, rev ? vb : va);
            m->b = (fz_opnd){SRC_SCOL, rev ? va : vb};
            m->rev = rev && !commutative;
        } else if (trailing_col_last(a, b, y)) {
            m->kind = OP_COLS;
            m->a = tile_opnd(g, L, at, va);
            m->b = (fz_opnd){SRC_COL, vb};
        } else if (trailing_col_last(b, a, y)) {
            m->kind = OP_COLS;
            m->a = tile_opnd(g, L, at, vb);
            m->b = (fz_opnd){SRC_COL, va};
            m->rev = !commutative;
        } else {
            /* the general path: both operands at the output's shape (a broadcast row copied exactly), then
             * tensor_tensor; an Expand member's column on one side becomes tensor_scalar's column */
            int fa = same_dims(a, y->rank, y->dims), fb = same_dims(b, y->rank, y->dims);
            if ((!fa && !row_of(a, y)) || (!fb && !row_of(b, y)) || (!fa && !fb))
                return 0;
            m->kind = OP_TT;
            m->a = fa ? tile_opnd(g, L, at, va) : (fz_opnd){SRC_ROWB, va};
            m->b = fb ? tile_opnd(g, L, at, vb) : (fz_opnd){SRC_ROWB, vb};
            if (m->a.src == SRC_COLVAL && m->b.src == SRC_COLVAL)
                return 0;
            if (m->a.src == SRC_COLVAL || m->b.src == SRC_COLVAL) {
                int left = m->a.src == SRC_COLVAL;
                fz_opnd col = left ? m->a : m->b, t = left ? m->b : m->a;
                if (t.src == SRC_ROWB)
                    return 0;
                m->kind = OP_COLS;
                m->a = t;
                m->b = col;
                m->rev = left;
            }
            return 1;
        }
        /* the rules above read their tile operand as a tile: an Expand member's column cannot stand in */
        return m->a.src != SRC_COLVAL;
    }
    if (id == TERN_GOP_NEG || id == TERN_GOP_RECIPROCAL || act_func(n, &f)) {
        if (n->n_inputs != 1 || !rule_is(id, "unary.act"))
            return 0;
        m->a = tile_opnd(g, L, at, n->inputs[0]);
        if (id == TERN_GOP_NEG) { /* VectorE, exactly: -0 stays -0 */
            m->kind = OP_IMM;
            m->op = TERN_ALU_MULT;
            m->imm = -1.0f;
        } else if (id == TERN_GOP_RECIPROCAL) {
            m->kind = OP_RECIP;
        } else {
            m->kind = OP_ACT;
            m->f = f;
            m->scale = 1.0f;
        }
        return m->a.src != SRC_COLVAL;
    }
    if (id == TERN_GOP_POW) {
        if (n->n_inputs != 2 || !rule_is(id, "pow.const") || !is_const_scalar(gval(g, n->inputs[1])) ||
            y->type != TERN_ELEM_FLOAT)
            return 0;
        double p = tern_host_tensor_get(gval(g, n->inputs[1])->constant, 0);
        m->a = tile_opnd(g, L, at, n->inputs[0]);
        m->kind = OP_ACT;
        m->scale = 1.0f;
        if (p == 2.0)
            m->f = TERN_ACT_SQUARE;
        else if (p == 0.5)
            m->f = TERN_ACT_SQRT;
        else if (p == 1.0)
            m->f = TERN_ACT_COPY;
        else if (p == -1.0)
            m->f = TERN_ACT_RECIPROCAL;
        else if (p == 3.0)
            m->kind = OP_CUBE;
        else
            return 0;
        return m->a.src != SRC_COLVAL;
    }
    if (id == TERN_GOP_CAST) {
        if (n->n_inputs != 1 || !rule_is(id, "cast.convert"))
            return 0;
        m->kind = OP_CAST;
        m->a = tile_opnd(g, L, at, n->inputs[0]);
        return m->a.src != SRC_COLVAL;
    }
    if (id == TERN_GOP_EXPAND) { /* of a [.., R, 1] value (a column per row) or of one element (step 0) */
        const tern_graph_value *a = gval(g, n->inputs[0]);
        int one = numel_of(a) == 1 && numel_of(y) >= 2;
        if (!rule_is(id, "expand.copy") || a->type != y->type || (!one && !trailing_col_last(y, a, y)))
            return 0;
        m->kind = OP_EXPAND;
        m->a = (fz_opnd){one ? SRC_SCOL : SRC_COL, n->inputs[0]};
        return 1;
    }
    return 0;
}

static int is_ext(const fz_opnd *o) { return o->src != SRC_NONE && o->src != SRC_MEMBER && o->src != SRC_COLVAL; }

/* Resolves every node of L (sorted) into its member; 0 when one cannot be, when a value of L is read outside L by
 * a node before L's last (the group is emitted at its last node), or past the size limits. */
/* Whether the group, emitted at `last`, would hold value v live well past its own last reader (a forward value
 * read by a chain that ends in the backward, a recomputed segment's): the group reads its inputs where it is
 * emitted. Graph inputs and constants live anyway. */
static int extends_life(const struct cc_fusion *p, const tern_graph *g, int v, int last)
{
    const tern_graph_value *x = gval(g, v);
    if (x->producer < 0 || (x->flags & TERN_VALUE_OUTPUT))
        return 0;
    int end = -1;
    for (int r = p->reader_at[v]; r < p->reader_at[v + 1]; r++)
        if (p->readers[r] > end)
            end = p->readers[r];
    return end < last - FZ_MAX_DISTANCE;
}

static int resolve(const struct cc_fusion *p, const tern_graph *g, fz_list *L)
{
    int last = L->node[L->n - 1], ext = 0;
    for (int k = 0; k < L->n; k++) {
        if (!make_member(g, L, k, &L->m[k]))
            return 0;
        ext += is_ext(&L->m[k].a) + is_ext(&L->m[k].b);
        /* the group reads its inputs where it is emitted (its last node): an input it would hold live well past
         * its own last reader outside the group (a forward chain continued in the backward, a recomputed segment)
         * keeps the group apart. In-group values never reach HBM, so how far back a member's in-group operand was
         * computed holds nothing live by itself (the optimizer update's chains span the norms between them) */
        const fz_opnd *ops[2] = {&L->m[k].a, &L->m[k].b};
        for (int o = 0; o < 2; o++)
            if (is_ext(ops[o]) && extends_life(p, g, ops[o]->id, last))
                return 0;
        int v = L->m[k].out;
        for (int r = p->reader_at[v]; r < p->reader_at[v + 1]; r++) {
            int rd = p->readers[r], in = 0;
            for (int j = 0; j < L->n && !in; j++)
                in = L->node[j] == rd;
            if (!in && rd < last)
                return 0;
        }
    }
    return ext <= FZ_MAX_EXT;
}

static int new_group(struct cc_fusion *p)
{
    if (p->ngroups == p->capgroups) {
        int cap = p->capgroups ? 2 * p->capgroups : 64;
        fz_group *ng = realloc(p->groups, sizeof *ng * (size_t)cap);
        if (!ng)
            return -1;
        p->groups = ng;
        p->capgroups = cap;
    }
    fz_group *G = &p->groups[p->ngroups];
    memset(G, 0, sizeof *G);
    return p->ngroups++;
}

/* L: the nodes of groups sets[0..ns) and node i, in graph order (each group is in order: a merge of them). */
static int gather(const struct cc_fusion *p, const int *sets, int ns, int i, fz_list *L)
{
    int pos[4] = {0}, total = 1;
    for (int s = 0; s < ns; s++)
        total += p->groups[sets[s]].n;
    if (total > FZ_MAX_MEMBERS)
        return 0;
    L->n = 0;
    for (;;) {
        int best = -1;
        for (int s = 0; s < ns; s++)
            if (pos[s] < p->groups[sets[s]].n &&
                (best < 0 || p->groups[sets[s]].m[pos[s]].node < p->groups[sets[best]].m[pos[best]].node))
                best = s;
        if (best < 0)
            break;
        L->node[L->n++] = p->groups[sets[best]].m[pos[best]++].node;
    }
    L->node[L->n++] = i;
    return 1;
}

void cc_fuse_free(compile_ctx *c)
{
    struct cc_fusion *p = c->fuse;
    if (!p)
        return;
    free(p->group_of);
    free(p->reader_at);
    free(p->readers);
    free(p->groups);
    free(p);
    c->fuse = NULL;
}

void cc_fuse_plan(compile_ctx *c)
{
    if (c->o->no_elementwise_fusion)
        return;
    const tern_graph *g = c->g;
    int nn = tern_graph_node_count(g), nv = tern_graph_value_count(g);
    struct cc_fusion *p = calloc(1, sizeof *p);
    if (!p)
        return; /* an optimisation only */
    c->fuse = p;
    p->nn = nn;
    p->group_of = malloc(sizeof(int) * (size_t)(nn + 1));
    p->reader_at = calloc((size_t)nv + 2, sizeof(int));
    size_t nr = 0;
    for (int i = 0; i < nn; i++)
        nr += (size_t)tern_graph_node_at(g, i)->n_inputs;
    p->readers = malloc(sizeof(int) * (nr + 1));
    int *fill = calloc((size_t)nv + 1, sizeof(int));
    fz_list *L = malloc(sizeof *L);
    if (!p->group_of || !p->reader_at || !p->readers || !fill || !L)
        goto fail;
    for (int i = 0; i < nn; i++) {
        p->group_of[i] = -1;
        const tern_graph_node *n = tern_graph_node_at(g, i);
        for (int k = 0; k < n->n_inputs; k++)
            if (n->inputs[k] >= 0)
                p->reader_at[n->inputs[k] + 1]++;
    }
    for (int v = 0; v < nv; v++)
        p->reader_at[v + 1] += p->reader_at[v];
    for (int i = 0; i < nn; i++) {
        const tern_graph_node *n = tern_graph_node_at(g, i);
        for (int k = 0; k < n->n_inputs; k++) {
            int v = n->inputs[k];
            if (v >= 0)
                p->readers[p->reader_at[v] + fill[v]++] = i; /* a node reading v twice is listed twice */
        }
    }
    for (int i = 0; i < nn; i++) {
        L->n = 1;
        L->node[0] = i;
        fz_member alone;
        /* an Add of a sum of products, an Add or Relu its Conv applies: taken there */
        if (cc_msum_member(c, i) || cc_conv_epi_member(c, i) || !make_member(g, L, 0, &alone))
            continue;
        const tern_graph_value *y = gval(g, alone.out);
        /* the live groups producing its inputs, with its output's shape */
        const tern_graph_node *n = tern_graph_node_at(g, i);
        int cand[4], nc = 0;
        for (int k = 0; k < n->n_inputs && nc < 4; k++) {
            int prod = gval(g, n->inputs[k])->producer;
            int gr = prod >= 0 ? p->group_of[prod] : -1;
            if (gr < 0 || !same_dims(y, p->groups[gr].rank, p->groups[gr].dims))
                continue;
            int dup = 0;
            for (int j = 0; j < nc; j++)
                dup |= cand[j] == gr;
            if (!dup)
                cand[nc++] = gr;
        }
        /* all of them together, then each alone, then a group of its own */
        int sets[4], ns = -1;
        for (int attempt = nc < 2 ? 1 : 0; attempt <= nc && ns < 0; attempt++) {
            int s[4], m = 0;
            if (attempt == 0)
                for (int j = 0; j < nc; j++)
                    s[m++] = cand[j];
            else
                s[m++] = cand[attempt - 1];
            if (gather(p, s, m, i, L) && resolve(p, g, L)) {
                memcpy(sets, s, sizeof s);
                ns = m;
            }
        }
        int into;
        if (ns > 0) {
            gather(p, sets, ns, i, L);
            resolve(p, g, L);
            into = sets[0];
            for (int s = 1; s < ns; s++) { /* the others are emptied (their nodes now belong to `into`) */
                p->groups[sets[s]].n = 0;
                p->groups[sets[s]].dead = 1;
            }
        } else {
            L->n = 1;
            L->node[0] = i;
            L->m[0] = alone;
            if ((into = new_group(p)) < 0)
                goto fail;
            p->groups[into].rank = y->rank;
            memcpy(p->groups[into].dims, y->dims, sizeof(int64_t) * (size_t)y->rank);
        }
        fz_group *G = &p->groups[into];
        G->n = L->n;
        memcpy(G->m, L->m, sizeof(fz_member) * (size_t)L->n);
        for (int k = 0; k < G->n; k++)
            p->group_of[G->m[k].node] = into;
    }
    /* groups of one node lower by their own rule; the others' external inputs stay live until their emission */
    for (int gr = 0; gr < p->ngroups; gr++) {
        fz_group *G = &p->groups[gr];
        if (G->dead)
            continue;
        if (G->n < 2) {
            for (int k = 0; k < G->n; k++)
                p->group_of[G->m[k].node] = -1;
            G->dead = 1;
            continue;
        }
        int last = G->m[G->n - 1].node;
        p->fused_nodes += G->n;
        p->fused_groups++;
        for (int k = 0; k < G->n; k++) {
            fz_member *m = &G->m[k];
            const tern_graph_value *yv = gval(g, m->out);
            m->stored = (yv->flags & TERN_VALUE_OUTPUT) != 0;
            for (int r = p->reader_at[m->out]; r < p->reader_at[m->out + 1]; r++)
                if (p->group_of[p->readers[r]] != gr)
                    m->stored = 1;
            fz_opnd *ops[2] = {&m->a, &m->b};
            for (int o = 0; o < 2; o++)
                if (is_ext(ops[o]) && c->v[ops[o]->id].last_use < last)
                    c->v[ops[o]->id].last_use = last;
        }
    }
    free(fill);
    free(L);
    return;
fail:
    free(fill);
    free(L);
    cc_fuse_free(c);
}

/* ---- emission ---- */

typedef struct {
    fz_src src;
    int id;
    cc_value *x;
    tern_view view; /* [R, C], [R, 1] or the row [1, C] */
    tern_view cur, nxt; /* per tile (FULL, SCOL, COL) or per chunk (ROWB, BIAS) */
} fz_ext;

typedef struct {
    uint64_t r0, rp, c0, cw;
} fz_tile;

static int ext_slot(fz_ext *e, int *ne, fz_src src, int id)
{
    for (int k = 0; k < *ne; k++)
        if (e[k].src == src && e[k].id == id)
            return k;
    e[*ne].src = src;
    e[*ne].id = id;
    return (*ne)++;
}

static tern_view load_col(compile_ctx *c, tern_view col, const fz_tile *t)
{
    tern_view src = tern_view_block(c->k, col, t->r0, t->r0 + t->rp, 0, 1);
    tern_view d = tern_kernel_sbuf(c->k, TERN_DTYPE_FP32, (uint32_t)t->rp, 1, "fz_col");
    if (col.ap.dtype == TERN_DTYPE_FP32) {
        tern_kernel_load(c->k, d, src);
    } else { /* widened on chip, as ew_load does */
        tern_view raw = tern_kernel_sbuf(c->k, (tern_dtype)col.ap.dtype, (uint32_t)t->rp, 1, "fz_col_raw");
        tern_kernel_load(c->k, raw, src);
        tern_kernel_tensor_copy(c->k, VE, d, raw);
        tern_kernel_release(c->k, raw);
    }
    return d;
}

/* The per-tile loads of tile t into each slot's `nxt`. */
static void load_tile(compile_ctx *c, fz_ext *e, int ne, const fz_tile *t)
{
    for (int k = 0; k < ne && cc_ok(c); k++) {
        if (e[k].src == SRC_FULL) {
            e[k].nxt = tern_kernel_sbuf(c->k, e[k].x->dt, (uint32_t)t->rp, (uint32_t)t->cw, "fz_in");
            tern_kernel_load(c->k, e[k].nxt, tern_view_block(c->k, e[k].view, t->r0, t->r0 + t->rp, t->c0, t->c0 + t->cw));
        } else if (e[k].src == SRC_SCOL || e[k].src == SRC_COL) {
            e[k].nxt = load_col(c, e[k].view, t);
        }
    }
}

/* The row tiles of column chunk [c0, c0 + cw) on pb partitions. */
static void load_rows(compile_ctx *c, fz_ext *e, int ne, uint64_t c0, uint64_t cw, uint32_t pb)
{
    for (int k = 0; k < ne && cc_ok(c); k++) {
        if (e[k].src == SRC_BIAS) { /* tern_lib_bias_act's bias tile */
            e[k].cur = tern_kernel_sbuf(c->k, TERN_DTYPE_FP32, pb, (uint32_t)cw, "fz_bias");
            tern_lib_broadcast_row(c->k, e[k].cur, tern_view_block(c->k, e[k].view, 0, 1, c0, c0 + cw));
        } else if (e[k].src == SRC_ROWB) { /* every partition reads the same row: an exact copy */
            uint32_t w = (uint32_t)cw;
            int32_t one = 1;
            e[k].cur = tern_kernel_sbuf(c->k, e[k].x->dt, pb, w, "fz_row");
            tern_kernel_load(c->k, e[k].cur, cc_view(c, e[k].x, c0, pb, 0, 1, &w, &one));
        }
    }
}

static void release_rows(compile_ctx *c, fz_ext *e, int ne)
{
    for (int k = 0; k < ne; k++)
        if (e[k].src == SRC_BIAS || e[k].src == SRC_ROWB)
            tern_kernel_release(c->k, e[k].cur);
}

/* The view of operand o for the current tile: a member's tile or column, a loaded tile or column, or the chunk's
 * row tile cut to the tile's rows. */
static tern_view opnd_view(compile_ctx *c, const fz_opnd *o, int slot, const tern_view *tiles, const fz_ext *e,
                           uint64_t rp)
{
    switch (o->src) {
    case SRC_NONE: break;
    case SRC_MEMBER:
    case SRC_COLVAL: return tiles[o->id]; /* an Expand member's "tile" is its column */
    case SRC_FULL:
    case SRC_SCOL:
    case SRC_COL: return e[slot].cur;
    case SRC_BIAS:
    case SRC_ROWB: return tern_view_slice(c->k, e[slot].cur, 0, 0, rp, 1);
    }
    return tern_view_none();
}

static void emit_group(compile_ctx *c, fz_group *G)
{
    const int saved = c->node;
    cc_value *outv[FZ_MAX_MEMBERS] = {0};
    tern_dtype odt[FZ_MAX_MEMBERS];
    /* the stored outputs' tensors, each placed as its node's output */
    for (int k = 0; k < G->n && cc_ok(c); k++) {
        fz_member *m = &G->m[k];
        c->node = m->node;
        if (m->kind == OP_EXPAND)
            odt[k] = c->v[m->a.id].dt;
        else if (m->kind == OP_CUBE || (m->kind == OP_ACT && tern_graph_node_at(c->g, m->node)->op_id == TERN_GOP_POW))
            odt[k] = TERN_DTYPE_FP32; /* lower_pow's output */
        else
            odt[k] = store_dtype(gval(c->g, m->out));
        if (m->stored)
            outv[k] = cc_out(c, 0, odt[k]);
    }
    c->node = saved;
    if (!cc_ok(c))
        return;
    /* the group's view: [R, C] rows by the last axis when an operand is per row or per column, else every
     * partition busy */
    uint64_t N = 1;
    for (int d = 0; d < G->rank; d++)
        N *= (uint64_t)G->dims[d];
    uint64_t C = (uint64_t)G->dims[G->rank - 1], R = N / C;
    int rowwise = 0;
    fz_ext e[2 * FZ_MAX_MEMBERS];
    int ne = 0;
    int slot_a[FZ_MAX_MEMBERS], slot_b[FZ_MAX_MEMBERS];
    for (int k = 0; k < G->n; k++) {
        fz_member *m = &G->m[k];
        slot_a[k] = slot_b[k] = -1;
        if (m->a.src != SRC_MEMBER && m->a.src != SRC_COLVAL)
            slot_a[k] = ext_slot(e, &ne, m->a.src, m->a.id);
        if (m->b.src != SRC_NONE && m->b.src != SRC_MEMBER && m->b.src != SRC_COLVAL)
            slot_b[k] = ext_slot(e, &ne, m->b.src, m->b.id);
        rowwise |= m->a.src == SRC_COL || m->b.src == SRC_COL || m->b.src == SRC_BIAS || m->a.src == SRC_ROWB ||
                   m->b.src == SRC_ROWB || m->b.src == SRC_COLVAL || m->kind == OP_EXPAND;
    }
    if (!rowwise && R < PARTS && N % PARTS == 0) {
        R = PARTS;
        C = N / PARTS;
    }
    for (int k = 0; k < ne; k++) {
        cc_value *x = &c->v[e[k].id];
        e[k].x = x;
        if (!x->placed) {
            cc_fail(c, TERN_ERR_INVALID, "fused elementwise group: input '%s' has no device placement",
                    gval(c->g, e[k].id)->name);
            return;
        }
        switch (e[k].src) {
        case SRC_FULL: e[k].view = cc_view2d(c, x, 0, R, C, C); break;
        case SRC_SCOL: e[k].view = cc_view2d(c, x, 0, R, 1, 0); break;
        case SRC_COL: e[k].view = cc_view2d(c, x, 0, R, 1, 1); break;
        case SRC_BIAS: e[k].view = cc_view2d(c, x, 0, 1, C, C); break;
        case SRC_ROWB: (void)cc_view2d(c, x, 0, 1, C, C); break; /* the device copy of a constant row */
        default: break;
        }
    }
    /* Two members in one instruction: a member whose fp32 output only one later member reads, as that member's
     * tile operand, runs as the first op of that member's instruction (tensor_scalar's op0 before op1, or
     * scalar_tensor_tensor's scalar op before its tensor op): the instruction computes the first op in fp32 and
     * applies the second to that fp32 value, exactly what the two instructions did through the fp32 tile between
     * them; VectorE makes one pass instead of two. pre[j] = k: member k runs inside member j. */
    int pre[FZ_MAX_MEMBERS], inside[FZ_MAX_MEMBERS];
    for (int k = 0; k < G->n; k++)
        pre[k] = inside[k] = -1;
    for (int k = 0; k < G->n; k++) {
        fz_member *m = &G->m[k];
        if (m->stored || odt[k] != TERN_DTYPE_FP32 || (m->kind != OP_IMM && m->kind != OP_COLS) || pre[k] >= 0)
            continue;
        int refs = 0, j = -1;
        for (int q = k + 1; q < G->n; q++) {
            const fz_opnd *ops[2] = {&G->m[q].a, &G->m[q].b};
            for (int o = 0; o < 2; o++)
                if ((ops[o]->src == SRC_MEMBER || ops[o]->src == SRC_COLVAL) && ops[o]->id == k) {
                    refs++;
                    j = q;
                }
        }
        if (refs != 1 || G->m[j].a.src != SRC_MEMBER || G->m[j].a.id != k || pre[j] >= 0 || inside[j] >= 0)
            continue;
        fz_kind kj = G->m[j].kind;
        /* scalar_tensor_tensor has no REV0: a reversed column op (s op x) stays on its own before a tensor op */
        if (kj == OP_IMM || kj == OP_COLS || (kj == OP_TT && !(m->kind == OP_COLS && m->rev))) {
            pre[j] = k;
            inside[k] = j;
        }
    }
    /* column chunk width: every member's tile, two of each loaded tile (the next tile's loads are issued before
     * this tile computes) and the row tiles within the budget */
    uint64_t per_col = 0;
    for (int k = 0; k < G->n; k++)
        if (G->m[k].kind != OP_EXPAND)
            per_col += tern_dtype_size(odt[k]);
    for (int k = 0; k < ne; k++)
        if (e[k].src == SRC_FULL)
            per_col += 2 * tern_dtype_size(e[k].x->dt);
        else if (e[k].src == SRC_BIAS || e[k].src == SRC_ROWB)
            per_col += 4;
    uint64_t budget = c->cfg.sbuf_partition_bytes / 2 < FZ_SBUF_BUDGET ? c->cfg.sbuf_partition_bytes / 2
                                                                      : FZ_SBUF_BUDGET;
    uint64_t cwmax = per_col ? budget / per_col : FZ_CHUNK;
    if (cwmax > FZ_CHUNK)
        cwmax = FZ_CHUNK;
    if (cwmax < 1)
        cwmax = 1;
    const uint64_t P = PARTS, PB = R < P ? R : P;
    uint64_t nchunks = (C + cwmax - 1) / cwmax, nrows = (R + P - 1) / P, ntiles = nchunks * nrows;
    tern_view tiles[FZ_MAX_MEMBERS];
    int owns[FZ_MAX_MEMBERS] = {0};
    fz_tile cur = {0, PB, 0, C < cwmax ? C : cwmax};
    load_rows(c, e, ne, cur.c0, cur.cw, (uint32_t)PB);
    load_tile(c, e, ne, &cur);
    for (uint64_t t = 0; t < ntiles && cc_ok(c); t++) {
        for (int k = 0; k < ne; k++)
            if (e[k].src == SRC_FULL || e[k].src == SRC_SCOL || e[k].src == SRC_COL)
                e[k].cur = e[k].nxt;
        fz_tile nxt = cur;
        int more = t + 1 < ntiles, new_chunk = 0;
        if (more) {
            uint64_t ch = (t + 1) / nrows, rw = (t + 1) % nrows;
            nxt.c0 = ch * cwmax;
            nxt.cw = C - nxt.c0 < cwmax ? C - nxt.c0 : cwmax;
            nxt.r0 = rw * P;
            nxt.rp = R - nxt.r0 < P ? R - nxt.r0 : P;
            new_chunk = rw == 0;
            load_tile(c, e, ne, &nxt);
        }
        for (int k = 0; k < G->n && cc_ok(c); k++) {
            fz_member *m = &G->m[k];
            owns[k] = 0;
            if (inside[k] >= 0)
                continue; /* runs as the first op of member inside[k]'s instruction */
            tern_view A = opnd_view(c, &m->a, slot_a[k], tiles, e, cur.rp);
            tern_view Bv = opnd_view(c, &m->b, slot_b[k], tiles, e, cur.rp);
            if (pre[k] >= 0) { /* member p's op, then this member's, in one instruction */
                const fz_member *pm = &G->m[pre[k]];
                tern_view PA = opnd_view(c, &pm->a, slot_a[pre[k]], tiles, e, cur.rp);
                tern_view PS = opnd_view(c, &pm->b, slot_b[pre[k]], tiles, e, cur.rp);
                tiles[k] = tern_kernel_sbuf(c->k, odt[k], (uint32_t)cur.rp, (uint32_t)cur.cw, "fz_out");
                owns[k] = 1;
                tern_view Y = tiles[k], none = tern_view_none();
                int pcol = pm->kind == OP_COLS;
                if (m->kind == OP_TT) {
                    tern_kernel_scalar_tensor_tensor_ap(c->k, Y, PA, pm->op, pcol ? PS : none, pm->imm, m->op, Bv);
                } else {
                    int col = m->kind == OP_COLS;
                    tern_kernel_tensor_scalar_ap(c->k, VE, Y, PA, pm->op, pcol ? PS : none, pm->imm, m->op,
                                                 col ? Bv : none, m->imm,
                                                 (pcol && pm->rev ? TERN_FLAG_REV0 : 0u) |
                                                     (col && m->rev ? TERN_FLAG_REV1 : 0u));
                }
                if (m->stored)
                    tern_kernel_store(c->k, cc_view2d(c, outv[k], cur.r0 * C + cur.c0, (uint32_t)cur.rp, cur.cw, C),
                                      Y);
                continue;
            }
            if (m->kind == OP_EXPAND) {
                tiles[k] = A; /* its input's column tile */
                if (m->stored) { /* materialised as expand.copy does: the column over the tile, exactly */
                    tern_view col = A, o = tern_kernel_sbuf(c->k, odt[k], (uint32_t)cur.rp, (uint32_t)cur.cw, "fz_exp");
                    col.ap.dims[0].step = 0;
                    col.ap.dims[0].num = (uint32_t)cur.cw;
                    tern_kernel_tensor_copy(c->k, VE, o, col);
                    tern_kernel_store(c->k, cc_view2d(c, outv[k], cur.r0 * C + cur.c0, (uint32_t)cur.rp, cur.cw, C), o);
                    tern_kernel_release(c->k, o);
                }
                continue;
            }
            if (m->kind == OP_CAST && (tern_dtype)A.ap.dtype == odt[k]) {
                tiles[k] = A; /* the same dtype: the value itself */
            } else {
                tiles[k] = tern_kernel_sbuf(c->k, odt[k], (uint32_t)cur.rp, (uint32_t)cur.cw, "fz_out");
                owns[k] = 1;
                tern_view Y = tiles[k];
                switch (m->kind) {
                case OP_TT: tern_kernel_tensor_tensor(c->k, VE, Y, A, Bv, m->op); break;
                case OP_IMM: tern_kernel_tensor_scalar(c->k, VE, Y, A, m->op, m->imm, TERN_ALU_BYPASS, 0.0f); break;
                case OP_COLS:
                    tern_kernel_tensor_scalar_ap(c->k, VE, Y, A, m->op, Bv, 0.0f, TERN_ALU_BYPASS, tern_view_none(),
                                                 0.0f, m->rev ? TERN_FLAG_REV0 : 0u);
                    break;
                case OP_ACT:
                    tern_kernel_activation(c->k, Y, A, m->f, m->scale, tern_view_none(), tern_view_none(),
                                           tern_view_none());
                    break;
                case OP_RECIP: tern_kernel_reciprocal(c->k, Y, A); break;
                case OP_CUBE:
                    tern_kernel_activation(c->k, Y, A, TERN_ACT_SQUARE, 1.0f, tern_view_none(), tern_view_none(),
                                           tern_view_none());
                    tern_kernel_tensor_tensor(c->k, VE, Y, Y, A, TERN_ALU_MULT);
                    break;
                case OP_CAST: tern_kernel_tensor_copy(c->k, VE, Y, A); break;
                case OP_EXPAND: break;
                }
            }
            if (m->stored)
                tern_kernel_store(c->k, cc_view2d(c, outv[k], cur.r0 * C + cur.c0, (uint32_t)cur.rp, cur.cw, C),
                                  tiles[k]);
        }
        /* this tile's SBUF: the members' own tiles and its loads */
        for (int k = 0; k < G->n; k++)
            if (owns[k])
                tern_kernel_release(c->k, tiles[k]);
        for (int k = 0; k < ne; k++)
            if (e[k].src == SRC_FULL || e[k].src == SRC_SCOL || e[k].src == SRC_COL)
                tern_kernel_release(c->k, e[k].cur);
        if (more && new_chunk) {
            release_rows(c, e, ne);
            load_rows(c, e, ne, nxt.c0, nxt.cw, (uint32_t)PB);
        }
        cur = nxt;
    }
    release_rows(c, e, ne);
}

int cc_fuse_node(compile_ctx *c, int i, const char **rule)
{
    struct cc_fusion *p = c->fuse;
    if (!p || i >= p->nn || p->group_of[i] < 0)
        return 0;
    fz_group *G = &p->groups[p->group_of[i]];
    *rule = "fuse.elementwise";
    if (G->m[G->n - 1].node == i)
        emit_group(c, G);
    return 1;
}

void cc_fuse_counts(const compile_ctx *c, int *nodes, int *groups)
{
    *nodes = c->fuse ? c->fuse->fused_nodes : 0;
    *groups = c->fuse ? c->fuse->fused_groups : 0;
}

int cc_fuse_emitted_at(const compile_ctx *c, int i)
{
    if (!c->fuse || i < 0 || i >= c->fuse->nn || c->fuse->group_of[i] < 0)
        return -1;
    const fz_group *G = &c->fuse->groups[c->fuse->group_of[i]];
    return G->m[G->n - 1].node;
}

int cc_fuse_member(const compile_ctx *c, int i)
{
    return c->fuse && i < c->fuse->nn && c->fuse->group_of[i] >= 0;
}
