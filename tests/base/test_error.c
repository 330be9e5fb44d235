/* Tests of the base layer: error messages are formatted, prefixed and named as documented. */
#include "check.h"
#include "tern/base.h"

int main(void)
{
    tern_error err;
    tern_error_clear(&err);
    TEST_BEGIN("error_set");
    CHECK_EQ_INT(tern_error_set(&err, TERN_ERR_RANGE, "field %s: got %d", "x", 7), TERN_ERR_RANGE);
    CHECK_EQ_INT(err.code, TERN_ERR_RANGE);
    CHECK(strcmp(err.msg, "field x: got 7") == 0);
    TEST_BEGIN("error_prefix");
    tern_error_prefix(&err, "file %s: ", "a.json");
    CHECK(strcmp(err.msg, "file a.json: field x: got 7") == 0);
    TEST_BEGIN("error_null");
    CHECK_EQ_INT(tern_error_set(NULL, TERN_ERR_IO, "ignored"), TERN_ERR_IO);
    TEST_BEGIN("status_names");
    CHECK(strcmp(tern_status_name(TERN_ERR_PARSE), "parse") == 0);
    CHECK(strcmp(tern_status_name(TERN_OK), "ok") == 0);
    CHECK(strlen(tern_version()) > 0);
    return check_report();
}
