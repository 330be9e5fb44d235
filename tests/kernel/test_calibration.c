/* Calibration against published measurements (docs/calibration.md): the NKI tutorial's fully optimised GEMM on
 * one trn1 NeuronCore is predicted within +-10% of the published 6.97 ms; timing-only and functional modes agree
 * to the picosecond on a scaled-down run of the same kernel. */
#include "kernel_test_util.h"
#include "tern/kernel_lib.h"

static tern_kernel *gemm(const tern_core_config *cfg, uint64_t M, uint64_t N, uint64_t K)
{
    tern_error err;
    tern_kernel *k = NULL;
    tern_kernel_create(cfg, "gemm", &k, &err);
    tern_view lhsT = tern_kernel_input2d(k, "lhsT", TERN_DTYPE_BF16, K, M);
    tern_view rhs = tern_kernel_input2d(k, "rhs", TERN_DTYPE_BF16, K, N);
    tern_view out = tern_kernel_output2d(k, "out", TERN_DTYPE_BF16, M, N);
    tern_lib_gemm(k, out, lhsT, rhs, NULL);
    return k;
}

int main(void)
{
    tern_core_config cfg;
    tern_error err;
    tern_core_config_load("trn1.2xlarge", &cfg, &err);

    TEST_BEGIN("tutorial GEMM [4096,8192]@[8192,8192] BF16 on trn1: within 10% of 6.97 ms");
    {
        tern_kernel *k = gemm(&cfg, 4096, 8192, 8192);
        CHECK_EQ_INT(tern_kernel_status(k, &err), TERN_OK);
        tern_core_options o = {0};
        o.mode = TERN_MODE_TIMING_ONLY;
        tern_core *core = NULL;
        tern_core_create(&cfg, &o, &core, &err);
        tern_run_stats st;
        CHECK_EQ_INT(tern_kernel_run(k, core, &st, &err), TERN_OK);
        double ms = (double)st.time_ps * 1e-9;
        CHECK_MSG(fabs(ms - 6.97) / 6.97 <= 0.10, "predicted %.3f ms, published 6.97 ms", ms);
        double hfu = 2.0 * (double)st.macs / (2.0 * 128 * 128 * 2.8e9 * ms * 1e-3);
        CHECK_MSG(hfu > 0.75 && hfu < 0.95, "HFU %.1f%%, published 85.24%%", hfu * 100);
        CHECK_EQ_INT(st.macs, 4096ull * 8192 * 8192);
        tern_core_free(core);
        tern_kernel_free(k);
    }

    TEST_BEGIN("timing-only and functional predict the same time for the same program");
    {
        tern_kernel *k = gemm(&cfg, 512, 1024, 1024);
        int64_t t[2];
        for (int mode = 0; mode < 2; mode++) {
            tern_core_options o = {0};
            o.mode = mode ? TERN_MODE_TIMING_ONLY : TERN_MODE_FUNCTIONAL;
            tern_core *core = NULL;
            tern_core_create(&cfg, &o, &core, &err);
            tern_run_stats st;
            CHECK_EQ_INT(tern_kernel_run(k, core, &st, &err), TERN_OK);
            t[mode] = st.time_ps;
            tern_core_free(core);
        }
        CHECK_EQ_INT(t[0], t[1]);
        CHECK(t[0] > 0);
        tern_kernel_free(k);
    }

    TEST_BEGIN("predictions are deterministic");
    {
        tern_kernel *k = gemm(&cfg, 1024, 2048, 1024);
        int64_t t[2];
        for (int r = 0; r < 2; r++) {
            tern_core_options o = {0};
            o.mode = TERN_MODE_TIMING_ONLY;
            tern_core *core = NULL;
            tern_core_create(&cfg, &o, &core, &err);
            tern_run_stats st;
            tern_kernel_run(k, core, &st, &err);
            t[r] = st.time_ps;
            tern_core_free(core);
        }
        CHECK_EQ_INT(t[0], t[1]);
        tern_kernel_free(k);
    }
    return check_report();
}
