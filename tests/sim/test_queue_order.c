/* DMA queues complete in order (issue 11): the kernel builder reads a queue's completion count as "the first n
 * transfers issued on this queue are done", which holds only if a later, smaller transfer on the same queue cannot
 * signal before an earlier, larger one. The probe: an 8-row x 32 KiB load followed by a 4-byte load on the same
 * queue; VectorE then reads the first tile. Its read must not start before that tile's data has arrived (before
 * the fix it started at 1.74 us, the data arriving at 3.30 us). Functional results never depended on this (the
 * simulator executes in commit order); only the predicted times did. */
#include "../kernel/kernel_test_util.h"

typedef struct {
    int64_t dma_end[2]; /* data arrival of the Sync stream's DMAs, by their pc order */
    unsigned ndma;
    int64_t reader_start;
    size_t reader_pc;
    int have_reader;
} probe;

static void on_event(void *ctx, const tern_event *ev)
{
    probe *p = ctx;
    if (ev->kind == TERN_EVENT_DMA && ev->engine == TERN_ENGINE_SYNC && p->ndma < 2)
        p->dma_end[p->ndma++] = ev->end_ps;
    if (ev->kind == TERN_EVENT_INSTR && ev->engine == TERN_ENGINE_VECTOR && ev->pc == p->reader_pc &&
        !p->have_reader) {
        p->reader_start = ev->start_ps;
        p->have_reader = 1;
    }
}

static void run_probe(tern_sim_mode mode, probe *p, int64_t *time_ps)
{
    tern_core_config cfg;
    tern_error err;
    CHECK(tern_core_config_load("trn1.2xlarge", &cfg, &err) == TERN_OK);
    tern_kernel *k = NULL;
    CHECK(tern_kernel_create(&cfg, "queue_order", &k, &err) == TERN_OK);
    tern_view big = tern_kernel_input2d(k, "big", TERN_DTYPE_FP32, 8, 8192); /* 8 rows x 32 KiB */
    tern_view small = tern_kernel_input2d(k, "small", TERN_DTYPE_FP32, 1, 1); /* 4 bytes */
    tern_view out = tern_kernel_output2d(k, "out", TERN_DTYPE_FP32, 8, 8192);
    tern_view tb = tern_kernel_sbuf(k, TERN_DTYPE_FP32, 8, 8192, "tb");
    /* the small load lands on partition 8, so it runs on another DMA engine than the big one (partitions 0-7)
     * and its data is done first: only in-order completion keeps the queue's count honest */
    tern_view ts = tern_view_slice(k, tern_kernel_sbuf(k, TERN_DTYPE_FP32, 16, 1, "ts"), 0, 8, 9, 1);
    tern_view to = tern_kernel_sbuf(k, TERN_DTYPE_FP32, 8, 8192, "to");
    tern_kernel_dma_copy(k, tb, big, 0);
    tern_kernel_dma_copy(k, ts, small, 0);
    tern_kernel_tensor_scalar(k, TERN_ENGINE_VECTOR, to, tb, TERN_ALU_MULT, 2.0f, TERN_ALU_BYPASS, 0.0f);
    tern_kernel_dma_copy(k, out, to, 1);
    CHECK(tern_kernel_status(k, &err) == TERN_OK);
    /* the reader: the last VectorE instruction (waits first become sem_wait instructions before it) */
    const tern_stream *vs = &tern_kernel_program(k)->streams[TERN_ENGINE_VECTOR];
    memset(p, 0, sizeof *p);
    p->reader_pc = vs->count - 1;
    tern_core_options o = {0};
    o.mode = mode;
    o.on_event = on_event;
    o.event_ctx = p;
    tern_core *core = NULL;
    CHECK(tern_core_create(&cfg, &o, &core, &err) == TERN_OK);
    tern_run_stats st;
    CHECK_MSG(tern_kernel_run(k, core, &st, &err) == TERN_OK, "run: %s", err.msg);
    *time_ps = st.time_ps;
    tern_core_free(core);
    tern_kernel_free(k);
}

int main(void)
{
    TEST_BEGIN("reader of the first tile starts after its data arrives");
    probe p;
    int64_t t_func, t_timing;
    run_probe(TERN_MODE_FUNCTIONAL, &p, &t_func);
    CHECK_EQ_INT(p.ndma, 2);
    CHECK(p.have_reader);
    /* the 4-byte transfer's data lands first: the bug needs that, or the probe tests nothing */
    CHECK_MSG(p.dma_end[1] < p.dma_end[0], "small transfer ends %lld ps, big %lld ps: the probe no longer races",
              (long long)p.dma_end[1], (long long)p.dma_end[0]);
    CHECK_MSG(p.reader_start >= p.dma_end[0], "VectorE reads the big tile at %lld ps, its data arrives at %lld ps",
              (long long)p.reader_start, (long long)p.dma_end[0]);

    TEST_BEGIN("timing-only predicts the same");
    probe q;
    run_probe(TERN_MODE_TIMING_ONLY, &q, &t_timing);
    CHECK_EQ_INT(t_timing, t_func);
    CHECK_EQ_INT(q.reader_start, p.reader_start);
    return check_report();
}
