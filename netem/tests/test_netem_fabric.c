/*
 * test_netem_fabric.c: the fabric on real namespaces.  Each test clones small
 * "host" processes into fresh network namespaces (dying with the test via
 * PDEATHSIG), plugs them into a fabric and checks reachability by address
 * from inside the hosts' namespaces: TCP connect, partitions both ways and
 * one way, heal, detach and re-attach of a restarted host, destroy, and 64
 * hosts at once.  Sockets are made inside a host netns by setns() around
 * socket() and then used from the test's own netns (a socket stays in the
 * netns it was created in).  Needs root; skips otherwise.
 */
#include "harness/tests/fl_test.h"
#include "netem/fabric.h"
#include "netem/tests/netns_util.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define TIMEOUT_MS 300

/* TCP listener of host (pid, idx) on port; connections complete into the
 * backlog without accept(). */
static int listen_in(pid_t pid, int idx, int port)
{
    int s = socket_in(pid, SOCK_STREAM);
    if (s < 0)
        return -1;
    int one = 1;
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = sin_of(idx, port);
    if (bind(s, (struct sockaddr *)&a, sizeof a) < 0 || listen(s, 64) < 0) {
        close(s);
        return -1;
    }
    return s;
}

/* Connects from the netns of pid to host to_idx:port.  0 on success,
 * -ETIMEDOUT when nothing answered within ms, else -errno (ECONNREFUSED). */
static int connect_from(pid_t pid, int to_idx, int port, int ms)
{
    int s = socket_in(pid, SOCK_STREAM | SOCK_NONBLOCK);
    if (s < 0)
        return -EBADF;
    struct sockaddr_in a = sin_of(to_idx, port);
    int rc = connect(s, (struct sockaddr *)&a, sizeof a);
    if (rc == 0) {
        close(s);
        return 0;
    }
    if (errno != EINPROGRESS) {
        rc = -errno;
        close(s);
        return rc;
    }
    struct pollfd p = {.fd = s, .events = POLLOUT};
    rc = poll(&p, 1, ms);
    if (rc == 0) {
        close(s);
        return -ETIMEDOUT;
    }
    int soerr = 0;
    socklen_t sl = sizeof soerr;
    getsockopt(s, SOL_SOCKET, SO_ERROR, &soerr, &sl);
    close(s);
    return -soerr;
}

/* UDP: bound socket of host (pid, idx). */
static int udp_in(pid_t pid, int idx, int port)
{
    int s = socket_in(pid, SOCK_DGRAM | SOCK_NONBLOCK);
    if (s < 0)
        return -1;
    struct sockaddr_in a = sin_of(idx, port);
    if (bind(s, (struct sockaddr *)&a, sizeof a) < 0) {
        close(s);
        return -1;
    }
    return s;
}

/* Sends one datagram from socket `from` to host to_idx:port and reports
 * whether socket `to` received it within ms (retrying once a 100 ms, so
 * that a first datagram lost while ARP resolves does not count). */
static bool udp_reaches(int from, int to, int to_idx, int port, int ms)
{
    struct sockaddr_in a = sin_of(to_idx, port);
    for (int waited = 0; waited < ms; waited += 100) {
        sendto(from, "x", 1, 0, (struct sockaddr *)&a, sizeof a);
        struct pollfd p = {.fd = to, .events = POLLIN};
        if (poll(&p, 1, 100) == 1) {
            char c;
            while (recv(to, &c, 1, 0) == 1)
                ;
            return true;
        }
    }
    return false;
}

static char *root_links(void)
{
    char *out = NULL;
    fl_test_sh(&out, "ip -o link | cut -d: -f2 | sort");
    return out;
}

struct env {
    struct fl_fabric *f;
    pid_t host[64];
    int n;
};

static void env_up(struct env *e, int n)
{
    char err[256] = "";
    fl_test_need_root();
    e->n = n;
    int rc = fl_fabric_create(&e->f, "t", err, sizeof err);
    FL_REQUIRE_MSG(rc == 0, "fl_fabric_create: %d %s", rc, err);
    for (int i = 0; i < n; i++) {
        e->host[i] = host_spawn();
        FL_REQUIRE(e->host[i] > 0);
        rc = fl_fabric_attach(e->f, i, e->host[i], err, sizeof err);
        FL_REQUIRE_MSG(rc == 0, "attach %d: %s", i, err);
    }
    rc = fl_fabric_commit(e->f, err, sizeof err);
    FL_REQUIRE_MSG(rc == 0, "commit: %d %s", rc, err);
}

static void env_down(struct env *e)
{
    fl_fabric_destroy(e->f);
    e->f = NULL;
    for (int i = 0; i < e->n; i++)
        host_kill(e->host[i]);
}

FL_TEST(netem_fabric, addr_is_rfc2544_host_idx_plus_one)
{
    char b[16];
    FL_ASSERT_STREQ(fl_fabric_addr_str(0, b, sizeof b), "198.18.0.1");
    FL_ASSERT_STREQ(fl_fabric_addr_str(254, b, sizeof b), "198.18.0.255");
    FL_ASSERT_STREQ(fl_fabric_addr_str(255, b, sizeof b), "198.18.1.0");
    FL_ASSERT_STREQ(fl_fabric_addr_str(1022, b, sizeof b), "198.18.3.255");
    FL_ASSERT_EQ(fl_fabric_addr(-1), 0);
    FL_ASSERT_EQ(fl_fabric_addr(FL_FABRIC_MAX_HOSTS), 0);
    FL_ASSERT_EQ(ntohl(fl_fabric_addr(3)), 0xC6120004u);
    FL_ASSERT_STREQ(fl_fabric_port_name(17, b, sizeof b), "h17");
    unsigned char mac[6], want[6] = {0x02, 0x46, 0x4c, 0x00, 0x01, 0x02};
    fl_fabric_mac(0x102, mac);
    FL_ASSERT_MEMEQ(mac, want, 6);
}

FL_TEST_ROOT(netem_fabric, connect_succeeds_between_attached_hosts)
{
    struct env e = {0};
    env_up(&e, 3);
    int l = listen_in(e.host[1], 1, 7000);
    FL_REQUIRE(l >= 0);
    FL_ASSERT_EQ(connect_from(e.host[0], 1, 7000, 2000), 0);
    FL_ASSERT_EQ(connect_from(e.host[2], 1, 7000, 2000), 0);
    /* A closed port answers with a reset: reachability without a listener. */
    FL_ASSERT_EQ(connect_from(e.host[1], 0, 7001, 2000), -ECONNREFUSED);
    close(l);
    /* No IPv6 link-local addresses on eth0 nor on the switch's ports and
     * bridge (no DAD/RS/MLD floods); lo keeps ::1. */
    char *out = NULL;
    fl_test_sh(
        &out,
        "cat /proc/%d/net/if_inet6 /proc/%d/net/if_inet6 | awk '{print $6}' | sort | tr '\\n' ' '",
        (int)e.host[0], (int)fl_fabric_switch_pid(e.f));
    FL_ASSERT_STREQ(out, "lo ");
    free(out);
    /* The host's view: eth0 with its address and MAC, lo up. */
    fl_test_sh(&out, "nsenter -t %d -n ip -o -4 addr show dev eth0 | awk '{print $4}'",
               (int)e.host[2]);
    FL_ASSERT_STREQ(out, "198.18.0.3/15\n");
    free(out);
    fl_test_sh(&out, "nsenter -t %d -n ip -o link show eth0 | grep -o 'link/ether [0-9a-f:]*'",
               (int)e.host[2]);
    FL_ASSERT_STREQ(out, "link/ether 02:46:4c:00:00:02\n");
    free(out);
    env_down(&e);
}

FL_TEST_ROOT(netem_fabric, partition_drops_both_ways_until_heal)
{
    struct env e = {0};
    char err[256] = "";
    env_up(&e, 3);
    int lb = listen_in(e.host[1], 1, 7000);
    int la = listen_in(e.host[0], 0, 7000);
    FL_REQUIRE(la >= 0 && lb >= 0);
    FL_REQUIRE_EQ(connect_from(e.host[0], 1, 7000, 2000), 0);

    int ga[] = {0}, gb[] = {1};
    const int *groups[] = {ga, gb};
    size_t sizes[] = {1, 1};
    int id = 0;
    int rc = fl_fabric_partition(e.f, groups, sizes, 2, &id, err, sizeof err);
    FL_REQUIRE_MSG(rc == 0, "partition: %d %s", rc, err);
    FL_ASSERT_GT(id, 0);
    FL_ASSERT_EQ(connect_from(e.host[0], 1, 7000, TIMEOUT_MS), -ETIMEDOUT);
    FL_ASSERT_EQ(connect_from(e.host[1], 0, 7000, TIMEOUT_MS), -ETIMEDOUT);
    /* Host 2 is in no group: unaffected. */
    FL_ASSERT_EQ(connect_from(e.host[2], 1, 7000, 2000), 0);
    FL_ASSERT_EQ(connect_from(e.host[2], 0, 7000, 2000), 0);

    rc = fl_fabric_heal(e.f, id, err, sizeof err);
    FL_REQUIRE_MSG(rc == 0, "heal: %d %s", rc, err);
    FL_ASSERT_EQ(connect_from(e.host[0], 1, 7000, 2000), 0);
    FL_ASSERT_EQ(connect_from(e.host[1], 0, 7000, 2000), 0);
    FL_ASSERT_EQ(fl_fabric_heal(e.f, id, err, sizeof err), -ENOENT);
    close(la);
    close(lb);
    env_down(&e);
}

/* Hosts on three bridges (fabric.h: 0 and 1 on br0, 1023 on br1, 1600 on
 * br3): a partition and a one-way block act as on one bridge, also between
 * two leaf bridges (through br0), and a bridge is made once. */
FL_TEST_ROOT(netem_fabric, partition_and_block_across_bridges)
{
    fl_test_need_root();
    enum { N = 4 };
    const int idx[N] = {0, 1, 1023, 1600};
    pid_t host[N];
    int lis[N], udp[N];
    char err[256] = "";
    struct fl_fabric *f = NULL;
    FL_REQUIRE_EQ(fl_fabric_create(&f, "tx", err, sizeof err), 0);
    for (int i = 0; i < N; i++) {
        host[i] = host_spawn();
        FL_REQUIRE(host[i] > 0);
        FL_REQUIRE_EQ(fl_fabric_attach(f, idx[i], host[i], err, sizeof err), 0);
    }
    int rc = fl_fabric_commit(f, err, sizeof err);
    FL_REQUIRE_MSG(rc == 0, "commit: %d %s", rc, err);
    char *out = NULL;
    fl_test_sh(&out,
               "nsenter -t %d -n ip -o link show type bridge | cut -d: -f2 | tr -d ' ' | sort",
               (int)fl_fabric_switch_pid(f));
    FL_ASSERT_STREQ(out, "br0\nbr1\nbr3\n");
    free(out);
    fl_test_sh(&out, "nsenter -t %d -n ip -o link show master br1 | cut -d: -f2 | tr -d ' ' | sort",
               (int)fl_fabric_switch_pid(f));
    FL_ASSERT_STREQ(out, "h1023@if2\ntr1-br1@tr1-br0\n");
    free(out);
    for (int i = 0; i < N; i++) {
        lis[i] = listen_in(host[i], idx[i], 7000);
        udp[i] = udp_in(host[i], idx[i], 9000);
        FL_REQUIRE(lis[i] >= 0 && udp[i] >= 0);
    }
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++)
            if (i != j)
                FL_ASSERT_EQ(connect_from(host[i], idx[j], 7000, 2000), 0);

    /* {0, 1600} | {1023}; 1 in no group */
    int ga[] = {0, 1600}, gb[] = {1023};
    const int *groups[] = {ga, gb};
    size_t sizes[] = {2, 1};
    int id = 0;
    rc = fl_fabric_partition(f, groups, sizes, 2, &id, err, sizeof err);
    FL_REQUIRE_MSG(rc == 0, "partition: %d %s", rc, err);
    FL_ASSERT_EQ(connect_from(host[0], 1023, 7000, TIMEOUT_MS), -ETIMEDOUT);
    FL_ASSERT_EQ(connect_from(host[2], 0, 7000, TIMEOUT_MS), -ETIMEDOUT);
    FL_ASSERT_EQ(connect_from(host[3], 1023, 7000, TIMEOUT_MS), -ETIMEDOUT);
    FL_ASSERT_EQ(connect_from(host[2], 1600, 7000, TIMEOUT_MS), -ETIMEDOUT);
    FL_ASSERT_EQ(connect_from(host[0], 1600, 7000, 2000), 0);
    FL_ASSERT_EQ(connect_from(host[1], 1023, 7000, 2000), 0);
    FL_ASSERT_EQ(connect_from(host[2], 1, 7000, 2000), 0);
    FL_ASSERT(!udp_reaches(udp[3], udp[2], 1023, 9000, TIMEOUT_MS));
    FL_REQUIRE_EQ(fl_fabric_heal(f, id, err, sizeof err), 0);
    FL_ASSERT_EQ(connect_from(host[0], 1023, 7000, 2000), 0);
    FL_ASSERT_EQ(connect_from(host[3], 1023, 7000, 2000), 0);

    /* one way, leaf to leaf: 1600 -> 1023 blocked, 1023 -> 1600 passes */
    int from[] = {1600}, to[] = {1023};
    rc = fl_fabric_block(f, from, 1, to, 1, &id, err, sizeof err);
    FL_REQUIRE_MSG(rc == 0, "block: %d %s", rc, err);
    FL_ASSERT(udp_reaches(udp[2], udp[3], 1600, 9000, 2000));
    FL_ASSERT(!udp_reaches(udp[3], udp[2], 1023, 9000, TIMEOUT_MS));
    FL_ASSERT(udp_reaches(udp[0], udp[2], 1023, 9000, 2000));
    FL_REQUIRE_EQ(fl_fabric_heal(f, id, err, sizeof err), 0);
    FL_ASSERT(udp_reaches(udp[3], udp[2], 1023, 9000, 2000));

    /* a restarted host on a leaf bridge plugs into the same bridge again */
    host_kill(host[2]);
    host[2] = host_spawn();
    FL_REQUIRE(host[2] > 0);
    close(lis[2]);
    FL_REQUIRE_EQ(fl_fabric_attach(f, 1023, host[2], err, sizeof err), 0);
    rc = fl_fabric_commit(f, err, sizeof err);
    FL_REQUIRE_MSG(rc == 0, "commit again: %d %s", rc, err);
    lis[2] = listen_in(host[2], 1023, 7000);
    FL_REQUIRE(lis[2] >= 0);
    FL_ASSERT_EQ(connect_from(host[0], 1023, 7000, 2000), 0);
    for (int i = 0; i < N; i++) {
        close(lis[i]);
        close(udp[i]);
    }
    fl_fabric_destroy(f);
    for (int i = 0; i < N; i++)
        host_kill(host[i]);
}

FL_TEST_ROOT(netem_fabric, partition_heal_removes_only_its_rules)
{
    struct env e = {0};
    char err[256] = "";
    env_up(&e, 3);
    int l1 = listen_in(e.host[1], 1, 7000), l2 = listen_in(e.host[2], 2, 7000);
    FL_REQUIRE(l1 >= 0 && l2 >= 0);
    int g0[] = {0}, g1[] = {1}, g2[] = {2};
    const int *p1[] = {g0, g1}, *p2[] = {g0, g2};
    size_t sizes[] = {1, 1};
    int id1 = 0, id2 = 0;
    FL_REQUIRE_EQ(fl_fabric_partition(e.f, p1, sizes, 2, &id1, err, sizeof err), 0);
    FL_REQUIRE_EQ(fl_fabric_partition(e.f, p2, sizes, 2, &id2, err, sizeof err), 0);
    FL_ASSERT_NE(id1, id2);
    FL_REQUIRE_EQ(fl_fabric_heal(e.f, id1, err, sizeof err), 0);
    FL_ASSERT_EQ(connect_from(e.host[0], 1, 7000, 2000), 0);
    FL_ASSERT_EQ(connect_from(e.host[0], 2, 7000, TIMEOUT_MS), -ETIMEDOUT);
    close(l1);
    close(l2);
    env_down(&e);
}

FL_TEST_ROOT(netem_fabric, partition_rejects_bad_groups)
{
    struct env e = {0};
    char err[256] = "";
    env_up(&e, 1);
    int g0[] = {0, 1}, g1[] = {1};
    const int *groups[] = {g0, g1};
    size_t sizes[] = {2, 1};
    int id = 0;
    FL_ASSERT_EQ(fl_fabric_partition(e.f, groups, sizes, 2, &id, err, sizeof err), -EINVAL);
    FL_ASSERT_CONTAINS(err, "host 1 is named twice");
    FL_ASSERT_EQ(fl_fabric_partition(e.f, groups, sizes, 1, &id, err, sizeof err), -EINVAL);
    FL_ASSERT_EQ(fl_fabric_block(e.f, g0, 0, g1, 1, &id, err, sizeof err), -EINVAL);
    FL_ASSERT_EQ(fl_fabric_heal(e.f, 42, err, sizeof err), -ENOENT);
    env_down(&e);
}

FL_TEST_ROOT(netem_fabric, block_drops_one_direction_only)
{
    struct env e = {0};
    char err[256] = "";
    env_up(&e, 2);
    int ua = udp_in(e.host[0], 0, 9000), ub = udp_in(e.host[1], 1, 9000);
    FL_REQUIRE(ua >= 0 && ub >= 0);
    FL_ASSERT(udp_reaches(ua, ub, 1, 9000, 2000));
    int from[] = {0}, to[] = {1};
    int id = 0;
    int rc = fl_fabric_block(e.f, from, 1, to, 1, &id, err, sizeof err);
    FL_REQUIRE_MSG(rc == 0, "block: %d %s", rc, err);
    FL_ASSERT(udp_reaches(ub, ua, 0, 9000, 2000));
    FL_ASSERT(!udp_reaches(ua, ub, 1, 9000, TIMEOUT_MS));
    FL_REQUIRE_EQ(fl_fabric_heal(e.f, id, err, sizeof err), 0);
    FL_ASSERT(udp_reaches(ua, ub, 1, 9000, 2000));
    close(ua);
    close(ub);
    env_down(&e);
}

FL_TEST_ROOT(netem_fabric, block_holds_with_cold_arp_cache)
{
    /* The reverse direction works even when neither side has resolved the
     * other yet (ARP passes; only IP from `from` to `to` is dropped). */
    struct env e = {0};
    char err[256] = "";
    env_up(&e, 2);
    int from[] = {0}, to[] = {1};
    int id = 0;
    FL_REQUIRE_EQ(fl_fabric_block(e.f, from, 1, to, 1, &id, err, sizeof err), 0);
    int ua = udp_in(e.host[0], 0, 9000), ub = udp_in(e.host[1], 1, 9000);
    FL_REQUIRE(ua >= 0 && ub >= 0);
    FL_ASSERT(udp_reaches(ub, ua, 0, 9000, 2000));
    FL_ASSERT(!udp_reaches(ua, ub, 1, 9000, TIMEOUT_MS));
    close(ua);
    close(ub);
    env_down(&e);
}

FL_TEST_ROOT(netem_fabric, reattach_works_for_restarted_host)
{
    struct env e = {0};
    char err[256] = "";
    env_up(&e, 2);
    FL_ASSERT_EQ(connect_from(e.host[0], 1, 7001, 2000), -ECONNREFUSED);

    /* Host 1 crashes: its netns dies, the kernel removes its pair (lazily). */
    host_kill(e.host[1]);
    e.host[1] = host_spawn();
    FL_REQUIRE(e.host[1] > 0);
    int rc = fl_fabric_attach(e.f, 1, e.host[1], err, sizeof err);
    FL_REQUIRE_EQ(rc, 0);
    rc = fl_fabric_commit(e.f, err, sizeof err);
    FL_REQUIRE_MSG(rc == 0, "re-attach commit: %d %s", rc, err);
    FL_ASSERT_EQ(connect_from(e.host[0], 1, 7001, 2000), -ECONNREFUSED);

    /* Explicit detach, then a new process again on the same idx. */
    rc = fl_fabric_detach(e.f, 1, err, sizeof err);
    FL_REQUIRE_MSG(rc == 0, "detach: %d %s", rc, err);
    FL_ASSERT_EQ(connect_from(e.host[0], 1, 7001, TIMEOUT_MS), -ETIMEDOUT);
    FL_ASSERT_EQ(fl_fabric_detach(e.f, 1, err, sizeof err), 0); /* idempotent */
    host_kill(e.host[1]);
    e.host[1] = host_spawn();
    FL_REQUIRE_EQ(fl_fabric_attach(e.f, 1, e.host[1], err, sizeof err), 0);
    rc = fl_fabric_commit(e.f, err, sizeof err);
    FL_REQUIRE_MSG(rc == 0, "attach after detach: %d %s", rc, err);
    FL_ASSERT_EQ(connect_from(e.host[0], 1, 7001, 2000), -ECONNREFUSED);

    /* Re-attach while the old host is still alive: the pair is replaced. */
    pid_t old = e.host[1];
    e.host[1] = host_spawn();
    FL_REQUIRE_EQ(fl_fabric_attach(e.f, 1, e.host[1], err, sizeof err), 0);
    rc = fl_fabric_commit(e.f, err, sizeof err);
    FL_REQUIRE_MSG(rc == 0, "replace commit: %d %s", rc, err);
    FL_ASSERT_EQ(connect_from(e.host[0], 1, 7001, 2000), -ECONNREFUSED);
    host_kill(old);
    env_down(&e);
}

/* The permanent neighbour entries in host pid's netns, as "addr mac" lines. */
static char *permanent_neighbours(pid_t pid)
{
    char *out = NULL;
    fl_test_sh(&out,
               "nsenter -t %d -n ip -4 neigh show nud permanent dev eth0 | "
               "awk '{print $1, $3}' | sort",
               (int)pid);
    return out;
}

/* Pinning host 1: every host has a permanent entry for it, it one for each
 * of them (address -> fl_fabric_mac), and a host attached again (a fresh
 * netns) gets its entries back at commit. */
FL_TEST_ROOT(netem_fabric, pinned_neighbours_stay_across_reattach)
{
    struct env e = {0};
    char err[256] = "";
    env_up(&e, 3);
    int rc = fl_fabric_pin_neighbours(e.f, 1, err, sizeof err);
    FL_REQUIRE_MSG(rc == 0, "pin: %d %s", rc, err);
    FL_ASSERT_EQ(fl_fabric_pin_neighbours(e.f, 1, err, sizeof err), 0); /* again: nothing */
    char *n0 = permanent_neighbours(e.host[0]), *n1 = permanent_neighbours(e.host[1]);
    FL_ASSERT_STREQ(n0, "198.18.0.2 02:46:4c:00:00:01\n");
    FL_ASSERT_STREQ(n1, "198.18.0.1 02:46:4c:00:00:00\n198.18.0.3 02:46:4c:00:00:02\n");
    free(n0);
    free(n1);
    for (int i = 1; i <= 2; i++) { /* both restart: a fresh netns each */
        host_kill(e.host[i]);
        e.host[i] = host_spawn();
        FL_REQUIRE(e.host[i] > 0);
        FL_REQUIRE_EQ(fl_fabric_attach(e.f, i, e.host[i], err, sizeof err), 0);
    }
    rc = fl_fabric_commit(e.f, err, sizeof err);
    FL_REQUIRE_MSG(rc == 0, "commit: %d %s", rc, err);
    n1 = permanent_neighbours(e.host[1]);
    char *n2 = permanent_neighbours(e.host[2]);
    FL_ASSERT_STREQ(n1, "198.18.0.1 02:46:4c:00:00:00\n198.18.0.3 02:46:4c:00:00:02\n");
    FL_ASSERT_STREQ(n2, "198.18.0.2 02:46:4c:00:00:01\n");
    free(n1);
    free(n2);
    env_down(&e);
}

FL_TEST_ROOT(netem_fabric, partition_holds_across_host_restart)
{
    /* Rules match port names, so a restarted host is still cut off. */
    struct env e = {0};
    char err[256] = "";
    env_up(&e, 2);
    int g0[] = {0}, g1[] = {1};
    const int *groups[] = {g0, g1};
    size_t sizes[] = {1, 1};
    int id = 0;
    FL_REQUIRE_EQ(fl_fabric_partition(e.f, groups, sizes, 2, &id, err, sizeof err), 0);
    host_kill(e.host[1]);
    e.host[1] = host_spawn();
    FL_REQUIRE(e.host[1] > 0);
    FL_REQUIRE_EQ(fl_fabric_attach(e.f, 1, e.host[1], err, sizeof err), 0);
    FL_REQUIRE_EQ(fl_fabric_commit(e.f, err, sizeof err), 0);
    FL_ASSERT_EQ(connect_from(e.host[0], 1, 7001, TIMEOUT_MS), -ETIMEDOUT);
    FL_REQUIRE_EQ(fl_fabric_heal(e.f, id, err, sizeof err), 0);
    FL_ASSERT_EQ(connect_from(e.host[0], 1, 7001, 2000), -ECONNREFUSED);
    env_down(&e);
}

FL_TEST_ROOT(netem_fabric, commit_error_names_host_interface_and_call)
{
    struct env e = {0};
    char err[256] = "";
    env_up(&e, 1);
    /* A host that already has an eth0 at our ifindex: the create fails. */
    pid_t h = host_spawn();
    FL_REQUIRE(h > 0);
    FL_REQUIRE_EQ(fl_fabric_attach(e.f, 5, h, err, sizeof err), 0);
    FL_REQUIRE_EQ(fl_fabric_commit(e.f, err, sizeof err), 0);
    FL_REQUIRE_EQ(fl_fabric_attach(e.f, 6, h, err, sizeof err), 0);
    int rc = fl_fabric_commit(e.f, err, sizeof err);
    FL_ASSERT_EQ(rc, -EEXIST);
    char want[96];
    snprintf(want, sizeof want, "RTM_NEWLINK veth h6/eth0 in netns of pid %d", (int)h);
    FL_ASSERT_CONTAINS(err, want);
    FL_ASSERT_CONTAINS(err, "File exists");
    /* A vanished pid. */
    FL_REQUIRE_EQ(fl_fabric_attach(e.f, 7, 999999, err, sizeof err), 0);
    FL_ASSERT_EQ(fl_fabric_commit(e.f, err, sizeof err), -ESRCH);
    FL_ASSERT_CONTAINS(err, "host 7");
    /* The harness's own netns is refused. */
    FL_REQUIRE_EQ(fl_fabric_attach(e.f, 8, getpid(), err, sizeof err), 0);
    FL_ASSERT_EQ(fl_fabric_commit(e.f, err, sizeof err), -EINVAL);
    FL_ASSERT_CONTAINS(err, "harness's network namespace");
    /* Host 5 still works after the failures. */
    FL_ASSERT_EQ(connect_from(e.host[0], 5, 7001, 2000), -ECONNREFUSED);
    host_kill(h);
    env_down(&e);
}

static int count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return -1;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)))
        n += de->d_name[0] != '.';
    closedir(d);
    return n - 1; /* the directory's own fd */
}

FL_TEST_ROOT(netem_fabric, destroy_leaves_nothing_in_root_netns)
{
    fl_test_need_root();
    char *before = root_links();
    char *nft_before = NULL, *nft_after = NULL;
    fl_test_sh(&nft_before, "nft list tables");
    int fds_before = count_fds();
    struct env e = {0};
    env_up(&e, 3);
    int g0[] = {0}, g1[] = {1, 2};
    const int *groups[] = {g0, g1};
    size_t sizes[] = {1, 2};
    int id;
    char err[256];
    FL_REQUIRE_EQ(fl_fabric_partition(e.f, groups, sizes, 2, &id, err, sizeof err), 0);
    char *during = root_links();
    pid_t holder = fl_fabric_switch_pid(e.f);
    FL_REQUIRE(holder > 0);
    FL_ASSERT_EQ(kill(holder, 0), 0);
    env_down(&e);
    FL_ASSERT_EQ(kill(holder, 0), -1); /* reaped: no such process */
    char *after = root_links();
    FL_ASSERT_STREQ(during, before);
    FL_ASSERT_STREQ(after, before);
    fl_test_sh(&nft_after, "nft list tables");
    FL_ASSERT_STREQ(nft_after, nft_before);
    FL_ASSERT_EQ(count_fds(), fds_before); /* sockets, pidfd, nft context closed */
    free(nft_before);
    free(nft_after);
    free(before);
    free(during);
    free(after);
}

FL_TEST_ROOT(netem_fabric, holder_dies_with_its_creator)
{
    fl_test_need_root();
    int p[2];
    FL_REQUIRE_EQ(pipe(p), 0);
    pid_t c = fork();
    if (c == 0) {
        struct fl_fabric *f;
        if (fl_fabric_create(&f, "orphan", NULL, 0) != 0)
            _exit(1);
        pid_t h = fl_fabric_switch_pid(f);
        if (write(p[1], &h, sizeof h) != sizeof h)
            _exit(1);
        _exit(0); /* no destroy: PDEATHSIG must clean up */
    }
    close(p[1]);
    pid_t holder = 0;
    FL_REQUIRE_EQ(read(p[0], &holder, sizeof holder), (ssize_t)sizeof holder);
    int st;
    FL_REQUIRE_EQ(waitpid(c, &st, 0), c);
    /* The holder is reparented (to us if we are a subreaper, else init)
     * and must be gone shortly. */
    int alive = 1;
    for (int i = 0; i < 200 && alive; i++) {
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/stat", (int)holder);
        FILE *fp = fopen(path, "r");
        if (!fp) {
            alive = 0;
            break;
        }
        char line[512] = "";
        char *ok = fgets(line, sizeof line, fp);
        fclose(fp);
        char *rp = ok ? strrchr(line, ')') : NULL; /* comm may hold spaces */
        if (rp && rp[1] == ' ' && rp[2] == 'Z') {
            alive = 0;
            break;
        }
        struct timespec ts = {0, 5000000};
        nanosleep(&ts, NULL);
    }
    FL_ASSERT_EQ(alive, 0);
    waitpid(holder, NULL, __WALL | WNOHANG);
}

FL_TEST_ROOT_T(netem_fabric, scale_64_hosts_all_reachable, 120)
{
    struct env e = {0};
    env_up(&e, 64);
    /* First contact right after commit: a port not yet forwarding would
     * cost a 1 s ARP or SYN retransmission. */
    for (int i = 1; i < 64; i++) {
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        int rc = connect_from(e.host[0], i, 7001, 2000);
        clock_gettime(CLOCK_MONOTONIC, &b);
        long ms = (b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000;
        FL_ASSERT_MSG(rc == -ECONNREFUSED, "host 0 -> host %d: %d (%s)", i, rc, strerror(-rc));
        FL_ASSERT_MSG(ms < 500, "host 0 -> host %d took %ld ms", i, ms);
    }
    env_down(&e);
}

FL_TEST_ROOT(netem_fabric, reachable_at_once_after_commit)
{
    /* Ports forward as soon as commit returns: the first SYN is answered
     * (a lost first SYN would show as a ~1 s retransmission). */
    struct env e = {0};
    env_up(&e, 2);
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    FL_ASSERT_EQ(connect_from(e.host[0], 1, 7001, 3000), -ECONNREFUSED);
    clock_gettime(CLOCK_MONOTONIC, &b);
    long ms = (b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000;
    FL_ASSERT_LT(ms, 500);
    env_down(&e);
}

static double clock_s(clockid_t c)
{
    struct timespec ts;
    clock_gettime(c, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

FL_TEST_ROOT_T(netem_fabric, commit_256_hosts_timing, 120)
{
    /* The figure behind the hosts_up_down budget: 256 attaches + one commit
     * (printed to the test log), and a sanity bound far above it. */
    enum { N = 256 };
    char err[256] = "";
    fl_test_need_root();
    static pid_t host[N];
    for (int i = 0; i < N; i++) {
        host[i] = host_spawn();
        FL_REQUIRE(host[i] > 0);
    }
    double w0 = clock_s(CLOCK_MONOTONIC), c0 = clock_s(CLOCK_THREAD_CPUTIME_ID);
    struct fl_fabric *f = NULL;
    int rc = fl_fabric_create(&f, "t256", err, sizeof err);
    FL_REQUIRE_MSG(rc == 0, "create: %s", err);
    double w1 = clock_s(CLOCK_MONOTONIC);
    for (int i = 0; i < N; i++)
        FL_REQUIRE_EQ(fl_fabric_attach(f, i, host[i], err, sizeof err), 0);
    rc = fl_fabric_commit(f, err, sizeof err);
    double w2 = clock_s(CLOCK_MONOTONIC), c2 = clock_s(CLOCK_THREAD_CPUTIME_ID);
    FL_REQUIRE_MSG(rc == 0, "commit: %s", err);
    fprintf(stderr,
            "fabric: %d hosts: create %.1f ms, attach+commit %.1f ms wall, "
            "create+commit %.1f ms CPU of this thread\n",
            N, (w1 - w0) * 1e3, (w2 - w1) * 1e3, (c2 - c0) * 1e3);
    FL_ASSERT_LT((w2 - w1) * 1e3, 2000);
    for (int i = 1; i < N; i += 37)
        FL_ASSERT_EQ(connect_from(host[0], i, 7001, 2000), -ECONNREFUSED);
    FL_ASSERT_EQ(connect_from(host[0], N - 1, 7001, 2000), -ECONNREFUSED);
    double w3 = clock_s(CLOCK_MONOTONIC);
    fl_fabric_destroy(f);
    fprintf(stderr, "fabric: destroy %.1f ms\n", (clock_s(CLOCK_MONOTONIC) - w3) * 1e3);
    for (int i = 0; i < N; i++)
        host_kill(host[i]);
}
