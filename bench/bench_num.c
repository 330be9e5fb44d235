/* Benchmarks of the num layer's bulk conversions on one core: 16 M elements (64 MiB of fp32, far beyond L2 and
 * most L3s), best of 7 runs, reported in GB/s of SOURCE bytes (fp32 -> x counts 4 bytes per element, bf16 -> fp32
 * counts 2). Each figure is printed for the dispatched SIMD level and, as a side-by-side ratio baseline, for the
 * portable path (suffix _portable). Then the text conversions of ONNX's string Cast (numpy-exact
 * tern_f32_format / tern_f32_parse) in millions of values per second, beside the C library's snprintf("%.9g") and
 * strtod on the same values as the baseline (num_text_format_over_snprintf, num_text_parse_over_strtod: > 1 means
 * tern is faster). Output: `name: value` lines only. */
#include "tern/num.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { N = 16 << 20, REPS = 7 };

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double bench_from(tern_simd lvl, tern_dtype t, const float *src, void *dst, const tern_convert_opts *o)
{
    double best = 1e30;
    for (int r = 0; r < REPS; r++) {
        double t0 = now();
        if (tern_convert_from_f32_simd(lvl, t, dst, src, N, o, NULL) != TERN_OK)
            return 0;
        double dt = now() - t0;
        best = dt < best ? dt : best;
    }
    return 4.0 * N / best / 1e9;
}

static double bench_to(tern_simd lvl, tern_dtype t, const void *src, float *dst)
{
    double best = 1e30;
    for (int r = 0; r < REPS; r++) {
        double t0 = now();
        if (tern_convert_to_f32_simd(lvl, dst, t, src, N, NULL) != TERN_OK)
            return 0;
        double dt = now() - t0;
        best = dt < best ? dt : best;
    }
    return (double)tern_dtype_size(t) * N / best / 1e9;
}

enum { TEXT_N = 1 << 20 };

/* Millions of values per second: best of 3 passes over TEXT_N values. kind 0: tern_f32_format, 1: snprintf %.9g,
 * 2: tern_f32_parse, 3: strtod (texts from tern_f32_format). */
static double bench_text(int kind, const float *src, char (*texts)[TERN_F32_TEXT_MAX], float *out)
{
    double best = 1e30;
    for (int r = 0; r < 3; r++) {
        double t = now();
        for (size_t i = 0; i < TEXT_N; i++) {
            switch (kind) {
            case 0: tern_f32_format(src[i], texts[i]); break;
            case 1: snprintf(texts[i], TERN_F32_TEXT_MAX, "%.9g", (double)src[i]); break;
            case 2: tern_f32_parse(texts[i], strlen(texts[i]), &out[i]); break;
            default: out[i] = (float)strtod(texts[i], NULL); break;
            }
        }
        t = now() - t;
        best = t < best ? t : best;
    }
    return TEXT_N / best * 1e-6;
}

int main(void)
{
    float *src = malloc(sizeof(float) * N), *back = malloc(sizeof(float) * N);
    void *dst = malloc(sizeof(float) * N);
    if (!src || !back || !dst)
        return 1;
    uint64_t s = 88172645463325252ull;
    for (size_t i = 0; i < N; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        src[i] = (float)((double)(int64_t)s / 9.2e18) * 100.0f;
    }
    memset(dst, 0, sizeof(float) * N);
    memset(back, 0, sizeof(float) * N);
    const tern_convert_opts rne = TERN_CONVERT_OPTS_DEFAULT;
    const tern_convert_opts sr = {TERN_ROUND_STOCHASTIC, TERN_OVERFLOW_INF, 1, 0};
    const struct {
        const char *name;
        tern_dtype t;
        const tern_convert_opts *o;
    } from[] = {
        {"f32_to_bf16_rne", TERN_DTYPE_BF16, &rne},      {"f32_to_bf16_sr", TERN_DTYPE_BF16, &sr},
        {"f32_to_fp16_rne", TERN_DTYPE_FP16, &rne},      {"f32_to_fp16_sr", TERN_DTYPE_FP16, &sr},
        {"f32_to_fp8_e4m3_rne", TERN_DTYPE_FP8_E4M3, &rne}, {"f32_to_fp8_e4m3_sr", TERN_DTYPE_FP8_E4M3, &sr},
        {"f32_to_fp8_e5m2_rne", TERN_DTYPE_FP8_E5M2, &rne},
    };
    printf("num_simd_level: %s\n", tern_num_simd_level());
    for (size_t k = 0; k < sizeof from / sizeof from[0]; k++) {
        double simd = bench_from(TERN_SIMD_AUTO, from[k].t, src, dst, from[k].o);
        double port = bench_from(TERN_SIMD_PORTABLE, from[k].t, src, dst, from[k].o);
        printf("num_%s_gbps: %.2f\n", from[k].name, simd);
        printf("num_%s_portable_gbps: %.2f\n", from[k].name, port);
        if (tern_num_simd_supported(TERN_SIMD_AVX2) && k < 2)
            printf("num_%s_avx2_gbps: %.2f\n", from[k].name, bench_from(TERN_SIMD_AVX2, from[k].t, src, dst, from[k].o));
    }
    tern_convert_from_f32(TERN_DTYPE_BF16, dst, src, N, NULL, NULL);
    printf("num_bf16_to_f32_gbps: %.2f\n", bench_to(TERN_SIMD_AUTO, TERN_DTYPE_BF16, dst, back));
    printf("num_bf16_to_f32_portable_gbps: %.2f\n", bench_to(TERN_SIMD_PORTABLE, TERN_DTYPE_BF16, dst, back));
    tern_convert_from_f32(TERN_DTYPE_FP16, dst, src, N, NULL, NULL);
    printf("num_fp16_to_f32_gbps: %.2f\n", bench_to(TERN_SIMD_AUTO, TERN_DTYPE_FP16, dst, back));
    tern_convert_from_f32(TERN_DTYPE_FP8_E4M3, dst, src, N, NULL, NULL);
    printf("num_fp8_e4m3_to_f32_gbps: %.2f\n", bench_to(TERN_SIMD_AUTO, TERN_DTYPE_FP8_E4M3, dst, back));
    char(*texts)[TERN_F32_TEXT_MAX] = malloc(sizeof *texts * TEXT_N);
    if (texts) {
        double fmt = bench_text(0, src, texts, back), snp = bench_text(1, src, texts, back);
        bench_text(0, src, texts, back); /* parse what tern formats */
        double prs = bench_text(2, src, texts, back), std = bench_text(3, src, texts, back);
        printf("num_text_format_mvals: %.2f\n", fmt);
        printf("num_text_format_over_snprintf: %.2f\n", fmt / snp);
        printf("num_text_parse_mvals: %.2f\n", prs);
        printf("num_text_parse_over_strtod: %.2f\n", prs / std);
        free(texts);
    }
    free(src);
    free(back);
    free(dst);
    return 0;
}
