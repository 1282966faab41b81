/*
 * engine_int.h: the engine's own state, shared by its files: engine.c (a
 * run from start to verdict), setup.c, loop.c, shell.c, teardown.c,
 * schedule.c (when faults fire and heal) and check.c (judging the outcome).
 * Not for use outside harness/engine/.
 *
 * A run's state (struct fl_run, harness/run/run.h) is what the fault kinds
 * may see and change; the rest, here, is the loop's: its signal and timer
 * descriptors, the event server, the events seen, the run's state and why
 * it ended, and the shell of `faultline shell`.
 *
 * States of a run (enum run_state), in this order only:
 *   SETUP     directories, hosts, event channel, tasks being made
 *   RUNNING   the loop: faults fire and heal, tasks run
 *   FINAL     stop_when met and the variant has final: checks: every fault
 *             healed, every host up, the cluster's tasks still running, the
 *             checks' processes running (final.c); no fault fires
 *   STOPPING  every fault healed, SIGTERM sent; waiting for the grace
 *   KILLING   the grace is over: SIGKILL to whatever still runs
 *   ENDED     no process left; hosts, switch and cgroups torn down
 *   JUDGED    verdict reached and recorded; then the directories go
 * A set-up error goes from SETUP to ENDED at once; a run without finals
 * (or that stopped otherwise) goes from RUNNING to STOPPING.  Why a run stopped
 * (enum stop_reason) is kept beside the state: its stop_when jobs ended,
 * its timeout, an interrupt, or a harness error (r.error).
 */
#ifndef FL_ENGINE_INT_H
#define FL_ENGINE_INT_H

#include "harness/engine/engine.h"
#include "harness/run/evsrv.h"
#include "harness/run/run.h"

enum run_state {
    RUN_SETUP,
    RUN_RUNNING,
    RUN_FINAL,
    RUN_STOPPING,
    RUN_KILLING,
    RUN_ENDED,
    RUN_JUDGED
};

enum stop_reason { STOP_NONE, STOP_DONE, STOP_TIMEOUT, STOP_INTERRUPT, STOP_ERROR };

struct ev_seen {
    char kind[64];
    int host, job;
    long long step; /* its step= attribute, -1 when none */
};

/* A final: check of the variant at run time (final.c). */
struct final_rt {
    int task;        /* its flat task */
    int64_t kill_at; /* ms since start: killed then if still running; -1 before it starts */
    bool timed_out;  /* it was */
};

/* reach.c: a (source, executable) already noted */
struct reach_seen {
    int kind, fault;
    dev_t dev;
    ino_t ino;
};

struct engine {
    struct fl_run r; /* what the fault kinds see (harness/run/run.h) */
    const struct fl_engine_opts *o;
    struct fl_engine_result *res;
    enum run_state state; /* only through eng_set_state */
    enum stop_reason why; /* set when leaving RUNNING */

    int sigfd, timerfd;
    int runs_lock; /* shared lock on FL_RUNS_LOCK (shared_leftovers.c), or -errno */
    struct watch w_sig, w_timer, w_listen;
    struct fl_evsrv *ev;
    struct ev_seen *events;
    size_t nevents, capevents;

    int64_t kill_at;           /* STOPPING: SIGKILL then (KILLING: the next SIGKILL) */
    char timeout_waiting[256]; /* at the timeout: the stop_when tasks not yet ended */
    int interrupts;            /* SIGINT/SIGTERM/SIGHUP seen: the second skips the grace */
    struct final_rt *finals;   /* the variant's final: checks */
    size_t nfinals;
    int shell_pid;
    int shell_status; /* its wait status once reaped, else -1 */
    struct reach_seen *reach;
    size_t nreach;
};

/* loop.c: moves the run to state s, which must come after the current
 * one (see above); anything else is a bug in the engine and aborts. */
void eng_set_state(struct engine *e, enum run_state s);
static inline bool eng_stopping(const struct engine *e)
{
    return e->state >= RUN_STOPPING;
}
/* loop.c: the loop, until no process is left; a process's output read (all
 * there is now) and closed; an event that came after the loop, recorded. */
void eng_loop(struct engine *e);
void eng_read_output(struct engine *e, struct proc *p);
void eng_close_output(struct engine *e, struct proc *p);
void eng_on_late_event(void *ctx, struct fl_evsrv_client *c, const struct fl_ev *ev, char *raw);

/* final.c: the final: checks of the variant (e->nfinals of them; none in
 * a shell), once stop_when is met.  eng_final_begin, in state FINAL: faults
 * healed, hosts up, the checks started.  eng_final_tick kills the checks
 * past their timeout and says whether every one has ended;
 * eng_final_deadline is the next timeout (ms since start, -1 none);
 * eng_final_of: the final_rt of a task, or NULL. */
void eng_final_init(struct engine *e);
void eng_final_begin(struct engine *e);
bool eng_final_tick(struct engine *e);
int64_t eng_final_deadline(const struct engine *e);
const struct final_rt *eng_final_of(const struct engine *e, int task);

/* setup.c: directories, disks, host cgroups and specs (0 or -errno, the
 * run's error set); every host up in one batch. */
int eng_setup_dirs(struct engine *e);
int eng_hosts_up(struct engine *e);

/* shell.c: `faultline shell`'s lines, and its shell on the chosen host. */
void eng_shell_print(struct engine *e);
int eng_shell_start(struct engine *e);

/* teardown.c: everything the run holds removed (hosts, kinds, switch,
 * cgroups; events drained); then the engine's memory freed. */
void eng_teardown(struct engine *e);

/* view.c: a path of a host's filesystem as the host sees it (relative to
 * the workdir, or absolute inside it or /tmp).  fl_host_view_at: an O_PATH
 * fd of the directory that holds it (the host's disk, a shared directory
 * or its /tmp) and, in rel, the path inside it, to resolve there only with
 * RESOLVE_IN_ROOT; -EXDEV for a path outside the host's own files.
 * fl_host_open_in_view: the file opened so (flags of open(2); O_PATH |
 * O_NOFOLLOW to look at a symlink itself), or -errno. */
int fl_host_view_at(struct engine *e, int host, const char *path, char *rel, size_t len);
int fl_host_open_in_view(struct engine *e, int host, const char *path, int flags);
void eng_free(struct engine *e);

/* schedule.c: the faults of the variant, when they fire and heal. */
void fl_faults_init(struct engine *e);
void fl_faults_tick(struct engine *e);       /* time triggers, heals, kinds' ticks */
void fl_faults_tick_setup(struct engine *e); /* due at_setup kinds, before tasks start */
int64_t fl_faults_next_deadline(const struct engine *e); /* ms since start, -1 none */
void fl_faults_on_event(struct engine *e, int host, int job, int task, const struct fl_ev *ev);
void fl_faults_on_line(struct engine *e, int host, int job, int task, const char *line);
void fl_faults_heal_all(struct engine *e);
/* Before the final: checks: every ACTIVE fault healed as at its for: (what
 * it stopped starts again), and every lasting one applied without for:. */
void fl_faults_heal_for_final(struct engine *e);
/* The faults that never fired, one line each with why; "" when none. */
void fl_faults_unfired(const struct engine *e, char *buf, size_t len);
/* res->faults_armed and faults_fired, and o->fates when asked */
void fl_faults_fates(struct engine *e);
const char *fl_faults_sync_kinds(const struct fl_scenario *s, size_t v, char *buf, size_t len);
/* The kinds' init (those with a fault in the variant) and hooks; their free. */
int fl_faults_kinds_init(struct engine *e, char *err, size_t errlen);
void fl_faults_kinds_free(struct engine *e);
/* The run is ending, its processes still alive: each kind's stopping. */
void fl_faults_kinds_stopping(struct engine *e);

/* reach.c: a fault's target as the faults table says it ("ps1", "w:0");
 * "fault 3 (f.yaml:9, disk ps1 call=write errno=EIO)" */
void eng_fault_target(const struct engine *e, const struct fl_scn_fault *f, char *buf, size_t len);
/* the same from the run alone (r->s is all it needs: runs --faults) */
void eng_target_of(const struct fl_run *r, const struct fl_scn_fault *f, char *buf, size_t len);
void eng_fault_name(const struct engine *e, const struct fault_rt *fr, char *buf, size_t len);

/* reach.c: notes on faults that work through a preload and a program it
 * cannot enter (static, Go): checked as each task starts (eng_reach_init
 * sets the hook), before a disk fault or a crash with unsynced: lose fires,
 * and as the run begins to stop. */
void eng_reach_init(struct engine *e);
void eng_reach_before_fire(struct engine *e, const struct fault_rt *fr);
void eng_reach_at_stop(struct engine *e);
void eng_reach_free(struct engine *e);

/* check.c */
void fl_check_run(struct engine *e);

#endif
