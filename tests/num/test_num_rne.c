/* num layer, round-to-nearest-even against the table-search reference of num_ref.h, for tf32, bf16, fp16 and the
 * three fp8 formats: 10^6 random fp32 values per format (uniform bit patterns, values spread over the format's
 * exponent range, values within a few fp32 ulps of a tie), and every boundary: each representable value, each
 * exact halfway point between neighbours (including the overflow threshold above max finite and the ties among
 * subnormals and below the min subnormal), and the fp32 values one ulp either side of every halfway point. Both
 * overflow modes, both signs, scalar and bulk paths. */
#include "check.h"
#include "num_ref.h"

#include "tern/num.h"

static const tern_convert_opts SAT = {TERN_ROUND_RNE, TERN_OVERFLOW_SATURATE, 0, 0};

static int nan_code(const ref_fmt *f, uint32_t code)
{
    uint32_t mag = (code >> f->code_shift) & (ref_sign_bit(f) - 1u);
    return ref_class(f, mag) == 1;
}

/* Compare one value in both modes; returns 0 on mismatch (reported). */
static int check_one(const ref_table *t, float x)
{
    const ref_fmt *f = t->f;
    for (int sat = 0; sat < 2; sat++) {
        uint32_t want = ref_rne(t, x, sat);
        uint32_t got = tern_num_encode(f->t, x, sat ? &SAT : NULL, 0);
        int ok = isnan(x) ? nan_code(f, got) && (got >> f->code_shift >> (f->ebits + f->mbits)) == (want >> f->code_shift >> (f->ebits + f->mbits))
                          : got == want;
        if (!ok) {
            CHECK_MSG(0, "%s%s(%a = 0x%08x): expected 0x%x, got 0x%x", tern_dtype_name(f->t), sat ? " sat" : "",
                      (double)x, ref_f2u(x), want, got);
            return 0;
        }
    }
    return 1;
}

static float random_value(const ref_table *t, uint64_t *s, int kind)
{
    const ref_fmt *f = t->f;
    uint64_t r = ref_rand64(s);
    float sign = (r >> 63) ? -1.0f : 1.0f;
    switch (kind) {
    case 0: return ref_u2f((uint32_t)r); /* any pattern, NaNs and infs included */
    case 1: {                          /* the format's range, two binades beyond either end */
        int emin = 1 - f->bias - f->mbits - 2, emax = (int)ref_emax(f) - f->bias + 2;
        int e = emin + (int)((r >> 32) % (uint64_t)(emax - emin + 1));
        return sign * (float)ldexp(1.0 + (double)(r & 0x7FFFFF) / 0x800000, e);
    }
    default: { /* within +-8 fp32 ulps of a halfway point */
        uint32_t c = (uint32_t)((r >> 20) % (t->n - 1));
        float mid = (float)((t->v[c] + t->v[c + 1]) / 2);
        int d = (int)((r >> 8) & 15) - 8;
        uint32_t u = ref_f2u(mid);
        if (u == 0) /* keep away from crossing zero */
            d = d < 0 ? -d : d;
        return sign * ref_u2f(u + (uint32_t)d);
    }
    }
}

static void test_format(const ref_fmt *f)
{
    TEST_BEGIN(tern_dtype_name(f->t));
    ref_table t = ref_table_make(f);
    int fails = 0;
    /* boundaries: every value and every halfway point (all codes for 8/16-bit, every 16th code for tf32) */
    uint32_t step = f->t == TERN_DTYPE_TF32 ? 16u : 1u;
    for (uint32_t c = 0; c + 1 < t.n && fails < 10; c += step) {
        float v = (float)t.v[c], mid = (float)((t.v[c] + t.v[c + 1]) / 2);
        CHECK_MSG((double)mid == (t.v[c] + t.v[c + 1]) / 2, "midpoint not exact in fp32");
        float pts[] = {v, mid, nextafterf(mid, 0.0f), nextafterf(mid, INFINITY), nextafterf(v, INFINITY)};
        for (size_t k = 0; k < sizeof pts / sizeof pts[0]; k++)
            fails += !check_one(&t, pts[k]) + !check_one(&t, -pts[k]);
    }
    /* named boundaries */
    float maxf = (float)t.v[t.n - 2], thr = (float)((t.v[t.n - 2] + t.v[t.n - 1]) / 2);
    float named[] = {maxf, thr, nextafterf(thr, 0), nextafterf(thr, INFINITY), (float)t.v[t.n - 1],
                     (float)ldexp(1, 1 - f->bias), (float)ldexp(1, 1 - f->bias - f->mbits),
                     (float)ldexp(1, -f->bias - f->mbits), nextafterf((float)ldexp(1, -f->bias - f->mbits), 1),
                     (float)ldexp(3, -f->bias - f->mbits), 0.0f, INFINITY, NAN, ref_u2f(0x7F800001u),
                     ref_u2f(1), ref_u2f(0x7F7FFFFFu), ref_u2f(0x00800000u)};
    for (size_t k = 0; k < sizeof named / sizeof named[0]; k++)
        fails += !check_one(&t, named[k]) + !check_one(&t, -named[k]);
    /* random */
    uint64_t s = 0x9E3779B97F4A7C15ull ^ (uint64_t)f->t;
    enum { N = 1000000 / REF_SCALE };
    static float xs[N];
    static uint32_t got[N], got_sat[N];
    for (int i = 0; i < N; i++)
        xs[i] = random_value(&t, &s, i % 3);
    for (int i = 0; i < N && fails < 10; i++)
        fails += !check_one(&t, xs[i]);
    /* the bulk path (whatever SIMD level is dispatched) on the same values */
    size_t w = tern_dtype_size(f->t);
    static unsigned char buf[4 * N];
    tern_error err = {0};
    CHECK(tern_convert_from_f32(f->t, buf, xs, N, NULL, &err) == TERN_OK);
    for (int i = 0; i < N; i++) {
        uint32_t c = 0;
        memcpy(&c, buf + w * (size_t)i, w);
        got[i] = c;
    }
    CHECK(tern_convert_from_f32(f->t, buf, xs, N, &SAT, &err) == TERN_OK);
    for (int i = 0; i < N; i++) {
        uint32_t c = 0;
        memcpy(&c, buf + w * (size_t)i, w);
        got_sat[i] = c;
    }
    int bulk_bad = 0;
    for (int i = 0; i < N && bulk_bad < 5; i++) {
        uint32_t want = tern_num_encode(f->t, xs[i], NULL, 0), want_sat = tern_num_encode(f->t, xs[i], &SAT, 0);
        if (got[i] != want || got_sat[i] != want_sat) {
            bulk_bad++;
            CHECK_MSG(0, "%s bulk[%d] (0x%08x): expected 0x%x/0x%x, got 0x%x/0x%x", tern_dtype_name(f->t), i,
                      ref_f2u(xs[i]), want, want_sat, got[i], got_sat[i]);
        }
    }
    CHECK_MSG(fails == 0 && bulk_bad == 0, "%s: %d scalar and %d bulk mismatches", tern_dtype_name(f->t), fails,
              bulk_bad);
    /* round_f32 is encode + decode */
    for (int i = 0; i < 1000; i++) {
        float r = tern_num_round_f32(f->t, xs[i], NULL, 0);
        float want = tern_num_decode(f->t, tern_num_encode(f->t, xs[i], NULL, 0));
        CHECK(ref_f2u(r) == ref_f2u(want));
    }
    float rb[1000];
    CHECK(tern_convert_round_f32(f->t, rb, xs, 1000, NULL, &err) == TERN_OK);
    for (int i = 0; i < 1000; i++)
        CHECK(ref_f2u(rb[i]) == ref_f2u(tern_num_round_f32(f->t, xs[i], NULL, 0)));
    ref_table_free(&t);
}

int main(void)
{
    for (int i = 0; i < REF_NFMTS; i++)
        test_format(&REF_FMTS[i]);
    return check_report();
}
