/* The kernel builder's core: HBM tensors and their addresses, SBUF/PSUM allocation with reuse, views, and the
 * emission of instructions with automatic synchronisation.
 *
 * Synchronisation model. Every engine and every DMA queue owns one semaphore that counts its completed
 * instructions (engine e: semaphore e; queue q: semaphore ENGINES + q). Each region (tile or HBM tensor)
 * remembers, per counter, the count of its last writer and of its readers since, by byte range (hazard.c). An
 * instruction that reads bytes waits for the last writers of those bytes; one that writes waits for their last
 * writers and readers; accesses from the same engine or queue need no wait (in-order). After a write of the
 * whole region only the writer is remembered: it waited for everything before it, so waiting for it is enough
 * (transitivity). Waits an issuing engine has already
 * performed are elided. When a tile is released its pending accesses stay with the freed space and pass to
 * the next tile placed there, so reuse can never race. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernel/builder_internal.h"

/* ---- errors ---- */

void kfail(tern_kernel *k, tern_status code, const char *fmt, ...)
{
    if (k->failed)
        return;
    char msg[TERN_ERROR_MSG_MAX - 96];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    k->failed = 1;
    tern_error_set(&k->err, code, "kernel %s: %s", k->name, msg);
}

tern_status tern_kernel_status(const tern_kernel *k, tern_error *err)
{
    if (!k->failed)
        return TERN_OK;
    if (err)
        *err = k->err;
    return k->err.code;
}

tern_view kview_row(tern_view row)
{
    if (tern_view_rank(&row) == 2) {
        row.ap.dims[0] = row.ap.dims[1];
        memset(&row.ap.dims[1], 0, sizeof row.ap.dims[1]); /* unused dims must be zero (program encoding) */
        row.ap.ndims = 1;
    }
    row.ap.num_partitions = 1;
    return row;
}

tern_view kview_invalid(void)
{
    tern_view v;
    memset(&v, 0, sizeof v);
    v.region = -1;
    return v;
}

tern_view tern_view_none(void) { return kview_invalid(); }

int kview_ok(tern_kernel *k, const tern_view *v, const char *what)
{
    if (k->failed)
        return 0;
    if (v->region < 0 || (size_t)v->region >= k->nregions) {
        kfail(k, TERN_ERR_INVALID, "%s: invalid view (region %d)", what, v->region);
        return 0;
    }
    if (!k->regions[v->region].live) {
        kfail(k, TERN_ERR_INVALID, "%s: view of released tile '%s'", what, k->regions[v->region].name);
        return 0;
    }
    return 1;
}

/* ---- creation ---- */

tern_status tern_kernel_create(const tern_core_config *cfg, const char *name, tern_kernel **out, tern_error *err)
{
    *out = NULL;
    tern_kernel *k = calloc(1, sizeof *k);
    if (!k)
        return tern_error_set(err, TERN_ERR_NOMEM, "kernel %s: out of memory", name);
    k->cfg = *cfg;
    snprintf(k->name, sizeof k->name, "%s", name ? name : "kernel");
    tern_program_init(&k->prog);
    snprintf(k->prog.machine, sizeof k->prog.machine, "%s", cfg->name);
    k->prog.num_semaphores = cfg->num_semaphores;
    k->ncounters = TERN_ENGINE_COUNT + cfg->dma_queues;
    if (k->ncounters > KMAX_COUNTERS || k->ncounters > cfg->num_semaphores) {
        free(k);
        return tern_error_set(err, TERN_ERR_INVALID,
                              "kernel %s: %u engine and queue counters need %u semaphores; the core has %u", name,
                              TERN_ENGINE_COUNT + cfg->dma_queues, TERN_ENGINE_COUNT + cfg->dma_queues,
                              cfg->num_semaphores);
    }
    k->hbm_next = 4096; /* high-water mark of HBM use */
    uint64_t psum_bytes = (uint64_t)cfg->psum_banks * cfg->psum_bank_bytes;
    uint64_t reserved;
    khazard none;
    if (kalloc_init(&k->pools[0], cfg->sbuf_partition_bytes) || kalloc_init(&k->pools[1], psum_bytes) ||
        kalloc_init(&k->pools[2], cfg->hbm_bytes) ||
        kalloc_take(&k->pools[2], 4096, 64, 0, &reserved, &none)) { /* address 0 stays unused: 0 is a bug */
        tern_kernel_free(k);
        return tern_error_set(err, TERN_ERR_NOMEM, "kernel %s: out of memory", name);
    }
    *out = k;
    return TERN_OK;
}

void tern_kernel_free(tern_kernel *k)
{
    if (!k)
        return;
    tern_program_free(&k->prog);
    for (size_t i = 0; i < k->nregions; i++)
        kregion_clear(&k->regions[i]);
    free(k->regions);
    for (size_t i = 0; i < k->nio; i++)
        free(k->io_data ? k->io_data[i] : NULL);
    free(k->io_data);
    free(k->io);
    kalloc_free(&k->pools[0]);
    kalloc_free(&k->pools[1]);
    kalloc_free(&k->pools[2]);
    free(k);
}

static int new_region(tern_kernel *k)
{
    if (k->nregions == k->cap_regions) {
        size_t cap = k->cap_regions ? k->cap_regions * 2 : 64;
        kregion *r = realloc(k->regions, cap * sizeof *r);
        if (!r) {
            kfail(k, TERN_ERR_NOMEM, "out of memory for regions");
            return -1;
        }
        k->regions = r;
        k->cap_regions = cap;
    }
    memset(&k->regions[k->nregions], 0, sizeof k->regions[0]);
    return (int)k->nregions++;
}

/* ---- HBM tensors ---- */

static int sealed(tern_kernel *k, const char *what)
{
    if (k->sealed)
        kfail(k, TERN_ERR_INVALID, "%s: this kernel was loaded from a program and cannot be extended", what);
    return k->sealed;
}

void tern_kernel_set_io_align(tern_kernel *k, uint64_t align)
{
    if (k->failed || sealed(k, "io alignment"))
        return;
    if (align && (align < 64 || (align & (align - 1))))
        kfail(k, TERN_ERR_INVALID, "input/output alignment %llu: not 0 or a power of two >= 64",
              (unsigned long long)align);
    else
        k->io_align = align;
}

tern_view tern_kernel_hbm_tensor(tern_kernel *k, const char *name, tern_kio_kind kind, tern_dtype dt, unsigned ndims,
                                 const uint64_t *shape)
{
    if (k->failed || sealed(k, "tensor"))
        return kview_invalid();
    if (dt >= TERN_DTYPE_COUNT) {
        kfail(k, TERN_ERR_INVALID, "tensor '%s': unknown dtype %d", name, (int)dt);
        return kview_invalid();
    }
    if (ndims == 0 || ndims > TERN_AP_MAX_DIMS) {
        kfail(k, TERN_ERR_INVALID, "tensor '%s': rank %u outside 1..%d", name, ndims, TERN_AP_MAX_DIMS);
        return kview_invalid();
    }
    if (strlen(name) >= sizeof k->io[0].name) {
        kfail(k, TERN_ERR_INVALID, "tensor name '%s' longer than %zu characters", name, sizeof k->io[0].name - 1);
        return kview_invalid();
    }
    if (tern_kernel_io_find(k, name)) {
        kfail(k, TERN_ERR_INVALID, "tensor '%s' declared twice", name);
        return kview_invalid();
    }
    uint64_t elems = 1;
    int64_t stride = 1;
    for (unsigned d = 0; d < ndims; d++) {
        if (shape[d] == 0 || shape[d] > UINT32_MAX) {
            kfail(k, TERN_ERR_RANGE, "tensor '%s': dimension %u size %llu outside 1..%u", name, d,
                  (unsigned long long)shape[d], UINT32_MAX);
            return kview_invalid();
        }
        elems *= shape[d];
    }
    uint64_t bytes = elems * tern_dtype_size(dt);
    uint64_t addr;
    khazard hz;
    /* First fit over HBM: scratch tensors released by tern_kernel_release are reused, with their pending
     * accesses carried to the next tensor placed there (the same hazard rule as on chip). */
    k->pools[2].first_fit = 1;
    /* Constants and inputs are in HBM before the program starts: they may not share space that earlier
     * scratch tensors write during the run. */
    k->pools[2].fresh_only = kind == TERN_KIO_CONSTANT || kind == TERN_KIO_INPUT;
    uint64_t align = (kind == TERN_KIO_INPUT || kind == TERN_KIO_OUTPUT) && k->io_align && bytes >= k->io_align
                         ? k->io_align
                         : 64;
    int taken = kalloc_take(&k->pools[2], bytes, align, 0, &addr, &hz);
    k->pools[2].fresh_only = 0;
    if (taken) {
        uint64_t free_total, largest;
        kalloc_stats(&k->pools[2], &free_total, &largest);
        kfail(k, TERN_ERR_RANGE, "tensor '%s': %llu bytes do not fit in HBM (%llu of %llu bytes free, largest block %llu)",
              name, (unsigned long long)bytes, (unsigned long long)free_total, (unsigned long long)k->cfg.hbm_bytes,
              (unsigned long long)largest);
        return kview_invalid();
    }
    {
        /* The program carries its interface, so a saved program can be bound without this builder. */
        tern_program_tensor pt;
        memset(&pt, 0, sizeof pt);
        snprintf(pt.name, sizeof pt.name, "%s", name);
        pt.kind = (uint8_t)kind;
        pt.dtype = (uint8_t)dt;
        pt.ndims = (uint8_t)ndims;
        memcpy(pt.shape, shape, ndims * sizeof *shape);
        pt.hbm_addr = addr;
        tern_error e2;
        if (tern_program_add_tensor(&k->prog, &pt, &e2)) {
            kfail(k, e2.code, "%s", e2.msg);
            return kview_invalid();
        }
    }
    if (k->nio == k->cap_io) {
        size_t cap = k->cap_io ? k->cap_io * 2 : 8;
        tern_kio *io = realloc(k->io, cap * sizeof *io);
        void **dd = io ? realloc(k->io_data, cap * sizeof *dd) : NULL;
        if (io)
            k->io = io;
        if (!io || !dd) {
            kfail(k, TERN_ERR_NOMEM, "out of memory");
            return kview_invalid();
        }
        k->io_data = dd;
        k->cap_io = cap;
    }
    k->io_data[k->nio] = NULL;
    int rid = new_region(k);
    if (rid < 0)
        return kview_invalid();
    tern_kio *io = &k->io[k->nio];
    memset(io, 0, sizeof *io);
    snprintf(io->name, sizeof io->name, "%s", name);
    io->kind = kind;
    io->dtype = dt;
    io->ndims = ndims;
    memcpy(io->shape, shape, ndims * sizeof *shape);
    io->hbm_addr = addr;
    io->bytes = bytes;
    if (addr + bytes > k->hbm_next)
        k->hbm_next = addr + bytes;

    kregion *r = &k->regions[rid];
    r->live = 1;
    r->mem = TERN_MEM_HBM;
    r->dtype = dt;
    r->offset = io->hbm_addr;
    r->bytes = bytes;
    r->kio = (int)k->nio;
    r->partitions = 1;
    r->hz = hz;
    snprintf(r->name, sizeof r->name, "%s", name);
    k->nio++;

    tern_view v;
    memset(&v, 0, sizeof v);
    v.region = rid;
    v.ap.mem = TERN_MEM_HBM;
    v.ap.dtype = (uint8_t)dt;
    v.ap.offset_reg = TERN_REG_NONE;
    v.ap.start_partition = 0;
    v.ap.num_partitions = 1;
    v.ap.partition_step = 0;
    v.ap.offset = io->hbm_addr;
    v.ap.ndims = (uint8_t)ndims;
    for (int d = (int)ndims - 1; d >= 0; d--) {
        if (stride > INT32_MAX) {
            kfail(k, TERN_ERR_RANGE, "tensor '%s': stride of dimension %d (%lld elements) exceeds the 32-bit access "
                  "pattern step", name, d, (long long)stride);
            return kview_invalid();
        }
        v.ap.dims[d].num = (uint32_t)shape[d];
        v.ap.dims[d].step = (int32_t)stride;
        stride *= (int64_t)shape[d];
    }
    return v;
}

tern_view tern_kernel_constant(tern_kernel *k, const char *name, tern_dtype dt, unsigned ndims, const uint64_t *shape,
                               const void *data)
{
    tern_view v = tern_kernel_hbm_tensor(k, name, TERN_KIO_CONSTANT, dt, ndims, shape);
    if (v.region < 0)
        return v;
    tern_kio *io = &k->io[k->nio - 1];
    void *copy = malloc(io->bytes ? io->bytes : 1);
    if (!copy) {
        kfail(k, TERN_ERR_NOMEM, "constant '%s': out of memory for %llu bytes", name, (unsigned long long)io->bytes);
        return kview_invalid();
    }
    memcpy(copy, data, io->bytes);
    k->io_data[k->nio - 1] = copy;
    return v;
}

tern_view tern_kernel_constant_take(tern_kernel *k, const char *name, tern_dtype dt, unsigned ndims,
                                    const uint64_t *shape, void *data)
{
    tern_view v = tern_kernel_hbm_tensor(k, name, TERN_KIO_CONSTANT, dt, ndims, shape);
    if (v.region < 0) {
        free(data);
        return v;
    }
    k->io_data[k->nio - 1] = data;
    return v;
}

void *tern_kernel_constant_steal(tern_kernel *k, size_t i)
{
    if (i >= k->nio || !k->io_data || k->io[i].kind != TERN_KIO_CONSTANT)
        return NULL;
    void *d = k->io_data[i];
    k->io_data[i] = NULL;
    return d;
}

const void *tern_kernel_constant_data(const tern_kernel *k, const char *name)
{
    for (size_t i = 0; i < k->nio; i++)
        if (!strcmp(k->io[i].name, name))
            return k->io_data ? k->io_data[i] : NULL;
    return NULL;
}

tern_view tern_kernel_input2d(tern_kernel *k, const char *name, tern_dtype dt, uint64_t rows, uint64_t cols)
{
    uint64_t shape[2] = {rows, cols};
    return tern_kernel_hbm_tensor(k, name, TERN_KIO_INPUT, dt, 2, shape);
}

tern_view tern_kernel_output2d(tern_kernel *k, const char *name, tern_dtype dt, uint64_t rows, uint64_t cols)
{
    uint64_t shape[2] = {rows, cols};
    return tern_kernel_hbm_tensor(k, name, TERN_KIO_OUTPUT, dt, 2, shape);
}

/* ---- tiles ---- */

tern_view tern_kernel_tile(tern_kernel *k, tern_mem mem, tern_dtype dt, uint32_t partitions, unsigned nfree,
                           const uint32_t *free_shape, const char *name)
{
    if (k->failed || sealed(k, "tile"))
        return kview_invalid();
    name = name ? name : "tile";
    if (mem != TERN_MEM_SBUF && mem != TERN_MEM_PSUM) {
        kfail(k, TERN_ERR_INVALID, "tile '%s': memory %s is not SBUF or PSUM", name, tern_mem_name(mem));
        return kview_invalid();
    }
    if (dt >= TERN_DTYPE_COUNT) {
        kfail(k, TERN_ERR_INVALID, "tile '%s': unknown dtype %d", name, (int)dt);
        return kview_invalid();
    }
    if (partitions == 0 || partitions > k->cfg.partitions) {
        kfail(k, TERN_ERR_RANGE, "tile '%s': partition dimension %u outside 1..%u", name, partitions,
              k->cfg.partitions);
        return kview_invalid();
    }
    if (nfree == 0 || nfree > TERN_AP_MAX_DIMS) {
        kfail(k, TERN_ERR_INVALID, "tile '%s': %u free dimensions, must be 1..%d", name, nfree, TERN_AP_MAX_DIMS);
        return kview_invalid();
    }
    uint64_t elems = 1;
    for (unsigned d = 0; d < nfree; d++) {
        if (free_shape[d] == 0) {
            kfail(k, TERN_ERR_RANGE, "tile '%s': free dimension %u has size 0", name, d);
            return kview_invalid();
        }
        elems *= free_shape[d];
    }
    size_t es = tern_dtype_size(dt);
    uint64_t bytes = elems * es;
    kalloc *pool = &k->pools[mem == TERN_MEM_PSUM];
    uint64_t bank = mem == TERN_MEM_PSUM ? k->cfg.psum_bank_bytes : 0;
    uint64_t offset;
    khazard hz;
    if (kalloc_take(pool, bytes, mem == TERN_MEM_PSUM ? 4 : 32, bank, &offset, &hz)) {
        uint64_t free_total, largest;
        kalloc_stats(pool, &free_total, &largest);
        kfail(k, TERN_ERR_RANGE,
              "tile '%s': %s allocation of %llu bytes per partition fails: %llu of %llu bytes free, largest free "
              "block %llu",
              name, tern_mem_name(mem), (unsigned long long)bytes, (unsigned long long)free_total,
              (unsigned long long)pool->capacity, (unsigned long long)largest);
        return kview_invalid();
    }
    uint64_t used = pool->capacity - kalloc_free_bytes(pool);
    if (mem == TERN_MEM_SBUF && used > k->sbuf_peak)
        k->sbuf_peak = used;
    int rid = new_region(k);
    if (rid < 0)
        return kview_invalid();
    kregion *r = &k->regions[rid];
    r->live = 1;
    r->mem = mem;
    r->dtype = dt;
    r->offset = offset;
    r->bytes = bytes;
    r->kio = -1;
    r->partitions = partitions;
    r->hz = hz;
    snprintf(r->name, sizeof r->name, "%s", name);

    tern_view v;
    memset(&v, 0, sizeof v);
    v.region = rid;
    v.ap.mem = (uint8_t)mem;
    v.ap.dtype = (uint8_t)dt;
    v.ap.offset_reg = TERN_REG_NONE;
    v.ap.start_partition = 0;
    v.ap.num_partitions = (uint16_t)partitions;
    v.ap.offset = offset;
    v.ap.ndims = (uint8_t)nfree;
    int64_t stride = 1;
    for (int d = (int)nfree - 1; d >= 0; d--) {
        v.ap.dims[d].num = free_shape[d];
        v.ap.dims[d].step = (int32_t)stride;
        stride *= free_shape[d];
    }
    return v;
}

tern_view tern_kernel_sbuf(tern_kernel *k, tern_dtype dt, uint32_t partitions, uint32_t free, const char *name)
{
    return tern_kernel_tile(k, TERN_MEM_SBUF, dt, partitions, 1, &free, name);
}

tern_view tern_kernel_psum(tern_kernel *k, tern_dtype dt, uint32_t partitions, uint32_t free, const char *name)
{
    return tern_kernel_tile(k, TERN_MEM_PSUM, dt, partitions, 1, &free, name);
}

void tern_kernel_release(tern_kernel *k, tern_view tile)
{
    if (!kview_ok(k, &tile, "release"))
        return;
    kregion *r = &k->regions[tile.region];
    if (r->mem == TERN_MEM_HBM) {
        if (k->io[r->kio].kind != TERN_KIO_SCRATCH) {
            kfail(k, TERN_ERR_INVALID, "release: '%s' is an interface tensor (input, output or constant); only "
                  "scratch tensors and tiles can be released", r->name);
            return;
        }
        khazard all;
        kregion_summary(r, &all);
        kalloc_give(&k->pools[2], r->offset, r->bytes, &all);
        kregion_clear(r);
        r->live = 0;
        return;
    }
    khazard all;
    kregion_summary(r, &all);
    kalloc_give(&k->pools[r->mem == TERN_MEM_PSUM], r->offset, r->bytes, &all);
    kregion_clear(r);
    r->live = 0;
}

/* ---- views ---- */

unsigned tern_view_rank(const tern_view *v)
{
    if (v->region < 0)
        return 0;
    return v->ap.mem == TERN_MEM_HBM ? v->ap.ndims : 1u + v->ap.ndims;
}

uint64_t tern_view_dim(const tern_view *v, unsigned dim)
{
    if (v->region < 0 || dim >= tern_view_rank(v))
        return 0;
    if (v->ap.mem == TERN_MEM_HBM)
        return v->ap.dims[dim].num;
    return dim == 0 ? v->ap.num_partitions : v->ap.dims[dim - 1].num;
}

tern_view tern_view_slice(tern_kernel *k, tern_view v, unsigned dim, uint64_t start, uint64_t stop, int64_t step)
{
    if (!kview_ok(k, &v, "slice"))
        return kview_invalid();
    const char *name = k->regions[v.region].name;
    unsigned rank = tern_view_rank(&v);
    if (dim >= rank) {
        kfail(k, TERN_ERR_INVALID, "slice of '%s': dimension %u outside rank %u", name, dim, rank);
        return kview_invalid();
    }
    uint64_t size = tern_view_dim(&v, dim);
    if (step <= 0 || start >= stop || stop > size) {
        kfail(k, TERN_ERR_RANGE, "slice of '%s': [%llu:%llu:%lld] of dimension %u (size %llu) is empty or out of range",
              name, (unsigned long long)start, (unsigned long long)stop, (long long)step, dim,
              (unsigned long long)size);
        return kview_invalid();
    }
    uint64_t n = (stop - start + (uint64_t)step - 1) / (uint64_t)step;
    size_t es = tern_dtype_size((tern_dtype)v.ap.dtype);
    if (v.ap.mem != TERN_MEM_HBM && dim == 0) {
        if (step != 1) {
            kfail(k, TERN_ERR_INVALID, "slice of '%s': partitions cannot be strided (step %lld)", name, (long long)step);
            return kview_invalid();
        }
        v.ap.start_partition = (uint16_t)(v.ap.start_partition + start);
        v.ap.num_partitions = (uint16_t)n;
        return v;
    }
    unsigned d = v.ap.mem == TERN_MEM_HBM ? dim : dim - 1;
    int64_t new_step = (int64_t)v.ap.dims[d].step * step;
    if (new_step > INT32_MAX || new_step < INT32_MIN) {
        kfail(k, TERN_ERR_RANGE, "slice of '%s': step %lld elements exceeds the 32-bit access-pattern step", name,
              (long long)new_step);
        return kview_invalid();
    }
    v.ap.offset = (uint64_t)((int64_t)v.ap.offset + (int64_t)start * v.ap.dims[d].step * (int64_t)es);
    v.ap.dims[d].num = (uint32_t)n;
    v.ap.dims[d].step = (int32_t)new_step;
    return v;
}

tern_view tern_view_block(tern_kernel *k, tern_view v, uint64_t r0, uint64_t r1, uint64_t c0, uint64_t c1)
{
    if (!kview_ok(k, &v, "block"))
        return kview_invalid();
    if (tern_view_rank(&v) != 2) {
        kfail(k, TERN_ERR_INVALID, "block of '%s': needs a 2-D view, got rank %u", k->regions[v.region].name,
              tern_view_rank(&v));
        return kview_invalid();
    }
    v = tern_view_slice(k, v, 0, r0, r1, 1);
    return tern_view_slice(k, v, 1, c0, c1, 1);
}

tern_view tern_view_bitcast(tern_kernel *k, tern_view v, tern_dtype dt)
{
    if (!kview_ok(k, &v, "bitcast"))
        return kview_invalid();
    if (dt >= TERN_DTYPE_COUNT || tern_dtype_size(dt) != tern_dtype_size((tern_dtype)v.ap.dtype)) {
        kfail(k, TERN_ERR_INVALID, "bitcast of '%s': %s and %s differ in size", k->regions[v.region].name,
              tern_dtype_name((tern_dtype)v.ap.dtype), dt < TERN_DTYPE_COUNT ? tern_dtype_name(dt) : "?");
        return kview_invalid();
    }
    v.ap.dtype = (uint8_t)dt;
    return v;
}

/* ---- emission ---- */

void tern_kernel_emit(tern_kernel *k, const tern_instr *ins_in, const tern_view *reads, unsigned nreads,
                      const tern_view *writes, unsigned nwrites)
{
    if (k->failed || sealed(k, tern_opcode_get((tern_opcode)ins_in->opcode) ? tern_opcode_get((tern_opcode)ins_in->opcode)->name : "instruction"))
        return;
    for (unsigned i = 0; i < nreads; i++)
        if (!kview_ok(k, &reads[i], tern_opcode_get((tern_opcode)ins_in->opcode)->name))
            return;
    for (unsigned i = 0; i < nwrites; i++)
        if (!kview_ok(k, &writes[i], tern_opcode_get((tern_opcode)ins_in->opcode)->name))
            return;
    tern_instr ins = *ins_in;
    tern_engine e = (tern_engine)ins.engine;
    int is_dma = ins.opcode == TERN_OP_DMA_COPY || ins.opcode == TERN_OP_DMA_GATHER || ins.opcode == TERN_OP_DMA_SCATTER;
    /* collectives (lib_collective.c) count on one more counter after the DMA queues, added on first use */
    int is_coll = ins.opcode == TERN_OP_COLLECTIVE;
    unsigned src = is_dma ? (unsigned)TERN_ENGINE_COUNT + ins.queue
                 : is_coll ? (unsigned)TERN_ENGINE_COUNT + k->cfg.dma_queues : (unsigned)e;
    if (is_coll) {
        if (src >= KMAX_COUNTERS || src >= k->cfg.num_semaphores) {
            kfail(k, TERN_ERR_INVALID, "collective: its completion counter needs semaphore %u; the core has %u", src,
                  k->cfg.num_semaphores);
            return;
        }
        if (k->coll_feeder && k->coll_feeder != (uint8_t)(e + 1)) {
            kfail(k, TERN_ERR_INVALID,
                  "collective issued by the %s engine, but the %s engine already issues this kernel's collectives: "
                  "they complete in issue order and are counted on one semaphore, so one engine issues them all",
                  tern_engine_name(e), tern_engine_name((tern_engine)(k->coll_feeder - 1)));
            return;
        }
        k->coll_feeder = (uint8_t)(e + 1);
        if (k->ncounters <= src)
            k->ncounters = src + 1;
    }
    ins.wait_sem = TERN_SEM_NONE;
    ins.signal_sem = (uint8_t)src;

    /* A queue's semaphore counts its completions, which the waits below read as "the first n DMAs issued on
     * the queue are done": true only if one in-order engine feeds the queue. */
    if (is_dma && ins.queue < KMAX_COUNTERS) {
        uint8_t *f = &k->queue_feeder[ins.queue];
        if (*f && *f != (uint8_t)(e + 1)) {
            kfail(k, TERN_ERR_INVALID,
                  "%s on DMA queue %u issued by the %s engine, but the %s engine already issues on that queue: "
                  "each queue must be fed by one engine (its completions are counted in issue order); use another "
                  "queue",
                  tern_opcode_get((tern_opcode)ins.opcode)->name, ins.queue, tern_engine_name(e),
                  tern_engine_name((tern_engine)(*f - 1)));
            return;
        }
        *f = (uint8_t)(e + 1);
    }
    /* Static rules first, so the error names this instruction. */
    tern_error err;
    size_t pc = k->prog.streams[e].count;
    if (tern_instr_check(&k->cfg, pc, SIZE_MAX, &ins, &err)) {
        k->failed = 1;
        tern_error_set(&k->err, err.code, "kernel %s: %s", k->name, err.msg);
        return;
    }

    /* Hazards by byte range (hazard.c): only accesses that touch the same bytes wait for each other. */
    uint32_t need[KMAX_COUNTERS] = {0};
    for (unsigned i = 0; i < nreads; i++)
        kregion_waits(&k->regions[reads[i].region], &reads[i].ap, 0, src, k->ncounters, need);
    for (unsigned i = 0; i < nwrites; i++)
        kregion_waits(&k->regions[writes[i].region], &writes[i].ap, 1, src, k->ncounters, need);
    /* All but the last needed wait become sem_wait instructions before it on the issuing engine. */
    int pending = -1;
    for (unsigned j = 0; j < k->ncounters; j++) {
        if (need[j] <= k->known[e][j])
            continue;
        if (pending >= 0) {
            tern_instr w;
            memset(&w, 0, sizeof w);
            w.opcode = TERN_OP_SEM_WAIT;
            w.engine = (uint8_t)e;
            w.wait_sem = (uint8_t)pending;
            w.wait_value = need[pending];
            w.signal_sem = TERN_SEM_NONE;
            for (int s = 0; s < TERN_INSTR_OPERANDS; s++)
                w.ap[s].offset_reg = TERN_REG_NONE;
            if (tern_program_append(&k->prog, &w, &k->err)) {
                k->failed = 1;
                return;
            }
            k->known[e][pending] = need[pending];
        }
        pending = (int)j;
    }
    if (pending >= 0) {
        ins.wait_sem = (uint8_t)pending;
        ins.wait_value = need[pending];
        k->known[e][pending] = need[pending];
    }
    uint32_t mine = ++k->counts[src];
    if (tern_program_append(&k->prog, &ins, &k->err)) {
        k->failed = 1;
        return;
    }
    for (unsigned i = 0; i < nreads + nwrites; i++) {
        const tern_view *v = i < nreads ? &reads[i] : &writes[i - nreads];
        if (kregion_record(&k->regions[v->region], &v->ap, i >= nreads, src, mine)) {
            kfail(k, TERN_ERR_NOMEM, "out of memory for the hazards of '%s'", k->regions[v->region].name);
            return;
        }
    }
}

/* ---- results ---- */

const tern_program *tern_kernel_program(const tern_kernel *k) { return &k->prog; }
size_t tern_kernel_io_count(const tern_kernel *k) { return k->nio; }
const tern_kio *tern_kernel_io(const tern_kernel *k, size_t i) { return i < k->nio ? &k->io[i] : NULL; }
uint64_t tern_kernel_hbm_bytes(const tern_kernel *k) { return k->hbm_next; }
uint64_t tern_kernel_sbuf_peak(const tern_kernel *k) { return k->sbuf_peak; }

const tern_kio *tern_kernel_io_find(const tern_kernel *k, const char *name)
{
    for (size_t i = 0; i < k->nio; i++)
        if (!strcmp(k->io[i].name, name))
            return &k->io[i];
    return NULL;
}

/* ---- running ---- */

static tern_status find_io(const tern_kernel *k, const char *name, const tern_kio **io, tern_error *err)
{
    *io = tern_kernel_io_find(k, name);
    if (!*io) {
        char names[512] = "";
        for (size_t i = 0; i < k->nio; i++) {
            size_t l = strlen(names);
            snprintf(names + l, sizeof names - l, "%s%s", i ? ", " : "", k->io[i].name);
        }
        return tern_error_set(err, TERN_ERR_NOT_FOUND, "kernel %s: no tensor named '%s' (tensors: %s)", k->name, name,
                              names);
    }
    return TERN_OK;
}

tern_status tern_kernel_write(const tern_kernel *k, tern_core *core, const char *name, const void *data, size_t bytes,
                              tern_error *err)
{
    const tern_kio *io;
    tern_status st = find_io(k, name, &io, err);
    if (st)
        return st;
    if (bytes != io->bytes)
        return tern_error_set(err, TERN_ERR_INVALID, "kernel %s: tensor '%s' holds %llu bytes, %zu given", k->name,
                              name, (unsigned long long)io->bytes, bytes);
    return tern_core_hbm_write(core, io->hbm_addr, data, bytes, err);
}

tern_status tern_kernel_read(const tern_kernel *k, tern_core *core, const char *name, void *data, size_t bytes,
                             tern_error *err)
{
    const tern_kio *io;
    tern_status st = find_io(k, name, &io, err);
    if (st)
        return st;
    if (bytes != io->bytes)
        return tern_error_set(err, TERN_ERR_INVALID, "kernel %s: tensor '%s' holds %llu bytes, %zu requested", k->name,
                              name, (unsigned long long)io->bytes, bytes);
    return tern_core_hbm_read(core, io->hbm_addr, data, bytes, err);
}

tern_status tern_kernel_write_f32(const tern_kernel *k, tern_core *core, const char *name, const float *data,
                                  size_t count, tern_error *err)
{
    const tern_kio *io;
    tern_status st = find_io(k, name, &io, err);
    if (st)
        return st;
    size_t es = tern_dtype_size(io->dtype);
    if ((uint64_t)count * es != io->bytes)
        return tern_error_set(err, TERN_ERR_INVALID, "kernel %s: tensor '%s' has %llu elements, %zu given", k->name,
                              name, (unsigned long long)(io->bytes / es), count);
    void *buf = malloc(io->bytes ? io->bytes : 1);
    if (!buf)
        return tern_error_set(err, TERN_ERR_NOMEM, "kernel %s: out of memory", k->name);
    st = tern_convert_from_f32(io->dtype, buf, data, count, NULL, err);
    if (!st)
        st = tern_core_hbm_write(core, io->hbm_addr, buf, io->bytes, err);
    free(buf);
    return st;
}

tern_status tern_kernel_read_f32(const tern_kernel *k, tern_core *core, const char *name, float *data, size_t count,
                                 tern_error *err)
{
    const tern_kio *io;
    tern_status st = find_io(k, name, &io, err);
    if (st)
        return st;
    size_t es = tern_dtype_size(io->dtype);
    if ((uint64_t)count * es != io->bytes)
        return tern_error_set(err, TERN_ERR_INVALID, "kernel %s: tensor '%s' has %llu elements, %zu requested",
                              k->name, name, (unsigned long long)(io->bytes / es), count);
    void *buf = malloc(io->bytes ? io->bytes : 1);
    if (!buf)
        return tern_error_set(err, TERN_ERR_NOMEM, "kernel %s: out of memory", k->name);
    st = tern_core_hbm_read(core, io->hbm_addr, buf, io->bytes, err);
    if (!st)
        st = tern_convert_to_f32(data, io->dtype, buf, count, err);
    free(buf);
    return st;
}

tern_status tern_kernel_run(const tern_kernel *k, tern_core *core, tern_run_stats *stats, tern_error *err)
{
    tern_status st = tern_kernel_status(k, err);
    if (st)
        return st;
    for (size_t i = 0; i < k->nio; i++) /* constants (weights) are placed before every run */
        if (k->io_data && k->io_data[i] &&
            (st = tern_core_hbm_write(core, k->io[i].hbm_addr, k->io_data[i], k->io[i].bytes, err)))
            return st;
    /* The builder counts every semaphore from 0: a core that ran another program (or this one) before would
     * let this run's waits pass early. */
    tern_core_reset_control(core);
    return tern_core_run(core, &k->prog, stats, err);
}

/* ---- programs on disk ---- */

tern_status tern_kernel_save(const tern_kernel *k, const char *path, tern_error *err)
{
    tern_status st = tern_kernel_status(k, err);
    if (st)
        return st;
    return tern_program_save_file(&k->prog, path, err);
}

tern_status tern_kernel_from_program(const tern_core_config *cfg, const tern_program *prog, tern_kernel **out,
                                     tern_error *err)
{
    *out = NULL;
    tern_kernel *k = NULL;
    tern_status st = tern_kernel_create(cfg, prog->machine[0] ? prog->machine : "program", &k, err);
    if (st)
        return st;
    tern_program_free(&k->prog);
    if ((st = tern_program_copy(&k->prog, prog, err))) {
        tern_program_init(&k->prog);
        tern_kernel_free(k);
        return st;
    }
    for (size_t t = 0; t < prog->num_tensors; t++) {
        const tern_program_tensor *pt = &prog->tensors[t];
        if (k->nio == k->cap_io) {
            size_t cap = k->cap_io ? k->cap_io * 2 : 8;
            tern_kio *io = realloc(k->io, cap * sizeof *io);
            void **dd = io ? realloc(k->io_data, cap * sizeof *dd) : NULL;
            if (io)
                k->io = io;
            if (!io || !dd) {
                tern_kernel_free(k);
                return tern_error_set(err, TERN_ERR_NOMEM, "kernel from program: out of memory");
            }
            k->io_data = dd;
            k->cap_io = cap;
        }
        k->io_data[k->nio] = NULL;
        tern_kio *io = &k->io[k->nio++];
        memset(io, 0, sizeof *io);
        snprintf(io->name, sizeof io->name, "%s", pt->name);
        io->kind = (tern_kio_kind)pt->kind;
        io->dtype = (tern_dtype)pt->dtype;
        io->ndims = pt->ndims;
        memcpy(io->shape, pt->shape, sizeof pt->shape);
        io->hbm_addr = pt->hbm_addr;
        io->bytes = tern_program_tensor_bytes(pt);
        if (io->hbm_addr > cfg->hbm_bytes || io->bytes > cfg->hbm_bytes - io->hbm_addr) {
            tern_error_set(err, TERN_ERR_RANGE,
                           "kernel from program: tensor '%s' at 0x%llx (%llu bytes) does not fit the %llu bytes of HBM "
                           "of %s",
                           pt->name, (unsigned long long)pt->hbm_addr, (unsigned long long)io->bytes,
                           (unsigned long long)cfg->hbm_bytes, cfg->name);
            tern_kernel_free(k);
            return TERN_ERR_RANGE;
        }
        if (io->hbm_addr + io->bytes > k->hbm_next)
            k->hbm_next = io->hbm_addr + io->bytes;
    }
    k->sealed = 1;
    *out = k;
    return TERN_OK;
}

tern_status tern_kernel_open(const tern_core_config *cfg, const char *path, tern_kernel **out, tern_error *err)
{
    *out = NULL;
    tern_program p;
    tern_status st = tern_program_load_file(path, &p, err);
    if (st)
        return st;
    st = tern_kernel_from_program(cfg, &p, out, err);
    tern_program_free(&p);
    return st;
}
