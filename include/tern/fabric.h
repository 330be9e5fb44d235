/* tern fabric: the multi-rank machine of docs/multichip.md. A fabric is built from a machine file (an instance
 * or a system such as the Trn2 UltraServer), optionally repeated N times as a cluster over EFA
 * ("2xtrn1.32xlarge"). Its ranks are NeuronCores in a documented order (rank = ((node * chips per node) + chip)
 * * ranks per chip + core, chips numbered row-major in their torus), and its links are resources with a busy-until
 * time: each chip's HBM, each rank's collective DMA channel, each directed NeuronLink link, each chip's EFA share.
 * A transfer between ranks is routed (dimension-order on a torus, one up- and one down-link through a switch, EFA
 * between instances that share no NeuronLink) and timed from its route: the DMA, HBM and link occupancies at
 * their bandwidths, first come first served, plus the fixed DMA cost and the per-hop latencies.
 *
 * Ranks talk to the fabric only through timestamped transfers (tern_fabric_xfer: source, destination, bytes, the
 * time it may start, a sequence number). One process can own every rank, or a transport (tern/transport.h, MPI)
 * spreads the chips over processes: each process owns a contiguous set of chips with their ranks and resources,
 * and the collective layer's conservative parallel simulation (lookahead = tern_fabric_min_latency_ps) sends each
 * resource's reservations to its owner. Times are integer picoseconds; every result depends only on the machine
 * and the transfers' order, which callers make deterministic (ties broken by time, rank and sequence number). */
#ifndef TERN_FABRIC_H
#define TERN_FABRIC_H

#include <stddef.h>
#include <stdint.h>

#include "tern/arch.h"
#include "tern/base.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tern_fabric tern_fabric;

/* Size limit (docs/multichip.md): a fabric is refused when it and the simulation of a collective over every rank
 * in use would need more host memory than this; TERN_FABRIC_EVENT_BYTES is the estimate per (step, rank) event. */
#define TERN_FABRIC_HOST_LIMIT (16ull << 30)
#define TERN_FABRIC_EVENT_BYTES 128u

typedef struct {
    unsigned nodes; /* use the first N instances (nccom-test -N); 0 = all of them */
    unsigned ranks; /* use the first R ranks of each used instance, R = ranks / nodes; 0 = all of them */
    unsigned lnc;   /* logical NeuronCore size: physical cores per rank; 0 = the default (1 on v2, 2 on v3/v4) */
} tern_fabric_opts;

/* Split "NxNAME" (N a decimal count >= 1, 'x' lower-case) into N and NAME; a spec without a leading count is
 * count 1. Errors name the spec and the rule ("2x" has no machine, "0xtrn1.32xlarge" a zero count). */
tern_status tern_cluster_spec_parse(const char *spec, unsigned *count, char *name, size_t cap, tern_error *err);

/* Build a fabric from a cluster spec, a cluster file (a path to JSON with "schema": "tern-cluster/1", see
 * docs/multichip.md "Cluster files": a machine, a count and what-if overrides of the links and the topology) or
 * a machine name/path (tern_machine_load's rules). The machine must be an
 * instance or a system; --nodes larger than the cluster, ranks not divisible by nodes or above what a node has,
 * and an lnc that does not divide the chip's cores are errors naming the value and the limit. */
tern_status tern_fabric_load(const char *spec, const tern_fabric_opts *o, tern_fabric **out, tern_error *err);
/* The same from a loaded machine (the fabric copies what it needs; m may be freed afterwards). */
tern_status tern_fabric_create(const tern_machine *m, unsigned cluster_count, const tern_fabric_opts *o,
                               tern_fabric **out, tern_error *err);
void tern_fabric_free(tern_fabric *f);
/* What a machine spec is built from: for a cluster (NxINSTANCE, or a cluster file) the instance or system it
 * repeats in base, its instance count in *instances and its physical NeuronCores in *cores; for any other
 * machine name or path the spec itself, 1 and 0 (the caller asks the machine). Errors as tern_fabric_load's. */
tern_status tern_machine_spec_base(const char *spec, char *base, size_t cap, unsigned *instances, unsigned *cores,
                                   tern_error *err);
/* The fabric's instances (all of them, not only those in use) and the ranks one instance holds at its lnc. */
unsigned tern_fabric_instances(const tern_fabric *f);
unsigned tern_fabric_node_ranks_max(const tern_fabric *f);
/* The fewest instances of f's machine that hold `ranks` ranks spread equally (tern_fabric_opts.nodes for a
 * launch that fills instances before it crosses EFA): the smallest n >= ranks / per-instance ranks dividing
 * `ranks`, or every instance when none does. */
unsigned tern_fabric_fewest_nodes(const tern_fabric *f, unsigned ranks);

typedef struct {
    unsigned node;     /* instance index in the fabric (the cluster's instances, then a system's instances) */
    unsigned unit;     /* which copy of the machine file (cluster member) */
    unsigned chip;     /* chip index inside the node, row-major in the node's torus */
    unsigned core;     /* first physical core of the rank in its chip */
    unsigned chip_global;
} tern_rank_place;

const char *tern_fabric_machine_name(const tern_fabric *f);
/* The instance or system the fabric repeats ("trn1.32xlarge" for "4xtrn1.32xlarge" or a cluster file). */
const char *tern_fabric_base_machine(const tern_fabric *f);
unsigned tern_fabric_ranks(const tern_fabric *f);
unsigned tern_fabric_nodes(const tern_fabric *f);     /* nodes in use */
unsigned tern_fabric_lnc(const tern_fabric *f);
void tern_fabric_place(const tern_fabric *f, unsigned rank, tern_rank_place *out);
/* Ring order: a Hamiltonian path through the used ranks where consecutive ranks are on the same chip or on
 * chips joined by one link (snake through each torus plane, alternating direction from instance to instance).
 * order[i] = the rank at ring position i; n = tern_fabric_ranks entries. */
void tern_fabric_ring_order(const tern_fabric *f, unsigned *order);

/* The fixed costs the collective layer adds around a schedule (machine file chip.collectives). */
uint64_t tern_fabric_launch_ps(const tern_fabric *f);
uint64_t tern_fabric_setup_ps(const tern_fabric *f);
/* The smallest latency of any transfer between distinct ranks: the conservative lookahead for MPI. */
uint64_t tern_fabric_min_latency_ps(const tern_fabric *f);

/* One timestamped transfer. The destination rank's collective DMA pulls `bytes` from the source rank's HBM; a
 * reducing transfer also reads `reduce` blocks of the destination chip (1: its own copy, 2 reads and 1 write per
 * element, as DMA compute does; 2: its own and its chip partner's, KangaRing's 3R1W), and a duplicated write (dup
 * = 1) also writes the result to the partner on the destination chip (KangaRing's 1R2W). */
typedef struct {
    unsigned src, dst;
    uint64_t bytes;
    int reduce;        /* 0 copy, 1 or 2 local blocks read besides the incoming one */
    uint64_t ready_ps; /* earliest start */
    uint64_t seq;      /* caller's sequence number, for the record */
    int dup;           /* 1: the write goes to a second rank on the destination chip too */
} tern_fabric_xfer;

/* Reserve the route's resources first come first served and return the completion time (ps). */
uint64_t tern_fabric_transfer(tern_fabric *f, const tern_fabric_xfer *x);
/* Link hops (NeuronLink) and EFA hops of the route between two ranks. */
void tern_fabric_route_hops(const tern_fabric *f, unsigned src, unsigned dst, unsigned *links, unsigned *efa);
/* Forget every reservation (start a new collective on an idle fabric). */
void tern_fabric_reset(tern_fabric *f);

/* ---- distribution over processes (docs/multichip.md, "MPI") ---- */
typedef struct tern_transport tern_transport; /* tern/transport.h */

/* Spread the fabric over t's processes (NULL: this process owns everything). The chips that hold ranks are split
 * into t->nprocs contiguous runs (run p = used chips [p*U/K, (p+1)*U/K)); a chip without ranks (a route passes
 * through it) goes with the used chip before it. More processes than used chips is an error naming both counts.
 * The fabric keeps the pointer: t must outlive it. */
tern_status tern_fabric_set_transport(tern_fabric *f, const tern_transport *t, tern_error *err);
const tern_transport *tern_fabric_transport(const tern_fabric *f);
unsigned tern_fabric_procs(const tern_fabric *f);                     /* 1 without a transport */
unsigned tern_fabric_proc(const tern_fabric *f);                      /* this process, 0 without one */
unsigned tern_fabric_rank_owner(const tern_fabric *f, unsigned rank); /* the process that owns a rank */
int tern_fabric_rank_is_local(const tern_fabric *f, unsigned rank);

/* A transfer split into the resources it occupies, for an engine whose resources live in several processes:
 * tern_fabric_transfer(x) == max(ready, tern_fabric_reserve(res[i], ready, occ[i]) for each i) + *latency_ps.
 * Returns the number of resources (at most TERN_FABRIC_ROUTE_MAX); a resource appears once. */
#define TERN_FABRIC_ROUTE_MAX 64
unsigned tern_fabric_route_resources(const tern_fabric *f, const tern_fabric_xfer *x, uint64_t *res, uint64_t *occ,
                                     uint64_t *latency_ps);
unsigned tern_fabric_resource_owner(const tern_fabric *f, uint64_t res);
/* First come first served on one resource: start = max(busy, ready), busy = start + occ; returns busy. */
uint64_t tern_fabric_reserve(tern_fabric *f, uint64_t res, uint64_t ready_ps, uint64_t occ_ps);

#ifdef __cplusplus
}
#endif
#endif
