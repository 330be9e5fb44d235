/* CRC-32 (IEEE 802.3, reflected) of tern's binary files, computed by zlib's crc32() (Debian zlib1g-dev): the
 * same value, at memory speed, which matters for executables holding hundreds of megabytes of weights. */
#include <zlib.h>

#include "tern/base.h"

uint32_t tern_crc32(const void *data, size_t n)
{
    uLong c = crc32(0L, Z_NULL, 0);
    const Bytef *p = data;
    while (n > 0) { /* zlib takes uInt lengths */
        uInt chunk = n > (1u << 30) ? (1u << 30) : (uInt)n;
        c = crc32(c, p, chunk);
        p += chunk;
        n -= chunk;
    }
    return (uint32_t)c;
}
