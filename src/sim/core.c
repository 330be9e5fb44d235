/* The NeuronCore's state and its memories: creation from a config, SBUF/PSUM arrays, lazily backed HBM in
 * 1 MiB pages, host access for inputs and outputs, and the access-pattern machinery every executor uses
 * (bounds, gather to dense fp32/int32, scatter with rounding). Layouts are known only here. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif
#include <sys/mman.h>

#include "sim/core_internal.h"
#include "sim/exec_lane.h"
#include "sim/host_threads.h"
#include "sim/matmul.h"

static const char *const operand_names[TERN_INSTR_OPERANDS] = {"dst", "in0", "in1", "in2", "extra"};
const char *operand_name(int slot) { return slot >= 0 && slot < TERN_INSTR_OPERANDS ? operand_names[slot] : "?"; }

void instr_label(const exec_ctx *cx, const tern_instr *ins, char *buf, size_t len)
{
    const tern_opcode_info *info = tern_opcode_get((tern_opcode)ins->opcode);
    snprintf(buf, len, "%s #%zu (%s)", tern_engine_name(cx->engine), cx->pc, info ? info->name : "?");
}

static uint8_t fill_byte(const tern_core_options *o) { return o->fill_nan ? 0xFF : 0x00; }

/* SBUF in 2 MiB transparent huge pages where the kernel allows them (madvise mode): an operand's rows lie a
 * partition apart, each on a 4 KiB page of its own, so a matmul's 128 rows missed the TLB on every row (a nested
 * page walk under a hypervisor), a third of what packing the operands cost (perf, 2048^3 GEMM). 24 MiB is 12 huge pages. Only
 * SBUF: the HBM pages' first touch (gigabytes) cost more in huge pages on a VM than their TLB misses saved
 * (docs/performance.md). */
#define SBUF_HUGE_BYTES ((size_t)2 << 20)
static void *sbuf_alloc(size_t bytes)
{
#if defined(MADV_HUGEPAGE)
    if (bytes >= SBUF_HUGE_BYTES) {
        size_t rounded = (bytes + SBUF_HUGE_BYTES - 1) & ~(SBUF_HUGE_BYTES - 1);
        void *p = aligned_alloc(SBUF_HUGE_BYTES, rounded);
        if (p) {
            (void)madvise(p, rounded, MADV_HUGEPAGE); /* advice only: small pages if refused */
            return p;
        }
    }
#endif
    return malloc(bytes);
}

/* Host bytes from one partition's row to the next, in SBUF and in PSUM: the partition's bytes rounded up to a cache
 * line, then 17 lines more. An instruction touches the same columns of up to 128 partitions. At a pitch that is a
 * multiple of 4 KiB (SBUF's 176 KiB on NeuronCore-v2, PSUM's 16 KiB) every row's columns fell in the same L1 sets
 * (48 KiB, 12 ways: sets repeat every 4 KiB), and in SBUF's huge pages, whose physical addresses follow the virtual
 * ones, in 8 positions of L2's sets (2 MiB, 16 ways: every 128 KiB), so a [128, 512] fp32 tile could stay in neither
 * cache. 17 lines, odd, walk successive rows through all 64 L1 sets, and 1,088 bytes spread them over L2's.
 * Measured on session 19's Xeon (docs/performance.md): a [128, 512] fp32 PSUM tile copied to SBUF in cache 12.0 ->
 * 6.0 us; the models 2-5 % faster. The pad is host memory only: no address, bound, result or time changes. */
#define ROW_PAD_BYTES 1088u
static size_t onchip_host_pitch(uint64_t bytes) { return (size_t)((bytes + 63) & ~(uint64_t)63) + ROW_PAD_BYTES; }

tern_status tern_core_create(const tern_core_config *cfg, const tern_core_options *opts, tern_core **out,
                             tern_error *err)
{
    *out = NULL;
    if (cfg->partitions == 0 || cfg->partitions > 1024)
        return tern_error_set(err, TERN_ERR_INVALID, "core %s: partitions %u outside [1, 1024]", cfg->name,
                              cfg->partitions);
    if (cfg->sbuf_partition_bytes == 0 || cfg->sbuf_partition_bytes > (1ull << 24))
        return tern_error_set(err, TERN_ERR_INVALID, "core %s: SBUF bytes per partition %llu outside [1, 16 MiB]",
                              cfg->name, (unsigned long long)cfg->sbuf_partition_bytes);
    if (cfg->psum_banks == 0 || cfg->psum_bank_bytes == 0 || cfg->psum_banks * (uint64_t)cfg->psum_bank_bytes > (1u << 20))
        return tern_error_set(err, TERN_ERR_INVALID, "core %s: PSUM %u banks x %u bytes is not a valid geometry",
                              cfg->name, cfg->psum_banks, cfg->psum_bank_bytes);
    if (cfg->num_semaphores == 0 || cfg->num_semaphores > 255 || cfg->num_registers == 0 || cfg->num_registers > 255)
        return tern_error_set(err, TERN_ERR_INVALID, "core %s: %u semaphores / %u registers outside [1, 255]",
                              cfg->name, cfg->num_semaphores, cfg->num_registers);
    if (cfg->pe_rows == 0 || cfg->pe_cols == 0 || cfg->pe_rows > cfg->partitions)
        return tern_error_set(err, TERN_ERR_INVALID, "core %s: PE array %ux%u invalid for %u partitions", cfg->name,
                              cfg->pe_rows, cfg->pe_cols, cfg->partitions);
    tern_core *c = calloc(1, sizeof *c);
    if (!c)
        return tern_error_set(err, TERN_ERR_NOMEM, "core %s: out of memory", cfg->name);
    c->cfg = *cfg;
    if (opts)
        c->opts = *opts;
    if (!c->opts.max_instructions)
        c->opts.max_instructions = 1000000000ull;
    if (c->opts.matmul_path == TERN_MATMUL_AUTO) {
        tern_status st = matmul_choose_kernel(&c->mm_dp, err);
        if (st) {
            free(c);
            return st;
        }
    }
    c->sbuf_pitch = onchip_host_pitch(cfg->sbuf_partition_bytes);
    size_t sbuf_bytes = (size_t)cfg->partitions * c->sbuf_pitch;
    c->psum_pitch = onchip_host_pitch((uint64_t)cfg->psum_banks * cfg->psum_bank_bytes);
    size_t psum_bytes = (size_t)cfg->partitions * c->psum_pitch;
    c->sbuf = sbuf_alloc(sbuf_bytes);
    /* PSUM on a page boundary: TensorE's fp32 rows are read and written 64 bytes at a time, and malloc's 16-byte
     * alignment put them across two cache lines whenever the heap handed out an address 16, 32 or 48 bytes into
     * a line, which depended on what the process had allocated before (GPT-2 124M executed 7 % slower then). */
    c->psum = aligned_alloc(4096, (psum_bytes + 4095) & ~(size_t)4095);
    c->psum_bank_state = calloc((size_t)cfg->partitions * cfg->psum_banks, 1);
    c->psum_lazy = calloc(cfg->psum_banks, sizeof *c->psum_lazy);
    c->psum_lazy_rows = malloc((size_t)cfg->psum_banks * cfg->psum_bank_bytes);
    c->hbm_page_count = (cfg->hbm_bytes + HBM_PAGE_BYTES - 1) >> HBM_PAGE_SHIFT;
    c->hbm_pages = calloc(c->hbm_page_count ? c->hbm_page_count : 1, sizeof *c->hbm_pages);
    c->semaphores = calloc(cfg->num_semaphores, sizeof *c->semaphores);
    c->registers = calloc((size_t)TERN_ENGINE_COUNT * cfg->num_registers, sizeof *c->registers);
    c->stationary = malloc((size_t)cfg->pe_rows * cfg->pe_cols * 2 * sizeof(float));
    c->stat_pairs = c->stat_pairs_own = malloc((size_t)(cfg->pe_rows + 1) / 2 * cfg->pe_cols * 2 * sizeof(uint32_t));
    /* panels of the largest stationary: 2 * pe_rows contraction rows (double-row fp8) */
    c->stat_panels = c->stat_panels_own = malloc(matmul_panel_floats(2 * cfg->pe_rows, cfg->pe_cols) * sizeof(float));
    if (!c->sbuf || !c->psum || !c->psum_bank_state || !c->psum_lazy || !c->psum_lazy_rows || !c->hbm_pages ||
        !c->semaphores || !c->registers || !c->stationary || !c->stat_pairs || !c->stat_panels) {
        tern_core_free(c);
        return tern_error_set(err, TERN_ERR_NOMEM, "core %s: cannot allocate %zu bytes of SBUF and PSUM", cfg->name,
                              sbuf_bytes + psum_bytes);
    }
    memset(c->sbuf, fill_byte(&c->opts), sbuf_bytes);
    memset(c->psum, fill_byte(&c->opts), psum_bytes);
    *out = c;
    return TERN_OK;
}

void tern_core_free(tern_core *core)
{
    if (!core)
        return;
    if (core->hbm_pages)
        for (uint64_t i = 0; i < core->hbm_page_count; i++)
            free(core->hbm_pages[i]);
    free(core->hbm_pages);
    free(core->sbuf);
    free(core->psum);
    free(core->psum_bank_state);
    free(core->psum_lazy);
    free(core->psum_lazy_rows);
    free(core->semaphores);
    free(core->registers);
    free(core->stationary);
    free(core->stat_pairs_own);
    free(core->stat_panels_own);
    for (int i = 0; i < STAT_CACHE_ENTRIES; i++)
        free(core->stat_cache[i].pairs);
    free(core->mov_pairs);
    free(core->u16_scratch);
    for (int i = 0; i < MOV_CACHE_ENTRIES; i++)
        free(core->mov_cache[i].pairs);
    pool_free(core->pool); /* its workers are joined: none runs lane work any more */
    exec_lane_free(core->lane);
    for (unsigned l = 0; l <= core->n_scratch_workers; l++) {
        core_scratch_set *z = l ? &core->scratch_workers[l - 1] : &core->scratch_main;
        free(z->row_refs);
        free(z->row_refs_src);
        for (int i = 0; i < 6; i++)
            free(z->scratch[i]);
    }
    free(core->scratch_workers);
    free(core);
}

const tern_core_config *tern_core_get_config(const tern_core *core) { return &core->cfg; }

void tern_core_set_rounding(tern_core *core, tern_round rounding, uint64_t seed)
{
    core->opts.rounding = rounding;
    core->opts.seed = seed;
}

void tern_core_reset_control(tern_core *core)
{
    memset(core->semaphores, 0, core->cfg.num_semaphores * sizeof *core->semaphores);
    memset(core->registers, 0, (size_t)TERN_ENGINE_COUNT * core->cfg.num_registers * sizeof *core->registers);
    core->stat_loaded = 0;
    core->stat_lazy = 0;
}

uint32_t tern_core_semaphore(const tern_core *core, uint32_t sem)
{
    return sem < core->cfg.num_semaphores ? core->semaphores[sem] : 0;
}

int32_t tern_core_register(const tern_core *core, tern_engine e, uint32_t reg)
{
    if ((unsigned)e >= TERN_ENGINE_COUNT || reg >= core->cfg.num_registers)
        return 0;
    return core->registers[(size_t)e * core->cfg.num_registers + reg];
}

static _Thread_local int on_lane;

int core_on_lane(void) { return on_lane; }
int core_may_split(void) { return !(on_lane && pool_thread_id() == 0); }
void core_set_lane(int on) { on_lane = on; }
core_scratch_set *core_lane_scratch(tern_core *core)
{
    unsigned id = pool_thread_id();
    return id && id <= core->n_scratch_workers ? &core->scratch_workers[id - 1] : &core->scratch_main;
}

float *core_scratch(tern_core *core, int slot, size_t n)
{
    TERN_ASSERT(slot >= 0 && slot < 6);
    core_scratch_set *z = core_lane_scratch(core);
    if (n == 0)
        n = 1;
    if (z->scratch_cap[slot] < n) {
        size_t cap = z->scratch_cap[slot] ? z->scratch_cap[slot] : 1024;
        while (cap < n)
            cap *= 2;
        float *p = realloc(z->scratch[slot], cap * sizeof(float));
        if (!p)
            return NULL;
        z->scratch[slot] = p;
        z->scratch_cap[slot] = cap;
    }
    return z->scratch[slot];
}

/* ---- HBM ---- */

/* The host page under an HBM page, made (filled) on first touch. Two instructions of the background lane
 * (exec_lane.c) may touch a new page at once, at different bytes: the first to publish its page wins and the
 * other's is dropped before anything is written to it. */
static uint8_t *hbm_page(tern_core *c, uint64_t page)
{
    uint8_t *have = __atomic_load_n(&c->hbm_pages[page], __ATOMIC_ACQUIRE);
    if (have)
        return have;
    uint8_t *p = malloc(HBM_PAGE_BYTES);
    if (!p)
        return NULL;
    memset(p, fill_byte(&c->opts), HBM_PAGE_BYTES);
    if (__atomic_compare_exchange_n(&c->hbm_pages[page], &have, p, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        return p;
    free(p);
    return have;
}

/* Copy between HBM [addr, addr+bytes) and host memory; dir 0 = read from HBM, 1 = write to HBM. */
static tern_status hbm_copy(tern_core *c, uint64_t addr, void *host, size_t bytes, int write, tern_error *err)
{
    if (addr > c->cfg.hbm_bytes || bytes > c->cfg.hbm_bytes - addr)
        return tern_error_set(err, TERN_ERR_RANGE, "HBM access [0x%llx, +%zu) outside HBM of %llu bytes",
                              (unsigned long long)addr, bytes, (unsigned long long)c->cfg.hbm_bytes);
    uint8_t *h = host;
    while (bytes) {
        uint64_t page = addr >> HBM_PAGE_SHIFT, off = addr & (HBM_PAGE_BYTES - 1);
        size_t chunk = (size_t)(HBM_PAGE_BYTES - off);
        if (chunk > bytes)
            chunk = bytes;
        uint8_t *p = hbm_page(c, page);
        if (!p)
            return tern_error_set(err, TERN_ERR_NOMEM, "HBM page at 0x%llx: out of host memory",
                                  (unsigned long long)(page << HBM_PAGE_SHIFT));
        if (write)
            memcpy(p + off, h, chunk);
        else
            memcpy(h, p + off, chunk);
        h += chunk;
        addr += chunk;
        bytes -= chunk;
    }
    return TERN_OK;
}

tern_status tern_core_hbm_write(tern_core *core, uint64_t addr, const void *src, size_t bytes, tern_error *err)
{
    return hbm_copy(core, addr, (void *)src, bytes, 1, err);
}

tern_status tern_core_hbm_read(tern_core *core, uint64_t addr, void *dst, size_t bytes, tern_error *err)
{
    return hbm_copy(core, addr, dst, bytes, 0, err);
}

static tern_status hbm_span(const tern_core *c, const char *what, uint64_t addr, uint64_t bytes, tern_error *err)
{
    if (addr > c->cfg.hbm_bytes || bytes > c->cfg.hbm_bytes - addr)
        return tern_error_set(err, TERN_ERR_RANGE, "HBM %s [0x%llx, +%llu) outside HBM of %llu bytes", what,
                              (unsigned long long)addr, (unsigned long long)bytes,
                              (unsigned long long)c->cfg.hbm_bytes);
    return TERN_OK;
}

/* [dst, +bytes) = [src, +bytes) for ranges that do not overlap, page piece by page piece (no bounce buffer). */
static tern_status hbm_copy_disjoint(tern_core *c, uint64_t dst, uint64_t src, uint64_t bytes, tern_error *err)
{
    while (bytes) {
        uint64_t od = dst & (HBM_PAGE_BYTES - 1), os = src & (HBM_PAGE_BYTES - 1);
        uint64_t n = HBM_PAGE_BYTES - (od > os ? od : os);
        if (n > bytes)
            n = bytes;
        uint8_t *pd = hbm_page(c, dst >> HBM_PAGE_SHIFT), *ps = pd ? hbm_page(c, src >> HBM_PAGE_SHIFT) : NULL;
        if (!ps)
            return tern_error_set(err, TERN_ERR_NOMEM, "HBM copy at 0x%llx: out of host memory",
                                  (unsigned long long)(pd ? src : dst));
        memcpy(pd + od, ps + os, (size_t)n);
        dst += n;
        src += n;
        bytes -= n;
    }
    return TERN_OK;
}

tern_status tern_core_hbm_copy(tern_core *core, uint64_t dst, uint64_t src, uint64_t bytes, tern_error *err)
{
    tern_status st;
    if ((st = hbm_span(core, "copy destination", dst, bytes, err)) ||
        (st = hbm_span(core, "copy source", src, bytes, err)))
        return st;
    if (dst == src || !bytes)
        return TERN_OK;
    if (dst + bytes <= src || src + bytes <= dst)
        return hbm_copy_disjoint(core, dst, src, bytes, err);
    /* overlapping: through a buffer, in the order memmove takes */
    enum { CHUNK = 1u << 16 };
    uint8_t buf[CHUNK];
    for (uint64_t done = 0; done < bytes;) {
        uint64_t n = bytes - done < CHUNK ? bytes - done : CHUNK;
        uint64_t at = dst < src ? done : bytes - done - n;
        if ((st = hbm_copy(core, src + at, buf, (size_t)n, 0, err)) ||
            (st = hbm_copy(core, dst + at, buf, (size_t)n, 1, err)))
            return st;
        done += n;
    }
    return TERN_OK;
}

/* Pages whose every byte lies in both ranges change owners (a pointer swap: the bytes do not move); the pieces
 * before and after them, and ranges whose offsets within a page differ, are copied. */
tern_status tern_core_hbm_move(tern_core *core, uint64_t dst, uint64_t src, uint64_t bytes, tern_error *err)
{
    tern_status st;
    if ((st = hbm_span(core, "move destination", dst, bytes, err)) ||
        (st = hbm_span(core, "move source", src, bytes, err)))
        return st;
    if (dst == src || !bytes)
        return TERN_OK;
    if (!(dst + bytes <= src || src + bytes <= dst) || ((dst ^ src) & (HBM_PAGE_BYTES - 1)))
        return tern_core_hbm_copy(core, dst, src, bytes, err);
    uint64_t head = (HBM_PAGE_BYTES - (dst & (HBM_PAGE_BYTES - 1))) & (HBM_PAGE_BYTES - 1);
    if (head > bytes)
        head = bytes;
    uint64_t pages = (bytes - head) >> HBM_PAGE_SHIFT, whole = pages << HBM_PAGE_SHIFT;
    if ((st = hbm_copy_disjoint(core, dst, src, head, err)) ||
        (st = hbm_copy_disjoint(core, dst + head + whole, src + head + whole, bytes - head - whole, err)))
        return st;
    /* a page never touched (NULL) reads as the fill byte wherever it goes */
    uint8_t **pd = core->hbm_pages + ((dst + head) >> HBM_PAGE_SHIFT);
    uint8_t **ps = core->hbm_pages + ((src + head) >> HBM_PAGE_SHIFT);
    for (uint64_t i = 0; i < pages; i++) {
        uint8_t *t = pd[i];
        pd[i] = ps[i];
        ps[i] = t;
    }
    return TERN_OK;
}

uint64_t tern_core_hbm_page_bytes(void) { return HBM_PAGE_BYTES; }

const void *tern_core_hbm_peek(tern_core *core, uint64_t addr, uint64_t *bytes, tern_error *err)
{
    if (hbm_span(core, "read", addr, *bytes, err))
        return NULL;
    uint64_t off = addr & (HBM_PAGE_BYTES - 1);
    if (*bytes > HBM_PAGE_BYTES - off)
        *bytes = HBM_PAGE_BYTES - off;
    uint8_t *p = hbm_page(core, addr >> HBM_PAGE_SHIFT);
    if (!p) {
        tern_error_set(err, TERN_ERR_NOMEM, "HBM page at 0x%llx: out of host memory",
                       (unsigned long long)(addr & ~(HBM_PAGE_BYTES - 1)));
        return NULL;
    }
    return p + off;
}

static uint64_t onchip_partition_bytes(const tern_core *c, tern_mem mem)
{
    return mem == TERN_MEM_SBUF ? c->cfg.sbuf_partition_bytes : (uint64_t)c->cfg.psum_banks * c->cfg.psum_bank_bytes;
}

static uint8_t *onchip_base(const tern_core *c, tern_mem mem) { return mem == TERN_MEM_SBUF ? c->sbuf : c->psum; }

/* Host bytes from one partition's row to the next (onchip_host_pitch): addresses use it, bounds the partition's size. */
static uint64_t onchip_pitch(const tern_core *c, tern_mem mem)
{
    return mem == TERN_MEM_SBUF ? c->sbuf_pitch : c->psum_pitch;
}

static tern_status onchip_copy(tern_core *c, tern_mem mem, uint32_t partition, uint64_t offset, void *host,
                               size_t bytes, int write, tern_error *err)
{
    if (mem != TERN_MEM_SBUF && mem != TERN_MEM_PSUM)
        return tern_error_set(err, TERN_ERR_INVALID, "on-chip access: memory %s is not SBUF or PSUM",
                              tern_mem_name(mem));
    uint64_t pb = onchip_partition_bytes(c, mem);
    if (partition >= c->cfg.partitions)
        return tern_error_set(err, TERN_ERR_RANGE, "%s access: partition %u outside %u partitions",
                              tern_mem_name(mem), partition, c->cfg.partitions);
    if (offset > pb || bytes > pb - offset)
        return tern_error_set(err, TERN_ERR_RANGE, "%s access: bytes [%llu, +%zu) outside the %llu bytes of a partition",
                              tern_mem_name(mem), (unsigned long long)offset, bytes, (unsigned long long)pb);
    uint8_t *p = onchip_base(c, mem) + (size_t)partition * onchip_pitch(c, mem) + offset;
    if (write)
        memcpy(p, host, bytes);
    else
        memcpy(host, p, bytes);
    return TERN_OK;
}

/* Anything derived from SBUF bytes that a write must update: packed-operand caches, a lazily latched stationary, the
 * known identity. */
static int sbuf_tracked(const tern_core *core)
{
    return core->mov_cache_live || core->stat_cache_live || core->stat_lazy || core->ident_valid;
}

tern_status tern_core_onchip_write(tern_core *core, tern_mem mem, uint32_t partition, uint64_t offset,
                                   const void *src, size_t bytes, tern_error *err)
{
    if (mem == TERN_MEM_SBUF && sbuf_tracked(core))
        sbuf_range_written(core, partition, 1, (int64_t)offset, (int64_t)(offset + bytes));
    return onchip_copy(core, mem, partition, offset, (void *)src, bytes, 1, err);
}

tern_status tern_core_onchip_read(tern_core *core, tern_mem mem, uint32_t partition, uint64_t offset, void *dst,
                                  size_t bytes, tern_error *err)
{
    return onchip_copy(core, mem, partition, offset, dst, bytes, 0, err);
}

/* ---- access patterns ---- */

int64_t ap_reg_offset(const tern_core *core, tern_engine e, const tern_ap *ap)
{
    if (ap->offset_reg == TERN_REG_NONE || ap->offset_reg >= core->cfg.num_registers)
        return 0;
    return core->registers[(size_t)e * core->cfg.num_registers + ap->offset_reg];
}

/* The byte range [first, end) of elements lo..hi (relative to the base, plus a register offset in elements) of
 * es-byte elements at byte offset off, in checked arithmetic: false when it does not fit in 64 bits (a register
 * may hold any value, so this is reachable from a program). */
static bool span_bytes(int64_t off, int64_t reg, int64_t lo, int64_t hi, size_t es, int64_t *first, int64_t *end)
{
    int64_t a, b, fa, fb;
    if (__builtin_add_overflow(reg, lo, &a) || __builtin_add_overflow(reg, hi, &b) || __builtin_add_overflow(b, 1, &b))
        return false;
    if (__builtin_mul_overflow(a, (int64_t)es, &fa) || __builtin_mul_overflow(b, (int64_t)es, &fb))
        return false;
    return !__builtin_add_overflow(off, fa, first) && !__builtin_add_overflow(off, fb, end);
}

/* Smallest and largest element offsets (relative to the base) the free pattern reaches. */
void ap_extent(const tern_ap *ap, int64_t *lo, int64_t *hi)
{
    int64_t mn = 0, mx = 0;
    for (unsigned k = 0; k < ap->ndims; k++) {
        int64_t span = (int64_t)ap->dims[k].step * (int64_t)(ap->dims[k].num ? ap->dims[k].num - 1 : 0);
        if (span >= 0)
            mx += span;
        else
            mn += span;
    }
    *lo = mn;
    *hi = mx;
}

void exec_assert_entry(const exec_ctx *cx, const tern_instr *ins, tern_isa_family family)
{
    const tern_opcode_info *info = tern_opcode_get((tern_opcode)ins->opcode);
    TERN_ASSERT(info != NULL && info->family == family);
    TERN_ASSERT(ins->engine == cx->engine && (info->engines & (1u << cx->engine)));
}

void exec_assert_operand(const tern_core *core, const tern_instr *ins, int slot, unsigned mems)
{
    const tern_ap *ap = &ins->ap[slot];
    TERN_ASSERT(ap->ndims >= 1 && ap->ndims <= TERN_AP_MAX_DIMS);
    TERN_ASSERT(ap->dtype < TERN_DTYPE_COUNT);
    TERN_ASSERT(ap->mem < TERN_MEM_COUNT && (mems & EXEC_MEM_BIT(ap->mem)));
    TERN_ASSERT(ap->num_partitions >= 1 && (ap->mem == TERN_MEM_HBM || ap->num_partitions <= core->cfg.partitions));
    /* The partition range of a register-addressed operand is checked at run time (the executor's dynamic bounds,
     * an error, not an assertion), so only a static one is asserted here. */
    if (ap->mem != TERN_MEM_HBM && ap->offset_reg == TERN_REG_NONE)
        TERN_ASSERT((uint32_t)ap->start_partition + ap->num_partitions <= core->cfg.partitions);
}

tern_status ap_check_bounds(const tern_core *core, tern_engine e, const tern_ap *ap, const char *what, tern_error *err)
{
    size_t es = tern_dtype_size((tern_dtype)ap->dtype);
    if (ap->ndims == 0 || ap->ndims > TERN_AP_MAX_DIMS)
        return tern_error_set(err, TERN_ERR_INVALID, "%s: %u free dimensions, must be 1..%d", what, ap->ndims,
                              TERN_AP_MAX_DIMS);
    for (unsigned k = 0; k < ap->ndims; k++)
        if (ap->dims[k].num == 0)
            return tern_error_set(err, TERN_ERR_INVALID, "%s: free dimension %u has size 0", what, k);
    if (ap->num_partitions == 0)
        return tern_error_set(err, TERN_ERR_INVALID, "%s: 0 partitions", what);
    int64_t lo, hi;
    ap_extent(ap, &lo, &hi);
    int64_t reg = ap_reg_offset(core, e, ap);
    if (ap->mem == TERN_MEM_SBUF || ap->mem == TERN_MEM_PSUM) {
        if ((uint64_t)ap->start_partition + ap->num_partitions > core->cfg.partitions)
            return tern_error_set(err, TERN_ERR_RANGE, "%s: partitions [%u, %u) outside the %u partitions of %s", what,
                                  ap->start_partition, ap->start_partition + ap->num_partitions, core->cfg.partitions,
                                  tern_mem_name((tern_mem)ap->mem));
        int64_t pb = (int64_t)onchip_partition_bytes(core, (tern_mem)ap->mem);
        int64_t first, end;
        if (ap->offset > (uint64_t)pb || !span_bytes((int64_t)ap->offset, reg, lo, hi, es, &first, &end))
            return tern_error_set(err, TERN_ERR_RANGE,
                                  "%s: register offset %lld moves the pattern outside %s's %lld bytes per partition",
                                  what, (long long)reg, tern_mem_name((tern_mem)ap->mem), (long long)pb);
        if (first < 0 || end > pb)
            return tern_error_set(err, TERN_ERR_RANGE,
                                  "%s: bytes [%lld, %lld) of each partition outside %s's %lld bytes per partition",
                                  what, (long long)first, (long long)end, tern_mem_name((tern_mem)ap->mem),
                                  (long long)pb);
        return TERN_OK;
    }
    if (ap->mem == TERN_MEM_HBM) {
        int64_t plo = 0, phi = ap->partition_step * (int64_t)(ap->num_partitions - 1);
        if (phi < 0) {
            plo = phi;
            phi = 0;
        }
        if (ap->offset > core->cfg.hbm_bytes)
            return tern_error_set(err, TERN_ERR_RANGE, "%s: HBM address 0x%llx outside HBM of %llu bytes", what,
                                  (unsigned long long)ap->offset, (unsigned long long)core->cfg.hbm_bytes);
        int64_t first, end;
        if (!span_bytes((int64_t)ap->offset, reg, lo + plo, hi + phi, es, &first, &end))
            return tern_error_set(err, TERN_ERR_RANGE,
                                  "%s: register offset %lld moves the pattern outside HBM of %llu bytes", what,
                                  (long long)reg, (unsigned long long)core->cfg.hbm_bytes);
        if (first < 0 || (uint64_t)end > core->cfg.hbm_bytes)
            return tern_error_set(err, TERN_ERR_RANGE, "%s: HBM bytes [%lld, %lld) outside HBM of %llu bytes", what,
                                  (long long)first, (long long)end, (unsigned long long)core->cfg.hbm_bytes);
        return TERN_OK;
    }
    return tern_error_set(err, TERN_ERR_INVALID, "%s: no memory (mem=%u)", what, ap->mem);
}

/* Walk the AP as runs of the innermost dimension: calls fn(ctx, byte_addr_or_ptr, step, count, dense_index)
 * for every (partition, outer index). For on-chip memories `ptr` is valid; for HBM `addr` is. */
typedef tern_status (*run_fn)(tern_core *c, void *ctx, uint8_t *ptr, uint64_t addr, int32_t step, uint32_t count,
                              size_t dense, tern_error *err);

/* The free pattern as 4 right-aligned dimensions (d0 outermost, d3 innermost, so the walk's loop nest is fixed),
 * with dimensions of size 1 dropped and a dimension merged into the next inner one when it steps exactly over it
 * (step == inner step * inner num): the same elements in the same order, in fewer and longer runs. A layout's
 * [C, H, W] rows in HBM, for one, are a single run. */
static void ap_norm(const tern_ap *ap, uint32_t num[4], int32_t step[4])
{
    uint32_t n[TERN_AP_MAX_DIMS];
    int32_t st[TERN_AP_MAX_DIMS];
    unsigned m = 0;
    for (unsigned k = 0; k < ap->ndims && k < TERN_AP_MAX_DIMS; k++) {
        uint32_t kn = ap->dims[k].num;
        int32_t ks = ap->dims[k].step;
        if (kn == 1)
            continue;
        if (m && kn && (int64_t)st[m - 1] == (int64_t)ks * (int64_t)kn && (uint64_t)n[m - 1] * kn <= UINT32_MAX) {
            n[m - 1] *= kn;
            st[m - 1] = ks;
            continue;
        }
        n[m] = kn;
        st[m] = ks;
        m++;
    }
    for (unsigned k = 0; k < 4; k++) {
        num[k] = 1;
        step[k] = 0;
    }
    for (unsigned k = 0; k < m; k++) {
        num[4 - m + k] = n[k];
        step[4 - m + k] = st[k];
    }
}

uint8_t *ap_onchip_2d(const tern_core *core, tern_engine e, const tern_ap *ap, uint32_t *nr, int32_t *sr, uint32_t *nc,
                      int32_t *sc, size_t *pstride)
{
    if (ap->mem != TERN_MEM_SBUF && ap->mem != TERN_MEM_PSUM)
        return NULL;
    uint32_t num[4];
    int32_t step[4];
    ap_norm(ap, num, step);
    if (num[0] != 1 || num[1] != 1)
        return NULL;
    uint64_t pb = onchip_pitch(core, (tern_mem)ap->mem);
    *nr = num[2];
    *sr = step[2];
    *nc = num[3];
    *sc = step[3];
    *pstride = (size_t)pb;
    return onchip_base(core, (tern_mem)ap->mem) + (size_t)ap->start_partition * pb + ap->offset +
           ap_reg_offset(core, e, ap) * (int64_t)tern_dtype_size((tern_dtype)ap->dtype);
}

uint8_t *ap_onchip_rows(const tern_core *core, tern_engine e, const tern_ap *ap, size_t *elems, size_t *pstride)
{
    uint32_t nr, nc;
    int32_t sr, sc;
    uint8_t *base = ap_onchip_2d(core, e, ap, &nr, &sr, &nc, &sc, pstride);
    if (!base || nr != 1 || (nc != 1 && sc != 1))
        return NULL;
    *elems = nc;
    return base;
}

int onchip_rows_relation(const tern_core *core, const tern_ap *x, const uint8_t *xr, size_t xs, size_t xbytes,
                         const tern_ap *y, const uint8_t *yr, size_t ys, size_t ybytes)
{
    if (xr == yr && xs == ys && xbytes == ybytes && x->num_partitions == y->num_partitions)
        return 0;
    if (x->mem != y->mem || x->start_partition + x->num_partitions <= y->start_partition ||
        y->start_partition + y->num_partitions <= x->start_partition)
        return 1;
    const uint8_t *base = onchip_base(core, (tern_mem)x->mem);
    size_t x0 = (size_t)(xr - base) % xs, y0 = (size_t)(yr - base) % ys;
    return x0 + xbytes <= y0 || y0 + ybytes <= x0 ? 1 : 2;
}

/* The runs of a pattern (num[3] elements, step[3] apart) one after another: partitions outermost, then the
 * normalised dimensions d0..d2 (ap_norm). ap_walk visits them through a callback; a copy steps through both sides'
 * runs together without a row list (copy_runs_serial: a copy of many short runs, a 7 x 7 tile into its padded
 * frame, 28-byte runs, half a million per EfficientNet-B0 inference, spent more on collecting its rows than on
 * moving bytes). */
typedef struct {
    uint8_t *base;     /* on chip: the first run's host byte; NULL for HBM */
    uint64_t addr;     /* HBM: the byte address of element 0 of partition 0 (before the register offset) */
    int64_t el0;       /* HBM: the register offset, in elements */
    int64_t pstep;     /* on chip: host bytes between partitions; HBM: elements (partition_step) */
    int64_t step[3];   /* elements per index of the three outer free dimensions (ap_norm's d0..d2) */
    uint32_t num[3], np, p, i[3];
    size_t es;
    uint32_t run_n;    /* elements per run and their step (d3) */
    int32_t run_step;
} run_iter;

static void run_iter_init(const tern_core *c, tern_engine e, const tern_ap *ap, run_iter *it)
{
    uint32_t num[4];
    int32_t step[4];
    ap_norm(ap, num, step);
    memset(it, 0, sizeof *it);
    it->es = tern_dtype_size((tern_dtype)ap->dtype);
    for (int k = 0; k < 3; k++) {
        it->num[k] = num[k];
        it->step[k] = step[k];
    }
    it->np = ap->num_partitions;
    it->run_n = num[3];
    it->run_step = step[3];
    int64_t reg = ap_reg_offset(c, e, ap);
    if (ap->mem == TERN_MEM_HBM) {
        it->addr = ap->offset;
        it->el0 = reg;
        it->pstep = ap->partition_step;
    } else {
        it->pstep = (int64_t)onchip_pitch(c, (tern_mem)ap->mem);
        it->base = onchip_base(c, (tern_mem)ap->mem) + (size_t)ap->start_partition * (size_t)it->pstep + ap->offset +
                   reg * (int64_t)it->es;
    }
}

/* The current run (its host pointer, or NULL and its HBM address), then step to the next: ap_walk's loop nest,
 * partitions outermost. */
static uint8_t *run_iter_next(run_iter *it, uint64_t *addr)
{
    int64_t el = (int64_t)it->i[0] * it->step[0] + (int64_t)it->i[1] * it->step[1] + (int64_t)it->i[2] * it->step[2];
    uint8_t *ptr = NULL;
    if (it->base)
        ptr = it->base + (int64_t)it->p * it->pstep + el * (int64_t)it->es;
    else
        *addr = it->addr + (uint64_t)(((int64_t)it->p * it->pstep + it->el0 + el) * (int64_t)it->es);
    if (++it->i[2] == it->num[2]) {
        it->i[2] = 0;
        if (++it->i[1] == it->num[1]) {
            it->i[1] = 0;
            if (++it->i[0] == it->num[0]) {
                it->i[0] = 0;
                it->p++;
            }
        }
    }
    return ptr;
}

static tern_status ap_walk(tern_core *c, tern_engine e, const tern_ap *ap, run_fn fn, void *ctx, tern_error *err)
{
    run_iter it;
    run_iter_init(c, e, ap, &it);
    size_t runs = (size_t)it.np * it.num[0] * it.num[1] * it.num[2], dense = 0;
    for (size_t r = 0; r < runs; r++) {
        uint64_t addr = 0;
        uint8_t *ptr = run_iter_next(&it, &addr);
        tern_status st = fn(c, ctx, ptr, addr, it.run_step, it.run_n, dense, err);
        if (st)
            return st;
        dense += it.run_n;
    }
    return TERN_OK;
}

/* count elements of es bytes, `step` elements apart on the strided side, to or from a dense buffer: one typed
 * move per element for the usual sizes (a memcpy call per element of a variable size cost more than the move). */
#define STRIDED_MOVE(T, D, S)                                                                                      \
    for (uint32_t k = 0; k < count; k++) {                                                                         \
        T v_;                                                                                                      \
        memcpy(&v_, (S), sizeof v_);                                                                               \
        memcpy((D), &v_, sizeof v_);                                                                               \
    }
static void strided_read(uint8_t *dst, const uint8_t *src, int32_t step, uint32_t count, size_t es)
{
    const int64_t sb = (int64_t)step * (int64_t)es;
    switch (es) {
    case 4: STRIDED_MOVE(uint32_t, dst + 4 * (size_t)k, src + k * sb) break;
    case 2: STRIDED_MOVE(uint16_t, dst + 2 * (size_t)k, src + k * sb) break;
    case 1: STRIDED_MOVE(uint8_t, dst + k, src + k * sb) break;
    default:
        for (uint32_t k = 0; k < count; k++)
            memcpy(dst + k * es, src + k * sb, es);
    }
}

static void strided_write(uint8_t *dst, const uint8_t *src, int32_t step, uint32_t count, size_t es)
{
    const int64_t db = (int64_t)step * (int64_t)es;
    switch (es) {
    case 4: STRIDED_MOVE(uint32_t, dst + k * db, src + 4 * (size_t)k) break;
    case 2: STRIDED_MOVE(uint16_t, dst + k * db, src + 2 * (size_t)k) break;
    case 1: STRIDED_MOVE(uint8_t, dst + k * db, src + k) break;
    default:
        for (uint32_t k = 0; k < count; k++)
            memcpy(dst + k * db, src + k * es, es);
    }
}
#undef STRIDED_MOVE

/* One run of count elements of es bytes, step elements apart, on chip (ptr) or in HBM (addr): read into the
 * dense dst, or write from the dense src. */
static tern_status run_read(tern_core *c, const uint8_t *ptr, uint64_t addr, int32_t step, uint32_t count, size_t es,
                            uint8_t *dst, tern_error *err)
{
    if (ptr) {
        if (step == 1)
            memcpy(dst, ptr, (size_t)count * es);
        else
            strided_read(dst, ptr, step, count, es);
        return TERN_OK;
    }
    if (step == 1)
        return hbm_copy(c, addr, dst, (size_t)count * es, 0, err);
    for (uint32_t k = 0; k < count; k++) {
        tern_status st = hbm_copy(c, addr + (uint64_t)((int64_t)k * step * (int64_t)es), dst + k * es, es, 0, err);
        if (st)
            return st;
    }
    return TERN_OK;
}

static tern_status run_write(tern_core *c, uint8_t *ptr, uint64_t addr, int32_t step, uint32_t count, size_t es,
                             const uint8_t *src, tern_error *err)
{
    if (ptr) {
        if (step == 1)
            memcpy(ptr, src, (size_t)count * es);
        else
            strided_write(ptr, src, step, count, es);
        return TERN_OK;
    }
    if (step == 1)
        return hbm_copy(c, addr, (void *)(uintptr_t)src, (size_t)count * es, 1, err);
    for (uint32_t k = 0; k < count; k++) {
        tern_status st =
            hbm_copy(c, addr + (uint64_t)((int64_t)k * step * (int64_t)es), (void *)(uintptr_t)(src + k * es), es, 1, err);
        if (st)
            return st;
    }
    return TERN_OK;
}

typedef struct {
    tern_dtype dt;
    size_t es;
    float *f;
    int32_t *i;
    const float *cf;
    const int32_t *ci;
    tern_convert_opts opts;
    size_t row_n, row_stride; /* scatter from rows: element k of the dense order at cf + k / row_n * row_stride + k % row_n */
    uint64_t page;            /* gathers: the HBM page whose host bytes page_ptr holds (UINT64_MAX: none yet) */
    uint8_t *page_ptr;
    uint8_t tmp[4096];
} run_ctx;

static uint8_t *hbm_run_ptr(tern_core *c, uint64_t addr, size_t n, uint64_t *page, uint8_t **page_ptr);

/* Bring a run into contiguous host memory: for on-chip contiguous runs, the memory itself; otherwise tmp. */
static tern_status run_load(tern_core *c, run_ctx *r, uint8_t *ptr, uint64_t addr, int32_t step, uint32_t count,
                            uint8_t *dst, tern_error *err)
{
    return run_read(c, ptr, addr, step, count, r->es, dst, err);
}

static tern_status run_store(tern_core *c, run_ctx *r, uint8_t *ptr, uint64_t addr, int32_t step, uint32_t count,
                             const uint8_t *src, tern_error *err)
{
    return run_write(c, ptr, addr, step, count, r->es, src, err);
}

/* Process a run in chunks that fit run_ctx.tmp. */
#define CHUNK_ELEMS(r) (sizeof((r)->tmp) / (r)->es)

static tern_status gather_f32_run(tern_core *c, void *vctx, uint8_t *ptr, uint64_t addr, int32_t step,
                                  uint32_t count, size_t dense, tern_error *err)
{
    run_ctx *r = vctx;
    /* the run's destination: dense, or (into rows) within one destination row, since runs tile the rows */
    float *out = r->row_n ? r->f + dense / r->row_n * r->row_stride + dense % r->row_n : r->f + dense;
    if (!ptr && step == 1) /* an HBM run inside one page: its host bytes, through the page looked up last */
        ptr = hbm_run_ptr(c, addr, (size_t)count * r->es, &r->page, &r->page_ptr);
    if (ptr && step == 1) { /* fast path: convert straight from the memory (fp32: the conversion's memcpy) */
        if (r->dt == TERN_DTYPE_FP32) {
            memcpy(out, ptr, (size_t)count * 4);
            return TERN_OK;
        }
        return tern_convert_to_f32(out, r->dt, ptr, count, err);
    }
    uint32_t done = 0;
    while (done < count) {
        uint32_t n = count - done;
        if (n > CHUNK_ELEMS(r))
            n = (uint32_t)CHUNK_ELEMS(r);
        int64_t adv = (int64_t)done * step * (int64_t)r->es;
        tern_status st = run_load(c, r, ptr ? ptr + adv : NULL, addr + (uint64_t)adv, step, n, r->tmp, err);
        if (!st)
            st = tern_convert_to_f32(out + done, r->dt, r->tmp, n, err);
        if (st)
            return st;
        done += n;
    }
    return TERN_OK;
}

int core_simd_avx512(void) { return !strcmp(tern_num_simd_level(), tern_simd_name(TERN_SIMD_AVX512)); }

/* An on-chip fp32 or bf16 pattern of at most two dimensions per partition (a window: a convolution's tap, a pool's
 * strided view), read in place in dense order with the conversions' bits (fp32 as is; bf16 widened, a NaN quieted as
 * num_decode_fmt does) and no call per run: a [128, 28 x 28] window of a padded tile is 3,584 runs. */
#if defined(__x86_64__)

/* n elements at element step 1 or 2 from src into out (fp32 as is; bf16 widened, NaNs quieted): 1 if done. */
__attribute__((target("avx512f,avx512bw,avx512vl"))) static int gather_row512(float *out, const uint8_t *src, uint32_t n,
                                                                     int32_t step, int bf16)
{
    const __m512i qbit = _mm512_set1_epi32(0x400000), mag = _mm512_set1_epi32(0x7FFFFFFF),
                  inf = _mm512_set1_epi32(0x7F800000);
    const __m512i evens = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    if (step != 1 && step != 2)
        return 0;
    for (uint32_t i = 0; i < n; i += 16) {
        uint32_t k = n - i < 16 ? n - i : 16;
        __mmask16 m = (__mmask16)((1u << k) - 1u);
        __m512i u;
        if (bf16) {
            const uint16_t *h = (const uint16_t *)(const void *)src + (size_t)i * (size_t)step;
            if (step == 1) {
                u = _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, h)), 16);
            } else { /* the even halves of 32 bf16: the low 16 bits of each 32-bit lane */
                __mmask32 m2 = k == 16 ? (__mmask32)0x7FFFFFFFu : (__mmask32)((1u << (2 * k - 1)) - 1u);
                u = _mm512_slli_epi32(_mm512_maskz_loadu_epi16(m2, h), 16);
            }
            __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, mag), inf);
            u = _mm512_mask_or_epi32(u, nan, u, qbit);
        } else {
            const float *f = (const float *)(const void *)src + (size_t)i * (size_t)step;
            if (step == 1) {
                u = _mm512_castps_si512(_mm512_maskz_loadu_ps(m, f));
            } else {
                uint32_t t = 2 * k - 1; /* elements spanned, none read past the last */
                __mmask16 lo = t >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << t) - 1u);
                __mmask16 hi = t > 16 ? (__mmask16)((1u << (t - 16)) - 1u) : 0;
                __m512 a = _mm512_maskz_loadu_ps(lo, f), b = _mm512_maskz_loadu_ps(hi, f + 16);
                u = _mm512_castps_si512(_mm512_permutex2var_ps(a, evens, b));
            }
        }
        _mm512_mask_storeu_epi32(out + i, m, u);
    }
    return 1;
}
#endif

static int gather_2d(const tern_core *core, tern_engine e, const tern_ap *ap, float *out)
{
    if (ap->dtype != TERN_DTYPE_FP32 && ap->dtype != TERN_DTYPE_BF16)
        return 0;
    uint32_t nr, nc;
    int32_t sr, sc;
    size_t ps;
    const uint8_t *base = ap_onchip_2d(core, e, ap, &nr, &sr, &nc, &sc, &ps);
    if (!base)
        return 0;
    const int64_t es = (int64_t)tern_dtype_size((tern_dtype)ap->dtype);
#if defined(__x86_64__)
    const int wide = core_simd_avx512(); /* the window rows below are those conversions' widening */
#endif
    for (uint32_t p = 0; p < ap->num_partitions; p++)
        for (uint32_t r = 0; r < nr; r++) {
            const uint8_t *src = base + (size_t)p * ps + (int64_t)r * sr * es;
#if defined(__x86_64__)
            if (wide && gather_row512(out, src, nc, sc, es == 2)) {
                out += nc;
                continue;
            }
#endif
            if (es == 4) {
                if (sc == 1) {
                    memcpy(out, src, (size_t)nc * 4);
                } else {
                    for (uint32_t c = 0; c < nc; c++)
                        memcpy(&out[c], src + (int64_t)c * sc * 4, 4);
                }
            } else {
                for (uint32_t c = 0; c < nc; c++) {
                    uint16_t h;
                    memcpy(&h, src + (int64_t)c * sc * 2, 2);
                    uint32_t u = (uint32_t)h << 16;
                    u |= (u & 0x7FFFFFFFu) > 0x7F800000u ? 0x400000u : 0u;
                    memcpy(&out[c], &u, 4);
                }
            }
            out += nc;
        }
    return 1;
}

/* fp32 rows on chip (one run per partition: a [P, 1] column of statistics, a [P, N] tile) copied partition by
 * partition, the walk's runs without its callback per run. 1 if done. */
static int rows_f32(tern_core *core, tern_engine e, const tern_ap *ap, float *dense, const float *from)
{
    size_t n = 0, ps = 0;
    uint8_t *rows = ap->dtype == TERN_DTYPE_FP32 ? ap_onchip_rows(core, e, ap, &n, &ps) : NULL;
    if (!rows)
        return 0;
    for (uint32_t p = 0; p < ap->num_partitions; p++) {
        if (from)
            memcpy(rows + (size_t)p * ps, from + (size_t)p * n, n * 4);
        else
            memcpy(dense + (size_t)p * n, rows + (size_t)p * ps, n * 4);
    }
    return 1;
}

tern_status ap_gather_f32(tern_core *core, tern_engine e, const tern_ap *ap, float *out, tern_error *err)
{
    if (rows_f32(core, e, ap, out, NULL) || gather_2d(core, e, ap, out))
        return TERN_OK;
    run_ctx r;
    r.dt = (tern_dtype)ap->dtype;
    r.es = tern_dtype_size(r.dt);
    r.f = out;
    r.row_n = 0;
    r.page = UINT64_MAX;
    r.page_ptr = NULL;
    return ap_walk(core, e, ap, gather_f32_run, &r, err);
}

static int32_t int_of_bytes(tern_dtype dt, const uint8_t *p)
{
    switch (dt) {
    case TERN_DTYPE_INT8: return (int8_t)p[0];
    case TERN_DTYPE_UINT8: return p[0];
    case TERN_DTYPE_INT16: { int16_t v; memcpy(&v, p, 2); return v; }
    case TERN_DTYPE_UINT16: { uint16_t v; memcpy(&v, p, 2); return v; }
    case TERN_DTYPE_INT32:
    case TERN_DTYPE_UINT32: { int32_t v; memcpy(&v, p, 4); return v; }
    case TERN_DTYPE_FP32:
    case TERN_DTYPE_TF32:
    case TERN_DTYPE_BF16:
    case TERN_DTYPE_FP16:
    case TERN_DTYPE_FP8_E4M3:
    case TERN_DTYPE_FP8_E5M2:
    case TERN_DTYPE_FP8_E4M3_NEURON:
    case TERN_DTYPE_COUNT: {
        float f;
        tern_convert_to_f32(&f, dt, p, 1, NULL);
        if (!(f == f))
            return 0;
        if (f >= 2147483647.0f)
            return INT32_MAX;
        if (f <= -2147483648.0f)
            return INT32_MIN;
        return (int32_t)f;
    }
    }
    return 0; /* a dtype outside the enum: the rules refuse it before anything runs */
}

static void bytes_of_int(tern_dtype dt, uint8_t *p, int32_t v)
{
    switch (dt) {
    case TERN_DTYPE_INT8:
    case TERN_DTYPE_UINT8: p[0] = (uint8_t)v; break;
    case TERN_DTYPE_INT16:
    case TERN_DTYPE_UINT16: { uint16_t u = (uint16_t)v; memcpy(p, &u, 2); break; }
    case TERN_DTYPE_INT32:
    case TERN_DTYPE_UINT32: memcpy(p, &v, 4); break;
    case TERN_DTYPE_FP32:
    case TERN_DTYPE_TF32:
    case TERN_DTYPE_BF16:
    case TERN_DTYPE_FP16:
    case TERN_DTYPE_FP8_E4M3:
    case TERN_DTYPE_FP8_E5M2:
    case TERN_DTYPE_FP8_E4M3_NEURON:
    case TERN_DTYPE_COUNT: {
        float f = (float)v;
        tern_convert_from_f32(dt, p, &f, 1, NULL, NULL);
    }
    }
}

static tern_status gather_i32_run(tern_core *c, void *vctx, uint8_t *ptr, uint64_t addr, int32_t step,
                                  uint32_t count, size_t dense, tern_error *err)
{
    run_ctx *r = vctx;
    uint32_t done = 0;
    while (done < count) {
        uint32_t n = count - done;
        if (n > CHUNK_ELEMS(r))
            n = (uint32_t)CHUNK_ELEMS(r);
        int64_t adv = (int64_t)done * step * (int64_t)r->es;
        tern_status st = run_load(c, r, ptr ? ptr + adv : NULL, addr + (uint64_t)adv, step, n, r->tmp, err);
        if (st)
            return st;
        for (uint32_t k = 0; k < n; k++)
            r->i[dense + done + k] = int_of_bytes(r->dt, r->tmp + k * r->es);
        done += n;
    }
    return TERN_OK;
}

tern_status ap_gather_i32(tern_core *core, tern_engine e, const tern_ap *ap, int32_t *out, tern_error *err)
{
    run_ctx r;
    r.dt = (tern_dtype)ap->dtype;
    r.es = tern_dtype_size(r.dt);
    r.i = out;
    return ap_walk(core, e, ap, gather_i32_run, &r, err);
}

static tern_status scatter_f32_run(tern_core *c, void *vctx, uint8_t *ptr, uint64_t addr, int32_t step,
                                   uint32_t count, size_t dense, tern_error *err)
{
    run_ctx *r = vctx;
    /* the run's source: dense, or (rows) within one source row, since runs never cross a partition */
    const float *src = r->row_n ? r->cf + dense / r->row_n * r->row_stride + dense % r->row_n : r->cf + dense;
    if (!ptr && step == 1) /* an HBM run inside one page: converted straight into the page */
        ptr = hbm_run_ptr(c, addr, (size_t)count * r->es, &r->page, &r->page_ptr);
    if (ptr && step == 1) {
        if (r->dt == TERN_DTYPE_FP32) { /* the conversion's own fp32 case, without its dispatch per run */
            memcpy(ptr, src, (size_t)count * 4);
            return TERN_OK;
        }
        r->opts.offset = dense;
        return tern_convert_from_f32(r->dt, ptr, src, count, &r->opts, err);
    }
    uint32_t done = 0;
    while (done < count) {
        uint32_t n = count - done;
        if (n > CHUNK_ELEMS(r))
            n = (uint32_t)CHUNK_ELEMS(r);
        r->opts.offset = dense + done;
        tern_status st = tern_convert_from_f32(r->dt, r->tmp, src + done, n, &r->opts, err);
        int64_t adv = (int64_t)done * step * (int64_t)r->es;
        if (!st)
            st = run_store(c, r, ptr ? ptr + adv : NULL, addr + (uint64_t)adv, step, n, r->tmp, err);
        if (st)
            return st;
        done += n;
    }
    return TERN_OK;
}

tern_status ap_scatter_f32(tern_core *core, tern_engine e, const tern_ap *ap, const float *in, uint64_t sr_stream,
                           tern_error *err)
{
    return ap_scatter_f32_rows(core, e, ap, in, 0, 0, sr_stream, err);
}

/* A dense buffer into an on-chip window of two dimensions per partition (a tile's interior inside its padding):
 * converted in one call (each element's rounding draw at its dense index, as the walk's per-run calls give it), then
 * copied row by row in dense order, instead of a conversion call per run. 1 if done (*st its status). */
static int scatter_2d(tern_core *core, tern_engine e, const tern_ap *ap, const float *in, const tern_convert_opts *o,
                      tern_status *st, tern_error *err)
{
    uint32_t nr, nc;
    int32_t sr, sc;
    size_t ps;
    uint8_t *base = ap_onchip_2d(core, e, ap, &nr, &sr, &nc, &sc, &ps);
    if (!base || nr < 2) /* rows: the walk's one run per partition is one call already */
        return 0;
    const size_t es = tern_dtype_size((tern_dtype)ap->dtype), n = (size_t)ap->num_partitions * nr * nc;
    uint8_t *tmp = (uint8_t *)(void *)core_scratch(core, 4, (n * es + 3) / 4);
    if (!tmp)
        return 0;
    tern_convert_opts op = *o;
    op.offset = 0;
    if ((*st = tern_convert_from_f32((tern_dtype)ap->dtype, tmp, in, n, &op, err)))
        return 1;
    const uint8_t *src = tmp;
    for (uint32_t p = 0; p < ap->num_partitions; p++)
        for (uint32_t r = 0; r < nr; r++) {
            uint8_t *dst = base + (size_t)p * ps + (int64_t)r * sr * (int64_t)es;
            if (sc == 1)
                memcpy(dst, src, (size_t)nc * es);
            else
                for (uint32_t c = 0; c < nc; c++)
                    memcpy(dst + (int64_t)c * sc * (int64_t)es, src + (size_t)c * es, es);
            src += (size_t)nc * es;
        }
    return 1;
}

tern_status ap_scatter_f32_rows(tern_core *core, tern_engine e, const tern_ap *ap, const float *in, size_t row_n,
                                size_t row_stride, uint64_t sr_stream, tern_error *err)
{
    run_ctx r;
    r.dt = (tern_dtype)ap->dtype;
    r.es = tern_dtype_size(r.dt);
    r.cf = in;
    r.row_n = row_n;
    r.row_stride = row_stride;
    memset(&r.opts, 0, sizeof r.opts);
    r.opts.round = core->opts.rounding;
    r.opts.overflow = TERN_OVERFLOW_INF;
    r.opts.seed = core->opts.seed ^ (sr_stream * 0x9E3779B97F4A7C15ull);
    r.page = UINT64_MAX;
    r.page_ptr = NULL;
    psum_mark(core, ap, 0);
    sbuf_written(core, e, ap);
    tern_status st;
    if (!row_n && rows_f32(core, e, ap, NULL, in))
        return TERN_OK;
    if (!row_n && scatter_2d(core, e, ap, in, &r.opts, &st, err))
        return st;
    return ap_walk(core, e, ap, scatter_f32_run, &r, err);
}

static tern_status scatter_i32_run(tern_core *c, void *vctx, uint8_t *ptr, uint64_t addr, int32_t step,
                                   uint32_t count, size_t dense, tern_error *err)
{
    run_ctx *r = vctx;
    uint32_t done = 0;
    while (done < count) {
        uint32_t n = count - done;
        if (n > CHUNK_ELEMS(r))
            n = (uint32_t)CHUNK_ELEMS(r);
        for (uint32_t k = 0; k < n; k++)
            bytes_of_int(r->dt, r->tmp + k * r->es, r->ci[dense + done + k]);
        int64_t adv = (int64_t)done * step * (int64_t)r->es;
        tern_status st = run_store(c, r, ptr ? ptr + adv : NULL, addr + (uint64_t)adv, step, n, r->tmp, err);
        if (st)
            return st;
        done += n;
    }
    return TERN_OK;
}

tern_status ap_scatter_i32(tern_core *core, tern_engine e, const tern_ap *ap, const int32_t *in, tern_error *err)
{
    run_ctx r;
    r.dt = (tern_dtype)ap->dtype;
    r.es = tern_dtype_size(r.dt);
    r.ci = in;
    psum_mark(core, ap, 0);
    sbuf_written(core, e, ap);
    return ap_walk(core, e, ap, scatter_i32_run, &r, err);
}

/* ---- PSUM accumulation-group bookkeeping ---- */

void psum_banks_of(const tern_core *c, const tern_ap *ap, uint32_t *first, uint32_t *last)
{
    int64_t lo, hi;
    ap_extent(ap, &lo, &hi);
    size_t es = tern_dtype_size((tern_dtype)ap->dtype);
    int64_t b0 = ((int64_t)ap->offset + lo * (int64_t)es) / c->cfg.psum_bank_bytes;
    int64_t b1 = ((int64_t)ap->offset + (hi + 1) * (int64_t)es - 1) / c->cfg.psum_bank_bytes;
    if (b0 < 0)
        b0 = 0;
    if (b1 >= (int64_t)c->cfg.psum_banks)
        b1 = c->cfg.psum_banks - 1;
    *first = (uint32_t)b0;
    *last = (uint32_t)b1;
}

void psum_mark(tern_core *core, const tern_ap *ap, int by_matmul)
{
    if (ap->mem != TERN_MEM_PSUM)
        return;
    uint32_t b0, b1;
    psum_banks_of(core, ap, &b0, &b1);
    for (uint32_t b = b0; b <= b1; b++)
        memset(core->psum_bank_state + (size_t)b * core->cfg.partitions + ap->start_partition,
               by_matmul ? PSUM_BANK_MATMUL : PSUM_BANK_OTHER, ap->num_partitions);
}

int psum_is_matmul_group(const tern_core *core, const tern_ap *ap)
{
    uint32_t b0, b1;
    psum_banks_of(core, ap, &b0, &b1);
    for (uint32_t b = b0; b <= b1; b++) {
        const uint8_t *s = core->psum_bank_state + (size_t)b * core->cfg.partitions + ap->start_partition;
        for (uint32_t p = 0; p < ap->num_partitions; p++)
            if (s[p] != PSUM_BANK_MATMUL)
                return 0;
    }
    return 1;
}

/* Is the AP's free pattern one contiguous run per partition? */
int ap_contiguous(const tern_ap *a)
{
    if (a->dims[a->ndims - 1].step != 1)
        return 0;
    for (int d = (int)a->ndims - 2; d >= 0; d--)
        if ((int64_t)a->dims[d].step != (int64_t)a->dims[d + 1].step * a->dims[d + 1].num)
            return 0;
    return 1;
}

uint64_t sr_stream_of(const exec_ctx *cx) { return ((uint64_t)cx->engine << 56) ^ cx->seq; }

/* ---- raw byte moves (same-dtype copies: DMA, tensor_copy) ---- */

typedef struct {
    size_t es;
    uint8_t *buf;       /* dense bytes */
    const uint8_t *cbuf;
} raw_ctx;

static tern_status gather_raw_run(tern_core *c, void *vctx, uint8_t *ptr, uint64_t addr, int32_t step, uint32_t count,
                                  size_t dense, tern_error *err)
{
    raw_ctx *r = vctx;
    return run_read(c, ptr, addr, step, count, r->es, r->buf + dense * r->es, err);
}

static tern_status scatter_raw_run(tern_core *c, void *vctx, uint8_t *ptr, uint64_t addr, int32_t step, uint32_t count,
                                   size_t dense, tern_error *err)
{
    raw_ctx *r = vctx;
    return run_write(c, ptr, addr, step, count, r->es, r->cbuf + dense * r->es, err);
}

/* ---- direct copies: row to row, without the dense bounce buffer ---- */

typedef struct {
    uint8_t *ptr; /* on-chip row, or NULL for an HBM row at addr */
    uint64_t addr;
} row_ref;

typedef struct {
    row_ref *rows;
    size_t n;
} rows_ctx;

static tern_status collect_rows_run(tern_core *c, void *vctx, uint8_t *ptr, uint64_t addr, int32_t step, uint32_t count,
                                    size_t dense, tern_error *err)
{
    (void)c, (void)step, (void)count, (void)dense, (void)err;
    rows_ctx *r = vctx;
    r->rows[r->n].ptr = ptr;
    r->rows[r->n].addr = addr;
    r->n++;
    return TERN_OK;
}

/* The runs ap_walk visits: how many, and their length in elements (every run of a pattern has the same length);
 * *dense says whether a run is contiguous (unit step, or a single element). */
static size_t ap_runs(const tern_ap *ap, uint32_t *len, int *dense)
{
    uint32_t num[4];
    int32_t step[4];
    ap_norm(ap, num, step);
    *len = num[3];
    *dense = num[3] == 1 || step[3] == 1;
    return (size_t)ap->num_partitions * num[0] * num[1] * num[2];
}

int ap_cast_rows(tern_core *core, tern_engine e, const tern_ap *dst, const tern_ap *src, uint64_t sr_stream,
                 tern_status *st, tern_error *err)
{
    size_t n = 0, ps = 0;
    uint8_t *rows = src->dtype == TERN_DTYPE_FP32 && dst->mem != src->mem && tern_dtype_is_float((tern_dtype)dst->dtype)
                        ? ap_onchip_rows(core, e, src, &n, &ps)
                        : NULL;
    uint32_t ld;
    int dense;
    (void)ap_runs(dst, &ld, &dense);
    if (!rows || !n || !ld || n % ld || (uintptr_t)rows % 4 || ps % 4)
        return 0;
    *st = ap_scatter_f32_rows(core, e, dst, (const float *)(const void *)rows, n, ps / 4, sr_stream, err);
    return 1;
}

/* A copy from another memory into fp32 rows on chip (an HBM mask in uint8 widened into SBUF): src converted
 * straight into the rows, without the dense buffer and the scatter's copy, when src's runs tile the rows (each run
 * then lies within one row). The conversions are the dense path's: to fp32, then fp32 stored as is. 1 if done. */
int ap_widen_into_rows(tern_core *core, tern_engine e, const tern_ap *dst, const tern_ap *src, tern_status *st,
                       tern_error *err)
{
    if (dst->dtype != TERN_DTYPE_FP32 || src->dtype == TERN_DTYPE_FP32 || dst->mem == src->mem)
        return 0;
    size_t n = 0, ps = 0;
    uint8_t *rows = ap_onchip_rows(core, e, dst, &n, &ps);
    uint32_t ls;
    int dense;
    (void)ap_runs(src, &ls, &dense);
    if (!rows || !n || !ls || n % ls || (uintptr_t)rows % 4 || ps % 4 ||
        (uint64_t)dst->num_partitions * n != (uint64_t)src->num_partitions * tern_ap_free_elems(src))
        return 0;
    psum_mark(core, dst, 0);
    sbuf_written(core, e, dst);
    run_ctx r;
    r.dt = (tern_dtype)src->dtype;
    r.es = tern_dtype_size(r.dt);
    r.f = (float *)(void *)rows;
    r.row_n = n;
    r.row_stride = ps / 4;
    r.page = UINT64_MAX;
    r.page_ptr = NULL;
    *st = ap_walk(core, e, src, gather_f32_run, &r, err);
    return 1;
}

/* Can src be copied into dst run by run (each side's contiguous runs, in the same dense order, without the bounce
 * buffer)? Both sides walk contiguous runs (of any lengths: a run of one side may span several of the other's),
 * at most one side is HBM (the other gives the host pointer), and the two do not overlap (the bounce buffer's
 * read-everything-then-write semantics then cannot differ). */
static int direct_ok(const tern_core *core, tern_engine e, const tern_ap *dst, const tern_ap *src)
{
    uint32_t ld, ls;
    int dd, ds;
    (void)ap_runs(dst, &ld, &dd);
    (void)ap_runs(src, &ls, &ds);
    if (!dd || !ds)
        return 0;
    if (dst->mem == TERN_MEM_HBM && src->mem == TERN_MEM_HBM)
        return 0;
    if (dst->mem != src->mem)
        return 1;
    /* the same on-chip memory: disjoint partitions, or disjoint byte ranges */
    if (dst->start_partition + dst->num_partitions <= src->start_partition ||
        src->start_partition + src->num_partitions <= dst->start_partition)
        return 1;
    int64_t lo, hi;
    size_t es = tern_dtype_size((tern_dtype)src->dtype);
    ap_extent(dst, &lo, &hi);
    int64_t d0 = (int64_t)dst->offset + (ap_reg_offset(core, e, dst) + lo) * (int64_t)es;
    int64_t d1 = (int64_t)dst->offset + (ap_reg_offset(core, e, dst) + hi + 1) * (int64_t)es;
    ap_extent(src, &lo, &hi);
    int64_t s0 = (int64_t)src->offset + (ap_reg_offset(core, e, src) + lo) * (int64_t)es;
    int64_t s1 = (int64_t)src->offset + (ap_reg_offset(core, e, src) + hi + 1) * (int64_t)es;
    return d1 <= s0 || s1 <= d0;
}

/* Large row-to-row copies are split over the core's host threads. The rows of the two sides are collected
 * first; HBM pages they touch are made to exist (and the ranges checked) on the calling thread, so the parallel
 * part only moves bytes between disjoint rows: the result cannot depend on the split. Rows are disjoint only
 * when the destination pattern never names one element twice (dst_injective); otherwise the copy runs on the
 * calling thread in access-pattern order, which is tern's rule for overlapping destinations (the last write
 * in that order wins, docs/isa-semantics.md). */
#define PARALLEL_COPY_BYTES (256u * 1024u)

/* Does the destination pattern name every element at most once? A sufficient test, cheap on the AP: the
 * dimensions of count > 1 sorted by |step| must each step over everything the smaller ones span. On-chip
 * partitions are separate memories, so partitions never collide there; in HBM the partition index is one more
 * dimension (partition_step). A pattern that fails the test (step 0, interleaved strides) may still be
 * injective; it then merely runs serially, which is always correct. */
static int dst_injective(const tern_ap *ap)
{
    int64_t step[TERN_AP_MAX_DIMS + 1];
    int64_t num[TERN_AP_MAX_DIMS + 1];
    unsigned n = 0;
    for (unsigned k = 0; k < ap->ndims; k++)
        if (ap->dims[k].num > 1) {
            step[n] = ap->dims[k].step < 0 ? -(int64_t)ap->dims[k].step : ap->dims[k].step;
            num[n++] = ap->dims[k].num;
        }
    if (ap->mem == TERN_MEM_HBM && ap->num_partitions > 1) {
        if (ap->partition_step == INT64_MIN)
            return 0;
        step[n] = ap->partition_step < 0 ? -ap->partition_step : ap->partition_step;
        num[n++] = ap->num_partitions;
    }
    for (unsigned i = 1; i < n; i++) /* insertion sort by step: at most five entries */
        for (unsigned k = i; k > 0 && step[k] < step[k - 1]; k--) {
            int64_t t = step[k];
            step[k] = step[k - 1];
            step[k - 1] = t;
            t = num[k];
            num[k] = num[k - 1];
            num[k - 1] = t;
        }
    int64_t span = 1; /* elements from the first to one past the last reached by the smaller dimensions */
    for (unsigned i = 0; i < n; i++) {
        int64_t reach;
        if (step[i] < span || __builtin_mul_overflow(step[i], num[i] - 1, &reach) ||
            __builtin_add_overflow(span, reach, &span))
            return 0;
    }
    return 1;
}

typedef struct {
    tern_core *core;
    const row_ref *to, *from;
    size_t bytes;
    size_t n;
} prow_job;

static void prow_part(void *ctx, unsigned part, unsigned nparts)
{
    const prow_job *j = ctx;
    size_t r0 = j->n * part / nparts, r1 = j->n * (part + 1) / nparts;
    for (size_t r = r0; r < r1; r++) {
        const row_ref *t = &j->to[r], *f = &j->from[r];
        if (t->ptr && f->ptr)
            memcpy(t->ptr, f->ptr, j->bytes);
        else
            (void)hbm_copy(j->core, t->ptr ? f->addr : t->addr, t->ptr ? t->ptr : f->ptr, j->bytes, !t->ptr, NULL);
    }
}

static tern_status hbm_touch(tern_core *c, uint64_t addr, size_t bytes, tern_error *err)
{
    if (addr > c->cfg.hbm_bytes || bytes > c->cfg.hbm_bytes - addr)
        return tern_error_set(err, TERN_ERR_RANGE, "HBM access [0x%llx, +%zu) outside HBM of %llu bytes",
                              (unsigned long long)addr, bytes, (unsigned long long)c->cfg.hbm_bytes);
    for (uint64_t p = addr >> HBM_PAGE_SHIFT; bytes && p <= (addr + bytes - 1) >> HBM_PAGE_SHIFT; p++)
        if (!hbm_page(c, p))
            return tern_error_set(err, TERN_ERR_NOMEM, "HBM page at 0x%llx: out of host memory",
                                  (unsigned long long)(p << HBM_PAGE_SHIFT));
    return TERN_OK;
}

/* Returns TERN_ERR_NOMEM, having copied nothing, when the row list cannot be allocated (the caller then copies
 * serially). */
static tern_status parallel_rows(tern_core *core, const row_ref *from, const row_ref *to, size_t rows, size_t bytes,
                                 tern_error *err)
{
    tern_status st;
    for (size_t r = 0; r < rows; r++) {
        const row_ref *h = to[r].ptr ? &from[r] : &to[r];
        if (!h->ptr && (st = hbm_touch(core, h->addr, bytes, err)))
            return st;
    }
    prow_job j = {core, to, from, bytes, rows};
    unsigned parts = pool_threads(core_pool(core));
    if (!core_may_split())
        parts = 1;
    pool_run(core_pool(core), prow_part, &j, parts < rows ? parts : (unsigned)rows);
    return TERN_OK;
}

static uint32_t gcd32(uint32_t a, uint32_t b)
{
    while (b) {
        uint32_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* Rows [0, n) of length len elements cut, in place, into n * f rows of len / f (rows holds n * f entries): the
 * same bytes in the same order. */
static void split_rows(row_ref *rows, size_t n, size_t f, size_t piece_bytes)
{
    for (size_t r = n; r-- > 0;) {
        row_ref w = rows[r];
        for (size_t k = f; k-- > 0;) {
            row_ref *o = &rows[r * f + k];
            o->ptr = w.ptr ? w.ptr + k * piece_bytes : NULL; /* an on-chip row, else an HBM one at addr */
            o->addr = w.ptr ? w.addr : w.addr + k * piece_bytes;
        }
    }
}

/* Rows shorter than this are not worth a thread's share when the two sides' runs must be cut to a common
 * length (a dense HBM block against SBUF partitions). */
#define PARALLEL_SPLIT_ROW_BYTES 256u

static int grow_rows(core_scratch_set *z, size_t nd, size_t ns)
{
    if (z->row_refs_cap < nd) {
        void *p = realloc(z->row_refs, nd * sizeof(row_ref));
        if (p) {
            z->row_refs = p;
            z->row_refs_cap = nd;
        }
    }
    if (z->row_refs_src_cap < ns) {
        void *p = realloc(z->row_refs_src, ns * sizeof(row_ref));
        if (p) {
            z->row_refs_src = p;
            z->row_refs_src_cap = ns;
        }
    }
    return z->row_refs_cap >= nd && z->row_refs_src_cap >= ns;
}

/* The host bytes of HBM [addr, addr + n) when they lie in one page (the usual case for a run), else NULL (the
 * caller goes through hbm_copy). *page and *page_ptr remember the last page looked up. */
static uint8_t *hbm_run_ptr(tern_core *c, uint64_t addr, size_t n, uint64_t *page, uint8_t **page_ptr)
{
    uint64_t pg = addr >> HBM_PAGE_SHIFT;
    if (addr > c->cfg.hbm_bytes || n > c->cfg.hbm_bytes - addr || ((addr + n - 1) >> HBM_PAGE_SHIFT) != pg)
        return NULL;
    if (pg != *page || !*page_ptr) {
        uint8_t *p = hbm_page(c, pg);
        if (!p)
            return NULL;
        *page = pg;
        *page_ptr = p;
    }
    return *page_ptr + (addr & (HBM_PAGE_BYTES - 1));
}

/* The current run of one side of a copy: its host bytes, or (an HBM run across a page boundary) NULL and its
 * address. */
static uint8_t *copy_run_next(tern_core *c, run_iter *it, size_t bytes, uint64_t *addr, uint64_t *page,
                              uint8_t **page_ptr)
{
    uint8_t *p = run_iter_next(it, addr);
    return p ? p : hbm_run_ptr(c, *addr, bytes, page, page_ptr);
}

/* Serially, in dense order: each step copies what is left of the current run of the side that ends first (the
 * same bytes, in the same order, as the walk element by element). nd runs of ld_bytes on the destination side,
 * ns of ls_bytes on the source side, the same total. */
static tern_status copy_runs_serial(tern_core *core, tern_engine e, const tern_ap *dst, const tern_ap *src,
                                    size_t nd, size_t bd, size_t ns, size_t bs, tern_error *err)
{
    run_iter id, is;
    run_iter_init(core, e, dst, &id);
    run_iter_init(core, e, src, &is);
    uint64_t page = UINT64_MAX, da = 0, sa = 0;
    uint8_t *page_ptr = NULL;
    size_t i = 0, j = 0, oi = 0, oj = 0;
    uint8_t *d = nd ? copy_run_next(core, &id, bd, &da, &page, &page_ptr) : NULL;
    uint8_t *s = ns ? copy_run_next(core, &is, bs, &sa, &page, &page_ptr) : NULL;
    while (i < nd && j < ns) {
        size_t n = bd - oi < bs - oj ? bd - oi : bs - oj;
        tern_status st = TERN_OK;
        if (d && s)
            memcpy(d + oi, s + oj, n);
        else if (!d) /* an HBM destination run across pages (the source is on chip) */
            st = hbm_copy(core, da + oi, s + oj, n, 1, err);
        else
            st = hbm_copy(core, sa + oj, d + oi, n, 0, err);
        if (st)
            return st;
        if ((oi += n) == bd && ++i < nd) {
            oi = 0;
            d = copy_run_next(core, &id, bd, &da, &page, &page_ptr);
        }
        if ((oj += n) == bs && ++j < ns) {
            oj = 0;
            s = copy_run_next(core, &is, bs, &sa, &page, &page_ptr);
        }
    }
    return TERN_OK;
}

tern_status ap_copy_raw(tern_core *core, tern_engine e, const tern_ap *dst, const tern_ap *src, tern_error *err)
{
    if (direct_ok(core, e, dst, src)) {
        core_scratch_set *z = core_lane_scratch(core);
        uint32_t ld, ls;
        int dense;
        size_t nd = ap_runs(dst, &ld, &dense), ns = ap_runs(src, &ls, &dense);
        size_t es = tern_dtype_size((tern_dtype)src->dtype);
        /* Sides whose runs differ in length (a dense HBM block, one run, against the rows of SBUF partitions)
         * are cut to a common length when the copy is large, so that it too splits over the threads. */
        uint32_t common = ld == ls ? ld : gcd32(ld, ls);
        size_t pieces = common ? nd * ld / common : 0;
        int cut = ld != ls && common && (size_t)common * es >= PARALLEL_SPLIT_ROW_BYTES && pieces >= 4 &&
                  nd * ld * es >= PARALLEL_COPY_BYTES && dst_injective(dst) &&
                  grow_rows(z, pieces, pieces);
        int parallel = !cut && ld == ls && nd >= 4 && nd * ld * es >= PARALLEL_COPY_BYTES && dst_injective(dst) &&
                       grow_rows(z, nd, ns);
        if (cut || parallel) { /* the rows of both sides collected, then split over the host threads */
            rows_ctx rd = {z->row_refs, 0}, rs = {z->row_refs_src, 0};
            tern_status st = ap_walk(core, e, dst, collect_rows_run, &rd, err);
            if (!st)
                st = ap_walk(core, e, src, collect_rows_run, &rs, err);
            if (st)
                return st;
            TERN_ASSERT(rd.n == nd && rs.n == ns);
            psum_mark(core, dst, 0);
            sbuf_written(core, e, dst);
            if (cut) {
                split_rows(rd.rows, nd, ld / common, (size_t)common * es);
                split_rows(rs.rows, ns, ls / common, (size_t)common * es);
                return parallel_rows(core, rs.rows, rd.rows, pieces, (size_t)common * es, err);
            }
            return parallel_rows(core, rs.rows, rd.rows, nd, ld * es, err);
        }
        psum_mark(core, dst, 0);
        sbuf_written(core, e, dst);
        return copy_runs_serial(core, e, dst, src, nd, (size_t)ld * es, ns, (size_t)ls * es, err);
    }
    size_t es = tern_dtype_size((tern_dtype)src->dtype);
    TERN_ASSERT(es == tern_dtype_size((tern_dtype)dst->dtype));
    size_t n = (size_t)src->num_partitions * (size_t)tern_ap_free_elems(src);
    float *buf = core_scratch(core, 5, (n * es + 3) / 4);
    if (!buf)
        return tern_error_set(err, TERN_ERR_NOMEM, "copy: out of host memory for %zu elements", n);
    raw_ctx r = {es, (uint8_t *)(void *)buf, (const uint8_t *)(void *)buf};
    tern_status st = ap_walk(core, e, src, gather_raw_run, &r, err);
    if (st)
        return st;
    psum_mark(core, dst, 0);
    sbuf_written(core, e, dst);
    return ap_walk(core, e, dst, scatter_raw_run, &r, err);
}

/* ---- the packed-moving-operand cache: entries die when SBUF under them is written ---- */


void sbuf_written(tern_core *core, tern_engine e, const tern_ap *ap)
{
    /* what the background lane writes was marked when it was queued (exec_lane.c): the caches are TensorE's, read
     * and written where instructions commit only */
    if (on_lane || ap->mem != TERN_MEM_SBUF || !sbuf_tracked(core))
        return;
    int64_t lo, hi;
    ap_extent(ap, &lo, &hi);
    size_t es = tern_dtype_size((tern_dtype)ap->dtype);
    int64_t reg = ap_reg_offset(core, e, ap);
    int64_t b0 = (int64_t)ap->offset + (reg + lo) * (int64_t)es, b1 = (int64_t)ap->offset + (reg + hi + 1) * (int64_t)es;
    sbuf_range_written(core, ap->start_partition, ap->num_partitions, b0, b1);
}

static void cache_range_written(mov_cache_entry *cache, int n, int *live, uint32_t p0, uint32_t np, int64_t b0,
                                int64_t b1)
{
    for (int i = 0; i < n && *live; i++) {
        mov_cache_entry *m = &cache[i];
        if (!m->valid)
            continue;
        int parts_overlap = p0 < m->start + m->parts && m->start < p0 + np;
        int bytes_overlap = b0 < (int64_t)(m->offset + m->bytes) && (int64_t)m->offset < b1;
        if (parts_overlap && bytes_overlap) {
            m->valid = 0;
            (*live)--;
        }
    }
}

void sbuf_range_written(tern_core *core, uint32_t p0, uint32_t np, int64_t b0, int64_t b1)
{
    if (core->stat_lazy && p0 < core->stat_p0 + core->stat_k && core->stat_p0 < p0 + np && b0 < core->stat_b1 &&
        core->stat_b0 < b1)
        stat_materialize(core); /* from the bytes as they were latched: the write has not happened yet */
    if (core->ident_valid && p0 < core->ident_p0 + core->ident_k && core->ident_p0 < p0 + np &&
        b0 < core->ident_b0 + (int64_t)core->ident_k * 2 && core->ident_b0 < b1)
        core->ident_valid = 0;
    cache_range_written(core->stat_cache, STAT_CACHE_ENTRIES, &core->stat_cache_live, p0, np, b0, b1);
    cache_range_written(core->mov_cache, MOV_CACHE_ENTRIES, &core->mov_cache_live, p0, np, b0, b1);
}

