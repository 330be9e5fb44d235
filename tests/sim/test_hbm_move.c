/* Device-to-device HBM transfers (tern_core_hbm_copy, tern_core_hbm_move): the destination gets the source's bytes
 * for every placement (page-aligned, at the same offset within a page, at different offsets, overlapping, pages
 * never touched); a move hands whole pages over without copying them (the source then holds the destination's
 * former bytes there, while a copy keeps the source); ranges outside HBM are refused, changing nothing. */
#include "check.h"
#include "sim_test_util.h"

static void fill(uint8_t *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)((i * 2654435761u + seed * 40503u) >> 13);
}

static int hbm_is(tern_core *core, uint64_t addr, const uint8_t *want, size_t n)
{
    tern_error err;
    uint8_t *got = malloc(n ? n : 1);
    int ok = got && tern_core_hbm_read(core, addr, got, n, &err) == TERN_OK && !memcmp(got, want, n);
    free(got);
    return ok;
}

int main(void)
{
    const uint64_t P = tern_core_hbm_page_bytes();
    const size_t n = (size_t)(2 * P + P / 3); /* two whole pages and a piece */
    tern_error err;
    uint8_t *a = malloc(n), *b = malloc(n), *want = malloc(n);
    fill(a, n, 1);
    fill(b, n, 2);
    CHECK(P >= 4096 && (P & (P - 1)) == 0);

    /* (dst, src): page-aligned; the same offset within a page; different offsets */
    const uint64_t place[3][2] = {{8 * P, 2 * P}, {8 * P + 1000, 2 * P + 1000}, {8 * P + 64, 2 * P + 4160}};
    const char *what[3] = {"page-aligned", "at one offset within a page", "at different offsets"};
    for (int k = 0; k < 3; k++)
        for (int mv = 0; mv < 2; mv++) {
            TEST_BEGIN(what[k]);
            tern_core *core = st_core("trn1.2xlarge");
            uint64_t d = place[k][0], s = place[k][1];
            CHECK_EQ_INT(tern_core_hbm_write(core, d, b, n, &err), TERN_OK);
            CHECK_EQ_INT(tern_core_hbm_write(core, s, a, n, &err), TERN_OK);
            tern_status st = mv ? tern_core_hbm_move(core, d, s, n, &err) : tern_core_hbm_copy(core, d, s, n, &err);
            CHECK_MSG(st == TERN_OK, "%s", err.msg);
            CHECK_MSG(hbm_is(core, d, a, n), "%s %s: the destination does not hold the source's bytes",
                      mv ? "move" : "copy", what[k]);
            if (!mv) {
                CHECK_MSG(hbm_is(core, s, a, n), "copy %s: the source changed", what[k]);
            } else if (k < 2) {
                /* the whole pages inside both ranges changed owners: the source holds the destination's former
                 * bytes there; before and after them it keeps its own (those were copied) */
                uint64_t head = (P - (d & (P - 1))) & (P - 1), whole = (n - head) / P * P;
                memcpy(want, a, n);
                memcpy(want + head, b + head, (size_t)whole);
                CHECK_MSG(hbm_is(core, s, want, n), "move %s: the pages were not handed over", what[k]);
                CHECK(whole >= P);
            } else {
                CHECK_MSG(hbm_is(core, s, a, n), "move %s: the source changed (it must be copied)", what[k]);
            }
            /* bytes just outside the destination are untouched (fresh HBM reads as zeros here) */
            uint8_t z[64] = {0};
            CHECK(hbm_is(core, d - 64, z, 64) && hbm_is(core, d + n, z, 64));
            tern_core_free(core);
        }

    TEST_BEGIN("overlapping ranges copy as memmove, either way, for copy and move");
    for (int mv = 0; mv < 2; mv++)
        for (int dir = 0; dir < 2; dir++) {
            tern_core *core = st_core("trn1.2xlarge");
            uint64_t s = 4 * P, d = dir ? s + P / 2 : s - P / 2 - 64; /* forward and backward overlaps */
            CHECK_EQ_INT(tern_core_hbm_write(core, s, a, n, &err), TERN_OK);
            tern_status st = mv ? tern_core_hbm_move(core, d, s, n, &err) : tern_core_hbm_copy(core, d, s, n, &err);
            CHECK_MSG(st == TERN_OK, "%s", err.msg);
            CHECK_MSG(hbm_is(core, d, a, n), "%s, overlap %s", mv ? "move" : "copy", dir ? "forward" : "backward");
            tern_core_free(core);
        }

    TEST_BEGIN("pages never touched move as what they read as (the fill byte)");
    {
        tern_core_config cfg;
        tern_core_options o = {0};
        tern_core *core = NULL;
        o.fill_nan = 1;
        CHECK_EQ_INT(tern_core_config_load("trn1.2xlarge", &cfg, &err), TERN_OK);
        CHECK_EQ_INT(tern_core_create(&cfg, &o, &core, &err), TERN_OK);
        CHECK_EQ_INT(tern_core_hbm_write(core, 8 * P, b, n, &err), TERN_OK);
        CHECK_EQ_INT(tern_core_hbm_move(core, 8 * P, 2 * P, n, &err), TERN_OK);
        memset(want, 0xFF, n);
        CHECK(hbm_is(core, 8 * P, want, n));
        tern_core_free(core);
    }

    TEST_BEGIN("ranges outside HBM are refused, naming the range, and change nothing");
    {
        tern_core_config cfg;
        CHECK_EQ_INT(tern_core_config_load("trn1.2xlarge", &cfg, &err), TERN_OK);
        tern_core *core = st_core("trn1.2xlarge");
        CHECK_EQ_INT(tern_core_hbm_write(core, 8 * P, b, n, &err), TERN_OK);
        CHECK_EQ_INT(tern_core_hbm_move(core, 8 * P, cfg.hbm_bytes - 100, n, &err), TERN_ERR_RANGE);
        CHECK_STR_CONTAINS(err.msg, "HBM move source");
        CHECK_STR_CONTAINS(err.msg, "outside HBM of");
        CHECK_EQ_INT(tern_core_hbm_copy(core, UINT64_MAX - 10, 8 * P, n, &err), TERN_ERR_RANGE);
        CHECK_STR_CONTAINS(err.msg, "HBM copy destination");
        CHECK(hbm_is(core, 8 * P, b, n));
        CHECK_EQ_INT(tern_core_hbm_move(core, 8 * P, 8 * P, n, &err), TERN_OK); /* onto itself: nothing */
        CHECK_EQ_INT(tern_core_hbm_copy(core, 8 * P, 2 * P, 0, &err), TERN_OK);   /* zero bytes: nothing */
        CHECK(hbm_is(core, 8 * P, b, n));
        tern_core_free(core);
    }
    free(a);
    free(b);
    free(want);
    return check_report();
}
