/* The `tern` subcommands' shared option parsing (args.h): one "needs a value" rule and strict, range-checked
 * numbers. strtoll and friends alone accept "2abc" as 2, "abc" as 0 and " 7" as 7, and wrap or clamp out-of-range
 * words; every check here exists so that a typo is reported instead of running with another number. */
#include "cli/args.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* An option word: "-x..." or "--...". "-" (stdin by convention) and "-3" / "-.5" (negative numbers) are values. */
static int is_option_word(const char *s)
{
    return s[0] == '-' && (s[1] == '-' || isalpha((unsigned char)s[1]));
}

const char *tern_arg_value(const char *cmd, int argc, char **argv, int *i, const char *what)
{
    if (*i + 1 >= argc || is_option_word(argv[*i + 1])) {
        fprintf(stderr, "%s: %s needs a value (%s)%s%s%s\n", cmd, argv[*i], what,
                *i + 1 < argc ? "; got the option '" : "", *i + 1 < argc ? argv[*i + 1] : "",
                *i + 1 < argc ? "'" : "");
        return NULL;
    }
    *i += 1;
    return argv[*i];
}

/* strto* skip leading white space; a strict word starts with a sign or a digit (or '.', for numbers). */
static int starts_like_number(const char *s, int allow_sign, int allow_dot)
{
    unsigned char c = (unsigned char)s[0];
    return isdigit(c) || (allow_sign && (c == '-' || c == '+')) || (allow_dot && c == '.');
}

int tern_arg_int(const char *cmd, const char *opt, const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    char *end = NULL;
    errno = 0;
    long long v = starts_like_number(s, 1, 0) ? strtoll(s, &end, 10) : 0;
    if (!end || end == s || *end || errno || v < lo || v > hi) {
        fprintf(stderr, "%s: %s expects an integer in [%" PRId64 ", %" PRId64 "], got '%s'\n", cmd, opt, lo, hi, s);
        return 2;
    }
    *out = v;
    return 0;
}

int tern_arg_uint(const char *cmd, const char *opt, const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
    char *end = NULL;
    errno = 0;
    /* no sign: strtoull would turn "-1" into 2^64 - 1 */
    unsigned long long v = starts_like_number(s, 0, 0) ? strtoull(s, &end, 10) : 0;
    if (!end || end == s || *end || errno || v < lo || v > hi) {
        fprintf(stderr, "%s: %s expects an integer in [%" PRIu64 ", %" PRIu64 "], got '%s'\n", cmd, opt, lo, hi, s);
        return 2;
    }
    *out = v;
    return 0;
}

int tern_arg_float(const char *cmd, const char *opt, const char *s, double lo, double hi, double *out)
{
    char *end = NULL;
    errno = 0;
    double v = starts_like_number(s, 1, 1) ? strtod(s, &end) : 0;
    if (!end || end == s || *end || errno || !isfinite(v) || v < lo || v > hi) {
        fprintf(stderr, "%s: %s expects a number in [%g, %g], got '%s'\n", cmd, opt, lo, hi, s);
        return 2;
    }
    *out = v;
    return 0;
}
