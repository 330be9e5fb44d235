/* libFuzzer target for the binary program decoder. Any input must be decoded or refused without a crash, leak or
 * over-read. Because a random mutation rarely keeps the CRC valid, each input is also tried with its checksum
 * patched, so the fuzzer reaches the record checks and the success path; anything accepted must re-encode to the
 * identical bytes and survive disasm -> asm unchanged (abort() otherwise). Build and run: scripts/fuzz.sh decode. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "isa/codec.h"
#include "tern/isa.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

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

static void check_accepted(const uint8_t *data, size_t size, const tern_program *p)
{
    tern_error err;
    uint8_t *re = NULL;
    size_t n = 0;
    if (tern_program_encode(p, &re, &n, &err) != TERN_OK || n != size || memcmp(re, data, size))
        abort(); /* decode accepted a non-canonical encoding, or encode refuses what decode accepts */
    free(re);
    char *text = NULL;
    if (tern_program_disasm(p, &text, &err) != TERN_OK)
        abort();
    tern_program q;
    if (tern_program_asm(text, &q, &err) != TERN_OK || !same_program(p, &q))
        abort();
    tern_program_free(&q);
    free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tern_program p;
    tern_error err;
    /* Exact-size heap copies, so ASan sees any read past the end. */
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf)
        return 0;
    if (size)
        memcpy(buf, data, size);
    if (tern_program_decode(buf, size, &p, &err) == TERN_OK)
        check_accepted(buf, size, &p);
    tern_program_free(&p);
    if (size >= 20) {
        uint32_t crc = isa_crc32(buf + 20, size - 20);
        for (int i = 0; i < 4; i++)
            buf[16 + i] = (uint8_t)(crc >> (8 * i));
        if (tern_program_decode(buf, size, &p, &err) == TERN_OK)
            check_accepted(buf, size, &p);
        tern_program_free(&p);
    }
    free(buf);
    return 0;
}
