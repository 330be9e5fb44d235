/* Saving streams an executable's constants from memory instead of encoding the whole file first: the saved file
 * must be byte for byte what tern_exe_encode makes (constants of sizes that need padding, metadata of an odd
 * length, one and two cores), and load back (loading reads each constant straight into its buffer; a damaged or
 * truncated file is refused with the decoder's message). tern_exe_from_kernels_move (the compiler's path: the kernels'
 * constant data moves into the executable) must make the same executable as the copying tern_exe_from_kernels,
 * with the same kernel on both cores too (the first core copies, the last takes). */
#include <unistd.h>

#include "check.h"
#include "tern/kernel.h"
#include "tern/runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static tern_kernel *build(const tern_core_config *cfg)
{
    tern_error err;
    tern_kernel *k = NULL;
    tern_kernel_create(cfg, "copy", &k, &err);
    tern_view x = tern_kernel_input2d(k, "x", TERN_DTYPE_FP32, 4, 8);
    tern_view y = tern_kernel_output2d(k, "y", TERN_DTYPE_FP32, 4, 8);
    const float a[3] = {1.0f, -2.0f, 0.5f};
    const uint8_t c[5] = {1, 2, 3, 4, 5};
    float d[16];
    for (int i = 0; i < 16; i++)
        d[i] = (float)i * 0.25f;
    tern_kernel_constant(k, "a", TERN_DTYPE_FP32, 2, (uint64_t[]){1, 3}, a);  /* 12 bytes: 4 of padding */
    tern_kernel_constant(k, "c", TERN_DTYPE_UINT8, 2, (uint64_t[]){1, 5}, c); /* 5 bytes: 3 of padding */
    tern_kernel_constant(k, "d", TERN_DTYPE_FP32, 2, (uint64_t[]){4, 4}, d);
    tern_kernel_dma_copy(k, y, x, -1);
    return k;
}

static uint8_t *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    rewind(f);
    uint8_t *b = malloc(len > 0 ? (size_t)len : 1);
    *n = b ? fread(b, 1, (size_t)len, f) : 0;
    fclose(f);
    return b;
}

static void same_file(const tern_exe *x, const char *path, const char *what)
{
    tern_error err;
    uint8_t *enc = NULL;
    size_t n = 0, m = 0;
    CHECK_EQ_INT(tern_exe_encode(x, &enc, &n, &err), TERN_OK);
    CHECK_EQ_INT(tern_exe_save(x, path, &err), TERN_OK);
    uint8_t *file = slurp(path, &m);
    CHECK_MSG(file && m == n && enc && !memcmp(file, enc, n), "%s: saved file (%zu bytes) differs from the encoding "
              "(%zu bytes)", what, m, n);
    tern_exe back;
    CHECK_EQ_INT(tern_exe_load(path, &back, &err), TERN_OK);
    CHECK_EQ_INT(back.num_consts, x->num_consts);
    for (size_t i = 0; i < back.num_consts && i < x->num_consts; i++)
        CHECK(back.consts[i].bytes == x->consts[i].bytes &&
              !memcmp(back.consts[i].data, x->consts[i].data, (size_t)x->consts[i].bytes));
    tern_exe_free(&back);
    /* loading reads the constants piece by piece; a damaged file still gets the whole-file decoder's message */
    if (file && m > 40) {
        file[m - 40] ^= 0x5a; /* inside the last constant or the metadata */
        FILE *f = fopen(path, "wb");
        CHECK(f && fwrite(file, 1, m, f) == m);
        if (f)
            fclose(f);
        CHECK(tern_exe_load(path, &back, &err) == TERN_ERR_PARSE);
        CHECK_STR_CONTAINS(err.msg, "checksum mismatch");
        f = fopen(path, "wb");
        CHECK(f && fwrite(file, 1, m - 8, f) == m - 8);
        if (f)
            fclose(f);
        CHECK(tern_exe_load(path, &back, &err) != TERN_OK);
    }
    free(file);
    free(enc);
}

static void same_exe(const tern_exe *a, const tern_exe *b, const char *what)
{
    tern_error err;
    uint8_t *ea = NULL, *eb = NULL;
    size_t na = 0, nb = 0;
    CHECK_EQ_INT(tern_exe_encode(a, &ea, &na, &err), TERN_OK);
    CHECK_EQ_INT(tern_exe_encode(b, &eb, &nb, &err), TERN_OK);
    CHECK_MSG(ea && eb && na == nb && !memcmp(ea, eb, na), "%s: moved and copied executables differ", what);
    free(ea);
    free(eb);
}

int main(void)
{
    tern_core_config cfg;
    tern_error err;
    CHECK_EQ_INT(tern_core_config_load("trn1.2xlarge", &cfg, &err), TERN_OK);
    char path[64];
    snprintf(path, sizeof path, "/tmp/tern_exe_save_%d.tern", (int)getpid());
    tern_exe_io io[2];
    memset(io, 0, sizeof io);
    snprintf(io[0].name, sizeof io[0].name, "x");
    snprintf(io[1].name, sizeof io[1].name, "y");
    for (int i = 0; i < 2; i++) {
        io[i].dtype = TERN_DTYPE_FP32;
        io[i].rank = 2;
        io[i].shape[0] = 4;
        io[i].shape[1] = 8;
    }
    const char *meta = "{\"odd\":1}"; /* 9 bytes: 7 of padding */
    for (unsigned cores = 1; cores <= 2; cores++) {
        tern_kernel *k1 = build(&cfg), *k2 = build(&cfg);
        tern_kernel *ks1[2] = {k1, k1}, *ks2[2] = {k2, k2};
        tern_exe copied, moved;
        CHECK_EQ_INT(tern_exe_from_kernels(&copied, "trn1.2xlarge", ks1, cores, &io[0], 1, &io[1], 1, meta, &err),
                     TERN_OK);
        CHECK_EQ_INT(tern_exe_from_kernels_move(&moved, "trn1.2xlarge", ks2, cores, &io[0], 1, &io[1], 1, meta, &err),
                     TERN_OK);
        CHECK_EQ_INT(copied.num_consts, 3 * cores);
        CHECK(tern_kernel_constant_data(k1, "a") != NULL); /* copying leaves the kernel its data */
        CHECK(tern_kernel_constant_data(k2, "a") == NULL); /* moving takes it */
        same_exe(&copied, &moved, cores == 1 ? "one core" : "two cores");
        same_file(&moved, path, cores == 1 ? "one core" : "two cores");
        tern_exe_free(&copied);
        tern_exe_free(&moved);
        tern_kernel_free(k1);
        tern_kernel_free(k2);
    }
    unlink(path);
    return check_report();
}
