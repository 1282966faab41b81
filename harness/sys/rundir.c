/*
 * rundir.c: files of a run: the state file that lists every resource a run
 * created (so that `faultline gc` can remove what a killed run left and
 * `faultline exec` can find a host), what of it is evidence to keep when
 * `gc` removes a killed run's disks, and small file helpers (mkdir -p,
 * rm -rf that unmounts first, atomic whole-file writes).
 *
 * The state file is plain "key value" lines, rewritten atomically (temp file
 * + rename) whenever the run's resources change: a reader never sees half a
 * file.  Unknown keys are ignored, so later versions can add keys.
 */
#include "harness/sys/rundir.h"
#include "harness/sys/host.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

int fl_mkdir_p(const char *path, mode_t mode)
{
    /* The common case (parent exists) costs one syscall. */
    if (mkdir(path, mode) == 0 || errno == EEXIST)
        return 0;
    if (errno != ENOENT)
        return -errno;
    char buf[PATH_MAX];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
        return -ENAMETOOLONG;
    char *slash = strrchr(buf, '/');
    while (slash && slash > buf && slash[-1] == '/')
        slash--;
    if (!slash || slash == buf)
        return -ENOENT;
    *slash = 0;
    int rc = fl_mkdir_p(buf, mode);
    if (rc < 0)
        return rc;
    if (mkdir(path, mode) < 0 && errno != EEXIST)
        return -errno;
    return 0;
}

/* Unmounts (lazily) every mount point at or below path, deepest first. */
static void umount_below(const char *path)
{
    FILE *f = fopen("/proc/self/mounts", "re");
    if (!f)
        return;
    char *pts[256];
    size_t n = 0;
    char line[8192];
    size_t plen = strlen(path);
    while (fgets(line, sizeof line, f) && n < 256) {
        char dev[4096], mnt[4096];
        if (sscanf(line, "%4095s %4095s", dev, mnt) != 2)
            continue;
        if (!strncmp(mnt, path, plen) && (mnt[plen] == 0 || mnt[plen] == '/'))
            pts[n++] = strdup(mnt);
    }
    fclose(f);
    for (size_t i = n; i-- > 0;) {
        if (pts[i])
            umount2(pts[i], MNT_DETACH);
        free(pts[i]);
    }
}

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)ftw;
    if (flag == FTW_DP)
        rmdir(p);
    else
        unlink(p);
    return 0;
}

int fl_rm_rf(const char *path)
{
    struct stat st;
    if (lstat(path, &st) < 0)
        return errno == ENOENT ? 0 : -errno;
    umount_below(path);
    if (nftw(path, rm_one, 64, FTW_DEPTH | FTW_PHYS | FTW_MOUNT) < 0)
        return -errno;
    return access(path, F_OK) == 0 ? -ENOTEMPTY : 0;
}

/* What a run's directory keeps as evidence once its disks are gone: small,
 * and what the database and the report point at. */
static const char *const evidence[] = {"logs", "state", "scenario.yaml", "etc-hosts"};

int fl_rundir_strip(const char *dir, size_t *removed)
{
    DIR *d = opendir(dir);
    if (!d)
        return -errno;
    int ret = 0;
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        bool keep = false;
        for (size_t i = 0; i < sizeof evidence / sizeof *evidence && !keep; i++)
            keep = !strcmp(e->d_name, evidence[i]);
        if (keep)
            continue;
        char path[PATH_MAX];
        if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= (int)sizeof path) {
            ret = -ENAMETOOLONG;
            continue;
        }
        int rc = fl_rm_rf(path);
        if (rc < 0 && !ret)
            ret = rc;
        n += rc == 0;
    }
    closedir(d);
    if (removed)
        *removed = n;
    return ret;
}

static const char *copy_src, *copy_dst;
static int copy_err;

static int copy_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)ftw;
    char to[PATH_MAX];
    if (snprintf(to, sizeof to, "%s%s", copy_dst, p + strlen(copy_src)) >= (int)sizeof to) {
        copy_err = -ENAMETOOLONG;
        return 0;
    }
    int rc = 0;
    if (flag == FTW_D) {
        if (mkdir(to, sb->st_mode & 07777) < 0 && errno != EEXIST)
            rc = -errno;
    } else if (flag == FTW_SL) {
        char target[PATH_MAX];
        ssize_t n = readlink(p, target, sizeof target - 1);
        if (n >= 0) {
            target[n] = 0;
            if (symlink(target, to) < 0 && errno != EEXIST)
                rc = -errno;
        }
    } else if (flag == FTW_F && S_ISREG(sb->st_mode)) {
        int in = open(p, O_RDONLY | O_CLOEXEC);
        int out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, sb->st_mode & 07777);
        if (in < 0 || out < 0)
            rc = -errno;
        bool plain = false; /* copy_file_range refuses other filesystems */
        char buf[65536];
        while (rc == 0) {
            ssize_t n = plain ? read(in, buf, sizeof buf)
                              : copy_file_range(in, NULL, out, NULL, 1 << 30, 0);
            if (n < 0 && !plain && (errno == EXDEV || errno == EINVAL || errno == ENOSYS)) {
                plain = true;
                continue;
            }
            if (n < 0)
                rc = -errno;
            if (n <= 0)
                break;
            if (plain && write(out, buf, (size_t)n) != n)
                rc = -EIO;
        }
        if (in >= 0)
            close(in);
        if (out >= 0)
            close(out);
    }
    if (rc == 0 && flag != FTW_SL)
        if (chown(to, sb->st_uid, sb->st_gid) < 0) { /* not fatal */
        }
    if (rc < 0 && copy_err == 0)
        copy_err = rc;
    return 0;
}

int fl_copy_tree(const char *src, const char *dst)
{
    int rc = fl_mkdir_p(dst, 0755);
    if (rc < 0)
        return rc;
    copy_src = src;
    copy_dst = dst;
    copy_err = 0;
    if (nftw(src, copy_one, 64, FTW_PHYS) < 0)
        return -errno;
    return copy_err;
}

int fl_write_file(const char *path, const void *buf, size_t len)
{
    char tmp[PATH_MAX];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid()) >= (int)sizeof tmp)
        return -ENAMETOOLONG;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    const char *p = buf;
    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w < 0) {
            int e = errno;
            close(fd);
            unlink(tmp);
            return -e;
        }
        p += w;
        len -= (size_t)w;
    }
    close(fd);
    if (rename(tmp, path) < 0) {
        int e = errno;
        unlink(tmp);
        return -e;
    }
    return 0;
}

int fl_copy_file(const char *from, const char *to, mode_t mode)
{
    char dir[PATH_MAX], tmp[PATH_MAX], buf[65536];
    snprintf(dir, sizeof dir, "%s", to);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = 0;
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%d", to, (int)getpid()) >= (int)sizeof tmp)
        return -ENAMETOOLONG;
    int rc = slash ? fl_mkdir_p(dir, 0755) : 0, in = -1, out = -1;
    if (rc == 0 && (in = open(from, O_RDONLY | O_CLOEXEC)) < 0)
        rc = -errno;
    if (rc == 0 && (out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode)) < 0)
        rc = -errno;
    ssize_t n = 0;
    while (rc == 0 && (n = read(in, buf, sizeof buf)) > 0)
        if (write(out, buf, (size_t)n) != n)
            rc = errno ? -errno : -EIO;
    if (rc == 0 && n < 0)
        rc = -errno;
    if (out >= 0 && close(out) < 0 && rc == 0)
        rc = -errno;
    if (in >= 0)
        close(in);
    if (rc == 0 && rename(tmp, to) < 0)
        rc = -errno;
    if (rc < 0 && out >= 0)
        unlink(tmp);
    return rc;
}

int fl_read_file(const char *path, char **buf, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    size_t cap = 4096, n = 0;
    char *b = malloc(cap);
    for (;;) {
        if (cap - n < 2) {
            cap *= 2;
            char *nb = realloc(b, cap);
            if (!nb) {
                free(b);
                close(fd);
                return -ENOMEM;
            }
            b = nb;
        }
        ssize_t r = read(fd, b + n, cap - n - 1);
        if (r < 0) {
            int e = errno;
            free(b);
            close(fd);
            return -e;
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    b[n] = 0;
    *buf = b;
    if (len)
        *len = n;
    return 0;
}

int fl_state_write(const char *dir, const struct fl_state *st)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return -ENOMEM;
    fprintf(f, "run_id %s\nscenario %s\nvariant %s\ndb %s\nworkdir %s\nstatus %s\n", st->run_id,
            st->scenario, st->variant, st->db, st->workdir, st->status);
    fprintf(f, "harness %d %llu\n", (int)st->harness_pid, st->harness_start);
    if (st->switch_pid > 0)
        fprintf(f, "switch %d %llu\n", (int)st->switch_pid, st->switch_start);
    for (size_t i = 0; i < st->ncgroups; i++)
        fprintf(f, "cgroup %s\n", st->cgroups[i]);
    for (size_t i = 0; i < st->nhosts; i++)
        fprintf(f, "host %s %d %llu\n", st->hosts[i].name, (int)st->hosts[i].pid,
                st->hosts[i].starttime);
    fclose(f);
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/state", dir);
    int rc = fl_write_file(path, buf, len);
    free(buf);
    return rc;
}

int fl_state_read(const char *dir, struct fl_state *st)
{
    memset(st, 0, sizeof *st);
    char path[PATH_MAX], *buf;
    snprintf(path, sizeof path, "%s/state", dir);
    int rc = fl_read_file(path, &buf, NULL);
    if (rc < 0)
        return rc;
    char *save = NULL;
    for (char *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *sp = strchr(line, ' ');
        if (!sp)
            continue;
        *sp = 0;
        const char *key = line, *val = sp + 1;
#define STR(k, field)                                     \
    if (!strcmp(key, k)) {                                \
        snprintf(st->field, sizeof st->field, "%s", val); \
        continue;                                         \
    }
        STR("run_id", run_id);
        STR("scenario", scenario);
        STR("variant", variant);
        STR("db", db);
        STR("workdir", workdir);
        STR("status", status);
#undef STR
        if (!strcmp(key, "harness")) {
            sscanf(val, "%d %llu", &st->harness_pid, &st->harness_start);
        } else if (!strcmp(key, "switch")) {
            sscanf(val, "%d %llu", &st->switch_pid, &st->switch_start);
        } else if (!strcmp(key, "cgroup") && st->ncgroups < 8) {
            snprintf(st->cgroups[st->ncgroups++], sizeof st->cgroups[0], "%s", val);
        } else if (!strcmp(key, "host")) {
            struct fl_state_host h = {0};
            if (sscanf(val, "%63s %d %llu", h.name, &h.pid, &h.starttime) != 3)
                continue;
            struct fl_state_host *nh = realloc(st->hosts, (st->nhosts + 1) * sizeof *nh);
            if (!nh)
                break;
            st->hosts = nh;
            st->hosts[st->nhosts++] = h;
        }
    }
    free(buf);
    return 0;
}

void fl_state_free(struct fl_state *st)
{
    free(st->hosts);
    st->hosts = NULL;
    st->nhosts = 0;
}

/* State letter of a process (field 3 of /proc/PID/stat), 0 if gone. */
static char proc_state(pid_t pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *p = strrchr(buf, ')');
    return p && p[1] == ' ' ? p[2] : 0;
}

bool fl_pid_alive(pid_t pid, unsigned long long starttime)
{
    if (pid <= 0)
        return false;
    char state = proc_state(pid);
    if (state == 0 || state == 'Z' || state == 'X')
        return false; /* gone, or a zombie nobody has reaped yet */
    unsigned long long now = fl_proc_starttime(pid);
    return now != 0 && (starttime == 0 || now == starttime);
}
