/* Calibration against the published NKI tutorial kernels of calibration.md C6 (issue 11): the matmul tutorial's
 * "original tiled" kernel, LayerNorm v1 and fused Mamba v1, rebuilt in bench/tutorial_kernels.h, each predicted
 * timing-only on one trn1 NeuronCore at the published shape within 10 % of the published latency. None of these
 * figures was used to fit a machine-file constant, so each is a validation of the DMA and engine models. Also:
 * the scaled-down kernels give the same time in functional and timing-only mode. */
#include <math.h>

#include "../../bench/tutorial_kernels.h"
#include "kernel_test_util.h"

typedef enum { MM, LN, MAMBA } which;

static void build(tern_kernel *k, which w, int small)
{
    if (w == MM)
        small ? tut_matmul_tiled(k, 256, 1024, 512) : tut_matmul_tiled(k, 4096, 8192, 8192);
    else if (w == LN)
        small ? tut_layernorm_v1(k, 200, 1024) : tut_layernorm_v1(k, 4096, 8192);
    else
        small ? tut_mamba_v1(k, 256, 128, 2) : tut_mamba_v1(k, 256, 512, 16);
}

static int64_t predict(const tern_core_config *cfg, which w, int small, tern_sim_mode mode)
{
    tern_error err;
    tern_kernel *k = NULL;
    tern_core *core = NULL;
    tern_core_options o = {0};
    o.mode = mode;
    tern_run_stats st;
    st.time_ps = -1;
    CHECK_EQ_INT(tern_kernel_create(cfg, "tutorial", &k, &err), TERN_OK);
    build(k, w, small);
    CHECK_EQ_INT(tern_kernel_status(k, &err), TERN_OK);
    CHECK_EQ_INT(tern_core_create(cfg, &o, &core, &err), TERN_OK);
    CHECK_EQ_INT(tern_kernel_run(k, core, &st, &err), TERN_OK);
    tern_core_free(core);
    tern_kernel_free(k);
    return st.time_ps;
}

int main(void)
{
    tern_core_config cfg;
    tern_error err;
    CHECK_EQ_INT(tern_core_config_load("trn1.2xlarge", &cfg, &err), TERN_OK);
    const struct {
        which w;
        const char *what;
        double published_us;
    } cases[3] = {{MM, "matmul original tiled [4096,8192]@[8192,8192] BF16: 51.80 ms", 51800},
                  {LN, "LayerNorm v1 4096 x 8192 fp32: 2,311 us", 2311},
                  {MAMBA, "fused Mamba v1 seq 512, 256 channels, state 16: 172.93 us", 172.93}};
    for (int i = 0; i < 3; i++) {
        TEST_BEGIN(cases[i].what);
        double us = (double)predict(&cfg, cases[i].w, 0, TERN_MODE_TIMING_ONLY) * 1e-6;
        CHECK_MSG(fabs(us / cases[i].published_us - 1) <= 0.10, "predicted %.2f us, published %.2f us (%+.1f%%)", us,
                  cases[i].published_us, (us / cases[i].published_us - 1) * 100);
    }
    for (int i = 0; i < 3; i++) {
        TEST_BEGIN("scaled-down tutorial kernel: functional and timing-only predict the same time");
        int64_t f = predict(&cfg, cases[i].w, 1, TERN_MODE_FUNCTIONAL);
        int64_t t = predict(&cfg, cases[i].w, 1, TERN_MODE_TIMING_ONLY);
        CHECK_EQ_INT(f, t);
        CHECK(t > 0);
    }
    return check_report();
}
