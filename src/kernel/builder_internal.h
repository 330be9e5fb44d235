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
    khazard hz;          /* pending accesses of the space (free blocks keep those of their last tiles) */
} kblock;

typedef struct {
    uint64_t capacity;
    kblock *blocks; /* sorted by start, covering [0, capacity) */
    size_t count, cap;
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

typedef struct {
    int live;
    tern_mem mem;
    tern_dtype dtype;
    uint64_t offset, bytes;
    int kio;
    char name[48];
    khazard hz;
} kregion;

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
    kalloc pools[3]; /* SBUF, PSUM, HBM */
    uint64_t sbuf_peak;
    unsigned ncounters;
    uint32_t counts[KMAX_COUNTERS];                   /* instructions issued per counter */
    uint32_t known[TERN_ENGINE_COUNT][KMAX_COUNTERS]; /* waits each engine has already performed */
    unsigned next_queue;                              /* round-robin DMA queue choice (Sync) */
    unsigned next_other_queue;                        /* the same among the queues kept for other engines */
    uint8_t queue_feeder[KMAX_COUNTERS];              /* 1 + the engine that issues each queue's DMAs (0: none) */
};

/* A dtype TensorE multiplies (fp32, bf16, fp16, the fp8 formats). */
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
void kfail(tern_kernel *k, tern_status code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
tern_view kview_invalid(void);
int kview_ok(tern_kernel *k, const tern_view *v, const char *what);

#endif
