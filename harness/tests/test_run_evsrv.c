/*
 * test_run_evsrv.c: the event channel's server (harness/run/evsrv.c) in
 * process: its line parser (HELLO, EVENT, SYNC, and the reason a bad line is
 * refused), every client it accepted freed (also the ones still connected
 * when it closes), and the end-of-run drain reading what senders that
 * already exited left on their connections.
 */
#include "harness/tests/fl_test.h"
#include "harness/engine/trigger.h"

#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static int freed;

static void count_free(void *user)
{
    freed++;
    free(user);
}

/* A client connection to the server at path (no HELLO: the server does not
 * need one to accept). */
static int connect_to(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Accepts one client, waiting for it (the listening socket is non-blocking). */
static struct fl_evsrv_client *accept_one(struct fl_evsrv *s)
{
    struct pollfd p = {.fd = fl_evsrv_fd(s), .events = POLLIN};
    if (poll(&p, 1, 5000) != 1)
        return NULL;
    return fl_evsrv_accept(s);
}

/* True when the peer of fd has closed its end (read gives EOF). */
static bool peer_closed(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    char c;
    return poll(&p, 1, 5000) == 1 && read(fd, &c, 1) == 0;
}

FL_TEST(run_evsrv, evsrv_close_frees_every_client)
{
    char path[4096], err[256];
    snprintf(path, sizeof path, "%s/ev.sock", fl_test_dir());
    struct fl_evsrv *s;
    FL_REQUIRE_EQ(fl_evsrv_open(&s, path, count_free, err, sizeof err), 0);
    int fds[3];
    struct fl_evsrv_client *c[3];
    for (int i = 0; i < 3; i++) {
        fds[i] = connect_to(path);
        FL_REQUIRE(fds[i] >= 0);
        c[i] = accept_one(s);
        FL_REQUIRE(c[i] != NULL);
        c[i]->user = malloc(16);
    }
    /* dropping one (the middle of the list) frees it and its user data */
    freed = 0;
    fl_evsrv_drop(s, c[1]);
    FL_ASSERT_EQ(freed, 1);
    FL_ASSERT(peer_closed(fds[1]));
    /* closing frees the two still connected and closes their sockets */
    fl_evsrv_close(s);
    FL_ASSERT_EQ(freed, 3);
    FL_ASSERT(peer_closed(fds[0]));
    FL_ASSERT(peer_closed(fds[2]));
    FL_ASSERT_EQ(access(path, F_OK), -1);
    for (int i = 0; i < 3; i++)
        close(fds[i]);
}

static int drained;

static char drained_kinds[256];

static void count_event(void *ctx, struct fl_evsrv_client *c, const struct fl_ev *ev, char *raw)
{
    (void)ctx;
    (void)raw;
    drained++;
    size_t l = strlen(drained_kinds);
    snprintf(drained_kinds + l, sizeof drained_kinds - l, "%s@%s ", ev->kind, c->host);
}

/* Events a process sent right before it exited, on a connection the server
 * has not even accepted yet (or accepted and not read): the end-of-run drain
 * gets every one.  The engine used to stop reading as soon as the last task
 * had exited, and lost them (engine_run/kill_for_relaunches_and_pause_freezes
 * found no nap.end under load). */
FL_TEST(run_evsrv, evsrv_drain_reads_what_exited_senders_left)
{
    char path[4096], err[256];
    snprintf(path, sizeof path, "%s/ev.sock", fl_test_dir());
    struct fl_evsrv *s;
    FL_REQUIRE_EQ(fl_evsrv_open(&s, path, free, err, sizeof err), 0);
    /* one accepted before it wrote, one never accepted; both gone */
    int a = connect_to(path);
    FL_REQUIRE(a >= 0);
    struct fl_evsrv_client *ca = accept_one(s);
    FL_REQUIRE(ca != NULL);
    int b = connect_to(path);
    FL_REQUIRE(b >= 0);
    const char *la = "HELLO host=h0 job=w task=0 pid=1\nEVENT nap.end step=1\n";
    const char *lb = "HELLO host=h1 job=w task=1 pid=2\nEVENT train.done step=9\nEVENT x.y\n";
    FL_REQUIRE_EQ(write(a, la, strlen(la)), (ssize_t)strlen(la));
    FL_REQUIRE_EQ(write(b, lb, strlen(lb)), (ssize_t)strlen(lb));
    close(a);
    close(b);
    drained = 0;
    drained_kinds[0] = 0;
    fl_evsrv_drain(s, count_event, NULL);
    FL_ASSERT_EQ(drained, 3);
    FL_ASSERT_CONTAINS(drained_kinds, "nap.end@h0");
    FL_ASSERT_CONTAINS(drained_kinds, "train.done@h1");
    FL_ASSERT_CONTAINS(drained_kinds, "x.y@h1");
    fl_evsrv_close(s);
}

static void parse(char *line, struct fl_ev *ev)
{
    char err[256];
    int rc = fl_ev_parse(line, ev, err, sizeof err);
    FL_REQUIRE_MSG(rc == 0, "parse '%s': %s", line, err);
}

FL_TEST(run_evsrv, parse_hello_event_sync)
{
    struct fl_ev ev;
    char l1[] = "HELLO host=ps0 job=ps task=1 pid=42";
    parse(l1, &ev);
    FL_ASSERT_EQ(ev.type, FL_EV_HELLO);
    FL_ASSERT_STREQ(fl_ev_get(&ev, "host"), "ps0");
    FL_ASSERT_STREQ(fl_ev_get(&ev, "pid"), "42");
    char l2[] = "EVENT save.failed step=5 error=\"NotFoundError: a \\\"b\\\" c\"";
    parse(l2, &ev);
    FL_ASSERT_EQ(ev.type, FL_EV_EVENT);
    FL_ASSERT_STREQ(ev.kind, "save.failed");
    FL_ASSERT_EQ(ev.nattrs, 2);
    FL_ASSERT_STREQ(fl_ev_get(&ev, "error"), "NotFoundError: a \"b\" c");
    char l3[] = "SYNC 12 train.step";
    parse(l3, &ev);
    FL_ASSERT_EQ(ev.type, FL_EV_SYNC);
    FL_ASSERT_EQ(ev.seq, 12);
    FL_ASSERT_STREQ(ev.kind, "train.step");
    FL_ASSERT_EQ(ev.nattrs, 0);
}

FL_TEST(run_evsrv, parse_rejects_bad_lines_with_reason)
{
    static const char *bad[][2] = {
        {"BOGUS x", "unknown line type"},     {"SYNC x train.step", "sequence number"},
        {"EVENT Bad!Kind", "bad event kind"}, {"EVENT k novalue", "has no '=value'"},
        {"EVENT k a=\"open", "unterminated"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char line[128], err[256] = "";
        struct fl_ev ev;
        snprintf(line, sizeof line, "%s", bad[i][0]);
        FL_ASSERT_MSG(fl_ev_parse(line, &ev, err, sizeof err) < 0, "accepted '%s'", bad[i][0]);
        FL_ASSERT_CONTAINS(err, bad[i][1]);
    }
}

/* What fl_evsrv_lines handed on: "kind[raw attrs] " each. */
static char handed[1024];

static void collect(void *ctx, struct fl_evsrv_client *c, const struct fl_ev *ev, char *raw)
{
    (void)ctx;
    (void)c;
    size_t l = strlen(handed);
    snprintf(handed + l, sizeof handed - l, "%s[%.20s] ", ev->kind, raw);
}

/* Gives c the bytes p[0..n) as reads of at most step bytes (and at most
 * what its buffer takes, as fl_evsrv_read asks for) would. */
static void feed_lines(struct fl_evsrv_client *c, const char *p, size_t n, size_t step)
{
    while (n) {
        size_t k = sizeof c->buf - c->len - 1;
        k = k < n ? k : n;
        k = k < step ? k : step;
        memcpy(c->buf + c->len, p, k);
        c->len += k;
        c->buf[c->len] = 0;
        fl_evsrv_lines(c, collect, NULL);
        p += k;
        n -= k;
    }
}

/* A line of FL_EV_LINE_MAX bytes or more (docs/events.md: at most 4096
 * bytes with the newline) is discarded whole, however the reads split it:
 * it used to be handed on when one read brought all of it, its raw text cut
 * at FL_EV_LINE_MAX (harness/fuzz/fuzz_evline.c found a 4147-byte line
 * recorded so), or read past the end of its copy when the attributes began
 * beyond that; and when reads split it, the part past FL_EV_LINE_MAX was
 * taken for a line of its own, which could be an event no one sent.  A
 * SYNC among such lines is still answered, so that its sender does not
 * block. */
FL_TEST(run_evsrv, overlong_lines_are_discarded_whole)
{
    const size_t x = FL_EV_LINE_MAX + 400;
    char *in = malloc(3 * x + 256);
    FL_REQUIRE(in != NULL);
    size_t n = 0;
    /* an event too long, then one whose part past 4500 bytes reads as an
     * event, then a SYNC too long, then a good one */
    n += (size_t)sprintf(in + n, "EVENT long.one v=");
    memset(in + n, 'x', x);
    n += x;
    in[n++] = '\n';
    size_t second = n;
    n += (size_t)sprintf(in + n, "EVENT long.two v=");
    memset(in + n, 'y', second + 4500 - n);
    n = second + 4500;
    n += (size_t)sprintf(in + n, "EVENT forged.kind a=1\n");
    n += (size_t)sprintf(in + n, "SYNC 7 long.sync v=");
    memset(in + n, 'z', x);
    n += x;
    n += (size_t)sprintf(in + n, "\nEVENT next.one b=2\n");
    static const size_t steps[] = {SIZE_MAX, 4500, 4096, 1000, 1};
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
        int sv[2];
        FL_REQUIRE_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
        struct fl_evsrv_client *c = calloc(1, sizeof *c);
        FL_REQUIRE(c != NULL);
        c->fd = sv[0];
        c->task = -1;
        handed[0] = 0;
        /* the second line split where its tail begins (4500 bytes in) */
        if (steps[i] == 4500) {
            feed_lines(c, in, second + 4500, SIZE_MAX);
            feed_lines(c, in + second + 4500, n - second - 4500, SIZE_MAX);
        } else {
            feed_lines(c, in, n, steps[i]);
        }
        FL_ASSERT_MSG(!strcmp(handed, "next.one[b=2] "), "reads of %zu: handed on %s", steps[i],
                      handed);
        char ans[16] = "";
        ssize_t got = recv(sv[1], ans, sizeof ans - 1, MSG_DONTWAIT);
        FL_ASSERT_MSG(got == 5 && !memcmp(ans, "OK 7\n", 5), "reads of %zu: the SYNC answered %zd",
                      steps[i], got);
        close(sv[0]);
        close(sv[1]);
        free(c);
    }
    free(in);
}
