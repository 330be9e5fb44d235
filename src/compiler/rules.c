/* Rule selection: the compiler family files' ordered rule arrays (cc_rule_set, compile_internal.h) in one list,
 * the order in which a node's op is offered to them. compile.c lowers each node with cc_rule_select and records
 * the rule that fired (tern compile --explain); op_support.c and the rule listing for `tern ops` / docs/ops.md
 * read the same arrays, so what the docs say the device runs is what compile does. */
#include <stdio.h>
#include <string.h>

#include "compiler/compile_internal.h"

/* Selection order: the sets in this order, each array in its own order. A family file's array lists its fast
 * special cases before its general rules; the family files' ops do not overlap, except the reductions, whose
 * last-axis rule (cc_rules_reduce_last) comes before lower_reduce_long.c's and those before the general one. */
static const cc_rule_set *const rule_sets[] = {
    &cc_rules_reduce_last, &cc_rules_cnn,  &cc_rules_attention, &cc_rules_scatter, &cc_rules_reduce_long,
    &cc_rules_elementwise, &cc_rules_reduce, &cc_rules_axis, &cc_rules_linear, &cc_rules_norm, &cc_rules_index,
    &cc_rules_layout, &cc_rules_optim,
};

int cc_rules_for(tern_op_id id, const cc_rule **out, int max)
{
    int n = 0;
    for (size_t s = 0; s < sizeof rule_sets / sizeof rule_sets[0]; s++)
        for (size_t r = 0; r < rule_sets[s]->n; r++)
            if (rule_sets[s]->rules[r].op == id) {
                if (n < max)
                    out[n] = &rule_sets[s]->rules[r];
                n++;
            }
    return n;
}

const char *cc_rule_file(const cc_rule *r)
{
    for (size_t s = 0; s < sizeof rule_sets / sizeof rule_sets[0]; s++)
        if (r >= rule_sets[s]->rules && r < rule_sets[s]->rules + rule_sets[s]->n)
            return rule_sets[s]->file;
    return "";
}

const cc_rule *cc_rule_select(compile_ctx *c, char *declined, size_t len)
{
    const cc_rule *rs[16];
    int n = cc_rules_for((tern_op_id)cc_node(c)->op_id, rs, 16);
    size_t at = 0;
    if (len)
        declined[0] = '\0';
    for (int i = 0; i < n && i < 16; i++) {
        char why[192] = "";
        if (!rs[i]->applies || rs[i]->applies(c, why, sizeof why))
            return rs[i];
        if (at < len)
            at += (size_t)snprintf(declined + at, len - at, "%s%s: %s", at ? "; " : "", rs[i]->name,
                                   why[0] ? why : "does not apply");
    }
    return NULL;
}

int tern_op_rule_names(tern_op_id id, const char **names, int max)
{
    const cc_rule *rs[16];
    int n = cc_rules_for(id, rs, 16), k = 0;
    for (int i = 0; i < n && i < 16; i++) {
        int dup = 0; /* a name shared by two arrays' rows of the same op is listed once */
        for (int j = 0; j < i; j++)
            dup |= !strcmp(rs[j]->name, rs[i]->name);
        if (dup)
            continue;
        if (k < max)
            names[k] = rs[i]->name;
        k++;
    }
    return k;
}
