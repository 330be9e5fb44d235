/* The MPI transport (include/tern/transport.h): tern's processes talk through Open MPI (Debian's libopenmpi-dev)
 * on a duplicate of MPI_COMM_WORLD. MPI is an optional build dependency: with TERN_HAVE_MPI this file wraps
 * MPI_Alltoall/Isend/Irecv (exchanges, in chunks of at most 1 GiB so counts fit MPI's int), MPI_Allreduce and a
 * gather that polls with a deadline, so a process that never joins a collective is named instead of hanging
 * everyone; without it, the same functions say why a run under mpirun is refused. The launcher is recognised by
 * its environment (Open MPI's OMPI_COMM_WORLD_SIZE, PMI's PMI_SIZE, PMIx's PMIX_SIZE), so a program started
 * without mpirun never initialises MPI. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tern/transport.h"

#ifdef TERN_HAVE_MPI
#include <mpi.h>
#endif

static unsigned env_uint(const char *const *names)
{
    for (; *names; names++) {
        const char *v = getenv(*names);
        if (v && *v) {
            char *end;
            unsigned long n = strtoul(v, &end, 10);
            if (!*end && n < 1000000)
                return (unsigned)n;
        }
    }
    return 0;
}

unsigned tern_mpi_launched(void)
{
    static const char *const names[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", NULL};
    return env_uint(names);
}

unsigned tern_mpi_launched_rank(void)
{
    static const char *const names[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", NULL};
    return env_uint(names);
}

tern_status tern_transport_agree(const tern_transport *t, tern_status st, uint64_t key, tern_error *err)
{
    if (!t)
        return st;
    tern_error e2;
    if (key == UINT64_MAX)
        key--;
    uint64_t v = st ? key : UINT64_MAX;
    if (t->allreduce(t->ctx, &v, 1, TERN_XOP_MIN, &e2))
        t->abort(t->ctx, e2.msg);
    if (v == UINT64_MAX)
        return TERN_OK;
    uint64_t who = st && key == v ? t->me : UINT64_MAX;
    if (t->allreduce(t->ctx, &who, 1, TERN_XOP_MIN, &e2))
        t->abort(t->ctx, e2.msg);
    /* the chosen process sends its code and message to every process (itself included) */
    unsigned K = t->nprocs;
    size_t len = who == t->me ? strnlen(err->msg, sizeof err->msg - 1) : 0, one = 4 + len;
    uint64_t *sc = calloc(2 * (size_t)K, sizeof *sc);
    unsigned char *send = who == t->me ? malloc(one * K) : NULL;
    if (!sc || (who == t->me && !send))
        t->abort(t->ctx, "transport: out of memory agreeing on an error");
    for (unsigned q = 0; send && q < K; q++) {
        uint32_t code = (uint32_t)err->code;
        memcpy(send + q * one, &code, 4);
        memcpy(send + q * one + 4, err->msg, len);
        sc[q] = one;
    }
    void *recv = NULL;
    if (t->exchange(t->ctx, send, sc, &recv, sc + K, &e2))
        t->abort(t->ctx, e2.msg);
    uint64_t got = sc[K + who];
    uint32_t code = 0;
    if (got < 4 || !recv)
        t->abort(t->ctx, "transport: agreeing on an error: the failing process sent no message");
    const unsigned char *r = recv;
    for (unsigned q = 0; q < who; q++)
        r += sc[K + q];
    memcpy(&code, r, 4);
    err->code = (tern_status)code;
    memcpy(err->msg, r + 4, got - 4);
    err->msg[got - 4] = 0;
    free(recv);
    free(send);
    free(sc);
    return err->code ? err->code : TERN_ERR_INVALID;
}

tern_status tern_transport_bcast(const tern_transport *t, unsigned root, void *buf, size_t bytes, tern_error *err)
{
    if (!t || t->nprocs < 2 || bytes == 0)
        return TERN_OK;
    /* an allreduce of 64-bit words in which only the root's are nonzero: the sum is its bytes, exactly */
    enum { WORDS = 1 << 24 };
    uint64_t *w = malloc(sizeof *w * (bytes / 8 + 1 < WORDS ? bytes / 8 + 1 : WORDS));
    if (!w) /* the others would wait in the allreduce: end them all */
        t->abort(t->ctx, "transport: out of memory for a broadcast");
    tern_status st = TERN_OK;
    for (size_t at = 0; at < bytes && !st; at += (size_t)WORDS * 8) {
        size_t n = bytes - at < (size_t)WORDS * 8 ? bytes - at : (size_t)WORDS * 8, nw = (n + 7) / 8;
        memset(w, 0, nw * 8);
        if (t->me == root)
            memcpy(w, (unsigned char *)buf + at, n);
        if (!(st = t->allreduce(t->ctx, w, nw, TERN_XOP_SUM, err)))
            memcpy((unsigned char *)buf + at, w, n);
    }
    free(w);
    return st;
}

#ifndef TERN_HAVE_MPI

int tern_mpi_available(void) { return 0; }

tern_status tern_mpi_init(int *argc, char ***argv, tern_transport **out, tern_error *err)
{
    (void)argc, (void)argv;
    *out = NULL;
    unsigned n = tern_mpi_launched();
    if (n > 1)
        return tern_error_set(err, TERN_ERR_UNSUPPORTED,
                              "started by mpirun with %u processes, but this tern was built without MPI (install "
                              "libopenmpi-dev, scripts/install-deps.sh, and rebuild), so each process would run the "
                              "whole simulation alone: run it without mpirun", n);
    return TERN_OK;
}

void tern_mpi_finalize(tern_transport *t) { (void)t; }

#else

typedef struct {
    MPI_Comm comm;
    int errfd; /* a copy of stderr at MPI_Init: abort messages still show when a command silenced its stderr */
} mpi_ctx;

#define CHUNK (1ull << 30)
#define TAG_DATA 17
#define TAG_JOIN0 1000

static tern_status mpi_fail(tern_error *err, int rc, const char *what)
{
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    return tern_error_set(err, TERN_ERR_IO, "MPI %s failed: %.*s", what, len, msg);
}

static tern_status mpi_exchange(void *vctx, const void *send, const uint64_t *scount, void **recv, uint64_t *rcount,
                                tern_error *err)
{
    mpi_ctx *c = vctx;
    int K, me, rc;
    MPI_Comm_size(c->comm, &K);
    MPI_Comm_rank(c->comm, &me);
    *recv = NULL;
    if ((rc = MPI_Alltoall(scount, 1, MPI_UINT64_T, rcount, 1, MPI_UINT64_T, c->comm)) != MPI_SUCCESS)
        return mpi_fail(err, rc, "Alltoall of message sizes");
    uint64_t total = 0, nreq = 0;
    for (int q = 0; q < K; q++) {
        total += rcount[q];
        if (q != me)
            nreq += (rcount[q] + CHUNK - 1) / CHUNK + (scount[q] + CHUNK - 1) / CHUNK;
    }
    unsigned char *buf = total ? malloc(total) : NULL;
    uint64_t stotal = 0;
    for (int q = 0; q < K; q++)
        stotal += scount[q];
    if (total < INT_MAX && stotal < INT_MAX) {
        /* small enough for MPI's int counts and displacements: one collective call */
        int *cnt = malloc(sizeof *cnt * 4 * (size_t)K);
        if ((total && !buf) || !cnt) {
            free(buf);
            free(cnt);
            return tern_error_set(err, TERN_ERR_NOMEM, "MPI exchange: out of memory for %llu bytes",
                                  (unsigned long long)total);
        }
        int *sc = cnt, *sd = cnt + K, *rc2 = cnt + 2 * K, *rd = cnt + 3 * K;
        for (int q = 0, so = 0, ro = 0; q < K; q++) {
            sc[q] = (int)scount[q];
            rc2[q] = (int)rcount[q];
            sd[q] = so;
            rd[q] = ro;
            so += sc[q];
            ro += rc2[q];
        }
        static const unsigned char none;
        rc = MPI_Alltoallv(send ? send : &none, sc, sd, MPI_BYTE, buf ? buf : (void *)&none, rc2, rd, MPI_BYTE,
                           c->comm);
        free(cnt);
        if (rc != MPI_SUCCESS) {
            free(buf);
            return mpi_fail(err, rc, "Alltoallv");
        }
        *recv = buf;
        return TERN_OK;
    }
    MPI_Request *req = malloc(sizeof *req * (nreq ? nreq : 1));
    if ((total && !buf) || !req) {
        free(buf);
        free(req);
        return tern_error_set(err, TERN_ERR_NOMEM, "MPI exchange: out of memory for %llu bytes",
                              (unsigned long long)total);
    }
    size_t n = 0;
    uint64_t rat = 0, sat = 0;
    for (int q = 0; q < K; q++) {
        if (q == me) {
            if (rcount[q])
                memcpy(buf + rat, (const unsigned char *)send + sat, rcount[q]);
        } else {
            for (uint64_t o = 0; o < rcount[q]; o += CHUNK) {
                uint64_t len = rcount[q] - o < CHUNK ? rcount[q] - o : CHUNK;
                MPI_Irecv(buf + rat + o, (int)len, MPI_BYTE, q, TAG_DATA, c->comm, &req[n++]);
            }
            for (uint64_t o = 0; o < scount[q]; o += CHUNK) {
                uint64_t len = scount[q] - o < CHUNK ? scount[q] - o : CHUNK;
                MPI_Isend((const unsigned char *)send + sat + o, (int)len, MPI_BYTE, q, TAG_DATA, c->comm,
                          &req[n++]);
            }
        }
        rat += rcount[q];
        sat += scount[q];
    }
    rc = MPI_Waitall((int)n, req, MPI_STATUSES_IGNORE);
    free(req);
    if (rc != MPI_SUCCESS) {
        free(buf);
        return mpi_fail(err, rc, "exchange");
    }
    *recv = buf;
    return TERN_OK;
}

static tern_status mpi_allreduce(void *vctx, uint64_t *v, size_t n, tern_xop op, tern_error *err)
{
    mpi_ctx *c = vctx;
    MPI_Op o = op == TERN_XOP_SUM ? MPI_SUM : op == TERN_XOP_MAX ? MPI_MAX : MPI_MIN;
    int rc = MPI_Allreduce(MPI_IN_PLACE, v, (int)n, MPI_UINT64_T, o, c->comm);
    return rc == MPI_SUCCESS ? TERN_OK : mpi_fail(err, rc, "Allreduce");
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Point-to-point, polled: a blocking MPI collective would wait forever for a process that never comes. */
static tern_status mpi_gather(void *vctx, uint64_t tag, const void *mine, size_t bytes, void *all,
                              unsigned char *missing, uint64_t timeout_ms, tern_error *err)
{
    mpi_ctx *c = vctx;
    int K, me;
    MPI_Comm_size(c->comm, &K);
    MPI_Comm_rank(c->comm, &me);
    int t = TAG_JOIN0 + (int)(tag % 30000);
    MPI_Request *rq = malloc(sizeof *rq * 2 * (size_t)K);
    if (!rq)
        return tern_error_set(err, TERN_ERR_NOMEM, "MPI gather: out of memory");
    memcpy((unsigned char *)all + (size_t)me * bytes, mine, bytes);
    for (int q = 0; q < K; q++) {
        missing[q] = 0;
        rq[q] = rq[K + q] = MPI_REQUEST_NULL;
        if (q == me)
            continue;
        MPI_Irecv((unsigned char *)all + (size_t)q * bytes, (int)bytes, MPI_BYTE, q, t, c->comm, &rq[q]);
        MPI_Isend(mine, (int)bytes, MPI_BYTE, q, t, c->comm, &rq[K + q]);
    }
    uint64_t start = now_ms();
    struct timespec nap = {0, 200000};
    for (;;) {
        int done = 0;
        MPI_Testall(2 * K, rq, &done, MPI_STATUSES_IGNORE);
        if (done) {
            free(rq);
            return TERN_OK;
        }
        if (now_ms() - start >= timeout_ms)
            break;
        nanosleep(&nap, NULL);
        if (nap.tv_nsec < 10000000)
            nap.tv_nsec *= 2;
    }
    char list[256];
    size_t at = 0;
    unsigned nmiss = 0;
    list[0] = 0;
    for (int q = 0; q < K; q++) {
        int got = 1;
        if (rq[q] != MPI_REQUEST_NULL)
            MPI_Test(&rq[q], &got, MPI_STATUS_IGNORE);
        if (!got) {
            missing[q] = 1;
            if (at + 16 < sizeof list)
                at += (size_t)snprintf(list + at, sizeof list - at, "%s%d", nmiss ? ", " : "", q);
            nmiss++;
        }
    }
    free(rq); /* the run is about to end: the pending requests are abandoned with it */
    return tern_error_set(err, TERN_ERR_INVALID, "process%s %s of %d did not arrive within %llu ms",
                          nmiss == 1 ? "" : "es", list, K, (unsigned long long)timeout_ms);
}

static void mpi_abort(void *vctx, const char *msg)
{
    mpi_ctx *c = vctx;
    int me = 0;
    MPI_Comm_rank(c->comm, &me);
    fflush(stderr);
    dprintf(c->errfd >= 0 ? c->errfd : 2, "%s (process %d ends the run)\n", msg, me);
    MPI_Abort(c->comm, 1);
    abort();
}

int tern_mpi_available(void) { return 1; }

tern_status tern_mpi_init(int *argc, char ***argv, tern_transport **out, tern_error *err)
{
    *out = NULL;
    if (tern_mpi_launched() == 0)
        return TERN_OK;
    int inited = 0, rc;
    MPI_Initialized(&inited);
    if (!inited && (rc = MPI_Init(argc, argv)) != MPI_SUCCESS)
        return tern_error_set(err, TERN_ERR_IO, "MPI_Init failed (code %d)", rc);
    tern_transport *t = calloc(1, sizeof *t);
    mpi_ctx *c = calloc(1, sizeof *c);
    if (!t || !c) {
        free(t);
        free(c);
        return tern_error_set(err, TERN_ERR_NOMEM, "MPI transport: out of memory");
    }
    MPI_Comm_dup(MPI_COMM_WORLD, &c->comm);
    c->errfd = dup(2);
    int K, me;
    MPI_Comm_size(c->comm, &K);
    MPI_Comm_rank(c->comm, &me);
    *t = (tern_transport){(unsigned)K, (unsigned)me, c, mpi_exchange, mpi_allreduce, mpi_gather, mpi_abort};
    *out = t;
    return TERN_OK;
}

void tern_mpi_finalize(tern_transport *t)
{
    if (!t)
        return;
    mpi_ctx *c = t->ctx;
    MPI_Comm_free(&c->comm);
    if (c->errfd >= 0)
        close(c->errfd);
    free(c);
    free(t);
    int fin = 0;
    MPI_Finalized(&fin);
    if (!fin)
        MPI_Finalize();
}

#endif
