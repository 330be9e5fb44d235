/* The binary program format: encode/decode round trips of random programs and of one instruction per opcode per
 * engine with every field set; byte-level layout against the documented offsets (and CRC-32 against its standard
 * check value); and the decoder's refusals: every truncation length, bad magic/version/sizes/counts, trailing
 * bytes, each out-of-range field at its exact byte offset, reserved bytes, checksum, plus a seeded mutation sweep
 * where any accepted input must re-encode to the same bytes. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "isa/codec.h"
#include "isa_testgen.h"

#define HDR 112u
#define REC 320u
#define TREC 96u

static uint32_t rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static void wr32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static void fix_crc(uint8_t *b, size_t len) { wr32(b + 16, isa_crc32(b + 20, len - 20)); }

/* Decode a private exact-size copy (so ASan sees any over-read), expecting failure; returns the message. */
static const char *decode_fails(const uint8_t *buf, size_t len, tern_error *err)
{
    uint8_t *copy = malloc(len ? len : 1);
    if (len)
        memcpy(copy, buf, len);
    tern_program p;
    tern_status st = tern_program_decode(copy, len, &p, err);
    free(copy);
    tern_program_free(&p);
    if (st == TERN_OK) {
        snprintf(err->msg, sizeof err->msg, "(decode unexpectedly succeeded)");
        return NULL;
    }
    return err->msg;
}

static void test_crc(void)
{
    TEST_BEGIN("crc32 check value");
    CHECK_EQ_HEX(isa_crc32((const uint8_t *)"123456789", 9), 0xCBF43926u); /* the CRC-32/ISO-HDLC check value */
    CHECK_EQ_HEX(isa_crc32((const uint8_t *)"", 0), 0u);
}

static void roundtrip(const tern_program *p, const char *what)
{
    uint8_t *buf = NULL, *buf2 = NULL;
    size_t len = 0, len2 = 0;
    tern_error err;
    tern_program q;
    char why[256];
    tern_status st = tern_program_encode(p, &buf, &len, &err);
    CHECK_MSG(st == TERN_OK, "%s: encode failed: %s", what, err.msg);
    if (st)
        return;
    CHECK_EQ_INT(len, HDR + REC * tern_program_instr_count(p) + 4 + TREC * p->num_tensors);
    st = tern_program_decode(buf, len, &q, &err);
    CHECK_MSG(st == TERN_OK, "%s: decode failed: %s", what, err.msg);
    if (!st) {
        CHECK_MSG(program_equal(p, &q, why, sizeof why), "%s: decode(encode(p)) != p: %s", what, why);
        st = tern_program_encode(&q, &buf2, &len2, &err);
        CHECK_MSG(st == TERN_OK && len2 == len && !memcmp(buf, buf2, len), "%s: re-encoding differs", what);
    }
    tern_program_free(&q);
    free(buf);
    free(buf2);
}

static void test_roundtrips(void)
{
    TEST_BEGIN("codec round trip");
    tern_program p;
    tern_program_init(&p);
    roundtrip(&p, "empty program");
    tern_program_free(&p);

    gen_every_opcode(&p);
    roundtrip(&p, "every opcode on every engine, every field set");
    tern_program_free(&p);

    gen_rng r = {0x5eed0001};
    for (int it = 0; it < 300; it++) {
        char what[64];
        snprintf(what, sizeof what, "random program %d", it);
        gen_program(&r, &p, 12);
        roundtrip(&p, what);
        tern_program_free(&p);
    }
}

/* Byte positions as docs/isa.md documents them. */
static void test_layout(void)
{
    TEST_BEGIN("codec layout");
    tern_program p;
    tern_program_init(&p);
    snprintf(p.machine, sizeof p.machine, "trn1");
    p.num_semaphores = 0x01020304;
    tern_instr ins;
    memset(&ins, 0, sizeof ins);
    ins.opcode = TERN_OP_TENSOR_SCALAR;
    ins.engine = TERN_ENGINE_VECTOR;
    ins.op0 = TERN_ALU_MULT;
    ins.op1 = TERN_ALU_ADD;
    ins.flags = TERN_FLAG_REV0 | TERN_FLAG_S1_AP;
    ins.wait_sem = 3;
    ins.wait_value = 0xA1B2C3D4u;
    ins.signal_sem = TERN_SEM_NONE;
    ins.imm0.f = 2.5f;
    ins.imm_i1 = -2;
    for (int k = 0; k < TERN_INSTR_OPERANDS; k++)
        ins.ap[k].offset_reg = TERN_REG_NONE;
    ins.ap[1].mem = TERN_MEM_HBM;
    ins.ap[1].dtype = TERN_DTYPE_BF16;
    ins.ap[1].ndims = 2;
    ins.ap[1].offset_reg = 7;
    ins.ap[1].start_partition = 0x1234;
    ins.ap[1].num_partitions = 128;
    ins.ap[1].partition_step = -512;
    ins.ap[1].offset = 0x1122334455667788ULL;
    ins.ap[1].dims[0].step = 512;
    ins.ap[1].dims[0].num = 4;
    ins.ap[1].dims[1].step = -1;
    ins.ap[1].dims[1].num = 0xFFFFFFFFu;
    tern_program_append(&p, &ins, NULL);
    uint8_t *b;
    size_t len;
    tern_error err;
    CHECK(tern_program_encode(&p, &b, &len, &err) == TERN_OK);
    CHECK_EQ_INT(len, HDR + REC + 4); /* + the tensor count (0) */
    CHECK(!memcmp(b, "TERNPRG1", 8));
    CHECK_EQ_INT(rd32(b + 8), 1);
    CHECK_EQ_INT(rd32(b + 12), HDR);
    CHECK_EQ_HEX(rd32(b + 16), isa_crc32(b + 20, len - 20));
    CHECK_EQ_INT(rd32(b + 20), REC);
    CHECK_EQ_HEX(rd32(b + 24), 0x01020304u);
    CHECK_EQ_INT(rd32(b + 28 + 4 * TERN_ENGINE_TENSOR), 0);
    CHECK_EQ_INT(rd32(b + 28 + 4 * TERN_ENGINE_VECTOR), 1);
    CHECK(!memcmp(b + 48, "trn1\0\0\0", 8));
    const uint8_t *r = b + HDR;
    CHECK_EQ_INT(r[0] | (r[1] << 8), TERN_OP_TENSOR_SCALAR);
    CHECK_EQ_INT(r[2], TERN_ENGINE_VECTOR);
    CHECK_EQ_INT(r[3], TERN_ALU_MULT);
    CHECK_EQ_INT(r[4], TERN_ALU_ADD);
    CHECK_EQ_HEX(r[10] | (r[11] << 8), TERN_FLAG_REV0 | TERN_FLAG_S1_AP);
    CHECK_EQ_INT(r[12], 3);
    CHECK_EQ_INT(r[13], 0xFF);
    CHECK_EQ_HEX(rd32(r + 16), 0xA1B2C3D4u);
    CHECK_EQ_HEX(rd32(r + 20), 0x40200000u); /* 2.5f */
    CHECK_EQ_HEX(rd32(r + 32), 0xFFFFFFFEu);
    const uint8_t *a = r + 36 + 56; /* in0 */
    CHECK_EQ_INT(a[0], TERN_MEM_HBM);
    CHECK_EQ_INT(a[1], TERN_DTYPE_BF16);
    CHECK_EQ_INT(a[2], 2);
    CHECK_EQ_INT(a[3], 7);
    CHECK_EQ_HEX(a[4] | (a[5] << 8), 0x1234);
    CHECK_EQ_HEX(rd32(a + 8), 0xFFFFFE00u); /* -512, low word */
    CHECK_EQ_HEX(rd32(a + 12), 0xFFFFFFFFu);
    CHECK_EQ_HEX(rd32(a + 16), 0x55667788u);
    CHECK_EQ_HEX(rd32(a + 20), 0x11223344u);
    CHECK_EQ_INT(rd32(a + 24), 512);
    CHECK_EQ_INT(rd32(a + 28), 4);
    CHECK_EQ_HEX(rd32(a + 32), 0xFFFFFFFFu);
    CHECK_EQ_HEX(rd32(a + 36), 0xFFFFFFFFu);
    CHECK_EQ_INT(rd32(a + 40), 0); /* dims[2] unused: zero */
    CHECK_EQ_INT(r[36 + 3], 0xFF);  /* dst offset_reg: none */
    free(b);
    tern_program_free(&p);
}

/* A small valid encoding to corrupt: two vector instructions, one sync instruction. */
static uint8_t *sample(size_t *len)
{
    tern_program p;
    gen_rng r = {42};
    tern_program_init(&p);
    snprintf(p.machine, sizeof p.machine, "neuroncore-v2");
    for (int i = 0; i < 3; i++) {
        tern_instr ins;
        gen_instr(&r, i < 2 ? TERN_ENGINE_VECTOR : TERN_ENGINE_SYNC, &ins);
        tern_program_append(&p, &ins, NULL);
    }
    uint8_t *b = NULL;
    tern_error err;
    TERN_ASSERT(tern_program_encode(&p, &b, len, &err) == TERN_OK);
    tern_program_free(&p);
    return b;
}

/* A program with two tensors, to corrupt its tensor section. */
static uint8_t *sample_tensors(size_t *len)
{
    tern_program p;
    tern_program_init(&p);
    tern_program_tensor t;
    memset(&t, 0, sizeof t);
    snprintf(t.name, sizeof t.name, "lhsT");
    t.kind = TERN_TENSOR_INPUT;
    t.dtype = TERN_DTYPE_BF16;
    t.ndims = 2;
    t.shape[0] = 8192;
    t.shape[1] = 4096;
    t.hbm_addr = 4096;
    TERN_ASSERT(tern_program_add_tensor(&p, &t, NULL) == TERN_OK);
    snprintf(t.name, sizeof t.name, "out");
    t.kind = TERN_TENSOR_OUTPUT;
    t.hbm_addr = 0x4000000;
    TERN_ASSERT(tern_program_add_tensor(&p, &t, NULL) == TERN_OK);
    uint8_t *b = NULL;
    TERN_ASSERT(tern_program_encode(&p, &b, len, NULL) == TERN_OK);
    tern_program_free(&p);
    return b;
}

static void test_tensor_section(void)
{
    TEST_BEGIN("codec tensor section");
    size_t len;
    uint8_t *b = sample_tensors(&len), *c = malloc(len);
    tern_error err;
    CHECK_EQ_INT(len, HDR + 4 + 2 * TREC);
    CHECK_EQ_INT(rd32(b + HDR), 2);
    CHECK(memcmp(b + HDR + 4, "lhsT", 5) == 0);
    tern_program q;
    CHECK_EQ_INT(tern_program_decode(b, len, &q, &err), TERN_OK);
    const tern_program_tensor *t = tern_program_find_tensor(&q, "out");
    CHECK(t && t->kind == TERN_TENSOR_OUTPUT && t->shape[0] == 8192 && t->hbm_addr == 0x4000000);
    CHECK_EQ_INT(tern_program_tensor_bytes(t), 8192ull * 4096 * 2);
    tern_program_free(&q);
    const size_t t0 = HDR + 4, t1 = HDR + 4 + TREC;
#define TMUTATE(stmt) (memcpy(c, b, len), (stmt), fix_crc(c, len))
    TMUTATE(c[t0 + 2] = '!');
    CHECK_STR_CONTAINS(decode_fails(c, len, &err), "tensor 0: program: tensor 'lh!T': character 2 not one of");
    TMUTATE(c[t0 + 10] = 'x');
    CHECK_STR_CONTAINS(decode_fails(c, len, &err), "tensor 0: non-zero byte 0x78 after its name");
    TMUTATE(c[t0 + 52] = 1);
    CHECK_STR_CONTAINS(decode_fails(c, len, &err), "tensor 0: reserved byte is 0x01");
    TMUTATE(c[t0 + 48] = 7);
    CHECK_STR_CONTAINS(decode_fails(c, len, &err), "kind 7 unknown");
    TMUTATE(c[t1 + 50] = 5);
    CHECK_STR_CONTAINS(decode_fails(c, len, &err), "tensor 'out': rank 5 outside 1..4");
    TMUTATE(memcpy(c + t1, "lhsT", 5));
    CHECK_STR_CONTAINS(decode_fails(c, len, &err), "tensor 'lhsT' declared twice");
    TMUTATE(wr32(c + HDR, 3));
    CHECK_STR_CONTAINS(decode_fails(c, len, &err), "3 tensors, but only 2 records of 96 bytes remain");
    TMUTATE(memset(c + t0, 'a', 48));
    CHECK_STR_CONTAINS(decode_fails(c, len, &err), "name not NUL-terminated");
#undef TMUTATE
    free(b);
    free(c);
}

static void test_truncation(void)
{
    TEST_BEGIN("codec truncation");
    size_t len;
    uint8_t *b = sample(&len);
    tern_error err;
    int all = 1;
    for (size_t n = 0; n < len; n++) {
        const char *m = decode_fails(b, n, &err);
        if (!m || !strstr(m, "program decode: offset ") || err.code != TERN_ERR_PARSE) {
            CHECK_MSG(0, "length %zu of %zu: expected a parse error naming an offset, got '%s'", n, len, err.msg);
            all = 0;
            break;
        }
    }
    CHECK(all);
    /* A few exact messages. */
    CHECK_STR_CONTAINS(decode_fails(b, 0, &err), "offset 0: truncated: 0 bytes, header needs 112");
    CHECK_STR_CONTAINS(decode_fails(b, 50, &err), "offset 50: truncated");
    CHECK_STR_CONTAINS(decode_fails(b, HDR + REC + 5, &err),
                       "offset 32: vector stream: 2 instructions, but only 1 records of 320 bytes remain");
    CHECK_STR_CONTAINS(decode_fails(b, len - 5, &err), "sync stream: 1 instructions, but only 0 records");
    CHECK_STR_CONTAINS(decode_fails(b, len - 1, &err), "the tensor count needs");
    free(b);
}

static void test_header_errors(void)
{
    TEST_BEGIN("codec header errors");
    size_t len;
    uint8_t *b = sample(&len), *c = malloc(len + 8);
    tern_error err;
#define MUTATE(stmt) (memcpy(c, b, len), (stmt), fix_crc(c, len))
    MUTATE(c[3] = 'X');
    CHECK_STR_CONTAINS(decode_fails(c, len, &err), "offset 0: bad magic");
    CHECK_STR_CONTAINS(decode_fails((const uint8_t *)"ELF", 3, &err), "offset 0: bad magic");
    MUTATE(wr32(c + 8, 2));
    CHECK_STR_CONTAINS(decode_fails(c, len, &err), "offset 8: version 2 unsupported (this build reads 1)");
    CHECK_EQ_INT(err.code, TERN_ERR_UNSUPPORTED);
    MUTATE(wr32(c + 12, 111));
    CHECK_STR_CONTAINS(decode_fails(c, len, &err), "offset 12: header size 111");
    MUTATE(wr32(c + 20, 300));
    CHECK_STR_CONTAINS(decode_fails(c, len, &err), "offset 20: instruction record size 300");
    MUTATE(wr32(c + 28 + 4 * TERN_ENGINE_GPSIMD, 0xFFFFFFFFu));
    CHECK_STR_CONTAINS(decode_fails(c, len, &err), "offset 40: gpsimd stream: 4294967295 instructions, but only 1 records");
    MUTATE(wr32(c + 28 + 4 * TERN_ENGINE_SYNC, 0));
    CHECK_STR_CONTAINS(decode_fails(c, len, &err), "offset 752: ");
    memcpy(c, b, len);
    c[len] = 0;
    fix_crc(c, len + 1);
    CHECK_STR_CONTAINS(decode_fails(c, len + 1, &err), "1 trailing bytes");
    MUTATE(c[48 + 3] = ' ');
    CHECK_STR_CONTAINS(decode_fails(c, len, &err), "offset 51: machine name: byte 0x20 not allowed");
    MUTATE(c[48 + 20] = 'x');
    CHECK_STR_CONTAINS(decode_fails(c, len, &err), "offset 68: machine name: non-zero byte 0x78 after its end");
    MUTATE(memset(c + 48, 'a', 64));
    CHECK_STR_CONTAINS(decode_fails(c, len, &err), "offset 111: machine name");
    /* Checksum: flip a byte the field checks do not look at (imm_i0 of the first record). */
    memcpy(c, b, len);
    c[HDR + 28] ^= 0x40;
    CHECK_STR_CONTAINS(decode_fails(c, len, &err), "offset 16: checksum mismatch");
    memcpy(c, b, len);
    c[16] ^= 1;
    CHECK_STR_CONTAINS(decode_fails(c, len, &err), "offset 16: checksum mismatch");
    /* The unmodified sample decodes. */
    tern_program p;
    CHECK(tern_program_decode(b, len, &p, &err) == TERN_OK);
    tern_program_free(&p);
#undef MUTATE
    free(b);
    free(c);
}

/* Each field out of range, at its exact offset: record (stream-relative index) + field. */
static void test_field_errors(void)
{
    TEST_BEGIN("codec field errors");
    size_t len;
    uint8_t *b = sample(&len), *c = malloc(len);
    tern_error err;
    char want[256];
    const size_t r1 = HDR + REC;     /* vector stream, instruction 1 */
    const size_t r2 = HDR + 2 * REC; /* sync stream, instruction 0 */
    struct {
        size_t off;
        unsigned width;
        uint32_t value;
        const char *what;
    } cases[] = {
        {r1 + 0, 2, 1000, "instruction 1 (vector stream): opcode 1000 unknown"},
        {r1 + 0, 2, 0xFFFF, "instruction 1 (vector stream): opcode 65535 unknown"},
        {r1 + 2, 1, 9, "instruction 1 (vector stream): engine 9 unknown"},
        {r1 + 2, 1, TERN_ENGINE_SCALAR, "engine 2 (scalar) does not match its stream (vector)"},
        {r1 + 4, 1, 200, "op1 200: ALU operator unknown"},
        {r1 + 5, 1, 200, "func 200: activation function unknown"},
        {r1 + 6, 1, 16, "queue 16 out of range (valid 0..15)"},
        {r1 + 10, 2, 0x8200, "flags 0x8200 has unknown bits 0x8200"},
        {r1 + 36 + 0 * 56 + 0, 1, 4, "operand dst: memory 4 unknown"},
        {r1 + 36 + 1 * 56 + 1, 1, 99, "instruction 1 (vector stream): operand in0: dtype 99 unknown"},
        {r1 + 36 + 2 * 56 + 1, 1, 250, "operand in1: dtype 250 unknown"},
        {r1 + 36 + 3 * 56 + 2, 1, 5, "operand in2: ndims 5 out of range (valid 0..4)"},
        {r2 + 36 + 4 * 56 + 2, 1, 255, "instruction 0 (sync stream): operand extra: ndims 255"},
        {r1 + 14, 1, 1, "reserved byte is 0x01, must be zero"},
        {r1 + 319, 1, 0x80, "reserved byte is 0x80, must be zero"},
    };
    for (size_t i = 0; i < TERN_ARRAY_LEN(cases); i++) {
        memcpy(c, b, len);
        c[cases[i].off] = (uint8_t)cases[i].value;
        if (cases[i].width == 2)
            c[cases[i].off + 1] = (uint8_t)(cases[i].value >> 8);
        fix_crc(c, len);
        snprintf(want, sizeof want, "program decode: offset %zu: ", cases[i].off);
        const char *m = decode_fails(c, len, &err);
        CHECK_STR_CONTAINS(m, want);
        CHECK_STR_CONTAINS(m, cases[i].what);
    }
    /* The first value past each enum's end. */
    struct {
        size_t off;
        unsigned value;
        const char *pre, *post;
    } edges[] = {
        {r1 + 0, TERN_OP_COUNT, "opcode ", " unknown"},
        {r1 + 4, TERN_ALU_COUNT, "op1 ", ": ALU operator unknown"},
        {r1 + 5, TERN_ACT_COUNT, "func ", ": activation function unknown"},
        {r1 + 36 + 56 + 0, TERN_MEM_COUNT, "operand in0: memory ", " unknown"},
        {r1 + 36 + 56 + 1, TERN_DTYPE_COUNT, "operand in0: dtype ", " unknown"},
    };
    for (size_t i = 0; i < TERN_ARRAY_LEN(edges); i++) {
        char what[128];
        memcpy(c, b, len);
        c[edges[i].off] = (uint8_t)edges[i].value;
        fix_crc(c, len);
        snprintf(want, sizeof want, "program decode: offset %zu: ", edges[i].off);
        snprintf(what, sizeof what, "%s%u%s", edges[i].pre, edges[i].value, edges[i].post);
        const char *m = decode_fails(c, len, &err);
        CHECK_STR_CONTAINS(m, want);
        CHECK_STR_CONTAINS(m, what);
        /* the last valid value decodes (for the opcode: the last one this vector-engine record may issue, halt;
         * the opcodes after it are GpSimd's text conversions) */
        unsigned last = edges[i].off == r1 + 0 ? (unsigned)TERN_OP_HALT : edges[i].value - 1;
        c[edges[i].off] = (uint8_t)last;
        fix_crc(c, len);
        tern_program q;
        CHECK_MSG(tern_program_decode(c, len, &q, &err) == TERN_OK, "value %u at offset %zu: %s", last,
                  edges[i].off, err.msg);
        tern_program_free(&q);
    }
    /* Engine mask: an opcode the table does not allow on the record's engine. */
    memcpy(c, b, len);
    c[r1] = TERN_OP_MULTIPLY_MOVING;
    c[r1 + 1] = 0;
    fix_crc(c, len);
    snprintf(want, sizeof want, "offset %zu: instruction 1 (vector stream): multiply_moving cannot issue on the "
             "vector engine (allowed: tensor)", r1 + 2);
    CHECK_STR_CONTAINS(decode_fails(c, len, &err), want);
    /* op0 is a comparison for branch, an ALU operator otherwise. */
    memcpy(c, b, len);
    c[r2] = TERN_OP_BRANCH;
    c[r2 + 1] = 0;
    c[r2 + 3] = TERN_CMP_COUNT;
    fix_crc(c, len);
    snprintf(want, sizeof want, "offset %zu: instruction 0 (sync stream): op0 %d: comparison unknown", r2 + 3,
             TERN_CMP_COUNT);
    CHECK_STR_CONTAINS(decode_fails(c, len, &err), want);
    c[r2 + 3] = TERN_CMP_COUNT - 1;
    fix_crc(c, len);
    tern_program p;
    CHECK_MSG(tern_program_decode(c, len, &p, &err) == TERN_OK, "branch op0 ge: %s", err.msg);
    tern_program_free(&p);
    memcpy(c, b, len);
    c[r2] = TERN_OP_DMA_COPY;
    c[r2 + 1] = 0;
    c[r2 + 3] = TERN_ALU_COUNT;
    fix_crc(c, len);
    snprintf(want, sizeof want, "offset %zu: instruction 0 (sync stream): op0 %d: ALU operator unknown", r2 + 3,
             TERN_ALU_COUNT);
    CHECK_STR_CONTAINS(decode_fails(c, len, &err), want);
    /* A wait value without a wait semaphore. */
    memcpy(c, b, len);
    c[r1 + 12] = TERN_SEM_NONE;
    wr32(c + r1 + 16, 5);
    fix_crc(c, len);
    snprintf(want, sizeof want, "offset %zu: instruction 1 (vector stream): wait value 5 without a wait semaphore",
             r1 + 16);
    CHECK_STR_CONTAINS(decode_fails(c, len, &err), want);
    /* dims beyond ndims must be zero. */
    memcpy(c, b, len);
    memset(c + r1 + 36 + 56 + 24, 0, 32);
    c[r1 + 36 + 56 + 2] = 1;
    wr32(c + r1 + 36 + 56 + 24 + 8 * 3 + 4, 7);
    fix_crc(c, len);
    snprintf(want, sizeof want,
             "offset %zu: instruction 1 (vector stream): operand in0: dims[3] = [0,7] set beyond ndims 1",
             r1 + 36 + 56 + 48);
    CHECK_STR_CONTAINS(decode_fails(c, len, &err), want);
    free(b);
    free(c);
}

static void test_encode_errors(void)
{
    TEST_BEGIN("codec encode errors");
    tern_program p;
    tern_instr ins;
    gen_rng r = {7};
    uint8_t *b = (uint8_t *)&r;
    size_t len = 1;
    tern_error err;
    tern_program_init(&p);
    gen_instr(&r, TERN_ENGINE_VECTOR, &ins);
    ins.ap[1].ndims = 1;
    ins.ap[1].dtype = 99;
    tern_program_append(&p, &ins, NULL);
    CHECK(tern_program_encode(&p, &b, &len, &err) == TERN_ERR_INVALID);
    CHECK(b == NULL && len == 0);
    CHECK_STR_CONTAINS(err.msg, "program encode: instruction 0 (vector stream): operand in0: dtype 99 unknown");
    p.streams[TERN_ENGINE_VECTOR].instrs[0].ap[1].dtype = 0;
    p.streams[TERN_ENGINE_VECTOR].instrs[0].engine = TERN_ENGINE_SYNC; /* placed in the wrong stream */
    CHECK(tern_program_encode(&p, &b, &len, &err) == TERN_ERR_INVALID);
    CHECK_STR_CONTAINS(err.msg, "engine 4 (sync) does not match its stream (vector)");
    p.streams[TERN_ENGINE_VECTOR].instrs[0].engine = TERN_ENGINE_VECTOR;
    snprintf(p.machine, sizeof p.machine, "bad name");
    CHECK(tern_program_encode(&p, &b, &len, &err) == TERN_ERR_INVALID);
    CHECK_STR_CONTAINS(err.msg, "machine name: character 3");
    tern_program_free(&p);
}

/* Seeded mutations of valid encodings: no crash, no leak, and anything accepted re-encodes to the same bytes. */
static void test_mutation_sweep(void)
{
    TEST_BEGIN("codec mutation sweep");
    gen_rng r = {0xF022};
    int accepted = 0, rejected = 0, bad = 0;
    for (int it = 0; it < 3000; it++) {
        tern_program p;
        gen_program(&r, &p, 2);
        uint8_t *b;
        size_t len;
        tern_error err;
        TERN_ASSERT(tern_program_encode(&p, &b, &len, &err) == TERN_OK);
        tern_program_free(&p);
        unsigned flips = 1 + gen_below(&r, 3);
        for (unsigned k = 0; k < flips; k++)
            b[gen_below(&r, (uint32_t)len)] ^= (uint8_t)(1u << gen_below(&r, 8));
        if (gen_chance(&r, 70))
            fix_crc(b, len);
        size_t n = gen_chance(&r, 10) ? gen_below(&r, (uint32_t)len + 1) : len;
        uint8_t *c = malloc(n ? n : 1);
        memcpy(c, b, n);
        tern_status st = tern_program_decode(c, n, &p, &err);
        if (st == TERN_OK) {
            accepted++;
            uint8_t *b2;
            size_t len2;
            if (tern_program_encode(&p, &b2, &len2, &err) != TERN_OK || len2 != n || memcmp(b2, c, n))
                bad++;
            else
                free(b2);
        } else {
            rejected++;
            if (!strstr(err.msg, "program decode: offset "))
                bad++;
        }
        tern_program_free(&p);
        free(c);
        free(b);
    }
    CHECK_EQ_INT(bad, 0);
    CHECK(accepted > 100 && rejected > 100);
    printf("mutation sweep: %d accepted (re-encoded identically), %d rejected\n", accepted, rejected);
}

int main(void)
{
    test_crc();
    test_tensor_section();
    test_roundtrips();
    test_layout();
    test_truncation();
    test_header_errors();
    test_field_errors();
    test_encode_errors();
    test_mutation_sweep();
    return check_report();
}
