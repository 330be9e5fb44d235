/* The op registry made concrete: the rows of include/tern/ops.def as a const table indexed by tern_op_id, and the
 * lookups every layer uses instead of comparing op names. Name lookup is a linear scan over about 140 short names:
 * it runs once per node (when the importer or a pass makes or rewrites a node), never in a layer's dispatch. */
#include "graph_internal.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#define TERN_OP_STATUS_ROW(s) TERN_OP_STATUS_##s
static const tern_op_row rows[] = {
    {TERN_GOP_UNKNOWN, "", "?", TERN_OP_FAMILY_NONE, 0, -1, 0, 0, TERN_OP_STATUS_PLANNED, ""},
#define GOP(id, domain, name, family, min_in, max_in, const_mask, flags, status, opsets)                              \
    {TERN_GOP_##id, domain, name, TERN_OP_FAMILY_##family, min_in, max_in, const_mask, flags, TERN_OP_STATUS_ROW(status),   \
     opsets},
#include "tern/ops.def"
#undef GOP
};
static_assert(sizeof rows / sizeof rows[0] == TERN_GOP_COUNT, "one registry row per tern_op_id");

static const char *const family_names[] = {
    "none",  "elementwise_unary", "elementwise_binary", "elementwise_variadic", "elementwise_select", "axis",
    "reduce", "layout", "index", "generator", "conv", "pool", "norm", "linear", "attention", "recurrent", "loss",
    "control", "optimizer"};
static_assert(sizeof family_names / sizeof family_names[0] == TERN_OP_FAMILY_COUNT, "one name per op family");

tern_op_id tern_op_lookup(const char *domain, const char *name)
{
    if (!name)
        return TERN_GOP_UNKNOWN;
    if (!domain || !strcmp(domain, "ai.onnx"))
        domain = "";
    for (int k = 1; k < TERN_GOP_COUNT; k++)
        if (!strcmp(rows[k].name, name) && !strcmp(rows[k].domain, domain))
            return (tern_op_id)k;
    return TERN_GOP_UNKNOWN;
}

const tern_op_row *tern_op_info(tern_op_id id)
{
    return (int)id > 0 && (int)id < TERN_GOP_COUNT ? &rows[id] : &rows[TERN_GOP_UNKNOWN];
}

const char *tern_op_name(tern_op_id id)
{
    return tern_op_info(id)->name;
}

unsigned tern_op_flags(tern_op_id id)
{
    return tern_op_info(id)->flags;
}

tern_op_family tern_op_family_of(tern_op_id id)
{
    return tern_op_info(id)->family;
}

const char *tern_op_family_name(tern_op_family f)
{
    return (int)f >= 0 && (int)f < TERN_OP_FAMILY_COUNT ? family_names[f] : "?";
}

const char *tern_op_status_name(tern_op_status s)
{
    switch (s) {
    case TERN_OP_STATUS_REQUIRED:
        return "required";
    case TERN_OP_STATUS_OPTIONAL:
        return "optional";
    case TERN_OP_STATUS_PLANNED:
        return "planned";
    }
    return "?";
}

int graph_node_set_op(tern_graph_node *n, const char *domain, const char *op)
{
    char *o = graph_strdup(op), *d = graph_strdup(domain);
    if (!o || !d) {
        free(o), free(d);
        return -1;
    }
    free(n->op);
    free(n->domain);
    n->op = o;
    n->domain = d;
    n->op_id = (int)tern_op_lookup(d, o);
    return 0;
}
