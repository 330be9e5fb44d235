/* Private to shape inference (infer.c and the family files src/graph/ops_*.c that hold each family's inference
 * next to its parameter decoding): the per-node context, the helpers every rule uses (inputs, constants, outputs,
 * the checks and their error messages), and the family files' inference entry points infer_node dispatches to. */
#ifndef TERN_GRAPH_INFER_INTERNAL_H
#define TERN_GRAPH_INFER_INTERNAL_H

#include "graph_internal.h"
#include "op_params.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    tern_graph *g;
    int node;
    const tern_graph_node *n;
    tern_error *err;
    char why[256];
} ictx;

static inline tern_status ifail(const ictx *c, tern_status code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static inline tern_status ifail(const ictx *c, tern_status code, const char *fmt, ...)
{
    char msg[TERN_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return graph_node_error(c->g, c->node, c->err, code, "%s", msg);
}

static inline const tern_graph_value *V(const ictx *c, int k)
{
    return k < c->n->n_inputs && c->n->inputs[k] >= 0 ? &c->g->values[c->n->inputs[k]] : NULL;
}
static inline const tern_host_tensor *K(const ictx *c, int k)
{
    const tern_graph_value *v = V(c, k);
    return v ? v->constant : NULL;
}
static inline tern_graph_value *OUT(const ictx *c, int k)
{
    return k < c->n->n_outputs && c->n->outputs[k] >= 0 ? &c->g->values[c->n->outputs[k]] : NULL;
}

static inline void set_out(const ictx *c, int k, tern_elem_type type, int rank, const int64_t *dims)
{
    tern_graph_value *v = OUT(c, k);
    if (!v)
        return;
    v->type = type;
    v->rank = rank;
    for (int d = 0; d < TERN_GRAPH_MAX_RANK; d++) {
        v->dims[d] = d < rank && dims ? dims[d] : -1;
        free(v->dim_names[d]);
        v->dim_names[d] = NULL;
    }
}

/* keeps the symbolic names of a same-shaped input */
static inline void same_as(const ictx *c, int k, const tern_graph_value *src, tern_elem_type type)
{
    set_out(c, k, type, src->rank, src->dims);
    tern_graph_value *v = OUT(c, k);
    if (v && v != src)
        for (int d = 0; d < src->rank && d < TERN_GRAPH_MAX_RANK; d++)
            if (src->dim_names[d])
                v->dim_names[d] = graph_strdup(src->dim_names[d]);
}

static inline tern_status need(const ictx *c, int k)
{
    if (!V(c, k))
        return ifail(c, TERN_ERR_INVALID, "input %d is required", k);
    return TERN_OK;
}

static inline tern_status need_rank(const ictx *c, int k)
{
    tern_status st = need(c, k);
    if (st)
        return st;
    if (V(c, k)->rank < 0)
        return ifail(c, TERN_ERR_INVALID, "input %d \"%s\" has an unknown rank", k, V(c, k)->name);
    return TERN_OK;
}

static inline tern_status need_float(const ictx *c, int k)
{
    tern_status st = need(c, k);
    if (st)
        return st;
    if (!tern_elem_is_float(V(c, k)->type))
        return ifail(c, TERN_ERR_INVALID, "input %d \"%s\" must be float, got %s", k, V(c, k)->name,
                     tern_elem_name(V(c, k)->type));
    return TERN_OK;
}

/* An int list from a constant input (1-D int) or attribute; *known = 0 when the input is not constant. */
static inline tern_status int_list(const ictx *c, int input, const char *attr, int64_t *buf, int max, int *n, int *known,
                            int *given)
{
    *n = 0;
    *known = 1;
    *given = 0;
    if (V(c, input)) {
        *given = 1;
        const tern_host_tensor *t = K(c, input);
        if (!t) {
            *known = 0;
            return TERN_OK;
        }
        if (!t->i || t->rank > 1)
            return ifail(c, TERN_ERR_INVALID, "input %d must be a 1-D integer tensor", input);
        if (t->count > (size_t)max)
            return ifail(c, TERN_ERR_RANGE, "input %d holds %zu values, at most %d allowed", input, t->count, max);
        for (size_t e = 0; e < t->count; e++)
            buf[e] = t->i[e];
        *n = (int)t->count;
        return TERN_OK;
    }
    if (attr) {
        size_t na;
        const int64_t *a = graph_attr_ints(c->n, attr, &na);
        if (a) {
            if (na > (size_t)max)
                return ifail(c, TERN_ERR_RANGE, "attribute %s holds %zu values, at most %d allowed", attr, na, max);
            memcpy(buf, a, na * sizeof *a);
            *n = (int)na;
            *given = 1;
        }
    }
    return TERN_OK;
}

static inline tern_status bcast_inputs(ictx *c, int first, int count, int *rank, int64_t *dims)
{
    *rank = 0;
    for (int k = first; k < first + count; k++) {
        const tern_graph_value *v = V(c, k);
        if (!v)
            continue;
        if (v->rank < 0) {
            *rank = -1;
            return TERN_OK;
        }
        int64_t nd[TERN_GRAPH_MAX_RANK];
        int nr;
        if (graph_broadcast(*rank, dims, v->rank, v->dims, &nr, nd, c->why, sizeof c->why))
            return ifail(c, TERN_ERR_INVALID, "input %d \"%s\": %s", k, v->name, c->why);
        *rank = nr;
        memcpy(dims, nd, sizeof nd);
    }
    return TERN_OK;
}

/* The family files' inference rules (one per case group of infer_node's switch). */
/* ops_linear.c */
tern_status graph_infer_matmul(ictx *c); /* MatMul and tern.MatMulBias */
/* ops_optim.c */
tern_status graph_infer_optim(ictx *c); /* tern.SGDUpdate, tern.AdamUpdate */
tern_status graph_infer_gemm(ictx *c);
/* ops_elementwise.c */
tern_status graph_infer_same_shape(ictx *c);
tern_status graph_infer_is_nan_inf(ictx *c);
tern_status graph_infer_cast(ictx *c);
tern_status graph_infer_broadcast(ictx *c);
/* ops_conv.c */
tern_status graph_infer_conv(ictx *c);
tern_status graph_infer_pool(ictx *c);
tern_status graph_infer_global_pool(ictx *c);
tern_status graph_infer_conv_transpose(ictx *c);
/* ops_norm.c */
tern_status graph_infer_batch_instance_norm(ictx *c);
tern_status graph_infer_layer_norm(ictx *c);
tern_status graph_infer_lrn_mvn(ictx *c); /* LRN, MeanVarianceNormalization */
/* ops_reduce.c */
tern_status graph_infer_reduce(ictx *c);
tern_status graph_infer_arg_reduce(ictx *c);
/* ops_layout.c */
tern_status graph_infer_reshape(ictx *c);
tern_status graph_infer_flatten(ictx *c);
tern_status graph_infer_squeeze(ictx *c);
tern_status graph_infer_transpose(ictx *c);
tern_status graph_infer_concat(ictx *c);
tern_status graph_infer_split(ictx *c);
tern_status graph_infer_slice(ictx *c);
tern_status graph_infer_expand_tile(ictx *c);
tern_status graph_infer_pad(ictx *c);
tern_status graph_infer_depth_space(ictx *c);
tern_status graph_infer_resize(ictx *c);
/* ops_index.c */
tern_status graph_infer_gather(ictx *c);
tern_status graph_infer_gather_elements(ictx *c);
tern_status graph_infer_top_k(ictx *c);
tern_status graph_infer_gather_nd(ictx *c);
tern_status graph_infer_scatter(ictx *c); /* ScatterND, ScatterElements */
tern_status graph_infer_one_hot(ictx *c);
tern_status graph_infer_non_zero(ictx *c);
tern_status graph_infer_compress(ictx *c);

#endif
