/* Shared by the ISA codec and assembler tests (and the fuzzers' seed-corpus writer): a deterministic generator of
 * random well-formed programs that reach every opcode on every engine allowed to issue it and every field of
 * tern_instr across its whole valid range (NaN/inf/subnormal immediates, extreme offsets and steps, unused
 * operands that still carry values), and a field-by-field program comparison that reports the first difference.
 * Header-only so each test file stays one binary. */
#ifndef TERN_TESTS_ISA_TESTGEN_H
#define TERN_TESTS_ISA_TESTGEN_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "tern/isa.h"
#include "tern/num.h"

/* xorshift64*: fixed seeds make every run identical. */
typedef struct {
    uint64_t s;
} gen_rng;

static inline uint64_t gen_u64(gen_rng *r)
{
    r->s ^= r->s >> 12;
    r->s ^= r->s << 25;
    r->s ^= r->s >> 27;
    return r->s * 0x2545F4914F6CDD1DULL;
}
static inline uint32_t gen_below(gen_rng *r, uint32_t n) { return (uint32_t)(gen_u64(r) % n); }
static inline int gen_chance(gen_rng *r, unsigned percent) { return gen_below(r, 100) < percent; }

/* 32 bits biased toward interesting values: zeros, small integers, specials, NaN payloads, extremes. */
static inline uint32_t gen_bits32(gen_rng *r)
{
    static const uint32_t special[] = {0x00000000u, 0x80000000u, 0x3f800000u, 0xbf800000u, 0x7f800000u,
                                       0xff800000u, 0x7fc00000u, 0xffc00000u, 0x7fc00001u, 0x7f800001u,
                                       0xffffffffu, 0x00000001u, 0x80000001u, 0x007fffffu, 0x00800000u,
                                       0x7f7fffffu, 0xff7fffffu, 0x3dcccccdu, 0x3eaaaaabu, 0x40200000u,
                                       0x7fffffffu, 0x4b800001u, 0x00000005u, 0xfffffffbu};
    switch (gen_below(r, 4)) {
    case 0: return special[gen_below(r, (uint32_t)(sizeof special / sizeof special[0]))];
    case 1: return gen_below(r, 2000) - 1000u;
    default: return (uint32_t)gen_u64(r);
    }
}
static inline uint64_t gen_bits64(gen_rng *r)
{
    switch (gen_below(r, 4)) {
    case 0: return gen_chance(r, 50) ? 0 : (gen_chance(r, 50) ? UINT64_MAX : 0x8000000000000000ULL);
    case 1: return gen_below(r, 1u << 20);
    default: return gen_u64(r);
    }
}

static inline void gen_ap(gen_rng *r, tern_ap *ap)
{
    memset(ap, 0, sizeof *ap);
    ap->offset_reg = TERN_REG_NONE;
    if (gen_chance(r, 40))
        return; /* unused */
    ap->mem = (uint8_t)gen_below(r, TERN_MEM_COUNT);
    ap->dtype = (uint8_t)gen_below(r, TERN_DTYPE_COUNT);
    ap->ndims = (uint8_t)gen_below(r, TERN_AP_MAX_DIMS + 1);
    ap->offset_reg = gen_chance(r, 70) ? TERN_REG_NONE : (uint8_t)gen_below(r, TERN_REG_NONE);
    ap->start_partition = (uint16_t)(gen_chance(r, 50) ? gen_below(r, 128) : gen_u64(r));
    ap->num_partitions = (uint16_t)(gen_chance(r, 50) ? gen_below(r, 129) : gen_u64(r));
    ap->partition_step = gen_chance(r, 60) ? 0 : (int64_t)gen_bits64(r);
    ap->offset = gen_bits64(r);
    for (unsigned d = 0; d < ap->ndims; d++) {
        ap->dims[d].step = (int32_t)gen_bits32(r);
        ap->dims[d].num = gen_bits32(r);
    }
}

/* A random instruction for engine e (an opcode the table lets e issue). */
static inline void gen_instr(gen_rng *r, unsigned e, tern_instr *ins)
{
    memset(ins, 0, sizeof *ins);
    unsigned op;
    do
        op = gen_below(r, TERN_OP_COUNT);
    while (!(tern_opcode_get((tern_opcode)op)->engines & (1u << e)));
    ins->opcode = (uint16_t)op;
    ins->engine = (uint8_t)e;
    int sparse = gen_chance(r, 30); /* mostly-default instructions, like real code */
    ins->op0 = (uint8_t)(sparse ? 0 : gen_below(r, op == TERN_OP_BRANCH ? TERN_CMP_COUNT : TERN_ALU_COUNT));
    ins->op1 = (uint8_t)(sparse ? 0 : gen_below(r, TERN_ALU_COUNT));
    ins->func = (uint8_t)(sparse ? 0 : gen_below(r, TERN_ACT_COUNT));
    ins->queue = (uint8_t)(sparse ? 0 : gen_below(r, 16));
    ins->rd = (uint8_t)(sparse ? 0 : gen_below(r, 256));
    ins->ra = (uint8_t)(sparse ? 0 : gen_below(r, 256));
    ins->rb = (uint8_t)(sparse ? 0 : gen_below(r, 256));
    ins->flags = (uint16_t)(sparse ? 0 : gen_below(r, 0x200));
    ins->wait_sem = gen_chance(r, 50) ? TERN_SEM_NONE : (uint8_t)gen_below(r, TERN_SEM_NONE);
    ins->wait_value = ins->wait_sem == TERN_SEM_NONE ? 0 : gen_bits32(r);
    ins->signal_sem = gen_chance(r, 50) ? TERN_SEM_NONE : (uint8_t)gen_below(r, TERN_SEM_NONE);
    ins->imm0.i = sparse ? 0 : (int32_t)gen_bits32(r);
    ins->imm1.i = sparse ? 0 : (int32_t)gen_bits32(r);
    ins->imm_i0 = sparse ? 0 : (int32_t)gen_bits32(r);
    ins->imm_i1 = sparse ? 0 : (int32_t)gen_bits32(r);
    for (unsigned k = 0; k < TERN_INSTR_OPERANDS; k++)
        gen_ap(r, &ins->ap[k]);
}

/* A random program: up to max_per_stream instructions per engine. */
static inline void gen_program(gen_rng *r, tern_program *p, unsigned max_per_stream)
{
    static const char chars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._+-";
    tern_program_init(p);
    unsigned mlen = gen_chance(r, 20) ? 0 : (gen_chance(r, 10) ? 63 : gen_below(r, 20));
    for (unsigned i = 0; i < mlen; i++)
        p->machine[i] = chars[gen_below(r, (uint32_t)(sizeof chars - 1))];
    p->num_semaphores = gen_chance(r, 50) ? 32 : gen_bits32(r);
    for (unsigned e = 0; e < TERN_ENGINE_COUNT; e++) {
        unsigned n = max_per_stream ? gen_below(r, max_per_stream + 1) : 0;
        for (unsigned i = 0; i < n; i++) {
            tern_instr ins;
            gen_instr(r, e, &ins);
            tern_program_append(p, &ins, NULL);
        }
    }
    /* Interface tensors: 0..3 with random names, kinds, dtypes, shapes and addresses. */
    static const char nchars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-";
    unsigned nt = gen_below(r, 4);
    for (unsigned t = 0; t < nt; t++) {
        tern_program_tensor pt;
        memset(&pt, 0, sizeof pt);
        unsigned nlen = 1 + gen_below(r, gen_chance(r, 10) ? TERN_TENSOR_NAME_MAX - 1 : 12);
        for (unsigned i = 0; i < nlen; i++)
            pt.name[i] = nchars[gen_below(r, (uint32_t)(sizeof nchars - 1))];
        pt.name[0] = (char)('a' + t); /* unique */
        pt.kind = (uint8_t)gen_below(r, TERN_TENSOR_KIND_COUNT);
        pt.dtype = (uint8_t)gen_below(r, TERN_DTYPE_COUNT);
        pt.ndims = (uint8_t)(1 + gen_below(r, TERN_AP_MAX_DIMS));
        for (unsigned d = 0; d < pt.ndims; d++)
            pt.shape[d] = 1 + gen_below(r, gen_chance(r, 10) ? UINT32_MAX : 5000);
        pt.hbm_addr = gen_bits64(r);
        tern_program_add_tensor(p, &pt, NULL);
    }
}

/* One instruction of every opcode on every engine that may issue it, each with every field non-default. */
static inline void gen_every_opcode(tern_program *p)
{
    gen_rng r = {0x7e57c0de};
    tern_program_init(p);
    snprintf(p->machine, sizeof p->machine, "trn2");
    p->num_semaphores = 64;
    for (unsigned op = 0; op < TERN_OP_COUNT; op++)
        for (unsigned e = 0; e < TERN_ENGINE_COUNT; e++) {
            if (!(tern_opcode_get((tern_opcode)op)->engines & (1u << e)))
                continue;
            tern_instr ins;
            memset(&ins, 0, sizeof ins);
            ins.opcode = (uint16_t)op;
            ins.engine = (uint8_t)e;
            ins.op0 = (uint8_t)(op == TERN_OP_BRANCH ? TERN_CMP_GE : 1 + op % (TERN_ALU_COUNT - 1));
            ins.op1 = (uint8_t)(1 + (op * 7) % (TERN_ALU_COUNT - 1));
            ins.func = (uint8_t)(1 + op % (TERN_ACT_COUNT - 1));
            ins.queue = (uint8_t)(1 + op % 15);
            ins.rd = (uint8_t)(1 + op);
            ins.ra = (uint8_t)(2 + op);
            ins.rb = 255;
            ins.flags = 0x1FF;
            ins.wait_sem = (uint8_t)(op % 64);
            ins.wait_value = 1u + op;
            ins.signal_sem = 254;
            ins.imm0.f = 2.5f + (float)op;
            ins.imm1.f = -0.1f * (float)op - 1.0f;
            ins.imm_i0 = INT32_MIN + (int32_t)op;
            ins.imm_i1 = INT32_MAX - (int32_t)op;
            for (unsigned k = 0; k < TERN_INSTR_OPERANDS; k++) {
                tern_ap *ap = &ins.ap[k];
                ap->mem = (uint8_t)(1 + (op + k) % (TERN_MEM_COUNT - 1));
                ap->dtype = (uint8_t)((op + k) % TERN_DTYPE_COUNT);
                ap->ndims = TERN_AP_MAX_DIMS;
                ap->offset_reg = (uint8_t)(k + op);
                ap->start_partition = (uint16_t)(1 + k);
                ap->num_partitions = 65535;
                ap->partition_step = INT64_MIN + (int64_t)k;
                ap->offset = UINT64_MAX - k;
                for (unsigned d = 0; d < TERN_AP_MAX_DIMS; d++) {
                    ap->dims[d].step = (int32_t)(gen_u64(&r)) | 1;
                    ap->dims[d].num = UINT32_MAX - d;
                }
            }
            tern_program_append(p, &ins, NULL);
        }
}

/* First difference between two instructions, or NULL. */
static inline const char *instr_diff(const tern_instr *a, const tern_instr *b)
{
#define F(x) if (a->x != b->x) return #x
    F(opcode); F(engine); F(op0); F(op1); F(func); F(queue); F(rd); F(ra); F(rb); F(flags);
    F(wait_sem); F(signal_sem); F(wait_value); F(imm0.i); F(imm1.i); F(imm_i0); F(imm_i1);
    for (unsigned k = 0; k < TERN_INSTR_OPERANDS; k++) {
        F(ap[k].mem); F(ap[k].dtype); F(ap[k].ndims); F(ap[k].offset_reg); F(ap[k].start_partition);
        F(ap[k].num_partitions); F(ap[k].partition_step); F(ap[k].offset);
        for (unsigned d = 0; d < TERN_AP_MAX_DIMS; d++) {
            F(ap[k].dims[d].step); F(ap[k].dims[d].num);
        }
    }
#undef F
    return NULL;
}

/* Field-by-field program equality; on a difference writes where to why and returns 0. */
static inline int program_equal(const tern_program *a, const tern_program *b, char *why, size_t n)
{
    if (strcmp(a->machine, b->machine)) {
        snprintf(why, n, "machine '%s' vs '%s'", a->machine, b->machine);
        return 0;
    }
    if (a->num_semaphores != b->num_semaphores) {
        snprintf(why, n, "num_semaphores %u vs %u", a->num_semaphores, b->num_semaphores);
        return 0;
    }
    if (!tern_program_equal(a, b, NULL, 0) && a->num_tensors != b->num_tensors) {
        snprintf(why, n, "%zu vs %zu tensors", a->num_tensors, b->num_tensors);
        return 0;
    }
    for (size_t t = 0; t < a->num_tensors; t++) {
        const tern_program_tensor *x = &a->tensors[t], *y = &b->tensors[t];
        if (strncmp(x->name, y->name, TERN_TENSOR_NAME_MAX) || x->kind != y->kind || x->dtype != y->dtype ||
            x->ndims != y->ndims || memcmp(x->shape, y->shape, sizeof x->shape) || x->hbm_addr != y->hbm_addr) {
            snprintf(why, n, "tensor %zu ('%s') differs", t, x->name);
            return 0;
        }
    }
    for (unsigned e = 0; e < TERN_ENGINE_COUNT; e++) {
        if (a->streams[e].count != b->streams[e].count) {
            snprintf(why, n, "%s stream: %zu vs %zu instructions", tern_engine_name((tern_engine)e),
                     a->streams[e].count, b->streams[e].count);
            return 0;
        }
        for (size_t i = 0; i < a->streams[e].count; i++) {
            const char *f = instr_diff(&a->streams[e].instrs[i], &b->streams[e].instrs[i]);
            if (f) {
                snprintf(why, n, "%s stream instruction %zu: field %s differs", tern_engine_name((tern_engine)e), i,
                         f);
                return 0;
            }
        }
    }
    return 1;
}

#endif
