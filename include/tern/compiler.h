/* tern compiler layer: from a graph (graph.h, imported from ONNX) to a tern executable (runtime.h). The graph
 * is optimised (inference, constant folding, dead code, fusion), every value gets a place in HBM (weights as
 * constants in their device format, activations as scratch tensors reused when their last reader is done, inputs
 * and outputs as the interface), and every node is lowered to library kernels of the kernel API. Matmuls run in
 * BF16 with FP32 accumulation by default (like neuronx-cc's auto-cast), or FP32 / FP8 on request. A batch can be
 * split over the cores of a chip. What is not supported is an error naming the node, the op and the reason. */
#ifndef TERN_COMPILER_H
#define TERN_COMPILER_H

#include <stddef.h>
#include <stdint.h>

#include "tern/base.h"
#include "tern/graph.h"
#include "tern/num.h"
#include "tern/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A value for one named symbolic input dimension ("batch" = 2; `tern compile --dim batch=2`). */
typedef struct {
    const char *name;
    int64_t value;          /* >= 0 */
} tern_dim_binding;

/* The shape of the data the caller will feed one input (a .npy file's, for `tern run model.onnx --input`): it
 * binds that input's symbolic dims, and its fixed dims must equal the model's. */
typedef struct {
    const char *input;      /* the ONNX input name (or its program tensor name, tern_compile_io_name) */
    const char *source;     /* where the shape came from, for messages ("x.npy"); may be NULL */
    int rank;
    int64_t dims[TERN_GRAPH_MAX_RANK];
} tern_input_shape;

typedef struct {
    const char *machine;    /* target machine name or path (its NeuronCore geometry and timing) */
    tern_dtype matmul_dtype;/* TERN_DTYPE_BF16 (default), TERN_DTYPE_FP32 or TERN_DTYPE_FP8_E4M3 */
    unsigned cores;         /* split the batch (axis 0 of every input and output) over this many cores; 0 = 1 */
    int64_t default_dim;    /* value for symbolic input dims left unbound (batch, sequence); 0 = 1; see dims */
    int no_attention_fusion;/* keep attention as separate MatMul/Softmax/... nodes (tern.Attention otherwise) */
    int no_attention_layouts;/* fused attention reads materialised [B, H, S, D] operands (the heads are otherwise
                                read from the tensor they were cut from and written in the merged layout) */
    int no_residual_fusion; /* keep an Add after a linear layer as its own node (else the layer's epilogue adds) */
    int no_layernorm_fusion;/* keep a LayerNormalization after a linear layer as its own node (else the layer's
                               epilogue normalises each output row on chip) */
    int no_fusion;          /* no graph fusion at all (TERN_GRAPH_NO_FUSION; training steps) */
    int no_elementwise_fusion; /* lower every elementwise node on its own (else chains of elementwise nodes of one
                               shape run as one pass over SBUF tiles, and a Relu or residual Add after a convolution
                               rides on its GEMM, the same bits; docs/compiler.md, docs/compiler-cnn.md) */
    int no_keep_on_chip;    /* every kernel's output goes through HBM (else a linear layer whose only reader is
                               another linear layer with a constant weight, a transformer's FFN, runs with it as one
                               kernel, the middle kept on chip: tern_lib_linear_pair; and an attention whose only
                               reader is the next node, such a layer, hands it its output rows in SBUF:
                               tern_lib_linear_rows; the same bits either way) */
    void (*progress)(void *ctx, int done, int total); /* optional, called per lowered node */
    void *progress_ctx;
    /* Symbolic input dims are bound by name (dims) and from the shapes of the data given for inputs
     * (input_shapes); those left unbound take default_dim. One name given two values by any two sources is an
     * error naming the dim, both values and both sources; so is a name no input declares. */
    const tern_dim_binding *dims;
    size_t num_dims;
    const tern_input_shape *input_shapes;
    size_t num_input_shapes;
    int explain;            /* record, per node, the lowering rule that fired (tern_compile_report.rules) */
    uint64_t hbm_io_align;  /* inputs and outputs of at least this many bytes start at a multiple of it in HBM (0:
                               64 bytes, as every tensor; else a power of two >= 64): the trainer gives the
                               simulator's page, tern_core_hbm_page_bytes, for tern_rt_carry (docs/training.md) */
} tern_compile_opts;

void tern_compile_opts_default(tern_compile_opts *o);

typedef struct {
    int nodes_in, nodes_after_opt; /* graph size before and after optimisation */
    int lowered, aliased;          /* nodes lowered to kernels; views (reshape & co) */
    int lowered_empty;             /* of `lowered`: nodes whose outputs all have zero elements, lowered to nothing
                                      (no storage, no instructions) */
    size_t instructions;           /* per core */
    uint64_t hbm_bytes;            /* per core: the peak HBM footprint */
    uint64_t weight_bytes;         /* per core: constants */
    double model_flops;            /* 2 x MACs of the model's matmuls (whole batch) */
    int fused_attention;           /* tern.Attention nodes in the optimised graph (the attention fusion's) */
    int fused_elementwise;         /* elementwise nodes lowered as members of a fused group */
    int elementwise_groups;        /* those groups (each one pass over SBUF tiles) */
    int matmul_sums;               /* trees of Adds over linear-layer products computed on chip (one GEMM each) */
    int matmul_sum_products;       /* the products they sum */
    int fused_conv_relu;           /* Relu nodes applied by their Conv's GEMMs as the tiles leave PSUM */
    int fused_conv_add;            /* residual Add nodes applied by their Conv's GEMMs likewise */
    int fused_conv_silu;           /* SiLUs (a Sigmoid and a Mul of its input) applied by their Conv's GEMMs likewise */
    int fused_bn_relu;             /* Relu nodes applied by the BatchNormalization pass before them */
    int fused_conv_clip;           /* Clips with compile-time bounds (ReLU6) applied by their Conv likewise */
    int concat_in_place;           /* Concat inputs their producers placed in the Concat's output (nothing copied) */
    /* With tern_compile_opts.explain: one row per node of the optimised graph the compiler reached, in order,
     * filled even when the compile fails (the failing node's row says why); NULL otherwise. Free with
     * tern_compile_report_free. */
    struct tern_compile_node_rule *rules;
    int num_rules;
} tern_compile_report;

/* What lowered one node (`tern compile --explain`): the rule of the compiler's family files that fired, or why
 * none did. */
typedef struct tern_compile_node_rule {
    int node;                      /* index in the optimised graph */
    char name[96];                 /* the node's name ("" when it has none) */
    char op[64];                   /* domain.op */
    const char *rule;              /* the rule's name; NULL when none fired; "empty" for a node whose outputs all
                                      have zero elements (lowered to nothing) */
    const char *file;              /* the compiler file holding the rule; NULL with rule */
    char declined[256];            /* rules of the op passed over before `rule`, each with its reason */
    char why[256];                 /* when no rule fired: why (the compile error) */
} tern_compile_node_rule;
void tern_compile_report_free(tern_compile_report *rep);
/* The names of the lowering rules for op id, in selection order (at most max written; returns how many). */
int tern_op_rule_names(tern_op_id id, const char **names, int max);

/* Compile an imported graph (it is optimised in place) into an executable. */
tern_status tern_compile(tern_graph *g, const tern_compile_opts *o, tern_exe *out, tern_compile_report *rep,
                         tern_error *err);
/* Load an ONNX file and compile it. */
tern_status tern_compile_onnx(const char *path, const tern_compile_opts *o, tern_exe *out, tern_compile_report *rep,
                              tern_error *err);
/* The program tensor name tern uses for an ONNX input or output name: the name itself when it is 1..47
 * characters of [A-Za-z0-9_.-], else a prefix with '_' for other characters, '.' and a 16-hex-digit hash of the
 * whole name (distinct names give distinct tensors). The executable records the ONNX name too (model_name). */
void tern_compile_io_name(const char *onnx_name, char *out, size_t len);

/* How the compiler runs an op of the registry (tern_op_id) on the device: by one of its lowering rules, by
 * rewriting the node into primitive ops at shape inference (an expansion), or not at all. docs/ops.md. */
typedef enum { TERN_OP_DEVICE_NONE, TERN_OP_DEVICE_RULE, TERN_OP_DEVICE_EXPANSION } tern_op_device;
tern_op_device tern_op_device_support(tern_op_id id);

#ifdef __cplusplus
}
#endif
#endif
