/*
 * test_psrt_ps.c: the ps protocol state machine over RPC in one process
 * (not ready -> ready, step reservation up to max_steps, shutdown), with both
 * thread models, and a huge key count refused with the ps still serving.
 */
#include "harness/tests/fl_test.h"
#include "runtime/tests/test_psrt_fixture.h"

#include <errno.h>

static void ps_protocol(int mode)
{
    struct ps_fixture x;
    fixture(&x, "linear", mode, 3);
    uint64_t zero = 0;
    /* UNINITIALIZED: pulls are refused with "not ready" */
    FL_ASSERT_EQ(call(&x, PSRT_OP_PULL, PSRT_PULL_RESERVE, &zero, 8), -EAGAIN);
    FL_ASSERT_EQ(call(&x, PSRT_OP_PING, 0, NULL, 0), 0);
    x.resp.off = 8;
    FL_ASSERT_EQ(psrt_buf_get_u32(&x.resp), 0);
    /* Init -> READY */
    FL_ASSERT_EQ(call(&x, PSRT_OP_OPEN, 0, NULL, 0), -EAGAIN); /* nothing to open yet */
    uint64_t seed = 1;
    FL_ASSERT_EQ(call(&x, PSRT_OP_INIT, 0, &seed, 8), 0);
    /* INITIALIZED: the chief may save, nobody trains until Open */
    FL_ASSERT_EQ(call(&x, PSRT_OP_PULL, PSRT_PULL_RESERVE, &zero, 8), -EAGAIN);
    FL_ASSERT_EQ(call(&x, PSRT_OP_SNAPSHOT, 0, NULL, 0), 0);
    FL_ASSERT_EQ(call(&x, PSRT_OP_OPEN, 0, NULL, 0), 0);
    for (int s = 1; s <= 3; s++) {
        FL_ASSERT_EQ(call(&x, PSRT_OP_PULL, PSRT_PULL_RESERVE, &zero, 8), 0);
        x.resp.off = 0;
        FL_ASSERT_EQ((int64_t)psrt_buf_get_u64(&x.resp), s);
    }
    /* past max_steps: no step is reserved */
    FL_ASSERT_EQ(call(&x, PSRT_OP_PULL, PSRT_PULL_RESERVE, &zero, 8), 0);
    x.resp.off = 0;
    FL_ASSERT_EQ((int64_t)psrt_buf_get_u64(&x.resp), -1);
    /* push applies to the variables this ps owns (biases on ps 0 of 1: both) */
    struct {
        uint64_t nkeys;
        uint32_t nd, pad;
        float g[2];
    } push = {0, 2, 0, {1.0f, 1.0f}};
    FL_ASSERT_EQ(call(&x, PSRT_OP_PUSH, 0, &push, sizeof push), 0);
    /* a malformed push is refused, not applied */
    FL_ASSERT_EQ(call(&x, PSRT_OP_PUSH, 0, &push, 12), -EBADMSG);
    /* Shutdown -> further pulls say "done" */
    FL_ASSERT_EQ(call(&x, PSRT_OP_SHUTDOWN, 0, NULL, 0), 0);
    FL_ASSERT_EQ(call(&x, PSRT_OP_PULL, 0, &zero, 8), -ESHUTDOWN);
    psrt_conn_free(x.c);
}

FL_TEST(psrt_ps, protocol_states_pool)
{
    ps_protocol(PSRT_POOL);
}

FL_TEST(psrt_ps, protocol_states_per_request)
{
    ps_protocol(PSRT_PER_REQUEST);
}

/* nkeys comes off the wire: a count whose byte sizes wrap around (2^61 keys
 * of 8 bytes is 0 bytes mod 2^64) must be refused before anything is sized
 * from it, not turned into a pull or push of billions of rows past the end
 * of the buffers; the ps keeps serving. */
FL_TEST(psrt_ps, huge_nkeys_is_refused_and_ps_keeps_serving)
{
    struct ps_fixture x;
    fixture(&x, "sparse_lr", PSRT_POOL, 100);
    uint64_t seed = 1;
    FL_REQUIRE_EQ(call(&x, PSRT_OP_INIT, 0, &seed, 8), 0);
    FL_REQUIRE_EQ(call(&x, PSRT_OP_OPEN, 0, NULL, 0), 0);
    /* counts that wrap, and one merely larger than the keys sent */
    static const uint64_t huge[] = {1ull << 61, 1ull << 62,         (1ull << 62) + 1,
                                    UINT64_MAX, UINT64_MAX / 8 + 1, 3};
    for (size_t i = 0; i < sizeof huge / sizeof huge[0]; i++) {
        /* Pull: u64 nkeys, then (here) two keys */
        uint64_t pull[3] = {huge[i], 11, 12};
        FL_ASSERT_MSG(call(&x, PSRT_OP_PULL, 0, pull, sizeof pull) == -EBADMSG,
                      "pull with nkeys %llu accepted", (unsigned long long)huge[i]);
        /* Push: u64 nkeys, u32 ndense 0, pad, then two keys and two grads */
        struct {
            uint64_t nkeys;
            uint32_t nd, pad;
            uint64_t k[2];
            float g[2];
        } push = {huge[i], 0, 0, {11, 12}, {1, 1}};
        FL_ASSERT_MSG(call(&x, PSRT_OP_PUSH, 0, &push, sizeof push) == -EBADMSG,
                      "push with nkeys %llu accepted", (unsigned long long)huge[i]);
    }
    /* still serving: a real push and pull of two rows */
    struct {
        uint64_t nkeys;
        uint32_t nd, pad;
        uint64_t k[2];
        float g[2];
    } push = {2, 0, 0, {11, 12}, {1, -1}};
    FL_ASSERT_EQ(call(&x, PSRT_OP_PUSH, 0, &push, sizeof push), 0);
    uint64_t pull[3] = {2, 11, 12};
    FL_ASSERT_EQ(call(&x, PSRT_OP_PULL, 0, pull, sizeof pull), 0);
    /* step, ndense, pad (16), the bias (4), two sparse values (8) */
    FL_REQUIRE_EQ(x.resp.len, 28);
    float v[2];
    memcpy(v, x.resp.p + 20, 8);
    FL_ASSERT_MSG(v[0] < 0 && v[1] > 0, "rows after the push: %g %g", v[0], v[1]);
    FL_ASSERT_EQ(call(&x, PSRT_OP_PING, 0, NULL, 0), 0);
    psrt_conn_free(x.c);
}
