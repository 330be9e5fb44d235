/* tern collectives over a fabric (include/tern/fabric.h; docs/multichip.md): all-reduce (sum, max, min),
 * all-gather, reduce-scatter, all-to-all and permute (send/receive is a permute of one pair), over replica
 * groups, by the ring, mesh, recursive halving-doubling (rdh), pairwise-shift and hierarchical algorithms.
 * Each algorithm is a schedule of steps; in a step a rank pulls chunks from peers through the fabric, copying or
 * reducing them into its buffer. The same schedule gives the time (timing-only) and, in functional mode, moves
 * and reduces the bytes with tern's number formats; the time never depends on the data, so both modes give the
 * same picoseconds. The reduction order is part of each algorithm's definition (docs/multichip.md), and
 * tern_collective_reference computes the expected output from that definition directly, without the schedule. */
#ifndef TERN_COLLECTIVE_H
#define TERN_COLLECTIVE_H

#include <stddef.h>
#include <stdint.h>

#include "tern/base.h"
#include "tern/fabric.h"
#include "tern/num.h"
#include "tern/sim.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    TERN_COLL_ALL_REDUCE = 0,
    TERN_COLL_ALL_GATHER,
    TERN_COLL_REDUCE_SCATTER,
    TERN_COLL_ALL_TO_ALL,
    TERN_COLL_PERMUTE,
    TERN_COLL_ALL_TO_ALLV,
    TERN_COLL_OP_COUNT
} tern_coll_op;

typedef enum { TERN_REDUCE_SUM = 0, TERN_REDUCE_MAX, TERN_REDUCE_MIN } tern_reduce_op;

typedef enum {
    TERN_ALGO_AUTO = 0,
    TERN_ALGO_RING,
    TERN_ALGO_MESH,
    TERN_ALGO_RDH,
    TERN_ALGO_HIER,   /* intra-instance reduce-scatter, inter-instance all-reduce, intra-instance all-gather */
    TERN_ALGO_DIRECT, /* permute: one transfer per pair */
    TERN_ALGO_KANGARING, /* ring over one primary of each pair of a chip's ranks, with 3-way reduction and
                          * duplicated writes (Neuron's KangaRing; docs/multichip.md) */
    TERN_ALGO_COUNT
} tern_coll_algo;

const char *tern_coll_op_name(tern_coll_op op);       /* "all-reduce", "all-gather", ..., "all-to-allv" */
const char *tern_coll_algo_name(tern_coll_algo a);    /* "auto", "ring", "mesh", "rdh", "hier", "direct", "kangaring" */
const char *tern_reduce_op_name(tern_reduce_op r);    /* "sum", "max", "min" */
tern_status tern_coll_op_from_name(const char *s, tern_coll_op *out, tern_error *err);
tern_status tern_coll_algo_from_name(const char *s, tern_coll_algo *out, tern_error *err);
tern_status tern_reduce_op_from_name(const char *s, tern_reduce_op *out, tern_error *err);

/* One collective. count is the elements of each rank's full buffer (nccom-test's size / element size):
 * all-reduce: in and out count elements; all-gather: out count elements, member m contributing block m;
 * reduce-scatter: in count elements, member m receiving block m; all-to-all: equal blocks of count/N elements
 * (a remainder is not moved), block j of member m's in going to block m of member j's out; permute: all of in
 * goes to the target's out; all-to-allv: member i sends vcounts[i*N + j] elements to member j, from offset
 * sdispls[i*N + j] of its in to offset rdispls[j*N + i] of member j's out (MPI_Alltoallv's displacements, each
 * row the table of the member whose buffer it indexes); sdispls NULL: i's blocks for j = 0..N-1 sit back to back
 * in its in, rdispls NULL: j's blocks from i = 0..N-1 land back to back in its out. Every block lies inside count
 * elements, and a member's receive blocks do not overlap; elements of out that no block reaches are left as they
 * were. Blocks split count as [m*count/N, (m+1)*count/N). */
typedef struct {
    tern_coll_op op;
    tern_reduce_op reduce;
    tern_dtype dtype;            /* fp32, bf16, fp16, fp8 (any), int32 */
    uint64_t count;
    tern_coll_algo algo;         /* AUTO: by message size (docs/multichip.md) */
    const unsigned *groups;      /* ngroups x group_size ranks (member order = block order); NULL = all ranks */
    unsigned ngroups, group_size;
    const unsigned *pairs;       /* permute: npairs (source, target) rank pairs; NULL = each group's ring shift */
    unsigned npairs;
    const uint64_t *vcounts;     /* all-to-allv: group_size x group_size counts, the same for every group */
    const uint64_t *sdispls;     /* all-to-allv: N x N send offsets [sender][receiver]; NULL = back to back */
    const uint64_t *rdispls;     /* all-to-allv: N x N receive offsets [receiver][sender]; NULL = back to back */
    unsigned channels;           /* ring all-reduce/all-gather/reduce-scatter: 0 = every channel the topology gives
                                    (one per direction of each edge-disjoint Hamiltonian cycle through the group's
                                    chips, docs/multichip.md "Ring channels"), 1 = the single ring, N = at most N */
} tern_coll_desc;

typedef struct {
    tern_coll_algo algo;  /* the algorithm that ran (AUTO resolved) */
    uint64_t time_ps;     /* predicted time: max(launch interval, setup + the schedule's span) */
    uint64_t span_ps;     /* the schedule alone, first pull to last completion */
    unsigned steps;
    unsigned channels;    /* ring channels that ran (the most over the groups; 1 for a single ring or another algorithm) */
    uint64_t transfers;
    uint64_t host_bytes;  /* functional mode: bytes the host read and wrote moving data */
} tern_coll_result;

/* Validate the description against the fabric (groups partition the ranks, pairs are ranks used at most once
 * as source and once as target, the algorithm supports the operation and group size) and resolve AUTO. */
tern_status tern_collective_resolve(const tern_fabric *f, const tern_coll_desc *d, tern_coll_algo *algo,
                                    tern_error *err);
/* Timing-only: the schedule's time, no data. */
tern_status tern_collective_time(tern_fabric *f, const tern_coll_desc *d, tern_coll_result *res, tern_error *err);
/* Functional: in[r] and out[r] for every fabric rank, count elements of dtype each (in may equal out only for
 * all-reduce, all-gather and reduce-scatter). Same time as tern_collective_time. */
tern_status tern_collective_run(tern_fabric *f, const tern_coll_desc *d, const void *const *in, void *const *out,
                                tern_coll_result *res, tern_error *err);
/* The expected out of `rank` from the algorithm's definition (no schedule). Only the defined part is written
 * (block m for reduce-scatter; nothing for a rank that is no permute target). algo must be resolved. */
tern_status tern_collective_reference(const tern_fabric *f, const tern_coll_desc *d, tern_coll_algo algo,
                                      const void *const *in, unsigned rank, void *expect, tern_error *err);
/* [lo, hi) of the elements of `rank`'s out that the collective defines (for comparisons). For an all-to-allv with
 * receive displacements it is the hull of the received blocks: gaps between them keep what out held before (the
 * reference leaves them as expect held them), so callers that compare clear both first. */
void tern_collective_defined(const tern_fabric *f, const tern_coll_desc *d, unsigned rank, uint64_t *lo,
                             uint64_t *hi);

/* ---- collectives as programs call them: every rank joins with its own call ----
 * A communicator over a fabric collects, for the next collective, each rank's description and buffers (SPMD: the
 * ranks of a data-parallel job each all-reduce their own gradients). tern_coll_comm_run then checks that every
 * rank joined and that all agree on the operation, dtype, reduction, count, algorithm, groups, pairs, counts and
 * displacements, and runs it: functionally when the ranks gave buffers, timing-only when none did. A rank that
 * never joined, or ranks that disagree, fail with a message naming the collective (its operation and sequence
 * number), the ranks and their values. Under MPI (a fabric with a transport) each process joins its own ranks; the descriptions
 * travel between processes, and a process that does not reach the collective within the timeout ends the run on
 * every process with the ranks it owns named (the alternative is a hang). */
typedef struct tern_coll_comm tern_coll_comm;
tern_status tern_coll_comm_create(tern_fabric *f, tern_coll_comm **out, tern_error *err);
void tern_coll_comm_free(tern_coll_comm *c);
void tern_coll_comm_set_timeout(tern_coll_comm *c, uint64_t ms); /* wait for other processes; default 60000 */
/* Rank `rank` (one this process owns) joins the next collective. d (and its groups, pairs, vcounts, sdispls,
 * rdispls), in and out must stay valid until tern_coll_comm_run returns; in and out NULL: timing-only. */
tern_status tern_coll_comm_join(tern_coll_comm *c, unsigned rank, const tern_coll_desc *d, const void *in,
                                void *out, tern_error *err);
tern_status tern_coll_comm_run(tern_coll_comm *c, tern_coll_result *res, tern_error *err);
uint64_t tern_coll_comm_seq(const tern_coll_comm *c); /* collectives run so far */

/* ---- programs over ranks: collective instructions inside kernels (src/sim/rank_run.c) ----
 * tern_ranks_run runs progs[r] on cores[r] for every rank r of the fabric (SPMD: the same program for every rank;
 * or one per rank), the cores' schedulers interleaved in one global time order. A `collective` instruction
 * (docs/isa.md; tern_kernel_collective) joins the rank to the launch's next collective when its trigger ends; the
 * collective runs through tern_coll_comm once every rank has joined it (same checks, algorithms and times as
 * `tern collective`), starting at the last join (and not before the previous collective's completion), and raises
 * each rank's signal semaphore at its end (start + tern_coll_result.time_ps). Every core's semaphores and registers
 * are reset first; then, on every engine, the last register (r[num_registers - 1]) holds the rank id and the one
 * before it the rank count (TERN_RANK_REG_ID / TERN_RANK_REG_COUNT on a 64-register core). stats: R entries (may
 * be NULL). Ranks that disagree on a collective, a rank that never joins one (it finished or blocks), or a rule
 * violation on a rank stop the run with an error naming the collective and the ranks. The cores must all be
 * functional or all timing-only; the fabric must be in one process. */
#define TERN_RANK_REG_ID 63
#define TERN_RANK_REG_COUNT 62
typedef struct {
    uint64_t seq;        /* 1, 2, ... in launch order */
    tern_coll_op op;
    tern_coll_algo algo; /* resolved */
    tern_dtype dtype;
    uint64_t count;      /* the collective layer's count (each rank's full buffer) */
    int64_t start_ps, end_ps; /* the last rank joined (or the previous collective ended) / completion */
    uint64_t time_ps;    /* end - start: tern_coll_result.time_ps + hbm_delay_ps */
    uint64_t hbm_delay_ps; /* the delay from sharing the ranks' HBM with DMA already in flight (0: none) */
} tern_ranks_coll;
typedef struct {
    int64_t time_ps;         /* the slowest rank's run */
    tern_ranks_coll *colls;  /* every collective, in order (malloc'd: tern_ranks_result_free) */
    size_t ncolls, cap;
} tern_ranks_result;
tern_status tern_ranks_run(tern_fabric *f, tern_core *const *cores, const tern_program *const *progs,
                           tern_run_stats *stats, tern_ranks_result *res, tern_error *err);
void tern_ranks_result_free(tern_ranks_result *res);

/* nccom-test / NCCL bus-bandwidth factor for the operation over n ranks: all-reduce 2(n-1)/n, all-gather,
 * reduce-scatter, all-to-all and all-to-allv (n-1)/n, permute 1. */
double tern_coll_busbw_factor(tern_coll_op op, unsigned n);

#ifdef __cplusplus
}
#endif
#endif
