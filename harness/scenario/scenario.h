/*
 * scenario.h: the scenario file data model (format v1, documented for users
 * in scenarios/README.md); the loader that fills it is harness/load/load.h.
 *
 * fl_scenario_load() reads a YAML file with libyaml, builds a node tree that
 * keeps 1-based line:column marks, and validates it completely into a
 * struct fl_scenario before the caller creates anything.  Every reference is
 * resolved to an index (hosts, jobs, tasks, variant dimensions and values),
 * every duration and size is converted, every regex is compiled (POSIX ERE)
 * and every command/env template is checked against the known placeholders.
 * A loaded scenario is immutable and self-contained; free it with
 * fl_scenario_free().
 *
 * Errors: functions return 0 or a negative errno (-EINVAL for anything wrong
 * in the file, -ENOENT when the file is missing, -ENOMEM, ...) and write one
 * line for people into the caller's buffer:
 *     s.yaml:12:5: unknown fault kind 'partiton' (did you mean 'partition'?)
 * The CLI prints it as is and exits 2.
 *
 * Indexes: hosts, jobs, tasks, faults are addressed by their position in the
 * arrays below (int, -1 = "none"/"any" where documented).  A task is
 * addressed either as (job, task-within-job) or by its flat index in
 * s->tasks; fl_scn_task_index() converts.
 *
 * Ownership: every pointer inside struct fl_scenario is owned by it.
 */
#ifndef FL_SCENARIO_H
#define FL_SCENARIO_H

#include "harness/sys/shared_leftovers.h"

#include <regex.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FL_SCN_DEFAULT_WORKDIR fl_default_workdir() /* sys/shared_leftovers.h */
#define FL_SCN_DEFAULT_TIMEOUT_MS 120000
#define FL_SCN_DEFAULT_PORT 2222
#define FL_SCN_DEFAULT_GRACE_MS 2000
#define FL_SCN_MAX_HOSTS \
    2048 /* = FL_FABRIC_MAX_HOSTS: what the run's switch takes (netem/fabric.h) */
#define FL_SCN_HASH_HEX_LEN 16 /* FNV-1a 64 of the file bytes, lower-case hex */

/* A place in the scenario file: 1-based line and column (0:0 = unknown). */
struct fl_scn_loc {
    int line;
    int col;
};

/* ---- hosts ------------------------------------------------------------- */

struct fl_scn_file {
    char *path;    /* relative to the workdir, as written */
    char *content; /* literal bytes (no templates) */
    size_t len;
    struct fl_scn_loc loc;
};

struct fl_scn_dir {
    char *path; /* relative to the workdir, as written */
    struct fl_scn_loc loc;
};

struct fl_scn_host {
    char *name; /* [A-Za-z0-9][A-Za-z0-9_-]*, at most 63 chars */
    struct fl_scn_loc loc;
    uint64_t disk_size;      /* bytes; 0 = no limit */
    struct fl_scn_dir *dirs; /* created before start ("leftovers") */
    size_t n_dirs;
    struct fl_scn_file *files; /* created before start */
    size_t n_files;
    int64_t clock_offset_ms; /* its tasks' wall clock is this far ahead (libfaketime,
                                harness/run/clock_offset.c); 0 unless set */
    bool clock_offset_set;
    int64_t clock_drift_ppm; /* its tasks' wall clock runs this much fast (< 0: slow), in
                                millionths, from the start of the run; 0 unless set */
    bool clock_drift_set;
    /* how its clocks move (harness/faults/clock.c): faultline's vDSO for
     * every program (the default, x86-64), or libfaketime for programs that
     * read the clock through the dynamic C library (`clock_via: libc`) */
    enum { FL_SCN_CLOCK_VDSO = 0, FL_SCN_CLOCK_LIBC } clock_via;
    bool privileged; /* its tasks are the machine's root (harness/sys/userns.c) */
    bool disk_fs;    /* disk.fs: its disk served through the faultline filesystem for
                        the whole run (as a disk fault by path does), so that every
                        program's syncs are seen (harness/faults/disk_fs.c) */
};

/* A path mounted into several hosts (models NFS). */
struct fl_scn_shared {
    char *path; /* relative to the workdir */
    int *hosts; /* host indexes, no duplicates */
    size_t n_hosts;
    struct fl_scn_loc loc;
};

/* ---- jobs and tasks ---------------------------------------------------- */

struct fl_scn_env {
    char *key;             /* [A-Za-z_][A-Za-z0-9_]*, not FAULTLINE_* */
    char *value;           /* a template (see harness/scenario/template.h) */
    struct fl_scn_loc loc; /* of the value */
};

struct fl_scn_job {
    char *name; /* [a-z][a-z0-9_]* */
    struct fl_scn_loc loc;
    int *task_hosts; /* host index of each task; n_tasks >= 1 */
    size_t n_tasks;
    size_t first_task; /* flat index of task 0 in s->tasks */
    char *command;     /* template: run.<job>.command or run.command; a folded
                          (>) scalar is joined into one line, trailing
                          newlines are dropped (see template.h for how it runs) */
    struct fl_scn_loc command_loc;
    struct fl_scn_env *env; /* run.env merged with run.<job>.env (job wins) */
    size_t n_env;
    struct fl_scn_final *final; /* a final: entry (its one task runs at the end);
                                   NULL for a job of cluster: */
};

/* Flattened: jobs in file order, tasks in list order within each job. */
struct fl_scn_task {
    int job;    /* job index */
    int index;  /* task index within the job */
    int host;   /* host index */
    int port;   /* run.port + index of this task among the tasks on its host */
    bool chief; /* true for exactly one task: s->chief_task */
    bool final; /* the task of a final: entry (its job's final is set) */
};

struct fl_scn_run {
    int base_port;  /* default FL_SCN_DEFAULT_PORT */
    bool stop_all;  /* stop_when omitted or "all": every job */
    int *stop_jobs; /* job indexes when !stop_all */
    size_t n_stop_jobs;
    int64_t grace_ms; /* default FL_SCN_DEFAULT_GRACE_MS */
};

/* ---- variants and selectors -------------------------------------------- */

/* Bytes of a variant's name ("k=v,k2=v2"), with the NUL; longer names are
 * refused when the scenario loads. */
#define FL_SCN_VARIANT_NAME_MAX 512

struct fl_scn_dim {
    char *key;     /* [a-z_][a-z0-9_]*, also a placeholder name */
    char **values; /* n_values >= 1, no duplicates */
    size_t n_values;
    struct fl_scn_loc loc;
};

/* One "dimension = value" condition of a selector. */
struct fl_scn_sel_term {
    int dim;
    int value;
};

/*
 * A set of variants.  n_terms == 0 matches every variant ("all").  Otherwise
 * a variant matches when, for every dimension named by some term, its value
 * is one of the values the terms give for that dimension (OR within a
 * dimension, AND across dimensions).  Selectors written in the file never
 * name a dimension twice; filters built from several --variant options may.
 */
struct fl_scn_selector {
    struct fl_scn_sel_term *terms;
    size_t n_terms;
    char *text; /* as written ("all", "legacy", "k=v,k2=v2") */
    struct fl_scn_loc loc;
};

/* ---- final: ------------------------------------------------------------ */

/*
 * A final: entry (a check run once stop_when is met, every fault healed and
 * every host up; harness/engine/final.c).  It is a job of one task, after
 * the jobs of cluster: in s->jobs (and its task after theirs in s->tasks).
 */
#define FL_SCN_DEFAULT_FINAL_TIMEOUT_MS 60000
struct fl_scn_final {
    struct fl_scn_loc loc; /* of its name */
    int64_t timeout_ms;    /* killed (and failed) after this; default 60 s */
    bool has_variant;      /* runs only in the variants 'variant' matches */
    struct fl_scn_selector variant;
};

/* ---- faults ------------------------------------------------------------ */

struct fl_scn_kv {
    char *key;
    char *value;
};

/*
 * A compiled POSIX ERE (regcomp REG_EXTENDED | REG_NEWLINE), matched per
 * line.  src is the text as written; \d and \D were rewritten to [0-9] and
 * [^0-9] (and \d \w \s inside brackets) before compiling.
 */
struct fl_scn_regex {
    char *src;  /* NULL = not set */
    regex_t re; /* valid when src != NULL */
    struct fl_scn_loc loc;
};

enum fl_scn_trigger_kind {
    FL_SCN_TRIG_AT = 1, /* at: <duration> since start */
    FL_SCN_TRIG_EVENT,  /* after: {event:, host:, job:, count:, where:} */
    FL_SCN_TRIG_LOG,    /* on_log: {host:, job:, match:, count:} */
};

struct fl_scn_trigger {
    enum fl_scn_trigger_kind kind;
    struct fl_scn_loc loc;
    int64_t at_ms;           /* AT */
    char *event;             /* EVENT: event kind, e.g. "save.shard_written" */
    int host;                /* EVENT/LOG: host index, -1 = any */
    int job;                 /* EVENT/LOG: job index, -1 = any */
    int task;                /* EVENT/LOG: task within job ("job: ps:1"), -1 = any */
    unsigned count;          /* EVENT/LOG: fire on the count-th match (over every task
                                passing the filters); default 1 */
    struct fl_scn_kv *where; /* EVENT: every key must be present with this value */
    size_t n_where;
    struct fl_scn_regex match; /* LOG: matched against each output line (stdout and stderr) */
};

enum fl_scn_target_kind {
    FL_SCN_TGT_HOST = 1, /* a host name: every task on the host */
    FL_SCN_TGT_TASK,     /* "job:task" or "chief": one task */
};

/*
 * A host or target written '{event.KEY}' in a fault triggered by `after:`
 * (scenarios/README.md, "Targets from the event"): its value is attribute
 * KEY of the event that fires the fault.  In the loaded scenario such a host
 * index is FL_SCN_HOST_EVENT (a target: kind HOST, host FL_SCN_HOST_EVENT,
 * task -1) and the fault has from_event set; the scheduler resolves the
 * fault's value again when the event comes (fl_scn_fault_resolve,
 * harness/load/load.h) and applies that.
 */
#define FL_SCN_HOST_EVENT (-2)

struct fl_scn_target {
    enum fl_scn_target_kind kind;
    int host;   /* HOST: host index; TASK: the task's host */
    int task;   /* TASK: flat task index; HOST: -1 */
    bool chief; /* written as "chief" */
    struct fl_scn_loc loc;
};

enum fl_scn_action_kind {
    FL_SCN_ACT_KILL = 1,   /* target + signal */
    FL_SCN_ACT_PAUSE,      /* target; resumed after for_ms (if set) */
    FL_SCN_ACT_RESTART,    /* host: down and up, same disk, its tasks restarted */
    FL_SCN_ACT_REPLACE,    /* host: same with a fresh empty disk */
    FL_SCN_ACT_CRASH_HOST, /* host: every process at once; with for_ms comes back (restart) */
    FL_SCN_ACT_PARTITION,  /* groups (both ways) or from -> to (one way) */
    FL_SCN_ACT_LIMIT,      /* host + threads (pids), fds (rlimit), memory (cgroup) */
    FL_SCN_ACT_DISK,       /* target + disk: a libfiu failure point in its processes */
    FL_SCN_ACT_LINK,       /* link: loss, rate, down or flap (netem/link.h) */
    FL_SCN_ACT_CORRUPT,    /* host + rest: bytes of files on its disk changed */
    FL_SCN_ACT_TRUNCATE,   /* host + rest: files on its disk cut to a size */
    FL_SCN_ACT_CLOCK,      /* host: its clocks offset or drifting (params) */
    FL_SCN_ACT_CLOCK_JUMP, /* host: its clocks step (params) */
    FL_SCN_ACT_COUNT       /* one more than the last: the size of the table of kinds
                              (harness/faults/kinds.c) */
};

/*
 * CORRUPT, TRUNCATE: files at rest on a host's disk changed at the moment
 * the fault fires (harness/faults/at_rest.c), once (no heal): every file the glob
 * `path` matches, relative to the host's workdir, gets `bytes` bytes at
 * offsets drawn from the run's seed flipped (CORRUPT) or is cut to `size`
 * bytes (TRUNCATE).
 */
#define FL_SCN_REST_PATH_MAX 256
struct fl_scn_rest {
    char path[FL_SCN_REST_PATH_MAX]; /* glob, relative to the workdir, no '..' */
    uint64_t bytes;                  /* CORRUPT: bytes changed per file, >= 1 */
    uint64_t size;                   /* TRUNCATE: the size each file is cut to */
};

/*
 * DISK: a libfiu failure point enabled in every process of the target's
 * tasks (harness/faults/disk.c): a call of libfiu's POSIX preload
 * (call: write -> posix/io/rw/write) or a point a program names itself
 * (point: psrt/save/shard_write).  The failing call returns its error value
 * with errno = err.
 */
#define FL_SCN_DISK_POINT_MAX 128
struct fl_scn_disk {
    char point[FL_SCN_DISK_POINT_MAX]; /* libfiu name of the failure point */
    char call[32];                     /* the call as written ("write"); "" for point: */
    int err;                           /* errno of the failing call; default EIO */
    double probability;                /* 0 < p <= 1; 1 = every call fails */
    /* Instead of an errno (call: only; point is then "faultline/delay/CALL"
     * or "faultline/short/CALL", checked by fl_fiu_preload.so): */
    int64_t delay_us;     /* > 0: the call is delayed this long, then made */
    uint64_t short_bytes; /* > 0: a write writes at most this many bytes */
    unsigned short_ppm;   /* > 0: a write writes this fraction (ppm) of what it was asked */
    /* path: given (fs): the fault is a rule of the faultline filesystem under
     * the host's disk (harness/faults/disk_fs.c, fusedisk/), for every
     * program: the operations in ops (enum fl_fd_op) on the disk's paths
     * that match glob (relative to the workdir); call and point are "". */
    bool fs;
    char glob[256];
    unsigned ops;
};

/*
 * LINK.  Which frames: BETWEEN: between any two hosts of action.from (both
 * ways; at least two); ONEWAY: from any of action.from to any of action.to;
 * HOST: every frame to or from action.host (its port on the switch).
 */
enum fl_scn_link_scope {
    FL_SCN_LINK_BETWEEN = 1,
    FL_SCN_LINK_ONEWAY,
    FL_SCN_LINK_HOST,
};

struct fl_scn_link {
    enum fl_scn_link_scope scope;
    unsigned loss_bp;  /* hundredths of a percent dropped, 1..10000; 0 = none */
    uint64_t rate_bit; /* bit/s, 0 = none (BETWEEN, ONEWAY) */
    bool down;         /* HOST: the port is down */
    int64_t flap_ms;   /* HOST: down and up by turns, each half of this period; 0 = none */
    /* the userspace emulator (netem/emu.h); emu says whether any is set */
    bool emu;
    int64_t delay_ms, jitter_ms;                   /* jitter <= delay */
    unsigned reorder_bp, duplicate_bp, corrupt_bp; /* hundredths of a percent */
    unsigned burst; /* loss: {p, burst}: Gilbert loss of loss_bp, mean run burst; 0 = plain loss */
};

/*
 * CRASH_HOST: what the host's disk keeps of what its processes wrote.  KEEP
 * (the default): everything, as if the disk had been written through.
 * LOSE: only what was made durable (fsync and friends, strict POSIX), by the
 * crash-consistency layer (harness/faults/durable.c): files and directory entries
 * come back as they were at their last sync, or at the host's start.
 * TORN: as LOSE, but a file whose content was rolled back keeps a prefix
 * of what was written past its synced content (a write that reached the
 * disk only in part), its length drawn from the run's seed.
 */
enum fl_scn_unsynced {
    FL_SCN_UNSYNCED_KEEP = 0,
    FL_SCN_UNSYNCED_LOSE,
    FL_SCN_UNSYNCED_TORN,
};

/* Does a crash with this mode lose what was not synced (lose, torn)? */
static inline bool fl_scn_unsynced_lost(enum fl_scn_unsynced u)
{
    return u != FL_SCN_UNSYNCED_KEEP;
}

/* A list of host indexes. */
struct fl_scn_hostset {
    int *hosts;
    size_t n;
};

struct fl_scn_action {
    enum fl_scn_action_kind kind;
    struct fl_scn_loc loc;
    struct fl_scn_target target;   /* KILL, PAUSE; also RESTART, REPLACE, CRASH_HOST and
                                      LIMIT, as written (a task there names its host) */
    int signal;                    /* KILL: default SIGKILL */
    enum fl_scn_unsynced unsynced; /* CRASH_HOST: default KEEP */
    int host;                      /* RESTART, REPLACE, CRASH_HOST, LIMIT: target.host; else -1 */
    /*
     * PARTITION.  Both ways (!oneway): traffic between hosts of different
     * groups is dropped in both directions; hosts in no group are unaffected;
     * n_groups >= 2 and a host is in at most one group.  One way (oneway):
     * packets from any host of 'from' to any host of 'to' are dropped.
     */
    bool oneway;
    struct fl_scn_hostset *groups;
    size_t n_groups;
    struct fl_scn_hostset from, to;
    /* LIMIT: at least one of these is set (0 = not limited) */
    long threads;            /* max tasks (threads+processes) on the host (pids cgroup) */
    long fds;                /* max open files per process on the host (RLIMIT_NOFILE) */
    uint64_t memory;         /* max bytes of memory the host's processes use (memory cgroup) */
    struct fl_scn_disk disk; /* DISK (target: host, job:task or chief) */
    struct fl_scn_link link; /* LINK (hosts in from/to, or host) */
    struct fl_scn_rest rest; /* CORRUPT, TRUNCATE (host in host, target) */
    /* A kind's own parsed value, for a kind that keeps one outside the fields
     * above (its parser mallocs it; the scenario frees it with free()). */
    void *params;
};

struct fl_scn_fault {
    struct fl_scn_loc loc; /* of the list item */
    struct fl_scn_trigger trigger;
    struct fl_scn_action action;
    int64_t for_ms;   /* 0 = permanent (no heal); kill: relaunch after; restart/replace: downtime */
    bool has_variant; /* applies only to variants matching 'variant' */
    struct fl_scn_selector variant;
    bool optional;    /* optional: true: no "never fired" note when it does not fire */
    bool from_event;  /* a host or target is '{event.KEY}' (FL_SCN_HOST_EVENT) */
    char *as_written; /* from_event: the kind's value as written, one line, for people */
};

/* ---- expectations ------------------------------------------------------ */

enum fl_scn_exp_target {
    FL_SCN_EXP_ALL = 1, /* every task */
    FL_SCN_EXP_CHIEF,   /* the chief task */
    FL_SCN_EXP_JOB,     /* every task of job 'index' */
    FL_SCN_EXP_TASK,    /* flat task 'index' */
    FL_SCN_EXP_HOST,    /* every task on host 'index' */
};

enum fl_scn_exit_kind {
    FL_SCN_EXIT_UNSET = 0,
    FL_SCN_EXIT_CODE,    /* exited with exactly 'exit_code' */
    FL_SCN_EXIT_NONZERO, /* exited with a non-zero status (not a signal) */
    FL_SCN_EXIT_ANY,     /* any outcome at all */
};

enum fl_scn_signal_kind {
    FL_SCN_SIG_UNSET = 0,
    FL_SCN_SIG_NUMBER, /* killed by exactly 'signal' */
    FL_SCN_SIG_ANY,    /* killed by some signal */
};

/* The checks for one target (all | chief | job | job:task | host). */
struct fl_scn_check {
    enum fl_scn_exp_target target;
    int index;             /* JOB: job, TASK: flat task, HOST: host; else -1 */
    struct fl_scn_loc loc; /* of the target key */
    enum fl_scn_exit_kind exit;
    int exit_code;
    struct fl_scn_loc exit_loc;
    enum fl_scn_signal_kind signal;
    int signal_number;
    struct fl_scn_loc signal_loc;
    struct fl_scn_regex fails_with;      /* non-zero exit or signal AND output matches */
    struct fl_scn_regex log_matches;     /* output (stdout+stderr) has a matching line */
    struct fl_scn_regex log_not_matches; /* no output line matches */
    int core; /* -1 unset, 0 must not, 1 must have been killed by a core-dumping signal */
    struct fl_scn_loc core_loc;
};

struct fl_scn_file_check {
    int host;
    char *path; /* relative to the workdir (or absolute inside the host) */
    bool exists;
    struct fl_scn_loc loc;
};

struct fl_scn_event_check {
    char *event;
    int host; /* -1 = any */
    int job;  /* -1 = any */
    long min; /* default 1 (0 when only max is given) */
    long max; /* -1 = no upper bound */
    struct fl_scn_loc loc;
};

/*
 * expect: checkpoint: checks of a saved checkpoint on a host's disk, after the
 * run (implemented in harness/engine/check_ckpt.c).  Everything is stored inline
 * (fixed-size arrays, no pointers) so that the scenario owns it without
 * extra frees.  Paths are as written: relative to the workdir, or absolute
 * inside the host's workdir or /tmp.
 */
#define FL_SCN_CKPT_PATH_MAX 256  /* bytes of a dir/prefix, with the NUL */
#define FL_SCN_MAX_CKPT_COPIES 16 /* copies: entries per checkpoint check */
#define FL_SCN_MAX_CKPT_CHECKS 4  /* checkpoint checks per expect block */

/* Another copy of (part of) the checkpoint's tensors: a directory holding a
 * bundle with the same name, or one bundle prefix. */
struct fl_scn_ckpt_copy {
    int host;
    char dir[FL_SCN_CKPT_PATH_MAX];    /* "" when prefix is set */
    char prefix[FL_SCN_CKPT_PATH_MAX]; /* "" when dir is set */
    struct fl_scn_loc loc;
};

enum fl_scn_ckpt_step_kind {
    FL_SCN_CKPT_STEP_UNSET = 0,
    FL_SCN_CKPT_STEP_LAST_REPORTED, /* = the step of the chief's last save.done event */
    FL_SCN_CKPT_STEP_NUMBER,        /* = step */
};

struct fl_scn_ckpt_check {
    int host;           /* host index (a task or 'chief' names its host) */
    char host_text[64]; /* as written: "w0", "chief", "worker:0" */
    /* Exactly one of dir / prefix is set (the other is ""):
     * dir: a checkpoint directory whose `checkpoint` state file names the
     * latest checkpoint (model_checkpoint_path); prefix: one bundle. */
    char dir[FL_SCN_CKPT_PATH_MAX];
    char prefix[FL_SCN_CKPT_PATH_MAX];
    bool verify;     /* every index block crc, data file and tensor crc */
    bool restorable; /* every tensor reads back whole; equal, byte for byte,
                        to the same tensor in the copies; global_step (if
                        saved) equals the step in the name */
    struct fl_scn_ckpt_copy copies[FL_SCN_MAX_CKPT_COPIES];
    size_t n_copies;
    enum fl_scn_ckpt_step_kind latest_step; /* dir only */
    long long step;                         /* FL_SCN_CKPT_STEP_NUMBER */
    bool restores_latest;                   /* at least one restore.done from the chief, each at the
                                               step of the last save.done reported before it */
    struct fl_scn_loc loc;                  /* of the checkpoint mapping */
};

/* One block under expect:, applied to every variant its selector matches. */
struct fl_scn_expect {
    struct fl_scn_selector sel;
    struct fl_scn_loc loc;
    struct fl_scn_check *checks;
    size_t n_checks;
    struct fl_scn_file_check *files;
    size_t n_files;
    struct fl_scn_event_check *events;
    size_t n_events;
    struct fl_scn_ckpt_check ckpts[FL_SCN_MAX_CKPT_CHECKS]; /* checkpoint: (inline) */
    size_t n_ckpts;
};

/* ---- the scenario ------------------------------------------------------ */

struct fl_scenario {
    char *path; /* as given to fl_scenario_load */
    char *dir;  /* directory holding the file, absolute */
    char hash[FL_SCN_HASH_HEX_LEN + 1];
    char *text; /* the bytes it was loaded from (hash is theirs), NUL-terminated */
    size_t text_len;
    char *name;  /* [a-z0-9._-]+ */
    char *about; /* "" when absent */
    uint64_t seed;
    bool seed_set;
    int64_t timeout_ms; /* default FL_SCN_DEFAULT_TIMEOUT_MS */
    char *workdir;      /* absolute; default FL_SCN_DEFAULT_WORKDIR */
    bool has_soak;      /* a soak profile: a top-level soak: (not read here) */

    struct fl_scn_host *hosts;
    size_t n_hosts;
    struct fl_scn_shared *shared;
    size_t n_shared;
    struct fl_scn_job *jobs; /* cluster: in file order, then each final: entry */
    size_t n_jobs;
    struct fl_scn_task *tasks; /* the tasks of cluster:, then one per final: entry */
    size_t n_tasks;
    size_t n_finals; /* the last n_finals jobs and tasks are final: entries */
    int chief_task;  /* flat index: task 0 of job "chief" if present,
                        else of job "worker", else of the first job */
    struct fl_scn_run run;
    struct fl_scn_dim *dims;
    size_t n_dims;
    struct fl_scn_fault *faults;
    size_t n_faults;
    struct fl_scn_expect *expects;
    size_t n_expects;
};

/* ---- loading ----------------------------------------------------------- */

/* Frees a scenario the loader made (harness/load/load.h) and all it owns. */
void fl_scenario_free(struct fl_scenario *s);
/* Frees what an action owns (its groups, hosts, params), not the action. */
void fl_scn_action_free(struct fl_scn_action *a);

/*
 * The scenario files under 'path': the file itself when it is a file (any
 * name), else every *.yaml / *.yml below the directory, recursively, sorted
 * by path (byte order).  *out is a malloc'd array of malloc'd paths.
 */
int fl_scenario_list(const char *path, char ***out, size_t *n, char *err, size_t errlen);
void fl_scenario_list_free(char **list, size_t n);

/* ---- lookups ----------------------------------------------------------- */

int fl_scn_host_find(const struct fl_scenario *s, const char *name); /* index or -1 */
int fl_scn_job_find(const struct fl_scenario *s, const char *name);  /* index or -1 */
/* The job whose placeholder "<job>_hosts" or "<job>_count" is name[0..len), or
 * -1; *count (when not NULL) says which of the two. */
int fl_scn_job_placeholder(const struct fl_scenario *s, const char *name, size_t len, bool *count);
/* Flat task index of (job, task within job), or -1. */
int fl_scn_task_index(const struct fl_scenario *s, int job, int task);
/* "ps:1" */
const char *fl_scn_task_name(const struct fl_scenario *s, int task, char *buf, size_t len);
/* Does the check's target include this flat task?  all, chief and a host
 * cover the tasks of cluster: only; a final is covered by its own name. */
bool fl_scn_check_covers(const struct fl_scenario *s, const struct fl_scn_check *c, int task);

const char *fl_scn_trigger_kind_name(enum fl_scn_trigger_kind k); /* "at", "after", "on_log" */
/* "ENOSPC" for ENOSPC (the errno names a disk fault accepts); NULL if unknown. */
const char *fl_scn_errno_name(int err);
/* "SIGKILL" for 9; NULL if unknown. */
const char *fl_scn_signal_name(int sig);
/* "SIGTERM", "TERM", "15" -> 15; -EINVAL if unknown. */
int fl_scn_signal_parse(const char *s);

/* "250ms", "2s", "1m", "1.5s", "1h", "3" (seconds) -> milliseconds. */
int fl_scn_duration_parse(const char *s, int64_t *ms);
/* "4096", "512K", "64M", "1G", "2T" (binary multiples; "MiB"/"MB" accepted) -> bytes. */
int fl_scn_size_parse(const char *s, uint64_t *bytes);
/* "10%", "-0.5%", "+200ppm" -> millionths (clock_drift). */
int fl_scn_drift_parse(const char *s, int64_t *ppm);

/* ---- variants ---------------------------------------------------------- */

/*
 * Variants are the cartesian product of the dimensions, in file order, the
 * last dimension varying fastest: with protocol: [legacy, robust] and
 * threads: [pool, per_request] variant 0 is legacy/pool, 1 legacy/per_request,
 * 2 robust/pool, 3 robust/per_request.  A scenario without variants has
 * exactly one variant, named "default".
 */
size_t fl_scn_variant_count(const struct fl_scenario *s);
/* Value index of dimension 'dim' in variant 'v'. */
int fl_scn_variant_value(const struct fl_scenario *s, size_t v, size_t dim);
/* Value string of dimension 'dim' in variant 'v'. */
const char *fl_scn_variant_value_str(const struct fl_scenario *s, size_t v, size_t dim);
/* Value of the dimension with this key in variant v, or NULL. */
const char *fl_scn_variant_lookup(const struct fl_scenario *s, size_t v, const char *key);
/* "protocol=legacy,threads=pool" or "default"; returns buf (truncated if short). */
const char *fl_scn_variant_name(const struct fl_scenario *s, size_t v, char *buf, size_t len);

/*
 * Parses a selector: "all", a bare value of some dimension ("legacy"; an
 * error if that value belongs to several dimensions), or "k=v[,k2=v2...]".
 * Returns -EINVAL on bad syntax or an unknown value, -ENOENT for an unknown
 * key or when the scenario has no variants at all (so that a CLI running a
 * directory can skip scenarios a --variant does not apply to), with a
 * message naming it and suggesting the closest valid name.
 * 'sel' is zeroed first; free with fl_scn_selector_free().
 */
int fl_scn_selector_parse(const struct fl_scenario *s, const char *text,
                          struct fl_scn_selector *sel, char *err, size_t errlen);
/*
 * Adds the terms of one --variant option ("k=v", "k=v,k2=v2" or a bare
 * value) to a filter (start from a zeroed struct).  Several options naming
 * the same key select either value.  Errors as fl_scn_selector_parse (the
 * message names the option, e.g. "--variant protocol=legasy: unknown value
 * 'legasy' for 'protocol' (did you mean 'legacy'?)").
 */
int fl_scn_variant_filter_add(const struct fl_scenario *s, struct fl_scn_selector *filter,
                              const char *spec, char *err, size_t errlen);
bool fl_scn_selector_match(const struct fl_scenario *s, const struct fl_scn_selector *sel,
                           size_t v);
void fl_scn_selector_free(struct fl_scn_selector *sel);

/* Does this fault apply in variant v? */
bool fl_scn_fault_applies(const struct fl_scenario *s, const struct fl_scn_fault *f, size_t v);
/* Is flat task t a final: entry's, and does it run in variant v? */
bool fl_scn_final_applies(const struct fl_scenario *s, int task, size_t v);

/* ---- templates for one task -------------------------------------------- */

/* What the engine knows at run time and the file does not. */
struct fl_scn_run_ctx {
    const char *run_id;
    uint64_t seed;
    const char *bin;               /* directory of faultline's binary */
    const char *const *host_addrs; /* dotted address per host index; NULL -> "" */
};

/*
 * Expands a template (a job's command or an env value) for flat task 'task'
 * in variant v.  Placeholders: {job} {task} {host} {addr} {port} {chief}
 * {<job>_hosts} ("host:port,..." of every task of that job, in task order)
 * {<job>_count} {run_id} {seed} {workdir} {bin} {scenario_dir} and every
 * variant key.  *out is malloc'd.  Errors name the placeholder.
 */
int fl_scn_expand(const struct fl_scenario *s, int task, size_t v, const struct fl_scn_run_ctx *ctx,
                  const char *tmpl, char **out, char *err, size_t errlen);

#endif
