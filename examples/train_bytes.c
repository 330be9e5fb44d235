/* Example: train a model with tern's C training API (include/tern/train.h). It takes the demo transformer shipped
 * in data/models/gpt2_tiny.onnx (vocabulary 256: bytes), builds its training step (forward, cross-entropy,
 * backward, AdamW) as one graph compiled for trn1, and trains it for a few steps as a byte-level language model on
 * a text: rows of 32 bytes, each predicting the next byte. Every step runs on the simulated NeuronCore and
 * reports its loss and predicted device time.
 * Build: `make` (built as build/examples/train_bytes). Run from the top of the tree:
 *   build/examples/train_bytes [TEXT_FILE [STEPS [OUT.onnx]]]   (default /usr/share/common-licenses/GPL-3, 10)
 * The demo model starts with large random logits (loss ~17), so the few steps here cycle over the text's first
 * two rows: the loss falls as the model learns them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tern/train.h"

int main(int argc, char **argv)
{
    const char *text = argc > 1 ? argv[1] : "/usr/share/common-licenses/GPL-3";
    int steps = argc > 2 ? atoi(argv[2]) : 10;
    const char *out = argc > 3 ? argv[3] : NULL;
    /* the text's bytes; a built-in sentence when the file is missing */
    static unsigned char buf[1 << 16];
    size_t n = 0;
    FILE *f = fopen(text, "rb");
    if (f) {
        n = fread(buf, 1, sizeof buf, f);
        fclose(f);
    }
    if (n < 33) {
        const char *s = "tern trains models on a simulated NeuronCore, one compiled step graph per step. ";
        for (n = 0; n < 4096; n++)
            buf[n] = (unsigned char)s[n % strlen(s)];
    }

    tern_train_opts o;
    tern_train_opts_default(&o);
    o.loss = TERN_LOSS_CROSS_ENTROPY; /* logits [1, 32, 256] against the next bytes */
    o.optimizer = TERN_OPT_ADAMW;
    o.lr = 3e-3;
    o.clip_norm = 1.0;
    o.batch = 1; /* the model's input is [1, 32] */
    o.machine = "trn1.2xlarge";
    tern_error err;
    tern_trainer *t = NULL;
    if (tern_train_create("data/models/gpt2_tiny.onnx", &o, &t, &err)) {
        fprintf(stderr, "train_bytes: %s\n", err.msg);
        return 1;
    }
    printf("%zu weight tensors, step graph of %zu nodes, %.3g FLOPs per step\n", tern_train_weight_count(t),
           tern_train_graph_nodes(t), tern_train_model_flops(t));
    int64_t ids[32], next[32];
    double first = 0, last = 0;
    for (int s = 0; s < steps; s++) {
        size_t at = ((size_t)s % 2) * 32; /* the first two rows of the text, in turn */
        for (int k = 0; k < 32; k++) {
            ids[k] = buf[at + (size_t)k];
            next[k] = buf[at + (size_t)k + 1];
        }
        tern_train_step_info info;
        if (tern_train_step(t, ids, 32, next, 32, &info, &err)) {
            fprintf(stderr, "train_bytes: %s\n", err.msg);
            tern_train_free(t);
            return 1;
        }
        printf("step %llu: loss %.5f, grad norm %.4f, predicted %.3f ms on the device\n",
               (unsigned long long)info.step, info.loss, info.grad_norm, info.step_seconds * 1e3);
        if (s == 0)
            first = info.loss;
        last = info.loss;
    }
    if (out && tern_train_save_onnx(t, out, &err)) {
        fprintf(stderr, "train_bytes: %s\n", err.msg);
        tern_train_free(t);
        return 1;
    }
    tern_train_free(t);
    /* as a test (CTest runs the examples): ten steps on two rows halve the loss */
    if (steps >= 10 && !(last < first / 2)) {
        fprintf(stderr, "train_bytes: loss did not fall (%.5f -> %.5f)\n", first, last);
        return 1;
    }
    return 0;
}
