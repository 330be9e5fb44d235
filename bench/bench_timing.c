/* Timing-model benchmark: the NKI matrix-multiplication tutorial's fully optimised GEMM, [4096,8192] @
 * [8192,8192] BF16 on one trn1 NeuronCore, predicted by timing-only simulation. Prints
 *   tutorial_gemm_ms (published 6.97), tutorial_gemm_hfu (published 85.24 %), tutorial_gemm_timing_only_s (wall
 *   time of the timing-only simulation, target < 2 s), tutorial_gemm_build_s, tutorial_gemm_instructions. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "tern/kernel.h"
#include "tern/kernel_lib.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    const char *machine = argc > 1 ? argv[1] : "trn1.2xlarge";
    tern_error err;
    tern_core_config cfg;
    if (tern_core_config_load(machine, &cfg, &err)) {
        fprintf(stderr, "bench_timing: %s\n", err.msg);
        return 1;
    }
    const uint64_t M = 4096, N = 8192, K = 8192;
    double t0 = now();
    tern_kernel *k = NULL;
    tern_kernel_create(&cfg, "tutorial_gemm", &k, &err);
    tern_view lhsT = tern_kernel_input2d(k, "lhsT", TERN_DTYPE_BF16, K, M);
    tern_view rhs = tern_kernel_input2d(k, "rhs", TERN_DTYPE_BF16, K, N);
    tern_view out = tern_kernel_output2d(k, "out", TERN_DTYPE_BF16, M, N);
    tern_lib_gemm(k, out, lhsT, rhs, NULL);
    if (tern_kernel_status(k, &err)) {
        fprintf(stderr, "bench_timing: %s\n", err.msg);
        return 1;
    }
    double t1 = now();
    tern_core_options o = {0};
    o.mode = TERN_MODE_TIMING_ONLY;
    tern_core *core = NULL;
    if (tern_core_create(&cfg, &o, &core, &err)) {
        fprintf(stderr, "bench_timing: %s\n", err.msg);
        return 1;
    }
    tern_run_stats st;
    double t2 = now();
    if (tern_kernel_run(k, core, &st, &err)) {
        fprintf(stderr, "bench_timing: %s\n", err.msg);
        return 1;
    }
    double t3 = now();
    double peak = 2.0 * cfg.pe_rows * cfg.pe_cols * cfg.timing.clock_hz[TERN_ENGINE_TENSOR];
    double secs = (double)st.time_ps * 1e-12;
    size_t instrs = tern_program_instr_count(tern_kernel_program(k));
    printf("tutorial_gemm_ms: %.3f\n", secs * 1e3);
    printf("tutorial_gemm_hfu: %.2f\n", 100.0 * 2.0 * (double)st.macs / (peak * secs));
    printf("tutorial_gemm_vs_published: %.3f\n", secs * 1e3 / 6.97);
    printf("tutorial_gemm_timing_only_s: %.3f\n", t3 - t2);
    printf("tutorial_gemm_build_s: %.3f\n", t1 - t0);
    printf("tutorial_gemm_instructions: %zu\n", instrs);
    tern_core_free(core);
    tern_kernel_free(k);
    return 0;
}
