/*
 * faults/limit.c: the `limit` fault: a host's resources made scarce, as on a
 * machine that runs out of them.
 *   threads  pids.max of the host's pids cgroup: every thread and process
 *            of the host counts; creating more fails with EAGAIN;
 *   fds      the soft RLIMIT_NOFILE of every process on the host now
 *            (prlimit) and of every process started there until the heal
 *            (fl_host_spawn sets it from the host's spec): opening more
 *            fails with EMFILE; files already open stay open.  Only the soft
 *            limit: lowering a hard limit cannot be undone without
 *            CAP_SYS_RESOURCE (which containers often lack), so a program
 *            that raises its own soft limit escapes it, as under a low
 *            `ulimit -Sn`;
 *   memory   the limit of the host's memory cgroup, with no swap: beyond
 *            it the kernel reclaims what it can and then its OOM killer
 *            ends a process of the host (SIGKILL).  The host's disk is
 *            memory (tmpfs), so what the host's processes write to it counts
 *            too, as it would not on a machine with a real disk.
 * A heal lifts each limit the fault set: pids.max and the memory limit back
 * to none, and the open-files limit of every process on the host back to
 * the harness's own soft limit (the one every task starts with).  Limits hold across a
 * restart of the host (the cgroups stay; the spec keeps the open-files
 * limit).  Of two limit faults on one host, the one applied last holds.
 */
#include "harness/engine/engine_int.h"
#include "harness/sys/cgroup.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>

/* Sets the soft RLIMIT_NOFILE of every process in the PID namespace of the
 * host's init (itself included) to soft, or to its hard limit when that is
 * lower.  How many it set, or -errno of the first failure other than a
 * process that exited meanwhile. */
static int prlimit_host(const struct host_rt *hr, rlim_t soft)
{
    if (hr->h.state != FL_HOST_UP || hr->h.pid <= 0)
        return 0;
    char path[64];
    struct stat want, st;
    snprintf(path, sizeof path, "/proc/%d/ns/pid", (int)hr->h.pid);
    if (stat(path, &want) < 0)
        return -errno;
    DIR *d = opendir("/proc");
    if (!d)
        return -errno;
    int n = 0, rc = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        int pid = atoi(e->d_name);
        if (pid <= 0)
            continue;
        snprintf(path, sizeof path, "/proc/%d/ns/pid", pid);
        if (stat(path, &st) < 0 || st.st_ino != want.st_ino || st.st_dev != want.st_dev)
            continue;
        struct rlimit rl;
        if (prlimit(pid, RLIMIT_NOFILE, NULL, &rl) == 0) {
            rl.rlim_cur = soft < rl.rlim_max ? soft : rl.rlim_max;
            if (prlimit(pid, RLIMIT_NOFILE, &rl, NULL) == 0) {
                n++;
                continue;
            }
        }
        if (errno != ESRCH && rc == 0)
            rc = -errno;
    }
    closedir(d);
    return rc < 0 ? rc : n;
}

int fl_limit_apply(struct engine *e, struct fault_rt *fr, char *err, size_t errlen)
{
    const struct fl_scn_action *a = &fr->f->action;
    struct host_rt *hr = &e->hosts[a->host];
    const char *name = e->s->hosts[a->host].name;
    int rc;
    if (a->threads && (rc = fl_cgroup_set_pids_max(hr->cgroup, a->threads)) < 0) {
        snprintf(err, errlen, "host %s: write pids.max=%ld in %s: %s", name, a->threads, hr->cgroup,
                 strerror(-rc));
        return rc;
    }
    if (a->memory && (rc = fl_cgroup_set_memory_max(hr->mem_cgroup, a->memory)) < 0) {
        snprintf(err, errlen, "host %s: set the memory limit to %" PRIu64 " bytes in %s: %s", name,
                 a->memory, hr->mem_cgroup, strerror(-rc));
        return rc;
    }
    if (a->fds) {
        hr->h.spec.nofile = a->fds;
        if ((rc = prlimit_host(hr, (rlim_t)a->fds)) < 0) {
            snprintf(err, errlen, "host %s: prlimit(RLIMIT_NOFILE=%ld) of its processes: %s", name,
                     a->fds, strerror(-rc));
            return rc;
        }
    }
    return 0;
}

int fl_limit_heal(struct engine *e, struct fault_rt *fr, char *err, size_t errlen)
{
    const struct fl_scn_action *a = &fr->f->action;
    struct host_rt *hr = &e->hosts[a->host];
    const char *name = e->s->hosts[a->host].name;
    int rc = 0, r;
    if (a->threads && (r = fl_cgroup_set_pids_max(hr->cgroup, 0)) < 0) {
        snprintf(err, errlen, "host %s: reset pids.max: %s", name, strerror(-r));
        rc = r;
    }
    if (a->memory && (r = fl_cgroup_set_memory_max(hr->mem_cgroup, 0)) < 0 && rc == 0) {
        snprintf(err, errlen, "host %s: lift the memory limit in %s: %s", name, hr->mem_cgroup,
                 strerror(-r));
        rc = r;
    }
    if (a->fds) {
        hr->h.spec.nofile = 0;
        struct rlimit rl;
        getrlimit(RLIMIT_NOFILE, &rl);      /* the harness's: what tasks start with */
        if ((r = prlimit_host(hr, rl.rlim_cur)) < 0 && rc == 0) {
            snprintf(err, errlen, "host %s: restore RLIMIT_NOFILE of its processes: %s", name,
                     strerror(-r));
            rc = r;
        }
    }
    return rc;
}

void fl_limit_detail(const struct fl_scn_action *a, char *buf, size_t len)
{
    size_t n = 0;
    buf[0] = 0;
    if (a->threads)
        n += (size_t)snprintf(buf + n, len - n, "threads=%ld", a->threads);
    if (a->fds && n < len)
        n += (size_t)snprintf(buf + n, len - n, "%sfds=%ld", n ? " " : "", a->fds);
    if (a->memory && n < len)
        snprintf(buf + n, len - n, "%smemory=%" PRIu64, n ? " " : "", a->memory);
}
