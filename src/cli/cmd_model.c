/* `tern compile` (ONNX -> tern executable) and `tern run` (an executable or an ONNX model on a simulated
 * machine: inputs from .npy files or seeded random values, outputs summarised and optionally written as .npy,
 * the predicted device time and MFU, and the profiler on request). */
#include <math.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "tern/arch.h"
#include "tern/compiler.h"
#include "tern/npy.h"
#include "tern/prof.h"
#include "tern/fabric.h"
#include "tern/runtime.h"
#include "tern/transport.h"

/* Short machine names accepted by --machine: the instance a generation is usually rented as. */
static const char *machine_alias(const char *m)
{
    if (!strcmp(m, "trn1"))
        return "trn1.2xlarge";
    if (!strcmp(m, "trn2"))
        return "trn2.48xlarge";
    if (!strcmp(m, "trn3"))
        return "trainium3";
    return m;
}

static int ends_with(const char *s, const char *suf)
{
    size_t n = strlen(s), m = strlen(suf);
    return n >= m && !strcmp(s + n - m, suf);
}

/* A directory opens like a file on Linux and then reads as garbage sizes; refuse it by name first. A path that
 * does not exist is left to the loader, whose message says so. */
static int is_directory(const char *cmd, const char *what, const char *path)
{
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        fprintf(stderr, "%s: %s '%s' is a directory, not a file\n", cmd, what, path);
        return 1;
    }
    return 0;
}

/* The progress counter rewrites one stderr line in place; *open records that the line is unfinished, so an error
 * raised mid-compile ends it first instead of being glued onto "compiling: 425/505 nodes". */
static void progress(void *ctx, int done, int total)
{
    int *open = ctx;
    if (total >= 50 && (done % 25 == 0 || done == total)) {
        fprintf(stderr, "\rcompiling: %d/%d nodes%s", done, total, done == total ? "\n" : "");
        *open = done != total;
    }
}

typedef struct {
    const char *model, *out, *machine;
    tern_dtype dtype;
    unsigned cores;
    int64_t dim;
    int no_attention_fusion, no_attention_layouts, no_residual_fusion, no_layernorm_fusion, no_ew_fusion;
    int no_keep_on_chip;
    int explain;                /* tern compile --explain */
    tern_dim_binding named[32]; /* --dim NAME=VALUE */
    size_t num_named;
    const tern_input_shape *shapes; /* run MODEL.onnx --input: the .npy files' shapes bind symbolic dims */
    size_t num_shapes;
} compile_args;

static int parse_dtype(const char *s, tern_dtype *dt)
{
    if (!strcmp(s, "bf16"))
        *dt = TERN_DTYPE_BF16;
    else if (!strcmp(s, "fp32"))
        *dt = TERN_DTYPE_FP32;
    else if (!strcmp(s, "fp8"))
        *dt = TERN_DTYPE_FP8_E4M3;
    else
        return 0;
    return 1;
}

/* --explain: per node of the optimised graph, the lowering rule that fired (and the rules passed over with their
 * reasons), or why none did. */
static void print_explain(const tern_compile_report *rep)
{
    printf("%-5s %-32s %-24s %s\n", "node", "name", "op", "rule");
    for (int i = 0; i < rep->num_rules; i++) {
        const tern_compile_node_rule *r = &rep->rules[i];
        printf("%-5d %-32s %-24s ", r->node, r->name, r->op);
        if (r->rule) {
            printf("%s", r->rule);
            if (r->file && r->file[0])
                printf(" (%s)", r->file);
            if (r->why[0])
                printf(" failed: %s", r->why);
        } else {
            printf("none: %s", r->why[0] ? r->why : "no rule");
        }
        if (r->declined[0])
            printf("  [passed over: %s]", r->declined);
        printf("\n");
    }
}

static int compile_model(const compile_args *a, tern_exe *x, tern_compile_report *rep)
{
    tern_compile_opts o;
    tern_compile_opts_default(&o);
    o.machine = a->machine;
    o.matmul_dtype = a->dtype;
    o.cores = a->cores;
    o.default_dim = a->dim;
    o.no_attention_fusion = a->no_attention_fusion;
    o.no_attention_layouts = a->no_attention_layouts;
    o.no_residual_fusion = a->no_residual_fusion;
    o.no_layernorm_fusion = a->no_layernorm_fusion;
    o.no_elementwise_fusion = a->no_ew_fusion;
    o.no_keep_on_chip = a->no_keep_on_chip;
    int line_open = 0;
    o.progress = progress;
    o.progress_ctx = &line_open;
    o.dims = a->named;
    o.num_dims = a->num_named;
    o.input_shapes = a->shapes;
    o.num_input_shapes = a->num_shapes;
    o.explain = a->explain;
    memset(rep, 0, sizeof *rep); /* a model that fails to load leaves the report untouched: no explain rows */
    tern_error err;
    tern_status st = tern_compile_onnx(a->model, &o, x, rep, &err);
    if (line_open)
        fputc('\n', stderr);
    if (a->explain) {
        print_explain(rep);
        tern_compile_report_free(rep);
    }
    if (st) {
        /* the message names the file when the file itself is the problem; name it otherwise */
        if (!strncmp(err.msg, a->model, strlen(a->model)))
            fprintf(stderr, "tern compile: %s\n", err.msg);
        else
            fprintf(stderr, "tern compile: %s: %s\n", a->model, err.msg);
        return 1;
    }
    return 0;
}

static void compile_usage(FILE *f)
{
    fprintf(f, "usage: tern compile MODEL.onnx -o MODEL.tern [--machine NAME] [--dtype bf16|fp32|fp8] [--cores N]\n"
               "                    [--dim N] [--dim NAME=VALUE ...] [--no-fuse-attention] [--no-attention-layouts]\n"
               "                    [--no-fuse-residual] [--no-fuse-layernorm] [--no-fuse-elementwise] [--no-keep-on-chip]\n"
               "                    [--explain]\n"
               "  --machine  target (trn1, trn2, trn3 or any catalogue name or JSON path; default trn1)\n"
               "  --dtype    matmul precision: bf16 with fp32 accumulation (default), fp32, fp8 (e4m3)\n"
               "  --cores    split the batch over N NeuronCores of the chip or instance (default 1)\n"
               "  --dim      N: value for symbolic input dimensions not bound by name (default 1); NAME=VALUE: one named\n"
               "             dimension (--dim batch=2 --dim seq=64), repeatable\n"
               "  --no-fuse-attention  keep attention as separate nodes (for comparisons)\n"
               "  --no-attention-layouts  fused attention on materialised [B, H, S, D] operands (for comparisons)\n"
               "  --no-fuse-residual  keep the Add after a linear layer as its own node (for comparisons)\n"
               "  --no-fuse-layernorm  keep a LayerNormalization after a linear layer as its own node (for comparisons)\n"
               "  --no-fuse-elementwise  lower every elementwise node on its own, not chains as one pass nor a Relu\n"
               "             or residual Add in its convolution's GEMM (the same bits; for comparisons)\n"
               "  --no-keep-on-chip  every kernel's output through HBM: an FFN's two layers as two kernels, not one with\n"
               "             the middle on chip, and an attention's output stored and loaded by its projection\n"
               "             (the same bits; for comparisons)\n"
               "  --explain  print, per node of the optimised graph, the lowering rule that fired (and the rules\n"
               "             passed over, with why), or why none applied\n");
}

/* Shared option parsing of compile and run (cmd is "tern compile" or "tern run" for messages). Returns -1 for a
 * usage error (printed), else the number of words the option used at argv[i] (0: not a shared option). */
static int parse_common(const char *cmd, int argc, char **argv, int i, compile_args *a)
{
    const char *o = argv[i], *v = NULL;
    int j = i;
    if (!strcmp(o, "--no-fuse-attention"))
        a->no_attention_fusion = 1;
    else if (!strcmp(o, "--no-attention-layouts"))
        a->no_attention_layouts = 1;
    else if (!strcmp(o, "--no-fuse-residual"))
        a->no_residual_fusion = 1;
    else if (!strcmp(o, "--no-fuse-layernorm"))
        a->no_layernorm_fusion = 1;
    else if (!strcmp(o, "--no-fuse-elementwise"))
        a->no_ew_fusion = 1;
    else if (!strcmp(o, "--no-keep-on-chip"))
        a->no_keep_on_chip = 1;
    else if (strcmp(o, "--machine") && strcmp(o, "--dtype") && strcmp(o, "--cores") && strcmp(o, "--dim"))
        return 0;
    else if (!(v = tern_arg_value(cmd, argc, argv, &j, !strcmp(o, "--machine") ? "a machine name or JSON path"
                                                       : !strcmp(o, "--dtype") ? "bf16, fp32 or fp8"
                                                       : !strcmp(o, "--cores") ? "a core count"
                                                                               : "a dimension value")))
        return -1;
    if (!v)
        return 1;
    if (!strcmp(o, "--machine")) {
        a->machine = machine_alias(v);
    } else if (!strcmp(o, "--dtype")) {
        if (!parse_dtype(v, &a->dtype)) {
            fprintf(stderr, "%s: --dtype '%s' unknown (bf16, fp32, fp8)\n", cmd, v);
            return -1;
        }
    } else if (!strcmp(o, "--cores")) {
        int64_t n;
        if (tern_arg_int(cmd, o, v, 1, 128, &n))
            return -1;
        a->cores = (unsigned)n;
    } else if (!strchr(v, '=')) { /* --dim N: every symbolic dim not bound otherwise */
        if (tern_arg_int(cmd, o, v, 1, INT32_MAX, &a->dim))
            return -1;
    } else { /* --dim NAME=VALUE, repeatable */
        const char *eq = strchr(v, '=');
        char opt[96];
        snprintf(opt, sizeof opt, "--dim %.*s=", (int)(eq - v < 64 ? eq - v : 64), v);
        if (eq == v) {
            fprintf(stderr, "%s: --dim takes N or NAME=VALUE, got '%s' (no name before '=')\n", cmd, v);
            return -1;
        }
        if (a->num_named == sizeof a->named / sizeof a->named[0]) {
            fprintf(stderr, "%s: more than %zu --dim NAME=VALUE options\n", cmd, sizeof a->named / sizeof a->named[0]);
            return -1;
        }
        tern_dim_binding *b = &a->named[a->num_named];
        if (tern_arg_int(cmd, opt, eq + 1, 1, INT32_MAX, &b->value))
            return -1;
        char *w = argv[j]; /* v, writable: the name is cut at '=' */
        w[eq - v] = '\0';
        for (size_t k = 0; k < a->num_named; k++)
            if (!strcmp(a->named[k].name, w) && a->named[k].value != b->value) {
                fprintf(stderr, "%s: --dim %s given twice (%lld and %lld)\n", cmd, w, (long long)a->named[k].value,
                        (long long)b->value);
                return -1;
            }
        b->name = w;
        a->num_named++;
    }
    return 2;
}

int tern_cmd_compile(int argc, char **argv)
{
    compile_args a = {.machine = "trn1.2xlarge", .dtype = TERN_DTYPE_BF16, .cores = 1, .dim = 1};
    for (int i = 1; i < argc;) {
        int used;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            compile_usage(stdout);
            return 0;
        }
        if ((used = parse_common("tern compile", argc, argv, i, &a)) < 0)
            return 2;
        if (used) {
            i += used;
            continue;
        }
        if (!strcmp(argv[i], "--explain")) {
            a.explain = 1;
            i++;
        } else if (!strcmp(argv[i], "-o")) {
            if (!(a.out = tern_arg_value("tern compile", argc, argv, &i, "the output .tern file")))
                return 2;
            i++;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "tern compile: unknown option '%s'\n", argv[i]);
            compile_usage(stderr);
            return 2;
        } else if (!a.model) {
            a.model = argv[i++];
        } else {
            fprintf(stderr, "tern compile: unexpected argument '%s'\n", argv[i]);
            compile_usage(stderr);
            return 2;
        }
    }
    if (!a.model || !a.out) {
        fprintf(stderr, "tern compile: a model and -o OUTPUT are required\n");
        compile_usage(stderr);
        return 2;
    }
    if (is_directory("tern compile", "model", a.model))
        return 1;
    tern_exe x;
    tern_compile_report rep;
    if (compile_model(&a, &x, &rep))
        return 1;
    tern_error err;
    int rc = 0;
    if (tern_exe_save(&x, a.out, &err)) {
        fprintf(stderr, "tern compile: %s\n", err.msg);
        rc = 1;
    } else {
        printf("%s -> %s for %s: %d nodes (%d after optimisation), %zu instructions per core on %u core%s, "
               "%.1f MB of weights, %.1f MB of HBM per core",
               a.model, a.out, a.machine, rep.nodes_in, rep.nodes_after_opt, rep.instructions, x.cores,
               x.cores > 1 ? "s" : "", rep.weight_bytes / 1e6, rep.hbm_bytes / 1e6);
        if (rep.fused_attention)
            printf("; %d fused attention node%s (tern.Attention)", rep.fused_attention,
                   rep.fused_attention > 1 ? "s" : "");
        if (rep.elementwise_groups)
            printf("; %d elementwise node%s fused into %d pass%s", rep.fused_elementwise,
                   rep.fused_elementwise > 1 ? "s" : "", rep.elementwise_groups, rep.elementwise_groups > 1 ? "es" : "");
        if (rep.fused_conv_relu || rep.fused_conv_add)
            printf("; %d Relu and %d Add node%s applied by the convolutions before them", rep.fused_conv_relu,
                   rep.fused_conv_add, rep.fused_conv_add == 1 ? "" : "s");
        if (rep.fused_conv_silu)
            printf("; %d SiLU%s (Sigmoid and Mul) applied by the convolutions before them", rep.fused_conv_silu,
                   rep.fused_conv_silu > 1 ? "s" : "");
        if (rep.fused_bn_relu)
            printf("; %d Relu%s applied by the BatchNormalization before %s", rep.fused_bn_relu,
                   rep.fused_bn_relu > 1 ? "s" : "", rep.fused_bn_relu > 1 ? "them" : "it");
        if (rep.fused_conv_clip)
            printf("; %d Clip%s applied by the convolutions before them", rep.fused_conv_clip,
                   rep.fused_conv_clip > 1 ? "s" : "");
        if (rep.concat_in_place)
            printf("; %d Concat input%s placed where the Concat wants %s (not copied)", rep.concat_in_place,
                   rep.concat_in_place > 1 ? "s" : "", rep.concat_in_place > 1 ? "them" : "it");
        if (rep.matmul_sums)
            printf("; %d linear-layer products summed on chip in %d GEMM%s", rep.matmul_sum_products,
                   rep.matmul_sums, rep.matmul_sums > 1 ? "s" : "");
        if (rep.lowered_empty) /* their outputs have zero elements: no storage, no instructions */
            printf("; %d node%s with only zero-size outputs lowered to nothing", rep.lowered_empty,
                   rep.lowered_empty > 1 ? "s" : "");
        printf("\n");
    }
    tern_exe_free(&x);
    return rc;
}

/* ---- run ---- */

static void run_usage(FILE *f)
{
    fprintf(f, "usage: tern run MODEL.tern|MODEL.onnx [--machine NAME] [--input NAME=FILE.npy ...] [--output-dir DIR]\n"
               "                [--profile] [--trace FILE.json] [--svg FILE.svg] [--timing-only] [--seed N]\n"
               "                [--dtype ...] [--cores N] [--dim N|NAME=VALUE] [--no-fuse-attention] [--no-attention-layouts]\n"
               "                [--no-fuse-residual] [--no-fuse-layernorm] [--no-fuse-elementwise] [--no-keep-on-chip]\n"
               "                (the last nine when compiling an ONNX model)\n"
               "                [--force-machine]  (run on a machine whose code fingerprint differs from the executable's)\n"
               "An ONNX model's symbolic dimensions are bound from the given inputs' shapes (and --dim).\n"
               "Inputs not given are filled with seeded random values (none with --timing-only, which reads no\n"
               "values). Prints each output's summary, the predicted device time (in ms and exact ps) and MFU;\n"
               "--profile adds the profiler summary. An ONNX model's external data is read relative to the model\n"
               "file's directory.\n"
               "--machine takes a cluster too (2xtrn1.32xlarge) for a batch split over its instances. Under\n"
               "`mpirun -np K` (an MPI build) a batch split's shares spread over K processes; the output is the\n"
               "same, printed by process 0 (docs/runtime.md).\n");
}

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static int make_text_input(const tern_exe_io *io, const tern_npy *a, uint64_t seed, void **out, size_t *bytes,
                           const char *file)
{
    uint64_t n = tern_exe_io_elems(io);
    *bytes = (size_t)tern_exe_io_bytes(io);
    uint8_t *buf = calloc(*bytes ? *bytes : 1, 1);
    if (!buf) {
        fprintf(stderr, "tern run: out of memory for input '%s'\n", io->name);
        return 1;
    }
    tern_error err;
    if (a && !tern_npy_is_text(a)) {
        fprintf(stderr, "tern run: %s: input '%s' is text (ONNX string); give a text .npy (numpy '<U' or '|S'), not "
                "%s\n", file, io->name, tern_npy_type_descr(a->type));
        free(buf);
        return 1;
    }
    if (a && tern_npy_text_to_cells(a, buf, io->text_bytes, &err)) {
        fprintf(stderr, "tern run: %s: input '%s': %s\n", file, io->name, err.msg);
        free(buf);
        return 1;
    }
    uint64_t s = seed;
    for (uint64_t i = 0; i < n && !a; i++) { /* random numbers in [-1, 1) as numpy would print them */
        char text[TERN_F32_TEXT_MAX];
        size_t len = tern_f32_format((float)((double)(splitmix(&s) >> 11) * 0x1.0p-53 * 2 - 1), text);
        memcpy(buf + i * io->text_bytes, text, len < io->text_bytes ? len : io->text_bytes);
    }
    *out = buf;
    return 0;
}

/* Print the first texts of a text output and write it as a '<U' .npy when path is set. */
static int text_output(const tern_exe_io *io, const uint8_t *cells, const char *path)
{
    uint64_t n = tern_exe_io_elems(io);
    printf("output %s: text [", tern_exe_io_name(io));
    for (unsigned d = 0; d < io->rank; d++)
        printf("%s%lld", d ? ", " : "", (long long)io->shape[d]);
    printf("]%s", n ? " first [" : " (empty)\n");
    for (uint64_t k = 0; k < n && k < 4; k++)
        printf("%s'%.*s'", k ? ", " : "", (int)strnlen((const char *)cells + k * io->text_bytes, io->text_bytes),
               (const char *)cells + k * io->text_bytes);
    if (n)
        printf("%s]\n", n > 4 ? ", ..." : "");
    if (!path)
        return 0;
    tern_npy arr;
    tern_error err;
    if (tern_npy_text_from_cells(&arr, (int)io->rank, io->shape, cells, io->text_bytes, &err) ||
        tern_npy_write(path, &arr, &err)) {
        fprintf(stderr, "tern run: output '%s': %s\n", tern_exe_io_name(io), err.msg);
        tern_npy_free(&arr);
        return 1;
    }
    tern_npy_free(&arr);
    return 0;
}

/* "[2, 64]" into buf (cut with "..." if it does not fit). */
static void shape_text(char *buf, size_t len, int rank, const int64_t *dims)
{
    size_t at = (size_t)snprintf(buf, len, "[");
    for (int d = 0; d < rank && at < len; d++)
        at += (size_t)snprintf(buf + at, len - at, "%s%lld", d ? ", " : "", (long long)dims[d]);
    if (at < len)
        snprintf(buf + at, len - at, "]");
    else if (len > 4)
        memcpy(buf + len - 4, "...", 4);
}

/* Convert an npy array (or random data when a is NULL) to the input's device dtype. */
static int make_input(const tern_exe_io *io, const tern_npy *a, uint64_t seed, void **out, size_t *bytes,
                      const char *file)
{
    uint64_t n = tern_exe_io_elems(io);
    if (a) {
        int same = a->rank == (int)io->rank;
        for (unsigned d = 0; same && d < io->rank; d++)
            same = a->dims[d] == io->shape[d];
        if (!same) {
            char have[256], need[256];
            shape_text(have, sizeof have, a->rank, a->dims);
            shape_text(need, sizeof need, (int)io->rank, io->shape);
            fprintf(stderr, "tern run: %s: shape %s does not match input '%s' of shape %s (shapes must be equal)\n",
                    file, have, io->name, need);
            return 1;
        }
    }
    if (io->text_bytes) /* a text input: .npy text into cells, or random numbers written as text */
        return make_text_input(io, a, seed, out, bytes, file);
    size_t es = tern_dtype_size(io->dtype);
    *bytes = n * es;
    uint8_t *buf = malloc(*bytes ? *bytes : 1);
    float *f = malloc(sizeof(float) * (n ? n : 1));
    if (!buf || !f) {
        free(buf);
        free(f);
        fprintf(stderr, "tern run: out of memory for input '%s'\n", io->name);
        return 1;
    }
    uint64_t s = seed;
    for (uint64_t i = 0; i < n; i++) {
        double v;
        if (a)
            v = tern_npy_get(a, i);
        else if (tern_dtype_is_float(io->dtype))
            v = (double)(splitmix(&s) >> 11) * 0x1.0p-53 * 2 - 1;
        else
            v = (double)(splitmix(&s) % 2);
        if (tern_dtype_is_float(io->dtype)) {
            f[i] = (float)v;
        } else {
            if (v > 2147483647.0 || v < -2147483648.0) {
                fprintf(stderr, "tern run: input '%s' element %llu = %g does not fit %s\n", io->name,
                        (unsigned long long)i, v, tern_dtype_name(io->dtype));
                free(buf);
                free(f);
                return 1;
            }
            int32_t iv = (int32_t)v;
            memcpy(buf + i * es, &iv, es);
        }
    }
    if (tern_dtype_is_float(io->dtype))
        tern_convert_from_f32(io->dtype, buf, f, n, NULL, NULL);
    free(f);
    *out = buf;
    return 0;
}

static void free_arrays(tern_npy *arrs, int n)
{
    for (int k = 0; k < n; k++)
        tern_npy_free(&arrs[k]);
}

static double model_flops_of(const tern_exe *x)
{
    if (!x->metadata_json)
        return 0;
    const char *p = strstr(x->metadata_json, "\"model_flops\":");
    return p ? strtod(p + 14, NULL) : 0;
}

static int run_model(int argc, char **argv, const tern_transport *tr);

/* Under `mpirun -np K` a batch split's cores spread over the K processes (docs/runtime.md "Over MPI processes"):
 * every process reads the inputs and runs its own cores; process 0 holds core 0, so it reads the gathered outputs
 * and prints everything (the others print nothing), and the output is the same for every K. */
int tern_cmd_run(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            run_usage(stdout);
            return 0;
        }
    tern_transport *tr = NULL;
    tern_error err = {0};
    if (tern_mpi_init(&argc, &argv, &tr, &err)) {
        if (tern_mpi_launched_rank() == 0)
            fprintf(stderr, "tern run: %s\n", err.msg);
        return 1;
    }
    if (tr && tr->me != 0) { /* process 0 speaks for the run */
        if (!freopen("/dev/null", "w", stdout) || !freopen("/dev/null", "w", stderr))
            tr->abort(tr->ctx, "tern run: cannot silence a process other than 0");
    }
    int rc = run_model(argc, argv, tr && tr->nprocs > 1 ? tr : NULL);
    if (tr) { /* one exit status for every process */
        uint64_t v = (uint64_t)rc;
        if (tr->allreduce(tr->ctx, &v, 1, TERN_XOP_MAX, &err) == TERN_OK)
            rc = (int)v;
    }
    tern_mpi_finalize(tr);
    return rc;
}

/* The instance a cluster spec repeats (its cores' figures), or the machine itself. */
static const char *machine_base(const char *machine, char *buf, size_t cap)
{
    unsigned insts, cores;
    tern_error e;
    return tern_machine_spec_base(machine, buf, cap, &insts, &cores, &e) == TERN_OK ? buf : machine;
}

static int run_model(int argc, char **argv, const tern_transport *tr)
{
    const char *R = "tern run";
    compile_args a = {.dtype = TERN_DTYPE_BF16, .cores = 1, .dim = 1};
    const char *outdir = NULL, *trace = NULL, *svg = NULL;
    const char *in_names[64], *in_files[64];
    int nin = 0, profile = 0, timing_only = 0, force_machine = 0;
    uint64_t seed = 1;
    for (int i = 1; i < argc;) {
        int used;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            run_usage(stdout);
            return 0;
        }
        if ((used = parse_common(R, argc, argv, i, &a)) < 0)
            return 2;
        if (used) {
            i += used;
            continue;
        }
        const char *o = argv[i], *v = NULL;
        if (!strcmp(o, "--input") || !strcmp(o, "--output-dir") || !strcmp(o, "--trace") || !strcmp(o, "--svg") ||
            !strcmp(o, "--seed")) {
            v = tern_arg_value(R, argc, argv, &i, !strcmp(o, "--input")        ? "NAME=FILE.npy"
                                                  : !strcmp(o, "--output-dir") ? "a directory"
                                                  : !strcmp(o, "--seed")       ? "an integer"
                                                                               : "a file name");
            if (!v)
                return 2;
            i++;
        }
        if (!strcmp(o, "--input")) {
            char *w = argv[i - 1], *eq = strchr(w, '='); /* v, writable: the name is cut at '=' */
            if (nin == 64) {
                fprintf(stderr, "tern run: more than 64 --input options\n");
                return 2;
            }
            if (!eq || eq == v || !eq[1]) {
                fprintf(stderr, "tern run: --input takes NAME=FILE.npy, got '%s'\n", v);
                return 2;
            }
            *eq = '\0';
            in_names[nin] = w;
            in_files[nin++] = eq + 1;
        } else if (!strcmp(o, "--output-dir")) {
            outdir = v;
        } else if (!strcmp(o, "--trace")) {
            trace = v;
            profile = 1;
        } else if (!strcmp(o, "--svg")) {
            svg = v;
            profile = 1;
        } else if (!strcmp(o, "--seed")) {
            if (tern_arg_uint(R, o, v, 0, UINT64_MAX, &seed))
                return 2;
        } else if (!strcmp(o, "--profile")) {
            profile = 1;
            i++;
        } else if (!strcmp(o, "--timing-only")) {
            timing_only = 1;
            i++;
        } else if (!strcmp(o, "--force-machine")) {
            force_machine = 1;
            i++;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "tern run: unknown option '%s'\n", argv[i]);
            run_usage(stderr);
            return 2;
        } else if (!a.model) {
            a.model = argv[i++];
        } else {
            fprintf(stderr, "tern run: unexpected argument '%s'\n", argv[i]);
            run_usage(stderr);
            return 2;
        }
    }
    if (!a.model) {
        fprintf(stderr, "tern run: a model is required\n");
        run_usage(stderr);
        return 2;
    }
    if (tr && profile) {
        fprintf(stderr, "tern run: --profile, --trace and --svg profile one process's cores; run them without mpirun "
                        "(%u processes here)\n", tr->nprocs);
        return 2;
    }
    if (is_directory(R, "model", a.model))
        return 1;
    for (int k = 0; k < nin; k++)
        if (is_directory(R, "input file", in_files[k]))
            return 1;
    tern_error err;
    /* the .npy files are read first: a bad file is reported before a long compile, and an ONNX model's symbolic
     * dims are bound from their shapes */
    tern_npy arrs[64];
    tern_input_shape shapes[64];
    memset(arrs, 0, sizeof arrs);
    for (int k = 0; k < nin; k++) {
        if (tern_npy_read(in_files[k], &arrs[k], &err)) {
            fprintf(stderr, "tern run: %s\n", err.msg);
            free_arrays(arrs, k);
            return 1;
        }
        shapes[k].input = in_names[k];
        shapes[k].source = in_files[k];
        shapes[k].rank = arrs[k].rank;
        for (int d = 0; d < arrs[k].rank && d < TERN_GRAPH_MAX_RANK; d++)
            shapes[k].dims[d] = arrs[k].dims[d];
    }
    a.shapes = shapes;
    a.num_shapes = (size_t)nin;
    tern_exe x;
    if (ends_with(a.model, ".onnx")) {
        if (!a.machine)
            a.machine = "trn1.2xlarge";
        tern_compile_report rep;
        if (compile_model(&a, &x, &rep)) {
            free_arrays(arrs, nin);
            return 1;
        }
    } else if (tern_exe_load(a.model, &x, &err)) {
        fprintf(stderr, "tern run: %s\n", err.msg);
        free_arrays(arrs, nin);
        return 1;
    }
    const char *machine = a.machine ? a.machine : tern_exe_machine(&x);
    char base[512];
    const char *base_machine = machine_base(machine, base, sizeof base);
    tern_prof *prof = NULL;
    tern_prof_opts po;
    int rc = 0;
    tern_rt *rt = NULL;
    if (profile) {
        tern_prof_opts_init(&po);
        tern_machine *m = NULL;
        if (tern_machine_load(base_machine, &m, &err) == TERN_OK) {
            tern_prof_opts_from_machine(m, &po);
            tern_machine_free(m);
        }
        po.trace_path = trace;
        po.svg_path = svg;
        po.model_flops = model_flops_of(&x);
        if (tern_prof_create(&po, &prof, &err)) {
            fprintf(stderr, "tern run: %s\n", err.msg);
            tern_exe_free(&x);
            return 1;
        }
    }
    if (outdir && mkdir(outdir, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "tern run: --output-dir %s: cannot create the directory: %s\n", outdir, strerror(errno));
        rc = 1;
        goto done;
    }
    tern_rt_options ro = {0};
    ro.mode = timing_only ? TERN_MODE_TIMING_ONLY : TERN_MODE_FUNCTIONAL;
    ro.on_event = prof ? tern_prof_event : NULL;
    ro.event_ctx = prof;
    ro.force_machine = force_machine;
    ro.transport = tr;
    if (tern_rt_create(&x, machine, &ro, &rt, &err)) {
        fprintf(stderr, "tern run: %s\n", err.msg);
        rc = 1;
        goto done;
    }
    for (int k = 0; k < nin; k++) {
        int found = 0;
        char iname[TERN_TENSOR_NAME_MAX];
        tern_compile_io_name(in_names[k], iname, sizeof iname);
        for (size_t i = 0; i < x.num_inputs; i++)
            found |= !strcmp(x.inputs[i].name, iname);
        if (!found) {
            fprintf(stderr, "tern run: the model has no input '%s'\n", in_names[k]);
            rc = 2;
            goto done;
        }
    }
    for (size_t i = 0; i < x.num_inputs; i++) {
        const tern_exe_io *io = &x.inputs[i];
        const char *file = NULL;
        const tern_npy *arr = NULL;
        for (int k = 0; k < nin; k++) {
            char iname[TERN_TENSOR_NAME_MAX];
            tern_compile_io_name(in_names[k], iname, sizeof iname);
            if (!strcmp(iname, io->name)) {
                file = in_files[k];
                arr = &arrs[k];
            }
        }
        if (timing_only && !file) {
            /* a timing-only run reads no values: nothing is generated, so a 2^31-element input costs no memory */
            printf("input %s: %s [", io->name, io->text_bytes ? "text" : tern_dtype_name(io->dtype));
            for (unsigned d = 0; d < io->rank; d++)
                printf("%s%lld", d ? ", " : "", (long long)io->shape[d]);
            printf("] not generated (timing-only)\n");
            continue;
        }
        void *data = NULL;
        size_t bytes = 0;
        int bad = make_input(io, arr, seed + i, &data, &bytes, file ? file : "");
        if (bad || tern_rt_set_input(rt, io->name, data, bytes, &err)) {
            if (!bad)
                fprintf(stderr, "tern run: %s\n", err.msg);
            free(data);
            rc = 1;
            goto done;
        }
        free(data);
        if (!file)
            printf("input %s: %s [", io->name, io->text_bytes ? "text" : tern_dtype_name(io->dtype));
        if (!file)
            for (unsigned d = 0; d < io->rank; d++)
                printf("%s%lld", d ? ", " : "", (long long)io->shape[d]);
        if (!file && tern_exe_io_elems(io) == 0)
            printf("] (empty)\n");
        else if (!file)
            printf("] random (seed %llu)\n", (unsigned long long)(seed + i));
    }
    tern_run_stats st;
    if (tern_rt_execute(rt, &st, &err)) {
        fprintf(stderr, "tern run: %s\n", err.msg);
        rc = 1;
        goto done;
    }
    for (size_t i = 0; i < x.num_outputs && !timing_only && tern_rt_core_is_local(rt, 0); i++) {
        const tern_exe_io *io = &x.outputs[i];
        uint64_t n = tern_exe_io_elems(io);
        char fname[TERN_NAME_FILENAME_MAX]; /* the output's file name: docs/runtime.md */
        tern_name_to_filename(tern_exe_io_name(io), fname, sizeof fname);
        if (io->text_bytes) {
            size_t tb = (size_t)tern_exe_io_bytes(io);
            uint8_t *cells = malloc(tb ? tb : 1);
            char path[1024];
            if (outdir)
                snprintf(path, sizeof path, "%s/%s.npy", outdir, fname);
            if (!cells || tern_rt_get_output(rt, tern_exe_io_name(io), cells, tb, &err)) {
                fprintf(stderr, "tern run: %s\n", cells ? err.msg : "out of memory");
                free(cells);
                rc = 1;
                goto done;
            }
            if (text_output(io, cells, outdir ? path : NULL))
                rc = 1;
            free(cells);
            continue;
        }
        size_t es = tern_dtype_size(io->dtype);
        uint8_t *raw = malloc(n * es > 0 ? n * es : 1);
        float *f = malloc(sizeof(float) * (n ? n : 1));
        if (!raw || !f || tern_rt_get_output(rt, tern_exe_io_name(io), raw, n * es, &err)) {
            fprintf(stderr, "tern run: %s\n", raw && f ? err.msg : "out of memory");
            free(raw);
            free(f);
            rc = 1;
            goto done;
        }
        tern_convert_to_f32(f, io->dtype, raw, n, NULL);
        double sum = 0, sq = 0, mn = INFINITY, mx = -INFINITY;
        for (uint64_t k = 0; k < n; k++) {
            sum += f[k];
            sq += (double)f[k] * f[k];
            mn = f[k] < mn ? f[k] : mn;
            mx = f[k] > mx ? f[k] : mx;
        }
        double mean = n ? sum / n : 0, sd = n ? sqrt(fmax(0, sq / n - mean * mean)) : 0;
        printf("output %s: %s [", tern_exe_io_name(io), tern_dtype_name(io->dtype));
        for (unsigned d = 0; d < io->rank; d++)
            printf("%s%lld", d ? ", " : "", (long long)io->shape[d]);
        if (n == 0) { /* a zero-size output: no statistics to show */
            printf("] (empty)\n");
        } else {
            printf("] mean %.6g std %.6g min %.6g max %.6g first [", mean, sd, mn, mx);
            for (uint64_t k = 0; k < n && k < 4; k++)
                printf("%s%.6g", k ? ", " : "", f[k]);
            printf("%s]\n", n > 4 ? ", ..." : "");
        }
        if (outdir) {
            char path[1024];
            snprintf(path, sizeof path, "%s/%s.npy", outdir, fname);
            tern_npy out;
            memset(&out, 0, sizeof out);
            /* integer outputs keep their integer type and exact values (ArgMax/TopK indices); the rest fp32 */
            out.type = TERN_NPY_F32;
            out.data = f;
            static const struct {
                tern_dtype dt;
                int npy;
            } ints[] = {{TERN_DTYPE_INT8, TERN_NPY_I8},   {TERN_DTYPE_UINT8, TERN_NPY_U8},
                        {TERN_DTYPE_INT16, TERN_NPY_I16}, {TERN_DTYPE_UINT16, TERN_NPY_U16},
                        {TERN_DTYPE_INT32, TERN_NPY_I32}, {TERN_DTYPE_UINT32, TERN_NPY_U32}};
            for (size_t t = 0; t < TERN_ARRAY_LEN(ints); t++)
                if (io->dtype == ints[t].dt) {
                    out.type = ints[t].npy;
                    out.data = raw;
                }
            out.rank = (int)io->rank;
            for (unsigned d = 0; d < io->rank; d++)
                out.dims[d] = io->shape[d];
            if (tern_npy_write(path, &out, &err)) {
                fprintf(stderr, "tern run: %s\n", err.msg);
                rc = 1;
            }
        }
        free(raw);
        free(f);
    }
    double secs = (double)st.time_ps * 1e-12;
    tern_core_config cfg;
    double mfu = 0;
    if (tern_core_config_load(base_machine, &cfg, &err) == TERN_OK && secs > 0) {
        double peak = 2.0 * cfg.pe_rows * cfg.pe_cols * cfg.timing.clock_hz[TERN_ENGINE_TENSOR] * x.cores;
        mfu = model_flops_of(&x) / (peak * secs) * 100;
    }
    /* two significant digits for a small model's small MFU, one decimal otherwise */
    /* ... and the exact picoseconds, the figure runs are compared by (the same for any host thread count and any
     * number of MPI processes) */
    printf("predicted device time on %s (%u core%s): %.3f ms, MFU %.*f%% (%llu ps)\n", machine, x.cores,
           x.cores > 1 ? "s" : "", secs * 1e3, mfu >= 1 || mfu == 0 ? 1 : (int)ceil(-log10(mfu)) + 1, mfu,
           (unsigned long long)st.time_ps);
    const tern_rt_gather_info *gi = tern_rt_gather(rt);
    if (gi) /* the batch split as ranks of one launch (docs/runtime.md) */
        printf("  the %u shares ran as ranks of one launch: last share done at %.3f ms, then %u on-device "
               "all-gather%s of the outputs: %.3f ms (%llu + %llu ps)\n",
               gi->ranks, gi->compute_ps * 1e-9, gi->gathers, gi->gathers == 1 ? "" : "s", gi->gather_ps * 1e-9,
               (unsigned long long)gi->compute_ps, (unsigned long long)gi->gather_ps);
    if (prof) {
        tern_prof_summary sum;
        if (tern_prof_finish(prof, &st, &sum, &err)) {
            fprintf(stderr, "tern run: %s\n", err.msg);
            rc = 1;
        } else {
            tern_prof_summary_print(stdout, &sum);
        }
    }
done:
    free_arrays(arrs, nin);
    tern_rt_free(rt);
    tern_prof_free(prof);
    tern_exe_free(&x);
    return rc;
}
