/*
 * run_owned.h: is this process or cgroup a run's own?  The checks `gc` makes
 * before it signals a pid or removes a cgroup that a run's state file names
 * (a file that hosts may be able to write: see run_owned.c).
 */
#ifndef FL_RUN_OWNED_H
#define FL_RUN_OWNED_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* What a recorded pid claims to be. */
enum fl_owned_kind {
    FL_OWNED_INIT,   /* a host's init: PID 1 of a PID namespace of its own */
    FL_OWNED_SWITCH, /* the switch holder: comm "fl-sw <run_id>" */
    FL_OWNED_TASK,   /* a task's process: FAULTLINE_RUN=<run_id>, in a host's PID ns */
};

/* A run id as faultline makes them: letters, digits, '-', '_', '.', not
 * "." or "..", no '/': a path component. */
bool fl_owned_run_id_ok(const char *run_id);

/* A pidfd on pid when the process is run_id's kind, started at starttime
 * (non-zero), outside this process's network namespace (init, switch) or
 * PID namespace (task), and no live faultline harness is among its
 * ancestors (a live run's processes all descend from their harness; a dead
 * run's were adopted by init).  -EPERM with why (a sentence) when it is
 * not; -ESRCH when pid is gone. */
int fl_owned_pidfd(pid_t pid, unsigned long long starttime, enum fl_owned_kind kind,
                   const char *run_id, char *why, size_t whylen);
/* fl_owned_pidfd, then pidfd_send_signal(sig): 0, or its error. */
int fl_owned_kill(pid_t pid, unsigned long long starttime, enum fl_owned_kind kind,
                  const char *run_id, int sig, char *why, size_t whylen);
/* Does a live faultline harness (not a host's init) have pid among its
 * descendants? */
bool fl_owned_under_live_harness(pid_t pid);

/* Is path exactly <root>/<run_id> for one of faultline's cgroup roots (the
 * pids, freezer and memory hierarchies' faultline/), a directory reached
 * through no symlink and no "..", for the run run_id?  0, or -EPERM with
 * why. */
int fl_owned_cgroup(const char *path, const char *run_id, char *why, size_t whylen);

#endif
