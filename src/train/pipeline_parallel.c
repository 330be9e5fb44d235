/* Pipeline parallelism and the step of a layout tp x pp x dp (docs/training.md, "Tensor and pipeline parallelism").
 *
 * Ranks: rank (d, s, r) = (d pp + s) tp + r in the machine's rank order (fabric.h), so a tensor group is tp
 * neighbouring cores. Each step, data replica d takes rows [d B/dp, (d+1) B/dp) of the batch in `micro` micro-batches
 * of mb rows. A micro-batch runs every segment's forward program in order on each tensor rank (its own shards fed
 * as inputs), the partial outputs of a row-parallel layer all-reduced over the tensor group by tern's collectives
 * (collective.h, functional: the real bytes in the algorithm's order); then every segment's gradient program from
 * the last: it recomputes the segment's forward and differentiates sum(out * dy) with dy the gradient arriving
 * from later segments (the last segment: the model's loss), giving its weights' gradients and its inputs'
 * gradients, those of a column-parallel layer's input all-reduced over the tensor group. Weight gradients are
 * summed over micro-batches in order, all-reduced over the data replicas (one collective over the machine, a group
 * per (stage, tensor rank)), and each (stage, tensor rank) updates its flat weight vector with the step graph's own
 * optimizer nodes on the device (key/value heads replicated over tensor ranks - tp exceeds them - first have their
 * gradients all-reduced over the ranks sharing a head: group_coll). Cross-entropy feeds 1 / (the whole batch's counted
 * rows) to every micro-batch, MSE scales the sum by 1 / (dp micro).
 *
 * Time. The values do not depend on the order the host runs the programs in; the time does, and comes from the
 * 1F1B schedule: stage s runs min(pp - s - 1, micro) forwards, then alternates one forward and one backward, then
 * the remaining backwards; a forward waits for the previous stage's forward of its micro-batch plus the activation's
 * transfer, a backward for the next stage's backward plus the gradient's transfer (a permute between the stages'
 * tensor ranks on the fabric, timed by the collectives module; the data is copied). A forward is its programs'
 * device times plus its tensor all-reduces; a backward is each gradient program's time less its forward program's
 * (the gradient program recomputes the forward so no activations are kept between programs; that recomputation is
 * not charged) plus its all-reduces; the last segment's program is forward and backward in one and is charged to
 * the backward. The step is the schedule's span, then the data-parallel all-reduce and the slowest update.
 *
 * Timing-only (--timing-only): the same programs compiled for timing-only runtimes, no shard, gradient or
 * activation buffers; a step runs each program once (its time does not depend on the values, and every tensor
 * rank, micro-batch and replica runs the same program) and adds the times in the functional step's order, the
 * collectives timed by tern_collective_time: the same predicted step to the picosecond (test_train_layout_timing).
 *
 * Interleaved (vpp = V > 1): the plan's stages are the P x V chunks (p.pp = P V; buffers, programs and update per
 * chunk, so the values are pp = P V's), chunk g on stage g mod P (mp_core_of, mp_comm.c: the fabric's ranks); the span comes from
 * the planner's interleaved 1F1B (plan_pipeline_schedule2, src/plan/pipeline.c); a stage's update time is its
 * chunks' in turn, the data-parallel collectives one per local chunk in turn (mp_dp_coll, mp_comm.c). M a multiple of P; no
 * ZeRO-1.
 *
 * Sequence parallelism (sp = 1; sequence_parallel.c plans it): the segments between the tensor-parallel regions run
 * on each tensor rank's rows of the micro-batch, every crossing value (but the vocabulary-parallel logits) held as
 * row shards in place in its buffer; partial sums are reduce-scattered instead of all-reduced, a program reading
 * whole rows first all-gathers its row-sharded inputs (mp_sp_gather_in, mp_comm.c), and its backward all-gathers the gradients of
 * its row-sharded outputs and reduce-scatters its column-parallel inputs' (mp_sp_backward_gather, mp_comm.c); the row-sharded
 * programs' weights are summed over each tensor group once a step (mp_group_coll, mp_comm.c), as the replicated K/V heads' are.
 *
 * Over MPI processes (mp_procs.c): a process holds whole data replicas (dlocal), runs their micro-batches only (each
 * micro-batch's loss and times apart, merged and added in micro-batch order) and joins the replicas' collectives
 * with their buffers; the update runs on the first local replica's reduced gradient (d0); ZeRO-1: a process updates
 * its replicas' blocks, the blocks of the others come for the norm and, for checkpoints, the state's
 * (train_mp_collect). */
#include "mp_internal.h"
#include "mp_procs.h"

#include "plan/plan_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void train_mp_free(tern_trainer *t)
{
    struct train_mp *mp = t->mp;
    if (!mp)
        return;
    int64_t tp = mp->p.tp, pp = mp->p.pp;
    for (int64_t i = 0; i < pp * tp; i++) {
        if (mp->val)
            free(mp->val[i]);
        for (int k = 0; k < 2; k++)
            if (mp->st[k])
                free(mp->st[k][i]);
    }
    for (int64_t i = 0; mp->gacc && i < mp->n; i++)
        free(mp->gacc[i]);
    for (int64_t r = 0; r < tp; r++) {
        if (mp->act)
            free(mp->act[r]);
        if (mp->dact)
            free(mp->dact[r]);
        if (mp->gx)
            free(mp->gx[r]);
    }
    free(mp->act), free(mp->dact), free(mp->gx), free(mp->tmp), free(mp->fsec);
    free(mp->val), free(mp->st[0]), free(mp->st[1]), free(mp->gacc);
    for (int64_t s = 0; mp->stg && s < pp; s++) {
        for (int i = 0; i < mp->stg[s].nw; i++)
            free(mp->stg[s].w[i].name);
        free(mp->stg[s].w);
        tern_rt_free(mp->stg[s].urt);
        tern_exe_free(&mp->stg[s].uexe);
    }
    free(mp->stg);
    for (int k = 0; mp->sidx && k < mp->p.nseg; k++)
        free(mp->sidx[k]);
    free(mp->sidx);
    free(mp->tf), free(mp->tb), free(mp->synced_ptr), free(mp->ps_f), free(mp->ps_g);
    for (int64_t i = 0; mp->wbuf && i < mp->n; i++)
        free(mp->wbuf[i]);
    free(mp->wbuf);
    for (int k = 0; k < 4; k++)
        free(mp->zb[k]);
    tern_rt_free(mp->zrt);
    tern_exe_free(&mp->zexe);
    free(mp->dlocal);
    free(mp->gath);
    mp_plan_free(&mp->p);
    tern_fabric_free(mp->fab);
    tern_fabric_free(mp->tpfab);
    free(mp);
    t->mp = NULL;
    t->rt = NULL; /* pointed at a stage's update runtime during a step; freed above */
}

/* A stage's update program: its flat weights p and gradient g (times gscale) through the step graph's optimizer
 * nodes, as ZeRO-1's shard update. */
static tern_status build_update(tern_trainer *t, size_t len, int nst, tern_exe *exe, tern_rt **rt, uint64_t *hbm,
                                tern_error *err)
{
    tern_graph *g = calloc(1, sizeof *g);
    if (!g)
        return train_oom(err);
    g->opset = 17;
    g->ir_version = 8;
    ad_ctx a;
    tern_status st = ad_init(&a, g, err);
    train_weight zw;
    memset(&zw, 0, sizeof zw);
    zw.name = "tern.mp.flat";
    zw.rank = 1;
    zw.dims[0] = (int64_t)len;
    zw.count = len;
    zw.n_state = nst;
    char nin[2][64], nout[2][64];
    for (int k = 0; k < nst; k++) {
        snprintf(nin[k], sizeof nin[k], "train.state%d.flat", k);
        snprintf(nout[k], sizeof nout[k], "train.state%d.new.flat", k);
        zw.state_in[k] = nin[k];
        zw.state_out[k] = nout[k];
    }
    if (!st) {
        const tern_train_opts *o = &t->o;
        int p = train_flat_input(&a, "tern.mp.p", (int64_t)len), gin = train_flat_input(&a, "tern.mp.g", (int64_t)len);
        int gs = train_flat_input(&a, TRAIN_GSCALE, 1);
        int gr = ad_op2(&a, "Mul", gin, gs);
        int sc[4] = {-1, -1, -1, -1};
        if (o->optimizer == TERN_OPT_SGD) {
            sc[0] = train_flat_input(&a, TRAIN_LR, 1);
        } else {
            sc[0] = train_flat_input(&a, TRAIN_STEP_SIZE, 1);
            sc[1] = train_flat_input(&a, TRAIN_BC2_SQRT, 1);
            if (o->optimizer == TERN_OPT_ADAMW && o->weight_decay != 0)
                sc[2] = train_flat_input(&a, TRAIN_DECAY, 1);
        }
        int so[2] = {-1, -1};
        int np = train_update_nodes(t, &a, &zw, p, gr, sc, so);
        int outs[3], no = 0;
        outs[no++] = train_name_value(&a, np, "tern.mp.p.new");
        for (int k = 0; k < nst; k++)
            outs[no++] = train_name_value(&a, so[k], nout[k]);
        if (a.failed) {
            st = err->code;
        } else {
            st = train_set_outputs(g, outs, no, err);
        }
    }
    ad_free(&a);
    if (!st && ((st = graph_compact(g, NULL, err)) || (st = graph_sort(g, err)) || (st = tern_graph_infer(g, err))))
        tern_error_prefix(err, "train: layout update graph: ");
    if (!st)
        st = train_compile_load(t, g, exe, rt, NULL, hbm, "layout update program", err);
    tern_graph_free(g);
    return st;
}

/* the layout of a stage's weight as mp_shard_copy_ws takes it */
static mp_wspec wt_spec(const mp_wt *w)
{
    mp_wspec ws;
    memset(&ws, 0, sizeof ws);
    ws.axis = w->axis;
    ws.ngroups = w->ngroups;
    memcpy(ws.groups, w->groups, sizeof ws.groups);
    ws.rep = w->rep;
    ws.blk = w->blk;
    return ws;
}

static int find_full(const tern_trainer *t, const char *name)
{
    for (size_t i = 0; i < t->nw; i++)
        if (!strcmp(t->w[i].name, name))
            return (int)i;
    return -1;
}

/* t->w (the whole model's weights and state) into every (stage, tensor rank)'s flat vectors */
static void scatter(tern_trainer *t)
{
    struct train_mp *mp = t->mp;
    int64_t tp = mp->p.tp;
    for (int64_t s = 0; s < mp->p.pp; s++)
        for (int64_t r = 0; r < tp; r++) {
            size_t ix = (size_t)(s * tp + r);
            const mp_stage *sg = &mp->stg[s];
            for (int i = 0; i < sg->nw; i++) {
                const mp_wt *w = &sg->w[i];
                const train_weight *fw = &t->w[w->full];
                for (int q = -1; q < mp->nst; q++) {
                    float *dst = (q < 0 ? mp->val[ix] : mp->st[q][ix]) + w->off;
                    const float *src = q < 0 ? fw->val : fw->state[q];
                    if (w->rank0 && r > 0)
                        memset(dst, 0, w->count * sizeof(float));
                    else if (w->axis < 0)
                        memcpy(dst, src, w->count * sizeof(float));
                    else {
                        mp_wspec ws = wt_spec(w);
                        mp_shard_copy_ws(&ws, src, dst, w->rank, w->dims, tp, r, 0);
                    }
                }
            }
        }
    mp->synced_step = t->step;
    for (size_t i = 0; i < t->nw; i++)
        mp->synced_ptr[i] = t->w[i].val;
}

/* the shards back into t->w (the trained model, checkpoints) */
static void gather(tern_trainer *t)
{
    struct train_mp *mp = t->mp;
    int64_t tp = mp->p.tp;
    for (int64_t s = 0; s < mp->p.pp; s++) {
        const mp_stage *sg = &mp->stg[s];
        for (int i = 0; i < sg->nw; i++) {
            const mp_wt *w = &sg->w[i];
            train_weight *fw = &t->w[w->full];
            for (int q = -1; q < mp->nst; q++)
                for (int64_t r = 0; r < (w->axis < 0 ? 1 : tp); r += w->rep) { /* one of each block's replicas */
                    size_t ix = (size_t)(s * tp + r);
                    const float *src = (q < 0 ? mp->val[ix] : mp->st[q][ix]) + w->off;
                    float *dst = q < 0 ? fw->val : fw->state[q];
                    mp_wspec ws = wt_spec(w);
                    if (w->axis < 0)
                        memcpy(dst, src, w->count * sizeof(float));
                    else
                        mp_shard_copy_ws(&ws, dst, (float *)src, w->rank, w->dims, tp, r, 1);
                }
        }
    }
}

/* The functional run's buffers: every (stage, tensor rank)'s flat weights and state, the gradients, the crossing
 * activations and their gradients. */
static tern_status alloc_values(tern_trainer *t, tern_error *err)
{
    struct train_mp *mp = t->mp;
    const mp_plan *p = &mp->p;
    int64_t tp = p->tp, pp = p->pp;
    size_t nsr = (size_t)(pp * tp);
    mp->val = calloc(nsr, sizeof *mp->val);
    mp->st[0] = calloc(nsr, sizeof *mp->st[0]);
    mp->st[1] = calloc(nsr, sizeof *mp->st[1]);
    mp->gacc = calloc((size_t)mp->n, sizeof *mp->gacc);
    mp->act = calloc((size_t)tp, sizeof *mp->act);
    mp->dact = calloc((size_t)tp, sizeof *mp->dact);
    mp->gx = calloc((size_t)tp, sizeof *mp->gx);
    if (!mp->val || !mp->st[0] || !mp->st[1] || !mp->gacc || !mp->act || !mp->dact || !mp->gx)
        return train_oom(err);
    for (int64_t s = 0; s < pp; s++)
        for (int64_t r = 0; r < tp; r++) {
            size_t ix = (size_t)(s * tp + r), f = mp->stg[s].flat;
            if (!(mp->val[ix] = calloc(f + 1, sizeof(float))))
                return train_oom(err);
            for (int q = 0; q < mp->nst; q++)
                if (!(mp->st[q][ix] = calloc(f + 1, sizeof(float))))
                    return train_oom(err);
        }
    for (int64_t i = 0; i < mp->n; i++) /* this process's data replicas' */
        if (mp->dlocal[i / (pp * tp)] && !(mp->gacc[i] = calloc(mp->maxflat + 1, sizeof(float))))
            return train_oom(err);
    size_t xtot = 0, xmax = 1;
    for (int i = 0; i < p->nxv; i++) {
        xtot += p->xv[i].count;
        if (p->xv[i].count > xmax)
            xmax = p->xv[i].count;
    }
    for (int64_t r = 0; r < tp; r++)
        if (!(mp->act[r] = calloc(xtot + 1, sizeof(float))) || !(mp->dact[r] = calloc(xtot + 1, sizeof(float))) ||
            !(mp->gx[r] = calloc(xtot + 1, sizeof(float))))
            return train_oom(err);
    if (!(mp->tmp = calloc((size_t)tp * xmax + mp->maxflat + 1, sizeof(float))))
        return train_oom(err);
    return TERN_OK;
}

tern_status train_mp_create(tern_trainer *t, tern_error *err)
{
    tern_train_opts *o = &t->o;
    int64_t tp = o->tp > 1 ? o->tp : 1, pp = o->pp > 1 ? o->pp : 1, dp = o->ranks > 1 ? o->ranks : 1;
    int64_t micro = o->micro > 0 ? o->micro : pp, V = o->vpp > 1 ? o->vpp : 1;
    if (V > 1 && pp < 2)
        return tern_error_set(err, TERN_ERR_INVALID,
                              "train: vpp=%lld (interleaved 1F1B) needs pipeline stages (pp > 1: %lld)", (long long)V,
                              (long long)pp);
    if (V > 1 && micro % pp)
        return tern_error_set(err, TERN_ERR_INVALID,
                              "train: vpp=%lld (interleaved 1F1B): micro=%lld micro-batches must be a multiple of "
                              "pp=%lld (they go round the stages in groups of pp, as Megatron requires)",
                              (long long)V, (long long)micro, (long long)pp);
    if (o->zero && (o->zero != 1 || dp < 2))
        return tern_error_set(err, TERN_ERR_UNSUPPORTED,
                              "train: ZeRO stage %d in a layout needs stage 1 and data replicas (dp > 1: %lld)",
                              o->zero, (long long)dp);
    if (o->dp_exact || o->recompute || o->bf16_weights || o->optimizer == TERN_OPT_LAMB || o->loss == TERN_LOSS_OUTPUT)
        return tern_error_set(err, TERN_ERR_UNSUPPORTED,
                              "train: tensor/pipeline parallelism (tp=%lld, pp=%lld) with %s is not supported yet",
                              (long long)tp, (long long)pp,
                              o->dp_exact ? "the fixed reduction tree"
                              : o->recompute ? "recomputation"
                              : o->bf16_weights ? "pure BF16 weights" : o->optimizer == TERN_OPT_LAMB ? "LAMB"
                                                                                                     : "--loss-output");
    struct train_mp *mp = calloc(1, sizeof *mp);
    if (!mp)
        return train_oom(err);
    t->mp = mp;
    tern_exe_init(&mp->zexe);
    mp->zero = o->zero;
    mp->n = tp * pp * V * dp;
    mp->P = pp;
    mp->V = V;
    mp->cores = tp * pp * dp;
    mp->p.tp = tp;
    mp->p.pp = pp * V;
    mp->p.dp = dp;
    mp->p.micro = micro;
    mp->p.batch = o->batch;
    mp->p.mb = o->batch / (dp * micro);
    tern_status st;
    /* the machine's cores */
    tern_fabric_opts fo;
    memset(&fo, 0, sizeof fo);
    tern_fabric *all = NULL;
    if ((st = tern_fabric_load(t->machine, &fo, &all, err)))
        return tern_error_prefix(err, "train: layout tp=%lld,pp=%lld,dp=%lld on '%s': ", (long long)tp, (long long)pp,
                                 (long long)dp, t->machine);
    unsigned have = tern_fabric_ranks(all);
    tern_fabric_free(all);
    if ((uint64_t)mp->cores > have)
        return tern_error_set(err, TERN_ERR_RANGE,
                              "train: layout tp=%lld,pp=%lld,dp=%lld needs %lld NeuronCores; '%s' has %u (give a "
                              "smaller product or a larger machine)",
                              (long long)tp, (long long)pp, (long long)dp, (long long)mp->cores, t->machine, have);
    if (tp > 64)
        return tern_error_set(err, TERN_ERR_RANGE, "train: tp=%lld: at most 64 tensor ranks", (long long)tp);
    if (micro > 1 && pp == 1)
        return tern_error_set(err, TERN_ERR_INVALID, "train: %lld micro-batches need pipeline stages (pp > 1)",
                              (long long)micro);
    if (o->batch % (dp * micro))
        return tern_error_set(err, TERN_ERR_INVALID,
                              "train: batch %lld does not split over %lld data replicas x %lld micro-batches",
                              (long long)o->batch, (long long)dp, (long long)micro);
    /* gradient accumulation (--accumulate A): a step of A groups of the batch's rows, each data replica running A x
     * micro micro-batches of the same rows (Megatron's accumulation: contiguous rows a replica); cross-entropy
     * normalises each group by its own counted rows and the step's gradient is the groups' mean, as one core's
     * accumulation is (train_mp_step) */
    int64_t A = o->accumulate > 1 ? o->accumulate : 1;
    if (A > 1 && (micro > INT64_MAX / A || o->batch > INT64_MAX / A))
        return tern_error_set(err, TERN_ERR_RANGE, "train: --accumulate %lld: the step's %lld x %lld rows overflow",
                              (long long)A, (long long)o->batch, (long long)A);
    mp->acc = A;
    mp->p.micro = micro * A;
    mp->p.batch = o->batch * A;
    o->batch *= A; /* the step's rows: the data one step reads */
    mp->p.sp = o->sp;
    fo.ranks = (unsigned)mp->cores;
    if ((st = tern_fabric_load(t->machine, &fo, &mp->fab, err)))
        return st;
    mp->tr = o->transport && o->transport->nprocs > 1 ? o->transport : NULL; /* whole data replicas a process */
    if ((st = train_mp_procs_setup(mp->fab, mp->tr, tp, pp, dp, &mp->dlocal, &mp->d0, err)))
        return st;
    pp *= V; /* from here on pp counts the model chunks (the plan's stages; the plain layouts: the stages) */
    fo.ranks = (unsigned)tp;
    if (tp > 1 && (st = tern_fabric_load(t->machine, &fo, &mp->tpfab, err)))
        return st;
    /* the whole model's weight records (t->w: the trained model, checkpoints), its loss shape and data binding */
    if ((st = tern_graph_load_onnx(t->path, &t->g, err)) || (st = train_bind_data(t, err)) ||
        (st = train_build_step_graph(t, TRAIN_GRAPH_UPDATE, err)))
        return st;
    t->nodes = (size_t)t->g->n_nodes;
    tern_graph_free(t->g);
    t->g = NULL;
    mp_plan *p = &mp->p;
    if (p->sp) { /* a tensor rank's share of a micro-batch: whole rows, 1/tp of the tokens */
        int ids = t->nin == 1 && t->in[0].is_int;
        int64_t mb = p->mb, tok = mb * (ids ? (int64_t)t->in[0].row : 1);
        if (tok % tp)
            return tern_error_set(err, TERN_ERR_INVALID,
                                  "train: sp=1 (sequence parallelism): tp=%lld does not divide the %lld %s of a "
                                  "micro-batch (%lld row%s of %lld); each tensor rank holds 1/tp of them between the "
                                  "tensor-parallel regions",
                                  (long long)tp, (long long)tok, ids ? "tokens" : "rows", (long long)mb,
                                  mb == 1 ? "" : "s", (long long)(ids ? (int64_t)t->in[0].row : 1));
        if (mb % tp && tp % mb)
            return tern_error_set(err, TERN_ERR_UNSUPPORTED,
                                  "train: sp=1 (sequence parallelism): tp=%lld divides the %lld tokens of a "
                                  "micro-batch but neither divides nor is a multiple of its %lld rows: a tensor rank "
                                  "holds whole rows (mb a multiple of tp) or positions of one row (mb dividing tp)",
                                  (long long)tp, (long long)tok, (long long)mb);
        if (mb % tp) /* positions of one row: block r of the micro-batch's tokens (sequence_parallel.c) */
            p->sp_sub = tp / mb;
    }
    if ((st = mp_plan_build(t, p, err)) || (st = mp_build_programs(t, p, err)))
        return st;
    /* the stages' weights */
    mp->stg = calloc((size_t)pp, sizeof *mp->stg);
    mp->sidx = calloc((size_t)p->nseg + 1, sizeof *mp->sidx);
    if (!mp->stg || !mp->sidx)
        return train_oom(err);
    mp->nst = 0;
    for (size_t i = 0; i < t->nw; i++)
        if (t->w[i].trained)
            mp->nst = t->w[i].n_state;
    double flops = 0;
    for (int k = 0; k < p->nseg; k++) {
        mp_seg *sg = &p->seg[k];
        tern_trainer *m = &sg->prog.m;
        mp_stage *S = &mp->stg[sg->stage];
        flops += sg->prog.flops * (sg->pair >= 0 || sg->vocab ? (double)tp : 1.0);
        mp->sidx[k] = malloc(sizeof(int) * (m->nw + 1));
        if (!mp->sidx[k])
            return train_oom(err);
        for (size_t i = 0; i < m->nw; i++) {
            mp->sidx[k][i] = -1;
            if (sg->xw[i] >= 0 || !m->w[i].trained)
                continue;
            int e = -1;
            for (int q = 0; q < S->nw; q++)
                if (!strcmp(S->w[q].name, m->w[i].name))
                    e = q;
            if (e < 0) {
                int full = find_full(t, m->w[i].name);
                if (full < 0 || !t->w[full].trained)
                    return tern_error_set(err, TERN_ERR_INVALID,
                                          "train: layout plan: internal: weight '%s' of program %d is not the model's",
                                          m->w[i].name, k);
                mp_wt *nw = realloc(S->w, sizeof *nw * (size_t)(S->nw + 1));
                if (!nw)
                    return train_oom(err);
                S->w = nw;
                mp_wt *w = &S->w[S->nw];
                memset(w, 0, sizeof *w);
                w->name = train_strdup(m->w[i].name);
                if (!w->name)
                    return train_oom(err);
                const mp_wspec *ws = sg->pair >= 0 || sg->vocab ? mp_wspec_of(p, w->name) : NULL;
                w->full = full;
                w->axis = ws ? ws->axis : -1;
                w->rank0 = ws && ws->rank0_only;
                w->ngroups = ws ? ws->ngroups : 1;
                w->rep = ws ? ws->rep : 1;
                w->blk = ws ? ws->blk : 0;
                if (ws)
                    memcpy(w->groups, ws->groups, sizeof w->groups);
                w->count = m->w[i].count;
                w->off = S->flat;
                w->rank = t->w[full].rank;
                memcpy(w->dims, t->w[full].dims, sizeof w->dims);
                S->flat += w->count;
                e = S->nw++;
            }
            mp->sidx[k][i] = e;
            S->w[e].sp |= sg->sp ? 1 : 2; /* bit 0: a row-sharded program reads it; bit 1: another does */
        }
    }
    /* sequence parallelism: a weight read by row-sharded programs has a partial gradient on each tensor rank (its
     * rows'), summed over the group; one that other programs of the stage read too (their gradient whole on every
     * rank) would need the two apart: refused */
    for (int64_t s = 0; s < pp; s++) {
        size_t cnt = 0;
        for (int i = 0; i < mp->stg[s].nw; i++) {
            mp_wt *w = &mp->stg[s].w[i];
            if (w->sp == 3)
                return tern_error_set(err, TERN_ERR_UNSUPPORTED,
                                      "train: sp=1 (sequence parallelism): weight '%s' is read both between the "
                                      "tensor-parallel regions (row-sharded) and by a program that reads whole rows "
                                      "(stage %lld); not supported",
                                      w->name, (long long)s);
            w->sp = w->sp == 1 && w->axis < 0;
            if (w->sp)
                cnt += w->count;
        }
        if (cnt > mp->spmax)
            mp->spmax = cnt;
    }
    /* a weight in two stages (tied embeddings): summed over its stages after the data-parallel all-reduce, as
     * Megatron all-reduces the embedding's gradient between the first and last stage */
    for (int64_t s = 1; s < pp; s++)
        for (int i = 0; i < mp->stg[s].nw; i++) {
            mp_wt *w = &mp->stg[s].w[i];
            for (int64_t s0 = 0; s0 < s && !w->tied; s0++)
                for (int q = 0; q < mp->stg[s0].nw; q++)
                    if (!strcmp(mp->stg[s0].w[q].name, w->name)) {
                        const mp_wt *w0 = &mp->stg[s0].w[q]; /* split alike in both (the vocabulary) or in neither */
                        if (w->axis != w0->axis || w->blk != w0->blk || w->rep != w0->rep || w->ngroups != w0->ngroups)
                            return tern_error_set(err, TERN_ERR_UNSUPPORTED,
                                                  "train: weight '%s' is read by stages %lld and %lld and split by "
                                                  "tensor parallelism differently in them; not supported",
                                                  w->name, (long long)s0, (long long)s);
                        w->tied = 1;
                        mp->tied_count += w->count;
                    }
        }
    /* replicated key/value heads: the replications present, and each's largest chunk (one bucket a chunk) */
    for (int64_t s = 0; s < pp; s++) {
        size_t cnt[8] = {0};
        for (int i = 0; i < mp->stg[s].nw; i++) {
            const mp_wt *w = &mp->stg[s].w[i];
            int e = 0;
            if (w->rep <= 1)
                continue;
            while (e < mp->nkvrep && mp->kvrep[e] != w->rep)
                e++;
            if (e == 8)
                return tern_error_set(err, TERN_ERR_UNSUPPORTED,
                                      "train: key/value heads replicated in more than 8 different ways (weight '%s': "
                                      "%d ranks a head)",
                                      w->name, w->rep);
            if (e == mp->nkvrep)
                mp->kvrep[mp->nkvrep++] = w->rep;
            cnt[e] += w->count;
        }
        for (int e = 0; e < mp->nkvrep; e++)
            if (cnt[e] > mp->kvmax[e])
                mp->kvmax[e] = cnt[e];
    }
    uint64_t hbm = t->hbm;
    mp->maxflat = 1;
    for (int64_t s = 0; s < pp; s++) {
        if (mp->stg[s].flat == 0)
            return tern_error_set(err, TERN_ERR_INVALID, "train: pipeline stage %lld has no trained weight", (long long)s);
        if (mp->stg[s].flat > mp->maxflat)
            mp->maxflat = mp->stg[s].flat;
        if (!mp->zero && (st = build_update(t, mp->stg[s].flat, mp->nst, &mp->stg[s].uexe, &mp->stg[s].urt, &hbm,
                                            err)))
            return st;
    }
    if (mp->zero) {
        mp->zshard = (mp->maxflat + (size_t)dp - 1) / (size_t)dp;
        mp->maxflat = mp->zshard * (size_t)dp;
        if ((st = build_update(t, mp->zshard, mp->nst, &mp->zexe, &mp->zrt, &hbm, err)))
            return st;
    }
    if (mp->zero && !o->timing_only) { /* timing-only: no values, no buffers */
        mp->wbuf = calloc((size_t)mp->n, sizeof *mp->wbuf);
        if (!mp->wbuf)
            return train_oom(err);
        for (int64_t i = 0; i < mp->n; i++) /* this process's data replicas' */
            if (mp->dlocal[i / (pp * tp)] && !(mp->wbuf[i] = calloc(mp->maxflat + 1, sizeof(float))))
                return train_oom(err);
        for (int k = 0; k < 4; k++)
            if (!(mp->zb[k] = calloc(mp->zshard + 1, sizeof(float))))
                return train_oom(err);
    }
    t->hbm = hbm;
    t->flops = flops * (double)micro * (double)dp;
    for (size_t i = 0; i < t->nw; i++)
        t->state_bytes += (uint64_t)t->w[i].count * 4 * (uint64_t)(1 + t->w[i].n_state);
    tern_core_config cfg;
    if ((st = tern_core_config_load(t->machine, &cfg, err)))
        return st;
    t->peak = 2.0 * cfg.pe_rows * cfg.pe_cols * cfg.timing.clock_hz[TERN_ENGINE_TENSOR];
    /* buffers (timing-only: the programs' times, no values: none of the shards' buffers) */
    mp->fsec = calloc((size_t)p->nseg + 1, sizeof(double));
    mp->gath = calloc((size_t)p->nxv + 1, 1);
    mp->tf = calloc((size_t)pp, sizeof(double));
    mp->tb = calloc((size_t)pp, sizeof(double));
    mp->synced_ptr = calloc(t->nw + 1, sizeof *mp->synced_ptr);
    mp->ps_f = malloc(sizeof(double) * ((size_t)p->nseg + 1));
    mp->ps_g = malloc(sizeof(double) * ((size_t)p->nseg + 1));
    if (!mp->fsec || !mp->tf || !mp->tb || !mp->synced_ptr || !mp->ps_f || !mp->ps_g || !mp->gath)
        return train_oom(err);
    for (int k = 0; k < p->nseg; k++)
        mp->ps_f[k] = mp->ps_g[k] = -1;
    if (!o->timing_only && (st = alloc_values(t, err)))
        return st;
    /* the activation crossing each cut: the transfers' times */
    for (int64_t s = 0; s + 1 < pp; s++) {
        const mp_seg *lastk = &p->seg[p->stage_first[s + 1] - 1];
        size_t cnt = 0;
        for (int q = 0; q < lastk->nxout; q++) /* row shards: each tensor rank sends its own */
            cnt += p->xv[lastk->xout[q]].count / (p->xv[lastk->xout[q]].sp ? (size_t)tp : 1);
        double a = 0, b = 0;
        if ((st = mp_p2p_time(mp, s, cnt, 0, &a, err)) || (st = mp_p2p_time(mp, s, cnt, 1, &b, err)))
            return st;
        if (a > mp->p2p_f)
            mp->p2p_f = a;
        if (b > mp->p2p_b)
            mp->p2p_b = b;
    }
    if (mp->tied_count) { /* the first and last stages' tensor ranks exchange the tied gradients (both ways at once) */
        unsigned *pairs = malloc(sizeof(unsigned) * 4 * (size_t)tp + 1);
        if (!pairs)
            return train_oom(err);
        for (int64_t r = 0; r < tp; r++) {
            unsigned a = mp_core_of(mp, 0, 0, r), b = mp_core_of(mp, 0, pp - 1, r);
            pairs[4 * r] = a, pairs[4 * r + 1] = b, pairs[4 * r + 2] = b, pairs[4 * r + 3] = a;
        }
        tern_coll_desc d;
        memset(&d, 0, sizeof d);
        d.op = TERN_COLL_PERMUTE;
        d.dtype = TERN_DTYPE_FP32;
        d.count = mp->tied_count;
        d.algo = TERN_ALGO_DIRECT;
        d.pairs = pairs;
        d.npairs = (unsigned)(2 * tp);
        tern_coll_result res;
        st = tern_collective_time(mp->fab, &d, &res, err);
        free(pairs);
        if (st)
            return tern_error_prefix(err, "train: tied weights' gradient exchange: ");
        mp->t_tied = (double)res.time_ps * 1e-12;
    }
    mp->gscale = o->loss == TERN_LOSS_CROSS_ENTROPY ? 1.0 : 1.0 / (double)(dp * micro);
    size_t sc = t->target_count > t->read_count ? t->target_count : t->read_count;
    t->scratch = calloc(sc + 1, sizeof(float));
    if (!t->scratch)
        return train_oom(err);
    if (!o->timing_only)
        scatter(t);
    return TERN_OK;
}

static tern_status run_prog(tern_rt *rt, double *secs, tern_error *err)
{
    tern_run_stats rs;
    tern_status st = tern_rt_execute(rt, &rs, err);
    if (!st)
        *secs = (double)rs.time_ps * 1e-12;
    return st;
}

/* Feeds segment k's weights (rank r's shards) and crossing inputs into runtime rt (fwd: the forward program). */
static tern_status feed_seg(tern_trainer *t, int k, int64_t r, tern_rt *rt, tern_error *err)
{
    struct train_mp *mp = t->mp;
    const mp_seg *sg = &mp->p.seg[k];
    const tern_trainer *m = &sg->prog.m;
    size_t ix = (size_t)(sg->stage * mp->p.tp + r);
    tern_status st = TERN_OK;
    for (size_t i = 0; i < m->nw && !st; i++) {
        const float *v;
        size_t n = m->w[i].count;
        if (sg->xw[i] >= 0) { /* a row-sharded program reads the rank's rows */
            v = mp->act[r] + mp_xoff(&mp->p, sg->xw[i]) + (sg->sp ? (size_t)r * n : 0);
        } else if (mp->sidx[k][i] >= 0) {
            v = mp->val[ix] + mp->stg[sg->stage].w[mp->sidx[k][i]].off;
        } else { /* an untrained weight: the model's value (replicated; never split) */
            int f = find_full(t, m->w[i].name);
            v = f >= 0 ? t->w[f].val : m->w[i].val;
        }
        st = tern_rt_set_input(rt, m->w[i].name, v, n * sizeof(float), err);
    }
    if (!st && sg->vocab == MP_VOCAB_EMBED) { /* the rank's first vocabulary row (int32 on the device) */
        int32_t off = (int32_t)(r * mp->p.vblk);
        st = tern_rt_set_input(rt, MP_VOFF, &off, sizeof off, err);
    }
    return st;
}

/* One micro-batch (rows x, labels; micro-batch c of the step, whose Dropout masks it draws) of data replica d: forward and backward through every segment, the weight
 * gradients added into gacc; its loss partial added to *loss; per-stage forward / backward times into tf / tb. */
static tern_status micro_batch(tern_trainer *t, int64_t d, int64_t c, const void *x, const void *labels, size_t ls,
                               const float *inv, double *loss, double *tf, double *tb, tern_error *err)
{
    struct train_mp *mp = t->mp;
    mp_plan *p = &mp->p;
    int64_t tp = p->tp;
    uint64_t step = t->step + 1;
    tern_status st = TERN_OK;
    mp->act_sec = mp->act_bytes = 0;
    memset(mp->gath, 0, (size_t)p->nxv);
    for (int k = 0; k < p->nseg && !st; k++) { /* forward */
        mp_seg *sg = &p->seg[k];
        if (sg->last)
            break;
        double tmax = 0;
        st = mp_sp_gather_in(mp, sg, mp->act, &tf[sg->stage], err);
        for (int64_t r = 0; r < tp && !st; r++) {
            tern_trainer *m = &sg->prog.m;
            tern_rt *save = m->rt;
            m->rt = sg->prog.frt;
            if (m->nin) /* a row-sharded program: the rank's rows of the data */
                st = train_feed_rows(m, (const char *)x + (sg->sp ? (size_t)r * m->data_bytes : 0), m->data_bytes,
                                     NULL, 0, step, NULL, err);
            m->rt = save;
            if (!st)
                st = feed_seg(t, k, r, sg->prog.frt, err);
            if (!st)
                st = train_feed_masks(m, sg->prog.frt, step, c, r, err);
            double s = 0;
            if (!st)
                st = run_prog(sg->prog.frt, &s, err);
            if (s > tmax)
                tmax = s;
            for (int q = 0; q < sg->nxout && !st; q++) {
                const mp_xv *xv = &p->xv[sg->xout[q]];
                size_t n = sg->sp ? xv->count / (size_t)tp : xv->count; /* a row-sharded program: the rank's rows */
                st = tern_rt_get_output(sg->prog.frt, xv->name,
                                        mp->act[r] + mp_xoff(p, sg->xout[q]) + (sg->sp ? (size_t)r * n : 0),
                                        n * sizeof(float), err);
            }
        }
        tf[sg->stage] += tmax;
        mp->fsec[k] = tmax;
        for (int q = 0; q < sg->nxout && !st; q++) /* partial sums: all-reduced, or reduce-scattered to row shards */
            if (p->xv[sg->xout[q]].partial)
                st = mp_tp_coll(mp, p->xv[sg->xout[q]].sp ? TERN_COLL_REDUCE_SCATTER : TERN_COLL_ALL_REDUCE, mp->act,
                             mp_xoff(p, sg->xout[q]), p->xv[sg->xout[q]].count, &tf[sg->stage], err);
        if (st)
            return tern_error_prefix(err, "train: step %llu: forward program %d: ", (unsigned long long)step, k);
    }
    for (int64_t r = 0; r < tp; r++) {
        size_t tot = mp_xoff(p, p->nxv);
        memset(mp->dact[r], 0, tot * sizeof(float));
    }
    for (int k = p->nseg - 1; k >= 0 && !st; k--) { /* backward */
        mp_seg *sg = &p->seg[k];
        tern_trainer *m = &sg->prog.m;
        double tmax = 0, fsec = 0;
        size_t ix0 = (size_t)sg->stage * (size_t)tp;
        if (sg->vocab == MP_VOCAB_LOSS) { /* the cross-entropy across the tensor group: the logits' gradients */
            float *lg[64], *dl[64];
            size_t off = mp_xoff(p, sg->xin[0]);
            for (int64_t r = 0; r < tp; r++) {
                lg[r] = mp->act[r] + off;
                dl[r] = mp->gx[r] + off;
            }
            st = mp_vocab_ce(t, p, mp->tpfab, lg, dl, labels, ls, inv ? *inv : 0.0f, loss, &tmax, err);
        }
        if (!st && sg->vocab != MP_VOCAB_LOSS)
            st = mp_sp_backward_gather(mp, sg, mp->act, mp->dact, &tb[sg->stage], err);
        for (int64_t r = 0; r < tp && !st && sg->vocab != MP_VOCAB_LOSS; r++) {
            st = train_feed_rows(m, m->nin ? (const char *)x + (sg->sp ? (size_t)r * m->data_bytes : 0) : NULL,
                                 m->nin ? m->data_bytes : 0, sg->last ? labels : NULL, ls, step, inv, err);
            if (!st)
                st = feed_seg(t, k, r, m->rt, err);
            if (!st)
                st = train_feed_masks(m, m->rt, step, c, r, err);
            for (int q = 0; q < sg->nxout && !st && !sg->last; q++) {
                const mp_xv *xv = &p->xv[sg->xout[q]];
                char nm[512];
                size_t n = sg->sp ? xv->count / (size_t)tp : xv->count;
                snprintf(nm, sizeof nm, MP_DY "%s", xv->name);
                st = tern_rt_set_input(m->rt, nm, mp->dact[r] + mp_xoff(p, sg->xout[q]) + (sg->sp ? (size_t)r * n : 0),
                                       n * sizeof(float), err);
            }
            double s = 0;
            if (!st)
                st = run_prog(m->rt, &s, err);
            if (s > tmax)
                tmax = s;
            if (!st && sg->last && r == 0) {
                float l;
                if (!(st = tern_rt_get_output(m->rt, TRAIN_LOSS, &l, sizeof l, err)))
                    *loss += (double)l;
            }
            float *ga = mp->gacc[(size_t)(d * p->pp) * (size_t)tp + ix0 + (size_t)r];
            for (size_t i = 0; i < m->nw && !st; i++) {
                train_weight *w = &m->w[i];
                if (!w->trained || !w->acc_out)
                    continue;
                float *b = mp->tmp;
                if ((st = tern_rt_get_output(m->rt, w->acc_out, b, w->count * sizeof(float), err)))
                    break;
                if (sg->xw[i] >= 0) { /* an input gradient: kept per rank until the group's all-reduce */
                    float *dst = mp->gx[r] + mp_xoff(p, sg->xw[i]) + (sg->sp ? (size_t)r * w->count : 0);
                    memcpy(dst, b, w->count * sizeof(float));
                    continue;
                }
                int e = mp->sidx[k][i];
                if (e < 0)
                    continue;
                const mp_wt *wt = &mp->stg[sg->stage].w[e];
                if (wt->rank0 && r > 0)
                    continue;
                float *gd = ga + wt->off;
                for (size_t j = 0; j < w->count; j++)
                    gd[j] += b[j];
            }
        }
        for (int q = 0; q < sg->nxin && !st; q++) {
            int xi = sg->xin[q];
            size_t off = mp_xoff(p, xi), n = p->xv[xi].count;
            int spx = p->xv[xi].sp;
            if (sg->pair >= 0 || sg->vocab == MP_VOCAB_HEAD) /* a column-parallel input's gradient (Megatron's f) */
                st = mp_tp_coll(mp, spx ? TERN_COLL_REDUCE_SCATTER : TERN_COLL_ALL_REDUCE, mp->gx, off, n, &tb[sg->stage],
                             err);
            if (spx) /* row shards: a rank's gradient is its rows' (another program's is whole on every rank) */
                n /= (size_t)tp;
            for (int64_t r = 0; r < tp && !st; r++) {
                size_t o = off + (spx ? (size_t)r * n : 0);
                for (size_t j = 0; j < n; j++)
                    mp->dact[r][o + j] += mp->gx[r][o + j];
            }
        }
        /* the gradient program recomputes the forward (not charged: the forward program's time is taken off) */
        fsec = sg->last ? 0 : mp->fsec[k];
        tb[sg->stage] += tmax > fsec ? tmax - fsec : 0;
        if (st)
            return tern_error_prefix(err, "train: step %llu: gradient program %d: ", (unsigned long long)step, k);
    }
    return st;
}

/* Timing-only: one micro-batch's times into tf / tb as micro_batch adds them (the same sums in the same order, so
 * the same doubles; each micro-batch's apart, then added in micro-batch order, as the functional step), with no
 * values: every tensor rank, micro-batch and data replica runs the same program on its
 * own shapes, and a program's time does not depend on the values, so each program is run once (rank 0, no inputs
 * set) and its time reused; the all-reduces are timed by tern_collective_time (tern_collective_run's time). */
static tern_status micro_batch_timing(tern_trainer *t, double *tf, double *tb, tern_error *err)
{
    struct train_mp *mp = t->mp;
    mp_plan *p = &mp->p;
    uint64_t step = t->step + 1;
    tern_status st = TERN_OK;
    mp->act_sec = mp->act_bytes = 0;
    memset(mp->gath, 0, (size_t)p->nxv);
    for (int k = 0; k < p->nseg && !st; k++) { /* forward */
        mp_seg *sg = &p->seg[k];
        if (sg->last)
            break;
        if ((st = mp_sp_gather_in(mp, sg, NULL, &tf[sg->stage], err)))
            return tern_error_prefix(err, "train: step %llu: forward program %d: ", (unsigned long long)step, k);
        if (mp->ps_f[k] < 0 && (st = run_prog(sg->prog.frt, &mp->ps_f[k], err)))
            return tern_error_prefix(err, "train: step %llu: forward program %d: ", (unsigned long long)step, k);
        double tmax = mp->ps_f[k] > 0 ? mp->ps_f[k] : 0;
        tf[sg->stage] += tmax;
        mp->fsec[k] = tmax;
        for (int q = 0; q < sg->nxout && !st; q++)
            if (p->xv[sg->xout[q]].partial)
                st = mp_tp_coll(mp, p->xv[sg->xout[q]].sp ? TERN_COLL_REDUCE_SCATTER : TERN_COLL_ALL_REDUCE, NULL, 0,
                             p->xv[sg->xout[q]].count, &tf[sg->stage], err);
        if (st)
            return tern_error_prefix(err, "train: step %llu: forward program %d: ", (unsigned long long)step, k);
    }
    for (int k = p->nseg - 1; k >= 0 && !st; k--) { /* backward */
        mp_seg *sg = &p->seg[k];
        double tmax = 0;
        if (sg->vocab == MP_VOCAB_LOSS) { /* the cross-entropy across the group, as micro_batch adds it */
            if ((st = mp_vocab_ce(t, p, mp->tpfab, NULL, NULL, NULL, 0, 0.0f, NULL, &tmax, err)))
                return tern_error_prefix(err, "train: step %llu: ", (unsigned long long)step);
        } else {
            if ((st = mp_sp_backward_gather(mp, sg, NULL, NULL, &tb[sg->stage], err)))
                return tern_error_prefix(err, "train: step %llu: gradient program %d: ", (unsigned long long)step, k);
            if (mp->ps_g[k] < 0 && (st = run_prog(sg->prog.m.rt, &mp->ps_g[k], err)))
                return tern_error_prefix(err, "train: step %llu: gradient program %d: ", (unsigned long long)step, k);
            tmax = mp->ps_g[k] > 0 ? mp->ps_g[k] : 0;
        }
        for (int q = 0; q < sg->nxin && !st; q++)
            if (sg->pair >= 0 || sg->vocab == MP_VOCAB_HEAD)
                st = mp_tp_coll(mp, p->xv[sg->xin[q]].sp ? TERN_COLL_REDUCE_SCATTER : TERN_COLL_ALL_REDUCE, NULL, 0,
                             p->xv[sg->xin[q]].count, &tb[sg->stage], err);
        double fsec = sg->last ? 0 : mp->fsec[k];
        tb[sg->stage] += tmax > fsec ? tmax - fsec : 0;
        if (st)
            return tern_error_prefix(err, "train: step %llu: gradient program %d: ", (unsigned long long)step, k);
    }
    return st;
}

/* The schedule of P stages, V chunks each (chunk g on stage g mod P; V = 1: plain 1F1B) and M micro-batches, chunk
 * g's forward f[g] and backward b[g] long, transfers pf (an activation to the next chunk) and pb (a gradient back):
 * its span, simulated by the planner's schedule (src/plan/pipeline.c), and *work the busiest stage's compute. */
static tern_status schedule_span(int64_t P, int64_t V, int64_t M, const double *f, const double *b, double pf,
                                 double pb, double *span, double *work, tern_error *err)
{
    double idle = 0;
    *span = 0;
    *work = 0;
    if (plan_pipeline_schedule2((unsigned)P, (unsigned)V, (unsigned)M, f, b, pf, pb, span, &idle, NULL))
        return tern_error_set(err, TERN_ERR_INVALID,
                              "train: internal: the pipeline schedule failed (pp=%lld, vpp=%lld, micro=%lld)",
                              (long long)P, (long long)V, (long long)M);
    for (int64_t s = 0; s < P; s++) { /* the busiest stage's compute: its chunks' */
        double wk = 0;
        for (int64_t g = s; g < P * V; g += P)
            wk += (double)M * (f[g] + b[g]);
        if (wk > *work)
            *work = wk;
    }
    return TERN_OK;
}

/* ZeRO-1: data replica d updates block d of every (stage, tensor rank)'s flat weights with its block of the
 * state; the all-gather spreads the updated blocks. nv as the plain update fills it. */
static tern_status update_zero(tern_trainer *t, uint64_t step, float gs, float **nv, double *upd, double *comm,
                               tern_error *err)
{
    struct train_mp *mp = t->mp;
    int64_t tp = mp->p.tp, pp = mp->p.pp, dp = mp->p.dp;
    size_t Z = mp->zshard;
    /* a core updates its block of each of its chunks in turn (interleaved: V chunks a stage) */
    double *usum = calloc((size_t)(dp * mp->P * tp) + 1, sizeof(double));
    tern_status st = usum ? TERN_OK : train_oom(err);
    uint64_t fkey = 0;
    for (int64_t s = 0; s < pp && !st; s++)
        for (int64_t r = 0; r < tp && !st; r++) {
            size_t ix = (size_t)(s * tp + r), flat = mp->stg[s].flat;
            for (int q = -1; q < mp->nst && !st; q++)
                if (!(nv[ix * 3 + (size_t)(q + 1)] = calloc(flat + 1, sizeof(float))))
                    st = train_oom(err);
            for (int64_t d = 0; d < dp && !st; d++) {
                if (!mp->dlocal[d]) /* another process's replica updates its block */
                    continue;
                fkey = (uint64_t)((s * tp + r) * dp + d);
                size_t lo = (size_t)d * Z, n = lo < flat ? (flat - lo < Z ? flat - lo : Z) : 0;
                for (int k = 0; k < 4; k++)
                    memset(mp->zb[k], 0, Z * sizeof(float));
                if (n)
                    memcpy(mp->zb[0], mp->val[ix] + lo, n * sizeof(float));
                for (int q = 0; q < mp->nst && n; q++)
                    memcpy(mp->zb[2 + q], mp->st[q][ix] + lo, n * sizeof(float));
                double lr;
                t->rt = mp->zrt;
                st = train_set_step_scalars(t, step, &lr, err);
                if (!st)
                    st = tern_rt_set_input(mp->zrt, TRAIN_GSCALE, &gs, sizeof gs, err);
                if (!st)
                    st = tern_rt_set_input(mp->zrt, "tern.mp.p", mp->zb[0], Z * sizeof(float), err);
                if (!st)
                    st = tern_rt_set_input(mp->zrt, "tern.mp.g", mp->gacc[mp_rank_of(mp, d, s, r)] + lo, Z * sizeof(float),
                                           err);
                for (int q = 0; q < mp->nst && !st; q++) {
                    char nm[64];
                    snprintf(nm, sizeof nm, "train.state%d.flat", q);
                    st = tern_rt_set_input(mp->zrt, nm, mp->zb[2 + q], Z * sizeof(float), err);
                }
                double secs = 0;
                if (!st)
                    st = run_prog(mp->zrt, &secs, err);
                double *u = &usum[mp_core_of(mp, d, s, r)];
                *u += secs;
                if (*u > *upd)
                    *upd = *u;
                if (!st)
                    st = tern_rt_get_output(mp->zrt, "tern.mp.p.new", mp->wbuf[mp_rank_of(mp, d, s, r)] + lo,
                                            Z * sizeof(float), err);
                for (int q = 0; q < mp->nst && !st; q++) {
                    char nm[64];
                    snprintf(nm, sizeof nm, "train.state%d.new.flat", q);
                    if (!(st = tern_rt_get_output(mp->zrt, nm, mp->zb[2 + q], Z * sizeof(float), err)) && n)
                        memcpy(nv[ix * 3 + (size_t)(q + 1)] + lo, mp->zb[2 + q], n * sizeof(float));
                }
            }
        }
    t->rt = NULL;
    st = train_mp_procs_max(mp->tr, st, fkey, upd, err); /* over MPI processes: the slowest core anywhere */
    if (!st)
        st = mp_dp_coll(mp, TERN_COLL_ALL_GATHER, mp->wbuf, mp->maxflat, comm, err);
    for (int64_t s = 0; s < pp && !st; s++)
        for (int64_t r = 0; r < tp; r++) {
            size_t ix = (size_t)(s * tp + r);
            memcpy(nv[ix * 3], mp->wbuf[mp_rank_of(mp, mp->d0, s, r)], mp->stg[s].flat * sizeof(float));
        }
    free(usum);
    return st;
}

/* ZeRO-1 with clipping: each data replica holds only its block of the reduced gradients, so the global norm the
 * clipping needs is the blocks' sums of squares all-reduced over the data replicas before any block's update: a
 * second, one-element all-reduce per (chunk, tensor rank) group, timed here (the host computes the norm itself from
 * every block, as without ZeRO, so the trained bytes are the unsharded layout's). */
static tern_status zero_norm_coll(struct train_mp *mp, double *tdp, tern_error *err)
{
    double s = 0;
    tern_status st = mp_dp_coll(mp, TERN_COLL_ALL_REDUCE, NULL, 1, &s, err);
    mp->t_znorm = s;
    *tdp += s;
    return st;
}

/* The step's time from the per-stage forward / backward sums of its K micro-batches (mp->tf, mp->tb): the 1F1B
 * span, then the data-parallel collectives tdp, the tied weights' exchange and the slowest update tupd. */
static tern_status finish_step(tern_trainer *t, double tdp, double tupd, double loss, double gn,
                               tern_train_step_info *info, tern_error *err)
{
    struct train_mp *mp = t->mp;
    mp_plan *p = &mp->p;
    int64_t pp = p->pp, M = p->micro, K = p->dp * M;
    uint64_t step = t->step + 1;
    tern_status st = TERN_OK;
    /* time: the schedule of one replica's micro-batches (every replica runs the same programs at once) */
    double *f = malloc(sizeof(double) * (size_t)pp + 1), *b = malloc(sizeof(double) * (size_t)pp + 1);
    if (!f || !b) {
        free(f), free(b);
        return train_oom(err);
    }
    for (int64_t s = 0; s < pp; s++) {
        f[s] = mp->tf[s] / (double)K;
        b[s] = mp->tb[s] / (double)K;
    }
    double span = 0, work = 0;
    st = schedule_span(mp->P, mp->V, M, f, b, mp->p2p_f, mp->p2p_b, &span, &work, err);
    if (mp->V > 1 && !st) {
        /* for comparison: plain 1F1B over P stages of V consecutive chunks each (the chunks' times summed) */
        double *f1 = calloc((size_t)mp->P + 1, sizeof(double)), *b1 = calloc((size_t)mp->P + 1, sizeof(double));
        if (!f1 || !b1)
            st = train_oom(err);
        for (int64_t g = 0; g < pp && !st; g++) {
            f1[g / mp->V] += f[g];
            b1[g / mp->V] += b[g];
        }
        if (!st)
            st = schedule_span(mp->P, 1, M, f1, b1, mp->p2p_f, mp->p2p_b, &mp->t_span1, &mp->t_work1, err);
        free(f1), free(b1);
    }
    free(f), free(b);
    if (st)
        return st;
    mp->t_span = span;
    mp->t_work = work;
    mp->t_dp = tdp;
    mp->t_upd = tupd;
    t->step = step;
    mp->synced_step = step;
    for (size_t i = 0; i < t->nw; i++)
        mp->synced_ptr[i] = t->w[i].val;
    tern_train_step_info in;
    memset(&in, 0, sizeof in);
    in.step = step;
    in.lr = tern_train_lr(&t->o, step);
    in.step_seconds = span + mp->t_sp + mp->t_kv + tdp + mp->t_tied + tupd;
    in.samples_per_s = in.step_seconds > 0 ? (double)p->batch / in.step_seconds : 0;
    in.mfu = t->peak > 0 && in.step_seconds > 0 ? t->flops / (t->peak * (double)mp->cores * in.step_seconds) * 100 : 0;
    in.loss = loss;
    in.grad_norm = gn;
    if (info)
        *info = in;
    return TERN_OK;
}

/* Timing-only (--timing-only): the step's time with no values (docs/training.md): the K micro-batches' program and
 * all-reduce times added as a functional step adds them, the data-parallel collectives timed on the fabric, each
 * stage's update program run once (its tensor ranks' and, under ZeRO-1, blocks' are the same program). */
static tern_status step_timing(tern_trainer *t, tern_train_step_info *info, tern_error *err)
{
    struct train_mp *mp = t->mp;
    mp_plan *p = &mp->p;
    int64_t pp = p->pp, dp = p->dp, M = p->micro;
    tern_status st = TERN_OK;
    for (int64_t s = 0; s < pp; s++)
        mp->tf[s] = mp->tb[s] = 0;
    double *fb = calloc(2 * (size_t)pp + 1, sizeof *fb); /* one micro-batch's, added as the functional step adds */
    if (!fb)
        return train_oom(err);
    for (int64_t c = 0; c < dp * M && !st; c++) {
        memset(fb, 0, 2 * (size_t)pp * sizeof *fb);
        st = micro_batch_timing(t, fb, fb + pp, err);
        for (int64_t s = 0; s < pp && !st; s++) {
            mp->tf[s] += fb[s];
            mp->tb[s] += fb[pp + s];
        }
    }
    free(fb);
    if (st)
        return st;
    double tdp = 0, tupd = 0, secs = 0;
    if (mp->spmax && (st = mp_group_coll(mp, NULL, 1, &mp->t_sp, err)))
        return tern_error_prefix(err, "train: step %llu: ", (unsigned long long)(t->step + 1));
    if (mp->nkvrep && (st = mp_group_coll(mp, NULL, 0, &mp->t_kv, err)))
        return tern_error_prefix(err, "train: step %llu: ", (unsigned long long)(t->step + 1));
    if (dp > 1 && (st = mp_dp_coll(mp, mp->zero ? TERN_COLL_REDUCE_SCATTER : TERN_COLL_ALL_REDUCE, NULL, mp->maxflat,
                                &tdp, err)))
        return tern_error_prefix(err, "train: step %llu: ", (unsigned long long)(t->step + 1));
    if (mp->zero && t->o.clip_norm > 0 && (st = zero_norm_coll(mp, &tdp, err)))
        return tern_error_prefix(err, "train: step %llu: ", (unsigned long long)(t->step + 1));
    if (mp->zero) {
        if ((st = run_prog(mp->zrt, &secs, err)))
            return st;
        for (int64_t c = 0; c < mp->V && secs > 0; c++) /* a core's block of each of its V chunks, in turn */
            tupd += secs;
        if ((st = mp_dp_coll(mp, TERN_COLL_ALL_GATHER, NULL, mp->maxflat, &tdp, err)))
            return st;
    }
    double *usum = calloc((size_t)mp->P + 1, sizeof(double)); /* a stage updates its chunks in turn */
    if (!usum)
        return train_oom(err);
    for (int64_t s = 0; s < pp && !mp->zero; s++) {
        if ((st = run_prog(mp->stg[s].urt, &secs, err))) {
            free(usum);
            return st;
        }
        usum[s % mp->P] += secs;
        if (usum[s % mp->P] > tupd)
            tupd = usum[s % mp->P];
    }
    free(usum);
    return finish_step(t, tdp, tupd, NAN, NAN, info, err);
}

tern_status train_mp_step(tern_trainer *t, const void *x, size_t x_count, const void *labels, size_t label_count,
                          tern_train_step_info *info, tern_error *err)
{
    struct train_mp *mp = t->mp;
    mp_plan *p = &mp->p;
    int64_t tp = p->tp, pp = p->pp, dp = p->dp, M = p->micro, K = dp * M;
    uint64_t step = t->step + 1;
    tern_status st = TERN_OK;
    int same = mp->synced_step == t->step;
    for (size_t i = 0; same && i < t->nw; i++)
        same = mp->synced_ptr[i] == t->w[i].val;
    if (!same && !t->o.timing_only) /* a checkpoint was loaded into t->w (timing-only: no shards to fill) */
        scatter(t);
    if (t->nin && (!x || x_count != t->data_bytes))
        return tern_error_set(err, TERN_ERR_INVALID, "train: step %llu: input '%s': %zu bytes given, %zu expected",
                              (unsigned long long)step, t->data_name ? t->data_name : "?", x_count, t->data_bytes);
    if (!labels || label_count % (size_t)K)
        return tern_error_set(err, TERN_ERR_INVALID,
                              "train: step %llu: %zu labels do not split over %lld micro-batches of the batch",
                              (unsigned long long)step, labels ? label_count : 0, (long long)K);
    size_t ls = label_count / (size_t)K, xs = t->data_bytes / (size_t)K;
    size_t lsz = t->o.loss == TERN_LOSS_CROSS_ENTROPY ? sizeof(int64_t) : sizeof(float);
    /* cross-entropy: 1 / (the counted rows of the micro-batch's group) / A; without accumulation one group */
    int64_t A = mp->acc > 1 ? mp->acc : 1, KG = K / A;
    float *inv = NULL;
    if (t->o.loss == TERN_LOSS_CROSS_ENTROPY) {
        if (!(inv = calloc((size_t)A + 1, sizeof(float))))
            return train_oom(err);
        for (int64_t g = 0; g < A; g++) {
            size_t counted = 0, n = ls * (size_t)KG;
            for (size_t i = 0; i < n; i++)
                counted += ((const int64_t *)labels)[(size_t)g * n + i] != t->o.ignore_index;
            inv[g] = counted ? (float)(1.0 / ((double)counted * (double)A)) : 0.0f;
        }
    }
    if (t->o.timing_only) {
        free(inv);
        return step_timing(t, info, err);
    }
    for (int64_t i = 0; i < mp->n; i++)
        if (mp->gacc[i])
            memset(mp->gacc[i], 0, mp->maxflat * sizeof(float));
    for (int64_t s = 0; s < pp; s++)
        mp->tf[s] = mp->tb[s] = 0;
    /* each micro-batch's loss and per-stage times apart (mv), then added in micro-batch order: over MPI processes a
     * process runs its own data replicas' micro-batches and the others' entries come to it (mp_procs.c) */
    size_t nmv = (size_t)K * (1 + 2 * (size_t)pp);
    double *mv = calloc(nmv + 1, sizeof *mv), loss = 0;
    if (!mv) {
        free(inv);
        return train_oom(err);
    }
    int64_t fc = 0;
    for (int64_t d = 0; d < dp && !st; d++)
        for (int64_t j = 0; j < M && !st && mp->dlocal[d]; j++) {
            int64_t c = d * M + j; /* micro-batch c: rows [c mb, (c + 1) mb), of group c / KG */
            fc = c;
            st = micro_batch(t, d, c, x ? (const char *)x + (size_t)c * xs : NULL,
                             (const char *)labels + (size_t)c * ls * lsz, ls, inv ? &inv[c / KG] : NULL, &mv[c],
                             mv + K + c * pp, mv + K + (K + c) * pp, err);
        }
    free(inv);
    st = train_mp_procs_merge(mp->tr, st, (uint64_t)fc, mv, nmv, err);
    for (int64_t c = 0; c < K && !st; c++) {
        loss += mv[c];
        for (int64_t s = 0; s < pp; s++) {
            mp->tf[s] += mv[K + c * pp + s];
            mp->tb[s] += mv[K + (K + c) * pp + s];
        }
    }
    free(mv);
    if (st)
        return st;
    loss *= mp->gscale;
    if (!isfinite(loss))
        return tern_error_set(err, TERN_ERR_RANGE, "train: step %llu: the loss is not finite (%g)",
                              (unsigned long long)step, loss);
    /* the data replicas' gradients: one all-reduce over the machine, a group per (stage, tensor rank); ZeRO-1 a
     * reduce-scatter (replica d holds block d reduced), the blocks copied to replica 0's buffer for the norm */
    double tdp = 0;
    /* replicated key/value heads: the ranks sharing a head sum their gradients first (on every data replica) */
    /* sequence parallelism: the row-sharded programs' weights (the norms') have each rank's rows' part: summed */
    if (mp->spmax && (st = mp_group_coll(mp, mp->gacc, 1, &mp->t_sp, err)))
        return tern_error_prefix(err, "train: step %llu: ", (unsigned long long)step);
    if (mp->nkvrep && (st = mp_group_coll(mp, mp->gacc, 0, &mp->t_kv, err)))
        return tern_error_prefix(err, "train: step %llu: ", (unsigned long long)step);
    if (dp > 1 && (st = mp_dp_coll(mp, mp->zero ? TERN_COLL_REDUCE_SCATTER : TERN_COLL_ALL_REDUCE, mp->gacc, mp->maxflat,
                                &tdp, err)))
        return tern_error_prefix(err, "train: step %llu: ", (unsigned long long)step);
    if (mp->zero && t->o.clip_norm > 0 && (st = zero_norm_coll(mp, &tdp, err)))
        return tern_error_prefix(err, "train: step %llu: ", (unsigned long long)step);
    for (int64_t s = 0; s < pp && mp->zero; s++)
        for (int64_t r = 0; r < tp; r++)
            for (int64_t d = 0; d < dp; d++)
                if (d != mp->d0 && mp->dlocal[d])
                    memcpy(mp->gacc[mp_rank_of(mp, mp->d0, s, r)] + (size_t)d * mp->zshard,
                           mp->gacc[mp_rank_of(mp, d, s, r)] + (size_t)d * mp->zshard, mp->zshard * sizeof(float));
    /* over MPI processes the other processes' replicas' blocks come too (the norm reads them all) */
    if (mp->zero && (st = train_mp_procs_blocks(mp->tr, mp->dlocal, dp, mp->zshard,
                                                mp->gacc + (size_t)(mp->d0 * pp * tp), NULL, (size_t)(pp * tp), err)))
        return st;
    /* tied weights: every copy gets the sum of the stages' gradients, in stage order */
    for (int64_t s = 1; s < pp && mp->tied_count; s++)
        for (int i = 0; i < mp->stg[s].nw; i++) {
            const mp_wt *w = &mp->stg[s].w[i];
            if (!w->tied)
                continue;
            for (int64_t r = 0; r < tp; r++) {
                const mp_wt *w0 = NULL;
                int64_t s0 = 0;
                for (; s0 < s && !w0; s0++)
                    for (int q = 0; q < mp->stg[s0].nw && !w0; q++)
                        if (!strcmp(mp->stg[s0].w[q].name, w->name) && !mp->stg[s0].w[q].tied)
                            w0 = &mp->stg[s0].w[q];
                if (!w0)
                    continue;
                float *g0 = mp->gacc[mp_rank_of(mp, mp->d0, s0 - 1, r)] + w0->off,
                      *g1 = mp->gacc[mp_rank_of(mp, mp->d0, s, r)] + w->off;
                for (size_t e = 0; e < w->count; e++) {
                    g0[e] = g0[e] + g1[e];
                    g1[e] = g0[e];
                }
            }
        }
    /* ZeRO-1: the tied sums were made in the first local replica's buffer, which holds every block; each local
     * replica's block update reads its own block, so the blocks go back */
    for (int64_t s = 0; s < pp && mp->zero && mp->tied_count; s++)
        for (int64_t r = 0; r < tp; r++)
            for (int64_t d = 0; d < dp; d++)
                if (d != mp->d0 && mp->dlocal[d])
                    memcpy(mp->gacc[mp_rank_of(mp, d, s, r)] + (size_t)d * mp->zshard,
                           mp->gacc[mp_rank_of(mp, mp->d0, s, r)] + (size_t)d * mp->zshard, mp->zshard * sizeof(float));
    /* the global gradient norm: each split weight's shards once, a replicated weight once */
    double sq = 0;
    for (int64_t s = 0; s < pp; s++)
        for (int64_t r = 0; r < tp; r++) {
            const float *g = mp->gacc[mp_rank_of(mp, mp->d0, s, r)]; /* every replica's: the first this process has */
            for (int i = 0; i < mp->stg[s].nw; i++) {
                const mp_wt *w = &mp->stg[s].w[i];
                if ((w->axis < 0 && r > 0) || w->tied || r % w->rep) /* a replicated head's block once */
                    continue;
                for (size_t e = 0; e < w->count; e++) {
                    double v = (double)g[w->off + e] * mp->gscale;
                    sq += v * v;
                }
            }
        }
    double gn = sqrt(sq), coef = 1;
    if (!isfinite(gn))
        return tern_error_set(err, TERN_ERR_RANGE, "train: step %llu: the gradient norm is not finite (%g)",
                              (unsigned long long)step, gn);
    if (t->o.clip_norm > 0) {
        coef = t->o.clip_norm / (gn + 1e-6);
        if (coef > 1)
            coef = 1;
    }
    /* every (stage, tensor rank) updates its flat vector; the data replicas hold the same and are not run again */
    double tupd = 0;
    size_t nsr = (size_t)(pp * tp);
    float **nv = calloc(nsr * 3 + 1, sizeof *nv);
    double *usum = calloc((size_t)(mp->P * tp) + 1, sizeof(double)); /* a stage updates its chunks in turn */
    if (!nv || !usum) {
        free(nv), free(usum);
        return train_oom(err);
    }
    if (mp->zero)
        st = update_zero(t, step, (float)(mp->gscale * coef), nv, &tupd, &tdp, err);
    for (int64_t s = 0; s < pp && !st && !mp->zero; s++)
        for (int64_t r = 0; r < tp && !st; r++) {
            mp_stage *S = &mp->stg[s];
            size_t ix = (size_t)(s * tp + r);
            double lr;
            t->rt = S->urt;
            st = train_set_step_scalars(t, step, &lr, err);
            float gs = (float)(mp->gscale * coef);
            if (!st)
                st = tern_rt_set_input(S->urt, TRAIN_GSCALE, &gs, sizeof gs, err);
            if (!st)
                st = tern_rt_set_input(S->urt, "tern.mp.p", mp->val[ix], S->flat * sizeof(float), err);
            if (!st)
                st = tern_rt_set_input(S->urt, "tern.mp.g", mp->gacc[mp_rank_of(mp, mp->d0, s, r)], S->flat * sizeof(float),
                                       err);
            for (int q = 0; q < mp->nst && !st; q++) {
                char nm[64];
                snprintf(nm, sizeof nm, "train.state%d.flat", q);
                st = tern_rt_set_input(S->urt, nm, mp->st[q][ix], S->flat * sizeof(float), err);
            }
            double secs = 0;
            if (!st)
                st = run_prog(S->urt, &secs, err);
            size_t ui = (size_t)((s % mp->P) * tp + r);
            usum[ui] += secs;
            if (usum[ui] > tupd)
                tupd = usum[ui];
            for (int q = -1; q < mp->nst && !st; q++) {
                float *b = malloc(S->flat * sizeof(float) + 1);
                nv[ix * 3 + (size_t)(q + 1)] = b;
                if (!b) {
                    st = train_oom(err);
                    break;
                }
                char nm[64];
                snprintf(nm, sizeof nm, q < 0 ? "tern.mp.p.new" : "train.state%d.new.flat", q);
                if ((st = tern_rt_get_output(S->urt, nm, b, S->flat * sizeof(float), err)))
                    break;
                size_t at;
                if (train_first_nonfinite(b, S->flat, &at)) {
                    const char *wn = "?";
                    for (int i = 0; i < S->nw; i++)
                        if (at >= S->w[i].off && at < S->w[i].off + S->w[i].count)
                            wn = S->w[i].name;
                    st = tern_error_set(err, TERN_ERR_RANGE,
                                        "train: step %llu: the update of '%s' (stage %lld, tensor rank %lld) is not "
                                        "finite (%s)",
                                        (unsigned long long)step, wn, (long long)s, (long long)r,
                                        q < 0 ? "weight" : "optimizer state");
                }
            }
        }
    t->rt = NULL;
    for (int64_t s = 0; s < pp && !st && mp->zero; s++) /* ZeRO-1: the gathered weights and the state blocks */
        for (int64_t r = 0; r < tp && !st; r++)
            for (int q = -1; q < mp->nst && !st; q++) {
                size_t ix = (size_t)(s * tp + r), at;
                if (train_first_nonfinite(nv[ix * 3 + (size_t)(q + 1)], mp->stg[s].flat, &at))
                    st = tern_error_set(err, TERN_ERR_RANGE,
                                        "train: step %llu: stage %lld tensor rank %lld's updated %s is not finite "
                                        "(flat element %zu)",
                                        (unsigned long long)step, (long long)s, (long long)r,
                                        q < 0 ? "weights" : "optimizer state", at);
            }
    t->rt = NULL;
    /* the replicas of a key/value head, and the tensor ranks' copies of a weight the row-sharded programs read, updated
     * the same bytes (the all-reduce gave them one sum): checked */
    for (int64_t s = 0; s < pp && !st && (mp->nkvrep || mp->spmax); s++)
        for (int i = 0; i < mp->stg[s].nw && !st; i++) {
            const mp_wt *w = &mp->stg[s].w[i];
            int64_t R = w->sp ? tp : w->rep;
            for (int64_t r = 0; r < tp && !st && R > 1; r++)
                for (int q = -1; q < mp->nst && r % R; q++) {
                    size_t a = (size_t)(s * tp + r), b0 = (size_t)(s * tp + r - r % R);
                    if (memcmp(nv[a * 3 + (size_t)(q + 1)] + w->off, nv[b0 * 3 + (size_t)(q + 1)] + w->off,
                               w->count * sizeof(float))) {
                        st = tern_error_set(err, TERN_ERR_INVALID,
                                            "train: step %llu: internal: tensor ranks %lld and %lld hold different "
                                            "%s of the %s weight '%s' (stage %lld)",
                                            (unsigned long long)step, (long long)(r - r % R), (long long)r,
                                            q < 0 ? "values" : "optimizer state",
                                            w->sp ? "sequence-parallel" : "replicated key/value head", w->name,
                                            (long long)s);
                        break;
                    }
                }
        }
    if (!st)
        for (size_t ix = 0; ix < nsr; ix++)
            for (int q = -1; q < mp->nst; q++) {
                float **dst = q < 0 ? &mp->val[ix] : &mp->st[q][ix];
                free(*dst);
                *dst = nv[ix * 3 + (size_t)(q + 1)];
                nv[ix * 3 + (size_t)(q + 1)] = NULL;
            }
    for (size_t i = 0; i < nsr * 3; i++)
        free(nv[i]);
    free(nv);
    free(usum);
    if (st)
        return st;
    gather(t);
    return finish_step(t, tdp, tupd, loss, gn, info, err);
}

tern_status train_mp_collect(tern_trainer *t, tern_error *err)
{
    struct train_mp *mp = t->mp;
    if (!mp || !mp->tr || !mp->zero || t->o.timing_only)
        return TERN_OK;
    size_t nsr = (size_t)(mp->p.pp * mp->p.tp), *len = malloc(sizeof *len * nsr + 1);
    if (!len)
        return train_oom(err);
    for (size_t ix = 0; ix < nsr; ix++)
        len[ix] = mp->stg[ix / (size_t)mp->p.tp].flat;
    tern_status st = TERN_OK;
    for (int q = 0; q < mp->nst && !st; q++)
        st = train_mp_procs_blocks(mp->tr, mp->dlocal, mp->p.dp, mp->zshard, mp->st[q], len, nsr, err);
    free(len);
    if (!st)
        gather(t);
    return st;
}

void tern_train_mp_stats(const tern_trainer *t, tern_train_mp_info *out)
{
    memset(out, 0, sizeof *out);
    out->tp = out->pp = out->dp = out->micro = out->vpp = 1;
    const struct train_mp *mp = t->mp;
    if (!mp)
        return;
    out->tp = mp->p.tp;
    out->pp = mp->P;
    out->vpp = mp->V;
    out->dp = mp->p.dp;
    out->micro = mp->p.micro;
    out->pairs = mp->p.npairs;
    out->programs = mp->p.nseg;
    out->pipeline_seconds = mp->t_span;
    out->bubble_seconds = mp->t_span > mp->t_work ? mp->t_span - mp->t_work : 0;
    out->plain_pipeline_seconds = mp->V > 1 ? mp->t_span1 : mp->t_span;
    out->plain_bubble_seconds = mp->V > 1 ? (mp->t_span1 > mp->t_work1 ? mp->t_span1 - mp->t_work1 : 0)
                                          : out->bubble_seconds;
    out->dp_comm_seconds = mp->t_dp;
    out->update_seconds = mp->t_upd;
    out->p2p_seconds = mp->p2p_f;
    out->tied_seconds = mp->t_tied;
    out->kv_seconds = mp->t_kv;
    out->vocab = mp->p.vemb >= 0 ? mp->p.vocab : 0;
    out->vocab_head = mp->p.vhead >= 0;
    out->zero = mp->zero;
    out->sp = mp->p.sp;
    out->sp_seconds = mp->t_sp;
    out->zero_norm_seconds = mp->t_znorm;
    out->tp_act_seconds = mp->act_sec;
    out->tp_act_bytes = mp->act_bytes;
}
