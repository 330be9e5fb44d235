/* Einsum as transposes, reshapes, batched MatMuls and ReduceSums. The equation is parsed into one label per axis
 * (letters, and the ellipsis' axes right-aligned across operands as numpy broadcasts them); the output is the
 * explicit one after "->", else the ellipsis then the letters used exactly once, in ASCII order. Each operand first
 * loses its repeated labels (a diagonal: multiply by an identity mask, sum one of the two axes), its size-1 axes
 * that other operands broadcast (a reshape: the product is constant along them), and the labels nothing else
 * needs (ReduceSum). Operands then combine left to right: labels in both that the output or a later operand needs
 * are batch axes, labels in both needed nowhere else are contracted, the rest are the rows of one side and the
 * columns of the other: [batch, M, K] x [batch, K, N] -> [batch, M, N]. A transpose puts the result in the output's
 * order. */
#include "graph_internal.h"
#include "expand.h"

#include <string.h>

#define MAXOP 8
#define NLAB 256 /* letters keep their ASCII code, ellipsis axis j is 128 + j */

typedef struct {
    int v;
    int n;
    int lab[TERN_GRAPH_MAX_RANK];
    int64_t dim[TERN_GRAPH_MAX_RANK];
} term;

static int has(const term *t, int l)
{
    for (int k = 0; k < t->n; k++)
        if (t->lab[k] == l)
            return 1;
    return 0;
}

/* sums out axes of t whose label keep[] does not mark */
static void sum_unneeded(xb *b, term *t, const unsigned char *keep)
{
    int64_t axes[TERN_GRAPH_MAX_RANK];
    int na = 0, m = 0;
    for (int k = 0; k < t->n; k++)
        if (!keep[t->lab[k]])
            axes[na++] = k;
    if (!na)
        return;
    t->v = xb_reduce_sum(b, t->v, na, axes, 0);
    for (int k = 0; k < t->n; k++)
        if (keep[t->lab[k]]) {
            t->lab[m] = t->lab[k];
            t->dim[m++] = t->dim[k];
        }
    t->n = m;
}

/* transposes t to the label order want[0..n) (a permutation of its labels) */
static void reorder(xb *b, term *t, const int *want)
{
    int64_t perm[TERN_GRAPH_MAX_RANK];
    int64_t dims[TERN_GRAPH_MAX_RANK];
    int ident = 1;
    for (int k = 0; k < t->n; k++) {
        for (int q = 0; q < t->n; q++)
            if (t->lab[q] == want[k])
                perm[k] = q;
        ident &= perm[k] == k;
        dims[k] = t->dim[perm[k]];
    }
    if (ident)
        return;
    t->v = xb_transpose(b, t->v, t->n, perm);
    for (int k = 0; k < t->n; k++) {
        t->lab[k] = want[k];
        t->dim[k] = dims[k];
    }
}

static int64_t prod(const term *t, int from, int to)
{
    int64_t p = 1;
    for (int k = from; k < to; k++)
        p *= t->dim[k];
    return p;
}

static void combine(xb *b, term *A, term *B, const unsigned char *later)
{
    int bat[TERN_GRAPH_MAX_RANK], con[TERN_GRAPH_MAX_RANK], ao[TERN_GRAPH_MAX_RANK], bo[TERN_GRAPH_MAX_RANK];
    int nb = 0, nc = 0, na = 0, nbo = 0;
    for (int k = 0; k < A->n; k++) {
        int l = A->lab[k];
        if (has(B, l) && later[l])
            bat[nb++] = l;
        else if (has(B, l))
            con[nc++] = l;
        else
            ao[na++] = l;
    }
    for (int k = 0; k < B->n; k++)
        if (!has(A, B->lab[k]))
            bo[nbo++] = B->lab[k];
    if (nb + na + nbo > TERN_GRAPH_MAX_RANK) {
        xb_fail(b, TERN_ERR_UNSUPPORTED, "an intermediate product has %d axes (at most %d)", nb + na + nbo,
                TERN_GRAPH_MAX_RANK);
        return;
    }
    int wa[TERN_GRAPH_MAX_RANK], wb[TERN_GRAPH_MAX_RANK], n = 0;
    for (int k = 0; k < nb; k++)
        wa[n++] = bat[k];
    for (int k = 0; k < na; k++)
        wa[n++] = ao[k];
    for (int k = 0; k < nc; k++)
        wa[n++] = con[k];
    n = 0;
    for (int k = 0; k < nb; k++)
        wb[n++] = bat[k];
    for (int k = 0; k < nc; k++)
        wb[n++] = con[k];
    for (int k = 0; k < nbo; k++)
        wb[n++] = bo[k];
    reorder(b, A, wa);
    reorder(b, B, wb);
    int64_t bt = prod(A, 0, nb), M = prod(A, nb, nb + na), K = prod(A, nb + na, A->n), N = prod(B, nb + nc, B->n);
    int64_t sa[3] = {bt, M, K}, sb[3] = {bt, K, N};
    int r3 = nb ? 3 : 2;
    int a3 = xb_reshape(b, A->v, r3, nb ? sa : sa + 1), b3 = xb_reshape(b, B->v, r3, nb ? sb : sb + 1);
    int mm = xb_binary(b, "MatMul", a3, b3);
    term R = {0};
    for (int k = 0; k < nb + na; k++) {
        R.lab[R.n] = A->lab[k];
        R.dim[R.n++] = A->dim[k];
    }
    for (int k = nb + nc; k < B->n; k++) {
        R.lab[R.n] = B->lab[k];
        R.dim[R.n++] = B->dim[k];
    }
    R.v = xb_reshape(b, mm, R.n, R.dim);
    *A = R;
}

tern_status graph_expand_einsum(xb *b, int *done)
{
    const tern_graph_node *n = &b->g->nodes[b->node];
    const char *eq = tern_graph_attr_string(n, "equation", NULL);
    if (!eq)
        return xb_fail(b, TERN_ERR_INVALID, "attribute \"equation\" is required"), b->st;
    int nop = n->n_inputs;
    if (nop < 1 || nop > MAXOP)
        return xb_fail(b, TERN_ERR_UNSUPPORTED, "%d operands (1 to %d supported)", nop, MAXOP), b->st;
    char s[512];
    size_t sl = 0;
    for (const char *p = eq; *p && sl + 1 < sizeof s; p++)
        if (*p != ' ')
            s[sl++] = *p;
    s[sl] = '\0';
    char *arrow = strstr(s, "->");
    term t[MAXOP];
    int ell[MAXOP], nell = 0; /* ellipsis axes per operand; the most any operand has */
    const char *p = s;
    for (int k = 0; k < nop; k++) {
        const tern_graph_value *v = xb_val(b, xb_in(b, k));
        if (!v)
            return xb_fail(b, TERN_ERR_INVALID, "operand %d is missing", k), b->st;
        t[k].v = xb_in(b, k);
        t[k].n = 0;
        int letters = 0, dots = 0;
        const char *q = p;
        for (; *q && *q != ',' && (!arrow || q < arrow); q++)
            if (*q == '.')
                dots++;
            else if ((*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z'))
                letters++;
            else
                return xb_fail(b, TERN_ERR_INVALID, "equation \"%s\": character '%c' is not a label", eq, *q), b->st;
        if ((dots != 0 && dots != 3) || (dots == 3 && !strstr(p, "...")) || letters > v->rank ||
            (!dots && letters != v->rank))
            return xb_fail(b, TERN_ERR_INVALID, "equation \"%s\": operand %d has %d labels for rank %d", eq, k,
                           letters, v->rank),
                   b->st;
        ell[k] = dots ? v->rank - letters : 0;
        nell = ell[k] > nell ? ell[k] : nell;
        int ax = 0;
        for (const char *c = p; c < q; c++) {
            if (*c == '.') {
                for (int j = 0; j < ell[k]; j++, ax++)
                    t[k].lab[t[k].n++] = -1 - j; /* fixed up once every operand's ellipsis length is known */
                c += 2;
                continue;
            }
            t[k].lab[t[k].n++] = (unsigned char)*c;
            ax++;
        }
        for (int d = 0; d < v->rank; d++)
            t[k].dim[d] = v->dims[d];
        if (*q == ',' && k + 1 == nop)
            return xb_fail(b, TERN_ERR_INVALID, "equation \"%s\" has more terms than the %d operands", eq, nop), b->st;
        if (*q != ',' && k + 1 < nop)
            return xb_fail(b, TERN_ERR_INVALID, "equation \"%s\" has fewer terms than the %d operands", eq, nop), b->st;
        p = *q == ',' ? q + 1 : q;
    }
    /* ellipsis axes right-aligned: operand k's axis j is ellipsis position nell - ell[k] + j */
    for (int k = 0; k < nop; k++)
        for (int d = 0; d < t[k].n; d++)
            if (t[k].lab[d] < 0)
                t[k].lab[d] = 128 + nell - ell[k] + (-1 - t[k].lab[d]);
    int count[NLAB] = {0};
    int64_t size[NLAB];
    for (int l = 0; l < NLAB; l++)
        size[l] = 1;
    for (int k = 0; k < nop; k++)
        for (int d = 0; d < t[k].n; d++) {
            int l = t[k].lab[d];
            count[l]++;
            if (t[k].dim[d] != 1) {
                if (size[l] != 1 && size[l] != t[k].dim[d])
                    return xb_fail(b, TERN_ERR_INVALID, "equation \"%s\": label '%c' is %lld and %lld long", eq,
                                   l < 128 ? l : '.', (long long)size[l], (long long)t[k].dim[d]),
                           b->st;
                size[l] = t[k].dim[d];
            }
        }
    int out[TERN_GRAPH_MAX_RANK + 1], no = 0;
    unsigned char in_out[NLAB] = {0};
    if (arrow) {
        for (const char *c = arrow + 2; *c; c++) {
            int l;
            if (*c == '.') {
                if (strncmp(c, "...", 3))
                    return xb_fail(b, TERN_ERR_INVALID, "equation \"%s\": a lone '.' in the output", eq), b->st;
                for (int j = 0; j < nell && no <= TERN_GRAPH_MAX_RANK; j++)
                    out[no++] = 128 + j, in_out[128 + j] = 1;
                c += 2;
                continue;
            }
            l = (unsigned char)*c;
            if (!((l >= 'a' && l <= 'z') || (l >= 'A' && l <= 'Z')) || !count[l] || in_out[l] ||
                no == TERN_GRAPH_MAX_RANK)
                return xb_fail(b, TERN_ERR_INVALID, "equation \"%s\": output label '%c' is not an input label once",
                               eq, *c),
                       b->st;
            out[no++] = l;
            in_out[l] = 1;
        }
    } else {
        for (int j = 0; j < nell; j++)
            out[no++] = 128 + j, in_out[128 + j] = 1;
        for (int l = 0; l < 128; l++)
            if (count[l] == 1 && no < TERN_GRAPH_MAX_RANK)
                out[no++] = l, in_out[l] = 1;
    }
    if (no > TERN_GRAPH_MAX_RANK)
        return xb_fail(b, TERN_ERR_INVALID, "equation \"%s\": output rank above %d", eq, TERN_GRAPH_MAX_RANK), b->st;
    /* per operand: diagonals, broadcast size-1 axes, labels needed nowhere else */
    for (int k = 0; k < nop && !b->st; k++) {
        term *a = &t[k];
        for (int pi = 0; pi < a->n; pi++)
            for (int qi = pi + 1; qi < a->n; qi++) {
                if (a->lab[qi] != a->lab[pi])
                    continue;
                int64_t D = a->dim[pi];
                if (a->dim[qi] != D)
                    return xb_fail(b, TERN_ERR_INVALID, "equation \"%s\": repeated label '%c' of operand %d is %lld "
                                   "and %lld long", eq, a->lab[pi], k, (long long)D, (long long)a->dim[qi]),
                           b->st;
                if (D * D > (1 << 24))
                    return xb_fail(b, TERN_ERR_UNSUPPORTED, "equation \"%s\": diagonal of %lld x %lld", eq,
                                   (long long)D, (long long)D),
                           b->st;
                int64_t md[TERN_GRAPH_MAX_RANK];
                for (int d = 0; d < a->n; d++)
                    md[d] = d == pi || d == qi ? D : 1;
                int mask = xb_const_f(b, xb_val(b, xb_in(b, k))->type, a->n, md, NULL);
                if (mask >= 0)
                    for (int64_t e = 0; e < D; e++)
                        b->g->values[mask].constant->f[e * D + e] = 1.0f;
                a->v = xb_binary(b, "Mul", a->v, mask);
                int64_t ax = qi;
                a->v = xb_reduce_sum(b, a->v, 1, &ax, 0);
                for (int d = qi; d + 1 < a->n; d++) {
                    a->lab[d] = a->lab[d + 1];
                    a->dim[d] = a->dim[d + 1];
                }
                a->n--;
                count[a->lab[pi]]--;
                qi = pi;
            }
        int m = 0, changed = 0;
        for (int d = 0; d < a->n; d++) {
            if (a->dim[d] == 1 && size[a->lab[d]] != 1) {
                count[a->lab[d]]--;
                changed = 1;
                continue;
            }
            a->lab[m] = a->lab[d];
            a->dim[m++] = a->dim[d];
        }
        if (changed) {
            a->n = m;
            a->v = xb_reshape(b, a->v, a->n, a->dim);
        }
    }
    /* left to right; later: the labels the output or an operand after k needs */
    for (int k = 0; k < nop && !b->st; k++) {
        unsigned char later[NLAB], keep[NLAB];
        memcpy(later, in_out, sizeof later);
        for (int q = k + 1; q < nop; q++)
            for (int d = 0; d < t[q].n; d++)
                later[t[q].lab[d]] = 1;
        memcpy(keep, later, sizeof keep);
        if (k == 0) {
            sum_unneeded(b, &t[0], keep);
            continue;
        }
        for (int d = 0; d < t[0].n; d++) /* what the product so far shares with operand k is contracted there */
            keep[t[0].lab[d]] = 1;
        sum_unneeded(b, &t[k], keep);
        combine(b, &t[0], &t[k], later);
    }
    if (b->st)
        return b->st;
    sum_unneeded(b, &t[0], in_out);
    int want[TERN_GRAPH_MAX_RANK], nw = 0;
    int64_t odims[TERN_GRAPH_MAX_RANK];
    for (int k = 0; k < no; k++) {
        odims[k] = size[out[k]];
        if (has(&t[0], out[k]))
            want[nw++] = out[k];
    }
    reorder(b, &t[0], want);
    xb_reshape(b, t[0].v, no, odims);
    xb_output_to(b, n->n_outputs > 0 ? n->outputs[0] : -1);
    if (b->st)
        return b->st;
    *done = 1;
    return TERN_OK;
}
