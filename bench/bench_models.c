/* Model benchmarks (issue: compiler and runtime): GPT-2 124M-style and BERT-base-style models exported from
 * PyTorch (scripts/gen_models.py, random weights, sequence 128, batch 1), compiled for one trn1 NeuronCore.
 * Prints per model: <name>_latency_ms (predicted device time), <name>_mfu (model FLOPs / peak / time),
 * <name>_compile_s, <name>_first_run_s (tern's first functional execute), <name>_run_s, <name>_torch_s and
 * <name>_sim_over_torch = run_s / torch_s, with <name>_sim_over_torch_worst (the worst round's ratio).
 * tern and PyTorch (CPU, fp32, scripts/torch_time.py) are timed in ROUNDS interleaved rounds (3, or the
 * environment's TERN_BENCH_ROUNDS): each round times 3 tern executes, then 3 PyTorch inferences after a
 * warm-up; run_s and torch_s are the best of all rounds. A shared host's busy phase then hits both sides alike,
 * not only the one that happened to run during it.
 * BERT-large (sequence 128, batch 1) is predicted in timing-only mode: bert_large_latency_ms.
 * Models are generated into build/bench-models on first use (about 1.5 GB of ONNX files).
 * ResNet-50 (torchvision's layer configuration, seeded random weights, batch 1, 3 x 224 x 224) runs functionally.
 * PyTorch runs at its best configuration on this host, found by scripts/torch_time.py in the first round (the
 * OpenBLAS kernel matching the CPU, torch and OpenBLAS threads at 1 or all): <name>_torch_openblas_core,
 * <name>_torch_threads and <name>_torch_blas_threads say what it chose. <name>_rss_mb: the model's peak host
 * memory (each model runs in its own process).
 * Usage: bench_models [MODEL ...]   (default: gpt2_124m bert_base resnet50 bert_large; any gen_models.py name,
 * e.g. `bench_models llama_small t5_small`: the LLaMA-style and T5-style models whose attention fuses) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tern/arch.h"
#include "tern/compiler.h"
#include "tern/npy.h"
#include "tern/runtime.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int exists(const char *p)
{
    struct stat s;
    return stat(p, &s) == 0;
}

/* PyTorch's configuration on this host (scripts/torch_time.py): chosen by measurement in the first round, then
 * reused so every round times the same thing. */
typedef struct {
    char core[64];
    int threads, blas_threads;
} torch_cfg;

static double torch_seconds(const char *src, const char *name, int runs, torch_cfg *c)
{
    char cmd[2048];
    if (c->threads == 0)
        snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s/scripts/torch_time.py %s %d 2>/dev/null", src, name, runs);
    else /* the environment for the PyTorch command alone */
        snprintf(cmd, sizeof cmd,
                 "OPENBLAS_CORETYPE='%s' OPENBLAS_NUM_THREADS=%d OMP_NUM_THREADS=%d /usr/bin/python3 "
                 "%s/scripts/torch_time.py %s %d --core '%s' --threads %d 2>/dev/null",
                 c->core, c->blas_threads, c->threads, src, name, runs, c->core, c->threads);
    FILE *p = popen(cmd, "r");
    if (!p)
        return 0;
    double s = 0;
    char line[256];
    while (fgets(line, sizeof line, p)) {
        line[strcspn(line, "\n")] = '\0';
        if (!strncmp(line, "seconds:", 8))
            s = strtod(line + 8, NULL);
        else if (!strncmp(line, "torch_openblas_core: ", 21))
            snprintf(c->core, sizeof c->core, "%.63s", line + 21);
        else if (!strncmp(line, "torch_threads:", 14))
            c->threads = atoi(line + 14);
        else if (!strncmp(line, "torch_blas_threads:", 19))
            c->blas_threads = atoi(line + 19);
    }
    pclose(p);
    if (!strcmp(c->core, "?")) /* OpenBLAS did not say: let it choose again */
        c->core[0] = '\0';
    return s;
}

static double model_flops(const tern_exe *x)
{
    const char *p = x->metadata_json ? strstr(x->metadata_json, "\"model_flops\":") : NULL;
    return p ? strtod(p + 14, NULL) : 0;
}

static int bench(const char *src, const char *dir, const char *name, int functional)
{
    char onnx[1024], in[1024], cmd[4096];
    snprintf(onnx, sizeof onnx, "%s/%s.onnx", dir, name);
    snprintf(in, sizeof in, "%s/%s.in.npy", dir, name);
    if (!exists(onnx)) {
        snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s/scripts/gen_models.py %s %s > /dev/null 2>&1", src, dir, name);
        if (system(cmd) != 0 || !exists(onnx)) {
            fprintf(stderr, "bench_models: cannot generate %s (needs Debian's python3-torch)\n", name);
            return 1;
        }
    }
    tern_compile_opts o;
    tern_compile_opts_default(&o);
    o.machine = "trn1.2xlarge";
    tern_exe x;
    tern_compile_report rep;
    tern_error err;
    double t0 = now();
    if (tern_compile_onnx(onnx, &o, &x, &rep, &err)) {
        fprintf(stderr, "bench_models: %s: %s\n", name, err.msg);
        return 1;
    }
    double t1 = now();
    tern_rt_options ro = {0};
    ro.mode = functional ? TERN_MODE_FUNCTIONAL : TERN_MODE_TIMING_ONLY;
    tern_rt *rt = NULL;
    tern_npy ids;
    if (tern_rt_create(&x, o.machine, &ro, &rt, &err) || tern_npy_read(in, &ids, &err)) {
        fprintf(stderr, "bench_models: %s: %s\n", name, err.msg);
        return 1;
    }
    /* the input as the executable takes it: fp32 (an image) or int32 (token ids) */
    uint64_t n = tern_npy_count(&ids);
    const int is_f32 = x.inputs[0].dtype == TERN_DTYPE_FP32;
    int32_t *v = malloc(sizeof(int32_t) * (n ? n : 1));
    for (uint64_t i = 0; i < n; i++) {
        if (is_f32) {
            float f = (float)tern_npy_get(&ids, i);
            memcpy(&v[i], &f, sizeof f);
        } else {
            v[i] = (int32_t)tern_npy_get(&ids, i);
        }
    }
    /* The first execute is reported on its own (it also pays the first touch of the simulated HBM pages). Then
     * interleaved rounds: 3 tern executes, 3 PyTorch inferences; best of all rounds on each side. Every execute
     * starts from the same state (the runtime resets the core's control state): same outputs and times. */
    tern_run_stats st;
    double first = 0, t2 = 0, t3 = 1e30, torch = 1e30, worst = 0;
    torch_cfg tc = {{0}, 0, 0};
    const char *re = getenv("TERN_BENCH_ROUNDS");
    int rounds = re && atoi(re) > 0 ? atoi(re) : 3;
    for (int round = 0; round < (functional ? rounds : 0) + 1; round++) {
        double best = 1e30;
        for (int rep_i = 0; rep_i < (round == 0 ? 1 : 3); rep_i++) {
            double a = now();
            if (tern_rt_set_input(rt, x.inputs[0].name, v, sizeof(int32_t) * n, &err) ||
                tern_rt_execute(rt, &st, &err)) {
                fprintf(stderr, "bench_models: %s: %s\n", name, err.msg);
                return 1;
            }
            double b = now();
            if (round == 0)
                first = b - a;
            else if (b - a < best)
                best = b - a;
        }
        if (round == 0)
            continue;
        if (best < t3 - t2)
            t2 = 0, t3 = best;
        double ts = torch_seconds(src, name, 3, &tc);
        if (ts <= 0) {
            torch = 0;
            continue;
        }
        if (torch > 0 && ts < torch)
            torch = ts;
        if (best / ts > worst)
            worst = best / ts;
    }
    if (!functional)
        t2 = 0, t3 = first;
    double secs = (double)st.time_ps * 1e-12;
    /* MFU against the BF16 peak of one NeuronCore, derived from the machine file */
    double peak = 0;
    tern_machine *m = NULL;
    if (tern_machine_load(o.machine, &m, &err) == TERN_OK) {
        tern_peaks pk;
        tern_machine_peaks(m, &pk);
        peak = pk.core_flops[TERN_ARCH_BF16];
        tern_machine_free(m);
    }
    printf("%s_latency_ms: %.3f\n", name, secs * 1e3);
    if (peak > 0 && secs > 0)
        printf("%s_mfu: %.2f\n", name, model_flops(&x) / (peak * secs) * 100);
    printf("%s_compile_s: %.2f\n", name, t1 - t0);
    printf("%s_instructions: %zu\n", name, rep.instructions);
    if (functional) {
        printf("%s_first_run_s: %.3f\n", name, first);
        printf("%s_run_s: %.3f\n", name, t3 - t2);
        printf("%s_torch_s: %.3f\n", name, torch);
        printf("%s_torch_openblas_core: %s\n", name, tc.core[0] ? tc.core : "default");
        printf("%s_torch_threads: %d\n", name, tc.threads);
        printf("%s_torch_blas_threads: %d\n", name, tc.blas_threads);
        if (torch > 0) {
            printf("%s_sim_over_torch: %.2f\n", name, (t3 - t2) / torch);
            printf("%s_sim_over_torch_worst: %.2f\n", name, worst);
        }
    } else {
        printf("%s_timing_only_s: %.3f\n", name, t3 - t2);
    }
    free(v);
    tern_npy_free(&ids);
    tern_rt_free(rt);
    tern_exe_free(&x);
    return 0;
}

/* Each model runs in a child process, so its peak resident memory (<name>_rss_mb, the child's ru_maxrss) is its
 * own and not the high-water mark of the models before it. */
static int bench_child(const char *src, const char *dir, const char *name, int functional)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        return bench(src, dir, name, functional);
    if (pid == 0) {
        int rc = bench(src, dir, name, functional);
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        if (rc == 0)
            printf("%s_rss_mb: %.0f\n", name, (double)ru.ru_maxrss / 1024.0);
        fflush(stdout);
        _exit(rc);
    }
    int status = 0;
    if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status)) {
        fprintf(stderr, "bench_models: %s: the benchmark process died\n", name);
        return 1;
    }
    return WEXITSTATUS(status);
}

int main(int argc, char **argv)
{
    const char *src = TERN_SOURCE_DIR;
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/bench-models", TERN_BINARY_DIR);
    mkdir(dir, 0755);
    const char *dflt[] = {"gpt2_124m", "bert_base", "resnet50", "bert_large"};
    int rc = 0;
    if (argc > 1) {
        for (int i = 1; i < argc; i++)
            rc |= bench_child(src, dir, argv[i], strcmp(argv[i], "bert_large") != 0);
    } else {
        for (int i = 0; i < 4; i++)
            rc |= bench_child(src, dir, dflt[i], i < 3);
    }
    return rc;
}
