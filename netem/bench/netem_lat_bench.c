/*
 * netem_lat_bench.c: how closely the link emulator keeps its delay bounds
 * (bench/netem.sh): a fabric of two hosts (bare processes in network
 * namespaces of their own, as in netem's tests), a link fault with the
 * given delay and jitter between them (netem/link.h, so every datagram
 * goes through the emulator thread), and a stream of UDP datagrams from one
 * to the other, each carrying the time it was sent; the receiver takes the
 * kernel's receive time of each (SO_TIMESTAMPNS), so its own wake-up is
 * not counted.  One-way latency per datagram; prints the median, p99 and
 * maximum, and the same for the path without the fault (measured first, in
 * the same run), as BENCH lines: value = the measured p99 (or maximum),
 * baseline = the configured bound (delay + jitter), ratio = value / bound;
 * timer_late_p99/max is the machine's own floor, measured in the same run:
 * how late a thread at the emulator's priority wakes from a 1 ms sleep.
 *
 * usage: netem-lat-bench DELAY_MS JITTER_MS COUNT INTERVAL_US
 * (NETEM_LAT_TAG=_hogs appends _hogs to the names.)
 */
#include "netem/emu.h"
#include "netem/fabric.h"
#include "netem/link.h"
#include "netem/tests/netns_util.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int64_t real_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

struct sender {
    int fd;
    long count, interval_us;
};

static void *send_main(void *arg)
{
    struct sender *s = arg;
    struct sockaddr_in to = sin_of(1, 7000);
    struct timespec next;
    clock_gettime(CLOCK_MONOTONIC, &next);
    for (long i = 0; i < s->count; i++) {
        int64_t msg[2] = {i, real_ns()};
        if (sendto(s->fd, msg, sizeof msg, 0, (struct sockaddr *)&to, sizeof to) < 0)
            perror("netem-lat-bench: sendto");
        next.tv_nsec += s->interval_us * 1000;
        while (next.tv_nsec >= 1000000000) {
            next.tv_nsec -= 1000000000;
            next.tv_sec++;
        }
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL) == EINTR)
            ;
    }
    return NULL;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* Sends count datagrams host 0 -> host 1, interval_us apart; fills lat[]
 * (ns) with the one-way latency of those that arrive within wait_ms of the
 * last send; how many arrived. */
static long stream(int tx, int rx, long count, long interval_us, int wait_ms, int64_t *lat)
{
    struct sender s = {tx, count, interval_us};
    pthread_t th;
    if (pthread_create(&th, NULL, send_main, &s) != 0) {
        fprintf(stderr, "netem-lat-bench: thread: %s\n", strerror(errno));
        exit(1);
    }
    long got = 0;
    int quiet_ms = (int)(count * interval_us / 1000) + wait_ms; /* first: the whole stream */
    for (;;) {
        struct pollfd p = {.fd = rx, .events = POLLIN};
        if (got == count || poll(&p, 1, quiet_ms) != 1)
            break;
        int64_t msg[2];
        char ctl[256];
        struct iovec iov = {msg, sizeof msg};
        struct msghdr mh = {
            .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof ctl};
        if (recvmsg(rx, &mh, 0) != (ssize_t)sizeof msg)
            continue;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
            if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS) {
                struct timespec ts;
                memcpy(&ts, CMSG_DATA(c), sizeof ts);
                lat[got++] = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec - msg[1];
            }
        quiet_ms = wait_ms;
    }
    pthread_join(th, NULL);
    return got;
}

struct figures {
    double p50, p99, max; /* ms */
    long got;
};

static struct figures summarise(int64_t *lat, long got)
{
    struct figures f = {0, 0, 0, got};
    if (!got)
        return f;
    qsort(lat, (size_t)got, sizeof *lat, cmp_i64);
    f.p50 = (double)lat[got / 2] / 1e6;
    f.p99 = (double)lat[(got * 99) / 100] / 1e6;
    f.max = (double)lat[got - 1] / 1e6;
    return f;
}

/* The machine's own timer lateness, the floor under any emulated delay:
 * a thread at the emulator's priority (SCHED_FIFO, lowest) sleeps 1 ms in
 * ppoll N times; each sample is how much later than asked it woke.  On an
 * idle virtual machine a halted vCPU's wake-up dominates the tail. */
static void *timer_late_main(void *arg)
{
    struct figures *f = arg;
    struct sched_param sp = {.sched_priority = sched_get_priority_min(SCHED_FIFO)};
    pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp);
    enum { N = 1000 };
    static int64_t late[N];
    for (int i = 0; i < N; i++) {
        struct timespec t0, t1, d = {0, 1000000};
        clock_gettime(CLOCK_MONOTONIC, &t0);
        ppoll(NULL, 0, &d, NULL);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        late[i] = (t1.tv_sec - t0.tv_sec) * 1000000000LL + t1.tv_nsec - t0.tv_nsec - 1000000;
    }
    *f = summarise(late, N);
    return NULL;
}

static struct figures timer_lateness(void)
{
    struct figures f = {0};
    pthread_t th;
    if (pthread_create(&th, NULL, timer_late_main, &f) == 0)
        pthread_join(th, NULL);
    return f;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: netem-lat-bench DELAY_MS JITTER_MS COUNT INTERVAL_US\n");
        return 2;
    }
    double delay_ms = atof(argv[1]), jitter_ms = atof(argv[2]);
    long count = atol(argv[3]), interval_us = atol(argv[4]);
    if (delay_ms < 0 || jitter_ms < 0 || jitter_ms > delay_ms || count < 100 || interval_us < 1) {
        fprintf(stderr, "netem-lat-bench: bad arguments (0 <= jitter <= delay, count >= 100)\n");
        return 2;
    }
    char err[512] = "";
    struct fl_fabric *f;
    struct fl_links *l;
    if (fl_fabric_create(&f, "lat", err, sizeof err) < 0) {
        fprintf(stderr, "netem-lat-bench: %s\n", err);
        return 1;
    }
    pid_t host[2];
    for (int i = 0; i < 2; i++)
        if ((host[i] = host_spawn()) <= 0 || fl_fabric_attach(f, i, host[i], err, sizeof err) < 0) {
            fprintf(stderr, "netem-lat-bench: host %d: %s\n", i, err);
            return 1;
        }
    if (fl_fabric_commit(f, err, sizeof err) < 0 || fl_links_new(&l, f, err, sizeof err) < 0) {
        fprintf(stderr, "netem-lat-bench: %s\n", err);
        return 1;
    }
    int tx = socket_in(host[0], SOCK_DGRAM), rx = socket_in(host[1], SOCK_DGRAM), one = 1;
    struct sockaddr_in a = sin_of(1, 7000);
    int big = 8 << 20;
    if (tx < 0 || rx < 0 || bind(rx, (struct sockaddr *)&a, sizeof a) < 0 ||
        setsockopt(rx, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof one) < 0 ||
        setsockopt(rx, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof big) < 0) {
        fprintf(stderr, "netem-lat-bench: sockets: %s\n", strerror(errno));
        return 1;
    }
    int64_t *lat = calloc((size_t)count, sizeof *lat);
    if (!lat)
        return 1;
    /* the path alone, then through the emulator */
    struct figures plain = summarise(lat, stream(tx, rx, count, interval_us, 500, lat));
    struct fl_emu_params p = {.delay_us = (uint32_t)(delay_ms * 1000),
                              .jitter_us = (uint32_t)(jitter_ms * 1000),
                              .seed = 1};
    int hosts[] = {0, 1}, id;
    struct fl_link_spec spec = {.scope = FL_LINK_BETWEEN, .a = hosts, .na = 2, .emu = &p};
    if (fl_links_apply(l, &spec, &id, err, sizeof err) < 0) {
        fprintf(stderr, "netem-lat-bench: %s\n", err);
        return 1;
    }
    double bound = delay_ms + jitter_ms;
    struct figures late = timer_lateness();
    struct figures emu = summarise(lat, stream(tx, rx, count, interval_us, (int)bound + 1000, lat));
    fl_links_free(l);
    fl_fabric_destroy(f);
    host_kill(host[0]);
    host_kill(host[1]);
    fprintf(stderr,
            "netem-lat-bench delay %gms jitter %gms: %ld datagrams %ld us apart: no fault "
            "p50 %.3f p99 %.3f max %.3f ms (%ld arrived); emulated p50 %.3f p99 %.3f max %.3f "
            "ms (%ld arrived)\n",
            delay_ms, jitter_ms, count, interval_us, plain.p50, plain.p99, plain.max, plain.got,
            emu.p50, emu.p99, emu.max, emu.got);
    if (emu.got < count * 99 / 100) {
        fprintf(stderr, "netem-lat-bench: only %ld of %ld datagrams arrived\n", emu.got, count);
        return 1;
    }
    const char *tag = getenv("NETEM_LAT_TAG"); /* "_hogs": measured beside busy loops */
    char name[64];
    snprintf(name, sizeof name, "netem_delay_%gms", delay_ms);
    printf("BENCH name=%s_p99%s value=%.3f unit=ms baseline=configured_bound baseline_value=%.3f "
           "ratio=%.4f jitter_ms=%g p50=%.3f no_fault_p99=%.3f timer_late_p99=%.3f\n",
           name, tag ? tag : "", emu.p99, bound, emu.p99 / bound, jitter_ms, emu.p50, plain.p99,
           late.p99);
    printf("BENCH name=%s_max%s value=%.3f unit=ms baseline=configured_bound baseline_value=%.3f "
           "ratio=%.4f jitter_ms=%g no_fault_max=%.3f timer_late_max=%.3f\n",
           name, tag ? tag : "", emu.max, bound, emu.max / bound, jitter_ms, plain.max, late.max);
    free(lat);
    return 0;
}
