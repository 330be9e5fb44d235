/* TensorE: the systolic array. LoadStationary latches a [K,M] operand (K contraction rows on partitions, M
 * PE columns); MultiplyMoving streams a [K,N] moving operand and writes D[M,N] = stationary^T @ moving into
 * PSUM, overwriting or accumulating (a matmul accumulation group). Products of 8/16-bit inputs are exact in
 * fp32; tern sums over k in ascending order in fp32 with round-to-nearest-even, then adds the PSUM value when
 * accumulating (the array's partial sum meets PSUM's read-accumulate-write). Subnormals are kept (no flush).
 * Each step is a fused multiply-add (for fp32 operands the hardware's multi-pass FP32 mode is not public; tern
 * defines fp32 matmul as the fma chain, documented in docs/isa.md). The arithmetic lives in matmul.c. v3+ transpose mode moves data bit-exactly through the array.
 * Facts: trainium-arch.md §3 (tile limits, dtypes, PSUM accumulation, transpose mode). */
#include <stdio.h>
#include <string.h>

#include <stdlib.h>

#include "sim/matmul.h"
#include "sim/exec_lane.h"
#include "sim/host_threads.h"
#include "sim/rules.h"

static int tensor_input_dtype_ok(tern_dtype t)
{
    switch (t) {
    case TERN_DTYPE_FP32:
    case TERN_DTYPE_TF32:
    case TERN_DTYPE_BF16:
    case TERN_DTYPE_FP16:
    case TERN_DTYPE_FP8_E4M3:
    case TERN_DTYPE_FP8_E5M2:
    case TERN_DTYPE_FP8_E4M3_NEURON: return 1;
    case TERN_DTYPE_INT8:
    case TERN_DTYPE_UINT8:
    case TERN_DTYPE_INT16:
    case TERN_DTYPE_UINT16:
    case TERN_DTYPE_INT32:
    case TERN_DTYPE_UINT32:
    case TERN_DTYPE_COUNT: return 0;
    }
    return 0; /* a value outside the enum (the rules check dtype < TERN_DTYPE_COUNT first) */
}

static int is_fp32_class(tern_dtype t) { return t == TERN_DTYPE_FP32 || t == TERN_DTYPE_TF32; }

static int is_fp8(tern_dtype t)
{
    return t == TERN_DTYPE_FP8_E4M3 || t == TERN_DTYPE_FP8_E5M2 || t == TERN_DTYPE_FP8_E4M3_NEURON;
}

/* The PE family's opcodes, for its switches: each entry point (end of file) passes its own, so a new PE row needs a
 * new member here and -Wswitch then names every switch that must handle it. */
typedef enum { PE_LOAD_STATIONARY, PE_MULTIPLY_MOVING, PE_TRANSPOSE_PE } pe_op;

static tern_status check_tensor(const tern_core *core, const exec_ctx *cx, const tern_instr *ins, pe_op op,
                                tern_error *err)
{
    const tern_core_config *c = &core->cfg;
    tern_status st;
    const tern_ap *a = &ins->ap[TERN_AP_IN0], *d = &ins->ap[TERN_AP_DST];
    if ((st = rules_check_ap(core, cx, ins, TERN_AP_IN0, REACH_SBUF, err)))
        return st;
    if (!tensor_input_dtype_ok((tern_dtype)a->dtype))
        return rules_fail(err, TERN_ERR_INVALID, cx, ins, TERN_AP_IN0,
                          "dtype %s not a TensorE input (fp8, bf16, fp16, tf32, fp32)", tern_dtype_name((tern_dtype)a->dtype));
    uint64_t free = tern_ap_free_elems(a);
    if (ins->flags & TERN_FLAG_DOUBLE_ROW) {
        /* NeuronCore-v3 double-row FP8 (trainium-arch.md §3): K up to 256 as [128 partitions, 2, F]; each PE
         * does two FP8 MACs per cycle. */
        if (op == PE_TRANSPOSE_PE)
            return rules_fail(err, TERN_ERR_INVALID, cx, ins, -1, "double-row mode cannot combine with transpose mode");
        if (c->generation < 3)
            return rules_fail(err, TERN_ERR_UNSUPPORTED, cx, ins, -1,
                              "double-row FP8 needs NeuronCore-v3 or later (this core is v%d)", c->generation);
        if (!is_fp8((tern_dtype)a->dtype))
            return rules_fail(err, TERN_ERR_INVALID, cx, ins, TERN_AP_IN0, "double-row mode needs an fp8 dtype, got %s",
                              tern_dtype_name((tern_dtype)a->dtype));
        if (a->ndims != 2 || a->dims[0].num != 2)
            return rules_fail(err, TERN_ERR_INVALID, cx, ins, TERN_AP_IN0,
                              "double-row operand must be [P, 2, F] (outer free dimension exactly 2; pad K), got %u "
                              "free dimensions with outer size %u",
                              a->ndims, a->dims[0].num);
        free = a->dims[1].num;
    }
    switch (op) {
    case PE_LOAD_STATIONARY:
        if (a->num_partitions > c->pe_rows)
            return rules_fail(err, TERN_ERR_RANGE, cx, ins, TERN_AP_IN0, "contraction (partitions) %u exceeds %u PE rows",
                              a->num_partitions, c->pe_rows);
        if (free > c->pe_cols)
            return rules_fail(err, TERN_ERR_RANGE, cx, ins, TERN_AP_IN0,
                              "stationary free size %llu exceeds %u PE columns", (unsigned long long)free, c->pe_cols);
        return TERN_OK;
    case PE_MULTIPLY_MOVING: {
        if ((st = rules_check_ap(core, cx, ins, TERN_AP_DST, REACH_PSUM, err)))
            return st;
        if (a->num_partitions > c->pe_rows)
            return rules_fail(err, TERN_ERR_RANGE, cx, ins, TERN_AP_IN0, "contraction (partitions) %u exceeds %u PE rows",
                              a->num_partitions, c->pe_rows);
        tern_dtype dt = (tern_dtype)d->dtype;
        if (!(dt == TERN_DTYPE_FP32 || (c->generation >= 4 && dt == TERN_DTYPE_BF16)))
            return rules_fail(err, TERN_ERR_INVALID, cx, ins, TERN_AP_DST,
                              "matmul output dtype %s not allowed (fp32%s)", tern_dtype_name(dt),
                              c->generation >= 4 ? " or bf16" : "; bf16 PSUM output needs NeuronCore-v4");
        uint64_t limit = dt == TERN_DTYPE_BF16 ? 2ull * c->moving_free_max : c->moving_free_max;
        if (ins->flags & TERN_FLAG_DOUBLE_ROW)
            limit = c->moving_free_max;
        if (free > limit)
            return rules_fail(err, TERN_ERR_RANGE, cx, ins, TERN_AP_IN0, "moving free size %llu exceeds %llu",
                              (unsigned long long)free, (unsigned long long)limit);
        if (tern_ap_free_elems(d) != free)
            return rules_fail(err, TERN_ERR_INVALID, cx, ins, TERN_AP_DST,
                              "free size %llu must equal the moving free size %llu",
                              (unsigned long long)tern_ap_free_elems(d), (unsigned long long)free);
        if (d->num_partitions > c->pe_cols)
            return rules_fail(err, TERN_ERR_RANGE, cx, ins, TERN_AP_DST, "partitions %u exceed %u PE columns",
                              d->num_partitions, c->pe_cols);
        /* One accumulation group lives in one bank on v2/v3 (v4 may span the banks). */
        if (c->generation < 4 && d->offset_reg == TERN_REG_NONE) {
            uint64_t first = d->offset / c->psum_bank_bytes;
            uint64_t last = (d->offset + free * tern_dtype_size(dt) - 1) / c->psum_bank_bytes;
            if (first != last || d->ndims != 1 || d->dims[0].step != 1)
                return rules_fail(err, TERN_ERR_INVALID, cx, ins, TERN_AP_DST,
                                  "matmul output must be contiguous within one PSUM bank of %u bytes (offset %llu, "
                                  "%llu elements)",
                                  c->psum_bank_bytes, (unsigned long long)d->offset, (unsigned long long)free);
        }
        return TERN_OK;
    }
    case PE_TRANSPOSE_PE:
        if (c->generation < 3)
            return rules_fail(err, TERN_ERR_UNSUPPORTED, cx, ins, -1,
                              "transpose mode needs NeuronCore-v3 or later (this core is v%d; use a matmul with an "
                              "identity moving operand)",
                              c->generation);
        if ((st = rules_check_ap(core, cx, ins, TERN_AP_DST, REACH_PSUM, err)))
            return st;
        if (d->dtype != a->dtype && !(is_fp8((tern_dtype)a->dtype) && tern_dtype_size((tern_dtype)d->dtype) == 2))
            return rules_fail(err, TERN_ERR_INVALID, cx, ins, TERN_AP_DST, "dtype %s must match the input's %s",
                              tern_dtype_name((tern_dtype)d->dtype), tern_dtype_name((tern_dtype)a->dtype));
        if (a->num_partitions > c->pe_rows || free > c->pe_cols)
            return rules_fail(err, TERN_ERR_RANGE, cx, ins, TERN_AP_IN0, "transpose input [%u, %llu] exceeds [%u, %u]",
                              a->num_partitions, (unsigned long long)free, c->pe_rows, c->pe_cols);
        if (d->num_partitions != free || tern_ap_free_elems(d) != a->num_partitions)
            return rules_fail(err, TERN_ERR_INVALID, cx, ins, TERN_AP_DST, "shape [%u, %llu] must be [%llu, %u]",
                              d->num_partitions, (unsigned long long)tern_ap_free_elems(d), (unsigned long long)free,
                              a->num_partitions);
        return TERN_OK;
    }
    return TERN_OK;
}

static tern_status check_dynamic(tern_core *core, const exec_ctx *cx, const tern_instr *ins, tern_error *err)
{
    for (int s = 0; s < 2; s++) {
        const tern_ap *ap = &ins->ap[s];
        if (ap->ndims && ap->offset_reg != TERN_REG_NONE) {
            char what[128], label[96];
            instr_label(cx, ins, label, sizeof label);
            snprintf(what, sizeof what, "%s: operand %s", label, operand_name(s));
            tern_status st = ap_check_bounds(core, cx->engine, ap, what, err);
            if (st)
                return st;
        }
    }
    return TERN_OK;
}

static uint16_t *u16_scratch(tern_core *core, size_t n)
{
    if (core->u16_cap < n) {
        uint16_t *p = realloc(core->u16_scratch, n * sizeof *p);
        if (!p)
            return NULL;
        core->u16_scratch = p;
        core->u16_cap = n;
    }
    return core->u16_scratch;
}

/* The operand as K rows of bf16 bits for the dot-product path: straight from SBUF when it is contiguous bf16,
 * else converted from fp32 when every value is exactly a bf16 (fp8 inputs); NULL when it cannot be. */
static const uint16_t *bf16_rows(tern_core *core, const exec_ctx *cx, const tern_ap *a, uint32_t K, uint32_t W,
                                 const float *f32, size_t *stride)
{
    if (a->dtype == TERN_DTYPE_BF16 && ap_contiguous(a) && !(core->sbuf_pitch & 1)) {
        size_t pb = core->sbuf_pitch;
        int64_t reg = ap_reg_offset(core, cx->engine, a);
        const uint8_t *base = core->sbuf + (size_t)a->start_partition * pb + a->offset + (size_t)(reg * 2);
        if ((uintptr_t)base & 1)
            return NULL;
        *stride = pb / 2;
        return (const uint16_t *)(const void *)base;
    }
    if (!f32)
        return NULL;
    uint16_t *u = u16_scratch(core, (size_t)K * W);
    if (!u)
        return NULL;
    for (size_t i = 0; i < (size_t)K * W; i++) {
        uint32_t bits;
        memcpy(&bits, &f32[i], 4);
        if (bits & 0xFFFFu)
            return NULL;
        u[i] = (uint16_t)(bits >> 16);
    }
    *stride = W;
    return u;
}

static int fast_dtype(uint8_t dt)
{
    return dt == TERN_DTYPE_BF16 || dt == TERN_DTYPE_FP8_E4M3 || dt == TERN_DTYPE_FP8_E5M2 ||
           dt == TERN_DTYPE_FP8_E4M3_NEURON;
}

/* The entry of a packed-operand cache (moving or stationary) for the operand at (partition, K rows, byte offset,
 * W columns): a valid one (*hit = 1), or a free or least-recently-used one made ready to be filled (*hit = 0);
 * NULL if no memory. words: the packed form's size in 32-bit words. A multiply left running that reads the
 * victim's buffer as its panels finishes before the buffer is reallocated or refilled. */
static mov_cache_entry *cache_slot(exec_lane *lane, mov_cache_entry *cache, int n, int *live, uint64_t *tick,
                                   uint32_t start, uint32_t K, uint64_t off, uint32_t W, size_t words, int *hit)
{
    mov_cache_entry *victim = NULL;
    (*tick)++;
    for (int i = 0; i < n; i++) {
        mov_cache_entry *m = &cache[i];
        if (m->valid && m->start == start && m->parts == K && m->offset == off && m->N == W && m->K == K) {
            m->last_use = *tick;
            *hit = 1;
            return m;
        }
        if (!victim || (!m->valid && victim->valid) || (m->valid == victim->valid && m->last_use < victim->last_use))
            victim = m;
    }
    exec_lane_panels_written(lane, (const float *)(const void *)victim->pairs);
    if (victim->cap < words) {
        uint32_t *p = realloc(victim->pairs, words * sizeof *p);
        if (!p)
            return NULL;
        victim->pairs = p;
        victim->cap = words;
    }
    if (victim->valid) {
        victim->valid = 0;
        (*live)--;
    }
    victim->start = start;
    victim->parts = K;
    victim->offset = off;
    victim->bytes = (uint64_t)W * 2;
    victim->K = K;
    victim->N = W;
    victim->last_use = *tick;
    *hit = 0;
    return victim;
}

/* Pack the lazily latched stationary (load_stationary) into its panels: a multiply needs them, or SBUF under the
 * rows is about to be written (sbuf_range_written). */
void stat_materialize(tern_core *core)
{
    if (!core->stat_lazy)
        return;
    mov_cache_entry *e = core->stat_entry;
    float *panels = e ? (float *)(void *)e->pairs : core->stat_panels_own;
    /* a multiply left running may still read the core's own buffer (for an entry's, cache_slot waited) */
    exec_lane_panels_written(core->lane, panels);
    /* on this thread alone: split over the pool, it waited for a worker busy with queued work (measured slower:
     * docs/performance.md, session 21) */
    matmul_pack_panels_bf16(NULL, core->stat_rows, core->stat_stride, core->stat_k, core->stat_m, panels);
    if (e) {
        e->valid = 1;
        core->stat_cache_live++;
    }
    core->stat_panels = panels;
    core->stat_pan = 1;
    core->stat_lazy = 0;
}

/* LoadStationary: latch the operand. For bf16 operands, in the form the host's kernel reads (matmul_choose_kernel):
 * bf16 pairs when it qualifies for the dot-product path, fp32 panels for the chain; else (or also, for fp8) as
 * fp32. */
static tern_status load_stationary(tern_core *core, const exec_ctx *cx, const tern_ap *a, uint32_t K, uint32_t M,
                                   tern_error *err)
{
    /* A multiply left running (pool_post) reads only the panels it was given: a cache entry's are refilled after it
     * (cache_slot), the core's own likewise where they are packed (stat_materialize, the fp32 latch's pack). */
    core->stat_lazy = 0;
    core->stat_fast = 0;
    core->stat_f32 = 0;
    core->stat_pan = 0;
    const int is_auto = core->opts.matmul_path == TERN_MATMUL_AUTO;
    int want_fast = is_auto && core->mm_dp && fast_dtype(a->dtype);
    core->stat_pairs = core->stat_pairs_own;
    core->stat_panels = core->stat_panels_own;
    if (is_auto && !core->mm_dp && a->dtype == TERN_DTYPE_BF16) {
        size_t stride;
        const uint16_t *rows = bf16_rows(core, cx, a, K, M, NULL, &stride);
        if (rows) {
            /* As the pairs below: the panels of an SBUF operand latched again are reused. */
            int hit = 0;
            uint64_t off = (uint64_t)((const uint8_t *)rows - core->sbuf) % core->sbuf_pitch;
            mov_cache_entry *e = cache_slot(core->lane, core->stat_cache, STAT_CACHE_ENTRIES, &core->stat_cache_live,
                                            &core->mov_cache_tick, a->start_partition, K, off, M,
                                            matmul_panel_floats(K, M), &hit);
            if (e && hit) {
                core->stat_panels = (float *)(void *)e->pairs;
                core->stat_pan = 1;
                return TERN_OK;
            }
            /* packed when a multiply needs the panels (stat_materialize); a transpose reads the rows in place */
            core->stat_lazy = 1;
            core->stat_rows = rows;
            core->stat_stride = stride;
            core->stat_entry = e;
            core->stat_k = K;
            core->stat_m = M;
            core->stat_p0 = a->start_partition;
            core->stat_b0 = (int64_t)off;
            core->stat_b1 = (int64_t)(off + (uint64_t)M * 2);
            return TERN_OK;
        }
    }
    if (want_fast && a->dtype == TERN_DTYPE_BF16) {
        size_t stride;
        const uint16_t *rows = bf16_rows(core, cx, a, K, M, NULL, &stride);
        if (rows) {
            /* The same SBUF operand latched again (a layer's transposed rows, once per output tile): its pairs
             * are reused until SBUF under them is written. */
            int hit = 0;
            uint64_t off = (uint64_t)((const uint8_t *)rows - core->sbuf) % core->sbuf_pitch;
            mov_cache_entry *e = cache_slot(core->lane, core->stat_cache, STAT_CACHE_ENTRIES, &core->stat_cache_live,
                                            &core->mov_cache_tick, a->start_partition, K, off, M,
                                            (size_t)(K + 1) / 2 * M, &hit);
            if (e && hit) {
                core->stat_pairs = e->pairs;
                core->stat_fast = 1;
                return TERN_OK;
            }
            if (matmul_pack_pairs(rows, stride, K, M, e ? e->pairs : core->stat_pairs)) {
                if (e) {
                    e->valid = 1;
                    core->stat_cache_live++;
                    core->stat_pairs = e->pairs;
                }
                core->stat_fast = 1;
                return TERN_OK;
            }
        }
    }
    tern_status st = ap_gather_f32(core, cx->engine, a, core->stationary, err);
    if (st)
        return st;
    core->stat_f32 = 1;
    if (want_fast) {
        size_t stride;
        const uint16_t *rows = bf16_rows(core, cx, a, K, M, core->stationary, &stride);
        core->stat_fast = rows && matmul_pack_pairs(rows, stride, K, M, core->stat_pairs);
    }
    return TERN_OK;
}

/* A path that accumulates onto PSUM's own rows: the row kept for them (psum_lazy.c), if any, written out first. */
static const float *rows_written_out(tern_core *core, const exec_ctx *cx, const tern_ap *d, const float *row)
{
    if (row)
        psum_lazy_flush_dst(core, cx->engine, d);
    return NULL;
}

/* Do the M values of a one-row stationary all have the same bits? */
static int stationary_uniform(const float *s, uint32_t M)
{
    uint32_t b0, b;
    memcpy(&b0, &s[0], 4);
    for (uint32_t m = 1; m < M; m++) {
        memcpy(&b, &s[m], 4);
        if (b != b0)
            return 0;
    }
    return 1;
}

/* The stationary as fp32 for the general paths (unpacked from the pairs or panels when only those were kept). */
static void stationary_f32(tern_core *core)
{
    if (core->stat_f32)
        return;
    uint32_t K = core->stat_k, M = core->stat_m;
    if (core->stat_pan) {
        matmul_panels_to_f32(core->stat_panels, K, M, core->stationary);
        core->stat_f32 = 1;
        return;
    }
    for (uint32_t k = 0; k < K; k++)
        for (uint32_t m = 0; m < M; m++) {
            uint32_t pair = core->stat_pairs[(size_t)(k / 2) * M + m];
            uint32_t bits = (k % 2 == 0 ? pair >> 16 : pair & 0xFFFFu) << 16;
            memcpy(&core->stationary[(size_t)k * M + m], &bits, 4);
        }
    core->stat_f32 = 1;
}


/* Is the bf16 moving operand (in place in SBUF) the K x K identity? The last one found is remembered by its place
 * until SBUF there is written (sbuf_range_written). */
static int moving_is_identity(tern_core *core, const tern_ap *a, const uint16_t *rows, size_t stride, uint32_t K,
                              uint32_t N)
{
    if (K != N)
        return 0;
    int64_t b0 = (int64_t)((size_t)((const uint8_t *)rows - core->sbuf) % core->sbuf_pitch);
    if (core->ident_valid && core->ident_p0 == a->start_partition && core->ident_k == K && core->ident_b0 == b0)
        return 1;
    if (!matmul_bf16_is_identity(rows, stride, K, N))
        return 0;
    core->ident_valid = 1;
    core->ident_p0 = a->start_partition;
    core->ident_k = K;
    core->ident_b0 = b0;
    return 1;
}

/* The PSUM rows of a plain fp32 destination (row m at the result + m * psum_stride bytes). */
static size_t psum_stride(const tern_core *core) { return core->psum_pitch; }
static uint8_t *psum_rows(tern_core *core, const exec_ctx *cx, const tern_ap *d)
{
    int64_t reg = ap_reg_offset(core, cx->engine, d);
    return core->psum + (size_t)d->start_partition * psum_stride(core) + d->offset + (size_t)(reg * 4);
}

tern_pool *core_pool(tern_core *core)
{
    if (!core->pool)
        core->pool = pool_create(core->opts.threads ? core->opts.threads : pool_default_threads());
    return core->pool;
}

static tern_status exec_tensor(tern_core *core, const exec_ctx *cx, const tern_instr *ins, pe_op op, tern_error *err)
{
    tern_status st = check_dynamic(core, cx, ins, err);
    if (st)
        return st;
    const tern_ap *a = &ins->ap[TERN_AP_IN0], *d = &ins->ap[TERN_AP_DST];
    uint32_t K = a->num_partitions, N = (uint32_t)tern_ap_free_elems(a);
    if (ins->flags & TERN_FLAG_DOUBLE_ROW) {
        /* [P, 2, F] gathers densely as (p, r, f) = rows p*2 + r of F: a contraction of 2P, k = p*2 + r. */
        K *= 2;
        N /= 2;
    }
    switch (op) {
    case PE_LOAD_STATIONARY:
        if ((st = load_stationary(core, cx, a, K, N, err)))
            return st;
        core->stat_k = K;
        core->stat_m = N;
        core->stat_dtype = a->dtype;
        core->stat_loaded = 1;
        return TERN_OK;
    case PE_MULTIPLY_MOVING: {
        if (!core->stat_loaded)
            return rules_fail(err, TERN_ERR_INVALID, cx, ins, -1, "no stationary operand loaded (load_stationary first)");
        if (K != core->stat_k)
            return rules_fail(err, TERN_ERR_INVALID, cx, ins, TERN_AP_IN0,
                              "contraction %u differs from the stationary operand's %u", K, core->stat_k);
        if (d->num_partitions != core->stat_m)
            return rules_fail(err, TERN_ERR_INVALID, cx, ins, TERN_AP_DST,
                              "partitions %u must equal the stationary free size %u", d->num_partitions, core->stat_m);
        if (is_fp32_class((tern_dtype)a->dtype) != is_fp32_class((tern_dtype)core->stat_dtype))
            return rules_fail(err, TERN_ERR_INVALID, cx, ins, TERN_AP_IN0,
                              "dtype %s cannot multiply stationary %s (fp32/tf32 pair only with fp32/tf32)",
                              tern_dtype_name((tern_dtype)a->dtype), tern_dtype_name((tern_dtype)core->stat_dtype));
        int acc = (ins->flags & TERN_FLAG_ACCUMULATE) != 0;
        if (acc && !psum_is_matmul_group(core, d))
            return rules_fail(err, TERN_ERR_INVALID, cx, ins, TERN_AP_DST,
                              "accumulate into PSUM not last written by a matmul group (undefined on the hardware; "
                              "start the group with an overwriting matmul)");
        uint32_t M = core->stat_m;
        int dst_plain = d->dtype == TERN_DTYPE_FP32 && ap_contiguous(d);
        /* PSUM under an accumulating multiply kept as one broadcast row (a bias: psum_lazy_record below): the fp32
         * chain adds its sums to the row; every other path has the rows written out first */
        const float *acc_row = acc ? psum_lazy_row(core, cx->engine, d) : NULL;
        if (!acc) /* every path writes all of d: regions kept as rows under it are dropped or cut (psum_lazy.c) */
            psum_lazy_overwritten(core, cx->engine, d);
        if (core->stat_lazy) {
            /* a transpose (identity moving operand) reads the latched rows in place; anything else packs them */
            size_t stride = 0;
            const uint16_t *rows = dst_plain && a->dtype == TERN_DTYPE_BF16 && !(ins->flags & TERN_FLAG_DOUBLE_ROW)
                                       ? bf16_rows(core, cx, a, K, N, NULL, &stride)
                                       : NULL;
            if (rows && moving_is_identity(core, a, rows, stride, K, N)) {
                acc_row = rows_written_out(core, cx, d, acc_row);
                if (matmul_transpose_bf16(core->stat_rows, core->stat_stride, K, M, psum_rows(core, cx, d),
                                          psum_stride(core), acc)) {
                    psum_mark(core, d, 1);
                    return TERN_OK;
                }
            }
            stat_materialize(core);
        }
        float *x = core_scratch(core, 0, (size_t)K * N);
        if (!x)
            return rules_fail(err, TERN_ERR_NOMEM, cx, ins, -1, "out of host memory for a %ux%ux%u matmul", K, M, N);
        int have_x = 0, done = 0;
        if (core->stat_fast && dst_plain && fast_dtype(a->dtype)) {
            size_t stride = 0;
            const uint16_t *rows = bf16_rows(core, cx, a, K, N, NULL, &stride);
            if (!rows) { /* fp8 or strided: through fp32 */
                if ((st = ap_gather_f32(core, cx->engine, a, x, err)))
                    return st;
                have_x = 1;
                rows = bf16_rows(core, cx, a, K, N, x, &stride);
            }
            size_t npairs = (size_t)(K + 1) / 2 * N;
            /* Straight from SBUF: a moving operand packed before (and not written since) is reused. */
            mov_cache_entry *slot = NULL;
            int cached = 0;
            if (rows && !have_x) {
                uint64_t off = (uint64_t)((const uint8_t *)rows - core->sbuf) % core->sbuf_pitch;
                slot = cache_slot(core->lane, core->mov_cache, MOV_CACHE_ENTRIES, &core->mov_cache_live, &core->mov_cache_tick,
                                  a->start_partition, K, off, N, npairs, &cached);
            }
            uint32_t *pairs_buf = slot ? slot->pairs : NULL;
            if (rows && !slot) {
                if (core->mov_pairs_cap < npairs) {
                    uint32_t *p = realloc(core->mov_pairs, npairs * sizeof *p);
                    if (p) {
                        core->mov_pairs = p;
                        core->mov_pairs_cap = npairs;
                    }
                }
                if (core->mov_pairs_cap >= npairs)
                    pairs_buf = core->mov_pairs;
            }
            if (rows && pairs_buf) {
                acc_row = rows_written_out(core, cx, d, acc_row);
                size_t pb = psum_stride(core);
                bf16_job job;
                memset(&job, 0, sizeof job);
                job.s = core->stat_pairs;
                job.x_rows = rows;
                job.x_stride = stride;
                job.x_pairs = pairs_buf;
                job.prepacked = cached;
                job.K = K;
                job.M = M;
                job.N = N;
                job.out = psum_rows(core, cx, d);
                job.out_stride = pb;
                job.accumulate = acc;
                done = matmul_bf16_run(core_pool(core), &job);
                if (slot && done && !cached) {
                    slot->valid = 1;
                    core->mov_cache_live++;
                }
            }
        }
        if (!done && !core->stat_fast && dst_plain && a->dtype == TERN_DTYPE_BF16 &&
            !(ins->flags & TERN_FLAG_DOUBLE_ROW) && core->opts.matmul_path == TERN_MATMUL_AUTO) {
            /* The fp32 chain (hosts where it is the faster kernel, or without the bf16 dot product): it reads the
             * bf16 rows in place and writes the PSUM rows directly; a transpose (identity moving operand) copies
             * the panels straight to the PSUM rows. */
            size_t stride = 0;
            const uint16_t *rows = bf16_rows(core, cx, a, K, N, NULL, &stride);
            if (rows && core->stat_pan && moving_is_identity(core, a, rows, stride, K, N)) {
                /* a transpose through the array, from the panels straight to the PSUM rows */
                acc_row = rows_written_out(core, cx, d, acc_row);
                size_t pb = psum_stride(core);
                uint8_t *o = psum_rows(core, cx, d);
                done = matmul_identity_panels(core->stat_panels, K, M, o, pb, acc);
            } else if (rows && !moving_is_identity(core, a, rows, stride, K, N)) {
                if (!core->stat_pan) { /* latched as fp32 (an fp8 or strided operand): panels once per latch */
                    stationary_f32(core);
                    exec_lane_panels_written(core->lane, core->stat_panels_own);
                    matmul_pack_panels_f32(core->stationary, K, M, core->stat_panels_own);
                    core->stat_panels = core->stat_panels_own;
                    core->stat_pan = 1;
                }
                size_t pb = psum_stride(core);
                uint8_t *o = psum_rows(core, cx, d);
                core->mm_panels = core->stat_panels;
                done = matmul_f32_bf16x_run(core_pool(core), core->stat_panels, rows, stride, o, pb, K, M, N, acc,
                                            acc_row, core->mm_post ? &core->mm_job : NULL);
                if (done && acc_row)
                    psum_lazy_consumed(core, cx->engine, d);
            }
        }
        if (!done) {
            acc_row = rows_written_out(core, cx, d, acc_row);
            stationary_f32(core);
            float *out = core_scratch(core, 1, (size_t)M * N);
            float *old = acc ? core_scratch(core, 2, (size_t)M * N) : NULL;
            if (!out || (acc && !old))
                return rules_fail(err, TERN_ERR_NOMEM, cx, ins, -1, "out of host memory for a %ux%ux%u matmul", K, M, N);
            /* an fp32 moving operand in rows of N on K partitions is read where it lies, not gathered first */
            const float *xp = x;
            size_t xs = N;
            if (!have_x) {
                size_t xlen = 0, xps = 0;
                const uint8_t *xr = a->dtype == TERN_DTYPE_FP32 && a->num_partitions == K
                                        ? ap_onchip_rows(core, cx->engine, a, &xlen, &xps)
                                        : NULL;
                if (xr && xlen == N && (uintptr_t)xr % 4 == 0 && xps % 4 == 0) {
                    xp = (const float *)(const void *)xr;
                    xs = xps / 4;
                } else if ((st = ap_gather_f32(core, cx->engine, a, x, err))) {
                    return st;
                }
            }
            /* A uniform stationary times one row (a bias broadcast over the partitions: K = 1, every s[m] the same
             * bits) overwriting PSUM: every output row is the same row, kept as that row until the bank is next
             * touched (psum_lazy_before), usually by the multiply that accumulates onto it. */
            if (K == 1 && dst_plain && !acc && core->opts.matmul_path != TERN_MATMUL_REFERENCE &&
                stationary_uniform(core->stationary, M) &&
                matmul_outer_rows(core->stationary, xp, (uint8_t *)out, 0, 1, N, 0) &&
                psum_lazy_record(core, cx->engine, d, out, N)) {
                psum_mark(core, d, 1);
                return TERN_OK;
            }
            if (K == 1 && dst_plain && core->opts.matmul_path != TERN_MATMUL_REFERENCE &&
                matmul_outer_rows(core->stationary, xp, psum_rows(core, cx, d), psum_stride(core), M, N, acc)) {
                psum_mark(core, d, 1);
                return TERN_OK;
            }
            if (core->opts.matmul_path == TERN_MATMUL_REFERENCE)
                matmul_reference_rows(core->stationary, xp, xs, out, K, M, N);
            else if (matmul_identity_rows(core->stationary, xp, xs, out, K, M, N))
                ; /* a transpose through the array */
            else if (matmul_f32_supported())
                matmul_f32_run_rows(core_pool(core), core->stationary, xp, xs, out, K, M, N);
            else
                matmul_reference_rows(core->stationary, xp, xs, out, K, M, N);
            /* an fp32 destination in rows of N on M partitions (the PSUM tile of an fp32 matmul): the sum, or the
             * product, goes straight into the rows, one pass instead of gathering the old rows, adding into the
             * buffer and scattering it back (fp32 gathers and scatters are plain copies: the same bits, the old
             * value the first operand of each add as below) */
            size_t len = 0, ps = 0;
            uint8_t *rows_d = d->dtype == TERN_DTYPE_FP32 && d->num_partitions == M
                                  ? ap_onchip_rows(core, cx->engine, d, &len, &ps)
                                  : NULL;
            if (rows_d && len == N && (uintptr_t)rows_d % 4 == 0 && ps % 4 == 0) {
                psum_mark(core, d, 0); /* what the scatter does before writing */
                sbuf_written(core, cx->engine, d);
                for (uint32_t m = 0; m < M; m++) {
                    float *o = (float *)(void *)(rows_d + (size_t)m * ps);
                    const float *r = out + (size_t)m * N;
                    if (acc)
                        for (uint32_t n = 0; n < N; n++)
                            o[n] = o[n] + r[n];
                    else
                        memcpy(o, r, (size_t)N * 4);
                }
                psum_mark(core, d, 1);
                return TERN_OK;
            }
            if (acc) {
                if ((st = ap_gather_f32(core, cx->engine, d, old, err)))
                    return st;
                for (size_t i = 0; i < (size_t)M * N; i++)
                    out[i] = old[i] + out[i];
            }
            if ((st = ap_scatter_f32(core, cx->engine, d, out, sr_stream_of(cx), err)))
                return st;
        }
        psum_mark(core, d, 1);
        return TERN_OK;
    }
    case PE_TRANSPOSE_PE: {
        uint32_t P = K, F = N;
        float *x = core_scratch(core, 0, (size_t)P * F), *y = core_scratch(core, 1, (size_t)P * F);
        if (!x || !y)
            return rules_fail(err, TERN_ERR_NOMEM, cx, ins, -1, "out of host memory");
        if ((st = ap_gather_f32(core, cx->engine, a, x, err)))
            return st;
        for (uint32_t p = 0; p < P; p++)
            for (uint32_t f = 0; f < F; f++)
                y[(size_t)f * P + p] = x[(size_t)p * F + f];
        if ((st = ap_scatter_f32(core, cx->engine, d, y, sr_stream_of(cx), err)))
            return st;
        psum_mark(core, d, 0);
        return TERN_OK;
    }
    }
    return TERN_OK;
}

/* ---- entry points (declared from the instruction table: rules.h, core_internal.h) ---- */

/* What rules_check_instr and the PE rules guarantee: a PE-family instruction on TensorE, its moving/stationary
 * input in SBUF as a TensorE input dtype within the PE rows, its output (matmul, transpose) in PSUM within the PE
 * columns. */
static void pe_entry(const tern_core *core, const exec_ctx *cx, const tern_instr *ins, pe_op op)
{
    exec_assert_entry(cx, ins, TERN_ISA_FAMILY_PE);
    TERN_ASSERT(cx->engine == TERN_ENGINE_TENSOR);
    exec_assert_operand(core, ins, TERN_AP_IN0, EXEC_MEM_BIT(TERN_MEM_SBUF));
    TERN_ASSERT(tensor_input_dtype_ok((tern_dtype)ins->ap[TERN_AP_IN0].dtype));
    TERN_ASSERT(ins->ap[TERN_AP_IN0].num_partitions <= core->cfg.pe_rows);
    if (op != PE_LOAD_STATIONARY) {
        exec_assert_operand(core, ins, TERN_AP_DST, EXEC_MEM_BIT(TERN_MEM_PSUM));
        TERN_ASSERT(ins->ap[TERN_AP_DST].num_partitions <= core->cfg.pe_cols);
    }
    if (op == PE_MULTIPLY_MOVING) {
        uint8_t dt = ins->ap[TERN_AP_DST].dtype;
        TERN_ASSERT(dt == TERN_DTYPE_FP32 || dt == TERN_DTYPE_BF16);
    }
}

#define PE_OP(ID)                                                                                                  \
    tern_status check_op_##ID(const tern_core *core, const exec_ctx *cx, const tern_instr *ins, size_t count,      \
                              tern_error *err)                                                                   \
    {                                                                                                              \
        (void)count;                                                                                               \
        return check_tensor(core, cx, ins, PE_##ID, err);                                                          \
    }                                                                                                              \
    tern_status exec_op_##ID(tern_core *core, const exec_ctx *cx, const tern_instr *ins, tern_error *err)         \
    {                                                                                                              \
        pe_entry(core, cx, ins, PE_##ID);                                                                          \
        return exec_tensor(core, cx, ins, PE_##ID, err);                                                           \
    }

PE_OP(LOAD_STATIONARY)
PE_OP(MULTIPLY_MOVING)
PE_OP(TRANSPOSE_PE)
