/* ScalarE: the activation instruction, D = func(A * scale + bias), with an optional per-partition sum of the
 * results. The affine step is fp32 (one rounding for the product, one for the sum, never fused); each function is
 * then evaluated in double from that fp32 value and rounded once to fp32, so tern is at least as accurate as an
 * fp32 libm (the hardware's piece-wise polynomial tables are not public). Outside the documented valid input
 * ranges (log [2^-64, 2^64], sqrt [2^-116, 2^118], rsqrt [2^-87, 2^97], reciprocal +-[2^-42, 2^42], sin [-pi, pi])
 * the hardware "generates invalid output results"; tern computes the exact function there instead. In particular
 * the hardware's sin has no range reduction (the arch digest records sin(9.0) ~= 27.65 on hardware) but the
 * polynomial is not public, so tern returns libm sin and this difference is unmodelled.
 *
 * Operands (isa_table.def): dst, in0 = A, in1 = bias [P,1] (optional: ndims 0 means bias 0), scale = imm0.f or,
 * with TERN_FLAG_S0_AP, the fp32 [P,1] operand in in2; with TERN_FLAG_REDUCE the per-partition fp32 sum (in
 * element order, fp32 accumulation) of the fp32 results before the cast to dst's dtype goes to extra ([P,1]).
 * Facts: trainium-arch.md §4.2, §6, §8; SDK nki.api.shared.rst (functions, ranges), nki.isa.activation docstring. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "sim/act.h"
#include "sim/host_threads.h"
#include "sim/rules.h"

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

static const char *dtn(uint8_t dt) { return tern_dtype_name((tern_dtype)dt); }

static tern_status need_column(const exec_ctx *cx, const tern_instr *ins, int slot, uint32_t P, const char *what,
                               tern_error *err)
{
    const tern_ap *a = &ins->ap[slot];
    if (a->num_partitions != P || tern_ap_free_elems(a) != 1)
        return rules_fail(err, TERN_ERR_INVALID, cx, ins, slot, "%s must be [%u, 1], is [%u, %llu]", what, P,
                          a->num_partitions, (unsigned long long)tern_ap_free_elems(a));
    return TERN_OK;
}

/* The ACTIVATION family has one opcode: the entry points (end of file) are activation's. */
static tern_status check_scalar(const tern_core *core, const exec_ctx *cx, const tern_instr *ins, tern_error *err)
{
    const unsigned reach = REACH_SBUF | REACH_PSUM;
    tern_status st;
    if ((st = rules_check_ap(core, cx, ins, TERN_AP_DST, reach, err)) ||
        (st = rules_check_ap(core, cx, ins, TERN_AP_IN0, reach, err)))
        return st;
    if (ins->func >= TERN_ACT_COUNT)
        return rules_fail(err, TERN_ERR_INVALID, cx, ins, -1, "activation function %u unknown (0..%d)", ins->func,
                          TERN_ACT_COUNT - 1);
    const tern_ap *a = &ins->ap[TERN_AP_IN0], *d = &ins->ap[TERN_AP_DST];
    if (d->num_partitions != a->num_partitions)
        return rules_fail(err, TERN_ERR_INVALID, cx, ins, TERN_AP_DST, "%u partitions, operand in0 has %u (must be equal)",
                          d->num_partitions, a->num_partitions);
    if (tern_ap_free_elems(d) != tern_ap_free_elems(a))
        return rules_fail(err, TERN_ERR_INVALID, cx, ins, TERN_AP_DST,
                          "%llu elements per partition, operand in0 has %llu (must be equal)",
                          (unsigned long long)tern_ap_free_elems(d), (unsigned long long)tern_ap_free_elems(a));
    uint32_t P = a->num_partitions;
    if (ins->ap[TERN_AP_IN1].ndims) {
        if ((st = rules_check_ap(core, cx, ins, TERN_AP_IN1, reach, err)) ||
            (st = need_column(cx, ins, TERN_AP_IN1, P, "bias", err)))
            return st;
        if (ins->ap[TERN_AP_IN1].dtype == TERN_DTYPE_TF32)
            return rules_fail(err, TERN_ERR_INVALID, cx, ins, TERN_AP_IN1, "bias dtype %s not allowed (any dtype but tf32)",
                              dtn(ins->ap[TERN_AP_IN1].dtype));
        if (ins->func == TERN_ACT_RECIPROCAL && core->cfg.generation < 3)
            return rules_fail(err, TERN_ERR_UNSUPPORTED, cx, ins, TERN_AP_IN1,
                              "activation reciprocal does not support a bias on NeuronCore-v%d",
                              core->cfg.generation);
    }
    if (ins->flags & TERN_FLAG_S0_AP) {
        if ((st = rules_check_ap(core, cx, ins, TERN_AP_IN2, reach, err)) ||
            (st = need_column(cx, ins, TERN_AP_IN2, P, "scale", err)))
            return st;
        if (ins->ap[TERN_AP_IN2].dtype != TERN_DTYPE_FP32)
            return rules_fail(err, TERN_ERR_INVALID, cx, ins, TERN_AP_IN2, "scale dtype %s must be fp32",
                              dtn(ins->ap[TERN_AP_IN2].dtype));
    } else if (ins->ap[TERN_AP_IN2].ndims) {
        return rules_fail(err, TERN_ERR_INVALID, cx, ins, TERN_AP_IN2,
                          "operand is set but unused (scale is imm0 without TERN_FLAG_S0_AP)");
    }
    if (ins->flags & TERN_FLAG_REDUCE) {
        if ((st = rules_check_ap(core, cx, ins, TERN_AP_EXTRA, reach, err)) ||
            (st = need_column(cx, ins, TERN_AP_EXTRA, P, "reduce result", err)))
            return st;
    } else if (ins->ap[TERN_AP_EXTRA].ndims) {
        return rules_fail(err, TERN_ERR_INVALID, cx, ins, TERN_AP_EXTRA,
                          "operand is set but unused (reduce result without TERN_FLAG_REDUCE)");
    }
    return TERN_OK;
}

static double sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }

/* func(x) in double; x is the fp32 affine result. NaN in gives NaN out for every function. */
double act_eval(tern_act_func f, double x)
{
    const double rsqrt2 = 0.70710678118654752440, rsqrt2pi = 0.39894228040143267794;
    switch (f) {
    case TERN_ACT_COPY: return x;
    case TERN_ACT_EXP: return exp(x);
    case TERN_ACT_LOG: return log(x);
    case TERN_ACT_TANH: return tanh(x);
    case TERN_ACT_SIGMOID: return sigmoid(x);
    case TERN_ACT_RELU: return x > 0 ? x : (x != x ? x : 0.0);
    case TERN_ACT_GELU: return 0.5 * x * erfc(-x * rsqrt2);
    case TERN_ACT_GELU_TANH: {
        const double k = 0.79788456080286535588; /* sqrt(2/pi) */
        /* 0.5 x (1 + tanh(u)) = x / (1 + exp(-2u)): the same function without the cancellation of 1 + tanh(u)
         * for negative x (where the first form returns 0 once tanh(u) rounds to -1) and one exp instead of
         * libm's expm1-based tanh (a third of GPT-2's host time went there). */
        return x / (1.0 + exp(-2.0 * (k * (x + 0.044715 * x * x * x))));
    }
    case TERN_ACT_GELU_DX: return 0.5 * erfc(-x * rsqrt2) + x * rsqrt2pi * exp(-0.5 * x * x);
    case TERN_ACT_SILU: return x * sigmoid(x);
    case TERN_ACT_SILU_DX: {
        double s = sigmoid(x);
        return s * (1.0 + x * (1.0 - s));
    }
    case TERN_ACT_ERF: return erf(x);
    case TERN_ACT_ERF_DX: return 2.0 / sqrt(M_PI) * exp(-x * x);
    case TERN_ACT_SOFTPLUS: return x > 0 ? x + log1p(exp(-x)) : log1p(exp(x));
    case TERN_ACT_SQRT: return sqrt(x);
    case TERN_ACT_RSQRT: return 1.0 / sqrt(x);
    case TERN_ACT_RECIPROCAL: return 1.0 / x;
    case TERN_ACT_SQUARE: return x * x;
    case TERN_ACT_SIN: return sin(x);
    case TERN_ACT_ABS: return fabs(x);
    case TERN_ACT_SIGN: return x > 0 ? 1.0 : x < 0 ? -1.0 : x; /* +-0 and NaN pass through */
    case TERN_ACT_COUNT: break;
    }
    return NAN;
}

typedef struct {
    tern_act_func f;
    const float *in;  /* partition p's row: in + p * in_stride (floats) */
    float *out;       /* out + p * out_stride: the same row as in, or one that overlaps no input row */
    size_t in_stride, out_stride;
    const float *bias, *scale;
    float *sum;
    uint32_t P;
    size_t N;
    int want_sum;
    int simd; /* act_row_simd computes f on this host */
} act_job;

static void act_part(void *ctx, unsigned part, unsigned nparts)
{
    const act_job *j = ctx;
    uint32_t p0 = (uint32_t)((uint64_t)j->P * part / nparts), p1 = (uint32_t)((uint64_t)j->P * (part + 1) / nparts);
    for (uint32_t p = p0; p < p1; p++) {
        float sc = j->scale[p], b = j->bias[p];
        const float *in = &j->in[(size_t)p * j->in_stride];
        float *row = &j->out[(size_t)p * j->out_stride];
        if (j->simd) {
            act_row_simd(j->f, in, row, j->N, sc, b);
        } else if (j->f == TERN_ACT_COPY) { /* the affine step alone: copy returns its fp32 input, so no round trip */
            for (size_t i = 0; i < j->N; i++) {
                float t = in[i] * sc;
                row[i] = t + b;
            }
        } else if (j->f == TERN_ACT_RELU) {
            /* act_eval's relu in fp32: t > 0 gives t, NaN gives itself (t is an arithmetic result, so already quiet,
             * and the double round trip keeps a quiet NaN's bits), anything else +0. A loop the compiler
             * vectorises. */
            for (size_t i = 0; i < j->N; i++) {
                float t = in[i] * sc;
                t = t + b;
                row[i] = t > 0.0f ? t : (t != t ? t : 0.0f);
            }
        } else {
            for (size_t i = 0; i < j->N; i++) {
                float t = in[i] * sc;
                t = t + b;
                row[i] = (float)act_eval(j->f, (double)t);
            }
        }
    }
    /* The sums, when the instruction asks for them: each partition's a serial chain in element order. With AVX-512
     * sixteen partitions' chains advance in one vector (act_row_sums16), else eight together in registers (each add
     * waits on its own chain only); the same adds in the same order either way. */
    uint32_t pv = p0; /* partitions summed sixteen at a time */
    if (j->want_sum && j->simd)
        for (; pv < p1; pv += 16) {
            uint32_t ng = p1 - pv < 16 ? p1 - pv : 16;
            const float *r[16];
            float s[16];
            for (uint32_t q = 0; q < 16; q++)
                r[q] = &j->out[(size_t)(pv + (q < ng ? q : 0)) * j->out_stride];
            if (!act_row_sums16(r, j->N, s))
                break; /* a NaN: these and the rest by the chains below */
            for (uint32_t q = 0; q < ng; q++)
                j->sum[pv + q] = s[q];
        }
    if (j->want_sum && pv < p1) {
        enum { G = 8 };
        for (uint32_t pg = pv; pg < p1; pg += G) {
            uint32_t ng = p1 - pg < G ? p1 - pg : G;
            const float *r[G];
            for (uint32_t q = 0; q < G; q++)
                r[q] = &j->out[(size_t)(pg + (q < ng ? q : 0)) * j->out_stride];
            /* the eight chains in registers (an array indexed in a loop stays in memory, each add then waiting on
             * a store and a reload) */
            float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f, a4 = 0.0f, a5 = 0.0f, a6 = 0.0f, a7 = 0.0f;
            for (size_t i = 0; i < j->N; i++) {
                a0 += r[0][i];
                a1 += r[1][i];
                a2 += r[2][i];
                a3 += r[3][i];
                a4 += r[4][i];
                a5 += r[5][i];
                a6 += r[6][i];
                a7 += r[7][i];
            }
            const float acc[G] = {a0, a1, a2, a3, a4, a5, a6, a7};
            for (uint32_t q = 0; q < ng; q++)
                j->sum[pg + q] = acc[q];
        }
    }
}

static tern_status exec_scalar(tern_core *core, const exec_ctx *cx, const tern_instr *ins, tern_error *err)
{
    tern_status st;
    for (int s = 0; s < TERN_INSTR_OPERANDS; s++) {
        const tern_ap *ap = &ins->ap[s];
        if (ap->ndims && ap->offset_reg != TERN_REG_NONE) {
            char what[128], label[96];
            instr_label(cx, ins, label, sizeof label);
            snprintf(what, sizeof what, "%s: operand %s", label, operand_name(s));
            if ((st = ap_check_bounds(core, cx->engine, ap, what, err)))
                return st;
        }
    }
    const tern_ap *a = &ins->ap[TERN_AP_IN0];
    uint32_t P = a->num_partitions;
    size_t N = (size_t)tern_ap_free_elems(a), n = (size_t)P * N;
    float *x = core_scratch(core, 0, n), *bias = core_scratch(core, 1, P), *scale = core_scratch(core, 2, P),
          *sum = core_scratch(core, 3, P);
    if (!x || !bias || !scale || !sum)
        return rules_fail(err, TERN_ERR_NOMEM, cx, ins, -1, "out of host memory for %zu elements", n);
    /* fp32 input rows on chip (each partition one contiguous, aligned run) are read in place, not gathered into a
     * dense copy (fp32 gathers are plain copies, so the bits are the same). The results go straight into fp32
     * output rows when those are the input rows themselves or overlap none of them; otherwise into the dense
     * buffer the scatter converts (a PSUM tile evacuated to bf16). */
    const tern_ap *d = &ins->ap[TERN_AP_DST];
    size_t in_n = 0, out_n = 0, in_ps = 0, out_ps = 0;
    uint8_t *in_rows = a->dtype == TERN_DTYPE_FP32 ? ap_onchip_rows(core, cx->engine, a, &in_n, &in_ps) : NULL;
    if (in_rows && (in_n != N || (uintptr_t)in_rows % 4 != 0 || in_ps % 4 != 0))
        in_rows = NULL;
    uint8_t *out_rows = in_rows && d->dtype == TERN_DTYPE_FP32 && d->num_partitions == P
                            ? ap_onchip_rows(core, cx->engine, d, &out_n, &out_ps)
                            : NULL;
    if (out_rows && (out_n != N || (uintptr_t)out_rows % 4 != 0 || out_ps % 4 != 0 ||
                     onchip_rows_relation(core, a, in_rows, in_ps, N * 4, d, out_rows, out_ps, N * 4) == 2))
        out_rows = NULL;
    if (!in_rows && cx->lazy_in0) /* PSUM kept as one broadcast row (psum_lazy_before): the row in every partition */
        for (uint32_t p = 0; p < P; p++)
            memcpy(x + (size_t)p * N, cx->lazy_in0, N * 4);
    else if (!in_rows && (st = ap_gather_f32(core, cx->engine, a, x, err)))
        return st;
    if (ins->ap[TERN_AP_IN1].ndims) {
        if ((st = ap_gather_f32(core, cx->engine, &ins->ap[TERN_AP_IN1], bias, err)))
            return st;
    } else {
        for (uint32_t p = 0; p < P; p++)
            bias[p] = 0.0f;
    }
    if (ins->flags & TERN_FLAG_S0_AP) {
        if ((st = ap_gather_f32(core, cx->engine, &ins->ap[TERN_AP_IN2], scale, err)))
            return st;
    } else {
        for (uint32_t p = 0; p < P; p++)
            scale[p] = ins->imm0.f;
    }
    act_job j = {(tern_act_func)ins->func, x, x, N, N, bias, scale, sum, P, N, (ins->flags & TERN_FLAG_REDUCE) != 0,
                 act_simd_has((tern_act_func)ins->func) && act_simd_enabled()};
    if (in_rows) {
        j.in = (const float *)(const void *)in_rows;
        j.in_stride = in_ps / 4;
    }
    if (in_rows && cx->lazy_in0) { /* the kept row, read for every partition */
        j.in = cx->lazy_in0;
        j.in_stride = 0;
    }
    if (out_rows) {
        j.out = (float *)(void *)out_rows;
        j.out_stride = out_ps / 4;
        psum_mark(core, d, 0); /* what ap_scatter_f32 does before writing */
        sbuf_written(core, cx->engine, d);
    }
    /* Partitions are independent (each sum runs in element order within its partition), so splitting them over
     * the host threads changes nothing in the results; small instructions stay on the calling thread. */
    unsigned parts = n >= 8192 ? pool_threads(core_pool(core)) : 1;
    if (parts > P)
        parts = P;
    if (!core_may_split())
        parts = 1;
    pool_run(core_pool(core), act_part, &j, parts ? parts : 1);
    if (!out_rows && (st = ap_scatter_f32(core, cx->engine, &ins->ap[TERN_AP_DST], x, sr_stream_of(cx), err)))
        return st;
    if (ins->flags & TERN_FLAG_REDUCE)
        return ap_scatter_f32(core, cx->engine, &ins->ap[TERN_AP_EXTRA], sum, sr_stream_of(cx) ^ 0x5245445543ull, err);
    return TERN_OK;
}

/* ---- entry points (declared from the instruction table: rules.h, core_internal.h) ---- */

tern_status check_op_ACTIVATION(const tern_core *core, const exec_ctx *cx, const tern_instr *ins, size_t count,
                                tern_error *err)
{
    (void)count;
    return check_scalar(core, cx, ins, err);
}

/* What rules_check_instr and check_scalar guarantee: activation on ScalarE, a known function, destination and
 * input on chip with the same partitions and elements per partition (the executor sizes D from A). */
tern_status exec_op_ACTIVATION(tern_core *core, const exec_ctx *cx, const tern_instr *ins, tern_error *err)
{
    exec_assert_entry(cx, ins, TERN_ISA_FAMILY_ACTIVATION);
    TERN_ASSERT(cx->engine == TERN_ENGINE_SCALAR);
    TERN_ASSERT(ins->func < TERN_ACT_COUNT);
    exec_assert_operand(core, ins, TERN_AP_DST, EXEC_ONCHIP);
    exec_assert_operand(core, ins, TERN_AP_IN0, EXEC_ONCHIP);
    TERN_ASSERT(ins->ap[TERN_AP_DST].num_partitions == ins->ap[TERN_AP_IN0].num_partitions &&
                tern_ap_free_elems(&ins->ap[TERN_AP_DST]) == tern_ap_free_elems(&ins->ap[TERN_AP_IN0]));
    return exec_scalar(core, cx, ins, err);
}
