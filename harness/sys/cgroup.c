/*
 * cgroup.c: faultline's cgroups: per-host pids and memory cgroups, for the
 * `limit: {threads: N}` and `limit: {memory: SIZE}` faults, and per-task
 * freezer cgroups, for the `pause` fault.
 *
 * A run that limits a host's tasks creates one cgroup per such host under
 * faultline/<run_id>/<host> in the pids hierarchy (cgroup v2 when the unified
 * hierarchy has the pids controller, else the v1 pids hierarchy).  The host's
 * init and every process started on the host join it, so pids.max counts
 * every thread and process of the host, like a machine's task limit.
 *
 * A run that limits a host's memory creates one memory cgroup per such host,
 * faultline/<run_id>/<host>: on cgroup v2 the host's pids cgroup itself
 * (the memory controller enabled down to it), on v1 a cgroup of the memory
 * hierarchy that the host's init and every process started there join too.
 *
 * A run that pauses a task (or a host's tasks) creates one cgroup per such
 * task under faultline/<run_id>/<host>/<task> in the freezer hierarchy: the
 * unified one (cgroup.freeze, cgroup.events) when /sys/fs/cgroup is cgroup
 * v2, else the v1 freezer (freezer.state).  On v2 that is the same tree as
 * the pids cgroups, and a task's cgroup then sits below its host's, so the
 * host's pids.max still counts it (the host cgroup enables no controller for
 * its children, so it may hold init's process and the task cgroups both).
 * Each process of the task joins it before exec, and its descendants stay in
 * it whatever they do with sessions and process groups, so freezing it stops
 * exactly the task's processes, all of them, and its process list reaches
 * every one of them with a signal.
 *
 * Rootless (rootless.c) the machine's hierarchies are not the run's: only
 * freezer cgroups, and only in a cgroup v2 directory delegated to the user
 * (fl_cgroup_delegated), <delegated>/faultline/<run_id>/<host>/<task>.
 *
 * A frozen cgroup's processes die only once thawed, and a cgroup can be
 * removed only once empty: removal signals what is left, then thaws, then
 * removes, depth first.  The run removes its cgroups at the end; `gc` removes
 * those of killed runs, in both hierarchies.
 *
 * faultline/<run_id> (in each hierarchy the run uses) also holds an empty
 * cgroup named
 * "harness.<pid>.<starttime>" (no host name has a '.'): the harness that owns
 * the run, so that any `gc`, whatever its --out, can tell a live run's
 * cgroups (even while none of its processes is up) from a dead run's.
 */
#include "harness/base/monoclock.h"
#include "harness/sys/cgroup.h"
#include "harness/sys/host.h"
#include "harness/sys/rootless.h"
#include "harness/sys/rundir.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif

static int write_str(const char *path, const char *s)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t n = write(fd, s, strlen(s));
    int e = errno;
    close(fd);
    return n < 0 ? -e : 0;
}

/* Where faultline's cgroups of a controller live: the unified hierarchy
 * (2) when it offers the controller, else the controller's v1 hierarchy
 * (1), else -ENOTSUP. */
static int root_for(const char *ctl, char *buf, size_t len)
{
    char controllers[256] = "", path[64];
    int fd = open("/sys/fs/cgroup/cgroup.controllers", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t n = read(fd, controllers, sizeof controllers - 1);
        close(fd);
        if (n > 0)
            controllers[n] = 0;
        if (strstr(controllers, ctl)) {
            snprintf(buf, len, "/sys/fs/cgroup/faultline");
            return 2;
        }
    }
    struct stat st;
    snprintf(path, sizeof path, "/sys/fs/cgroup/%s/tasks", ctl);
    if (stat(path, &st) == 0) {
        snprintf(buf, len, "/sys/fs/cgroup/%s/faultline", ctl);
        return 1;
    }
    return -ENOTSUP;
}

/* Rootless (rootless.c): the cgroup v2 directory the process runs in, when
 * it is the user's to manage, as systemd's Delegate=yes leaves a unit's
 * cgroup (`systemd-run --user --scope -p Delegate=yes faultline ...`): the
 * user owns it and may write its cgroup.procs.  Its path, or -ENOTSUP. */
static int delegated_dir(char *buf, size_t len)
{
    char line[4096], mnt[PATH_MAX] = "", own[PATH_MAX] = "";
    FILE *f = fopen("/proc/self/mountinfo", "re");
    while (f && !mnt[0] && fgets(line, sizeof line, f)) {
        char mp[PATH_MAX];
        const char *sep = strstr(line, " - cgroup2 ");
        if (sep && sscanf(line, "%*d %*d %*s %*s %4095s", mp) == 1)
            snprintf(mnt, sizeof mnt, "%s", mp);
    }
    if (f)
        fclose(f);
    f = fopen("/proc/self/cgroup", "re");
    while (f && !own[0] && fgets(line, sizeof line, f))
        if (!strncmp(line, "0::", 3)) {
            line[strcspn(line, "\n")] = 0;
            snprintf(own, sizeof own, "%s", line + 3);
        }
    if (f)
        fclose(f);
    if (!mnt[0] || !own[0] || !strcmp(own, "/"))
        return -ENOTSUP;
    char procs[PATH_MAX + 32];
    struct stat st;
    if ((size_t)snprintf(buf, len, "%s%s", mnt, own) >= len ||
        (size_t)snprintf(procs, sizeof procs, "%s/cgroup.procs", buf) >= sizeof procs)
        return -ENAMETOOLONG;
    if (stat(buf, &st) < 0 || st.st_uid != getuid() || access(buf, W_OK) < 0 ||
        access(procs, W_OK) < 0)
        return -ENOTSUP;
    return 0;
}

int fl_cgroup_delegated(char *buf, size_t len)
{
    return fl_rootless() ? delegated_dir(buf, len) : -ENOTSUP;
}

int fl_cgroup_root(char *buf, size_t len)
{
    if (fl_rootless())
        return -ENOTSUP; /* limits: rlimits (faults/limit.c) */
    return root_for("pids", buf, len);
}

int fl_cgroup_freezer_root(char *buf, size_t len)
{
    struct stat st;
    /* rootless: in the user's delegated cgroup (v2) alone */
    if (fl_rootless()) {
        char dir[PATH_MAX];
        if (delegated_dir(dir, sizeof dir) < 0)
            return -ENOTSUP;
        if ((size_t)snprintf(buf, len, "%s/faultline", dir) >= len)
            return -ENAMETOOLONG;
        return 2;
    }
    /* v2 freezes with cgroup.freeze, a core file of every non-root cgroup:
     * no controller needs enabling */
    if (stat("/sys/fs/cgroup/cgroup.controllers", &st) == 0) {
        snprintf(buf, len, "/sys/fs/cgroup/faultline");
        return 2;
    }
    if (stat("/sys/fs/cgroup/freezer/tasks", &st) == 0) {
        snprintf(buf, len, "/sys/fs/cgroup/freezer/faultline");
        return 1;
    }
    return -ENOTSUP;
}

/* <root>/<run_id> with the owner mark in it (and, on v2, the pids controller
 * enabled down to it, for the host cgroups below). */
static int make_run_dir(const char *root, int v, const char *run_id)
{
    if (v == 2 && fl_rootless()) {
        /* a delegated cgroup (freezing alone: no controller to enable) */
        char sub[PATH_MAX];
        if (mkdir(root, 0755) < 0 && errno != EEXIST)
            return -errno;
        snprintf(sub, sizeof sub, "%s/%s", root, run_id);
        if (mkdir(sub, 0755) < 0 && errno != EEXIST)
            return -errno;
    } else if (v == 2) {
        /* v2: controllers must be enabled in every parent's subtree_control. */
        if (mkdir(root, 0755) < 0 && errno != EEXIST)
            return -errno;
        write_str("/sys/fs/cgroup/cgroup.subtree_control", "+pids");
        char sub[PATH_MAX];
        snprintf(sub, sizeof sub, "%s/cgroup.subtree_control", root);
        write_str(sub, "+pids");
        snprintf(sub, sizeof sub, "%s/%s", root, run_id);
        if (mkdir(sub, 0755) < 0 && errno != EEXIST)
            return -errno;
        char ctl[PATH_MAX];
        snprintf(ctl, sizeof ctl, "%s/cgroup.subtree_control", sub);
        write_str(ctl, "+pids");
    }
    /* the owner mark, before any host cgroup exists */
    char mark[PATH_MAX];
    int self;
    unsigned long long self_start;
    fl_rootless_self(&self, &self_start); /* as the machine sees it */
    if (snprintf(mark, sizeof mark, "%s/%s/" FL_CGROUP_OWNER_PREFIX "%d.%llu", root, run_id, self,
                 self_start) >= (int)sizeof mark)
        return -ENAMETOOLONG;
    return fl_mkdir_p(mark, 0755);
}

/* root/<run_id>/<rest>, made with its run directory (v: the hierarchy's
 * version, or a negative errno from looking it up). */
static int create_in(int v, const char *root, const char *run_id, const char *rest, char *path,
                     size_t len)
{
    if (v < 0)
        return v;
    int rc = make_run_dir(root, v, run_id);
    if (rc < 0)
        return rc;
    if (snprintf(path, len, "%s/%s/%s", root, run_id, rest) >= (int)len)
        return -ENAMETOOLONG;
    return fl_mkdir_p(path, 0755);
}

int fl_cgroup_create(const char *run_id, const char *host, char *path, size_t len)
{
    char root[PATH_MAX];
    int v = fl_cgroup_root(root, sizeof root);
    return create_in(v, root, run_id, host, path, len);
}

int fl_cgroup_create_task(const char *run_id, const char *host, const char *task, char *path,
                          size_t len)
{
    char root[PATH_MAX], rest[512];
    int v = fl_cgroup_freezer_root(root, sizeof root);
    if (snprintf(rest, sizeof rest, "%s/%s", host, task) >= (int)sizeof rest)
        return -ENAMETOOLONG;
    return create_in(v, root, run_id, rest, path, len);
}

int fl_cgroup_owner(const char *run_cgroup_dir, pid_t *pid, unsigned long long *starttime)
{
    DIR *d = opendir(run_cgroup_dir);
    if (!d)
        return -errno;
    int rc = -ENOENT;
    struct dirent *e;
    while ((e = readdir(d))) {
        int p;
        unsigned long long st;
        if (!strncmp(e->d_name, FL_CGROUP_OWNER_PREFIX, strlen(FL_CGROUP_OWNER_PREFIX)) &&
            sscanf(e->d_name + strlen(FL_CGROUP_OWNER_PREFIX), "%d.%llu", &p, &st) == 2) {
            *pid = p;
            *starttime = st;
            rc = 0;
            break;
        }
    }
    closedir(d);
    return rc;
}

int fl_cgroup_memory_root(char *buf, size_t len)
{
    if (fl_rootless())
        return -ENOTSUP; /* refused rootless (faults/limit.c) */
    /* on v2, the same tree as the pids cgroups */
    return root_for("memory", buf, len);
}

int fl_cgroup_roots(char roots[3][PATH_MAX])
{
    int nr = 0;
    if (fl_cgroup_root(roots[nr], PATH_MAX) > 0)
        nr++;
    if (fl_cgroup_freezer_root(roots[nr], PATH_MAX) > 0)
        nr++;
    if (fl_cgroup_memory_root(roots[nr], PATH_MAX) > 0)
        nr++;
    return nr;
}

int fl_cgroup_create_memory(const char *run_id, const char *host, char *path, size_t len)
{
    char root[PATH_MAX];
    int v = fl_cgroup_memory_root(root, sizeof root);
    if (v == 2) {
        /* the host's pids cgroup, with memory enabled down to it */
        int rc = create_in(v, root, run_id, host, path, len);
        if (rc < 0)
            return rc;
        char ctl[PATH_MAX];
        write_str("/sys/fs/cgroup/cgroup.subtree_control", "+memory");
        snprintf(ctl, sizeof ctl, "%s/cgroup.subtree_control", root);
        write_str(ctl, "+memory");
        snprintf(ctl, sizeof ctl, "%s/%s/cgroup.subtree_control", root, run_id);
        return write_str(ctl, "+memory");
    }
    return create_in(v, root, run_id, host, path, len);
}

/* Writes val to path/<file> when the file exists (0 when it does not). */
static int write_opt(const char *path, const char *file, const char *val)
{
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/%s", path, file);
    if (access(p, F_OK) < 0)
        return 0;
    return write_str(p, val);
}

int fl_cgroup_set_memory_max(const char *path, unsigned long long bytes)
{
    char val[32], file[PATH_MAX];
    struct stat st;
    snprintf(file, sizeof file, "%s/memory.max", path);
    if (stat(file, &st) == 0) {
        /* v2: no swapping either, so the limit is the memory it has */
        if (bytes)
            snprintf(val, sizeof val, "%llu", bytes);
        else
            snprintf(val, sizeof val, "max");
        int rc = write_opt(path, "memory.swap.max", bytes ? "0" : "max");
        return rc < 0 ? rc : write_str(file, val);
    }
    /* v1: memsw (memory + swap) must stay >= the limit: lowered after it,
     * raised before it */
    snprintf(val, sizeof val, bytes ? "%llu" : "-1", bytes);
    int rc;
    if (bytes) {
        if ((rc = write_opt(path, "memory.limit_in_bytes", val)) < 0)
            return rc;
        return write_opt(path, "memory.memsw.limit_in_bytes", val);
    }
    if ((rc = write_opt(path, "memory.memsw.limit_in_bytes", val)) < 0)
        return rc;
    return write_opt(path, "memory.limit_in_bytes", val);
}

int fl_cgroup_set_pids_max(const char *path, long max)
{
    char file[PATH_MAX], val[32];
    snprintf(file, sizeof file, "%s/pids.max", path);
    if (max > 0)
        snprintf(val, sizeof val, "%ld", max);
    else
        snprintf(val, sizeof val, "max");
    return write_str(file, val);
}

/* v2: cgroup.freeze, then "frozen 1" in cgroup.events, which the kernel
 * notifies (POLLPRI) when it changes. */
static int freeze_v2(const char *path, bool frozen, int timeout_ms)
{
    char file[PATH_MAX];
    snprintf(file, sizeof file, "%s/cgroup.freeze", path);
    int rc = write_str(file, frozen ? "1" : "0");
    if (rc < 0 || !frozen)
        return rc; /* a thaw takes effect at once */
    snprintf(file, sizeof file, "%s/cgroup.events", path);
    int fd = open(file, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    long long deadline = fl_mono_ms() + timeout_ms;
    for (;;) {
        char buf[256];
        ssize_t n;
        if (lseek(fd, 0, SEEK_SET) < 0 || (n = read(fd, buf, sizeof buf - 1)) < 0) {
            rc = -errno;
            break;
        }
        buf[n] = 0;
        if (strstr(buf, "frozen 1")) {
            rc = 0;
            break;
        }
        long long left = deadline - fl_mono_ms();
        if (left <= 0) {
            rc = -ETIMEDOUT;
            break;
        }
        struct pollfd p = {.fd = fd, .events = POLLPRI};
        if (poll(&p, 1, (int)left) < 0 && errno != EINTR) {
            rc = -errno;
            break;
        }
    }
    close(fd);
    return rc;
}

/* v1: freezer.state.  Writing FROZEN moves it to FREEZING, and reading it
 * says FROZEN once every task is frozen.  v1 notifies nothing: the state is
 * read again every millisecond, and FROZEN written again now and then (a
 * task busy in the kernel at the first try is asked again). */
static int freeze_v1(const char *path, bool frozen, int timeout_ms)
{
    char file[PATH_MAX];
    snprintf(file, sizeof file, "%s/freezer.state", path);
    int rc = write_str(file, frozen ? "FROZEN" : "THAWED");
    if (rc < 0 || !frozen)
        return rc;
    long long deadline = fl_mono_ms() + timeout_ms;
    for (int i = 1;; i++) {
        char buf[64];
        int fd = open(file, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            return -errno;
        ssize_t n = read(fd, buf, sizeof buf - 1);
        int e = errno;
        close(fd);
        if (n < 0)
            return -e;
        buf[n] = 0;
        if (!strncmp(buf, "FROZEN", 6))
            return 0;
        if (strncmp(buf, "FREEZING", 8) != 0)
            return -EIO; /* THAWED: someone else thawed it */
        if (fl_mono_ms() >= deadline)
            return -ETIMEDOUT;
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
        if (i % 16 == 0 && (rc = write_str(file, "FROZEN")) < 0)
            return rc;
    }
}

int fl_cgroup_freeze(const char *path, bool frozen, int timeout_ms)
{
    char file[PATH_MAX];
    struct stat st;
    snprintf(file, sizeof file, "%s/cgroup.freeze", path);
    if (stat(file, &st) == 0)
        return freeze_v2(path, frozen, timeout_ms);
    snprintf(file, sizeof file, "%s/freezer.state", path);
    if (stat(file, &st) == 0)
        return freeze_v1(path, frozen, timeout_ms);
    return -errno;
}

int fl_cgroup_signal(const char *path, int sig)
{
    char procs[PATH_MAX];
    snprintf(procs, sizeof procs, "%s/cgroup.procs", path);
    FILE *f = fopen(procs, "re");
    if (!f)
        return -errno;
    int pid, n = 0;
    while (fscanf(f, "%d", &pid) == 1)
        if (pid > 0 && kill(pid, sig) == 0)
            n++;
    fclose(f);
    return n;
}

/* SIGKILL to every process in the cgroup that lives on a host (in a PID
 * namespace below ours: every process a run puts in its cgroups does), each
 * through a pidfd so that a pid reused meanwhile is never hit.  A process of
 * the machine moved into the cgroup (by a host's task, say) is spared, and
 * the cgroup then stays. */
static void kill_host_members(const char *path)
{
    char procs[PATH_MAX];
    snprintf(procs, sizeof procs, "%s/cgroup.procs", path);
    FILE *f = fopen(procs, "re");
    if (!f)
        return;
    struct stat self;
    bool known = stat("/proc/self/ns/pid", &self) == 0;
    int pid;
    while (fscanf(f, "%d", &pid) == 1) {
        if (pid <= 1 || !known)
            continue;
        int fd = (int)syscall(SYS_pidfd_open, pid, 0);
        if (fd < 0)
            continue;
        char ns[64];
        struct stat sb;
        snprintf(ns, sizeof ns, "/proc/%d/ns/pid", pid);
        if (stat(ns, &sb) == 0 && !(sb.st_ino == self.st_ino && sb.st_dev == self.st_dev))
            syscall(SYS_pidfd_send_signal, fd, SIGKILL, NULL, 0);
        close(fd);
    }
    fclose(f);
}

/* Removes a cgroup and every cgroup below it, depth first.  What is left
 * in one (its processes are ours and should be dead) is killed, then thawed
 * (a frozen process dies only once thawed), before it is removed.  Only
 * directories are followed (cgroupfs has no symlinks). */
static int remove_tree(const char *path)
{
    int rc = 0;
    DIR *d = opendir(path);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            if (e->d_type != DT_DIR || e->d_name[0] == '.')
                continue;
            char sub[PATH_MAX];
            snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
            int r = remove_tree(sub);
            if (r < 0 && rc == 0)
                rc = r;
        }
        closedir(d);
    }
    if (rc < 0)
        return rc; /* a cgroup left below: this one cannot go either */
    if (rmdir(path) == 0 || errno == ENOENT)
        return rc;
    if (errno != EBUSY)
        return rc ? rc : -errno;
    for (int i = 0; i < 100; i++) {
        kill_host_members(path);
        fl_cgroup_freeze(path, false, 0); /* -ENOENT: not a freezer cgroup */
        if (rmdir(path) == 0 || errno == ENOENT)
            return rc;
        usleep(10000); /* the kernel frees a killed task's pids entry asynchronously */
    }
    return rc ? rc : -errno;
}

int fl_cgroup_remove_run(const char *run_dir_path)
{
    /* run_dir_path: .../faultline/<run_id>: every cgroup in it, then itself. */
    return remove_tree(run_dir_path);
}
