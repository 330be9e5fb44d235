/* float32 <-> text exactly as numpy 1.24 does it, the reference of ONNX's Cast tests to and from STRING.
 *
 * Format: str(np.float32(x)). numpy prints with Dragon4 in "unique" mode (Steele & White free-format digits with
 * Burger & Dybvig's exponent estimate, numpy/core/src/multiarray/dragon4.c): digits are generated one at a time
 * until the truncated value or the value rounded up in the last digit falls inside x's rounding interval (the
 * bounds included when x's mantissa is even, as round-to-nearest-even would map them back to x); the last digit
 * is then rounded to the nearer candidate, a tie going to the even digit. That is "fewest digits, then closest".
 * The interval is half an ulp each side, except for powers of two above the smallest normal, whose lower side is
 * a quarter of the upper ulp. The exact arithmetic runs on small fixed-size big integers (a float32 needs at most
 * about 210 bits). Layout: scalartypes.c.src's floattype_str: positional when |x| == 0 or 1e-4 <= |x| < 1e16 (the
 * comparison is done in long double; no float32 lies between the long double and the double nearest to 1e-4,
 * and 1e16 is exact in both, so double is the same here), "1.0" style (LeaveOneZero) for positional, "1e-05"
 * style (DptZeros, at least two exponent digits) for scientific.
 *
 * Parse: numpy's object -> float32 cast calls Python's float(obj) and then casts the double to float with the C
 * cast (round to nearest even), so a decimal is rounded twice. We reproduce float()'s grammar (CPython 3.11:
 * PyFloat_FromString, _Py_string_to_number_with_underscores, _Py_parse_inf_or_nan, _Py_dg_strtod), rewrite the
 * digits into a canonical "DIGITSe[-]EXP" form with no decimal point (so glibc's strtod, which is correctly
 * rounded, reads it the same in every locale) and cast the double to float. Beyond 800 significant digits the
 * tail is replaced by a single sticky '1': no double rounding boundary (at most 767 significant digits) can lie
 * between the truncated and the true value, so the double is unchanged. The input is UTF-8; as in CPython, a
 * non-ASCII Unicode whitespace character counts as a space and a Unicode decimal digit (category Nd, Unicode 14
 * as in Debian 12's Python 3.11) as its ASCII digit. */
#include "tern/num.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------------------------
 * Small big integers: little-endian 32-bit blocks. The largest value met is scale << 31 for the smallest
 * subnormal (about 2^185) times 10 in the digit loop, so 8 blocks (256 bits) suffice; 10 leave a margin. */
#define BN_BLOCKS 10

typedef struct {
    uint32_t n; /* blocks in use; the top one is non-zero (0 for the value zero) */
    uint32_t b[BN_BLOCKS];
} bn;

static void bn_set(bn *a, uint64_t v)
{
    a->b[0] = (uint32_t)v;
    a->b[1] = (uint32_t)(v >> 32);
    a->n = a->b[1] ? 2 : a->b[0] ? 1 : 0;
}

static void bn_shl(bn *a, unsigned k)
{
    if (a->n == 0)
        return;
    unsigned w = k / 32, s = k % 32;
    uint32_t n = a->n;
    if (s == 0) {
        for (uint32_t i = n; i-- > 0;)
            a->b[i + w] = a->b[i];
    } else {
        a->b[n + w] = a->b[n - 1] >> (32 - s);
        for (uint32_t i = n - 1; i > 0; i--)
            a->b[i + w] = (a->b[i] << s) | (a->b[i - 1] >> (32 - s));
        a->b[w] = a->b[0] << s;
        n++;
    }
    for (unsigned i = 0; i < w; i++)
        a->b[i] = 0;
    a->n = n + w;
    while (a->n && a->b[a->n - 1] == 0)
        a->n--;
}

static void bn_mul_small(bn *a, uint32_t m)
{
    uint64_t carry = 0;
    for (uint32_t i = 0; i < a->n; i++) {
        uint64_t t = (uint64_t)a->b[i] * m + carry;
        a->b[i] = (uint32_t)t;
        carry = t >> 32;
    }
    if (carry)
        a->b[a->n++] = (uint32_t)carry;
}

static void bn_mul_pow10(bn *a, unsigned k)
{
    static const uint32_t p10[10] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000, 1000000000};
    for (; k >= 9; k -= 9)
        bn_mul_small(a, p10[9]);
    if (k)
        bn_mul_small(a, p10[k]);
}

static int bn_cmp(const bn *a, const bn *c)
{
    if (a->n != c->n)
        return a->n < c->n ? -1 : 1;
    for (uint32_t i = a->n; i-- > 0;)
        if (a->b[i] != c->b[i])
            return a->b[i] < c->b[i] ? -1 : 1;
    return 0;
}

static void bn_add(bn *r, const bn *a, const bn *c) /* r = a + c (r may alias neither) */
{
    const bn *lo = a->n < c->n ? a : c, *hi = a->n < c->n ? c : a;
    uint64_t carry = 0;
    uint32_t i = 0;
    for (; i < lo->n; i++) {
        uint64_t t = (uint64_t)hi->b[i] + lo->b[i] + carry;
        r->b[i] = (uint32_t)t;
        carry = t >> 32;
    }
    for (; i < hi->n; i++) {
        uint64_t t = (uint64_t)hi->b[i] + carry;
        r->b[i] = (uint32_t)t;
        carry = t >> 32;
    }
    r->n = hi->n;
    if (carry)
        r->b[r->n++] = (uint32_t)carry;
}

static void bn_sub(bn *a, const bn *c) /* a -= c, requires a >= c */
{
    int64_t borrow = 0;
    for (uint32_t i = 0; i < a->n; i++) {
        int64_t t = (int64_t)a->b[i] - (i < c->n ? c->b[i] : 0) + borrow;
        a->b[i] = (uint32_t)t;
        borrow = t < 0 ? -1 : 0;
    }
    while (a->n && a->b[a->n - 1] == 0)
        a->n--;
}

/* floor(a / s) for a < 10 s, leaving the remainder in a. */
static uint32_t bn_divmod_small(bn *a, const bn *s)
{
    uint32_t q = 0;
    if (a->n >= s->n && s->n > 0) {
        /* estimate from the top 64 bits of both, aligned on s's top block; it never overshoots */
        uint32_t top = s->n - 1;
        uint64_t num = (a->n > s->n ? (uint64_t)a->b[top + 1] << 32 : 0) | a->b[top];
        q = (uint32_t)(num / ((uint64_t)s->b[top] + 1));
        if (q > 9)
            q = 9;
        if (q) {
            bn t = *s;
            bn_mul_small(&t, q);
            bn_sub(a, &t);
        }
    }
    while (bn_cmp(a, s) >= 0) {
        bn_sub(a, s);
        q++;
    }
    return q;
}

/* Dragon4 "unique" digits of the positive finite float32 with bit pattern u (u != 0): writes the digits (at most
 * 9, never a trailing zero: a digit loop that could stop on a 0 would have stopped one digit earlier) and returns
 * their count; *exp10 is the decimal exponent of the first digit. */
static int shortest_digits(uint32_t u, char *digits, int *exp10)
{
    uint32_t fexp = (u >> 23) & 0xFF, fman = u & 0x7FFFFF;
    uint32_t mant;
    int e, mbit, unequal;
    if (fexp) {
        mant = fman | 0x800000;
        e = (int)fexp - 150;
        mbit = 23;
        unequal = fexp != 1 && fman == 0;
    } else {
        mant = fman;
        e = -149;
        mbit = 31 - __builtin_clz(mant);
        unequal = 0;
    }
    int even = (mant & 1) == 0;

    /* value = v / s, margins mlo / s and mhi / s (half the distance to the neighbours), all scaled by 2 or 4 */
    bn v, s, mlo, mhi;
    int sh = unequal ? 2 : 1;
    bn_set(&v, mant);
    if (e > 0) {
        bn_shl(&v, (unsigned)(e + sh));
        bn_set(&s, 1u << sh);
        bn_set(&mlo, 1);
        bn_shl(&mlo, (unsigned)e);
    } else {
        bn_shl(&v, (unsigned)sh);
        bn_set(&s, 1);
        bn_shl(&s, (unsigned)(-e + sh));
        bn_set(&mlo, 1);
    }
    /* Burger & Dybvig's estimate of floor(log10(x)) + 1, possibly one too low (numpy's formula) */
    int k = (int)ceil((double)(mbit + e) * 0.30102999566398119521373889472449 - 0.69);
    if (k > 0)
        bn_mul_pow10(&s, (unsigned)k);
    else if (k < 0) {
        bn_mul_pow10(&v, (unsigned)-k);
        bn_mul_pow10(&mlo, (unsigned)-k);
    }
    if (bn_cmp(&v, &s) >= 0)
        k++;
    else {
        bn_mul_small(&v, 10);
        bn_mul_small(&mlo, 10);
    }
    *exp10 = k - 1;
    /* scale everything so that s's top block has its highest bit at 27 (numpy does the same): the quotient
     * estimate in bn_divmod_small is then exact or one short, and 10 v never needs a block more than s */
    unsigned hb = 31 - (unsigned)__builtin_clz(s.b[s.n - 1]), norm = (32 + 27 - hb) % 32;
    bn_shl(&s, norm);
    bn_shl(&v, norm);
    bn_shl(&mlo, norm);
    mhi = mlo;
    if (unequal)
        bn_shl(&mhi, 1);

    int n = 0, low, high;
    uint32_t d;
    for (;;) {
        d = bn_divmod_small(&v, &s);
        bn vh;
        bn_add(&vh, &v, &mhi);
        int c = bn_cmp(&v, &mlo);
        low = even ? c <= 0 : c < 0;
        c = bn_cmp(&vh, &s);
        high = even ? c >= 0 : c > 0;
        if (low || high || n >= 16) /* a float32 never needs more than 9 digits; 16 only bounds the loop */
            break;
        digits[n++] = (char)('0' + d);
        bn_mul_small(&v, 10);
        bn_mul_small(&mlo, 10);
        bn_mul_small(&mhi, 10);
    }
    int down = low;
    if (low == high) { /* both candidates round-trip: the nearer one, a tie to the even digit */
        bn_shl(&v, 1);
        int c = bn_cmp(&v, &s);
        down = c < 0 || (c == 0 && (d & 1) == 0);
    }
    if (down || d < 9) {
        digits[n++] = (char)('0' + d + (down ? 0 : 1));
    } else { /* round a 9 up: carry into the previous digits */
        for (;;) {
            if (n == 0) {
                digits[n++] = '1';
                (*exp10)++;
                break;
            }
            if (digits[n - 1] != '9') {
                digits[n - 1]++;
                break;
            }
            n--;
        }
    }
    return n;
}

size_t tern_f32_format(float x, char buf[TERN_F32_TEXT_MAX])
{
    uint32_t u;
    memcpy(&u, &x, 4);
    char *p = buf;
    uint32_t a = u & 0x7FFFFFFF;
    if (a > 0x7F800000) {
        memcpy(buf, "nan", 4);
        return 3;
    }
    if (u >> 31)
        *p++ = '-';
    if (a == 0x7F800000) {
        memcpy(p, "inf", 4);
        return (size_t)(p - buf) + 3;
    }
    if (a == 0) {
        memcpy(p, "0.0", 4);
        return (size_t)(p - buf) + 3;
    }
    char dg[24];
    int e10, n = shortest_digits(a, dg, &e10);
    double ax = fabs((double)x);
    if (ax >= 1e-4 && ax < 1e16) {
        if (e10 < 0) {
            *p++ = '0';
            *p++ = '.';
            for (int i = -1; i > e10; i--)
                *p++ = '0';
            memcpy(p, dg, (size_t)n);
            p += n;
        } else {
            for (int i = 0; i <= e10; i++)
                *p++ = i < n ? dg[i] : '0';
            *p++ = '.';
            if (n > e10 + 1) {
                memcpy(p, dg + e10 + 1, (size_t)(n - e10 - 1));
                p += n - e10 - 1;
            } else {
                *p++ = '0';
            }
        }
    } else {
        *p++ = dg[0];
        if (n > 1) {
            *p++ = '.';
            memcpy(p, dg + 1, (size_t)(n - 1));
            p += n - 1;
        }
        *p++ = 'e';
        *p++ = e10 < 0 ? '-' : '+';
        int ae = e10 < 0 ? -e10 : e10;
        if (ae >= 100)
            *p++ = (char)('0' + ae / 100);
        *p++ = (char)('0' + ae / 10 % 10);
        *p++ = (char)('0' + ae % 10);
    }
    *p = '\0';
    return (size_t)(p - buf);
}

/* ---------------------------------------------------------------------------------------------------------------
 * Parsing. */

/* The code points of the digit zero of every Unicode 14 Nd block of ten (above ASCII). */
static const uint32_t nd_zeros[] = {
    0x660,   0x6F0,   0x7C0,   0x966,   0x9E6,   0xA66,   0xAE6,   0xB66,   0xBE6,   0xC66,   0xCE6,
    0xD66,   0xDE6,   0xE50,   0xED0,   0xF20,   0x1040,  0x1090,  0x17E0,  0x1810,  0x1946,  0x19D0,
    0x1A80,  0x1A90,  0x1B50,  0x1BB0,  0x1C40,  0x1C50,  0xA620,  0xA8D0,  0xA900,  0xA9D0,  0xA9F0,
    0xAA50,  0xABF0,  0xFF10,  0x104A0, 0x10D30, 0x11066, 0x110F0, 0x11136, 0x111D0, 0x112F0, 0x11450,
    0x114D0, 0x11650, 0x116C0, 0x11730, 0x118E0, 0x11950, 0x11C50, 0x11D50, 0x11DA0, 0x16A60, 0x16AC0,
    0x16B50, 0x1D7CE, 0x1D7D8, 0x1D7E2, 0x1D7EC, 0x1D7F6, 0x1E140, 0x1E2F0, 0x1E950, 0x1FBF0,
};

/* CPython's _PyUnicode_TransformDecimalAndSpaceToASCII for one non-ASCII code point: ' ' for whitespace, the
 * ASCII digit for a decimal digit, 0 for anything else (the string is then invalid). */
static char transform_cp(uint32_t c)
{
    if (c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
        c == 0x202F || c == 0x205F || c == 0x3000)
        return ' ';
    for (size_t i = 0; i < sizeof nd_zeros / sizeof nd_zeros[0]; i++)
        if (c >= nd_zeros[i] && c < nd_zeros[i] + 10)
            return (char)('0' + (c - nd_zeros[i]));
    return 0;
}

/* Decode strict UTF-8 at s[*i] (a lead byte >= 0x80); returns the code point or UINT32_MAX if malformed. */
static uint32_t utf8_next(const unsigned char *s, size_t len, size_t *i)
{
    unsigned char c = s[*i];
    uint32_t cp, min;
    int extra;
    if (c >= 0xC2 && c <= 0xDF) {
        cp = c & 0x1F, extra = 1, min = 0x80;
    } else if (c >= 0xE0 && c <= 0xEF) {
        cp = c & 0x0F, extra = 2, min = 0x800;
    } else if (c >= 0xF0 && c <= 0xF4) {
        cp = c & 0x07, extra = 3, min = 0x10000;
    } else {
        return UINT32_MAX;
    }
    if (len - *i <= (size_t)extra)
        return UINT32_MAX;
    for (int k = 1; k <= extra; k++) {
        unsigned char t = s[*i + (size_t)k];
        if ((t & 0xC0) != 0x80)
            return UINT32_MAX;
        cp = cp << 6 | (t & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return UINT32_MAX;
    *i += (size_t)extra + 1;
    return cp;
}

static int is_py_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }
static int is_digit(char c) { return c >= '0' && c <= '9'; }

static int word_ieq(const char *s, const char *end, const char *w) /* s..end starts with w, ASCII case-insensitive */
{
    for (; *w; w++, s++)
        if (s >= end || (*s | 0x20) != *w)
            return 0;
    return 1;
}

#define KEEP_DIGITS 800

/* Parse the transformed ASCII text t[0..n) with CPython's float() rules. */
static int parse_ascii(const char *t, size_t n, float *out)
{
    /* underscores: only between two digits (_Py_string_to_number_with_underscores); they are then dropped */
    for (size_t i = 0; i < n; i++)
        if (t[i] == '_' && (i == 0 || !is_digit(t[i - 1]) || i + 1 == n || !is_digit(t[i + 1])))
            return -1;
    const char *p = t, *end = t + n;
    while (p < end && is_py_space(*p))
        p++;
    while (end > p && is_py_space(end[-1]))
        end--;
    if (p == end)
        return -1;
    int neg = 0;
    if (*p == '+' || *p == '-')
        neg = *p++ == '-';
    if (p < end && ((*p | 0x20) == 'i' || (*p | 0x20) == 'n')) {
        float r;
        if (word_ieq(p, end, "infinity") && end - p == 8)
            r = INFINITY;
        else if (word_ieq(p, end, "inf") && end - p == 3)
            r = INFINITY;
        else if (word_ieq(p, end, "nan") && end - p == 3)
            r = NAN;
        else
            return -1;
        if (isnan(r)) {
            uint32_t u = neg ? 0xFFC00000u : 0x7FC00000u;
            memcpy(out, &u, 4);
        } else {
            *out = neg ? -r : r;
        }
        return 0;
    }

    char buf[KEEP_DIGITS + 40];
    size_t nd = 0;          /* significant digits kept in buf */
    int sticky = 0;         /* a non-zero digit was dropped */
    long long dexp = 0;     /* value = buf digits * 10^(dexp + exponent) */
    int any = 0;            /* some mantissa digit was seen */
    for (; p < end && (is_digit(*p) || *p == '_'); p++) {
        if (*p == '_')
            continue;
        any = 1;
        if (nd == 0 && *p == '0')
            continue;
        if (nd < KEEP_DIGITS)
            buf[nd++] = *p;
        else
            dexp++, sticky |= *p != '0';
    }
    if (p < end && *p == '.') {
        p++;
        for (; p < end && (is_digit(*p) || *p == '_'); p++) {
            if (*p == '_')
                continue;
            any = 1;
            if (nd == 0 && *p == '0') {
                dexp--;
                continue;
            }
            if (nd < KEEP_DIGITS)
                buf[nd++] = *p, dexp--;
            else
                sticky |= *p != '0';
        }
    }
    if (!any)
        return -1;
    long long ex = 0;
    if (p < end && (*p | 0x20) == 'e') {
        p++;
        int eneg = 0;
        if (p < end && (*p == '+' || *p == '-'))
            eneg = *p++ == '-';
        int edig = 0;
        for (; p < end && (is_digit(*p) || *p == '_'); p++) {
            if (*p == '_')
                continue;
            edig = 1;
            if (ex < 1000000000000LL)
                ex = ex * 10 + (*p - '0');
        }
        if (!edig)
            return -1;
        if (eneg)
            ex = -ex;
    }
    if (p != end)
        return -1;
    double d = 0.0;
    if (nd > 0) {
        if (sticky)
            buf[nd++] = '1', dexp--;
        long long te = ex + dexp;
        if (te > 100000)
            te = 100000;
        if (te < -100000)
            te = -100000;
        size_t k = nd;
        buf[k++] = 'e';
        if (te < 0)
            buf[k++] = '-', te = -te;
        char tmp[8];
        int tn = 0;
        do
            tmp[tn++] = (char)('0' + te % 10);
        while (te /= 10);
        while (tn)
            buf[k++] = tmp[--tn];
        buf[k] = '\0';
        char *stop;
        d = strtod(buf, &stop);
        if (stop != buf + k)
            return -1; /* cannot happen: the canonical form is plain ASCII digits */
    }
    if (neg)
        d = -d;
    *out = (float)d; /* the second rounding, as numpy's (npy_float)MyPyFloat_AsDouble(obj) */
    return 0;
}

int tern_f32_parse(const char *s, size_t len, float *out)
{
    if (!s || !out)
        return -1;
    const unsigned char *u = (const unsigned char *)s;
    char small[256];
    char *t = len <= sizeof small ? small : malloc(len);
    if (!t)
        return -1;
    size_t n = 0;
    int rc = 0;
    for (size_t i = 0; i < len && rc == 0;) {
        if (u[i] == 0) { /* CPython's parser stops at a NUL, which then is not the end of the text */
            rc = -1;
        } else if (u[i] < 0x80) {
            t[n++] = (char)u[i++];
        } else {
            uint32_t cp = utf8_next(u, len, &i);
            char c = cp == UINT32_MAX ? 0 : transform_cp(cp);
            if (!c)
                rc = -1;
            else
                t[n++] = c;
        }
    }
    if (rc == 0)
        rc = parse_ascii(t, n, out);
    if (t != small)
        free(t);
    return rc;
}
