/*
 * rootless.c: faultline for a user without root.  An ordinary user may make
 * a user namespace and, owned by it, network, mount, PID, UTS, IPC and time
 * namespaces, veth pairs, bridges, nftables rules, tmpfs, overlay and FUSE
 * mounts: everything a run makes of hosts.  So a harness started by a user
 * other than root first moves itself into a user namespace of its own
 * (fl_rootless_enter, before it has a thread or a child), where it is root
 * with every capability over what it makes and over nothing of the
 * machine's, and runs on as PID 1 of a PID namespace of its own, with a
 * network namespace of its own (loopback only) and its own /proc; the
 * process the user started stays outside, forwards the signals sent to it
 * and ends as the harness ended.  In the user namespace the user's own uid
 * is 0, and so is the user's gid (the only ids mapped); everything it
 * writes outside is the user's.  Every
 * namespace a run then makes belongs to that user namespace, and all of it
 * ends with the harness's last process, as under root.
 *
 * Running rootless is a fact of the process, not a flag: it is not root, or
 * the ids mapped in /proc/self/uid_map are not every id (fl_rootless), so a
 * faultline that a rootless one starts knows it too.
 *
 * What differs rootless (each place says so): the defaults of the files a
 * run shares with other runs (fl_rootless_home: the workdir and the runs
 * lock under ~/.cache/faultline instead of /srv and /run), a host's /dev
 * (device nodes bound from the machine's, not made), the overlay's own
 * xattrs (user.overlay.*), and the faults that want a cgroup (refused
 * before the run when none is delegated, see harness/faults/).
 */
#include "harness/sys/rootless.h"
#include "netem/seterr.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

int fl_write_proc(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t n = write(fd, text, strlen(text));
    int e = n < 0 ? errno : n != (ssize_t)strlen(text) ? EIO : 0;
    close(fd);
    return -e;
}

bool fl_rootless(void)
{
    static int known = -1;
    if (known < 0 && geteuid() != 0)
        known = 1; /* not yet in its user namespace */
    if (known < 0) {
        char buf[256] = "";
        FILE *f = fopen("/proc/self/uid_map", "re");
        unsigned long inner = 0, outer = 0, count = 0;
        /* the machine's user namespace maps all of 0..2^32-2 onto itself */
        known = !(f && fgets(buf, sizeof buf, f) &&
                  sscanf(buf, "%lu %lu %lu", &inner, &outer, &count) == 3 && inner == 0 &&
                  outer == 0 && count == 4294967295UL);
        if (f)
            fclose(f);
    }
    return known;
}

int fl_userns_identity_map(const char *which, char *buf, size_t len)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/self/%s", which);
    FILE *f = fopen(path, "re");
    if (!f)
        return -errno;
    size_t k = 0;
    buf[0] = 0;
    unsigned long inner, outer, count;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "%lu %lu %lu", &inner, &outer, &count) == 3) {
            int n = snprintf(buf + k, len - k, "%lu %lu %lu\n", inner, inner, count);
            if (n < 0 || (size_t)n >= len - k) {
                fclose(f);
                return -ENAMETOOLONG;
            }
            k += (size_t)n;
        }
    fclose(f);
    return k ? 0 : -ENOENT;
}

static volatile sig_atomic_t child_pid;
static int outer_pid;
static unsigned long long outer_start;

/* pid and start time of the caller, from the /proc mounted now */
static void read_self(int *pid, unsigned long long *start)
{
    char buf[1024];
    *pid = getpid();
    *start = 0;
    FILE *f = fopen("/proc/self/stat", "re");
    if (f && fgets(buf, sizeof buf, f)) {
        const char *rp = strrchr(buf, ')'); /* the name may hold anything */
        int p = 0;
        if (rp && sscanf(buf, "%d", &p) == 1) {
            *pid = p;
            /* after ')': state (3) ... starttime (22) */
            const char *c = rp + 2;
            for (int field = 3; field < 22 && c; field++)
                if ((c = strchr(c, ' ')))
                    c++;
            if (c)
                *start = strtoull(c, NULL, 10);
        }
    }
    if (f)
        fclose(f);
}

void fl_rootless_self(int *pid, unsigned long long *starttime)
{
    if (outer_pid > 0) {
        *pid = outer_pid;
        *starttime = outer_start;
    } else
        read_self(pid, starttime);
}

/* A signal sent to the process the user started (kill PID) goes on to the
 * harness; one the terminal sent to its whole process group reached the
 * harness too, and is not sent twice (a second SIGINT skips the grace). */
static void forward(int sig, siginfo_t *si, void *ctx)
{
    (void)ctx;
    if (child_pid > 0 && si->si_code != SI_KERNEL)
        kill(child_pid, sig);
}

/* The parent left outside: forwards signals, waits for the harness (PID 1
 * inside) and ends as it ended. */
static __attribute__((noreturn)) void relay(pid_t pid)
{
    child_pid = pid;
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
    struct sigaction sa = {.sa_sigaction = forward, .sa_flags = SA_SIGINFO | SA_RESTART};
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++)
        sigaction(sigs[i], &sa, NULL);
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            _exit(2);
    if (WIFSIGNALED(st)) {
        signal(WTERMSIG(st), SIG_DFL);
        raise(WTERMSIG(st));
        _exit(128 + WTERMSIG(st));
    }
    _exit(WEXITSTATUS(st));
}

int fl_rootless_enter(char *err, size_t errlen)
{
    if (geteuid() == 0)
        return 0;
    uid_t uid = geteuid();
    gid_t gid = getegid();
    if (unshare(CLONE_NEWUSER) < 0) {
        int e = errno;
        fl_netem_seterr(err, errlen,
                        "running as uid %u, not root: unshare(CLONE_NEWUSER): %s; this kernel "
                        "or machine does not let this user make user namespaces (see "
                        "/proc/sys/user/max_user_namespaces, and kernel.apparmor_restrict_"
                        "unprivileged_userns or kernel.unprivileged_userns_clone where they "
                        "exist): run as root, or allow them (`faultline doctor` says what "
                        "this machine offers)",
                        (unsigned)uid, strerror(e));
        return -e;
    }
    char text[64];
    const char *what = "uid_map";
    snprintf(text, sizeof text, "0 %u 1\n", (unsigned)uid);
    int rc = fl_write_proc("/proc/self/uid_map", text);
    if (rc == 0) {
        what = "setgroups";
        rc = fl_write_proc("/proc/self/setgroups", "deny\n");
    }
    if (rc == 0) {
        what = "gid_map";
        snprintf(text, sizeof text, "0 %u 1\n", (unsigned)gid);
        rc = fl_write_proc("/proc/self/gid_map", text);
    }
    /* its own network (the fabric returns to it after each setns), PID
     * namespace (the harness returns there after spawning into a host's)
     * and mounts (a /proc that shows that PID namespace) */
    if (rc == 0) {
        what = "unshare(network, PID and mount namespaces)";
        rc = unshare(CLONE_NEWNET | CLONE_NEWPID | CLONE_NEWNS) < 0 ? -errno : 0;
    }
    if (rc < 0) {
        fl_netem_seterr(err, errlen, "running as uid %u, not root: the user namespace's %s: %s",
                        (unsigned)uid, what, strerror(-rc));
        return rc;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        fl_netem_seterr(err, errlen, "running as uid %u, not root: fork: %s", (unsigned)uid,
                        strerror(e));
        return -e;
    }
    if (pid > 0)
        relay(pid); /* never returns */
    /* PID 1 of the new namespace: it ends with the process that made it */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    /* the machine's /proc is still mounted: the pid it knows this one by */
    read_self(&outer_pid, &outer_start);
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
        mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0) {
        int e = errno;
        fl_netem_seterr(err, errlen, "running as uid %u, not root: mount /proc: %s", (unsigned)uid,
                        strerror(e));
        return -e;
    }
    return 0;
}

unsigned fl_rootless_outer_uid(void)
{
    char buf[256] = "";
    unsigned long inner, outer = 0, count;
    FILE *f = fopen("/proc/self/uid_map", "re");
    if (f && fgets(buf, sizeof buf, f) && sscanf(buf, "%lu %lu %lu", &inner, &outer, &count) == 3 &&
        inner == 0)
        ;
    else
        outer = getuid();
    if (f)
        fclose(f);
    return (unsigned)outer;
}

const char *fl_rootless_home(void)
{
    static char dir[PATH_MAX];
    if (!dir[0]) {
        const char *cache = getenv("XDG_CACHE_HOME");
        const char *home = getenv("HOME");
        if (cache && cache[0] == '/')
            snprintf(dir, sizeof dir, "%s/faultline", cache);
        else if (home && home[0] == '/' && strcmp(home, "/"))
            snprintf(dir, sizeof dir, "%s/.cache/faultline", home);
        else
            snprintf(dir, sizeof dir, "/var/tmp/faultline-%u", fl_rootless_outer_uid());
    }
    return dir;
}
