/* The kernel builder's on-chip allocator: first fit over the bytes of a partition (every tile spans its
 * partitions at the same offsets), with PSUM's bank rule, and free space that keeps the pending accesses of
 * the tiles that used it so that a new tile placed there waits for them. */
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

static int insert_at(kalloc *a, size_t i, kblock b)
{
    if (a->count == a->cap) {
        size_t cap = a->cap * 2;
        kblock *n = realloc(a->blocks, cap * sizeof *n);
        if (!n)
            return -1;
        a->blocks = n;
        a->cap = cap;
    }
    memmove(&a->blocks[i + 1], &a->blocks[i], (a->count - i) * sizeof *a->blocks);
    a->blocks[i] = b;
    a->count++;
    return 0;
}

static void remove_at(kalloc *a, size_t i)
{
    memmove(&a->blocks[i], &a->blocks[i + 1], (a->count - i - 1) * sizeof *a->blocks);
    a->count--;
}

/* Where in free block b a tile of `bytes` can start, or UINT64_MAX. */
static uint64_t fit(const kblock *b, uint64_t bytes, uint64_t align, uint64_t bank)
{
    uint64_t s = (b->start + align - 1) / align * align;
    if (bank) {
        if (bytes <= bank) {
            if (s / bank != (s + bytes - 1) / bank)
                s = (s / bank + 1) * bank;
        } else {
            s = (s + bank - 1) / bank * bank;
        }
    }
    return s + bytes <= b->end ? s : UINT64_MAX;
}

int kalloc_take(kalloc *a, uint64_t bytes, uint64_t align, uint64_t bank, uint64_t *offset, khazard *hz)
{
    if (bytes == 0 || bytes > a->capacity)
        return -1;
    /* Next fit: search from where the last tile ended, then wrap. Released space is reused only after the
     * rest has been used, which spreads consecutive tiles over different buffers (multi-buffering) so a load
     * into a new tile need not wait for the readers of the tile released just before. */
    size_t first = 0;
    while (first < a->count && a->blocks[first].end <= a->cursor)
        first++;
    for (size_t n = 0; n < a->count; n++) {
        size_t i = (first + n) % a->count;
        kblock *b = &a->blocks[i];
        if (b->used)
            continue;
        kblock probe = *b;
        if (i == first && probe.start < a->cursor && n == 0)
            probe.start = a->cursor;
        uint64_t s = fit(&probe, bytes, align, bank);
        if (s == UINT64_MAX && probe.start != b->start)
            s = fit(b, bytes, align, bank);
        if (s == UINT64_MAX)
            continue;
        kblock whole = *b;
        /* Split into [start, s) free, [s, s+bytes) used, [s+bytes, end) free. */
        kblock used = whole;
        used.start = s;
        used.end = s + bytes;
        used.used = 1;
        *hz = whole.hz;
        a->blocks[i] = used;
        if (s > whole.start) {
            kblock pre = whole;
            pre.end = s;
            if (insert_at(a, i, pre))
                return -1;
            i++;
        }
        if (s + bytes < whole.end) {
            kblock post = whole;
            post.start = s + bytes;
            if (insert_at(a, i + 1, post))
                return -1;
        }
        *offset = s;
        a->cursor = s + bytes >= a->capacity ? 0 : s + bytes;
        return 0;
    }
    return -1;
}

void kalloc_give(kalloc *a, uint64_t offset, uint64_t bytes, const khazard *hz)
{
    for (size_t i = 0; i < a->count; i++) {
        kblock *b = &a->blocks[i];
        if (b->used && b->start == offset && b->end == offset + bytes) {
            b->used = 0;
            khazard_merge(&b->hz, hz);
            /* Coalesce with free neighbours; the merged space keeps every pending access. */
            if (i + 1 < a->count && !a->blocks[i + 1].used) {
                khazard_merge(&b->hz, &a->blocks[i + 1].hz);
                b->end = a->blocks[i + 1].end;
                remove_at(a, i + 1);
            }
            if (i > 0 && !a->blocks[i - 1].used) {
                khazard_merge(&a->blocks[i - 1].hz, &b->hz);
                a->blocks[i - 1].end = b->end;
                remove_at(a, i);
            }
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
