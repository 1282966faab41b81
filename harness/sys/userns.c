/*
 * userns.c: the user namespace a host's tasks run in, so that root in a host
 * is root of that host only.
 *
 * A host's namespaces (network, mounts, PID, hostname, IPC; host.c) belong to
 * the machine's user namespace, as they are made by the harness.  A task
 * joins a user namespace of its host's own just before exec (fl_host_spawn):
 * it keeps its uid and gids (the namespace maps every id the harness's has
 * to the same id: every id, or rootless the user's alone as 0, so
 * the machine's files keep their owners and what root may read and write by
 * their modes stays as on a machine), and it holds every capability, but in
 * that namespace only, which owns nothing: mounting, the network, the
 * hostname, the clock, modules, devices and other processes' namespaces all
 * want capabilities in the machine's user namespace, which no task has any
 * more.  What root could still do by file modes alone is cut off in host.c
 * (a read-only /sys and /proc/sys, the cgroup hierarchies read-only).
 *
 * Making one: a child cloned into a new user namespace (sharing the
 * harness's memory, raw system calls only, exit signal 0 so that no
 * waitpid(-1) of the harness takes it) waits on a pipe while the harness,
 * which holds CAP_SETUID and CAP_SETGID where the namespace was made, writes
 * its id maps and opens it; closing the pipe ends the child, and the
 * namespace lives on in the fd.
 */
#include "harness/sys/userns.h"
#include "harness/sys/rootless.h"
#include "harness/base/rawsys.h"
#include "netem/seterr.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define HOLDER_STACK (16 * 1024)

static _Alignas(16) char holder_stack[HOLDER_STACK];
static pthread_mutex_t holder_mu = PTHREAD_MUTEX_INITIALIZER;

FL_INIT_CODE static int holder_main(void *arg)
{
    const int *p = arg; /* the pipe: its write end is the harness's alone */
    char c;
    fl_rs1(SYS_close, p[1]);
    fl_rs3(SYS_read, p[0], &c, 1); /* EOF: the harness has the namespace */
    for (;;)
        fl_rs1(SYS_exit, 0);
    return 0;
}

int fl_userns_make(int *out, char *err, size_t errlen)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0) {
        int e = errno;
        fl_netem_seterr(err, errlen, "user namespace for a host: pipe: %s", strerror(e));
        return -e;
    }
    pthread_mutex_lock(&holder_mu);
    int flags = CLONE_NEWUSER | (FL_RAWSYS ? CLONE_VM : 0); /* exit signal 0 */
    pid_t pid = clone(holder_main, holder_stack + HOLDER_STACK, flags, p);
    int e = pid < 0 ? errno : 0;
    char path[64];
    const char *what = "clone(new user namespace)";
    int fd = -1;
    if (pid > 0) {
        static const char *const maps[] = {"uid_map", "gid_map"};
        for (int i = 0; i < 2 && !e; i++) {
            char text[1024];
            what = maps[i];
            if ((e = -fl_userns_identity_map(maps[i], text, sizeof text)) != 0)
                break;
            snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, maps[i]);
            e = -fl_write_proc(path, text);
        }
        if (!e) {
            snprintf(path, sizeof path, "/proc/%d/ns/user", (int)pid);
            if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
                e = errno;
            what = "open ns/user";
        }
    }
    close(p[1]); /* the holder reads EOF and exits */
    if (pid > 0)
        while (waitpid(pid, NULL, __WALL) < 0 && errno == EINTR)
            ;
    pthread_mutex_unlock(&holder_mu);
    close(p[0]);
    if (e) {
        fl_netem_seterr(err, errlen, "user namespace for a host's tasks: %s: %s", what,
                        strerror(e));
        return -e;
    }
    *out = fd;
    return 0;
}
