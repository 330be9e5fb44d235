/* Executing a tern executable on a simulated chip: one simulated NeuronCore per program, constants placed in each
 * core's HBM once, inputs sliced over the cores along the batch axis when the executable says so. Each core gets
 * its share of the chip's HBM bandwidth. When the cores split a batch (an output with split_batch), they run as
 * the ranks of one multi-rank launch and each split output is gathered on the device by an all-gather over the
 * machine's links (batch_ranks.c): the predicted time is the last share's end plus the gathers, and the outputs
 * are read from core 0's gathered buffers. Otherwise (one core, or nothing split) the programs are independent
 * and simulated one after the other, and the predicted time is the slowest core's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/batch_ranks.h"
#include "tern/arch.h"
#include "tern/fabric.h"
#include "tern/transport.h"
#include "tern/runtime.h"

enum { INPUT_HOST = 1, INPUT_DEVICE = 2 };
#define OUT_GONE (-1)

struct tern_rt {
    tern_exe exe;
    tern_core_config cfg;
    tern_rt_options opts;
    tern_core **cores;
    uint8_t **inputs; /* host copies, whole model, per input */
    int *input_set;   /* 0: unset; INPUT_HOST: inputs[i], written to HBM before each execution; INPUT_DEVICE: the
                         value is in HBM already (tern_rt_carry) and no execution rewrites it */
    /* Where each output's value is since the last execution: 0 its own tensor; i + 1 input i's, where tern_rt_carry
     * moved it (the output's own pages then hold other bytes); OUT_GONE: moved to an input that has been set or
     * carried to since, so the value is nowhere. */
    int64_t *out_home;
    tern_run_stats *stats;
    tern_batch_ranks *batch; /* the batch split as ranks of one launch; NULL: the cores run alone */
};

/* A copy of everything but the constants' bytes (the caller's executable was validated when it was built or
 * decoded). */
static char *dup_or_null(const char *s, int *oom)
{
    char *d = s ? strdup(s) : NULL;
    if (s && !d)
        *oom = 1;
    return d;
}

static tern_status copy_exe(const tern_exe *src, tern_exe *dst, tern_error *err)
{
    tern_exe_init(dst);
    memcpy(dst->machine, src->machine, sizeof dst->machine);
    int oom = 0;
    dst->machine_ref = dup_or_null(src->machine_ref, &oom);
    dst->machine_name = dup_or_null(src->machine_name, &oom);
    dst->machine_figures = dup_or_null(src->machine_figures, &oom);
    dst->machine_fingerprint = src->machine_fingerprint;
    dst->programs = calloc(src->cores ? src->cores : 1, sizeof *dst->programs);
    dst->inputs = calloc(src->num_inputs + 1, sizeof *dst->inputs);
    dst->outputs = calloc(src->num_outputs + 1, sizeof *dst->outputs);
    dst->consts = calloc(src->num_consts + 1, sizeof *dst->consts);
    if (!dst->programs || !dst->inputs || !dst->outputs || !dst->consts) {
        tern_exe_free(dst);
        return tern_error_set(err, TERN_ERR_NOMEM, "runtime: out of memory");
    }
    dst->cores = src->cores;
    for (unsigned c = 0; c < src->cores; c++)
        tern_program_init(&dst->programs[c]);
    for (unsigned c = 0; c < src->cores; c++)
        if (tern_program_copy(&dst->programs[c], &src->programs[c], err)) {
            tern_exe_free(dst);
            return err ? err->code : TERN_ERR_NOMEM;
        }
    /* a model may have no inputs (all constant) or no outputs: memcpy from NULL is undefined even for 0 bytes */
    if (src->num_inputs)
        memcpy(dst->inputs, src->inputs, src->num_inputs * sizeof *dst->inputs);
    if (src->num_outputs)
        memcpy(dst->outputs, src->outputs, src->num_outputs * sizeof *dst->outputs);
    for (size_t i = 0; i < src->num_inputs; i++)
        dst->inputs[i].model_name = dup_or_null(src->inputs[i].model_name, &oom);
    for (size_t i = 0; i < src->num_outputs; i++)
        dst->outputs[i].model_name = dup_or_null(src->outputs[i].model_name, &oom);
    dst->num_inputs = src->num_inputs;
    dst->num_outputs = src->num_outputs;
    if (oom) {
        tern_exe_free(dst);
        return tern_error_set(err, TERN_ERR_NOMEM, "runtime: out of memory");
    }
    /* Constant records without their bytes: those go straight from the caller's executable into HBM at create
     * time and are never read again (for GPT-2 124M this saves a 400 MB copy). */
    for (size_t i = 0; i < src->num_consts; i++) {
        dst->consts[i] = src->consts[i];
        dst->consts[i].data = NULL;
    }
    dst->num_consts = src->num_consts;
    if (src->metadata_json && !(dst->metadata_json = strdup(src->metadata_json))) {
        tern_exe_free(dst);
        return tern_error_set(err, TERN_ERR_NOMEM, "runtime: out of memory");
    }
    return TERN_OK;
}

/* By the model's name first; else by program tensor name (what callers used before names had a string table). */
static const tern_exe_io *find_io(const tern_exe_io *v, size_t n, const char *name, size_t *index)
{
    for (int by_tensor = 0; by_tensor < 2; by_tensor++)
        for (size_t i = 0; i < n; i++)
            if (!strcmp(by_tensor ? v[i].name : tern_exe_io_name(&v[i]), name)) {
                if (index)
                    *index = i;
                return &v[i];
            }
    return NULL;
}

/* "key a vs b" for each line of two figure texts (tern_machine_code_figures) that differs, comma-separated. */
static void figures_diff(const char *a, const char *b, char *out, size_t cap)
{
    size_t n = 0;
    out[0] = '\0';
    for (const char *p = a; *p;) {
        const char *eol = strchr(p, '\n'), *eq = strchr(p, '=');
        if (!eol)
            eol = p + strlen(p);
        if (eq && eq < eol) {
            size_t klen = (size_t)(eq - p);
            const char *q = b, *other = NULL, *oeol = NULL;
            while (*q) { /* the same key in b */
                const char *qe = strchr(q, '\n');
                if (!qe)
                    qe = q + strlen(q);
                if ((size_t)(qe - q) > klen && !strncmp(q, p, klen) && q[klen] == '=') {
                    other = q + klen + 1;
                    oeol = qe;
                    break;
                }
                q = *qe ? qe + 1 : qe;
            }
            size_t vlen = (size_t)(eol - eq - 1);
            if ((!other || (size_t)(oeol - other) != vlen || strncmp(other, eq + 1, vlen)) && n + 1 < cap) {
                int w = snprintf(out + n, cap - n, "%s%.*s %.*s vs %.*s", n ? ", " : "", (int)klen, p, (int)vlen,
                                 eq + 1, other ? (int)(oeol - other) : 6, other ? other : "absent");
                n = w > 0 && (size_t)w < cap - n ? n + (size_t)w : cap - 1;
            }
        }
        p = *eol ? eol + 1 : eol;
    }
}

/* Refuse a machine the executable's code does not fit (see tern_rt_create). */
static tern_status check_machine(const tern_exe *x, const char *machine, const tern_machine *m, tern_error *err)
{
    uint32_t want = x->machine_fingerprint, have = tern_machine_code_fingerprint(m);
    char mine[2048], theirs[2048] = "", old_name[256];
    tern_machine_code_figures(m, mine, sizeof mine);
    const char *compiled_for = x->machine_name ? x->machine_name : tern_exe_machine(x);
    if (!want) { /* a version-1 executable: the machine it names, as that machine is now */
        tern_machine *old = NULL;
        tern_error e;
        if (!tern_exe_machine(x)[0] || tern_machine_load(tern_exe_machine(x), &old, &e))
            return TERN_OK; /* names no loadable machine: nothing to compare with */
        want = tern_machine_code_fingerprint(old);
        tern_machine_code_figures(old, theirs, sizeof theirs);
        snprintf(old_name, sizeof old_name, "%s", tern_machine_name(old));
        compiled_for = old_name;
        tern_machine_free(old);
    } else if (x->machine_figures) {
        snprintf(theirs, sizeof theirs, "%s", x->machine_figures);
    }
    if (want == have)
        return TERN_OK;
    char diff[600] = "";
    int same = !strcmp(machine, tern_machine_name(m));
    if (theirs[0])
        figures_diff(theirs, mine, diff, sizeof diff);
    return tern_error_set(err, TERN_ERR_INVALID,
                          "runtime: the executable was compiled for %s (code fingerprint %08x); machine %s%s%s%s has "
                          "fingerprint %08x%s%s%s: recompile for it, or force it (tern run --force-machine)",
                          compiled_for, want, machine, same ? "" : " (", same ? "" : tern_machine_name(m),
                          same ? "" : ")", have, diff[0] ? " (" : "", diff, diff[0] ? ")" : "");
}

/* Bytes of core c's share of io, and its offset in the whole-model array. */
static void slice_of(const tern_exe *x, const tern_exe_io *io, unsigned c, uint64_t *offset, uint64_t *bytes)
{
    uint64_t total = tern_exe_io_bytes(io);
    if (!io->split_batch || x->cores == 1 || io->rank == 0 || total == 0) {
        *offset = 0;
        *bytes = total;
        return;
    }
    uint64_t row = total / (uint64_t)io->shape[0];
    uint64_t per = (uint64_t)io->shape[0] / x->cores;
    *offset = (uint64_t)c * per * row;
    *bytes = per * row;
}

tern_status tern_rt_create(const tern_exe *x, const char *machine, const tern_rt_options *o, tern_rt **out,
                           tern_error *err)
{
    *out = NULL;
    tern_rt *rt = calloc(1, sizeof *rt);
    if (!rt)
        return tern_error_set(err, TERN_ERR_NOMEM, "runtime: out of memory");
    if (o)
        rt->opts = *o;
    tern_machine *m = NULL;
    char base[512]; /* a cluster runs the cores of the instance it repeats */
    unsigned insts = 1, cl_cores = 0;
    tern_status st = copy_exe(x, &rt->exe, err);
    if (!st)
        st = tern_machine_spec_base(machine, base, sizeof base, &insts, &cl_cores, err);
    if (!st)
        st = tern_machine_load(base, &m, err);
    if (!st)
        st = tern_core_config_from_machine(m, &rt->cfg, err);
    if (st) {
        tern_machine_free(m);
        tern_rt_free(rt);
        return st;
    }
    /* the cores of a chip, or of an instance's chips (a batch split over chips runs them as ranks) */
    unsigned chip_cores = rt->cfg.timing.cores_per_chip ? rt->cfg.timing.cores_per_chip : 1;
    tern_peaks pk;
    tern_machine_peaks(m, &pk);
    unsigned machine_cores = pk.cores > chip_cores ? pk.cores : chip_cores;
    if (cl_cores > machine_cores)
        machine_cores = cl_cores;
    if (rt->exe.cores > machine_cores) {
        tern_machine_free(m);
        tern_rt_free(rt);
        return tern_error_set(err, TERN_ERR_INVALID,
                              "runtime: the executable needs %u NeuronCores; machine %s has %u (%u per chip; compile "
                              "for this machine, or use --cores)",
                              x->cores, machine, machine_cores, chip_cores);
    }
    st = rt->opts.force_machine ? TERN_OK : check_machine(x, machine, m, err);
    tern_machine_free(m);
    if (!st)
        st = tern_batch_ranks_create(&rt->exe, machine, &rt->cfg, rt->opts.transport, &rt->batch, err);
    if (!st && rt->opts.transport && rt->opts.transport->nprocs > 1 && !rt->batch)
        st = tern_error_set(err, TERN_ERR_UNSUPPORTED,
                            "runtime: %u processes, but the executable's %u core%s do%s not run as ranks: only a batch "
                            "split (tern compile --cores N, N >= 2) spreads over MPI processes",
                            rt->opts.transport->nprocs, x->cores, x->cores == 1 ? "" : "s", x->cores == 1 ? "es" : "");
    if (st) {
        tern_rt_free(rt);
        return st;
    }
    for (size_t i = 0; i < rt->exe.num_inputs + rt->exe.num_outputs; i++) {
        const tern_exe_io *io =
            i < rt->exe.num_inputs ? &rt->exe.inputs[i] : &rt->exe.outputs[i - rt->exe.num_inputs];
        if (io->split_batch && (io->rank == 0 || io->shape[0] % rt->exe.cores)) {
            tern_error_set(err, TERN_ERR_INVALID, "runtime: '%s' splits a batch of %lld over %u cores unevenly",
                           tern_exe_io_name(io),
                           io->rank ? (long long)io->shape[0] : 0LL, rt->exe.cores);
            tern_rt_free(rt); /* after the message: rt owns io */
            return TERN_ERR_INVALID;
        }
    }
    /* Every input and output must be a program tensor of its core's share on every core. */
    for (size_t i = 0; i < rt->exe.num_inputs + rt->exe.num_outputs; i++) {
        const tern_exe_io *io =
            i < rt->exe.num_inputs ? &rt->exe.inputs[i] : &rt->exe.outputs[i - rt->exe.num_inputs];
        for (unsigned c = 0; c < rt->exe.cores; c++) {
            const tern_program_tensor *t = tern_program_find_tensor(&rt->exe.programs[c], io->name);
            uint64_t off, bytes;
            slice_of(&rt->exe, io, c, &off, &bytes);
            const char *kind = i < rt->exe.num_inputs ? "input" : "output";
            if (!t && bytes == 0)
                continue; /* a zero-size input or output: nothing to place, so no program tensor */
            /* the message is made before rt (which owns io) is freed */
            if (!t || tern_program_tensor_bytes(t) != bytes) {
                if (!t)
                    tern_error_set(err, TERN_ERR_INVALID, "runtime: core %u's program has no tensor '%s' (an %s)", c,
                                   io->name, kind);
                else
                    tern_error_set(err, TERN_ERR_INVALID,
                                   "runtime: core %u's tensor '%s' holds %llu bytes, its share of the %s is %llu", c,
                                   io->name, (unsigned long long)tern_program_tensor_bytes(t), kind,
                                   (unsigned long long)bytes);
                tern_rt_free(rt);
                return TERN_ERR_INVALID;
            }
        }
    }
    /* Each core reaches one HBM stack (sim/config.c); cores that run at once share the stacks evenly. */
    unsigned stacks = rt->cfg.timing.hbm_stacks ? rt->cfg.timing.hbm_stacks : 1;
    unsigned on_chip = rt->exe.cores < chip_cores ? rt->exe.cores : chip_cores; /* the cores one chip runs */
    if (on_chip > stacks)
        rt->cfg.timing.hbm_bandwidth /= (double)((on_chip + stacks - 1) / stacks);
    rt->cores = calloc(rt->exe.cores, sizeof *rt->cores);
    rt->stats = calloc(rt->exe.cores, sizeof *rt->stats);
    rt->inputs = calloc(rt->exe.num_inputs ? rt->exe.num_inputs : 1, sizeof *rt->inputs);
    rt->input_set = calloc(rt->exe.num_inputs ? rt->exe.num_inputs : 1, sizeof *rt->input_set);
    rt->out_home = calloc(rt->exe.num_outputs ? rt->exe.num_outputs : 1, sizeof *rt->out_home);
    if (!rt->cores || !rt->stats || !rt->inputs || !rt->input_set || !rt->out_home) {
        tern_rt_free(rt);
        return tern_error_set(err, TERN_ERR_NOMEM, "runtime: out of memory");
    }
    tern_core_options co = {0};
    co.mode = rt->opts.mode;
    co.rounding = rt->opts.rounding;
    co.seed = rt->opts.seed;
    co.on_event = rt->opts.on_event;
    co.event_ctx = rt->opts.event_ctx;
    co.max_instructions = rt->opts.max_instructions;
    co.max_elements = rt->opts.max_elements;
    for (unsigned c = 0; c < rt->exe.cores; c++) {
        if (!tern_batch_ranks_local(rt->batch, c))
            continue; /* another process's core */
        if ((st = tern_core_create(&rt->cfg, &co, &rt->cores[c], err))) {
            tern_rt_free(rt);
            return tern_error_prefix(err, "runtime: core %u: ", c);
        }
    }
    if (rt->opts.mode == TERN_MODE_FUNCTIONAL)
        for (size_t i = 0; i < x->num_consts; i++) {
            const tern_exe_const *k = &x->consts[i];
            if (!rt->cores[k->core])
                continue;
            if ((st = tern_core_hbm_write(rt->cores[k->core], k->hbm_addr, k->data, k->bytes, err))) {
                tern_rt_free(rt);
                return tern_error_prefix(err, "runtime: constant %zu: ", i);
            }
        }
    *out = rt;
    return TERN_OK;
}

void tern_rt_free(tern_rt *rt)
{
    if (!rt)
        return;
    if (rt->cores)
        for (unsigned c = 0; c < rt->exe.cores; c++)
            tern_core_free(rt->cores[c]);
    if (rt->inputs)
        for (size_t i = 0; i < rt->exe.num_inputs; i++)
            free(rt->inputs[i]);
    free(rt->inputs);
    free(rt->input_set);
    free(rt->out_home);
    free(rt->cores);
    free(rt->stats);
    tern_batch_ranks_free(rt->batch);
    tern_exe_free(&rt->exe);
    free(rt);
}

const tern_exe *tern_rt_exe(const tern_rt *rt) { return &rt->exe; }

/* Input i gets a new value: an output whose value tern_rt_carry moved there has none any more. */
static void input_overwritten(tern_rt *rt, size_t i)
{
    for (size_t o = 0; o < rt->exe.num_outputs; o++)
        if (rt->out_home[o] == (int64_t)i + 1)
            rt->out_home[o] = OUT_GONE;
}

void tern_rt_set_rounding(tern_rt *rt, tern_round rounding, uint64_t seed)
{
    rt->opts.rounding = rounding;
    rt->opts.seed = seed;
    for (unsigned c = 0; c < rt->exe.cores; c++)
        tern_core_set_rounding(rt->cores[c], rounding, seed);
}

tern_status tern_rt_set_input(tern_rt *rt, const char *name, const void *data, size_t bytes, tern_error *err)
{
    size_t i;
    const tern_exe_io *io = find_io(rt->exe.inputs, rt->exe.num_inputs, name, &i);
    if (!io)
        return tern_error_set(err, TERN_ERR_NOT_FOUND, "runtime: no input named '%s'", name);
    uint64_t want = tern_exe_io_bytes(io);
    if (bytes != want)
        return tern_error_set(err, TERN_ERR_INVALID, "runtime: input '%s' takes %llu bytes (%s), %zu given", name,
                              (unsigned long long)want, tern_dtype_name(io->dtype), bytes);
    /* an input's size is fixed: its buffer is kept from one setting to the next (a training step sets every weight
     * and optimizer state each step: a fresh buffer each time would be first touched, page by page, every step) */
    uint8_t *copy = rt->inputs[i] ? rt->inputs[i] : malloc(bytes ? bytes : 1);
    if (!copy)
        return tern_error_set(err, TERN_ERR_NOMEM, "runtime: out of memory for input '%s'", name);
    if (bytes && (const void *)copy != data)
        memmove(copy, data, bytes); /* 0 bytes for a zero-size input (data may be NULL) */
    rt->inputs[i] = copy;
    rt->input_set[i] = INPUT_HOST;
    input_overwritten(rt, i);
    return TERN_OK;
}

tern_status tern_rt_execute(tern_rt *rt, tern_run_stats *stats, tern_error *err)
{
    tern_status st;
    const tern_exe *x = &rt->exe;
    for (size_t i = 0; i < x->num_inputs; i++) /* a timing-only run reads no values: inputs may stay unset */
        if (!rt->input_set[i] && rt->opts.mode == TERN_MODE_FUNCTIONAL)
            return tern_error_set(err, TERN_ERR_INVALID, "runtime: input '%s' was not set",
                                  tern_exe_io_name(&x->inputs[i]));
    tern_run_stats total;
    memset(&total, 0, sizeof total);
    /* every execution writes every output where it lies (what tern_rt_carry moved away is rewritten) */
    memset(rt->out_home, 0, (x->num_outputs ? x->num_outputs : 1) * sizeof *rt->out_home);
    for (unsigned c = 0; c < x->cores; c++) {
        const tern_program *prog = &x->programs[c];
        if (!rt->cores[c])
            continue; /* another process's core (a batch split over MPI processes) */
        if (rt->opts.mode == TERN_MODE_FUNCTIONAL)
            for (size_t i = 0; i < x->num_inputs; i++) {
                const tern_program_tensor *t = tern_program_find_tensor(prog, x->inputs[i].name);
                uint64_t off, bytes;
                slice_of(x, &x->inputs[i], c, &off, &bytes);
                if ((!t && bytes == 0) || rt->input_set[i] == INPUT_DEVICE)
                    continue; /* a zero-size input: nothing to write; a carried one: in HBM already */
                if (tern_program_tensor_bytes(t) != bytes)
                    return tern_error_set(err, TERN_ERR_INVALID,
                                          "runtime: core %u's tensor '%s' holds %llu bytes, its share of the input is "
                                          "%llu",
                                          c, t->name, (unsigned long long)tern_program_tensor_bytes(t),
                                          (unsigned long long)bytes);
                if ((st = tern_core_hbm_write(rt->cores[c], t->hbm_addr, rt->inputs[i] + off, bytes, err)))
                    return st;
            }
        if (rt->batch)
            continue; /* inputs of every core first, then one launch */
        /* every launch starts from zeroed semaphores and registers, so repeated executions are identical */
        tern_core_reset_control(rt->cores[c]);
        if ((st = tern_core_run(rt->cores[c], prog, &rt->stats[c], err)))
            return tern_error_prefix(err, "runtime: core %u: ", c);
    }
    if (rt->batch && (st = tern_batch_ranks_execute(rt->batch, x, &rt->cfg, rt->cores, rt->stats, err)))
        return st;
    for (unsigned c = 0; c < x->cores; c++) {
        const tern_run_stats *s = &rt->stats[c];
        if (s->time_ps > total.time_ps)
            total.time_ps = s->time_ps;
        for (unsigned e = 0; e < TERN_ENGINE_COUNT; e++) {
            total.instructions[e] += s->instructions[e];
            total.busy_ps[e] += s->busy_ps[e];
        }
        total.dma_bytes += s->dma_bytes;
        total.dma_transfers += s->dma_transfers;
        total.hbm_bytes += s->hbm_bytes;
        total.macs += s->macs;
        total.dma_busy_ps += s->dma_busy_ps;
    }
    if (rt->batch)
        total.time_ps = tern_batch_ranks_info(rt->batch)->time_ps;
    if (stats)
        *stats = total;
    return TERN_OK;
}

/* Bytes [off, off + n) of io (output oi when out, else input oi) as the cores' HBM holds it: a gathered output
 * from core 0's gathered buffer, a split one from each core's share, else core 0's (every core holds all of it).
 * Each run of HBM bytes goes to visit(ctx, core, addr, at, len): at is its offset from off. */
typedef tern_status (*hbm_visit)(void *ctx, tern_core *core, uint64_t addr, uint64_t at, uint64_t len,
                                 tern_error *err);
static tern_status hbm_range_visit(tern_rt *rt, const tern_exe_io *io, size_t oi, int out, uint64_t off, uint64_t n,
                                   hbm_visit visit, void *ctx, tern_error *err)
{
    const tern_exe *x = &rt->exe;
    uint64_t at;
    if (n == 0)
        return TERN_OK;
    if (!rt->cores[0])
        return tern_error_set(err, TERN_ERR_INVALID, "runtime: %s '%s': core 0 runs on process 0, not this one",
                              out ? "output" : "input", tern_exe_io_name(io));
    if (out && tern_batch_ranks_gathered(rt->batch, oi, &at)) /* gathered on the device: core 0 holds all of it */
        return visit(ctx, rt->cores[0], at + off, 0, n, err);
    for (unsigned c = 0; c < x->cores; c++) {
        const tern_program_tensor *t = tern_program_find_tensor(&x->programs[c], io->name);
        uint64_t so, sn;
        slice_of(x, io, c, &so, &sn);
        uint64_t lo = off > so ? off : so, hi = off + n < so + sn ? off + n : so + sn;
        if (lo < hi) {
            if (!rt->cores[c])
                return tern_error_set(err, TERN_ERR_INVALID, "runtime: '%s': core %u runs on another process",
                                      tern_exe_io_name(io), c);
            tern_status st = visit(ctx, rt->cores[c], t->hbm_addr + (lo - so), lo - off, hi - lo, err);
            if (st)
                return st;
        }
        if (!io->split_batch || x->cores == 1)
            break; /* every core computed all of it: take core 0's */
    }
    return TERN_OK;
}

static tern_status visit_read(void *ctx, tern_core *core, uint64_t addr, uint64_t at, uint64_t len, tern_error *err)
{
    return tern_core_hbm_read(core, addr, (uint8_t *)ctx + at, (size_t)len, err);
}

static tern_status hbm_range(tern_rt *rt, const tern_exe_io *io, size_t oi, int out, uint64_t off, uint8_t *data,
                             uint64_t n, tern_error *err)
{
    return hbm_range_visit(rt, io, oi, out, off, n, visit_read, data, err);
}

typedef struct {
    tern_rt_scan_fn fn;
    void *ctx;
} scan_ctx;

/* a run of HBM bytes as the pieces of its pages, each handed to the caller where it lies */
static tern_status visit_scan(void *vctx, tern_core *core, uint64_t addr, uint64_t at, uint64_t len, tern_error *err)
{
    const scan_ctx *s = vctx;
    while (len) {
        uint64_t n = len;
        const void *p = tern_core_hbm_peek(core, addr, &n, err);
        if (!p)
            return err ? err->code : TERN_ERR_RANGE;
        tern_status st = s->fn(s->ctx, at, p, (size_t)n, err);
        if (st)
            return st;
        addr += n;
        at += n;
        len -= n;
    }
    return TERN_OK;
}

/* Which output's bytes [offset, +bytes) to read, and from where (the output, or the input it was carried to). */
static tern_status output_home(tern_rt *rt, const char *name, uint64_t offset, uint64_t bytes,
                               const tern_exe_io **io, size_t *index, int *out, tern_error *err)
{
    size_t oi = 0;
    const tern_exe_io *o = find_io(rt->exe.outputs, rt->exe.num_outputs, name, &oi);
    if (!o)
        return tern_error_set(err, TERN_ERR_NOT_FOUND, "runtime: no output named '%s'", name);
    uint64_t want = tern_exe_io_bytes(o);
    if (offset > want || bytes > want - offset)
        return tern_error_set(err, TERN_ERR_RANGE, "runtime: output '%s' holds %llu bytes (%s); bytes [%llu, +%llu) "
                              "requested",
                              name, (unsigned long long)want, tern_dtype_name(o->dtype), (unsigned long long)offset,
                              (unsigned long long)bytes);
    if (rt->opts.mode != TERN_MODE_FUNCTIONAL)
        return tern_error_set(err, TERN_ERR_INVALID, "runtime: output '%s': a timing-only run computes no values", name);
    if (rt->out_home[oi] == OUT_GONE)
        return tern_error_set(err, TERN_ERR_INVALID,
                              "runtime: output '%s' was carried to an input that has been given another value since: "
                              "it has no value until the next execution",
                              name);
    if (rt->out_home[oi] > 0) { /* carried: the value is the input's now */
        *index = (size_t)(rt->out_home[oi] - 1);
        *io = &rt->exe.inputs[*index];
        *out = 0;
    } else {
        *index = oi;
        *io = o;
        *out = 1;
    }
    return TERN_OK;
}

tern_status tern_rt_get_output_range(tern_rt *rt, const char *name, uint64_t offset, void *data, size_t bytes,
                                     tern_error *err)
{
    const tern_exe_io *io;
    size_t i;
    int out;
    tern_status st = output_home(rt, name, offset, bytes, &io, &i, &out, err);
    return st ? st : hbm_range(rt, io, i, out, offset, data, bytes, err);
}

tern_status tern_rt_scan_output(tern_rt *rt, const char *name, uint64_t offset, uint64_t bytes, tern_rt_scan_fn fn,
                                void *ctx, tern_error *err)
{
    const tern_exe_io *io;
    size_t i;
    int out;
    scan_ctx s = {fn, ctx};
    tern_status st = output_home(rt, name, offset, bytes, &io, &i, &out, err);
    return st ? st : hbm_range_visit(rt, io, i, out, offset, bytes, visit_scan, &s, err);
}

tern_status tern_rt_get_output(tern_rt *rt, const char *name, void *data, size_t bytes, tern_error *err)
{
    const tern_exe_io *io = find_io(rt->exe.outputs, rt->exe.num_outputs, name, NULL);
    if (!io)
        return tern_error_set(err, TERN_ERR_NOT_FOUND, "runtime: no output named '%s'", name);
    uint64_t want = tern_exe_io_bytes(io);
    if (bytes != want)
        return tern_error_set(err, TERN_ERR_INVALID, "runtime: output '%s' holds %llu bytes (%s), %zu requested", name,
                              (unsigned long long)want, tern_dtype_name(io->dtype), bytes);
    return tern_rt_get_output_range(rt, name, 0, data, bytes, err);
}

tern_status tern_rt_get_input(tern_rt *rt, const char *name, void *data, size_t bytes, tern_error *err)
{
    size_t i = 0;
    const tern_exe_io *io = find_io(rt->exe.inputs, rt->exe.num_inputs, name, &i);
    if (!io)
        return tern_error_set(err, TERN_ERR_NOT_FOUND, "runtime: no input named '%s'", name);
    uint64_t want = tern_exe_io_bytes(io);
    if (bytes != want)
        return tern_error_set(err, TERN_ERR_INVALID, "runtime: input '%s' takes %llu bytes (%s), %zu requested", name,
                              (unsigned long long)want, tern_dtype_name(io->dtype), bytes);
    if (!rt->input_set[i])
        return tern_error_set(err, TERN_ERR_INVALID, "runtime: input '%s' was not set", name);
    if (rt->input_set[i] == INPUT_HOST) {
        if (bytes)
            memcpy(data, rt->inputs[i], bytes);
        return TERN_OK;
    }
    return hbm_range(rt, io, i, 0, 0, data, bytes, err);
}

tern_status tern_rt_carry(tern_rt *rt, const char *output, const char *input, tern_error *err)
{
    const tern_exe *x = &rt->exe;
    size_t oi = 0, ii = 0;
    const tern_exe_io *out = find_io(x->outputs, x->num_outputs, output, &oi);
    const tern_exe_io *in = find_io(x->inputs, x->num_inputs, input, &ii);
    if (!out || !in)
        return tern_error_set(err, TERN_ERR_NOT_FOUND, "runtime: carry: no %s named '%s'", out ? "input" : "output",
                              out ? input : output);
    uint64_t bytes = tern_exe_io_bytes(out);
    if (out->dtype != in->dtype || out->text_bytes != in->text_bytes || bytes != tern_exe_io_bytes(in) ||
        (x->cores > 1 && out->split_batch != in->split_batch))
        return tern_error_set(err, TERN_ERR_INVALID,
                              "runtime: carry: output '%s' (%llu bytes of %s%s) cannot become input '%s' (%llu bytes "
                              "of %s%s): the dtype, the size and the batch split must agree",
                              output, (unsigned long long)bytes, tern_dtype_name(out->dtype),
                              out->split_batch ? ", split" : "", input,
                              (unsigned long long)tern_exe_io_bytes(in), tern_dtype_name(in->dtype),
                              in->split_batch ? ", split" : "");
    if (rt->opts.mode != TERN_MODE_FUNCTIONAL)
        return tern_error_set(err, TERN_ERR_INVALID, "runtime: carry: output '%s': a timing-only run computes no values",
                              output);
    if (rt->out_home[oi] == OUT_GONE)
        return tern_error_set(err, TERN_ERR_INVALID,
                              "runtime: carry: output '%s' was carried to an input that has been given another value "
                              "since: it has no value until the next execution",
                              output);
    /* The value's home: the output's tensor, or the input it was carried to before (then it stays there too and
     * is copied, not moved). A move hands the output's HBM pages to the input where both tensors start at the
     * same offset within a page (the trainer's compile aligns them, tern_compile_opts.hbm_io_align), so the
     * bytes do not move; the output's own tensor is then garbage until the next execution rewrites it. */
    size_t from_in = rt->out_home[oi] > 0 ? (size_t)(rt->out_home[oi] - 1) : SIZE_MAX;
    if (from_in == ii)
        return TERN_OK; /* carried there already */
    const tern_exe_io *src = from_in != SIZE_MAX ? &x->inputs[from_in] : out;
    tern_status st = TERN_OK;
    for (unsigned c = 0; c < x->cores && !st; c++) {
        if (!rt->cores[c])
            continue; /* another process's core carries its own */
        const tern_program_tensor *ts = tern_program_find_tensor(&x->programs[c], src->name);
        const tern_program_tensor *ti = tern_program_find_tensor(&x->programs[c], in->name);
        uint64_t so, n;
        slice_of(x, out, c, &so, &n);
        if (!n)
            continue; /* a zero-size share has no tensor */
        st = from_in != SIZE_MAX ? tern_core_hbm_copy(rt->cores[c], ti->hbm_addr, ts->hbm_addr, n, err)
                                 : tern_core_hbm_move(rt->cores[c], ti->hbm_addr, ts->hbm_addr, n, err);
    }
    free(rt->inputs[ii]); /* the host copy is stale now (or, after a failure, the input is half written) */
    rt->inputs[ii] = NULL;
    input_overwritten(rt, ii);
    if (st) {
        rt->input_set[ii] = 0; /* an execution refuses it until it is set again */
        if (from_in == SIZE_MAX)
            rt->out_home[oi] = OUT_GONE;
        return tern_error_prefix(err, "runtime: carry '%s' to '%s': ", output, input);
    }
    rt->input_set[ii] = INPUT_DEVICE;
    if (from_in == SIZE_MAX)
        rt->out_home[oi] = (int64_t)ii + 1;
    return TERN_OK;
}

int tern_rt_core_is_local(const tern_rt *rt, unsigned core)
{
    return core < rt->exe.cores && rt->cores[core] != NULL;
}

const tern_run_stats *tern_rt_core_stats(const tern_rt *rt, unsigned core)
{
    return core < rt->exe.cores ? &rt->stats[core] : NULL;
}

const tern_rt_gather_info *tern_rt_gather(const tern_rt *rt) { return tern_batch_ranks_info(rt->batch); }
