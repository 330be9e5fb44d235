/* num layer, scalar side: every code of every 8- and 16-bit float format (and a sweep of tf32) decoded against the
 * textbook formula of num_ref.h, encode(decode(c)) == c for every non-NaN code, the format table, dtype names and
 * aliases, integer conversions against rint() in double, and the error paths. */
#include "check.h"
#include "num_ref.h"

#include "tern/num.h"

static uint32_t decode_bits(tern_dtype t, uint32_t code) { return ref_f2u(tern_num_decode(t, code)); }

static void test_decode_all_codes(void)
{
    for (int fi = 0; fi < REF_NFMTS; fi++) {
        const ref_fmt *f = &REF_FMTS[fi];
        TEST_BEGIN(tern_dtype_name(f->t));
        uint32_t ncodes = 2u * ref_sign_bit(f), step = f->t == TERN_DTYPE_TF32 ? 7u : 1u;
        int bad = 0;
        for (uint32_t c = 0; c < ncodes && bad < 10; c += step) {
            uint32_t mag = c & (ref_sign_bit(f) - 1u), neg = c >= ref_sign_bit(f);
            uint32_t stored = c << f->code_shift;
            float got = tern_num_decode(f->t, stored);
            int cls = ref_class(f, mag);
            if (cls == 1) {
                /* NaN: quiet, sign kept */
                uint32_t u = ref_f2u(got);
                int ok = isnan(got) && (u & 0x400000u) && ((u >> 31) == neg);
                if (!ok)
                    bad++;
                CHECK_MSG(ok, "%s code 0x%x: expected quiet NaN with sign %u, got 0x%08x", tern_dtype_name(f->t), c,
                          neg, u);
                continue;
            }
            double want = cls == 2 ? INFINITY : ref_value(f, mag);
            if (neg)
                want = -want;
            int ok = (double)got == want && (signbit(got) != 0) == (neg != 0);
            if (!ok)
                bad++;
            CHECK_MSG(ok, "%s code 0x%x: expected %.17g, got %.17g", tern_dtype_name(f->t), c, want, (double)got);
            /* round trip, both modes and both overflow rules */
            tern_convert_opts sat = {TERN_ROUND_RNE, TERN_OVERFLOW_SATURATE, 0, 0};
            uint32_t back = tern_num_encode(f->t, got, NULL, 0);
            if (back != stored)
                bad++;
            CHECK_MSG(back == stored, "%s code 0x%x: encode(decode) = 0x%x", tern_dtype_name(f->t), c, back);
            if (cls == 0) {
                uint32_t b2 = tern_num_encode(f->t, got, &sat, 0);
                tern_convert_opts sr = {TERN_ROUND_STOCHASTIC, TERN_OVERFLOW_INF, 99, 0};
                uint32_t b3 = tern_num_encode(f->t, got, &sr, c);
                CHECK_MSG(b2 == stored && b3 == stored, "%s code 0x%x: exact value changed by sat/SR: 0x%x 0x%x",
                          tern_dtype_name(f->t), c, b2, b3);
            }
        }
    }
    /* the dedicated scalar entry points agree with the generic ones */
    TEST_BEGIN("scalar entry points");
    for (uint32_t c = 0; c < 65536; c++) {
        CHECK(ref_f2u(tern_bf16_to_f32((uint16_t)c)) == decode_bits(TERN_DTYPE_BF16, c));
        CHECK(ref_f2u(tern_fp16_to_f32((uint16_t)c)) == decode_bits(TERN_DTYPE_FP16, c));
    }
    for (uint32_t c = 0; c < 256; c++)
        for (tern_dtype t = TERN_DTYPE_FP8_E4M3; t <= TERN_DTYPE_FP8_E4M3_NEURON; t++)
            CHECK(ref_f2u(tern_fp8_to_f32(t, (uint8_t)c)) == decode_bits(t, c));
    CHECK(isnan(tern_fp8_to_f32(TERN_DTYPE_BF16, 0x38)));
    CHECK_EQ_HEX(tern_f32_to_fp8(TERN_DTYPE_INT8, 1.0f, NULL, 0), 0);
    CHECK_EQ_HEX(tern_f32_to_bf16(1.0f, NULL, 0), 0x3F80);
    CHECK_EQ_HEX(tern_f32_to_fp16(1.0f, NULL, 0), 0x3C00);
    CHECK_EQ_HEX(tern_f32_to_tf32(ref_u2f(0x3F801000u), NULL, 0), 0x3F800000); /* tie -> even */
    CHECK_EQ_HEX(tern_f32_to_tf32(ref_u2f(0x3F803000u), NULL, 0), 0x3F804000);
    CHECK(tern_tf32_to_f32(0x3F802000u) == ref_u2f(0x3F802000u));
}

static void test_known_values(void)
{
    TEST_BEGIN("known values");
    /* e4m3fn */
    CHECK(tern_fp8_to_f32(TERN_DTYPE_FP8_E4M3, 0x7E) == 448.0f);
    CHECK(isnan(tern_fp8_to_f32(TERN_DTYPE_FP8_E4M3, 0x7F)));
    CHECK(tern_fp8_to_f32(TERN_DTYPE_FP8_E4M3, 0x78) == 256.0f);
    CHECK(tern_fp8_to_f32(TERN_DTYPE_FP8_E4M3, 0x01) == 0x1p-9f);
    /* legacy Neuron e4m3 = IEEE-style */
    CHECK(tern_fp8_to_f32(TERN_DTYPE_FP8_E4M3_NEURON, 0x77) == 240.0f);
    CHECK(isinf(tern_fp8_to_f32(TERN_DTYPE_FP8_E4M3_NEURON, 0x78)));
    CHECK(isinf(tern_fp8_to_f32(TERN_DTYPE_FP8_E4M3_NEURON, 0xF8)) && tern_fp8_to_f32(TERN_DTYPE_FP8_E4M3_NEURON, 0xF8) < 0);
    CHECK(isnan(tern_fp8_to_f32(TERN_DTYPE_FP8_E4M3_NEURON, 0x79)));
    /* e5m2 */
    CHECK(tern_fp8_to_f32(TERN_DTYPE_FP8_E5M2, 0x7B) == 57344.0f);
    CHECK(isinf(tern_fp8_to_f32(TERN_DTYPE_FP8_E5M2, 0x7C)));
    CHECK(tern_fp8_to_f32(TERN_DTYPE_FP8_E5M2, 0x01) == 0x1p-16f);
    CHECK(tern_fp16_to_f32(0x7BFF) == 65504.0f);
    CHECK(tern_fp16_to_f32(0x0001) == 0x1p-24f);
    CHECK(tern_bf16_to_f32(0x0001) == 0x1p-133f);
    CHECK(tern_bf16_to_f32(0x8000) == 0.0f && signbit(tern_bf16_to_f32(0x8000)));
    /* overflow modes */
    tern_convert_opts sat = {TERN_ROUND_RNE, TERN_OVERFLOW_SATURATE, 0, 0};
    CHECK_EQ_HEX(tern_f32_to_fp8(TERN_DTYPE_FP8_E4M3, 1000.0f, NULL, 0), 0x7F);
    CHECK_EQ_HEX(tern_f32_to_fp8(TERN_DTYPE_FP8_E4M3, -1000.0f, NULL, 0), 0xFF);
    CHECK_EQ_HEX(tern_f32_to_fp8(TERN_DTYPE_FP8_E4M3, 1000.0f, &sat, 0), 0x7E);
    CHECK_EQ_HEX(tern_f32_to_fp8(TERN_DTYPE_FP8_E4M3, 464.0f, NULL, 0), 0x7E); /* tie between 448 (even) and 480 */
    CHECK_EQ_HEX(tern_f32_to_fp8(TERN_DTYPE_FP8_E4M3, 465.0f, NULL, 0), 0x7F);
    CHECK_EQ_HEX(tern_f32_to_fp8(TERN_DTYPE_FP8_E4M3_NEURON, 248.0f, NULL, 0), 0x78); /* tie: 240 odd -> inf */
    CHECK_EQ_HEX(tern_f32_to_fp8(TERN_DTYPE_FP8_E4M3_NEURON, 247.0f, NULL, 0), 0x77);
    CHECK_EQ_HEX(tern_f32_to_fp8(TERN_DTYPE_FP8_E4M3_NEURON, INFINITY, &sat, 0), 0x77);
    CHECK_EQ_HEX(tern_f32_to_fp8(TERN_DTYPE_FP8_E5M2, -INFINITY, NULL, 0), 0xFC);
    CHECK_EQ_HEX(tern_f32_to_fp8(TERN_DTYPE_FP8_E5M2, -INFINITY, &sat, 0), 0xFB);
    CHECK_EQ_HEX(tern_f32_to_fp16(65520.0f, NULL, 0), 0x7C00);
    CHECK_EQ_HEX(tern_f32_to_fp16(65519.99f, NULL, 0), 0x7BFF);
    CHECK_EQ_HEX(tern_f32_to_fp16(1e6f, &sat, 0), 0x7BFF);
    CHECK_EQ_HEX(tern_f32_to_bf16(ref_u2f(0x7F7FFFFFu), NULL, 0), 0x7F80);
    CHECK_EQ_HEX(tern_f32_to_bf16(ref_u2f(0x7F7FFFFFu), &sat, 0), 0x7F7F);
    CHECK_EQ_HEX(tern_f32_to_tf32(ref_u2f(0xFF7FFFFFu), &sat, 0), 0xFF7FE000u);
    CHECK_EQ_HEX(tern_f32_to_tf32(ref_u2f(0xFF7FFFFFu), NULL, 0), 0xFF800000u);
    /* NaN: quiet, sign and top payload kept */
    CHECK_EQ_HEX(tern_f32_to_bf16(ref_u2f(0xFF812345u), NULL, 0), 0xFFC1);
    CHECK_EQ_HEX(tern_f32_to_fp16(ref_u2f(0x7FC00000u), NULL, 0), 0x7E00);
    CHECK_EQ_HEX(tern_f32_to_fp16(ref_u2f(0xFF800001u), NULL, 0), 0xFE00);
    CHECK_EQ_HEX(tern_f32_to_fp8(TERN_DTYPE_FP8_E4M3, ref_u2f(0xFFC00000u), &sat, 0), 0xFF);
    CHECK_EQ_HEX(tern_f32_to_fp8(TERN_DTYPE_FP8_E5M2, ref_u2f(0x7FA00000u), &sat, 0), 0x7F);
    CHECK_EQ_HEX(tern_f32_to_fp8(TERN_DTYPE_FP8_E4M3_NEURON, ref_u2f(0x7F800001u), NULL, 0), 0x7C);
    CHECK_EQ_HEX(ref_f2u(tern_bf16_to_f32(0x7F81)), 0x7FC10000u); /* signalling -> quiet, payload kept */
    CHECK_EQ_HEX(ref_f2u(tern_fp16_to_f32(0xFC01)), 0xFFC02000u);
    /* subnormal production */
    CHECK_EQ_HEX(tern_f32_to_fp16(0x1p-25f, NULL, 0), 0x0000);           /* half of min subnormal: tie to 0 */
    CHECK_EQ_HEX(tern_f32_to_fp16(ref_u2f(0x33000001u), NULL, 0), 0x0001); /* just above */
    CHECK_EQ_HEX(tern_f32_to_fp16(0x1.8p-24f, NULL, 0), 0x0002);         /* 1.5 ulp: tie to even 2 */
    CHECK_EQ_HEX(tern_f32_to_bf16(ref_u2f(0x00008000u), NULL, 0), 0x0000);
    CHECK_EQ_HEX(tern_f32_to_bf16(ref_u2f(0x00018000u), NULL, 0), 0x0002);
    CHECK_EQ_HEX(tern_f32_to_fp8(TERN_DTYPE_FP8_E4M3, 0x1p-10f, NULL, 0), 0x00);
    CHECK_EQ_HEX(tern_f32_to_fp8(TERN_DTYPE_FP8_E4M3, -0x1.8p-9f, NULL, 0), 0x82);
    CHECK_EQ_HEX(tern_f32_to_fp8(TERN_DTYPE_FP8_E5M2, 0x1p-17f, NULL, 0), 0x00);
    CHECK_EQ_HEX(tern_f32_to_fp8(TERN_DTYPE_FP8_E5M2, ref_u2f(0x37000001u), NULL, 0), 0x01);
    CHECK_EQ_HEX(tern_f32_to_fp8(TERN_DTYPE_FP8_E5M2, -0.0f, NULL, 0), 0x80);
}

static void test_format_info(void)
{
    TEST_BEGIN("format info");
    tern_float_format ff;
    tern_error err = {0};
    CHECK(tern_dtype_float_format(TERN_DTYPE_FP8_E4M3, &ff, &err) == TERN_OK);
    CHECK(ff.max == 448.0 && ff.min_normal == 0x1p-6 && ff.min_subnormal == 0x1p-9 && !ff.has_inf);
    CHECK_EQ_HEX(ff.nan_code, 0x7F);
    CHECK(tern_dtype_float_format(TERN_DTYPE_FP8_E4M3_NEURON, &ff, &err) == TERN_OK);
    CHECK(ff.max == 240.0 && ff.has_inf && ff.inf_code == 0x78 && ff.bits == 8);
    CHECK(tern_dtype_float_format(TERN_DTYPE_FP8_E5M2, &ff, &err) == TERN_OK);
    CHECK(ff.max == 57344.0 && ff.min_subnormal == 0x1p-16 && ff.exp_bits == 5 && ff.man_bits == 2);
    CHECK(tern_dtype_float_format(TERN_DTYPE_FP16, &ff, &err) == TERN_OK);
    CHECK(ff.max == 65504.0 && ff.min_normal == 0x1p-14 && ff.min_subnormal == 0x1p-24);
    CHECK(tern_dtype_float_format(TERN_DTYPE_BF16, &ff, &err) == TERN_OK);
    CHECK(ff.max == (double)ref_u2f(0x7F7F0000u) && ff.min_subnormal == 0x1p-133);
    CHECK(tern_dtype_float_format(TERN_DTYPE_TF32, &ff, &err) == TERN_OK);
    CHECK(ff.max == (double)ref_u2f(0x7F7FE000u) && ff.bits == 19 && ff.man_bits == 10);
    CHECK(tern_dtype_float_format(TERN_DTYPE_FP32, &ff, &err) == TERN_OK);
    CHECK(ff.max == (double)ref_u2f(0x7F7FFFFFu) && ff.min_subnormal == 0x1p-149);
    CHECK(tern_dtype_float_format(TERN_DTYPE_INT8, &ff, &err) == TERN_ERR_INVALID);
    CHECK_STR_CONTAINS(err.msg, "int8");
    CHECK_STR_CONTAINS(err.msg, "not a floating-point format");
}

static void test_names(void)
{
    TEST_BEGIN("names");
    tern_error err = {0};
    for (int t = 0; t < TERN_DTYPE_COUNT; t++) {
        tern_dtype back = TERN_DTYPE_COUNT;
        CHECK(tern_dtype_from_name(tern_dtype_name((tern_dtype)t), &back, &err) == TERN_OK);
        CHECK_EQ_INT(back, t);
    }
    static const struct {
        const char *name;
        tern_dtype t;
    } aliases[] = {{"float32", TERN_DTYPE_FP32},       {"BFloat16", TERN_DTYPE_BF16},
                   {"float16", TERN_DTYPE_FP16},       {"half", TERN_DTYPE_FP16},
                   {"float8_e4m3fn", TERN_DTYPE_FP8_E4M3}, {"float8_e5m2", TERN_DTYPE_FP8_E5M2},
                   {"float8_e4m3", TERN_DTYPE_FP8_E4M3_NEURON}, {"tfloat32", TERN_DTYPE_TF32},
                   {"uint8_t", TERN_DTYPE_UINT8},      {"i32", TERN_DTYPE_INT32}};
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++) {
        tern_dtype back = TERN_DTYPE_COUNT;
        CHECK(tern_dtype_from_name(aliases[i].name, &back, &err) == TERN_OK);
        CHECK_MSG(back == aliases[i].t, "alias %s: expected %s, got %s", aliases[i].name,
                  tern_dtype_name(aliases[i].t), tern_dtype_name(back));
    }
    tern_dtype out;
    CHECK(tern_dtype_from_name("float8_e4m3fnuz", &out, &err) == TERN_ERR_NOT_FOUND);
    CHECK_STR_CONTAINS(err.msg, "float8_e4m3fnuz");
    CHECK_STR_CONTAINS(err.msg, "fp8_e4m3_neuron");
    CHECK_STR_CONTAINS(err.msg, "uint32");
    CHECK(tern_dtype_from_name(NULL, &out, &err) == TERN_ERR_INVALID);
    CHECK_STR_CONTAINS(err.msg, "name");
    CHECK(tern_dtype_from_name("fp16", NULL, &err) == TERN_ERR_INVALID);
    CHECK_STR_CONTAINS(err.msg, "out");
    CHECK(strcmp(tern_dtype_name((tern_dtype)99), "?") == 0);
    CHECK_EQ_INT(tern_dtype_size(TERN_DTYPE_TF32), 4);
    CHECK_EQ_INT(tern_dtype_size(TERN_DTYPE_FP8_E4M3_NEURON), 1);
    CHECK_EQ_INT(tern_dtype_size(TERN_DTYPE_UINT16), 2);
    CHECK_EQ_INT(tern_dtype_size((tern_dtype)99), 0);
    CHECK(tern_dtype_is_float(TERN_DTYPE_FP8_E4M3_NEURON) && !tern_dtype_is_float(TERN_DTYPE_INT8));
    CHECK(tern_dtype_is_signed(TERN_DTYPE_INT16) && !tern_dtype_is_signed(TERN_DTYPE_UINT32));
}

/* fp32 -> integer against rint() in double (default rounding mode = ties to even) and a clamp. */
static void test_integers(void)
{
    TEST_BEGIN("integers");
    static const struct {
        tern_dtype t;
        double lo, hi;
    } ints[] = {{TERN_DTYPE_INT8, -128, 127},       {TERN_DTYPE_UINT8, 0, 255},
                {TERN_DTYPE_INT16, -32768, 32767},  {TERN_DTYPE_UINT16, 0, 65535},
                {TERN_DTYPE_INT32, -2147483648.0, 2147483647.0}, {TERN_DTYPE_UINT32, 0, 4294967295.0}};
    uint64_t s = 12345;
    for (size_t k = 0; k < sizeof ints / sizeof ints[0]; k++) {
        for (int i = 0; i < 200000 / REF_SCALE; i++) {
            float x;
            uint64_t r = ref_rand64(&s);
            switch (i % 4) {
            case 0: x = ref_u2f((uint32_t)r); break;                                  /* any pattern */
            case 1: x = (float)((double)(int64_t)(r >> 20) / 4096.0 * ints[k].hi / 1e6); break;
            case 2: x = (float)((double)((int64_t)(r % 200000) - 100000) + 0.5); break; /* ties */
            default: x = (float)ldexp((double)(r & 0xFFFFFF), (int)((r >> 40) % 48) - 30) * ((r >> 63) ? -1 : 1);
            }
            double want = isnan(x) ? 0 : rint((double)x);
            if (want < ints[k].lo)
                want = ints[k].lo;
            if (want > ints[k].hi)
                want = ints[k].hi;
            float got = tern_num_round_f32(ints[k].t, x, NULL, 0);
            if ((double)got != (double)(float)want) {
                CHECK_MSG(0, "%s(%.9g): expected %.17g, got %.17g", tern_dtype_name(ints[k].t), (double)x, want,
                          (double)got);
                break;
            }
        }
        /* the saturated integer comes back as fp32 (2^31 - 1 rounds to 2^31) */
        CHECK(tern_num_round_f32(ints[k].t, INFINITY, NULL, 0) == (float)ints[k].hi);
        CHECK(tern_num_round_f32(ints[k].t, -INFINITY, NULL, 0) == (float)ints[k].lo);
        CHECK_EQ_HEX(tern_num_encode(ints[k].t, INFINITY, NULL, 0),
                     (uint32_t)(uint64_t)(int64_t)ints[k].hi & (tern_dtype_size(ints[k].t) == 4 ? 0xFFFFFFFFu
                                                                  : (1u << (8 * tern_dtype_size(ints[k].t))) - 1u));
        CHECK_EQ_INT((int64_t)tern_num_round_f32(ints[k].t, NAN, NULL, 0), 0);
    }
    CHECK_EQ_HEX(tern_num_encode(TERN_DTYPE_INT8, -1.0f, NULL, 0), 0xFF);
    CHECK_EQ_HEX(tern_num_encode(TERN_DTYPE_INT8, -128.5f, NULL, 0), 0x80);
    CHECK_EQ_HEX(tern_num_encode(TERN_DTYPE_INT16, -2.5f, NULL, 0), 0xFFFE);
    CHECK_EQ_HEX(tern_num_encode(TERN_DTYPE_UINT8, 254.5f, NULL, 0), 254);
    CHECK_EQ_HEX(tern_num_encode(TERN_DTYPE_UINT8, 255.5f, NULL, 0), 255);
    CHECK_EQ_HEX(tern_num_encode(TERN_DTYPE_INT32, 3e9f, NULL, 0), 0x7FFFFFFFu);
    CHECK_EQ_HEX(tern_num_encode(TERN_DTYPE_UINT32, 3e9f, NULL, 0), 3000000000u);
    CHECK_EQ_HEX(tern_num_encode(TERN_DTYPE_UINT32, -0.5f, NULL, 0), 0);
    CHECK_EQ_HEX(tern_num_encode(TERN_DTYPE_INT32, ref_u2f(1), NULL, 0), 0);
    CHECK(tern_num_decode(TERN_DTYPE_INT8, 0x80) == -128.0f);
    CHECK(tern_num_decode(TERN_DTYPE_UINT16, 0xFFFF) == 65535.0f);
    CHECK(tern_num_decode(TERN_DTYPE_INT32, 0xFFFFFFFFu) == -1.0f);
    /* bulk integer round trip */
    float src[6] = {-3.5f, 2.5f, 1e9f, -1e9f, NAN, 77.49f}, back[6];
    int16_t i16[6];
    tern_error err = {0};
    CHECK(tern_convert_from_f32(TERN_DTYPE_INT16, i16, src, 6, NULL, &err) == TERN_OK);
    CHECK(i16[0] == -4 && i16[1] == 2 && i16[2] == 32767 && i16[3] == -32768 && i16[4] == 0 && i16[5] == 77);
    CHECK(tern_convert_to_f32(back, TERN_DTYPE_INT16, i16, 6, &err) == TERN_OK);
    CHECK(back[0] == -4.0f && back[3] == -32768.0f && back[5] == 77.0f);
}

static void test_errors(void)
{
    TEST_BEGIN("errors");
    tern_error err = {0};
    float f[4] = {0};
    uint16_t h[4];
    CHECK(tern_convert_from_f32(TERN_DTYPE_BF16, NULL, f, 4, NULL, &err) == TERN_ERR_INVALID);
    CHECK_STR_CONTAINS(err.msg, "dst is NULL");
    CHECK(tern_convert_from_f32(TERN_DTYPE_BF16, h, NULL, 4, NULL, &err) == TERN_ERR_INVALID);
    CHECK_STR_CONTAINS(err.msg, "src is NULL");
    CHECK(tern_convert_from_f32(TERN_DTYPE_BF16, NULL, NULL, 0, NULL, &err) == TERN_OK);
    CHECK(tern_convert_to_f32(f, (tern_dtype)42, h, 4, &err) == TERN_ERR_RANGE);
    CHECK_STR_CONTAINS(err.msg, "dtype 42");
    CHECK(tern_convert_to_f32(NULL, TERN_DTYPE_BF16, h, 4, &err) == TERN_ERR_INVALID);
    CHECK_STR_CONTAINS(err.msg, "convert_to_f32");
    tern_convert_opts bad = {(tern_round)7, TERN_OVERFLOW_INF, 0, 0};
    CHECK(tern_convert_from_f32(TERN_DTYPE_BF16, h, f, 4, &bad, &err) == TERN_ERR_INVALID);
    CHECK_STR_CONTAINS(err.msg, "opts.round = 7");
    bad = (tern_convert_opts){TERN_ROUND_RNE, (tern_overflow)9, 0, 0};
    CHECK(tern_convert_round_f32(TERN_DTYPE_FP16, f, f, 4, &bad, &err) == TERN_ERR_INVALID);
    CHECK_STR_CONTAINS(err.msg, "opts.overflow = 9");
    CHECK(tern_convert_from_f32_simd((tern_simd)17, TERN_DTYPE_BF16, h, f, 4, NULL, &err) == TERN_ERR_RANGE);
    CHECK_STR_CONTAINS(err.msg, "simd level 17");
    CHECK(tern_convert_from_f32(TERN_DTYPE_BF16, h, f, 4, NULL, NULL) == TERN_OK); /* err may be NULL */
    CHECK(tern_convert_from_f32(TERN_DTYPE_BF16, NULL, f, 4, NULL, NULL) == TERN_ERR_INVALID);
}

int main(void)
{
    test_decode_all_codes();
    test_known_values();
    test_format_info();
    test_names();
    test_integers();
    test_errors();
    return check_report();
}
