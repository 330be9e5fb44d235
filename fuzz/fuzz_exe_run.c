/* libFuzzer target for everything that consumes an executable: .tern bytes -> decode -> runtime create (constants
 * into HBM) -> zero inputs -> execute, timing-only and then functional, read every output. Each input is tried as
 * given and with its CRC-32 patched (a mutation rarely keeps it valid), so the fuzzer gets past the decoder. The
 * work is bounded (fuzz_common.h): interface tensors over FUZZ_MAX_IO_BYTES are not run, and the runtime gets
 * instruction and element limits, which it reports as errors. Any crash, sanitizer report, leak or hang is a bug.
 * Build and run: scripts/fuzz.sh exe_run. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "tern/runtime.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fuzz_load_machines(); /* only to check that the machine files are there */
    return 0;
}

/* Bytes of every input and output together, or UINT64_MAX when that passes the bound. */
static uint64_t io_bytes(const tern_exe *x)
{
    uint64_t total = 0;
    for (size_t i = 0; i < x->num_inputs + x->num_outputs; i++) {
        const tern_exe_io *io = i < x->num_inputs ? &x->inputs[i] : &x->outputs[i - x->num_inputs];
        uint64_t b = tern_exe_io_bytes(io);
        if (b > FUZZ_MAX_IO_BYTES || (total += b) > FUZZ_MAX_IO_BYTES)
            return UINT64_MAX;
    }
    return total;
}

static void run_mode(const tern_exe *x, tern_sim_mode mode)
{
    tern_rt_options o;
    memset(&o, 0, sizeof o);
    o.mode = mode;
    o.max_instructions = FUZZ_MAX_INSTRUCTIONS;
    o.max_elements = FUZZ_MAX_ELEMENTS;
    tern_rt *rt = NULL;
    tern_error err;
    if (tern_rt_create(x, fuzz_machines[fuzz_machine_index(x->machine)], &o, &rt, &err) != TERN_OK)
        return;
    int ok = 1;
    for (size_t i = 0; i < x->num_inputs && ok; i++) {
        size_t b = (size_t)tern_exe_io_bytes(&x->inputs[i]);
        void *zero = calloc(b ? b : 1, 1);
        ok = zero && tern_rt_set_input(rt, x->inputs[i].name, zero, b, &err) == TERN_OK;
        free(zero);
    }
    if (ok && tern_rt_execute(rt, NULL, &err) == TERN_OK && mode == TERN_MODE_FUNCTIONAL)
        for (size_t i = 0; i < x->num_outputs; i++) {
            size_t b = (size_t)tern_exe_io_bytes(&x->outputs[i]);
            void *out = malloc(b ? b : 1);
            if (out)
                (void)tern_rt_get_output(rt, x->outputs[i].name, out, b, &err);
            free(out);
        }
    tern_rt_free(rt);
}

static void try_exe(const uint8_t *buf, size_t size)
{
    tern_exe x;
    tern_error err;
    if (tern_exe_decode(buf, size, &x, &err) != TERN_OK)
        return;
    size_t instrs = 0;
    for (unsigned c = 0; c < x.cores; c++)
        instrs += tern_program_instr_count(&x.programs[c]);
    if (io_bytes(&x) != UINT64_MAX && instrs <= (size_t)FUZZ_MAX_INSTRUCTIONS * 4) {
        run_mode(&x, TERN_MODE_TIMING_ONLY);
        run_mode(&x, TERN_MODE_FUNCTIONAL);
    }
    tern_exe_free(&x);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy)
        return 0;
    if (size)
        memcpy(copy, data, size);
    try_exe(copy, size);
    if (size >= 16) {
        uint32_t crc = tern_crc32(copy + 16, size - 16);
        uint32_t had = (uint32_t)copy[12] | (uint32_t)copy[13] << 8 | (uint32_t)copy[14] << 16 |
                       (uint32_t)copy[15] << 24;
        if (crc != had) {
            for (int k = 0; k < 4; k++)
                copy[12 + k] = (uint8_t)(crc >> (8 * k));
            try_exe(copy, size);
        }
    }
    free(copy);
    return 0;
}
