/* The collectives of a tensor/pipeline layout's step (docs/training.md, "Tensor and pipeline parallelism"): the
 * fabric ranks of (data replica, chunk, tensor rank), the stage transfers' time, the tensor group's all-reduce (and
 * sequence parallelism's reduce-scatter and all-gather), the data-parallel collectives and the grouped gradient
 * sums of replicated key/value heads and row-sharded weights. pipeline_parallel.c runs the step that calls them. */
#include "mp_internal.h"
#include "mp_procs.h"

#include <stdlib.h>
#include <string.h>

unsigned mp_rank_of(const struct train_mp *mp, int64_t d, int64_t s, int64_t r)
{
    return (unsigned)((d * mp->p.pp + s) * mp->p.tp + r);
}

/* the NeuronCore (fabric rank) of data replica d, chunk g, tensor rank r: chunk g runs on stage g mod P */
unsigned mp_core_of(const struct train_mp *mp, int64_t d, int64_t g, int64_t r)
{
    return (unsigned)((d * mp->P + g % mp->P) * mp->p.tp + r);
}

/* A permute between stage s's and s + 1's tensor ranks (dir 0) or back (dir 1) of count floats: its time. */
tern_status mp_p2p_time(struct train_mp *mp, int64_t s, size_t count, int dir, double *secs, tern_error *err)
{
    unsigned *pairs = malloc(sizeof(unsigned) * 2 * (size_t)mp->p.tp + 1);
    if (!pairs)
        return train_oom(err);
    for (int64_t r = 0; r < mp->p.tp; r++) {
        unsigned a = mp_core_of(mp, 0, s, r), b = mp_core_of(mp, 0, s + 1, r);
        pairs[2 * r] = dir ? b : a;
        pairs[2 * r + 1] = dir ? a : b;
    }
    tern_coll_desc d;
    memset(&d, 0, sizeof d);
    d.op = TERN_COLL_PERMUTE;
    d.dtype = TERN_DTYPE_FP32;
    d.count = count;
    d.algo = TERN_ALGO_DIRECT;
    d.pairs = pairs;
    d.npairs = (unsigned)mp->p.tp;
    tern_coll_result res;
    tern_status st = tern_collective_time(mp->fab, &d, &res, err);
    free(pairs);
    if (st)
        return tern_error_prefix(err, "train: pipeline transfer after stage %lld: ", (long long)s);
    *secs = (double)res.time_ps * 1e-12;
    return TERN_OK;
}

size_t mp_xoff(const mp_plan *p, int x)
{
    size_t o = 0;
    for (int i = 0; i < x; i++)
        o += p->xv[i].count;
    return o;
}

/* A tensor-group collective (all-reduce; under sequence parallelism reduce-scatter or all-gather, rank r's block the
 * rows [r count / tp, (r + 1) count / tp), in place) of count floats at offset off of every tensor rank's buf
 * (functional; buf NULL: timed only). Its time and the bytes a rank sends on a ring go to the micro-batch's tally. */
tern_status mp_tp_coll(struct train_mp *mp, tern_coll_op op, float **buf, size_t off, size_t count, double *secs,
                           tern_error *err)
{
    int64_t tp = mp->p.tp;
    if (tp < 2)
        return TERN_OK;
    const void *in[64];
    void *out[64];
    if (tp > 64)
        return tern_error_set(err, TERN_ERR_RANGE, "train: tp=%lld (at most 64)", (long long)tp);
    for (int64_t r = 0; r < tp; r++) {
        in[r] = buf ? buf[r] + off : NULL;
        out[r] = buf ? buf[r] + off : NULL;
    }
    tern_coll_desc d;
    memset(&d, 0, sizeof d);
    d.op = op;
    d.reduce = TERN_REDUCE_SUM;
    d.dtype = TERN_DTYPE_FP32;
    d.count = count;
    d.algo = TERN_ALGO_AUTO;
    tern_coll_result res;
    tern_status st = buf ? tern_collective_run(mp->tpfab, &d, in, out, &res, err) /* timing-only: no buf */
                         : tern_collective_time(mp->tpfab, &d, &res, err);
    if (st)
        return tern_error_prefix(err, "train: tensor-parallel %s: ", tern_coll_op_name(op));
    double sec = (double)res.time_ps * 1e-12;
    *secs += sec;
    mp->act_sec += sec;
    mp->act_bytes += (op == TERN_COLL_ALL_REDUCE ? 2.0 : 1.0) * (double)(tp - 1) / (double)tp * (double)count * 4.0;
    return TERN_OK;
}

/* Sequence parallelism: before a program that reads whole rows (a column-parallel pair, the vocabulary-parallel
 * head, the loss's program), the row-sharded values it reads all-gathered over the tensor group (once a
 * micro-batch: a later reader finds them whole). buf NULL: timed only. */
tern_status mp_sp_gather_in(struct train_mp *mp, const mp_seg *sg, float **buf, double *secs, tern_error *err)
{
    const mp_plan *p = &mp->p;
    tern_status st = TERN_OK;
    if (sg->sp)
        return TERN_OK;
    for (int q = 0; q < sg->nxin && !st; q++) {
        int xi = sg->xin[q];
        if (!p->xv[xi].sp || mp->gath[xi])
            continue;
        size_t off = 0;
        for (int i = 0; i < xi; i++)
            off += p->xv[i].count;
        mp->gath[xi] = 1;
        st = mp_tp_coll(mp, TERN_COLL_ALL_GATHER, buf, off, p->xv[xi].count, secs, err);
    }
    return st;
}

/* Sequence parallelism, before a gradient program that reads whole rows: its row-sharded inputs gathered (the
 * loss's program, which runs forward and backward in one, reads them first here), and the gradients of its
 * row-sharded outputs - each rank holds its rows' - all-gathered (the backward of the reduce-scatter after a
 * row-parallel layer, or of the vocabulary-parallel embedding's). buf NULL: timed only. */
tern_status mp_sp_backward_gather(struct train_mp *mp, const mp_seg *sg, float **act, float **dact, double *secs,
                                      tern_error *err)
{
    const mp_plan *p = &mp->p;
    if (sg->sp || !p->sp)
        return TERN_OK;
    tern_status st = mp_sp_gather_in(mp, sg, act, secs, err);
    for (int q = 0; q < sg->nxout && !st && !sg->last; q++) {
        int xi = sg->xout[q];
        if (!p->xv[xi].sp)
            continue;
        size_t off = 0;
        for (int i = 0; i < xi; i++)
            off += p->xv[i].count;
        st = mp_tp_coll(mp, TERN_COLL_ALL_GATHER, dact, off, p->xv[xi].count, secs, err);
    }
    return st;
}

/* A collective over every (stage, tensor rank)'s data-parallel group on the machine's fabric (functional). */
tern_status mp_dp_coll(struct train_mp *mp, tern_coll_op op, float **bufs, size_t count, double *secs,
                           tern_error *err)
{
    int64_t tp = mp->p.tp, P = mp->P, dp = mp->p.dp, nc = mp->cores;
    unsigned *groups = malloc(sizeof(unsigned) * (size_t)nc + 1);
    const void **in = malloc(sizeof(void *) * (size_t)nc + 1);
    void **out = malloc(sizeof(void *) * (size_t)nc + 1);
    if (!groups || !in || !out) {
        free(groups), free(in), free(out);
        return train_oom(err);
    }
    /* interleaved: one collective per local chunk c (chunks c P .. c P + P - 1, one on each stage), in turn */
    double total = 0;
    tern_status st = TERN_OK;
    for (int64_t c = 0; c < mp->V && !st; c++) {
        for (int64_t s = 0, gi = 0; s < P; s++)
            for (int64_t r = 0; r < tp; r++)
                for (int64_t d = 0; d < dp; d++) {
                    unsigned k = mp_core_of(mp, d, c * P + s, r);
                    groups[gi++] = k;
                    in[k] = bufs ? bufs[mp_rank_of(mp, d, c * P + s, r)] : NULL;
                    out[k] = (void *)in[k];
                }
        tern_coll_desc cd;
        memset(&cd, 0, sizeof cd);
        cd.op = op;
        cd.reduce = TERN_REDUCE_SUM;
        cd.dtype = TERN_DTYPE_FP32;
        cd.count = count;
        cd.algo = TERN_ALGO_AUTO;
        cd.groups = groups;
        cd.ngroups = (unsigned)(P * tp);
        cd.group_size = (unsigned)dp;
        tern_coll_result res;
        st = bufs ? tern_collective_run(mp->fab, &cd, in, out, &res, err) /* timing-only: no bufs */
                  : tern_collective_time(mp->fab, &cd, &res, err);
        if (!st)
            total += (double)res.time_ps * 1e-12;
    }
    free(groups), free(in), free(out);
    if (st)
        return tern_error_prefix(err, "train: data-parallel gradient %s: ", tern_coll_op_name(op));
    *secs += total;
    return TERN_OK;
}

/* the weights a group all-reduce packs: replicated over R ranks (key/value heads), or (sp) read row-sharded */
static int mp_packed(const mp_wt *w, int64_t R, int sp)
{
    return sp ? w->sp : w->rep == R;
}

/* Gradients summed over subgroups of R neighbouring tensor ranks, one bucket a chunk. Key/value heads replicated
 * over R tensor ranks (tp exceeds them): a replica's gradient holds its own query heads' part only, so the R ranks
 * sharing a head all-reduce theirs - the weights replicated R ways packed into one bucket (the largest chunk's), a
 * collective over those subgroups of every tensor group on the machine's fabric, one per local chunk (interleaved)
 * in turn - and every replica then updates the same bytes. Sequence parallelism (sp, R = tp): the weights the
 * row-sharded programs read (the norms'), whose gradient on each rank is its rows' part (Megatron all-reduces the
 * sequence-parallel LayerNorms' gradients over the tensor group the same way). bufs NULL: timed only. */
tern_status mp_group_coll(struct train_mp *mp, float **bufs, int sp, double *secs, tern_error *err)
{
    int64_t tp = mp->p.tp, P = mp->P, dp = mp->p.dp, nc = mp->cores;
    unsigned *groups = malloc(sizeof(unsigned) * (size_t)nc + 1);
    const void **in = calloc((size_t)nc + 1, sizeof *in);
    void **out = calloc((size_t)nc + 1, sizeof *out);
    float **bk = calloc((size_t)nc + 1, sizeof *bk);
    tern_status st = !groups || !in || !out || !bk ? train_oom(err) : TERN_OK;
    double total = 0;
    for (int e = 0; e < (sp ? 1 : mp->nkvrep) && !st; e++) {
        int64_t R = sp ? tp : mp->kvrep[e];
        size_t cnt = sp ? mp->spmax : mp->kvmax[e];
        for (int64_t k = 0; k < nc && bufs && !st; k++) {
            free(bk[k]);
            if (!(bk[k] = calloc(cnt + 1, sizeof(float))))
                st = train_oom(err);
        }
        for (int64_t c = 0; c < mp->V && !st; c++) {
            int64_t gi = 0;
            for (int64_t d = 0; d < dp; d++)
                for (int64_t s = 0; s < P; s++)
                    for (int64_t r = 0; r < tp; r++) { /* groups of R neighbouring tensor ranks */
                        unsigned k = mp_core_of(mp, d, c * P + s, r);
                        const mp_stage *S = &mp->stg[c * P + s];
                        groups[gi++] = k;
                        in[k] = out[k] = bufs && mp->dlocal[d] ? bk[k] : NULL; /* another process's: none */
                        size_t o = 0;
                        for (int i = 0; bufs && mp->dlocal[d] && i < S->nw; i++)
                            if (mp_packed(&S->w[i], R, sp)) {
                                memcpy(bk[k] + o, bufs[mp_rank_of(mp, d, c * P + s, r)] + S->w[i].off,
                                       S->w[i].count * sizeof(float));
                                o += S->w[i].count;
                            }
                    }
            tern_coll_desc cd;
            memset(&cd, 0, sizeof cd);
            cd.op = TERN_COLL_ALL_REDUCE;
            cd.reduce = TERN_REDUCE_SUM;
            cd.dtype = TERN_DTYPE_FP32;
            cd.count = cnt;
            cd.algo = TERN_ALGO_AUTO;
            cd.groups = groups;
            cd.ngroups = (unsigned)(nc / R);
            cd.group_size = (unsigned)R;
            tern_coll_result res;
            st = bufs ? tern_collective_run(mp->fab, &cd, in, out, &res, err)
                      : tern_collective_time(mp->fab, &cd, &res, err);
            if (!st)
                total += (double)res.time_ps * 1e-12;
            for (int64_t d = 0; d < dp && bufs && !st; d++)
                for (int64_t s = 0; s < P && mp->dlocal[d]; s++)
                    for (int64_t r = 0; r < tp; r++) {
                        const mp_stage *S = &mp->stg[c * P + s];
                        const float *b = bk[mp_core_of(mp, d, c * P + s, r)];
                        size_t o = 0;
                        for (int i = 0; i < S->nw; i++)
                            if (mp_packed(&S->w[i], R, sp)) {
                                memcpy(bufs[mp_rank_of(mp, d, c * P + s, r)] + S->w[i].off, b + o,
                                       S->w[i].count * sizeof(float));
                                o += S->w[i].count;
                            }
                    }
        }
    }
    for (int64_t k = 0; bk && k < nc; k++)
        free(bk[k]);
    free(bk), free(groups), free(in), free(out);
    if (st)
        return tern_error_prefix(err, sp ? "train: sequence parallelism: the norms' gradient all-reduce: "
                                         : "train: replicated key/value heads' gradient all-reduce: ");
    *secs = total;
    return TERN_OK;
}
