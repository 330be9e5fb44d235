/* The runtime's launch of one program over many ranks (issue 13, "Programs"): a fabric from a machine spec (an
 * instance such as trn1.32xlarge, a system such as trn2-ultraserver, NxINSTANCE or a cluster file), one simulated
 * NeuronCore per rank with its own HBM, and one built kernel per rank (SPMD: the same kernel on every rank, which
 * reads its rank id from register TERN_RANK_REG_ID) run together by tern_ranks_run, so that the collective
 * instructions inside the kernels meet over the fabric. Inputs and outputs are each rank's own tensors, written and
 * read by name. The rank order and the ranks a machine has are the fabric's (docs/multichip.md): asking for more
 * ranks than the machine's NeuronCores is the fabric's error, naming both. With a transport (opts.transport, `mpirun
 * -np K tern launch`) the fabric's chips are spread over its processes and each creates only its own ranks' cores;
 * the others' are NULL, and tern_ranks_run runs each process's ranks (docs/multichip.md, "Launches over MPI"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tern/collective.h"
#include "tern/kernel.h"
#include "tern/runtime.h"

struct tern_rt_ranks {
    tern_fabric *f;
    unsigned R;
    tern_core **cores;
    tern_kernel *const *kernels;
    unsigned nkernels;
    tern_run_stats *stats;
};

static tern_kernel *kernel_of(const tern_rt_ranks *rt, unsigned r) { return rt->kernels[rt->nkernels == 1 ? 0 : r]; }

void tern_rt_ranks_free(tern_rt_ranks *rt)
{
    if (!rt)
        return;
    for (unsigned r = 0; rt->cores && r < rt->R; r++)
        tern_core_free(rt->cores[r]);
    free(rt->cores);
    free(rt->stats);
    tern_fabric_free(rt->f);
    free(rt);
}

tern_status tern_rt_ranks_create(const char *machine, const tern_rt_ranks_opts *o, tern_kernel *const *kernels,
                                 unsigned nkernels, tern_rt_ranks **out, tern_error *err)
{
    *out = NULL;
    tern_rt_ranks_opts dflt;
    memset(&dflt, 0, sizeof dflt);
    if (!o)
        o = &dflt;
    tern_rt_ranks *rt = calloc(1, sizeof *rt);
    if (!rt)
        return tern_error_set(err, TERN_ERR_NOMEM, "launch: out of memory");
    tern_fabric_opts fo = {o->nodes, o->ranks, o->lnc};
    tern_status st = tern_fabric_load(machine, &fo, &rt->f, err);
    if (st) {
        free(rt);
        return tern_error_prefix(err, "launch over '%s': ", machine);
    }
    rt->R = tern_fabric_ranks(rt->f);
    if (o->transport && (st = tern_fabric_set_transport(rt->f, o->transport, err))) {
        tern_rt_ranks_free(rt);
        return tern_error_prefix(err, "launch over '%s': ", machine);
    }
    rt->kernels = kernels;
    rt->nkernels = nkernels;
    if (nkernels != 1 && nkernels != rt->R) {
        st = tern_error_set(err, TERN_ERR_INVALID,
                            "launch over '%s': %u programs for %u ranks (give one program for every rank, or one for "
                            "all: SPMD)",
                            machine, nkernels, rt->R);
        tern_rt_ranks_free(rt);
        return st;
    }
    for (unsigned i = 0; i < nkernels; i++)
        if ((st = tern_kernel_status(kernels[i], err))) {
            tern_rt_ranks_free(rt);
            return tern_error_prefix(err, "launch: program %u: ", i);
        }
    tern_core_config cfg;
    if ((st = tern_core_config_load(tern_fabric_base_machine(rt->f), &cfg, err))) {
        tern_rt_ranks_free(rt);
        return st;
    }
    rt->cores = calloc(rt->R, sizeof *rt->cores);
    rt->stats = calloc(rt->R, sizeof *rt->stats);
    if (!rt->cores || !rt->stats) {
        st = tern_error_set(err, TERN_ERR_NOMEM, "launch: out of memory for %u ranks", rt->R);
        tern_rt_ranks_free(rt);
        return st;
    }
    tern_core_options co;
    memset(&co, 0, sizeof co);
    co.mode = o->mode;
    co.threads = o->threads;
    co.fill_nan = o->fill_nan;
    co.max_instructions = o->max_instructions;
    for (unsigned r = 0; r < rt->R; r++)
        if (tern_fabric_rank_is_local(rt->f, r) && (st = tern_core_create(&cfg, &co, &rt->cores[r], err))) {
            tern_rt_ranks_free(rt);
            return tern_error_prefix(err, "launch: rank %u: ", r);
        }
    *out = rt;
    return TERN_OK;
}

unsigned tern_rt_ranks_count(const tern_rt_ranks *rt) { return rt->R; }
tern_fabric *tern_rt_ranks_fabric(tern_rt_ranks *rt) { return rt->f; }
tern_core *tern_rt_ranks_core(tern_rt_ranks *rt, unsigned rank) { return rank < rt->R ? rt->cores[rank] : NULL; }
const tern_run_stats *tern_rt_ranks_stats(const tern_rt_ranks *rt, unsigned rank)
{
    return rank < rt->R ? &rt->stats[rank] : NULL;
}

static tern_status rank_ok(const tern_rt_ranks *rt, unsigned rank, tern_error *err)
{
    if (rank >= rt->R)
        return tern_error_set(err, TERN_ERR_RANGE, "launch: rank %u outside 0..%u", rank, rt->R - 1);
    if (!rt->cores[rank])
        return tern_error_set(err, TERN_ERR_INVALID, "launch: rank %u runs in process %u, not this one (%u)", rank,
                              tern_fabric_rank_owner(rt->f, rank), tern_fabric_proc(rt->f));
    return TERN_OK;
}

tern_status tern_rt_ranks_write(tern_rt_ranks *rt, unsigned rank, const char *name, const void *data, size_t bytes,
                                tern_error *err)
{
    tern_status st = rank_ok(rt, rank, err);
    if (!st && (st = tern_kernel_write(kernel_of(rt, rank), rt->cores[rank], name, data, bytes, err)))
        tern_error_prefix(err, "rank %u: ", rank);
    return st;
}

tern_status tern_rt_ranks_read(tern_rt_ranks *rt, unsigned rank, const char *name, void *data, size_t bytes,
                               tern_error *err)
{
    tern_status st = rank_ok(rt, rank, err);
    if (!st && (st = tern_kernel_read(kernel_of(rt, rank), rt->cores[rank], name, data, bytes, err)))
        tern_error_prefix(err, "rank %u: ", rank);
    return st;
}

tern_status tern_rt_ranks_execute(tern_rt_ranks *rt, tern_ranks_result *res, tern_error *err)
{
    const tern_program **progs = calloc(rt->R, sizeof *progs);
    if (!progs)
        return tern_error_set(err, TERN_ERR_NOMEM, "launch: out of memory");
    tern_status st = TERN_OK;
    for (unsigned r = 0; !st && r < rt->R; r++) {
        const tern_kernel *k = kernel_of(rt, r);
        progs[r] = tern_kernel_program(k);
        if (!rt->cores[r]) /* another process's rank */
            continue;
        for (size_t i = 0; !st && i < tern_kernel_io_count(k); i++) { /* constants are placed before every run */
            const tern_kio *io = tern_kernel_io(k, i);
            const void *data = io->kind == TERN_KIO_CONSTANT ? tern_kernel_constant_data(k, io->name) : NULL;
            if (data && (st = tern_core_hbm_write(rt->cores[r], io->hbm_addr, data, io->bytes, err)))
                tern_error_prefix(err, "rank %u: constant '%s': ", r, io->name);
        }
    }
    if (!st)
        st = tern_ranks_run(rt->f, rt->cores, progs, rt->stats, res, err);
    free(progs);
    return st;
}
