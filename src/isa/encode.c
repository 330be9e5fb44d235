/* The binary program format (.tprog): a fixed little-endian header followed by one fixed-size record per
 * instruction, stream after stream, written and read field by field (never a struct memcpy, so padding and host
 * endianness never leak into files). The decoder trusts nothing: it checks sizes before it reads, caps counts by
 * the bytes actually present before it allocates, checks every field's range and names the byte offset of the
 * first bad one, and accepts only the canonical bytes the encoder would write, so decode -> encode is the
 * identity on bytes. Layout and rules: docs/isa.md, "Binary format". */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "isa/codec.h"
#include "tern/num.h"

const char *const isa_operand_names[TERN_INSTR_OPERANDS] = {"dst", "in0", "in1", "in2", "extra"};

/* ---- checksum ---- */
uint32_t isa_crc32(const uint8_t *p, size_t n) { return tern_crc32(p, n); }

/* ---- the shared instruction check ---- */
static int fail(size_t *field_off, size_t off, char *why, size_t why_len, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static int fail(size_t *field_off, size_t off, char *why, size_t why_len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, why_len, fmt, ap);
    va_end(ap);
    *field_off = off;
    return -1;
}

static void engine_list(unsigned mask, char *buf, size_t len)
{
    size_t n = 0;
    buf[0] = '\0';
    for (unsigned e = 0; e < TERN_ENGINE_COUNT; e++)
        if (mask & (1u << e)) {
            int w = snprintf(buf + n, len - n, "%s%s", n ? ", " : "", tern_engine_name((tern_engine)e));
            if (w < 0 || (size_t)w >= len - n)
                return;
            n += (size_t)w;
        }
}

int isa_instr_check(const tern_instr *ins, unsigned stream, int check_engines, size_t *field_off, char *why,
                    size_t why_len)
{
    if (ins->opcode >= TERN_OP_COUNT)
        return fail(field_off, 0, why, why_len, "opcode %u unknown (valid 0..%d)", ins->opcode, TERN_OP_COUNT - 1);
    const tern_opcode_info *info = tern_opcode_get((tern_opcode)ins->opcode);
    if (ins->engine >= TERN_ENGINE_COUNT)
        return fail(field_off, 2, why, why_len, "engine %u unknown (valid 0..%d)", ins->engine,
                    TERN_ENGINE_COUNT - 1);
    if (ins->engine != stream)
        return fail(field_off, 2, why, why_len, "engine %u (%s) does not match its stream (%s)", ins->engine,
                    tern_engine_name((tern_engine)ins->engine), tern_engine_name((tern_engine)stream));
    if (check_engines && !(info->engines & (1u << ins->engine))) {
        char list[64];
        engine_list(info->engines, list, sizeof list);
        return fail(field_off, 2, why, why_len, "%s cannot issue on the %s engine (allowed: %s)", info->name,
                    tern_engine_name((tern_engine)ins->engine), list);
    }
    if (ins->opcode == TERN_OP_BRANCH) {
        if (ins->op0 >= TERN_CMP_COUNT)
            return fail(field_off, 3, why, why_len, "op0 %u: comparison unknown (valid 0..%d)", ins->op0,
                        TERN_CMP_COUNT - 1);
    } else if (ins->op0 >= TERN_ALU_COUNT) {
        return fail(field_off, 3, why, why_len, "op0 %u: ALU operator unknown (valid 0..%d)", ins->op0,
                    TERN_ALU_COUNT - 1);
    }
    if (ins->op1 >= TERN_ALU_COUNT)
        return fail(field_off, 4, why, why_len, "op1 %u: ALU operator unknown (valid 0..%d)", ins->op1,
                    TERN_ALU_COUNT - 1);
    if (ins->func >= TERN_ACT_COUNT)
        return fail(field_off, 5, why, why_len, "func %u: activation function unknown (valid 0..%d)", ins->func,
                    TERN_ACT_COUNT - 1);
    if (ins->queue >= ISA_QUEUE_COUNT)
        return fail(field_off, 6, why, why_len, "queue %u out of range (valid 0..%u)", ins->queue,
                    ISA_QUEUE_COUNT - 1);
    if (ins->flags & ~ISA_FLAGS_KNOWN)
        return fail(field_off, 10, why, why_len, "flags 0x%x has unknown bits 0x%x", ins->flags,
                    ins->flags & ~ISA_FLAGS_KNOWN);
    if (ins->wait_sem == TERN_SEM_NONE && ins->wait_value != 0)
        return fail(field_off, 16, why, why_len, "wait value %u without a wait semaphore", ins->wait_value);
    for (unsigned k = 0; k < TERN_INSTR_OPERANDS; k++) {
        const tern_ap *ap = &ins->ap[k];
        size_t base = ISA_AP_RECORD_BASE + k * ISA_AP_RECORD_SIZE;
        const char *nm = isa_operand_names[k];
        if (ap->mem >= TERN_MEM_COUNT)
            return fail(field_off, base + 0, why, why_len, "operand %s: memory %u unknown (valid 0..%d)", nm,
                        ap->mem, TERN_MEM_COUNT - 1);
        if (ap->dtype >= TERN_DTYPE_COUNT)
            return fail(field_off, base + 1, why, why_len, "operand %s: dtype %u unknown (valid 0..%d)", nm,
                        ap->dtype, TERN_DTYPE_COUNT - 1);
        if (ap->ndims > TERN_AP_MAX_DIMS)
            return fail(field_off, base + 2, why, why_len, "operand %s: ndims %u out of range (valid 0..%d)", nm,
                        ap->ndims, TERN_AP_MAX_DIMS);
        for (unsigned d = ap->ndims; d < TERN_AP_MAX_DIMS; d++)
            if (ap->dims[d].step != 0 || ap->dims[d].num != 0)
                return fail(field_off, base + 24 + 8 * d, why, why_len,
                            "operand %s: dims[%u] = [%d,%u] set beyond ndims %u (must be zero)", nm, d,
                            ap->dims[d].step, ap->dims[d].num, ap->ndims);
    }
    return 0;
}

int isa_machine_name_bad(const char *name, size_t field_len)
{
    for (size_t i = 0; i < field_len; i++) {
        unsigned char c = (unsigned char)name[i];
        if (c == 0)
            return i < ISA_MACHINE_FIELD ? -1 : (int)i;
        if (i >= ISA_MACHINE_FIELD - 1)
            return (int)i;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
              c == '_' || c == '-' || c == '+'))
            return (int)i;
    }
    return (int)(field_len ? field_len - 1 : 0);
}

/* ---- little-endian field writers/readers ---- */
static void put8(uint8_t *p, uint8_t v) { p[0] = v; }
static void put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static uint16_t get16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static uint64_t get64(const uint8_t *p) { return (uint64_t)get32(p) | ((uint64_t)get32(p + 4) << 32); }

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static void write_record(uint8_t *r, const tern_instr *ins)
{
    memset(r, 0, ISA_RECORD_SIZE);
    put16(r + 0, ins->opcode);
    put8(r + 2, ins->engine);
    put8(r + 3, ins->op0);
    put8(r + 4, ins->op1);
    put8(r + 5, ins->func);
    put8(r + 6, ins->queue);
    put8(r + 7, ins->rd);
    put8(r + 8, ins->ra);
    put8(r + 9, ins->rb);
    put16(r + 10, ins->flags);
    put8(r + 12, ins->wait_sem);
    put8(r + 13, ins->signal_sem);
    /* 14..15 reserved, zero */
    put32(r + 16, ins->wait_value);
    put32(r + 20, f32_bits(ins->imm0.f));
    put32(r + 24, f32_bits(ins->imm1.f));
    put32(r + 28, (uint32_t)ins->imm_i0);
    put32(r + 32, (uint32_t)ins->imm_i1);
    for (unsigned k = 0; k < TERN_INSTR_OPERANDS; k++) {
        const tern_ap *ap = &ins->ap[k];
        uint8_t *a = r + ISA_AP_RECORD_BASE + k * ISA_AP_RECORD_SIZE;
        put8(a + 0, ap->mem);
        put8(a + 1, ap->dtype);
        put8(a + 2, ap->ndims);
        put8(a + 3, ap->offset_reg);
        put16(a + 4, ap->start_partition);
        put16(a + 6, ap->num_partitions);
        put64(a + 8, (uint64_t)ap->partition_step);
        put64(a + 16, ap->offset);
        for (unsigned d = 0; d < TERN_AP_MAX_DIMS; d++) {
            put32(a + 24 + 8 * d, (uint32_t)ap->dims[d].step);
            put32(a + 28 + 8 * d, ap->dims[d].num);
        }
    }
    /* 316..319 reserved, zero */
}

static void read_record(const uint8_t *r, tern_instr *ins)
{
    memset(ins, 0, sizeof *ins);
    ins->opcode = get16(r + 0);
    ins->engine = r[2];
    ins->op0 = r[3];
    ins->op1 = r[4];
    ins->func = r[5];
    ins->queue = r[6];
    ins->rd = r[7];
    ins->ra = r[8];
    ins->rb = r[9];
    ins->flags = get16(r + 10);
    ins->wait_sem = r[12];
    ins->signal_sem = r[13];
    ins->wait_value = get32(r + 16);
    uint32_t b0 = get32(r + 20), b1 = get32(r + 24);
    memcpy(&ins->imm0.f, &b0, sizeof b0);
    memcpy(&ins->imm1.f, &b1, sizeof b1);
    ins->imm_i0 = (int32_t)get32(r + 28);
    ins->imm_i1 = (int32_t)get32(r + 32);
    for (unsigned k = 0; k < TERN_INSTR_OPERANDS; k++) {
        tern_ap *ap = &ins->ap[k];
        const uint8_t *a = r + ISA_AP_RECORD_BASE + k * ISA_AP_RECORD_SIZE;
        ap->mem = a[0];
        ap->dtype = a[1];
        ap->ndims = a[2];
        ap->offset_reg = a[3];
        ap->start_partition = get16(a + 4);
        ap->num_partitions = get16(a + 6);
        ap->partition_step = (int64_t)get64(a + 8);
        ap->offset = get64(a + 16);
        for (unsigned d = 0; d < TERN_AP_MAX_DIMS; d++) {
            ap->dims[d].step = (int32_t)get32(a + 24 + 8 * d);
            ap->dims[d].num = get32(a + 28 + 8 * d);
        }
    }
}

/* ---- tensor records (the program's interface) ---- */
static void write_tensor(uint8_t *r, const tern_program_tensor *t)
{
    memcpy(r, t->name, strnlen(t->name, TERN_TENSOR_NAME_MAX - 1)); /* NUL-padded */
    r[48] = t->kind;
    r[49] = t->dtype;
    r[50] = t->ndims;
    /* 51..55 reserved */
    for (unsigned d = 0; d < TERN_AP_MAX_DIMS; d++)
        put64(r + 56 + 8 * d, t->shape[d]);
    put64(r + 88, t->hbm_addr);
}

static void read_tensor(const uint8_t *r, tern_program_tensor *t)
{
    memset(t, 0, sizeof *t);
    memcpy(t->name, r, TERN_TENSOR_NAME_MAX - 1);
    t->kind = r[48];
    t->dtype = r[49];
    t->ndims = r[50];
    for (unsigned d = 0; d < TERN_AP_MAX_DIMS; d++)
        t->shape[d] = get64(r + 56 + 8 * d);
    t->hbm_addr = get64(r + 88);
}

/* ---- header ---- */
enum {
    H_MAGIC = 0,
    H_VERSION = 8,
    H_HEADER_SIZE = 12,
    H_CHECKSUM = 16, /* CRC-32 of every byte after this field: rest of header + payload */
    H_RECORD_SIZE = 20,
    H_NUM_SEMAPHORES = 24,
    H_COUNTS = 28, /* u32 per engine, TERN_ENGINE_COUNT of them */
    H_MACHINE = 48,
};
_Static_assert(H_COUNTS + 4 * TERN_ENGINE_COUNT == H_MACHINE, "header layout");
_Static_assert(H_MACHINE + ISA_MACHINE_FIELD == ISA_HEADER_SIZE, "header layout");
_Static_assert(ISA_AP_RECORD_BASE + TERN_INSTR_OPERANDS * ISA_AP_RECORD_SIZE + 4 == ISA_RECORD_SIZE,
               "record layout");

tern_status tern_program_encode(const tern_program *p, uint8_t **out, size_t *out_len, tern_error *err)
{
    *out = NULL;
    *out_len = 0;
    int bad = isa_machine_name_bad(p->machine, sizeof p->machine);
    if (bad >= 0)
        return tern_error_set(err, TERN_ERR_INVALID,
                              "program encode: machine name: character %d is not one of [A-Za-z0-9._+-] or the "
                              "name is longer than %u characters",
                              bad, ISA_MACHINE_FIELD - 1);
    size_t total = 0;
    for (unsigned e = 0; e < TERN_ENGINE_COUNT; e++) {
        const tern_stream *s = &p->streams[e];
        if (s->count > UINT32_MAX || (s->count && !s->instrs))
            return tern_error_set(err, TERN_ERR_RANGE, "program encode: %s stream: %zu instructions (max %u)",
                                  tern_engine_name((tern_engine)e), s->count, UINT32_MAX);
        for (size_t i = 0; i < s->count; i++) {
            char why[256];
            size_t off;
            if (isa_instr_check(&s->instrs[i], e, 1, &off, why, sizeof why))
                return tern_error_set(err, TERN_ERR_INVALID, "program encode: instruction %zu (%s stream): %s", i,
                                      tern_engine_name((tern_engine)e), why);
        }
        if (s->count > (SIZE_MAX - ISA_HEADER_SIZE) / ISA_RECORD_SIZE - total)
            return tern_error_set(err, TERN_ERR_RANGE, "program encode: too many instructions for memory");
        total += s->count;
    }
    for (size_t t = 0; t < p->num_tensors; t++) {
        char why[160];
        if (tern_program_tensor_check(&p->tensors[t], why, sizeof why))
            return tern_error_set(err, TERN_ERR_INVALID, "program encode: tensor %zu: %s", t, why);
    }
    if (p->num_tensors > UINT32_MAX)
        return tern_error_set(err, TERN_ERR_RANGE, "program encode: %zu tensors (max %u)", p->num_tensors, UINT32_MAX);
    size_t len = ISA_HEADER_SIZE + total * ISA_RECORD_SIZE + 4 + p->num_tensors * ISA_TENSOR_RECORD_SIZE;
    uint8_t *b = calloc(1, len);
    if (!b)
        return tern_error_set(err, TERN_ERR_NOMEM, "program encode: cannot allocate %zu bytes", len);
    memcpy(b + H_MAGIC, TERN_PROGRAM_MAGIC, 8);
    put32(b + H_VERSION, TERN_PROGRAM_VERSION);
    put32(b + H_HEADER_SIZE, ISA_HEADER_SIZE);
    put32(b + H_RECORD_SIZE, ISA_RECORD_SIZE);
    put32(b + H_NUM_SEMAPHORES, p->num_semaphores);
    for (unsigned e = 0; e < TERN_ENGINE_COUNT; e++)
        put32(b + H_COUNTS + 4 * e, (uint32_t)p->streams[e].count);
    memcpy(b + H_MACHINE, p->machine, strlen(p->machine)); /* rest of the field stays zero */
    uint8_t *r = b + ISA_HEADER_SIZE;
    for (unsigned e = 0; e < TERN_ENGINE_COUNT; e++)
        for (size_t i = 0; i < p->streams[e].count; i++, r += ISA_RECORD_SIZE)
            write_record(r, &p->streams[e].instrs[i]);
    put32(r, (uint32_t)p->num_tensors);
    r += 4;
    for (size_t t = 0; t < p->num_tensors; t++, r += ISA_TENSOR_RECORD_SIZE)
        write_tensor(r, &p->tensors[t]);
    put32(b + H_CHECKSUM, isa_crc32(b + H_CHECKSUM + 4, len - (H_CHECKSUM + 4)));
    *out = b;
    *out_len = len;
    return TERN_OK;
}

#define DECODE_FAIL(code, off, ...) \
    (tern_program_free(out), decode_fail(err, (code), (off), __VA_ARGS__))

static tern_status decode_fail(tern_error *err, tern_status code, size_t off, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static tern_status decode_fail(tern_error *err, tern_status code, size_t off, const char *fmt, ...)
{
    char msg[TERN_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return tern_error_set(err, code, "program decode: offset %zu: %s", off, msg);
}

tern_status tern_program_decode(const uint8_t *buf, size_t len, tern_program *out, tern_error *err)
{
    tern_program_init(out);
    if (!buf && len)
        return DECODE_FAIL(TERN_ERR_INVALID, 0, "no buffer");
    /* Header fields in file order, each checked as soon as the bytes for it exist. */
    size_t magic_have = len < 8 ? len : 8;
    if (magic_have && memcmp(buf, TERN_PROGRAM_MAGIC, magic_have) != 0)
        return DECODE_FAIL(TERN_ERR_PARSE, 0, "bad magic (expected \"%s\"): not a tern program", TERN_PROGRAM_MAGIC);
    if (len < H_HEADER_SIZE)
        return DECODE_FAIL(TERN_ERR_PARSE, len, "truncated: %zu bytes, header needs %u", len, ISA_HEADER_SIZE);
    uint32_t version = get32(buf + H_VERSION);
    if (version != TERN_PROGRAM_VERSION)
        return DECODE_FAIL(TERN_ERR_UNSUPPORTED, H_VERSION, "version %u unsupported (this build reads %d)", version,
                           TERN_PROGRAM_VERSION);
    if (len < H_CHECKSUM)
        return DECODE_FAIL(TERN_ERR_PARSE, len, "truncated: %zu bytes, header needs %u", len, ISA_HEADER_SIZE);
    uint32_t hsize = get32(buf + H_HEADER_SIZE);
    if (hsize != ISA_HEADER_SIZE)
        return DECODE_FAIL(TERN_ERR_PARSE, H_HEADER_SIZE, "header size %u, version %d headers are %u bytes", hsize,
                           TERN_PROGRAM_VERSION, ISA_HEADER_SIZE);
    if (len < ISA_HEADER_SIZE)
        return DECODE_FAIL(TERN_ERR_PARSE, len, "truncated: %zu bytes, header needs %u", len, ISA_HEADER_SIZE);
    uint32_t rsize = get32(buf + H_RECORD_SIZE);
    if (rsize != ISA_RECORD_SIZE)
        return DECODE_FAIL(TERN_ERR_PARSE, H_RECORD_SIZE, "instruction record size %u, version %d records are %u bytes",
                           rsize, TERN_PROGRAM_VERSION, ISA_RECORD_SIZE);
    out->num_semaphores = get32(buf + H_NUM_SEMAPHORES);
    /* Counts: each is capped by the records that fit in the bytes present before anything is allocated. */
    size_t avail = (len - ISA_HEADER_SIZE) / ISA_RECORD_SIZE, total = 0;
    uint32_t counts[TERN_ENGINE_COUNT];
    for (unsigned e = 0; e < TERN_ENGINE_COUNT; e++) {
        counts[e] = get32(buf + H_COUNTS + 4 * e);
        if (counts[e] > avail - total)
            return DECODE_FAIL(TERN_ERR_PARSE, H_COUNTS + 4 * e,
                               "%s stream: %u instructions, but only %zu records of %u bytes remain in %zu bytes",
                               tern_engine_name((tern_engine)e), counts[e], avail - total, ISA_RECORD_SIZE, len);
        total += counts[e];
    }
    size_t tsec = ISA_HEADER_SIZE + total * ISA_RECORD_SIZE; /* the tensor section: u32 count, then records */
    if (len < tsec + 4)
        return DECODE_FAIL(TERN_ERR_PARSE, len, "truncated: %zu bytes, the tensor count needs %zu", len, tsec + 4);
    uint32_t ntensors = get32(buf + tsec);
    if (ntensors > (len - tsec - 4) / ISA_TENSOR_RECORD_SIZE)
        return DECODE_FAIL(TERN_ERR_PARSE, tsec, "%u tensors, but only %zu records of %u bytes remain", ntensors,
                           (len - tsec - 4) / ISA_TENSOR_RECORD_SIZE, ISA_TENSOR_RECORD_SIZE);
    size_t want = tsec + 4 + (size_t)ntensors * ISA_TENSOR_RECORD_SIZE;
    if (len != want)
        return DECODE_FAIL(TERN_ERR_PARSE, want, "%zu trailing bytes after the last tensor record", len - want);
    const uint8_t *m = buf + H_MACHINE;
    int bad = isa_machine_name_bad((const char *)m, ISA_MACHINE_FIELD);
    if (bad >= 0)
        return DECODE_FAIL(TERN_ERR_PARSE, H_MACHINE + (size_t)bad,
                           "machine name: byte 0x%02x not allowed (names are up to %u characters of [A-Za-z0-9._+-], "
                           "NUL-terminated)",
                           m[bad], ISA_MACHINE_FIELD - 1);
    size_t mlen = strlen((const char *)m);
    for (size_t i = mlen; i < ISA_MACHINE_FIELD; i++)
        if (m[i])
            return DECODE_FAIL(TERN_ERR_PARSE, H_MACHINE + i, "machine name: non-zero byte 0x%02x after its end",
                               m[i]);
    memcpy(out->machine, m, mlen + 1);
    /* Records. */
    const uint8_t *r = buf + ISA_HEADER_SIZE;
    for (unsigned e = 0; e < TERN_ENGINE_COUNT; e++) {
        tern_stream *s = &out->streams[e];
        if (counts[e]) {
            s->instrs = calloc(counts[e], sizeof *s->instrs);
            if (!s->instrs)
                return DECODE_FAIL(TERN_ERR_NOMEM, H_COUNTS + 4 * e, "cannot allocate %u instructions", counts[e]);
            s->capacity = counts[e];
        }
        for (uint32_t i = 0; i < counts[e]; i++, r += ISA_RECORD_SIZE) {
            size_t roff = (size_t)(r - buf);
            tern_instr *ins = &s->instrs[i];
            read_record(r, ins);
            char why[256];
            size_t foff;
            if (isa_instr_check(ins, e, 1, &foff, why, sizeof why))
                return DECODE_FAIL(TERN_ERR_PARSE, roff + foff, "instruction %u (%s stream): %s", i,
                                   tern_engine_name((tern_engine)e), why);
            static const unsigned reserved[] = {14, 15, 316, 317, 318, 319};
            for (size_t k = 0; k < TERN_ARRAY_LEN(reserved); k++)
                if (r[reserved[k]])
                    return DECODE_FAIL(TERN_ERR_PARSE, roff + reserved[k],
                                       "instruction %u (%s stream): reserved byte is 0x%02x, must be zero", i,
                                       tern_engine_name((tern_engine)e), r[reserved[k]]);
            s->count = i + 1;
        }
    }
    /* Tensors: the name NUL-terminated with zero padding, reserved bytes zero, fields in range, names unique. */
    for (uint32_t t = 0; t < ntensors; t++) {
        const uint8_t *tr = buf + tsec + 4 + (size_t)t * ISA_TENSOR_RECORD_SIZE;
        size_t toff = (size_t)(tr - buf);
        size_t nlen = strnlen((const char *)tr, TERN_TENSOR_NAME_MAX);
        if (nlen >= TERN_TENSOR_NAME_MAX)
            return DECODE_FAIL(TERN_ERR_PARSE, toff, "tensor %u: name not NUL-terminated within %d bytes", t,
                               TERN_TENSOR_NAME_MAX);
        for (size_t i = nlen; i < TERN_TENSOR_NAME_MAX; i++)
            if (tr[i])
                return DECODE_FAIL(TERN_ERR_PARSE, toff + i, "tensor %u: non-zero byte 0x%02x after its name", t, tr[i]);
        for (size_t i = 51; i < 56; i++)
            if (tr[i])
                return DECODE_FAIL(TERN_ERR_PARSE, toff + i, "tensor %u: reserved byte is 0x%02x, must be zero", t,
                                   tr[i]);
        tern_program_tensor pt;
        read_tensor(tr, &pt);
        tern_error e2;
        if (tern_program_add_tensor(out, &pt, &e2))
            return DECODE_FAIL(TERN_ERR_PARSE, toff, "tensor %u: %s", t, e2.msg);
    }
    uint32_t want_crc = get32(buf + H_CHECKSUM);
    uint32_t got_crc = isa_crc32(buf + H_CHECKSUM + 4, len - (H_CHECKSUM + 4));
    if (want_crc != got_crc)
        return DECODE_FAIL(TERN_ERR_PARSE, H_CHECKSUM, "checksum mismatch: header says 0x%08x, contents hash to 0x%08x",
                           want_crc, got_crc);
    return TERN_OK;
}
