/*
 * test_ckpt_crc.c: crc32c on ISA-L against the standard check value, the
 * extend/concatenation law, and TensorFlow's mask.
 */
#include <stdlib.h>

#include "harness/tests/fl_test.h"
#include "runtime/ckpt/crc.h"

FL_TEST(ckpt_crc, crc32c_matches_standard_vector)
{
    FL_ASSERT_EQ(ckpt_crc32c("123456789", 9), 0xE3069283u);
    FL_ASSERT_EQ(ckpt_crc32c("", 0), 0u);
    /* RFC 3720 B.4: 32 bytes of zeros -> 0x8a9136aa, of 0xff -> 0x62a8ab43 */
    unsigned char z[32] = {0}, f[32];
    memset(f, 0xff, sizeof f);
    FL_ASSERT_EQ(ckpt_crc32c(z, 32), 0x8a9136aau);
    FL_ASSERT_EQ(ckpt_crc32c(f, 32), 0x62a8ab43u);
}

FL_TEST(ckpt_crc, crc32c_extend_equals_whole)
{
    size_t n = 100000;
    unsigned char *p = malloc(n);
    FL_REQUIRE(p != NULL);
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)(i * 2654435761u >> 13);
    uint32_t whole = ckpt_crc32c(p, n);
    for (size_t cut = 0; cut <= n; cut += 9973)
        FL_ASSERT_EQ(ckpt_crc32c_extend(ckpt_crc32c(p, cut), p + cut, n - cut), whole);
    FL_ASSERT_EQ(ckpt_crc32c_extend(whole, p, 0), whole);
    free(p);
}

FL_TEST(ckpt_crc, crc32c_combine_equals_whole)
{
    size_t n = 3 * 65536 + 12345;
    unsigned char *p = malloc(n);
    FL_REQUIRE(p != NULL);
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)(i * 2654435761u >> 11);
    uint32_t whole = ckpt_crc32c(p, n);
    size_t cuts[] = {0, 1, 7, 4096, 65536, 65537, n - 1, n};
    for (size_t c = 0; c < sizeof cuts / sizeof *cuts; c++) {
        size_t cut = cuts[c];
        FL_ASSERT_EQ(
            ckpt_crc32c_combine(ckpt_crc32c(p, cut), ckpt_crc32c(p + cut, n - cut), n - cut),
            whole);
    }
    /* three spans fold left to right */
    uint32_t a = ckpt_crc32c(p, 1000), b = ckpt_crc32c(p + 1000, 5000),
             d = ckpt_crc32c(p + 6000, n - 6000);
    FL_ASSERT_EQ(ckpt_crc32c_combine(ckpt_crc32c_combine(a, b, 5000), d, n - 6000), whole);
    free(p);
}

FL_TEST(ckpt_crc, crc_mask_roundtrips_and_matches_tensorflow)
{
    /* TensorFlow: Mask(crc) = ((crc >> 15) | (crc << 17)) + 0xa282ead8 */
    uint32_t vals[] = {0, 1, 0xE3069283u, 0xffffffffu, 0x80000000u};
    for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
        uint32_t c = vals[i];
        FL_ASSERT_EQ(ckpt_crc_mask(c), (uint32_t)(((c >> 15) | (c << 17)) + 0xa282ead8u));
        FL_ASSERT_EQ(ckpt_crc_unmask(ckpt_crc_mask(c)), c);
    }
    /* half_plus_three stores masked crc 0x1f273806 for the float 0.5 */
    float half = 0.5f;
    FL_ASSERT_EQ(ckpt_crc_mask(ckpt_crc32c(&half, 4)), 0x1f273806u);
}
