/* ScatterND with reduction "add" over whole rows, lowered directly on the device: out = data, then for every index
 * i, out[indices[i], :] += updates[i, :]. It is the embedding gradient of a real vocabulary (GPT-2's 50,257 rows),
 * where the one-hot expansion (expand_scatter.c) would build an [N, V] one-hot and a V x N x R matmul; the graph
 * layer leaves this form to this rule above GRAPH_SCATTER_ROWS_MIN rows (expand.h). Work per block of up to 128
 * indices (one per partition):
 *   - E[j, i] = (index j == index i) on VectorE, from the indices as a column and as a row broadcast to every
 *     partition (negative indices count from the end first);
 *   - S = E^T x U on TensorE (U: the block's update rows): S[i] sums, over the block's rows j with the same index,
 *     U[j] in ascending j (the PE array's fp32 fma chain; the zero terms of other indices change nothing);
 *   - the table rows the block names come in by dma_gather, VectorE adds S to them, and dma_scatter writes them back.
 *     Every row of a repeated index carries the same sum, so which of them is written last does not matter.
 * Blocks run in index order, each after the previous block's writes (the scatter writes the whole table as far as
 * hazards go), so the result is deterministic: a row's updates are summed in index order within each block of 128
 * and the block sums added to the row in block order. The table is out's storage: data's own when nothing reads
 * data afterwards (the gradient's zeros or the tied weight's other gradient), else a copy. dma_gather and
 * dma_scatter address at most 65,535 rows (the access pattern's 16-bit partition count). */
#include "compiler/compile_internal.h"

#include <stdio.h>
#include <string.h>

#define SA_COLS 2048u /* table columns per gathered block (8 KiB of fp32 per partition) */
#define SA_BANK 512u  /* fp32 columns of one PSUM bank: a matmul's moving free size */

/* May out take data's storage? Only when data is a device scratch value that no later node reads, through any
 * alias of its storage. */
static int can_update_in_place(compile_ctx *c, int data_id)
{
    const cc_value *d = &c->v[data_id], *own = &c->v[d->owner];
    const tern_graph_value *gv = tern_graph_value_at(c->g, d->owner);
    if (!d->placed || d->host || own->host || !own->scratch || own->released)
        return 0;
    if (gv->flags & (TERN_VALUE_INPUT | TERN_VALUE_OUTPUT))
        return 0;
    return d->last_use <= c->node && own->last_use <= c->node;
}

static int lower_scatter_add(compile_ctx *c)
{
    const tern_graph_node *n = cc_node(c);
    cc_value *data = cc_in(c, 0), *idx = cc_in(c, 1), *upd = cc_in(c, 2);
    if (!data || !idx || !upd)
        return 1;
    const char *red = tern_graph_attr_string(n, "reduction", "none");
    if (strcmp(red, "add") != 0 || idx->rank < 1 || idx->dims[idx->rank - 1] != 1 || data->rank < 1) {
        cc_fail(c, TERN_ERR_UNSUPPORTED,
                "ScatterND on the device takes reduction \"add\" of whole rows (indices [..., 1]); this one has "
                "reduction \"%s\" and index tuples of %lld (the graph layer expands the others)",
                red, idx->rank ? (long long)idx->dims[idx->rank - 1] : 0LL);
        return 1;
    }
    if (!tern_dtype_is_float(data->dt) || !tern_dtype_is_float(upd->dt)) {
        cc_fail(c, TERN_ERR_UNSUPPORTED, "ScatterND of %s data: the row scatter adds floats",
                tern_dtype_name(data->dt));
        return 1;
    }
    uint64_t V = (uint64_t)data->dims[0], R = V ? data->numel / V : 0, N = idx->numel;
    if (upd->numel != N * R) {
        cc_fail(c, TERN_ERR_INVALID, "updates of %llu elements for %llu indices of rows of %llu",
                (unsigned long long)upd->numel, (unsigned long long)N, (unsigned long long)R);
        return 1;
    }
    if (V > UINT16_MAX) {
        cc_fail(c, TERN_ERR_UNSUPPORTED,
                "ScatterND into %llu rows: dma_gather and dma_scatter address at most %u rows (a 16-bit field)",
                (unsigned long long)V, UINT16_MAX);
        return 1;
    }
    cc_value *y;
    if (can_update_in_place(c, cc_in_id(c, 0)))
        y = cc_alias(c, 0, 0);
    else {
        y = cc_out(c, 0, data->dt);
        if (y && y->numel)
            cc_copy(c, y->flat, cc_view2d(c, data, 0, 1, data->numel, data->numel));
    }
    if (!y || !cc_ok(c) || N == 0 || R == 0)
        return 1;
    tern_kernel *k = c->k;
    const uint64_t P = c->cfg.partitions;
    const int32_t unit = 1;
    for (uint64_t i0 = 0; i0 < N && cc_ok(c); i0 += P) {
        uint32_t p = (uint32_t)(N - i0 < P ? N - i0 : P);
        /* the block's indices: a column (one per partition) and a row on every partition, made non-negative */
        tern_view col = tern_kernel_sbuf(k, TERN_DTYPE_FP32, p, 1, "sa_col");
        tern_view row = tern_kernel_sbuf(k, TERN_DTYPE_FP32, p, p, "sa_row");
        tern_view neg = tern_kernel_sbuf(k, TERN_DTYPE_FP32, p, p, "sa_neg");
        tern_view ids = tern_kernel_sbuf(k, TERN_DTYPE_INT32, p, 1, "sa_ids");
        tern_view eq = tern_kernel_sbuf(k, TERN_DTYPE_FP32, p, p, "sa_eq");
        tern_kernel_load(k, col, cc_view2d(c, idx, i0, p, 1, 1));
        uint32_t pw = p;
        tern_kernel_load(k, row, cc_view(c, idx, i0, p, 0, 1, &pw, &unit));
        tern_view negc = tern_view_block(k, neg, 0, p, 0, 1);
        tern_kernel_tensor_scalar(k, TERN_ENGINE_VECTOR, negc, col, TERN_ALU_IS_LT, 0.0f, TERN_ALU_MULT, (float)V);
        tern_kernel_tensor_tensor(k, TERN_ENGINE_VECTOR, col, col, negc, TERN_ALU_ADD);
        tern_kernel_tensor_scalar(k, TERN_ENGINE_VECTOR, neg, row, TERN_ALU_IS_LT, 0.0f, TERN_ALU_MULT, (float)V);
        tern_kernel_tensor_tensor(k, TERN_ENGINE_VECTOR, row, row, neg, TERN_ALU_ADD);
        tern_kernel_tensor_copy(k, TERN_ENGINE_VECTOR, ids, col);
        tern_kernel_tensor_scalar_ap(k, TERN_ENGINE_VECTOR, eq, row, TERN_ALU_IS_EQ, col, 0.0f, TERN_ALU_BYPASS,
                                     tern_view_none(), 0.0f, 0);
        for (uint64_t c0 = 0; c0 < R && cc_ok(c); c0 += SA_COLS) {
            uint32_t w = (uint32_t)(R - c0 < SA_COLS ? R - c0 : SA_COLS);
            tern_view u = tern_kernel_sbuf(k, TERN_DTYPE_FP32, p, w, "sa_upd");
            tern_view t = tern_kernel_sbuf(k, TERN_DTYPE_FP32, p, w, "sa_rows");
            tern_kernel_load(k, u, cc_view2d(c, upd, i0 * R + c0, p, w, R));
            tern_view table = cc_view2d(c, y, c0, V, w, R);
            tern_kernel_dma_gather(k, t, table, ids, -1);
            for (uint32_t b0 = 0; b0 < w && cc_ok(c); b0 += SA_BANK) {
                uint32_t bw = w - b0 < SA_BANK ? w - b0 : SA_BANK;
                tern_view ps = tern_kernel_psum(k, TERN_DTYPE_FP32, p, bw, "sa_sum");
                tern_kernel_matmul(k, ps, eq, tern_view_block(k, u, 0, p, b0, b0 + bw), 0);
                tern_view tb = tern_view_block(k, t, 0, p, b0, b0 + bw);
                tern_kernel_tensor_tensor(k, TERN_ENGINE_VECTOR, tb, tb, ps, TERN_ALU_ADD);
                tern_kernel_release(k, ps);
            }
            tern_kernel_dma_scatter(k, table, t, ids, -1);
            tern_kernel_release(k, u);
            tern_kernel_release(k, t);
        }
        tern_kernel_release(k, col);
        tern_kernel_release(k, row);
        tern_kernel_release(k, neg);
        tern_kernel_release(k, ids);
        tern_kernel_release(k, eq);
    }
    /* the equality matmul is bookkeeping, not model arithmetic: no model_flops */
    return 1;
}

static int rows_add(compile_ctx *c, char *why, size_t len)
{
    const tern_graph_node *n = cc_node(c);
    const tern_graph_value *iv = n->n_inputs > 1 ? tern_graph_value_at(c->g, n->inputs[1]) : NULL;
    if (strcmp(tern_graph_attr_string(n, "reduction", "none"), "add") != 0 || !iv || iv->rank < 1 ||
        iv->dims[iv->rank - 1] != 1) {
        snprintf(why, len, "not a row scatter with reduction add (the graph layer expands the others)");
        return 0;
    }
    return 1;
}

static const cc_rule scatter_rules[] = {
    {TERN_GOP_SCATTER_ND, "scatter_nd.rows_add", rows_add, lower_scatter_add},
};
const cc_rule_set cc_rules_scatter = CC_RULE_SET("lower_scatter_add.c", scatter_rules);
