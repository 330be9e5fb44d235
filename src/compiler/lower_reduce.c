/* Reductions over any axes (every Reduce* op): the reduced axes are moved innermost (lx_axes_last) and each
 * [rows, cols] tile is reduced on VectorE, with the L1/L2/log-sum/log-sum-exp/sum-square forms composed around
 * the sum or max; lower.c's reduce.last rule keeps the last-axis ReduceSum/Mean/Max it does faster. */
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
static int reduce_axes(cc *c, int rank, int *red, int *noop)
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

static int lower_reduce_any(cc *c)
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
    cc_value *xt = lx_axes_last(c, x, red, &tmp, &rows, &cols);
    if (!xt)
        return 1;
    if (cols == 0 || cols > 4 * ROW_MAX) {
        cc_fail(c, TERN_ERR_UNSUPPORTED, "%s over %llu elements per output", n->op, (unsigned long long)cols);
        lx_bcast_free(c, &tmp, xt);
        return 1;
    }
    tern_alu_op op = kind == RD_MAX ? TERN_ALU_MAX : kind == RD_MIN ? TERN_ALU_MIN
                     : kind == RD_PROD ? TERN_ALU_MULT : TERN_ALU_ADD;
    for (uint64_t r0 = 0; r0 < rows && cc_ok(c); r0 += PARTS) {
        uint32_t p = (uint32_t)(rows - r0 < PARTS ? rows - r0 : PARTS), w = (uint32_t)cols;
        tern_view t = lx_tile(c, p, w, "rd_in"), r = lx_tile(c, p, 1, "rd_out"), m = lx_tile(c, p, 1, "rd_max");
        tern_kernel_load(c->k, t, cc_view2d(c, xt, r0 * cols, p, cols, cols));
        switch (kind) {
        case RD_L1: lx_act(c, t, t, TERN_ACT_ABS, 1.0f); break;
        case RD_L2:
        case RD_SUMSQ: lx_act(c, t, t, TERN_ACT_SQUARE, 1.0f); break;
        case RD_LOGSUMEXP: /* max + log(sum(exp(x - max))) */
            tern_kernel_tensor_reduce(c->k, m, t, TERN_ALU_MAX, 1, 1); /* -max */
            tern_kernel_activation(c->k, t, t, TERN_ACT_EXP, 1.0f, m, tern_view_none(), tern_view_none());
            break;
        default: break;
        }
        tern_kernel_tensor_reduce(c->k, r, t, op, 1, 0);
        switch (kind) {
        case RD_MEAN: lx_ts(c, r, r, TERN_ALU_MULT, 1.0f / (float)cols, TERN_ALU_BYPASS, 0.0f); break;
        case RD_L2: lx_act(c, r, r, TERN_ACT_SQRT, 1.0f); break;
        case RD_LOGSUM: lx_act(c, r, r, TERN_ACT_LOG, 1.0f); break;
        case RD_LOGSUMEXP:
            lx_act(c, r, r, TERN_ACT_LOG, 1.0f);
            lx_tt(c, r, r, m, TERN_ALU_SUBTRACT);
            break;
        default: break;
        }
        tern_kernel_store(c->k, cc_view2d(c, y, r0, p, 1, 1), r);
        tern_kernel_release(c->k, t);
        tern_kernel_release(c->k, r);
        tern_kernel_release(c->k, m);
    }
    lx_bcast_free(c, &tmp, xt);
    return 1;
}

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
