/* DMA: copies between HBM and SBUF in every direction, casts through fp32, strided and multi-dimensional
 * patterns on both sides, HBM partition strides, gathers by an index tensor, register offsets, and every rule
 * (reach, element counts, queue range, bounds, index dtype and range). */
#include "check.h"
#include "sim_test_util.h"

static tern_instr dma(tern_ap dst, tern_ap src)
{
    tern_instr ins = st_instr(TERN_OP_DMA_COPY, TERN_ENGINE_SYNC);
    ins.ap[TERN_AP_DST] = dst;
    ins.ap[TERN_AP_IN0] = src;
    return ins;
}

static tern_ap hbm2d(tern_dtype dt, uint64_t addr, unsigned rows, int64_t row_step, unsigned cols)
{
    int32_t s = 1;
    tern_ap ap = st_ap(TERN_MEM_HBM, dt, 0, rows, addr, 1, &s, &cols);
    ap.partition_step = row_step;
    return ap;
}

#define EXPECT_FAIL(label, core, ins, needle)                                                                   \
    do {                                                                                                        \
        TEST_BEGIN(label);                                                                                      \
        tern_error e_;                                                                                          \
        tern_status s_ = st_run(core, ins, &e_);                                                                \
        CHECK_MSG(s_ != TERN_OK, "expected a rejection");                                                       \
        if (s_ != TERN_OK)                                                                                      \
            CHECK_STR_CONTAINS(e_.msg, needle);                                                                 \
    } while (0)

/* A large HBM -> SBUF -> HBM round trip (1 MiB each way, above the size that splits row copies over the host
 * threads) and an activation over the tile, on a core with `threads` host threads; returns the HBM result. */
static void threaded_round_trip(unsigned threads, float *out)
{
    tern_error err;
    tern_core *core = st_core_threads("trn1.2xlarge", threads);
    enum { R = 128, C = 2048 };
    float *in = malloc(sizeof(float) * R * C);
    for (int i = 0; i < R * C; i++)
        in[i] = (float)((i * 7919) % 4001) / 1000.0f - 2.0f;
    CHECK_EQ_INT(tern_core_hbm_write(core, 0, in, sizeof(float) * R * C, &err), TERN_OK);
    tern_instr ld = dma(st_ap1(TERN_MEM_SBUF, TERN_DTYPE_FP32, 0, R, 0, C), hbm2d(TERN_DTYPE_FP32, 0, R, C, C));
    CHECK_EQ_INT(st_run(core, &ld, &err), TERN_OK);
    tern_instr act = st_instr(TERN_OP_ACTIVATION, TERN_ENGINE_SCALAR);
    act.ap[TERN_AP_DST] = st_ap1(TERN_MEM_SBUF, TERN_DTYPE_FP32, 0, R, 0, C);
    act.ap[TERN_AP_IN0] = st_ap1(TERN_MEM_SBUF, TERN_DTYPE_FP32, 0, R, 0, C);
    act.func = TERN_ACT_GELU_TANH;
    act.imm0.f = 1.0f;
    CHECK_EQ_INT(st_run(core, &act, &err), TERN_OK);
    tern_instr st = dma(hbm2d(TERN_DTYPE_FP32, 8u << 20, R, C, C), st_ap1(TERN_MEM_SBUF, TERN_DTYPE_FP32, 0, R, 0, C));
    CHECK_EQ_INT(st_run(core, &st, &err), TERN_OK);
    CHECK_EQ_INT(tern_core_hbm_read(core, 8u << 20, out, sizeof(float) * R * C, &err), TERN_OK);
    free(in);
    tern_core_free(core);
}

/* ---- random same-dtype copies against a model of memory, element by element ---- */

typedef struct {
    tern_ap ap;
    uint64_t lo, hi; /* HBM: the byte window the pattern reaches; on chip: the bytes of each partition */
} rnd_side;

static uint32_t rnd_next(uint32_t *s)
{
    *s = *s * 1664525u + 1013904223u;
    return *s >> 8;
}

/* The byte address (HBM) or partition * 1 MiB + byte (on chip) of dense element k of a pattern of nd dims. */
static uint64_t rnd_elem_addr(const tern_ap *ap, uint64_t k, size_t es)
{
    uint64_t f = 1;
    for (unsigned d = 0; d < ap->ndims; d++)
        f *= ap->dims[d].num;
    uint64_t p = k / f, r = k % f;
    int64_t el = 0;
    for (int d = (int)ap->ndims - 1; d >= 0; d--) {
        el += (int64_t)(r % ap->dims[d].num) * ap->dims[d].step;
        r /= ap->dims[d].num;
    }
    if (ap->mem == TERN_MEM_HBM)
        return ap->offset + (uint64_t)(((int64_t)p * ap->partition_step + el) * (int64_t)es);
    return (uint64_t)(ap->start_partition + p) * (1u << 20) + ap->offset + (uint64_t)(el * (int64_t)es);
}

/* A random pattern of `total` elements: np partitions and 1 to 3 free dimensions whose sizes multiply to
 * total / np, steps of the contiguous extent, wider (gaps) or, on the source side, anything >= 1. */
static tern_ap rnd_pattern(uint32_t *seed, tern_mem mem, tern_dtype dt, unsigned np, unsigned start, uint64_t f,
                           uint64_t base)
{
    uint32_t nums[3];
    int32_t steps[3];
    unsigned nd = 1;
    nums[0] = (uint32_t)f;
    /* split f into up to 3 factors */
    for (unsigned tries = 0; tries < 4 && nd < 3; tries++) {
        uint32_t d = 2 + rnd_next(seed) % 7;
        if (nums[nd - 1] % d == 0 && nums[nd - 1] > d) {
            nums[nd] = nums[nd - 1] / d;
            nums[nd - 1] = d;
            nd++;
        }
    }
    int64_t span = 1;
    for (int d = (int)nd - 1; d >= 0; d--) {
        uint32_t pick = rnd_next(seed) % 4;
        int64_t st = pick == 0 ? span : span + (int64_t)(rnd_next(seed) % 9); /* dense, or with a gap */
        if (d == (int)nd - 1)
            st = pick == 3 ? 2 : 1; /* the innermost: contiguous, or every other element (not row-direct) */
        steps[d] = (int32_t)st;
        span = st * (int64_t)(nums[d] - 1) + span;
    }
    tern_ap ap = st_ap(mem, dt, start, np, base, nd, steps, nums);
    if (mem == TERN_MEM_HBM)
        ap.partition_step = span + (int64_t)(rnd_next(seed) % 40);
    return ap;
}

/* The random-pattern tests' windows: 64 KiB of HBM straddling the page boundary at 5 MiB (every HBM pattern starts
 * up to 2 KiB before it) and the first SB_WIN bytes of 32 SBUF partitions, modelled as host bytes (hb, sb). */
enum { HBM_WIN = 1 << 16, SB_WIN = 4096 };
#define HBASE ((uint64_t)(5u << 20) - HBM_WIN / 2)

/* Every one of the pattern's first n elements (es bytes each) inside its window? (the generator's gaps can reach
 * past them: such cases are skipped) */
static int in_window(const tern_ap *a, size_t es, uint64_t n)
{
    for (uint64_t k = 0; k < n; k++) {
        uint64_t ad = rnd_elem_addr(a, k, es);
        if (a->mem == TERN_MEM_HBM ? ad < HBASE || ad + es > HBASE + HBM_WIN : ad % (1u << 20) + es > SB_WIN || ad >> 20 >= 32)
            return 0;
    }
    return 1;
}

/* The model's byte for address ad of a pattern in memory mem. */
static uint8_t *win_byte(uint8_t *hb, uint8_t *sb, uint8_t mem, uint64_t ad)
{
    return mem == TERN_MEM_HBM ? hb + (ad - HBASE) : sb + (ad >> 20) * SB_WIN + ad % (1u << 20);
}

/* Random bytes into both windows, on the core and in hb, sb. */
static void fill_windows(tern_core *core, uint32_t *seed, uint8_t *hb, uint8_t *sb)
{
    tern_error err;
    for (size_t i = 0; i < HBM_WIN; i++)
        hb[i] = (uint8_t)rnd_next(seed);
    for (size_t i = 0; i < 32 * SB_WIN; i++)
        sb[i] = (uint8_t)rnd_next(seed);
    CHECK_EQ_INT(tern_core_hbm_write(core, HBASE, hb, HBM_WIN, &err), TERN_OK);
    for (unsigned p = 0; p < 32; p++)
        CHECK_EQ_INT(tern_core_onchip_write(core, TERN_MEM_SBUF, p, 0, sb + (size_t)p * SB_WIN, SB_WIN, &err), TERN_OK);
}

/* Both windows read back from the core into hb, sb. */
static void read_windows(tern_core *core, uint8_t *hb, uint8_t *sb)
{
    tern_error err;
    CHECK_EQ_INT(tern_core_hbm_read(core, HBASE, hb, HBM_WIN, &err), TERN_OK);
    for (unsigned p = 0; p < 32; p++)
        CHECK_EQ_INT(tern_core_onchip_read(core, TERN_MEM_SBUF, p, 0, sb + (size_t)p * SB_WIN, SB_WIN, &err), TERN_OK);
}

/* Casting copies from HBM (bf16 to fp32: a gather through fp32) with random patterns whose runs start just before
 * and straddle a 1 MiB page boundary: each element widened (a NaN quieted), the rest of SBUF untouched. */
static void test_random_cast_gathers(void)
{
    TEST_BEGIN("random bf16 -> fp32 gathers from HBM across a page boundary: element by element");
    tern_core *core = st_core("trn1.2xlarge");
    tern_error err;
    uint32_t seed = 777;
    uint8_t *hb = malloc(HBM_WIN), *sb = malloc(32 * SB_WIN), *sm = malloc(32 * SB_WIN);
    size_t bad = 0, cases = 0;
    for (int c = 0; c < 300; c++) {
        unsigned np = 1 + rnd_next(&seed) % 8;
        uint64_t f = 1 + rnd_next(&seed) % 90;
        uint64_t hoff = (5u << 20) - 1 - rnd_next(&seed) % 2048, soff = (rnd_next(&seed) % 64) * 4;
        tern_ap src = rnd_pattern(&seed, TERN_MEM_HBM, TERN_DTYPE_BF16, np, 0, f, hoff);
        tern_ap dst = rnd_pattern(&seed, TERN_MEM_SBUF, TERN_DTYPE_FP32, np, 0, f, soff);
        uint64_t n = (uint64_t)np * f;
        if (!in_window(&src, 2, n) || !in_window(&dst, 4, n))
            continue;
        fill_windows(core, &seed, hb, sb);
        memcpy(sm, sb, 32 * SB_WIN);
        for (uint64_t k = 0; k < n; k++) {
            uint16_t h;
            memcpy(&h, win_byte(hb, sb, TERN_MEM_HBM, rnd_elem_addr(&src, k, 2)), 2);
            uint32_t u = (uint32_t)h << 16;
            if ((u & 0x7FFFFFFFu) > 0x7F800000u)
                u |= 0x400000u;
            memcpy(win_byte(hb, sm, TERN_MEM_SBUF, rnd_elem_addr(&dst, k, 4)), &u, 4);
        }
        tern_instr ins = dma(dst, src);
        tern_status st = st_run(core, &ins, &err);
        CHECK_MSG(st == TERN_OK, "case %d: %s", c, err.msg);
        read_windows(core, hb, sb);
        bad += memcmp(sb, sm, 32 * SB_WIN) != 0;
        cases++;
    }
    CHECK_MSG(bad == 0, "%zu of %zu random casting gathers differ", bad, cases);
    CHECK_MSG(cases >= 100, "only %zu random casting gathers fit the windows", cases);

    /* the other way: fp32 on chip (rows, or any pattern) stored to HBM as bf16, each element rounded to nearest even
     * (tern_num_encode), the rest of the HBM window untouched */
    TEST_BEGIN("random fp32 -> bf16 stores to HBM across a page boundary: element by element");
    uint8_t *hm = malloc(HBM_WIN);
    const tern_convert_opts rne = TERN_CONVERT_OPTS_DEFAULT;
    size_t bad2 = 0, cases2 = 0, rows_cases = 0;
    for (int c = 0; c < 300; c++) {
        unsigned np = 1 + rnd_next(&seed) % 8;
        uint64_t f = 1 + rnd_next(&seed) % 90;
        uint64_t hoff = (5u << 20) - 1 - rnd_next(&seed) % 2048, soff = (rnd_next(&seed) % 64) * 4;
        tern_ap src = rnd_pattern(&seed, TERN_MEM_SBUF, TERN_DTYPE_FP32, np, 0, f, soff);
        tern_ap dst = rnd_pattern(&seed, TERN_MEM_HBM, TERN_DTYPE_BF16, np, 0, f, hoff);
        if (c % 2 == 0) { /* plain rows on chip: the in-place path */
            src = st_ap1(TERN_MEM_SBUF, TERN_DTYPE_FP32, 0, np, soff, (uint32_t)f);
            rows_cases++;
            if (c % 4 == 0 && np > 1) /* into one dense HBM run longer than a row: the rows do not tile it */
                dst = st_ap1(TERN_MEM_HBM, TERN_DTYPE_BF16, 0, 1, hoff, (uint32_t)(np * f));
        }
        uint64_t n = (uint64_t)np * f;
        if (!in_window(&src, 4, n) || !in_window(&dst, 2, n)) {
            rows_cases -= c % 2 == 0;
            continue;
        }
        fill_windows(core, &seed, hb, sb);
        memcpy(hm, hb, HBM_WIN);
        for (uint64_t k = 0; k < n; k++) {
            float v;
            memcpy(&v, win_byte(hb, sb, TERN_MEM_SBUF, rnd_elem_addr(&src, k, 4)), 4);
            uint16_t h = (uint16_t)tern_num_encode(TERN_DTYPE_BF16, v, &rne, 0);
            memcpy(win_byte(hm, sb, TERN_MEM_HBM, rnd_elem_addr(&dst, k, 2)), &h, 2);
        }
        tern_instr ins = dma(dst, src);
        tern_status st = st_run(core, &ins, &err);
        CHECK_MSG(st == TERN_OK, "case %d: %s", c, err.msg);
        read_windows(core, hb, sb);
        bad2 += memcmp(hb, hm, HBM_WIN) != 0;
        cases2++;
    }
    CHECK_MSG(bad2 == 0, "%zu of %zu random casting stores differ", bad2, cases2);
    CHECK_MSG(cases2 >= 100 && rows_cases >= 40, "only %zu random casting stores (%zu from rows) fit the windows", cases2,
              rows_cases);
    free(hm);
    free(hb), free(sb), free(sm);
    tern_core_free(core);
}

static void test_random_copies(void)
{
    TEST_BEGIN("random same-dtype copies between HBM and SBUF, runs of any lengths across HBM pages: element by element");
    tern_core *core = st_core("trn1.2xlarge");
    tern_error err;
    uint32_t seed = 12345;
    const tern_dtype dts[3] = {TERN_DTYPE_FP32, TERN_DTYPE_BF16, TERN_DTYPE_FP8_E4M3};
    uint8_t *hb = malloc(HBM_WIN), *hm = malloc(HBM_WIN), *sb = malloc(32 * SB_WIN), *sm = malloc(32 * SB_WIN);
    size_t bad = 0, cases = 0;
    for (int c = 0; c < 400; c++) {
        tern_dtype dt = dts[rnd_next(&seed) % 3];
        size_t es = tern_dtype_size(dt);
        unsigned np = 1 + rnd_next(&seed) % 8, kind = rnd_next(&seed) % 3; /* 0: HBM->SBUF 1: SBUF->HBM 2: SBUF->SBUF */
        uint64_t f = 1 + rnd_next(&seed) % 90;
        tern_ap src, dst;
        uint64_t hoff = (5u << 20) - 1 - rnd_next(&seed) % 2048, soff = (rnd_next(&seed) % 64) * es;
        if (kind == 0) {
            src = rnd_pattern(&seed, TERN_MEM_HBM, dt, np, 0, f, hoff);
            dst = rnd_pattern(&seed, TERN_MEM_SBUF, dt, np, 0, f, soff);
        } else if (kind == 1) {
            src = rnd_pattern(&seed, TERN_MEM_SBUF, dt, np, 0, f, soff);
            dst = rnd_pattern(&seed, TERN_MEM_HBM, dt, np, 0, f, hoff);
        } else {
            src = rnd_pattern(&seed, TERN_MEM_SBUF, dt, np, 0, f, soff);
            dst = rnd_pattern(&seed, TERN_MEM_SBUF, dt, np, 16, f, (rnd_next(&seed) % 64) * es);
        }
        if (rnd_next(&seed) % 3 == 0 && dst.ndims == 1 && dst.dims[0].step == 1) { /* one side one dense run */
            dst.dims[0].num *= np;
            dst.num_partitions = 1;
        }
        uint64_t n = (uint64_t)np * f;
        if (!in_window(&src, es, n) || !in_window(&dst, es, n))
            continue;
        fill_windows(core, &seed, hb, sb);
        /* the model: element k of the source to element k of the destination, in dense order */
        memcpy(hm, hb, HBM_WIN);
        memcpy(sm, sb, 32 * SB_WIN);
        for (uint64_t k = 0; k < n; k++)
            memcpy(win_byte(hm, sm, dst.mem, rnd_elem_addr(&dst, k, es)),
                   win_byte(hb, sb, src.mem, rnd_elem_addr(&src, k, es)), es);
        tern_instr ins = dma(dst, src);
        tern_status st = st_run(core, &ins, &err);
        CHECK_MSG(st == TERN_OK, "case %d: %s", c, err.msg);
        read_windows(core, hb, sb);
        int differ = memcmp(hb, hm, HBM_WIN) != 0 || memcmp(sb, sm, 32 * SB_WIN) != 0;
        if (differ && bad < 3)
            fprintf(stderr, "case %d: kind %u dtype %s np %u f %llu: bytes differ from the element-by-element model\n",
                    c, kind, tern_dtype_name(dt), np, (unsigned long long)f);
        bad += differ;
        cases++;
    }
    CHECK_MSG(bad == 0, "%zu of %zu random copies differ", bad, cases);
    CHECK_MSG(cases >= 200, "only %zu random copies fit the windows", cases);
    free(hb), free(hm), free(sb), free(sm);
    tern_core_free(core);
}

int main(void)
{
    test_random_copies();
    test_random_cast_gathers();
    TEST_BEGIN("large copies and activations: the same bits with 1 and 4 host threads");
    {
        float *a = calloc(128 * 2048, sizeof(float)), *b = calloc(128 * 2048, sizeof(float));
        threaded_round_trip(1, a);
        threaded_round_trip(4, b);
        CHECK(memcmp(a, b, sizeof(float) * 128 * 2048) == 0);
        CHECK(a[5] != 0.0f && a[128 * 2048 - 1] != 0.0f); /* really written */
        free(a);
        free(b);
    }

    TEST_BEGIN("large copies whose sides' runs differ in length are cut to a common one: the same bytes");
    {
        /* HBM: 192 rows of 1024 fp32 every 2048 (gaps between them); SBUF: 128 partitions of 1536 (runs of 1024
         * against 1536: cut into pieces of 512, 768 KB in all, split over 4 threads); and back to HBM */
        enum { HR = 192, HC = 1024, HS = 2048, SP = 128, SC = 1536 };
        tern_core_config cfg;
        tern_core_options o;
        tern_error e2;
        tern_core *c4 = NULL;
        memset(&o, 0, sizeof o);
        o.threads = 4;
        CHECK_EQ_INT(tern_core_config_load("trn1.2xlarge", &cfg, &e2), TERN_OK);
        CHECK_EQ_INT(tern_core_create(&cfg, &o, &c4, &e2), TERN_OK);
        float *h = malloc(sizeof(float) * HR * HS), *got = malloc(sizeof(float) * HR * HS);
        for (int i = 0; i < HR * HS; i++)
            h[i] = (float)i;
        CHECK_EQ_INT(tern_core_hbm_write(c4, 0, h, sizeof(float) * HR * HS, &e2), TERN_OK);
        int32_t hs[2] = {HS, 1};
        uint32_t hn[2] = {HR, HC};
        tern_ap hbm = st_ap(TERN_MEM_HBM, TERN_DTYPE_FP32, 0, 1, 0, 2, hs, hn);
        tern_instr ld = dma(st_ap1(TERN_MEM_SBUF, TERN_DTYPE_FP32, 0, SP, 0, SC), hbm);
        CHECK_MSG(st_run(c4, &ld, &e2) == TERN_OK, "%s", e2.msg);
        int bad = 0;
        for (unsigned p = 0; p < SP && !bad; p++) {
            CHECK_EQ_INT(tern_core_onchip_read(c4, TERN_MEM_SBUF, p, 0, got, sizeof(float) * SC, &e2), TERN_OK);
            for (unsigned j = 0; j < SC; j++) {
                unsigned idx = p * SC + j; /* dense order */
                if (got[j] != h[idx / HC * HS + idx % HC])
                    bad = 1;
            }
        }
        CHECK_MSG(!bad, "HBM -> SBUF: a piece landed in the wrong place");
        tern_ap back = hbm;
        back.offset = sizeof(float) * HR * HS; /* a fresh region: its gaps must stay zero */
        tern_instr stb = dma(back, st_ap1(TERN_MEM_SBUF, TERN_DTYPE_FP32, 0, SP, 0, SC));
        CHECK_MSG(st_run(c4, &stb, &e2) == TERN_OK, "%s", e2.msg);
        CHECK_EQ_INT(tern_core_hbm_read(c4, back.offset, got, sizeof(float) * HR * HS, &e2), TERN_OK);
        for (int i = 0; i < HR * HS && !bad; i++)
            if (got[i] != (i % HS < HC ? h[i] : 0.0f))
                bad = 1;
        CHECK_MSG(!bad, "SBUF -> HBM: a piece landed in the wrong place, or a gap was written");
        free(h);
        free(got);
        tern_core_free(c4);
    }

    tern_core *core = st_core("trn1.2xlarge");
    tern_error err;

    TEST_BEGIN("hbm -> sbuf with bf16 -> fp32 cast");
    {
        float host[4 * 8];
        uint16_t bf[4 * 8];
        for (int i = 0; i < 32; i++) {
            host[i] = tern_num_round_f32(TERN_DTYPE_BF16, (float)i * 1.5f - 7.25f, NULL, 0);
            bf[i] = tern_f32_to_bf16(host[i], NULL, 0);
        }
        CHECK_EQ_INT(tern_core_hbm_write(core, 4096, bf, sizeof bf, &err), TERN_OK);
        tern_instr ins = dma(st_ap1(TERN_MEM_SBUF, TERN_DTYPE_FP32, 0, 4, 0, 8), hbm2d(TERN_DTYPE_BF16, 4096, 4, 8, 8));
        CHECK_EQ_INT(st_run(core, &ins, &err), TERN_OK);
        float got[32];
        st_read(core, TERN_MEM_SBUF, 0, 4, 0, TERN_DTYPE_FP32, got, 8);
        CHECK(memcmp(got, host, sizeof got) == 0);

        TEST_BEGIN("sbuf -> hbm transposed through strides");
        /* write column-major: element (p, i) goes to hbm[i * 4 + p] */
        tern_ap t = hbm2d(TERN_DTYPE_FP32, 1 << 20, 4, 1, 8);
        t.dims[0].step = 4;
        ins = dma(t, st_ap1(TERN_MEM_SBUF, TERN_DTYPE_FP32, 0, 4, 0, 8));
        CHECK_EQ_INT(st_run(core, &ins, &err), TERN_OK);
        float back[32];
        CHECK_EQ_INT(tern_core_hbm_read(core, 1 << 20, back, sizeof back, &err), TERN_OK);
        int wrong = 0;
        for (int p = 0; p < 4; p++)
            for (int i = 0; i < 8; i++)
                wrong += back[i * 4 + p] != host[p * 8 + i];
        CHECK_EQ_INT(wrong, 0);
    }

    TEST_BEGIN("fp32 -> bf16 cast rounds to nearest even");
    {
        float v[3] = {1.00390625f, 1.01171875f, -3.4e38f}; /* ties: to even (down, up); beyond bf16 max -> -inf */
        CHECK_EQ_INT(tern_core_hbm_write(core, 8192, v, sizeof v, &err), TERN_OK);
        tern_instr ins = dma(st_ap1(TERN_MEM_SBUF, TERN_DTYPE_BF16, 0, 1, 512, 3), hbm2d(TERN_DTYPE_FP32, 8192, 1, 0, 3));
        CHECK_EQ_INT(st_run(core, &ins, &err), TERN_OK);
        uint16_t bits[3];
        CHECK_EQ_INT(tern_core_onchip_read(core, TERN_MEM_SBUF, 0, 512, bits, 6, &err), TERN_OK);
        CHECK_EQ_HEX(bits[0], 0x3F80);
        CHECK_EQ_HEX(bits[1], 0x3F82);
        CHECK_EQ_HEX(bits[2], 0xFF80);
    }

    TEST_BEGIN("int32 copies keep every bit (no fp32 round trip)");
    {
        int32_t v[4] = {16777217, -2147483647 - 1, 2147483647, -5};
        CHECK_EQ_INT(tern_core_hbm_write(core, 12288, v, sizeof v, &err), TERN_OK);
        tern_instr ins = dma(st_ap1(TERN_MEM_SBUF, TERN_DTYPE_INT32, 2, 1, 0, 4), hbm2d(TERN_DTYPE_INT32, 12288, 1, 0, 4));
        CHECK_EQ_INT(st_run(core, &ins, &err), TERN_OK);
        int32_t got[4];
        tern_core_onchip_read(core, TERN_MEM_SBUF, 2, 0, got, sizeof got, &err);
        CHECK(memcmp(got, v, sizeof v) == 0);
    }

    TEST_BEGIN("sbuf -> sbuf across partitions and hbm -> hbm");
    {
        float v[2 * 16];
        for (int i = 0; i < 32; i++)
            v[i] = (float)i;
        st_write(core, TERN_MEM_SBUF, 10, 2, 1024, TERN_DTYPE_FP32, v, 16);
        tern_instr ins = dma(st_ap1(TERN_MEM_SBUF, TERN_DTYPE_FP32, 100, 2, 2048, 16),
                             st_ap1(TERN_MEM_SBUF, TERN_DTYPE_FP32, 10, 2, 1024, 16));
        CHECK_EQ_INT(st_run(core, &ins, &err), TERN_OK);
        float got[32];
        st_read(core, TERN_MEM_SBUF, 100, 2, 2048, TERN_DTYPE_FP32, got, 16);
        CHECK(memcmp(got, v, sizeof v) == 0);
        CHECK_EQ_INT(tern_core_hbm_write(core, 65536, v, sizeof v, &err), TERN_OK);
        ins = dma(hbm2d(TERN_DTYPE_FP32, 131072, 1, 0, 32), hbm2d(TERN_DTYPE_FP32, 65536, 1, 0, 32));
        CHECK_EQ_INT(st_run(core, &ins, &err), TERN_OK);
        CHECK_EQ_INT(tern_core_hbm_read(core, 131072, got, sizeof got, &err), TERN_OK);
        CHECK(memcmp(got, v, sizeof v) == 0);
    }

    TEST_BEGIN("register offset moves the source at run time");
    {
        float v[8] = {0, 1, 2, 3, 4, 5, 6, 7};
        CHECK_EQ_INT(tern_core_hbm_write(core, 200000, v, sizeof v, &err), TERN_OK);
        tern_ap src = hbm2d(TERN_DTYPE_FP32, 200000, 1, 0, 2);
        src.offset_reg = 5;
        tern_instr ins = dma(st_ap1(TERN_MEM_SBUF, TERN_DTYPE_FP32, 0, 1, 4096, 2), src);
        CHECK_EQ_INT(st_run_reg(core, 5, 6, &ins, &err), TERN_OK);
        float got[2];
        st_read(core, TERN_MEM_SBUF, 0, 1, 4096, TERN_DTYPE_FP32, got, 2);
        CHECK_NEAR(got[0], 6, 0);
        CHECK_NEAR(got[1], 7, 0);
        TEST_BEGIN("register offset out of bounds at run time");
        tern_status st = st_run_reg(core, 5, -60000, &ins, &err); /* 200000 - 240000 bytes: before HBM */
        CHECK(st != TERN_OK);
        CHECK_STR_CONTAINS(err.msg, "outside HBM");
    }

    TEST_BEGIN("gather rows by index (embedding lookup)");
    {
        float table[10 * 4];
        for (int i = 0; i < 40; i++)
            table[i] = (float)(i / 4) + 0.25f * (float)(i % 4);
        CHECK_EQ_INT(tern_core_hbm_write(core, 300000, table, sizeof table, &err), TERN_OK);
        int32_t idx[3] = {7, 0, 9};
        for (int p = 0; p < 3; p++)
            tern_core_onchip_write(core, TERN_MEM_SBUF, p, 8192, &idx[p], 4, &err);
        tern_instr ins = st_instr(TERN_OP_DMA_GATHER, TERN_ENGINE_SYNC);
        ins.ap[TERN_AP_DST] = st_ap1(TERN_MEM_SBUF, TERN_DTYPE_BF16, 0, 3, 9000, 4);
        ins.ap[TERN_AP_IN0] = hbm2d(TERN_DTYPE_FP32, 300000, 10, 4, 4);
        ins.ap[TERN_AP_IN1] = st_ap1(TERN_MEM_SBUF, TERN_DTYPE_INT32, 0, 3, 8192, 1);
        CHECK_EQ_INT(st_run(core, &ins, &err), TERN_OK);
        float got[12];
        st_read(core, TERN_MEM_SBUF, 0, 3, 9000, TERN_DTYPE_BF16, got, 4);
        for (int p = 0; p < 3; p++)
            for (int i = 0; i < 4; i++)
                CHECK_NEAR(got[p * 4 + i], table[idx[p] * 4 + i], 0);
        TEST_BEGIN("gather index out of range");
        idx[1] = 10;
        tern_core_onchip_write(core, TERN_MEM_SBUF, 1, 8192, &idx[1], 4, &err);
        tern_status st = st_run(core, &ins, &err);
        CHECK(st != TERN_OK);
        CHECK_STR_CONTAINS(err.msg, "index 10 at partition 1 outside the table's 10 rows");
        ins.ap[TERN_AP_IN1].dtype = TERN_DTYPE_FP32;
        EXPECT_FAIL("gather float index", core, &ins, "index dtype fp32 must be an integer type");
        ins.ap[TERN_AP_IN1] = st_ap1(TERN_MEM_SBUF, TERN_DTYPE_INT32, 0, 3, 8192, 2);
        EXPECT_FAIL("gather index shape", core, &ins, "index shape [3, 2] must be [3, 1]");
        ins.ap[TERN_AP_IN1] = st_ap1(TERN_MEM_SBUF, TERN_DTYPE_INT32, 0, 3, 8192, 1);
        ins.ap[TERN_AP_DST].dims[0].num = 5;
        EXPECT_FAIL("gather row length", core, &ins, "row of 5 elements, table rows have 4");
    }

    TEST_BEGIN("scatter rows by index (the last of duplicate indices stays)");
    {
        float table[10 * 4], rows[4 * 4];
        for (int i = 0; i < 40; i++)
            table[i] = -1.0f;
        CHECK_EQ_INT(tern_core_hbm_write(core, 310000, table, sizeof table, &err), TERN_OK);
        int32_t idx[4] = {7, 0, 9, 7};
        for (int p = 0; p < 4; p++) {
            tern_core_onchip_write(core, TERN_MEM_SBUF, p, 8192, &idx[p], 4, &err);
            for (int i = 0; i < 4; i++)
                rows[p * 4 + i] = (float)(p * 10 + i);
            tern_core_onchip_write(core, TERN_MEM_SBUF, p, 9000, &rows[p * 4], 16, &err);
        }
        tern_instr ins = st_instr(TERN_OP_DMA_SCATTER, TERN_ENGINE_SYNC);
        ins.ap[TERN_AP_DST] = hbm2d(TERN_DTYPE_FP32, 310000, 10, 4, 4);
        ins.ap[TERN_AP_IN0] = st_ap1(TERN_MEM_SBUF, TERN_DTYPE_FP32, 0, 4, 9000, 4);
        ins.ap[TERN_AP_IN1] = st_ap1(TERN_MEM_SBUF, TERN_DTYPE_INT32, 0, 4, 8192, 1);
        CHECK_EQ_INT(st_run(core, &ins, &err), TERN_OK);
        float got[40];
        CHECK_EQ_INT(tern_core_hbm_read(core, 310000, got, sizeof got, &err), TERN_OK);
        for (int r = 0; r < 10; r++)
            for (int i = 0; i < 4; i++) {
                float want = r == 7 ? (float)(30 + i) : r == 0 ? (float)(10 + i) : r == 9 ? (float)(20 + i) : -1.0f;
                CHECK_NEAR(got[r * 4 + i], want, 0);
            }
        TEST_BEGIN("scatter index out of range writes nothing");
        idx[2] = 10;
        tern_core_onchip_write(core, TERN_MEM_SBUF, 2, 8192, &idx[2], 4, &err);
        for (int p = 0; p < 4; p++)
            rows[p * 4] = 99.0f;
        tern_core_onchip_write(core, TERN_MEM_SBUF, 0, 9000, &rows[0], 16, &err);
        tern_status st = st_run(core, &ins, &err);
        CHECK(st != TERN_OK);
        CHECK_STR_CONTAINS(err.msg, "index 10 at partition 2 outside the table's 10 rows");
        CHECK_EQ_INT(tern_core_hbm_read(core, 310000, got, sizeof got, &err), TERN_OK);
        CHECK_NEAR(got[7 * 4], 30.0f, 0);
        ins.ap[TERN_AP_IN1] = st_ap1(TERN_MEM_SBUF, TERN_DTYPE_INT32, 0, 3, 8192, 1);
        EXPECT_FAIL("scatter index count", core, &ins, "index shape [3, 1] must be [4, 1] (one row index per source");
        ins.ap[TERN_AP_IN1] = st_ap1(TERN_MEM_SBUF, TERN_DTYPE_INT32, 0, 4, 8192, 1);
        ins.ap[TERN_AP_IN0].dims[0].num = 5;
        EXPECT_FAIL("scatter row length", core, &ins, "row of 5 elements, table rows have 4");
    }

    tern_instr ins = dma(st_ap1(TERN_MEM_SBUF, TERN_DTYPE_FP32, 0, 4, 0, 8), hbm2d(TERN_DTYPE_FP32, 4096, 4, 8, 7));
    EXPECT_FAIL("element counts differ", core, &ins, "32 elements, source has 28");
    ins = dma(st_ap1(TERN_MEM_PSUM, TERN_DTYPE_FP32, 0, 4, 0, 8), hbm2d(TERN_DTYPE_FP32, 4096, 4, 8, 8));
    EXPECT_FAIL("DMA cannot reach PSUM", core, &ins, "memory psum not reachable here (allowed: SBUF or HBM)");
    ins = dma(st_ap1(TERN_MEM_SBUF, TERN_DTYPE_FP32, 0, 4, 0, 8), hbm2d(TERN_DTYPE_FP32, 4096, 4, 8, 8));
    ins.queue = 16;
    EXPECT_FAIL("queue out of range", core, &ins, "DMA queue 16 outside 0..15");
    ins = dma(st_ap1(TERN_MEM_SBUF, TERN_DTYPE_FP32, 0, 4, 0, 8), hbm2d(TERN_DTYPE_FP32, (32ull << 30) - 64, 4, 8, 8));
    EXPECT_FAIL("HBM address past the end", core, &ins, "outside HBM of 34359738368 bytes");
    ins = dma(st_ap1(TERN_MEM_SBUF, TERN_DTYPE_FP32, 0, 4, 180224 - 16, 8), hbm2d(TERN_DTYPE_FP32, 4096, 4, 8, 8));
    EXPECT_FAIL("SBUF bytes past the partition", core, &ins, "outside sbuf's 180224 bytes per partition");
    ins = dma(st_ap1(TERN_MEM_SBUF, TERN_DTYPE_FP32, 120, 16, 0, 8), hbm2d(TERN_DTYPE_FP32, 4096, 16, 8, 8));
    EXPECT_FAIL("SBUF partitions past 128", core, &ins, "partitions [120, 136) outside the 128 partitions");
    ins = dma(st_ap1(TERN_MEM_SBUF, TERN_DTYPE_FP32, 0, 4, 0, 8), hbm2d(TERN_DTYPE_FP32, 4096, 4, 8, 8));
    ins.engine = TERN_ENGINE_TENSOR;
    EXPECT_FAIL("DMA trigger from TensorE", core, &ins, "cannot issue on the tensor engine");

    /* Same-dtype copies go row to row when source and destination cannot overlap, and through a buffer (read
     * everything, then write) when they can: both must give the read-then-write result. */
    TEST_BEGIN("overlapping SBUF -> SBUF copy reads everything before writing");
    {
        enum { W = 1040, L = 1024 }; /* rows long enough that a forward memcpy would corrupt them */
        static float v[4 * W], got[4 * W];
        for (int i = 0; i < 4 * W; i++)
            v[i] = (float)i;
        st_write(core, TERN_MEM_SBUF, 8, 4, 0, TERN_DTYPE_FP32, v, W);
        /* elements [0, L) of each partition move up by 4 elements: the ranges overlap */
        tern_instr ins2 = dma(st_ap1(TERN_MEM_SBUF, TERN_DTYPE_FP32, 8, 4, 16, L), st_ap1(TERN_MEM_SBUF, TERN_DTYPE_FP32, 8, 4, 0, L));
        CHECK_EQ_INT(st_run(core, &ins2, &err), TERN_OK);
        st_read(core, TERN_MEM_SBUF, 8, 4, 0, TERN_DTYPE_FP32, got, W);
        int bad = 0;
        for (int p = 0; p < 4; p++)
            for (int i = 0; i < W; i++) {
                float want = i < 4 ? v[p * W + i] : i < L + 4 ? v[p * W + i - 4] : v[p * W + i];
                bad += got[p * W + i] != want;
            }
        CHECK_MSG(bad == 0, "%d elements differ from read-then-write", bad);
        /* two rows of 16 per partition moved up by 8: the first destination row overwrites half of the second
         * source row, so a row-by-row copy would read clobbered values */
        st_write(core, TERN_MEM_SBUF, 8, 4, 0, TERN_DTYPE_FP32, v, W);
        int32_t steps[2] = {16, 1};
        uint32_t nums[2] = {2, 16};
        ins2 = dma(st_ap(TERN_MEM_SBUF, TERN_DTYPE_FP32, 8, 4, 32, 2, steps, nums),
                   st_ap(TERN_MEM_SBUF, TERN_DTYPE_FP32, 8, 4, 0, 2, steps, nums));
        CHECK_EQ_INT(st_run(core, &ins2, &err), TERN_OK);
        st_read(core, TERN_MEM_SBUF, 8, 4, 0, TERN_DTYPE_FP32, got, W);
        bad = 0;
        for (int p = 0; p < 4; p++)
            for (int i = 0; i < 48; i++) {
                float want = i < 8 ? v[p * W + i] : i < 40 ? v[p * W + i - 8] : v[p * W + i];
                bad += got[p * W + i] != want;
            }
        CHECK_MSG(bad == 0, "%d elements differ from read-then-write (rows overlapping rows)", bad);
        st_write(core, TERN_MEM_SBUF, 8, 4, 0, TERN_DTYPE_FP32, v, 24);

        TEST_BEGIN("disjoint SBUF -> SBUF and HBM round trip through strided rows, row to row");
        /* partitions 8..11 -> 40..43 with a stride-2 row pattern on the destination side (not row-direct) and
         * a plain one (row-direct); then out to HBM with a partition step and back */
        ins2 = dma(st_ap1(TERN_MEM_SBUF, TERN_DTYPE_FP32, 40, 4, 0, 24), st_ap1(TERN_MEM_SBUF, TERN_DTYPE_FP32, 8, 4, 0, 24));
        CHECK_EQ_INT(st_run(core, &ins2, &err), TERN_OK);
        float a[4 * 24], b[4 * 24];
        st_read(core, TERN_MEM_SBUF, 8, 4, 0, TERN_DTYPE_FP32, a, 24);
        st_read(core, TERN_MEM_SBUF, 40, 4, 0, TERN_DTYPE_FP32, b, 24);
        CHECK(memcmp(a, b, sizeof a) == 0);
        ins2 = dma(hbm2d(TERN_DTYPE_FP32, (3u << 20) - 40, 4, 1000, 24), st_ap1(TERN_MEM_SBUF, TERN_DTYPE_FP32, 40, 4, 0, 24));
        CHECK_EQ_INT(st_run(core, &ins2, &err), TERN_OK); /* rows cross the 1 MiB page boundary at 3 MiB */
        ins2 = dma(st_ap1(TERN_MEM_SBUF, TERN_DTYPE_FP32, 60, 4, 128, 24), hbm2d(TERN_DTYPE_FP32, (3u << 20) - 40, 4, 1000, 24));
        CHECK_EQ_INT(st_run(core, &ins2, &err), TERN_OK);
        st_read(core, TERN_MEM_SBUF, 60, 4, 128, TERN_DTYPE_FP32, b, 24);
        CHECK(memcmp(a, b, sizeof a) == 0);
        float row[24];
        CHECK_EQ_INT(tern_core_hbm_read(core, (3u << 20) - 40 + 2 * 1000 * 4, row, sizeof row, &err), TERN_OK);
        CHECK(memcmp(row, a + 2 * 24, sizeof row) == 0);

        TEST_BEGIN("runs of different lengths on the two sides: SBUF rows of 21 into HBM runs of 7 and back");
        /* SBUF partitions 8..11, 21 elements each, out to HBM as 3 runs of 7 per partition, 12 elements apart
         * (a padded layout), straddling the 3 MiB page boundary; then the whole HBM region [4 x 36] as one
         * contiguous run back into SBUF rows of 36 (each SBUF row then spans an HBM partition's runs and gaps) */
        float g[4 * 36], z[4 * 36], back[4 * 36];
        for (int i = 0; i < 4 * 36; i++)
            z[i] = -1.0f - (float)i;
        const uint64_t base = (3u << 20) - 100;
        CHECK_EQ_INT(tern_core_hbm_write(core, base, z, sizeof z, &err), TERN_OK);
        int32_t hs[2] = {12, 1};
        uint32_t hn[2] = {3, 7};
        tern_ap h = st_ap(TERN_MEM_HBM, TERN_DTYPE_FP32, 0, 4, base, 2, hs, hn);
        h.partition_step = 36;
        ins2 = dma(h, st_ap1(TERN_MEM_SBUF, TERN_DTYPE_FP32, 8, 4, 0, 21));
        CHECK_EQ_INT(st_run(core, &ins2, &err), TERN_OK);
        CHECK_EQ_INT(tern_core_hbm_read(core, base, g, sizeof g, &err), TERN_OK);
        size_t bad2 = 0;
        for (int p = 0; p < 4; p++)
            for (int i = 0; i < 36; i++) {
                int r = i / 12, c = i % 12;
                float want = c < 7 ? a[p * 24 + r * 7 + c] : z[p * 36 + i];
                bad2 += memcmp(&want, &g[p * 36 + i], 4) != 0;
            }
        CHECK_MSG(bad2 == 0, "%zu HBM elements differ from the element-by-element copy", bad2);
        tern_ap whole = hbm2d(TERN_DTYPE_FP32, base, 1, 0, 4 * 36);
        ins2 = dma(st_ap1(TERN_MEM_SBUF, TERN_DTYPE_FP32, 60, 4, 512, 36), whole);
        ins2.ap[TERN_AP_IN0].num_partitions = 1;
        ins2.ap[TERN_AP_IN0].dims[0].num = 4 * 36;
        CHECK_EQ_INT(st_run(core, &ins2, &err), TERN_OK);
        st_read(core, TERN_MEM_SBUF, 60, 4, 512, TERN_DTYPE_FP32, back, 36);
        CHECK(memcmp(back, g, sizeof g) == 0);
    }
    tern_core_free(core);
    return check_report();
}
