/* libFuzzer target for everything that consumes a program: assembly text -> program -> the core's static rules ->
 * a timing-only run -> a functional run, on a fresh simulated core each time (the core the program's .machine
 * names among trn1/trn2/trn3, else trn1's). Any crash, sanitizer report, leak or hang is a bug; refusals and
 * run-time errors (a rule, a deadlock, the work bounds of fuzz_common.h) are the expected outcome for most
 * inputs. When both runs succeed they must predict the same time and instruction counts (the timing model may
 * not depend on values), or the target aborts. Build and run: scripts/fuzz.sh asm_run. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "tern/isa.h"
#include "tern/sim.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fuzz_load_machines();
    return 0;
}

/* One run in the given mode; TERN_OK or the library's refusal. */
static tern_status run_once(const tern_core_config *cfg, const tern_program *p, tern_sim_mode mode,
                            tern_run_stats *stats)
{
    tern_core_options o;
    memset(&o, 0, sizeof o);
    o.mode = mode;
    o.threads = 1;
    o.max_instructions = FUZZ_MAX_INSTRUCTIONS;
    o.max_elements = FUZZ_MAX_ELEMENTS;
    tern_core *core = NULL;
    tern_error err;
    tern_status st = tern_core_create(cfg, &o, &core, &err);
    if (st)
        return st;
    if ((st = tern_core_validate(core, p, &err)) == TERN_OK)
        st = tern_core_run(core, p, stats, &err);
    tern_core_free(core);
    return st;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 64 * 1024)
        return 0; /* the assembler alone is fuzzed on big texts (fuzz_isa_asm) */
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    tern_program p;
    tern_error err;
    if (tern_program_asm(text, &p, &err) == TERN_OK && tern_program_instr_count(&p) <= FUZZ_MAX_INSTRUCTIONS) {
        const tern_core_config *cfg = &fuzz_cfg[fuzz_machine_index(p.machine)];
        tern_run_stats t, f;
        memset(&t, 0, sizeof t);
        memset(&f, 0, sizeof f);
        tern_status st_t = run_once(cfg, &p, TERN_MODE_TIMING_ONLY, &t);
        tern_status st_f = run_once(cfg, &p, TERN_MODE_FUNCTIONAL, &f);
        if (st_t == TERN_OK && st_f == TERN_OK &&
            (t.time_ps != f.time_ps || memcmp(t.instructions, f.instructions, sizeof t.instructions) ||
             t.dma_bytes != f.dma_bytes || t.macs != f.macs))
            abort(); /* timing-only and functional runs must predict the same */
    }
    tern_program_free(&p);
    free(text);
    return 0;
}
