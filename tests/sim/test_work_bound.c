/* The work guard of tern_core_options.max_elements and its runtime pass-through (tern_rt_options.max_elements,
 * .max_instructions): a run whose instructions together touch more elements than the limit stops with
 * TERN_ERR_RANGE naming the instruction, the limit and the count, before executing the instruction that would pass
 * it, identically in functional and timing-only mode; 0 means no limit. The fuzz targets rely on it to bound the
 * work of each input (docs/fuzzing.md). The program is the library's softmax kernel for 128 rows of 64 bf16. */
#include "check.h"
#include "tern/runtime.h"
#include "tern/sim.h"

static const char *softmax_s =
    ".machine trn1.2xlarge\n"
    ".semaphores 64\n"
    ".tensor in input bf16 [128,64] @0x1000\n"
    ".tensor out output bf16 [128,64] @0x5000\n"
    "\n"
    ".engine vector\n"
    "    tensor_reduce dst=sbuf[0:128]+0x100:fp32[[1,1]] in0=sbuf[0:128]+0:fp32[[1,64]] op0=max imm_i0=1 flags=negate wait=s5>=1 signal=s1\n"
    "    reciprocal dst=sbuf[0:128]+0x108:fp32[[1,1]] in0=sbuf[0:128]+0x104:fp32[[1,1]] wait=s2>=1 signal=s1\n"
    "    tensor_scalar dst=sbuf[0:128]+0:fp32[[1,64]] in0=sbuf[0:128]+0:fp32[[1,64]] in1=sbuf[0:128]+0x108:fp32[[1,1]] op0=mult flags=s0_ap signal=s1\n"
    "\n"
    ".engine scalar\n"
    "    sem_wait wait=s1>=1\n"
    "    activation dst=sbuf[0:128]+0:fp32[[1,64]] in0=sbuf[0:128]+0:fp32[[1,64]] in1=sbuf[0:128]+0x100:fp32[[1,1]] extra=sbuf[0:128]+0x104:fp32[[1,1]] imm0=1.0 func=exp flags=reduce wait=s5>=1 signal=s2\n"
    "\n"
    ".engine sync\n"
    "    dma_copy dst=sbuf[0:128]+0:fp32[[1,64]] in0=hbm[0:1]+0x1000:bf16[[64,128],[1,64]] signal=s5\n"
    "    dma_copy dst=hbm[0:1]+0x5000:bf16[[64,128],[1,64]] in0=sbuf[0:128]+0:fp32[[1,64]] queue=1 wait=s1>=3 signal=s6\n";

/* One run of the program under the limits; the status, with err filled. */
static tern_status run_with(const tern_program *p, tern_sim_mode mode, uint64_t max_elements, uint64_t max_instr,
                            tern_run_stats *stats, tern_error *err)
{
    tern_core_config cfg;
    tern_status st = tern_core_config_load("trn1", &cfg, err);
    if (st)
        return st;
    tern_core_options o;
    memset(&o, 0, sizeof o);
    o.mode = mode;
    o.threads = 1;
    o.max_elements = max_elements;
    o.max_instructions = max_instr;
    tern_core *c = NULL;
    if ((st = tern_core_create(&cfg, &o, &c, err)))
        return st;
    st = tern_core_run(c, p, stats, err);
    tern_core_free(c);
    return st;
}

int main(void)
{
    tern_error err;
    tern_program p;
    CHECK(tern_program_asm(softmax_s, &p, &err) == TERN_OK);
    tern_run_stats s;
    const tern_sim_mode modes[2] = {TERN_MODE_FUNCTIONAL, TERN_MODE_TIMING_ONLY};
    for (int m = 0; m < 2; m++) {
        TEST_BEGIN(m ? "work guard, timing-only" : "work guard, functional");
        CHECK_EQ_INT(run_with(&p, modes[m], 0, 0, &s, &err), TERN_OK); /* 0: no limit */
        CHECK_EQ_INT(run_with(&p, modes[m], 1u << 30, 0, &s, &err), TERN_OK);
        /* the first instruction to run, the input DMA, touches 1 x 64 x 128 (HBM) + 128 x 64 (SBUF) elements */
        CHECK_EQ_INT(run_with(&p, modes[m], 1000, 0, &s, &err), TERN_ERR_RANGE);
        CHECK_STR_CONTAINS(err.msg, "sync #0 would pass the work limit of 1000 elements (0 done, it touches 16384)");
        CHECK_EQ_INT(run_with(&p, modes[m], 16384, 0, &s, &err), TERN_ERR_RANGE);
        CHECK_STR_CONTAINS(err.msg, "work limit of 16384 elements (16384 done");
        CHECK_EQ_INT(run_with(&p, modes[m], 0, 3, &s, &err), TERN_ERR_RANGE);
        CHECK_STR_CONTAINS(err.msg, "more than 3 instructions executed");
    }

    TEST_BEGIN("runtime passes its limits to every core");
    {
        tern_exe x;
        tern_exe_init(&x);
        snprintf(x.machine, sizeof x.machine, "trn1");
        x.cores = 1;
        x.programs = calloc(1, sizeof *x.programs);
        x.inputs = calloc(1, sizeof *x.inputs);
        x.outputs = calloc(1, sizeof *x.outputs);
        CHECK(x.programs && x.inputs && x.outputs);
        CHECK(tern_program_copy(&x.programs[0], &p, &err) == TERN_OK);
        tern_exe_io io;
        memset(&io, 0, sizeof io);
        io.dtype = TERN_DTYPE_BF16;
        io.rank = 2;
        io.shape[0] = 128;
        io.shape[1] = 64;
        snprintf(io.name, sizeof io.name, "in");
        x.inputs[0] = io;
        snprintf(io.name, sizeof io.name, "out");
        x.outputs[0] = io;
        x.num_inputs = x.num_outputs = 1;
        static uint16_t in[128 * 64];
        for (int lim = 0; lim < 3; lim++) {
            tern_rt_options o;
            memset(&o, 0, sizeof o);
            o.max_elements = lim == 1 ? 1000 : 0;
            o.max_instructions = lim == 2 ? 3 : 0;
            tern_rt *rt = NULL;
            CHECK_EQ_INT(tern_rt_create(&x, "trn1", &o, &rt, &err), TERN_OK);
            if (!rt)
                break;
            CHECK_EQ_INT(tern_rt_set_input(rt, "in", in, sizeof in, &err), TERN_OK);
            CHECK_EQ_INT(tern_rt_execute(rt, NULL, &err), lim ? TERN_ERR_RANGE : TERN_OK);
            if (lim)
                CHECK_STR_CONTAINS(err.msg, lim == 1 ? "work limit of 1000 elements" : "more than 3 instructions");
            tern_rt_free(rt);
        }
        tern_exe_free(&x);
    }
    tern_program_free(&p);
    return check_report();
}
