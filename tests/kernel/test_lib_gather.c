/* The kernel library's embedding lookup: bit-exact against the host lookup over ragged id counts (1 to 300,
 * crossing the 128-id tiles) and row widths (1 to 2050), fp32 and bf16 tables (with a cast on the way out),
 * ids as [n] and [n, 1], repeated ids and the first/last rows; both generations; an id out of range at run
 * time; and the build-time errors. */
#include <math.h>

#include "kernel_test_util.h"
#include "tern/kernel_lib.h"

static void run_case(const char *machine, unsigned N, unsigned D, unsigned V, tern_dtype tdt, tern_dtype odt,
                     int ids_2d)
{
    char name[160];
    snprintf(name, sizeof name, "embedding %s n %u d %u vocab %u %s->%s ids %s", machine, N, D, V, tern_dtype_name(tdt),
             tern_dtype_name(odt), ids_2d ? "[n,1]" : "[n]");
    TEST_BEGIN(name);
    tern_core_config cfg;
    tern_core *core = ktu_core(machine, &cfg);
    tern_kernel *k = NULL;
    tern_error err;
    CHECK_EQ_INT(tern_kernel_create(&cfg, "embedding", &k, &err), TERN_OK);
    tern_view table = tern_kernel_input2d(k, "table", tdt, V, D);
    uint64_t ishape[2] = {N, 1};
    tern_view ids = tern_kernel_hbm_tensor(k, "ids", TERN_KIO_INPUT, TERN_DTYPE_INT32, ids_2d ? 2 : 1, ishape);
    tern_view out = tern_kernel_output2d(k, "out", odt, N, D);
    tern_lib_embedding(k, out, table, ids);
    tern_status st = tern_kernel_status(k, &err);
    CHECK_MSG(st == TERN_OK, "build failed: %s", err.msg);
    if (!st) {
        st = tern_core_validate(core, tern_kernel_program(k), &err);
        CHECK_MSG(st == TERN_OK, "validate failed: %s", err.msg);
    }
    float *t = malloc(sizeof(float) * V * D), *y = malloc(sizeof(float) * N * D);
    int32_t *id = malloc(sizeof(int32_t) * N);
    ktu_fill(t, (size_t)V * D, tdt, 700 + V + D);
    uint64_t s = 42 + N;
    for (unsigned i = 0; i < N; i++)
        id[i] = (int32_t)(ktu_rng(&s) % V);
    id[0] = (int32_t)V - 1;
    if (N > 1)
        id[N - 1] = 0;
    if (N > 2)
        id[1] = id[0]; /* a repeated id */
    if (!st) {
        CHECK_EQ_INT(tern_kernel_write_f32(k, core, "table", t, (size_t)V * D, &err), TERN_OK);
        CHECK_EQ_INT(tern_kernel_write(k, core, "ids", id, sizeof(int32_t) * N, &err), TERN_OK);
        st = tern_kernel_run(k, core, NULL, &err);
        CHECK_MSG(st == TERN_OK, "run failed: %s", err.msg);
        CHECK_EQ_INT(tern_kernel_read_f32(k, core, "out", y, (size_t)N * D, &err), TERN_OK);
        size_t bad = 0;
        for (unsigned i = 0; i < N && !st; i++)
            for (unsigned d = 0; d < D; d++) {
                float want = tern_num_round_f32(odt, t[(size_t)id[i] * D + d], NULL, 0);
                bad += memcmp(&want, &y[(size_t)i * D + d], 4) != 0;
            }
        CHECK_MSG(bad == 0, "%zu of %u elements differ from table[ids]", bad, N * D);
    }
    free(t);
    free(y);
    free(id);
    tern_kernel_free(k);
    tern_core_free(core);
}

static void out_of_range(void)
{
    TEST_BEGIN("embedding id out of range at run time");
    tern_core_config cfg;
    tern_core *core = ktu_core("neuroncore-v2", &cfg);
    tern_kernel *k = NULL;
    tern_error err;
    tern_kernel_create(&cfg, "embedding", &k, &err);
    tern_view table = tern_kernel_input2d(k, "table", TERN_DTYPE_FP32, 10, 4);
    uint64_t n = 130;
    tern_view ids = tern_kernel_hbm_tensor(k, "ids", TERN_KIO_INPUT, TERN_DTYPE_INT32, 1, &n);
    tern_view out = tern_kernel_output2d(k, "out", TERN_DTYPE_FP32, 130, 4);
    tern_lib_embedding(k, out, table, ids);
    CHECK_EQ_INT(tern_kernel_status(k, &err), TERN_OK);
    int32_t id[130] = {0};
    id[129] = 10; /* second tile, partition 1 */
    float t[40] = {0};
    tern_kernel_write_f32(k, core, "table", t, 40, &err);
    tern_kernel_write(k, core, "ids", id, sizeof id, &err);
    CHECK(tern_kernel_run(k, core, NULL, &err) == TERN_ERR_RANGE);
    CHECK_STR_CONTAINS(err.msg, "index 10 at partition 1 outside the table's 10 rows");
    tern_kernel_free(k);
    tern_core_free(core);
}

static void errors(void)
{
    tern_core_config cfg;
    tern_error err;
    if (tern_core_config_load("neuroncore-v2", &cfg, &err)) {
        fprintf(stderr, "cannot load machine: %s\n", err.msg);
        exit(2);
    }
    tern_kernel *k = NULL;
    uint64_t n = 12;

    TEST_BEGIN("embedding error: ids count");
    tern_kernel_create(&cfg, "emb", &k, &err);
    tern_view table = tern_kernel_input2d(k, "table", TERN_DTYPE_FP32, 100, 16);
    tern_view ids = tern_kernel_hbm_tensor(k, "ids", TERN_KIO_INPUT, TERN_DTYPE_INT32, 1, &n);
    tern_view out = tern_kernel_output2d(k, "out", TERN_DTYPE_FP32, 13, 16);
    tern_lib_embedding(k, out, table, ids);
    CHECK(tern_kernel_status(k, &err) == TERN_ERR_INVALID);
    CHECK_STR_CONTAINS(err.msg, "embedding: ids must be [13] or [13, 1] (one per row of out [13, 16]), is rank 1 with 12");
    tern_kernel_free(k);

    TEST_BEGIN("embedding error: row width");
    tern_kernel_create(&cfg, "emb", &k, &err);
    table = tern_kernel_input2d(k, "table", TERN_DTYPE_FP32, 100, 16);
    ids = tern_kernel_hbm_tensor(k, "ids", TERN_KIO_INPUT, TERN_DTYPE_INT32, 1, &n);
    out = tern_kernel_output2d(k, "out", TERN_DTYPE_FP32, 12, 15);
    tern_lib_embedding(k, out, table, ids);
    CHECK(tern_kernel_status(k, &err) == TERN_ERR_INVALID);
    CHECK_STR_CONTAINS(err.msg, "embedding: table is [100, 16] but out rows have 15 elements");
    tern_kernel_free(k);

    TEST_BEGIN("embedding error: ids dtype");
    tern_kernel_create(&cfg, "emb", &k, &err);
    table = tern_kernel_input2d(k, "table", TERN_DTYPE_FP32, 100, 16);
    ids = tern_kernel_hbm_tensor(k, "ids", TERN_KIO_INPUT, TERN_DTYPE_FP32, 1, &n);
    out = tern_kernel_output2d(k, "out", TERN_DTYPE_FP32, 12, 16);
    tern_lib_embedding(k, out, table, ids);
    CHECK(tern_kernel_status(k, &err) == TERN_ERR_INVALID);
    CHECK_STR_CONTAINS(err.msg, "embedding: ids dtype fp32 must be int32");
    tern_kernel_free(k);

    TEST_BEGIN("embedding error: vocabulary beyond the gather's reach");
    tern_kernel_create(&cfg, "emb", &k, &err);
    table = tern_kernel_input2d(k, "table", TERN_DTYPE_BF16, 70000, 8);
    ids = tern_kernel_hbm_tensor(k, "ids", TERN_KIO_INPUT, TERN_DTYPE_INT32, 1, &n);
    out = tern_kernel_output2d(k, "out", TERN_DTYPE_BF16, 12, 8);
    tern_lib_embedding(k, out, table, ids);
    CHECK(tern_kernel_status(k, &err) == TERN_ERR_UNSUPPORTED);
    CHECK_STR_CONTAINS(err.msg, "embedding: table has 70000 rows");
    tern_kernel_free(k);
}

int main(void)
{
    run_case("neuroncore-v2", 1, 1, 1, TERN_DTYPE_FP32, TERN_DTYPE_FP32, 0);
    run_case("neuroncore-v2", 127, 7, 50, TERN_DTYPE_FP32, TERN_DTYPE_FP32, 0);
    run_case("neuroncore-v2", 129, 513, 1000, TERN_DTYPE_BF16, TERN_DTYPE_BF16, 1);
    run_case("neuroncore-v2", 300, 2050, 300, TERN_DTYPE_BF16, TERN_DTYPE_FP32, 0);
    run_case("neuroncore-v2", 260, 64, 65535, TERN_DTYPE_FP32, TERN_DTYPE_BF16, 1);
    run_case("neuroncore-v3", 200, 96, 777, TERN_DTYPE_BF16, TERN_DTYPE_BF16, 0);
    out_of_range();
    errors();
    return check_report();
}
