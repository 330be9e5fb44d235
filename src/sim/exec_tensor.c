/* TensorE: the systolic array. LoadStationary latches a [K,M] operand (K contraction rows on partitions, M
 * PE columns); MultiplyMoving streams a [K,N] moving operand and writes D[M,N] = stationary^T @ moving into
 * PSUM, overwriting or accumulating (a matmul accumulation group). Products of 8/16-bit inputs are exact in
 * fp32; tern sums over k in ascending order in fp32 with round-to-nearest-even, then adds the PSUM value when
 * accumulating (the array's partial sum meets PSUM's read-accumulate-write). Subnormals are kept (no flush).
 * fp32 operands: each product is rounded to fp32 before the add (the hardware's 4-pass FP32 mode is not
 * public; documented in docs/isa.md). v3+ transpose mode moves data bit-exactly through the array.
 * Facts: trainium-arch.md §3 (tile limits, dtypes, PSUM accumulation, transpose mode). */
#include <stdio.h>
#include <string.h>

#include "sim/rules.h"

static int tensor_input_dtype_ok(tern_dtype t)
{
    switch (t) {
    case TERN_DTYPE_FP32:
    case TERN_DTYPE_TF32:
    case TERN_DTYPE_BF16:
    case TERN_DTYPE_FP16:
    case TERN_DTYPE_FP8_E4M3:
    case TERN_DTYPE_FP8_E5M2:
    case TERN_DTYPE_FP8_E4M3_NEURON: return 1;
    default: return 0;
    }
}

static int is_fp32_class(tern_dtype t) { return t == TERN_DTYPE_FP32 || t == TERN_DTYPE_TF32; }

static int is_fp8(tern_dtype t)
{
    return t == TERN_DTYPE_FP8_E4M3 || t == TERN_DTYPE_FP8_E5M2 || t == TERN_DTYPE_FP8_E4M3_NEURON;
}

tern_status check_tensor(const tern_core *core, const exec_ctx *cx, const tern_instr *ins, tern_error *err)
{
    const tern_core_config *c = &core->cfg;
    tern_status st;
    const tern_ap *a = &ins->ap[TERN_AP_IN0], *d = &ins->ap[TERN_AP_DST];
    if ((st = rules_check_ap(core, cx, ins, TERN_AP_IN0, REACH_SBUF, err)))
        return st;
    if (!tensor_input_dtype_ok((tern_dtype)a->dtype))
        return rules_fail(err, TERN_ERR_INVALID, cx, ins, TERN_AP_IN0,
                          "dtype %s not a TensorE input (fp8, bf16, fp16, tf32, fp32)", tern_dtype_name((tern_dtype)a->dtype));
    uint64_t free = tern_ap_free_elems(a);
    if (ins->flags & TERN_FLAG_DOUBLE_ROW)
        return rules_fail(err, TERN_ERR_UNSUPPORTED, cx, ins, -1, "double-row FP8 mode is not implemented yet");
    switch ((tern_opcode)ins->opcode) {
    case TERN_OP_LOAD_STATIONARY:
        if (a->num_partitions > c->pe_rows)
            return rules_fail(err, TERN_ERR_RANGE, cx, ins, TERN_AP_IN0, "contraction (partitions) %u exceeds %u PE rows",
                              a->num_partitions, c->pe_rows);
        if (free > c->pe_cols)
            return rules_fail(err, TERN_ERR_RANGE, cx, ins, TERN_AP_IN0,
                              "stationary free size %llu exceeds %u PE columns", (unsigned long long)free, c->pe_cols);
        return TERN_OK;
    case TERN_OP_MULTIPLY_MOVING: {
        if ((st = rules_check_ap(core, cx, ins, TERN_AP_DST, REACH_PSUM, err)))
            return st;
        if (a->num_partitions > c->pe_rows)
            return rules_fail(err, TERN_ERR_RANGE, cx, ins, TERN_AP_IN0, "contraction (partitions) %u exceeds %u PE rows",
                              a->num_partitions, c->pe_rows);
        tern_dtype dt = (tern_dtype)d->dtype;
        if (!(dt == TERN_DTYPE_FP32 || (c->generation >= 4 && dt == TERN_DTYPE_BF16)))
            return rules_fail(err, TERN_ERR_INVALID, cx, ins, TERN_AP_DST,
                              "matmul output dtype %s not allowed (fp32%s)", tern_dtype_name(dt),
                              c->generation >= 4 ? " or bf16" : "; bf16 PSUM output needs NeuronCore-v4");
        uint64_t limit = dt == TERN_DTYPE_BF16 ? 2ull * c->moving_free_max : c->moving_free_max;
        if (free > limit)
            return rules_fail(err, TERN_ERR_RANGE, cx, ins, TERN_AP_IN0, "moving free size %llu exceeds %llu",
                              (unsigned long long)free, (unsigned long long)limit);
        if (tern_ap_free_elems(d) != free)
            return rules_fail(err, TERN_ERR_INVALID, cx, ins, TERN_AP_DST,
                              "free size %llu must equal the moving free size %llu",
                              (unsigned long long)tern_ap_free_elems(d), (unsigned long long)free);
        if (d->num_partitions > c->pe_cols)
            return rules_fail(err, TERN_ERR_RANGE, cx, ins, TERN_AP_DST, "partitions %u exceed %u PE columns",
                              d->num_partitions, c->pe_cols);
        /* One accumulation group lives in one bank on v2/v3 (v4 may span the banks). */
        if (c->generation < 4 && d->offset_reg == TERN_REG_NONE) {
            uint64_t first = d->offset / c->psum_bank_bytes;
            uint64_t last = (d->offset + free * tern_dtype_size(dt) - 1) / c->psum_bank_bytes;
            if (first != last || d->ndims != 1 || d->dims[0].step != 1)
                return rules_fail(err, TERN_ERR_INVALID, cx, ins, TERN_AP_DST,
                                  "matmul output must be contiguous within one PSUM bank of %u bytes (offset %llu, "
                                  "%llu elements)",
                                  c->psum_bank_bytes, (unsigned long long)d->offset, (unsigned long long)free);
        }
        return TERN_OK;
    }
    case TERN_OP_TRANSPOSE_PE:
        if (c->generation < 3)
            return rules_fail(err, TERN_ERR_UNSUPPORTED, cx, ins, -1,
                              "transpose mode needs NeuronCore-v3 or later (this core is v%d; use a matmul with an "
                              "identity moving operand)",
                              c->generation);
        if ((st = rules_check_ap(core, cx, ins, TERN_AP_DST, REACH_PSUM, err)))
            return st;
        if (d->dtype != a->dtype && !(is_fp8((tern_dtype)a->dtype) && tern_dtype_size((tern_dtype)d->dtype) == 2))
            return rules_fail(err, TERN_ERR_INVALID, cx, ins, TERN_AP_DST, "dtype %s must match the input's %s",
                              tern_dtype_name((tern_dtype)d->dtype), tern_dtype_name((tern_dtype)a->dtype));
        if (a->num_partitions > c->pe_rows || free > c->pe_cols)
            return rules_fail(err, TERN_ERR_RANGE, cx, ins, TERN_AP_IN0, "transpose input [%u, %llu] exceeds [%u, %u]",
                              a->num_partitions, (unsigned long long)free, c->pe_rows, c->pe_cols);
        if (d->num_partitions != free || tern_ap_free_elems(d) != a->num_partitions)
            return rules_fail(err, TERN_ERR_INVALID, cx, ins, TERN_AP_DST, "shape [%u, %llu] must be [%llu, %u]",
                              d->num_partitions, (unsigned long long)tern_ap_free_elems(d), (unsigned long long)free,
                              a->num_partitions);
        return TERN_OK;
    default: return rules_fail(err, TERN_ERR_INVALID, cx, ins, -1, "not a TensorE instruction");
    }
}

static tern_status check_dynamic(tern_core *core, const exec_ctx *cx, const tern_instr *ins, tern_error *err)
{
    for (int s = 0; s < 2; s++) {
        const tern_ap *ap = &ins->ap[s];
        if (ap->ndims && ap->offset_reg != TERN_REG_NONE) {
            char what[128], label[96];
            instr_label(cx, ins, label, sizeof label);
            snprintf(what, sizeof what, "%s: operand %s", label, operand_name(s));
            tern_status st = ap_check_bounds(core, cx->engine, ap, what, err);
            if (st)
                return st;
        }
    }
    return TERN_OK;
}

/* out[m*N + n] = sum_k s[k*M + m] * x[k*N + n], k ascending, fp32 RNE at every add (no contraction). */
static void matmul_f32(const float *s, const float *x, float *out, uint32_t K, uint32_t M, uint32_t N)
{
    memset(out, 0, (size_t)M * N * sizeof *out);
    for (uint32_t k = 0; k < K; k++) {
        const float *xr = x + (size_t)k * N;
        for (uint32_t m = 0; m < M; m++) {
            float sv = s[(size_t)k * M + m];
            float *o = out + (size_t)m * N;
            for (uint32_t n = 0; n < N; n++) {
                float p = sv * xr[n];
                o[n] = o[n] + p;
            }
        }
    }
}

tern_status exec_tensor(tern_core *core, const exec_ctx *cx, const tern_instr *ins, tern_error *err)
{
    tern_status st = check_dynamic(core, cx, ins, err);
    if (st)
        return st;
    const tern_ap *a = &ins->ap[TERN_AP_IN0], *d = &ins->ap[TERN_AP_DST];
    uint32_t K = a->num_partitions, N = (uint32_t)tern_ap_free_elems(a);
    switch ((tern_opcode)ins->opcode) {
    case TERN_OP_LOAD_STATIONARY:
        st = ap_gather_f32(core, cx->engine, a, core->stationary, err);
        if (st)
            return st;
        core->stat_k = K;
        core->stat_m = N;
        core->stat_dtype = a->dtype;
        core->stat_loaded = 1;
        return TERN_OK;
    case TERN_OP_MULTIPLY_MOVING: {
        if (!core->stat_loaded)
            return rules_fail(err, TERN_ERR_INVALID, cx, ins, -1, "no stationary operand loaded (load_stationary first)");
        if (K != core->stat_k)
            return rules_fail(err, TERN_ERR_INVALID, cx, ins, TERN_AP_IN0,
                              "contraction %u differs from the stationary operand's %u", K, core->stat_k);
        if (d->num_partitions != core->stat_m)
            return rules_fail(err, TERN_ERR_INVALID, cx, ins, TERN_AP_DST,
                              "partitions %u must equal the stationary free size %u", d->num_partitions, core->stat_m);
        if (is_fp32_class((tern_dtype)a->dtype) != is_fp32_class((tern_dtype)core->stat_dtype))
            return rules_fail(err, TERN_ERR_INVALID, cx, ins, TERN_AP_IN0,
                              "dtype %s cannot multiply stationary %s (fp32/tf32 pair only with fp32/tf32)",
                              tern_dtype_name((tern_dtype)a->dtype), tern_dtype_name((tern_dtype)core->stat_dtype));
        int acc = (ins->flags & TERN_FLAG_ACCUMULATE) != 0;
        if (acc && !psum_is_matmul_group(core, d))
            return rules_fail(err, TERN_ERR_INVALID, cx, ins, TERN_AP_DST,
                              "accumulate into PSUM not last written by a matmul group (undefined on the hardware; "
                              "start the group with an overwriting matmul)");
        uint32_t M = core->stat_m;
        float *x = core_scratch(core, 0, (size_t)K * N);
        float *out = core_scratch(core, 1, (size_t)M * N);
        float *old = acc ? core_scratch(core, 2, (size_t)M * N) : NULL;
        if (!x || !out || (acc && !old))
            return rules_fail(err, TERN_ERR_NOMEM, cx, ins, -1, "out of host memory for a %ux%ux%u matmul", K, M, N);
        if ((st = ap_gather_f32(core, cx->engine, a, x, err)))
            return st;
        matmul_f32(core->stationary, x, out, K, M, N);
        if (acc) {
            if ((st = ap_gather_f32(core, cx->engine, d, old, err)))
                return st;
            for (size_t i = 0; i < (size_t)M * N; i++)
                out[i] = old[i] + out[i];
        }
        if ((st = ap_scatter_f32(core, cx->engine, d, out, sr_stream_of(cx), err)))
            return st;
        psum_mark(core, d, 1);
        if (cx->stats)
            cx->stats->macs += (uint64_t)K * M * N;
        return TERN_OK;
    }
    case TERN_OP_TRANSPOSE_PE: {
        uint32_t P = K, F = N;
        float *x = core_scratch(core, 0, (size_t)P * F), *y = core_scratch(core, 1, (size_t)P * F);
        if (!x || !y)
            return rules_fail(err, TERN_ERR_NOMEM, cx, ins, -1, "out of host memory");
        if ((st = ap_gather_f32(core, cx->engine, a, x, err)))
            return st;
        for (uint32_t p = 0; p < P; p++)
            for (uint32_t f = 0; f < F; f++)
                y[(size_t)f * P + p] = x[(size_t)p * F + f];
        if ((st = ap_scatter_f32(core, cx->engine, d, y, sr_stream_of(cx), err)))
            return st;
        psum_mark(core, d, 0);
        return TERN_OK;
    }
    default: return rules_fail(err, TERN_ERR_INVALID, cx, ins, -1, "not a TensorE instruction");
    }
}
