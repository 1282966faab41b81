/*
 * fs.c: the faultline filesystem's FUSE server (fusedisk.h): a passthrough to
 * the backing directory, done with *at() calls on a descriptor of it as the
 * calling process's uid and gid, each operation first asking the rules
 * (rules.c) whether it fails, waits or is cut short.  libfuse's high-level
 * API (paths, which the rules match) and its multi-threaded loop, in a
 * thread of its own; reads and writes go as fd buffers (splice where the
 * kernel can).  A descriptor opened write-only bypasses the kernel's page
 * cache (direct_io: its writes go from the program's pages to the backing
 * file, one copy instead of two).
 */
#define FUSE_USE_VERSION 312
#include "fusedisk/fusedisk.h"
#include "fusedisk/rules.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fuse3/fuse.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

struct fl_fusedisk {
    struct fuse *fuse;
    pthread_t loop;
    bool looping;
    int bfd; /* the backing directory */
    char *mnt;
    unsigned threads;
    struct fl_fd_rules rules;
    fl_fd_synced_fn synced; /* set before the filesystem is used */
    void *synced_ctx;
};

static struct fl_fusedisk *self(void)
{
    return fuse_get_context()->private_data;
}

/* "/a/b" -> "a/b"; "/" -> "." */
static const char *rel(const char *path)
{
    while (*path == '/')
        path++;
    return *path ? path : ".";
}

/* The rules' verdict on op: 0 to go on (after any delay; *cut set for a
 * short write), or -errno. */
static int fault(unsigned op, const char *path, const char *path2, uint64_t *cut)
{
    struct fl_fd_hit hit;
    if (!fl_fd_rules_match(&self()->rules, op, rel(path), path2 ? rel(path2) : NULL, &hit))
        return 0;
    if (hit.err)
        return -hit.err;
    if (hit.delay_us) {
        struct timespec ts = {(time_t)(hit.delay_us / 1000000),
                              (long)(hit.delay_us % 1000000) * 1000};
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
            ;
    }
    if (cut)
        *cut = hit.short_len;
    return 0;
}

#define FAULT(op, path, path2)                              \
    do {                                                    \
        int fault_rc_ = fault((op), (path), (path2), NULL); \
        if (fault_rc_ < 0)                                  \
            return fault_rc_;                               \
    } while (0)

/* Made as the caller: its fsuid and fsgid for the call (per thread). */
struct as_caller {
    uid_t uid;
    gid_t gid;
};
static struct as_caller caller_begin(void)
{
    struct fuse_context *c = fuse_get_context();
    struct as_caller old = {(uid_t)setfsuid(c->uid), 0};
    old.gid = (gid_t)setfsgid(c->gid);
    return old;
}
static void caller_end(struct as_caller old)
{
    setfsuid(old.uid);
    setfsgid(old.gid);
}

static int ret(int r)
{
    return r < 0 ? -errno : 0;
}

/* Write-only descriptors are direct_io: no page of the kernel's cache is
 * filled for them (a 1 MiB write was copied into it and then again into the
 * backing file: write throughput 0.35 of tmpfs's, now 0.6), and none can be
 * mapped (mmap needs a readable descriptor), which direct_io would refuse
 * for MAP_SHARED.  A reader holding the same file open through the cache
 * still sees every write at once: the kernel marks the file's size and
 * times stale after a direct write, and before its next read (libfuse asks
 * for auto_inval_data) fetches them and drops the cached pages of a file
 * whose mtime changed (readers_see_what_a_write_only_descriptor_wrote).
 * Not with O_SYNC or O_DSYNC: through the cache each such write comes with
 * an fsync of the file, which the rules and fl_fusedisk_on_synced see; a
 * direct write would come alone. */
static bool write_only(int flags)
{
    return (flags & O_ACCMODE) == O_WRONLY;
}

/* An opened backing descriptor becomes fi's. */
static void opened(struct fuse_file_info *fi, int fd)
{
    fi->fh = (uint64_t)fd;
    if (write_only(fi->flags) && !(fi->flags & O_DSYNC))
        fi->direct_io = 1;
}

/* The largest write request whose splice from /dev/fuse fits a pipe this
 * process may have.  libfuse splices a request into a pipe of its read
 * buffer's size (max_write + 4 KiB of header room) and, when F_SETPIPE_SZ
 * refuses that, reads every request with read(2) instead, for good.  An
 * unprivileged pipe stops at /proc/sys/fs/pipe-max-size (1 MiB by default;
 * beyond it takes CAP_SYS_RESOURCE, which a container's root often lacks),
 * so 1 MiB writes never splice there: 1 MiB - 4 KiB does (its header page
 * and 255 data pages fill the 256 slots of a 1 MiB pipe).  A write(2)
 * larger than max_write reaches the write handler as several requests, in
 * order, within the same call (the kernel returns the bytes done if a
 * later one fails or is cut short), as one larger than 1 MiB always did. */
static unsigned splice_max_write(void)
{
    const unsigned big = 1u << 20, hdr = 4096;
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return big;
    int ok = fcntl(p[0], F_SETPIPE_SZ, (int)(big + hdr)) >= 0;
    close(p[0]);
    close(p[1]);
    return ok ? big : big - hdr;
}

static void *fs_init(struct fuse_conn_info *conn, struct fuse_config *cfg)
{
    /* requests of up to 1 MiB (the kernel's default is 128 KiB), and the
     * data of writes spliced from /dev/fuse to the backing file */
    conn->max_write = splice_max_write();
    conn->max_readahead = 1 << 20;
    if (conn->capable & FUSE_CAP_SPLICE_READ)
        conn->want |= FUSE_CAP_SPLICE_READ;
    if (conn->capable & FUSE_CAP_SPLICE_WRITE)
        conn->want |= FUSE_CAP_SPLICE_WRITE;
    if (conn->capable & FUSE_CAP_SPLICE_MOVE)
        conn->want |= FUSE_CAP_SPLICE_MOVE;
    cfg->use_ino = 1;
    /* every operation gets its path (the rules match on it); a file
     * unlinked while open is gone at once, as on a disk (its operations then
     * come without a path and meet no rule) */
    cfg->nullpath_ok = 0;
    cfg->hard_remove = 1;
    return fuse_get_context()->private_data;
}

static int fs_getattr(const char *path, struct stat *st, struct fuse_file_info *fi)
{
    if (fi)
        return ret(fstat((int)fi->fh, st));
    return ret(fstatat(self()->bfd, rel(path), st, AT_SYMLINK_NOFOLLOW));
}

static int fs_readlink(const char *path, char *buf, size_t len)
{
    ssize_t n = readlinkat(self()->bfd, rel(path), buf, len - 1);
    if (n < 0)
        return -errno;
    buf[n] = 0;
    return 0;
}

static int fs_mknod(const char *path, mode_t mode, dev_t dev)
{
    FAULT(FL_FD_CREATE, path, NULL);
    struct as_caller o = caller_begin();
    int r = ret(mknodat(self()->bfd, rel(path), mode, dev));
    caller_end(o);
    return r;
}

static int fs_mkdir(const char *path, mode_t mode)
{
    FAULT(FL_FD_MKDIR, path, NULL);
    struct as_caller o = caller_begin();
    int r = ret(mkdirat(self()->bfd, rel(path), mode));
    caller_end(o);
    return r;
}

static int fs_unlink(const char *path)
{
    FAULT(FL_FD_UNLINK, path, NULL);
    return ret(unlinkat(self()->bfd, rel(path), 0));
}

static int fs_rmdir(const char *path)
{
    FAULT(FL_FD_RMDIR, path, NULL);
    return ret(unlinkat(self()->bfd, rel(path), AT_REMOVEDIR));
}

static int fs_symlink(const char *target, const char *path)
{
    FAULT(FL_FD_CREATE, path, NULL);
    struct as_caller o = caller_begin();
    int r = ret(symlinkat(target, self()->bfd, rel(path)));
    caller_end(o);
    return r;
}

static int fs_rename(const char *from, const char *to, unsigned flags)
{
    FAULT(FL_FD_RENAME, from, to);
    return ret(renameat2(self()->bfd, rel(from), self()->bfd, rel(to), flags));
}

static int fs_link(const char *from, const char *to)
{
    FAULT(FL_FD_RENAME, from, to);
    return ret(linkat(self()->bfd, rel(from), self()->bfd, rel(to), 0));
}

static int fs_chmod(const char *path, mode_t mode, struct fuse_file_info *fi)
{
    if (fi)
        return ret(fchmod((int)fi->fh, mode));
    return ret(fchmodat(self()->bfd, rel(path), mode, 0));
}

static int fs_chown(const char *path, uid_t uid, gid_t gid, struct fuse_file_info *fi)
{
    if (fi)
        return ret(fchown((int)fi->fh, uid, gid));
    return ret(fchownat(self()->bfd, rel(path), uid, gid, AT_SYMLINK_NOFOLLOW));
}

static int fs_truncate(const char *path, off_t size, struct fuse_file_info *fi)
{
    FAULT(FL_FD_TRUNCATE, path, NULL);
    if (fi)
        return ret(ftruncate((int)fi->fh, size));
    int fd = openat(self()->bfd, rel(path), O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int r = ret(ftruncate(fd, size));
    close(fd);
    return r;
}

static int fs_utimens(const char *path, const struct timespec tv[2], struct fuse_file_info *fi)
{
    if (fi)
        return ret(futimens((int)fi->fh, tv));
    return ret(utimensat(self()->bfd, rel(path), tv, AT_SYMLINK_NOFOLLOW));
}

static int open_flags(int flags)
{
    /* O_DIRECT is the program's business with the kernel's FUSE cache; the
     * backing tmpfs is asked for plain I/O */
    return (flags & ~(O_DIRECT | O_NOFOLLOW)) | O_CLOEXEC;
}

static int fs_create(const char *path, mode_t mode, struct fuse_file_info *fi)
{
    FAULT(FL_FD_CREATE, path, NULL);
    struct as_caller o = caller_begin();
    int fd = openat(self()->bfd, rel(path), open_flags(fi->flags) | O_CREAT, mode);
    int e = errno;
    caller_end(o);
    if (fd < 0)
        return -e;
    opened(fi, fd);
    return 0;
}

static int fs_open(const char *path, struct fuse_file_info *fi)
{
    FAULT(FL_FD_OPEN, path, NULL);
    if (fi->flags & O_TRUNC)
        FAULT(FL_FD_TRUNCATE, path, NULL);
    int fd = openat(self()->bfd, rel(path), open_flags(fi->flags));
    if (fd < 0)
        return -errno;
    opened(fi, fd);
    return 0;
}

static int fs_read_buf(const char *path, struct fuse_bufvec **bufp, size_t size, off_t off,
                       struct fuse_file_info *fi)
{
    if (path)
        FAULT(FL_FD_READ, path, NULL);
    struct fuse_bufvec *b = malloc(sizeof *b);
    if (!b)
        return -ENOMEM;
    *b = FUSE_BUFVEC_INIT(size);
    b->buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
    b->buf[0].fd = (int)fi->fh;
    b->buf[0].pos = off;
    *bufp = b;
    return 0;
}

static int fs_write_buf(const char *path, struct fuse_bufvec *in, off_t off,
                        struct fuse_file_info *fi)
{
    size_t len = fuse_buf_size(in);
    uint64_t cut = 0;
    if (path) {
        int r = fault(FL_FD_WRITE, path, NULL, &cut);
        if (r < 0)
            return r;
    }
    if (cut && cut < len)
        len = (size_t)cut;
    struct fuse_bufvec dst = FUSE_BUFVEC_INIT(len);
    dst.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
    dst.buf[0].fd = (int)fi->fh;
    dst.buf[0].pos = off;
    return (int)fuse_buf_copy(&dst, in, FUSE_BUF_SPLICE_NONBLOCK);
}

static int fs_statfs(const char *path, struct statvfs *st)
{
    FAULT(FL_FD_STATFS, path, NULL);
    return ret(fstatvfs(self()->bfd, st));
}

static int fs_release(const char *path, struct fuse_file_info *fi)
{
    close((int)fi->fh);
    return 0;
}

/* A successful sync of the backing fd: told to the user (fl_fusedisk_on_synced). */
static int synced(int fd, int r)
{
    struct fl_fusedisk *d = self();
    if (r == 0 && d->synced)
        d->synced(d->synced_ctx, fd);
    return ret(r);
}

static int fs_fsync(const char *path, int datasync, struct fuse_file_info *fi)
{
    if (path)
        FAULT(FL_FD_FSYNC, path, NULL);
    int fd = (int)fi->fh;
    return synced(fd, datasync ? fdatasync(fd) : fsync(fd));
}

static int fs_fallocate(const char *path, int mode, off_t off, off_t len, struct fuse_file_info *fi)
{
    if (path)
        FAULT(FL_FD_TRUNCATE, path, NULL);
    return ret(fallocate((int)fi->fh, mode, off, len));
}

struct dirh {
    DIR *dir;
    struct dirent *entry;
    off_t off;
};

static int fs_opendir(const char *path, struct fuse_file_info *fi)
{
    FAULT(FL_FD_READDIR, path, NULL);
    int fd = openat(self()->bfd, rel(path), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    struct dirh *d = calloc(1, sizeof *d);
    if (!d || !(d->dir = fdopendir(fd))) {
        int e = d ? errno : ENOMEM;
        free(d);
        close(fd);
        return -e;
    }
    fi->fh = (uint64_t)(uintptr_t)d;
    return 0;
}

static int fs_readdir(const char *path, void *buf, fuse_fill_dir_t fill, off_t off,
                      struct fuse_file_info *fi, enum fuse_readdir_flags flags)
{
    struct dirh *d = (struct dirh *)(uintptr_t)fi->fh;
    if (off != d->off) {
        seekdir(d->dir, off);
        d->entry = NULL;
        d->off = off;
    }
    for (;;) {
        if (!d->entry) {
            errno = 0;
            if (!(d->entry = readdir(d->dir)))
                return errno ? -errno : 0;
        }
        struct stat st = {.st_ino = d->entry->d_ino, .st_mode = (mode_t)DTTOIF(d->entry->d_type)};
        off_t next = telldir(d->dir);
        if (fill(buf, d->entry->d_name, &st, next, 0))
            return 0; /* full: this entry goes first next time */
        d->entry = NULL;
        d->off = next;
    }
}

static int fs_releasedir(const char *path, struct fuse_file_info *fi)
{
    struct dirh *d = (struct dirh *)(uintptr_t)fi->fh;
    closedir(d->dir);
    free(d);
    return 0;
}

static int fs_fsyncdir(const char *path, int datasync, struct fuse_file_info *fi)
{
    if (path)
        FAULT(FL_FD_FSYNC, path, NULL);
    struct dirh *d = (struct dirh *)(uintptr_t)fi->fh;
    int fd = dirfd(d->dir);
    return synced(fd, datasync ? fdatasync(fd) : fsync(fd));
}

static const struct fuse_operations ops = {
    .init = fs_init,
    .getattr = fs_getattr,
    .readlink = fs_readlink,
    .mknod = fs_mknod,
    .mkdir = fs_mkdir,
    .unlink = fs_unlink,
    .rmdir = fs_rmdir,
    .symlink = fs_symlink,
    .rename = fs_rename,
    .link = fs_link,
    .chmod = fs_chmod,
    .chown = fs_chown,
    .truncate = fs_truncate,
    .utimens = fs_utimens,
    .create = fs_create,
    .open = fs_open,
    .read_buf = fs_read_buf,
    .write_buf = fs_write_buf,
    .statfs = fs_statfs,
    /* no flush: the kernel asks once, gets ENOSYS (libfuse's answer for a
     * filesystem with neither flush nor lock) and from then on closes
     * without a round trip (a small file's open-write-fsync-close took six
     * waited for: getattr of the directory, lookup, create, write, fsync,
     * flush; release is not waited for).  Nothing is lost: there is no rule on close, and close(2)
     * of a descriptor of the backing tmpfs has nothing to report (tmpfs has no
     * ->flush); write and fsync errors reach the program at write and fsync
     * themselves. */
    .release = fs_release,
    .fsync = fs_fsync,
    .fallocate = fs_fallocate,
    .opendir = fs_opendir,
    .readdir = fs_readdir,
    .releasedir = fs_releasedir,
    .fsyncdir = fs_fsyncdir,
};

static void seterr(char *err, size_t len, const char *fmt, ...)
{
    if (!err || !len)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, len, fmt, ap);
    va_end(ap);
}

static void *loop_main(void *arg)
{
    struct fl_fusedisk *d = arg;
    struct fuse_loop_config *cfg = fuse_loop_cfg_create();
    if (cfg) {
        if (d->threads)
            fuse_loop_cfg_set_max_threads(cfg, d->threads);
        fuse_loop_cfg_set_idle_threads(cfg, d->threads ? d->threads : 4);
    }
    fuse_loop_mt(d->fuse, cfg);
    if (cfg)
        fuse_loop_cfg_destroy(cfg);
    return NULL;
}

int fl_fusedisk_mount(struct fl_fusedisk **out, const char *backing, const char *mountpoint,
                      unsigned threads, char *err, size_t errlen)
{
    struct fl_fusedisk *d = calloc(1, sizeof *d);
    if (!d)
        return -ENOMEM;
    fl_fd_rules_init(&d->rules);
    d->threads = threads;
    d->bfd = open(backing, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (d->bfd < 0) {
        int e = errno;
        seterr(err, errlen, "fusedisk: open backing directory %s: %s", backing, strerror(e));
        fl_fd_rules_free(&d->rules);
        free(d);
        return -e;
    }
    /* libfuse would say only that the mount failed */
    if (access("/dev/fuse", R_OK | W_OK) < 0) {
        int e = errno;
        struct stat st;
        bool node = stat("/dev/fuse", &st) == 0;
        seterr(err, errlen, "fusedisk: /dev/fuse: %s%s", strerror(e),
               !node ? " (load the fuse module: modprobe fuse)"
               : geteuid() != 0 || e == EACCES
                   ? " (it is not open to this user: as root, `chmod 0666 /dev/fuse`, as "
                     "Debian's udev rules leave it on most machines, or run as root)"
                   : "");
        close(d->bfd);
        fl_fd_rules_free(&d->rules);
        free(d);
        return -e;
    }
    char *argv[] = {"faultline-disk", "-o",
                    "allow_other,default_permissions,fsname=faultline-disk,subtype=faultline",
                    NULL};
    struct fuse_args args = FUSE_ARGS_INIT(3, argv);
    int rc = 0;
    d->mnt = strdup(mountpoint);
    if (!d->mnt) {
        rc = -ENOMEM;
        goto fail;
    }
    if (!(d->fuse = fuse_new(&args, &ops, sizeof ops, d))) {
        seterr(err, errlen, "fusedisk: fuse_new for %s failed (libfuse3's message above)",
               mountpoint);
        rc = -EINVAL;
        goto fail;
    }
    if (fuse_mount(d->fuse, mountpoint) != 0) {
        seterr(err, errlen, "fusedisk: mount at %s failed (is /dev/fuse there, and are we root?)",
               mountpoint);
        rc = -EIO;
        goto fail;
    }
    if ((rc = -pthread_create(&d->loop, NULL, loop_main, d)) < 0) {
        seterr(err, errlen, "fusedisk: thread for %s: %s", mountpoint, strerror(-rc));
        fuse_unmount(d->fuse);
        goto fail;
    }
    d->looping = true;
    fuse_opt_free_args(&args);
    *out = d;
    return 0;
fail:
    fuse_opt_free_args(&args);
    if (d->fuse)
        fuse_destroy(d->fuse);
    close(d->bfd);
    fl_fd_rules_free(&d->rules);
    free(d->mnt);
    free(d);
    return rc;
}

/* Ends connection dev (the mount's st_dev) through the fuse control
 * filesystem, mounted at its usual place first if it is not there (in the
 * caller's mount namespace): 0 or -errno. */
static int abort_conn(dev_t dev)
{
    static const char ctl[] = "/sys/fs/fuse/connections";
    char path[128];
    /* the kernel's own numbering of the device (fusectl names it so) */
    snprintf(path, sizeof path, "%s/%u/abort", ctl, (unsigned)((major(dev) << 20) | minor(dev)));
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT && mount("fusectl", ctl, "fusectl", 0, NULL) == 0)
        fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? 0 : -errno; /* ENOENT: gone already */
    int rc = write(fd, "1", 1) == 1 ? 0 : -errno;
    close(fd);
    return rc;
}

void fl_fusedisk_unmount(struct fl_fusedisk *d)
{
    if (!d)
        return;
    /* The loop's threads read /dev/fuse: the end of the connection ends
     * their reads.  An unmount ends it only with the last mount of it, and
     * a copy of the mount in another mount namespace (a host started while
     * it was mounted keeps one, out of its sight, until it ends) would
     * keep it going, and the join below waiting: so the connection is
     * aborted as well, which ends it whoever holds a mount. */
    struct stat sb;
    bool have_dev = stat(d->mnt, &sb) == 0;
    fuse_exit(d->fuse);
    fuse_unmount(d->fuse);
    if (have_dev)
        abort_conn(sb.st_dev);
    if (d->looping)
        pthread_join(d->loop, NULL);
    fuse_destroy(d->fuse);
    close(d->bfd);
    fl_fd_rules_free(&d->rules);
    free(d->mnt);
    free(d);
}

int fl_fusedisk_add_rule(struct fl_fusedisk *d, const struct fl_fd_rule *r)
{
    return fl_fd_rules_add(&d->rules, r);
}

int fl_fusedisk_remove_rule(struct fl_fusedisk *d, int id)
{
    return fl_fd_rules_remove(&d->rules, id);
}

void fl_fusedisk_on_synced(struct fl_fusedisk *d, fl_fd_synced_fn fn, void *ctx)
{
    d->synced_ctx = ctx;
    d->synced = fn;
}

size_t fl_fusedisk_where(struct fl_fusedisk *d, int id, struct fl_fd_where *out, size_t max,
                         uint64_t *more)
{
    return fl_fd_rules_where(&d->rules, id, out, max, more);
}

uint64_t fl_fusedisk_hits(struct fl_fusedisk *d, int id)
{
    return fl_fd_rules_hits(&d->rules, id);
}
