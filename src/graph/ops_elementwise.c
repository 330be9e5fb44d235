/* The elementwise family's shape inference: ops whose output has their input's shape (unary math, activations,
 * and the same-shape axis ops Softmax, CumSum, Trilu inferred with them), IsNaN/IsInf, Cast/CastLike, and the
 * numpy-broadcast binary, variadic and select ops. Moved out of infer.c's one switch; infer_node dispatches here
 * by op id. */
#include "infer_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* SQRT, EXP, LOG, TANH, SIGMOID, ERF, RECIPROCAL, FLOOR, CEIL, ROUND, SIN, COS, TAN, ASIN, ACOS, ATAN, SINH, COSH, ASINH, ACOSH, ATANH, SOFTPLUS, SOFTSIGN, LEAKY_RELU, ELU, CELU, SELU, THRESHOLDED_RELU, HARD_SIGMOID, HARD_SWISH, MISH, GELU, SHRINK, SOFTMAX, LOG_SOFTMAX, HARDMAX, NEG, ABS, SIGN, RELU, IDENTITY, NOT, CLIP, DROPOUT, TRILU, CUM_SUM */
tern_status graph_infer_same_shape(ictx *c)
{
    const tern_op_id id = (tern_op_id)c->n->op_id;
    tern_status st;
    if ((st = tern_op_flags(id) & TERN_OPF_FLOAT_IN ? need_float(c, 0) : need(c, 0)))
        return st;
    same_as(c, 0, V(c, 0), V(c, 0)->type);
    if (id == TERN_GOP_DROPOUT)
        same_as(c, 1, V(c, 0), TERN_ELEM_BOOL);
    if (id == TERN_GOP_NOT && V(c, 0)->type != TERN_ELEM_BOOL)
        return ifail(c, TERN_ERR_INVALID, "input must be bool, got %s", tern_elem_name(V(c, 0)->type));
    return TERN_OK;
}

/* IS_NAN, IS_INF */
tern_status graph_infer_is_nan_inf(ictx *c)
{
    tern_status st;
    if ((st = need_float(c, 0)))
        return st;
    same_as(c, 0, V(c, 0), TERN_ELEM_BOOL);
    return TERN_OK;
}

/* CAST, CAST_LIKE */
tern_status graph_infer_cast(ictx *c)
{
    const tern_graph_node *n = c->n;
    const tern_op_id id = (tern_op_id)c->n->op_id;
    tern_status st;
    if ((st = need(c, 0)))
        return st;
    int64_t to;
    if (id == TERN_GOP_CAST_LIKE) {
        if ((st = need(c, 1)))
            return st;
        to = V(c, 1)->type;
    } else {
        const tern_graph_attr *a = tern_graph_node_attr(n, "to");
        if (!a || a->type != TERN_ATTR_INT)
            return ifail(c, TERN_ERR_INVALID, "attribute \"to\" (int) is required");
        to = a->i;
    }
    if (to < 0 || to > 64 || (!tern_elem_is_valid((int)to) && to != TERN_ELEM_STRING))
        return ifail(c, TERN_ERR_UNSUPPORTED, "cast to type %lld is not supported", (long long)to);
    tern_elem_type from = V(c, 0)->type;
    if ((from == TERN_ELEM_STRING) != (to == TERN_ELEM_STRING) &&
        (from == TERN_ELEM_STRING ? to : from) != TERN_ELEM_FLOAT)
        return ifail(c, TERN_ERR_UNSUPPORTED, "cast from %s to %s: text converts only to and from float",
                     tern_elem_name(from), tern_elem_name((tern_elem_type)to));
    same_as(c, 0, V(c, 0), (tern_elem_type)to);
    return TERN_OK;
}

/* ADD, SUB, MUL, DIV, POW, MOD, AND, OR, XOR, EQUAL, LESS, GREATER, LESS_OR_EQUAL, GREATER_OR_EQUAL, BIT_SHIFT, P_RELU, MAX, MIN, SUM, MEAN, WHERE */
tern_status graph_infer_broadcast(ictx *c)
{
    const tern_graph_node *n = c->n;
    const tern_op_id id = (tern_op_id)c->n->op_id;
    tern_status st;
    int64_t dims[TERN_GRAPH_MAX_RANK];
    int r;
    int where = id == TERN_GOP_WHERE, binary = tern_op_family_of(id) == TERN_OP_FAMILY_ELEMENTWISE_BINARY;
    int nin = binary ? 2 : where ? 3 : n->n_inputs;
    if (nin < 1)
        return ifail(c, TERN_ERR_INVALID, "needs at least one input");
    for (int k = 0; k < nin; k++)
        if ((st = need(c, k)))
            return st;
    int first = where ? 1 : 0;
    tern_elem_type t = V(c, first)->type;
    for (int k = first; k < nin; k++)
        if (V(c, k)->type != t && id != TERN_GOP_POW)
            return ifail(c, TERN_ERR_INVALID, "input %d \"%s\" is %s, input %d \"%s\" is %s", first,
                         V(c, first)->name, tern_elem_name(t), k, V(c, k)->name, tern_elem_name(V(c, k)->type));
    if (where && V(c, 0)->type != TERN_ELEM_BOOL)
        return ifail(c, TERN_ERR_INVALID, "condition must be bool, got %s", tern_elem_name(V(c, 0)->type));
    if ((tern_op_flags(id) & TERN_OPF_LOGICAL) && t != TERN_ELEM_BOOL)
        return ifail(c, TERN_ERR_INVALID, "operands must be bool, got %s", tern_elem_name(t));
    if ((st = bcast_inputs(c, 0, nin, &r, dims)))
        return st;
    set_out(c, 0, tern_op_flags(id) & TERN_OPF_COMPARE ? TERN_ELEM_BOOL : t, r, dims);
    return TERN_OK;
}
