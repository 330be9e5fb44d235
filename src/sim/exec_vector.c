/* VectorE (and the instructions it shares with GpSimdE and ScalarE): elementwise tensor_tensor / tensor_scalar /
 * scalar_tensor_tensor, free-axis reductions and scans, copies (plain, predicated, select), memset, batch-norm
 * statistics, reciprocal, the 32x32 transpose and max8. Arithmetic runs in fp32: operands are gathered to fp32,
 * each ALU operator rounds once (alu.c), and results are cast to the destination dtype with the core's rounding.
 * Bitvec operators run on the raw integer bit patterns (int32 after sign/zero extension) and need integer dtypes
 * everywhere; GpSimd tensor_tensor on int32/uint32 is exact integer arithmetic. Same-dtype moves (tensor_copy,
 * copy_predicated, transpose, select) move bits, never values, so NaN payloads and -0 survive.
 *
 * Operand encodings beyond the table (isa_table.def) — the single place they are defined:
 *  - tensor_scalar: s0 = imm0.f (imm0.i for bitvec ops) or, with TERN_FLAG_S0_AP, the [P,1] operand in slot in1;
 *    s1 = imm1 likewise or, with TERN_FLAG_S1_AP, slot in2. REV0: s0 op0 A; REV1: s1 op1 t.
 *  - scalar_tensor_tensor: D = (A op0 s0) op1 B; s0 = imm0.f or (TERN_FLAG_S0_AP) slot in2; REV0/REV1 as above.
 *  - tensor_reduce: imm_i0 = how many innermost free dims of A to reduce (1..ndims); fold r = x0, r = r op x_i in
 *    index order (subtract gives x0 - x1 - ...; logical ops start from (x0 != 0)); NEGATE multiplies by -1.
 *  - tensor_copy_predicated: REV0 copies where the predicate is zero.
 *  - tensor_tensor_scan: initial = imm0.f or (TERN_FLAG_S0_AP) the [P,1] operand in slot in2;
 *    t = REV0 ? (r op0 A[i]) : (A[i] op0 r); r = REV1 ? (B[i] op1 t) : (t op1 B[i]); D[i] = r.
 *  - memset: float destinations take imm0.f, integer destinations imm0.i (must fit the dtype).
 * Elementwise operands pair their elements in row-major order of each pattern: shapes need not match, element
 * counts must. Facts: trainium-arch.md §2.4, §4, §8; SDK nki/api/nki/isa/__init__.py docstrings. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "sim/rules.h"
#include "sim/host_threads.h"

/* ---- fp32 rows on chip, split over the core's host threads ----
 * tensor_tensor, tensor_scalar and scalar_tensor_tensor compute fp32 tiles in the destination rows (see each
 * one). Row p of the result reads only row p of the inputs (and scalar p), and the rows of different partitions
 * are different memories, so however the partitions are split over the threads, each element is computed by the
 * same operator calls as on one thread: the same bits. Tiles under ROWS_PARALLEL_ELEMS stay on the calling
 * thread (a fork-join costs more than they do). */
#define ROWS_PARALLEL_ELEMS (64u * 1024u)
enum { ROWS_TT, ROWS_TS, ROWS_STT };
typedef struct {
    int kind, copy_a;          /* copy_a: the destination rows are not the first input's: copy them first */
    uint32_t P;
    float *rd;
    const float *ra, *rb;      /* rb: the second input's rows (TT, STT) */
    size_t sd, sa, sb, N;      /* row strides in floats; elements per row */
    tern_alu_op op0, op1;
    int rev0, rev1;
    const float *s0, *s1;      /* per-partition scalars, or NULL for imm0 / imm1 */
    float imm0, imm1;
} rows_job;

static void rows_part(void *ctx, unsigned part, unsigned nparts)
{
    const rows_job *j = ctx;
    uint32_t p0 = (uint32_t)((uint64_t)j->P * part / nparts), p1 = (uint32_t)((uint64_t)j->P * (part + 1) / nparts);
    for (uint32_t p = p0; p < p1; p++) {
        float *o = j->rd + (size_t)p * j->sd;
        if (j->copy_a)
            memcpy(o, j->ra + (size_t)p * j->sa, j->N * 4);
        switch (j->kind) {
        case ROWS_TT:
            alu_apply_f32_vv(j->op0, o, j->rb + (size_t)p * j->sb, j->N);
            break;
        case ROWS_TS:
            alu_apply_f32_vs(j->op0, o, j->s0 ? j->s0[p] : j->imm0, j->rev0, j->N);
            alu_apply_f32_vs(j->op1, o, j->s1 ? j->s1[p] : j->imm1, j->rev1, j->N);
            break;
        default: /* ROWS_STT */
            alu_apply_f32_vs(j->op0, o, j->s0 ? j->s0[p] : j->imm0, j->rev0, j->N);
            alu_apply_f32_vvr(j->op1, o, j->rb + (size_t)p * j->sb, j->rev1, j->N);
            break;
        }
    }
}

static void rows_run(tern_core *core, const rows_job *j)
{
    unsigned parts = 1;
    if ((uint64_t)j->P * j->N >= ROWS_PARALLEL_ELEMS) {
        parts = pool_threads(core_pool(core));
        if (parts > j->P)
            parts = j->P;
    }
    if (!core_may_split())
        parts = 1;
    if (parts <= 1)
        rows_part((void *)j, 0, 1);
    else
        pool_run(core_pool(core), rows_part, (void *)j, parts);
}

/* ---- shared rule helpers ---- */

static int dt_is_int(uint8_t dt) { return !tern_dtype_is_float((tern_dtype)dt); }
static const char *dtn(uint8_t dt) { return tern_dtype_name((tern_dtype)dt); }
static const char *opn(unsigned op) { return tern_alu_name((tern_alu_op)op); }

static unsigned reach_of(const exec_ctx *cx)
{
    return cx->engine == TERN_ENGINE_GPSIMD ? REACH_SBUF : (REACH_SBUF | REACH_PSUM);
}

static tern_status need_ap(const tern_core *core, const exec_ctx *cx, const tern_instr *ins, int slot,
                           tern_error *err)
{
    return rules_check_ap(core, cx, ins, slot, reach_of(cx), err);
}

/* Same partition count and element count per partition as slot `ref`. */
static tern_status need_same_shape(const exec_ctx *cx, const tern_instr *ins, int slot, int ref, tern_error *err)
{
    const tern_ap *a = &ins->ap[slot], *r = &ins->ap[ref];
    if (a->num_partitions != r->num_partitions)
        return rules_fail(err, TERN_ERR_INVALID, cx, ins, slot, "%u partitions, operand %s has %u (must be equal)",
                          a->num_partitions, operand_name(ref), r->num_partitions);
    if (tern_ap_free_elems(a) != tern_ap_free_elems(r))
        return rules_fail(err, TERN_ERR_INVALID, cx, ins, slot,
                          "%llu elements per partition, operand %s has %llu (must be equal)",
                          (unsigned long long)tern_ap_free_elems(a), operand_name(ref),
                          (unsigned long long)tern_ap_free_elems(r));
    return TERN_OK;
}

/* A per-partition scalar operand: [P,1] with P = partitions of slot `ref`. */
static tern_status need_column(const exec_ctx *cx, const tern_instr *ins, int slot, int ref, tern_error *err)
{
    const tern_ap *a = &ins->ap[slot];
    if (a->num_partitions != ins->ap[ref].num_partitions || tern_ap_free_elems(a) != 1)
        return rules_fail(err, TERN_ERR_INVALID, cx, ins, slot,
                          "per-partition scalar must be [%u, 1], is [%u, %llu]", ins->ap[ref].num_partitions,
                          a->num_partitions, (unsigned long long)tern_ap_free_elems(a));
    return TERN_OK;
}

static tern_status need_unused(const exec_ctx *cx, const tern_instr *ins, int slot, const char *why, tern_error *err)
{
    if (ins->ap[slot].ndims != 0)
        return rules_fail(err, TERN_ERR_INVALID, cx, ins, slot, "operand is set but unused (%s)", why);
    return TERN_OK;
}

static tern_status need_op(const exec_ctx *cx, const tern_instr *ins, const char *field, unsigned op, tern_error *err)
{
    if (op >= TERN_ALU_COUNT)
        return rules_fail(err, TERN_ERR_INVALID, cx, ins, -1, "%s: ALU operator %u unknown (0..%d)", field, op,
                          TERN_ALU_COUNT - 1);
    return TERN_OK;
}

static tern_status need_int(const exec_ctx *cx, const tern_instr *ins, int slot, const char *why, tern_error *err)
{
    uint8_t dt = ins->ap[slot].dtype;
    if (!dt_is_int(dt))
        return rules_fail(err, TERN_ERR_INVALID, cx, ins, slot, "dtype %s must be an integer type (%s)", dtn(dt), why);
    return TERN_OK;
}

static tern_status not_both_psum(const exec_ctx *cx, const tern_instr *ins, int s1, int s2, tern_error *err)
{
    if (ins->ap[s1].mem == TERN_MEM_PSUM && ins->ap[s2].mem == TERN_MEM_PSUM)
        return rules_fail(err, TERN_ERR_INVALID, cx, ins, s2,
                          "in PSUM, and so is operand %s: at most one of the two inputs may be in PSUM",
                          operand_name(s1));
    return TERN_OK;
}

static int is_unary(unsigned op) { return op == TERN_ALU_ABS || op == TERN_ALU_RSQRT; }

static int is_reduce_op(unsigned op)
{
    switch ((tern_alu_op)op) {
    case TERN_ALU_ADD:
    case TERN_ALU_SUBTRACT:
    case TERN_ALU_MULT:
    case TERN_ALU_MAX:
    case TERN_ALU_MIN:
    case TERN_ALU_LOGICAL_AND:
    case TERN_ALU_LOGICAL_OR:
    case TERN_ALU_LOGICAL_XOR:
    case TERN_ALU_BITWISE_AND:
    case TERN_ALU_BITWISE_OR:
    case TERN_ALU_BITWISE_XOR: return 1;
    case TERN_ALU_BYPASS:
    case TERN_ALU_DIVIDE:
    case TERN_ALU_ABS_MAX:
    case TERN_ALU_ABS_MIN:
    case TERN_ALU_POW:
    case TERN_ALU_IS_EQ:
    case TERN_ALU_NOT_EQ:
    case TERN_ALU_IS_GT:
    case TERN_ALU_IS_GE:
    case TERN_ALU_IS_LT:
    case TERN_ALU_IS_LE:
    case TERN_ALU_SHIFT_LEFT:
    case TERN_ALU_SHIFT_RIGHT:
    case TERN_ALU_AVERAGE:
    case TERN_ALU_MOD:
    case TERN_ALU_RSQRT:
    case TERN_ALU_ABS:
    case TERN_ALU_COUNT: return 0;
    }
    return 0; /* outside the enum: need_op refuses it by name */
}

static int is_32bit_int(uint8_t dt) { return dt == TERN_DTYPE_INT32 || dt == TERN_DTYPE_UINT32; }

/* ---- per-opcode rules ---- */

static tern_status check_tensor_tensor(const tern_core *core, const exec_ctx *cx, const tern_instr *ins,
                                       tern_error *err)
{
    tern_status st;
    if ((st = need_ap(core, cx, ins, TERN_AP_DST, err)) || (st = need_ap(core, cx, ins, TERN_AP_IN0, err)) ||
        (st = need_ap(core, cx, ins, TERN_AP_IN1, err)) || (st = need_op(cx, ins, "op0", ins->op0, err)))
        return st;
    if (is_unary(ins->op0))
        return rules_fail(err, TERN_ERR_INVALID, cx, ins, -1, "op0 %s is unary; tensor_tensor needs a binary operator",
                          opn(ins->op0));
    if (ins->op0 == TERN_ALU_POW && cx->engine != TERN_ENGINE_GPSIMD)
        return rules_fail(err, TERN_ERR_UNSUPPORTED, cx, ins, -1,
                          "op0 pow runs only on the GpSimd engine (NKI tensor_tensor: nl.power runs on GpSimd)");
    if ((st = not_both_psum(cx, ins, TERN_AP_IN0, TERN_AP_IN1, err)) ||
        (st = need_same_shape(cx, ins, TERN_AP_IN0, TERN_AP_DST, err)) ||
        (st = need_same_shape(cx, ins, TERN_AP_IN1, TERN_AP_DST, err)))
        return st;
    if (alu_is_bitwise((tern_alu_op)ins->op0))
        for (int s = TERN_AP_DST; s <= TERN_AP_IN1; s++)
            if ((st = need_int(cx, ins, s, "bitvec operators work on integer bit patterns", err)))
                return st;
    return TERN_OK;
}

static tern_status check_tensor_scalar(const tern_core *core, const exec_ctx *cx, const tern_instr *ins,
                                       tern_error *err)
{
    tern_status st;
    if ((st = need_ap(core, cx, ins, TERN_AP_DST, err)) || (st = need_ap(core, cx, ins, TERN_AP_IN0, err)) ||
        (st = need_op(cx, ins, "op0", ins->op0, err)) || (st = need_op(cx, ins, "op1", ins->op1, err)) ||
        (st = need_same_shape(cx, ins, TERN_AP_IN0, TERN_AP_DST, err)))
        return st;
    int b0 = alu_is_bitwise((tern_alu_op)ins->op0), b1 = alu_is_bitwise((tern_alu_op)ins->op1);
    int bitvec = b0 || b1;
    if (bitvec && !((b0 || ins->op0 == TERN_ALU_BYPASS) && (b1 || ins->op1 == TERN_ALU_BYPASS)))
        return rules_fail(err, TERN_ERR_INVALID, cx, ins, -1,
                          "op0 %s and op1 %s mix bitvec and arithmetic operators (both must be of one class)",
                          opn(ins->op0), opn(ins->op1));
    if (bitvec && cx->engine != TERN_ENGINE_VECTOR)
        return rules_fail(err, TERN_ERR_UNSUPPORTED, cx, ins, -1,
                          "bitvec operators (%s, %s) run only on the Vector engine, not %s", opn(ins->op0),
                          opn(ins->op1), tern_engine_name(cx->engine));
    if (cx->engine == TERN_ENGINE_SCALAR && core->cfg.generation < 4) {
        int ok = (ins->op0 == TERN_ALU_MULT && (ins->op1 == TERN_ALU_ADD || ins->op1 == TERN_ALU_BYPASS)) ||
                 (ins->op0 == TERN_ALU_ADD && ins->op1 == TERN_ALU_BYPASS);
        if (!ok)
            return rules_fail(err, TERN_ERR_UNSUPPORTED, cx, ins, -1,
                              "ScalarE tensor_scalar on NeuronCore-v%d supports only (mult, add), (mult, bypass), "
                              "(add, bypass); got (%s, %s)",
                              core->cfg.generation, opn(ins->op0), opn(ins->op1));
    }
    if (cx->engine == TERN_ENGINE_GPSIMD && ins->op0 != TERN_ALU_RSQRT)
        return rules_fail(err, TERN_ERR_UNSUPPORTED, cx, ins, -1,
                          "GpSimd tensor_scalar is documented only for op0 rsqrt; got op0 %s", opn(ins->op0));
    if (bitvec)
        for (int s = TERN_AP_DST; s <= TERN_AP_IN0; s++)
            if ((st = need_int(cx, ins, s, "bitvec operators work on integer bit patterns", err)))
                return st;
    static const struct { uint16_t flag; int slot; const char *name; } sc[2] = {
        {TERN_FLAG_S0_AP, TERN_AP_IN1, "s0"}, {TERN_FLAG_S1_AP, TERN_AP_IN2, "s1"}};
    for (int k = 0; k < 2; k++) {
        if (!(ins->flags & sc[k].flag)) {
            if ((st = need_unused(cx, ins, sc[k].slot, k ? "s1 is imm1 without TERN_FLAG_S1_AP"
                                                         : "s0 is imm0 without TERN_FLAG_S0_AP", err)))
                return st;
            continue;
        }
        if ((st = need_ap(core, cx, ins, sc[k].slot, err)) || (st = need_column(cx, ins, sc[k].slot, TERN_AP_IN0, err)))
            return st;
        uint8_t dt = ins->ap[sc[k].slot].dtype;
        if (bitvec && !dt_is_int(dt))
            return rules_fail(err, TERN_ERR_INVALID, cx, ins, sc[k].slot,
                              "%s operand dtype %s must be an integer type for bitvec operators", sc[k].name, dtn(dt));
        if (!bitvec && dt != TERN_DTYPE_FP32)
            return rules_fail(err, TERN_ERR_INVALID, cx, ins, sc[k].slot,
                              "%s operand dtype %s must be fp32 for arithmetic operators", sc[k].name, dtn(dt));
    }
    return TERN_OK;
}

/* scalar_tensor_tensor and tensor_tensor_scan share their operand rules: two arithmetic operators, two tensor
 * inputs shaped like the output (not both in PSUM), and a third operand (s0 / the scan's initial value) that is
 * either an fp32 column (TERN_FLAG_S0_AP) or imm0. */
static tern_status check_two_op_tensors(const tern_core *core, const exec_ctx *cx, const tern_instr *ins,
                                        const char *opname, const char *third, tern_error *err)
{
    tern_status st;
    if ((st = need_ap(core, cx, ins, TERN_AP_DST, err)) || (st = need_ap(core, cx, ins, TERN_AP_IN0, err)) ||
        (st = need_ap(core, cx, ins, TERN_AP_IN1, err)) || (st = need_op(cx, ins, "op0", ins->op0, err)) ||
        (st = need_op(cx, ins, "op1", ins->op1, err)))
        return st;
    if (alu_is_bitwise((tern_alu_op)ins->op0) || alu_is_bitwise((tern_alu_op)ins->op1))
        return rules_fail(err, TERN_ERR_INVALID, cx, ins, -1, "%s takes arithmetic operators only; got (%s, %s)",
                          opname, opn(ins->op0), opn(ins->op1));
    if ((st = not_both_psum(cx, ins, TERN_AP_IN0, TERN_AP_IN1, err)) ||
        (st = need_same_shape(cx, ins, TERN_AP_IN0, TERN_AP_DST, err)) ||
        (st = need_same_shape(cx, ins, TERN_AP_IN1, TERN_AP_DST, err)))
        return st;
    if (ins->flags & TERN_FLAG_S0_AP) {
        if ((st = need_ap(core, cx, ins, TERN_AP_IN2, err)) || (st = need_column(cx, ins, TERN_AP_IN2, TERN_AP_IN0, err)))
            return st;
        if (ins->ap[TERN_AP_IN2].dtype != TERN_DTYPE_FP32)
            return rules_fail(err, TERN_ERR_INVALID, cx, ins, TERN_AP_IN2, "%s operand dtype %s must be fp32", third,
                              dtn(ins->ap[TERN_AP_IN2].dtype));
        return TERN_OK;
    }
    char why[64];
    snprintf(why, sizeof why, "%s is imm0 without TERN_FLAG_S0_AP", third);
    return need_unused(cx, ins, TERN_AP_IN2, why, err);
}

static tern_status check_stt(const tern_core *core, const exec_ctx *cx, const tern_instr *ins, tern_error *err)
{
    return check_two_op_tensors(core, cx, ins, "scalar_tensor_tensor", "s0", err);
}

/* Elements per partition of A's outer (kept) dims for tensor_reduce. */
static uint64_t reduce_outer(const tern_ap *a, int k)
{
    uint64_t n = 1;
    for (int i = 0; i < (int)a->ndims - k; i++)
        n *= a->dims[i].num;
    return n;
}

static tern_status check_tensor_reduce(const tern_core *core, const exec_ctx *cx, const tern_instr *ins,
                                       tern_error *err)
{
    tern_status st;
    if ((st = need_ap(core, cx, ins, TERN_AP_DST, err)) || (st = need_ap(core, cx, ins, TERN_AP_IN0, err)) ||
        (st = need_op(cx, ins, "op0", ins->op0, err)))
        return st;
    if (!is_reduce_op(ins->op0))
        return rules_fail(err, TERN_ERR_INVALID, cx, ins, -1,
                          "op0 %s is not a legal reduction operator (add, subtract, mult, max, min, logical_and/or/"
                          "xor, bitwise_and/or/xor)",
                          opn(ins->op0));
    const tern_ap *a = &ins->ap[TERN_AP_IN0], *d = &ins->ap[TERN_AP_DST];
    if (ins->imm_i0 < 1 || ins->imm_i0 > (int32_t)a->ndims)
        return rules_fail(err, TERN_ERR_RANGE, cx, ins, TERN_AP_IN0,
                          "reduce axes imm_i0 = %d must be 1..%u (innermost free dims of in0)", ins->imm_i0, a->ndims);
    if (d->num_partitions != a->num_partitions)
        return rules_fail(err, TERN_ERR_INVALID, cx, ins, TERN_AP_DST, "%u partitions, operand in0 has %u (must be equal)",
                          d->num_partitions, a->num_partitions);
    uint64_t outer = reduce_outer(a, ins->imm_i0);
    if (tern_ap_free_elems(d) != outer)
        return rules_fail(err, TERN_ERR_INVALID, cx, ins, TERN_AP_DST,
                          "%llu elements per partition; reducing the innermost %d dims of in0 leaves %llu",
                          (unsigned long long)tern_ap_free_elems(d), ins->imm_i0, (unsigned long long)outer);
    if (alu_is_bitwise((tern_alu_op)ins->op0)) {
        if ((st = need_int(cx, ins, TERN_AP_DST, "bitvec reduction", err)) ||
            (st = need_int(cx, ins, TERN_AP_IN0, "bitvec reduction", err)))
            return st;
        if (ins->flags & TERN_FLAG_NEGATE)
            return rules_fail(err, TERN_ERR_INVALID, cx, ins, -1, "negate applies only to arithmetic reductions, not %s",
                              opn(ins->op0));
    }
    return TERN_OK;
}

static tern_status check_tensor_copy(const tern_core *core, const exec_ctx *cx, const tern_instr *ins,
                                     tern_error *err)
{
    tern_status st;
    if (cx->engine == TERN_ENGINE_SCALAR && core->cfg.generation < 3)
        return rules_fail(err, TERN_ERR_UNSUPPORTED, cx, ins, -1,
                          "tensor_copy on the Scalar engine needs NeuronCore-v3 or later (this core is v%d; use "
                          "activation with func copy)",
                          core->cfg.generation);
    if ((st = need_ap(core, cx, ins, TERN_AP_DST, err)) || (st = need_ap(core, cx, ins, TERN_AP_IN0, err)))
        return st;
    return need_same_shape(cx, ins, TERN_AP_IN0, TERN_AP_DST, err);
}

static tern_status check_copy_predicated(const tern_core *core, const exec_ctx *cx, const tern_instr *ins,
                                         tern_error *err)
{
    tern_status st;
    if ((st = need_ap(core, cx, ins, TERN_AP_DST, err)) || (st = need_ap(core, cx, ins, TERN_AP_IN0, err)) ||
        (st = need_ap(core, cx, ins, TERN_AP_IN1, err)) ||
        (st = not_both_psum(cx, ins, TERN_AP_IN0, TERN_AP_IN1, err)) ||
        (st = need_same_shape(cx, ins, TERN_AP_IN0, TERN_AP_DST, err)) ||
        (st = need_same_shape(cx, ins, TERN_AP_IN1, TERN_AP_DST, err)))
        return st;
    uint8_t pd = ins->ap[TERN_AP_IN1].dtype;
    if (pd != TERN_DTYPE_UINT8 && pd != TERN_DTYPE_UINT16 && pd != TERN_DTYPE_UINT32)
        return rules_fail(err, TERN_ERR_INVALID, cx, ins, TERN_AP_IN1, "predicate dtype %s must be uint8, uint16 or uint32",
                          dtn(pd));
    if (ins->ap[TERN_AP_IN0].dtype != ins->ap[TERN_AP_DST].dtype)
        return rules_fail(err, TERN_ERR_INVALID, cx, ins, TERN_AP_IN0, "dtype %s must equal the destination's %s",
                          dtn(ins->ap[TERN_AP_IN0].dtype), dtn(ins->ap[TERN_AP_DST].dtype));
    return TERN_OK;
}

static int int_range(uint8_t dt, int64_t *lo, int64_t *hi)
{
    switch ((tern_dtype)dt) {
    case TERN_DTYPE_INT8: *lo = INT8_MIN; *hi = INT8_MAX; return 1;
    case TERN_DTYPE_UINT8: *lo = 0; *hi = UINT8_MAX; return 1;
    case TERN_DTYPE_INT16: *lo = INT16_MIN; *hi = INT16_MAX; return 1;
    case TERN_DTYPE_UINT16: *lo = 0; *hi = UINT16_MAX; return 1;
    case TERN_DTYPE_INT32: *lo = INT32_MIN; *hi = INT32_MAX; return 1;
    case TERN_DTYPE_UINT32: *lo = INT32_MIN; *hi = INT32_MAX; return 1; /* imm0.i is the raw 32-bit pattern */
    case TERN_DTYPE_FP32:
    case TERN_DTYPE_TF32:
    case TERN_DTYPE_BF16:
    case TERN_DTYPE_FP16:
    case TERN_DTYPE_FP8_E4M3:
    case TERN_DTYPE_FP8_E5M2:
    case TERN_DTYPE_FP8_E4M3_NEURON:
    case TERN_DTYPE_COUNT: return 0;
    }
    return 0; /* a dtype outside the enum: rules_check_ap refuses it first */
}

static tern_status check_memset(const tern_core *core, const exec_ctx *cx, const tern_instr *ins, tern_error *err)
{
    tern_status st;
    if ((st = need_ap(core, cx, ins, TERN_AP_DST, err)))
        return st;
    int64_t lo, hi;
    uint8_t dt = ins->ap[TERN_AP_DST].dtype;
    if (int_range(dt, &lo, &hi) && (ins->imm0.i < lo || ins->imm0.i > hi))
        return rules_fail(err, TERN_ERR_RANGE, cx, ins, TERN_AP_DST, "memset value %d does not fit dtype %s [%lld, %lld]",
                          ins->imm0.i, dtn(dt), (long long)lo, (long long)hi);
    return TERN_OK;
}

static tern_status check_select(const tern_core *core, const exec_ctx *cx, const tern_instr *ins, tern_error *err)
{
    tern_status st;
    for (int s = TERN_AP_DST; s <= TERN_AP_IN2; s++)
        if ((st = need_ap(core, cx, ins, s, err)))
            return st;
    for (int s = TERN_AP_IN0; s <= TERN_AP_IN2; s++)
        if ((st = need_same_shape(cx, ins, s, TERN_AP_DST, err)))
            return st;
    return TERN_OK;
}

static tern_status check_bn(const tern_core *core, const exec_ctx *cx, const tern_instr *ins, tern_error *err)
{
    tern_status st;
    if ((st = need_ap(core, cx, ins, TERN_AP_DST, err)) || (st = need_ap(core, cx, ins, TERN_AP_IN0, err)))
        return st;
    const tern_ap *a = &ins->ap[TERN_AP_IN0], *d = &ins->ap[TERN_AP_DST];
    uint64_t F = tern_ap_free_elems(a), want = ins->opcode == TERN_OP_BN_STATS ? 6 : 2;
    if (d->num_partitions != a->num_partitions)
        return rules_fail(err, TERN_ERR_INVALID, cx, ins, TERN_AP_DST, "%u partitions, operand in0 has %u (must be equal)",
                          d->num_partitions, a->num_partitions);
    if (ins->opcode == TERN_OP_BN_STATS) {
        if (F > core->cfg.bn_stats_free_max)
            return rules_fail(err, TERN_ERR_RANGE, cx, ins, TERN_AP_IN0,
                              "bn_stats free size %llu exceeds %u elements per partition", (unsigned long long)F,
                              core->cfg.bn_stats_free_max);
    } else if (F % 3 != 0) {
        return rules_fail(err, TERN_ERR_INVALID, cx, ins, TERN_AP_IN0,
                          "bn_aggr input has %llu elements per partition, not a multiple of 3 (count, mean, "
                          "count*var tuples)",
                          (unsigned long long)F);
    }
    if (tern_ap_free_elems(d) != want)
        return rules_fail(err, TERN_ERR_INVALID, cx, ins, TERN_AP_DST, "%llu elements per partition, must be %llu",
                          (unsigned long long)tern_ap_free_elems(d), (unsigned long long)want);
    return TERN_OK;
}

static tern_status check_unary(const tern_core *core, const exec_ctx *cx, const tern_instr *ins, tern_error *err)
{
    tern_status st;
    if ((st = need_ap(core, cx, ins, TERN_AP_DST, err)) || (st = need_ap(core, cx, ins, TERN_AP_IN0, err)))
        return st;
    return need_same_shape(cx, ins, TERN_AP_IN0, TERN_AP_DST, err);
}

static tern_status check_transpose(const tern_core *core, const exec_ctx *cx, const tern_instr *ins, tern_error *err)
{
    tern_status st;
    if ((st = need_ap(core, cx, ins, TERN_AP_DST, err)) || (st = need_ap(core, cx, ins, TERN_AP_IN0, err)))
        return st;
    const tern_ap *a = &ins->ap[TERN_AP_IN0], *d = &ins->ap[TERN_AP_DST];
    uint64_t F = tern_ap_free_elems(a), lim = core->cfg.vector_transpose_max;
    if (a->num_partitions > lim || F > lim)
        return rules_fail(err, TERN_ERR_RANGE, cx, ins, TERN_AP_IN0, "transpose input [%u, %llu] exceeds [%llu, %llu]",
                          a->num_partitions, (unsigned long long)F, (unsigned long long)lim, (unsigned long long)lim);
    if (d->num_partitions != F || tern_ap_free_elems(d) != a->num_partitions)
        return rules_fail(err, TERN_ERR_INVALID, cx, ins, TERN_AP_DST, "shape [%u, %llu] must be [%llu, %u]",
                          d->num_partitions, (unsigned long long)tern_ap_free_elems(d), (unsigned long long)F,
                          a->num_partitions);
    if (d->dtype != a->dtype)
        return rules_fail(err, TERN_ERR_INVALID, cx, ins, TERN_AP_DST, "dtype %s must equal the input's %s", dtn(d->dtype),
                          dtn(a->dtype));
    return TERN_OK;
}

static tern_status check_max8(const tern_core *core, const exec_ctx *cx, const tern_instr *ins, tern_error *err)
{
    tern_status st;
    if ((st = need_ap(core, cx, ins, TERN_AP_DST, err)) || (st = need_ap(core, cx, ins, TERN_AP_IN0, err)))
        return st;
    const tern_ap *a = &ins->ap[TERN_AP_IN0], *d = &ins->ap[TERN_AP_DST];
    uint64_t F = tern_ap_free_elems(a);
    if (F < 8 || F > 16384)
        return rules_fail(err, TERN_ERR_RANGE, cx, ins, TERN_AP_IN0, "max8 input has %llu elements per partition (8..16384)",
                          (unsigned long long)F);
    if (d->num_partitions != a->num_partitions)
        return rules_fail(err, TERN_ERR_INVALID, cx, ins, TERN_AP_DST, "%u partitions, operand in0 has %u (must be equal)",
                          d->num_partitions, a->num_partitions);
    if (tern_ap_free_elems(d) != 8)
        return rules_fail(err, TERN_ERR_INVALID, cx, ins, TERN_AP_DST, "%llu elements per partition, must be exactly 8",
                          (unsigned long long)tern_ap_free_elems(d));
    return TERN_OK;
}

static tern_status check_scan(const tern_core *core, const exec_ctx *cx, const tern_instr *ins, tern_error *err)
{
    return check_two_op_tensors(core, cx, ins, "tensor_tensor_scan", "initial", err);
}

/* ---- execution helpers ---- */

/* Run-time bounds for operands whose address depends on a register (static ones were checked before the run). */
static tern_status dyn_bounds(tern_core *core, const exec_ctx *cx, const tern_instr *ins, tern_error *err)
{
    for (int s = 0; s < TERN_INSTR_OPERANDS; s++) {
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

static tern_status nomem(const exec_ctx *cx, const tern_instr *ins, size_t n, tern_error *err)
{
    return rules_fail(err, TERN_ERR_NOMEM, cx, ins, -1, "out of host memory for %zu elements", n);
}

static tern_status gather_f(tern_core *core, const exec_ctx *cx, const tern_instr *ins, int slot, int scr, float **out,
                            tern_error *err)
{
    size_t n = (size_t)ap_elems(&ins->ap[slot]);
    float *b = core_scratch(core, scr, n);
    *out = b;
    if (!b)
        return nomem(cx, ins, n, err);
    return ap_gather_f32(core, cx->engine, &ins->ap[slot], b, err);
}

static tern_status gather_i(tern_core *core, const exec_ctx *cx, const tern_instr *ins, const tern_ap *ap, int scr,
                            int32_t **out, tern_error *err)
{
    size_t n = (size_t)ap_elems(ap);
    float *b = core_scratch(core, scr, n);
    if (!b)
        return nomem(cx, ins, n, err);
    *out = (int32_t *)(void *)b;
    return ap_gather_i32(core, cx->engine, ap, *out, err);
}

/* The same pattern read as unsigned integers of the same width: gather/scatter through it moves raw bits. */
static tern_ap raw_view(const tern_ap *ap)
{
    tern_ap r = *ap;
    size_t es = tern_dtype_size((tern_dtype)ap->dtype); /* 1, 2 or 4 bytes */
    r.dtype = es == 1 ? TERN_DTYPE_UINT8 : es == 2 ? TERN_DTYPE_UINT16 : TERN_DTYPE_UINT32;
    return r;
}

static tern_status put_f(tern_core *core, const exec_ctx *cx, const tern_instr *ins, int slot, const float *v,
                         tern_error *err)
{
    return ap_scatter_f32(core, cx->engine, &ins->ap[slot], v, sr_stream_of(cx), err);
}

/* Signed or unsigned max/min for GpSimd's native integer path. */
static int32_t int_op(tern_alu_op op, int32_t a, int32_t b, int is_unsigned)
{
    if (is_unsigned && (op == TERN_ALU_MAX || op == TERN_ALU_MIN)) {
        uint32_t x = (uint32_t)a, y = (uint32_t)b;
        return (op == TERN_ALU_MAX) == (x > y) ? a : b;
    }
    return alu_apply_i32(op, a, b);
}

/* ---- executors ---- */

/* Two on-chip row sets of n fp32 elements per partition (ap_onchip_rows): 0 when they are the same rows, 1 when
 * no row of one overlaps a row of the other, 2 otherwise. */
static int rows_relation(const tern_core *core, const tern_ap *x, const uint8_t *xr, size_t xs, const tern_ap *y,
                         const uint8_t *yr, size_t ys, size_t n)
{
    return onchip_rows_relation(core, x, xr, xs, n * 4, y, yr, ys, n * 4);
}

/* Does the window (w: nr x nc elements at steps sr, sc in each partition, fp32) share no byte with the rows x
 * (xbytes per partition)? */
static int window_apart(const tern_core *core, const tern_ap *x, const uint8_t *xr, size_t xs, size_t xbytes,
                        const tern_ap *w, const uint8_t *wr, size_t ws, uint32_t nr, int32_t sr, uint32_t nc,
                        int32_t sc)
{
    int64_t er = (int64_t)(nr - 1) * sr, ec = (int64_t)(nc - 1) * sc;
    int64_t lo = (er < 0 ? er : 0) + (ec < 0 ? ec : 0), hi = (er > 0 ? er : 0) + (ec > 0 ? ec : 0);
    return onchip_rows_relation(core, x, xr, xs, xbytes, w, wr + lo * 4, ws, (size_t)(hi - lo + 1) * 4) == 1;
}

/* scalar_tensor_tensor's first input a as an fp32 window of at most two dimensions per partition (a depthwise
 * convolution's tap from the padded input tile), n elements, 4-byte aligned, sharing no byte with the destination
 * rows rd (sd floats apart): its tap (the scalar left unset), rows, columns and partition stride in floats; 0 when
 * it is not one. */
static int stt_window(const tern_core *core, tern_engine e, const tern_ap *a, const tern_ap *d, const float *rd,
                      size_t sd, size_t n, stt_tap *tap, uint32_t *nr, uint32_t *nc, size_t *ps)
{
    uint32_t wnr, wnc;
    int32_t wsr, wsc;
    size_t wps;
    uint8_t *win;
    if (a->dtype != TERN_DTYPE_FP32 || !(win = ap_onchip_2d(core, e, a, &wnr, &wsr, &wnc, &wsc, &wps)) ||
        (size_t)wnr * wnc != n || (uintptr_t)win % 4 != 0 || wps % 4 != 0 ||
        !window_apart(core, d, (const uint8_t *)rd, sd * 4, n * 4, a, win, wps, wnr, wsr, wnc, wsc))
        return 0;
    *tap = (stt_tap){(const float *)(const void *)win, wsr, wsc, NULL, 0.0f};
    *nr = wnr;
    *nc = wnc;
    *ps = wps / 4;
    return 1;
}

/* fp32 operands that are one contiguous, 4-byte aligned run of n elements per partition: their partition 0 rows
 * and the stride between rows (in floats); NULL otherwise. */
static float *f32_rows(const tern_core *core, tern_engine e, const tern_ap *ap, size_t n, size_t *stride)
{
    size_t len = 0, ps = 0;
    uint8_t *r = ap->dtype == TERN_DTYPE_FP32 ? ap_onchip_rows(core, e, ap, &len, &ps) : NULL;
    if (!r || len != n || (uintptr_t)r % 4 != 0 || ps % 4 != 0)
        return NULL;
    *stride = ps / 4;
    return (float *)(void *)r;
}

static tern_status exec_tensor_tensor(tern_core *core, const exec_ctx *cx, const tern_instr *ins, tern_error *err)
{
    const tern_ap *a = &ins->ap[TERN_AP_IN0], *b = &ins->ap[TERN_AP_IN1], *d = &ins->ap[TERN_AP_DST];
    tern_alu_op op = (tern_alu_op)ins->op0;
    size_t n = (size_t)ap_elems(d);
    tern_status st;
    int native = cx->engine == TERN_ENGINE_GPSIMD && is_32bit_int(a->dtype) && is_32bit_int(b->dtype) &&
                 is_32bit_int(d->dtype) &&
                 (op == TERN_ALU_ADD || op == TERN_ALU_SUBTRACT || op == TERN_ALU_MULT || op == TERN_ALU_MAX ||
                  op == TERN_ALU_MIN);
    if (alu_is_bitwise(op) || native) {
        int32_t *x = NULL, *y = NULL;
        if ((st = gather_i(core, cx, ins, a, 0, &x, err)) || (st = gather_i(core, cx, ins, b, 1, &y, err)))
            return st;
        int uns = a->dtype == TERN_DTYPE_UINT32 && b->dtype == TERN_DTYPE_UINT32;
        for (size_t i = 0; i < n; i++)
            x[i] = int_op(op, x[i], y[i], uns);
        return ap_scatter_i32(core, cx->engine, d, x, err);
    }
    /* fp32 rows on chip (ResNet-50's residual adds, [128, 7..56] per instruction): computed in the destination rows
     * themselves, without gathering both inputs into dense buffers and scattering the result (fp32 gathers and
     * scatters are plain copies, so the bits are the same). The destination must be the first input's rows, or
     * overlap neither input; anything else keeps the read-everything-then-write path. */
    size_t N = (size_t)tern_ap_free_elems(d), sa = 0, sb = 0, sd = 0;
    uint32_t P = d->num_partitions;
    float *ra, *rb, *rd;
    if (a->num_partitions == P && b->num_partitions == P && (rd = f32_rows(core, cx->engine, d, N, &sd)) &&
        (ra = f32_rows(core, cx->engine, a, N, &sa)) && (rb = f32_rows(core, cx->engine, b, N, &sb))) {
        int da = rows_relation(core, d, (uint8_t *)rd, sd * 4, a, (uint8_t *)ra, sa * 4, N);
        int db = rows_relation(core, d, (uint8_t *)rd, sd * 4, b, (uint8_t *)rb, sb * 4, N);
        if ((da == 0 && db != 2) || (da == 1 && db == 1)) {
            psum_mark(core, d, 0); /* what the scatter does before writing */
            sbuf_written(core, cx->engine, d);
            rows_job j = {ROWS_TT, da == 1, P, rd, ra, rb, sd, sa, sb, N, op, op, 0, 0, NULL, NULL, 0, 0};
            rows_run(core, &j);
            return TERN_OK;
        }
    }
    /* The destination and the first input fp32 rows, the second any pattern (a max pool's strided view of its
     * padded input): only the second is gathered (read whole before anything is written), then the rows as above. */
    int da = 2;
    if (a->num_partitions == P && b->num_partitions == P && (rd = f32_rows(core, cx->engine, d, N, &sd)) &&
        (ra = f32_rows(core, cx->engine, a, N, &sa)) &&
        (da = rows_relation(core, d, (uint8_t *)rd, sd * 4, a, (uint8_t *)ra, sa * 4, N)) != 2) {
        float *y = NULL;
        if ((st = gather_f(core, cx, ins, TERN_AP_IN1, 1, &y, err)))
            return st;
        psum_mark(core, d, 0);
        sbuf_written(core, cx->engine, d);
        rows_job j = {ROWS_TT, da == 1, P, rd, ra, y, sd, sa, N, N, op, op, 0, 0, NULL, NULL, 0, 0};
        rows_run(core, &j);
        return TERN_OK;
    }
    float *x = NULL, *y = NULL;
    if ((st = gather_f(core, cx, ins, TERN_AP_IN0, 0, &x, err)) || (st = gather_f(core, cx, ins, TERN_AP_IN1, 1, &y, err)))
        return st;
    alu_apply_f32_vv(op, x, y, n);
    return put_f(core, cx, ins, TERN_AP_DST, x, err);
}

static tern_status exec_tensor_scalar(tern_core *core, const exec_ctx *cx, const tern_instr *ins, tern_error *err)
{
    const tern_ap *a = &ins->ap[TERN_AP_IN0], *d = &ins->ap[TERN_AP_DST];
    tern_alu_op op0 = (tern_alu_op)ins->op0, op1 = (tern_alu_op)ins->op1;
    uint32_t P = a->num_partitions;
    size_t N = (size_t)tern_ap_free_elems(a);
    int rev0 = (ins->flags & TERN_FLAG_REV0) != 0, rev1 = (ins->flags & TERN_FLAG_REV1) != 0;
    tern_status st;
    if (alu_is_bitwise(op0) || alu_is_bitwise(op1)) {
        int32_t *x = NULL, *s0 = NULL, *s1 = NULL;
        if ((st = gather_i(core, cx, ins, a, 0, &x, err)))
            return st;
        if ((ins->flags & TERN_FLAG_S0_AP) && (st = gather_i(core, cx, ins, &ins->ap[TERN_AP_IN1], 1, &s0, err)))
            return st;
        if ((ins->flags & TERN_FLAG_S1_AP) && (st = gather_i(core, cx, ins, &ins->ap[TERN_AP_IN2], 2, &s1, err)))
            return st;
        for (uint32_t p = 0; p < P; p++) {
            int32_t v0 = s0 ? s0[p] : ins->imm0.i, v1 = s1 ? s1[p] : ins->imm1.i;
            for (size_t i = 0; i < N; i++) {
                int32_t *e = &x[(size_t)p * N + i];
                int32_t t = rev0 ? alu_apply_i32(op0, v0, *e) : alu_apply_i32(op0, *e, v0);
                *e = rev1 ? alu_apply_i32(op1, v1, t) : alu_apply_i32(op1, t, v1);
            }
        }
        return ap_scatter_i32(core, cx->engine, d, x, err);
    }
    float *x = NULL, *s0 = NULL, *s1 = NULL;
    if ((ins->flags & TERN_FLAG_S0_AP) && (st = gather_f(core, cx, ins, TERN_AP_IN1, 1, &s0, err)))
        return st;
    if ((ins->flags & TERN_FLAG_S1_AP) && (st = gather_f(core, cx, ins, TERN_AP_IN2, 2, &s1, err)))
        return st;
    /* fp32 rows on chip (the optimizer's and the norms' scalings): computed in the destination rows, as
     * exec_tensor_tensor does; the [P, 1] scalars are already copies, so they may alias anything */
    size_t sa = 0, sd = 0;
    float *ra, *rd;
    if (d->num_partitions == P && (rd = f32_rows(core, cx->engine, d, N, &sd)) &&
        (ra = f32_rows(core, cx->engine, a, N, &sa))) {
        int da = rows_relation(core, d, (uint8_t *)rd, sd * 4, a, (uint8_t *)ra, sa * 4, N);
        if (da != 2) {
            psum_mark(core, d, 0);
            sbuf_written(core, cx->engine, d);
            rows_job j = {ROWS_TS, da == 1, P, rd, ra, NULL, sd, sa, 0, N, op0, op1, rev0, rev1, s0, s1,
                          ins->imm0.f, ins->imm1.f};
            rows_run(core, &j);
            return TERN_OK;
        }
    }
    if ((st = gather_f(core, cx, ins, TERN_AP_IN0, 0, &x, err)))
        return st;
    for (uint32_t p = 0; p < P; p++) {
        float v0 = s0 ? s0[p] : ins->imm0.f, v1 = s1 ? s1[p] : ins->imm1.f;
        alu_apply_f32_vs(op0, x + (size_t)p * N, v0, rev0, N);
        alu_apply_f32_vs(op1, x + (size_t)p * N, v1, rev1, N);
    }
    return put_f(core, cx, ins, TERN_AP_DST, x, err);
}

static tern_status exec_stt(tern_core *core, const exec_ctx *cx, const tern_instr *ins, tern_error *err)
{
    const tern_ap *a = &ins->ap[TERN_AP_IN0];
    tern_alu_op op0 = (tern_alu_op)ins->op0, op1 = (tern_alu_op)ins->op1;
    uint32_t P = a->num_partitions;
    size_t N = (size_t)tern_ap_free_elems(a);
    int rev0 = (ins->flags & TERN_FLAG_REV0) != 0, rev1 = (ins->flags & TERN_FLAG_REV1) != 0;
    const tern_ap *b = &ins->ap[TERN_AP_IN1], *d = &ins->ap[TERN_AP_DST];
    float *x = NULL, *y = NULL, *s0 = NULL;
    tern_status st;
    if ((ins->flags & TERN_FLAG_S0_AP) && (st = gather_f(core, cx, ins, TERN_AP_IN2, 2, &s0, err)))
        return st;
    /* fp32 rows on chip (AdamW's moments, fused elementwise chains): computed in the destination rows when they
     * are the first input's or overlap it not at all, and overlap the second input not at all (each row is
     * passed over twice, so the second input must not change under it); the result's bits are the dense
     * path's, as exec_tensor_tensor's are */
    size_t sa = 0, sb = 0, sd = 0;
    float *ra, *rb, *rd;
    if (b->num_partitions == P && d->num_partitions == P && (rd = f32_rows(core, cx->engine, d, N, &sd)) &&
        (ra = f32_rows(core, cx->engine, a, N, &sa)) && (rb = f32_rows(core, cx->engine, b, N, &sb))) {
        int da = rows_relation(core, d, (uint8_t *)rd, sd * 4, a, (uint8_t *)ra, sa * 4, N);
        int db = rows_relation(core, d, (uint8_t *)rd, sd * 4, b, (uint8_t *)rb, sb * 4, N);
        if (da != 2 && db == 1) {
            psum_mark(core, d, 0);
            sbuf_written(core, cx->engine, d);
            rows_job j = {ROWS_STT, da == 1, P, rd, ra, rb, sd, sa, sb, N, op0, op1, rev0, rev1, s0, NULL,
                          ins->imm0.f, 0};
            rows_run(core, &j);
            return TERN_OK;
        }
    }
    /* The destination and the second input fp32 rows on chip, the first input any pattern. */
    if (b->num_partitions == P && d->num_partitions == P && (rd = f32_rows(core, cx->engine, d, N, &sd)) &&
        (rb = f32_rows(core, cx->engine, b, N, &sb))) {
        /* The first input an fp32 window of at most two dimensions per partition (a depthwise convolution's tap,
         * [P, 7 x 7] to [P, 112 x 36] from the padded input tile) that the destination overlaps nowhere: one pass
         * straight from the window (alu_stt_window, the same operators on the same values as below). The
         * destination may be the second input's rows. */
        stt_tap w;
        uint32_t wnr, wnc;
        size_t wps;
        if (rows_relation(core, d, (uint8_t *)rd, sd * 4, b, (uint8_t *)rb, sb * 4, N) != 2 &&
            stt_window(core, cx->engine, a, d, rd, sd, N, &w, &wnr, &wnc, &wps)) {
            /* before the write (a lazily latched stationary is packed from the bytes as they were); the path below,
             * should this one decline, writes the destination too */
            psum_mark(core, d, 0);
            sbuf_written(core, cx->engine, d);
            if (alu_stt_window(op0, rev0, op1, rev1, s0, ins->imm0.f, P, w.src, wps, wnr, w.sr, wnc, w.sc, rb, sb, rd,
                               sd))
                return TERN_OK;
        }
        /* Otherwise only the first input is gathered; each row is computed from it and from the second input's
         * row read in place, then copied into its destination row. A row's reads all come before its write, and
         * rows of different partitions never overlap, so the two may be the same rows or overlap in any way. The
         * dense path's calls on the same values below: the same bits. */
        if ((st = gather_f(core, cx, ins, TERN_AP_IN0, 0, &x, err)))
            return st;
        psum_mark(core, d, 0);
        sbuf_written(core, cx->engine, d);
        for (uint32_t p = 0; p < P; p++) {
            float *row = x + (size_t)p * N;
            alu_apply_f32_vs(op0, row, s0 ? s0[p] : ins->imm0.f, rev0, N);
            alu_apply_f32_vvr(op1, row, rb + (size_t)p * sb, rev1, N);
            memcpy(rd + (size_t)p * sd, row, N * sizeof(float));
        }
        return TERN_OK;
    }
    if ((st = gather_f(core, cx, ins, TERN_AP_IN0, 0, &x, err)) || (st = gather_f(core, cx, ins, TERN_AP_IN1, 1, &y, err)))
        return st;
    for (uint32_t p = 0; p < P; p++) {
        float *row = x + (size_t)p * N;
        alu_apply_f32_vs(op0, row, s0 ? s0[p] : ins->imm0.f, rev0, N);
        alu_apply_f32_vvr(op1, row, y + (size_t)p * N, rev1, N);
    }
    return put_f(core, cx, ins, TERN_AP_DST, x, err);
}

static int is_logical(tern_alu_op op)
{
    return op == TERN_ALU_LOGICAL_AND || op == TERN_ALU_LOGICAL_OR || op == TERN_ALU_LOGICAL_XOR;
}

static tern_status exec_tensor_reduce(tern_core *core, const exec_ctx *cx, const tern_instr *ins, tern_error *err)
{
    const tern_ap *a = &ins->ap[TERN_AP_IN0], *d = &ins->ap[TERN_AP_DST];
    tern_alu_op op = (tern_alu_op)ins->op0;
    uint32_t P = a->num_partitions;
    size_t outer = (size_t)reduce_outer(a, ins->imm_i0), N = (size_t)tern_ap_free_elems(a), inner = N / outer;
    int neg = (ins->flags & TERN_FLAG_NEGATE) != 0;
    tern_status st;
    size_t nout = (size_t)P * outer;
    float *o = core_scratch(core, 1, nout);
    if (!o)
        return nomem(cx, ins, nout, err);
    if (alu_is_bitwise(op)) {
        int32_t *x = NULL, *r = (int32_t *)(void *)o;
        if ((st = gather_i(core, cx, ins, a, 0, &x, err)))
            return st;
        for (size_t g = 0; g < nout; g++) {
            const int32_t *row = x + g * inner;
            int32_t acc = row[0];
            for (size_t k = 1; k < inner; k++)
                acc = alu_apply_i32(op, acc, row[k]);
            r[g] = acc;
        }
        return ap_scatter_i32(core, cx->engine, d, r, err);
    }
    /* fp32 rows on chip: each group read in place; max and min out of order with the chain's bits
     * (alu_reduce_minmax), add as the chain itself without a call per element */
    size_t sa = 0;
    float *ra = (op == TERN_ALU_MAX || op == TERN_ALU_MIN || op == TERN_ALU_ADD) && inner > 0
                    ? f32_rows(core, cx->engine, a, N, &sa)
                    : NULL;
    float *x = NULL;
    if (!ra && (st = gather_f(core, cx, ins, TERN_AP_IN0, 0, &x, err)))
        return st;
    int wide = ra && (op == TERN_ALU_MAX || op == TERN_ALU_MIN) && core_simd_avx512();
    for (size_t g = 0; g < nout; g++) {
        const float *row = ra ? ra + (g / outer) * sa + (g % outer) * inner : x + g * inner;
        float acc;
        if (ra && op == TERN_ALU_ADD) {
            acc = row[0];
            for (size_t k = 1; k < inner; k++)
                acc = acc + row[k];
        } else if (!ra || !alu_reduce_minmax(op, row, inner, &acc, wide)) {
            acc = is_logical(op) ? (row[0] != 0.0f ? 1.0f : 0.0f) : row[0];
            for (size_t k = 1; k < inner; k++)
                acc = alu_apply_f32(op, acc, row[k]);
        }
        o[g] = neg ? -acc : acc;
    }
    return put_f(core, cx, ins, TERN_AP_DST, o, err);
}

/* NKI tensor_copy: a bit-accurate copy when the dtypes are equal, otherwise a cast through fp32 (integer to
 * integer included: values beyond 2^24 round, out-of-range values saturate). */
static tern_status exec_tensor_copy(tern_core *core, const exec_ctx *cx, const tern_instr *ins, tern_error *err)
{
    const tern_ap *a = &ins->ap[TERN_AP_IN0], *d = &ins->ap[TERN_AP_DST];
    tern_status st;
    if (a->dtype == d->dtype)
        return ap_copy_raw(core, cx->engine, d, a, err); /* bits, at memcpy speed */
    /* from fp32 rows on chip (a PSUM tile cast to bf16): converted straight from the rows, as the dense path's
     * scatter converts its copy of them, when the destination's rows overlap the source's nowhere */
    size_t N = (size_t)tern_ap_free_elems(a), sa = 0, dn = 0, sd = 0;
    float *ra;
    uint8_t *rd;
    if (a->num_partitions == d->num_partitions && (ra = f32_rows(core, cx->engine, a, N, &sa)) &&
        (rd = ap_onchip_rows(core, cx->engine, d, &dn, &sd)) && dn == N &&
        onchip_rows_relation(core, d, rd, sd, N * tern_dtype_size((tern_dtype)d->dtype), a, (uint8_t *)ra, sa * 4,
                             N * 4) == 1)
        return ap_scatter_f32_rows(core, cx->engine, d, ra, N, sa, sr_stream_of(cx), err);
    float *x = NULL;
    if ((st = gather_f(core, cx, ins, TERN_AP_IN0, 0, &x, err)))
        return st;
    return put_f(core, cx, ins, TERN_AP_DST, x, err);
}

static tern_status exec_copy_predicated(tern_core *core, const exec_ctx *cx, const tern_instr *ins, tern_error *err)
{
    tern_ap ra = raw_view(&ins->ap[TERN_AP_IN0]), rd = raw_view(&ins->ap[TERN_AP_DST]);
    size_t n = (size_t)ap_elems(&rd);
    int rev = (ins->flags & TERN_FLAG_REV0) != 0;
    int32_t *x = NULL, *pr = NULL, *old = NULL;
    tern_status st;
    if ((st = gather_i(core, cx, ins, &ra, 0, &x, err)) ||
        (st = gather_i(core, cx, ins, &ins->ap[TERN_AP_IN1], 1, &pr, err)) ||
        (st = gather_i(core, cx, ins, &rd, 2, &old, err)))
        return st;
    for (size_t i = 0; i < n; i++)
        if ((pr[i] != 0) != rev)
            old[i] = x[i];
    return ap_scatter_i32(core, cx->engine, &rd, old, err);
}

static tern_status exec_memset(tern_core *core, const exec_ctx *cx, const tern_instr *ins, tern_error *err)
{
    const tern_ap *d = &ins->ap[TERN_AP_DST];
    size_t n = (size_t)ap_elems(d);
    float *b = core_scratch(core, 0, n);
    if (!b)
        return nomem(cx, ins, n, err);
    if (dt_is_int(d->dtype)) {
        int32_t *ib = (int32_t *)(void *)b;
        for (size_t i = 0; i < n; i++)
            ib[i] = ins->imm0.i;
        return ap_scatter_i32(core, cx->engine, d, ib, err);
    }
    /* Rows on chip rounded to nearest (or fp32, never rounded): every element gets the same bits, so the first
     * partition's row is converted as the scatter converts it and copied to the others (a max pool's -FLT_MAX
     * frame, [64, 113 x 113], went element by element through the conversion). Stochastic rounding keeps the scatter:
     * its bits depend on each element's place. */
    size_t len = 0, ps = 0;
    const uint32_t P = d->num_partitions;
    uint8_t *rows = P > 1 && (core->opts.rounding == TERN_ROUND_RNE || d->dtype == TERN_DTYPE_FP32)
                        ? ap_onchip_rows(core, cx->engine, d, &len, &ps)
                        : NULL;
    if (rows && (size_t)len * P == n) {
        tern_ap first = *d;
        first.num_partitions = 1;
        for (size_t i = 0; i < len; i++)
            b[i] = ins->imm0.f;
        tern_status st = ap_scatter_f32(core, cx->engine, &first, b, sr_stream_of(cx), err);
        if (st)
            return st;
        psum_mark(core, d, 0);
        sbuf_written(core, cx->engine, d);
        const size_t bytes = len * tern_dtype_size((tern_dtype)d->dtype);
        for (uint32_t p = 1; p < P; p++)
            memcpy(rows + (size_t)p * ps, rows, bytes);
        return TERN_OK;
    }
    for (size_t i = 0; i < n; i++)
        b[i] = ins->imm0.f;
    return put_f(core, cx, ins, TERN_AP_DST, b, err);
}

/* select on 4-byte rows on chip (a Clip's NaN pass, masks), computed in the destination rows: D = A != 0 ? B : C with
 * B's or C's bits copied, A's test on its bits (fp32: any bit but the sign, so -0 is false and a NaN true; an
 * integer: nonzero). Each element reads only the same element of A, B and C, so each of them may be D's rows
 * themselves or must lie apart from them; 0 (nothing done) otherwise, and for any other layout or dtype. */
static int select_rows(tern_core *core, const exec_ctx *cx, const tern_ap *a, const tern_ap *b, const tern_ap *c,
                       const tern_ap *d)
{
    if (tern_dtype_size((tern_dtype)d->dtype) != 4 || b->dtype != d->dtype || c->dtype != d->dtype ||
        tern_dtype_size((tern_dtype)a->dtype) != 4 || (a->dtype != TERN_DTYPE_FP32 && !dt_is_int(a->dtype)))
        return 0;
    uint32_t P = d->num_partitions;
    if (a->num_partitions != P || b->num_partitions != P || c->num_partitions != P)
        return 0;
    const tern_ap *ops[4] = {d, a, b, c};
    uint8_t *r[4];
    size_t st[4], N = (size_t)tern_ap_free_elems(d);
    for (int k = 0; k < 4; k++) {
        size_t len = 0;
        r[k] = ap_onchip_rows(core, cx->engine, ops[k], &len, &st[k]);
        if (!r[k] || len != N || (uintptr_t)r[k] % 4 || st[k] % 4)
            return 0;
        if (k && rows_relation(core, d, r[0], st[0], ops[k], r[k], st[k], N) == 2)
            return 0;
    }
    psum_mark(core, d, 0); /* what the scatter does before writing */
    sbuf_written(core, cx->engine, d);
    const uint32_t mask = a->dtype == TERN_DTYPE_FP32 ? 0x7fffffffu : 0xffffffffu;
    for (uint32_t p = 0; p < P; p++) {
        uint32_t *rd = (uint32_t *)(void *)(r[0] + (size_t)p * st[0]);
        const uint32_t *ra = (const uint32_t *)(const void *)(r[1] + (size_t)p * st[1]),
                       *rb = (const uint32_t *)(const void *)(r[2] + (size_t)p * st[2]),
                       *rc = (const uint32_t *)(const void *)(r[3] + (size_t)p * st[3]);
        alu_select_bits(rd, ra, rb, rc, mask, N);
    }
    return 1;
}

static tern_status exec_select(tern_core *core, const exec_ctx *cx, const tern_instr *ins, tern_error *err)
{
    const tern_ap *a = &ins->ap[TERN_AP_IN0], *b = &ins->ap[TERN_AP_IN1], *c = &ins->ap[TERN_AP_IN2],
                  *d = &ins->ap[TERN_AP_DST];
    size_t n = (size_t)ap_elems(d);
    tern_status st;
    if (select_rows(core, cx, a, b, c, d))
        return TERN_OK;
    /* the predicate as 0/1 in slot 3 */
    int32_t *pr = NULL;
    if (dt_is_int(a->dtype)) {
        if ((st = gather_i(core, cx, ins, a, 3, &pr, err)))
            return st;
    } else {
        float *pf = NULL;
        if ((st = gather_f(core, cx, ins, TERN_AP_IN0, 3, &pf, err)))
            return st;
        pr = (int32_t *)(void *)pf;
        for (size_t i = 0; i < n; i++)
            pr[i] = pf[i] != 0.0f; /* NaN counts as true */
    }
    if (b->dtype == d->dtype && c->dtype == d->dtype) {
        tern_ap rb = raw_view(b), rc = raw_view(c), rd = raw_view(d);
        int32_t *x = NULL, *y = NULL;
        if ((st = gather_i(core, cx, ins, &rb, 0, &x, err)) || (st = gather_i(core, cx, ins, &rc, 1, &y, err)))
            return st;
        for (size_t i = 0; i < n; i++)
            if (!pr[i])
                x[i] = y[i];
        return ap_scatter_i32(core, cx->engine, &rd, x, err);
    }
    float *x = NULL, *y = NULL;
    if ((st = gather_f(core, cx, ins, TERN_AP_IN1, 0, &x, err)) || (st = gather_f(core, cx, ins, TERN_AP_IN2, 1, &y, err)))
        return st;
    for (size_t i = 0; i < n; i++)
        if (!pr[i])
            x[i] = y[i];
    return put_f(core, cx, ins, TERN_AP_DST, x, err);
}

/* One step of a bn_stats chain of squared deviations: acc + (x - u)^2 in double, each operation rounded. */
static inline double bn_sq(double acc, float x, double u)
{
    double d = (double)x - u;
    return acc + d * d;
}

/* bn_stats: per partition, (count, mean, count*var) of the even-indexed then the odd-indexed elements (flattened
 * free index). Sums in double, each output rounded once to fp32; an empty group gives (0, 0, 0). */
static tern_status exec_bn_stats(tern_core *core, const exec_ctx *cx, const tern_instr *ins, tern_error *err)
{
    const tern_ap *a = &ins->ap[TERN_AP_IN0];
    uint32_t P = a->num_partitions;
    size_t F = (size_t)tern_ap_free_elems(a);
    float *x, *o = core_scratch(core, 1, (size_t)P * 6);
    if (!o)
        return nomem(cx, ins, (size_t)P * 6, err);
    tern_status st;
    size_t xs = F; /* floats between partitions' rows: fp32 rows on chip are read in place */
    if (!(x = f32_rows(core, cx->engine, a, F, &xs)) && (st = gather_f(core, cx, ins, TERN_AP_IN0, 0, &x, err)))
        return st;
    /* Each (partition, parity) is its own chain in double, in element order: its count, its sum, its mean and the
     * sum of squared deviations. Four partitions' eight chains advance together (each add waits for the one
     * before it in its own chain only), in the same order within each chain, so the bits are those of running
     * them one after another. */
    enum { G = 4 };
    const double cnt8[2] = {(double)((F + 1) / 2), (double)(F / 2)};
    uint32_t pv = 0; /* partitions done eight at a time */
#if defined(__x86_64__)
    if (F >= 8 && core_simd_avx512())
        for (; pv + 8 <= P; pv += 8) {
            const float *rows[8];
            double sum[2][8], mean[2][8], m2[2][8];
            for (uint32_t q = 0; q < 8; q++)
                rows[q] = x + (size_t)(pv + q) * xs;
            if (!alu_bn_chains8(rows, F, cnt8, sum, mean, m2))
                break; /* a NaN: these and the rest by the loop below */
            for (uint32_t q = 0; q < 8; q++)
                for (int par = 0; par < 2; par++) {
                    o[(pv + q) * 6 + par * 3 + 0] = (float)cnt8[par];
                    o[(pv + q) * 6 + par * 3 + 1] = (float)mean[par][q];
                    o[(pv + q) * 6 + par * 3 + 2] = (float)m2[par][q];
                }
        }
#endif
    for (uint32_t p0 = pv; p0 < P; p0 += G) {
        uint32_t np = P - p0 < G ? P - p0 : G;
        const float *row[G];
        double sum[G][2], m2[G][2], mean[G][2];
        for (uint32_t q = 0; q < G; q++) {
            row[q] = x + (size_t)(p0 + (q < np ? q : 0)) * xs;
            sum[q][0] = sum[q][1] = m2[q][0] = m2[q][1] = 0.0;
        }
        const double cnt[2] = {(double)((F + 1) / 2), (double)(F / 2)};
        /* the eight chains in registers (arrays indexed in loops stay in memory, each add then waiting on a store
         * and a reload); the same adds in the same order */
        const float *r0 = row[0], *r1 = row[1], *r2 = row[2], *r3 = row[3];
        double s00 = 0, s01 = 0, s10 = 0, s11 = 0, s20 = 0, s21 = 0, s30 = 0, s31 = 0;
        size_t i = 0;
        for (; i + 1 < F; i += 2) {
            s00 += r0[i], s01 += r0[i + 1], s10 += r1[i], s11 += r1[i + 1];
            s20 += r2[i], s21 += r2[i + 1], s30 += r3[i], s31 += r3[i + 1];
        }
        if (i < F)
            s00 += r0[i], s10 += r1[i], s20 += r2[i], s30 += r3[i];
        sum[0][0] = s00, sum[0][1] = s01, sum[1][0] = s10, sum[1][1] = s11;
        sum[2][0] = s20, sum[2][1] = s21, sum[3][0] = s30, sum[3][1] = s31;
        for (uint32_t q = 0; q < G; q++)
            for (int par = 0; par < 2; par++)
                mean[q][par] = cnt[par] > 0 ? sum[q][par] / cnt[par] : 0.0;
        const double u00 = mean[0][0], u01 = mean[0][1], u10 = mean[1][0], u11 = mean[1][1], u20 = mean[2][0],
                     u21 = mean[2][1], u30 = mean[3][0], u31 = mean[3][1];
        double q00 = 0, q01 = 0, q10 = 0, q11 = 0, q20 = 0, q21 = 0, q30 = 0, q31 = 0;
        for (i = 0; i + 1 < F; i += 2) {
            q00 = bn_sq(q00, r0[i], u00), q01 = bn_sq(q01, r0[i + 1], u01);
            q10 = bn_sq(q10, r1[i], u10), q11 = bn_sq(q11, r1[i + 1], u11);
            q20 = bn_sq(q20, r2[i], u20), q21 = bn_sq(q21, r2[i + 1], u21);
            q30 = bn_sq(q30, r3[i], u30), q31 = bn_sq(q31, r3[i + 1], u31);
        }
        if (i < F)
            q00 = bn_sq(q00, r0[i], u00), q10 = bn_sq(q10, r1[i], u10), q20 = bn_sq(q20, r2[i], u20),
            q30 = bn_sq(q30, r3[i], u30);
        m2[0][0] = q00, m2[0][1] = q01, m2[1][0] = q10, m2[1][1] = q11;
        m2[2][0] = q20, m2[2][1] = q21, m2[3][0] = q30, m2[3][1] = q31;
        for (uint32_t q = 0; q < np; q++)
            for (int par = 0; par < 2; par++) {
                o[(p0 + q) * 6 + par * 3 + 0] = (float)cnt[par];
                o[(p0 + q) * 6 + par * 3 + 1] = (float)mean[q][par];
                o[(p0 + q) * 6 + par * 3 + 2] = (float)m2[q][par];
            }
    }
    return put_f(core, cx, ins, TERN_AP_DST, o, err);
}

/* bn_aggr: combine (count, mean, count*var) tuples: N = sum c, mean = sum(c*m)/N, var = (sum M2 + sum c*(m -
 * mean)^2) / N (population variance). Double internally, rounded once; N == 0 gives (0, 0). */
static tern_status exec_bn_aggr(tern_core *core, const exec_ctx *cx, const tern_instr *ins, tern_error *err)
{
    const tern_ap *a = &ins->ap[TERN_AP_IN0];
    uint32_t P = a->num_partitions;
    size_t F = (size_t)tern_ap_free_elems(a), T = F / 3;
    float *x, *o = core_scratch(core, 1, (size_t)P * 2);
    if (!o)
        return nomem(cx, ins, (size_t)P * 2, err);
    tern_status st;
    if ((st = gather_f(core, cx, ins, TERN_AP_IN0, 0, &x, err)))
        return st;
    for (uint32_t p = 0; p < P; p++) {
        const float *row = x + (size_t)p * F;
        double n = 0, s = 0, m2 = 0;
        for (size_t t = 0; t < T; t++) {
            n += row[3 * t];
            s += (double)row[3 * t] * row[3 * t + 1];
        }
        double mean = n > 0 ? s / n : 0.0;
        for (size_t t = 0; t < T; t++) {
            double dm = row[3 * t + 1] - mean;
            m2 += row[3 * t + 2] + row[3 * t] * dm * dm;
        }
        o[p * 2] = (float)mean;
        o[p * 2 + 1] = (float)(n > 0 ? m2 / n : 0.0);
    }
    return put_f(core, cx, ins, TERN_AP_DST, o, err);
}

static tern_status exec_reciprocal(tern_core *core, const exec_ctx *cx, const tern_instr *ins, tern_error *err)
{
    size_t n = (size_t)ap_elems(&ins->ap[TERN_AP_IN0]);
    float *x = NULL;
    tern_status st;
    if ((st = gather_f(core, cx, ins, TERN_AP_IN0, 0, &x, err)))
        return st;
    for (size_t i = 0; i < n; i++)
        x[i] = 1.0f / x[i];
    return put_f(core, cx, ins, TERN_AP_DST, x, err);
}

/* A transpose between contiguous on-chip rows that do not overlap (the training step's 32 x 32 blocks of every
 * weight's W^T, 0.25 M instructions a step): element (p, f) moved straight from its input row to its output row,
 * as the gather-transpose-scatter below moves it (raw bits either way). Returns 0, having done nothing, when the
 * operands are not such rows. */
static int transpose_rows(tern_core *core, const exec_ctx *cx, const tern_ap *a, const tern_ap *d, uint32_t P,
                          uint32_t F)
{
    size_t es = tern_dtype_size((tern_dtype)a->dtype), na = 0, nd = 0, sa = 0, sd = 0;
    uint8_t *ra = ap_onchip_rows(core, cx->engine, a, &na, &sa), *rd = ap_onchip_rows(core, cx->engine, d, &nd, &sd);
    if (!ra || !rd || na != F || nd != P || (es != 2 && es != 4))
        return 0;
    if (a->mem == d->mem && a->start_partition < d->start_partition + F && d->start_partition < a->start_partition + P) {
        const uint8_t *base = a->mem == TERN_MEM_SBUF ? core->sbuf : core->psum;
        size_t a0 = (size_t)(ra - base) % sa, d0 = (size_t)(rd - base) % sd;
        if (a0 < d0 + P * es && d0 < a0 + F * es)
            return 0; /* overlapping rows: the dense path reads everything before it writes */
    }
    psum_mark(core, d, 0);
    sbuf_written(core, cx->engine, d);
    for (uint32_t f = 0; f < F; f++) {
        uint8_t *o = rd + (size_t)f * sd;
        if (es == 4)
            for (uint32_t p = 0; p < P; p++)
                memcpy(o + (size_t)p * 4, ra + (size_t)p * sa + (size_t)f * 4, 4);
        else
            for (uint32_t p = 0; p < P; p++)
                memcpy(o + (size_t)p * 2, ra + (size_t)p * sa + (size_t)f * 2, 2);
    }
    return 1;
}

static tern_status exec_transpose(tern_core *core, const exec_ctx *cx, const tern_instr *ins, tern_error *err)
{
    tern_ap ra = raw_view(&ins->ap[TERN_AP_IN0]), rd = raw_view(&ins->ap[TERN_AP_DST]);
    uint32_t P = ra.num_partitions, F = (uint32_t)tern_ap_free_elems(&ra);
    if (transpose_rows(core, cx, &ins->ap[TERN_AP_IN0], &ins->ap[TERN_AP_DST], P, F))
        return TERN_OK;
    int32_t *x = NULL, *y = NULL;
    float *yb = core_scratch(core, 1, (size_t)P * F);
    if (!yb)
        return nomem(cx, ins, (size_t)P * F, err);
    y = (int32_t *)(void *)yb;
    tern_status st;
    if ((st = gather_i(core, cx, ins, &ra, 0, &x, err)))
        return st;
    for (uint32_t p = 0; p < P; p++)
        for (uint32_t f = 0; f < F; f++)
            y[(size_t)f * P + p] = x[(size_t)p * F + f];
    return ap_scatter_i32(core, cx->engine, &rd, y, err);
}

/* max8 ordering: descending by value, NaN above every number (as numpy's sort puts NaN last); ties keep
 * the earlier element first. */
static int greater(float a, float b)
{
    if (a != a)
        return b == b;
    if (b != b)
        return 0;
    return a > b;
}

static tern_status exec_max8(tern_core *core, const exec_ctx *cx, const tern_instr *ins, tern_error *err)
{
    const tern_ap *a = &ins->ap[TERN_AP_IN0];
    uint32_t P = a->num_partitions;
    size_t F = (size_t)tern_ap_free_elems(a);
    float *x, *o = core_scratch(core, 1, (size_t)P * 8);
    if (!o)
        return nomem(cx, ins, (size_t)P * 8, err);
    tern_status st;
    if ((st = gather_f(core, cx, ins, TERN_AP_IN0, 0, &x, err)))
        return st;
    for (uint32_t p = 0; p < P; p++) {
        const float *row = x + (size_t)p * F;
        float *top = o + (size_t)p * 8;
        int have = 0;
        for (size_t i = 0; i < F; i++) {
            float v = row[i];
            if (have == 8 && !greater(v, top[7]))
                continue;
            int k = have < 8 ? have++ : 7;
            while (k > 0 && greater(v, top[k - 1])) {
                top[k] = top[k - 1];
                k--;
            }
            top[k] = v;
        }
    }
    return put_f(core, cx, ins, TERN_AP_DST, o, err);
}

static tern_status exec_scan(tern_core *core, const exec_ctx *cx, const tern_instr *ins, tern_error *err)
{
    const tern_ap *a = &ins->ap[TERN_AP_IN0];
    tern_alu_op op0 = (tern_alu_op)ins->op0, op1 = (tern_alu_op)ins->op1;
    uint32_t P = a->num_partitions;
    size_t N = (size_t)tern_ap_free_elems(a);
    int rev0 = (ins->flags & TERN_FLAG_REV0) != 0, rev1 = (ins->flags & TERN_FLAG_REV1) != 0;
    float *x = NULL, *y = NULL, *init = NULL;
    tern_status st;
    if ((st = gather_f(core, cx, ins, TERN_AP_IN0, 0, &x, err)) || (st = gather_f(core, cx, ins, TERN_AP_IN1, 1, &y, err)))
        return st;
    if ((ins->flags & TERN_FLAG_S0_AP) && (st = gather_f(core, cx, ins, TERN_AP_IN2, 2, &init, err)))
        return st;
    for (uint32_t p = 0; p < P; p++) {
        float r = init ? init[p] : ins->imm0.f;
        for (size_t i = 0; i < N; i++) {
            size_t k = (size_t)p * N + i;
            float t = rev0 ? alu_apply_f32(op0, r, x[k]) : alu_apply_f32(op0, x[k], r);
            r = rev1 ? alu_apply_f32(op1, y[k], t) : alu_apply_f32(op1, t, y[k]);
            x[k] = r;
        }
    }
    return put_f(core, cx, ins, TERN_AP_DST, x, err);
}

/* ---- entry points (declared from the instruction table: rules.h, core_internal.h) ---- */

/* What rules_check_instr and the opcode's rules guarantee: an instruction of the VECTOR family on an engine the
 * table allows, its destination (and, but for memset, its first input) used, well formed and in the memories its
 * engine reaches (GpSimd: SBUF only). */
static void vector_entry(const tern_core *core, const exec_ctx *cx, const tern_instr *ins, int in0)
{
    exec_assert_entry(cx, ins, TERN_ISA_FAMILY_VECTOR);
    unsigned mems = cx->engine == TERN_ENGINE_GPSIMD ? EXEC_MEM_BIT(TERN_MEM_SBUF) : EXEC_ONCHIP;
    exec_assert_operand(core, ins, TERN_AP_DST, mems);
    if (in0)
        exec_assert_operand(core, ins, TERN_AP_IN0, mems);
}

/* ---- a chain of taps run as one (exec_lane.c queues a scalar_tensor_tensor that continues the one queued just
 * before it into the same task) ---- */

int stt_chainable(const tern_instr *prev, const tern_instr *next)
{
    const tern_ap *pd = &prev->ap[TERN_AP_DST], *nd = &next->ap[TERN_AP_DST];
    return prev->opcode == TERN_OP_SCALAR_TENSOR_TENSOR && next->opcode == TERN_OP_SCALAR_TENSOR_TENSOR &&
           prev->engine == next->engine && prev->op0 == next->op0 && prev->op1 == next->op1 &&
           (prev->flags & (TERN_FLAG_REV0 | TERN_FLAG_REV1 | TERN_FLAG_S0_AP)) ==
               (next->flags & (TERN_FLAG_REV0 | TERN_FLAG_REV1 | TERN_FLAG_S0_AP)) &&
           pd->dtype == TERN_DTYPE_FP32 && !memcmp(pd, nd, sizeof *pd) && !memcmp(pd, &prev->ap[TERN_AP_IN1], sizeof *pd) &&
           !memcmp(nd, &next->ap[TERN_AP_IN1], sizeof *nd);
}

/* Instructions ins[0..n) that stt_chainable linked (each accumulating into the same fp32 destination, which is
 * also its second input): when the destination is fp32 rows on chip and every first input an fp32 window apart
 * from them, one pass through alu_stt_window_chain; otherwise each in turn, as queued one by one. */
tern_status exec_stt_chain(tern_core *core, const exec_ctx *cx, const tern_instr *const *ins, unsigned n,
                           tern_error *err)
{
    const tern_instr *h = ins[0];
    const tern_ap *d = &h->ap[TERN_AP_DST];
    uint32_t P = d->num_partitions;
    size_t N = (size_t)tern_ap_free_elems(d), sd = 0;
    float *rd = n <= STT_CHAIN_MAX ? f32_rows(core, cx[0].engine, d, N, &sd) : NULL;
    stt_tap taps[STT_CHAIN_MAX];
    uint32_t nr = 0, nc = 0;
    size_t ps = 0;
    int fused = rd != NULL;
    for (unsigned t = 0; t < n && fused; t++) {
        const tern_ap *a = &ins[t]->ap[TERN_AP_IN0];
        uint32_t wnr, wnc;
        size_t wps;
        fused = a->num_partitions == P && stt_window(core, cx[t].engine, a, d, rd, sd, N, &taps[t], &wnr, &wnc, &wps) &&
                (t == 0 || (wnr == nr && wnc == nc && wps == ps));
        if (fused) {
            nr = wnr, nc = wnc, ps = wps;
            taps[t].imm = ins[t]->imm0.f;
        }
    }
    if (fused) {
        /* every tap's [P, 1] scalars, gathered side by side */
        float *sv = core_scratch(core, 2, (size_t)n * P);
        if (!sv)
            return nomem(&cx[0], h, (size_t)n * P, err);
        for (unsigned t = 0; t < n; t++)
            if (ins[t]->flags & TERN_FLAG_S0_AP) {
                /* gathered before any tap writes: only when no tap's scalars lie in the accumulator's bytes */
                const tern_ap *sa = &ins[t]->ap[TERN_AP_IN2];
                size_t sn = 0, sps = 0;
                uint8_t *sr = ap_onchip_rows(core, cx[t].engine, sa, &sn, &sps);
                if (!sr || onchip_rows_relation(core, d, (uint8_t *)rd, sd * 4, N * 4, sa, sr, sps,
                                                sn * tern_dtype_size((tern_dtype)sa->dtype)) != 1) {
                    fused = 0;
                    break;
                }
                tern_status st = ap_gather_f32(core, cx[t].engine, &ins[t]->ap[TERN_AP_IN2], sv + (size_t)t * P, err);
                if (st)
                    return st;
                taps[t].s = sv + (size_t)t * P;
            }
        if (fused) { /* marked before the write, as exec_stt does */
            psum_mark(core, d, 0);
            sbuf_written(core, cx[0].engine, d);
        }
        if (fused && alu_stt_window_chain((tern_alu_op)h->op0, (h->flags & TERN_FLAG_REV0) != 0, (tern_alu_op)h->op1,
                                          (h->flags & TERN_FLAG_REV1) != 0, taps, n, P, ps, nr, nc, rd, sd))
            return TERN_OK;
    }
    for (unsigned t = 0; t < n; t++) {
        tern_status st = exec_op_SCALAR_TENSOR_TENSOR(core, &cx[t], ins[t], err);
        if (st)
            return st;
    }
    return TERN_OK;
}

#define VECTOR_OP(ID, check, exec, in0)                                                                               \
    tern_status check_op_##ID(const tern_core *core, const exec_ctx *cx, const tern_instr *ins, size_t count,      \
                              tern_error *err)                                                                   \
    {                                                                                                              \
        (void)count;                                                                                               \
        return check(core, cx, ins, err);                                                                          \
    }                                                                                                              \
    tern_status exec_op_##ID(tern_core *core, const exec_ctx *cx, const tern_instr *ins, tern_error *err)         \
    {                                                                                                              \
        vector_entry(core, cx, ins, in0);                                                                          \
        tern_status st = dyn_bounds(core, cx, ins, err);                                                           \
        return st ? st : exec(core, cx, ins, err);                                                                 \
    }

VECTOR_OP(TENSOR_TENSOR, check_tensor_tensor, exec_tensor_tensor, 1)
VECTOR_OP(TENSOR_SCALAR, check_tensor_scalar, exec_tensor_scalar, 1)
VECTOR_OP(SCALAR_TENSOR_TENSOR, check_stt, exec_stt, 1)
VECTOR_OP(TENSOR_REDUCE, check_tensor_reduce, exec_tensor_reduce, 1)
VECTOR_OP(TENSOR_COPY, check_tensor_copy, exec_tensor_copy, 1)
VECTOR_OP(TENSOR_COPY_PREDICATED, check_copy_predicated, exec_copy_predicated, 1)
VECTOR_OP(MEMSET, check_memset, exec_memset, 0)
VECTOR_OP(SELECT, check_select, exec_select, 1)
VECTOR_OP(BN_STATS, check_bn, exec_bn_stats, 1)
VECTOR_OP(BN_AGGR, check_bn, exec_bn_aggr, 1)
VECTOR_OP(RECIPROCAL, check_unary, exec_reciprocal, 1)
VECTOR_OP(TRANSPOSE_VE, check_transpose, exec_transpose, 1)
VECTOR_OP(MAX8, check_max8, exec_max8, 1)
VECTOR_OP(TENSOR_TENSOR_SCAN, check_scan, exec_scan, 1)
