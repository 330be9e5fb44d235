/* The access-pattern size rule (docs/isa-semantics.md, "Access-pattern size"): an operand whose element count
 * overflows 64 bits or exceeds tern's per-instruction limit, or whose byte span (steps x counts, checked math)
 * is larger than the memory it addresses, is refused by the rules -- for a program built in memory, statically
 * (tern_instr_check) and when run -- with a message naming the instruction, the operand and the value. A step-0
 * broadcast that rereads the same bytes stays legal and runs. Includes issue 10's crash case (four [0, 65536]
 * free dimensions: 2^64 elements that used to wrap to 0). */
#include "check.h"
#include "sim_test_util.h"

static tern_instr memset_instr(unsigned np, unsigned nd, const int32_t *steps, const uint32_t *nums)
{
    tern_instr ins = st_instr(TERN_OP_MEMSET, TERN_ENGINE_VECTOR);
    ins.ap[TERN_AP_DST] = st_ap(TERN_MEM_SBUF, TERN_DTYPE_FP32, 0, np, 0, nd, steps, nums);
    ins.imm0.f = 3.0f;
    return ins;
}

int main(void)
{
    tern_core *core = st_core("trn1.2xlarge");
    const tern_core_config *cfg = tern_core_get_config(core);
    tern_error err;
    tern_error_clear(&err);

    TEST_BEGIN("free-element count saturates instead of wrapping");
    const int32_t z4[4] = {0, 0, 0, 0};
    const uint32_t n64k[4] = {65536, 65536, 65536, 65536};
    tern_instr crash = memset_instr(1, 4, z4, n64k);
    CHECK_EQ_HEX(tern_ap_free_elems(&crash.ap[TERN_AP_DST]), UINT64_MAX);
    const uint32_t with_zero[4] = {65536, 65536, 65536, 0};
    tern_ap az = st_ap(TERN_MEM_SBUF, TERN_DTYPE_FP32, 0, 1, 0, 4, z4, with_zero);
    CHECK_EQ_INT(tern_ap_free_elems(&az), 0);
    const uint32_t fit[4] = {65536, 65536, 65536, 65535};
    tern_ap af = st_ap(TERN_MEM_SBUF, TERN_DTYPE_FP32, 0, 1, 0, 4, z4, fit);
    CHECK_EQ_HEX(tern_ap_free_elems(&af), 0xFFFF000000000000ull);

    TEST_BEGIN("issue 10 crash: 2^64 elements refused statically and at run time");
    CHECK_EQ_INT(tern_instr_check(cfg, 0, 1, &crash, &err), TERN_ERR_RANGE);
    CHECK_STR_CONTAINS(err.msg, "memset");
    CHECK_STR_CONTAINS(err.msg, "operand dst: 4 free dimensions [65536 x 65536 x 65536 x 65536] x 1 partitions: "
                                "element count overflows 64 bits");
    tern_error_clear(&err);
    CHECK_EQ_INT(st_run(core, &crash, &err), TERN_ERR_RANGE);
    CHECK_STR_CONTAINS(err.msg, "element count overflows 64 bits");
    /* the machine-independent half, as the isa layer states it */
    char why[256];
    CHECK_EQ_INT(tern_ap_size_check(&crash.ap[TERN_AP_DST], why, sizeof why), -1);
    CHECK_STR_CONTAINS(why, "element count overflows 64 bits");
    tern_ap unused;
    memset(&unused, 0, sizeof unused);
    CHECK_EQ_INT(tern_ap_size_check(&unused, why, sizeof why), 0);

    TEST_BEGIN("tern's per-instruction element limit (2^32 - 1)");
    const uint32_t at_limit[2] = {65535, 65537}; /* 4294967295 = the limit exactly, one partition */
    tern_instr lim = memset_instr(1, 2, z4, at_limit);
    CHECK_EQ_INT(tern_instr_check(cfg, 0, 1, &lim, &err), TERN_OK);
    const uint32_t over[2] = {65536, 65536}; /* 2^32: one above */
    lim = memset_instr(1, 2, z4, over);
    CHECK_EQ_INT(tern_instr_check(cfg, 0, 1, &lim, &err), TERN_ERR_RANGE);
    CHECK_STR_CONTAINS(err.msg, "4294967296 elements, above tern's per-instruction limit of 4294967295");
    /* partitions count too: 2 x 2^31 */
    const uint32_t half[2] = {32768, 65536};
    lim = memset_instr(2, 2, z4, half);
    CHECK_EQ_INT(tern_instr_check(cfg, 0, 1, &lim, &err), TERN_ERR_RANGE);
    CHECK_STR_CONTAINS(err.msg, "x 2 partitions: 4294967296 elements");

    TEST_BEGIN("a step-0 broadcast within the limit stays legal and runs");
    const int32_t bs[2] = {0, 1};
    const uint32_t bn[2] = {64, 8}; /* 64 rereads of 8 fp32 in each of 128 partitions */
    tern_instr bc = memset_instr(128, 2, bs, bn);
    CHECK_EQ_INT(tern_instr_check(cfg, 0, 1, &bc, &err), TERN_OK);
    tern_error_clear(&err);
    CHECK_MSG(st_run(core, &bc, &err) == TERN_OK, "broadcast memset failed: %s", err.msg);
    float got[128 * 9];
    st_read(core, TERN_MEM_SBUF, 0, 128, 0, TERN_DTYPE_FP32, got, 9);
    int right = 1;
    for (int p = 0; p < 128; p++)
        for (int i = 0; i < 9; i++)
            right &= got[p * 9 + i] == (i < 8 ? 3.0f : 0.0f);
    CHECK_MSG(right, "broadcast memset wrote the wrong bytes (partition 0: %g .. %g)", got[0], got[8]);

    TEST_BEGIN("byte span larger than the memory");
    const int32_t far[2] = {INT32_MAX, 1};
    const uint32_t fn[2] = {3, 2};
    tern_instr sp = memset_instr(1, 2, far, fn);
    CHECK_EQ_INT(tern_instr_check(cfg, 0, 1, &sp, &err), TERN_ERR_RANGE);
    CHECK_STR_CONTAINS(err.msg, "byte span of 17179869184 bytes (elements 0..4294967295 x 4 bytes) is larger than "
                                "SBUF's bytes per partition");
    /* a register offset moves the span, it cannot shrink it: refused statically too */
    sp.ap[TERN_AP_DST].offset_reg = 3;
    CHECK_EQ_INT(tern_instr_check(cfg, 0, 1, &sp, &err), TERN_ERR_RANGE);
    CHECK_STR_CONTAINS(err.msg, "byte span of 17179869184 bytes");
    /* negative steps reach below the base: the span counts both sides */
    const int32_t neg[2] = {-20000, 20000};
    const uint32_t nn[2] = {2, 2};
    sp = memset_instr(1, 2, neg, nn);
    sp.ap[TERN_AP_DST].offset_reg = 3;
    CHECK_EQ_INT(tern_instr_check(cfg, 0, 1, &sp, &err), TERN_OK); /* 40001 x 4 bytes < 192 KiB */
    const int32_t neg2[2] = {-30000, 30000};
    sp = memset_instr(1, 2, neg2, nn);
    CHECK_EQ_INT(tern_instr_check(cfg, 0, 1, &sp, &err), TERN_ERR_RANGE);
    CHECK_STR_CONTAINS(err.msg, "(elements -30000..30000 x 4 bytes)");

    TEST_BEGIN("offset beyond the memory");
    const int32_t one[1] = {1};
    const uint32_t n1[1] = {1};
    tern_instr off = memset_instr(1, 1, one, n1);
    off.ap[TERN_AP_DST].offset = UINT64_MAX;
    CHECK_EQ_INT(tern_instr_check(cfg, 0, 1, &off, &err), TERN_ERR_RANGE);
    CHECK_STR_CONTAINS(err.msg, "offset 18446744073709551615 beyond SBUF's bytes per partition");

    TEST_BEGIN("HBM span with the partition step overflows 64 bits");
    tern_instr dma = st_instr(TERN_OP_DMA_COPY, TERN_ENGINE_SYNC);
    dma.ap[TERN_AP_DST] = st_ap1(TERN_MEM_SBUF, TERN_DTYPE_FP32, 0, 2, 0, 4);
    dma.ap[TERN_AP_IN0] = st_ap1(TERN_MEM_HBM, TERN_DTYPE_FP32, 0, 2, 0, 4);
    CHECK_MSG(tern_instr_check(cfg, 0, 1, &dma, &err) == TERN_OK, "plain dma refused: %s", err.msg);
    dma.ap[TERN_AP_IN0].partition_step = INT64_MAX;
    CHECK_EQ_INT(tern_instr_check(cfg, 0, 1, &dma, &err), TERN_ERR_RANGE);
    CHECK_STR_CONTAINS(err.msg, "operand in0: byte span of the pattern (steps x counts and the partition step) "
                                "overflows 64 bits");
    dma.ap[TERN_AP_IN0].partition_step = INT64_MAX / 8; /* fits 64 bits, but far more than HBM */
    CHECK_EQ_INT(tern_instr_check(cfg, 0, 1, &dma, &err), TERN_ERR_RANGE);
    CHECK_STR_CONTAINS(err.msg, "is larger than HBM");

    TEST_BEGIN("program tensor bytes saturate");
    tern_program_tensor t;
    memset(&t, 0, sizeof t);
    strcpy(t.name, "big");
    t.kind = TERN_TENSOR_INPUT;
    t.dtype = TERN_DTYPE_FP32;
    t.ndims = 4;
    for (int d = 0; d < 4; d++)
        t.shape[d] = UINT32_MAX;
    CHECK_EQ_HEX(tern_program_tensor_bytes(&t), UINT64_MAX); /* saturates: never a small wrapped size */
    t.shape[1] = 1000;
    t.shape[2] = t.shape[3] = 1;
    CHECK_EQ_HEX(tern_program_tensor_bytes(&t), (uint64_t)UINT32_MAX * 1000 * 4);

    tern_core_free(core);
    return check_report();
}
