/*
 * fiu_ctl.c: the client side of libfiu's remote control over named pipes
 * (what fiu-ctrl does in shell), so that the harness can enable and disable
 * failure points in a running process without spawning fiu-ctrl.
 *
 * A process that called fiu_rc_fifo(BASE) has a thread that opens
 * BASE-<pid>.in for reading (blocking until a writer comes), then
 * BASE-<pid>.out for writing, and answers each line read ("enable
 * name=N,failnum=1,failinfo=28", "enable_random ...,probability=0.5",
 * "disable name=N") with one line, "0" or a negative number; on EOF it closes
 * both and waits for the next writer.  So one session is: open .in for
 * writing without blocking (ENXIO: nobody is reading it now: the process is
 * gone, or between two sessions, or not yet listening), open .out for
 * reading, then for each command write it and read its reply.
 *
 * A process that never answers (frozen by a pause fault) must not be killed
 * by our giving up: its thread would write the late reply into a fifo that
 * has no reader and take SIGPIPE.  So on a timeout the session's two fds are
 * handed to the caller to keep open until the end of the run (needed only
 * by a process that does not hold its fifos itself, below).
 *
 * A process under fl_fiu_preload.so holds its two fifos open itself, so its
 * thread never sees the end of a session: its late replies stay in .out for
 * the next session.  The caller counts them (*owed) and the next session
 * reads them first.  The same holds the commands for a process that is
 * frozen now (timeout 0): they are written without waiting, and its thread
 * takes them first thing when it runs again.
 */
#include "harness/base/monoclock.h"
#include "harness/sys/fiu_ctl.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* One reply line ("0\n", "-1\n") into *reply; -ETIMEDOUT, -EPIPE (the
 * process closed its end: it exited or exec'd), or -EPROTO. */
static int read_reply(int fd, long long deadline, int *reply)
{
    char line[32];
    size_t n = 0;
    for (;;) {
        long long left = deadline - fl_mono_ms();
        if (left <= 0)
            return -ETIMEDOUT;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int r = poll(&p, 1, (int)left);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -errno;
        if (r == 0)
            return -ETIMEDOUT;
        ssize_t got = read(fd, line + n, 1);
        if (got < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (got <= 0)
            return got < 0 ? -errno : -EPIPE;
        if (line[n] == '\n') {
            line[n] = 0;
            char *end;
            long v = strtol(line, &end, 10);
            if (end == line || *end)
                return -EPROTO;
            *reply = (int)v;
            return 0;
        }
        if (++n == sizeof line - 1)
            return -EPROTO;
    }
}

/* One command line into the fifo: 0, -EINVAL (too long), -ETIMEDOUT (the
 * pipe is full: nobody has read it for long), or -errno. */
static int write_cmd(int w, const char *cmd)
{
    char line[512];
    int len = snprintf(line, sizeof line, "%s\n", cmd);
    if (len <= 0 || (size_t)len >= sizeof line)
        return -EINVAL;
    /* a few hundred bytes into a pipe with room: never short */
    if (write(w, line, (size_t)len) != len)
        return errno == EAGAIN ? -ETIMEDOUT : -errno;
    return 0;
}

int fl_fiu_ctl_send(const char *base, const char *const *cmds, size_t n, int *replies,
                    int timeout_ms, int keep[2], int *owed)
{
    char in[4096], out[4096];
    keep[0] = keep[1] = -1;
    if ((size_t)snprintf(in, sizeof in, "%s.in", base) >= sizeof in ||
        (size_t)snprintf(out, sizeof out, "%s.out", base) >= sizeof out)
        return -ENAMETOOLONG;
    int w = open(in, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    if (w < 0)
        return -errno;
    int r = open(out, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (r < 0) {
        int e = errno;
        close(w);
        return -e;
    }
    long long deadline = fl_mono_ms() + timeout_ms;
    int rc = 0;
    if (timeout_ms == 0) { /* a frozen process: the commands wait in the fifo */
        for (size_t i = 0; i < n && rc == 0; i++)
            if ((rc = write_cmd(w, cmds[i])) == 0)
                (*owed)++;
        close(w);
        close(r);
        return rc;
    }
    /* late replies to an earlier session's commands come first */
    while (*owed > 0 && rc == 0) {
        int late;
        if ((rc = read_reply(r, deadline, &late)) == 0)
            (*owed)--;
    }
    size_t i;
    for (i = 0; i < n && rc == 0; i++) {
        if ((rc = write_cmd(w, cmds[i])) < 0)
            break;
        rc = read_reply(r, deadline, &replies[i]);
        if (rc == -ETIMEDOUT)
            (*owed)++;
    }
    if (rc == -ETIMEDOUT) {
        keep[0] = w;
        keep[1] = r;
    } else {
        close(w);
        close(r);
    }
    return rc;
}
