/* `tern plan`: which parallel layout to use for a training job, how long a step takes, what it costs, and how
 * that compares with GPU instances. The model is a Hugging Face config.json, or a transformer exported to ONNX
 * (its configuration recovered from the graph, src/plan/onnx_config.c); the cluster an instance, a system
 * or NxINSTANCE. Prints every assumption with the table; --json writes the plans best first. docs/planner.md. */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/commands.h"
#include "plan/plan_internal.h"
#include "tern/plan.h"

#define CMD "tern plan"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: tern plan --model CONFIG.json|MODEL.onnx --cluster SPEC --seq N --global-batch N [--precision bf16|fp32]\n"
            "                 [--tp-reduce fp32|bf16] [--ring-channels N]\n"
            "                 [--layout tp=A,pp=B,vpp=V,dp=C,mb=D,zero=0|1,recompute=none|full|selective] [--top N]\n"
            "                 [--price-file F] [--svg FILE] [--config-out FILE] [--dump-graphs DIR]\n"
            "                 [--tokens T | --steps N] [--gpu-mfu F] [--json] [--quiet]\n"
            "  --model     a Hugging Face config.json (llama, gpt2, bert, mixtral); data/models/ has examples;\n"
            "              or a transformer exported to ONNX (.onnx: a Llama-, GPT-2- or BERT-style model): its\n"
            "              layers, heads, key/value heads, widths, vocabulary and positions are recovered from the\n"
            "              graph (printed, and in the JSON as recovered_config) and planned as that config.json\n"
            "  --config-out FILE  write the config.json recovered from an ONNX model\n"
            "  --cluster   an instance or system (trn1.32xlarge, trn2.48xlarge, trn2-ultraserver) or NxINSTANCE\n"
            "              (32xtrn1.32xlarge); --machine is the same\n"
            "  --layout    fix some knobs; the others are searched (tp, pp, vpp = virtual stages per pipeline rank,\n"
            "              dp, mb = micro-batch, zero, recompute = none|full|selective or 0|1|2, ep = expert parallelism)\n"
            "  --tp-reduce the dtype of the TP reduce-scatters under bf16 (default fp32, NxD's reduce_dtype; bf16\n"
            "              for a job run with XLA_DOWNCAST_BF16=1)\n"
            "  --ring-channels N  cap the ring collectives' channels (default: all the topology gives; 1: one ring)\n"
            "  --top       plans to print (default 5; the JSON holds them too)\n"
            "  --tokens    job size in tokens (1e12) for the job's cost and hours; --steps N likewise\n"
            "  --gpu-mfu   the MFU assumed for the GPU comparison (default 0.40)\n"
            "  --svg       write the best plan's pipeline schedule for one step as an SVG timeline\n"
            "  --dump-graphs DIR  write each distinct per-rank graph the planner simulates as ONNX, named\n"
            "              KIND_tpT_mbB_seqS.onnx (KIND rows_fwd|rows_bwd|attn_fwd|attn_bwd|head_fwd|head_bwd; _epE\n"
            "              for expert parallelism); replay one with `tern run F --timing-only --profile`\n"
            "Step times come from simulating each distinct per-rank layer on the machine's core (timing-only), the\n"
            "collectives on the cluster's fabric, and the (interleaved) 1F1B schedule; docs/planner.md.\n");
}

static int parse_layout(const char *s, tern_plan_layout *L)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", s);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        char *eq = strchr(tok, '=');
        if (!eq)
            return 0;
        *eq = 0;
        if (!strcmp(tok, "recompute") && (!strcmp(eq + 1, "none") || !strcmp(eq + 1, "full") ||
                                          !strcmp(eq + 1, "selective"))) {
            L->recompute = !strcmp(eq + 1, "none") ? TERN_RECOMPUTE_NONE
                           : !strcmp(eq + 1, "full") ? TERN_RECOMPUTE_FULL
                                                     : TERN_RECOMPUTE_SELECTIVE;
            continue;
        }
        char *end;
        long v = strtol(eq + 1, &end, 10);
        if (*end || v < 0 || v > 1000000)
            return 0;
        if (!strcmp(tok, "tp"))
            L->tp = (int)v;
        else if (!strcmp(tok, "pp"))
            L->pp = (int)v;
        else if (!strcmp(tok, "dp"))
            L->dp = (int)v;
        else if (!strcmp(tok, "mb") || !strcmp(tok, "microbatch"))
            L->microbatch = (int)v;
        else if (!strcmp(tok, "zero") && v <= 1)
            L->zero = (int)v;
        else if (!strcmp(tok, "recompute") && v <= 2)
            L->recompute = (int)v;
        else if (!strcmp(tok, "vpp") && v >= 1)
            L->vpp = (int)v;
        else if (!strcmp(tok, "ep") && v >= 1)
            L->ep = (int)v;
        else
            return 0;
    }
    return 1;
}

static void progress(void *ctx, const char *what)
{
    if (!*(int *)ctx)
        fprintf(stderr, "%s: %s\n", CMD, what);
}

static double gib(double b) { return b / 1073741824.0; }

static void print_json(FILE *f, const tern_plan_out *o, size_t top, const tern_plan_opts *op, double host_s,
                       const char *recovered, const char *inferred)
{
    if (recovered) /* an ONNX model: the config.json recovered from its graph and what gave each field */
        fprintf(f, "{\"recovered_config\":%s,\"recovered_from\":%s,", recovered, inferred);
    else
        fprintf(f, "{");
    fprintf(f, "\"machine\":\"%s\",\"instances\":%u,\"ranks\":%u,\"seq\":%lld,\"global_batch\":%lld,"
               "\"tp_reduce\":\"%s\",\"searched\":%zu,\"simulated_graphs\":%zu,\"collectives_timed\":%zu,\"host_s\":%.3f,",
            o->machine, o->instances, o->ranks, (long long)op->seq, (long long)op->global_batch,
            op->precision_fp32 || !op->tp_reduce_bf16 ? "fp32" : "bf16", o->searched,
            o->simulated, o->collectives, host_s);
    if (o->price_usd_h > 0)
        fprintf(f, "\"price_usd_per_hour\":%.4f,", o->price_usd_h);
    else
        fprintf(f, "\"price_usd_per_hour\":null,");
    fprintf(f, "\"plans\":[");
    for (size_t i = 0; i < top && i < o->count; i++) {
        const tern_plan_result *r = &o->plans[i];
        fprintf(f,
                "%s{\"layout\":{\"tp\":%d,\"pp\":%d,\"dp\":%d,\"microbatch\":%d,\"zero\":%d,\"recompute\":\"%s\","
                "\"vpp\":%d,\"ep\":%d},\"fits\":%s,",
                i ? "," : "", r->layout.tp, r->layout.pp, r->layout.dp, r->layout.microbatch, r->layout.zero,
                tern_plan_recompute_name(r->layout.recompute), r->layout.vpp, r->layout.ep, r->fits ? "true" : "false");
        if (r->fits)
            fprintf(f,
                    "\"step_s\":%.6g,\"seq_per_s\":%.6g,\"tokens_per_s\":%.6g,\"mfu\":%.4f,\"micro_batches\":%d,"
                    "\"compute_s\":%.6g,\"bubble_s\":%.6g,\"comm_exposed_s\":%.6g,\"comm_overlapped_s\":%.6g,"
                    "\"tp_comm_s\":%.6g,\"pp_comm_s\":%.6g,\"dp_comm_s\":%.6g,\"ep_comm_s\":%.6g,\"layer_fwd_s\":%.6g,"
                    "\"layer_bwd_s\":%.6g,\"head_fwd_s\":%.6g,\"head_bwd_s\":%.6g,",
                    r->step_s, r->seq_per_s, r->tokens_per_s, r->mfu, r->micro_batches, r->compute_s, r->bubble_s,
                    r->comm_exposed_s, r->comm_overlapped_s, r->tp_comm_s, r->pp_comm_s, r->dp_comm_s, r->ep_comm_s,
                    r->layer_fwd_s, r->layer_bwd_s, r->head_fwd_s, r->head_bwd_s);
        else
            fprintf(f, "\"step_s\":null,\"seq_per_s\":null,\"tokens_per_s\":null,\"mfu\":null,");
        fprintf(f,
                "\"hbm_gib_per_core\":%.4f,\"memory_gib\":{\"weights\":%.4f,\"grads\":%.4f,\"optimizer\":%.4f,"
                "\"activations\":%.4f,\"workspace\":%.4f,\"capacity\":%.4f},",
                gib(r->mem.total), gib(r->mem.weights), gib(r->mem.grads), gib(r->mem.optimizer),
                gib(r->mem.activations), gib(r->mem.workspace), gib(r->mem.capacity));
        if (r->fits && o->price_usd_h > 0)
            fprintf(f, "\"cost_per_step_usd\":%.6g,\"cost_per_mtok_usd\":%.6g,\"job_cost_usd\":%.6g,\"job_hours\":%.6g}",
                    r->cost_per_step_usd, r->cost_per_mtok_usd, r->job_cost_usd, r->job_hours);
        else
            fprintf(f, "\"cost_per_step_usd\":null}");
    }
    fprintf(f, "],\"gpus\":[");
    for (size_t g = 0; g < o->ngpus; g++) {
        const tern_plan_gpu *u = &o->gpus[g];
        fprintf(f,
                "%s{\"instance\":\"%s\",\"gpu\":\"%s\",\"instances\":%u,\"layout\":\"%s\",\"fits\":%s,"
                "\"assumed_mfu\":%.3f,\"peak_tflops\":%.1f,\"step_s\":%.6g,\"tokens_per_s\":%.6g,",
                g ? "," : "", u->instance, u->gpu, u->instances, u->layout, u->fits ? "true" : "false", u->mfu,
                u->peak_flops / 1e12, u->step_s, u->tokens_per_s);
        if (u->has_price)
            fprintf(f, "\"price_usd_per_hour\":%.4f,\"cost_per_step_usd\":%.6g,\"job_cost_usd\":%.6g}",
                    u->price_usd_h, u->cost_per_step_usd, u->job_cost_usd);
        else
            fprintf(f, "\"price_usd_per_hour\":null,\"cost_per_step_usd\":null}");
    }
    fprintf(f, "]}\n");
}

static void print_table(FILE *f, const tern_plan_out *o, size_t top, const tern_plan_opts *op, double host_s)
{
    fprintf(f, "%s, %u instance%s, %u ranks; seq %lld, global batch %lld; %zu layouts searched, %zu graphs "
               "simulated, %zu collectives timed, %.1f s\n",
            op->cluster, o->instances, o->instances == 1 ? "" : "s", o->ranks, (long long)op->seq, (long long)op->global_batch, o->searched,
            o->simulated, o->collectives, host_s);
    fprintf(f, "%-46s %4s %9s %8s %10s %6s %8s %9s %9s %8s %10s\n", "layout", "fits", "step s", "seq/s", "tokens/s",
            "MFU", "HBM GiB", "bubble s", "comm exp", "comm ov", "$/step");
    for (size_t i = 0; i < top && i < o->count; i++) {
        const tern_plan_result *r = &o->plans[i];
        char lay[96], ep[16] = "";
        if (r->layout.ep > 1)
            snprintf(ep, sizeof ep, " ep=%d", r->layout.ep);
        snprintf(lay, sizeof lay, "tp=%d pp=%d vpp=%d dp=%d%s mb=%d zero=%d rc=%s", r->layout.tp, r->layout.pp,
                 r->layout.vpp, r->layout.dp, ep, r->layout.microbatch, r->layout.zero,
                 tern_plan_recompute_name(r->layout.recompute));
        if (r->fits) {
            char cost[32] = "n/a";
            if (o->price_usd_h > 0)
                snprintf(cost, sizeof cost, "%.3f", r->cost_per_step_usd);
            fprintf(f, "%-46s %4s %9.3f %8.2f %10.0f %5.1f%% %8.2f %9.3f %9.3f %8.3f %10s\n", lay, "yes", r->step_s,
                    r->seq_per_s, r->tokens_per_s, 100 * r->mfu, gib(r->mem.total), r->bubble_s, r->comm_exposed_s,
                    r->comm_overlapped_s, cost);
        } else {
            fprintf(f, "%-46s %4s  needs %.2f GiB of %.2f: weights %.2f, grads %.2f, optimizer %.2f, activations "
                       "%.2f, workspace %.2f\n",
                    lay, "no", gib(r->mem.total), gib(r->mem.capacity), gib(r->mem.weights), gib(r->mem.grads),
                    gib(r->mem.optimizer), gib(r->mem.activations), gib(r->mem.workspace));
        }
    }
    const tern_plan_result *b = &o->plans[0];
    if (b->fits) {
        fprintf(f, "best: one layer (tp=%d, micro-batch %d) simulated: forward %.3f ms, backward %.3f ms; head "
                   "forward %.3f ms, backward %.3f ms; %d micro-batches per step\n",
                b->layout.tp, b->layout.microbatch, b->layer_fwd_s * 1e3, b->layer_bwd_s * 1e3, b->head_fwd_s * 1e3,
                b->head_bwd_s * 1e3, b->micro_batches);
        fprintf(f, "best: comm per step: TP %.3f s, EP %.3f s, PP %.3f s (exposed), DP %.3f s (%.3f s hidden behind "
                   "the backward)\n",
                b->tp_comm_s, b->ep_comm_s, b->pp_comm_s, b->dp_comm_s, b->comm_overlapped_s);
        if (o->price_usd_h > 0)
            fprintf(f, "best: $%.4f per step, $%.4f per million tokens%s", b->cost_per_step_usd, b->cost_per_mtok_usd,
                    op->tokens > 0 || op->steps > 0 ? "" : "\n");
        if (op->tokens > 0 || op->steps > 0)
            fprintf(f, "%sjob: %.1f hours, $%.0f\n", o->price_usd_h > 0 ? "; " : "best: ", b->job_hours,
                    b->job_cost_usd);
    }
    if (o->price_usd_h > 0)
        fprintf(f, "price: %s $%.2f/hour on demand (%s)\n", o->machine, o->price_usd_h, o->price_source);
    else
        fprintf(f, "price: %s: no published on-demand price (%s); costs not computed\n", o->machine, o->price_source);
    fprintf(f, "GPU comparison (roofline + communication model, docs/planner.md):\n");
    for (size_t g = 0; g < o->ngpus; g++) {
        const tern_plan_gpu *u = &o->gpus[g];
        fprintf(f, "  %u x %s (8 x %s, %.0f TFLOPS BF16 dense each, assumed MFU %.0f%%, %s%s): step %.3f s, %.0f "
                   "tokens/s",
                u->instances, u->instance, u->gpu, u->peak_flops / 1e12, 100 * u->mfu, u->layout,
                u->fits ? "" : ", DOES NOT FIT", u->step_s, u->tokens_per_s);
        if (u->has_price)
            fprintf(f, ", $%.4f per step at $%.2f/hour%s", u->cost_per_step_usd, u->price_usd_h,
                    op->tokens > 0 || op->steps > 0 ? "" : "\n");
        else
            fprintf(f, ", no price (%s)\n", u->price_source);
        if (u->has_price && (op->tokens > 0 || op->steps > 0))
            fprintf(f, ", job $%.0f\n", u->job_cost_usd);
    }
    fprintf(f, "assumptions: bf16 matmuls with fp32 accumulation; fp32 gradients and Adam state (+ fp32 master "
               "weights under bf16); TP inside an instance with sequence parallelism; TP collectives exposed (reduce-scatters in %s); DP "
               "gradient reduction hidden behind the last micro-batch's backward except the first layer's share; "
               "optimizer HBM-bound; MFU = 6 x params + attention FLOPs per token over the ranks' peak\n",
            op->precision_fp32 || !op->tp_reduce_bf16 ? "fp32" : "bf16");
}

/* Each simulated graph passes through several buffers of hundreds of MB (the kernels' programs, the executable's
 * copy, the loader check's encoded image and its decode, the runtime's copy). glibc serves them from fresh mmaps
 * (or thread-arena heaps it trims) and gives them back on free, so every graph faulted its pages in anew: 3.9 M
 * minor faults, 14-16 s of system time in a 280-layout search (perf: page-faults in tern_program_append,
 * tern_program_encode/decode and memmove). One arena that keeps what is freed lets the next graph reuse the
 * pages: 0.9 M faults, ~5 s. This is the tern process's own allocator policy, set by the command that owns it. */
static void keep_freed_memory(void)
{
    mallopt(M_ARENA_MAX, 1);
    mallopt(M_MMAP_THRESHOLD, 1 << 30);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
}

/* The best plan's pipeline schedule for one step as an SVG timeline: one row per pipeline stage, time across; a
 * bar per scheduled op (forward light, backward dark, shaded by virtual stage), the TP collectives inside each op
 * as a band along its bottom, and each send/receive between stages as a bar on the receiving stage's lower lane. */
static int write_svg(const char *path, const tern_plan_out *o)
{
    const tern_plan_result *b = &o->plans[0];
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    unsigned P = (unsigned)b->layout.pp, v = b->layout.vpp > 1 ? (unsigned)b->layout.vpp : 1;
    unsigned M = (unsigned)b->micro_batches, G = P * v;
    double W = 1200, left = 90, row = 34, top = 40, span = o->timeline_makespan_s > 0 ? o->timeline_makespan_s : 1;
    double sx = W / span, H = top + row * P + 40;
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" font-family=\"sans-serif\" "
               "font-size=\"11\">\n",
            left + W + 20, H);
    fprintf(f, "<text x=\"%.0f\" y=\"16\">tern plan: tp=%d pp=%d vpp=%u dp=%d mb=%d zero=%d recompute=%s; %u "
               "micro-batches; step schedule %.3f s (forward light, backward dark, TP collectives the bottom band, "
               "sends the red lane)</text>\n",
            left, b->layout.tp, b->layout.pp, v, b->layout.dp, b->layout.microbatch, b->layout.zero,
            tern_plan_recompute_name(b->layout.recompute), M, o->timeline_makespan_s);
    for (unsigned s = 0; s < P; s++)
        fprintf(f, "<text x=\"4\" y=\"%.1f\">stage %u</text>\n", top + row * s + row / 2, s);
    double *fe = calloc((size_t)G * M, sizeof *fe), *be = calloc((size_t)G * M, sizeof *be);
    if (!fe || !be) {
        free(fe), free(be);
        fclose(f);
        return -1;
    }
    for (size_t i = 0; i < o->ntimeline; i++) {
        const tern_plan_timeline_op *t = &o->timeline[i];
        size_t g = (size_t)t->chunk * P + t->stage;
        (t->backward ? be : fe)[g * M + t->mb] = t->end;
    }
    for (size_t i = 0; i < o->ntimeline; i++) {
        const tern_plan_timeline_op *t = &o->timeline[i];
        size_t g = (size_t)t->chunk * P + t->stage;
        double y = top + row * t->stage, x0 = left + t->start * sx, w = (t->end - t->start) * sx;
        int shade = v > 1 ? (int)(t->chunk * 60 / (v - 1)) : 0;
        const char *fill = t->backward ? "#1f5fa8" : "#8cc0ec";
        fprintf(f, "<rect class=\"op %s\" x=\"%.3f\" y=\"%.1f\" width=\"%.3f\" height=\"%.1f\" fill=\"%s\" "
                   "fill-opacity=\"%.2f\" stroke=\"#ffffff\" stroke-width=\"0.3\"><title>stage %u chunk %u "
                   "micro-batch %u %s %.6f-%.6f s</title></rect>\n",
                t->backward ? "bwd" : "fwd", x0, y + 2, w, row - 12, fill, 1.0 - shade / 200.0, t->stage, t->chunk,
                t->mb, t->backward ? "backward" : "forward", t->start, t->end);
        if (t->tp_comm_s > 0)
            fprintf(f, "<rect class=\"comm tp\" x=\"%.3f\" y=\"%.1f\" width=\"%.3f\" height=\"3\" "
                       "fill=\"#e69f00\"/>\n",
                    x0 + w - t->tp_comm_s * sx, y + row - 13, t->tp_comm_s * sx);
        /* the send this op waited for */
        double from = -1;
        if (!t->backward && g > 0)
            from = fe[(g - 1) * M + t->mb];
        else if (t->backward && g + 1 < G)
            from = be[(g + 1) * M + t->mb];
        if (from >= 0 && o->timeline_send_s > 0)
            fprintf(f, "<rect class=\"comm send\" x=\"%.3f\" y=\"%.1f\" width=\"%.3f\" height=\"5\" "
                       "fill=\"#c0392b\"/>\n",
                    left + from * sx, y + row - 8, o->timeline_send_s * sx);
    }
    free(fe), free(be);
    fprintf(f, "<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" stroke=\"#000\"/>\n", left, top + row * P,
            left + W, top + row * P);
    fprintf(f, "<text x=\"%.0f\" y=\"%.1f\">0 s</text><text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">%.3f "
               "s</text>\n",
            left, top + row * P + 16, left + W, top + row * P + 16, o->timeline_makespan_s);
    fprintf(f, "</svg>\n");
    return fclose(f) ? -1 : 0;
}

int tern_cmd_plan(int argc, char **argv)
{
    keep_freed_memory();
    tern_plan_opts o;
    tern_plan_opts_default(&o);
    o.seq = 0;
    o.global_batch = 0;
    const char *model = NULL, *svg = NULL, *config_out = NULL;
    int json = 0, quiet = 0;
    size_t top = 5;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--json")) {
            json = 1;
        } else if (!strcmp(a, "--quiet")) {
            quiet = 1;
        } else if (!v) {
            fprintf(stderr, "%s: %s needs a value (or is unknown)\n", CMD, a);
            usage(stderr);
            return 2;
        } else {
            i++;
            char *end = NULL;
            if (!strcmp(a, "--model")) {
                model = v;
            } else if (!strcmp(a, "--cluster") || !strcmp(a, "--machine")) {
                o.cluster = v;
            } else if (!strcmp(a, "--seq")) {
                o.seq = strtoll(v, &end, 10);
            } else if (!strcmp(a, "--global-batch")) {
                o.global_batch = strtoll(v, &end, 10);
            } else if (!strcmp(a, "--precision")) {
                if (!strcmp(v, "bf16"))
                    o.precision_fp32 = 0;
                else if (!strcmp(v, "fp32"))
                    o.precision_fp32 = 1;
                else {
                    fprintf(stderr, "%s: --precision %s: use bf16 or fp32\n", CMD, v);
                    return 2;
                }
            } else if (!strcmp(a, "--ring-channels")) {
                long long n = strtoll(v, &end, 10);
                if (!end || *end || n < 1 || n > 8) {
                    fprintf(stderr, "%s: --ring-channels '%s': expected an integer in [1, 8]\n", CMD, v);
                    return 2;
                }
                o.ring_channels = (unsigned)n;
                end = NULL;
            } else if (!strcmp(a, "--tp-reduce")) {
                if (!strcmp(v, "bf16"))
                    o.tp_reduce_bf16 = 1;
                else if (!strcmp(v, "fp32"))
                    o.tp_reduce_bf16 = 0;
                else {
                    fprintf(stderr, "%s: --tp-reduce %s: use fp32 or bf16\n", CMD, v);
                    return 2;
                }
            } else if (!strcmp(a, "--layout")) {
                if (!parse_layout(v, &o.fixed)) {
                    fprintf(stderr, "%s: --layout '%s': use tp=N,pp=N,vpp=N,dp=N,mb=N,zero=0|1,recompute=none|full|selective\n", CMD, v);
                    return 2;
                }
            } else if (!strcmp(a, "--top")) {
                long t = strtol(v, &end, 10);
                top = t > 0 ? (size_t)t : 0;
            } else if (!strcmp(a, "--config-out")) {
                config_out = v;
            } else if (!strcmp(a, "--svg")) {
                svg = v;
                o.timeline = 1;
            } else if (!strcmp(a, "--dump-graphs")) {
                o.dump_dir = v;
            } else if (!strcmp(a, "--price-file")) {
                o.price_file = v;
            } else if (!strcmp(a, "--tokens")) {
                o.tokens = strtod(v, &end);
            } else if (!strcmp(a, "--steps")) {
                o.steps = strtod(v, &end);
            } else if (!strcmp(a, "--gpu-mfu")) {
                o.gpu_mfu = strtod(v, &end);
                if (*end || !(o.gpu_mfu > 0 && o.gpu_mfu <= 1)) {
                    fprintf(stderr, "%s: --gpu-mfu %s: a fraction in (0, 1]\n", CMD, v);
                    return 2;
                }
            } else {
                fprintf(stderr, "%s: unknown option %s\n", CMD, a);
                usage(stderr);
                return 2;
            }
            if (end && *end) {
                fprintf(stderr, "%s: %s %s: not a number\n", CMD, a, v);
                return 2;
            }
        }
    }
    if (!model || !o.cluster || o.seq <= 0 || o.global_batch <= 0 || top == 0) {
        fprintf(stderr, "%s: --model, --cluster, --seq and --global-batch are required (positive)\n", CMD);
        usage(stderr);
        return 2;
    }
    tern_error err = {0};
    tern_model_cfg cfg;
    char *recovered = NULL, *inferred = NULL;
    if (plan_is_onnx_path(model) ? plan_cfg_from_onnx(model, &cfg, &recovered, &inferred, &err)
                                 : tern_model_cfg_load(model, &cfg, &err)) {
        fprintf(stderr, "%s: %s\n", CMD, err.msg);
        return 1;
    }
    if (recovered) {
        if (!quiet)
            fprintf(stderr, "%s: %s: recovered config %s\n%s: from: %s\n", CMD, model, recovered, CMD, inferred);
        if (config_out) {
            FILE *cf = fopen(config_out, "w");
            if (!cf || fprintf(cf, "%s\n", recovered) < 0 || fclose(cf)) {
                fprintf(stderr, "%s: --config-out %s: cannot write the file\n", CMD, config_out);
                free(recovered), free(inferred);
                return 1;
            }
        }
    } else if (config_out) {
        fprintf(stderr, "%s: --config-out needs an ONNX --model (the model is already a config.json)\n", CMD);
        return 2;
    }
    o.progress = progress;
    o.progress_ctx = &quiet;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    tern_plan_out out;
    if (tern_plan_run(&cfg, &o, &out, &err)) {
        fprintf(stderr, "%s: %s\n", CMD, err.msg);
        free(recovered), free(inferred);
        return 1;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double host = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    if (json)
        print_json(stdout, &out, top, &o, host, recovered, inferred);
    else {
        if (recovered)
            printf("model: %s, its config recovered from the ONNX graph: %s\n", model, recovered);
        print_table(stdout, &out, top, &o, host);
    }
    int rc = 0;
    if (svg && out.plans[0].fits && write_svg(svg, &out)) {
        fprintf(stderr, "%s: --svg %s: cannot write the file\n", CMD, svg);
        rc = 1;
    }
    if (!out.plans[0].fits) {
        const tern_plan_memory *m = &out.plans[0].mem;
        fprintf(stderr,
                "%s: no layout%s fits a rank's %.2f GiB of HBM; the smallest needs %.2f GiB (weights %.2f, grads "
                "%.2f, optimizer %.2f, activations %.2f, workspace %.2f)\n",
                CMD, o.fixed.tp > 0 || o.fixed.pp > 0 || o.fixed.dp > 0 ? " with the fixed knobs" : "",
                gib(m->capacity), gib(m->total), gib(m->weights), gib(m->grads), gib(m->optimizer),
                gib(m->activations), gib(m->workspace));
        rc = 1;
    }
    tern_plan_out_free(&out);
    free(recovered), free(inferred);
    return rc;
}
