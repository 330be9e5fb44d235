/* The planner's composition against a full simulation, and its pipeline schedule against the 1F1B closed form.
 * Composition: a small GPT-2-shaped model (data/models/gpt2-tiny.json: 2 layers, 256 wide, 4 heads, vocabulary
 * 4,096) at 2 sequences of 4,096 tokens, so a layer is 2 row chunks of 4,096 and 3 causal attention block pairs
 * of 2,048: the whole forward as one graph (embedding, both layers chained, final norm, LM head, softmax), and
 * the planner's 2 x (2 x row chunk + 3 x block pair) + 2 x head chunk, each simulated timing-only on trn1. The
 * two must agree within 10 % (what differs: the whole graph's Slice/Concat of the blocks and fusions across the
 * pieces' boundaries, which the composition cannot see). Pipeline: for equal stages the schedule's makespan is
 * (M + P - 1)(f + b) and the bubble (P - 1)(f + b) with free sends; with a send time x, at least 2(P - 1) x
 * more (the first forward's and last backward's trips) and at most x per op on the critical path. */
#include "../check.h"
#include "plan/plan_internal.h"
#include "tern/plan.h"

int main(void)
{
    tern_model_cfg c;
    tern_error e = {0};
    TEST_BEGIN("composition vs full simulation");
    CHECK_EQ_INT(tern_model_cfg_load("data/models/gpt2-tiny.json", &c, &e), TERN_OK);
    plan_compose k;
    plan_composition(&c, 1, 2, 4096, &k);
    CHECK_EQ_INT(k.rows, 4096);
    CHECK_EQ_INT(k.chunks, 2);
    CHECK_EQ_INT(k.blk, 2048);
    CHECK_EQ_INT(k.pairs, 3);
    CHECK_EQ_INT(k.B, 2 * 4);
    double whole = 0, layer = 0, head = 0;
    tern_status st = tern_plan_model_forward_time(&c, 2, 4096, 0, "trn1.32xlarge", &whole, &layer, &head, &e);
    CHECK_MSG(st == TERN_OK, "model forward: %s", e.msg);
    double composed = (double)c.layers * layer + head;
    printf("whole-model forward %.3f ms, composed %.3f ms (layer %.3f ms x %lld + head %.3f ms): %+.1f %%\n",
           whole * 1e3, composed * 1e3, layer * 1e3, (long long)c.layers, head * 1e3,
           100 * (composed - whole) / whole);
    CHECK(whole > 0 && layer > 0 && head > 0);
    CHECK_MSG(fabs(composed - whole) <= 0.10 * whole, "composed %.6f s vs whole %.6f s", composed, whole);
    /* the composition is not a rescaling: twice the layers add twice the layer time to the whole graph */
    tern_model_cfg c4 = c;
    c4.layers = 4;
    double whole4 = 0, l4, h4;
    st = tern_plan_model_forward_time(&c4, 2, 4096, 0, "trn1.32xlarge", &whole4, &l4, &h4, &e);
    CHECK_MSG(st == TERN_OK, "4-layer forward: %s", e.msg);
    CHECK_NEAR(l4, layer, 1e-12); /* the same layer graph, the same time: deterministic */
    CHECK_MSG(fabs((whole4 - whole) - 2 * layer) <= 0.10 * 2 * layer, "4 layers %.6f - 2 layers %.6f vs 2 x %.6f",
              whole4, whole, layer);

    TEST_BEGIN("1F1B schedule");
    double mk, idle;
    tern_plan_pipeline_1f1b(4, 8, 1.0, 2.0, 0.0, &mk, &idle);
    CHECK_NEAR(mk, (8 + 4 - 1) * 3.0, 1e-9);
    CHECK_NEAR(idle, (4 - 1) * 3.0, 1e-9);
    tern_plan_pipeline_1f1b(1, 8, 1.0, 2.0, 0.5, &mk, &idle);
    CHECK_NEAR(mk, 8 * 3.0, 1e-9);
    CHECK_NEAR(idle, 0.0, 1e-9);
    tern_plan_pipeline_1f1b(4, 8, 1.0, 2.0, 0.25, &mk, &idle);
    /* sends: at least the first forward's and the last backward's trips through the pipe, at most one per op */
    CHECK(mk >= (8 + 4 - 1) * 3.0 + 2 * 3 * 0.25 - 1e-9);
    CHECK(mk <= (8 + 4 - 1) * (3.0 + 2 * 0.25) + 1e-9);
    tern_plan_pipeline_1f1b(8, 2, 1.0, 1.0, 0.0, &mk, &idle); /* fewer micro-batches than stages */
    CHECK_NEAR(mk, (2 + 8 - 1) * 2.0, 1e-9);
    /* uneven stages: the slow last stage sets the pace */
    double f[3] = {1, 1, 2}, b[3] = {2, 2, 4};
    CHECK_EQ_INT(plan_pipeline_sim(3, 6, f, b, 0, &mk, &idle), 0);
    CHECK(mk >= 6 * 6.0 + 2 * 3.0 - 1e-9);
    CHECK(mk <= (6 + 3 - 1) * 6.0 + 1e-9);
    return check_report();
}
