/* Private to the plan layer: the in-memory ONNX writer the layer graphs are built with (onnx_writer.c), the
 * per-rank graph shapes (layer_graph.c), and the simulation cache (layer_sim.c). */
#ifndef TERN_PLAN_INTERNAL_H
#define TERN_PLAN_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "tern/base.h"
#include "tern/plan.h"

/* ---- a minimal ONNX ModelProto writer: values are numbered, named "v<id>" ---- */
typedef struct {
    uint8_t *p;
    size_t n, cap;
    int oom;
} plan_pb;

typedef struct {
    plan_pb nodes, inputs, outputs, inits;
    int next;     /* next value id */
    int nnodes;
    int elem;     /* element type of activations and weights (ONNX code: 1 float, 16 bfloat16) */
    int tern_domain; /* a node of tern's domain was written: the model declares its opset */
} plan_onnx;

typedef struct {
    const char *name;
    int kind; /* 1 int, 2 float, 3 ints */
    int64_t i;
    float f;
    const int64_t *ints;
    int nints;
} plan_attr;

void plan_onnx_init(plan_onnx *g, int elem);
void plan_onnx_free(plan_onnx *g);
int plan_onnx_input(plan_onnx *g, int elem, int rank, const int64_t *dims);
int plan_onnx_const_i64(plan_onnx *g, int n, const int64_t *vals);
int plan_onnx_const_f32(plan_onnx *g, float v); /* a scalar */
int plan_onnx_op(plan_onnx *g, const char *op, int nin, const int *in, int nattr, const plan_attr *attrs);
/* A node of `domain` ("" the default one) with nout outputs, numbered consecutively from the returned id. */
int plan_onnx_node(plan_onnx *g, const char *domain, const char *op, int nin, const int *in, int nout, int nattr,
                   const plan_attr *attrs);
void plan_onnx_output(plan_onnx *g, int id, int elem, int rank, const int64_t *dims);
/* The ModelProto bytes (caller frees); TERN_ERR_NOMEM when any write failed. */
tern_status plan_onnx_finish(plan_onnx *g, uint8_t **buf, size_t *len, tern_error *err);

/* ---- the per-rank graphs ---- */
/* The graphs a layer is composed of (docs/planner.md, "What is composed"): the row-wise parts of the layer
 * (everything but attention's block pairs) for `seq` rows (mb = 1), one attention block pair for mb = B heads x
 * batch and seq = the block size, the embedding + LM head + loss for `seq` rows, and the whole model's forward
 * (mb x seq tokens, the composition check). */
typedef enum {
    PLAN_G_ROWS_FWD = 0,
    PLAN_G_ROWS_BWD,
    PLAN_G_ATTN_FWD,
    PLAN_G_ATTN_BWD,
    PLAN_G_HEAD_FWD,
    PLAN_G_HEAD_BWD,
    PLAN_G_MODEL_FWD
} plan_graph_kind;

typedef struct {
    plan_graph_kind kind;
    int tp;
    int64_t mb, seq;
    int fp32;
    int layers; /* PLAN_G_MODEL_FWD only */
    int ep;     /* expert-parallel degree of a mixture-of-experts layer (0 or 1: none) */
} plan_shape;

/* How a layer of mb x seq tokens is composed: chunks of `rows` rows, `pairs` attention block pairs of `blk`. */
typedef struct {
    int64_t rows, chunks, blk, pairs, B;
} plan_compose;
void plan_composition(const tern_model_cfg *c, int tp, int64_t mb, int64_t seq, plan_compose *out);

/* Build the ONNX bytes of one per-rank graph (docs/planner.md, "What each graph holds"). */
tern_status plan_build_graph(const tern_model_cfg *c, const plan_shape *s, uint8_t **buf, size_t *len,
                             tern_error *err);
/* Compile the graph for machine and run it timing-only on its simulated core: the predicted seconds. */
tern_status plan_simulate(const tern_model_cfg *c, const plan_shape *s, const char *machine, double *seconds,
                          uint64_t *hbm_bytes, tern_error *err);
/* The same for a graph already built (s names it in messages and gives its precision). */
tern_status plan_simulate_onnx(const uint8_t *buf, size_t len, const plan_shape *s, const char *machine,
                               double *seconds, uint64_t *hbm_bytes, tern_error *err);

/* A layer's simulated pieces and their composition (layer_sim.c): seconds per piece, the composed layer and head
 * (forward, backward) for one micro-batch, and the largest compiled graph's HBM footprint. */
typedef struct {
    plan_compose comp;
    double rows_f, rows_b, attn_f, attn_b, head_f, head_b;
    double layer_f, layer_b, head_fwd, head_bwd;
    uint64_t workspace;
} plan_times;
tern_status plan_layer_times(const tern_model_cfg *c, int tp, int64_t mb, int64_t seq, int fp32, const char *machine,
                            plan_times *t, tern_error *err);

/* Query heads and key/value heads one rank of tp holds (key/value heads replicated when tp exceeds them). */
int64_t plan_heads_per_rank(const tern_model_cfg *c, int tp);
int64_t plan_kv_heads_per_rank(const tern_model_cfg *c, int tp);
/* The bytes one layer keeps for its backward per micro-batch (docs/planner.md, "Memory"). */
double plan_layer_activation_bytes(const tern_model_cfg *c, int tp, int64_t mb, int64_t seq, int fp32,
                                   int recompute);

/* One scheduled op of a pipeline (for the timeline): rank, its local chunk, micro-batch, forward or backward. */
typedef struct {
    unsigned rank, chunk, mb;
    int backward;
    double start, end;
} plan_pipe_op;
/* The interleaved 1F1B schedule over P ranks with v chunks each (v = 1: plain 1F1B) and M micro-batches
 * (a multiple of P when v > 1); f[g], b[g] per chunk g = local chunk x P + rank (P x v entries); x the
 * send/receive time at every chunk boundary. trace (optional) receives the 2 x M x v x P ops in the order
 * simulated. Returns 0, or -1 when out of memory or the arguments are invalid (pipeline.c). */
int plan_pipeline_schedule(unsigned P, unsigned v, unsigned M, const double *f, const double *b, double x,
                           double *makespan, double *idle_max, plan_pipe_op *trace);
/* The same with the forward's activation transfer xf and the backward's gradient transfer xb apart (the trainer's
 * interleaved layouts, src/train/pipeline_parallel.c) */
int plan_pipeline_schedule2(unsigned P, unsigned v, unsigned M, const double *f, const double *b, double xf,
                            double xb, double *makespan, double *idle_max, plan_pipe_op *trace);
/* 1F1B over P stages and M micro-batches with per-stage forward f[s] and backward b[s] and send/receive time x
 * (pipeline.c). Returns 0, or -1 when out of memory. */
int plan_pipeline_sim(unsigned P, unsigned M, const double *f, const double *b, double x, double *makespan,
                      double *idle_max);

/* ---- a transformer exported to ONNX read back into its configuration (onnx_config.c, docs/planner.md "ONNX
 * models") ---- */
int plan_is_onnx_path(const char *path); /* the name ends in ".onnx" */
/* Recognises the repeated layers of the ONNX model at path and fills *out exactly as the equivalent config.json
 * would; *config_json receives that config.json text and *inferred a JSON object naming, per field, what in the
 * graph gave it (both malloc'd, NULL on error). A malformed file is the importer's error (the byte or field); a
 * graph that is not a transformer, or whose structure does not give a field, an error naming what was not found. */
tern_status plan_cfg_from_onnx(const char *path, tern_model_cfg *out, char **config_json, char **inferred,
                               tern_error *err);

#endif
