/* Private to the graph layer: op expansions. Some ONNX ops (the recurrent LSTM/GRU/RNN, the losses, Einsum,
 * ConvTranspose) are compiled by rewriting the node, during shape inference once its inputs' shapes are known, into
 * the primitive ops the rest of tern already infers, evaluates and lowers (MatMul, Slice, Concat, Conv, ...), the
 * way ONNX defines several ops by a function body. This header is the small node-building kit the expanders share
 * (expand.c) and their entry points (expand_rnn.c, expand_loss.c, expand_einsum.c, expand_convt.c). */
#ifndef TERN_GRAPH_EXPAND_H
#define TERN_GRAPH_EXPAND_H

/* needs graph_internal.h included first (its shape-rule half sits outside its include guard) */

/* Replaces node i by its expansion when its op has one and the inputs' shapes allow it (*done = 1; the new nodes
 * sit at i.. in topological order). *done = 0 leaves the node to ordinary inference. An op that has an expansion
 * but uses a feature the expansion does not cover fails with TERN_ERR_UNSUPPORTED naming the node and feature. */
tern_status graph_expand_node(tern_graph *g, int i, int *done, tern_error *err);
/* 1 for the ops (tern_op_id) graph_expand_node rewrites. */
int graph_expand_has(int op_id);

/* A builder: new nodes are appended to the graph and spliced in place of the expanded node when the expansion
 * succeeds. Every helper returns the id of the value it made, or -1 once any step failed (st holds why), so an
 * expander can chain calls and check st once. */
typedef struct {
    tern_graph *g;
    int node;      /* the node being expanded */
    int first;     /* g->n_nodes when the expansion began */
    int last;      /* the node the latest helper added (attributes go there) */
    int64_t opset;
    tern_error *err;
    tern_status st;
    int seq; /* counter for the names of new nodes and values */
} xb;

/* Fails the expansion (sticky): the message names the expanded node. Returns -1 for chaining. */
int xb_fail(xb *b, tern_status code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The expanded node's k-th input value id (-1 when omitted) and its value. */
int xb_in(const xb *b, int k);
const tern_graph_value *xb_val(const xb *b, int id);
/* A node of op with the given inputs (-1 = omitted) writing a new value, or out when out >= 0. */
int xb_op(xb *b, const char *op, int n_in, const int *ins);
int xb_op_to(xb *b, const char *op, int n_in, const int *ins, int out);
/* Makes the latest node write value out instead of the value it made (returns out). */
int xb_output_to(xb *b, int out);
/* Attributes of the node the latest helper added. */
void xb_attr_int(xb *b, const char *name, int64_t v);
void xb_attr_ints(xb *b, const char *name, int n, const int64_t *v);
void xb_attr_float(xb *b, const char *name, float v);
/* Constants (initializer values). Float types take their values in fp32. */
int xb_const_i64(xb *b, tern_elem_type type, int rank, const int64_t *dims, const int64_t *v);
int xb_const_f(xb *b, tern_elem_type type, int rank, const int64_t *dims, const float *v); /* v NULL: zeros */
int xb_scalar_f(xb *b, tern_elem_type type, float v);
int xb_scalar_i(xb *b, tern_elem_type type, int64_t v);
/* Common shapes of node, with the opset's encoding of their parameters. */
int xb_unary(xb *b, const char *op, int x);
int xb_binary(xb *b, const char *op, int x, int y);
int xb_reshape(xb *b, int x, int rank, const int64_t *dims);
int xb_transpose(xb *b, int x, int rank, const int64_t *perm);
int xb_slice(xb *b, int x, int axis, int64_t start, int64_t end);
int xb_gather_index(xb *b, int x, int axis, int64_t index); /* Gather of one index: the axis goes */
int xb_concat(xb *b, int n, const int *ins, int axis);
int xb_reduce_sum(xb *b, int x, int n_axes, const int64_t *axes, int keepdims);
int xb_reduce(xb *b, const char *op, int x, int n_axes, const int64_t *axes, int keepdims); /* ReduceProd ... */
int xb_pad(xb *b, int x, int rank, const int64_t *pads); /* zeros; pads as ONNX orders them (begins, ends) */
int xb_clip(xb *b, int x, float lo, float hi);
int xb_cast(xb *b, int x, tern_elem_type to);

tern_status graph_expand_loss(xb *b, int *done);
tern_status graph_expand_convt(xb *b, int *done);
tern_status graph_expand_einsum(xb *b, int *done);
tern_status graph_expand_rnn(xb *b, int *done);
tern_status graph_expand_scatter(xb *b, int *done);
/* ScatterND with reduction add of whole rows (indices [..., 1], float data) into a table of at least this many
 * rows is not expanded: the compiler's row scatter (src/compiler/lower_scatter_add.c) takes it, whose time grows
 * with the indices alone where the one-hot product's grows with rows x indices. The embedding gradient
 * (src/train/grad_index.c) picks its form by the same bound. */
#define GRAPH_SCATTER_ROWS_MIN 8192
/* Is ScatterND node i of g (its inputs' shapes known) one the row scatter takes? */
int graph_scatter_nd_is_rows_add(const tern_graph *g, int i);
tern_status graph_expand_reverse_sequence(xb *b, int *done); /* in expand_rnn.c */
tern_status graph_expand_if(xb *b, int *done);

#endif
