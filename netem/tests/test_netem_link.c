/*
 * test_netem_link.c: link faults (netem/link.h) on real namespaces: random loss
 * counted over hundreds of UDP datagrams (both ways, one way, a whole host),
 * rate limits measured with a TCP transfer against the unlimited rate, a
 * port taken down and brought back, and a restarted host's port getting its
 * class and down state back.  Hosts are cloned processes in new network
 * namespaces (PDEATHSIG), sockets are made inside them by setns() around
 * socket(), as in test_netem_fabric.c.  Tolerances are wide: the machine is
 * shared.  Needs root; skips otherwise.
 */
#include "harness/tests/fl_test.h"
#include "netem/fabric.h"
#include "netem/link.h"
#include "netem/tests/netns_util.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct env {
    struct fl_fabric *f;
    struct fl_links *l;
    pid_t host[4];
    int idx[4]; /* fabric index of each host (env_up: its slot) */
    int n;
    int udp[4]; /* bound UDP socket of each host, port 7000 */
};

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Datagrams from host `from` to host `to` that arrive, of n sent.  The
 * receiver's buffer holds them all; it is read until 300 ms pass quietly. */
static int udp_count(struct env *e, int from, int to, int n)
{
    struct sockaddr_in a = sin_of(e->idx[to], 7000);
    char c;
    while (recv(e->udp[to], &c, 1, MSG_DONTWAIT) >= 0)
        ;
    int got = 0;
    for (int i = 0; i < n; i++) {
        sendto(e->udp[from], "x", 1, 0, (struct sockaddr *)&a, sizeof a);
        while (recv(e->udp[to], &c, 1, MSG_DONTWAIT) >= 0)
            got++;
    }
    struct pollfd p = {.fd = e->udp[to], .events = POLLIN};
    while (poll(&p, 1, 300) == 1)
        while (recv(e->udp[to], &c, 1, MSG_DONTWAIT) >= 0)
            got++;
    return got;
}

/* One datagram arrives within ms (sent every 50 ms). */
static bool udp_reaches(struct env *e, int from, int to, int ms)
{
    struct sockaddr_in a = sin_of(e->idx[to], 7000);
    char c;
    for (int64_t end = now_ms() + ms; now_ms() < end;) {
        sendto(e->udp[from], "x", 1, 0, (struct sockaddr *)&a, sizeof a);
        struct pollfd p = {.fd = e->udp[to], .events = POLLIN};
        if (poll(&p, 1, 50) == 1) {
            while (recv(e->udp[to], &c, 1, MSG_DONTWAIT) >= 0)
                ;
            return true;
        }
    }
    return false;
}

/* n hosts at fabric indices idx[] (NULL: 0 .. n-1). */
static void env_up_at(struct env *e, int n, const int *idx)
{
    char err[256] = "";
    fl_test_need_root();
    memset(e, 0, sizeof *e);
    e->n = n;
    for (int i = 0; i < n; i++)
        e->idx[i] = idx ? idx[i] : i;
    int rc = fl_fabric_create(&e->f, "tl", err, sizeof err);
    FL_REQUIRE_MSG(rc == 0, "fl_fabric_create: %d %s", rc, err);
    for (int i = 0; i < n; i++) {
        e->host[i] = host_spawn();
        FL_REQUIRE(e->host[i] > 0);
        FL_REQUIRE_EQ(fl_fabric_attach(e->f, e->idx[i], e->host[i], err, sizeof err), 0);
    }
    rc = fl_fabric_commit(e->f, err, sizeof err);
    FL_REQUIRE_MSG(rc == 0, "commit: %d %s", rc, err);
    rc = fl_links_new(&e->l, e->f, err, sizeof err);
    FL_REQUIRE_MSG(rc == 0, "fl_links_new: %d %s", rc, err);
    for (int i = 0; i < n; i++) {
        e->udp[i] = socket_in(e->host[i], SOCK_DGRAM);
        FL_REQUIRE(e->udp[i] >= 0);
        int big = 4 << 20;
        setsockopt(e->udp[i], SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof big);
        struct sockaddr_in a = sin_of(e->idx[i], 7000);
        FL_REQUIRE(bind(e->udp[i], (struct sockaddr *)&a, sizeof a) == 0);
    }
    /* every pair resolved (ARP) before any fault */
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            if (i != j)
                FL_REQUIRE(udp_reaches(e, i, j, 2000));
}

static void env_up(struct env *e, int n)
{
    env_up_at(e, n, NULL);
}

static void env_down(struct env *e)
{
    for (int i = 0; i < e->n; i++)
        if (e->udp[i] >= 0)
            close(e->udp[i]);
    fl_links_free(e->l);
    fl_fabric_destroy(e->f);
    for (int i = 0; i < e->n; i++)
        host_kill(e->host[i]);
}

static int apply(struct env *e, enum fl_link_scope scope, const int *a, size_t na, const int *b,
                 size_t nb, unsigned loss_bp, uint64_t rate, bool down)
{
    char err[512] = "";
    struct fl_link_spec s = {.scope = scope,
                             .a = a,
                             .na = na,
                             .b = b,
                             .nb = nb,
                             .loss_bp = loss_bp,
                             .rate_bit = rate,
                             .down = down};
    int id = 0;
    int rc = fl_links_apply(e->l, &s, &id, err, sizeof err);
    FL_REQUIRE_MSG(rc == 0, "fl_links_apply: %d %s", rc, err);
    FL_REQUIRE(id > 0);
    return id;
}

static void heal(struct env *e, int id)
{
    char err[512] = "";
    int rc = fl_links_heal(e->l, id, err, sizeof err);
    FL_REQUIRE_MSG(rc == 0, "fl_links_heal: %d %s", rc, err);
}

FL_TEST_ROOT_T(netem_link, loss_50_percent_drops_about_half_both_ways_until_heal, 60)
{
    struct env e;
    env_up(&e, 2);
    int ab[] = {0, 1};
    int id = apply(&e, FL_LINK_BETWEEN, ab, 2, NULL, 0, 5000, 0, false);
    int g01 = udp_count(&e, 0, 1, 400), g10 = udp_count(&e, 1, 0, 400);
    printf("loss 50%%: 0->1 %d/400 delivered, 1->0 %d/400\n", g01, g10);
    FL_ASSERT_MSG(g01 >= 100 && g01 <= 300, "0->1 delivered %d of 400 with 50%% loss", g01);
    FL_ASSERT_MSG(g10 >= 100 && g10 <= 300, "1->0 delivered %d of 400 with 50%% loss", g10);
    char *out = NULL;
    fl_test_sh(&out,
               "nsenter -t %d -n nft list ruleset | grep -c 'numgen random mod 10000 < 5000 drop'",
               (int)fl_fabric_switch_pid(e.f));
    FL_ASSERT_STREQ(out, "1\n");
    free(out);
    heal(&e, id);
    g01 = udp_count(&e, 0, 1, 400);
    printf("healed: 0->1 %d/400 delivered\n", g01);
    FL_ASSERT_MSG(g01 >= 396, "healed: delivered %d of 400", g01);
    char err[256];
    FL_ASSERT_EQ(fl_links_heal(e.l, id, err, sizeof err), -ENOENT);
    env_down(&e);
}

FL_TEST_ROOT_T(netem_link, loss_oneway_drops_only_from_to, 60)
{
    struct env e;
    env_up(&e, 3);
    int from[] = {0}, to[] = {1};
    int id = apply(&e, FL_LINK_ONEWAY, from, 1, to, 1, 10000, 0, false);
    FL_ASSERT_EQ(udp_count(&e, 0, 1, 100), 0);
    FL_ASSERT_EQ(udp_count(&e, 1, 0, 100), 100);
    FL_ASSERT_EQ(udp_count(&e, 0, 2, 100), 100);
    FL_ASSERT_EQ(udp_count(&e, 2, 1, 100), 100);
    heal(&e, id);
    FL_ASSERT_EQ(udp_count(&e, 0, 1, 100), 100);
    env_down(&e);
}

FL_TEST_ROOT_T(netem_link, loss_host_covers_every_peer_of_the_host, 60)
{
    struct env e;
    env_up(&e, 3);
    int h[] = {0};
    int id = apply(&e, FL_LINK_HOST, h, 1, NULL, 0, 10000, 0, false);
    FL_ASSERT_EQ(udp_count(&e, 0, 1, 50), 0);
    FL_ASSERT_EQ(udp_count(&e, 2, 0, 50), 0);
    FL_ASSERT_EQ(udp_count(&e, 1, 2, 50), 50);
    heal(&e, id);
    FL_ASSERT_EQ(udp_count(&e, 2, 0, 50), 50);
    env_down(&e);
}

/* Mbit/s of a TCP transfer from host `from` to host `to` over ms. */
static double tcp_rate(struct env *e, int from, int to, int port, int ms)
{
    int l = socket_in(e->host[to], SOCK_STREAM);
    int one = 1;
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = sin_of(e->idx[to], port);
    if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof a) < 0 || listen(l, 4) < 0)
        return -1;
    int c = socket_in(e->host[from], SOCK_STREAM);
    if (c < 0 || connect(c, (struct sockaddr *)&a, sizeof a) < 0)
        return -1;
    int s = accept(l, NULL, NULL);
    if (s < 0)
        return -1;
    fcntl(c, F_SETFL, O_NONBLOCK);
    fcntl(s, F_SETFL, O_NONBLOCK);
    static char buf[65536];
    long long got = 0;
    int64_t t0 = now_ms(), end = t0 + ms;
    while (now_ms() < end) {
        struct pollfd p[2] = {{.fd = c, .events = POLLOUT}, {.fd = s, .events = POLLIN}};
        if (poll(p, 2, 50) <= 0)
            continue;
        if (p[0].revents & POLLOUT)
            (void)!write(c, buf, sizeof buf);
        if (p[1].revents & POLLIN) {
            ssize_t n;
            while ((n = read(s, buf, sizeof buf)) > 0)
                got += n;
        }
    }
    double secs = (double)(now_ms() - t0) / 1000.0;
    close(c);
    close(s);
    close(l);
    return (double)got * 8 / secs / 1e6;
}

FL_TEST_ROOT_T(netem_link, rate_20mbit_limits_tcp_both_ways_until_heal, 90)
{
    struct env e;
    env_up(&e, 3);
    double free_rate = tcp_rate(&e, 0, 1, 7100, 1000);
    int ab[] = {0, 1};
    int id = apply(&e, FL_LINK_BETWEEN, ab, 2, NULL, 0, 0, 20000000, false);
    double r01 = tcp_rate(&e, 0, 1, 7101, 3000);
    double r10 = tcp_rate(&e, 1, 0, 7102, 3000);
    double r21 = tcp_rate(&e, 2, 1, 7103, 1000);
    printf("unlimited %.0f Mbit/s; rate 20mbit: 0->1 %.1f Mbit/s, 1->0 %.1f Mbit/s; 2->1 (not "
           "covered) %.0f Mbit/s\n",
           free_rate, r01, r10, r21);
    FL_ASSERT_MSG(free_rate > 100, "unlimited rate %.1f Mbit/s", free_rate);
    FL_ASSERT_MSG(r01 > 10 && r01 < 24, "0->1 at 20mbit: %.1f Mbit/s", r01);
    FL_ASSERT_MSG(r10 > 10 && r10 < 24, "1->0 at 20mbit: %.1f Mbit/s", r10);
    FL_ASSERT_MSG(r21 > 60, "2->1 is not covered: %.1f Mbit/s", r21);
    char *out = NULL;
    fl_test_sh(&out, "nsenter -t %d -n tc class show dev h1 | grep -o 'htb 1:1 .*rate [0-9]*Mbit'",
               (int)fl_fabric_switch_pid(e.f));
    FL_ASSERT_STREQ(out, "htb 1:1 root prio 0 rate 20Mbit\n");
    free(out);
    heal(&e, id);
    double healed = tcp_rate(&e, 0, 1, 7104, 1000);
    printf("healed: %.0f Mbit/s\n", healed);
    FL_ASSERT_MSG(healed > 60, "healed rate %.1f Mbit/s", healed);
    fl_test_sh(&out, "nsenter -t %d -n tc class show dev h1 | wc -l",
               (int)fl_fabric_switch_pid(e.f));
    FL_ASSERT_STREQ(out, "0\n");
    free(out);
    env_down(&e);
}

FL_TEST_ROOT_T(netem_link, down_blocks_host_until_heal, 60)
{
    struct env e;
    env_up(&e, 3);
    int h[] = {1};
    int id = apply(&e, FL_LINK_HOST, h, 1, NULL, 0, 0, 0, true);
    FL_ASSERT(fl_links_port_is_down(e.l, 1));
    FL_ASSERT_EQ(udp_count(&e, 0, 1, 50), 0);
    FL_ASSERT_EQ(udp_count(&e, 1, 2, 50), 0);
    FL_ASSERT_EQ(udp_count(&e, 0, 2, 50), 50);
    char *out = NULL;
    fl_test_sh(&out, "nsenter -t %d -n ip -o link show eth0 | grep -c NO-CARRIER", (int)e.host[1]);
    FL_ASSERT_STREQ(out, "1\n");
    free(out);
    /* flapping: up and down again without forgetting the fault */
    char err[256];
    FL_ASSERT_EQ(fl_links_set_down(e.l, id, false, err, sizeof err), 0);
    FL_ASSERT(udp_reaches(&e, 0, 1, 2000));
    FL_ASSERT_EQ(fl_links_set_down(e.l, id, true, err, sizeof err), 0);
    FL_ASSERT_EQ(udp_count(&e, 0, 1, 20), 0);
    heal(&e, id);
    FL_ASSERT(!fl_links_port_is_down(e.l, 1));
    FL_ASSERT(udp_reaches(&e, 0, 1, 2000));
    FL_ASSERT(udp_reaches(&e, 1, 2, 2000));
    env_down(&e);
}

/* Sends n datagrams "d" from `from` to `to` (while the link is down). */
static void send_d(struct env *e, int from, int to, int n)
{
    struct sockaddr_in a = sin_of(e->idx[to], 7000);
    for (int i = 0; i < n; i++)
        sendto(e->udp[from], "d", 1, 0, (struct sockaddr *)&a, sizeof a);
}

/* Once the link is up again: sends marker datagrams `m` from `from` to `to`,
 * one every 5 ms, until one arrives (5 s at most).  A path keeps its order,
 * so whatever the down phase left queued (in a neighbour's queue waiting for
 * ARP, in a qdisc) arrives before the marker: how many "d" came first, or -1
 * if no marker came.  Other markers (late ones of an earlier round) are
 * skipped. */
static int d_before_marker(struct env *e, int from, int to, char m)
{
    struct sockaddr_in a = sin_of(e->idx[to], 7000);
    int old = 0;
    for (int64_t end = now_ms() + 5000; now_ms() < end;) {
        sendto(e->udp[from], &m, 1, 0, (struct sockaddr *)&a, sizeof a);
        struct pollfd p = {.fd = e->udp[to], .events = POLLIN};
        if (poll(&p, 1, 5) != 1)
            continue;
        char c;
        while (recv(e->udp[to], &c, 1, MSG_DONTWAIT) == 1) {
            if (c == m)
                return old;
            old += c == 'd';
        }
    }
    return -1;
}

static void drain(struct env *e, int to)
{
    char c;
    while (recv(e->udp[to], &c, 1, MSG_DONTWAIT) >= 0)
        ;
}

/* A link that is down loses what is sent into it, both ways, whether the
 * neighbour entries were fresh or had gone stale: nothing sent while down
 * arrives at the heal. */
FL_TEST_ROOT_T(netem_link, down_loses_what_is_sent_while_down, 60)
{
    struct env e;
    env_up(&e, 2);
    int h[] = {1};
    drain(&e, 0);
    drain(&e, 1);
    int id = apply(&e, FL_LINK_HOST, h, 1, NULL, 0, 0, 0, true);
    send_d(&e, 0, 1, 20);
    send_d(&e, 1, 0, 20);
    heal(&e, id);
    FL_ASSERT_EQ(d_before_marker(&e, 0, 1, 'm'), 0);
    FL_ASSERT_EQ(d_before_marker(&e, 1, 0, 'm'), 0);
    env_down(&e);
}

/* A link flapping with a 200 ms period (fl_links_set_down by turns, as the
 * harness's flap does): in every up phase traffic passes both ways within
 * its 100 ms, and nothing sent in a down phase arrives. */
FL_TEST_ROOT_T(netem_link, flap_200ms_follows_the_phases_both_ways, 60)
{
    struct env e;
    env_up(&e, 2);
    int h[] = {1};
    int id = apply(&e, FL_LINK_HOST, h, 1, NULL, 0, 0, 0, true);
    char err[256];
    int64_t worst = 0;
    for (int round = 0; round < 5; round++) {
        drain(&e, 0);
        drain(&e, 1);
        if (round) /* down for the first half period */
            FL_REQUIRE_EQ(fl_links_set_down(e.l, id, true, err, sizeof err), 0);
        /* the down phase: its 100 ms, a datagram each way every 10 ms */
        for (int64_t end = now_ms() + 100; now_ms() < end;) {
            send_d(&e, 0, 1, 1);
            send_d(&e, 1, 0, 1);
            struct timespec ts = {0, 10 * 1000000};
            nanosleep(&ts, NULL);
        }
        FL_REQUIRE_EQ(fl_links_set_down(e.l, id, false, err, sizeof err), 0);
        int64_t up = now_ms();
        /* the flapping host's outbound first */
        FL_ASSERT_EQ(d_before_marker(&e, 1, 0, (char)('A' + round)), 0);
        FL_ASSERT_EQ(d_before_marker(&e, 0, 1, (char)('A' + round)), 0);
        if (now_ms() - up > worst)
            worst = now_ms() - up;
    }
    printf("flap 200ms: both ways through %lld ms after up at worst\n", (long long)worst);
    FL_ASSERT_MSG(worst <= 100, "traffic resumed %lld ms after up, past the 100 ms up phase",
                  (long long)worst);
    heal(&e, id);
    env_down(&e);
}

/* A restarted host (new netns, same idx): its remade port gets the rate
 * class and the down state back; the loss rule needs nothing. */
FL_TEST_ROOT_T(netem_link, port_remade_gets_class_and_down_back, 60)
{
    struct env e;
    char err[512] = "";
    env_up(&e, 3);
    int ab[] = {0, 1}, h2[] = {2};
    apply(&e, FL_LINK_BETWEEN, ab, 2, NULL, 0, 0, 5000000, false);
    apply(&e, FL_LINK_HOST, h2, 1, NULL, 0, 0, 0, true);
    for (int i = 1; i <= 2; i++) {
        close(e.udp[i]);
        e.udp[i] = -1;
        host_kill(e.host[i]);
        e.host[i] = host_spawn();
        FL_REQUIRE(e.host[i] > 0);
        FL_REQUIRE_EQ(fl_fabric_attach(e.f, i, e.host[i], err, sizeof err), 0);
    }
    FL_REQUIRE_MSG(fl_fabric_commit(e.f, err, sizeof err) == 0, "commit: %s", err);
    for (int i = 1; i <= 2; i++) {
        int rc = fl_links_port_remade(e.l, i, err, sizeof err);
        FL_REQUIRE_MSG(rc == 0, "port_remade %d: %d %s", i, rc, err);
    }
    char *out = NULL;
    fl_test_sh(&out, "nsenter -t %d -n tc class show dev h1 | grep -o 'htb 1:1 .*rate [0-9]*Mbit'",
               (int)fl_fabric_switch_pid(e.f));
    FL_ASSERT_STREQ(out, "htb 1:1 root prio 0 rate 5Mbit\n");
    free(out);
    fl_test_sh(&out, "nsenter -t %d -n ip -o link show h2 | grep -c 'state DOWN'",
               (int)fl_fabric_switch_pid(e.f));
    FL_ASSERT_STREQ(out, "1\n");
    free(out);
    env_down(&e);
}

/* Hosts on different bridges (fabric.h: 0 on br0, 1023 on br1, 1600 on
 * br3, so 1023 -> 1600 crosses br1, br0 and br3): a fault between them acts
 * as between two hosts of one bridge, once per frame however many bridges
 * it crosses.  50% loss applied at every crossing would let about a quarter
 * through (and an eighth over three), so the bounds are tighter than
 * loss_50_percent's: 7 standard deviations around a half, 3.5 above a
 * quarter. */
FL_TEST_ROOT_T(netem_link, loss_across_bridges_as_on_one_bridge, 60)
{
    struct env e;
    int at[] = {0, 1023, 1600};
    env_up_at(&e, 3, at);
    int ab[] = {0, 1023};
    int id = apply(&e, FL_LINK_BETWEEN, ab, 2, NULL, 0, 5000, 0, false);
    int g01 = udp_count(&e, 0, 1, 400), g10 = udp_count(&e, 1, 0, 400);
    int g21 = udp_count(&e, 2, 1, 100);
    printf("loss 50%% between 0 (br0) and 1023 (br1): 0->1023 %d/400 delivered, 1023->0 %d/400; "
           "1600->1023 (not covered) %d/100\n",
           g01, g10, g21);
    FL_ASSERT_MSG(g01 >= 130 && g01 <= 270, "0->1023 delivered %d of 400 with 50%% loss", g01);
    FL_ASSERT_MSG(g10 >= 130 && g10 <= 270, "1023->0 delivered %d of 400 with 50%% loss", g10);
    FL_ASSERT_EQ(g21, 100);
    heal(&e, id);
    /* leaf to leaf, through br0: three crossings */
    int from[] = {1600}, to[] = {1023};
    id = apply(&e, FL_LINK_ONEWAY, from, 1, to, 1, 5000, 0, false);
    int g21h = udp_count(&e, 2, 1, 400);
    printf("loss 50%% one way 1600 (br3) -> 1023 (br1): %d/400 delivered\n", g21h);
    FL_ASSERT_MSG(g21h >= 130 && g21h <= 270, "1600->1023 delivered %d of 400 with 50%% loss",
                  g21h);
    FL_ASSERT_EQ(udp_count(&e, 1, 2, 100), 100);
    FL_ASSERT_EQ(udp_count(&e, 0, 1, 100), 100);
    heal(&e, id);
    /* a whole host: every peer, on any bridge */
    int h[] = {1023};
    id = apply(&e, FL_LINK_HOST, h, 1, NULL, 0, 10000, 0, false);
    FL_ASSERT_EQ(udp_count(&e, 0, 1, 50), 0);
    FL_ASSERT_EQ(udp_count(&e, 1, 2, 50), 0);
    FL_ASSERT_EQ(udp_count(&e, 0, 2, 50), 50);
    heal(&e, id);
    FL_ASSERT_EQ(udp_count(&e, 2, 1, 50), 50);
    env_down(&e);
}

FL_TEST_ROOT_T(netem_link, rate_and_down_across_bridges_as_on_one_bridge, 90)
{
    struct env e;
    int at[] = {0, 1023, 1600};
    env_up_at(&e, 3, at);
    int ab[] = {0, 1023};
    int id = apply(&e, FL_LINK_BETWEEN, ab, 2, NULL, 0, 0, 20000000, false);
    double r01 = tcp_rate(&e, 0, 1, 7101, 2000);
    double r10 = tcp_rate(&e, 1, 0, 7102, 2000);
    double r21 = tcp_rate(&e, 2, 1, 7103, 1000);
    printf("rate 20mbit between 0 (br0) and 1023 (br1): 0->1023 %.1f Mbit/s, 1023->0 %.1f "
           "Mbit/s; 1600->1023 (not covered) %.0f Mbit/s\n",
           r01, r10, r21);
    FL_ASSERT_MSG(r01 > 10 && r01 < 24, "0->1023 at 20mbit: %.1f Mbit/s", r01);
    FL_ASSERT_MSG(r10 > 10 && r10 < 24, "1023->0 at 20mbit: %.1f Mbit/s", r10);
    FL_ASSERT_MSG(r21 > 60, "1600->1023 is not covered: %.1f Mbit/s", r21);
    heal(&e, id);
    /* down, flapped up and down, healed: pinned neighbours across bridges */
    int h[] = {1023};
    drain(&e, 0);
    drain(&e, 1);
    id = apply(&e, FL_LINK_HOST, h, 1, NULL, 0, 0, 0, true);
    FL_ASSERT_EQ(udp_count(&e, 0, 1, 50), 0);
    FL_ASSERT_EQ(udp_count(&e, 1, 2, 50), 0);
    FL_ASSERT_EQ(udp_count(&e, 0, 2, 50), 50);
    send_d(&e, 0, 1, 20);
    send_d(&e, 1, 0, 20);
    char err[256];
    FL_ASSERT_EQ(fl_links_set_down(e.l, id, false, err, sizeof err), 0);
    FL_ASSERT_EQ(d_before_marker(&e, 0, 1, 'm'), 0);
    FL_ASSERT_EQ(d_before_marker(&e, 1, 0, 'm'), 0);
    FL_ASSERT_EQ(fl_links_set_down(e.l, id, true, err, sizeof err), 0);
    FL_ASSERT_EQ(udp_count(&e, 2, 1, 20), 0);
    heal(&e, id);
    FL_ASSERT(udp_reaches(&e, 0, 1, 2000));
    FL_ASSERT(udp_reaches(&e, 2, 1, 2000));
    env_down(&e);
}

FL_TEST_ROOT(netem_link, apply_rejects_bad_specs)
{
    struct env e;
    char err[256];
    env_up(&e, 2);
    int ab[] = {0, 1}, bad[] = {5000};
    int id;
    struct fl_link_spec s = {.scope = FL_LINK_HOST, .a = ab, .na = 1, .rate_bit = 1000000};
    FL_ASSERT_EQ(fl_links_apply(e.l, &s, &id, err, sizeof err), -EINVAL);
    s = (struct fl_link_spec){.scope = FL_LINK_BETWEEN, .a = ab, .na = 2, .down = true};
    FL_ASSERT_EQ(fl_links_apply(e.l, &s, &id, err, sizeof err), -EINVAL);
    s = (struct fl_link_spec){.scope = FL_LINK_BETWEEN, .a = bad, .na = 1, .loss_bp = 1};
    FL_ASSERT_EQ(fl_links_apply(e.l, &s, &id, err, sizeof err), -EINVAL);
    s = (struct fl_link_spec){.scope = FL_LINK_BETWEEN, .a = ab, .na = 2};
    FL_ASSERT_EQ(fl_links_apply(e.l, &s, &id, err, sizeof err), -EINVAL);
    env_down(&e);
}

/* Rules name ports, so a fault may cover hosts not attached (yet): a
 * thousand of them make one long rule that nft takes.  They are on two
 * bridges (fabric.h), so each fault has a second rule for the frames that
 * come through the trunk, by source MAC. */
FL_TEST_ROOT(netem_link, loss_rules_for_1000_hosts_apply)
{
    struct env e;
    char err[512] = "";
    env_up(&e, 2);
    static int many[1000];
    for (int i = 0; i < 1000; i++)
        many[i] = i;
    int id = apply(&e, FL_LINK_BETWEEN, many, 1000, NULL, 0, 2500, 0, false);
    int from[] = {0};
    int id2 = apply(&e, FL_LINK_ONEWAY, from, 1, many + 1, 999, 100, 0, false);
    char *out = NULL;
    fl_test_sh(&out, "nsenter -t %d -n nft list ruleset | grep -c '\"h999\"'",
               (int)fl_fabric_switch_pid(e.f));
    FL_ASSERT_STREQ(out, "4\n");
    free(out);
    fl_test_sh(&out, "nsenter -t %d -n nft list ruleset | grep -c 'iifname \"tr\\*\" ether saddr'",
               (int)fl_fabric_switch_pid(e.f));
    FL_ASSERT_STREQ(out, "2\n");
    free(out);
    FL_ASSERT_EQ(fl_links_heal(e.l, id, err, sizeof err), 0);
    FL_ASSERT_EQ(fl_links_heal(e.l, id2, err, sizeof err), 0);
    env_down(&e);
}
