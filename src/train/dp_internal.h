/* Private to data parallelism (data_parallel.c: the ranks, the gradient step, the plain update; dp_zero.c: ZeRO-1's
 * shard graphs and update, and what process 0 gathers of the shards under MPI). docs/training.md, "Data
 * parallelism" and "Over MPI processes". */
#ifndef TERN_TRAIN_DP_INTERNAL_H
#define TERN_TRAIN_DP_INTERNAL_H

#include "train_internal.h"

#include "tern/collective.h"
#include "tern/fabric.h"
#include "tern/transport.h"

typedef struct {
    float **val;    /* [nw] this rank's weights (the process's first rank r0: t->w[i].val instead) */
    float **st[2];  /* [nw] its optimizer state (r0: t->w[i].state[k]); ZeRO: st[k][0] is the shard */
} dp_rank;

struct train_dp {
    int64_t ranks, chunks, per_rank; /* N, K, K / N */
    int64_t batch;                   /* the whole step's rows (t->o.batch holds the rows of one chunk) */
    int exact, zero;
    double gscale;                   /* applied to the summed gradient and loss */
    tern_exe exe_grad, exe_zero, exe_znorm, exe_zlamb;
    tern_rt *rt_zlamb;               /* ZeRO with LAMB: the first pass (state, direction r, per-tensor sums) */
    size_t ntr;                      /* ZeRO with LAMB: trained tensors (the per-tensor sums' length) */
    float **seg;                     /* ZeRO with LAMB: [ranks] [shard x ntr] 1 where an element is tensor t's */
    float **rdir, **lbuf, *rsq;      /* ZeRO with LAMB: [ranks] r; [ranks] the sums' all-gather; [ranks] sum g^2 */
    tern_rt *rt_grad, *rt_zero, *rt_upd, *rt_znorm; /* rt_znorm: ZeRO with clipping, the shard's sum of squares */
    double flops_grad;
    tern_fabric *fab;
    tern_coll_comm *comm;
    tern_coll_algo algo, algo_ran;
    size_t total;                    /* trained elements */
    size_t flat;                     /* total + 1: the loss partial rides last */
    size_t count;                    /* the gradient collective's elements: flat, or ranks x shard (ZeRO) */
    size_t shard;                    /* ZeRO: elements per rank */
    size_t *off;                     /* [nw] offset of a trained weight in the flat buffer */
    float **leaf;                    /* [per_rank] chunk gradients of the rank being computed */
    float **gbuf;                    /* [ranks] the gradient buffer each rank reduces */
    float **wbuf;                    /* ZeRO: [ranks] the all-gather buffer, ranks x (shard + 1) */
    float *tmp, *tmp2;
    dp_rank *rk;
    uint64_t state_total, state_rank, grad_bytes;
    double t_compute, t_comm, t_update;
    uint64_t synced_step;
    float **synced_ptr;              /* [nw] t->w[i].val when the ranks were last made equal to it */
    char **bn_out;                   /* [nw] a BatchNormalization running statistic: the gradient graph's output of
                                      * its update ("train.new.<w>"); NULL for other weights */
    float **bn_new;                  /* [nw] rank 0's updated running statistic, committed with the step */
    /* Over MPI processes (tern_train_opts.transport): this process runs the ranks of its chips only. Without a
     * transport every rank is local and r0 is 0. Per-rank buffers (rk, gbuf, wbuf, seg, rdir, lbuf) exist for
     * the local ranks only. */
    const tern_transport *tr;
    unsigned char *local;            /* [ranks] 1: this process runs rank r */
    int64_t r0;                      /* the first local rank: its weights and state are t->w's */
};

#define DP_P "train.dp.p"
#define DP_G "train.dp.g"
#define DP_SHARD "train.dp.shard"
#define DP_SUMSQ "train.dp.sumsq"
#define DP_SUMSQ_ALL "train.dp.sumsq.all" /* ZeRO with clipping: the global sum of squares, the shards' in rank order */
#define DP_R "train.dp.r"                  /* ZeRO with LAMB: the shard's update direction */
#define DP_SEG "train.dp.seg"              /* ZeRO with LAMB: [shard, tensors] which tensor each element is in */
#define DP_PSQ "train.dp.psq"              /* ZeRO with LAMB: per tensor, the shard's sum of p^2 (.all: every rank's) */
#define DP_RSQ "train.dp.rsq"              /* the same of r^2 */
#define DP_ROW 8192 /* a long ZeRO shard is padded to whole rows of this many elements (its norm's reduction) */


/* Rank r's weight i (r0's: t->w's). */
float *train_dp_val(tern_trainer *t, int64_t r, size_t i);
/* n floats into input `name` of rt (pure BF16: a BF16 weight or state converted, exactly: it holds BF16 values). */
tern_status train_dp_set_in(tern_trainer *t, tern_rt *rt, const char *name, const float *v, size_t n, tern_error *err);
/* One fp32 sum collective of count elements over the ranks (bufs: each local rank's, NULL: timing-only); its time
 * added to *secs. */
tern_status train_dp_collective(tern_trainer *t, tern_coll_op op, uint64_t count, float **bufs, double *secs,
                                tern_error *err);
/* The end of a phase over this process's ranks: the slowest rank's *secs over every process, one verdict. */
tern_status train_dp_phase_end(const struct train_dp *dp, tern_status st, uint64_t key, double *secs, tern_error *err);
uint64_t train_dp_hash(uint64_t h, const void *p, size_t bytes);
/* Over MPI processes: every process's hash of its first rank's `what` must agree. */
tern_status train_dp_cross_check(const struct train_dp *dp, uint64_t h, uint64_t step, const char *what,
                                 tern_error *err);
/* Rank r's `what` (a) against rank r0's (b), element by element. */
tern_status train_dp_rank_differs(tern_trainer *t, int64_t r, const char *what, const float *a, const float *b,
                                  size_t n, tern_error *err);

/* ZeRO-1 (dp_zero.c): the shard update graph (norm_only: the clipping norm's first pass), LAMB's two passes, the
 * step's update of every local rank's block with the all-gathers around it. */
tern_status train_dp_build_zero(tern_trainer *t, int norm_only, uint64_t *hbm, tern_error *err);
tern_status train_dp_build_zlamb(tern_trainer *t, int phase, uint64_t *hbm, tern_error *err);
tern_status train_dp_update_zero(tern_trainer *t, float **nv, float **nzs, double *gn, float *loss, double *upd,
                                 double *comm, tern_error *err);
#endif
