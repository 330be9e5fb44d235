/* Building an executable from kernels built with the kernel API: one kernel per core, their programs (with
 * interface tensors), and every constant tensor's data placed in that core's HBM. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tern/kernel.h"
#include "tern/runtime.h"

static tern_status add_io(tern_exe_io **v, size_t *n, const tern_exe_io *io, tern_error *err)
{
    tern_exe_io *p = realloc(*v, (*n + 1) * sizeof *p);
    if (!p)
        return tern_error_set(err, TERN_ERR_NOMEM, "executable: out of memory");
    p[*n] = *io;
    *v = p;
    (*n)++;
    return TERN_OK;
}

tern_status tern_exe_from_kernels(tern_exe *x, const char *machine, tern_kernel *const *kernels, unsigned cores,
                                  const tern_exe_io *inputs, size_t nin, const tern_exe_io *outputs, size_t nout,
                                  const char *metadata_json, tern_error *err)
{
    tern_exe_init(x);
    tern_status st;
    snprintf(x->machine, sizeof x->machine, "%s", machine);
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
            k->data = malloc(io->bytes ? io->bytes : 1);
            if (!k->data) {
                st = tern_error_set(err, TERN_ERR_NOMEM, "executable: out of memory");
                goto fail;
            }
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
    /* Validate the whole thing the way a loader would. */
    uint8_t *b = NULL;
    size_t n = 0;
    tern_exe check;
    if ((st = tern_exe_encode(x, &b, &n, err)) || (st = tern_exe_decode(b, n, &check, err))) {
        free(b);
        goto fail;
    }
    free(b);
    tern_exe_free(&check);
    return TERN_OK;
fail:
    tern_exe_free(x);
    return st;
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
