/* The runtime: an executable built from kernels (programs + constant weights + I/O description) saves, loads,
 * runs on a simulated chip and returns the right outputs; a batch split over the two cores of a trn1 chip gives
 * the same outputs as one core, gathered on the device (test_batch_ranks.c); timing-only runs predict the same time; every malformed executable and
 * every misuse gets a clear error. */
#include <unistd.h>

#include "../kernel/kernel_test_util.h"
#include "tern/kernel_lib.h"
#include "tern/runtime.h"

/* y[B, N] = x[B, K] @ W[K, N] + b[N], W and b constants; built for `rows` rows of the batch. */
static tern_kernel *linear(const tern_core_config *cfg, unsigned rows, unsigned K, unsigned N, const float *w,
                           const float *b)
{
    tern_error err;
    tern_kernel *k = NULL;
    tern_kernel_create(cfg, "linear", &k, &err);
    tern_view xT = tern_kernel_input2d(k, "xT", TERN_DTYPE_FP32, K, rows); /* activations delivered transposed */
    uint64_t wshape[2] = {K, N}, bshape[2] = {1, N};
    tern_view W = tern_kernel_constant(k, "W", TERN_DTYPE_FP32, 2, wshape, w);
    tern_view B = tern_kernel_constant(k, "b", TERN_DTYPE_FP32, 2, bshape, b);
    tern_view mm = tern_kernel_hbm_tensor(k, "mm", TERN_KIO_SCRATCH, TERN_DTYPE_FP32, 2, (uint64_t[]){rows, N});
    tern_view y = tern_kernel_output2d(k, "y", TERN_DTYPE_FP32, rows, N);
    tern_lib_gemm(k, mm, xT, W, NULL);
    tern_lib_bias_act(k, y, mm, B, TERN_ACT_COPY);
    return k;
}

int main(void)
{
    const unsigned Bt = 256, K = 96, N = 160;
    tern_core_config cfg;
    tern_error err;
    tern_core_config_load("trn1.2xlarge", &cfg, &err);
    float *w = malloc(sizeof(float) * K * N), *b = malloc(sizeof(float) * N), *x = malloc(sizeof(float) * Bt * K);
    ktu_fill(w, (size_t)K * N, TERN_DTYPE_FP32, 1);
    ktu_fill(b, N, TERN_DTYPE_FP32, 2);
    ktu_fill(x, (size_t)Bt * K, TERN_DTYPE_FP32, 3);
    float *xT = malloc(sizeof(float) * Bt * K);
    for (unsigned r = 0; r < Bt; r++)
        for (unsigned c = 0; c < K; c++)
            xT[(size_t)c * Bt + r] = x[(size_t)r * K + c];
    double *ref = malloc(sizeof(double) * Bt * N);
    for (unsigned r = 0; r < Bt; r++)
        for (unsigned n = 0; n < N; n++) {
            double s = b[n];
            for (unsigned kk = 0; kk < K; kk++)
                s += (double)x[(size_t)r * K + kk] * w[(size_t)kk * N + n];
            ref[(size_t)r * N + n] = s;
        }

    /* One core. */
    TEST_BEGIN("executable from one kernel runs and matches the reference");
    tern_kernel *k1 = linear(&cfg, Bt, K, N, w, b);
    tern_exe x1;
    tern_status st = tern_exe_from_kernel(&x1, "trn1.2xlarge", k1, &err);
    CHECK_MSG(st == TERN_OK, "%s", err.msg);
    CHECK_EQ_INT(x1.num_consts, 2);
    CHECK_EQ_INT(x1.num_inputs, 1);
    char path[64];
    snprintf(path, sizeof path, "/tmp/tern_rt_%d.tern", (int)getpid());
    CHECK_EQ_INT(tern_exe_save(&x1, path, &err), TERN_OK);
    tern_exe loaded;
    CHECK_EQ_INT(tern_exe_load(path, &loaded, &err), TERN_OK);
    tern_rt *rt = NULL;
    st = tern_rt_create(&loaded, "trn1.2xlarge", NULL, &rt, &err);
    CHECK_MSG(st == TERN_OK, "%s", err.msg);
    float *y = malloc(sizeof(float) * Bt * N), *y2 = malloc(sizeof(float) * Bt * N);
    tern_run_stats s1, s2;
    CHECK_EQ_INT(tern_rt_set_input(rt, "xT", xT, sizeof(float) * Bt * K, &err), TERN_OK);
    CHECK_EQ_INT(tern_rt_execute(rt, &s1, &err), TERN_OK);
    CHECK_EQ_INT(tern_rt_get_output(rt, "y", y, sizeof(float) * Bt * N, &err), TERN_OK);
    size_t bad = 0;
    for (size_t i = 0; i < (size_t)Bt * N; i++)
        bad += fabs(y[i] - ref[i]) > 1e-5 * (1 + fabs(ref[i]));
    CHECK_MSG(bad == 0, "%zu outputs off", bad);
    CHECK(s1.time_ps > 0);

    TEST_BEGIN("executing again gives the same outputs and the same time");
    {
        /* semaphores end a run non-zero; the runtime must reset them, or the second run's waits pass early */
        tern_run_stats again;
        for (int rep = 0; rep < 2; rep++) {
            CHECK_EQ_INT(tern_rt_set_input(rt, "xT", xT, sizeof(float) * Bt * K, &err), TERN_OK);
            CHECK_EQ_INT(tern_rt_execute(rt, &again, &err), TERN_OK);
            CHECK_EQ_INT(tern_rt_get_output(rt, "y", y2, sizeof(float) * Bt * N, &err), TERN_OK);
            CHECK_MSG(memcmp(y, y2, sizeof(float) * Bt * N) == 0, "run %d: outputs differ from the first run", rep + 2);
            CHECK_EQ_INT(again.time_ps, s1.time_ps);
        }
    }

    TEST_BEGIN("runtime errors name the tensor and the rule");
    CHECK(tern_rt_set_input(rt, "nope", xT, 4, &err) != TERN_OK);
    CHECK_STR_CONTAINS(err.msg, "no input named 'nope'");
    CHECK(tern_rt_set_input(rt, "xT", xT, 4, &err) != TERN_OK);
    CHECK_STR_CONTAINS(err.msg, "input 'xT' takes 98304 bytes (fp32), 4 given");
    CHECK(tern_rt_get_output(rt, "y", y, 8, &err) != TERN_OK);
    CHECK_STR_CONTAINS(err.msg, "output 'y' holds");
    tern_rt_free(rt);
    st = tern_rt_create(&loaded, "trn1.2xlarge", NULL, &rt, &err);
    CHECK(tern_rt_execute(rt, NULL, &err) != TERN_OK);
    CHECK_STR_CONTAINS(err.msg, "input 'xT' was not set");
    tern_rt_free(rt);
    CHECK(tern_rt_create(&loaded, "no-such-machine", NULL, &rt, &err) != TERN_OK);
    CHECK_STR_CONTAINS(err.msg, "no-such-machine");
    {
        /* an executable built in memory whose interface does not match its program is refused at load */
        char saved[sizeof loaded.inputs[0].name];
        memcpy(saved, loaded.inputs[0].name, sizeof saved);
        snprintf(loaded.inputs[0].name, sizeof loaded.inputs[0].name, "%s", "zz");
        CHECK(tern_rt_create(&loaded, "trn1.2xlarge", NULL, &rt, &err) != TERN_OK);
        CHECK_STR_CONTAINS(err.msg, "core 0's program has no tensor 'zz' (an input)");
        memcpy(loaded.inputs[0].name, saved, sizeof saved);
        loaded.outputs[0].shape[0] += 1;
        CHECK(tern_rt_create(&loaded, "trn1.2xlarge", NULL, &rt, &err) != TERN_OK);
        CHECK_STR_CONTAINS(err.msg, "its share of the output is");
        loaded.outputs[0].shape[0] -= 1;
    }

    /* Two cores, half the batch each. */
    TEST_BEGIN("a batch split over two cores gives the same outputs, then a gather");
    {
        /* Each core takes its rows of x [B, K] (the batch axis is axis 0) and transposes them on-chip. */
        tern_exe_io out = {"y", TERN_DTYPE_FP32, 2, {Bt, N}, 1, 0, NULL};
        tern_exe x2;
        tern_kernel *kk[2];
        for (int c = 0; c < 2; c++) {
            tern_kernel_create(&cfg, "linear_rows", &kk[c], &err);
            tern_view xr = tern_kernel_input2d(kk[c], "x", TERN_DTYPE_FP32, Bt / 2, K);
            uint64_t wshape[2] = {K, N}, bshape[2] = {1, N};
            tern_view W = tern_kernel_constant(kk[c], "W", TERN_DTYPE_FP32, 2, wshape, w);
            tern_view B = tern_kernel_constant(kk[c], "b", TERN_DTYPE_FP32, 2, bshape, b);
            tern_view xT2 = tern_kernel_hbm_tensor(kk[c], "xT", TERN_KIO_SCRATCH, TERN_DTYPE_FP32, 2, (uint64_t[]){K, Bt / 2});
            tern_view mm = tern_kernel_hbm_tensor(kk[c], "mm", TERN_KIO_SCRATCH, TERN_DTYPE_FP32, 2, (uint64_t[]){Bt / 2, N});
            tern_view yy = tern_kernel_output2d(kk[c], "y", TERN_DTYPE_FP32, Bt / 2, N);
            tern_lib_transpose(kk[c], xT2, xr);
            tern_lib_gemm(kk[c], mm, xT2, W, NULL);
            tern_lib_bias_act(kk[c], yy, mm, B, TERN_ACT_COPY);
        }
        tern_exe_io ins = {"x", TERN_DTYPE_FP32, 2, {Bt, K}, 1, 0, NULL};
        st = tern_exe_from_kernels(&x2, "trn1.2xlarge", kk, 2, &ins, 1, &out, 1, "{\"model\":\"linear\"}", &err);
        CHECK_MSG(st == TERN_OK, "%s", err.msg);
        st = tern_rt_create(&x2, "trn1.2xlarge", NULL, &rt, &err);
        CHECK_MSG(st == TERN_OK, "%s", err.msg);
        tern_rt_set_input(rt, "x", x, sizeof(float) * Bt * K, &err);
        CHECK_EQ_INT(tern_rt_execute(rt, &s2, &err), TERN_OK);
        CHECK_EQ_INT(tern_rt_get_output(rt, "y", y2, sizeof(float) * Bt * N, &err), TERN_OK);
        bad = 0;
        for (size_t i = 0; i < (size_t)Bt * N; i++)
            bad += fabs(y2[i] - ref[i]) > 1e-5 * (1 + fabs(ref[i]));
        CHECK_MSG(bad == 0, "%zu outputs off on two cores", bad);
        CHECK(tern_rt_core_stats(rt, 1) && tern_rt_core_stats(rt, 1)->time_ps > 0);
        /* the two shares run as ranks of one launch and y is gathered on the device (batch_ranks.c) */
        const tern_rt_gather_info *gi = tern_rt_gather(rt);
        CHECK_MSG(gi && gi->ranks == 2 && gi->gathers == 1, "two cores: no on-device gather of y");
        if (gi)
            CHECK_MSG(gi->compute_ps >= gi->share_max_ps && s2.time_ps >= gi->compute_ps + gi->gather_ps &&
                          gi->gather_ps > 0,
                      "two cores: %lld ps, shares done at %lld ps (slowest alone %lld), gather %lld ps",
                      (long long)s2.time_ps, (long long)gi->compute_ps, (long long)gi->share_max_ps,
                      (long long)gi->gather_ps);
        tern_rt_free(rt);
        TEST_BEGIN("timing-only execution predicts the same time and computes no values");
        tern_rt_options o = {0};
        o.mode = TERN_MODE_TIMING_ONLY;
        st = tern_rt_create(&x2, "trn1.2xlarge", &o, &rt, &err);
        tern_rt_set_input(rt, "x", x, sizeof(float) * Bt * K, &err);
        tern_run_stats s3;
        CHECK_EQ_INT(tern_rt_execute(rt, &s3, &err), TERN_OK);
        CHECK_EQ_INT(s3.time_ps, s2.time_ps);
        CHECK(tern_rt_get_output(rt, "y", y2, sizeof(float) * Bt * N, &err) != TERN_OK);
        CHECK_STR_CONTAINS(err.msg, "timing-only run computes no values");
        tern_rt_free(rt);
        TEST_BEGIN("an executable needing more cores than the chip is refused");
        CHECK(tern_rt_create(&x2, "neuroncore-v2", NULL, &rt, &err) != TERN_OK);
        CHECK_STR_CONTAINS(err.msg, "needs 2 NeuronCores; machine neuroncore-v2 has 1 (1 per chip");
        tern_exe_free(&x2);
        tern_kernel_free(kk[0]);
        tern_kernel_free(kk[1]);
    }

    TEST_BEGIN("zero-size inputs and outputs encode, decode, load and run with 0 bytes");
    {
        /* The linear kernel's interface plus an empty input [0, 5] and an empty output [3, 0, 2]: they have no
         * bytes to place, so no program tensor, and keep their true shapes through the file. */
        tern_exe_io ins[2] = {{"xT", TERN_DTYPE_FP32, 2, {K, Bt}, 0, 0, NULL}, {"nothing_in", TERN_DTYPE_FP32, 2, {0, 5}, 0, 0, NULL}};
        tern_exe_io outs[2] = {{"y", TERN_DTYPE_FP32, 2, {Bt, N}, 0, 0, NULL},
                               {"nothing_out", TERN_DTYPE_INT32, 3, {3, 0, 2}, 0, 0, NULL}};
        tern_exe xz, dz;
        st = tern_exe_from_kernels(&xz, "trn1.2xlarge", &k1, 1, ins, 2, outs, 2, NULL, &err);
        CHECK_MSG(st == TERN_OK, "%s", err.msg);
        uint8_t *bytes = NULL;
        size_t n = 0;
        CHECK_EQ_INT(tern_exe_encode(&xz, &bytes, &n, &err), TERN_OK);
        st = tern_exe_decode(bytes, n, &dz, &err);
        CHECK_MSG(st == TERN_OK, "%s", err.msg);
        CHECK_EQ_INT(dz.num_inputs, 2);
        CHECK_EQ_INT(dz.num_outputs, 2);
        CHECK(!strcmp(dz.inputs[1].name, "nothing_in") && dz.inputs[1].rank == 2 && dz.inputs[1].shape[0] == 0 &&
              dz.inputs[1].shape[1] == 5);
        CHECK(!strcmp(dz.outputs[1].name, "nothing_out") && dz.outputs[1].dtype == TERN_DTYPE_INT32 &&
              dz.outputs[1].rank == 3 && dz.outputs[1].shape[0] == 3 && dz.outputs[1].shape[1] == 0 &&
              dz.outputs[1].shape[2] == 2);
        CHECK_EQ_INT(tern_exe_io_elems(&dz.outputs[1]), 0);
        CHECK(tern_program_find_tensor(&dz.programs[0], "nothing_out") == NULL);
        free(bytes);
        st = tern_rt_create(&dz, "trn1.2xlarge", NULL, &rt, &err);
        CHECK_MSG(st == TERN_OK, "%s", err.msg);
        CHECK_EQ_INT(tern_rt_set_input(rt, "xT", xT, sizeof(float) * Bt * K, &err), TERN_OK);
        CHECK(tern_rt_execute(rt, NULL, &err) != TERN_OK); /* an empty input must still be set */
        CHECK_STR_CONTAINS(err.msg, "input 'nothing_in' was not set");
        CHECK(tern_rt_set_input(rt, "nothing_in", xT, 4, &err) != TERN_OK);
        CHECK_STR_CONTAINS(err.msg, "input 'nothing_in' takes 0 bytes (fp32), 4 given");
        CHECK_EQ_INT(tern_rt_set_input(rt, "nothing_in", NULL, 0, &err), TERN_OK);
        CHECK_EQ_INT(tern_rt_execute(rt, NULL, &err), TERN_OK);
        CHECK_EQ_INT(tern_rt_get_output(rt, "nothing_out", NULL, 0, &err), TERN_OK);
        CHECK(tern_rt_get_output(rt, "nothing_out", y2, 4, &err) != TERN_OK);
        CHECK_STR_CONTAINS(err.msg, "output 'nothing_out' holds 0 bytes (int32), 4 requested");
        CHECK_EQ_INT(tern_rt_get_output(rt, "y", y2, sizeof(float) * Bt * N, &err), TERN_OK);
        CHECK_MSG(memcmp(y, y2, sizeof(float) * Bt * N) == 0, "the non-empty output differs from the plain run");
        tern_rt_free(rt);
        /* A zero-size interface tensor whose name is a program tensor with bytes is inconsistent: refused. */
        dz.outputs[0].shape[0] = 0;
        CHECK(tern_rt_create(&dz, "trn1.2xlarge", NULL, &rt, &err) != TERN_OK);
        CHECK_STR_CONTAINS(err.msg, "core 0's tensor 'y' holds 163840 bytes, its share of the output is 0");
        dz.outputs[0].shape[0] = Bt;
        /* Negative dimensions stay invalid. */
        dz.inputs[1].shape[0] = -1;
        CHECK(tern_exe_encode(&dz, &bytes, &n, &err) != TERN_OK);
        CHECK_STR_CONTAINS(err.msg, "input 'nothing_in': dimension 0 is -1 (must be 0..");
        tern_exe_free(&dz);
        tern_exe_free(&xz);
    }

    TEST_BEGIN("a text (ONNX string) interface: cells of text_bytes, kept through the file, parsed on GpSimd");
    {
        enum { W = TERN_EXE_TEXT_CELL };
        tern_kernel *kt = NULL;
        tern_kernel_create(&cfg, "text", &kt, &err);
        tern_view s_in = tern_kernel_input2d(kt, "s", TERN_DTYPE_UINT8, 1, 3 * W);
        tern_view y_out = tern_kernel_output2d(kt, "y", TERN_DTYPE_FP32, 1, 3);
        tern_view ts = tern_kernel_sbuf(kt, TERN_DTYPE_UINT8, 1, 3 * W, "ts");
        tern_view tn = tern_kernel_sbuf(kt, TERN_DTYPE_FP32, 1, 3, "tn");
        tern_kernel_load(kt, ts, s_in);
        tern_kernel_text_parse(kt, tn, ts, W);
        tern_kernel_store(kt, y_out, tn);
        tern_exe_io tin = {"s", TERN_DTYPE_UINT8, 1, {3}, 0, W, NULL}, tout = {"y", TERN_DTYPE_FP32, 1, {3}, 0, 0, NULL};
        tern_exe xt, dt;
        st = tern_exe_from_kernels(&xt, "trn1.2xlarge", &kt, 1, &tin, 1, &tout, 1, NULL, &err);
        CHECK_MSG(st == TERN_OK, "%s", err.msg);
        uint8_t *bytes = NULL;
        size_t n = 0;
        CHECK_EQ_INT(tern_exe_encode(&xt, &bytes, &n, &err), TERN_OK);
        st = tern_exe_decode(bytes, n, &dt, &err);
        CHECK_MSG(st == TERN_OK, "%s", err.msg);
        CHECK_EQ_INT(dt.inputs[0].text_bytes, W);
        CHECK_EQ_INT(dt.outputs[0].text_bytes, 0);
        CHECK_EQ_INT(tern_exe_io_bytes(&dt.inputs[0]), 3 * W);
        free(bytes);
        st = tern_rt_create(&dt, "trn1.2xlarge", NULL, &rt, &err);
        CHECK_MSG(st == TERN_OK, "%s", err.msg);
        char cells[3 * W];
        memset(cells, 0, sizeof cells);
        memcpy(cells, "2.5", 3);
        memcpy(cells + W, "-1e3", 4);
        memcpy(cells + 2 * W, " inf ", 5);
        CHECK(tern_rt_set_input(rt, "s", cells, 3, &err) != TERN_OK);
        CHECK_STR_CONTAINS(err.msg, "input 's' takes 192 bytes");
        CHECK_EQ_INT(tern_rt_set_input(rt, "s", cells, sizeof cells, &err), TERN_OK);
        CHECK_EQ_INT(tern_rt_execute(rt, NULL, &err), TERN_OK);
        float yt[3] = {0, 0, 0};
        CHECK_EQ_INT(tern_rt_get_output(rt, "y", yt, sizeof yt, &err), TERN_OK);
        CHECK(yt[0] == 2.5f && yt[1] == -1000.0f && isinf(yt[2]) && yt[2] > 0);
        tern_rt_free(rt);
        /* text cells only in uint8 */
        dt.outputs[0].text_bytes = 8;
        CHECK(tern_exe_encode(&dt, &bytes, &n, &err) != TERN_OK);
        CHECK_STR_CONTAINS(err.msg, "'y': text cells of 8 bytes in dtype fp32 (must be 1..255 bytes, uint8)");
        tern_exe_free(&dt);
        tern_exe_free(&xt);
        tern_kernel_free(kt);
    }

    TEST_BEGIN("corrupt and truncated executables are refused with the offset");
    {
        uint8_t *bytes = NULL;
        size_t n = 0;
        CHECK_EQ_INT(tern_exe_encode(&x1, &bytes, &n, &err), TERN_OK);
        tern_exe bad_x;
        int all = 1;
        for (size_t cut = 0; cut < n; cut += (n / 97) + 1) {
            tern_status s = tern_exe_decode(bytes, cut, &bad_x, &err);
            if (s == TERN_OK || !strstr(err.msg, "executable decode: offset")) {
                all = 0;
                break;
            }
        }
        CHECK_MSG(all, "a truncated executable decoded or gave no offset: %s", err.msg);
        bytes[200] ^= 0x10;
        CHECK(tern_exe_decode(bytes, n, &bad_x, &err) != TERN_OK);
        CHECK_STR_CONTAINS(err.msg, "checksum mismatch");
        memcpy(bytes, "TERNPRG1", 8);
        CHECK(tern_exe_decode(bytes, n, &bad_x, &err) != TERN_OK);
        CHECK_STR_CONTAINS(err.msg, "not a tern executable");
        free(bytes);
        CHECK(tern_exe_load("/nonexistent.tern", &bad_x, &err) != TERN_OK);
        CHECK_STR_CONTAINS(err.msg, "loading /nonexistent.tern: cannot open");
    }
    remove(path);
    tern_exe_free(&loaded);
    tern_exe_free(&x1);
    tern_kernel_free(k1);
    free(w);
    free(b);
    free(x);
    free(xT);
    free(ref);
    free(y);
    free(y2);
    return check_report();
}
