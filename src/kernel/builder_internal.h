/* Private to the kernel layer: the builder's state (regions, I/O, allocator pools, synchronisation counters)
 * and the on-chip allocator whose free space remembers pending accesses (hazards). */
#ifndef TERN_KERNEL_BUILDER_INTERNAL_H
#define TERN_KERNEL_BUILDER_INTERNAL_H

#include "tern/kernel.h"

#define KMAX_COUNTERS 48 /* engines + DMA queues */

/* Per counter (engine or queue): count of the last writer, and of the last reader since that write. */
typedef struct {
    uint32_t w[KMAX_COUNTERS];
    uint32_t r[KMAX_COUNTERS];
} khazard;

void khazard_merge(khazard *into, const khazard *from); /* element-wise max */

typedef struct {
    uint64_t start, end; /* byte range within a partition */
    int used;
    int dirty;           /* held a tile once: not for data placed before the run (constants, inputs) */
    uint32_t hz;         /* slot in kalloc.hzs: pending accesses of the space (free blocks keep those of their
                            last tiles); out of line so that inserting a block moves 32 bytes, not 400 */
} kblock;

typedef struct {
    uint64_t capacity;
    kblock *blocks; /* sorted by start, covering [0, capacity) */
    size_t count, cap;
    khazard *hzs;       /* hazard slots of the blocks */
    uint32_t *hz_free;  /* slots not in use (a stack, as large as hzs) */
    size_t hz_count, hz_cap, hz_nfree;
    uint64_t cursor; /* next-fit position */
    int first_fit;   /* HBM: always search from the start (compact), not next fit */
    int fresh_only;  /* the next take may use only space never used before */
} kalloc;

int kalloc_init(kalloc *a, uint64_t capacity);
void kalloc_free(kalloc *a);
/* Next fit of `bytes` aligned to `align`; if `bank` is non-zero, a block no larger than a bank must not cross
 * a bank boundary and larger ones start on one. Returns 0 and the offset plus the hazards of the space taken. */
int kalloc_take(kalloc *a, uint64_t bytes, uint64_t align, uint64_t bank, uint64_t *offset, khazard *hz);
/* Return [offset, offset+bytes) with the hazards of the tile that used it. */
void kalloc_give(kalloc *a, uint64_t offset, uint64_t bytes, const khazard *hz);
void kalloc_stats(const kalloc *a, uint64_t *free_total, uint64_t *largest);
uint64_t kalloc_free_bytes(const kalloc *a);

/* The bytes an access pattern touches, for hazards by byte range (hazard.c): partitions [p0, p1) (HBM: the
 * partition rows are a dimension and p0 = 0, p1 = 1), and in each of them the bytes base + sum i_k * step_k +
 * [0, run) over 0 <= i_k < num_k, steps in bytes, descending and each larger than the run. */
#define KFOOT_DIMS (TERN_AP_MAX_DIMS + 1)
typedef struct {
    uint16_t p0, p1;
    uint8_t ndims;
    uint64_t base, run;
    uint64_t step[KFOOT_DIMS];
    uint32_t num[KFOOT_DIMS];
} kfoot;

/* One pending access of part of a region: the counter (engine or queue) and its count. */
typedef struct {
    kfoot f;
    uint32_t count;
    uint8_t counter;
    uint8_t write;
} kaccess;

#define KMAX_ACCESSES 16 /* ranged accesses kept per region; older ones fold into the whole-region summary */

typedef struct {
    int live;
    tern_mem mem;
    tern_dtype dtype;
    uint64_t offset, bytes;
    uint32_t partitions; /* SBUF/PSUM tiles: partitions [0, partitions); HBM: 1 */
    int kio;
    char name[48];
    khazard hz;      /* pending accesses of the whole region (from the space's previous tiles, or whole-region) */
    kaccess *acc;    /* pending accesses of parts of it (NULL until the first) */
    unsigned nacc;
} kregion;

/* Hazards by byte range (hazard.c). kregion_waits adds to need[] the counts an access of view v must wait for
 * (reads wait for overlapping writes; writes for overlapping writes and reads), skipping counter `self`;
 * kregion_record notes the access once issued as count `count` of counter `self`; kregion_summary folds every
 * pending access into one whole-region khazard (for the allocator when the region is released). */
void kregion_waits(const kregion *r, const tern_ap *v, int write, unsigned self, unsigned ncounters, uint32_t *need);
int kregion_record(kregion *r, const tern_ap *v, int write, unsigned self, uint32_t count);
void kregion_summary(const kregion *r, khazard *out);
void kregion_clear(kregion *r);

struct tern_kernel {
    tern_core_config cfg;
    char name[64];
    tern_program prog;
    int failed;
    int sealed; /* loaded from a program: runs, but cannot be extended */
    tern_error err;
    kregion *regions;
    size_t nregions, cap_regions;
    tern_kio *io;
    void **io_data; /* constant tensors' data (NULL for others), parallel to io */
    size_t nio, cap_io;
    uint64_t hbm_next;
    uint64_t io_align; /* inputs and outputs of at least this many bytes start at a multiple of it (0: none) */
    kalloc pools[3]; /* SBUF, PSUM, HBM */
    uint64_t sbuf_peak;
    unsigned ncounters;
    uint32_t counts[KMAX_COUNTERS];                   /* instructions issued per counter */
    uint32_t known[TERN_ENGINE_COUNT][KMAX_COUNTERS]; /* waits each engine has already performed */
    unsigned next_queue[TERN_ENGINE_COUNT];           /* round-robin DMA queue choice in each engine's share */
    uint8_t queue_feeder[KMAX_COUNTERS];              /* 1 + the engine that issues each queue's DMAs (0: none) */
    uint8_t coll_feeder;                              /* 1 + the engine that issues the collectives (0: none) */
};

/* A dtype TensorE multiplies (fp32, bf16, fp16, the fp8 formats). */
/* The walk of the streaming kernels (lib_elementwise.c, lib_optim.c) over an R x C tensor: row tiles of `parts`
 * rows outside, `chunk`-column chunks inside. Moves (*r0, *rp, *c0, *cw) to the next tile; 0 when there is none. */
static inline int kernel_tile_next(uint64_t R, uint64_t C, uint64_t parts, uint64_t chunk, uint64_t *r0, uint64_t *rp,
                                   uint64_t *c0, uint64_t *cw)
{
    *c0 += chunk;
    if (*c0 >= C) {
        *c0 = 0;
        *r0 += parts;
        if (*r0 >= R)
            return 0;
    }
    *rp = R - *r0 < parts ? R - *r0 : parts;
    *cw = C - *c0 < chunk ? C - *c0 : chunk;
    return 1;
}

static inline int ktensor_dtype(tern_dtype t)
{
    switch (t) {
    case TERN_DTYPE_FP32:
    case TERN_DTYPE_BF16:
    case TERN_DTYPE_FP16:
    case TERN_DTYPE_FP8_E4M3:
    case TERN_DTYPE_FP8_E5M2:
    case TERN_DTYPE_FP8_E4M3_NEURON: return 1;
    default: return 0;
    }
}

/* The DMA queue for a DMA issued by engine e: `queue` when >= 0, else the automatic choice (ops.c). */
uint8_t kpick_queue(tern_kernel *k, tern_engine e, int queue);
/* The automatic queues of engine e among Q: [first, first + count) (ops.c, fixed by engine). */
void kqueue_share(unsigned Q, tern_engine e, unsigned *first, unsigned *count);
void kfail(tern_kernel *k, tern_status code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
tern_view kview_invalid(void);
/* A row view [n] or [1, n] as the one-partition pattern of its n elements (a [1, n] view's first dimension dropped). */
tern_view kview_row(tern_view row);
int kview_ok(tern_kernel *k, const tern_view *v, const char *what);

#endif
