/*
 * test_netem_emu.c: the userspace link emulator (netem/emu.h) through link faults
 * (link.h) on real namespaces: two bare hosts on a fabric, UDP datagrams
 * carrying a sequence number and their send time, sent from one host's
 * socket and read from the other's by this same process, so one-way delays
 * are measured on one clock.  Checks delay and its one-way scope, jitter
 * bounds with order kept, reordering, duplication, corruption caught by the
 * UDP checksum, Gilbert loss coming in runs, a heal releasing held frames at
 * once and removing its rules, and the `bypass` of a queue nobody reads.
 * Tolerances are wide: the machine is shared.  Needs root; skips otherwise.
 */
#include "harness/tests/fl_test.h"
#include "netem/emu.h"
#include "netem/fabric.h"
#include "netem/link.h"
#include "netem/nfq_rule.h"
#include "netem/tests/netns_util.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct env {
    struct fl_fabric *f;
    struct fl_links *l;
    pid_t host[2];
    int idx[2]; /* fabric index of each host (env_up: 0 and 1) */
    int udp[2];
};

struct dgram {
    uint32_t seq;
    uint64_t sent_ns;
};

/* CLOCK_MONOTONIC, which no one steps.  The kernel's receive timestamps
 * (SO_TIMESTAMPNS) are CLOCK_REALTIME: recv_stamped turns them into this
 * clock with the offset between the two read right after, so a delay is
 * measured from the send to the datagram's arrival in the socket, not to
 * when this process, maybe descheduled on a busy machine, got round to
 * reading it, and a step of the machine's wall clock meanwhile (CI once
 * saw a 50 ms delay "measured" 47.8 ms) changes nothing. */
static uint64_t clock_ns(clockid_t c)
{
    struct timespec ts;
    clock_gettime(c, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static uint64_t now_ns(void)
{
    return clock_ns(CLOCK_MONOTONIC);
}

/* One datagram without waiting: its kernel arrival time in *at_ns
 * (now when the kernel gave none).  Returns recvmsg's result. */
static ssize_t recv_stamped(int fd, struct dgram *d, uint64_t *at_ns)
{
    struct iovec iov = {.iov_base = d, .iov_len = sizeof *d};
    union {
        char buf[CMSG_SPACE(sizeof(struct timespec))];
        struct cmsghdr align;
    } c;
    struct msghdr m = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = c.buf, .msg_controllen = sizeof c.buf};
    ssize_t n = recvmsg(fd, &m, MSG_DONTWAIT);
    *at_ns = now_ns();
    if (n < 0)
        return n;
    for (struct cmsghdr *h = CMSG_FIRSTHDR(&m); h; h = CMSG_NXTHDR(&m, h))
        if (h->cmsg_level == SOL_SOCKET && h->cmsg_type == SCM_TIMESTAMPNS) {
            struct timespec ts;
            memcpy(&ts, CMSG_DATA(h), sizeof ts);
            uint64_t real = (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
            *at_ns = real - (clock_ns(CLOCK_REALTIME) - *at_ns);
        }
    return n;
}

static void drain(int fd)
{
    char b[64];
    while (recv(fd, b, sizeof b, MSG_DONTWAIT) >= 0)
        ;
}

/* The two hosts at fabric indices i0 and i1. */
static void env_up_at(struct env *e, int i0, int i1)
{
    char err[256] = "";
    fl_test_need_root();
    memset(e, 0, sizeof *e);
    e->idx[0] = i0;
    e->idx[1] = i1;
    int rc = fl_fabric_create(&e->f, "te", err, sizeof err);
    FL_REQUIRE_MSG(rc == 0, "fl_fabric_create: %d %s", rc, err);
    for (int i = 0; i < 2; i++) {
        e->host[i] = host_spawn();
        FL_REQUIRE(e->host[i] > 0);
        FL_REQUIRE_EQ(fl_fabric_attach(e->f, e->idx[i], e->host[i], err, sizeof err), 0);
    }
    rc = fl_fabric_commit(e->f, err, sizeof err);
    FL_REQUIRE_MSG(rc == 0, "commit: %d %s", rc, err);
    rc = fl_links_new(&e->l, e->f, err, sizeof err);
    FL_REQUIRE_MSG(rc == 0, "fl_links_new: %d %s", rc, err);
    for (int i = 0; i < 2; i++) {
        e->udp[i] = socket_in(e->host[i], SOCK_DGRAM);
        FL_REQUIRE(e->udp[i] >= 0);
        int big = 8 << 20;
        setsockopt(e->udp[i], SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof big);
        struct sockaddr_in a = sin_of(e->idx[i], 7000);
        FL_REQUIRE(bind(e->udp[i], (struct sockaddr *)&a, sizeof a) == 0);
        int on = 1;
        FL_REQUIRE(setsockopt(e->udp[i], SOL_SOCKET, SO_TIMESTAMPNS, &on, sizeof on) == 0);
    }
    /* both ways resolved (ARP) before any fault */
    for (int i = 0; i < 2; i++) {
        struct sockaddr_in a = sin_of(e->idx[1 - i], 7000);
        struct pollfd p = {.fd = e->udp[1 - i], .events = POLLIN};
        int ok = 0;
        for (int t = 0; t < 40 && !ok; t++) {
            sendto(e->udp[i], "x", 1, 0, (struct sockaddr *)&a, sizeof a);
            ok = poll(&p, 1, 50) == 1;
        }
        FL_REQUIRE(ok);
        drain(e->udp[1 - i]);
    }
}

static void env_up(struct env *e)
{
    env_up_at(e, 0, 1);
}

static void env_down(struct env *e)
{
    for (int i = 0; i < 2; i++)
        if (e->udp[i] >= 0)
            close(e->udp[i]);
    fl_links_free(e->l);
    fl_fabric_destroy(e->f);
    for (int i = 0; i < 2; i++)
        host_kill(e->host[i]);
}

static int apply_emu(struct env *e, enum fl_link_scope scope, const struct fl_emu_params *p)
{
    struct fl_link_spec s = {.scope = scope, .emu = p};
    if (scope == FL_LINK_ONEWAY) {
        s.a = &e->idx[0], s.na = 1, s.b = &e->idx[1], s.nb = 1;
    } else if (scope == FL_LINK_HOST) {
        s.a = &e->idx[0], s.na = 1;
    } else {
        s.a = e->idx, s.na = 2;
    }
    char err[512] = "";
    int id = 0;
    int rc = fl_links_apply(e->l, &s, &id, err, sizeof err);
    FL_REQUIRE_MSG(rc == 0, "fl_links_apply: %d %s", rc, err);
    return id;
}

/* Sends n datagrams from host `from` gap_us apart; collects what arrives at
 * the other host until quiet_ms pass without any.  seq[i], delay_us[i] per
 * arrival; returns the number of arrivals. */
static int send_recv(struct env *e, int from, int n, int gap_us, int quiet_ms, uint32_t *seq,
                     int64_t *delay_us, int max)
{
    int to = 1 - from, got = 0;
    struct sockaddr_in a = sin_of(e->idx[to], 7000);
    drain(e->udp[to]);
    struct dgram d;
    uint64_t at;
    for (int i = 0; i < n; i++) {
        d.seq = (uint32_t)i;
        d.sent_ns = now_ns();
        sendto(e->udp[from], &d, sizeof d, 0, (struct sockaddr *)&a, sizeof a);
        uint64_t until = now_ns() + (uint64_t)gap_us * 1000;
        do {
            while (got < max && recv_stamped(e->udp[to], &d, &at) == sizeof d) {
                seq[got] = d.seq;
                delay_us[got++] = (int64_t)(at - d.sent_ns) / 1000;
            }
        } while (now_ns() < until);
    }
    struct pollfd p = {.fd = e->udp[to], .events = POLLIN};
    while (got < max && poll(&p, 1, quiet_ms) == 1)
        while (got < max && recv_stamped(e->udp[to], &d, &at) == sizeof d) {
            seq[got] = d.seq;
            delay_us[got++] = (int64_t)(at - d.sent_ns) / 1000;
        }
    return got;
}

static void minmax(const int64_t *v, int n, int64_t *lo, int64_t *hi)
{
    *lo = INT64_MAX;
    *hi = INT64_MIN;
    for (int i = 0; i < n; i++) {
        if (v[i] < *lo)
            *lo = v[i];
        if (v[i] > *hi)
            *hi = v[i];
    }
}

#define MAXA_SORT 4096
static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* The median of v[0..n) (a copy sorted).  The upper bounds of these tests
 * are on it, not on the maximum: on a loaded machine a datagram's way from
 * the emulator's verdict to the receiving socket may wait for ksoftirqd, an
 * ordinary thread, and the slowest of fifty can be tens of milliseconds
 * late (the maximum is make bench's, netem_delay_*_max). */
static int64_t median(const int64_t *v, int n)
{
    static int64_t c[MAXA_SORT];
    int k = n < MAXA_SORT ? n : MAXA_SORT;
    memcpy(c, v, (size_t)k * sizeof *c);
    qsort(c, (size_t)k, sizeof *c, cmp_i64);
    return k ? c[k / 2] : 0;
}

static int out_of_order(const uint32_t *seq, int n)
{
    int k = 0;
    for (int i = 1; i < n; i++)
        if (seq[i] < seq[i - 1])
            k++;
    return k;
}

#define MAXA 4096
static uint32_t seqs[MAXA];
static int64_t dly[MAXA];

/* A 50 ms one-way delay from e's host 0 to its host 1 (what names them):
 * 50 datagrams each way; never early, in order, once (a doubled delay puts
 * the median past 100 ms), and nothing the other way. */
static void delay_50ms_one_way(struct env *e, const char *what)
{
    struct fl_emu_params p = {.delay_us = 50000, .seed = 1};
    apply_emu(e, FL_LINK_ONEWAY, &p);
    int n = send_recv(e, 0, 50, 2000, 300, seqs, dly, MAXA);
    int64_t lo, hi;
    minmax(dly, n, &lo, &hi);
    int64_t med = median(dly, n);
    printf("delay 50ms %s: %d of 50 arrived, one-way %.1f..%.1f ms, median %.1f ms\n", what, n,
           lo / 1e3, hi / 1e3, med / 1e3);
    FL_ASSERT_EQ(n, 50);
    FL_ASSERT_MSG(lo >= 50000 && med <= 65000, "one-way delay %ld..%ld us, median %ld us", (long)lo,
                  (long)hi, (long)med);
    FL_ASSERT_EQ(out_of_order(seqs, n), 0);
    n = send_recv(e, 1, 50, 2000, 300, seqs, dly, MAXA);
    minmax(dly, n, &lo, &hi);
    med = median(dly, n);
    printf("the other way (no fault): one-way %.2f..%.2f ms, median %.2f ms\n", lo / 1e3, hi / 1e3,
           med / 1e3);
    FL_ASSERT_EQ(n, 50);
    FL_ASSERT_MSG(med < 20000, "the other way took %ld us (median)", (long)med);
}

FL_TEST_ROOT_T(netem_emu, delay_50ms_one_way_only, 60)
{
    struct env e;
    env_up(&e);
    delay_50ms_one_way(&e, "a->b");
    env_down(&e);
}

/* Host 0 on br0, host 1023 on br1 (fabric.h): the frame crosses both
 * bridges, and the ip hooks see it at each; it is delayed once. */
FL_TEST_ROOT_T(netem_emu, delay_50ms_across_bridges_once, 60)
{
    struct env e;
    env_up_at(&e, 0, 1023);
    delay_50ms_one_way(&e, "0 (br0) -> 1023 (br1)");
    env_down(&e);
}

/* A whole host's outbound frames are taken where they leave its bridge,
 * here by the trunk toward br1: the duplicate, sent out of that port,
 * still reaches its host (the MAC comes from the address). */
FL_TEST_ROOT_T(netem_emu, duplicate_from_a_host_across_bridges, 60)
{
    struct env e;
    env_up_at(&e, 0, 1023);
    struct fl_emu_params p = {.duplicate_bp = 5000, .seed = 4};
    apply_emu(&e, FL_LINK_HOST, &p);
    int n = send_recv(&e, 0, 400, 200, 300, seqs, dly, MAXA);
    printf("duplicate 50%% of host 0 (br0) -> 1023 (br1): 400 sent, %d arrived\n", n);
    FL_ASSERT_MSG(n >= 400 + 140 && n <= 400 + 260, "%d arrivals for 400", n);
    n = send_recv(&e, 1, 400, 200, 300, seqs, dly, MAXA);
    printf("1023 -> 0: 400 sent, %d arrived\n", n);
    FL_ASSERT_MSG(n >= 400 + 140 && n <= 400 + 260, "%d arrivals for 400", n);
    env_down(&e);
}

FL_TEST_ROOT_T(netem_emu, jitter_within_bounds_order_kept, 60)
{
    struct env e;
    env_up(&e);
    struct fl_emu_params p = {.delay_us = 30000, .jitter_us = 10000, .seed = 2};
    apply_emu(&e, FL_LINK_BETWEEN, &p);
    /* 1 ms apart, far closer than the 20 ms jitter range: order is kept by the queue only */
    int n = send_recv(&e, 0, 200, 1000, 300, seqs, dly, MAXA);
    int64_t lo, hi;
    minmax(dly, n, &lo, &hi);
    int ooo = out_of_order(seqs, n);
    printf("delay 30ms jitter 10ms: %d of 200, one-way %.1f..%.1f ms, %d out of order\n", n,
           lo / 1e3, hi / 1e3, ooo);
    FL_ASSERT_EQ(n, 200);
    int64_t med = median(dly, n);
    FL_ASSERT_MSG(lo >= 20000 && med <= 45000, "one-way %ld..%ld us, median %ld us", (long)lo,
                  (long)hi, (long)med);
    FL_ASSERT_MSG(hi - lo >= 8000, "spread only %ld us", (long)(hi - lo));
    FL_ASSERT_EQ(ooo, 0);
    env_down(&e);
}

FL_TEST_ROOT_T(netem_emu, reorder_sends_some_ahead, 60)
{
    struct env e;
    env_up(&e);
    struct fl_emu_params p = {.delay_us = 20000, .reorder_bp = 3000, .seed = 3};
    int id = apply_emu(&e, FL_LINK_ONEWAY, &p);
    (void)id;
    int n = send_recv(&e, 0, 200, 1000, 300, seqs, dly, MAXA);
    int ooo = out_of_order(seqs, n), fast = 0;
    for (int i = 0; i < n; i++)
        fast += dly[i] < 10000;
    printf("delay 20ms reorder 30%%: %d of 200, %d at once, %d arrivals out of order\n", n, fast,
           ooo);
    FL_ASSERT_EQ(n, 200);
    FL_ASSERT_MSG(fast >= 30 && fast <= 90, "%d of 200 sent at once", fast);
    FL_ASSERT_MSG(ooo >= 10, "%d out of order", ooo);
    env_down(&e);
}

FL_TEST_ROOT_T(netem_emu, duplicate_half_arrive_twice, 60)
{
    struct env e;
    env_up(&e);
    struct fl_emu_params p = {.duplicate_bp = 5000, .seed = 4};
    apply_emu(&e, FL_LINK_ONEWAY, &p);
    int n = send_recv(&e, 0, 400, 200, 300, seqs, dly, MAXA);
    printf("duplicate 50%%: 400 sent, %d arrived (%d twice)\n", n, n - 400);
    FL_ASSERT_MSG(n >= 400 + 140 && n <= 400 + 260, "%d arrivals for 400", n);
    env_down(&e);
}

FL_TEST_ROOT_T(netem_emu, corrupt_all_udp_dropped_by_checksum, 60)
{
    struct env e;
    env_up(&e);
    struct fl_emu_params p = {.corrupt_bp = 10000, .seed = 5};
    int id = apply_emu(&e, FL_LINK_ONEWAY, &p);
    (void)id;
    int n = send_recv(&e, 0, 100, 200, 300, seqs, dly, MAXA);
    printf("corrupt 100%%: %d of 100 arrived\n", n);
    /* a flipped bit in the UDP length field can make the kernel drop it as
     * malformed before the checksum: either way nothing arrives */
    FL_ASSERT_EQ(n, 0);
    n = send_recv(&e, 1, 100, 200, 300, seqs, dly, MAXA);
    FL_ASSERT_EQ(n, 100);
    env_down(&e);
}

FL_TEST_ROOT_T(netem_emu, gilbert_loss_comes_in_runs, 60)
{
    struct env e;
    env_up(&e);
    struct fl_emu_params p = {.ge_loss_bp = 2000, .ge_burst = 5, .seed = 6};
    apply_emu(&e, FL_LINK_ONEWAY, &p);
    int n = send_recv(&e, 0, 2000, 100, 300, seqs, dly, MAXA);
    /* runs of missing sequence numbers */
    int runs = 0, lost = 0;
    uint32_t expect = 0;
    for (int i = 0; i < n; i++) {
        if (seqs[i] > expect) {
            runs++;
            lost += (int)(seqs[i] - expect);
        }
        expect = seqs[i] + 1;
    }
    if (expect < 2000) {
        runs++;
        lost += (int)(2000 - expect);
    }
    double mean = runs ? (double)lost / runs : 0;
    printf("loss 20%% burst 5: %d of 2000 lost in %d runs, mean run %.2f\n", lost, runs, mean);
    FL_ASSERT_MSG(lost >= 200 && lost <= 650, "%d of 2000 lost", lost);
    FL_ASSERT_MSG(mean >= 2.5, "mean run %.2f", mean);
    env_down(&e);
}

FL_TEST_ROOT_T(netem_emu, heal_releases_held_at_once_and_removes_rules, 60)
{
    struct env e;
    env_up(&e);
    struct fl_emu_params p = {.delay_us = 2000000, .seed = 7};
    int id = apply_emu(&e, FL_LINK_ONEWAY, &p);
    int n = send_recv(&e, 0, 10, 1000, 100, seqs, dly, MAXA);
    FL_ASSERT_EQ(n, 0); /* held: 2 s */
    char err[512] = "";
    uint64_t t0 = now_ns();
    FL_REQUIRE_EQ(fl_links_heal(e.l, id, err, sizeof err), 0);
    struct pollfd pf = {.fd = e.udp[1], .events = POLLIN};
    struct dgram d;
    int got = 0, in_order = 1;
    while (got < 10 && poll(&pf, 1, 1000) == 1)
        while (recv(e.udp[1], &d, sizeof d, MSG_DONTWAIT) == sizeof d)
            in_order &= d.seq == (uint32_t)got++;
    double ms = (double)(now_ns() - t0) / 1e6;
    printf("heal: %d held datagrams arrived %.1f ms after it\n", got, ms);
    FL_ASSERT_EQ(got, 10);
    FL_ASSERT(in_order); /* released in the order they were held */
    FL_ASSERT_MSG(ms < 500, "%.1f ms", ms);
    char *out = NULL;
    fl_test_sh(&out, "nsenter -t %d -n nft list ruleset", (int)fl_fabric_switch_pid(e.f));
    FL_ASSERT_MSG(out && !strstr(out, "chain q") && strstr(out, "chain fwd"), "ruleset: %s",
                  out ? out : "");
    free(out);
    env_down(&e);
}

/* The queue rule's `bypass`: frames queued to a queue that nobody reads
 * (an emulator gone) pass instead of being dropped. */
FL_TEST_ROOT_T(netem_emu, queue_without_reader_bypasses, 60)
{
    struct env e;
    env_up(&e);
    char err[512] = "";
    pid_t sw = fl_fabric_switch_pid(e.f);
    struct fl_nfq_match m = {.saddr = fl_fabric_addr(0), .daddr = fl_fabric_addr(1)};
    uint64_t h = 0;
    FL_REQUIRE_MSG(fl_nfq_rule_add(sw, 4242, &m, 1, &h, err, sizeof err) == 0, "%s", err);
    char *out = NULL;
    fl_test_sh(&out, "nsenter -t %d -n nft list table ip " FL_NFQ_TABLE " 2>&1", (int)sw);
    FL_ASSERT_MSG(out && strstr(out, "chain q4242"), "table: %s", out ? out : "");
    free(out);
    int n = send_recv(&e, 0, 50, 500, 200, seqs, dly, MAXA);
    FL_ASSERT_EQ(n, 50);
    FL_ASSERT_EQ(fl_nfq_rule_del(sw, 4242, h, err, sizeof err), 0);
    env_down(&e);
}

/* Healing one emulated fault leaves what another holds alone (no netfilter
 * hook goes away, so the kernel flushes no queue), and of two faults
 * covering the same packets the one applied first acts. */
FL_TEST_ROOT_T(netem_emu, heal_of_one_fault_keeps_anothers_held_packets, 60)
{
    struct env e;
    env_up(&e);
    struct fl_emu_params slow = {.delay_us = 300000, .seed = 8},
                         fast = {.delay_us = 100000, .seed = 9};
    apply_emu(&e, FL_LINK_ONEWAY, &slow);             /* a->b 300 ms, first */
    int both = apply_emu(&e, FL_LINK_BETWEEN, &fast); /* a<->b 100 ms */
    struct sockaddr_in to_b = sin_of(1, 7000);
    struct dgram d = {.seq = 1, .sent_ns = now_ns()};
    sendto(e.udp[0], &d, sizeof d, 0, (struct sockaddr *)&to_b, sizeof to_b);
    /* b->a goes by the second fault only */
    struct sockaddr_in to_a = sin_of(0, 7000);
    struct dgram r = {.seq = 2, .sent_ns = now_ns()};
    sendto(e.udp[1], &r, sizeof r, 0, (struct sockaddr *)&to_a, sizeof to_a);
    struct pollfd pa = {.fd = e.udp[0], .events = POLLIN};
    FL_REQUIRE_MSG(poll(&pa, 1, 2000) == 1, "b->a never arrived");
    FL_REQUIRE(recv(e.udp[0], &r, sizeof r, 0) == sizeof r);
    int64_t ba = (int64_t)(now_ns() - r.sent_ns) / 1000;
    FL_ASSERT_MSG(ba >= 100000 && ba < 250000, "b->a took %ld us", (long)ba);
    char err[512] = "";
    /* a->b is held by the first (300 ms): heal the second meanwhile */
    FL_REQUIRE_EQ(fl_links_heal(e.l, both, err, sizeof err), 0);
    struct pollfd pf = {.fd = e.udp[1], .events = POLLIN};
    FL_REQUIRE_MSG(poll(&pf, 1, 2000) == 1, "the held a->b datagram never arrived");
    FL_REQUIRE(recv(e.udp[1], &d, sizeof d, 0) == sizeof d);
    int64_t us = (int64_t)(now_ns() - d.sent_ns) / 1000;
    printf("a->b under 300ms (first) and 100ms (second, healed meanwhile): %.1f ms\n", us / 1e3);
    FL_ASSERT_MSG(us >= 300000 && us < 400000, "a->b took %ld us", (long)us);
    env_down(&e);
}

/* Healing a partition, a plain loss fault and a rate fault while the
 * emulator holds a packet leaves that packet alone: the fabric's chains are
 * regular chains jumped to from one base chain that stays for the run, so
 * no netfilter hook goes away and the kernel flushes no queue. */
FL_TEST_ROOT_T(netem_emu, heal_of_partition_loss_rate_keeps_held_packets, 60)
{
    struct env e;
    env_up(&e);
    struct fl_emu_params p = {.delay_us = 1000000, .seed = 11};
    apply_emu(&e, FL_LINK_ONEWAY, &p); /* a->b held 1 s */
    struct sockaddr_in to_b = sin_of(1, 7000);
    struct dgram d = {.seq = 1, .sent_ns = now_ns()};
    FL_REQUIRE(sendto(e.udp[0], &d, sizeof d, 0, (struct sockaddr *)&to_b, sizeof to_b) ==
               sizeof d);
    char err[512] = "";
    static const int a0[] = {0}, b1[] = {1};
    /* b->a loss and a->b rate: neither drops the held a->b packet by itself */
    struct fl_link_spec loss = {
        .scope = FL_LINK_ONEWAY, .a = b1, .na = 1, .b = a0, .nb = 1, .loss_bp = 5000};
    struct fl_link_spec rate = {
        .scope = FL_LINK_ONEWAY, .a = a0, .na = 1, .b = b1, .nb = 1, .rate_bit = 100000000};
    int lid = 0, rid = 0, pid = 0;
    FL_REQUIRE_MSG(fl_links_apply(e.l, &loss, &lid, err, sizeof err) == 0, "loss: %s", err);
    FL_REQUIRE_MSG(fl_links_apply(e.l, &rate, &rid, err, sizeof err) == 0, "rate: %s", err);
    const int *groups[] = {a0, b1};
    size_t sizes[] = {1, 1};
    FL_REQUIRE_MSG(fl_fabric_partition(e.f, groups, sizes, 2, &pid, err, sizeof err) == 0, "%s",
                   err);
    FL_REQUIRE_MSG(fl_links_heal(e.l, lid, err, sizeof err) == 0, "heal loss: %s", err);
    FL_REQUIRE_MSG(fl_links_heal(e.l, rid, err, sizeof err) == 0, "heal rate: %s", err);
    FL_REQUIRE_MSG(fl_fabric_heal(e.f, pid, err, sizeof err) == 0, "heal partition: %s", err);
    uint64_t healed_us = (now_ns() - d.sent_ns) / 1000;
    FL_REQUIRE_MSG(healed_us < 900000, "the heals took %lu us: the packet was released already",
                   (unsigned long)healed_us);
    struct pollfd pf = {.fd = e.udp[1], .events = POLLIN};
    FL_ASSERT_MSG(poll(&pf, 1, 3000) == 1, "the held a->b datagram never arrived");
    if (recv(e.udp[1], &d, sizeof d, MSG_DONTWAIT) == sizeof d) {
        int64_t us = (int64_t)(now_ns() - d.sent_ns) / 1000;
        printf("held 1 s across three heals: arrived after %.1f ms\n", us / 1e3);
        FL_ASSERT_MSG(us >= 1000000 && us < 1500000, "a->b took %ld us", (long)us);
    }
    /* the fabric's table: one base chain, no p<id> left */
    char *out = NULL;
    fl_test_sh(&out, "nsenter -t %d -n nft list table bridge " FL_FABRIC_NFT_TABLE,
               (int)fl_fabric_switch_pid(e.f));
    FL_ASSERT_MSG(out && !strstr(out, "chain p") && !strstr(out, "jump"), "table: %s",
                  out ? out : "");
    free(out);
    env_down(&e);
}
