/* Matrix transpose for the kernel library, through TensorE in 128 x 128 blocks. The input is walked in groups
 * of up to 4 row strips (512 rows) by column chunks of 512: each strip block [rb <= 128 rows, 512 cols] is
 * loaded once; for each 128-column block, every strip's [rb, cb] piece goes through the array into its slice of
 * one PSUM bank [cb, 512], which VectorE copies (casting to the output dtype) to SBUF and one DMA stores as
 * out[c0:c0+cb, r0:r0+512].
 *
 * NeuronCore-v2 has no transpose mode: the piece is the stationary operand and an identity [rb, rb] the moving
 * one, since the array computes stationary^T @ moving. The identity is built once on chip (GpSimd memset 1,
 * then affine_select keeping partition == column). Every output element is one product x * 1 summed with
 * products x' * 0, so the result is exact for finite inputs except that -0 comes out +0; an Inf in a 128-row
 * piece makes the other elements of its output row in that piece NaN (Inf * 0), a NaN all of them. v3+ use
 * transpose_pe, which moves the bits exactly. */
#include <stdio.h>

#include "kernel/builder_internal.h"
#include "tern/kernel_lib.h"

#define TR_GROUP 4u /* row strips per PSUM bank (4 x 128 fp32 = 2 KiB) */

static uint64_t min_u64(uint64_t a, uint64_t b) { return a < b ? a : b; }

/* out and in are 2-D and out's shape is in's transposed (failures recorded in the kernel). */
static int transpose_shapes_ok(tern_kernel *k, const tern_view *out, const tern_view *in)
{
    if (!kview_ok(k, out, "transpose out") || !kview_ok(k, in, "transpose in"))
        return 0;
    if (tern_view_rank(out) != 2 || tern_view_rank(in) != 2) {
        kfail(k, TERN_ERR_INVALID, "transpose: out and in must be 2-D views (ranks %u, %u)", tern_view_rank(out),
              tern_view_rank(in));
        return 0;
    }
    const uint64_t R = tern_view_dim(in, 0), C = tern_view_dim(in, 1);
    if (tern_view_dim(out, 0) != C || tern_view_dim(out, 1) != R) {
        kfail(k, TERN_ERR_INVALID, "transpose: out is [%llu, %llu], must be [%llu, %llu] for in [%llu, %llu]",
              (unsigned long long)tern_view_dim(out, 0), (unsigned long long)tern_view_dim(out, 1),
              (unsigned long long)C, (unsigned long long)R, (unsigned long long)R, (unsigned long long)C);
        return 0;
    }
    return 1;
}

void tern_lib_transpose_block(tern_kernel *k, tern_view dst_psum, tern_view src, tern_view ident)
{
    if (k->cfg.generation >= 3) {
        tern_kernel_transpose_pe(k, dst_psum, src);
        return;
    }
    uint64_t p = src.ap.num_partitions;
    tern_kernel_matmul(k, dst_psum, src, tern_view_block(k, ident, 0, p, 0, p), 0);
}

void tern_lib_identity(tern_kernel *k, tern_view tile)
{
    if (!kview_ok(k, &tile, "identity tile"))
        return;
    if (tile.ap.ndims != 1) {
        kfail(k, TERN_ERR_INVALID, "identity: tile must be [P, F] (one free dimension), has %u", tile.ap.ndims);
        return;
    }
    /* value(p, i) = p - i; keep the 1 where it is zero. */
    int32_t step = -1;
    tern_kernel_memset(k, TERN_ENGINE_GPSIMD, tile, 1.0f);
    tern_kernel_affine_select(k, tile, tile, TERN_ALU_IS_EQ, 0, 1, &step, 0.0f);
}

void tern_lib_transpose(tern_kernel *k, tern_view out, tern_view in)
{
    if (!transpose_shapes_ok(k, &out, &in))
        return;
    const uint64_t R = tern_view_dim(&in, 0), C = tern_view_dim(&in, 1);
    const tern_dtype dt = (tern_dtype)in.ap.dtype;
    if (!ktensor_dtype(dt) || !tern_dtype_is_float((tern_dtype)out.ap.dtype)) {
        kfail(k, TERN_ERR_INVALID,
              "transpose: in dtype %s / out dtype %s: in must be a TensorE dtype (fp32, bf16, fp16, fp8) and out a "
              "float",
              tern_dtype_name(dt), tern_dtype_name((tern_dtype)out.ap.dtype));
        return;
    }
    const int pe_mode = k->cfg.generation >= 3;
    const uint64_t T = k->cfg.pe_rows < k->cfg.pe_cols ? k->cfg.pe_rows : k->cfg.pe_cols; /* block edge, 128 */
    const uint64_t GR = T * TR_GROUP, CC = T * TR_GROUP;
    /* PE transpose keeps the dtype in PSUM; the matmul accumulates in fp32. */
    const tern_dtype pdt = pe_mode ? dt : TERN_DTYPE_FP32;
    tern_view ident = kview_invalid();
    if (!pe_mode) {
        uint32_t n = (uint32_t)min_u64(T, R);
        ident = tern_kernel_sbuf(k, dt, n, n, "transpose_identity");
        tern_lib_identity(k, ident);
    }
    tern_view strips[TR_GROUP];
    for (uint64_t g0 = 0; g0 < R && !k->failed; g0 += GR) {
        uint64_t gr = min_u64(GR, R - g0), ns = (gr + T - 1) / T;
        for (uint64_t c0 = 0; c0 < C && !k->failed; c0 += CC) {
            uint64_t cw = min_u64(CC, C - c0);
            for (uint64_t s = 0; s < ns; s++) {
                uint64_t r0 = g0 + s * T, rb = min_u64(T, R - r0);
                strips[s] = tern_kernel_sbuf(k, dt, (uint32_t)rb, (uint32_t)cw, "transpose_in");
                tern_kernel_load(k, strips[s], tern_view_block(k, in, r0, r0 + rb, c0, c0 + cw));
            }
            for (uint64_t b0 = 0; b0 < cw && !k->failed; b0 += T) {
                uint64_t cb = min_u64(T, cw - b0);
                tern_view ps = tern_kernel_psum(k, pdt, (uint32_t)cb, (uint32_t)gr, "transpose_psum");
                for (uint64_t s = 0; s < ns; s++) {
                    uint64_t rb = tern_view_dim(&strips[s], 0);
                    tern_view piece = tern_view_block(k, strips[s], 0, rb, b0, b0 + cb);
                    tern_view dst = tern_view_block(k, ps, 0, cb, s * T, s * T + rb);
                    tern_lib_transpose_block(k, dst, piece, ident);
                }
                tern_view o = tern_kernel_sbuf(k, (tern_dtype)out.ap.dtype, (uint32_t)cb, (uint32_t)gr, "transpose_out");
                tern_kernel_tensor_copy(k, TERN_ENGINE_VECTOR, o, ps);
                tern_kernel_store(k, tern_view_block(k, out, c0 + b0, c0 + b0 + cb, g0, g0 + gr), o);
                tern_kernel_release(k, ps);
                tern_kernel_release(k, o);
            }
            for (uint64_t s = 0; s < ns; s++)
                tern_kernel_release(k, strips[s]);
        }
    }
    if (ident.region >= 0)
        tern_kernel_release(k, ident);
}

/* An exact transpose for data movement (the Transpose op): each [<=128 rows, <=512 cols] strip is loaded, every
 * block moves to its mirrored place in a [<=128, rows] output tile, and one DMA stores the tile. On v3+ a block is
 * 128 x 128 through transpose_pe (the bits kept in PSUM, then copied to the tile in out's dtype); on v2, where the
 * PE array can only multiply by an identity (an Inf or NaN would spread over its output row, -0 would become +0),
 * 32 x 32 through VectorE's bit-exact transposes, the strip loaded in out's dtype (the DMA casts). The strips of
 * all n pairs stream through three rotating buffers, each loaded two strips ahead. */
void tern_lib_transpose_exact(tern_kernel *k, tern_view out, tern_view in)
{
    tern_lib_transpose_exact_n(k, 1, &out, &in);
}

/* Strip i of the stream (the pairs' strips in order, each pair's by rows of T then columns of CW): its pair (*m,
 * advanced from the caller's last one, whose first strip is *base) and its place there. */
typedef struct {
    uint64_t r0, c0, rb, cw;
} strip_pos;

static strip_pos strip_at(const tern_view *ins, uint64_t T, uint64_t CW, uint64_t i, size_t *m, uint64_t *base)
{
    uint64_t R, C, ncs;
    for (;;) {
        R = tern_view_dim(&ins[*m], 0), C = tern_view_dim(&ins[*m], 1), ncs = (C + CW - 1) / CW;
        if (i - *base < ((R + T - 1) / T) * ncs)
            break;
        *base += ((R + T - 1) / T) * ncs;
        (*m)++;
    }
    uint64_t s = i - *base;
    strip_pos p = {.r0 = (s / ncs) * T, .c0 = (s % ncs) * CW};
    p.rb = min_u64(T, R - p.r0);
    p.cw = min_u64(CW, C - p.c0);
    return p;
}

void tern_lib_transpose_exact_n(tern_kernel *k, size_t n, const tern_view *outs_v, const tern_view *ins_v)
{
    uint64_t maxR = 0, maxC = 0;
    tern_dtype odt = TERN_DTYPE_FP32;
    for (size_t m = 0; m < n; m++) {
        if (!transpose_shapes_ok(k, &outs_v[m], &ins_v[m]))
            return;
        if (m && outs_v[m].ap.dtype != outs_v[0].ap.dtype) {
            kfail(k, TERN_ERR_INVALID, "transpose: the batch's outputs differ in dtype (%s, %s)",
                  tern_dtype_name((tern_dtype)outs_v[0].ap.dtype), tern_dtype_name((tern_dtype)outs_v[m].ap.dtype));
            return;
        }
        odt = (tern_dtype)outs_v[m].ap.dtype;
        maxR = tern_view_dim(&ins_v[m], 0) > maxR ? tern_view_dim(&ins_v[m], 0) : maxR;
        maxC = tern_view_dim(&ins_v[m], 1) > maxC ? tern_view_dim(&ins_v[m], 1) : maxC;
    }
    /* V x V blocks (VectorE's transpose limit, 32). A block of V partitions must start at a multiple of a quarter
     * of the partitions (the start-partition rule): where that quarter is above V (over 128 partitions), each
     * strip and output tile holds one block row, so every block starts at partition 0. */
    const int pe = k->cfg.generation >= 3; /* v3+: transpose_pe through PSUM, 128 x 128 blocks */
    const uint64_t PE = k->cfg.pe_rows < k->cfg.pe_cols ? k->cfg.pe_rows : k->cfg.pe_cols;
    const uint64_t V = pe ? PE : k->cfg.vector_transpose_max ? k->cfg.vector_transpose_max : 32, CW = 512;
    const uint64_t T = pe ? PE : k->cfg.partitions / 4 > V ? V : k->cfg.partitions < 128 ? k->cfg.partitions : 128;
    const tern_dtype idt = (tern_dtype)ins_v[0].ap.dtype;
    if (pe && maxR >= 4 * PE && maxC >= 4 * PE) {
        /* large slices: tern_lib_transpose's 512 x 512 groups (4 blocks a PSUM bank, 512-column stores) move more
         * a DMA than one block at a time does */
        for (size_t m = 0; m < n && !k->failed; m++)
            tern_lib_transpose(k, outs_v[m], ins_v[m]);
        return;
    }
    if (pe && !ktensor_dtype(idt)) {
        kfail(k, TERN_ERR_INVALID, "transpose: in dtype %s is not a TensorE dtype (fp32, bf16, fp16, fp8)",
              tern_dtype_name(idt));
        return;
    }
    if (pe)
        for (size_t m = 1; m < n; m++)
            if (ins_v[m].ap.dtype != ins_v[0].ap.dtype) {
                kfail(k, TERN_ERR_INVALID, "transpose: the batch's inputs differ in dtype (%s, %s)",
                      tern_dtype_name(idt), tern_dtype_name((tern_dtype)ins_v[m].ap.dtype));
                return;
            }
    /* NB strips and output tiles in turn (allocated once, at their largest), so loads, transposes and stores of
     * neighbouring strips overlap instead of waiting on one buffer's reuse */
    enum { NB = 3 };
    /* the strips of every pair in order (by rows of T, then columns of CW), each loaded NB - 1 strips ahead: the
     * engine that issues the DMAs runs its instructions in order, and a store waits for its tile's transposes, so
     * a load issued after the previous strip's store would wait for that strip's transposes too */
    uint64_t total = 0;
    for (size_t m = 0; m < n; m++) {
        uint64_t R = tern_view_dim(&ins_v[m], 0), C = tern_view_dim(&ins_v[m], 1);
        total += ((R + T - 1) / T) * ((C + CW - 1) / CW);
    }
    if (total == 0)
        return;
    const uint64_t sp = min_u64(T, maxR), sf = min_u64(CW, maxC), op_ = min_u64(T, maxC);
    tern_view strips[NB], outs[NB];
    for (int q = 0; q < NB; q++) {
        strips[q] = tern_kernel_sbuf(k, pe ? idt : odt, (uint32_t)sp, (uint32_t)sf, "transpose_in"); /* v2: the DMA casts */
        outs[q] = tern_kernel_sbuf(k, odt, (uint32_t)op_, (uint32_t)sp, "transpose_out");
    }
    size_t lm = 0, tm = 0;          /* the pair whose strips are being loaded / transposed */
    uint64_t lbase = 0, tbase = 0;  /* the index of that pair's first strip */
    unsigned no = 0;
    for (uint64_t i = 0; i < total + NB - 1 && !k->failed; i++) {
        if (i < total) { /* load strip i */
            strip_pos ld = strip_at(ins_v, T, CW, i, &lm, &lbase);
            tern_kernel_load(k, tern_view_block(k, strips[i % NB], 0, ld.rb, 0, ld.cw),
                             tern_view_block(k, ins_v[lm], ld.r0, ld.r0 + ld.rb, ld.c0, ld.c0 + ld.cw));
        }
        if (i < NB - 1)
            continue;
        uint64_t j = i - (NB - 1); /* transpose and store strip j */
        strip_pos sj = strip_at(ins_v, T, CW, j, &tm, &tbase);
        uint64_t r0 = sj.r0, c0 = sj.c0, rb = sj.rb, cw = sj.cw;
        tern_view strip = tern_view_block(k, strips[j % NB], 0, rb, 0, cw);
        for (uint64_t b0 = 0; b0 < cw && !k->failed; b0 += T) {
            uint64_t cb = min_u64(T, cw - b0);
            tern_view o = tern_view_block(k, outs[no++ % NB], 0, cb, 0, rb);
            if (pe) { /* the block through the array into PSUM (its dtype kept), then to the output tile */
                tern_view ps = tern_kernel_psum(k, idt, (uint32_t)cb, (uint32_t)rb, "transpose_psum");
                tern_kernel_transpose_pe(k, ps, tern_view_block(k, strip, 0, rb, b0, b0 + cb));
                tern_kernel_tensor_copy(k, TERN_ENGINE_VECTOR, o, ps);
                tern_kernel_release(k, ps);
                tern_kernel_store(k, tern_view_block(k, outs_v[tm], c0 + b0, c0 + b0 + cb, r0, r0 + rb), o);
                continue;
            }
            for (uint64_t ii = 0; ii < rb; ii += V)
                for (uint64_t jj = 0; jj < cb; jj += V) {
                    uint64_t ni = min_u64(V, rb - ii), nj = min_u64(V, cb - jj);
                    tern_kernel_transpose_ve(k, tern_view_block(k, o, jj, jj + nj, ii, ii + ni),
                                             tern_view_block(k, strip, ii, ii + ni, b0 + jj, b0 + jj + nj));
                }
            tern_kernel_store(k, tern_view_block(k, outs_v[tm], c0 + b0, c0 + b0 + cb, r0, r0 + rb), o);
        }
    }
    for (int q = NB - 1; q >= 0; q--) {
        tern_kernel_release(k, outs[q]);
        tern_kernel_release(k, strips[q]);
    }
}
