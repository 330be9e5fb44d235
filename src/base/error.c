/* Error records and invariant failures for every layer: formatting of messages, context prefixes and the
 * status-code names. No global state: the message lives in the caller's tern_error. */
#include "tern/base.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

tern_status tern_error_set(tern_error *err, tern_status code, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        err->code = code;
    }
    return code;
}

tern_status tern_error_prefix(tern_error *err, const char *fmt, ...)
{
    if (!err)
        return TERN_OK;
    char prefix[TERN_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    /* Shift the old message right and put the prefix in front, truncating the tail if it does not fit. */
    size_t plen = strlen(prefix), olen = strnlen(err->msg, sizeof err->msg - 1);
    if (plen > sizeof err->msg - 1)
        plen = sizeof err->msg - 1;
    if (plen + olen > sizeof err->msg - 1)
        olen = sizeof err->msg - 1 - plen;
    memmove(err->msg + plen, err->msg, olen);
    memcpy(err->msg, prefix, plen);
    err->msg[plen + olen] = '\0';
    return err->code;
}

void tern_error_clear(tern_error *err)
{
    if (err) {
        err->code = TERN_OK;
        err->msg[0] = '\0';
    }
}

const char *tern_status_name(tern_status code)
{
    switch (code) {
    case TERN_OK: return "ok";
    case TERN_ERR_INVALID: return "invalid";
    case TERN_ERR_IO: return "io";
    case TERN_ERR_PARSE: return "parse";
    case TERN_ERR_RANGE: return "range";
    case TERN_ERR_NOT_FOUND: return "not-found";
    case TERN_ERR_NOMEM: return "out-of-memory";
    case TERN_ERR_UNSUPPORTED: return "unsupported";
    }
    return "unknown";
}

const char *tern_version(void) { return TERN_VERSION; }

void tern_assert_fail(const char *expr, const char *file, int line)
{
    fprintf(stderr, "tern: internal error: assertion `%s` failed at %s:%d\n", expr, file, line);
    abort();
}
