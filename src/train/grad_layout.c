/* Gradients of the layout ops, which move elements without changing them: the views (Reshape, Flatten, Squeeze,
 * Unsqueeze) reshape the gradient back to the operand's shape; Transpose applies the inverse permutation;
 * Expand sums over the broadcast axes; Concat hands each operand its slice of the gradient, Split concatenates
 * its outputs' gradients, Slice spreads its gradient k apart along axes of step k and pads it with zeros, and constant-mode Pad hands back the slice its operand was. */
#include "ad_internal.h"

#include <string.h>

static int g_view(ad_ctx *a, const ad_fwd *f)
{
    ad_shape sx = ad_shape_of(a, f->in[0]);
    ad_accum(a, f->in[0], ad_reshape(a, f->dy[0], &sx));
    return 0;
}

static int g_transpose(ad_ctx *a, const ad_fwd *f)
{
    const tern_graph_node *n = &a->g->nodes[f->index];
    ad_shape sx = ad_shape_of(a, f->in[0]);
    int64_t perm[TERN_GRAPH_MAX_RANK], inv[TERN_GRAPH_MAX_RANK];
    const tern_graph_attr *at = tern_graph_node_attr(n, "perm");
    for (int d = 0; d < sx.rank; d++)
        perm[d] = at && (size_t)d < at->n ? at->ints[d] : sx.rank - 1 - d;
    for (int d = 0; d < sx.rank; d++) {
        if (perm[d] < 0 || perm[d] >= sx.rank)
            return ad_fail_node(a, f->index, "perm[%d] = %lld outside rank %d", d, (long long)perm[d], sx.rank);
        inv[perm[d]] = d;
    }
    ad_accum(a, f->in[0], ad_transpose(a, f->dy[0], sx.rank, inv));
    return 0;
}

static int g_expand(ad_ctx *a, const ad_fwd *f)
{
    ad_shape sy = ad_shape_of(a, f->out[0]), sx = ad_shape_of(a, f->in[0]);
    ad_accum(a, f->in[0], ad_unbroadcast(a, f->dy[0], &sy, &sx));
    return 0;
}

/* Concat along axis: operand k gets Slice(dy, offset_k, offset_k + len_k) on that axis */
static int g_concat(ad_ctx *a, const ad_fwd *f)
{
    ad_shape sy = ad_shape_of(a, f->out[0]);
    int64_t axis = tern_graph_attr_int(&a->g->nodes[f->index], "axis", 0);
    if (axis < 0)
        axis += sy.rank;
    if (axis < 0 || axis >= sy.rank)
        return ad_fail_node(a, f->index, "axis outside rank %d", sy.rank);
    if (a->opset < 10)
        return ad_fail_node(a, f->index, "Concat's gradient needs opset 10 or later (Slice with inputs)");
    int64_t off = 0;
    for (int k = 0; k < f->n_in; k++) {
        ad_shape sk = ad_shape_of(a, f->in[k]);
        int64_t len = sk.d[axis];
        if (ad_needs(a, f->in[k])) {
            int64_t st = off, en = off + len;
            int in[4] = {f->dy[0], ad_const_i64(a, 1, &st), ad_const_i64(a, 1, &en), ad_const_i64(a, 1, &axis)};
            ad_accum(a, f->in[k], ad_op(a, "Slice", 4, in));
        }
        off += len;
    }
    return 0;
}

/* Split along axis: the operand's gradient is the outputs' gradients concatenated back (zeros for an output no
 * gradient reaches) */
static int g_split(ad_ctx *a, const ad_fwd *f)
{
    int64_t axis = tern_graph_attr_int(&a->g->nodes[f->index], "axis", 0);
    ad_shape sx = ad_shape_of(a, f->in[0]);
    if (axis < 0)
        axis += sx.rank;
    if (axis < 0 || axis >= sx.rank)
        return ad_fail_node(a, f->index, "axis outside rank %d", sx.rank);
    int parts[AD_MAX_IO];
    for (int k = 0; k < f->n_out; k++) {
        if (f->out[k] < 0)
            return ad_fail_node(a, f->index, "an omitted Split output has no gradient rule");
        if (f->dy[k] >= 0) {
            parts[k] = f->dy[k];
            continue;
        }
        ad_shape so = ad_shape_of(a, f->out[k]);
        parts[k] = ad_expand(a, ad_const_f(a, 0.0f), &so);
    }
    int y = ad_op(a, "Concat", f->n_out, parts);
    ad_attr_int(a, ad_last_node(a), "axis", axis);
    ad_accum(a, f->in[0], y);
    return 0;
}

/* Spreads g's elements along axis ax of shape *sh (m of them) k apart: Reshape to [..., m, 1, ...], Pad k - 1
 * zeros after each, Reshape to [..., m k, ...], and Slice off the last k - 1, leaving (m - 1) k + 1 with g[j] at
 * j k and zeros between. *sh is updated. */
static int spread(ad_ctx *a, int g, ad_shape *sh, int ax, int64_t k)
{
    int64_t m = sh->d[ax];
    ad_shape u = {.rank = sh->rank + 1};
    for (int d = 0, e = 0; d < u.rank; d++)
        u.d[d] = d == ax + 1 ? 1 : sh->d[e++];
    int64_t pads[2 * (TERN_GRAPH_MAX_RANK + 1)] = {0};
    pads[u.rank + ax + 1] = k - 1;
    g = ad_op2(a, "Pad", ad_reshape(a, g, &u), ad_const_i64(a, 2 * u.rank, pads));
    ad_shape w = *sh;
    w.d[ax] = m * k;
    g = ad_reshape(a, g, &w);
    int64_t zero = 0, len = (m - 1) * k + 1, axis = ax;
    int in[4] = {g, ad_const_i64(a, 1, &zero), ad_const_i64(a, 1, &len), ad_const_i64(a, 1, &axis)};
    sh->d[ax] = len;
    return ad_op(a, "Slice", 4, in);
}

/* Element k of an integer constant exactly: starts/ends are int64 and exporters write INT64_MAX / INT64_MIN for
 * "to the edge", which a double cannot hold (the cast back overflowed: 'Slice axis 3: 0 elements'). A float
 * constant is clamped to the int64 range before its cast. */
static int64_t const_i64(const tern_host_tensor *t, size_t k)
{
    if (t->i)
        return t->i[k];
    double v = tern_host_tensor_get(t, k);
    if (!(v == v))
        return 0;
    if (v >= 9.2233720368547758e18)
        return INT64_MAX;
    if (v <= -9.2233720368547758e18)
        return INT64_MIN;
    return (int64_t)v;
}

/* g reversed along axis ax: Slice(g, -1, INT64_MIN, ax, -1) */
static int reverse(ad_ctx *a, int g, int64_t ax)
{
    int64_t st = -1, en = INT64_MIN, step = -1;
    int in[5] = {g, ad_const_i64(a, 1, &st), ad_const_i64(a, 1, &en), ad_const_i64(a, 1, &ax),
                 ad_const_i64(a, 1, &step)};
    return ad_op(a, "Slice", 5, in);
}

/* Slice: the gradient's elements spread back k apart along each axis of step k (spread), then padded with zeros
 * to the operand's shape (a Pad). A negative step -k picks st, st - k, ..., lo = st - (len - 1) k: the same
 * elements as step k from lo in reverse order, so the gradient is first reversed along that axis. */
static int g_slice(ad_ctx *a, const ad_fwd *f)
{
    if (a->opset < 10)
        return ad_fail_node(a, f->index, "Slice before opset 10 (attributes) has no gradient rule");
    ad_shape sx = ad_shape_of(a, f->in[0]), sg = ad_shape_of(a, f->out[0]);
    const tern_host_tensor *c[4] = {NULL, NULL, NULL, NULL}; /* starts, ends, axes, steps */
    for (int k = 0; k < 4; k++) {
        int v = f->n_in > k + 1 ? f->in[k + 1] : -1;
        if (v < 0)
            continue;
        c[k] = tern_graph_value_at(a->g, v)->constant;
        if (!c[k])
            return ad_fail_node(a, f->index, "Slice input %d is not constant (no gradient rule)", k + 1);
    }
    if (!c[0] || !c[1] || c[0]->count != c[1]->count || (c[2] && c[2]->count != c[0]->count) ||
        (c[3] && c[3]->count != c[0]->count))
        return ad_fail_node(a, f->index, "Slice starts/ends/axes/steps of different lengths");
    if (sg.rank != sx.rank)
        return ad_fail_node(a, f->index, "Slice output of rank %d from rank %d", sg.rank, sx.rank);
    int64_t pads[2 * TERN_GRAPH_MAX_RANK] = {0};
    int y = f->dy[0];
    for (size_t k = 0; k < c[0]->count; k++) {
        int64_t ax = c[2] ? const_i64(c[2], k) : (int64_t)k;
        int64_t step = c[3] ? const_i64(c[3], k) : 1;
        if (ax < 0)
            ax += sx.rank;
        if (ax < 0 || ax >= sx.rank)
            return ad_fail_node(a, f->index, "Slice axis outside rank %d", sx.rank);
        if (step == 0)
            return ad_fail_node(a, f->index, "Slice with step 0 on axis %lld", (long long)ax);
        int64_t st = const_i64(c[0], k), en = const_i64(c[1], k);
        int64_t len = graph_slice_len(sx.d[ax], &st, &en, step);
        if (len != sg.d[ax])
            return ad_fail_node(a, f->index, "Slice axis %lld: %lld elements, the output has %lld", (long long)ax,
                                (long long)len, (long long)sg.d[ax]);
        if (len == 0)
            return ad_fail_node(a, f->index, "Slice axis %lld selects nothing", (long long)ax);
        if (step < 0) { /* len >= 1 elements from st down: lo = st + (len - 1) step >= 0, no overflow */
            if (len > 1)
                y = reverse(a, y, ax);
            st = st + (len - 1) * step;
            step = len > 1 ? -step : 1;
        }
        if (step > 1 && len > 1)
            y = spread(a, y, &sg, (int)ax, step);
        pads[ax] = st;
        pads[sx.rank + ax] = sx.d[ax] - st - sg.d[ax];
    }
    y = ad_op2(a, "Pad", y, ad_const_i64(a, 2 * sx.rank, pads));
    ad_accum(a, f->in[0], y);
    return 0;
}

/* Pad (constant mode, pads >= 0): the operand's part of the gradient, a Slice of every axis */
static int g_pad(ad_ctx *a, const ad_fwd *f)
{
    const tern_graph_node *n = &a->g->nodes[f->index];
    const char *mode = tern_graph_attr_string(n, "mode", "constant");
    if (strcmp(mode, "constant"))
        return ad_fail_node(a, f->index, "Pad mode \"%s\" has no gradient rule (constant only)", mode);
    ad_shape sx = ad_shape_of(a, f->in[0]);
    int64_t pads[2 * TERN_GRAPH_MAX_RANK];
    size_t np = 0;
    if (a->opset >= 11) {
        const tern_graph_value *pv = f->n_in > 1 && f->in[1] >= 0 ? tern_graph_value_at(a->g, f->in[1]) : NULL;
        if (!pv || !pv->constant)
            return ad_fail_node(a, f->index, "Pad's pads are not constant (no gradient rule)");
        np = pv->constant->count;
        for (size_t k = 0; k < np && k < 2 * TERN_GRAPH_MAX_RANK; k++)
            pads[k] = (int64_t)tern_host_tensor_get(pv->constant, k);
        if (f->n_in > 3 && f->in[3] >= 0)
            return ad_fail_node(a, f->index, "Pad with an axes input has no gradient rule");
    } else {
        const int64_t *pa = graph_attr_ints(n, "pads", &np);
        for (size_t k = 0; pa && k < np && k < 2 * TERN_GRAPH_MAX_RANK; k++)
            pads[k] = pa[k];
    }
    if ((int)np != 2 * sx.rank)
        return ad_fail_node(a, f->index, "%zu pads for rank %d", np, sx.rank);
    int64_t st[TERN_GRAPH_MAX_RANK], en[TERN_GRAPH_MAX_RANK], ax[TERN_GRAPH_MAX_RANK];
    for (int d = 0; d < sx.rank; d++) {
        if (pads[d] < 0 || pads[sx.rank + d] < 0)
            return ad_fail_node(a, f->index, "negative pads (cropping) have no gradient rule");
        st[d] = pads[d];
        en[d] = pads[d] + sx.d[d];
        ax[d] = d;
    }
    int in[4] = {f->dy[0], ad_const_i64(a, sx.rank, st), ad_const_i64(a, sx.rank, en), ad_const_i64(a, sx.rank, ax)};
    ad_accum(a, f->in[0], ad_op(a, "Slice", 4, in));
    return 0;
}

int grad_layout_rule(int op_id, ad_rule *out)
{
    switch (op_id) {
    case TERN_GOP_RESHAPE:
    case TERN_GOP_FLATTEN:
    case TERN_GOP_SQUEEZE:
    case TERN_GOP_UNSQUEEZE:
        *out = g_view;
        return 1;
    case TERN_GOP_TRANSPOSE:
        *out = g_transpose;
        return 1;
    case TERN_GOP_EXPAND:
        *out = g_expand;
        return 1;
    case TERN_GOP_CONCAT:
        *out = g_concat;
        return 1;
    case TERN_GOP_SPLIT:
        *out = g_split;
        return 1;
    case TERN_GOP_SLICE:
        *out = g_slice;
        return 1;
    case TERN_GOP_PAD:
        *out = g_pad;
        return 1;
    default:
        return 0;
    }
}
