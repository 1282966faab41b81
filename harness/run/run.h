/*
 * run.h: a run as the fault kinds see it: its scenario and variant, its
 * clock and first error, its hosts, tasks and processes, the faults of the
 * variant with their state, and what each fault kind keeps for the run.
 * The engine (harness/engine/) owns the loop, the signals and the verdict
 * and holds this struct inside its own; nothing here calls the engine.
 *
 * What this layer does for its callers (the files of harness/run/):
 *   run.c       the clock (ms since the run started), the first harness
 *               error, the state file `faultline gc` reads
 *   hosts.c     a host's disk and /tmp made, a host brought down and up
 *   tasks.c     a task's process started (command, env, log, cgroup),
 *               signalled, frozen and thawed
 *   clock_offset.c  a host's clock_offset/clock_drift (libfaketime env)
 *   evsrv.c     the event channel's server side
 *
 * Hooks: the engine fills task_env, host_starting and host_started with
 * functions that ask every fault kind (harness/faults/kinds.c), so that this
 * layer starts tasks and hosts without knowing any kind.
 *
 * Threading: one thread, the engine's loop; nothing here blocks for long
 * except a freeze (at most 2 s) and a host's start.
 */
#ifndef FL_RUN_H
#define FL_RUN_H

#include "harness/scenario/scenario.h"
#include "harness/sys/host.h"

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct fl_fabric;
struct fl_rec_run;

/* What the engine's epoll watches; a process's output is one of them. */
enum watch_type { W_SIGNAL = 1, W_TIMER, W_LISTEN, W_CLIENT, W_OUTPUT };

struct watch {
    enum watch_type type;
    void *ptr;
};

/* One process: one generation of one task. */
struct proc {
    struct watch w;
    int task; /* flat task index */
    int host;
    int gen;
    pid_t pid;
    int out_fd; /* read end of stdout+stderr, -1 when closed */
    int log_fd;
    /* LOG.times beside the log: when each line of the log arrived, one
     * decimal ms since the run's start a line (docs/schema.md); -1 closed */
    int times_fd;
    bool mid_line; /* the log's last byte was not a newline */
    char log_path[PATH_MAX];
    char line[4096];
    size_t linelen;
    bool running;
    bool stopped;  /* stopped by a pause, or a kill with a stop signal */
    int exit_code; /* -1 when killed by a signal */
    int sig;
    bool core;
    bool end_signalled;  /* the harness sent it SIGTERM (then SIGKILL) to end the run */
    int fault_sig;       /* the signal a fault sent it (SIGKILL: its host taken down), 0 if
                            none: dying of it, the fault killed it, even when the run's
                            end signal came before it was reaped */
    bool stopped_at_end; /* reaped: killed by that signal (not a fault's, not a crash) */
    int64_t started_ms, ended_ms;
    int rec_no;
    struct proc *next;
};

struct task_rt {
    struct proc *cur; /* the latest generation, NULL before the first start */
    int gens;
    int restart_pending;   /* heals that will start it again */
    bool relaunch_on_exit; /* a kill healed while cur still ran: start it when cur exits */
    /* The task's own freezer cgroup (only for tasks a pause fault of the run
     * targets): every process of every generation of the task joins it at
     * spawn, so it holds all of them, whatever their session.  Invariant:
     * frozen iff the harness froze it and has not thawed it since. */
    bool has_cgroup;
    bool frozen;
    char cgroup[PATH_MAX];
};

#define FL_RUN_MAX_SUBMOUNTS 16

struct host_rt {
    struct fl_host h;
    char disk[PATH_MAX], tmp[PATH_MAX], cgroup[PATH_MAX];
    char mem_cgroup[PATH_MAX]; /* its memory cgroup (= cgroup on v2), when has_mem_cgroup */
    struct fl_host_mount *mounts;
    size_t nmounts;
    /* set by the fault kinds' init, before set-up: what the host needs */
    bool need_cgroup;     /* a pids cgroup (a threads limit) */
    bool need_mem_cgroup; /* a memory cgroup (a memory limit) */
    bool own_tmpfs;       /* its disk a tmpfs of its own even when not sized */
    bool has_cgroup, has_mem_cgroup;
    bool tmpfs_disk;
    bool disk_by_fs; /* its disk served through the faultline filesystem (disk_fs.c) */
    /* its root of its own (fl_root_layer_make): RUN/fs/hosts/NAME/root */
    char root[PATH_MAX], root_mnt[PATH_MAX], root_opts[3 * PATH_MAX + 64];
    char root_hide[PATH_MAX]; /* RUN/fs/hosts/NAME/root/hide */
    char root_tops[PATH_MAX]; /* RUN/fs/hosts/NAME/root/top (rootless, root_layer.h) */
    char ctl[PATH_MAX];       /* RUN/ctl/NAME: the harness's files for this host only */
    char dstore[PATH_MAX];    /* RUN/fs/durable/NAME (durable.c), if there is one */
    struct fl_host_bind binds[6 + FL_RUN_MAX_SUBMOUNTS]; /* what of the harness's view it sees */
    size_t nbinds;
    char addr[16];
    bool down_by_fault;
    bool comes_back; /* down, and a heal will bring it up again */
};

enum fault_state { F_PENDING, F_ACTIVE, F_DONE };

/* One fault of the variant: its scenario entry and where it stands. */
struct fault_rt {
    const struct fl_scn_fault *f; /* in the scenario; once fired, own when it has one */
    struct fl_scn_fault *own;     /* a fault aimed by its event ('{event.KEY}'): the
                                     fault as that event made it (the scheduler's) */
    int index;                    /* in s->faults */
    unsigned matches;             /* EVENT/LOG triggers seen so far */
    enum fault_state st;
    int64_t heal_at; /* when ACTIVE and for_ms > 0 */
    int64_t tick_at; /* ms since start when the kind's tick is due; -1 none.  A
                        fault with one stays ACTIVE after apply (a link flap) */
    int rec_no;
    int handle;  /* what the kind made, to undo at heal (a rule, a link); 0 none */
    bool on;     /* the kind's own on/off (a flapping link: down now) */
    void *priv;  /* the kind's own state for this fault (freed with free()) */
    int *tasks;  /* tasks this fault killed/paused, to restart/resume */
    int *starts; /* each one's task_rt.gens then: started again since? */
    size_t ntasks;
};

struct fl_run {
    const struct fl_scenario *s;
    size_t v;
    const char *bin_dir; /* {bin}: faultline's own programs and preloads */
    bool progress;       /* a progress line is on stderr: clear it before a message */
    bool disk_fs_all;    /* --disk-fs: every host's disk through the faultline filesystem */
    char run_id[64];
    char dir[PATH_MAX];
    char variant[FL_SCN_VARIANT_NAME_MAX];
    uint64_t seed;
    int64_t t0_mono; /* CLOCK_MONOTONIC ms at start */
    int64_t t0_unix;
    const char *db_path; /* the results database, for the state file; NULL none */
    bool done;           /* judged: the state file says "done" */

    int epfd;                   /* the engine's epoll: every process's output joins it */
    char ev_path[PATH_MAX];     /* the event channel's socket */
    char fsdir[PATH_MAX];       /* tmpfs holding every disk, /tmp and shared dir */
    char root_common[PATH_MAX]; /* FSDIR/root-common: every host root's /dev, /etc/hosts */
    const char *expose[3];      /* run, bin and scenario dirs, visible in every host */
    char hide[PATH_MAX];        /* covered in every host: the run's output directory */
    char libdir[PATH_MAX];      /* RUN/fs/lib (fl_run_lib_dir) */
    char *submounts[FL_RUN_MAX_SUBMOUNTS]; /* the machine's mounts below / that every
                                              host sees read-only (fl_root_submounts) */
    size_t nsubmounts;
    char sync_kinds[1024]; /* FAULTLINE_SYNC */
    struct fl_fabric *fab;
    struct fl_rec_run *rec;

    struct host_rt *hosts;
    struct task_rt *tasks;
    struct proc *procs;
    struct fault_rt *faults;
    size_t nfaults;
    char error[1024]; /* the first harness error: verdict error */
    char notes[4096]; /* fl_run_note: one a line, each once */

    char cgroup_run[PATH_MAX]; /* faultline/<run_id> of the pids cgroups */
    bool any_cgroup;
    char freezer_run[PATH_MAX]; /* faultline/<run_id> of the task cgroups (= cgroup_run on v2) */
    char mem_run[PATH_MAX];     /* faultline/<run_id> of the memory cgroups (= cgroup_run on v2) */
    bool any_mem;
    bool any_freezer;

    /* What a fault kind keeps for the whole run (its init makes it, its free
     * removes it), by the kind that owns it. */
    void *kind_state[FL_SCN_ACT_COUNT];

    /* Hooks (see above).  task_env adds to a task's env being built (room
     * for 4 more entries at *k for each kind); host_starting runs before a host (re)starts,
     * host_started once it is up again.  0 or -errno with err filled. */
    int (*task_env)(struct fl_run *r, int task, char **env, size_t *k, char *err, size_t errlen);
    int (*host_starting)(struct fl_run *r, int host, char *err, size_t errlen);
    void (*host_started)(struct fl_run *r, int host);
    /* task_started: a process of the task was just started with the
     * expanded command cmd (the engine checks that its preloads reach it) */
    void (*task_started)(struct fl_run *r, int task, const char *cmd);
    /* spawned: a process on the host (a task's, the shell's) exists and
     * waits to exec (a tracer takes it: the clock kinds); NULL when no kind
     * needs it.  fl_run_spawn_hook sets it on an fl_spawn. */
    int (*spawned)(struct fl_run *r, int host, pid_t pid, char *err, size_t errlen);
};

/* run.c */
int64_t fl_run_now(const struct fl_run *r); /* ms since the run started */
/* Keeps the first harness error (later ones are usually its consequences). */
void fl_run_error(struct fl_run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A note on the run, printed under its verdict and recorded (runs.notes):
 * something that did not go as the scenario asked, though nothing failed
 * (a fault that could not reach its target).  Each text once. */
void fl_run_note(struct fl_run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void fl_run_write_state(struct fl_run *r); /* the state file `gc` reads */
/* The run's cgroup trees, each once (on v2 the pids, freezer and memory
 * ones are the same): what the state file lists and the end removes. */
size_t fl_run_cgroup_trees(const struct fl_run *r, const char *trees[3]);
/* One of faultline's preloads (NAME, found in ../lib/ or ../lib/faultline/
 * beside {bin}) copied to DIR/NAME, where every host sees it (build/lib may
 * lie under /tmp, which each host has its own of); its path into path.
 * -errno with err filled ("WHAT needs NAME next to faultline ..."). */
int fl_run_preload(const struct fl_run *r, const char *name, const char *dir, const char *what,
                   char *path, size_t len, char *err, size_t errlen);
/* RUN/fs/lib: where the preloads are copied (every host sees it, read-only;
 * on the run's tmpfs, it goes with the harness) */
void fl_run_lib_dir(const struct fl_run *r, char *buf, size_t len);

/* hosts.c */
/* A fresh disk (empty directory, or tmpfs when sized or own_tmpfs), with
 * the mount points of its shared paths and, with preload, its leftovers. */
int fl_run_make_disk(struct fl_run *r, int host, bool preload);
int fl_run_make_tmp(struct fl_run *r, int host); /* an empty /tmp */
/* The host's root of its own (RUN/fs/hosts/NAME/root: what it wrote outside
 * its disk, /tmp and shared paths); fresh: empty again (a replace), else
 * kept (a restart or crash) */
int fl_run_make_root(struct fl_run *r, int host, bool fresh);
/* Removes what of the hosts' roots is the harness's, not what a host wrote
 * (the common layer, each host's hide directory of mount points), so that
 * --keep copies only the hosts' own layers.  Every host is down. */
void fl_run_roots_strip(struct fl_run *r);
/* Brings a host that is down up again (fresh_disk: a new machine). */
int fl_run_host_up(struct fl_run *r, int host, bool fresh_disk);
/* Kills every process on a host at once; by_fault: not the run's error;
 * will_restart: its tasks are started again when it is back. */
void fl_run_host_down(struct fl_run *r, int host, bool by_fault, bool will_restart);

/* tasks.c */
int fl_run_start_task(struct fl_run *r, int task);
/* Has sp (a process about to start on host) wait for the run's spawned
 * hook before its exec, when the run has one; a must live until
 * fl_host_spawn returns. */
struct fl_run_spawn_arg {
    struct fl_run *r;
    int host;
};
struct fl_spawn;
void fl_run_spawn_hook(struct fl_run *r, int host, struct fl_spawn *sp, struct fl_run_spawn_arg *a);
void fl_run_signal_proc(struct fl_run *r, struct proc *p, int sig);
/* Freezes (waiting until it is) or thaws a task's cgroup; 0 when the task
 * has none or is already so; -errno with err filled otherwise. */
int fl_run_task_freeze(struct fl_run *r, int task, bool frozen, char *err, size_t errlen);
/* The task's own freezer cgroup (for a pause fault), made before it starts. */
int fl_run_task_cgroup(struct fl_run *r, int task);
/* A task's environment (NULL with err filled and *rc set on error) and its
 * expanded command (NULL with err filled). */
char **fl_run_task_env(struct fl_run *r, int task, char *err, size_t errlen, int *rc);
char *fl_run_task_command(struct fl_run *r, int task, char *err, size_t errlen);
void fl_run_free_strv(char **v);

#endif
