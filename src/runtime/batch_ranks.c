/* The compiler's batch split as data parallelism (issue 13): the cores of an executable that splits a batch run
 * their shares as the ranks of one multi-rank launch (tern_ranks_run: every core's scheduler in one global time
 * order), and each split output is gathered on the device by an all-gather over the machine's fabric, so the
 * predicted time is the last share's end plus the gather the links give (the time `tern collective all-gather`
 * reports for that size).
 *
 * Each core's program is extended on its Sync engine, after its own instructions: one sem_wait per semaphore the
 * program uses, for the value that semaphore holds when the program has run to its end (so the gather starts only
 * when every engine and every DMA of the share has finished), then one `collective` all-gather per split output,
 * from the core's share (its program tensor) to a whole-model buffer at the top of its HBM, each signalling a
 * semaphore the program never uses, and a wait for all of them. The final semaphore values come from a
 * timing-only run of each program alone when the launch is prepared (the first execution); every later
 * launch checks that each core ended with those values, so a program whose control flow depended on its data
 * would be reported rather than gathered early. The gather moves bytes: an output whose share is a whole number of
 * 4-byte words is gathered as int32, any other as 1-byte fp8 elements, which the all-gather copies unchanged, so
 * the gathered output is bit for bit the shares side by side. Ranks are the first N physical NeuronCores of the
 * machine in the fabric's rank order (docs/multichip.md), one core per rank (lnc 1); on a cluster (NxINSTANCE) a
 * split larger than an instance takes the fewest instances n that hold it with N / n cores each, so its gathers
 * cross EFA. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/batch_ranks.h"
#include "tern/collective.h"
#include "tern/fabric.h"
#include "tern/transport.h"

struct tern_batch_ranks {
    tern_fabric *f;
    unsigned R;
    size_t nout;
    int *gathered;       /* per output: 1 when split and gathered */
    uint64_t *gather_at; /* per output: HBM address of the whole-model buffer (every rank) */
    int prepared;
    tern_program *progs; /* R extended programs */
    uint32_t **final_sem; /* R x num_semaphores: values at the end of the share alone */
    uint32_t nsem;
    int64_t *share_ps;   /* each share alone (timing-only) */
    tern_rt_gather_info info;
};

void tern_batch_ranks_free(tern_batch_ranks *b)
{
    if (!b)
        return;
    for (unsigned r = 0; b->progs && r < b->R; r++)
        tern_program_free(&b->progs[r]);
    for (unsigned r = 0; b->final_sem && r < b->R; r++)
        free(b->final_sem[r]);
    free(b->final_sem);
    free(b->progs);
    free(b->share_ps);
    free(b->gathered);
    free(b->gather_at);
    tern_fabric_free(b->f);
    free(b);
}

static uint64_t align_down(uint64_t v, uint64_t a) { return v / a * a; }

/* Highest byte an HBM pattern reaches without its register offset (an upper bound of what the program uses). */
static uint64_t ap_hbm_end(const tern_ap *ap)
{
    if (ap->mem != TERN_MEM_HBM || ap->ndims == 0)
        return 0;
    uint64_t es = tern_dtype_size((tern_dtype)ap->dtype), span = 1;
    for (unsigned k = 0; k < ap->ndims && k < TERN_AP_MAX_DIMS; k++)
        if (ap->dims[k].num)
            span += (uint64_t)(ap->dims[k].num - 1) * (uint64_t)(ap->dims[k].step < 0 ? -(int64_t)ap->dims[k].step
                                                                                     : ap->dims[k].step);
    if (ap->num_partitions)
        span += (uint64_t)(ap->num_partitions - 1) *
                (uint64_t)(ap->partition_step < 0 ? -ap->partition_step : ap->partition_step);
    return ap->offset + span * es;
}

static tern_ap flat_hbm(uint64_t addr, tern_dtype dt, uint64_t count)
{
    tern_ap a;
    memset(&a, 0, sizeof a);
    a.mem = TERN_MEM_HBM;
    a.dtype = (uint8_t)dt;
    a.ndims = 1;
    a.offset_reg = TERN_REG_NONE;
    a.num_partitions = 1;
    a.partition_step = (int64_t)count;
    a.offset = addr;
    a.dims[0].step = 1;
    a.dims[0].num = (uint32_t)count;
    return a;
}

static tern_instr control(tern_opcode op)
{
    tern_instr ins;
    memset(&ins, 0, sizeof ins);
    ins.opcode = (uint16_t)op;
    ins.engine = TERN_ENGINE_SYNC;
    ins.wait_sem = TERN_SEM_NONE;
    ins.signal_sem = TERN_SEM_NONE;
    for (int s = 0; s < TERN_INSTR_OPERANDS; s++)
        ins.ap[s].offset_reg = TERN_REG_NONE;
    return ins;
}

/* The byte-moving dtype and element count of a share of `bytes` bytes. */
static void gather_type(uint64_t bytes, tern_dtype *dt, uint64_t *count)
{
    *dt = bytes % 4 == 0 ? TERN_DTYPE_INT32 : TERN_DTYPE_FP8_E4M3;
    *count = bytes % 4 == 0 ? bytes / 4 : bytes;
}

tern_status tern_batch_ranks_create(const tern_exe *x, const char *machine, const tern_core_config *cfg,
                                    const tern_transport *tr, tern_batch_ranks **out, tern_error *err)
{
    *out = NULL;
    if (x->cores < 2)
        return TERN_OK;
    int any = 0;
    for (size_t i = 0; i < x->num_outputs; i++)
        any |= x->outputs[i].split_batch && x->outputs[i].rank > 0 && tern_exe_io_bytes(&x->outputs[i]) > 0;
    if (!any)
        return TERN_OK;
    tern_batch_ranks *b = calloc(1, sizeof *b);
    if (!b)
        return tern_error_set(err, TERN_ERR_NOMEM, "runtime: out of memory");
    b->R = x->cores;
    b->nout = x->num_outputs;
    b->gathered = calloc(x->num_outputs + 1, sizeof *b->gathered);
    b->gather_at = calloc(x->num_outputs + 1, sizeof *b->gather_at);
    b->share_ps = calloc(b->R, sizeof *b->share_ps);
    if (!b->gathered || !b->gather_at || !b->share_ps) {
        tern_batch_ranks_free(b);
        return tern_error_set(err, TERN_ERR_NOMEM, "runtime: out of memory");
    }
    /* the first instance's first R physical cores; more than one instance holds: the fewest instances that hold
     * them, the ranks spread equally (the first R / n cores of each of the first n instances) */
    tern_fabric_opts fo = {1, 1, 1};
    tern_status st = tern_fabric_load(machine, &fo, &b->f, err);
    if (!st) {
        unsigned n = tern_fabric_fewest_nodes(b->f, b->R);
        tern_fabric_free(b->f);
        b->f = NULL;
        fo.nodes = n;
        fo.ranks = b->R;
        st = tern_fabric_load(machine, &fo, &b->f, err);
    }
    if (!st && tr && tr->nprocs > 1) /* the chips, so the cores, spread over the processes */
        st = tern_fabric_set_transport(b->f, tr, err);
    if (st) {
        tern_batch_ranks_free(b);
        return tern_error_prefix(err, "runtime: the batch split's %u cores as ranks of '%s': ", x->cores, machine);
    }
    /* Whole-model buffers at the top of each core's HBM, above everything any program addresses. */
    uint64_t used = 0;
    for (unsigned c = 0; c < x->cores; c++) {
        const tern_program *p = &x->programs[c];
        for (size_t t = 0; t < p->num_tensors; t++) {
            uint64_t e = p->tensors[t].hbm_addr + tern_program_tensor_bytes(&p->tensors[t]);
            used = e > used ? e : used;
        }
        for (unsigned e = 0; e < TERN_ENGINE_COUNT; e++)
            for (size_t i = 0; i < p->streams[e].count; i++)
                for (int s = 0; s < TERN_INSTR_OPERANDS; s++) {
                    uint64_t end = ap_hbm_end(&p->streams[e].instrs[i].ap[s]);
                    used = end > used ? end : used;
                }
    }
    for (size_t i = 0; i < x->num_consts; i++) {
        uint64_t e = x->consts[i].hbm_addr + x->consts[i].bytes;
        used = e > used ? e : used;
    }
    uint64_t top = cfg->hbm_bytes;
    for (size_t i = x->num_outputs; i-- > 0;) {
        const tern_exe_io *io = &x->outputs[i];
        uint64_t bytes = tern_exe_io_bytes(io);
        if (!io->split_batch || io->rank == 0 || bytes == 0)
            continue;
        if (bytes + 4096 > top || align_down(top - bytes, 4096) < used) {
            st = tern_error_set(err, TERN_ERR_RANGE,
                                "runtime: output '%s' (%llu bytes) cannot be gathered: the cores' HBM holds %llu "
                                "bytes, the program uses %llu",
                                tern_exe_io_name(io), (unsigned long long)bytes, (unsigned long long)cfg->hbm_bytes,
                                (unsigned long long)used);
            tern_batch_ranks_free(b);
            return st;
        }
        top = align_down(top - bytes, 4096);
        b->gathered[i] = 1;
        b->gather_at[i] = top;
    }
    b->info.ranks = b->R;
    *out = b;
    return TERN_OK;
}

/* Run each share alone (timing-only) for its final semaphores, and build the extended programs. */
static tern_status prepare(tern_batch_ranks *b, const tern_exe *x, const tern_core_config *cfg, tern_error *err)
{
    b->nsem = cfg->num_semaphores;
    b->progs = calloc(b->R, sizeof *b->progs);
    b->final_sem = calloc(b->R, sizeof *b->final_sem);
    if (!b->progs || !b->final_sem)
        return tern_error_set(err, TERN_ERR_NOMEM, "runtime: out of memory");
    for (unsigned r = 0; r < b->R; r++)
        tern_program_init(&b->progs[r]);
    tern_core_options co;
    memset(&co, 0, sizeof co);
    co.mode = TERN_MODE_TIMING_ONLY;
    tern_core *solo = NULL;
    tern_status st = tern_core_create(cfg, &co, &solo, err);
    if (st)
        return tern_error_prefix(err, "runtime: ");
    for (unsigned r = 0; !st && r < b->R; r++) {
        const tern_program *p = &x->programs[r];
        tern_run_stats s;
        tern_core_reset_control(solo);
        if ((st = tern_core_run(solo, p, &s, err))) {
            tern_error_prefix(err, "runtime: core %u (alone, timing-only): ", r);
            break;
        }
        b->share_ps[r] = s.time_ps;
        if (!(b->final_sem[r] = calloc(b->nsem ? b->nsem : 1, sizeof **b->final_sem))) {
            st = tern_error_set(err, TERN_ERR_NOMEM, "runtime: out of memory");
            break;
        }
        /* a semaphore no instruction names carries the gather's completions */
        unsigned char *named = calloc(b->nsem ? b->nsem : 1, 1);
        if (!named) {
            st = tern_error_set(err, TERN_ERR_NOMEM, "runtime: out of memory");
            break;
        }
        for (unsigned e = 0; e < TERN_ENGINE_COUNT; e++)
            for (size_t i = 0; i < p->streams[e].count; i++) {
                const tern_instr *in = &p->streams[e].instrs[i];
                if (in->wait_sem < b->nsem)
                    named[in->wait_sem] = 1;
                if (in->signal_sem < b->nsem)
                    named[in->signal_sem] = 1;
            }
        uint32_t free_sem = b->nsem;
        for (uint32_t s2 = b->nsem; s2-- > 0;)
            if (!named[s2] && tern_core_semaphore(solo, s2) == 0) {
                free_sem = s2;
                break;
            }
        for (uint32_t s2 = 0; s2 < b->nsem; s2++)
            b->final_sem[r][s2] = tern_core_semaphore(solo, s2);
        free(named);
        if (free_sem == b->nsem || free_sem >= TERN_SEM_NONE) {
            st = tern_error_set(err, TERN_ERR_INVALID,
                                "runtime: core %u's program names all %u semaphores: none is left for the gather of "
                                "its outputs",
                                r, b->nsem);
            break;
        }
        if ((st = tern_program_copy(&b->progs[r], p, err)))
            break;
        tern_stream *sy = &b->progs[r].streams[TERN_ENGINE_SYNC];
        tern_instr halt;
        int had_halt = sy->count && sy->instrs[sy->count - 1].opcode == TERN_OP_HALT;
        if (had_halt)
            halt = sy->instrs[--sy->count];
        for (uint32_t s2 = 0; !st && s2 < b->nsem; s2++)
            if (b->final_sem[r][s2]) {
                tern_instr w = control(TERN_OP_SEM_WAIT);
                w.wait_sem = (uint8_t)s2;
                w.wait_value = b->final_sem[r][s2];
                st = tern_program_append(&b->progs[r], &w, err);
            }
        uint32_t ngather = 0;
        for (size_t i = 0; !st && i < x->num_outputs; i++) {
            if (!b->gathered[i])
                continue;
            const tern_exe_io *io = &x->outputs[i];
            const tern_program_tensor *t = tern_program_find_tensor(p, io->name);
            uint64_t share = tern_program_tensor_bytes(t), count;
            tern_dtype dt;
            gather_type(share, &dt, &count);
            if (count * b->R > UINT32_MAX) {
                st = tern_error_set(err, TERN_ERR_RANGE,
                                    "runtime: output '%s' (%llu elements of %s gathered) exceeds one collective's "
                                    "%u-element pattern",
                                    tern_exe_io_name(io), (unsigned long long)(count * b->R), tern_dtype_name(dt),
                                    UINT32_MAX);
                break;
            }
            tern_instr g = control(TERN_OP_COLLECTIVE);
            g.imm_i0 = 1; /* all-gather (TERN_KCOLL_ALL_GATHER), algorithm auto */
            g.op0 = TERN_ALU_BYPASS;
            g.signal_sem = (uint8_t)free_sem;
            g.ap[TERN_AP_DST] = flat_hbm(b->gather_at[i], dt, count * b->R);
            g.ap[TERN_AP_IN0] = flat_hbm(t->hbm_addr, dt, count);
            st = tern_program_append(&b->progs[r], &g, err);
            ngather++;
        }
        if (!st && ngather) {
            tern_instr w = control(TERN_OP_SEM_WAIT);
            w.wait_sem = (uint8_t)free_sem;
            w.wait_value = ngather;
            st = tern_program_append(&b->progs[r], &w, err);
        }
        if (!st && had_halt)
            st = tern_program_append(&b->progs[r], &halt, err);
        if (!st && ngather) /* the gather's semaphore ends at its count: later launches check it */
            b->final_sem[r][free_sem] = ngather;
    }
    tern_core_free(solo);
    if (!st)
        b->prepared = 1;
    return st;
}

tern_status tern_batch_ranks_execute(tern_batch_ranks *b, const tern_exe *x, const tern_core_config *cfg,
                                     tern_core *const *cores, tern_run_stats *per_core, tern_error *err)
{
    tern_status st;
    if (!b->prepared && (st = prepare(b, x, cfg, err)))
        return st;
    const tern_program **progs = calloc(b->R, sizeof *progs);
    if (!progs)
        return tern_error_set(err, TERN_ERR_NOMEM, "runtime: out of memory");
    for (unsigned r = 0; r < b->R; r++)
        progs[r] = &b->progs[r];
    tern_ranks_result res;
    memset(&res, 0, sizeof res);
    st = tern_ranks_run(b->f, cores, progs, per_core, &res, err);
    free(progs);
    if (st) {
        tern_ranks_result_free(&res);
        return tern_error_prefix(err, "runtime: the batch split over %u cores: ", b->R);
    }
    for (unsigned r = 0; r < b->R && !st; r++)
        for (uint32_t s = 0; cores[r] && s < b->nsem; s++)
            if (tern_core_semaphore(cores[r], s) != b->final_sem[r][s]) {
                st = tern_error_set(err, TERN_ERR_INVALID,
                                    "runtime: core %u ended with semaphore %u at %u, its program alone ended it at %u "
                                    "(its control flow depends on its data): the outputs were gathered too early",
                                    r, s, tern_core_semaphore(cores[r], s), b->final_sem[r][s]);
                break;
            }
    const tern_transport *t = tern_fabric_transport(b->f);
    if (t && t->nprocs > 1) {
        /* every process gets every core's stats (each core's are nonzero on one process), and one verdict */
        _Static_assert(sizeof(tern_run_stats) % sizeof(uint64_t) == 0, "tern_run_stats: 64-bit fields only");
        size_t w = sizeof(tern_run_stats) / sizeof(uint64_t);
        uint64_t *v = calloc((size_t)b->R * w + 1, sizeof *v);
        if (!v)
            t->abort(t->ctx, "runtime: out of memory for the cores' statistics");
        for (unsigned r = 0; r < b->R; r++)
            if (cores[r])
                memcpy(v + (size_t)r * w, &per_core[r], sizeof(tern_run_stats));
        v[(size_t)b->R * w] = st != TERN_OK;
        tern_error e2;
        if (t->allreduce(t->ctx, v, (size_t)b->R * w + 1, TERN_XOP_SUM, &e2))
            t->abort(t->ctx, e2.msg);
        for (unsigned r = 0; r < b->R; r++)
            memcpy(&per_core[r], v + (size_t)r * w, sizeof(tern_run_stats));
        if (!st && v[(size_t)b->R * w])
            st = tern_error_set(err, TERN_ERR_INVALID, "runtime: another process's cores ended with other "
                                "semaphore values than their programs alone (see its message)");
        free(v);
    }
    memset(&b->info, 0, sizeof b->info);
    b->info.ranks = b->R;
    b->info.time_ps = res.time_ps;
    b->info.gathers = (unsigned)res.ncolls;
    b->info.compute_ps = res.ncolls ? res.colls[0].start_ps : res.time_ps;
    for (size_t i = 0; i < res.ncolls; i++)
        b->info.gather_ps += (int64_t)res.colls[i].time_ps;
    for (unsigned r = 0; r < b->R; r++)
        if (b->share_ps[r] > b->info.share_max_ps)
            b->info.share_max_ps = b->share_ps[r];
    tern_ranks_result_free(&res);
    return st;
}

int tern_batch_ranks_gathered(const tern_batch_ranks *b, size_t output, uint64_t *hbm_addr)
{
    if (!b || output >= b->nout || !b->gathered[output])
        return 0;
    *hbm_addr = b->gather_at[output];
    return 1;
}

const tern_rt_gather_info *tern_batch_ranks_info(const tern_batch_ranks *b) { return b ? &b->info : NULL; }

int tern_batch_ranks_local(const tern_batch_ranks *b, unsigned c)
{
    return !b || tern_fabric_rank_is_local(b->f, c);
}
