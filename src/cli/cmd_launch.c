/* `tern launch`: run one program (SPMD) over N ranks of a machine, with the collective instructions inside it
 * running over the fabric (docs/multichip.md, "Collectives inside kernels"). The program is a saved or assembled
 * program file (`tern kernel`, `tern asm`, the kernel API's tern_kernel_save); every rank runs it with its rank id
 * in register r63 (TERN_RANK_REG_ID) and the rank count in r62. Each rank's input tensors are filled with seeded
 * uniform values in [-1, 1) (the seed mixed with the rank; integer tensors with zeros), as `tern profile` does.
 * It prints the predicted time, every collective (operation, algorithm, elements, start and end) and a 64-bit
 * FNV-1a hash of each rank's outputs; --json writes the same as one object. Under `mpirun -np K` the ranks are
 * spread over K processes with the same output (process 0 prints). Exit codes: 0 ok, 1 a failed run or a bad
 * program, 2 usage. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "tern/collective.h"
#include "tern/kernel.h"
#include "tern/runtime.h"
#include "tern/transport.h"

static const char *L = "tern launch";

static void launch_usage(FILE *out)
{
    fprintf(out,
            "usage: tern launch PROGRAM.tprog|PROGRAM.s --machine M [--ranks N] [--nodes K] [--lnc L]\n"
            "                   [--timing-only] [--seed N] [--threads T] [--json]\n"
            "\n"
            "Run a program on N ranks of a machine (an instance, a system, NxINSTANCE or a cluster file), its collective\n"
            "instructions over the machine's fabric. Every rank runs the same program (SPMD): r63 holds the rank id,\n"
            "r62 the rank count.\n"
            "  --machine M     the machine (required)\n"
            "  --ranks N       the first N ranks (default: all of the machine's), spread over --nodes K instances\n"
            "  --lnc L         physical cores per rank (default: the generation's)\n"
            "  --timing-only   time only: no arithmetic, no data (same predicted time)\n"
            "  --seed N        seed of the random input values (default 1)\n"
            "  --threads T     host threads per core (never changes results)\n"
            "  --json          the results as JSON\n"
            "Under `mpirun -np K` (an MPI build) the ranks' chips are spread over K processes; the output is the same\n"
            "for every K and only process 0 prints it.\n");
}

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static int fill_inputs(tern_rt_ranks *rt, const tern_kernel *k, unsigned rank, uint64_t seed)
{
    tern_error err;
    for (size_t i = 0; i < tern_kernel_io_count(k); i++) {
        const tern_kio *io = tern_kernel_io(k, i);
        if (io->kind != TERN_KIO_INPUT)
            continue;
        unsigned char *buf = calloc(1, io->bytes ? io->bytes : 1);
        if (!buf) {
            fprintf(stderr, "%s: out of memory for input '%s'\n", L, io->name);
            return 1;
        }
        if (tern_dtype_is_float(io->dtype)) {
            uint64_t count = io->bytes / tern_dtype_size(io->dtype);
            float *x = malloc(sizeof(float) * (count ? count : 1));
            if (!x) {
                free(buf);
                fprintf(stderr, "%s: out of memory for input '%s'\n", L, io->name);
                return 1;
            }
            uint64_t s = seed ^ (0x632BE59BD9B4E019ull * (i + 1)) ^ (0xD6E8FEB86659FD93ull * ((uint64_t)rank + 1));
            for (uint64_t j = 0; j < count; j++)
                x[j] = (float)((double)(splitmix(&s) >> 11) * 0x1.0p-53 * 2.0 - 1.0);
            tern_convert_from_f32(io->dtype, buf, x, count, NULL, NULL);
            free(x);
        }
        tern_status st = tern_rt_ranks_write(rt, rank, io->name, buf, io->bytes, &err);
        free(buf);
        if (st) {
            fprintf(stderr, "%s: input '%s': %s\n", L, io->name, err.msg);
            return 1;
        }
    }
    return 0;
}

/* FNV-1a over every output tensor of a rank, in the program's tensor order. */
static int hash_outputs(tern_rt_ranks *rt, const tern_kernel *k, unsigned rank, uint64_t *h)
{
    tern_error err;
    *h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < tern_kernel_io_count(k); i++) {
        const tern_kio *io = tern_kernel_io(k, i);
        if (io->kind != TERN_KIO_OUTPUT)
            continue;
        unsigned char *buf = malloc(io->bytes ? io->bytes : 1);
        if (!buf || tern_rt_ranks_read(rt, rank, io->name, buf, io->bytes, &err)) {
            fprintf(stderr, "%s: output '%s': %s\n", L, io->name, buf ? err.msg : "out of memory");
            free(buf);
            return 1;
        }
        for (uint64_t j = 0; j < io->bytes; j++)
            *h = (*h ^ buf[j]) * 0x100000001b3ull;
        free(buf);
    }
    return 0;
}

static int run_launch(int argc, char **argv, const tern_transport *tr);

/* Under `mpirun -np K` the ranks' chips are spread over the K processes (docs/multichip.md, "Launches over MPI
 * processes"): each process fills, runs and hashes its own ranks, the collectives meet over the transport, and
 * process 0 prints everything (the other processes' hashes come to it), so the output is the same for every K. */
int tern_cmd_launch(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            launch_usage(stdout);
            return 0;
        }
    tern_transport *tr = NULL;
    tern_error err = {0};
    if (tern_mpi_init(&argc, &argv, &tr, &err)) {
        if (tern_mpi_launched_rank() == 0)
            fprintf(stderr, "%s: %s\n", L, err.msg);
        return 1;
    }
    int rc = run_launch(argc, argv, tr);
    tern_mpi_finalize(tr);
    return rc;
}

/* Messages of a run spread over processes: every process meets the same deterministic error; process 0 says it. */
#define SAY(...) ((void)(quiet || fprintf(stderr, __VA_ARGS__)))

static int run_launch(int argc, char **argv, const tern_transport *tr)
{
    int quiet = tr && tr->me != 0;
    const char *prog_path = NULL, *machine = NULL;
    uint64_t ranks = 0, nodes = 0, lnc = 0, seed = 1, threads = 0;
    int timing_only = 0, json = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            launch_usage(stdout);
            return 0;
        } else if (!strcmp(a, "--timing-only")) {
            timing_only = 1;
        } else if (!strcmp(a, "--json")) {
            json = 1;
        } else if (!strcmp(a, "--machine")) {
            if (!(machine = tern_arg_value(L, argc, argv, &i, "a machine")))
                return 2;
        } else if (!strcmp(a, "--ranks") || !strcmp(a, "--nodes") || !strcmp(a, "--lnc") || !strcmp(a, "--seed") ||
                   !strcmp(a, "--threads")) {
            const char *v = tern_arg_value(L, argc, argv, &i, "an integer");
            if (!v)
                return 2;
            uint64_t *p = !strcmp(a, "--ranks") ? &ranks : !strcmp(a, "--nodes") ? &nodes : !strcmp(a, "--lnc") ? &lnc
                        : !strcmp(a, "--seed") ? &seed : &threads;
            uint64_t lo = p == &seed ? 0 : 1, hi = p == &seed ? UINT64_MAX : p == &threads ? 1024 : 1u << 22;
            if (tern_arg_uint(L, a, v, lo, hi, p))
                return 2;
        } else if (a[0] == '-' && a[1]) {
            SAY("%s: unknown option '%s'\n", L, a);
            if (!quiet)
                launch_usage(stderr);
            return 2;
        } else if (!prog_path) {
            prog_path = a;
        } else {
            SAY("%s: unexpected argument '%s'\n", L, a);
            return 2;
        }
    }
    if (!prog_path || !machine) {
        SAY("%s: %s is required\n", L, prog_path ? "--machine" : "a program file");
        if (!quiet)
                launch_usage(stderr);
        return 2;
    }
    tern_error err;
    tern_fabric *f = NULL;
    tern_fabric_opts fo = {(unsigned)nodes, (unsigned)ranks, (unsigned)lnc};
    if (tern_fabric_load(machine, &fo, &f, &err)) {
        SAY("%s: %s\n", L, err.msg);
        return 1;
    }
    tern_core_config cfg;
    tern_status st = tern_core_config_load(tern_fabric_base_machine(f), &cfg, &err);
    tern_fabric_free(f);
    if (st) {
        SAY("%s: %s\n", L, err.msg);
        return 1;
    }
    tern_kernel *k = NULL;
    if (tern_kernel_open(&cfg, prog_path, &k, &err)) {
        SAY("%s: %s: %s\n", L, prog_path, err.msg);
        return 1;
    }
    tern_rt_ranks_opts ro;
    memset(&ro, 0, sizeof ro);
    ro.ranks = (unsigned)ranks;
    ro.nodes = (unsigned)nodes;
    ro.lnc = (unsigned)lnc;
    ro.mode = timing_only ? TERN_MODE_TIMING_ONLY : TERN_MODE_FUNCTIONAL;
    ro.threads = (unsigned)threads;
    ro.transport = tr; /* each process creates and runs its own ranks (more processes than chips: refused) */
    tern_rt_ranks *rt = NULL;
    if (tern_rt_ranks_create(machine, &ro, &k, 1, &rt, &err)) {
        SAY("%s: %s\n", L, err.msg);
        tern_kernel_free(k);
        return 1;
    }
    unsigned R = tern_rt_ranks_count(rt);
    tern_fabric *fab = tern_rt_ranks_fabric(rt);
    int rc = 0;
    for (unsigned r = 0; !rc && !timing_only && r < R; r++)
        if (tern_fabric_rank_is_local(fab, r))
            rc = fill_inputs(rt, k, r, seed);
    if (tr) { /* a process that could not fill its ranks' inputs said why; every process stops */
        uint64_t v = (uint64_t)rc;
        if (tr->allreduce(tr->ctx, &v, 1, TERN_XOP_MAX, &err))
            tr->abort(tr->ctx, err.msg);
        rc = v != 0;
    }
    tern_ranks_result res;
    memset(&res, 0, sizeof res);
    if (!rc && tern_rt_ranks_execute(rt, &res, &err)) { /* agreed by every process (tern_ranks_run) */
        SAY("%s: %s\n", L, err.msg);
        rc = 1;
    }
    int ran = !rc;
    uint64_t *hash = calloc(R, sizeof *hash);
    if (!hash && tr)
        tr->abort(tr->ctx, "tern launch: out of memory for the outputs' hashes");
    if (!hash)
        rc = 1;
    for (unsigned r = 0; !rc && !timing_only && r < R; r++)
        if (tern_fabric_rank_is_local(fab, r))
            rc = hash_outputs(rt, k, r, &hash[r]);
    if (tr && !timing_only && ran) {
        /* the hashes of every process's ranks come to process 0 (a sum: each rank's is nonzero on one process) */
        uint64_t v = (uint64_t)rc;
        if (tr->allreduce(tr->ctx, &v, 1, TERN_XOP_MAX, &err) || (!v && tr->allreduce(tr->ctx, hash, R, TERN_XOP_SUM, &err)))
            tr->abort(tr->ctx, err.msg);
        rc = v != 0;
    }
    if (quiet) {
        free(hash);
        tern_ranks_result_free(&res);
        tern_rt_ranks_free(rt);
        tern_kernel_free(k);
        return rc;
    }
    if (!rc && json) {
        printf("{\"machine\":\"%s\",\"ranks\":%u,\"mode\":\"%s\",\"time_ps\":%lld,\"collectives\":[", machine, R,
               timing_only ? "timing-only" : "functional", (long long)res.time_ps);
        for (size_t c = 0; c < res.ncolls; c++) {
            const tern_ranks_coll *x = &res.colls[c];
            printf("%s{\"seq\":%llu,\"op\":\"%s\",\"algorithm\":\"%s\",\"dtype\":\"%s\",\"count\":%llu,"
                   "\"start_ps\":%lld,\"end_ps\":%lld,\"time_ps\":%llu}",
                   c ? "," : "", (unsigned long long)x->seq, tern_coll_op_name(x->op), tern_coll_algo_name(x->algo),
                   tern_dtype_name(x->dtype), (unsigned long long)x->count, (long long)x->start_ps,
                   (long long)x->end_ps, (unsigned long long)x->time_ps);
        }
        printf("],\"ranks_out\":[");
        for (unsigned r = 0; r < R; r++) {
            printf("%s{\"rank\":%u,\"time_ps\":%lld", r ? "," : "", r, (long long)tern_rt_ranks_stats(rt, r)->time_ps);
            if (!timing_only)
                printf(",\"hash\":\"%016llx\"", (unsigned long long)hash[r]);
            printf("}");
        }
        printf("]}\n");
    } else if (!rc) {
        printf("%s on %u ranks of %s (%s): %.3f us\n", prog_path, R, machine,
               timing_only ? "timing-only" : "functional", (double)res.time_ps / 1e6);
        for (size_t c = 0; c < res.ncolls; c++) {
            const tern_ranks_coll *x = &res.colls[c];
            printf("  collective #%llu: %s %s, %llu x %s, %.3f .. %.3f us (%.3f us)\n", (unsigned long long)x->seq,
                   tern_coll_op_name(x->op), tern_coll_algo_name(x->algo), (unsigned long long)x->count,
                   tern_dtype_name(x->dtype), (double)x->start_ps / 1e6, (double)x->end_ps / 1e6,
                   (double)x->time_ps / 1e6);
        }
        for (unsigned r = 0; !timing_only && r < R; r++)
            printf("  rank %u: %.3f us, outputs hash %016llx\n", r, (double)tern_rt_ranks_stats(rt, r)->time_ps / 1e6,
                   (unsigned long long)hash[r]);
    }
    free(hash);
    tern_ranks_result_free(&res);
    tern_rt_ranks_free(rt);
    tern_kernel_free(k);
    return rc;
}
