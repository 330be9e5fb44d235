/* tern.SGDUpdate and tern.AdamUpdate (src/graph/ops_optim.c): one weight's optimizer step lowered to one fused
 * kernel (tern_lib_optim_update, src/kernel/lib_optim.c) that reads the weight, gradient and state once and
 * writes the new weight and state, instead of the dozen elementwise kernels of the node-by-node update, each a
 * pass over HBM. The operands are seen as [128, numel / 128] when the element count allows (every partition
 * busy), else as tile_rows_cols' [rows, last dim]; the one-element scalars as [rows, 1] columns of step 0 (as
 * lower_elementwise.c's binary_col reads them). The tiling changes no value: every element gets the same
 * instructions. AdamUpdate with lamb = 1 is LAMB's first pass (output 0 the direction r, input 4 bc1). */
#include <string.h>

#include "compiler/lower_tiles.h"
#include "graph/graph_internal.h"

static tern_view opt_view(compile_ctx *c, cc_value *x, uint64_t r, uint64_t cl)
{
    return x ? cc_view2d(c, x, 0, r, cl, cl) : tern_view_none();
}

static tern_view opt_col(compile_ctx *c, int k, uint64_t r)
{
    cc_value *s = cc_in(c, k);
    if (!s)
        return tern_view_none();
    if (s->numel != 1) {
        cc_fail(c, TERN_ERR_INVALID, "input %d of %s must have one element, has %llu", k, cc_node(c)->op,
                (unsigned long long)s->numel);
        return tern_view_none();
    }
    return cc_view2d(c, s, 0, r, 1, 0);
}

static int lower_optim(compile_ctx *c)
{
    const tern_graph_node *n = cc_node(c);
    const int adam = n->op_id == TERN_GOP_ADAM_UPDATE;
    cc_value *p = cc_in(c, 0), *g = cc_in(c, 1);
    cc_value *s0 = cc_in(c, adam ? 2 : 3), *s1 = adam ? cc_in(c, 3) : NULL;
    if (!p || !g || (adam && (!s0 || !s1))) {
        cc_fail(c, TERN_ERR_INVALID, "%s needs its weight, gradient%s", n->op, adam ? " and both moments" : "");
        return 1;
    }
    for (int k = 0; k < (adam ? 4 : 2); k++) {
        cc_value *x = cc_in(c, k);
        if (x && (!tern_dtype_is_float(x->dt) || x->numel != p->numel)) {
            cc_fail(c, TERN_ERR_INVALID, "input %d of %s is %s with %llu elements; the weight's %llu float ones "
                    "are needed", k, n->op, tern_dtype_name(x->dt), (unsigned long long)x->numel,
                    (unsigned long long)p->numel);
            return 1;
        }
    }
    cc_value *op = cc_out(c, 0, cc_out_dtype(c, 0));
    cc_value *o0 = (adam || s0) && n->n_outputs > 1 ? cc_out(c, 1, cc_out_dtype(c, 1)) : NULL;
    cc_value *o1 = adam && n->n_outputs > 2 ? cc_out(c, 2, cc_out_dtype(c, 2)) : NULL;
    if (!op || ((adam || s0) && !o0) || (adam && !o1)) {
        if (cc_ok(c))
            cc_fail(c, TERN_ERR_INVALID, "%s: every output (the new weight and state) must be used", n->op);
        return 1;
    }
    uint64_t r, cl;
    tile_rows_cols(p, &r, &cl);
    if (r < PARTS && p->numel % PARTS == 0) {
        r = PARTS;
        cl = p->numel / PARTS;
    }
    tern_optim_update u;
    memset(&u, 0, sizeof u);
    const int lamb = adam && tern_graph_attr_int(n, "lamb", 0) != 0;
    u.kind = lamb ? TERN_OPTIM_LAMB : adam ? TERN_OPTIM_ADAM : TERN_OPTIM_SGD;
    u.adamw = !lamb && (int)tern_graph_attr_int(n, "adamw", 0);
    u.nesterov = (int)tern_graph_attr_int(n, "nesterov", 0);
    u.weight_decay = tern_graph_attr_float(n, "weight_decay", 0.0f);
    u.momentum = tern_graph_attr_float(n, "momentum", 0.0f);
    u.beta1 = tern_graph_attr_float(n, "beta1", 0.9f);
    u.beta2 = tern_graph_attr_float(n, "beta2", 0.999f);
    u.one_minus_beta1 = tern_graph_attr_float(n, "one_minus_beta1", 0.1f);
    u.one_minus_beta2 = tern_graph_attr_float(n, "one_minus_beta2", 0.001f);
    u.eps = tern_graph_attr_float(n, "eps", 1e-8f);
    u.p = opt_view(c, p, r, cl);
    u.g = opt_view(c, g, r, cl);
    u.s0 = opt_view(c, s0, r, cl);
    u.s1 = opt_view(c, s1, r, cl);
    u.out_p = opt_view(c, op, r, cl);
    u.out_s0 = opt_view(c, o0, r, cl);
    u.out_s1 = opt_view(c, o1, r, cl);
    u.lr = opt_col(c, adam ? 4 : 2, r);
    u.bc2_sqrt = adam ? opt_col(c, 5, r) : tern_view_none();
    u.decay = adam && !lamb ? opt_col(c, 6, r) : tern_view_none();
    u.coef = opt_col(c, adam ? 7 : 4, r);
    if (cc_ok(c))
        tern_lib_optim_update(c->k, &u);
    return 1;
}

static const cc_rule optim_rules[] = {
    {TERN_GOP_SGD_UPDATE, "optim.fused", NULL, lower_optim},
    {TERN_GOP_ADAM_UPDATE, "optim.fused", NULL, lower_optim},
};
const cc_rule_set cc_rules_optim = CC_RULE_SET("lower_optim.c", optim_rules);
