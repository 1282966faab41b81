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
 * Order, so that no change is missed: the fifo first, the state file after,
 * both at exec and in a forked child.  The harness writes the file first and
 * then sends the same commands to every fifo it finds: a process whose fifo
 * it did not find read the file after the harness wrote it; one whose fifo
 * it found gets the commands after its own read of the file.
 *
 * The file is read with raw system calls, so that a failure point being
 * enabled (read, open) cannot fail the read.  libfiu is shared with the
 * program (libfiu.so.0), so psrt's own fault points are controlled too.
 */
#include <fcntl.h>
#include <fiu-control.h>
#include <fiu.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static void apply_state(void)
{
    const char *path = getenv("FAULTLINE_FIU_STATE");
    if (!path || !*path)
        return;
    long fd = syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;                 /* no state yet: nothing enabled */
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
        fiu_rc_string(line, &why);  /* "disable" of a point never enabled fails: fine */
    }
}

static void __attribute__((constructor)) fl_fiu_preload_init(void)
{
    fiu_init(0);
    const char *fifo = getenv("FAULTLINE_FIU_FIFO");
    if (fifo && *fifo && fiu_rc_fifo(fifo) < 0)
        perror("fl_fiu_preload: libfiu remote control fifo");
    apply_state();
    /* registered after fiu_rc_fifo's own handler: a forked child makes its
     * fifo first, then reads the state */
    pthread_atfork(NULL, NULL, apply_state);
}
