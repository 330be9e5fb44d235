/* libFuzzer target for the executable (.tern) decoder: any input must be decoded or refused without a crash, leak
 * or over-read. A random mutation rarely keeps the CRC-32 valid, so each input is also tried with its checksum
 * patched, which lets the fuzzer reach the record checks and the success path; an accepted executable must
 * re-encode to bytes that decode again to the same encoding (abort() otherwise). Run: scripts/fuzz.sh exe. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tern/runtime.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void try_decode(const uint8_t *buf, size_t size)
{
    tern_exe x;
    tern_error err;
    if (tern_exe_decode(buf, size, &x, &err) != TERN_OK)
        return;
    uint8_t *re = NULL, *re2 = NULL;
    size_t n = 0, n2 = 0;
    if (tern_exe_encode(&x, &re, &n, &err) != TERN_OK)
        abort(); /* what the decoder accepts, the encoder must write */
    tern_exe y;
    if (tern_exe_decode(re, n, &y, &err) != TERN_OK || tern_exe_encode(&y, &re2, &n2, &err) != TERN_OK || n != n2 ||
        memcmp(re, re2, n) != 0)
        abort();
    tern_exe_free(&y);
    free(re);
    free(re2);
    tern_exe_free(&x);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    try_decode(data, size);
    if (size >= 16) {
        uint8_t *copy = malloc(size);
        if (!copy)
            return 0;
        memcpy(copy, data, size);
        uint32_t crc = tern_crc32(copy + 16, size - 16);
        for (int k = 0; k < 4; k++)
            copy[12 + k] = (uint8_t)(crc >> (8 * k));
        try_decode(copy, size);
        free(copy);
    }
    return 0;
}
