/*
 * durable.h: the crash-consistency layer at run time (durable.c), for
 * `crash_host` with `unsynced: lose` (machine.c) and the changes at rest
 * that must reach what is synced too (at_rest.c).  All are no-ops in a run
 * without such a fault.  Its state is r->kind_state[FL_SCN_ACT_CRASH_HOST].
 */
#ifndef FL_FAULTS_DURABLE_H
#define FL_FAULTS_DURABLE_H

#include "harness/run/run.h"

/* The crash_host kind's init, free, task_env and host_starting: which hosts
 * are tracked (their disk a tmpfs of their own), the stores removed, the
 * preload and FAULTLINE_DURABLE_* in a tracked host's tasks, and a tracked
 * host's disk as it is when it starts taken as what is durable. */
int fl_durable_init(struct fl_run *r, char *err, size_t errlen);
void fl_durable_free(struct fl_run *r);
int fl_durable_env(struct fl_run *r, int task, char **env, size_t *k, char *err, size_t errlen);
int fl_durable_baseline(struct fl_run *r, int host, char *err, size_t errlen);

/* A crash: begin before the host is killed, end after (waits until its
 * processes are gone, then brings the disk back to what was synced, and
 * appends what was lost to detail). */
struct fl_durable_crash {
    int host;
    bool torn; /* unsynced: torn (set by the caller after begin) */
    bool was_up;
    pid_t init;
    bool have_ns; /* pidns_*: the host's PID namespace */
    ino_t pidns_ino;
    dev_t pidns_dev;
};
void fl_durable_crash_begin(struct fl_run *r, int host, struct fl_durable_crash *c);
int fl_durable_crash_end(struct fl_run *r, const struct fl_durable_crash *c, char *detail,
                         size_t dlen, char *err, size_t errlen);

/* A program ran on host whose syncs the preload cannot see (why: "/usr/bin/x
 * on h is a Go binary"): a crash with unsynced: lose leaves its disk as it
 * was (the first reason is kept).  No-op for an untracked host. */
void fl_durable_unseen(struct fl_run *r, int host, const char *why);

/* Is host's disk tracked (a crash with unsynced: lose may target it)? */
bool fl_durable_tracks(const struct fl_run *r, int host);
/* The faultline filesystem serving host's disk (disk_fs.c) says fd, a file
 * or directory of the disk itself, was synced: recorded as durable, as the
 * preload records a sync (a failure marks the store broken).  From the
 * filesystem's threads, several at once. */
void fl_durable_fs_synced(struct fl_run *r, int host, int fd);

/* corrupt:/truncate: changed file ino at rest: the durable copy too. */
int fl_durable_rest_corrupt(struct fl_run *r, int host, uint64_t ino, uint64_t off, uint8_t x);
int fl_durable_rest_truncate(struct fl_run *r, int host, uint64_t ino, uint64_t size);

#endif
