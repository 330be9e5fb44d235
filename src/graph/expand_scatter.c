/* Scatters as one-hot products. ScatterElements (and the older Scatter) along axis a: the indices, axis a moved
 * last, become a one-hot E[..., i, k] = (index[..., i] == k) over the data's length on that axis (OneHot counts a
 * negative index from the end, as ScatterElements does); the scattered values are updates x E (a batched MatMul
 * that sums the updates landing on k), and the writes per position are E summed over i. reduction none keeps the
 * data where nothing was written and takes the scattered value elsewhere, add adds it, mul multiplies the data by
 * the product of the updates landing there (a ReduceProd of E ? update : 1). Updates smaller than the data on the
 * other axes are padded (nothing written there). ScatterND does the same on the data viewed as [P, R]: P the
 * positions its index tuples address (each tuple linearised with the data's strides), R the elements each moves.
 * Duplicate indices under reduction none, which ONNX leaves undefined, give the sum of the updates. ScatterND add
 * of whole rows into a large table (GRAPH_SCATTER_ROWS_MIN, expand.h) is not expanded but lowered as a row scatter
 * by the compiler. */
#include "graph_internal.h"
#include "expand.h"

#include <string.h>

static int reduction_of(xb *b)
{
    const char *r = tern_graph_attr_string(&b->g->nodes[b->node], "reduction", "none");
    int m = !strcmp(r, "none") ? 0 : !strcmp(r, "add") ? 1 : !strcmp(r, "mul") ? 2 : -1;
    if (m < 0)
        xb_fail(b, TERN_ERR_UNSUPPORTED, "reduction \"%s\" is not supported (none, add, mul)", r);
    return m;
}

static int onehot(xb *b, int idx, int64_t depth, tern_elem_type t)
{
    int64_t two = 2;
    float v[2] = {0.0f, 1.0f};
    int ins[3] = {idx, xb_scalar_i(b, TERN_ELEM_INT64, depth), xb_const_f(b, t, 1, &two, v)};
    int y = xb_op(b, "OneHot", 3, ins);
    xb_attr_int(b, "axis", -1);
    return y;
}

/* the final combination of data with the scattered values s (mode 0, 1), the write counts cnt (mode 0) or the
 * products prod minus one (mode 2), all of data's shape and of element type t; writes the node's output */
static void finish(xb *b, tern_elem_type t, int mode, int data, int s, int cnt, int prodm1, int out)
{
    if (mode == 0) {
        int ins[3] = {xb_binary(b, "Greater", cnt, xb_scalar_f(b, t, 0.5f)), s, data};
        xb_op(b, "Where", 3, ins);
    } else if (mode == 1)
        xb_binary(b, "Add", data, s);
    else
        xb_binary(b, "Mul", data, xb_binary(b, "Add", prodm1, xb_scalar_f(b, t, 1.0f)));
    xb_output_to(b, out);
}

static tern_status scatter_elements(xb *b, int *done)
{
    const tern_graph_node *n = &b->g->nodes[b->node];
    int data = xb_in(b, 0), idx = xb_in(b, 1), upd = xb_in(b, 2), out = n->outputs[0];
    const tern_graph_value *dv = xb_val(b, data), *iv = xb_val(b, idx), *uv = xb_val(b, upd);
    int mode = reduction_of(b), r = dv ? dv->rank : 0;
    if (mode < 0)
        return b->st;
    if (!dv || !iv || !uv || iv->rank != r || uv->rank != r || r < 1 || r > TERN_GRAPH_MAX_RANK - 1)
        return xb_fail(b, TERN_ERR_INVALID, "data, indices and updates must have one rank (1 to %d)",
                       TERN_GRAPH_MAX_RANK - 1),
               b->st;
    if (!tern_elem_is_float(dv->type) || uv->type != dv->type)
        return xb_fail(b, TERN_ERR_UNSUPPORTED, "data %s and updates %s: the expansion takes float data",
                       tern_elem_name(dv->type), tern_elem_name(uv->type)),
               b->st;
    int a;
    char why[256];
    if (graph_norm_axis(tern_graph_attr_int(n, "axis", 0), r, &a, why, sizeof why, "axis"))
        return xb_fail(b, TERN_ERR_INVALID, "%s", why), b->st;
    for (int d = 0; d < r; d++)
        if (iv->dims[d] != uv->dims[d] || (d != a && iv->dims[d] > dv->dims[d]))
            return xb_fail(b, TERN_ERR_INVALID, "indices/updates dim %d (%lld, %lld) against data's %lld", d,
                           (long long)iv->dims[d], (long long)uv->dims[d], (long long)dv->dims[d]),
                   b->st;
    int64_t perm[TERN_GRAPH_MAX_RANK], inv[TERN_GRAPH_MAX_RANK], u[TERN_GRAPH_MAX_RANK + 1];
    int64_t Da = dv->dims[a], na = iv->dims[a];
    for (int d = 0, k = 0; d < r; d++)
        if (d != a)
            perm[k++] = d;
    perm[r - 1] = a;
    for (int d = 0; d < r; d++) {
        inv[perm[d]] = d;
        u[d] = iv->dims[perm[d]];
    }
    int it = a == r - 1 ? idx : xb_transpose(b, idx, r, perm), ut = a == r - 1 ? upd : xb_transpose(b, upd, r, perm);
    int E = onehot(b, it, Da, dv->type); /* [u'..., na, Da] */
    int s = -1, cnt = -1, pm = -1;
    int64_t sd[TERN_GRAPH_MAX_RANK + 1], nax = r - 1;
    memcpy(sd, u, sizeof(int64_t) * (size_t)r);
    sd[r - 1] = Da; /* [u'..., Da] */
    if (mode < 2) {
        u[r - 1] = 1;
        u[r] = na;
        int ur = xb_reshape(b, ut, r + 1, u); /* [u'..., 1, na] */
        s = xb_reshape(b, xb_binary(b, "MatMul", ur, E), r, sd);
        if (mode == 0)
            cnt = xb_reduce_sum(b, E, 1, &nax, 0);
    } else {
        u[r - 1] = na;
        u[r] = 1;
        int ur = xb_reshape(b, ut, r + 1, u); /* [u'..., na, 1] */
        int ins[3] = {xb_binary(b, "Greater", E, xb_scalar_f(b, dv->type, 0.5f)), ur, xb_scalar_f(b, dv->type, 1.0f)};
        pm = xb_reduce(b, "ReduceProd", xb_op(b, "Where", 3, ins), 1, &nax, 0);
        pm = xb_binary(b, "Sub", pm, xb_scalar_f(b, dv->type, 1.0f));
    }
    int pieces[3] = {s, cnt, pm}, padded = 0;
    int64_t pads[2 * TERN_GRAPH_MAX_RANK] = {0};
    for (int d = 0; d < r; d++)
        if (d != a && (pads[r + d] = dv->dims[d] - iv->dims[d]) > 0)
            padded = 1;
    for (int k = 0; k < 3; k++) {
        if (pieces[k] < 0)
            continue;
        if (a != r - 1)
            pieces[k] = xb_transpose(b, pieces[k], r, inv);
        if (padded)
            pieces[k] = xb_pad(b, pieces[k], r, pads);
    }
    finish(b, dv->type, mode, data, pieces[0], pieces[1], pieces[2], out);
    if (b->st)
        return b->st;
    *done = 1;
    return TERN_OK;
}

static tern_status scatter_nd(xb *b, int *done)
{
    const tern_graph_node *n = &b->g->nodes[b->node];
    int data = xb_in(b, 0), idx = xb_in(b, 1), upd = xb_in(b, 2), out = n->outputs[0];
    const tern_graph_value *dv = xb_val(b, data), *iv = xb_val(b, idx), *uv = xb_val(b, upd);
    int mode = reduction_of(b);
    if (mode < 0)
        return b->st;
    if (!dv || !iv || !uv || iv->rank < 1 || dv->rank < 1)
        return xb_fail(b, TERN_ERR_INVALID, "data, indices and updates are required"), b->st;
    if (!tern_elem_is_float(dv->type) || uv->type != dv->type)
        return xb_fail(b, TERN_ERR_UNSUPPORTED, "data %s and updates %s: the expansion takes float data",
                       tern_elem_name(dv->type), tern_elem_name(uv->type)),
               b->st;
    int r = dv->rank, q = iv->rank - 1;
    int64_t k = iv->dims[q];
    if (k < 1 || k > r || uv->rank != q + r - (int)k)
        return xb_fail(b, TERN_ERR_INVALID, "index tuples of %lld for data rank %d and updates rank %d", (long long)k,
                       r, uv->rank),
               b->st;
    int64_t Q = 1, P = 1, R = 1;
    for (int d = 0; d < q; d++) {
        if (uv->dims[d] != iv->dims[d])
            return xb_fail(b, TERN_ERR_INVALID, "updates dim %d is %lld, indices' %lld", d, (long long)uv->dims[d],
                           (long long)iv->dims[d]),
                   b->st;
        Q *= iv->dims[d];
    }
    for (int d = 0; d < r; d++) {
        if (d >= k && uv->dims[q + d - k] != dv->dims[d])
            return xb_fail(b, TERN_ERR_INVALID, "updates dim %lld is %lld, data's dim %d is %lld",
                           (long long)(q + d - k), (long long)uv->dims[q + d - k], d, (long long)dv->dims[d]),
                   b->st;
        *(d < k ? &P : &R) *= dv->dims[d];
    }
    if (P > (1 << 16))
        return xb_fail(b, TERN_ERR_UNSUPPORTED, "%lld addressed positions (the one-hot expansion takes up to 65536)",
                       (long long)P),
               b->st;
    int64_t q1 = Q;
    int L;
    if (k == 1)
        L = xb_reshape(b, idx, 1, &q1); /* OneHot counts negative indices from the end */
    else {
        int64_t qk[2] = {Q, k}, dk[TERN_GRAPH_MAX_RANK], stride[TERN_GRAPH_MAX_RANK], one = 1;
        for (int64_t d = k - 1, s = 1; d >= 0; d--) {
            dk[d] = dv->dims[d];
            stride[d] = s;
            s *= dv->dims[d];
        }
        int i2 = xb_reshape(b, idx, 2, qk);
        tern_elem_type it = iv->type;
        int kk = xb_const_i64(b, it, 1, &k, dk);
        int neg[3] = {xb_binary(b, "Less", i2, xb_scalar_i(b, it, 0)), xb_binary(b, "Add", i2, kk), i2};
        i2 = xb_op(b, "Where", 3, neg);
        i2 = xb_binary(b, "Mul", i2, xb_const_i64(b, it, 1, &k, stride));
        L = xb_reduce_sum(b, i2, 1, &one, 0);
    }
    int E = onehot(b, L, P, dv->type); /* [Q, P] */
    int64_t pr[2] = {P, R}, qr[2] = {Q, R}, zero = 0;
    int u2 = xb_reshape(b, upd, 2, qr), d2 = xb_reshape(b, data, 2, pr);
    int s = -1, cnt = -1, pm = -1;
    if (mode < 2) {
        int64_t t2[2] = {1, 0}, p1[2] = {P, 1};
        s = xb_binary(b, "MatMul", xb_transpose(b, E, 2, t2), u2);
        if (mode == 0)
            cnt = xb_reshape(b, xb_reduce_sum(b, E, 1, &zero, 0), 2, p1);
    } else {
        int64_t qp1[3] = {Q, P, 1}, q1r[3] = {Q, 1, R};
        int ins[3] = {xb_binary(b, "Greater", xb_reshape(b, E, 3, qp1), xb_scalar_f(b, dv->type, 0.5f)),
                      xb_reshape(b, u2, 3, q1r), xb_scalar_f(b, dv->type, 1.0f)};
        pm = xb_reduce(b, "ReduceProd", xb_op(b, "Where", 3, ins), 1, &zero, 0);
        pm = xb_binary(b, "Sub", pm, xb_scalar_f(b, dv->type, 1.0f));
    }
    finish(b, dv->type, mode, d2, s, cnt, pm, -1);
    int fin[2] = {b->last >= 0 ? b->g->nodes[b->last].outputs[0] : -1,
                  xb_const_i64(b, TERN_ELEM_INT64, 1, (int64_t[]){r}, dv->dims)};
    xb_op_to(b, "Reshape", 2, fin, out);
    if (b->st)
        return b->st;
    *done = 1;
    return TERN_OK;
}

int graph_scatter_nd_is_rows_add(const tern_graph *g, int i)
{
    const tern_graph_node *n = &g->nodes[i];
    if (n->op_id != TERN_GOP_SCATTER_ND || n->n_inputs < 3 ||
        strcmp(tern_graph_attr_string(n, "reduction", "none"), "add") != 0)
        return 0;
    if (n->inputs[0] < 0 || n->inputs[1] < 0 || n->inputs[2] < 0)
        return 0; /* an omitted input (""): scatter_nd refuses it by name */
    const tern_graph_value *dv = &g->values[n->inputs[0]], *iv = &g->values[n->inputs[1]];
    const tern_graph_value *uv = &g->values[n->inputs[2]];
    return dv->rank >= 1 && iv->rank >= 1 && iv->dims[iv->rank - 1] == 1 && tern_elem_is_float(dv->type) &&
           uv->type == dv->type && dv->dims[0] >= GRAPH_SCATTER_ROWS_MIN && dv->dims[0] <= UINT16_MAX;
}

tern_status graph_expand_scatter(xb *b, int *done)
{
    if (b->g->nodes[b->node].op_id == TERN_GOP_SCATTER_ND) {
        if (graph_scatter_nd_is_rows_add(b->g, b->node))
            return TERN_OK; /* left to the compiler's row scatter (expand.h) */
        return scatter_nd(b, done);
    }
    return scatter_elements(b, done);
}
