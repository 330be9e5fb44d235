/* Example: write a kernel with tern's C kernel API, run it on a simulated NeuronCore-v2, and read the results.
 * It computes Y = softmax(A^T B) row by row for A[K,M], B[K,N]: one matmul into PSUM, then a numerically safe
 * softmax on VectorE/ScalarE, using explicit instructions (no library kernel) so every step is visible.
 * Build: `make` (built as build/examples/softmax_matmul). Run: build/examples/softmax_matmul [--save FILE] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tern/kernel.h"

int main(int argc, char **argv)
{
    const unsigned K = 128, M = 64, N = 256;
    tern_error err;
    tern_core_config cfg;
    if (tern_core_config_load("neuroncore-v2", &cfg, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }

    /* 1. Build: HBM tensors, tiles, instructions. Synchronisation is inserted by the builder. */
    tern_kernel *k = NULL;
    tern_kernel_create(&cfg, "softmax_matmul", &k, &err);
    tern_view a = tern_kernel_input2d(k, "a", TERN_DTYPE_BF16, K, M);
    tern_view b = tern_kernel_input2d(k, "b", TERN_DTYPE_BF16, K, N);
    tern_view y = tern_kernel_output2d(k, "y", TERN_DTYPE_FP32, M, N);
    tern_view at = tern_kernel_sbuf(k, TERN_DTYPE_BF16, K, M, "a_tile");
    tern_view bt = tern_kernel_sbuf(k, TERN_DTYPE_BF16, K, N, "b_tile");
    tern_kernel_load(k, at, a);
    tern_kernel_load(k, bt, b);
    tern_view ps = tern_kernel_psum(k, TERN_DTYPE_FP32, M, N, "scores");
    tern_kernel_matmul(k, ps, at, bt, 0); /* ps[M,N] = a^T b */
    tern_view mx = tern_kernel_sbuf(k, TERN_DTYPE_FP32, M, 1, "neg_max");
    tern_kernel_tensor_reduce(k, mx, ps, TERN_ALU_MAX, 1, 1); /* -max per row */
    tern_view e = tern_kernel_sbuf(k, TERN_DTYPE_FP32, M, N, "exp");
    tern_view sum = tern_kernel_sbuf(k, TERN_DTYPE_FP32, M, 1, "sum");
    tern_kernel_activation(k, e, ps, TERN_ACT_EXP, 1.0f, mx, tern_view_none(), sum); /* exp(x - max), row sums */
    tern_view rs = tern_kernel_sbuf(k, TERN_DTYPE_FP32, M, 1, "rsum");
    tern_kernel_reciprocal(k, rs, sum);
    tern_kernel_tensor_scalar_ap(k, TERN_ENGINE_VECTOR, e, e, TERN_ALU_MULT, rs, 0.0f, TERN_ALU_BYPASS, tern_view_none(),
                                 0.0f, 0);
    tern_kernel_store(k, y, e);
    if (tern_kernel_status(k, &err)) {
        fprintf(stderr, "build failed: %s\n", err.msg);
        return 1;
    }
    if (argc > 2 && !strcmp(argv[1], "--save") && tern_kernel_save(k, argv[2], &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }

    /* 2. Run: bind inputs, execute, read outputs and the predicted device time. */
    float *ha = malloc(sizeof(float) * K * M), *hb = malloc(sizeof(float) * K * N), *hy = malloc(sizeof(float) * M * N);
    for (unsigned i = 0; i < K * M; i++)
        ha[i] = (float)((i * 37u) % 17) / 17.0f - 0.5f;
    for (unsigned i = 0; i < K * N; i++)
        hb[i] = (float)((i * 11u) % 23) / 23.0f - 0.5f;
    tern_core *core = NULL;
    tern_core_create(&cfg, NULL, &core, &err);
    tern_run_stats st;
    if (tern_kernel_write_f32(k, core, "a", ha, K * M, &err) || tern_kernel_write_f32(k, core, "b", hb, K * N, &err) ||
        tern_kernel_run(k, core, &st, &err) || tern_kernel_read_f32(k, core, "y", hy, M * N, &err)) {
        fprintf(stderr, "run failed: %s\n", err.msg);
        return 1;
    }

    /* 3. Check against a float64 softmax of the bf16-rounded inputs. */
    double worst = 0;
    for (unsigned m = 0; m < M; m++) {
        double row[256], mxv = -1e300, s = 0;
        for (unsigned n = 0; n < N; n++) {
            double acc = 0;
            for (unsigned kk = 0; kk < K; kk++)
                acc += (double)tern_num_round_f32(TERN_DTYPE_BF16, ha[kk * M + m], NULL, 0) *
                       tern_num_round_f32(TERN_DTYPE_BF16, hb[kk * N + n], NULL, 0);
            row[n] = acc;
            mxv = acc > mxv ? acc : mxv;
        }
        for (unsigned n = 0; n < N; n++)
            s += exp(row[n] - mxv);
        for (unsigned n = 0; n < N; n++) {
            double d = fabs(hy[m * N + n] - exp(row[n] - mxv) / s);
            worst = d > worst ? d : worst;
        }
    }
    printf("softmax(A^T B): %u x %u, %zu instructions, predicted %.2f us on %s, max abs error %.2e\n", M, N,
           tern_program_instr_count(tern_kernel_program(k)), (double)st.time_ps * 1e-6, cfg.name, worst);
    int ok = worst < 1e-5;
    free(ha);
    free(hb);
    free(hy);
    tern_core_free(core);
    tern_kernel_free(k);
    return ok ? 0 : 1;
}
