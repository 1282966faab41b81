/*
 * netem/link.c: the mechanics of link faults (link.h): nft chains for loss
 * and for the priority marks of rate limits (through fabric.c, which owns
 * the nft context and the chain ids), htb qdiscs and classes on switch
 * ports, and ports taken down, through rtnetlink in the switch namespace (no
 * `tc` or `ip` processes).
 *
 * Books: every applied fault is a struct lfault (ACTIVE until healed, then
 * removed); per port, down[idx] counts the faults holding it down and
 * htb[idx] says whether our htb root is on it now.  Invariants: a port is
 * administratively down iff down[idx] > 0 (as far as we did it); a class
 * 1:<cid> exists on port p for each active rate fault with p among its
 * receivers, unless p was gone (host down) when it was made, in which case
 * fl_links_port_remade makes it.  A port that disappears takes its qdisc
 * with it, so htb[idx] is cleared when the port is remade.
 *
 * The netlink socket is opened inside the switch namespace once (setns,
 * socket, setns back); messages go one at a time with an ACK each: a fault
 * touches a handful of ports.
 */
#include "netem/link.h"
#include "netem/nsock.h"
#include "netem/seterr.h"
#include "netem/emu.h"
#include "netem/fabric.h"
#include "netem/nfq_rule.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/netlink.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>
#include <libmnl/libmnl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define HTB_HANDLE 0x10000u /* 1: */
#define CID_MAX 0xfffe

struct lfault {
    int id;
    enum fl_link_scope scope;
    int chain; /* fabric chain id, 0 = none */
    int cid;   /* htb class minor, 0 = no rate */
    uint64_t rate_bit;
    int *rx; /* ports holding class cid */
    size_t nrx;
    int *ports; /* down: the hosts whose ports it takes down */
    size_t nports;
    bool is_down;             /* counted in down[] now */
    bool emu_rule, emu_queue; /* the nfq rule / the emulator queue (number = id) exist */
    uint64_t emu_handle;      /* of the nfq jump rule */
};

struct fl_links {
    struct fl_fabric *f;
    pid_t sw_pid;
    struct mnl_socket *nl;
    struct fl_emu *emu; /* made at the first emulated fault */
    uint32_t seq;
    int next_id, next_cid;
    struct lfault *faults;
    size_t nfaults, cap;
    unsigned short down[FL_FABRIC_MAX_HOSTS];
    unsigned char htb[FL_FABRIC_MAX_HOSTS];
};

/* ---- netlink ------------------------------------------------------------ */

int fl_links_new(struct fl_links **out, struct fl_fabric *f, char *err, size_t errlen)
{
    *out = NULL;
    struct fl_links *l = calloc(1, sizeof *l);
    if (!l) {
        fl_netem_seterr(err, errlen, "link: out of memory");
        return -ENOMEM;
    }
    l->f = f;
    l->sw_pid = fl_fabric_switch_pid(f);
    l->next_id = 1;
    l->next_cid = 1;
    l->seq = (uint32_t)time(NULL);
    int rc = 0;
    l->nl = fl_netem_mnl_in(l->sw_pid, NETLINK_ROUTE);
    if (!l->nl || mnl_socket_bind(l->nl, 0, MNL_SOCKET_AUTOPID) < 0) {
        rc = -errno;
        fl_netem_seterr(err, errlen, "link: NETLINK_ROUTE socket in the switch netns (pid %d): %s",
                        (int)l->sw_pid, strerror(-rc));
        goto cleanup;
    }
    int one = 1;
    mnl_socket_setsockopt(l->nl, NETLINK_EXT_ACK, &one, sizeof one);
    mnl_socket_setsockopt(l->nl, NETLINK_CAP_ACK, &one, sizeof one);
cleanup:
    if (rc < 0) {
        fl_links_free(l);
        return rc;
    }
    *out = l;
    return 0;
}

void fl_links_free(struct fl_links *l)
{
    if (!l)
        return;
    if (l->nl)
        mnl_socket_close(l->nl);
    fl_emu_free(l->emu);
    for (size_t i = 0; i < l->nfaults; i++) {
        free(l->faults[i].rx);
        free(l->faults[i].ports);
    }
    free(l->faults);
    free(l);
}

/* Sends one request and waits for its ACK: 0 or -errno (ext: the kernel's
 * extended ack message, if any). */
static int nl_talk(struct fl_links *l, struct nlmsghdr *nlh, char *ext, size_t extlen)
{
    char buf[16384] __attribute__((aligned(8)));
    ext[0] = 0;
    nlh->nlmsg_flags |= NLM_F_REQUEST | NLM_F_ACK;
    nlh->nlmsg_seq = ++l->seq;
    if (mnl_socket_sendto(l->nl, nlh, nlh->nlmsg_len) < 0)
        return -errno;
    for (;;) {
        ssize_t n = mnl_socket_recvfrom(l->nl, buf, sizeof buf);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        int left = (int)n;
        for (struct nlmsghdr *h = (struct nlmsghdr *)buf; mnl_nlmsg_ok(h, left);
             h = mnl_nlmsg_next(h, &left)) {
            if (h->nlmsg_seq != l->seq || h->nlmsg_type != NLMSG_ERROR)
                continue;
            const struct nlmsgerr *e = mnl_nlmsg_get_payload(h);
            if (e->error && (h->nlmsg_flags & NLM_F_ACK_TLVS)) {
                size_t hl = sizeof(struct nlmsghdr) + sizeof *e;
                if (!(h->nlmsg_flags & NLM_F_CAPPED))
                    hl = sizeof(struct nlmsghdr) + sizeof(int) + NLMSG_ALIGN(e->msg.nlmsg_len);
                const struct nlattr *a;
                mnl_attr_for_each(a, h, hl - sizeof(struct nlmsghdr))
                {
                    if (mnl_attr_get_type(a) == NLMSGERR_ATTR_MSG)
                        snprintf(ext, extlen, " (%s)", mnl_attr_get_str(a));
                }
            }
            return e->error;
        }
    }
}

static struct nlmsghdr *tc_msg(char *buf, uint16_t type, uint16_t flags, int port, uint32_t handle,
                               uint32_t parent)
{
    struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
    nlh->nlmsg_type = type;
    nlh->nlmsg_flags = flags;
    struct tcmsg *t = mnl_nlmsg_put_extra_header(nlh, sizeof *t);
    t->tcm_family = AF_UNSPEC;
    t->tcm_ifindex = FL_FABRIC_PORT_IFINDEX_BASE + port;
    t->tcm_handle = handle;
    t->tcm_parent = parent;
    return nlh;
}

/* htb root 1: on port (default class 0: unclassified traffic is not shaped).
 * A missing port (its host is down) is not an error: port_remade does it. */
static int htb_root(struct fl_links *l, int port, char *err, size_t errlen)
{
    if (l->htb[port])
        return 0;
    char buf[512], ext[256];
    struct nlmsghdr *nlh =
        tc_msg(buf, RTM_NEWQDISC, NLM_F_CREATE | NLM_F_EXCL, port, HTB_HANDLE, TC_H_ROOT);
    mnl_attr_put_strz(nlh, TCA_KIND, "htb");
    struct nlattr *o = mnl_attr_nest_start(nlh, TCA_OPTIONS);
    struct tc_htb_glob g = {.version = TC_HTB_PROTOVER, .rate2quantum = 10, .defcls = 0};
    mnl_attr_put(nlh, TCA_HTB_INIT, sizeof g, &g);
    mnl_attr_nest_end(nlh, o);
    int rc = nl_talk(l, nlh, ext, sizeof ext);
    if (rc == -ENODEV)
        return 0;
    if (rc < 0 && rc != -EEXIST) {
        fl_netem_seterr(err, errlen,
                        "link: RTM_NEWQDISC htb 1: on h%d in switch netns (pid %d): %s%s", port,
                        (int)l->sw_pid, strerror(-rc), ext);
        return rc;
    }
    l->htb[port] = 1;
    return 0;
}

static int htb_class(struct fl_links *l, int port, int cid, uint64_t rate_bit, char *err,
                     size_t errlen)
{
    int rc = htb_root(l, port, err, errlen);
    if (rc < 0 || !l->htb[port])
        return rc;
    char buf[512], ext[256];
    struct nlmsghdr *nlh = tc_msg(buf, RTM_NEWTCLASS, NLM_F_CREATE | NLM_F_EXCL, port,
                                  HTB_HANDLE | (uint32_t)cid, HTB_HANDLE);
    mnl_attr_put_strz(nlh, TCA_KIND, "htb");
    struct nlattr *o = mnl_attr_nest_start(nlh, TCA_OPTIONS);
    uint64_t bps = rate_bit / 8;
    /* burst: 10 ms of the rate plus one frame (tc's default is rate/HZ +
     * mtu); htb times are in psched ticks of 64 ns. */
    uint64_t burst = bps / 100 + 1600;
    uint64_t ticks = burst * 1000000000ULL / bps / 64;
    uint64_t quantum = bps / 10;
    quantum = quantum < 1600 ? 1600 : quantum > 200000 ? 200000 : quantum;
    struct tc_htb_opt opt = {0};
    opt.rate.rate = (uint32_t)bps;
    opt.rate.linklayer = TC_LINKLAYER_ETHERNET;
    opt.ceil = opt.rate;
    opt.buffer = opt.cbuffer = (uint32_t)ticks;
    opt.quantum = (uint32_t)quantum;
    mnl_attr_put(nlh, TCA_HTB_PARMS, sizeof opt, &opt);
    mnl_attr_nest_end(nlh, o);
    rc = nl_talk(l, nlh, ext, sizeof ext);
    if (rc == -ENODEV || rc == -EEXIST)
        return 0;
    if (rc < 0)
        fl_netem_seterr(
            err, errlen,
            "link: RTM_NEWTCLASS htb 1:%x rate %llubit on h%d in switch netns (pid %d): %s%s", cid,
            (unsigned long long)rate_bit, port, (int)l->sw_pid, strerror(-rc), ext);
    return rc;
}

static int htb_class_del(struct fl_links *l, int port, int cid, char *err, size_t errlen)
{
    if (!l->htb[port])
        return 0;
    char buf[256], ext[256];
    struct nlmsghdr *nlh =
        tc_msg(buf, RTM_DELTCLASS, 0, port, HTB_HANDLE | (uint32_t)cid, HTB_HANDLE);
    int rc = nl_talk(l, nlh, ext, sizeof ext);
    if (rc == -ENODEV || rc == -ENOENT)
        return 0;
    if (rc < 0)
        fl_netem_seterr(err, errlen,
                        "link: RTM_DELTCLASS htb 1:%x on h%d in switch netns (pid %d): %s%s", cid,
                        port, (int)l->sw_pid, strerror(-rc), ext);
    return rc;
}

/* Port admin state; going up, RTM_GETLINK runs the pending link-state work
 * of the port and of the host's eth0 at once (as fabric commit does), so
 * both forward when this returns. */
static int port_set_up(struct fl_links *l, int port, bool up, char *err, size_t errlen)
{
    char buf[256], ext[256];
    struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
    nlh->nlmsg_type = RTM_NEWLINK;
    struct ifinfomsg *ifm = mnl_nlmsg_put_extra_header(nlh, sizeof *ifm);
    ifm->ifi_family = AF_UNSPEC;
    ifm->ifi_index = FL_FABRIC_PORT_IFINDEX_BASE + port;
    ifm->ifi_flags = up ? IFF_UP : 0;
    ifm->ifi_change = IFF_UP;
    int rc = nl_talk(l, nlh, ext, sizeof ext);
    if (rc == -ENODEV)
        return 0;
    if (rc < 0) {
        fl_netem_seterr(err, errlen, "link: RTM_NEWLINK h%d %s in switch netns (pid %d): %s%s",
                        port, up ? "up" : "down", (int)l->sw_pid, strerror(-rc), ext);
        return rc;
    }
    if (up) {
        nlh = mnl_nlmsg_put_header(buf);
        nlh->nlmsg_type = RTM_GETLINK;
        ifm = mnl_nlmsg_put_extra_header(nlh, sizeof *ifm);
        ifm->ifi_family = AF_UNSPEC;
        ifm->ifi_index = FL_FABRIC_PORT_IFINDEX_BASE + port;
        mnl_attr_put_u32(nlh, IFLA_EXT_MASK, RTEXT_FILTER_SKIP_STATS);
        /* The reply is the link; the ACK follows it.  Only the ACK matters. */
        nl_talk(l, nlh, ext, sizeof ext);
        /* and the host's end, whose carrier just came back */
        return fl_fabric_sync_host_link(l->f, port, err, errlen);
    }
    return 0;
}

/* ---- faults ------------------------------------------------------------- */

static struct lfault *find(struct fl_links *l, int id)
{
    for (size_t i = 0; i < l->nfaults; i++)
        if (l->faults[i].id == id)
            return &l->faults[i];
    return NULL;
}

static void put_ports(FILE *o, const int *h, size_t n)
{
    fprintf(o, "{ ");
    for (size_t i = 0; i < n; i++)
        fprintf(o, "%s\"h%d\"", i ? ", " : "", h[i]);
    fprintf(o, " }");
}

/* The rules of a fault: "<match> <action>" per match and action.  The
 * matches: a host's port as the frames' way in or out (FL_LINK_HOST: each
 * frame passes it once), or fabric.h's matches of frames from the senders
 * to the receivers, where they leave the switch (one line, or two when the
 * hosts are on more than one bridge). */
static char *rules_text(const struct fl_link_spec *s, int cid)
{
    char *match = NULL, *out = NULL;
    size_t mlen = 0, olen = 0;
    if (s->scope == FL_LINK_HOST) {
        FILE *m = open_memstream(&match, &mlen);
        if (!m)
            return NULL;
        fprintf(m, "iifname ");
        put_ports(m, s->a, s->na);
        fprintf(m, "\noifname ");
        put_ports(m, s->a, s->na);
        fprintf(m, "\n");
        if (fclose(m) != 0) {
            free(match);
            return NULL;
        }
    } else {
        const int *to = s->scope == FL_LINK_ONEWAY ? s->b : s->a;
        size_t nto = s->scope == FL_LINK_ONEWAY ? s->nb : s->na;
        if (!(match = fl_fabric_nft_match(s->a, s->na, to, nto)))
            return NULL;
    }
    FILE *o = open_memstream(&out, &olen);
    if (!o) {
        free(match);
        return NULL;
    }
    for (const char *l = match; *l;) {
        int n = (int)strcspn(l, "\n");
        if (s->loss_bp >= 10000)
            fprintf(o, "%.*s ether type != arp drop\n", n, l);
        else if (s->loss_bp)
            fprintf(o, "%.*s ether type != arp numgen random mod 10000 < %u drop\n", n, l,
                    s->loss_bp);
        if (cid)
            fprintf(o, "%.*s meta priority set 1:%x\n", n, l, cid);
        l += n;
        if (*l)
            l++;
    }
    free(match);
    if (fclose(o) != 0) {
        free(out);
        return NULL;
    }
    return out;
}

static bool hosts_ok(const int *h, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (h[i] < 0 || h[i] >= FL_FABRIC_MAX_HOSTS)
            return false;
    return true;
}

static int undo(struct fl_links *l, struct lfault *lf, char *err, size_t errlen)
{
    int rc = 0, r;
    char tmp[512];
    if (lf->chain) {
        r = fl_fabric_heal(l->f, lf->chain, rc < 0 ? tmp : err, rc < 0 ? sizeof tmp : errlen);
        if (r < 0 && rc == 0)
            rc = r;
        lf->chain = 0;
    }
    /* no more marks: the queue rule, then the queue (releasing what it holds) */
    if (lf->emu_rule) {
        r = fl_nfq_rule_del(l->sw_pid, (uint16_t)lf->id, lf->emu_handle, rc < 0 ? tmp : err,
                            rc < 0 ? sizeof tmp : errlen);
        if (r < 0 && rc == 0)
            rc = r;
        lf->emu_rule = false;
    }
    if (lf->emu_queue) {
        r = fl_emu_remove(l->emu, (uint16_t)lf->id, rc < 0 ? tmp : err,
                          rc < 0 ? sizeof tmp : errlen);
        if (r < 0 && rc == 0)
            rc = r;
        lf->emu_queue = false;
    }
    /* the marks are gone: the classes can go */
    for (size_t i = 0; i < lf->nrx; i++) {
        r = htb_class_del(l, lf->rx[i], lf->cid, rc < 0 ? tmp : err, rc < 0 ? sizeof tmp : errlen);
        if (r < 0 && rc == 0)
            rc = r;
    }
    lf->nrx = 0;
    if (lf->is_down) {
        for (size_t i = 0; i < lf->nports; i++) {
            int p = lf->ports[i];
            if (l->down[p] && --l->down[p] == 0) {
                r = port_set_up(l, p, true, rc < 0 ? tmp : err, rc < 0 ? sizeof tmp : errlen);
                if (r < 0 && rc == 0)
                    rc = r;
            }
        }
        lf->is_down = false;
    }
    return rc;
}

static int take_down(struct fl_links *l, struct lfault *lf, char *err, size_t errlen)
{
    if (lf->is_down)
        return 0;
    /* every port is counted, failed or not, so that undo balances */
    int rc = 0;
    lf->is_down = true;
    for (size_t i = 0; i < lf->nports; i++) {
        int p = lf->ports[i];
        if (l->down[p]++ == 0) {
            int r = port_set_up(l, p, false, rc < 0 ? NULL : err, errlen);
            if (r < 0 && rc == 0)
                rc = r;
        }
    }
    return rc;
}

static int bring_up(struct fl_links *l, struct lfault *lf, char *err, size_t errlen)
{
    int rc = 0;
    if (!lf->is_down)
        return 0;
    lf->is_down = false;
    for (size_t i = 0; i < lf->nports; i++) {
        int p = lf->ports[i];
        if (l->down[p] && --l->down[p] == 0) {
            int r = port_set_up(l, p, true, rc < 0 ? NULL : err, errlen);
            if (r < 0 && rc == 0)
                rc = r;
        }
    }
    return rc;
}

/* The emulator, and the bridges told to pass IPv4 frames through the ip
 * family's hooks (br_netfilter; the netns default does already), where the
 * queue rules are (nfq_rule.h). */
static int emu_start(struct fl_links *l, char *err, size_t errlen)
{
    int rc = fl_fabric_set_nf_call_iptables(l->f, err, errlen);
    if (rc < 0)
        return rc;
    return fl_emu_new(&l->emu, l->sw_pid, err, errlen);
}

/* The queue rules of fault id: one per (source, destination) it covers.
 * A frame between hosts on two bridges crosses two or three (fabric.h), and
 * the ip hooks see each crossing: a rule names the bridge where it is to
 * take the frame, so that it is queued once.  Toward a host, where the
 * frame reaches the host's bridge (oif: the bridge the frame leaves by, so
 * NFQA_IFINDEX_PHYSOUTDEV is the host's port); from a host to anyone, where
 * it leaves the host's bridge (iif). */
static int emu_rules(struct fl_links *l, const struct fl_link_spec *s, int id, uint64_t *handle,
                     char *err, size_t errlen)
{
    size_t n = s->scope == FL_LINK_BETWEEN  ? s->na * s->na
               : s->scope == FL_LINK_ONEWAY ? s->na * s->nb
                                            : 2 * s->na;
    struct fl_nfq_match *m = calloc(n ? n : 1, sizeof *m);
    if (!m) {
        fl_netem_seterr(err, errlen, "link: out of memory");
        return -ENOMEM;
    }
    size_t k = 0;
    for (size_t i = 0; i < s->na; i++) {
        uint32_t a = fl_fabric_addr(s->a[i]);
        uint32_t br = (uint32_t)fl_fabric_bridge_ifindex(s->a[i]);
        if (s->scope == FL_LINK_HOST) {
            m[k++] = (struct fl_nfq_match){.saddr = a, .iif = br};
            m[k++] = (struct fl_nfq_match){.daddr = a, .oif = br};
        } else if (s->scope == FL_LINK_ONEWAY) {
            for (size_t j = 0; j < s->nb; j++)
                m[k++] = (struct fl_nfq_match){.saddr = a,
                                               .daddr = fl_fabric_addr(s->b[j]),
                                               .oif = (uint32_t)fl_fabric_bridge_ifindex(s->b[j])};
        } else {
            for (size_t j = 0; j < s->na; j++)
                if (j != i)
                    m[k++] =
                        (struct fl_nfq_match){.saddr = a,
                                              .daddr = fl_fabric_addr(s->a[j]),
                                              .oif = (uint32_t)fl_fabric_bridge_ifindex(s->a[j])};
        }
    }
    int rc = fl_nfq_rule_add(l->sw_pid, (uint16_t)id, m, k, handle, err, errlen);
    free(m);
    return rc;
}

int fl_links_apply(struct fl_links *l, const struct fl_link_spec *s, int *id, char *err,
                   size_t errlen)
{
    if (!s->na || !hosts_ok(s->a, s->na) ||
        (s->scope == FL_LINK_ONEWAY && (!s->nb || !hosts_ok(s->b, s->nb)))) {
        fl_netem_seterr(err, errlen, "link: no hosts, or an invalid host index");
        return -EINVAL;
    }
    if (s->scope < FL_LINK_BETWEEN || s->scope > FL_LINK_HOST || s->loss_bp > 10000 ||
        (s->rate_bit && (s->rate_bit < FL_LINK_RATE_MIN || s->rate_bit > FL_LINK_RATE_MAX ||
                         s->scope == FL_LINK_HOST)) ||
        (s->down && (s->scope != FL_LINK_HOST || s->loss_bp || s->rate_bit || s->emu)) ||
        (!s->down && !s->loss_bp && !s->rate_bit && !s->emu)) {
        fl_netem_seterr(err, errlen, "link: invalid fault (scope %d, loss %u, rate %llu, down %d)",
                        (int)s->scope, s->loss_bp, (unsigned long long)s->rate_bit, (int)s->down);
        return -EINVAL;
    }
    int rc0;
    if (s->emu && (rc0 = fl_emu_params_check(s->emu, err, errlen)) < 0)
        return rc0;
    if (s->emu && l->next_id > FL_EMU_QUEUE_MAX) {
        fl_netem_seterr(err, errlen, "link: more than %d link faults in one run", FL_EMU_QUEUE_MAX);
        return -ENOSPC;
    }
    if (s->rate_bit && l->next_cid > CID_MAX) {
        fl_netem_seterr(err, errlen, "link: more than %d rate limits in one run", CID_MAX);
        return -ENOSPC;
    }
    if (l->nfaults == l->cap) {
        size_t ncap = l->cap ? l->cap * 2 : 8;
        struct lfault *nf = realloc(l->faults, ncap * sizeof *nf);
        if (!nf) {
            fl_netem_seterr(err, errlen, "link: out of memory");
            return -ENOMEM;
        }
        l->faults = nf;
        l->cap = ncap;
    }
    struct lfault *lf = &l->faults[l->nfaults];
    memset(lf, 0, sizeof *lf);
    lf->id = l->next_id;
    lf->scope = s->scope;
    lf->rate_bit = s->rate_bit;
    int rc = 0;
    if (s->down) {
        /* what is sent into a down link is lost, not queued for the heal */
        for (size_t i = 0; i < s->na; i++)
            if ((rc = fl_fabric_pin_neighbours(l->f, s->a[i], err, errlen)) < 0)
                return rc;
        if (!(lf->ports = malloc(s->na * sizeof *lf->ports)))
            goto nomem;
        memcpy(lf->ports, s->a, s->na * sizeof *lf->ports);
        lf->nports = s->na;
        l->nfaults++;
        l->next_id++;
        if ((rc = take_down(l, lf, err, errlen)) < 0)
            goto fail;
        *id = lf->id;
        return 0;
    }
    if (s->rate_bit) {
        lf->cid = l->next_cid++;
        const int *rx = s->scope == FL_LINK_ONEWAY ? s->b : s->a;
        size_t nrx = s->scope == FL_LINK_ONEWAY ? s->nb : s->na;
        if (!(lf->rx = malloc(nrx * sizeof *lf->rx)))
            goto nomem;
        l->nfaults++;
        l->next_id++;
        for (size_t i = 0; i < nrx; i++) {
            lf->rx[lf->nrx++] = rx[i];
            if ((rc = htb_class(l, rx[i], lf->cid, s->rate_bit, err, errlen)) < 0)
                goto fail;
        }
    } else {
        l->nfaults++;
        l->next_id++;
    }
    if (s->emu) {
        if (!l->emu && (rc = emu_start(l, err, errlen)) < 0)
            goto fail;
        if ((rc = fl_emu_add(l->emu, (uint16_t)lf->id, s->emu, err, errlen)) < 0)
            goto fail;
        lf->emu_queue = true;
        if ((rc = emu_rules(l, s, lf->id, &lf->emu_handle, err, errlen)) < 0)
            goto fail;
        lf->emu_rule = true;
    }
    if (s->loss_bp || s->rate_bit) {
        char *rules = rules_text(s, lf->cid);
        if (!rules) {
            rc = -ENOMEM;
            fl_netem_seterr(err, errlen, "link: out of memory");
            goto fail;
        }
        rc = fl_fabric_add_chain(l->f, rules, s->loss_bp ? "link loss" : "link rate", &lf->chain,
                                 err, errlen);
        free(rules);
    }
    if (rc < 0) {
        lf->chain = 0;
        goto fail;
    }
    *id = lf->id;
    return 0;
nomem:
    free(lf->ports);
    free(lf->rx);
    fl_netem_seterr(err, errlen, "link: out of memory");
    return -ENOMEM;
fail:
    undo(l, lf, NULL, 0);
    free(lf->ports);
    free(lf->rx);
    l->nfaults--;
    return rc;
}

int fl_links_heal(struct fl_links *l, int id, char *err, size_t errlen)
{
    struct lfault *lf = find(l, id);
    if (!lf) {
        fl_netem_seterr(err, errlen, "link: heal %d: no such link fault (healed already?)", id);
        return -ENOENT;
    }
    int rc = undo(l, lf, err, errlen);
    free(lf->ports);
    free(lf->rx);
    *lf = l->faults[--l->nfaults];
    return rc;
}

int fl_links_set_down(struct fl_links *l, int id, bool down, char *err, size_t errlen)
{
    struct lfault *lf = find(l, id);
    if (!lf || !lf->nports) {
        fl_netem_seterr(err, errlen, "link: %s %d: no such down fault", down ? "down" : "up", id);
        return -ENOENT;
    }
    return down ? take_down(l, lf, err, errlen) : bring_up(l, lf, err, errlen);
}

int fl_links_port_remade(struct fl_links *l, int idx, char *err, size_t errlen)
{
    if (!l || idx < 0 || idx >= FL_FABRIC_MAX_HOSTS)
        return 0;
    l->htb[idx] = 0; /* the old port took its qdisc with it */
    int rc = 0;
    for (size_t i = 0; i < l->nfaults && rc == 0; i++) {
        struct lfault *lf = &l->faults[i];
        for (size_t k = 0; k < lf->nrx && rc == 0; k++)
            if (lf->rx[k] == idx)
                rc = htb_class(l, idx, lf->cid, lf->rate_bit, err, errlen);
    }
    if (rc == 0 && l->down[idx])
        rc = port_set_up(l, idx, false, err, errlen);
    return rc;
}

bool fl_links_port_is_down(const struct fl_links *l, int idx)
{
    return l && idx >= 0 && idx < FL_FABRIC_MAX_HOSTS && l->down[idx] > 0;
}
