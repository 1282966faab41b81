/*
 * cgroup.h: per-host pids cgroups (see cgroup.c).
 */
#ifndef FL_CGROUP_H
#define FL_CGROUP_H

#include <dirent.h>
#include <signal.h>
#include <stddef.h>
#include <sys/types.h>

/* Directory under which faultline's cgroups live; returns the cgroup
 * version (1 or 2) or -ENOTSUP when no pids controller is mounted. */
int fl_cgroup_root(char *buf, size_t len);
/* Creates <root>/<run_id>/<host>; its path into path. */
int fl_cgroup_create(const char *run_id, const char *host, char *path, size_t len);
/* The owner mark in <root>/<run_id> (see cgroup.c), and who it names:
 * 0, or -ENOENT when the run's cgroup has none. */
#define FL_CGROUP_OWNER_PREFIX "harness."
int fl_cgroup_owner(const char *run_cgroup_dir, pid_t *pid, unsigned long long *starttime);
/* pids.max = max (max <= 0: "max", no limit). */
int fl_cgroup_set_pids_max(const char *path, long max);
/* Removes <root>/<run_id> and every host cgroup in it (killing stragglers). */
int fl_cgroup_remove_run(const char *run_cgroup_dir);

#endif
