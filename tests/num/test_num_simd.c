/* num layer, dispatch: every SIMD level the host supports gives byte-identical output to the portable path, for
 * every dtype, RNE and SR, both overflow modes, random bit patterns mixed with special values (zeros, infs, NaNs
 * with payloads, signalling NaNs, fp32 denormals, ties, values near max), lengths that are not multiples of the
 * vector width (0, 1, 15, 16, 17, 31, 33, 4099), odd alignments, and an SR offset whose low word wraps inside a
 * vector. Decoding of every bf16/fp16/fp8 code likewise. Also TERN_SIMD forcing. */
#include "check.h"
#include "num_ref.h"

#include "tern/num.h"

enum { NMAX = 4099 + 64 };

static const uint32_t specials[] = {
    0x00000000u, 0x80000000u, 0x7F800000u, 0xFF800000u, 0x7FC00000u, 0xFFC00001u, 0x7F800001u, 0xFFBFFFFFu,
    0x7FA5A5A5u, 0x00000001u, 0x807FFFFFu, 0x00400000u, 0x00008000u, 0x00018000u, 0x7F7FFFFFu, 0xFF7F8000u,
    0x7F7F7FFFu, 0x477FF000u, 0x477FEFFFu, 0x43E80000u, 0x43E00000u, 0x43780000u, 0x47600000u, 0x3F808000u,
    0x3F818000u, 0x33000000u, 0x33000001u, 0x3A800000u, 0x3B000000u, 0x37800000u, 0xC3F00000u, 0x4F800000u,
};

static void fill(float *x, size_t n, uint64_t *s)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t r = ref_rand64(s);
        uint32_t u;
        switch (r & 3) {
        case 0: u = specials[(r >> 8) % (sizeof specials / sizeof specials[0])]; break;
        case 1: u = (uint32_t)(r >> 32); break;
        case 2: u = (uint32_t)((r >> 32) & 0x807FFFFFu) | (uint32_t)((100 + (r >> 24) % 60) << 23); break;
        default: u = ((uint32_t)(r >> 32) & 0x8000FFFFu) | 0x3F800000u | (((uint32_t)r & 0x100u) ? 0x8000u : 0); break;
        }
        memcpy(&x[i], &u, 4);
    }
}

static void test_from_f32(tern_simd lvl)
{
    static float x[NMAX];
    static unsigned char want[4 * NMAX], got[4 * NMAX + 8];
    static const size_t lens[] = {0, 1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 4099};
    uint64_t s = 1;
    tern_error err = {0};
    for (int t = 0; t < TERN_DTYPE_COUNT; t++) {
        TEST_BEGIN(tern_dtype_name((tern_dtype)t));
        size_t w = tern_dtype_size((tern_dtype)t);
        for (int mode = 0; mode < 4; mode++) {
            tern_convert_opts o = {mode & 1 ? TERN_ROUND_STOCHASTIC : TERN_ROUND_RNE,
                                   mode & 2 ? TERN_OVERFLOW_SATURATE : TERN_OVERFLOW_INF, 0xC0FFEEull + (uint64_t)t,
                                   mode == 3 ? 0xFFFFFFF9ull : 5};
            for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
                size_t n = lens[li], off = li % 3; /* misalign src and dst */
                fill(x + off, n, &s);
                CHECK(tern_convert_from_f32_simd(TERN_SIMD_PORTABLE, (tern_dtype)t, want, x + off, n, &o, &err) ==
                      TERN_OK);
                memset(got, 0xAB, sizeof got);
                CHECK(tern_convert_from_f32_simd(lvl, (tern_dtype)t, got + off, x + off, n, &o, &err) == TERN_OK);
                int same = memcmp(want, got + off, n * w) == 0;
                int guard = got[off + n * w] == 0xAB;
                if (!same) {
                    size_t i = 0;
                    while (i < n && !memcmp(want + i * w, got + off + i * w, w))
                        i++;
                    uint32_t a = 0, b = 0, u;
                    memcpy(&a, want + i * w, w);
                    memcpy(&b, got + off + i * w, w);
                    memcpy(&u, x + off + i, 4);
                    CHECK_MSG(0, "%s %s mode %d n %zu: element %zu (0x%08x): portable 0x%x, simd 0x%x",
                              tern_simd_name(lvl), tern_dtype_name((tern_dtype)t), mode, n, i, u, a, b);
                }
                CHECK_MSG(guard, "%s %s n %zu: wrote past the end", tern_simd_name(lvl),
                          tern_dtype_name((tern_dtype)t), n);
            }
        }
    }
}

static void test_to_f32(tern_simd lvl)
{
    TEST_BEGIN("to_f32");
    static uint16_t codes[65536 + 17];
    static uint8_t c8[256 * 4 + 3];
    static float want[65536 + 17], got[65536 + 17];
    tern_error err = {0};
    for (uint32_t c = 0; c < 65536 + 17; c++)
        codes[c] = (uint16_t)(c * 40503u);
    for (uint32_t c = 0; c < sizeof c8; c++)
        c8[c] = (uint8_t)(c * 7u);
    for (int t = 0; t < TERN_DTYPE_COUNT; t++) {
        const void *src = tern_dtype_size((tern_dtype)t) == 1 ? (const void *)c8 : (const void *)codes;
        size_t n = tern_dtype_size((tern_dtype)t) == 1 ? sizeof c8 : tern_dtype_size((tern_dtype)t) == 2 ? 65536 + 17 : 32768 + 3;
        CHECK(tern_convert_to_f32_simd(TERN_SIMD_PORTABLE, want, (tern_dtype)t, src, n, &err) == TERN_OK);
        CHECK(tern_convert_to_f32_simd(lvl, got, (tern_dtype)t, src, n, &err) == TERN_OK);
        CHECK_MSG(memcmp(want, got, n * 4) == 0, "%s to_f32 %s differs from portable", tern_simd_name(lvl),
                  tern_dtype_name((tern_dtype)t));
        /* and the bulk decode equals the scalar one */
        if (tern_dtype_size((tern_dtype)t) <= 2) {
            int same = 1;
            for (size_t i = 0; i < n; i++) {
                uint32_t c = tern_dtype_size((tern_dtype)t) == 1 ? c8[i] : codes[i];
                same &= ref_f2u(got[i]) == ref_f2u(tern_num_decode((tern_dtype)t, c));
            }
            CHECK_MSG(same, "%s bulk decode != scalar decode", tern_dtype_name((tern_dtype)t));
        }
    }
}

int main(void)
{
    const tern_simd levels[] = {TERN_SIMD_AVX2, TERN_SIMD_AVX512};
    int tested = 0;
    for (size_t i = 0; i < 2; i++) {
        if (!tern_num_simd_supported(levels[i])) {
            printf("simd level %s not supported here: skipped\n", tern_simd_name(levels[i]));
            tern_error err = {0};
            float f = 1;
            uint16_t h;
            CHECK(tern_convert_from_f32_simd(levels[i], TERN_DTYPE_BF16, &h, &f, 1, NULL, &err) ==
                  TERN_ERR_UNSUPPORTED);
            CHECK_STR_CONTAINS(err.msg, "not supported");
            continue;
        }
        tested++;
        test_from_f32(levels[i]);
        test_to_f32(levels[i]);
    }
    test_from_f32(TERN_SIMD_AUTO);
    TEST_BEGIN("TERN_SIMD");
    setenv("TERN_SIMD", "portable", 1);
    tern_num_simd_refresh();
    CHECK(strcmp(tern_num_simd_level(), "portable") == 0);
    setenv("TERN_SIMD", "avx2", 1);
    tern_num_simd_refresh();
    CHECK(strcmp(tern_num_simd_level(), tern_num_simd_supported(TERN_SIMD_AVX2) ? "avx2" : "portable") == 0);
    setenv("TERN_SIMD", "avx512", 1);
    tern_num_simd_refresh();
    const char *best = tern_num_simd_level();
    unsetenv("TERN_SIMD");
    CHECK(strcmp(best, tern_num_simd_level()) == 0);
    printf("simd levels compared with portable: %d; dispatched: %s\n", tested, tern_num_simd_level());
    return check_report();
}
