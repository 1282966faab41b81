/*
 * root_layer.c: what a host's root of its own is made of, on the harness's
 * side (harness/sys/host.c assembles it in the host's init): the
 * directories of its overlay's upper layer, the layer every host's root
 * has above the machine's / (its /dev and /etc/hosts: made once per run, so
 * that no host pays a mount for them), and the mounts of the machine below
 * / that an overlay of / does not hold (an overlay's lower layer is one
 * filesystem: a /usr or /home of its own would be empty), which each host
 * gets read-only.
 */
#include "harness/sys/root_layer.h"
#include "harness/sys/rundir.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

int fl_root_common_make(const char *dir, const char *hosts_file)
{
    static const struct {
        const char *name;
        unsigned major, minor;
    } nodes[] = {{"null", 1, 3},   {"zero", 1, 5},    {"full", 1, 7},
                 {"random", 1, 8}, {"urandom", 1, 9}, {"tty", 5, 0}};
    static const char *const links[][2] = {{"fd", "/proc/self/fd"},
                                           {"stdin", "/proc/self/fd/0"},
                                           {"stdout", "/proc/self/fd/1"},
                                           {"stderr", "/proc/self/fd/2"},
                                           {"ptmx", "pts/ptmx"}};
    char path[PATH_MAX];
    int rc;
    if ((rc = fl_rm_rf(dir)) < 0)
        return rc;
    if ((size_t)snprintf(path, sizeof path, "%s/dev/pts", dir) >= sizeof path)
        return -ENAMETOOLONG;
    if ((rc = fl_mkdir_p(path, 0755)) < 0)
        return rc;
    /* opaque: what the machine's root filesystem has in /dev is not shown */
    snprintf(path, sizeof path, "%s/dev", dir);
    if (setxattr(path, "trusted.overlay.opaque", "y", 1, 0) < 0)
        return -errno;
    mode_t old = umask(0);
    for (size_t i = 0; i < sizeof nodes / sizeof *nodes && rc == 0; i++) {
        snprintf(path, sizeof path, "%s/dev/%s", dir, nodes[i].name);
        if (mknod(path, S_IFCHR | 0666, makedev(nodes[i].major, nodes[i].minor)) < 0)
            rc = -errno;
    }
    snprintf(path, sizeof path, "%s/dev/shm", dir);
    if (rc == 0 && mkdir(path, 01777) < 0)
        rc = -errno;
    umask(old);
    for (size_t i = 0; i < sizeof links / sizeof *links && rc == 0; i++) {
        snprintf(path, sizeof path, "%s/dev/%s", dir, links[i][0]);
        if (symlink(links[i][1], path) < 0)
            rc = -errno;
    }
    if (rc < 0 || !hosts_file)
        return rc;
    snprintf(path, sizeof path, "%s/etc/hosts", dir);
    return fl_copy_file(hosts_file, path, 0644);
}

int fl_root_layer_make(const char *dir, const char *common, bool fresh, char *mnt, size_t mntlen,
                       char *opts, size_t optlen)
{
    static const char *const sub[] = {"upper", "work", "mnt", "hide"};
    char path[PATH_MAX];
    int rc;
    if (fresh && (rc = fl_rm_rf(dir)) < 0)
        return rc;
    for (size_t i = 0; i < sizeof sub / sizeof *sub; i++) {
        if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, sub[i]) >= sizeof path)
            return -ENAMETOOLONG;
        if ((rc = fl_mkdir_p(path, 0755)) < 0)
            return rc;
    }
    /* index=off: a restarted host mounts the same upper layer again while
     * the kernel may still be letting go of its last mount */
    if ((size_t)snprintf(mnt, mntlen, "%s/mnt", dir) >= mntlen ||
        (size_t)snprintf(opts, optlen, "lowerdir=%s%s/,upperdir=%s/upper,workdir=%s/work,index=off",
                         common ? common : "", common ? ":" : "", dir, dir) >= optlen)
        return -ENAMETOOLONG;
    /* a machine's /dev/shm is empty after a boot */
    if (!fresh) {
        if ((size_t)snprintf(path, sizeof path, "%s/upper/dev/shm", dir) >= sizeof path)
            return -ENAMETOOLONG;
        if ((rc = fl_rm_rf(path)) < 0)
            return rc;
    }
    return 0;
}

/* path is dir or lies below it */
static bool under(const char *path, const char *dir)
{
    size_t n = strlen(dir);
    return !strncmp(path, dir, n) && (path[n] == '/' || !path[n] || !strcmp(dir, "/"));
}

size_t fl_root_submounts(const char *hide, char **out, size_t max)
{
    /* what a host has its own of, or is the run's */
    static const char *const own[] = {"/proc", "/sys", "/dev", "/tmp", "/run"};
    FILE *f = fopen("/proc/self/mountinfo", "re");
    if (!f)
        return 0;
    char line[8192];
    int root_id = -1;
    size_t n = 0;
    /* the root's id first (its line may come after its children's) */
    while (fgets(line, sizeof line, f)) {
        int id, parent;
        char mp[4096];
        if (sscanf(line, "%d %d %*s %*s %4095s", &id, &parent, mp) == 3 && !strcmp(mp, "/"))
            root_id = id; /* the last mount at / is the one seen */
    }
    rewind(f);
    while (root_id >= 0 && n < max && fgets(line, sizeof line, f)) {
        int id, parent;
        char mp[4096];
        if (sscanf(line, "%d %d %*s %*s %4095s", &id, &parent, mp) != 3 || parent != root_id ||
            !strcmp(mp, "/") || strchr(mp, '\\'))
            continue; /* not right below /, or a path with escapes (spaces): left out */
        bool skip = hide && *hide && under(mp, hide);
        for (size_t i = 0; i < sizeof own / sizeof *own && !skip; i++)
            skip = under(mp, own[i]);
        for (size_t i = 0; i < n && !skip; i++)
            skip = !strcmp(out[i], mp);
        if (!skip && (out[n] = strdup(mp)))
            n++;
    }
    fclose(f);
    return n;
}
