/* The `collective` instruction (isa_table.def, family COLLECTIVE) as one core sees it: its static rules
 * (check_op_COLLECTIVE: HBM source and destination of one dtype the collective layer moves, a known operation,
 * algorithm and reduction, the element counts the operation keeps, and a completion semaphore, without which
 * nothing could wait for its results) and its executor entry point. A collective has no effect a core can compute
 * alone: in a multi-rank launch the scheduler hands it to the multi-rank runner (rank_run.c) when its trigger
 * ends, and the executor below is reached only by a run on a single core, which it refuses by name.
 * Encoding: imm_i0 = operation (tern_coll_op, 0..5) + 256 x algorithm (tern_coll_algo, 0..6); op0 = add/max/min;
 * imm_i1 = replica groups (0 all ranks, g > 0 consecutive groups of g, -g groups of g ranks R/g apart); B (IN1)
 * = all-to-allv's counts, an HBM int32 tensor of n x n elements (n the group size, checked at the join), or 3 x n
 * x n (counts, send displacements, receive displacements); or permute's explicit (source, target) rank pairs, 2 x
 * npairs int32 elements (imm_i1 0: the pairs name ranks of the whole launch; without B each group's ring shift). */
#include <stdio.h>

#include "sim/rules.h"
#include "tern/collective.h"

/* Declared here as well as by the generated per-opcode declarations (rules.h, core_internal.h). */
tern_status check_op_COLLECTIVE(const tern_core *core, const exec_ctx *cx, const tern_instr *ins, size_t count,
                                tern_error *err);
tern_status exec_op_COLLECTIVE(tern_core *core, const exec_ctx *cx, const tern_instr *ins, tern_error *err);

static int coll_dtype_ok(tern_dtype t)
{
    switch (t) {
    case TERN_DTYPE_FP32:
    case TERN_DTYPE_BF16:
    case TERN_DTYPE_FP16:
    case TERN_DTYPE_FP8_E4M3:
    case TERN_DTYPE_FP8_E5M2:
    case TERN_DTYPE_FP8_E4M3_NEURON:
    case TERN_DTYPE_INT32: return 1;
    default: return 0;
    }
}

static int coll_reducing(int op) { return op == TERN_COLL_ALL_REDUCE || op == TERN_COLL_REDUCE_SCATTER; }

tern_status check_op_COLLECTIVE(const tern_core *core, const exec_ctx *cx, const tern_instr *ins, size_t count,
                                tern_error *err)
{
    (void)count;
    tern_status st;
    int op = ins->imm_i0 & 255, algo = ins->imm_i0 >> 8;
    if ((st = rules_check_ap(core, cx, ins, TERN_AP_DST, REACH_HBM, err)) ||
        (st = rules_check_ap(core, cx, ins, TERN_AP_IN0, REACH_HBM, err)))
        return st;
    const tern_ap *d = &ins->ap[TERN_AP_DST], *a = &ins->ap[TERN_AP_IN0];
    if (ins->signal_sem == TERN_SEM_NONE)
        return rules_fail(err, TERN_ERR_INVALID, cx, ins, -1,
                          "a collective needs a completion semaphore (signal field): its results are visible only "
                          "after it signals, as a DMA's");
    if (op > TERN_COLL_ALL_TO_ALLV)
        return rules_fail(err, TERN_ERR_RANGE, cx, ins, -1,
                          "collective operation %d (imm_i0 & 255) outside 0..%d (all-reduce, all-gather, "
                          "reduce-scatter, all-to-all, permute, all-to-allv)",
                          op, TERN_COLL_ALL_TO_ALLV);
    const tern_ap *b = &ins->ap[TERN_AP_IN1];
    if (op == TERN_COLL_ALL_TO_ALLV && !b->ndims)
        return rules_fail(err, TERN_ERR_INVALID, cx, ins, TERN_AP_IN1,
                          "all-to-allv needs its counts: an HBM int32 tensor of n x n elements (B)");
    if (op == TERN_COLL_ALL_TO_ALLV || (op == TERN_COLL_PERMUTE && b->ndims)) {
        const char *what = op == TERN_COLL_PERMUTE ? "permute pairs" : "all-to-allv counts";
        if ((st = rules_check_ap(core, cx, ins, TERN_AP_IN1, REACH_HBM, err)))
            return st;
        if (b->dtype != TERN_DTYPE_INT32)
            return rules_fail(err, TERN_ERR_INVALID, cx, ins, TERN_AP_IN1, "%s are int32, not %s", what,
                              tern_dtype_name((tern_dtype)b->dtype));
        uint64_t nb = ap_elems(b);
        if (op == TERN_COLL_PERMUTE && (nb == 0 || nb % 2))
            return rules_fail(err, TERN_ERR_INVALID, cx, ins, TERN_AP_IN1,
                              "permute pairs (B) are (source, target) rank pairs: an even number of int32 elements, "
                              "not %llu", (unsigned long long)nb);
        if (op == TERN_COLL_PERMUTE && ins->imm_i1 != 0)
            return rules_fail(err, TERN_ERR_INVALID, cx, ins, -1,
                              "permute pairs (B) name ranks of the whole launch: replica groups imm_i1 must be 0, "
                              "not %d", ins->imm_i1);
    } else if (b->ndims) {
        return rules_fail(err, TERN_ERR_INVALID, cx, ins, TERN_AP_IN1,
                          "only all-to-allv (its counts) and permute (its pairs) take B, not %s",
                          tern_coll_op_name((tern_coll_op)op));
    }
    if (algo < 0 || algo >= TERN_ALGO_COUNT)
        return rules_fail(err, TERN_ERR_RANGE, cx, ins, -1, "collective algorithm %d (imm_i0 >> 8) outside 0..%d",
                          algo, TERN_ALGO_COUNT - 1);
    if (coll_reducing(op) && ins->op0 != TERN_ALU_ADD && ins->op0 != TERN_ALU_MAX && ins->op0 != TERN_ALU_MIN)
        return rules_fail(err, TERN_ERR_INVALID, cx, ins, -1, "%s reduces with add, max or min, not op0=%s",
                          tern_coll_op_name((tern_coll_op)op),
                          ins->op0 < TERN_ALU_COUNT ? tern_alu_name((tern_alu_op)ins->op0) : "?");
    if (d->dtype != a->dtype)
        return rules_fail(err, TERN_ERR_INVALID, cx, ins, TERN_AP_DST, "dtype %s differs from the source's %s",
                          tern_dtype_name((tern_dtype)d->dtype), tern_dtype_name((tern_dtype)a->dtype));
    if (!coll_dtype_ok((tern_dtype)d->dtype))
        return rules_fail(err, TERN_ERR_INVALID, cx, ins, TERN_AP_DST,
                          "dtype %s: collectives move fp32, bf16, fp16, fp8 or int32",
                          tern_dtype_name((tern_dtype)d->dtype));
    if ((op == TERN_COLL_ALL_REDUCE || op == TERN_COLL_ALL_TO_ALL || op == TERN_COLL_PERMUTE ||
         op == TERN_COLL_ALL_TO_ALLV) &&
        ap_elems(d) != ap_elems(a))
        return rules_fail(err, TERN_ERR_INVALID, cx, ins, TERN_AP_DST,
                          "%llu elements, source has %llu (%s keeps the element count)",
                          (unsigned long long)ap_elems(d), (unsigned long long)ap_elems(a),
                          tern_coll_op_name((tern_coll_op)op));
    return TERN_OK;
}

tern_status exec_op_COLLECTIVE(tern_core *core, const exec_ctx *cx, const tern_instr *ins, tern_error *err)
{
    (void)core;
    return rules_fail(err, TERN_ERR_INVALID, cx, ins, -1,
                      "a collective runs only in a multi-rank launch (tern_ranks_run, tern_rt_ranks_execute, "
                      "`tern launch`), not on a single core");
}
