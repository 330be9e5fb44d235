/* `tern kernel`: build a kernel from the library and save its program (with its interface tensors), so the
 * library's kernels can be run, profiled, disassembled and shipped from the command line without writing C:
 * `tern kernel gemm` is the NKI tutorial's blocked GEMM (lhsT[K,M], rhs[K,N] -> out[M,N]), `softmax` and
 * `layernorm` the row-wise kernels, `mlp` a transformer's FFN (two linear layers, the middle kept on chip, or with
 * --two-kernels through HBM, for comparison). Usage errors (unknown kernel or option, bad number or dtype, unknown
 * machine) exit 2; a kernel that cannot be built for the machine or a file that cannot be written exit 1. */
#include <float.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "tern/arch.h"
#include "tern/kernel.h"
#include "tern/kernel_lib.h"

#define DEFAULT_MACHINE "trn1.2xlarge"

static void kernel_usage(FILE *out)
{
    fprintf(out,
            "usage: tern kernel gemm --m M --n N --k K [options] -o FILE\n"
            "       tern kernel softmax --rows R --cols C [options] -o FILE\n"
            "       tern kernel layernorm --rows R --cols C [--eps E] [options] -o FILE\n"
            "       tern kernel mlp --rows M --cols K --hidden H [--out-cols N] [--act A] [--two-kernels] [options]\n"
            "                   -o FILE\n"
            "\n"
            "Build a library kernel and save its program (binary .tprog, or assembly text if FILE ends in .s)\n"
            "with its input/output tensors, ready for `tern profile`.\n"
            "  gemm       out[M,N] = lhsT[K,M]^T @ rhs[K,N], blocked as the NKI matrix-multiplication tutorial\n"
            "             (tensors lhsT, rhs -> out)\n"
            "  softmax    out[r,:] = softmax(in[r,:]) (tensors in -> out)\n"
            "  layernorm  out = (in - mean) / sqrt(var + eps) * gamma + beta per row\n"
            "             (tensors in, gamma[1,C], beta[1,C] -> out)\n"
            "  mlp        out = act(in @ w1 + b1) @ w2 + b2, a transformer's FFN in one kernel with the middle\n"
            "             [M,H] kept in SBUF (tern_lib_linear_pair; M up to 128 rows, else two kernels); N defaults\n"
            "             to K, A (gelu default, gelu_tanh, relu, none) is the first layer's activation; weights in\n"
            "             bf16, biases fp32 (tensors in, w1[K,H], b1[1,H], w2[H,N], b2[1,N] -> out);\n"
            "             --two-kernels: the two layers as two kernels through an HBM middle, for comparison\n"
            "options:\n"
            "  --dtype DT       input dtype (default bf16; gemm: fp32, bf16, fp16, fp8_e4m3, fp8_e5m2; mlp: its in)\n"
            "  --out-dtype DT   output dtype (default: the input dtype)\n"
            "  --machine NAME   machine the program is built for (default " DEFAULT_MACHINE ")\n"
            "  -o FILE          where to save the program\n");
}

static int parse_u64(const char *opt, const char *s, uint64_t *out)
{
    return tern_arg_uint("tern kernel", opt, s, 1, 1ull << 24, out);
}

static int parse_dtype(const char *opt, const char *s, tern_dtype *out)
{
    tern_error err;
    if (tern_dtype_from_name(s, out, &err) != TERN_OK || !tern_dtype_is_float(*out)) {
        fprintf(stderr, "tern kernel: %s: '%s' is not a float dtype (fp32, bf16, fp16, fp8_e4m3, fp8_e5m2)\n", opt,
                s);
        return 2;
    }
    return 0;
}

int tern_cmd_kernel(int argc, char **argv)
{
    if (argc < 2) {
        kernel_usage(stderr);
        return 2;
    }
    const char *which = argv[1];
    if (!strcmp(which, "-h") || !strcmp(which, "--help")) {
        kernel_usage(stdout);
        return 0;
    }
    enum { GEMM, SOFTMAX, LAYERNORM, MLP } kind;
    if (!strcmp(which, "gemm"))
        kind = GEMM;
    else if (!strcmp(which, "softmax"))
        kind = SOFTMAX;
    else if (!strcmp(which, "layernorm"))
        kind = LAYERNORM;
    else if (!strcmp(which, "mlp"))
        kind = MLP;
    else {
        fprintf(stderr, "tern kernel: unknown kernel '%s' (gemm, softmax, layernorm, mlp)\n", which);
        kernel_usage(stderr);
        return 2;
    }

    uint64_t m = 0, n = 0, kk = 0, rows = 0, cols = 0, hidden = 0, out_cols = 0;
    tern_act_func act = TERN_ACT_GELU;
    int two = 0;
    tern_dtype dt = TERN_DTYPE_BF16, odt = TERN_DTYPE_BF16;
    int have_odt = 0;
    float eps = 1e-5f;
    const char *machine = DEFAULT_MACHINE, *outp = NULL;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            kernel_usage(stdout);
            return 0;
        }
        if (a[0] != '-') {
            fprintf(stderr, "tern kernel: unexpected argument '%s'\n", a);
            return 2;
        }
        if (kind == MLP && !strcmp(a, "--two-kernels")) {
            two = 1;
            continue;
        }
        const char *what = !strcmp(a, "-o")                                     ? "a file name"
                           : !strcmp(a, "--machine")                            ? "a machine name or JSON path"
                           : !strcmp(a, "--dtype") || !strcmp(a, "--out-dtype") ? "a dtype"
                           : !strcmp(a, "--eps")                                ? "a number"
                           : !strcmp(a, "--act")                                ? "gelu, gelu_tanh, relu or none"
                                                                                : "an integer";
        const char *v = tern_arg_value("tern kernel", argc, argv, &i, what);
        if (!v)
            return 2;
        int rc = 0;
        if (kind == GEMM && !strcmp(a, "--m"))
            rc = parse_u64(a, v, &m);
        else if (kind == GEMM && !strcmp(a, "--n"))
            rc = parse_u64(a, v, &n);
        else if (kind == GEMM && !strcmp(a, "--k"))
            rc = parse_u64(a, v, &kk);
        else if (kind != GEMM && !strcmp(a, "--rows"))
            rc = parse_u64(a, v, &rows);
        else if (kind != GEMM && !strcmp(a, "--cols"))
            rc = parse_u64(a, v, &cols);
        else if (kind == MLP && !strcmp(a, "--hidden"))
            rc = parse_u64(a, v, &hidden);
        else if (kind == MLP && !strcmp(a, "--out-cols"))
            rc = parse_u64(a, v, &out_cols);
        else if (kind == MLP && !strcmp(a, "--act")) {
            if (!strcmp(v, "gelu"))
                act = TERN_ACT_GELU;
            else if (!strcmp(v, "gelu_tanh"))
                act = TERN_ACT_GELU_TANH;
            else if (!strcmp(v, "relu"))
                act = TERN_ACT_RELU;
            else if (!strcmp(v, "none"))
                act = TERN_ACT_COPY;
            else {
                fprintf(stderr, "tern kernel mlp: --act must be gelu, gelu_tanh, relu or none, not '%s'\n", v);
                return 2;
            }
        } else if (kind == LAYERNORM && !strcmp(a, "--eps")) {
            double e;
            if ((rc = tern_arg_float("tern kernel", a, v, 0, FLT_MAX, &e)) == 0)
                eps = (float)e;
        } else if (!strcmp(a, "--dtype"))
            rc = parse_dtype(a, v, &dt);
        else if (!strcmp(a, "--out-dtype")) {
            rc = parse_dtype(a, v, &odt);
            have_odt = 1;
        } else if (!strcmp(a, "--machine"))
            machine = v;
        else if (!strcmp(a, "-o"))
            outp = v;
        else {
            fprintf(stderr, "tern kernel %s: unknown option '%s'\n", which, a);
            kernel_usage(stderr);
            return 2;
        }
        if (rc)
            return rc;
    }
    if (!have_odt)
        odt = dt;
    if (kind == GEMM && (!m || !n || !kk)) {
        fprintf(stderr, "tern kernel gemm: --m, --n and --k are required\n");
        return 2;
    }
    if (kind != GEMM && (!rows || !cols)) {
        fprintf(stderr, "tern kernel %s: --rows and --cols are required\n", which);
        return 2;
    }
    if (kind == MLP && !hidden) {
        fprintf(stderr, "tern kernel mlp: --hidden is required\n");
        return 2;
    }
    if (kind == MLP && !out_cols)
        out_cols = cols;
    if (kind == GEMM && dt != TERN_DTYPE_FP32 && dt != TERN_DTYPE_BF16 && dt != TERN_DTYPE_FP16 &&
        dt != TERN_DTYPE_FP8_E4M3 && dt != TERN_DTYPE_FP8_E5M2) {
        fprintf(stderr, "tern kernel gemm: TensorE takes fp32, bf16, fp16, fp8_e4m3 or fp8_e5m2 inputs, not %s\n",
                tern_dtype_name(dt));
        return 2;
    }
    if (!outp) {
        fprintf(stderr, "tern kernel %s: -o FILE is required\n", which);
        return 2;
    }

    tern_error err;
    char path[4096];
    if (tern_machine_find(machine, path, sizeof path, &err) != TERN_OK) {
        fprintf(stderr, "tern kernel: unknown machine: %s\n", err.msg);
        return 2;
    }
    tern_core_config cfg;
    if (tern_core_config_load(machine, &cfg, &err) != TERN_OK) {
        fprintf(stderr, "tern kernel: %s\n", err.msg);
        return 1;
    }
    tern_kernel *k = NULL;
    if (tern_kernel_create(&cfg, which, &k, &err) != TERN_OK) {
        fprintf(stderr, "tern kernel: %s\n", err.msg);
        return 1;
    }
    if (kind == GEMM) {
        tern_view lhsT = tern_kernel_input2d(k, "lhsT", dt, kk, m);
        tern_view rhs = tern_kernel_input2d(k, "rhs", dt, kk, n);
        tern_view out = tern_kernel_output2d(k, "out", odt, m, n);
        tern_lib_gemm(k, out, lhsT, rhs, NULL);
    } else if (kind == SOFTMAX) {
        tern_view in = tern_kernel_input2d(k, "in", dt, rows, cols);
        tern_view out = tern_kernel_output2d(k, "out", odt, rows, cols);
        tern_lib_softmax(k, out, in);
    } else if (kind == MLP) {
        tern_view in = tern_kernel_input2d(k, "in", dt, rows, cols);
        tern_view w1 = tern_kernel_input2d(k, "w1", TERN_DTYPE_BF16, cols, hidden);
        tern_view b1 = tern_kernel_input2d(k, "b1", TERN_DTYPE_FP32, 1, hidden);
        tern_view w2 = tern_kernel_input2d(k, "w2", TERN_DTYPE_BF16, hidden, out_cols);
        tern_view b2 = tern_kernel_input2d(k, "b2", TERN_DTYPE_FP32, 1, out_cols);
        tern_view out = tern_kernel_output2d(k, "out", odt, rows, out_cols);
        if (two || !tern_lib_linear_pair(k, out, in, w1, b1, act, w2, b2, TERN_ACT_COPY, NULL)) {
            if (!two && tern_kernel_status(k, &err) == TERN_OK)
                printf("tern kernel mlp: %llu rows do not fit one kernel (one row tile and SBUF for both layers): "
                       "two kernels through HBM\n",
                       (unsigned long long)rows);
            uint64_t dims[2] = {rows, hidden};
            tern_view mid = tern_kernel_hbm_tensor(k, "mid", TERN_KIO_SCRATCH, TERN_DTYPE_BF16, 2, dims);
            tern_lib_linear(k, mid, in, w1, b1, act);
            tern_lib_linear(k, out, mid, w2, b2, TERN_ACT_COPY);
        }
    } else {
        tern_view in = tern_kernel_input2d(k, "in", dt, rows, cols);
        tern_view gamma = tern_kernel_input2d(k, "gamma", dt, 1, cols);
        tern_view beta = tern_kernel_input2d(k, "beta", dt, 1, cols);
        tern_view out = tern_kernel_output2d(k, "out", odt, rows, cols);
        tern_lib_layernorm(k, out, in, gamma, beta, eps);
    }
    int rc = 0;
    if (tern_kernel_status(k, &err) != TERN_OK) {
        fprintf(stderr, "tern kernel %s: cannot build for %s: %s\n", which, machine, err.msg);
        rc = 1;
    } else if (tern_kernel_save(k, outp, &err) != TERN_OK) {
        fprintf(stderr, "tern kernel %s: %s\n", which, err.msg);
        rc = 1;
    } else {
        printf("tern kernel %s: %zu instructions for %s -> %s\n", which,
                tern_program_instr_count(tern_kernel_program(k)), machine, outp);
    }
    tern_kernel_free(k);
    return rc;
}
