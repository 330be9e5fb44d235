/* Determinism of overlapping writes: programs whose destination names some elements more than once (a DMA of
 * 128 SBUF partitions into one HBM row, half-overlapping HBM rows, a tensor_copy and an activation whose
 * destination steps by 0) are run on cores with 1, 2, 4 and 8 host threads, several times each. Every run must
 * give the same bytes and the same predicted time, and the bytes must be tern's documented rule
 * (docs/isa-semantics.md): elements are written in access-pattern order and the last write wins. The expected
 * image comes from a reference walk of the destination pattern written here, independent of the simulator. */
#include "check.h"
#include "sim_test_util.h"

enum { RUNS_PER_COUNT = 25, HBM_BASE = 1 << 20, HBM_REGION = 4 << 20 };

static const unsigned thread_counts[] = {1, 2, 4, 8};

typedef struct {
    const char *name;
    tern_instr ins;
    tern_mem dst_mem;     /* where the result is read back */
    size_t dst_bytes;     /* bytes read back per partition (on chip) or in all (HBM, from HBM_BASE) */
    uint64_t dst_offset;  /* on-chip byte offset of the read-back window */
    unsigned dst_parts;   /* partitions read back (on chip) */
} det_case;

/* The source: distinct fp32 values everywhere, so any wrong writer shows. */
static float src_value(unsigned p, size_t i) { return (float)(p * 100003u + (unsigned)i) * 0.25f + 1.0f; }

static tern_core *make_core(unsigned threads, int via_env)
{
    tern_core_config cfg;
    tern_core_options o;
    tern_error err;
    tern_core *core = NULL;
    memset(&o, 0, sizeof o);
    if (via_env) { /* the CLI's way: threads = 0 reads $TERN_THREADS */
        char v[16];
        snprintf(v, sizeof v, "%u", threads);
        setenv("TERN_THREADS", v, 1);
    } else {
        o.threads = threads;
    }
    if (tern_core_config_load("trn1.2xlarge", &cfg, &err) || tern_core_create(&cfg, &o, &core, &err)) {
        fprintf(stderr, "cannot build core: %s\n", err.msg);
        exit(2);
    }
    if (via_env)
        unsetenv("TERN_THREADS");
    return core;
}

/* Fill SBUF partitions [0, 128) bytes [0, 128 KiB) with the source values and zero the HBM region. */
static void fill(tern_core *core)
{
    enum { N = 32768 };
    float *row = malloc(sizeof(float) * N);
    tern_error err;
    for (unsigned p = 0; p < 128; p++) {
        for (size_t i = 0; i < N; i++)
            row[i] = src_value(p, i);
        if (tern_core_onchip_write(core, TERN_MEM_SBUF, p, 0, row, sizeof(float) * N, &err)) {
            fprintf(stderr, "fill: %s\n", err.msg);
            exit(2);
        }
    }
    free(row);
    uint8_t *z = calloc(1, HBM_REGION);
    if (tern_core_hbm_write(core, HBM_BASE, z, HBM_REGION, &err)) {
        fprintf(stderr, "fill: %s\n", err.msg);
        exit(2);
    }
    free(z);
}

/* The dense source sequence of an SBUF fp32 pattern, in access-pattern order. */
static size_t walk_src(const tern_ap *ap, float *out)
{
    size_t n = 0;
    uint32_t num[4] = {1, 1, 1, 1};
    int64_t step[4] = {0, 0, 0, 0};
    for (unsigned k = 0; k < ap->ndims; k++) {
        num[4 - ap->ndims + k] = ap->dims[k].num;
        step[4 - ap->ndims + k] = ap->dims[k].step;
    }
    for (uint32_t p = 0; p < ap->num_partitions; p++)
        for (uint32_t a = 0; a < num[0]; a++)
            for (uint32_t b = 0; b < num[1]; b++)
                for (uint32_t c = 0; c < num[2]; c++)
                    for (uint32_t d = 0; d < num[3]; d++) {
                        int64_t el = a * step[0] + b * step[1] + c * step[2] + d * step[3];
                        out[n++] = src_value(ap->start_partition + p, (size_t)((int64_t)ap->offset / 4 + el));
                    }
    return n;
}

/* tern's rule, written out: the destination's elements in access-pattern order, each taking the next dense
 * value (f applied), later writes replacing earlier ones. img is the read-back window. */
static void apply_rule(const det_case *c, const tern_ap *d, const float *vals, float (*f)(float), uint8_t *img)
{
    uint32_t num[4] = {1, 1, 1, 1};
    int64_t step[4] = {0, 0, 0, 0};
    for (unsigned k = 0; k < d->ndims; k++) {
        num[4 - d->ndims + k] = d->dims[k].num;
        step[4 - d->ndims + k] = d->dims[k].step;
    }
    size_t j = 0;
    for (uint32_t p = 0; p < d->num_partitions; p++)
        for (uint32_t a = 0; a < num[0]; a++)
            for (uint32_t b = 0; b < num[1]; b++)
                for (uint32_t cc = 0; cc < num[2]; cc++)
                    for (uint32_t e = 0; e < num[3]; e++) {
                        int64_t el = a * step[0] + b * step[1] + cc * step[2] + e * step[3];
                        float v = f ? f(vals[j]) : vals[j];
                        j++;
                        size_t at;
                        if (d->mem == TERN_MEM_HBM)
                            at = (size_t)((int64_t)d->offset - HBM_BASE + ((int64_t)p * d->partition_step + el) * 4);
                        else
                            at = (size_t)(d->start_partition + p) * c->dst_bytes +
                                 (size_t)((int64_t)d->offset - (int64_t)c->dst_offset + el * 4);
                        memcpy(img + at, &v, 4);
                    }
}

static size_t image_bytes(const det_case *c)
{
    return c->dst_mem == TERN_MEM_HBM ? c->dst_bytes : c->dst_bytes * c->dst_parts;
}

static void read_image(tern_core *core, const det_case *c, uint8_t *img)
{
    tern_error err;
    if (c->dst_mem == TERN_MEM_HBM) {
        if (tern_core_hbm_read(core, HBM_BASE, img, c->dst_bytes, &err))
            fprintf(stderr, "read: %s\n", err.msg), exit(2);
        return;
    }
    for (unsigned p = 0; p < c->dst_parts; p++)
        if (tern_core_onchip_read(core, c->dst_mem, p, c->dst_offset, img + (size_t)p * c->dst_bytes, c->dst_bytes,
                                  &err))
            fprintf(stderr, "read: %s\n", err.msg), exit(2);
}

/* Put the read-back window back to img (the state fill() left), so one core serves many runs. */
static void write_image(tern_core *core, const det_case *c, const uint8_t *img)
{
    tern_error err;
    if (c->dst_mem == TERN_MEM_HBM) {
        if (tern_core_hbm_write(core, HBM_BASE, img, c->dst_bytes, &err))
            fprintf(stderr, "write: %s\n", err.msg), exit(2);
        return;
    }
    for (unsigned p = 0; p < c->dst_parts; p++)
        if (tern_core_onchip_write(core, c->dst_mem, p, c->dst_offset, img + (size_t)p * c->dst_bytes, c->dst_bytes,
                                   &err))
            fprintf(stderr, "write: %s\n", err.msg), exit(2);
}

static int run_on(tern_core *core, const det_case *c, unsigned threads, const uint8_t *init, uint8_t *img,
                  int64_t *time_ps)
{
    write_image(core, c, init);
    tern_core_reset_control(core);
    tern_program prog;
    tern_program_init(&prog);
    tern_error err;
    tern_run_stats stats;
    memset(&stats, 0, sizeof stats);
    tern_status st = tern_program_append(&prog, &c->ins, &err);
    if (!st)
        st = tern_core_run(core, &prog, &stats, &err);
    tern_program_free(&prog);
    if (st) {
        CHECK_MSG(0, "%s with %u threads: run failed: %s", c->name, threads, err.msg);
        return 0;
    }
    read_image(core, c, img);
    *time_ps = stats.time_ps;
    return 1;
}

/* The initial image of the read-back window, as fill() leaves it. */
static void initial_image(const det_case *c, uint8_t *img)
{
    if (c->dst_mem == TERN_MEM_HBM) {
        memset(img, 0, c->dst_bytes);
        return;
    }
    for (unsigned p = 0; p < c->dst_parts; p++)
        for (size_t i = 0; i < c->dst_bytes / 4; i++) {
            float v = src_value(p, c->dst_offset / 4 + i);
            memcpy(img + (size_t)p * c->dst_bytes + i * 4, &v, 4);
        }
}

static float half(float x) { return x * 0.5f; } /* activation copy with scale 0.5 */

static void check_case(const det_case *c, float (*f)(float))
{
    TEST_BEGIN(c->name);
    size_t nb = image_bytes(c);
    uint8_t *want = malloc(nb), *got = malloc(nb), *first = malloc(nb);
    float *vals = malloc(sizeof(float) * 128 * 16384);
    initial_image(c, want);
    walk_src(&c->ins.ap[TERN_AP_IN0], vals);
    apply_rule(c, &c->ins.ap[TERN_AP_DST], vals, f, want);
    uint8_t *init = malloc(nb);
    initial_image(c, init);
    int64_t t0 = -1;
    int have_first = 0;
    for (unsigned t = 0; t < sizeof thread_counts / sizeof *thread_counts; t++) {
        /* the first count through $TERN_THREADS (as the CLI sets it), the others through the core options */
        tern_core *core = make_core(thread_counts[t], t == 0);
        fill(core);
        for (int r = 0; r < RUNS_PER_COUNT; r++) {
            int64_t tp = 0;
            if (!run_on(core, c, thread_counts[t], init, got, &tp))
                break;
            if (!have_first) {
                memcpy(first, got, nb);
                t0 = tp;
                have_first = 1;
            }
            size_t bad = nb;
            for (size_t i = 0; i < nb; i++)
                if (got[i] != want[i]) {
                    bad = i;
                    break;
                }
            CHECK_MSG(bad == nb, "%s, %u threads, run %d: byte %zu is 0x%02x, the last-writer rule gives 0x%02x",
                      c->name, thread_counts[t], r, bad, bad < nb ? got[bad] : 0, bad < nb ? want[bad] : 0);
            CHECK_MSG(memcmp(got, first, nb) == 0, "%s, %u threads, run %d: bytes differ from the first run", c->name,
                      thread_counts[t], r);
            CHECK_MSG(tp == t0, "%s, %u threads, run %d: predicted %lld ps, first run %lld ps", c->name,
                      thread_counts[t], r, (long long)tp, (long long)t0);
        }
        tern_core_free(core);
    }
    CHECK_MSG(t0 > 0, "%s: no predicted time", c->name);
    free(init);
    free(want);
    free(got);
    free(first);
    free(vals);
}

static tern_instr instr2(tern_opcode op, tern_engine e, tern_ap dst, tern_ap src)
{
    tern_instr ins = st_instr(op, e);
    ins.ap[TERN_AP_DST] = dst;
    ins.ap[TERN_AP_IN0] = src;
    return ins;
}

int main(void)
{
    enum { C = 2048 }; /* 128 x 2048 fp32 = 1 MiB: above the size that splits copies over host threads */

    /* 128 partitions into one HBM row: partition 127 must win every element. */
    {
        tern_ap dst = st_ap1(TERN_MEM_HBM, TERN_DTYPE_FP32, 0, 128, HBM_BASE, C);
        dst.partition_step = 0;
        det_case c = {"dma: 128 SBUF partitions into one HBM row (partition step 0)",
                      instr2(TERN_OP_DMA_COPY, TERN_ENGINE_SYNC, dst, st_ap1(TERN_MEM_SBUF, TERN_DTYPE_FP32, 0, 128, 0, C)),
                      TERN_MEM_HBM, (size_t)C * 4, 0, 0};
        check_case(&c, NULL);
        /* the rule, spelled out for this case: the last partition's row */
        tern_core *core = make_core(8, 0);
        fill(core);
        uint8_t *img = malloc((size_t)C * 4), *zero = calloc(1, (size_t)C * 4);
        int64_t tp;
        if (run_on(core, &c, 8, zero, img, &tp)) {
            float v0, vl;
            memcpy(&v0, img, 4);
            memcpy(&vl, img + (size_t)(C - 1) * 4, 4);
            CHECK_EQ_HEX(st_f2u(v0), st_f2u(src_value(127, 0)));
            CHECK_EQ_HEX(st_f2u(vl), st_f2u(src_value(127, C - 1)));
        }
        free(img);
        free(zero);
        tern_core_free(core);
    }
    /* Rows half overlapping in HBM (partition step C/2): each half-row belongs to the later partition. */
    {
        tern_ap dst = st_ap1(TERN_MEM_HBM, TERN_DTYPE_FP32, 0, 128, HBM_BASE, C);
        dst.partition_step = C / 2;
        det_case c = {"dma: SBUF rows into half-overlapping HBM rows (partition step C/2)",
                      instr2(TERN_OP_DMA_COPY, TERN_ENGINE_SYNC, dst, st_ap1(TERN_MEM_SBUF, TERN_DTYPE_FP32, 0, 128, 0, C)),
                      TERN_MEM_HBM, (size_t)C * 4 * 65, 0, 0};
        check_case(&c, NULL);
    }
    /* Two free dimensions in HBM, the outer one stepping back over the inner: rows in the middle collide. */
    {
        int32_t steps[2] = {C / 8, 1};
        uint32_t nums[2] = {4, C / 4};
        tern_ap dst = st_ap(TERN_MEM_HBM, TERN_DTYPE_FP32, 0, 128, HBM_BASE, 2, steps, nums);
        dst.partition_step = C / 2;
        det_case c = {"dma: 2-D HBM destination whose rows overlap within and across partitions",
                      instr2(TERN_OP_DMA_COPY, TERN_ENGINE_SYNC, dst, st_ap1(TERN_MEM_SBUF, TERN_DTYPE_FP32, 0, 128, 0, C)),
                      TERN_MEM_HBM, (size_t)C * 4 * 66, 0, 0};
        check_case(&c, NULL);
    }
    /* On chip: a tensor_copy writing 16 rows of 512 onto the same 512 elements of each partition. */
    {
        int32_t ds[2] = {0, 1}, ss[2] = {512, 1};
        uint32_t nums[2] = {16, 512};
        det_case c = {"tensor_copy: 16 source rows onto one destination row per partition (step 0)",
                      instr2(TERN_OP_TENSOR_COPY, TERN_ENGINE_VECTOR,
                             st_ap(TERN_MEM_SBUF, TERN_DTYPE_FP32, 0, 128, 65536, 2, ds, nums),
                             st_ap(TERN_MEM_SBUF, TERN_DTYPE_FP32, 0, 128, 0, 2, ss, nums)),
                      TERN_MEM_SBUF, 2048, 65536, 128};
        check_case(&c, NULL);
    }
    /* The same through DMA, SBUF to SBUF, with rows overlapping by a quarter. */
    {
        int32_t ds[2] = {384, 1}, ss[2] = {512, 1};
        uint32_t nums[2] = {16, 512};
        det_case c = {"dma: SBUF rows overlapping by a quarter within each partition",
                      instr2(TERN_OP_DMA_COPY, TERN_ENGINE_SYNC,
                             st_ap(TERN_MEM_SBUF, TERN_DTYPE_FP32, 0, 128, 65536, 2, ds, nums),
                             st_ap(TERN_MEM_SBUF, TERN_DTYPE_FP32, 0, 128, 0, 2, ss, nums)),
                      TERN_MEM_SBUF, 384 * 15 * 4 + 2048, 65536, 128};
        check_case(&c, NULL);
    }
    /* An activation large enough to be split over threads, its output stepping by 0. */
    {
        int32_t ds[2] = {0, 1}, ss[2] = {512, 1};
        uint32_t nums[2] = {16, 512};
        tern_instr act = instr2(TERN_OP_ACTIVATION, TERN_ENGINE_SCALAR,
                                st_ap(TERN_MEM_SBUF, TERN_DTYPE_FP32, 0, 128, 65536, 2, ds, nums),
                                st_ap(TERN_MEM_SBUF, TERN_DTYPE_FP32, 0, 128, 0, 2, ss, nums));
        act.func = TERN_ACT_COPY;
        act.imm0.f = 0.5f;
        det_case c = {"activation: x*0.5 over 16 rows onto one destination row per partition", act, TERN_MEM_SBUF,
                      2048, 65536, 128};
        check_case(&c, half);
    }
    /* A disjoint copy still takes the threaded path and still matches (the common case stays fast). */
    {
        tern_ap dst = st_ap1(TERN_MEM_HBM, TERN_DTYPE_FP32, 0, 128, HBM_BASE, C);
        dst.partition_step = C;
        det_case c = {"dma: disjoint rows (the threaded path) match the rule too",
                      instr2(TERN_OP_DMA_COPY, TERN_ENGINE_SYNC, dst, st_ap1(TERN_MEM_SBUF, TERN_DTYPE_FP32, 0, 128, 0, C)),
                      TERN_MEM_HBM, (size_t)C * 4 * 128, 0, 0};
        check_case(&c, NULL);
    }
    return check_report();
}
