/*
 * test_ckpt_proto.c: the BundleHeaderProto / BundleEntryProto wire codec:
 * bytes as TensorFlow writes them, round trips of every field, protobuf
 * decoding rules (unknown fields skipped, packed repeated ints), and
 * rejection of truncated or mistyped input.
 */
#include <errno.h>

#include "harness/tests/fl_test.h"
#include "runtime/ckpt/internal.h"

FL_TEST(ckpt_proto, proto_header_encodes_like_tensorflow)
{
    struct ckpt_buf b = {0};
    struct ckpt_header h = {.num_shards = 1, .producer = 1};
    ckpt_pb_encode_header(&b, &h);
    static const unsigned char want[] = {0x08, 0x01, 0x1a, 0x02, 0x08, 0x01};
    FL_REQUIRE_EQ(b.len, sizeof want);
    FL_ASSERT_MEMEQ(b.p, want, sizeof want);
    ckpt_buf_free(&b);
}

FL_TEST(ckpt_proto, proto_entry_encodes_like_tensorflow)
{
    /* entry "b" of half_plus_three: float scalar at offset 4, size 4 */
    struct ckpt_buf b = {0};
    struct ckpt_entry e = {
        .dtype = CKPT_DT_FLOAT, .rank = 0, .offset = 4, .size = 4, .crc32c = 0xc382d6efu};
    ckpt_pb_encode_entry(&b, &e);
    static const unsigned char want[] = {0x08, 0x01, 0x12, 0x00, 0x20, 0x04, 0x28,
                                         0x04, 0x35, 0xef, 0xd6, 0x82, 0xc3};
    FL_REQUIRE_EQ(b.len, sizeof want);
    FL_ASSERT_MEMEQ(b.p, want, sizeof want);
    ckpt_buf_free(&b);
}

FL_TEST(ckpt_proto, proto_entry_roundtrips_every_field)
{
    struct ckpt_buf b = {0};
    struct ckpt_arena a = {0};
    int64_t dims[3] = {0, 300, 1LL << 40};
    struct ckpt_extent x[3] = {{0, -1}, {5, 0}, {7, 1LL << 33}};
    struct ckpt_slice sl[2] = {{3, x}, {0, NULL}};
    struct ckpt_entry e = {.dtype = CKPT_DT_INT64,
                           .rank = 3,
                           .dims = dims,
                           .shard_id = 12345,
                           .offset = 1LL << 45,
                           .size = 99,
                           .crc32c = 0xdeadbeefu,
                           .nslices = 2,
                           .slices = sl};
    ckpt_pb_encode_entry(&b, &e);
    FL_REQUIRE(!b.oom);
    struct ckpt_entry d;
    char why[256];
    FL_REQUIRE_EQ(ckpt_pb_decode_entry(b.p, b.len, &a, &d, why, sizeof why), 0);
    FL_ASSERT_EQ(d.dtype, CKPT_DT_INT64);
    FL_REQUIRE_EQ(d.rank, 3);
    for (int i = 0; i < 3; i++)
        FL_ASSERT_EQ(d.dims[i], dims[i]);
    FL_ASSERT_EQ(d.shard_id, 12345);
    FL_ASSERT_EQ(d.offset, 1LL << 45);
    FL_ASSERT_EQ(d.size, 99);
    FL_ASSERT_EQ(d.crc32c, 0xdeadbeefu);
    FL_REQUIRE_EQ(d.nslices, 2);
    FL_REQUIRE_EQ(d.slices[0].nextents, 3);
    for (int i = 0; i < 3; i++) {
        FL_ASSERT_EQ(d.slices[0].extents[i].start, x[i].start);
        FL_ASSERT_EQ(d.slices[0].extents[i].length, x[i].length);
    }
    FL_ASSERT_EQ(d.slices[1].nextents, 0);
    ckpt_buf_free(&b);
    ckpt_arena_free(&a);
}

FL_TEST(ckpt_proto, proto_header_roundtrips_bad_consumers)
{
    struct ckpt_buf b = {0};
    struct ckpt_arena a = {0};
    int32_t bad[3] = {2, -1, 70000};
    struct ckpt_header h = {.num_shards = 7,
                            .endianness = 1,
                            .producer = 3,
                            .min_consumer = 2,
                            .nbad_consumers = 3,
                            .bad_consumers = bad};
    ckpt_pb_encode_header(&b, &h);
    struct ckpt_header d;
    char why[256];
    FL_REQUIRE_EQ(ckpt_pb_decode_header(b.p, b.len, &a, &d, why, sizeof why), 0);
    FL_ASSERT_EQ(d.num_shards, 7);
    FL_ASSERT_EQ(d.endianness, 1);
    FL_ASSERT_EQ(d.producer, 3);
    FL_ASSERT_EQ(d.min_consumer, 2);
    FL_REQUIRE_EQ(d.nbad_consumers, 3);
    for (int i = 0; i < 3; i++)
        FL_ASSERT_EQ(d.bad_consumers[i], bad[i]);
    /* unpacked repeated ints decode the same */
    static const unsigned char unpacked[] = {0x1a, 0x04, 0x18, 0x02, 0x18, 0x05};
    FL_REQUIRE_EQ(ckpt_pb_decode_header(unpacked, sizeof unpacked, &a, &d, why, sizeof why), 0);
    FL_REQUIRE_EQ(d.nbad_consumers, 2);
    FL_ASSERT_EQ(d.bad_consumers[1], 5);
    ckpt_buf_free(&b);
    ckpt_arena_free(&a);
}

FL_TEST(ckpt_proto, proto_decode_skips_unknown_fields)
{
    struct ckpt_arena a = {0};
    /* dtype 1, unknown field 15 varint, unknown 16 len-delimited, unknown fixed64, size 4 */
    static const unsigned char in[] = {0x08, 0x01, 0x78, 0x05, 0x82, 0x01, 0x02,
                                       0xaa, 0xbb, 0x89, 0x01, 1,    2,    3,
                                       4,    5,    6,    7,    8,    0x28, 0x04};
    struct ckpt_entry d;
    char why[256];
    FL_REQUIRE_EQ(ckpt_pb_decode_entry(in, sizeof in, &a, &d, why, sizeof why), 0);
    FL_ASSERT_EQ(d.dtype, 1);
    FL_ASSERT_EQ(d.size, 4);
    ckpt_arena_free(&a);
}

FL_TEST(ckpt_proto, proto_decode_rejects_truncated_and_mistyped)
{
    struct ckpt_arena a = {0};
    struct ckpt_entry d;
    char why[256];
    static const unsigned char trunc_varint[] = {0x08, 0x81};
    static const unsigned char trunc_len[] = {0x12, 0x05, 0x12, 0x00};
    static const unsigned char wrong_type[] = {0x0a, 0x00}; /* dtype as bytes */
    static const unsigned char group[] = {0x0b};            /* start group */
    static const unsigned char field0[] = {0x00, 0x01};
    static const unsigned char trunc_crc[] = {0x35, 0x01, 0x02};
    static const unsigned char overlong[] = {0x20, 0xff, 0xff, 0xff, 0xff, 0xff,
                                             0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
    const struct {
        const unsigned char *p;
        size_t n;
        const char *want;
    } cases[] = {
        {trunc_varint, sizeof trunc_varint, "truncated"},
        {trunc_len, sizeof trunc_len, "runs past the end"},
        {wrong_type, sizeof wrong_type, "wire type"},
        {group, sizeof group, "wire type"},
        {field0, sizeof field0, "field number"},
        {trunc_crc, sizeof trunc_crc, "fixed32"},
        {overlong, sizeof overlong, "varint"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        why[0] = 0;
        FL_ASSERT_EQ(ckpt_pb_decode_entry(cases[i].p, cases[i].n, &a, &d, why, sizeof why),
                     -EBADMSG);
        FL_ASSERT_CONTAINS(why, cases[i].want);
        FL_ASSERT_CONTAINS(why, "Proto");
    }
    ckpt_arena_free(&a);
}
