/* Automatic DMA queues (src/kernel/ops.c kpick_queue): each issuing engine has a fixed share of the queues, so
 * ScalarE and GpSimd (and VectorE) can all trigger DMAs in one kernel. The bug this guards: ScalarE's stores used
 * to take every queue kept for non-Sync engines round-robin, and a later GpSimd DMA then failed in the builder with
 * "each queue must be fed by one engine". */
#include "kernel_test_util.h"
#include "kernel/builder_internal.h"

enum { P = 128, F = 64, NB = 12 };

static tern_kernel *make(const char *machine, tern_core_config *cfg)
{
    tern_error err;
    if (tern_core_config_load(machine, cfg, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        exit(2);
    }
    tern_kernel *k = NULL;
    if (tern_kernel_create(cfg, "q", &k, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        exit(2);
    }
    return k;
}

/* The engine that stores block b: ScalarE first for a run of blocks (the order that used to fail), then GpSimd,
 * then interleaved ScalarE / GpSimd / VectorE. */
static tern_engine store_engine(unsigned b)
{
    if (b < 4)
        return TERN_ENGINE_SCALAR;
    if (b < 7)
        return TERN_ENGINE_GPSIMD;
    static const tern_engine mix[3] = {TERN_ENGINE_SCALAR, TERN_ENGINE_GPSIMD, TERN_ENGINE_VECTOR};
    return mix[(b - 7) % 3];
}

/* y = x through NB tiles: Sync loads each block, the block's store engine stores it. Returns 0 when the kernel
 * builds, runs and copies every element exactly, and every queue is used by one engine inside its own share. */
static void check_machine(const char *machine)
{
    char label[128];
    snprintf(label, sizeof label, "%s: ScalarE, GpSimd and VectorE stores build, run and copy exactly", machine);
    TEST_BEGIN(label);
    tern_core_config cfg;
    tern_kernel *k = make(machine, &cfg);
    tern_view x = tern_kernel_input2d(k, "x", TERN_DTYPE_FP32, P, (uint64_t)F * NB);
    tern_view y = tern_kernel_output2d(k, "y", TERN_DTYPE_FP32, P, (uint64_t)F * NB);
    for (unsigned b = 0; b < NB; b++) {
        tern_view t = tern_kernel_sbuf(k, TERN_DTYPE_FP32, P, F, "t");
        tern_kernel_dma_copy(k, t, tern_view_block(k, x, 0, P, b * F, (b + 1) * F), -1);
        tern_kernel_dma_copy_on(k, store_engine(b), tern_view_block(k, y, 0, P, b * F, (b + 1) * F), t, -1);
        tern_kernel_release(k, t);
    }
    tern_error err;
    tern_status st = tern_kernel_status(k, &err);
    CHECK_MSG(st == TERN_OK, "build failed: %s", st ? err.msg : "");
    if (st) {
        tern_kernel_free(k);
        return;
    }

    /* Every DMA's queue lies in its engine's share, and no queue has two feeders. */
    unsigned Q = cfg.dma_queues, feeder[256] = {0}, used[TERN_ENGINE_COUNT] = {0}, outside = 0, shared = 0;
    const tern_program *prog = tern_kernel_program(k);
    for (unsigned e = 0; e < TERN_ENGINE_COUNT; e++) {
        unsigned first, count;
        kqueue_share(Q, (tern_engine)e, &first, &count);
        const tern_stream *s = &prog->streams[e];
        for (size_t i = 0; i < s->count; i++) {
            if (s->instrs[i].opcode != TERN_OP_DMA_COPY)
                continue;
            unsigned q = s->instrs[i].queue;
            outside += q < first || q >= first + count;
            if (feeder[q] && feeder[q] != e + 1)
                shared++;
            if (!feeder[q])
                used[e]++;
            feeder[q] = e + 1;
        }
    }
    CHECK_EQ_INT((int)outside, 0);
    CHECK_EQ_INT((int)shared, 0);
    /* Round-robin inside a share: ScalarE's 6 stores and GpSimd's 5 spread over all of their queues. */
    unsigned first, count;
    kqueue_share(Q, TERN_ENGINE_SCALAR, &first, &count);
    CHECK_EQ_INT((int)used[TERN_ENGINE_SCALAR], (int)(count < 6 ? count : 6));
    kqueue_share(Q, TERN_ENGINE_GPSIMD, &first, &count);
    CHECK_EQ_INT((int)used[TERN_ENGINE_GPSIMD], (int)(count < 5 ? count : 5));
    CHECK_EQ_INT((int)used[TERN_ENGINE_VECTOR], 1);

    tern_core *core = ktu_core(machine, &cfg);
    size_t n = (size_t)P * F * NB;
    float *in = malloc(n * sizeof *in), *out = malloc(n * sizeof *out);
    if (!in || !out) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    ktu_fill(in, n, TERN_DTYPE_FP32, 11);
    CHECK_EQ_INT(tern_kernel_write_f32(k, core, "x", in, n, &err), TERN_OK);
    st = tern_kernel_run(k, core, NULL, &err);
    CHECK_MSG(st == TERN_OK, "run failed: %s", st ? err.msg : "");
    CHECK_EQ_INT(tern_kernel_read_f32(k, core, "y", out, n, &err), TERN_OK);
    size_t wrong = 0;
    for (size_t i = 0; i < n; i++)
        wrong += memcmp(&in[i], &out[i], sizeof in[i]) != 0;
    CHECK_EQ_INT((int)wrong, 0);
    free(in);
    free(out);
    tern_core_free(core);
    tern_kernel_free(k);
}

int main(void)
{
    check_machine("neuroncore-v2");
    check_machine("neuroncore-v3");
    check_machine("neuroncore-v4");

    TEST_BEGIN("an engine's queue choice does not depend on another engine's DMAs");
    {
        tern_core_config cfg;
        uint8_t q[2][3];
        for (int r = 0; r < 2; r++) {
            tern_kernel *k = make("neuroncore-v2", &cfg);
            tern_view x = tern_kernel_input2d(k, "x", TERN_DTYPE_FP32, P, F);
            tern_view t = tern_kernel_sbuf(k, TERN_DTYPE_FP32, P, F, "t");
            if (r == 1) /* ScalarE triggers eight DMAs first */
                for (int i = 0; i < 8; i++) {
                    tern_view u = tern_kernel_sbuf(k, TERN_DTYPE_FP32, P, F, "u");
                    tern_kernel_dma_copy_on(k, TERN_ENGINE_SCALAR, u, x, -1);
                    tern_kernel_release(k, u);
                }
            for (int i = 0; i < 3; i++) {
                tern_kernel_dma_copy_on(k, TERN_ENGINE_GPSIMD, t, x, -1);
                const tern_stream *s = &tern_kernel_program(k)->streams[TERN_ENGINE_GPSIMD];
                q[r][i] = s->instrs[s->count - 1].queue;
            }
            CHECK_EQ_INT(tern_kernel_status(k, NULL), TERN_OK);
            tern_kernel_free(k);
        }
        CHECK_EQ_INT(memcmp(q[0], q[1], sizeof q[0]), 0);
    }

    TEST_BEGIN("the shares partition the queues: Sync 3/4, the rest split by engine, for 8..64 queues");
    {
        unsigned bad = 0;
        for (unsigned Q = 8; Q <= 64; Q++) {
            unsigned owner[64] = {0};
            for (unsigned e = 0; e < TERN_ENGINE_COUNT; e++) {
                unsigned first, count;
                kqueue_share(Q, (tern_engine)e, &first, &count);
                bad += count == 0 || first + count > Q;
                for (unsigned i = first; i < first + count && i < Q; i++) {
                    /* engines past the R-th share the last queue only when fewer than 4 are reserved */
                    bad += owner[i] && !(Q / 4 < 4 && i == Q - 1);
                    owner[i] = e + 1;
                }
            }
            unsigned sf, sc;
            kqueue_share(Q, TERN_ENGINE_SYNC, &sf, &sc);
            bad += sf != 0 || sc != Q - Q / 4;
            unsigned af, ac, gf, gc;
            kqueue_share(Q, TERN_ENGINE_SCALAR, &af, &ac);
            kqueue_share(Q, TERN_ENGINE_GPSIMD, &gf, &gc);
            bad += af == gf; /* ScalarE and GpSimd never share: the pair the bug was about */
            for (unsigned i = 0; i < Q; i++)
                bad += owner[i] == 0;
        }
        CHECK_EQ_INT((int)bad, 0);
    }
    return check_report();
}
