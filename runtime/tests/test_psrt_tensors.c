/*
 * test_psrt_tensors.c: psrt's tensor lists encoded, decoded and written
 * through the bundle library, bit exact.
 */
#include "harness/tests/fl_test.h"
#include "runtime/ckpt/state.h"
#include "runtime/tests/test_psrt_fixture.h"

#include <errno.h>

FL_TEST(psrt_tensors, encode_decode_and_bundle_roundtrip_bit_exact)
{
    struct psrt_tl l = {0};
    float w[6] = {1, 2, 3, 4, 5, 6};
    int64_t gs = 42, d2[2] = {2, 3}, d1[1] = {3};
    uint64_t keys[3] = {9, UINT64_MAX, 1};
    psrt_tl_add(&l, "global_step", CKPT_DT_INT64, 0, NULL, &gs, 8);
    psrt_tl_add(&l, "w", CKPT_DT_FLOAT, 2, d2, w, sizeof w);
    psrt_tl_add(&l, "sp/part_0/keys", CKPT_DT_INT64, 1, d1, keys, sizeof keys);
    struct psrt_buf b = {0};
    psrt_tl_encode(&l, &b);
    struct psrt_tl d;
    FL_REQUIRE_EQ(psrt_tl_decode(&d, &b), 0);
    FL_REQUIRE_EQ(d.n, 3);
    FL_ASSERT_MEMEQ(psrt_tl_find(&d, "w")->data, w, sizeof w);
    /* truncated encodings are rejected */
    for (size_t cut = 0; cut < b.len; cut += 7) {
        struct psrt_buf t = {.p = b.p, .len = cut};
        struct psrt_tl x;
        FL_ASSERT_EQ(psrt_tl_decode(&x, &t), -EBADMSG);
    }
    char prefix[512];
    snprintf(prefix, sizeof prefix, "%s/sub/model.ckpt-1", fl_test_dir());
    struct psrt_err e = {0};
    FL_REQUIRE_MSG(psrt_tl_write_bundle(&l, prefix, CKPT_W_MKDIR_P, CKPT_SYNC, &e) == 0, "%s",
                   e.msg);
    struct psrt_tl r;
    FL_REQUIRE_MSG(psrt_tl_read_bundle(&r, prefix, &e) == 0, "%s", e.msg);
    FL_ASSERT_EQ(r.n, 3);
    for (int i = 0; i < l.n; i++) {
        const struct psrt_tensor *t = psrt_tl_find(&r, l.t[i].name);
        FL_REQUIRE(t != NULL);
        FL_ASSERT_EQ(t->len, l.t[i].len);
        FL_ASSERT_MEMEQ(t->data, l.t[i].data, t->len);
    }
    psrt_tl_free(&r);
    /* a missing directory with a non-recursive writer: TensorFlow's message */
    snprintf(prefix, sizeof prefix, "%s/nope/x_temp_0123/part-00000-of-00001", fl_test_dir());
    FL_ASSERT_EQ(psrt_tl_write_bundle(&l, prefix, 0, 0, &e), -ENOENT);
    FL_ASSERT_CONTAINS(e.msg, "NotFoundError: ");
    FL_ASSERT_CONTAINS(e.msg, "part-00000-of-00001.data-00000-of-00001; No such file or directory");
    psrt_buf_free(&b);
    l.owns = false;
    psrt_tl_free(&l);
    d.owns = false;
    psrt_tl_free(&d);
}

/* A tensor's shape times its dtype's size must be its byte count without
 * overflowing: 2^62 floats (or 2^31 x 2^31 doubles) came to 2^64 bytes,
 * which wrapped to 0, and decoding took them for an empty tensor's 0 bytes,
 * a shape no bytes back (a peer's reply decoded by the chief, or a Load
 * decoded by a ps). */
FL_TEST(psrt_tensors, decode_refuses_a_shape_that_overflows_to_its_length)
{
    static const struct {
        int dtype, rank;
        int64_t dims[2];
    } bad[] = {
        {CKPT_DT_FLOAT, 1, {1ll << 62, 0}},
        {CKPT_DT_DOUBLE, 2, {1ll << 31, 1ll << 31}},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct psrt_tl l = {0};
        FL_REQUIRE(psrt_tl_add(&l, "huge", bad[i].dtype, bad[i].rank, bad[i].dims, NULL, 0));
        struct psrt_buf b = {0};
        psrt_tl_encode(&l, &b);
        struct psrt_tl d;
        int r = psrt_tl_decode(&d, &b);
        FL_ASSERT_MSG(r == -EBADMSG, "case %zu: decoded (%d)", i, r);
        if (r == 0)
            psrt_tl_free(&d);
        psrt_buf_free(&b);
        psrt_tl_free(&l);
    }
}
