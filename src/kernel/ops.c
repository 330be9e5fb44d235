/* One builder call per ISA instruction, plus the conveniences (load, store, matmul). Each call fills a
 * tern_instr from views, names the views it reads and writes, and hands it to tern_kernel_emit, which checks
 * the hardware rules, adds synchronisation and appends it to the right engine's stream. Engine choice when the
 * caller passes TERN_ENGINE_AUTO: VectorE for elementwise work (the NKI default), Sync for DMA triggers. */
#include <string.h>

#include "kernel/builder_internal.h"

static tern_instr blank(tern_opcode op, tern_engine e)
{
    tern_instr ins;
    memset(&ins, 0, sizeof ins);
    ins.opcode = (uint16_t)op;
    ins.engine = (uint8_t)e;
    ins.wait_sem = TERN_SEM_NONE;
    ins.signal_sem = TERN_SEM_NONE;
    for (int s = 0; s < TERN_INSTR_OPERANDS; s++)
        ins.ap[s].offset_reg = TERN_REG_NONE;
    return ins;
}

static tern_engine pick(tern_engine e, tern_engine dflt) { return e == TERN_ENGINE_AUTO ? dflt : e; }

static int valid(const tern_view *v) { return v->region >= 0; }

void tern_kernel_load_stationary(tern_kernel *k, tern_view stationary)
{
    tern_instr ins = blank(TERN_OP_LOAD_STATIONARY, TERN_ENGINE_TENSOR);
    ins.ap[TERN_AP_IN0] = stationary.ap;
    tern_kernel_emit(k, &ins, &stationary, 1, NULL, 0);
}

void tern_kernel_multiply_moving(tern_kernel *k, tern_view dst, tern_view moving, int accumulate)
{
    tern_instr ins = blank(TERN_OP_MULTIPLY_MOVING, TERN_ENGINE_TENSOR);
    ins.ap[TERN_AP_DST] = dst.ap;
    ins.ap[TERN_AP_IN0] = moving.ap;
    if (accumulate)
        ins.flags |= TERN_FLAG_ACCUMULATE;
    /* An accumulating matmul reads its destination too. */
    tern_kernel_emit(k, &ins, accumulate ? (tern_view[]){moving, dst} : &moving, accumulate ? 2 : 1, &dst, 1);
}

void tern_kernel_matmul(tern_kernel *k, tern_view dst, tern_view stationary, tern_view moving, int accumulate)
{
    tern_kernel_load_stationary(k, stationary);
    tern_kernel_multiply_moving(k, dst, moving, accumulate);
}

void tern_kernel_transpose_pe(tern_kernel *k, tern_view dst, tern_view src)
{
    tern_instr ins = blank(TERN_OP_TRANSPOSE_PE, TERN_ENGINE_TENSOR);
    ins.ap[TERN_AP_DST] = dst.ap;
    ins.ap[TERN_AP_IN0] = src.ap;
    tern_kernel_emit(k, &ins, &src, 1, &dst, 1);
}

void tern_kernel_tensor_tensor(tern_kernel *k, tern_engine e, tern_view dst, tern_view a, tern_view b, tern_alu_op op)
{
    tern_instr ins = blank(TERN_OP_TENSOR_TENSOR, pick(e, TERN_ENGINE_VECTOR));
    ins.ap[TERN_AP_DST] = dst.ap;
    ins.ap[TERN_AP_IN0] = a.ap;
    ins.ap[TERN_AP_IN1] = b.ap;
    ins.op0 = (uint8_t)op;
    tern_kernel_emit(k, &ins, (tern_view[]){a, b}, 2, &dst, 1);
}

void tern_kernel_tensor_scalar_ap(tern_kernel *k, tern_engine e, tern_view dst, tern_view a, tern_alu_op op0,
                                  tern_view s0, float s0_imm, tern_alu_op op1, tern_view s1, float s1_imm,
                                  unsigned rev_flags)
{
    tern_instr ins = blank(TERN_OP_TENSOR_SCALAR, pick(e, TERN_ENGINE_VECTOR));
    tern_view reads[3] = {a};
    unsigned n = 1;
    ins.ap[TERN_AP_DST] = dst.ap;
    ins.ap[TERN_AP_IN0] = a.ap;
    ins.op0 = (uint8_t)op0;
    ins.op1 = (uint8_t)op1;
    ins.imm0.f = s0_imm;
    ins.imm1.f = s1_imm;
    ins.flags = (uint16_t)(rev_flags & (TERN_FLAG_REV0 | TERN_FLAG_REV1));
    if (valid(&s0)) {
        ins.flags |= TERN_FLAG_S0_AP;
        ins.ap[TERN_AP_IN1] = s0.ap;
        reads[n++] = s0;
    }
    if (valid(&s1)) {
        ins.flags |= TERN_FLAG_S1_AP;
        ins.ap[TERN_AP_IN2] = s1.ap;
        reads[n++] = s1;
    }
    tern_kernel_emit(k, &ins, reads, n, &dst, 1);
}

void tern_kernel_tensor_scalar(tern_kernel *k, tern_engine e, tern_view dst, tern_view a, tern_alu_op op0, float s0,
                               tern_alu_op op1, float s1)
{
    tern_kernel_tensor_scalar_ap(k, e, dst, a, op0, kview_invalid(), s0, op1, kview_invalid(), s1, 0);
}

void tern_kernel_scalar_tensor_tensor(tern_kernel *k, tern_view dst, tern_view a, tern_alu_op op0, float s0,
                                      tern_alu_op op1, tern_view b)
{
    tern_instr ins = blank(TERN_OP_SCALAR_TENSOR_TENSOR, TERN_ENGINE_VECTOR);
    ins.ap[TERN_AP_DST] = dst.ap;
    ins.ap[TERN_AP_IN0] = a.ap;
    ins.ap[TERN_AP_IN1] = b.ap;
    ins.op0 = (uint8_t)op0;
    ins.op1 = (uint8_t)op1;
    ins.imm0.f = s0;
    tern_kernel_emit(k, &ins, (tern_view[]){a, b}, 2, &dst, 1);
}

void tern_kernel_scalar_tensor_tensor_ap(tern_kernel *k, tern_view dst, tern_view a, tern_alu_op op0, tern_view s0,
                                         float s0_imm, tern_alu_op op1, tern_view b)
{
    if (!valid(&s0)) {
        tern_kernel_scalar_tensor_tensor(k, dst, a, op0, s0_imm, op1, b);
        return;
    }
    tern_instr ins = blank(TERN_OP_SCALAR_TENSOR_TENSOR, TERN_ENGINE_VECTOR);
    ins.ap[TERN_AP_DST] = dst.ap;
    ins.ap[TERN_AP_IN0] = a.ap;
    ins.ap[TERN_AP_IN1] = b.ap;
    ins.ap[TERN_AP_IN2] = s0.ap;
    ins.op0 = (uint8_t)op0;
    ins.op1 = (uint8_t)op1;
    ins.flags = TERN_FLAG_S0_AP;
    tern_kernel_emit(k, &ins, (tern_view[]){a, b, s0}, 3, &dst, 1);
}

void tern_kernel_tensor_reduce(tern_kernel *k, tern_view dst, tern_view a, tern_alu_op op, unsigned axes, int negate)
{
    tern_instr ins = blank(TERN_OP_TENSOR_REDUCE, TERN_ENGINE_VECTOR);
    ins.ap[TERN_AP_DST] = dst.ap;
    ins.ap[TERN_AP_IN0] = a.ap;
    ins.op0 = (uint8_t)op;
    ins.imm_i0 = (int32_t)axes;
    if (negate)
        ins.flags |= TERN_FLAG_NEGATE;
    tern_kernel_emit(k, &ins, &a, 1, &dst, 1);
}

void tern_kernel_tensor_copy(tern_kernel *k, tern_engine e, tern_view dst, tern_view src)
{
    tern_instr ins = blank(TERN_OP_TENSOR_COPY, pick(e, TERN_ENGINE_VECTOR));
    ins.ap[TERN_AP_DST] = dst.ap;
    ins.ap[TERN_AP_IN0] = src.ap;
    tern_kernel_emit(k, &ins, &src, 1, &dst, 1);
}

void tern_kernel_tensor_copy_predicated(tern_kernel *k, tern_view dst, tern_view src, tern_view pred, int reverse)
{
    tern_instr ins = blank(TERN_OP_TENSOR_COPY_PREDICATED, TERN_ENGINE_VECTOR);
    ins.ap[TERN_AP_DST] = dst.ap;
    ins.ap[TERN_AP_IN0] = src.ap;
    ins.ap[TERN_AP_IN1] = pred.ap;
    if (reverse)
        ins.flags |= TERN_FLAG_REV0;
    /* The destination keeps its old value where the predicate is false: it is read too. */
    tern_kernel_emit(k, &ins, (tern_view[]){src, pred, dst}, 3, &dst, 1);
}

void tern_kernel_memset(tern_kernel *k, tern_engine e, tern_view dst, float value)
{
    tern_instr ins = blank(TERN_OP_MEMSET, pick(e, TERN_ENGINE_VECTOR));
    ins.ap[TERN_AP_DST] = dst.ap;
    /* Integer destinations take the value as an integer immediate (exec_vector.c). */
    if (tern_dtype_is_float((tern_dtype)dst.ap.dtype))
        ins.imm0.f = value;
    else
        ins.imm0.i = (int32_t)value;
    tern_kernel_emit(k, &ins, NULL, 0, &dst, 1);
}

void tern_kernel_select(tern_kernel *k, tern_view dst, tern_view pred, tern_view on_true, tern_view on_false)
{
    tern_instr ins = blank(TERN_OP_SELECT, TERN_ENGINE_VECTOR);
    ins.ap[TERN_AP_DST] = dst.ap;
    ins.ap[TERN_AP_IN0] = pred.ap;
    ins.ap[TERN_AP_IN1] = on_true.ap;
    ins.ap[TERN_AP_IN2] = on_false.ap;
    tern_kernel_emit(k, &ins, (tern_view[]){pred, on_true, on_false}, 3, &dst, 1);
}

static void unary_vector(tern_kernel *k, tern_opcode op, tern_view dst, tern_view src)
{
    tern_instr ins = blank(op, TERN_ENGINE_VECTOR);
    ins.ap[TERN_AP_DST] = dst.ap;
    ins.ap[TERN_AP_IN0] = src.ap;
    tern_kernel_emit(k, &ins, &src, 1, &dst, 1);
}

void tern_kernel_bn_stats(tern_kernel *k, tern_view dst, tern_view src) { unary_vector(k, TERN_OP_BN_STATS, dst, src); }
void tern_kernel_bn_aggr(tern_kernel *k, tern_view dst, tern_view src) { unary_vector(k, TERN_OP_BN_AGGR, dst, src); }
void tern_kernel_reciprocal(tern_kernel *k, tern_view dst, tern_view src)
{
    unary_vector(k, TERN_OP_RECIPROCAL, dst, src);
}
void tern_kernel_transpose_ve(tern_kernel *k, tern_view dst, tern_view src)
{
    unary_vector(k, TERN_OP_TRANSPOSE_VE, dst, src);
}
void tern_kernel_max8(tern_kernel *k, tern_view dst, tern_view src) { unary_vector(k, TERN_OP_MAX8, dst, src); }

void tern_kernel_tensor_tensor_scan(tern_kernel *k, tern_view dst, tern_view a, tern_view b, tern_alu_op op0,
                                   tern_alu_op op1, float initial)
{
    tern_instr ins = blank(TERN_OP_TENSOR_TENSOR_SCAN, TERN_ENGINE_VECTOR);
    ins.ap[TERN_AP_DST] = dst.ap;
    ins.ap[TERN_AP_IN0] = a.ap;
    ins.ap[TERN_AP_IN1] = b.ap;
    ins.op0 = (uint8_t)op0;
    ins.op1 = (uint8_t)op1;
    ins.imm0.f = initial;
    tern_kernel_emit(k, &ins, (tern_view[]){a, b}, 2, &dst, 1);
}

void tern_kernel_activation(tern_kernel *k, tern_view dst, tern_view src, tern_act_func func, float scale,
                            tern_view bias, tern_view scale_ap, tern_view reduce_out)
{
    tern_instr ins = blank(TERN_OP_ACTIVATION, TERN_ENGINE_SCALAR);
    tern_view reads[3] = {src};
    tern_view writes[2] = {dst};
    unsigned nr = 1, nw = 1;
    ins.ap[TERN_AP_DST] = dst.ap;
    ins.ap[TERN_AP_IN0] = src.ap;
    ins.func = (uint8_t)func;
    ins.imm0.f = scale;
    if (valid(&bias)) {
        ins.ap[TERN_AP_IN1] = bias.ap;
        reads[nr++] = bias;
    }
    if (valid(&scale_ap)) {
        ins.flags |= TERN_FLAG_S0_AP;
        ins.ap[TERN_AP_IN2] = scale_ap.ap;
        reads[nr++] = scale_ap;
    }
    if (valid(&reduce_out)) {
        ins.flags |= TERN_FLAG_REDUCE;
        ins.ap[TERN_AP_EXTRA] = reduce_out.ap;
        writes[nw++] = reduce_out;
    }
    tern_kernel_emit(k, &ins, reads, nr, writes, nw);
}

void tern_kernel_iota(tern_kernel *k, tern_view dst, int32_t base, int32_t channel_multiplier)
{
    tern_instr ins = blank(TERN_OP_IOTA, TERN_ENGINE_GPSIMD);
    ins.ap[TERN_AP_DST] = dst.ap;
    ins.imm_i0 = base;
    ins.imm_i1 = channel_multiplier;
    tern_kernel_emit(k, &ins, NULL, 0, &dst, 1);
}

static void text_op(tern_kernel *k, tern_opcode op, tern_view dst, tern_view src, unsigned cell)
{
    tern_instr ins = blank(op, TERN_ENGINE_GPSIMD);
    ins.ap[TERN_AP_DST] = dst.ap;
    ins.ap[TERN_AP_IN0] = src.ap;
    ins.imm_i0 = (int32_t)cell;
    tern_kernel_emit(k, &ins, &src, 1, &dst, 1);
}

void tern_kernel_text_parse(tern_kernel *k, tern_view dst_numbers, tern_view src_text, unsigned cell)
{
    text_op(k, TERN_OP_TEXT_PARSE, dst_numbers, src_text, cell);
}

void tern_kernel_text_format(tern_kernel *k, tern_view dst_text, tern_view src_numbers, unsigned cell)
{
    text_op(k, TERN_OP_TEXT_FORMAT, dst_text, src_numbers, cell);
}

void tern_kernel_affine_select(tern_kernel *k, tern_view dst, tern_view src, tern_alu_op cmp, int32_t base,
                               int32_t channel_multiplier, const int32_t *steps, float on_false)
{
    tern_instr ins = blank(TERN_OP_AFFINE_SELECT, TERN_ENGINE_GPSIMD);
    ins.ap[TERN_AP_DST] = dst.ap;
    ins.ap[TERN_AP_IN0] = src.ap;
    ins.op0 = (uint8_t)cmp;
    ins.imm_i0 = base;
    ins.imm_i1 = channel_multiplier;
    ins.imm1.f = on_false;
    /* The affine pattern's per-dimension steps ride in IN1's dims (sizes = dst's). */
    ins.ap[TERN_AP_IN1] = dst.ap;
    for (unsigned d = 0; d < dst.ap.ndims; d++)
        ins.ap[TERN_AP_IN1].dims[d].step = steps ? steps[d] : 0;
    tern_kernel_emit(k, &ins, &src, 1, &dst, 1);
}

void tern_kernel_partition_reduce(tern_kernel *k, tern_view dst, tern_view src, tern_alu_op op)
{
    tern_instr ins = blank(TERN_OP_PARTITION_REDUCE, TERN_ENGINE_GPSIMD);
    ins.ap[TERN_AP_DST] = dst.ap;
    ins.ap[TERN_AP_IN0] = src.ap;
    ins.op0 = (uint8_t)op;
    tern_kernel_emit(k, &ins, &src, 1, &dst, 1);
}

/* Automatic queue choice. A queue is fed by one engine (the builder enforces it), and the Neuron runtime gives
 * each DMA queue one owner engine (a NEFF's def.json lists queue sets with their owner; profiles name them per
 * engine: qSyncIO0, qScalarSpillReload0, qVectorSpillReload, qGpSimdDynamic: ../shared/reference/trainium-arch.md
 * sections 5 and 13). So the queues are split by engine, fixed: Sync takes the first three quarters round-robin;
 * the last quarter (R queues) is split into equal shares, in the order ScalarE, GpSimd, VectorE, TensorE (the
 * first R mod 4 engines get one queue more; with fewer than 4 queues, engines past the R-th share the last),
 * and each engine takes its own share round-robin. The choice of one engine never depends on another's DMAs. */
static const tern_engine OTHER_ISSUERS[4] = {TERN_ENGINE_SCALAR, TERN_ENGINE_GPSIMD, TERN_ENGINE_VECTOR,
                                             TERN_ENGINE_TENSOR};

void kqueue_share(unsigned Q, tern_engine e, unsigned *first, unsigned *count)
{
    unsigned R = Q >= 8 ? Q / 4 : 0;
    if (e == TERN_ENGINE_SYNC || R == 0) {
        *first = 0;
        *count = Q - R;
        return;
    }
    unsigned idx = 0;
    while (idx < 4 && OTHER_ISSUERS[idx] != e)
        idx++;
    if (idx >= 4)
        idx = 3;
    unsigned base = R / 4, extra = R % 4, start = Q - R;
    if (base == 0) { /* fewer reserved queues than engines: one each, the last shared by the rest */
        *first = start + (idx < R ? idx : R - 1);
        *count = 1;
        return;
    }
    *first = start + idx * base + (idx < extra ? idx : extra);
    *count = base + (idx < extra);
}

uint8_t kpick_queue(tern_kernel *k, tern_engine e, int queue)
{
    if (queue >= 0)
        return (uint8_t)queue;
    unsigned first, count;
    kqueue_share(k->cfg.dma_queues, e, &first, &count);
    unsigned slot = e < TERN_ENGINE_COUNT ? (unsigned)e : (unsigned)TERN_ENGINE_SYNC;
    uint8_t q = (uint8_t)(first + k->next_queue[slot] % count);
    k->next_queue[slot]++;
    return q;
}

void tern_kernel_dma_copy(tern_kernel *k, tern_view dst, tern_view src, int queue)
{
    tern_kernel_dma_copy_on(k, TERN_ENGINE_SYNC, dst, src, queue);
}

void tern_kernel_dma_copy_on(tern_kernel *k, tern_engine e, tern_view dst, tern_view src, int queue)
{
    tern_instr ins = blank(TERN_OP_DMA_COPY, pick(e, TERN_ENGINE_SYNC));
    ins.ap[TERN_AP_DST] = dst.ap;
    ins.ap[TERN_AP_IN0] = src.ap;
    ins.queue = kpick_queue(k, (tern_engine)ins.engine, queue);
    tern_kernel_emit(k, &ins, &src, 1, &dst, 1);
}

void tern_kernel_dma_gather(tern_kernel *k, tern_view dst, tern_view table, tern_view indices, int queue)
{
    tern_instr ins = blank(TERN_OP_DMA_GATHER, TERN_ENGINE_SYNC);
    ins.ap[TERN_AP_DST] = dst.ap;
    ins.ap[TERN_AP_IN0] = table.ap;
    /* A 2-D HBM table [rows, cols] becomes rows as (strided) partitions so an index picks a row. */
    if (table.ap.mem == TERN_MEM_HBM && table.ap.ndims == 2 && table.ap.num_partitions == 1) {
        if (table.ap.dims[0].num > UINT16_MAX) {
            kfail(k, TERN_ERR_RANGE, "dma_gather: table of %u rows exceeds %u rows", table.ap.dims[0].num, UINT16_MAX);
            return;
        }
        tern_ap *t = &ins.ap[TERN_AP_IN0];
        t->num_partitions = (uint16_t)table.ap.dims[0].num;
        t->partition_step = table.ap.dims[0].step;
        t->dims[0] = table.ap.dims[1];
        memset(&t->dims[1], 0, sizeof t->dims[1]);
        t->ndims = 1;
    }
    ins.ap[TERN_AP_IN1] = indices.ap;
    ins.queue = kpick_queue(k, TERN_ENGINE_SYNC, queue);
    tern_kernel_emit(k, &ins, (tern_view[]){table, indices}, 2, &dst, 1);
}

void tern_kernel_dma_scatter(tern_kernel *k, tern_view table, tern_view src, tern_view indices, int queue)
{
    tern_instr ins = blank(TERN_OP_DMA_SCATTER, TERN_ENGINE_SYNC);
    ins.ap[TERN_AP_DST] = table.ap;
    ins.ap[TERN_AP_IN0] = src.ap;
    /* A 2-D HBM table [rows, cols] becomes rows as (strided) partitions so an index picks a row, as for gather. */
    if (table.ap.mem == TERN_MEM_HBM && table.ap.ndims == 2 && table.ap.num_partitions == 1) {
        if (table.ap.dims[0].num > UINT16_MAX) {
            kfail(k, TERN_ERR_RANGE, "dma_scatter: table of %u rows exceeds %u rows", table.ap.dims[0].num,
                  UINT16_MAX);
            return;
        }
        tern_ap *t = &ins.ap[TERN_AP_DST];
        t->num_partitions = (uint16_t)table.ap.dims[0].num;
        t->partition_step = table.ap.dims[0].step;
        t->dims[0] = table.ap.dims[1];
        memset(&t->dims[1], 0, sizeof t->dims[1]);
        t->ndims = 1;
    }
    ins.ap[TERN_AP_IN1] = indices.ap;
    ins.queue = kpick_queue(k, TERN_ENGINE_SYNC, queue);
    /* the whole table is the write for hazards: which rows an index picks is known only at run time */
    tern_kernel_emit(k, &ins, (tern_view[]){src, indices}, 2, &table, 1);
}

void tern_kernel_load(tern_kernel *k, tern_view dst_sbuf, tern_view src_hbm) { tern_kernel_dma_copy(k, dst_sbuf, src_hbm, -1); }
void tern_kernel_store(tern_kernel *k, tern_view dst_hbm, tern_view src_sbuf) { tern_kernel_dma_copy(k, dst_hbm, src_sbuf, -1); }
