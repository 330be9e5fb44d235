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
