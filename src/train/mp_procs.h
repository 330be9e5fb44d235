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
 * *d0 0. Refused: K > 1 with one replica, a replica spanning processes, ZeRO-1. */
tern_status train_mp_procs_setup(tern_fabric *fab, const tern_transport *tr, int64_t tp, int64_t pp, int64_t dp,
                                 int zero, unsigned char **dlocal, int64_t *d0, tern_error *err);
/* After the micro-batches: v[0..n) holds this process's entries (its replicas' micro-batches' loss and times; zero
 * elsewhere) and becomes every process's (each entry has one owner, so a sum of their 64-bit patterns is exact);
 * and one verdict on failures (the smallest key's, tern_transport_agree). tr NULL: st as it is. */
tern_status train_mp_procs_merge(const tern_transport *tr, tern_status st, uint64_t key, double *v, size_t n,
                                 tern_error *err);
#endif
