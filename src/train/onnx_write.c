/* Writes the trained model as ONNX. Rather than serialising tern's IR (which the compiler has rewritten into
 * the training step), the input file is decoded again with the protobuf-c bindings the importer uses, the
 * trained weights replace their initializers' data (as little-endian raw_data, fp32), and the message is encoded
 * back: names, dynamic axes, opset, nodes and every other field stay as the user's exporter wrote them, so the
 * result runs anywhere the input did (`tern run`, onnxruntime, onnx.numpy_helper); only a Dropout exported in
 * training mode is switched to inference mode. The file is written to a
 * temporary name and renamed, so a failed write never leaves half a model at the destination. */
#include "train_internal.h"

#include "onnx.pb-c.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static tern_status read_all(const char *path, uint8_t **buf, size_t *len, tern_error *err)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return tern_error_set(err, TERN_ERR_IO, "train: cannot open '%s': %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    uint8_t *b = malloc(cap);
    while (b) {
        size_t r = fread(b + n, 1, cap - n, f);
        n += r;
        if (n < cap)
            break;
        uint8_t *nb = realloc(b, cap * 2);
        if (!nb) {
            free(b);
            b = NULL;
            break;
        }
        b = nb;
        cap *= 2;
    }
    int bad = ferror(f);
    fclose(f);
    if (!b)
        return tern_error_set(err, TERN_ERR_NOMEM, "train: out of memory reading '%s'", path);
    if (bad) {
        free(b);
        return tern_error_set(err, TERN_ERR_IO, "train: error reading '%s'", path);
    }
    *buf = b;
    *len = n;
    return TERN_OK;
}

static tern_status replace_data(Onnx__TensorProto *tp, const train_weight *w, tern_error *err)
{
    uint8_t *raw = malloc(w->count * 4 + 1);
    if (!raw)
        return tern_error_set(err, TERN_ERR_NOMEM, "train: out of memory");
    for (size_t i = 0; i < w->count; i++) {
        uint32_t u;
        memcpy(&u, &w->val[i], 4);
        raw[4 * i] = (uint8_t)u;
        raw[4 * i + 1] = (uint8_t)(u >> 8);
        raw[4 * i + 2] = (uint8_t)(u >> 16);
        raw[4 * i + 3] = (uint8_t)(u >> 24);
    }
    free(tp->float_data);
    tp->float_data = NULL;
    tp->n_float_data = 0;
    free(tp->raw_data.data);
    tp->raw_data.data = raw;
    tp->raw_data.len = w->count * 4;
    tp->has_raw_data = 1;
    tp->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    tp->has_data_type = 1;
    return TERN_OK;
}

tern_status tern_train_save_onnx(const tern_trainer *t, const char *path, tern_error *err)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    tern_status st = train_sync_host(t, err); /* device-resident weights: the current ones */
    if (!st)
        st = read_all(t->path, &buf, &len, err);
    if (st)
        return st;
    Onnx__ModelProto *m = onnx__model_proto__unpack(NULL, len, buf);
    free(buf);
    if (!m || !m->graph) {
        if (m)
            onnx__model_proto__free_unpacked(m, NULL);
        return tern_error_set(err, TERN_ERR_PARSE, "train: '%s' no longer decodes as an ONNX model", t->path);
    }
    Onnx__GraphProto *gp = m->graph;
    for (size_t i = 0; i < t->nw && !st; i++) {
        const train_weight *w = &t->w[i];
        size_t k = 0;
        while (k < gp->n_initializer && strcmp(gp->initializer[k]->name ? gp->initializer[k]->name : "", w->name))
            k++;
        if (k == gp->n_initializer)
            st = tern_error_set(err, TERN_ERR_NOT_FOUND, "train: initializer '%s' is no longer in '%s'", w->name,
                                t->path);
        else
            st = replace_data(gp->initializer[k], w, err);
    }
    /* Dropout exported in training mode (training_mode = true) becomes the inference-mode identity in the trained
     * model, as model.eval() would export it: its training_mode input is dropped (the default is false). */
    for (size_t i = 0; i < gp->n_node && !st; i++) {
        Onnx__NodeProto *np = gp->node[i];
        tern_op_id op = tern_op_lookup(np->domain, np->op_type); /* the registry names the op, not a strcmp here */
        if (op == TERN_GOP_DROPOUT && np->n_input >= 3) {
            for (size_t k = 2; k < np->n_input; k++)
                free(np->input[k]);
            np->n_input = 2;
        }
        /* BatchNormalization exported in training mode (training_mode = 1, PyTorch's TrainingMode.TRAINING) becomes
         * the inference-mode node of model.eval(), which reads the running statistics tern train updated: the
         * attribute set to 0 and the running-statistic outputs dropped (kept when the graph outputs one) */
        if (op == TERN_GOP_BATCH_NORMALIZATION) {
            int out = 0;
            for (size_t k = 1; k < np->n_output; k++)
                for (size_t j = 0; j < gp->n_output; j++)
                    out |= np->output[k] && gp->output[j]->name && !strcmp(np->output[k], gp->output[j]->name);
            for (size_t k = 0; k < np->n_attribute && !out; k++)
                if (np->attribute[k]->name && !strcmp(np->attribute[k]->name, "training_mode"))
                    np->attribute[k]->i = 0;
            for (size_t k = 1; k < np->n_output && !out; k++)
                free(np->output[k]);
            if (!out && np->n_output > 1)
                np->n_output = 1;
        }
    }
    size_t n = st ? 0 : onnx__model_proto__get_packed_size(m);
    uint8_t *out = st ? NULL : malloc(n + 1);
    if (!st && !out)
        st = tern_error_set(err, TERN_ERR_NOMEM, "train: out of memory");
    if (!st)
        onnx__model_proto__pack(m, out);
    onnx__model_proto__free_unpacked(m, NULL);
    if (st) {
        free(out);
        return st;
    }
    size_t pl = strlen(path) + 16;
    char *tmp = malloc(pl);
    if (!tmp) {
        free(out);
        return tern_error_set(err, TERN_ERR_NOMEM, "train: out of memory");
    }
    snprintf(tmp, pl, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        st = tern_error_set(err, TERN_ERR_IO, "train: cannot write '%s': %s", tmp, strerror(errno));
    } else {
        size_t wr = fwrite(out, 1, n, f);
        int bad = fclose(f) != 0 || wr != n;
        if (bad)
            st = tern_error_set(err, TERN_ERR_IO, "train: writing '%s' failed after %zu of %zu bytes", tmp, wr, n);
        else if (rename(tmp, path) != 0)
            st = tern_error_set(err, TERN_ERR_IO, "train: cannot rename '%s' to '%s': %s", tmp, path, strerror(errno));
        if (st)
            remove(tmp);
    }
    free(tmp);
    free(out);
    return st;
}
