/* `tern train`: trains an ONNX model on the simulated NeuronCore through the tern_train_* API (train.h). It
 * reads the data and labels (.npy), takes batches of consecutive rows wrapping around at the end (or of a seeded
 * permutation of the rows with --shuffle SEED), runs the compiled training step per batch and prints per step the
 * loss, the gradient norm, the predicted step time, samples/s and MFU; it writes the trained model as ONNX.
 * Under `mpirun -np K` data-parallel ranks spread over the processes (docs/training.md, "Over MPI processes"):
 * every process reads the data and runs its own ranks; process 0 prints and writes every file. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "tern/npy.h"
#include "tern/runtime.h"
#include "tern/train.h"
#include "tern/transport.h"

static double host_now(void) /* --progress: host seconds */
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: tern train MODEL.onnx --data [NAME=]X.npy ... [--labels Y.npy] [options]\n"
            "\n"
            "Trains the model's float initializers (those of two or more elements) on the simulated NeuronCore: one\n"
            "compiled graph per step (forward, loss, backward, gradient norm, optimizer update).\n"
            "\n"
            "  --data FILE           rows of the model's data input (axis 0 = samples)\n"
            "  --data NAME=FILE      the rows of input NAME; repeat for a model with several inputs (each input\n"
            "                        that is not an initializer needs one; all files the same row count, and a\n"
            "                        batch takes the same rows of each)\n"
            "  --labels FILE         class indices (cross-entropy) or targets (mse), one row per sample\n"
            "  --loss KIND           cross-entropy (default) | mse | output\n"
            "  --loss-output NAME    train on a scalar output the model computes (implies --loss output)\n"
            "  --output NAME         the model output the loss reads (default: the first)\n"
            "  --ignore-index N      cross-entropy: label that counts for nothing (default -100)\n"
            "  --label-smoothing E   cross-entropy: in [0, 1) (default 0)\n"
            "  --optimizer NAME      sgd | adam | adamw | lamb (default adamw)\n"
            "  --lr X                learning rate (default 1e-3)\n"
            "  --lr-schedule S       constant (default) | linear | cosine decay to 0 at --steps\n"
            "  --warmup N            linear warm-up over the first N steps\n"
            "  --momentum X          sgd momentum (default 0); --nesterov for Nesterov momentum\n"
            "  --weight-decay X      default 0.01 for adamw and lamb (decoupled), 0 for sgd and adam (added to the\n"
            "                        gradient)\n"
            "  --beta1 X --beta2 X --eps X   adam/adamw (0.9, 0.999, 1e-8)\n"
            "  --clip-norm X         clip gradients by their global norm\n"
            "  --steps N             steps (default 100); --batch B rows per step (default 32)\n"
            "  --accumulate K        sum the gradients of K micro-batches of B rows before each update\n"
            "  --shuffle SEED        batches from a seeded permutation of the rows (docs/training.md)\n"
            "  --precision P         fp32 (default) | bf16 (matmul operands) | bf16-sr (BF16 weights and state,\n"
            "                        updates stochastically rounded) | bf16-rne (the same, round to nearest even)\n"
            "  --seed N              Dropout (training mode) masks: their seed (default 0; docs/training.md)\n"
            "  --no-fused-attention  attention blocks' backward node by node, not one fused tern.AttentionGrad\n"
            "  --no-fused-optimizer  the optimizer update node by node, not one fused tern.SGDUpdate/AdamUpdate\n"
            "  --no-fuse-elementwise every elementwise node lowered on its own, not chains as one pass over SBUF\n"
            "                        (the same bits; for comparisons)\n"
            "  --freeze NAME         keep initializer NAME (or a glob: 'blocks.*.cos') constant, untrained;\n"
            "                        repeatable. Additive attention masks are constant by default\n"
            "                        (--no-auto-freeze trains them; docs/training.md)\n"
            "  --recompute           activation recomputation: keep only the inputs of about sqrt(n) forward\n"
            "                        segments, recompute each before its backward (--recompute-segments N: N)\n"
            "  --machine M           target machine (default trn1.2xlarge)\n"
            "  --cores N             data parallelism over N NeuronCores of the machine (its rank order): each runs\n"
            "                        batch / N rows, gradients all-reduced before every rank's update; under\n"
            "                        `mpirun -np K` the ranks' chips spread over K processes, the same output\n"
            "                        (process 0 prints and writes; docs/training.md \"Over MPI processes\")\n"
            "  --layout tp=A,pp=B,dp=C[,micro=M]  tensor x pipeline x data parallelism over A*B*C cores: Megatron\n"
            "                        linear pairs split over A ranks, the linear layers in B stages (M micro-batches,\n"
            "                        default B, on a 1F1B schedule), C data replicas (docs/training.md); vpp=V:\n"
            "                        interleaved 1F1B, B x V model chunks, V per stage (M a multiple of B); sp=1\n"
            "                        (A > 1): sequence parallelism, the norms between the pairs on 1/A of the rows\n"
            "  --zero 1              ZeRO stage 1: optimizer state sharded over the ranks (reduce-scatter, shard\n"
            "                        update, all-gather)\n"
            "  --dp-exact            fixed reduction tree: gradients summed over --dp-chunks K row chunks (default\n"
            "                        N; powers of two) in one tree for any N, so 1, 2, 4, ... cores agree bit for bit\n"
            "  -o FILE               write the trained model (ONNX)\n"
            "  --dump-grads DIR      write the last step's gradients as DIR/<weight>.npy\n"
            "  --checkpoint DIR      write DIR/checkpoint.tck (weights, optimizer state, step, data position) at the\n"
            "                        end and with --every K every K steps; atomic (written, then renamed)\n"
            "  --resume DIR          continue from DIR/checkpoint.tck up to --steps in all (bit-exact)\n"
            "  --timing-only         predict the step time without values\n"
            "  --progress            host progress on stderr: the step graph's build time, then after each step\n"
            "                        the host time elapsed and the estimated time left\n"
            "  --json                one JSON object on stdout instead of per-step lines\n");
}

/* splitmix64: the permutation's generator (also written out in docs/training.md and the tests' Python) */
static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* One --data: the input it names (NULL: the model's only one), the file, its values as floats or int64. */
#define MAX_DATA 64
typedef struct {
    const char *arg, *file;
    char name[256];
    int named;
    tern_npy npy;
    void *vals, *batch;
    int is_int;
    size_t row, esz;
} data_in;

static int fail(const char *msg)
{
    fprintf(stderr, "tern train: %s\n", msg);
    return 1;
}

/* A run under mpirun. Process 0 speaks for it; the others' stdout goes to /dev/null and their stderr to a
 * temporary file (cap), which they write to their real stderr only for a failure process 0 did not meet (a file
 * only one host lacks, memory): a deterministic error, which every process meets, is printed once. */
typedef struct {
    const tern_transport *tr;
    int realerr; /* a process other than 0: its real stderr */
    FILE *cap;
    int known;   /* every process knows the run failed (each returns 1 without another round) */
} mpi_run;

/* Every process calls this at the same points, with whether it failed since the last (the steps' own failures are
 * agreed inside tern_train_step_inputs): 1 when any did. Of processes failing where process 0 did not, the lowest
 * releases its captured messages. One process: `failed` itself. */
static int any_failed(mpi_run *m, int failed)
{
    if (!m)
        return failed;
    const tern_transport *tr = m->tr;
    uint64_t v[3] = {(uint64_t)(failed != 0), (uint64_t)(failed && tr->me == 0), failed ? tr->nprocs - tr->me : 0};
    tern_error e;
    fflush(stderr);
    if (tr->allreduce(tr->ctx, v, 3, TERN_XOP_MAX, &e))
        tr->abort(tr->ctx, e.msg);
    if (m->cap && failed && !v[1] && tr->nprocs - v[2] == tr->me) {
        dprintf(m->realerr, "tern train: process %u of %u stopped (process 0 did not):\n", tr->me, tr->nprocs);
        char buf[4096];
        ssize_t n;
        off_t at = 0;
        while ((n = pread(fileno(m->cap), buf, sizeof buf, at)) > 0) {
            at += n;
            if (write(m->realerr, buf, (size_t)n) != n)
                break;
        }
    }
    if (m->cap && ftruncate(fileno(m->cap), 0) == 0)
        lseek(fileno(m->cap), 0, SEEK_SET);
    if (v[0])
        m->known = 1;
    return v[0] != 0;
}

static int train_main(int argc, char **argv, mpi_run *mr);

int tern_cmd_train(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        }
    tern_transport *tr = NULL;
    tern_error err = {0};
    if (tern_mpi_init(&argc, &argv, &tr, &err)) {
        if (tern_mpi_launched_rank() == 0)
            fprintf(stderr, "tern train: %s\n", err.msg);
        return 1;
    }
    if (!tr)
        return train_main(argc, argv, NULL);
    mpi_run m = {tr, -1, NULL, 0};
    if (tr->me != 0) {
        fflush(stderr);
        m.realerr = dup(2);
        m.cap = tmpfile();
        if (m.realerr < 0 || !m.cap || !freopen("/dev/null", "w", stdout) || dup2(fileno(m.cap), 2) < 0)
            tr->abort(tr->ctx, "tern train: cannot silence a process other than 0");
    }
    int rc = train_main(argc, argv, &m);
    uint64_t v = (uint64_t)rc; /* one exit status for every process */
    if (tr->allreduce(tr->ctx, &v, 1, TERN_XOP_MAX, &err) == TERN_OK)
        rc = (int)v;
    if (m.cap)
        fclose(m.cap);
    if (m.realerr >= 0)
        close(m.realerr);
    tern_mpi_finalize(tr);
    return rc;
}

static int train_main(int argc, char **argv, mpi_run *mr)
{
    const char *model = NULL, *labels = NULL, *outp = NULL, *dump = NULL, *loss = "cross-entropy";
    const char *ckpt = NULL, *resume = NULL;
    data_in din[MAX_DATA];
    size_t ndata = 0;
    tern_train_input_rows bind[MAX_DATA];
    tern_train_data feed[MAX_DATA];
    memset(din, 0, sizeof din);
    int64_t every = 0;
    const char *opt_name = "adamw", *prec = "fp32", *sched = "constant";
    int64_t steps = 100, batch = 32, ignore = -100, warmup = 0;
    uint64_t seed = 0;
    int shuffle = 0, json = 0, timing = 0, wd_given = 0, progress = 0;
    tern_train_opts o;
    tern_train_opts_default(&o);
    const char *freeze[64];
    o.freeze = freeze;
    int rc;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
#define VAL(what)                                                                                                      \
    if (!(v = tern_arg_value("train", argc, argv, &i, what)))                                                         \
        return 2;
#define FLT(field, lo, hi)                                                                                             \
    do {                                                                                                               \
        VAL("a number");                                                                                               \
        if ((rc = tern_arg_float("train", a, v, lo, hi, &field)))                                                      \
            return rc;                                                                                                 \
    } while (0)
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--data")) {
            VAL("a .npy file");
            const char *eq = strchr(v, '=');
            if (ndata == MAX_DATA) {
                fprintf(stderr, "tern train: more than %d --data inputs\n", MAX_DATA);
                return 2;
            }
            data_in *di = &din[ndata];
            di->arg = v;
            di->file = eq ? eq + 1 : v;
            di->named = eq != NULL;
            if (eq && (eq == v || (size_t)(eq - v) >= sizeof di->name || !eq[1])) {
                fprintf(stderr, "tern train: --data '%s': expected NAME=FILE (a non-empty input name and file)\n", v);
                return 2;
            }
            if (eq)
                memcpy(di->name, v, (size_t)(eq - v));
            for (size_t k = 0; k < ndata; k++) {
                if (!di->named || !din[k].named) {
                    fprintf(stderr, "tern train: --data '%s' and --data '%s': several data inputs are each named "
                                    "(--data NAME=FILE)\n", din[k].arg, v);
                    return 2;
                }
                if (!strcmp(din[k].name, di->name)) {
                    fprintf(stderr, "tern train: --data: input '%s' is given twice ('%s' and '%s')\n", di->name,
                            din[k].file, di->file);
                    return 2;
                }
            }
            ndata++;
        } else if (!strcmp(a, "--labels")) {
            VAL("a .npy file");
            labels = v;
        } else if (!strcmp(a, "--loss")) {
            VAL("cross-entropy, mse or output");
            loss = v;
        } else if (!strcmp(a, "--loss-output")) {
            VAL("an output name");
            o.output = v;
            loss = "output";
        } else if (!strcmp(a, "--output")) {
            VAL("an output name");
            o.output = v;
        } else if (!strcmp(a, "--ignore-index")) {
            VAL("an integer");
            if ((rc = tern_arg_int("train", a, v, INT64_MIN, INT64_MAX, &ignore)))
                return rc;
        } else if (!strcmp(a, "--label-smoothing")) {
            FLT(o.label_smoothing, 0, 0.999999);
        } else if (!strcmp(a, "--optimizer")) {
            VAL("sgd, adam or adamw");
            opt_name = v;
        } else if (!strcmp(a, "--lr")) {
            FLT(o.lr, 0, 1e6);
        } else if (!strcmp(a, "--lr-schedule")) {
            VAL("constant, linear or cosine");
            sched = v;
        } else if (!strcmp(a, "--warmup")) {
            VAL("a step count");
            if ((rc = tern_arg_int("train", a, v, 0, 100000000, &warmup)))
                return rc;
        } else if (!strcmp(a, "--momentum")) {
            FLT(o.momentum, 0, 1);
        } else if (!strcmp(a, "--nesterov")) {
            o.nesterov = 1;
        } else if (!strcmp(a, "--weight-decay")) {
            FLT(o.weight_decay, 0, 1e6);
            wd_given = 1;
        } else if (!strcmp(a, "--beta1")) {
            FLT(o.beta1, 0, 0.999999999);
        } else if (!strcmp(a, "--beta2")) {
            FLT(o.beta2, 0, 0.999999999);
        } else if (!strcmp(a, "--eps")) {
            FLT(o.eps, 1e-30, 1);
        } else if (!strcmp(a, "--clip-norm")) {
            FLT(o.clip_norm, 1e-12, 1e12);
        } else if (!strcmp(a, "--steps")) {
            VAL("a count");
            if ((rc = tern_arg_int("train", a, v, 1, 100000000, &steps)))
                return rc;
        } else if (!strcmp(a, "--batch")) {
            VAL("a count");
            if ((rc = tern_arg_int("train", a, v, 1, 1 << 24, &batch)))
                return rc;
        } else if (!strcmp(a, "--accumulate")) {
            VAL("a micro-batch count");
            if ((rc = tern_arg_int("train", a, v, 1, 1 << 16, &o.accumulate)))
                return rc;
        } else if (!strcmp(a, "--shuffle")) {
            VAL("a seed");
            if ((rc = tern_arg_uint("train", a, v, 0, INT64_MAX, &seed)))
                return rc;
            shuffle = 1;
        } else if (!strcmp(a, "--seed")) {
            VAL("a seed");
            if ((rc = tern_arg_uint("train", a, v, 0, UINT64_MAX, &o.seed)))
                return rc;
        } else if (!strcmp(a, "--precision")) {
            VAL("fp32, bf16, bf16-sr or bf16-rne");
            prec = v;
        } else if (!strcmp(a, "--machine")) {
            VAL("a machine");
            o.machine = v;
        } else if (!strcmp(a, "--layout")) { /* tp=A,pp=B,dp=C[,micro=M]: tensor x pipeline x data parallelism */
            VAL("a layout (tp=A,pp=B,dp=C[,micro=M])");
            char buf[256];
            snprintf(buf, sizeof buf, "%s", v);
            for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
                char *eq = strchr(tok, '=');
                int64_t *dst = NULL, val, spv = 0;
                if (eq) {
                    *eq = 0;
                    dst = !strcmp(tok, "tp") ? &o.tp : !strcmp(tok, "pp") ? &o.pp : !strcmp(tok, "dp") ? &o.ranks
                          : !strcmp(tok, "micro") ? &o.micro : !strcmp(tok, "vpp") ? &o.vpp
                          : !strcmp(tok, "sp") ? &spv : NULL;
                }
                if (!dst) {
                    fprintf(stderr,
                            "tern train: --layout '%s': '%s' is not tp=N, pp=N, dp=N, vpp=N, micro=N or sp=0|1\n", v,
                            tok);
                    return 2;
                }
                if ((rc = tern_arg_int("train", "--layout", eq + 1, dst == &spv ? 0 : 1, dst == &spv ? 1 : 1 << 20,
                                       &val)))
                    return rc;
                *dst = val;
                if (dst == &spv) /* sequence parallelism (docs/training.md) */
                    o.sp = (int)spv;
            }
        } else if (!strcmp(a, "--cores")) {
            VAL("a core count");
            if ((rc = tern_arg_int("train", a, v, 1, 1 << 20, &o.ranks)))
                return rc;
        } else if (!strcmp(a, "--zero")) {
            VAL("a ZeRO stage");
            int64_t z;
            if ((rc = tern_arg_int("train", a, v, 0, 1, &z)))
                return rc;
            o.zero = (int)z;
        } else if (!strcmp(a, "--dp-exact")) {
            o.dp_exact = 1;
        } else if (!strcmp(a, "--dp-chunks")) {
            VAL("a chunk count");
            if ((rc = tern_arg_int("train", a, v, 1, 1 << 20, &o.dp_chunks)))
                return rc;
        } else if (!strcmp(a, "-o")) {
            VAL("an output file");
            outp = v;
        } else if (!strcmp(a, "--dump-grads")) {
            VAL("a directory");
            dump = v;
        } else if (!strcmp(a, "--checkpoint")) {
            VAL("a directory");
            ckpt = v;
        } else if (!strcmp(a, "--every")) {
            VAL("a step count");
            if ((rc = tern_arg_int("train", a, v, 1, 100000000, &every)))
                return rc;
        } else if (!strcmp(a, "--resume")) {
            VAL("a directory");
            resume = v;
        } else if (!strcmp(a, "--no-fused-attention")) {
            o.no_fused_attention = 1;
        } else if (!strcmp(a, "--no-fused-optimizer")) {
            o.no_fused_optimizer = 1;
        } else if (!strcmp(a, "--no-fuse-elementwise")) {
            o.no_fused_elementwise = 1;
        } else if (!strcmp(a, "--freeze")) {
            VAL("an initializer name or glob");
            if (o.n_freeze == sizeof freeze / sizeof *freeze) {
                fprintf(stderr, "tern train: more than %zu --freeze patterns\n", sizeof freeze / sizeof *freeze);
                return 2;
            }
            freeze[o.n_freeze++] = v;
        } else if (!strcmp(a, "--no-auto-freeze")) {
            o.no_auto_freeze = 1;
        } else if (!strcmp(a, "--recompute")) {
            o.recompute = -1;
        } else if (!strcmp(a, "--recompute-segments")) {
            int64_t nseg;
            VAL("a segment count");
            if ((rc = tern_arg_int("train", a, v, 2, 1 << 16, &nseg)))
                return rc;
            o.recompute = (int)nseg;
        } else if (!strcmp(a, "--timing-only")) {
            timing = 1;
        } else if (!strcmp(a, "--progress")) {
            progress = 1;
        } else if (!strcmp(a, "--json")) {
            json = 1;
        } else if (a[0] == '-') {
            fprintf(stderr, "tern train: unknown option '%s'\n", a);
            return 2;
        } else if (!model) {
            model = a;
        } else {
            fprintf(stderr, "tern train: one model expected, got '%s' too\n", a);
            return 2;
        }
#undef VAL
#undef FLT
    }
    if (!model) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(loss, "cross-entropy"))
        o.loss = TERN_LOSS_CROSS_ENTROPY;
    else if (!strcmp(loss, "mse"))
        o.loss = TERN_LOSS_MSE;
    else if (!strcmp(loss, "output"))
        o.loss = TERN_LOSS_OUTPUT;
    else {
        fprintf(stderr, "tern train: --loss '%s': expected cross-entropy, mse or output\n", loss);
        return 2;
    }
    if (!strcmp(opt_name, "sgd"))
        o.optimizer = TERN_OPT_SGD;
    else if (!strcmp(opt_name, "adam"))
        o.optimizer = TERN_OPT_ADAM;
    else if (!strcmp(opt_name, "adamw"))
        o.optimizer = TERN_OPT_ADAMW;
    else if (!strcmp(opt_name, "lamb"))
        o.optimizer = TERN_OPT_LAMB;
    else {
        fprintf(stderr, "tern train: --optimizer '%s': expected sgd, adam, adamw or lamb\n", opt_name);
        return 2;
    }
    if (!wd_given)
        o.weight_decay = o.optimizer == TERN_OPT_ADAMW || o.optimizer == TERN_OPT_LAMB ? 0.01 : 0;
    if (!strcmp(sched, "constant"))
        o.schedule = TERN_LR_CONSTANT;
    else if (!strcmp(sched, "linear"))
        o.schedule = TERN_LR_LINEAR;
    else if (!strcmp(sched, "cosine"))
        o.schedule = TERN_LR_COSINE;
    else {
        fprintf(stderr, "tern train: --lr-schedule '%s': expected constant, linear or cosine\n", sched);
        return 2;
    }
    o.warmup_steps = warmup;
    o.total_steps = steps;
    if (!strcmp(prec, "fp32"))
        o.matmul_dtype = TERN_DTYPE_FP32;
    else if (!strcmp(prec, "bf16"))
        o.matmul_dtype = TERN_DTYPE_BF16;
    else if (!strcmp(prec, "bf16-sr") || !strcmp(prec, "bf16-rne")) { /* pure BF16; -rne shows what SR fixes */
        o.matmul_dtype = TERN_DTYPE_BF16;
        o.bf16_weights = 1;
        o.rounding = prec[5] == 's' ? TERN_ROUND_STOCHASTIC : TERN_ROUND_RNE;
    } else {
        fprintf(stderr, "tern train: --precision '%s': expected fp32, bf16, bf16-sr or bf16-rne\n", prec);
        return 2;
    }
    o.ignore_index = ignore;
    o.batch = batch;
    o.timing_only = timing;
    o.grads_as_outputs = dump != NULL;
    o.transport = mr ? mr->tr : NULL;
    int writer = !mr || mr->tr->me == 0; /* process 0 alone prints progress and writes files */
    if (!writer)
        progress = 0;
    if (o.loss != TERN_LOSS_OUTPUT && !labels) {
        fprintf(stderr, "tern train: --loss %s needs --labels\n", loss);
        return 2;
    }

    tern_error err;
    tern_error_clear(&err);
    tern_npy Y;
    memset(&Y, 0, sizeof Y);
    float *yf = NULL, *by = NULL;
    int64_t *yi = NULL, *byi = NULL, *perm = NULL;
    tern_trainer *t = NULL;
    rc = 1;
    int64_t rows = 0;
    size_t lrow = 0;
    for (size_t k = 0; k < ndata; k++) {
        data_in *di = &din[k];
        tern_npy *X = &di->npy;
        if (tern_npy_read(di->file, X, &err)) {
            fail(err.msg);
            goto done;
        }
        di->is_int = X->type == TERN_NPY_I64 || X->type == TERN_NPY_I32;
        if (X->type != TERN_NPY_F32 && X->type != TERN_NPY_F64 && !di->is_int) {
            fprintf(stderr, "tern train: data '%s': dtype %s, expected float32 (or float64), or int64 token ids\n",
                    di->file, tern_npy_type_descr(X->type));
            goto done;
        }
        if (X->rank < 1 || X->dims[0] < 1) {
            fprintf(stderr, "tern train: data '%s': needs at least one row (axis 0 = samples)\n", di->file);
            goto done;
        }
        if (k && X->dims[0] != rows) {
            fprintf(stderr, "tern train: data '%s' has %lld rows, data '%s' %lld: every input needs the same rows "
                            "(axis 0 = samples)\n",
                    di->file, (long long)X->dims[0], din[0].file, (long long)rows);
            goto done;
        }
        rows = X->dims[0];
        tern_train_input_rows *br = &bind[k];
        memset(br, 0, sizeof *br);
        br->name = di->name;
        br->row_rank = X->rank - 1;
        for (int d = 1; d < X->rank; d++)
            br->row_dims[d - 1] = X->dims[d];
        uint64_t n = tern_npy_count(X);
        di->row = (size_t)(n / (uint64_t)rows);
        di->esz = di->is_int ? sizeof(int64_t) : sizeof(float);
        di->vals = malloc(di->esz * (n + 1));
        if (!di->vals)
            goto done;
        for (uint64_t e = 0; e < n; e++) {
            double v = tern_npy_get(X, e);
            if (di->is_int)
                ((int64_t *)di->vals)[e] = (int64_t)v;
            else
                ((float *)di->vals)[e] = (float)v;
        }
    }
    if (ndata == 1 && !din[0].named) { /* the model's only data input */
        o.row_rank = bind[0].row_rank;
        memcpy(o.row_dims, bind[0].row_dims, sizeof o.row_dims);
    } else if (ndata) {
        o.inputs = bind;
        o.n_inputs = ndata;
    }
    if (labels) {
        if (tern_npy_read(labels, &Y, &err)) {
            fail(err.msg);
            goto done;
        }
        if (Y.rank < 1 || (ndata && Y.dims[0] != rows)) {
            fprintf(stderr, "tern train: labels '%s': %lld rows, the data has %lld\n", labels,
                    Y.rank ? (long long)Y.dims[0] : 0LL, (long long)rows);
            goto done;
        }
        if (!ndata)
            rows = Y.dims[0];
        uint64_t n = tern_npy_count(&Y);
        lrow = (size_t)(n / (uint64_t)rows);
        int is_int = Y.type == TERN_NPY_I64 || Y.type == TERN_NPY_I32 || Y.type == TERN_NPY_I16 ||
                     Y.type == TERN_NPY_I8 || Y.type == TERN_NPY_U8 || Y.type == TERN_NPY_U16 ||
                     Y.type == TERN_NPY_U32;
        if (o.loss == TERN_LOSS_CROSS_ENTROPY && !is_int) {
            fprintf(stderr, "tern train: labels '%s': dtype %s, cross-entropy expects integer class indices\n",
                    labels, tern_npy_type_descr(Y.type));
            goto done;
        }
        if (o.loss == TERN_LOSS_MSE && Y.type != TERN_NPY_F32 && Y.type != TERN_NPY_F64) {
            fprintf(stderr, "tern train: labels '%s': dtype %s, mse expects float32 targets\n", labels,
                    tern_npy_type_descr(Y.type));
            goto done;
        }
        if (is_int) {
            yi = malloc(sizeof(int64_t) * (n + 1));
            if (!yi)
                goto done;
            for (uint64_t k = 0; k < n; k++)
                yi[k] = (int64_t)tern_npy_get(&Y, k);
        } else {
            yf = malloc(sizeof(float) * (n + 1));
            if (!yf)
                goto done;
            for (uint64_t k = 0; k < n; k++)
                yf[k] = (float)tern_npy_get(&Y, k);
        }
    }
    double t_start = host_now();
    if (progress)
        fprintf(stderr, "progress: building and compiling the training step of %s\n", model);
    if (tern_train_create(model, &o, &t, &err)) {
        fail(err.msg);
        goto done;
    }
    if (progress)
        fprintf(stderr, "progress: step graph compiled in %.1f s\n", host_now() - t_start);
    int att_fused = 0, att_unfused = 0;
    const char *att_why = tern_train_attention_report(t, &att_fused, &att_unfused);
    double t_steps = host_now();
    if (tern_train_input_count(t) && !ndata) {
        fprintf(stderr, "tern train: the model's input '%s' needs --data\n", tern_train_data_name(t));
        goto done;
    }
    if (ndata && !tern_train_input_count(t)) {
        fprintf(stderr, "tern train: --data '%s': the model has no data input\n", din[0].arg);
        goto done;
    }
    for (size_t k = 0; k < ndata; k++) { /* every input has its data (tern_train_create checked the names) */
        data_in *di = &din[k];
        size_t i = 0;
        if (!di->named)
            snprintf(di->name, sizeof di->name, "%s", tern_train_input_name(t, 0));
        while (i < tern_train_input_count(t) && strcmp(tern_train_input_name(t, i), di->name))
            i++;
        if (i == tern_train_input_count(t)) {
            fprintf(stderr, "tern train: --data '%s': the model has no input '%s'\n", di->arg, di->name);
            goto done;
        }
        if (tern_train_input_is_int(t, i) != di->is_int) {
            fprintf(stderr, "tern train: data '%s': dtype %s, the model's input '%s' takes %s\n", di->file,
                    tern_npy_type_descr(di->npy.type), di->name,
                    tern_train_input_is_int(t, i) ? "int64 indices" : "float32 values");
            goto done;
        }
    }
    if (rows < 1)
        rows = 1;
    perm = malloc(sizeof(int64_t) * (size_t)rows);
    int64_t step_rows = batch * (o.accumulate > 1 ? o.accumulate : 1); /* rows one step reads */
    by = malloc(sizeof(float) * ((size_t)step_rows * lrow + 1));
    byi = malloc(sizeof(int64_t) * ((size_t)step_rows * lrow + 1));
    if (!perm || !by || !byi)
        goto done;
    for (size_t k = 0; k < ndata; k++) {
        data_in *di = &din[k];
        if (!(di->batch = malloc(di->esz * ((size_t)step_rows * di->row + 1))))
            goto done;
        feed[k].name = di->name;
        feed[k].data = di->batch;
        feed[k].count = (size_t)step_rows * di->row;
    }
    for (int64_t r = 0; r < rows; r++)
        perm[r] = r;
    if (shuffle) { /* Fisher-Yates from the last row down, j = splitmix64(seed) mod (i + 1) */
        uint64_t s = seed;
        for (int64_t r = rows - 1; r > 0; r--) {
            int64_t j = (int64_t)(splitmix64(&s) % (uint64_t)(r + 1)), tmp = perm[r];
            perm[r] = perm[j];
            perm[j] = tmp;
        }
    }
    if (json) {
        printf("{\"model\":\"%s\",\"batch\":%lld,\"weights\":%zu,\"graph_nodes\":%zu,\"attention_fused\":%d,\"attention_unfused\":%d,"
               "\"step_flops\":%.17g,\"hbm_bytes\":%llu,\"constants\":[",
               model, (long long)batch, tern_train_weight_count(t), tern_train_graph_nodes(t), att_fused, att_unfused,
               tern_train_model_flops(t), (unsigned long long)tern_train_hbm_bytes(t, NULL));
        for (size_t k = 0; k < tern_train_frozen_count(t); k++) { /* initializers kept constant: name and why */
            const char *why = "", *name = tern_train_frozen_name(t, k, &why);
            printf("%s{\"name\":\"", k ? "," : "");
            for (const char *c = name; *c; c++) { /* a JSON string: quote and backslash escaped, controls as ? */
                if (*c == '"' || *c == '\\')
                    putchar('\\');
                putchar((unsigned char)*c < 0x20 ? '?' : *c);
            }
            printf("\",\"why\":\"%s\"}", why);
        }
        printf("],\"steps\":[");
    }
    {
        uint64_t ws = 0, hb = tern_train_hbm_bytes(t, &ws);
        if (!json)
            printf("training %s: %zu weight tensors, step graph of %zu nodes, %.4g FLOPs per step, HBM %.3f MiB "
                   "per core (weights and optimizer state %.3f MiB)\n",
                   model, tern_train_weight_count(t), tern_train_graph_nodes(t), tern_train_model_flops(t),
                   (double)hb / 1048576.0, (double)ws / 1048576.0);
        for (size_t k = 0, nf = tern_train_frozen_count(t); !json && k < nf; k++) { /* docs/training.md */
            const char *why = "", *name = tern_train_frozen_name(t, k, &why);
            printf("%s%s (%s)%s", k ? ", " : "constant initializers (not trained): ", name, why,
                   k + 1 == nf ? "\n" : "");
        }
        if (!json && (att_fused || att_unfused)) /* the fused attention backward (docs/training.md) */
            printf("attention: %d block%s with the fused backward (tern.AttentionGrad), %d node by node%s%s\n",
                   att_fused, att_fused == 1 ? "" : "s", att_unfused, att_why[0] ? ": " : "", att_why);
        tern_train_dp_info dpi;
        tern_train_mp_info mpi;
        tern_train_mp_stats(t, &mpi);
        if (!json && (mpi.tp > 1 || mpi.pp > 1))
            printf("layout tp=%lld,pp=%lld,dp=%lld on %s: %d linear pairs split over the tensor ranks, %d segment "
                   "programs, %lld micro-batches of %lld rows on a%s 1F1B schedule%s%s\n",
                   (long long)mpi.tp, (long long)mpi.pp, (long long)mpi.dp, o.machine ? o.machine : "trn1.2xlarge",
                   mpi.pairs, mpi.programs, (long long)mpi.micro, (long long)(step_rows / (mpi.dp * mpi.micro)),
                   mpi.vpp > 1 ? "n interleaved" : "", mpi.vpp > 1 ? " (vpp: model chunks per stage)" : "",
                   mpi.zero ? "; ZeRO-1: optimizer state in blocks over the data replicas" : "");
        if (!json && mpi.sp) /* only sequence-parallel layouts say so */
            printf("layout: sequence parallelism: the programs between the tensor-parallel regions on 1/%lld of a "
                   "micro-batch's rows a tensor rank, reduce-scattered after a row-parallel layer and all-gathered "
                   "before a column-parallel one\n",
                   (long long)mpi.tp);
        if (!json && mpi.vocab > 0) /* only layouts that split a vocabulary say so */
            printf("layout: vocabulary parallelism: the %lld-token vocabulary of the embedding%s split over the tensor "
                   "ranks\n",
                   (long long)mpi.vocab, mpi.vocab_head ? ", LM head and cross-entropy" : "");
        tern_train_dp_stats(t, &dpi);
        if (!json && (dpi.ranks > 1 || dpi.chunks > 1))
            printf("data parallel: %lld ranks on %s, %lld rows each (%lld gradient chunks%s), %.3f MiB of gradients "
                   "%s per step; optimizer state per rank %.3f MiB%s\n",
                   (long long)dpi.ranks, o.machine ? o.machine : "trn1.2xlarge", (long long)(batch / dpi.ranks),
                   (long long)dpi.chunks, o.dp_exact ? ", fixed reduction tree" : "",
                   (double)dpi.grad_bytes / 1048576.0, dpi.zero ? "reduce-scattered" : "all-reduced",
                   (double)dpi.state_bytes_per_rank / 1048576.0,
                   dpi.zero ? " (ZeRO-1: about 1/ranks of the whole)" : "");
        if (!json && dpi.zero)
            printf("optimizer state: %.3f MiB in all, %.3f MiB per rank\n", (double)dpi.state_bytes_total / 1048576.0,
                   (double)dpi.state_bytes_per_rank / 1048576.0);
    }
    int64_t pos = 0, first = 0;
    uint64_t order = shuffle ? seed + 1 : 0; /* recorded in checkpoints: a resumed run must read the same order */
    char ckpath[4096], rspath[4096];
    if (ckpt) {
        if (writer)
            mkdir(ckpt, 0777); /* an existing directory is fine; a failure shows when the file is written */
        snprintf(ckpath, sizeof ckpath, "%s/checkpoint.tck", ckpt);
    }
    if (resume) {
        uint64_t p = 0, ord = 0;
        snprintf(rspath, sizeof rspath, "%s/checkpoint.tck", resume);
        if (tern_train_load_checkpoint(t, rspath, &p, &ord, &err)) {
            if (json)
                printf("]}\n");
            fail(err.msg);
            goto done;
        }
        if (ord != order || p >= (uint64_t)rows) {
            if (json)
                printf("]}\n");
            fprintf(stderr,
                    "tern train: checkpoint '%s' was written reading the data in order %llu at row %llu; this run "
                    "reads order %llu (0: no --shuffle, else the seed + 1) over %lld rows\n",
                    rspath, (unsigned long long)ord, (unsigned long long)p, (unsigned long long)order,
                    (long long)rows);
            goto done;
        }
        pos = (int64_t)p;
        first = (int64_t)tern_train_step_count(t);
    }
    if (any_failed(mr, 0)) { /* under mpirun: another process failed to read its files or build its ranks */
        if (json)
            printf("]}\n");
        goto done;
    }
    tern_train_step_info info;
    double total = 0;
    for (int64_t s = first; s < steps; s++) {
        for (int64_t b = 0; b < step_rows; b++) {
            int64_t r = perm[(pos + b) % rows];
            for (size_t k = 0; k < ndata; k++) /* the same rows of every input */
                memcpy((char *)din[k].batch + (size_t)b * din[k].row * din[k].esz,
                       (char *)din[k].vals + (size_t)r * din[k].row * din[k].esz, din[k].esz * din[k].row);
            if (yi)
                memcpy(byi + (size_t)b * lrow, yi + (size_t)r * lrow, sizeof(int64_t) * lrow);
            if (yf)
                memcpy(by + (size_t)b * lrow, yf + (size_t)r * lrow, sizeof(float) * lrow);
        }
        pos = (pos + step_rows) % rows;
        const void *lab = yi ? (const void *)byi : yf ? (const void *)by : NULL;
        if (tern_train_step_inputs(t, feed, ndata, lab, lab ? (size_t)step_rows * lrow : 0, &info, &err)) {
            if (json)
                printf("]}\n");
            fail(err.msg); /* under mpirun every process returns the same failure (process 0 prints it) */
            if (mr)
                mr->known = 1;
            goto done;
        }
        total += info.step_seconds;
        if (json)
            printf("%s{\"step\":%llu,\"loss\":%.9g,\"grad_norm\":%.9g,\"step_ms\":%.6f,\"samples_per_s\":%.6g,"
                   "\"mfu\":%.6g,\"lr\":%.9g}",
                   s > first ? "," : "", (unsigned long long)info.step, timing ? 0 : info.loss, timing ? 0 : info.grad_norm,
                   info.step_seconds * 1e3, info.samples_per_s, info.mfu, info.lr);
        else if (timing)
            printf("step %llu/%lld: predicted step %.4f ms, %.1f samples/s, MFU %.3g%%\n",
                   (unsigned long long)info.step, (long long)steps, info.step_seconds * 1e3, info.samples_per_s,
                   info.mfu);
        else
            printf("step %llu/%lld: loss %.7g, grad norm %.5g, predicted step %.4f ms, %.1f samples/s, MFU %.3g%%\n",
                   (unsigned long long)info.step, (long long)steps, info.loss, info.grad_norm,
                   info.step_seconds * 1e3, info.samples_per_s, info.mfu);
        fflush(stdout);
        if (progress) { /* ETA from the mean host time of this run's steps so far */
            double el = host_now() - t_steps, per = el / (double)(s - first + 1);
            fprintf(stderr, "progress: step %llu/%lld, %.1f s elapsed (%.2f s per step), ETA %.1f s\n",
                    (unsigned long long)info.step, (long long)steps, host_now() - t_start, per,
                    per * (double)(steps - s - 1));
        }
        if (ckpt && ((every && info.step % (uint64_t)every == 0) || s == steps - 1)) {
            /* under mpirun process 0 gathers what other processes' ranks hold, then writes alone */
            int bad = tern_train_collect(t, &err) || (writer && tern_train_save_checkpoint(t, ckpath, (uint64_t)pos,
                                                                                             order, &err));
            if (bad) {
                if (json)
                    printf("]}\n");
                fail(err.msg);
            }
            if (any_failed(mr, bad)) {
                if (json && !bad)
                    printf("]}\n");
                goto done;
            }
        }
    }
    tern_train_dp_info dpi;
    {
        tern_train_mp_info mpi;
        tern_train_mp_stats(t, &mpi);
        char kv[160] = ""; /* only layouts that replicate key/value heads (or are sequence-parallel) name those
                              gradients' all-reduce */
        if (mpi.sp)
            snprintf(kv, sizeof kv, ", sequence-parallel norms' gradients %.4f ms", mpi.sp_seconds * 1e3);
        if (mpi.kv_seconds > 0)
            snprintf(kv + strlen(kv), sizeof kv - strlen(kv), ", replicated K/V heads' gradients %.4f ms",
                     mpi.kv_seconds * 1e3);
        if (mpi.zero_norm_seconds > 0) /* ZeRO-1 with clipping */
            snprintf(kv + strlen(kv), sizeof kv - strlen(kv),
                     ", ZeRO-1 clipping norm's all-reduce %.4f ms (within the data-parallel collectives)",
                     mpi.zero_norm_seconds * 1e3);
        if (!json && (mpi.tp > 1 || mpi.pp > 1))
            printf("layout, last step: pipeline %.4f ms (%s bubbles %.4f ms, stage transfer %.4f ms), data-parallel "
                   "collectives %.4f ms, tied weights %.4f ms%s, update %.4f ms\n",
                   mpi.pipeline_seconds * 1e3, mpi.vpp > 1 ? "interleaved 1F1B" : "1F1B", mpi.bubble_seconds * 1e3,
                   mpi.p2p_seconds * 1e3,
                   mpi.dp_comm_seconds * 1e3, mpi.tied_seconds * 1e3, kv, mpi.update_seconds * 1e3);
        if (!json && mpi.tp > 1)
            printf("layout, last step: tensor-group collectives on activations %.4f ms, %.0f bytes a rank, per "
                   "micro-batch\n",
                   mpi.tp_act_seconds * 1e3, mpi.tp_act_bytes);
        if (!json && mpi.vpp > 1)
            printf("layout, last step: plain 1F1B of the same chunks (%lld consecutive a stage): pipeline %.4f ms, "
                   "bubbles %.4f ms\n",
                   (long long)mpi.vpp, mpi.plain_pipeline_seconds * 1e3, mpi.plain_bubble_seconds * 1e3);
    }
    tern_train_dp_stats(t, &dpi);
    if (!json && (dpi.ranks > 1 || dpi.chunks > 1))
        printf("data parallel, last step: slowest rank's forward + backward %.4f ms, gradient collectives %.4f ms "
               "(%s, exposed), update %.4f ms\n",
               dpi.compute_seconds * 1e3, dpi.comm_seconds * 1e3, dpi.algorithm, dpi.update_seconds * 1e3);
    tern_train_mp_info mpj;
    tern_train_mp_stats(t, &mpj);
    char vppj[512] = ""; /* only interleaved layouts carry "vpp", replicated K/V heads "kv_ms", a split vocabulary
                            "vocab", sequence parallelism "sp"; tensor groups their activation collectives */
    if (mpj.vpp > 1)
        snprintf(vppj, sizeof vppj, ",\"vpp\":%lld,\"pipeline_1f1b_ms\":%.6f,\"bubble_1f1b_ms\":%.6f",
                 (long long)mpj.vpp, mpj.plain_pipeline_seconds * 1e3, mpj.plain_bubble_seconds * 1e3);
    if (mpj.kv_seconds > 0)
        snprintf(vppj + strlen(vppj), sizeof vppj - strlen(vppj), ",\"kv_ms\":%.6f", mpj.kv_seconds * 1e3);
    if (mpj.vocab > 0)
        snprintf(vppj + strlen(vppj), sizeof vppj - strlen(vppj), ",\"vocab\":%lld,\"vocab_head\":%d",
                 (long long)mpj.vocab, mpj.vocab_head);
    if (mpj.sp)
        snprintf(vppj + strlen(vppj), sizeof vppj - strlen(vppj), ",\"sp\":1,\"sp_ms\":%.6f", mpj.sp_seconds * 1e3);
    if (mpj.zero_norm_seconds > 0)
        snprintf(vppj + strlen(vppj), sizeof vppj - strlen(vppj), ",\"zero_norm_ms\":%.6f",
                 mpj.zero_norm_seconds * 1e3);
    if (mpj.tp > 1)
        snprintf(vppj + strlen(vppj), sizeof vppj - strlen(vppj), ",\"tp_act_ms\":%.6f,\"tp_act_bytes\":%.0f",
                 mpj.tp_act_seconds * 1e3, mpj.tp_act_bytes);
    if (json)
        printf("],\"predicted_seconds\":%.9g,\"ranks\":%lld,\"dp_chunks\":%lld,\"zero\":%d,\"dp_algorithm\":\"%s\","
               "\"dp_compute_ms\":%.6f,\"dp_comm_ms\":%.6f,\"dp_update_ms\":%.6f,\"state_bytes_per_rank\":%llu,"
               "\"state_bytes_total\":%llu,\"layout\":{\"tp\":%lld,\"pp\":%lld,\"dp\":%lld,\"micro\":%lld,"
               "\"zero\":%d,\"pairs\":%d,\"programs\":%d,\"pipeline_ms\":%.6f,\"bubble_ms\":%.6f,\"p2p_ms\":%.6f,"
               "\"dp_comm_ms\":%.6f,\"tied_ms\":%.6f,\"update_ms\":%.6f%s}}\n",
               total, (long long)dpi.ranks, (long long)dpi.chunks, dpi.zero, dpi.algorithm, dpi.compute_seconds * 1e3,
               dpi.comm_seconds * 1e3, dpi.update_seconds * 1e3, (unsigned long long)dpi.state_bytes_per_rank,
               (unsigned long long)dpi.state_bytes_total, (long long)mpj.tp, (long long)mpj.pp, (long long)mpj.dp,
               (long long)mpj.micro, mpj.zero, mpj.pairs, mpj.programs, mpj.pipeline_seconds * 1e3, mpj.bubble_seconds * 1e3,
               mpj.p2p_seconds * 1e3, mpj.dp_comm_seconds * 1e3, mpj.tied_seconds * 1e3, mpj.update_seconds * 1e3,
               vppj);
    else
        printf("predicted device time for %lld steps: %.4f ms (%.1f samples/s)\n", (long long)(steps - first),
               total * 1e3,
               total > 0 ? (double)((steps - first) * step_rows) / total : 0.0);
    if (dump && writer) {
        for (size_t i = 0; i < tern_train_weight_count(t); i++) {
            size_t n;
            const float *g = tern_train_grad(t, i, &n);
            if (!g)
                continue;
            char path[4096];
            const char *nm = tern_train_weight_name(t, i);
            char fn[TERN_NAME_FILENAME_MAX];
            tern_name_to_filename(nm, fn, sizeof fn);
            snprintf(path, sizeof path, "%s/%s.npy", dump, fn);
            tern_npy a;
            memset(&a, 0, sizeof a);
            a.type = TERN_NPY_F32;
            a.data = (void *)g;
            a.rank = 1;
            a.dims[0] = (int64_t)n;
            if (tern_npy_write(path, &a, &err)) {
                fail(err.msg);
                goto done;
            }
        }
    }
    if (outp && !timing && writer) {
        if (tern_train_save_onnx(t, outp, &err)) {
            fail(err.msg);
            goto done;
        }
        if (!json)
            printf("wrote %s\n", outp);
    }
    if (any_failed(mr, 0)) /* process 0's writes */
        goto done;
    rc = 0;
done:
    if (mr && rc && !mr->known) /* this process failed on its own: the others learn it at their next point */
        any_failed(mr, 1);
    tern_train_free(t);
    for (size_t k = 0; k < ndata; k++) {
        tern_npy_free(&din[k].npy);
        free(din[k].vals);
        free(din[k].batch);
    }
    tern_npy_free(&Y);
    free(yf);
    free(yi);
    free(by);
    free(byi);
    free(perm);
    return rc;
}
