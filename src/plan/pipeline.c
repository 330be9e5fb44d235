/* The pipeline schedules, simulated op by op: 1F1B (PipeDream-flush / Megatron order) and Megatron's interleaved
 * 1F1B with v virtual stages (model chunks) per rank. With v = 1 the two are the same schedule. The model is cut
 * into P x v chunks; chunk g runs on rank g mod P, as that rank's local chunk g / P. Rank r first runs
 * min((P - r - 1) x 2 + (v - 1) x P, M x v) warm-up forwards (for v = 1: min(P - r - 1, M)), then alternates one
 * forward and one backward, then drains its backwards. Its k-th forward is of local chunk (k mod P v) / P and
 * micro-batch (k / P v) x P + k mod P (micro-batches go round the ranks in groups of P); its k-th backward is of
 * local chunk v - 1 - (k mod P v) / P, same micro-batch rule. A forward of chunk g, micro-batch m starts when its
 * rank is free and chunk g-1's forward of m has arrived (finished + the send/receive time x, every chunk boundary
 * crossing ranks); a backward when chunk g+1's backward of m has arrived, or, on the last chunk, after its own
 * forward. The makespan and each rank's idle time (the bubble) come out of the schedule, not from the
 * (P-1)/(v M) formula, so uneven chunks (the last one carries the LM head) and send times are accounted as they
 * fall. */
#include <stdlib.h>

#include "plan/plan_internal.h"

/* the local chunk and micro-batch of rank r's k-th forward (fwd) or backward */
static void op_of(unsigned P, unsigned v, unsigned k, int fwd, unsigned *chunk, unsigned *mb)
{
    unsigned in_group = k % (P * v);
    unsigned c = in_group / P;
    *chunk = fwd ? c : v - 1 - c;
    *mb = (k / (P * v)) * P + k % P;
}

int plan_pipeline_schedule(unsigned P, unsigned v, unsigned M, const double *f, const double *b, double x,
                           double *makespan, double *idle_max, plan_pipe_op *trace)
{
    return plan_pipeline_schedule2(P, v, M, f, b, x, x, makespan, idle_max, trace);
}

int plan_pipeline_schedule2(unsigned P, unsigned v, unsigned M, const double *f, const double *b, double xf,
                            double xb, double *makespan, double *idle_max, plan_pipe_op *trace)
{
    if (P == 0 || v == 0 || M == 0 || (v > 1 && M % P))
        return -1;
    size_t G = (size_t)P * v, per = 2 * (size_t)M * v; /* chunks; ops per rank */
    int *ops = malloc(sizeof(int) * P * per);          /* +(g*M+m)+1 forward, -(g*M+m)-1 backward */
    double *fdone = malloc(sizeof(double) * G * M), *bdone = malloc(sizeof(double) * G * M);
    size_t *next = calloc(P, sizeof *next);
    double *free_at = calloc(P, sizeof *free_at), *busy = calloc(P, sizeof *busy);
    if (!ops || !fdone || !bdone || !next || !free_at || !busy) {
        free(ops), free(fdone), free(bdone), free(next), free(free_at), free(busy);
        return -1;
    }
    for (unsigned r = 0; r < P; r++) {
        int *o = ops + (size_t)r * per;
        unsigned total = M * v, warm = v == 1 ? P - r - 1 : (P - r - 1) * 2 + (v - 1) * P, nf = 0, nb = 0;
        size_t k = 0;
        if (warm > total)
            warm = total;
        unsigned ch, mb;
#define PUSH(fwd, n)                                                                                               \
    do {                                                                                                           \
        op_of(P, v, (n), (fwd), &ch, &mb);                                                                         \
        int id = (int)(((size_t)ch * P + r) * M + mb) + 1;                                                         \
        o[k++] = (fwd) ? id : -id;                                                                                 \
    } while (0)
        while (nf < warm) {
            PUSH(1, nf);
            nf++;
        }
        while (nf < total) {
            PUSH(1, nf);
            nf++;
            PUSH(0, nb);
            nb++;
        }
        while (nb < total) {
            PUSH(0, nb);
            nb++;
        }
#undef PUSH
    }
    for (size_t i = 0; i < G * M; i++)
        fdone[i] = bdone[i] = -1;
    size_t remaining = (size_t)P * per, nt = 0;
    while (remaining) {
        int progressed = 0;
        for (unsigned r = 0; r < P; r++) {
            while (next[r] < per) {
                int op = ops[(size_t)r * per + next[r]];
                size_t id = (size_t)(op > 0 ? op : -op) - 1, g = id / M, m = id % M;
                double ready;
                if (op > 0) {
                    if (g > 0 && fdone[(g - 1) * M + m] < 0)
                        break;
                    ready = g > 0 ? fdone[(g - 1) * M + m] + xf : 0;
                } else {
                    if (g + 1 < G && bdone[(g + 1) * M + m] < 0)
                        break;
                    if (fdone[g * M + m] < 0)
                        break;
                    ready = g + 1 < G ? bdone[(g + 1) * M + m] + xb : fdone[g * M + m];
                }
                double start = ready > free_at[r] ? ready : free_at[r];
                double d = op > 0 ? f[g] : b[g];
                free_at[r] = start + d;
                busy[r] += d;
                if (op > 0)
                    fdone[g * M + m] = free_at[r];
                else
                    bdone[g * M + m] = free_at[r];
                if (trace)
                    trace[nt++] = (plan_pipe_op){.rank = r, .chunk = (unsigned)(g / P), .mb = (unsigned)m,
                                                 .backward = op < 0, .start = start, .end = free_at[r]};
                next[r]++;
                remaining--;
                progressed = 1;
            }
        }
        if (!progressed)
            break; /* cannot happen for these orders; guards against a hang */
    }
    double end = 0, idle = 0;
    for (unsigned r = 0; r < P; r++)
        if (free_at[r] > end)
            end = free_at[r];
    for (unsigned r = 0; r < P; r++)
        if (end - busy[r] > idle)
            idle = end - busy[r];
    *makespan = end;
    *idle_max = idle;
    free(ops), free(fdone), free(bdone), free(next), free(free_at), free(busy);
    return remaining ? -1 : 0;
}

int plan_pipeline_sim(unsigned P, unsigned M, const double *f, const double *b, double x, double *makespan,
                      double *idle_max)
{
    return plan_pipeline_schedule(P, 1, M, f, b, x, makespan, idle_max, NULL);
}

void tern_plan_pipeline_1f1b(unsigned stages, unsigned micro, double f, double b, double x, double *makespan,
                             double *idle)
{
    tern_plan_pipeline_interleaved(stages, 1, micro, f, b, x, makespan, idle);
}

void tern_plan_pipeline_interleaved(unsigned stages, unsigned vpp, unsigned micro, double f, double b, double x,
                                    double *makespan, double *idle)
{
    size_t G = (size_t)stages * (vpp ? vpp : 1);
    double *fs = malloc(sizeof(double) * (G ? G : 1)), *bs = malloc(sizeof(double) * (G ? G : 1));
    *makespan = *idle = -1;
    if (fs && bs && vpp) {
        for (size_t g = 0; g < G; g++)
            fs[g] = f / vpp, bs[g] = b / vpp;
        if (plan_pipeline_schedule(stages, vpp, micro, fs, bs, x, makespan, idle, NULL))
            *makespan = *idle = -1;
    }
    free(fs);
    free(bs);
}
