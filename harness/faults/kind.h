/*
 * kind.h: a fault kind as one unit.  Each kind (kill, partition, disk, ...)
 * is one descriptor, defined in the file of its family (process.c,
 * machine.c, partition.c, link.c, limit.c, disk.c, at_rest.c), and listed
 * once in the table of kinds.c, by its enum fl_scn_action_kind.  The loader
 * (harness/load/), the scheduler (harness/engine/schedule.c), the soak
 * profile (harness/soak/) and the engine's set-up and tear-down iterate that
 * table; none of them names a kind.
 *
 * Adding a kind: its enum value in harness/scenario/scenario.h, a new file
 * here with its descriptor, one row in kinds.c (docs/architecture.md).
 *
 * Every function is optional (NULL: nothing to do), and each gets the run
 * (harness/run/run.h), never the engine.  Errors: 0 or -errno with err
 * filled with one line for people (the scheduler adds which fault it was).
 */
#ifndef FL_FAULT_KIND_H
#define FL_FAULT_KIND_H

#include "harness/run/run.h"

#include "harness/scenario/load_ctx.h"

struct fl_fault_kind {
    enum fl_scn_action_kind kind;
    const char *name; /* as written in scenario files: "crash_host" */

    /* ---- loading (harness/load/faults.c) ---- */
    /* Reads the kind's value (the node after "NAME:") and the fault's own
     * keys of the kind (in fault, the whole fault's mapping; key is the
     * kind's name as written) into a, whose kind, loc and host (-1) are set.  Errors through
     * fl_scn_verr. */
    int (*parse)(struct fl_scn_vctx *c, const ynode *fault, const ynode *key, const ynode *value,
                 struct fl_scn_action *a);
    const char *const *keys; /* the fault's keys only this kind reads ("signal"),
                                NULL-terminated; NULL: none */
    const char *keys_note;   /* why, when another kind's fault has one of them */
    const char *no_for;      /* `for:` does not apply, because (NULL: it does) */
    bool soak_target;        /* a soak profile's entry lists targets to draw
                                from (its value is a host or task), not a value */

    /* ---- running ---- */
    bool at_setup; /* an `at: 0` fault fires before any task starts */
    /* A fault of the kind without for: holds until undone (a partition, a
     * pause, a limit): before the final: checks run, heal undoes it.  Not
     * for a one-off event (a kill, a host restarted or crashed: the engine
     * brings a host still down up itself). */
    bool lasting;
    /* Once per run whose variant has a fault of the kind, before set-up
     * (the run's faults are in r->faults): what the run needs for it (host
     * cgroups, a preload, state in r->kind_state[kind]). */
    int (*init)(struct fl_run *r, char *err, size_t errlen);
    /* Init runs also when this says so (a host option the kind serves,
     * in a run without a fault of the kind); NULL: never. */
    bool (*needed)(const struct fl_run *r);
    /* The run is ending, before its processes are killed and reaped: what
     * the kind must say or stop while they live (a helper process of its
     * own, which the reaping would wait for); may set the run's error. */
    void (*stopping)(struct fl_run *r);
    /* At the end of every run, before the fabric goes: undoes init. */
    void (*free)(struct fl_run *r);
    /* A process on host (a task's, `faultline shell`'s) exists and waits
     * to exec (fl_spawn.before_exec): a tracer takes it now.  0 or -errno
     * with err filled. */
    int (*spawned)(struct fl_run *r, int host, pid_t pid, char *err, size_t errlen);
    /* Adds to a task's env being built (room for 4 more at *k, for each kind). */
    int (*task_env)(struct fl_run *r, int task, char **env, size_t *k, char *err, size_t errlen);
    int (*host_starting)(struct fl_run *r, int host, char *err, size_t errlen);
    void (*host_started)(struct fl_run *r, int host);

    /* What the fault hits, for people ("b", "ps:0", "[a]|[b,c]"); NULL: its
     * target as written (a host or a task). */
    void (*target)(const struct fl_run *r, const struct fl_scn_action *a, char *buf, size_t len);
    /* The detail recorded with the fault before it fires ("signal=SIGKILL"). */
    void (*detail)(const struct fl_run *r, const struct fault_rt *fr, char *buf, size_t len);
    /* Applies the fault now; may append what it did to detail.  Setting
     * fr->tick_at keeps it ACTIVE and calls tick when that time comes. */
    int (*apply)(struct fl_run *r, struct fault_rt *fr, char *detail, size_t dlen, char *err,
                 size_t errlen);
    void (*tick)(struct fl_run *r, struct fault_rt *fr, int64_t now);
    /* Undoes it; restart is false when the run is ending (start nothing). */
    int (*heal)(struct fl_run *r, struct fault_rt *fr, bool restart, char *err, size_t errlen);
};

/* kinds.c: every kind, by its enum value (index 0 unused). */
extern const struct fl_fault_kind *const fl_fault_kinds[FL_SCN_ACT_COUNT];
/* The kind of a fault; never NULL for a loaded scenario. */
const struct fl_fault_kind *fl_fault_kind_of(const struct fl_scn_action *a);
/* "kill", "pause", ...: a kind's name; "?" for a value outside the table. */
const char *fl_scn_action_kind_name(enum fl_scn_action_kind k);
/* The kind named name, or NULL. */
const struct fl_fault_kind *fl_fault_kind_find(const char *name);

/* "kill, pause, ..., corrupt<last_sep>truncate", for messages. */
const char *fl_fault_kind_list(char *buf, size_t len, const char *last_sep);

/* Shared by the kinds (common.c). */
/* Notes that fr hit task (its start count now), to restart or resume it. */
void fl_fault_add_task(struct fault_rt *fr, int task, int starts);
/* Calls fn for every task the target covers; the first error, err filled. */
typedef int (*fl_fault_task_fn)(struct fl_run *r, struct fault_rt *fr, int task, char *err,
                                size_t errlen);
int fl_fault_for_tasks(struct fl_run *r, const struct fl_scn_target *t, fl_fault_task_fn fn,
                       struct fault_rt *fr, char *err, size_t errlen);
/* Does the target cover task? */
bool fl_fault_covers(const struct fl_run *r, const struct fl_scn_target *t, int task);
/* Might it, once applied?  A target '{event.KEY}' (FL_SCN_HOST_EVENT) might
 * be any task: what a kind prepares before the run (a cgroup, a preload)
 * goes to each of them.  Once the fault fires, its target is resolved. */
bool fl_fault_may_cover(const struct fl_run *r, const struct fl_scn_target *t, int task);
/* Starts the tasks of host that wait for it (restart_pending). */
void fl_fault_restart_tasks_on(struct fl_run *r, int host);

#endif
