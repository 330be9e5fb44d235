/* Collectives inside kernels (issue 13, "Programs"): one `collective` instruction per call, from HBM to HBM,
 * with the same semaphore discipline as DMA. The builder treats the collective's source as read and its
 * destination as written by the "collective queue" counter (semaphore ENGINES + DMA queues): the instruction
 * waits for the last writers of its source and for the readers and writers of its destination, and signals the
 * collective counter when the collective completes (at the time the fabric gives), so compute before it is waited
 * for and compute after it waits for it like any consumer of a DMA. The collectives of a rank complete in issue
 * order (the chip's collective engines run them one after another), so one counter counts them; they are issued
 * from one engine (Sync unless told otherwise), as a DMA queue is fed by one engine. The collective runs only in a
 * multi-rank launch (tern_ranks_run, tern_rt_ranks_*, `tern launch`). Operand shapes follow NKI's
 * nki.collectives: all-reduce, all-to-all and permute keep the element count; all-gather's destination is the
 * group size times its source; reduce-scatter's source is the group size times its destination. All-to-allv's
 * counts (and displacements) and permute's explicit (source, target) pairs travel in operand B, an HBM int32
 * tensor that the collective reads like its source. */
#include <string.h>

#include "kernel/builder_internal.h"
#include "tern/collective.h"
#include "tern/kernel_lib.h"

/* counts: operand B, all-to-allv's counts (and displacements) or permute's pairs; NULL for the others */
static void emit_collective(tern_kernel *k, tern_engine e, int op, tern_view dst, tern_view src,
                            const tern_view *counts, tern_alu_op reduce, int32_t groups, int algorithm)
{
    if (k->failed)
        return;
    if ((unsigned)op > TERN_KCOLL_PERMUTE && !counts) {
        kfail(k, TERN_ERR_INVALID, "collective: operation %d unknown (all-reduce 0 .. permute 4)", (int)op);
        return;
    }
    const char *what = op == TERN_COLL_PERMUTE ? "permute" : "all-to-allv";
    const char *table = op == TERN_COLL_PERMUTE ? "pairs" : "counts";
    if (counts && (!kview_ok(k, counts, what) || counts->ap.mem != TERN_MEM_HBM ||
                   counts->ap.dtype != TERN_DTYPE_INT32)) {
        if (!k->failed)
            kfail(k, TERN_ERR_INVALID, "%s: %s '%s' must be an HBM int32 tensor (%s, %s)", what, table,
                  k->regions[counts->region].name, tern_mem_name((tern_mem)counts->ap.mem),
                  tern_dtype_name((tern_dtype)counts->ap.dtype));
        return;
    }
    uint64_t nb = counts ? (uint64_t)counts->ap.num_partitions * tern_ap_free_elems(&counts->ap) : 0;
    if (counts && op == TERN_COLL_PERMUTE && nb % 2) {
        kfail(k, TERN_ERR_INVALID, "permute: pairs '%s' hold (source, target) pairs, an even number of int32 "
              "elements, not %llu", k->regions[counts->region].name, (unsigned long long)nb);
        return;
    }
    if (!kview_ok(k, &dst, "collective") || !kview_ok(k, &src, "collective"))
        return;
    if (dst.ap.mem != TERN_MEM_HBM || src.ap.mem != TERN_MEM_HBM) {
        kfail(k, TERN_ERR_INVALID, "collective: source '%s' and destination '%s' must be HBM tensors (%s, %s)",
              k->regions[src.region].name, k->regions[dst.region].name, tern_mem_name((tern_mem)src.ap.mem),
              tern_mem_name((tern_mem)dst.ap.mem));
        return;
    }
    tern_instr ins;
    memset(&ins, 0, sizeof ins);
    ins.opcode = TERN_OP_COLLECTIVE;
    ins.engine = (uint8_t)(e == TERN_ENGINE_AUTO ? TERN_ENGINE_SYNC : e);
    ins.wait_sem = TERN_SEM_NONE;
    ins.signal_sem = TERN_SEM_NONE;
    for (int s = 0; s < TERN_INSTR_OPERANDS; s++)
        ins.ap[s].offset_reg = TERN_REG_NONE;
    if (algorithm < 0 || algorithm > 127) {
        kfail(k, TERN_ERR_RANGE, "collective: algorithm %d outside 0..127", algorithm);
        return;
    }
    ins.imm_i0 = (int32_t)op + 256 * algorithm;
    ins.op0 = (uint8_t)(op == TERN_KCOLL_ALL_REDUCE || op == TERN_KCOLL_REDUCE_SCATTER ? reduce : TERN_ALU_BYPASS);
    ins.imm_i1 = groups;
    ins.ap[TERN_AP_DST] = dst.ap;
    ins.ap[TERN_AP_IN0] = src.ap;
    if (counts) {
        ins.ap[TERN_AP_IN1] = counts->ap;
        tern_view reads[2] = {src, *counts};
        tern_kernel_emit(k, &ins, reads, 2, &dst, 1);
        return;
    }
    tern_kernel_emit(k, &ins, &src, 1, &dst, 1);
}

void tern_kernel_collective_on(tern_kernel *k, tern_engine e, tern_kernel_coll op, tern_view dst, tern_view src,
                               tern_alu_op reduce, int32_t groups, int algorithm)
{
    emit_collective(k, e, (int)op, dst, src, NULL, reduce, groups, algorithm);
}

void tern_kernel_all_to_allv(tern_kernel *k, tern_view dst, tern_view src, tern_view counts, int32_t groups,
                             int algorithm)
{
    emit_collective(k, TERN_ENGINE_AUTO, TERN_COLL_ALL_TO_ALLV, dst, src, &counts, TERN_ALU_BYPASS, groups, algorithm);
}

void tern_kernel_permute(tern_kernel *k, tern_view dst, tern_view src, tern_view pairs, int algorithm)
{
    emit_collective(k, TERN_ENGINE_AUTO, TERN_COLL_PERMUTE, dst, src, &pairs, TERN_ALU_BYPASS, 0, algorithm);
}

void tern_kernel_collective(tern_kernel *k, tern_kernel_coll op, tern_view dst, tern_view src, tern_alu_op reduce,
                            int32_t groups, int algorithm)
{
    tern_kernel_collective_on(k, TERN_ENGINE_AUTO, op, dst, src, reduce, groups, algorithm);
}

void tern_kernel_all_reduce(tern_kernel *k, tern_view dst, tern_view src, tern_alu_op reduce)
{
    tern_kernel_collective(k, TERN_KCOLL_ALL_REDUCE, dst, src, reduce, 0, 0);
}

void tern_kernel_all_gather(tern_kernel *k, tern_view dst, tern_view src)
{
    tern_kernel_collective(k, TERN_KCOLL_ALL_GATHER, dst, src, TERN_ALU_BYPASS, 0, 0);
}

void tern_kernel_reduce_scatter(tern_kernel *k, tern_view dst, tern_view src, tern_alu_op reduce)
{
    tern_kernel_collective(k, TERN_KCOLL_REDUCE_SCATTER, dst, src, reduce, 0, 0);
}
