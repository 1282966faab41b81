/*
 * process.c: the fault kinds that hit a task's processes, `kill` and
 * `pause`, on one task ("ps:0", "chief") or every task of a host.
 *
 *   kill   signal every process of each target task: all of the task's
 *          cgroup when it has one (a pause fault of the run targets it),
 *          else its process group; a frozen task is thawed after the signal.
 *          Heal (for:): start each again, once its killed process has
 *          exited (never a second copy beside one still shutting down).
 *   pause  freeze each target task's freezer cgroup (every process of the
 *          task, whatever its session), waiting until frozen; SIGSTOP of
 *          the process group where the machine has no freezer.  Heal: thaw,
 *          or SIGCONT.  The run makes the cgroups before the tasks start.
 */
#include "harness/faults/kind.h"
#include "harness/scenario/load_ctx.h"

#include <signal.h>
#include <stdio.h>

/* A task ("ps:0", "chief") or a host: every task on it. */
static int target_parse(struct fl_scn_vctx *c, const ynode *fault, const ynode *key, const ynode *v,
                        struct fl_scn_action *a)
{
    a->signal = SIGKILL;
    return fl_scn_resolve_target(c, v, key->value, &a->target);
}

/* ---- kill ---------------------------------------------------------------- */

/* kill: TARGET, with signal: NAME (default SIGKILL) */
static int kill_parse(struct fl_scn_vctx *c, const ynode *fault, const ynode *key, const ynode *v,
                      struct fl_scn_action *a)
{
    int rc = target_parse(c, fault, key, v, a);
    const ynode *sig = fl_scn_yaml_get(fault, "signal", NULL);
    if (rc < 0 || !sig)
        return rc;
    if ((rc = fl_scn_want(c, sig, FL_YN_SCALAR, "'signal'")) < 0)
        return rc;
    return fl_scn_get_signal(c, sig, &a->signal);
}

static int kill_one(struct fl_run *r, struct fault_rt *fr, int task, char *err, size_t errlen)
{
    struct proc *p = r->tasks[task].cur;
    if (!p || !p->running)
        return 0;
    int sig = fr->f->action.signal ? fr->f->action.signal : SIGKILL;
    if (p->stopped)
        fl_run_signal_proc(r, p, SIGCONT);
    if (sig != SIGCONT)
        p->fault_sig = sig;
    fl_run_signal_proc(r, p, sig);
    /* a paused task is thawed, like a stopped one continued: after the
     * signal, so that a SIGKILL ends it before it runs again */
    int rc = fl_run_task_freeze(r, task, false, err, errlen);
    /* A stop signal leaves it stopped like a pause: the end of the run (and
     * a later kill) must continue it before SIGTERM can end it. */
    p->stopped = sig == SIGSTOP || sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU;
    if (fr->f->for_ms > 0) {
        r->tasks[task].restart_pending++;
        fl_fault_add_task(fr, task, r->tasks[task].gens);
    }
    return rc;
}

static int kill_apply(struct fl_run *r, struct fault_rt *fr, char *detail, size_t dlen, char *err,
                      size_t errlen)
{
    return fl_fault_for_tasks(r, &fr->f->action.target, kill_one, fr, err, errlen);
}

static int kill_heal(struct fl_run *r, struct fault_rt *fr, bool restart, char *err, size_t errlen)
{
    for (size_t i = 0; i < fr->ntasks; i++) {
        int t = fr->tasks[i];
        const struct host_rt *hr = &r->hosts[r->s->tasks[t].host];
        if (r->tasks[t].restart_pending > 0)
            r->tasks[t].restart_pending--;
        /* Healed while its host is down and coming back: the task is
         * started with the host's other tasks when it is up (one pending
         * start for fl_fault_restart_tasks_on), unless it was started since. */
        if (restart && hr->h.state != FL_HOST_UP && hr->comes_back &&
            r->tasks[t].gens == fr->starts[i]) {
            if (r->tasks[t].restart_pending == 0)
                r->tasks[t].restart_pending = 1;
            continue;
        }
        if (!restart || hr->h.state != FL_HOST_UP)
            continue;
        if (r->tasks[t].gens != fr->starts[i])
            continue; /* started again since (its host restarted) */
        /* A relaunch, never a second copy beside a process that is still
         * shutting down (or ignored the signal): wait for it. */
        if (r->tasks[t].cur && r->tasks[t].cur->running)
            r->tasks[t].relaunch_on_exit = true;
        else
            fl_run_start_task(r, t);
    }
    return 0;
}

static void kill_detail(const struct fl_run *r, const struct fault_rt *fr, char *buf, size_t len)
{
    int sig = fr->f->action.signal ? fr->f->action.signal : SIGKILL;
    snprintf(buf, len, "signal=%s", fl_scn_signal_name(sig) ?: "?");
}

static const char *const kill_keys[] = {"signal", NULL};

const struct fl_fault_kind fl_kind_kill = {
    .kind = FL_SCN_ACT_KILL,
    .name = "kill",
    .parse = kill_parse,
    .keys = kill_keys,
    .soak_target = true,
    .detail = kill_detail,
    .apply = kill_apply,
    .heal = kill_heal,
};

/* ---- pause --------------------------------------------------------------- */

/* Every task a pause targets gets its freezer cgroup before it starts. */
static int pause_init(struct fl_run *r, char *err, size_t errlen)
{
    int rc = 0;
    for (size_t f = 0; rc >= 0 && f < r->nfaults; f++) {
        const struct fl_scn_action *a = &r->faults[f].f->action;
        if (a->kind != FL_SCN_ACT_PAUSE)
            continue;
        for (size_t t = 0; rc >= 0 && t < r->s->n_tasks; t++)
            if (fl_fault_may_cover(r, &a->target, (int)t))
                rc = fl_run_task_cgroup(r, (int)t);
    }
    if (rc < 0)
        snprintf(err, errlen, "%s", r->error);
    return rc;
}

static int pause_one(struct fl_run *r, struct fault_rt *fr, int task, char *err, size_t errlen)
{
    struct task_rt *tr = &r->tasks[task];
    struct proc *p = tr->cur;
    if (!p || !p->running)
        return 0;
    if (tr->has_cgroup) {
        if (tr->frozen)
            return 0; /* paused already, by another fault */
        int rc = fl_run_task_freeze(r, task, true, err, errlen);
        if (tr->frozen)
            fl_fault_add_task(fr, task, tr->gens);
        return rc;
    }
    if (p->stopped)
        return 0;
    fl_run_signal_proc(r, p, SIGSTOP);
    p->stopped = true;
    fl_fault_add_task(fr, task, tr->gens);
    return 0;
}

static int pause_apply(struct fl_run *r, struct fault_rt *fr, char *detail, size_t dlen, char *err,
                       size_t errlen)
{
    return fl_fault_for_tasks(r, &fr->f->action.target, pause_one, fr, err, errlen);
}

static int pause_heal(struct fl_run *r, struct fault_rt *fr, bool restart, char *err, size_t errlen)
{
    int rc = 0;
    for (size_t i = 0; i < fr->ntasks; i++) {
        int t = fr->tasks[i];
        if (r->tasks[t].gens != fr->starts[i])
            continue; /* started again since: not the process this paused */
        if (r->tasks[t].has_cgroup) {
            int x = fl_run_task_freeze(r, t, false, rc < 0 ? NULL : err, errlen);
            if (x < 0 && rc == 0)
                rc = x;
            continue;
        }
        struct proc *p = r->tasks[t].cur;
        if (p && p->running && p->stopped) {
            fl_run_signal_proc(r, p, SIGCONT);
            p->stopped = false;
        }
    }
    return rc;
}

const struct fl_fault_kind fl_kind_pause = {
    .kind = FL_SCN_ACT_PAUSE,
    .name = "pause",
    .lasting = true,
    .parse = target_parse,
    .soak_target = true,
    .init = pause_init,
    .apply = pause_apply,
    .heal = pause_heal,
};
