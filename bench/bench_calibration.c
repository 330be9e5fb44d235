/* The calibration table of docs/calibration.md: every figure of ../shared/reference/calibration.md next to
 * tern's prediction for the same case, simulated in timing-only mode from the machine files. With --markdown
 * it prints the table rows that scripts/gen_calibration_doc.sh splices into the doc (a CTest checks the doc is
 * current); without, `name: value` lines for make bench. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tern/kernel.h"
#include "tern/kernel_lib.h"
#include "tutorial_kernels.h"

static int markdown;

static tern_core *tcore(const char *machine, tern_core_config *cfg)
{
    tern_error err;
    tern_core *c = NULL;
    tern_core_options o = {0};
    o.mode = TERN_MODE_TIMING_ONLY;
    if (tern_core_config_load(machine, cfg, &err) || tern_core_create(cfg, &o, &c, &err)) {
        fprintf(stderr, "bench_calibration: %s\n", err.msg);
        exit(1);
    }
    return c;
}

static tern_ap ap1(tern_mem m, tern_dtype dt, unsigned np, uint64_t off, uint32_t n)
{
    tern_ap a;
    memset(&a, 0, sizeof a);
    a.mem = (uint8_t)m;
    a.dtype = (uint8_t)dt;
    a.ndims = 1;
    a.offset_reg = TERN_REG_NONE;
    a.num_partitions = (uint16_t)np;
    a.offset = off;
    a.dims[0].step = 1;
    a.dims[0].num = n;
    return a;
}

static tern_instr instr(tern_opcode op, tern_engine e)
{
    tern_instr i;
    memset(&i, 0, sizeof i);
    i.opcode = (uint16_t)op;
    i.engine = (uint8_t)e;
    i.wait_sem = i.signal_sem = TERN_SEM_NONE;
    for (int s = 0; s < TERN_INSTR_OPERANDS; s++)
        i.ap[s].offset_reg = TERN_REG_NONE;
    return i;
}

static tern_run_stats run(tern_core *c, const tern_instr *ins, int n)
{
    tern_program p;
    tern_program_init(&p);
    tern_error err;
    for (int i = 0; i < n; i++)
        tern_program_append(&p, &ins[i], &err);
    tern_run_stats st;
    tern_core_reset_control(c); /* each measurement starts from zeroed semaphores, as a launch does */
    if (tern_core_run(c, &p, &st, &err)) {
        fprintf(stderr, "bench_calibration: %s\n", err.msg);
        exit(1);
    }
    tern_program_free(&p);
    return st;
}

/* One row: id, what, published, tern, agreement. */
static void row(const char *id, const char *what, const char *published, const char *predicted, const char *note)
{
    if (markdown)
        printf("| %s | %s | %s | %s | %s |\n", id, what, published, predicted, note);
    else
        printf("calibration_%s: %s (published %s) %s\n", id, predicted, published, note);
}

static void cycles_row(const char *id, const char *what, const char *formula, tern_core *c, tern_engine e,
                       const tern_instr *ins, int n, double expect_cycles)
{
    tern_run_stats st = run(c, ins, n);
    double hz = tern_core_get_config(c)->timing.clock_hz[e];
    double cyc = (double)st.busy_ps[e] * 1e-12 * hz;
    char p[64], note[64];
    snprintf(p, sizeof p, "%.0f cycles", cyc);
    snprintf(note, sizeof note, "%s", fabs(cyc - expect_cycles) < 0.51 ? "exact" : "DIFFERS");
    row(id, what, formula, p, note);
}

/* A tutorial kernel built by fn, run timing-only on one trn1 core: its predicted time in microseconds. */
typedef void (*tut_fn)(tern_kernel *k, const uint64_t *shape);
static double tut_us(const char *name, tut_fn fn, const uint64_t *shape)
{
    tern_core_config cfg;
    tern_error err;
    tern_core *c = tcore("trn1.2xlarge", &cfg);
    tern_kernel *k = NULL;
    tern_run_stats st;
    if (tern_kernel_create(&cfg, name, &k, &err) || (fn(k, shape), tern_kernel_status(k, &err)) ||
        tern_kernel_run(k, c, &st, &err)) {
        fprintf(stderr, "bench_calibration: %s: %s\n", name, err.msg);
        exit(1);
    }
    tern_kernel_free(k);
    tern_core_free(c);
    return (double)st.time_ps * 1e-6;
}
static void tut_mm(tern_kernel *k, const uint64_t *s) { tut_matmul_tiled(k, s[0], s[1], s[2]); }
static void tut_ln(tern_kernel *k, const uint64_t *s) { tut_layernorm_v1(k, s[0], (uint32_t)s[1]); }
static void tut_mamba(tern_kernel *k, const uint64_t *s) { tut_mamba_v1(k, (uint32_t)s[0], (uint32_t)s[1], (uint32_t)s[2]); }

/* calibration_<name>: predicted, published, error (the issue-11 form), or a table row with --markdown. */
static void tut_row(const char *id, const char *what, double pred_us, double pub_us, int in_ms)
{
    double f = in_ms ? 1e-3 : 1;
    const char *u = in_ms ? "ms" : "us";
    char p[64], q[64], n[64];
    snprintf(p, sizeof p, in_ms ? "%.2f %s" : "%.0f %s", pred_us * f, u);
    snprintf(q, sizeof q, in_ms ? "%.2f %s" : "%.0f %s", pub_us * f, u);
    snprintf(n, sizeof n, "%+.1f%%", (pred_us / pub_us - 1) * 100);
    if (markdown)
        printf("| C6_%s | %s | %s | %s | %s |\n", id, what, q, p, n);
    else
        printf("calibration_%s: %s, %s, %s\n", id, p, q, n);
}

int main(int argc, char **argv)
{
    markdown = argc > 1 && !strcmp(argv[1], "--markdown");
    tern_core_config cfg;
    tern_error err;

    /* C1: the tutorial GEMM. */
    {
        tern_core *c = tcore("trn1.2xlarge", &cfg);
        tern_kernel *k = NULL;
        tern_kernel_create(&cfg, "tutorial_gemm", &k, &err);
        tern_view l = tern_kernel_input2d(k, "lhsT", TERN_DTYPE_BF16, 8192, 4096);
        tern_view r = tern_kernel_input2d(k, "rhs", TERN_DTYPE_BF16, 8192, 8192);
        tern_view o = tern_kernel_output2d(k, "out", TERN_DTYPE_BF16, 4096, 8192);
        tern_lib_gemm(k, o, l, r, NULL);
        tern_run_stats st;
        if (tern_kernel_run(k, c, &st, &err)) {
            fprintf(stderr, "bench_calibration: %s\n", err.msg);
            return 1;
        }
        double ms = (double)st.time_ps * 1e-9;
        double hfu = 2.0 * (double)st.macs / (2.0 * 128 * 128 * cfg.timing.clock_hz[0] * ms * 1e-3) * 100;
        char p[64], n[64];
        snprintf(p, sizeof p, "%.2f ms", ms);
        snprintf(n, sizeof n, "%+.1f%%", (ms / 6.97 - 1) * 100);
        row("C1_time", "NKI tutorial GEMM [4096,8192]@[8192,8192] BF16, trn1 core", "6.97 ms", p, n);
        snprintf(p, sizeof p, "%.1f%%", hfu);
        snprintf(n, sizeof n, "%+.1f points", hfu - 85.24);
        row("C1_hfu", "its hardware FLOPs utilisation", "85.24%", p, n);
        tern_kernel_free(k);
        tern_core_free(c);
    }

    /* C6: the other published tutorial kernels (calibration.md C6), one trn1 core, timing-only. */
    {
        const uint64_t mm[3] = {4096, 8192, 8192}, ln[2] = {4096, 8192}, mb[3] = {256, 512, 16};
        tut_row("matmul_tiled", "NKI matmul tutorial, original tiled kernel, [4096,8192]@[8192,8192] BF16",
                tut_us("matmul_tiled", tut_mm, mm), 51800, 1);
        tut_row("layernorm_v1", "NKI LayerNorm tutorial v1, 4096 x 8192 fp32", tut_us("layernorm_v1", tut_ln, ln),
                2311, 0);
        tut_row("mamba_v1", "NKI fused Mamba tutorial v1, seq 512, 256 channels, state 16",
                tut_us("mamba_v1", tut_mamba, mb), 172.93, 0);
    }

    /* C2: per-instruction rules on NeuronCore-v2. */
    tern_core *c = tcore("neuroncore-v2", &cfg);
    {
        tern_instr ls = instr(TERN_OP_LOAD_STATIONARY, TERN_ENGINE_TENSOR);
        ls.ap[TERN_AP_IN0] = ap1(TERN_MEM_SBUF, TERN_DTYPE_BF16, 128, 0, 128);
        tern_instr mm = instr(TERN_OP_MULTIPLY_MOVING, TERN_ENGINE_TENSOR);
        mm.ap[TERN_AP_IN0] = ap1(TERN_MEM_SBUF, TERN_DTYPE_BF16, 128, 65536, 512);
        mm.ap[TERN_AP_DST] = ap1(TERN_MEM_PSUM, TERN_DTYPE_FP32, 128, 0, 512);
        tern_instr pair[2] = {ls, mm};
        cycles_row("C2_ls_mm", "LoadStationary [128,128] + MultiplyMoving N=512 (bf16)", "32 + 512 = 544 cycles", c,
                   TERN_ENGINE_TENSOR, pair, 2, 544);
        tern_instr seq[8];
        for (int i = 0; i < 4; i++) {
            seq[2 * i] = ls;
            seq[2 * i + 1] = mm;
        }
        tern_run_stats st = run(c, seq, 8);
        char p[64];
        snprintf(p, sizeof p, "%.0f cycles", (double)st.time_ps * 1e-12 * cfg.timing.clock_hz[0]);
        row("C2_ls_overlap", "4 x (LS + MM N=512): LS overlaps the running MM", "32 + 4 x 512 = 2080 cycles", p,
            fabs((double)st.time_ps * 1e-12 * cfg.timing.clock_hz[0] - 2080) < 1 ? "exact" : "DIFFERS");
        mm.ap[TERN_AP_IN0].dtype = TERN_DTYPE_FP32;
        mm.ap[TERN_AP_IN0].dims[0].num = mm.ap[TERN_AP_DST].dims[0].num = 256;
        ls.ap[TERN_AP_IN0].dtype = TERN_DTYPE_FP32;
        tern_instr pair32[2] = {ls, mm};
        cycles_row("C2_fp32", "fp32 LS [128,128] + MM N=256", "4x: 128 + 1024 cycles", c, TERN_ENGINE_TENSOR, pair32, 2,
                   1152);
    }
    {
        tern_instr a = instr(TERN_OP_ACTIVATION, TERN_ENGINE_SCALAR);
        a.func = TERN_ACT_EXP;
        a.imm0.f = 1;
        a.ap[TERN_AP_DST] = ap1(TERN_MEM_SBUF, TERN_DTYPE_FP32, 128, 0, 1000);
        a.ap[TERN_AP_IN0] = ap1(TERN_MEM_SBUF, TERN_DTYPE_FP32, 128, 8192, 1000);
        cycles_row("C2_act", "activation N=1000", "max(MIN_II, N) = 1000 cycles", c, TERN_ENGINE_SCALAR, &a, 1, 1000);
        a.flags = TERN_FLAG_REDUCE;
        a.ap[TERN_AP_EXTRA] = ap1(TERN_MEM_SBUF, TERN_DTYPE_FP32, 128, 16384, 1);
        cycles_row("C2_act_reduce", "activation with reduce N=1000", "max(MIN_II, N) + MIN_II = 1064 cycles", c,
                   TERN_ENGINE_SCALAR, &a, 1, 1064);
    }
    {
        tern_instr t = instr(TERN_OP_TENSOR_TENSOR, TERN_ENGINE_VECTOR);
        t.op0 = TERN_ALU_ADD;
        t.ap[TERN_AP_DST] = ap1(TERN_MEM_SBUF, TERN_DTYPE_FP32, 128, 0, 1000);
        t.ap[TERN_AP_IN0] = ap1(TERN_MEM_SBUF, TERN_DTYPE_FP32, 128, 8192, 1000);
        t.ap[TERN_AP_IN1] = ap1(TERN_MEM_SBUF, TERN_DTYPE_FP32, 128, 16384, 1000);
        cycles_row("C2_tt_sbuf", "tensor_tensor fp32, both SBUF, N=1000", "max(MIN_II, 2N) = 2000 cycles", c,
                   TERN_ENGINE_VECTOR, &t, 1, 2000);
        t.ap[TERN_AP_IN1] = ap1(TERN_MEM_PSUM, TERN_DTYPE_FP32, 128, 0, 1000);
        cycles_row("C2_tt_psum", "tensor_tensor, one input in PSUM, N=1000", "max(MIN_II, N) = 1000 cycles", c,
                   TERN_ENGINE_VECTOR, &t, 1, 1000);
        tern_instr s = instr(TERN_OP_TENSOR_SCALAR, TERN_ENGINE_VECTOR);
        s.ap[TERN_AP_DST] = ap1(TERN_MEM_SBUF, TERN_DTYPE_FP32, 128, 0, 20);
        s.ap[TERN_AP_IN0] = ap1(TERN_MEM_SBUF, TERN_DTYPE_FP32, 128, 8192, 20);
        cycles_row("C2_minii", "tensor_scalar N=20", "max(MIN_II, N) = 64 cycles", c, TERN_ENGINE_VECTOR, &s, 1, 64);
        tern_instr r = instr(TERN_OP_RECIPROCAL, TERN_ENGINE_VECTOR);
        r.ap[TERN_AP_DST] = ap1(TERN_MEM_SBUF, TERN_DTYPE_FP32, 128, 0, 100);
        r.ap[TERN_AP_IN0] = ap1(TERN_MEM_SBUF, TERN_DTYPE_FP32, 128, 8192, 100);
        cycles_row("C2_recip", "VectorE reciprocal N=100", "max(MIN_II, 8N) = 800 cycles", c, TERN_ENGINE_VECTOR, &r, 1,
                   800);
        tern_instr i = instr(TERN_OP_IOTA, TERN_ENGINE_GPSIMD);
        i.ap[TERN_AP_DST] = ap1(TERN_MEM_SBUF, TERN_DTYPE_INT32, 128, 0, 256);
        cycles_row("C2_iota", "iota N=256 (GpSimd)", "150 + N = 406 cycles", c, TERN_ENGINE_GPSIMD, &i, 1, 406);
        tern_instr m = instr(TERN_OP_MEMSET, TERN_ENGINE_VECTOR);
        m.ap[TERN_AP_DST] = ap1(TERN_MEM_SBUF, TERN_DTYPE_BF16, 128, 0, 1000);
        cycles_row("C2_memset0", "memset zero bf16 N=1000", "max(MIN_II, N/2) = 500 cycles", c, TERN_ENGINE_VECTOR, &m,
                   1, 500);
    }
    /* Dependent one-element activations: each waits on the previous one's semaphore. */
    {
        tern_instr a[4];
        for (int k = 0; k < 4; k++) {
            a[k] = instr(TERN_OP_ACTIVATION, TERN_ENGINE_SCALAR);
            a[k].func = TERN_ACT_EXP;
            a[k].imm0.f = 1;
            a[k].ap[TERN_AP_DST] = ap1(TERN_MEM_SBUF, TERN_DTYPE_FP32, 1, (uint64_t)(k + 1) * 64, 1);
            a[k].ap[TERN_AP_IN0] = ap1(TERN_MEM_SBUF, TERN_DTYPE_FP32, 1, (uint64_t)k * 64, 1);
            a[k].signal_sem = 3;
            if (k) {
                a[k].wait_sem = 3;
                a[k].wait_value = (uint32_t)k;
            }
        }
        tern_core *c2 = tcore("neuroncore-v2", &cfg);
        /* spacing = the time three more dependent activations add to the first */
        tern_run_stats one = run(c2, a, 1);
        tern_run_stats st = run(c2, a, 4);
        double ns = (double)(st.time_ps - one.time_ps) / 3 / 1000.0;
        char p[64], n[128];
        snprintf(p, sizeof p, "%.0f ns apart", ns);
        snprintf(n, sizeof n, "%+.0f%% (semaphore wake latency: inferred from this figure)", (ns / 189 - 1) * 100);
        row("C2_act_dep", "dependent one-element ScalarE activations (v2)", "189 ns apart", p, n);
        tern_core_free(c2);
    }
    tern_core_free(c);

    /* C4: DMA. */
    {
        tern_core *t2 = tcore("trn2.48xlarge", &cfg);
        tern_instr d = instr(TERN_OP_DMA_COPY, TERN_ENGINE_SYNC);
        d.ap[TERN_AP_DST] = ap1(TERN_MEM_SBUF, TERN_DTYPE_BF16, 1, 0, 16384);
        d.ap[TERN_AP_IN0] = ap1(TERN_MEM_HBM, TERN_DTYPE_BF16, 1, 4096, 16384);
        tern_run_stats st = run(t2, &d, 1);
        double ns = ((double)st.time_ps - 64e3 / 1.2 - 1.3e6) / 1000.0;
        char p[64], n[64];
        snprintf(p, sizeof p, "%.0f ns", ns);
        snprintf(n, sizeof n, "%+.1f%%", (ns / 1416 - 1) * 100);
        row("C4_32k", "32 KiB HBM->SBUF on one trn2 DMA engine (after the fixed cost)", "1,416 ns", p, n);
        tern_core_free(t2);
        /* The DMA overview's throughput curve (nki-dma-overview.rst, figure nki-dma-intro-1.jpg: [128, b]
         * transfers, p_dim 128; unlabelled y axis, so each point is read as a fraction of the 32 KiB point).
         * tern: 16 back-to-back transfers on one queue of a trn2 core, steady-state bandwidth over the same
         * figure at 32 KiB. transfer_cost and descriptor_cost were fitted to this curve: not a validation. */
        tern_core *t3 = tcore("trn2.48xlarge", &cfg);
        const unsigned sizes[7] = {128, 256, 512, 1024, 2048, 4096, 32768};
        const double fig[7] = {5.0, 10.3, 20.9, 42.4, 81.3, 96.6, 100};
        double gbps[7];
        for (int s = 0; s < 7; s++) {
            tern_instr dd[16];
            for (int k = 0; k < 16; k++) {
                dd[k] = instr(TERN_OP_DMA_COPY, TERN_ENGINE_SYNC);
                dd[k].ap[TERN_AP_DST] = ap1(TERN_MEM_SBUF, TERN_DTYPE_UINT8, 128, (uint64_t)(k % 4) * sizes[s], sizes[s]);
                dd[k].ap[TERN_AP_IN0] = ap1(TERN_MEM_HBM, TERN_DTYPE_UINT8, 128, (uint64_t)k * 128 * sizes[s], sizes[s]);
                dd[k].ap[TERN_AP_IN0].partition_step = sizes[s];
            }
            tern_run_stats one = run(t3, dd, 1);
            st = run(t3, dd, 16);
            /* the 15 transfers after the first, at their steady rate */
            gbps[s] = (double)(st.dma_bytes - one.dma_bytes) / ((double)(st.time_ps - one.time_ps) * 1e-12) / 1e9;
        }
        for (int s = 0; s < 6; s++) {
            char id[32], what[112], pub[48];
            double rel = gbps[s] / gbps[6] * 100;
            snprintf(id, sizeof id, "C4_curve_%u", sizes[s]);
            snprintf(what, sizeof what, "DMA throughput at %u B per partition, one queue, relative to 32 KiB (trn2)",
                     sizes[s]);
            snprintf(pub, sizeof pub, "%.1f%%", fig[s]);
            snprintf(p, sizeof p, "%.1f%% (%.0f GB/s)", rel, gbps[s]);
            snprintf(n, sizeof n, "%+.1f points (fitted)", rel - fig[s]);
            row(id, what, pub, p, n);
        }
        tern_core_free(t3);
    }
    row("C4_hbm", "HBM per chip", "820 GiB/s / 2.9 TB/s / 4.9 TB/s", "from the machine files", "shared by the chip's cores");
    row("C5", "collectives (ring hop 1-2 us, EFA 15 us, algorithm by size)", "see calibration.md",
        "hop latencies as published", "bench_collective; the 2-rank curve is fitted (multichip.md)");
    return 0;
}
