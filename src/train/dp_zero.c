/* ZeRO stage 1 over the data-parallel ranks (docs/training.md, "Data parallelism"): the optimizer state is sharded.
 * The flat gradient is reduce-scattered (rank r gets block r); a shard update graph - the step graph's own update
 * nodes on a flat shard - updates block r of the weights with rank r's state shard; an all-gather of the updated
 * blocks, each followed by its shard's sum of squared gradients, gives every rank the whole weights and the global
 * norm (summed in rank order). Clipping needs the norm first: a shard-norm pass and an all-gather of one sum per
 * rank come before the update. LAMB's per-tensor trust ratio needs per-tensor sums across shards: two passes
 * around an all-gather of them. Over MPI processes each process runs its own ranks' blocks, and process 0 gathers
 * the other processes' state shards when a checkpoint is written (tern_train_collect). */
#include "dp_internal.h"
#include "mp_procs.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int zadd_input2(ad_ctx *a, const char *name, int64_t n0, int64_t n1)
{
    int id = train_flat_input(a, name, n0);
    if (id >= 0) {
        a->g->values[id].rank = 2;
        a->g->values[id].dims[1] = n1;
    }
    return id;
}

/* Per tensor, the sum over the shard of x's elements in that tensor: x [S] times seg [S, T], summed over S (in
 * rows of DP_ROW first when the shard is longer, as the norm's reduction). */
static int seg_sum(ad_ctx *a, int x, int seg, size_t S, size_t T)
{
    ad_shape col = {.rank = 2, .d = {(int64_t)S, 1}};
    int prod = ad_op2(a, "Mul", ad_reshape(a, x, &col), seg);
    int64_t ax0 = 0, ax1 = 1;
    if (S > DP_ROW) {
        ad_shape rows = {.rank = 3, .d = {(int64_t)(S / DP_ROW), DP_ROW, (int64_t)T}};
        return ad_reduce(a, "ReduceSum", ad_reduce(a, "ReduceSum", ad_reshape(a, prod, &rows), 1, &ax1, 0), 1, &ax0,
                         0);
    }
    return ad_reduce(a, "ReduceSum", prod, 1, &ax0, 0);
}

/* ZeRO-1 with LAMB, whose trust ratio ||p|| / ||r|| is per tensor while a shard holds pieces of several: two
 * passes around an all-gather of per-tensor sums. Pass 1 (phase 1): the step graph's LAMB state update and
 * direction on the shard (r = m/bc1 / (sqrt(v)/sqrt(bc2) + eps) + wd p, written as build_update writes it), the
 * new state, r, sum(g^2) and per tensor the shard's sums of p^2 and r^2. Pass 2 (phase 2): from every rank's sums
 * (added in rank order) the trust ratio per tensor (1 when either norm is 0), spread to the elements through seg
 * (one nonzero per row: exact), and p - r (trust lr). */
tern_status train_dp_build_zlamb(tern_trainer *t, int phase, uint64_t *hbm, tern_error *err)
{
    struct train_dp *dp = t->dp;
    const tern_train_opts *o = &t->o;
    tern_graph *g = calloc(1, sizeof *g);
    if (!g)
        return train_oom(err);
    g->opset = 17;
    g->ir_version = 8;
    ad_ctx a;
    tern_status st = ad_init(&a, g, err);
    size_t S = dp->shard, T = dp->ntr;
    int outs[8], no = 0;
    if (!st) {
        ad_shape one = {.rank = 1, .d = {1}};
        int p = train_flat_input(&a, DP_P, (int64_t)S), seg = zadd_input2(&a, DP_SEG, (int64_t)S, (int64_t)T);
        if (phase == 1) {
            int gin = train_flat_input(&a, DP_G, (int64_t)S), gs = train_flat_input(&a, TRAIN_GSCALE, 1);
            int st0 = train_flat_input(&a, "train.state0." DP_SHARD, (int64_t)S);
            int st1 = train_flat_input(&a, "train.state1." DP_SHARD, (int64_t)S);
            int bc2 = train_flat_input(&a, TRAIN_BC2_SQRT, 1), bc1 = train_flat_input(&a, TRAIN_BC1, 1);
            int gr = ad_op2(&a, "Mul", gin, gs), sq = ad_op2(&a, "Mul", gr, gr), sumsq;
            if (S > DP_ROW) {
                ad_shape rc = {.rank = 2, .d = {(int64_t)(S / DP_ROW), DP_ROW}};
                int64_t ax = 1;
                sumsq = ad_reduce(&a, "ReduceSum", ad_reduce(&a, "ReduceSum", ad_reshape(&a, sq, &rc), 1, &ax, 0), 0,
                                  NULL, 0);
            } else {
                sumsq = ad_reduce(&a, "ReduceSum", sq, 0, NULL, 0);
            }
            int gu = gr;
            if (o->clip_norm > 0) {
                int gnorm = ad_op1(&a, "Sqrt", train_flat_input(&a, DP_SUMSQ_ALL, 1));
                int coef = ad_op2(&a, "Min",
                                  ad_op2(&a, "Div", ad_const_f(&a, (float)o->clip_norm),
                                         ad_op2(&a, "Add", gnorm, ad_const_f(&a, (float)1e-6))),
                                  ad_const_f(&a, 1.0f));
                gu = ad_op2(&a, "Mul", gr, coef);
            }
            int m = ad_op2(&a, "Add", ad_op2(&a, "Mul", st0, ad_const_f(&a, (float)o->beta1)),
                           ad_op2(&a, "Mul", gu, ad_const_f(&a, (float)(1 - o->beta1))));
            int v = ad_op2(&a, "Add", ad_op2(&a, "Mul", st1, ad_const_f(&a, (float)o->beta2)),
                           ad_op2(&a, "Mul", ad_op2(&a, "Mul", gu, gu), ad_const_f(&a, (float)(1 - o->beta2))));
            int denom = ad_op2(&a, "Add", ad_op2(&a, "Div", ad_op1(&a, "Sqrt", v), bc2), ad_const_f(&a, (float)o->eps));
            int r = ad_op2(&a, "Div", ad_op2(&a, "Div", m, bc1), denom);
            if (o->weight_decay != 0)
                r = ad_op2(&a, "Add", r, ad_op2(&a, "Mul", p, ad_const_f(&a, (float)o->weight_decay)));
            outs[no++] = train_name_value(&a, m, "train.state0.new." DP_SHARD);
            outs[no++] = train_name_value(&a, v, "train.state1.new." DP_SHARD);
            outs[no++] = train_name_value(&a, r, DP_R);
            outs[no++] = train_name_value(&a, ad_reshape(&a, sumsq, &one), DP_SUMSQ);
            outs[no++] = train_name_value(&a, seg_sum(&a, ad_op2(&a, "Mul", p, p), seg, S, T), DP_PSQ);
            outs[no++] = train_name_value(&a, seg_sum(&a, ad_op2(&a, "Mul", r, r), seg, S, T), DP_RSQ);
        } else {
            int r = train_flat_input(&a, DP_R, (int64_t)S), lr = train_flat_input(&a, TRAIN_STEP_SIZE, 1);
            int wn = ad_op1(&a, "Sqrt", train_flat_input(&a, DP_PSQ ".all", (int64_t)T));
            int rn = ad_op1(&a, "Sqrt", train_flat_input(&a, DP_RSQ ".all", (int64_t)T));
            int in[3] = {ad_op2(&a, "Greater", ad_op2(&a, "Mul", wn, rn), ad_const_f(&a, 0.0f)),
                         ad_op2(&a, "Div", wn, rn), ad_const_f(&a, 1.0f)};
            ad_shape rowt = {.rank = 2, .d = {1, (int64_t)T}};
            int64_t ax1 = 1;
            int te = ad_reduce(&a, "ReduceSum", ad_op2(&a, "Mul", seg, ad_reshape(&a, ad_op(&a, "Where", 3, in), &rowt)),
                               1, &ax1, 0);
            int np = ad_op2(&a, "Sub", p, ad_op2(&a, "Mul", r, ad_op2(&a, "Mul", te, lr)));
            outs[no++] = train_name_value(&a, np, DP_P ".new");
        }
        if (a.failed) {
            st = err->code;
        } else {
            st = train_set_outputs(g, outs, no, err);
        }
    }
    ad_free(&a);
    if (!st && ((st = graph_compact(g, NULL, err)) || (st = graph_sort(g, err)) || (st = tern_graph_infer(g, err))))
        tern_error_prefix(err, "train: ZeRO LAMB graph: ");
    if (!st)
        st = phase == 1 ? train_compile_load(t, g, &dp->exe_zlamb, &dp->rt_zlamb, NULL, hbm, "ZeRO LAMB pass 1", err)
                        : train_compile_load(t, g, &dp->exe_zero, &dp->rt_zero, NULL, hbm, "ZeRO LAMB pass 2", err);
    tern_graph_free(g);
    return st;
}

/* ZeRO-1's shard update graph: a flat shard of p and g (shard elements), the state shards, the step's scalars;
 * g x gscale through the step graph's own update nodes; outputs the new p, the new state and sum(g^2). With
 * clipping, g x gscale is multiplied by the step graph's coefficient min(clip / (sqrt(S) + 1e-6), 1) of the global
 * sum of squares S (an input: the shards' sums gathered first). norm_only: the graph of that first pass, g and
 * gscale in, the shard's sum of (g x gscale)^2 out. */
tern_status train_dp_build_zero(tern_trainer *t, int norm_only, uint64_t *hbm, tern_error *err)
{
    struct train_dp *dp = t->dp;
    tern_graph *g = calloc(1, sizeof *g);
    if (!g)
        return train_oom(err);
    g->opset = 17;
    g->ir_version = 8;
    ad_ctx a;
    tern_status st = ad_init(&a, g, err);
    train_weight zw;
    memset(&zw, 0, sizeof zw);
    zw.name = DP_SHARD;
    zw.rank = 1;
    zw.dims[0] = (int64_t)dp->shard;
    zw.count = dp->shard;
    zw.n_state = t->w[0].n_state;
    for (size_t i = 0; i < t->nw; i++)
        if (t->w[i].trained)
            zw.n_state = t->w[i].n_state;
    char nin[2][64], nout[2][64];
    for (int k = 0; k < zw.n_state; k++) {
        snprintf(nin[k], sizeof nin[k], "train.state%d.%s", k, DP_SHARD);
        snprintf(nout[k], sizeof nout[k], "train.state%d.new.%s", k, DP_SHARD);
        zw.state_in[k] = nin[k];
        zw.state_out[k] = nout[k];
    }
    if (!st) {
        const tern_train_opts *o = &t->o;
        int p = norm_only ? -1 : train_flat_input(&a, DP_P, (int64_t)dp->shard);
        int gin = train_flat_input(&a, DP_G, (int64_t)dp->shard);
        int gs = train_flat_input(&a, TRAIN_GSCALE, 1);
        int gr = ad_op2(&a, "Mul", gin, gs);
        int sc[4] = {-1, -1, -1, -1};
        if (norm_only) {
        } else if (o->optimizer == TERN_OPT_SGD) {
            sc[0] = train_flat_input(&a, TRAIN_LR, 1);
        } else {
            sc[0] = train_flat_input(&a, TRAIN_STEP_SIZE, 1);
            sc[1] = train_flat_input(&a, TRAIN_BC2_SQRT, 1);
            if (o->optimizer == TERN_OPT_ADAMW && o->weight_decay != 0)
                sc[2] = train_flat_input(&a, TRAIN_DECAY, 1);
        }
        int so[2] = {-1, -1};
        /* the compiler reduces at most 4 x 16384 elements per output: a long shard sums rows of DP_ROW first */
        int sq = ad_op2(&a, "Mul", gr, gr), sumsq;
        if (dp->shard > DP_ROW) {
            ad_shape rc = {.rank = 2, .d = {(int64_t)(dp->shard / DP_ROW), DP_ROW}};
            int64_t ax = 1;
            sumsq = ad_reduce(&a, "ReduceSum", ad_reduce(&a, "ReduceSum", ad_reshape(&a, sq, &rc), 1, &ax, 0), 0,
                              NULL, 0);
        } else {
            sumsq = ad_reduce(&a, "ReduceSum", sq, 0, NULL, 0);
        }
        ad_shape one = {.rank = 1, .d = {1}};
        int outs[4], no = 0;
        if (!norm_only) {
            int gu = gr;
            if (o->clip_norm > 0) { /* the step graph's clipping (step_graph.c), of the gathered global sum */
                int gnorm = ad_op1(&a, "Sqrt", train_flat_input(&a, DP_SUMSQ_ALL, 1));
                int coef = ad_op2(&a, "Min",
                                  ad_op2(&a, "Div", ad_const_f(&a, (float)o->clip_norm),
                                         ad_op2(&a, "Add", gnorm, ad_const_f(&a, (float)1e-6))),
                                  ad_const_f(&a, 1.0f));
                gu = ad_op2(&a, "Mul", gr, coef);
            }
            int np = train_update_nodes(t, &a, &zw, p, gu, sc, so);
            outs[no++] = train_name_value(&a, np, DP_P ".new");
            for (int k = 0; k < zw.n_state; k++)
                outs[no++] = train_name_value(&a, so[k], nout[k]);
        }
        outs[no++] = train_name_value(&a, ad_reshape(&a, sumsq, &one), DP_SUMSQ);
        if (a.failed) {
            st = err->code;
        } else {
            st = train_set_outputs(g, outs, no, err);
        }
    }
    ad_free(&a);
    if (!st && ((st = graph_compact(g, NULL, err)) || (st = graph_sort(g, err)) || (st = tern_graph_infer(g, err))))
        tern_error_prefix(err, "train: ZeRO shard update graph: ");
    if (!st)
        st = norm_only ? train_compile_load(t, g, &dp->exe_znorm, &dp->rt_znorm, NULL, hbm, "ZeRO shard norm", err)
                       : train_compile_load(t, g, &dp->exe_zero, &dp->rt_zero, NULL, hbm, "ZeRO shard update", err);
    tern_graph_free(g);
    return st;
}

/* p := rank r's block [r*S, (r+1)*S) of its flat weights (zero past the trained elements); g := the block of its
 * reduced gradient, the loss partial's place zeroed (no gradient). */
static void zero_block(tern_trainer *t, int64_t r, float *g, float *p)
{
    struct train_dp *dp = t->dp;
    size_t S = dp->shard, lo = (size_t)r * S;
    memcpy(g, dp->gbuf[r] + lo, S * sizeof(float));
    if (dp->total >= lo && dp->total < lo + S)
        g[dp->total - lo] = 0;
    if (!p)
        return;
    memset(p, 0, S * sizeof(float));
    for (size_t i = 0; i < t->nw; i++) {
        const train_weight *w = &t->w[i];
        if (!w->trained || dp->off[i] + w->count <= lo || dp->off[i] >= lo + S)
            continue;
        size_t a = dp->off[i] > lo ? dp->off[i] : lo, b = dp->off[i] + w->count < lo + S ? dp->off[i] + w->count : lo + S;
        memcpy(p + (a - lo), train_dp_val(t, r, i) + (a - dp->off[i]), (b - a) * sizeof(float));
    }
}

/* ZeRO-1: rank r updates block r of the flat weights with its state shard; the all-gather spreads the blocks,
 * each followed by its shard's sum of squared gradients. nv as update_full (states stay in dp: nzs). Each phase
 * runs this process's ranks (timing-only: its first, which stands for all) and ends with one verdict. */
tern_status train_dp_update_zero(tern_trainer *t, float **nv, float **nzs, double *gn, float *loss, double *upd,
                               double *comm, tern_error *err)
{
    struct train_dp *dp = t->dp;
    uint64_t step = t->step + 1;
    tern_status st = TERN_OK;
    tern_rt *rt = dp->rt_zero;
    t->rt = rt;
    size_t S = dp->shard, B = S + 1;
    int64_t r0 = dp->r0, R = dp->ranks, fr = 0;
    int nst = 0;
    for (size_t i = 0; i < t->nw; i++)
        if (t->w[i].trained)
            nst = t->w[i].n_state;
    int timing = t->o.timing_only;
    float sq_all = 0; /* with clipping: the global sum of squares, before the shard update needs it */
    if (dp->rt_znorm) {
        /* each rank's shard sum of (g x gscale)^2 (the same sum the update graph reports), all-gathered (one
         * element per rank) and added in rank order on every rank, as the norm below */
        double un = 0;
        for (int64_t r = r0; r < R && !st; r++) {
            if (!dp->local[r])
                continue;
            fr = r;
            if (!timing) {
                float *g = dp->tmp;
                zero_block(t, r, g, NULL);
                st = train_dp_set_in(t, dp->rt_znorm, TRAIN_GSCALE, (float[]){(float)dp->gscale}, 1, err);
                if (!st)
                    st = train_dp_set_in(t, dp->rt_znorm, DP_G, g, S, err);
            }
            tern_run_stats rs;
            if (st || (st = tern_rt_execute(dp->rt_znorm, &rs, err)))
                break;
            if ((double)rs.time_ps * 1e-12 > un)
                un = (double)rs.time_ps * 1e-12;
            if (timing)
                break;
            if ((st = tern_rt_get_output(dp->rt_znorm, DP_SUMSQ, dp->wbuf[r] + r, sizeof(float), err)))
                break;
        }
        if ((st = train_dp_phase_end(dp, st, (uint64_t)fr, &un, err)))
            return st;
        *upd += un;
        if ((st = train_dp_collective(t, TERN_COLL_ALL_GATHER, (uint64_t)R, timing ? NULL : dp->wbuf, comm, err)))
            return st;
        for (int64_t b = 0; !timing && b < R; b++)
            sq_all += dp->wbuf[r0][b];
        for (int64_t r = r0 + 1; !timing && r < R && !st; r++)
            if (dp->local[r] && memcmp(dp->wbuf[r], dp->wbuf[r0], (size_t)R * sizeof(float)) != 0)
                st = tern_error_set(err, TERN_ERR_INVALID,
                                    "train: step %llu: rank %lld's gathered shard norms differ from rank 0's",
                                    (unsigned long long)step, (long long)r);
        if ((st = train_dp_phase_end(dp, st, 0, NULL, err)) ||
            (!timing && (st = train_dp_cross_check(dp, train_dp_hash(0xcbf29ce484222325ull, dp->wbuf[r0], (size_t)R * sizeof(float)),
                                          step, "gathered shard norms", err))))
            return st;
    }
    int lamb = dp->rt_zlamb != NULL;
    size_t T = dp->ntr;
    double lr_step = tern_train_lr(&t->o, step);
    if (lamb) {
        /* LAMB pass 1 on every rank, then the per-tensor sums of p^2 and r^2 all-gathered (2 T per rank) */
        double u1 = 0;
        double bc1 = 1 - pow(t->o.beta1, (double)step), bc2 = 1 - pow(t->o.beta2, (double)step);
        for (int64_t r = r0; r < R && !st; r++) {
            if (!dp->local[r])
                continue;
            fr = r;
            tern_rt *r1 = dp->rt_zlamb;
            if (!timing) {
                float *g = dp->tmp, *p = dp->tmp2;
                zero_block(t, r, g, p);
                float sc1[3] = {(float)dp->gscale, (float)sqrt(bc2), (float)bc1};
                st = train_dp_set_in(t, r1, TRAIN_GSCALE, &sc1[0], 1, err);
                if (!st)
                    st = train_dp_set_in(t, r1, TRAIN_BC2_SQRT, &sc1[1], 1, err);
                if (!st)
                    st = train_dp_set_in(t, r1, TRAIN_BC1, &sc1[2], 1, err);
                if (!st)
                    st = train_dp_set_in(t, r1, DP_P, p, S, err);
                if (!st)
                    st = train_dp_set_in(t, r1, DP_G, g, S, err);
                if (!st)
                    st = train_dp_set_in(t, r1, DP_SEG, dp->seg[r], S * T, err);
                if (!st && dp->rt_znorm)
                    st = train_dp_set_in(t, r1, DP_SUMSQ_ALL, &sq_all, 1, err);
                for (int k = 0; k < 2 && !st; k++) {
                    char nm[64];
                    snprintf(nm, sizeof nm, "train.state%d.%s", k, DP_SHARD);
                    st = train_dp_set_in(t, r1, nm, dp->rk[r].st[k][0], S, err);
                }
            }
            tern_run_stats rs;
            if (st || (st = tern_rt_execute(r1, &rs, err)))
                break;
            if ((double)rs.time_ps * 1e-12 > u1)
                u1 = (double)rs.time_ps * 1e-12;
            if (timing)
                break;
            float *lb = dp->lbuf[r] + (size_t)r * 2 * T;
            if ((st = tern_rt_get_output(r1, DP_R, dp->rdir[r], S * sizeof(float), err)) ||
                (st = tern_rt_get_output(r1, DP_SUMSQ, &dp->rsq[r], sizeof(float), err)) ||
                (st = tern_rt_get_output(r1, DP_PSQ, lb, T * sizeof(float), err)) ||
                (st = tern_rt_get_output(r1, DP_RSQ, lb + T, T * sizeof(float), err)))
                break;
            for (int k = 0; k < 2 && !st; k++) {
                char nm[64];
                snprintf(nm, sizeof nm, "train.state%d.new.%s", k, DP_SHARD);
                float *b = malloc(S * sizeof(float) + 1);
                nzs[(size_t)r * 2 + (size_t)k] = b;
                if (!b)
                    st = train_oom(err);
                else
                    st = tern_rt_get_output(r1, nm, b, S * sizeof(float), err);
            }
        }
        if ((st = train_dp_phase_end(dp, st, (uint64_t)fr, &u1, err)))
            return st;
        *upd += u1;
        if ((st = train_dp_collective(t, TERN_COLL_ALL_GATHER, (uint64_t)R * 2 * T, timing ? NULL : dp->lbuf, comm, err)))
            return st;
    }
    t->rt = rt; /* the step's scalars below go to the update graph */
    double u0 = *upd, ub = 0;
    for (int64_t r = r0; r < R && !st; r++) {
        if (!dp->local[r])
            continue;
        fr = r;
        size_t lo = (size_t)r * S;
        double lr;
        if (!timing) {
            float *g = dp->tmp, *p = dp->tmp2;
            zero_block(t, r, g, p);
            if (lamb) { /* pass 2: p, r, which tensor each element is in, every rank's sums, lr */
                float sums[2][64], *sp = T <= 64 ? sums[0] : malloc(2 * T * sizeof(float));
                if (!sp) {
                    st = train_oom(err);
                    break;
                }
                memset(sp, 0, 2 * T * sizeof(float));
                for (int64_t b = 0; b < R; b++) /* the shards' sums in rank order */
                    for (size_t q = 0; q < 2 * T; q++)
                        sp[q] += dp->lbuf[r][(size_t)b * 2 * T + q];
                float lrf = (float)lr_step;
                lr = lr_step;
                st = train_dp_set_in(t, rt, DP_P, p, S, err);
                if (!st)
                    st = train_dp_set_in(t, rt, DP_R, dp->rdir[r], S, err);
                if (!st)
                    st = train_dp_set_in(t, rt, DP_SEG, dp->seg[r], S * T, err);
                if (!st)
                    st = train_dp_set_in(t, rt, DP_PSQ ".all", sp, T, err);
                if (!st)
                    st = train_dp_set_in(t, rt, DP_RSQ ".all", sp + T, T, err);
                if (!st)
                    st = train_dp_set_in(t, rt, TRAIN_STEP_SIZE, &lrf, 1, err);
                if (sp != sums[0])
                    free(sp);
            }
            if (!lamb)
                st = train_set_step_scalars(t, step, &lr, err);
            if (!st && !lamb)
                st = train_dp_set_in(t, rt, TRAIN_GSCALE, (float[]){(float)dp->gscale}, 1, err);
            if (!st && !lamb)
                st = train_dp_set_in(t, rt, DP_P, p, S, err);
            if (!st && !lamb)
                st = train_dp_set_in(t, rt, DP_G, g, S, err);
            if (!st && dp->rt_znorm && !lamb)
                st = train_dp_set_in(t, rt, DP_SUMSQ_ALL, &sq_all, 1, err);
            for (int k = 0; k < nst && !st && !lamb; k++) {
                char nm[64];
                snprintf(nm, sizeof nm, "train.state%d.%s", k, DP_SHARD);
                st = train_dp_set_in(t, rt, nm, dp->rk[r].st[k][0], S, err);
            }
        }
        tern_run_stats rs;
        if (st || (st = tern_rt_execute(rt, &rs, err)))
            break;
        double s = (double)rs.time_ps * 1e-12;
        if (s > ub)
            ub = s;
        if (timing)
            break;
        float *blk = dp->wbuf[r] + (size_t)r * B;
        if ((st = tern_rt_get_output(rt, DP_P ".new", blk, S * sizeof(float), err)) ||
            (!lamb && (st = tern_rt_get_output(rt, DP_SUMSQ, blk + S, sizeof(float), err))))
            break;
        if (lamb)
            blk[S] = dp->rsq[r];
        for (int k = 0; k < nst && !st && !lamb; k++) {
            char nm[64];
            snprintf(nm, sizeof nm, "train.state%d.new.%s", k, DP_SHARD);
            float *b = malloc(S * sizeof(float) + 1);
            nzs[(size_t)r * 2 + (size_t)k] = b;
            if (!b)
                st = train_oom(err);
            else
                st = tern_rt_get_output(rt, nm, b, S * sizeof(float), err);
        }
        if (!st && dp->total >= lo && dp->total < lo + S)
            blk[dp->total - lo] = dp->gbuf[r][dp->total]; /* the reduced loss rides the all-gather to every rank */
    }
    if ((st = train_dp_phase_end(dp, st, (uint64_t)fr, &ub, err)))
        return st;
    *upd = u0 + ub;
    if ((st = train_dp_collective(t, TERN_COLL_ALL_GATHER, (uint64_t)R * B, timing ? NULL : dp->wbuf, comm, err)))
        return st;
    if (timing)
        return TERN_OK;
    /* the gathered blocks on every local rank; failures keyed as one process meets them: the weights of each
     * rank in rank order, then the state shards in rank order */
    uint64_t key = 0;
    for (int64_t r = r0; r < R && !st; r++) {
        if (!dp->local[r])
            continue;
        key = (uint64_t)r;
        const float *wb = dp->wbuf[r];
        float sq = 0;
        for (int64_t b = 0; b < R; b++) /* the global norm: the shards' sums in rank order */
            sq += wb[(size_t)b * B + S];
        float g = sqrtf(sq), l = wb[(dp->total / S) * B + dp->total % S];
        if (r == r0) {
            *gn = g;
            *loss = l;
            if (!isfinite(l))
                return TERN_OK; /* the same on every process (the gathered blocks): the caller reports the loss */
            if (!isfinite(g)) {
                st = tern_error_set(err, TERN_ERR_RANGE, "train: step %llu: the gradient norm is not finite (%g)",
                                    (unsigned long long)step, (double)g);
                break;
            }
        }
        for (size_t i = 0; i < t->nw && !st; i++) {
            const train_weight *w = &t->w[i];
            if (!w->trained)
                continue;
            float *b = malloc(w->count * sizeof(float) + 1);
            nv[((size_t)r * t->nw + i) * 3] = b;
            if (!b) {
                st = train_oom(err);
                break;
            }
            for (size_t e = 0; e < w->count; e++) {
                size_t f = dp->off[i] + e;
                b[e] = wb[(f / S) * B + f % S];
            }
            size_t at;
            if (train_first_nonfinite(b, w->count, &at))
                st = tern_error_set(err, TERN_ERR_RANGE,
                                    "train: step %llu: '%s' is not finite (element %zu = %g); gradient norm %g",
                                    (unsigned long long)step, w->out_name, at, (double)b[at], *gn);
            if (!st && r != r0)
                st = train_dp_rank_differs(t, r, w->out_name, b, nv[((size_t)r0 * t->nw + i) * 3], w->count, err);
        }
    }
    for (int64_t r = r0; r < R && !st; r++)
        for (int k = 0; dp->local[r] && k < nst && !st; k++) {
            size_t at;
            const float *b = nzs[(size_t)r * 2 + (size_t)k];
            key = (uint64_t)(R + r);
            if (train_first_nonfinite(b, S, &at))
                st = tern_error_set(err, TERN_ERR_RANGE,
                                    "train: step %llu: rank %lld's optimizer state %d shard is not finite (flat element "
                                    "%zu = %g)",
                                    (unsigned long long)step, (long long)r, k, (size_t)r * S + at, (double)b[at]);
        }
    return train_dp_phase_end(dp, st, key, NULL, err);
}

tern_status tern_train_collect(tern_trainer *t, tern_error *err)
{
    if (t->mp) /* a tensor/pipeline layout's ZeRO-1 state blocks */
        return train_mp_collect(t, err);
    struct train_dp *dp = t->dp;
    if (!dp || !dp->tr || dp->tr->nprocs < 2 || !dp->zero || t->o.timing_only || !dp->rk)
        return TERN_OK;
    /* ZeRO-1 over MPI processes: process 0 receives every other process's state shards (its ranks in rank order,
     * each rank's nst shards of S elements) and puts each element where the commit puts it in one process */
    const tern_transport *tr = dp->tr;
    unsigned K = tr->nprocs;
    size_t S = dp->shard;
    int nst = 0;
    for (size_t i = 0; i < t->nw; i++)
        if (t->w[i].trained)
            nst = t->w[i].n_state;
    if (nst == 0)
        return TERN_OK;
    int64_t nloc = 0;
    for (int64_t r = 0; r < dp->ranks; r++)
        nloc += dp->local[r];
    size_t per = S * (size_t)nst * sizeof(float);
    uint64_t *cnt = calloc(2 * (size_t)K, sizeof *cnt);
    float *send = malloc(per * (size_t)nloc + 1);
    if (!cnt || !send)
        tr->abort(tr->ctx, "train: out of memory gathering the optimizer state shards on process 0");
    size_t at = 0;
    for (int64_t r = 0; r < dp->ranks; r++)
        for (int q = 0; dp->local[r] && q < nst; q++, at += S)
            memcpy(send + at, dp->rk[r].st[q][0], S * sizeof(float));
    cnt[0] = per * (size_t)nloc;
    void *recv = NULL;
    tern_error e2;
    if (tr->exchange(tr->ctx, send, cnt, &recv, cnt + K, &e2))
        tr->abort(tr->ctx, e2.msg);
    free(send);
    size_t *base = tr->me == 0 ? malloc(sizeof *base * (size_t)dp->ranks) : NULL;
    if (tr->me == 0 && !base)
        tr->abort(tr->ctx, "train: out of memory gathering the optimizer state shards on process 0");
    if (tr->me == 0) {
        /* where rank r's shards came: after the processes before its owner, after its owner's lower ranks */
        at = 0;
        for (unsigned p = 0; p < K; p++)
            for (int64_t r = 0; r < dp->ranks; r++)
                if (tern_fabric_rank_owner(dp->fab, (unsigned)r) == p) {
                    base[r] = at;
                    at += S * (size_t)nst;
                }
        const float *fl = recv;
        for (size_t i = 0; i < t->nw; i++) {
            train_weight *w = &t->w[i];
            for (int q = 0; q < w->n_state && w->trained; q++)
                for (size_t e = 0; e < w->count; e++) {
                    size_t f = dp->off[i] + e;
                    w->state[q][e] = fl[base[f / S] + (size_t)q * S + f % S];
                }
        }
    }
    free(base);
    free(recv);
    free(cnt);
    (void)err;
    return TERN_OK;
}
