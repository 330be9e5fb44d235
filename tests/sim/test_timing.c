/* The timing model, rule by rule, with exact expected times: every documented cost rule (calibration.md C2) in
 * its engine's clock, latencies, TensorE's background LoadStationary, semaphore dependencies, v2's shared ports
 * (and their absence on v3), v3's VectorE performance modes, and the DMA model (descriptors, bandwidth, fixed
 * cost, engines, queue order). Times are computed here from the machine figures, independently of timing.c. */
#include <math.h>

#include "check.h"
#include "sim_test_util.h"

static tern_core *tcore(const char *machine)
{
    tern_core_config cfg;
    tern_error err;
    tern_core *c = NULL;
    tern_core_options o = {0};
    o.mode = TERN_MODE_TIMING_ONLY;
    if (tern_core_config_load(machine, &cfg, &err) || tern_core_create(&cfg, &o, &c, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        exit(2);
    }
    return c;
}

static int64_t ps(double cycles, double ghz) { return (int64_t)llround(cycles * 1000.0 / ghz); }

static tern_run_stats run_prog(tern_core *c, tern_program *p)
{
    tern_run_stats st;
    tern_error err;
    memset(&st, 0, sizeof st);
    tern_core_reset_control(c); /* each program starts from zeroed semaphores */
    tern_status s = tern_core_run(c, p, &st, &err);
    if (s)
        fprintf(stderr, "run failed: %s\n", err.msg);
    tern_program_free(p);
    return st;
}

static void add(tern_program *p, tern_instr ins)
{
    tern_error err;
    if (tern_program_append(p, &ins, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        exit(2);
    }
}

static tern_instr ls(tern_dtype dt, unsigned K, unsigned M)
{
    tern_instr i = st_instr(TERN_OP_LOAD_STATIONARY, TERN_ENGINE_TENSOR);
    i.ap[TERN_AP_IN0] = st_ap1(TERN_MEM_SBUF, dt, 0, K, 0, M);
    return i;
}

static tern_instr mm(tern_dtype dt, unsigned K, unsigned M, unsigned N)
{
    tern_instr i = st_instr(TERN_OP_MULTIPLY_MOVING, TERN_ENGINE_TENSOR);
    i.ap[TERN_AP_IN0] = st_ap1(TERN_MEM_SBUF, dt, 0, K, 65536, N);
    i.ap[TERN_AP_DST] = st_ap1(TERN_MEM_PSUM, TERN_DTYPE_FP32, 0, M, 0, N);
    return i;
}

/* One instruction alone: its occupancy on the engine. */
static int64_t busy_of(tern_core *c, tern_instr ins)
{
    tern_program p;
    tern_program_init(&p);
    add(&p, ins);
    return run_prog(c, &p).busy_ps[ins.engine];
}

static tern_ap unused_ap(void)
{
    tern_ap ap;
    memset(&ap, 0, sizeof ap);
    ap.offset_reg = TERN_REG_NONE;
    return ap;
}

static tern_instr vec(tern_opcode op, tern_engine e, tern_mem m0, tern_dtype d0, tern_mem m1, tern_dtype d1, unsigned N)
{
    tern_instr i = st_instr(op, e);
    i.ap[TERN_AP_DST] = st_ap1(TERN_MEM_SBUF, d0, 0, 128, 0, N);
    i.ap[TERN_AP_IN0] = st_ap1(m0, d0, 0, 128, 32768, N);
    i.ap[TERN_AP_IN1] = st_ap1(m1, d1, 0, 128, m1 == TERN_MEM_PSUM ? 4096 : 98304, N);
    i.op0 = TERN_ALU_ADD;
    return i;
}

int main(void)
{
    tern_core *v2 = tcore("neuroncore-v2");
    const double T2 = 2.8, V2 = 1.12, S2 = 1.4, G2 = 1.4;

    TEST_BEGIN("matmul: max(min(64, N_stat), N_moving) TensorE cycles");
    {
        tern_program p;
        tern_program_init(&p);
        add(&p, ls(TERN_DTYPE_BF16, 128, 128));
        add(&p, mm(TERN_DTYPE_BF16, 128, 128, 512));
        tern_run_stats st = run_prog(v2, &p);
        /* LS of 128 columns: 128/4 = 32 cycles; MM: 512 cycles after it */
        CHECK_EQ_INT(st.busy_ps[TERN_ENGINE_TENSOR], ps(32, T2) + ps(512, T2));
        CHECK_EQ_INT(st.time_ps, ps(32, T2) + ps(512, T2));
        CHECK_EQ_INT(st.macs, 128ull * 128 * 512);
    }
    {
        tern_program p;
        tern_program_init(&p);
        add(&p, ls(TERN_DTYPE_BF16, 128, 128));
        add(&p, mm(TERN_DTYPE_BF16, 128, 128, 16));
        CHECK_EQ_INT(run_prog(v2, &p).busy_ps[0], ps(32, T2) + ps(64, T2)); /* small N: the 64-cycle floor */
        tern_program_init(&p);
        add(&p, ls(TERN_DTYPE_BF16, 128, 16));
        add(&p, mm(TERN_DTYPE_BF16, 128, 16, 8));
        CHECK_EQ_INT(run_prog(v2, &p).busy_ps[0], ps(4, T2) + ps(16, T2)); /* min(64, 16) = 16 */
    }
    TEST_BEGIN("fp32 matmul and LoadStationary take 4x");
    {
        tern_program p;
        tern_program_init(&p);
        add(&p, ls(TERN_DTYPE_FP32, 128, 128));
        add(&p, mm(TERN_DTYPE_FP32, 128, 128, 256));
        CHECK_EQ_INT(run_prog(v2, &p).busy_ps[0], ps(128, T2) + ps(1024, T2));
    }
    TEST_BEGIN("v3 double-row fp8: twice the MACs in the time of one 16-bit matmul");
    {
        tern_core *v3 = tcore("neuroncore-v3");
        int32_t st_s[2] = {128, 1}, st_x[2] = {512, 1};
        uint32_t n_s[2] = {2, 128}, n_x[2] = {2, 512};
        tern_instr l = st_instr(TERN_OP_LOAD_STATIONARY, TERN_ENGINE_TENSOR);
        l.ap[TERN_AP_IN0] = st_ap(TERN_MEM_SBUF, TERN_DTYPE_FP8_E4M3, 0, 128, 0, 2, st_s, n_s);
        l.flags = TERN_FLAG_DOUBLE_ROW;
        tern_instr m = st_instr(TERN_OP_MULTIPLY_MOVING, TERN_ENGINE_TENSOR);
        m.ap[TERN_AP_IN0] = st_ap(TERN_MEM_SBUF, TERN_DTYPE_FP8_E4M3, 0, 128, 65536, 2, st_x, n_x);
        m.ap[TERN_AP_DST] = st_ap1(TERN_MEM_PSUM, TERN_DTYPE_FP32, 0, 128, 0, 512);
        m.flags = TERN_FLAG_DOUBLE_ROW;
        tern_program p;
        tern_program_init(&p);
        add(&p, l);
        add(&p, m);
        tern_run_stats st = run_prog(v3, &p);
        CHECK_EQ_INT(st.busy_ps[0], ps(32, 2.4) + ps(512, 2.4));
        CHECK_EQ_INT(st.macs, 2ull * 128 * 128 * 512);
        tern_core_free(v3);
    }
    TEST_BEGIN("background LoadStationary overlaps the running matmul");
    {
        tern_program p;
        tern_program_init(&p);
        for (int k = 0; k < 4; k++) {
            add(&p, ls(TERN_DTYPE_BF16, 128, 128));
            add(&p, mm(TERN_DTYPE_BF16, 128, 128, 512));
        }
        tern_run_stats st = run_prog(v2, &p);
        /* only the first LS is exposed: 32 + 4 x 512 cycles */
        CHECK_EQ_INT(st.time_ps, ps(32, T2) + 4 * ps(512, T2));
    }

    TEST_BEGIN("VectorE tensor_tensor: 2N from SBUF, N with one PSUM input, N for all-bf16 add");
    CHECK_EQ_INT(busy_of(v2, vec(TERN_OP_TENSOR_TENSOR, TERN_ENGINE_VECTOR, TERN_MEM_SBUF, TERN_DTYPE_FP32, TERN_MEM_SBUF,
                                 TERN_DTYPE_FP32, 1000)),
                 ps(2000, V2));
    CHECK_EQ_INT(busy_of(v2, vec(TERN_OP_TENSOR_TENSOR, TERN_ENGINE_VECTOR, TERN_MEM_SBUF, TERN_DTYPE_FP32, TERN_MEM_PSUM,
                                 TERN_DTYPE_FP32, 1000)),
                 ps(1000, V2));
    CHECK_EQ_INT(busy_of(v2, vec(TERN_OP_TENSOR_TENSOR, TERN_ENGINE_VECTOR, TERN_MEM_SBUF, TERN_DTYPE_BF16, TERN_MEM_SBUF,
                                 TERN_DTYPE_BF16, 1000)),
                 ps(1000, V2));
    TEST_BEGIN("MIN_II floor");
    {
        tern_instr i = vec(TERN_OP_TENSOR_SCALAR, TERN_ENGINE_VECTOR, TERN_MEM_SBUF, TERN_DTYPE_FP32, TERN_MEM_SBUF,
                           TERN_DTYPE_FP32, 10);
        i.ap[TERN_AP_IN1] = unused_ap();
        CHECK_EQ_INT(busy_of(v2, i), ps(64, V2));
        i.ap[TERN_AP_DST].dims[0].num = i.ap[TERN_AP_IN0].dims[0].num = 700;
        CHECK_EQ_INT(busy_of(v2, i), ps(700, V2));
    }
    TEST_BEGIN("memset: N/2 for a bf16 zero fill, N otherwise");
    {
        tern_instr i = st_instr(TERN_OP_MEMSET, TERN_ENGINE_VECTOR);
        i.ap[TERN_AP_DST] = st_ap1(TERN_MEM_SBUF, TERN_DTYPE_BF16, 0, 128, 0, 1000);
        CHECK_EQ_INT(busy_of(v2, i), ps(500, V2));
        i.imm0.f = 1.0f;
        CHECK_EQ_INT(busy_of(v2, i), ps(1000, V2));
    }
    TEST_BEGIN("tensor_reduce: N/2 for bf16 add, N otherwise");
    {
        tern_instr i = st_instr(TERN_OP_TENSOR_REDUCE, TERN_ENGINE_VECTOR);
        i.ap[TERN_AP_DST] = st_ap1(TERN_MEM_SBUF, TERN_DTYPE_BF16, 0, 128, 0, 1);
        i.ap[TERN_AP_IN0] = st_ap1(TERN_MEM_SBUF, TERN_DTYPE_BF16, 0, 128, 4096, 800);
        i.op0 = TERN_ALU_ADD;
        i.imm_i0 = 1;
        CHECK_EQ_INT(busy_of(v2, i), ps(400, V2));
        i.op0 = TERN_ALU_MULT;
        CHECK_EQ_INT(busy_of(v2, i), ps(800, V2));
    }
    TEST_BEGIN("reciprocal 8N, bn_aggr 13(N/3), scan 2N, max8 N");
    {
        tern_instr i = st_instr(TERN_OP_RECIPROCAL, TERN_ENGINE_VECTOR);
        i.ap[TERN_AP_DST] = st_ap1(TERN_MEM_SBUF, TERN_DTYPE_FP32, 0, 128, 0, 100);
        i.ap[TERN_AP_IN0] = st_ap1(TERN_MEM_SBUF, TERN_DTYPE_FP32, 0, 128, 4096, 100);
        CHECK_EQ_INT(busy_of(v2, i), ps(800, V2));
        tern_instr b = st_instr(TERN_OP_BN_AGGR, TERN_ENGINE_VECTOR);
        b.ap[TERN_AP_DST] = st_ap1(TERN_MEM_SBUF, TERN_DTYPE_FP32, 0, 128, 0, 2);
        b.ap[TERN_AP_IN0] = st_ap1(TERN_MEM_SBUF, TERN_DTYPE_FP32, 0, 128, 4096, 60);
        CHECK_EQ_INT(busy_of(v2, b), ps(13 * 20, V2));
        tern_instr m = st_instr(TERN_OP_MAX8, TERN_ENGINE_VECTOR);
        m.ap[TERN_AP_DST] = st_ap1(TERN_MEM_SBUF, TERN_DTYPE_FP32, 0, 128, 0, 8);
        m.ap[TERN_AP_IN0] = st_ap1(TERN_MEM_SBUF, TERN_DTYPE_FP32, 0, 128, 4096, 300);
        CHECK_EQ_INT(busy_of(v2, m), ps(300, V2));
        tern_instr s = vec(TERN_OP_TENSOR_TENSOR_SCAN, TERN_ENGINE_VECTOR, TERN_MEM_SBUF, TERN_DTYPE_FP32, TERN_MEM_SBUF,
                           TERN_DTYPE_FP32, 100);
        s.op0 = TERN_ALU_MULT;
        s.op1 = TERN_ALU_ADD;
        CHECK_EQ_INT(busy_of(v2, s), ps(200, V2));
    }
    TEST_BEGIN("ScalarE activation max(MIN_II, N), + MIN_II with reduce; latency includes the access");
    {
        tern_instr a = st_instr(TERN_OP_ACTIVATION, TERN_ENGINE_SCALAR);
        a.func = TERN_ACT_EXP;
        a.imm0.f = 1.0f;
        a.ap[TERN_AP_DST] = st_ap1(TERN_MEM_SBUF, TERN_DTYPE_FP32, 0, 128, 0, 1000);
        a.ap[TERN_AP_IN0] = st_ap1(TERN_MEM_SBUF, TERN_DTYPE_FP32, 0, 128, 8192, 1000);
        tern_program p;
        tern_program_init(&p);
        add(&p, a);
        tern_run_stats st = run_prog(v2, &p);
        CHECK_EQ_INT(st.busy_ps[TERN_ENGINE_SCALAR], ps(1000, S2));
        CHECK_EQ_INT(st.time_ps, ps(1000, S2) + ps(60, S2));
        a.flags |= TERN_FLAG_REDUCE;
        a.ap[TERN_AP_EXTRA] = st_ap1(TERN_MEM_SBUF, TERN_DTYPE_FP32, 0, 128, 16384, 1);
        CHECK_EQ_INT(busy_of(v2, a), ps(1064, S2));
    }
    TEST_BEGIN("GpSimd iota: 150 + N");
    {
        tern_instr i = st_instr(TERN_OP_IOTA, TERN_ENGINE_GPSIMD);
        i.ap[TERN_AP_DST] = st_ap1(TERN_MEM_SBUF, TERN_DTYPE_INT32, 0, 128, 0, 256);
        CHECK_EQ_INT(busy_of(v2, i), ps(150 + 256, G2));
    }

    TEST_BEGIN("a dependent instruction starts when its producer's result is visible");
    {
        tern_program p;
        tern_program_init(&p);
        tern_instr l = ls(TERN_DTYPE_BF16, 128, 128);
        tern_instr m = mm(TERN_DTYPE_BF16, 128, 128, 512);
        m.signal_sem = 0;
        tern_instr v = vec(TERN_OP_TENSOR_COPY, TERN_ENGINE_VECTOR, TERN_MEM_PSUM, TERN_DTYPE_FP32, TERN_MEM_SBUF,
                           TERN_DTYPE_FP32, 512);
        v.ap[TERN_AP_IN0] = st_ap1(TERN_MEM_PSUM, TERN_DTYPE_FP32, 0, 128, 0, 512);
        v.ap[TERN_AP_IN1] = unused_ap();
        v.wait_sem = 0;
        v.wait_value = 1;
        add(&p, l);
        add(&p, m);
        add(&p, v);
        tern_run_stats st = run_prog(v2, &p);
        int64_t mm_done = ps(32, T2) + ps(512, T2);
        int64_t wake = (int64_t)llround(tern_core_get_config(v2)->timing.semaphore_wake_s * 1e12);
        CHECK_EQ_INT(wake, 100000); /* neuroncore-v2.json: core.costs.semaphore_wake = 100 ns */
        /* + the semaphore wake latency + VectorE's static overhead */
        CHECK_EQ_INT(st.time_ps, mm_done + wake + ps(512, V2) + ps(100, V2));

        TEST_BEGIN("a wait the semaphore's starting value already satisfies costs no wake latency");
        tern_program_init(&p);
        tern_instr a = st_instr(TERN_OP_ACTIVATION, TERN_ENGINE_SCALAR);
        a.func = TERN_ACT_EXP;
        a.ap[TERN_AP_DST] = st_ap1(TERN_MEM_SBUF, TERN_DTYPE_FP32, 0, 1, 64, 1);
        a.ap[TERN_AP_IN0] = st_ap1(TERN_MEM_SBUF, TERN_DTYPE_FP32, 0, 1, 0, 1);
        a.wait_sem = 5;
        a.wait_value = 0;
        add(&p, a);
        st = run_prog(v2, &p);
        CHECK_EQ_INT(st.time_ps, ps(64, S2) + ps(60, S2)); /* MIN_II + access initiation, nothing else */

        TEST_BEGIN("dependent one-element activations are 189 ns apart (v2, published)");
        tern_program_init(&p);
        for (int k = 0; k < 4; k++) {
            tern_instr b = a;
            b.ap[TERN_AP_DST] = st_ap1(TERN_MEM_SBUF, TERN_DTYPE_FP32, 0, 1, (uint64_t)(k + 1) * 64, 1);
            b.ap[TERN_AP_IN0] = st_ap1(TERN_MEM_SBUF, TERN_DTYPE_FP32, 0, 1, (uint64_t)k * 64, 1);
            b.signal_sem = 6;
            b.wait_sem = k ? 6 : TERN_SEM_NONE;
            b.wait_value = (uint32_t)k;
            add(&p, b);
        }
        st = run_prog(v2, &p);
        /* each waits for the previous one's result: MIN_II + access initiation, then the wake */
        int64_t step = ps(64, S2) + ps(60, S2) + wake;
        CHECK_EQ_INT(st.time_ps, ps(64, S2) + ps(60, S2) + 3 * step);
        CHECK_MSG(step > 188000 && step < 190000, "spacing %lld ps", (long long)step);
    }

    TEST_BEGIN("v2: VectorE and GpSimdE serialise on SBUF; v3 runs them together");
    {
        tern_instr a = vec(TERN_OP_TENSOR_COPY, TERN_ENGINE_VECTOR, TERN_MEM_SBUF, TERN_DTYPE_FP32, TERN_MEM_SBUF,
                           TERN_DTYPE_FP32, 2000);
        a.ap[TERN_AP_IN1] = unused_ap();
        tern_instr g = a;
        g.engine = TERN_ENGINE_GPSIMD;
        g.ap[TERN_AP_DST].offset = 16000;
        g.ap[TERN_AP_IN0].offset = 24000;
        tern_program p;
        tern_program_init(&p);
        add(&p, a);
        add(&p, g);
        tern_run_stats st = run_prog(v2, &p);
        CHECK_EQ_INT(st.time_ps, ps(2000, V2) + ps(150 + 2000, G2) + ps(60, G2));
        tern_core *v3 = tcore("neuroncore-v3");
        const double V3 = 0.96, G3 = 1.2;
        tern_program_init(&p);
        add(&p, a);
        add(&p, g);
        st = run_prog(v3, &p);
        int64_t vt = ps(2000, V3) + ps(100, V3), gt = ps(150 + 2000, G3) + ps(60, G3);
        CHECK_EQ_INT(st.time_ps, vt > gt ? vt : gt);

        TEST_BEGIN("v3 VectorE performance mode: 4x for bf16 SBUF copies, 2x with PSUM");
        tern_instr c = vec(TERN_OP_TENSOR_COPY, TERN_ENGINE_VECTOR, TERN_MEM_SBUF, TERN_DTYPE_BF16, TERN_MEM_SBUF,
                           TERN_DTYPE_BF16, 2048);
        c.ap[TERN_AP_IN1] = unused_ap();
        CHECK_EQ_INT(busy_of(v3, c), ps(512, V3));
        c.ap[TERN_AP_IN0] = st_ap1(TERN_MEM_PSUM, TERN_DTYPE_BF16, 0, 128, 0, 2048);
        CHECK_EQ_INT(busy_of(v3, c), ps(1024, V3));
        c.ap[TERN_AP_IN0] = st_ap1(TERN_MEM_SBUF, TERN_DTYPE_FP32, 0, 128, 32768, 2048);
        CHECK_EQ_INT(busy_of(v3, c), ps(2048, V3)); /* fp32 source: no perf mode */
        CHECK_EQ_INT(busy_of(v2, c), ps(2048, V2)); /* v2 has none */
        tern_core_free(v3);
    }

    TEST_BEGIN("DMA: fixed cost, then descriptors and bytes over 16 engines");
    {
        tern_core *t1 = tcore("trn1.2xlarge");
        tern_instr d = st_instr(TERN_OP_DMA_COPY, TERN_ENGINE_SYNC);
        d.ap[TERN_AP_DST] = st_ap1(TERN_MEM_SBUF, TERN_DTYPE_BF16, 0, 128, 0, 2048);
        d.ap[TERN_AP_IN0] = st_ap1(TERN_MEM_HBM, TERN_DTYPE_BF16, 0, 128, 4096, 2048);
        d.ap[TERN_AP_IN0].partition_step = 2048;
        d.signal_sem = 5;
        tern_program p;
        tern_program_init(&p);
        add(&p, d);
        tern_run_stats st = run_prog(t1, &p);
        /* per engine: 8 rows of 4 KiB: 8 x 8.5 ns + 32768 B / 17 B/ns; the trigger is 64 SyncE cycles at 1.4 GHz */
        int64_t trig = ps(64, 1.4);
        int64_t eng = (int64_t)llround((8 * 8.5e-9 + 32768.0 / 17e9) * 1e12);
        CHECK_EQ_INT(st.time_ps, trig + 1300000 + eng);
        CHECK_EQ_INT(st.dma_bytes, 128ull * 2048 * 2);
        CHECK_EQ_INT(st.hbm_bytes, 128ull * 2048 * 2);
        CHECK_EQ_INT(st.dma_transfers, 1);

        TEST_BEGIN("DMA: back-to-back transfers stream; the fixed cost is paid once");
        tern_program_init(&p);
        add(&p, d);
        d.ap[TERN_AP_DST].offset = 8192;
        add(&p, d);
        st = run_prog(t1, &p);
        CHECK_EQ_INT(st.time_ps, trig + 1300000 + 2 * eng);

        TEST_BEGIN("DMA: small transfers on one queue are bound by its ring (one transfer per 860 ns per engine)");
        tern_instr s = d;
        s.ap[TERN_AP_DST] = st_ap1(TERN_MEM_SBUF, TERN_DTYPE_BF16, 0, 128, 0, 64);
        s.ap[TERN_AP_IN0] = st_ap1(TERN_MEM_HBM, TERN_DTYPE_BF16, 0, 128, 4096, 64);
        s.ap[TERN_AP_IN0].partition_step = 64;
        tern_program_init(&p);
        add(&p, s);
        st = run_prog(t1, &p);
        int64_t small = (int64_t)llround((8 * 8.5e-9 + 1024.0 / 17e9) * 1e12);
        CHECK_EQ_INT(st.time_ps, trig + 1300000 + small);
        /* two of them on one queue: the second enters the ring 860 ns after the first (its data, 128 ns, is
         * hidden); on two queues the rings work in parallel and only the data path is shared */
        tern_program_init(&p);
        add(&p, s);
        s.ap[TERN_AP_DST].offset = 1024;
        add(&p, s);
        st = run_prog(t1, &p);
        CHECK_EQ_INT(st.time_ps, trig + 860000 + 1300000 + small);
        tern_program_init(&p);
        s.ap[TERN_AP_DST].offset = 0;
        add(&p, s);
        s.ap[TERN_AP_DST].offset = 1024;
        s.queue = 1;
        s.signal_sem = 6;
        add(&p, s);
        st = run_prog(t1, &p);
        CHECK_EQ_INT(st.time_ps, 2 * trig + 1300000 + small + (small < trig ? 0 : small - trig));
        tern_core_free(t1);
    }

    TEST_BEGIN("published DMA observation: 32 KiB on one trn2 engine in about 1,416 ns");
    {
        tern_core *t2 = tcore("trn2.48xlarge");
        tern_instr d = st_instr(TERN_OP_DMA_COPY, TERN_ENGINE_SYNC);
        d.ap[TERN_AP_DST] = st_ap1(TERN_MEM_SBUF, TERN_DTYPE_BF16, 0, 1, 0, 16384);
        d.ap[TERN_AP_IN0] = st_ap1(TERN_MEM_HBM, TERN_DTYPE_BF16, 0, 1, 4096, 16384);
        tern_program p;
        tern_program_init(&p);
        add(&p, d);
        tern_run_stats st = run_prog(t2, &p);
        double engine_ns = (double)(st.time_ps - ps(64, 1.2) - 1300000) / 1000.0;
        CHECK_MSG(fabs(engine_ns - 1416) / 1416 < 0.05, "one engine moves 32 KiB in %.0f ns, published 1416", engine_ns);
        tern_core_free(t2);
    }
    tern_core_free(v2);
    return check_report();
}
