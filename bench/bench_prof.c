/* Profiler overhead, measured side by side in one run: the same program simulated without a profiler and with
 * one attached (trace file + summary + SVG), alternating, best of several repetitions each. Prints:
 *   prof_overhead: functional simulation of a 1024^3 BF16 GEMM (tern_lib_gemm, trn1), with / without
 *                  (target <= 1.30)
 *   prof_trace_bytes: size of that run's trace
 *   prof_overhead_timing_only: the NKI tutorial GEMM [4096,8192]@[8192,8192] in timing-only mode, where the
 *                  simulator does no arithmetic, so the profiler's per-event cost is most visible
 *   prof_timing_only_trace_bytes, prof_timing_only_events: that trace's size and slice count
 *   prof_overhead_timing_only_summary: the same with the summary only (no trace, no SVG) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tern/kernel.h"
#include "tern/kernel_lib.h"
#include "tern/prof.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void die(const char *what, const tern_error *err)
{
    fprintf(stderr, "bench_prof: %s: %s\n", what, err->msg);
    exit(1);
}

typedef struct {
    double seconds;
    long trace_bytes;
    uint64_t slices;
} run_result;

/* One run of k on a fresh core; with a profiler when `profile` (trace and SVG files when given). */
static run_result run_once(const tern_core_config *cfg, const tern_machine *m, const tern_kernel *k, tern_sim_mode mode,
                           int profile, const char *trace, const char *svg)
{
    tern_error err;
    tern_prof *p = NULL;
    if (profile) {
        tern_prof_opts o;
        tern_prof_opts_init(&o);
        tern_prof_opts_from_machine(m, &o);
        o.trace_path = trace;
        o.svg_path = svg;
        if (tern_prof_create(&o, &p, &err))
            die("profiler", &err);
    }
    tern_core_options co;
    memset(&co, 0, sizeof co);
    co.mode = mode;
    co.on_event = p ? tern_prof_event : NULL;
    co.event_ctx = p;
    tern_core *core = NULL;
    if (tern_core_create(cfg, &co, &core, &err))
        die("core", &err);
    if (mode == TERN_MODE_FUNCTIONAL) {
        for (size_t i = 0; i < tern_kernel_io_count(k); i++) {
            const tern_kio *io = tern_kernel_io(k, i);
            if (io->kind != TERN_KIO_INPUT)
                continue;
            uint8_t *buf = malloc(io->bytes);
            uint64_t s = 0x1234 + i;
            for (uint64_t j = 0; j < io->bytes; j += 2) { /* bf16 values in about [-0.5, 0.5) */
                s = s * 6364136223846793005ull + 1442695040888963407ull;
                buf[j] = (uint8_t)(s >> 40);
                buf[j + 1] = (uint8_t)(0x3E + ((s >> 60) & 1) * 0x80);
            }
            if (tern_kernel_write(k, core, io->name, buf, io->bytes, &err))
                die("input", &err);
            free(buf);
        }
    }
    tern_run_stats st;
    run_result r = {0, 0, 0};
    double t0 = now();
    if (tern_kernel_run(k, core, &st, &err))
        die("run", &err);
    if (p) {
        tern_prof_summary s;
        if (tern_prof_finish(p, &st, &s, &err))
            die("profiler finish", &err);
        r.slices = s.trace_slices;
    }
    r.seconds = now() - t0;
    if (trace) {
        struct stat sb;
        r.trace_bytes = stat(trace, &sb) == 0 ? (long)sb.st_size : -1;
    }
    tern_prof_free(p);
    tern_core_free(core);
    return r;
}

static tern_kernel *build_gemm(const tern_core_config *cfg, uint64_t M, uint64_t N, uint64_t K)
{
    tern_error err;
    tern_kernel *k = NULL;
    if (tern_kernel_create(cfg, "gemm", &k, &err))
        die("kernel", &err);
    tern_view lhsT = tern_kernel_input2d(k, "lhsT", TERN_DTYPE_BF16, K, M);
    tern_view rhs = tern_kernel_input2d(k, "rhs", TERN_DTYPE_BF16, K, N);
    tern_view out = tern_kernel_output2d(k, "out", TERN_DTYPE_BF16, M, N);
    tern_lib_gemm(k, out, lhsT, rhs, NULL);
    if (tern_kernel_status(k, &err))
        die("build gemm", &err);
    return k;
}

/* Best-of-reps ratio with / without, alternating so drift hits both equally. */
static double overhead(const tern_core_config *cfg, const tern_machine *m, const tern_kernel *k, tern_sim_mode mode,
                       int reps, const char *trace, const char *svg, run_result *with_out)
{
    double best_without = 1e30, best_with = 1e30;
    for (int i = 0; i < reps; i++) {
        run_result a = run_once(cfg, m, k, mode, 0, NULL, NULL);
        run_result b = run_once(cfg, m, k, mode, 1, trace, svg);
        if (a.seconds < best_without)
            best_without = a.seconds;
        if (b.seconds < best_with)
            best_with = b.seconds;
        *with_out = b;
        if (getenv("BENCH_PROF_VERBOSE"))
            fprintf(stderr, "without %.4f s, with %.4f s\n", a.seconds, b.seconds);
    }
    return best_with / best_without;
}

int main(void)
{
    tern_error err;
    tern_machine *m = NULL;
    if (tern_machine_load("trn1.2xlarge", &m, &err))
        die("machine", &err);
    tern_core_config cfg;
    if (tern_core_config_from_machine(m, &cfg, &err))
        die("config", &err);
    char dir[] = "/tmp/tern_bench_prof_XXXXXX";
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    char trace[128], svg[128];
    snprintf(trace, sizeof trace, "%s/trace.json", dir);
    snprintf(svg, sizeof svg, "%s/timeline.svg", dir);

    tern_kernel *k = build_gemm(&cfg, 1024, 1024, 1024);
    run_result w;
    double ov = overhead(&cfg, m, k, TERN_MODE_FUNCTIONAL, 5, trace, svg, &w);
    printf("prof_overhead: %.3f\n", ov);
    printf("prof_trace_bytes: %ld\n", w.trace_bytes);
    tern_kernel_free(k);

    k = build_gemm(&cfg, 4096, 8192, 8192);
    ov = overhead(&cfg, m, k, TERN_MODE_TIMING_ONLY, 3, trace, svg, &w);
    printf("prof_overhead_timing_only: %.3f\n", ov);
    printf("prof_timing_only_trace_bytes: %ld\n", w.trace_bytes);
    printf("prof_timing_only_events: %llu\n", (unsigned long long)w.slices);
    ov = overhead(&cfg, m, k, TERN_MODE_TIMING_ONLY, 3, NULL, NULL, &w);
    printf("prof_overhead_timing_only_summary: %.3f\n", ov);
    tern_kernel_free(k);

    unlink(trace);
    unlink(svg);
    rmdir(dir);
    tern_machine_free(m);
    return 0;
}
