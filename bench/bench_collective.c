/* Benchmarks of the fabric and collectives (issue 13's performance figures, docs/multichip.md): a timing-only
 * all-reduce of 1 GiB over the 256 ranks of the Trn2 UltraServer (host seconds and the process's peak memory,
 * measured first so nothing else has raised it), the whole 8 B..1 GiB timing-only sweep over 2 x trn1.32xlarge
 * (64 ranks), and a functional fp32 all-reduce of 64 MiB over the 32 cores of one trn1.32xlarge: bytes the host
 * read and wrote per second beside a memcpy of the same buffers measured in the same run (a memcpy counts its
 * read and its write). Output: `name: value` lines only. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "tern/collective.h"
#include "tern/fabric.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double peak_mib(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss / 1024.0;
}

static tern_fabric *load(const char *spec)
{
    tern_fabric_opts o = {0, 0, 0};
    tern_fabric *f;
    tern_error err;
    if (tern_fabric_load(spec, &o, &f, &err)) {
        fprintf(stderr, "bench_collective: %s\n", err.msg);
        exit(1);
    }
    return f;
}

static uint64_t time_one(tern_fabric *f, uint64_t bytes)
{
    tern_coll_desc d = {TERN_COLL_ALL_REDUCE, TERN_REDUCE_SUM, TERN_DTYPE_FP32, bytes / 4, TERN_ALGO_AUTO, NULL, 0, 0,
                        NULL, 0, NULL, NULL, NULL, 0};
    tern_coll_result res;
    tern_error err;
    if (tern_collective_time(f, &d, &res, &err)) {
        fprintf(stderr, "bench_collective: %s\n", err.msg);
        exit(1);
    }
    return res.time_ps;
}

int main(void)
{
    /* 1. the UltraServer, 1 GiB, timing-only */
    tern_fabric *f = load("trn2-ultraserver");
    double t0 = now();
    uint64_t ps = time_one(f, 1ull << 30);
    double host = now() - t0;
    printf("collective_ultraserver_ranks: %u\n", tern_fabric_ranks(f));
    printf("collective_ultraserver_allreduce_1GiB_predicted_us: %.1f\n", (double)ps * 1e-6);
    printf("collective_ultraserver_allreduce_1GiB_host_s: %.3f\n", host);
    printf("collective_ultraserver_allreduce_1GiB_peak_rss_mib: %.1f\n", peak_mib());
    tern_fabric_free(f);

    /* 2. 2 x trn1.32xlarge, the whole sweep */
    f = load("2xtrn1.32xlarge");
    t0 = now();
    uint64_t sum = 0;
    for (uint64_t b = 8; b <= (1ull << 30); b *= 2)
        sum += time_one(f, b);
    host = now() - t0;
    printf("collective_2xtrn1_sweep_8B_1GiB_host_s: %.3f\n", host);
    printf("collective_2xtrn1_allreduce_1GiB_predicted_us: %.1f\n", (double)time_one(f, 1ull << 30) * 1e-6);
    (void)sum;
    tern_fabric_free(f);

    /* 3. functional 64 MiB fp32 over 32 cores vs memcpy */
    f = load("trn1.32xlarge");
    unsigned R = tern_fabric_ranks(f);
    uint64_t bytes = 64ull << 20;
    void **in = calloc(R, sizeof *in), **out = calloc(R, sizeof *out);
    for (unsigned r = 0; r < R; r++) {
        in[r] = malloc(bytes);
        out[r] = malloc(bytes);
        if (!in[r] || !out[r]) {
            fprintf(stderr, "bench_collective: out of memory\n");
            return 1;
        }
        float *p = in[r];
        for (uint64_t i = 0; i < bytes / 4; i++)
            p[i] = (float)((i + r) % 17) - 8.0f;
        memset(out[r], 0, bytes);
    }
    double best_mc = 1e30;
    for (int rep = 0; rep < 3; rep++) {
        t0 = now();
        for (unsigned r = 0; r < R; r++)
            memcpy(out[r], in[r], bytes);
        double t = now() - t0;
        if (t < best_mc)
            best_mc = t;
    }
    double memcpy_bps = 2.0 * (double)bytes * R / best_mc;
    tern_coll_desc d = {TERN_COLL_ALL_REDUCE, TERN_REDUCE_SUM, TERN_DTYPE_FP32, bytes / 4, TERN_ALGO_AUTO, NULL, 0, 0,
                        NULL, 0, NULL, NULL, NULL, 0};
    tern_coll_result res;
    tern_error err;
    double best = 1e30;
    for (int rep = 0; rep < 2; rep++) {
        t0 = now();
        if (tern_collective_run(f, &d, (const void *const *)in, out, &res, &err)) {
            fprintf(stderr, "bench_collective: %s\n", err.msg);
            return 1;
        }
        double t = now() - t0;
        if (t < best)
            best = t;
    }
    double coll_bps = (double)res.host_bytes / best;
    printf("collective_functional_trn1_32cores_64MiB_host_s: %.3f\n", best);
    printf("collective_functional_trn1_32cores_64MiB_host_gbps: %.2f\n", coll_bps / 1e9);
    printf("collective_memcpy_gbps: %.2f\n", memcpy_bps / 1e9);
    printf("collective_functional_over_memcpy: %.2f\n", coll_bps / memcpy_bps);
    for (unsigned r = 0; r < R; r++) {
        free(in[r]);
        free(out[r]);
    }
    free(in);
    free(out);
    tern_fabric_free(f);
    return 0;
}
