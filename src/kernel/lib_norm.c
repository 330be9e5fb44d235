/* Row normalisations for the kernel library, whole rows on chip in fp32.
 *
 * LayerNorm, per tile of up to 128 rows: DMA load (casting to fp32); VectorE bn_stats over chunks of at most
 * bn_stats_free_max (512) columns, then bn_aggr over the chunks' (count, mean, count*var) tuples gives mean and
 * population variance; ScalarE's activation rsqrt(var * 1 + eps) (eps from a [P,1] bias tile) gives rstd;
 * VectorE's tensor_scalar (x - mean) * rstd with both scalars as [P,1] operands; then * gamma and + beta as
 * tensor_tensor against rows broadcast to the partitions once per kernel (tern_lib_broadcast_row); DMA store
 * (casting to the output dtype).
 *
 * RMSNorm: ScalarE's activation square over column chunks writes a throw-away bf16 tile and, through its reduce
 * output, each chunk's fp32 sum of squares; VectorE adds the chunk sums (tensor_reduce); ScalarE computes
 * rsqrt(sum * (1/cols) + eps); one scalar_tensor_tensor (x * rstd) * gamma on VectorE (emitted raw: the
 * builder's scalar_tensor_tensor call takes only an immediate scalar), or a tensor_scalar without gamma. */
#include <stdio.h>
#include <string.h>

#include "kernel/builder_internal.h"
#include "tern/kernel_lib.h"

#define SQ_CHUNK 2048u /* columns per activation-square instruction in RMSNorm (bf16 scratch: 4 KiB) */

static uint64_t min_u64(uint64_t a, uint64_t b) { return a < b ? a : b; }
static uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

/* Check out/in (2-D, equal shapes) and an optional per-column vector (region -1 = absent). */
static int check_shapes(tern_kernel *k, const char *kn, tern_view out, tern_view in, const char *vn1,
                        const tern_view *v1, const char *vn2, const tern_view *v2)
{
    char label[64];
    snprintf(label, sizeof label, "%s out", kn);
    if (!kview_ok(k, &out, label))
        return 0;
    snprintf(label, sizeof label, "%s in", kn);
    if (!kview_ok(k, &in, label))
        return 0;
    if (tern_view_rank(&out) != 2 || tern_view_rank(&in) != 2) {
        kfail(k, TERN_ERR_INVALID, "%s: out and in must be 2-D [rows, cols] views (ranks %u, %u)", kn,
              tern_view_rank(&out), tern_view_rank(&in));
        return 0;
    }
    const uint64_t R = tern_view_dim(&in, 0), C = tern_view_dim(&in, 1);
    if (tern_view_dim(&out, 0) != R || tern_view_dim(&out, 1) != C) {
        kfail(k, TERN_ERR_INVALID, "%s: out is [%llu, %llu] but in is [%llu, %llu] (shapes must be equal)", kn,
              (unsigned long long)tern_view_dim(&out, 0), (unsigned long long)tern_view_dim(&out, 1),
              (unsigned long long)R, (unsigned long long)C);
        return 0;
    }
    const char *names[2] = {vn1, vn2};
    const tern_view *vs[2] = {v1, v2};
    for (int i = 0; i < 2; i++) {
        if (!vs[i] || vs[i]->region < 0)
            continue;
        snprintf(label, sizeof label, "%s %s", kn, names[i]);
        if (!kview_ok(k, vs[i], label))
            return 0;
        unsigned rank = tern_view_rank(vs[i]);
        uint64_t n = tern_view_dim(vs[i], rank - 1);
        if (!(rank == 1 || (rank == 2 && tern_view_dim(vs[i], 0) == 1)) || n != C || vs[i]->ap.mem != TERN_MEM_HBM) {
            kfail(k, TERN_ERR_INVALID,
                  "%s: %s must be an HBM [%llu] or [1, %llu] view (one value per column of in [%llu, %llu]); it is "
                  "rank %u with %llu x %llu elements in %s",
                  kn, names[i], (unsigned long long)C, (unsigned long long)C, (unsigned long long)R,
                  (unsigned long long)C, rank, (unsigned long long)tern_view_dim(vs[i], 0),
                  rank == 2 ? (unsigned long long)tern_view_dim(vs[i], 1) : 1ull,
                  tern_mem_name((tern_mem)vs[i]->ap.mem));
            return 0;
        }
    }
    return 1;
}

/* Fail with a clear message when a row and its companions cannot fit in one partition. */
static int check_fit(tern_kernel *k, const char *kn, uint64_t C, uint64_t bytes_per_col, uint64_t fixed)
{
    uint64_t need = C * bytes_per_col + fixed, have = k->cfg.sbuf_partition_bytes;
    if (need <= have)
        return 1;
    kfail(k, TERN_ERR_RANGE,
          "%s: in has rows of %llu columns; they need %llu bytes of SBUF per partition, %s has %llu (at most %llu "
          "columns with these dtypes)",
          kn, (unsigned long long)C, (unsigned long long)need, k->cfg.name, (unsigned long long)have,
          (unsigned long long)(have > fixed ? (have - fixed) / bytes_per_col : 0));
    return 0;
}

/* A per-column vector broadcast to [parts, C] in its own dtype (exact), or an invalid view when absent. */
static tern_view load_row(tern_kernel *k, const tern_view *v, uint32_t parts, uint64_t C, const char *name)
{
    if (v->region < 0)
        return kview_invalid();
    tern_view t = tern_kernel_sbuf(k, (tern_dtype)v->ap.dtype, parts, (uint32_t)C, name);
    tern_lib_broadcast_row(k, t, *v);
    return t;
}

/* Rows [r0, r0+rp) of in, loaded into a new fp32 tile (the DMA casts). */
static tern_view load_rows(tern_kernel *k, tern_view in, uint64_t r0, uint32_t rp, uint64_t C, const char *name)
{
    tern_view x = tern_kernel_sbuf(k, TERN_DTYPE_FP32, rp, (uint32_t)C, name);
    tern_kernel_load(k, x, tern_view_block(k, in, r0, r0 + rp, 0, C));
    return x;
}

static uint64_t row_bytes(const tern_view *v) { return v->region < 0 ? 0 : tern_dtype_size((tern_dtype)v->ap.dtype); }

void tern_lib_layernorm(tern_kernel *k, tern_view out, tern_view in, tern_view gamma, tern_view beta, float eps)
{
    if (k->failed || !check_shapes(k, "layernorm", out, in, "gamma", &gamma, "beta", &beta))
        return;
    const uint64_t R = tern_view_dim(&in, 0), C = tern_view_dim(&in, 1), P = k->cfg.partitions;
    const uint64_t BN = k->cfg.bn_stats_free_max, nch = ceil_div(C, BN);
    /* Per partition: the fp32 row, gamma and beta rows, 6 statistics per chunk, eps and 3 scalars (aligned). */
    const uint64_t per_col = 4 + row_bytes(&gamma) + row_bytes(&beta), fixed = nch * 24 + 256;
    if (!check_fit(k, "layernorm", C, per_col, fixed))
        return;
    /* Double buffering when a second row tile fits: the next load is issued before this tile's store. */
    const int prefetch = C * (per_col + 4) + fixed <= k->cfg.sbuf_partition_bytes;
    const uint32_t PB = (uint32_t)min_u64(P, R);
    tern_view epst = tern_kernel_sbuf(k, TERN_DTYPE_FP32, PB, 1, "layernorm_eps");
    tern_kernel_memset(k, TERN_ENGINE_GPSIMD, epst, eps);
    tern_view g = load_row(k, &gamma, PB, C, "layernorm_gamma");
    tern_view b = load_row(k, &beta, PB, C, "layernorm_beta");
    tern_view x = kview_invalid();
    for (uint64_t r0 = 0; r0 < R && !k->failed; r0 += P) {
        uint32_t rp = (uint32_t)min_u64(P, R - r0);
        if (x.region < 0)
            x = load_rows(k, in, r0, rp, C, "layernorm_x");
        tern_view next = kview_invalid();
        if (prefetch && r0 + P < R)
            next = load_rows(k, in, r0 + P, (uint32_t)min_u64(P, R - r0 - P), C, "layernorm_x");
        tern_view stats = tern_kernel_sbuf(k, TERN_DTYPE_FP32, rp, (uint32_t)(nch * 6), "layernorm_stats");
        tern_view mv = tern_kernel_sbuf(k, TERN_DTYPE_FP32, rp, 3, "layernorm_mv");
        tern_view mean = tern_view_slice(k, mv, 1, 0, 1, 1), var = tern_view_slice(k, mv, 1, 1, 2, 1);
        tern_view rstd = tern_view_slice(k, mv, 1, 2, 3, 1);
        for (uint64_t c = 0; c < nch; c++) {
            uint64_t c0 = c * BN, c1 = min_u64(C, c0 + BN);
            tern_kernel_bn_stats(k, tern_view_slice(k, stats, 1, c * 6, c * 6 + 6, 1),
                                 tern_view_block(k, x, 0, rp, c0, c1));
        }
        tern_kernel_bn_aggr(k, tern_view_slice(k, mv, 1, 0, 2, 1), stats);
        tern_kernel_activation(k, rstd, var, TERN_ACT_RSQRT, 1.0f, tern_view_slice(k, epst, 0, 0, rp, 1),
                               kview_invalid(), kview_invalid());
        tern_kernel_tensor_scalar_ap(k, TERN_ENGINE_VECTOR, x, x, TERN_ALU_SUBTRACT, mean, 0.0f, TERN_ALU_MULT, rstd,
                                     0.0f, 0);
        if (g.region >= 0)
            tern_kernel_tensor_tensor(k, TERN_ENGINE_VECTOR, x, x, tern_view_slice(k, g, 0, 0, rp, 1), TERN_ALU_MULT);
        if (b.region >= 0)
            tern_kernel_tensor_tensor(k, TERN_ENGINE_VECTOR, x, x, tern_view_slice(k, b, 0, 0, rp, 1), TERN_ALU_ADD);
        /* stored from ScalarE's DMA queue: SyncE's stream (the next kernel's loads) never waits behind it */
        tern_kernel_dma_copy_on(k, TERN_ENGINE_SCALAR, tern_view_block(k, out, r0, r0 + rp, 0, C), x, -1);
        tern_kernel_release(k, x);
        tern_kernel_release(k, stats);
        tern_kernel_release(k, mv);
        x = next;
    }
    if (g.region >= 0)
        tern_kernel_release(k, g);
    if (b.region >= 0)
        tern_kernel_release(k, b);
    tern_kernel_release(k, epst);
}

/* VectorE scalar_tensor_tensor with s0 a per-partition [P,1] operand: dst = (a op0 s0) op1 b. */
static void stt_col(tern_kernel *k, tern_view dst, tern_view a, tern_alu_op op0, tern_view s0, tern_alu_op op1,
                    tern_view b)
{
    tern_instr ins;
    memset(&ins, 0, sizeof ins);
    ins.opcode = TERN_OP_SCALAR_TENSOR_TENSOR;
    ins.engine = TERN_ENGINE_VECTOR;
    ins.wait_sem = TERN_SEM_NONE;
    ins.signal_sem = TERN_SEM_NONE;
    for (int s = 0; s < TERN_INSTR_OPERANDS; s++)
        ins.ap[s].offset_reg = TERN_REG_NONE;
    ins.ap[TERN_AP_DST] = dst.ap;
    ins.ap[TERN_AP_IN0] = a.ap;
    ins.ap[TERN_AP_IN1] = b.ap;
    ins.ap[TERN_AP_IN2] = s0.ap;
    ins.op0 = (uint8_t)op0;
    ins.op1 = (uint8_t)op1;
    ins.flags = TERN_FLAG_S0_AP;
    tern_view reads[3] = {a, b, s0};
    tern_kernel_emit(k, &ins, reads, 3, &dst, 1);
}

void tern_lib_rmsnorm(tern_kernel *k, tern_view out, tern_view in, tern_view gamma, float eps)
{
    if (k->failed || !check_shapes(k, "rmsnorm", out, in, "gamma", &gamma, NULL, NULL))
        return;
    const uint64_t R = tern_view_dim(&in, 0), C = tern_view_dim(&in, 1), P = k->cfg.partitions;
    const uint64_t nch = ceil_div(C, SQ_CHUNK), sqw = min_u64(C, SQ_CHUNK);
    const uint64_t per_col = 4 + row_bytes(&gamma), fixed = sqw * 2 + nch * 4 + 256;
    if (!check_fit(k, "rmsnorm", C, per_col, fixed))
        return;
    const int prefetch = C * (per_col + 4) + fixed <= k->cfg.sbuf_partition_bytes;
    const uint32_t PB = (uint32_t)min_u64(P, R);
    tern_view epst = tern_kernel_sbuf(k, TERN_DTYPE_FP32, PB, 1, "rmsnorm_eps");
    tern_kernel_memset(k, TERN_ENGINE_GPSIMD, epst, eps);
    tern_view g = load_row(k, &gamma, PB, C, "rmsnorm_gamma");
    const float inv_c = (float)(1.0 / (double)C);
    tern_view x = kview_invalid();
    for (uint64_t r0 = 0; r0 < R && !k->failed; r0 += P) {
        uint32_t rp = (uint32_t)min_u64(P, R - r0);
        if (x.region < 0)
            x = load_rows(k, in, r0, rp, C, "rmsnorm_x");
        tern_view next = kview_invalid();
        if (prefetch && r0 + P < R)
            next = load_rows(k, in, r0 + P, (uint32_t)min_u64(P, R - r0 - P), C, "rmsnorm_x");
        tern_view sq = tern_kernel_sbuf(k, TERN_DTYPE_BF16, rp, (uint32_t)sqw, "rmsnorm_squares");
        tern_view parts = tern_kernel_sbuf(k, TERN_DTYPE_FP32, rp, (uint32_t)nch, "rmsnorm_partial");
        tern_view sc = tern_kernel_sbuf(k, TERN_DTYPE_FP32, rp, 2, "rmsnorm_ss");
        tern_view ss = tern_view_slice(k, sc, 1, 0, 1, 1), rstd = tern_view_slice(k, sc, 1, 1, 2, 1);
        for (uint64_t c = 0; c < nch; c++) {
            uint64_t c0 = c * SQ_CHUNK, c1 = min_u64(C, c0 + SQ_CHUNK);
            tern_kernel_activation(k, tern_view_block(k, sq, 0, rp, 0, c1 - c0), tern_view_block(k, x, 0, rp, c0, c1),
                                   TERN_ACT_SQUARE, 1.0f, kview_invalid(), kview_invalid(),
                                   tern_view_slice(k, parts, 1, c, c + 1, 1));
        }
        tern_kernel_tensor_reduce(k, ss, parts, TERN_ALU_ADD, 1, 0);
        tern_kernel_activation(k, rstd, ss, TERN_ACT_RSQRT, inv_c, tern_view_slice(k, epst, 0, 0, rp, 1),
                               kview_invalid(), kview_invalid());
        if (g.region >= 0)
            stt_col(k, x, x, TERN_ALU_MULT, rstd, TERN_ALU_MULT, tern_view_slice(k, g, 0, 0, rp, 1));
        else
            tern_kernel_tensor_scalar_ap(k, TERN_ENGINE_VECTOR, x, x, TERN_ALU_MULT, rstd, 0.0f, TERN_ALU_BYPASS,
                                         kview_invalid(), 0.0f, 0);
        tern_kernel_store(k, tern_view_block(k, out, r0, r0 + rp, 0, C), x);
        tern_kernel_release(k, x);
        tern_kernel_release(k, sq);
        tern_kernel_release(k, parts);
        tern_kernel_release(k, sc);
        x = next;
    }
    if (g.region >= 0)
        tern_kernel_release(k, g);
    tern_kernel_release(k, epst);
}
