/*
 * nsock.c: opening a socket inside the run's switch namespace from the
 * harness, which stays in its own: the calling thread enters the namespace
 * (setns), opens the socket, and goes back at once.  A socket keeps the
 * namespace it was made in, so the netlink sockets of link faults and NFQUEUE
 * rules, and the emulator's queue and packet sockets, all act in the switch
 * namespace while the harness never leaves its own for longer than a call.
 * Failing to get back would leave the harness in the wrong namespace, so
 * that aborts.
 */
#include "netem/nsock.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Enters the netns of pid; *home is an fd of the thread's own. 0 or -1
 * (errno set, nothing to undo). */
static int enter(pid_t pid, int *home)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/ns/net", (int)pid);
    int nsfd = open(path, O_RDONLY | O_CLOEXEC);
    *home = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    int rc = nsfd < 0 || *home < 0 || setns(nsfd, CLONE_NEWNET) < 0 ? -1 : 0;
    int e = errno;
    if (nsfd >= 0)
        close(nsfd);
    if (rc < 0 && *home >= 0)
        close(*home);
    errno = e;
    return rc;
}

static void leave(int home)
{
    int e = errno;
    if (setns(home, CLONE_NEWNET) < 0) {
        fprintf(stderr, "netem: setns back to the original network namespace: %s; aborting\n",
                strerror(errno));
        abort();
    }
    close(home);
    errno = e;
}

int fl_netem_socket_in(pid_t pid, int domain, int type, int proto)
{
    int home;
    if (enter(pid, &home) < 0)
        return -1;
    int fd = socket(domain, type | SOCK_CLOEXEC, proto);
    leave(home);
    return fd;
}

struct mnl_socket *fl_netem_mnl_in(pid_t pid, int bus)
{
    int home;
    if (enter(pid, &home) < 0)
        return NULL;
    struct mnl_socket *nl = mnl_socket_open2(bus, SOCK_CLOEXEC);
    leave(home);
    return nl;
}
