/*
 * fl_fiu_preload.c: build/lib/fl_fiu_preload.so, preloaded (beside libfiu's
 * fiu_posix_preload.so) into the tasks a run's `disk:` faults target; it
 * takes the place of libfiu's fiu_run_preload.so.
 *
 * Like fiu_run_preload.so it opens libfiu's remote control fifos
 * (fiu_rc_fifo: "<base>-<pid>.in" / ".out", a thread answering enable and
 * disable commands; a new pair in every forked child), with the basename from
 * FAULTLINE_FIU_FIFO.  Instead of FIU_ENABLE, whose value a process would
 * hand down unchanged to every program it execs (so a program exec'd after a
 * heal would start with the fault on), it applies the commands of the state
 * file FAULTLINE_FIU_STATE that the harness rewrites (atomically) at every
 * apply and heal: the current enable or disable line of each failure point
 * of the task.
 *
 * The process also holds its two fifos open itself (hold_fifos), so that
 * libfiu's thread opens them once, at start, and never again: a descriptor
 * limit (`limit: {fds}`) cannot cut the harness off from it.
 *
 * Order, so that no change is missed: the fifo first, the state file after,
 * both at exec and in a forked child.  The harness writes the file first and
 * then sends the same commands to every fifo it finds: a process whose fifo
 * it did not find read the file after the harness wrote it; one whose fifo
 * it found gets the commands after its own read of the file.
 *
 * The file is read with raw system calls, so that a failure point being
 * enabled (read, open) cannot fail the read.  libfiu is shared with the
 * program (libfiu.so.0), so psrt's own fault points are controlled too.
 *
 * It also wraps the I/O calls that `disk: {call, delay}` slows and
 * `disk: {call, short}` cuts short, with failure points of its own that the
 * harness enables like any other: faultline/delay/CALL (failinfo: the delay
 * in microseconds; the call waits that long, then is made: through libfiu's
 * POSIX preload, when loaded, which may still fail it) and
 * faultline/short/CALL for write, pwrite, writev, pwritev (failinfo: a byte
 * count, or FL_FIU_SHORT_PPM | millionths of the size asked; the call is made with
 * that fewer bytes: a real short write, the rest is not written).  Only
 * descriptors of files and directories are affected (not pipes, sockets or
 * terminals): the disk is slow, not the process's stdout or libfiu's own
 * control fifo.  Without such a point enabled, a wrapped call costs one
 * fiu_fail() lookup (two for the writes: delay, then short).
 */
#include "harness/tools/fl_fiu_preload.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <fiu-control.h>
#include <fiu.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

/* faultline/short/CALL's failinfo: a fraction (ppm) rather than bytes;
 * harness/faults/disk.c sets it the same way. */

/* A descriptor on the disk: a regular file, a directory or a block device. */
static int on_disk(int fd)
{
    struct stat st;
    if (syscall(SYS_fstat, fd, &st) != 0)
        return 0;
    return S_ISREG(st.st_mode) || S_ISDIR(st.st_mode) || S_ISBLK(st.st_mode);
}

static void delay_if(const char *point, int fd)
{
    if (!fiu_fail(point) || !on_disk(fd))
        return;
    uint64_t us = (uint64_t)(uintptr_t)fiu_failinfo();
    struct timespec ts = {(time_t)(us / 1000000), (long)(us % 1000000) * 1000}, rem;
    int saved = errno;
    /* a raw call: libfaketime (clock_drift) must not scale it */
    while (syscall(SYS_clock_nanosleep, CLOCK_MONOTONIC, 0, &ts, &rem) == EINTR)
        ts = rem;
    errno = saved;
}

/* How many of count bytes a write makes under faultline/short/CALL. */
static size_t short_len(const char *point, int fd, size_t count)
{
    if (count <= 1 || !fiu_fail(point) || !on_disk(fd))
        return count;
    uint64_t v = (uint64_t)(uintptr_t)fiu_failinfo(), n;
    if (v & FL_FIU_SHORT_PPM)
        n = (uint64_t)((unsigned __int128)count * (v & (FL_FIU_SHORT_PPM - 1)) / 1000000);
    else
        n = v;
    if (n == 0)
        n = 1;
    return n < count ? (size_t)n : count;
}

/* iov cut to at most len bytes, into out (up to max entries); its count */
static int cut_iov(const struct iovec *iov, int cnt, size_t len, struct iovec *out, int max)
{
    int k = 0;
    for (int i = 0; i < cnt && k < max && len > 0; i++) {
        out[k] = iov[i];
        if (out[k].iov_len > len)
            out[k].iov_len = len;
        len -= out[k].iov_len;
        k++;
    }
    return k;
}

static size_t iov_len(const struct iovec *iov, int cnt)
{
    size_t n = 0;
    for (int i = 0; i < cnt; i++)
        n += iov[i].iov_len;
    return n;
}

#define NEXT(name)                        \
    static __typeof__(&name) next_##name; \
    if (!next_##name)                     \
    next_##name = (__typeof__(&name))dlsym(RTLD_NEXT, #name)

ssize_t read(int fd, void *buf, size_t count)
{
    NEXT(read);
    delay_if("faultline/delay/read", fd);
    return next_read(fd, buf, count);
}

ssize_t pread(int fd, void *buf, size_t count, off_t off)
{
    NEXT(pread);
    delay_if("faultline/delay/pread", fd);
    return next_pread(fd, buf, count, off);
}

ssize_t pread64(int fd, void *buf, size_t count, off64_t off)
{
    NEXT(pread64);
    delay_if("faultline/delay/pread", fd);
    return next_pread64(fd, buf, count, off);
}

ssize_t readv(int fd, const struct iovec *iov, int cnt)
{
    NEXT(readv);
    delay_if("faultline/delay/readv", fd);
    return next_readv(fd, iov, cnt);
}

ssize_t preadv(int fd, const struct iovec *iov, int cnt, off_t off)
{
    NEXT(preadv);
    delay_if("faultline/delay/preadv", fd);
    return next_preadv(fd, iov, cnt, off);
}

ssize_t write(int fd, const void *buf, size_t count)
{
    NEXT(write);
    delay_if("faultline/delay/write", fd);
    return next_write(fd, buf, short_len("faultline/short/write", fd, count));
}

ssize_t pwrite(int fd, const void *buf, size_t count, off_t off)
{
    NEXT(pwrite);
    delay_if("faultline/delay/pwrite", fd);
    return next_pwrite(fd, buf, short_len("faultline/short/pwrite", fd, count), off);
}

ssize_t pwrite64(int fd, const void *buf, size_t count, off64_t off)
{
    NEXT(pwrite64);
    delay_if("faultline/delay/pwrite", fd);
    return next_pwrite64(fd, buf, short_len("faultline/short/pwrite", fd, count), off);
}

ssize_t writev(int fd, const struct iovec *iov, int cnt)
{
    NEXT(writev);
    delay_if("faultline/delay/writev", fd);
    size_t want = iov_len(iov, cnt), len = short_len("faultline/short/writev", fd, want);
    if (len == want)
        return next_writev(fd, iov, cnt);
    struct iovec cut[64];
    return next_writev(fd, cut, cut_iov(iov, cnt, len, cut, 64));
}

ssize_t pwritev(int fd, const struct iovec *iov, int cnt, off_t off)
{
    NEXT(pwritev);
    delay_if("faultline/delay/pwritev", fd);
    size_t want = iov_len(iov, cnt), len = short_len("faultline/short/pwritev", fd, want);
    if (len == want)
        return next_pwritev(fd, iov, cnt, off);
    struct iovec cut[64];
    return next_pwritev(fd, cut, cut_iov(iov, cnt, len, cut, 64), off);
}

int fsync(int fd)
{
    NEXT(fsync);
    delay_if("faultline/delay/fsync", fd);
    return next_fsync(fd);
}

int fdatasync(int fd)
{
    NEXT(fdatasync);
    delay_if("faultline/delay/fdatasync", fd);
    return next_fdatasync(fd);
}

static void apply_state(void)
{
    const char *path = getenv("FAULTLINE_FIU_STATE");
    if (!path || !*path)
        return;
    long fd = syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return; /* no state yet: nothing enabled */
    char buf[8192];
    size_t n = 0;
    for (;;) {
        long r = syscall(SYS_read, (int)fd, buf + n, sizeof buf - 1 - n);
        if (r <= 0 || (n += (size_t)r) == sizeof buf - 1)
            break;
    }
    syscall(SYS_close, (int)fd);
    buf[n] = 0;
    char *save = NULL;
    for (char *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *why;
        fiu_rc_string(line, &why); /* "disable" of a point never enabled fails: fine */
    }
}

/* This process's own hold on its control fifos (see hold_fifos). */
static int held[2] = {-1, -1};

/* libfiu's remote control thread opens BASE-PID.in for reading and
 * BASE-PID.out for writing, answers commands until the writer closes .in,
 * then closes both and opens them again for the next session; it ends for
 * good when an open fails.  Under a `limit: {fds: N}` fault every such open
 * fails with EMFILE, so a disk fault applied (or healed) while the limit
 * held killed the thread, and no command reached the process again.  So the
 * process holds both fifos open itself, read-write (which never blocks): the
 * thread's opens then find a writer on .in and a reader on .out at once,
 * here at start, while descriptors are to be had, and its read of .in never
 * sees the end of a session (this process is a writer too), so it never
 * closes and never opens again.  And the thread's replies always have a
 * reader: no SIGPIPE if the harness gave up waiting for one.  The harness
 * sends its commands on the same pipes as before (harness/sys/fiu_ctl.c). */
static void hold_fifos(void)
{
    const char *fifo = getenv("FAULTLINE_FIU_FIFO");
    if (!fifo || !*fifo)
        return;
    for (int i = 0; i < 2; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s-%d.%s", fifo, (int)getpid(), i ? "out" : "in");
        long fd = syscall(SYS_openat, AT_FDCWD, path, O_RDWR | O_CLOEXEC);
        held[i] = fd < 0 ? -1 : (int)fd;
    }
}

/* A forked child: libfiu's own handler (registered first) made the child's
 * fifos and thread; the parent's holds are dropped (else the parent's
 * fifos would look read while the parent is gone), the child's taken, and
 * then the state read. */
static void child_after_fork(void)
{
    for (int i = 0; i < 2; i++)
        if (held[i] >= 0) {
            syscall(SYS_close, held[i]);
            held[i] = -1;
        }
    hold_fifos();
    apply_state();
}

static void __attribute__((constructor)) fl_fiu_preload_init(void)
{
    fiu_init(0);
    const char *fifo = getenv("FAULTLINE_FIU_FIFO");
    if (fifo && *fifo && fiu_rc_fifo(fifo) < 0)
        perror("fl_fiu_preload: libfiu remote control fifo");
    hold_fifos();
    apply_state();
    /* registered after fiu_rc_fifo's own handler: a forked child makes its
     * fifo first, then reads the state */
    pthread_atfork(NULL, NULL, child_after_fork);
}
