/* `tern kernel`: build a kernel from the library and save its program (with its interface tensors), so the
 * library's kernels can be run, profiled, disassembled and shipped from the command line without writing C:
 * `tern kernel gemm` is the NKI tutorial's blocked GEMM (lhsT[K,M], rhs[K,N] -> out[M,N]), `softmax` and
 * `layernorm` the row-wise kernels. Usage errors (unknown kernel or option, bad number or dtype, unknown
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
            "\n"
            "Build a library kernel and save its program (binary .tprog, or assembly text if FILE ends in .s)\n"
            "with its input/output tensors, ready for `tern profile`.\n"
            "  gemm       out[M,N] = lhsT[K,M]^T @ rhs[K,N], blocked as the NKI matrix-multiplication tutorial\n"
            "             (tensors lhsT, rhs -> out)\n"
            "  softmax    out[r,:] = softmax(in[r,:]) (tensors in -> out)\n"
            "  layernorm  out = (in - mean) / sqrt(var + eps) * gamma + beta per row\n"
            "             (tensors in, gamma[1,C], beta[1,C] -> out)\n"
            "options:\n"
            "  --dtype DT       input dtype (default bf16; gemm: fp32, bf16, fp16, fp8_e4m3, fp8_e5m2)\n"
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
    enum { GEMM, SOFTMAX, LAYERNORM } kind;
    if (!strcmp(which, "gemm"))
        kind = GEMM;
    else if (!strcmp(which, "softmax"))
        kind = SOFTMAX;
    else if (!strcmp(which, "layernorm"))
        kind = LAYERNORM;
    else {
        fprintf(stderr, "tern kernel: unknown kernel '%s' (gemm, softmax, layernorm)\n", which);
        kernel_usage(stderr);
        return 2;
    }

    uint64_t m = 0, n = 0, kk = 0, rows = 0, cols = 0;
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
        const char *what = !strcmp(a, "-o")                                     ? "a file name"
                           : !strcmp(a, "--machine")                            ? "a machine name or JSON path"
                           : !strcmp(a, "--dtype") || !strcmp(a, "--out-dtype") ? "a dtype"
                           : !strcmp(a, "--eps")                                ? "a number"
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
        else if (kind == LAYERNORM && !strcmp(a, "--eps")) {
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
