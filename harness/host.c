/*
 * host.c: hosts, the machines of a bug report, as namespaces on one kernel.
 *
 * A host is held by an init process that the harness clones with new network,
 * mount, PID, UTS and IPC namespaces.  Init is PID 1 of its namespace, so
 * killing it kills every process on the host at once (a machine crash).  On
 * start, init (in parallel with the other inits) mounts the host's disk at the
 * working directory, its own /tmp, the run's /etc/hosts, any shared paths and
 * a /proc of its own, sets the hostname, reports ready on a pipe shared by all
 * inits, then only reaps orphans until it is killed or the harness goes away.
 *
 * Processes are not started by init: the harness forks them straight into the
 * host (setns to init's PID namespace for the fork, then the child joins the
 * other namespaces and the host's cgroup), so the harness is the parent of
 * every process and learns exits, signals and core dumps first-hand.
 *
 * Nothing outlives the harness: the harness runs in a private mount namespace
 * (every mount of a run vanishes with it), namespaces are never bind-mounted
 * (the kernel frees them with their last process), and every init dies with
 * the harness through PR_SET_PDEATHSIG and through an "anchor" pipe whose
 * write end only the harness holds (init exits when it reads EOF).
 *
 * States of a host: DOWN -> STARTING (init cloned) -> UP (init reported
 * ready) -> DOWN (init killed or died).  Invariant: pidfd >= 0 iff state !=
 * DOWN.
 */
#include "harness/host.h"
#include "netem/fabric.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

static int ready_pipe[2] = {-1, -1};    /* inits write {idx, gen, err, step} */
static int anchor_pipe[2] = {-1, -1};   /* harness holds [1]; EOF = harness gone */
static int self_pidns = -1;             /* to return after a spawn */

struct ready_msg {
    int idx, generation, err, step;
};

enum init_step {
    STEP_OK, STEP_PDEATHSIG, STEP_HOSTNAME, STEP_MOUNT_DISK, STEP_MOUNT_TMP,
    STEP_MOUNT_HOSTS, STEP_MOUNT_SHARED, STEP_MOUNT_PROC, STEP_SIGNALS, STEP_MOUNT_EXPOSE,
};

static const char *step_name(int step)
{
    static const char *names[] = {
        "ready", "prctl(PR_SET_PDEATHSIG)", "sethostname", "mount disk at workdir",
        "mount /tmp", "mount /etc/hosts", "mount shared path", "mount /proc",
        "signalfd", "expose a directory under /tmp",
    };
    return step >= 0 && step < (int)(sizeof names / sizeof *names) ? names[step] : "?";
}

static void errf(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void errf(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || !errlen)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

unsigned long long fl_proc_starttime(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = 0;
    /* comm may hold spaces and parens: fields start after the last ')'. */
    char *p = strrchr(buf, ')');
    if (!p)
        return 0;
    p += 2;                     /* field 3, state */
    for (int field = 3; field < 22 && p; field++) {
        p = strchr(p, ' ');
        if (p)
            p++;
    }
    return p ? strtoull(p, NULL, 10) : 0;
}

int fl_host_global_init(char *err, size_t errlen)
{
    if (self_pidns >= 0)
        return 0;
    if (unshare(CLONE_NEWNS) < 0) {
        int e = errno;
        errf(err, errlen, "unshare(CLONE_NEWNS): %s (faultline needs root)", strerror(e));
        return -e;
    }
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) {
        int e = errno;
        errf(err, errlen, "mount --make-rprivate /: %s", strerror(e));
        return -e;
    }
    self_pidns = open("/proc/self/ns/pid", O_RDONLY | O_CLOEXEC);
    if (self_pidns < 0) {
        int e = errno;
        errf(err, errlen, "open /proc/self/ns/pid: %s", strerror(e));
        return -e;
    }
    if (pipe2(ready_pipe, O_CLOEXEC) < 0 || pipe2(anchor_pipe, O_CLOEXEC) < 0) {
        int e = errno;
        errf(err, errlen, "pipe: %s", strerror(e));
        return -e;
    }
    return 0;
}

static int mkdir_p_in_child(const char *path)
{
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = 0;
        if (mkdir(buf, 0755) < 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    return mkdir(buf, 0755) < 0 && errno != EEXIST ? -1 : 0;
}

static int bind_mount(const char *src, const char *dst)
{
    return mount(src, dst, NULL, MS_BIND | MS_REC, NULL);
}

/* Runs in the cloned child: PID 1 of the host's new namespaces. */
static __attribute__((noreturn)) void init_main(struct fl_host *h)
{
    const struct fl_host_spec *s = &h->spec;
    struct ready_msg msg = {s->idx, h->generation, 0, STEP_OK};
    int rfd = ready_pipe[1], afd = anchor_pipe[0];

    if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0) {
        msg.step = STEP_PDEATHSIG;
        goto fail;
    }
    /* Keep only the two pipes; stdin/stdout to /dev/null, stderr stays. */
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null >= 0) {
        dup2(null, 0);
        dup2(null, 1);
    }
    if (dup2(rfd, 3) < 0 || dup2(afd, 4) < 0) {
        msg.step = STEP_SIGNALS;
        goto fail;
    }
    rfd = 3;
    afd = 4;
    syscall(SYS_close_range, 5U, ~0U, 0U);
    if (s->cgroup) {
        char path[4096];
        snprintf(path, sizeof path, "%s/cgroup.procs", s->cgroup);
        int fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd >= 0) {
            if (write(fd, "0\n", 2) < 0) { /* reported by the first spawn */ }
            close(fd);
        }
    }
    if (sethostname(s->name, strlen(s->name)) < 0) {
        msg.step = STEP_HOSTNAME;
        goto fail;
    }
    if (bind_mount(s->disk_dir, s->workdir) < 0) {
        msg.step = STEP_MOUNT_DISK;
        goto fail;
    }
    for (size_t i = 0; i < s->nmounts; i++) {
        if (bind_mount(s->mounts[i].src, s->mounts[i].dst) < 0) {
            msg.step = STEP_MOUNT_SHARED;
            goto fail;
        }
    }
    if (s->hosts_file && mount(s->hosts_file, "/etc/hosts", NULL, MS_BIND, NULL) < 0) {
        msg.step = STEP_MOUNT_HOSTS;
        goto fail;
    }
    /* /tmp last: the sources above may live under the harness's /tmp.
     * Directories to expose that lie under /tmp are held by O_PATH fds
     * across the mount and bound again at their paths inside the new /tmp. */
    int keep[8];
    const char *keep_path[8];
    size_t nkeep = 0;
    for (size_t i = 0; i < s->nexpose && nkeep < 8; i++) {
        if (strncmp(s->expose[i], "/tmp/", 5) != 0)
            continue;
        int fd = open(s->expose[i], O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0) {
            msg.step = STEP_MOUNT_EXPOSE;
            goto fail;
        }
        keep_path[nkeep] = s->expose[i];
        keep[nkeep++] = fd;
    }
    if (bind_mount(s->tmp_dir, "/tmp") < 0) {
        msg.step = STEP_MOUNT_TMP;
        goto fail;
    }
    for (size_t k = 0; k < nkeep; k++) {
        char src[64];
        snprintf(src, sizeof src, "/proc/self/fd/%d", keep[k]);
        if (mkdir_p_in_child(keep_path[k]) < 0 ||
            mount(src, keep_path[k], NULL, MS_BIND, NULL) < 0) {
            msg.step = STEP_MOUNT_EXPOSE;
            goto fail;
        }
        close(keep[k]);
    }
    if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0) {
        msg.step = STEP_MOUNT_PROC;
        goto fail;
    }
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    sigprocmask(SIG_BLOCK, &set, NULL);
    int sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    if (sfd < 0) {
        msg.step = STEP_SIGNALS;
        goto fail;
    }
    if (write(rfd, &msg, sizeof msg) != sizeof msg)
        _exit(1);
    close(rfd);
    for (;;) {
        struct pollfd p[2] = {{.fd = afd, .events = POLLIN}, {.fd = sfd, .events = POLLIN}};
        if (poll(p, 2, -1) < 0 && errno != EINTR)
            _exit(1);
        if (p[0].revents)           /* EOF or error: the harness is gone */
            _exit(0);
        if (p[1].revents) {
            struct signalfd_siginfo si;
            while (read(sfd, &si, sizeof si) == sizeof si)
                ;
            while (waitpid(-1, NULL, WNOHANG) > 0)
                ;
        }
    }
fail:
    msg.err = errno;
    if (write(rfd, &msg, sizeof msg) < 0)
        _exit(1);
    _exit(1);
}

int fl_host_start(struct fl_host *h, char *err, size_t errlen)
{
    if (self_pidns < 0) {
        errf(err, errlen, "host %s: fl_host_global_init was not called", h->spec.name);
        return -EINVAL;
    }
    if (h->state != FL_HOST_DOWN) {
        errf(err, errlen, "host %s: already started", h->spec.name);
        return -EBUSY;
    }
    int pidfd = -1;
    struct clone_args ca = {
        .flags = CLONE_NEWNET | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWUTS |
                 CLONE_NEWIPC | CLONE_PIDFD,
        .pidfd = (uint64_t)(uintptr_t)&pidfd,
        .exit_signal = SIGCHLD,
    };
    fflush(NULL);
    long pid = syscall(SYS_clone3, &ca, sizeof ca);
    if (pid < 0) {
        int e = errno;
        errf(err, errlen, "host %s: clone3(new net, mount, pid, uts, ipc namespaces): %s",
             h->spec.name, strerror(e));
        return -e;
    }
    if (pid == 0)
        init_main(h);
    fcntl(pidfd, F_SETFD, FD_CLOEXEC);
    h->pid = (pid_t)pid;
    h->pidfd = pidfd;
    h->state = FL_HOST_STARTING;
    h->starttime = 0;
    return 0;
}

int fl_host_wait_ready(struct fl_host **hosts, size_t n, char *err, size_t errlen)
{
    size_t waiting = 0;
    for (size_t i = 0; i < n; i++)
        if (hosts[i]->state == FL_HOST_STARTING)
            waiting++;
    int rc = 0;
    while (waiting > 0) {
        struct pollfd p = {.fd = ready_pipe[0], .events = POLLIN};
        int r = poll(&p, 1, 10000);
        if (r < 0 && errno == EINTR)
            continue;
        if (r == 0) {
            errf(err, errlen, "%zu host(s) did not report ready within 10 s", waiting);
            return -ETIMEDOUT;
        }
        struct ready_msg m;
        ssize_t got = read(ready_pipe[0], &m, sizeof m);
        if (got != sizeof m) {
            errf(err, errlen, "reading host readiness: %s", got < 0 ? strerror(errno) : "short read");
            return -EIO;
        }
        for (size_t i = 0; i < n; i++) {
            struct fl_host *h = hosts[i];
            if (h->spec.idx != m.idx || h->generation != m.generation ||
                h->state != FL_HOST_STARTING)
                continue;
            waiting--;
            if (m.step == STEP_OK) {
                h->state = FL_HOST_UP;
                h->starttime = fl_proc_starttime(h->pid);
            } else if (rc == 0) {
                const char *what = step_name(m.step);
                const char *path = m.step == STEP_MOUNT_DISK ? h->spec.workdir
                                 : m.step == STEP_MOUNT_TMP ? "/tmp"
                                 : m.step == STEP_MOUNT_HOSTS ? "/etc/hosts"
                                 : m.step == STEP_MOUNT_PROC ? "/proc" : "";
                errf(err, errlen, "host %s: %s%s%s: %s", h->spec.name, what,
                     *path ? " " : "", path, strerror(m.err));
                rc = -(m.err ? m.err : EIO);
            }
        }
    }
    return rc;
}

int fl_host_kill(struct fl_host *h)
{
    if (h->state == FL_HOST_DOWN)
        return 0;
    /* No waiting here: a dead init is reaped only after every process of its
     * PID namespace has been reaped by its parent (us), so the caller reaps
     * init along with the rest (waitpid(-1)) in its SIGCHLD handling. */
    syscall(SYS_pidfd_send_signal, h->pidfd, SIGKILL, NULL, 0);
    close(h->pidfd);
    h->pidfd = -1;
    h->state = FL_HOST_DOWN;
    return 0;
}

bool fl_host_reaped(struct fl_host *h, pid_t pid)
{
    if (h->pid != pid)
        return false;
    if (h->state != FL_HOST_DOWN) {
        close(h->pidfd);
        h->pidfd = -1;
        h->state = FL_HOST_DOWN;
    }
    return true;
}

pid_t fl_host_spawn(struct fl_host *h, const struct fl_spawn *sp, char *err, size_t errlen)
{
    if (h->state != FL_HOST_UP) {
        errf(err, errlen, "host %s is down", h->spec.name);
        return -EHOSTDOWN;
    }
    int status_pipe[2];
    if (pipe2(status_pipe, O_CLOEXEC) < 0) {
        int e = errno;
        errf(err, errlen, "host %s: pipe: %s", h->spec.name, strerror(e));
        return -e;
    }
    if (setns(h->pidfd, CLONE_NEWPID) < 0) {
        int e = errno;
        close(status_pipe[0]);
        close(status_pipe[1]);
        errf(err, errlen, "host %s: setns(pid namespace of init %d): %s", h->spec.name,
             (int)h->pid, strerror(e));
        return -e;
    }
    fflush(NULL);
    pid_t pid = fork();
    int fork_errno = errno;
    if (pid == 0) {
        struct { int err; int step; } st = {0, 0};
        close(status_pipe[0]);
        if (setns(h->pidfd, CLONE_NEWNET | CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC) < 0) {
            st.step = 1;
            goto child_fail;
        }
        if (h->spec.cgroup) {
            char path[4096];
            snprintf(path, sizeof path, "%s/cgroup.procs", h->spec.cgroup);
            int fd = open(path, O_WRONLY | O_CLOEXEC);
            if (fd < 0 || write(fd, "0\n", 2) != 2) {
                st.step = 2;
                goto child_fail;
            }
            close(fd);
        }
        if (chdir(sp->cwd ? sp->cwd : h->spec.workdir) < 0) {
            st.step = 3;
            goto child_fail;
        }
        int null = open("/dev/null", O_RDWR);
        int fds[3] = {sp->stdin_fd, sp->stdout_fd, sp->stderr_fd};
        for (int i = 0; i < 3; i++) {
            int fd = fds[i] >= 0 ? fds[i] : null;
            if (fd == i)
                fcntl(fd, F_SETFD, 0);
            else if (dup2(fd, i) < 0) {
                st.step = 4;
                goto child_fail;
            }
        }
        syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC);
        fcntl(status_pipe[1], F_SETFD, FD_CLOEXEC);
        if (sp->new_session)
            setsid();
        else
            setpgid(0, 0);
        sigset_t all;
        sigemptyset(&all);
        sigprocmask(SIG_SETMASK, &all, NULL);
        for (int sig = 1; sig < NSIG; sig++)
            signal(sig, SIG_DFL);
        if (sp->envp)
            execvpe(sp->argv[0], sp->argv, sp->envp);
        else
            execvp(sp->argv[0], sp->argv);
        st.step = 5;
child_fail:
        st.err = errno;
        if (write(status_pipe[1], &st, sizeof st) < 0)
            _exit(126);
        _exit(127);
    }
    /* Back to our own PID namespace for children, whatever happened. */
    if (setns(self_pidns, CLONE_NEWPID) < 0)
        abort();
    close(status_pipe[1]);
    if (pid < 0) {
        close(status_pipe[0]);
        errf(err, errlen, "host %s: fork into PID namespace of init %d: %s", h->spec.name,
             (int)h->pid, strerror(fork_errno));
        return -fork_errno;
    }
    struct { int err; int step; } st;
    ssize_t n;
    while ((n = read(status_pipe[0], &st, sizeof st)) < 0 && errno == EINTR)
        ;
    close(status_pipe[0]);
    if (n == sizeof st) {
        static const char *what[] = {"", "setns(net, mount, uts, ipc)", "join cgroup",
                                     "chdir", "dup2", "exec"};
        int w;
        while (waitpid(pid, &w, 0) < 0 && errno == EINTR)
            ;
        errf(err, errlen, "host %s: %s%s%s: %s", h->spec.name, what[st.step],
             st.step == 5 ? " " : "", st.step == 5 ? sp->argv[0] : "", strerror(st.err));
        return -st.err;
    }
    return pid;
}

int fl_host_enter_pid(pid_t init_pid, unsigned long long starttime, const char *workdir,
                      char *err, size_t errlen)
{
    int pidfd = (int)syscall(SYS_pidfd_open, init_pid, 0);
    if (pidfd < 0) {
        int e = errno;
        errf(err, errlen, "host init %d: pidfd_open: %s (is the run still up?)", (int)init_pid,
             strerror(e));
        return -e;
    }
    if (starttime && fl_proc_starttime(init_pid) != starttime) {
        close(pidfd);
        errf(err, errlen, "host init %d is gone (its pid now belongs to another process)",
             (int)init_pid);
        return -ESRCH;
    }
    if (setns(pidfd, CLONE_NEWNET | CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWPID) < 0) {
        int e = errno;
        close(pidfd);
        errf(err, errlen, "host init %d: setns: %s", (int)init_pid, strerror(e));
        return -e;
    }
    close(pidfd);
    if (workdir && chdir(workdir) < 0) {
        int e = errno;
        errf(err, errlen, "chdir %s: %s", workdir, strerror(e));
        return -e;
    }
    return 0;
}

int fl_host_up_batch(struct fl_host **hosts, size_t n, struct fl_fabric *fab, char *err,
                     size_t errlen)
{
    int rc;
    for (size_t i = 0; i < n; i++)
        if ((rc = fl_host_start(hosts[i], err, errlen)) < 0 ||
            (rc = fl_fabric_attach(fab, hosts[i]->spec.idx, hosts[i]->pid, err, errlen)) < 0)
            return rc;
    if ((rc = fl_fabric_commit(fab, err, errlen)) < 0)
        return rc;
    return fl_host_wait_ready(hosts, n, err, errlen);
}
