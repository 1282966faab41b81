/*
 * fl_sync_preload.c: build/lib/fl_sync_preload.so, preloaded into every task
 * of a host that a `crash_host` fault with `unsynced: lose` targets (and into
 * no other): it records, in the host's store (harness/sys/durable_store.h), what
 * the host's disk holds durably, so that the harness can bring the disk back
 * to exactly that after the crash (harness/faults/durable.c).
 *
 * Wrapped calls (each calls the real one first; only a success records
 * anything, and only for descriptors on the host's disk):
 *   fsync, fdatasync    a file: its content now; a directory: its entries now
 *   syncfs              a descriptor on the disk: everything on the disk
 *   sync                everything on the disk
 *   write, pwrite, writev, pwritev, pwritev2 (and their 64 names)
 *                       through a descriptor opened with O_SYNC or O_DSYNC
 *                       (or pwritev2 with RWF_SYNC/RWF_DSYNC): the bytes
 *                       written and the file's size
 *   open, openat (and their 64 and fortified names)
 *                       only to notice O_SYNC/O_DSYNC: a process that never
 *                       opened such a descriptor (nor inherited one) pays
 *                       one flag test per write
 * sync_file_range makes nothing durable (it is not wrapped).  Not seen:
 * msync, and anything done with direct system calls or io_uring
 * (IORING_OP_FSYNC), or by statically linked and set-uid programs.
 *
 * Environment (set by harness/faults/durable.c): FAULTLINE_DURABLE_STORE (the
 * store directory), FAULTLINE_DURABLE_DEV (the disk's st_dev),
 * FAULTLINE_DURABLE_ROOT (where the disk is mounted in the host: the
 * workdir).  Without them every wrapper only calls the real function.
 *
 * Each recorded sync is also counted (the store's `syncs`), so that a crash
 * can tell a host whose programs never synced from one whose syncs were
 * never seen.
 *
 * The store is opened for each recording (a program may close every
 * descriptor it did not open itself).  A child forked while another thread
 * records lets go of that thread's lock (fl_dstore_forked).  A recording that fails is said on
 * stderr and marks the store broken, so that the harness reports it at the
 * crash rather than rebuild a disk from an incomplete record.
 */
#undef _FORTIFY_SOURCE
#include "harness/sys/durable_store.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#ifndef RWF_DSYNC
#define RWF_DSYNC 0x00000002
#endif
#ifndef RWF_SYNC
#define RWF_SYNC 0x00000004
#endif

static const char *store_path, *root_path;
static dev_t disk_dev;
static int any_sync_fd;       /* an O_SYNC/O_DSYNC descriptor was seen */
static __thread int in_layer; /* recording: our own calls pass through */

/* built with -fvisibility=hidden: only the wrappers are the program's */
#define EXPORT __attribute__((visibility("default")))

#define NEXT(name)                        \
    static __typeof__(&name) next_##name; \
    if (!next_##name)                     \
    next_##name = (__typeof__(&name))dlsym(RTLD_NEXT, #name)

static void failed(const char *what, int fd, int rc)
{
    char why[512];
    snprintf(why, sizeof why, "%s of descriptor %d by pid %d: %s", what, fd, (int)getpid(),
             strerror(-rc));
    static int said;
    if (!said++)
        fprintf(stderr,
                "fl_sync_preload: could not record %s (unsynced: lose will not rebuild "
                "this disk)\n",
                why);
    struct fl_dstore st;
    if (fl_dstore_open(&st, store_path, disk_dev) == 0) {
        fl_dstore_mark_broken(&st, why);
        fl_dstore_close(&st);
    }
}

static void record_fd(const char *what, int fd)
{
    struct stat sb;
    if (!store_path || in_layer || fstat(fd, &sb) < 0 || sb.st_dev != disk_dev)
        return;
    int saved = errno;
    in_layer = 1;
    struct fl_dstore st;
    int rc = fl_dstore_open(&st, store_path, disk_dev);
    if (rc == 0) {
        rc = fl_dstore_sync_fd(&st, fd);
        if (rc == 0)
            fl_dstore_count_sync(&st);
        fl_dstore_close(&st);
    }
    if (rc < 0)
        failed(what, fd, rc);
    in_layer = 0;
    errno = saved;
}

static void record_all(const char *what)
{
    if (!store_path || in_layer)
        return;
    int saved = errno;
    in_layer = 1;
    int rc = fl_dstore_sync_path(store_path, disk_dev, root_path);
    struct fl_dstore st;
    if (rc == 0 && fl_dstore_open(&st, store_path, disk_dev) == 0) {
        fl_dstore_count_sync(&st);
        fl_dstore_close(&st);
    }
    if (rc < 0)
        failed(what, -1, rc);
    in_layer = 0;
    errno = saved;
}

/* After n bytes were written at off (-1: just before the descriptor's
 * offset now) through fd, which may be O_SYNC/O_DSYNC (or force: the call
 * asked for it). */
static void record_write(int fd, off_t off, ssize_t n, int force)
{
    if (n <= 0 || !store_path || in_layer || (!any_sync_fd && !force))
        return;
    int saved = errno;
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || (!(fl & O_DSYNC) && !force)) {
        errno = saved;
        return;
    }
    struct stat sb;
    if (fstat(fd, &sb) < 0 || sb.st_dev != disk_dev || !S_ISREG(sb.st_mode)) {
        errno = saved;
        return;
    }
    if (fl & O_APPEND)
        off = sb.st_size - n; /* appended, whatever the offset said */
    else if (off < 0)
        off = lseek(fd, 0, SEEK_CUR) - n;
    in_layer = 1;
    struct fl_dstore st;
    int rc = fl_dstore_open(&st, store_path, disk_dev);
    if (rc == 0) {
        rc = fl_dstore_sync_range(&st, fd, off < 0 ? 0 : off, (size_t)n);
        if (rc == 0)
            fl_dstore_count_sync(&st);
        fl_dstore_close(&st);
    }
    if (rc < 0)
        failed("an O_SYNC write", fd, rc);
    in_layer = 0;
    errno = saved;
}

static void note_open(int fd, int flags)
{
    if (fd >= 0 && (flags & O_DSYNC))
        __atomic_store_n(&any_sync_fd, 1, __ATOMIC_RELAXED);
}

/* ---- sync calls ------------------------------------------------------- */

EXPORT int fsync(int fd)
{
    NEXT(fsync);
    int r = next_fsync(fd);
    if (r == 0)
        record_fd("fsync", fd);
    return r;
}

EXPORT int fdatasync(int fd)
{
    NEXT(fdatasync);
    int r = next_fdatasync(fd);
    if (r == 0)
        record_fd("fdatasync", fd);
    return r;
}

EXPORT int syncfs(int fd)
{
    NEXT(syncfs);
    int r = next_syncfs(fd);
    struct stat sb;
    if (r == 0 && store_path && fstat(fd, &sb) == 0 && sb.st_dev == disk_dev)
        record_all("syncfs");
    return r;
}

EXPORT void sync(void)
{
    NEXT(sync);
    next_sync();
    record_all("sync");
}

/* ---- writes through O_SYNC / O_DSYNC descriptors ---------------------- */

EXPORT ssize_t write(int fd, const void *buf, size_t count)
{
    NEXT(write);
    ssize_t n = next_write(fd, buf, count);
    record_write(fd, -1, n, 0);
    return n;
}

EXPORT ssize_t pwrite(int fd, const void *buf, size_t count, off_t off)
{
    NEXT(pwrite);
    ssize_t n = next_pwrite(fd, buf, count, off);
    record_write(fd, off, n, 0);
    return n;
}

EXPORT ssize_t pwrite64(int fd, const void *buf, size_t count, off64_t off)
{
    NEXT(pwrite64);
    ssize_t n = next_pwrite64(fd, buf, count, off);
    record_write(fd, (off_t)off, n, 0);
    return n;
}

EXPORT ssize_t writev(int fd, const struct iovec *iov, int cnt)
{
    NEXT(writev);
    ssize_t n = next_writev(fd, iov, cnt);
    record_write(fd, -1, n, 0);
    return n;
}

EXPORT ssize_t pwritev(int fd, const struct iovec *iov, int cnt, off_t off)
{
    NEXT(pwritev);
    ssize_t n = next_pwritev(fd, iov, cnt, off);
    record_write(fd, off, n, 0);
    return n;
}

EXPORT ssize_t pwritev64(int fd, const struct iovec *iov, int cnt, off64_t off)
{
    NEXT(pwritev64);
    ssize_t n = next_pwritev64(fd, iov, cnt, off);
    record_write(fd, (off_t)off, n, 0);
    return n;
}

EXPORT ssize_t pwritev2(int fd, const struct iovec *iov, int cnt, off_t off, int flags)
{
    NEXT(pwritev2);
    ssize_t n = next_pwritev2(fd, iov, cnt, off, flags);
    record_write(fd, off, n, (flags & (RWF_DSYNC | RWF_SYNC)) != 0);
    return n;
}

EXPORT ssize_t pwritev64v2(int fd, const struct iovec *iov, int cnt, off64_t off, int flags)
{
    NEXT(pwritev64v2);
    ssize_t n = next_pwritev64v2(fd, iov, cnt, off, flags);
    record_write(fd, (off_t)off, n, (flags & (RWF_DSYNC | RWF_SYNC)) != 0);
    return n;
}

/* ---- opens: only to notice O_SYNC / O_DSYNC --------------------------- */

#define MODE_ARG(flags)                      \
    mode_t mode = 0;                         \
    if ((flags) & (O_CREAT | O_TMPFILE)) {   \
        va_list ap;                          \
        va_start(ap, flags);                 \
        mode = (mode_t)va_arg(ap, unsigned); \
        va_end(ap);                          \
    }

EXPORT int open(const char *path, int flags, ...)
{
    NEXT(open);
    MODE_ARG(flags);
    int fd = next_open(path, flags, mode);
    note_open(fd, flags);
    return fd;
}

EXPORT int open64(const char *path, int flags, ...)
{
    NEXT(open64);
    MODE_ARG(flags);
    int fd = next_open64(path, flags, mode);
    note_open(fd, flags);
    return fd;
}

EXPORT int openat(int dfd, const char *path, int flags, ...)
{
    NEXT(openat);
    MODE_ARG(flags);
    int fd = next_openat(dfd, path, flags, mode);
    note_open(fd, flags);
    return fd;
}

EXPORT int openat64(int dfd, const char *path, int flags, ...)
{
    NEXT(openat64);
    MODE_ARG(flags);
    int fd = next_openat64(dfd, path, flags, mode);
    note_open(fd, flags);
    return fd;
}

/* _FORTIFY_SOURCE's checked opens (no mode: they refuse O_CREAT) */
int __open_2(const char *path, int flags);
int __open64_2(const char *path, int flags);
int __openat_2(int dfd, const char *path, int flags);
int __openat64_2(int dfd, const char *path, int flags);

EXPORT int __open_2(const char *path, int flags)
{
    NEXT(__open_2);
    int fd = next___open_2(path, flags);
    note_open(fd, flags);
    return fd;
}

EXPORT int __open64_2(const char *path, int flags)
{
    NEXT(__open64_2);
    int fd = next___open64_2(path, flags);
    note_open(fd, flags);
    return fd;
}

EXPORT int __openat_2(int dfd, const char *path, int flags)
{
    NEXT(__openat_2);
    int fd = next___openat_2(dfd, path, flags);
    note_open(fd, flags);
    return fd;
}

EXPORT int __openat64_2(int dfd, const char *path, int flags)
{
    NEXT(__openat64_2);
    int fd = next___openat64_2(dfd, path, flags);
    note_open(fd, flags);
    return fd;
}

/* Descriptors inherited across exec with O_SYNC/O_DSYNC. */
static void scan_inherited(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return;
    struct dirent *de;
    int me = dirfd(d);
    while ((de = readdir(d))) {
        int fd = atoi(de->d_name);
        if (de->d_name[0] < '0' || de->d_name[0] > '9' || fd == me)
            continue;
        int fl = fcntl(fd, F_GETFL);
        if (fl >= 0 && (fl & O_DSYNC))
            any_sync_fd = 1;
    }
    closedir(d);
}

static void __attribute__((constructor)) fl_sync_preload_init(void)
{
    const char *s = getenv("FAULTLINE_DURABLE_STORE"), *dev = getenv("FAULTLINE_DURABLE_DEV");
    const char *root = getenv("FAULTLINE_DURABLE_ROOT");
    if (!s || !*s || !dev || !*dev || !root || !*root)
        return;
    disk_dev = (dev_t)strtoull(dev, NULL, 10);
    root_path = root;
    in_layer = 1;
    scan_inherited();
    in_layer = 0;
    pthread_atfork(NULL, NULL, fl_dstore_forked);
    store_path = s;
}
