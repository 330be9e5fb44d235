/* float32 <-> text against numpy 1.24 (ONNX's Cast reference): tern_f32_format must print exactly what
 * np.float32 .astype(np.str_) prints and tern_f32_parse must give exactly the float32 bits of an object array of str
 * .astype(np.float32), on the cases scripts/gen_torch_vectors.py writes into $TERN_TEST_DATA/strconv_f32.txt
 * (default build/testdata). Then, without the file: fixed cases (invalid texts, locale-free, lengths), and
 * parse(format(x)) == x on 10^6 random bit patterns. */
#include "check.h"
#include "num_ref.h"

#include "tern/num.h"

#include <errno.h>

static int hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

/* decode the hex byte string h into out (capacity cap); returns the length or -1 */
static long unhex(const char *h, char *out, size_t cap)
{
    size_t n = 0;
    for (; h[0] && h[0] != '\n'; h += 2) {
        int a = hexval(h[0]), b = a < 0 ? -1 : hexval(h[1]);
        if (b < 0 || n >= cap)
            return -1;
        out[n++] = (char)(a << 4 | b);
    }
    return (long)n;
}

static void show(const char *t, size_t n, char *dst, size_t cap) /* printable form for messages */
{
    size_t k = 0;
    for (size_t i = 0; i < n && k + 8 < cap; i++) {
        unsigned char c = (unsigned char)t[i];
        k += (size_t)(c >= 0x20 && c < 0x7F ? snprintf(dst + k, cap - k, "%c", c)
                                             : snprintf(dst + k, cap - k, "\\x%02x", c));
    }
    if (k + 8 < cap || n == 0)
        dst[k] = '\0';
    else
        snprintf(dst + k, cap - k, "...");
}

static void reference(const char *dir)
{
    TEST_BEGIN("reference");
    char path[1024];
    snprintf(path, sizeof path, "%s/strconv_f32.txt", dir);
    FILE *f = fopen(path, "r");
    if (!f) {
        CHECK_MSG(0, "cannot open %s (%s): run /usr/bin/python3 scripts/gen_torch_vectors.py build/testdata", path,
                  strerror(errno));
        return;
    }
    size_t cap = 1 << 16, nf = 0, np_ = 0, nx = 0, bad_f = 0, bad_p = 0, bad_x = 0;
    char *line = malloc(cap), *text = malloc(cap), msg[200];
    while (fgets(line, (int)cap, f)) {
        size_t ll = strlen(line);
        CHECK_MSG(ll && line[ll - 1] == '\n', "%s: line too long or unterminated", path);
        line[--ll] = '\0';
        unsigned want = 0;
        if (line[0] == 'F') {
            nf++;
            char buf[TERN_F32_TEXT_MAX];
            CHECK(sscanf(line + 2, "%8x", &want) == 1 && ll > 11);
            size_t n = tern_f32_format(ref_u2f(want), buf);
            if ((strcmp(buf, line + 11) != 0 || n != strlen(buf)) && bad_f++ < 10)
                CHECK_MSG(0, "format 0x%08x: numpy \"%s\", tern \"%s\" (length %zu)", want, line + 11, buf, n);
        } else if (line[0] == 'P' || line[0] == 'X') {
            long n = unhex(line + 11, text, cap);
            CHECK_MSG(n >= 0 && ll >= 11, "%s: bad line \"%.40s\"", path, line);
            if (n < 0)
                continue;
            float got = -1234.5f;
            int rc = tern_f32_parse(text, (size_t)n, &got);
            show(text, (size_t)n, msg, sizeof msg);
            if (line[0] == 'X') {
                nx++;
                if ((rc != -1 || ref_f2u(got) != ref_f2u(-1234.5f)) && bad_x++ < 10)
                    CHECK_MSG(0, "parse \"%s\": Python rejects it, tern returned %d (0x%08x)", msg, rc, ref_f2u(got));
            } else {
                np_++;
                CHECK(sscanf(line + 2, "%8x", &want) == 1);
                if ((rc != 0 || ref_f2u(got) != want) && bad_p++ < 10)
                    CHECK_MSG(0, "parse \"%s\": numpy 0x%08x, tern rc %d 0x%08x", msg, want, rc, ref_f2u(got));
            }
        } else {
            CHECK_MSG(0, "%s: unknown line \"%.40s\"", path, line);
        }
    }
    fclose(f);
    free(line);
    free(text);
    printf("reference: %zu formatted, %zu parsed, %zu invalid\n", nf, np_, nx);
    CHECK_MSG(nf >= 200000 && np_ >= 20000 && nx >= 20, "%s: too few cases (%zu, %zu, %zu)", path, nf, np_, nx);
    CHECK_MSG(bad_f == 0 && bad_p == 0 && bad_x == 0, "%zu format, %zu parse, %zu invalid-text mismatches", bad_f,
              bad_p, bad_x);
}

static void fixed(void)
{
    TEST_BEGIN("invalid");
    static const char *const bad[] = {"", " ", "\t\n", "0x10", "0X1p3", "1__0", "_1", "1_", "1_.5", "1._5",
                                      "1_e5", "1e_5", "nan(1)", "nan()", "1e", "1e+", "1e-", ".", "-.", "abc",
                                      "1.2.3", "+-1", "- 1", "1 1", "infin", "infinit", "infinityy", "in f", "+",
                                      "e5", ".e5", "1e5.5", "1,5", "--1", "inf_", "1e1e1", "\x1c" "1", "1\x1c",
                                      "1\x7f", "\xe9" "1", "\xc2\xa0", "1\xc2", "\xed\xa0\x80" "1", "\xc0\xb1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        float v = 7.0f;
        CHECK_MSG(tern_f32_parse(bad[i], strlen(bad[i]), &v) == -1 && v == 7.0f, "\"%s\" must be rejected", bad[i]);
    }
    float v = 7.0f;
    CHECK(tern_f32_parse("1\0" "2", 3, &v) == -1 && v == 7.0f); /* embedded NUL */
    CHECK(tern_f32_parse("\0" "1", 2, &v) == -1 && v == 7.0f);
    CHECK(tern_f32_parse("12", 1, &v) == 0 && v == 1.0f); /* only len bytes are read */
    CHECK(tern_f32_parse(NULL, 0, &v) == -1);

    TEST_BEGIN("valid");
    static const struct {
        const char *s;
        uint32_t bits;
    } good[] = {
        {"NaN", 0x7FC00000},   {"-nan", 0xFFC00000},   {"+INF", 0x7F800000},       {"-Infinity", 0xFF800000},
        {" 1_000.5 ", 0x447A2000}, {"1e-50", 0x00000000}, {"-1e-50", 0x80000000}, {"3.4028236e38", 0x7F800000},
        {"3.4028235e38", 0x7F7FFFFF}, {"1e-45", 0x00000001}, {"-0", 0x80000000}, {".5", 0x3F000000},
        {"1.", 0x3F800000},    {"1e1_0", 0x501502F9},  {"\xd9\xa1\xd9\xa2", 0x41400000}, /* Arabic-Indic 12 */
        {"\xc2\xa0" "1\xe3\x80\x80", 0x3F800000}, /* NBSP 1 IDEOGRAPHIC SPACE */
        /* 1 + 2^-24 + 10^-35: the double is 1 + 2^-24, a float32 tie that goes to even: 1.0 (strtof: 1 + 2^-23) */
        {"1.00000005960464477539062500000000001", 0x3F800000},
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        v = 7.0f;
        int rc = tern_f32_parse(good[i].s, strlen(good[i].s), &v);
        CHECK_MSG(rc == 0 && ref_f2u(v) == good[i].bits, "\"%s\": want 0x%08x, got rc %d 0x%08x", good[i].s,
                  good[i].bits, rc, ref_f2u(v));
    }

    TEST_BEGIN("format");
    static const struct {
        uint32_t bits;
        const char *s;
    } fmt[] = {
        {0x38D1B717, "1e-04"},       {0x38D1B718, "0.000100000005"}, {0x5A0E1BCA, "1e+16"},
        {0x5A0E1BC9, "9999999000000000.0"}, {0x4CEB79A3, "123456790.0"}, {0x3F800000, "1.0"},
        {0x42C80000, "100.0"},       {0x80000000, "-0.0"},          {0x00000000, "0.0"},
        {0xFFC00001, "nan"},         {0x7F800000, "inf"},           {0xFF800000, "-inf"},
        {0x00000001, "1e-45"},       {0x7F7FFFFF, "3.4028235e+38"}, {0x80800000, "-1.1754944e-38"},
        {0x3727C5AC, "1e-05"},       {0x5A5529AF, "1.5e+16"},       {0x3DCCCCCD, "0.1"},
    };
    for (size_t i = 0; i < sizeof fmt / sizeof fmt[0]; i++) {
        char buf[TERN_F32_TEXT_MAX];
        size_t n = tern_f32_format(ref_u2f(fmt[i].bits), buf);
        CHECK_MSG(strcmp(buf, fmt[i].s) == 0 && n == strlen(fmt[i].s), "0x%08x: want \"%s\", got \"%s\"",
                  fmt[i].bits, fmt[i].s, buf);
    }
}

/* parse(format(x)) == x on random bit patterns (NaNs skipped), with the longest text seen */
static void roundtrip(void)
{
    TEST_BEGIN("roundtrip");
    uint64_t st = 0x9E3779B97F4A7C15ull;
    size_t bad = 0, longest = 0;
    for (int i = 0; i < 1000000; i++) {
        st ^= st << 13, st ^= st >> 7, st ^= st << 17; /* xorshift64 */
        uint32_t u = (uint32_t)(st >> 16);
        if ((u & 0x7FFFFFFF) > 0x7F800000)
            continue;
        char buf[TERN_F32_TEXT_MAX];
        size_t n = tern_f32_format(ref_u2f(u), buf);
        if (n > longest)
            longest = n;
        float back = 0;
        if ((tern_f32_parse(buf, n, &back) != 0 || ref_f2u(back) != u) && bad++ < 10)
            CHECK_MSG(0, "0x%08x -> \"%s\" -> 0x%08x", u, buf, ref_f2u(back));
    }
    CHECK_MSG(bad == 0, "%zu round-trip failures", bad);
    CHECK_MSG(longest < TERN_F32_TEXT_MAX, "longest text %zu", longest);
    printf("roundtrip: longest text %zu characters\n", longest);
}

int main(void)
{
    const char *dir = getenv("TERN_TEST_DATA");
    if (!dir || !*dir)
        dir = "build/testdata";
    reference(dir);
    fixed();
    roundtrip();
    return check_report();
}
