/*
 * shared_leftovers.h: the workdir and parent cgroups that runs share, and
 * the lock that tells the last run to remove them (see shared_leftovers.c).
 */
#ifndef FL_SHARED_LEFTOVERS_H
#define FL_SHARED_LEFTOVERS_H

#include <stdbool.h>

/* root's; a user without root has a lock of its own (shared_leftovers.c) */
#define FL_RUNS_LOCK "/run/faultline.lock"
#define FL_ROOT_WORKDIR "/srv/faultline"
/* The workdir of a scenario that names none (scenario.h's default):
 * FL_ROOT_WORKDIR, or rootless ~/.cache/faultline/work (rootless.h). */
const char *fl_default_workdir(void);
#define FL_WORKDIR_MARK ".made-by-faultline"

/* Takes the runs lock: shared (waits; every run holds it while it lives)
 * or exclusive without waiting (gc).  The fd, or -errno (-EWOULDBLOCK:
 * another run holds it). */
int fl_runs_lock(bool exclusive);
/* At a run's end: true when no other run holds the lock (it is now held
 * exclusively through fd); false closes fd. */
bool fl_runs_lock_try_last(int fd);
/* Closes fd; last: it held the lock exclusively, and the file is removed. */
void fl_runs_lock_release(int fd, bool last);

/* mkdir -p workdir; the topmost directory it creates gets FL_WORKDIR_MARK. */
int fl_workdir_make(const char *workdir);
/* Removes workdir and its parents up to the marked one, each only when
 * empty; a workdir with no mark on it or a parent is left alone.  1 when
 * removed, 0 when not faultline's (or already gone), or -errno of the rmdir
 * that failed (the mark is then kept).  Under a private lock
 * (FAULTLINE_RUNS_LOCK) the default workdir is never removed. */
int fl_workdir_remove(const char *workdir);
/* Removes the faultline/ parent cgroups (pids, freezer, memory) when empty. */
void fl_cgroup_parents_remove(void);

#endif
