/* The op registry (include/tern/ops.def, src/graph/ops.c): every row's id, name and domain round-trip through
 * tern_op_lookup; the default domain answers to "" , NULL and "ai.onnx" alike, fused ops only to "tern"; unknown
 * names and domains give TERN_GOP_UNKNOWN; the columns hold what the layers rely on (arity, constant inputs,
 * flags); and nodes carry their op_id from the importer and from the fusion pass that rewrites them. */
#include "check.h"
#include "tern/graph.h"

#include <string.h>

static void rows_round_trip(void)
{
    TEST_BEGIN("rows round-trip");
    CHECK_EQ_INT(TERN_GOP_UNKNOWN, 0);
    CHECK(TERN_GOP_COUNT > 120);
    for (int k = 1; k < TERN_GOP_COUNT; k++) {
        const tern_op_row *r = tern_op_info((tern_op_id)k);
        CHECK_EQ_INT(r->id, k);
        CHECK_EQ_INT(tern_op_lookup(r->domain, r->name), k);
        CHECK(strcmp(tern_op_name((tern_op_id)k), r->name) == 0);
        CHECK(r->family > TERN_OP_FAMILY_NONE && r->family < TERN_OP_FAMILY_COUNT);
        CHECK(strcmp(tern_op_family_name(r->family), "?") != 0);
        CHECK(r->min_inputs >= 0 && (r->max_inputs == -1 || r->max_inputs >= r->min_inputs));
        CHECK_MSG(r->max_inputs == -1 || (r->const_inputs >> r->max_inputs) == 0,
                  "%s: constant-input mask 0x%x past its %d inputs", r->name, r->const_inputs, r->max_inputs);
        CHECK_MSG(((r->flags & TERN_OPF_FUSED) != 0) == (strcmp(r->domain, "tern") == 0),
                  "%s: FUSED flag and domain \"%s\" disagree", r->name, r->domain);
        for (int j = 1; j < k; j++) /* one row per (domain, op) */
            CHECK_MSG(strcmp(tern_op_info((tern_op_id)j)->name, r->name) ||
                          strcmp(tern_op_info((tern_op_id)j)->domain, r->domain),
                      "rows %d and %d both name %s", j, k, r->name);
    }
}

static void lookups(void)
{
    TEST_BEGIN("lookups");
    CHECK_EQ_INT(tern_op_lookup("", "MatMul"), TERN_GOP_MATMUL);
    CHECK_EQ_INT(tern_op_lookup(NULL, "MatMul"), TERN_GOP_MATMUL);
    CHECK_EQ_INT(tern_op_lookup("ai.onnx", "MatMul"), TERN_GOP_MATMUL);
    CHECK_EQ_INT(tern_op_lookup("tern", "MatMulBias"), TERN_GOP_MATMUL_BIAS);
    CHECK_EQ_INT(tern_op_lookup("", "MatMulBias"), TERN_GOP_UNKNOWN); /* fused ops live in "tern" only */
    CHECK_EQ_INT(tern_op_lookup("tern", "MatMul"), TERN_GOP_UNKNOWN);
    CHECK_EQ_INT(tern_op_lookup("com.microsoft", "MatMul"), TERN_GOP_UNKNOWN);
    CHECK_EQ_INT(tern_op_lookup("", "matmul"), TERN_GOP_UNKNOWN); /* op types are case-sensitive */
    CHECK_EQ_INT(tern_op_lookup("", NULL), TERN_GOP_UNKNOWN);
    CHECK(strcmp(tern_op_name(TERN_GOP_UNKNOWN), "?") == 0);
    CHECK(strcmp(tern_op_name((tern_op_id)TERN_GOP_COUNT), "?") == 0);
    CHECK(strcmp(tern_op_name((tern_op_id)-3), "?") == 0);
    CHECK_EQ_INT(tern_op_family_of(TERN_GOP_UNKNOWN), TERN_OP_FAMILY_NONE);
    CHECK_EQ_INT(tern_op_flags((tern_op_id)9999), 0);
    CHECK(strcmp(tern_op_family_name((tern_op_family)99), "?") == 0);
    CHECK(strcmp(tern_op_status_name(TERN_OP_STATUS_REQUIRED), "required") == 0);
}

static void columns(void)
{
    TEST_BEGIN("columns");
    /* constant inputs: Reshape's shape, Slice's starts..steps, every Reduce's axes */
    CHECK_EQ_HEX(tern_op_info(TERN_GOP_RESHAPE)->const_inputs, 0x2);
    CHECK_EQ_HEX(tern_op_info(TERN_GOP_SLICE)->const_inputs, 0x1E);
    CHECK_EQ_HEX(tern_op_info(TERN_GOP_PAD)->const_inputs, 0xE);
    for (int k = 1; k < TERN_GOP_COUNT; k++)
        if (tern_op_family_of((tern_op_id)k) == TERN_OP_FAMILY_REDUCE)
            CHECK_EQ_HEX(tern_op_info((tern_op_id)k)->const_inputs, 0x2);
    CHECK_EQ_INT(tern_op_info(TERN_GOP_CONCAT)->max_inputs, -1);
    CHECK_EQ_INT(tern_op_info(TERN_GOP_ADD)->max_inputs, 2);
    CHECK(tern_op_flags(TERN_GOP_SPLIT) & TERN_OPF_EMPTY_OUTPUTS);
    CHECK(tern_op_flags(TERN_GOP_CONCAT) & TERN_OPF_EMPTY_INPUTS);
    CHECK(tern_op_flags(TERN_GOP_LESS) & TERN_OPF_COMPARE);
    CHECK(tern_op_flags(TERN_GOP_EXP) & TERN_OPF_FLOAT_IN);
    CHECK(!(tern_op_flags(TERN_GOP_ABS) & TERN_OPF_FLOAT_IN));
    CHECK_EQ_INT(tern_op_info(TERN_GOP_MATMUL)->status, TERN_OP_STATUS_REQUIRED);
    CHECK_EQ_INT(tern_op_family_of(TERN_GOP_LSTM), TERN_OP_FAMILY_RECURRENT);
    CHECK_EQ_INT(tern_op_family_of(TERN_GOP_ATTENTION), TERN_OP_FAMILY_ATTENTION);
}

/* The importer sets op_id once per node; fusion rewrites nodes through graph_node_set_op, which keeps it. */
static void node_ids(void)
{
    TEST_BEGIN("node op_id");
    tern_graph *g = NULL;
    tern_error err = {0};
    tern_status st = tern_graph_load_onnx("data/models/gpt2_tiny.onnx", &g, &err);
    CHECK_MSG(st == TERN_OK, "load: %s", err.msg);
    if (st)
        return;
    int n = tern_graph_node_count(g);
    CHECK(n > 0);
    for (int i = 0; i < n; i++) {
        const tern_graph_node *nd = tern_graph_node_at(g, i);
        CHECK_MSG(nd->op_id == (int)tern_op_lookup(nd->domain, nd->op), "node %d %s: op_id %d", i, nd->op,
                  nd->op_id);
        CHECK_MSG(nd->op_id != TERN_GOP_UNKNOWN, "node %d: %s is not in the registry", i, nd->op);
    }
    int fused = 0, fused_nodes = 0;
    st = tern_graph_infer(g, &err);
    if (!st)
        st = tern_graph_fuse(g, &fused, &err);
    CHECK_MSG(st == TERN_OK, "infer/fuse: %s", err.msg);
    CHECK(fused > 0);
    n = tern_graph_node_count(g);
    for (int i = 0; i < n; i++) {
        const tern_graph_node *nd = tern_graph_node_at(g, i);
        CHECK_MSG(nd->op_id == (int)tern_op_lookup(nd->domain, nd->op), "fused node %d %s.%s: op_id %d", i,
                  nd->domain, nd->op, nd->op_id);
        fused_nodes += (tern_op_flags((tern_op_id)nd->op_id) & TERN_OPF_FUSED) != 0;
    }
    CHECK(fused_nodes > 0);
    tern_graph_free(g);
}

int main(void)
{
    rows_round_trip();
    lookups();
    columns();
    node_ids();
    return check_report();
}
