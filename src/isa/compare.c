/* Program equality and the round-trip self-check: a program must survive binary encoding and text assembly
 * unchanged, field by field. Tests run every program they execute through tern_program_roundtrip_check (the
 * simulator does it when TERN_CHECK_ROUNDTRIP=1), so the codec and the assembler cover all that tern builds. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tern/isa.h"

static int ap_equal(const tern_ap *a, const tern_ap *b)
{
    if (a->mem != b->mem || a->dtype != b->dtype || a->ndims != b->ndims || a->offset_reg != b->offset_reg ||
        a->start_partition != b->start_partition || a->num_partitions != b->num_partitions ||
        a->partition_step != b->partition_step || a->offset != b->offset)
        return 0;
    for (unsigned k = 0; k < TERN_AP_MAX_DIMS; k++)
        if (a->dims[k].step != b->dims[k].step || a->dims[k].num != b->dims[k].num)
            return 0;
    return 1;
}

static int instr_equal(const tern_instr *a, const tern_instr *b, const char **field)
{
#define SAME(f)                                                                                                \
    if (a->f != b->f) {                                                                                        \
        *field = #f;                                                                                           \
        return 0;                                                                                              \
    }
    SAME(opcode) SAME(engine) SAME(op0) SAME(op1) SAME(func) SAME(queue) SAME(rd) SAME(ra) SAME(rb) SAME(flags)
    SAME(wait_sem) SAME(signal_sem) SAME(wait_value) SAME(imm0.i) SAME(imm1.i) SAME(imm_i0) SAME(imm_i1)
#undef SAME
    for (int s = 0; s < TERN_INSTR_OPERANDS; s++)
        if (!ap_equal(&a->ap[s], &b->ap[s])) {
            static const char *const names[TERN_INSTR_OPERANDS] = {"ap[dst]", "ap[in0]", "ap[in1]", "ap[in2]",
                                                                   "ap[extra]"};
            *field = names[s];
            return 0;
        }
    return 1;
}

int tern_program_equal(const tern_program *a, const tern_program *b, char *why, size_t why_len)
{
    if (strcmp(a->machine, b->machine) != 0 || a->num_semaphores != b->num_semaphores) {
        if (why)
            snprintf(why, why_len, "header differs (machine '%s' vs '%s', semaphores %u vs %u)", a->machine,
                     b->machine, a->num_semaphores, b->num_semaphores);
        return 0;
    }
    if (a->num_tensors != b->num_tensors) {
        if (why)
            snprintf(why, why_len, "%zu vs %zu tensors", a->num_tensors, b->num_tensors);
        return 0;
    }
    for (size_t t = 0; t < a->num_tensors; t++) {
        const tern_program_tensor *x = &a->tensors[t], *y = &b->tensors[t];
        if (strncmp(x->name, y->name, TERN_TENSOR_NAME_MAX) || x->kind != y->kind || x->dtype != y->dtype ||
            x->ndims != y->ndims || memcmp(x->shape, y->shape, sizeof x->shape) || x->hbm_addr != y->hbm_addr) {
            if (why)
                snprintf(why, why_len, "tensor %zu ('%s') differs", t, x->name);
            return 0;
        }
    }
    for (unsigned e = 0; e < TERN_ENGINE_COUNT; e++) {
        const tern_stream *sa = &a->streams[e], *sb = &b->streams[e];
        if (sa->count != sb->count) {
            if (why)
                snprintf(why, why_len, "%s stream has %zu vs %zu instructions", tern_engine_name((tern_engine)e),
                         sa->count, sb->count);
            return 0;
        }
        for (size_t i = 0; i < sa->count; i++) {
            const char *field = "";
            if (!instr_equal(&sa->instrs[i], &sb->instrs[i], &field)) {
                if (why)
                    snprintf(why, why_len, "%s #%zu differs in %s", tern_engine_name((tern_engine)e), i, field);
                return 0;
            }
        }
    }
    return 1;
}

tern_status tern_program_roundtrip_check(const tern_program *p, tern_error *err)
{
    uint8_t *bin = NULL;
    size_t len = 0;
    char *text = NULL;
    char why[256];
    tern_program q;
    tern_program_init(&q);
    tern_status st = tern_program_encode(p, &bin, &len, err);
    if (!st)
        st = tern_program_decode(bin, len, &q, err);
    if (!st && !tern_program_equal(p, &q, why, sizeof why))
        st = tern_error_set(err, TERN_ERR_INVALID, "round trip: decode(encode(p)) != p: %s", why);
    tern_program_free(&q);
    tern_program_init(&q);
    if (!st)
        st = tern_program_disasm(p, &text, err);
    if (!st)
        st = tern_program_asm(text, &q, err);
    if (!st && !tern_program_equal(p, &q, why, sizeof why))
        st = tern_error_set(err, TERN_ERR_INVALID, "round trip: asm(disasm(p)) != p: %s", why);
    tern_program_free(&q);
    free(bin);
    free(text);
    return st;
}
