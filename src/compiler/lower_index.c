/* Gathers with run-time indices: Gather on any axis, GatherElements and GatherND, as per-row index arithmetic
 * in fp32 (exact below 2^24, IDX_BIG) driving DMA gathers; before them, the gather.const rule takes constant
 * indices and constant tables gathered on axis 0 (embeddings). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "compiler/lower_tiles.h"
#include "graph/graph_internal.h"
#include "graph/op_params.h"

/* ---- gathers with run-time indices ---- */

static void f_index(compile_ctx *c, const ew_ctx *x, const tern_view *in, tern_view o, const tern_view *s)
{ /* o = (idx + dim * (idx < 0)) * stride [+ base] */
    tile_ts(c, s[0], in[0], TERN_ALU_IS_LT, 0.0f, TERN_ALU_MULT, x->a);
    tile_tt(c, s[0], s[0], in[0], TERN_ALU_ADD);
    if (x->flag) {
        tile_ts(c, s[0], s[0], TERN_ALU_MULT, x->b, TERN_ALU_BYPASS, 0.0f);
        tile_tt(c, o, s[0], in[1], TERN_ALU_ADD);
    } else {
        tile_ts(c, o, s[0], TERN_ALU_MULT, x->b, TERN_ALU_BYPASS, 0.0f);
    }
}

/* int32 row ids from run-time indices (negative ones count from the end of an axis of `dim`), times stride, plus
 * an optional per-element base; ids is a fresh scratch value of idx's shape. */
static cc_value *row_ids(compile_ctx *c, cc_value *idx, int64_t dim, int64_t stride, cc_value *base, cc_value *ids)
{
    if (!tile_tmp_value(c, ids, TERN_DTYPE_INT32, idx->rank, idx->dims))
        return NULL;
    ew_ctx x = {cc_node(c), (float)dim, (float)stride, 1, base != NULL, TERN_ALU_BYPASS};
    cc_value *xs[2] = {idx, base};
    tile_ew_apply(c, xs, base ? 2 : 1, ids, f_index, &x, 0);
    return ids;
}

static int lower_gather_rt(compile_ctx *c)
{
    const tern_graph_node *n = cc_node(c);
    cc_value *data = cc_in(c, 0), *idx = cc_in(c, 1);
    cc_value *y = cc_out(c, 0, data ? data->dt : TERN_DTYPE_FP32);
    if (!data || !idx || !y)
        return 1;
    int64_t axis = cc_norm_axis(tern_graph_attr_int(n, "axis", 0), data->rank);
    if (axis < 0 || axis >= data->rank) {
        cc_fail(c, TERN_ERR_INVALID, "axis %lld outside rank %d", (long long)axis, data->rank);
        return 1;
    }
    uint64_t rows = (uint64_t)data->dims[axis], outer = 1, inner = 1, nidx = idx->numel;
    for (int d = 0; d < data->rank; d++)
        if (d < axis)
            outer *= (uint64_t)data->dims[d];
        else if (d > axis)
            inner *= (uint64_t)data->dims[d];
    if (nidx == 0 || y->numel == 0)
        return 1;
    cc_value ids;
    if (!row_ids(c, idx, (int64_t)rows, 1, NULL, &ids))
        return 1;
    tern_view idv = cc_view2d(c, &ids, 0, nidx, 1, 1);
    if (outer == 1) {
        tern_lib_embedding(c->k, cc_view2d(c, y, 0, nidx, inner, inner), cc_view2d(c, data, 0, rows, inner, inner),
                           idv);
    } else { /* table [rows, outer * inner] (axis first), gathered rows moved back to [outer, n, inner] */
        cc_value tab, got;
        int64_t td[3] = {(int64_t)rows, (int64_t)outer, (int64_t)inner};
        int64_t tst[3] = {(int64_t)inner, (int64_t)(rows * inner), 1};
        int64_t gd[3] = {(int64_t)nidx, (int64_t)outer, (int64_t)inner};
        if (tile_tmp_value(c, &tab, data->dt, 3, td) && tile_tmp_value(c, &got, data->dt, 3, gd)) {
            tile_gather_copy(c, &tab, data, 0, 3, td, tst);
            tern_lib_embedding(c->k, cc_view2d(c, &got, 0, nidx, outer * inner, outer * inner),
                               cc_view2d(c, &tab, 0, rows, outer * inner, outer * inner), idv);
            int64_t yd[3] = {(int64_t)outer, (int64_t)nidx, (int64_t)inner};
            int64_t yst[3] = {(int64_t)inner, (int64_t)(outer * inner), 1};
            tile_gather_copy(c, y, &got, 0, 3, yd, yst);
            tile_tmp_free(c, &got);
            tile_tmp_free(c, &tab);
        }
    }
    tile_tmp_free(c, &ids);
    return 1;
}

static int lower_gather_elements(compile_ctx *c)
{
    const tern_graph_node *n = cc_node(c);
    cc_value *data = cc_in(c, 0), *idx = cc_in(c, 1);
    cc_value *y = cc_out(c, 0, data ? data->dt : TERN_DTYPE_FP32);
    if (!data || !idx || !y)
        return 1;
    int64_t axis = cc_norm_axis(tern_graph_attr_int(n, "axis", 0), data->rank);
    if (axis < 0 || axis >= data->rank || idx->rank != data->rank) {
        cc_fail(c, TERN_ERR_INVALID, "axis %lld, data rank %d, indices rank %d", (long long)axis, data->rank,
                idx->rank);
        return 1;
    }
    if (y->numel == 0)
        return 1;
    if (data->numel >= (1u << 24)) {
        cc_fail(c, TERN_ERR_UNSUPPORTED, "GatherElements of a tensor of %llu elements (ids are computed in fp32)",
                (unsigned long long)data->numel);
        return 1;
    }
    /* element ids: base (every other axis' offset, a constant) + idx * stride(axis), gathered as 1-element rows */
    int64_t ds[CC_MAX_RANK];
    cc_strides(data, ds);
    tern_host_tensor *bh = NULL;
    tern_error e;
    int64_t n1 = (int64_t)idx->numel;
    if (tern_host_tensor_new(TERN_ELEM_FLOAT, 1, &n1, &bh, &e)) {
        cc_fail(c, e.code, "%s", e.msg);
        return 1;
    }
    for (uint64_t i = 0; i < idx->numel; i++) {
        uint64_t rem = i;
        int64_t off = 0;
        for (int d = idx->rank - 1; d >= 0; d--) {
            uint64_t id = rem % (uint64_t)idx->dims[d];
            rem /= (uint64_t)idx->dims[d];
            if (d != axis)
                off += (int64_t)id * ds[d];
        }
        bh->f[i] = (float)off;
    }
    cc_value base;
    memset(&base, 0, sizeof base);
    base.dt = TERN_DTYPE_FP32;
    base.rank = idx->rank;
    memcpy(base.dims, idx->dims, sizeof base.dims);
    base.numel = idx->numel;
    base.placed = 1;
    base.flat = cc_const2d(c, bh, TERN_DTYPE_FP32, 1, idx->numel, 0);
    tern_host_tensor_free(bh);
    cc_value ids;
    if (base.flat.region >= 0 && row_ids(c, idx, data->dims[axis], ds[axis], &base, &ids)) {
        tern_lib_embedding(c->k, cc_view2d(c, y, 0, y->numel, 1, 1), cc_view2d(c, data, 0, data->numel, 1, 1),
                           cc_view2d(c, &ids, 0, idx->numel, 1, 1));
        tile_tmp_free(c, &ids);
    }
    return 1;
}

static int lower_gather_nd(compile_ctx *c)
{
    const tern_graph_node *n = cc_node(c);
    cc_value *data = cc_in(c, 0), *idx = cc_in(c, 1);
    cc_value *y = cc_out(c, 0, data ? data->dt : TERN_DTYPE_FP32);
    if (!data || !idx || !y)
        return 1;
    int64_t b = tern_graph_attr_int(n, "batch_dims", 0);
    int64_t m = idx->rank ? idx->dims[idx->rank - 1] : 0;
    if (idx->rank < 1 || m < 1 || b < 0 || b + m > data->rank || b >= idx->rank) {
        cc_fail(c, TERN_ERR_INVALID, "GatherND of data rank %d, indices rank %d, batch_dims %lld", data->rank,
                idx->rank, (long long)b);
        return 1;
    }
    uint64_t B = 1, inner = 1, per = 1; /* batches, slice elements, slices per batch */
    for (int64_t d = 0; d < b; d++)
        B *= (uint64_t)data->dims[d];
    for (int64_t d = b; d < b + m; d++)
        per *= (uint64_t)data->dims[d];
    for (int64_t d = b + m; d < data->rank; d++)
        inner *= (uint64_t)data->dims[d];
    uint64_t nt = idx->numel / (uint64_t)m; /* index tuples */
    if (nt == 0 || y->numel == 0)
        return 1;
    if (B * per >= (1u << 24) || nt > ROW_MAX * 64) {
        cc_fail(c, TERN_ERR_UNSUPPORTED, "GatherND over %llu slices", (unsigned long long)(B * per));
        return 1;
    }
    /* constant rows: the tuple's dims and strides (in slices); per tuple the batch's first slice */
    tern_host_tensor *hd = NULL, *hs = NULL, *hb = NULL;
    tern_error e;
    int64_t nt64 = (int64_t)nt;
    if (tern_host_tensor_new(TERN_ELEM_FLOAT, 1, &m, &hd, &e) || tern_host_tensor_new(TERN_ELEM_FLOAT, 1, &m, &hs, &e) ||
        tern_host_tensor_new(TERN_ELEM_FLOAT, 1, &nt64, &hb, &e)) {
        tern_host_tensor_free(hd);
        tern_host_tensor_free(hs);
        cc_fail(c, e.code, "%s", e.msg);
        return 1;
    }
    uint64_t stv = 1;
    for (int64_t k = m - 1; k >= 0; k--) {
        hd->f[k] = (float)data->dims[b + k];
        hs->f[k] = (float)stv;
        stv *= (uint64_t)data->dims[b + k];
    }
    for (uint64_t t = 0; t < nt; t++)
        hb->f[t] = (float)((t / (nt / B)) * per);
    tern_view dv = cc_const2d(c, hd, TERN_DTYPE_FP32, 1, (uint64_t)m, 0);
    tern_view sv = cc_const2d(c, hs, TERN_DTYPE_FP32, 1, (uint64_t)m, 0);
    tern_view bv = cc_const2d(c, hb, TERN_DTYPE_FP32, nt, 1, 0);
    tern_host_tensor_free(hd);
    tern_host_tensor_free(hs);
    tern_host_tensor_free(hb);
    cc_value ids;
    int64_t idd[1] = {(int64_t)nt};
    if (!tile_tmp_value(c, &ids, TERN_DTYPE_INT32, 1, idd))
        return 1;
    for (uint64_t r0 = 0; r0 < nt && cc_ok(c); r0 += PARTS) {
        uint32_t p = (uint32_t)(nt - r0 < PARTS ? nt - r0 : PARTS), w = (uint32_t)m;
        tern_view t = tile_new(c, p, w, "gnd_idx"), s = tile_new(c, p, w, "gnd_tmp"), dims = tile_new(c, p, w, "gnd_dims");
        tern_view str = tile_new(c, p, w, "gnd_str"), r = tile_new(c, p, 1, "gnd_id"), base = tile_new(c, p, 1, "gnd_base");
        tern_kernel_load(c->k, t, cc_view2d(c, idx, r0 * (uint64_t)m, p, (uint64_t)m, (uint64_t)m));
        tern_lib_broadcast_row(c->k, dims, dv);
        tern_lib_broadcast_row(c->k, str, sv);
        tern_kernel_load(c->k, base, tern_view_block(c->k, bv, r0, r0 + p, 0, 1));
        tile_ts(c, s, t, TERN_ALU_IS_LT, 0.0f, TERN_ALU_BYPASS, 0.0f); /* negative: from the end of its axis */
              tile_tt(c, s, s, dims, TERN_ALU_MULT);
        tile_tt(c, t, t, s, TERN_ALU_ADD);
        tile_tt(c, t, t, str, TERN_ALU_MULT);
        tern_kernel_tensor_reduce(c->k, r, t, TERN_ALU_ADD, 1, 0);
        tile_tt(c, r, r, base, TERN_ALU_ADD);
        tern_kernel_store(c->k, cc_view2d(c, &ids, r0, p, 1, 1), r);
        tern_kernel_release(c->k, t);
        tern_kernel_release(c->k, s);
        tern_kernel_release(c->k, dims);
        tern_kernel_release(c->k, str);
        tern_kernel_release(c->k, r);
        tern_kernel_release(c->k, base);
    }
    tern_lib_embedding(c->k, cc_view2d(c, y, 0, nt, inner, inner), cc_view2d(c, data, 0, B * per, inner, inner),
                       cc_view2d(c, &ids, 0, nt, 1, 1));
    tile_tmp_free(c, &ids);
    return 1;
}

/* ---- the fast special cases (tried before this file's general rules; each applies function says why it
 * declines, and a node without input 0 is taken so that the rule reports it) ---- */

static int lower_gather(compile_ctx *c)
{
    const tern_graph_node *n = cc_node(c);
    cc_value *data = cc_in(c, 0), *idx = cc_in(c, 1);
    cc_value *y = cc_out(c, 0, data ? data->dt : TERN_DTYPE_FP32);
    if (!data || !idx || !y)
        return 1;
    int64_t axis = cc_norm_axis(tern_graph_attr_int(n, "axis", 0), data->rank);
    uint64_t rows = (uint64_t)data->dims[axis], inner = 1, outer = 1;
    for (int d = (int)axis + 1; d < data->rank; d++)
        inner *= (uint64_t)data->dims[d];
    for (int d = 0; d < axis; d++)
        outer *= (uint64_t)data->dims[d];
    if (idx->host) { /* constant indices: one copy per index */
        for (size_t i = 0; i < idx->host->count && cc_ok(c); i++) {
            int64_t r = (int64_t)tern_host_tensor_get(idx->host, i);
            if (r < 0)
                r += (int64_t)rows;
            if (r < 0 || (uint64_t)r >= rows) {
                cc_fail(c, TERN_ERR_RANGE, "index %lld outside axis %lld of size %llu", (long long)r, (long long)axis,
                        (unsigned long long)rows);
                return 1;
            }
            cc_copy(c, cc_view2d(c, y, i * inner, outer, inner, idx->host->count * inner),
                    cc_view2d(c, data, (uint64_t)r * inner, outer, inner, rows * inner));
        }
        return 1;
    }
    if (axis != 0 || !data->host) {
        cc_fail(c, TERN_ERR_UNSUPPORTED, "Gather of run-time indices along axis %lld of a non-constant tensor",
                (long long)axis);
        return 1;
    }
    tern_view table = cc_view2d(c, data, 0, rows, inner, inner);
    tern_lib_embedding(c->k, cc_view2d(c, y, 0, idx->numel, inner, inner), table,
                       cc_view2d(c, idx, 0, idx->numel, 1, 1));
    return 1;
}

static int gather_const_applies(compile_ctx *c, char *why, size_t len)
{
    cc_value *x = cc_in(c, 0), *b = cc_in(c, 1);
    if (!x)
        return 1;
    if (!(b && (b->host || (x->host && cc_norm_axis(tern_graph_attr_int(cc_node(c), "axis", 0), x->rank) == 0)))) {
        snprintf(why, len, "the indices are computed and the data is not a constant gathered on axis 0");
        return 0;
    }
    return 1;
}

static const cc_rule index_rules[] = {
    {TERN_GOP_GATHER, "gather.const", gather_const_applies, lower_gather},
    {TERN_GOP_GATHER, "gather.runtime", NULL, lower_gather_rt},
    {TERN_GOP_GATHER_ELEMENTS, "gather_elements", NULL, lower_gather_elements},
    {TERN_GOP_GATHER_ND, "gather_nd", NULL, lower_gather_nd},
};
const cc_rule_set cc_rules_index = CC_RULE_SET("lower_index.c", index_rules);
