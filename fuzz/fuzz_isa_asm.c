/* libFuzzer target for the assembler. Any text must be assembled or refused (with a line and column) without a
 * crash, leak or over-read; a program that assembles must disassemble, re-assemble to the same program and
 * encode/decode to the same program, or the target aborts. Build and run: scripts/fuzz.sh asm. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tern/isa.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Programs compared through their canonical encoding (every field, no padding). */
static int same_program(const tern_program *a, const tern_program *b)
{
    uint8_t *x = NULL, *y = NULL;
    size_t nx = 0, ny = 0;
    tern_error err;
    int same = tern_program_encode(a, &x, &nx, &err) == TERN_OK && tern_program_encode(b, &y, &ny, &err) == TERN_OK &&
               nx == ny && !memcmp(x, y, nx);
    free(x);
    free(y);
    return same;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    tern_program p, q;
    tern_error err;
    if (tern_program_asm(text, &p, &err) == TERN_OK) {
        char *dis = NULL, *dis2 = NULL;
        if (tern_program_disasm(&p, &dis, &err) != TERN_OK)
            abort();
        if (tern_program_asm(dis, &q, &err) != TERN_OK || !same_program(&p, &q))
            abort();
        if (tern_program_disasm(&q, &dis2, &err) != TERN_OK || strcmp(dis, dis2))
            abort(); /* canonical text must be a fixed point */
        tern_program_free(&q);
        uint8_t *bin = NULL;
        size_t n = 0;
        if (tern_program_encode(&p, &bin, &n, &err) != TERN_OK)
            abort();
        if (tern_program_decode(bin, n, &q, &err) != TERN_OK || !same_program(&p, &q))
            abort();
        tern_program_free(&q);
        free(bin);
        free(dis);
        free(dis2);
    } else if (strncmp(err.msg, "asm line ", 9) != 0) {
        abort(); /* every refusal names a line and column */
    }
    tern_program_free(&p);
    free(text);
    return 0;
}
