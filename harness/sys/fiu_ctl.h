/*
 * fiu_ctl.h: libfiu's remote control protocol over named pipes, client side
 * (see fiu_ctl.c).
 */
#ifndef FL_FIU_CTL_H
#define FL_FIU_CTL_H

#include <stddef.h>

/*
 * Sends n commands ("enable name=posix/io/rw/write,failnum=1,failinfo=28",
 * "disable name=...") to the process listening on BASE.in / BASE.out (BASE
 * is "<fifo basename>-<pid>"), one after the other, each reply (0, or < 0
 * when libfiu refused it, e.g. disabling a point that is not enabled) into
 * replies[i].  Waits at most timeout_ms in all.
 *
 * Returns 0 when every command got its reply; -ENXIO when no process reads
 * BASE.in now (gone, between sessions, or not listening yet: try again);
 * -ENOENT when the fifo does not exist; -EPIPE when the process went away
 * during the session; -ETIMEDOUT when it did not answer in time: then the
 * session's two fds are in keep[] (else both -1), for the caller to close
 * only once the process can no longer answer (see fiu_ctl.c).
 *
 * *owed: replies the process still owes from earlier sessions of the same
 * BASE (start at 0, keep between calls): read and dropped first; a command
 * that timed out adds one.
 *
 * timeout_ms 0: for a process that is frozen (paused) and holds its fifos
 * open (fl_fiu_preload.so): the commands are written and not waited for,
 * each adding one to *owed; 0 when all were written.
 */
int fl_fiu_ctl_send(const char *base, const char *const *cmds, size_t n, int *replies,
                    int timeout_ms, int keep[2], int *owed);

#endif
