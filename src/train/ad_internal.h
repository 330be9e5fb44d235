/* Private to the training layer: the reverse-mode differentiation context and the node-building helpers the
 * gradient rules (grad_*.c), the losses and the optimizers share. Everything here appends ordinary graph nodes
 * (ops the compiler already lowers) to the graph being differentiated, so the backward pass and the optimizer
 * step compile and run on the simulated device like any forward model.
 *
 * A rule never holds a tern_graph_node or tern_graph_value pointer across a call that adds a node or a value
 * (the arrays grow by realloc): it copies the ids and shapes it needs first (ad_shape_of, ad_fwd). */
#ifndef TERN_TRAIN_AD_INTERNAL_H
#define TERN_TRAIN_AD_INTERNAL_H

#include "../graph/graph_internal.h"
#include "tern/base.h"
#include "tern/graph.h"

#include <stdint.h>

#define AD_MAX_IO 16

typedef struct {
    int rank;
    int64_t d[TERN_GRAPH_MAX_RANK];
} ad_shape;

/* Training's fused attention backward (grad_attention.c): what the plan did with each attention block. */
typedef struct {
    int fused, unfused;   /* blocks differentiated by one tern.AttentionGrad / node by node */
    char why[600];        /* the unfused blocks' nodes and reasons, "; "-separated (cut at the size) */
} ad_att_report;

/* An attention block whose backward is one tern.AttentionGrad: the Softmax and P V MatMul nodes, Q, Kt, V, and
 * the mask the kernel applies to the scaled scores (-1 none: no mask, or the causal one), its mode (3 added, 1 / 2
 * a Where's fill where it is != 0 / == 0) and fill. */
typedef struct {
    int softmax, pv, q, kt, v, mask, mask_mode;
    float scale, fill;
    int causal;
} ad_att_block;

typedef struct ad_ctx {
    tern_graph *g;
    tern_error *err;
    int64_t opset;
    int *grad;            /* value id -> the id of its accumulated gradient, -1 none; sized cap_values */
    unsigned char *needs; /* value id -> 1 when the loss depends on it through a trained weight */
    int cap;              /* entries in grad/needs */
    int failed;           /* a helper failed: err holds why; every later helper returns -1 */
    int counter;          /* names of the nodes and values this layer adds: "<prefix><counter>" */
    const char *prefix;
    /* activation recomputation (recompute.c): segments asked for (0 none, < 0 about sqrt(n)) */
    int recompute;
    int n_model;          /* nodes of the model's forward (the loss's follow): only they are cut into segments */
    int *seg_of;          /* forward node -> its segment (NULL: no recomputation) */
    int n_seg, cur_seg, recomputed;
    int *rc_map;          /* value id -> its copy (or barrier) while its segment is differentiated, -1 none */
    int *orig;            /* copy id -> the value it copies, -1 none */
    unsigned char *act;   /* value id -> 1 when it depends on the data (recompute.c) */
    int *mapped, n_mapped, cap_mapped;
    /* fused attention backward (grad_attention.c) */
    int no_fused_attention;   /* 1: every attention block node by node (tern_train_opts.no_fused_attention) */
    ad_att_report *att_report; /* where the plan's outcome goes (NULL: nowhere) */
    ad_att_block *att;
    int n_att;
    int *att_of, n_att_of;    /* forward node -> the block whose P V MatMul it is, -1 none */
} ad_ctx;

/* A forward node's ids and a few attributes, copied so the rule may add nodes freely. */
typedef struct {
    int index;
    int n_in, n_out;
    int in[AD_MAX_IO];
    int out[AD_MAX_IO];
    int dy[AD_MAX_IO]; /* gradient of each output (-1: none reaches it) */
} ad_fwd;

typedef int (*ad_rule)(ad_ctx *a, const ad_fwd *f);

/* ---- building blocks (autodiff.c) ---- */
int ad_fail(ad_ctx *a, tern_status code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int ad_fail_node(ad_ctx *a, int node, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int ad_grow(ad_ctx *a);
ad_shape ad_shape_of(const ad_ctx *a, int v);
int ad_shape_numel(const ad_shape *s, int64_t *n);
/* A node op(inputs) with one output; returns the output's value id, or -1 (a->failed set). attrs are added by
 * the calls below on the node ad_last_node returns. */
int ad_op(ad_ctx *a, const char *op, int n_in, const int *in);
int ad_op2(ad_ctx *a, const char *op, int x, int y);
int ad_op1(ad_ctx *a, const char *op, int x);
int ad_last_node(const ad_ctx *a);
void ad_attr_int(ad_ctx *a, int node, const char *name, int64_t v);
void ad_attr_float(ad_ctx *a, int node, const char *name, float v);
void ad_attr_ints(ad_ctx *a, int node, const char *name, int n, const int64_t *v);
/* Constants: an initializer value holding the data (float scalar of rank 0, int64 vector). */
int ad_const_f(ad_ctx *a, float v);
int ad_const_fv(ad_ctx *a, int rank, const int64_t *dims, const float *data);
int ad_const_i64(ad_ctx *a, int n, const int64_t *v);
/* Shape helpers that follow the graph's opset (axes as attribute or input). */
int ad_reshape(ad_ctx *a, int x, const ad_shape *to);
int ad_reduce(ad_ctx *a, const char *op, int x, int n_axes, const int64_t *axes, int keepdims);
int ad_transpose(ad_ctx *a, int x, int rank, const int64_t *perm);
int ad_expand(ad_ctx *a, int x, const ad_shape *to);
/* Sums a gradient of shape `from` (a broadcast result) back to the operand shape `to`. */
int ad_unbroadcast(ad_ctx *a, int gid, const ad_shape *from, const ad_shape *to);
/* Adds gid into the gradient of value v (an Add when v already has one). */
void ad_accum(ad_ctx *a, int v, int gid);
int ad_needs(const ad_ctx *a, int v);

/* ---- gradient rules, one file per op family; each maps a node's op_id (tern_op_id) to its rule ---- */
int grad_elementwise_rule(int op_id, ad_rule *out); /* grad_elementwise.c */
int grad_linear_rule(int op_id, ad_rule *out);      /* grad_linear.c */
int grad_reduce_rule(int op_id, ad_rule *out);      /* grad_reduce.c */
int grad_layout_rule(int op_id, ad_rule *out);      /* grad_layout.c */
int grad_norm_rule(int op_id, ad_rule *out);        /* grad_norm.c */
/* After the backward pass: replaces BatchNormalization node `node` (trained as model.train() runs it) by its
 * batch-statistic computation, producing the node's own output; *new_mean / *new_var get the updated running
 * statistics (-1 when the node has none). grad_norm.c */
int ad_batchnorm_forward(ad_ctx *a, int node, int *new_mean, int *new_var);
int grad_index_rule(int op_id, ad_rule *out);       /* grad_index.c */
int grad_conv_rule(int op_id, ad_rule *out);        /* grad_conv.c */

/* ---- fused attention backward (grad_attention.c) ---- */
/* Plans, over the first n_fwd nodes (after `needs` is known), the attention blocks differentiated by one
 * tern.AttentionGrad, reporting each block fused or not (and why) in a->att_report. */
int ad_attention_plan(ad_ctx *a, int n_fwd);
/* The planned block whose P V MatMul is forward node `node`, or -1. */
int ad_attention_block_of(const ad_ctx *a, int node);
/* Emits the block's tern.AttentionGrad from dout (the gradient of its output) and accumulates dQ, dKt, dV. */
int ad_attention_grad(ad_ctx *a, int block, int dout);

/* ---- activation recomputation (recompute.c) ---- */
/* Cuts the first n_fwd nodes into `segments` segments of about as many activation nodes each (< 0: about
 * sqrt(n) segments of sqrt(n) nodes). */
int ad_recompute_plan(ad_ctx *a, int n_fwd, int segments);
/* Called by the reverse pass before differentiating node i (dy: the gradient arriving at its output y): on the
 * first node of a segment other than the last, emits the segment's forward copies and maps its values to them. */
int ad_recompute_enter(ad_ctx *a, int i, int n_fwd, int dy, int y);
int ad_map(const ad_ctx *a, int v);   /* a value's copy while its segment is differentiated, else v */
int ad_unmap(const ad_ctx *a, int v); /* the value a copy copies, else v */

/* The rule for a forward node's op (NULL when it has none), and the reverse pass: seeds the gradient of `loss`
 * (a scalar value) with 1 and walks the first n_fwd nodes backwards. */
ad_rule ad_rule_for(const tern_graph_node *n);
tern_status ad_backward(ad_ctx *a, int n_fwd, int loss);
tern_status ad_init(ad_ctx *a, tern_graph *g, tern_error *err);
void ad_free(ad_ctx *a);

#endif
