/* Shared by the graph tests: locating the generated models ($TERN_TEST_DATA/onnx, made by
 * scripts/gen_onnx_models.py), reading their .bin input/output files into host tensors, and comparing tensors. */
#ifndef TERN_TESTS_GRAPH_UTIL_H
#define TERN_TESTS_GRAPH_UTIL_H

#include "check.h"
#include "tern/graph.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int n_in, n_out;
    char *names[32];
    tern_host_tensor *t[32]; /* inputs then outputs */
} gdata;

static inline const char *gdir(void)
{
    const char *d = getenv("TERN_TEST_DATA");
    return d && *d ? d : "build/testdata";
}

static inline void gpath(char *buf, size_t len, const char *name, const char *ext)
{
    snprintf(buf, len, "%s/onnx/%s%s", gdir(), name, ext);
}

static inline void gdata_free(gdata *d)
{
    for (int k = 0; k < d->n_in + d->n_out; k++) {
        free(d->names[k]);
        tern_host_tensor_free(d->t[k]);
    }
    memset(d, 0, sizeof *d);
}

static inline int gdata_load(const char *name, gdata *d)
{
    char path[512];
    gpath(path, sizeof path, name, ".bin");
    memset(d, 0, sizeof *d);
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "cannot open %s (run the gen/onnx_models fixture)\n", path);
        return -1;
    }
    char magic[8];
    uint32_t counts[2];
    if (fread(magic, 1, 8, f) != 8 || memcmp(magic, "TGDATA01", 8) || fread(counts, 4, 2, f) != 2 ||
        counts[0] + counts[1] > 32) {
        fclose(f);
        return -1;
    }
    d->n_in = (int)counts[0];
    d->n_out = (int)counts[1];
    for (int k = 0; k < d->n_in + d->n_out; k++) {
        uint32_t nl, rank;
        int32_t et;
        int64_t dims[TERN_GRAPH_MAX_RANK];
        if (fread(&nl, 4, 1, f) != 1 || nl > 1000)
            goto bad;
        d->names[k] = calloc(nl + 1, 1);
        if (fread(d->names[k], 1, nl, f) != nl || fread(&et, 4, 1, f) != 1 || fread(&rank, 4, 1, f) != 1 ||
            rank > TERN_GRAPH_MAX_RANK || fread(dims, 8, rank, f) != rank)
            goto bad;
        if (tern_host_tensor_new((tern_elem_type)et, (int)rank, dims, &d->t[k], NULL))
            goto bad;
        tern_host_tensor *t = d->t[k];
        if (t->f) {
            float *tmp = malloc(t->count * 4 + 4);
            if (fread(tmp, 4, t->count, f) != t->count) {
                free(tmp);
                goto bad;
            }
            memcpy(t->f, tmp, t->count * 4);
            free(tmp);
        } else if (fread(t->i, 8, t->count, f) != t->count)
            goto bad;
    }
    fclose(f);
    return 0;
bad:
    fclose(f);
    gdata_free(d);
    return -1;
}

/* max |got - want| <= atol + rtol * |want| elementwise, same type and shape; NaNs must match. */
static inline int tensor_close(const tern_host_tensor *got, const tern_host_tensor *want, double atol, double rtol,
                        char *why, size_t wl)
{
    if (!got) {
        snprintf(why, wl, "no tensor");
        return 0;
    }
    if (got->type != want->type || got->rank != want->rank) {
        snprintf(why, wl, "got %s rank %d, want %s rank %d", tern_elem_name(got->type), got->rank,
                 tern_elem_name(want->type), want->rank);
        return 0;
    }
    for (int d = 0; d < got->rank; d++)
        if (got->dims[d] != want->dims[d]) {
            snprintf(why, wl, "dim %d: got %lld, want %lld", d, (long long)got->dims[d], (long long)want->dims[d]);
            return 0;
        }
    for (size_t e = 0; e < got->count; e++) {
        double g = tern_host_tensor_get(got, e), w = tern_host_tensor_get(want, e);
        if (isnan(w) && isnan(g))
            continue;
        if (isinf(w) && g == w)
            continue;
        if (!(fabs(g - w) <= atol + rtol * fabs(w))) {
            snprintf(why, wl, "element %zu: got %.9g, want %.9g (atol %g, rtol %g)", e, g, w, atol, rtol);
            return 0;
        }
    }
    return 1;
}

static inline tern_graph *gload(const char *name)
{
    char path[512];
    gpath(path, sizeof path, name, ".onnx");
    tern_graph *g = NULL;
    tern_error err = {0};
    if (tern_graph_load_onnx(path, &g, &err)) {
        fprintf(stderr, "load %s: %s\n", path, err.msg);
        return NULL;
    }
    return g;
}

/* Runs g on the data's inputs (matched by name to the graph inputs) and compares every output. */
static inline int grun_check(const tern_graph *g, const gdata *d, double atol, double rtol, const char *what)
{
    int nin = tern_graph_input_count(g), nout = tern_graph_output_count(g), ok = 1;
    const tern_host_tensor *in[32] = {0};
    tern_host_tensor *out[32] = {0};
    for (int k = 0; k < nin && k < 32; k++) {
        const char *name = tern_graph_value_at(g, tern_graph_input_id(g, k))->name;
        for (int q = 0; q < d->n_in; q++)
            if (strcmp(d->names[q], name) == 0)
                in[k] = d->t[q];
    }
    tern_error err = {0};
    tern_status st = tern_graph_run(g, in, out, &err);
    CHECK_MSG(st == TERN_OK, "%s: run failed: %s", what, err.msg);
    if (st)
        return 0;
    CHECK_EQ_INT(nout, d->n_out);
    for (int k = 0; k < nout && k < d->n_out; k++) {
        char why[256];
        int close = tensor_close(out[k], d->t[d->n_in + k], atol, rtol, why, sizeof why);
        CHECK_MSG(close, "%s: output %d: %s", what, k, why);
        ok &= close;
        tern_host_tensor_free(out[k]);
    }
    return ok;
}

static inline int count_op(const tern_graph *g, const char *op)
{
    int n = 0;
    for (int i = 0; i < tern_graph_node_count(g); i++)
        n += strcmp(tern_graph_node_at(g, i)->op, op) == 0;
    return n;
}

#endif
