/* tern.AttentionGrad, the fused flash-attention backward (src/compiler/lower_attention_bwd.c; host reference in
 * src/graph/ops_attention.c), against PyTorch's autograd of softmax(scale Q K^T [+ M] [+ causal mask]) V in float64
 * (scripts/gen_attention_grad_tests.py): the host reference, the device in fp32 on trn1 (transposes through an
 * identity matmul) and trn2 (transpose_pe), and the device in bf16, for plain, causal, grouped-query and ragged
 * (not a multiple of 128) shapes, with the forward's logsumexp given or left out (recomputed by the kernel), and
 * with a mask M (additive: a [B, 1, 1, Sk] padding mask, a [Sq, Sk] 0 / -inf local window, a float bias; Where:
 * a padding condition with one sequence masked whole, a window); the
 * device against the host reference; a head size beyond the PE edge refused;
 * and the predicted time of the fused kernel against the same backward as separate ONNX ops, both printed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tern/compiler.h"
#include "tern/graph.h"
#include "tern/npy.h"
#include "tern/runtime.h"

static char dir[] = "/tmp/tern_attgrad_XXXXXX";
static const char *const in_names[7] = {"Q", "K", "V", "O", "dO", "LSE", "M"};
static const char *const out_names[3] = {"dQ", "dK", "dV"};

typedef struct {
    int n_in;    /* the model's inputs: 5 to 7 (LSE left out: the kernel recomputes it; M, the additive mask) */
    int idx[7];  /* model input j is in_names[idx[j]] */
    tern_npy in[7], ref[3];
    float *host[3], *dev[3];
    uint64_t n[3];
} case_data;

static int read_npy(const char *name, const char *what, tern_npy *a)
{
    char path[512];
    tern_error err;
    snprintf(path, sizeof path, "%s/%s.%s.npy", dir, name, what);
    memset(a, 0, sizeof *a);
    if (tern_npy_read(path, a, &err)) {
        CHECK_MSG(0, "%s: %s", path, err.msg);
        return 0;
    }
    return 1;
}

/* The host reference: the ONNX model run by the graph evaluator. */
static int run_host(const char *name, case_data *cd)
{
    char path[512];
    tern_error err;
    snprintf(path, sizeof path, "%s/%s.onnx", dir, name);
    tern_graph *g = NULL;
    if (tern_graph_load_onnx(path, &g, &err)) {
        CHECK_MSG(0, "%s: %s", path, err.msg);
        return 0;
    }
    tern_host_tensor *ins[7] = {0}, *outs[3] = {0};
    int ok = tern_graph_input_count(g) == cd->n_in;
    CHECK_MSG(ok, "%s: %d inputs, expected %d", name, tern_graph_input_count(g), cd->n_in);
    for (int i = 0; ok && i < cd->n_in; i++) {
        const tern_npy *a = &cd->in[cd->idx[i]];
        if (tern_host_tensor_new(TERN_ELEM_FLOAT, a->rank, a->dims, &ins[i], &err)) {
            CHECK_MSG(0, "%s", err.msg);
            ok = 0;
            break;
        }
        memcpy(ins[i]->f, a->data, ins[i]->count * sizeof(float));
    }
    if (ok && tern_graph_run(g, (const tern_host_tensor *const *)ins, outs, &err)) {
        CHECK_MSG(0, "%s: host run: %s", name, err.msg);
        ok = 0;
    }
    for (int k = 0; ok && k < 3; k++) {
        cd->host[k] = malloc(sizeof(float) * cd->n[k]);
        ok = cd->host[k] && outs[k] && outs[k]->count == cd->n[k];
        CHECK_MSG(ok, "%s: host output %s missing or of the wrong size", name, out_names[k]);
        if (ok)
            memcpy(cd->host[k], outs[k]->f, sizeof(float) * cd->n[k]);
    }
    for (int i = 0; i < 7; i++)
        tern_host_tensor_free(ins[i]);
    for (int k = 0; k < 3; k++)
        tern_host_tensor_free(outs[k]);
    tern_graph_free(g);
    return ok;
}

/* Compile `model` for machine with the matmul dtype and run it (values, or timing only when cd is NULL);
 * returns the predicted seconds, negative on failure. */
static double run_device(const char *model, const char *machine, tern_dtype mdt, case_data *cd)
{
    char path[512];
    tern_error err;
    tern_compile_opts o;
    tern_compile_opts_default(&o);
    o.matmul_dtype = mdt;
    o.machine = machine;
    tern_exe exe;
    snprintf(path, sizeof path, "%s/%s.onnx", dir, model);
    if (tern_compile_onnx(path, &o, &exe, NULL, &err)) {
        CHECK_MSG(0, "%s on %s: compile failed: %s", model, machine, err.msg);
        return -1;
    }
    tern_rt_options ro;
    memset(&ro, 0, sizeof ro);
    ro.mode = cd ? TERN_MODE_FUNCTIONAL : TERN_MODE_TIMING_ONLY;
    tern_rt *rt = NULL;
    tern_run_stats st;
    double t = -1;
    if (tern_rt_create(&exe, machine, &ro, &rt, &err)) {
        CHECK_MSG(0, "%s: %s", model, err.msg);
        goto done;
    }
    for (int j = 0; cd && j < cd->n_in; j++) {
        const int i = cd->idx[j];
        if (tern_rt_set_input(rt, in_names[i], cd->in[i].data, tern_npy_count(&cd->in[i]) * sizeof(float), &err)) {
            CHECK_MSG(0, "%s: input %s: %s", model, in_names[i], err.msg);
            goto done;
        }
    }
    if (tern_rt_execute(rt, &st, &err)) {
        CHECK_MSG(0, "%s on %s: run failed: %s", model, machine, err.msg);
        goto done;
    }
    for (int k = 0; cd && k < 3; k++) {
        free(cd->dev[k]);
        cd->dev[k] = malloc(sizeof(float) * cd->n[k]);
        if (!cd->dev[k] || tern_rt_get_output(rt, out_names[k], cd->dev[k], sizeof(float) * cd->n[k], &err)) {
            CHECK_MSG(0, "%s: output %s: %s", model, out_names[k], cd->dev[k] ? err.msg : "no memory");
            goto done;
        }
    }
    t = (double)st.time_ps * 1e-12;
done:
    tern_rt_free(rt);
    tern_exe_free(&exe);
    return t;
}

/* max |got - want| over the three gradients, relative to max |want| of each (the worst of the three). */
static double rel_err(const case_data *cd, float *const *got, int vs_host)
{
    double worst = 0;
    for (int k = 0; k < 3; k++) {
        double e = 0, m = 0;
        for (uint64_t i = 0; i < cd->n[k]; i++) {
            double w = vs_host ? (double)cd->host[k][i] : tern_npy_get(&cd->ref[k], i), d = fabs((double)got[k][i] - w);
            if (!(d <= e))
                e = isnan(d) ? INFINITY : d;
            if (fabs(w) > m)
                m = fabs(w);
        }
        double r = e / (m > 0 ? m : 1);
        if (!(r <= worst))
            worst = isnan(r) ? INFINITY : r;
    }
    return worst;
}

static void free_case(case_data *cd)
{
    for (int i = 0; i < 7; i++)
        tern_npy_free(&cd->in[i]);
    for (int k = 0; k < 3; k++) {
        tern_npy_free(&cd->ref[k]);
        free(cd->host[k]);
        free(cd->dev[k]);
    }
}

static void run_case(const char *name, int has_lse, int has_mask)
{
    case_data cd;
    memset(&cd, 0, sizeof cd);
    for (int i = 0; i < 7; i++)
        if (i < 5 || (i == 5 && has_lse) || (i == 6 && has_mask))
            cd.idx[cd.n_in++] = i;
    int ok = 1;
    for (int j = 0; j < cd.n_in; j++)
        ok &= read_npy(name, in_names[cd.idx[j]], &cd.in[cd.idx[j]]);
    for (int k = 0; k < 3; k++) {
        char what[16];
        snprintf(what, sizeof what, "ref_%s", out_names[k]);
        ok &= read_npy(name, what, &cd.ref[k]);
        cd.n[k] = tern_npy_count(&cd.ref[k]);
    }
    if (!ok || !run_host(name, &cd)) {
        free_case(&cd);
        return;
    }
    /* Host: float64 arithmetic on the same float32 operands as PyTorch's, rounded once to float32; PyTorch's
     * O and LSE reach it as float32 (2^-24 relative), so the gradients agree to a few 1e-7 of their scale. */
    double eh = rel_err(&cd, cd.host, 0);
    CHECK_MSG(eh <= 1e-5, "%s: host reference vs torch: max rel error %.3g (bound 1e-5)", name, eh);
    /* Device fp32: fp32 products accumulated in fp32 PSUM over at most 128 terms per matmul and Sk/128 SBUF
     * additions, ScalarE's exp in fp32: each gradient within ~K * 2^-24 of its scale; 2e-5 bounds it. */
    static const char *const mach[2] = {"trn1", "trn2"};
    double ed[2] = {0, 0};
    for (int m = 0; m < 2; m++) {
        if (run_device(name, mach[m], TERN_DTYPE_FP32, &cd) < 0)
            break;
        ed[m] = rel_err(&cd, cd.dev, 0);
        double edh = rel_err(&cd, cd.dev, 1);
        CHECK_MSG(ed[m] <= 2e-5, "%s on %s fp32: device vs torch: max rel error %.3g (bound 2e-5)", name, mach[m],
                  ed[m]);
        CHECK_MSG(edh <= 2e-5, "%s on %s fp32: device vs host reference: max rel error %.3g (bound 2e-5)", name,
                  mach[m], edh);
    }
    /* Device bf16: Q, K, V, dO and the on-chip P and dS rounded to bf16 (2^-9 relative each) before fp32
     * accumulation. A gradient is a sum of n ~ Sk (or Sq) terms whose roundings are independent, so its error is
     * ~2^-8 sqrt(n) rms(term) against a scale ~sqrt(n) rms(term): ~0.4 % of max |ref|, and dS = P (dP - delta)
     * compounds three roundings (P, dP - delta, the product; observed up to 1.4 %); 3 % of max |ref| bounds it.
     * It must also be visibly above fp32's, or the matmuls did not run in bf16. */
    double eb = -1;
    if (run_device(name, "trn2", TERN_DTYPE_BF16, &cd) >= 0) {
        eb = rel_err(&cd, cd.dev, 0);
        CHECK_MSG(eb <= 3e-2, "%s bf16: device vs torch: max rel error %.3g (bound 3e-2)", name, eb);
        CHECK_MSG(eb > 10 * ed[1], "%s bf16: error %.3g not above fp32's %.3g: matmul dtype ignored?", name, eb,
                  ed[1]);
    }
    printf("%-14s max rel error vs torch: host %.2e, trn1 fp32 %.2e, trn2 fp32 %.2e, trn2 bf16 %.2e\n", name, eh,
           ed[0], ed[1], eb);
    free_case(&cd);
}

int main(void)
{
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 scripts/gen_attention_grad_tests.py %s >/dev/null", dir);
    TEST_BEGIN("reference generation");
    int ok = system(cmd) == 0;
    CHECK_MSG(ok, "%s failed", cmd);
    if (ok) {
        char path[512], line[128];
        snprintf(path, sizeof path, "%s/cases.txt", dir);
        FILE *f = fopen(path, "r");
        CHECK_MSG(f != NULL, "cannot open %s", path);
        int cases = 0, nolse = 0, masked = 0;
        while (f && fgets(line, sizeof line, f)) {
            char name[64];
            int rep, causal, lse, mask;
            if (sscanf(line, "%63s %d %d %d %d", name, &rep, &causal, &lse, &mask) != 5)
                continue;
            TEST_BEGIN(name);
            run_case(name, lse, mask != 0);
            cases++;
            nolse += !lse;
            masked += mask != 0;
        }
        if (f)
            fclose(f);
        CHECK_MSG(cases == 14 && nolse == 6 && masked == 6,
                  "%d cases in cases.txt, %d without LSE, %d masked (expected 14, 6 and 6)", cases, nolse, masked);

        TEST_BEGIN("fused vs unfused time");
        /* 4 heads, 512 x 512, head size 128, bf16 on trn1: the fused kernel keeps P, dP and dS on chip where the
         * unfused graph writes each [4, 512, 512] product to HBM and transposes P and dS through it */
        double tf = run_device("timing", "trn1", TERN_DTYPE_BF16, NULL);
        double tu = run_device("unfused_timing", "trn1", TERN_DTYPE_BF16, NULL);
        printf("attention backward, 4 heads x 512 x 512 x 128, trn1 bf16: fused %.3f ms, unfused %.3f ms (%.1fx)\n",
               tf * 1e3, tu * 1e3, tf > 0 ? tu / tf : 0.0);
        CHECK_MSG(tf > 0 && tu > 0 && tf < tu, "fused %.3g s is not faster than unfused %.3g s", tf, tu);

        TEST_BEGIN("head size beyond the PE edge");
        tern_exe exe;
        tern_error err;
        snprintf(path, sizeof path, "%s/too_wide.onnx", dir);
        tern_status s = tern_compile_onnx(path, NULL, &exe, NULL, &err);
        CHECK_MSG(s == TERN_ERR_UNSUPPORTED, "status %d (%s), expected unsupported", (int)s, s ? err.msg : "ok");
        if (s)
            CHECK_STR_CONTAINS(err.msg, "head sizes 160 / 160 (at most the 128-row PE edge)");
        else
            tern_exe_free(&exe);
    }
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return check_report();
}
