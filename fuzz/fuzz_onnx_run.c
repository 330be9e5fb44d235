/* libFuzzer target for everything that consumes an ONNX model on the device: bytes -> import -> shape inference
 * -> compile (optimise, plan memory, lower to kernels, build the executable) for trn1 -> runtime -> execute with
 * zero inputs, timing-only and then functional, reading every output. Only small static graphs go past inference
 * (FUZZ_ONNX_MAX_NODES nodes, FUZZ_ONNX_MAX_NUMEL elements per value), so the compiler and the simulator see
 * bounded work; the runs also get the instruction and element limits of fuzz_common.h, which the runtime reports
 * as errors. Any crash, sanitizer report, leak or hang is a bug; refusals (unsupported ops, rule violations, the
 * bounds) are expected. Build and run: scripts/fuzz.sh onnx_run. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "tern/compiler.h"
#include "tern/graph.h"
#include "tern/runtime.h"

#define FUZZ_ONNX_MAX_NODES 256
#define FUZZ_ONNX_MAX_NUMEL 16384

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fuzz_load_machines();
    return 0;
}

/* 1 when every value has a known small shape after inference. */
static int small_and_static(const tern_graph *g)
{
    if (tern_graph_node_count(g) > FUZZ_ONNX_MAX_NODES)
        return 0;
    for (int v = 0; v < tern_graph_value_count(g); v++) {
        const tern_graph_value *val = tern_graph_value_at(g, v);
        if (!tern_graph_value_is_static(val) || tern_graph_value_numel(val) > FUZZ_ONNX_MAX_NUMEL)
            return 0;
    }
    return 1;
}

static void run_mode(const tern_exe *x, tern_sim_mode mode)
{
    tern_rt_options o;
    memset(&o, 0, sizeof o);
    o.mode = mode;
    o.max_instructions = FUZZ_MAX_INSTRUCTIONS * 5;
    o.max_elements = FUZZ_MAX_ELEMENTS;
    tern_rt *rt = NULL;
    tern_error err;
    if (tern_rt_create(x, "trn1", &o, &rt, &err) != TERN_OK)
        return;
    int ok = 1;
    for (size_t i = 0; i < x->num_inputs && ok; i++) {
        uint64_t b = tern_exe_io_bytes(&x->inputs[i]);
        void *zero = b <= FUZZ_MAX_IO_BYTES ? calloc(b ? (size_t)b : 1, 1) : NULL;
        ok = zero && tern_rt_set_input(rt, x->inputs[i].name, zero, (size_t)b, &err) == TERN_OK;
        free(zero);
    }
    if (ok && tern_rt_execute(rt, NULL, &err) == TERN_OK && mode == TERN_MODE_FUNCTIONAL)
        for (size_t i = 0; i < x->num_outputs; i++) {
            uint64_t b = tern_exe_io_bytes(&x->outputs[i]);
            void *out = b <= FUZZ_MAX_IO_BYTES ? malloc(b ? (size_t)b : 1) : NULL;
            if (out)
                (void)tern_rt_get_output(rt, x->outputs[i].name, out, (size_t)b, &err);
            free(out);
        }
    tern_rt_free(rt);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tern_graph *g = NULL;
    tern_error err;
    if (tern_graph_load_onnx_buffer(data, size, &g, &err) != TERN_OK)
        return 0;
    if (tern_graph_infer(g, &err) == TERN_OK && small_and_static(g)) {
        tern_compile_opts o;
        tern_compile_opts_default(&o);
        o.machine = "trn1";
        tern_exe x;
        tern_exe_init(&x);
        if (tern_compile(g, &o, &x, NULL, &err) == TERN_OK) {
            size_t instrs = 0;
            for (unsigned c = 0; c < x.cores; c++)
                instrs += tern_program_instr_count(&x.programs[c]);
            if (instrs <= (size_t)FUZZ_MAX_INSTRUCTIONS * 5) {
                run_mode(&x, TERN_MODE_TIMING_ONLY);
                run_mode(&x, TERN_MODE_FUNCTIONAL);
            }
        }
        tern_exe_free(&x);
    }
    tern_graph_free(g);
    return 0;
}
