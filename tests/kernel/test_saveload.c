/* A built kernel saves as a program file (binary and assembly), reloads, and gives bit-identical results; the
 * `tern asm` / `tern disasm` commands round-trip it; loaded kernels refuse to be extended; bad files are named. */
#include <unistd.h>

#include "kernel_test_util.h"
#include "tern/kernel_lib.h"

static void run_and_read(const tern_kernel *k, const char *machine, const float *a, const float *b, float *y,
                         size_t na, size_t nb, size_t ny)
{
    tern_core_config cfg;
    tern_core *core = ktu_core(machine, &cfg);
    tern_error err;
    CHECK_EQ_INT(tern_kernel_write_f32(k, core, "lhsT", a, na, &err), TERN_OK);
    CHECK_EQ_INT(tern_kernel_write_f32(k, core, "rhs", b, nb, &err), TERN_OK);
    tern_status st = tern_kernel_run(k, core, NULL, &err);
    CHECK_MSG(st == TERN_OK, "run: %s", err.msg);
    CHECK_EQ_INT(tern_kernel_read_f32(k, core, "out", y, ny, &err), TERN_OK);
    tern_core_free(core);
}

int main(void)
{
    const unsigned M = 200, N = 700, K = 300;
    tern_core_config cfg;
    tern_error err;
    tern_core_config_load("neuroncore-v2", &cfg, &err);
    tern_kernel *k = NULL;
    tern_kernel_create(&cfg, "gemm", &k, &err);
    tern_view lhsT = tern_kernel_input2d(k, "lhsT", TERN_DTYPE_BF16, K, M);
    tern_view rhs = tern_kernel_input2d(k, "rhs", TERN_DTYPE_BF16, K, N);
    tern_view out = tern_kernel_output2d(k, "out", TERN_DTYPE_FP32, M, N);
    tern_lib_gemm(k, out, lhsT, rhs, NULL);
    TEST_BEGIN("kernel builds");
    CHECK_EQ_INT(tern_kernel_status(k, &err), TERN_OK);

    float *a = malloc(sizeof(float) * K * M), *b = malloc(sizeof(float) * K * N);
    float *y0 = malloc(sizeof(float) * M * N), *y1 = malloc(sizeof(float) * M * N);
    ktu_fill(a, (size_t)K * M, TERN_DTYPE_BF16, 11);
    ktu_fill(b, (size_t)K * N, TERN_DTYPE_BF16, 12);
    run_and_read(k, "neuroncore-v2", a, b, y0, (size_t)K * M, (size_t)K * N, (size_t)M * N);

    char bin[64], txt[64], txt2[64], bin2[64];
    snprintf(bin, sizeof bin, "/tmp/tern_saveload_%d.tprog", (int)getpid());
    snprintf(txt, sizeof txt, "/tmp/tern_saveload_%d.s", (int)getpid());
    snprintf(txt2, sizeof txt2, "/tmp/tern_saveload_%d_b.s", (int)getpid());
    snprintf(bin2, sizeof bin2, "/tmp/tern_saveload_%d_b.tprog", (int)getpid());

    TEST_BEGIN("save as binary and as assembly");
    CHECK_EQ_INT(tern_kernel_save(k, bin, &err), TERN_OK);
    CHECK_EQ_INT(tern_kernel_save(k, txt, &err), TERN_OK);

    const char *paths[2] = {bin, txt};
    for (int i = 0; i < 2; i++) {
        TEST_BEGIN(i ? "reloaded assembly gives identical results" : "reloaded binary gives identical results");
        tern_kernel *r = NULL;
        tern_status st = tern_kernel_open(&cfg, paths[i], &r, &err);
        CHECK_MSG(st == TERN_OK, "open: %s", err.msg);
        if (st)
            continue;
        CHECK(tern_program_equal(tern_kernel_program(k), tern_kernel_program(r), NULL, 0));
        CHECK_EQ_INT(tern_kernel_io_count(r), 3);
        const tern_kio *io = tern_kernel_io_find(r, "out");
        CHECK(io && io->kind == TERN_KIO_OUTPUT && io->shape[0] == M && io->shape[1] == N);
        memset(y1, 0, sizeof(float) * M * N);
        run_and_read(r, "neuroncore-v2", a, b, y1, (size_t)K * M, (size_t)K * N, (size_t)M * N);
        CHECK(memcmp(y0, y1, sizeof(float) * M * N) == 0);
        TEST_BEGIN("a loaded kernel cannot be extended");
        tern_kernel_sbuf(r, TERN_DTYPE_FP32, 128, 4, "extra");
        CHECK(tern_kernel_status(r, &err) != TERN_OK);
        CHECK_STR_CONTAINS(err.msg, "loaded from a program and cannot be extended");
        tern_kernel_free(r);
    }

    TEST_BEGIN("tern disasm and tern asm round-trip the saved program byte for byte");
    {
        char cmd[1024];
        const char *tern = getenv("TERN_BIN") ? getenv("TERN_BIN") : "build/tern"; /* set by CTest */
        snprintf(cmd, sizeof cmd, "%s disasm %s -o %s && %s asm %s -o %s && cmp -s %s %s", tern, bin, txt2, tern, txt2,
                 bin2, bin, bin2);
        CHECK_MSG(system(cmd) == 0, "command failed: %s", cmd);
    }

    TEST_BEGIN("a corrupt program file is refused with its name");
    {
        FILE *f = fopen(bin2, "r+b");
        CHECK(f != NULL);
        if (f) {
            fseek(f, 200, SEEK_SET);
            fputc(0x5A, f);
            fclose(f);
        }
        tern_kernel *r = NULL;
        CHECK(tern_kernel_open(&cfg, bin2, &r, &err) != TERN_OK);
        CHECK_STR_CONTAINS(err.msg, bin2);
        CHECK_STR_CONTAINS(err.msg, "program decode: offset");
        CHECK(r == NULL);
        CHECK(tern_kernel_open(&cfg, "/nonexistent/x.tprog", &r, &err) != TERN_OK);
        CHECK_STR_CONTAINS(err.msg, "loading /nonexistent/x.tprog: cannot open");
    }

    TEST_BEGIN("a program too large for the machine's HBM is refused");
    {
        tern_core_config small = cfg;
        small.hbm_bytes = 1 << 20;
        tern_kernel *r = NULL;
        CHECK(tern_kernel_open(&small, bin, &r, &err) != TERN_OK);
        CHECK_STR_CONTAINS(err.msg, "does not fit the 1048576 bytes of HBM");
    }
    remove(bin);
    remove(txt);
    remove(txt2);
    remove(bin2);
    free(a);
    free(b);
    free(y0);
    free(y1);
    tern_kernel_free(k);
    return check_report();
}
