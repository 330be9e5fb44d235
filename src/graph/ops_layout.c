/* The layout family's shared code: the parameter decoding (op_params.h) that infer.c, the evaluator and the
 * compiler's Pad rule (lower_layout.c) all read, decoded one way by opset so the three cannot disagree on where
 * an operand lives, and Pad's reference evaluation next to it (the first op moved out of eval.c into its
 * family's file). Then the family's shape inference (Reshape ... Resize) and the reference evaluation of
 * DepthToSpace/SpaceToDepth, EyeLike, Resize/Upsample, the data-movement ops (Reshape, Flatten, (Un)Squeeze,
 * Transpose, Concat, Split, Slice, Expand, Tile) and Trilu. */
#include "eval_internal.h"
#include "op_params.h"
#include "infer_internal.h"

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

/* Pad: constant, reflect and edge modes; negative pads crop. */
tern_status graph_ev_pad(const ectx *c)
{
    tern_status st;
    if ((st = ereq(c, 0, 0)))
        return st;
    const tern_host_tensor *x = IN(0);
    int r = x->rank;
    graph_pad_args pa;
    char why[160];
    if (c->opset >= 11 && !IN(1))
        return efail(c, TERN_ERR_INVALID, "input 1 must be a 1-D integer tensor (missing)");
    if ((st = graph_pad_decode(c->n, c->opset, IN(1) != NULL, IN(1), 0, IN(2), &pa, why, sizeof why)))
        return efail(c, st, "%s", why);
    if (pa.n != 2 * r)
        return efail(c, TERN_ERR_INVALID, "pads has %d entries for rank %d", pa.n, r);
    const int64_t *pads = pa.pads;
    double cval = pa.value;
    if (IN(3))
        return efail(c, TERN_ERR_UNSUPPORTED, "the axes input (opset 18) is not supported");
    const char *mode = tern_graph_attr_string(c->n, "mode", "constant");
    int m = strcmp(mode, "constant") == 0 ? 0 : strcmp(mode, "reflect") == 0 ? 1 : strcmp(mode, "edge") == 0 ? 2 : -1;
    if (m < 0)
        return efail(c, TERN_ERR_INVALID, "mode \"%.40s\" is not constant, reflect or edge", mode);
    int64_t dims[TERN_GRAPH_MAX_RANK];
    for (int d = 0; d < r; d++) {
        dims[d] = x->dims[d] + pads[d] + pads[r + d];
        if (pads[d] < -x->dims[d] || pads[r + d] < -x->dims[d] || dims[d] < 0 || pads[d] > GRAPH_MAX_ELEMS ||
            pads[r + d] > GRAPH_MAX_ELEMS)
            return efail(c, TERN_ERR_INVALID, "pads on axis %d (%lld, %lld) are invalid for size %lld", d,
                         (long long)pads[d], (long long)pads[r + d], (long long)x->dims[d]);
        if (m && (x->dims[d] == 0 || (m == 1 && (pads[d] >= x->dims[d] || pads[r + d] >= x->dims[d]))) &&
            (pads[d] > 0 || pads[r + d] > 0))
            return efail(c, TERN_ERR_INVALID, "%s padding of %lld/%lld on axis %d of size %lld", mode,
                         (long long)pads[d], (long long)pads[r + d], d, (long long)x->dims[d]);
    }
    tern_host_tensor *o;
    if ((st = eout(c, 0, x->type, r, dims, &o)) || !o)
        return st;
    int64_t xs[TERN_GRAPH_MAX_RANK], idx[TERN_GRAPH_MAX_RANK] = {0};
    ev_strides(r, x->dims, xs);
    for (size_t k = 0; k < o->count; k++) {
        int64_t off = 0;
        int outside = 0;
        for (int d = 0; d < r; d++) {
            int64_t p = idx[d] - pads[d], n = x->dims[d];
            if (p < 0 || p >= n) {
                if (m == 0)
                    outside = 1;
                else if (m == 2)
                    p = p < 0 ? 0 : n - 1;
                else if (n == 1)
                    p = 0;
                else {
                    int64_t period = 2 * (n - 1);
                    p = ((p % period) + period) % period;
                    if (p >= n)
                        p = period - p;
                }
            }
            off += p * xs[d];
        }
        if (o->f)
            o->f[k] = outside ? (float)cval : x->f[off];
        else
            o->i[k] = outside ? d2i(cval) : x->i[off];
        ev_next_index(idx, dims, r);
    }
    graph_tensor_normalize(o);
    return TERN_OK;
}

/* ---- shape inference (moved out of infer.c's one switch; infer_node dispatches here by op id) ---- */

/* RESHAPE */
tern_status graph_infer_reshape(ictx *c)
{
    const tern_graph_node *n = c->n;
    tern_status st;
    int64_t buf[2 * TERN_GRAPH_MAX_RANK + 2];
    int64_t dims[TERN_GRAPH_MAX_RANK];
    int nb, known, given;
    if ((st = need(c, 0)))
        return st;
    const tern_graph_value *x = V(c, 0);
    if (c->g->opset < 5 || n->n_inputs < 2) {
        if ((st = int_list(c, 99, "shape", buf, TERN_GRAPH_MAX_RANK + 1, &nb, &known, &given)))
            return st;
        if (!given)
            return ifail(c, TERN_ERR_INVALID, "shape is required");
    } else {
        if ((st = need(c, 1)) ||
            (st = int_list(c, 1, NULL, buf, TERN_GRAPH_MAX_RANK + 1, &nb, &known, &given)))
            return st;
        if (!known) {
            const tern_graph_value *s = V(c, 1);
            if (s->rank == 1 && s->dims[0] >= 0) {
                if (s->dims[0] > TERN_GRAPH_MAX_RANK)
                    return ifail(c, TERN_ERR_RANGE, "target rank %lld above the limit", (long long)s->dims[0]);
                set_out(c, 0, x->type, (int)s->dims[0], NULL);
            } else
                set_out(c, 0, x->type, -1, NULL);
            return TERN_OK;
        }
    }
    int64_t in_dims[TERN_GRAPH_MAX_RANK];
    int in_rank = x->rank;
    if (in_rank < 0) { /* unknown input rank: only 0-free targets without -1 resolve */
        in_rank = 0;
        for (int k = 0; k < nb; k++)
            if (buf[k] <= 0) {
                set_out(c, 0, x->type, nb, NULL);
                return TERN_OK;
            }
    }
    memcpy(in_dims, x->dims, sizeof in_dims);
    if (x->rank < 0) {
        in_dims[0] = -1;
        in_rank = 1;
    }
    if (graph_reshape_dims(in_rank, in_dims, buf, nb, (int)tern_graph_attr_int(n, "allowzero", 0), dims, c->why,
                           sizeof c->why))
        return ifail(c, TERN_ERR_INVALID, "input \"%s\" to shape: %s", x->name, c->why);
    set_out(c, 0, x->type, nb, dims);
    return TERN_OK;
}

/* FLATTEN */
tern_status graph_infer_flatten(ictx *c)
{
    const tern_graph_node *n = c->n;
    tern_status st;
    if ((st = need_rank(c, 0)))
        return st;
    const tern_graph_value *x = V(c, 0);
    int64_t axis = tern_graph_attr_int(n, "axis", 1);
    if (axis < -x->rank || axis > x->rank)
        return ifail(c, TERN_ERR_INVALID, "axis %lld outside [%d, %d]", (long long)axis, -x->rank, x->rank);
    if (axis < 0)
        axis += x->rank;
    int64_t d2[2];
    d2[0] = graph_numel((int)axis, x->dims);
    d2[1] = graph_numel(x->rank - (int)axis, x->dims + axis);
    set_out(c, 0, x->type, 2, d2);
    return TERN_OK;
}

/* UNSQUEEZE, SQUEEZE */
tern_status graph_infer_squeeze(ictx *c)
{
    const tern_op_id id = (tern_op_id)c->n->op_id;
    tern_status st;
    int64_t buf[2 * TERN_GRAPH_MAX_RANK + 2];
    int64_t dims[TERN_GRAPH_MAX_RANK];
    int nb, known, given, r;
    if ((st = need(c, 0)))
        return st;
    const tern_graph_value *x = V(c, 0);
    if ((st = int_list(c, 1, "axes", buf, 2 * TERN_GRAPH_MAX_RANK, &nb, &known, &given)))
        return st;
    if (!known || x->rank < 0) {
        set_out(c, 0, x->type, -1, NULL);
        return TERN_OK;
    }
    if (id == TERN_GOP_UNSQUEEZE) {
        r = x->rank + nb;
        if (!given || r > TERN_GRAPH_MAX_RANK)
            return ifail(c, TERN_ERR_INVALID, given ? "result rank %d above the limit" : "axes are required (%d)",
                         r);
        int is_new[TERN_GRAPH_MAX_RANK] = {0};
        for (int k = 0; k < nb; k++) {
            int a;
            if (graph_norm_axis(buf[k], r, &a, c->why, sizeof c->why, "axis"))
                return ifail(c, TERN_ERR_INVALID, "%s", c->why);
            if (is_new[a])
                return ifail(c, TERN_ERR_INVALID, "axis %d given twice", a);
            is_new[a] = 1;
        }
        for (int d = 0, s = 0; d < r; d++)
            dims[d] = is_new[d] ? 1 : x->dims[s++];
    } else {
        int drop[TERN_GRAPH_MAX_RANK] = {0};
        if (!given)
            for (int d = 0; d < x->rank; d++) {
                if (x->dims[d] < 0) {
                    set_out(c, 0, x->type, -1, NULL);
                    return TERN_OK;
                }
                drop[d] = x->dims[d] == 1;
            }
        for (int k = 0; k < nb; k++) {
            int a;
            if (graph_norm_axis(buf[k], x->rank, &a, c->why, sizeof c->why, "axis"))
                return ifail(c, TERN_ERR_INVALID, "%s", c->why);
            if (x->dims[a] > 1 || x->dims[a] == 0)
                return ifail(c, TERN_ERR_INVALID, "axis %d of \"%s\" has size %lld, not 1", a, x->name,
                             (long long)x->dims[a]);
            drop[a] = 1;
        }
        r = 0;
        for (int d = 0; d < x->rank; d++)
            if (!drop[d])
                dims[r++] = x->dims[d];
    }
    set_out(c, 0, x->type, r, dims);
    return TERN_OK;
}

/* TRANSPOSE */
tern_status graph_infer_transpose(ictx *c)
{
    const tern_graph_node *n = c->n;
    tern_status st;
    int64_t dims[TERN_GRAPH_MAX_RANK];
    if ((st = need_rank(c, 0)))
        return st;
    const tern_graph_value *x = V(c, 0);
    size_t np;
    const int64_t *p = graph_attr_ints(n, "perm", &np);
    if (p && np != (size_t)x->rank)
        return ifail(c, TERN_ERR_INVALID, "perm has %zu entries for rank %d", np, x->rank);
    int seen[TERN_GRAPH_MAX_RANK] = {0};
    for (int d = 0; d < x->rank; d++) {
        int64_t v = p ? p[d] : x->rank - 1 - d;
        if (v < 0 || v >= x->rank || seen[v])
            return ifail(c, TERN_ERR_INVALID, "perm is not a permutation of 0..%d", x->rank - 1);
        seen[v] = 1;
        dims[d] = x->dims[v];
    }
    set_out(c, 0, x->type, x->rank, dims);
    return TERN_OK;
}

/* CONCAT */
tern_status graph_infer_concat(ictx *c)
{
    const tern_graph_node *n = c->n;
    tern_status st;
    int64_t dims[TERN_GRAPH_MAX_RANK];
    if (n->n_inputs < 1)
        return ifail(c, TERN_ERR_INVALID, "needs at least one input");
    int rank = -1;
    for (int k = 0; k < n->n_inputs; k++) {
        if ((st = need(c, k)))
            return st;
        if (V(c, k)->type != V(c, 0)->type)
            return ifail(c, TERN_ERR_INVALID, "input %d \"%s\" is %s, input 0 is %s", k, V(c, k)->name,
                         tern_elem_name(V(c, k)->type), tern_elem_name(V(c, 0)->type));
        if (V(c, k)->rank >= 0) {
            if (rank >= 0 && V(c, k)->rank != rank)
                return ifail(c, TERN_ERR_INVALID, "input %d \"%s\" has rank %d, others rank %d", k, V(c, k)->name,
                             V(c, k)->rank, rank);
            rank = V(c, k)->rank;
        }
    }
    if (rank < 0) {
        set_out(c, 0, V(c, 0)->type, -1, NULL);
        return TERN_OK;
    }
    int ax;
    if (graph_norm_axis(tern_graph_attr_int(n, "axis", 1), rank, &ax, c->why, sizeof c->why, "axis"))
        return ifail(c, TERN_ERR_INVALID, "%s", c->why);
    for (int d = 0; d < rank; d++)
        dims[d] = d == ax ? 0 : -1;
    for (int k = 0; k < n->n_inputs; k++) {
        const tern_graph_value *v = V(c, k);
        for (int d = 0; d < rank; d++) {
            int64_t vd = v->rank >= 0 ? v->dims[d] : -1;
            if (d == ax)
                dims[d] = dims[d] < 0 || vd < 0 ? -1 : dims[d] + vd;
            else if (vd >= 0) {
                if (dims[d] >= 0 && dims[d] != vd)
                    return ifail(c, TERN_ERR_INVALID, "input %d \"%s\" dim %d is %lld, expected %lld", k, v->name,
                                 d, (long long)vd, (long long)dims[d]);
                dims[d] = vd;
            }
        }
    }
    set_out(c, 0, V(c, 0)->type, rank, dims);
    return TERN_OK;
}

/* SPLIT */
tern_status graph_infer_split(ictx *c)
{
    const tern_graph_node *n = c->n;
    tern_status st;
    int64_t dims[TERN_GRAPH_MAX_RANK];
    int nb, known, given;
    if ((st = need_rank(c, 0)))
        return st;
    const tern_graph_value *x = V(c, 0);
    int ax, nout = n->n_outputs;
    if (graph_norm_axis(tern_graph_attr_int(n, "axis", 0), x->rank, &ax, c->why, sizeof c->why, "axis"))
        return ifail(c, TERN_ERR_INVALID, "%s", c->why);
    int64_t sizes[64];
    if (nout < 1 || nout > 64)
        return ifail(c, TERN_ERR_RANGE, "%d outputs (1 to 64 supported)", nout);
    if ((st = int_list(c, 1, "split", sizes, 64, &nb, &known, &given)))
        return st;
    int64_t dim = x->dims[ax];
    if (given && known) {
        int64_t total = 0;
        if (nb != nout)
            return ifail(c, TERN_ERR_INVALID, "split has %d sizes for %d outputs", nb, nout);
        for (int k = 0; k < nb; k++) {
            if (sizes[k] < 0 || sizes[k] > GRAPH_MAX_ELEMS)
                return ifail(c, TERN_ERR_INVALID, "split size %lld outside [0, 2^31]", (long long)sizes[k]);
            total += sizes[k];
        }
        if (dim >= 0 && total != dim)
            return ifail(c, TERN_ERR_INVALID, "split sizes sum to %lld, axis %d of \"%s\" has %lld",
                         (long long)total, ax, x->name, (long long)dim);
    } else if (!given && dim >= 0) {
        int64_t chunk = (dim + nout - 1) / nout, total = 0;
        for (int k = 0; k < nout; k++) {
            sizes[k] = dim - total < chunk ? dim - total : chunk;
            total += sizes[k];
        }
    } else
        for (int k = 0; k < nout; k++)
            sizes[k] = -1;
    for (int k = 0; k < nout; k++) {
        memcpy(dims, x->dims, sizeof dims);
        dims[ax] = sizes[k];
        set_out(c, k, x->type, x->rank, dims);
    }
    return TERN_OK;
}

/* SLICE */
tern_status graph_infer_slice(ictx *c)
{
    tern_status st;
    int64_t dims[TERN_GRAPH_MAX_RANK];
    if ((st = need_rank(c, 0)))
        return st;
    const tern_graph_value *x = V(c, 0);
    int64_t starts[16], ends[16], axes[16], steps[16];
    int ns, ne, na, nst, k1, k2, k3 = 1, k4 = 1, g1, g2, g3, g4;
    if (c->g->opset < 10) {
        if ((st = int_list(c, 99, "starts", starts, 16, &ns, &k1, &g1)) ||
            (st = int_list(c, 99, "ends", ends, 16, &ne, &k2, &g2)) ||
            (st = int_list(c, 99, "axes", axes, 16, &na, &k3, &g3)))
            return st;
        g4 = 0;
        nst = 0;
    } else {
        if ((st = need(c, 1)) || (st = need(c, 2)) || (st = int_list(c, 1, NULL, starts, 16, &ns, &k1, &g1)) ||
            (st = int_list(c, 2, NULL, ends, 16, &ne, &k2, &g2)) ||
            (st = int_list(c, 3, NULL, axes, 16, &na, &k3, &g3)) ||
            (st = int_list(c, 4, NULL, steps, 16, &nst, &k4, &g4)))
            return st;
    }
    memcpy(dims, x->dims, sizeof dims);
    if (!k3) {
        set_out(c, 0, x->type, x->rank, NULL);
        return TERN_OK;
    }
    if (!k1 || !k2 || !k4) { /* positions unknown: the sliced axes' sizes are unknown */
        int cnt = g3 ? na : x->rank;
        for (int k = 0; k < cnt; k++) {
            int a;
            if (graph_norm_axis(g3 ? axes[k] : k, x->rank, &a, c->why, sizeof c->why, "axis"))
                return ifail(c, TERN_ERR_INVALID, "%s", c->why);
            dims[a] = -1;
        }
        set_out(c, 0, x->type, x->rank, dims);
        return TERN_OK;
    }
    if (ns != ne || (g3 && na != ns) || (g4 && nst != ns))
        return ifail(c, TERN_ERR_INVALID, "starts (%d), ends (%d), axes (%d), steps (%d) lengths differ", ns, ne,
                     g3 ? na : -1, g4 ? nst : -1);
    int used[TERN_GRAPH_MAX_RANK] = {0};
    for (int k = 0; k < ns; k++) {
        int a;
        if (graph_norm_axis(g3 ? axes[k] : k, x->rank, &a, c->why, sizeof c->why, "axis"))
            return ifail(c, TERN_ERR_INVALID, "%s", c->why);
        if (used[a])
            return ifail(c, TERN_ERR_INVALID, "axis %d sliced twice", a);
        used[a] = 1;
        int64_t step = g4 ? steps[k] : 1, s = starts[k], e = ends[k];
        if (step == 0)
            return ifail(c, TERN_ERR_INVALID, "step 0 on axis %d", a);
        dims[a] = x->dims[a] < 0 ? -1 : graph_slice_len(x->dims[a], &s, &e, step);
    }
    set_out(c, 0, x->type, x->rank, dims);
    return TERN_OK;
}

/* EXPAND, TILE, CONSTANT_OF_SHAPE */
tern_status graph_infer_expand_tile(ictx *c)
{
    const tern_graph_node *n = c->n;
    const tern_op_id id = (tern_op_id)c->n->op_id;
    tern_status st;
    int64_t buf[2 * TERN_GRAPH_MAX_RANK + 2];
    int64_t dims[TERN_GRAPH_MAX_RANK];
    int nb, known, given, r;
    int data = id != TERN_GOP_CONSTANT_OF_SHAPE, si = data ? 1 : 0;
    if ((data && (st = need(c, 0))) || (st = need(c, si)))
        return st;
    const tern_graph_value *x = data ? V(c, 0) : NULL;
    tern_elem_type t = x ? x->type : TERN_ELEM_FLOAT;
    if (!data) {
        const tern_graph_attr *v = tern_graph_node_attr(n, "value");
        if (v && (v->type != TERN_ATTR_TENSOR || v->t->count != 1))
            return ifail(c, TERN_ERR_INVALID, "value must be a one-element tensor");
        if (v)
            t = v->t->type;
    }
    if ((st = int_list(c, si, NULL, buf, TERN_GRAPH_MAX_RANK + 1, &nb, &known, &given)))
        return st;
    const tern_graph_value *s = V(c, si);
    if (!known) {
        int len = s->rank == 1 ? (int)s->dims[0] : -1;
        if (len > TERN_GRAPH_MAX_RANK)
            return ifail(c, TERN_ERR_RANGE, "shape length %d above the limit", len);
        if (id == TERN_GOP_EXPAND && len >= 0 && x->rank >= 0)
            len = len > x->rank ? len : x->rank;
        if (id == TERN_GOP_TILE)
            len = x->rank;
        set_out(c, 0, t, len, NULL);
        return TERN_OK;
    }
    if (nb > TERN_GRAPH_MAX_RANK)
        return ifail(c, TERN_ERR_RANGE, "shape length %d above the limit", nb);
    for (int k = 0; k < nb; k++)
        if (buf[k] < 0)
            return ifail(c, TERN_ERR_INVALID, "shape[%d] = %lld is negative", k, (long long)buf[k]);
    if (id == TERN_GOP_EXPAND) {
        if (x->rank < 0) {
            set_out(c, 0, t, -1, NULL);
            return TERN_OK;
        }
        if (graph_broadcast(x->rank, x->dims, nb, buf, &r, dims, c->why, sizeof c->why))
            return ifail(c, TERN_ERR_INVALID, "\"%s\" to the target shape: %s", x->name, c->why);
        set_out(c, 0, t, r, dims);
    } else if (id == TERN_GOP_TILE) {
        if (x->rank >= 0 && nb != x->rank)
            return ifail(c, TERN_ERR_INVALID, "repeats has %d entries for rank %d", nb, x->rank);
        for (int d = 0; d < nb; d++) {
            if (x->rank >= 0 && x->dims[d] > 0 && buf[d] > GRAPH_MAX_ELEMS / x->dims[d])
                return ifail(c, TERN_ERR_RANGE, "repeats[%d] = %lld overflows the 2^31 element limit", d,
                             (long long)buf[d]);
            dims[d] = x->rank < 0 || x->dims[d] < 0 ? -1 : x->dims[d] * buf[d];
        }
        set_out(c, 0, t, nb, dims);
    } else
        set_out(c, 0, t, nb, buf);
    return TERN_OK;
}

/* PAD */
tern_status graph_infer_pad(ictx *c)
{
    const tern_graph_node *n = c->n;
    tern_status st;
    int64_t dims[TERN_GRAPH_MAX_RANK];
    if ((st = need_rank(c, 0)))
        return st;
    const tern_graph_value *x = V(c, 0);
    if (c->g->opset >= 11 && (st = need(c, 1)))
        return st;
    graph_pad_args pa;
    if ((st = graph_pad_decode(n, c->g->opset, V(c, 1) != NULL, K(c, 1), 0, NULL, &pa, c->why, sizeof c->why)))
        return ifail(c, st, "%s", c->why);
    if (V(c, 3))
        return ifail(c, TERN_ERR_UNSUPPORTED, "the axes input (opset 18) is not supported");
    if (!pa.known) {
        set_out(c, 0, x->type, x->rank, NULL);
        return TERN_OK;
    }
    if (pa.n != 2 * x->rank)
        return ifail(c, TERN_ERR_INVALID, "pads has %d entries for rank %d", pa.n, x->rank);
    const int64_t *pb = pa.pads;
    for (int d = 0; d < x->rank; d++) {
        if (pb[d] < -GRAPH_MAX_ELEMS || pb[d] > GRAPH_MAX_ELEMS || pb[x->rank + d] < -GRAPH_MAX_ELEMS ||
            pb[x->rank + d] > GRAPH_MAX_ELEMS)
            return ifail(c, TERN_ERR_RANGE, "pads on axis %d are out of range", d);
        dims[d] = x->dims[d] < 0 ? -1 : x->dims[d] + pb[d] + pb[x->rank + d];
        if (x->dims[d] >= 0 && dims[d] < 0)
            return ifail(c, TERN_ERR_INVALID, "pads on axis %d make it negative", d);
    }
    set_out(c, 0, x->type, x->rank, dims);
    return TERN_OK;
}

/* DEPTH_TO_SPACE, SPACE_TO_DEPTH */
tern_status graph_infer_depth_space(ictx *c)
{
    const tern_graph_node *n = c->n;
    const tern_op_id id = (tern_op_id)c->n->op_id;
    tern_status st;
    int64_t dims[TERN_GRAPH_MAX_RANK];
    if ((st = need_rank(c, 0)))
        return st;
    const tern_graph_value *x = V(c, 0);
    int64_t bs = tern_graph_attr_int(n, "blocksize", 0);
    if (x->rank != 4 || bs < 1 || bs > 4096)
        return ifail(c, TERN_ERR_INVALID, "needs a 4-D input and blocksize in [1, 4096]");
    int ds = id == TERN_GOP_DEPTH_TO_SPACE;
    dims[0] = x->dims[0];
    dims[1] = x->dims[1] < 0 ? -1 : ds ? x->dims[1] / (bs * bs) : x->dims[1] * bs * bs;
    dims[2] = x->dims[2] < 0 ? -1 : ds ? x->dims[2] * bs : x->dims[2] / bs;
    dims[3] = x->dims[3] < 0 ? -1 : ds ? x->dims[3] * bs : x->dims[3] / bs;
    if (ds && x->dims[1] >= 0 && x->dims[1] % (bs * bs))
        return ifail(c, TERN_ERR_INVALID, "channels %lld do not divide by blocksize^2", (long long)x->dims[1]);
    set_out(c, 0, x->type, 4, dims);
    return TERN_OK;
}

/* RESIZE, UPSAMPLE */
tern_status graph_infer_resize(ictx *c)
{
    const tern_graph_node *n = c->n;
    const tern_op_id id = (tern_op_id)c->n->op_id;
    tern_status st;
    int64_t dims[TERN_GRAPH_MAX_RANK];
    if ((st = need_rank(c, 0)))
        return st;
    const tern_graph_value *x = V(c, 0);
    int legacy = id == TERN_GOP_UPSAMPLE || c->g->opset < 11;
    const tern_graph_value *sv = legacy ? V(c, 1) : V(c, 2), *zv = legacy ? NULL : V(c, 3);
    const tern_host_tensor *sc = sv ? sv->constant : NULL, *sz = zv ? zv->constant : NULL;
    if ((sv && !sc) || (zv && !sz) || x->rank < 0 || !tern_graph_value_is_static(x)) {
        set_out(c, 0, x->type, x->rank, NULL);
        return TERN_OK;
    }
    tern_host_tensor *attr_sc = NULL;
    if (!sv && !zv) { /* Upsample-7: scales attribute */
        const tern_graph_attr *a = tern_graph_node_attr(n, "scales");
        if (a && a->type == TERN_ATTR_FLOATS) {
            int64_t nn = (int64_t)a->n;
            if ((st = tern_host_tensor_new(TERN_ELEM_FLOAT, 1, &nn, &attr_sc, c->err)))
                return st;
            memcpy(attr_sc->f, a->floats, a->n * sizeof(float));
        }
        sc = attr_sc;
    }
    double scale[TERN_GRAPH_MAX_RANK];
    int bad = graph_resize_dims(n, c->g->opset, x->rank, x->dims, sc, sz, dims, scale, c->why, sizeof c->why);
    tern_host_tensor_free(attr_sc);
    if (bad)
        return ifail(c, TERN_ERR_INVALID, "%s", c->why);
    set_out(c, 0, x->type, x->rank, dims);
    return TERN_OK;
}

/* ---- reference evaluation (the host evaluator's rules for this family) ---- */

tern_status graph_ev_depth_space(const ectx *c)
{
    tern_status st;
    if ((st = ereq(c, 0, 0)))
        return st;
    const tern_host_tensor *x = IN(0);
    int64_t bs = tern_graph_attr_int(c->n, "blocksize", 0);
    int to_space = c->n->op_id == TERN_GOP_DEPTH_TO_SPACE, crd = !strcmp(tern_graph_attr_string(c->n, "mode", "DCR"), "CRD");
    if (x->rank != 4 || bs < 1 || bs > 4096)
        return efail(c, TERN_ERR_INVALID, "needs a 4-D input and blocksize >= 1");
    int64_t N = x->dims[0], C = x->dims[1], H = x->dims[2], W = x->dims[3];
    if (to_space ? C % (bs * bs) : (H % bs || W % bs))
        return efail(c, TERN_ERR_INVALID, "dims do not divide by the block size %lld", (long long)bs);
    int64_t dims[4] = {N, to_space ? C / (bs * bs) : C * bs * bs, to_space ? H * bs : H / bs, to_space ? W * bs : W / bs};
    tern_host_tensor *o;
    if ((st = eout(c, 0, x->type, 4, dims, &o)) || !o)
        return st;
    int64_t oc = dims[1], oh = dims[2], ow = dims[3];
    for (int64_t n = 0; n < N; n++)
        for (int64_t cc = 0; cc < oc; cc++)
            for (int64_t h = 0; h < oh; h++)
                for (int64_t w = 0; w < ow; w++) {
                    int64_t src;
                    if (to_space) {
                        int64_t bh = h % bs, bw = w % bs;
                        int64_t ic = crd ? cc * bs * bs + bh * bs + bw : (bh * bs + bw) * oc + cc;
                        src = ((n * C + ic) * H + h / bs) * W + w / bs;
                    } else {
                        int64_t ic = cc % C, blk = cc / C;
                        src = ((n * C + ic) * H + h * bs + blk / bs) * W + w * bs + blk % bs;
                    }
                    size_t dst = (size_t)(((n * oc + cc) * oh + h) * ow + w);
                    if (o->f)
                        o->f[dst] = x->f[src];
                    else
                        o->i[dst] = x->i[src];
                }
    return TERN_OK;
}

tern_status graph_ev_eyelike(const ectx *c)
{
    tern_status st;
    if ((st = ereq(c, 0, 0)))
        return st;
    const tern_host_tensor *x = IN(0);
    if (x->rank != 2)
        return efail(c, TERN_ERR_INVALID, "input must be 2-D");
    const tern_graph_attr *dt = tern_graph_node_attr(c->n, "dtype");
    tern_elem_type t = dt && dt->type == TERN_ATTR_INT ? (tern_elem_type)(dt->i < 0 || dt->i > 64 ? 0 : dt->i) : x->type;
    if (!tern_elem_is_valid((int)t))
        return efail(c, TERN_ERR_UNSUPPORTED, "dtype %d is not supported", (int)t);
    int64_t k = tern_graph_attr_int(c->n, "k", 0);
    tern_host_tensor *o;
    if ((st = eout(c, 0, t, 2, x->dims, &o)) || !o)
        return st;
    for (int64_t r = 0; r < x->dims[0]; r++)
        for (int64_t col = 0; col < x->dims[1]; col++)
            if (col - r == k) {
                if (o->f)
                    o->f[r * x->dims[1] + col] = 1.0f;
                else
                    o->i[r * x->dims[1] + col] = 1;
            }
    return TERN_OK;
}

/* ---- Resize / Upsample ---- */
/* Output sizes from sizes (exact) or scales (floor(in * scale)); fills scale per dim. Shared with inference through
 * graph_resize_dims. */
int graph_resize_dims(const tern_graph_node *n, int64_t opset, int rank, const int64_t *in,
                      const tern_host_tensor *scales, const tern_host_tensor *sizes, int64_t *out, double *scale,
                      char *why, size_t wl)
{
    (void)n;
    (void)opset;
    if (sizes && sizes->count) {
        if (!sizes->i || sizes->count != (size_t)rank) {
            snprintf(why, wl, "sizes must hold %d integers", rank);
            return -1;
        }
        for (int d = 0; d < rank; d++) {
            if (sizes->i[d] < 0 || sizes->i[d] > GRAPH_MAX_ELEMS) {
                snprintf(why, wl, "sizes[%d] = %lld is invalid", d, (long long)sizes->i[d]);
                return -1;
            }
            out[d] = sizes->i[d];
            scale[d] = in[d] > 0 ? (double)out[d] / (double)in[d] : 1.0;
        }
        return 0;
    }
    if (!scales || !scales->f || scales->count != (size_t)rank) {
        snprintf(why, wl, "needs scales (%d floats) or sizes", rank);
        return -1;
    }
    for (int d = 0; d < rank; d++) {
        double s = scales->f[d], o = floor((double)in[d] * s);
        if (!(s > 0) || !(o <= (double)GRAPH_MAX_ELEMS)) {
            snprintf(why, wl, "scales[%d] = %g is invalid", d, s);
            return -1;
        }
        out[d] = (int64_t)o;
        scale[d] = s;
    }
    return 0;
}

static double cubic_w(double a, double t)
{
    t = fabs(t);
    if (t <= 1)
        return ((a + 2) * t - (a + 3)) * t * t + 1;
    if (t < 2)
        return ((a * t - 5 * a) * t + 8 * a) * t - 4 * a;
    return 0;
}

tern_status graph_ev_resize(const ectx *c)
{
    tern_status st;
    if ((st = ereq(c, 0, 0)))
        return st;
    const tern_host_tensor *x = IN(0), *roi = NULL, *scales, *sizes;
    int upsample = c->n->op_id == TERN_GOP_UPSAMPLE;
    tern_host_tensor *attr_scales = NULL;
    if (upsample || c->opset < 11) {
        scales = IN(1);
        sizes = NULL;
        if (!scales) { /* Upsample-7: scales attribute */
            const tern_graph_attr *a = tern_graph_node_attr(c->n, "scales");
            if (!a || a->type != TERN_ATTR_FLOATS)
                return efail(c, TERN_ERR_INVALID, "scales are required");
            int64_t n = (int64_t)a->n;
            tern_error e;
            if (tern_host_tensor_new(TERN_ELEM_FLOAT, 1, &n, &attr_scales, &e))
                return efail(c, e.code, "%s", e.msg);
            memcpy(attr_scales->f, a->floats, a->n * sizeof(float));
            scales = attr_scales;
        }
    } else {
        roi = IN(1);
        scales = IN(2);
        sizes = IN(3);
    }
    int r = x->rank;
    int64_t out[TERN_GRAPH_MAX_RANK];
    double scale[TERN_GRAPH_MAX_RANK];
    char why[200];
    if (graph_resize_dims(c->n, c->opset, r, x->dims, scales, sizes, out, scale, why, sizeof why)) {
        tern_host_tensor_free(attr_scales);
        return efail(c, TERN_ERR_INVALID, "%s", why);
    }
    tern_host_tensor_free(attr_scales);
    const char *mode = tern_graph_attr_string(c->n, "mode", "nearest");
    const char *ctm = tern_graph_attr_string(c->n, "coordinate_transformation_mode",
                                             upsample || c->opset < 11 ? "asymmetric" : "half_pixel");
    const char *nm = tern_graph_attr_string(c->n, "nearest_mode", upsample || c->opset < 11 ? "floor"
                                                                                             : "round_prefer_floor");
    double a = tern_graph_attr_float(c->n, "cubic_coeff_a", -0.75f);
    int excl = (int)tern_graph_attr_int(c->n, "exclude_outside", 0);
    double extrap = tern_graph_attr_float(c->n, "extrapolation_value", 0.0f);
    int m = !strcmp(mode, "nearest") ? 0 : !strcmp(mode, "linear") || !strcmp(mode, "bilinear") ? 1
            : !strcmp(mode, "cubic")                                                              ? 2
                                                                                                  : -1;
    int t = !strcmp(ctm, "half_pixel") ? 0 : !strcmp(ctm, "pytorch_half_pixel") ? 1 : !strcmp(ctm, "align_corners") ? 2
            : !strcmp(ctm, "asymmetric")                                                                           ? 3
            : !strcmp(ctm, "tf_half_pixel_for_nn")                                                                 ? 4
            : !strcmp(ctm, "tf_crop_and_resize")                                                                   ? 5
                                                                                                                   : -1;
    int nmode = !strcmp(nm, "round_prefer_floor") ? 0 : !strcmp(nm, "round_prefer_ceil") ? 1 : !strcmp(nm, "floor") ? 2
                : !strcmp(nm, "ceil")                                                                              ? 3
                                                                                                                   : -1;
    if (m < 0 || t < 0 || nmode < 0)
        return efail(c, TERN_ERR_UNSUPPORTED, "mode \"%.20s\", coordinate_transformation_mode \"%.30s\" or "
                     "nearest_mode \"%.20s\" is not supported", mode, ctm, nm);
    for (int d = 0; d < r; d++)
        if (x->dims[d] == 0 && out[d] > 0)
            return efail(c, TERN_ERR_INVALID, "dim %d is empty and cannot be resized to %lld", d, (long long)out[d]);
    if (t == 5 && (!roi || !roi->f || roi->count != 2 * (size_t)r))
        return efail(c, TERN_ERR_INVALID, "tf_crop_and_resize needs roi with %d floats", 2 * r);
    tern_host_tensor *o;
    if ((st = eout(c, 0, x->type, r, out, &o)) || !o || o->count == 0)
        return st; /* (an empty output: the per-dim tables below could otherwise be sized by a huge other dim) */
    /* per dim and output coordinate: up to 4 (index, weight) taps; index -1 = outside (extrapolation) */
    int taps = m == 0 ? 1 : m == 1 ? 2 : 4;
    size_t total = 0;
    for (int d = 0; d < r; d++)
        total += (size_t)out[d];
    int64_t *ti = malloc((total * 4 + 1) * sizeof *ti);
    double *tw = malloc((total * 4 + 1) * sizeof *tw);
    unsigned char *outside = calloc(total + 1, 1);
    if (!ti || !tw || !outside) {
        free(ti), free(tw), free(outside);
        return efail(c, TERN_ERR_NOMEM, "out of memory");
    }
    size_t base[TERN_GRAPH_MAX_RANK], pos = 0;
    for (int d = 0; d < r; d++) {
        base[d] = pos;
        int64_t in = x->dims[d];
        for (int64_t j = 0; j < out[d]; j++, pos++) {
            double xo, s = scale[d];
            switch (t) {
            case 0: xo = (j + 0.5) / s - 0.5; break;
            case 1: xo = out[d] > 1 ? (j + 0.5) / s - 0.5 : 0; break;
            case 2: { /* ONNX's reference uses the unrounded resized length in * scale */
                double len = (double)in * s;
                xo = len <= 1 ? 0 : (double)j * (double)(in - 1) / (len - 1);
                break;
            }
            case 3: xo = j / s; break;
            case 4: xo = (j + 0.5) / s; break;
            default: {
                double s0 = roi->f[d], e0 = roi->f[r + d];
                xo = out[d] > 1 ? s0 * (double)(in - 1) + (double)j * (e0 - s0) * (double)(in - 1) / (double)(out[d] - 1)
                                : 0.5 * (s0 + e0) * (double)(in - 1);
                if (xo < 0 || xo > (double)(in - 1))
                    outside[pos] = 1;
                break;
            }
            }
            if (isnan(xo)) /* a NaN roi: outside, and keep the index arithmetic defined */
                outside[pos] = 1, xo = 0;
            xo = xo < -1e12 ? -1e12 : xo > 1e12 ? 1e12 : xo;
            int64_t *ii = ti + pos * 4;
            double *ww = tw + pos * 4;
            if (m == 0) {
                double f = floor(xo);
                int64_t k;
                if (nmode == 2)
                    k = (int64_t)f;
                else if (nmode == 3)
                    k = (int64_t)ceil(xo);
                else if (xo - f == 0.5)
                    k = (int64_t)f + (nmode == 1);
                else
                    k = (int64_t)nearbyint(xo);
                ii[0] = k < 0 ? 0 : k >= in ? in - 1 : k;
                ww[0] = 1;
            } else if (m == 1) {
                double f = floor(xo), fr = xo - f;
                int64_t k0 = (int64_t)f;
                ii[0] = k0 < 0 ? 0 : k0 >= in ? in - 1 : k0;
                ii[1] = k0 + 1 < 0 ? 0 : k0 + 1 >= in ? in - 1 : k0 + 1;
                ww[0] = 1 - fr;
                ww[1] = fr;
            } else {
                double f = floor(xo), fr = xo - f, sum = 0;
                int64_t k0 = (int64_t)f;
                for (int q = 0; q < 4; q++) {
                    int64_t k = k0 - 1 + q;
                    ww[q] = cubic_w(a, fr - (double)(q - 1));
                    if (excl && (k < 0 || k >= in))
                        ww[q] = 0;
                    ii[q] = k < 0 ? 0 : k >= in ? in - 1 : k;
                    sum += ww[q];
                }
                if (excl && sum != 0)
                    for (int q = 0; q < 4; q++)
                        ww[q] /= sum;
            }
        }
    }
    int64_t xs[TERN_GRAPH_MAX_RANK], idx[TERN_GRAPH_MAX_RANK] = {0};
    ev_strides(r, x->dims, xs);
    int64_t ncomb = 1;
    for (int d = 0; d < r; d++)
        ncomb *= taps;
    for (size_t e = 0; e < o->count; e++) {
        int out_of_roi = 0;
        for (int d = 0; d < r; d++)
            out_of_roi |= outside[base[d] + (size_t)idx[d]];
        double acc = 0;
        if (out_of_roi)
            acc = extrap;
        else
            for (int64_t comb = 0; comb < ncomb; comb++) {
                int64_t rem = comb, off = 0;
                double wgt = 1;
                for (int d = r - 1; d >= 0; d--) {
                    int q = (int)(rem % taps);
                    rem /= taps;
                    size_t p = (base[d] + (size_t)idx[d]) * 4 + (size_t)q;
                    wgt *= tw[p];
                    off += ti[p] * xs[d];
                }
                if (wgt != 0)
                    acc += wgt * (x->f ? (double)x->f[off] : (double)x->i[off]);
            }
        if (o->f)
            o->f[e] = (float)acc;
        else
            o->i[e] = isnan(acc) ? 0 : acc >= 9223372036854775807.0 ? INT64_MAX
                      : acc <= -9223372036854775808.0 ? INT64_MIN
                                                     : (int64_t)nearbyint(acc);
        ev_next_index(idx, out, r);
    }
    free(ti), free(tw), free(outside);
    graph_tensor_normalize(o);
    return TERN_OK;
}

/* ---- reference evaluation (moved from eval.c) ---- */

/* ---- data movement ---- */
static tern_status copy_out(const ectx *c, int k, const tern_host_tensor *x, int rank, const int64_t *dims)
{
    tern_host_tensor *o;
    tern_status st = eout(c, k, x->type, rank, dims, &o);
    if (st || !o)
        return st;
    if (o->count != x->count)
        return efail(c, TERN_ERR_INVALID, "internal: %zu elements into %zu", x->count, o->count);
    if (o->f)
        memcpy(o->f, x->f, x->count * sizeof(float));
    else
        memcpy(o->i, x->i, x->count * sizeof(int64_t));
    return TERN_OK;
}

tern_status graph_ev_reshape(const ectx *c)
{
    tern_status st;
    if ((st = ereq(c, 0, 0)))
        return st;
    int64_t shape[TERN_GRAPH_MAX_RANK + 1], dims[TERN_GRAPH_MAX_RANK];
    int n;
    if (c->opset < 5 || c->n_in < 2) {
        size_t na;
        const int64_t *s = graph_attr_ints(c->n, "shape", &na);
        if (na > TERN_GRAPH_MAX_RANK)
            return efail(c, TERN_ERR_RANGE, "target rank %zu above the limit", na);
        for (size_t k = 0; k < na; k++)
            shape[k] = s[k];
        n = (int)na;
    } else if ((st = eints(c, 1, shape, TERN_GRAPH_MAX_RANK + 1, &n)))
        return st;
    char why[200];
    if (graph_reshape_dims(IN(0)->rank, IN(0)->dims, shape, n, (int)tern_graph_attr_int(c->n, "allowzero", 0), dims,
                           why, sizeof why))
        return efail(c, TERN_ERR_INVALID, "%s", why);
    return copy_out(c, 0, IN(0), n, dims);
}

tern_status graph_ev_flatten(const ectx *c)
{
    tern_status st;
    if ((st = ereq(c, 0, 0)))
        return st;
    const tern_host_tensor *x = IN(0);
    int64_t axis = tern_graph_attr_int(c->n, "axis", 1);
    if (axis < -x->rank || axis > x->rank)
        return efail(c, TERN_ERR_INVALID, "axis %lld outside [%d, %d]", (long long)axis, -x->rank, x->rank);
    if (axis < 0)
        axis += x->rank;
    int64_t dims[2] = {1, 1};
    for (int d = 0; d < x->rank; d++)
        dims[d < axis ? 0 : 1] *= x->dims[d];
    return copy_out(c, 0, x, 2, dims);
}

static tern_status axes_of(const ectx *c, int input, const char *attr, int64_t *axes, int *n, int *given)
{
    *n = 0;
    *given = 0;
    if (IN(input)) {
        *given = 1;
        return eints(c, input, axes, TERN_GRAPH_MAX_RANK * 2, n);
    }
    size_t na;
    const int64_t *a = graph_attr_ints(c->n, attr, &na);
    if (a) {
        if (na > TERN_GRAPH_MAX_RANK * 2)
            return efail(c, TERN_ERR_RANGE, "%zu axes", na);
        for (size_t k = 0; k < na; k++)
            axes[k] = a[k];
        *n = (int)na;
        *given = 1;
    }
    return TERN_OK;
}

tern_status graph_ev_unsqueeze(const ectx *c)
{
    tern_status st;
    if ((st = ereq(c, 0, 0)))
        return st;
    const tern_host_tensor *x = IN(0);
    int64_t axes[TERN_GRAPH_MAX_RANK * 2];
    int n, given;
    if ((st = axes_of(c, 1, "axes", axes, &n, &given)))
        return st;
    int rank = x->rank + n;
    if (!given || rank > TERN_GRAPH_MAX_RANK)
        return efail(c, TERN_ERR_INVALID, given ? "result rank %d above the limit" : "axes are required (rank %d)",
                     rank);
    int is_new[TERN_GRAPH_MAX_RANK] = {0};
    char why[200];
    for (int k = 0; k < n; k++) {
        int a;
        if (graph_norm_axis(axes[k], rank, &a, why, sizeof why, "axis"))
            return efail(c, TERN_ERR_INVALID, "%s", why);
        if (is_new[a])
            return efail(c, TERN_ERR_INVALID, "axis %d given twice", a);
        is_new[a] = 1;
    }
    int64_t dims[TERN_GRAPH_MAX_RANK];
    for (int d = 0, s = 0; d < rank; d++)
        dims[d] = is_new[d] ? 1 : x->dims[s++];
    return copy_out(c, 0, x, rank, dims);
}

tern_status graph_ev_squeeze(const ectx *c)
{
    tern_status st;
    if ((st = ereq(c, 0, 0)))
        return st;
    const tern_host_tensor *x = IN(0);
    int64_t axes[TERN_GRAPH_MAX_RANK * 2];
    int n, given;
    if ((st = axes_of(c, 1, "axes", axes, &n, &given)))
        return st;
    int drop[TERN_GRAPH_MAX_RANK] = {0};
    char why[200];
    if (!given)
        for (int d = 0; d < x->rank; d++)
            drop[d] = x->dims[d] == 1;
    for (int k = 0; k < n; k++) {
        int a;
        if (graph_norm_axis(axes[k], x->rank, &a, why, sizeof why, "axis"))
            return efail(c, TERN_ERR_INVALID, "%s", why);
        if (x->dims[a] != 1)
            return efail(c, TERN_ERR_INVALID, "axis %d has size %lld, not 1", a, (long long)x->dims[a]);
        drop[a] = 1;
    }
    int64_t dims[TERN_GRAPH_MAX_RANK];
    int r = 0;
    for (int d = 0; d < x->rank; d++)
        if (!drop[d])
            dims[r++] = x->dims[d];
    return copy_out(c, 0, x, r, dims);
}

tern_status graph_ev_transpose(const ectx *c)
{
    tern_status st;
    if ((st = ereq(c, 0, 0)))
        return st;
    const tern_host_tensor *x = IN(0);
    int r = x->rank;
    int perm[TERN_GRAPH_MAX_RANK];
    size_t np;
    const int64_t *p = graph_attr_ints(c->n, "perm", &np);
    if (p && np != (size_t)r)
        return efail(c, TERN_ERR_INVALID, "perm has %zu entries for rank %d", np, r);
    int seen[TERN_GRAPH_MAX_RANK] = {0};
    for (int d = 0; d < r; d++) {
        int64_t v = p ? p[d] : r - 1 - d;
        if (v < 0 || v >= r || seen[v])
            return efail(c, TERN_ERR_INVALID, "perm is not a permutation of 0..%d", r - 1);
        seen[v] = 1;
        perm[d] = (int)v;
    }
    int64_t dims[TERN_GRAPH_MAX_RANK], xs[TERN_GRAPH_MAX_RANK], ps[TERN_GRAPH_MAX_RANK];
    for (int d = 0; d < r; d++)
        dims[d] = x->dims[perm[d]];
    tern_host_tensor *o;
    if ((st = eout(c, 0, x->type, r, dims, &o)) || !o)
        return st;
    ev_strides(r, x->dims, xs);
    for (int d = 0; d < r; d++)
        ps[d] = xs[perm[d]];
    int64_t idx[TERN_GRAPH_MAX_RANK] = {0};
    size_t off = 0;
    for (size_t k = 0; k < o->count; k++) {
        if (o->f)
            o->f[k] = x->f[off];
        else
            o->i[k] = x->i[off];
        for (int d = r - 1; d >= 0; d--) {
            idx[d]++;
            off += (size_t)ps[d];
            if (idx[d] < dims[d])
                break;
            off -= (size_t)(ps[d] * dims[d]);
            idx[d] = 0;
        }
    }
    return TERN_OK;
}

tern_status graph_ev_concat(const ectx *c)
{
    tern_status st;
    if ((st = ereq(c, 0, 0)))
        return st;
    const tern_host_tensor *x0 = IN(0);
    int ax;
    char why[200];
    if (!tern_graph_node_attr(c->n, "axis") && c->opset >= 4)
        return efail(c, TERN_ERR_INVALID, "attribute \"axis\" is required");
    if (graph_norm_axis(tern_graph_attr_int(c->n, "axis", 1), x0->rank, &ax, why, sizeof why, "axis"))
        return efail(c, TERN_ERR_INVALID, "%s", why);
    int64_t dims[TERN_GRAPH_MAX_RANK];
    memcpy(dims, x0->dims, sizeof dims);
    dims[ax] = 0;
    for (int k = 0; k < c->n_in; k++) {
        const tern_host_tensor *t = IN(k);
        if (!t)
            return efail(c, TERN_ERR_INVALID, "input %d is missing", k);
        if (t->type != x0->type || t->rank != x0->rank)
            return efail(c, TERN_ERR_INVALID, "input %d is %s rank %d, input 0 is %s rank %d", k,
                         tern_elem_name(t->type), t->rank, tern_elem_name(x0->type), x0->rank);
        for (int d = 0; d < t->rank; d++)
            if (d != ax && t->dims[d] != x0->dims[d])
                return efail(c, TERN_ERR_INVALID, "input %d dim %d is %lld, input 0 has %lld", k, d,
                             (long long)t->dims[d], (long long)x0->dims[d]);
        dims[ax] += t->dims[ax];
    }
    tern_host_tensor *o;
    if ((st = eout(c, 0, x0->type, x0->rank, dims, &o)) || !o)
        return st;
    size_t outer = 1, inner = 1;
    for (int d = 0; d < ax; d++)
        outer *= (size_t)dims[d];
    for (int d = ax + 1; d < x0->rank; d++)
        inner *= (size_t)dims[d];
    size_t orow = (size_t)dims[ax] * inner, pos = 0;
    for (int k = 0; k < c->n_in; k++) {
        const tern_host_tensor *t = IN(k);
        size_t row = (size_t)t->dims[ax] * inner;
        for (size_t q = 0; q < outer; q++) {
            if (o->f)
                memcpy(o->f + q * orow + pos, t->f + q * row, row * sizeof(float));
            else
                memcpy(o->i + q * orow + pos, t->i + q * row, row * sizeof(int64_t));
        }
        pos += row;
    }
    return TERN_OK;
}

tern_status graph_ev_split(const ectx *c)
{
    tern_status st;
    if ((st = ereq(c, 0, 0)))
        return st;
    const tern_host_tensor *x = IN(0);
    int ax;
    char why[200];
    if (graph_norm_axis(tern_graph_attr_int(c->n, "axis", 0), x->rank, &ax, why, sizeof why, "axis"))
        return efail(c, TERN_ERR_INVALID, "%s", why);
    int nout = c->n_out;
    if (nout < 1)
        return efail(c, TERN_ERR_INVALID, "no outputs");
    int64_t *sizes = calloc((size_t)nout, sizeof *sizes);
    if (!sizes)
        return efail(c, TERN_ERR_NOMEM, "out of memory");
    size_t ns = 0;
    const int64_t *sa = NULL;
    if (IN(1)) {
        if (!IN(1)->i || IN(1)->rank > 1) {
            free(sizes);
            return efail(c, TERN_ERR_INVALID, "split input must be a 1-D int64 tensor");
        }
        sa = IN(1)->i;
        ns = IN(1)->count;
    } else
        sa = graph_attr_ints(c->n, "split", &ns);
    int64_t total = 0, dim = x->dims[ax];
    if (sa) {
        if (ns != (size_t)nout) {
            free(sizes);
            return efail(c, TERN_ERR_INVALID, "split has %zu sizes for %d outputs", ns, nout);
        }
        for (int k = 0; k < nout; k++) {
            if (sa[k] < 0 || sa[k] > dim) {
                free(sizes);
                return efail(c, TERN_ERR_INVALID, "split size %lld outside [0, %lld]", (long long)sa[k],
                             (long long)dim);
            }
            sizes[k] = sa[k];
            total += sa[k];
        }
    } else {
        int64_t chunk = (dim + nout - 1) / nout;
        for (int k = 0; k < nout; k++) {
            sizes[k] = dim - total < chunk ? dim - total : chunk;
            total += sizes[k];
        }
    }
    if (total != dim) {
        free(sizes);
        return efail(c, TERN_ERR_INVALID, "split sizes sum to %lld, axis %d has %lld", (long long)total, ax,
                     (long long)dim);
    }
    size_t outer = 1, inner = 1;
    for (int d = 0; d < ax; d++)
        outer *= (size_t)x->dims[d];
    for (int d = ax + 1; d < x->rank; d++)
        inner *= (size_t)x->dims[d];
    size_t pos = 0, row = (size_t)dim * inner;
    for (int k = 0; k < nout; k++) {
        int64_t dims[TERN_GRAPH_MAX_RANK];
        memcpy(dims, x->dims, sizeof dims);
        dims[ax] = sizes[k];
        tern_host_tensor *o;
        if ((st = eout(c, k, x->type, x->rank, dims, &o))) {
            free(sizes);
            return st;
        }
        size_t orow = (size_t)sizes[k] * inner;
        if (o)
            for (size_t q = 0; q < outer; q++) {
                if (o->f)
                    memcpy(o->f + q * orow, x->f + q * row + pos, orow * sizeof(float));
                else
                    memcpy(o->i + q * orow, x->i + q * row + pos, orow * sizeof(int64_t));
            }
        pos += orow;
    }
    free(sizes);
    return TERN_OK;
}

tern_status graph_ev_slice(const ectx *c)
{
    tern_status st;
    if ((st = ereq(c, 0, 0)))
        return st;
    const tern_host_tensor *x = IN(0);
    int r = x->rank;
    int64_t starts[16], ends[16], axes[16], steps[16];
    int ns, ne, na = -1, nst = -1;
    if (c->opset < 10) {
        size_t a, b, d;
        const int64_t *s = graph_attr_ints(c->n, "starts", &a), *e = graph_attr_ints(c->n, "ends", &b),
                      *ax = graph_attr_ints(c->n, "axes", &d);
        if (!s || !e || a != b || a > 16 || (ax && d != a))
            return efail(c, TERN_ERR_INVALID, "starts/ends attributes missing or of different lengths");
        ns = ne = (int)a;
        memcpy(starts, s, a * sizeof *s);
        memcpy(ends, e, a * sizeof *e);
        if (ax) {
            memcpy(axes, ax, a * sizeof *ax);
            na = (int)a;
        }
    } else {
        if ((st = eints(c, 1, starts, 16, &ns)) || (st = eints(c, 2, ends, 16, &ne)))
            return st;
        if (IN(3) && (st = eints(c, 3, axes, 16, &na)))
            return st;
        if (IN(4) && (st = eints(c, 4, steps, 16, &nst)))
            return st;
    }
    if (ns != ne || (na >= 0 && na != ns) || (nst >= 0 && nst != ns))
        return efail(c, TERN_ERR_INVALID, "starts (%d), ends (%d), axes (%d), steps (%d) lengths differ", ns, ne, na,
                     nst);
    int64_t b[TERN_GRAPH_MAX_RANK], stp[TERN_GRAPH_MAX_RANK], dims[TERN_GRAPH_MAX_RANK];
    int used[TERN_GRAPH_MAX_RANK] = {0};
    for (int d = 0; d < r; d++) {
        b[d] = 0;
        stp[d] = 1;
        dims[d] = x->dims[d];
    }
    char why[200];
    for (int k = 0; k < ns; k++) {
        int a;
        if (graph_norm_axis(na >= 0 ? axes[k] : k, r, &a, why, sizeof why, "axis"))
            return efail(c, TERN_ERR_INVALID, "%s", why);
        if (used[a])
            return efail(c, TERN_ERR_INVALID, "axis %d sliced twice", a);
        used[a] = 1;
        int64_t step = nst >= 0 ? steps[k] : 1;
        if (step == 0)
            return efail(c, TERN_ERR_INVALID, "step 0 on axis %d", a);
        int64_t s = starts[k], e = ends[k];
        dims[a] = graph_slice_len(x->dims[a], &s, &e, step);
        b[a] = s;
        stp[a] = step;
    }
    tern_host_tensor *o;
    if ((st = eout(c, 0, x->type, r, dims, &o)) || !o)
        return st;
    int64_t xs[TERN_GRAPH_MAX_RANK], idx[TERN_GRAPH_MAX_RANK] = {0};
    ev_strides(r, x->dims, xs);
    for (size_t k = 0; k < o->count; k++) {
        int64_t off = 0;
        for (int d = 0; d < r; d++)
            off += (b[d] + idx[d] * stp[d]) * xs[d];
        if (o->f)
            o->f[k] = x->f[off];
        else
            o->i[k] = x->i[off];
        ev_next_index(idx, dims, r);
    }
    return TERN_OK;
}


static tern_status broadcast_to(const ectx *c, const tern_host_tensor *x, int rank, const int64_t *dims)
{
    tern_host_tensor *o;
    tern_status st = eout(c, 0, x->type, rank, dims, &o);
    if (st || !o)
        return st;
    bcit it;
    const tern_host_tensor *ts[1] = {x};
    bcit_init(&it, rank, dims, 1, ts);
    for (size_t k = 0; k < o->count; k++, bcit_next(&it)) {
        if (o->f)
            o->f[k] = x->f[it.off[0]];
        else
            o->i[k] = x->i[it.off[0]];
    }
    return TERN_OK;
}

tern_status graph_ev_expand(const ectx *c)
{
    tern_status st;
    if ((st = ereq(c, 0, 0)))
        return st;
    int64_t shape[TERN_GRAPH_MAX_RANK + 1], dims[TERN_GRAPH_MAX_RANK];
    int n, r;
    if ((st = eints(c, 1, shape, TERN_GRAPH_MAX_RANK, &n)))
        return st;
    for (int k = 0; k < n; k++)
        if (shape[k] < 0)
            return efail(c, TERN_ERR_INVALID, "shape[%d] = %lld is negative", k, (long long)shape[k]);
    char why[200];
    if (graph_broadcast(IN(0)->rank, IN(0)->dims, n, shape, &r, dims, why, sizeof why))
        return efail(c, TERN_ERR_INVALID, "%s", why);
    return broadcast_to(c, IN(0), r, dims);
}

tern_status graph_ev_tile(const ectx *c)
{
    tern_status st;
    if ((st = ereq(c, 0, 0)))
        return st;
    const tern_host_tensor *x = IN(0);
    int64_t rep[TERN_GRAPH_MAX_RANK + 1], dims[TERN_GRAPH_MAX_RANK];
    int n;
    if ((st = eints(c, 1, rep, TERN_GRAPH_MAX_RANK + 1, &n)))
        return st;
    if (n != x->rank)
        return efail(c, TERN_ERR_INVALID, "repeats has %d entries for rank %d", n, x->rank);
    for (int d = 0; d < n; d++) {
        if (rep[d] < 0 || (x->dims[d] && rep[d] > GRAPH_MAX_ELEMS / x->dims[d]))
            return efail(c, TERN_ERR_INVALID, "repeats[%d] = %lld is invalid", d, (long long)rep[d]);
        dims[d] = x->dims[d] * rep[d];
    }
    tern_host_tensor *o;
    if ((st = eout(c, 0, x->type, n, dims, &o)) || !o)
        return st;
    int64_t xs[TERN_GRAPH_MAX_RANK], idx[TERN_GRAPH_MAX_RANK] = {0};
    ev_strides(n, x->dims, xs);
    for (size_t k = 0; k < o->count; k++) {
        int64_t off = 0;
        for (int d = 0; d < n; d++)
            off += (idx[d] % x->dims[d]) * xs[d];
        if (o->f)
            o->f[k] = x->f[off];
        else
            o->i[k] = x->i[off];
        ev_next_index(idx, dims, n);
    }
    return TERN_OK;
}



tern_status graph_ev_trilu(const ectx *c)
{
    tern_status st;
    if ((st = ereq(c, 0, 0)))
        return st;
    const tern_host_tensor *x = IN(0);
    if (x->rank < 2)
        return efail(c, TERN_ERR_INVALID, "input rank %d below 2", x->rank);
    int64_t k = IN(1) && IN(1)->count ? ri(IN(1), 0) : 0;
    int upper = (int)tern_graph_attr_int(c->n, "upper", 1);
    if ((st = copy_out(c, 0, x, x->rank, x->dims)) || !c->out[0])
        return st;
    tern_host_tensor *o = c->out[0];
    int64_t R = x->dims[x->rank - 2], C = x->dims[x->rank - 1];
    for (size_t e = 0; e < o->count; e++) {
        int64_t col = (int64_t)(e % (size_t)C), row = (int64_t)((e / (size_t)C) % (size_t)R);
        int keep = upper ? col - row >= k : col - row <= k;
        if (!keep) {
            if (o->f)
                o->f[e] = 0;
            else
                o->i[e] = 0;
        }
    }
    return TERN_OK;
}
