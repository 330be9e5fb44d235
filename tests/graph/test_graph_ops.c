/* Every host-evaluator op against references computed outside tern (numpy, torch.nn.functional) by
 * scripts/gen_onnx_models.py: each case is a one-node ONNX model. For each: import, infer (the inferred output
 * type and shape must equal the reference's), run on the host, compare; then fold constants and compare again. */
#include "graph_test_util.h"

static void check_case(const char *name, double atol, double rtol)
{
    TEST_BEGIN(name);
    char model[160];
    snprintf(model, sizeof model, "op_%s", name);
    tern_graph *g = gload(model);
    gdata d;
    CHECK_MSG(g != NULL, "%s: load failed", name);
    if (!g)
        return;
    if (gdata_load(model, &d)) {
        CHECK_MSG(0, "%s: data missing", name);
        tern_graph_free(g);
        return;
    }
    tern_error err = {0};
    tern_status st = tern_graph_infer(g, &err);
    CHECK_MSG(st == TERN_OK, "%s: infer: %s", name, err.msg);
    for (int k = 0; k < tern_graph_output_count(g) && k < d.n_out && !st; k++) {
        const tern_graph_value *v = tern_graph_value_at(g, tern_graph_output_id(g, k));
        const tern_host_tensor *w = d.t[d.n_in + k];
        /* data-dependent shapes (Range, ConstantOfShape fed by graph inputs; NonZero, Compress) may stay -1 */
        int data_dep = strncmp(name, "range", 5) == 0 || strncmp(name, "constantofshape", 15) == 0 ||
                       strcmp(name, "nonzero") == 0 || strcmp(name, "compress") == 0;
        int same = v->type == w->type && v->rank == w->rank;
        for (int q = 0; same && q < w->rank; q++)
            same = v->dims[q] == w->dims[q] || (data_dep && v->dims[q] == -1);
        CHECK_MSG(same, "%s: output %d inferred %s rank %d dims[0] %lld, reference %s rank %d dims[0] %lld", name, k,
                  tern_elem_name(v->type), v->rank, (long long)(v->rank > 0 ? v->dims[0] : 0),
                  tern_elem_name(w->type), w->rank, (long long)(w->rank > 0 ? w->dims[0] : 0));
    }
    grun_check(g, &d, atol, rtol, name);
    int folded = 0;
    st = tern_graph_fold_constants(g, &folded, &err);
    CHECK_MSG(st == TERN_OK, "%s: fold: %s", name, err.msg);
    if (!st)
        grun_check(g, &d, atol, rtol, name);
    gdata_free(&d);
    tern_graph_free(g);
}

int main(void)
{
    char path[512];
    gpath(path, sizeof path, "cases", ".txt");
    FILE *f = fopen(path, "r");
    CHECK_MSG(f != NULL, "cannot open %s (run the gen/onnx_models fixture)", path);
    if (!f)
        return check_report();
    char name[128];
    double atol, rtol;
    int n = 0;
    while (fscanf(f, "%127s %lf %lf", name, &atol, &rtol) == 3) {
        check_case(name, atol, rtol);
        n++;
    }
    fclose(f);
    TEST_BEGIN("case count");
    CHECK_MSG(n >= 96, "expected at least 96 op cases, found %d", n);
    printf("%d op cases\n", n);
    return check_report();
}
