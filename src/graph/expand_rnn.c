/* The recurrent ops LSTM, GRU and RNN, unrolled over their (static) sequence length into MatMul, Gather, Slice,
 * elementwise and Concat nodes, following ONNX's equations for each: the input projection X*W^T (+ Wb, and + Rb
 * where the equations add it there) for all steps in one MatMul, then per step the recurrent product H*R^T, the
 * gates, their activations (the activations/activation_alpha/activation_beta attributes, clip on the gates'
 * inputs), peepholes and input_forget (LSTM), linear_before_reset (GRU). Directions forward, reverse and
 * bidirectional; layout 0 ([seq, batch, ...]) and 1 ([batch, seq, ...]); optional initial_h / initial_c; all three
 * outputs. sequence_lens masks each step with Where: a batch row past its length keeps its state and outputs zeros,
 * so the reverse direction starts at each row's own last element, as ONNX defines it. */
#include "graph_internal.h"
#include "expand.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#define MAX_STEPS 4096

typedef struct {
    const char *name;
    float alpha, beta;
    int has_alpha, has_beta;
} act;

/* activation k of the node (its defaults when the attribute leaves it out) */
static void get_act(const tern_graph_node *n, int k, const char *dflt, act *a)
{
    const tern_graph_attr *as = tern_graph_node_attr(n, "activations");
    const tern_graph_attr *al = tern_graph_node_attr(n, "activation_alpha");
    const tern_graph_attr *be = tern_graph_node_attr(n, "activation_beta");
    a->name = as && as->type == TERN_ATTR_STRINGS && (size_t)k < as->n ? as->strings[k] : dflt;
    a->has_alpha = al && al->type == TERN_ATTR_FLOATS && (size_t)k < al->n;
    a->has_beta = be && be->type == TERN_ATTR_FLOATS && (size_t)k < be->n;
    a->alpha = a->has_alpha ? al->floats[k] : 0.0f;
    a->beta = a->has_beta ? be->floats[k] : 0.0f;
}

static int known_act(const char *s)
{
    static const char *const names[] = {"Sigmoid",   "Tanh",     "Relu",        "LeakyRelu", "ThresholdedRelu",
                                        "HardSigmoid", "Elu",    "Softsign",    "Softplus",  "Affine",
                                        "ScaledTanh", NULL};
    for (int k = 0; names[k]; k++)
        if (!strcasecmp(s, names[k]))
            return 1;
    return 0;
}

static int apply_act(xb *b, const act *a, int x, tern_elem_type t)
{
    const char *s = a->name;
    if (!strcasecmp(s, "Sigmoid"))
        return xb_unary(b, "Sigmoid", x);
    if (!strcasecmp(s, "Tanh"))
        return xb_unary(b, "Tanh", x);
    if (!strcasecmp(s, "Relu"))
        return xb_unary(b, "Relu", x);
    if (!strcasecmp(s, "Softsign"))
        return xb_unary(b, "Softsign", x);
    if (!strcasecmp(s, "Softplus"))
        return xb_unary(b, "Softplus", x);
    if (!strcasecmp(s, "LeakyRelu") || !strcasecmp(s, "ThresholdedRelu") || !strcasecmp(s, "Elu")) {
        int y = xb_unary(b, !strcasecmp(s, "LeakyRelu") ? "LeakyRelu" : !strcasecmp(s, "Elu") ? "Elu"
                                                                                                : "ThresholdedRelu",
                         x);
        if (a->has_alpha)
            xb_attr_float(b, "alpha", a->alpha);
        return y;
    }
    if (!strcasecmp(s, "HardSigmoid")) {
        int y = xb_unary(b, "HardSigmoid", x);
        if (a->has_alpha)
            xb_attr_float(b, "alpha", a->alpha);
        if (a->has_beta)
            xb_attr_float(b, "beta", a->beta);
        return y;
    }
    if (!strcasecmp(s, "Affine")) /* alpha * x + beta */
        return xb_binary(b, "Add", xb_binary(b, "Mul", x, xb_scalar_f(b, t, a->has_alpha ? a->alpha : 1.0f)),
                         xb_scalar_f(b, t, a->has_beta ? a->beta : 0.0f));
    /* ScaledTanh: alpha * tanh(beta * x) */
    int y = xb_unary(b, "Tanh", xb_binary(b, "Mul", x, xb_scalar_f(b, t, a->has_beta ? a->beta : 1.0f)));
    return xb_binary(b, "Mul", y, xb_scalar_f(b, t, a->has_alpha ? a->alpha : 1.0f));
}

/* pre-activation clip, when the node asks for one */
static int clipped(xb *b, int x, float clip)
{
    return clip > 0 ? xb_clip(b, x, -clip, clip) : x;
}

tern_status graph_expand_rnn(xb *b, int *done)
{
    const tern_graph_node *n = &b->g->nodes[b->node];
    int kind = n->op_id == TERN_GOP_LSTM ? 0 : n->op_id == TERN_GOP_GRU ? 1 : 2;
    int G = kind == 0 ? 4 : kind == 1 ? 3 : 1, nact = kind == 0 ? 3 : kind == 1 ? 2 : 1;
    int X = xb_in(b, 0), W = xb_in(b, 1), R = xb_in(b, 2), Bi = xb_in(b, 3), SL = xb_in(b, 4), H0 = xb_in(b, 5);
    int C0 = kind == 0 ? xb_in(b, 6) : -1, P = kind == 0 ? xb_in(b, 7) : -1;
    if (X < 0 || W < 0 || R < 0)
        return xb_fail(b, TERN_ERR_INVALID, "X, W and R are required"), b->st;
    const tern_graph_value *xv = xb_val(b, X), *wv = xb_val(b, W), *rv = xb_val(b, R);
    tern_elem_type T = xv->type;
    if (!tern_elem_is_float(T) || wv->type != T || rv->type != T)
        return xb_fail(b, TERN_ERR_INVALID, "X %s, W %s, R %s: expected one float type", tern_elem_name(T),
                       tern_elem_name(wv->type), tern_elem_name(rv->type)),
               b->st;
    const char *dir = tern_graph_attr_string(n, "direction", "forward");
    int ndir = !strcmp(dir, "bidirectional") ? 2 : 1, reverse = !strcmp(dir, "reverse");
    if (ndir == 1 && !reverse && strcmp(dir, "forward"))
        return xb_fail(b, TERN_ERR_INVALID, "direction \"%s\" is not forward, reverse or bidirectional", dir), b->st;
    int layout = (int)tern_graph_attr_int(n, "layout", 0);
    if (layout != 0 && layout != 1)
        return xb_fail(b, TERN_ERR_INVALID, "layout %d is not 0 or 1", layout), b->st;
    if (xv->rank != 3 || wv->rank != 3 || rv->rank != 3)
        return xb_fail(b, TERN_ERR_INVALID, "X, W and R ranks %d, %d, %d: expected 3", xv->rank, wv->rank, rv->rank),
               b->st;
    int64_t S = xv->dims[layout ? 1 : 0], Bn = xv->dims[layout ? 0 : 1], I = xv->dims[2];
    int64_t H = tern_graph_attr_int(n, "hidden_size", rv->dims[2]);
    if (wv->dims[0] != ndir || wv->dims[1] != G * H || wv->dims[2] != I || rv->dims[0] != ndir ||
        rv->dims[1] != G * H || rv->dims[2] != H)
        return xb_fail(b, TERN_ERR_INVALID, "W [%lld, %lld, %lld] and R [%lld, %lld, %lld] do not match %d "
                       "direction(s), %d gate(s), hidden_size %lld and input size %lld",
                       (long long)wv->dims[0], (long long)wv->dims[1], (long long)wv->dims[2], (long long)rv->dims[0],
                       (long long)rv->dims[1], (long long)rv->dims[2], ndir, G, (long long)H, (long long)I),
               b->st;
    if (S < 1 || S > MAX_STEPS)
        return xb_fail(b, TERN_ERR_UNSUPPORTED, "sequence length %lld (the unrolled expansion takes 1 to %d)",
                       (long long)S, MAX_STEPS),
               b->st;
    if (Bn < 1 || H < 1)
        return xb_fail(b, TERN_ERR_UNSUPPORTED, "batch %lld, hidden size %lld: empty recurrences are not expanded",
                       (long long)Bn, (long long)H),
               b->st;
    int64_t sdims[3] = {ndir, Bn, H}; /* initial_h / initial_c in layout 0 */
    const int st_in[2] = {H0, C0};
    for (int k = 0; k < 2; k++) {
        const tern_graph_value *v = xb_val(b, st_in[k]);
        if (!v)
            continue;
        int ok = v->rank == 3 && v->type == T;
        for (int d = 0; ok && d < 3; d++)
            ok = v->dims[d] == (layout ? (int64_t[]){Bn, ndir, H}[d] : sdims[d]);
        if (!ok)
            return xb_fail(b, TERN_ERR_INVALID, "%s must be %s [%lld, %lld, %lld]", k ? "initial_c" : "initial_h",
                           tern_elem_name(T), (long long)(layout ? Bn : ndir), (long long)(layout ? ndir : Bn),
                           (long long)H),
                   b->st;
    }
    if (Bi >= 0 && (xb_val(b, Bi)->rank != 2 || xb_val(b, Bi)->dims[0] != ndir || xb_val(b, Bi)->dims[1] != 2 * G * H))
        return xb_fail(b, TERN_ERR_INVALID, "B must be [%d, %lld]", ndir, (long long)(2 * G * H)), b->st;
    if (P >= 0 && (xb_val(b, P)->rank != 2 || xb_val(b, P)->dims[0] != ndir || xb_val(b, P)->dims[1] != 3 * H))
        return xb_fail(b, TERN_ERR_INVALID, "P must be [%d, %lld]", ndir, (long long)(3 * H)), b->st;
    /* sequence_lens: a constant covering every step needs no mask */
    int use_mask = 0;
    if (SL >= 0) {
        const tern_graph_value *sv = xb_val(b, SL);
        if (sv->rank != 1 || sv->dims[0] != Bn || (sv->type != TERN_ELEM_INT32 && sv->type != TERN_ELEM_INT64))
            return xb_fail(b, TERN_ERR_INVALID, "sequence_lens must be int32 [%lld]", (long long)Bn), b->st;
        use_mask = 1;
        if (sv->constant) {
            use_mask = 0;
            for (size_t e = 0; e < sv->constant->count; e++) {
                if (sv->constant->i[e] < 0 || sv->constant->i[e] > S)
                    return xb_fail(b, TERN_ERR_INVALID, "sequence_lens[%zu] = %lld outside [0, %lld]", e,
                                   (long long)sv->constant->i[e], (long long)S),
                           b->st;
                use_mask |= sv->constant->i[e] < S;
            }
        }
    }
    act acts[2][3];
    static const char *const dflt[3][3] = {{"Sigmoid", "Tanh", "Tanh"}, {"Sigmoid", "Tanh", ""}, {"Tanh", "", ""}};
    for (int d = 0; d < ndir; d++)
        for (int k = 0; k < nact; k++) {
            get_act(n, d * nact + k, dflt[kind][k], &acts[d][k]);
            if (!known_act(acts[d][k].name))
                return xb_fail(b, TERN_ERR_UNSUPPORTED, "activation \"%s\" is not supported", acts[d][k].name),
                       b->st;
        }
    float clip = tern_graph_attr_float(n, "clip", 0.0f);
    if (tern_graph_node_attr(n, "clip") && !(clip > 0))
        return xb_fail(b, TERN_ERR_INVALID, "clip %g must be positive", (double)clip), b->st;
    int input_forget = kind == 0 && tern_graph_attr_int(n, "input_forget", 0) != 0;
    int lbr = kind == 1 && tern_graph_attr_int(n, "linear_before_reset", 0) != 0;

    /* layout 1 moves to layout 0 first */
    if (layout) {
        int64_t p3[3] = {1, 0, 2};
        X = xb_transpose(b, X, 3, p3);
        if (H0 >= 0)
            H0 = xb_transpose(b, H0, 3, p3);
        if (C0 >= 0)
            C0 = xb_transpose(b, C0, 3, p3);
    }
    int y_out = n->n_outputs > 0 ? n->outputs[0] : -1, yh_out = n->n_outputs > 1 ? n->outputs[1] : -1;
    int yc_out = kind == 0 && n->n_outputs > 2 ? n->outputs[2] : -1;
    int64_t bh[2] = {Bn, H}, col[2] = {Bn, 1};
    int zeros = xb_const_f(b, T, 2, bh, NULL), zero = xb_scalar_f(b, T, 0.0f), one = xb_scalar_f(b, T, 1.0f);
    int ydir[2], hdir[2], cdir[2];
    int64_t t2[2] = {1, 0};
    for (int d = 0; d < ndir && !b->st; d++) {
        const act *a = acts[d];
        int back = reverse || d == 1;
        int Wt = xb_transpose(b, xb_gather_index(b, W, 0, d), 2, t2); /* [I, G*H] */
        int Rt = xb_transpose(b, xb_gather_index(b, R, 0, d), 2, t2); /* [H, G*H] */
        int xw = xb_binary(b, "MatMul", X, Wt);                       /* [S, B, G*H] */
        int Rb = -1, Rbh = -1, Rt_zr = Rt, Rt_h = -1;
        if (Bi >= 0) {
            int bd = xb_gather_index(b, Bi, 0, d);
            int wb = xb_slice(b, bd, 0, 0, G * H);
            Rb = xb_slice(b, bd, 0, G * H, 2 * G * H);
            if (kind == 1 && !lbr) { /* GRU: Rbh stays with the reset-gated product; Rbz, Rbr join the input's */
                Rbh = xb_slice(b, Rb, 0, 2 * H, 3 * H);
                int zr = xb_slice(b, Rb, 0, 0, 2 * H);
                int ins[2] = {zr, xb_const_f(b, T, 1, &H, NULL)};
                wb = xb_binary(b, "Add", wb, xb_concat(b, 2, ins, 0));
                Rb = -1;
            } else if (kind != 1) {
                wb = xb_binary(b, "Add", wb, Rb);
                Rb = -1;
            }
            xw = xb_binary(b, "Add", xw, wb);
        }
        if (kind == 1 && !lbr) {
            Rt_zr = xb_slice(b, Rt, 1, 0, 2 * H);
            Rt_h = xb_slice(b, Rt, 1, 2 * H, 3 * H);
        }
        int pi = -1, po = -1, pf = -1;
        if (P >= 0) {
            int pd = xb_gather_index(b, P, 0, d);
            pi = xb_slice(b, pd, 0, 0, H);
            po = xb_slice(b, pd, 0, H, 2 * H);
            pf = xb_slice(b, pd, 0, 2 * H, 3 * H);
        }
        int h = H0 >= 0 ? xb_gather_index(b, H0, 0, d) : zeros;
        int c = kind == 0 ? (C0 >= 0 ? xb_gather_index(b, C0, 0, d) : zeros) : -1;
        int ys[MAX_STEPS];
        for (int64_t s = 0; s < S && !b->st; s++) {
            int64_t t = back ? S - 1 - s : s;
            int xt = xb_gather_index(b, xw, 0, t); /* [B, G*H] */
            int hn, cn = -1;
            if (kind == 0) {
                int gts = xb_binary(b, "Add", xt, xb_binary(b, "MatMul", h, Rt));
                int gi = xb_slice(b, gts, 1, 0, H), go = xb_slice(b, gts, 1, H, 2 * H);
                int gf = xb_slice(b, gts, 1, 2 * H, 3 * H), gc = xb_slice(b, gts, 1, 3 * H, 4 * H);
                if (pi >= 0) {
                    gi = xb_binary(b, "Add", gi, xb_binary(b, "Mul", pi, c));
                    gf = xb_binary(b, "Add", gf, xb_binary(b, "Mul", pf, c));
                }
                int it = apply_act(b, &a[0], clipped(b, gi, clip), T);
                int ft = input_forget ? xb_binary(b, "Sub", one, it) : apply_act(b, &a[0], clipped(b, gf, clip), T);
                int ct = apply_act(b, &a[1], clipped(b, gc, clip), T);
                cn = xb_binary(b, "Add", xb_binary(b, "Mul", ft, c), xb_binary(b, "Mul", it, ct));
                if (po >= 0)
                    go = xb_binary(b, "Add", go, xb_binary(b, "Mul", po, cn));
                int ot = apply_act(b, &a[0], clipped(b, go, clip), T);
                hn = xb_binary(b, "Mul", ot, apply_act(b, &a[2], cn, T));
            } else if (kind == 1) {
                int hr = xb_binary(b, "MatMul", h, Rt_zr);
                if (Rb >= 0)
                    hr = xb_binary(b, "Add", hr, Rb);
                int zt = apply_act(b, &a[0],
                                   clipped(b, xb_binary(b, "Add", xb_slice(b, xt, 1, 0, H), xb_slice(b, hr, 1, 0, H)),
                                           clip),
                                   T);
                int rt = apply_act(
                    b, &a[0],
                    clipped(b, xb_binary(b, "Add", xb_slice(b, xt, 1, H, 2 * H), xb_slice(b, hr, 1, H, 2 * H)), clip),
                    T);
                int rec;
                if (lbr)
                    rec = xb_binary(b, "Mul", rt, xb_slice(b, hr, 1, 2 * H, 3 * H));
                else {
                    rec = xb_binary(b, "MatMul", xb_binary(b, "Mul", rt, h), Rt_h);
                    if (Rbh >= 0)
                        rec = xb_binary(b, "Add", rec, Rbh);
                }
                int ht = apply_act(b, &a[1], clipped(b, xb_binary(b, "Add", xb_slice(b, xt, 1, 2 * H, 3 * H), rec), clip),
                                   T);
                hn = xb_binary(b, "Add", xb_binary(b, "Mul", xb_binary(b, "Sub", one, zt), ht),
                               xb_binary(b, "Mul", zt, h));
            } else {
                int pre = xb_binary(b, "Add", xt, xb_binary(b, "MatMul", h, Rt));
                hn = apply_act(b, &a[0], clipped(b, pre, clip), T);
            }
            int yt = hn;
            if (use_mask) { /* rows whose sequence ended keep their state and output zeros */
                tern_elem_type lt = xb_val(b, SL)->type;
                int m = xb_reshape(b, xb_binary(b, "Less", xb_scalar_i(b, lt, t), SL), 2, col);
                int wy[3] = {m, hn, zero}, wh[3] = {m, hn, h};
                yt = xb_op(b, "Where", 3, wy);
                hn = xb_op(b, "Where", 3, wh);
                if (cn >= 0) {
                    int wc[3] = {m, cn, c};
                    cn = xb_op(b, "Where", 3, wc);
                }
            }
            h = hn;
            c = cn;
            if (y_out >= 0)
                ys[t] = xb_reshape(b, yt, 4, (int64_t[]){1, 1, Bn, H});
        }
        if (y_out >= 0)
            ydir[d] = xb_concat(b, (int)S, ys, 0);
        hdir[d] = xb_reshape(b, h, 3, (int64_t[]){1, Bn, H});
        if (kind == 0)
            cdir[d] = xb_reshape(b, c, 3, (int64_t[]){1, Bn, H});
    }
    if (b->st)
        return b->st;
    /* outputs, in the node's layout; the last node written for each goes to the node's value */
    int64_t p4[4] = {2, 0, 1, 3}, p3[3] = {1, 0, 2};
    struct {
        int out, *parts, axis, rank;
        const int64_t *perm;
    } outs[3] = {{y_out, ydir, 1, 4, p4}, {yh_out, hdir, 0, 3, p3}, {yc_out, cdir, 0, 3, p3}};
    for (int k = 0; k < 3; k++) {
        if (outs[k].out < 0)
            continue;
        int v = xb_concat(b, ndir, outs[k].parts, outs[k].axis);
        if (layout)
            v = xb_transpose(b, v, outs[k].rank, outs[k].perm);
        if (b->st)
            return b->st;
        if (b->last >= 0 && b->g->nodes[b->last].outputs[0] == v)
            xb_output_to(b, outs[k].out);
        else {
            int ii[2] = {v, xb_const_i64(b, TERN_ELEM_INT64, 1, (int64_t[]){outs[k].rank},
                                        layout ? (k ? (int64_t[]){Bn, ndir, H, 0} : (int64_t[]){Bn, S, ndir, H})
                                               : (k ? (int64_t[]){ndir, Bn, H, 0} : (int64_t[]){S, ndir, Bn, H}))};
            xb_op_to(b, "Reshape", 2, ii, outs[k].out);
        }
    }
    if (b->st)
        return b->st;
    *done = 1;
    return TERN_OK;
}

/* ReverseSequence: output[.., t, .., b, ..] = input[.., len_b - 1 - t, .., b, ..] for t < len_b, else input's own
 * element: the source index along the time axis, Where(t < len, len - 1 - t, t) over [time, batch], broadcast to
 * the input's shape and gathered (GatherElements) along the time axis. */
tern_status graph_expand_reverse_sequence(xb *b, int *done)
{
    const tern_graph_node *n = &b->g->nodes[b->node];
    int x = xb_in(b, 0), sl = xb_in(b, 1);
    const tern_graph_value *xv = xb_val(b, x), *lv = xb_val(b, sl);
    if (!xv || !lv)
        return xb_fail(b, TERN_ERR_INVALID, "input and sequence_lens are required"), b->st;
    int r = xv->rank, ta, ba;
    char why[256];
    if (r < 2 || graph_norm_axis(tern_graph_attr_int(n, "time_axis", 0), r, &ta, why, sizeof why, "time_axis") ||
        graph_norm_axis(tern_graph_attr_int(n, "batch_axis", 1), r, &ba, why, sizeof why, "batch_axis") || ta == ba ||
        (ta > 1 || ba > 1))
        return xb_fail(b, TERN_ERR_INVALID, "input rank %d with time_axis %lld and batch_axis %lld: expected 0 and 1 in "
                       "either order", r, (long long)tern_graph_attr_int(n, "time_axis", 0),
                       (long long)tern_graph_attr_int(n, "batch_axis", 1)),
               b->st;
    int64_t T = xv->dims[ta], B = xv->dims[ba];
    if (lv->rank != 1 || lv->dims[0] != B || (lv->type != TERN_ELEM_INT64 && lv->type != TERN_ELEM_INT32))
        return xb_fail(b, TERN_ERR_INVALID, "sequence_lens must be int64 [%lld]", (long long)B), b->st;
    if (T > (1 << 20))
        return xb_fail(b, TERN_ERR_UNSUPPORTED, "time axis of %lld", (long long)T), b->st;
    int64_t td[TERN_GRAPH_MAX_RANK], ld[TERN_GRAPH_MAX_RANK], ts[1 << 10], *tv = ts;
    for (int d = 0; d < r; d++) {
        td[d] = d == ta ? T : 1;
        ld[d] = d == ba ? B : 1;
    }
    int t;
    if (T <= (int64_t)(sizeof ts / sizeof ts[0])) {
        for (int64_t k = 0; k < T; k++)
            tv[k] = k;
        t = xb_const_i64(b, lv->type, r, td, tv);
    } else { /* long axes: fill in place */
        t = xb_const_i64(b, lv->type, r, td, NULL);
        if (t >= 0)
            for (int64_t k = 0; k < T; k++)
                b->g->values[t].constant->i[k] = k;
    }
    int lens = xb_reshape(b, sl, r, ld);
    int rev = xb_binary(b, "Sub", xb_binary(b, "Sub", lens, xb_scalar_i(b, lv->type, 1)), t);
    int wi[3] = {xb_binary(b, "Less", t, lens), rev, t};
    int idx = xb_op(b, "Where", 3, wi);
    int64_t rr = r;
    int ei[2] = {idx, xb_const_i64(b, TERN_ELEM_INT64, 1, &rr, xv->dims)};
    idx = xb_op(b, "Expand", 2, ei);
    int gi[2] = {x, idx};
    xb_op_to(b, "GatherElements", 2, gi, n->n_outputs > 0 ? n->outputs[0] : -1);
    xb_attr_int(b, "axis", ta);
    if (b->st)
        return b->st;
    *done = 1;
    return TERN_OK;
}
