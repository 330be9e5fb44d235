/* The host GEMM baselines of bench_sim, in a process of their own so that the caller can set OPENBLAS_CORETYPE and
 * the thread counts for the baseline alone (OpenBLAS reads them when it loads). For an N x N x N product it prints:
 *   host_sgemm_s, host_openblas_core, host_openblas_threads   OpenBLAS cblas_sgemm (fp32)
 *   host_onednn_f32_s, host_onednn_f32_impl                    oneDNN's fp32 matmul
 *   host_bf16_gemm_s, host_bf16_impl, host_onednn_isa          oneDNN's BF16 matmul (bf16 x bf16 -> bf16, fp32
 *                                                              accumulation: what the simulated GEMM computes)
 * or `host_bf16_gemm: unavailable (...)` where oneDNN has no BF16 matmul for this CPU (it needs AVX-512).
 * Built only with Debian's libdnnl-dev; the best of REPS runs. Usage: host_gemm N [REPS] */
#include <cblas.h>
#include <oneapi/dnnl/dnnl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

char *openblas_get_corename(void);
int openblas_get_num_threads(void);

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static const char *isa_name(dnnl_cpu_isa_t isa)
{
    switch ((int)isa) {
    case dnnl_cpu_isa_sse41: return "sse41";
    case dnnl_cpu_isa_avx: return "avx";
    case dnnl_cpu_isa_avx2: return "avx2";
    case dnnl_cpu_isa_avx512_core: return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
    default: return "other";
    }
}

/* One oneDNN matmul of n x n operands of type dt into dst type ddt, best of reps; <0 if oneDNN cannot make it. */
static double onednn_matmul(int n, int reps, dnnl_data_type_t dt, dnnl_data_type_t ddt, const char **impl)
{
    dnnl_engine_t eng;
    dnnl_stream_t st;
    if (dnnl_engine_create(&eng, dnnl_cpu, 0) != dnnl_success)
        return -1;
    dnnl_stream_create(&st, eng, dnnl_stream_default_flags);
    dnnl_memory_desc_t a, b, c;
    dnnl_dims_t d = {n, n};
    dnnl_memory_desc_init_by_tag(&a, 2, d, dt, dnnl_ab);
    dnnl_memory_desc_init_by_tag(&b, 2, d, dt, dnnl_ab);
    dnnl_memory_desc_init_by_tag(&c, 2, d, ddt, dnnl_ab);
    dnnl_matmul_desc_t md;
    dnnl_primitive_desc_t pd;
    double best = -1;
    if (dnnl_matmul_desc_init(&md, &a, &b, NULL, &c) != dnnl_success ||
        dnnl_primitive_desc_create(&pd, &md, NULL, eng, NULL) != dnnl_success) {
        *impl = "unimplemented";
        goto out;
    }
    dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, impl);
    dnnl_primitive_t p;
    dnnl_primitive_create(&p, pd);
    dnnl_memory_t ma, mb, mc;
    dnnl_memory_create(&ma, &a, eng, DNNL_MEMORY_ALLOCATE);
    dnnl_memory_create(&mb, &b, eng, DNNL_MEMORY_ALLOCATE);
    dnnl_memory_create(&mc, &c, eng, DNNL_MEMORY_ALLOCATE);
    /* operands: small values (bit patterns of bf16/fp32 numbers in [-0.5, 0.5)) */
    void *pa, *pb;
    dnnl_memory_get_data_handle(ma, &pa);
    dnnl_memory_get_data_handle(mb, &pb);
    size_t es = dt == dnnl_bf16 ? 2 : 4, cnt = (size_t)n * n;
    uint64_t s = 42;
    for (size_t i = 0; i < cnt; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        float f = (float)((s >> 40) & 0xFFFF) / 65536.0f - 0.5f;
        uint32_t u;
        memcpy(&u, &f, 4);
        if (es == 2) {
            uint16_t h = (uint16_t)(u >> 16);
            memcpy((char *)pa + 2 * i, &h, 2);
            memcpy((char *)pb + 2 * i, &h, 2);
        } else {
            memcpy((char *)pa + 4 * i, &f, 4);
            memcpy((char *)pb + 4 * i, &f, 4);
        }
    }
    dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc}};
    dnnl_primitive_execute(p, st, 3, args); /* warm-up */
    dnnl_stream_wait(st);
    for (int r = 0; r < reps; r++) {
        double t = now();
        dnnl_primitive_execute(p, st, 3, args);
        dnnl_stream_wait(st);
        t = now() - t;
        if (best < 0 || t < best)
            best = t;
    }
    dnnl_memory_destroy(ma);
    dnnl_memory_destroy(mb);
    dnnl_memory_destroy(mc);
    dnnl_primitive_destroy(p);
out:
    dnnl_stream_destroy(st);
    dnnl_engine_destroy(eng);
    return best;
}

int main(int argc, char **argv)
{
    const int n = argc > 1 ? atoi(argv[1]) : 2048, reps = argc > 2 ? atoi(argv[2]) : 3;
    if (n <= 0 || n > 16384 || reps <= 0) {
        fprintf(stderr, "host_gemm: N must be 1..16384 and REPS > 0 (got %s %s)\n", argc > 1 ? argv[1] : "",
                argc > 2 ? argv[2] : "");
        return 2;
    }
    float *a = malloc(sizeof(float) * (size_t)n * n), *b = malloc(sizeof(float) * (size_t)n * n),
          *c = malloc(sizeof(float) * (size_t)n * n);
    if (!a || !b || !c)
        return 1;
    uint64_t s = 42;
    for (size_t i = 0; i < (size_t)n * n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        a[i] = (float)((s >> 40) & 0xFFFF) / 65536.0f - 0.5f;
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        b[i] = (float)((s >> 40) & 0xFFFF) / 65536.0f - 0.5f;
    }
    double host = 1e30;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
    for (int r = 0; r < reps; r++) {
        double t = now();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
        t = now() - t;
        if (t < host)
            host = t;
    }
    printf("host_sgemm_s: %.4f\n", host);
    printf("host_openblas_core: %s\n", openblas_get_corename());
    printf("host_openblas_threads: %d\n", openblas_get_num_threads());
    free(a);
    free(b);
    free(c);
    const char *impl = "";
    double f32 = onednn_matmul(n, reps, dnnl_f32, dnnl_f32, &impl);
    if (f32 > 0)
        printf("host_onednn_f32_s: %.4f\nhost_onednn_f32_impl: %s\n", f32, impl);
    double bf = onednn_matmul(n, reps, dnnl_bf16, dnnl_bf16, &impl);
    printf("host_onednn_isa: %s\n", isa_name(dnnl_get_effective_cpu_isa()));
    if (bf > 0)
        printf("host_bf16_gemm_s: %.4f\nhost_bf16_impl: %s\n", bf, impl);
    else
        printf("host_bf16_gemm: unavailable (oneDNN %s: no BF16 matmul for this CPU's ISA)\n", impl);
    return 0;
}
