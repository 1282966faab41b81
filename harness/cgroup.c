/*
 * cgroup.c: per-host pids cgroups, for the `limit: {threads: N}` fault.
 *
 * A run that limits a host's tasks creates one cgroup per such host under
 * faultline/<run_id>/<host> in the pids hierarchy (cgroup v2 when the unified
 * hierarchy has the pids controller, else the v1 pids hierarchy).  The host's
 * init and every process started on the host join it, so pids.max counts
 * every thread and process of the host, like a machine's task limit.  The
 * run removes its cgroups at the end; `gc` removes those of killed runs.
 *
 * faultline/<run_id> also holds an empty cgroup named
 * "harness.<pid>.<starttime>" (no host name has a '.'): the harness that owns
 * the run, so that any `gc`, whatever its --out, can tell a live run's
 * cgroups (even while none of its processes is up) from a dead run's.
 */
#include "harness/cgroup.h"
#include "harness/host.h"
#include "harness/rundir.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

int fl_cgroup_root(char *buf, size_t len)
{
    char controllers[256] = "";
    int fd = open("/sys/fs/cgroup/cgroup.controllers", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t n = read(fd, controllers, sizeof controllers - 1);
        close(fd);
        if (n > 0)
            controllers[n] = 0;
        if (strstr(controllers, "pids")) {
            snprintf(buf, len, "/sys/fs/cgroup/faultline");
            return 2;
        }
    }
    struct stat st;
    if (stat("/sys/fs/cgroup/pids/tasks", &st) == 0) {
        snprintf(buf, len, "/sys/fs/cgroup/pids/faultline");
        return 1;
    }
    return -ENOTSUP;
}

int fl_cgroup_create(const char *run_id, const char *host, char *path, size_t len)
{
    char root[PATH_MAX];
    int v = fl_cgroup_root(root, sizeof root);
    if (v < 0)
        return v;
    if (v == 2) {
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
    if (snprintf(mark, sizeof mark, "%s/%s/" FL_CGROUP_OWNER_PREFIX "%d.%llu", root, run_id,
                 (int)getpid(), fl_proc_starttime(getpid())) >= (int)sizeof mark)
        return -ENAMETOOLONG;
    int rc = fl_mkdir_p(mark, 0755);
    if (rc < 0)
        return rc;
    if (snprintf(path, len, "%s/%s/%s", root, run_id, host) >= (int)len)
        return -ENAMETOOLONG;
    rc = fl_mkdir_p(path, 0755);
    return rc;
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

/* Moves whatever is left in a cgroup to its parent, then removes it. */
static int remove_one(const char *path)
{
    if (rmdir(path) == 0 || errno == ENOENT)
        return 0;
    if (errno != EBUSY)
        return -errno;
    char procs[PATH_MAX], parent[PATH_MAX];
    snprintf(procs, sizeof procs, "%s/cgroup.procs", path);
    snprintf(parent, sizeof parent, "%s", path);
    char *slash = strrchr(parent, '/');
    if (!slash)
        return -EINVAL;
    *slash = 0;
    /* The processes are ours and should be dead; kill what remains. */
    FILE *f = fopen(procs, "re");
    if (f) {
        int pid;
        while (fscanf(f, "%d", &pid) == 1)
            kill(pid, 9);
        fclose(f);
    }
    for (int i = 0; i < 100; i++) {
        if (rmdir(path) == 0 || errno == ENOENT)
            return 0;
        usleep(10000);          /* the kernel frees a killed task's pids entry asynchronously */
    }
    return -errno;
}

int fl_cgroup_remove_run(const char *run_dir_path)
{
    /* run_dir_path: .../faultline/<run_id>; remove children then itself. */
    char path[PATH_MAX];
    int rc = 0;
    DIR *d = opendir(run_dir_path);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            if (e->d_type != DT_DIR || e->d_name[0] == '.')
                continue;
            snprintf(path, sizeof path, "%s/%s", run_dir_path, e->d_name);
            int r = remove_one(path);
            if (r < 0 && rc == 0)
                rc = r;
        }
        closedir(d);
    }
    int r = remove_one(run_dir_path);
    return rc ? rc : r;
}
