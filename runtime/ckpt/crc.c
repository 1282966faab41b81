/*
 * crc.c: crc32c for the checkpoint library on ISA-L's crc32_iscsi (SSE4.2 /
 * PCLMUL where the CPU has them).  crc32_iscsi takes and returns the raw
 * register (no pre/post inversion), so the standard value is
 * ~crc32_iscsi(data, n, ~crc).  Its length is an int: larger inputs are fed
 * in 1 GiB pieces.
 */
#include <isa-l/crc.h>

#include "runtime/ckpt/crc.h"

uint32_t ckpt_crc32c_extend(uint32_t crc, const void *data, size_t n)
{
    const unsigned char *p = data;
    uint32_t reg = ~crc;
    while (n) {
        size_t chunk = n > (1u << 30) ? (1u << 30) : n;
        reg = crc32_iscsi((unsigned char *)p, (int)chunk, reg);
        p += chunk;
        n -= chunk;
    }
    return ~reg;
}

uint32_t ckpt_crc32c(const void *data, size_t n)
{
    return ckpt_crc32c_extend(0, data, n);
}
