/* tern_lib_gemm_multi_rows (the GEMM's lhsT tiles transposed on chip from a [M, K]) against the sequence the
 * compiler ran before for linear layers with run-time weights (tern_lib_transpose of a into an HBM lhsT, then
 * tern_lib_gemm_multi): the same bits, on v2 (the PE array multiplies by an identity: -0 becomes +0, an Inf or NaN
 * spreads over its 128-row piece) and v3 (transpose_pe), for ragged M, K and N (one K block and several, row blocks
 * and strips cut short, two outputs side by side), fp32 and bf16 inputs with -0, Inf and NaN among them; less HBM
 * traffic and less simulated time than the sequence; and the build-time errors. */
#include <math.h>
#include <string.h>

#include "kernel_test_util.h"
#include "tern/kernel_lib.h"

typedef struct {
    unsigned M, K, N0, N1; /* N1 = 0: one output */
    tern_dtype a, w, out;
} rows_case;

static tern_gemm_opts compiler_opts(void)
{
    tern_gemm_opts go;
    tern_gemm_opts_default(&go);
    go.acc_dtype = TERN_DTYPE_FP32;
    go.tiles_in_block_m = 8; /* lower_linear.c's matmul2d */
    return go;
}

/* One kernel computing the case either way; returns the core's HBM bytes and time through *stats. */
static tern_kernel *build(const rows_case *c, const tern_core_config *cfg, int rows, tern_error *err)
{
    tern_kernel *k = NULL;
    if (tern_kernel_create(cfg, "rows", &k, err))
        return NULL;
    unsigned n = c->N1 ? 2 : 1, N[2] = {c->N0, c->N1};
    tern_view a = tern_kernel_input2d(k, "a", c->a, c->M, c->K), w[2], y[2];
    for (unsigned j = 0; j < n; j++) {
        char wn[8], yn[8];
        snprintf(wn, sizeof wn, "w%u", j);
        snprintf(yn, sizeof yn, "y%u", j);
        w[j] = tern_kernel_input2d(k, wn, c->w, c->K, N[j]);
        y[j] = tern_kernel_output2d(k, yn, c->out, c->M, N[j]);
    }
    tern_gemm_opts go = compiler_opts();
    if (rows) {
        tern_lib_gemm_multi_rows(k, n, y, a, c->w, w, &go);
    } else {
        uint64_t kt[2] = {c->K, c->M};
        tern_view aT = tern_kernel_hbm_tensor(k, "aT", TERN_KIO_SCRATCH, c->w, 2, kt);
        tern_lib_transpose(k, aT, a);
        tern_lib_gemm_multi(k, n, y, aT, w, &go);
    }
    return k;
}

static void case_name(char *buf, size_t len, const char *machine, const rows_case *c)
{
    snprintf(buf, len, "gemm_rows == transpose+gemm %s %ux%ux(%u+%u) a %s w %s out %s", machine, c->M, c->K, c->N0,
             c->N1, tern_dtype_name(c->a), tern_dtype_name(c->w), tern_dtype_name(c->out));
}

static void same_bits(const char *machine, const rows_case *c, int faster)
{
    char name[200];
    case_name(name, sizeof name, machine, c);
    TEST_BEGIN(name);
    tern_core_config cfg;
    tern_core *core[2] = {ktu_core(machine, &cfg), ktu_core(machine, &cfg)};
    tern_error err;
    unsigned n = c->N1 ? 2 : 1, N[2] = {c->N0, c->N1};
    float *xa = malloc(sizeof(float) * c->M * c->K), *xw[2];
    ktu_fill(xa, (size_t)c->M * c->K, c->a, 3 + c->M);
    /* special values: -0 (a row of them, and single ones), an Inf and a NaN in separate 128-row pieces */
    for (unsigned kk = 0; kk < c->K; kk++)
        xa[(size_t)5 * c->K + kk] = -0.0f;
    xa[(size_t)7 * c->K + 3] = -0.0f;
    xa[(size_t)(c->M - 1) * c->K + c->K / 2] = INFINITY;
    if (c->M > 200)
        xa[(size_t)200 * c->K + 1] = NAN;
    for (unsigned j = 0; j < n; j++) {
        xw[j] = malloc(sizeof(float) * c->K * N[j]);
        ktu_fill(xw[j], (size_t)c->K * N[j], c->w, 17 + j);
    }
    unsigned char *o[2][2] = {{NULL, NULL}, {NULL, NULL}};
    tern_run_stats st[2];
    memset(st, 0, sizeof st);
    for (int r = 0; r < 2; r++) {
        tern_kernel *k = build(c, &cfg, r, &err);
        CHECK_MSG(k && tern_kernel_status(k, &err) == TERN_OK, "build failed: %s", err.msg);
        if (!k || tern_kernel_status(k, &err) != TERN_OK) {
            tern_kernel_free(k);
            continue;
        }
        CHECK_EQ_INT(tern_kernel_write_f32(k, core[r], "a", xa, (size_t)c->M * c->K, &err), TERN_OK);
        for (unsigned j = 0; j < n; j++) {
            char wn[8], yn[8];
            snprintf(wn, sizeof wn, "w%u", j);
            snprintf(yn, sizeof yn, "y%u", j);
            CHECK_EQ_INT(tern_kernel_write_f32(k, core[r], wn, xw[j], (size_t)c->K * N[j], &err), TERN_OK);
        }
        tern_status s = tern_kernel_run(k, core[r], &st[r], &err);
        CHECK_MSG(s == TERN_OK, "run failed: %s", err.msg);
        for (unsigned j = 0; j < n && !s; j++) {
            char yn[8];
            snprintf(yn, sizeof yn, "y%u", j);
            size_t bytes = (size_t)c->M * N[j] * tern_dtype_size(c->out);
            o[r][j] = malloc(bytes);
            CHECK_EQ_INT(tern_kernel_read(k, core[r], yn, o[r][j], bytes, &err), TERN_OK);
        }
        tern_kernel_free(k);
    }
    for (unsigned j = 0; j < n; j++) {
        if (!o[0][j] || !o[1][j])
            continue;
        size_t es = tern_dtype_size(c->out), cnt = (size_t)c->M * N[j], diff = 0, first = 0, nan = 0;
        for (size_t i = 0; i < cnt; i++) {
            if (memcmp(o[0][j] + i * es, o[1][j] + i * es, es) && !diff++)
                first = i;
            if (c->out == TERN_DTYPE_FP32) {
                float v;
                memcpy(&v, o[1][j] + i * es, sizeof v);
                nan += isnan(v);
            }
        }
        CHECK_MSG(diff == 0, "output %u: %zu of %zu elements differ (first at row %zu, column %zu)", j, diff, cnt,
                  first / N[j], first % N[j]);
        CHECK_MSG(c->out != TERN_DTYPE_FP32 || c->M <= 200 || nan > 0, "output %u: no NaN from the NaN input", j);
    }
    if (faster) {
        CHECK_MSG(st[1].hbm_bytes < st[0].hbm_bytes, "HBM bytes %llu on chip vs %llu through HBM",
                  (unsigned long long)st[1].hbm_bytes, (unsigned long long)st[0].hbm_bytes);
        CHECK_MSG(st[1].time_ps < st[0].time_ps, "time %.3f us on chip vs %.3f us through HBM", st[1].time_ps / 1e6,
                  st[0].time_ps / 1e6);
        printf("  %s: %.3f -> %.3f us, HBM %.2f -> %.2f MB\n", machine, st[0].time_ps / 1e6, st[1].time_ps / 1e6,
               st[0].hbm_bytes / 1e6, st[1].hbm_bytes / 1e6);
    }
    for (int r = 0; r < 2; r++)
        for (unsigned j = 0; j < n; j++)
            free(o[r][j]);
    for (unsigned j = 0; j < n; j++)
        free(xw[j]);
    free(xa);
    tern_core_free(core[0]);
    tern_core_free(core[1]);
}

static void expect_error(const char *name, tern_dtype adt, unsigned arank, const char *want)
{
    TEST_BEGIN(name);
    tern_core_config cfg;
    tern_core *core = ktu_core("neuroncore-v2", &cfg);
    tern_kernel *k = NULL;
    tern_error err;
    CHECK_EQ_INT(tern_kernel_create(&cfg, "rows_err", &k, &err), TERN_OK);
    uint64_t shape[3] = {2, 64, 32};
    tern_view a = tern_kernel_hbm_tensor(k, "a", TERN_KIO_INPUT, adt, arank, arank == 3 ? shape : &shape[1]);
    tern_view w = tern_kernel_input2d(k, "w", TERN_DTYPE_BF16, 32, 16);
    tern_view y = tern_kernel_output2d(k, "y", TERN_DTYPE_FP32, 64, 16);
    tern_gemm_opts go = compiler_opts();
    tern_lib_gemm_multi_rows(k, 1, &y, a, TERN_DTYPE_BF16, &w, &go);
    CHECK(tern_kernel_status(k, &err) != TERN_OK);
    CHECK_STR_CONTAINS(err.msg, want);
    tern_kernel_free(k);
    tern_core_free(core);
}

int main(void)
{
    const tern_dtype F = TERN_DTYPE_FP32, B = TERN_DTYPE_BF16;
    const rows_case cases[] = {
        {1100, 200, 700, 0, F, B, F},    /* one K block of two tiles; row blocks and strips cut short */
        {300, 2500, 300, 400, B, B, F},  /* three K blocks, the last cut short; two outputs */
        {129, 130, 64, 0, F, F, F},      /* fp32 matmuls */
        {2048, 1024, 128, 0, B, B, B},   /* BF16 output */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        same_bits("neuroncore-v2", &cases[i], 0);
        same_bits("neuroncore-v3", &cases[i], 0);
    }
    /* a backward's dY [4096, 4096] x W^T [4096, 128] (an 8B model's attention output projection at TP=32), cut
     * to 1,024 rows */
    const rows_case big = {1024, 4096, 128, 0, B, B, F};
    same_bits("neuroncore-v2", &big, 1);
    expect_error("gemm_rows error: rank", B, 3, "a must be 2-D");
    expect_error("gemm_rows error: dtype", TERN_DTYPE_INT32, 2, "a must be 2-D in a TensorE dtype");
    return check_report();
}
