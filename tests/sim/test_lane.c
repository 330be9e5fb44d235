/* The background lane (src/sim/exec_lane.c): with more than one host thread, DMA, VectorE, ScalarE and GpSimdE
 * instructions run on the pool's workers while the committing thread goes on, and every result must still be that
 * of executing the instructions in commit order. Random programs on five engines with no semaphores (so commit
 * order alone orders their conflicting accesses) over overlapping SBUF tiles, PSUM banks and HBM blocks: DMA loads,
 * stores, casts and on-chip copies, VectorE / ScalarE / GpSimdE arithmetic, TensorE matmuls (whose packed-operand
 * caches must die when a queued write lands under them), register-addressed operands (executed in place after
 * every conflicting queued instruction). Each program runs on cores with 1 host thread (no lane: the reference), 2
 * and 4, and with TERN_LANE=0: SBUF, PSUM, HBM and the predicted times must be the same bytes. */
#include "check.h"
#include "sim_test_util.h"

#include "sim/core_internal.h"
#include "sim/exec_lane.h"
#include "sim/matmul.h"

#define SB TERN_MEM_SBUF
#define PS TERN_MEM_PSUM
#define HB TERN_MEM_HBM
#define F32 TERN_DTYPE_FP32
#define BF16 TERN_DTYPE_BF16

enum { NT = 64 };             /* fp32 elements per partition of a tile */
enum { PE_BASE = 8192 };      /* bf16 TensorE tiles [128, 128] at PE_BASE + 128 * i: they overlap */
enum { HBM_BLOCK = 128 * NT * 4 };
#define FRESH (4u << 20) /* HBM nothing writes before the run */

static uint64_t rng_state;
static unsigned rnd(unsigned n)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (unsigned)((rng_state >> 33) % n);
}

/* fp32 tiles [np, NT] at byte offsets 128 * k (k < 12): neighbours overlap by half */
static tern_ap tile(unsigned k, unsigned start, unsigned np) { return st_ap1(SB, F32, start, np, 128u * k, NT); }

/* HBM blocks of [128, NT] fp32 at HBM_BLOCK / 2 * k: neighbours overlap by half */
static tern_ap hblock(unsigned k, unsigned start, unsigned np)
{
    int32_t s = 1;
    uint32_t n = NT;
    tern_ap ap = st_ap(HB, F32, 0, np, (uint64_t)HBM_BLOCK / 2 * k + (uint64_t)start * NT * 4, 1, &s, &n);
    ap.partition_step = NT;
    return ap;
}

static void halves(unsigned *start, unsigned *np)
{
    unsigned h = rnd(4);
    *start = h == 1 ? 64 : 0;
    *np = h >= 2 ? 128 : 64;
}

/* A cast load of a TensorE operand: HBM fp32 rows 128 elements apart from hbm_off, n per partition, into the bf16
 * SBUF tile [128, n] at sbuf_off. */
static void load_bf16_tile(tern_instr *ins, uint64_t hbm_off, uint32_t sbuf_off, uint32_t n)
{
    int32_t st = 1;
    tern_ap src = st_ap(HB, F32, 0, 128, hbm_off, 1, &st, &n);
    src.partition_step = 128;
    ins->ap[TERN_AP_DST] = st_ap1(SB, BF16, 0, 128, sbuf_off, n);
    ins->ap[TERN_AP_IN0] = src;
}

static tern_instr random_instr(tern_engine e, int *pe_latched)
{
    unsigned s, n;
    halves(&s, &n);
    tern_instr ins;
    switch (e) {
    case TERN_ENGINE_SYNC: {
        unsigned kind = rnd(5);
        ins = st_instr(TERN_OP_DMA_COPY, e);
        ins.queue = (uint8_t)rnd(4);
        if (kind == 0) { /* load */
            ins.ap[TERN_AP_DST] = tile(rnd(12), s, n);
            ins.ap[TERN_AP_IN0] = hblock(rnd(6), s, n);
        } else if (kind == 1) { /* store, a third of them to HBM pages first touched during the run */
            ins.ap[TERN_AP_DST] = hblock(rnd(6), s, n);
            if (rnd(3) == 0)
                ins.ap[TERN_AP_DST].offset += FRESH;
            ins.ap[TERN_AP_IN0] = tile(rnd(12), s, n);
        } else if (kind == 2) { /* load with a cast into a TensorE tile */
            uint64_t h = (uint64_t)HBM_BLOCK / 2 * rnd(5); /* drawn in this order */
            load_bf16_tile(&ins, h, PE_BASE + 128u * rnd(3), 128);
        } else if (kind == 3) { /* on chip */
            ins.ap[TERN_AP_DST] = tile(rnd(12), s, n);
            ins.ap[TERN_AP_IN0] = tile(rnd(12), s, n);
        } else { /* PSUM is out of DMA's reach: a second store instead */
            ins.ap[TERN_AP_DST] = hblock(rnd(6), 0, 128);
            ins.ap[TERN_AP_IN0] = tile(rnd(12), 0, 128);
        }
        return ins;
    }
    case TERN_ENGINE_VECTOR:
    case TERN_ENGINE_GPSIMD: {
        unsigned kind = rnd(e == TERN_ENGINE_VECTOR ? 4 : 2);
        if (kind == 0) {
            ins = st_instr(TERN_OP_TENSOR_TENSOR, e);
            ins.op0 = (uint8_t)(rnd(2) ? TERN_ALU_ADD : TERN_ALU_MULT);
            ins.ap[TERN_AP_DST] = tile(rnd(12), s, n);
            ins.ap[TERN_AP_IN0] = tile(rnd(12), s, n);
            ins.ap[TERN_AP_IN1] = tile(rnd(12), s, n);
        } else if (kind == 1 && e == TERN_ENGINE_GPSIMD) {
            ins = st_instr(TERN_OP_MEMSET, e);
            ins.imm0.f = (float)rnd(7) - 3.0f;
            ins.ap[TERN_AP_DST] = tile(rnd(12), s, n);
        } else if (kind == 1) {
            ins = st_instr(TERN_OP_TENSOR_SCALAR, e);
            ins.op0 = TERN_ALU_MULT;
            ins.op1 = TERN_ALU_ADD;
            ins.imm0.f = 0.5f + (float)rnd(4) * 0.25f;
            ins.imm1.f = (float)rnd(5) - 2.0f;
            ins.ap[TERN_AP_DST] = tile(rnd(12), s, n);
            ins.ap[TERN_AP_IN0] = tile(rnd(12), s, n);
        } else if (kind == 2) { /* PSUM (a matmul's result, or a bank VectorE wrote) to SBUF */
            ins = st_instr(TERN_OP_TENSOR_COPY, e);
            ins.ap[TERN_AP_DST] = tile(rnd(12), s, n);
            ins.ap[TERN_AP_IN0] = st_ap1(PS, F32, s, n, 256u * rnd(12), NT);
        } else { /* into PSUM bank 0 (matmuls accumulate in bank 1: an accumulation there always follows a matmul) */
            ins = st_instr(TERN_OP_TENSOR_TENSOR, e);
            ins.op0 = TERN_ALU_ADD;
            ins.ap[TERN_AP_DST] = st_ap1(PS, F32, s, n, 256u * rnd(8), NT);
            ins.ap[TERN_AP_IN0] = tile(rnd(12), s, n);
            ins.ap[TERN_AP_IN1] = st_ap1(PS, F32, s, n, 256u * rnd(12), NT);
        }
        return ins;
    }
    case TERN_ENGINE_SCALAR:
        ins = st_instr(TERN_OP_ACTIVATION, e);
        ins.func = (uint8_t)(rnd(2) ? TERN_ACT_COPY : TERN_ACT_SIGMOID);
        ins.imm0.f = 1.0f;
        ins.ap[TERN_AP_DST] = tile(rnd(12), s, n);
        ins.ap[TERN_AP_IN0] = tile(rnd(12), s, n);
        return ins;
    default: /* TensorE: latch a stationary tile, then multiply a moving one into PSUM */
        if (!*pe_latched || rnd(3) == 0) {
            *pe_latched = 1;
            ins = st_instr(TERN_OP_LOAD_STATIONARY, e);
            ins.ap[TERN_AP_IN0] = st_ap1(SB, BF16, 0, 128, PE_BASE + 128u * rnd(3), 128);
            return ins;
        }
        ins = st_instr(TERN_OP_MULTIPLY_MOVING, e);
        ins.ap[TERN_AP_IN0] = st_ap1(SB, BF16, 0, 128, PE_BASE + 128u * rnd(3), NT);
        {
            unsigned k = rnd(12); /* banks 0 and 1; accumulate only where a matmul wrote first, in bank 1 */
            ins.ap[TERN_AP_DST] = st_ap1(PS, F32, 0, 128, 256u * k, NT);
            if (k >= 8 && (*pe_latched >> k & 1) && rnd(2))
                ins.flags |= TERN_FLAG_ACCUMULATE;
            *pe_latched |= 1 << k;
        }
        return ins;
    }
}

/* A program of about `len` instructions per engine; a few VectorE and SyncE instructions address through a
 * register (set on the same engine just before). */
static void random_program(tern_program *prog, unsigned len)
{
    tern_error err;
    const tern_engine es[5] = {TERN_ENGINE_SYNC, TERN_ENGINE_VECTOR, TERN_ENGINE_SCALAR, TERN_ENGINE_GPSIMD,
                               TERN_ENGINE_TENSOR};
    int latched = 0;
    for (unsigned i = 0; i < 5 * len; i++) {
        tern_engine e = es[rnd(5)];
        if (e == TERN_ENGINE_VECTOR && rnd(6) == 0) {
            /* a burst of taps into one accumulator tile (a depthwise convolution's: the lane runs them as one
             * chain when they queue back to back): windows [4, 16] of other tiles, or of the accumulator's own
             * bytes (the chain then runs tap by tap), column step 1 or 2, immediate or [np, 1] scalars */
            unsigned s, n, k = rnd(12), taps = 2 + rnd(8);
            halves(&s, &n);
            for (unsigned t = 0; t < taps; t++) {
                tern_instr tap = st_instr(TERN_OP_SCALAR_TENSOR_TENSOR, e);
                tap.op0 = TERN_ALU_MULT;
                tap.op1 = TERN_ALU_ADD;
                tap.imm0.f = 0.25f * (float)(1 + rnd(6));
                int32_t steps[2] = {16, (int32_t)(1 + rnd(2))};
                uint32_t nums[2] = {4, 16};
                tap.ap[TERN_AP_DST] = tile(k, s, n);
                tap.ap[TERN_AP_IN1] = tap.ap[TERN_AP_DST];
                tap.ap[TERN_AP_IN0] = st_ap(SB, F32, s, n, 128u * rnd(12) + 4u * rnd(4), 2, steps, nums);
                if (rnd(2)) {
                    tap.flags |= TERN_FLAG_S0_AP;
                    tap.ap[TERN_AP_IN2] = st_ap1(SB, F32, s, n, 4u * rnd(2048), 1);
                }
                if (tern_program_append(prog, &tap, &err))
                    fprintf(stderr, "append: %s\n", err.msg);
            }
            continue;
        }
        tern_instr ins = random_instr(e, &latched);
        if ((e == TERN_ENGINE_VECTOR || e == TERN_ENGINE_SYNC) && rnd(10) == 0) {
            tern_instr set = st_instr(TERN_OP_REG_SET, e);
            set.rd = 3;
            set.imm_i0 = 32 * (int32_t)rnd(3); /* elements: 128 bytes of fp32 */
            ins.ap[TERN_AP_DST].offset_reg = 3;
            if (ins.ap[TERN_AP_DST].mem == HB || ins.ap[TERN_AP_DST].mem == PS)
                ins.ap[TERN_AP_DST].offset_reg = TERN_REG_NONE;
            if (tern_program_append(prog, &set, &err))
                fprintf(stderr, "append: %s\n", err.msg);
        }
        if (tern_program_append(prog, &ins, &err))
            fprintf(stderr, "append: %s\n", err.msg);
    }
}

typedef struct {
    uint8_t *sbuf, *psum, *hbm;
    size_t sbuf_n, psum_n, hbm_n;
    int64_t time_ps;
    uint64_t queued, chained, posted, overlapped;
} snapshot;

enum { SBUF_BYTES = 9 * 1024, PSUM_BYTES = 4096, HBM_BYTES = 4 * HBM_BLOCK };

static tern_core *new_core(unsigned threads) { return st_core_threads("trn1.2xlarge", threads); }

/* The same starting values everywhere (the fresh HBM pages are left alone). */
static void init_state(tern_core *core, uint64_t seed)
{
    tern_error err;
    uint64_t keep = rng_state;
    rng_state = seed;
    uint8_t row[SBUF_BYTES];
    float vals[SBUF_BYTES / 4];
    for (unsigned p = 0; p < 128; p++) {
        for (unsigned i = 0; i < SBUF_BYTES / 4; i++)
            vals[i] = (float)((int)rnd(2001) - 1000) / 256.0f;
        memcpy(row, vals, sizeof row);
        tern_core_onchip_write(core, SB, p, 0, row, SBUF_BYTES, &err);
        memset(row, 0, PSUM_BYTES);
        tern_core_onchip_write(core, PS, p, 0, row, PSUM_BYTES, &err);
    }
    float *h = malloc(HBM_BYTES);
    for (unsigned i = 0; i < HBM_BYTES / 4; i++)
        h[i] = (float)((int)rnd(2001) - 1000) / 512.0f;
    tern_core_hbm_write(core, 0, h, HBM_BYTES, &err);
    free(h);
    rng_state = keep;
}

static void snap(tern_core *core, int64_t time_ps, snapshot *out)
{
    tern_error err;
    out->time_ps = time_ps;
    out->sbuf_n = (size_t)128 * SBUF_BYTES;
    out->psum_n = (size_t)128 * PSUM_BYTES;
    out->hbm_n = 2 * (size_t)HBM_BYTES; /* the blocks written before the run, and the fresh ones */
    out->sbuf = malloc(out->sbuf_n);
    out->psum = malloc(out->psum_n);
    out->hbm = malloc(out->hbm_n);
    for (unsigned p = 0; p < 128; p++) {
        tern_core_onchip_read(core, SB, p, 0, out->sbuf + (size_t)p * SBUF_BYTES, SBUF_BYTES, &err);
        tern_core_onchip_read(core, PS, p, 0, out->psum + (size_t)p * PSUM_BYTES, PSUM_BYTES, &err);
    }
    tern_core_hbm_read(core, 0, out->hbm, HBM_BYTES, &err);
    tern_core_hbm_read(core, FRESH, out->hbm + HBM_BYTES, HBM_BYTES, &err);
    out->queued = exec_lane_queued(core->lane);
    out->chained = exec_lane_chained(core->lane);
    out->posted = exec_lane_posted(core->lane, &out->overlapped);
}

static void run_on(const tern_program *prog, unsigned threads, uint64_t seed, snapshot *out)
{
    tern_core *core = new_core(threads);
    init_state(core, seed);
    tern_run_stats st;
    tern_error err;
    tern_status s = tern_core_run(core, prog, &st, &err);
    CHECK_MSG(s == TERN_OK, "run: %s", s ? err.msg : "");
    snap(core, st.time_ps, out);
    tern_core_free(core);
}

static void snap_free(snapshot *s)
{
    free(s->sbuf);
    free(s->psum);
    free(s->hbm);
}

static int same(const snapshot *a, const snapshot *b)
{
    return a->time_ps == b->time_ps && !memcmp(a->sbuf, b->sbuf, a->sbuf_n) && !memcmp(a->psum, b->psum, a->psum_n) &&
           !memcmp(a->hbm, b->hbm, a->hbm_n);
}

/* Runs prog with the workers held up (TERN_POOL_HOLD_US, as the caller set it) into *held, again up to `tries` times
 * while no multiply was left running: a worker claims a part only if the host runs it in time, so a loaded host (a
 * sanitizer build beside other tests) may leave none. No retries where the chain's vector kernels, which post, do not
 * run. Returns how many of the runs differ from ref. */
static unsigned run_held(const tern_program *prog, unsigned threads, uint64_t seed, const snapshot *ref, int tries,
                         snapshot *held)
{
    unsigned differ = 0;
    run_on(prog, threads, seed, held);
    for (int again = 0; again < tries && held->posted == 0 && matmul_f32_supported(); again++) {
        differ += !same(ref, held);
        snap_free(held);
        run_on(prog, threads, seed, held);
    }
    return differ + !same(ref, held);
}

int main(void)
{
    TEST_BEGIN("random programs: the lane with 2 and 4 host threads gives commit order's bytes and times");
    unsigned bad = 0, queued_total = 0, chained_total = 0, posted_total = 0, held_posted = 0;
    for (unsigned prog_i = 0; prog_i < 40; prog_i++) {
        rng_state = 0x9E3779B97F4A7C15ull * (prog_i + 1);
        tern_program prog;
        tern_program_init(&prog);
        random_program(&prog, 12 + prog_i * 3);
        snapshot ref, two, four, off;
        uint64_t seed = 1000 + prog_i;
        run_on(&prog, 1, seed, &ref);
        run_on(&prog, 2, seed, &two);
        run_on(&prog, 4, seed, &four);
        setenv("TERN_LANE", "0", 1);
        run_on(&prog, 2, seed, &off);
        unsetenv("TERN_LANE");
        if (prog_i % 4 == 0) { /* workers held up in multiplies left running (see the test below) */
            snapshot held;
            setenv("TERN_POOL_HOLD_US", "300", 1);
            setenv("TERN_MATMUL", "fma", 1);
            unsigned differ = run_held(&prog, 4, seed, &ref, 4, &held);
            unsetenv("TERN_MATMUL");
            unsetenv("TERN_POOL_HOLD_US");
            if (differ) {
                bad += differ;
                fprintf(stderr, "program %u: results differ with the workers held up\n", prog_i);
            }
            held_posted += (unsigned)held.posted;
            snap_free(&held);
        }
        CHECK_EQ_INT((int)ref.queued, 0);
        CHECK_EQ_INT((int)off.queued, 0);
        if (!same(&ref, &two) || !same(&ref, &four) || !same(&ref, &off)) {
            bad++;
            fprintf(stderr, "program %u: results differ (2 threads %d, 4 threads %d, lane off %d)\n", prog_i,
                    same(&ref, &two), same(&ref, &four), same(&ref, &off));
        }
        queued_total += (unsigned)(two.queued + four.queued);
        chained_total += (unsigned)(two.chained + four.chained);
        posted_total += (unsigned)(two.posted + four.posted);
        snap_free(&ref);
        snap_free(&two);
        snap_free(&four);
        snap_free(&off);
        tern_program_free(&prog);
    }
    CHECK_EQ_INT((int)bad, 0);
    CHECK_MSG(queued_total > 1000, "the lane ran only %u instructions", queued_total);
    /* whether a tap joins the one before depends on a worker not having started it yet: over 40 programs' bursts
     * some always do */
    CHECK_MSG(chained_total > 20, "only %u taps ran as part of a chain", chained_total);
    /* whether the 2- and 4-thread runs leave multiplies running depends on the host's kernel probe (only the fp32
     * chain's path posts) and on timing, so the check is on the runs with the fp32 chain forced and the workers
     * held up */
    if (matmul_f32_supported()) /* the chain's vector kernels post; the reference loop does not */
        CHECK_MSG(held_posted > 0, "no multiply was left running on the workers, even held up");
    else
        CHECK_EQ_INT((int)(held_posted + posted_total), 0);
    fprintf(stderr,
            "  %u queued instructions, %u of them run as part of a chain; %u multiplies left running (%u held up)\n",
            queued_total, chained_total, posted_total, held_posted);

    TEST_BEGIN("the lane's work really overlaps: a TensorE instruction reading a tile a queued DMA writes waits");
    {
        /* load a stationary tile by DMA, then latch it: the latch must see the loaded bytes, not the old ones */
        tern_program prog;
        tern_program_init(&prog);
        tern_error err;
        tern_instr ld = st_instr(TERN_OP_DMA_COPY, TERN_ENGINE_SYNC);
        load_bf16_tile(&ld, 0, PE_BASE, 128);
        ld.signal_sem = 0;
        tern_instr ls = st_instr(TERN_OP_LOAD_STATIONARY, TERN_ENGINE_TENSOR);
        ls.ap[TERN_AP_IN0] = st_ap1(SB, BF16, 0, 128, PE_BASE, 128);
        ls.wait_sem = 0;
        ls.wait_value = 1;
        tern_instr mm = st_instr(TERN_OP_MULTIPLY_MOVING, TERN_ENGINE_TENSOR);
        mm.ap[TERN_AP_IN0] = st_ap1(SB, BF16, 0, 128, PE_BASE + 256, NT);
        mm.ap[TERN_AP_DST] = st_ap1(PS, F32, 0, 128, 0, NT);
        CHECK_EQ_INT(tern_program_append(&prog, &ld, &err), TERN_OK);
        CHECK_EQ_INT(tern_program_append(&prog, &ls, &err), TERN_OK);
        CHECK_EQ_INT(tern_program_append(&prog, &mm, &err), TERN_OK);
        snapshot ref, two;
        run_on(&prog, 1, 7, &ref);
        run_on(&prog, 2, 7, &two);
        CHECK(same(&ref, &two));
        CHECK_EQ_INT((int)two.queued, 1);
        snap_free(&ref);
        snap_free(&two);
        tern_program_free(&prog);
    }
    TEST_BEGIN("a queued instruction that fails is the run's error; the lane is whole again for the next run");
    {
        rng_state = 0x5EED;
        tern_program prog;
        tern_program_init(&prog);
        random_program(&prog, 60);
        snapshot ref, again;
        run_on(&prog, 1, 99, &ref);
        for (unsigned at = 1; at <= 41; at += 20) {
            char v[16];
            snprintf(v, sizeof v, "%u", at);
            setenv("TERN_LANE_FAULT", v, 1); /* read when the core's lane is made, at its first run */
            tern_core *core = new_core(2);
            init_state(core, 99);
            tern_error err;
            tern_status st = tern_core_run(core, &prog, NULL, &err);
            unsetenv("TERN_LANE_FAULT");
            CHECK_EQ_INT(st, TERN_ERR_INVALID);
            char want[64];
            snprintf(want, sizeof want, "injected fault at queued instruction %u (", at);
            if (st)
                CHECK_STR_CONTAINS(err.msg, want);
            /* the same core, its memories reset: the next run gives the reference bytes (no dropped instruction
             * ran late, the queue's counters are consistent) */
            init_state(core, 99);
            tern_run_stats rs;
            st = tern_core_run(core, &prog, &rs, &err);
            CHECK_MSG(st == TERN_OK, "run after the fault: %s", st ? err.msg : "");
            snap(core, rs.time_ps, &again);
            CHECK(same(&ref, &again));
            snap_free(&again);
            tern_core_free(core);
        }
        snap_free(&ref);
        tern_program_free(&prog);
    }
    TEST_BEGIN("multiplies left running: later instructions that touch their bytes wait, others go on beside them");
    {
        /* An FFN-like stream: one stationary, multiplies of N = 512 alternating between PSUM banks 0 and 1
         * (accumulating after the first pair of each group of six), each signalling semaphore 0; after some of them,
         * waiting on it: a DMA reloading the moving tile the multiply read (SyncE), evacuations of both banks
         * (ScalarE reads bank 0, VectorE adds bank 1 into a tile) and a VectorE write into part of bank 1 that the
         * next multiply there waits for and overwrites. */
        tern_program prog;
        tern_program_init(&prog);
        tern_error err;
        tern_instr ls = st_instr(TERN_OP_LOAD_STATIONARY, TERN_ENGINE_TENSOR);
        ls.ap[TERN_AP_IN0] = st_ap1(SB, BF16, 0, 128, PE_BASE, 128);
        CHECK_EQ_INT(tern_program_append(&prog, &ls, &err), TERN_OK);
        for (unsigned i = 0; i < 24; i++) {
            unsigned bank = i % 2, mv = (i / 2) % 3; /* three moving tiles of 512 bf16 (1 KiB) each */
            tern_instr mm = st_instr(TERN_OP_MULTIPLY_MOVING, TERN_ENGINE_TENSOR);
            mm.ap[TERN_AP_IN0] = st_ap1(SB, BF16, 0, 128, 1024u * mv, 512);
            mm.ap[TERN_AP_DST] = st_ap1(PS, F32, 0, 128, 2048u * bank, 512);
            if (i % 6 >= 2 && i != 15)
                mm.flags |= TERN_FLAG_ACCUMULATE;
            if (i == 15) { /* after the memset into its bank */
                mm.wait_sem = 2;
                mm.wait_value = 1;
            }
            mm.signal_sem = 0;
            CHECK_EQ_INT(tern_program_append(&prog, &mm, &err), TERN_OK);
            if (i % 3 == 1) { /* reload the moving tile this multiply read */
                tern_instr ld = st_instr(TERN_OP_DMA_COPY, TERN_ENGINE_SYNC);
                load_bf16_tile(&ld, (uint64_t)HBM_BLOCK / 2 * (i % 3), 1024u * mv, 512);
                ld.wait_sem = 0;
                ld.wait_value = i + 1;
                CHECK_EQ_INT(tern_program_append(&prog, &ld, &err), TERN_OK);
            }
            if (i % 6 == 5) {
                tern_instr ev = st_instr(TERN_OP_ACTIVATION, TERN_ENGINE_SCALAR);
                ev.func = TERN_ACT_SIGMOID;
                ev.imm0.f = 1.0f;
                ev.ap[TERN_AP_DST] = st_ap1(SB, F32, 0, 128, 4096, 512);
                ev.ap[TERN_AP_IN0] = st_ap1(PS, F32, 0, 128, 0, 512);
                ev.wait_sem = 0;
                ev.wait_value = i + 1;
                CHECK_EQ_INT(tern_program_append(&prog, &ev, &err), TERN_OK);
                tern_instr tt = st_instr(TERN_OP_TENSOR_TENSOR, TERN_ENGINE_VECTOR);
                tt.op0 = TERN_ALU_ADD;
                tt.ap[TERN_AP_DST] = st_ap1(SB, F32, 0, 128, 6144, 512);
                tt.ap[TERN_AP_IN0] = st_ap1(PS, F32, 0, 128, 2048, 512);
                tt.ap[TERN_AP_IN1] = st_ap1(SB, F32, 0, 128, 6144, 512);
                tt.wait_sem = 0;
                tt.wait_value = i + 1;
                CHECK_EQ_INT(tern_program_append(&prog, &tt, &err), TERN_OK);
            }
            if (i == 13) {
                tern_instr ms = st_instr(TERN_OP_TENSOR_TENSOR, TERN_ENGINE_VECTOR);
                ms.op0 = TERN_ALU_MULT;
                ms.ap[TERN_AP_DST] = st_ap1(PS, F32, 0, 64, 2048 + 512, 64);
                ms.ap[TERN_AP_IN0] = st_ap1(SB, F32, 0, 64, 4096, 64);
                ms.ap[TERN_AP_IN1] = st_ap1(SB, F32, 0, 64, 6144, 64);
                ms.wait_sem = 0;
                ms.wait_value = i + 1;
                ms.signal_sem = 2;
                CHECK_EQ_INT(tern_program_append(&prog, &ms, &err), TERN_OK);
            }
        }
        snapshot ref, two, four, held;
        /* multiplies are left running on the fp32 chain's path, which the host's probe may not pick (the dot
         * products give the same bits) */
        setenv("TERN_MATMUL", "fma", 1);
        run_on(&prog, 1, 11, &ref);
        run_on(&prog, 2, 11, &two);
        run_on(&prog, 4, 11, &four);
        /* workers held up before each part of a multiply left running (a test aid read when a core's pool is made),
         * so that whatever runs beside it while it should not meets it half done */
        setenv("TERN_POOL_HOLD_US", "2000", 1);
        CHECK_EQ_INT((int)run_held(&prog, 4, 11, &ref, 8, &held), 0); /* each run gives the reference bytes */
        unsetenv("TERN_POOL_HOLD_US");
        unsetenv("TERN_MATMUL");
        CHECK(same(&ref, &two));
        CHECK(same(&ref, &four));
        if (matmul_f32_supported())
            CHECK_MSG(held.posted > 0, "no multiply was left running with the workers held up");
        else
            CHECK_EQ_INT((int)held.posted, 0);
        fprintf(stderr, "  multiplies left running: %llu and %llu (%llu and %llu beside another)\n",
                (unsigned long long)two.posted, (unsigned long long)four.posted,
                (unsigned long long)two.overlapped, (unsigned long long)four.overlapped);
        snap_free(&ref);
        snap_free(&two);
        snap_free(&four);
        snap_free(&held);
        tern_program_free(&prog);
    }
    TEST_BEGIN("a stationary repacked while a multiply left running still reads the panels it was given");
    {
        /* latch A, multiply (left running, workers held); overwrite A's rows by DMA (queued beside the multiply, it
         * invalidates A's packed panels); latch B and multiply into the other bank: B's pack must not land in the
         * panels the first multiply is still reading */
        tern_program prog;
        tern_program_init(&prog);
        tern_error err;
        /* first fill the stationary cache with packed operands, so that A's, once invalidated, is the one to refill */
        for (uint32_t i = 0; i < STAT_CACHE_ENTRIES; i++) {
            tern_instr l0 = st_instr(TERN_OP_LOAD_STATIONARY, TERN_ENGINE_TENSOR);
            l0.ap[TERN_AP_IN0] = st_ap1(SB, BF16, 0, 128, 2048 + 256 * i, 128);
            CHECK_EQ_INT(tern_program_append(&prog, &l0, &err), TERN_OK);
            tern_instr m0 = st_instr(TERN_OP_MULTIPLY_MOVING, TERN_ENGINE_TENSOR);
            m0.ap[TERN_AP_IN0] = st_ap1(SB, BF16, 0, 128, 0, 512);
            m0.ap[TERN_AP_DST] = st_ap1(PS, F32, 0, 128, 2048 * (i % 2), 512);
            CHECK_EQ_INT(tern_program_append(&prog, &m0, &err), TERN_OK);
        }
        const uint32_t A = 2048 + 256 * STAT_CACHE_ENTRIES, B = A + 256;
        tern_instr ls = st_instr(TERN_OP_LOAD_STATIONARY, TERN_ENGINE_TENSOR);
        ls.ap[TERN_AP_IN0] = st_ap1(SB, BF16, 0, 128, A, 128);
        CHECK_EQ_INT(tern_program_append(&prog, &ls, &err), TERN_OK);
        tern_instr mm = st_instr(TERN_OP_MULTIPLY_MOVING, TERN_ENGINE_TENSOR);
        mm.ap[TERN_AP_IN0] = st_ap1(SB, BF16, 0, 128, 0, 512);
        mm.ap[TERN_AP_DST] = st_ap1(PS, F32, 0, 128, 0, 512);
        mm.signal_sem = 0;
        CHECK_EQ_INT(tern_program_append(&prog, &mm, &err), TERN_OK);
        tern_instr ld = st_instr(TERN_OP_DMA_COPY, TERN_ENGINE_SYNC);
        load_bf16_tile(&ld, 0, A, 128);
        ld.wait_sem = 0;
        ld.wait_value = 1; /* after the multiply of A (the only one that signals) */
        ld.signal_sem = 1;
        CHECK_EQ_INT(tern_program_append(&prog, &ld, &err), TERN_OK);
        tern_instr ls2 = ls;
        ls2.ap[TERN_AP_IN0] = st_ap1(SB, BF16, 0, 128, B, 128);
        ls2.wait_sem = 1;
        ls2.wait_value = 1;
        CHECK_EQ_INT(tern_program_append(&prog, &ls2, &err), TERN_OK);
        tern_instr mm2 = mm;
        mm2.ap[TERN_AP_IN0] = st_ap1(SB, BF16, 0, 128, 1024, 512);
        mm2.ap[TERN_AP_DST] = st_ap1(PS, F32, 0, 128, 2048, 512);
        mm2.signal_sem = TERN_SEM_NONE;
        CHECK_EQ_INT(tern_program_append(&prog, &mm2, &err), TERN_OK);
        snapshot ref, held;
        setenv("TERN_MATMUL", "fma", 1);
        run_on(&prog, 1, 5, &ref);
        setenv("TERN_POOL_HOLD_US", "3000", 1);
        uint64_t posted = 0;
        /* three runs, and more while a loaded host has left no multiply running (each must give the reference) */
        for (int rep = 0; rep < 3 || (posted == 0 && rep < 11 && matmul_f32_supported()); rep++) {
            run_on(&prog, 2, 5, &held);
            CHECK(same(&ref, &held));
            posted += held.posted;
            snap_free(&held);
        }
        if (matmul_f32_supported())
            CHECK_MSG(posted > 0, "no multiply was left running with the workers held up");
        unsetenv("TERN_POOL_HOLD_US");
        unsetenv("TERN_MATMUL");
        snap_free(&ref);
        tern_program_free(&prog);
    }
    return check_report();
}
