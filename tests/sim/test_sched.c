/* The sequencers: in-order streams ordered across engines only by semaphores (wait/signal fields, sem_wait,
 * sem_signal, barrier), registers and branches (loops), deadlock detection, the instruction guard, and the
 * generic rules (engine per opcode, semaphore/register/branch ranges, engine field). */
#include "check.h"
#include "sim_test_util.h"

static void append(tern_program *p, const tern_instr *ins)
{
    tern_error err;
    if (tern_program_append(p, ins, &err)) {
        fprintf(stderr, "append: %s\n", err.msg);
        exit(2);
    }
}

static tern_instr memset_sbuf(tern_engine e, unsigned offset, float v)
{
    tern_instr ins = st_instr(TERN_OP_MEMSET, e);
    ins.ap[TERN_AP_DST] = st_ap1(TERN_MEM_SBUF, TERN_DTYPE_FP32, 0, 1, offset, 1);
    ins.imm0.f = v;
    return ins;
}

static tern_status run(tern_core *core, tern_program *p, tern_run_stats *stats, tern_error *err)
{
    tern_status st = tern_core_run(core, p, stats, err);
    tern_program_free(p);
    return st;
}

int main(void)
{
    tern_error err;
    tern_core *core = st_core("neuroncore-v2");

    TEST_BEGIN("semaphore orders a consumer after its producer on another engine");
    {
        /* Stream order puts the consumer (ScalarE copy) first in scheduling; it must wait for VectorE. */
        tern_program p;
        tern_program_init(&p);
        tern_instr cons = st_instr(TERN_OP_ACTIVATION, TERN_ENGINE_SCALAR);
        cons.func = TERN_ACT_COPY;
        cons.imm0.f = 2.0f;
        cons.ap[TERN_AP_DST] = st_ap1(TERN_MEM_SBUF, TERN_DTYPE_FP32, 0, 1, 64, 1);
        cons.ap[TERN_AP_IN0] = st_ap1(TERN_MEM_SBUF, TERN_DTYPE_FP32, 0, 1, 0, 1);
        cons.wait_sem = 3;
        cons.wait_value = 1;
        tern_instr prod = memset_sbuf(TERN_ENGINE_VECTOR, 0, 21.0f);
        prod.signal_sem = 3;
        append(&p, &cons);
        append(&p, &prod);
        tern_run_stats stats;
        CHECK_EQ_INT(run(core, &p, &stats, &err), TERN_OK);
        float got;
        st_read(core, TERN_MEM_SBUF, 0, 1, 64, TERN_DTYPE_FP32, &got, 1);
        CHECK_NEAR(got, 42.0f, 0);
        CHECK_EQ_INT(tern_core_semaphore(core, 3), 1);
        CHECK_EQ_INT(stats.instructions[TERN_ENGINE_SCALAR], 1);
        CHECK_EQ_INT(stats.instructions[TERN_ENGINE_VECTOR], 1);
    }

    TEST_BEGIN("deadlock names every blocked engine and its semaphore");
    {
        tern_program p;
        tern_program_init(&p);
        tern_instr a = memset_sbuf(TERN_ENGINE_VECTOR, 0, 1.0f);
        a.wait_sem = 5;
        a.wait_value = 100;
        tern_instr b = memset_sbuf(TERN_ENGINE_GPSIMD, 4, 1.0f);
        b.wait_sem = 6;
        b.wait_value = 7;
        append(&p, &a);
        append(&p, &b);
        CHECK(run(core, &p, NULL, &err) != TERN_OK);
        CHECK_STR_CONTAINS(err.msg, "deadlock");
        CHECK_STR_CONTAINS(err.msg, "vector #0 (memset) waits for semaphore 5 >= 100");
        CHECK_STR_CONTAINS(err.msg, "gpsimd #0 (memset) waits for semaphore 6 >= 7");
    }

    TEST_BEGIN("sem_wait and sem_signal with an increment");
    {
        tern_core *c2 = st_core("neuroncore-v2");
        tern_program p;
        tern_program_init(&p);
        tern_instr w = st_instr(TERN_OP_SEM_WAIT, TERN_ENGINE_VECTOR);
        w.wait_sem = 9;
        w.wait_value = 5;
        tern_instr after = memset_sbuf(TERN_ENGINE_VECTOR, 8, 3.0f);
        tern_instr s = st_instr(TERN_OP_SEM_SIGNAL, TERN_ENGINE_SYNC);
        s.signal_sem = 9;
        s.imm_i0 = 5;
        append(&p, &w);
        append(&p, &after);
        append(&p, &s);
        CHECK_EQ_INT(run(c2, &p, NULL, &err), TERN_OK);
        CHECK_EQ_INT(tern_core_semaphore(c2, 9), 5);
        tern_core_free(c2);
    }

    TEST_BEGIN("barrier releases all five engines together");
    {
        tern_core *c2 = st_core("neuroncore-v2");
        tern_program p;
        tern_program_init(&p);
        for (unsigned e = 0; e < TERN_ENGINE_COUNT; e++) {
            tern_instr b = st_instr(TERN_OP_BARRIER, (tern_engine)e);
            b.signal_sem = 1;
            b.imm_i0 = 1;
            append(&p, &b);
        }
        CHECK_EQ_INT(run(c2, &p, NULL, &err), TERN_OK);
        CHECK_EQ_INT(tern_core_semaphore(c2, 1), 5);
        TEST_BEGIN("barrier missing an engine deadlocks");
        tern_program_init(&p);
        for (unsigned e = 0; e < TERN_ENGINE_COUNT - 1; e++) {
            tern_instr b = st_instr(TERN_OP_BARRIER, (tern_engine)e);
            b.signal_sem = 2;
            b.imm_i0 = 1;
            append(&p, &b);
        }
        CHECK(run(c2, &p, NULL, &err) != TERN_OK);
        CHECK_STR_CONTAINS(err.msg, "deadlock");
        tern_core_free(c2);
    }

    TEST_BEGIN("register loop: ten iterations with a register-offset operand");
    {
        tern_core *c2 = st_core("neuroncore-v2");
        tern_program p;
        tern_program_init(&p);
        tern_instr set = st_instr(TERN_OP_REG_SET, TERN_ENGINE_GPSIMD);
        set.rd = 1;
        set.imm_i0 = 0;
        tern_instr body = st_instr(TERN_OP_MEMSET, TERN_ENGINE_GPSIMD);
        body.ap[TERN_AP_DST] = st_ap1(TERN_MEM_SBUF, TERN_DTYPE_FP32, 0, 1, 1024, 1);
        body.ap[TERN_AP_DST].offset_reg = 1;
        body.imm0.f = 5.0f;
        tern_instr inc = st_instr(TERN_OP_REG_ALU, TERN_ENGINE_GPSIMD);
        inc.rd = 1;
        inc.ra = 1;
        inc.op0 = TERN_ALU_ADD;
        inc.imm_i0 = 1;
        inc.flags = TERN_FLAG_IMM_B;
        tern_instr br = st_instr(TERN_OP_BRANCH, TERN_ENGINE_GPSIMD);
        br.ra = 1;
        br.op0 = TERN_CMP_LT;
        br.imm_i1 = 10;
        br.flags = TERN_FLAG_IMM_B;
        br.imm_i0 = 1;
        tern_instr halt = st_instr(TERN_OP_HALT, TERN_ENGINE_GPSIMD);
        tern_instr never = memset_sbuf(TERN_ENGINE_GPSIMD, 0, 99.0f);
        append(&p, &set);
        append(&p, &body);
        append(&p, &inc);
        append(&p, &br);
        append(&p, &halt);
        append(&p, &never);
        tern_run_stats stats;
        float zero[12] = {0};
        st_write(c2, TERN_MEM_SBUF, 0, 1, 1024, TERN_DTYPE_FP32, zero, 12);
        st_write(c2, TERN_MEM_SBUF, 0, 1, 0, TERN_DTYPE_FP32, zero, 1);
        CHECK_EQ_INT(run(c2, &p, &stats, &err), TERN_OK);
        float got[12];
        st_read(c2, TERN_MEM_SBUF, 0, 1, 1024, TERN_DTYPE_FP32, got, 12);
        for (int i = 0; i < 10; i++)
            CHECK_NEAR(got[i], 5.0f, 0);
        CHECK_NEAR(got[10], 0.0f, 0);
        CHECK_EQ_INT(tern_core_register(c2, TERN_ENGINE_GPSIMD, 1), 10);
        CHECK_EQ_INT(stats.instructions[TERN_ENGINE_GPSIMD], 1 + 10 * 3 + 1);
        float after;
        st_read(c2, TERN_MEM_SBUF, 0, 1, 0, TERN_DTYPE_FP32, &after, 1);
        CHECK_NEAR(after, 0.0f, 0); /* the instruction after halt never runs */
        tern_core_free(c2);
    }

    TEST_BEGIN("endless loop stops at the instruction guard");
    {
        tern_core_config cfg;
        tern_core_config_load("neuroncore-v2", &cfg, &err);
        tern_core_options o = {0};
        o.max_instructions = 1000;
        tern_core *c2 = NULL;
        tern_core_create(&cfg, &o, &c2, &err);
        tern_program p;
        tern_program_init(&p);
        tern_instr br = st_instr(TERN_OP_BRANCH, TERN_ENGINE_SYNC);
        br.op0 = TERN_CMP_ALWAYS;
        br.imm_i0 = 0;
        br.flags = TERN_FLAG_IMM_B;
        append(&p, &br);
        CHECK(run(c2, &p, NULL, &err) != TERN_OK);
        CHECK_STR_CONTAINS(err.msg, "more than 1000 instructions executed");
        tern_core_free(c2);
    }

    /* Generic rules. */
    struct {
        const char *label;
        tern_instr ins;
        const char *needle;
    } rejects[8];
    int n = 0;
    rejects[n].label = "wait semaphore out of range";
    rejects[n].ins = memset_sbuf(TERN_ENGINE_VECTOR, 0, 0);
    rejects[n].ins.wait_sem = 64;
    rejects[n++].needle = "wait semaphore 64 outside 0..63";
    rejects[n].label = "signal semaphore out of range";
    rejects[n].ins = memset_sbuf(TERN_ENGINE_VECTOR, 0, 0);
    rejects[n].ins.signal_sem = 200;
    rejects[n++].needle = "signal semaphore 200 outside 0..63";
    rejects[n].label = "register out of range";
    rejects[n].ins = st_instr(TERN_OP_REG_SET, TERN_ENGINE_SYNC);
    rejects[n].ins.rd = 64;
    rejects[n++].needle = "register r64 outside r0..r63";
    rejects[n].label = "branch target past the stream";
    rejects[n].ins = st_instr(TERN_OP_BRANCH, TERN_ENGINE_SYNC);
    rejects[n].ins.imm_i0 = 7;
    rejects[n].ins.flags = TERN_FLAG_IMM_B;
    rejects[n++].needle = "branch target 7 outside 0..1";
    rejects[n].label = "memset on TensorE";
    rejects[n].ins = memset_sbuf(TERN_ENGINE_TENSOR, 0, 0);
    rejects[n++].needle = "cannot issue on the tensor engine (allowed: vector, gpsimd)";
    rejects[n].label = "unknown opcode";
    rejects[n].ins = st_instr(TERN_OP_NOP, TERN_ENGINE_SYNC);
    rejects[n].ins.opcode = 999;
    rejects[n++].needle = "unknown opcode 999";
    rejects[n].label = "sem_signal without a semaphore";
    rejects[n].ins = st_instr(TERN_OP_SEM_SIGNAL, TERN_ENGINE_SYNC);
    rejects[n++].needle = "needs a semaphore";
    rejects[n].label = "register ALU with a float-only operator";
    rejects[n].ins = st_instr(TERN_OP_REG_ALU, TERN_ENGINE_SYNC);
    rejects[n].ins.op0 = TERN_ALU_POW;
    rejects[n].ins.flags = TERN_FLAG_IMM_B;
    rejects[n++].needle = "not an integer register operation";
    for (int i = 0; i < n; i++) {
        TEST_BEGIN(rejects[i].label);
        tern_status st = st_run(core, &rejects[i].ins, &err);
        CHECK(st != TERN_OK);
        if (st)
            CHECK_STR_CONTAINS(err.msg, rejects[i].needle);
    }

    TEST_BEGIN("engine field must match its stream");
    {
        tern_program p;
        tern_program_init(&p);
        tern_instr ins = memset_sbuf(TERN_ENGINE_VECTOR, 0, 0);
        append(&p, &ins);
        p.streams[TERN_ENGINE_VECTOR].instrs[0].engine = TERN_ENGINE_GPSIMD;
        CHECK(run(core, &p, NULL, &err) != TERN_OK);
        CHECK_STR_CONTAINS(err.msg, "does not match its stream");
    }
    tern_core_free(core);
    return check_report();
}
