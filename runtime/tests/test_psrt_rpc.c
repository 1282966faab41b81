/*
 * test_psrt_rpc.c: psrt's RPC client and server in one process: a corrupt
 * frame closes only its connection, running out of descriptors refuses
 * without spinning, a reconnect after an unanswered connection backs off, a
 * streamed reply checks its crc at the end, unreachable and unresolvable
 * peers are named, the timeout is idle time not total, and calls pipeline
 * in order on one connection.
 */
#include "harness/tests/fl_test.h"
#include "runtime/tests/test_psrt_fixture.h"

#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <poll.h>
#include <sys/wait.h>

FL_TEST(psrt_rpc, corrupt_frame_closes_connection_and_server_survives)
{
    struct ps_fixture x;
    fixture(&x, "linear", PSRT_POOL, 10);
    /* a raw socket sending a frame with a bad payload crc */
    struct psrt_frame_hdr h = {.kind = PSRT_KIND_REQ, .op = PSRT_OP_ECHO, .len = 4, .pcrc = 1};
    uint8_t hdr[PSRT_FRAME_HDR];
    psrt_frame_encode(hdr, &h);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)psrt_ps_port(x.ps))};
    a.sin_addr.s_addr = htonl(0x7f000001);
    FL_REQUIRE_EQ(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    FL_REQUIRE_EQ(write(fd, hdr, sizeof hdr), (ssize_t)sizeof hdr);
    FL_REQUIRE_EQ(write(fd, "abcd", 4), 4);
    char c;
    FL_ASSERT_EQ(read(fd, &c, 1), 0); /* closed, no reply */
    close(fd);
    /* garbage magic */
    fd = socket(AF_INET, SOCK_STREAM, 0);
    FL_REQUIRE_EQ(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    memset(hdr, 'x', sizeof hdr);
    FL_REQUIRE_EQ(write(fd, hdr, sizeof hdr), (ssize_t)sizeof hdr);
    FL_ASSERT_EQ(read(fd, &c, 1), 0);
    close(fd);
    /* the good client still works; echo of 3 MB comes back intact */
    size_t n = 3 << 20;
    char *big = malloc(n);
    for (size_t i = 0; i < n; i++)
        big[i] = (char)(i * 31);
    FL_ASSERT_EQ(call(&x, PSRT_OP_ECHO, 0, big, n), 0);
    FL_ASSERT_EQ(x.resp.len, n);
    FL_ASSERT_MEMEQ(x.resp.p, big, n);
    free(big);
}

static double cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec / 1e6;
}

/* Out of file descriptors, the server refuses a new connection at once
 * (the client sees it closed, and retries) instead of leaving it in the
 * backlog and spinning on a listening socket it cannot accept from; the
 * connections it has keep working, and it accepts again once it can. */
FL_TEST(psrt_rpc, out_of_fds_refuses_without_spinning)
{
    struct ps_fixture x;
    fixture(&x, "linear", PSRT_POOL, 10);
    FL_REQUIRE_EQ(call(&x, PSRT_OP_PING, 0, NULL, 0), 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)psrt_ps_port(x.ps))};
    a.sin_addr.s_addr = htonl(0x7f000001);
    /* every descriptor taken but one, which the client's socket takes */
    struct rlimit old, low;
    getrlimit(RLIMIT_NOFILE, &old);
    int fill[4096], nfill = 0, probe;
    while ((probe = open("/dev/null", O_RDONLY)) >= 0 && probe < 4000)
        fill[nfill++] = probe;
    if (probe >= 0)
        close(probe);
    int top = nfill ? fill[nfill - 1] : 0;
    low = (struct rlimit){(rlim_t)top + 2, old.rlim_max};
    FL_REQUIRE_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    FL_REQUIRE(fd >= 0);
    FL_REQUIRE_EQ(open("/dev/null", O_RDONLY), -1); /* none left */
    FL_REQUIRE_EQ(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int ready = poll(&p, 1, 5000);
    char c;
    ssize_t got = ready == 1 ? read(fd, &c, 1) : 1;
    FL_ASSERT_MSG(ready == 1 && got <= 0, "the connection was not refused (poll %d, read %zd)",
                  ready, got);
    /* still out of descriptors (the client's socket holds the last), with
     * nothing waiting to be accepted: the process does not spin meanwhile */
    double c0 = cpu_s();
    poll(NULL, 0, 300);
    double spent = cpu_s() - c0;
    FL_ASSERT_MSG(spent < 0.1, "%.3f s of CPU in 0.3 s while out of descriptors", spent);
    close(fd);
    for (int i = 0; i < nfill; i++)
        close(fill[i]);
    setrlimit(RLIMIT_NOFILE, &old);
    /* the old connection works, and a new one is accepted */
    FL_ASSERT_EQ(call(&x, PSRT_OP_PING, 0, NULL, 0), 0);
    fd = socket(AF_INET, SOCK_STREAM, 0);
    FL_REQUIRE_EQ(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    struct psrt_frame_hdr h = {.kind = PSRT_KIND_REQ, .op = PSRT_OP_ECHO, .len = 4, .pcrc = 1};
    uint8_t hdr[PSRT_FRAME_HDR];
    psrt_frame_encode(hdr, &h);
    FL_REQUIRE_EQ(write(fd, hdr, sizeof hdr), (ssize_t)sizeof hdr);
    FL_REQUIRE_EQ(write(fd, "abcd", 4), 4);
    FL_ASSERT_EQ(read(fd, &c, 1), 0); /* accepted, read, closed for the bad crc */
    close(fd);
}

/* A peer that accepts and closes at once (as a server out of descriptors
 * does): each reconnect after a connection that brought no reply waits
 * longer (20 ms, doubling), so a caller retrying on every transport error
 * does not spin; connects then calls, six times, take at least the waits. */
static void *accept_and_close(void *arg)
{
    int lfd = *(int *)arg, fd;
    while ((fd = accept(lfd, NULL, NULL)) >= 0)
        close(fd);
    return NULL;
}

FL_TEST(psrt_rpc, reconnect_after_unanswered_connection_backs_off)
{
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(0x7f000001);
    socklen_t al = sizeof a;
    FL_REQUIRE_EQ(bind(lfd, (struct sockaddr *)&a, sizeof a), 0);
    FL_REQUIRE_EQ(listen(lfd, 16), 0);
    getsockname(lfd, (struct sockaddr *)&a, &al);
    pthread_t t;
    pthread_create(&t, NULL, accept_and_close, &lfd);
    struct psrt_conn *c = psrt_conn_new("127.0.0.1", ntohs(a.sin_port), "closer");
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int failed = 0;
    for (int i = 0; i < 6; i++) {
        struct psrt_err e = {0};
        FL_REQUIRE_EQ(psrt_conn_connect(c, 5, &e), 0);
        struct psrt_buf resp = {0};
        int32_t st;
        if (psrt_conn_send(c, PSRT_OP_PING, 0, NULL, 0, 5, &e) ||
            psrt_conn_recv(c, 5, &resp, &st, &e))
            failed++;
        psrt_buf_free(&resp);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double took = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
    FL_ASSERT_EQ(failed, 6);
    FL_ASSERT_MSG(took >= 0.5,
                  "6 reconnects to a peer that closes at once took %.3f s (no backoff)", took);
    psrt_conn_free(c);
    shutdown(lfd, SHUT_RDWR);
    close(lfd);
    pthread_join(t, NULL);
}

/* A reply read in pieces (how the chief streams a robust save into its
 * bundle): an intact one verifies at the end; one whose payload crc does
 * not match fails at the end, naming the peer, and closes the connection. */
FL_TEST(psrt_rpc, streamed_reply_checks_crc_at_the_end)
{
    struct ps_fixture x;
    fixture(&x, "linear", PSRT_POOL, 10);
    size_t n = 5 << 20;
    char *big = malloc(n), *back = malloc(n);
    for (size_t i = 0; i < n; i++)
        big[i] = (char)(i * 7 + 3);
    struct iovec iov = {big, n};
    struct psrt_err e = {0};
    uint64_t len = 0;
    int32_t status = -1;
    FL_REQUIRE_EQ(psrt_conn_send(x.c, PSRT_OP_ECHO, 0, &iov, 1, 10, &e), 0);
    FL_REQUIRE_EQ(psrt_conn_recv_begin(x.c, 10, &len, &status, &e), 0);
    FL_ASSERT_EQ(len, n);
    FL_ASSERT_EQ(status, 0);
    FL_REQUIRE_EQ(psrt_conn_recv_part(x.c, back, 1000, &e), 0);
    FL_REQUIRE_EQ(psrt_conn_recv_part(x.c, back + 1000, n - 1000, &e), 0);
    FL_ASSERT_EQ(psrt_conn_recv_end(x.c, &e), 0);
    FL_ASSERT_MEMEQ(back, big, n);
    FL_ASSERT(psrt_conn_is_open(x.c));
    /* a peer whose reply payload does not match its crc */
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(0x7f000001);
    FL_REQUIRE_EQ(bind(lfd, (struct sockaddr *)&a, sizeof a), 0);
    FL_REQUIRE_EQ(listen(lfd, 1), 0);
    socklen_t sl = sizeof a;
    getsockname(lfd, (struct sockaddr *)&a, &sl);
    pid_t pid = fork();
    FL_REQUIRE(pid >= 0);
    if (pid == 0) {
        int fd = accept(lfd, NULL, NULL);
        uint8_t hdr[PSRT_FRAME_HDR];
        if (fd < 0 || read(fd, hdr, sizeof hdr) != (ssize_t)sizeof hdr)
            _exit(1);
        struct psrt_frame_hdr h = {.kind = PSRT_KIND_RESP,
                                   .op = PSRT_OP_RSAVE,
                                   .len = 6,
                                   .pcrc = psrt_crc32c(0, "abcdef", 6)};
        psrt_frame_encode(hdr, &h);
        if (write(fd, hdr, sizeof hdr) != (ssize_t)sizeof hdr || write(fd, "abcdeX", 6) != 6)
            _exit(1);
        char c;
        while (read(fd, &c, 1) > 0) {
        }
        _exit(0);
    }
    close(lfd);
    struct psrt_conn *c = psrt_conn_new("127.0.0.1", ntohs(a.sin_port), "ps task 2");
    FL_REQUIRE_EQ(psrt_conn_connect(c, 5, &e), 0);
    FL_REQUIRE_EQ(psrt_conn_send(c, PSRT_OP_RSAVE, 0, &iov, 0, 5, &e), 0);
    FL_REQUIRE_EQ(psrt_conn_recv_begin(c, 5, &len, &status, &e), 0);
    FL_ASSERT_EQ(len, 6);
    FL_REQUIRE_EQ(psrt_conn_recv_part(c, back, 6, &e), 0);
    FL_ASSERT_EQ(psrt_conn_recv_end(c, &e), -EBADMSG);
    FL_ASSERT_CONTAINS(e.msg, "ps task 2");
    FL_ASSERT_CONTAINS(e.msg, "crc");
    FL_ASSERT(!psrt_conn_is_open(c));
    psrt_conn_free(c);
    int st;
    waitpid(pid, &st, 0);
    free(big);
    free(back);
}

FL_TEST(psrt_rpc, unreachable_peer_error_names_it)
{
    /* a port nobody listens on */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(0x7f000001);
    FL_REQUIRE_EQ(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    socklen_t sl = sizeof a;
    getsockname(fd, (struct sockaddr *)&a, &sl);
    close(fd);
    struct psrt_conn *c = psrt_conn_new("127.0.0.1", ntohs(a.sin_port), "ps task 3");
    struct psrt_err e = {0};
    double t0 = psrt_now();
    FL_ASSERT_EQ(psrt_conn_connect(c, 0.3, &e), -ECONNREFUSED);
    FL_ASSERT_LT(psrt_now() - t0, 2.0);
    char want[64];
    snprintf(want, sizeof want, "ps task 3 at 127.0.0.1:%d", ntohs(a.sin_port));
    FL_ASSERT_CONTAINS(e.msg, want);
    FL_ASSERT_CONTAINS(e.msg, "UnavailableError");
    psrt_conn_free(c);
}

/* A peer that answers any request with a reply of n bytes sent in k
 * chunks, gap seconds apart (after the first chunk), or (k == 0) never. */
static pid_t slow_peer(int *port, size_t n, int k, double gap)
{
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(0x7f000001);
    if (bind(lfd, (struct sockaddr *)&a, sizeof a) || listen(lfd, 4))
        return -1;
    socklen_t sl = sizeof a;
    getsockname(lfd, (struct sockaddr *)&a, &sl);
    *port = ntohs(a.sin_port);
    pid_t pid = fork();
    if (pid != 0) {
        close(lfd);
        return pid;
    }
    char *body = malloc(n);
    for (size_t i = 0; i < n; i++)
        body[i] = (char)(i * 13 + 1);
    for (;;) {
        int fd = accept(lfd, NULL, NULL);
        if (fd < 0)
            _exit(1);
        uint8_t hdr[PSRT_FRAME_HDR];
        struct psrt_frame_hdr h;
        if (read(fd, hdr, sizeof hdr) != (ssize_t)sizeof hdr ||
            psrt_frame_decode(hdr, &h, 1 << 20) || h.len != 0)
            _exit(1);
        if (k == 0) {
            char c;
            while (read(fd, &c, 1) > 0) {
            }
            close(fd);
            continue;
        }
        struct psrt_frame_hdr r = {.kind = PSRT_KIND_RESP,
                                   .op = h.op,
                                   .id = h.id,
                                   .len = n,
                                   .pcrc = psrt_crc32c(0, body, n)};
        psrt_frame_encode(hdr, &r);
        if (write(fd, hdr, sizeof hdr) != (ssize_t)sizeof hdr)
            _exit(1);
        size_t per = n / (size_t)k;
        for (int c = 0; c < k; c++) {
            if (c) {
                struct timespec ts = {0, (long)(gap * 1e9)};
                nanosleep(&ts, NULL);
            }
            size_t len = c == k - 1 ? n - per * (size_t)c : per;
            if (write(fd, body + per * (size_t)c, len) != (ssize_t)len)
                _exit(1);
        }
        close(fd);
    }
}

/* Timeouts are idle timeouts: a reply that keeps moving for longer than
 * the timeout in all arrives whole (one call, and the multiplexed calls);
 * a peer that says nothing is given up after about the timeout. */
/* A host name that does not resolve is said so, not "No route to host". */
FL_TEST(psrt_rpc, unresolvable_host_is_named_as_such)
{
    struct psrt_conn *c = psrt_conn_new("nosuchhost.invalid", 2222, "ps task 1");
    struct psrt_err e = {0};
    FL_ASSERT_NE(psrt_conn_connect(c, 0.2, &e), 0);
    FL_ASSERT_CONTAINS(e.msg, "cannot reach ps task 1 at nosuchhost.invalid:2222 within 0.2 s: "
                              "cannot resolve host name 'nosuchhost.invalid': ");
    psrt_conn_free(c);
}

FL_TEST(psrt_rpc, timeout_is_idle_not_total)
{
    int port;
    size_t n = 64 << 10;
    pid_t pid = slow_peer(&port, n, 8, 0.15); /* about 1 s in all */
    FL_REQUIRE(pid > 0);
    struct psrt_conn *c = psrt_conn_new("127.0.0.1", port, "ps task 4");
    struct psrt_err e = {0};
    struct psrt_buf resp = {0};
    int32_t st = -1;
    FL_REQUIRE_EQ(psrt_conn_connect(c, 5, &e), 0);
    double t0 = psrt_now();
    FL_ASSERT_MSG(psrt_conn_call(c, PSRT_OP_PING, 0, NULL, 0, 0.5, &resp, &st, &e) == 0, "%s",
                  e.msg);
    FL_ASSERT_GT(psrt_now() - t0, 0.6); /* it did take longer than the timeout */
    FL_ASSERT_EQ(resp.len, n);
    FL_REQUIRE_EQ(psrt_conn_connect(c, 5, &e), 0); /* the peer closes after each reply */
    struct psrt_mcall m = {.c = c, .op = PSRT_OP_PING, .resp = &resp, .err = &e};
    FL_ASSERT_MSG(psrt_conn_multi(&m, 1, 0.5) == 0, "%s", e.msg);
    FL_ASSERT_EQ(resp.len, n);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    /* a silent peer */
    pid = slow_peer(&port, n, 0, 0);
    FL_REQUIRE(pid > 0);
    struct psrt_conn *s = psrt_conn_new("127.0.0.1", port, "ps task 5");
    FL_REQUIRE_EQ(psrt_conn_connect(s, 5, &e), 0);
    t0 = psrt_now();
    FL_ASSERT_EQ(psrt_conn_call(s, PSRT_OP_PING, 0, NULL, 0, 0.3, &resp, &st, &e), -ETIMEDOUT);
    FL_ASSERT_LT(psrt_now() - t0, 2.0);
    FL_ASSERT_CONTAINS(e.msg, "ps task 5");
    FL_REQUIRE_EQ(psrt_conn_connect(s, 5, &e), 0);
    m = (struct psrt_mcall){.c = s, .op = PSRT_OP_PING, .resp = &resp, .err = &e};
    FL_ASSERT_EQ(psrt_conn_multi(&m, 1, 0.3), -ETIMEDOUT);
    FL_ASSERT_CONTAINS(e.msg, "waiting on Ping");
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    psrt_conn_free(c);
    psrt_conn_free(s);
    psrt_buf_free(&resp);
}

FL_TEST(psrt_rpc, multi_pipelines_calls_per_connection_in_order)
{
    struct ps_fixture x, y;
    fixture(&x, "linear", PSRT_POOL, 10);
    fixture(&y, "linear", PSRT_PER_REQUEST, 10);
    enum { N = 7 };
    struct psrt_mcall m[N];
    struct psrt_err err[N];
    struct psrt_buf resp[N];
    char *payload[N];
    struct iovec iov[N];
    memset(resp, 0, sizeof resp);
    for (int i = 0; i < N; i++) {
        size_t n = (size_t)(i + 1) * 300000; /* big enough to interleave on the wire */
        payload[i] = malloc(n);
        for (size_t j = 0; j < n; j++)
            payload[i][j] = (char)(i * 7 + j);
        iov[i] = (struct iovec){payload[i], n};
        m[i] = (struct psrt_mcall){.c = i % 3 ? x.c : y.c,
                                   .op = PSRT_OP_ECHO,
                                   .iov = &iov[i],
                                   .niov = 1,
                                   .resp = &resp[i],
                                   .err = &err[i]};
    }
    FL_REQUIRE_EQ(psrt_conn_multi(m, N, 10), 0);
    for (int i = 0; i < N; i++) {
        FL_ASSERT_EQ(m[i].rc, 0);
        FL_ASSERT_EQ(m[i].status, 0);
        FL_ASSERT_EQ(resp[i].len, iov[i].iov_len);
        if (resp[i].len == iov[i].iov_len)
            FL_ASSERT_MEMEQ(resp[i].p, payload[i], resp[i].len);
        free(payload[i]);
        psrt_buf_free(&resp[i]);
    }
    /* a closed connection fails its calls with an error naming the peer */
    psrt_conn_close(y.c);
    char one = 1;
    struct iovec o = {&one, 1};
    m[0] = (struct psrt_mcall){
        .c = y.c, .op = PSRT_OP_ECHO, .iov = &o, .niov = 1, .resp = &resp[0], .err = &err[0]};
    m[1] = (struct psrt_mcall){
        .c = x.c, .op = PSRT_OP_ECHO, .iov = &o, .niov = 1, .resp = &resp[1], .err = &err[1]};
    FL_ASSERT_EQ(psrt_conn_multi(m, 2, 5), -ENOTCONN);
    FL_ASSERT_CONTAINS(err[0].msg, "ps task 0 at 127.0.0.1:");
    FL_ASSERT_EQ(m[1].rc, 0);
    FL_ASSERT_EQ(resp[1].len, 1);
    psrt_buf_free(&resp[0]);
    psrt_buf_free(&resp[1]);
}
