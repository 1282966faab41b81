/*
 * netem/fabric.c: the private switch namespace, its bridge, one veth pair per
 * host with the host's address, and partitions as nftables rules.
 *
 * Everything is done through netlink (libmnl builds the messages; the
 * sockets are plain NETLINK_ROUTE sockets) except partitions, which go
 * through libnftables.  A kernel object is reached through a socket opened
 * inside its namespace: the switch socket is opened once at create time
 * (setns into the holder's netns, socket(), setns back); a host socket is
 * opened per commit the same way.  All messages for one namespace are sent
 * in one sendmsg (a batch); only the last one asks for an ACK, errors come
 * back for the others by sequence number, so a commit of N hosts costs one
 * switch round trip per 128 hosts plus one round trip per host netns.
 *
 * Host slot states (see fabric.h): DETACHED, QUEUED (in f->queue), ATTACHED.
 * The books keep f->attached[idx] = "a pair of idx may exist": set as soon as
 * a pair was created, cleared only by a successful detach, so the next attach
 * of idx always deletes a leftover first (ENODEV is fine).  Invariants: an
 * idx is queued at most once; a host that failed half-way in a commit has its
 * pair deleted again, so the caller sees it DETACHED.
 * Fixed interface indices (fabric.h) mean no message ever needs the answer
 * of another, which is what makes batching possible.
 *
 * The calling thread's netns is left only between a setns() and its matching
 * ns_leave(), which aborts if it cannot return (never keep running, and
 * creating links, in the wrong namespace).
 */
#include "netem/fabric.h"
#include "netem/seterr.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_link.h>
#include <linux/neighbour.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>
#include <libmnl/libmnl.h>
#include <nftables/libnftables.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define BR_IFINDEX 999 /* br0 in the switch netns; br<b> is BR_IFINDEX - 3b */
#define LO_IFINDEX 1
#define FABRIC_NET 0xC6120000u /* 198.18.0.0, host order */
#define CHUNK 128              /* hosts per switch batch (bounds open fds too) */
#define MSG_MAX 512            /* upper bound of one message we build */
#define SYNC_BATCH 32          /* RTM_GETLINK replies queued at once (~4 KiB truesize each) */

enum op_kind {
    OP_BR_NEW,
    OP_BR_SET,
    OP_BR_UP,
    OP_PORT_DEL,
    OP_VETH_NEW,
    OP_PORT_AF,
    OP_ETH0_AF,
    OP_ETH0_UP,
    OP_LO_UP,
    OP_ADDR,
    OP_PORT_SYNC,
    OP_DETACH,
    OP_NEIGH,
    OP_LEAF_NEW, /* a bridge br<b>, b >= 1 */
    OP_LEAF_SET, /* its addrgenmode, alias */
    OP_LEAF_UP,
    OP_TRUNK_NEW,  /* tr<b>-br0 (in br0) with its peer tr<b>-br<b> */
    OP_TRUNK_AF,   /* addrgenmode none on tr<b>-br0 */
    OP_TRUNK_PEER, /* tr<b>-br<b>: in br<b>, addrgenmode none, up */
    OP_NF_CALL,    /* a bridge's nf_call_iptables */
};

struct op {
    enum op_kind kind;
    int q; /* index into the commit's entries, -1 if none; bridge b for OP_LEAF_* and OP_TRUNK_* */
};

struct nlbatch {
    char *buf;
    size_t len, cap;
    uint32_t seq0;
    struct op *ops;
    size_t nops, opcap;
};

struct qentry {
    int idx;
    pid_t pid;
    int nsfd;     /* /proc/pid/ns/net during commit */
    int sock;     /* NETLINK_ROUTE socket in the host netns during commit */
    int err;      /* first error for this entry */
    bool created; /* its pair exists (switch batch succeeded) */
};

struct fl_fabric {
    pid_t holder;
    int holder_pidfd;
    int sw_sock; /* NETLINK_ROUTE in the switch netns */
    uint32_t seq;
    dev_t home_dev, sw_dev; /* netns identities (st_dev, st_ino) */
    ino_t home_ino, sw_ino;
    char run_id[64];
    unsigned char *attached; /* by idx, grown on demand */
    pid_t *pids;             /* by idx, as attached[]: a process in its netns */
    unsigned char *pinned;   /* by idx, as attached[]: fl_fabric_pin_neighbours */
    size_t attached_cap, npinned;
    struct qentry *queue;
    size_t nq, qcap;
    struct nft_ctx *nft;
    int next_rule;
    int *rules; /* live rule ids */
    size_t nrules, rulecap;
    bool bridge_made[FL_FABRIC_MAX_BRIDGES]; /* br0 at create, br<b> at a commit */
    bool nf_call_iptables;                   /* fl_fabric_set_nf_call_iptables was called */
};

/* ---- small helpers ---------------------------------------------------- */

static int sys_pidfd_open(pid_t pid)
{
    return (int)syscall(SYS_pidfd_open, pid, 0);
}

static int sys_pidfd_send_signal(int pidfd, int sig)
{
    return (int)syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0);
}

/* Enters the netns behind nsfd (an ns fd or a pidfd); *saved keeps the
 * thread's current one for ns_leave. */
static int ns_enter(int nsfd, int *saved)
{
    *saved = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    if (*saved < 0)
        return -errno;
    if (setns(nsfd, CLONE_NEWNET) < 0) {
        int e = -errno;
        close(*saved);
        *saved = -1;
        return e;
    }
    return 0;
}

static void ns_leave(int saved)
{
    if (setns(saved, CLONE_NEWNET) < 0) {
        fprintf(stderr, "fabric: setns back to the original network namespace: %s; aborting\n",
                strerror(errno));
        abort();
    }
    close(saved);
}

static int rtnl_socket(void)
{
    int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
    if (fd < 0)
        return -errno;
    int one = 1;
    setsockopt(fd, SOL_NETLINK, NETLINK_CAP_ACK, &one, sizeof one);
    setsockopt(fd, SOL_NETLINK, NETLINK_EXT_ACK, &one, sizeof one);
    return fd;
}

/* ---- netlink batches ------------------------------------------------- */

static void nb_init(struct nlbatch *b, uint32_t seq0)
{
    memset(b, 0, sizeof *b);
    b->seq0 = seq0;
}

static void nb_free(struct nlbatch *b)
{
    free(b->buf);
    free(b->ops);
}

static struct nlmsghdr *nb_put(struct nlbatch *b, uint16_t type, uint16_t flags, enum op_kind kind,
                               int q)
{
    if (b->cap - b->len < MSG_MAX) {
        size_t ncap = b->cap ? b->cap * 2 : 16384;
        char *nb = realloc(b->buf, ncap);
        if (!nb)
            return NULL;
        b->buf = nb;
        b->cap = ncap;
    }
    if (b->nops == b->opcap) {
        size_t ncap = b->opcap ? b->opcap * 2 : 64;
        struct op *no = realloc(b->ops, ncap * sizeof *no);
        if (!no)
            return NULL;
        b->ops = no;
        b->opcap = ncap;
    }
    struct nlmsghdr *nlh = mnl_nlmsg_put_header(b->buf + b->len);
    nlh->nlmsg_type = type;
    nlh->nlmsg_flags = NLM_F_REQUEST | flags;
    nlh->nlmsg_seq = b->seq0 + (uint32_t)b->nops;
    b->ops[b->nops].kind = kind;
    b->ops[b->nops].q = q;
    b->nops++;
    return nlh;
}

/* Call after the message's attributes are complete. */
static void nb_close(struct nlbatch *b, struct nlmsghdr *nlh)
{
    b->len += NLMSG_ALIGN(nlh->nlmsg_len);
}

static struct nlmsghdr *nb_put_link(struct nlbatch *b, uint16_t type, uint16_t flags, int ifindex,
                                    unsigned up, enum op_kind kind, int q)
{
    struct nlmsghdr *nlh = nb_put(b, type, flags, kind, q);
    if (!nlh)
        return NULL;
    struct ifinfomsg *ifm = mnl_nlmsg_put_extra_header(nlh, sizeof *ifm);
    ifm->ifi_family = AF_UNSPEC;
    ifm->ifi_index = ifindex;
    ifm->ifi_flags = up ? IFF_UP : 0;
    ifm->ifi_change = up ? IFF_UP : 0;
    return nlh;
}

/* A permanent neighbour entry on eth0 for host peer: its address at its
 * MAC (fabric.h: fixed per index), never resolved, never flushed. */
static struct nlmsghdr *put_neigh(struct nlbatch *b, int peer, int q)
{
    struct nlmsghdr *nlh = nb_put(b, RTM_NEWNEIGH, NLM_F_CREATE | NLM_F_REPLACE, OP_NEIGH, q);
    if (!nlh)
        return NULL;
    struct ndmsg *nd = mnl_nlmsg_put_extra_header(nlh, sizeof *nd);
    nd->ndm_family = AF_INET;
    nd->ndm_ifindex = FL_FABRIC_ETH0_IFINDEX;
    nd->ndm_state = NUD_PERMANENT;
    mnl_attr_put_u32(nlh, NDA_DST, fl_fabric_addr(peer));
    unsigned char mac[6];
    fl_fabric_mac(peer, mac);
    mnl_attr_put(nlh, NDA_LLADDR, sizeof mac, mac);
    nb_close(b, nlh);
    return nlh;
}

static void put_addrgenmode_none(struct nlmsghdr *nlh)
{
    struct nlattr *spec = mnl_attr_nest_start(nlh, IFLA_AF_SPEC);
    struct nlattr *in6 = mnl_attr_nest_start(nlh, AF_INET6);
    mnl_attr_put_u8(nlh, IFLA_INET6_ADDR_GEN_MODE, IN6_ADDR_GEN_MODE_NONE);
    mnl_attr_nest_end(nlh, in6);
    mnl_attr_nest_end(nlh, spec);
}

/* Errors a given op may meet without it being a failure. */
static bool op_tolerates(enum op_kind kind, int e)
{
    switch (kind) {
    case OP_PORT_DEL:
    case OP_DETACH: return e == -ENODEV;
    case OP_PORT_AF:
    case OP_ETH0_AF:
    case OP_TRUNK_AF:
    case OP_BR_SET: return e == -EAFNOSUPPORT; /* kernel without IPv6 */
    case OP_LEAF_SET:
    case OP_TRUNK_PEER: return e == -EAFNOSUPPORT;
    /* a bridge half made by an earlier commit that failed */
    case OP_LEAF_NEW:
    case OP_TRUNK_NEW: return e == -EEXIST;
    default: return false;
    }
}

typedef void (*nb_err_fn)(void *ctx, const struct op *op, int e, const char *extack);

/* Sends the batch (ACK asked on its last message) and reads replies until
 * that ACK.  Each failed message is reported through on_err (tolerated errors
 * are not).  Returns 0 once the batch was processed (whatever errors its
 * messages met), negative errno if the socket failed. */
static int nb_run(int fd, struct nlbatch *b, nb_err_fn on_err, void *ctx)
{
    if (!b->nops)
        return 0;
    /* ACK on the last message so we know when the kernel is done. */
    size_t off = 0, lastoff = 0;
    while (off < b->len) {
        lastoff = off;
        off += NLMSG_ALIGN(((struct nlmsghdr *)(b->buf + off))->nlmsg_len);
    }
    ((struct nlmsghdr *)(b->buf + lastoff))->nlmsg_flags |= NLM_F_ACK;
    uint32_t last = b->seq0 + (uint32_t)b->nops - 1;

    struct sockaddr_nl kern = {.nl_family = AF_NETLINK};
    ssize_t n;
    do
        n = sendto(fd, b->buf, b->len, 0, (struct sockaddr *)&kern, sizeof kern);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return -errno;

    char rbuf[16384] __attribute__((aligned(8)));
    for (;;) {
        n = recv(fd, rbuf, sizeof rbuf, 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        bool done = false;
        int left = (int)n;
        for (struct nlmsghdr *nlh = (struct nlmsghdr *)rbuf; mnl_nlmsg_ok(nlh, left);
             nlh = mnl_nlmsg_next(nlh, &left)) {
            if (nlh->nlmsg_type != NLMSG_ERROR)
                continue;
            uint32_t seq = nlh->nlmsg_seq;
            if (seq < b->seq0 || seq > last)
                continue; /* stale reply of an earlier batch */
            const struct nlmsgerr *e = mnl_nlmsg_get_payload(nlh);
            if (e->error) {
                const struct op *op = &b->ops[seq - b->seq0];
                const char *ext = NULL;
                if (nlh->nlmsg_flags & NLM_F_ACK_TLVS) {
                    /* With NETLINK_CAP_ACK the echoed message is only its header. */
                    size_t hl = sizeof(struct nlmsghdr) + sizeof *e;
                    if (!(nlh->nlmsg_flags & NLM_F_CAPPED))
                        hl = sizeof(struct nlmsghdr) + sizeof(int) + NLMSG_ALIGN(e->msg.nlmsg_len);
                    const struct nlattr *a;
                    mnl_attr_for_each(a, nlh, hl - sizeof(struct nlmsghdr))
                    {
                        if (mnl_attr_get_type(a) == NLMSGERR_ATTR_MSG)
                            ext = mnl_attr_get_str(a);
                    }
                }
                if (!op_tolerates(op->kind, e->error))
                    on_err(ctx, op, e->error, ext);
            }
            if (seq == last)
                done = true;
        }
        if (done)
            return 0;
    }
}

/* ---- bridges ------------------------------------------------------------ */

static int bridge_ifindex(int b)
{
    return BR_IFINDEX - 3 * b;
}

/* the trunk of bridge b >= 1: its end in br0, its end in br<b> */
static int trunk0_ifindex(int b)
{
    return BR_IFINDEX + 1 - 3 * b;
}

static int trunkb_ifindex(int b)
{
    return BR_IFINDEX + 2 - 3 * b;
}

static int bridge_of(int idx)
{
    return idx / FL_FABRIC_BRIDGE_HOSTS;
}

/* Bridge b: no STP, forward delay 0, no snooping, no br_netfilter (unless
 * asked for); created down so that addrgenmode none is in place before it
 * can get an IPv6 link-local address, then up.  Three messages of kinds
 * knew, kset, kup (op.q = b).  NULL when out of memory. */
static struct nlmsghdr *put_bridge(struct nlbatch *b, const struct fl_fabric *f, int br,
                                   enum op_kind knew, enum op_kind kset, enum op_kind kup)
{
    char name[16];
    snprintf(name, sizeof name, "br%d", br);
    struct nlmsghdr *nlh =
        nb_put_link(b, RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL, bridge_ifindex(br), 0, knew, br);
    if (!nlh)
        return NULL;
    mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
    struct nlattr *li = mnl_attr_nest_start(nlh, IFLA_LINKINFO);
    mnl_attr_put_strz(nlh, IFLA_INFO_KIND, "bridge");
    struct nlattr *data = mnl_attr_nest_start(nlh, IFLA_INFO_DATA);
    mnl_attr_put_u32(nlh, IFLA_BR_STP_STATE, 0);
    mnl_attr_put_u32(nlh, IFLA_BR_FORWARD_DELAY, 0);
    mnl_attr_put_u8(nlh, IFLA_BR_MCAST_SNOOPING, 0);
    mnl_attr_put_u8(nlh, IFLA_BR_NF_CALL_IPTABLES, f->nf_call_iptables);
    mnl_attr_put_u8(nlh, IFLA_BR_NF_CALL_IP6TABLES, 0);
    mnl_attr_put_u8(nlh, IFLA_BR_NF_CALL_ARPTABLES, 0);
    mnl_attr_nest_end(nlh, data);
    mnl_attr_nest_end(nlh, li);
    nb_close(b, nlh);
    nlh = nb_put_link(b, RTM_NEWLINK, 0, bridge_ifindex(br), 0, kset, br);
    if (!nlh)
        return NULL;
    if (f->run_id[0])
        mnl_attr_put_strz(nlh, IFLA_IFALIAS, f->run_id);
    put_addrgenmode_none(nlh);
    nb_close(b, nlh);
    nlh = nb_put_link(b, RTM_NEWLINK, 0, bridge_ifindex(br), 1, kup, br);
    if (!nlh)
        return NULL;
    nb_close(b, nlh);
    return nlh;
}

/* Bridge b >= 1 and its trunk to br0: the bridge, the veth pair tr<b>-br0
 * (a port of br0, up) / tr<b>-br<b> (a port of br<b>, up), neither with an
 * IPv6 link-local address.  NULL when out of memory. */
static struct nlmsghdr *put_leaf(struct nlbatch *b, const struct fl_fabric *f, int br)
{
    char name[16];
    if (!put_bridge(b, f, br, OP_LEAF_NEW, OP_LEAF_SET, OP_LEAF_UP))
        return NULL;
    struct nlmsghdr *nlh = nb_put_link(b, RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL,
                                       trunk0_ifindex(br), 1, OP_TRUNK_NEW, br);
    if (!nlh)
        return NULL;
    snprintf(name, sizeof name, "tr%d-br0", br);
    mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
    mnl_attr_put_u32(nlh, IFLA_MASTER, BR_IFINDEX);
    mnl_attr_put_u32(nlh, IFLA_NUM_TX_QUEUES, 1);
    mnl_attr_put_u32(nlh, IFLA_NUM_RX_QUEUES, 1);
    struct nlattr *li = mnl_attr_nest_start(nlh, IFLA_LINKINFO);
    mnl_attr_put_strz(nlh, IFLA_INFO_KIND, "veth");
    struct nlattr *data = mnl_attr_nest_start(nlh, IFLA_INFO_DATA);
    struct nlattr *peer = mnl_attr_nest_start(nlh, VETH_INFO_PEER);
    struct ifinfomsg *pifm = mnl_nlmsg_get_payload_tail(nlh);
    memset(pifm, 0, sizeof *pifm);
    pifm->ifi_family = AF_UNSPEC;
    pifm->ifi_index = trunkb_ifindex(br);
    nlh->nlmsg_len += MNL_ALIGN(sizeof *pifm);
    snprintf(name, sizeof name, "tr%d-br%d", br, br);
    mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
    mnl_attr_put_u32(nlh, IFLA_NUM_TX_QUEUES, 1);
    mnl_attr_put_u32(nlh, IFLA_NUM_RX_QUEUES, 1);
    mnl_attr_nest_end(nlh, peer);
    mnl_attr_nest_end(nlh, data);
    mnl_attr_nest_end(nlh, li);
    nb_close(b, nlh);
    nlh = nb_put_link(b, RTM_NEWLINK, 0, trunk0_ifindex(br), 0, OP_TRUNK_AF, br);
    if (!nlh)
        return NULL;
    put_addrgenmode_none(nlh);
    nb_close(b, nlh);
    nlh = nb_put_link(b, RTM_NEWLINK, 0, trunkb_ifindex(br), 1, OP_TRUNK_PEER, br);
    if (!nlh)
        return NULL;
    mnl_attr_put_u32(nlh, IFLA_MASTER, bridge_ifindex(br));
    put_addrgenmode_none(nlh);
    nb_close(b, nlh);
    return nlh;
}

/* ---- the holder -------------------------------------------------------- */

/* Child side of the holder: in its own new netns, dies with its creator,
 * holds no fd, ignores every signal but SIGKILL/SIGSTOP.  Only raw system
 * calls here (we are a clone of one thread of a maybe multi-threaded
 * process). */
static void holder_main(pid_t parent, const char *comm)
{
    sigset_t all;
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, NULL);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(0);
    prctl(PR_SET_NAME, comm);
    syscall(SYS_close_range, 0U, ~0U, 0U);
    for (;;)
        pause();
}

static int ns_ident(const char *path, dev_t *dev, ino_t *ino)
{
    struct stat st;
    if (stat(path, &st) < 0)
        return -errno;
    *dev = st.st_dev;
    *ino = st.st_ino;
    return 0;
}

/* ---- create / destroy --------------------------------------------------- */

struct create_ctx {
    char *err;
    size_t errlen;
    int first;
};

static void create_err(void *vctx, const struct op *op, int e, const char *ext)
{
    struct create_ctx *c = vctx;
    if (c->first)
        return;
    c->first = e;
    fl_netem_seterr(c->err, c->errlen,
                    "fabric: RTM_NEWLINK bridge br%d (%s) in switch netns: %s%s%s%s", op->q,
                    op->kind == OP_BR_NEW    ? "create"
                    : op->kind == OP_BR_UP   ? "up"
                    : op->kind == OP_NF_CALL ? "nf_call_iptables 1"
                                             : "addrgenmode/alias",
                    strerror(-e), ext ? " (" : "", ext ? ext : "", ext ? ")" : "");
}

int fl_fabric_create(struct fl_fabric **out, const char *run_id, char *err, size_t errlen)
{
    int rc = 0, saved = -1;
    struct nlbatch b;
    nb_init(&b, 1);
    *out = NULL;

    struct fl_fabric *f = calloc(1, sizeof *f);
    if (!f) {
        fl_netem_seterr(err, errlen, "fabric: out of memory");
        return -ENOMEM;
    }
    f->holder = -1;
    f->holder_pidfd = -1;
    f->sw_sock = -1;
    f->next_rule = 1;
    f->seq = 1000;
    snprintf(f->run_id, sizeof f->run_id, "%s", run_id ? run_id : "");

    rc = ns_ident("/proc/thread-self/ns/net", &f->home_dev, &f->home_ino);
    if (rc < 0) {
        fl_netem_seterr(err, errlen, "fabric: stat /proc/thread-self/ns/net: %s", strerror(-rc));
        goto cleanup;
    }

    char comm[16];
    snprintf(comm, sizeof comm, "fl-sw %s", f->run_id);
    pid_t parent = getpid();
    /* fork-like clone into a new netns; exit signal 0 keeps the holder out
     * of the harness's waitpid(-1) (reaped with __WALL in destroy). */
    long pid = syscall(SYS_clone, (unsigned long)CLONE_NEWNET, NULL, NULL, NULL, NULL);
    if (pid < 0) {
        rc = -errno;
        fl_netem_seterr(err, errlen, "fabric: clone(CLONE_NEWNET) for the switch holder: %s",
                        strerror(-rc));
        goto cleanup;
    }
    if (pid == 0)
        holder_main(parent, comm); /* never returns */
    f->holder = (pid_t)pid;
    f->holder_pidfd = sys_pidfd_open(f->holder);
    if (f->holder_pidfd < 0) {
        rc = -errno;
        fl_netem_seterr(err, errlen, "fabric: pidfd_open(%d) of the switch holder: %s", f->holder,
                        strerror(-rc));
        goto cleanup;
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/ns/net", f->holder);
    rc = ns_ident(path, &f->sw_dev, &f->sw_ino);
    if (rc < 0) {
        fl_netem_seterr(err, errlen, "fabric: stat %s: %s", path, strerror(-rc));
        goto cleanup;
    }

    rc = ns_enter(f->holder_pidfd, &saved);
    if (rc < 0) {
        fl_netem_seterr(err, errlen, "fabric: setns into the switch netns (pid %d): %s", f->holder,
                        strerror(-rc));
        goto cleanup;
    }
    f->sw_sock = rtnl_socket();
    ns_leave(saved);
    if (f->sw_sock < 0) {
        rc = f->sw_sock;
        fl_netem_seterr(err, errlen, "fabric: NETLINK_ROUTE socket in the switch netns: %s",
                        strerror(-rc));
        goto cleanup;
    }
    int rcvbuf = 1 << 20;
    setsockopt(f->sw_sock, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof rcvbuf);

    f->bridge_made[0] = true;
    if (!put_bridge(&b, f, 0, OP_BR_NEW, OP_BR_SET, OP_BR_UP))
        goto nomem;

    struct create_ctx cc = {err, errlen, 0};
    rc = nb_run(f->sw_sock, &b, create_err, &cc);
    if (rc < 0) {
        fl_netem_seterr(err, errlen, "fabric: netlink to the switch netns: %s", strerror(-rc));
        goto cleanup;
    }
    if (cc.first) {
        rc = cc.first;
        goto cleanup;
    }
    f->seq += 16;
    nb_free(&b);
    *out = f;
    return 0;

nomem:
    rc = -ENOMEM;
    fl_netem_seterr(err, errlen, "fabric: out of memory");
cleanup:
    nb_free(&b);
    fl_fabric_destroy(f);
    return rc;
}

void fl_fabric_destroy(struct fl_fabric *f)
{
    if (!f)
        return;
    if (f->nft)
        nft_ctx_free(f->nft);
    if (f->sw_sock >= 0)
        close(f->sw_sock);
    for (size_t i = 0; i < f->nq; i++) {
        if (f->queue[i].nsfd >= 0)
            close(f->queue[i].nsfd);
        if (f->queue[i].sock >= 0)
            close(f->queue[i].sock);
    }
    if (f->holder > 0) {
        if (f->holder_pidfd >= 0)
            sys_pidfd_send_signal(f->holder_pidfd, SIGKILL);
        else
            kill(f->holder, SIGKILL);
        while (waitpid(f->holder, NULL, __WALL) < 0 && errno == EINTR)
            ;
    }
    if (f->holder_pidfd >= 0)
        close(f->holder_pidfd);
    free(f->attached);
    free(f->pinned);
    free(f->pids);
    free(f->queue);
    free(f->rules);
    free(f);
}

pid_t fl_fabric_switch_pid(const struct fl_fabric *f)
{
    return f ? f->holder : -1;
}

/* ---- addresses and names --------------------------------------------- */

uint32_t fl_fabric_addr(int host_idx)
{
    if (host_idx < 0 || host_idx >= FL_FABRIC_MAX_HOSTS)
        return 0;
    return htonl(FABRIC_NET + (uint32_t)host_idx + 1);
}

char *fl_fabric_addr_str(int host_idx, char *buf, size_t len)
{
    if (!len)
        return buf;
    buf[0] = 0;
    uint32_t a = fl_fabric_addr(host_idx);
    if (a)
        inet_ntop(AF_INET, &a, buf, (socklen_t)len);
    return buf;
}

void fl_fabric_mac(int host_idx, unsigned char mac[6])
{
    uint32_t i = (uint32_t)host_idx;
    mac[0] = 0x02; /* locally administered, unicast */
    mac[1] = 0x46; /* 'F' */
    mac[2] = 0x4c; /* 'L' */
    mac[3] = (unsigned char)(i >> 16);
    mac[4] = (unsigned char)(i >> 8);
    mac[5] = (unsigned char)i;
}

char *fl_fabric_port_name(int host_idx, char *buf, size_t len)
{
    if (len)
        snprintf(buf, len, "h%d", host_idx);
    return buf;
}

/* ---- attach / commit / detach ----------------------------------------- */

static bool idx_ok(int idx)
{
    return idx >= 0 && idx < FL_FABRIC_MAX_HOSTS;
}

int fl_fabric_addr_idx(uint32_t addr)
{
    uint32_t a = ntohl(addr);
    if (a <= FABRIC_NET || a - FABRIC_NET - 1 >= (uint32_t)FL_FABRIC_MAX_HOSTS)
        return -1;
    return (int)(a - FABRIC_NET - 1);
}

int fl_fabric_bridge_ifindex(int host_idx)
{
    return idx_ok(host_idx) ? bridge_ifindex(bridge_of(host_idx)) : 0;
}

static bool is_attached(const struct fl_fabric *f, int idx)
{
    return (size_t)idx < f->attached_cap && f->attached[idx];
}

/* attached[], pinned[] and pids[] cover idx. */
static int grow(struct fl_fabric *f, int idx)
{
    if ((size_t)idx >= f->attached_cap) {
        size_t ncap = f->attached_cap ? f->attached_cap : 64;
        while (ncap <= (size_t)idx)
            ncap *= 2;
        unsigned char *na = realloc(f->attached, ncap);
        if (!na)
            return -ENOMEM;
        f->attached = na;
        unsigned char *np = realloc(f->pinned, ncap);
        if (!np)
            return -ENOMEM;
        f->pinned = np;
        pid_t *pp = realloc(f->pids, ncap * sizeof *pp);
        if (!pp)
            return -ENOMEM;
        f->pids = pp;
        memset(na + f->attached_cap, 0, ncap - f->attached_cap);
        memset(np + f->attached_cap, 0, ncap - f->attached_cap);
        memset(pp + f->attached_cap, 0, (ncap - f->attached_cap) * sizeof *pp);
        f->attached_cap = ncap;
    }
    return 0;
}

static int set_attached(struct fl_fabric *f, int idx, bool on)
{
    if ((size_t)idx >= f->attached_cap && !on)
        return 0;
    if (grow(f, idx) < 0)
        return -ENOMEM;
    f->attached[idx] = on;
    return 0;
}

int fl_fabric_attach(struct fl_fabric *f, int host_idx, pid_t host_pid, char *err, size_t errlen)
{
    if (!idx_ok(host_idx) || host_pid <= 0) {
        fl_netem_seterr(err, errlen, "fabric: attach host %d (pid %d): invalid host index or pid",
                        host_idx, (int)host_pid);
        return -EINVAL;
    }
    for (size_t i = 0; i < f->nq; i++) {
        if (f->queue[i].idx == host_idx) {
            fl_netem_seterr(err, errlen, "fabric: attach host %d (pid %d): already queued (pid %d)",
                            host_idx, (int)host_pid, (int)f->queue[i].pid);
            return -EEXIST;
        }
    }
    if (f->nq == f->qcap) {
        size_t ncap = f->qcap ? f->qcap * 2 : 64;
        struct qentry *nq = realloc(f->queue, ncap * sizeof *nq);
        if (!nq) {
            fl_netem_seterr(err, errlen, "fabric: out of memory");
            return -ENOMEM;
        }
        f->queue = nq;
        f->qcap = ncap;
    }
    f->queue[f->nq++] = (struct qentry){.idx = host_idx, .pid = host_pid, .nsfd = -1, .sock = -1};
    return 0;
}

struct commit_ctx {
    struct fl_fabric *f;
    struct qentry *ents;
    char *err;
    size_t errlen;
    int first;
    bool leaf_failed[FL_FABRIC_MAX_BRIDGES]; /* a message making bridge b failed */
};

static bool op_is_leaf(enum op_kind kind)
{
    return kind == OP_LEAF_NEW || kind == OP_LEAF_SET || kind == OP_LEAF_UP ||
           kind == OP_TRUNK_NEW || kind == OP_TRUNK_AF || kind == OP_TRUNK_PEER;
}

static void commit_err(void *vctx, const struct op *op, int e, const char *ext)
{
    struct commit_ctx *c = vctx;
    bool leaf = op_is_leaf(op->kind);
    if (leaf)
        c->leaf_failed[op->q] = true;
    struct qentry *q = op->q >= 0 && !leaf ? &c->ents[op->q] : NULL;
    if (q && !q->err)
        q->err = e;
    if (c->first)
        return;
    c->first = e;
    int idx = q ? q->idx : -1;
    int pid = q ? (int)q->pid : -1;
    char what[128], a[16];
    switch (op->kind) {
    case OP_PORT_DEL:
        snprintf(what, sizeof what, "RTM_DELLINK old port h%d of host %d in switch netns", idx,
                 idx);
        break;
    case OP_VETH_NEW:
        snprintf(what, sizeof what, "RTM_NEWLINK veth h%d/%s in netns of pid %d", idx,
                 FL_FABRIC_HOST_IFNAME, pid);
        break;
    case OP_PORT_AF:
        snprintf(what, sizeof what, "RTM_NEWLINK h%d addrgenmode none in switch netns (host %d)",
                 idx, idx);
        break;
    case OP_ETH0_AF:
        snprintf(what, sizeof what, "RTM_NEWLINK %s addrgenmode none of host %d in netns of pid %d",
                 FL_FABRIC_HOST_IFNAME, idx, pid);
        break;
    case OP_ETH0_UP:
        snprintf(what, sizeof what, "RTM_NEWLINK %s up of host %d in netns of pid %d",
                 FL_FABRIC_HOST_IFNAME, idx, pid);
        break;
    case OP_LO_UP:
        snprintf(what, sizeof what, "RTM_NEWLINK lo up of host %d in netns of pid %d", idx, pid);
        break;
    case OP_PORT_SYNC:
        snprintf(what, sizeof what, "RTM_GETLINK h%d (link sync) in switch netns (host %d)", idx,
                 idx);
        break;
    case OP_NEIGH:
        snprintf(what, sizeof what, "RTM_NEWNEIGH (permanent) on %s of host %d in netns of pid %d",
                 FL_FABRIC_HOST_IFNAME, idx, pid);
        break;
    case OP_ADDR:
        snprintf(what, sizeof what, "RTM_NEWADDR %s/%d on %s of host %d in netns of pid %d",
                 fl_fabric_addr_str(idx, a, sizeof a), FL_FABRIC_PREFIXLEN, FL_FABRIC_HOST_IFNAME,
                 idx, pid);
        break;
    case OP_LEAF_NEW:
    case OP_LEAF_SET:
    case OP_LEAF_UP:
        snprintf(what, sizeof what, "RTM_NEWLINK bridge br%d (%s) in switch netns", op->q,
                 op->kind == OP_LEAF_NEW  ? "create"
                 : op->kind == OP_LEAF_UP ? "up"
                                          : "addrgenmode/alias");
        break;
    case OP_TRUNK_NEW:
    case OP_TRUNK_AF:
    case OP_TRUNK_PEER:
        snprintf(what, sizeof what, "RTM_NEWLINK trunk tr%d-br0/tr%d-br%d (%s) in switch netns",
                 op->q, op->q, op->q,
                 op->kind == OP_TRUNK_NEW  ? "create"
                 : op->kind == OP_TRUNK_AF ? "addrgenmode"
                                           : "into its bridge, up");
        break;
    default: snprintf(what, sizeof what, "netlink op %d of host %d", (int)op->kind, idx);
    }
    fl_netem_seterr(c->err, c->errlen, "fabric: %s: %s%s%s%s", what, strerror(-e), ext ? " (" : "",
                    ext ? ext : "", ext ? ")" : "");
}

static void entry_fail(struct commit_ctx *c, struct qentry *q, int e, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void entry_fail(struct commit_ctx *c, struct qentry *q, int e, const char *fmt, ...)
{
    if (q && !q->err) /* q NULL: the commit failed, no host in particular */
        q->err = e;
    if (c->first)
        return;
    c->first = e;
    if (c->err && c->errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->err, c->errlen, fmt, ap);
        va_end(ap);
    }
}

/* Opens host q's netns fd and checks it is neither ours nor the switch's. */
static void host_open_ns(struct commit_ctx *c, struct qentry *q)
{
    struct fl_fabric *f = c->f;
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/ns/net", (int)q->pid);
    q->nsfd = open(path, O_RDONLY | O_CLOEXEC);
    if (q->nsfd < 0) {
        int e = -errno;
        entry_fail(c, q, e == -ENOENT ? -ESRCH : e, "fabric: open %s for host %d: %s", path, q->idx,
                   strerror(errno));
        return;
    }
    struct stat st;
    if (fstat(q->nsfd, &st) < 0) {
        entry_fail(c, q, -errno, "fabric: fstat %s for host %d: %s", path, q->idx, strerror(errno));
        return;
    }
    if ((st.st_dev == f->home_dev && st.st_ino == f->home_ino) ||
        (st.st_dev == f->sw_dev && st.st_ino == f->sw_ino)) {
        entry_fail(c, q, -EINVAL,
                   "fabric: host %d (pid %d) is in the %s network namespace, not its own; "
                   "refusing to plug it in",
                   q->idx, (int)q->pid, st.st_ino == f->home_ino ? "harness's" : "switch's");
    }
}

/* RTM_GETLINK of each ifindex[i] in the switch's netns, tag[i] its entry
 * (-1 none), SYNC_BATCH at a time: runs its pending linkwatch event now
 * (step 3b of the commit below).  A failure is the entry's (or the
 * commit's); 0, or -ENOMEM. */
static int sync_links(struct fl_fabric *f, struct commit_ctx *c, const int *ifindex, const int *tag,
                      size_t n, const char *what)
{
    struct nlbatch b;
    for (size_t at = 0; at < n;) {
        nb_init(&b, f->seq);
        for (; at < n && b.nops < SYNC_BATCH; at++) {
            struct nlmsghdr *nlh =
                nb_put_link(&b, RTM_GETLINK, 0, ifindex[at], 0, OP_PORT_SYNC, tag[at]);
            if (!nlh) {
                nb_free(&b);
                return -ENOMEM;
            }
            mnl_attr_put_u32(nlh, IFLA_EXT_MASK, RTEXT_FILTER_SKIP_STATS);
            nb_close(&b, nlh);
        }
        f->seq += (uint32_t)b.nops + 1;
        int rc = nb_run(f->sw_sock, &b, commit_err, c);
        nb_free(&b);
        if (rc < 0)
            entry_fail(c, NULL, rc, "fabric: RTM_GETLINK of %s in the switch netns (pid %d): %s",
                       what, f->holder, strerror(-rc));
    }
    return 0;
}

static int commit_chunk(struct fl_fabric *f, struct qentry *ents, size_t n, struct commit_ctx *c)
{
    struct nlbatch b;
    int rc = 0, saved = -1;
    char name[16];

    /* 1. Host namespaces: open, check, and open a netlink socket inside. */
    for (size_t i = 0; i < n; i++)
        host_open_ns(c, &ents[i]);
    for (size_t i = 0; i < n; i++) {
        struct qentry *q = &ents[i];
        if (q->err)
            continue;
        if (saved < 0) {
            rc = ns_enter(q->nsfd, &saved);
        } else if (setns(q->nsfd, CLONE_NEWNET) < 0) {
            rc = -errno;
        }
        if (rc < 0) {
            entry_fail(c, q, rc, "fabric: setns into netns of host %d (pid %d): %s", q->idx,
                       (int)q->pid, strerror(-rc));
            rc = 0;
            continue;
        }
        q->sock = rtnl_socket();
        if (q->sock < 0) {
            entry_fail(c, q, q->sock,
                       "fabric: NETLINK_ROUTE socket in netns of host %d (pid %d): %s", q->idx,
                       (int)q->pid, strerror(-q->sock));
            q->sock = -1;
        }
    }
    if (saved >= 0)
        ns_leave(saved);

    /* 2. Switch batch: (bridges this chunk is the first to need, with their
     * trunks,) (old port away,) veth pair with the peer born in the host
     * netns as eth0 (down until the host batch), port up in its bridge. */
    nb_init(&b, f->seq);
    bool leaf_new[FL_FABRIC_MAX_BRIDGES] = {false};
    for (size_t i = 0; i < n; i++) {
        int br = bridge_of(ents[i].idx);
        if (!ents[i].err && !f->bridge_made[br] && !leaf_new[br]) {
            leaf_new[br] = true;
            if (!put_leaf(&b, f, br))
                goto nomem;
        }
    }
    for (size_t i = 0; i < n; i++) {
        struct qentry *q = &ents[i];
        if (q->err)
            continue;
        int port = FL_FABRIC_PORT_IFINDEX_BASE + q->idx;
        struct nlmsghdr *nlh;
        if (is_attached(f, q->idx)) {
            nlh = nb_put_link(&b, RTM_DELLINK, 0, port, 0, OP_PORT_DEL, (int)i);
            if (!nlh)
                goto nomem;
            nb_close(&b, nlh);
        }
        nlh = nb_put_link(&b, RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL, port, 1, OP_VETH_NEW, (int)i);
        if (!nlh)
            goto nomem;
        mnl_attr_put_strz(nlh, IFLA_IFNAME, fl_fabric_port_name(q->idx, name, sizeof name));
        mnl_attr_put_u32(nlh, IFLA_MASTER, (uint32_t)bridge_ifindex(bridge_of(q->idx)));
        /* One queue each: every queue is a pair of sysfs kobjects, and
         * veth defaults to one per possible CPU. */
        mnl_attr_put_u32(nlh, IFLA_NUM_TX_QUEUES, 1);
        mnl_attr_put_u32(nlh, IFLA_NUM_RX_QUEUES, 1);
        struct nlattr *li = mnl_attr_nest_start(nlh, IFLA_LINKINFO);
        mnl_attr_put_strz(nlh, IFLA_INFO_KIND, "veth");
        struct nlattr *data = mnl_attr_nest_start(nlh, IFLA_INFO_DATA);
        struct nlattr *peer = mnl_attr_nest_start(nlh, VETH_INFO_PEER);
        struct ifinfomsg *pifm = mnl_nlmsg_get_payload_tail(nlh);
        memset(pifm, 0, sizeof *pifm);
        pifm->ifi_family = AF_UNSPEC;
        pifm->ifi_index = FL_FABRIC_ETH0_IFINDEX;
        nlh->nlmsg_len += MNL_ALIGN(sizeof *pifm);
        mnl_attr_put_strz(nlh, IFLA_IFNAME, FL_FABRIC_HOST_IFNAME);
        unsigned char mac[6];
        fl_fabric_mac(q->idx, mac);
        mnl_attr_put(nlh, IFLA_ADDRESS, sizeof mac, mac);
        mnl_attr_put_u32(nlh, IFLA_NET_NS_FD, (uint32_t)q->nsfd);
        mnl_attr_put_u32(nlh, IFLA_NUM_TX_QUEUES, 1);
        mnl_attr_put_u32(nlh, IFLA_NUM_RX_QUEUES, 1);
        mnl_attr_nest_end(nlh, peer);
        mnl_attr_nest_end(nlh, data);
        mnl_attr_nest_end(nlh, li);
        nb_close(&b, nlh);
        nlh = nb_put_link(&b, RTM_NEWLINK, 0, port, 0, OP_PORT_AF, (int)i);
        if (!nlh)
            goto nomem;
        put_addrgenmode_none(nlh);
        nb_close(&b, nlh);
    }
    f->seq += (uint32_t)b.nops + 1;
    rc = nb_run(f->sw_sock, &b, commit_err, c);
    if (rc < 0) {
        for (size_t i = 0; i < n; i++) {
            entry_fail(c, &ents[i], rc, "fabric: netlink to the switch netns (pid %d): %s",
                       f->holder, strerror(-rc));
            /* Unknown outcome: a pair may exist, so the slot is kept as
             * "may exist" and the next attach deletes it first. */
            if (set_attached(f, ents[i].idx, true) < 0)
                goto nomem;
        }
        goto cleanup;
    }
    /* A bridge whose messages all passed is made; one that failed is
     * tried again by the next commit that needs it. */
    for (int br = 1; br < FL_FABRIC_MAX_BRIDGES; br++)
        if (leaf_new[br] && !c->leaf_failed[br])
            f->bridge_made[br] = true;
    /* attached[idx] means "a pair of idx may exist": set as soon as one was
     * created, cleared only by a successful detach, so that the next attach
     * always deletes a leftover first (ENODEV being fine). */
    for (size_t i = 0; i < n; i++) {
        struct qentry *q = &ents[i];
        if (!q->err) {
            q->created = true;
            if (set_attached(f, q->idx, true) < 0)
                goto nomem;
            f->pids[q->idx] = q->pid;
        }
    }
    nb_free(&b);

    /* 3. One batch per host netns: eth0 without IPv6 LL, up, address; lo up. */
    for (size_t i = 0; i < n; i++) {
        struct qentry *q = &ents[i];
        if (!q->created)
            continue;
        nb_init(&b, 1);
        struct nlmsghdr *nlh =
            nb_put_link(&b, RTM_NEWLINK, 0, FL_FABRIC_ETH0_IFINDEX, 0, OP_ETH0_AF, (int)i);
        if (!nlh)
            goto nomem;
        put_addrgenmode_none(nlh);
        nb_close(&b, nlh);
        nlh = nb_put_link(&b, RTM_NEWLINK, 0, FL_FABRIC_ETH0_IFINDEX, 1, OP_ETH0_UP, (int)i);
        if (!nlh)
            goto nomem;
        nb_close(&b, nlh);
        nlh = nb_put_link(&b, RTM_NEWLINK, 0, LO_IFINDEX, 1, OP_LO_UP, (int)i);
        if (!nlh)
            goto nomem;
        nb_close(&b, nlh);
        nlh = nb_put(&b, RTM_NEWADDR, NLM_F_CREATE | NLM_F_EXCL, OP_ADDR, (int)i);
        if (!nlh)
            goto nomem;
        struct ifaddrmsg *ifa = mnl_nlmsg_put_extra_header(nlh, sizeof *ifa);
        ifa->ifa_family = AF_INET;
        ifa->ifa_prefixlen = FL_FABRIC_PREFIXLEN;
        ifa->ifa_scope = RT_SCOPE_UNIVERSE;
        ifa->ifa_index = FL_FABRIC_ETH0_IFINDEX;
        uint32_t addr = fl_fabric_addr(q->idx);
        mnl_attr_put_u32(nlh, IFA_LOCAL, addr);
        mnl_attr_put_u32(nlh, IFA_ADDRESS, addr);
        nb_close(&b, nlh);
        /* a pinned host's peers, or every peer of a pinned host */
        for (size_t j = 0; f->npinned && j < f->attached_cap; j++)
            if (f->attached[j] && (int)j != q->idx && (f->pinned[j] || f->pinned[q->idx]) &&
                !put_neigh(&b, (int)j, (int)i))
                goto nomem;
        rc = nb_run(q->sock, &b, commit_err, c);
        nb_free(&b);
        if (rc < 0) {
            entry_fail(c, q, rc, "fabric: netlink in netns of host %d (pid %d): %s", q->idx,
                       (int)q->pid, strerror(-rc));
            rc = 0;
        }
    }
    memset(&b, 0, sizeof b);

    /* 3b. Make every new port forward now.  eth0 going up turned the
     * carrier of its switch end on, but the bridge learns of it (port ->
     * forwarding, qdisc activated) only when the linkwatch work runs, which
     * can lag by up to a second under load, so the first ARP or SYN would
     * be lost.  RTM_GETLINK of a device runs its pending linkwatch event
     * synchronously (rtnl_getlink -> linkwatch_sync_dev).  Replies are
     * ignored; at most SYNC_BATCH of them are queued on the socket at once.
     * A new trunk's ends first (both in the switch: up since step 2). */
    {
        int tx[2 * FL_FABRIC_MAX_BRIDGES], ttag[2 * FL_FABRIC_MAX_BRIDGES];
        size_t nt = 0;
        for (int br = 1; br < FL_FABRIC_MAX_BRIDGES; br++)
            if (leaf_new[br] && f->bridge_made[br]) {
                tx[nt] = trunk0_ifindex(br), ttag[nt++] = -1;
                tx[nt] = trunkb_ifindex(br), ttag[nt++] = -1;
            }
        int *px = malloc((n ? n : 1) * sizeof *px), *ptag = malloc((n ? n : 1) * sizeof *ptag);
        size_t np = 0;
        for (size_t at = 0; px && ptag && at < n; at++)
            if (ents[at].created && !ents[at].err)
                px[np] = FL_FABRIC_PORT_IFINDEX_BASE + ents[at].idx, ptag[np++] = (int)at;
        int x = !px || !ptag ? -ENOMEM : sync_links(f, c, tx, ttag, nt, "new trunks");
        if (x == 0)
            x = sync_links(f, c, px, ptag, np, "new ports");
        free(px);
        free(ptag);
        if (x < 0)
            goto nomem;
    }
    memset(&b, 0, sizeof b);

    /* 4. Undo half-made pairs; mark the others attached. */
    nb_init(&b, f->seq);
    for (size_t i = 0; i < n; i++) {
        struct qentry *q = &ents[i];
        if (!q->created)
            continue;
        if (!q->err)
            continue;
        struct nlmsghdr *nlh = nb_put_link(&b, RTM_DELLINK, 0, FL_FABRIC_PORT_IFINDEX_BASE + q->idx,
                                           0, OP_DETACH, (int)i);
        if (!nlh)
            goto nomem;
        nb_close(&b, nlh);
    }
    f->seq += (uint32_t)b.nops + 1;
    if (b.nops) {
        struct commit_ctx undo = *c;
        undo.first = 1; /* keep the first, real error */
        nb_run(f->sw_sock, &b, commit_err, &undo);
    }
    rc = 0;
    goto cleanup;

nomem:
    rc = -ENOMEM;
    entry_fail(c, NULL, rc, "fabric: out of memory");
cleanup:
    nb_free(&b);
    for (size_t i = 0; i < n; i++) {
        if (ents[i].nsfd >= 0)
            close(ents[i].nsfd);
        if (ents[i].sock >= 0)
            close(ents[i].sock);
        ents[i].nsfd = ents[i].sock = -1;
    }
    return rc;
}

int fl_fabric_commit(struct fl_fabric *f, char *err, size_t errlen)
{
    struct commit_ctx c = {.f = f, .ents = f->queue, .err = err, .errlen = errlen};
    for (size_t at = 0; at < f->nq; at += CHUNK) {
        size_t n = f->nq - at < CHUNK ? f->nq - at : CHUNK;
        c.ents = f->queue + at;
        commit_chunk(f, c.ents, n, &c);
    }
    f->nq = 0;
    return c.first;
}

struct detach_ctx {
    int idx;
    char *err;
    size_t errlen;
    int first;
};

static void detach_err(void *vctx, const struct op *op, int e, const char *ext)
{
    struct detach_ctx *d = vctx;
    (void)op;
    if (d->first)
        return;
    d->first = e;
    fl_netem_seterr(d->err, d->errlen,
                    "fabric: RTM_DELLINK h%d of host %d in switch netns: %s%s%s%s", d->idx, d->idx,
                    strerror(-e), ext ? " (" : "", ext ? ext : "", ext ? ")" : "");
}

int fl_fabric_detach(struct fl_fabric *f, int host_idx, char *err, size_t errlen)
{
    if (!idx_ok(host_idx)) {
        fl_netem_seterr(err, errlen, "fabric: detach host %d: invalid host index", host_idx);
        return -EINVAL;
    }
    for (size_t i = 0; i < f->nq; i++) {
        if (f->queue[i].idx == host_idx) {
            memmove(&f->queue[i], &f->queue[i + 1], (f->nq - i - 1) * sizeof *f->queue);
            f->nq--;
            break;
        }
    }
    struct nlbatch b;
    nb_init(&b, f->seq);
    struct nlmsghdr *nlh =
        nb_put_link(&b, RTM_DELLINK, 0, FL_FABRIC_PORT_IFINDEX_BASE + host_idx, 0, OP_DETACH, -1);
    if (!nlh) {
        nb_free(&b);
        fl_netem_seterr(err, errlen, "fabric: out of memory");
        return -ENOMEM;
    }
    nb_close(&b, nlh);
    f->seq += 2;
    struct detach_ctx d = {host_idx, err, errlen, 0};
    int rc = nb_run(f->sw_sock, &b, detach_err, &d);
    nb_free(&b);
    if (rc < 0) {
        fl_netem_seterr(err, errlen, "fabric: netlink to the switch netns (pid %d): %s", f->holder,
                        strerror(-rc));
        return rc;
    }
    if (d.first)
        return d.first;
    set_attached(f, host_idx, false);
    return 0;
}

/* ---- partitions (nftables in the switch netns) ------------------------- */

/* A growable string. */
struct sbuf {
    char *s;
    size_t len, cap;
    bool oom;
};

static void sb_printf(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(struct sbuf *b, const char *fmt, ...)
{
    if (b->oom)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->s ? b->s + b->len : NULL, b->s ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->oom = true;
            return;
        }
        if (b->s && (size_t)n < b->cap - b->len) {
            b->len += (size_t)n;
            return;
        }
        size_t ncap = b->cap ? b->cap * 2 : 1024;
        while (ncap < b->len + (size_t)n + 1)
            ncap *= 2;
        char *ns = realloc(b->s, ncap);
        if (!ns) {
            b->oom = true;
            return;
        }
        b->s = ns;
        b->cap = ncap;
    }
}

static void sb_ports(struct sbuf *b, const int *hosts, size_t n)
{
    sb_printf(b, "{ ");
    for (size_t i = 0; i < n; i++)
        sb_printf(b, "%s\"h%d\"", i ? ", " : "", hosts[i]);
    sb_printf(b, " }");
}

static void sb_macs(struct sbuf *b, const int *hosts, size_t n)
{
    sb_printf(b, "{ ");
    for (size_t i = 0; i < n; i++) {
        unsigned char m[6];
        fl_fabric_mac(hosts[i], m);
        sb_printf(b, "%s%02x:%02x:%02x:%02x:%02x:%02x", i ? ", " : "", m[0], m[1], m[2], m[3], m[4],
                  m[5]);
    }
    sb_printf(b, " }");
}

char *fl_fabric_nft_match(const int *from, size_t nfrom, const int *to, size_t nto)
{
    struct sbuf sb = {0};
    sb_printf(&sb, "iifname ");
    sb_ports(&sb, from, nfrom);
    sb_printf(&sb, " oifname ");
    sb_ports(&sb, to, nto);
    sb_printf(&sb, "\n");
    /* some pair on two bridges: those frames come to the port through a trunk */
    bool cross = false;
    for (size_t i = 0; i < nfrom && !cross; i++)
        for (size_t j = 0; j < nto && !cross; j++)
            cross = bridge_of(from[i]) != bridge_of(to[j]);
    if (cross) {
        sb_printf(&sb, "iifname \"tr*\" ether saddr ");
        sb_macs(&sb, from, nfrom);
        sb_printf(&sb, " oifname ");
        sb_ports(&sb, to, nto);
        sb_printf(&sb, "\n");
    }
    if (sb.oom) {
        free(sb.s);
        return NULL;
    }
    return sb.s;
}

/* sb gets "add rule bridge <table> p<id> <match> <stmt>" for each line of
 * the matches of frames from `from` to `to`. */
static void sb_rules(struct sbuf *sb, int id, const int *from, size_t nfrom, const int *to,
                     size_t nto, const char *stmt)
{
    char *m = fl_fabric_nft_match(from, nfrom, to, nto);
    if (!m) {
        sb->oom = true;
        return;
    }
    for (const char *l = m; *l;) {
        size_t n = strcspn(l, "\n");
        if (n)
            sb_printf(sb, "add rule bridge %s p%d %.*s %s\n", FL_FABRIC_NFT_TABLE, id, (int)n, l,
                      stmt);
        l += n;
        if (*l)
            l++;
    }
    free(m);
}

/* The base chain (bridge forward hook) jumping to each rule's chain p<id>. */
#define BASE_CHAIN "fl_base"

/* Runs an nft script in the switch netns (creating the context and the
 * table the first time).  On failure writes "fabric: nft <what> ...". */
static int nft_run(struct fl_fabric *f, const char *script, const char *what, char *err,
                   size_t errlen)
{
    int saved = -1;
    int rc = ns_enter(f->holder_pidfd, &saved);
    if (rc < 0) {
        fl_netem_seterr(err, errlen, "fabric: setns into the switch netns (pid %d) for nft %s: %s",
                        f->holder, what, strerror(-rc));
        return rc;
    }
    if (!f->nft) {
        f->nft = nft_ctx_new(NFT_CTX_DEFAULT);
        if (!f->nft) {
            ns_leave(saved);
            fl_netem_seterr(err, errlen, "fabric: nft_ctx_new: failed");
            return -ENOMEM;
        }
        nft_ctx_buffer_output(f->nft);
        nft_ctx_buffer_error(f->nft);
        /* The one base chain of the run: never deleted, since unregistering
         * a netfilter hook makes the kernel drop every packet queued in the
         * namespace (the link emulator's held packets). */
        if (nft_run_cmd_from_buffer(
                f->nft, "add table bridge " FL_FABRIC_NFT_TABLE "\n"
                        "add chain bridge " FL_FABRIC_NFT_TABLE " " BASE_CHAIN
                        " { type filter hook forward priority 0; policy accept; }\n") != 0) {
            ns_leave(saved);
            const char *e = nft_ctx_get_error_buffer(f->nft);
            fl_netem_seterr(err, errlen,
                            "fabric: nft add table bridge %s in switch netns (pid %d): %s",
                            FL_FABRIC_NFT_TABLE, f->holder, e && *e ? e : "failed");
            nft_ctx_free(f->nft);
            f->nft = NULL;
            return -EIO;
        }
    }
    int r = nft_run_cmd_from_buffer(f->nft, script);
    ns_leave(saved);
    if (r != 0) {
        const char *e = nft_ctx_get_error_buffer(f->nft);
        char line[256];
        snprintf(line, sizeof line, "%s", e && *e ? e : "failed");
        line[strcspn(line, "\n")] = 0;
        fl_netem_seterr(err, errlen, "fabric: nft %s in switch netns (pid %d): %s", what, f->holder,
                        line);
        return -EIO;
    }
    return 0;
}

static bool hosts_valid(const int *h, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!idx_ok(h[i]))
            return false;
    return true;
}

/* Runs sb (chain p<id> and its rules) with the base chain's jump to it, in
 * nft's messages "<what> p<id>"; frees sb's text. */
static int add_rule(struct fl_fabric *f, struct sbuf *sb, int id, int *rule_id, const char *what,
                    char *err, size_t errlen)
{
    if (!sb->oom && f->nrules == f->rulecap) {
        size_t ncap = f->rulecap ? f->rulecap * 2 : 16;
        int *nr = realloc(f->rules, ncap * sizeof *nr);
        if (nr) {
            f->rules = nr;
            f->rulecap = ncap;
        } else {
            sb->oom = true;
        }
    }
    sb_printf(sb, "add rule bridge %s " BASE_CHAIN " jump p%d\n", FL_FABRIC_NFT_TABLE, id);
    char w[64];
    snprintf(w, sizeof w, "%s p%d", what, id);
    int rc = -ENOMEM;
    if (sb->oom) {
        fl_netem_seterr(err, errlen, "fabric: out of memory");
    } else if ((rc = nft_run(f, sb->s, w, err, errlen)) == 0) {
        f->rules[f->nrules++] = id;
        f->next_rule++;
        *rule_id = id;
    }
    free(sb->s);
    return rc;
}

/* Each partition/block is its own regular chain p<id>, jumped to from the
 * base chain (add_rule adds the jump), so heal deletes exactly it and no
 * hook is ever unregistered. */
static void sb_chain(struct sbuf *sb, int id)
{
    sb_printf(sb, "add chain bridge %s p%d\n", FL_FABRIC_NFT_TABLE, id);
}

int fl_fabric_partition(struct fl_fabric *f, const int *const *groups, const size_t *group_sizes,
                        size_t ngroups, int *rule_id, char *err, size_t errlen)
{
    size_t nonempty = 0;
    for (size_t g = 0; g < ngroups; g++) {
        if (group_sizes[g] && !groups[g]) {
            fl_netem_seterr(err, errlen, "fabric: partition: group %zu is NULL", g);
            return -EINVAL;
        }
        if (!hosts_valid(groups[g], group_sizes[g])) {
            fl_netem_seterr(err, errlen, "fabric: partition: group %zu holds an invalid host index",
                            g);
            return -EINVAL;
        }
        nonempty += group_sizes[g] > 0;
    }
    if (nonempty < 2) {
        fl_netem_seterr(err, errlen,
                        "fabric: partition needs at least two non-empty groups (got %zu)",
                        nonempty);
        return -EINVAL;
    }
    /* A host in two groups has no meaning. */
    for (size_t g = 0; g < ngroups; g++)
        for (size_t i = 0; i < group_sizes[g]; i++)
            for (size_t h = g; h < ngroups; h++)
                for (size_t j = (h == g ? i + 1 : 0); j < group_sizes[h]; j++)
                    if (groups[g][i] == groups[h][j]) {
                        fl_netem_seterr(
                            err, errlen,
                            "fabric: partition: host %d is named twice (groups %zu and %zu)",
                            groups[g][i], g, h);
                        return -EINVAL;
                    }

    int id = f->next_rule;
    struct sbuf sb = {0};
    sb_chain(&sb, id);
    for (size_t g = 0; g < ngroups; g++) {
        for (size_t h = 0; h < ngroups; h++) {
            if (g == h || !group_sizes[g] || !group_sizes[h])
                continue;
            /* Every frame, ARP included: both ways are cut. */
            sb_rules(&sb, id, groups[g], group_sizes[g], groups[h], group_sizes[h], "drop");
        }
    }
    return add_rule(f, &sb, id, rule_id, "partition", err, errlen);
}

int fl_fabric_block(struct fl_fabric *f, const int *from, size_t nfrom, const int *to, size_t nto,
                    int *rule_id, char *err, size_t errlen)
{
    if (!nfrom || !nto || !from || !to) {
        fl_netem_seterr(err, errlen, "fabric: block needs non-empty from and to lists");
        return -EINVAL;
    }
    if (!hosts_valid(from, nfrom) || !hosts_valid(to, nto)) {
        fl_netem_seterr(err, errlen, "fabric: block: invalid host index");
        return -EINVAL;
    }
    int id = f->next_rule;
    struct sbuf sb = {0};
    sb_chain(&sb, id);
    /* ARP passes both ways, or the open direction could not resolve
     * addresses (its ARP replies travel the blocked way); IPv4 and every
     * other frame from `from` to `to` is dropped. */
    sb_rules(&sb, id, from, nfrom, to, nto, "ether type != arp drop");
    return add_rule(f, &sb, id, rule_id, "block", err, errlen);
}

int fl_fabric_add_chain(struct fl_fabric *f, const char *rules, const char *what, int *rule_id,
                        char *err, size_t errlen)
{
    if (!rules || !*rules) {
        fl_netem_seterr(err, errlen, "fabric: %s: no rules", what);
        return -EINVAL;
    }
    int id = f->next_rule;
    struct sbuf sb = {0};
    sb_chain(&sb, id);
    for (const char *l = rules; *l;) {
        size_t n = strcspn(l, "\n");
        if (n)
            sb_printf(&sb, "add rule bridge %s p%d %.*s\n", FL_FABRIC_NFT_TABLE, id, (int)n, l);
        l += n;
        if (*l)
            l++;
    }
    return add_rule(f, &sb, id, rule_id, what, err, errlen);
}

int fl_fabric_heal(struct fl_fabric *f, int rule_id, char *err, size_t errlen)
{
    size_t i;
    for (i = 0; i < f->nrules && f->rules[i] != rule_id; i++)
        ;
    if (i == f->nrules) {
        fl_netem_seterr(err, errlen, "fabric: heal p%d: no such partition (healed already?)",
                        rule_id);
        return -ENOENT;
    }
    /* One transaction: the base chain's jumps made again without this one
     * (in the order the rules were added, so the last rate mark still
     * wins), then its chain goes.  The base chain itself stays. */
    struct sbuf sb = {0};
    char what[32];
    sb_printf(&sb, "flush chain bridge %s " BASE_CHAIN "\n", FL_FABRIC_NFT_TABLE);
    for (size_t k = 0; k < f->nrules; k++)
        if (k != i)
            sb_printf(&sb, "add rule bridge %s " BASE_CHAIN " jump p%d\n", FL_FABRIC_NFT_TABLE,
                      f->rules[k]);
    sb_printf(&sb, "flush chain bridge %s p%d\ndelete chain bridge %s p%d\n", FL_FABRIC_NFT_TABLE,
              rule_id, FL_FABRIC_NFT_TABLE, rule_id);
    snprintf(what, sizeof what, "heal p%d", rule_id);
    int rc = sb.oom ? -ENOMEM : nft_run(f, sb.s, what, err, errlen);
    if (sb.oom)
        fl_netem_seterr(err, errlen, "fabric: out of memory");
    free(sb.s);
    if (rc < 0)
        return rc;
    memmove(&f->rules[i], &f->rules[i + 1], (f->nrules - i - 1) * sizeof *f->rules);
    f->nrules--;
    return 0;
}

/* ---- bridge-netfilter ---------------------------------------------------- */

int fl_fabric_set_nf_call_iptables(struct fl_fabric *f, char *err, size_t errlen)
{
    struct nlbatch b;
    nb_init(&b, f->seq);
    f->nf_call_iptables = true; /* bridges made from now on (put_bridge) */
    for (int br = 0; br < FL_FABRIC_MAX_BRIDGES; br++) {
        if (!f->bridge_made[br])
            continue;
        struct nlmsghdr *nlh =
            nb_put_link(&b, RTM_NEWLINK, 0, bridge_ifindex(br), 0, OP_NF_CALL, br);
        if (!nlh) {
            nb_free(&b);
            fl_netem_seterr(err, errlen, "fabric: out of memory");
            return -ENOMEM;
        }
        struct nlattr *li = mnl_attr_nest_start(nlh, IFLA_LINKINFO);
        mnl_attr_put_strz(nlh, IFLA_INFO_KIND, "bridge");
        struct nlattr *data = mnl_attr_nest_start(nlh, IFLA_INFO_DATA);
        mnl_attr_put_u8(nlh, IFLA_BR_NF_CALL_IPTABLES, 1);
        mnl_attr_nest_end(nlh, data);
        mnl_attr_nest_end(nlh, li);
        nb_close(&b, nlh);
    }
    f->seq += (uint32_t)b.nops + 1;
    struct create_ctx cc = {err, errlen, 0};
    int rc = nb_run(f->sw_sock, &b, create_err, &cc);
    nb_free(&b);
    if (rc < 0) {
        fl_netem_seterr(err, errlen, "fabric: netlink to the switch netns (pid %d): %s", f->holder,
                        strerror(-rc));
        return rc;
    }
    return cc.first;
}

/* ---- pinned neighbours ------------------------------------------------- */

struct pin_ctx {
    int idx, in, pid;
    char *err;
    size_t errlen;
    int first;
};

static void pin_err(void *vctx, const struct op *op, int e, const char *ext)
{
    struct pin_ctx *p = vctx;
    (void)op;
    if (p->first)
        return;
    p->first = e;
    fl_netem_seterr(p->err, p->errlen,
                    "fabric: RTM_NEWNEIGH (permanent, host %d) on %s of host %d in netns of pid "
                    "%d: %s%s%s%s",
                    p->idx, FL_FABRIC_HOST_IFNAME, p->in, p->pid, strerror(-e), ext ? " (" : "",
                    ext ? ext : "", ext ? ")" : "");
}

/* Host in's table gets a permanent entry for idx, or (in == idx) for every
 * other attached host: one batch in its netns.  0 also when the host is
 * gone (its next commit pins what it needs). */
/* A NETLINK_ROUTE socket in the netns of attached host in: the socket, 0
 * when the host is gone, or -errno (err set). */
static int host_socket(struct fl_fabric *f, int in, char *err, size_t errlen)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/ns/net", (int)f->pids[in]);
    int nsfd = open(path, O_RDONLY | O_CLOEXEC);
    if (nsfd < 0)
        return errno == ENOENT || errno == ESRCH ? 0 : -errno;
    int saved = -1, rc = ns_enter(nsfd, &saved);
    close(nsfd);
    if (rc < 0) {
        fl_netem_seterr(err, errlen, "fabric: setns into netns of host %d (pid %d): %s", in,
                        (int)f->pids[in], strerror(-rc));
        return rc;
    }
    int sock = rtnl_socket();
    ns_leave(saved);
    if (sock < 0)
        fl_netem_seterr(err, errlen, "fabric: netlink socket in netns of host %d (pid %d): %s", in,
                        (int)f->pids[in], strerror(-sock));
    return sock;
}

static int pin_in(struct fl_fabric *f, int in, int idx, char *err, size_t errlen)
{
    int sock = host_socket(f, in, err, errlen);
    if (sock <= 0)
        return sock;
    struct nlbatch b;
    nb_init(&b, 1);
    int rc = 0;
    for (size_t j = 0; j < f->attached_cap && rc == 0; j++)
        if (f->attached[j] && (int)j != in && (in != idx ? (int)j == idx : true) &&
            !put_neigh(&b, (int)j, -1))
            rc = -ENOMEM;
    struct pin_ctx c = {idx, in, (int)f->pids[in], err, errlen, 0};
    if (rc == 0 && (rc = nb_run(sock, &b, pin_err, &c)) == 0)
        rc = c.first;
    else if (rc < 0 && !c.first)
        fl_netem_seterr(err, errlen, "fabric: RTM_NEWNEIGH in netns of host %d (pid %d): %s", in,
                        (int)f->pids[in], strerror(-rc));
    nb_free(&b);
    close(sock);
    return rc;
}

int fl_fabric_pin_neighbours(struct fl_fabric *f, int host_idx, char *err, size_t errlen)
{
    if (!idx_ok(host_idx)) {
        fl_netem_seterr(err, errlen, "fabric: pin neighbours of host %d: invalid host index",
                        host_idx);
        return -EINVAL;
    }
    if (grow(f, host_idx) < 0)
        return -ENOMEM;
    if (f->pinned[host_idx])
        return 0;
    f->pinned[host_idx] = 1;
    f->npinned++;
    int rc = 0;
    for (size_t j = 0; j < f->attached_cap && rc == 0; j++)
        if (f->attached[j] && f->pids[j] > 0)
            rc = pin_in(f, (int)j, host_idx, err, errlen);
    return rc;
}

int fl_fabric_sync_host_link(struct fl_fabric *f, int host_idx, char *err, size_t errlen)
{
    if (!idx_ok(host_idx) || !is_attached(f, host_idx) || f->pids[host_idx] <= 0)
        return 0;
    int sock = host_socket(f, host_idx, err, errlen);
    if (sock <= 0)
        return sock;
    struct nlbatch b;
    nb_init(&b, 1);
    int rc = -ENOMEM;
    struct nlmsghdr *nlh =
        nb_put_link(&b, RTM_GETLINK, 0, FL_FABRIC_ETH0_IFINDEX, 0, OP_PORT_SYNC, -1);
    if (nlh) {
        mnl_attr_put_u32(nlh, IFLA_EXT_MASK, RTEXT_FILTER_SKIP_STATS);
        nb_close(&b, nlh);
        struct pin_ctx c = {host_idx, host_idx, (int)f->pids[host_idx], NULL, 0, 0};
        rc = nb_run(sock, &b, pin_err, &c);
    }
    if (rc < 0)
        fl_netem_seterr(err, errlen,
                        "fabric: RTM_GETLINK %s (link sync) of host %d in netns of "
                        "pid %d: %s",
                        FL_FABRIC_HOST_IFNAME, host_idx, (int)f->pids[host_idx], strerror(-rc));
    nb_free(&b);
    close(sock);
    return rc;
}
