/* The kernel builder's on-chip allocator: next fit over the bytes of a partition (every tile spans its
 * partitions at the same offsets), with PSUM's bank rule, and free space that keeps, block by block, the
 * pending accesses of the tiles that used it, so that a new tile placed there waits for exactly those. */
#include <stdlib.h>
#include <string.h>

#include "kernel/builder_internal.h"

void khazard_merge(khazard *into, const khazard *from)
{
    for (unsigned j = 0; j < KMAX_COUNTERS; j++) {
        if (from->w[j] > into->w[j])
            into->w[j] = from->w[j];
        if (from->r[j] > into->r[j])
            into->r[j] = from->r[j];
    }
}

/* Room for `extra` more hazard slots, so that the take that follows cannot fail half way. */
static int hz_reserve(kalloc *a, size_t extra)
{
    if (a->hz_nfree >= extra || a->hz_count + extra - a->hz_nfree <= a->hz_cap)
        return 0;
    size_t cap = a->hz_cap ? a->hz_cap : 16;
    while (a->hz_count + extra > cap)
        cap *= 2;
    if (cap > UINT32_MAX)
        return -1;
    khazard *h = realloc(a->hzs, cap * sizeof *h);
    if (!h)
        return -1;
    a->hzs = h;
    uint32_t *f = realloc(a->hz_free, cap * sizeof *f);
    if (!f)
        return -1;
    a->hz_free = f;
    a->hz_cap = cap;
    return 0;
}

/* A slot holding v (room reserved by hz_reserve). */
static uint32_t hz_new(kalloc *a, const khazard *v)
{
    uint32_t id = a->hz_nfree ? a->hz_free[--a->hz_nfree] : (uint32_t)a->hz_count++;
    a->hzs[id] = *v;
    return id;
}

static void hz_drop(kalloc *a, uint32_t id)
{
    a->hz_free[a->hz_nfree++] = id;
}

int kalloc_init(kalloc *a, uint64_t capacity)
{
    memset(a, 0, sizeof *a);
    a->capacity = capacity;
    a->cap = 16;
    a->blocks = calloc(a->cap, sizeof *a->blocks);
    if (!a->blocks || hz_reserve(a, 1)) {
        kalloc_free(a);
        return -1;
    }
    khazard none;
    memset(&none, 0, sizeof none);
    a->blocks[0].start = 0;
    a->blocks[0].end = capacity;
    a->blocks[0].hz = hz_new(a, &none);
    a->count = 1;
    return 0;
}

void kalloc_free(kalloc *a)
{
    free(a->blocks);
    free(a->hzs);
    free(a->hz_free);
    memset(a, 0, sizeof *a);
}

/* Where in the free run [start, end) a tile of `bytes` can start, or UINT64_MAX. */
static uint64_t fit(uint64_t start, uint64_t end, uint64_t bytes, uint64_t align, uint64_t bank)
{
    uint64_t s = (start + align - 1) / align * align;
    if (bank) {
        if (bytes <= bank) {
            if (s / bank != (s + bytes - 1) / bank)
                s = (s / bank + 1) * bank;
        } else {
            s = (s + bank - 1) / bank * bank;
        }
    }
    return s + bytes <= end ? s : UINT64_MAX;
}

/* The first block whose end is past `at` (blocks are sorted and contiguous), or count. */
static size_t block_after(const kalloc *a, uint64_t at)
{
    size_t lo = 0, hi = a->count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (a->blocks[mid].end <= at)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Free space stays as the separate blocks its tiles left (never merged), each with its own pending accesses,
 * so a new tile waits only for the accesses to the bytes it actually takes. A tile may span several adjacent
 * free blocks; they are found as a run. */
int kalloc_take(kalloc *a, uint64_t bytes, uint64_t align, uint64_t bank, uint64_t *offset, khazard *hz)
{
    if (bytes == 0 || bytes > a->capacity)
        return -1;
    /* Next fit over runs of adjacent free blocks, starting at the run that holds the cursor: consecutive tiles
     * land in different buffers (multi-buffering). */
    size_t first = a->first_fit ? 0 : block_after(a, a->cursor);
    if (first == a->count)
        first = 0;
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = pass ? 0 : first; i < (pass ? first + 1 : a->count) && i < a->count; i++) {
            if (a->blocks[i].used)
                continue;
            if (a->fresh_only && a->blocks[i].dirty)
                continue;
            size_t j = i;
            while (j + 1 < a->count && !a->blocks[j + 1].used && !(a->fresh_only && a->blocks[j + 1].dirty))
                j++;
            uint64_t lo = a->blocks[i].start;
            if (!pass && i == first && a->cursor > lo && a->cursor < a->blocks[j].end)
                lo = a->cursor;
            uint64_t s = fit(lo, a->blocks[j].end, bytes, align, bank);
            if (s == UINT64_MAX && lo != a->blocks[i].start)
                s = fit(a->blocks[i].start, a->blocks[j].end, bytes, align, bank);
            if (s == UINT64_MAX) {
                i = j;
                continue;
            }
            uint64_t e = s + bytes;
            size_t n_old = j - i + 1;
            /* At most two new slots (the tile's, and a copy for a block split on both sides of it), and room
             * for the blocks: nothing below can fail once these are reserved. */
            if (hz_reserve(a, 2))
                return -1;
            while (a->count + 2 > a->cap) {
                size_t cap = a->cap * 2;
                kblock *nb = realloc(a->blocks, cap * sizeof *nb);
                if (!nb)
                    return -1;
                a->blocks = nb;
                a->cap = cap;
            }
            memset(hz, 0, sizeof *hz);
            /* Rebuild blocks i..j: [keep before s] [new used] [keep after e]; hazards of what it covers merge.
             * A run of free blocks splits into at most n_old + 2 pieces (one before s, the tile, one after e). */
            kblock fresh[64];
            kblock *dyn = n_old + 2 > 64 ? malloc((n_old + 2) * sizeof *dyn) : NULL;
            if (n_old + 2 > 64 && !dyn)
                return -1;
            kblock *out = dyn ? dyn : fresh;
            size_t nf = 0, used_at = SIZE_MAX;
            for (size_t k = 0; k < n_old; k++) {
                kblock b = a->blocks[i + k];
                if (b.end <= s || b.start >= e) {
                    if (b.start >= e && used_at == SIZE_MAX) {
                        kblock u = {s, e, 1, 0, 0};
                        used_at = nf;
                        out[nf++] = u;
                    }
                    out[nf++] = b;
                    continue;
                }
                khazard_merge(hz, &a->hzs[b.hz]);
                int slot_kept = 0;
                if (b.start < s) {
                    kblock pre = b; /* keeps b's slot: the same pending accesses */
                    pre.end = s;
                    out[nf++] = pre;
                    slot_kept = 1;
                }
                if (b.end > e) {
                    if (used_at == SIZE_MAX) {
                        kblock u = {s, e, 1, 0, 0};
                        used_at = nf;
                        out[nf++] = u;
                    }
                    kblock post = b;
                    post.start = e;
                    if (slot_kept)
                        post.hz = hz_new(a, &a->hzs[b.hz]);
                    out[nf++] = post;
                    slot_kept = 1;
                }
                if (!slot_kept)
                    hz_drop(a, b.hz);
            }
            if (used_at == SIZE_MAX) {
                kblock u = {s, e, 1, 0, 0};
                used_at = nf;
                out[nf++] = u;
            }
            out[used_at].hz = hz_new(a, hz);
            /* Replace blocks i..j with out[0..nf). */
            memmove(&a->blocks[i + nf], &a->blocks[j + 1], (a->count - j - 1) * sizeof *a->blocks);
            memcpy(&a->blocks[i], out, nf * sizeof *out);
            a->count = a->count - n_old + nf;
            free(dyn);
            *offset = s;
            a->cursor = e >= a->capacity ? 0 : e;
            return 0;
        }
    }
    return -1;
}

void kalloc_give(kalloc *a, uint64_t offset, uint64_t bytes, const khazard *hz)
{
    /* Blocks are sorted by start and none is empty, so starts are unique. */
    size_t i = block_after(a, offset);
    if (i < a->count) {
        kblock *b = &a->blocks[i];
        if (b->used && b->start == offset && b->end == offset + bytes) {
            b->used = 0;
            b->dirty = 1;
            a->hzs[b->hz] = *hz; /* the tile's pending accesses stay with exactly its bytes */
        }
    }
}

void kalloc_stats(const kalloc *a, uint64_t *free_total, uint64_t *largest)
{
    *free_total = 0;
    *largest = 0;
    for (size_t i = 0; i < a->count; i++)
        if (!a->blocks[i].used) {
            uint64_t n = a->blocks[i].end - a->blocks[i].start;
            *free_total += n;
            if (n > *largest)
                *largest = n;
        }
}

uint64_t kalloc_free_bytes(const kalloc *a)
{
    uint64_t f, l;
    kalloc_stats(a, &f, &l);
    return f;
}
