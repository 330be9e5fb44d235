/* Shared helpers for the sim engine tests: a core built from a machine file ("neuroncore-v2"/"v3"), access
 * patterns, SBUF/PSUM host access in any dtype through fp32 or raw integers, and one-instruction programs run to
 * completion. Header-only (static functions) so each test stays one binary; include after check.h. */
#ifndef TERN_TESTS_SIM_TEST_UTIL_H
#define TERN_TESTS_SIM_TEST_UTIL_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tern/isa.h"
#include "tern/num.h"
#include "tern/sim.h"

/* A core for a machine name, fresh memories zeroed; aborts the test binary when the machine cannot load. */
static inline tern_core *st_core(const char *machine)
{
    tern_core_config cfg;
    tern_error err;
    tern_core *core = NULL;
    if (tern_core_config_load(machine, &cfg, &err) || tern_core_create(&cfg, NULL, &core, &err)) {
        fprintf(stderr, "cannot build core %s: %s\n", machine, err.msg);
        exit(2);
    }
    return core;
}

/* The same with `threads` host threads and a matmul path (TERN_MATMUL_*; core options otherwise default). */
static inline tern_core *st_core_path(const char *machine, unsigned threads, int matmul_path)
{
    tern_core_config cfg;
    tern_core_options o;
    tern_error err;
    tern_core *core = NULL;
    memset(&o, 0, sizeof o);
    o.threads = threads;
    o.matmul_path = matmul_path;
    if (tern_core_config_load(machine, &cfg, &err) || tern_core_create(&cfg, &o, &core, &err)) {
        fprintf(stderr, "cannot build core %s: %s\n", machine, err.msg);
        exit(2);
    }
    return core;
}

/* With `threads` host threads (core options otherwise default). */
static inline tern_core *st_core_threads(const char *machine, unsigned threads)
{
    return st_core_path(machine, threads, TERN_MATMUL_AUTO);
}

/* An access pattern: partitions [start, start+np), byte offset, up to 4 dims given as {step, num} pairs
 * (outermost first); nd == 0 gives an unused operand. */
static inline tern_ap st_ap(tern_mem mem, tern_dtype dt, unsigned start, unsigned np, uint64_t offset, unsigned nd,
                     const int32_t *steps, const uint32_t *nums)
{
    tern_ap ap;
    memset(&ap, 0, sizeof ap);
    ap.mem = (uint8_t)mem;
    ap.dtype = (uint8_t)dt;
    ap.ndims = (uint8_t)nd;
    ap.offset_reg = TERN_REG_NONE;
    ap.start_partition = (uint16_t)start;
    ap.num_partitions = (uint16_t)np;
    ap.offset = offset;
    for (unsigned k = 0; k < nd; k++) {
        ap.dims[k].step = steps[k];
        ap.dims[k].num = nums[k];
    }
    return ap;
}

/* Contiguous [np, n] at a byte offset. */
static inline tern_ap st_ap1(tern_mem mem, tern_dtype dt, unsigned start, unsigned np, uint64_t offset, uint32_t n)
{
    int32_t s = 1;
    return st_ap(mem, dt, start, np, offset, 1, &s, &n);
}

/* A zeroed instruction for an engine: no semaphores, every operand unused with no offset register. */
static inline tern_instr st_instr(tern_opcode op, tern_engine e)
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

/* Run a program of one instruction (plus optional register set-up on the same engine). */
static inline tern_status st_run(tern_core *core, const tern_instr *ins, tern_error *err)
{
    tern_program prog;
    tern_program_init(&prog);
    tern_status st = tern_program_append(&prog, ins, err);
    if (!st)
        st = tern_core_run(core, &prog, NULL, err);
    tern_program_free(&prog);
    return st;
}

/* r[reg] = value on engine e, then ins. */
static inline tern_status st_run_reg(tern_core *core, unsigned reg, int32_t value, const tern_instr *ins, tern_error *err)
{
    tern_program prog;
    tern_program_init(&prog);
    tern_instr set = st_instr(TERN_OP_REG_SET, (tern_engine)ins->engine);
    set.rd = (uint8_t)reg;
    set.imm_i0 = value;
    tern_status st = tern_program_append(&prog, &set, err);
    if (!st)
        st = tern_program_append(&prog, ins, err);
    if (!st)
        st = tern_core_run(core, &prog, NULL, err);
    tern_program_free(&prog);
    return st;
}

/* Write n fp32 values per partition (row-major [np][n]) as dtype dt, contiguous at a byte offset (RNE). */
static inline void st_write(tern_core *core, tern_mem mem, unsigned start, unsigned np, uint64_t offset, tern_dtype dt,
                     const float *v, size_t n)
{
    size_t es = tern_dtype_size(dt);
    uint8_t *buf = malloc(n * es + 1);
    tern_error err;
    for (unsigned p = 0; p < np; p++) {
        if (tern_convert_from_f32(dt, buf, v + (size_t)p * n, n, NULL, &err) ||
            tern_core_onchip_write(core, mem, start + p, offset, buf, n * es, &err)) {
            fprintf(stderr, "st_write: %s\n", err.msg);
            exit(2);
        }
    }
    free(buf);
}

/* Read n values per partition of dtype dt as fp32. */
static inline void st_read(tern_core *core, tern_mem mem, unsigned start, unsigned np, uint64_t offset, tern_dtype dt,
                    float *v, size_t n)
{
    size_t es = tern_dtype_size(dt);
    uint8_t *buf = malloc(n * es + 1);
    tern_error err;
    for (unsigned p = 0; p < np; p++) {
        if (tern_core_onchip_read(core, mem, start + p, offset, buf, n * es, &err) ||
            tern_convert_to_f32(v + (size_t)p * n, dt, buf, n, &err)) {
            fprintf(stderr, "st_read: %s\n", err.msg);
            exit(2);
        }
    }
    free(buf);
}

/* Raw element bit patterns (zero-extended) of an integer or float dtype. */
static inline void st_write_bits(tern_core *core, tern_mem mem, unsigned start, unsigned np, uint64_t offset, tern_dtype dt,
                          const uint32_t *v, size_t n)
{
    size_t es = tern_dtype_size(dt);
    tern_error err;
    for (unsigned p = 0; p < np; p++)
        for (size_t i = 0; i < n; i++) {
            uint32_t x = v[(size_t)p * n + i];
            uint8_t b[4];
            memcpy(b, &x, 4); /* little-endian host: low bytes first */
            if (tern_core_onchip_write(core, mem, start + p, offset + i * es, b, es, &err)) {
                fprintf(stderr, "st_write_bits: %s\n", err.msg);
                exit(2);
            }
        }
}

static inline void st_read_bits(tern_core *core, tern_mem mem, unsigned start, unsigned np, uint64_t offset, tern_dtype dt,
                         uint32_t *v, size_t n)
{
    size_t es = tern_dtype_size(dt);
    tern_error err;
    for (unsigned p = 0; p < np; p++)
        for (size_t i = 0; i < n; i++) {
            uint32_t x = 0;
            if (tern_core_onchip_read(core, mem, start + p, offset + i * es, &x, es, &err)) {
                fprintf(stderr, "st_read_bits: %s\n", err.msg);
                exit(2);
            }
            v[(size_t)p * n + i] = x;
        }
}

/* fp32 bits and ulp distance, for accuracy checks. */
static inline uint32_t st_f2u(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static inline float st_u2f(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Ulp distance between two finite floats of the same sign (or 0 when bit-identical); large for mismatches. */
static inline uint64_t st_ulps(float a, float b)
{
    if (a == b)
        return 0;
    if (isnan(a) || isnan(b))
        return (isnan(a) && isnan(b)) ? 0 : UINT64_MAX;
    int64_t ia = (int32_t)st_f2u(a), ib = (int32_t)st_f2u(b);
    if (ia < 0)
        ia = INT32_MIN - ia;
    if (ib < 0)
        ib = INT32_MIN - ib;
    return (uint64_t)(ia > ib ? ia - ib : ib - ia);
}

/* Expect a run to fail with a message containing each needle (NULL-terminated list). */
#define ST_EXPECT_FAIL(core, ins, ...)                                                                           \
    do {                                                                                                         \
        tern_error e_;                                                                                           \
        memset(&e_, 0, sizeof e_);                                                                               \
        tern_status s_ = st_run((core), (ins), &e_);                                                             \
        CHECK_MSG(s_ != TERN_OK, "expected failure, run succeeded");                                             \
        const char *nd_[] = {__VA_ARGS__, NULL};                                                                 \
        for (int k_ = 0; nd_[k_]; k_++)                                                                          \
            CHECK_STR_CONTAINS(e_.msg, nd_[k_]);                                                                 \
    } while (0)

#define ST_EXPECT_OK(core, ins)                                                                                  \
    do {                                                                                                         \
        tern_error e_;                                                                                           \
        memset(&e_, 0, sizeof e_);                                                                               \
        tern_status s_ = st_run((core), (ins), &e_);                                                             \
        CHECK_MSG(s_ == TERN_OK, "run failed: %s", e_.msg);                                                      \
    } while (0)

#endif
