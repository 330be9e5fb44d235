/* PSUM kept as one broadcast row (core.c's psum_lazy_*): a K = 1 multiply of a uniform stationary (a bias broadcast
 * over the partitions) is recorded as its row instead of written, and the row is then read by its consumers (an
 * accumulating multiply onto exactly that region, an activation reading exactly that region), cut or dropped by
 * multiplies that overwrite its first or last columns or all of it, and written out before anything else touches
 * the bank, and at the run's end. Random programs over those cases, on 1, 2 and 4 host threads, with the workers held
 * up in multiplies left running, on the fp32 chain's AVX-512 and AVX2 kernels: SBUF, PSUM and the predicted time
 * must be those of the same program on the reference matmul path, which never records a row. */
#include "check.h"
#include "sim_test_util.h"

#include "sim/core_internal.h"
#include "sim/exec_lane.h"
#include "sim/matmul.h"

#define SB TERN_MEM_SBUF
#define PS TERN_MEM_PSUM
#define F32 TERN_DTYPE_FP32
#define BF16 TERN_DTYPE_BF16

enum { SBUF_BYTES = 40960, PSUM_BYTES = 16384, BANK = 2048 };
enum { U1 = 0, U2 = 512, NONUNIFORM = 1024 }; /* fp32 [1, 128] stationary rows on partition 0 */
enum { ROWS = 4096 };                          /* fp32 [1, 512] moving rows on partition 0, 2 KiB apart (8) */
enum { STB = 20480, MOV = 21504 };             /* bf16 [128, 128] stationaries (2), [128, 512] moving tiles (2) */
enum { OUT = 24576 };                          /* fp32 [128, 512] tiles for what is read out of PSUM (8) */

static uint64_t rng_state;
static unsigned rnd(unsigned n)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (unsigned)((rng_state >> 33) % n);
}

typedef struct {
    unsigned bank, start, np, col0, n;
} region;

/* Rows are kept where matmul_outer_rows computes the broadcast row: AVX-512F, unless TERN_SIMD caps the level (the
 * reference path and the other kernels write PSUM as before, which the byte comparisons check all the same). */
static int rows_kept_here(void)
{
#if defined(__x86_64__)
    const char *e = getenv("TERN_SIMD");
    return __builtin_cpu_supports("avx512f") && !(e && (!strcmp(e, "portable") || !strcmp(e, "avx2")));
#else
    return 0;
#endif
}

static void add(tern_program *prog, const tern_instr *ins)
{
    tern_error err;
    CHECK_EQ_INT(tern_program_append(prog, ins, &err), TERN_OK);
}

static tern_ap psum_at(unsigned bank, unsigned start, unsigned np, unsigned col0, unsigned n)
{
    return st_ap1(PS, F32, start, np, (uint64_t)bank * BANK + col0 * 4u, n);
}

/* Columns [col0, col0 + n) of a bank: the whole bank, its first or last half or quarter, or a middle piece. */
static void cols(unsigned *col0, unsigned *n)
{
    static const unsigned c[][2] = {{0, 512}, {0, 256}, {256, 256}, {0, 128}, {384, 128}, {128, 256}, {64, 64}};
    unsigned k = rnd(7);
    *col0 = c[k][0];
    *n = c[k][1];
}

/* latch a bf16 [128, m] stationary and multiply a bf16 [128, n] moving tile into dst */
static void bf16_multiply(tern_program *prog, unsigned m, tern_ap dst, int acc)
{
    tern_instr ls = st_instr(TERN_OP_LOAD_STATIONARY, TERN_ENGINE_TENSOR);
    ls.ap[TERN_AP_IN0] = st_ap1(SB, BF16, 0, 128, STB + 256u * rnd(2), m);
    add(prog, &ls);
    tern_instr mm = st_instr(TERN_OP_MULTIPLY_MOVING, TERN_ENGINE_TENSOR);
    mm.ap[TERN_AP_IN0] = st_ap1(SB, BF16, 0, 128, MOV + 1024u * rnd(2), (uint32_t)tern_ap_free_elems(&dst));
    mm.ap[TERN_AP_DST] = dst;
    if (acc)
        mm.flags |= TERN_FLAG_ACCUMULATE;
    add(prog, &mm);
}

/* latch the fp32 [1, 128] stationary row at `stat` and multiply the moving row at ROWS + 2 KiB * row into the whole
 * of bank 0 (K = 1) */
static void row_multiply(tern_program *prog, unsigned stat, unsigned row, int acc)
{
    tern_instr ls = st_instr(TERN_OP_LOAD_STATIONARY, TERN_ENGINE_TENSOR);
    ls.ap[TERN_AP_IN0] = st_ap1(SB, F32, 0, 1, stat, 128);
    add(prog, &ls);
    tern_instr mm = st_instr(TERN_OP_MULTIPLY_MOVING, TERN_ENGINE_TENSOR);
    mm.ap[TERN_AP_IN0] = st_ap1(SB, F32, 0, 1, ROWS + 2048u * row, 512);
    mm.ap[TERN_AP_DST] = psum_at(0, 0, 128, 0, 512);
    if (acc)
        mm.flags |= TERN_FLAG_ACCUMULATE;
    add(prog, &mm);
}

static void random_program(tern_program *prog, unsigned len)
{
    /* every bank TensorE uses starts as a matmul's (accumulation needs it) */
    for (unsigned b = 0; b < 6; b++)
        bf16_multiply(prog, 128, psum_at(b, 0, 128, 0, 512), 0);
    region recent[8];
    unsigned nrecent = 0;
    for (unsigned i = 0; i < len; i++) {
        unsigned kind = rnd(8);
        if (kind <= 1) { /* a bias: a [1, m] stationary (uniform, mostly) times a [1, n] row */
            region r;
            r.np = rnd(4) == 0 ? 64 : 128;
            r.start = r.np == 64 ? 64 * rnd(2) : 0;
            r.bank = rnd(6);
            cols(&r.col0, &r.n);
            unsigned which = rnd(6);
            tern_instr ls = st_instr(TERN_OP_LOAD_STATIONARY, TERN_ENGINE_TENSOR);
            ls.ap[TERN_AP_IN0] = st_ap1(SB, F32, 0, 1, which == 0 ? NONUNIFORM : which % 2 ? U1 : U2, r.np);
            add(prog, &ls);
            tern_instr mm = st_instr(TERN_OP_MULTIPLY_MOVING, TERN_ENGINE_TENSOR);
            mm.ap[TERN_AP_IN0] = st_ap1(SB, F32, 0, 1, ROWS + 2048u * rnd(8), r.n);
            mm.ap[TERN_AP_DST] = psum_at(r.bank, r.start, r.np, r.col0, r.n);
            add(prog, &mm);
            recent[nrecent++ % 8] = r;
        } else if (kind == 2 && nrecent) { /* accumulate onto a bias's region, exactly */
            region r = recent[rnd(nrecent < 8 ? nrecent : 8)];
            bf16_multiply(prog, r.np, psum_at(r.bank, r.start, r.np, r.col0, r.n), 1);
        } else if (kind == 3) { /* overwrite some columns of a bank */
            unsigned c0, n;
            cols(&c0, &n);
            bf16_multiply(prog, 128, psum_at(rnd(6), 0, 128, c0, n), 0);
        } else if (kind == 4 || kind == 5) { /* ScalarE reads PSUM: a bias's region exactly, or any columns */
            region r;
            if (kind == 4 && nrecent) {
                r = recent[rnd(nrecent < 8 ? nrecent : 8)];
            } else {
                r.bank = rnd(6), r.start = 0, r.np = 128;
                cols(&r.col0, &r.n);
            }
            tern_instr a = st_instr(TERN_OP_ACTIVATION, TERN_ENGINE_SCALAR);
            static const uint8_t fn[] = {TERN_ACT_COPY, TERN_ACT_SIGMOID, TERN_ACT_TANH, TERN_ACT_RELU};
            a.func = fn[rnd(4)];
            a.imm0.f = rnd(2) ? 1.0f : 0.5f;
            a.ap[TERN_AP_IN0] = psum_at(r.bank, r.start, r.np, r.col0, r.n);
            a.ap[TERN_AP_DST] = rnd(4) == 0 ? psum_at(6 + rnd(2), r.start, r.np, r.col0, r.n)
                                            : st_ap1(SB, F32, r.start, r.np, OUT + 2048u * rnd(8) + r.col0 * 4u, r.n);
            add(prog, &a);
        } else if (kind == 6) { /* VectorE reads PSUM */
            unsigned c0, n;
            cols(&c0, &n);
            tern_instr c = st_instr(TERN_OP_TENSOR_COPY, TERN_ENGINE_VECTOR);
            c.ap[TERN_AP_IN0] = psum_at(rnd(6), 0, 128, c0, n);
            c.ap[TERN_AP_DST] = st_ap1(SB, F32, 0, 128, OUT + 2048u * rnd(8), n);
            add(prog, &c);
        } else { /* VectorE writes PSUM: a bank TensorE does not use, from one it does */
            unsigned c0, n;
            cols(&c0, &n);
            tern_instr t = st_instr(TERN_OP_TENSOR_TENSOR, TERN_ENGINE_VECTOR);
            t.op0 = TERN_ALU_ADD;
            t.ap[TERN_AP_DST] = psum_at(6 + rnd(2), 0, 128, c0, n);
            t.ap[TERN_AP_IN0] = psum_at(rnd(6), 0, 128, c0, n);
            t.ap[TERN_AP_IN1] = st_ap1(SB, F32, 0, 128, OUT + 2048u * rnd(8), n);
            add(prog, &t);
        }
    }
}

typedef struct {
    uint8_t *sbuf, *psum;
    int64_t time_ps;
    uint64_t count[PSUM_LAZY_KINDS];
    uint64_t posted; /* multiplies left running on the workers */
} snapshot;

static void init_state(tern_core *core, uint64_t seed)
{
    tern_error err;
    uint64_t keep = rng_state;
    rng_state = seed;
    float *v = malloc(SBUF_BYTES);
    for (unsigned p = 0; p < 128; p++) {
        for (unsigned i = 0; i < SBUF_BYTES / 4; i++)
            v[i] = (float)((int)rnd(2001) - 1000) / 256.0f;
        if (p == 0) {
            for (unsigned i = 0; i < 128; i++) {
                v[U1 / 4 + i] = 1.0f;
                v[U2 / 4 + i] = -0.75f;
                v[NONUNIFORM / 4 + i] = i == 77 ? -1.0f : 1.0f;
            }
        }
        tern_core_onchip_write(core, SB, p, 0, v, SBUF_BYTES, &err);
        memset(v, 0, PSUM_BYTES);
        tern_core_onchip_write(core, PS, p, 0, v, PSUM_BYTES, &err);
    }
    free(v);
    rng_state = keep;
}

static void run_on(const tern_program *prog, unsigned threads, int path, uint64_t seed, snapshot *out)
{
    tern_error err;
    tern_core *core = st_core_path("trn1.2xlarge", threads, path);
    init_state(core, seed);
    tern_run_stats st;
    tern_status s = tern_core_run(core, prog, &st, &err);
    CHECK_MSG(s == TERN_OK, "run: %s", s ? err.msg : "");
    out->time_ps = st.time_ps;
    out->sbuf = malloc((size_t)128 * SBUF_BYTES);
    out->psum = malloc((size_t)128 * PSUM_BYTES);
    for (unsigned p = 0; p < 128; p++) {
        tern_core_onchip_read(core, SB, p, 0, out->sbuf + (size_t)p * SBUF_BYTES, SBUF_BYTES, &err);
        tern_core_onchip_read(core, PS, p, 0, out->psum + (size_t)p * PSUM_BYTES, PSUM_BYTES, &err);
    }
    memcpy(out->count, core->psum_lazy_count, sizeof out->count);
    out->posted = exec_lane_posted(core->lane, NULL);
    CHECK_EQ_INT((int)core->psum_lazy_live, 0); /* every region written out or dropped by the run's end */
    tern_core_free(core);
}

static int same(const snapshot *a, const snapshot *b)
{
    return a->time_ps == b->time_ps && !memcmp(a->sbuf, b->sbuf, (size_t)128 * SBUF_BYTES) &&
           !memcmp(a->psum, b->psum, (size_t)128 * PSUM_BYTES);
}

static void snap_free(snapshot *s)
{
    free(s->sbuf);
    free(s->psum);
}

int main(void)
{
    TEST_BEGIN("random programs: PSUM kept as a bias's row gives the reference path's bytes and times");
    uint64_t total[PSUM_LAZY_KINDS] = {0}, held_posted = 0;
    unsigned bad = 0;
    for (unsigned prog_i = 0; prog_i < 24; prog_i++) {
        rng_state = 0xD1B54A32D192ED03ull * (prog_i + 1);
        tern_program prog;
        tern_program_init(&prog);
        random_program(&prog, 20 + prog_i * 2);
        uint64_t seed = 77 + prog_i;
        snapshot ref, runs[6];
        run_on(&prog, 1, TERN_MATMUL_REFERENCE, seed, &ref);
        for (int k = 0; k < PSUM_LAZY_KINDS; k++)
            CHECK_MSG(ref.count[k] == 0, "the reference path kept a row (kind %d)", k);
        setenv("TERN_MATMUL", "fma", 1); /* the fp32 chain, which takes a row, whatever the host's probe picks */
        run_on(&prog, 1, TERN_MATMUL_AUTO, seed, &runs[0]);
        run_on(&prog, 2, TERN_MATMUL_AUTO, seed, &runs[1]);
        run_on(&prog, 4, TERN_MATMUL_AUTO, seed, &runs[2]);
        setenv("TERN_POOL_HOLD_US", "300", 1); /* workers held up before each part of a multiply left running */
        run_on(&prog, 2, TERN_MATMUL_AUTO, seed, &runs[3]);
        /* a worker claims a part only if the host runs it in time: on a loaded host try again */
        for (int again = 0; again < 4 && runs[3].posted == 0 && matmul_f32_supported(); again++) {
            if (!same(&ref, &runs[3])) {
                bad++;
                fprintf(stderr, "program %u, run 3: bytes or time differ from the reference path\n", prog_i);
            }
            snap_free(&runs[3]);
            run_on(&prog, 2, TERN_MATMUL_AUTO, seed, &runs[3]);
        }
        held_posted += runs[3].posted;
        unsetenv("TERN_POOL_HOLD_US");
        setenv("TERN_SIMD", "avx2", 1); /* the AVX2 kernel's accumulation onto the row */
        run_on(&prog, 2, TERN_MATMUL_AUTO, seed, &runs[4]);
        unsetenv("TERN_SIMD");
        unsetenv("TERN_MATMUL");
        run_on(&prog, 2, TERN_MATMUL_AUTO, seed, &runs[5]); /* the host's own kernel choice */
        for (int r = 0; r < 6; r++) {
            if (!same(&ref, &runs[r])) {
                bad++;
                fprintf(stderr, "program %u, run %d: bytes or time differ from the reference path\n", prog_i, r);
            }
            for (int k = 0; k < PSUM_LAZY_KINDS; k++)
                total[k] += runs[r].count[k];
            snap_free(&runs[r]);
        }
        snap_free(&ref);
        tern_program_free(&prog);
    }
    CHECK_EQ_INT((int)bad, 0);
    fprintf(stderr, "  rows recorded %llu, accumulated onto %llu, read by activations %llu, overwritten %llu, "
                    "written out %llu\n",
            (unsigned long long)total[PSUM_LAZY_RECORDED], (unsigned long long)total[PSUM_LAZY_ACCUMULATED],
            (unsigned long long)total[PSUM_LAZY_READ], (unsigned long long)total[PSUM_LAZY_OVERWRITTEN],
            (unsigned long long)total[PSUM_LAZY_WRITTEN_OUT]);
    /* the held runs really left multiplies running beside what follows them (on the chain's vector kernels) */
    fprintf(stderr, "  multiplies left running in the held runs: %llu\n", (unsigned long long)held_posted);
    if (matmul_f32_supported())
        CHECK_MSG(held_posted > 0, "no multiply was left running with the workers held up");
    else
        CHECK_EQ_INT((int)held_posted, 0);
    for (int k = 0; k < PSUM_LAZY_KINDS; k++) {
        if (rows_kept_here())
            CHECK_MSG(total[k] > 0, "no region went through case %d", k);
        else /* without AVX-512F no row is ever recorded, so none is read, cut or written out either */
            CHECK_MSG(total[k] == 0, "case %d happened on a host that keeps no rows", k);
    }

    TEST_BEGIN("a non-uniform stationary, a K > 1 multiply and an accumulating one write PSUM as before");
    {
        tern_program prog;
        tern_program_init(&prog);
        row_multiply(&prog, NONUNIFORM, 0, 0);
        row_multiply(&prog, U1, 0, 1); /* a uniform stationary, but accumulating: not a broadcast of its own */
        snapshot ref, lazy;
        run_on(&prog, 1, TERN_MATMUL_REFERENCE, 5, &ref);
        run_on(&prog, 2, TERN_MATMUL_AUTO, 5, &lazy);
        CHECK(same(&ref, &lazy));
        CHECK_EQ_INT((int)lazy.count[PSUM_LAZY_RECORDED], 0);
        snap_free(&ref);
        snap_free(&lazy);
        tern_program_free(&prog);
    }
    TEST_BEGIN("a multiply that fails its checks over a kept row leaves the row for the run's end to write out");
    {
        /* a bias over bank 0, then a stationary of 64 columns and a multiply over 128 partitions of bank 0: it fails
         * at run time (its partitions must be the stationary's 64), after its commit saw it overwrite the bias */
        tern_program prog;
        tern_program_init(&prog);
        row_multiply(&prog, U2, 0, 0);
        tern_instr ls64 = st_instr(TERN_OP_LOAD_STATIONARY, TERN_ENGINE_TENSOR);
        ls64.ap[TERN_AP_IN0] = st_ap1(SB, BF16, 0, 128, STB, 64);
        add(&prog, &ls64);
        tern_instr wrong = st_instr(TERN_OP_MULTIPLY_MOVING, TERN_ENGINE_TENSOR);
        wrong.ap[TERN_AP_IN0] = st_ap1(SB, BF16, 0, 128, MOV, 512);
        wrong.ap[TERN_AP_DST] = psum_at(0, 0, 128, 0, 512);
        add(&prog, &wrong);
        uint8_t *psum[2];
        for (int k = 0; k < 2; k++) {
            tern_error err;
            tern_core *core = st_core_path("trn1.2xlarge", 2, k ? TERN_MATMUL_AUTO : TERN_MATMUL_REFERENCE);
            init_state(core, 9);
            tern_status s = tern_core_run(core, &prog, NULL, &err);
            CHECK_EQ_INT(s, TERN_ERR_INVALID);
            CHECK_MSG(s && strstr(err.msg, "stationary free size"), "error: %s", s ? err.msg : "(none)");
            if (k)
                CHECK_EQ_INT((int)core->psum_lazy_count[PSUM_LAZY_RECORDED], rows_kept_here() ? 1 : 0);
            psum[k] = malloc((size_t)128 * PSUM_BYTES);
            for (unsigned p = 0; p < 128; p++)
                tern_core_onchip_read(core, PS, p, 0, psum[k] + (size_t)p * PSUM_BYTES, PSUM_BYTES, &err);
            tern_core_free(core);
        }
        CHECK(!memcmp(psum[0], psum[1], (size_t)128 * PSUM_BYTES));
        float v;
        memcpy(&v, psum[1] + 4, 4); /* partition 0, column 1: the bias row's value (-0.75 times the row) */
        CHECK(v != 0.0f);
        free(psum[0]);
        free(psum[1]);
        tern_program_free(&prog);
    }
    return check_report();
}
