/* Models exported by torch.onnx.export (scripts/gen_onnx_models.py: an MLP, a 2-block GPT-2-style decoder at opset
 * 14, a 2-layer BERT-style encoder at opset 12, a ResNet-18-style CNN at opset 13, a 2-block LLaMA-style
 * decoder with grouped-query heads at opset 14; random weights), against
 * PyTorch's outputs: import; inference with symbolic batch/sequence (ranks known, dims symbolic); binding the
 * shapes (every output dim then known and equal to PyTorch's); a host run; constant folding, pruning and fusion
 * (exact fused-node counts), and the optimised graph's run must still match. TERN_GRAPH_DUMP=1 prints the graphs. */
#include "graph_test_util.h"

typedef struct {
    const char *name;
    int out_rank;
    int layernorms, gelus_in_matmul, matmul_bias, matmul_left, attentions;
    int ln_in_matmul; /* layer norms fused into the linear layer before them (the rest stay nodes) */
    double tol;
} model_case;

static void check_model(const model_case *mc)
{
    TEST_BEGIN(mc->name);
    tern_graph *g = gload(mc->name);
    gdata d;
    CHECK_MSG(g != NULL, "%s: load failed", mc->name);
    if (!g)
        return;
    if (gdata_load(mc->name, &d)) {
        CHECK_MSG(0, "%s: data missing", mc->name);
        tern_graph_free(g);
        return;
    }
    tern_error err = {0};
    /* symbolic: the output's rank is known, its leading dim is the symbol "batch" (unknown) */
    tern_status st = tern_graph_infer(g, &err);
    CHECK_MSG(st == TERN_OK, "%s: symbolic infer: %s", mc->name, err.msg);
    const tern_graph_value *out = tern_graph_value_at(g, tern_graph_output_id(g, 0));
    CHECK_EQ_INT(out->rank, mc->out_rank);
    CHECK_MSG(out->rank > 0 && out->dims[0] == -1, "%s: batch dim should be unknown before binding", mc->name);
    /* bind every input's shape */
    for (int k = 0; k < tern_graph_input_count(g); k++) {
        const char *name = tern_graph_value_at(g, tern_graph_input_id(g, k))->name;
        for (int q = 0; q < d.n_in; q++)
            if (strcmp(d.names[q], name) == 0) {
                st = tern_graph_set_input_shape(g, name, d.t[q]->rank, d.t[q]->dims, &err);
                CHECK_MSG(st == TERN_OK, "%s: set_input_shape %s: %s", mc->name, name, err.msg);
            }
    }
    st = tern_graph_infer(g, &err);
    CHECK_MSG(st == TERN_OK, "%s: infer: %s", mc->name, err.msg);
    out = tern_graph_value_at(g, tern_graph_output_id(g, 0));
    const tern_host_tensor *want = d.t[d.n_in];
    int same = out->rank == want->rank && out->type == want->type;
    for (int q = 0; same && q < want->rank; q++)
        same = out->dims[q] == want->dims[q];
    CHECK_MSG(same, "%s: inferred output shape differs from PyTorch's", mc->name);
    int all_static = 1;
    for (int v = 0; v < tern_graph_value_count(g); v++) {
        const tern_graph_value *val = tern_graph_value_at(g, v);
        if (!tern_graph_value_is_static(val) && tern_graph_value_uses(g, v) > 0) {
            all_static = 0;
            CHECK_MSG(0, "%s: value \"%s\" is not static after binding", mc->name, val->name);
            break;
        }
    }
    (void)all_static;
    grun_check(g, &d, mc->tol, mc->tol, mc->name);
    int before = tern_graph_node_count(g);
    st = tern_graph_optimize(g, &err);
    CHECK_MSG(st == TERN_OK, "%s: optimize: %s", mc->name, err.msg);
    if (getenv("TERN_GRAPH_DUMP"))
        tern_graph_dump(stdout, g);
    printf("%s: %d nodes -> %d after fold/prune/fuse\n", mc->name, before, tern_graph_node_count(g));
    CHECK_EQ_INT(count_op(g, "LayerNormalization"), mc->layernorms);
    CHECK_EQ_INT(count_op(g, "MatMulBias"), mc->matmul_bias);
    CHECK_EQ_INT(count_op(g, "MatMul"), mc->matmul_left);
    CHECK_EQ_INT(count_op(g, "Attention"), mc->attentions);
    CHECK_EQ_INT(count_op(g, "Softmax"), 0);
    CHECK_EQ_INT(count_op(g, "Erf") + count_op(g, "Tanh") + count_op(g, "Gelu"), 0);
    int gelus = 0;
    for (int i = 0; i < tern_graph_node_count(g); i++) {
        const tern_graph_node *n = tern_graph_node_at(g, i);
        if (!strcmp(n->op, "MatMulBias") && !strncmp(tern_graph_attr_string(n, "activation", ""), "gelu", 4))
            gelus++;
    }
    CHECK_EQ_INT(gelus, mc->gelus_in_matmul);
    int lns = 0;
    for (int i = 0; i < tern_graph_node_count(g); i++) {
        const tern_graph_node *n = tern_graph_node_at(g, i);
        lns += !strcmp(n->op, "MatMulBias") && tern_graph_attr_int(n, "layernorm", 0) == 1;
    }
    CHECK_EQ_INT(lns, mc->ln_in_matmul);
    grun_check(g, &d, mc->tol, mc->tol, mc->name);
    gdata_free(&d);
    tern_graph_free(g);
}

static void check_fold(void)
{
    TEST_BEGIN("fold");
    tern_graph *g = gload("fold");
    gdata d;
    if (!g || gdata_load("fold", &d)) {
        CHECK_MSG(0, "fold model or data missing");
        tern_graph_free(g);
        return;
    }
    tern_error err = {0};
    int folded = -1;
    CHECK_EQ_INT(tern_graph_node_count(g), 9);
    tern_status st = tern_graph_fold_constants(g, &folded, &err);
    CHECK_MSG(st == TERN_OK, "fold: %s", err.msg);
    /* Reshape, Add, Exp, Shape, Cast, ReduceSum fold; Mul(x, .), Add(., tot) and the dead Neg(x) stay */
    CHECK_EQ_INT(folded, 6);
    CHECK_EQ_INT(tern_graph_node_count(g), 3);
    CHECK_EQ_INT(tern_graph_prune(g), 1);
    CHECK_EQ_INT(tern_graph_node_count(g), 2);
    CHECK_EQ_INT(count_op(g, "Neg"), 0);
    int tot = -1;
    for (int v = 0; v < tern_graph_value_count(g); v++)
        if (!strcmp(tern_graph_value_at(g, v)->name, "tot"))
            tot = v;
    CHECK_MSG(tot >= 0 && tern_graph_value_at(g, tot)->constant &&
                  tern_graph_value_at(g, tot)->constant->f[0] == 5.0f,
              "folded ReduceSum(Cast(Shape(c1))) should be the constant 5");
    grun_check(g, &d, 1e-5, 1e-5, "fold");
    gdata_free(&d);
    tern_graph_free(g);
}

int main(void)
{
    /* tolerances: the host evaluator and PyTorch both compute in fp32, in different summation orders */
    static const model_case cases[] = {
        {"mlp", 2, 0, 1, 3, 0, 0, 0, 1e-5},
        /* attention: causal Where (gpt2), additive mask computed from an input (bert, opset 12, axis=3); layer
         * norms: each follows a linear layer with its residual except the first (after the embeddings): BERT's
         * (post-LN) are its only reader; GPT-2's (pre-LN) share it with the next residual add, and the fused node
         * keeps both outputs */
        {"gpt2", 3, 1, 2, 8, 1, 2, 4, 2e-4},
        {"bert", 3, 1, 2, 12, 0, 2, 4, 2e-4},
        {"cnn", 2, 0, 0, 1, 0, 0, 0, 1e-4},
        /* LLaMA-style (no biases, RMSNorm unfused): both attentions fuse, reading the 2 K/V heads of the 4 query
         * heads in place (kv_rep 2); the 7 bias-less linear layers per block and the head stay MatMuls */
        {"llama", 3, 0, 0, 0, 15, 2, 0, 2e-4},
    };
    for (size_t k = 0; k < TERN_ARRAY_LEN(cases); k++)
        check_model(&cases[k]);
    check_fold();
    return check_report();
}
