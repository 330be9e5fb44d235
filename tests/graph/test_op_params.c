/* The shared opset-aware decoders (src/graph/op_params.h): Pad's pads and value come from the attributes before
 * opset 11 and from inputs 1 and 2 from 11 on, whatever else the node carries; Reduce axes come from the
 * attribute until ReduceSum's opset 13 and the others' opset 18, then from input 1; unknown inputs, wrong types
 * and too many entries are reported, not read. */
#include "check.h"
#include "graph/graph_internal.h"
#include "graph/op_params.h"

static tern_host_tensor *ints(int n, const int64_t *v)
{
    int64_t d = n;
    tern_host_tensor *t = NULL;
    if (tern_host_tensor_new(TERN_ELEM_INT64, 1, &d, &t, NULL))
        return NULL;
    for (int k = 0; k < n; k++)
        t->i[k] = v[k];
    return t;
}

static void pad(void)
{
    TEST_BEGIN("pad");
    int64_t attr_pads[4] = {1, 2, 3, 4}, in_pads[4] = {0, 5, 0, 6};
    tern_graph_attr attrs[2] = {{0}};
    attrs[0].name = "pads";
    attrs[0].type = TERN_ATTR_INTS;
    attrs[0].ints = attr_pads;
    attrs[0].n = 4;
    attrs[1].name = "value";
    attrs[1].type = TERN_ATTR_FLOAT;
    attrs[1].f = 2.5f;
    tern_graph_node n = {0};
    n.op = "Pad";
    n.domain = "";
    n.op_id = TERN_GOP_PAD;
    n.attrs = attrs;
    n.n_attrs = 2;
    tern_host_tensor *p = ints(4, in_pads), *v = NULL;
    int64_t one = 1;
    CHECK(tern_host_tensor_new(TERN_ELEM_FLOAT, 0, &one, &v, NULL) == TERN_OK);
    v->f[0] = 7.0f;
    graph_pad_args a;
    char why[160];
    /* opset 10: the attributes, even with inputs present */
    CHECK_EQ_INT(graph_pad_decode(&n, 10, 1, p, 1, v, &a, why, sizeof why), TERN_OK);
    CHECK_EQ_INT(a.known, 1);
    CHECK_EQ_INT(a.n, 4);
    CHECK_EQ_INT(a.pads[1], 2);
    CHECK_NEAR(a.value, 2.5, 0);
    /* opset 11: the inputs, even with stale attributes */
    CHECK_EQ_INT(graph_pad_decode(&n, 11, 1, p, 1, v, &a, why, sizeof why), TERN_OK);
    CHECK_EQ_INT(a.n, 4);
    CHECK_EQ_INT(a.pads[1], 5);
    CHECK_EQ_INT(a.pads[3], 6);
    CHECK_NEAR(a.value, 7.0, 0);
    /* opset 13, no fill input: 0; pads not known yet */
    CHECK_EQ_INT(graph_pad_decode(&n, 13, 1, NULL, 0, NULL, &a, why, sizeof why), TERN_OK);
    CHECK_EQ_INT(a.known, 0);
    CHECK_NEAR(a.value, 0.0, 0);
    CHECK_EQ_INT(graph_pad_decode(&n, 13, 1, p, 1, NULL, &a, why, sizeof why), TERN_OK);
    CHECK_EQ_INT(a.value_known, 0);
    /* a float pads input is refused by name */
    CHECK_EQ_INT(graph_pad_decode(&n, 13, 1, v, 0, NULL, &a, why, sizeof why), TERN_ERR_INVALID);
    CHECK_STR_CONTAINS(why, "input 1 must be a 1-D integer tensor");
    int64_t many[20] = {0};
    tern_host_tensor *big = ints(20, many);
    CHECK_EQ_INT(graph_pad_decode(&n, 13, 1, big, 0, NULL, &a, why, sizeof why), TERN_ERR_RANGE);
    CHECK_STR_CONTAINS(why, "holds 20 values, at most 16");
    tern_host_tensor_free(big);
    tern_host_tensor_free(p);
    tern_host_tensor_free(v);
}

static void reduce_axes(void)
{
    TEST_BEGIN("reduce axes");
    int64_t attr_axes[1] = {0}, in_axes[2] = {-1, 1};
    tern_graph_attr at = {0};
    at.name = "axes";
    at.type = TERN_ATTR_INTS;
    at.ints = attr_axes;
    at.n = 1;
    tern_graph_node n = {0};
    n.op = "ReduceMean";
    n.domain = "";
    n.op_id = TERN_GOP_REDUCE_MEAN;
    n.attrs = &at;
    n.n_attrs = 1;
    tern_host_tensor *t = ints(2, in_axes);
    graph_axes_args a;
    char why[160];
    CHECK(!graph_reduce_axes_from_input(TERN_GOP_REDUCE_MEAN, 17));
    CHECK(graph_reduce_axes_from_input(TERN_GOP_REDUCE_MEAN, 18));
    CHECK(!graph_reduce_axes_from_input(TERN_GOP_REDUCE_SUM, 12));
    CHECK(graph_reduce_axes_from_input(TERN_GOP_REDUCE_SUM, 13));
    CHECK_EQ_INT(graph_reduce_axes_decode(&n, 13, 1, t, &a, why, sizeof why), TERN_OK); /* ReduceMean-13: attr */
    CHECK_EQ_INT(a.n, 1);
    CHECK_EQ_INT(a.axes[0], 0);
    CHECK_EQ_INT(graph_reduce_axes_decode(&n, 18, 1, t, &a, why, sizeof why), TERN_OK); /* ReduceMean-18: input */
    CHECK_EQ_INT(a.n, 2);
    CHECK_EQ_INT(a.axes[0], -1);
    CHECK_EQ_INT(graph_reduce_axes_decode(&n, 18, 0, NULL, &a, why, sizeof why), TERN_OK); /* none: all axes */
    CHECK_EQ_INT(a.n, 0);
    CHECK_EQ_INT(a.known, 1);
    CHECK_EQ_INT(graph_reduce_axes_decode(&n, 18, 1, NULL, &a, why, sizeof why), TERN_OK); /* run-time input */
    CHECK_EQ_INT(a.known, 0);
    n.op_id = TERN_GOP_REDUCE_SUM;
    CHECK_EQ_INT(graph_reduce_axes_decode(&n, 13, 1, t, &a, why, sizeof why), TERN_OK); /* ReduceSum-13: input */
    CHECK_EQ_INT(a.n, 2);
    CHECK_EQ_INT(graph_reduce_axes_decode(&n, 11, 1, t, &a, why, sizeof why), TERN_OK); /* ReduceSum-11: attr */
    CHECK_EQ_INT(a.n, 1);
    tern_host_tensor_free(t);
}

int main(void)
{
    pad();
    reduce_axes();
    return check_report();
}
