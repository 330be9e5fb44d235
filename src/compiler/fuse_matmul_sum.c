/* Sums of linear-layer products computed on chip. A backward graph adds the input gradients of the linear layers
 * that read one input: dX = dQ Wq^T + dK Wk^T + dV Wv^T, dX = dGate Wg^T + dUp Wu^T. Node by node, each product
 * (a MatMul with a run-time weight) is written to HBM in fp32 ([rows, width]: 64 MB per product for an 8B
 * model's 4,096 rows at TP=32) and the Adds read them back and write partial sums. Here a tree of Adds over such
 * products is one tern_lib_gemm_sum at the root Add: per output tile the products sit in PSUM, the additions run
 * on them there and in SBUF, and only the root's value is stored.
 *
 * Bits: each term is the product its own MatMul would make (matmul2d in lower_linear.c: its input transposed
 * as tern_lib_transpose does, on chip or through HBM by matmul2d's rule, its weight in the matmul dtype, tern_lib_gemm's tiles with K in one block, so its
 * fp32 output is psum + 0), each Add is the fp32 addition binary.alu (or an elementwise group) would make, rounded
 * to the dtype its value would be stored in (tern_lib_gemm_sum's comment gives why reading a term from PSUM
 * gives the same sums). tests/compiler/test_matmul_sum.sh compares byte for byte against the same graphs with the
 * products made node by node.
 *
 * What is taken (cc_msum_plan, before lowering and before the elementwise grouping, which then leaves these Adds
 * alone): an Add of two values of its own 2-D shape whose first rule is binary.alu; each operand either a product
 * or another such Add read only by this one. A product: a MatMul of a 2-D input [M, K] (not constant, not a
 * Transpose's output, which may fold into its readers, and read by no other MatMul as input 0: those group or
 * share their transposed input, lower_linear.c) and a run-time 2-D weight [K, N], K within one GEMM K block,
 * read only by the Add and not a graph output. The products' inputs are kept live until the root. */
#include <stdlib.h>
#include <string.h>

#include "compiler/lower_tiles.h"
#include "graph/graph_internal.h"

enum { MS_MAX_TERMS = 8, MS_MAX_DISTANCE = 64, MS_TILES_K = 8 /* matmul2d's gemm: tern_gemm_opts' default */ };

typedef struct {
    int root;                               /* the root Add */
    int nterms, nadds;
    int term[MS_MAX_TERMS];                 /* the MatMul node of each term */
    int add[MS_MAX_TERMS];                  /* the Add nodes, operands before their readers; the last is the root */
    tern_gemm_sum_node tree[MS_MAX_TERMS];  /* the additions (operands: terms, earlier additions) */
} ms_tree;

struct cc_msum {
    int *tree_of; /* per node: the tree it belongs to, -1 for none */
    ms_tree *trees;
    int ntrees;
};

static const tern_graph_value *gval(const tern_graph *g, int v) { return tern_graph_value_at(g, v); }

static int readers_of(const tern_graph *g, int v, int *only)
{
    int cnt = 0, nn = tern_graph_node_count(g);
    for (int i = 0; i < nn; i++) {
        const tern_graph_node *n = tern_graph_node_at(g, i);
        for (int k = 0; k < n->n_inputs; k++)
            if (n->inputs[k] == v) {
                cnt++;
                *only = i;
            }
    }
    return cnt;
}

static int is_float(tern_elem_type t)
{
    return t == TERN_ELEM_FLOAT || t == TERN_ELEM_BFLOAT16 || t == TERN_ELEM_FLOAT16;
}

/* The dtype binary.alu stores an Add's output in (cc_out_dtype for float values). */
static tern_dtype store_dtype(const tern_graph_value *v)
{
    return v->type == TERN_ELEM_BFLOAT16 ? TERN_DTYPE_BF16 : v->type == TERN_ELEM_FLOAT16 ? TERN_DTYPE_FP16
                                                                                        : TERN_DTYPE_FP32;
}

/* Value v is read only by node `by`, is no graph output and is 2-D [M, N]. */
static int single_2d(const tern_graph *g, int v, int by, int64_t M, int64_t N)
{
    const tern_graph_value *x = gval(g, v);
    int only = -1;
    return !(x->flags & TERN_VALUE_OUTPUT) && readers_of(g, v, &only) == 1 && only == by && x->rank == 2 &&
           x->dims[0] == M && x->dims[1] == N && is_float(x->type);
}

/* Node i is an Add of two [M, N] values into a float [M, N] value, lowered by binary.alu. */
static int plain_add(const compile_ctx *c, int i, int64_t *M, int64_t *N)
{
    const tern_graph *g = c->g;
    const tern_graph_node *n = tern_graph_node_at(g, i);
    if (n->op_id != TERN_GOP_ADD || n->n_inputs != 2 || n->n_outputs != 1 || n->inputs[0] < 0 || n->inputs[1] < 0 ||
        n->outputs[0] < 0 || n->inputs[0] == n->inputs[1])
        return 0;
    const cc_rule *rs[4];
    if (cc_rules_for(TERN_GOP_ADD, rs, 4) < 1 || strcmp(rs[0]->name, "binary.alu"))
        return 0;
    const tern_graph_value *y = gval(g, n->outputs[0]);
    if (y->rank != 2 || y->dims[0] < 2 || y->dims[1] < 2 || !is_float(y->type))
        return 0;
    for (int k = 0; k < 2; k++) {
        const tern_graph_value *x = gval(g, n->inputs[k]);
        if (x->rank != 2 || x->dims[0] != y->dims[0] || x->dims[1] != y->dims[1])
            return 0;
    }
    *M = y->dims[0];
    *N = y->dims[1];
    return 1;
}

/* Node j makes a product for the sum (see the file comment). */
static int product(const compile_ctx *c, int j, int64_t M, int64_t N)
{
    const tern_graph *g = c->g;
    const tern_graph_node *n = tern_graph_node_at(g, j);
    if (n->op_id != TERN_GOP_MATMUL || n->n_inputs != 2 || n->inputs[0] < 0 || n->inputs[1] < 0 ||
        n->inputs[0] == n->inputs[1] || n->n_outputs != 1)
        return 0;
    const tern_graph_value *a = gval(g, n->inputs[0]), *b = gval(g, n->inputs[1]);
    if (a->constant || b->constant || a->rank != 2 || b->rank != 2 || a->dims[0] != M || b->dims[1] != N ||
        a->dims[1] != b->dims[0] || a->dims[1] < 1 || (uint64_t)a->dims[1] > (uint64_t)c->cfg.pe_rows * MS_TILES_K)
        return 0;
    if (a->producer >= 0 && tern_graph_node_at(g, a->producer)->op_id == TERN_GOP_TRANSPOSE)
        return 0;
    int nn = tern_graph_node_count(g);
    for (int i = 0; i < nn; i++) {
        const tern_graph_node *r = tern_graph_node_at(g, i);
        if (i != j && r->op_id == TERN_GOP_MATMUL && r->n_inputs > 0 && r->inputs[0] == n->inputs[0])
            return 0;
    }
    return 1;
}

/* Adds operand v of Add `by` to T: a term, or (recursively) an inner Add. 0 when it is neither. */
static int take_operand(const compile_ctx *c, ms_tree *T, int v, int by, int64_t M, int64_t N, int *op)
{
    const tern_graph *g = c->g;
    if (!single_2d(g, v, by, M, N))
        return 0;
    int p = gval(g, v)->producer;
    if (p < 0 || T->root - p > MS_MAX_DISTANCE)
        return 0;
    if (product(c, p, M, N)) {
        if (T->nterms == MS_MAX_TERMS)
            return 0;
        T->term[T->nterms] = p;
        *op = T->nterms++;
        return 1;
    }
    int64_t m2, n2;
    if (!plain_add(c, p, &m2, &n2))
        return 0;
    const tern_graph_node *n = tern_graph_node_at(g, p);
    int a, b;
    if (!take_operand(c, T, n->inputs[0], p, M, N, &a) || !take_operand(c, T, n->inputs[1], p, M, N, &b) ||
        T->nadds == MS_MAX_TERMS)
        return 0;
    T->add[T->nadds] = p;
    T->tree[T->nadds] = (tern_gemm_sum_node){a, b, store_dtype(gval(g, n->outputs[0]))};
    *op = -1 - T->nadds++;
    return 1;
}

void cc_msum_free(compile_ctx *c)
{
    if (!c->msum)
        return;
    free(c->msum->tree_of);
    free(c->msum->trees);
    free(c->msum);
    c->msum = NULL;
}

void cc_msum_plan(compile_ctx *c)
{
    const tern_graph *g = c->g;
    int nn = tern_graph_node_count(g);
    struct cc_msum *p = calloc(1, sizeof *p);
    if (!p)
        return; /* an optimisation only */
    p->tree_of = malloc(sizeof(int) * (size_t)(nn + 1));
    p->trees = malloc(sizeof(ms_tree) * (size_t)(nn / 3 + 1));
    if (!p->tree_of || !p->trees) {
        free(p->tree_of);
        free(p->trees);
        free(p);
        return;
    }
    c->msum = p;
    for (int i = 0; i < nn; i++)
        p->tree_of[i] = -1;
    /* the roots: from the end, so that an Add inside a bigger sum is taken with it */
    for (int i = nn - 1; i >= 0; i--) {
        int64_t M, N;
        if (p->tree_of[i] >= 0 || !plain_add(c, i, &M, &N))
            continue;
        ms_tree *T = &p->trees[p->ntrees];
        memset(T, 0, sizeof *T);
        T->root = i;
        const tern_graph_node *n = tern_graph_node_at(g, i);
        int a, b;
        if (!take_operand(c, T, n->inputs[0], i, M, N, &a) || !take_operand(c, T, n->inputs[1], i, M, N, &b))
            continue;
        T->add[T->nadds] = i;
        T->tree[T->nadds++] = (tern_gemm_sum_node){a, b, store_dtype(gval(g, n->outputs[0]))};
        int t = p->ntrees++;
        for (int j = 0; j < T->nterms; j++)
            p->tree_of[T->term[j]] = t;
        for (int j = 0; j < T->nadds; j++)
            p->tree_of[T->add[j]] = t;
        /* the products run at the root: their inputs stay live until then */
        for (int j = 0; j < T->nterms; j++) {
            const tern_graph_node *m = tern_graph_node_at(g, T->term[j]);
            for (int k = 0; k < 2; k++)
                if (c->v[m->inputs[k]].last_use < i)
                    c->v[m->inputs[k]].last_use = i;
        }
    }
}

int cc_msum_member(const compile_ctx *c, int i) { return c->msum && c->msum->tree_of[i] >= 0; }

void cc_msum_counts(const compile_ctx *c, int *sums, int *products)
{
    *sums = *products = 0;
    if (!c->msum)
        return;
    *sums = c->msum->ntrees;
    for (int t = 0; t < c->msum->ntrees; t++)
        *products += c->msum->trees[t].nterms;
}

/* The sum of tree T, emitted at its root (the current node). */
static void emit(compile_ctx *c, const ms_tree *T)
{
    const tern_graph *g = c->g;
    tern_dtype mdt = c->o->matmul_dtype;
    cc_value *y = cc_out(c, 0, cc_out_dtype(c, 0));
    if (!y)
        return;
    uint64_t M = (uint64_t)y->dims[0], N = (uint64_t)y->dims[1];
    tern_view aT[MS_MAX_TERMS], w[MS_MAX_TERMS];
    int wcopy[MS_MAX_TERMS] = {0}, made = 0;
    tern_gemm_opts go;
    tern_gemm_opts_default(&go);
    go.acc_dtype = TERN_DTYPE_FP32;
    go.tiles_in_block_m = 8; /* as matmul2d */
    go.tiles_in_block_k = MS_TILES_K;
    /* the inputs transposed on chip when matmul2d would (at most two N blocks wide, lower_linear.c), else as its
     * HBM route */
    int rows = N <= 2 * (uint64_t)c->cfg.moving_free_max * go.tiles_in_block_n;
    for (; made < T->nterms && cc_ok(c); made++) {
        const tern_graph_node *m = tern_graph_node_at(g, T->term[made]);
        cc_value *a = &c->v[m->inputs[0]], *b = &c->v[m->inputs[1]];
        if (!a->placed || !b->placed || a->host || b->host || a->tview || b->tview) {
            cc_fail(c, TERN_ERR_INVALID, "matmul sum: the inputs of product node %d are not device values",
                    T->term[made]);
            break;
        }
        uint64_t K = (uint64_t)a->dims[1];
        /* matmul2d's operands: the input transposed into the matmul dtype, the weight in it (read in place when
         * stored so) */
        if (rows) {
            aT[made] = cc_view2d(c, a, 0, M, K, K);
        } else {
            aT[made] = cc_temp(c, mdt, K, M);
            tern_lib_transpose(c->k, aT[made], cc_view2d(c, a, 0, M, K, K));
        }
        wcopy[made] = b->dt != mdt;
        w[made] = wcopy[made] ? cc_temp(c, mdt, K, N) : cc_view2d(c, b, 0, K, N, N);
        if (wcopy[made])
            cc_copy(c, w[made], cc_view2d(c, b, 0, K, N, N));
        c->model_flops += 2.0 * (double)M * (double)N * (double)K;
    }
    if (cc_ok(c))
        tern_lib_gemm_sum(c->k, cc_view2d(c, y, 0, M, N, N), (unsigned)T->nterms, aT, rows ? (int)mdt : -1, w,
                          (unsigned)T->nadds, T->tree, &go);
    for (int j = 0; j < made; j++) {
        if (!rows)
            tern_kernel_release(c->k, aT[j]);
        if (wcopy[j])
            tern_kernel_release(c->k, w[j]);
    }
}

int cc_msum_node(compile_ctx *c, int i, const char **rule)
{
    if (!cc_msum_member(c, i))
        return 0;
    *rule = "fuse.matmul_sum";
    const ms_tree *T = &c->msum->trees[c->msum->tree_of[i]];
    if (T->root == i)
        emit(c, T);
    return 1;
}
