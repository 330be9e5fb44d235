/* Shared by the consumer fuzz targets (fuzz_*_run.c): the work bounds every input runs under, so libFuzzer finds
 * crashes rather than slow inputs, and the core geometries loaded once per process (the machine files are read
 * from TERN_DATA_DIR; re-reading them for each input would dominate the run). The library reports a bound that
 * is hit as an ordinary error (TERN_ERR_RANGE), which the targets treat like any other refusal. */
#ifndef TERN_FUZZ_COMMON_H
#define TERN_FUZZ_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tern/sim.h"

/* Instructions per run: programs of the ISA tests and small models use a few hundred to a few thousand. */
#define FUZZ_MAX_INSTRUCTIONS 20000u
/* Elements touched per functional run (tern_core_options.max_elements): about 10 ms of simulated arithmetic. */
#define FUZZ_MAX_ELEMENTS (1u << 22)
/* Bytes of interface tensors (inputs and outputs) a run may declare before the target skips running it. */
#define FUZZ_MAX_IO_BYTES (1u << 20)

/* The machines an input may name; anything else runs on the first (trn1's NeuronCore-v2). */
static const char *const fuzz_machines[] = {"trn1", "trn2", "trn3"};
#define FUZZ_MACHINES (sizeof fuzz_machines / sizeof fuzz_machines[0])

static tern_core_config fuzz_cfg[FUZZ_MACHINES];

static inline void fuzz_load_machines(void)
{
    for (size_t k = 0; k < FUZZ_MACHINES; k++) {
        tern_error err;
        if (tern_core_config_load(fuzz_machines[k], &fuzz_cfg[k], &err) != TERN_OK) {
            fprintf(stderr, "fuzz: machine %s: %s\n", fuzz_machines[k], err.msg);
            abort();
        }
    }
}

/* Index of the named machine among fuzz_machines (by its first four characters: "trn2.48xlarge" runs on trn2),
 * 0 when it is none of them; machine files named by an input are never read. */
static inline size_t fuzz_machine_index(const char *name)
{
    for (size_t k = 0; k < FUZZ_MACHINES; k++)
        if (!strncmp(name, fuzz_machines[k], 4) || !strcmp(name, fuzz_cfg[k].name))
            return k;
    return 0;
}

#endif
