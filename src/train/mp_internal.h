/* Private to the training layer: tensor and pipeline parallelism (docs/training.md, "Tensor and pipeline
 * parallelism"). tp_pairs.c finds the Megatron linear pairs tensor parallelism shards; tensor_parallel.c plans a
 * layout tp x pp x dp over the model - the pairs, the pipeline cuts, the segments - and builds each segment's graphs;
 * pipeline_parallel.c runs the step: every
 * (data, pipeline, tensor) rank's segment programs, the collectives between them and the 1F1B schedule's time. */
#ifndef TERN_MP_INTERNAL_H
#define TERN_MP_INTERNAL_H

#include "train_internal.h"

#include "tern/collective.h"
#include "tern/fabric.h"

/* A Megatron pair: column-parallel MatMul/Gemm a (weight split along N), elementwise nodes, row-parallel b (weight
 * split along its K = N); b's output is a partial sum on each tensor rank, all-reduced before its readers. */
/* A node of a pair whose shape operand is rewritten for a rank's shard: a Reshape's target shape or a Split's
 * sizes, the split axis divided by tp. */
typedef struct {
    int node;
    int n;
    int64_t v[TERN_GRAPH_MAX_RANK];
} mp_fix;

#define MP_MAX_CO 7

typedef struct {
    int a, b;             /* node indices in the plan graph */
    int64_t n;            /* the hidden width N the pair splits */
    unsigned char *in;    /* [n_nodes] nodes of the pair (a, b and the nodes between) */
    int ngroups;          /* a's N columns in groups split tp ways each (a Split of the fused QKV: 3); else 1 */
    int64_t groups[TERN_GRAPH_MAX_RANK];
    mp_fix *fix;
    int nfix;
    int heads;            /* 1: attention heads split (a Reshape into heads inside) */
    int co[MP_MAX_CO];    /* column-parallel MatMuls beside a on its input (SwiGLU's up beside its gate) */
    int nco;
    unsigned char *nrep;  /* [n_nodes] > 1: the node computes on key/value heads replicated over that many tensor
                             ranks (tp exceeds the heads); its weights are split tp / rep ways, rank r taking
                             block r / rep */
} mp_pair;

/* How one model weight is laid out over the tensor ranks. */
typedef struct {
    char *name;
    int axis;             /* -1 replicated; else split along this axis into tp equal blocks */
    int rank0_only;       /* b's Gemm bias: added once, on tensor rank 0 (the others' Gemm has no C) */
    int ngroups;          /* > 1: the axis is ngroups groups of these sizes, each split tp ways (fused QKV) */
    int64_t groups[TERN_GRAPH_MAX_RANK];
    int rep;              /* 1; > 1: a key/value projection whose heads tp exceeds: split tp / rep ways, tensor rank
                             r holding block r / rep (rep ranks share it: their gradients are summed over them) */
    int64_t blk;          /* > 0: blocks of blk along the axis, the last padded with zeros (a vocabulary tp does not
                             divide); 0: the axis / (tp / rep) exactly */
} mp_wspec;

/* A value that crosses from one segment to a later one (or the data input). */
typedef struct {
    char *name;
    size_t count;
    int rank;
    int64_t dims[TERN_GRAPH_MAX_RANK];
    int from;             /* producing segment */
    int partial;          /* produced by a pair's b (or the vocabulary-parallel embedding): all-reduced over the
                             tensor ranks in the forward */
    int vsplit;           /* the LM head's logits: each tensor rank's own vocabulary columns (count, dims a rank's) */
    int sp;               /* sequence parallelism: held as row shards, tensor rank r's rows [r count / tp, (r + 1)
                             count / tp) at that place of its buffer; gathered before a program that reads it whole */
    int64_t sdims[TERN_GRAPH_MAX_RANK]; /* sp: a rank's shard (dims[0] / tp rows), as the row-sharded programs see it */
} mp_xv;

/* A segment program: a scratch trainer whose t.g/t.rt/t.w are the segment's (weights include its crossing
 * inputs, whose gradients are the segment's input gradients). */
typedef struct {
    tern_trainer m;       /* the gradient program (forward, the segment's loss, backward) */
    tern_exe fexe;        /* the forward program (no loss); unused on the last segment */
    tern_rt *frt;
    double flops;
} mp_prog;

/* mp_seg.vocab: vocabulary parallelism (vocab_parallel.c) */
#define MP_VOCAB_EMBED 1  /* the token embedding's Gather: rows split, looked up where in range, partial output */
#define MP_VOCAB_HEAD 2   /* the LM head: columns split, the rank's logits out */
#define MP_VOCAB_LOSS 3   /* the cross-entropy across the tensor group (no graph: mp_plan's vce programs) */

typedef struct {
    int pair;             /* -1: replicated over the tensor ranks */
    int vocab;            /* 0, or MP_VOCAB_*: split by vocabulary over the tensor ranks */
    int stage;
    int *nodes, nn;       /* plan-graph node indices */
    int *xin, nxin;       /* crossing values read (mp_xv indices) */
    int *xout, nxout;     /* crossing values written */
    int last;             /* holds the model output and the loss */
    int sp;               /* sequence parallelism: runs on each tensor rank's 1/tp of the micro-batch's rows */
    mp_prog prog;         /* compiled once: every tensor rank runs it on its own shards */
    int *xw;              /* [m.nw] the crossing value a program weight stands for, -1 a model weight */
} mp_seg;

typedef struct {
    int64_t tp, pp, dp, micro;   /* layout; micro-batches per step on each data replica */
    int64_t mb;                  /* rows of a micro-batch */
    int64_t batch;               /* the whole step's rows */
    tern_graph *g;               /* the plan graph: the model, data bound, sorted, weights as inputs, inferred */
    mp_pair *pairs;
    int npairs;
    mp_wspec *ws;
    int nws;
    mp_xv *xv;
    int nxv;
    mp_seg *seg;
    int nseg;
    int *stage_first;            /* [pp + 1] first segment of each stage */
    int data_val;                /* plan-graph id of the data input, -1 none */
    unsigned char *wd;           /* [n_nodes] nodes computing from weights and constants only (a weight's
                                    Transpose): no segment's own, copied into every segment that reads them */
    char **frozen;               /* the model's initializers kept constant (freeze.c), by name */
    int nfrozen;
    /* vocabulary parallelism (vocab_parallel.c): the token embedding's Gather and the LM head's node (-1 none), the
     * vocabulary V and each rank's block of it (ceil(V / tp): the last rank's padded), the cross-entropy programs */
    int vemb, vhead;
    char *vweight[2];            /* the embedding's and the head's weight names */
    int64_t vocab, vblk;
    tern_exe vce[3];
    tern_rt *vcrt[3];
    double vce_sec[3];           /* timing-only: each program's time (-1 not run yet) */
    int64_t vrows;               /* rows of a micro-batch's logits */
    /* sequence parallelism (docs/training.md): the programs between tensor-parallel regions on mb / tp rows; gsp
     * the plan graph at that batch (the row-sharded programs' constants: shapes folded for their rows) */
    int sp;
    int64_t sp_sub;              /* > 1: sequence parallelism inside a row (mb dividing tp): tensor rank r holds token
                                    block r of the micro-batch's mb x S, positions of one row (sequence_parallel.c);
                                    sp_sub = tp / mb blocks a row. 0: whole rows (gsp) */
    tern_graph *gsp;
} mp_plan;

/* tp_pairs.c: the pair rule. isw marks the plan graph's weights. */
tern_status mp_find_pairs(tern_trainer *t, mp_plan *p, const unsigned char *isw, tern_error *err);
/* a weight's layout over the tensor ranks (axis -1: replicated; grp: the pair whose Split groups it follows) */
tern_status mp_add_wspec(mp_plan *p, const char *name, int axis, int rank0, const mp_pair *grp, int rep, int64_t blk,
                         tern_error *err);
int mp_pair_of(const mp_plan *p, int node);
int mp_is_linear(const tern_graph_node *n);
/* the 2-D weight behind linear node n's second input (*w; *trans: multiplied by its transpose), K and N; 0 none */
int mp_linear_kn(const tern_graph *g, const unsigned char *isw, const tern_graph_node *n, int *w, int64_t *k,
                 int64_t *nn, int *trans);
/* every output of node i is a constant of the plan graph (folded shape arithmetic) */
int mp_known_const(const tern_graph *g, int i);

/* tensor_parallel.c */
tern_status mp_plan_build(tern_trainer *t, mp_plan *p, tern_error *err);
tern_status mp_build_programs(tern_trainer *t, mp_plan *p, tern_error *err);
void mp_plan_free(mp_plan *p);
/* weight spec of a model weight (NULL: none, replicated) */
const mp_wspec *mp_wspec_of(const mp_plan *p, const char *name);
/* element e of the shard of tensor rank r (of tp) for a row-major tensor: copy out (dir 0) or back (dir 1) */
void mp_shard_copy(const float *full, float *shard, int rank, const int64_t *dims, int axis, int64_t tp, int64_t r,
                   int back);
/* the same for an axis made of groups (ngroups sizes), rank r taking block r of each */
void mp_shard_copy_g(const float *full, float *shard, int rank, const int64_t *dims, int axis, int64_t tp, int64_t r,
                     int back, int ngroups, const int64_t *groups);
/* tensor rank r's shard of a weight laid out as ws says (replicated blocks, padded blocks, groups) */
void mp_shard_copy_ws(const mp_wspec *ws, const float *full, float *shard, int rank, const int64_t *dims, int64_t tp,
                      int64_t r, int back);
/* the shard's length along ws->axis */
int64_t mp_shard_len(const mp_wspec *ws, const int64_t *dims, int64_t tp);
/* compile + load and live-code pruning: train_compile_load, train_prune_dead (train_internal.h) */

/* vocab_parallel.c: vocabulary-parallel embedding and cross-entropy (Megatron-LM's) */
#define MP_VOFF "tern.mp.voff"
tern_status mp_vocab_find(tern_trainer *t, mp_plan *p, const unsigned char *isw, tern_error *err);
int mp_vocab_of(const mp_plan *p, int node);
/* in a segment graph whose weights are rank shards: the embedding's Gather looks up ids - MP_VOFF (an input) where
 * they fall in the rank's block, zeros elsewhere */
tern_status mp_vocab_embed_graph(const mp_plan *p, tern_graph *g, tern_error *err);
tern_status mp_vocab_build(tern_trainer *t, mp_plan *p, uint64_t *hbm, double *flops, tern_error *err);
/* One micro-batch's cross-entropy across the tensor group: l[r] rank r's logits (rows x vblk), labels the rows'
 * classes; dl[r] gets the gradient of the loss (times inv) for rank r's logits, *loss the loss (times inv), *secs
 * the programs' and collectives' time. l NULL: timed only. */
tern_status mp_vocab_ce(tern_trainer *t, mp_plan *p, tern_fabric *tpfab, float *const *l, float *const *dl,
                        const int64_t *labels, size_t rows, float inv, double *loss, double *secs, tern_error *err);
void mp_vocab_free(mp_plan *p);

/* sequence_parallel.c: with p->sp, the plan graph at mb / tp rows (p->gsp), the row-sharded segments (mp_seg.sp)
 * and crossing values (mp_xv.sp, sdims), each checked to compute a row from that row alone */
tern_status mp_sp_plan(tern_trainer *t, mp_plan *p, const unsigned char *isw, tern_error *err);

/* pipeline_parallel.c */
tern_status train_mp_create(tern_trainer *t, tern_error *err);
tern_status train_mp_step(tern_trainer *t, const void *x, size_t x_count, const void *labels, size_t label_count,
                          tern_train_step_info *info, tern_error *err);
void train_mp_free(tern_trainer *t);

#define MP_LOSS "tern.mp.loss"
#define MP_DY "tern.mp.dy."


/* The layout step's state (pipeline_parallel.c runs it; mp_comm.c holds its collectives). */
typedef struct {
    char *name;
    int full;               /* index in t->w */
    int axis, rank0;        /* mp_wspec: split axis (-1 replicated); rank 0 only (ranks > 0 hold zeros) */
    int ngroups;            /* the split axis in groups (fused QKV) */
    int tied;               /* > 0: a copy of the weight an earlier stage holds too (tied embeddings): its
                               gradients are summed over the stages, its norm counted once */
    int rep;                /* mp_wspec's: > 1 key/value heads replicated over rep tensor ranks (block r / rep) */
    int64_t blk;            /* mp_wspec's: > 0 blocks of blk along the axis, the last padded (a vocabulary) */
    int sp;                 /* sequence parallelism: read by row-sharded programs only, so each tensor rank's gradient
                               is its rows' part, summed over the tensor group (sp_coll) */
    int64_t groups[TERN_GRAPH_MAX_RANK];
    size_t count, off;      /* shard elements, offset in the stage's flat vector */
    int rank;
    int64_t dims[TERN_GRAPH_MAX_RANK]; /* the full weight's */
} mp_wt;

typedef struct {
    mp_wt *w;
    int nw;
    size_t flat;
    tern_exe uexe;
    tern_rt *urt;
} mp_stage;

struct train_mp {
    mp_plan p;                 /* p.pp: the model chunks, pp x vpp (the plain layouts: pp) */
    int64_t n;                 /* tp p.pp dp: the buffers' (data replica, chunk, tensor rank) */
    int64_t P, V, cores;       /* the layout's pp and vpp (chunk g on stage g mod P); its tp pp dp NeuronCores */
    mp_stage *stg;
    int **sidx;                /* [seg][m.nw] the program weight's entry in its stage (-1 crossing or untrained) */
    float **val, **st[2];      /* [s tp + r] flat weights and optimizer state */
    float **gacc;              /* [(d pp + s) tp + r] gradients summed over micro-batches, padded to maxflat */
    size_t maxflat;
    float **act, **dact, **gx; /* [r][x offset] activations, their gradients, one program's input gradients */
    float *tmp;
    double *fsec;              /* [seg] the forward program's time of the current micro-batch */
    int nst;
    double gscale;
    tern_fabric *fab, *tpfab;
    double *tf, *tb;           /* [s] forward / backward time of one micro-batch on stage s */
    double p2p_f, p2p_b;       /* [per cut, the largest] activation / gradient transfer */
    int zero;                  /* ZeRO-1 over the data replicas: each updates block d of every flat vector */
    size_t zshard;             /* elements of a block (the longest stage's flat / dp, rounded up) */
    tern_exe zexe;
    tern_rt *zrt;
    float **wbuf;              /* [rank] the all-gather's buffer, dp x zshard */
    float *zb[4];              /* one block's p, g, state */
    int64_t acc;               /* --accumulate A: the step's groups of the batch (p.micro and p.batch include them) */
    double t_znorm;            /* ZeRO-1 with clipping: the norm's one-element all-reduce over the data replicas (in t_dp) */
    double t_tied;             /* exchanging tied weights' gradients between their stages */
    size_t tied_count;
    double t_kv;               /* the replicated key/value heads' gradient all-reduces over the ranks sharing one */
    int kvrep[8], nkvrep;      /* the replications present (each a collective of its own group size) */
    double t_sp;               /* sequence parallelism: the row-sharded programs' weight gradients summed over each
                                  tensor group */
    size_t spmax;              /* the largest chunk's elements of those weights (one bucket a chunk) */
    unsigned char *gath;       /* [nxv] sequence parallelism: the row-sharded value gathered this micro-batch */
    double act_sec, act_bytes; /* one micro-batch's tensor-group collectives on activations: time, ring bytes a rank */
    size_t kvmax[8];           /* the largest chunk's elements of weights replicated kvrep[i] ways */
    double t_span, t_work, t_dp, t_upd, t_tp;
    double t_span1, t_work1;   /* interleaved: plain 1F1B of the same chunks, stage s holding s V .. s V + V - 1 */
    double *ps_f, *ps_g;       /* timing-only: [seg] the forward / gradient program's time (-1 not run yet) */
    uint64_t synced_step;
    float **synced_ptr;
    /* over MPI processes (mp_procs.c): this process's data replicas (every one without a transport), the first */
    const tern_transport *tr;
    unsigned char *dlocal;
    int64_t d0;
};


/* mp_comm.c: the layout step's ranks and collectives */
unsigned mp_rank_of(const struct train_mp *mp, int64_t d, int64_t s, int64_t r);
unsigned mp_core_of(const struct train_mp *mp, int64_t d, int64_t g, int64_t r);
tern_status mp_p2p_time(struct train_mp *mp, int64_t s, size_t count, int dir, double *secs, tern_error *err);
size_t mp_xoff(const mp_plan *p, int x);
tern_status mp_tp_coll(struct train_mp *mp, tern_coll_op op, float **buf, size_t off, size_t count, double *secs,
                       tern_error *err);
tern_status mp_sp_gather_in(struct train_mp *mp, const mp_seg *sg, float **buf, double *secs, tern_error *err);
tern_status mp_sp_backward_gather(struct train_mp *mp, const mp_seg *sg, float **act, float **dact, double *secs,
                                  tern_error *err);
tern_status mp_dp_coll(struct train_mp *mp, tern_coll_op op, float **bufs, size_t count, double *secs,
                       tern_error *err);
tern_status mp_group_coll(struct train_mp *mp, float **bufs, int sp, double *secs, tern_error *err);

#endif
