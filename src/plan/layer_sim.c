/* Timing of the planner's per-rank graphs by simulation: the graph's ONNX bytes (layer_graph.c) are imported,
 * compiled by tern_compile for the target machine (BF16 matmuls with FP32 accumulation, or FP32), loaded and run
 * once in timing-only mode on the machine's simulated NeuronCore; the predicted device time is the graph's time.
 * Nothing is formula here: every instruction the compiler emits is issued and timed by the core model. */
#include <stdlib.h>
#include <string.h>

#include "plan/plan_internal.h"
#include "tern/compiler.h"
#include "tern/graph.h"
#include "tern/runtime.h"

tern_status plan_simulate(const tern_model_cfg *c, const plan_shape *s, const char *machine, double *seconds,
                          uint64_t *hbm_bytes, tern_error *err)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    tern_status st = plan_build_graph(c, s, &buf, &len, err);
    if (st)
        return st;
    st = plan_simulate_onnx(buf, len, s, machine, seconds, hbm_bytes, err);
    free(buf);
    return st;
}

tern_status plan_simulate_onnx(const uint8_t *buf, size_t len, const plan_shape *s, const char *machine,
                               double *seconds, uint64_t *hbm_bytes, tern_error *err)
{
    tern_graph *g = NULL;
    tern_status st = tern_graph_load_onnx_buffer(buf, len, &g, err);
    if (st)
        return tern_error_prefix(err, "plan: generated layer graph (tp=%d, %lld tokens): ", s->tp,
                                 (long long)(s->mb * s->seq));
    tern_compile_opts o;
    tern_compile_opts_default(&o);
    o.machine = machine;
    o.matmul_dtype = s->fp32 ? TERN_DTYPE_FP32 : TERN_DTYPE_BF16;
    tern_exe x;
    tern_exe_init(&x);
    tern_compile_report rep;
    st = tern_compile(g, &o, &x, &rep, err);
    tern_graph_free(g);
    if (hbm_bytes)
        *hbm_bytes = rep.hbm_bytes;
    if (st) {
        tern_exe_free(&x);
        return tern_error_prefix(err, "plan: compiling the generated graph (kind %d, tp=%d, %lld tokens): ",
                                 (int)s->kind, s->tp, (long long)(s->mb * s->seq));
    }
    tern_rt_options ro = {0};
    ro.mode = TERN_MODE_TIMING_ONLY;
    tern_rt *rt = NULL;
    st = tern_rt_create(&x, machine, &ro, &rt, err);
    tern_exe_free(&x);
    if (st)
        return st;
    tern_run_stats stats;
    memset(&stats, 0, sizeof stats);
    st = tern_rt_execute(rt, &stats, err);
    tern_rt_free(rt);
    if (st)
        return st;
    *seconds = (double)stats.time_ps * 1e-12;
    return TERN_OK;
}

tern_status plan_layer_times(const tern_model_cfg *c, int tp, int64_t mb, int64_t seq, int fp32, const char *machine,
                            plan_times *t, tern_error *err)
{
    plan_compose k;
    plan_composition(c, tp, mb, seq, &k);
    memset(t, 0, sizeof *t);
    t->comp = k;
    struct {
        plan_graph_kind kind;
        int64_t mb, seq;
        double *out;
    } g[6] = {
        {PLAN_G_ROWS_FWD, 1, k.rows, &t->rows_f}, {PLAN_G_ROWS_BWD, 1, k.rows, &t->rows_b},
        {PLAN_G_ATTN_FWD, k.B, k.blk, &t->attn_f}, {PLAN_G_ATTN_BWD, k.B, k.blk, &t->attn_b},
        {PLAN_G_HEAD_FWD, 1, k.rows, &t->head_f},  {PLAN_G_HEAD_BWD, 1, k.rows, &t->head_b},
    };
    for (int i = 0; i < 6; i++) {
        plan_shape s = {.kind = g[i].kind, .tp = tp, .mb = g[i].mb, .seq = g[i].seq, .fp32 = fp32};
        uint64_t ws = 0;
        tern_status st = plan_simulate(c, &s, machine, g[i].out, &ws, err);
        if (st)
            return st;
        if (ws > t->workspace)
            t->workspace = ws;
    }
    /* the composition: a layer = its row chunks + its attention block pairs (per sequence of the micro-batch:
     * the block graph holds the micro-batch's B = mb x heads already) */
    double ch = (double)k.chunks, pr = (double)k.pairs;
    t->layer_f = ch * t->rows_f + pr * t->attn_f;
    t->layer_b = ch * t->rows_b + pr * t->attn_b;
    t->head_fwd = ch * t->head_f;
    t->head_bwd = ch * t->head_b;
    return TERN_OK;
}

tern_status tern_plan_layer_time(const tern_model_cfg *c, int tp, int64_t microbatch, int64_t seq, int fp32,
                                 const char *machine, double *fwd_s, double *bwd_s, tern_error *err)
{
    plan_times t;
    tern_status st = plan_layer_times(c, tp, microbatch, seq, fp32, machine, &t, err);
    if (st)
        return st;
    *fwd_s = t.layer_f;
    *bwd_s = t.layer_b;
    return TERN_OK;
}

tern_status tern_plan_model_forward_time(const tern_model_cfg *c, int64_t microbatch, int64_t seq, int fp32,
                                         const char *machine, double *whole_s, double *layer_s, double *head_s,
                                         tern_error *err)
{
    plan_shape s = {.kind = PLAN_G_MODEL_FWD, .tp = 1, .mb = microbatch, .seq = seq, .fp32 = fp32,
                    .layers = (int)c->layers};
    tern_status st = plan_simulate(c, &s, machine, whole_s, NULL, err);
    if (st)
        return st;
    plan_times t;
    st = plan_layer_times(c, 1, microbatch, seq, fp32, machine, &t, err);
    if (st)
        return st;
    *layer_s = t.layer_f;
    *head_s = t.head_fwd;
    return TERN_OK;
}
