/* num layer, stochastic rounding: results are only ever the two neighbours, the mean of many draws is within 3
 * sigma of x (unbiased), a draw depends only on (seed, offset + index) (scalar == bulk, chunking and offsets do not
 * matter, different seeds differ), the generator's output is uniform, and the accumulation example of the Neuron
 * rounding docs: fp16 1024 + 0.5 x 2048 stays 1024 under RNE and reaches ~2048 under SR. */
#include "check.h"
#include "num_ref.h"

#include "tern/num.h"

static void test_unbiased(void)
{
    TEST_BEGIN("unbiased");
    static const struct {
        tern_dtype t;
        float x;
    } cases[] = {
        {TERN_DTYPE_BF16, 1.00390625f + 0.001f}, {TERN_DTYPE_BF16, -3.14159265f},  {TERN_DTYPE_BF16, 1e-39f},
        {TERN_DTYPE_FP16, 1024.3f},             {TERN_DTYPE_FP16, -0.1f},         {TERN_DTYPE_FP16, 3e-8f},
        {TERN_DTYPE_FP8_E4M3, 0.3f},            {TERN_DTYPE_FP8_E4M3, -300.0f},   {TERN_DTYPE_FP8_E4M3, 0.0009f},
        {TERN_DTYPE_FP8_E5M2, 1000.0f},         {TERN_DTYPE_FP8_E5M2, 1e-5f},     {TERN_DTYPE_FP8_E4M3_NEURON, 7.7f},
        {TERN_DTYPE_TF32, 1.0001f},             {TERN_DTYPE_INT8, 2.3f},          {TERN_DTYPE_INT16, -7.75f},
        {TERN_DTYPE_FP8_E4M3, 0x1p-12f}, /* far below the min subnormal: rounds up with probability 1/8 */
    };
    enum { N = 100000 / REF_SCALE };
    static float xs[N], dec[N];
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        tern_dtype t = cases[k].t;
        float x = cases[k].x;
        tern_convert_opts o = {TERN_ROUND_STOCHASTIC, TERN_OVERFLOW_INF, 1000 + k, 0};
        tern_convert_opts down = {TERN_ROUND_RNE, TERN_OVERFLOW_INF, 0, 0};
        /* neighbours from the RNE result */
        float r = tern_num_round_f32(t, x, &down, 0), lo, hi;
        for (int i = 0; i < N; i++)
            xs[i] = x;
        tern_error err = {0};
        CHECK(tern_convert_round_f32(t, dec, xs, N, &o, &err) == TERN_OK);
        lo = hi = dec[0];
        double sum = 0;
        for (int i = 0; i < N; i++) {
            lo = dec[i] < lo ? dec[i] : lo;
            hi = dec[i] > hi ? dec[i] : hi;
            sum += dec[i];
        }
        CHECK_MSG(lo <= x && x <= hi && lo < hi, "%s SR(%g): draws span [%g, %g]", tern_dtype_name(t), (double)x,
                  (double)lo, (double)hi);
        int only_two = 1;
        for (int i = 0; i < N; i++)
            only_two &= dec[i] == lo || dec[i] == hi;
        CHECK_MSG(only_two, "%s SR(%g): a draw outside the two neighbours", tern_dtype_name(t), (double)x);
        CHECK_MSG(r == lo || r == hi, "%s: RNE result %g not a neighbour", tern_dtype_name(t), (double)r);
        double p = ((double)x - lo) / ((double)hi - lo);
        double sigma = ((double)hi - lo) * sqrt(p * (1 - p) / N);
        double mean = sum / N;
        CHECK_MSG(fabs(mean - x) <= 3 * sigma, "%s SR(%.9g): mean %.9g, |err| %.3g > 3 sigma %.3g",
                  tern_dtype_name(t), (double)x, mean, fabs(mean - x), 3 * sigma);
        /* the scalar form gives the same draws */
        int same = 1;
        for (int i = 0; i < N; i += 97)
            same &= ref_f2u(tern_num_round_f32(t, x, &o, (uint64_t)i)) == ref_f2u(dec[i]);
        CHECK_MSG(same, "%s: scalar SR differs from bulk SR", tern_dtype_name(t));
    }
}

static void test_reproducible(void)
{
    TEST_BEGIN("reproducible");
    enum { N = 4099 };
    static float x[N];
    static uint16_t a[N], b[N], c[N];
    uint64_t s = 7;
    for (int i = 0; i < N; i++)
        x[i] = (float)((double)(int64_t)ref_rand64(&s) / 9.2e18 * 100.0);
    tern_convert_opts o = {TERN_ROUND_STOCHASTIC, TERN_OVERFLOW_INF, 42, 1000};
    tern_error err = {0};
    CHECK(tern_convert_from_f32(TERN_DTYPE_BF16, a, x, N, &o, &err) == TERN_OK);
    CHECK(tern_convert_from_f32(TERN_DTYPE_BF16, b, x, N, &o, &err) == TERN_OK);
    CHECK(memcmp(a, b, sizeof a) == 0);
    /* chunked with advancing offsets == one call */
    size_t cuts[] = {0, 1, 17, 1000, 1001, 3000, N};
    for (size_t k = 0; k + 1 < sizeof cuts / sizeof cuts[0]; k++) {
        tern_convert_opts oc = o;
        oc.offset = o.offset + cuts[k];
        CHECK(tern_convert_from_f32(TERN_DTYPE_BF16, c + cuts[k], x + cuts[k], cuts[k + 1] - cuts[k], &oc, &err) ==
              TERN_OK);
    }
    CHECK(memcmp(a, c, sizeof a) == 0);
    /* element i == scalar with index i */
    int same = 1;
    for (int i = 0; i < N; i++)
        same &= tern_f32_to_bf16(x[i], &o, (uint64_t)i) == a[i];
    CHECK(same);
    /* another seed: about half of the inexact elements change */
    tern_convert_opts o2 = o;
    o2.seed = 43;
    CHECK(tern_convert_from_f32(TERN_DTYPE_BF16, b, x, N, &o2, &err) == TERN_OK);
    int diff = 0;
    for (int i = 0; i < N; i++)
        diff += a[i] != b[i];
    CHECK_MSG(diff > N / 5, "seed 42 vs 43: only %d of %d elements differ", diff, N);
    /* generator: pure function, a bijection of the low counter word, uniform high byte */
    CHECK_EQ_HEX(tern_num_sr_draw(1, 2), tern_num_sr_draw(1, 2));
    CHECK(tern_num_sr_draw(1, 2) != tern_num_sr_draw(2, 2));
    CHECK(tern_num_sr_draw(1, 2) != tern_num_sr_draw(1, 2 + (1ull << 32)));
    enum { M = 1 << 20 };
    static uint32_t hist[256];
    for (uint32_t i = 0; i < M; i++) {
        uint32_t d = tern_num_sr_draw(5, i);
        hist[d >> 24]++;
    }
    double chi = 0, e = M / 256.0;
    for (int i = 0; i < 256; i++)
        chi += (hist[i] - e) * (hist[i] - e) / e;
    CHECK_MSG(chi < 330, "high byte chi-square %.1f over 255 dof", chi); /* p ~ 0.001 */
    /* SR on an exact value never moves it; on a NaN keeps NaN */
    CHECK_EQ_HEX(tern_f32_to_fp16(1.5f, &o, 3), 0x3E00);
    CHECK((tern_f32_to_fp16(NAN, &o, 3) & 0x7C00) == 0x7C00 && (tern_f32_to_fp16(NAN, &o, 3) & 0x3FF));
    /* SR overflow: above max, saturate keeps max; IEEE mode sometimes goes to inf */
    tern_convert_opts os = {TERN_ROUND_STOCHASTIC, TERN_OVERFLOW_SATURATE, 9, 0};
    tern_convert_opts oi = {TERN_ROUND_STOCHASTIC, TERN_OVERFLOW_INF, 9, 0};
    int infs = 0;
    for (int i = 0; i < 1000; i++) {
        CHECK_EQ_HEX(tern_f32_to_fp16(65530.0f, &os, (uint64_t)i), 0x7BFF);
        infs += tern_f32_to_fp16(65530.0f, &oi, (uint64_t)i) == 0x7C00;
    }
    /* 65530 lies (65530 - 65504) / 32 = 0.8125 of the way from max to the next step (65536 = inf) */
    CHECK_MSG(infs > 770 && infs < 855, "fp16 SR(65530): %d of 1000 overflowed, expected ~812", infs);
}

/* The Neuron docs' example: an fp16 accumulator at 1024, add 0.5 2048 times, rounding every sum to fp16. */
static void test_accumulate(void)
{
    TEST_BEGIN("fp16 accumulate");
    tern_convert_opts rne = TERN_CONVERT_OPTS_DEFAULT;
    float acc = 1024.0f;
    for (int i = 0; i < 2048; i++)
        acc = tern_num_round_f32(TERN_DTYPE_FP16, acc + 0.5f, &rne, (uint64_t)i);
    CHECK(acc == 1024.0f);
    double total = 0;
    for (uint64_t seed = 1; seed <= 8; seed++) {
        tern_convert_opts sr = {TERN_ROUND_STOCHASTIC, TERN_OVERFLOW_INF, seed, 0};
        acc = 1024.0f;
        for (int i = 0; i < 2048; i++)
            acc = tern_num_round_f32(TERN_DTYPE_FP16, acc + 0.5f, &sr, (uint64_t)i);
        CHECK_NEAR(acc, 2048.0, 2048.0 * 0.05);
        total += acc;
    }
    CHECK_NEAR(total / 8, 2048.0, 2048.0 * 0.02);
    printf("fp16 1024 + 0.5 x 2048: RNE 1024, SR mean of 8 seeds %.1f\n", total / 8);
}

int main(void)
{
    test_unbiased();
    test_reproducible();
    test_accumulate();
    return check_report();
}
