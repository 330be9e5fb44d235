/* Reductions over any axes (every Reduce* op): the reduced axes are moved innermost (tile_axes_last) and each
 * [rows, cols] tile is reduced on VectorE, with the L1/L2/log-sum/log-sum-exp/sum-square forms composed around
 * the sum or max. The reduce.last rule (its own set, tried before lower_reduce_long.c's) keeps the last-axis
 * ReduceSum/Mean/Max of rows up to 40,000 it does faster with the library's row reductions. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "compiler/lower_tiles.h"
#include "graph/graph_internal.h"
#include "graph/op_params.h"

/* ---- reductions over any axes ---- */

typedef enum { RD_SUM, RD_MEAN, RD_MAX, RD_MIN, RD_PROD, RD_L1, RD_L2, RD_LOGSUM, RD_LOGSUMEXP, RD_SUMSQ } rd_kind;

static int rd_of(tern_op_id id, rd_kind *k)
{
    switch (id) {
    case TERN_GOP_REDUCE_SUM: *k = RD_SUM; return 1;
    case TERN_GOP_REDUCE_MEAN: *k = RD_MEAN; return 1;
    case TERN_GOP_REDUCE_MAX: *k = RD_MAX; return 1;
    case TERN_GOP_REDUCE_MIN: *k = RD_MIN; return 1;
    case TERN_GOP_REDUCE_PROD: *k = RD_PROD; return 1;
    case TERN_GOP_REDUCE_L1: *k = RD_L1; return 1;
    case TERN_GOP_REDUCE_L2: *k = RD_L2; return 1;
    case TERN_GOP_REDUCE_LOG_SUM: *k = RD_LOGSUM; return 1;
    case TERN_GOP_REDUCE_LOG_SUM_EXP: *k = RD_LOGSUMEXP; return 1;
    case TERN_GOP_REDUCE_SUM_SQUARE: *k = RD_SUMSQ; return 1;
    default: return 0;
    }
}

/* Which axes a reduction-like node reduces: attribute "axes" or (opset 13/18) input 1, which must be constant;
 * none given = all, unless noop_with_empty_axes. Returns 0 after recording a failure; *noop for the identity. */
static int reduce_axes(compile_ctx *c, int rank, int *red, int *noop)
{
    const tern_graph_node *n = cc_node(c);
    *noop = 0;
    memset(red, 0, sizeof(int) * CC_MAX_RANK);
    cc_value *ai = cc_in_id(c, 1) >= 0 ? cc_in(c, 1) : NULL;
    graph_axes_args ax;
    char why[160];
    tern_status st = graph_reduce_axes_decode(n, tern_graph_opset(c->g), cc_in_id(c, 1) >= 0, ai ? ai->host : NULL,
                                              &ax, why, sizeof why);
    if (st)
        return cc_fail(c, st, "%s: %s", n->op, why), 0;
    if (!ax.known)
        return cc_fail(c, TERN_ERR_UNSUPPORTED, "%s with run-time axes", n->op), 0;
    size_t na = 0;
    for (int i = 0; i < ax.n; i++) {
        int64_t a = cc_norm_axis(ax.axes[i], rank);
        if (a < 0 || a >= rank)
            return cc_fail(c, TERN_ERR_INVALID, "axis %lld outside rank %d", (long long)ax.axes[i], rank), 0;
        red[a] = 1;
        na++;
    }
    if (na == 0) {
        if (tern_graph_attr_int(n, "noop_with_empty_axes", 0))
            *noop = 1;
        else
            for (int d = 0; d < rank; d++)
                red[d] = 1;
    }
    return 1;
}

static int lower_reduce_any(compile_ctx *c)
{
    const tern_graph_node *n = cc_node(c);
    rd_kind kind = RD_SUM;
    rd_of((tern_op_id)n->op_id, &kind);
    cc_value *x = cc_in(c, 0);
    tern_dtype odt = cc_out_dtype(c, 0);
    cc_value *y = cc_out(c, 0, odt);
    if (!x || !y)
        return 1;
    int red[CC_MAX_RANK], noop;
    if (!reduce_axes(c, x->rank, red, &noop))
        return 1;
    if (noop) {
        cc_copy(c, cc_view2d(c, y, 0, 1, y->numel, y->numel), cc_view2d(c, x, 0, 1, x->numel, x->numel));
        return 1;
    }
    uint64_t rows, cols;
    cc_value tmp;
    cc_value *xt = tile_axes_last(c, x, red, &tmp, &rows, &cols);
    if (!xt)
        return 1;
    if (cols == 0 || cols > 4 * ROW_MAX) {
        cc_fail(c, TERN_ERR_UNSUPPORTED, "%s over %llu elements per output", n->op, (unsigned long long)cols);
        tile_bcast_free(c, &tmp, xt);
        return 1;
    }
    tern_alu_op op = kind == RD_MAX ? TERN_ALU_MAX : kind == RD_MIN ? TERN_ALU_MIN
                     : kind == RD_PROD ? TERN_ALU_MULT : TERN_ALU_ADD;
    for (uint64_t r0 = 0; r0 < rows && cc_ok(c); r0 += PARTS) {
        uint32_t p = (uint32_t)(rows - r0 < PARTS ? rows - r0 : PARTS), w = (uint32_t)cols;
        tern_view t = tile_new(c, p, w, "rd_in"), r = tile_new(c, p, 1, "rd_out"), m = tile_new(c, p, 1, "rd_max");
        tern_kernel_load(c->k, t, cc_view2d(c, xt, r0 * cols, p, cols, cols));
        switch (kind) {
        case RD_L1: tile_act(c, t, t, TERN_ACT_ABS, 1.0f); break;
        case RD_L2:
        case RD_SUMSQ: tile_act(c, t, t, TERN_ACT_SQUARE, 1.0f); break;
        case RD_LOGSUMEXP: /* max + log(sum(exp(x - max))) */
            tern_kernel_tensor_reduce(c->k, m, t, TERN_ALU_MAX, 1, 1); /* -max */
            tern_kernel_activation(c->k, t, t, TERN_ACT_EXP, 1.0f, m, tern_view_none(), tern_view_none());
            break;
        default: break;
        }
        tern_kernel_tensor_reduce(c->k, r, t, op, 1, 0);
        switch (kind) {
        case RD_MEAN: tile_ts(c, r, r, TERN_ALU_MULT, 1.0f / (float)cols, TERN_ALU_BYPASS, 0.0f); break;
        case RD_L2: tile_act(c, r, r, TERN_ACT_SQRT, 1.0f); break;
        case RD_LOGSUM: tile_act(c, r, r, TERN_ACT_LOG, 1.0f); break;
        case RD_LOGSUMEXP:
            tile_act(c, r, r, TERN_ACT_LOG, 1.0f);
            tile_tt(c, r, r, m, TERN_ALU_SUBTRACT);
            break;
        default: break;
        }
        tern_kernel_store(c->k, cc_view2d(c, y, r0, p, 1, 1), r);
        tern_kernel_release(c->k, t);
        tern_kernel_release(c->k, r);
        tern_kernel_release(c->k, m);
    }
    tile_bcast_free(c, &tmp, xt);
    return 1;
}

/* ---- the fast special cases (tried before this file's general rules; each applies function says why it
 * declines, and a node without input 0 is taken so that the rule reports it) ---- */

/* Reductions over leading axes: x seen as [R, C] with the R rows reduced and the C columns kept (the reduced
 * axes are the outer ones, size-1 dims aside: the weight and bias gradients of a batched linear layer, a
 * ReduceSum over the batch of [B, K, N] partial products). reduce.any moves the axes innermost first, a DMA of
 * one descriptor per element, and reduces [128, R] tiles. Here the C columns are split into [p, F] chunks (F
 * contiguous columns per partition) and a block of rows lands in one tile [p, J + 1, F] with a DMA of F-element
 * runs; tensor_reduce reads it as [p, F, rows] (the row axis innermost by its strides) and writes each column's
 * result into slot 0 of the next block's tile, so the chain over the rows continues: acc = x[0], acc op= x[r]
 * for r ascending, the order tensor_reduce itself uses, the same bits as reduce.any. */
#define LEAD_TILE_BYTES 32768u /* per partition, each of the two tiles */

/* R and C of a reduction over leading axes; 0 when the node is not one (or its axes do not decode). */
static int leading_split(compile_ctx *c, const cc_value *x, uint64_t *R, uint64_t *C)
{
    int given = cc_in_id(c, 1) >= 0;
    cc_value *ai = given ? cc_in(c, 1) : NULL;
    graph_axes_args ax;
    char why[160];
    if (graph_reduce_axes_decode(cc_node(c), tern_graph_opset(c->g), given, ai ? ai->host : NULL, &ax, why,
                                 sizeof why) || !ax.known || ax.n == 0)
        return 0;
    int red[CC_MAX_RANK] = {0};
    for (int i = 0; i < ax.n; i++) {
        int64_t a = cc_norm_axis(ax.axes[i], x->rank);
        if (a < 0 || a >= x->rank)
            return 0;
        red[a] = 1;
    }
    uint64_t r = 1, cc = 1;
    int kept_seen = 0;
    for (int d = 0; d < x->rank; d++) {
        if (x->dims[d] == 1)
            continue;
        if (red[d]) {
            if (kept_seen)
                return 0; /* a reduced axis after a kept one */
            r *= (uint64_t)x->dims[d];
        } else {
            kept_seen = 1;
            cc *= (uint64_t)x->dims[d];
        }
    }
    *R = r;
    *C = cc;
    return 1;
}

static int reduce_leading_applies(compile_ctx *c, char *why, size_t len)
{
    cc_value *x = cc_in(c, 0);
    if (!x)
        return 1;
    uint64_t R = 0, C = 0;
    if (!tern_dtype_is_float(x->dt) || !leading_split(c, x, &R, &C)) {
        snprintf(why, len, "not a float reduction over leading axes only");
        return 0;
    }
    if (R < 2 || C < PARTS) {
        snprintf(why, len, "%llu rows of %llu columns (needs 2 rows and a column per partition)",
                 (unsigned long long)R, (unsigned long long)C);
        return 0;
    }
    return 1;
}

/* Columns [c0, c0 + p * F) of x as [R, C], reduced over the rows into y[c0 ...]. */
static void reduce_leading_chunk(compile_ctx *c, cc_value *x, cc_value *y, uint64_t R, uint64_t C, uint64_t c0,
                                 uint32_t p, uint32_t F, tern_alu_op op, float scale)
{
    uint32_t slots = LEAD_TILE_BYTES / (4u * F);
    if (slots < 2)
        slots = 2;
    if ((uint64_t)slots > R)
        slots = (uint32_t)R;
    tern_view t[2];
    for (int i = 0; i < 2; i++)
        t[i] = tern_kernel_tile(c->k, TERN_MEM_SBUF, TERN_DTYPE_FP32, p, 2, (const uint32_t[]){slots, F}, "rl_in");
    tern_view acc = tile_new(c, p, F, "rl_acc");
    uint64_t r = 0;
    int cur = 0;
    while (r < R && cc_ok(c)) {
        uint32_t first = r == 0 ? 0u : 1u; /* slot 0 holds the running result after the first block */
        uint64_t n = R - r < (uint64_t)(slots - first) ? R - r : (uint64_t)(slots - first);
        tern_view dst = tern_view_slice(c->k, t[cur], 1, first, first + n, 1);
        tern_view src = cc_view(c, x, r * C + c0, p, (int64_t)F, 2, (const uint32_t[]){(uint32_t)n, F},
                                (const int32_t[]){(int32_t)C, 1});
        tern_kernel_load(c->k, dst, src);
        r += n;
        /* [p, F, first + n]: the rows innermost */
        tern_view in = tern_view_slice(c->k, t[cur], 1, 0, first + n, 1);
        uint32_t rows = in.ap.dims[0].num;
        in.ap.dims[0].step = 1;
        in.ap.dims[0].num = F;
        in.ap.dims[1].step = (int32_t)F;
        in.ap.dims[1].num = rows;
        tern_view out = r < R ? tern_view_slice(c->k, t[cur ^ 1], 1, 0, 1, 1) : acc;
        if (r < R) { /* [p, 1, F] as [p, F] */
            out.ap.ndims = 1;
            out.ap.dims[0] = out.ap.dims[1];
            out.ap.dims[1].step = 0;
            out.ap.dims[1].num = 0;
        }
        tern_kernel_tensor_reduce(c->k, out, in, op, 1, 0);
        cur ^= 1;
    }
    if (scale != 1.0f)
        tile_ts(c, acc, acc, TERN_ALU_MULT, scale, TERN_ALU_BYPASS, 0.0f);
    tern_kernel_store(c->k, cc_view(c, y, c0, p, (int64_t)F, 1, (const uint32_t[]){F}, (const int32_t[]){1}), acc);
    tern_kernel_release(c->k, acc);
    tern_kernel_release(c->k, t[1]);
    tern_kernel_release(c->k, t[0]);
}

static int lower_reduce_leading(compile_ctx *c)
{
    const tern_graph_node *n = cc_node(c);
    cc_value *x = cc_in(c, 0);
    cc_value *y = cc_out(c, 0, cc_out_dtype(c, 0));
    if (!x || !y)
        return 1;
    uint64_t R = 0, C = 0;
    if (!leading_split(c, x, &R, &C) || y->numel != C) {
        cc_fail(c, TERN_ERR_INVALID, "%s: leading-axes split of %llu elements", n->op, (unsigned long long)x->numel);
        return 1;
    }
    tern_alu_op op = n->op_id == TERN_GOP_REDUCE_MAX ? TERN_ALU_MAX : n->op_id == TERN_GOP_REDUCE_MIN ? TERN_ALU_MIN
                                                                                                      : TERN_ALU_ADD;
    float scale = n->op_id == TERN_GOP_REDUCE_MEAN ? 1.0f / (float)R : 1.0f;
    const uint64_t P = PARTS, FMAX = 1024;
    uint64_t c0 = 0;
    while (c0 < C && cc_ok(c)) {
        uint64_t rem = C - c0, F, p;
        if (rem >= P * FMAX) {
            p = P;
            F = FMAX;
        } else if (rem >= P) {
            p = P;
            F = rem / P;
        } else {
            p = rem;
            F = 1;
        }
        reduce_leading_chunk(c, x, y, R, C, c0, (uint32_t)p, (uint32_t)F, op, scale);
        c0 += p * F;
    }
    return 1;
}


static int lower_reduce(compile_ctx *c)
{
    const tern_graph_node *n = cc_node(c);
    cc_value *x = cc_in(c, 0);
    cc_value *y = cc_out(c, 0, TERN_DTYPE_FP32);
    if (!x || !y)
        return 1;
    /* axes: attribute (older opsets) or second input */
    int64_t axes[CC_MAX_RANK];
    size_t na = 0;
    const tern_graph_attr *aa = tern_graph_node_attr(n, "axes");
    cc_value *ai = cc_in(c, 1);
    if (aa)
        for (size_t i = 0; i < aa->n && na < CC_MAX_RANK; i++)
            axes[na++] = cc_norm_axis(aa->ints[i], x->rank);
    else if (ai && ai->host)
        for (size_t i = 0; i < ai->host->count && na < CC_MAX_RANK; i++)
            axes[na++] = cc_norm_axis((int64_t)tern_host_tensor_get(ai->host, i), x->rank);
    if (na != 1 || axes[0] != x->rank - 1) {
        cc_fail(c, TERN_ERR_UNSUPPORTED, "%s over axes other than the last one alone", n->op);
        return 1;
    }
    tern_alu_op op = n->op_id == TERN_GOP_REDUCE_MAX ? TERN_ALU_MAX : TERN_ALU_ADD;
    uint64_t rows, cols;
    tile_rows_cols(x, &rows, &cols);
    float scale = n->op_id == TERN_GOP_REDUCE_MEAN ? 1.0f / (float)cols : 1.0f;
    const uint64_t P = c->cfg.partitions; /* rows per tile: the machine's */
    for (uint64_t r0 = 0; r0 < rows && cc_ok(c); r0 += P) {
        uint32_t p = (uint32_t)(rows - r0 < P ? rows - r0 : P);
        if (cols > 40000) {
            cc_fail(c, TERN_ERR_UNSUPPORTED, "%s over %llu elements per row", n->op, (unsigned long long)cols);
            return 1;
        }
        tern_view t = tern_kernel_sbuf(c->k, TERN_DTYPE_FP32, p, (uint32_t)cols, "reduce_in");
        tern_view o = tern_kernel_sbuf(c->k, TERN_DTYPE_FP32, p, 1, "reduce_out");
        tern_kernel_load(c->k, t, cc_view2d(c, x, r0 * cols, p, cols, cols));
        tern_kernel_tensor_reduce(c->k, o, t, op, 1, 0);
        if (scale != 1.0f)
            tern_kernel_tensor_scalar(c->k, TERN_ENGINE_AUTO, o, o, TERN_ALU_MULT, scale, TERN_ALU_BYPASS, 0.0f);
        tern_kernel_store(c->k, cc_view2d(c, y, r0, p, 1, 1), o);
        tern_kernel_release(c->k, t);
        tern_kernel_release(c->k, o);
    }
    return 1;
}

/* A Reduce node over the last axis alone (its axes decoded as inference reads them, graph_reduce_axes_decode). */
static int reduces_last_axis_only(compile_ctx *c, const cc_value *x)
{
    int given = cc_in_id(c, 1) >= 0;
    cc_value *ai = given ? cc_in(c, 1) : NULL;
    graph_axes_args ax;
    char why[160];
    if (graph_reduce_axes_decode(cc_node(c), tern_graph_opset(c->g), given, ai ? ai->host : NULL, &ax, why,
                                 sizeof why) || !ax.known)
        return 0; /* the general rule reports it */
    return ax.n == 1 && cc_norm_axis(ax.axes[0], x->rank) == x->rank - 1; /* no axes: all of them */
}

static int reduce_last_applies(compile_ctx *c, char *why, size_t len)
{
    cc_value *x = cc_in(c, 0);
    if (!x)
        return 1;
    if (!reduces_last_axis_only(c, x)) {
        snprintf(why, len, "it does not reduce the last axis alone");
        return 0;
    }
    if (!(x->rank > 0 && x->dims[x->rank - 1] <= 40000)) {
        snprintf(why, len, "the last axis is longer than 40000");
        return 0;
    }
    return 1;
}

static const cc_rule reduce_last_rules[] = {
    {TERN_GOP_REDUCE_MEAN, "reduce.last", reduce_last_applies, lower_reduce},
    {TERN_GOP_REDUCE_SUM, "reduce.last", reduce_last_applies, lower_reduce},
    {TERN_GOP_REDUCE_MAX, "reduce.last", reduce_last_applies, lower_reduce},
};
/* Before lower_reduce_long.c's rules (rules.c): the last-axis rows it handles faster. */
const cc_rule_set cc_rules_reduce_last = CC_RULE_SET("lower_reduce.c", reduce_last_rules);

static const cc_rule reduce_rules[] = {
    {TERN_GOP_REDUCE_SUM, "reduce.leading", reduce_leading_applies, lower_reduce_leading},
    {TERN_GOP_REDUCE_MEAN, "reduce.leading", reduce_leading_applies, lower_reduce_leading},
    {TERN_GOP_REDUCE_MAX, "reduce.leading", reduce_leading_applies, lower_reduce_leading},
    {TERN_GOP_REDUCE_MIN, "reduce.leading", reduce_leading_applies, lower_reduce_leading},
    {TERN_GOP_REDUCE_SUM, "reduce.any", NULL, lower_reduce_any},
    {TERN_GOP_REDUCE_MEAN, "reduce.any", NULL, lower_reduce_any},
    {TERN_GOP_REDUCE_MAX, "reduce.any", NULL, lower_reduce_any},
    {TERN_GOP_REDUCE_MIN, "reduce.any", NULL, lower_reduce_any},
    {TERN_GOP_REDUCE_PROD, "reduce.any", NULL, lower_reduce_any},
    {TERN_GOP_REDUCE_L1, "reduce.any", NULL, lower_reduce_any},
    {TERN_GOP_REDUCE_L2, "reduce.any", NULL, lower_reduce_any},
    {TERN_GOP_REDUCE_SUM_SQUARE, "reduce.any", NULL, lower_reduce_any},
    {TERN_GOP_REDUCE_LOG_SUM, "reduce.any", NULL, lower_reduce_any},
    {TERN_GOP_REDUCE_LOG_SUM_EXP, "reduce.any", NULL, lower_reduce_any},
};
const cc_rule_set cc_rules_reduce = CC_RULE_SET("lower_reduce.c", reduce_rules);
