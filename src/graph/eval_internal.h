/* Private to the evaluator files: the per-call context and the helpers every op body uses. */
#ifndef TERN_GRAPH_EVAL_INTERNAL_H
#define TERN_GRAPH_EVAL_INTERNAL_H

#include "graph_internal.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    const tern_graph_node *n;
    int64_t opset;
    const char *label;
    const tern_host_tensor *const *in;
    int n_in;
    tern_host_tensor **out;
    int n_out;
    tern_error *err;
} ectx;

#define IN(k) ((k) < c->n_in ? c->in[k] : NULL)
#define WANT_OUT(k) ((k) < c->n_out && c->n->outputs[k] >= 0)

tern_status efail(const ectx *c, tern_status code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Allocates output k (when the node has it) with the given type and shape. */
tern_status eout(const ectx *c, int k, tern_elem_type type, int rank, const int64_t *dims, tern_host_tensor **t);
/* Hands t to output k when the caller wants it, else frees it (a tensor computed for a dropped output). */
void ekeep(const ectx *c, int k, tern_host_tensor *t);
/* Input k must be present (and float when want_float). */
tern_status ereq(const ectx *c, int k, int want_float);
/* Reads an int list from input k (int64 tensor of rank <= 1). */
tern_status eints(const ectx *c, int k, int64_t *buf, int max, int *n);

typedef tern_status (*eval_fn)(const ectx *c);

/* A double to int64: NaN 0, out-of-range values saturate (numpy on x86 differs; tern is deterministic). */
static inline int64_t d2i(double v)
{
    if (isnan(v))
        return 0;
    if (v >= 9223372036854775807.0)
        return INT64_MAX;
    if (v <= -9223372036854775808.0)
        return INT64_MIN;
    return (int64_t)v;
}

/* Row-major element strides of dims. */
static inline void ev_strides(int rank, const int64_t *dims, int64_t *st)
{
    int64_t s = 1;
    for (int d = rank - 1; d >= 0; d--) {
        st[d] = s;
        s *= dims[d];
    }
}

/* The elementwise broadcast iterator and element readers shared by the evaluators. */
/* ---- broadcasting iterator over up to 3 inputs ---- */
typedef struct {
    int rank, nin;
    int64_t dims[TERN_GRAPH_MAX_RANK], idx[TERN_GRAPH_MAX_RANK], str[3][TERN_GRAPH_MAX_RANK];
    size_t off[3];
} bcit;

static inline void bcit_init(bcit *b, int rank, const int64_t *dims, int nin, const tern_host_tensor *const *ts)
{
    memset(b, 0, sizeof *b);
    b->rank = rank;
    b->nin = nin;
    for (int d = 0; d < rank; d++)
        b->dims[d] = dims[d];
    for (int k = 0; k < nin; k++) {
        int64_t st[TERN_GRAPH_MAX_RANK];
        ev_strides(ts[k]->rank, ts[k]->dims, st);
        for (int d = 0; d < rank; d++) {
            int id = d - (rank - ts[k]->rank);
            b->str[k][d] = id >= 0 && ts[k]->dims[id] != 1 ? st[id] : 0;
        }
    }
}

static inline void bcit_next(bcit *b)
{
    for (int d = b->rank - 1; d >= 0; d--) {
        b->idx[d]++;
        for (int k = 0; k < b->nin; k++)
            b->off[k] += (size_t)b->str[k][d];
        if (b->idx[d] < b->dims[d])
            return;
        for (int k = 0; k < b->nin; k++)
            b->off[k] -= (size_t)(b->str[k][d] * b->dims[d]);
        b->idx[d] = 0;
    }
}

static inline double rd(const tern_host_tensor *t, size_t off) { return t->f ? (double)t->f[off] : (double)t->i[off]; }

/* an integer scalar input as int64, exactly for integer tensors */
static inline int64_t ri(const tern_host_tensor *t, size_t off) { return t->i ? t->i[off] : d2i((double)t->f[off]); }

/* Per-family evaluators outside eval.c (ops_<family>.c), named in eval.c's table, and the helpers two families
 * share: the reference matmul (numpy batching, fp32 products in k order; linear layers and attention) and one
 * layer-norm row in double statistics (LayerNormalization and tern.MatMulBias's fused norm). */
tern_status graph_ev_matmul_tensors(const ectx *c, const tern_host_tensor *a, const tern_host_tensor *b,
                                    tern_host_tensor **res); /* ops_linear.c */
void graph_ev_layernorm_row(const float *p, float *o, size_t inner, const tern_host_tensor *sc,
                            const tern_host_tensor *b, float eps, float *mean_out, float *inv_out); /* ops_norm.c */
tern_status graph_ev_pad(const ectx *c); /* ops_layout.c */
tern_status graph_ev_attention_grad(const ectx *c); /* ops_attention.c */
tern_status graph_ev_optim(const ectx *c); /* ops_optim.c: tern.SGDUpdate, tern.AdamUpdate */
tern_status graph_ev_binary(const ectx *c);
tern_status graph_ev_variadic(const ectx *c);
tern_status graph_ev_where(const ectx *c);
tern_status graph_ev_unary(const ectx *c);
tern_status graph_ev_cast(const ectx *c);
tern_status graph_ev_reshape(const ectx *c);
tern_status graph_ev_flatten(const ectx *c);
tern_status graph_ev_unsqueeze(const ectx *c);
tern_status graph_ev_squeeze(const ectx *c);
tern_status graph_ev_transpose(const ectx *c);
tern_status graph_ev_concat(const ectx *c);
tern_status graph_ev_split(const ectx *c);
tern_status graph_ev_slice(const ectx *c);
tern_status graph_ev_gather(const ectx *c);
tern_status graph_ev_gather_elements(const ectx *c);
tern_status graph_ev_expand(const ectx *c);
tern_status graph_ev_tile(const ectx *c);
tern_status graph_ev_trilu(const ectx *c);
tern_status graph_ev_cumsum(const ectx *c);
tern_status graph_ev_matmul(const ectx *c); /* ops_linear.c */
tern_status graph_ev_gemm(const ectx *c); /* ops_linear.c */
tern_status graph_ev_matmul_bias(const ectx *c); /* ops_linear.c */
tern_status graph_ev_attention(const ectx *c); /* ops_attention.c */
tern_status graph_ev_conv(const ectx *c); /* ops_conv.c */
tern_status graph_ev_pool(const ectx *c); /* ops_conv.c */
tern_status graph_ev_global_pool(const ectx *c); /* ops_conv.c */
tern_status graph_ev_batchnorm(const ectx *c); /* ops_norm.c */
tern_status graph_ev_instancenorm(const ectx *c); /* ops_norm.c */
tern_status graph_ev_layernorm(const ectx *c); /* ops_norm.c */
tern_status graph_ev_softmax(const ectx *c); /* ops_reduce.c */
tern_status graph_ev_reduce(const ectx *c); /* ops_reduce.c */
tern_status graph_ev_argminmax(const ectx *c); /* ops_reduce.c */
tern_status graph_ev_convtranspose(const ectx *c); /* ops_conv.c */
tern_status graph_ev_topk(const ectx *c); /* ops_index.c */
tern_status graph_ev_gather_nd(const ectx *c); /* ops_index.c */
tern_status graph_ev_scatter_nd(const ectx *c); /* ops_index.c */
tern_status graph_ev_scatter_elements(const ectx *c); /* ops_index.c */
tern_status graph_ev_onehot(const ectx *c); /* ops_index.c */
tern_status graph_ev_nonzero(const ectx *c); /* ops_index.c */
tern_status graph_ev_compress(const ectx *c); /* ops_index.c */
tern_status graph_ev_depth_space(const ectx *c); /* ops_layout.c */
tern_status graph_ev_eyelike(const ectx *c); /* ops_layout.c */
tern_status graph_ev_resize(const ectx *c); /* ops_layout.c */
tern_status graph_ev_lrn(const ectx *c); /* ops_norm.c */
tern_status graph_ev_mvn(const ectx *c); /* ops_norm.c */

/* Advance a row-major multi-index over dims (rank r): the last axis fastest, wrapping to all zeros. */
static inline void ev_next_index(int64_t *idx, const int64_t *dims, int r)
{
    for (int d = r - 1; d >= 0; d--) {
        if (++idx[d] < dims[d])
            return;
        idx[d] = 0;
    }
}

#endif
