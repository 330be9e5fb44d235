/* Checked size arithmetic for the base layer: the one place where tern multiplies sizes taken from files it does
 * not trust (tensor shapes, access-pattern counts, machine figures). Every caller learns about an overflow through
 * the return value instead of getting a wrapped, small size that passes later checks and under-allocates. Built
 * on the compiler's overflow builtins, so the check is exact and costs a flag test. */
#include "tern/base.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

bool tern_mul_u64(uint64_t a, uint64_t b, uint64_t *out)
{
    uint64_t r;
    if (__builtin_mul_overflow(a, b, &r)) {
        *out = UINT64_MAX;
        return false;
    }
    *out = r;
    return true;
}

bool tern_add_u64(uint64_t a, uint64_t b, uint64_t *out)
{
    uint64_t r;
    if (__builtin_add_overflow(a, b, &r)) {
        *out = UINT64_MAX;
        return false;
    }
    *out = r;
    return true;
}

/* "2048*9*307" into buf, cut with "..." when it does not fit, so a message always shows the factors. */
static void dims_text(const int64_t *dims, int rank, char *buf, size_t len)
{
    size_t n = 0;
    buf[0] = '\0';
    for (int d = 0; d < rank; d++) {
        int w = snprintf(buf + n, len - n, "%s%" PRId64, d ? "*" : "", dims[d]);
        if (w < 0 || (size_t)w >= len - n) {
            if (len >= 4)
                memcpy(buf + len - 4, "...", 4);
            return;
        }
        n += (size_t)w;
    }
}

tern_status tern_dims_product(const int64_t *dims, int rank, uint64_t elem_bytes, uint64_t limit, uint64_t *out,
                              const char *what, tern_error *err)
{
    *out = UINT64_MAX;
    if (rank < 0)
        return tern_error_set(err, TERN_ERR_RANGE, "%s: rank %d is negative", what, rank);
    for (int d = 0; d < rank; d++)
        if (dims[d] < 0)
            return tern_error_set(err, TERN_ERR_RANGE, "%s: dimension %d is %" PRId64 " (negative)", what, d, dims[d]);
    uint64_t n = elem_bytes;
    bool ok = true;
    /* A zero anywhere makes the product 0 whatever the other factors are: no overflow to report. */
    for (int d = 0; d < rank && ok; d++)
        ok = tern_mul_u64(n, (uint64_t)dims[d], &n);
    if (!ok)
        for (int d = 0; d < rank; d++)
            if (dims[d] == 0 || elem_bytes == 0) {
                ok = true;
                n = 0;
                break;
            }
    if (!ok || (limit && n > limit)) {
        char text[160];
        dims_text(dims, rank, text, sizeof text);
        char bytes[48] = "";
        if (elem_bytes != 1)
            snprintf(bytes, sizeof bytes, " x %" PRIu64 " bytes", elem_bytes);
        if (!ok)
            return tern_error_set(err, TERN_ERR_RANGE, "%s: dimension product %s%s overflows 64 bits", what, text,
                                  bytes);
        return tern_error_set(err, TERN_ERR_RANGE, "%s: dimension product %s%s is %" PRIu64 ", above the limit of %"
                              PRIu64, what, text, bytes, n, limit);
    }
    *out = n;
    return TERN_OK;
}
