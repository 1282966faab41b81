/*
 * shared_leftovers.c: what faultline runs share outside their own run
 * directories, and removing it when the last run ends.
 *
 * Two things outlive a single run's own clean-up because other runs may be
 * using them at the same moment:
 *   - the workdir (default /srv/faultline, rootless ~/.cache/faultline/work,
 *     rootless.c): each host's disk is mounted
 *     there inside the host's mount namespace, so the directory must exist
 *     in the root filesystem; a run creates it (and missing parents) when it
 *     is not there;
 *   - the faultline/ parent cgroups (pids, freezer and memory hierarchies) that
 *     hold each run's cgroups.
 * Removing either under a live run would break it: since Linux 3.18 an
 * rmdir of a directory that is a mount point only in another mount
 * namespace succeeds and detaches that mount, i.e. another run's disks.
 *
 * So every run holds a shared flock on FL_RUNS_LOCK (rootless: the user's
 * own, in $XDG_RUNTIME_DIR or ~/.cache) from set-up to the end
 * of its clean-up.  At its end a run tries to take it exclusively without
 * waiting: only when that works (no other run holds it) does it remove the
 * workdir it created and the empty parent cgroups, and then the lock file
 * itself.  `faultline gc` does the same for the runs it collected.  A
 * shared lock taken on a lock file that was unlinked meanwhile is retaken
 * on the new file (checked by inode), so two runs never hold locks on two
 * different files.
 *
 * A workdir is removed only if faultline made it: the topmost directory a
 * run creates on the way to the workdir gets a mark file (FL_WORKDIR_MARK);
 * removal goes from the workdir up to the marked directory, each rmdir only
 * when empty, so nothing anyone else put there is ever removed.  Hosts do
 * not see the mark (their disk is mounted over the workdir) unless the
 * marked directory is a parent of the workdir.
 *
 * A private lock (FAULTLINE_RUNS_LOCK, for tests) never removes the default
 * workdir, which runs under the machine's lock share (see fl_workdir_remove).
 *
 * Invariants: the lock fd is O_CLOEXEC (a task exec'd by a run never holds
 * it; a host init forked from the harness shares the harness's lock, which
 * is the same run); upgrading a failed shared lock drops it (flock's
 * conversion is not atomic), so "try last" is only called at a run's end.
 */
#include "harness/sys/shared_leftovers.h"
#include "harness/sys/cgroup.h"
#include "harness/sys/rootless.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* The machine's runs lock: root's, or rootless the user's own (in
 * $XDG_RUNTIME_DIR, else beside fl_rootless_home()): a user's runs share
 * nothing with root's or another user's (their workdirs differ too). */
static const char *machine_lock_path(void)
{
    static char path[PATH_MAX];
    if (!fl_rootless())
        return FL_RUNS_LOCK;
    if (!path[0]) {
        const char *rt = getenv("XDG_RUNTIME_DIR");
        if (rt && rt[0] == '/' && access(rt, W_OK) == 0)
            snprintf(path, sizeof path, "%s/faultline.lock", rt);
        else
            snprintf(path, sizeof path, "%s.lock", fl_rootless_home());
    }
    return path;
}

static const char *lock_path(void)
{
    const char *p = getenv("FAULTLINE_RUNS_LOCK"); /* tests: a private lock */
    return p && *p ? p : machine_lock_path();
}

const char *fl_default_workdir(void)
{
    static char path[PATH_MAX];
    if (!fl_rootless())
        return FL_ROOT_WORKDIR;
    if (!path[0])
        snprintf(path, sizeof path, "%s/work", fl_rootless_home());
    return path;
}

int fl_runs_lock(bool exclusive)
{
    const char *path = lock_path();
    for (int tries = 0; tries < 100; tries++) {
        int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0 && errno == ENOENT && fl_rootless() && !strcmp(path, machine_lock_path())) {
            /* ~/.cache may not exist yet */
            char dir[PATH_MAX];
            snprintf(dir, sizeof dir, "%s", path);
            *strrchr(dir, '/') = 0;
            if (mkdir(dir, 0700) == 0 || errno == EEXIST)
                fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        }
        if (fd < 0)
            return -errno;
        if (flock(fd, exclusive ? LOCK_EX | LOCK_NB : LOCK_SH) < 0) {
            int e = errno;
            close(fd);
            return -e;
        }
        struct stat a, b;
        if (fstat(fd, &a) == 0 && stat(path, &b) == 0 && a.st_ino == b.st_ino &&
            a.st_dev == b.st_dev)
            return fd;
        close(fd); /* the last run unlinked it meanwhile: again */
    }
    return -EAGAIN;
}

bool fl_runs_lock_try_last(int fd)
{
    if (fd < 0)
        return false;
    if (flock(fd, LOCK_EX | LOCK_NB) == 0)
        return true;
    close(fd);
    return false;
}

void fl_runs_lock_release(int fd, bool last)
{
    if (fd < 0)
        return;
    if (last)
        unlink(lock_path()); /* under the exclusive lock: no run holds it */
    close(fd);
}

int fl_workdir_make(const char *workdir)
{
    char path[PATH_MAX], top[PATH_MAX] = "";
    if (snprintf(path, sizeof path, "%s", workdir) >= (int)sizeof path)
        return -ENAMETOOLONG;
    size_t len = strlen(path);
    while (len > 1 && path[len - 1] == '/')
        path[--len] = 0;
    struct stat st;
    if (stat(path, &st) == 0) /* the common case: one call */
        return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
    /* each prefix in turn; the first one this call creates gets the mark */
    for (char *p = path + 1;; p++) {
        if (*p && *p != '/')
            continue;
        char c = *p;
        *p = 0;
        if (mkdir(path, 0755) == 0) {
            if (!top[0])
                snprintf(top, sizeof top, "%s", path);
        } else if (errno != EEXIST) {
            int e = errno;
            *p = c;
            return -e;
        }
        *p = c;
        if (!c)
            break;
    }
    if (top[0]) {
        char mark[PATH_MAX];
        if (snprintf(mark, sizeof mark, "%s/" FL_WORKDIR_MARK, top) < (int)sizeof mark) {
            int fd = open(mark, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
            if (fd >= 0)
                close(fd);
        }
    }
    return 0;
}

int fl_workdir_remove(const char *workdir)
{
    char path[PATH_MAX], mark[PATH_MAX];
    if (snprintf(path, sizeof path, "%s", workdir) >= (int)sizeof path)
        return -ENAMETOOLONG;
    size_t len = strlen(path);
    while (len > 1 && path[len - 1] == '/')
        path[--len] = 0;
    /* Under a private lock (FAULTLINE_RUNS_LOCK, tests) "no other run"
     * speaks only for the runs of that lock, and the default workdir is
     * every run's on the machine: its rmdir would detach the disks of a
     * live run of another checkout.  Only the machine's lock may remove it. */
    if (strcmp(lock_path(), machine_lock_path()) != 0 && !strcmp(path, fl_default_workdir()))
        return 0;
    /* the marked directory: the workdir or one of its parents */
    char top[PATH_MAX];
    snprintf(top, sizeof top, "%s", path);
    for (;;) {
        snprintf(mark, sizeof mark, "%s/" FL_WORKDIR_MARK, top);
        if (access(mark, F_OK) == 0)
            break;
        char *slash = strrchr(top, '/');
        if (!slash || slash == top)
            return 0; /* not made by faultline: leave it */
        *slash = 0;
    }
    /* the workdir, then each parent up to (not including) the marked one */
    size_t tl = strlen(top);
    while (strlen(path) > tl) {
        if (rmdir(path) < 0)
            return errno == ENOENT ? 0 : -errno;
        char *slash = strrchr(path, '/');
        *slash = 0;
    }
    if (unlink(mark) < 0 && errno != ENOENT)
        return -errno;
    if (rmdir(top) < 0) {
        int e = errno;
        int fd =
            open(mark, O_WRONLY | O_CREAT | O_CLOEXEC, 0644); /* someone's files: keep it ours */
        if (fd >= 0)
            close(fd);
        return -e;
    }
    return 1;
}

void fl_cgroup_parents_remove(void)
{
    char root[PATH_MAX];
    if (fl_cgroup_root(root, sizeof root) > 0)
        rmdir(root); /* only when empty: EBUSY otherwise */
    if (fl_cgroup_freezer_root(root, sizeof root) > 0)
        rmdir(root);
    if (fl_cgroup_memory_root(root, sizeof root) > 0)
        rmdir(root);
}
