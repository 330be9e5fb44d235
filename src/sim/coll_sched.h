/* Private to the collective engine: a collective's schedule as collective.c builds it, shared with the
 * conservative parallel engine of pdes.c. A pull moves n elements from rank src (its in or out buffer) into rank
 * dst's out buffer, copying or reducing; pulls are sorted by (step, dst) and keep their emission order inside,
 * and the event (step, rank) depends on (step-1, rank) and on (step-1, p) for every peer p it pulls from.
 * KangaRing's pulls also involve the destination's partner on its chip: a three-way reduction (reduce = 2) writes
 * op(op(in[primary], incoming), in[secondary]) over the pair (dst, partner), dst being the secondary when
 * `secondary` is set, and a duplicated write (dup) copies the result to the partner's out as well. */
#ifndef TERN_SIM_COLL_SCHED_H
#define TERN_SIM_COLL_SCHED_H

#include <stddef.h>
#include <stdint.h>

#include "tern/collective.h"
#include "tern/fabric.h"

typedef struct {
    uint32_t step, dst, src;
    unsigned reduce : 2;      /* 0 copy, 1 op(local, incoming), 2 three-way (above) */
    unsigned src_in : 1, dup : 1, secondary : 1;
    signed int pdelta : 8;    /* KangaRing: the partner is rank dst + pdelta (a rank of dst's chip) */
    uint64_t src_off, dst_off, n;
} coll_pull;                  /* 40 bytes: the schedule's memory (fabric.c's host-memory estimate) */

typedef struct {
    unsigned R, S;           /* ranks, steps */
    size_t keys;             /* S x R events, key = step * R + rank */
    size_t np;
    const coll_pull *pull;   /* np pulls sorted by (step, dst) */
    const size_t *begin;     /* keys + 1: the pulls of event key are [begin[key], begin[key + 1]) */
    const uint32_t *deps;    /* keys: events each one waits for */
    const size_t *rbegin;    /* keys + 1: readers[rbegin[key] ..] are the ranks whose next step pulls from key's */
    const uint32_t *readers;
} coll_plan;

/* Events in time order, ties by rank then step: the one order in which the fabric's resources are reserved. An
 * event without pulls (a rank with nothing to move in a step, as all-to-allv's empty blocks give) completes at its
 * own time and may release another event at that same time, so at equal times events without pulls come first
 * (idle = 1): every event released at time t is then in the heap before the first event with pulls at t is
 * served, and those are served in (rank, step) order, as the distributed engine sorts them. */
typedef struct {
    uint64_t t;
    uint32_t rank;
    uint32_t step : 31, idle : 1;
} coll_event;
void coll_heap_push(coll_event *h, size_t *n, coll_event e);
coll_event coll_heap_pop(coll_event *h, size_t *n);

void coll_reduce_into(tern_dtype t, tern_reduce_op op, void *restrict dst, const void *restrict src, uint64_t n);
/* Apply pull p on its destination's side, src pointing at the n incoming elements (the source's block, or its copy
 * from another process); in/out are every local rank's buffers. Returns the host bytes read and written. */
uint64_t coll_pull_apply(const tern_coll_desc *d, const coll_pull *p, const void *src, const void *const *in,
                         void *const *out);

/* The schedule's span over a fabric with a transport (pdes.c): each process serves its own ranks' events and
 * its own resources, windows of the fabric's lookahead at a time. Same result as the one-process loop. */
tern_status coll_pdes_time(tern_fabric *f, const coll_plan *p, const tern_coll_desc *d, uint64_t *span,
                           tern_error *err);
/* The functional pass over a fabric with a transport: in/out hold this process's ranks (others may be NULL);
 * each step's pulls from another process's rank arrive by one exchange. host_bytes is summed over processes. */
tern_status coll_pdes_move(tern_fabric *f, const coll_plan *p, const tern_coll_desc *d, const void *const *in,
                           void *const *out, uint64_t *host_bytes, tern_error *err);

/* The bytes the collective reads from and writes to each rank's HBM (bytes: tern_fabric_ranks entries), counted
 * from its schedule as the fabric reserves the HBM at both ends of every pull: the source's read, the
 * destination's write (and its read of the local block when the pull reduces). rank_run.c shares a core's HBM
 * between these and the kernel's own DMA. */
/* Ring channels (coll_ring.c): the members ranks[0..n) of one group in the fabric's ring order. Returns the number
 * of channels C, 2 x the most edge-disjoint Hamiltonian cycles found through the chips holding them (joined where
 * a route between them is one NeuronLink hop), each cycle once per direction; 1 (orders untouched) when the group
 * spans fewer than 3 chips, crosses instances or has no such cycle. For C > 1, orders[c*n + k] is the index into
 * ranks of the member at position k of channel c (a chip's members consecutive, in their ring order). */
#define COLL_MAX_CHANNELS 8
unsigned coll_ring_channels(const tern_fabric *f, const unsigned *ranks, unsigned n, unsigned *orders);

tern_status coll_rank_hbm_bytes(const tern_fabric *f, const tern_coll_desc *d, uint64_t *bytes, tern_error *err);

#endif
