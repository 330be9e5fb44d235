/* The layout family's shared parameter decoding (op_params.h): what infer.c, eval.c and the compiler's Pad rule
 * (lower_layout.c) all read, decoded one way by opset, so the three cannot disagree on where an operand lives. */
#include "graph_internal.h"
#include "op_params.h"

#include <stdio.h>
#include <string.h>

tern_status graph_pad_decode(const tern_graph_node *n, int64_t opset, int pads_given, const tern_host_tensor *pads_in,
                             int value_given, const tern_host_tensor *value_in, graph_pad_args *a, char *why,
                             size_t wl)
{
    memset(a, 0, sizeof *a);
    a->known = 1;
    a->value_known = 1;
    const int max = 2 * TERN_GRAPH_MAX_RANK;
    if (opset < 11) { /* Pad-2: attributes */
        size_t na;
        const int64_t *p = graph_attr_ints(n, "pads", &na);
        if (p) {
            if (na > (size_t)max) {
                snprintf(why, wl, "attribute pads holds %zu values, at most %d allowed", na, max);
                return TERN_ERR_RANGE;
            }
            memcpy(a->pads, p, na * sizeof *p);
            a->n = (int)na;
        }
        a->value = tern_graph_attr_float(n, "value", 0.0f);
        return TERN_OK;
    }
    if (!pads_given || !pads_in) { /* Pad-11 on: inputs */
        a->known = 0;
    } else {
        if (!pads_in->i || pads_in->rank > 1) {
            snprintf(why, wl, "input 1 must be a 1-D integer tensor");
            return TERN_ERR_INVALID;
        }
        if (pads_in->count > (size_t)max) {
            snprintf(why, wl, "input 1 holds %zu values, at most %d allowed", pads_in->count, max);
            return TERN_ERR_RANGE;
        }
        for (size_t e = 0; e < pads_in->count; e++)
            a->pads[e] = pads_in->i[e];
        a->n = (int)pads_in->count;
    }
    if (value_given && !value_in)
        a->value_known = 0;
    else if (value_in && value_in->count)
        a->value = tern_host_tensor_get(value_in, 0);
    return TERN_OK;
}
