/* libFuzzer target for the ONNX importer and the passes behind it: load a ModelProto from the fuzz buffer, then
 * infer, fold constants, prune, fuse, dump, and when every input has a small static shape, run the graph on the
 * host with zero inputs. Any crash, leak, sanitizer report or non-terminating input is a bug; error returns are
 * the expected outcome for most inputs. Built by scripts/fuzz_onnx.sh. */
#include "tern/graph.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void try_run(const tern_graph *g)
{
    int nin = tern_graph_input_count(g), nout = tern_graph_output_count(g);
    if (nin > 16 || nout > 16)
        return;
    for (int v = 0; v < tern_graph_value_count(g); v++) {
        size_t n = tern_graph_value_numel(tern_graph_value_at(g, v));
        if (!tern_graph_value_is_static(tern_graph_value_at(g, v)) || n > (1u << 16))
            return; /* big or unknown intermediates: skip (the evaluator is a reference, not a fast path) */
    }
    tern_host_tensor *in[16] = {0}, *out[16] = {0};
    int ok = 1;
    for (int k = 0; k < nin; k++) {
        const tern_graph_value *v = tern_graph_value_at(g, tern_graph_input_id(g, k));
        if (tern_host_tensor_new(v->type, v->rank, v->dims, &in[k], NULL))
            ok = 0;
    }
    tern_error err;
    if (ok && tern_graph_run(g, (const tern_host_tensor *const *)in, out, &err) == TERN_OK)
        for (int k = 0; k < nout; k++)
            tern_host_tensor_free(out[k]);
    for (int k = 0; k < nin; k++)
        tern_host_tensor_free(in[k]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tern_graph *g = NULL;
    tern_error err;
    if (tern_graph_load_onnx_buffer(data, size, &g, &err) != TERN_OK)
        return 0;
    FILE *null = fopen("/dev/null", "w");
    if (null) {
        tern_graph_dump(null, g);
    }
    if (tern_graph_infer(g, &err) == TERN_OK && tern_graph_fold_constants(g, NULL, &err) == TERN_OK) {
        tern_graph_prune(g);
        if (tern_graph_fuse(g, NULL, &err) == TERN_OK) {
            if (null)
                tern_graph_dump(null, g);
            try_run(g);
        }
    }
    if (null)
        fclose(null);
    tern_graph_free(g);
    return 0;
}
