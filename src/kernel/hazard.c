/* Hazards by byte range: which earlier accesses of a region (tile or HBM tensor) a new access must wait for.
 * Each region keeps a whole-region summary (per counter, the last writer and the readers since, as the space's
 * previous tiles left them) and a short list of pending accesses of parts of it, each with the bytes it touches
 * (a partition range and, in each partition, an affine set of byte runs). A read waits for the overlapping writes,
 * a write for the overlapping writes and reads, so disjoint stores to one output from two queues, or a VectorE
 * drain of one column block while a DMA stores another, overlap in time as they do on hardware. The overlap test
 * is exact for the patterns views make (blocks of row-major tensors, partition slices, strided columns) and
 * answers "overlap" whenever it cannot tell, so it can only add waits, never lose one. A write that covers the
 * whole region waited for everything pending and replaces it (transitivity, as in builder.c); older ranged
 * accesses beyond KMAX_ACCESSES fold into the summary, which is conservative. */
#include <stdlib.h>
#include <string.h>

#include "kernel/builder_internal.h"

static uint64_t ext_from(const kfoot *f, unsigned i)
{
    uint64_t e = f->run;
    for (unsigned k = i; k < f->ndims; k++)
        e += f->step[k] * (uint64_t)(f->num[k] - 1);
    return e;
}

/* The bytes v touches. A register-addressed pattern (offset known only at run time) is taken as the whole region. */
static void foot_of(const kregion *r, const tern_ap *v, kfoot *f)
{
    memset(f, 0, sizeof *f);
    int64_t es = (int64_t)tern_dtype_size((tern_dtype)v->dtype);
    if (v->offset_reg != TERN_REG_NONE) {
        f->p0 = 0;
        f->p1 = (uint16_t)(r->mem == TERN_MEM_HBM ? 1 : r->partitions);
        if (r->mem != TERN_MEM_HBM && v->start_partition + v->num_partitions > f->p1)
            f->p1 = (uint16_t)(v->start_partition + v->num_partitions);
        f->base = r->offset;
        f->run = r->bytes ? r->bytes : 1;
        return;
    }
    int64_t base = (int64_t)v->offset, st[KFOOT_DIMS];
    uint32_t nm[KFOOT_DIMS];
    unsigned n = 0;
    if (v->mem == TERN_MEM_HBM) {
        f->p0 = 0;
        f->p1 = 1;
        st[n] = v->partition_step * es;
        nm[n++] = v->num_partitions;
    } else {
        f->p0 = v->start_partition;
        f->p1 = (uint16_t)(v->start_partition + v->num_partitions);
    }
    for (unsigned k = 0; k < v->ndims && k < TERN_AP_MAX_DIMS; k++) {
        st[n] = (int64_t)v->dims[k].step * es;
        nm[n++] = v->dims[k].num;
    }
    /* normalise: positive steps, no trivial dimensions, steps descending */
    unsigned m = 0;
    for (unsigned k = 0; k < n; k++) {
        if (nm[k] <= 1 || st[k] == 0)
            continue;
        if (st[k] < 0) {
            base += st[k] * (int64_t)(nm[k] - 1);
            st[k] = -st[k];
        }
        unsigned j = m++;
        while (j > 0 && (uint64_t)st[k] > f->step[j - 1]) {
            f->step[j] = f->step[j - 1];
            f->num[j] = f->num[j - 1];
            j--;
        }
        f->step[j] = (uint64_t)st[k];
        f->num[j] = nm[k];
    }
    f->ndims = (uint8_t)m;
    f->base = base > 0 ? (uint64_t)base : 0;
    f->run = (uint64_t)es;
    /* innermost dimensions whose step does not pass the run extend it (contiguous or overlapping rows) */
    while (f->ndims && f->step[f->ndims - 1] <= f->run) {
        unsigned k = f->ndims - 1u;
        f->run += f->step[k] * (uint64_t)(f->num[k] - 1);
        f->ndims--;
    }
    /* an outer dimension that steps over exactly its inner neighbour's rows merges with it */
    for (unsigned k = f->ndims; k-- > 1;) {
        if (f->step[k - 1] == f->step[k] * f->num[k]) {
            f->num[k] *= f->num[k - 1];
            memmove(&f->step[k - 1], &f->step[k], (f->ndims - k) * sizeof f->step[0]);
            memmove(&f->num[k - 1], &f->num[k], (f->ndims - k) * sizeof f->num[0]);
            f->ndims--;
        }
    }
}

/* Can a's dimensions from ia on, based at ba, and b's from ib on, based at bb, touch a common byte? Splits both by
 * the larger outer step S when each side's rest fits in one S-window: they overlap only in common rows, and there
 * only where the rests overlap. Anything else answers 1 (conservative). */
static int bytes_overlap(const kfoot *a, unsigned ia, uint64_t ba, const kfoot *b, unsigned ib, uint64_t bb)
{
    uint64_t ea = ba + ext_from(a, ia), eb = bb + ext_from(b, ib);
    if (ea <= bb || eb <= ba)
        return 0;
    int ha = ia < a->ndims, hb = ib < b->ndims;
    if (!ha && !hb)
        return 1;
    uint64_t S = ha ? a->step[ia] : 0;
    if (hb && b->step[ib] > S)
        S = b->step[ib];
    uint64_t rows_a = 1, rows_b = 1;
    unsigned na = ia, nb = ib;
    if (ha && a->step[ia] == S) {
        rows_a = a->num[ia];
        na = ia + 1;
    }
    if (hb && b->step[ib] == S) {
        rows_b = b->num[ib];
        nb = ib + 1;
    }
    uint64_t oa = ba % S, ob = bb % S, ra = ba / S, rb = bb / S;
    if (oa + ext_from(a, na) > S || ob + ext_from(b, nb) > S)
        return 1;
    if (ra + rows_a <= rb || rb + rows_b <= ra)
        return 0;
    return bytes_overlap(a, na, oa, b, nb, ob);
}

static int overlap(const kfoot *a, const kfoot *b)
{
    if (a->p1 <= b->p0 || b->p1 <= a->p0)
        return 0;
    return bytes_overlap(a, 0, a->base, b, 0, b->base);
}

/* Does x touch every byte r touches? (Exact when x is one run per partition or both are the same pattern.) */
static int contains(const kfoot *x, const kfoot *r)
{
    if (r->p0 < x->p0 || r->p1 > x->p1)
        return 0;
    if (x->ndims == 0)
        return x->base <= r->base && r->base + ext_from(r, 0) <= x->base + x->run;
    if (x->ndims != r->ndims || x->base != r->base || x->run != r->run)
        return 0;
    for (unsigned k = 0; k < x->ndims; k++)
        if (x->step[k] != r->step[k] || x->num[k] != r->num[k])
            return 0;
    return 1;
}

static int covers_region(const kfoot *f, const kregion *r)
{
    uint32_t parts = r->mem == TERN_MEM_HBM ? 1 : r->partitions;
    return f->p0 == 0 && f->p1 >= parts && f->ndims == 0 && f->base <= r->offset &&
           f->base + f->run >= r->offset + r->bytes;
}

static void take_max(uint32_t *x, uint32_t v)
{
    if (v > *x)
        *x = v;
}

void kregion_waits(const kregion *r, const tern_ap *v, int write, unsigned self, unsigned ncounters, uint32_t *need)
{
    for (unsigned j = 0; j < ncounters; j++) {
        if (j == self)
            continue;
        take_max(&need[j], r->hz.w[j]);
        if (write)
            take_max(&need[j], r->hz.r[j]);
    }
    if (!r->nacc)
        return;
    kfoot f;
    foot_of(r, v, &f);
    for (unsigned i = 0; i < r->nacc; i++) {
        const kaccess *a = &r->acc[i];
        if (a->counter != self && (write || a->write) && overlap(&f, &a->f))
            take_max(&need[a->counter], a->count);
    }
}

int kregion_record(kregion *r, const tern_ap *v, int write, unsigned self, uint32_t count)
{
    kfoot f;
    foot_of(r, v, &f);
    if (covers_region(&f, r)) {
        if (write) { /* it waited for everything pending: waiting for it is enough */
            memset(&r->hz, 0, sizeof r->hz);
            r->hz.w[self] = count;
            r->nacc = 0;
            return 0;
        }
        take_max(&r->hz.r[self], count);
    }
    /* drop what this access supersedes: a write, everything it contains (it waited for those); a read, this
     * counter's earlier reads it contains */
    unsigned keep = 0;
    for (unsigned i = 0; i < r->nacc; i++) {
        const kaccess *a = &r->acc[i];
        int gone = contains(&f, &a->f) && (write || (!a->write && a->counter == self));
        if (!gone)
            r->acc[keep++] = *a;
    }
    r->nacc = keep;
    if (!write && covers_region(&f, r))
        return 0;
    if (!r->acc && !(r->acc = malloc(KMAX_ACCESSES * sizeof *r->acc)))
        return -1;
    if (r->nacc == KMAX_ACCESSES) { /* the oldest folds into the whole-region summary */
        const kaccess *o = &r->acc[0];
        take_max(o->write ? &r->hz.w[o->counter] : &r->hz.r[o->counter], o->count);
        memmove(&r->acc[0], &r->acc[1], (KMAX_ACCESSES - 1) * sizeof *r->acc);
        r->nacc--;
    }
    kaccess *a = &r->acc[r->nacc++];
    a->f = f;
    a->count = count;
    a->counter = (uint8_t)self;
    a->write = (uint8_t)(write != 0);
    return 0;
}

void kregion_summary(const kregion *r, khazard *out)
{
    *out = r->hz;
    for (unsigned i = 0; i < r->nacc; i++) {
        const kaccess *a = &r->acc[i];
        take_max(a->write ? &out->w[a->counter] : &out->r[a->counter], a->count);
    }
}

void kregion_clear(kregion *r)
{
    free(r->acc);
    r->acc = NULL;
    r->nacc = 0;
}
