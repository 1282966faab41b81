/*
 * crc.h: crc32c (Castagnoli) as TensorFlow and LevelDB use it, on ISA-L's
 * hardware crc32_iscsi.  Values are the standard crc32c:
 * ckpt_crc32c("123456789", 9) == 0xE3069283.  Extending is associative with
 * concatenation: ckpt_crc32c_extend(ckpt_crc32c(a), b) == ckpt_crc32c(a || b).
 * Stored crcs are "masked" (rotated and offset) so that a crc of data that
 * embeds crcs is not degenerate: ((crc >> 15) | (crc << 17)) + 0xa282ead8.
 */
#ifndef CKPT_CRC_H
#define CKPT_CRC_H

#include <stddef.h>
#include <stdint.h>

/* crc32c of data[0..n). */
uint32_t ckpt_crc32c(const void *data, size_t n);
/* crc32c of (whatever gave crc) followed by data[0..n); crc 0 = empty input. */
uint32_t ckpt_crc32c_extend(uint32_t crc, const void *data, size_t n);

/* crc32c of a || b from crc32c(a), crc32c(b) and b's length. */
uint32_t ckpt_crc32c_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b);

#define CKPT_CRC_MASK_DELTA 0xa282ead8u

static inline uint32_t ckpt_crc_mask(uint32_t crc)
{
    return ((crc >> 15) | (crc << 17)) + CKPT_CRC_MASK_DELTA;
}

static inline uint32_t ckpt_crc_unmask(uint32_t masked)
{
    uint32_t rot = masked - CKPT_CRC_MASK_DELTA;
    return (rot >> 17) | (rot << 15);
}

#endif
