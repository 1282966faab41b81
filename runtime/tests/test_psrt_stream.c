/*
 * test_psrt_stream.c: streamed requests (stream.c) and the streamed sparse
 * push built on them (push.c), against ps tasks served in this process:
 * segment headers and their corruption, a streamed request arriving as
 * one payload, a bad segment dropping only its connection, blocked pushes
 * applied exactly as the same pairs in one batch (bucketed and not), and
 * malformed blocks refused with the ps still serving.
 */
#include "harness/tests/fl_test.h"
#include "runtime/psrt/worker.h"
#include "runtime/tests/test_psrt_fixture.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

FL_TEST(psrt_stream, segment_header_roundtrip_and_every_corruption_is_caught)
{
    uint8_t h[PSRT_SEG_HDR];
    psrt_seg_encode(h, 123456, 0xfeedf00d, 7);
    uint32_t len = 0, crc = 0;
    FL_REQUIRE_EQ(psrt_seg_decode(h, &len, &crc, 7), 0);
    FL_ASSERT_EQ(len, 123456);
    FL_ASSERT_EQ(crc, 0xfeedf00d);
    /* lost, repeated or reordered: the sequence number says so */
    FL_ASSERT_EQ(psrt_seg_decode(h, &len, &crc, 6), -EPROTO);
    FL_ASSERT_EQ(psrt_seg_decode(h, &len, &crc, 8), -EPROTO);
    for (int bit = 0; bit < PSRT_SEG_HDR * 8; bit++) {
        uint8_t c[PSRT_SEG_HDR];
        memcpy(c, h, sizeof c);
        c[bit / 8] ^= (uint8_t)(1 << (bit % 8));
        FL_ASSERT_MSG(psrt_seg_decode(c, &len, &crc, 7) == -EBADMSG, "bit %d not caught", bit);
    }
}

/* Two connections, one request each, streamed in segments of many sizes
 * (some far larger than a socket buffer): each ps echoes exactly the
 * concatenation of its segments. */
FL_TEST(psrt_stream, streamed_request_arrives_as_one_payload)
{
    struct ps_fixture x, y;
    fixture(&x, "linear", PSRT_POOL, 10);
    fixture(&y, "linear", PSRT_PER_REQUEST, 10);
    struct psrt_conn *c[2] = {x.c, y.c};
    struct psrt_err err[2] = {{0}};
    size_t total = 24u << 20;
    uint8_t *src = malloc(total);
    for (size_t i = 0; i < total; i++)
        src[i] = (uint8_t)(i * 2654435761u >> 13);
    struct psrt_stream *s;
    uint64_t hint[2] = {1000, total}; /* a low estimate only costs a realloc */
    FL_REQUIRE_EQ(psrt_stream_begin(&s, c, 2, PSRT_OP_ECHO, 0, hint, 64, 10, err), 0);
    size_t off[2] = {0, 0}, sizes[] = {1, 7, 4096, 65536, 3 << 20, 9 << 20, 13};
    for (int r = 0; r < 2; r++)
        for (size_t j = 0; j < sizeof sizes / sizeof sizes[0]; j++) {
            struct iovec v[2] = {{src + off[r], sizes[j] / 2},
                                 {src + off[r] + sizes[j] / 2, sizes[j] - sizes[j] / 2}};
            FL_REQUIRE_EQ(psrt_stream_put(s, r, v, 2), 0);
            off[r] += sizes[j];
        }
    struct psrt_buf rb[2] = {{0}}, *resp[2] = {&rb[0], &rb[1]};
    int32_t st[2] = {-1, -1};
    FL_REQUIRE_EQ(psrt_stream_end(s, resp, st), 0);
    psrt_stream_free(s);
    for (int r = 0; r < 2; r++) {
        FL_ASSERT_EQ(st[r], 0);
        FL_ASSERT_EQ(rb[r].len, off[r]);
        if (rb[r].len == off[r])
            FL_ASSERT_MEMEQ(rb[r].p, src, off[r]);
        psrt_buf_free(&rb[r]);
    }
    /* the connections carry ordinary calls afterwards */
    FL_ASSERT_EQ(call(&x, PSRT_OP_ECHO, 0, "abc", 3), 0);
    FL_ASSERT_EQ(x.resp.len, 3);
    free(src);
}

static int raw_connect(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(0x7f000001);
    FL_REQUIRE_EQ(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    return fd;
}

/* Writes a stream header and segment `seq` holding data (with crc `crc`);
 * true when the server then closed the connection without a reply.
 *
 * The server may drop the connection as soon as it has read a bad segment
 * header, before the data and the end are written: those writes then fail
 * (EPIPE, ECONNRESET once the server's reset is back), which is an answer,
 * not a reason to die of SIGPIPE (the test process keeps its default
 * action), so they go with MSG_NOSIGNAL and may fail. */
static bool dropped_after(int port, uint32_t seq, uint32_t crc, const char *data)
{
    int fd = raw_connect(port);
    struct psrt_frame_hdr h = {.kind = PSRT_KIND_STREAM, .op = PSRT_OP_ECHO, .len = 64};
    uint8_t fh[PSRT_FRAME_HDR], sh[PSRT_SEG_HDR];
    psrt_frame_encode(fh, &h);
    size_t n = strlen(data);
    psrt_seg_encode(sh, (uint32_t)n, crc, seq);
    /* nothing is wrong before the segment header is read: these go through */
    FL_REQUIRE_EQ(send(fd, fh, sizeof fh, MSG_NOSIGNAL), (ssize_t)sizeof fh);
    FL_REQUIRE_EQ(send(fd, sh, sizeof sh, MSG_NOSIGNAL), (ssize_t)sizeof sh);
    ssize_t w = send(fd, data, n, MSG_NOSIGNAL);
    FL_REQUIRE_MSG(w == (ssize_t)n || (w < 0 && (errno == EPIPE || errno == ECONNRESET)),
                   "writing the segment's data: %zd (%s)", w, w < 0 ? strerror(errno) : "short");
    psrt_seg_encode(sh, 0, 0, seq + 1);
    w = send(fd, sh, sizeof sh, MSG_NOSIGNAL); /* the end, if it is still read */
    (void)w;
    char c;
    bool closed = read(fd, &c, 1) <= 0; /* EOF, or a reset: the end hit a closed socket */
    close(fd);
    return closed;
}

FL_TEST(psrt_stream, bad_segment_drops_its_connection_and_server_survives)
{
    struct ps_fixture x;
    fixture(&x, "linear", PSRT_POOL, 10);
    int port = psrt_ps_port(x.ps);
    uint32_t good = psrt_crc32c(0, "abcd", 4);
    FL_ASSERT(dropped_after(port, 0, good ^ 1, "abcd")); /* data crc */
    FL_ASSERT(dropped_after(port, 1, good, "abcd"));     /* out of sequence */
    /* a well-formed one is answered (the raw client reads a reply) */
    FL_ASSERT(!dropped_after(port, 0, good, "abcd"));
    FL_ASSERT_EQ(call(&x, PSRT_OP_ECHO, 0, "z", 1), 0);
}

/* ---- the streamed push ------------------------------------------------------ */

struct two_ps {
    struct ps_fixture ps[2];
    struct psrt_flags wf;
    struct psrt_worker w;
};

static void two_ps_up(struct two_ps *t)
{
    for (int p = 0; p < 2; p++)
        fixture_task(&t->ps[p], "sparse_lr", PSRT_POOL, 100, p, 2,
                     "--optimizer=sgd --learning_rate=0.5");
    char line[512], err[256];
    snprintf(line, sizeof line,
             "--job_name=worker --ps_hosts=127.0.0.1:%d,127.0.0.1:%d "
             "--worker_hosts=127.0.0.1:2 --model=sparse_lr --optimizer=sgd "
             "--learning_rate=0.5 --train_dir=%s/w",
             psrt_ps_port(t->ps[0].ps), psrt_ps_port(t->ps[1].ps), fl_test_dir());
    FL_REQUIRE_EQ(parse(line, &t->wf, err), 0);
    struct psrt_err e = {0};
    FL_REQUIRE_MSG(psrt_worker_setup(&t->w, &t->wf, &e) == 0, "%s", e.msg);
    FL_REQUIRE_MSG(psrt_worker_connect(&t->w, &e) == 0, "%s", e.msg);
    FL_REQUIRE_MSG(psrt_worker_init_all(&t->w, &e) == 0, "%s", e.msg);
    FL_REQUIRE_MSG(psrt_worker_open_all(&t->w, &e) == 0, "%s", e.msg);
}

/* Pulls keys[0..n) (each from its ps) into out. */
static void pull_all(struct two_ps *t, const uint64_t *keys, size_t n, float *out)
{
    for (size_t i = 0; i < n; i++) {
        int p = psrt_row_ps(keys[i], 2);
        uint64_t req[2] = {1, keys[i]};
        FL_REQUIRE_EQ(call(&t->ps[p], PSRT_OP_PULL, 0, req, sizeof req), 0);
        struct psrt_buf *b = &t->ps[p].resp;
        b->off = 0;
        psrt_buf_get_u64(b);
        uint32_t nd = psrt_buf_get_u32(b);
        psrt_buf_skip_align8(b);
        psrt_buf_get(b, nd ? 4 : 0); /* sparse_lr/bias, on one ps */
        const float *v = psrt_buf_get(b, 4);
        FL_REQUIRE(v != NULL);
        out[i] = *v;
    }
}

/* n pairs over few distinct keys (each repeated, so order matters), pushed
 * streamed over two ps: every row ends as SGD applying its gradients in
 * input order gives, bit for bit, and the split handed back is the one
 * psrt_split_keys gives. */
static void streamed_push_matches_in_order_sgd(size_t n, size_t distinct)
{
    struct two_ps t;
    two_ps_up(&t);
    uint64_t *keys = malloc(n * 8), *dk = malloc(distinct * 8);
    float *g = malloc(n * 4), *want = calloc(distinct, 4), *got = malloc(distinct * 4);
    for (size_t i = 0; i < distinct; i++)
        dk[i] = psrt_mix64(i + 99);
    for (size_t i = 0; i < n; i++) {
        size_t d = psrt_mix64(i * 3 + 1) % distinct;
        keys[i] = dk[d];
        g[i] = (float)((int)(i % 13) - 6) * 0.125f + 0.001f * (float)(i % 7);
        want[d] -= 0.5f * g[i];
    }
    uint64_t *pk[2], *rk[2];
    float *pg[2], *rg[2];
    uint32_t *pi[2], *ri[2];
    size_t pn[2], rn[2];
    for (int p = 0; p < 2; p++) {
        pk[p] = malloc(n * 8), pg[p] = malloc(n * 4), pi[p] = malloc(n * 4);
        rk[p] = malloc(n * 8), rg[p] = malloc(n * 4), ri[p] = malloc(n * 4);
    }
    float bias_g = 0;
    int bias_ps = -1;
    for (int v = 0; v < t.w.m.nvars; v++)
        if (t.w.m.vars[v].kind == PSRT_VAR_DENSE)
            bias_ps = t.w.m.vars[v].ps;
    FL_REQUIRE(bias_ps >= 0);
    struct iovec dense[2] = {{0}};
    uint32_t nd[2] = {0, 0};
    dense[bias_ps] = (struct iovec){&bias_g, 4};
    nd[bias_ps] = 1;
    struct psrt_call calls[2];
    int bad = psrt_worker_push_stream(&t.w, keys, g, n, dense, nd, pk, pg, pi, pn, calls);
    FL_REQUIRE_MSG(bad < 0, "push: %s", bad >= 0 ? calls[bad].err.msg : "");
    psrt_split_keys(keys, g, n, 2, rk, rg, ri, rn);
    for (int p = 0; p < 2; p++) {
        FL_ASSERT_EQ(pn[p], rn[p]);
        FL_ASSERT_MEMEQ(pk[p], rk[p], rn[p] * 8);
        FL_ASSERT_MEMEQ(pg[p], rg[p], rn[p] * 4);
        FL_ASSERT_MEMEQ(pi[p], ri[p], rn[p] * 4);
    }
    pull_all(&t, dk, distinct, got);
    size_t wrong = 0;
    for (size_t i = 0; i < distinct; i++)
        wrong += memcmp(&got[i], &want[i], 4) != 0;
    FL_ASSERT_EQ(wrong, 0);
    for (int p = 0; p < 2; p++) {
        free(pk[p]), free(pg[p]), free(pi[p]), free(rk[p]), free(rg[p]), free(ri[p]);
    }
    free(keys), free(dk), free(g), free(want), free(got);
}

FL_TEST(psrt_stream, streamed_small_push_applies_in_order)
{
    streamed_push_matches_in_order_sgd(5000, 700);
}

/* 600,000 pairs: about 300,000 per ps, past the bucketed path's threshold,
 * in 10 pieces of blocks */
FL_TEST(psrt_stream, streamed_big_push_applies_in_order_bucketed)
{
    streamed_push_matches_in_order_sgd(600000, 40000);
}

FL_TEST(psrt_stream, malformed_blocks_are_refused_and_ps_keeps_serving)
{
    struct ps_fixture x;
    fixture_task(&x, "sparse_lr", PSRT_POOL, 100, 0, 1, "--optimizer=sgd --learning_rate=0.5");
    uint64_t seed = 1;
    FL_REQUIRE_EQ(call(&x, PSRT_OP_INIT, 0, &seed, 8), 0);
    FL_REQUIRE_EQ(call(&x, PSRT_OP_OPEN, 0, NULL, 0), 0);
    struct {
        uint64_t nkeys;
        uint32_t nd, pad;
        uint64_t count, k[2];
        float g[2];
    } push = {0, 0, 0, 2, {11, 12}, {1, -1}};
    static const uint64_t counts[] = {3, 1ull << 61, UINT64_MAX, UINT64_MAX / 12 + 1};
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
        push.count = counts[i];
        FL_ASSERT_MSG(call(&x, PSRT_OP_PUSH, PSRT_PUSH_BLOCKS, &push, sizeof push) == -EBADMSG,
                      "block count %llu accepted", (unsigned long long)counts[i]);
    }
    push.count = 2;
    push.nkeys = 2; /* blocks, and a count in the header too */
    FL_ASSERT_EQ(call(&x, PSRT_OP_PUSH, PSRT_PUSH_BLOCKS, &push, sizeof push), -EBADMSG);
    push.nkeys = 0;
    /* a block cut short */
    FL_ASSERT_EQ(call(&x, PSRT_OP_PUSH, PSRT_PUSH_BLOCKS, &push, sizeof push - 4), -EBADMSG);
    /* nothing of those was applied; a good one is */
    FL_ASSERT_EQ(call(&x, PSRT_OP_PUSH, PSRT_PUSH_BLOCKS, &push, sizeof push), 0);
    uint64_t pull[3] = {2, 11, 12};
    FL_REQUIRE_EQ(call(&x, PSRT_OP_PULL, 0, pull, sizeof pull), 0);
    x.resp.off = 0;
    psrt_buf_get_u64(&x.resp);
    uint32_t nd = psrt_buf_get_u32(&x.resp);
    psrt_buf_skip_align8(&x.resp);
    psrt_buf_get(&x.resp, nd * 4u); /* sparse_lr/bias */
    const float *v = psrt_buf_get(&x.resp, 8);
    FL_REQUIRE(v != NULL);
    FL_ASSERT_EQ(v[0], -0.5f);
    FL_ASSERT_EQ(v[1], 0.5f);
}
