/*
 * vclock.h: moving a host's clocks for every program on it, whatever it is
 * built with (vclock.c): faultline's vDSO (harness/tools/fl_vdso.c) put into
 * each process at its exec by a keeper process that traces the host's
 * processes, and a clock page per host that the harness rewrites.
 */
#ifndef FL_VCLOCK_H
#define FL_VCLOCK_H

#include "harness/sys/vclock_abi.h"

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct fl_vclock;

/* Can this machine do it?  false with why filled: not x86-64 (the only
 * architecture fl_vdso.c is written for), or no vDSO in this process. */
bool fl_vclock_supported(char *why, size_t len);

/* Tries what the keeper does to a process: traces a child of this one
 * (PTRACE_SEIZE).  true, or false with why filled (ptrace refused here:
 * kernel.yama.ptrace_scope, a seccomp profile). */
bool fl_vclock_probe(char *why, size_t len);

/* Starts the keeper, a child process of the caller's that dies with it.
 * vdso_so: fl_vdso.so's path.  0 or -errno with err filled. */
int fl_vclock_start(struct fl_vclock **out, const char *vdso_so, char *err, size_t errlen);

/* Makes host's clock page: the file path (mode 0644, a path every process
 * of the host can open under the same name), mapped here too; the clocks
 * read real time until fl_vclock_set.  0 or -errno. */
int fl_vclock_host_page(struct fl_vclock *v, int host, const char *path, char *err, size_t errlen);

/* Names host's clock page made by another process (a run's, for `faultline
 * exec`): the path as the host's processes open it; nothing is mapped
 * here, fl_vclock_set does nothing for it.  0 or -errno. */
int fl_vclock_host_join(struct fl_vclock *v, int host, const char *path, char *err, size_t errlen);

/* Sets a class of host's clocks (mono false: the realtime class); every
 * process of the host reads the new value at its next read. */
void fl_vclock_set(struct fl_vclock *v, int host, bool mono, const struct fl_vclock_class *c);
/* What fl_vclock_set last set (zero before). */
void fl_vclock_get(const struct fl_vclock *v, int host, bool mono, struct fl_vclock_class *c);

/* Has the keeper trace pid, a process of host that has not yet exec'd
 * (it waits, fl_spawn's before_exec): from its exec on, it and every
 * process it starts get faultline's vDSO.  0 or -errno with err filled. */
int fl_vclock_adopt(struct fl_vclock *v, int host, pid_t pid, char *err, size_t errlen);

/* The keeper's first failure (a process it could not give the vDSO, or
 * its own death), or 0 with nothing in err; installs in *n (may be NULL)
 * the number of processes given the vDSO so far. */
int fl_vclock_status(struct fl_vclock *v, long *n, char *err, size_t errlen);

/* Stops the keeper (its processes go on untraced, the vDSO they have
 * reading the page as last set) and unmaps the pages; v is freed. */
void fl_vclock_stop(struct fl_vclock *v);

#endif
