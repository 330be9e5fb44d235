/* Elementwise kernels of the library: activations on ScalarE (tern_lib_unary), binary and scalar ALU ops on
 * VectorE (tern_lib_binary, tern_lib_scalar), and x + per-column bias followed by an activation
 * (tern_lib_bias_act). All tile [rows, cols] HBM views by 128 partitions and 2048-element column chunks, so
 * any shape fits in SBUF; each tile is loaded in its own dtype (exact), computed by one instruction that casts
 * to the output dtype, and stored. The per-column bias varies along the free dimension, which no per-partition
 * operand can express: tern_lib_broadcast_row replicates the row onto every partition (fp32: one small DMA and
 * TensorE multiplying a ones column; other dtypes: one DMA whose HBM side has partition step 0), once per column
 * chunk, and VectorE adds it as a tensor. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "kernel/builder_internal.h"
#include "tern/kernel_lib.h"

#define EW_CHUNK 2048u /* free elements per tile: 8 KiB per partition in fp32 */

static uint64_t min_u64(uint64_t a, uint64_t b) { return a < b ? a : b; }

/* A 2-D view, checked (names the kernel and operand on failure). */
static int need_2d(tern_kernel *k, const char *kn, const char *what, const tern_view *v)
{
    char label[64];
    snprintf(label, sizeof label, "%s %s", kn, what);
    if (!kview_ok(k, v, label))
        return 0;
    if (tern_view_rank(v) != 2) {
        kfail(k, TERN_ERR_INVALID, "%s: %s must be a 2-D [rows, cols] view, has rank %u", kn, what,
              tern_view_rank(v));
        return 0;
    }
    return 1;
}

static void shape_str(const tern_view *v, char *buf, size_t n)
{
    size_t l = (size_t)snprintf(buf, n, "[");
    for (unsigned d = 0; d < tern_view_rank(v) && l < n; d++)
        l += (size_t)snprintf(buf + l, n - l, "%s%llu", d ? ", " : "", (unsigned long long)tern_view_dim(v, d));
    if (l < n)
        snprintf(buf + l, n - l, "]");
}

static int need_same(tern_kernel *k, const char *kn, const char *wa, const tern_view *a, const char *wb,
                     const tern_view *b)
{
    if (tern_view_dim(a, 0) != tern_view_dim(b, 0) || tern_view_dim(a, 1) != tern_view_dim(b, 1)) {
        kfail(k, TERN_ERR_INVALID, "%s: %s is [%llu, %llu] but %s is [%llu, %llu] (shapes must be equal)", kn, wa,
              (unsigned long long)tern_view_dim(a, 0), (unsigned long long)tern_view_dim(a, 1), wb,
              (unsigned long long)tern_view_dim(b, 0), (unsigned long long)tern_view_dim(b, 1));
        return 0;
    }
    return 1;
}

void tern_lib_copy_scalar(tern_kernel *k, tern_view dst, tern_view src)
{
    if (k->cfg.generation >= 3)
        tern_kernel_tensor_copy(k, TERN_ENGINE_SCALAR, dst, src);
    else
        tern_kernel_activation(k, dst, src, TERN_ACT_COPY, 1.0f, kview_invalid(), kview_invalid(), kview_invalid());
}

void tern_lib_broadcast_row(tern_kernel *k, tern_view dst, tern_view row)
{
    if (!kview_ok(k, &dst, "broadcast_row dst") || !kview_ok(k, &row, "broadcast_row row"))
        return;
    if (row.ap.mem != TERN_MEM_HBM || dst.ap.mem != TERN_MEM_SBUF) {
        kfail(k, TERN_ERR_INVALID, "broadcast_row: row must be in HBM (is %s) and dst in SBUF (is %s)",
              tern_mem_name((tern_mem)row.ap.mem), tern_mem_name((tern_mem)dst.ap.mem));
        return;
    }
    unsigned rank = tern_view_rank(&row);
    if (!(rank == 1 || (rank == 2 && tern_view_dim(&row, 0) == 1)) || row.ap.num_partitions != 1) {
        kfail(k, TERN_ERR_INVALID, "broadcast_row: row must be [n] or [1, n], has rank %u (first dim %llu)", rank,
              (unsigned long long)tern_view_dim(&row, 0));
        return;
    }
    uint64_t n = tern_view_dim(&row, rank - 1), f = tern_ap_free_elems(&dst.ap);
    if (n != f) {
        kfail(k, TERN_ERR_INVALID, "broadcast_row: row has %llu elements, dst has %llu per partition",
              (unsigned long long)n, (unsigned long long)f);
        return;
    }
    /* Collapse [1, n] to [n], then let every destination partition read the same elements. */
    tern_view src = kview_row(row);
    const uint32_t P = dst.ap.num_partitions;
    if (P >= 16 && dst.ap.dtype == TERN_DTYPE_FP32 && row.ap.dtype == TERN_DTYPE_FP32 && tern_view_rank(&dst) == 2) {
        /* On chip: one DMA brings the row to one partition, and TensorE replicates it, 512 columns per PSUM
         * bank, as ones[1, P]^T @ row[1, cols]: each element is the fp32 chain +0 + 1 * b = b (a -0 becomes +0),
         * so P rows cost n * 4 bytes of DMA instead of P * n * 4. */
        tern_view r1 = tern_kernel_sbuf(k, TERN_DTYPE_FP32, 1, (uint32_t)n, "broadcast_row_src");
        tern_view ones = tern_kernel_sbuf(k, TERN_DTYPE_FP32, 1, P, "broadcast_row_ones");
        tern_kernel_load(k, r1, src);
        tern_kernel_memset(k, TERN_ENGINE_GPSIMD, ones, 1.0f);
        for (uint64_t c0 = 0; c0 < n && !k->failed; c0 += 512) {
            uint64_t cw = min_u64(512, n - c0);
            tern_view ps = tern_kernel_psum(k, TERN_DTYPE_FP32, P, (uint32_t)cw, "broadcast_row_psum");
            tern_kernel_matmul(k, ps, ones, tern_view_block(k, r1, 0, 1, c0, c0 + cw), 0);
            tern_view d = tern_view_block(k, dst, 0, P, c0, c0 + cw);
            tern_lib_copy_scalar(k, d, ps);
            tern_kernel_release(k, ps);
        }
        tern_kernel_release(k, ones);
        tern_kernel_release(k, r1);
        return;
    }
    src.ap.num_partitions = P;
    src.ap.partition_step = 0;
    tern_kernel_load(k, dst, src);
}

/* The single-instruction kernels share one tile walk. */
typedef enum { EW_UNARY, EW_BINARY, EW_SCALAR, EW_RECIPROCAL, EW_COL } ew_kind;

typedef struct {
    ew_kind kind;
    tern_view out, a, b;
    tern_act_func f;
    float scale;
    tern_alu_op op;
    int rev; /* EW_COL: col op a instead of a op col */
} ew_job;

typedef struct {
    uint64_t r0, rp, c0, cw;
    tern_view ta, tb;
} ew_tile;

static void ew_load(tern_kernel *k, const ew_job *j, ew_tile *t)
{
    t->ta = tern_kernel_sbuf(k, (tern_dtype)j->a.ap.dtype, (uint32_t)t->rp, (uint32_t)t->cw, "ew_a");
    tern_kernel_load(k, t->ta, tern_view_block(k, j->a, t->r0, t->r0 + t->rp, t->c0, t->c0 + t->cw));
    t->tb = kview_invalid();
    if (j->kind == EW_BINARY) {
        t->tb = tern_kernel_sbuf(k, (tern_dtype)j->b.ap.dtype, (uint32_t)t->rp, (uint32_t)t->cw, "ew_b");
        tern_kernel_load(k, t->tb, tern_view_block(k, j->b, t->r0, t->r0 + t->rp, t->c0, t->c0 + t->cw));
    }
    if (j->kind == EW_COL) {
        /* The tile's rows' scalars, one per partition; tensor_scalar takes an fp32 column, and widening on chip
         * gives the values tensor_tensor would have read from a broadcast tile. */
        tern_view src = tern_view_block(k, j->b, t->r0, t->r0 + t->rp, 0, 1);
        t->tb = tern_kernel_sbuf(k, TERN_DTYPE_FP32, (uint32_t)t->rp, 1, "ew_col");
        if (j->b.ap.dtype == TERN_DTYPE_FP32) {
            tern_kernel_load(k, t->tb, src);
        } else {
            tern_view raw = tern_kernel_sbuf(k, (tern_dtype)j->b.ap.dtype, (uint32_t)t->rp, 1, "ew_col_raw");
            tern_kernel_load(k, raw, src);
            tern_kernel_tensor_copy(k, TERN_ENGINE_VECTOR, t->tb, raw);
            tern_kernel_release(k, raw);
        }
    }
}

/* Row tiles of 128 outside, 2048-column chunks inside. The next tile's loads are issued before this tile's
 * store, so the in-order DMA-issuing engine does not hold them behind this tile's computation (double
 * buffering: at most two tiles of inputs live). */
static void ew_run(tern_kernel *k, const ew_job *j)
{
    const uint64_t R = tern_view_dim(&j->a, 0), C = tern_view_dim(&j->a, 1), P = k->cfg.partitions;
    ew_tile cur = {0, min_u64(P, R), 0, min_u64(EW_CHUNK, C), {0}, {0}};
    ew_load(k, j, &cur);
    for (;;) {
        if (k->failed)
            return;
        ew_tile nxt = cur;
        int more = kernel_tile_next(R, C, P, EW_CHUNK, &nxt.r0, &nxt.rp, &nxt.c0, &nxt.cw);
        if (more)
            ew_load(k, j, &nxt);
        tern_view y = tern_kernel_sbuf(k, (tern_dtype)j->out.ap.dtype, (uint32_t)cur.rp, (uint32_t)cur.cw, "ew_out");
        int nan_fix = (j->op == TERN_ALU_MAX || j->op == TERN_ALU_MIN) && (j->kind == EW_BINARY || j->kind == EW_SCALAR) &&
                      tern_dtype_is_float((tern_dtype)j->out.ap.dtype);
        switch (j->kind) {
        case EW_UNARY:
            tern_kernel_activation(k, y, cur.ta, j->f, j->scale, kview_invalid(), kview_invalid(), kview_invalid());
            break;
        case EW_BINARY: tern_kernel_tensor_tensor(k, TERN_ENGINE_VECTOR, y, cur.ta, cur.tb, j->op); break;
        case EW_SCALAR:
            /* max/min with a NaN immediate is NaN (numpy); x + NaN gives it */
            tern_kernel_tensor_scalar(k, TERN_ENGINE_VECTOR, y, cur.ta, nan_fix && isnan(j->scale) ? TERN_ALU_ADD : j->op,
                                      j->scale, TERN_ALU_BYPASS, 0.0f);
            break;
        case EW_RECIPROCAL: tern_kernel_reciprocal(k, y, cur.ta); break;
        case EW_COL:
            tern_kernel_tensor_scalar_ap(k, TERN_ENGINE_VECTOR, y, cur.ta, j->op, cur.tb, 0.0f, TERN_ALU_BYPASS,
                                         kview_invalid(), 0.0f, j->rev ? TERN_FLAG_REV0 : 0u);
            break;
        }
        if (nan_fix) { /* VectorE's max/min are maxNum/minNum (a NaN loses); ONNX's, like numpy's, propagate it */
            tern_view t = tern_kernel_sbuf(k, TERN_DTYPE_FP32, (uint32_t)cur.rp, (uint32_t)cur.cw, "ew_isnan");
            tern_kernel_tensor_tensor(k, TERN_ENGINE_VECTOR, t, cur.ta, cur.ta, TERN_ALU_NOT_EQ);
            tern_kernel_select(k, y, t, cur.ta, y);
            if (j->kind == EW_BINARY) {
                tern_kernel_tensor_tensor(k, TERN_ENGINE_VECTOR, t, cur.tb, cur.tb, TERN_ALU_NOT_EQ);
                tern_kernel_select(k, y, t, cur.tb, y);
            }
            tern_kernel_release(k, t);
        }
        tern_kernel_store(k, tern_view_block(k, j->out, cur.r0, cur.r0 + cur.rp, cur.c0, cur.c0 + cur.cw), y);
        tern_kernel_release(k, cur.ta);
        if (j->kind == EW_BINARY || j->kind == EW_COL)
            tern_kernel_release(k, cur.tb);
        tern_kernel_release(k, y);
        if (!more)
            return;
        cur = nxt;
    }
}

void tern_lib_unary(tern_kernel *k, tern_view out, tern_view in, tern_act_func f, float scale)
{
    if (!need_2d(k, "unary", "out", &out) || !need_2d(k, "unary", "in", &in) ||
        !need_same(k, "unary", "out", &out, "in", &in))
        return;
    if ((unsigned)f >= TERN_ACT_COUNT) {
        kfail(k, TERN_ERR_INVALID, "unary: activation function %d unknown (0..%d)", (int)f, TERN_ACT_COUNT - 1);
        return;
    }
    ew_job j = {EW_UNARY, out, in, kview_invalid(), f, scale, TERN_ALU_BYPASS, 0};
    ew_run(k, &j);
}

void tern_lib_binary(tern_kernel *k, tern_view out, tern_view a, tern_view b, tern_alu_op op)
{
    if (!need_2d(k, "binary", "out", &out) || !need_2d(k, "binary", "a", &a) || !need_2d(k, "binary", "b", &b) ||
        !need_same(k, "binary", "a", &a, "b", &b) || !need_same(k, "binary", "out", &out, "a", &a))
        return;
    ew_job j = {EW_BINARY, out, a, b, TERN_ACT_COPY, 0.0f, op, 0};
    ew_run(k, &j);
}

void tern_lib_binary_col(tern_kernel *k, tern_view out, tern_view a, tern_view col, tern_alu_op op, int reverse)
{
    if (!need_2d(k, "binary_col", "out", &out) || !need_2d(k, "binary_col", "a", &a) ||
        !need_2d(k, "binary_col", "col", &col) || !need_same(k, "binary_col", "out", &out, "a", &a))
        return;
    if (tern_view_dim(&col, 0) != tern_view_dim(&a, 0) || tern_view_dim(&col, 1) != 1) {
        kfail(k, TERN_ERR_INVALID, "binary_col: col is [%llu, %llu], must be [%llu, 1] (a is [%llu, %llu])",
              (unsigned long long)tern_view_dim(&col, 0), (unsigned long long)tern_view_dim(&col, 1),
              (unsigned long long)tern_view_dim(&a, 0), (unsigned long long)tern_view_dim(&a, 0),
              (unsigned long long)tern_view_dim(&a, 1));
        return;
    }
    switch (op) {
    case TERN_ALU_ADD: case TERN_ALU_SUBTRACT: case TERN_ALU_MULT: case TERN_ALU_DIVIDE: case TERN_ALU_IS_EQ:
    case TERN_ALU_NOT_EQ: case TERN_ALU_IS_GT: case TERN_ALU_IS_GE: case TERN_ALU_IS_LT: case TERN_ALU_IS_LE:
    case TERN_ALU_LOGICAL_AND: case TERN_ALU_LOGICAL_OR: case TERN_ALU_LOGICAL_XOR: break;
    default: /* max/min need tern_lib_binary's NaN fix-up; bitvec operators read integers */
        kfail(k, TERN_ERR_UNSUPPORTED,
              "binary_col: operator %d is not one of add, subtract, mult, divide, the comparisons or the logical "
              "operators",
              (int)op);
        return;
    }
    ew_job j = {EW_COL, out, a, col, TERN_ACT_COPY, 0.0f, op, reverse != 0};
    ew_run(k, &j);
}

void tern_lib_scalar(tern_kernel *k, tern_view out, tern_view in, tern_alu_op op, float s)
{
    if (!need_2d(k, "scalar", "out", &out) || !need_2d(k, "scalar", "in", &in) ||
        !need_same(k, "scalar", "out", &out, "in", &in))
        return;
    ew_job j = {EW_SCALAR, out, in, kview_invalid(), TERN_ACT_COPY, s, op, 0};
    ew_run(k, &j);
}

void tern_lib_reciprocal(tern_kernel *k, tern_view out, tern_view in)
{
    if (!need_2d(k, "reciprocal", "out", &out) || !need_2d(k, "reciprocal", "in", &in) ||
        !need_same(k, "reciprocal", "out", &out, "in", &in))
        return;
    ew_job j = {EW_RECIPROCAL, out, in, kview_invalid(), TERN_ACT_COPY, 0.0f, TERN_ALU_BYPASS, 0};
    ew_run(k, &j);
}

void tern_lib_clip_tile(tern_kernel *k, tern_view dst, tern_view in, tern_view clamp, tern_view nan, float lo, float hi)
{
    tern_kernel_tensor_scalar(k, TERN_ENGINE_VECTOR, clamp, in, TERN_ALU_MAX, lo, TERN_ALU_MIN, hi);
    tern_kernel_tensor_tensor(k, TERN_ENGINE_VECTOR, nan, in, in, TERN_ALU_NOT_EQ);
    tern_kernel_select(k, dst, nan, in, clamp);
}

void tern_lib_bias_act(tern_kernel *k, tern_view out, tern_view in, tern_view bias, tern_act_func f)
{
    if (!need_2d(k, "bias_act", "out", &out) || !need_2d(k, "bias_act", "in", &in) ||
        !need_same(k, "bias_act", "out", &out, "in", &in) || !kview_ok(k, &bias, "bias_act bias"))
        return;
    const uint64_t R = tern_view_dim(&in, 0), C = tern_view_dim(&in, 1), P = k->cfg.partitions;
    unsigned brank = tern_view_rank(&bias);
    uint64_t bn = tern_view_dim(&bias, brank - 1);
    if (!(brank == 1 || (brank == 2 && tern_view_dim(&bias, 0) == 1)) || bn != C || bias.ap.mem != TERN_MEM_HBM) {
        char shape[64];
        shape_str(&bias, shape, sizeof shape);
        kfail(k, TERN_ERR_INVALID, "bias_act: bias is %s in %s, must be HBM [%llu] or [1, %llu] (in is [%llu, %llu])",
              shape, tern_mem_name((tern_mem)bias.ap.mem), (unsigned long long)C, (unsigned long long)C,
              (unsigned long long)R, (unsigned long long)C);
        return;
    }
    if ((unsigned)f >= TERN_ACT_COUNT) {
        kfail(k, TERN_ERR_INVALID, "bias_act: activation function %d unknown (0..%d)", (int)f, TERN_ACT_COUNT - 1);
        return;
    }
    const uint64_t PB = min_u64(P, R); /* partitions the bias tile needs */
    /* Column chunks outside, rows inside: the broadcast bias chunk is loaded once and serves every row tile. */
    for (uint64_t c0 = 0; c0 < C && !k->failed; c0 += EW_CHUNK) {
        uint64_t cw = min_u64(EW_CHUNK, C - c0);
        tern_view bt = tern_kernel_sbuf(k, TERN_DTYPE_FP32, (uint32_t)PB, (uint32_t)cw, "bias_act_bias");
        tern_view brow = brank == 1 ? tern_view_slice(k, bias, 0, c0, c0 + cw, 1)
                                    : tern_view_block(k, bias, 0, 1, c0, c0 + cw);
        tern_lib_broadcast_row(k, bt, brow);
        for (uint64_t r0 = 0; r0 < R && !k->failed; r0 += P) {
            uint64_t rp = min_u64(P, R - r0);
            tern_view x = tern_kernel_sbuf(k, (tern_dtype)in.ap.dtype, (uint32_t)rp, (uint32_t)cw, "bias_act_in");
            tern_view y = tern_kernel_sbuf(k, (tern_dtype)out.ap.dtype, (uint32_t)rp, (uint32_t)cw, "bias_act_out");
            tern_view b = tern_view_slice(k, bt, 0, 0, rp, 1);
            tern_kernel_load(k, x, tern_view_block(k, in, r0, r0 + rp, c0, c0 + cw));
            if (f == TERN_ACT_COPY) {
                tern_kernel_tensor_tensor(k, TERN_ENGINE_VECTOR, y, x, b, TERN_ALU_ADD);
            } else {
                /* The sum stays fp32 so the activation sees it rounded once, not cast to the output dtype. */
                tern_view t = tern_kernel_sbuf(k, TERN_DTYPE_FP32, (uint32_t)rp, (uint32_t)cw, "bias_act_sum");
                tern_kernel_tensor_tensor(k, TERN_ENGINE_VECTOR, t, x, b, TERN_ALU_ADD);
                tern_kernel_activation(k, y, t, f, 1.0f, kview_invalid(), kview_invalid(), kview_invalid());
                tern_kernel_release(k, t);
            }
            tern_kernel_store(k, tern_view_block(k, out, r0, r0 + rp, c0, c0 + cw), y);
            tern_kernel_release(k, x);
            tern_kernel_release(k, y);
        }
        tern_kernel_release(k, bt);
    }
}
