/*
 * netns_settle.c: wait until the kernel has finished freeing the network
 * namespaces of processes that are already gone (used by the hosts bench
 * between rounds, so that one round does not pay for the last one).
 *
 * The kernel frees dead network namespaces asynchronously, in batches, on
 * one ordered workqueue ("netns"): cleanup_net() takes every namespace
 * queued so far, tears them all down, frees them and returns, and only then
 * can the next batch start.  At the start of a batch it sends RTM_DELNSID
 * to every namespace that had assigned an id to a dying one.  So: a watcher
 * namespace of our own assigns an id to a canary namespace, the canary
 * dies, and RTM_DELNSID for it means its batch has started, i.e. every
 * namespace that died before it is in this batch or an earlier one.  A
 * second canary killed after that can only be announced once the first
 * one's batch has finished freeing everything: after its RTM_DELNSID,
 * every namespace that died before the first canary is gone.
 *
 * Nothing is added to the root network namespace: the ids live in the
 * watcher's namespace, which dies with its holder process.
 */
#include "harness/sys/netns_settle.h"
#include "harness/base/monoclock.h"

#include <errno.h>
#include <fcntl.h>
#include <libmnl/libmnl.h>
#include <linux/net_namespace.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

struct fl_netns_settle {
    pid_t watcher; /* holds the watcher namespace */
    int hold;      /* closing it ends the watcher */
    int sock;      /* NETLINK_ROUTE in the watcher namespace, RTNLGRP_NSID */
    int next_id;
    uint32_t seq;
};

/* Forks a child that moves to a new network namespace and lives until the
 * socket *hold is closed (or it is killed); returns once the namespace
 * exists, with *nsfd open on it. */
static pid_t ns_child(int *hold, int *nsfd)
{
    int sp[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0)
        return -errno;
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(sp[0]);
        close(sp[1]);
        return -e;
    }
    if (pid == 0) {
        char c = 1;
        close(sp[0]);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent || unshare(CLONE_NEWNET) < 0 || write(sp[1], &c, 1) != 1)
            _exit(1);
        while (read(sp[1], &c, 1) > 0)
            ;
        _exit(0);
    }
    close(sp[1]);
    char c;
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/ns/net", (int)pid);
    ssize_t n;
    while ((n = read(sp[0], &c, 1)) < 0 && errno == EINTR)
        ;
    *nsfd = n == 1 ? open(path, O_RDONLY | O_CLOEXEC) : -1;
    if (*nsfd < 0) {
        close(sp[0]);
        kill(pid, SIGKILL);
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
            ;
        return n == 1 ? -ESRCH : -ECHILD;
    }
    *hold = sp[0];
    return pid;
}

static void end_child(pid_t pid, int hold_w)
{
    if (hold_w >= 0)
        close(hold_w);
    kill(pid, SIGKILL);
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
        ;
}

int fl_netns_settle_open(struct fl_netns_settle **out, char *err, size_t errlen)
{
    struct fl_netns_settle *s = calloc(1, sizeof *s);
    if (!s)
        return -ENOMEM;
    s->sock = -1;
    s->next_id = 1;
    int hold = -1, nsfd = -1, saved = -1, rc;
    s->watcher = ns_child(&hold, &nsfd);
    if (s->watcher < 0) {
        rc = s->watcher;
        snprintf(err, errlen, "settle: the watcher's network namespace: %s", strerror(-rc));
        free(s);
        return rc;
    }
    saved = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    if (saved < 0 || setns(nsfd, CLONE_NEWNET) < 0) {
        rc = -errno;
        snprintf(err, errlen, "settle: setns into the watcher's namespace: %s", strerror(-rc));
        goto fail;
    }
    s->sock = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
    rc = s->sock < 0 ? -errno : 0;
    if (setns(saved, CLONE_NEWNET) < 0) {
        fprintf(stderr, "settle: setns back to our network namespace: %s; aborting\n",
                strerror(errno));
        abort();
    }
    if (rc < 0) {
        snprintf(err, errlen, "settle: NETLINK_ROUTE socket: %s", strerror(-rc));
        goto fail;
    }
    struct sockaddr_nl sa = {.nl_family = AF_NETLINK, .nl_groups = 0};
    int grp = RTNLGRP_NSID;
    if (bind(s->sock, (struct sockaddr *)&sa, sizeof sa) < 0 ||
        setsockopt(s->sock, SOL_NETLINK, NETLINK_ADD_MEMBERSHIP, &grp, sizeof grp) < 0) {
        rc = -errno;
        snprintf(err, errlen, "settle: join RTNLGRP_NSID: %s", strerror(-rc));
        goto fail;
    }
    close(nsfd);
    close(saved);
    s->hold = hold;
    s->seq = 1;
    *out = s;
    return 0;
fail:
    if (nsfd >= 0)
        close(nsfd);
    if (saved >= 0)
        close(saved);
    if (s->sock >= 0)
        close(s->sock);
    end_child(s->watcher, hold);
    free(s);
    return rc;
}

/* Assigns id `id` in the watcher's namespace to the namespace of nsfd. */
static int assign_id(struct fl_netns_settle *s, int nsfd, int id)
{
    char buf[8192];
    struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
    nlh->nlmsg_type = RTM_NEWNSID;
    nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
    nlh->nlmsg_seq = ++s->seq;
    struct rtgenmsg *g = mnl_nlmsg_put_extra_header(nlh, sizeof *g);
    g->rtgen_family = AF_UNSPEC;
    mnl_attr_put_u32(nlh, NETNSA_FD, (uint32_t)nsfd);
    mnl_attr_put_u32(nlh, NETNSA_NSID, (uint32_t)id);
    if (send(s->sock, nlh, nlh->nlmsg_len, 0) < 0)
        return -errno;
    for (;;) {
        ssize_t n = recv(s->sock, buf, sizeof buf, 0);
        if (n < 0)
            return -errno;
        int len = (int)n;
        for (struct nlmsghdr *h = (struct nlmsghdr *)buf; mnl_nlmsg_ok(h, len);
             h = mnl_nlmsg_next(h, &len)) {
            if (h->nlmsg_type == NLMSG_ERROR && h->nlmsg_seq == s->seq) {
                const struct nlmsgerr *e = mnl_nlmsg_get_payload(h);
                return e->error;
            }
        }
    }
}

/* Waits for RTM_DELNSID of id, at most until deadline. */
static int wait_del(struct fl_netns_settle *s, int id, double deadline)
{
    char buf[8192];
    for (;;) {
        double left = deadline - fl_mono_s();
        if (left <= 0)
            return -ETIMEDOUT;
        struct pollfd p = {.fd = s->sock, .events = POLLIN};
        int r = poll(&p, 1, (int)(left * 1000) + 1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return r < 0 ? -errno : -ETIMEDOUT;
        ssize_t n = recv(s->sock, buf, sizeof buf, 0);
        if (n < 0) /* ENOBUFS too: an overrun may have lost it */
            return -errno;
        int len = (int)n;
        for (struct nlmsghdr *h = (struct nlmsghdr *)buf; mnl_nlmsg_ok(h, len);
             h = mnl_nlmsg_next(h, &len)) {
            if (h->nlmsg_type != RTM_DELNSID)
                continue;
            struct nlattr *a;
            mnl_attr_for_each(a, h,
                              sizeof(struct rtgenmsg)) if (mnl_attr_get_type(a) == NETNSA_NSID &&
                                                           (int)mnl_attr_get_u32(a) == id) return 0;
        }
    }
}

int fl_netns_settle_wait(struct fl_netns_settle *s, double timeout_s, char *err, size_t errlen)
{
    double deadline = fl_mono_s() + timeout_s;
    for (int k = 0; k < 2; k++) {
        int hold = -1, nsfd = -1, rc, id = s->next_id++;
        pid_t c = ns_child(&hold, &nsfd);
        if (c < 0) {
            snprintf(err, errlen, "settle: a canary's network namespace: %s", strerror(-c));
            return c;
        }
        rc = assign_id(s, nsfd, id);
        close(nsfd);
        end_child(c, hold);
        if (rc < 0) {
            snprintf(err, errlen, "settle: RTM_NEWNSID %d for canary %d: %s", id, (int)c,
                     strerror(-rc));
            return rc;
        }
        if ((rc = wait_del(s, id, deadline)) < 0) {
            snprintf(err, errlen, "settle: RTM_DELNSID %d (canary %d): %s", id, (int)c,
                     strerror(-rc));
            return rc;
        }
    }
    return 0;
}

void fl_netns_settle_close(struct fl_netns_settle *s)
{
    if (!s)
        return;
    close(s->sock);
    end_child(s->watcher, s->hold);
    free(s);
}
