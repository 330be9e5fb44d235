/* The 1F1B pipeline schedule, simulated op by op: stage s runs min(stages - s - 1, micro) warm-up forwards, then
 * alternates one forward and one backward, then drains its backwards (the PipeDream-flush / Megatron order). A
 * forward of micro-batch m on stage s starts when the stage is free and stage s-1's forward of m has arrived
 * (finished + the send/receive time); a backward when stage s+1's backward of m has arrived. The makespan and
 * each stage's idle time (the bubble) come out of the schedule, not from the (p-1)/m formula, so uneven stages
 * (the last one carries the LM head) and send times are accounted as they fall. */
#include <stdlib.h>

#include "plan/plan_internal.h"

int plan_pipeline_sim(unsigned P, unsigned M, const double *f, const double *b, double x, double *makespan,
                      double *idle_max)
{
    /* op list per stage: +m+1 = forward of m, -(m+1) = backward of m */
    int *ops = malloc(sizeof(int) * (size_t)P * 2 * M);
    double *fdone = malloc(sizeof(double) * (size_t)P * M), *bdone = malloc(sizeof(double) * (size_t)P * M);
    unsigned *next = calloc(P, sizeof *next);
    double *free_at = calloc(P, sizeof *free_at), *busy = calloc(P, sizeof *busy);
    if (!ops || !fdone || !bdone || !next || !free_at || !busy) {
        free(ops), free(fdone), free(bdone), free(next), free(free_at), free(busy);
        return -1;
    }
    for (unsigned s = 0; s < P; s++) {
        int *o = ops + (size_t)s * 2 * M;
        unsigned warm = P - s - 1 < M ? P - s - 1 : M, nf = 0, nb = 0, k = 0;
        while (nf < warm)
            o[k++] = (int)(++nf);
        while (nf < M) {
            o[k++] = (int)(++nf);
            o[k++] = -(int)(++nb);
        }
        while (nb < M)
            o[k++] = -(int)(++nb);
    }
    for (size_t i = 0; i < (size_t)P * M; i++)
        fdone[i] = bdone[i] = -1;
    unsigned remaining = P * 2 * M;
    while (remaining) {
        int progressed = 0;
        for (unsigned s = 0; s < P; s++) {
            while (next[s] < 2 * M) {
                int op = ops[(size_t)s * 2 * M + next[s]];
                unsigned m = (unsigned)(op > 0 ? op : -op) - 1;
                double ready;
                if (op > 0) {
                    if (s > 0 && fdone[(size_t)(s - 1) * M + m] < 0)
                        break;
                    ready = s > 0 ? fdone[(size_t)(s - 1) * M + m] + x : 0;
                } else {
                    if (s + 1 < P && bdone[(size_t)(s + 1) * M + m] < 0)
                        break;
                    if (fdone[(size_t)s * M + m] < 0)
                        break;
                    ready = s + 1 < P ? bdone[(size_t)(s + 1) * M + m] + x : fdone[(size_t)s * M + m];
                }
                double start = ready > free_at[s] ? ready : free_at[s];
                double d = op > 0 ? f[s] : b[s];
                free_at[s] = start + d;
                busy[s] += d;
                if (op > 0)
                    fdone[(size_t)s * M + m] = free_at[s];
                else
                    bdone[(size_t)s * M + m] = free_at[s];
                next[s]++;
                remaining--;
                progressed = 1;
            }
        }
        if (!progressed)
            break; /* cannot happen for a valid 1F1B order; guards against a hang */
    }
    double end = 0, idle = 0;
    for (unsigned s = 0; s < P; s++)
        if (free_at[s] > end)
            end = free_at[s];
    for (unsigned s = 0; s < P; s++)
        if (end - busy[s] > idle)
            idle = end - busy[s];
    *makespan = end;
    *idle_max = idle;
    free(ops), free(fdone), free(bdone), free(next), free(free_at), free(busy);
    return remaining ? -1 : 0;
}

void tern_plan_pipeline_1f1b(unsigned stages, unsigned micro, double f, double b, double x, double *makespan,
                             double *idle)
{
    double *fs = malloc(sizeof(double) * stages), *bs = malloc(sizeof(double) * stages);
    *makespan = *idle = -1;
    if (fs && bs) {
        for (unsigned s = 0; s < stages; s++)
            fs[s] = f, bs[s] = b;
        if (plan_pipeline_sim(stages, micro, fs, bs, x, makespan, idle))
            *makespan = *idle = -1;
    }
    free(fs);
    free(bs);
}
