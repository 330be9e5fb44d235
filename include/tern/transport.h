/* tern transport: how the processes of one distributed simulation talk (docs/multichip.md, "MPI"). A transport is
 * a small table of collective operations over K processes (an exchange of byte blocks between every pair, a
 * reduction of 64-bit words, a gather with a deadline, an abort); the fabric and the collective engine use only
 * this table, so the simulation layer never sees MPI. tern_transport_single is the one-process transport (every
 * operation is a local copy), which runs the distributed engine inside one process; tern_mpi_init builds one
 * over Open MPI's MPI_COMM_WORLD when the build has MPI (TERN_HAVE_MPI) and the process was started by mpirun.
 * Every operation is collective: all processes call it in the same order. */
#ifndef TERN_TRANSPORT_H
#define TERN_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>

#include "tern/base.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { TERN_XOP_SUM = 0, TERN_XOP_MAX, TERN_XOP_MIN } tern_xop;

typedef struct tern_transport tern_transport;
struct tern_transport {
    unsigned nprocs, me;
    void *ctx;
    /* Send scount[p] bytes (consecutive in send, process order) to every process p; receive rcount[p] bytes from
     * each p into one malloc'd block *recv (process order; the caller frees it, NULL when nothing came). */
    tern_status (*exchange)(void *ctx, const void *send, const uint64_t *scount, void **recv, uint64_t *rcount,
                            tern_error *err);
    /* v[0..n) := the operation over every process's v, element by element. */
    tern_status (*allreduce)(void *ctx, uint64_t *v, size_t n, tern_xop op, tern_error *err);
    /* all[p * bytes ..] := process p's `mine`. Waits at most timeout_ms for the others; if some never arrive,
     * missing[p] = 1 for each of them (missing has nprocs entries) and the call fails with a message naming the
     * processes. tag tells successive gathers apart (a late process's message never matches an earlier gather). */
    tern_status (*gather)(void *ctx, uint64_t tag, const void *mine, size_t bytes, void *all, unsigned char *missing,
                          uint64_t timeout_ms, tern_error *err);
    /* End every process of the run with this message on stderr; does not return. */
    void (*abort)(void *ctx, const char *msg);
};

/* One verdict after a phase that may fail on some processes only (docs/multichip.md, "MPI"): every process
 * passes its own status (err filled when it failed) and a key that orders failures the way one process would meet
 * them (a rank, a step). Returns TERN_OK when no process failed; otherwise every process returns the failure with
 * the smallest key (the lowest process among equal keys), its code and message copied into err, so each reports
 * the same error. t NULL: st as it is. Collective. */
tern_status tern_transport_agree(const tern_transport *t, tern_status st, uint64_t key, tern_error *err);
/* buf[0..bytes) := process root's bytes, on every process (exactly: the others add zero words). Collective. */
tern_status tern_transport_bcast(const tern_transport *t, unsigned root, void *buf, size_t bytes, tern_error *err);

/* The one-process transport (static, read-only). */
const tern_transport *tern_transport_single(void);

/* MPI (Open MPI). tern_mpi_launched: the process count the launcher gives in the environment (OMPI_COMM_WORLD_SIZE,
 * PMI_SIZE or PMIX_SIZE), 0 when not started by one; tern_mpi_launched_rank likewise (0 when unknown). */
int tern_mpi_available(void); /* 1 when built with MPI */
unsigned tern_mpi_launched(void);
unsigned tern_mpi_launched_rank(void);
/* Started by mpirun (any -np) in an MPI build: initialise MPI and return its transport in *out. Not started by a
 * launcher: *out = NULL (one process, no MPI). Started by mpirun with more than one process in a build without
 * MPI: an error saying so. */
tern_status tern_mpi_init(int *argc, char ***argv, tern_transport **out, tern_error *err);
/* Finalise MPI and free the transport (NULL: nothing). */
void tern_mpi_finalize(tern_transport *t);

#ifdef __cplusplus
}
#endif
#endif
