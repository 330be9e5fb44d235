/* tern plan layer: the time, memory and dollar cost of a training job at cluster scale (docs/planner.md). A model
 * is described without weights by its Hugging Face config.json (Llama, GPT-2, BERT, Mixtral). For a cluster
 * ("32xtrn1.32xlarge") and a job (sequence length, global batch) the planner enumerates parallel layouts
 * (tensor x pipeline x data parallel, micro-batch size, activation recomputation, ZeRO-1), checks each against a
 * core's HBM with the bytes of every part, and predicts the step time: each distinct per-rank transformer layer
 * (forward and backward graphs, weights symbolic: graph inputs with no data) is compiled with tern_compile and
 * run timing-only on the machine's simulated core, once per shape (a cache); the collectives of the layout (TP
 * all-reduces, DP gradient all-reduce or ZeRO-1 reduce-scatter + all-gather, PP send/receive) are timed by
 * tern_collective_time over the cluster's fabric and its replica groups; and a 1F1B pipeline schedule over the
 * micro-batches is simulated event by event. Cost comes from on-demand prices in a data file with sources; a
 * GPU comparison uses a stated roofline-plus-communication model. Nothing here prints. */
#ifndef TERN_PLAN_H
#define TERN_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "tern/base.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { TERN_MODEL_LLAMA = 0, TERN_MODEL_GPT2, TERN_MODEL_BERT, TERN_MODEL_MIXTRAL } tern_model_family;

/* A transformer described by its configuration (all counts >= 1). */
typedef struct {
    tern_model_family family;
    char model_type[32];   /* as the file says ("llama", "gpt2", "bert", "mixtral") */
    int64_t hidden;        /* hidden_size / n_embd */
    int64_t ffn;           /* intermediate_size / n_inner (GPT-2 default 4 x n_embd) */
    int64_t heads;         /* query heads */
    int64_t kv_heads;      /* key/value heads (= heads without grouped-query attention) */
    int64_t head_dim;      /* hidden / heads unless head_dim is given */
    int64_t layers;
    int64_t vocab;
    int64_t max_positions;
    int64_t type_vocab;    /* BERT token types; 0 otherwise */
    int64_t experts;       /* Mixtral num_local_experts; 1 for a dense model */
    int64_t experts_per_tok;
    int gated_mlp;         /* SwiGLU (gate, up, down) instead of GELU (fc, proj) */
    int rms_norm;          /* RMSNorm instead of LayerNorm */
    int causal;            /* decoder (causal attention) vs encoder */
    int tied_embeddings;   /* tie_word_embeddings */
} tern_model_cfg;

const char *tern_model_family_name(tern_model_family f); /* "llama", "gpt2", "bert", "mixtral" */
/* Parse a config.json text (source names it in messages). Fields with a Hugging Face default take it; a missing
 * field without one, a non-integer or non-positive count, an unknown model_type/architectures, heads that do not
 * divide the hidden size (without head_dim) or key/value heads that do not divide the query heads: each an error
 * naming the field, the rule and the value. */
tern_status tern_model_cfg_parse(const char *json, size_t len, const char *source, tern_model_cfg *out,
                                 tern_error *err);
tern_status tern_model_cfg_load(const char *path, tern_model_cfg *out, tern_error *err);
/* Parameter count (embeddings, every layer, final norm, the LM head when untied). */
double tern_model_params(const tern_model_cfg *c);
/* Training FLOPs per token: 6 x the matmul parameters a token uses (active experts only, the LM head included)
 * plus the attention scores 6 x 2 x layers x seq x heads x head_dim (not halved for causal masking: the PaLM /
 * Megatron model-FLOPs definition). */
double tern_model_train_flops_per_token(const tern_model_cfg *c, int64_t seq);

/* Activation recomputation: none; full (each layer's forward again in its backward, only the layer input kept);
 * selective (Megatron-LM's: the attention core, i.e. its block pairs' softmax region, recomputed from the kept
 * Q, K, V, and the linear layers' inputs kept as their sequence-parallel shards, all-gathered again in the
 * backward). docs/planner.md. */
enum { TERN_RECOMPUTE_NONE = 0, TERN_RECOMPUTE_FULL = 1, TERN_RECOMPUTE_SELECTIVE = 2 };
const char *tern_plan_recompute_name(int recompute); /* "none", "full", "selective" */

/* One layout. A knob < 0 in tern_plan_opts.fixed is searched. vpp: virtual pipeline stages (model chunks) per
 * pipeline rank, the interleaved 1F1B schedule when > 1. ep: expert parallelism of a mixture of experts, the
 * experts sharded over ep data-parallel ranks (ep divides dp and the experts; 1 for a dense model). */
typedef struct {
    int tp, pp, dp, microbatch, zero, recompute, vpp, ep;
} tern_plan_layout;

/* Memory per core (bytes), by part. */
typedef struct {
    double weights, grads, optimizer, activations, workspace, total, capacity;
} tern_plan_memory;

typedef struct {
    tern_plan_layout layout;
    int fits;
    double step_s, seq_per_s, tokens_per_s, mfu;
    double compute_s;        /* forward+backward compute on the busiest stage, whole step */
    double bubble_s;         /* pipeline idle time of the busiest stage (from the schedule) */
    double comm_exposed_s, comm_overlapped_s;
    double tp_comm_s, dp_comm_s, pp_comm_s; /* each collective family's total time per step (exposed or not) */
    double ep_comm_s;                       /* the expert-parallel all-to-alls per step (exposed) */
    double layer_fwd_s, layer_bwd_s;        /* one layer, one micro-batch, as simulated */
    double head_fwd_s, head_bwd_s;          /* embedding + LM head + loss, one micro-batch */
    int micro_batches;
    tern_plan_memory mem;
    double cost_per_step_usd, cost_per_mtok_usd, job_cost_usd, job_hours;
} tern_plan_result;

typedef struct {
    const char *cluster;      /* "32xtrn1.32xlarge", a machine name or path */
    int64_t seq, global_batch;
    int precision_fp32;       /* 0: bf16 matmuls and activations, fp32 master weights + Adam; 1: fp32 throughout */
    int tp_reduce_bf16;       /* the TP reduce-scatters' dtype under bf16: 0 fp32 (NxD's RowParallelLinear and
                                 ColumnParallelLinear reduce_dtype default, torch.float32), 1 bf16 (a job run with
                                 XLA_DOWNCAST_BF16=1, which stores fp32 tensors as bf16); docs/planner.md */
    unsigned ring_channels;   /* cap on the ring collectives' channels (tern_coll_desc.channels): 0 all the topology
                                 gives, 1 the single ring (for comparison) */
    tern_plan_layout fixed;   /* knobs < 0 are searched */
    const char *price_file;   /* NULL: data/prices.json beside the machine files */
    double tokens;            /* job size in tokens (0: none) */
    double steps;             /* job size in steps (0: none; tokens wins when both) */
    double gpu_mfu;           /* assumed MFU of the GPU comparison (0: the default, 0.40) */
    int timeline;             /* fill tern_plan_out.timeline with the best plan's schedule (--svg) */
    const char *dump_dir;     /* write each distinct per-rank graph simulated there as ONNX (--dump-graphs; NULL: none):
                                 KIND_tpT[_epE]_mbB_seqS.onnx, KIND one of rows_fwd rows_bwd attn_fwd attn_bwd
                                 head_fwd head_bwd; created if missing */
    /* Progress callback (simulations done so far), optional. */
    void (*progress)(void *ctx, const char *what);
    void *progress_ctx;
} tern_plan_opts;

void tern_plan_opts_default(tern_plan_opts *o);

/* GPU comparison: the same job on N GPU instances by the roofline-plus-communication model of docs/planner.md. */
typedef struct {
    char instance[32];
    char gpu[32];
    unsigned gpus_per_instance;
    unsigned instances;
    double peak_flops;        /* per GPU, dense BF16 */
    double nvlink_bytes_s;    /* per GPU, one direction */
    double efa_bytes_s;       /* per instance */
    double hbm_bytes;         /* per GPU */
    double mfu;               /* assumed */
    double step_s, tokens_per_s, cost_per_step_usd, job_cost_usd, price_usd_h;
    int has_price;
    char price_source[256];
    char layout[64];          /* the layout the model assumes ("tp=8 dp=32 zero-1") */
    int fits;
} tern_plan_gpu;

/* One op of the best plan's pipeline schedule for one step (tern_plan_opts.timeline): stage (pipeline rank),
 * its local chunk (virtual stage), micro-batch, forward or backward, and the seconds it starts and ends; tp_comm_s
 * of it is TP collectives (exposed, inside the op). */
typedef struct {
    unsigned stage, chunk, mb;
    int backward;
    double start, end, tp_comm_s;
} tern_plan_timeline_op;

typedef struct {
    tern_plan_result *plans; /* best first: fitting plans by step time, then the non-fitting by memory */
    size_t count;
    size_t searched;         /* layouts considered */
    size_t simulated;        /* distinct layer graphs compiled and run */
    size_t collectives;      /* distinct collectives timed */
    char machine[64];        /* the instance name */
    unsigned instances, ranks;
    double price_usd_h;      /* per instance; < 0 when no published price */
    char price_source[256];
    double flops_per_token;
    double core_peak_flops;
    tern_plan_gpu gpus[2];
    size_t ngpus;
    /* with opts.timeline and a fitting best plan: its schedule, in the order simulated (2 x micro-batches x vpp
     * ops per stage), the send/receive time at each chunk boundary, and the makespan; NULL otherwise */
    tern_plan_timeline_op *timeline;
    size_t ntimeline;
    double timeline_send_s, timeline_makespan_s;
} tern_plan_out;

/* Plan the job. Errors: an unknown cluster, a fixed layout that breaks a rule (TP not dividing the query heads,
 * PP not dividing the layers, TP x PP x DP not the cluster's ranks, the global batch not divisible by DP x
 * micro-batch), a price file that is malformed. A layout that does not fit is a result with fits = 0, not an
 * error. */
tern_status tern_plan_run(const tern_model_cfg *c, const tern_plan_opts *o, tern_plan_out *out, tern_error *err);
void tern_plan_out_free(tern_plan_out *out);

/* The pieces, exposed for tests. */
/* Simulated time (seconds) of one transformer layer's forward and backward for `tokens` = micro-batch x seq
 * tokens on one rank of tensor-parallel degree tp, on machine (a name tern_compile accepts). */
tern_status tern_plan_layer_time(const tern_model_cfg *c, int tp, int64_t microbatch, int64_t seq, int fp32,
                                 const char *machine, double *fwd_s, double *bwd_s, tern_error *err);
/* The whole model's forward (embedding excluded, LM head included) as one graph on one core, for checking the
 * composition (layers x layer time + head) against a full simulation: small models only. */
tern_status tern_plan_model_forward_time(const tern_model_cfg *c, int64_t microbatch, int64_t seq, int fp32,
                                         const char *machine, double *whole_s, double *layer_s, double *head_s,
                                         tern_error *err);
/* 1F1B schedule over `stages` stages and `micro` micro-batches with per-stage forward f and backward b times
 * and a send/receive time x between adjacent stages; returns the makespan and the busiest stage's idle time. */
void tern_plan_pipeline_1f1b(unsigned stages, unsigned micro, double f, double b, double x, double *makespan,
                             double *idle);
/* The interleaved (virtual-stage) 1F1B schedule with vpp chunks per stage, each taking f / vpp and b / vpp
 * (micro a multiple of stages when vpp > 1; -1 results otherwise). vpp = 1 is tern_plan_pipeline_1f1b. */
void tern_plan_pipeline_interleaved(unsigned stages, unsigned vpp, unsigned micro, double f, double b, double x,
                                    double *makespan, double *idle);

#ifdef __cplusplus
}
#endif
#endif
