/*
 * rootless.h: faultline for a user without root (see rootless.c).
 */
#ifndef FL_ROOTLESS_H
#define FL_ROOTLESS_H

#include <stdbool.h>
#include <stddef.h>

/* For a user other than root: moves the process (which must have no other
 * thread yet) into a user namespace of its own where the user's uid and gid
 * are 0.  As root: nothing.  0, or -errno with err saying what to do. */
int fl_rootless_enter(char *err, size_t errlen);
/* The process is not root, or runs in a user namespace that does not map
 * every id (it, or the faultline that started it, entered one as an
 * ordinary user). */
bool fl_rootless(void);
/* The harness's pid and start time (clock ticks after boot, as in
 * /proc/PID/stat) as the machine's PID namespace sees them: rootless, those
 * of PID 1 of its own namespace, taken as it entered it. */
void fl_rootless_self(int *pid, unsigned long long *starttime);
/* The uid of the user outside (the machine's), also rootless. */
unsigned fl_rootless_outer_uid(void);
/* Where a rootless run keeps what runs share: $XDG_CACHE_HOME/faultline,
 * else ~/.cache/faultline (else /var/tmp/faultline-UID). */
const char *fl_rootless_home(void);
/* Writes text to an existing file (of /proc: an id map, setgroups) in one
 * write: 0 or -errno (-EIO when it took less). */
int fl_write_proc(const char *path, const char *text);
/* The ids of the caller's user namespace mapped onto themselves, one line
 * "ID ID COUNT" per range of /proc/self/<which> (uid_map, gid_map): the map
 * of a child namespace that keeps every id the caller has.  0 or -errno. */
int fl_userns_identity_map(const char *which, char *buf, size_t len);

#endif
