/* DMA: copies between any of HBM and SBUF with up-to-4-D access patterns on both sides (the partition index
 * strides too on HBM), casting through fp32 when the dtypes differ (RNE); same-dtype copies move the exact
 * bits. Gather (embedding lookup) picks rows of a table by an int32 index tensor, bounds-checked; scatter (its
 * write side, the embedding gradient's) writes source partition p to the table row its index names, partitions in
 * ascending order, so of duplicate indices the last partition's row stays. In the
 * functional model a transfer completes when issued; its timing (queues, engines, bandwidth) is the timing
 * model's. Facts: trainium-arch.md §5 (DMA reach, casts, queues). */
#include <stdio.h>
#include <string.h>

#include "sim/rules.h"

static int dtype_is_int(tern_dtype t) { return !tern_dtype_is_float(t); }

static tern_status check_dma(const tern_core *core, const exec_ctx *cx, const tern_instr *ins, tern_error *err)
{
    tern_status st;
    const unsigned reach = REACH_SBUF | REACH_HBM;
    if (ins->queue >= core->cfg.dma_queues)
        return rules_fail(err, TERN_ERR_RANGE, cx, ins, -1, "DMA queue %u outside 0..%u", ins->queue,
                          core->cfg.dma_queues - 1);
    if ((st = rules_check_ap(core, cx, ins, TERN_AP_DST, reach, err)) ||
        (st = rules_check_ap(core, cx, ins, TERN_AP_IN0, reach, err)))
        return st;
    const tern_ap *d = &ins->ap[TERN_AP_DST], *a = &ins->ap[TERN_AP_IN0];
    if (ins->opcode == TERN_OP_DMA_COPY) {
        if (ap_elems(d) != ap_elems(a))
            return rules_fail(err, TERN_ERR_INVALID, cx, ins, TERN_AP_DST,
                              "%llu elements, source has %llu (element counts must match)",
                              (unsigned long long)ap_elems(d), (unsigned long long)ap_elems(a));
        return TERN_OK;
    }
    /* gather and scatter: one index per row of the side that is not the table */
    if ((st = rules_check_ap(core, cx, ins, TERN_AP_IN1, REACH_SBUF, err)))
        return st;
    const tern_ap *b = &ins->ap[TERN_AP_IN1];
    int scatter = ins->opcode == TERN_OP_DMA_SCATTER;
    const tern_ap *rows = scatter ? a : d;
    if (!dtype_is_int((tern_dtype)b->dtype))
        return rules_fail(err, TERN_ERR_INVALID, cx, ins, TERN_AP_IN1, "index dtype %s must be an integer type",
                          tern_dtype_name((tern_dtype)b->dtype));
    if (tern_ap_free_elems(b) != 1 || b->num_partitions != rows->num_partitions)
        return rules_fail(err, TERN_ERR_INVALID, cx, ins, TERN_AP_IN1,
                          "index shape [%u, %llu] must be [%u, 1] (one row index per %s partition)",
                          b->num_partitions, (unsigned long long)tern_ap_free_elems(b), rows->num_partitions,
                          scatter ? "source" : "destination");
    if (tern_ap_free_elems(d) != tern_ap_free_elems(a))
        return rules_fail(err, TERN_ERR_INVALID, cx, ins, scatter ? TERN_AP_IN0 : TERN_AP_DST,
                          "row of %llu elements, table rows have %llu",
                          (unsigned long long)tern_ap_free_elems(scatter ? a : d),
                          (unsigned long long)tern_ap_free_elems(scatter ? d : a));
    return TERN_OK;
}

static tern_status dyn_bounds(tern_core *core, const exec_ctx *cx, const tern_instr *ins, int slot, tern_error *err)
{
    const tern_ap *ap = &ins->ap[slot];
    if (ap->offset_reg == TERN_REG_NONE)
        return TERN_OK;
    char what[128], label[96];
    instr_label(cx, ins, label, sizeof label);
    snprintf(what, sizeof what, "%s: operand %s", label, operand_name(slot));
    return ap_check_bounds(core, cx->engine, ap, what, err);
}

/* Copy src -> dst: exact integers through int32, floats through fp32 (exact for same-dtype floats). */
static tern_status copy_ap(tern_core *core, const exec_ctx *cx, const tern_ap *dst, const tern_ap *src, tern_error *err)
{
    if (src->dtype == dst->dtype) /* same dtype: the exact bits, at memcpy speed */
        return ap_copy_raw(core, cx->engine, dst, src, err);
    tern_status st;
    if (ap_cast_rows(core, cx->engine, dst, src, sr_stream_of(cx), &st, err)) /* fp32 rows, converted in place */
        return st;
    if (ap_widen_into_rows(core, cx->engine, dst, src, &st, err)) /* into fp32 rows, converted in place */
        return st;
    size_t n = (size_t)ap_elems(src);
    float *buf = core_scratch(core, 3, n);
    if (!buf)
        return tern_error_set(err, TERN_ERR_NOMEM, "dma: out of host memory for %zu elements", n);
    if (dtype_is_int((tern_dtype)src->dtype) && dtype_is_int((tern_dtype)dst->dtype)) {
        int32_t *ib = (int32_t *)(void *)buf;
        if ((st = ap_gather_i32(core, cx->engine, src, ib, err)))
            return st;
        return ap_scatter_i32(core, cx->engine, dst, ib, err);
    }
    if ((st = ap_gather_f32(core, cx->engine, src, buf, err)))
        return st;
    return ap_scatter_f32(core, cx->engine, dst, buf, sr_stream_of(cx), err);
}

/* dma_scatter: source partition p (SBUF row or HBM row) to table row idx[p] of D, p ascending. Every index is
 * checked before anything is written, so a bad one leaves the table as it was. */
static tern_status exec_scatter(tern_core *core, const exec_ctx *cx, const tern_instr *ins, const int32_t *idx,
                                tern_error *err)
{
    const tern_ap *d = &ins->ap[TERN_AP_DST], *a = &ins->ap[TERN_AP_IN0];
    for (uint32_t p = 0; p < a->num_partitions; p++)
        if (idx[p] < 0 || (uint32_t)idx[p] >= d->num_partitions)
            return rules_fail(err, TERN_ERR_RANGE, cx, ins, TERN_AP_IN1,
                              "index %d at partition %u outside the table's %u rows", idx[p], p, d->num_partitions);
    tern_status st;
    for (uint32_t p = 0; p < a->num_partitions; p++) {
        tern_ap row = *a, out = *d;
        row.num_partitions = 1;
        if (a->mem == TERN_MEM_HBM)
            row.offset = a->offset + (uint64_t)((int64_t)p * a->partition_step *
                                                (int64_t)tern_dtype_size((tern_dtype)a->dtype));
        else
            row.start_partition = (uint16_t)(a->start_partition + p);
        out.num_partitions = 1;
        out.start_partition = 0;
        if (d->mem == TERN_MEM_HBM)
            out.offset = d->offset + (uint64_t)((int64_t)idx[p] * d->partition_step *
                                                (int64_t)tern_dtype_size((tern_dtype)d->dtype));
        else
            out.start_partition = (uint16_t)(d->start_partition + idx[p]);
        if ((st = copy_ap(core, cx, &out, &row, err)))
            return st;
    }
    return TERN_OK;
}

/* What rules_check_instr and check_dma guarantee: a DMA trigger on an engine the table allows, a queue the core
 * has, source and destination used in SBUF or HBM; gather and scatter with an integer [rows, 1] index in SBUF. */
static void dma_entry(const tern_core *core, const exec_ctx *cx, const tern_instr *ins)
{
    exec_assert_entry(cx, ins, TERN_ISA_FAMILY_DMA);
    TERN_ASSERT(ins->queue < core->cfg.dma_queues);
    const unsigned mems = EXEC_MEM_BIT(TERN_MEM_SBUF) | EXEC_MEM_BIT(TERN_MEM_HBM);
    exec_assert_operand(core, ins, TERN_AP_DST, mems);
    exec_assert_operand(core, ins, TERN_AP_IN0, mems);
    if (ins->opcode != TERN_OP_DMA_COPY) {
        exec_assert_operand(core, ins, TERN_AP_IN1, EXEC_MEM_BIT(TERN_MEM_SBUF));
        TERN_ASSERT(dtype_is_int((tern_dtype)ins->ap[TERN_AP_IN1].dtype));
        TERN_ASSERT(tern_ap_free_elems(&ins->ap[TERN_AP_IN1]) == 1);
    }
}

static tern_status exec_dma(tern_core *core, const exec_ctx *cx, const tern_instr *ins, tern_error *err)
{
    tern_status st;
    dma_entry(core, cx, ins);
    for (int s = 0; s < (ins->opcode == TERN_OP_DMA_COPY ? 2 : 3); s++)
        if ((st = dyn_bounds(core, cx, ins, s, err)))
            return st;
    const tern_ap *d = &ins->ap[TERN_AP_DST], *a = &ins->ap[TERN_AP_IN0];
    if (ins->opcode == TERN_OP_DMA_COPY) {
        return copy_ap(core, cx, d, a, err);
    }
    const tern_ap *b = &ins->ap[TERN_AP_IN1];
    int32_t idx[1024];
    TERN_ASSERT(b->num_partitions <= 1024);
    if ((st = ap_gather_i32(core, cx->engine, b, idx, err)))
        return st;
    if (ins->opcode == TERN_OP_DMA_SCATTER)
        return exec_scatter(core, cx, ins, idx, err);
    for (uint32_t p = 0; p < d->num_partitions; p++) {
        if (idx[p] < 0 || (uint32_t)idx[p] >= a->num_partitions)
            return rules_fail(err, TERN_ERR_RANGE, cx, ins, TERN_AP_IN1,
                              "index %d at partition %u outside the table's %u rows", idx[p], p, a->num_partitions);
        tern_ap row = *a, out = *d;
        size_t es = tern_dtype_size((tern_dtype)a->dtype);
        row.num_partitions = 1;
        row.start_partition = 0;
        if (a->mem == TERN_MEM_HBM)
            row.offset = a->offset + (uint64_t)((int64_t)idx[p] * a->partition_step * (int64_t)es);
        else
            row.start_partition = (uint16_t)(a->start_partition + idx[p]);
        out.num_partitions = 1;
        if (d->mem == TERN_MEM_HBM)
            out.offset = d->offset + (uint64_t)((int64_t)p * d->partition_step * (int64_t)tern_dtype_size((tern_dtype)d->dtype));
        else
            out.start_partition = (uint16_t)(d->start_partition + p);
        if ((st = copy_ap(core, cx, &out, &row, err)))
            return st;
    }
    return TERN_OK;
}

/* ---- entry points (declared from the instruction table: rules.h, core_internal.h); the three DMA opcodes share
 * one rule checker and one executor, which tell copy, gather and scatter apart by opcode ---- */
#define DMA_OP(ID)                                                                                                 \
    tern_status check_op_##ID(const tern_core *core, const exec_ctx *cx, const tern_instr *ins, size_t count,      \
                              tern_error *err)                                                                   \
    {                                                                                                              \
        (void)count;                                                                                               \
        return check_dma(core, cx, ins, err);                                                                      \
    }                                                                                                              \
    tern_status exec_op_##ID(tern_core *core, const exec_ctx *cx, const tern_instr *ins, tern_error *err)         \
    {                                                                                                              \
        return exec_dma(core, cx, ins, err);                                                                       \
    }

DMA_OP(DMA_COPY)
DMA_OP(DMA_GATHER)
DMA_OP(DMA_SCATTER)
