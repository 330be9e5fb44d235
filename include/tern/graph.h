/* tern graph layer: the tensor-graph IR the compiler lowers from, ONNX import (protobuf-c bindings generated at
 * build time from Debian's onnx.proto), shape and element-type inference, a host reference evaluator, and the
 * graph passes (constant folding, dead-code removal, fusion). docs/graph.md is the long form of this header.
 *
 * The IR in one paragraph: a tern_graph owns an array of values and an array of nodes. A value is one tensor
 * (name, element type, rank, dims that may be unknown or symbolic, optional constant data); a node is one
 * operator (ONNX op type and domain, a name, attributes) whose inputs and outputs are value ids (indices into the
 * value array; -1 marks an omitted optional input). Nodes are always kept in topological order: every pass
 * leaves node i reading only values produced by nodes < i, graph inputs or constants. Element types use ONNX's
 * TensorProto.DataType numbering, so int64, bool and double travel alongside the device number formats; the host
 * evaluator computes float types in fp32 (rounding float16/bfloat16 results to their type) and integer/bool types
 * in int64 (wrapped to the type's width).
 *
 * Errors follow the project's rule: the message names the node (name, op type, index), the rule and the value,
 * e.g. `node "Reshape_12" (Reshape #12): shape input asks for 7 elements, data has 6`. Nothing here prints. */
#ifndef TERN_GRAPH_H
#define TERN_GRAPH_H

#include "tern/base.h"
#include "tern/num.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TERN_GRAPH_MAX_RANK 8

/* Element types: the numbering of ONNX TensorProto.DataType (so an ONNX code converts by a cast). */
typedef enum {
    TERN_ELEM_UNDEFINED = 0,
    TERN_ELEM_FLOAT = 1,
    TERN_ELEM_UINT8 = 2,
    TERN_ELEM_INT8 = 3,
    TERN_ELEM_UINT16 = 4,
    TERN_ELEM_INT16 = 5,
    TERN_ELEM_INT32 = 6,
    TERN_ELEM_INT64 = 7,
    TERN_ELEM_STRING = 8, /* text: only Cast/CastLike to and from float32 use it (host tensors hold it in s) */
    TERN_ELEM_BOOL = 9,
    TERN_ELEM_FLOAT16 = 10,
    TERN_ELEM_DOUBLE = 11,
    TERN_ELEM_UINT32 = 12,
    TERN_ELEM_UINT64 = 13,
    TERN_ELEM_BFLOAT16 = 16
} tern_elem_type;

const char *tern_elem_name(tern_elem_type t); /* "float", "int64", "bool", ...; "?" for an unknown code */
int tern_elem_is_valid(int code);              /* one of the codes above other than UNDEFINED and STRING */
int tern_elem_is_float(tern_elem_type t);      /* float, float16, bfloat16, double */
size_t tern_elem_size(tern_elem_type t);       /* ONNX raw_data bytes per element; 0 for undefined/string */
/* The device number format of an element type: float->fp32, float16->fp16, bfloat16->bf16, [u]int8/16/32 -> the
 * same; TERN_ERR_UNSUPPORTED naming the type for int64, uint64, bool, double (the compiler casts those). */
tern_status tern_elem_to_dtype(tern_elem_type t, tern_dtype *out, tern_error *err);

/* A host tensor: dense, row-major. Float element types hold fp32 values in f (already rounded to the type);
 * integer and bool types hold int64 values in i (bool as 0/1). Exactly one of f, i is non-NULL (both NULL only
 * for count == 0). A rank-0 tensor is a scalar with count 1. */
typedef struct tern_host_tensor {
    tern_elem_type type;
    int rank;
    int64_t dims[TERN_GRAPH_MAX_RANK];
    size_t count;
    float *f;
    int64_t *i;
    char **s; /* string tensors: count NUL-terminated UTF-8 texts, each malloc'd ("" when new) */
} tern_host_tensor;

/* Allocates a zero-filled tensor (empty strings for a string tensor); TERN_ERR_RANGE for a negative dim, rank
 * outside [0, 8] or an element count above 2^32; TERN_ERR_INVALID for an undefined type. */
tern_status tern_host_tensor_new(tern_elem_type type, int rank, const int64_t *dims, tern_host_tensor **out,
                                 tern_error *err);
tern_status tern_host_tensor_clone(const tern_host_tensor *t, tern_host_tensor **out, tern_error *err);
void tern_host_tensor_free(tern_host_tensor *t);
double tern_host_tensor_get(const tern_host_tensor *t, size_t i); /* element i as a double (NaN for a string) */
/* Replace string element i by len bytes at text (no NUL among them; text may be NULL when len is 0);
 * TERN_ERR_INVALID otherwise. */
tern_status tern_host_tensor_set_text(tern_host_tensor *t, size_t i, const char *text, size_t len, tern_error *err);

typedef enum {
    TERN_ATTR_FLOAT,
    TERN_ATTR_INT,
    TERN_ATTR_STRING,
    TERN_ATTR_TENSOR,
    TERN_ATTR_FLOATS,
    TERN_ATTR_INTS,
    TERN_ATTR_STRINGS,
    TERN_ATTR_GRAPH /* a subgraph: If branches are imported (graph), Loop/Scan bodies kept as a marker only */
} tern_attr_type;

typedef struct tern_graph_attr {
    char *name;
    tern_attr_type type;
    int64_t i;
    float f;
    char *s;         /* STRING (NUL-terminated; embedded NULs cut it) */
    size_t n;        /* element count of ints / floats / strings */
    int64_t *ints;
    float *floats;
    char **strings;
    tern_host_tensor *t; /* TENSOR */
    struct tern_graph *graph; /* GRAPH: an If branch, imported (NULL for other bodies, which stay markers) */
} tern_graph_attr;

/* ---- the op registry (include/tern/ops.def): one row per (domain, op) ---- */
typedef enum {
    TERN_GOP_UNKNOWN = 0, /* an op no row names (another domain, a newer op): imported, rejected by inference */
#define GOP(id, domain, name, family, min_in, max_in, const_mask, flags, status, opsets) TERN_GOP_##id,
#include "tern/ops.def"
#undef GOP
    TERN_GOP_COUNT
} tern_op_id;

typedef enum {
    TERN_OP_FAMILY_NONE = 0, /* TERN_GOP_UNKNOWN */
    TERN_OP_FAMILY_ELEMENTWISE_UNARY,
    TERN_OP_FAMILY_ELEMENTWISE_BINARY,
    TERN_OP_FAMILY_ELEMENTWISE_VARIADIC,
    TERN_OP_FAMILY_ELEMENTWISE_SELECT, /* Where */
    TERN_OP_FAMILY_AXIS,               /* along one axis: softmax family, arg max/min, top-k, cumulative sum */
    TERN_OP_FAMILY_REDUCE,
    TERN_OP_FAMILY_LAYOUT,    /* moves elements without computing: reshape, transpose, concat, slice, pad ... */
    TERN_OP_FAMILY_INDEX,     /* data-dependent addressing: gather, scatter, one-hot, non-zero */
    TERN_OP_FAMILY_GENERATOR, /* outputs from attributes or shapes alone: Constant, Range, Shape ... */
    TERN_OP_FAMILY_CONV,
    TERN_OP_FAMILY_POOL,
    TERN_OP_FAMILY_NORM,
    TERN_OP_FAMILY_LINEAR,
    TERN_OP_FAMILY_ATTENTION,
    TERN_OP_FAMILY_RECURRENT,
    TERN_OP_FAMILY_LOSS,
    TERN_OP_FAMILY_CONTROL,
    TERN_OP_FAMILY_OPTIMIZER, /* tern.SGDUpdate, tern.AdamUpdate: a weight's fused optimizer step */
    TERN_OP_FAMILY_COUNT
} tern_op_family;

/* Row flags (FLAGS column). */
enum {
    TERN_OPF_FLOAT_IN = 1u << 0,     /* input 0 must be a float type */
    TERN_OPF_COMPARE = 1u << 1,      /* elementwise comparison: bool output */
    TERN_OPF_LOGICAL = 1u << 2,      /* bool inputs and output */
    TERN_OPF_MATMUL = 1u << 3,       /* a matrix product with a constant weight operand (linear layer) */
    TERN_OPF_NARROW_STORE = 1u << 4, /* its device rule can store its output in the narrow matmul dtype */
    TERN_OPF_EMPTY_OUTPUTS = 1u << 5, /* zero-size outputs next to full ones are skipped (Split) */
    TERN_OPF_HEAVY = 1u << 6,        /* a contraction: folding costs inputs x outputs, huge ones stay */
    TERN_OPF_SHAPE_ONLY = 1u << 7,   /* reads only its input's shape (constant once the shape is known) */
    TERN_OPF_STRING_IN = 1u << 8,    /* takes string tensors */
    TERN_OPF_NO_EXPORT_FOLD = 1u << 9, /* always folded, outside the size budget (Constant) */
    TERN_OPF_FUSED = 1u << 10,       /* made by tern_graph_fuse (domain "tern") */
    TERN_OPF_EMPTY_INPUTS = 1u << 11, /* zero-size inputs are skipped (Concat) */
};

typedef enum {
    TERN_OP_STATUS_REQUIRED, /* every conformance case must pass */
    TERN_OP_STATUS_OPTIONAL,
    TERN_OP_STATUS_PLANNED, /* the id exists; no layer handles it yet */
} tern_op_status;

/* One row of the registry, as the table gives it. */
typedef struct {
    tern_op_id id;
    const char *domain; /* "" or "tern" */
    const char *name;   /* ONNX op type */
    tern_op_family family;
    int min_inputs, max_inputs; /* max -1: variadic */
    unsigned const_inputs;      /* bit j: input j must be constant */
    unsigned flags;             /* TERN_OPF_* */
    tern_op_status status;
    const char *opsets; /* since-versions, space separated */
} tern_op_row;

/* The row of (domain, name): domain NULL, "" and "ai.onnx" are the default domain; TERN_GOP_UNKNOWN if none. */
tern_op_id tern_op_lookup(const char *domain, const char *name);
const char *tern_op_name(tern_op_id id);             /* "MatMul"; "?" for UNKNOWN or out of range */
const tern_op_row *tern_op_info(tern_op_id id); /* the row; the UNKNOWN row (family NONE, no flags) out of range */
const char *tern_op_family_name(tern_op_family f);   /* "elementwise_unary", ...; "?" out of range */
const char *tern_op_status_name(tern_op_status s);   /* "required", "optional", "planned" */
/* Shorthands for tern_op_info(id)->flags and ->family. */
unsigned tern_op_flags(tern_op_id id);
tern_op_family tern_op_family_of(tern_op_id id);

typedef struct tern_graph_node {
    char *op;     /* ONNX op type ("MatMul"); fused nodes use domain "tern" (see tern_graph_fuse) */
    char *domain; /* "" for the default ONNX domain */
    int op_id;    /* tern_op_id of (domain, op), set when the node is made or its op changes; never recompute */
    char *name;   /* unique; "<op>_<index at import>" when the model gave none */
    int n_inputs, n_outputs, n_attrs;
    int *inputs;  /* value ids; -1 = omitted optional input */
    int *outputs; /* value ids; -1 = omitted optional output */
    tern_graph_attr *attrs;
} tern_graph_node;

enum {
    TERN_VALUE_INPUT = 1u << 0,       /* a graph input the caller feeds */
    TERN_VALUE_OUTPUT = 1u << 1,      /* a graph output */
    TERN_VALUE_INITIALIZER = 1u << 2, /* constant from the model's initializers (or made one by folding) */
};

typedef struct tern_graph_value {
    char *name;
    tern_elem_type type;              /* UNDEFINED until known */
    int rank;                         /* -1 until known */
    int64_t dims[TERN_GRAPH_MAX_RANK];/* >= 0 when known, -1 when not */
    char *dim_names[TERN_GRAPH_MAX_RANK]; /* symbol of an unknown dim ("batch"), or NULL */
    tern_host_tensor *constant;       /* data when the value is constant (initializer, Constant, folded) */
    int producer;                     /* index of the producing node, -1 for inputs and initializers */
    unsigned flags;                   /* TERN_VALUE_* */
} tern_graph_value;

typedef struct tern_graph tern_graph;

/* ---- import ---- */
/* Parses an ONNX ModelProto (opsets up to 17 of the default domain; "com.microsoft" etc. nodes are kept and
 * rejected by inference). Checks on the way: message nesting depth, tensor dims (negative, overflow, rank > 8),
 * raw_data / typed-data length against dims, duplicate value producers, dangling input names, cycles. External
 * data (data_location = EXTERNAL) is read from files named relative to the model's directory: a location that is
 * absolute or has a '..' component, an offset or length outside the file, or a length other than dims x element
 * size is an error naming the tensor (docs/graph.md). Values get the types and shapes the model declares. */
tern_status tern_graph_load_onnx(const char *path, tern_graph **out, tern_error *err);
/* From memory: external data is an error naming the tensor (there is no directory); the _dir variant reads it
 * relative to dir. */
tern_status tern_graph_load_onnx_buffer(const void *buf, size_t len, tern_graph **out, tern_error *err);
tern_status tern_graph_load_onnx_buffer_dir(const void *buf, size_t len, const char *dir, tern_graph **out,
                                            tern_error *err);
void tern_graph_free(tern_graph *g);

/* ---- accessors (the compiler's view) ---- */
int tern_graph_node_count(const tern_graph *g);
const tern_graph_node *tern_graph_node_at(const tern_graph *g, int i); /* NULL when out of range */
int tern_graph_value_count(const tern_graph *g);
const tern_graph_value *tern_graph_value_at(const tern_graph *g, int id); /* NULL when out of range */
int tern_graph_find_value(const tern_graph *g, const char *name);         /* id, or -1 */
int tern_graph_input_count(const tern_graph *g); /* graph inputs the caller feeds (initializers excluded) */
int tern_graph_input_id(const tern_graph *g, int i);
int tern_graph_output_count(const tern_graph *g);
int tern_graph_output_id(const tern_graph *g, int i);
int64_t tern_graph_opset(const tern_graph *g); /* default-domain opset version */
/* Nodes are stored in topological order; this fills order[0..node_count) with it (an identity today, kept so
 * callers do not depend on the storage order), or fails naming a node on a cycle. */
tern_status tern_graph_topo_order(const tern_graph *g, int *order, tern_error *err);
/* Frees value id's constant data and makes it a plain value (constant NULL): the compiler calls it on a graph it
 * owns once the last reader of a weight has its device copy. */
void tern_graph_release_constant(tern_graph *g, int id);
/* Number of nodes reading value id (graph outputs count once more). */
int tern_graph_value_uses(const tern_graph *g, int id);
/* 1 when the value has a known type and every dim is known. */
int tern_graph_value_is_static(const tern_graph_value *v);
size_t tern_graph_value_numel(const tern_graph_value *v); /* product of dims; 0 if any is unknown */

const tern_graph_attr *tern_graph_node_attr(const tern_graph_node *n, const char *name); /* NULL if absent */
int64_t tern_graph_attr_int(const tern_graph_node *n, const char *name, int64_t dflt);
float tern_graph_attr_float(const tern_graph_node *n, const char *name, float dflt);
const char *tern_graph_attr_string(const tern_graph_node *n, const char *name, const char *dflt);

/* "node \"name\" (Op #i)": the prefix every node error starts with, written into buf. */
const char *tern_graph_node_label(const tern_graph *g, int i, char *buf, size_t len);

/* ---- shapes and passes ---- */
/* Binds a graph input's shape (symbolic dims such as batch and sequence): rank must match the declared rank
 * and known dims must agree. Other values' shapes are cleared to what the model declared (re-run infer). */
tern_status tern_graph_set_input_shape(tern_graph *g, const char *name, int rank, const int64_t *dims,
                                       tern_error *err);
/* Shape and element-type inference for every node in order, checking operand types and shapes (broadcasting,
 * matmul inner dims, attribute ranges) against each op's rules. Nodes whose inputs are all constant and whose
 * outputs are small (<= 65536 elements: the Shape/Gather/Concat chains exporters emit) are evaluated, so their
 * outputs carry constant data and later Reshape/Expand/Slice shapes resolve. Dims that cannot be known stay -1.
 * Ops defined by primitives (LSTM/GRU/RNN, Einsum, ConvTranspose, the two losses, the scatters) are replaced by
 * those primitive nodes here once their inputs' shapes are known, so node indices held across a call may change.
 * Fails with the first node that breaks a rule or whose op is unsupported. */
tern_status tern_graph_infer(tern_graph *g, tern_error *err);
/* Runs infer, then evaluates every node whose inputs are all constant (outputs up to 2^26 elements per node and
 * 2^27 per call; larger ones simply stay) and replaces it by initializer data; such nodes are removed. Folding a
 * graph whose input shapes are bound specialises it to those shapes. Returns the number of nodes folded in *folded
 * (may be NULL). */
tern_status tern_graph_fold_constants(tern_graph *g, int *folded, tern_error *err);
/* Removes nodes none of whose outputs reach a graph output, and values nothing references. Returns the number
 * of nodes removed. Value ids are renumbered (ids held across this call are invalid). */
int tern_graph_prune(tern_graph *g);
/* Fusion (after infer; re-runs infer at the end), rewrites:
 *  - MatMul(A, W) + Add(bias) [+ Relu | Gelu | erf-GELU | tanh-GELU]  ->  tern.MatMulBias(A, W, bias)
 *    with attribute activation = "none" | "relu" | "gelu" | "gelu_tanh" (W and bias constant, bias over the
 *    last dim); Gemm(A, W, bias) with transA=0, alpha=beta=1 followed by an activation likewise;
 *  - decomposed GELU x*0.5*(1+erf(x/sqrt2)) (either multiplication order) and the tanh form
 *    0.5*x*(1+tanh(sqrt(2/pi)*(x+0.044715*x^3)))  ->  Gelu(x) with approximate = "none" | "tanh";
 *  - the decomposed layer norm torch exports below opset 17, ReduceMean/Sub/Pow(2)/ReduceMean/Add(eps)/Sqrt/
 *    Div/Mul(gamma)/Add(beta) over the last axis -> LayerNormalization(x, gamma, beta, axis=-1, epsilon);
 *  - scaled dot-product attention, MatMul(Q, KT) [/ or * a constant scalar] [Where(bool cond, fill, x) or
 *    Where(cond, x, fill) with a constant scalar fill | Add(x, mask)] Softmax(last axis) MatMul(., V), all fp32
 *    with the same known batch dims, head size D <= 128, value size Dv <= 512, keys Sk <= 2048 ->
 *    tern.Attention(Q, KT, V [, cond | mask]) with attributes scale_op (0 none, 1 divide, 2 multiply), scale,
 *    mask (0 none, 1 where fill-on-true, 2 where fill-on-false, 3 additive) and fill; fp32-to-fp32 Casts before
 *    and after the Softmax are taken in (LLaMA's softmax(x, dtype=float32), T5's x.float()), and at rank 4 the
 *    head split and merge, including LLaMA's repeat_kv (Unsqueeze, Expand, Reshape: grouped-query heads, read
 *    in place through the attribute kv_rep = query heads per K/V head);
 *  - tern.MatMulBias(A, W, bias) (W constant) followed by Add(y, r) with r of y's shape ->
 *    tern.MatMulBias(A, W, bias, r): the residual added after the activation;
 *  - tern.MatMulBias(A, W, bias[, r]) then LayerNormalization over the last axis (its only reader) ->
 *    tern.MatMulBias(A, W, bias, r or -, gamma, beta or -) with attributes layernorm=1, epsilon: the layer
 *    norm of each output row in the layer's epilogue.
 * Intermediate values must have no other users. Returns the number of rewrites in *fused (may be NULL). */
tern_status tern_graph_fuse(tern_graph *g, int *fused, tern_error *err);
/* Flags that switch fusions off (for comparisons and debugging). */
#define TERN_GRAPH_NO_ATTENTION_FUSION 1u
/* Keep the attention's operands as materialised [B, H, S, D] tensors instead of reading the heads from the
 * tensors they were cut from (and writing the merged layout) */
#define TERN_GRAPH_NO_ATTENTION_LAYOUTS 2u
/* Keep an Add after a linear layer (tern.MatMulBias) as its own node instead of the layer's 4th input */
#define TERN_GRAPH_NO_RESIDUAL_FUSION 4u
/* Keep a LayerNormalization after a linear layer as its own node instead of the layer's epilogue */
#define TERN_GRAPH_NO_LAYERNORM_FUSION 8u
/* No fusion at all (the training step: whether a pattern fuses depends on how many nodes read its values, which
 * activation recomputation changes, and a fused op need not round as the unfused ones do) */
#define TERN_GRAPH_NO_FUSION 16u
tern_status tern_graph_fuse_flags(tern_graph *g, unsigned flags, int *fused, tern_error *err);
/* The standard pipeline: infer, fold, prune, fuse, prune. */
tern_status tern_graph_optimize(tern_graph *g, tern_error *err);
tern_status tern_graph_optimize_flags(tern_graph *g, unsigned flags, tern_error *err);

/* ---- host reference evaluator ---- */
/* Evaluates node i: inputs[k] is the tensor of the node's k-th input (NULL for an omitted optional one);
 * outputs[k] receives a new tensor for each present output (NULL for omitted ones; the caller frees). The node's
 * attributes and the graph's opset select the semantics. Errors name the node, the op and the reason;
 * TERN_ERR_UNSUPPORTED for ops the evaluator does not know (tern_graph_eval_supported). */
tern_status tern_graph_eval_node(const tern_graph *g, int i, const tern_host_tensor *const *inputs,
                                 tern_host_tensor **outputs, tern_error *err);
int tern_graph_eval_supported(const char *domain, const char *op);
/* Runs the whole graph on the host: inputs[k] for graph input k (tern_graph_input_id order), outputs[k]
 * receives a new tensor for graph output k. Input types must match and shapes must agree with known dims. */
tern_status tern_graph_run(const tern_graph *g, const tern_host_tensor *const *inputs, tern_host_tensor **outputs,
                           tern_error *err);

/* Readable text: inputs, initializers (shape only), nodes with attributes and output shapes, outputs. */
void tern_graph_dump(FILE *f, const tern_graph *g);

#ifdef __cplusplus
}
#endif
#endif
