/* tern's kernel library: tested kernels built with the kernel API (kernel.h). Each function appends its
 * instructions to a kernel under construction, reading and writing the views it is given, so library kernels
 * compose into bigger ones. Each is checked against a float64 reference in tests/kernel/. */
#ifndef TERN_KERNEL_LIB_H
#define TERN_KERNEL_LIB_H

#include "tern/kernel.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Blocking of the GEMM, in tiles (a tile is 128 x 128 stationary, 128 x 512 moving on NeuronCore-v2). The
 * defaults (0) are the NKI matrix-multiplication tutorial's fully optimised kernel: 16 x 2 x 8 tiles, i.e.
 * blocks of M=2048, N=1024, K=1024, SBUF accumulators in the input dtype. */
typedef struct {
    unsigned tiles_in_block_m, tiles_in_block_n, tiles_in_block_k;
    int acc_dtype; /* tern_dtype of the SBUF accumulators across K blocks; -1 = the lhsT dtype (tutorial) */
    int rhs_dtype; /* tern_dtype the rhs tiles are loaded as (a casting DMA, RNE); -1 = the rhs's own */
    /* Optional fp32 [M, 1] HBM view (region -1: none, the default): out[i, :] = sum + row_bias[i], added in fp32 as
     * the output tiles leave PSUM or the accumulators (one fp32 rounding, as a separate tensor_scalar add of the
     * stored fp32 product would give), then rounded once to out's dtype: a bf16 out holds the fp32 result's
     * rounding, as a cast of the fp32 output would. Float outputs. */
    tern_view row_bias;
    /* 1: out = Relu(sum [+ row_bias]), applied as the fp32 tiles leave PSUM or the accumulators (one ScalarE
     * activation: relu(sum * 1 + bias), each step rounded to fp32, the same bits as storing the fp32 sum and running
     * a Relu activation over it), rounded once to out's dtype. Float outputs. 0 (the default): no activation. */
    int relu;
    /* Optional fp32 [M, N] HBM view (region -1: none, the default; one output only): out = (sum [+ row_bias]) +
     * residual, or residual + (sum [+ row_bias]) with residual_first, one fp32 add per element (VectorE
     * tensor_tensor, as an Add of the stored fp32 output would make), then relu if set; fp32 outputs only. */
    tern_view residual;
    int residual_first;
    /* 1: out = z * sigmoid(z), 2: out = sigmoid(z) * z, where z = sum [+ row_bias] as an fp32 tile about to be
     * stored (a SiLU written as Sigmoid and Mul after a Conv): ScalarE's Sigmoid activation of z (scale 1, no bias)
     * into a tile, then VectorE's fp32 multiply in that operand order, the instructions an elementwise pass over the
     * stored fp32 output would run. fp32 out and accumulators; not with relu or residual. 0 (the default): none. */
    int silu;
    /* 1: out = Clip(z, clip_lo, clip_hi) on the fp32 tile about to be stored (tern_lib_clip_tile: a ReLU6 after a
     * Conv), the instructions the Clip rule runs on the stored output. fp32 out and accumulators; not with relu,
     * residual or silu. 0 (the default): none. */
    int clip;
    float clip_lo, clip_hi;
} tern_gemm_opts;

void tern_gemm_opts_default(tern_gemm_opts *o);

/* out[M,N] = lhsT[K,M]^T @ rhs[K,N] with HBM views of any M, N, K (ragged edges handled), inputs in any
 * TensorE dtype (fp8 e4m3/e5m2, bf16, fp16, fp32), out in any float dtype. Blocked as in the NKI tutorial:
 * rhs loads hoisted out of the M loop, lhsT loads out of the N-tile loop, one PSUM accumulation group per
 * output tile per K block, partial sums accumulated in SBUF across K blocks. */
void tern_lib_gemm(tern_kernel *k, tern_view out, tern_view lhsT, tern_view rhs, const tern_gemm_opts *opts);
/* The GEMM of one lhsT against n_out (1 to 16) rhs side by side: outs[j][M, N_j] = lhsT^T @ rhss[j][K, N_j]. It
 * runs as tern_lib_gemm over the concatenation [K, sum N_j] (rhs tiles loaded from each rhs into one SBUF tile,
 * output tiles stored to each out), so lhsT is read once per N block of the concatenation instead of once per
 * N block of each rhs (linear layers reading one input: Q, K and V). Each output element's accumulation is
 * tern_lib_gemm's (the K blocking does not depend on N): the same bits as n_out separate calls. The rhs share a
 * dtype, and so do the outs; n_out == 1 is tern_lib_gemm's instruction stream. */
void tern_lib_gemm_multi(tern_kernel *k, unsigned n_out, const tern_view *outs, tern_view lhsT, const tern_view *rhss,
                         const tern_gemm_opts *opts);
/* tern_lib_gemm_multi of lhsT = a^T, as tern_lib_transpose(lhsT in lhs_dt, a) would make it, without lhsT in HBM:
 * each lhsT tile is made when the GEMM needs it, from a's rows loaded once per (K block, M block), by the
 * instructions tern_lib_transpose runs for its 128 x 128 blocks (the PE array, VectorE's copy casting to lhs_dt):
 * the same values, so the same bits as the transpose followed by tern_lib_gemm_multi. The tiles are made once per
 * N block of the outputs side by side: best when those are one block (at most 1,024 columns by default). */
void tern_lib_gemm_multi_rows(tern_kernel *k, unsigned n_out, const tern_view *outs, tern_view a, tern_dtype lhs_dt,
                              const tern_view *rhss, const tern_gemm_opts *opts);
/* A sum of GEMM products computed on chip: terms t_j = lhsT_j[K_j, M]^T @ rhs_j[K_j, N] (each K_j within one K
 * block of opts, so each t_j is one fp32 PSUM accumulation group per output tile, as tern_lib_gemm's) combined by
 * a tree of additions: node i is round_dt(x_a + x_b), an operand x being term j's value t_j + 0 (what
 * tern_lib_gemm stores into an fp32 output) or an earlier node's result; the last node is out[M, N] (its dt is
 * out's dtype). Each term and each node but the last is an operand exactly once. Per output tile, the first term
 * of a node goes from PSUM to an fp32 SBUF tile on ScalarE (x * 1 + 0: t + 0), and VectorE adds the other
 * operand (read from PSUM: x + t equals x + (t + 0) for every x that is itself a sum or a t + 0, -0 included)
 * into a tile of the node's dtype: the values and roundings of the separate GEMMs (fp32 outputs) followed by the
 * Adds, without the fp32 products and partial sums going through HBM. */
typedef struct {
    int a, b;      /* operands: j >= 0 term j, -1 - i node i (i before this node) */
    tern_dtype dt; /* the dtype the sum is rounded to (the dtype its value is stored in when not fused) */
} tern_gemm_sum_node;
/* rows_dt < 0: lhsT[j] is [K_j, M]; else lhsT[j] is a_j [M, K_j], each tile transposed on chip into rows_dt as
 * tern_lib_gemm_multi_rows does (the same values as tern_lib_transpose's). */
void tern_lib_gemm_sum(tern_kernel *k, tern_view out, unsigned n_terms, const tern_view *lhsT, int rows_dt,
                       const tern_view *rhs, unsigned n_nodes, const tern_gemm_sum_node *nodes,
                       const tern_gemm_opts *opts);

/* out[M,N] = act(a[M,K] @ w[K,N] + bias[N]), fused: the only HBM traffic is a, w, bias and out (no
 * temporaries). a: 2-D HBM [M, K], any float dtype; w: 2-D HBM [K, N] in a TensorE dtype (bf16 normally; fp32,
 * fp16, fp8); bias: HBM [N] or [1, N], fp32 (any float is cast to fp32 on load), or absent (tern_view_none());
 * out: 2-D HBM [M, N], any float dtype; act: TERN_ACT_COPY for none.
 * Algorithm: per tile of up to 128 rows of a, one DMA loads the rows, ScalarE casts them to w's dtype on v2
 * (v3+ transposes in a's dtype and casts in the PSUM copy) and TensorE transposes each 128-column chunk
 * (transpose_pe on v3+, identity matmul on v2) into PSUM, copied by VectorE into an SBUF aT tile. The aT of
 * all row tiles stays in SBUF (of blocks of row tiles when all of M would take more than 3/8 of SBUF) while w
 * streams through SBUF in column blocks (up to 3 in flight, each loaded in ~512 KiB parts along K so TensorE
 * starts on the first part), each used by every row tile of the block: w is read once per block of row tiles.
 * Each [<=128, 512] output tile is one PSUM accumulation group over all of K (ascending 128-row K tiles), then
 * VectorE adds the broadcast bias (tern_lib_broadcast_row) into an fp32 SBUF tile and ScalarE applies act in
 * place (without bias: act, or a copy, out of PSUM); one DMA stores the tile, casting to out's dtype.
 * Numerics: for K <= 1024 bit-identical (with RNE rounding) to tern_lib_transpose + tern_lib_gemm (fp32
 * accumulators) + tern_lib_bias_act; for K > 1024 the single accumulation group differs from lib_gemm's
 * per-1024 K-block SBUF accumulation by rounding only (fp32 sum over K either way).
 * Limits: SBUF must hold one row tile's rows (twice), its aT and a 64-column weight block: K up to about 11000
 * (fp32 a, bf16 w) on NeuronCore-v2, 17000 on v3. Errors (shape, rank, dtype, non-HBM views, too large K) are
 * recorded in the kernel with a message starting "linear:". Details: docs/kernels.md. */
void tern_lib_linear(tern_kernel *k, tern_view out, tern_view a, tern_view w, tern_view bias, tern_act_func act);
/* The same followed by out += residual (an fp32 add after the activation, as an Add node after the layer would
 * do): residual is an HBM [M, N] float view, loaded tile by tile while each output tile accumulates. */
void tern_lib_linear_residual(tern_kernel *k, tern_view out, tern_view a, tern_view w, tern_view bias,
                              tern_act_func act, tern_view residual);
/* The same (residual optional: an invalid view) followed by a layer norm of each output row, out = (y - mean) *
 * rstd * gamma + beta: tern_lib_layernorm's instruction sequence on the row's output tiles in SBUF before they
 * are stored, from ScalarE's DMA queue as tern_lib_layernorm does (the same bits as tern_lib_linear_residual
 * into a temporary, then tern_lib_layernorm). gamma and
 * beta (beta optional) are [N] or [1, N] float HBM views. Returns 1 when it emitted the layer (or recorded an
 * error); 0, having emitted nothing, when an output row does not fit one weight block and one wave of PSUM
 * accumulation groups, or SBUF cannot also hold the row's tiles: the caller then runs the two kernels. */
int tern_lib_linear_ln(tern_kernel *k, tern_view out, tern_view a, tern_view w, tern_view bias, tern_act_func act,
                       tern_view residual, tern_view gamma, tern_view beta, float eps);
/* Every option of the linear layer at once (the functions above are this with defaults). */
typedef struct {
    tern_view residual;    /* [M, N] added after the activation, or an invalid view */
    tern_view gamma, beta; /* the layer norm (gamma valid: tern_lib_linear_ln's rules), beta optional */
    float eps;
    /* Issue the first weight block before the rows of a. Worth it when a comes from a kernel that leaves the
     * DMA queues idle while it computes and stores from another engine's queue (the fused attention): the
     * weights then stream during that computation, while the rows' load waits for its store anyway. Otherwise
     * the weights would delay the rows behind them. */
    int weights_first;
    /* With the layer norm: the layer's output before the norm is stored here too ([M, N] float HBM view, or an
     * invalid view): pre-LN models read it again for the next residual add. */
    tern_view pre_out;
} tern_linear_ext;
/* Returns as tern_lib_linear_ln when a layer norm is asked for (0: declined, nothing emitted), else 1. */
int tern_lib_linear_ext(tern_kernel *k, tern_view out, tern_view a, tern_view w, tern_view bias, tern_act_func act,
                        const tern_linear_ext *x);
/* Two layers in one kernel, the first's output kept on chip: out = layer2(act1(a @ w1 + b1)), where layer2 is
 * tern_lib_linear_ext with w2, b2, act2 and x's options (x may be NULL; x->weights_first is the first layer's: its
 * first weight block before the rows of a). The middle
 * [M, N1] stays in SBUF in w2's dtype, written by the first layer's epilogue and transposed from there by the
 * second (no store, no load); the second layer's first weight blocks load while the first computes. The same bits
 * as tern_lib_linear into an HBM [M, N1] tensor of w2's dtype followed by tern_lib_linear_ext (RNE rounding: the
 * cast is the epilogue instruction's instead of the store's). Returns 0, having emitted nothing, when M exceeds
 * one row tile (the PE array's side) or SBUF cannot hold both layers' tiles; errors as tern_lib_linear's. */
/* tern_lib_linear_ext with the rows of a already on chip: rows is an SBUF tile [M, K] (M at most one row tile,
 * the PE array's side; any float dtype), made by the kernel before (an attention's merged output), which this one
 * transposes in place and releases. The same bits as storing rows to HBM and running tern_lib_linear_ext on them.
 * Returns 0, having emitted nothing (rows kept), when the layer norm cannot be fused (tern_lib_linear_ln's rule);
 * else 1 (errors recorded as tern_lib_linear's; a rows tile not in SBUF or with too many partitions is one). */
int tern_lib_linear_rows(tern_kernel *k, tern_view out, tern_view rows, tern_view w, tern_view bias, tern_act_func act,
                         const tern_linear_ext *x);
int tern_lib_linear_pair(tern_kernel *k, tern_view out, tern_view a, tern_view w1, tern_view b1, tern_act_func act1,
                         tern_view w2, tern_view b2, tern_act_func act2, const tern_linear_ext *x);
/* tern_lib_linear_pair on rows already in SBUF (as tern_lib_linear_rows takes them: released by the kernel); with
 * residual_is_rows the second layer's residual is those rows (x's residual is not read), as in a post-LN FFN whose
 * input the norm before left on chip. */
int tern_lib_linear_pair_rows(tern_kernel *k, tern_view out, tern_view rows, int residual_is_rows, tern_view w1,
                              tern_view b1, tern_act_func act1, tern_view w2, tern_view b2, tern_act_func act2,
                              const tern_linear_ext *x);
/* tern_lib_linear_ext with its layer norm (x->gamma valid), on a from HBM or on rows already in SBUF (rows valid,
 * a ignored), whose normalised rows stay in the SBUF tile norm (fp32 [M, N], placed by the caller, for the next
 * kernel: tern_lib_linear_rows, tern_lib_linear_pair_rows) and are stored to out only when store. Returns as
 * tern_lib_linear_ln (0: declined, nothing emitted). */
int tern_lib_linear_keep_norm(tern_kernel *k, tern_view out, tern_view a, tern_view rows, tern_view w, tern_view bias,
                              tern_act_func act, const tern_linear_ext *x, tern_view norm, int store);

/* ---- elementwise, softmax, norms, transpose, gather (lib_*.c) ---- */
/* Conventions of these kernels: every tensor is a 2-D HBM view [rows, cols] (rows any count, tiled by the
 * core's 128 partitions with a ragged last tile); per-column vectors (bias, gamma, beta) are 1-D [cols] or 2-D
 * [1, cols] HBM views; inputs and outputs may have different float dtypes (the cast happens on the way out);
 * shape errors are recorded in the kernel (tern_kernel_status) with a message naming the kernel, the operand
 * and the sizes. Algorithms, limits and error bounds: docs/kernels.md. */

/* Load a per-column row vector (HBM, 1-D [n] or 2-D [1, n]) replicated onto every partition of the SBUF tile
 * dst [P, n] with one DMA whose HBM side has partition step 0. */
void tern_lib_broadcast_row(tern_kernel *k, tern_view dst, tern_view row);
/* ONNX Clip of an fp32 SBUF tile: dst = isnan(in) ? in : min(max(in, lo), hi), as three VectorE instructions
 * (tensor_scalar max then min into clamp; in != in into nan; select(nan, in, clamp) into dst: max and min are
 * maxNum/minNum, so a NaN is put back by the select). clamp and nan are scratch tiles of in's shape; dst may be in
 * or clamp. The Clip rule and the convolutions' fused Clip (fuse.conv_clip) both emit it, so both give the same
 * bits. */
void tern_lib_clip_tile(tern_kernel *k, tern_view dst, tern_view in, tern_view clamp, tern_view nan, float lo, float hi);

/* out = f(in * scale) on ScalarE (activation), in column chunks of up to 2048 elements. */
void tern_lib_unary(tern_kernel *k, tern_view out, tern_view in, tern_act_func f, float scale);
/* dst = src on ScalarE (dtype conversion with round to nearest even): tensor_copy on NeuronCore-v3+, an
 * activation copy (src * 1) on v2, whose ScalarE has no tensor_copy (there a -0 becomes +0). For moving work off
 * VectorE, e.g. PSUM-to-SBUF copies. */
void tern_lib_copy_scalar(tern_kernel *k, tern_view dst, tern_view src);
/* out = a op b elementwise on VectorE (tensor_tensor); a, b and out have the same shape. For float max and min a
 * NaN operand gives NaN (numpy's and ONNX's Max/Min), two more instructions per operand, where the ALU alone
 * would return the other operand. */
void tern_lib_binary(tern_kernel *k, tern_view out, tern_view a, tern_view b, tern_alu_op op);
/* out[r, c] = a[r, c] op col[r] (reverse: col[r] op a[r, c]) on VectorE: a tensor_scalar whose scalar is the
 * per-partition [P, 1] column, rows on partitions, so a broadcast along trailing size-1 axes is never
 * materialised. col is [rows] or [rows, 1] in any dtype (widened to fp32 on chip, as tensor_tensor reads it);
 * the same fp32 operator and rounding per element as tern_lib_binary. max/min are refused (no NaN fix-up). */
void tern_lib_binary_col(tern_kernel *k, tern_view out, tern_view a, tern_view col, tern_alu_op op, int reverse);
/* The fused optimizer update of one weight (src/kernel/lib_optim.c, docs/training.md "The step graph"): p, g and
 * the state tiles stream through SBUF once and the new weight and state are stored, with the same fp32
 * instructions in the same order as the step graph's node-by-node update (bit-identical to it). All tensors are
 * [rows, cols] views of one shape; lr (SGD's learning rate or Adam's step size), bc2_sqrt, decay (AdamW's
 * 1 - lr wd) and coef (the clipping coefficient, optional) are [rows, 1] views of a one-element HBM scalar (row
 * step 0). SGD: s0 the momentum buffer (absent without momentum); Adam/AdamW: s0 = m, s1 = v. Absent views are
 * tern_view_none(). Immediates are the fp32 values the step graph's constants hold. LAMB's first pass: Adam's
 * state update with lr = bc1, and out_p = the direction r = m/bc1 / (sqrt(v)/bc2_sqrt + eps) + wd p (the trust
 * ratio and p - r (trust lr) follow as other nodes: the norms need the whole tensor). */
enum { TERN_OPTIM_SGD = 0, TERN_OPTIM_ADAM = 1, TERN_OPTIM_LAMB = 2 };
typedef struct {
    int kind;     /* TERN_OPTIM_SGD, TERN_OPTIM_ADAM or TERN_OPTIM_LAMB */
    int adamw;    /* Adam: decoupled weight decay (p * decay) instead of g + wd p */
    int nesterov; /* SGD with momentum */
    float weight_decay, momentum, beta1, beta2, one_minus_beta1, one_minus_beta2, eps;
    tern_view p, g, s0, s1, out_p, out_s0, out_s1;
    tern_view lr, bc2_sqrt, decay, coef;
} tern_optim_update;
void tern_lib_optim_update(tern_kernel *k, const tern_optim_update *u);
/* out = in op s on VectorE (tensor_scalar with an immediate); float max and min propagate NaN as above. */
void tern_lib_scalar(tern_kernel *k, tern_view out, tern_view in, tern_alu_op op, float s);
/* out = 1 / in on VectorE (IEEE, correctly rounded: 1/-0 = -inf), unlike ScalarE's reciprocal activation, whose
 * affine step turns -0 into +0 before the function. */
void tern_lib_reciprocal(tern_kernel *k, tern_view out, tern_view in);
/* out[r, c] = f(in[r, c] + bias[c]): the bias row broadcast to the partitions once per column chunk, added on
 * VectorE (tensor_tensor), f applied on ScalarE (skipped for TERN_ACT_COPY). */
void tern_lib_bias_act(tern_kernel *k, tern_view out, tern_view in, tern_view bias, tern_act_func f);

/* Row softmax, numerically safe: out[r,:] = exp(x - max) / sum(exp(x - max)), fp32 on chip. */
void tern_lib_softmax(tern_kernel *k, tern_view out, tern_view in);
/* The same on an fp32 SBUF tile [P, C] in place (the instruction sequence of tern_lib_softmax, for kernels that
 * keep their rows on chip, e.g. the fused attention). */
void tern_lib_softmax_tile(tern_kernel *k, tern_view x);
/* The same with the last step (the scaling by 1 / sum) written to out, a tile of x's shape in any float dtype: its
 * cast is the store's rounding of the fp32 product, as a copy of x would make it (the fused attention's P in the
 * matmul dtype, one VectorE pass instead of two). x holds exp(x - max) afterwards. */
void tern_lib_softmax_tile_to(tern_kernel *k, tern_view x, tern_view out);

/* LayerNorm over each row: out = (x - mean) / sqrt(var + eps) * gamma + beta (population variance). gamma
 * and/or beta may be absent (a view with region -1): scale 1, shift 0. */
void tern_lib_layernorm(tern_kernel *k, tern_view out, tern_view in, tern_view gamma, tern_view beta, float eps);
/* RMSNorm over each row: out = x / sqrt(mean(x^2) + eps) * gamma (gamma may be absent: region -1). */
void tern_lib_rmsnorm(tern_kernel *k, tern_view out, tern_view in, tern_view gamma, float eps);

/* Fill an SBUF tile [P, F] with the identity pattern (1 where partition == column, else 0) on GpSimd. */
void tern_lib_identity(tern_kernel *k, tern_view tile);
/* One block through the PE array: dst_psum[F, P] = src[P, F]^T (P, F <= 128), transpose_pe on v3+, a matmul
 * against ident[0:P, 0:P] (tern_lib_identity, src's dtype) on v2, where ident may be tern_view_none() on v3+. */
void tern_lib_transpose_block(tern_kernel *k, tern_view dst_psum, tern_view src, tern_view ident);
/* out[C, R] = in[R, C]^T through TensorE in 128 x 128 blocks: a matmul against an on-chip identity on
 * NeuronCore-v2, transpose mode (transpose_pe) on v3+. Float dtypes TensorE accepts (fp32, bf16, fp16, fp8). */
void tern_lib_transpose(tern_kernel *k, tern_view out, tern_view in);

/* The same as an exact data movement (every bit kept, Inf and NaN included): transpose_pe on v3+, VectorE 32 x 32
 * transposes on v2 (tern_lib_transpose's identity matmul would turn -0 into +0 and spread an Inf or NaN over its
 * output row). Any dtypes the DMA can cast between; the Transpose op uses it. */
void tern_lib_transpose_exact(tern_kernel *k, tern_view out, tern_view in);
/* n transposes as one pipelined stream (outs[m] = ins[m]^T, every out of one dtype): on v2 the strips of all of them
 * go through the same rotating buffers, so a batch of small slices overlaps as one large transpose does. */
void tern_lib_transpose_exact_n(tern_kernel *k, size_t n, const tern_view *outs, const tern_view *ins);

/* Embedding lookup: out[i, :] = table[ids[i], :] for ids (int32, 1-D [n] or 2-D [n, 1]) staged into SBUF 128
 * at a time and one DMA gather per 128 rows. An id outside [0, vocab) stops the run with an error. */
void tern_lib_embedding(tern_kernel *k, tern_view out, tern_view table, tern_view ids);

/* ---- collectives inside kernels (lib_collective.c; docs/multichip.md "Collectives inside kernels") ----
 * One `collective` instruction from HBM src to HBM dst over the ranks of a multi-rank launch, synchronised like a
 * DMA: it waits for src's writers and dst's readers and writers, and what reads dst afterwards waits for its
 * completion semaphore. reduce: TERN_ALU_ADD, _MAX or _MIN (all-reduce, reduce-scatter). groups: 0 = one group of
 * all ranks; g > 0: groups of g consecutive ranks; -g: groups of g ranks spaced ranks/g apart. algorithm: a
 * tern_coll_algo (0 = auto, by size as the Neuron runtime). Shapes: all-reduce, all-to-all and permute keep the
 * element count; all-gather's dst holds group-size x src elements (member m's src lands in block m);
 * reduce-scatter's src holds group-size x dst elements (member m receives block m). */
typedef enum {
    TERN_KCOLL_ALL_REDUCE = 0,
    TERN_KCOLL_ALL_GATHER,
    TERN_KCOLL_REDUCE_SCATTER,
    TERN_KCOLL_ALL_TO_ALL,
    TERN_KCOLL_PERMUTE /* each group's ring shift: member m receives member m-1's buffer (explicit pairs:
                        * tern_kernel_permute) */
} tern_kernel_coll;
void tern_kernel_collective(tern_kernel *k, tern_kernel_coll op, tern_view dst, tern_view src, tern_alu_op reduce,
                            int32_t groups, int algorithm);
/* The same issued from engine e's stream (every collective of a kernel must come from one engine). */
void tern_kernel_collective_on(tern_kernel *k, tern_engine e, tern_kernel_coll op, tern_view dst, tern_view src,
                               tern_alu_op reduce, int32_t groups, int algorithm);
void tern_kernel_all_reduce(tern_kernel *k, tern_view dst, tern_view src, tern_alu_op reduce);
void tern_kernel_all_gather(tern_kernel *k, tern_view dst, tern_view src);
void tern_kernel_reduce_scatter(tern_kernel *k, tern_view dst, tern_view src, tern_alu_op reduce);
/* All-to-allv (issued from Sync): counts is an HBM int32 tensor of n x n elements (n the group size, the same on
 * every rank): member i sends counts[i][j] elements to member j; i's send blocks sit back to back in src in j
 * order (offset of block j = counts[i][0] + .. + counts[i][j-1]), j's receive blocks back to back in dst in i order;
 * every row and column sums to at most src's elements (dst has as many). With 3 x n x n elements, counts is
 * followed by MPI_Alltoallv's displacements: sdispls[i][j], the offset in member i's src of its block for j, then
 * rdispls[j][i], the offset in member j's dst of the block from i (each block inside the buffer, a member's
 * receive blocks not overlapping). Every element of dst that no block reaches is written 0. The table is read
 * when the collective's trigger ends (its source is): it waits for its writers like src. A kernel that knows only
 * its own row (MoE dispatch) all-gathers the rows first. */
void tern_kernel_all_to_allv(tern_kernel *k, tern_view dst, tern_view src, tern_view counts, int32_t groups,
                             int algorithm);
/* Permute with explicit pairs (issued from Sync), as the runtime's permute and XLA's collective-permute take them:
 * pairs is an HBM int32 tensor of 2 x npairs elements, (source, target) rank pairs of the launch (not members of
 * a group: the collective spans every rank), each rank at most once as a source and once as a target, the same on
 * every rank. Each target's dst receives its source's whole src (same element count); a rank that is no target
 * gets zeros. One pair is a send/receive. Read when the trigger ends, like all-to-allv's counts. */
void tern_kernel_permute(tern_kernel *k, tern_view dst, tern_view src, tern_view pairs, int algorithm);

#ifdef __cplusplus
}
#endif
#endif
