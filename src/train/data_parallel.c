/* Data-parallel training over the NeuronCores of a machine (docs/training.md, "Data parallelism"). The step is
 * split where the gradient all-reduce goes: a gradient graph (forward, loss, backward: the loss partial and every
 * weight's gradient, step_graph.c's TRAIN_GRAPH_GRADS) that every rank runs on its rows of the batch, and an
 * update graph (TRAIN_GRAPH_UPDATE: the reduced gradients in, times a scale, then the norm, clipping and the
 * optimizer) that every rank runs on its own copy of the weights and state. Between them the ranks' gradients,
 * flattened into one buffer with the loss partial last, are all-reduced by tern's collectives (collective.h,
 * through the SPMD communicator), moving the real bytes in the algorithm's documented reduction order and timing
 * the schedule on the machine's fabric. Cross-entropy uses 1 / (the whole batch's counted rows) on every rank, so
 * the sum of the ranks' gradients is the whole batch's; MSE and a model's own loss are means per rank, scaled by
 * 1 / ranks after the sum. BatchNormalization in training mode normalises with each rank's (each chunk's) own
 * rows' statistics and keeps rank 0's running statistics, as PyTorch DDP's default (broadcast_buffers).
 *
 * The fixed reduction tree (dp_exact) splits the batch into K row chunks (K a power of two) whatever the rank
 * count: rank r holds chunks r, r + N, r + 2N, ..., sums them by recursive halving (distance K/2N first), and the
 * all-reduce is recursive halving-doubling (distance N/2 first), so each element is the same K-leaf tree (pairs
 * at distance K/2, K/4, ..., 1) on 1, 2, 4, ... K ranks: bit for bit the same step.
 *
 * ZeRO stage 1 (dp_zero.c) shards the optimizer state over the ranks. Every rank's weights are checked equal bit
 * for bit.
 *
 * Over MPI processes (tern_train_opts.transport) each process owns whole chips of the ranks (the fabric's
 * ownership) and runs, holds and joins collectives with only its own ranks; each phase over the ranks ends with one
 * reduction that takes the slowest rank's time and agrees on failures (train_dp_phase_end), so every number
 * printed, every bit and every error is the one-process run's. */
#include "dp_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int is_pow2(int64_t v)
{
    return v > 0 && (v & (v - 1)) == 0;
}

static void free_ranks(tern_trainer *t);

void train_dp_free(tern_trainer *t)
{
    struct train_dp *dp = t->dp;
    if (!dp)
        return;
    free_ranks(t);
    t->rt = dp->rt_upd; /* the steps point t->rt at each graph's runtime in turn; tern_train_free frees this one */
    tern_rt_free(dp->rt_grad);
    tern_rt_free(dp->rt_zero);
    tern_rt_free(dp->rt_znorm);
    tern_rt_free(dp->rt_zlamb);
    tern_exe_free(&dp->exe_zlamb);
    for (int64_t r = 0; r < dp->ranks; r++) {
        if (dp->seg)
            free(dp->seg[r]);
        if (dp->rdir)
            free(dp->rdir[r]);
        if (dp->lbuf)
            free(dp->lbuf[r]);
    }
    free(dp->seg);
    free(dp->rdir);
    free(dp->lbuf);
    free(dp->rsq);
    tern_exe_free(&dp->exe_grad);
    tern_exe_free(&dp->exe_zero);
    tern_exe_free(&dp->exe_znorm);
    tern_coll_comm_free(dp->comm);
    tern_fabric_free(dp->fab);
    for (int64_t i = 0; dp->leaf && i < dp->per_rank; i++)
        free(dp->leaf[i]);
    free(dp->leaf);
    for (int64_t r = 0; r < dp->ranks; r++) {
        if (dp->gbuf)
            free(dp->gbuf[r]);
        if (dp->wbuf)
            free(dp->wbuf[r]);
    }
    free(dp->gbuf);
    free(dp->wbuf);
    free(dp->tmp);
    free(dp->tmp2);
    free(dp->off);
    free(dp->synced_ptr);
    for (size_t i = 0; i < t->nw; i++) {
        if (dp->bn_out)
            free(dp->bn_out[i]);
        if (dp->bn_new)
            free(dp->bn_new[i]);
    }
    free(dp->bn_out);
    free(dp->bn_new);
    free(dp->local);
    free(dp);
    t->dp = NULL;
}

/* Frees the per-rank copies (the local ranks but r0 own theirs; ZeRO: every local rank owns its state shard). */
static void free_ranks(tern_trainer *t)
{
    struct train_dp *dp = t->dp;
    if (!dp || !dp->rk)
        return;
    for (int64_t r = 0; r < dp->ranks; r++) {
        dp_rank *k = &dp->rk[r];
        for (size_t i = 0; i < t->nw; i++) {
            if (r != dp->r0 && k->val)
                free(k->val[i]);
            for (int s = 0; s < 2; s++)
                if (k->st[s] && (r != dp->r0 || dp->zero) && (i == 0 || !dp->zero))
                    free(k->st[s][i]);
        }
        free(k->val);
        free(k->st[0]);
        free(k->st[1]);
    }
    free(dp->rk);
    dp->rk = NULL;
}

float *train_dp_val(tern_trainer *t, int64_t r, size_t i)
{
    return r == t->dp->r0 ? t->w[i].val : t->dp->rk[r].val[i];
}

static float *rank_state(tern_trainer *t, int64_t r, size_t i, int k)
{
    return r == t->dp->r0 ? t->w[i].state[k] : t->dp->rk[r].st[k][i];
}

/* The end of a phase that ran this process's ranks (docs/training.md, "Over MPI processes"): *secs becomes the
 * slowest rank's seconds over every process, and every process returns one verdict: when any failed, the failure
 * with the smallest key (the rank, in the order one process meets them), message and all. Non-negative doubles
 * order as their bit patterns, so the maximum of the bits is the maximum of the values, exactly. One process
 * (no transport): st as it is. */
tern_status train_dp_phase_end(const struct train_dp *dp, tern_status st, uint64_t key, double *secs, tern_error *err)
{
    const tern_transport *tr = dp->tr;
    if (!tr)
        return st;
    uint64_t v[2] = {0, st ? UINT64_MAX - key : 0};
    if (secs)
        memcpy(&v[0], secs, sizeof v[0]);
    tern_error e2;
    if (tr->allreduce(tr->ctx, v, 2, TERN_XOP_MAX, &e2))
        tr->abort(tr->ctx, e2.msg);
    if (secs)
        memcpy(secs, &v[0], sizeof v[0]);
    return v[1] ? tern_transport_agree(tr, st, key, err) : TERN_OK;
}

/* FNV-1a over 64-bit words (a multiply per word, not per byte: it runs over every weight each step). */
uint64_t train_dp_hash(uint64_t h, const void *p, size_t bytes)
{
    const unsigned char *b = p;
    for (; bytes >= 8; bytes -= 8, b += 8) {
        uint64_t w;
        memcpy(&w, b, 8);
        h = (h ^ w) * 0x100000001b3ull;
    }
    for (; bytes; bytes--, b++)
        h = (h ^ *b) * 0x100000001b3ull;
    return h;
}

/* Over MPI processes: every process's hash h of what its ranks hold must be the same (the ranks of one process
 * are compared element by element with its first rank; across processes, the first ranks by their hashes). */
tern_status train_dp_cross_check(const struct train_dp *dp, uint64_t h, uint64_t step, const char *what,
                               tern_error *err)
{
    const tern_transport *tr = dp->tr;
    if (!tr || tr->nprocs < 2)
        return TERN_OK;
    uint64_t v[2] = {h, ~h};
    tern_error e2;
    if (tr->allreduce(tr->ctx, v, 2, TERN_XOP_MAX, &e2))
        tr->abort(tr->ctx, e2.msg);
    if (v[0] == ~v[1])
        return TERN_OK;
    return tern_error_set(err, TERN_ERR_INVALID,
                          "train: step %llu: the ranks of the %u processes hold different %s (hashes %016llx .. "
                          "%016llx; every rank must equal rank 0)",
                          (unsigned long long)step, tr->nprocs, what, (unsigned long long)~v[1],
                          (unsigned long long)v[0]);
}

/* Live-code pruning: a node is kept when an output of the graph depends on it, an input when a kept node reads
 * it (the update graph's forward and backward, the data and targets, go). */
tern_status train_prune_dead(tern_graph *g, tern_error *err)
{
    unsigned char *live = calloc((size_t)g->n_values + 1, 1), *keep = calloc((size_t)g->n_nodes + 1, 1);
    if (!live || !keep) {
        free(live), free(keep);
        return train_oom(err);
    }
    for (int k = 0; k < g->n_outputs; k++)
        live[g->outputs[k]] = 1;
    for (int i = g->n_nodes - 1; i >= 0; i--) {
        const tern_graph_node *n = &g->nodes[i];
        for (int k = 0; k < n->n_outputs && !keep[i]; k++)
            keep[i] = n->outputs[k] >= 0 && live[n->outputs[k]];
        for (int k = 0; keep[i] && k < n->n_inputs; k++)
            if (n->inputs[k] >= 0)
                live[n->inputs[k]] = 1;
    }
    int ni = 0;
    for (int k = 0; k < g->n_inputs; k++) {
        int v = g->inputs[k];
        if (live[v])
            g->inputs[ni++] = v;
        else
            g->values[v].flags &= ~(unsigned)TERN_VALUE_INPUT;
    }
    g->n_inputs = ni;
    tern_status st = graph_compact(g, keep, err);
    free(live), free(keep);
    if (!st)
        st = graph_sort(g, err);
    if (!st)
        st = tern_graph_infer(g, err);
    return st;
}

static int exe_has_input(const tern_exe *x, const char *name)
{
    for (size_t i = 0; i < x->num_inputs; i++)
        if (!strcmp(tern_exe_io_name(&x->inputs[i]), name))
            return 1;
    return 0;
}

static int exe_has_output(const tern_exe *x, const char *name)
{
    for (size_t i = 0; i < x->num_outputs; i++)
        if (!strcmp(tern_exe_io_name(&x->outputs[i]), name))
            return 1;
    return 0;
}

tern_status train_compile_load(tern_trainer *t, tern_graph *g, tern_exe *exe, tern_rt **rt, double *flops,
                               uint64_t *hbm, const char *what, tern_error *err)
{
    tern_compile_opts co;
    tern_compile_opts_default(&co);
    co.machine = t->machine;
    co.matmul_dtype = t->o.matmul_dtype;
    tern_compile_report rep;
    tern_status st = tern_compile(g, &co, exe, &rep, err);
    if (st)
        return tern_error_prefix(err, "train: compiling the %s: ", what);
    if (flops)
        *flops = rep.model_flops;
    if (hbm)
        *hbm += rep.hbm_bytes;
    tern_rt_options ro;
    memset(&ro, 0, sizeof ro);
    ro.mode = t->o.timing_only ? TERN_MODE_TIMING_ONLY : TERN_MODE_FUNCTIONAL;
    return tern_rt_create(exe, t->machine, &ro, rt, err);
}

/* The gradient graph, built from the model again into a scratch trainer (as the micro-step of accumulation):
 * its weight records must match the update graph's. Under accumulation it is the micro-step graph itself (loss,
 * and gacc + g per weight: train.gacc.<w> in, train.gacc.new.<w> out), so a rank sums its micro-batches'
 * gradients on the device as the one-graph trainer does. */
static tern_status build_grad(tern_trainer *t, uint64_t *hbm, tern_error *err)
{
    struct train_dp *dp = t->dp;
    tern_trainer m;
    memset(&m, 0, sizeof m);
    m.o = t->o;
    m.o.grads_as_outputs = 0;
    m.path = t->path;
    m.dp_batchnorm = 1; /* BatchNormalization: the rank's rows' statistics, its running statistics' update out */
    tern_status st = tern_graph_load_onnx(t->path, &m.g, err);
    if (!st)
        st = train_bind_data(&m, err);
    if (!st)
        st = train_build_step_graph(&m, t->o.accumulate > 1 ? TRAIN_GRAPH_MICRO : TRAIN_GRAPH_GRADS, err);
    for (size_t i = 0; !st && i < t->nw; i++)
        if (i >= m.nw || strcmp(m.w[i].name, t->w[i].name) || m.w[i].trained != t->w[i].trained)
            st = tern_error_set(err, TERN_ERR_INVALID, "train: internal: the gradient graph's weights differ");
    /* the gradient graph reads the update graph's masks (the same model: the same names and shapes) */
    for (size_t k = 0; !st && k < m.ndrop; k++)
        if (k >= t->ndrop || strcmp(m.drop[k].input, t->drop[k].input) || m.drop[k].count != t->drop[k].count)
            st = tern_error_set(err, TERN_ERR_INVALID, "train: internal: the gradient graph's Dropouts differ");
    if (!st)
        st = train_prune_dead(m.g, err);
    if (!st)
        st = train_compile_load(t, m.g, &dp->exe_grad, &dp->rt_grad, &dp->flops_grad, hbm, "gradient graph", err);
    train_free_weights(m.w, m.nw);
    train_dropout_free(m.drop, m.ndrop);
    free(m.data_name);
    free(m.read_out);
    tern_graph_free(m.g);
    return st;
}

/* The graph's outputs: the values outs[0..no), marked as outputs (g has none before). */
tern_status train_set_outputs(tern_graph *g, const int *outs, int no, tern_error *err)
{
    g->outputs = malloc(sizeof(int) * (size_t)no);
    if (!g->outputs)
        return train_oom(err);
    for (int k = 0; k < no; k++) {
        g->outputs[g->n_outputs++] = outs[k];
        g->values[outs[k]].flags |= TERN_VALUE_OUTPUT;
    }
    return TERN_OK;
}

/* A new rank-1 float input of n elements named name; its value id, or -1 with a->failed set. */
int train_flat_input(ad_ctx *a, const char *name, int64_t n)
{
    tern_graph *g = a->g;
    int id = graph_add_value(g, name);
    int *in = id >= 0 ? realloc(g->inputs, sizeof(int) * (size_t)(g->n_inputs + 1)) : NULL;
    if (!in)
        return ad_fail(a, TERN_ERR_NOMEM, "train: out of memory");
    g->inputs = in;
    g->inputs[g->n_inputs++] = id;
    tern_graph_value *v = &g->values[id];
    v->flags = TERN_VALUE_INPUT;
    v->type = TERN_ELEM_FLOAT;
    v->rank = 1;
    v->dims[0] = n;
    if (ad_grow(a) < 0)
        return -1;
    return id;
}

/* An Identity of v named name (a program output's name); its value id, or -1. */
int train_name_value(ad_ctx *a, int v, const char *name)
{
    int y = ad_op1(a, "Identity", v);
    if (y < 0)
        return -1;
    char *nm = train_strdup(name);
    if (!nm)
        return ad_fail(a, TERN_ERR_NOMEM, "train: out of memory");
    free(a->g->values[y].name);
    a->g->values[y].name = nm;
    return y;
}

/* Every rank's copy made equal to t->w (the start, or after a checkpoint was loaded into t->w). */
static tern_status sync_ranks(tern_trainer *t, tern_error *err)
{
    struct train_dp *dp = t->dp;
    if (t->o.timing_only)
        return TERN_OK;
    int same = dp->rk && dp->synced_step == t->step;
    for (size_t i = 0; same && i < t->nw; i++)
        same = dp->synced_ptr[i] == t->w[i].val;
    if (same)
        return TERN_OK;
    int64_t r0 = dp->r0;
    if (!dp->rk) {
        dp->rk = calloc((size_t)dp->ranks, sizeof *dp->rk);
        if (!dp->rk)
            return train_oom(err);
        for (int64_t r = 0; r < dp->ranks; r++) {
            if (!dp->local[r])
                continue;
            dp_rank *k = &dp->rk[r];
            k->val = calloc(t->nw + 1, sizeof *k->val);
            k->st[0] = calloc(t->nw + 1, sizeof *k->st[0]);
            k->st[1] = calloc(t->nw + 1, sizeof *k->st[1]);
            if (!k->val || !k->st[0] || !k->st[1])
                return train_oom(err);
            for (size_t i = 0; i < t->nw; i++) {
                const train_weight *w = &t->w[i];
                if (r != r0 && !(k->val[i] = malloc(w->count * sizeof(float) + 1)))
                    return train_oom(err);
                for (int s = 0; s < w->n_state && r != r0 && !dp->zero; s++)
                    if (!(k->st[s][i] = malloc(w->count * sizeof(float) + 1)))
                        return train_oom(err);
            }
            for (int s = 0; s < 2 && dp->zero; s++)
                if (!(k->st[s][0] = calloc(dp->shard + 1, sizeof(float))))
                    return train_oom(err);
        }
    }
    for (int64_t r = 0; r < dp->ranks; r++)
        for (size_t i = 0; dp->local[r] && i < t->nw; i++) {
            const train_weight *w = &t->w[i];
            if (r != r0)
                memcpy(dp->rk[r].val[i], w->val, w->count * sizeof(float));
            for (int s = 0; s < w->n_state && r != r0 && !dp->zero; s++)
                memcpy(dp->rk[r].st[s][i], w->state[s], w->count * sizeof(float));
            /* ZeRO: rank r keeps elements [r*shard, (r+1)*shard) of the flat state */
            for (int s = 0; s < w->n_state && dp->zero && w->trained; s++)
                for (size_t e = 0; e < w->count; e++) {
                    size_t f = dp->off[i] + e;
                    if (f / dp->shard == (size_t)r)
                        dp->rk[r].st[s][0][f % dp->shard] = w->state[s][e];
                }
        }
    dp->synced_step = t->step;
    for (size_t i = 0; i < t->nw; i++)
        dp->synced_ptr[i] = t->w[i].val;
    return TERN_OK;
}

tern_status train_dp_create(tern_trainer *t, tern_error *err)
{
    tern_train_opts *o = &t->o;
    int64_t n = o->ranks < 1 ? 1 : o->ranks;
    int64_t k = o->dp_exact ? (o->dp_chunks > 0 ? o->dp_chunks : n) : n;
    if (o->accumulate > 1 && o->dp_exact)
        return tern_error_set(err, TERN_ERR_UNSUPPORTED,
                              "train: gradient accumulation (%lld micro-batches) with the fixed reduction tree "
                              "(--dp-exact) is not supported yet; use data parallelism without --dp-exact",
                              (long long)o->accumulate);
    if (o->dp_chunks > 0 && !o->dp_exact)
        return tern_error_set(err, TERN_ERR_INVALID, "train: %lld gradient chunks need the fixed reduction tree (--dp-exact)",
                              (long long)o->dp_chunks);
    if (o->dp_exact && (!is_pow2(n) || !is_pow2(k) || k % n))
        return tern_error_set(err, TERN_ERR_INVALID,
                              "train: the fixed reduction tree needs a power-of-two rank count and chunk count that the "
                              "ranks divide: %lld ranks, %lld chunks",
                              (long long)n, (long long)k);
    if (o->zero != 0 && o->zero != 1)
        return tern_error_set(err, TERN_ERR_UNSUPPORTED, "train: ZeRO stage %d (stage 1 is built)", o->zero);
    if (o->zero && n < 2)
        return tern_error_set(err, TERN_ERR_INVALID, "train: ZeRO-1 shards the optimizer state over ranks: %lld rank",
                              (long long)n);
    if (o->zero && o->bf16_weights)
        return tern_error_set(err, TERN_ERR_UNSUPPORTED,
                              "train: ZeRO-1 with pure BF16 weights (bf16-sr, bf16-rne) is not supported yet; use no "
                              "ZeRO or --precision fp32 or bf16");
    struct train_dp *dp = calloc(1, sizeof *dp);
    if (!dp)
        return train_oom(err);
    t->dp = dp;
    tern_exe_init(&dp->exe_grad);
    tern_exe_init(&dp->exe_zero);
    tern_exe_init(&dp->exe_znorm);
    tern_exe_init(&dp->exe_zlamb);
    dp->ranks = n;
    dp->chunks = k;
    dp->per_rank = k / n;
    dp->batch = o->batch;
    dp->exact = o->dp_exact;
    dp->zero = o->zero;
    /* the sum over ranks (MSE, a model's loss: means per rank) and over micro-batches becomes a mean */
    dp->gscale = (o->loss == TERN_LOSS_CROSS_ENTROPY ? 1.0 : 1.0 / (double)k) /
                 (double)(o->accumulate > 1 ? o->accumulate : 1);
    dp->algo = o->dp_exact ? TERN_ALGO_RDH : TERN_ALGO_AUTO;
    dp->algo_ran = dp->algo;
    if (!(dp->local = calloc((size_t)n, 1)))
        return train_oom(err);
    memset(dp->local, 1, (size_t)n);
    tern_status st;
    if (n > 1) {
        tern_fabric_opts fo;
        memset(&fo, 0, sizeof fo);
        tern_fabric *all = NULL;
        if ((st = tern_fabric_load(t->machine, &fo, &all, err)))
            return tern_error_prefix(err, "train: %lld data-parallel ranks on '%s': ", (long long)n, t->machine);
        unsigned have = tern_fabric_ranks(all);
        /* on a cluster the ranks fill the fewest instances that hold them (equally), as the batch split's do */
        unsigned nodes = (uint64_t)n <= have ? tern_fabric_fewest_nodes(all, (unsigned)n) : 1;
        tern_fabric_free(all);
        if ((uint64_t)n > have)
            return tern_error_set(err, TERN_ERR_RANGE,
                                  "train: %lld data-parallel ranks (--cores): '%s' has %u NeuronCores; give at most "
                                  "that many, or a larger machine (--machine)",
                                  (long long)n, t->machine, have);
        fo.nodes = nodes;
        fo.ranks = (unsigned)n;
        if ((st = tern_fabric_load(t->machine, &fo, &dp->fab, err)))
            return tern_error_prefix(err, "train: %lld data-parallel ranks on '%s': ", (long long)n, t->machine);
        /* over MPI processes: each owns whole chips with their ranks (more processes than chips: refused) */
        if (o->transport && (st = tern_fabric_set_transport(dp->fab, o->transport, err)))
            return tern_error_prefix(err, "train: %lld data-parallel ranks (--cores) over MPI processes: ",
                                     (long long)n);
        if (o->transport) {
            dp->tr = o->transport;
            dp->r0 = -1;
            for (int64_t r = 0; r < n; r++) {
                dp->local[r] = (unsigned char)tern_fabric_rank_is_local(dp->fab, (unsigned)r);
                if (dp->local[r] && dp->r0 < 0)
                    dp->r0 = r;
            }
            TERN_ASSERT(dp->r0 >= 0); /* tern_fabric_set_transport gives every process a chip with ranks */
        }
        if ((st = tern_coll_comm_create(dp->fab, &dp->comm, err)))
            return st;
    }
    if (o->batch % k)
        return tern_error_set(err, TERN_ERR_INVALID,
                              "train: batch %lld does not split over %lld %s (%lld rows and %lld over)", (long long)o->batch,
                              (long long)k, o->dp_exact ? "gradient chunks" : "data-parallel ranks",
                              (long long)(o->batch / k), (long long)(o->batch % k));
    o->batch /= k; /* the compiled graphs see one chunk */
    uint64_t hbm = 0;
    /* BatchNormalization as PyTorch DDP's default: every rank normalises with its own rows' batch statistics
     * (the fixed tree: each chunk's), and the running statistics kept are rank 0's (chunk 0's), which DDP
     * broadcasts to the other ranks */
    t->dp_batchnorm = 1;
    if ((st = tern_graph_load_onnx(t->path, &t->g, err)) || (st = train_bind_data(t, err)) ||
        (st = train_build_step_graph(t, TRAIN_GRAPH_UPDATE, err)))
        return st;
    t->nodes = (size_t)t->g->n_nodes;
    if ((st = train_prune_dead(t->g, err)) || (st = build_grad(t, &hbm, err)))
        return st;
    if (!dp->zero && (st = train_compile_load(t, t->g, &t->exe, &dp->rt_upd, NULL, &hbm, "update graph", err)))
        return st;
    t->rt = dp->rt_upd;
    dp->off = calloc(t->nw + 1, sizeof *dp->off);
    dp->synced_ptr = calloc(t->nw + 1, sizeof *dp->synced_ptr);
    dp->bn_out = calloc(t->nw + 1, sizeof *dp->bn_out);
    dp->bn_new = calloc(t->nw + 1, sizeof *dp->bn_new);
    if (!dp->off || !dp->synced_ptr || !dp->bn_out || !dp->bn_new)
        return train_oom(err);
    for (size_t i = 0; i < t->nw; i++) {
        const train_weight *w = &t->w[i];
        char nm[512];
        snprintf(nm, sizeof nm, "train.new.%s", w->name);
        if (w->trained || !exe_has_output(&dp->exe_grad, nm))
            continue;
        if (!(dp->bn_out[i] = train_strdup(nm)) || !(dp->bn_new[i] = calloc(w->count + 1, sizeof(float))))
            return train_oom(err);
    }
    int nst = 0;
    for (size_t i = 0; i < t->nw; i++) {
        train_weight *w = &t->w[i];
        t->state_bytes += (uint64_t)w->count * 4 * (uint64_t)(1 + w->n_state);
        dp->state_total += (uint64_t)w->count * 4 * (uint64_t)w->n_state;
        if (w->trained) {
            dp->off[i] = dp->total;
            dp->total += w->count;
            nst = w->n_state;
        }
    }
    dp->flat = dp->total + 1;
    if (dp->zero) {
        dp->shard = (dp->flat + (size_t)n - 1) / (size_t)n;
        if (dp->shard > DP_ROW) /* whole rows of the shard graph's two-level norm reduction */
            dp->shard = (dp->shard + DP_ROW - 1) / DP_ROW * DP_ROW;
        dp->count = dp->shard * (size_t)n;
        dp->state_rank = (uint64_t)dp->shard * 4 * (uint64_t)nst;
        for (size_t i = 0; i < t->nw; i++)
            dp->ntr += t->w[i].trained != 0;
        if (o->optimizer == TERN_OPT_LAMB) {
            if ((st = train_dp_build_zlamb(t, 1, &hbm, err)) || (st = train_dp_build_zlamb(t, 2, &hbm, err)))
                return st;
        } else if ((st = train_dp_build_zero(t, 0, &hbm, err))) {
            return st;
        }
        if (o->clip_norm > 0 && (st = train_dp_build_zero(t, 1, &hbm, err)))
            return st;
        t->rt = dp->rt_zero;
    } else {
        dp->count = dp->flat;
        dp->state_rank = dp->state_total;
    }
    dp->grad_bytes = (uint64_t)dp->count * 4;
    t->flops = dp->flops_grad * (double)k * (double)(o->accumulate > 1 ? o->accumulate : 1);
    t->hbm = hbm;
    tern_core_config cfg;
    if ((st = tern_core_config_load(t->machine, &cfg, err)))
        return st;
    t->peak = 2.0 * cfg.pe_rows * cfg.pe_cols * cfg.timing.clock_hz[TERN_ENGINE_TENSOR];
    if (cfg.hbm_bytes && hbm > cfg.hbm_bytes)
        return tern_error_set(err, TERN_ERR_RANGE,
                              "train: a data-parallel rank needs %llu bytes of HBM (its gradient and update programs); "
                              "%s gives a core %llu",
                              (unsigned long long)hbm, t->machine, (unsigned long long)cfg.hbm_bytes);
    size_t sc = t->target_count > t->read_count ? t->target_count : t->read_count;
    t->scratch = calloc(sc + 1, sizeof(float));
    if (!t->scratch)
        return train_oom(err);
    if (!o->timing_only) {
        dp->leaf = calloc((size_t)dp->per_rank, sizeof *dp->leaf);
        dp->gbuf = calloc((size_t)n, sizeof *dp->gbuf);
        dp->wbuf = dp->zero ? calloc((size_t)n, sizeof *dp->wbuf) : NULL;
        dp->tmp = calloc(dp->count + dp->flat + 1, sizeof(float));
        dp->tmp2 = calloc(dp->count + 1, sizeof(float));
        if (!dp->leaf || !dp->gbuf || (dp->zero && !dp->wbuf) || !dp->tmp || !dp->tmp2)
            return train_oom(err);
        for (int64_t i = 0; i < dp->per_rank; i++)
            if (!(dp->leaf[i] = calloc(dp->flat + 1, sizeof(float))))
                return train_oom(err);
        for (int64_t r = 0; r < n; r++) {
            if (!dp->local[r])
                continue;
            if (!(dp->gbuf[r] = calloc(dp->count + 1, sizeof(float))))
                return train_oom(err);
            if (dp->zero && !(dp->wbuf[r] = calloc((size_t)n * (dp->shard + 1) + 1, sizeof(float))))
                return train_oom(err);
        }
        if (dp->zero && o->optimizer == TERN_OPT_LAMB) {
            size_t S = dp->shard, T = dp->ntr;
            dp->seg = calloc((size_t)n, sizeof *dp->seg);
            dp->rdir = calloc((size_t)n, sizeof *dp->rdir);
            dp->lbuf = calloc((size_t)n, sizeof *dp->lbuf);
            dp->rsq = calloc((size_t)n, sizeof *dp->rsq);
            if (!dp->seg || !dp->rdir || !dp->lbuf || !dp->rsq)
                return train_oom(err);
            for (int64_t r = 0; r < n; r++) {
                if (!dp->local[r])
                    continue;
                if (!(dp->seg[r] = calloc(S * T + 1, sizeof(float))) || !(dp->rdir[r] = calloc(S + 1, sizeof(float))) ||
                    !(dp->lbuf[r] = calloc((size_t)n * 2 * T + 1, sizeof(float))))
                    return train_oom(err);
                size_t ti = 0;
                for (size_t i = 0; i < t->nw; i++) {
                    if (!t->w[i].trained)
                        continue;
                    for (size_t e = 0; e < t->w[i].count; e++) {
                        size_t f = dp->off[i] + e;
                        if (f >= (size_t)r * S && f < (size_t)(r + 1) * S)
                            dp->seg[r][(f - (size_t)r * S) * T + ti] = 1.0f;
                    }
                    ti++;
                }
            }
        }
        if ((st = sync_ranks(t, err)))
            return st;
    }
    return TERN_OK;
}

/* n floats into input `name` of rt (pure BF16: a BF16 weight or state converted, exactly: it holds BF16 values) */
tern_status train_dp_set_in(tern_trainer *t, tern_rt *rt, const char *name, const float *v, size_t n, tern_error *err)
{
    t->rt = rt;
    return train_set_f(t, name, v, n, err);
}

tern_status train_dp_collective(tern_trainer *t, tern_coll_op op, uint64_t count, float **bufs, double *secs,
                                  tern_error *err)
{
    struct train_dp *dp = t->dp;
    if (dp->ranks < 2)
        return TERN_OK;
    tern_coll_desc d;
    memset(&d, 0, sizeof d);
    d.op = op;
    d.reduce = TERN_REDUCE_SUM;
    d.dtype = TERN_DTYPE_FP32;
    d.count = count;
    d.algo = dp->algo;
    tern_status st = TERN_OK;
    for (int64_t r = 0; r < dp->ranks && !st; r++) /* over MPI processes: each joins its own ranks */
        if (dp->local[r])
            st = tern_coll_comm_join(dp->comm, (unsigned)r, &d, bufs ? bufs[r] : NULL, bufs ? bufs[r] : NULL, err);
    tern_coll_result res;
    if (!st)
        st = tern_coll_comm_run(dp->comm, &res, err);
    if (st)
        return tern_error_prefix(err, "train: step %llu: gradient %s: ", (unsigned long long)t->step + 1,
                                 tern_coll_op_name(op));
    if (op != TERN_COLL_ALL_GATHER)
        dp->algo_ran = res.algo;
    *secs += (double)res.time_ps * 1e-12;
    return TERN_OK;
}

/* Rank r's chunks through the gradient graph, summed by recursive halving into dp->gbuf[r] (loss last). */
/* gacc names of weight w: in (k 0) or out (k 1) of the micro-step graph (step_graph.c's names) */
static void gacc_name(const train_weight *w, int k, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s%s", k ? "train.gacc.new." : "train.gacc.", w->name);
}

/* Rank r's gradient of its rows (x and labels at the step's or, under accumulation, micro-batch m's start) into
 * dp->gbuf[r]. Under accumulation (one chunk per rank: no fixed tree) gbuf[r] carries the rank's sum of
 * micro-batches 0..m-1 (zeros for m = 0): it goes in as gacc and the graph's gacc + g comes back; the loss partials
 * add on the host. */
static tern_status rank_grads(tern_trainer *t, int64_t r, const void *x, size_t xs, const void *labels, size_t ls,
                              const float *inv, int64_t m, double *secs, tern_error *err)
{
    struct train_dp *dp = t->dp;
    size_t lsz = t->o.loss == TERN_LOSS_CROSS_ENTROPY ? sizeof(int64_t) : sizeof(float);
    uint64_t step = t->step + 1;
    tern_status st = TERN_OK;
    int timing = t->o.timing_only;
    t->rt = dp->rt_grad;
    const tern_exe *xe = tern_rt_exe(dp->rt_grad);
    int acc = t->o.accumulate > 1;
    char nm[512];
    for (int64_t i = 0; i < dp->per_rank && !st; i++) {
        int64_t j = r + i * dp->ranks; /* chunk j: rows [j*b, (j+1)*b) of the step's batch */
        if (!timing) {
            st = train_feed_rows(t, x ? (const char *)x + (size_t)j * xs : NULL, xs,
                                  labels ? (const char *)labels + (size_t)j * ls * lsz : NULL, ls, step, inv, err);
            for (size_t w = 0; w < t->nw && !st; w++)
                if (exe_has_input(xe, t->w[w].name)) /* micro-batch m > 0: rank 0's running statistics so far */
                    st = train_dp_set_in(t, dp->rt_grad, t->w[w].name,
                                r == 0 && m > 0 && dp->bn_out[w] ? dp->bn_new[w] : train_dp_val(t, r, w), t->w[w].count,
                                err);
            if (acc && m == 0)
                memset(dp->gbuf[r], 0, dp->count * sizeof(float));
            for (size_t w = 0; acc && w < t->nw && !st; w++)
                if (t->w[w].trained) {
                    gacc_name(&t->w[w], 0, nm, sizeof nm);
                    st = train_dp_set_in(t, dp->rt_grad, nm, dp->gbuf[r] + dp->off[w], t->w[w].count, err);
                }
        }
        if (!st) /* chunk j of micro-batch m: block m K + j of the step's rows, whichever rank runs it */
            st = train_feed_masks(t, dp->rt_grad, step, m * dp->chunks + j, 0, err);
        tern_run_stats rs;
        t->rt = dp->rt_grad;
        train_set_rounding(t, step, m * dp->chunks + j); /* chunk j's seed whichever rank runs it */
        if (st || (st = tern_rt_execute(dp->rt_grad, &rs, err)))
            break;
        *secs += (double)rs.time_ps * 1e-12;
        if (timing)
            continue;
        float *leaf = dp->leaf[i], lm = 0, lsum = acc ? dp->gbuf[r][dp->total] : 0;
        st = tern_rt_get_output(dp->rt_grad, TRAIN_LOSS, acc ? &lm : &leaf[dp->total], sizeof(float), err);
        if (acc)
            leaf[dp->total] = lsum + lm; /* the micro-batches' loss partials, in order */
        for (size_t w = 0; w < t->nw && !st; w++)
            if (t->w[w].trained) {
                if (acc)
                    gacc_name(&t->w[w], 1, nm, sizeof nm);
                st = tern_rt_get_output(dp->rt_grad, acc ? nm : t->w[w].acc_in, leaf + dp->off[w],
                                        t->w[w].count * sizeof(float), err);
            }
        /* BatchNormalization: rank 0's first chunk updates the running statistics kept (DDP's rank 0 buffers) */
        for (size_t w = 0; r == 0 && i == 0 && w < t->nw && !st; w++)
            if (dp->bn_out[w]) {
                t->rt = dp->rt_grad;
                st = train_get_f(t, dp->bn_out[w], dp->bn_new[w], t->w[w].count, err);
            }
    }
    if (st)
        return tern_error_prefix(err, "train: step %llu: rank %lld: ", (unsigned long long)step, (long long)r);
    if (timing)
        return TERN_OK;
    /* the fixed tree's local levels: leaves i and i + d for d = per_rank / 2, ..., 1 (chunks K/2, ..., N apart) */
    for (int64_t d = dp->per_rank / 2; d >= 1; d /= 2)
        for (int64_t i = 0; i < d; i++) {
            float *a = dp->leaf[i];
            const float *b = dp->leaf[i + d];
            for (size_t e = 0; e < dp->flat; e++)
                a[e] = a[e] + b[e];
        }
    memcpy(dp->gbuf[r], dp->leaf[0], dp->flat * sizeof(float));
    memset(dp->gbuf[r] + dp->flat, 0, (dp->count - dp->flat) * sizeof(float));
    return TERN_OK;
}

tern_status train_dp_rank_differs(tern_trainer *t, int64_t r, const char *what, const float *a, const float *b, size_t n,
                                tern_error *err)
{
    for (size_t e = 0; e < n; e++)
        if (memcmp(&a[e], &b[e], sizeof(float)))
            return tern_error_set(err, TERN_ERR_INVALID,
                                  "train: step %llu: rank %lld's %s differs from rank 0's at element %zu (%.9g vs %.9g)",
                                  (unsigned long long)t->step + 1, (long long)r, what, e, (double)a[e], (double)b[e]);
    return TERN_OK;
}

/* Non-ZeRO: every rank runs the update graph on its own weights, state and reduced gradient. nv[(r*nw + i)*3 + k]
 * receives rank r's new weight (k 0) and state (k 1, 2); each is compared with the process's first rank r0's (rank 0
 * in one process). */
static tern_status update_full(tern_trainer *t, float **nv, double *gn, double *secs, tern_error *err)
{
    struct train_dp *dp = t->dp;
    uint64_t step = t->step + 1;
    tern_status st = TERN_OK;
    tern_rt *rt = dp->rt_upd;
    t->rt = rt;
    int64_t r0 = dp->r0, fr = 0; /* fr: the rank that failed */
    double worst = 0;
    for (int64_t r = r0; r < dp->ranks && !st; r++) {
        if (!dp->local[r])
            continue;
        fr = r;
        double lr;
        if (!t->o.timing_only) {
            st = train_set_step_scalars(t, step, &lr, err);
            if (!st)
                st = train_dp_set_in(t, rt, TRAIN_GSCALE, (float[]){(float)dp->gscale}, 1, err);
            for (size_t i = 0; i < t->nw && !st; i++) {
                train_weight *w = &t->w[i];
                if (!w->trained)
                    continue;
                st = train_dp_set_in(t, rt, w->name, train_dp_val(t, r, i), w->count, err);
                for (int k = 0; k < w->n_state && !st; k++)
                    st = train_dp_set_in(t, rt, w->state_in[k], rank_state(t, r, i, k), w->count, err);
                if (!st)
                    st = train_dp_set_in(t, rt, w->acc_in, dp->gbuf[r] + dp->off[i], w->count, err);
            }
        }
        tern_run_stats rs;
        t->rt = rt;
        train_set_rounding(t, step, dp->chunks); /* every rank's update draws the same stochastic rounding */
        if (st || (st = tern_rt_execute(rt, &rs, err)))
            break;
        double s = (double)rs.time_ps * 1e-12;
        if (s > worst)
            worst = s;
        if (t->o.timing_only) /* the ranks run one program on no data: the first stands for all */
            break;
        float g;
        if ((st = tern_rt_get_output(rt, TRAIN_GNORM, &g, sizeof g, err)))
            break;
        if (r == r0)
            *gn = g;
        else if (memcmp(&g, &(float){(float)*gn}, sizeof g))
            st = tern_error_set(err, TERN_ERR_INVALID, "train: step %llu: rank %lld's gradient norm %.9g differs from "
                                "rank 0's %.9g", (unsigned long long)step, (long long)r, (double)g, *gn);
        if (!st && !isfinite(g))
            st = tern_error_set(err, TERN_ERR_RANGE, "train: step %llu: the gradient norm is not finite (%g)",
                                (unsigned long long)step, (double)g);
        if (!st && r == r0)
            for (size_t i = 0; i < t->nw && !st; i++)
                if (t->w[i].grad)
                    st = tern_rt_get_output(rt, t->w[i].grad_out, t->w[i].grad, t->w[i].count * sizeof(float), err);
        for (size_t i = 0; i < t->nw && !st; i++) {
            train_weight *w = &t->w[i];
            if (!w->trained)
                continue;
            for (int k = 0; k <= w->n_state && !st; k++) {
                float *b = malloc(w->count * sizeof(float) + 1);
                nv[((size_t)r * t->nw + i) * 3 + (size_t)k] = b;
                if (!b) {
                    st = train_oom(err);
                    break;
                }
                const char *nm = k == 0 ? w->out_name : w->state_out[k - 1];
                size_t at;
                t->rt = rt;
                if ((st = train_get_f(t, nm, b, w->count, err)))
                    break;
                if (train_first_nonfinite(b, w->count, &at))
                    st = tern_error_set(err, TERN_ERR_RANGE,
                                        "train: step %llu: '%s' is not finite (element %zu = %g); gradient norm %g",
                                        (unsigned long long)step, nm, at, (double)b[at], *gn);
                if (!st && r != r0)
                    st = train_dp_rank_differs(t, r, nm, b, nv[((size_t)r0 * t->nw + i) * 3 + (size_t)k], w->count, err);
            }
        }
    }
    if ((st = train_dp_phase_end(dp, st, (uint64_t)fr, &worst, err)))
        return st;
    if (worst > *secs)
        *secs = worst;
    return TERN_OK;
}

tern_status train_dp_step(tern_trainer *t, const void *x, size_t x_bytes, const void *labels, size_t label_count,
                          tern_train_step_info *info, tern_error *err)
{
    struct train_dp *dp = t->dp;
    uint64_t step = t->step + 1;
    int64_t k = dp->chunks;
    int timing = t->o.timing_only;
    int64_t r0 = dp->r0;
    tern_status st;
    if ((st = train_dp_phase_end(dp, sync_ranks(t, err), 0, NULL, err)))
        return st;
    size_t xs = t->data_bytes, ls = 0; /* one chunk's packed rows (train_internal.h) */
    int64_t A = t->o.accumulate > 1 ? t->o.accumulate : 1; /* micro-batches of k chunks each */
    if (!timing) {
        if (t->nin && x_bytes != t->data_bytes * (size_t)(k * A))
            return tern_error_set(err, TERN_ERR_INVALID, "train: step %llu: %zu rows of data given, %lld expected (batch)",
                                  (unsigned long long)step, x_bytes / t->row_bytes, (long long)(dp->batch * A));
        if (t->o.loss != TERN_LOSS_OUTPUT && (!labels || label_count % (size_t)(k * A)))
            return tern_error_set(err, TERN_ERR_INVALID,
                                  "train: step %llu: %zu labels do not split over %lld chunks of the batch",
                                  (unsigned long long)step, labels ? label_count : 0, (long long)(k * A));
        ls = label_count / (size_t)(k * A);
    }
    size_t lsz = t->o.loss == TERN_LOSS_CROSS_ENTROPY ? sizeof(int64_t) : sizeof(float);
    double compute = 0, comm = 0, upd = 0;
    /* accumulation: micro-batch m is rows [m B, (m + 1) B) of the step's A B, split over the ranks as a step's
     * batch is; each rank's programs run one after another, so the compute is the slowest rank's sum */
    for (int64_t m = 0; m < A; m++) {
        const void *xm = x ? (const char *)x + (size_t)(m * k) * xs : NULL;
        const void *lm = labels ? (const char *)labels + (size_t)(m * k) * ls * lsz : NULL;
        float inv = 0, *invp = NULL;
        if (!timing && t->o.loss == TERN_LOSS_CROSS_ENTROPY) { /* 1 / counted rows of the (micro-)batch */
            size_t counted = 0;
            for (size_t i = 0; i < ls * (size_t)k; i++)
                counted += ((const int64_t *)lm)[i] != t->o.ignore_index;
            inv = counted ? 1.0f / (float)counted : 0.0f;
            invp = &inv;
        }
        /* this process's ranks (timing-only: its first: one rank's program stands for all, the same, no data) */
        double worst = 0;
        int64_t fr = r0;
        for (int64_t r = r0; r < dp->ranks && !st; r++) {
            if (!dp->local[r])
                continue;
            double s = 0;
            fr = r;
            st = rank_grads(t, r, xm, xs, lm, ls, invp, m, &s, err);
            if (s > worst)
                worst = s;
            if (timing)
                break;
        }
        if ((st = train_dp_phase_end(dp, st, (uint64_t)fr, &worst, err)))
            return st;
        compute += worst;
    }
    if ((st = train_dp_collective(t, dp->zero ? TERN_COLL_REDUCE_SCATTER : TERN_COLL_ALL_REDUCE, dp->count,
                             timing ? NULL : dp->gbuf, &comm, err)))
        return st;
    size_t nslot = (size_t)dp->ranks * t->nw * 3;
    float **nv = calloc(nslot + 1, sizeof *nv), **nzs = calloc((size_t)dp->ranks * 2 + 1, sizeof *nzs);
    if (!nv || !nzs) {
        free(nv), free(nzs);
        return train_oom(err);
    }
    double gn = NAN;
    float loss = timing ? NAN : dp->gbuf[r0][dp->total]; /* non-ZeRO: every rank holds the reduced loss */
    if (!timing && !isfinite(loss) && !dp->zero)
        st = tern_error_set(err, TERN_ERR_RANGE, "train: step %llu: the loss is not finite (%g)",
                            (unsigned long long)step, (double)loss);
    if (!st)
        st = dp->zero ? train_dp_update_zero(t, nv, nzs, &gn, &loss, &upd, &comm, err) : update_full(t, nv, &gn, &upd, err);
    if (!st && !timing && !isfinite(loss))
        st = tern_error_set(err, TERN_ERR_RANGE, "train: step %llu: the loss is not finite (%g)",
                            (unsigned long long)step, (double)loss);
    if (!st && !timing && dp->tr && dp->tr->nprocs > 1) { /* the first ranks of the processes agree too */
        uint64_t h = 0xcbf29ce484222325ull;
        for (size_t i = 0; i < t->nw; i++)
            for (int q = 0; q < 3; q++) {
                const float *v = nv[((size_t)r0 * t->nw + i) * 3 + (size_t)q];
                if (v)
                    h = train_dp_hash(h, v, t->w[i].count * sizeof(float));
            }
        st = train_dp_cross_check(dp, h, step, dp->zero ? "weights" : "weights and optimizer state", err);
    }
    if (!st && !timing) { /* commit: every rank takes its own new weights and state */
        for (int64_t r = 0; r < dp->ranks; r++)
            for (size_t i = 0; dp->local[r] && i < t->nw; i++)
                for (int q = 0; q < 3; q++) {
                    float **src = &nv[((size_t)r * t->nw + i) * 3 + (size_t)q];
                    if (!*src)
                        continue;
                    float **dst = q == 0 ? (r == r0 ? &t->w[i].val : &dp->rk[r].val[i])
                                         : (r == r0 ? &t->w[i].state[q - 1] : &dp->rk[r].st[q - 1][i]);
                    free(*dst);
                    *dst = *src;
                    *src = NULL;
                }
        for (int64_t r = 0; dp->zero && r < dp->ranks; r++)
            for (int q = 0; q < 2; q++)
                if (nzs[r * 2 + q]) {
                    free(dp->rk[r].st[q][0]);
                    dp->rk[r].st[q][0] = nzs[r * 2 + q];
                    nzs[r * 2 + q] = NULL;
                }
        /* ZeRO: the whole state, gathered on the host for checkpoints (no device traffic is modelled for it);
         * over MPI processes, the shards of this process's ranks (tern_train_collect brings the others) */
        for (size_t i = 0; dp->zero && i < t->nw; i++) {
            train_weight *w = &t->w[i];
            for (int q = 0; q < w->n_state && w->trained; q++)
                for (size_t e = 0; e < w->count; e++) {
                    size_t f = dp->off[i] + e;
                    if (dp->local[f / dp->shard])
                        w->state[q][e] = dp->rk[f / dp->shard].st[q][0][f % dp->shard];
                }
        }
        /* BatchNormalization's running statistics: rank 0's, broadcast to every rank (DDP's buffers); over MPI
         * processes rank 0's process sends them to the others first */
        for (size_t i = 0; i < t->nw && !st; i++)
            if (dp->bn_out[i])
                st = tern_transport_bcast(dp->tr, 0, dp->bn_new[i], t->w[i].count * sizeof(float), err);
        for (size_t i = 0; i < t->nw && !st; i++)
            for (int64_t r = 0; dp->bn_out[i] && r < dp->ranks; r++)
                if (dp->local[r])
                    memcpy(train_dp_val(t, r, i), dp->bn_new[i], t->w[i].count * sizeof(float));
        dp->synced_step = step;
        for (size_t i = 0; i < t->nw; i++)
            dp->synced_ptr[i] = t->w[i].val;
    }
    for (size_t i = 0; i < nslot; i++)
        free(nv[i]);
    for (int64_t i = 0; i < dp->ranks * 2; i++)
        free(nzs[i]);
    free(nv);
    free(nzs);
    if (st)
        return st;
    dp->t_compute = compute;
    dp->t_comm = comm;
    dp->t_update = upd;
    tern_train_step_info in;
    memset(&in, 0, sizeof in);
    in.step = step;
    in.lr = tern_train_lr(&t->o, step);
    in.step_seconds = compute + comm + upd;
    in.samples_per_s = in.step_seconds > 0 ? (double)(dp->batch * A) / in.step_seconds : 0;
    in.mfu = t->peak > 0 && in.step_seconds > 0
                 ? t->flops / (t->peak * (double)dp->ranks * in.step_seconds) * 100
                 : 0;
    in.loss = timing ? NAN : (double)(loss * (float)dp->gscale);
    in.grad_norm = gn;
    t->step = step;
    if (info)
        *info = in;
    return TERN_OK;
}

void tern_train_dp_stats(const tern_trainer *t, tern_train_dp_info *out)
{
    memset(out, 0, sizeof *out);
    const struct train_dp *dp = t->dp;
    if (!dp) {
        out->ranks = out->chunks = 1;
        out->algorithm = "none";
        out->state_bytes_per_rank = out->state_bytes_total = t->state_bytes;
        return;
    }
    out->ranks = dp->ranks;
    out->chunks = dp->chunks;
    out->zero = dp->zero;
    out->algorithm = dp->ranks > 1 ? tern_coll_algo_name(dp->algo_ran) : "none";
    out->grad_bytes = dp->grad_bytes;
    out->state_bytes_per_rank = dp->state_rank;
    out->state_bytes_total = dp->state_total;
    out->compute_seconds = dp->t_compute;
    out->comm_seconds = dp->t_comm;
    out->update_seconds = dp->t_update;
}

const float *tern_train_rank_weight(const tern_trainer *t, unsigned rank, size_t i, size_t *count)
{
    if (i >= t->nw)
        return NULL;
    if (!t->dp)
        return rank == 0 ? tern_train_weight(t, i, count) : NULL;
    if (rank >= t->dp->ranks || !t->dp->local[rank])
        return NULL;
    if (rank == t->dp->r0)
        return tern_train_weight(t, i, count);
    if (!t->dp->rk)
        return NULL;
    *count = t->w[i].count;
    return t->dp->rk[rank].val[i];
}
