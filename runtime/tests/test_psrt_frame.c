/*
 * test_psrt_frame.c: psrt's RPC frames and buffers: round trips, every
 * corruption caught, getters never reading past the end, any status a peer
 * sends given an error class.
 */
#include "harness/tests/fl_test.h"
#include "runtime/psrt/calls.h"
#include "runtime/tests/test_psrt_fixture.h"

#include <errno.h>
#include <limits.h>

FL_TEST(psrt_frame, roundtrip_and_every_corruption_is_caught)
{
    struct psrt_frame_hdr h = {.kind = PSRT_KIND_REQ,
                               .op = PSRT_OP_PULL,
                               .status = -5,
                               .flags = 3,
                               .id = 77,
                               .len = 1234,
                               .pcrc = 0xdeadbeef};
    uint8_t buf[PSRT_FRAME_HDR];
    psrt_frame_encode(buf, &h);
    struct psrt_frame_hdr d;
    FL_REQUIRE_EQ(psrt_frame_decode(buf, &d, 1 << 20), 0);
    FL_ASSERT_EQ(d.op, PSRT_OP_PULL);
    FL_ASSERT_EQ(d.status, -5);
    FL_ASSERT_EQ(d.id, 77);
    FL_ASSERT_EQ(d.len, 1234);
    FL_ASSERT_EQ(d.pcrc, 0xdeadbeef);
    FL_ASSERT_EQ(psrt_frame_decode(buf, &d, 1000), -EMSGSIZE);
    /* every single bit flip is detected */
    for (int bit = 0; bit < PSRT_FRAME_HDR * 8; bit++) {
        uint8_t c[PSRT_FRAME_HDR];
        memcpy(c, buf, sizeof c);
        c[bit / 8] ^= (uint8_t)(1 << (bit % 8));
        int r = psrt_frame_decode(c, &d, 1 << 20);
        FL_ASSERT_MSG(r == -EBADMSG || r == -EPROTO, "bit %d: decode gave %d", bit, r);
    }
    /* a wrong version with a valid crc is a protocol error */
    h.version = 9;
    psrt_frame_encode(buf, &h);
    FL_ASSERT_EQ(psrt_frame_decode(buf, &d, 1 << 20), -EPROTO);
}

FL_TEST(psrt_frame, buffer_getters_never_read_past_the_end)
{
    struct psrt_buf b = {0};
    psrt_buf_u32(&b, 7);
    psrt_buf_str(&b, "hello");
    psrt_buf_align8(&b);
    FL_ASSERT_EQ(b.len % 8, 0);
    FL_ASSERT_EQ(psrt_buf_get_u32(&b), 7);
    char s[16];
    FL_ASSERT_EQ(psrt_buf_get_str(&b, s, sizeof s), 0);
    FL_ASSERT_STREQ(s, "hello");
    psrt_buf_skip_align8(&b);
    FL_ASSERT(!b.bad);
    FL_ASSERT_EQ(psrt_buf_get_u64(&b), 0);
    FL_ASSERT(b.bad);
    /* a string whose length lies */
    struct psrt_buf c = {0};
    psrt_buf_u32(&c, 1000);
    psrt_buf_put(&c, "abc", 3);
    FL_ASSERT_EQ(psrt_buf_get_str(&c, s, sizeof s), -EBADMSG);
    psrt_buf_free(&b);
    psrt_buf_free(&c);
}

/* A reply's status is whatever int32 the peer put in its frame header; its
 * error class (the text of a refused call) is found for every one: INT_MIN,
 * which has no negation, was negated (UBSan; found by
 * runtime/fuzz/fuzz_frame.c).  Without the fix this fails in a build with
 * -fsanitize=undefined -fno-sanitize-recover=undefined. */
FL_TEST(psrt_frame, any_status_a_peer_sends_has_an_error_class)
{
    static const struct {
        int32_t status;
        const char *cls;
    } st[] = {
        {INT32_MIN, "UnknownError"},       {INT32_MIN + 1, "UnknownError"},
        {-EPERM, "PermissionDeniedError"}, {1, "UnknownError"},
        {INT32_MAX, "UnknownError"},
    };
    for (size_t i = 0; i < sizeof st / sizeof st[0]; i++) {
        FL_ASSERT_STREQ(psrt_err_class(st[i].status), st[i].cls);
        struct psrt_call c = {.ps = 1, .op = PSRT_OP_PULL, .status = st[i].status};
        struct psrt_buf empty = {0};
        psrt_call_status_err(&c, &empty);
        FL_ASSERT_EQ(c.err.code, st[i].status);
        FL_ASSERT_MSG(!strncmp(c.err.msg, st[i].cls, strlen(st[i].cls)), "%s", c.err.msg);
    }
}
