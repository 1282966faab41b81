/*
 * run_owned.c: the checks `faultline gc` makes before it acts on what a run's
 * state file names.  The state file lies in the run's directory, which a
 * host's task may be able to write (issue 21: a task rewrote it to name a
 * process and a cgroup outside faultline, and gc killed and removed them), so
 * nothing in it is taken on trust:
 *
 *   - a pid is signalled only through a pidfd (a pid reused meanwhile is
 *     never hit), and only when the process started at the recorded time
 *     (non-zero), is what the state file says it is (a host's init: PID 1 of
 *     a PID namespace of its own; the switch holder: named "fl-sw <run>";
 *     both in a network namespace other than gc's; a task's process:
 *     FAULTLINE_RUN=<run> in its environment, in a PID namespace other than
 *     gc's), and no live faultline harness is among its ancestors (every
 *     process of a live run descends from its harness, a dead run's were
 *     adopted by init).  A process outside faultline passes none of these,
 *     and one of another, live run fails the last;
 *   - a cgroup is removed only when it is exactly <root>/<run> for one of
 *     faultline's own roots (computed here, never read from the file), a
 *     real directory reached through no symlink and no "..".
 *
 * What a process or the kernel says about itself (its start time, its
 * namespaces, its ancestors, its own environment and name) is not something
 * another host's task can write.
 */
#include "harness/sys/run_owned.h"
#include "harness/sys/cgroup.h"
#include "harness/sys/host.h"
#include "harness/sys/rundir.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif

static void say(char *why, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void say(char *why, size_t len, const char *fmt, ...)
{
    if (!why || !len)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, len, fmt, ap);
    va_end(ap);
}

bool fl_owned_run_id_ok(const char *id)
{
    if (!id[0] || !strcmp(id, ".") || !strcmp(id, "..") || strlen(id) >= 64)
        return false;
    for (const char *p = id; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '-' || *p == '_' || *p == '.'))
            return false;
    return true;
}

/* Same namespace of kind ns ("net", "pid") as this process? */
static bool same_ns(pid_t pid, const char *ns)
{
    char p[64], self[64];
    struct stat a, b;
    snprintf(p, sizeof p, "/proc/%d/ns/%s", (int)pid, ns);
    snprintf(self, sizeof self, "/proc/self/ns/%s", ns);
    if (stat(p, &a) < 0 || stat(self, &b) < 0)
        return true; /* unknown: taken as ours, so refused */
    return a.st_ino == b.st_ino && a.st_dev == b.st_dev;
}

/* One line of /proc/PID/status ("PPid", "NSpid"), its value into buf. */
static bool status_field(pid_t pid, const char *key, char *buf, size_t len)
{
    char path[64], *text;
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    if (fl_read_file(path, &text, NULL) < 0)
        return false;
    size_t kl = strlen(key);
    bool found = false;
    for (char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        if (!strncmp(l, key, kl) && l[kl] == ':') {
            const char *v = l + kl + 1;
            while (*v == ' ' || *v == '\t')
                v++;
            size_t n = strcspn(v, "\n");
            snprintf(buf, len, "%.*s", (int)(n < len ? n : len - 1), v);
            found = true;
            break;
        }
    }
    free(text);
    return found;
}

/* PID 1 of a PID namespace below this one (a host's init)? */
static bool nested_init(pid_t pid)
{
    char v[256];
    if (!status_field(pid, "NSpid", v, sizeof v))
        return false;
    const char *last = strrchr(v, '\t');
    if (!last)
        last = strrchr(v, ' ');
    return last && atoi(last + 1) == 1 && !same_ns(pid, "pid");
}

static bool read_comm(pid_t pid, char *buf, size_t len)
{
    char path[64], *text;
    snprintf(path, sizeof path, "/proc/%d/comm", (int)pid);
    if (fl_read_file(path, &text, NULL) < 0)
        return false;
    text[strcspn(text, "\n")] = 0;
    snprintf(buf, len, "%s", text);
    free(text);
    return true;
}

/* A faultline harness: this program (same executable file) or one named
 * faultline, that is not a host's init (which runs faultline's code too). */
static bool is_harness(pid_t pid)
{
    char comm[32], path[64];
    struct stat a, b;
    snprintf(path, sizeof path, "/proc/%d/exe", (int)pid);
    bool same_exe = stat(path, &a) == 0 && stat("/proc/self/exe", &b) == 0 &&
                    a.st_ino == b.st_ino && a.st_dev == b.st_dev;
    bool named = read_comm(pid, comm, sizeof comm) && !strcmp(comm, "faultline");
    return (same_exe || named) && !nested_init(pid);
}

bool fl_owned_under_live_harness(pid_t pid)
{
    for (int depth = 0; depth < 4096; depth++) {
        char v[32];
        if (!status_field(pid, "PPid", v, sizeof v))
            return false;
        pid_t parent = atoi(v);
        if (parent <= 1)
            return false;
        if (is_harness(parent))
            return true;
        pid = parent;
    }
    return true; /* a loop: something odd, left alone */
}

static bool environ_names(pid_t pid, const char *run_id)
{
    char path[64], want[128], *env;
    size_t len;
    snprintf(path, sizeof path, "/proc/%d/environ", (int)pid);
    int n = snprintf(want, sizeof want, "FAULTLINE_RUN=%s", run_id);
    if (fl_read_file(path, &env, &len) < 0)
        return false;
    bool found = false;
    for (size_t off = 0; off < len && !found; off += strlen(env + off) + 1)
        found = !strncmp(env + off, want, (size_t)n) && env[off + (size_t)n] == 0;
    free(env);
    return found;
}

/* Why the process is not run_id's kind (NULL: it is). */
static const char *not_owned(pid_t pid, unsigned long long starttime, enum fl_owned_kind kind,
                             const char *run_id)
{
    if (starttime == 0)
        return "no start time recorded";
    if (fl_proc_starttime(pid) != starttime)
        return "started at another time than recorded (another process)";
    char comm[32], want[32];
    switch (kind) {
    case FL_OWNED_INIT:
        if (!nested_init(pid))
            return "not PID 1 of a PID namespace of its own (not a host's init)";
        if (same_ns(pid, "net"))
            return "in the machine's network namespace (not a host's)";
        break;
    case FL_OWNED_SWITCH:
        snprintf(want, sizeof want, "fl-sw %s", run_id);
        want[15] = 0; /* comm's length */
        if (!read_comm(pid, comm, sizeof comm) || strcmp(comm, want))
            return "not named as the run's switch";
        if (same_ns(pid, "net"))
            return "in the machine's network namespace (not the switch's)";
        break;
    case FL_OWNED_TASK:
        if (same_ns(pid, "pid"))
            return "in the machine's PID namespace (not on a host)";
        if (!environ_names(pid, run_id))
            return "its environment does not name the run";
        break;
    }
    if (fl_owned_under_live_harness(pid))
        return "a live faultline harness is among its ancestors (another run's)";
    return NULL;
}

int fl_owned_pidfd(pid_t pid, unsigned long long starttime, enum fl_owned_kind kind,
                   const char *run_id, char *why, size_t whylen)
{
    if (pid <= 1 || pid == getpid()) {
        say(why, whylen, "pid %d is not a process of a run", (int)pid);
        return -EPERM;
    }
    if (!fl_owned_run_id_ok(run_id)) {
        say(why, whylen, "'%s' is not a run id", run_id);
        return -EPERM;
    }
    /* the pidfd first: what is checked below is then the process it holds,
     * or that process is gone and the signal fails with ESRCH */
    int fd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (fd < 0)
        return -errno;
    const char *no = not_owned(pid, starttime, kind, run_id);
    if (no) {
        close(fd);
        say(why, whylen, "pid %d: %s", (int)pid, no);
        return -EPERM;
    }
    return fd;
}

int fl_owned_kill(pid_t pid, unsigned long long starttime, enum fl_owned_kind kind,
                  const char *run_id, int sig, char *why, size_t whylen)
{
    int fd = fl_owned_pidfd(pid, starttime, kind, run_id, why, whylen);
    if (fd < 0)
        return fd;
    int rc = syscall(SYS_pidfd_send_signal, fd, sig, NULL, 0) < 0 ? -errno : 0;
    close(fd);
    return rc;
}

int fl_owned_cgroup(const char *path, const char *run_id, char *why, size_t whylen)
{
    if (!fl_owned_run_id_ok(run_id)) {
        say(why, whylen, "'%s' is not a run id", run_id);
        return -EPERM;
    }
    char roots[3][PATH_MAX];
    int nr = fl_cgroup_roots(roots);
    for (int i = 0; i < nr; i++) {
        char want[PATH_MAX];
        if (snprintf(want, sizeof want, "%s/%s", roots[i], run_id) >= (int)sizeof want)
            continue;
        if (strcmp(path, want))
            continue;
        /* the same text: now no symlink on the way, and a directory */
        struct stat sb;
        char real[PATH_MAX];
        if (lstat(path, &sb) < 0)
            return -errno;
        if (!S_ISDIR(sb.st_mode) || !realpath(path, real) || strcmp(real, want)) {
            say(why, whylen, "%s is not a directory of its own (a symlink on the way?)", path);
            return -EPERM;
        }
        return 0;
    }
    say(why, whylen, "%s is not <faultline cgroup root>/%s", path, run_id);
    return -EPERM;
}
