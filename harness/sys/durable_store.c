/*
 * durable_store.c: recording what a tracked host's disk holds durably (see
 * durable_store.h for the layout and who calls what).
 *
 * A file snapshot copies the file's current content, through a descriptor
 * of our own (/proc/self/fd/N reopened read-only, so that the caller's
 * offset, flags and O_DIRECT alignment do not matter), into
 * data/<ino>.tmp.<pid>.<tid>, then renames it over data/<ino>.  A directory
 * snapshot writes its entries the same way to dirs/<ino>.  Both hold the
 * inode's byte of the store's lock file (an OFD lock: processes and threads
 * exclude each other) from before the copy to after the rename, so the
 * snapshot left in place is always one taken after every fsync that
 * returned before it: two racing fsyncs of one file cannot leave the older
 * content behind.  A process killed half-way leaves a temporary file (and
 * the previous snapshot in place): its fsync had not returned.
 *
 * dirs/<ino> is a sequence of records, each a struct rec then the name and
 * the symbolic link's target (no NULs); written and read on the same machine,
 * so in its byte order.
 */
#include "harness/sys/durable_store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

struct rec {
    uint64_t ino;
    uint32_t mode, uid, gid, flags;
    uint32_t namelen, targetlen;
};
#define REC_MOUNTPOINT 1u

#define LOCK_MASK ((1ULL << 62) - 1)
#define MAX_DEPTH 512

int fl_dstore_open(struct fl_dstore *st, const char *path, dev_t dev)
{
    st->dev = dev;
    st->dirfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    return st->dirfd < 0 ? -errno : 0;
}

void fl_dstore_close(struct fl_dstore *st)
{
    if (st->dirfd >= 0)
        close(st->dirfd);
    st->dirfd = -1;
}

DIR *fl_dstore_opendir(int dfd, const char *name, int flags)
{
    int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | flags);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d && fd >= 0) {
        int e = errno;
        close(fd);
        errno = e;
    }
    return d;
}

static int rm_tree_at(int dfd, const char *name, int depth)
{
    if (unlinkat(dfd, name, 0) == 0 || errno == ENOENT)
        return 0;
    if ((errno != EISDIR && errno != EPERM) || depth > MAX_DEPTH)
        return -errno;
    DIR *d = fl_dstore_opendir(dfd, name, O_NOFOLLOW);
    if (!d)
        return -errno;
    int rc = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        int r = rm_tree_at(dirfd(d), de->d_name, depth + 1);
        if (r < 0 && rc == 0)
            rc = r;
    }
    closedir(d);
    if (unlinkat(dfd, name, AT_REMOVEDIR) < 0 && rc == 0 && errno != ENOENT)
        rc = -errno;
    return rc;
}

int fl_dstore_rm_tree(int dfd, const char *name)
{
    return rm_tree_at(dfd, name, 0);
}

int fl_dstore_reset(const char *path)
{
    int rc;
    if (mkdir(path, 0700) < 0 && errno != EEXIST)
        return -errno;
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    rc = rm_tree_at(fd, "data", 0);
    if (rc == 0)
        rc = rm_tree_at(fd, "dirs", 0);
    unlinkat(fd, "broken", 0);
    unlinkat(fd, "syncs", 0);
    if (rc == 0 && mkdirat(fd, "data", 0700) < 0)
        rc = -errno;
    if (rc == 0 && mkdirat(fd, "dirs", 0700) < 0)
        rc = -errno;
    if (rc == 0) {
        int l = openat(fd, "lock", O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        if (l < 0)
            rc = -errno;
        else
            close(l);
    }
    close(fd);
    return rc;
}

/* The descriptors holding a lock now, in this process.  An OFD lock lasts
 * until the last descriptor of its open file is closed: a child forked by
 * another thread meanwhile would hold it for as long as it lives without
 * exec (O_CLOEXEC), and every later sync of that inode would wait for it.
 * fl_dstore_forked() closes them in the child. */
#define MAX_HELD 64
static int held[MAX_HELD];
static size_t nheld;
static pthread_mutex_t held_mu = PTHREAD_MUTEX_INITIALIZER;

static void hold(int fd, bool on)
{
    pthread_mutex_lock(&held_mu);
    if (on && nheld < MAX_HELD) {
        held[nheld++] = fd;
    } else if (!on) {
        for (size_t i = 0; i < nheld; i++)
            if (held[i] == fd) {
                held[i] = held[--nheld];
                break;
            }
    }
    pthread_mutex_unlock(&held_mu);
}

void fl_dstore_forked(void)
{
    for (size_t i = 0; i < nheld; i++)
        close(held[i]);
    nheld = 0;
    pthread_mutex_init(&held_mu, NULL);
}

/* Holds inode ino's byte of the lock file: a descriptor to give to
 * unlock_ino, or -errno. */
static int lock_ino(const struct fl_dstore *st, uint64_t ino)
{
    int fd = openat(st->dirfd, "lock", O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    struct flock fl = {
        .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = (off_t)(ino & LOCK_MASK), .l_len = 1};
    hold(fd, true);
    while (fcntl(fd, F_OFD_SETLKW, &fl) < 0) {
        if (errno == EINTR)
            continue;
        int e = errno;
        hold(fd, false);
        close(fd);
        return -e;
    }
    return fd;
}

static void unlock_ino(int fd)
{
    hold(fd, false);
    close(fd);
}

int64_t fl_dstore_copy(int in, int out)
{
    loff_t ri = 0, ro = 0;
    off_t so = 0;
    int how = 0; /* 0 copy_file_range, 1 sendfile, 2 pread/write */
    char buf[65536];
    for (;;) {
        ssize_t n;
        if (how == 0) {
            n = copy_file_range(in, &ri, out, &ro, 1 << 30, 0);
            if (n < 0 &&
                (errno == EXDEV || errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP)) {
                how = 1;
                so = (off_t)ri;
                if (lseek(out, (off_t)ro, SEEK_SET) < 0)
                    return -errno;
                continue;
            }
        } else if (how == 1) {
            n = sendfile(out, in, &so, 1 << 30);
            if (n < 0 && (errno == EINVAL || errno == ENOSYS)) {
                how = 2;
                continue;
            }
        } else {
            n = pread(in, buf, sizeof buf, so);
            if (n > 0) {
                for (ssize_t w = 0; w < n;) {
                    ssize_t k = write(out, buf + w, (size_t)(n - w));
                    if (k < 0 && errno == EINTR)
                        continue;
                    if (k <= 0)
                        return k < 0 ? -errno : -EIO;
                    w += k;
                }
                so += n;
            }
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (n == 0)
            break;
    }
    return how == 0 ? (int64_t)ri : (int64_t)so;
}

/* A read-only descriptor of fd's file of our own, or fd itself (dup'd)
 * when it cannot be reopened and is readable; -errno. */
static int reopen_ro(int fd)
{
    char p[64];
    snprintf(p, sizeof p, "/proc/self/fd/%d", fd);
    int r = open(p, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (r >= 0)
        return r;
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || (fl & O_ACCMODE) == O_WRONLY || (fl & O_DIRECT))
        return -EBADF;
    r = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    return r < 0 ? -errno : r;
}

static void tmp_name(char *buf, size_t len, const char *sub, uint64_t ino)
{
    snprintf(buf, len, "%s/%llu.tmp.%d.%d", sub, (unsigned long long)ino, (int)getpid(),
             (int)gettid());
}

/* Under the inode's lock: the content of fd (a regular file) to data/<ino>. */
static int snapshot_file_locked(const struct fl_dstore *st, int fd, uint64_t ino)
{
    char tmp[96], fin[64];
    tmp_name(tmp, sizeof tmp, "data", ino);
    snprintf(fin, sizeof fin, "data/%llu", (unsigned long long)ino);
    int in = reopen_ro(fd);
    if (in < 0)
        return in;
    int out = openat(st->dirfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (out < 0) {
        int e = errno;
        close(in);
        return -e;
    }
    int64_t n = fl_dstore_copy(in, out);
    int rc = n < 0 ? (int)n : 0;
    close(in);
    if (close(out) < 0 && rc == 0)
        rc = -errno;
    if (rc == 0 && renameat(st->dirfd, tmp, st->dirfd, fin) < 0)
        rc = -errno;
    if (rc < 0)
        unlinkat(st->dirfd, tmp, 0);
    return rc;
}

/* ---- directories --------------------------------------------------------- */

struct dirlist {
    struct fl_dstore_ent *v;
    size_t n, cap;
};

static void dirlist_free(struct dirlist *l)
{
    fl_dstore_ents_free(l->v, l->n);
    l->v = NULL;
    l->n = l->cap = 0;
}

/* The entries of directory dfd (read through a descriptor of our own). */
static int list_dir(const struct fl_dstore *st, int dfd, struct dirlist *l)
{
    DIR *d = fl_dstore_opendir(dfd, ".", 0);
    if (!d)
        return -errno;
    int rc = 0;
    struct dirent *de;
    while (rc == 0 && (errno = 0, de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        struct stat sb;
        if (fstatat(dirfd(d), de->d_name, &sb, AT_SYMLINK_NOFOLLOW) < 0)
            continue; /* gone meanwhile */
        if (l->n == l->cap) {
            size_t cap = l->cap ? l->cap * 2 : 32;
            struct fl_dstore_ent *v = realloc(l->v, cap * sizeof *v);
            if (!v) {
                rc = -ENOMEM;
                break;
            }
            l->v = v;
            l->cap = cap;
        }
        struct fl_dstore_ent *e = &l->v[l->n];
        memset(e, 0, sizeof *e);
        e->mountpoint = sb.st_dev != st->dev;
        e->ino = e->mountpoint ? de->d_ino : sb.st_ino;
        e->mode = e->mountpoint ? (uint32_t)(S_IFDIR | (sb.st_mode & 07777)) : sb.st_mode;
        e->uid = sb.st_uid;
        e->gid = sb.st_gid;
        if (!(e->name = strdup(de->d_name))) {
            rc = -ENOMEM;
            break;
        }
        l->n++;
        if (S_ISLNK(sb.st_mode)) {
            size_t cap = (size_t)sb.st_size + 2;
            if (cap < 64)
                cap = 64;
            char *t = malloc(cap);
            ssize_t k = t ? readlinkat(dirfd(d), de->d_name, t, cap - 1) : -1;
            if (k < 0) {
                free(t);
                t = strdup("");
            } else {
                t[k] = 0;
            }
            if (!(e->target = t))
                rc = -ENOMEM;
        }
    }
    if (rc == 0 && errno)
        rc = -errno;
    closedir(d);
    return rc;
}

static int write_dir_locked(const struct fl_dstore *st, uint64_t ino, const struct dirlist *l)
{
    char tmp[96], fin[64];
    tmp_name(tmp, sizeof tmp, "dirs", ino);
    snprintf(fin, sizeof fin, "dirs/%llu", (unsigned long long)ino);
    size_t len = 0;
    for (size_t i = 0; i < l->n; i++)
        len += sizeof(struct rec) + strlen(l->v[i].name) +
               (l->v[i].target ? strlen(l->v[i].target) : 0);
    char *buf = malloc(len ? len : 1), *p = buf;
    if (!buf)
        return -ENOMEM;
    for (size_t i = 0; i < l->n; i++) {
        const struct fl_dstore_ent *e = &l->v[i];
        struct rec r = {.ino = e->ino,
                        .mode = e->mode,
                        .uid = e->uid,
                        .gid = e->gid,
                        .flags = e->mountpoint ? REC_MOUNTPOINT : 0,
                        .namelen = (uint32_t)strlen(e->name),
                        .targetlen = e->target ? (uint32_t)strlen(e->target) : 0};
        memcpy(p, &r, sizeof r);
        p += sizeof r;
        memcpy(p, e->name, r.namelen);
        p += r.namelen;
        if (r.targetlen)
            memcpy(p, e->target, r.targetlen);
        p += r.targetlen;
    }
    int rc = 0, fd = openat(st->dirfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        rc = -errno;
    for (size_t w = 0; rc == 0 && w < len;) {
        ssize_t k = write(fd, buf + w, len - w);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            rc = k < 0 ? -errno : -EIO;
        else
            w += (size_t)k;
    }
    free(buf);
    if (fd >= 0 && close(fd) < 0 && rc == 0)
        rc = -errno;
    if (rc == 0 && renameat(st->dirfd, tmp, st->dirfd, fin) < 0)
        rc = -errno;
    if (rc < 0 && fd >= 0)
        unlinkat(st->dirfd, tmp, 0);
    return rc;
}

/* Records directory dfd (inode ino); with l, leaves its entries there. */
static int snapshot_dir(const struct fl_dstore *st, int dfd, uint64_t ino, struct dirlist *out)
{
    int lk = lock_ino(st, ino);
    if (lk < 0)
        return lk;
    struct dirlist l = {0};
    int rc = list_dir(st, dfd, &l);
    if (rc == 0)
        rc = write_dir_locked(st, ino, &l);
    unlock_ino(lk);
    if (rc == 0 && out)
        *out = l;
    else
        dirlist_free(&l);
    return rc;
}

static int snapshot_file(const struct fl_dstore *st, int fd, uint64_t ino)
{
    int lk = lock_ino(st, ino);
    if (lk < 0)
        return lk;
    int rc = snapshot_file_locked(st, fd, ino);
    unlock_ino(lk);
    return rc;
}

int fl_dstore_sync_fd(struct fl_dstore *st, int fd)
{
    struct stat sb;
    if (st->dirfd < 0 || fstat(fd, &sb) < 0 || sb.st_dev != st->dev)
        return 0;
    if (S_ISREG(sb.st_mode))
        return snapshot_file(st, fd, sb.st_ino);
    if (S_ISDIR(sb.st_mode))
        return snapshot_dir(st, fd, sb.st_ino, NULL);
    return 0;
}

static int sync_tree_at(struct fl_dstore *st, int dfd, uint64_t ino, int depth)
{
    struct dirlist l = {0};
    int rc = snapshot_dir(st, dfd, ino, &l);
    for (size_t i = 0; rc == 0 && i < l.n; i++) {
        const struct fl_dstore_ent *e = &l.v[i];
        if (e->mountpoint)
            continue;
        if (S_ISDIR(e->mode)) {
            if (depth >= MAX_DEPTH) {
                rc = -ELOOP;
                break;
            }
            int c = openat(dfd, e->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (c < 0)
                continue; /* gone meanwhile */
            struct stat sb;
            if (fstat(c, &sb) == 0 && sb.st_dev == st->dev)
                rc = sync_tree_at(st, c, sb.st_ino, depth + 1);
            close(c);
        } else if (S_ISREG(e->mode)) {
            int f = openat(dfd, e->name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
            if (f < 0)
                continue;
            struct stat sb;
            if (fstat(f, &sb) == 0 && sb.st_dev == st->dev && S_ISREG(sb.st_mode))
                rc = snapshot_file(st, f, sb.st_ino);
            close(f);
        }
    }
    dirlist_free(&l);
    return rc;
}

int fl_dstore_sync_tree(struct fl_dstore *st, int rootfd)
{
    struct stat sb;
    if (st->dirfd < 0 || fstat(rootfd, &sb) < 0)
        return st->dirfd < 0 ? -EBADF : -errno;
    if (sb.st_dev != st->dev || !S_ISDIR(sb.st_mode))
        return 0;
    return sync_tree_at(st, rootfd, sb.st_ino, 0);
}

int fl_dstore_sync_path(const char *path, dev_t dev, const char *root)
{
    struct fl_dstore st;
    int fd = -1, rc = fl_dstore_open(&st, path, dev);
    if (rc == 0 && (fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
        rc = -errno;
    if (rc == 0)
        rc = fl_dstore_sync_tree(&st, fd);
    if (fd >= 0)
        close(fd);
    fl_dstore_close(&st);
    return rc;
}

int fl_dstore_sync_range(struct fl_dstore *st, int fd, off_t off, size_t n)
{
    struct stat sb;
    if (st->dirfd < 0 || fstat(fd, &sb) < 0 || sb.st_dev != st->dev || !S_ISREG(sb.st_mode))
        return 0;
    int lk = lock_ino(st, sb.st_ino);
    if (lk < 0)
        return lk;
    char fin[64];
    snprintf(fin, sizeof fin, "data/%llu", (unsigned long long)sb.st_ino);
    int rc = 0, out = openat(st->dirfd, fin, O_WRONLY | O_CLOEXEC);
    if (out < 0 && errno == ENOENT) {
        rc = snapshot_file_locked(st, fd, sb.st_ino); /* the first: all of it */
        unlock_ino(lk);
        return rc;
    }
    if (out < 0) {
        rc = -errno;
        unlock_ino(lk);
        return rc;
    }
    int in = reopen_ro(fd);
    if (in < 0)
        rc = in;
    loff_t ri = off, ro = off;
    size_t left = n;
    char buf[65536];
    while (rc == 0 && left > 0) {
        ssize_t k = copy_file_range(in, &ri, out, &ro, left, 0);
        if (k < 0 &&
            (errno == EXDEV || errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP)) {
            ssize_t r = pread(in, buf, left < sizeof buf ? left : sizeof buf, (off_t)ri);
            if (r > 0 && pwrite(out, buf, (size_t)r, (off_t)ro) != r)
                r = -1;
            k = r;
            if (k > 0) {
                ri += k;
                ro += k;
            }
        }
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            rc = -errno;
        if (k <= 0)
            break;
        left -= (size_t)k;
    }
    /* the size the file has now is durable too (O_DSYNC: what reading the
     * data back needs) */
    struct stat now;
    if (rc == 0 && fstat(fd, &now) == 0 && ftruncate(out, now.st_size) < 0)
        rc = -errno;
    if (in >= 0)
        close(in);
    close(out);
    unlock_ino(lk);
    return rc;
}

void fl_dstore_mark_broken(struct fl_dstore *st, const char *why)
{
    if (st->dirfd < 0)
        return;
    int fd = openat(st->dirfd, "broken", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        return; /* broken already: the first reason stays */
    if (write(fd, why, strlen(why)) < 0) {
        /* the file's presence says enough */
    }
    close(fd);
}

void fl_dstore_count_sync(struct fl_dstore *st)
{
    if (st->dirfd < 0)
        return;
    int fd = openat(st->dirfd, "syncs", O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd < 0)
        return;
    if (write(fd, ".", 1) < 0) { /* a count too low only adds a note */
    }
    close(fd);
}

long long fl_dstore_syncs(const struct fl_dstore *st)
{
    struct stat sb;
    if (fstatat(st->dirfd, "syncs", &sb, 0) < 0)
        return 0;
    return (long long)sb.st_size;
}

bool fl_dstore_broken(const struct fl_dstore *st, char *buf, size_t len)
{
    buf[0] = 0;
    int fd = openat(st->dirfd, "broken", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    ssize_t n = read(fd, buf, len - 1);
    buf[n > 0 ? n : 0] = 0;
    close(fd);
    return true;
}

/* ---- reading ------------------------------------------------------------- */

void fl_dstore_ents_free(struct fl_dstore_ent *ents, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(ents[i].name);
        free(ents[i].target);
    }
    free(ents);
}

int fl_dstore_read_dir(const struct fl_dstore *st, uint64_t ino, struct fl_dstore_ent **ents,
                       size_t *n)
{
    char fin[64];
    snprintf(fin, sizeof fin, "dirs/%llu", (unsigned long long)ino);
    *ents = NULL;
    *n = 0;
    int fd = openat(st->dirfd, fin, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    struct stat sb;
    char *buf = NULL;
    int rc = 0;
    if (fstat(fd, &sb) < 0)
        rc = -errno;
    else if (!(buf = malloc((size_t)sb.st_size + 1)))
        rc = -ENOMEM;
    size_t len = 0;
    while (rc == 0 && len < (size_t)sb.st_size) {
        ssize_t k = read(fd, buf + len, (size_t)sb.st_size - len);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            rc = k < 0 ? -errno : -EIO;
            break;
        }
        len += (size_t)k;
    }
    close(fd);
    struct dirlist l = {0};
    for (size_t p = 0; rc == 0 && p < len;) {
        struct rec r;
        if (len - p < sizeof r) {
            rc = -EBADMSG;
            break;
        }
        memcpy(&r, buf + p, sizeof r);
        p += sizeof r;
        if (r.namelen == 0 || len - p < (size_t)r.namelen + r.targetlen) {
            rc = -EBADMSG;
            break;
        }
        if (l.n == l.cap) {
            size_t cap = l.cap ? l.cap * 2 : 32;
            struct fl_dstore_ent *v = realloc(l.v, cap * sizeof *v);
            if (!v) {
                rc = -ENOMEM;
                break;
            }
            l.v = v;
            l.cap = cap;
        }
        struct fl_dstore_ent *e = &l.v[l.n];
        memset(e, 0, sizeof *e);
        e->ino = r.ino;
        e->mode = r.mode;
        e->uid = r.uid;
        e->gid = r.gid;
        e->mountpoint = r.flags & REC_MOUNTPOINT;
        e->name = strndup(buf + p, r.namelen);
        p += r.namelen;
        if (S_ISLNK(r.mode))
            e->target = strndup(buf + p, r.targetlen);
        p += r.targetlen;
        l.n++;
        if (!e->name || (S_ISLNK(r.mode) && !e->target))
            rc = -ENOMEM;
    }
    free(buf);
    if (rc < 0) {
        dirlist_free(&l);
        return rc;
    }
    *ents = l.v;
    *n = l.n;
    return 0;
}

int fl_dstore_open_data(const struct fl_dstore *st, uint64_t ino)
{
    char fin[64];
    snprintf(fin, sizeof fin, "data/%llu", (unsigned long long)ino);
    int fd = openat(st->dirfd, fin, O_RDONLY | O_CLOEXEC);
    return fd < 0 ? -errno : fd;
}
