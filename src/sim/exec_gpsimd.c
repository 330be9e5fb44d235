/* GpSimdE's own instructions: iota (affine integer pattern generation), affine_select (keep elements where an
 * affine predicate holds, e.g. causal masks) and partition_reduce (reduce across partitions). GpSimd reaches SBUF
 * only. (tensor_tensor, tensor_scalar, tensor_copy and memset on GpSimd live in exec_vector.c.)
 *
 * Encoding (tern's, documented here and in docs/isa-semantics.md):
 *  - The affine pattern is a pseudo-operand: an access pattern whose dims[k] = {step, num} are NKI's pattern
 *    [[step_w, num_w], ..., [step_x, num_x]] (dims[0] outermost); only its dims are read (mem, dtype, partitions,
 *    offset are ignored; mem = none is the clean spelling). iota takes it in slot in0, affine_select in slot in1
 *    (in0 is on_true). The product of the nums must equal the destination's elements per partition; values are
 *    produced in row-major order of the pattern and written in row-major order of dst's own pattern. iota with
 *    no pattern (in0 unused) generates over the flat free index: one dim {step 1, num = elements per partition}.
 *  - value(p, i) = imm_i0 (offset) + p * imm_i1 (channel_multiplier) + sum_k i_k * step_k in int32 arithmetic
 *    modulo 2^32 (p counts from 0 at dst's first partition).
 *  - iota writes value cast to dst's dtype: floats round from int32 (RNE or the core's rounding), integers
 *    saturate to the dtype's range (uint32 and int32 keep the 32-bit value, negative values saturate to 0 for
 *    unsigned types).
 *  - affine_select: D = (value op0 0) ? A : imm1.f, op0 one of is_equal, not_equal, is_gt, is_ge, is_lt, is_le
 *    (integer comparison). Same dtype A and D: selected elements are copied bit-exactly and imm1.f is rounded to
 *    dst's dtype; different dtypes: A goes through fp32 (NKI docstring).
 *  - partition_reduce: D is [1, F], A is [P, F]; D[0, f] = fold over p ascending of A[p, f] with op0 in add, max,
 *    min, average (= fp32 sum / P), bitwise_or, bitwise_and. Arithmetic in fp32 (fmaxf/fminf for NaN), except
 *    when A and D are both int32/uint32 (add/max/min: exact, wrapping integer arithmetic) and for the bitwise ops
 *    (integer dtypes required).
 *  - text_parse / text_format: ONNX string tensors on the device (Cast string<->float). The text operand is uint8
 *    [P, N * W]: element (p, i) of the number operand [P, N] owns bytes [i*W, (i+1)*W) of partition p's row in
 *    the operand's row-major pattern order, W = imm_i0 (1..255), UTF-8 NUL-padded (a text of exactly W bytes has
 *    no NUL). text_parse writes fp32: Python float() grammar rounded to fp64 then fp32, numpy's str->float32
 *    (tern_f32_parse); a cell that is not a number stops the core with an error naming it. text_format writes
 *    numpy's str(np.float32(x)) (tern_f32_format) and zero-fills the rest of the cell; a text that does not fit
 *    stops the core. These model GpSimd's general-purpose cores running a library routine (the way Neuron's
 *    custom operators run there); the number operand must be fp32.
 * Facts: trainium-arch.md §2.4 (GpSimd cannot access PSUM), §4.3, §8; SDK nki.isa iota / affine_select /
 * tensor_partition_reduce docstrings. */
#include <stdio.h>

#include "sim/rules.h"

static int dt_is_int(uint8_t dt) { return !tern_dtype_is_float((tern_dtype)dt); }
static const char *dtn(uint8_t dt) { return tern_dtype_name((tern_dtype)dt); }

/* The pattern pseudo-operand: only its dims are read. iota without one (ndims 0) uses the flat free index. */
static tern_status check_pattern(const exec_ctx *cx, const tern_instr *ins, int slot, tern_error *err)
{
    const tern_ap *pt = &ins->ap[slot], *d = &ins->ap[TERN_AP_DST];
    if (pt->ndims == 0 && ins->opcode == TERN_OP_IOTA)
        return TERN_OK;
    if (pt->ndims < 1 || pt->ndims > TERN_AP_MAX_DIMS)
        return rules_fail(err, TERN_ERR_INVALID, cx, ins, slot, "affine pattern needs 1..%d dims, has %u",
                          TERN_AP_MAX_DIMS, pt->ndims);
    uint64_t n = 1;
    for (unsigned k = 0; k < pt->ndims; k++)
        n *= pt->dims[k].num;
    if (n != tern_ap_free_elems(d))
        return rules_fail(err, TERN_ERR_INVALID, cx, ins, slot,
                          "affine pattern covers %llu elements, the destination has %llu per partition",
                          (unsigned long long)n, (unsigned long long)tern_ap_free_elems(d));
    return TERN_OK;
}


/* The GPSIMD and TEXT families' opcodes, for their switches: each entry point (end of file) passes its own, so a
 * new row of either family needs a new member here and -Wswitch then names every switch that must handle it. */
typedef enum { GP_IOTA, GP_AFFINE_SELECT, GP_PARTITION_REDUCE, GP_TEXT_PARSE, GP_TEXT_FORMAT } gp_op;

static tern_status check_gpsimd(const tern_core *core, const exec_ctx *cx, const tern_instr *ins, gp_op op,
                                tern_error *err)
{
    tern_status st;
    if ((st = rules_check_ap(core, cx, ins, TERN_AP_DST, REACH_SBUF, err)))
        return st;
    const tern_ap *d = &ins->ap[TERN_AP_DST], *a = &ins->ap[TERN_AP_IN0];
    switch (op) {
    case GP_IOTA: return check_pattern(cx, ins, TERN_AP_IN0, err);
    case GP_AFFINE_SELECT:
        if ((st = rules_check_ap(core, cx, ins, TERN_AP_IN0, REACH_SBUF, err)) ||
            (st = check_pattern(cx, ins, TERN_AP_IN1, err)))
            return st;
        if (!alu_is_compare(ins->op0))
            return rules_fail(err, TERN_ERR_INVALID, cx, ins, -1,
                              "op0 %u is not a comparison (is_equal, not_equal, is_gt, is_ge, is_lt, is_le)", ins->op0);
        if (a->num_partitions != d->num_partitions || tern_ap_free_elems(a) != tern_ap_free_elems(d))
            return rules_fail(err, TERN_ERR_INVALID, cx, ins, TERN_AP_IN0, "shape [%u, %llu] must equal dst's [%u, %llu]",
                              a->num_partitions, (unsigned long long)tern_ap_free_elems(a), d->num_partitions,
                              (unsigned long long)tern_ap_free_elems(d));
        return TERN_OK;
    case GP_PARTITION_REDUCE: {
        if ((st = rules_check_ap(core, cx, ins, TERN_AP_IN0, REACH_SBUF, err)))
            return st;
        unsigned rop = ins->op0;
        int bit = rop == TERN_ALU_BITWISE_OR || rop == TERN_ALU_BITWISE_AND;
        if (!(bit || rop == TERN_ALU_ADD || rop == TERN_ALU_MAX || rop == TERN_ALU_MIN || rop == TERN_ALU_AVERAGE))
            return rules_fail(err, TERN_ERR_INVALID, cx, ins, -1,
                              "op0 %u (%s) is not a partition reduction (add, max, min, average, bitwise_or, "
                              "bitwise_and)",
                              rop, tern_alu_name((tern_alu_op)rop));
        if (d->num_partitions != 1)
            return rules_fail(err, TERN_ERR_INVALID, cx, ins, TERN_AP_DST, "%u partitions, must be 1 (the reduction)",
                              d->num_partitions);
        if (tern_ap_free_elems(d) != tern_ap_free_elems(a))
            return rules_fail(err, TERN_ERR_INVALID, cx, ins, TERN_AP_DST,
                              "%llu elements per partition, operand in0 has %llu (must be equal)",
                              (unsigned long long)tern_ap_free_elems(d), (unsigned long long)tern_ap_free_elems(a));
        if (bit && (!dt_is_int(a->dtype) || !dt_is_int(d->dtype)))
            return rules_fail(err, TERN_ERR_INVALID, cx, ins, dt_is_int(a->dtype) ? TERN_AP_DST : TERN_AP_IN0,
                              "dtype %s must be an integer type for %s",
                              dtn(dt_is_int(a->dtype) ? d->dtype : a->dtype), tern_alu_name((tern_alu_op)rop));
        return TERN_OK;
    }
    case GP_TEXT_PARSE:
    case GP_TEXT_FORMAT: {
        if ((st = rules_check_ap(core, cx, ins, TERN_AP_IN0, REACH_SBUF, err)))
            return st;
        int parse = op == GP_TEXT_PARSE;
        const tern_ap *txt = parse ? a : d, *num = parse ? d : a;
        int ts = parse ? TERN_AP_IN0 : TERN_AP_DST, ns = parse ? TERN_AP_DST : TERN_AP_IN0;
        if (ins->imm_i0 < 1 || ins->imm_i0 > 255)
            return rules_fail(err, TERN_ERR_INVALID, cx, ins, -1, "imm_i0 (text cell bytes) is %d, must be 1..255",
                              (int)ins->imm_i0);
        if (txt->dtype != TERN_DTYPE_UINT8)
            return rules_fail(err, TERN_ERR_INVALID, cx, ins, ts, "text operand dtype %s, must be uint8",
                              dtn(txt->dtype));
        if (num->dtype != TERN_DTYPE_FP32)
            return rules_fail(err, TERN_ERR_INVALID, cx, ins, ns, "number operand dtype %s, must be fp32",
                              dtn(num->dtype));
        if (txt->num_partitions != num->num_partitions ||
            tern_ap_free_elems(txt) != tern_ap_free_elems(num) * (uint64_t)ins->imm_i0)
            return rules_fail(err, TERN_ERR_INVALID, cx, ins, ts,
                              "text shape [%u, %llu] must be the numbers' [%u, %llu] times %d-byte cells",
                              txt->num_partitions, (unsigned long long)tern_ap_free_elems(txt), num->num_partitions,
                              (unsigned long long)tern_ap_free_elems(num), (int)ins->imm_i0);
        return TERN_OK;
    }
    }
    return TERN_OK;
}

/* value(p, i) for every element, dense [P][N] (int32, modulo 2^32). */
static void affine_values(const tern_instr *ins, const tern_ap *pt, const tern_ap *d, int32_t *out)
{
    uint32_t num[4] = {1, 1, 1, 1}, step[4] = {0, 0, 0, 0}, P = d->num_partitions;
    unsigned nd = pt->ndims;
    for (unsigned k = 0; k < nd; k++) {
        num[4 - nd + k] = pt->dims[k].num;
        step[4 - nd + k] = (uint32_t)pt->dims[k].step;
    }
    if (nd == 0) { /* iota without a pattern: the flat free index */
        num[3] = (uint32_t)tern_ap_free_elems(d);
        step[3] = 1;
    }
    size_t o = 0;
    for (uint32_t p = 0; p < P; p++) {
        uint32_t base = (uint32_t)ins->imm_i0 + p * (uint32_t)ins->imm_i1;
        for (uint32_t w = 0; w < num[0]; w++)
            for (uint32_t z = 0; z < num[1]; z++)
                for (uint32_t y = 0; y < num[2]; y++)
                    for (uint32_t x = 0; x < num[3]; x++)
                        out[o++] = (int32_t)(base + w * step[0] + z * step[1] + y * step[2] + x * step[3]);
    }
}

static tern_status dyn_bounds(tern_core *core, const exec_ctx *cx, const tern_instr *ins, tern_error *err)
{
    for (int s = 0; s < 2; s++) { /* dst and in0 are the only tensors (in1 of affine_select is the pattern) */
        const tern_ap *ap = &ins->ap[s];
        if (ap->ndims && ap->offset_reg != TERN_REG_NONE && !(s == TERN_AP_IN0 && ins->opcode == TERN_OP_IOTA)) {
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

static tern_status nomem(const exec_ctx *cx, const tern_instr *ins, size_t n, tern_error *err)
{
    return rules_fail(err, TERN_ERR_NOMEM, cx, ins, -1, "out of host memory for %zu elements", n);
}

static tern_ap raw_view(const tern_ap *ap)
{
    tern_ap r = *ap;
    size_t es = tern_dtype_size((tern_dtype)ap->dtype);
    r.dtype = es == 1 ? TERN_DTYPE_UINT8 : es == 2 ? TERN_DTYPE_UINT16 : TERN_DTYPE_UINT32;
    return r;
}

static int32_t clamp_to(uint8_t dt, int32_t v)
{
    switch ((tern_dtype)dt) {
    case TERN_DTYPE_INT8: return v < INT8_MIN ? INT8_MIN : v > INT8_MAX ? INT8_MAX : v;
    case TERN_DTYPE_UINT8: return v < 0 ? 0 : v > UINT8_MAX ? UINT8_MAX : v;
    case TERN_DTYPE_INT16: return v < INT16_MIN ? INT16_MIN : v > INT16_MAX ? INT16_MAX : v;
    case TERN_DTYPE_UINT16: return v < 0 ? 0 : v > UINT16_MAX ? UINT16_MAX : v;
    case TERN_DTYPE_UINT32: return v < 0 ? 0 : v;
    case TERN_DTYPE_INT32:
    case TERN_DTYPE_FP32:
    case TERN_DTYPE_TF32:
    case TERN_DTYPE_BF16:
    case TERN_DTYPE_FP16:
    case TERN_DTYPE_FP8_E4M3:
    case TERN_DTYPE_FP8_E5M2:
    case TERN_DTYPE_FP8_E4M3_NEURON:
    case TERN_DTYPE_COUNT: return v;
    }
    return v;
}

static tern_status exec_iota(tern_core *core, const exec_ctx *cx, const tern_instr *ins, tern_error *err)
{
    const tern_ap *d = &ins->ap[TERN_AP_DST];
    size_t n = (size_t)ap_elems(d);
    float *b = core_scratch(core, 0, n);
    if (!b)
        return nomem(cx, ins, n, err);
    int32_t *v = (int32_t *)(void *)b;
    affine_values(ins, &ins->ap[TERN_AP_IN0], d, v);
    if (dt_is_int(d->dtype)) {
        for (size_t i = 0; i < n; i++)
            v[i] = clamp_to(d->dtype, v[i]);
        return ap_scatter_i32(core, cx->engine, d, v, err);
    }
    for (size_t i = 0; i < n; i++)
        b[i] = (float)v[i]; /* int32 -> fp32 rounds to nearest even (C default rounding mode) */
    return ap_scatter_f32(core, cx->engine, d, b, sr_stream_of(cx), err);
}

/* affine_select's test of a pattern value v against zero, for each comparison: lo <= v <= hi, inverted for
 * not_equal (a form with no branch per element). Other operators (check_gpsimd refuses them) never pass. */
typedef struct {
    int32_t lo, hi;
    int inv;
} zero_test;

static zero_test zero_test_of(tern_alu_op op)
{
    switch (op) {
    case TERN_ALU_IS_EQ: return (zero_test){0, 0, 0};
    case TERN_ALU_NOT_EQ: return (zero_test){0, 0, 1};
    case TERN_ALU_IS_GT: return (zero_test){1, INT32_MAX, 0};
    case TERN_ALU_IS_GE: return (zero_test){0, INT32_MAX, 0};
    case TERN_ALU_IS_LT: return (zero_test){INT32_MIN, -1, 0};
    case TERN_ALU_IS_LE: return (zero_test){INT32_MIN, 0, 0};
    case TERN_ALU_BYPASS:
    case TERN_ALU_ADD:
    case TERN_ALU_SUBTRACT:
    case TERN_ALU_MULT:
    case TERN_ALU_DIVIDE:
    case TERN_ALU_MAX:
    case TERN_ALU_MIN:
    case TERN_ALU_ABS_MAX:
    case TERN_ALU_ABS_MIN:
    case TERN_ALU_POW:
    case TERN_ALU_LOGICAL_AND:
    case TERN_ALU_LOGICAL_OR:
    case TERN_ALU_LOGICAL_XOR:
    case TERN_ALU_BITWISE_AND:
    case TERN_ALU_BITWISE_OR:
    case TERN_ALU_BITWISE_XOR:
    case TERN_ALU_SHIFT_LEFT:
    case TERN_ALU_SHIFT_RIGHT:
    case TERN_ALU_AVERAGE:
    case TERN_ALU_MOD:
    case TERN_ALU_RSQRT:
    case TERN_ALU_ABS:
    case TERN_ALU_COUNT: break; /* not a comparison: check_gpsimd refuses it */
    }
    return (zero_test){1, 0, 0};
}

static inline int zero_test_keeps(zero_test z, int32_t v) { return (v >= z.lo && v <= z.hi) ^ z.inv; }

static tern_status exec_affine_select(tern_core *core, const exec_ctx *cx, const tern_instr *ins, tern_error *err)
{
    const tern_ap *d = &ins->ap[TERN_AP_DST], *a = &ins->ap[TERN_AP_IN0];
    size_t n = (size_t)ap_elems(d);
    float *vb = core_scratch(core, 0, n), *xb = core_scratch(core, 1, n);
    if (!vb || !xb)
        return nomem(cx, ins, n, err);
    int32_t *v = (int32_t *)(void *)vb;
    const zero_test zt = zero_test_of((tern_alu_op)ins->op0);
    tern_status st;
    size_t es = tern_dtype_size((tern_dtype)d->dtype);
    if (a->dtype == d->dtype && (es == 2 || es == 4) && core->opts.rounding == TERN_ROUND_RNE &&
        a->num_partitions == d->num_partitions) {
        /* rows on chip (a causal mask over [128, T] bf16 scores): each element kept or replaced in the destination
         * row, reading the input row in place; the fill's bits are the same for every element when it rounds to
         * nearest (no stochastic stream), and the kept elements' bits are copied, as the path below does. The
         * destination must be the input's rows or overlap them nowhere. */
        size_t na = 0, nd = 0, sa = 0, sd = 0;
        uint8_t *ra = ap_onchip_rows(core, cx->engine, a, &na, &sa), *rd = ap_onchip_rows(core, cx->engine, d, &nd, &sd);
        uint32_t P = d->num_partitions;
        if (ra && rd && na == nd && (size_t)P * nd == n && onchip_rows_relation(core, a, ra, sa, nd * es, d, rd, sd, nd * es) != 2) {
            tern_convert_opts o = TERN_CONVERT_OPTS_DEFAULT;
            uint32_t fill = tern_num_encode((tern_dtype)d->dtype, ins->imm1.f, &o, 0);
            psum_mark(core, d, 0);
            sbuf_written(core, cx->engine, d);
            const tern_ap *pt = &ins->ap[TERN_AP_IN1];
            if (pt->ndims == 1 && pt->dims[0].num == nd && zt.lo <= zt.hi) {
                /* a one-dimensional pattern (a causal mask's diagonal): its values computed along the row */
                for (uint32_t p = 0; p < P; p++) {
                    uint32_t base = (uint32_t)ins->imm_i0 + p * (uint32_t)ins->imm_i1, step = (uint32_t)pt->dims[0].step;
                    if (es == 2)
                        alu_affine_select_row16((uint16_t *)(void *)(rd + (size_t)p * sd),
                                                (const uint16_t *)(const void *)(ra + (size_t)p * sa), nd, base, step,
                                                zt.lo, zt.hi, zt.inv, (uint16_t)fill);
                    else
                        alu_affine_select_row32((uint32_t *)(void *)(rd + (size_t)p * sd),
                                                (const uint32_t *)(const void *)(ra + (size_t)p * sa), nd, base, step,
                                                zt.lo, zt.hi, zt.inv, fill);
                }
                return TERN_OK;
            }
            affine_values(ins, pt, d, v);
            for (uint32_t p = 0; p < P; p++) {
                const int32_t *vp = v + (size_t)p * nd;
                if (es == 2) {
                    const uint16_t *x = (const uint16_t *)(const void *)(ra + (size_t)p * sa);
                    uint16_t *y = (uint16_t *)(void *)(rd + (size_t)p * sd), f = (uint16_t)fill;
                    for (size_t i = 0; i < nd; i++)
                        y[i] = zero_test_keeps(zt, vp[i]) ? x[i] : f;
                } else {
                    const uint32_t *x = (const uint32_t *)(const void *)(ra + (size_t)p * sa);
                    uint32_t *y = (uint32_t *)(void *)(rd + (size_t)p * sd);
                    for (size_t i = 0; i < nd; i++)
                        y[i] = zero_test_keeps(zt, vp[i]) ? x[i] : fill;
                }
            }
            return TERN_OK;
        }
    }
    affine_values(ins, &ins->ap[TERN_AP_IN1], d, v);
    if (a->dtype == d->dtype) {
        tern_ap ra = raw_view(a), rd = raw_view(d);
        int32_t *x = (int32_t *)(void *)xb;
        if ((st = ap_gather_i32(core, cx->engine, &ra, x, err)))
            return st;
        tern_convert_opts o = TERN_CONVERT_OPTS_DEFAULT;
        o.round = core->opts.rounding;
        o.seed = core->opts.seed ^ (sr_stream_of(cx) * 0x9E3779B97F4A7C15ull);
        for (size_t i = 0; i < n; i++)
            if (!zero_test_keeps(zt, v[i]))
                x[i] = (int32_t)tern_num_encode((tern_dtype)d->dtype, ins->imm1.f, &o, i);
        return ap_scatter_i32(core, cx->engine, &rd, x, err);
    }
    if ((st = ap_gather_f32(core, cx->engine, a, xb, err)))
        return st;
    for (size_t i = 0; i < n; i++)
        if (!zero_test_keeps(zt, v[i]))
            xb[i] = ins->imm1.f;
    return ap_scatter_f32(core, cx->engine, d, xb, sr_stream_of(cx), err);
}

static int is_32bit_int(uint8_t dt) { return dt == TERN_DTYPE_INT32 || dt == TERN_DTYPE_UINT32; }

static tern_status exec_partition_reduce(tern_core *core, const exec_ctx *cx, const tern_instr *ins, tern_error *err)
{
    const tern_ap *d = &ins->ap[TERN_AP_DST], *a = &ins->ap[TERN_AP_IN0];
    uint32_t P = a->num_partitions;
    size_t F = (size_t)tern_ap_free_elems(a);
    tern_alu_op op = (tern_alu_op)ins->op0;
    float *xb = core_scratch(core, 0, (size_t)P * F), *ob = core_scratch(core, 1, F);
    if (!xb || !ob)
        return nomem(cx, ins, (size_t)P * F, err);
    tern_status st;
    int bit = op == TERN_ALU_BITWISE_OR || op == TERN_ALU_BITWISE_AND;
    if (bit || (op != TERN_ALU_AVERAGE && is_32bit_int(a->dtype) && is_32bit_int(d->dtype))) {
        int32_t *x = (int32_t *)(void *)xb, *o = (int32_t *)(void *)ob;
        if ((st = ap_gather_i32(core, cx->engine, a, x, err)))
            return st;
        int uns = a->dtype == TERN_DTYPE_UINT32;
        for (size_t f = 0; f < F; f++) {
            int32_t r = x[f];
            for (uint32_t p = 1; p < P; p++) {
                int32_t e = x[(size_t)p * F + f];
                if (uns && (op == TERN_ALU_MAX || op == TERN_ALU_MIN))
                    r = (op == TERN_ALU_MAX) == ((uint32_t)e > (uint32_t)r) ? e : r;
                else
                    r = alu_apply_i32(op, r, e);
            }
            o[f] = r;
        }
        return ap_scatter_i32(core, cx->engine, d, o, err);
    }
    if ((st = ap_gather_f32(core, cx->engine, a, xb, err)))
        return st;
    tern_alu_op fop = op == TERN_ALU_AVERAGE ? TERN_ALU_ADD : op;
    for (size_t f = 0; f < F; f++) {
        float r = xb[f];
        for (uint32_t p = 1; p < P; p++)
            r = alu_apply_f32(fop, r, xb[(size_t)p * F + f]);
        ob[f] = op == TERN_ALU_AVERAGE ? r / (float)P : r;
    }
    return ap_scatter_f32(core, cx->engine, d, ob, sr_stream_of(cx), err);
}

/* A cell's text for a message: printable ASCII, others as \xNN, cut at 40 bytes. */
static const char *cell_text(const int32_t *cell, size_t len, char *buf, size_t cap)
{
    size_t o = 0;
    for (size_t k = 0; k < len && o + 5 < cap && k < 40; k++) {
        unsigned ch = (unsigned)cell[k] & 0xffu;
        o += (size_t)snprintf(buf + o, cap - o, ch >= 0x20 && ch < 0x7f && ch != '"' ? "%c" : "\\x%02x", ch);
    }
    buf[o] = '\0';
    return buf;
}

static tern_status exec_text_parse(tern_core *core, const exec_ctx *cx, const tern_instr *ins, tern_error *err)
{
    const tern_ap *d = &ins->ap[TERN_AP_DST], *a = &ins->ap[TERN_AP_IN0];
    size_t n = (size_t)ap_elems(d), W = (size_t)ins->imm_i0, N = (size_t)tern_ap_free_elems(d);
    float *tb = core_scratch(core, 0, n * W), *ob = core_scratch(core, 1, n);
    if (!tb || !ob)
        return nomem(cx, ins, n * W, err);
    int32_t *t = (int32_t *)(void *)tb;
    tern_status st = ap_gather_i32(core, cx->engine, a, t, err);
    if (st)
        return st;
    char text[256];
    for (size_t e = 0; e < n; e++) {
        const int32_t *cell = t + e * W;
        size_t len = 0;
        while (len < W && (cell[len] & 0xff))
            text[len] = (char)cell[len], len++;
        if (tern_f32_parse(text, len, &ob[e])) {
            char show[200];
            return rules_fail(err, TERN_ERR_INVALID, cx, ins, TERN_AP_IN0,
                              "text cell (partition %zu, element %zu) \"%s\" is not a number", e / N, e % N,
                              cell_text(cell, len, show, sizeof show));
        }
    }
    return ap_scatter_f32(core, cx->engine, d, ob, sr_stream_of(cx), err);
}

static tern_status exec_text_format(tern_core *core, const exec_ctx *cx, const tern_instr *ins, tern_error *err)
{
    const tern_ap *d = &ins->ap[TERN_AP_DST], *a = &ins->ap[TERN_AP_IN0];
    size_t n = (size_t)ap_elems(a), W = (size_t)ins->imm_i0, N = (size_t)tern_ap_free_elems(a);
    float *xb = core_scratch(core, 0, n), *tb = core_scratch(core, 1, n * W);
    if (!xb || !tb)
        return nomem(cx, ins, n * W, err);
    tern_status st = ap_gather_f32(core, cx->engine, a, xb, err);
    if (st)
        return st;
    int32_t *t = (int32_t *)(void *)tb;
    for (size_t e = 0; e < n; e++) {
        char text[TERN_F32_TEXT_MAX];
        size_t len = tern_f32_format(xb[e], text);
        if (len > W)
            return rules_fail(err, TERN_ERR_INVALID, cx, ins, TERN_AP_DST,
                              "the text of element (partition %zu, element %zu) \"%s\" needs %zu bytes, the cell "
                              "holds %zu",
                              e / N, e % N, text, len, W);
        for (size_t k = 0; k < W; k++)
            t[e * W + k] = k < len ? (uint8_t)text[k] : 0;
    }
    return ap_scatter_i32(core, cx->engine, d, t, err);
}

/* ---- entry points (declared from the instruction table: rules.h, core_internal.h) ---- */

/* What rules_check_instr and the opcode's rules guarantee: an instruction of its family on GpSimdE, destination
 * and (but for iota, whose A is a pattern) input in SBUF; text conversions with a 1..255-byte cell, uint8 text and
 * fp32 numbers. */
static void gp_entry(const tern_core *core, const exec_ctx *cx, const tern_instr *ins, gp_op op)
{
    int text = op == GP_TEXT_PARSE || op == GP_TEXT_FORMAT;
    exec_assert_entry(cx, ins, text ? TERN_ISA_FAMILY_TEXT : TERN_ISA_FAMILY_GPSIMD);
    TERN_ASSERT(cx->engine == TERN_ENGINE_GPSIMD);
    exec_assert_operand(core, ins, TERN_AP_DST, EXEC_MEM_BIT(TERN_MEM_SBUF));
    if (op != GP_IOTA)
        exec_assert_operand(core, ins, TERN_AP_IN0, EXEC_MEM_BIT(TERN_MEM_SBUF));
    if (text) {
        const tern_ap *txt = &ins->ap[op == GP_TEXT_PARSE ? TERN_AP_IN0 : TERN_AP_DST];
        const tern_ap *num = &ins->ap[op == GP_TEXT_PARSE ? TERN_AP_DST : TERN_AP_IN0];
        TERN_ASSERT(ins->imm_i0 >= 1 && ins->imm_i0 <= 255);
        TERN_ASSERT(txt->dtype == TERN_DTYPE_UINT8 && num->dtype == TERN_DTYPE_FP32);
    }
}

static tern_status exec_gpsimd(tern_core *core, const exec_ctx *cx, const tern_instr *ins, gp_op op,
                               tern_error *err)
{
    gp_entry(core, cx, ins, op);
    tern_status st = dyn_bounds(core, cx, ins, err);
    if (st)
        return st;
    switch (op) {
    case GP_IOTA: return exec_iota(core, cx, ins, err);
    case GP_AFFINE_SELECT: return exec_affine_select(core, cx, ins, err);
    case GP_PARTITION_REDUCE: return exec_partition_reduce(core, cx, ins, err);
    case GP_TEXT_PARSE: return exec_text_parse(core, cx, ins, err);
    case GP_TEXT_FORMAT: return exec_text_format(core, cx, ins, err);
    }
    return TERN_OK;
}

#define GP_OP(ID)                                                                                                  \
    tern_status check_op_##ID(const tern_core *core, const exec_ctx *cx, const tern_instr *ins, size_t count,      \
                              tern_error *err)                                                                   \
    {                                                                                                              \
        (void)count;                                                                                               \
        return check_gpsimd(core, cx, ins, GP_##ID, err);                                                          \
    }                                                                                                              \
    tern_status exec_op_##ID(tern_core *core, const exec_ctx *cx, const tern_instr *ins, tern_error *err)         \
    {                                                                                                              \
        return exec_gpsimd(core, cx, ins, GP_##ID, err);                                                           \
    }

GP_OP(IOTA)
GP_OP(AFFINE_SELECT)
GP_OP(PARTITION_REDUCE)
GP_OP(TEXT_PARSE)
GP_OP(TEXT_FORMAT)
