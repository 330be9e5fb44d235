/* PSUM kept as one broadcast row. A linear layer's bias reaches every partition through a K = 1 multiply of a
 * uniform stationary (a row of ones) into PSUM, which ScalarE then evacuates (BERT-base: 282 such [128, 256..512]
 * tiles per inference), or which the layer's multiplies accumulate onto. Such a region is kept as its one row instead
 * of being written (one region per bank), until something touches the bank:
 * - an accumulating multiply onto exactly the region adds its sums to the row (matmul.c's acc_row);
 * - an activation reading exactly the region reads the row for every partition (exec_ctx's lazy_in0);
 * - a multiply overwriting the region drops it, or cuts it to the columns it leaves at either end;
 * - anything else touching the bank first has the rows written out, by the committing thread where the instruction
 *   commits: no queued instruction touches the bank meanwhile (each one's commit wrote the rows out first, or it
 *   reads the row), and the bank's next record waits for whatever still reads the row (a conflict on the bank);
 * - a register-addressed PSUM operand has every region written out; so does the run's end (sched_end).
 * Results, bits and times are those of writing the rows (tests/sim/test_psum_lazy.c checks them against the reference
 * path, which never records a row). */
#include <string.h>

#include "sim/core_internal.h"

/* The bank under d (fp32 rows, contiguous, 4-byte aligned, within one bank): its region; NULL if d is none of that. */
static psum_lazy_region *lazy_at(tern_core *core, tern_engine e, const tern_ap *d, uint32_t *bank, uint64_t *off,
                                 uint32_t *n)
{
    if (d->mem != TERN_MEM_PSUM || d->dtype != TERN_DTYPE_FP32 || !ap_contiguous(d))
        return NULL;
    int64_t o = (int64_t)d->offset + ap_reg_offset(core, e, d) * 4;
    uint64_t cols = tern_ap_free_elems(d);
    uint32_t bb = core->cfg.psum_bank_bytes;
    if (o < 0 || o % 4 || cols == 0 || (uint64_t)o / bb != ((uint64_t)o + cols * 4 - 1) / bb)
        return NULL;
    *bank = (uint32_t)((uint64_t)o / bb);
    *off = (uint64_t)o;
    *n = (uint32_t)cols;
    return &core->psum_lazy[*bank];
}

static int shares_partitions(const tern_ap *ap, const psum_lazy_region *z)
{
    return ap->start_partition < z->p0 + z->np && z->p0 < (uint32_t)ap->start_partition + ap->num_partitions;
}

/* Region z's row (its first column's value first). */
static const float *lazy_row_of(const tern_core *core, const psum_lazy_region *z)
{
    return core->psum_lazy_rows + (size_t)(z - core->psum_lazy) * (core->cfg.psum_bank_bytes / 4) + z->col0;
}

static void lazy_drop(tern_core *core, psum_lazy_region *z)
{
    if (z->on) {
        z->on = 0; /* its row stays until the bank's next record, which waits for any reader of the bank (a conflict) */
        core->psum_lazy_live--;
    }
}

static void lazy_flush(tern_core *core, psum_lazy_region *z)
{
    if (!z->on)
        return;
    const float *row = lazy_row_of(core, z);
    for (uint32_t p = z->p0; p < z->p0 + z->np; p++)
        memcpy(core->psum + (size_t)p * core->psum_pitch + z->off, row, (size_t)z->n * 4);
    lazy_drop(core, z);
    core->psum_lazy_count[PSUM_LAZY_WRITTEN_OUT]++;
}

int psum_lazy_record(tern_core *core, tern_engine e, const tern_ap *d, const float *row, uint32_t n)
{
    uint32_t bank, cols;
    uint64_t off;
    psum_lazy_region *z = lazy_at(core, e, d, &bank, &off, &cols);
    if (!z || cols != n)
        return 0;
    lazy_flush(core, z); /* psum_lazy_before has written it out already where a run commits this */
    memcpy(core->psum_lazy_rows + (size_t)bank * (core->cfg.psum_bank_bytes / 4), row, (size_t)n * 4);
    z->on = 1;
    z->p0 = d->start_partition;
    z->np = d->num_partitions;
    z->off = off;
    z->n = n;
    z->col0 = 0;
    core->psum_lazy_live++;
    core->psum_lazy_count[PSUM_LAZY_RECORDED]++;
    return 1;
}

const float *psum_lazy_row(tern_core *core, tern_engine e, const tern_ap *d)
{
    if (!core->psum_lazy_live)
        return NULL;
    uint32_t bank, n;
    uint64_t off;
    psum_lazy_region *z = lazy_at(core, e, d, &bank, &off, &n);
    if (!z || !z->on || z->p0 != d->start_partition || z->np != d->num_partitions || z->off != off || z->n != n)
        return NULL;
    return lazy_row_of(core, z);
}

void psum_lazy_consumed(tern_core *core, tern_engine e, const tern_ap *d)
{
    uint32_t bank, n;
    uint64_t off;
    psum_lazy_region *z = lazy_at(core, e, d, &bank, &off, &n);
    if (z && z->on) {
        lazy_drop(core, z);
        core->psum_lazy_count[PSUM_LAZY_ACCUMULATED]++;
    }
}

void psum_lazy_flush_dst(tern_core *core, tern_engine e, const tern_ap *d)
{
    uint32_t bank, n;
    uint64_t off;
    psum_lazy_region *z = core->psum_lazy_live ? lazy_at(core, e, d, &bank, &off, &n) : NULL;
    if (z)
        lazy_flush(core, z);
}

void psum_lazy_flush_all(tern_core *core)
{
    for (uint32_t b = 0; core->psum_lazy_live && b < core->cfg.psum_banks; b++)
        lazy_flush(core, &core->psum_lazy[b]);
}

/* An overwriting multiply's destination d over region z: -1 where d covers it whole (it is dropped), 1 where d
 * covers all its partitions and its first or last columns (it is cut to the columns left), 0 otherwise (it is written
 * out before the multiply). apply: do it (where the multiply executes, past its checks; a multiply that fails them
 * leaves the region as it was). */
static int lazy_overwrite(tern_core *core, tern_engine e, const tern_ap *d, psum_lazy_region *z, int apply)
{
    if (!ap_contiguous(d) || d->start_partition > z->p0 ||
        (uint32_t)d->start_partition + d->num_partitions < z->p0 + z->np)
        return 0;
    size_t es = tern_dtype_size((tern_dtype)d->dtype);
    int64_t o = (int64_t)d->offset + ap_reg_offset(core, e, d) * (int64_t)es;
    uint64_t lo = (uint64_t)(o < 0 ? 0 : o), hi = lo + tern_ap_free_elems(d) * es;
    uint64_t zlo = z->off, zhi = zlo + (uint64_t)z->n * 4;
    if (o < 0 || hi <= zlo || lo >= zhi || (lo > zlo && hi < zhi) || lo % 4 || hi % 4)
        return 0;
    if (lo <= zlo && hi >= zhi) {
        if (apply)
            lazy_drop(core, z);
        return -1;
    }
    if (!apply)
        return 1;
    uint32_t cut = (uint32_t)(lo <= zlo ? (hi - zlo) / 4 : (zhi - lo) / 4);
    if (lo <= zlo) { /* its first columns */
        z->off += (uint64_t)cut * 4;
        z->col0 += cut;
    }
    z->n -= cut;
    return 1;
}

void psum_lazy_overwritten(tern_core *core, tern_engine e, const tern_ap *d)
{
    if (!core->psum_lazy_live || d->mem != TERN_MEM_PSUM)
        return;
    uint32_t b0, b1;
    psum_banks_of(core, d, &b0, &b1);
    for (uint32_t b = b0; b <= b1; b++) {
        psum_lazy_region *z = &core->psum_lazy[b];
        if (z->on && shares_partitions(d, z) && lazy_overwrite(core, e, d, z, 1))
            core->psum_lazy_count[PSUM_LAZY_OVERWRITTEN]++;
    }
}

const float *psum_lazy_before(tern_core *core, tern_engine e, const tern_instr *ins)
{
    if (!core->psum_lazy_live)
        return NULL;
    const float *keep = NULL, *in0 = NULL;
    int mm = ins->opcode == TERN_OP_MULTIPLY_MOVING, acc = (ins->flags & TERN_FLAG_ACCUMULATE) != 0;
    if (mm && acc)
        keep = psum_lazy_row(core, e, &ins->ap[TERN_AP_DST]);
    if (ins->opcode == TERN_OP_ACTIVATION)
        in0 = psum_lazy_row(core, e, &ins->ap[TERN_AP_IN0]);
    for (int s = 0; s < TERN_INSTR_OPERANDS; s++) {
        const tern_ap *ap = &ins->ap[s];
        if (!ap->ndims || ap->mem != TERN_MEM_PSUM)
            continue;
        if (ap_reg_offset(core, e, ap) != 0) { /* a register-addressed operand: wherever it lands */
            psum_lazy_flush_all(core);
            return NULL;
        }
        uint32_t b0, b1;
        psum_banks_of(core, ap, &b0, &b1);
        for (uint32_t b = b0; b <= b1; b++) {
            psum_lazy_region *z = &core->psum_lazy[b];
            if (!z->on || !shares_partitions(ap, z))
                continue;
            if ((keep && s == TERN_AP_DST) || (in0 && s == TERN_AP_IN0))
                continue; /* its consumer */
            if (mm && !acc && s == TERN_AP_DST && lazy_overwrite(core, e, ap, z, 0))
                continue; /* dropped or cut where the multiply executes (psum_lazy_overwritten) */
            lazy_flush(core, z);
        }
    }
    if (in0)
        core->psum_lazy_count[PSUM_LAZY_READ]++;
    return in0; /* its row stays until the bank's next record, which waits for this instruction (a conflict) */
}

