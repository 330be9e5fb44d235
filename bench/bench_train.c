/* Training benchmarks (issue: training): GPT-2 124M (scripts/gpt2_train.py: gen_models.py's GPT, vocab 50,257,
 * width 768, 12 layers, tied embeddings) trained with AdamW and next-token cross-entropy on one NeuronCore.
 *   - The predicted step on trn1.2xlarge at sequence 1024, batch 1, BF16 matmul operands with fp32 master weights
 *     and state (timing-only: no values): gpt2_train_step_s, gpt2_train_tokens_per_s, gpt2_train_mfu (percent of
 *     the core's peak TensorE rate), gpt2_train_hbm_mb (the step's footprint per core).
 *   - The host-speed check: one functional fp32 training step at sequence 128, batch 1 (forward, backward, norm,
 *     clipping, AdamW: the bits PyTorch fp32 follows), best of the steps after the first, gpt2_train_sim_s; the same
 *     step in PyTorch on this host at its best configuration (scripts/gpt2_train.py time: OPENBLAS_CORETYPE for
 *     the PyTorch process alone, torch and OpenBLAS threads at 1 or all, chosen by measurement),
 *     gpt2_train_torch_s with gpt2_train_torch_openblas_core / _threads / _blas_threads; and
 *     gpt2_train_sim_over_torch = sim_s / torch_s (the bound: 3).
 * Models go to build/bench-train on first use (two ONNX files of about 500 MB).
 * Usage: bench_train [--timing-only | --functional]   (default: both) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tern/npy.h"
#include "tern/train.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* The host's 1-minute load average (/proc/loadavg), printed beside the host times: a shared host's load moves
 * them by 2x and more, so a ratio taken at a high load is not a result (docs/performance.md). -1 when unknown. */
static double load_avg(void)
{
    FILE *f = fopen("/proc/loadavg", "r");
    double l = -1;
    if (f) {
        if (fscanf(f, "%lf", &l) != 1)
            l = -1;
        fclose(f);
    }
    return l;
}

static int exists(const char *p)
{
    struct stat s;
    return stat(p, &s) == 0;
}

/* dir/gpt2.onnx, x.npy, y.npy for sequence seq (scripts/gpt2_train.py export) */
static int model(const char *src, const char *dir, int seq)
{
    char onnx[1200], cmd[4096];
    snprintf(onnx, sizeof onnx, "%s/gpt2.onnx", dir);
    if (exists(onnx))
        return 0;
    mkdir(dir, 0755);
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s/scripts/gpt2_train.py export %s %d 4 > /dev/null 2>&1", src, dir,
             seq);
    if (system(cmd) != 0 || !exists(onnx)) {
        fprintf(stderr, "bench_train: cannot export GPT-2 124M at sequence %d (needs Debian's python3-torch)\n", seq);
        return 1;
    }
    return 0;
}

static int64_t *read_i64(const char *path, size_t *n)
{
    tern_npy a;
    tern_error err;
    if (tern_npy_read(path, &a, &err)) {
        fprintf(stderr, "bench_train: %s\n", err.msg);
        return NULL;
    }
    *n = (size_t)tern_npy_count(&a);
    int64_t *v = malloc(sizeof(int64_t) * (*n ? *n : 1));
    for (size_t i = 0; v && i < *n; i++)
        v[i] = (int64_t)tern_npy_get(&a, i);
    tern_npy_free(&a);
    return v;
}

static tern_trainer *trainer(const char *dir, int timing_only, tern_dtype mm)
{
    char onnx[1200];
    snprintf(onnx, sizeof onnx, "%s/gpt2.onnx", dir);
    tern_train_opts o;
    tern_train_opts_default(&o);
    o.optimizer = TERN_OPT_ADAMW;
    o.lr = 1e-4;
    o.clip_norm = 1.0;
    o.batch = 1;
    o.machine = "trn1.2xlarge";
    o.timing_only = timing_only;
    o.matmul_dtype = mm;
    tern_trainer *t = NULL;
    tern_error err;
    if (tern_train_create(onnx, &o, &t, &err)) {
        fprintf(stderr, "bench_train: %s: %s\n", onnx, err.msg);
        return NULL;
    }
    return t;
}

static int predicted(const char *src, const char *bin)
{
    char dir[1100];
    snprintf(dir, sizeof dir, "%s/bench-train/s1024", bin);
    if (model(src, dir, 1024))
        return 1;
    double t0 = now();
    tern_trainer *t = trainer(dir, 1, TERN_DTYPE_BF16);
    if (!t)
        return 1;
    int64_t ids[1024] = {0};
    tern_train_step_info info;
    tern_error err;
    if (tern_train_step(t, ids, 1024, ids, 1024, &info, &err)) {
        fprintf(stderr, "bench_train: %s\n", err.msg);
        tern_train_free(t);
        return 1;
    }
    printf("gpt2_train_machine: trn1.2xlarge (1 NeuronCore), sequence 1024, batch 1, bf16 matmuls, fp32 master "
           "weights, AdamW\n");
    printf("gpt2_train_step_s: %.4f\n", info.step_seconds);
    printf("gpt2_train_tokens_per_s: %.1f\n", 1024.0 / info.step_seconds);
    printf("gpt2_train_mfu: %.2f\n", info.mfu);
    printf("gpt2_train_flops_per_step: %.4g\n", tern_train_model_flops(t));
    printf("gpt2_train_hbm_mb: %.1f\n", (double)tern_train_hbm_bytes(t, NULL) / (1024.0 * 1024.0));
    printf("gpt2_train_predict_wall_s: %.1f\n", now() - t0);
    tern_train_free(t);
    return 0;
}

static double torch_step(const char *src, char *core, size_t ncore, int *threads, int *blas)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s/scripts/gpt2_train.py time 128 3 2>/dev/null", src);
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
            snprintf(core, ncore, "%.63s", line + 21);
        else if (!strncmp(line, "torch_threads:", 14))
            *threads = atoi(line + 14);
        else if (!strncmp(line, "torch_blas_threads:", 19))
            *blas = atoi(line + 19);
    }
    pclose(p);
    return s;
}

static int functional(const char *src, const char *bin)
{
    char dir[1100], path[1300];
    snprintf(dir, sizeof dir, "%s/bench-train/s128", bin);
    if (model(src, dir, 128))
        return 1;
    size_t nx = 0, ny = 0;
    snprintf(path, sizeof path, "%s/x.npy", dir);
    int64_t *x = read_i64(path, &nx);
    snprintf(path, sizeof path, "%s/y.npy", dir);
    int64_t *y = read_i64(path, &ny);
    if (!x || !y || nx < 3 * 128 || ny != nx) {
        free(x);
        free(y);
        fprintf(stderr, "bench_train: %s: token rows missing\n", dir);
        return 1;
    }
    double load0 = load_avg(), t0 = now();
    tern_trainer *t = trainer(dir, 0, TERN_DTYPE_FP32);
    if (!t) {
        free(x);
        free(y);
        return 1;
    }
    double create = now() - t0, best = 1e30, first = 0;
    tern_train_step_info info;
    tern_error err;
    int rc = 0;
    for (int s = 0; s < 3 && !rc; s++) {
        double a = now();
        if (tern_train_step(t, x + (size_t)s * 128, 128, y + (size_t)s * 128, 128, &info, &err)) {
            fprintf(stderr, "bench_train: step %d: %s\n", s + 1, err.msg);
            rc = 1;
        }
        double d = now() - a;
        if (s == 0)
            first = d;
        else if (d < best)
            best = d;
    }
    tern_train_free(t);
    free(x);
    free(y);
    if (rc)
        return 1;
    char core[64] = "?";
    int threads = 0, blas = 0;
    double torch = torch_step(src, core, sizeof core, &threads, &blas);
    printf("gpt2_train_host_load: %.1f at the start, %.1f at the end (1-minute load average; %ld CPUs)\n", load0,
           load_avg(), sysconf(_SC_NPROCESSORS_ONLN));
    printf("gpt2_train_sim_create_s: %.2f\n", create);
    printf("gpt2_train_sim_first_step_s: %.2f\n", first);
    printf("gpt2_train_sim_s: %.3f\n", best);
    printf("gpt2_train_torch_s: %.3f\n", torch);
    printf("gpt2_train_torch_openblas_core: %s\n", core);
    printf("gpt2_train_torch_threads: %d\n", threads);
    printf("gpt2_train_torch_blas_threads: %d\n", blas);
    if (torch > 0)
        printf("gpt2_train_sim_over_torch: %.2f\n", best / torch);
    else
        fprintf(stderr, "bench_train: the PyTorch step did not run (needs Debian's python3-torch)\n");
    return torch > 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    const char *src = TERN_SOURCE_DIR, *bin = TERN_BINARY_DIR;
    char dir[1100];
    snprintf(dir, sizeof dir, "%s/bench-train", bin);
    mkdir(dir, 0755);
    int only_t = argc > 1 && !strcmp(argv[1], "--timing-only"), only_f = argc > 1 && !strcmp(argv[1], "--functional");
    int rc = 0;
    if (!only_f)
        rc |= predicted(src, bin);
    if (!only_t)
        rc |= functional(src, bin);
    return rc;
}
