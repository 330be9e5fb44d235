/* Ops along one axis: the last-axis Softmax whose row fits one partition by the library's row softmax
 * (softmax.row), and in general ArgMax/ArgMin, Hardmax, Softmax/LogSoftmax (any axis, and rows longer than one
 * partition holds), CumSum. The axis is moved innermost, rows are processed as [128, cols] tiles (long rows in
 * chunks with running statistics), and the result is moved back. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "compiler/lower_tiles.h"
#include "graph/graph_internal.h"
#include "graph/op_params.h"

/* ---- ops along one axis: ArgMax/ArgMin, Hardmax, Softmax/LogSoftmax, CumSum ---- */

/* idx[p, w] = column index (fp32); cand = eq ? idx : idx +- 2^24, reduced with min (first) or max (last). The
 * row's best value is left in m. */
static void arg_index_m(compile_ctx *c, tern_view out, tern_view m, tern_view t, tern_view scratch, tern_view idx,
                        tern_alu_op best, int last)
{
    tern_kernel_tensor_reduce(c->k, m, t, best, 1, 0);
    tile_ts_ap(c, scratch, t, TERN_ALU_IS_EQ, m, TERN_ALU_BYPASS, tern_view_none());
    if (last)
        tile_ts(c, scratch, scratch, TERN_ALU_MULT, IDX_BIG, TERN_ALU_SUBTRACT, IDX_BIG);
    else
        tile_ts(c, scratch, scratch, TERN_ALU_MULT, -IDX_BIG, TERN_ALU_ADD, IDX_BIG);
    tile_tt(c, scratch, scratch, idx, TERN_ALU_ADD);
    tern_kernel_tensor_reduce(c->k, out, scratch, last ? TERN_ALU_MAX : TERN_ALU_MIN, 1, 0);
}

static void arg_index(compile_ctx *c, tern_view out, tern_view t, tern_view scratch, tern_view idx, tern_alu_op best,
                      int last)
{
    tern_view m = tile_new(c, t.ap.num_partitions, 1, "arg_best");
    arg_index_m(c, out, m, t, scratch, idx, best, last);
    tern_kernel_release(c->k, m);
}

typedef enum { AX_ARGMAX, AX_ARGMIN, AX_HARDMAX, AX_SOFTMAX, AX_LOGSOFTMAX, AX_CUMSUM } ax_kind;

/* Rows longer than ROW_MAX columns (a vocabulary's logits) for ArgMax/ArgMin and Softmax/LogSoftmax: each row
 * tile is taken in chunks of ROW_MAX columns, with per-row running statistics in a [p, 5] tile.
 *   arg:     per chunk the best value cm and its first (last) index ci (iota based at the chunk's column); the
 *            running pair (m, bi) takes the chunk's when cm beats m strictly (first index) or ties it too
 *            (select_last_index), as bi += (cm op m) * (ci - bi), m = best(m, cm). Indices stay exact in fp32
 *            (cols < 2^24 is checked).
 *   softmax: one online pass for the row max and the sum of exp (the sum is rescaled by exp(old max - new max)
 *            when a chunk raises the max), then a second pass loads each chunk again and writes
 *            exp(x - max) / sum, or x - (max + log sum) for LogSoftmax. */
static void axis_long(compile_ctx *c, ax_kind kind, cc_value *xt, cc_value *yt, uint64_t rows, uint64_t cols, int last)
{
    const int arg = kind == AX_ARGMAX || kind == AX_ARGMIN;
    const tern_alu_op best = kind == AX_ARGMIN ? TERN_ALU_MIN : TERN_ALU_MAX;
    const tern_alu_op beats = kind == AX_ARGMIN ? (last ? TERN_ALU_IS_LE : TERN_ALU_IS_LT)
                                                : (last ? TERN_ALU_IS_GE : TERN_ALU_IS_GT);
    for (uint64_t r0 = 0; r0 < rows && cc_ok(c); r0 += PARTS) {
        uint32_t p = (uint32_t)(rows - r0 < PARTS ? rows - r0 : PARTS);
        tern_view t = tile_new(c, p, ROW_MAX, "axl_in"), s = tile_new(c, p, ROW_MAX, "axl_tmp");
        tern_view o = tile_new(c, p, ROW_MAX, "axl_out"), st = tile_new(c, p, 5, "axl_stats");
        /* arg: m best value, bi its index; softmax: m = -max, bi = sum of exp(x - max) */
        tern_view m = tern_view_block(c->k, st, 0, p, 0, 1), bi = tern_view_block(c->k, st, 0, p, 1, 2);
        tern_view cm = tern_view_block(c->k, st, 0, p, 2, 3), ci = tern_view_block(c->k, st, 0, p, 3, 4);
        tern_view f = tern_view_block(c->k, st, 0, p, 4, 5);
        for (uint64_t c0 = 0; c0 < cols && cc_ok(c); c0 += ROW_MAX) {
            uint64_t w = cols - c0 < ROW_MAX ? cols - c0 : ROW_MAX;
            tern_view tw = tern_view_block(c->k, t, 0, p, 0, w), sw = tern_view_block(c->k, s, 0, p, 0, w);
            tern_view ow = tern_view_block(c->k, o, 0, p, 0, w);
            tern_kernel_load(c->k, tw, cc_view2d(c, xt, r0 * cols + c0, p, w, cols));
            if (arg) {
                tern_kernel_iota(c->k, ow, (int32_t)c0, 0);
                arg_index_m(c, c0 ? ci : bi, c0 ? cm : m, tw, sw, ow, best, last);
                if (c0) {
                    tile_tt(c, f, cm, m, beats);
                    tile_tt(c, ci, ci, bi, TERN_ALU_SUBTRACT);
                    tile_tt(c, ci, ci, f, TERN_ALU_MULT);
                    tile_tt(c, bi, bi, ci, TERN_ALU_ADD);
                    tile_tt(c, m, m, cm, best);
                }
            } else if (!c0) {
                tern_kernel_tensor_reduce(c->k, m, tw, TERN_ALU_MAX, 1, 1); /* -max */
                tern_kernel_activation(c->k, sw, tw, TERN_ACT_EXP, 1.0f, m, tern_view_none(), bi);
            } else {
                tern_kernel_tensor_reduce(c->k, cm, tw, TERN_ALU_MAX, 1, 1);
                tile_tt(c, cm, cm, m, TERN_ALU_MIN);      /* the new -max */
                tile_tt(c, f, cm, m, TERN_ALU_SUBTRACT);  /* old max - new max <= 0 */
                tile_act(c, f, f, TERN_ACT_EXP, 1.0f);
                tile_tt(c, bi, bi, f, TERN_ALU_MULT);
                tern_kernel_tensor_copy(c->k, VE, m, cm);
                tern_kernel_activation(c->k, sw, tw, TERN_ACT_EXP, 1.0f, m, tern_view_none(), ci);
                tile_tt(c, bi, bi, ci, TERN_ALU_ADD);
            }
        }
        if (arg) {
            tern_kernel_store(c->k, cc_view2d(c, yt, r0, p, 1, 1), bi);
        } else {
            if (kind == AX_LOGSOFTMAX) {
                tile_act(c, ci, bi, TERN_ACT_LOG, 1.0f);
                tile_tt(c, ci, ci, m, TERN_ALU_SUBTRACT); /* log(sum) + max */
            }
            for (uint64_t c0 = 0; c0 < cols && cc_ok(c); c0 += ROW_MAX) {
                uint64_t w = cols - c0 < ROW_MAX ? cols - c0 : ROW_MAX;
                tern_view tw = tern_view_block(c->k, t, 0, p, 0, w), sw = tern_view_block(c->k, s, 0, p, 0, w);
                tern_view ow = tern_view_block(c->k, o, 0, p, 0, w);
                tern_kernel_load(c->k, tw, cc_view2d(c, xt, r0 * cols + c0, p, w, cols));
                if (kind == AX_SOFTMAX) {
                    tern_kernel_activation(c->k, sw, tw, TERN_ACT_EXP, 1.0f, m, tern_view_none(), tern_view_none());
                    tile_ts_ap(c, ow, sw, TERN_ALU_DIVIDE, bi, TERN_ALU_BYPASS, tern_view_none());
                } else {
                    tile_ts_ap(c, ow, tw, TERN_ALU_SUBTRACT, ci, TERN_ALU_BYPASS, tern_view_none());
                }
                tern_kernel_store(c->k, cc_view2d(c, yt, r0 * cols + c0, p, w, cols), ow);
            }
        }
        tern_kernel_release(c->k, t);
        tern_kernel_release(c->k, s);
        tern_kernel_release(c->k, o);
        tern_kernel_release(c->k, st);
    }
}

static int lower_axis_op(compile_ctx *c)
{
    const tern_graph_node *n = cc_node(c);
    ax_kind kind = n->op_id == TERN_GOP_ARG_MAX       ? AX_ARGMAX
                   : n->op_id == TERN_GOP_ARG_MIN     ? AX_ARGMIN
                   : n->op_id == TERN_GOP_HARDMAX    ? AX_HARDMAX
                   : n->op_id == TERN_GOP_SOFTMAX    ? AX_SOFTMAX
                   : n->op_id == TERN_GOP_LOG_SOFTMAX ? AX_LOGSOFTMAX
                                                  : AX_CUMSUM;
    cc_value *x = cc_in(c, 0);
    if (!x)
        return 1;
    int64_t opset = tern_graph_opset(c->g);
    int64_t axis;
    int coerce = 0; /* Softmax-family before opset 13: the input is flattened to 2-D at axis */
    if (kind == AX_CUMSUM) {
        cc_value *a = cc_in(c, 1);
        if (!a || !a->is_const_scalar) {
            cc_fail(c, TERN_ERR_UNSUPPORTED, "CumSum with a run-time axis");
            return 1;
        }
        axis = (int64_t)a->const_scalar;
    } else if (kind == AX_ARGMAX || kind == AX_ARGMIN) {
        axis = tern_graph_attr_int(n, "axis", 0);
    } else {
        axis = tern_graph_attr_int(n, "axis", opset >= 13 ? -1 : 1);
        coerce = opset < 13;
    }
    axis = cc_norm_axis(axis, x->rank);
    if (x->rank == 0 || axis < 0 || axis >= x->rank) {
        cc_fail(c, TERN_ERR_INVALID, "axis %lld outside rank %d", (long long)axis, x->rank);
        return 1;
    }
    tern_dtype odt = kind == AX_ARGMAX || kind == AX_ARGMIN ? TERN_DTYPE_INT32 : cc_out_dtype(c, 0);
    cc_value *y = cc_out(c, 0, odt);
    if (!y)
        return 1;
    int red[CC_MAX_RANK] = {0};
    for (int d = 0; d < x->rank; d++)
        red[d] = coerce ? d >= axis : d == axis;
    uint64_t rows, cols;
    cc_value tin, tout;
    cc_value *xt = tile_axes_last(c, x, red, &tin, &rows, &cols);
    if (!xt)
        return 1;
    const int long_ok = kind == AX_ARGMAX || kind == AX_ARGMIN || kind == AX_SOFTMAX || kind == AX_LOGSOFTMAX;
    if (cols > ROW_MAX && (!long_ok || cols >= (uint64_t)IDX_BIG)) {
        cc_fail(c, TERN_ERR_UNSUPPORTED, "%s over %llu elements (at most %u%s)", n->op, (unsigned long long)cols,
                long_ok ? (unsigned)IDX_BIG - 1 : ROW_MAX, long_ok ? ", for exact fp32 indices" : "");
        tile_bcast_free(c, &tin, xt);
        return 1;
    }
    /* Same-shaped results computed in the permuted layout go to a scratch tensor, then back. */
    int same = kind != AX_ARGMAX && kind != AX_ARGMIN;
    cc_value *yt = y;
    if (same && xt != x) {
        yt = tile_tmp_value(c, &tout, y->dt, xt->rank, xt->dims);
        if (!yt) {
            tile_bcast_free(c, &tin, xt);
            return 1;
        }
    }
    int last = (int)tern_graph_attr_int(n, "select_last_index", 0);
    int exclusive = (int)tern_graph_attr_int(n, "exclusive", 0), reverse = (int)tern_graph_attr_int(n, "reverse", 0);
    if (cols > ROW_MAX)
        axis_long(c, kind, xt, same ? yt : y, rows, cols, last);
    for (uint64_t r0 = 0; r0 < rows && cols <= ROW_MAX && cc_ok(c); r0 += PARTS) {
        uint32_t p = (uint32_t)(rows - r0 < PARTS ? rows - r0 : PARTS), w = (uint32_t)cols;
        tern_view t = tile_new(c, p, w, "ax_in"), s = tile_new(c, p, w, "ax_tmp"), o = tile_new(c, p, w, "ax_out");
        tern_view r = tile_new(c, p, 1, "ax_r"), q = tile_new(c, p, 1, "ax_q");
        tern_kernel_load(c->k, t, cc_view2d(c, xt, r0 * cols, p, cols, cols));
        switch (kind) {
        case AX_ARGMAX:
        case AX_ARGMIN:
        case AX_HARDMAX:
            tern_kernel_iota(c->k, o, 0, 0);
            arg_index(c, r, t, s, o, kind == AX_ARGMIN ? TERN_ALU_MIN : TERN_ALU_MAX, last);
            if (kind == AX_HARDMAX)
                tile_ts_ap(c, o, o, TERN_ALU_IS_EQ, r, TERN_ALU_BYPASS, tern_view_none());
            break;
        case AX_SOFTMAX:
        case AX_LOGSOFTMAX:
            tern_kernel_tensor_reduce(c->k, r, t, TERN_ALU_MAX, 1, 1); /* -max */
            tern_kernel_activation(c->k, s, t, TERN_ACT_EXP, 1.0f, r, tern_view_none(), q); /* q = sum */
            if (kind == AX_SOFTMAX) {
                tile_ts_ap(c, o, s, TERN_ALU_DIVIDE, q, TERN_ALU_BYPASS, tern_view_none());
            } else {
                tile_act(c, q, q, TERN_ACT_LOG, 1.0f);
                tile_tt(c, q, q, r, TERN_ALU_SUBTRACT); /* log(sum) + max */
                      tile_ts_ap(c, o, t, TERN_ALU_SUBTRACT, q, TERN_ALU_BYPASS, tern_view_none());
            }
            break;
        case AX_CUMSUM: {
            tern_kernel_memset(c->k, VE, s, 0.0f);
            if (reverse) { /* a scan runs forward: reverse the columns on the way in and out */
                tern_view rv = t;
                rv.ap.offset += (uint64_t)(w - 1) * 4;
                rv.ap.dims[rv.ap.ndims - 1].step = -1;
                tern_kernel_tensor_copy(c->k, VE, o, rv);
                tern_kernel_tensor_copy(c->k, VE, t, o);
            }
            tern_kernel_tensor_tensor_scan(c->k, o, t, s, TERN_ALU_ADD, TERN_ALU_ADD, 0.0f);
            if (exclusive) { /* shift right by one: y[0] = 0, y[i] = inclusive[i - 1] */
                tern_kernel_memset(c->k, VE, s, 0.0f);
                if (w > 1)
                    tern_kernel_tensor_copy(c->k, VE, tern_view_block(c->k, s, 0, p, 1, w),
                                            tern_view_block(c->k, o, 0, p, 0, w - 1));
                tern_kernel_tensor_copy(c->k, VE, o, s);
            }
            if (reverse) {
                tern_view rv = o;
                rv.ap.offset += (uint64_t)(w - 1) * 4;
                rv.ap.dims[rv.ap.ndims - 1].step = -1;
                tern_kernel_tensor_copy(c->k, VE, s, rv);
                tern_kernel_tensor_copy(c->k, VE, o, s);
            }
            break;
        }
        }
        if (same)
            tern_kernel_store(c->k, cc_view2d(c, yt, r0 * cols, p, cols, cols), o);
        else
            tern_kernel_store(c->k, cc_view2d(c, y, r0, p, 1, 1), r);
        tern_kernel_release(c->k, t);
        tern_kernel_release(c->k, s);
        tern_kernel_release(c->k, o);
        tern_kernel_release(c->k, r);
        tern_kernel_release(c->k, q);
    }
    if (same && yt != y) {
        if (coerce) { /* the moved group is every axis from `axis` on: already in place */
            cc_copy(c, cc_view2d(c, y, 0, 1, y->numel, y->numel), cc_view2d(c, yt, 0, 1, y->numel, y->numel));
        } else {
            tile_axis_back(c, y, yt, (int)axis);
        }
        tile_tmp_free(c, &tout);
    }
    tile_bcast_free(c, &tin, xt);
    return 1;
}

/* ---- the fast special cases (tried before this file's general rules; each applies function says why it
 * declines, and a node without input 0 is taken so that the rule reports it) ---- */

static int lower_softmax(compile_ctx *c)
{
    const tern_graph_node *n = cc_node(c);
    cc_value *x = cc_in(c, 0);
    cc_value *y = cc_out(c, 0, TERN_DTYPE_FP32);
    if (!x || !y)
        return 1;
    int64_t axis = cc_norm_axis(tern_graph_attr_int(n, "axis", -1), x->rank);
    if (axis != x->rank - 1) {
        cc_fail(c, TERN_ERR_UNSUPPORTED, "Softmax over axis %lld (only the last axis)", (long long)axis);
        return 1;
    }
    tern_lib_softmax(c->k, tile_flat2d(c, y), tile_flat2d(c, x));
    return 1;
}

static int softmax_row_applies(compile_ctx *c, char *why, size_t len)
{
    const tern_graph_node *n = cc_node(c);
    cc_value *x = cc_in(c, 0);
    if (!x)
        return 1;
    /* before opset 13 the default axis is 1 (and the input is flattened there) */
    if (cc_norm_axis(tern_graph_attr_int(n, "axis", tern_graph_opset(c->g) >= 13 ? -1 : 1), x->rank) != x->rank - 1) {
        snprintf(why, len, "the axis is not the last one");
        return 0;
    }
    /* a row longer than tern_lib_softmax holds on one partition: chunked rule */
    if (!(x->rank > 0 && (uint64_t)x->dims[x->rank - 1] * 4 + 32 <= c->cfg.sbuf_partition_bytes)) {
        snprintf(why, len, "a row of %lld elements does not fit one SBUF partition",
                 x->rank > 0 ? (long long)x->dims[x->rank - 1] : 0LL);
        return 0;
    }
    return 1;
}

static const cc_rule axis_rules[] = {
    {TERN_GOP_SOFTMAX, "softmax.row", softmax_row_applies, lower_softmax},
    {TERN_GOP_ARG_MAX, "axis.general", NULL, lower_axis_op},
    {TERN_GOP_ARG_MIN, "axis.general", NULL, lower_axis_op},
    {TERN_GOP_HARDMAX, "axis.general", NULL, lower_axis_op},
    {TERN_GOP_SOFTMAX, "axis.general", NULL, lower_axis_op},
    {TERN_GOP_LOG_SOFTMAX, "axis.general", NULL, lower_axis_op},
    {TERN_GOP_CUM_SUM, "axis.general", NULL, lower_axis_op},
};
const cc_rule_set cc_rules_axis = CC_RULE_SET("lower_axis.c", axis_rules);
