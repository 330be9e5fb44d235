/* Data-parallel training benchmark (issue: training, "Performance"): BERT-Large phase-1 pre-training on one
 * trn1.32xlarge, the configuration of AWS's published trn1 row (32 NeuronCores data-parallel, micro-batch 16 per
 * core, sequence 128, LAMB, BF16 weights and state with stochastic rounding: --precision bf16-sr), predicted in timing-only
 * mode through tern_train_* (src/train/data_parallel.c). The model is bench/bert_pretrain.py's (BERT-Large encoder
 * and the tied masked-LM head, 30522 tokens), generated into build/bench-models on first use.
 *
 * Compiling a 24-layer training step takes the compiler too long on a small host, so by default the step is
 * measured on 1 and 2 encoder layers (the whole embedding and MLM head each time) and the per-layer part
 * extrapolated: every encoder layer is the same program, so the gradient and update programs' times are affine in
 * the layer count, T(24) = T(1) + 23 (T(2) - T(1)). The all-reduce is not extrapolated: it is timed on the fabric
 * for the 24-layer model's gradient bytes (tern_collective_time). TERN_BENCH_BERT_LAYERS=24 measures the whole
 * model instead. Prints bert_large_train_step_s, bert_large_train_seq_per_s (one all-reduce per 512-sequence step),
 * the parts, and bert_large_train_seq_per_s_accum128: the published row's global batch 65536 (128 micro-steps per
 * all-reduce and update). When the model cannot be trained (a missing gradient lowering) the lines say why. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "tern/collective.h"
#include "tern/fabric.h"
#include "tern/train.h"

#define CORES 32
#define MICRO 16
#define SEQ 128
#define ACCUM 128 /* the published row: global batch 65536 = 128 x 32 cores x 16 */

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

typedef struct {
    double compute, update, comm, flops;
    uint64_t grad_bytes, state_rank;
    char algo[16];
} parts;

static int measure(const char *dir, int layers, int vocab, parts *p)
{
    char onnx[1024], cmd[4096];
    snprintf(onnx, sizeof onnx, "%s/bert_large_pretrain_l%d_v%d_b%d.onnx", dir, layers, vocab, MICRO);
    struct stat sb;
    if (stat(onnx, &sb) != 0) {
        snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s/bench/bert_pretrain.py %s %d 1024 16 %d %d %d > /dev/null 2>&1",
                 TERN_SOURCE_DIR, onnx, layers, vocab, SEQ, MICRO);
        if (system(cmd) != 0 || stat(onnx, &sb) != 0) {
            printf("bert_large_train: cannot generate %s (needs Debian's python3-torch)\n", onnx);
            return 1;
        }
    }
    tern_train_opts o;
    tern_train_opts_default(&o);
    o.loss = TERN_LOSS_CROSS_ENTROPY;
    o.optimizer = TERN_OPT_LAMB;
    o.lr = 6e-3;
    o.batch = (int64_t)CORES * MICRO;
    o.machine = "trn1.32xlarge";
    o.ranks = CORES;
    o.matmul_dtype = TERN_DTYPE_BF16; /* BF16 with stochastic rounding, the published row's precision */
    o.bf16_weights = 1;
    o.rounding = TERN_ROUND_STOCHASTIC;
    o.timing_only = 1;
    tern_trainer *t = NULL;
    tern_error err;
    tern_error_clear(&err);
    double t0 = now();
    if (tern_train_create(onnx, &o, &t, &err)) {
        printf("bert_large_train: %d layers: %s\n", layers, err.msg);
        return 1;
    }
    double t1 = now();
    tern_train_step_info info;
    if (tern_train_step(t, NULL, 0, NULL, 0, &info, &err)) {
        printf("bert_large_train: %d layers, step: %s\n", layers, err.msg);
        tern_train_free(t);
        return 1;
    }
    tern_train_dp_info d;
    tern_train_dp_stats(t, &d);
    p->compute = d.compute_seconds;
    p->update = d.update_seconds;
    p->comm = d.comm_seconds;
    p->grad_bytes = d.grad_bytes;
    p->state_rank = d.state_bytes_per_rank;
    p->flops = tern_train_model_flops(t);
    snprintf(p->algo, sizeof p->algo, "%s", d.algorithm);
    printf("bert_large_train_l%d: step %.4f s (forward+backward %.4f, all-reduce %.4f %s, update %.4f), %.1f MiB "
           "of gradients; host: create %.1f s, step %.1f s\n",
           layers, info.step_seconds, p->compute, p->comm, p->algo, p->update, (double)p->grad_bytes / 1048576.0,
           t1 - t0, now() - t1);
    tern_train_free(t);
    return 0;
}

int main(void)
{
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/bench-models", TERN_BINARY_DIR);
    mkdir(dir, 0755);
    const char *ls = getenv("TERN_BENCH_BERT_LAYERS"), *vs = getenv("TERN_BENCH_BERT_VOCAB");
    int full = ls && atoi(ls) == 24, vocab = vs && atoi(vs) > 0 ? atoi(vs) : 30522;
    parts a, b, r;
    memset(&r, 0, sizeof r);
    if (full) {
        if (measure(dir, 24, vocab, &r))
            goto unavailable;
    } else {
        if (measure(dir, 1, vocab, &a) || measure(dir, 2, vocab, &b))
            goto unavailable;
        r.compute = a.compute + 23 * (b.compute - a.compute);
        r.update = a.update + 23 * (b.update - a.update);
        r.flops = a.flops + 23 * (b.flops - a.flops);
        r.grad_bytes = a.grad_bytes + 23 * (b.grad_bytes - a.grad_bytes);
        /* the 24-layer all-reduce, timed on the fabric for its bytes */
        tern_fabric_opts fo;
        memset(&fo, 0, sizeof fo);
        fo.ranks = CORES;
        tern_fabric *f = NULL;
        tern_error err;
        tern_error_clear(&err);
        tern_coll_desc cd;
        memset(&cd, 0, sizeof cd);
        cd.op = TERN_COLL_ALL_REDUCE;
        cd.reduce = TERN_REDUCE_SUM;
        cd.dtype = TERN_DTYPE_FP32;
        cd.count = r.grad_bytes / 4;
        cd.algo = TERN_ALGO_AUTO;
        tern_coll_result res;
        if (tern_fabric_load("trn1.32xlarge", &fo, &f, &err) || tern_collective_time(f, &cd, &res, &err)) {
            printf("bert_large_train: all-reduce: %s\n", err.msg);
            tern_fabric_free(f);
            return 1;
        }
        r.comm = (double)res.time_ps * 1e-12;
        snprintf(r.algo, sizeof r.algo, "%s", tern_coll_algo_name(res.algo));
        tern_fabric_free(f);
    }
    double step = r.compute + r.comm + r.update, seqs = (double)CORES * MICRO;
    double accum = ACCUM * r.compute + r.comm + r.update;
    printf("bert_large_train_layers: %s\n", full ? "24 (measured)" : "24 (1 and 2 measured, per layer extrapolated)");
    printf("bert_large_train_step_s: %.4f\n", step);
    printf("bert_large_train_seq_per_s: %.1f\n", seqs / step);
    printf("bert_large_train_forward_backward_s: %.4f\n", r.compute);
    printf("bert_large_train_allreduce_s: %.4f (%s, %.1f MiB, exposed)\n", r.comm, r.algo,
           (double)r.grad_bytes / 1048576.0);
    printf("bert_large_train_update_s: %.4f\n", r.update);
    printf("bert_large_train_seq_per_s_accum128: %.1f (global batch %d, published trn1.32xlarge row: 4137.9)\n",
           seqs * ACCUM / accum, CORES * MICRO * ACCUM);
    return 0;
unavailable:
    printf("bert_large_train_step_s: unavailable (above)\n");
    printf("bert_large_train_seq_per_s: unavailable (above)\n");
    return 0;
}
