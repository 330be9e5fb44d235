/* Embedding lookup for the kernel library: out[i, :] = table[ids[i], :]. The ids are staged into SBUF 128 at a
 * time as an int32 [P, 1] tile (one index per partition, as DMA gather wants) and one dma_gather per 128 ids
 * copies the selected table rows straight from HBM to the output rows in HBM: a row is contiguous on both
 * sides, so staging it in SBUF would only double the traffic. Any number of ids and any row width work (a
 * gathered row is one DMA element run); the DMA casts when out and table dtypes differ. An id outside
 * [0, vocab) stops the run with an error naming the instruction and the index. */
#include <stdio.h>
#include <string.h>

#include "kernel/builder_internal.h"
#include "tern/kernel_lib.h"

static uint64_t min_u64(uint64_t a, uint64_t b) { return a < b ? a : b; }

void tern_lib_embedding(tern_kernel *k, tern_view out, tern_view table, tern_view ids)
{
    if (!kview_ok(k, &out, "embedding out") || !kview_ok(k, &table, "embedding table") ||
        !kview_ok(k, &ids, "embedding ids"))
        return;
    if (tern_view_rank(&out) != 2 || tern_view_rank(&table) != 2) {
        kfail(k, TERN_ERR_INVALID, "embedding: out and table must be 2-D views (ranks %u, %u)", tern_view_rank(&out),
              tern_view_rank(&table));
        return;
    }
    if (out.ap.mem != TERN_MEM_HBM || table.ap.mem != TERN_MEM_HBM || ids.ap.mem != TERN_MEM_HBM) {
        kfail(k, TERN_ERR_INVALID, "embedding: out, table and ids must be HBM views (are %s, %s, %s)",
              tern_mem_name((tern_mem)out.ap.mem), tern_mem_name((tern_mem)table.ap.mem),
              tern_mem_name((tern_mem)ids.ap.mem));
        return;
    }
    const uint64_t N = tern_view_dim(&out, 0), D = tern_view_dim(&out, 1);
    const uint64_t V = tern_view_dim(&table, 0);
    unsigned irank = tern_view_rank(&ids);
    uint64_t n_ids = tern_view_dim(&ids, 0);
    if (!(irank == 1 || (irank == 2 && tern_view_dim(&ids, 1) == 1)) || n_ids != N) {
        kfail(k, TERN_ERR_INVALID, "embedding: ids must be [%llu] or [%llu, 1] (one per row of out [%llu, %llu]), is "
              "rank %u with %llu x %llu elements",
              (unsigned long long)N, (unsigned long long)N, (unsigned long long)N, (unsigned long long)D, irank,
              (unsigned long long)n_ids, irank == 2 ? (unsigned long long)tern_view_dim(&ids, 1) : 1ull);
        return;
    }
    if (ids.ap.dtype != TERN_DTYPE_INT32) {
        kfail(k, TERN_ERR_INVALID, "embedding: ids dtype %s must be int32", tern_dtype_name((tern_dtype)ids.ap.dtype));
        return;
    }
    if (tern_view_dim(&table, 1) != D) {
        kfail(k, TERN_ERR_INVALID, "embedding: table is [%llu, %llu] but out rows have %llu elements (must be equal)",
              (unsigned long long)V, (unsigned long long)tern_view_dim(&table, 1), (unsigned long long)D);
        return;
    }
    if (V > UINT16_MAX) {
        kfail(k, TERN_ERR_UNSUPPORTED,
              "embedding: table has %llu rows; dma_gather addresses at most %u (its row count is a 16-bit field)",
              (unsigned long long)V, UINT16_MAX);
        return;
    }
    if (out.ap.dims[1].step != 1 || out.ap.num_partitions != 1) {
        kfail(k, TERN_ERR_INVALID, "embedding: out rows must be contiguous (column step %d)", out.ap.dims[1].step);
        return;
    }
    /* The table as V "partitions" (rows) of D elements, the form dma_gather indexes. Built here rather than
     * left to tern_kernel_dma_gather, whose conversion leaves the old dims[1] set. */
    tern_view rows = table;
    rows.ap.num_partitions = (uint16_t)V;
    rows.ap.partition_step = table.ap.dims[0].step;
    rows.ap.dims[0] = table.ap.dims[1];
    memset(&rows.ap.dims[1], 0, sizeof rows.ap.dims[1]);
    rows.ap.ndims = 1;
    const uint64_t P = k->cfg.partitions;
    for (uint64_t r0 = 0; r0 < N && !k->failed; r0 += P) {
        uint32_t rp = (uint32_t)min_u64(P, N - r0);
        tern_view idx = tern_kernel_sbuf(k, TERN_DTYPE_INT32, rp, 1, "embedding_ids");
        tern_view src = irank == 1 ? tern_view_slice(k, ids, 0, r0, r0 + rp, 1)
                                   : tern_view_block(k, ids, r0, r0 + rp, 0, 1);
        tern_kernel_load(k, idx, src);
        /* out rows [r0, r0+rp) as rp destination "partitions" of D elements, one per index. */
        tern_view dst = tern_view_slice(k, out, 0, r0, r0 + rp, 1);
        if (k->failed)
            break;
        dst.ap.num_partitions = (uint16_t)rp;
        dst.ap.partition_step = dst.ap.dims[0].step;
        dst.ap.dims[0] = dst.ap.dims[1];
        memset(&dst.ap.dims[1], 0, sizeof dst.ap.dims[1]); /* unused dims must be zero (program encoding) */
        dst.ap.ndims = 1;
        tern_kernel_dma_gather(k, dst, rows, idx, -1);
        tern_kernel_release(k, idx);
    }
}
