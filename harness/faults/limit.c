/*
 * limit.c: the `limit` fault kind: a host's resources made scarce, as on a
 * machine that runs out of them.
 *   threads  pids.max of the host's pids cgroup: every thread and process
 *            of the host counts; creating more fails with EAGAIN.  Rootless
 *            (harness/sys/rootless.c: no cgroup of its own) the soft
 *            RLIMIT_NPROC of every process on the host, now and started
 *            until the heal, as for fds below: the kernel counts it per
 *            user namespace and uid, and a host's tasks have a user
 *            namespace of their own, so every thread and process of the
 *            host's tasks counts (not its init, which the cgroup counts);
 *            a program that raises its own soft limit escapes it;
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
#include "harness/faults/kind.h"
#include "harness/scenario/load_ctx.h"
#include "harness/sys/cgroup.h"
#include "harness/sys/rootless.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>

/* Sets the soft limit of resource of every process in the PID namespace of the
 * host's init (itself included) to soft, or to its hard limit when that is
 * lower.  How many it set, or -errno of the first failure other than a
 * process that exited meanwhile. */
static int prlimit_host(const struct host_rt *hr, int resource, rlim_t soft)
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
        if (prlimit(pid, resource, NULL, &rl) == 0) {
            rl.rlim_cur = soft < rl.rlim_max ? soft : rl.rlim_max;
            if (prlimit(pid, resource, &rl, NULL) == 0) {
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

static int limit_apply(struct fl_run *r, struct fault_rt *fr, char *detail, size_t dlen, char *err,
                       size_t errlen)
{
    const struct fl_scn_action *a = &fr->f->action;
    struct host_rt *hr = &r->hosts[a->host];
    const char *name = r->s->hosts[a->host].name;
    int rc;
    if (a->threads && fl_rootless()) {
        hr->h.spec.nproc = a->threads;
        if ((rc = prlimit_host(hr, RLIMIT_NPROC, (rlim_t)a->threads)) < 0) {
            snprintf(err, errlen, "host %s: prlimit(RLIMIT_NPROC=%ld) of its processes: %s", name,
                     a->threads, strerror(-rc));
            return rc;
        }
    } else if (a->threads && (rc = fl_cgroup_set_pids_max(hr->cgroup, a->threads)) < 0) {
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
        if ((rc = prlimit_host(hr, RLIMIT_NOFILE, (rlim_t)a->fds)) < 0) {
            snprintf(err, errlen, "host %s: prlimit(RLIMIT_NOFILE=%ld) of its processes: %s", name,
                     a->fds, strerror(-rc));
            return rc;
        }
    }
    return 0;
}

static int limit_heal(struct fl_run *r, struct fault_rt *fr, bool restart, char *err, size_t errlen)
{
    const struct fl_scn_action *a = &fr->f->action;
    struct host_rt *hr = &r->hosts[a->host];
    const char *name = r->s->hosts[a->host].name;
    int rc = 0, x;
    if (a->threads && fl_rootless()) {
        hr->h.spec.nproc = 0;
        struct rlimit rl;
        getrlimit(RLIMIT_NPROC, &rl); /* the harness's: what tasks start with */
        if ((x = prlimit_host(hr, RLIMIT_NPROC, rl.rlim_cur)) < 0) {
            snprintf(err, errlen, "host %s: restore RLIMIT_NPROC of its processes: %s", name,
                     strerror(-x));
            rc = x;
        }
    } else if (a->threads && (x = fl_cgroup_set_pids_max(hr->cgroup, 0)) < 0) {
        snprintf(err, errlen, "host %s: reset pids.max: %s", name, strerror(-x));
        rc = x;
    }
    if (a->memory && (x = fl_cgroup_set_memory_max(hr->mem_cgroup, 0)) < 0 && rc == 0) {
        snprintf(err, errlen, "host %s: lift the memory limit in %s: %s", name, hr->mem_cgroup,
                 strerror(-x));
        rc = x;
    }
    if (a->fds) {
        hr->h.spec.nofile = 0;
        struct rlimit rl;
        getrlimit(RLIMIT_NOFILE, &rl); /* the harness's: what tasks start with */
        if ((x = prlimit_host(hr, RLIMIT_NOFILE, rl.rlim_cur)) < 0 && rc == 0) {
            snprintf(err, errlen, "host %s: restore RLIMIT_NOFILE of its processes: %s", name,
                     strerror(-x));
            rc = x;
        }
    }
    return rc;
}

static void limit_detail(const struct fl_run *r, const struct fault_rt *fr, char *buf, size_t len)
{
    const struct fl_scn_action *a = &fr->f->action;
    size_t n = 0;
    buf[0] = 0;
    if (a->threads)
        n += (size_t)snprintf(buf + n, len - n, "threads=%ld", a->threads);
    if (a->fds && n < len)
        n += (size_t)snprintf(buf + n, len - n, "%sfds=%ld", n ? " " : "", a->fds);
    if (a->memory && n < len)
        snprintf(buf + n, len - n, "%smemory=%" PRIu64, n ? " " : "", a->memory);
}

/* The host cgroups the run's limits need, made at set-up (before the host's
 * init starts in them). */
static int limit_init(struct fl_run *r, char *err, size_t errlen)
{
    for (size_t f = 0; f < r->nfaults; f++) {
        const struct fl_scn_action *a = &r->faults[f].f->action;
        if (a->kind != FL_SCN_ACT_LIMIT)
            continue;
        for (size_t h = 0; h < r->s->n_hosts; h++) {
            if (a->host != (int)h && a->host != FL_SCN_HOST_EVENT)
                continue; /* '{event.KEY}': any host might be the one */
            if (a->memory && fl_rootless()) {
                snprintf(err, errlen,
                         "limit fault (%s:%d): a memory limit needs a memory cgroup, and a "
                         "run without root has none of its own: run it as root, or leave "
                         "the memory limit out",
                         r->s->path, r->faults[f].f->loc.line);
                return -EPERM;
            }
            r->hosts[h].need_cgroup |= a->threads > 0 && !fl_rootless();
            r->hosts[h].need_mem_cgroup |= a->memory > 0;
        }
    }
    return 0;
}

/* ---- loading ---------------------------------------------------------- */

/* {host, threads, fds, memory}: at least one limit */
static int limit_parse(struct fl_scn_vctx *c, const ynode *fault, const ynode *key, const ynode *av,
                       struct fl_scn_action *a)
{
    int rc;
    static const char *const lkeys[] = {"host", "threads", "fds", "memory"};
    if (av->type != FL_YN_MAP) {
        char b[64];
        return fl_scn_verr(c, av->loc,
                           "'limit' must be a mapping like {host: w0, threads: 64}, not %s",
                           fl_scn_describe(av, b, sizeof b));
    }
    if ((rc = fl_scn_check_keys(c, av, lkeys, 4, "limit")) < 0)
        return rc;
    const ynode *h = fl_scn_yaml_get(av, "host", NULL), *th = fl_scn_yaml_get(av, "threads", NULL);
    const ynode *fd = fl_scn_yaml_get(av, "fds", NULL), *mem = fl_scn_yaml_get(av, "memory", NULL);
    if (!h)
        return fl_scn_verr(c, av->loc, "limit needs 'host'");
    if (!th && !fd && !mem)
        return fl_scn_verr(
            c, av->loc,
            "limit needs at least one of 'threads' (the most tasks the host "
            "may run), 'fds' (the most open files per process) or 'memory' (the most "
            "memory the host's processes may use)");
    if ((rc = fl_scn_resolve_target(c, h, "limit", &a->target)) < 0 ||
        (th && (rc = fl_scn_get_long(c, th, "'threads'", 1, 1L << 22, &a->threads)) < 0) ||
        (fd && (rc = fl_scn_get_long(c, fd, "'fds'", 3, 1L << 20, &a->fds)) < 0))
        return rc;
    if (mem) {
        if ((rc = fl_scn_want(c, mem, FL_YN_SCALAR, "'memory'")) < 0)
            return rc;
        if (fl_scn_size_parse(mem->value, &a->memory) < 0 || a->memory == 0)
            return fl_scn_verr(
                c, mem->loc, "limit 'memory' must be a size like 64M or 1G, not '%s'", mem->value);
        if (a->memory < 4 << 20)
            return fl_scn_verr(c, mem->loc, "limit 'memory' %s is too small (at least 4M)",
                               mem->value);
    }
    a->host = a->target.host;
    return 0;
}

const struct fl_fault_kind fl_kind_limit = {
    .kind = FL_SCN_ACT_LIMIT,
    .name = "limit",
    .lasting = true,
    .parse = limit_parse,
    .at_setup = true,
    .init = limit_init,
    .detail = limit_detail,
    .apply = limit_apply,
    .heal = limit_heal,
};
