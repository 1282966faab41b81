/*
 * crc.c: crc32c for the checkpoint library on ISA-L's crc32_iscsi (SSE4.2 /
 * PCLMUL where the CPU has them).  crc32_iscsi takes and returns the raw
 * register (no pre/post inversion), so the standard value is
 * ~crc32_iscsi(data, n, ~crc).  Its length is an int: larger inputs are fed
 * in 1 GiB pieces.
 *
 * ckpt_crc32c_combine is zlib's crc32_combine (multiplication modulo the
 * polynomial by x^(8 len)) for the Castagnoli polynomial: it lets a reader
 * checksum each received span once and fold it into two running crcs.
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

#define POLY 0x82f63b78u /* Castagnoli, reflected */

/* a(x) * b(x) modulo p(x), reflected bit order. */
static uint32_t multmodp(uint32_t a, uint32_t b)
{
    uint32_t m = 1u << 31, p = 0;
    for (;;) {
        if (a & m) {
            p ^= b;
            if ((a & (m - 1)) == 0)
                break;
        }
        m >>= 1;
        b = b & 1 ? (b >> 1) ^ POLY : b >> 1;
    }
    return p;
}

/* x^(n * 2^k) modulo p(x). */
static uint32_t x2nmodp(uint64_t n, unsigned k)
{
    static uint32_t table[32];
    static int ready;
    if (!__atomic_load_n(&ready, __ATOMIC_ACQUIRE)) {
        uint32_t t[32], q = 1u << 30; /* x^1 */
        t[0] = q;
        for (int i = 1; i < 32; i++)
            t[i] = q = multmodp(q, q);
        for (int i = 0; i < 32; i++)
            __atomic_store_n(&table[i], t[i], __ATOMIC_RELAXED);
        __atomic_store_n(&ready, 1, __ATOMIC_RELEASE);
    }
    uint32_t p = 1u << 31; /* x^0 */
    while (n) {
        if (n & 1)
            p = multmodp(__atomic_load_n(&table[k & 31], __ATOMIC_RELAXED), p);
        n >>= 1;
        k++;
    }
    return p;
}

uint32_t ckpt_crc32c_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b)
{
    return multmodp(x2nmodp(len_b, 3), crc_a) ^ crc_b;
}
