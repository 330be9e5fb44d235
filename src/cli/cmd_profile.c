/* `tern profile`: run a saved program on a simulated NeuronCore with the profiler attached and print the
 * summary (total time, per-engine activity, DMA, MFU/HFU/MBU, top instructions), optionally writing the
 * Perfetto/Chrome trace and the SVG timeline (docs/profiler.md). In the default functional mode every input
 * tensor is filled with seeded uniform random values in [-1, 1) (integer tensors with zeros, valid indices),
 * so the run does real arithmetic; --timing-only skips arithmetic and data. The machine comes from --machine,
 * else from the program's .machine line. Exit codes: 0 ok, 1 bad program file, failed run or unwritable
 * output, 2 usage (unknown option or machine, missing argument). */
#include <float.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "tern/arch.h"
#include "tern/kernel.h"
#include "tern/prof.h"

static void profile_usage(FILE *out)
{
    fprintf(out,
            "usage: tern profile PROGRAM.tprog|PROGRAM.s [--machine NAME] [--trace OUT.json] [--svg OUT.svg]\n"
            "                    [--timing-only] [--seed N] [--max-trace-events N] [--model-flops F]\n"
            "\n"
            "Run a program (made by `tern kernel`, `tern asm` or the kernel API) on a simulated NeuronCore with the\n"
            "profiler attached and print the summary.\n"
            "  --machine NAME        machine to run on (default: the program's .machine)\n"
            "  --trace OUT.json      Chrome trace-event JSON (open in https://ui.perfetto.dev or chrome://tracing)\n"
            "  --svg OUT.svg         SVG timeline of the engines and DMA queues (opens in any browser)\n"
            "  --timing-only         time only: no arithmetic, no data (same predicted time)\n"
            "  --seed N              seed of the random input values (default 1)\n"
            "  --max-trace-events N  slices written one by one before the trace is binned (default 1000000)\n"
            "  --model-flops F       FLOPs the model needs, for MFU (default: the hardware FLOPs)\n");
}

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Fill every input tensor: floats uniform in [-1, 1), integers 0 (so index tensors stay in range). */
static int fill_inputs(const tern_kernel *k, tern_core *core, uint64_t seed)
{
    tern_error err;
    for (size_t i = 0; i < tern_kernel_io_count(k); i++) {
        const tern_kio *io = tern_kernel_io(k, i);
        if (io->kind != TERN_KIO_INPUT)
            continue;
        uint64_t count = 1;
        for (unsigned d = 0; d < io->ndims; d++)
            count *= io->shape[d];
        uint64_t s = seed ^ (0x632BE59BD9B4E019ull * (i + 1));
        tern_status st;
        if (tern_dtype_is_float(io->dtype)) {
            float *x = malloc(sizeof(float) * (count ? count : 1));
            if (!x) {
                fprintf(stderr, "tern profile: out of memory for input '%s'\n", io->name);
                return 1;
            }
            for (uint64_t j = 0; j < count; j++)
                x[j] = (float)((double)(splitmix(&s) >> 11) * 0x1.0p-53 * 2.0 - 1.0);
            st = tern_kernel_write_f32(k, core, io->name, x, count, &err);
            free(x);
        } else {
            void *z = calloc(1, io->bytes ? io->bytes : 1);
            if (!z) {
                fprintf(stderr, "tern profile: out of memory for input '%s'\n", io->name);
                return 1;
            }
            st = tern_kernel_write(k, core, io->name, z, io->bytes, &err);
            free(z);
        }
        if (st != TERN_OK) {
            fprintf(stderr, "tern profile: input '%s': %s\n", io->name, err.msg);
            return 1;
        }
    }
    return 0;
}

int tern_cmd_profile(int argc, char **argv)
{
    const char *in = NULL, *machine = NULL, *trace = NULL, *svg = NULL;
    int timing_only = 0;
    uint64_t seed = 1, max_events = 0;
    double model_flops = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            profile_usage(stdout);
            return 0;
        }
        if (!strcmp(a, "--timing-only")) {
            timing_only = 1;
            continue;
        }
        if (a[0] == '-' && a[1]) {
            const char **sp = !strcmp(a, "--machine") ? &machine
                              : !strcmp(a, "--trace") ? &trace
                              : !strcmp(a, "--svg")   ? &svg
                                                      : NULL;
            uint64_t *up = !strcmp(a, "--seed") ? &seed : !strcmp(a, "--max-trace-events") ? &max_events : NULL;
            int flops = !strcmp(a, "--model-flops");
            if (!sp && !up && !flops) {
                fprintf(stderr, "tern profile: unknown option '%s'\n", a);
                profile_usage(stderr);
                return 2;
            }
            const char *v = tern_arg_value("tern profile", argc, argv, &i,
                                           sp ? "a name or file" : flops ? "a FLOP count" : "an integer");
            if (!v)
                return 2;
            if (sp)
                *sp = v;
            else if (up ? tern_arg_uint("tern profile", a, v, 0, UINT64_MAX, up)
                        : tern_arg_float("tern profile", a, v, 0, DBL_MAX, &model_flops))
                return 2;
            continue;
        }
        if (in) {
            fprintf(stderr, "tern profile: more than one program ('%s' and '%s')\n", in, a);
            return 2;
        }
        in = a;
    }
    if (!in) {
        fprintf(stderr, "tern profile: no program given\n");
        profile_usage(stderr);
        return 2;
    }

    tern_error err;
    tern_program prog;
    tern_program_init(&prog);
    if (tern_program_load_file(in, &prog, &err) != TERN_OK) {
        fprintf(stderr, "tern profile: %s\n", err.msg);
        tern_program_free(&prog);
        return 1;
    }
    if (!machine)
        machine = prog.machine[0] ? prog.machine : NULL;
    if (!machine) {
        fprintf(stderr, "tern profile: %s names no machine: give --machine NAME\n", in);
        tern_program_free(&prog);
        return 2;
    }
    int rc = 1;
    tern_machine *m = NULL;
    tern_kernel *k = NULL;
    tern_prof *p = NULL;
    tern_core *core = NULL;
    char path[4096];
    if (tern_machine_find(machine, path, sizeof path, &err) != TERN_OK) {
        fprintf(stderr, "tern profile: unknown machine: %s\n", err.msg);
        rc = 2;
        goto done;
    }
    tern_core_config cfg;
    if (tern_machine_load(machine, &m, &err) != TERN_OK || tern_core_config_from_machine(m, &cfg, &err) != TERN_OK) {
        fprintf(stderr, "tern profile: %s\n", err.msg);
        goto done;
    }
    if (tern_kernel_from_program(&cfg, &prog, &k, &err) != TERN_OK) {
        fprintf(stderr, "tern profile: %s: %s\n", in, err.msg);
        goto done;
    }
    tern_prof_opts po;
    tern_prof_opts_init(&po);
    tern_prof_opts_from_machine(m, &po);
    po.trace_path = trace;
    po.svg_path = svg;
    po.max_trace_events = max_events;
    po.model_flops = model_flops;
    if (tern_prof_create(&po, &p, &err) != TERN_OK) {
        fprintf(stderr, "tern profile: %s\n", err.msg);
        goto done;
    }
    tern_core_options co;
    memset(&co, 0, sizeof co);
    co.mode = timing_only ? TERN_MODE_TIMING_ONLY : TERN_MODE_FUNCTIONAL;
    co.seed = seed;
    co.on_event = tern_prof_event;
    co.event_ctx = p;
    if (tern_core_create(&cfg, &co, &core, &err) != TERN_OK) {
        fprintf(stderr, "tern profile: %s\n", err.msg);
        goto done;
    }
    if (!timing_only && fill_inputs(k, core, seed))
        goto done;
    tern_run_stats stats;
    memset(&stats, 0, sizeof stats);
    if (tern_kernel_run(k, core, &stats, &err) != TERN_OK) {
        fprintf(stderr, "tern profile: %s: run failed: %s\n", in, err.msg);
        goto done;
    }
    tern_prof_summary s;
    tern_status fs = tern_prof_finish(p, &stats, &s, &err);
    printf("%s (%s mode)\n", in, timing_only ? "timing-only" : "functional");
    tern_prof_summary_print(stdout, &s);
    if (fs != TERN_OK) {
        fprintf(stderr, "tern profile: %s\n", err.msg);
        goto done;
    }
    if (trace)
        printf("trace: %s (open in https://ui.perfetto.dev or chrome://tracing)\n", trace);
    if (svg)
        printf("timeline: %s\n", svg);
    rc = 0;
done:
    tern_core_free(core);
    tern_prof_free(p);
    tern_kernel_free(k);
    tern_machine_free(m);
    tern_program_free(&prog);
    return rc;
}
