/* Reductions over trailing axes too long for one SBUF tile row (more than 4 x ROW_MAX = 32,768 elements per
 * output): the training step's sums over a vocabulary (the softmax gradient's row sums over GPT-2's 50,257
 * logits, the cross-entropy over [tokens, vocab]) and over whole weights (the gradient norm's sum of g^2 over the
 * 38.6M-element embedding). The general rule (lower_reduce.c) holds a row in one tile and refuses these. Here:
 *   - many rows (at least 32): rows on partitions, the columns in chunks of ROW_MAX, each chunk reduced on VectorE
 *     and combined into a per-row accumulator in chunk order;
 *   - few rows: each row spread over the 128 partitions (partition q takes the q-th run of cols / 128 elements),
 *     each partition's run reduced in chunks as above, the left-over tail (cols mod 128) on partition 0, then the
 *     partitions combined by GpSimd's partition_reduce, so the whole core works on a single long row.
 * Every order is fixed by the shape, so results are deterministic. ReduceSum, ReduceMean, ReduceSumSquare,
 * ReduceL1, ReduceL2, ReduceMax and ReduceMin; the reduced axes must be the trailing ones (no transpose).
 * Also here: a sum, mean, max, min or product over axes of one element in all (the gradient of a batch-1
 * broadcast, [1, 768, 50257] summed over its first axis) is a copy, which the general rule would make one
 * 128-row tile at a time (300,000 tiles for GPT-2's embedding); the values are the same bits. */
#include <stdio.h>
#include <string.h>

#include "compiler/lower_tiles.h"
#include "graph/graph_internal.h"
#include "graph/op_params.h"

#define RL_MIN_COLS (4u * ROW_MAX) /* longer rows than the general rule takes */
#define RL_ROW_TILES 32u           /* rows from which rows go on partitions */

typedef enum { RL_SUM, RL_MEAN, RL_SUMSQ, RL_L1, RL_L2, RL_MAX, RL_MIN } rl_kind;

static int kind_of(tern_op_id id, rl_kind *k)
{
    switch (id) {
    case TERN_GOP_REDUCE_SUM: *k = RL_SUM; return 1;
    case TERN_GOP_REDUCE_MEAN: *k = RL_MEAN; return 1;
    case TERN_GOP_REDUCE_SUM_SQUARE: *k = RL_SUMSQ; return 1;
    case TERN_GOP_REDUCE_L1: *k = RL_L1; return 1;
    case TERN_GOP_REDUCE_L2: *k = RL_L2; return 1;
    case TERN_GOP_REDUCE_MAX: *k = RL_MAX; return 1;
    case TERN_GOP_REDUCE_MIN: *k = RL_MIN; return 1;
    default: return 0;
    }
}

/* rows x cols of a reduction over x's trailing axes; 0 when the reduced axes are not trailing (or unknown). */
static int shape_of(compile_ctx *c, const tern_graph_value *x, uint64_t *rows, uint64_t *cols, int unit_ok)
{
    const tern_graph_node *n = cc_node(c);
    int given = n->n_inputs > 1 && n->inputs[1] >= 0;
    const tern_host_tensor *ai = given ? tern_graph_value_at(c->g, n->inputs[1])->constant : NULL;
    graph_axes_args ax;
    char why[160];
    if (graph_reduce_axes_decode(n, tern_graph_opset(c->g), given, ai, &ax, why, sizeof why) || !ax.known)
        return 0;
    int red[CC_MAX_RANK] = {0};
    if (x->rank < 1 || x->rank > CC_MAX_RANK)
        return 0;
    if (ax.n == 0) {
        if (tern_graph_attr_int(n, "noop_with_empty_axes", 0))
            return 0;
        for (int d = 0; d < x->rank; d++)
            red[d] = 1;
    }
    for (int i = 0; i < ax.n; i++) {
        int64_t a = cc_norm_axis(ax.axes[i], x->rank);
        if (a < 0 || a >= x->rank)
            return 0;
        red[a] = 1;
    }
    *rows = *cols = 1;
    int seen = 0;
    for (int d = 0; d < x->rank; d++) {
        if (red[d])
            seen = 1;
        else if (seen && !unit_ok)
            return 0; /* a kept axis after a reduced one */
        *(red[d] ? cols : rows) *= (uint64_t)x->dims[d];
    }
    return 1;
}

/* rows x cols over trailing axes; with unit_ok, reduced axes anywhere (only cols == 1 is then meaningful) */
static int trailing_shape(compile_ctx *c, const tern_graph_value *x, uint64_t *rows, uint64_t *cols)
{
    return shape_of(c, x, rows, cols, 0);
}

static int trailing_or_unit(compile_ctx *c, const tern_graph_value *x, uint64_t *rows, uint64_t *cols)
{
    return shape_of(c, x, rows, cols, 1);
}

static int applies(compile_ctx *c, char *why, size_t len)
{
    const tern_graph_node *n = cc_node(c);
    rl_kind k;
    const tern_graph_value *x = n->n_inputs > 0 ? tern_graph_value_at(c->g, n->inputs[0]) : NULL;
    uint64_t rows, cols;
    if (!kind_of((tern_op_id)n->op_id, &k) || !x || !tern_elem_is_float(x->type) || !trailing_shape(c, x, &rows, &cols)) {
        snprintf(why, len, "not a float reduction over trailing axes");
        return 0;
    }
    if (cols <= RL_MIN_COLS) {
        snprintf(why, len, "%llu elements per output fit one tile row", (unsigned long long)cols);
        return 0;
    }
    return 1;
}

static tern_alu_op combine_op(rl_kind k) { return k == RL_MAX ? TERN_ALU_MAX : k == RL_MIN ? TERN_ALU_MIN : TERN_ALU_ADD; }

/* r[p, 1] = reduce of t[p, w] after the kind's elementwise step (square, abs); t is overwritten. */
static void chunk_reduce(compile_ctx *c, rl_kind k, tern_view r, tern_view t)
{
    if (k == RL_SUMSQ || k == RL_L2)
        tile_act(c, t, t, TERN_ACT_SQUARE, 1.0f);
    else if (k == RL_L1)
        tile_act(c, t, t, TERN_ACT_ABS, 1.0f);
    tern_kernel_tensor_reduce(c->k, r, t, combine_op(k), 1, 0);
}

static void finish(compile_ctx *c, rl_kind k, tern_view r, uint64_t cols)
{
    if (k == RL_MEAN)
        tile_ts(c, r, r, TERN_ALU_MULT, 1.0f / (float)cols, TERN_ALU_BYPASS, 0.0f);
    else if (k == RL_L2)
        tile_act(c, r, r, TERN_ACT_SQRT, 1.0f);
}

/* acc[p, 1] (=|op=) the reduction of p rows' columns [c0, c1), chunk by chunk; rows `stride` elements apart from
 * element off of x. */
static void reduce_runs(compile_ctx *c, rl_kind k, cc_value *x, uint64_t off, uint32_t p, uint64_t stride, uint64_t c0,
                        uint64_t c1, tern_view acc, int *have)
{
    for (uint64_t s = c0; s < c1 && cc_ok(c); s += ROW_MAX) {
        uint32_t w = (uint32_t)(c1 - s < ROW_MAX ? c1 - s : ROW_MAX);
        tern_view t = tile_new(c, p, w, "rl_in"), r = tile_new(c, p, 1, "rl_part");
        tern_kernel_load(c->k, t, cc_view2d(c, x, off + s, p, w, stride));
        chunk_reduce(c, k, r, t);
        if (*have)
            tile_tt(c, acc, acc, r, combine_op(k));
        else
            tern_kernel_tensor_copy(c->k, VE, acc, r);
        *have = 1;
        tern_kernel_release(c->k, t);
        tern_kernel_release(c->k, r);
    }
}

static int lower_reduce_long(compile_ctx *c)
{
    const tern_graph_node *n = cc_node(c);
    rl_kind k = RL_SUM;
    kind_of((tern_op_id)n->op_id, &k);
    cc_value *x = cc_in(c, 0);
    cc_value *y = cc_out(c, 0, TERN_DTYPE_FP32);
    if (!x || !y)
        return 1;
    uint64_t rows, cols;
    if (!trailing_shape(c, tern_graph_value_at(c->g, cc_in_id(c, 0)), &rows, &cols)) {
        cc_fail(c, TERN_ERR_INVALID, "%s: the reduced axes are not the trailing ones", n->op);
        return 1;
    }
    const uint32_t P = PARTS;
    if (rows >= RL_ROW_TILES) {
        for (uint64_t r0 = 0; r0 < rows && cc_ok(c); r0 += P) {
            uint32_t p = (uint32_t)(rows - r0 < P ? rows - r0 : P);
            tern_view acc = tile_new(c, p, 1, "rl_acc");
            int have = 0;
            reduce_runs(c, k, x, r0 * cols, p, cols, 0, cols, acc, &have);
            finish(c, k, acc, cols);
            tern_kernel_store(c->k, cc_view2d(c, y, r0, p, 1, 1), acc);
            tern_kernel_release(c->k, acc);
        }
        return 1;
    }
    /* few rows: partition q takes elements [q L, (q + 1) L) of the row, partition 0 also the tail [P L, cols) */
    uint64_t L = cols / P;
    for (uint64_t r = 0; r < rows && cc_ok(c); r++) {
        tern_view acc = tile_new(c, P, 1, "rl_acc"), tot = tile_new(c, 1, 1, "rl_total");
        int have = 0;
        reduce_runs(c, k, x, r * cols, P, L, 0, L, acc, &have);
        if (P * L < cols) {
            tern_view acc0 = tern_view_block(c->k, acc, 0, 1, 0, 1);
            reduce_runs(c, k, x, r * cols, 1, cols, P * L, cols, acc0, &have);
        }
        tern_kernel_partition_reduce(c->k, tot, acc, combine_op(k));
        finish(c, k, tot, cols);
        tern_kernel_store(c->k, cc_view2d(c, y, r, 1, 1, 1), tot);
        tern_kernel_release(c->k, acc);
        tern_kernel_release(c->k, tot);
    }
    return 1;
}

/* ---- reductions over one element ---- */

static int one_element(compile_ctx *c, char *why, size_t len)
{
    const tern_graph_node *n = cc_node(c);
    tern_op_id id = (tern_op_id)n->op_id;
    const tern_graph_value *x = n->n_inputs > 0 ? tern_graph_value_at(c->g, n->inputs[0]) : NULL;
    uint64_t rows, cols;
    int kind = id == TERN_GOP_REDUCE_SUM || id == TERN_GOP_REDUCE_MEAN || id == TERN_GOP_REDUCE_MAX ||
               id == TERN_GOP_REDUCE_MIN || id == TERN_GOP_REDUCE_PROD;
    if (!kind || !x || !tern_elem_is_float(x->type) || !trailing_or_unit(c, x, &rows, &cols) || cols != 1) {
        snprintf(why, len, "not a reduction over one element per output");
        return 0;
    }
    return 1;
}

/* A reduction over one element per output is its input (a ReduceSum over a batch of 1: every batched weight
 * gradient of a batch-1 training step). An fp32 input is aliased (a view, as Reshape: no copy, the same bits);
 * another float dtype is copied, widened to fp32 exactly by the DMA. */
static int lower_copy(compile_ctx *c)
{
    cc_value *x = cc_in(c, 0);
    if (x && x->dt == TERN_DTYPE_FP32) {
        cc_alias(c, 0, 0); /* a graph output gets its own tensor, copied (cc_alias) */
        return 1;
    }
    cc_value *y = cc_out(c, 0, TERN_DTYPE_FP32);
    if (x && y && y->numel)
        cc_copy(c, cc_view2d(c, y, 0, 1, y->numel, y->numel), cc_view2d(c, x, 0, 1, x->numel, x->numel));
    return 1;
}

static const cc_rule reduce_long_rules[] = {
    {TERN_GOP_REDUCE_SUM, "reduce.one_element", one_element, lower_copy},
    {TERN_GOP_REDUCE_MEAN, "reduce.one_element", one_element, lower_copy},
    {TERN_GOP_REDUCE_MAX, "reduce.one_element", one_element, lower_copy},
    {TERN_GOP_REDUCE_MIN, "reduce.one_element", one_element, lower_copy},
    {TERN_GOP_REDUCE_PROD, "reduce.one_element", one_element, lower_copy},
    {TERN_GOP_REDUCE_SUM, "reduce.long_rows", applies, lower_reduce_long},
    {TERN_GOP_REDUCE_MEAN, "reduce.long_rows", applies, lower_reduce_long},
    {TERN_GOP_REDUCE_SUM_SQUARE, "reduce.long_rows", applies, lower_reduce_long},
    {TERN_GOP_REDUCE_L1, "reduce.long_rows", applies, lower_reduce_long},
    {TERN_GOP_REDUCE_L2, "reduce.long_rows", applies, lower_reduce_long},
    {TERN_GOP_REDUCE_MAX, "reduce.long_rows", applies, lower_reduce_long},
    {TERN_GOP_REDUCE_MIN, "reduce.long_rows", applies, lower_reduce_long},
};
const cc_rule_set cc_rules_reduce_long = CC_RULE_SET("lower_reduce_long.c", reduce_long_rules);
