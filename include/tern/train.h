/* tern training layer: from an ONNX model to a trained one on the simulated NeuronCore. A trainer turns the
 * model into one training-step graph - forward, loss, reverse-mode gradients (src/train/grad_*.c), global
 * gradient norm and clipping, and the optimizer update - whose inputs are the batch, the targets, the weights,
 * the optimizer state and the step's scalars, and whose outputs are the loss, the gradient norm and the updated
 * weights and state. That graph is compiled once (compiler.h) and executed per step by the runtime (runtime.h),
 * the updated weights fed back as the next step's inputs, so every forward, backward and optimizer operation is a
 * device kernel with its predicted time. docs/training.md is the long form. */
#ifndef TERN_TRAIN_H
#define TERN_TRAIN_H

#include <stddef.h>
#include <stdint.h>

#include "tern/base.h"
#include "tern/graph.h"
#include "tern/num.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    TERN_LOSS_CROSS_ENTROPY, /* logits [N, C] (or [B, ..., C]) and int64 class labels; mean over counted rows */
    TERN_LOSS_MSE,           /* mean of (output - target)^2, target the output's shape */
    TERN_LOSS_OUTPUT         /* a scalar output the model computes itself */
} tern_loss_kind;

typedef enum { TERN_OPT_SGD, TERN_OPT_ADAM, TERN_OPT_ADAMW, TERN_OPT_LAMB } tern_optimizer_kind;

/* Learning-rate schedules: the rate of step t (1-based) is lr x f(t), f = t / warmup during the warm-up steps,
 * then 1 (constant), (T - t) / (T - warmup) (linear) or (1 + cos(pi (t - warmup) / (T - warmup))) / 2 (cosine)
 * for T = total_steps; the same as PyTorch's LambdaLR with that lambda stepped after every optimizer step. */
typedef enum { TERN_LR_CONSTANT, TERN_LR_LINEAR, TERN_LR_COSINE } tern_lr_schedule;

/* One data input's binding (tern_train_opts.inputs): its name and the shape of one row (its dims after axis 0,
 * axis 0 being the samples; row_rank < 0: the model's declared dims). */
typedef struct tern_train_input_rows {
    const char *name;
    int row_rank;
    int64_t row_dims[TERN_GRAPH_MAX_RANK];
} tern_train_input_rows;

typedef struct {
    tern_loss_kind loss;
    const char *output;       /* the model output the loss reads (NULL: the first); for TERN_LOSS_OUTPUT the
                                 scalar loss output itself (required) */
    int64_t ignore_index;     /* cross-entropy: rows with this label count for nothing (default -100) */
    double label_smoothing;   /* cross-entropy: in [0, 1) */
    tern_optimizer_kind optimizer;
    double lr;                /* default 1e-3 */
    double momentum;          /* SGD; 0 = plain SGD */
    int nesterov;             /* SGD with momentum */
    double weight_decay;      /* SGD/Adam: added to the gradient (L2); AdamW: decoupled */
    double beta1, beta2, eps; /* Adam/AdamW: 0.9, 0.999, 1e-8 */
    double clip_norm;         /* > 0: gradients scaled by min(1, clip_norm / (global norm + 1e-6)) */
    tern_lr_schedule schedule;
    int64_t warmup_steps;     /* linear warm-up from lr / warmup (0: none) */
    int64_t total_steps;      /* T of the linear and cosine decays */
    int64_t batch;            /* rows per step (axis 0 of the data input) */
    /* the shape of one data row (the data input's dims after axis 0): binds its symbolic dims and is checked
     * against its fixed ones. row_rank < 0: the model's declared dims. */
    int row_rank;
    int64_t row_dims[TERN_GRAPH_MAX_RANK];
    /* models with several data inputs (every input that is not an initializer; docs/training.md): n_inputs > 0
     * binds each by name with the shape of one of its rows (as row_rank/row_dims above, which are then unused).
     * Every data input must be named once: a missing, unknown or repeated name is an error naming it. The
     * pointers need only live through tern_train_create. n_inputs 0: one data input shaped by row_rank. */
    const struct tern_train_input_rows *inputs;
    size_t n_inputs;
    const char *machine;      /* NULL: trn1.2xlarge */
    tern_dtype matmul_dtype;  /* TERN_DTYPE_FP32 (default here: training matches PyTorch's fp32) or BF16 */
    /* pure BF16 (--precision bf16-sr): every weight and its optimizer state is stored in BF16 (graph inputs and
     * outputs of that type, half the HBM); the step computes in fp32 from them and casts each new value back to
     * BF16 on the device with the core's rounding mode `rounding`: TERN_ROUND_STOCHASTIC for bf16-sr (seeded per
     * step, docs/training.md), TERN_ROUND_RNE to show why (an update under half an ulp vanishes) */
    int bf16_weights;
    tern_round rounding;      /* the core's rounding of every write to a narrower type (default RNE) */
    /* activation recomputation (--recompute): the forward cut into this many segments of about equal activation
     * bytes, each but the last computed again just before its backward, so only their inputs are kept; -1 about
     * sqrt(n) segments for n forward nodes; 0 off. Bit for bit the same losses and weights; less HBM, more time */
    int recompute;
    int timing_only;          /* predict the step time without computing values */
    int grads_as_outputs;     /* also output every weight's gradient (tern_train_grad): tests and debugging */
    uint64_t seed;            /* Dropout in training mode: the masks' seed (masks depend on seed, step, node) */
    int64_t accumulate;       /* > 1: each step sums the gradients of this many micro-batches of `batch` rows
                                 (a step's data and labels are accumulate x batch rows) before one update */
    /* Data parallelism (docs/training.md): `ranks` NeuronCores of `machine` (the fabric's rank order,
     * fabric.h), each running the same compiled gradient graph on batch / ranks rows; the gradients are
     * all-reduced (collective.h) and every rank runs the same optimizer update. ranks <= 1: one core. */
    int64_t ranks;
    int zero;                 /* 1: ZeRO stage 1, the optimizer state sharded over the ranks (reduce-scatter,
                                 shard update, all-gather); 0: none */
    int dp_exact;             /* fixed reduction tree: the gradient is the sum over dp_chunks row chunks in one
                                 tree whatever the rank count, so 1, 2, 4 ... ranks agree bit for bit */
    int64_t dp_chunks;        /* dp_exact: the tree's leaves (a power of two that ranks divides; 0: ranks) */
    /* Over MPI processes (docs/training.md, "Over MPI processes"): the transport of `mpirun -np K`
     * (transport.h). The ranks' chips are spread over the K processes as tern_fabric_set_transport spreads them;
     * each process runs only its own ranks' programs and the collectives cross processes, with the same bits
     * and predicted times as one process. Every process calls every tern_train_* function in the same order; a
     * failure on any process is returned by all (tern_transport_agree). A tensor/pipeline layout spreads by whole
     * data replicas; one core or one replica refuses K > 1. NULL: one process. */
    const struct tern_transport *transport;
    int no_fused_attention;   /* 1: differentiate attention blocks node by node (MatMul, Softmax, ... rules)
                                 instead of one fused tern.AttentionGrad each (docs/training.md) */
    int no_fused_optimizer;   /* 1: the optimizer update node by node instead of one fused tern.SGDUpdate /
                                 tern.AdamUpdate per weight (bit-identical; docs/training.md "The step graph") */
    int no_fused_elementwise; /* 1: every elementwise node of the step lowered on its own instead of chains as one
                                 pass over SBUF tiles (bit-identical; docs/compiler.md "Elementwise fusion") */
    /* Tensor and pipeline parallelism (docs/training.md): a layout tp x pp x ranks (ranks: the data replicas) of
     * the machine's cores; the model's Megatron linear pairs split over tp ranks, its linear layers staged over pp
     * in `micro` micro-batches (0: pp) on a 1F1B schedule. tp, pp <= 1: neither. vpp > 1: Megatron's interleaved
     * 1F1B, the model in pp x vpp chunks, chunk g on stage g mod pp (micro a multiple of pp). sp = 1 (tp > 1):
     * Megatron's sequence parallelism - the nodes between tensor-parallel regions (norms, residual adds) run on each
     * tensor rank's 1/tp of a micro-batch's rows, all-gathered before a column-parallel layer and reduce-scattered
     * after a row-parallel one (docs/training.md, "Sequence parallelism"). */
    int64_t tp, pp, micro, vpp;
    int sp;
    /* Initializers kept constant (not trained, written back unchanged; docs/training.md "Constants"): freeze
     * holds n_freeze exact names or fnmatch(3) globs ("blocks.*.cos"; "blocks.0.*" for a prefix), each of which
     * must match an initializer (else an error naming it); the pointers need only live through tern_train_create.
     * By default an additive attention mask (0 / <= -1e4 values read only by the Add before a Softmax) is also
     * constant, as PyTorch's register_buffer leaves it; no_auto_freeze 1 trains it. */
    const char *const *freeze;
    size_t n_freeze;
    int no_auto_freeze;
} tern_train_opts;

void tern_train_opts_default(tern_train_opts *o);
/* The learning rate of step t (1-based) under o's schedule. */
double tern_train_lr(const tern_train_opts *o, uint64_t step);
/* 1 when autodiff has a gradient rule for the registry op id (the rule may still refuse some attributes, such
 * as a 3-D Conv, naming them when the step is built); `tern ops` and docs/ops.md show it. */
int tern_train_op_has_gradient(tern_op_id id);

typedef struct tern_trainer tern_trainer;

typedef struct {
    uint64_t step;            /* 1-based */
    double loss, grad_norm;   /* grad_norm before clipping; NaN in timing-only mode */
    double step_seconds;      /* predicted device time of the step */
    double samples_per_s;
    double lr;                /* the step's learning rate (the schedule's) */
    double mfu;               /* training-graph matmul FLOPs / (peak x time), percent */
} tern_train_step_info;

/* Loads the model, builds and compiles the training step. A weight is every float initializer with at least
 * two elements that the loss depends on, but those kept constant (freeze, no_auto_freeze above); an op on a path from a weight to the loss with no gradient rule is an
 * error naming the node and the op. */
tern_status tern_train_create(const char *onnx_path, const tern_train_opts *o, tern_trainer **out, tern_error *err);
void tern_train_free(tern_trainer *t);
/* The float initializers kept constant (tern_train_opts.freeze and the default rule), in model order: name i
 * and in *why (may be NULL) "--freeze" or "attention mask"; NULL past the count. */
size_t tern_train_frozen_count(const tern_trainer *t);
const char *tern_train_frozen_name(const tern_trainer *t, size_t i, const char **why);

/* The (first) data input (NULL when the model has none) and its per-step shape; the class count for cross-entropy. */
const char *tern_train_data_name(const tern_trainer *t);
int tern_train_data_shape(const tern_trainer *t, int64_t *dims); /* returns the rank */
int64_t tern_train_classes(const tern_trainer *t);
int tern_train_data_is_int(const tern_trainer *t); /* 1: the data input takes int64 indices (token ids), not floats */
size_t tern_train_weight_count(const tern_trainer *t);
const char *tern_train_weight_name(const tern_trainer *t, size_t i);
/* Current values of weight i (count floats). */
const float *tern_train_weight(const tern_trainer *t, size_t i, size_t *count);
/* Gradient of weight i from the last step (opts.grads_as_outputs only; NULL otherwise). */
const float *tern_train_grad(const tern_trainer *t, size_t i, size_t *count);
double tern_train_model_flops(const tern_trainer *t); /* per step */
size_t tern_train_graph_nodes(const tern_trainer *t);  /* nodes of the training-step graph as built */
/* The attention blocks whose backward is one fused tern.AttentionGrad (*fused) and those differentiated node by
 * node (*unfused), with the latter's nodes and reasons ("" when none). */
const char *tern_train_attention_report(const tern_trainer *t, int *fused, int *unfused);
/* The step's HBM footprint per core as compiled (weights, state, gradients, activations); a step that does not
 * fit the machine's HBM is refused by tern_train_create with both figures. */
uint64_t tern_train_hbm_bytes(const tern_trainer *t, uint64_t *weights_and_state);

/* One step on batch x (batch x row values, row-major: floats, or int64 when tern_train_data_is_int). labels: cross-entropy int64[batch x ...] class indices;
 * MSE float[the output's elements]; none for TERN_LOSS_OUTPUT (NULL). Labels out of range, a data size
 * mismatch, and a loss or gradient that is not finite are errors naming the step, the tensor and the value;
 * after a non-finite step the weights are those before it. */
tern_status tern_train_step(tern_trainer *t, const void *x, size_t x_count, const void *labels, size_t label_count,
                            tern_train_step_info *info, tern_error *err);

/* Models with several data inputs: input i of tern_train_input_count (the model's order), its name, per-step
 * shape ([batch, row...]) and kind (1: int64 indices, 0: floats). */
size_t tern_train_input_count(const tern_trainer *t);
const char *tern_train_input_name(const tern_trainer *t, size_t i);
int tern_train_input_shape(const tern_trainer *t, size_t i, int64_t *dims); /* returns the rank */
int tern_train_input_is_int(const tern_trainer *t, size_t i);
/* One step with every data input bound by name: data[k] holds count values (whole rows, floats or int64 as the
 * input takes) of input name; every input the same number of rows, the rows of one sample at the same index in
 * each. A missing, unknown or repeated name, a count that is not the step's rows, or inputs of different row
 * counts are errors naming the input. tern_train_step is this call for a model with one data input. */
typedef struct {
    const char *name;
    const void *data;
    size_t count;
} tern_train_data;
tern_status tern_train_step_inputs(tern_trainer *t, const tern_train_data *data, size_t n, const void *labels,
                                   size_t label_count, tern_train_step_info *info, tern_error *err);

/* Writes the model with its trained weights: the input ONNX file with those initializers replaced (every other
 * byte of the model - names, dynamic axes, nodes - as it was), via a temporary file and rename. */
tern_status tern_train_save_onnx(const tern_trainer *t, const char *path, tern_error *err);

/* Checkpoints (docs/training.md): the step count, the caller's data position and order tag (the CLI's shuffle
 * seed), every weight and its optimizer state, closed by a CRC-32; written to PATH.tmp and renamed. Loading
 * refuses a corrupt, truncated or mismatched file naming the byte offset, and changes nothing then. */
tern_status tern_train_save_checkpoint(const tern_trainer *t, const char *path, uint64_t data_pos, uint64_t order,
                                       tern_error *err);
tern_status tern_train_load_checkpoint(tern_trainer *t, const char *path, uint64_t *data_pos, uint64_t *order,
                                       tern_error *err);
uint64_t tern_train_step_count(const tern_trainer *t); /* steps done (a resumed run counts the checkpoint's) */
/* Over MPI processes: gathers on process 0 what the files above write and only the ranks of other processes hold
 * (ZeRO-1's optimizer state shards or a layout's blocks), so that process 0 alone writes checkpoints and the
 * trained model.
 * Collective (every process calls it, before each such write); one process: nothing to do. */
tern_status tern_train_collect(tern_trainer *t, tern_error *err);

/* Data parallelism: what the last step did. ranks 1 (and zeros) for a one-core trainer. */
typedef struct {
    int64_t ranks, chunks;           /* data-parallel ranks; row chunks of the gradient (chunks / ranks per rank) */
    int zero;                        /* ZeRO stage */
    const char *algorithm;           /* the gradient collective's algorithm ("ring", "rdh", ...; "none": 1 rank) */
    uint64_t grad_bytes;             /* bytes each rank all-reduces (or reduce-scatters) per step */
    uint64_t state_bytes_per_rank;   /* optimizer state one rank holds (ZeRO-1: about 1/ranks of the total) */
    uint64_t state_bytes_total;      /* the optimizer state of the whole model */
    double compute_seconds;          /* last step: the slowest rank's forward + backward (all its chunks) */
    double comm_seconds;             /* last step: the gradient collectives (exposed: no overlap with compute) */
    double update_seconds;           /* last step: the optimizer update (ZeRO-1: of a shard) */
} tern_train_dp_info;
void tern_train_dp_stats(const tern_trainer *t, tern_train_dp_info *out);
/* Rank `rank`'s copy of weight i after the last step (every rank updates its own; they are equal bit for bit,
 * which each step checks). NULL for a rank that does not exist or in timing-only mode (ranks past 0). */
const float *tern_train_rank_weight(const tern_trainer *t, unsigned rank, size_t i, size_t *count);
/* (Over MPI processes: NULL for a rank another process runs.) */

/* Tensor / pipeline parallelism: the layout and the last step's time (all 1 and zeros without one). */
typedef struct {
    int64_t tp, pp, dp, micro;
    int64_t vpp;               /* model chunks per stage (1: plain 1F1B; > 1 interleaved) */
    int pairs;                 /* Megatron linear pairs split over the tensor ranks */
    int programs;              /* segment programs (each tensor rank runs its own shards through them) */
    double pipeline_seconds;   /* the 1F1B schedule's span (forwards, backwards, transfers, bubbles) */
    double bubble_seconds;     /* span less the busiest stage's compute */
    double plain_pipeline_seconds, plain_bubble_seconds; /* vpp > 1: plain 1F1B's span and bubbles for the same
                                  chunks' times, V consecutive chunks a stage (vpp = 1: the two above) */
    double dp_comm_seconds;    /* the data replicas' gradient all-reduce */
    double update_seconds;     /* the slowest (stage, tensor rank)'s optimizer update */
    double p2p_seconds;        /* one activation's transfer between stages */
    double tied_seconds;       /* tied weights' gradients exchanged between the first and last stage */
    double kv_seconds;         /* key/value heads replicated over tensor ranks (tp exceeds them): their gradients
                                  all-reduced over the ranks sharing a head */
    int64_t vocab;             /* > 0: the token embedding (and the LM head, cross-entropy) split by this vocabulary
                                  over the tensor ranks (vocab_head: 1 when the head is too) */
    int vocab_head;
    int zero;                  /* 1: ZeRO-1, the optimizer state in dp blocks (reduce-scatter, block update,
                                  all-gather: dp_comm_seconds is both collectives) */
    int sp;                    /* 1: sequence parallelism (tern_train_opts.sp) */
    double sp_seconds;         /* sp: the gradients of the weights the row-sharded programs read (the norms'),
                                  all-reduced over each tensor group */
    double zero_norm_seconds;  /* ZeRO-1 with clipping: the norm's one-element all-reduce over the data replicas (part
                                  of dp_comm_seconds; 0 otherwise) */
    double tp_act_seconds;     /* one micro-batch's tensor-group collectives on activations and their gradients
                                  (all-reduces; with sp, reduce-scatters and all-gathers), all stages */
    double tp_act_bytes;       /* the bytes one tensor rank sends in them on a ring (all-reduce 2 (tp - 1) / tp of
                                  the buffer, reduce-scatter and all-gather (tp - 1) / tp each) */
} tern_train_mp_info;
void tern_train_mp_stats(const tern_trainer *t, tern_train_mp_info *out);

#ifdef __cplusplus
}
#endif
#endif
