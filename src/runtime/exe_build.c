/* Building an executable from kernels built with the kernel API: one kernel per core, their programs (with
 * interface tensors), every constant tensor's data placed in that core's HBM, and the machine it is built for
 * (its reference, catalogue name and code fingerprint, so the runtime can refuse a machine the code does not fit). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tern/arch.h"
#include "tern/fabric.h"
#include "tern/kernel.h"
#include "tern/runtime.h"

/* Appends a copy of io; the copy owns its own model name (the caller keeps io's). */
static tern_status add_io(tern_exe_io **v, size_t *n, const tern_exe_io *io, tern_error *err)
{
    tern_exe_io *p = realloc(*v, (*n + 1) * sizeof *p);
    if (!p)
        return tern_error_set(err, TERN_ERR_NOMEM, "executable: out of memory");
    *v = p;
    p[*n] = *io;
    p[*n].model_name = NULL;
    if (io->model_name && !(p[*n].model_name = strdup(io->model_name)))
        return tern_error_set(err, TERN_ERR_NOMEM, "executable: out of memory");
    (*n)++;
    return TERN_OK;
}

tern_status tern_exe_set_machine(tern_exe *x, const char *machine, tern_error *err)
{
    tern_machine *m = NULL;
    char base[512]; /* a cluster's executable carries its instance's code figures */
    unsigned insts, cl_cores;
    tern_status st = tern_machine_spec_base(machine, base, sizeof base, &insts, &cl_cores, err);
    if (!st)
        st = tern_machine_load(base, &m, err);
    if (st)
        return tern_error_prefix(err, "executable: machine: ");
    char figures[2048];
    tern_machine_code_figures(m, figures, sizeof figures);
    free(x->machine_ref);
    free(x->machine_name);
    free(x->machine_figures);
    x->machine_ref = strdup(machine);
    x->machine_name = strdup(tern_machine_name(m));
    x->machine_figures = strdup(figures);
    x->machine_fingerprint = tern_machine_code_fingerprint(m);
    tern_machine_free(m);
    snprintf(x->machine, sizeof x->machine, "%s", machine);
    if (!x->machine_ref || !x->machine_name || !x->machine_figures)
        return tern_error_set(err, TERN_ERR_NOMEM, "executable: out of memory");
    return TERN_OK;
}

/* The checks a loader makes, on the records alone: a probe that shares x's programs and I/O and carries each
 * constant's placement without its bytes, so a model's weights are not encoded and decoded again (two more copies
 * of them) just to be validated. */
static tern_status validate(const tern_exe *x, tern_error *err)
{
    tern_exe probe = *x;
    probe.consts = calloc(x->num_consts + 1, sizeof *probe.consts);
    if (!probe.consts)
        return tern_error_set(err, TERN_ERR_NOMEM, "executable: out of memory");
    for (size_t i = 0; i < x->num_consts; i++) {
        probe.consts[i] = x->consts[i];
        probe.consts[i].bytes = 0;
        probe.consts[i].data = NULL;
    }
    uint8_t *b = NULL;
    size_t n = 0;
    tern_exe check;
    tern_status st = tern_exe_encode(&probe, &b, &n, err);
    free(probe.consts);
    if (!st && !(st = tern_exe_decode(b, n, &check, err)))
        tern_exe_free(&check);
    free(b);
    return st;
}

/* move: each kernel's constant data is handed to the executable (from the last core that uses the kernel; earlier
 * ones copy) instead of copied. */
static tern_status from_kernels(tern_exe *x, const char *machine, tern_kernel *const *kernels, unsigned cores,
                                const tern_exe_io *inputs, size_t nin, const tern_exe_io *outputs, size_t nout,
                                const char *metadata_json, int move, tern_error *err)
{
    tern_exe_init(x);
    tern_status st;
    if ((st = tern_exe_set_machine(x, machine, err)))
        goto fail;
    x->programs = calloc(cores ? cores : 1, sizeof *x->programs);
    if (!x->programs)
        return tern_error_set(err, TERN_ERR_NOMEM, "executable: out of memory");
    x->cores = cores;
    for (unsigned c = 0; c < cores; c++)
        tern_program_init(&x->programs[c]);
    for (unsigned c = 0; c < cores; c++) {
        if ((st = tern_kernel_status(kernels[c], err)) ||
            (st = tern_program_copy(&x->programs[c], tern_kernel_program(kernels[c]), err)))
            goto fail;
        for (size_t i = 0; i < tern_kernel_io_count(kernels[c]); i++) {
            const tern_kio *io = tern_kernel_io(kernels[c], i);
            const void *data = tern_kernel_constant_data(kernels[c], io->name);
            if (io->kind != TERN_KIO_CONSTANT || !data)
                continue;
            int last = move;
            for (unsigned d = c + 1; d < cores && last; d++)
                last = kernels[d] != kernels[c];
            tern_exe_const *nc = realloc(x->consts, (x->num_consts + 1) * sizeof *nc);
            if (!nc) {
                st = tern_error_set(err, TERN_ERR_NOMEM, "executable: out of memory");
                goto fail;
            }
            x->consts = nc;
            tern_exe_const *k = &x->consts[x->num_consts];
            k->core = c;
            k->hbm_addr = io->hbm_addr;
            k->bytes = io->bytes;
            k->data = last ? tern_kernel_constant_steal(kernels[c], i) : malloc(io->bytes ? io->bytes : 1);
            if (!k->data) {
                st = tern_error_set(err, TERN_ERR_NOMEM, "executable: out of memory");
                goto fail;
            }
            if (!last)
                memcpy(k->data, data, io->bytes);
            x->num_consts++;
        }
    }
    for (size_t i = 0; i < nin; i++)
        if ((st = add_io(&x->inputs, &x->num_inputs, &inputs[i], err)))
            goto fail;
    for (size_t i = 0; i < nout; i++)
        if ((st = add_io(&x->outputs, &x->num_outputs, &outputs[i], err)))
            goto fail;
    if (metadata_json && !(x->metadata_json = strdup(metadata_json))) {
        st = tern_error_set(err, TERN_ERR_NOMEM, "executable: out of memory");
        goto fail;
    }
    if ((st = validate(x, err))) /* the whole thing, the way a loader would */
        goto fail;
    return TERN_OK;
fail:
    tern_exe_free(x);
    return st;
}

tern_status tern_exe_from_kernels(tern_exe *x, const char *machine, tern_kernel *const *kernels, unsigned cores,
                                  const tern_exe_io *inputs, size_t nin, const tern_exe_io *outputs, size_t nout,
                                  const char *metadata_json, tern_error *err)
{
    return from_kernels(x, machine, kernels, cores, inputs, nin, outputs, nout, metadata_json, 0, err);
}

tern_status tern_exe_from_kernels_move(tern_exe *x, const char *machine, tern_kernel *const *kernels, unsigned cores,
                                       const tern_exe_io *inputs, size_t nin, const tern_exe_io *outputs, size_t nout,
                                       const char *metadata_json, tern_error *err)
{
    return from_kernels(x, machine, kernels, cores, inputs, nin, outputs, nout, metadata_json, 1, err);
}

tern_status tern_exe_from_kernel(tern_exe *x, const char *machine, tern_kernel *k, tern_error *err)
{
    tern_exe_io *ins = NULL, *outs = NULL;
    size_t nin = 0, nout = 0;
    tern_status st = TERN_OK;
    for (size_t i = 0; i < tern_kernel_io_count(k) && !st; i++) {
        const tern_kio *io = tern_kernel_io(k, i);
        if (io->kind != TERN_KIO_INPUT && io->kind != TERN_KIO_OUTPUT)
            continue;
        tern_exe_io e;
        memset(&e, 0, sizeof e);
        snprintf(e.name, sizeof e.name, "%s", io->name);
        e.dtype = io->dtype;
        e.rank = io->ndims;
        for (unsigned d = 0; d < io->ndims; d++)
            e.shape[d] = (int64_t)io->shape[d];
        st = io->kind == TERN_KIO_INPUT ? add_io(&ins, &nin, &e, err) : add_io(&outs, &nout, &e, err);
    }
    if (!st)
        st = tern_exe_from_kernels(x, machine, &k, 1, ins, nin, outs, nout, NULL, err);
    free(ins);
    free(outs);
    return st;
}
