/*
 * cgroup.h: per-host pids cgroups and per-task freezer cgroups (see cgroup.c).
 */
#ifndef FL_CGROUP_H
#define FL_CGROUP_H

#include <dirent.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* Rootless: the cgroup v2 directory delegated to the user that the process
 * runs in (systemd's Delegate=yes), into buf: 0, or -ENOTSUP (none, or
 * root). */
int fl_cgroup_delegated(char *buf, size_t len);
/* Directory under which faultline's cgroups live; returns the cgroup
 * version (1 or 2) or -ENOTSUP when no pids controller is mounted. */
int fl_cgroup_root(char *buf, size_t len);
/* Creates <root>/<run_id>/<host>; its path into path. */
int fl_cgroup_create(const char *run_id, const char *host, char *path, size_t len);
/* Directory under which faultline's freezer cgroups live: 2 (unified
 * hierarchy at /sys/fs/cgroup: cgroup.freeze), 1 (v1 freezer hierarchy) or
 * -ENOTSUP. */
int fl_cgroup_freezer_root(char *buf, size_t len);
/* Creates <freezer root>/<run_id>/<host>/<task> (and the run's owner mark
 * there); its path into path. */
int fl_cgroup_create_task(const char *run_id, const char *host, const char *task, char *path,
                          size_t len);
/* Freezes (waiting up to timeout_ms until every process in it is frozen:
 * -ETIMEDOUT otherwise) or thaws the cgroup at path, v2 or v1 by the files
 * it has; -ENOENT when it has neither. */
int fl_cgroup_freeze(const char *path, bool frozen, int timeout_ms);
/* Sends sig to every process in the cgroup: how many, or -errno. */
int fl_cgroup_signal(const char *path, int sig);
/* The owner mark in <root>/<run_id> (see cgroup.c), and who it names:
 * 0, or -ENOENT when the run's cgroup has none. */
#define FL_CGROUP_OWNER_PREFIX "harness."
int fl_cgroup_owner(const char *run_cgroup_dir, pid_t *pid, unsigned long long *starttime);
/* Directory under which faultline's memory cgroups live: 2 (the unified
 * hierarchy, the same tree as the pids cgroups), 1 (the v1 memory
 * hierarchy) or -ENOTSUP. */
int fl_cgroup_memory_root(char *buf, size_t len);
/* faultline's roots on this machine (pids, freezer, memory: those there
 * are), into roots; returns how many. */
int fl_cgroup_roots(char roots[3][PATH_MAX]);
/* The host's memory cgroup <root>/<run_id>/<host>: on v2 the host's pids
 * cgroup with the memory controller enabled down to it; on v1 its own. */
int fl_cgroup_create_memory(const char *run_id, const char *host, char *path, size_t len);
/* The most memory (and no swap) the cgroup's processes may use; 0: no
 * limit.  v2 memory.max (+ memory.swap.max), v1 memory.limit_in_bytes (+
 * memory.memsw.limit_in_bytes where the kernel accounts swap). */
int fl_cgroup_set_memory_max(const char *path, unsigned long long bytes);
/* pids.max = max (max <= 0: "max", no limit). */
int fl_cgroup_set_pids_max(const char *path, long max);
/* Removes <root>/<run_id> and every cgroup below it (killing stragglers,
 * thawing frozen ones). */
int fl_cgroup_remove_run(const char *run_cgroup_dir);

#endif
