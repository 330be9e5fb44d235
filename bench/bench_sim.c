/* Simulator speed: the functional simulation of a 2048x2048x2048 BF16 GEMM written with the kernel API (the
 * kernel library's tutorial-blocked GEMM), against the host's own GEMMs of the same size, measured side by side in
 * one run, each at its best configuration (bench/host_gemm.c, in processes of their own). Prints `name: value`:
 *   sim_gemm_build_s, sim_gemm_run_s, sim_gemm_gflops (2*M*N*K / run time);
 *   host_sgemm_s, host_openblas_core, host_openblas_threads (OpenBLAS sgemm, the kernel matching this CPU, the
 *   faster of 1 and all threads), host_onednn_f32_s, host_onednn_isa;
 *   host_bf16_gemm_s (oneDNN BF16 matmul at its best ISA, AMX where the CPU has it) with host_onednn_isa;
 *   host_bf16_gemm_avx512bf16_s (the same limited to AVX512_CORE_BF16 through ONEDNN_MAX_CPU_ISA, in the
 *   baseline's own process; measured only when the best ISA is AMX, else the same figure);
 *   sim_over_host_gemm = run / the AVX512_CORE_BF16 figure: the bound is against it because AMX does not
 *   compute tern's result (tests/sim/test_amx_semantics.c), sim_over_host_gemm_basis says so;
 *   sim_over_host_gemm_amx = run / the AMX figure (where the CPU has AMX); where oneDNN has no BF16 matmul for this
 *   CPU (it needs AVX-512) `host_bf16_gemm: unavailable (...)` instead;
 *   sim_over_host_gemm_fp32 = run / the faster fp32 GEMM (OpenBLAS or oneDNN);
 *   sim_matmul_kernel: which bf16 kernel the simulator chose on this host (fma or dpbf16; TERN_MATMUL forces one).
 * Then the NKI tutorial's full problem, [4096,8192] @ [8192,8192] BF16 on one trn1 NeuronCore, simulated once:
 *   sim_tutorial_gemm_s and sim_tutorial_gemm_max_err (largest error of 256 sampled outputs against a float64
 *   reference, relative to the sum of |products|: the check that the full-size run is right, not just done). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sim/matmul.h"
#include "tern/kernel.h"
#include "tern/kernel_lib.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void die(const char *what, const tern_error *err)
{
    fprintf(stderr, "bench_sim: %s: %s\n", what, err->msg);
    exit(1);
}

static uint16_t bf16_of(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    float f = (float)((*s >> 40) & 0xFFFF) / 65536.0f - 0.5f;
    return tern_f32_to_bf16(f, NULL, 0);
}

/* The tutorial's full-size GEMM: lhsT [K=8192, M=4096], rhs [K=8192, N=8192], out [4096, 8192] bf16. */
static void tutorial_gemm(const tern_core_config *cfg)
{
    const uint64_t M = 4096, N = 8192, K = 8192;
    tern_error err;
    tern_kernel *k = NULL;
    if (tern_kernel_create(cfg, "tutorial_gemm", &k, &err))
        die("kernel", &err);
    tern_view lhsT = tern_kernel_input2d(k, "lhsT", TERN_DTYPE_BF16, K, M);
    tern_view rhs = tern_kernel_input2d(k, "rhs", TERN_DTYPE_BF16, K, N);
    tern_view out = tern_kernel_output2d(k, "out", TERN_DTYPE_BF16, M, N);
    tern_lib_gemm(k, out, lhsT, rhs, NULL);
    if (tern_kernel_status(k, &err))
        die("build", &err);
    uint16_t *l = malloc(K * M * 2), *r = malloc(K * N * 2), *o = malloc(M * N * 2);
    if (!l || !r || !o) {
        fprintf(stderr, "bench_sim: out of memory for the tutorial GEMM\n");
        exit(1);
    }
    uint64_t s = 7;
    for (size_t i = 0; i < K * M; i++)
        l[i] = bf16_of(&s);
    for (size_t i = 0; i < K * N; i++)
        r[i] = bf16_of(&s);
    tern_core *core = NULL;
    if (tern_core_create(cfg, NULL, &core, &err) || tern_kernel_write(k, core, "lhsT", l, K * M * 2, &err) ||
        tern_kernel_write(k, core, "rhs", r, K * N * 2, &err))
        die("inputs", &err);
    double t0 = now();
    if (tern_kernel_run(k, core, NULL, &err))
        die("run", &err);
    double t1 = now();
    if (tern_kernel_read(k, core, "out", o, M * N * 2, &err))
        die("output", &err);
    double worst = 0;
    for (int t = 0; t < 256; t++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        uint64_t m = (s >> 20) % M, n = (s >> 40) % N;
        double ref = 0, mag = 0;
        for (uint64_t kk = 0; kk < K; kk++) {
            double p = (double)tern_bf16_to_f32(l[kk * M + m]) * tern_bf16_to_f32(r[kk * N + n]);
            ref += p;
            mag += p < 0 ? -p : p;
        }
        double e = (double)tern_bf16_to_f32(o[m * N + n]) - ref;
        e = (e < 0 ? -e : e) / mag;
        if (e > worst)
            worst = e;
    }
    printf("sim_tutorial_gemm_s: %.3f\n", t1 - t0);
    printf("sim_tutorial_gemm_gflops: %.1f\n", 2.0 * (double)M * N * K / (t1 - t0) / 1e9);
    printf("sim_tutorial_gemm_max_err: %.3g\n", worst);
    free(l);
    free(r);
    free(o);
    tern_core_free(core);
    tern_kernel_free(k);
}

typedef struct {
    double sgemm, onednn_f32, bf16;
    char core[64], isa[64], bf16_why[160];
    int threads;
} host_result;

/* One run of build/bench/host_gemm with the OpenBLAS kernel, the thread counts and (isa != NULL) oneDNN's ISA limit
 * in its environment alone; keeps the best figures in *h. */
static void host_gemm(unsigned n, int reps, const char *core, int threads, const char *isa, host_result *h)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "%s%s%s%s%s OPENBLAS_NUM_THREADS=%d OMP_NUM_THREADS=%d %s/bench/host_gemm %u %d 2>/dev/null",
             core ? "OPENBLAS_CORETYPE='" : "", core ? core : "", core ? "' " : "", isa ? "ONEDNN_MAX_CPU_ISA=" : "",
             isa ? isa : "", threads, threads, TERN_BINARY_DIR, n, reps);
    FILE *p = popen(cmd, "r");
    if (!p)
        return;
    char line[256], c[64] = "";
    double sg = 0;
    while (fgets(line, sizeof line, p)) {
        line[strcspn(line, "\n")] = '\0';
        char *v = strchr(line, ':');
        if (!v)
            continue;
        *v = '\0';
        v += 2;
        double x = strtod(v, NULL);
        if (!strcmp(line, "host_sgemm_s"))
            sg = x;
        else if (!strcmp(line, "host_openblas_core"))
            snprintf(c, sizeof c, "%s", v);
        else if (!strcmp(line, "host_onednn_f32_s") && (h->onednn_f32 <= 0 || x < h->onednn_f32))
            h->onednn_f32 = x;
        else if (!strcmp(line, "host_bf16_gemm_s") && (h->bf16 <= 0 || x < h->bf16))
            h->bf16 = x;
        else if (!strcmp(line, "host_bf16_gemm"))
            snprintf(h->bf16_why, sizeof h->bf16_why, "%s", v);
        else if (!strcmp(line, "host_onednn_isa"))
            snprintf(h->isa, sizeof h->isa, "%s", v);
    }
    pclose(p);
    if (sg > 0 && (h->sgemm <= 0 || sg < h->sgemm)) {
        h->sgemm = sg;
        h->threads = threads;
        snprintf(h->core, sizeof h->core, "%s", c);
    }
}

int main(int argc, char **argv)
{
    const unsigned n = argc > 1 ? (unsigned)atoi(argv[1]) : 2048;
    const int reps = argc > 2 ? atoi(argv[2]) : 3;
    tern_error err;
    tern_core_config cfg;
    if (tern_core_config_load("trn1.2xlarge", &cfg, &err))
        die("machine", &err);
    float *a = malloc(sizeof(float) * n * n), *b = malloc(sizeof(float) * n * n);
    uint64_t s = 42;
    for (size_t i = 0; i < (size_t)n * n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        a[i] = (float)((s >> 40) & 0xFFFF) / 65536.0f - 0.5f;
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        b[i] = (float)((s >> 40) & 0xFFFF) / 65536.0f - 0.5f;
    }

    double build = 1e30, run = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        tern_kernel *k = NULL;
        if (tern_kernel_create(&cfg, "gemm", &k, &err))
            die("kernel", &err);
        tern_view lhsT = tern_kernel_input2d(k, "lhsT", TERN_DTYPE_BF16, n, n);
        tern_view rhs = tern_kernel_input2d(k, "rhs", TERN_DTYPE_BF16, n, n);
        tern_view out = tern_kernel_output2d(k, "out", TERN_DTYPE_BF16, n, n);
        tern_lib_gemm(k, out, lhsT, rhs, NULL);
        if (tern_kernel_status(k, &err))
            die("build", &err);
        double t1 = now();
        tern_core *core = NULL;
        if (tern_core_create(&cfg, NULL, &core, &err))
            die("core", &err);
        if (tern_kernel_write_f32(k, core, "lhsT", a, (size_t)n * n, &err) ||
            tern_kernel_write_f32(k, core, "rhs", b, (size_t)n * n, &err))
            die("inputs", &err);
        double t2 = now();
        if (tern_kernel_run(k, core, NULL, &err))
            die("run", &err);
        double t3 = now();
        if (t1 - t0 < build)
            build = t1 - t0;
        if (t3 - t2 < run)
            run = t3 - t2;
        tern_core_free(core);
        tern_kernel_free(k);
    }
    /* The host baselines run after the simulations, each configuration in its own process (bench/host_gemm.c):
     * OpenBLAS with the kernel matching this CPU (scripts/torch_time.py --cpu-core; OPENBLAS_CORETYPE set for that
     * command alone) at 1 and at all threads, and oneDNN's fp32 and BF16 matmuls; the best of each is kept. */
    host_result h = {0};
    const int nthreads = (int)sysconf(_SC_NPROCESSORS_ONLN);
    char core[64] = "default";
    FILE *cp = popen("/usr/bin/python3 " TERN_SOURCE_DIR "/scripts/torch_time.py --cpu-core 2>/dev/null", "r");
    if (cp) {
        if (fgets(core, sizeof core, cp))
            core[strcspn(core, "\n")] = '\0';
        pclose(cp);
    }
    for (int t = 1; t <= nthreads; t = t == 1 && nthreads > 1 ? nthreads : nthreads + 1)
        host_gemm(n, reps, strcmp(core, "default") ? core : NULL, t, NULL, &h);
    /* oneDNN limited to AVX512_CORE_BF16, like with like where its best is AMX (which tern cannot use) */
    host_result lim = {0};
    const int amx = !strcmp(h.isa, "avx512_core_amx");
    if (amx)
        for (int t = 1; t <= nthreads; t = t == 1 && nthreads > 1 ? nthreads : nthreads + 1)
            host_gemm(n, reps, strcmp(core, "default") ? core : NULL, t, "AVX512_CORE_BF16", &lim);
    else
        lim = h;
    int use_dp = 0;
    printf("sim_matmul_kernel: %s\n", matmul_choose_kernel(&use_dp, &err) ? "?" : use_dp ? "dpbf16" : "fma");
    printf("sim_gemm_size: %u\n", n);
    printf("sim_gemm_build_s: %.4f\n", build);
    printf("sim_gemm_run_s: %.4f\n", run);
    if (h.sgemm > 0) {
        printf("host_sgemm_s: %.4f\n", h.sgemm);
        printf("host_openblas_core: %s\n", h.core);
        printf("host_openblas_threads: %d\n", h.threads);
    }
    if (h.onednn_f32 > 0)
        printf("host_onednn_f32_s: %.4f\n", h.onednn_f32);
    printf("host_onednn_isa: %s\n", h.isa[0] ? h.isa : "?");
    /* the best fp32 GEMM the host has */
    double f32 = h.sgemm > 0 && (h.onednn_f32 <= 0 || h.sgemm < h.onednn_f32) ? h.sgemm : h.onednn_f32;
    if (h.bf16 > 0) {
        printf("host_bf16_gemm_s: %.4f\n", h.bf16);
        if (lim.bf16 > 0) {
            printf("host_bf16_gemm_avx512bf16_s: %.4f\n", lim.bf16);
            printf("host_onednn_isa_limited: %s\n", lim.isa[0] ? lim.isa : "?");
            printf("sim_over_host_gemm: %.3f\n", run / lim.bf16); /* like with like: BF16, no AMX */
            printf("sim_over_host_gemm_basis: oneDNN BF16 limited to AVX512_CORE_BF16 (AMX does not compute tern's "
                   "result: tests/sim/test_amx_semantics.c)\n");
        }
        if (amx)
            printf("sim_over_host_gemm_amx: %.3f\n", run / h.bf16);
    } else {
        printf("host_bf16_gemm: unavailable (%s)\n", h.bf16_why[0] ? h.bf16_why : "host_gemm not built");
    }
    if (f32 > 0)
        printf("sim_over_host_gemm_fp32: %.3f\n", run / f32);
    printf("sim_gemm_gflops: %.1f\n", 2.0 * n * n * (double)n / run / 1e9);
    free(a);
    free(b);
    if (argc <= 3 || atoi(argv[3]) != 0)
        tutorial_gemm(&cfg);
    return 0;
}
