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
#include "harness/sys/rootless.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

/* what a host has its own of, or is the run's */
static const char *const own[] = {"/proc", "/sys", "/dev", "/tmp", "/run"};

static bool is_own(const char *path)
{
    for (size_t i = 0; i < sizeof own / sizeof *own; i++)
        if (!strcmp(path, own[i]))
            return true;
    return false;
}

/* A directory of the machine's that the user may read and that holds
 * something: one that is empty or closed to the user is seen the same
 * through the skeleton's empty directory (in the root's overlay, where the
 * host may write too), which costs a host no mount (an overlay's is about
 * 0.1 ms). */
static bool worth_an_overlay(const char *path)
{
    if (access(path, R_OK | X_OK) < 0)
        return false;
    DIR *d = opendir(path);
    struct dirent *de;
    bool any = false;
    while (d && !any && (de = readdir(d)))
        any =
            !(de->d_name[0] == '.' && (!de->d_name[1] || (de->d_name[1] == '.' && !de->d_name[2])));
    if (d)
        closedir(d);
    return any;
}

size_t fl_root_tops(const char *const **names)
{
    static char *list[256];
    static size_t n;
    static bool done;
    if (!done) {
        done = true;
        struct stat root;
        DIR *d = opendir("/");
        if (d && stat("/", &root) == 0) {
            struct dirent *de;
            while ((de = readdir(d)) && n < sizeof list / sizeof *list) {
                char path[PATH_MAX];
                struct stat st;
                if (de->d_name[0] == '.' &&
                    (!de->d_name[1] || (de->d_name[1] == '.' && !de->d_name[2])))
                    continue;
                snprintf(path, sizeof path, "/%s", de->d_name);
                /* a directory of /'s own filesystem (another is a mount:
                 * fl_root_submounts' read-only bind) */
                if (lstat(path, &st) < 0 || !S_ISDIR(st.st_mode) || st.st_dev != root.st_dev ||
                    is_own(path) || !worth_an_overlay(path))
                    continue;
                if ((list[n] = strdup(de->d_name)))
                    n++;
            }
        }
        if (d)
            closedir(d);
    }
    *names = (const char *const *)list;
    return n;
}

/* Rootless: the skeleton of the machine's / in the common layer (the
 * overlay of a host's root has no lower layer of the machine's /, see
 * root_layer.h): every directory right below / made (the mount points of
 * fl_root_tops' overlays, fl_root_submounts' binds and what a host has its
 * own of), every symbolic link there copied (bin -> usr/bin). */
static int root_skeleton(const char *dir)
{
    DIR *d = opendir("/");
    if (!d)
        return -errno;
    int rc = 0;
    struct dirent *de;
    while (rc == 0 && (de = readdir(d))) {
        char path[PATH_MAX], at[PATH_MAX], target[PATH_MAX];
        struct stat st;
        if (de->d_name[0] == '.' && (!de->d_name[1] || (de->d_name[1] == '.' && !de->d_name[2])))
            continue;
        snprintf(path, sizeof path, "/%s", de->d_name);
        if ((size_t)snprintf(at, sizeof at, "%s/%s", dir, de->d_name) >= sizeof at ||
            lstat(path, &st) < 0)
            continue;
        if (S_ISDIR(st.st_mode)) {
            if (mkdir(at, 0755) < 0 && errno != EEXIST)
                rc = -errno;
        } else if (S_ISLNK(st.st_mode)) {
            ssize_t n = readlink(path, target, sizeof target - 1);
            if (n > 0) {
                target[n] = 0;
                if (symlink(target, at) < 0 && errno != EEXIST)
                    rc = -errno;
            }
        }
    }
    closedir(d);
    return rc;
}

/* Rootless: the machine's directories, as directories of the user's own in
 * the common layer, so that a host may make files in them.  An overlay
 * gives a directory the owner of the topmost layer that has it, and copies
 * it up to make a file in it; a machine's directory owned by root, whom a
 * user namespace does not map, cannot be copied up (EOVERFLOW), so without
 * these no host could make a file in its /var/tmp.  Only the trees that
 * programs write to (fl_root_skeleton_trees): /usr's some twenty thousand
 * directories would cost every run 0.1 s. */
static const char *skel_to;
static int skel_rc;

static int skel_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)ftw;
    if (type != FTW_D)
        return 0; /* unreadable directories (FTW_DNR) and files */
    char at[PATH_MAX];
    if ((size_t)snprintf(at, sizeof at, "%s%s", skel_to, path) >= sizeof at)
        return 0;
    if (mkdir(at, st->st_mode & 07777) < 0 && errno != EEXIST) {
        skel_rc = -errno;
        return 1;
    }
    chmod(at, st->st_mode & 07777); /* past the umask: /var/tmp's 1777 */
    return 0;
}

static int tree_skeleton(const char *dir)
{
    static const char *const trees[] = {"/etc", "/var", "/opt", "/usr/local", "/srv"};
    skel_to = dir;
    skel_rc = 0;
    for (size_t i = 0; i < sizeof trees / sizeof *trees && skel_rc == 0; i++) {
        struct stat st;
        if (lstat(trees[i], &st) == 0 && S_ISDIR(st.st_mode))
            nftw(trees[i], skel_one, 32, FTW_PHYS | FTW_MOUNT);
    }
    return skel_rc;
}

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
    /* opaque: what the machine's root filesystem has in /dev is not shown
     * (rootless: the overlay's xattrs are user.overlay.*, its userxattr) */
    bool rootless = fl_rootless();
    snprintf(path, sizeof path, "%s/dev", dir);
    if (setxattr(path, rootless ? "user.overlay.opaque" : "trusted.overlay.opaque", "y", 1, 0) < 0)
        return -errno;
    mode_t old = umask(0);
    /* rootless no device may be made: empty files that each host binds the
     * machine's node over (FL_ROOT_DEV_NODES, host.c) */
    for (size_t i = 0; i < sizeof nodes / sizeof *nodes && rc == 0; i++) {
        snprintf(path, sizeof path, "%s/dev/%s", dir, nodes[i].name);
        if (rootless) {
            int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
            rc = fd < 0 ? -errno : close(fd);
        } else if (mknod(path, S_IFCHR | 0666, makedev(nodes[i].major, nodes[i].minor)) < 0)
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
    if (rc == 0 && rootless && (rc = root_skeleton(dir)) == 0)
        rc = tree_skeleton(dir);
    if (rc < 0 || !hosts_file)
        return rc;
    snprintf(path, sizeof path, "%s/etc", dir);
    if ((rc = fl_mkdir_p(path, 0755)) < 0)
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
    bool rootless = fl_rootless();
    if (fresh && (rc = fl_rm_rf(dir)) < 0)
        return rc;
    for (size_t i = 0; i < sizeof sub / sizeof *sub; i++) {
        if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, sub[i]) >= sizeof path)
            return -ENAMETOOLONG;
        if ((rc = fl_mkdir_p(path, 0755)) < 0)
            return rc;
    }
    /* rootless: an upper and a work directory for each top's overlay */
    const char *const *tops;
    size_t ntops = rootless ? fl_root_tops(&tops) : 0;
    for (size_t i = 0; i < ntops; i++)
        for (int k = 0; k < 2; k++) {
            if ((size_t)snprintf(path, sizeof path, "%s/top/%s/%c", dir, tops[i], "uw"[k]) >=
                sizeof path)
                return -ENAMETOOLONG;
            if ((rc = fl_mkdir_p(path, 0755)) < 0)
                return rc;
        }
    /* index=off: a restarted host mounts the same upper layer again while
     * the kernel may still be letting go of its last mount.  Rootless the
     * machine's / is no lower layer (see root_layer.h) */
    if ((size_t)snprintf(mnt, mntlen, "%s/mnt", dir) >= mntlen ||
        (size_t)snprintf(opts, optlen,
                         "lowerdir=%s%s%s,upperdir=%s/upper,workdir=%s/work,index=off%s",
                         common ? common : "", common && !rootless ? ":" : "", rootless ? "" : "/",
                         dir, dir, rootless ? ",userxattr" : "") >= optlen)
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
