/* Op parameters decoded once, opset-aware, for every layer that reads them (inference, the host evaluator, the
 * compiler's rules): ONNX moved several attributes into inputs over the opsets, and a decoder per consumer let
 * the copies drift. Implemented in the family files (ops_layout.c, ops_reduce.c). Needs graph_internal.h. */
#ifndef TERN_GRAPH_OP_PARAMS_H
#define TERN_GRAPH_OP_PARAMS_H

#include "tern/graph.h"

#include <stddef.h>
#include <stdint.h>

/* ---- Pad (ops_layout.c) ---- */
typedef struct {
    int known;   /* 0: pads come from an input whose data is not known yet (n = 0) */
    int n;       /* entries in pads (2 x rank when valid; the caller checks against its rank) */
    int64_t pads[2 * TERN_GRAPH_MAX_RANK];
    double value; /* the constant fill: attribute "value" before opset 11, input 2 from 11 on (0 when absent) */
    int value_known; /* 0: input 2 given but its data is not known yet */
} graph_pad_args;
/* Before opset 11 (Pad-2) pads and value are attributes; from 11 on they are inputs 1 and 2. pads_in and
 * value_in are those inputs' data (NULL when absent or not constant); pads_given says whether input 1 is there at
 * all. Returns TERN_OK, or TERN_ERR_INVALID / TERN_ERR_RANGE with the reason in why ("input 1 must be a 1-D
 * integer tensor", "... holds 20 values, at most 16 allowed"). */
tern_status graph_pad_decode(const tern_graph_node *n, int64_t opset, int pads_given, const tern_host_tensor *pads_in,
                             int value_given, const tern_host_tensor *value_in, graph_pad_args *a, char *why,
                             size_t wl);

/* ---- Reduce* axes (ops_reduce.c) ---- */
/* Whether a Reduce op of this opset takes its axes from input 1 (ReduceSum from opset 13, the others from 18)
 * rather than from the attribute "axes". */
int graph_reduce_axes_from_input(int op_id, int64_t opset);
typedef struct {
    int known;   /* 0: the axes input is there but its data is not known yet */
    int n;       /* entries in axes; 0 = none given (all axes, or the identity with noop_with_empty_axes) */
    int64_t axes[2 * TERN_GRAPH_MAX_RANK];
} graph_axes_args;
/* axes_in is input 1's data (NULL when absent or not constant); axes_given whether input 1 is there at all.
 * Returns TERN_OK, or TERN_ERR_INVALID / TERN_ERR_RANGE with the reason in why. Axes are not normalised. */
tern_status graph_reduce_axes_decode(const tern_graph_node *n, int64_t opset, int axes_given,
                                     const tern_host_tensor *axes_in, graph_axes_args *a, char *why, size_t wl);

#endif
