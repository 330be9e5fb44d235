/* The planner's pipeline schedules (src/plan/pipeline.c) against closed forms: Megatron's interleaved 1F1B with v
 * virtual stages per rank has a bubble of (P - 1) / (v M) of the ideal time M (f + b) for equal stages and free
 * sends, for every P, v and M (a multiple of P) tried; v = 1 is plain 1F1B. The op trace is checked too: 2 M v ops
 * per rank, none overlapping on a rank, each forward after its previous chunk's forward and each backward after
 * its next chunk's backward (plus the send time), and an invalid call (M not a multiple of P) refused. */
#include <stdlib.h>

#include <math.h>

#include "../check.h"
#include "plan/plan_internal.h"
#include "tern/plan.h"

static void check_trace(unsigned P, unsigned v, unsigned M, double x)
{
    unsigned G = P * v, n = 2 * M * v * P;
    double *f = malloc(sizeof(double) * G), *b = malloc(sizeof(double) * G);
    plan_pipe_op *t = malloc(sizeof *t * n);
    for (unsigned g = 0; g < G; g++)
        f[g] = 1.0 + 0.25 * (g % 3), b[g] = 2.0 + 0.5 * (g % 2);
    double mk, idle;
    CHECK_EQ_INT(plan_pipeline_schedule(P, v, M, f, b, x, &mk, &idle, t), 0);
    /* per (chunk, micro-batch): forward and backward end times */
    double *fe = calloc((size_t)G * M, sizeof *fe), *be = calloc((size_t)G * M, sizeof *be);
    double *last = calloc(P, sizeof *last);
    unsigned *count = calloc(P, sizeof *count);
    for (unsigned i = 0; i < n; i++) {
        unsigned g = t[i].chunk * P + t[i].rank;
        CHECK(t[i].rank < P && t[i].chunk < v && t[i].mb < M);
        CHECK(t[i].start >= last[t[i].rank] - 1e-12); /* ops on a rank do not overlap (trace is in issue order) */
        last[t[i].rank] = t[i].end;
        count[t[i].rank]++;
        CHECK_NEAR(t[i].end - t[i].start, t[i].backward ? b[g] : f[g], 1e-12);
        if (!t[i].backward) {
            if (g > 0)
                CHECK(fe[(g - 1) * M + t[i].mb] > 0 && t[i].start >= fe[(g - 1) * M + t[i].mb] + x - 1e-12);
            fe[g * M + t[i].mb] = t[i].end;
        } else {
            CHECK(fe[g * M + t[i].mb] > 0 && t[i].start >= fe[g * M + t[i].mb] - 1e-12);
            if (g + 1 < G)
                CHECK(be[(g + 1) * M + t[i].mb] > 0 && t[i].start >= be[(g + 1) * M + t[i].mb] + x - 1e-12);
            be[g * M + t[i].mb] = t[i].end;
        }
        CHECK(t[i].end <= mk + 1e-12);
    }
    for (unsigned r = 0; r < P; r++)
        CHECK_EQ_INT(count[r], 2 * M * v);
    free(f), free(b), free(t), free(fe), free(be), free(last), free(count);
}

int main(void)
{
    TEST_BEGIN("interleaved 1F1B: bubble = (P - 1) / (v M) of ideal, equal stages");
    unsigned Ps[] = {2, 4, 8}, vs[] = {1, 2, 3, 4};
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++)
            for (unsigned M = Ps[i]; M <= 4 * Ps[i]; M += Ps[i]) {
                double mk, idle, f = 1.0, b = 2.0;
                tern_plan_pipeline_interleaved(Ps[i], vs[j], M, f, b, 0.0, &mk, &idle);
                double ideal = M * (f + b), bubble = (double)(Ps[i] - 1) / (vs[j] * M) * ideal;
                CHECK_MSG(fabs(mk - (ideal + bubble)) < 1e-9, "P=%u v=%u M=%u: makespan %.6f, formula %.6f", Ps[i],
                          vs[j], M, mk, ideal + bubble);
                CHECK_NEAR(idle, bubble, 1e-9); /* every rank idles the same for equal stages */
            }
    /* v = 1 is the 1F1B schedule exactly */
    double a1, i1, a2, i2;
    tern_plan_pipeline_1f1b(4, 8, 1.0, 2.0, 0.25, &a1, &i1);
    tern_plan_pipeline_interleaved(4, 1, 8, 1.0, 2.0, 0.25, &a2, &i2);
    CHECK_NEAR(a1, a2, 1e-12);
    CHECK_NEAR(i1, i2, 1e-12);
    /* sends: the interleaved schedule pays them at v times as many boundaries, so its gain shrinks with x */
    double mk1, mk2, idle;
    tern_plan_pipeline_interleaved(4, 1, 8, 1.0, 2.0, 0.05, &mk1, &idle);
    tern_plan_pipeline_interleaved(4, 2, 8, 1.0, 2.0, 0.05, &mk2, &idle);
    CHECK(mk2 < mk1);
    CHECK(mk2 > 8 * 3.0 + 3 * 3.0 / 2 - 1e-9);

    TEST_BEGIN("interleaved 1F1B: the op trace");
    check_trace(4, 2, 8, 0.0);
    check_trace(4, 2, 8, 0.3);
    check_trace(2, 4, 6, 0.1);
    check_trace(3, 1, 5, 0.2);

    TEST_BEGIN("interleaved 1F1B: refused arguments");
    double f[4] = {1, 1, 1, 1}, b[4] = {2, 2, 2, 2}, mk, id;
    CHECK_EQ_INT(plan_pipeline_schedule(2, 2, 3, f, b, 0, &mk, &id, NULL), -1); /* M not a multiple of P */
    CHECK_EQ_INT(plan_pipeline_schedule(2, 0, 4, f, b, 0, &mk, &id, NULL), -1);
    tern_plan_pipeline_interleaved(2, 2, 3, 1, 2, 0, &mk, &id);
    CHECK(mk < 0);
    return check_report();
}
