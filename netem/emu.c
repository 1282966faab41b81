/*
 * netem/emu.c: the emulator thread of emu.h: reads queued frames from
 * nfnetlink_queue (libnetfilter_queue's nfq_nlmsg_* helpers over libmnl),
 * decides each frame's fate, holds delayed ones in a min-heap of release
 * times and sends verdicts (batched into one sendmsg per round).
 *
 * States: a queue slot is free or bound (struct equeue.bound); a held frame
 * is in the heap until released (verdict sent) or flushed by a remove.
 * Invariants: every frame id read from the kernel gets exactly one verdict;
 * a queue's pending batch id (batch_id) is only set while the queue holds
 * nothing, so a VERDICT_BATCH never accepts a held frame early; everything
 * is touched with e->mu held (the thread drops it only in ppoll).
 */
#include "netem/emu.h"
#include "netem/nsock.h"
#include "netem/seterr.h"
#include "netem/fabric.h"

#include <errno.h>
#include <fcntl.h>
#include <arpa/inet.h>
#include <libmnl/libmnl.h>
#include <libnetfilter_queue/libnetfilter_queue.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nfnetlink_queue.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define RX_BUF (256 * 1024)
#define TX_BUF (1024 * 1024)
#define TX_ROOM (70 * 1024) /* flush before a message this large might not fit */
#define ROUND_MAX 512       /* frames read per round before releasing due ones */
#define QUEUE_MAXLEN 65536

struct held {
    uint64_t t_ns, seq;
    uint32_t id;
    uint16_t queue;
    bool mangled, dup;
    uint32_t outdev;
    uint16_t len;
    unsigned char *frame; /* 14-byte L2 header + packet, or NULL */
};

struct equeue {
    bool bound, flushing;
    uint16_t num;
    struct fl_emu_params p;
    bool meta_only;
    uint64_t rng;
    bool ge_bad;
    double ge_q, ge_r;
    uint64_t last_release;
    uint32_t batch_id; /* highest id to accept in one VERDICT_BATCH, 0 = none */
    struct fl_emu_stats st;
};

struct fl_emu {
    pid_t sw_pid;
    struct mnl_socket *nl;
    uint32_t portid;
    int pkt_fd, evfd;
    pthread_t th;
    bool started, stop;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct equeue q[FL_EMU_QUEUES];
    struct held *heap;
    size_t nheap, capheap;
    uint64_t seq;
    uint32_t nlseq, ack_seq;
    bool ack_wait, ack_got;
    int ack_rc;
    char *rx, *tx;
    size_t txlen;
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* splitmix64: small, seedable, good enough for fault decisions. */
static uint64_t rnd(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static double rnd01(uint64_t *s)
{
    return (double)(rnd(s) >> 11) * 0x1.0p-53;
}

static bool chance(uint64_t *s, unsigned bp)
{
    return bp && rnd(s) % 10000 < bp;
}

/* ---- heap of held frames ------------------------------------------------ */

static bool before(const struct held *a, const struct held *b)
{
    return a->t_ns < b->t_ns || (a->t_ns == b->t_ns && a->seq < b->seq);
}

static int heap_push(struct fl_emu *e, const struct held *h)
{
    if (e->nheap == e->capheap) {
        size_t ncap = e->capheap ? e->capheap * 2 : 1024;
        struct held *n = realloc(e->heap, ncap * sizeof *n);
        if (!n)
            return -ENOMEM;
        e->heap = n;
        e->capheap = ncap;
    }
    size_t i = e->nheap++;
    e->heap[i] = *h;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!before(&e->heap[i], &e->heap[p]))
            break;
        struct held t = e->heap[i];
        e->heap[i] = e->heap[p];
        e->heap[p] = t;
        i = p;
    }
    return 0;
}

static void sift_down(struct fl_emu *e, size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < e->nheap && before(&e->heap[l], &e->heap[m]))
            m = l;
        if (r < e->nheap && before(&e->heap[r], &e->heap[m]))
            m = r;
        if (m == i)
            break;
        struct held t = e->heap[i];
        e->heap[i] = e->heap[m];
        e->heap[m] = t;
        i = m;
    }
}

/* Removes the top. */
static void heap_pop(struct fl_emu *e)
{
    e->heap[0] = e->heap[--e->nheap];
    sift_down(e, 0);
}

static int by_time(const void *a, const void *b)
{
    return before(a, b) ? -1 : before(b, a) ? 1 : 0;
}

/* ---- verdicts ----------------------------------------------------------- */

static void tx_flush(struct fl_emu *e)
{
    if (!e->txlen)
        return;
    /* Verdicts are not acknowledged (no NLM_F_ACK); a failure here means the
     * frame stays queued until the queue is unbound, which drops it. */
    if (mnl_socket_sendto(e->nl, e->tx, e->txlen) < 0 && errno != EINTR)
        fprintf(stderr, "netem emu: sending verdicts: %s\n", strerror(errno));
    e->txlen = 0;
}

static struct nlmsghdr *tx_put(struct fl_emu *e, int type, uint16_t queue, size_t need)
{
    if (e->txlen + need + 256 > TX_BUF)
        tx_flush(e);
    struct nlmsghdr *nlh = nfq_nlmsg_put(e->tx + e->txlen, type, queue);
    nlh->nlmsg_seq = ++e->nlseq;
    return nlh;
}

static void tx_done(struct fl_emu *e, struct nlmsghdr *nlh)
{
    e->txlen += NLMSG_ALIGN(nlh->nlmsg_len);
    if (e->txlen + TX_ROOM > TX_BUF)
        tx_flush(e);
}

static void verdict(struct fl_emu *e, uint16_t queue, uint32_t id, int v, const void *pkt,
                    size_t len)
{
    struct nlmsghdr *nlh = tx_put(e, NFQNL_MSG_VERDICT, queue, len);
    nfq_nlmsg_verdict_put(nlh, (int)id, v);
    if (pkt)
        nfq_nlmsg_verdict_put_pkt(nlh, pkt, (uint32_t)len);
    tx_done(e, nlh);
}

static void batch_flush(struct fl_emu *e, struct equeue *q)
{
    if (!q->batch_id)
        return;
    struct nlmsghdr *nlh = tx_put(e, NFQNL_MSG_VERDICT_BATCH, q->num, 0);
    nfq_nlmsg_verdict_put(nlh, (int)q->batch_id, NF_ACCEPT);
    tx_done(e, nlh);
    q->batch_id = 0;
}

static void send_dup(struct fl_emu *e, const struct held *h)
{
    struct sockaddr_ll sll = {
        .sll_family = AF_PACKET,
        .sll_ifindex = (int)h->outdev,
        .sll_halen = ETH_ALEN,
    };
    memcpy(sll.sll_addr, h->frame, ETH_ALEN);
    sendto(e->pkt_fd, h->frame, h->len, MSG_DONTWAIT, (struct sockaddr *)&sll, sizeof sll);
}

static struct equeue *qfind(struct fl_emu *e, uint16_t num)
{
    for (size_t i = 0; i < FL_EMU_QUEUES; i++)
        if (e->q[i].bound && e->q[i].num == num)
            return &e->q[i];
    return NULL;
}

static void release(struct fl_emu *e, struct held *h, bool was_held)
{
    struct equeue *q = qfind(e, h->queue);
    if (h->mangled)
        verdict(e, h->queue, h->id, NF_ACCEPT, h->frame + ETH_HLEN, h->len - ETH_HLEN);
    else
        verdict(e, h->queue, h->id, NF_ACCEPT, NULL, 0);
    if (h->dup) {
        tx_flush(e); /* the original first */
        send_dup(e, h);
    }
    free(h->frame);
    h->frame = NULL;
    if (q && was_held && q->st.held)
        q->st.held--;
}

static void release_due(struct fl_emu *e, uint64_t now)
{
    while (e->nheap && e->heap[0].t_ns <= now) {
        struct held h = e->heap[0];
        heap_pop(e);
        release(e, &h, true);
    }
}

/* ---- frames ------------------------------------------------------------- */

static void frame_in(struct fl_emu *e, const struct nlmsghdr *nlh, uint64_t now)
{
    struct nlattr *attr[NFQA_MAX + 1] = {0};
    if (nfq_nlmsg_parse(nlh, attr) < 0 || !attr[NFQA_PACKET_HDR])
        return;
    const struct nfgenmsg *nfg = mnl_nlmsg_get_payload(nlh);
    uint16_t num = ntohs(nfg->res_id);
    const struct nfqnl_msg_packet_hdr *ph = mnl_attr_get_payload(attr[NFQA_PACKET_HDR]);
    uint32_t id = ntohl(ph->packet_id);
    struct equeue *q = qfind(e, num);
    if (!q || q->flushing) {
        if (q)
            batch_flush(e, q);
        verdict(e, num, id, NF_ACCEPT, NULL, 0);
        return;
    }
    const struct fl_emu_params *p = &q->p;
    q->st.frames++;

    if (p->ge_loss_bp) {
        bool was_bad = q->ge_bad;
        q->ge_bad = q->ge_bad ? !(rnd01(&q->rng) < q->ge_r) : rnd01(&q->rng) < q->ge_q;
        if (q->ge_bad) {
            q->st.lost++;
            if (!was_bad)
                q->st.loss_runs++;
            batch_flush(e, q);
            verdict(e, num, id, NF_DROP, NULL, 0);
            return;
        }
    }

    struct held h = {.id = id, .queue = num, .seq = ++e->seq};
    h.mangled = chance(&q->rng, p->corrupt_bp);
    h.dup = chance(&q->rng, p->duplicate_bp);
    const unsigned char *pkt = attr[NFQA_PAYLOAD] ? mnl_attr_get_payload(attr[NFQA_PAYLOAD]) : NULL;
    size_t len = attr[NFQA_PAYLOAD] ? mnl_attr_get_payload_len(attr[NFQA_PAYLOAD]) : 0;
    if (h.mangled || h.dup) {
        if (!pkt || len < 20 || len + ETH_HLEN > 0xffff || !(h.frame = malloc(len + ETH_HLEN))) {
            h.mangled = h.dup = false;
        } else {
            h.len = (uint16_t)(len + ETH_HLEN);
            /* the bridge port it leaves by (the ip hooks see the bridge as the device) */
            const struct nlattr *od = attr[NFQA_IFINDEX_PHYSOUTDEV] ? attr[NFQA_IFINDEX_PHYSOUTDEV]
                                                                    : attr[NFQA_IFINDEX_OUTDEV];
            h.outdev = od ? ntohl(mnl_attr_get_u32(od)) : 0;
            /* the L2 header: the receiving host's MAC (the fabric's, by
             * port; by address when the frame leaves by a trunk toward
             * another bridge, fabric.h), the sender's from NFQA_HWADDR, the
             * frame's ethertype */
            int to = (int)h.outdev - FL_FABRIC_PORT_IFINDEX_BASE;
            if (h.outdev < FL_FABRIC_PORT_IFINDEX_BASE) {
                uint32_t daddr;
                memcpy(&daddr, pkt + 16, sizeof daddr);
                to = fl_fabric_addr_idx(daddr);
            }
            if (to < 0)
                h.dup = false;
            fl_fabric_mac(to, h.frame);
            memset(h.frame + ETH_ALEN, 0, ETH_ALEN);
            if (attr[NFQA_HWADDR]) {
                const struct nfqnl_msg_packet_hw *hw = mnl_attr_get_payload(attr[NFQA_HWADDR]);
                memcpy(h.frame + ETH_ALEN, hw->hw_addr, ETH_ALEN);
            }
            memcpy(h.frame + 2 * ETH_ALEN, &ph->hw_protocol, 2);
            memcpy(h.frame + ETH_HLEN, pkt, len);
            if (!h.outdev)
                h.dup = false;
            if (h.mangled) {
                /* one bit after the IPv4 header (or anywhere past byte 20) */
                size_t ihl = (pkt[0] >> 4) == 4 ? (size_t)(pkt[0] & 15) * 4 : 20;
                if (ihl >= len)
                    ihl = len - 1;
                size_t bit = ihl * 8 + rnd(&q->rng) % ((len - ihl) * 8);
                h.frame[ETH_HLEN + bit / 8] ^= (unsigned char)(1u << (bit % 8));
                q->st.corrupted++;
            }
            if (h.dup)
                q->st.duplicated++;
        }
    }

    uint64_t d = (uint64_t)p->delay_us * 1000;
    if (p->jitter_us) {
        uint64_t span = 2ULL * p->jitter_us * 1000 + 1;
        d = d - (uint64_t)p->jitter_us * 1000 + rnd(&q->rng) % span;
    }
    bool reordered = false;
    if (p->reorder_bp && chance(&q->rng, p->reorder_bp)) {
        d = 0;
        reordered = true;
        if (q->st.held)
            q->st.reordered++;
    }
    h.t_ns = now + d;
    if (!p->reorder_bp) {
        if (h.t_ns < q->last_release)
            h.t_ns = q->last_release;
        q->last_release = h.t_ns;
    }
    if ((d == 0 || reordered) && (h.t_ns <= now || reordered)) {
        if (!h.mangled && !h.dup && !q->st.held) {
            q->batch_id = id; /* accepted with the round's batch */
            return;
        }
        batch_flush(e, q);
        release(e, &h, false);
        return;
    }
    batch_flush(e, q);
    if (heap_push(e, &h) < 0) {
        release(e, &h, false);
        return;
    }
    q->st.held++;
}

/* Reads what is there (at most max frames; 0 = until EAGAIN) and handles
 * it; ACKs of our config messages complete the waiting caller. */
static void rx_round(struct fl_emu *e, int max)
{
    uint64_t now = now_ns();
    for (int n = 0; max == 0 || n < max; n++) {
        ssize_t got = recv(mnl_socket_get_fd(e->nl), e->rx, RX_BUF, MSG_DONTWAIT);
        if (got < 0) {
            if (errno == EINTR)
                continue;
            break; /* EAGAIN, or ENOBUFS (lost messages: fail-open covers it) */
        }
        int left = (int)got;
        for (struct nlmsghdr *h = (struct nlmsghdr *)e->rx; mnl_nlmsg_ok(h, left);
             h = mnl_nlmsg_next(h, &left)) {
            if (h->nlmsg_type == NLMSG_ERROR) {
                const struct nlmsgerr *er = mnl_nlmsg_get_payload(h);
                if (e->ack_wait && h->nlmsg_seq == e->ack_seq) {
                    e->ack_rc = er->error;
                    e->ack_got = true;
                    pthread_cond_broadcast(&e->cv);
                }
                continue;
            }
            if ((h->nlmsg_type & 0xff) == NFQNL_MSG_PACKET)
                frame_in(e, h, now);
        }
    }
    for (size_t i = 0; i < FL_EMU_QUEUES; i++)
        if (e->q[i].bound)
            batch_flush(e, &e->q[i]);
}

/* The thread's priority: SCHED_FIFO (the lowest real-time priority) where
 * the process may, else nice -20, else as it is.  A frame is due at a time
 * and the kernel's netem releases it from a timer interrupt; a thread of
 * ordinary priority, woken by its ppoll timeout on a machine whose CPUs are
 * all busy, was seen to release frames up to 46 ms late (a 50 ms delay
 * measured 96 ms), at SCHED_FIFO within 0.1 ms.  It sleeps between frames,
 * so it takes little; the kernel's real-time throttling (95% of each
 * second by default) bounds what a flood of frames can take from others. */
static void emu_priority(void)
{
    struct sched_param sp = {.sched_priority = sched_get_priority_min(SCHED_FIFO)};
    if (pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp) != 0 &&
        setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), -20) < 0) {
        /* neither is allowed here: ordinary priority, delays as the machine allows */
    }
}

static void *emu_main(void *arg)
{
    struct fl_emu *e = arg;
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    emu_priority();
    pthread_mutex_lock(&e->mu);
    while (!e->stop) {
        uint64_t now = now_ns();
        release_due(e, now);
        tx_flush(e);
        struct timespec ts, *tp = NULL;
        if (e->nheap) {
            uint64_t wait = e->heap[0].t_ns > now ? e->heap[0].t_ns - now : 0;
            ts.tv_sec = (time_t)(wait / 1000000000ULL);
            ts.tv_nsec = (long)(wait % 1000000000ULL);
            tp = &ts;
        }
        struct pollfd pf[2] = {
            {.fd = mnl_socket_get_fd(e->nl), .events = POLLIN},
            {.fd = e->evfd, .events = POLLIN},
        };
        pthread_mutex_unlock(&e->mu);
        int n = ppoll(pf, 2, tp, NULL);
        pthread_mutex_lock(&e->mu);
        if (n <= 0)
            continue;
        if (pf[1].revents) {
            uint64_t v;
            if (read(e->evfd, &v, sizeof v) < 0) {
                /* nothing to do: it is only a wake-up */
            }
        }
        if (pf[0].revents)
            rx_round(e, ROUND_MAX);
        tx_flush(e);
    }
    pthread_mutex_unlock(&e->mu);
    return NULL;
}

/* ---- setup -------------------------------------------------------------- */

int fl_emu_params_check(const struct fl_emu_params *p, char *err, size_t errlen)
{
    if (p->jitter_us > p->delay_us || p->reorder_bp > 10000 || p->duplicate_bp > 10000 ||
        p->corrupt_bp > 10000 || p->ge_loss_bp >= 10000 || (p->ge_loss_bp && p->ge_burst < 1) ||
        (p->reorder_bp && !p->delay_us)) {
        fl_netem_seterr(err, errlen,
                        "emu: invalid parameters (delay %uus jitter %uus reorder %u duplicate %u "
                        "corrupt %u loss %u burst %g)",
                        p->delay_us, p->jitter_us, p->reorder_bp, p->duplicate_bp, p->corrupt_bp,
                        p->ge_loss_bp, p->ge_burst);
        return -EINVAL;
    }
    if (p->ge_loss_bp) {
        double pl = p->ge_loss_bp / 10000.0, r = 1.0 / p->ge_burst;
        if (pl * r / (1 - pl) > 1) {
            fl_netem_seterr(err, errlen,
                            "emu: a loss of %g%% cannot have runs as short as %g frames on average",
                            pl * 100, p->ge_burst);
            return -EINVAL;
        }
    }
    return 0;
}

int fl_emu_new(struct fl_emu **out, pid_t sw_pid, char *err, size_t errlen)
{
    *out = NULL;
    struct fl_emu *e = calloc(1, sizeof *e);
    if (!e || !(e->rx = malloc(RX_BUF)) || !(e->tx = malloc(TX_BUF))) {
        if (e) {
            free(e->rx);
            free(e);
        }
        fl_netem_seterr(err, errlen, "emu: out of memory");
        return -ENOMEM;
    }
    e->sw_pid = sw_pid;
    e->pkt_fd = -1;
    e->evfd = -1;
    e->nlseq = (uint32_t)time(NULL);
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->cv, NULL);
    int rc = 0;
    if (!(e->nl = fl_netem_mnl_in(sw_pid, NETLINK_NETFILTER))) {
        rc = -errno;
        fl_netem_seterr(err, errlen,
                        "emu: NETLINK_NETFILTER socket in the switch netns (pid %d): %s",
                        (int)sw_pid, strerror(-rc));
        goto cleanup;
    }
    if ((e->pkt_fd = fl_netem_socket_in(sw_pid, AF_PACKET, SOCK_RAW, 0)) < 0) {
        rc = -errno;
        fl_netem_seterr(err, errlen, "emu: AF_PACKET socket in the switch netns (pid %d): %s",
                        (int)sw_pid, strerror(-rc));
        goto cleanup;
    }
    int fd = mnl_socket_get_fd(e->nl), big = 32 << 20, one = 1;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof big);
    setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &big, sizeof big);
    mnl_socket_setsockopt(e->nl, NETLINK_NO_ENOBUFS, &one, sizeof one);
    if (mnl_socket_bind(e->nl, 0, MNL_SOCKET_AUTOPID) < 0) {
        rc = -errno;
        fl_netem_seterr(err, errlen, "emu: bind NETLINK_NETFILTER socket: %s", strerror(-rc));
        goto cleanup;
    }
    e->portid = mnl_socket_get_portid(e->nl);
    if ((e->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0) {
        rc = -errno;
        fl_netem_seterr(err, errlen, "emu: eventfd: %s", strerror(-rc));
        goto cleanup;
    }
    if ((rc = -pthread_create(&e->th, NULL, emu_main, e)) < 0) {
        fl_netem_seterr(err, errlen, "emu: pthread_create: %s", strerror(-rc));
        goto cleanup;
    }
    e->started = true;
cleanup:
    if (rc < 0) {
        fl_emu_free(e);
        return rc;
    }
    *out = e;
    return 0;
}

static void wake(struct fl_emu *e)
{
    uint64_t one = 1;
    if (write(e->evfd, &one, sizeof one) < 0) {
        /* the counter is full: the thread is awake anyway */
    }
}

/* Sends a config message for queue and waits (e->mu held) for its ACK. */
static int config(struct fl_emu *e, uint16_t queue, uint8_t cmd, const struct fl_emu_params *p,
                  bool meta)
{
    char buf[512] __attribute__((aligned(8)));
    struct nlmsghdr *nlh = nfq_nlmsg_put(buf, NFQNL_MSG_CONFIG, queue);
    nlh->nlmsg_flags |= NLM_F_ACK;
    nlh->nlmsg_seq = ++e->nlseq;
    nfq_nlmsg_cfg_put_cmd(nlh, AF_UNSPEC, cmd);
    if (p) {
        nfq_nlmsg_cfg_put_params(nlh, meta ? NFQNL_COPY_META : NFQNL_COPY_PACKET, 0xffff);
        uint32_t flags = NFQA_CFG_F_FAIL_OPEN | (meta ? NFQA_CFG_F_GSO : 0);
        mnl_attr_put_u32(nlh, NFQA_CFG_FLAGS, htonl(flags));
        mnl_attr_put_u32(nlh, NFQA_CFG_MASK, htonl(NFQA_CFG_F_FAIL_OPEN | NFQA_CFG_F_GSO));
        mnl_attr_put_u32(nlh, NFQA_CFG_QUEUE_MAXLEN, htonl(QUEUE_MAXLEN));
    }
    e->ack_seq = nlh->nlmsg_seq;
    e->ack_got = false;
    e->ack_wait = true;
    e->ack_rc = 0;
    if (mnl_socket_sendto(e->nl, nlh, nlh->nlmsg_len) < 0) {
        e->ack_wait = false;
        return -errno;
    }
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += 5;
    int rc = 0;
    while (!e->ack_got && rc == 0) {
        wake(e);
        rc = pthread_cond_timedwait(&e->cv, &e->mu, &dl);
    }
    e->ack_wait = false;
    if (!e->ack_got)
        return -ETIMEDOUT;
    return e->ack_rc;
}

int fl_emu_add(struct fl_emu *e, uint16_t queue, const struct fl_emu_params *p, char *err,
               size_t errlen)
{
    int rc = fl_emu_params_check(p, err, errlen);
    if (rc < 0)
        return rc;
    pthread_mutex_lock(&e->mu);
    struct equeue *q = NULL;
    if (qfind(e, queue)) {
        rc = -EEXIST;
        fl_netem_seterr(err, errlen, "emu: queue %u is bound already", (unsigned)queue);
        goto out;
    }
    for (size_t i = 0; i < FL_EMU_QUEUES && !q; i++)
        if (!e->q[i].bound)
            q = &e->q[i];
    if (!q) {
        rc = -ENOSPC;
        fl_netem_seterr(err, errlen, "emu: more than %d emulated link faults at once",
                        FL_EMU_QUEUES);
        goto out;
    }
    memset(q, 0, sizeof *q);
    q->num = queue;
    q->p = *p;
    q->rng = p->seed;
    q->meta_only = !p->corrupt_bp && !p->duplicate_bp;
    if (p->ge_loss_bp) {
        double pl = p->ge_loss_bp / 10000.0;
        q->ge_r = 1.0 / p->ge_burst;
        q->ge_q = pl * q->ge_r / (1 - pl);
    }
    q->bound = true; /* frames may arrive as soon as the kernel binds */
    rc = config(e, queue, NFQNL_CFG_CMD_BIND, p, q->meta_only);
    if (rc < 0) {
        q->bound = false;
        fl_netem_seterr(err, errlen,
                        "emu: NFQNL_CFG_CMD_BIND queue %u in switch netns (pid %d): %s",
                        (unsigned)queue, (int)e->sw_pid, strerror(-rc));
    }
out:
    pthread_mutex_unlock(&e->mu);
    return rc;
}

/* e->mu held: releases what q holds, reads what is queued, unbinds. */
static int unbind(struct fl_emu *e, struct equeue *q)
{
    q->flushing = true;
    batch_flush(e, q);
    /* q's held frames to the end of the array, in release order; the rest
     * made a heap again */
    size_t k = 0, n = e->nheap;
    struct held *mine = malloc((n ? n : 1) * sizeof *mine);
    size_t nm = 0;
    for (size_t i = 0; i < n; i++) {
        if (e->heap[i].queue == q->num && mine)
            mine[nm++] = e->heap[i];
        else
            e->heap[k++] = e->heap[i];
    }
    e->nheap = k;
    for (size_t i = k / 2; i-- > 0;)
        sift_down(e, i);
    if (mine) {
        qsort(mine, nm, sizeof *mine, by_time);
        for (size_t i = 0; i < nm; i++)
            release(e, &mine[i], true);
        free(mine);
    }
    rx_round(e, 0);
    tx_flush(e);
    int rc = config(e, q->num, NFQNL_CFG_CMD_UNBIND, NULL, false);
    q->bound = false;
    return rc;
}

int fl_emu_remove(struct fl_emu *e, uint16_t queue, char *err, size_t errlen)
{
    pthread_mutex_lock(&e->mu);
    struct equeue *q = qfind(e, queue);
    int rc = -ENOENT;
    if (!q)
        fl_netem_seterr(err, errlen, "emu: queue %u is not bound", (unsigned)queue);
    else if ((rc = unbind(e, q)) < 0)
        fl_netem_seterr(err, errlen,
                        "emu: NFQNL_CFG_CMD_UNBIND queue %u in switch netns (pid %d): %s",
                        (unsigned)queue, (int)e->sw_pid, strerror(-rc));
    pthread_mutex_unlock(&e->mu);
    return rc;
}

int fl_emu_stats(struct fl_emu *e, uint16_t queue, struct fl_emu_stats *st)
{
    pthread_mutex_lock(&e->mu);
    struct equeue *q = qfind(e, queue);
    if (q)
        *st = q->st;
    pthread_mutex_unlock(&e->mu);
    return q ? 0 : -ENOENT;
}

void fl_emu_free(struct fl_emu *e)
{
    if (!e)
        return;
    if (e->started) {
        pthread_mutex_lock(&e->mu);
        for (size_t i = 0; i < FL_EMU_QUEUES; i++)
            if (e->q[i].bound)
                unbind(e, &e->q[i]);
        e->stop = true;
        pthread_mutex_unlock(&e->mu);
        wake(e);
        pthread_join(e->th, NULL);
    }
    for (size_t i = 0; i < e->nheap; i++)
        free(e->heap[i].frame);
    free(e->heap);
    if (e->nl)
        mnl_socket_close(e->nl);
    if (e->pkt_fd >= 0)
        close(e->pkt_fd);
    if (e->evfd >= 0)
        close(e->evfd);
    pthread_mutex_destroy(&e->mu);
    pthread_cond_destroy(&e->cv);
    free(e->rx);
    free(e->tx);
    free(e);
}
