/* The timing model's per-instruction rules: how many cycles an instruction occupies its engine (the documented
 * cost rules, calibration.md C2 / trainium-arch.md §7), how much later its result is visible (access latency),
 * and the DMA transfer model (per-engine FIFOs, per-descriptor and per-transfer costs, shared HBM bandwidth).
 * Every constant comes from the core's tern_timing_config, i.e. from the machine file. docs/calibration.md
 * lists each rule with its source and tests/sim/test_timing.c checks each one to the cycle. */
#include <math.h>
#include <string.h>

#include "sim/timing.h"

static uint64_t max_u64(uint64_t a, uint64_t b) { return a > b ? a : b; }

static int is16(uint8_t dt) { return dt == TERN_DTYPE_BF16 || dt == TERN_DTYPE_FP16; }
static int is_fp32_class(uint8_t dt) { return dt == TERN_DTYPE_FP32 || dt == TERN_DTYPE_TF32; }
static int used(const tern_ap *ap) { return ap->ndims != 0; }
static int unit_stride(const tern_ap *ap) { return ap->ndims && ap->dims[ap->ndims - 1].step == 1; }

/* Elements per partition an instruction streams: the larger of its destination's and first input's. */
static uint64_t free_elems(const tern_instr *ins)
{
    uint64_t n = 0;
    if (used(&ins->ap[TERN_AP_DST]))
        n = tern_ap_free_elems(&ins->ap[TERN_AP_DST]);
    if (used(&ins->ap[TERN_AP_IN0]))
        n = max_u64(n, tern_ap_free_elems(&ins->ap[TERN_AP_IN0]));
    return n;
}

/* NeuronCore-v3+ VectorE performance modes (trainium-arch.md §4.1): the speed-up of copies / tensor_scalar and
 * of tensor_tensor, bounded by the machine's 16-bit elements per cycle over its lanes (4x on v3, 1x on v2). */
static double vector_peak(const tern_timing_config *t) { return t->vector_epc_16 / (double)(t->lanes ? t->lanes : 128); }

static double mode_copy(const tern_timing_config *t, const tern_instr *ins) /* tensor_copy, tensor_scalar */
{
    double peak = vector_peak(t);
    if (peak <= 1.0)
        return 1.0;
    const tern_ap *d = &ins->ap[TERN_AP_DST], *a = &ins->ap[TERN_AP_IN0];
    if (!is16(d->dtype) || !is16(a->dtype))
        return 1.0;
    int sbuf = d->mem == TERN_MEM_SBUF && a->mem == TERN_MEM_SBUF;
    if (sbuf && unit_stride(d) && unit_stride(a))
        return peak;              /* 4x */
    return peak >= 2 ? 2.0 : peak; /* 2x: non-contiguous, or one side in PSUM */
}

static double mode_tensor_tensor(const tern_timing_config *t, const tern_instr *ins)
{
    double peak = vector_peak(t);
    if (peak <= 1.0)
        return 1.0;
    const tern_ap *d = &ins->ap[TERN_AP_DST], *a = &ins->ap[TERN_AP_IN0], *b = &ins->ap[TERN_AP_IN1];
    if (is16(d->dtype) && is16(a->dtype) && is16(b->dtype) && a->mem == TERN_MEM_SBUF && b->mem == TERN_MEM_SBUF)
        return peak >= 2 ? 2.0 : peak;
    return 1.0;
}

static uint64_t at_least(uint64_t min_ii, uint64_t c) { return c > min_ii ? c : min_ii; }

/* The cost rules, one function per name in the table's COST column (cost_<COST>); each returns the cycles the
 * instruction occupies its engine. stat_m and stat_dtype describe the loaded stationary operand. */
#define COST_RULE(name)                                                                                            \
    static uint64_t cost_##name(const tern_timing_config *t, tern_engine e, const tern_instr *ins, uint32_t stat_m, \
                                uint8_t stat_dtype)
#define COST_UNUSED (void)t, (void)e, (void)ins, (void)stat_m, (void)stat_dtype

COST_RULE(ls)
{
    COST_UNUSED;
    const tern_ap *a = &ins->ap[TERN_AP_IN0];
    /* Fast LoadStationary: up to 4x faster than a matmul of the same free size. */
    double passes = is_fp32_class(a->dtype) ? t->fp32_matmul_factor : 1.0;
    uint64_t m = (ins->flags & TERN_FLAG_DOUBLE_ROW) ? a->dims[1].num : tern_ap_free_elems(a);
    return max_u64(1, (uint64_t)ceil((double)m * passes / t->fast_ls_factor));
}

COST_RULE(mm)
{
    COST_UNUSED;
    const tern_ap *a = &ins->ap[TERN_AP_IN0];
    /* max(min(64, N_stationary), N_moving), 4x for fp32 (calibration.md C2). */
    /* double-row FP8: two rows per PE per cycle, the time of one 16-bit matmul of the same free size */
    uint64_t mov = (ins->flags & TERN_FLAG_DOUBLE_ROW) ? a->dims[1].num : tern_ap_free_elems(a);
    uint64_t init = stat_m < t->mm_init_latency ? stat_m : t->mm_init_latency;
    uint64_t c = max_u64(init, mov);
    if (is_fp32_class(a->dtype) || is_fp32_class(stat_dtype))
        c = (uint64_t)ceil((double)c * t->fp32_matmul_factor);
    return c;
}

COST_RULE(pe_transpose)
{
    COST_UNUSED;
    const tern_ap *a = &ins->ap[TERN_AP_IN0];
    uint64_t P = a->num_partitions, F = tern_ap_free_elems(a);
    return max_u64(P, F < 64 ? F : 64);
}

COST_RULE(activation)
{
    COST_UNUSED;
    uint64_t c = at_least(t->min_ii, free_elems(ins));
    if (ins->flags & TERN_FLAG_REDUCE)
        c += t->min_ii; /* activation with reduce: + MIN_II */
    return c;
}

/* GpSimd's own instructions: a fixed start plus one element per cycle. */
COST_RULE(iota)
{
    COST_UNUSED;
    return t->gpsimd_start + free_elems(ins);
}
COST_RULE(affine_select)
{
    COST_UNUSED;
    return t->gpsimd_start + free_elems(ins);
}
COST_RULE(partition_reduce)
{
    COST_UNUSED;
    return t->gpsimd_start + free_elems(ins);
}

COST_RULE(text)
{
    COST_UNUSED;
    /* Not published (a GpSimd library routine): modelled as one cell byte per cycle on every partition's lane
     * (8 cores x 16 lanes = 128 partitions), i.e. cells per partition x cell bytes. */
    const tern_ap *num = ins->opcode == TERN_OP_TEXT_PARSE ? &ins->ap[TERN_AP_DST] : &ins->ap[TERN_AP_IN0];
    return t->gpsimd_start + tern_ap_free_elems(num) * (uint64_t)(ins->imm_i0 > 0 ? ins->imm_i0 : 1);
}

COST_RULE(dma)
{
    COST_UNUSED;
    return t->min_ii; /* the trigger on the sequencer (descriptors precomputed) */
}

COST_RULE(control)
{
    COST_UNUSED;
    return 1; /* sequencer control: not published; one cycle */
}

/* The VECTOR family's instructions, which GpSimdE and ScalarE may also issue: on those engines a fixed rule; on
 * VectorE the rule's own cycles `c`, sped up by the performance mode, then at least the dynamic-copy initiation
 * interval for a register-addressed operand. */
static uint64_t elementwise(const tern_timing_config *t, tern_engine e, const tern_instr *ins, uint64_t c, double mode)
{
    const uint64_t N = free_elems(ins), II = t->min_ii;
    if (e == TERN_ENGINE_GPSIMD)
        return t->gpsimd_start + N;
    if (e == TERN_ENGINE_SCALAR)
        return at_least(II, N);
    if (mode > 1.0)
        c = at_least(II, (uint64_t)ceil((double)c / mode));
    /* Register-addressed (dynamic) operands: at least the dynamic-copy initiation interval. */
    for (int s = 0; s < 2; s++)
        if (used(&ins->ap[s]) && ins->ap[s].offset_reg != TERN_REG_NONE)
            c = max_u64(c, t->dynamic_copy_min_ii);
    return c;
}

#define VECTOR_COST_RULE(name, mode, cycles)                                                                       \
    COST_RULE(name)                                                                                                \
    {                                                                                                              \
        COST_UNUSED;                                                                                               \
        if (e != TERN_ENGINE_VECTOR)                                                                               \
            return elementwise(t, e, ins, 0, 1.0);                                                                 \
        const uint64_t N = free_elems(ins), II = t->min_ii;                                                        \
        const tern_ap *d = &ins->ap[TERN_AP_DST], *a = &ins->ap[TERN_AP_IN0], *b = &ins->ap[TERN_AP_IN1];          \
        (void)N, (void)II, (void)d, (void)a, (void)b;                                                              \
        return elementwise(t, e, ins, (cycles), (mode));                                                           \
    }

VECTOR_COST_RULE(tensor_tensor, mode_tensor_tensor(t, ins),
                 at_least(II, ((a->mem == TERN_MEM_PSUM) != (b->mem == TERN_MEM_PSUM) ||
                               (a->dtype == TERN_DTYPE_BF16 && b->dtype == TERN_DTYPE_BF16 &&
                                d->dtype == TERN_DTYPE_BF16 && a->mem == TERN_MEM_SBUF && b->mem == TERN_MEM_SBUF &&
                                unit_stride(a) && unit_stride(b) &&
                                (ins->op0 == TERN_ALU_ADD || ins->op0 == TERN_ALU_MULT ||
                                 ins->op0 == TERN_ALU_SUBTRACT)))
                                  ? N
                                  : 2 * N))
VECTOR_COST_RULE(tensor_scalar, mode_copy(t, ins), at_least(II, N))
VECTOR_COST_RULE(tensor_copy, mode_copy(t, ins), at_least(II, N))
VECTOR_COST_RULE(bn_stats, 1.0, at_least(II, N))
VECTOR_COST_RULE(ve_transpose, 1.0, at_least(II, N))
VECTOR_COST_RULE(memset, 1.0, at_least(II, (is16(d->dtype) && ins->imm0.f == 0.0f) ? (N + 1) / 2 : N))
VECTOR_COST_RULE(scalar_tensor_tensor, 1.0,
                 (a->dtype == TERN_DTYPE_BF16 && ins->op0 == TERN_ALU_SUBTRACT && ins->op1 == TERN_ALU_MULT &&
                  N % 2 == 0)
                     ? N
                     : 2 * N)
VECTOR_COST_RULE(tensor_reduce, 1.0,
                 max_u64(1, (a->dtype == TERN_DTYPE_BF16 && d->dtype == TERN_DTYPE_BF16 &&
                             (ins->op0 == TERN_ALU_ADD || ins->op0 == TERN_ALU_MAX))
                                ? (N + 1) / 2
                                : N))
VECTOR_COST_RULE(tensor_copy_predicated, 1.0,
                 at_least(II, (a->mem == TERN_MEM_PSUM) != (b->mem == TERN_MEM_PSUM) ? N : 2 * N))
VECTOR_COST_RULE(select, 1.0, at_least(II, 2 * N))
VECTOR_COST_RULE(bn_aggr, 1.0, at_least(II, 13 * (N / 3)))
VECTOR_COST_RULE(reciprocal, 1.0, at_least(II, 8 * N))
VECTOR_COST_RULE(max8, 1.0, max_u64(1, N))
VECTOR_COST_RULE(tensor_tensor_scan, 1.0, at_least(II, 2 * N))

/* The cost rule of each opcode, generated from the instruction table's COST column. */
typedef uint64_t (*cost_fn)(const tern_timing_config *t, tern_engine e, const tern_instr *ins, uint32_t stat_m,
                            uint8_t stat_dtype);
static const cost_fn cost_of[TERN_OP_COUNT] = {
#define OP(id, name, family, flags, engines, operands, cost, sem) [TERN_OP_##id] = cost_##cost,
#include "tern/isa_table.def"
#undef OP
};

uint64_t timing_cost_cycles(const tern_timing_config *t, tern_engine e, const tern_instr *ins, uint32_t stat_m,
                            uint8_t stat_dtype)
{
    TERN_ASSERT(ins->opcode < TERN_OP_COUNT); /* the scheduler runs validated programs only (rules_check_instr) */
    return cost_of[ins->opcode](t, e, ins, stat_m, stat_dtype);
}

uint64_t timing_latency_cycles(const tern_timing_config *t, tern_engine e, const tern_instr *ins)
{
    if (tern_opcode_is_control(ins->opcode))
        return 0;
    switch (e) {
    case TERN_ENGINE_VECTOR: return t->vector_static_overhead;
    case TERN_ENGINE_SCALAR:
        return t->access_init + ((ins->flags & TERN_FLAG_REDUCE) ? t->act_read_accumulator : 0);
    case TERN_ENGINE_GPSIMD: return t->access_init;
    case TERN_ENGINE_TENSOR:
    case TERN_ENGINE_SYNC:
    case TERN_ENGINE_COUNT: return 0;
    }
    return 0;
}

int64_t timing_ps(double cycles, double hz)
{
    return (int64_t)llround(cycles * 1e12 / hz);
}

/* ---- read-after-write on one engine ---- */

/* Byte span [lo, hi) of an on-chip pattern within each of its partitions; a register-addressed pattern spans the
 * whole partition (its offset is known only at run time), so it counts as overlapping. */
static void span_of(const tern_ap *ap, uint64_t *lo, uint64_t *hi)
{
    if (ap->offset_reg != TERN_REG_NONE) {
        *lo = 0;
        *hi = UINT64_MAX;
        return;
    }
    int64_t es = (int64_t)tern_dtype_size((tern_dtype)ap->dtype), a = 0, b = 0;
    for (unsigned k = 0; k < ap->ndims && k < TERN_AP_MAX_DIMS; k++) {
        int64_t d = (int64_t)ap->dims[k].step * (int64_t)(ap->dims[k].num ? ap->dims[k].num - 1 : 0) * es;
        if (d < 0)
            a += d;
        else
            b += d;
    }
    int64_t l = (int64_t)ap->offset + a;
    *lo = l > 0 ? (uint64_t)l : 0;
    *hi = ap->offset + (uint64_t)b + (uint64_t)es;
}

static int on_chip_overlap(const tern_ap *x, const tern_ap *y)
{
    if (!x->ndims || !y->ndims || x->mem != y->mem || x->mem == TERN_MEM_HBM)
        return 0;
    if (x->start_partition + x->num_partitions <= y->start_partition ||
        y->start_partition + y->num_partitions <= x->start_partition)
        return 0;
    uint64_t xl, xh, yl, yh;
    span_of(x, &xl, &xh);
    span_of(y, &yl, &yh);
    return xl < yh && yl < xh;
}

int64_t timing_raw_ready(const timing_raw *h, const tern_instr *ins)
{
    int64_t t = 0;
    for (unsigned i = 0; i < TIMING_RAW_WRITES; i++) {
        if (h->ready_ps[i] <= t)
            continue;
        for (int s = TERN_AP_IN0; s <= TERN_AP_IN2; s++)
            if (on_chip_overlap(&ins->ap[s], &h->ap[i])) {
                t = h->ready_ps[i];
                break;
            }
    }
    return t;
}

void timing_raw_note(timing_raw *h, const tern_instr *ins, int64_t ready_ps)
{
    const int slots[2] = {TERN_AP_DST, TERN_AP_EXTRA};
    for (int k = 0; k < 2; k++) {
        const tern_ap *w = &ins->ap[slots[k]];
        if (!w->ndims || w->mem == TERN_MEM_HBM)
            continue;
        h->ap[h->next] = *w;
        h->ready_ps[h->next] = ready_ps;
        h->next = (h->next + 1) % TIMING_RAW_WRITES;
    }
}

/* ---- DMA ---- */

/* Contiguous runs of one side of a transfer per partition row: the innermost dimensions that are laid out
 * back to back merge into one run; with a non-unit innermost step every element is a run of its own. Sets
 * *run_bytes to one run's length. */
static uint64_t runs_per_row(const tern_ap *ap, uint64_t *run_bytes)
{
    uint64_t es = tern_dtype_size((tern_dtype)ap->dtype);
    if (!ap->ndims) {
        *run_bytes = es;
        return 1;
    }
    int k = (int)ap->ndims - 1;
    if (ap->dims[k].step != 1) {
        *run_bytes = es;
        return tern_ap_free_elems(ap);
    }
    uint64_t len = ap->dims[k].num; /* elements in the current run */
    while (k > 0 && (uint64_t)ap->dims[k - 1].step == len) {
        len *= ap->dims[k - 1].num;
        k--;
    }
    uint64_t outer = 1;
    for (int j = 0; j < k; j++)
        outer *= ap->dims[j].num;
    *run_bytes = len * es;
    return outer;
}

/* Descriptors one side needs: its runs, each split at the descriptor size limit. An HBM side whose partition
 * rows follow each other back to back is one run (the rows merge). */
static uint64_t descriptors_of(const tern_timing_config *t, const tern_ap *ap)
{
    uint64_t rb, per_row = runs_per_row(ap, &rb), rows = ap->num_partitions ? ap->num_partitions : 1;
    uint64_t es = tern_dtype_size((tern_dtype)ap->dtype);
    if (ap->mem == TERN_MEM_HBM && per_row == 1 && rows > 1 && (uint64_t)ap->partition_step * es == rb) {
        rb *= rows;
        rows = 1;
    }
    uint64_t split = 1;
    if (t->dma_descriptor_max >= 1 && (double)rb > t->dma_descriptor_max)
        split = (uint64_t)ceil((double)rb / t->dma_descriptor_max);
    return rows * per_row * split;
}

void timing_dma_plan(const tern_timing_config *t, const tern_instr *ins, timing_dma *out)
{
    memset(out, 0, sizeof *out);
    const tern_ap *d = &ins->ap[TERN_AP_DST], *a = &ins->ap[TERN_AP_IN0];
    /* a scatter moves its source's rows (its destination pattern is the whole table) */
    const tern_ap *moved = ins->opcode == TERN_OP_DMA_SCATTER ? a : d;
    uint64_t elems = (uint64_t)moved->num_partitions * tern_ap_free_elems(moved);
    out->bytes = elems * tern_dtype_size((tern_dtype)d->dtype);
    uint64_t src_bytes = elems * tern_dtype_size((tern_dtype)a->dtype);
    if (ins->opcode == TERN_OP_DMA_GATHER) {
        /* one descriptor per gathered row */
        out->descriptors = d->num_partitions;
    } else if (ins->opcode == TERN_OP_DMA_SCATTER) {
        /* one descriptor per scattered row */
        out->descriptors = a->num_partitions;
    } else {
        uint64_t rs = descriptors_of(t, a), rd = descriptors_of(t, d);
        out->descriptors = rs > rd ? rs : rd;
    }
    if (!out->descriptors)
        out->descriptors = 1;
    out->hbm_bytes = (d->mem == TERN_MEM_HBM ? out->bytes : 0) + (a->mem == TERN_MEM_HBM ? src_bytes : 0);
    unsigned E = t->dma_engines ? t->dma_engines : 1;
    uint64_t max_bytes = out->bytes > src_bytes ? out->bytes : src_bytes;
    /* The engines: an SBUF side's partitions in groups of partitions / engines (each engine usually owns 8 of
     * the 128 partitions, nki-dma-overview.rst), so a [4, F] tile uses one engine and a [128, F] tile all 16. */
    const tern_ap *sb = d->mem == TERN_MEM_SBUF ? d : a->mem == TERN_MEM_SBUF ? a : NULL;
    unsigned group = t->dma_partitions && t->dma_partitions >= E ? t->dma_partitions / E : 1;
    uint64_t share_num = 1, share_den = 1; /* the busiest engine's share of the transfer */
    if (sb && sb->num_partitions) {
        unsigned p0 = sb->start_partition, p1 = p0 + sb->num_partitions - 1;
        unsigned g0 = p0 / group, g1 = p1 / group;
        out->first_engine = g0 % E;
        out->engines = g1 - g0 + 1 < E ? g1 - g0 + 1 : E;
        /* partitions on the busiest engine: a whole group, or all of them when they sit in one */
        uint64_t most = sb->num_partitions < group ? sb->num_partitions : group;
        if (g1 - g0 + 1 > E) /* more groups than engines (a what-if core): engines take several */
            most *= (g1 - g0 + E) / E;
        share_num = most;
        share_den = sb->num_partitions;
    } else {
        out->engines = out->descriptors < E ? (unsigned)out->descriptors : E;
        share_num = 1;
        share_den = out->engines;
    }
    uint64_t desc_e = (out->descriptors * share_num + share_den - 1) / share_den;
    double bytes_e = (double)max_bytes * (double)share_num / (double)share_den;
    double secs = (double)desc_e * t->dma_descriptor_s + bytes_e / t->dma_bandwidth;
    out->engine_ps = (int64_t)llround(secs * 1e12);
    out->fixed_ps = (int64_t)llround(t->dma_fixed_s * 1e12);
    out->ring_ps = (int64_t)llround(t->dma_transfer_s * 1e12);
    out->hbm_ps = t->hbm_bandwidth > 0 ? (int64_t)llround((double)out->hbm_bytes / t->hbm_bandwidth * 1e12) : 0;
}
