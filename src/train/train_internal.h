/* Private to the training layer: the trainer object shared by the step-graph builder (step_graph.c), the step
 * loop (trainer.c) and the ONNX writer (onnx_write.c). */
#ifndef TERN_TRAIN_INTERNAL_H
#define TERN_TRAIN_INTERNAL_H

#include "ad_internal.h"
#include "tern/compiler.h"
#include "tern/runtime.h"
#include "tern/train.h"

/* One weight: its values between steps, the graph names of its input and updated output, its optimizer state
 * (momentum buffer, or Adam's first and second moments) and optionally its gradient output. */
typedef struct {
    char *name;                 /* the initializer's name in the model */
    int rank;
    int64_t dims[TERN_GRAPH_MAX_RANK];
    size_t count;
    float *val;
    int trained;                /* 0: no gradient reaches it (kept as it is, as PyTorch leaves a grad of None) */
    char *out_name;             /* updated value */
    int n_state;
    float *state[2];
    char *state_in[2], *state_out[2];
    float *grad;                /* grads_as_outputs */
    char *grad_out;
    char *acc_in, *acc_out;     /* accumulation: the summed gradient's input and the micro-step's output */
    float *acc;
    float *spare[3];            /* where a step's new value (0) and state (1, 2) land before its checks pass; then
                                 * swapped with val / state, so no step allocates (and first touches) new buffers */
} train_weight;

/* A Dropout in training mode: replaced by Mul(x, mask) with the mask fed per execution (dropout.c). */
typedef struct {
    char *input;                /* the mask's graph input, "train.mask.<node>" */
    size_t count;               /* this program's elements (ldims) */
    double ratio;
    float *mask;
    size_t key;                 /* k: its place among the whole model's training-mode Dropouts */
    int rank;
    int64_t gdims[TERN_GRAPH_MAX_RANK]; /* the tensor of one chunk (micro-batch) on one core, all tensor ranks' */
    int64_t ldims[TERN_GRAPH_MAX_RANK]; /* this program's part of it */
    int split;                  /* -1, or the axis split tp ways: tensor rank r holds block r (ldims = gdims / tp);
                                 * TRAIN_DROP_TOKENS: [1, S b / tp, ...] of [b, S, ...], token block r (sequence
                                 * parallelism inside a row) */
    int ref_node;               /* the Dropout's node in t->drop_ref, -1 without one */
} train_dropout;
#define TRAIN_DROP_TOKENS (-2)

/* A data input of the model (every graph input that is not an initializer). Held in the trainer itself, so a
 * scratch trainer (the micro-step's, a data-parallel gradient graph's) needs to free only data_name. */
#define TRAIN_MAX_INPUTS 16
#define TRAIN_INPUT_NAME_MAX 256
typedef struct {
    char name[TRAIN_INPUT_NAME_MAX];
    int rank;
    int64_t dims[TERN_GRAPH_MAX_RANK]; /* one executable's: [batch, row...] */
    size_t count;               /* elements of one executable's batch */
    size_t row;                 /* elements of one row */
    int is_int;                 /* integer indices (token ids), given as int64; else floats */
    size_t off;                 /* byte offset of its row within a packed row */
} train_input;

struct tern_trainer {
    tern_train_opts o;
    char *path, *machine, *loss_out;
    tern_graph *g;
    tern_exe exe;
    tern_rt *rt;
    tern_exe exe_micro;         /* accumulation: the micro-step executable and its runtime */
    tern_rt *rt_micro;
    train_weight *w;
    size_t nw;
    char *data_name;            /* the first data input's name (NULL: the model has none) */
    train_input in[TRAIN_MAX_INPUTS]; /* the data inputs, in the model's order */
    size_t nin;
    size_t row_bytes;           /* one sample's packed row: each input's row in turn (int64 or float values) */
    size_t data_bytes;          /* one executable's rows packed: batch x row_bytes */
    size_t data_count;          /* values of the first input in one executable's batch (train_feed_batch) */
    char *read_out;             /* the model output the loss reads (cross-entropy, MSE), also a step output */
    size_t read_count;
    int64_t classes;            /* cross-entropy */
    size_t target_count;        /* elements of train.target */
    uint64_t step;
    double flops, peak, flops_micro;
    uint64_t hbm, state_bytes;  /* the step's HBM footprint per core; weights + optimizer state (host copies) */
    size_t nodes;
    float *scratch;             /* target buffer, read-out buffer */
    /* Device-resident weights (one-core trainer, trainer.c): with `carry`, a step that passes its checks makes its
     * updated weights and optimizer state the next step's inputs in HBM (tern_rt_carry) instead of taking them to
     * the host and setting them again. dev_valid: the runtime's inputs hold the current weights and state, so a
     * step sets none; dev_ahead: they are newer than w[].val / state[], which train_sync_host fetches when read
     * (tern_train_weight, checkpoints, the ONNX export). */
    int carry, dev_valid, dev_ahead;
    train_dropout *drop;
    size_t ndrop;
    const tern_graph *drop_ref; /* a layout's program (tensor_parallel.c): the whole model, whose Dropouts give each
                                 * Dropout here its key and whole tensor; NULL: this graph is the whole model */
    int64_t drop_tp;            /* the tensor ranks a layout's program's Dropout parts may be split over */
    struct train_dp *dp;        /* data parallelism (data_parallel.c); NULL: one core */
    struct train_mp *mp;        /* tensor / pipeline parallelism (pipeline_parallel.c); NULL: none */
    ad_att_report att;          /* the fused attention backward's plan (grad_attention.c) */
    struct train_frozen_list *frozen; /* initializers kept constant (freeze.c) */
    int freeze_exact;           /* o.freeze holds exact names decided on the whole model (a layout's segment
                                 * program, tensor_parallel.c): those absent from this graph are not an error */
    int dp_batchnorm;           /* data parallelism (data_parallel.c) builds this graph: BatchNormalization trains
                                 * on the rank's rows (TRAIN_GRAPH_GRADS / MICRO output its running statistics'
                                 * update, TRAIN_GRAPH_UPDATE none); else refused under TRAIN_GRAPH_GRADS / UPDATE */
};

#define TRAIN_TARGET "train.target"
#define TRAIN_INV_COUNT "train.inv_count"
#define TRAIN_LOSS "train.loss"
#define TRAIN_GNORM "train.grad_norm"
#define TRAIN_LR "train.lr"
#define TRAIN_STEP_SIZE "train.step_size"
#define TRAIN_BC2_SQRT "train.bc2_sqrt"
#define TRAIN_DECAY "train.decay"
#define TRAIN_BC1 "train.bc1"
#define TRAIN_GSCALE "train.gscale"

/* step_graph.c: turns t->g (the model, weights still initializers) into the training-step graph. */
/* grads_only: TRAIN_GRAPH_STEP the whole step; TRAIN_GRAPH_MICRO the micro-step graph of accumulation (loss and
 * gacc + g per weight, no update); TRAIN_GRAPH_GRADS (data parallelism) the loss and each weight's g as output
 * train.dp.grad.<w> (acc_out); TRAIN_GRAPH_UPDATE the norm, clipping and update of gradients given as inputs
 * train.dp.grad.<w> (acc_in) times train.gscale, no loss (the forward and backward are dead code). */
#define TRAIN_GRAPH_STEP 0
#define TRAIN_GRAPH_MICRO 1
#define TRAIN_GRAPH_GRADS 2
#define TRAIN_GRAPH_UPDATE 3
/* "train: out of memory" (TERN_ERR_NOMEM), and a copy of a string (NULL when out of memory): the layers' one pair */
tern_status train_oom(tern_error *err);
char *train_strdup(const char *s);
tern_status train_build_step_graph(tern_trainer *t, int grads_only, tern_error *err);
/* freeze.c: why initializer v stays constant ("--freeze", "attention mask") or NULL; the check of o->freeze's
 * names against t->g, recording the constant list in t->frozen when record; its free. */
const char *train_frozen_why(const tern_graph *g, int v, const tern_train_opts *o);
tern_status train_freeze_check(tern_trainer *t, int record, tern_error *err);
void train_frozen_free(tern_trainer *t);
/* The optimizer update nodes of weight w (value p, gradient g, the step's scalar inputs sc as the step graph
 * makes them); returns the new value, the new state in st_out. */
int train_update_nodes(tern_trainer *t, ad_ctx *a, train_weight *w, int p, int g, const int *sc, int *st_out);

/* data_parallel.c: tern_train_create and tern_train_step of a data-parallel trainer (t->o.ranks > 1, ZeRO or the
 * fixed reduction tree), after t->path, t->machine and t->loss_out are set. */
tern_status train_dp_create(tern_trainer *t, tern_error *err);
tern_status train_dp_step(tern_trainer *t, const void *x, size_t x_bytes, const void *labels, size_t label_count,
                          tern_train_step_info *info, tern_error *err);
void train_dp_free(tern_trainer *t); /* t->dp and the per-rank copies; t->rt back to the update graph's */
/* data_parallel.c's graph-building helpers, shared with the tensor/pipeline trainer: live-code pruning (a node kept
 * when a graph output depends on it, an input when a kept node reads it; then compact, sort, infer), a new
 * rank-1 float input of n elements, and an Identity naming a program output. */
tern_status train_prune_dead(tern_graph *g, tern_error *err);
int train_flat_input(ad_ctx *a, const char *name, int64_t n);
int train_name_value(ad_ctx *a, int v, const char *name);
tern_status train_set_outputs(tern_graph *g, const int *outs, int no, tern_error *err);
/* Compile g for t's machine and matmul dtype and load it (functional, or timing-only with --timing-only); the
 * compile's model FLOPs into *flops and its HBM bytes added to *hbm when given. */
tern_status train_compile_load(tern_trainer *t, tern_graph *g, tern_exe *exe, tern_rt **rt, double *flops,
                               uint64_t *hbm, const char *what, tern_error *err);
/* trainer.c's helpers the data-parallel trainer shares. The step's data travel between them packed: x holds
 * x_bytes, whole rows of t->row_bytes (each a sample's row of every input in turn; for one input simply its
 * values), so rows [j*b, (j+1)*b) of a batch start at x + j * t->data_bytes. train_feed_rows feeds one
 * executable's batch of packed rows (and the targets); train_feed_batch is the same for a model with at most one
 * data input, x_count its values (t->data_count). */
tern_status train_bind_data(tern_trainer *t, tern_error *err);
tern_status train_ce_targets(tern_trainer *t, const int64_t *lab, size_t n, float *inv, tern_error *err);
tern_status train_feed_rows(tern_trainer *t, const void *x, size_t x_bytes, const void *labels, size_t label_count,
                            uint64_t step, const float *inv_count, tern_error *err);
tern_status train_feed_batch(tern_trainer *t, const void *x, size_t x_count, const void *labels, size_t label_count,
                             uint64_t step, const float *inv_count, tern_error *err);
tern_status train_set_step_scalars(tern_trainer *t, uint64_t step, double *lr, tern_error *err);
void train_free_weights(train_weight *w, size_t nw);
/* n floats into / out of the runtime t->rt points at, converted for a BF16 input or output (pure BF16), and the
 * core's rounding mode and seed for execution `micro` of step `step` */
tern_status train_set_f(tern_trainer *t, const char *name, const float *v, size_t n, tern_error *err);
tern_status train_get_f(tern_trainer *t, const char *name, float *v, size_t n, tern_error *err);
void train_set_rounding(tern_trainer *t, uint64_t step, int64_t micro);
/* Brings the weights and optimizer state from the device into w[].val / state[] when the device's are newer
 * (dev_ahead; the host copies are a cache of them, so t stays logically const); then marks them current. */
tern_status train_sync_host(const tern_trainer *t, tern_error *err);
/* 1 and the index of the first NaN or infinity in v[0..n), else 0: a step names the first tensor and element that went non-finite. */
int train_first_nonfinite(const float *v, size_t n, size_t *at);
/* dropout.c. The mask of dropout k at step `step` (1-based) over `count` elements: element e kept (scaled by
 * 1 / (1 - ratio)) when the e-th draw of splitmix64 seeded with seed ^ step * 0xD1B54A32D192ED03 ^ (k + 1) *
 * 0x8CB92BA72F3D8DD7, as u = (z >> 11) 2^-53, is at least ratio; 0 otherwise. */
void train_dropout_mask(uint64_t seed, uint64_t step, size_t k, double ratio, float *mask, size_t count);
/* d->mask for chunk `chunk` of the step (the chunk's block of the leading axis) and tensor rank trank (block trank
 * of d->split): the same draws as the one-core whole-batch mask gives those elements. */
void train_dropout_part(uint64_t seed, uint64_t step, const train_dropout *d, int64_t chunk, int64_t trank);
/* Each training-mode Dropout of a->g becomes Mul(x, train.mask.<node>), recorded in t->drop (t->drop_ref: keyed
 * and shaped by the whole model's); returns 0 or -1 with a failed. */
int train_dropout_rewrite(tern_trainer *t, ad_ctx *a);
/* Sets every mask of t->drop that rt's executable reads, for chunk `chunk` and tensor rank trank of step `step`. */
tern_status train_feed_masks(const tern_trainer *t, tern_rt *rt, uint64_t step, int64_t chunk, int64_t trank,
                             tern_error *err);
void train_dropout_free(train_dropout *d, size_t n);

#endif
