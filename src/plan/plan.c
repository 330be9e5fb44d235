/* tern_plan_run: the layout search and each layout's prediction (docs/planner.md). Layouts TP x PP x DP that fill
 * the cluster's ranks (TP inside an instance, dividing the query heads and the MLP width; PP dividing the
 * layers), with micro-batch size, ZeRO-1 and full activation recomputation, are checked against a rank's HBM
 * part by part. For the fitting ones the step is composed from simulations:
 *  - one layer's forward and backward graphs per distinct (TP, micro-batch) shape, compiled and run timing-only
 *    (layer_sim.c; cached, so pipeline depth, ZeRO and data-parallel degree cost no new simulation), and the
 *    embedding + LM head + loss graphs likewise;
 *  - the collectives timed by tern_collective_time over the fabric with every group of the layout running at
 *    once (TP all-gathers and reduce-scatters of sequence parallelism, the PP send/receive as a permute, the DP
 *    gradient all-reduce, or ZeRO-1's reduce-scatter and all-gather), cached by operation, size and groups;
 *  - the 1F1B schedule over the micro-batches (pipeline.c).
 * Stage time per micro-batch = layers per stage x (layer time + its TP collectives), plus the head on the last
 * stage and the embedding on the first. Step = schedule makespan + the DP collective's exposed part (the part
 * the last micro-batch's backward cannot hide) + the optimizer update. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "plan/plan_internal.h"
#include "tern/arch.h"
#include "tern/collective.h"
#include "tern/fabric.h"

#define MAX_SHAPES 64
#define MAX_COLLS 512
#define MAX_PIECES 256

typedef struct {
    int tp, ep;
    int64_t mb;
    int done;
    tern_status st;
    tern_error err;
    double lf, lb, hf, hb; /* layer fwd/bwd, head fwd/bwd */
    double af;             /* the attention core's forward in one layer (its block pairs): selective recompute */
    uint64_t ws;           /* the largest compiled graph's HBM footprint: a rank's transient workspace */
    plan_compose comp;
    int piece[6];
} shape_entry;

typedef struct {
    plan_graph_kind kind;
    int tp, ep;
    int64_t mb, seq;
    int done;
    tern_status st;
    tern_error err;
    double sec;
    uint64_t ws;
    uint8_t *onnx; /* the graph's bytes, kept until the simulations are done */
    size_t len;
    int alias;     /* index of an earlier piece with the same bytes (simulated once), or -1 */
    double cost;   /* a rough work estimate: the order the host threads take the pieces in */
} piece;

typedef struct {
    tern_coll_op op;
    int tp, pp, dp, kind; /* which groups: 0 TP, 1 DP, 2 PP pairs, 3 PP pairs with the last stage to the first,
                             4 EP (ep consecutive data-parallel indices of one stage and tensor index) */
    int ep;
    uint64_t bytes;
    tern_dtype dt;
    double t;
} coll_entry;

typedef struct {
    const tern_model_cfg *c;
    const tern_plan_opts *o;
    tern_fabric *fab;
    char machine[64];
    unsigned R, nodes, rpn, lnc;
    double cap, peak, hbm_bw;
    shape_entry shapes[MAX_SHAPES];
    int nshapes;
    piece pieces[MAX_PIECES];
    int npieces;
    coll_entry colls[MAX_COLLS];
    int ncolls;
    pthread_mutex_t mu;
    int next_job;
    int order[MAX_PIECES]; /* the pieces to simulate, largest estimate first */
    int norder;
} planner;

void tern_plan_opts_default(tern_plan_opts *o)
{
    memset(o, 0, sizeof *o);
    o->seq = 2048;
    o->global_batch = 256;
    o->fixed.tp = o->fixed.pp = o->fixed.dp = o->fixed.microbatch = o->fixed.zero = o->fixed.recompute = -1;
    o->fixed.vpp = -1;
    o->fixed.ep = -1;
}

const char *tern_plan_recompute_name(int recompute)
{
    return recompute == TERN_RECOMPUTE_FULL ? "full" : recompute == TERN_RECOMPUTE_SELECTIVE ? "selective" : "none";
}

/* ---- simulation of the per-shape graphs (two host threads: the host has 2 cores) ---- */
static int shape_index(planner *p, int tp, int64_t mb, int ep)
{
    for (int i = 0; i < p->nshapes; i++)
        if (p->shapes[i].tp == tp && p->shapes[i].mb == mb && p->shapes[i].ep == ep)
            return i;
    if (p->nshapes == MAX_SHAPES)
        return -1;
    shape_entry *e = &p->shapes[p->nshapes];
    memset(e, 0, sizeof *e);
    e->tp = tp;
    e->mb = mb;
    e->ep = ep;
    return p->nshapes++;
}

/* The graph shape a rank simulates: at LNC=2 a rank is two physical cores, which split its heads and MLP columns
 * as a tensor-parallel pair would (tp x lnc), when the heads allow; otherwise the rank's whole work on one core. */
static int sim_tp(const planner *p, int tp)
{
    int t = tp * (int)p->lnc;
    if (p->lnc > 1 && p->c->heads % t == 0 && p->c->ffn % t == 0)
        return t;
    return tp;
}

/* The distinct graphs (pieces) the fitting shapes need: a shape's row chunk and head graphs do not depend on its
 * micro-batch (the chunk is the same 4,096 rows), only its attention block (B = micro-batch x heads) does. */
static int piece_index(planner *p, plan_graph_kind kind, int tp, int64_t mb, int64_t seq, int ep)
{
    for (int i = 0; i < p->npieces; i++) {
        piece *q = &p->pieces[i];
        if (q->kind == kind && q->tp == tp && q->mb == mb && q->seq == seq && q->ep == ep)
            return i;
    }
    if (p->npieces == MAX_PIECES)
        return -1;
    piece *q = &p->pieces[p->npieces];
    memset(q, 0, sizeof *q);
    q->kind = kind;
    q->tp = tp;
    q->mb = mb;
    q->seq = seq;
    q->ep = ep;
    return p->npieces++;
}

static tern_status shape_pieces(planner *p, shape_entry *e, tern_error *err)
{
    int t = sim_tp(p, e->tp);
    plan_composition(p->c, t, e->mb, p->o->seq, &e->comp);
    plan_graph_kind k[6] = {PLAN_G_ROWS_FWD, PLAN_G_ROWS_BWD, PLAN_G_ATTN_FWD,
                            PLAN_G_ATTN_BWD, PLAN_G_HEAD_FWD, PLAN_G_HEAD_BWD};
    for (int i = 0; i < 6; i++) {
        int attn = k[i] == PLAN_G_ATTN_FWD || k[i] == PLAN_G_ATTN_BWD;
        int rows = k[i] == PLAN_G_ROWS_FWD || k[i] == PLAN_G_ROWS_BWD; /* only the MLP sees expert parallelism */
        e->piece[i] = piece_index(p, k[i], t, attn ? e->comp.B : 1, attn ? e->comp.blk : e->comp.rows,
                                  rows ? e->ep : 1);
        if (e->piece[i] < 0)
            return tern_error_set(err, TERN_ERR_RANGE, "plan: more than %d distinct graphs", MAX_PIECES);
    }
    return TERN_OK;
}

static void *worker(void *arg)
{
    planner *p = arg;
    for (;;) {
        pthread_mutex_lock(&p->mu);
        int j = p->next_job++, i = j < p->norder ? p->order[j] : p->npieces;
        if (i < p->npieces && p->o->progress) {
            static const char *names[] = {"layer rows forward", "layer rows backward", "attention block forward",
                                          "attention block backward", "head forward", "head backward", "model"};
            char what[128];
            snprintf(what, sizeof what, "simulating %s (tp=%d, %lld x %lld)", names[p->pieces[i].kind],
                     p->pieces[i].tp, (long long)p->pieces[i].mb, (long long)p->pieces[i].seq);
            p->o->progress(p->o->progress_ctx, what);
        }
        pthread_mutex_unlock(&p->mu);
        if (i >= p->npieces)
            return NULL;
        piece *q = &p->pieces[i];
        plan_shape s = {.kind = q->kind, .tp = q->tp, .mb = q->mb, .seq = q->seq, .fp32 = p->o->precision_fp32,
                        .ep = q->ep};
        q->st = plan_simulate_onnx(q->onnx, q->len, &s, p->machine, &q->sec, &q->ws, &q->err);
        q->done = q->st == TERN_OK;
        free(q->onnx);
        q->onnx = NULL;
    }
}

static double layer_params_rank(const tern_model_cfg *c, int tp, int ep);

/* A work estimate per piece, only to order the jobs (longest first, so that neither host thread is left with
 * a long graph at the end). Matmul work for the row and head graphs; the attention blocks are fp32 elementwise-
 * heavy ([B, blk, blk] softmax and its backward), weighted by their measured cost per multiply-add. */
static double piece_cost(const planner *p, const piece *q)
{
    const tern_model_cfg *c = p->c;
    int bwd = q->kind == PLAN_G_ROWS_BWD || q->kind == PLAN_G_ATTN_BWD || q->kind == PLAN_G_HEAD_BWD;
    double w;
    if (q->kind == PLAN_G_ATTN_FWD || q->kind == PLAN_G_ATTN_BWD)
        w = 25.0 * (double)q->mb * (double)q->seq * (double)q->seq * (double)c->head_dim * (bwd ? 5 : 1);
    else if (q->kind == PLAN_G_HEAD_FWD || q->kind == PLAN_G_HEAD_BWD)
        w = (double)q->seq * (double)c->hidden * (double)(c->vocab / q->tp) * (bwd ? 2 : 1);
    else
        w = (double)q->seq * layer_params_rank(c, q->tp, q->ep) * (bwd ? 2 : 1) * (q->ep > 1 ? q->ep : 1);
    return w;
}

static int cmp_cost(const void *a, const void *b, void *ctx)
{
    const planner *p = ctx;
    double x = p->pieces[*(const int *)a].cost, y = p->pieces[*(const int *)b].cost;
    if (x != y)
        return x > y ? -1 : 1;
    return *(const int *)a - *(const int *)b;
}

static const char *const kind_names[] = {"rows_fwd", "rows_bwd", "attn_fwd", "attn_bwd",
                                          "head_fwd", "head_bwd", "model_fwd"};

/* --dump-graphs: one piece's ONNX bytes as DIR/KIND_tpT[_epE]_mbB_seqS.onnx (the file `tern run` and
 * `tern compile` read). */
static tern_status dump_piece(const char *dir, const piece *q, tern_error *err)
{
    if (mkdir(dir, 0777) && errno != EEXIST)
        return tern_error_set(err, TERN_ERR_IO, "plan: --dump-graphs %s: cannot create the directory (%s)", dir,
                              strerror(errno));
    char ep[24] = "", path[4096];
    if (q->ep > 1)
        snprintf(ep, sizeof ep, "_ep%d", q->ep);
    snprintf(path, sizeof path, "%s/%s_tp%d%s_mb%lld_seq%lld.onnx", dir, kind_names[q->kind], q->tp, ep,
             (long long)q->mb, (long long)q->seq);
    FILE *f = fopen(path, "wb");
    int ok = f && fwrite(q->onnx, 1, q->len, f) == q->len;
    if (f && fclose(f))
        ok = 0;
    if (!ok)
        return tern_error_set(err, TERN_ERR_IO, "plan: --dump-graphs: cannot write %s (%s)", path, strerror(errno));
    return TERN_OK;
}

/* Build every piece's graph; a piece whose bytes equal an earlier one's (the attention block graphs depend only
 * on B = micro-batch x heads per rank, so tp=1 mb=2 and tp=2 mb=4 ... coincide) is simulated once. */
static tern_status prepare_pieces(planner *p, tern_error *err)
{
    p->norder = 0;
    for (int i = 0; i < p->npieces; i++) {
        piece *q = &p->pieces[i];
        plan_shape s = {.kind = q->kind, .tp = q->tp, .mb = q->mb, .seq = q->seq, .fp32 = p->o->precision_fp32,
                        .ep = q->ep};
        tern_status st = plan_build_graph(p->c, &s, &q->onnx, &q->len, err);
        if (st)
            return st;
        q->alias = -1;
        for (int j = 0; j < i && q->alias < 0; j++) {
            const piece *r = &p->pieces[j];
            if (r->alias < 0 && r->len == q->len && !memcmp(r->onnx, q->onnx, q->len))
                q->alias = j;
        }
        if (q->alias >= 0) {
            free(q->onnx);
            q->onnx = NULL;
            continue;
        }
        if (p->o->dump_dir && (st = dump_piece(p->o->dump_dir, q, err)))
            return st;
        q->cost = piece_cost(p, q);
        p->order[p->norder++] = i;
    }
    /* qsort_r is not C17; the order list is short, so an insertion sort */
    for (int i = 1; i < p->norder; i++)
        for (int j = i; j > 0 && cmp_cost(&p->order[j], &p->order[j - 1], p) < 0; j--) {
            int t = p->order[j];
            p->order[j] = p->order[j - 1];
            p->order[j - 1] = t;
        }
    return TERN_OK;
}

static void free_pieces(planner *p)
{
    for (int i = 0; i < p->npieces; i++) {
        free(p->pieces[i].onnx);
        p->pieces[i].onnx = NULL;
    }
}

static tern_status run_shapes(planner *p, tern_error *err)
{
    pthread_t th[2];
    int n = 0;
    tern_status pst = prepare_pieces(p, err);
    if (pst) {
        free_pieces(p);
        return pst;
    }
    p->next_job = 0;
    for (int t = 0; t < 2; t++)
        if (pthread_create(&th[t], NULL, worker, p) == 0)
            n++;
    if (n == 0)
        worker(p);
    for (int t = 0; t < n; t++)
        pthread_join(th[t], NULL);
    free_pieces(p);
    for (int i = 0; i < p->npieces; i++)
        if (p->pieces[i].alias >= 0) {
            const piece *r = &p->pieces[p->pieces[i].alias];
            p->pieces[i].done = r->done;
            p->pieces[i].st = r->st;
            p->pieces[i].err = r->err;
            p->pieces[i].sec = r->sec;
            p->pieces[i].ws = r->ws;
        }
    for (int i = 0; i < p->npieces; i++)
        if (!p->pieces[i].done) {
            *err = p->pieces[i].err;
            return p->pieces[i].st ? p->pieces[i].st : TERN_ERR_INVALID;
        }
    /* compose each shape (plan_layer_times' rule) */
    for (int i = 0; i < p->nshapes; i++) {
        shape_entry *e = &p->shapes[i];
        double v[6];
        uint64_t ws = 0;
        for (int k = 0; k < 6; k++) {
            v[k] = p->pieces[e->piece[k]].sec;
            if (p->pieces[e->piece[k]].ws > ws)
                ws = p->pieces[e->piece[k]].ws;
        }
        double ch = (double)e->comp.chunks, pr = (double)e->comp.pairs;
        e->lf = ch * v[0] + pr * v[2];
        e->af = pr * v[2];
        e->lb = ch * v[1] + pr * v[3];
        e->hf = ch * v[4];
        e->hb = ch * v[5];
        e->ws = ws;
        e->done = 1;
    }
    return TERN_OK;
}

/* ---- collectives ---- */
/* Rank of (tensor index t, data index d, stage s): TP innermost (a TP group is consecutive ranks, inside one
 * instance), then DP, then PP. */
static unsigned rank_of(int tp, int dp, int t, int d, int s) { return (unsigned)((s * dp + d) * tp + t); }

static tern_status coll_time_ep(planner *p, tern_coll_op op, int kind, int tp, int pp, int dp, int ep,
                                uint64_t bytes, tern_dtype dt, double *out, tern_error *err)
{
    int gsz = kind == 0 ? tp : kind == 4 ? ep : dp;
    if (((kind < 2 || kind == 4) && gsz <= 1) || ((kind == 2 || kind == 3) && pp <= 1) || bytes == 0) {
        *out = 0;
        return TERN_OK;
    }
    for (int i = 0; i < p->ncolls; i++) {
        coll_entry *e = &p->colls[i];
        if (e->op == op && e->kind == kind && e->tp == tp && e->pp == pp && e->dp == dp && e->ep == ep &&
            e->bytes == bytes && e->dt == dt) {
            *out = e->t;
            return TERN_OK;
        }
    }
    unsigned R = p->R;
    unsigned *g = malloc(sizeof(unsigned) * R * 2);
    if (!g)
        return tern_error_set(err, TERN_ERR_NOMEM, "plan: out of memory for replica groups");
    tern_coll_desc d = {.op = op, .dtype = dt, .count = bytes / tern_dtype_size(dt),
                        .channels = p->o->ring_channels};
    unsigned k = 0;
    if (kind == 0) { /* TP groups: every (stage, data index) */
        for (int s = 0; s < pp; s++)
            for (int di = 0; di < dp; di++)
                for (int t = 0; t < tp; t++)
                    g[k++] = rank_of(tp, dp, t, di, s);
        d.groups = g;
        d.ngroups = (unsigned)(pp * dp);
        d.group_size = (unsigned)tp;
    } else if (kind == 1) { /* DP groups: every (stage, tensor index) */
        for (int s = 0; s < pp; s++)
            for (int t = 0; t < tp; t++)
                for (int di = 0; di < dp; di++)
                    g[k++] = rank_of(tp, dp, t, di, s);
        d.groups = g;
        d.ngroups = (unsigned)(pp * tp);
        d.group_size = (unsigned)dp;
    } else if (kind == 4) { /* EP groups: ep consecutive data indices, every (stage, tensor index, block) */
        for (int s = 0; s < pp; s++)
            for (int t = 0; t < tp; t++)
                for (int di = 0; di < dp; di++)
                    g[k++] = rank_of(tp, dp, t, di, s);
        d.groups = g;
        d.ngroups = (unsigned)(pp * tp * (dp / ep));
        d.group_size = (unsigned)ep;
    } else { /* PP: every rank of stage s sends to the same position in stage s+1, all stages at once */
        unsigned np = 0;
        for (int s = 0; s < pp; s += 1) {
            if (s + 1 == pp && (kind == 2 || pp < 3)) /* pp = 2 wraps onto the same pairs, reversed */
                break;
            for (int di = 0; di < dp; di++)
                for (int t = 0; t < tp; t++) {
                    g[2 * np] = rank_of(tp, dp, t, di, s);
                    g[2 * np + 1] = rank_of(tp, dp, t, di, (s + 1) % pp);
                    np++;
                }
        }
        d.pairs = g;
        d.npairs = np;
        d.algo = TERN_ALGO_DIRECT;
    }
    tern_fabric_reset(p->fab);
    tern_coll_result r;
    tern_status st = tern_collective_time(p->fab, &d, &r, err);
    free(g);
    if (st)
        return tern_error_prefix(err, "plan: timing %s over %s groups (tp=%d pp=%d dp=%d, %llu bytes): ",
                                 tern_coll_op_name(op), kind == 0 ? "TP" : kind == 1 ? "DP" : kind == 4 ? "EP" : "PP", tp, pp, dp,
                                 (unsigned long long)bytes);
    *out = (double)r.time_ps * 1e-12;
    if (p->ncolls < MAX_COLLS) {
        coll_entry *e = &p->colls[p->ncolls++];
        *e = (coll_entry){.op = op, .tp = tp, .pp = pp, .dp = dp, .ep = ep, .kind = kind, .bytes = bytes,
                          .dt = dt, .t = *out};
    }
    return TERN_OK;
}

static tern_status coll_time(planner *p, tern_coll_op op, int kind, int tp, int pp, int dp, uint64_t bytes,
                             tern_dtype dt, double *out, tern_error *err)
{
    return coll_time_ep(p, op, kind, tp, pp, dp, 0, bytes, dt, out, err);
}

/* ---- memory ---- */
static double layer_params_rank(const tern_model_cfg *c, int tp, int ep)
{
    /* expert parallelism: the rank holds experts / ep of the experts (each TP-sharded as the dense MLP is) */
    double h = (double)c->hidden, hd = (double)c->head_dim;
    double attn = h * hd * (double)plan_heads_per_rank(c, tp) * 2 + h * hd * (double)plan_kv_heads_per_rank(c, tp) * 2;
    double mlp = (c->gated_mlp ? 3.0 : 2.0) * h * (double)(c->ffn / tp) * (double)(c->experts / (ep > 1 ? ep : 1));
    double extra = c->experts > 1 ? h * (double)c->experts : 0;
    extra += c->rms_norm ? 2 * h : 4 * h + (4 * h + (double)(c->ffn / tp) + h) / 1.0;
    return attn + mlp + extra;
}

/* A layer's kept activations per micro-batch. Selective recomputation keeps what no recomputation keeps (the list
 * in plan_layer_activation_bytes) less the attention core's results, which are recomputed from the kept Q, K, V
 * (the attention output in fp32 and bf16 and its softmax statistics), and with the linear layers' inputs kept as
 * their sequence-parallel shards instead of all-gathered (both the QKV and the MLP input: re-gathered in the
 * backward, as Megatron-LM's sequence-parallel linear does). */
static double activation_bytes(const tern_model_cfg *c, int tp, int64_t mb, int64_t seq, int fp32, int recompute)
{
    if (recompute != TERN_RECOMPUTE_SELECTIVE)
        return plan_layer_activation_bytes(c, tp, mb, seq, fp32, recompute == TERN_RECOMPUTE_FULL);
    double b = plan_layer_activation_bytes(c, tp, mb, seq, fp32, 0);
    double e = fp32 ? 4 : 2, T = (double)(mb * seq), H = (double)c->hidden;
    double Tsp = (mb * seq) % tp ? T : T / tp;
    double hq = (double)plan_heads_per_rank(c, tp), D = (double)c->head_dim;
    b -= T * hq * D * (4 + e) + T * hq * 4;
    b -= 2 * (T - Tsp) * H * e;
    return b;
}

static void memory_of(const planner *p, const tern_plan_layout *L, int64_t micro, uint64_t ws, tern_plan_memory *m,
                      double *params_rank)
{
    const tern_model_cfg *c = p->c;
    int fp32 = p->o->precision_fp32;
    double lps = (double)(c->layers / L->pp);
    double emb = (double)((c->vocab + L->tp - 1) / L->tp) * (double)c->hidden;
    double head = c->tied_embeddings && L->pp > 1 ? emb : (c->tied_embeddings ? 0 : emb);
    /* the busiest stage: the first (embedding, most micro-batches in flight) or, with pp = 1, the only one */
    double prm = lps * layer_params_rank(c, L->tp, L->ep) + emb + (L->pp == 1 ? head : 0);
    double prm_last = lps * layer_params_rank(c, L->tp, L->ep) + (L->pp > 1 ? head : 0);
    if (prm_last > prm)
        prm = prm_last;
    *params_rank = prm;
    m->weights = prm * (fp32 ? 4 : 2);
    m->grads = prm * 4; /* gradients accumulated in fp32 over the micro-batches */
    double opt = prm * (fp32 ? 8 : 12); /* Adam m and v (fp32), plus an fp32 master copy under bf16 */
    m->optimizer = L->zero ? opt / L->dp : opt;
    /* micro-batches in flight on stage 0: 1F1B's warm-up + 1; interleaved, chunks of lps / v layers: its
     * warm-up (P - 1) x 2 + (v - 1) x P forwards + 1 */
    double v = L->vpp > 1 ? L->vpp : 1;
    double inflight = v > 1 ? ((double)(L->pp - 1) * 2 + (v - 1) * L->pp + 1) / v : (double)L->pp;
    if (inflight > (double)micro)
        inflight = (double)micro;
    double act = activation_bytes(c, L->tp, L->microbatch, p->o->seq, fp32, L->recompute);
    double logits = (double)(L->microbatch * p->o->seq) * (double)((c->vocab + L->tp - 1) / L->tp) * 4;
    m->activations = act * lps * inflight + (L->pp == 1 ? logits : 0);
    m->workspace = (double)ws;
    m->total = m->weights + m->grads + m->optimizer + m->activations + m->workspace;
    m->capacity = p->cap;
}

/* ---- one layout ---- */
/* What the pipeline schedule of a layout is made of: per chunk (pp x vpp of them, g = local chunk x pp + stage)
 * the forward and backward time of one micro-batch, and the collectives' times. */
typedef struct {
    int64_t M;
    unsigned G, v;
    double *fv, *bv;
    double xsend, ag, rs, head_ar, tp_layer_f, tp_layer_b, lps;
    double a2a; /* one expert-parallel all-to-all */
    double lf, lb;       /* one layer, one micro-batch, with recomputation and TP collectives excluded */
    double tp_fwd_chunk; /* TP collective time inside one chunk's forward (for the timeline) */
} sched;

static void sched_free(sched *S)
{
    free(S->fv);
    free(S->bv);
    S->fv = S->bv = NULL;
}

static tern_status sched_of(planner *p, const tern_plan_layout *L, sched *S, tern_error *err)
{
    const tern_model_cfg *c = p->c;
    const tern_plan_opts *o = p->o;
    int fp32 = o->precision_fp32;
    tern_dtype adt = fp32 ? TERN_DTYPE_FP32 : TERN_DTYPE_BF16;
    double e = fp32 ? 4 : 2;
    memset(S, 0, sizeof *S);
    S->M = o->global_batch / ((int64_t)L->dp * L->microbatch);
    S->v = L->vpp > 1 ? (unsigned)L->vpp : 1;
    S->G = (unsigned)L->pp * S->v;
    int si = shape_index(p, L->tp, L->microbatch, L->ep);
    shape_entry *sh = &p->shapes[si];
    double T = (double)(L->microbatch * o->seq);
    uint64_t act_bytes = (uint64_t)(T * (double)c->hidden * e);
    /* the reduce-scatters of the row-parallel outputs (forward) and of the column-parallel input gradients
     * (backward) run in NxD's reduce_dtype: fp32 unless the job downcasts (o->tp_reduce_bf16) */
    tern_dtype rdt = fp32 || !o->tp_reduce_bf16 ? TERN_DTYPE_FP32 : TERN_DTYPE_BF16;
    uint64_t rs_bytes = (uint64_t)(T * (double)c->hidden * (double)tern_dtype_size(rdt));
    tern_status st;
    if ((st = coll_time(p, TERN_COLL_ALL_GATHER, 0, L->tp, L->pp, L->dp, act_bytes, adt, &S->ag, err)) ||
        (st = coll_time(p, TERN_COLL_REDUCE_SCATTER, 0, L->tp, L->pp, L->dp, rs_bytes, rdt, &S->rs, err)))
        return st;
    /* sequence parallelism: forward 2 all-gathers + 2 reduce-scatters per layer, the backward the same */
    S->tp_layer_f = 2 * (S->ag + S->rs);
    S->tp_layer_b = 2 * (S->ag + S->rs);
    /* expert parallelism: the dispatch and combine all-to-alls of the routed rows (experts x ceil(T k / experts)
     * of them, the layer graph's buffer) in the forward, and their two in the backward */
    if (L->ep > 1) {
        int64_t te = ((int64_t)T * c->experts_per_tok + c->experts - 1) / c->experts;
        uint64_t bytes = (uint64_t)(c->experts * te) * (uint64_t)c->hidden * (uint64_t)e;
        if ((st = coll_time_ep(p, TERN_COLL_ALL_TO_ALL, 4, L->tp, L->pp, L->dp, L->ep, bytes, adt, &S->a2a, err)))
            return st;
    }
    S->lps = (double)(c->layers / L->pp);
    S->lf = sh->lf;
    S->lb = sh->lb;
    if (L->recompute == TERN_RECOMPUTE_FULL) /* the whole forward again, its collectives included */
        S->lb += sh->lf + S->tp_layer_f;
    else if (L->recompute == TERN_RECOMPUTE_SELECTIVE) /* the attention core again (its block pairs' forward), and
                                                          the two linear inputs all-gathered again from their
                                                          sequence-parallel shards (Megatron's SP linear) */
        S->lb += sh->af + (L->tp > 1 ? 2 * S->ag : 0);
    uint64_t send_bytes = (uint64_t)(T * (double)c->hidden * e / ((int64_t)(T) % L->tp ? 1 : L->tp));
    /* the interleaved schedule also sends from the last stage back to the first (chunk boundaries wrap) */
    if ((st = coll_time(p, TERN_COLL_PERMUTE, S->v > 1 ? 3 : 2, L->tp, L->pp, L->dp, send_bytes, adt, &S->xsend,
                        err)))
        return st;
    /* the embedding and LM head graph runs on the last chunk (pp = 1: the only one); its TP collectives are the
     * all-gather before the head and the vocabulary-parallel loss's small all-reduces (row max and sum) */
    if ((st = coll_time(p, TERN_COLL_ALL_REDUCE, 0, L->tp, L->pp, L->dp, (uint64_t)(T * 4), TERN_DTYPE_FP32,
                        &S->head_ar, err)))
        return st;
    S->fv = malloc(sizeof(double) * S->G);
    S->bv = malloc(sizeof(double) * S->G);
    if (!S->fv || !S->bv) {
        sched_free(S);
        return tern_error_set(err, TERN_ERR_NOMEM, "plan: out of memory");
    }
    double lpc = S->lps / S->v; /* layers per chunk */
    for (unsigned g = 0; g < S->G; g++) {
        S->fv[g] = lpc * (S->lf + S->tp_layer_f + 2 * S->a2a);
        S->bv[g] = lpc * (S->lb + S->tp_layer_b + 2 * S->a2a +
                          (L->recompute == TERN_RECOMPUTE_FULL ? 2 * S->a2a : 0));
    }
    S->tp_fwd_chunk = lpc * S->tp_layer_f;
    S->fv[S->G - 1] += sh->hf + S->ag + 2 * S->head_ar;
    S->bv[S->G - 1] += sh->hb + S->rs;
    return TERN_OK;
}

static tern_status evaluate(planner *p, const tern_plan_layout *L, tern_plan_result *r, tern_error *err)
{
    const tern_model_cfg *c = p->c;
    const tern_plan_opts *o = p->o;
    int fp32 = o->precision_fp32;
    tern_dtype adt = fp32 ? TERN_DTYPE_FP32 : TERN_DTYPE_BF16;
    double e = fp32 ? 4 : 2;
    sched S;
    tern_status st = sched_of(p, L, &S, err);
    if (st)
        return st;
    int64_t M = S.M;
    shape_entry *sh = &p->shapes[shape_index(p, L->tp, L->microbatch, L->ep)];
    double lps = S.lps, xsend = S.xsend, tp_layer_f = S.tp_layer_f, tp_layer_b = S.tp_layer_b, S_a2a = S.a2a;
    double makespan, idle;
    if (plan_pipeline_schedule((unsigned)L->pp, S.v, (unsigned)M, S.fv, S.bv, L->pp > 1 ? xsend : 0, &makespan,
                               &idle, NULL)) {
        sched_free(&S);
        return tern_error_set(err, TERN_ERR_NOMEM, "plan: pipeline schedule failed (out of memory)");
    }
    /* per stage: the sum of its chunks */
    double compute = 0, bs_last = 0;
    for (int s = 0; s < L->pp; s++) {
        double fsum = 0, bsum = 0;
        for (unsigned k = 0; k < S.v; k++) {
            fsum += S.fv[k * (unsigned)L->pp + (unsigned)s];
            bsum += S.bv[k * (unsigned)L->pp + (unsigned)s];
        }
        double cs = (double)M * (fsum + bsum);
        if (cs > compute)
            compute = cs;
        if (s == L->pp - 1)
            bs_last = bsum;
    }
    sched_free(&S);
    /* data-parallel gradient synchronisation of the rank's parameters */
    double params_rank;
    memory_of(p, L, M, sh->ws, &r->mem, &params_rank);
    uint64_t gbytes = (uint64_t)(params_rank * 4);
    double dp_t = 0, t1 = 0, t2 = 0;
    if (L->zero) {
        if ((st = coll_time(p, TERN_COLL_REDUCE_SCATTER, 1, L->tp, L->pp, L->dp, gbytes, TERN_DTYPE_FP32, &t1,
                            err)) ||
            (st = coll_time(p, TERN_COLL_ALL_GATHER, 1, L->tp, L->pp, L->dp, (uint64_t)(params_rank * e), adt, &t2,
                            err)))
            return st;
        dp_t = t1 + t2;
    } else {
        if ((st = coll_time(p, TERN_COLL_ALL_REDUCE, 1, L->tp, L->pp, L->dp, gbytes, TERN_DTYPE_FP32, &t1, err)))
            return st;
        dp_t = t1;
    }
    /* overlap: the gradient reduction (t1) of layer l can start once the last micro-batch's backward of l is done,
     * so all but the first layer's share hides behind that backward; ZeRO-1's all-gather of the updated weights
     * (t2) follows the optimizer and is exposed */
    double hide = lps > 1 ? bs_last * (lps - 1) / lps : 0;
    double ov = t1 < hide ? t1 : hide;
    double dp_exposed = dp_t - ov;
    /* optimizer: Adam over the rank's (ZeRO: shard of the) parameters, HBM-bound: read grad, m, v, master
     * (16 B), write m, v, master, and the bf16 weight (14 B) per parameter, at the rank's HBM bandwidth */
    double nopt = L->zero ? params_rank / L->dp : params_rank;
    double opt_t = nopt * (fp32 ? 24 : 30) / p->hbm_bw;
    r->layout = *L;
    r->micro_batches = (int)M;
    r->step_s = makespan + dp_exposed + opt_t;
    r->compute_s = compute;
    r->bubble_s = idle;
    r->tp_comm_s = (double)M * lps * (tp_layer_f + tp_layer_b);
    r->ep_comm_s = (double)M * lps * S_a2a * (L->recompute == TERN_RECOMPUTE_FULL ? 6 : 4);
    r->pp_comm_s = L->pp > 1 ? 2.0 * (double)M * (double)(L->vpp > 1 ? L->vpp : 1) * xsend : 0;
    r->dp_comm_s = dp_t;
    r->comm_overlapped_s = ov;
    r->comm_exposed_s = r->tp_comm_s + r->ep_comm_s + r->pp_comm_s + dp_exposed;
    r->layer_fwd_s = sh->lf;
    r->layer_bwd_s = sh->lb;
    r->head_fwd_s = sh->hf;
    r->head_bwd_s = sh->hb;
    r->seq_per_s = (double)o->global_batch / r->step_s;
    r->tokens_per_s = r->seq_per_s * (double)o->seq;
    r->mfu = r->tokens_per_s * tern_model_train_flops_per_token(c, o->seq) / ((double)p->R * p->peak);
    r->fits = r->mem.total <= r->mem.capacity;
    return TERN_OK;
}

/* The best plan's schedule op by op, for the timeline. */
static tern_status timeline_of(planner *p, const tern_plan_layout *L, tern_plan_out *out, tern_error *err)
{
    sched S;
    tern_status st = sched_of(p, L, &S, err);
    if (st)
        return st;
    size_t n = 2 * (size_t)S.M * S.G;
    plan_pipe_op *t = malloc(sizeof *t * n);
    out->timeline = malloc(sizeof *out->timeline * n);
    double mk, idle, x = L->pp > 1 ? S.xsend : 0;
    if (!t || !out->timeline ||
        plan_pipeline_schedule((unsigned)L->pp, S.v, (unsigned)S.M, S.fv, S.bv, x, &mk, &idle, t)) {
        free(t);
        free(out->timeline);
        out->timeline = NULL;
        sched_free(&S);
        return tern_error_set(err, TERN_ERR_NOMEM, "plan: timeline of %zu ops: out of memory", n);
    }
    double lpc = S.lps / S.v;
    for (size_t i = 0; i < n; i++) {
        int last = t[i].chunk * (unsigned)L->pp + t[i].rank == S.G - 1;
        double tpc = t[i].backward ? lpc * S.tp_layer_b + (last ? S.rs : 0)
                                   : lpc * S.tp_layer_f + (last ? S.ag + 2 * S.head_ar : 0);
        if (t[i].backward && L->recompute == TERN_RECOMPUTE_FULL)
            tpc += lpc * S.tp_layer_f;
        if (t[i].backward && L->recompute == TERN_RECOMPUTE_SELECTIVE && L->tp > 1)
            tpc += lpc * 2 * S.ag;
        out->timeline[i] = (tern_plan_timeline_op){.stage = t[i].rank, .chunk = t[i].chunk, .mb = t[i].mb,
                                                   .backward = t[i].backward, .start = t[i].start, .end = t[i].end,
                                                   .tp_comm_s = tpc};
    }
    out->ntimeline = n;
    out->timeline_send_s = x;
    out->timeline_makespan_s = mk;
    free(t);
    sched_free(&S);
    return TERN_OK;
}

/* ---- prices ---- */
static void load_price(const char *file, const char *instance, double *usd_h, char *src, size_t srcn)
{
    *usd_h = -1;
    snprintf(src, srcn, "no price file");
    FILE *f = fopen(file, "rb");
    if (!f)
        return;
    char *buf = malloc(1 << 20);
    size_t n = buf ? fread(buf, 1, (1 << 20) - 1, f) : 0;
    fclose(f);
    if (!buf)
        return;
    cJSON *root = cJSON_ParseWithLength(buf, n);
    free(buf);
    const cJSON *ins = cJSON_GetObjectItemCaseSensitive(root, "instances");
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(ins, instance);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(it, "usd_per_hour");
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(it, "source");
    if (cJSON_IsNumber(v) && v->valuedouble > 0)
        *usd_h = v->valuedouble;
    snprintf(src, srcn, "%s", cJSON_IsString(s) ? s->valuestring : it ? "no source given" : "not in the price file");
    cJSON_Delete(root);
}

static tern_status check_price_file(const char *file, tern_error *err)
{
    FILE *f = fopen(file, "rb");
    if (!f)
        return tern_error_set(err, TERN_ERR_IO, "price file '%s': cannot open", file);
    char *buf = malloc(1 << 20);
    size_t n = buf ? fread(buf, 1, (1 << 20) - 1, f) : 0;
    fclose(f);
    cJSON *root = buf ? cJSON_ParseWithLength(buf, n) : NULL;
    free(buf);
    int ok = root && cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(root, "instances"));
    cJSON_Delete(root);
    if (!ok)
        return tern_error_set(err, TERN_ERR_PARSE, "price file '%s': must be a JSON object with an \"instances\" object",
                              file);
    return TERN_OK;
}

/* ---- GPU comparison (docs/planner.md, "Against GPUs") ---- */
static void gpu_model(const tern_model_cfg *c, const tern_plan_opts *o, const char *price_file, unsigned instances,
                      int which, tern_plan_gpu *g)
{
    memset(g, 0, sizeof *g);
    if (which == 0) {
        snprintf(g->instance, sizeof g->instance, "p4d.24xlarge");
        snprintf(g->gpu, sizeof g->gpu, "A100-SXM4-40GB");
        g->peak_flops = 312e12;
        g->nvlink_bytes_s = 300e9;
        g->efa_bytes_s = 400e9 / 8;
        g->hbm_bytes = 40.0 * (1u << 30);
    } else {
        snprintf(g->instance, sizeof g->instance, "p5.48xlarge");
        snprintf(g->gpu, sizeof g->gpu, "H100-SXM5-80GB");
        g->peak_flops = 989e12;
        g->nvlink_bytes_s = 450e9;
        g->efa_bytes_s = 3200e9 / 8;
        g->hbm_bytes = 80.0 * (1u << 30);
    }
    g->gpus_per_instance = 8;
    g->instances = instances;
    g->mfu = o->gpu_mfu > 0 ? o->gpu_mfu : 0.40;
    double n = (double)instances * 8;
    double P = tern_model_params(c);
    /* layout: TP = 8 over NVLink when the model's state (18 B/param with ZeRO-1 over DP) would not fit one GPU,
     * else TP = 1; DP over the rest */
    int tp = 1;
    if (P * (2 + 4 + 12 / (n)) > 0.8 * g->hbm_bytes)
        tp = 8;
    int dp = (int)(n / tp);
    double state = P / tp * (2 + 4) + P / tp * 12 / dp;
    g->fits = state <= 0.8 * g->hbm_bytes;
    snprintf(g->layout, sizeof g->layout, "tp=%d dp=%d zero-1", tp, dp);
    double tokens = (double)o->global_batch * (double)o->seq;
    double compute = tokens * tern_model_train_flops_per_token(c, o->seq) / (n * g->peak_flops * g->mfu);
    /* DP: ring all-reduce of fp32 gradients, 2(d-1)/d x bytes per GPU, over the instance's EFA shared by its GPUs;
     * overlapped with the backward (2/3 of compute), the rest exposed. TP cost is inside the assumed MFU. */
    double gbytes = P / tp * 4;
    double dp_t = dp > 1 ? 2.0 * (dp - 1) / dp * gbytes / (g->efa_bytes_s / (8.0 / tp)) : 0;
    double exposed = dp_t > compute * 2 / 3 ? dp_t - compute * 2 / 3 : 0;
    g->step_s = compute + exposed;
    g->tokens_per_s = tokens / g->step_s;
    load_price(price_file, g->instance, &g->price_usd_h, g->price_source, sizeof g->price_source);
    g->has_price = g->price_usd_h > 0;
    if (g->has_price) {
        g->cost_per_step_usd = g->step_s / 3600 * g->price_usd_h * instances;
        double steps = o->tokens > 0 ? o->tokens / tokens : o->steps;
        g->job_cost_usd = steps * g->cost_per_step_usd;
    }
}

/* ---- search ---- */
static int cmp_plans(const void *a, const void *b)
{
    const tern_plan_result *x = a, *y = b;
    if (x->fits != y->fits)
        return y->fits - x->fits;
    if (x->fits) {
        if (x->step_s != y->step_s)
            return x->step_s < y->step_s ? -1 : 1;
    } else if (x->mem.total != y->mem.total) {
        return x->mem.total < y->mem.total ? -1 : 1;
    }
    const int *u = &x->layout.tp, *v = &y->layout.tp;
    for (int i = 0; i < 8; i++)
        if (u[i] != v[i])
            return u[i] - v[i];
    return 0;
}

static tern_status check_fixed(const tern_model_cfg *c, const tern_plan_opts *o, unsigned R, unsigned rpn,
                               tern_error *err)
{
    const tern_plan_layout *f = &o->fixed;
    if (f->tp == 0 || f->pp == 0 || f->dp == 0 || f->microbatch == 0)
        return tern_error_set(err, TERN_ERR_INVALID, "layout: tp, pp, dp and microbatch must be at least 1");
    if (f->tp > 0 && c->heads % f->tp)
        return tern_error_set(err, TERN_ERR_INVALID,
                              "layout: tp=%d must divide the query heads (num_attention_heads %lld)", f->tp,
                              (long long)c->heads);
    if (f->tp > 0 && c->ffn % f->tp)
        return tern_error_set(err, TERN_ERR_INVALID, "layout: tp=%d must divide the MLP width (intermediate %lld)",
                              f->tp, (long long)c->ffn);
    if (f->tp > 0 && (unsigned)f->tp > rpn)
        return tern_error_set(err, TERN_ERR_INVALID,
                              "layout: tp=%d exceeds the %u ranks of one instance (TP stays on NeuronLink)", f->tp,
                              rpn);
    if (f->pp > 0 && c->layers % f->pp)
        return tern_error_set(err, TERN_ERR_INVALID, "layout: pp=%d must divide the layers (num_hidden_layers %lld)",
                              f->pp, (long long)c->layers);
    int64_t prod = (int64_t)(f->tp > 0 ? f->tp : 1) * (f->pp > 0 ? f->pp : 1) * (f->dp > 0 ? f->dp : 1);
    if (R % prod)
        return tern_error_set(err, TERN_ERR_INVALID, "layout: tp x pp x dp = %lld does not divide the cluster's %u ranks",
                              (long long)prod, R);
    if (f->tp > 0 && f->pp > 0 && f->dp > 0 && prod != R)
        return tern_error_set(err, TERN_ERR_INVALID, "layout: tp x pp x dp = %lld, the cluster has %u ranks",
                              (long long)prod, R);
    if (f->vpp == 0 || f->vpp > 64)
        return tern_error_set(err, TERN_ERR_INVALID, "layout: vpp=%d must be in 1..64", f->vpp);
    if (f->vpp > 1 && f->pp == 1)
        return tern_error_set(err, TERN_ERR_INVALID, "layout: vpp=%d needs pp > 1 (interleaving splits pipeline stages)",
                              f->vpp);
    if (f->vpp > 1 && f->pp > 0 && c->layers % ((int64_t)f->pp * f->vpp))
        return tern_error_set(err, TERN_ERR_INVALID,
                              "layout: pp x vpp = %d x %d must divide the layers (num_hidden_layers %lld)", f->pp,
                              f->vpp, (long long)c->layers);
    if (f->ep == 0 || (f->ep > 1 && (c->experts == 1 || c->experts % f->ep)))
        return tern_error_set(err, TERN_ERR_INVALID,
                              "layout: ep=%d must divide the experts (num_local_experts %lld; a dense model has 1)",
                              f->ep, (long long)c->experts);
    if (f->ep > 1 && f->dp > 0 && f->dp % f->ep)
        return tern_error_set(err, TERN_ERR_INVALID, "layout: ep=%d must divide dp=%d (experts are sharded over "
                                                     "data-parallel ranks)", f->ep, f->dp);
    if (f->recompute > 2)
        return tern_error_set(err, TERN_ERR_INVALID, "layout: recompute=%d is not none (0), full (1) or selective (2)",
                              f->recompute);
    if (f->dp > 0 && o->global_batch % (f->dp * (f->microbatch > 0 ? f->microbatch : 1)))
        return tern_error_set(err, TERN_ERR_INVALID,
                              "layout: global batch %lld is not divisible by dp x microbatch = %d x %d",
                              (long long)o->global_batch, f->dp, f->microbatch > 0 ? f->microbatch : 1);
    return TERN_OK;
}

tern_status tern_plan_run(const tern_model_cfg *c, const tern_plan_opts *o, tern_plan_out *out, tern_error *err)
{
    memset(out, 0, sizeof *out);
    if (o->seq < 1 || o->global_batch < 1)
        return tern_error_set(err, TERN_ERR_INVALID, "plan: --seq (%lld) and --global-batch (%lld) must be >= 1",
                              (long long)o->seq, (long long)o->global_batch);
    if (o->seq > c->max_positions)
        return tern_error_set(err, TERN_ERR_INVALID,
                              "plan: sequence length %lld exceeds the model's max_position_embeddings (%lld)",
                              (long long)o->seq, (long long)c->max_positions);
    if (!o->cluster)
        return tern_error_set(err, TERN_ERR_INVALID, "plan: no cluster given");
    planner *p = calloc(1, sizeof *p);
    if (!p)
        return tern_error_set(err, TERN_ERR_NOMEM, "plan: out of memory");
    p->c = c;
    p->o = o;
    pthread_mutex_init(&p->mu, NULL);
    tern_status st = tern_fabric_load(o->cluster, NULL, &p->fab, err);
    tern_machine *m = NULL;
    tern_plan_result *res = NULL;
    size_t nres = 0, capres = 0;
    if (st)
        goto done;
    /* the instance or system the cluster repeats (also the machine of a cluster file) */
    snprintf(p->machine, sizeof p->machine, "%s", tern_fabric_base_machine(p->fab));
    p->R = tern_fabric_ranks(p->fab);
    p->nodes = tern_fabric_nodes(p->fab);
    p->lnc = tern_fabric_lnc(p->fab);
    if ((st = tern_machine_load(p->machine, &m, err)))
        goto done;
    {
        tern_peaks pk;
        tern_machine_peaks(m, &pk);
        const tern_chip_spec *chip = tern_machine_chip(m);
        p->cap = (double)chip->hbm_bytes / chip->cores * p->lnc;
        p->peak = pk.core_flops[o->precision_fp32 ? TERN_ARCH_FP32 : TERN_ARCH_BF16] * p->lnc;
        p->hbm_bw = chip->hbm_bandwidth / chip->cores * p->lnc;
        p->rpn = p->R / (p->nodes ? p->nodes : 1);
        /* a system (the UltraServer) is one node to the fabric but several instances: TP stays in one */
        const tern_instance_spec *is = tern_machine_instance(m);
        if (is && tern_machine_kind_of(m) == TERN_MACHINE_SYSTEM && is->built_from_count > 1)
            p->rpn /= is->built_from_count;
    }
    if ((st = check_fixed(c, o, p->R, p->rpn, err)))
        goto done;
    const char *pf = o->price_file;
    char pfbuf[1024];
    if (pf) {
        if ((st = check_price_file(pf, err)))
            goto done;
    } else {
        snprintf(pfbuf, sizeof pfbuf, "%s/../prices.json", tern_machine_builtin_dir());
        pf = pfbuf;
    }
    snprintf(out->machine, sizeof out->machine, "%s", p->machine);
    out->instances = p->nodes;
    out->ranks = p->R;
    load_price(pf, p->machine, &out->price_usd_h, out->price_source, sizeof out->price_source);
    out->flops_per_token = tern_model_train_flops_per_token(c, o->seq);
    out->core_peak_flops = p->peak;
    /* enumerate */
    for (int tp = 1; tp <= (int)p->rpn; tp *= 2) {
        if (o->fixed.tp > 0 && tp != o->fixed.tp)
            continue;
        if (c->heads % tp || c->ffn % tp || p->R % (unsigned)tp)
            continue;
        for (int pp = 1; pp <= c->layers; pp++) {
            if ((o->fixed.pp > 0 && pp != o->fixed.pp) || c->layers % pp || p->R % (unsigned)(tp * pp))
                continue;
            int dp = (int)(p->R / (unsigned)(tp * pp));
            if (o->fixed.dp > 0 && dp != o->fixed.dp)
                continue;
            if (o->global_batch % dp)
                continue;
            /* micro-batches: a fixed one as given; else 1, 2, 4, ... while a micro-batch holds at most 16,384 tokens
             * (Llama at 8,192: 1 and 2; BERT at 128: up to 64, as its published runs use 16 to 64) */
            for (int64_t mb = o->fixed.microbatch > 0 ? o->fixed.microbatch : 1;
                 o->fixed.microbatch > 0 ? mb == o->fixed.microbatch : (mb <= 64 && (mb == 1 || mb * o->seq <= 16384));
                 mb = o->fixed.microbatch > 0 ? mb + 1 : mb * 2) {
                if ((o->global_batch / dp) % mb)
                    continue;
                for (int z = 0; z <= 1; z++) {
                    if (o->fixed.zero >= 0 && z != o->fixed.zero)
                        continue;
                    if (dp == 1 && z)
                        continue;
                    /* recompute none/full/selective x vpp 1, 2, 4 (or the fixed vpp) x ep 1, 2, 4, 8 (or the fixed;
                     * a mixture of experts only) */
                    int nv = o->fixed.vpp > 0 ? 1 : 3, ne = o->fixed.ep > 0 || c->experts == 1 ? 1 : 4;
                    for (int rcv = 0; rcv < 3 * nv * ne; rcv++) {
                        int rc = rcv % 3, vpp = o->fixed.vpp > 0 ? o->fixed.vpp : 1 << (rcv / 3 % nv);
                        int ep = o->fixed.ep > 0 ? o->fixed.ep : 1 << (rcv / (3 * nv));
                        if (ep > 1 && (c->experts % ep || dp % ep))
                            continue;
                        if (o->fixed.recompute >= 0 && rc != o->fixed.recompute)
                            continue;
                        /* interleaving needs pp > 1, whole layers per chunk and micro-batches in groups of pp */
                        if (vpp > 1 && (pp == 1 || c->layers % (pp * vpp) ||
                                        (o->global_batch / ((int64_t)dp * mb)) % pp))
                            continue;
                        if (nres == capres) {
                            capres = capres ? 2 * capres : 64;
                            tern_plan_result *nr = realloc(res, capres * sizeof *nr);
                            if (!nr) {
                                st = tern_error_set(err, TERN_ERR_NOMEM, "plan: out of memory");
                                goto done;
                            }
                            res = nr;
                        }
                        tern_plan_result *r = &res[nres++];
                        memset(r, 0, sizeof *r);
                        r->layout = (tern_plan_layout){tp, pp, dp, mb, z, rc, vpp, ep};
                        int64_t M = o->global_batch / ((int64_t)dp * mb);
                        double prm;
                        memory_of(p, &r->layout, M, 0, &r->mem, &prm);
                        r->micro_batches = (int)M;
                        r->fits = r->mem.total <= r->mem.capacity;
                        if (r->fits && shape_index(p, tp, mb, ep) < 0) {
                            st = tern_error_set(err, TERN_ERR_RANGE, "plan: more than %d layer shapes", MAX_SHAPES);
                            goto done;
                        }
                    }
                }
            }
        }
    }
    out->searched = nres;
    if (nres == 0) {
        st = tern_error_set(err, TERN_ERR_INVALID,
                            "plan: no layout of %u ranks satisfies the rules (tp dividing %lld heads, pp dividing "
                            "%lld layers, dp dividing the global batch %lld) with the fixed knobs",
                            p->R, (long long)c->heads, (long long)c->layers, (long long)o->global_batch);
        goto done;
    }
    for (int i = 0; i < p->nshapes; i++)
        if ((st = shape_pieces(p, &p->shapes[i], err)))
            goto done;
    if ((st = run_shapes(p, err)))
        goto done;
    out->simulated = (size_t)p->norder;
    for (size_t i = 0; i < nres; i++) {
        if (!res[i].fits)
            continue;
        tern_plan_layout L = res[i].layout;
        if ((st = evaluate(p, &L, &res[i], err)))
            goto done;
    }
    out->collectives = (size_t)p->ncolls;
    qsort(res, nres, sizeof *res, cmp_plans);
    for (size_t i = 0; i < nres; i++) {
        tern_plan_result *r = &res[i];
        double tokens = (double)o->global_batch * (double)o->seq;
        if (out->price_usd_h > 0 && r->fits) {
            r->cost_per_step_usd = r->step_s / 3600 * out->price_usd_h * p->nodes;
            r->cost_per_mtok_usd = r->cost_per_step_usd / tokens * 1e6;
            double steps = o->tokens > 0 ? o->tokens / tokens : o->steps;
            r->job_cost_usd = steps * r->cost_per_step_usd;
            r->job_hours = steps * r->step_s / 3600;
        } else if (r->fits) {
            double steps = o->tokens > 0 ? o->tokens / tokens : o->steps;
            r->job_hours = steps * r->step_s / 3600;
        }
    }
    if (o->timeline && nres && res[0].fits && (st = timeline_of(p, &res[0].layout, out, err)))
        goto done;
    out->plans = res;
    out->count = nres;
    res = NULL;
    out->ngpus = 2;
    for (int g = 0; g < 2; g++)
        gpu_model(c, o, pf, p->nodes, g, &out->gpus[g]);
done:
    free(res);
    tern_machine_free(m);
    tern_fabric_free(p->fab);
    pthread_mutex_destroy(&p->mu);
    free(p);
    return st;
}

void tern_plan_out_free(tern_plan_out *out)
{
    free(out->timeline);
    free(out->plans);
    memset(out, 0, sizeof *out);
}
