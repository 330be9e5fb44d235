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
} mp_wspec;

/* A value that crosses from one segment to a later one (or the data input). */
typedef struct {
    char *name;
    size_t count;
    int rank;
    int64_t dims[TERN_GRAPH_MAX_RANK];
    int from;             /* producing segment */
    int partial;          /* produced by a pair's b: all-reduced over the tensor ranks in the forward */
} mp_xv;

/* A segment program: a scratch trainer whose t.g/t.rt/t.w are the segment's (weights include its crossing
 * inputs, whose gradients are the segment's input gradients). */
typedef struct {
    tern_trainer m;       /* the gradient program (forward, the segment's loss, backward) */
    tern_exe fexe;        /* the forward program (no loss); unused on the last segment */
    tern_rt *frt;
    double flops;
} mp_prog;

typedef struct {
    int pair;             /* -1: replicated over the tensor ranks */
    int stage;
    int *nodes, nn;       /* plan-graph node indices */
    int *xin, nxin;       /* crossing values read (mp_xv indices) */
    int *xout, nxout;     /* crossing values written */
    int last;             /* holds the model output and the loss */
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
} mp_plan;

/* tp_pairs.c: the pair rule. isw marks the plan graph's weights. */
tern_status mp_find_pairs(tern_trainer *t, mp_plan *p, const unsigned char *isw, tern_error *err);
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
/* compile + load and live-code pruning: train_compile_load, train_prune_dead (train_internal.h) */

/* pipeline_parallel.c */
tern_status train_mp_create(tern_trainer *t, tern_error *err);
tern_status train_mp_step(tern_trainer *t, const void *x, size_t x_count, const void *labels, size_t label_count,
                          tern_train_step_info *info, tern_error *err);
void train_mp_free(tern_trainer *t);

#define MP_LOSS "tern.mp.loss"
#define MP_DY "tern.mp.dy."

#endif
