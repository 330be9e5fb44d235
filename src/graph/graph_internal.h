/* Private to the graph layer: the tern_graph structure, construction helpers shared by the importer and the
 * passes, and the per-op evaluator and shape-inference entry points. */
#ifndef TERN_GRAPH_INTERNAL_H
#define TERN_GRAPH_INTERNAL_H

#include "tern/graph.h"

#include <stdint.h>

struct tern_graph {
    tern_graph_node *nodes;
    int n_nodes, cap_nodes;
    tern_graph_value *values;
    int n_values, cap_values;
    int *inputs; /* feeding graph inputs, in model order */
    int n_inputs;
    int *outputs;
    int n_outputs;
    int64_t opset;
    int64_t ir_version;
    /* name -> value id, open addressing (ids + 1; 0 = empty) */
    int *hash;
    size_t hash_cap;
};

/* Largest dim (and the bound of dim-like attributes: split sizes, pads, depths). */
#define GRAPH_MAX_ELEMS ((int64_t)1 << 31)
/* Largest element count of a value or host tensor: past 2^31 (a 1-byte tensor of 2^31+ elements is 2 GiB), and
 * small enough that a count times a dim (<= 2^31) stays below 2^63, so dim arithmetic cannot overflow. */
#define GRAPH_MAX_NUMEL (((int64_t)1 << 32) - 1)
#define GRAPH_FOLD_MAX_ELEMS ((int64_t)1 << 26)
/* All nodes folded in one fold_constants call together: past this, nodes stay (a budget, not an error). */
#define GRAPH_FOLD_BUDGET_ELEMS ((int64_t)1 << 27)
#define GRAPH_INFER_EVAL_MAX_ELEMS ((int64_t)1 << 16)

char *graph_strdup(const char *s);
/* Adds a value (name copied, may be NULL for an anonymous one named "_v<id>"); returns its id or -1 (no memory). */
int graph_add_value(tern_graph *g, const char *name);
int graph_lookup(const tern_graph *g, const char *name);
/* Adds a node with room for the given counts (inputs/outputs -1, attrs zeroed); returns its index or -1. */
int graph_add_node(tern_graph *g, const char *op, const char *domain, const char *name, int n_in, int n_out,
                   int n_attrs);
void graph_node_clear(tern_graph_node *n);
/* Gives node n a new op (copies of domain and op) and its op_id: the one way a pass changes a node's op (ops.c).
 * Returns 0, or -1 out of memory (the node keeps its old op). */
int graph_node_set_op(tern_graph_node *n, const char *domain, const char *op);
void graph_attr_clear(tern_graph_attr *a);
void graph_value_clear(tern_graph_value *v);
void graph_value_reset_shape(tern_graph_value *v);
/* Recomputes producer fields and checks single assignment; sorts nodes topologically. */
tern_status graph_sort(tern_graph *g, tern_error *err);
/* Drops nodes with keep[i] == 0 (keep may be NULL: nothing dropped) and values no node, input, output or
 * initializer references; renumbers ids and rebuilds the name table. */
tern_status graph_compact(tern_graph *g, const unsigned char *keep, tern_error *err);
/* The scaled dot-product attention pattern the fusion takes (passes.c, fuse_attention): MatMul(q, kt) [scale]
 * [mask] Softmax (node `softmax`) [fp32 Casts] MatMul(., v) (node pv); the scale op (0 none, 1 divide,
 * 2 multiply) and value, the mask value (-1 none) and mode (1 Where with the fill on true, 2 on false,
 * 3 additive) and fill; nodes: the pattern's nodes but pv. Returns 1 when node `softmax` starts one (each
 * interior value read once), else 0. Training's fused attention backward uses it (src/train/grad_attention.c). */
typedef struct {
    int softmax, pv, qk;
    int q, kt, v, mask;
    int mask_mode, scale_op;
    float fill, scale;
    int nodes[12], n_nodes;
} graph_att_match;
int graph_match_attention(const tern_graph *g, int softmax, graph_att_match *m);
tern_status graph_node_error(const tern_graph *g, int node, tern_error *err, tern_status code, const char *fmt,
                             ...) __attribute__((format(printf, 5, 6)));
int64_t graph_numel(int rank, const int64_t *dims); /* -1 when unknown or overflowing GRAPH_MAX_NUMEL */

/* evaluator: the op's semantics for given attributes and opset; node label used in messages. */
tern_status graph_eval(const tern_graph_node *n, int64_t opset, const char *label, const tern_host_tensor *const *in,
                       tern_host_tensor **out, tern_error *err);

/* Float rounding of a tensor's values to its element type (float16/bfloat16); ints wrapped to their width. */
void graph_tensor_normalize(tern_host_tensor *t);

/* ---- shape rules shared by the evaluator and inference (shape_rules.c). Unknown dims are -1. Each returns 0 or
 * -1 with a reason written into why (at least 160 bytes). ---- */
int graph_broadcast(int ra, const int64_t *da, int rb, const int64_t *db, int *r, int64_t *d, char *why, size_t wl);
int graph_norm_axis(int64_t axis, int rank, int *out, char *why, size_t wl, const char *what);
/* Reshape target: shape values (0 = copy unless allowzero, -1 = infer); in_dims may hold unknowns. */
int graph_reshape_dims(int in_rank, const int64_t *in_dims, const int64_t *shape, int n, int allowzero,
                       int64_t *out, char *why, size_t wl);
/* Slice on one axis: normalises start/end/step against dim (known), returns the output length. */
int64_t graph_slice_len(int64_t dim, int64_t *start, int64_t *end, int64_t step);
/* Conv/pool geometry for spatial dims: fills pads (begin then end), strides, dilations and output sizes. */
typedef struct {
    int nsp;
    int64_t in[3], k[3], stride[3], dil[3], pad_b[3], pad_e[3], out[3];
} graph_window;
int graph_window_setup(const tern_graph_node *n, int nsp, const int64_t *in_sp, const int64_t *kernel, int ceil_mode,
                       graph_window *w, char *why, size_t wl);
/* Int list of an attribute (ints), or NULL/0. */
const int64_t *graph_attr_ints(const tern_graph_node *n, const char *name, size_t *count);
/* Resize output dims (sizes, else floor(in * scales)) and per-dim scales. */
int graph_resize_dims(const tern_graph_node *n, int64_t opset, int rank, const int64_t *in,
                      const tern_host_tensor *scales, const tern_host_tensor *sizes, int64_t *out, double *scale,
                      char *why, size_t wl);
/* ConvTranspose geometry: output sizes from strides, dilations, pads, output_padding, output_shape, auto_pad. */
int graph_convtranspose_setup(const tern_graph_node *n, int nsp, const int64_t *in_sp, const int64_t *kernel,
                              graph_window *w, char *why, size_t wl);

#endif
