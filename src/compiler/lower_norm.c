/* Normalisations in general: LayerNormalization over any axis with its Mean/InvStdDev outputs,
 * InstanceNormalization, MeanVarianceNormalization and LRN, on row statistics of [rows, cols] tiles after the
 * normalised axes are moved innermost; before them, the layernorm.row rule takes the last-axis
 * LayerNormalization with the library's row kernel. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "compiler/lower_tiles.h"
#include "graph/graph_internal.h"
#include "graph/op_params.h"

/* ---- normalisations ---- */

/* Per-row statistics and the normalised rows of x[rows, cols]: y = (x - mean) * rstd [* gamma + beta], with mean
 * and rstd = 1/sqrt(var + eps) stored to mean_out / rstd_out when given (NULL: not wanted). */
static void norm_rows(compile_ctx *c, cc_value *x, cc_value *y, uint64_t rows, uint64_t cols, float eps,
                      cc_value *gamma,
                      cc_value *beta, cc_value *mean_out, cc_value *rstd_out)
{
    for (uint64_t r0 = 0; r0 < rows && cc_ok(c); r0 += PARTS) {
        uint32_t p = (uint32_t)(rows - r0 < PARTS ? rows - r0 : PARTS), w = (uint32_t)cols;
        tern_view t = tile_new(c, p, w, "ln_x"), s = tile_new(c, p, w, "ln_sq");
        tern_view m = tile_new(c, p, 1, "ln_mean"), v = tile_new(c, p, 1, "ln_var");
        tern_kernel_load(c->k, t, cc_view2d(c, x, r0 * cols, p, cols, cols));
        tern_kernel_tensor_reduce(c->k, m, t, TERN_ALU_ADD, 1, 0);
        tile_ts(c, m, m, TERN_ALU_MULT, 1.0f / (float)cols, TERN_ALU_BYPASS, 0.0f);
        tile_ts_ap(c, t, t, TERN_ALU_SUBTRACT, m, TERN_ALU_BYPASS, tern_view_none());
        tern_kernel_activation(c->k, s, t, TERN_ACT_SQUARE, 1.0f, tern_view_none(), tern_view_none(), v);
        tile_ts(c, v, v, TERN_ALU_MULT, 1.0f / (float)cols, TERN_ALU_ADD, eps);
        tile_act(c, v, v, TERN_ACT_RSQRT, 1.0f);
        tile_ts_ap(c, t, t, TERN_ALU_MULT, v, TERN_ALU_BYPASS, tern_view_none());
        if (gamma) {
            tern_lib_broadcast_row(c->k, s, cc_view2d(c, gamma, 0, 1, cols, cols));
            tile_tt(c, t, t, s, TERN_ALU_MULT);
        }
        if (beta) {
            tern_lib_broadcast_row(c->k, s, cc_view2d(c, beta, 0, 1, cols, cols));
            tile_tt(c, t, t, s, TERN_ALU_ADD);
        }
        tern_kernel_store(c->k, cc_view2d(c, y, r0 * cols, p, cols, cols), t);
        if (mean_out)
            tern_kernel_store(c->k, cc_view2d(c, mean_out, r0, p, 1, 1), m);
        if (rstd_out)
            tern_kernel_store(c->k, cc_view2d(c, rstd_out, r0, p, 1, 1), v);
        tern_kernel_release(c->k, t);
        tern_kernel_release(c->k, s);
        tern_kernel_release(c->k, m);
        tern_kernel_release(c->k, v);
    }
}

/* A per-column vector (gamma/beta) of `cols` elements: the value itself, or its broadcast to [cols]. */
static cc_value *as_row(compile_ctx *c, cc_value *g, uint64_t cols, const int64_t *ndims, int nd, cc_value *tmp)
{
    if (!g || g->numel == cols)
        return g;
    cc_value shape;
    memset(&shape, 0, sizeof shape);
    shape.rank = nd;
    for (int d = 0; d < nd; d++)
        shape.dims[d] = ndims[d];
    return tile_bcast(c, g, &shape, tmp);
}

static int lower_layernorm_any(compile_ctx *c)
{
    const tern_graph_node *n = cc_node(c);
    cc_value *x = cc_in(c, 0), *g = cc_in(c, 1), *b = cc_in(c, 2);
    if (!x)
        return 1;
    int64_t axis = cc_norm_axis(tern_graph_attr_int(n, "axis", -1), x->rank);
    if (axis < 0 || axis >= x->rank) {
        cc_fail(c, TERN_ERR_INVALID, "axis %lld outside rank %d", (long long)axis, x->rank);
        return 1;
    }
    uint64_t rows = 1, cols = 1;
    for (int d = 0; d < x->rank; d++)
        *(d < axis ? &rows : &cols) *= (uint64_t)x->dims[d];
    if (cols > ROW_MAX) {
        cc_fail(c, TERN_ERR_UNSUPPORTED, "LayerNormalization over %llu elements", (unsigned long long)cols);
        return 1;
    }
    cc_value *y = cc_out(c, 0, cc_out_dtype(c, 0));
    cc_value *mean = cc_out_id(c, 1) >= 0 ? cc_out(c, 1, TERN_DTYPE_FP32) : NULL;
    cc_value *rstd = cc_out_id(c, 2) >= 0 ? cc_out(c, 2, TERN_DTYPE_FP32) : NULL;
    if (!y)
        return 1;
    cc_value tg, tb;
    cc_value *gr = as_row(c, g, cols, x->dims + axis, x->rank - (int)axis, &tg);
    cc_value *br = as_row(c, b, cols, x->dims + axis, x->rank - (int)axis, &tb);
    norm_rows(c, x, y, rows, cols, tern_graph_attr_float(n, "epsilon", 1e-5f), gr, br, mean, rstd);
    if (gr)
        tile_bcast_free(c, &tg, gr);
    if (br)
        tile_bcast_free(c, &tb, br);
    return 1;
}

static int lower_instancenorm(compile_ctx *c)
{
    const tern_graph_node *n = cc_node(c);
    cc_value *x = cc_in(c, 0), *sc = cc_in(c, 1), *bi = cc_in(c, 2);
    cc_value *y = cc_out(c, 0, cc_out_dtype(c, 0));
    if (!x || !sc || !bi || !y)
        return 1;
    if (x->rank < 3) {
        cc_fail(c, TERN_ERR_INVALID, "InstanceNormalization of rank %d", x->rank);
        return 1;
    }
    uint64_t N = (uint64_t)x->dims[0], C = (uint64_t)x->dims[1], rows = N * C, cols = x->numel / (rows ? rows : 1);
    if (cols > ROW_MAX) {
        cc_fail(c, TERN_ERR_UNSUPPORTED, "InstanceNormalization over %llu elements", (unsigned long long)cols);
        return 1;
    }
    norm_rows(c, x, y, rows, cols, tern_graph_attr_float(n, "epsilon", 1e-5f), NULL, NULL, NULL, NULL);
    /* per-row scale and bias: scale[c] for row n * C + c */
    cc_value ts_v, tb_v;
    int64_t d2[2] = {(int64_t)N, (int64_t)C}, st[2] = {0, 1};
    if (!tile_tmp_value(c, &ts_v, TERN_DTYPE_FP32, 2, d2) || !tile_tmp_value(c, &tb_v, TERN_DTYPE_FP32, 2, d2))
        return 1;
    tile_gather_copy(c, &ts_v, sc, 0, 2, d2, st);
    tile_gather_copy(c, &tb_v, bi, 0, 2, d2, st);
    for (uint64_t r0 = 0; r0 < rows && cc_ok(c); r0 += PARTS) {
        uint32_t p = (uint32_t)(rows - r0 < PARTS ? rows - r0 : PARTS), w = (uint32_t)cols;
        tern_view t = tile_new(c, p, w, "in_y"), s = tile_new(c, p, 1, "in_s"), b = tile_new(c, p, 1, "in_b");
        tern_kernel_load(c->k, t, cc_view2d(c, y, r0 * cols, p, cols, cols));
        tern_kernel_load(c->k, s, cc_view2d(c, &ts_v, r0, p, 1, 1));
        tern_kernel_load(c->k, b, cc_view2d(c, &tb_v, r0, p, 1, 1));
        tile_ts_ap(c, t, t, TERN_ALU_MULT, s, TERN_ALU_ADD, b);
        tern_kernel_store(c->k, cc_view2d(c, y, r0 * cols, p, cols, cols), t);
        tern_kernel_release(c->k, t);
        tern_kernel_release(c->k, s);
        tern_kernel_release(c->k, b);
    }
    tile_tmp_free(c, &ts_v);
    tile_tmp_free(c, &tb_v);
    return 1;
}

/* ---- MeanVarianceNormalization, LRN ---- */

/* y (x's shape) from t laid out as tile_axes_last(red) made it: [kept axes..., reduced axes...]. */
static void axes_back(compile_ctx *c, cc_value *y, cc_value *t, const int *red)
{
    int order[CC_MAX_RANK], no = 0;
    for (int d = 0; d < y->rank; d++)
        if (!red[d])
            order[no++] = d;
    for (int d = 0; d < y->rank; d++)
        if (red[d])
            order[no++] = d;
    int64_t st[CC_MAX_RANK], s = 1;
    for (int k = y->rank - 1; k >= 0; k--) {
        st[order[k]] = s;
        s *= y->dims[order[k]];
    }
    tile_gather_copy(c, y, t, 0, y->rank, y->dims, st);
}

static int lower_mvn(compile_ctx *c)
{
    cc_value *x = cc_in(c, 0);
    cc_value *y = cc_out(c, 0, cc_out_dtype(c, 0));
    if (!x || !y)
        return 1;
    int red[CC_MAX_RANK] = {0};
    const tern_graph_attr *aa = tern_graph_node_attr(cc_node(c), "axes");
    if (aa) {
        for (size_t i = 0; i < aa->n; i++) {
            int64_t a = cc_norm_axis(aa->ints[i], x->rank);
            if (a < 0 || a >= x->rank) {
                cc_fail(c, TERN_ERR_INVALID, "axis %lld outside rank %d", (long long)aa->ints[i], x->rank);
                return 1;
            }
            red[a] = 1;
        }
    } else {
        for (int d = 0; d < x->rank; d++)
            red[d] = d != 1; /* default axes [0, 2, 3]: all but channels */
    }
    uint64_t rows, cols;
    cc_value tin, tout;
    cc_value *xt = tile_axes_last(c, x, red, &tin, &rows, &cols);
    if (!xt)
        return 1;
    if (cols > ROW_MAX) {
        cc_fail(c, TERN_ERR_UNSUPPORTED, "MeanVarianceNormalization over %llu elements", (unsigned long long)cols);
    } else if (xt == x) {
        norm_rows(c, x, y, rows, cols, 1e-18f, NULL, NULL, NULL, NULL);
    } else if (tile_tmp_value(c, &tout, y->dt, xt->rank, xt->dims)) {
        /* ONNX divides by sqrt(var) + 1e-9; rsqrt(var + 1e-18) differs by far less than the tolerance */
        norm_rows(c, xt, &tout, rows, cols, 1e-18f, NULL, NULL, NULL, NULL);
        axes_back(c, y, &tout, red);
        tile_tmp_free(c, &tout);
    }
    tile_bcast_free(c, &tin, xt);
    return 1;
}

static void f_lrn(compile_ctx *c, const ew_ctx *x, const tern_view *in, tern_view o, const tern_view *s)
{ /* x / (bias + alpha / size * sum)^beta, the power as exp(beta * ln(.)) (the base is positive) */
    tile_ts(c, s[0], in[1], TERN_ALU_MULT, x->a, TERN_ALU_ADD, x->b);
    tile_act(c, s[0], s[0], TERN_ACT_LOG, 1.0f);
    tile_act(c, s[0], s[0], TERN_ACT_EXP, x->g);
    tile_tt(c, o, in[0], s[0], TERN_ALU_DIVIDE);
}

static int lower_lrn(compile_ctx *c)
{
    const tern_graph_node *n = cc_node(c);
    cc_value *x = cc_in(c, 0);
    cc_value *y = cc_out(c, 0, cc_out_dtype(c, 0));
    if (!x || !y)
        return 1;
    if (x->rank < 3) {
        cc_fail(c, TERN_ERR_INVALID, "LRN of rank %d", x->rank);
        return 1;
    }
    if (!tile_need_float(c, x))
        return 1;
    int64_t size = tern_graph_attr_int(n, "size", 1), C = x->dims[1];
    if (C > (int64_t)ROW_MAX) {
        cc_fail(c, TERN_ERR_UNSUPPORTED, "LRN over %lld channels", (long long)C);
        return 1;
    }
    /* x with channels last ([rows, C]) and first ([C, rows], squared: the GEMM's lhsT); sum = sq @ band */
    int red[CC_MAX_RANK] = {0};
    red[1] = 1;
    uint64_t rows, cols;
    cc_value tin, sq, sum, yt;
    cc_value *xl = tile_axes_last(c, x, red, &tin, &rows, &cols);
    if (!xl)
        return 1;
    int64_t fd[2] = {C, (int64_t)rows}, sd[2] = {(int64_t)rows, C};
    if (!tile_tmp_value(c, &sq, TERN_DTYPE_FP32, 2, fd)) {
        tile_bcast_free(c, &tin, xl);
        return 1;
    }
    int64_t st2[2] = {1, C};
    tile_gather_copy(c, &sq, xl, 0, 2, fd, st2);
    tern_lib_unary(c->k, cc_view2d(c, &sq, 0, (uint64_t)C, rows, rows), cc_view2d(c, &sq, 0, (uint64_t)C, rows, rows),
                   TERN_ACT_SQUARE, 1.0f);
    tern_host_tensor *band = NULL;
    tern_error e;
    int64_t bd[2] = {C, C};
    if (tern_host_tensor_new(TERN_ELEM_FLOAT, 2, bd, &band, &e)) {
        cc_fail(c, e.code, "%s", e.msg);
        return 1;
    }
    int64_t lo = (size - 1) / 2, hi = size - 1 - lo; /* window [c - floor((size-1)/2), c + ceil((size-1)/2)] */
    for (int64_t i = 0; i < C; i++)
        for (int64_t j = 0; j < C; j++)
            band->f[i * C + j] = (i >= j - lo && i <= j + hi) ? 1.0f : 0.0f;
    tern_view bv = cc_const2d(c, band, TERN_DTYPE_FP32, (uint64_t)C, (uint64_t)C, 0);
    tern_host_tensor_free(band);
    if (tile_tmp_value(c, &sum, TERN_DTYPE_FP32, 2, sd)) {
        tern_gemm_opts go;
        tern_gemm_opts_default(&go);
        go.acc_dtype = TERN_DTYPE_FP32;
        go.tiles_in_block_m = 8;
        tern_lib_gemm(c->k, cc_view2d(c, &sum, 0, rows, (uint64_t)C, (uint64_t)C),
                      cc_view2d(c, &sq, 0, (uint64_t)C, rows, rows), bv, &go);
        ew_ctx ctx = {n, tern_graph_attr_float(n, "alpha", 1e-4f) / (float)size, tern_graph_attr_float(n, "bias", 1.0f),
                      tern_graph_attr_float(n, "beta", 0.75f), 0, TERN_ALU_BYPASS};
        cc_value *dst = xl == x ? y : tile_tmp_value(c, &yt, y->dt, xl->rank, xl->dims);
        if (dst) {
            cc_value *xs[2] = {xl, &sum};
            sum.rank = xl->rank;
            memcpy(sum.dims, xl->dims, sizeof sum.dims);
            tile_ew_apply(c, xs, 2, dst, f_lrn, &ctx, 0);
            if (dst != y) {
                axes_back(c, y, dst, red);
                tile_tmp_free(c, &yt);
            }
        }
        tile_tmp_free(c, &sum);
    }
    tile_tmp_free(c, &sq);
    tile_bcast_free(c, &tin, xl);
    return 1;
}

/* ---- the fast special cases (tried before this file's general rules; each applies function says why it
 * declines, and a node without input 0 is taken so that the rule reports it) ---- */

static int lower_layernorm(compile_ctx *c)
{
    const tern_graph_node *n = cc_node(c);
    cc_value *x = cc_in(c, 0), *g = cc_in(c, 1), *b = cc_in(c, 2);
    cc_value *y = cc_out(c, 0, cc_float_out_dtype(c, 0));
    if (!x || !y)
        return 1;
    int64_t axis = cc_norm_axis(tern_graph_attr_int(n, "axis", -1), x->rank);
    if (axis != x->rank - 1) {
        cc_fail(c, TERN_ERR_UNSUPPORTED, "LayerNormalization over axis %lld (only the last axis)", (long long)axis);
        return 1;
    }
    uint64_t r, cl;
    tile_rows_cols(x, &r, &cl);
    tern_view gv = g ? cc_view2d(c, g, 0, 1, cl, cl) : tern_view_none();
    tern_view bv = b ? cc_view2d(c, b, 0, 1, cl, cl) : tern_view_none();
    tern_lib_layernorm(c->k, tile_flat2d(c, y), tile_flat2d(c, x), gv, bv, tern_graph_attr_float(n, "epsilon", 1e-5f));
    y->stored_off_sync = 1; /* tern_lib_layernorm stores from ScalarE's queue */
    return 1;
}

static int layernorm_row_applies(compile_ctx *c, char *why, size_t len)
{
    cc_value *x = cc_in(c, 0);
    if (!x)
        return 1;
    if (cc_norm_axis(tern_graph_attr_int(cc_node(c), "axis", -1), x->rank) != x->rank - 1) {
        snprintf(why, len, "the axis is not the last one");
        return 0;
    }
    if (cc_out_id(c, 1) >= 0 || cc_out_id(c, 2) >= 0) {
        snprintf(why, len, "the mean or inverse standard deviation output is used");
        return 0;
    }
    return 1;
}

static const cc_rule norm_rules[] = {
    {TERN_GOP_LAYER_NORMALIZATION, "layernorm.row", layernorm_row_applies, lower_layernorm},
    {TERN_GOP_LAYER_NORMALIZATION, "layernorm.any", NULL, lower_layernorm_any},
    {TERN_GOP_INSTANCE_NORMALIZATION, "instancenorm", NULL, lower_instancenorm},
    {TERN_GOP_MEAN_VARIANCE_NORMALIZATION, "mvn", NULL, lower_mvn},
    {TERN_GOP_LRN, "lrn", NULL, lower_lrn},
};
const cc_rule_set cc_rules_norm = CC_RULE_SET("lower_norm.c", norm_rules);
