/* Running a program on a core: static validation of every instruction against the core's rules, then the
 * functional scheduler — five in-order sequencers that advance only when their instruction's semaphore wait
 * is satisfied — with the control instructions (semaphores, barriers, registers, branches) executed here and
 * data instructions dispatched to the engine executors. The scheduler's order never changes results: engines
 * communicate only through memory guarded by semaphores, and rounding streams depend on per-engine counts. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/core_internal.h"
#include "sim/rules.h"

static int32_t *reg_ptr(tern_core *c, tern_engine e, unsigned r)
{
    return &c->registers[(size_t)e * c->cfg.num_registers + r];
}

static int cmp_holds(tern_cmp_op op, int32_t a, int32_t b)
{
    switch (op) {
    case TERN_CMP_ALWAYS: return 1;
    case TERN_CMP_EQ: return a == b;
    case TERN_CMP_NE: return a != b;
    case TERN_CMP_LT: return a < b;
    case TERN_CMP_LE: return a <= b;
    case TERN_CMP_GT: return a > b;
    case TERN_CMP_GE: return a >= b;
    case TERN_CMP_COUNT: break;
    }
    return 0;
}

static exec_fn executor_of(tern_opcode op)
{
    switch (op) {
    case TERN_OP_LOAD_STATIONARY:
    case TERN_OP_MULTIPLY_MOVING:
    case TERN_OP_TRANSPOSE_PE: return exec_tensor;
    case TERN_OP_ACTIVATION: return exec_scalar;
    case TERN_OP_IOTA:
    case TERN_OP_AFFINE_SELECT:
    case TERN_OP_PARTITION_REDUCE: return exec_gpsimd;
    case TERN_OP_DMA_COPY:
    case TERN_OP_DMA_GATHER: return exec_dma;
    case TERN_OP_TENSOR_TENSOR:
    case TERN_OP_TENSOR_SCALAR:
    case TERN_OP_SCALAR_TENSOR_TENSOR:
    case TERN_OP_TENSOR_REDUCE:
    case TERN_OP_TENSOR_COPY:
    case TERN_OP_TENSOR_COPY_PREDICATED:
    case TERN_OP_MEMSET:
    case TERN_OP_SELECT:
    case TERN_OP_BN_STATS:
    case TERN_OP_BN_AGGR:
    case TERN_OP_RECIPROCAL:
    case TERN_OP_TRANSPOSE_VE:
    case TERN_OP_MAX8:
    case TERN_OP_TENSOR_TENSOR_SCAN: return exec_vector;
    default: return NULL;
    }
}

tern_status tern_core_validate(const tern_core *core, const tern_program *prog, tern_error *err)
{
    for (unsigned e = 0; e < TERN_ENGINE_COUNT; e++) {
        const tern_stream *s = &prog->streams[e];
        for (size_t pc = 0; pc < s->count; pc++) {
            exec_ctx cx = {(tern_engine)e, pc, 0, NULL};
            tern_status st = rules_check_instr(core, &cx, &s->instrs[pc], s->count, err);
            if (st)
                return st;
        }
    }
    return TERN_OK;
}

typedef struct {
    size_t pc;
    uint64_t seq;
    int done;
    int in_barrier; /* barrier: already signalled, now waiting */
} seq_state;

static void describe_block(const tern_core *c, const tern_program *prog, const seq_state *st, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (unsigned e = 0; e < TERN_ENGINE_COUNT; e++) {
        if (st[e].done)
            continue;
        const tern_instr *ins = &prog->streams[e].instrs[st[e].pc];
        unsigned sem = ins->wait_sem;
        uint32_t want = ins->wait_value;
        if (ins->opcode == TERN_OP_BARRIER && st[e].in_barrier) {
            sem = ins->signal_sem;
            want = (uint32_t)ins->imm_i0 * TERN_ENGINE_COUNT;
        }
        int n = snprintf(buf + used, len - used, "%s%s #%zu (%s) waits for semaphore %u >= %u (now %u)",
                         used ? "; " : "", tern_engine_name((tern_engine)e), st[e].pc,
                         tern_opcode_get((tern_opcode)ins->opcode)->name, sem, want, tern_core_semaphore(c, sem));
        if (n < 0 || (size_t)n >= len - used)
            break;
        used += (size_t)n;
    }
}

/* Execute one control instruction; returns 1 if it completed, 0 if it blocks. */
static int exec_control(tern_core *c, tern_engine e, seq_state *st, const tern_instr *ins, size_t *next_pc)
{
    *next_pc = st->pc + 1;
    switch ((tern_opcode)ins->opcode) {
    case TERN_OP_NOP:
    case TERN_OP_HALT: return 1;
    case TERN_OP_SEM_WAIT: return 1; /* the wait itself is the generic wait_sem/wait_value */
    case TERN_OP_SEM_SIGNAL: c->semaphores[ins->signal_sem] += (uint32_t)ins->imm_i0; return 1;
    case TERN_OP_BARRIER:
        if (!st->in_barrier) {
            c->semaphores[ins->signal_sem] += 1;
            st->in_barrier = 1;
        }
        if (c->semaphores[ins->signal_sem] < (uint32_t)ins->imm_i0 * TERN_ENGINE_COUNT)
            return 0;
        st->in_barrier = 0;
        return 1;
    case TERN_OP_REG_SET: *reg_ptr(c, e, ins->rd) = ins->imm_i0; return 1;
    case TERN_OP_REG_ALU: {
        int32_t b = (ins->flags & TERN_FLAG_IMM_B) ? ins->imm_i0 : *reg_ptr(c, e, ins->rb);
        *reg_ptr(c, e, ins->rd) = alu_apply_i32((tern_alu_op)ins->op0, *reg_ptr(c, e, ins->ra), b);
        return 1;
    }
    case TERN_OP_BRANCH: {
        int32_t b = (ins->flags & TERN_FLAG_IMM_B) ? ins->imm_i1 : *reg_ptr(c, e, ins->rb);
        if (cmp_holds((tern_cmp_op)ins->op0, *reg_ptr(c, e, ins->ra), b))
            *next_pc = (size_t)ins->imm_i0;
        return 1;
    }
    default: return 1;
    }
}

tern_status tern_core_run(tern_core *core, const tern_program *prog, tern_run_stats *stats, tern_error *err)
{
    tern_run_stats local;
    if (!stats)
        stats = &local;
    memset(stats, 0, sizeof *stats);
    tern_status st = tern_core_validate(core, prog, err);
    if (st)
        return st;
    /* Debug/test aid: every program run must survive the binary and text round trips (docs/isa.md). */
    const char *rt = getenv("TERN_CHECK_ROUNDTRIP");
    if (rt && rt[0] == '1' && (st = tern_program_roundtrip_check(prog, err)))
        return st;
    seq_state ss[TERN_ENGINE_COUNT];
    memset(ss, 0, sizeof ss);
    uint64_t total = 0;
    for (;;) {
        int progress = 0, all_done = 1;
        for (unsigned e = 0; e < TERN_ENGINE_COUNT; e++) {
            const tern_stream *s = &prog->streams[e];
            seq_state *q = &ss[e];
            while (!q->done) {
                if (q->pc >= s->count) {
                    q->done = 1;
                    break;
                }
                const tern_instr *ins = &s->instrs[q->pc];
                if (ins->wait_sem != TERN_SEM_NONE && core->semaphores[ins->wait_sem] < ins->wait_value)
                    break;
                exec_ctx cx = {(tern_engine)e, q->pc, q->seq, stats};
                size_t next = q->pc + 1;
                exec_fn fn = executor_of((tern_opcode)ins->opcode);
                if (fn) {
                    st = fn(core, &cx, ins, err);
                    if (st)
                        return st;
                } else if (!exec_control(core, (tern_engine)e, q, ins, &next)) {
                    break;
                }
                /* sem_signal and barrier use signal_sem as their operand, not as the completion signal */
                if (ins->signal_sem != TERN_SEM_NONE && ins->opcode != TERN_OP_SEM_SIGNAL &&
                    ins->opcode != TERN_OP_BARRIER)
                    core->semaphores[ins->signal_sem] += 1;
                stats->instructions[e]++;
                q->seq++;
                progress = 1;
                if (++total > core->opts.max_instructions)
                    return tern_error_set(err, TERN_ERR_RANGE,
                                          "run: more than %llu instructions executed (endless loop?); last: %s #%zu",
                                          (unsigned long long)core->opts.max_instructions,
                                          tern_engine_name((tern_engine)e), q->pc);
                if (ins->opcode == TERN_OP_HALT) {
                    q->done = 1;
                    break;
                }
                q->pc = next;
            }
            all_done &= q->done;
        }
        if (all_done)
            return TERN_OK;
        if (!progress) {
            char why[700];
            describe_block(core, prog, ss, why, sizeof why);
            return tern_error_set(err, TERN_ERR_INVALID, "run: deadlock: %s", why);
        }
    }
}
