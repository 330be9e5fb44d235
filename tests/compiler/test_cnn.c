/* The compiler's CNN lowerings (src/compiler/lower_cnn.c) against PyTorch: small Conv1d/Conv2d/Conv3d (strides,
 * pads, dilations, groups, depthwise, bias), BatchNorm2d, Max/Avg/global pools (2-D and 3-D) and the resnet_tiny model from
 * scripts/gen_models.py, exported with torch.onnx.export by Debian's python3 (scripts/gen_cnn_tests.py), compiled
 * with tern_compile_onnx, run on a simulated trn1 core and compared with PyTorch's float64 outputs. FP32 matmuls
 * for tight tolerances, BF16 (the default) with tolerances from its rounding. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tern/compiler.h"
#include "tern/npy.h"
#include "tern/runtime.h"

static char dir[] = "/tmp/tern_cnn_XXXXXX";

/* Compile DIR/<name>.onnx with the matmul dtype, run it on DIR/<name>.in.npy and return the largest absolute
 * difference from DIR/<name>.out.npy (negative on failure, reported); *ref_max gets max |reference|. */
static double run_case(const char *name, const char *in_name, const char *out_name, tern_dtype mdt, double *ref_max)
{
    char path[512];
    tern_error err;
    tern_compile_opts o;
    tern_compile_opts_default(&o);
    o.matmul_dtype = mdt;
    tern_exe exe;
    snprintf(path, sizeof path, "%s/%s.onnx", dir, name);
    if (tern_compile_onnx(path, &o, &exe, NULL, &err)) {
        CHECK_MSG(0, "%s: compile failed: %s", name, err.msg);
        return -1;
    }
    tern_npy in, ref;
    memset(&in, 0, sizeof in);
    memset(&ref, 0, sizeof ref);
    tern_rt *rt = NULL;
    double worst = -1;
    float *got = NULL;
    snprintf(path, sizeof path, "%s/%s.in.npy", dir, name);
    if (tern_npy_read(path, &in, &err)) {
        CHECK_MSG(0, "%s: %s", name, err.msg);
        goto done;
    }
    snprintf(path, sizeof path, "%s/%s.out.npy", dir, name);
    if (tern_npy_read(path, &ref, &err)) {
        CHECK_MSG(0, "%s: %s", name, err.msg);
        goto done;
    }
    uint64_t n = tern_npy_count(&ref);
    got = malloc(sizeof(float) * n);
    tern_run_stats st;
    if (!got || tern_rt_create(&exe, "trn1.2xlarge", NULL, &rt, &err) ||
        tern_rt_set_input(rt, in_name, in.data, tern_npy_count(&in) * sizeof(float), &err) ||
        tern_rt_execute(rt, &st, &err) || tern_rt_get_output(rt, out_name, got, n * sizeof(float), &err)) {
        CHECK_MSG(0, "%s: run failed: %s", name, err.msg);
        goto done;
    }
    worst = 0;
    *ref_max = 0;
    for (uint64_t i = 0; i < n; i++) {
        double r = tern_npy_get(&ref, i), d = fabs((double)got[i] - r);
        if (!(d <= worst)) /* NaN counts as the worst */
            worst = isnan(d) ? INFINITY : d;
        if (fabs(r) > *ref_max)
            *ref_max = fabs(r);
    }
done:
    free(got);
    tern_rt_free(rt);
    tern_npy_free(&in);
    tern_npy_free(&ref);
    tern_exe_free(&exe);
    return worst;
}

/* Compile DIR/<name>.onnx (no_fuse: tern_compile_opts.no_elementwise_fusion), run it on in[0..nin) and fill
 * out[0..nout); *time_ps the predicted time, *fused the report's fused_conv_relu, *adds its fused_conv_add. 0 on
 * failure (reported). */
static int run_fused(const char *name, const float *in, uint64_t nin, float *out, uint64_t nout, tern_dtype mdt,
                     int no_fuse, uint64_t *time_ps, int *fused, int *adds)
{
    char path[512];
    tern_error err;
    tern_compile_opts o;
    tern_compile_opts_default(&o);
    o.matmul_dtype = mdt;
    o.no_elementwise_fusion = no_fuse;
    tern_exe exe;
    tern_compile_report rep;
    snprintf(path, sizeof path, "%s/%s.onnx", dir, name);
    if (tern_compile_onnx(path, &o, &exe, &rep, &err)) {
        CHECK_MSG(0, "%s: compile failed: %s", name, err.msg);
        return 0;
    }
    *fused = rep.fused_conv_relu;
    *adds = rep.fused_conv_add;
    tern_rt *rt = NULL;
    tern_run_stats st;
    int ok = !tern_rt_create(&exe, "trn1.2xlarge", NULL, &rt, &err) &&
             !tern_rt_set_input(rt, "image", in, nin * sizeof(float), &err) && !tern_rt_execute(rt, &st, &err) &&
             !tern_rt_get_output(rt, "output", out, nout * sizeof(float), &err);
    CHECK_MSG(ok, "%s: run failed: %s", name, err.msg);
    *time_ps = ok ? st.time_ps : 0;
    tern_rt_free(rt);
    tern_exe_free(&exe);
    return ok;
}

/* fuse.conv_relu and fuse.conv_add (lower_cnn.c): the Relus and residual Adds after resnet_tiny's convolutions
 * applied by the Conv's GEMMs give the node-by-node program's bits, on the reference image and on ones with -0 and
 * huge values, and with NaN and infinities (which spread through the convolutions), in fp32 and bf16, in less
 * predicted time. */
static void check_conv_relu_fusion(void)
{
    char path[512];
    tern_error err;
    tern_npy in;
    memset(&in, 0, sizeof in);
    snprintf(path, sizeof path, "%s/resnet_tiny.in.npy", dir);
    if (tern_npy_read(path, &in, &err)) {
        CHECK_MSG(0, "resnet_tiny: %s", err.msg);
        return;
    }
    uint64_t nin = tern_npy_count(&in), nout = 10;
    float *x = malloc(sizeof(float) * nin), *a = malloc(sizeof(float) * nout), *b = malloc(sizeof(float) * nout);
    if (!x || !a || !b) {
        CHECK_MSG(0, "out of memory");
        goto done;
    }
    static const char *const kind[3] = {"", " -0 and huge", " NaN and inf"};
    for (int special = 0; special < 3; special++) {
        for (uint64_t i = 0; i < nin; i++) {
            x[i] = (float)tern_npy_get(&in, i);
            if (special == 1 && i % 7 == 3) /* -0 and huge finite values (sums of +-1e30 terms cancel to +-0 too) */
                x[i] = i % 3 == 0 ? -0.0f : (i % 3 == 1 ? 1e30f : -1e30f);
        }
        if (special == 2) { /* spread by the convolutions and the global pool: every output is NaN */
            const float v[] = {NAN, INFINITY, -INFINITY, 3e38f, -3e38f};
            for (uint64_t i = 0; i < 5; i++)
                x[(i * 997 + 13) % nin] = v[i];
        }
        for (int d = 0; d < 2; d++) {
            tern_dtype mdt = d ? TERN_DTYPE_BF16 : TERN_DTYPE_FP32;
            char line[96];
            snprintf(line, sizeof line, "conv+relu fusion %s%s", d ? "bf16" : "fp32", kind[special]);
            TEST_BEGIN(line);
            uint64_t ta = 0, tb = 0;
            int fa = 0, fb = 0, aa = 0, ab = 0;
            if (!run_fused("resnet_tiny", x, nin, a, nout, mdt, 0, &ta, &fa, &aa) ||
                !run_fused("resnet_tiny", x, nin, b, nout, mdt, 1, &tb, &fb, &ab))
                continue;
            /* resnet_tiny: a stem conv + Relu, then per block conv + Relu, conv + Add(shortcut) + Relu */
            CHECK_MSG(fa == 5 && aa == 2 && fb == 0 && ab == 0,
                      "fused Relu / Add nodes: %d / %d (expected 5 / 2), without fusion %d / %d (expected 0 / 0)", fa, aa,
                      fb, ab);
            CHECK_MSG(!memcmp(a, b, sizeof(float) * nout), "fused and node-by-node outputs differ (first %g vs %g)",
                      (double)a[0], (double)b[0]);
            CHECK_MSG(ta < tb, "predicted time %llu ps fused, %llu node by node: not shorter", (unsigned long long)ta,
                      (unsigned long long)tb);
            int nonfinite = 0;
            for (uint64_t i = 0; i < nout; i++)
                nonfinite += !isfinite(a[i]);
            CHECK_MSG(special == 2 ? nonfinite > 0 : nonfinite == 0, "%d of the outputs are not finite", nonfinite);
        }
    }
done:
    free(x);
    free(a);
    free(b);
    tern_npy_free(&in);
}

int main(void)
{
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 scripts/gen_cnn_tests.py %s >/dev/null && "
             "/usr/bin/python3 scripts/gen_models.py %s resnet_tiny >/dev/null",
             dir, dir);
    TEST_BEGIN("reference generation");
    int ok = system(cmd) == 0;
    CHECK_MSG(ok, "%s failed", cmd);
    if (ok) {
        char path[512], line[128];
        snprintf(path, sizeof path, "%s/cases.txt", dir);
        FILE *f = fopen(path, "r");
        CHECK_MSG(f != NULL, "cannot open %s", path);
        int cases = 0;
        while (f && fgets(line, sizeof line, f)) {
            line[strcspn(line, "\r\n")] = '\0';
            if (!line[0])
                continue;
            TEST_BEGIN(line);
            cases++;
            /* FP32: fp32 products with fp32 accumulation over K <= 180 terms of O(1) size, and pools/norms in fp32
             * on VectorE: the error bound is a few K*2^-24 relative to the sum of |terms| (~1e-5 worst case);
             * observed <= 5e-7. */
            double rmax = 0, e = run_case(line, "x", "y", TERN_DTYPE_FP32, &rmax);
            double tol = 2e-5 * (rmax > 1 ? rmax : 1);
            CHECK_MSG(e >= 0 && e <= tol, "fp32: max |tern - torch| = %g, tolerance %g", e, tol);
            if (!strncmp(line, "conv", 4) && strcmp(line, "conv_depthwise")) {
                /* BF16 (default): activations and weights rounded to bf16 (2^-9 relative each) before fp32
                 * accumulation: ~2^-8 * sqrt(K) * rms(term) per output against an output scale of sqrt(K) * rms(term),
                 * i.e. ~0.4% of the output scale; 2% of max |ref| bounds it (observed <= 0.3%). The error must also
                 * be visibly above fp32's, or the matmul did not run in bf16. */
                double eb = run_case(line, "x", "y", TERN_DTYPE_BF16, &rmax);
                CHECK_MSG(eb >= 0 && eb <= 0.02 * rmax, "bf16: max |tern - torch| = %g, tolerance %g", eb, 0.02 * rmax);
                CHECK_MSG(eb > 1e-5 * rmax, "bf16 error %g is as small as fp32's: matmul dtype ignored?", eb);
            }
        }
        if (f)
            fclose(f);
        CHECK_MSG(cases >= 20, "%d cases in cases.txt (expected 20)", cases);

        TEST_BEGIN("resnet_tiny fp32");
        double rmax = 0, e = run_case("resnet_tiny", "image", "output", TERN_DTYPE_FP32, &rmax);
        /* 6 convs (BatchNorm folded by the exporter), pools, residual adds, Gemm, all fp32: observed ~1e-7. */
        CHECK_MSG(e >= 0 && e <= 1e-4, "max |tern - torch| = %g (max |ref| %g), tolerance 1e-4", e, rmax);
        TEST_BEGIN("resnet_tiny bf16");
        e = run_case("resnet_tiny", "image", "output", TERN_DTYPE_BF16, &rmax);
        /* 7 bf16 matmul layers in series, each adding ~0.4% relative rounding noise (see above), which grows
         * about as sqrt(layers) to ~1% of the logit scale; 3% of max |ref| bounds it (observed ~0.3%). */
        CHECK_MSG(e >= 0 && e <= 0.03 * rmax, "max |tern - torch| = %g, tolerance %g", e, 0.03 * rmax);
        check_conv_relu_fusion();

    }
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return check_report();
}
