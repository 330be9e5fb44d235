/* A minimal test harness shared by every test binary: CHECK macros that report what was expected and what
 * came, and a closing "N passed, N failed" line. A binary exits non-zero if any check failed. Header-only so
 * each test file stays one binary. */
#ifndef TERN_TESTS_CHECK_H
#define TERN_TESTS_CHECK_H

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int check_passed_, check_failed_;
static const char *check_current_ = "";

#define TEST_BEGIN(name) (check_current_ = (name))

#define CHECK_MSG(cond, ...)                                                                         \
    do {                                                                                             \
        if (cond) {                                                                                  \
            check_passed_++;                                                                         \
        } else {                                                                                     \
            check_failed_++;                                                                         \
            fprintf(stderr, "NOT OK %s (%s:%d): ", check_current_, __FILE__, __LINE__);              \
            fprintf(stderr, __VA_ARGS__);                                                            \
            fputc('\n', stderr);                                                                     \
        }                                                                                            \
    } while (0)

#define CHECK(cond) CHECK_MSG((cond), "expected %s", #cond)
#define CHECK_EQ_INT(got, want)                                                                      \
    do {                                                                                             \
        long long g_ = (long long)(got), w_ = (long long)(want);                                     \
        CHECK_MSG(g_ == w_, "%s: expected %lld, got %lld", #got, w_, g_);                            \
    } while (0)
#define CHECK_EQ_HEX(got, want)                                                                      \
    do {                                                                                             \
        unsigned long long g_ = (unsigned long long)(got), w_ = (unsigned long long)(want);          \
        CHECK_MSG(g_ == w_, "%s: expected 0x%llx, got 0x%llx", #got, w_, g_);                        \
    } while (0)
#define CHECK_NEAR(got, want, tol)                                                                   \
    do {                                                                                             \
        double g_ = (double)(got), w_ = (double)(want), t_ = (double)(tol);                          \
        CHECK_MSG(fabs(g_ - w_) <= t_, "%s: expected %.17g (+-%g), got %.17g", #got, w_, t_, g_);    \
    } while (0)
#define CHECK_STR_CONTAINS(hay, needle)                                                              \
    do {                                                                                             \
        const char *h_ = (hay), *n_ = (needle);                                                      \
        CHECK_MSG(h_ && strstr(h_, n_), "%s: expected to contain \"%s\", got \"%s\"", #hay, n_,      \
                  h_ ? h_ : "(null)");                                                               \
    } while (0)

/* Print the closing line and return the process exit code. */
static inline int check_report(void)
{
    printf("%d passed, %d failed\n", check_passed_, check_failed_);
    return check_failed_ ? 1 : 0;
}

#endif
