/* The kernel builder: automatic synchronisation (read-after-write, write-after-read, elision of satisfied
 * waits, extra waits as sem_wait), SBUF/PSUM allocation (bank rule, capacity errors, reuse that carries pending
 * accesses), views and their errors, build-time hardware rules, end-to-end runs, and determinism. */
#include "kernel_test_util.h"
#include "tern/kernel_lib.h"

static void tern_lib_gemm_for_test(tern_kernel *k, tern_view o, tern_view x, tern_view y)
{
    tern_gemm_opts opts;
    tern_gemm_opts_default(&opts);
    opts.tiles_in_block_m = 1;
    opts.tiles_in_block_n = 1;
    opts.tiles_in_block_k = 1;
    tern_lib_gemm(k, o, x, y, &opts);
}

static tern_kernel *make(const char *machine, tern_core_config *cfg)
{
    tern_error err;
    if (tern_core_config_load(machine, cfg, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        exit(2);
    }
    tern_kernel *k = NULL;
    if (tern_kernel_create(cfg, "t", &k, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        exit(2);
    }
    return k;
}

static const tern_instr *last(const tern_kernel *k, tern_engine e)
{
    const tern_stream *s = &tern_kernel_program(k)->streams[e];
    return s->count ? &s->instrs[s->count - 1] : NULL;
}

static void expect_error(tern_kernel *k, const char *label, const char *needle)
{
    TEST_BEGIN(label);
    tern_error err;
    tern_status st = tern_kernel_status(k, &err);
    CHECK_MSG(st != TERN_OK, "expected a build error");
    if (st)
        CHECK_STR_CONTAINS(err.msg, needle);
}

int main(void)
{
    tern_core_config cfg;

    TEST_BEGIN("read after a DMA write waits for the queue's count");
    {
        tern_kernel *k = make("neuroncore-v2", &cfg);
        tern_view in = tern_kernel_input2d(k, "x", TERN_DTYPE_FP32, 128, 64);
        tern_view t = tern_kernel_sbuf(k, TERN_DTYPE_FP32, 128, 64, "t");
        tern_view u = tern_kernel_sbuf(k, TERN_DTYPE_FP32, 128, 64, "u");
        tern_kernel_dma_copy(k, t, in, 3);
        const tern_instr *d = last(k, TERN_ENGINE_SYNC);
        CHECK_EQ_INT(d->signal_sem, TERN_ENGINE_COUNT + 3);
        CHECK_EQ_INT(d->wait_sem, TERN_SEM_NONE);
        tern_kernel_tensor_copy(k, TERN_ENGINE_VECTOR, u, t);
        const tern_instr *v = last(k, TERN_ENGINE_VECTOR);
        CHECK_EQ_INT(v->wait_sem, TERN_ENGINE_COUNT + 3);
        CHECK_EQ_INT(v->wait_value, 1);
        CHECK_EQ_INT(v->signal_sem, TERN_ENGINE_VECTOR);

        TEST_BEGIN("a wait the engine already performed is elided");
        tern_view w = tern_kernel_sbuf(k, TERN_DTYPE_FP32, 128, 64, "w");
        tern_kernel_tensor_scalar(k, TERN_ENGINE_VECTOR, w, t, TERN_ALU_MULT, 2.0f, TERN_ALU_BYPASS, 0.0f);
        CHECK_EQ_INT(last(k, TERN_ENGINE_VECTOR)->wait_sem, TERN_SEM_NONE);

        TEST_BEGIN("same engine needs no wait (in order)");
        tern_kernel_tensor_tensor(k, TERN_ENGINE_VECTOR, w, w, u, TERN_ALU_ADD);
        CHECK_EQ_INT(last(k, TERN_ENGINE_VECTOR)->wait_sem, TERN_SEM_NONE);

        TEST_BEGIN("write after read waits for the reader");
        tern_kernel_dma_copy(k, t, in, 4); /* overwrites t, which VectorE read (its 1st and 2nd instructions) */
        d = last(k, TERN_ENGINE_SYNC);
        /* also WAW on t after queue 3's write: two waits, so one becomes a sem_wait before it */
        const tern_stream *sy = &tern_kernel_program(k)->streams[TERN_ENGINE_SYNC];
        CHECK_EQ_INT(sy->count, 3);
        CHECK_EQ_INT(sy->instrs[1].opcode, TERN_OP_SEM_WAIT);
        CHECK(sy->instrs[1].wait_sem == TERN_ENGINE_VECTOR || d->wait_sem == TERN_ENGINE_VECTOR);
        uint32_t vwait = sy->instrs[1].wait_sem == TERN_ENGINE_VECTOR ? sy->instrs[1].wait_value : d->wait_value;
        CHECK_EQ_INT(vwait, 2);

        TEST_BEGIN("synchronised kernel runs and validates");
        tern_view out = tern_kernel_output2d(k, "y", TERN_DTYPE_FP32, 128, 64);
        tern_kernel_store(k, out, w);
        tern_error err;
        CHECK_EQ_INT(tern_kernel_status(k, &err), TERN_OK);
        tern_core *core = ktu_core("neuroncore-v2", &cfg);
        float x[128 * 64], y[128 * 64];
        ktu_fill(x, 128 * 64, TERN_DTYPE_FP32, 3);
        CHECK_EQ_INT(tern_kernel_write_f32(k, core, "x", x, 128 * 64, &err), TERN_OK);
        CHECK_EQ_INT(tern_kernel_run(k, core, NULL, &err), TERN_OK);
        CHECK_EQ_INT(tern_kernel_read_f32(k, core, "y", y, 128 * 64, &err), TERN_OK);
        int wrong = 0;
        for (int i = 0; i < 128 * 64; i++)
            wrong += y[i] != 2.0f * x[i] + x[i];
        CHECK_EQ_INT(wrong, 0);
        tern_core_free(core);
        tern_kernel_free(k);
    }

    TEST_BEGIN("released space passes its pending reads to the next tile");
    {
        tern_kernel *k = make("neuroncore-v2", &cfg);
        uint32_t whole = (uint32_t)(cfg.sbuf_partition_bytes / 4);
        tern_view in = tern_kernel_input2d(k, "x", TERN_DTYPE_FP32, 128, whole);
        tern_view a = tern_kernel_sbuf(k, TERN_DTYPE_FP32, 128, whole, "a");
        tern_view ps = tern_kernel_psum(k, TERN_DTYPE_FP32, 128, 64, "ps");
        tern_kernel_dma_copy(k, a, in, 0);
        tern_kernel_tensor_copy(k, TERN_ENGINE_VECTOR, ps, tern_view_block(k, a, 0, 128, 0, 64));
        tern_kernel_release(k, a);
        tern_view b = tern_kernel_sbuf(k, TERN_DTYPE_FP32, 128, whole, "b");
        CHECK_EQ_INT(b.ap.offset, a.ap.offset); /* the only place it fits */
        tern_kernel_dma_copy(k, b, in, 1);
        const tern_stream *sy = &tern_kernel_program(k)->streams[TERN_ENGINE_SYNC];
        int waits_vector = 0, waits_q0 = 0;
        for (size_t i = 1; i < sy->count; i++) {
            waits_vector |= sy->instrs[i].wait_sem == TERN_ENGINE_VECTOR && sy->instrs[i].wait_value == 1;
            waits_q0 |= sy->instrs[i].wait_sem == TERN_ENGINE_COUNT + 0 && sy->instrs[i].wait_value == 1;
        }
        CHECK_MSG(waits_vector, "the load into the reused space must wait for VectorE's read of the old tile");
        CHECK_MSG(waits_q0, "and for the old tile's DMA write");

        TEST_BEGIN("using a released tile is an error");
        tern_kernel_tensor_copy(k, TERN_ENGINE_VECTOR, ps, tern_view_block(k, a, 0, 128, 0, 64));
        expect_error(k, "using a released tile is an error", "view of released tile 'a'");
        tern_kernel_free(k);
    }

    {
        tern_kernel *k = make("neuroncore-v2", &cfg);
        tern_kernel_sbuf(k, TERN_DTYPE_FP32, 128, 40000, "huge");
        tern_kernel_sbuf(k, TERN_DTYPE_FP32, 128, 10000, "more");
        expect_error(k, "SBUF capacity overflow names the tile and the bytes",
                     "tile 'more': sbuf allocation of 40000 bytes per partition fails: 20224 of 180224 bytes free");
        tern_kernel_free(k);
    }
    {
        tern_kernel *k = make("neuroncore-v2", &cfg);
        tern_view p1 = tern_kernel_psum(k, TERN_DTYPE_FP32, 128, 300, "p1");
        tern_view p2 = tern_kernel_psum(k, TERN_DTYPE_FP32, 128, 300, "p2");
        TEST_BEGIN("PSUM tiles never straddle a bank");
        CHECK_EQ_INT(p1.ap.offset, 0);
        CHECK_EQ_INT(p2.ap.offset, 2048);
        for (int i = 0; i < 6; i++)
            tern_kernel_psum(k, TERN_DTYPE_FP32, 128, 512, "bank");
        tern_kernel_psum(k, TERN_DTYPE_FP32, 128, 512, "ninth");
        expect_error(k, "a ninth full bank does not fit", "tile 'ninth': psum allocation of 2048 bytes per partition fails");
        tern_kernel_free(k);
    }
    {
        tern_kernel *k = make("neuroncore-v2", &cfg);
        tern_kernel_sbuf(k, TERN_DTYPE_FP32, 129, 4, "tall");
        expect_error(k, "tile taller than the partitions", "tile 'tall': partition dimension 129 outside 1..128");
        tern_kernel_free(k);
    }
    {
        tern_kernel *k = make("neuroncore-v2", &cfg);
        tern_view t = tern_kernel_sbuf(k, TERN_DTYPE_FP32, 128, 64, "t");
        tern_view_slice(k, t, 1, 10, 70, 1);
        expect_error(k, "slice past the end", "slice of 't': [10:70:1] of dimension 1 (size 64) is empty or out of range");
        tern_kernel_free(k);
    }
    {
        tern_kernel *k = make("neuroncore-v2", &cfg);
        tern_view t = tern_kernel_sbuf(k, TERN_DTYPE_FP32, 128, 64, "t");
        tern_view_slice(k, t, 0, 0, 128, 2);
        expect_error(k, "strided partition slice", "partitions cannot be strided (step 2)");
        tern_kernel_free(k);
    }
    {
        tern_kernel *k = make("neuroncore-v2", &cfg);
        tern_kernel_input2d(k, "x", TERN_DTYPE_FP32, 4, 4);
        tern_kernel_input2d(k, "x", TERN_DTYPE_FP32, 4, 4);
        expect_error(k, "duplicate tensor name", "tensor 'x' declared twice");
        tern_kernel_free(k);
    }
    {
        tern_kernel *k = make("neuroncore-v2", &cfg);
        tern_kernel_input2d(k, "w", TERN_DTYPE_FP32, 1u << 20, 1u << 14);
        expect_error(k, "tensor larger than HBM", "tensor 'w': 68719476736 bytes do not fit in HBM");
        tern_kernel_free(k);
    }
    {
        tern_kernel *k = make("neuroncore-v2", &cfg);
        tern_view st = tern_kernel_sbuf(k, TERN_DTYPE_BF16, 128, 128, "st");
        tern_view mv = tern_kernel_sbuf(k, TERN_DTYPE_BF16, 128, 1024, "mv");
        tern_view ps = tern_kernel_tile(k, TERN_MEM_PSUM, TERN_DTYPE_FP32, 128, 1, (uint32_t[]){1024}, "ps2");
        tern_kernel_memset(k, TERN_ENGINE_AUTO, st, 0);
        tern_kernel_memset(k, TERN_ENGINE_AUTO, mv, 0);
        tern_kernel_matmul(k, ps, st, mv, 0);
        expect_error(k, "hardware rules are checked as the kernel is built", "moving free size 1024 exceeds 512");
        tern_kernel_free(k);
    }
    {
        tern_kernel *k = make("neuroncore-v2", &cfg);
        tern_view t = tern_kernel_sbuf(k, TERN_DTYPE_FP32, 64, 8, "t");
        tern_view u = tern_kernel_sbuf(k, TERN_DTYPE_FP32, 32, 8, "u");
        tern_kernel_tensor_copy(k, TERN_ENGINE_AUTO, u, tern_view_slice(k, t, 0, 16, 48, 1));
        expect_error(k, "start-partition rule at build time", "start partition 16 not allowed for 32 partitions");
        tern_kernel_free(k);
    }

    {
        /* Completions of a queue are counted in issue order, so two engines feeding one queue could satisfy a
         * wait with the wrong DMA: refused; the same DMA on a queue of its own is fine. */
        tern_kernel *k = make("neuroncore-v2", &cfg);
        tern_view in = tern_kernel_input2d(k, "x", TERN_DTYPE_FP32, 128, 64);
        tern_view t = tern_kernel_sbuf(k, TERN_DTYPE_FP32, 128, 64, "t");
        tern_view u = tern_kernel_sbuf(k, TERN_DTYPE_FP32, 128, 64, "u");
        tern_kernel_dma_copy(k, t, in, 2);
        tern_instr ins;
        memset(&ins, 0, sizeof ins);
        ins.opcode = TERN_OP_DMA_COPY;
        ins.engine = TERN_ENGINE_GPSIMD;
        ins.ap[TERN_AP_DST] = u.ap;
        ins.ap[TERN_AP_IN0] = in.ap;
        for (int s = 0; s < TERN_INSTR_OPERANDS; s++)
            if (s != TERN_AP_DST && s != TERN_AP_IN0)
                ins.ap[s].offset_reg = TERN_REG_NONE;
        ins.queue = 5;
        tern_kernel_emit(k, &ins, &in, 1, &u, 1);
        TEST_BEGIN("a DMA from GpSimd on a queue of its own");
        CHECK_EQ_INT(tern_kernel_status(k, NULL), TERN_OK);
        ins.queue = 2;
        tern_kernel_emit(k, &ins, &in, 1, &u, 1);
        expect_error(k, "two engines feeding one DMA queue",
                     "dma_copy on DMA queue 2 issued by the gpsimd engine, but the sync engine already issues on that "
                     "queue");
        tern_kernel_free(k);
    }

    TEST_BEGIN("automatic queues: Sync never takes the last quarter, other engines only those");
    {
        tern_kernel *k = make("neuroncore-v2", &cfg);
        tern_view in = tern_kernel_input2d(k, "x", TERN_DTYPE_FP32, 16, 64);
        unsigned Q = cfg.dma_queues, R = Q / 4, bad = 0;
        for (unsigned i = 0; i < 2 * Q; i++) {
            tern_view t = tern_kernel_sbuf(k, TERN_DTYPE_FP32, 16, 64, "t");
            tern_kernel_dma_copy(k, t, in, -1);
            bad += last(k, TERN_ENGINE_SYNC)->queue >= Q - R;
            tern_view u = tern_kernel_sbuf(k, TERN_DTYPE_FP32, 16, 64, "u");
            tern_kernel_dma_copy_on(k, TERN_ENGINE_GPSIMD, u, in, -1);
            bad += last(k, TERN_ENGINE_GPSIMD)->queue < Q - R;
            tern_kernel_release(k, t);
            tern_kernel_release(k, u);
        }
        CHECK_EQ_INT((int)bad, 0);
        CHECK_EQ_INT(tern_kernel_status(k, NULL), TERN_OK);
        tern_kernel_free(k);
    }

    TEST_BEGIN("building the same kernel twice gives the same program");
    {
        uint8_t *enc[2];
        size_t len[2];
        for (int r = 0; r < 2; r++) {
            tern_kernel *k = make("neuroncore-v2", &cfg);
            tern_view x = tern_kernel_input2d(k, "x", TERN_DTYPE_BF16, 300, 200);
            tern_view y = tern_kernel_input2d(k, "y", TERN_DTYPE_BF16, 300, 150);
            tern_view o = tern_kernel_output2d(k, "o", TERN_DTYPE_FP32, 200, 150);
            tern_lib_gemm_for_test(k, o, x, y);
            tern_error err;
            CHECK_EQ_INT(tern_program_encode(tern_kernel_program(k), &enc[r], &len[r], &err), TERN_OK);
            tern_kernel_free(k);
        }
        CHECK(len[0] == len[1] && memcmp(enc[0], enc[1], len[0]) == 0);
        free(enc[0]);
        free(enc[1]);
    }
    return check_report();
}
