/* num layer against PyTorch: fp32 -> bf16 and fp32 -> fp16 (RNE, IEEE overflow) bit for bit on the ~1.5 M inputs
 * written by scripts/gen_torch_vectors.py into $TERN_TEST_DATA/num_torch (default build/testdata), through the
 * scalar encoder and the dispatched bulk path; bf16/fp16 -> fp32 for all 65536 codes; fp8 e4m3fn/e5m2 when the
 * generating torch had those types. NaN results are compared by class (NaN with the input's sign where torch keeps
 * it), not bits: torch's bf16 conversion returns the canonical 0x7FC0 for every NaN (dropping sign and payload)
 * while tern keeps the sign and top payload bits, as x86 VCVTNEPS2BF16 does. */
#include "check.h"
#include "num_ref.h"

#include "tern/num.h"

#include <errno.h>

typedef struct {
    uint32_t count, width;
    void *data;
} vec;

static int load(const char *dir, const char *name, vec *v, int required)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/num_torch/%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (!f) {
        if (required)
            CHECK_MSG(0, "cannot open %s (%s): run /usr/bin/python3 scripts/gen_torch_vectors.py build/testdata",
                      path, strerror(errno));
        return 0;
    }
    unsigned char hdr[16];
    int ok = fread(hdr, 1, 16, f) == 16 && memcmp(hdr, "TERNVEC1", 8) == 0;
    if (ok) {
        memcpy(&v->count, hdr + 8, 4); /* little-endian host assumed, as everywhere in tern */
        memcpy(&v->width, hdr + 12, 4);
        v->data = malloc((size_t)v->count * v->width + 1);
        ok = v->data && fread(v->data, v->width, v->count, f) == v->count;
    }
    fclose(f);
    CHECK_MSG(ok, "%s: bad header or short file", path);
    return ok;
}

static uint32_t get(const vec *v, size_t i)
{
    uint32_t x = 0;
    memcpy(&x, (const unsigned char *)v->data + i * v->width, v->width);
    return x;
}

/* torch result vs ours: equal bits, or both NaN when the input was NaN */
static int same16(uint32_t want, uint32_t got, uint32_t in, tern_dtype t)
{
    if (want == got)
        return 1;
    float x = ref_u2f(in);
    if (!isnan(x))
        return 0;
    return isnan(tern_num_decode(t, got)) && isnan(tern_num_decode(t, want));
}

static void compare_encode(const char *dir, const vec *in, const char *file, tern_dtype t)
{
    TEST_BEGIN(file);
    vec ref;
    if (!load(dir, file, &ref, 1))
        return;
    CHECK_EQ_INT(ref.count, in->count);
    size_t n = ref.count < in->count ? ref.count : in->count, w = tern_dtype_size(t);
    unsigned char *bulk = malloc(n * w + 1);
    tern_error err = {0};
    CHECK(tern_convert_from_f32(t, bulk, in->data, n, NULL, &err) == TERN_OK);
    size_t bad_scalar = 0, bad_bulk = 0, nans = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t u = get(in, i), want = get(&ref, i);
        uint32_t s = tern_num_encode(t, ref_u2f(u), NULL, 0), b = 0;
        memcpy(&b, bulk + i * w, w);
        nans += isnan(ref_u2f(u));
        if (!same16(want, s, u, t) && bad_scalar++ < 5)
            CHECK_MSG(0, "%s: input 0x%08x (%.9g): torch 0x%x, tern 0x%x", file, u, (double)ref_u2f(u), want, s);
        if (!same16(want, b, u, t) && bad_bulk++ < 5)
            CHECK_MSG(0, "%s bulk (%s): input 0x%08x: torch 0x%x, tern 0x%x", file, tern_num_simd_level(), u, want,
                      b);
    }
    CHECK_MSG(bad_scalar == 0 && bad_bulk == 0, "%s: %zu scalar, %zu bulk mismatches of %zu", file, bad_scalar,
              bad_bulk, n);
    printf("%s: %zu values compared with torch (%zu NaN by class), %zu mismatches\n", file, n, nans,
           bad_scalar + bad_bulk);
    free(bulk);
    free(ref.data);
}

static void compare_decode(const char *dir, const char *file, tern_dtype t)
{
    TEST_BEGIN(file);
    vec ref;
    if (!load(dir, file, &ref, 1))
        return;
    CHECK_EQ_INT(ref.count, 65536);
    size_t bad = 0;
    for (uint32_t c = 0; c < 65536 && c < ref.count; c++) {
        uint32_t want = get(&ref, c), got = ref_f2u(tern_num_decode(t, c));
        int ok = want == got || (isnan(ref_u2f(want)) && isnan(ref_u2f(got)) && (want >> 31) == (got >> 31));
        if (!ok && bad++ < 5)
            CHECK_MSG(0, "%s: code 0x%04x: torch 0x%08x, tern 0x%08x", file, c, want, got);
    }
    CHECK_MSG(bad == 0, "%s: %zu mismatches", file, bad);
    free(ref.data);
}

int main(void)
{
    const char *dir = getenv("TERN_TEST_DATA");
    if (!dir || !*dir)
        dir = "build/testdata";
    vec in;
    TEST_BEGIN("inputs");
    if (!load(dir, "inputs_f32.bin", &in, 1))
        return check_report();
    CHECK(in.count >= 1000000 && in.width == 4);
    compare_encode(dir, &in, "bf16_rne.bin", TERN_DTYPE_BF16);
    compare_encode(dir, &in, "fp16_rne.bin", TERN_DTYPE_FP16);
    compare_decode(dir, "bf16_decode.bin", TERN_DTYPE_BF16);
    compare_decode(dir, "fp16_decode.bin", TERN_DTYPE_FP16);
    static const struct {
        const char *file;
        tern_dtype t;
    } fp8[] = {{"fp8_e4m3fn_rne.bin", TERN_DTYPE_FP8_E4M3}, {"fp8_e5m2_rne.bin", TERN_DTYPE_FP8_E5M2}};
    for (size_t k = 0; k < 2; k++) {
        vec probe;
        if (load(dir, fp8[k].file, &probe, 0)) {
            free(probe.data);
            compare_encode(dir, &in, fp8[k].file, fp8[k].t);
        } else {
            printf("%s: not generated (this torch has no %s): skipped\n", fp8[k].file, tern_dtype_name(fp8[k].t));
        }
    }
    free(in.data);
    return check_report();
}
