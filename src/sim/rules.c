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
    case REACH_PSUM | REACH_HBM: return "PSUM or HBM";
    }
    return "SBUF, PSUM or HBM"; /* a bit mask, not an enum: the remaining combination */
}

/* Signed checked helpers for the span: steps are signed, so the extent is too. */
static int mul_i64(int64_t a, int64_t b, int64_t *r) { return !__builtin_mul_overflow(a, b, r); }
static int add_i64(int64_t a, int64_t b, int64_t *r) { return !__builtin_add_overflow(a, b, r); }

tern_status rules_check_ap_size(const tern_core *core, const exec_ctx *cx, const tern_instr *ins, int slot,
                                tern_error *err)
{
    const tern_ap *ap = &ins->ap[slot];
    char why[256];
    if (tern_ap_size_check(ap, why, sizeof why))
        return rules_fail(err, TERN_ERR_RANGE, cx, ins, slot, "%s", why);
    if (ap->ndims == 0)
        return TERN_OK;
    int onchip = ap->mem == TERN_MEM_SBUF || ap->mem == TERN_MEM_PSUM;
    if (!onchip && ap->mem != TERN_MEM_HBM)
        return TERN_OK; /* the reach rule names it */
    uint64_t mem_bytes = ap->mem == TERN_MEM_SBUF ? core->cfg.sbuf_partition_bytes
                       : ap->mem == TERN_MEM_PSUM ? (uint64_t)core->cfg.psum_banks * core->cfg.psum_bank_bytes
                                                  : core->cfg.hbm_bytes;
    const char *mem_text = ap->mem == TERN_MEM_SBUF ? "SBUF's bytes per partition"
                         : ap->mem == TERN_MEM_PSUM ? "PSUM's bytes per partition" : "HBM";
    /* The elements the pattern reaches run from lo to hi (relative to its base); a step-0 dimension adds
     * nothing, so a broadcast that rereads the same bytes stays legal however many times it does. */
    int64_t lo = 0, hi = 0, span;
    int ok = 1;
    for (unsigned k = 0; k < ap->ndims && ok; k++) {
        int64_t reach;
        ok = mul_i64(ap->dims[k].step, (int64_t)ap->dims[k].num - (ap->dims[k].num ? 1 : 0), &reach) &&
             (reach >= 0 ? add_i64(hi, reach, &hi) : add_i64(lo, reach, &lo));
    }
    if (ok && !onchip && ap->num_partitions > 1) { /* HBM rows are an outer dimension of the pattern */
        int64_t reach;
        ok = mul_i64(ap->partition_step, (int64_t)ap->num_partitions - 1, &reach) &&
             (reach >= 0 ? add_i64(hi, reach, &hi) : add_i64(lo, reach, &lo));
    }
    int64_t es = (int64_t)tern_dtype_size((tern_dtype)ap->dtype);
    ok = ok && add_i64(hi - lo, 1, &span) && mul_i64(span, es, &span); /* hi >= 0 >= lo: hi - lo cannot wrap */
    if (!ok)
        return rules_fail(err, TERN_ERR_RANGE, cx, ins, slot,
                          "byte span of the pattern (steps x counts%s) overflows 64 bits",
                          onchip ? "" : " and the partition step");
    if ((uint64_t)span > mem_bytes)
        return rules_fail(err, TERN_ERR_RANGE, cx, ins, slot,
                          "byte span of %lld bytes (elements %lld..%lld x %lld bytes) is larger than %s (%llu)",
                          (long long)span, (long long)lo, (long long)hi, (long long)es, mem_text,
                          (unsigned long long)mem_bytes);
    if (ap->offset > mem_bytes)
        return rules_fail(err, TERN_ERR_RANGE, cx, ins, slot, "offset %llu beyond %s (%llu)",
                          (unsigned long long)ap->offset, mem_text, (unsigned long long)mem_bytes);
    return TERN_OK;
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
    int dma = tern_opcode_get((tern_opcode)ins->opcode)->family == TERN_ISA_FAMILY_DMA;
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
    tern_status st = rules_check_ap_size(core, cx, ins, slot, err);
    if (st)
        return st;
    /* Bounds: checked without a message first (the common, passing case costs no formatting). */
    if (ap->offset_reg == TERN_REG_NONE && ap_check_bounds(core, cx->engine, ap, "", NULL) != TERN_OK) {
        char what[128], label[96];
        instr_label(cx, ins, label, sizeof label);
        snprintf(what, sizeof what, "%s: operand %s", label, operand_name(slot));
        return ap_check_bounds(core, cx->engine, ap, what, err);
    }
    return TERN_OK;
}

/* ---- the CONTROL family's rules (sequencer control: semaphores, registers, branch) ---- */

#define CONTROL_RULES(ID)                                                                                          \
    tern_status check_op_##ID(const tern_core *core, const exec_ctx *cx, const tern_instr *ins, size_t count,      \
                              tern_error *err)

CONTROL_RULES(NOP)
{
    (void)core, (void)cx, (void)ins, (void)count, (void)err;
    return TERN_OK;
}

CONTROL_RULES(HALT)
{
    (void)core, (void)cx, (void)ins, (void)count, (void)err;
    return TERN_OK;
}

CONTROL_RULES(SEM_WAIT)
{
    (void)core, (void)count;
    if (ins->wait_sem == TERN_SEM_NONE)
        return rules_fail(err, TERN_ERR_INVALID, cx, ins, -1, "sem_wait needs a wait semaphore");
    return TERN_OK;
}

CONTROL_RULES(SEM_SIGNAL)
{
    (void)core, (void)count;
    if (ins->signal_sem == TERN_SEM_NONE)
        return rules_fail(err, TERN_ERR_INVALID, cx, ins, -1, "needs a semaphore (signal field)");
    return TERN_OK;
}

CONTROL_RULES(BARRIER)
{
    (void)core, (void)count;
    if (ins->signal_sem == TERN_SEM_NONE)
        return rules_fail(err, TERN_ERR_INVALID, cx, ins, -1, "needs a semaphore (signal field)");
    if (ins->imm_i0 < 1)
        return rules_fail(err, TERN_ERR_RANGE, cx, ins, -1, "barrier generation %d must be >= 1", ins->imm_i0);
    return TERN_OK;
}

CONTROL_RULES(REG_SET)
{
    (void)count;
    unsigned R = core->cfg.num_registers;
    if (ins->rd >= R)
        return rules_fail(err, TERN_ERR_RANGE, cx, ins, -1, "register r%u outside r0..r%u", ins->rd, R - 1);
    return TERN_OK;
}

CONTROL_RULES(REG_ALU)
{
    (void)count;
    unsigned R = core->cfg.num_registers;
    if (ins->rd >= R || ins->ra >= R || (!(ins->flags & TERN_FLAG_IMM_B) && ins->rb >= R))
        return rules_fail(err, TERN_ERR_RANGE, cx, ins, -1, "register r%u/r%u/r%u outside r0..r%u", ins->rd, ins->ra,
                          ins->rb, R - 1);
    if (ins->op0 >= TERN_ALU_COUNT || ins->op0 == TERN_ALU_POW || ins->op0 == TERN_ALU_RSQRT)
        return rules_fail(err, TERN_ERR_INVALID, cx, ins, -1, "ALU op %u not an integer register operation", ins->op0);
    return TERN_OK;
}

CONTROL_RULES(BRANCH)
{
    unsigned R = core->cfg.num_registers;
    if (ins->ra >= R || (!(ins->flags & TERN_FLAG_IMM_B) && ins->rb >= R))
        return rules_fail(err, TERN_ERR_RANGE, cx, ins, -1, "register r%u/r%u outside r0..r%u", ins->ra, ins->rb,
                          R - 1);
    if (ins->op0 >= TERN_CMP_COUNT)
        return rules_fail(err, TERN_ERR_INVALID, cx, ins, -1, "comparison %u unknown", ins->op0);
    if (ins->imm_i0 < 0 || (size_t)ins->imm_i0 > count)
        return rules_fail(err, TERN_ERR_RANGE, cx, ins, -1, "branch target %d outside 0..%zu", ins->imm_i0, count);
    return TERN_OK;
}

/* The per-opcode rules, generated from the instruction table (one check_op_<ID> per row, rules.h). */
static const rules_fn rules_of[TERN_OP_COUNT] = {
#define OP(id, name, family, flags, engines, operands, cost, sem) [TERN_OP_##id] = check_op_##id,
#include "tern/isa_table.def"
#undef OP
};

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
    return rules_of[ins->opcode](core, cx, ins, count, err);
}

tern_status tern_instr_check(const tern_core_config *cfg, size_t pc, size_t count, const tern_instr *ins,
                             tern_error *err)
{
    /* Static rules need only the geometry: a core with no memories attached. */
    tern_core shell;
    memset(&shell, 0, sizeof shell);
    shell.cfg = *cfg;
    exec_ctx cx = {(tern_engine)(ins->engine < TERN_ENGINE_COUNT ? ins->engine : 0), pc, 0, NULL, NULL};
    return rules_check_instr(&shell, &cx, ins, count, err);
}
