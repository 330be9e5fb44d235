/* Checked size arithmetic (tern_mul_u64, tern_add_u64, tern_dims_product) at the edges of 64 bits: products just
 * below, at and above 2^64, zeros that absorb an overflow, negative dimensions, the limit, and the messages that
 * name the object and the factors. The reference is exact 128-bit arithmetic (unsigned __int128). */
#include "check.h"
#include "tern/base.h"

static void mul_case(uint64_t a, uint64_t b)
{
    unsigned __int128 exact = (unsigned __int128)a * b;
    uint64_t got = 12345;
    bool ok = tern_mul_u64(a, b, &got);
    bool fits = exact <= UINT64_MAX;
    CHECK_MSG(ok == fits, "tern_mul_u64(%" PRIu64 ", %" PRIu64 "): ok %d, exact product %s 64 bits", a, b, ok,
              fits ? "fits" : "overflows");
    CHECK_MSG(got == (fits ? (uint64_t)exact : UINT64_MAX), "tern_mul_u64(%" PRIu64 ", %" PRIu64 ") stored %" PRIu64,
              a, b, got);
}

int main(void)
{
    TEST_BEGIN("mul_u64 edges");
    const uint64_t big = UINT64_MAX, two32 = 1ull << 32;
    uint64_t cases[][2] = {{0, 0},           {0, big},          {big, 0},          {1, big},
                           {big, 1},         {2, big / 2},      {2, big / 2 + 1},  {two32, two32},
                           {two32 - 1, two32 + 1}, {two32, two32 - 1}, {3, 6148914691236517205ull},
                           {3, 6148914691236517206ull}, {big, big}, {65536ull * 65536 * 65536, 65535},
                           {65536ull * 65536 * 65536, 65536}, {4294967295ull, 4294967297ull}};
    for (size_t i = 0; i < TERN_ARRAY_LEN(cases); i++)
        mul_case(cases[i][0], cases[i][1]);
    uint64_t r;
    CHECK(tern_mul_u64(two32 - 1, two32 + 1, &r) && r == big); /* exactly 2^64 - 1 */

    TEST_BEGIN("add_u64 edges");
    CHECK(tern_add_u64(big - 1, 1, &r) && r == big);
    CHECK(!tern_add_u64(big, 1, &r) && r == big);
    CHECK(!tern_add_u64(big / 2 + 1, big / 2 + 1, &r));
    CHECK(tern_add_u64(0, 0, &r) && r == 0);

    TEST_BEGIN("dims_product: the crash shape of issue 10");
    tern_error err;
    tern_error_clear(&err);
    /* 2048*9*307*2857*6529*43691 = 2^62 + 2048 elements: it fits, but times 4 bytes it wraps to 8192 (the crash) */
    const int64_t crash[] = {2048, 9, 307, 2857, 6529, 43691};
    uint64_t wrapped = 1;
    for (int d = 0; d < 6; d++)
        wrapped *= (uint64_t)crash[d];
    CHECK_EQ_HEX(wrapped, (1ull << 62) + 2048);
    CHECK_EQ_INT(wrapped * 4, 8192); /* the wrap the issue reports for fp32 */
    tern_status st = tern_dims_product(crash, 6, 4, 0, &r, "input 'x'", &err);
    CHECK_EQ_INT(st, TERN_ERR_RANGE);
    CHECK_EQ_HEX(r, UINT64_MAX);
    CHECK_STR_CONTAINS(err.msg, "input 'x': dimension product 2048*9*307*2857*6529*43691 x 4 bytes overflows 64 bits");
    /* the elements alone fit (elem_bytes 1); a limit (as a caller's capacity) still refuses them, naming the value */
    st = tern_dims_product(crash, 6, 1, 0, &r, "t", &err);
    CHECK_EQ_INT(st, TERN_OK);
    CHECK_EQ_HEX(r, (1ull << 62) + 2048);
    st = tern_dims_product(crash, 6, 1, 1ull << 40, &r, "t", &err);
    CHECK_EQ_INT(st, TERN_ERR_RANGE);
    CHECK_STR_CONTAINS(err.msg, "t: dimension product 2048*9*307*2857*6529*43691 is 4611686018427389952, above the limit of 1099511627776");

    TEST_BEGIN("dims_product: around 2^64");
    const int64_t fits[] = {65536, 65536, 65536, 65535}; /* 2^48 * 65535 < 2^64 */
    CHECK_EQ_INT(tern_dims_product(fits, 4, 1, 0, &r, "a", &err), TERN_OK);
    CHECK_EQ_HEX(r, 0xFFFF000000000000ull);
    const int64_t exact64[] = {65536, 65536, 65536, 65536}; /* exactly 2^64: one past the largest value */
    CHECK_EQ_INT(tern_dims_product(exact64, 4, 1, 0, &r, "memset dst", &err), TERN_ERR_RANGE);
    CHECK_STR_CONTAINS(err.msg, "memset dst: dimension product 65536*65536*65536*65536 overflows 64 bits");
    const int64_t bytes_over[] = {65536, 65536, 65536, 65535}; /* fits as elements, overflows times 2 bytes */
    CHECK_EQ_INT(tern_dims_product(bytes_over, 4, 2, 0, &r, "b", &err), TERN_ERR_RANGE);
    CHECK_STR_CONTAINS(err.msg, "x 2 bytes overflows 64 bits");
    const int64_t max1[] = {INT64_MAX}; /* one dimension, times 2 = 2^64 - 2: fits */
    CHECK_EQ_INT(tern_dims_product(max1, 1, 2, 0, &r, "c", &err), TERN_OK);
    CHECK_EQ_HEX(r, 0xFFFFFFFFFFFFFFFEull);
    CHECK_EQ_INT(tern_dims_product(max1, 1, 3, 0, &r, "c", &err), TERN_ERR_RANGE);

    TEST_BEGIN("dims_product: zeros, scalars, negatives, limits");
    const int64_t zero_late[] = {INT64_MAX, INT64_MAX, 0}; /* overflows before the 0: still exactly 0 */
    CHECK_EQ_INT(tern_dims_product(zero_late, 3, 4, 0, &r, "z", &err), TERN_OK);
    CHECK_EQ_INT(r, 0);
    CHECK_EQ_INT(tern_dims_product(zero_late, 3, 0, 0, &r, "z", &err), TERN_OK); /* elem_bytes 0 */
    CHECK_EQ_INT(r, 0);
    CHECK_EQ_INT(tern_dims_product(NULL, 0, 8, 0, &r, "scalar", &err), TERN_OK);
    CHECK_EQ_INT(r, 8);
    const int64_t neg[] = {3, -1, 5};
    CHECK_EQ_INT(tern_dims_product(neg, 3, 1, 0, &r, "n", &err), TERN_ERR_RANGE);
    CHECK_STR_CONTAINS(err.msg, "n: dimension 1 is -1 (negative)");
    const int64_t small[] = {3, 4, 5};
    CHECK_EQ_INT(tern_dims_product(small, 3, 2, 120, &r, "l", &err), TERN_OK); /* at the limit: allowed */
    CHECK_EQ_INT(r, 120);
    CHECK_EQ_INT(tern_dims_product(small, 3, 2, 119, &r, "l", &err), TERN_ERR_RANGE);
    CHECK_STR_CONTAINS(err.msg, "l: dimension product 3*4*5 x 2 bytes is 120, above the limit of 119");
    CHECK_EQ_INT(tern_dims_product(small, -1, 1, 0, &r, "r", &err), TERN_ERR_RANGE);
    /* NULL err is allowed: the status alone */
    CHECK_EQ_INT(tern_dims_product(exact64, 4, 1, 0, &r, "q", NULL), TERN_ERR_RANGE);

    TEST_BEGIN("dims_product: a long factor list is cut, not overrun");
    int64_t many[64];
    for (int d = 0; d < 64; d++)
        many[d] = 1000000007;
    CHECK_EQ_INT(tern_dims_product(many, 64, 1, 0, &r, "long", &err), TERN_ERR_RANGE);
    CHECK_STR_CONTAINS(err.msg, "long: dimension product 1000000007*1000000007*");
    CHECK_STR_CONTAINS(err.msg, "... overflows 64 bits");
    return check_report();
}
