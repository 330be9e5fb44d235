/* Row softmax for the kernel library, the numerically safe form out = exp(x - max) / sum(exp(x - max)) with
 * whole rows on chip. Per tile of up to 128 rows: one DMA loads the rows into an fp32 tile (casting from the
 * input dtype), VectorE's tensor_reduce takes the negated row maximum, ScalarE's activation computes
 * exp(x + (-max)) in place and in the same instruction the per-row sum of the results (its reduce output),
 * VectorE takes the reciprocal of the sums and multiplies each row by it (tensor_scalar with a [P,1] operand),
 * and one DMA stores the rows (casting to the output dtype). Three engines work on consecutive row tiles at
 * once when SBUF holds more than one tile (released tiles are reused with their hazards carried over). */
#include <stdio.h>

#include "kernel/builder_internal.h"
#include "tern/kernel_lib.h"

static uint64_t min_u64(uint64_t a, uint64_t b) { return a < b ? a : b; }

/* Rows [r0, r0+rp) of in, loaded into a new fp32 tile (the DMA casts). */
static tern_view load_rows(tern_kernel *k, tern_view in, uint64_t r0, uint32_t rp, uint64_t C)
{
    tern_view x = tern_kernel_sbuf(k, TERN_DTYPE_FP32, rp, (uint32_t)C, "softmax_x");
    tern_kernel_load(k, x, tern_view_block(k, in, r0, r0 + rp, 0, C));
    return x;
}

void tern_lib_softmax_tile(tern_kernel *k, tern_view x) { tern_lib_softmax_tile_to(k, x, x); }

void tern_lib_softmax_tile_to(tern_kernel *k, tern_view x, tern_view out)
{
    if (!kview_ok(k, &x, "softmax tile") || !kview_ok(k, &out, "softmax tile out"))
        return;
    if (x.ap.dtype != TERN_DTYPE_FP32 || out.ap.num_partitions != x.ap.num_partitions ||
        tern_ap_free_elems(&out.ap) != tern_ap_free_elems(&x.ap) || !tern_dtype_is_float((tern_dtype)out.ap.dtype)) {
        kfail(k, TERN_ERR_INVALID,
              "softmax tile: x must be fp32 and out a float tile of its shape; x is %s [%u, %llu], out %s [%u, %llu]",
              tern_dtype_name((tern_dtype)x.ap.dtype), x.ap.num_partitions,
              (unsigned long long)tern_ap_free_elems(&x.ap), tern_dtype_name((tern_dtype)out.ap.dtype),
              out.ap.num_partitions, (unsigned long long)tern_ap_free_elems(&out.ap));
        return;
    }
    uint32_t rp = x.ap.num_partitions;
    tern_view st = tern_kernel_sbuf(k, TERN_DTYPE_FP32, rp, 3, "softmax_stats");
    tern_view negmax = tern_view_slice(k, st, 1, 0, 1, 1);
    tern_view sum = tern_view_slice(k, st, 1, 1, 2, 1);
    tern_view rsum = tern_view_slice(k, st, 1, 2, 3, 1);
    tern_kernel_tensor_reduce(k, negmax, x, TERN_ALU_MAX, 1, 1);
    tern_kernel_activation(k, x, x, TERN_ACT_EXP, 1.0f, negmax, kview_invalid(), sum);
    tern_kernel_reciprocal(k, rsum, sum);
    tern_kernel_tensor_scalar_ap(k, TERN_ENGINE_VECTOR, out, x, TERN_ALU_MULT, rsum, 0.0f, TERN_ALU_BYPASS,
                                 kview_invalid(), 0.0f, 0);
    tern_kernel_release(k, st);
}

void tern_lib_softmax(tern_kernel *k, tern_view out, tern_view in)
{
    if (!kview_ok(k, &out, "softmax out") || !kview_ok(k, &in, "softmax in"))
        return;
    if (tern_view_rank(&out) != 2 || tern_view_rank(&in) != 2) {
        kfail(k, TERN_ERR_INVALID, "softmax: out and in must be 2-D [rows, cols] views (ranks %u, %u)",
              tern_view_rank(&out), tern_view_rank(&in));
        return;
    }
    const uint64_t R = tern_view_dim(&in, 0), C = tern_view_dim(&in, 1), P = k->cfg.partitions;
    if (tern_view_dim(&out, 0) != R || tern_view_dim(&out, 1) != C) {
        kfail(k, TERN_ERR_INVALID, "softmax: out is [%llu, %llu] but in is [%llu, %llu] (shapes must be equal)",
              (unsigned long long)tern_view_dim(&out, 0), (unsigned long long)tern_view_dim(&out, 1),
              (unsigned long long)R, (unsigned long long)C);
        return;
    }
    /* A row lives on one partition: C fp32 values plus 32 bytes of statistics. */
    uint64_t need = C * 4 + 32, have = k->cfg.sbuf_partition_bytes;
    if (need > have) {
        kfail(k, TERN_ERR_RANGE,
              "softmax: in has rows of %llu columns; a row needs %llu bytes of SBUF per partition, %s has %llu "
              "(at most %llu columns)",
              (unsigned long long)C, (unsigned long long)need, k->cfg.name, (unsigned long long)have,
              (unsigned long long)((have - 32) / 4));
        return;
    }
    /* Double buffering when two row tiles fit: the next tile's load is issued before this tile's store, so the
     * in-order DMA-issuing engine does not hold it behind this tile's computation. */
    const int prefetch = need + C * 4 <= have;
    tern_view x = kview_invalid();
    for (uint64_t r0 = 0; r0 < R && !k->failed; r0 += P) {
        uint32_t rp = (uint32_t)min_u64(P, R - r0);
        if (x.region < 0)
            x = load_rows(k, in, r0, rp, C);
        tern_view next = kview_invalid();
        if (prefetch && r0 + P < R)
            next = load_rows(k, in, r0 + P, (uint32_t)min_u64(P, R - r0 - P), C);
        tern_lib_softmax_tile(k, x);
        tern_kernel_store(k, tern_view_block(k, out, r0, r0 + rp, 0, C), x);
        tern_kernel_release(k, x);
        x = next;
    }
}
