/* Generic instruction rules: opcode and engine, semaphores, registers, queues, branch targets, and the
 * per-operand rules (memory reach per engine, partition range and start rule, bounds), then dispatch to the
 * engine family's own rules. Facts: trainium-arch.md §2.4 (engine/memory connectivity, start-partition rule). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "sim/rules.h"

tern_status rules_fail(tern_error *err, tern_status code, const exec_ctx *cx, const tern_instr *ins, int slot,
                       const char *fmt, ...)
{
    if (!err)
        return code;
    char label[96], msg[TERN_ERROR_MSG_MAX - 128];
    instr_label(cx, ins, label, sizeof label);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (slot >= 0)
        return tern_error_set(err, code, "%s: operand %s: %s", label, operand_name(slot), msg);
    return tern_error_set(err, code, "%s: %s", label, msg);
}

uint64_t ap_elems(const tern_ap *ap) { return (uint64_t)ap->num_partitions * tern_ap_free_elems(ap); }

int rules_start_partition_ok(const tern_core *core, uint32_t start, uint32_t n)
{
    uint32_t P = core->cfg.partitions, q = P / 4 ? P / 4 : 1, h = P / 2 ? P / 2 : 1;
    if (n > h)
        return start == 0;
    if (n > q)
        return start % h == 0;
    return start % q == 0;
}

static const char *reach_text(unsigned reach)
{
    switch (reach) {
    case REACH_SBUF: return "SBUF";
    case REACH_PSUM: return "PSUM";
    case REACH_HBM: return "HBM";
    case REACH_SBUF | REACH_PSUM: return "SBUF or PSUM";
    case REACH_SBUF | REACH_HBM: return "SBUF or HBM";
    default: return "SBUF, PSUM or HBM";
    }
}

tern_status rules_check_ap(const tern_core *core, const exec_ctx *cx, const tern_instr *ins, int slot, unsigned reach,
                           tern_error *err)
{
    const tern_ap *ap = &ins->ap[slot];
    if (ap->ndims == 0 || ap->ndims > TERN_AP_MAX_DIMS)
        return rules_fail(err, TERN_ERR_INVALID, cx, ins, slot, "needs 1..%d free dimensions, has %u", TERN_AP_MAX_DIMS,
                          ap->ndims);
    if (ap->dtype >= TERN_DTYPE_COUNT)
        return rules_fail(err, TERN_ERR_INVALID, cx, ins, slot, "unknown dtype %u", ap->dtype);
    unsigned bit = ap->mem == TERN_MEM_SBUF ? REACH_SBUF : ap->mem == TERN_MEM_PSUM ? REACH_PSUM
                 : ap->mem == TERN_MEM_HBM  ? REACH_HBM  : 0;
    if (!(bit & reach))
        return rules_fail(err, TERN_ERR_INVALID, cx, ins, slot, "memory %s not reachable here (allowed: %s)",
                          tern_mem_name((tern_mem)ap->mem), reach_text(reach));
    if (ap->offset_reg != TERN_REG_NONE && ap->offset_reg >= core->cfg.num_registers)
        return rules_fail(err, TERN_ERR_RANGE, cx, ins, slot, "offset register r%u outside r0..r%u", ap->offset_reg,
                          core->cfg.num_registers - 1);
    int dma = ins->opcode == TERN_OP_DMA_COPY || ins->opcode == TERN_OP_DMA_GATHER;
    /* HBM has no partitions: for a DMA the partition index of an HBM pattern is just an outer dimension (a gather
     * table's rows, a store's rows), limited only by the 16-bit field. */
    uint32_t max_parts = ap->mem == TERN_MEM_HBM && dma ? UINT16_MAX : core->cfg.partitions;
    if (ap->num_partitions == 0 || ap->num_partitions > max_parts)
        return rules_fail(err, TERN_ERR_RANGE, cx, ins, slot, "partition count %u outside 1..%u", ap->num_partitions,
                          max_parts);
    if (ap->mem != TERN_MEM_HBM && !dma && !rules_start_partition_ok(core, ap->start_partition, ap->num_partitions))
        return rules_fail(err, TERN_ERR_INVALID, cx, ins, slot,
                          "start partition %u not allowed for %u partitions (start-partition rule: >%u partitions "
                          "start at 0, >%u at a multiple of %u, else a multiple of %u)",
                          ap->start_partition, ap->num_partitions, core->cfg.partitions / 2, core->cfg.partitions / 4,
                          core->cfg.partitions / 2, core->cfg.partitions / 4);
    /* Bounds: checked without a message first (the common, passing case costs no formatting). */
    if (ap->offset_reg == TERN_REG_NONE && ap_check_bounds(core, cx->engine, ap, "", NULL) != TERN_OK) {
        char what[128], label[96];
        instr_label(cx, ins, label, sizeof label);
        snprintf(what, sizeof what, "%s: operand %s", label, operand_name(slot));
        return ap_check_bounds(core, cx->engine, ap, what, err);
    }
    return TERN_OK;
}

static int is_control(tern_opcode op)
{
    return op >= TERN_OP_NOP && op <= TERN_OP_HALT;
}

tern_status rules_check_instr(const tern_core *core, const exec_ctx *cx, const tern_instr *ins, size_t count,
                              tern_error *err)
{
    const tern_opcode_info *info = tern_opcode_get((tern_opcode)ins->opcode);
    if (!info) {
        char label[64];
        snprintf(label, sizeof label, "%s #%zu", tern_engine_name(cx->engine), cx->pc);
        return tern_error_set(err, TERN_ERR_INVALID, "%s: unknown opcode %u", label, ins->opcode);
    }
    if (ins->engine != cx->engine)
        return rules_fail(err, TERN_ERR_INVALID, cx, ins, -1, "engine field %u does not match its stream (%s)",
                          ins->engine, tern_engine_name(cx->engine));
    if (!(info->engines & (1u << cx->engine))) {
        char allowed[96] = "";
        for (unsigned e = 0; e < TERN_ENGINE_COUNT; e++)
            if (info->engines & (1u << e)) {
                size_t l = strlen(allowed);
                snprintf(allowed + l, sizeof allowed - l, "%s%s", l ? ", " : "", tern_engine_name((tern_engine)e));
            }
        return rules_fail(err, TERN_ERR_INVALID, cx, ins, -1, "cannot issue on the %s engine (allowed: %s)",
                          tern_engine_name(cx->engine), allowed);
    }
    if (ins->wait_sem != TERN_SEM_NONE && ins->wait_sem >= core->cfg.num_semaphores)
        return rules_fail(err, TERN_ERR_RANGE, cx, ins, -1, "wait semaphore %u outside 0..%u", ins->wait_sem,
                          core->cfg.num_semaphores - 1);
    if (ins->signal_sem != TERN_SEM_NONE && ins->signal_sem >= core->cfg.num_semaphores)
        return rules_fail(err, TERN_ERR_RANGE, cx, ins, -1, "signal semaphore %u outside 0..%u", ins->signal_sem,
                          core->cfg.num_semaphores - 1);
    tern_opcode op = (tern_opcode)ins->opcode;
    if (is_control(op)) {
        unsigned R = core->cfg.num_registers;
        switch (op) {
        case TERN_OP_SEM_WAIT:
            if (ins->wait_sem == TERN_SEM_NONE)
                return rules_fail(err, TERN_ERR_INVALID, cx, ins, -1, "sem_wait needs a wait semaphore");
            break;
        case TERN_OP_SEM_SIGNAL:
        case TERN_OP_BARRIER:
            if (ins->signal_sem == TERN_SEM_NONE)
                return rules_fail(err, TERN_ERR_INVALID, cx, ins, -1, "needs a semaphore (signal field)");
            if (op == TERN_OP_BARRIER && ins->imm_i0 < 1)
                return rules_fail(err, TERN_ERR_RANGE, cx, ins, -1, "barrier generation %d must be >= 1", ins->imm_i0);
            break;
        case TERN_OP_REG_SET:
            if (ins->rd >= R)
                return rules_fail(err, TERN_ERR_RANGE, cx, ins, -1, "register r%u outside r0..r%u", ins->rd, R - 1);
            break;
        case TERN_OP_REG_ALU:
            if (ins->rd >= R || ins->ra >= R || (!(ins->flags & TERN_FLAG_IMM_B) && ins->rb >= R))
                return rules_fail(err, TERN_ERR_RANGE, cx, ins, -1, "register r%u/r%u/r%u outside r0..r%u", ins->rd,
                                  ins->ra, ins->rb, R - 1);
            if (ins->op0 >= TERN_ALU_COUNT || ins->op0 == TERN_ALU_POW || ins->op0 == TERN_ALU_RSQRT)
                return rules_fail(err, TERN_ERR_INVALID, cx, ins, -1, "ALU op %u not an integer register operation",
                                  ins->op0);
            break;
        case TERN_OP_BRANCH:
            if (ins->ra >= R || (!(ins->flags & TERN_FLAG_IMM_B) && ins->rb >= R))
                return rules_fail(err, TERN_ERR_RANGE, cx, ins, -1, "register r%u/r%u outside r0..r%u", ins->ra,
                                  ins->rb, R - 1);
            if (ins->op0 >= TERN_CMP_COUNT)
                return rules_fail(err, TERN_ERR_INVALID, cx, ins, -1, "comparison %u unknown", ins->op0);
            if (ins->imm_i0 < 0 || (size_t)ins->imm_i0 > count)
                return rules_fail(err, TERN_ERR_RANGE, cx, ins, -1, "branch target %d outside 0..%zu", ins->imm_i0,
                                  count);
            break;
        default: break;
        }
        return TERN_OK;
    }
    switch (op) {
    case TERN_OP_LOAD_STATIONARY:
    case TERN_OP_MULTIPLY_MOVING:
    case TERN_OP_TRANSPOSE_PE: return check_tensor(core, cx, ins, err);
    case TERN_OP_ACTIVATION: return check_scalar(core, cx, ins, err);
    case TERN_OP_IOTA:
    case TERN_OP_AFFINE_SELECT:
    case TERN_OP_PARTITION_REDUCE:
    case TERN_OP_TEXT_PARSE:
    case TERN_OP_TEXT_FORMAT: return check_gpsimd(core, cx, ins, err);
    case TERN_OP_DMA_COPY:
    case TERN_OP_DMA_GATHER: return check_dma(core, cx, ins, err);
    default: return check_vector(core, cx, ins, err);
    }
}

tern_status tern_instr_check(const tern_core_config *cfg, size_t pc, size_t count, const tern_instr *ins,
                             tern_error *err)
{
    /* Static rules need only the geometry: a core with no memories attached. */
    tern_core shell;
    memset(&shell, 0, sizeof shell);
    shell.cfg = *cfg;
    exec_ctx cx = {(tern_engine)(ins->engine < TERN_ENGINE_COUNT ? ins->engine : 0), pc, 0, NULL};
    return rules_check_instr(&shell, &cx, ins, count, err);
}
