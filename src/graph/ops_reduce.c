/* The reduce family's shared parameter decoding (op_params.h): the axes every Reduce op reads, from the attribute
 * or (ReduceSum from opset 13, the others from 18) from input 1, decoded one way for inference, the host evaluator
 * and the compiler's reduction rules (lower.c, lower_reduce.c), which before read them in four places and did not
 * agree on which source wins. */
#include "graph_internal.h"
#include "op_params.h"

#include <stdio.h>
#include <string.h>

int graph_reduce_axes_from_input(int op_id, int64_t opset)
{
    return opset >= (op_id == TERN_GOP_REDUCE_SUM ? 13 : 18);
}

tern_status graph_reduce_axes_decode(const tern_graph_node *n, int64_t opset, int axes_given,
                                     const tern_host_tensor *axes_in, graph_axes_args *a, char *why, size_t wl)
{
    memset(a, 0, sizeof *a);
    a->known = 1;
    const int max = 2 * TERN_GRAPH_MAX_RANK;
    if (!graph_reduce_axes_from_input(n->op_id, opset)) {
        size_t na;
        const int64_t *p = graph_attr_ints(n, "axes", &na);
        if (p) {
            if (na > (size_t)max) {
                snprintf(why, wl, "attribute axes holds %zu values, at most %d allowed", na, max);
                return TERN_ERR_RANGE;
            }
            memcpy(a->axes, p, na * sizeof *p);
            a->n = (int)na;
        }
        return TERN_OK;
    }
    if (!axes_given)
        return TERN_OK;
    if (!axes_in) {
        a->known = 0;
        return TERN_OK;
    }
    if (!axes_in->i || axes_in->rank > 1) {
        snprintf(why, wl, "input 1 must be a 1-D integer tensor");
        return TERN_ERR_INVALID;
    }
    if (axes_in->count > (size_t)max) {
        snprintf(why, wl, "input 1 holds %zu values, at most %d allowed", axes_in->count, max);
        return TERN_ERR_RANGE;
    }
    for (size_t e = 0; e < axes_in->count; e++)
        a->axes[e] = axes_in->i[e];
    a->n = (int)axes_in->count;
    return TERN_OK;
}
