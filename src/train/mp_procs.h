/* Private to the training layer: a tensor/pipeline layout over MPI processes (mp_procs.c; docs/training.md,
 * "Over MPI processes"). Each process holds whole data replicas of the layout - every stage and tensor rank of
 * them - and runs only their micro-batches; pipeline_parallel.c calls these two. */
#ifndef TERN_MP_PROCS_H
#define TERN_MP_PROCS_H

#include "tern/fabric.h"
#include "tern/transport.h"

/* Spreads fab's ranks (dp replicas of `per` consecutive ranks each, the layout's rank order) over the transport's
 * processes as the other distributed commands do, and checks that every replica lies in one process: *dlocal
 * (malloc'd, dp entries) 1 for this process's replicas, *d0 its first. tr NULL: no transport, every replica local,
 * *d0 0. Refused: K > 1 with one replica, a replica spanning processes. */
tern_status train_mp_procs_setup(tern_fabric *fab, const tern_transport *tr, int64_t tp, int64_t pp, int64_t dp,
                                 unsigned char **dlocal, int64_t *d0, tern_error *err);
/* After the micro-batches: v[0..n) holds this process's entries (its replicas' micro-batches' loss and times; zero
 * elsewhere) and becomes every process's (each entry has one owner, so a sum of their 64-bit patterns is exact);
 * and one verdict on failures (the smallest key's, tern_transport_agree). tr NULL: st as it is. */
tern_status train_mp_procs_merge(const tern_transport *tr, tern_status st, uint64_t key, double *v, size_t n,
                                 tern_error *err);
/* As train_mp_procs_merge, for the maximum: *v becomes the largest over the processes (non-negative doubles order as
 * their 64-bit patterns, so the maximum of the patterns is exact). */
tern_status train_mp_procs_max(const tern_transport *tr, tern_status st, uint64_t key, double *v, tern_error *err);
/* ZeRO-1 in a layout: vec[0..n) are flat vectors in blocks of Z floats (block d: [d Z, (d+1) Z), clipped to len[i];
 * len NULL: dp Z each), block d valid on the process that holds data replica d; afterwards every block is valid on
 * every process (a sum of 64-bit words of a buffer in which each float has one writer, its block's owner: exact).
 * tr NULL: nothing to do. Collective. */
tern_status train_mp_procs_blocks(const tern_transport *tr, const unsigned char *dlocal, int64_t dp, size_t Z,
                                  float *const *vec, const size_t *len, size_t n, tern_error *err);
/* Over MPI processes with ZeRO-1 in a layout (pipeline_parallel.c): every process's state blocks to every process,
 * then the shards into the trainer's weights and state (what checkpoints write). Collective; else nothing. */
struct tern_trainer;
tern_status train_mp_collect(struct tern_trainer *t, tern_error *err);
#endif
