/*
 * netem/nfq_rule.c: builds and removes the compat NFQUEUE rules of
 * nfq_rule.h (ip family) with libnftnl, one nfnetlink batch per call over a
 * NETLINK_NETFILTER socket opened inside the switch namespace (setns,
 * socket, setns back).  The table is created on demand (NLM_F_CREATE, so a
 * second fault finds it); it is never deleted: it dies with the switch
 * namespace at the end of the run.
 */
#include "netem/nfq_rule.h"
#include "netem/nsock.h"
#include "netem/seterr.h"

#include <errno.h>
#include <fcntl.h>
#include <libmnl/libmnl.h>
#include <libnftnl/chain.h>
#include <libnftnl/common.h>
#include <libnftnl/expr.h>
#include <libnftnl/rule.h>
#include <libnftnl/table.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/xt_NFQUEUE.h>
#include <linux/netfilter_ipv4.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define CHAIN_PRIO 10
#define BASE_CHAIN "fwd"

/* A NETLINK_NETFILTER socket in the netns of pid, or NULL (errno set). */
static struct mnl_socket *nl_in(pid_t pid)
{
    struct mnl_socket *nl = fl_netem_mnl_in(pid, NETLINK_NETFILTER);
    int e = errno;
    struct timeval tv = {.tv_sec = 5}; /* an ACK never comes: not wedged */
    if (nl && (setsockopt(mnl_socket_get_fd(nl), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) < 0 ||
               mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0)) {
        e = errno;
        mnl_socket_close(nl);
        nl = NULL;
    }
    errno = e;
    return nl;
}

/* Sends the batch and reads one ACK per message flagged NLM_F_ACK (nmsg of
 * them); the first error wins.  tolerate: an errno that counts as success. */
static int batch_talk(struct mnl_socket *nl, struct mnl_nlmsg_batch *b, uint32_t seq0, int nmsg,
                      int tolerate, uint64_t *handle)
{
    if (mnl_socket_sendto(nl, mnl_nlmsg_batch_head(b), mnl_nlmsg_batch_size(b)) < 0)
        return -errno;
    char buf[8192] __attribute__((aligned(8)));
    int rc = 0, acks = 0;
    uint32_t portid = mnl_socket_get_portid(nl);
    while (acks < nmsg) {
        ssize_t n = mnl_socket_recvfrom(nl, buf, sizeof buf);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return rc ? rc : -errno;
        }
        int left = (int)n;
        for (struct nlmsghdr *h = (struct nlmsghdr *)buf; mnl_nlmsg_ok(h, left);
             h = mnl_nlmsg_next(h, &left)) {
            if (handle && h->nlmsg_type == ((NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_NEWRULE)) {
                struct nftnl_rule *r = nftnl_rule_alloc(); /* the echo of the jump */
                if (r && nftnl_rule_nlmsg_parse(h, r) == 0 &&
                    nftnl_rule_is_set(r, NFTNL_RULE_HANDLE))
                    *handle = nftnl_rule_get_u64(r, NFTNL_RULE_HANDLE);
                if (r)
                    nftnl_rule_free(r);
                continue;
            }
            if (h->nlmsg_pid != portid || h->nlmsg_seq < seq0 || h->nlmsg_type != NLMSG_ERROR)
                continue;
            const struct nlmsgerr *e = mnl_nlmsg_get_payload(h);
            acks++;
            if (e->error && e->error != -tolerate && rc == 0)
                rc = e->error;
        }
    }
    return rc;
}

/* One nfnetlink batch to the switch netns: its socket, its messages (in the
 * caller's buffer) and their sequence numbers. */
struct nfq_batch {
    struct mnl_socket *nl;
    struct mnl_nlmsg_batch *b;
    uint32_t seq, seq0;
};

/* Opens the socket in the netns of sw_pid and begins the batch in buf. */
static int batch_open(struct nfq_batch *nb, pid_t sw_pid, char *buf, size_t bufsz, char *err,
                      size_t errlen)
{
    nb->nl = nl_in(sw_pid);
    if (!nb->nl) {
        int rc = -errno;
        fl_netem_seterr(err, errlen,
                        "nfq_rule: NETLINK_NETFILTER socket in the switch netns (pid %d): %s",
                        (int)sw_pid, strerror(-rc));
        return rc;
    }
    nb->seq = nb->seq0 = (uint32_t)time(NULL);
    nb->b = mnl_nlmsg_batch_start(buf, bufsz);
    nftnl_batch_begin(mnl_nlmsg_batch_current(nb->b), nb->seq++);
    mnl_nlmsg_batch_next(nb->b);
    return 0;
}

/* Ends the batch, sends it and reads its nmsg ACKs (batch_talk). */
static int batch_send(struct nfq_batch *nb, int nmsg, int tolerate, uint64_t *handle)
{
    nftnl_batch_end(mnl_nlmsg_batch_current(nb->b), nb->seq++);
    mnl_nlmsg_batch_next(nb->b);
    return batch_talk(nb->nl, nb->b, nb->seq0, nmsg, tolerate, handle);
}

static void batch_close(struct nfq_batch *nb)
{
    if (nb->b)
        mnl_nlmsg_batch_stop(nb->b);
    if (nb->nl)
        mnl_socket_close(nb->nl);
}

/* expressions for "ip saddr/daddr == addr" (offset 12 / 16), unless addr is 0 */
static int put_addr(struct nftnl_rule *r, uint32_t off, uint32_t addr)
{
    if (!addr)
        return 0;
    struct nftnl_expr *ep = nftnl_expr_alloc("payload"), *ec = nftnl_expr_alloc("cmp");
    if (!ep || !ec) {
        if (ep)
            nftnl_expr_free(ep);
        if (ec)
            nftnl_expr_free(ec);
        return -ENOMEM;
    }
    nftnl_expr_set_u32(ep, NFTNL_EXPR_PAYLOAD_BASE, NFT_PAYLOAD_NETWORK_HEADER);
    nftnl_expr_set_u32(ep, NFTNL_EXPR_PAYLOAD_OFFSET, off);
    nftnl_expr_set_u32(ep, NFTNL_EXPR_PAYLOAD_LEN, 4);
    nftnl_expr_set_u32(ep, NFTNL_EXPR_PAYLOAD_DREG, NFT_REG_1);
    nftnl_rule_add_expr(r, ep);
    nftnl_expr_set_u32(ec, NFTNL_EXPR_CMP_SREG, NFT_REG_1);
    nftnl_expr_set_u32(ec, NFTNL_EXPR_CMP_OP, NFT_CMP_EQ);
    nftnl_expr_set(ec, NFTNL_EXPR_CMP_DATA, &addr, sizeof addr);
    nftnl_rule_add_expr(r, ec);
    return 0;
}

/* expressions for "meta iif/oif == ifindex", unless ifindex is 0 */
static int put_meta_if(struct nftnl_rule *r, uint32_t key, uint32_t ifindex)
{
    if (!ifindex)
        return 0;
    struct nftnl_expr *em = nftnl_expr_alloc("meta"), *ec = nftnl_expr_alloc("cmp");
    if (!em || !ec) {
        if (em)
            nftnl_expr_free(em);
        if (ec)
            nftnl_expr_free(ec);
        return -ENOMEM;
    }
    nftnl_expr_set_u32(em, NFTNL_EXPR_META_KEY, key);
    nftnl_expr_set_u32(em, NFTNL_EXPR_META_DREG, NFT_REG_1);
    nftnl_rule_add_expr(r, em);
    nftnl_expr_set_u32(ec, NFTNL_EXPR_CMP_SREG, NFT_REG_1);
    nftnl_expr_set_u32(ec, NFTNL_EXPR_CMP_OP, NFT_CMP_EQ);
    nftnl_expr_set(ec, NFTNL_EXPR_CMP_DATA, &ifindex, sizeof ifindex);
    nftnl_rule_add_expr(r, ec);
    return 0;
}

static struct nftnl_rule *queue_rule(const char *chain, uint16_t queue,
                                     const struct fl_nfq_match *m)
{
    struct nftnl_rule *r = nftnl_rule_alloc();
    struct nftnl_expr *et = nftnl_expr_alloc("target");
    struct xt_NFQ_info_v3 *info = calloc(1, sizeof *info);
    if (!r || !et || !info || put_meta_if(r, NFT_META_IIF, m->iif) < 0 ||
        put_meta_if(r, NFT_META_OIF, m->oif) < 0 || put_addr(r, 12, m->saddr) < 0 ||
        put_addr(r, 16, m->daddr) < 0) {
        if (r)
            nftnl_rule_free(r);
        if (et)
            nftnl_expr_free(et);
        free(info);
        return NULL;
    }
    nftnl_rule_set_u32(r, NFTNL_RULE_FAMILY, NFPROTO_IPV4);
    nftnl_rule_set_str(r, NFTNL_RULE_TABLE, FL_NFQ_TABLE);
    nftnl_rule_set_str(r, NFTNL_RULE_CHAIN, chain);
    info->queuenum = queue;
    info->queues_total = 1;
    info->flags = NFQ_FLAG_BYPASS;
    nftnl_expr_set_str(et, NFTNL_EXPR_TG_NAME, "NFQUEUE");
    nftnl_expr_set_u32(et, NFTNL_EXPR_TG_REV, 3);
    nftnl_expr_set(et, NFTNL_EXPR_TG_INFO, info, sizeof *info); /* takes info */
    nftnl_rule_add_expr(r, et);
    return r;
}

int fl_nfq_rule_add(pid_t sw_pid, uint16_t queue, const struct fl_nfq_match *m, size_t n,
                    uint64_t *handle, char *err, size_t errlen)
{
    char chain_name[16];
    snprintf(chain_name, sizeof chain_name, "q%u", (unsigned)queue);
    size_t bufsz = 16384 + n * 512;
    struct nftnl_table *t = nftnl_table_alloc();
    struct nftnl_chain *c = nftnl_chain_alloc(), *base = nftnl_chain_alloc();
    struct nftnl_rule *jr = nftnl_rule_alloc();
    struct nftnl_expr *ej = nftnl_expr_alloc("immediate");
    char *buf = malloc(bufsz);
    struct nfq_batch nb = {0};
    int rc = 0;
    *handle = 0;
    if (!t || !c || !base || !jr || !ej || !buf || n == 0) {
        rc = n ? -ENOMEM : -EINVAL;
        fl_netem_seterr(err, errlen,
                        n ? "nfq_rule: out of memory" : "nfq_rule: no addresses to match");
        goto cleanup;
    }
    nftnl_table_set_u32(t, NFTNL_TABLE_FAMILY, NFPROTO_IPV4);
    nftnl_table_set_str(t, NFTNL_TABLE_NAME, FL_NFQ_TABLE);
    nftnl_chain_set_str(base, NFTNL_CHAIN_TABLE, FL_NFQ_TABLE);
    nftnl_chain_set_str(base, NFTNL_CHAIN_NAME, BASE_CHAIN);
    nftnl_chain_set_str(base, NFTNL_CHAIN_TYPE, "filter");
    nftnl_chain_set_u32(base, NFTNL_CHAIN_HOOKNUM, NF_INET_FORWARD);
    nftnl_chain_set_s32(base, NFTNL_CHAIN_PRIO, CHAIN_PRIO);
    nftnl_chain_set_u32(base, NFTNL_CHAIN_POLICY, NF_ACCEPT);
    nftnl_chain_set_str(c, NFTNL_CHAIN_TABLE, FL_NFQ_TABLE);
    nftnl_chain_set_str(c, NFTNL_CHAIN_NAME, chain_name);
    nftnl_rule_set_u32(jr, NFTNL_RULE_FAMILY, NFPROTO_IPV4);
    nftnl_rule_set_str(jr, NFTNL_RULE_TABLE, FL_NFQ_TABLE);
    nftnl_rule_set_str(jr, NFTNL_RULE_CHAIN, BASE_CHAIN);
    nftnl_expr_set_u32(ej, NFTNL_EXPR_IMM_DREG, NFT_REG_VERDICT);
    nftnl_expr_set_u32(ej, NFTNL_EXPR_IMM_VERDICT, NFT_JUMP);
    nftnl_expr_set_str(ej, NFTNL_EXPR_IMM_CHAIN, chain_name);
    nftnl_rule_add_expr(jr, ej);
    ej = NULL;

    if ((rc = batch_open(&nb, sw_pid, buf, bufsz, err, errlen)) < 0)
        goto cleanup;
    int big = (int)(n * 128 + 65536);
    setsockopt(mnl_socket_get_fd(nb.nl), SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof big);
    struct mnl_nlmsg_batch *b = nb.b;
    struct nlmsghdr *nlh =
        nftnl_table_nlmsg_build_hdr(mnl_nlmsg_batch_current(b), NFT_MSG_NEWTABLE, NFPROTO_IPV4,
                                    NLM_F_CREATE | NLM_F_ACK, nb.seq++);
    nftnl_table_nlmsg_build_payload(nlh, t);
    mnl_nlmsg_batch_next(b);
    nlh = nftnl_chain_nlmsg_build_hdr(mnl_nlmsg_batch_current(b), NFT_MSG_NEWCHAIN, NFPROTO_IPV4,
                                      NLM_F_CREATE | NLM_F_ACK, nb.seq++);
    nftnl_chain_nlmsg_build_payload(nlh, base);
    mnl_nlmsg_batch_next(b);
    nlh = nftnl_chain_nlmsg_build_hdr(mnl_nlmsg_batch_current(b), NFT_MSG_NEWCHAIN, NFPROTO_IPV4,
                                      NLM_F_CREATE | NLM_F_EXCL | NLM_F_ACK, nb.seq++);
    nftnl_chain_nlmsg_build_payload(nlh, c);
    mnl_nlmsg_batch_next(b);
    for (size_t i = 0; i < n; i++) {
        struct nftnl_rule *r = queue_rule(chain_name, queue, &m[i]);
        if (!r) {
            rc = -ENOMEM;
            fl_netem_seterr(err, errlen, "nfq_rule: out of memory");
            goto cleanup;
        }
        nlh = nftnl_rule_nlmsg_build_hdr(mnl_nlmsg_batch_current(b), NFT_MSG_NEWRULE, NFPROTO_IPV4,
                                         NLM_F_CREATE | NLM_F_APPEND | NLM_F_ACK, nb.seq++);
        nftnl_rule_nlmsg_build_payload(nlh, r);
        nftnl_rule_free(r);
        mnl_nlmsg_batch_next(b);
    }
    nlh =
        nftnl_rule_nlmsg_build_hdr(mnl_nlmsg_batch_current(b), NFT_MSG_NEWRULE, NFPROTO_IPV4,
                                   NLM_F_CREATE | NLM_F_APPEND | NLM_F_ACK | NLM_F_ECHO, nb.seq++);
    nftnl_rule_nlmsg_build_payload(nlh, jr);
    mnl_nlmsg_batch_next(b);
    rc = batch_send(&nb, (int)(4 + n), 0, handle);
    if (rc == 0 && !*handle)
        rc = -EPROTO;
    if (rc < 0)
        fl_netem_seterr(err, errlen,
                        "nfq_rule: add chain ip " FL_NFQ_TABLE
                        " %s (%zu rules, xt NFQUEUE %u bypass) in switch netns (pid %d): %s",
                        chain_name, n, (unsigned)queue, (int)sw_pid, strerror(-rc));
cleanup:
    batch_close(&nb);
    free(buf);
    if (ej)
        nftnl_expr_free(ej);
    if (jr)
        nftnl_rule_free(jr);
    if (base)
        nftnl_chain_free(base);
    if (c)
        nftnl_chain_free(c);
    if (t)
        nftnl_table_free(t);
    return rc;
}

int fl_nfq_rule_del(pid_t sw_pid, uint16_t queue, uint64_t handle, char *err, size_t errlen)
{
    char chain_name[16];
    snprintf(chain_name, sizeof chain_name, "q%u", (unsigned)queue);
    struct nftnl_chain *c = nftnl_chain_alloc();
    struct nftnl_rule *r = nftnl_rule_alloc(), *jr = nftnl_rule_alloc();
    char *buf = malloc(MNL_SOCKET_BUFFER_SIZE);
    struct nfq_batch nb = {0};
    int rc = 0;
    if (!c || !r || !jr || !buf) {
        rc = -ENOMEM;
        fl_netem_seterr(err, errlen, "nfq_rule: out of memory");
        goto cleanup;
    }
    nftnl_rule_set_u32(r, NFTNL_RULE_FAMILY, NFPROTO_IPV4);
    nftnl_rule_set_str(r, NFTNL_RULE_TABLE, FL_NFQ_TABLE);
    nftnl_rule_set_str(r, NFTNL_RULE_CHAIN, chain_name);
    nftnl_chain_set_str(c, NFTNL_CHAIN_TABLE, FL_NFQ_TABLE);
    nftnl_chain_set_str(c, NFTNL_CHAIN_NAME, chain_name);
    nftnl_rule_set_u32(jr, NFTNL_RULE_FAMILY, NFPROTO_IPV4);
    nftnl_rule_set_str(jr, NFTNL_RULE_TABLE, FL_NFQ_TABLE);
    nftnl_rule_set_str(jr, NFTNL_RULE_CHAIN, BASE_CHAIN);
    nftnl_rule_set_u64(jr, NFTNL_RULE_HANDLE, handle);
    if ((rc = batch_open(&nb, sw_pid, buf, MNL_SOCKET_BUFFER_SIZE, err, errlen)) < 0)
        goto cleanup;
    struct mnl_nlmsg_batch *b = nb.b;
    /* the jump first; a DELRULE naming only the chain flushes it; then the
     * chain goes.  Only regular chains and rules go: unregistering a hook
     * would make the kernel drop every frame queued in this netns. */
    struct nlmsghdr *nlh = nftnl_rule_nlmsg_build_hdr(mnl_nlmsg_batch_current(b), NFT_MSG_DELRULE,
                                                      NFPROTO_IPV4, NLM_F_ACK, nb.seq++);
    nftnl_rule_nlmsg_build_payload(nlh, jr);
    mnl_nlmsg_batch_next(b);
    nlh = nftnl_rule_nlmsg_build_hdr(mnl_nlmsg_batch_current(b), NFT_MSG_DELRULE, NFPROTO_IPV4,
                                     NLM_F_ACK, nb.seq++);
    nftnl_rule_nlmsg_build_payload(nlh, r);
    mnl_nlmsg_batch_next(b);
    nlh = nftnl_chain_nlmsg_build_hdr(mnl_nlmsg_batch_current(b), NFT_MSG_DELCHAIN, NFPROTO_IPV4,
                                      NLM_F_ACK, nb.seq++);
    nftnl_chain_nlmsg_build_payload(nlh, c);
    mnl_nlmsg_batch_next(b);
    rc = batch_send(&nb, 3, ENOENT, NULL);
    if (rc < 0)
        fl_netem_seterr(err, errlen,
                        "nfq_rule: delete chain bridge " FL_NFQ_TABLE
                        " %s in switch netns (pid %d): %s",
                        chain_name, (int)sw_pid, strerror(-rc));
cleanup:
    batch_close(&nb);
    free(buf);
    if (jr)
        nftnl_rule_free(jr);
    if (r)
        nftnl_rule_free(r);
    if (c)
        nftnl_chain_free(c);
    return rc;
}
