/*
 * engine_int.h: the run engine's state, shared by engine.c (set-up, event
 * loop, tear-down), engine/schedule.c (applying and healing faults) and check.c
 * (judging the outcome).  Not for use outside the engine.
 */
#ifndef FL_ENGINE_INT_H
#define FL_ENGINE_INT_H

#include "harness/engine/engine.h"
#include "harness/run/evsrv.h"
#include "harness/sys/host.h"
#include "harness/scenario/scenario.h"

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct fl_fabric;
struct fl_links;
struct fl_rec_run;

enum watch_type { W_SIGNAL = 1, W_TIMER, W_LISTEN, W_CLIENT, W_OUTPUT };

struct watch {
    enum watch_type type;
    void *ptr;
};

/* One process: one generation of one task. */
struct proc {
    struct watch w;
    int task;                   /* flat task index */
    int host;
    int gen;
    pid_t pid;
    int out_fd;                 /* read end of stdout+stderr, -1 when closed */
    int log_fd;
    char log_path[PATH_MAX];
    char line[4096];
    size_t linelen;
    bool running;
    bool stopped;               /* stopped by a pause, or a kill with a stop signal */
    int exit_code;              /* -1 when killed by a signal */
    int sig;
    bool core;
    int64_t started_ms, ended_ms;
    int rec_no;
    struct proc *next;
};

struct task_rt {
    struct proc *cur;           /* the latest generation, NULL before the first start */
    int gens;
    int restart_pending;        /* heals that will start it again */
    bool relaunch_on_exit;      /* a kill healed while cur still ran: start it when cur exits */
    /* The task's own freezer cgroup (only for tasks a pause fault of the run
     * targets): every process of every generation of the task joins it at
     * spawn, so it holds all of them, whatever their session.  Invariant:
     * frozen iff the harness froze it and has not thawed it since. */
    bool has_cgroup;
    bool frozen;
    char cgroup[PATH_MAX];
};

struct host_rt {
    struct fl_host h;
    char disk[PATH_MAX], tmp[PATH_MAX], cgroup[PATH_MAX];
    char mem_cgroup[PATH_MAX];  /* its memory cgroup (= cgroup on v2), when has_mem_cgroup */
    struct fl_host_mount *mounts;
    size_t nmounts;
    bool has_cgroup, has_mem_cgroup;
    bool tmpfs_disk;
    char addr[16];
    bool down_by_fault;
    bool comes_back;            /* down, and a heal will bring it up again */
};

enum fault_state { F_PENDING, F_ACTIVE, F_DONE };

struct fault_rt {
    const struct fl_scn_fault *f;
    int index;                  /* in s->faults */
    unsigned matches;           /* EVENT/LOG triggers seen so far */
    enum fault_state st;
    int64_t heal_at;            /* when ACTIVE and for_ms > 0 */
    int rule_id;                /* partition */
    int link_id;                /* link: fl_links id while applied, else 0 */
    bool flap_down;             /* link flap: its ports are down now */
    int64_t flap_next;          /* link flap: next turn, ms since start; -1 none */
    int rec_no;
    int *tasks;                 /* tasks this fault killed/paused, to restart/resume */
    int *starts;                /* each one's task_rt.gens then: started again since? */
    size_t ntasks;
};

struct ev_seen {
    char kind[64];
    int host, job;
    long long step;             /* its step= attribute, -1 when none */
};

struct engine {
    const struct fl_scenario *s;
    size_t v;
    const struct fl_engine_opts *o;
    struct fl_engine_result *res;
    char run_id[64];
    char dir[PATH_MAX];
    char variant[FL_SCN_VARIANT_NAME_MAX];
    uint64_t seed;
    int64_t t0_mono;            /* CLOCK_MONOTONIC ms at start */
    int64_t t0_unix;

    int epfd, sigfd, timerfd;
    int runs_lock;              /* shared lock on FL_RUNS_LOCK (shared_leftovers.c), or -errno */
    struct watch w_sig, w_timer, w_listen;
    struct fl_evsrv *ev;
    char ev_path[PATH_MAX];
    char fsdir[PATH_MAX];       /* tmpfs holding every disk, /tmp and shared dir */
    const char *expose[3];      /* run, bin and scenario dirs, visible in every host */
    struct fl_fabric *fab;
    struct fl_links *links;     /* link faults (faults/link.c), made at the first */
    struct fl_rec_run *rec;

    struct host_rt *hosts;
    struct task_rt *tasks;
    struct proc *procs;
    struct fault_rt *faults;
    size_t nfaults;
    struct ev_seen *events;
    size_t nevents, capevents;
    char sync_kinds[1024];      /* FAULTLINE_SYNC */

    bool stopping;              /* ending: SIGTERM sent */
    int64_t kill_at;            /* SIGKILL after grace */
    bool timed_out;
    char timeout_waiting[256];  /* at the timeout: the stop_when tasks not yet ended */
    bool interrupted;
    int interrupts;             /* SIGINT/SIGTERM/SIGHUP seen: the second skips the grace */
    char error[1024];           /* the first harness error: verdict error */
    char cgroup_run[PATH_MAX];  /* faultline/<run_id> of the pids cgroups */
    bool any_cgroup;
    char freezer_run[PATH_MAX]; /* faultline/<run_id> of the task cgroups (= cgroup_run on v2) */
    char mem_run[PATH_MAX];     /* faultline/<run_id> of the memory cgroups (= cgroup_run on v2) */
    bool any_mem;
    bool any_freezer;
    int shell_pid;
    int shell_status;           /* its wait status once reaped, else -1 */
    struct fl_disk *disk;       /* disk faults' run-time state (faults/disk.c); NULL without */
    struct fl_durable *durable; /* the crash-consistency layer (durable.c); NULL without */
};

int64_t eng_now(const struct engine *e);
void eng_error(struct engine *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void eng_write_state(struct engine *e);
int eng_start_task(struct engine *e, int task);
int eng_host_up(struct engine *e, int host, bool fresh_disk);
void eng_host_down(struct engine *e, int host, struct fault_rt *by, bool will_restart);
void eng_signal_proc(struct engine *e, struct proc *p, int sig);
/* Freezes (waiting until it is) or thaws a task's cgroup; 0 when the task
 * has none or is already so; -errno with err filled otherwise. */
int eng_task_freeze(struct engine *e, int task, bool frozen, char *err, size_t errlen);

/* engine/schedule.c */
void fl_faults_init(struct engine *e);
void fl_faults_tick(struct engine *e);          /* time triggers and heals */
void fl_faults_tick_setup(struct engine *e);    /* due partitions/limits, before tasks start */
int64_t fl_faults_next_deadline(const struct engine *e);   /* ms since start, -1 none */
void fl_faults_on_event(struct engine *e, int host, int job, int task, const struct fl_ev *ev);
void fl_faults_on_line(struct engine *e, int host, int job, int task, const char *line);
void fl_faults_heal_all(struct engine *e);
/* The faults that never fired, one line each with why; "" when none. */
void fl_faults_unfired(const struct engine *e, char *buf, size_t len);
/* faults/link.c */
void fl_faults_link_target(const struct engine *e, const struct fl_scn_action *a, char *buf,
                           size_t len);
void fl_faults_link_detail(const struct fl_scn_action *a, char *buf, size_t len);
int fl_faults_link_apply(struct engine *e, struct fault_rt *fr, int64_t now, char *err,
                         size_t errlen);
int fl_faults_link_heal(struct engine *e, struct fault_rt *fr, char *err, size_t errlen);
void fl_faults_link_flap(struct engine *e, struct fault_rt *fr, int64_t now);   /* turns when due */
void fl_faults_link_host_up(struct engine *e, int host);   /* its port was made again */
void fl_faults_link_free(struct engine *e);                /* before the fabric goes */
const char *fl_faults_sync_kinds(const struct fl_scenario *s, size_t v, char *buf, size_t len);

/* faults/disk.c: the disk: fault kind (libfiu failure points in the target's
 * processes).  All are no-ops in a run without disk faults. */
struct fl_disk;
int fl_disk_init(struct engine *e, char *err, size_t errlen);     /* after fl_faults_init */
void fl_disk_free(struct engine *e);
/* Adds LD_PRELOAD and the control variables to a task's env being built
 * (env has room for 4 more entries at *k). */
int fl_disk_env(struct engine *e, int task, char **env, size_t *k, char *err, size_t errlen);
int fl_disk_apply(struct engine *e, struct fault_rt *fr, char *err, size_t errlen);
int fl_disk_heal(struct engine *e, struct fault_rt *fr, char *err, size_t errlen);
void fl_disk_detail(const struct fault_rt *fr, char *buf, size_t len);  /* faults.detail */
/* engine/schedule.c: appends to a fault's detail text; "..." once it is full. */
void eng_detail_add(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* faults/limit.c: the limit: fault kind (threads, fds, memory of a host). */
int fl_limit_apply(struct engine *e, struct fault_rt *fr, char *err, size_t errlen);
int fl_limit_heal(struct engine *e, struct fault_rt *fr, char *err, size_t errlen);
void fl_limit_detail(const struct fl_scn_action *a, char *buf, size_t len);   /* faults.detail */
/* at_rest.c: corrupt: and truncate: (files at rest on the host's disk
 * changed now); detail gets what was changed, err why not. */
int fl_at_rest_apply(struct engine *e, struct fault_rt *fr, char *detail, size_t dlen, char *err,
                     size_t errlen);

/* durable.c: the crash-consistency layer (crash_host with unsynced: lose).
 * All are no-ops in a run without such a fault.  init: after fl_faults_init,
 * before the disks are made (a tracked host's disk is a tmpfs of its own). */
struct fl_durable;
int fl_durable_init(struct engine *e, char *err, size_t errlen);
void fl_durable_free(struct engine *e);                 /* removes every store */
bool fl_durable_tracked(const struct engine *e, int host);
/* Before a tracked host starts: its disk as it is now is what is durable. */
int fl_durable_baseline(struct engine *e, int host, char *err, size_t errlen);
/* Adds LD_PRELOAD and FAULTLINE_DURABLE_* to a tracked host's task's env
 * being built (room for 4 more entries at *k). */
int fl_durable_env(struct engine *e, int task, char **env, size_t *k, char *err, size_t errlen);
/* A crash: begin before the host is killed, end after (waits until its
 * processes are gone, then brings the disk back to what was synced, and
 * appends what was lost to detail). */
struct fl_durable_crash {
    int host;
    bool was_up;
    pid_t init;
    bool have_ns;               /* pidns_*: the host's PID namespace */
    ino_t pidns_ino;
    dev_t pidns_dev;
};
void fl_durable_crash_begin(struct engine *e, int host, struct fl_durable_crash *c);
int fl_durable_crash_end(struct engine *e, const struct fl_durable_crash *c, char *detail,
                         size_t dlen, char *err, size_t errlen);
/* corrupt:/truncate: changed file ino at rest: the durable copy too. */
int fl_durable_rest_corrupt(struct engine *e, int host, uint64_t ino, uint64_t off, uint8_t x);
int fl_durable_rest_truncate(struct engine *e, int host, uint64_t ino, uint64_t size);

/* clock_offset.c: a host's clock_offset through libfaketime.  Adds LD_PRELOAD,
 * FAKETIME and FAKETIME_DONT_FAKE_MONOTONIC to a task's env being built when
 * its host has an offset (env has room for 3 more at *k). */
int fl_clock_env(struct engine *e, int task, char **env, size_t *k, char *err, size_t errlen);

/* env_preload.c: puts libs (space-separated) first in env's LD_PRELOAD. */
void eng_env_preload(char **env, size_t *k, const char *libs);

/* check.c */
void fl_check_run(struct engine *e);

#endif
