/*
 * netns_util.h: what the fabric and link tests share: "hosts" that are a
 * bare process in a new network namespace (no harness), a socket made
 * inside one, and a host's fabric address.
 */
#ifndef NETEM_TESTS_NETNS_UTIL_H
#define NETEM_TESTS_NETNS_UTIL_H

#include "netem/fabric.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* A host: a process in a new netns that waits to be killed (and dies with
 * the test). */
static __attribute__((unused)) pid_t host_spawn(void)
{
    pid_t parent = getpid();
    long pid = syscall(SYS_clone, (unsigned long)(CLONE_NEWNET | SIGCHLD), NULL, NULL, NULL, NULL);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(0);
        for (;;)
            pause();
    }
    return (pid_t)pid;
}

static __attribute__((unused)) void host_kill(pid_t pid)
{
    if (pid > 0) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
    }
}

/* socket(type) inside the netns of pid; -1 when it cannot be made. */
static __attribute__((unused)) int socket_in(pid_t pid, int type)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/ns/net", (int)pid);
    int nsfd = open(path, O_RDONLY | O_CLOEXEC);
    int home = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    int s = -1;
    if (nsfd >= 0 && home >= 0 && setns(nsfd, CLONE_NEWNET) == 0) {
        s = socket(AF_INET, type | SOCK_CLOEXEC, 0);
        if (setns(home, CLONE_NEWNET) != 0)
            abort();
    }
    if (nsfd >= 0)
        close(nsfd);
    if (home >= 0)
        close(home);
    return s;
}

/* Host idx's fabric address, port. */
static __attribute__((unused)) struct sockaddr_in sin_of(int idx, int port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = fl_fabric_addr(idx);
    return a;
}

#endif
