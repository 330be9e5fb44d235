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

int kalloc_init(kalloc *a, uint64_t capacity)
{
    memset(a, 0, sizeof *a);
    a->capacity = capacity;
    a->cap = 16;
    a->blocks = calloc(a->cap, sizeof *a->blocks);
    if (!a->blocks)
        return -1;
    a->blocks[0].start = 0;
    a->blocks[0].end = capacity;
    a->count = 1;
    return 0;
}

void kalloc_free(kalloc *a)
{
    free(a->blocks);
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

/* Free space stays as the separate blocks its tiles left (never merged), each with its own pending accesses,
 * so a new tile waits only for the accesses to the bytes it actually takes. A tile may span several adjacent
 * free blocks; they are found as a run. */
int kalloc_take(kalloc *a, uint64_t bytes, uint64_t align, uint64_t bank, uint64_t *offset, khazard *hz)
{
    if (bytes == 0 || bytes > a->capacity)
        return -1;
    /* Next fit over runs of adjacent free blocks, starting at the run that holds the cursor: consecutive tiles
     * land in different buffers (multi-buffering). */
    size_t first = 0;
    while (!a->first_fit && first < a->count && a->blocks[first].end <= a->cursor)
        first++;
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
            memset(hz, 0, sizeof *hz);
            /* Rebuild blocks i..j: [keep before s] [new used] [keep after e]; hazards of what it covers merge. */
            size_t n_old = j - i + 1;
            kblock *old = malloc(n_old * sizeof *old);
            if (!old)
                return -1;
            memcpy(old, &a->blocks[i], n_old * sizeof *old);
            kblock fresh[64];
            size_t nf = 0;
            kblock *dyn = n_old * 2 + 1 > 64 ? malloc((n_old * 2 + 1) * sizeof *dyn) : NULL;
            kblock *out = dyn ? dyn : fresh;
            int placed = 0;
            for (size_t k = 0; k < n_old; k++) {
                kblock b = old[k];
                if (b.end <= s || b.start >= e) {
                    if (b.start >= e && !placed) {
                        kblock u = {s, e, 1, 0, *hz};
                        out[nf++] = u;
                        placed = 1;
                    }
                    out[nf++] = b;
                    continue;
                }
                khazard_merge(hz, &b.hz);
                if (b.start < s) {
                    kblock pre = b;
                    pre.end = s;
                    out[nf++] = pre;
                }
                if (b.end > e) {
                    if (!placed) {
                        kblock u = {s, e, 1, 0, {{0}, {0}}};
                        out[nf++] = u;
                        placed = 1;
                    }
                    kblock post = b;
                    post.start = e;
                    out[nf++] = post;
                }
            }
            if (!placed) {
                kblock u = {s, e, 1, 0, {{0}, {0}}};
                out[nf++] = u;
            }
            for (size_t k = 0; k < nf; k++)
                if (out[k].used && out[k].start == s)
                    out[k].hz = *hz;
            free(old);
            /* Replace blocks i..j with out[0..nf). */
            while (a->count - n_old + nf > a->cap) {
                size_t cap = a->cap * 2;
                kblock *nb = realloc(a->blocks, cap * sizeof *nb);
                if (!nb) {
                    free(dyn);
                    return -1;
                }
                a->blocks = nb;
                a->cap = cap;
            }
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
    for (size_t i = 0; i < a->count; i++) {
        kblock *b = &a->blocks[i];
        if (b->used && b->start == offset && b->end == offset + bytes) {
            b->used = 0;
            b->dirty = 1;
            b->hz = *hz; /* the tile's pending accesses stay with exactly its bytes */
            return;
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
