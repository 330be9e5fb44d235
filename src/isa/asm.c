/* The text assembly of tern programs: the disassembler prints every non-default field of every instruction in
 * one canonical spelling, and the assembler parses that spelling (plus a few conveniences: decimal or hex,
 * aliases, comments, repeated .engine sections) back to the identical bits. Floats print with %.9g (checked to
 * parse back bit-identically, %a otherwise) and NaNs as raw hex bits, so nothing is lost. The parser works on the
 * const input in place with a cursor, checks every number's range itself (no strtol wrap-around, no strtok) and
 * names the line and column of the first error. Grammar: docs/isa.md, "Assembly". */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "isa/codec.h"
#include "tern/num.h"

/* Flag names, in bit order (TERN_FLAG_*). */
static const char *const flag_names[] = {"acc", "rev0", "rev1", "negate", "reduce", "double_row", "imm", "s0_ap",
                                         "s1_ap"};
_Static_assert(TERN_ARRAY_LEN(flag_names) == 9 && ISA_FLAGS_KNOWN == 0x1FF, "flag names cover the known flags");

static const struct {
    const char *name;
    tern_engine e;
} engine_aliases[] = {{"pe", TERN_ENGINE_TENSOR},
                      {"dve", TERN_ENGINE_VECTOR},
                      {"act", TERN_ENGINE_SCALAR},
                      {"pool", TERN_ENGINE_GPSIMD},
                      {"sp", TERN_ENGINE_SYNC}};

/* imm0/imm1 are a union {float, int32}; the spelling follows how the simulator reads them. Integers: iota and the
 * control opcodes, memset into an integer dtype, tensor_scalar with a bitwise operator (its "bitvec" form).
 * Everything else reads fp32. The choice only affects spelling: both spellings round-trip the exact 32 bits. */
static int alu_bitwise(unsigned op)
{
    return op == TERN_ALU_BITWISE_AND || op == TERN_ALU_BITWISE_OR || op == TERN_ALU_BITWISE_XOR ||
           op == TERN_ALU_SHIFT_LEFT || op == TERN_ALU_SHIFT_RIGHT;
}

static int imm_is_float(const tern_instr *ins)
{
    switch ((tern_opcode)ins->opcode) {
    case TERN_OP_IOTA:
    case TERN_OP_NOP:
    case TERN_OP_SEM_WAIT:
    case TERN_OP_SEM_SIGNAL:
    case TERN_OP_BARRIER:
    case TERN_OP_REG_SET:
    case TERN_OP_REG_ALU:
    case TERN_OP_BRANCH:
    case TERN_OP_HALT:
    case TERN_OP_COLLECTIVE: /* operation, algorithm and groups are integers */
        return 0;
    case TERN_OP_MEMSET:
        return tern_dtype_is_float((tern_dtype)ins->ap[TERN_AP_DST].dtype);
    case TERN_OP_TENSOR_SCALAR:
        return !(alu_bitwise(ins->op0) || alu_bitwise(ins->op1));
    case TERN_OP_LOAD_STATIONARY:
    case TERN_OP_MULTIPLY_MOVING:
    case TERN_OP_TRANSPOSE_PE:
    case TERN_OP_TENSOR_TENSOR:
    case TERN_OP_SCALAR_TENSOR_TENSOR:
    case TERN_OP_TENSOR_REDUCE:
    case TERN_OP_TENSOR_COPY:
    case TERN_OP_TENSOR_COPY_PREDICATED:
    case TERN_OP_SELECT:
    case TERN_OP_BN_STATS:
    case TERN_OP_BN_AGGR:
    case TERN_OP_RECIPROCAL:
    case TERN_OP_TRANSPOSE_VE:
    case TERN_OP_MAX8:
    case TERN_OP_TENSOR_TENSOR_SCAN:
    case TERN_OP_ACTIVATION:
    case TERN_OP_AFFINE_SELECT:
    case TERN_OP_PARTITION_REDUCE:
    case TERN_OP_DMA_COPY:
    case TERN_OP_DMA_GATHER:
    case TERN_OP_TEXT_PARSE:
    case TERN_OP_TEXT_FORMAT:
    case TERN_OP_DMA_SCATTER:
    case TERN_OP_COUNT: /* the decoder and the parser refuse it before an immediate is read */
        return 1;
    }
    return 1;
}

static uint32_t f2u(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}
static float u2f(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* ================================================================ disassembler ==================== */

typedef struct {
    char *p;
    size_t len, cap;
    int oom;
} strbuf;

static void sb_printf(strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(strbuf *b, const char *fmt, ...)
{
    if (b->oom)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->oom = 1;
            return;
        }
        if (b->p && (size_t)n < b->cap - b->len) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = b->cap ? b->cap : 4096;
        while (cap - b->len <= (size_t)n)
            cap *= 2;
        char *q = realloc(b->p, cap);
        if (!q) {
            b->oom = 1;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
}

static void fmt_float(char *buf, size_t n, uint32_t bits)
{
    float f = u2f(bits);
    if (isnan(f)) {
        snprintf(buf, n, "0x%08" PRIx32, bits);
        return;
    }
    snprintf(buf, n, "%.9g", (double)f);
    if (!strpbrk(buf, ".en")) /* "5" would read back as an integer spelling; "inf" and "1e+10" are fine */
        strncat(buf, ".0", n - strlen(buf) - 1);
    if (f2u(strtof(buf, NULL)) != bits)
        snprintf(buf, n, "%a", (double)f);
}

static void print_imm(strbuf *b, const char *key, const tern_instr *ins, int32_t i)
{
    if (!i)
        return;
    if (imm_is_float(ins)) {
        char num[64];
        fmt_float(num, sizeof num, (uint32_t)i);
        sb_printf(b, " %s=%s", key, num);
    } else {
        sb_printf(b, " %s=%" PRId32, key, i);
    }
}

static int ap_is_default(const tern_ap *ap)
{
    tern_ap d;
    memset(&d, 0, sizeof d);
    d.offset_reg = TERN_REG_NONE;
    /* tern_ap has no padding (checked below), so memcmp compares exactly the fields */
    return memcmp(ap, &d, sizeof d) == 0;
}
_Static_assert(sizeof(tern_ap) == 8 + 8 + 8 + 8 * TERN_AP_MAX_DIMS, "tern_ap has no padding");

static void print_ap(strbuf *b, const char *key, const tern_ap *ap)
{
    sb_printf(b, " %s=%s[%u:%u", key, tern_mem_name((tern_mem)ap->mem), ap->start_partition, ap->num_partitions);
    if (ap->partition_step)
        sb_printf(b, ":%" PRId64, ap->partition_step);
    sb_printf(b, "]+");
    if (ap->offset)
        sb_printf(b, "0x%" PRIx64, ap->offset);
    else
        sb_printf(b, "0");
    if (ap->offset_reg != TERN_REG_NONE)
        sb_printf(b, "+r%u", ap->offset_reg);
    sb_printf(b, ":%s[", tern_dtype_name((tern_dtype)ap->dtype));
    for (unsigned d = 0; d < ap->ndims; d++)
        sb_printf(b, "%s[%" PRId32 ",%" PRIu32 "]", d ? "," : "", ap->dims[d].step, ap->dims[d].num);
    sb_printf(b, "]");
}

static void print_instr(strbuf *b, const tern_instr *ins)
{
    const tern_opcode_info *info = tern_opcode_get((tern_opcode)ins->opcode);
    sb_printf(b, "    %s", info->name);
    for (unsigned k = 0; k < TERN_INSTR_OPERANDS; k++)
        if (!ap_is_default(&ins->ap[k]))
            print_ap(b, isa_operand_names[k], &ins->ap[k]);
    if (ins->op0)
        sb_printf(b, " op0=%s",
                  ins->opcode == TERN_OP_BRANCH ? tern_cmp_name((tern_cmp_op)ins->op0)
                                                : tern_alu_name((tern_alu_op)ins->op0));
    print_imm(b, "imm0", ins, ins->imm0.i);
    if (ins->op1)
        sb_printf(b, " op1=%s", tern_alu_name((tern_alu_op)ins->op1));
    print_imm(b, "imm1", ins, ins->imm1.i);
    if (ins->func)
        sb_printf(b, " func=%s", tern_act_name((tern_act_func)ins->func));
    if (ins->rd)
        sb_printf(b, " rd=r%u", ins->rd);
    if (ins->ra)
        sb_printf(b, " ra=r%u", ins->ra);
    if (ins->rb)
        sb_printf(b, " rb=r%u", ins->rb);
    if (ins->imm_i0)
        sb_printf(b, " imm_i0=%" PRId32, ins->imm_i0);
    if (ins->imm_i1)
        sb_printf(b, " imm_i1=%" PRId32, ins->imm_i1);
    if (ins->queue)
        sb_printf(b, " queue=%u", ins->queue);
    if (ins->flags) {
        sb_printf(b, " flags=");
        int first = 1;
        for (unsigned f = 0; f < TERN_ARRAY_LEN(flag_names); f++)
            if (ins->flags & (1u << f)) {
                sb_printf(b, "%s%s", first ? "" : "|", flag_names[f]);
                first = 0;
            }
    }
    if (ins->wait_sem != TERN_SEM_NONE)
        sb_printf(b, " wait=s%u>=%" PRIu32, ins->wait_sem, ins->wait_value);
    if (ins->signal_sem != TERN_SEM_NONE)
        sb_printf(b, " signal=s%u", ins->signal_sem);
    sb_printf(b, "\n");
}

tern_status tern_program_disasm(const tern_program *p, char **out, tern_error *err)
{
    *out = NULL;
    int bad = isa_machine_name_bad(p->machine, sizeof p->machine);
    if (bad >= 0)
        return tern_error_set(err, TERN_ERR_INVALID,
                              "program disasm: machine name: character %d is not one of [A-Za-z0-9._+-] or the "
                              "name is longer than %u characters",
                              bad, ISA_MACHINE_FIELD - 1);
    for (unsigned e = 0; e < TERN_ENGINE_COUNT; e++)
        for (size_t i = 0; i < p->streams[e].count; i++) {
            char why[256];
            size_t off;
            if (isa_instr_check(&p->streams[e].instrs[i], e, 0, &off, why, sizeof why))
                return tern_error_set(err, TERN_ERR_INVALID, "program disasm: instruction %zu (%s stream): %s", i,
                                      tern_engine_name((tern_engine)e), why);
        }
    strbuf b = {0};
    if (p->machine[0])
        sb_printf(&b, ".machine %s\n", p->machine);
    sb_printf(&b, ".semaphores %" PRIu32 "\n", p->num_semaphores);
    for (size_t t = 0; t < p->num_tensors; t++) {
        const tern_program_tensor *pt = &p->tensors[t];
        char why[160];
        if (tern_program_tensor_check(pt, why, sizeof why)) {
            free(b.p);
            return tern_error_set(err, TERN_ERR_INVALID, "program disasm: tensor %zu: %s", t, why);
        }
        sb_printf(&b, ".tensor %s %s %s [", pt->name, tern_tensor_kind_name((tern_tensor_kind)pt->kind),
                  tern_dtype_name((tern_dtype)pt->dtype));
        for (unsigned d = 0; d < pt->ndims; d++)
            sb_printf(&b, "%s%" PRIu64, d ? "," : "", pt->shape[d]);
        sb_printf(&b, "] @0x%" PRIx64 "\n", pt->hbm_addr);
    }
    for (unsigned e = 0; e < TERN_ENGINE_COUNT; e++) {
        const tern_stream *s = &p->streams[e];
        if (!s->count)
            continue;
        sb_printf(&b, "\n.engine %s\n", tern_engine_name((tern_engine)e));
        for (size_t i = 0; i < s->count; i++)
            print_instr(&b, &s->instrs[i]);
    }
    if (b.oom) {
        free(b.p);
        return tern_error_set(err, TERN_ERR_NOMEM, "program disasm: out of memory");
    }
    *out = b.p;
    return TERN_OK;
}

/* ================================================================ assembler ======================= */

typedef struct {
    const char *line; /* start of the current line */
    const char *p;    /* cursor */
    unsigned lineno;
    tern_error *err;
} lexer;

static tern_status perr(const lexer *L, const char *at, tern_status code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static tern_status perr(const lexer *L, const char *at, tern_status code, const char *fmt, ...)
{
    char msg[TERN_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return tern_error_set(L->err, code, "asm line %u, column %zu: %s", L->lineno, (size_t)(at - L->line) + 1, msg);
}

static int is_eol(char c) { return c == '\0' || c == '\n'; }
static int is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }
static int is_comment(char c) { return c == '#' || c == ';'; }
static int is_end(char c) { return is_eol(c) || is_space(c) || is_comment(c); }
static int is_ident(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}
static int is_digit(char c) { return c >= '0' && c <= '9'; }
static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static void skip_space(lexer *L)
{
    while (is_space(*L->p))
        L->p++;
}

/* A token for messages: at most 40 characters up to the end of the value, non-printables as '?'. */
static const char *show(const char *s, size_t n, char *buf, size_t len)
{
    size_t k = 0;
    for (; k < n && k < 40 && k + 4 < len && !is_eol(s[k]); k++)
        buf[k] = (s[k] >= 0x20 && s[k] < 0x7f) ? s[k] : '?';
    if (k < n && k + 4 < len && !is_eol(s[k])) {
        memcpy(buf + k, "...", 3);
        k += 3;
    }
    buf[k] = '\0';
    return buf;
}

/* The extent of a scalar value: up to whitespace, end of line or comment. */
static size_t value_len(const char *p)
{
    size_t n = 0;
    while (!is_end(p[n]))
        n++;
    return n;
}

/* Read an identifier [A-Za-z0-9_]* into buf (NUL-terminated; a longer one is cut, which no name matches). */
static size_t read_ident(lexer *L, char *buf, size_t len)
{
    size_t n = 0;
    while (is_ident(L->p[n])) {
        if (n + 1 < len)
            buf[n] = L->p[n];
        n++;
    }
    buf[n < len ? n : len - 1] = '\0';
    if (n >= len) /* an over-long identifier must match nothing: every name is non-empty */
        buf[0] = '\0';
    L->p += n;
    return n;
}

/* Unsigned number: decimal or 0x hex, digits only (no sign, no spaces), at most max. */
static tern_status read_uint(lexer *L, uint64_t max, uint64_t *out, const char *what)
{
    const char *s = L->p, *q = s;
    uint64_t v = 0;
    int overflow = 0, digits = 0;
    if (q[0] == '0' && (q[1] == 'x' || q[1] == 'X')) {
        q += 2;
        for (int h; (h = hexval(*q)) >= 0; q++, digits++) {
            if (v > (UINT64_MAX >> 4))
                overflow = 1;
            v = (v << 4) | (uint64_t)h;
        }
    } else {
        for (; is_digit(*q); q++, digits++) {
            if (v > (UINT64_MAX - (uint64_t)(*q - '0')) / 10)
                overflow = 1;
            v = v * 10 + (uint64_t)(*q - '0');
        }
    }
    char buf[64];
    if (!digits || is_ident(*q) || *q == '.') {
        size_t n = (size_t)(q - s);
        while (is_ident(s[n]) || s[n] == '.' || s[n] == '-' || s[n] == '+')
            n++;
        return perr(L, s, TERN_ERR_PARSE, "%s: expected an unsigned integer, got '%s'", what,
                    show(s, n ? n : value_len(s), buf, sizeof buf));
    }
    if (overflow || v > max)
        return perr(L, s, TERN_ERR_RANGE, "%s: %s out of range (0..%" PRIu64 ")", what,
                    show(s, (size_t)(q - s), buf, sizeof buf), max);
    *out = v;
    L->p = q;
    return TERN_OK;
}

/* Signed number: optional sign, then as read_uint, within [min, max]. */
static tern_status read_int(lexer *L, int64_t min, int64_t max, int64_t *out, const char *what)
{
    const char *s = L->p;
    int neg = 0;
    if (*L->p == '-' || *L->p == '+')
        neg = *L->p++ == '-';
    uint64_t mag;
    tern_status st = read_uint(L, UINT64_MAX, &mag, what);
    if (st) {
        L->p = s;
        return st;
    }
    char buf[64];
    uint64_t lim = neg ? (uint64_t)0 - (uint64_t)min : (uint64_t)max;
    if (neg && min >= 0)
        lim = 0;
    if (mag > lim) {
        const char *end = L->p;
        L->p = s;
        return perr(L, s, TERN_ERR_RANGE, "%s: %s out of range (%" PRId64 "..%" PRId64 ")", what,
                    show(s, (size_t)(end - s), buf, sizeof buf), min, max);
    }
    *out = neg ? (int64_t)((uint64_t)0 - mag) : (int64_t)mag;
    return TERN_OK;
}

static tern_status expect(lexer *L, char c, const char *what)
{
    if (*L->p != c) {
        char buf[64];
        return perr(L, L->p, TERN_ERR_PARSE, "expected '%c' %s, got '%s'", c, what,
                    is_eol(*L->p) ? "end of line" : show(L->p, 1, buf, sizeof buf));
    }
    L->p++;
    return TERN_OK;
}

/* After a field's value: whitespace, end of line or a comment. */
static tern_status end_of_value(lexer *L, const char *key)
{
    if (is_end(*L->p))
        return TERN_OK;
    char buf[64];
    return perr(L, L->p, TERN_ERR_PARSE, "unexpected '%s' after the value of %s", show(L->p, value_len(L->p), buf,
                                                                                       sizeof buf), key);
}

static tern_status read_reg(lexer *L, unsigned max, uint8_t *out, const char *what)
{
    if (*L->p != 'r') {
        char buf[64];
        return perr(L, L->p, TERN_ERR_PARSE, "%s: expected a register rN, got '%s'", what,
                    show(L->p, value_len(L->p), buf, sizeof buf));
    }
    L->p++;
    uint64_t v;
    tern_status st = read_uint(L, max, &v, what);
    if (st)
        return st;
    *out = (uint8_t)v;
    return TERN_OK;
}

static tern_status read_sem(lexer *L, uint8_t *out, const char *what)
{
    if (*L->p != 's') {
        char buf[64];
        return perr(L, L->p, TERN_ERR_PARSE, "%s: expected a semaphore sN, got '%s'", what,
                    show(L->p, value_len(L->p), buf, sizeof buf));
    }
    L->p++;
    uint64_t v;
    tern_status st = read_uint(L, TERN_SEM_NONE - 1, &v, what);
    if (st)
        return st;
    *out = (uint8_t)v;
    return TERN_OK;
}

/* A name from a table; the error lists the valid ones. */
static tern_status read_name(lexer *L, const char *what, const char *(*name_of)(unsigned), unsigned count,
                             unsigned *out)
{
    const char *s = L->p;
    char id[48];
    size_t n = read_ident(L, id, sizeof id);
    for (unsigned i = 0; n && i < count; i++)
        if (!strcmp(id, name_of(i))) {
            *out = i;
            return TERN_OK;
        }
    char list[1024];
    size_t m = 0;
    list[0] = '\0';
    for (unsigned i = 0; i < count && m < sizeof list; i++) {
        int w = snprintf(list + m, sizeof list - m, "%s%s", i ? ", " : "", name_of(i));
        if (w < 0)
            break;
        m += (size_t)w;
    }
    char buf[64];
    L->p = s;
    return perr(L, s, TERN_ERR_NOT_FOUND, "unknown %s '%s' (valid: %s)", what,
                show(s, n ? n : value_len(s), buf, sizeof buf), list);
}

static const char *alu_name_u(unsigned i) { return tern_alu_name((tern_alu_op)i); }
static const char *cmp_name_u(unsigned i) { return tern_cmp_name((tern_cmp_op)i); }
static const char *act_name_u(unsigned i) { return tern_act_name((tern_act_func)i); }
static const char *mem_name_u(unsigned i) { return tern_mem_name((tern_mem)i); }
static const char *dtype_name_u(unsigned i) { return tern_dtype_name((tern_dtype)i); }
static const char *flag_name_u(unsigned i) { return flag_names[i]; }

static tern_status read_dtype(lexer *L, uint8_t *out)
{
    const char *s = L->p;
    char id[48];
    size_t n = read_ident(L, id, sizeof id);
    tern_dtype t;
    if (n && id[0] && tern_dtype_from_name(id, &t, NULL) == TERN_OK && (unsigned)t < TERN_DTYPE_COUNT) {
        *out = (uint8_t)t;
        return TERN_OK;
    }
    L->p = s;
    unsigned dummy;
    return read_name(L, "dtype", dtype_name_u, TERN_DTYPE_COUNT, &dummy);
}

/* imm0/imm1: 32 raw bits as 0x hex; a float literal (decimal, hex float, inf, nan); or a decimal integer, read
 * as fp32 for float opcodes and as int32 otherwise. */
static tern_status read_imm(lexer *L, int is_float, const char *key, int32_t *out)
{
    const char *s = L->p;
    size_t n = value_len(s);
    char tok[72], buf[64];
    if (n == 0)
        return perr(L, s, TERN_ERR_PARSE, "%s: expected a number, got ''", key);
    if (n >= sizeof tok)
        return perr(L, s, TERN_ERR_PARSE, "%s: number '%s' longer than %zu characters", key,
                    show(s, n, buf, sizeof buf), sizeof tok - 1);
    memcpy(tok, s, n);
    tok[n] = '\0';
    const char *body = tok + (tok[0] == '-' || tok[0] == '+');
    int hex = body[0] == '0' && (body[1] == 'x' || body[1] == 'X');
    if (hex && !strpbrk(body, ".pP")) {
        if (body != tok)
            return perr(L, s, TERN_ERR_PARSE, "%s: raw bits '%s' cannot have a sign", key, tok);
        uint64_t v;
        tern_status st = read_uint(L, UINT32_MAX, &v, key);
        if (st)
            return st;
        if (L->p != s + n) /* "0x1+2": the digits stopped before the end of the value */
            return perr(L, s, TERN_ERR_PARSE, "%s: '%s' is not a number", key, tok);
        *out = (int32_t)(uint32_t)v;
        return TERN_OK;
    }
    int integer = body[0] != '\0' && strspn(body, "0123456789") == strlen(body);
    if (integer && !is_float) {
        int64_t v;
        tern_status st = read_int(L, INT32_MIN, INT32_MAX, &v, key);
        if (st)
            return st;
        *out = (int32_t)v;
        return TERN_OK;
    }
    /* strtof accepts exactly the forms we document; restrict the characters so it cannot see "nan(...)". */
    if (strspn(tok, "0123456789abcdefABCDEFxXpP.+-infINFtyTY") != n)
        return perr(L, s, TERN_ERR_PARSE, "%s: '%s' is not a number", key, tok);
    errno = 0;
    char *end;
    float f = strtof(tok, &end);
    if (end != tok + n)
        return perr(L, s, TERN_ERR_PARSE, "%s: '%s' is not a number", key, tok);
    if (errno == ERANGE && isinf(f))
        return perr(L, s, TERN_ERR_RANGE, "%s: %s overflows fp32 (max 3.40282347e+38)", key, tok);
    if (errno == ERANGE && f == 0.0f)
        return perr(L, s, TERN_ERR_RANGE, "%s: %s underflows fp32 (smallest subnormal 1.40129846e-45)", key, tok);
    L->p = s + n;
    *out = (int32_t)f2u(f);
    return TERN_OK;
}

/* mem[start:count(:pstep)]+offset(+rN):dtype[[step,num],...] */
static tern_status read_ap(lexer *L, tern_ap *ap, const char *key)
{
    tern_status st;
    unsigned mem = 0; /* read_name sets it on success; initialised for gcc -O3's flow analysis */
    char what[64];
    if ((st = read_name(L, "memory", mem_name_u, TERN_MEM_COUNT, &mem)))
        return st;
    ap->mem = (uint8_t)mem;
    uint64_t u;
    int64_t i;
    if ((st = expect(L, '[', "after the memory name")))
        return st;
    snprintf(what, sizeof what, "%s start partition", key);
    if ((st = read_uint(L, UINT16_MAX, &u, what)))
        return st;
    ap->start_partition = (uint16_t)u;
    if ((st = expect(L, ':', "between start partition and partition count")))
        return st;
    snprintf(what, sizeof what, "%s partition count", key);
    if ((st = read_uint(L, UINT16_MAX, &u, what)))
        return st;
    ap->num_partitions = (uint16_t)u;
    if (*L->p == ':') {
        L->p++;
        snprintf(what, sizeof what, "%s partition step", key);
        if ((st = read_int(L, INT64_MIN, INT64_MAX, &i, what)))
            return st;
        ap->partition_step = i;
    }
    if ((st = expect(L, ']', "after the partitions")))
        return st;
    if (*L->p == '+' && L->p[1] != 'r') {
        L->p++;
        snprintf(what, sizeof what, "%s offset", key);
        if ((st = read_uint(L, UINT64_MAX, &u, what)))
            return st;
        ap->offset = u;
    }
    if (*L->p == '+' && L->p[1] == 'r') {
        L->p++;
        snprintf(what, sizeof what, "%s offset register", key);
        if ((st = read_reg(L, TERN_REG_NONE - 1, &ap->offset_reg, what)))
            return st;
    }
    if ((st = expect(L, ':', "before the dtype")))
        return st;
    if ((st = read_dtype(L, &ap->dtype)))
        return st;
    if ((st = expect(L, '[', "opening the dimension list")))
        return st;
    unsigned nd = 0;
    while (*L->p != ']') {
        if (nd && (st = expect(L, ',', "between dimensions")))
            return st;
        if (nd == TERN_AP_MAX_DIMS)
            return perr(L, L->p, TERN_ERR_RANGE, "%s: more than %d dimensions", key, TERN_AP_MAX_DIMS);
        if ((st = expect(L, '[', "opening a dimension [step,num]")))
            return st;
        snprintf(what, sizeof what, "%s dims[%u] step", key, nd);
        if ((st = read_int(L, INT32_MIN, INT32_MAX, &i, what)))
            return st;
        ap->dims[nd].step = (int32_t)i;
        if ((st = expect(L, ',', "between step and num")))
            return st;
        snprintf(what, sizeof what, "%s dims[%u] num", key, nd);
        if ((st = read_uint(L, UINT32_MAX, &u, what)))
            return st;
        ap->dims[nd].num = (uint32_t)u;
        if ((st = expect(L, ']', "closing a dimension")))
            return st;
        nd++;
    }
    L->p++;
    ap->ndims = (uint8_t)nd;
    return TERN_OK;
}

static tern_status read_flags(lexer *L, uint16_t *out)
{
    unsigned f = 0; /* set by read_name on success */
    tern_status st;
    for (;;) {
        const char *s = L->p;
        if ((st = read_name(L, "flag", flag_name_u, TERN_ARRAY_LEN(flag_names), &f)))
            return st;
        if (*out & (1u << f))
            return perr(L, s, TERN_ERR_PARSE, "flag '%s' repeated", flag_names[f]);
        *out = (uint16_t)(*out | (1u << f));
        if (*L->p != '|')
            return TERN_OK;
        L->p++;
    }
}

enum {
    K_DST,
    K_IN0,
    K_IN1,
    K_IN2,
    K_EXTRA,
    K_OP0,
    K_OP1,
    K_FUNC,
    K_IMM0,
    K_IMM1,
    K_IMM_I0,
    K_IMM_I1,
    K_RD,
    K_RA,
    K_RB,
    K_QUEUE,
    K_FLAGS,
    K_WAIT,
    K_SIGNAL,
    K_COUNT
};
static const char *const key_names[K_COUNT] = {"dst",  "in0",    "in1",    "in2", "extra", "op0",   "op1",
                                               "func", "imm0",   "imm1",   "imm_i0", "imm_i1", "rd", "ra",
                                               "rb",   "queue",  "flags",  "wait", "signal"};
static const char *key_name_u(unsigned i) { return key_names[i]; }

static tern_status read_field(lexer *L, unsigned key, tern_instr *ins)
{
    tern_status st = TERN_OK;
    unsigned v;
    uint64_t u;
    int64_t i;
    switch (key) {
    case K_DST:
    case K_IN0:
    case K_IN1:
    case K_IN2:
    case K_EXTRA:
        return read_ap(L, &ins->ap[key - K_DST], key_names[key]);
    case K_OP0:
        if (ins->opcode == TERN_OP_BRANCH)
            st = read_name(L, "comparison", cmp_name_u, TERN_CMP_COUNT, &v);
        else
            st = read_name(L, "ALU operator", alu_name_u, TERN_ALU_COUNT, &v);
        ins->op0 = (uint8_t)v;
        return st;
    case K_OP1:
        st = read_name(L, "ALU operator", alu_name_u, TERN_ALU_COUNT, &v);
        ins->op1 = (uint8_t)v;
        return st;
    case K_FUNC:
        st = read_name(L, "activation function", act_name_u, TERN_ACT_COUNT, &v);
        ins->func = (uint8_t)v;
        return st;
    case K_IMM0:
    case K_IMM1:
        /* read once the whole instruction is known (the spelling depends on op0/op1 and dst's dtype) */
        L->p += value_len(L->p);
        return TERN_OK;
    case K_IMM_I0:
    case K_IMM_I1: {
        /* 0x hex is the raw 32 bits, like imm0 */
        if (L->p[0] == '0' && (L->p[1] == 'x' || L->p[1] == 'X')) {
            st = read_uint(L, UINT32_MAX, &u, key_names[key]);
            i = (int32_t)(uint32_t)u;
        } else {
            st = read_int(L, INT32_MIN, INT32_MAX, &i, key_names[key]);
        }
        if (!st)
            *(key == K_IMM_I0 ? &ins->imm_i0 : &ins->imm_i1) = (int32_t)i;
        return st;
    }
    case K_RD: return read_reg(L, 255, &ins->rd, "rd");
    case K_RA: return read_reg(L, 255, &ins->ra, "ra");
    case K_RB: return read_reg(L, 255, &ins->rb, "rb");
    case K_QUEUE:
        st = read_uint(L, ISA_QUEUE_COUNT - 1, &u, "queue");
        ins->queue = (uint8_t)u;
        return st;
    case K_FLAGS: return read_flags(L, &ins->flags);
    case K_WAIT:
        if ((st = read_sem(L, &ins->wait_sem, "wait semaphore")))
            return st;
        if (L->p[0] != '>' || L->p[1] != '=') {
            char buf[64];
            return perr(L, L->p, TERN_ERR_PARSE, "wait: expected '>=' after the semaphore, got '%s'",
                        show(L->p, value_len(L->p), buf, sizeof buf));
        }
        L->p += 2;
        st = read_uint(L, UINT32_MAX, &u, "wait value");
        ins->wait_value = (uint32_t)u;
        return st;
    case K_SIGNAL: return read_sem(L, &ins->signal_sem, "signal semaphore");
    }
    return TERN_ERR_INVALID;
}

static tern_status read_instr(lexer *L, int engine, tern_program *out)
{
    const char *s = L->p;
    char id[48], buf[64];
    size_t n = read_ident(L, id, sizeof id);
    if (!n || !is_end(*L->p))
        return perr(L, s, TERN_ERR_PARSE, "expected a mnemonic or directive, got '%s'",
                    show(s, value_len(s), buf, sizeof buf));
    tern_opcode op = tern_opcode_from_name(id);
    if (op == TERN_OP_COUNT)
        return perr(L, s, TERN_ERR_NOT_FOUND, "unknown mnemonic '%s'", show(s, n, buf, sizeof buf));
    if (engine < 0)
        return perr(L, s, TERN_ERR_PARSE, "instruction '%s' before any .engine directive", id);
    tern_instr ins;
    memset(&ins, 0, sizeof ins);
    ins.opcode = (uint16_t)op;
    ins.engine = (uint8_t)engine;
    ins.wait_sem = ins.signal_sem = TERN_SEM_NONE;
    for (unsigned k = 0; k < TERN_INSTR_OPERANDS; k++)
        ins.ap[k].offset_reg = TERN_REG_NONE;
    unsigned seen = 0;
    const char *imm_at[2] = {NULL, NULL};
    tern_status st;
    for (;;) {
        skip_space(L);
        if (is_eol(*L->p) || is_comment(*L->p))
            break;
        const char *ks = L->p;
        unsigned key = 0; /* set by read_name on success */
        if ((st = read_name(L, "field", key_name_u, K_COUNT, &key)))
            return st;
        if (seen & (1u << key))
            return perr(L, ks, TERN_ERR_PARSE, "field '%s' given twice", key_names[key]);
        seen |= 1u << key;
        if ((st = expect(L, '=', "after the field name")))
            return st;
        if (key == K_IMM0 || key == K_IMM1)
            imm_at[key - K_IMM0] = L->p;
        if ((st = read_field(L, key, &ins)))
            return st;
        if ((st = end_of_value(L, key_names[key])))
            return st;
    }
    const char *line_end = L->p;
    for (int k = 0; k < 2; k++)
        if (imm_at[k]) {
            L->p = imm_at[k];
            if ((st = read_imm(L, imm_is_float(&ins), k ? "imm1" : "imm0", k ? &ins.imm1.i : &ins.imm0.i)))
                return st;
        }
    L->p = line_end;
    char why[256];
    size_t off;
    if (isa_instr_check(&ins, (unsigned)engine, 1, &off, why, sizeof why))
        return perr(L, s, TERN_ERR_INVALID, "%s", why);
    tern_error e2;
    if (tern_program_append(out, &ins, &e2))
        return perr(L, s, e2.code, "%s", e2.msg);
    return TERN_OK;
}

/* .tensor NAME KIND DTYPE [d0,d1,...] @ADDR */
static tern_status read_tensor_directive(lexer *L, tern_program *out)
{
    char buf[64];
    tern_status st;
    tern_program_tensor t;
    memset(&t, 0, sizeof t);
    skip_space(L);
    const char *ns = L->p;
    size_t nlen = 0;
    while (is_ident(ns[nlen]) || ns[nlen] == '.' || ns[nlen] == '-')
        nlen++;
    if (nlen == 0 || nlen >= TERN_TENSOR_NAME_MAX)
        return perr(L, ns, TERN_ERR_PARSE, ".tensor: expected a name of 1..%d characters [A-Za-z0-9_.-], got '%s'",
                    TERN_TENSOR_NAME_MAX - 1, show(ns, value_len(ns), buf, sizeof buf));
    memcpy(t.name, ns, nlen);
    L->p = ns + nlen;
    if ((st = end_of_value(L, ".tensor name")))
        return st;
    skip_space(L);
    const char *ks = L->p;
    char kind[48];
    read_ident(L, kind, sizeof kind);
    unsigned k = 0;
    while (k < TERN_TENSOR_KIND_COUNT && strcmp(kind, tern_tensor_kind_name((tern_tensor_kind)k)))
        k++;
    if (k == TERN_TENSOR_KIND_COUNT)
        return perr(L, ks, TERN_ERR_NOT_FOUND, ".tensor %s: unknown kind '%s' (valid: input, output, scratch, constant)", t.name,
                    show(ks, value_len(ks), buf, sizeof buf));
    t.kind = (uint8_t)k;
    skip_space(L);
    if ((st = read_dtype(L, &t.dtype)))
        return st;
    skip_space(L);
    if ((st = expect(L, '[', "before the tensor shape")))
        return st;
    for (;;) {
        if (t.ndims == TERN_AP_MAX_DIMS)
            return perr(L, L->p, TERN_ERR_RANGE, ".tensor %s: more than %d dimensions", t.name, TERN_AP_MAX_DIMS);
        uint64_t d;
        if ((st = read_uint(L, UINT32_MAX, &d, "tensor dimension")))
            return st;
        if (d == 0)
            return perr(L, L->p, TERN_ERR_RANGE, ".tensor %s: dimension %u has size 0", t.name, t.ndims);
        t.shape[t.ndims++] = d;
        if (*L->p == ',') {
            L->p++;
            continue;
        }
        if ((st = expect(L, ']', "after the tensor shape")))
            return st;
        break;
    }
    skip_space(L);
    if ((st = expect(L, '@', "before the tensor's HBM address")))
        return st;
    if ((st = read_uint(L, UINT64_MAX, &t.hbm_addr, "HBM address")))
        return st;
    if ((st = end_of_value(L, ".tensor")))
        return st;
    tern_error e2;
    if (tern_program_add_tensor(out, &t, &e2))
        return perr(L, ns, e2.code, "%s", e2.msg);
    return TERN_OK;
}

static tern_status read_directive(lexer *L, int *engine, tern_program *out)
{
    const char *s = L->p;
    char id[48], buf[64];
    L->p++; /* '.' */
    size_t n = read_ident(L, id, sizeof id);
    tern_status st;
    if (!strcmp(id, "machine") && is_space(*L->p)) {
        skip_space(L);
        const char *m = L->p;
        size_t len = value_len(m);
        for (size_t k = 0; k < len; k++)
            if (!(is_ident(m[k]) || m[k] == '.' || m[k] == '-' || m[k] == '+'))
                return perr(L, m + k, TERN_ERR_PARSE, "machine name: character '%s' not allowed ([A-Za-z0-9._+-])",
                            show(m + k, 1, buf, sizeof buf));
        if (len == 0)
            return perr(L, m, TERN_ERR_PARSE, ".machine: expected a name");
        if (len >= ISA_MACHINE_FIELD)
            return perr(L, m, TERN_ERR_RANGE, "machine name '%s' longer than %u characters",
                        show(m, len, buf, sizeof buf), ISA_MACHINE_FIELD - 1);
        memset(out->machine, 0, sizeof out->machine);
        memcpy(out->machine, m, len);
        L->p = m + len;
        return TERN_OK;
    }
    if (!strcmp(id, "semaphores") && is_space(*L->p)) {
        skip_space(L);
        uint64_t u;
        if ((st = read_uint(L, UINT32_MAX, &u, ".semaphores")))
            return st;
        out->num_semaphores = (uint32_t)u;
        return end_of_value(L, ".semaphores");
    }
    if (!strcmp(id, "engine") && is_space(*L->p)) {
        skip_space(L);
        const char *es = L->p;
        char name[48];
        size_t en = read_ident(L, name, sizeof name);
        int known = 0;
        for (unsigned e = 0; en && name[0] && e < TERN_ENGINE_COUNT; e++)
            if (!strcmp(name, tern_engine_name((tern_engine)e))) {
                *engine = (int)e;
                known = 1;
            }
        for (unsigned a = 0; en && name[0] && a < TERN_ARRAY_LEN(engine_aliases); a++)
            if (!strcmp(name, engine_aliases[a].name)) {
                *engine = (int)engine_aliases[a].e;
                known = 1;
            }
        if (!known)
            return perr(L, es, TERN_ERR_NOT_FOUND,
                        "unknown engine '%s' (valid: tensor, vector, scalar, gpsimd, sync; aliases pe, dve, act, "
                        "pool, sp)",
                        show(es, en ? en : value_len(es), buf, sizeof buf));
        return end_of_value(L, ".engine");
    }
    if (!strcmp(id, "tensor") && is_space(*L->p))
        return read_tensor_directive(L, out);
    if (n && (!strcmp(id, "machine") || !strcmp(id, "semaphores") || !strcmp(id, "engine") || !strcmp(id, "tensor")))
        return perr(L, L->p, TERN_ERR_PARSE, ".%s: expected a value after the directive", id);
    return perr(L, s, TERN_ERR_PARSE, "unknown directive '%s' (valid: .machine, .semaphores, .tensor, .engine)",
                show(s, value_len(s), buf, sizeof buf));
}

tern_status tern_program_asm(const char *text, tern_program *out, tern_error *err)
{
    tern_program_init(out);
    if (!text)
        return tern_error_set(err, TERN_ERR_INVALID, "asm: no text");
    lexer L = {text, text, 1, err};
    int engine = -1;
    for (;;) {
        skip_space(&L);
        tern_status st = TERN_OK;
        if (*L.p == '.')
            st = read_directive(&L, &engine, out);
        else if (!is_eol(*L.p) && !is_comment(*L.p))
            st = read_instr(&L, engine, out);
        if (st) {
            tern_program_free(out);
            return st;
        }
        skip_space(&L);
        if (!is_eol(*L.p) && !is_comment(*L.p)) {
            char buf[64];
            st = perr(&L, L.p, TERN_ERR_PARSE, "unexpected '%s' at the end of the line",
                      show(L.p, value_len(L.p), buf, sizeof buf));
            tern_program_free(out);
            return st;
        }
        while (!is_eol(*L.p))
            L.p++;
        if (*L.p == '\0')
            break;
        L.p++;
        L.line = L.p;
        L.lineno++;
    }
    return TERN_OK;
}
