/* The text assembly: asm(disasm(p)) == p field by field for random programs and for every opcode on every engine
 * with every field set; disasm(asm(text)) is a fixed canonical text (golden), stable under a second pass; float
 * immediates keep their exact bits (NaN payloads, -0, inf, subnormals); every kind of syntax or range error names
 * its line, column and value; disasm refuses what it cannot print; and a seeded mutation sweep over canonical text
 * never crashes and keeps the round-trip property for whatever it accepts.
 * With TERN_WRITE_CORPUS=DIR set, also writes the test programs as seeds for the fuzzers (DIR/asm, DIR/decode). */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "check.h"
#include "isa_testgen.h"

/* asm(disasm(p)) must equal p, and disasm of that must be the same text. */
static void roundtrip(const tern_program *p, const char *what)
{
    char *text = NULL, *text2 = NULL, why[256];
    tern_error err;
    tern_program q;
    tern_status st = tern_program_disasm(p, &text, &err);
    CHECK_MSG(st == TERN_OK, "%s: disasm failed: %s", what, err.msg);
    if (st)
        return;
    st = tern_program_asm(text, &q, &err);
    CHECK_MSG(st == TERN_OK, "%s: asm of disasm output failed: %s", what, err.msg);
    if (!st) {
        CHECK_MSG(program_equal(p, &q, why, sizeof why), "%s: asm(disasm(p)) != p: %s", what, why);
        CHECK(tern_program_disasm(&q, &text2, &err) == TERN_OK);
        CHECK_MSG(text2 && !strcmp(text, text2), "%s: disasm not stable", what);
    }
    tern_program_free(&q);
    free(text);
    free(text2);
}

static void test_roundtrips(void)
{
    TEST_BEGIN("asm round trip");
    tern_program p;
    tern_program_init(&p);
    roundtrip(&p, "empty program");
    tern_program_free(&p);
    gen_every_opcode(&p);
    roundtrip(&p, "every opcode on every engine, every field set");
    tern_program_free(&p);
    gen_rng r = {0x5eed0002};
    for (int it = 0; it < 400; it++) {
        char what[64];
        snprintf(what, sizeof what, "random program %d", it);
        gen_program(&r, &p, 10);
        roundtrip(&p, what);
        tern_program_free(&p);
    }
}

static char *asm_disasm(const char *text, tern_error *err)
{
    tern_program p;
    char *out = NULL;
    if (tern_program_asm(text, &p, err) == TERN_OK)
        tern_program_disasm(&p, &out, err);
    tern_program_free(&p);
    return out;
}

static const char golden_in[] =
    "# a hand-written program: aliases, decimal offsets, comments, CRLF, repeated sections\r\n"
    ".machine neuroncore-v2\n"
    "  .semaphores   0x40   ; hex is fine\n"
    "\n"
    ".engine dve\n"
    "\ttensor_scalar signal=s4 wait=s3>=1 imm1=-1 op1=add imm0=2.5 op0=mult "
    "in0=psum[0:128]+0:float32[[1,512]] dst=sbuf[0:128]+256:BF16[[1,512]]\n"
    ".engine sp\n"
    "    dma_copy dst=sbuf[0:128]:bf16[[1,512]] in0=hbm[0:128:512]+4096:bf16[[1,512]] queue=2 signal=s0\n"
    "    reg_set rd=r1 imm_i0=0x5\n"
    "    branch op0=lt ra=r1 imm_i1=10 imm_i0=3 flags=imm#loop\n"
    ".engine vector\n"
    "    memset dst=psum[0:1]+0:fp32[[1,1]] imm0=0x7fc00001\n"
    "    memset imm0=7 dst=sbuf[0:1]+0:int32[[1,1]]\n"
    "    tensor_scalar imm0=255 op0=bitwise_and imm1=-2 dst=sbuf[0:1]+0:int32[[1,1]]\n"
    "    iota dst=sbuf[0:128]+0:int32[[1,8]] imm0=-3\n"
    ".engine act\n"
    "    activation dst=sbuf[0:128]+0+r3:fp32[[1,64],[-64,2]] in0=sbuf[0:128]+0:fp32[] func=gelu imm0=1 "
    "flags=reduce|s0_ap\n"
    ".engine pe\n"
    "    multiply_moving dst=psum[0:128]+0:fp32[[1,512]] in0=sbuf[0:128]+0:bf16[[1,512]] flags=acc\n";

static const char golden_out[] =
    ".machine neuroncore-v2\n"
    ".semaphores 64\n"
    "\n"
    ".engine tensor\n"
    "    multiply_moving dst=psum[0:128]+0:fp32[[1,512]] in0=sbuf[0:128]+0:bf16[[1,512]] flags=acc\n"
    "\n"
    ".engine vector\n"
    "    tensor_scalar dst=sbuf[0:128]+0x100:bf16[[1,512]] in0=psum[0:128]+0:fp32[[1,512]] op0=mult imm0=2.5 "
    "op1=add imm1=-1.0 wait=s3>=1 signal=s4\n"
    "    memset dst=psum[0:1]+0:fp32[[1,1]] imm0=0x7fc00001\n"
    "    memset dst=sbuf[0:1]+0:int32[[1,1]] imm0=7\n"
    "    tensor_scalar dst=sbuf[0:1]+0:int32[[1,1]] op0=bitwise_and imm0=255 imm1=-2\n"
    "\n"
    ".engine scalar\n"
    "    activation dst=sbuf[0:128]+0+r3:fp32[[1,64],[-64,2]] in0=sbuf[0:128]+0:fp32[] imm0=1.0 func=gelu "
    "flags=reduce|s0_ap\n"
    "\n"
    ".engine sync\n"
    "    dma_copy dst=sbuf[0:128]+0:bf16[[1,512]] in0=hbm[0:128:512]+0x1000:bf16[[1,512]] queue=2 signal=s0\n"
    "    reg_set rd=r1 imm_i0=5\n"
    "    branch op0=lt ra=r1 imm_i0=3 imm_i1=10 flags=imm\n";

static void test_golden(void)
{
    TEST_BEGIN("asm canonical text");
    tern_error err;
    /* iota may only issue on GpSimd: the golden input puts it on vector, which asm must refuse at its line. */
    char *out = asm_disasm(golden_in, &err);
    CHECK(out == NULL);
    CHECK_STR_CONTAINS(err.msg, "asm line 15, column 5: iota cannot issue on the vector engine (allowed: gpsimd)");
    free(out);
    /* Without that line the rest is canonicalised exactly. */
    char in[sizeof golden_in];
    const char *iota = strstr(golden_in, "    iota");
    size_t pre = (size_t)(iota - golden_in);
    memcpy(in, golden_in, pre);
    strcpy(in + pre, strchr(iota, '\n') + 1);
    out = asm_disasm(in, &err);
    CHECK_MSG(out != NULL, "asm failed: %s", err.msg);
    if (!out)
        return;
    CHECK_MSG(!strcmp(out, golden_out), "canonical text differs:\n--- got\n%s--- want\n%s", out, golden_out);
    /* Canonical text is a fixed point. */
    char *again = asm_disasm(out, &err);
    CHECK_MSG(again && !strcmp(again, out), "canonical text not stable: %s", again ? again : err.msg);
    free(again);
    free(out);
    /* iota on gpsimd prints integer immediates; a float spelling still gives the float's bits. */
    out = asm_disasm(".engine gpsimd\n iota dst=sbuf[0:128]+0:int32[[1,8]] imm0=-3 imm1=1.5 imm_i0=-0x10\n", &err);
    CHECK_MSG(out && !strcmp(out, ".semaphores 32\n\n.engine gpsimd\n    iota dst=sbuf[0:128]+0:int32[[1,8]] "
                                   "imm0=-3 imm1=1069547520 imm_i0=-16\n"),
              "iota: got %s", out ? out : err.msg);
    free(out);
}

/* Float immediates: exact bits through text, and their spelling. */
static void test_floats(void)
{
    TEST_BEGIN("asm float immediates");
    static const struct {
        uint32_t bits;
        const char *text;
    } cases[] = {
        {0x40200000u, "2.5"},          {0xbf800000u, "-1.0"},        {0x80000000u, "-0.0"},
        {0x7f800000u, "inf"},          {0xff800000u, "-inf"},        {0x7fc00000u, "0x7fc00000"},
        {0x7fc00001u, "0x7fc00001"},   {0xffffffffu, "0xffffffff"},  {0x7f800001u, "0x7f800001"},
        {0x00000001u, "1.40129846e-45"}, {0x007fffffu, "1.17549421e-38"}, {0x7f7fffffu, "3.40282347e+38"},
        {0x3dcccccdu, "0.100000001"},  {0x4b800001u, "16777218.0"},  {0x3eaaaaabu, "0.333333343"},
        {0x4f000000u, "2.14748365e+09"},
    };
    for (size_t i = 0; i < TERN_ARRAY_LEN(cases); i++) {
        tern_program p;
        tern_instr ins;
        memset(&ins, 0, sizeof ins);
        ins.opcode = TERN_OP_MEMSET;
        ins.engine = TERN_ENGINE_VECTOR;
        ins.wait_sem = ins.signal_sem = TERN_SEM_NONE;
        for (int k = 0; k < TERN_INSTR_OPERANDS; k++)
            ins.ap[k].offset_reg = TERN_REG_NONE;
        ins.imm0.i = (int32_t)cases[i].bits;
        tern_program_init(&p);
        tern_program_append(&p, &ins, NULL);
        char *text;
        tern_error err;
        CHECK(tern_program_disasm(&p, &text, &err) == TERN_OK);
        char want[96];
        snprintf(want, sizeof want, " imm0=%s\n", cases[i].text);
        CHECK_STR_CONTAINS(text, want);
        roundtrip(&p, cases[i].text);
        free(text);
        tern_program_free(&p);
    }
    /* Spellings the assembler accepts for float opcodes, and the bits they give. */
    static const struct {
        const char *text;
        uint32_t bits;
    } parse[] = {
        {"2", 0x40000000u},      {"-2", 0xc0000000u},     {"0x1.8p+1", 0x40400000u}, {"1e-45", 0x00000001u},
        {"-0", 0x80000000u},     {"nan", 0x7fc00000u},    {"+1.5", 0x3fc00000u},     {"0x3f800000", 0x3f800000u},
        {"infinity", 0x7f800000u}, {"1.0000001", 0x3f800001u},
    };
    for (size_t i = 0; i < TERN_ARRAY_LEN(parse); i++) {
        char text[128];
        snprintf(text, sizeof text, ".engine vector\nmemset imm0=%s\n", parse[i].text);
        tern_program p;
        tern_error err;
        tern_status st = tern_program_asm(text, &p, &err);
        CHECK_MSG(st == TERN_OK, "imm0=%s: %s", parse[i].text, err.msg);
        if (!st)
            CHECK_MSG((uint32_t)p.streams[TERN_ENGINE_VECTOR].instrs[0].imm0.i == parse[i].bits,
                      "imm0=%s: expected 0x%08x, got 0x%08x", parse[i].text, parse[i].bits,
                      (uint32_t)p.streams[TERN_ENGINE_VECTOR].instrs[0].imm0.i);
        tern_program_free(&p);
    }
}

/* Every kind of error: the message names the line, the column and the offending value. */
static void test_errors(void)
{
    TEST_BEGIN("asm errors");
    static const struct {
        const char *text;
        const char *want;
    } cases[] = {
        {".engine vector\n    tensor_copy dst=sbuf[0:128]+0:bf61[[1,4]]",
         "asm line 2, column 35: unknown dtype 'bf61' (valid: fp32, tf32, bf16"},
        {"\n\n.engine vector\n    frobnicate", "asm line 4, column 5: unknown mnemonic 'frobnicate'"},
        {".bogus 1", "asm line 1, column 1: unknown directive '.bogus'"},
        {".tensor x inout bf16 [4] @0", "asm line 1, column 11: .tensor x: unknown kind 'inout'"},
        {".tensor x input bf16 [4,0] @0", ".tensor x: dimension 1 has size 0"},
        {".tensor x input bf16 [4] 0", "expected '@' before the tensor's HBM address"},
        {".tensor x input bf16 [1,2,3,4,5] @0", ".tensor x: more than 4 dimensions"},
        {".tensor x/y input bf16 [4] @0", "asm line 1, column 10: unexpected '/y'"},
        {".tensor x input bf61 [4] @0", "unknown dtype 'bf61'"},
        {".tensor x input bf16 [4] @0\n.tensor x output fp32 [2] @64", "asm line 2, column 9: program: tensor 'x' declared twice"},
        {".engine gpu", "asm line 1, column 9: unknown engine 'gpu'"},
        {".engine", "asm line 1, column 8: .engine: expected a value"},
        {".engine vector extra", "asm line 1, column 16: unexpected 'extra' at the end of the line"},
        {"nop", "asm line 1, column 1: instruction 'nop' before any .engine directive"},
        {".semaphores 4294967296", "asm line 1, column 13: .semaphores: 4294967296 out of range (0..4294967295)"},
        {".semaphores -1", "asm line 1, column 13: .semaphores: expected an unsigned integer, got '-1'"},
        {".machine trn 1", "asm line 1, column 14: unexpected '1' at the end of the line"},
        {".machine trn/1", "asm line 1, column 13: machine name: character '/' not allowed"},
        {".machine aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
         "asm line 1, column 10: machine name 'aaaa"},
        {".engine vector\nnop bogus=1", "asm line 2, column 5: unknown field 'bogus' (valid: dst, in0"},
        {".engine vector\nnop queue 1", "asm line 2, column 10: expected '=' after the field name, got ' '"},
        {".engine vector\nnop queue=1 queue=2", "asm line 2, column 13: field 'queue' given twice"},
        {".engine vector\nnop queue=16", "asm line 2, column 11: queue: 16 out of range (0..15)"},
        {".engine vector\nnop queue=1x", "asm line 2, column 11: queue: expected an unsigned integer, got '1x'"},
        {".engine vector\nnop queue=1,", "asm line 2, column 12: unexpected ',' after the value of queue"},
        {".engine vector\nnop dst=dram[0:1]+0:fp32[]", "asm line 2, column 9: unknown memory 'dram' (valid: none"},
        {".engine vector\nnop dst=sbuf(0:1)", "asm line 2, column 13: expected '[' after the memory name, got '('"},
        {".engine vector\nnop dst=sbuf[0:65536]+0:fp32[]",
         "asm line 2, column 16: dst partition count: 65536 out of range (0..65535)"},
        {".engine vector\nnop in0=sbuf[65536:1]+0:fp32[]",
         "asm line 2, column 14: in0 start partition: 65536 out of range (0..65535)"},
        {".engine vector\nnop dst=sbuf[0;1]", "asm line 2, column 15: expected ':' between start partition"},
        {".engine vector\nnop dst=hbm[0:1:9223372036854775808]+0:fp32[]",
         "asm line 2, column 17: dst partition step: 9223372036854775808 out of range"},
        {".engine vector\nnop dst=sbuf[0:1]+18446744073709551616:fp32[]",
         "asm line 2, column 19: dst offset: 18446744073709551616 out of range (0..18446744073709551615)"},
        {".engine vector\nnop dst=sbuf[0:1]+0+r255:fp32[]",
         "asm line 2, column 22: dst offset register: 255 out of range (0..254)"},
        {".engine vector\nnop dst=sbuf[0:1]+0+x:fp32[]", "asm line 2, column 20: expected ':' before the dtype"},
        {".engine vector\nnop dst=sbuf[0:1]+0:fp32", "asm line 2, column 25: expected '[' opening the dimension list, "
                                                    "got 'end of line'"},
        {".engine vector\nnop dst=sbuf[0:1]+0:fp32[[1,2],[1,2],[1,2],[1,2],[1,2]]",
         "asm line 2, column 50: dst: more than 4 dimensions"},
        {".engine vector\nnop dst=sbuf[0:1]+0:fp32[[2147483648,1]]",
         "asm line 2, column 27: dst dims[0] step: 2147483648 out of range (-2147483648..2147483647)"},
        {".engine vector\nnop dst=sbuf[0:1]+0:fp32[[1,2],[-2147483649,1]]",
         "asm line 2, column 33: dst dims[1] step: -2147483649 out of range (-2147483648..2147483647)"},
        {".engine vector\nnop dst=sbuf[0:1]+0:fp32[[1,4294967296]]",
         "asm line 2, column 29: dst dims[0] num: 4294967296 out of range (0..4294967295)"},
        {".engine vector\nnop dst=sbuf[0:1]+0:fp32[[1,-1]]",
         "asm line 2, column 29: dst dims[0] num: expected an unsigned integer, got '-1'"},
        {".engine vector\nnop dst=sbuf[0:1]+0:fp32[[1 2]]", "asm line 2, column 28: expected ',' between step and num"},
        {".engine vector\nnop dst=sbuf[0:1]+0:fp32[[1,2]", "asm line 2, column 31: expected ',' between dimensions"},
        {".engine vector\nnop op0=mul", "asm line 2, column 9: unknown ALU operator 'mul' (valid: bypass, add"},
        {".engine sync\nbranch op0=add", "asm line 2, column 12: unknown comparison 'add' (valid: always, eq"},
        {".engine scalar\nactivation func=gelu2", "asm line 2, column 17: unknown activation function 'gelu2'"},
        {".engine vector\nnop flags=acc|bogus", "asm line 2, column 15: unknown flag 'bogus' (valid: acc, rev0"},
        {".engine vector\nnop flags=acc|rev0|acc", "asm line 2, column 20: flag 'acc' repeated"},
        {".engine vector\nnop wait=s1", "asm line 2, column 12: wait: expected '>=' after the semaphore, got ''"},
        {".engine vector\nnop wait=s1>2", "asm line 2, column 12: wait: expected '>=' after the semaphore, got '>2'"},
        {".engine vector\nnop wait=1>=2", "asm line 2, column 10: wait semaphore: expected a semaphore sN, got '1>=2'"},
        {".engine vector\nnop wait=s255>=2", "asm line 2, column 11: wait semaphore: 255 out of range (0..254)"},
        {".engine vector\nnop wait=s1>=4294967296", "asm line 2, column 14: wait value: 4294967296 out of range"},
        {".engine vector\nnop signal=r1", "asm line 2, column 12: signal semaphore: expected a semaphore sN, got 'r1'"},
        {".engine vector\nmemset imm0=1e39", "asm line 2, column 13: imm0: 1e39 overflows fp32"},
        {".engine vector\nmemset imm0=-1e-50", "asm line 2, column 13: imm0: -1e-50 underflows fp32"},
        {".engine vector\nmemset imm1=2.5.1", "asm line 2, column 13: imm1: '2.5.1' is not a number"},
        {".engine vector\nmemset imm1=nan(1)", "asm line 2, column 13: imm1: 'nan(1)' is not a number"},
        {".engine vector\nmemset imm0=0x100000000", "asm line 2, column 13: imm0: 0x100000000 out of range (0..4294967295)"},
        {".engine vector\nmemset imm0=-0x1", "asm line 2, column 13: imm0: raw bits '-0x1' cannot have a sign"},
        {".engine vector\nnop imm0=2147483648", "asm line 2, column 10: imm0: 2147483648 out of range (-2147483648..2147483647)"},
        {".engine vector\nnop imm_i0=-2147483649", "asm line 2, column 12: imm_i0: -2147483649 out of range"},
        {".engine vector\nnop imm_i1=0x1ffffffff", "asm line 2, column 12: imm_i1: 0x1ffffffff out of range"},
        {".engine vector\nnop rd=r256", "asm line 2, column 9: rd: 256 out of range (0..255)"},
        {".engine vector\nnop ra=x1", "asm line 2, column 8: ra: expected a register rN, got 'x1'"},
        {".engine vector\nmultiply_moving", "asm line 2, column 1: multiply_moving cannot issue on the vector engine "
                                            "(allowed: tensor)"},
        {".engine tensor\n  dma_copy", "asm line 2, column 3: dma_copy cannot issue on the tensor engine (allowed: "
                                       "vector, scalar, gpsimd, sync)"},
        {".engine vector\nnop=1", "asm line 2, column 1: expected a mnemonic or directive, got 'nop=1'"},
        {".engine vector\n\x01\x02", "asm line 2, column 1: expected a mnemonic or directive, got '?" "?'"},
        {".engine vector\nnop imm0=", "asm line 2, column 10: imm0: expected a number, got ''"},
        {".engine vector\nnop imm0=0x1+2", "asm line 2, column 10: imm0: '0x1+2' is not a number"},
        {".engine vector\nnop imm1=0x1-", "asm line 2, column 10: imm1: '0x1-' is not a number"},
        {".engine vector\nmemset imm1=0.00000000000000000000000000000000000000000000000000000000000000000000000001",
         "asm line 2, column 13: imm1: number '0.00000000000000000000000000000000000000...' longer than 71 characters"},
    };
    for (size_t i = 0; i < TERN_ARRAY_LEN(cases); i++) {
        tern_program p;
        tern_error err;
        tern_status st = tern_program_asm(cases[i].text, &p, &err);
        CHECK_MSG(st != TERN_OK, "case %zu: '%s' was accepted", i, cases[i].text);
        if (st != TERN_OK)
            CHECK_MSG(strstr(err.msg, cases[i].want) != NULL, "case %zu: expected \"%s\", got \"%s\"", i,
                      cases[i].want, err.msg);
        CHECK(tern_program_instr_count(&p) == 0);
        tern_program_free(&p);
    }
}

static void test_disasm_refusals(void)
{
    TEST_BEGIN("disasm refusals");
    tern_program p;
    tern_instr ins;
    gen_rng r = {99};
    tern_error err;
    char *text = (char *)&r;
    tern_program_init(&p);
    gen_instr(&r, TERN_ENGINE_SCALAR, &ins);
    ins.ap[2].ndims = 1;
    ins.ap[2].dims[2].num = 3;
    tern_program_append(&p, &ins, NULL);
    CHECK(tern_program_disasm(&p, &text, &err) == TERN_ERR_INVALID && text == NULL);
    CHECK_STR_CONTAINS(err.msg, "program disasm: instruction 0 (scalar stream): operand in1: dims[2] = [0,3] set "
                                "beyond ndims 1");
    p.streams[TERN_ENGINE_SCALAR].instrs[0].ap[2] = (tern_ap){.offset_reg = TERN_REG_NONE};
    p.streams[TERN_ENGINE_SCALAR].instrs[0].engine = TERN_ENGINE_VECTOR;
    CHECK(tern_program_disasm(&p, &text, &err) == TERN_ERR_INVALID);
    CHECK_STR_CONTAINS(err.msg, "engine 1 (vector) does not match its stream (scalar)");
    /* Disasm does not apply the engine mask (useful for dumping bad programs); asm does. */
    p.streams[TERN_ENGINE_SCALAR].instrs[0].engine = TERN_ENGINE_SCALAR;
    p.streams[TERN_ENGINE_SCALAR].instrs[0].opcode = TERN_OP_MULTIPLY_MOVING;
    CHECK(tern_program_disasm(&p, &text, &err) == TERN_OK);
    tern_program q;
    CHECK(tern_program_asm(text, &q, &err) == TERN_ERR_INVALID);
    CHECK_STR_CONTAINS(err.msg, "multiply_moving cannot issue on the scalar engine");
    tern_program_free(&q);
    free(text);
    p.streams[TERN_ENGINE_SCALAR].instrs[0].opcode = TERN_OP_COUNT;
    CHECK(tern_program_disasm(&p, &text, &err) == TERN_ERR_INVALID);
    CHECK_STR_CONTAINS(err.msg, "opcode");
    tern_program_free(&p);
}

/* Seeded mutations of canonical text: never crash; whatever is accepted keeps asm(disasm(asm(t))) == asm(t). */
static void test_mutation_sweep(void)
{
    TEST_BEGIN("asm mutation sweep");
    static const char alphabet[] = "0123456789abcdefrsx.:,[]+-=|>#; \n\tnaip";
    gen_rng r = {0xA5A5};
    int accepted = 0, rejected = 0, bad = 0;
    for (int it = 0; it < 1500; it++) {
        tern_program p;
        char *text;
        tern_error err;
        gen_program(&r, &p, 2);
        TERN_ASSERT(tern_program_disasm(&p, &text, &err) == TERN_OK);
        tern_program_free(&p);
        size_t len = strlen(text);
        unsigned edits = 1 + gen_below(&r, 3);
        for (unsigned k = 0; k < edits && len; k++) {
            size_t at = gen_below(&r, (uint32_t)len);
            switch (gen_below(&r, 3)) {
            case 0: text[at] = alphabet[gen_below(&r, sizeof alphabet - 1)]; break;
            case 1: memmove(text + at, text + at + 1, len - at); len--; break; /* delete */
            default: text[at] = (char)(1 + gen_below(&r, 255)); break;        /* any byte */
            }
        }
        if (tern_program_asm(text, &p, &err) == TERN_OK) {
            accepted++;
            char *t2, why[256];
            tern_program q;
            if (tern_program_disasm(&p, &t2, &err) != TERN_OK) {
                bad++;
            } else {
                if (tern_program_asm(t2, &q, &err) != TERN_OK || !program_equal(&p, &q, why, sizeof why))
                    bad++;
                tern_program_free(&q);
                free(t2);
            }
        } else {
            rejected++;
            if (strncmp(err.msg, "asm line ", 9))
                bad++;
        }
        tern_program_free(&p);
        free(text);
    }
    CHECK_EQ_INT(bad, 0);
    CHECK(accepted > 50 && rejected > 50);
    printf("mutation sweep: %d accepted (round-tripped), %d rejected with a line and column\n", accepted, rejected);
}

/* Seed corpora for fuzz/ (scripts/fuzz.sh sets TERN_WRITE_CORPUS). */
static void write_file(const char *dir, const char *sub, int i, const char *ext, const void *data, size_t len)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, sub);
    mkdir(path, 0777);
    snprintf(path, sizeof path, "%s/%s/seed%03d.%s", dir, sub, i, ext);
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite(data, 1, len, f);
        fclose(f);
    }
}

static void write_corpus(const char *dir)
{
    mkdir(dir, 0777);
    gen_rng r = {0xC0A9};
    for (int i = 0; i < 40; i++) {
        tern_program p;
        if (i == 0)
            gen_every_opcode(&p);
        else if (i == 1)
            tern_program_init(&p);
        else
            gen_program(&r, &p, i < 20 ? 1 : 3);
        char *text;
        uint8_t *bin;
        size_t len;
        tern_error err;
        if (tern_program_disasm(&p, &text, &err) == TERN_OK) {
            write_file(dir, "asm", i, "s", text, strlen(text));
            free(text);
        }
        if (tern_program_encode(&p, &bin, &len, &err) == TERN_OK) {
            write_file(dir, "decode", i, "tprog", bin, len);
            free(bin);
        }
        tern_program_free(&p);
    }
    write_file(dir, "asm", 99, "s", golden_in, strlen(golden_in));
}

int main(void)
{
    const char *corpus = getenv("TERN_WRITE_CORPUS");
    if (corpus && *corpus) {
        write_corpus(corpus);
        return 0;
    }
    test_roundtrips();
    test_golden();
    test_floats();
    test_errors();
    test_disasm_refusals();
    test_mutation_sweep();
    return check_report();
}
