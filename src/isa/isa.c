/* The instruction table made concrete: opcode metadata derived from isa_table.def, the name tables of the
 * ALU operators, activation functions, comparisons, engines and memories, and the program container (five
 * growable in-order streams). Encoding, assembly and validation live in their own files. */
#include "tern/isa.h"
#include "tern/num.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Engine masks used by the table's ENGINES column. */
#define T_ (1u << TERN_ENGINE_TENSOR)
#define V_ (1u << TERN_ENGINE_VECTOR)
#define S_ (1u << TERN_ENGINE_SCALAR)
#define G_ (1u << TERN_ENGINE_GPSIMD)
#define Y_ (1u << TERN_ENGINE_SYNC)
#define T T_
#define V V_
#define S S_
#define G G_
#define VG (V_ | G_)
#define VSG (V_ | S_ | G_)
#define VSGY (V_ | S_ | G_ | Y_)
#define TVSGY (T_ | V_ | S_ | G_ | Y_)

/* The table's FLAGS column. */
#define F_CONTROL TERN_ISA_FLAG_CONTROL

static const tern_opcode_info opcode_table[TERN_OP_COUNT] = {
#define OP(id, name, family, flags, engines, operands, cost, sem)                                                   \
    [TERN_OP_##id] = {name, engines, operands, #cost, sem, TERN_ISA_FAMILY_##family, flags},
#include "tern/isa_table.def"
#undef OP
};

const tern_opcode_info *tern_opcode_get(tern_opcode op)
{
    return (unsigned)op < TERN_OP_COUNT ? &opcode_table[op] : NULL;
}

int tern_opcode_is_control(unsigned op)
{
    return op < TERN_OP_COUNT && (opcode_table[op].flags & TERN_ISA_FLAG_CONTROL);
}

static const char *const family_names[TERN_ISA_FAMILY_COUNT] = {
#define X(id, name) name,
    TERN_ISA_FAMILIES(X)
#undef X
};
const char *tern_isa_family_name(tern_isa_family f)
{
    return (unsigned)f < TERN_ISA_FAMILY_COUNT ? family_names[f] : "?";
}

tern_opcode tern_opcode_from_name(const char *name)
{
    for (unsigned i = 0; i < TERN_OP_COUNT; i++)
        if (!strcmp(opcode_table[i].name, name))
            return (tern_opcode)i;
    return TERN_OP_COUNT;
}

static const char *const engine_names[TERN_ENGINE_COUNT] = {"tensor", "vector", "scalar", "gpsimd", "sync"};
const char *tern_engine_name(tern_engine e) { return (unsigned)e < TERN_ENGINE_COUNT ? engine_names[e] : "?"; }

static const char *const mem_names[TERN_MEM_COUNT] = {"none", "sbuf", "psum", "hbm"};
const char *tern_mem_name(tern_mem m) { return (unsigned)m < TERN_MEM_COUNT ? mem_names[m] : "?"; }

static const char *const alu_names[] = {
#define X(id, name) name,
    TERN_ALU_OPS(X)
#undef X
};
static const char *const act_names[] = {
#define X(id, name) name,
    TERN_ACT_FUNCS(X)
#undef X
};
static const char *const cmp_names[] = {
#define X(id, name) name,
    TERN_CMP_OPS(X)
#undef X
};

static unsigned lookup(const char *const *names, unsigned count, const char *name)
{
    for (unsigned i = 0; i < count; i++)
        if (!strcmp(names[i], name))
            return i;
    return count;
}

const char *tern_alu_name(tern_alu_op op) { return (unsigned)op < TERN_ALU_COUNT ? alu_names[op] : "?"; }
tern_alu_op tern_alu_from_name(const char *name) { return (tern_alu_op)lookup(alu_names, TERN_ALU_COUNT, name); }
const char *tern_act_name(tern_act_func f) { return (unsigned)f < TERN_ACT_COUNT ? act_names[f] : "?"; }
tern_act_func tern_act_from_name(const char *name) { return (tern_act_func)lookup(act_names, TERN_ACT_COUNT, name); }
const char *tern_cmp_name(tern_cmp_op c) { return (unsigned)c < TERN_CMP_COUNT ? cmp_names[c] : "?"; }
tern_cmp_op tern_cmp_from_name(const char *name) { return (tern_cmp_op)lookup(cmp_names, TERN_CMP_COUNT, name); }

/* Saturating: a pattern whose count wraps must never look small (a wrapped 0 once sized a buffer the executor
 * then walked past). */
uint64_t tern_ap_free_elems(const tern_ap *ap)
{
    uint64_t n = 1;
    for (unsigned k = 0; k < ap->ndims && k < TERN_AP_MAX_DIMS; k++)
        if (!tern_mul_u64(n, ap->dims[k].num, &n)) {
            for (unsigned z = 0; z < ap->ndims && z < TERN_AP_MAX_DIMS; z++)
                if (ap->dims[z].num == 0)
                    return 0;
            return UINT64_MAX;
        }
    return ap->ndims ? n : 0;
}

int tern_ap_size_check(const tern_ap *ap, char *why, size_t why_len)
{
    if (ap->ndims == 0)
        return 0;
    unsigned nd = ap->ndims < TERN_AP_MAX_DIMS ? ap->ndims : TERN_AP_MAX_DIMS;
    uint64_t n = ap->num_partitions;
    int ok = 1;
    for (unsigned k = 0; k < nd && ok; k++)
        ok = tern_mul_u64(n, ap->dims[k].num, &n);
    if (ok && n <= TERN_AP_MAX_ELEMS)
        return 0;
    /* A zero count after an overflowing prefix makes the exact product 0: fine (the zero-size rules judge it). */
    if (!ok) {
        if (ap->num_partitions == 0)
            return 0;
        for (unsigned k = 0; k < nd; k++)
            if (ap->dims[k].num == 0)
                return 0;
    }
    char dims[96];
    size_t l = 0;
    dims[0] = '\0';
    for (unsigned k = 0; k < nd; k++)
        l += (size_t)snprintf(dims + l, sizeof dims - l, "%s%" PRIu32, k ? " x " : "", ap->dims[k].num);
    if (!ok)
        snprintf(why, why_len, "%u free dimensions [%s] x %u partitions: element count overflows 64 bits", nd, dims,
                 ap->num_partitions);
    else
        snprintf(why, why_len, "%u free dimensions [%s] x %u partitions: %" PRIu64 " elements, above tern's "
                 "per-instruction limit of %llu", nd, dims, ap->num_partitions, n, TERN_AP_MAX_ELEMS);
    return -1;
}

void tern_program_init(tern_program *p)
{
    memset(p, 0, sizeof *p);
    p->num_semaphores = 32;
}

void tern_program_free(tern_program *p)
{
    for (unsigned e = 0; e < TERN_ENGINE_COUNT; e++)
        free(p->streams[e].instrs);
    free(p->tensors);
    memset(p, 0, sizeof *p);
}

tern_status tern_program_append(tern_program *p, const tern_instr *ins, tern_error *err)
{
    if (ins->engine >= TERN_ENGINE_COUNT)
        return tern_error_set(err, TERN_ERR_INVALID, "program append: engine %u out of range (0..%d)",
                              ins->engine, TERN_ENGINE_COUNT - 1);
    tern_stream *s = &p->streams[ins->engine];
    if (s->count == s->capacity) {
        size_t cap = s->capacity ? s->capacity * 2 : 64;
        tern_instr *n = realloc(s->instrs, cap * sizeof *n);
        if (!n)
            return tern_error_set(err, TERN_ERR_NOMEM, "program append: cannot grow %s stream to %zu instructions",
                                  tern_engine_name((tern_engine)ins->engine), cap);
        s->instrs = n;
        s->capacity = cap;
    }
    s->instrs[s->count++] = *ins;
    return TERN_OK;
}

size_t tern_program_instr_count(const tern_program *p)
{
    size_t n = 0;
    for (unsigned e = 0; e < TERN_ENGINE_COUNT; e++)
        n += p->streams[e].count;
    return n;
}

static const char *const tensor_kind_names[TERN_TENSOR_KIND_COUNT] = {"input", "output", "scratch", "constant"};

const char *tern_tensor_kind_name(tern_tensor_kind k)
{
    return (unsigned)k < TERN_TENSOR_KIND_COUNT ? tensor_kind_names[k] : "?";
}

int tern_program_tensor_check(const tern_program_tensor *t, char *why, size_t why_len)
{
    size_t len = strnlen(t->name, TERN_TENSOR_NAME_MAX);
    if (len == 0 || len >= TERN_TENSOR_NAME_MAX) {
        snprintf(why, why_len, "tensor name must be 1..%d characters", TERN_TENSOR_NAME_MAX - 1);
        return -1;
    }
    for (size_t i = 0; i < len; i++) {
        char c = t->name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
              c == '-')) {
            snprintf(why, why_len, "tensor '%.*s': character %zu not one of [A-Za-z0-9_.-]", (int)len, t->name, i);
            return -1;
        }
    }
    if (t->kind >= TERN_TENSOR_KIND_COUNT) {
        snprintf(why, why_len, "tensor '%s': kind %u unknown (input, output, scratch, constant)", t->name, t->kind);
        return -1;
    }
    if (t->dtype >= TERN_DTYPE_COUNT) {
        snprintf(why, why_len, "tensor '%s': dtype %u unknown", t->name, t->dtype);
        return -1;
    }
    if (t->ndims == 0 || t->ndims > TERN_AP_MAX_DIMS) {
        snprintf(why, why_len, "tensor '%s': rank %u outside 1..%d", t->name, t->ndims, TERN_AP_MAX_DIMS);
        return -1;
    }
    for (unsigned d = 0; d < TERN_AP_MAX_DIMS; d++) {
        if (d < t->ndims && (t->shape[d] == 0 || t->shape[d] > UINT32_MAX)) {
            snprintf(why, why_len, "tensor '%s': dimension %u size %llu outside 1..%u", t->name, d,
                     (unsigned long long)t->shape[d], UINT32_MAX);
            return -1;
        }
        if (d >= t->ndims && t->shape[d] != 0) {
            snprintf(why, why_len, "tensor '%s': dimension %u set beyond rank %u", t->name, d, t->ndims);
            return -1;
        }
    }
    return 0;
}

tern_status tern_program_add_tensor(tern_program *p, const tern_program_tensor *t, tern_error *err)
{
    char why[160];
    if (tern_program_tensor_check(t, why, sizeof why))
        return tern_error_set(err, TERN_ERR_INVALID, "program: %s", why);
    if (tern_program_find_tensor(p, t->name))
        return tern_error_set(err, TERN_ERR_INVALID, "program: tensor '%s' declared twice", t->name);
    if (p->num_tensors == p->tensors_capacity) {
        size_t cap = p->tensors_capacity ? p->tensors_capacity * 2 : 8;
        tern_program_tensor *n = realloc(p->tensors, cap * sizeof *n);
        if (!n)
            return tern_error_set(err, TERN_ERR_NOMEM, "program: out of memory for tensors");
        p->tensors = n;
        p->tensors_capacity = cap;
    }
    tern_program_tensor *d = &p->tensors[p->num_tensors++];
    memset(d, 0, sizeof *d);
    memcpy(d->name, t->name, strnlen(t->name, TERN_TENSOR_NAME_MAX - 1));
    d->kind = t->kind;
    d->dtype = t->dtype;
    d->ndims = t->ndims;
    memcpy(d->shape, t->shape, sizeof d->shape);
    d->hbm_addr = t->hbm_addr;
    return TERN_OK;
}

const tern_program_tensor *tern_program_find_tensor(const tern_program *p, const char *name)
{
    for (size_t i = 0; i < p->num_tensors; i++)
        if (!strncmp(p->tensors[i].name, name, TERN_TENSOR_NAME_MAX))
            return &p->tensors[i];
    return NULL;
}

/* Saturates at UINT64_MAX: the formats carry any 32-bit dimensions (the codec round-trips them), so a shape
 * whose bytes overflow is representable; saturating keeps it from ever matching a real size or fitting HBM. */
uint64_t tern_program_tensor_bytes(const tern_program_tensor *t)
{
    uint64_t n = tern_dtype_size((tern_dtype)t->dtype);
    for (unsigned d = 0; d < t->ndims && d < TERN_AP_MAX_DIMS; d++)
        if (!tern_mul_u64(n, t->shape[d], &n))
            return UINT64_MAX;
    return n;
}
