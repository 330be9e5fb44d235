/* Private to the compiler: the compilation context (graph, kernel under construction, where each value lives)
 * and the helpers the op lowerings share (HBM views of values, scratch allocation, constants, errors). */
#ifndef TERN_COMPILER_INTERNAL_H
#define TERN_COMPILER_INTERNAL_H

#include "tern/compiler.h"
#include "tern/kernel.h"
#include "tern/kernel_lib.h"

#define CC_MAX_RANK 8

/* Where a graph value lives on the device. A value with zero elements (a 0 dimension) is placed without storage:
 * `flat` is tern_view_none() and nothing may read or write it (cc_view refuses); lowerings see such values only
 * as Concat inputs and Split outputs, which skip them. */
typedef struct {
    int placed;
    tern_view flat;       /* the whole tensor as a 1-D HBM view (owner's storage, at this value's offset) */
    tern_dtype dt;        /* device storage format */
    int rank;
    int64_t dims[CC_MAX_RANK];
    uint64_t numel;
    int owner;            /* value id owning the storage (itself unless an alias, e.g. Reshape) */
    int last_use;         /* last node reading it (or an alias of it); INT32_MAX for graph outputs */
    int scratch;          /* storage is a releasable scratch tensor */
    int released;
    double const_scalar;  /* value when the value is a constant with one element */
    int is_const_scalar;
    const tern_host_tensor *host; /* constant data (graph constants); the device copy is made on first use */
    int narrow;           /* stored in the matmul dtype: every reader takes it as a matmul operand (cc_plan_narrow) */
    int stored_off_sync;  /* its producer stores it from ScalarE's DMA queue and leaves SyncE free meanwhile (the
                             fused attention, layer norms): a linear layer reading it loads weights first */
    int tview;            /* a 2-D Transpose folded into its readers (transpose.fold): the storage is the source's,
                             [dims[1], dims[0]] row-major; only linear layers with run-time weights read it */
    int early;            /* computed ahead of its node by an earlier linear layer reading the same input (one GEMM
                             with the weights side by side, lower_linear.c): its node emits nothing */
    int out_as;           /* 1 + the id of a graph output that is an Identity of this value (the training step names
                             its outputs so): the value is placed as that output's tensor, and the Identity is then a
                             view of it instead of a copy (compile.c, plan_output_names); 0: none */
    int as_output;        /* placed as the tensor of graph output out_as - 1 */
    int home;             /* 1 + the index of the shared buffer it is planned into (cc_concat_plan); 0: its own */
    uint64_t home_off;    /* its first element's index in that buffer */
} cc_value;

/* A buffer that a chain of Concats and their inputs share (cc_concat_plan): each input is placed at its offset,
 * each Concat's output is a view of its inputs' run of it, so the Concats copy nothing. */
typedef struct {
    uint64_t numel;
    tern_dtype dt;
    int owner;      /* the member placed first, which allocated it; -1 before */
    int last_use;   /* the last node reading any member, or producing one */
    tern_view flat;
} cc_home;

typedef struct {
    tern_graph *g;
    const tern_compile_opts *o;
    tern_kernel *k;
    tern_core_config cfg;
    cc_value *v;
    int nv;
    int node;             /* node being lowered */
    tern_error *err;
    int failed;
    unsigned names;       /* counter for scratch tensor names */
    double model_flops;
    int lowered, aliased;
    int lowered_empty;    /* nodes whose outputs all have zero elements: lowered to nothing */
    int release_constants; /* the graph is the compiler's own (loaded from a file): a constant's host data is freed
                              after its last reader, once its device copy exists, so weights are not held twice */
    tern_compile_node_rule *rules; /* --explain rows (tern_compile_opts.explain) */
    int nrules, caprules;
    /* A linear layer's transposed input aT [K, M] in the matmul dtype (lower_linear.c), kept for the later linear
     * layers that read the same input (Q, K and V; gate and up): made once instead of once per layer. */
    int at_held;
    int at_src, at_last; /* the input's value id; the last node that reads it as a linear layer's input */
    tern_view at_view;
    /* Rows a kernel left in SBUF for the next node, a linear layer (or FFN pair) that takes them as its input: an
     * attention's merged output, a fused layer norm's rows (lower_attention.c, lower_linear.c). The value (-1:
     * none), the node that takes them, the tile, and the HBM rows they stand for (cc_kept_flush stores them there
     * when that node does not take them, or another would read them from HBM). */
    int kept_id, kept_reader;
    tern_view kept_rows, kept_hbm;
    struct cc_fusion *fuse; /* the elementwise groups (fuse_elementwise.c); NULL: none */
    struct cc_msum *msum;   /* the sums of linear-layer products made on chip (fuse_matmul_sum.c); NULL: none */
    int *conv_epi;          /* per node (cc_conv_epi_plan): for a Conv, the last node of its fused epilogue (whose
                               output its GEMMs write); for a fused Add or Relu, its Conv; -1 none */
    int conv_relus, conv_adds; /* Relu and Add nodes fused into their Conv */
    int conv_silus;            /* SiLUs (Sigmoid and Mul) fused into their Conv */
    int conv_clips;            /* Clips fused into their Conv */
    int bn_relus;              /* Relus fused into the BatchNormalization before them */
    cc_home *homes;         /* shared Concat buffers (cc_concat_plan) */
    int nhomes;
    int concats_in_place;   /* Concat inputs placed where the Concat's output wants them (no copy) */
} compile_ctx;

/* Record a failure naming the current node ("node \"x\" (Op #i): ..."). Returns the status. */
tern_status cc_fail(compile_ctx *c, tern_status code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int cc_ok(compile_ctx *c); /* no failure so far (neither the compiler's nor the kernel builder's) */

const tern_graph_node *cc_node(compile_ctx *c);
/* Whether value id is no graph output and every read of it is node j1's input k1 or node j2's input k2 (j2 < 0:
 * none) (lower_linear.c). */
int cc_readers_only(const compile_ctx *c, int id, int j1, int k1, int j2, int k2);
void cc_kept_flush(compile_ctx *c); /* the kept rows (if any) stored to their HBM rows and released */
cc_value *cc_in(compile_ctx *c, int k);  /* k-th input of the current node (placed); NULL if absent */
int cc_in_id(compile_ctx *c, int k);
int cc_out_id(compile_ctx *c, int k);
/* Place the current node's k-th output as a fresh tensor (scratch or, for graph outputs, an output); an output
 * with zero elements is placed without storage. */
cc_value *cc_out(compile_ctx *c, int k, tern_dtype dt);
/* The storage dtype of a float output k of a linear layer or an attention: the matmul dtype when the value is
 * narrow (see cc_plan_narrow), else fp32. */
tern_dtype cc_float_out_dtype(compile_ctx *c, int k);
/* Node i is a linear layer the fused kernel lowers (MatMul / MatMulBias / default Gemm of an activation and a
 * constant 2-D weight, K <= CC_LINEAR_MAX_K): its input 0 is read only as a matmul operand. */
#define CC_LINEAR_MAX_K 8192
int cc_node_is_linear(const tern_graph *g, int i);
/* Make output k an alias of input j's storage with the output's shape (views: Reshape & co). */
cc_value *cc_alias(compile_ctx *c, int k, int j);

/* Views of a placed value's storage: 2-D [rows, cols] row-major starting at element `off`, rows `row_stride`
 * apart; and the general form with up to 4 free dims plus a partition dim (steps in elements). */
tern_view cc_view2d(compile_ctx *c, cc_value *x, uint64_t off, uint64_t rows, uint64_t cols, uint64_t row_stride);
tern_view cc_view(compile_ctx *c, cc_value *x, uint64_t off, uint32_t parts, int64_t part_step, unsigned nd,
                  const uint32_t *nums, const int32_t *steps);
/* A scratch HBM tensor not bound to a graph value (released with tern_kernel_release). */
tern_view cc_temp(compile_ctx *c, tern_dtype dt, uint64_t rows, uint64_t cols);
/* A constant tensor from host data (converted to dt); rows x cols. */
tern_view cc_const2d(compile_ctx *c, const tern_host_tensor *t, tern_dtype dt, uint64_t rows, uint64_t cols,
                     int transpose);

/* Copy src (any float/int dtype) to dst with a DMA (HBM to HBM, casts through fp32). Views must have equal
 * element counts. */
void cc_copy(compile_ctx *c, tern_view dst, tern_view src);

/* Shape helpers shared by the lowerings. */
static inline int64_t cc_norm_axis(int64_t a, int rank) { return a < 0 ? a + rank : a; }
/* Row-major element strides of x's dims. */
void cc_strides(const cc_value *x, int64_t *st);
int cc_same_shape(const cc_value *a, const cc_value *b);
int cc_dims_equal(int ra, const int64_t *a, int rb, const int64_t *b); /* the same rank and dims */
/* The device dtype of the current node's output k (64-bit integers become 32-bit ones). */
tern_dtype cc_out_dtype(compile_ctx *c, int k);

/* The lowering of one op; returns nonzero when the op was handled (success or recorded failure). */
typedef int (*cc_lower_fn)(compile_ctx *c);

/* One lowering rule: for nodes of op `op`, `applies` (NULL: every node) decides from the node alone, before
 * anything is emitted or allocated, whether `lower` takes it, and when not writes why into why[len] (shown by
 * `tern compile --explain`). Each compiler family file holds an ordered array of rules (cc_rule_set); a node's
 * op is lowered by the first rule, in the order of rules.c's list of sets and then of each array, that applies.
 * The fast special cases come first and a general rule (applies NULL) last; test_op_rules checks that no rule
 * sits after an unconditional one of the same op, where it could never fire. */
typedef struct {
    tern_op_id op;
    const char *name;
    int (*applies)(compile_ctx *c, char *why, size_t len);
    cc_lower_fn lower;
} cc_rule;
typedef struct {
    const char *file; /* the compiler file holding the rules (docs, --explain) */
    const cc_rule *rules;
    size_t n;
} cc_rule_set;
#define CC_RULE_SET(file, arr) {(file), (arr), sizeof(arr) / sizeof((arr)[0])}
/* The family files' rule sets (rules.c lists them in selection order). */
extern const cc_rule_set cc_rules_reduce_last, cc_rules_cnn, cc_rules_attention, cc_rules_elementwise,
    cc_rules_reduce, cc_rules_axis, cc_rules_linear, cc_rules_norm, cc_rules_index, cc_rules_layout;
extern const cc_rule_set cc_rules_optim; /* lower_optim.c: tern.SGDUpdate, tern.AdamUpdate */
extern const cc_rule_set cc_rules_scatter; /* lower_scatter_add.c: ScatterND add of whole rows */
extern const cc_rule_set cc_rules_reduce_long; /* lower_reduce_long.c: reductions of rows over 32,768 elements */
/* The rules of op id in selection order (at most max written; returns how many there are). */
int cc_rules_for(tern_op_id id, const cc_rule **out, int max);
/* The rule that lowers the current node: the first of its op's rules that applies; NULL when the op has none.
 * The rules passed over on the way are named with their reasons in declined[len] ("" when none). */
const cc_rule *cc_rule_select(compile_ctx *c, char *declined, size_t len);
const char *cc_rule_file(const cc_rule *r); /* the file of the set holding r */
/* Whether the current node, a Transpose, is folded into its readers by transpose.copy (lower_linear.c): a 2-D swap of a
 * placed, non-folded value stored in the matmul dtype (BF16), not a graph output, whose every reader is a MatMul
 * taking it as input 0 against a run-time 2-D weight. Those readers want the transpose of their input 0, which is
 * then the source itself: no copy either way. why[len] says why not. */
int cc_transpose_folds(compile_ctx *c, char *why, size_t len);
/* Elementwise fusion (fuse_elementwise.c): cc_fuse_plan groups chains of elementwise nodes of one shape before
 * lowering (and keeps their inputs live until their group runs); cc_fuse_node takes node i when it is a group
 * member (*rule names the fusion): the group is emitted at its last member, the others emit nothing. */
void cc_fuse_plan(compile_ctx *c);
int cc_fuse_node(compile_ctx *c, int i, const char **rule);
int cc_fuse_member(const compile_ctx *c, int i);
int cc_fuse_emitted_at(const compile_ctx *c, int i); /* where node i's group is emitted (its last member); -1: none */
void cc_fuse_counts(const compile_ctx *c, int *nodes, int *groups);
void cc_fuse_free(compile_ctx *c);
/* Sums of linear-layer products (fuse_matmul_sum.c): cc_msum_plan finds trees of Adds over MatMuls with run-time
 * weights (a backward's input gradients) before the elementwise grouping, which leaves their nodes alone, and keeps
 * the products' inputs live until the root; cc_msum_node takes node i when it belongs to one (*rule names the
 * fusion): the root Add emits one tern_lib_gemm_sum, the others nothing. */
/* A convolution's epilogue (lower_cnn.c): cc_conv_epi_plan finds, after a Conv whose output nothing else reads, a
 * Relu, or a residual Add of a tensor of its shape (and a Relu after that), for the Conv's GEMMs to apply as their
 * fp32 tiles leave (tern_gemm_opts.relu, .residual): the last node's output is then the Conv's, and the other
 * nodes' passes over the tensor go. cc_conv_epi_node takes such an Add or Relu node (*rule names the fusion);
 * cc_conv_epi_member says whether node i is one. */
void cc_conv_epi_plan(compile_ctx *c);
/* After the elementwise plan: an epilogue whose residual operand an elementwise group or a sum of products would
 * make only after its Conv (where the group is emitted) is given up: the Add and its Relu are lowered on their own. */
void cc_conv_epi_settle(compile_ctx *c);
/* With a BF16 matmul dtype: a convolution's output (after its epilogue, without a residual) that only convolutions
 * of the GEMM path read, as their input, is stored in BF16 (narrow): they would round it to BF16 (RNE) anyway. Off
 * with no_elementwise_fusion, as the epilogues. */
void cc_conv_narrow(compile_ctx *c);
/* Concats whose inputs can be placed where the output wants them (lower_layout.c): plan the shared buffers
 * (cc_value.home); cc_out places such a value there (cc_home_place: 0 when it cannot, and it is placed alone). */
void cc_concat_plan(compile_ctx *c);
int cc_home_place(compile_ctx *c, cc_value *x, int id, tern_dtype dt);
int cc_conv_epi_node(compile_ctx *c, int i, const char **rule);
int cc_conv_epi_member(const compile_ctx *c, int i);
void cc_msum_plan(compile_ctx *c);
int cc_msum_node(compile_ctx *c, int i, const char **rule);
int cc_msum_member(const compile_ctx *c, int i);
void cc_msum_counts(const compile_ctx *c, int *sums, int *products);
void cc_msum_free(compile_ctx *c);
/* tern.Attention, the fused attention (lower_attention.c). */
int cc_lower_attention(compile_ctx *c);
/* tern.AttentionGrad, the fused flash-attention backward (lower_attention_bwd.c). */
int cc_lower_attention_grad(compile_ctx *c);

#endif
