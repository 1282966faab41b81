/*
 * engine/schedule.c: the fault scheduler: which faults fire when, and what applying
 * and healing each one does.
 *
 * Each fault of the scenario that applies to the variant has a state:
 * PENDING (waiting for its trigger) -> ACTIVE (applied, waiting to heal after
 * for:) -> DONE (healed, or applied with no for:).  Triggers: `at` fires when
 * the run's clock passes it (checked on every loop turn and timer tick);
 * `after` counts matching events and fires on the count-th; `on_log` counts
 * matching output lines likewise.  A fault fires at most once.
 *
 * Applying happens synchronously inside the loop turn that saw the trigger,
 * before a SYNC event is answered, so a fault triggered by a sync point lands
 * at exactly that point of the sender's execution.
 *
 * What each action does (heal in brackets, when for: is given):
 *   kill        signal every process of the target's tasks: all of a task's
 *               cgroup when it has one (a pause fault of the run targets
 *               it), else its process group; a frozen task is thawed after
 *               the signal               [start them again, each once its
 *               killed process has exited]
 *   pause       freeze each target task's freezer cgroup (every process of
 *               the task, whatever its session), waiting until frozen;
 *               SIGSTOP of the process group where the machine has no
 *               freezer                         [thaw; SIGCONT]
 *   restart     kill the host's init (all its processes), start the host and
 *               its tasks again on the same disk              [for: = downtime]
 *   replace     same, with a fresh empty disk                  [for: = downtime]
 *   crash_host  kill the host's init; with unsynced: lose, once every process
 *               of it has exited, its disk goes back to what was synced
 *               (durable.c)                                    [restart]
 *   partition   nftables drop rules in the switch              [remove them]
 *   limit       pids.max of the host's cgroup                  [max]
 *   disk        enable a libfiu failure point in every process of the
 *               target's tasks (faults/disk.c)                 [disable it]
 *   link        loss / rate / down in the switch (faults/link.c, netem/link.h)
 *                                                              [remove them]
 *   corrupt     flip bytes of files at rest on the host's disk (at_rest.c)
 *   truncate    cut files at rest on the host's disk (at_rest.c)   [no heal]
 *               flap: down and up by turns every half period, on the loop's
 *               timer, until healed (ACTIVE until the end without for:)
 *
 * A fault still PENDING when the run ends never fired: fl_faults_unfired
 * says which and why (the run's clock, the events and lines that came), so
 * that a misspelt event kind or a regex that matches nothing is not a
 * silent pass.
 */
#include "harness/sys/cgroup.h"
#include "harness/engine/engine_int.h"
#include "harness/record/recorder.h"
#include "harness/base/suggest.h"
#include "harness/engine/trigger.h"
#include "netem/fabric.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *fl_faults_sync_kinds(const struct fl_scenario *s, size_t v, char *buf, size_t len)
{
    size_t n = 0;
    buf[0] = 0;
    for (size_t i = 0; i < s->n_faults; i++) {
        const struct fl_scn_fault *f = &s->faults[i];
        if (f->trigger.kind != FL_SCN_TRIG_EVENT || !fl_scn_fault_applies(s, f, v))
            continue;
        /* skip duplicates */
        char want[80];
        snprintf(want, sizeof want, ",%s,", f->trigger.event);
        char have[1100];
        snprintf(have, sizeof have, ",%s,", buf);
        if (strstr(have, want))
            continue;
        int w = snprintf(buf + n, len - n, "%s%s", n ? "," : "", f->trigger.event);
        if (w < 0 || (size_t)w >= len - n)
            break;
        n += (size_t)w;
    }
    return buf;
}

void fl_faults_init(struct engine *e)
{
    const struct fl_scenario *s = e->s;
    e->faults = calloc(s->n_faults ? s->n_faults : 1, sizeof *e->faults);
    e->nfaults = 0;
    if (e->o->shell_host >= 0)
        return;                 /* a shell applies no faults: none armed, none fire */
    for (size_t i = 0; i < s->n_faults; i++) {
        if (!fl_scn_fault_applies(s, &s->faults[i], e->v))
            continue;
        struct fault_rt *fr = &e->faults[e->nfaults++];
        fr->f = &s->faults[i];
        fr->index = (int)i;
        fr->st = F_PENDING;
        fr->rec_no = -1;
    }
}

/* starts: the task's start count (task_rt.gens) when the fault hit it. */
static void add_task(struct fault_rt *fr, int task, int starts)
{
    fr->tasks = realloc(fr->tasks, (fr->ntasks + 1) * sizeof *fr->tasks);
    fr->starts = realloc(fr->starts, (fr->ntasks + 1) * sizeof *fr->starts);
    fr->starts[fr->ntasks] = starts;
    fr->tasks[fr->ntasks++] = task;
}

static void target_text(const struct engine *e, const struct fl_scn_fault *f, char *buf, size_t len)
{
    const struct fl_scenario *s = e->s;
    const struct fl_scn_action *a = &f->action;
    size_t n = 0;
    buf[0] = 0;
    switch (a->kind) {
    case FL_SCN_ACT_CORRUPT:
    case FL_SCN_ACT_TRUNCATE:
        snprintf(buf, len, "%s", s->hosts[a->host].name);
        break;
    case FL_SCN_ACT_KILL:
    case FL_SCN_ACT_PAUSE:
    case FL_SCN_ACT_DISK:
        if (a->target.kind == FL_SCN_TGT_TASK)
            fl_scn_task_name(s, a->target.task, buf, len);
        else
            snprintf(buf, len, "%s", s->hosts[a->target.host].name);
        break;
    case FL_SCN_ACT_PARTITION:
        if (a->oneway) {
            for (size_t i = 0; i < a->from.n && n < len; i++)
                n += (size_t)snprintf(buf + n, len - n, "%s%s", i ? "," : "", s->hosts[a->from.hosts[i]].name);
            if (n < len)
                n += (size_t)snprintf(buf + n, len - n, "->");
            for (size_t i = 0; i < a->to.n && n < len; i++)
                n += (size_t)snprintf(buf + n, len - n, "%s%s", i ? "," : "", s->hosts[a->to.hosts[i]].name);
        } else {
            for (size_t g = 0; g < a->n_groups && n < len; g++) {
                n += (size_t)snprintf(buf + n, len - n, "%s[", g ? "|" : "");
                for (size_t i = 0; i < a->groups[g].n && n < len; i++)
                    n += (size_t)snprintf(buf + n, len - n, "%s%s", i ? "," : "",
                                          s->hosts[a->groups[g].hosts[i]].name);
                if (n < len)
                    n += (size_t)snprintf(buf + n, len - n, "]");
            }
        }
        break;
    case FL_SCN_ACT_LINK:
        fl_faults_link_target(e, a, buf, len);
        break;
    default:
        snprintf(buf, len, "%s", a->host >= 0 ? s->hosts[a->host].name : "?");
        break;
    }
}

typedef int (*task_fn)(struct engine *, struct fault_rt *, int, char *, size_t);

/* Tasks a kill/pause target covers: the first error, with err filled. */
static int for_target_tasks(struct engine *e, const struct fl_scn_target *t, task_fn fn,
                            struct fault_rt *fr, char *err, size_t errlen)
{
    if (t->kind == FL_SCN_TGT_TASK)
        return fn(e, fr, t->task, err, errlen);
    int rc = 0;
    for (size_t i = 0; i < e->s->n_tasks; i++)
        if (e->s->tasks[i].host == t->host) {
            int r = fn(e, fr, (int)i, rc < 0 ? NULL : err, errlen);
            if (r < 0 && rc == 0)
                rc = r;
        }
    return rc;
}

static int kill_one(struct engine *e, struct fault_rt *fr, int task, char *err, size_t errlen)
{
    struct proc *p = e->tasks[task].cur;
    if (!p || !p->running)
        return 0;
    int sig = fr->f->action.signal ? fr->f->action.signal : SIGKILL;
    if (p->stopped)
        eng_signal_proc(e, p, SIGCONT);
    eng_signal_proc(e, p, sig);
    /* a paused task is thawed, like a stopped one continued: after the
     * signal, so that a SIGKILL ends it before it runs again */
    int rc = eng_task_freeze(e, task, false, err, errlen);
    /* A stop signal leaves it stopped like a pause: the end of the run (and
     * a later kill) must continue it before SIGTERM can end it. */
    p->stopped = sig == SIGSTOP || sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU;
    if (fr->f->for_ms > 0) {
        e->tasks[task].restart_pending++;
        add_task(fr, task, e->tasks[task].gens);
    }
    return rc;
}

static int pause_one(struct engine *e, struct fault_rt *fr, int task, char *err, size_t errlen)
{
    struct task_rt *tr = &e->tasks[task];
    struct proc *p = tr->cur;
    if (!p || !p->running)
        return 0;
    if (tr->has_cgroup) {
        if (tr->frozen)
            return 0;           /* paused already, by another fault */
        int rc = eng_task_freeze(e, task, true, err, errlen);
        if (tr->frozen)
            add_task(fr, task, tr->gens);
        return rc;
    }
    if (p->stopped)
        return 0;
    eng_signal_proc(e, p, SIGSTOP);
    p->stopped = true;
    add_task(fr, task, tr->gens);
    return 0;
}

static void restart_tasks_on(struct engine *e, int host)
{
    for (size_t t = 0; t < e->s->n_tasks; t++)
        if (e->s->tasks[t].host == host && e->tasks[t].restart_pending > 0) {
            e->tasks[t].restart_pending--;
            eng_start_task(e, (int)t);
        }
}

static int apply(struct engine *e, struct fault_rt *fr, char *detail, size_t dlen, char *err,
                 size_t errlen)
{
    const struct fl_scn_action *a = &fr->f->action;
    int rc = 0;
    switch (a->kind) {
    case FL_SCN_ACT_KILL:
        rc = for_target_tasks(e, &a->target, kill_one, fr, err, errlen);
        break;
    case FL_SCN_ACT_PAUSE:
        rc = for_target_tasks(e, &a->target, pause_one, fr, err, errlen);
        break;
    case FL_SCN_ACT_RESTART:
    case FL_SCN_ACT_REPLACE:
    case FL_SCN_ACT_CRASH_HOST: {
        bool comes_back = a->kind != FL_SCN_ACT_CRASH_HOST || fr->f->for_ms > 0;
        bool lose = a->kind == FL_SCN_ACT_CRASH_HOST && a->unsynced == FL_SCN_UNSYNCED_LOSE;
        struct fl_durable_crash dc;
        if (lose)
            fl_durable_crash_begin(e, a->host, &dc);
        eng_host_down(e, a->host, fr, comes_back);
        /* its disk back to what was synced, once nothing of it runs */
        if (lose && (rc = fl_durable_crash_end(e, &dc, detail, dlen, err, errlen)) < 0)
            break;
        if (comes_back && fr->f->for_ms == 0) {
            rc = eng_host_up(e, a->host, a->kind == FL_SCN_ACT_REPLACE);
            if (rc == 0)
                restart_tasks_on(e, a->host);
            else
                snprintf(err, errlen, "%s", e->error);
        }
        break;
    }
    case FL_SCN_ACT_PARTITION:
        if (a->oneway) {
            rc = fl_fabric_block(e->fab, a->from.hosts, a->from.n, a->to.hosts, a->to.n,
                                 &fr->rule_id, err, errlen);
        } else {
            const int **groups = calloc(a->n_groups, sizeof *groups);
            size_t *sizes = calloc(a->n_groups, sizeof *sizes);
            for (size_t g = 0; g < a->n_groups; g++) {
                groups[g] = a->groups[g].hosts;
                sizes[g] = a->groups[g].n;
            }
            rc = fl_fabric_partition(e->fab, (const int *const *)groups, sizes, a->n_groups,
                                     &fr->rule_id, err, errlen);
            free(groups);
            free(sizes);
        }
        break;
    case FL_SCN_ACT_LINK:
        rc = fl_faults_link_apply(e, fr, eng_now(e), err, errlen);
        break;
    case FL_SCN_ACT_LIMIT:
        rc = fl_limit_apply(e, fr, err, errlen);
        break;
    case FL_SCN_ACT_DISK:
        rc = fl_disk_apply(e, fr, err, errlen);
        break;
    case FL_SCN_ACT_CORRUPT:
    case FL_SCN_ACT_TRUNCATE:
        break;                  /* fire(): fl_at_rest_apply fills the detail */
    }
    return rc;
}

/* heal: undo a fault.  During stop (restart=false) nothing is started again. */
static void heal(struct engine *e, struct fault_rt *fr, bool restart)
{
    const struct fl_scn_action *a = &fr->f->action;
    char err[1024] = "";
    int rc = 0;
    switch (a->kind) {
    case FL_SCN_ACT_KILL:
        for (size_t i = 0; i < fr->ntasks; i++) {
            int t = fr->tasks[i];
            const struct host_rt *hr = &e->hosts[e->s->tasks[t].host];
            if (e->tasks[t].restart_pending > 0)
                e->tasks[t].restart_pending--;
            /* Healed while its host is down and coming back: the task is
             * started with the host's other tasks when it is up (one
             * pending start for restart_tasks_on), unless it was started
             * since. */
            if (restart && hr->h.state != FL_HOST_UP && hr->comes_back &&
                e->tasks[t].gens == fr->starts[i]) {
                if (e->tasks[t].restart_pending == 0)
                    e->tasks[t].restart_pending = 1;
                continue;
            }
            if (!restart || hr->h.state != FL_HOST_UP)
                continue;
            if (e->tasks[t].gens != fr->starts[i])
                continue;       /* started again since (its host restarted) */
            /* A relaunch, never a second copy beside a process that is
             * still shutting down (or ignored the signal): wait for it. */
            if (e->tasks[t].cur && e->tasks[t].cur->running)
                e->tasks[t].relaunch_on_exit = true;
            else
                eng_start_task(e, t);
        }
        break;
    case FL_SCN_ACT_PAUSE:
        for (size_t i = 0; i < fr->ntasks; i++) {
            int t = fr->tasks[i];
            if (e->tasks[t].gens != fr->starts[i])
                continue;       /* started again since: not the process this paused */
            if (e->tasks[t].has_cgroup) {
                int r = eng_task_freeze(e, t, false, rc < 0 ? NULL : err, sizeof err);
                if (r < 0 && rc == 0)
                    rc = r;
                continue;
            }
            struct proc *p = e->tasks[t].cur;
            if (p && p->running && p->stopped) {
                eng_signal_proc(e, p, SIGCONT);
                p->stopped = false;
            }
        }
        break;
    case FL_SCN_ACT_RESTART:
    case FL_SCN_ACT_REPLACE:
    case FL_SCN_ACT_CRASH_HOST:
        if (restart) {
            if (eng_host_up(e, a->host, a->kind == FL_SCN_ACT_REPLACE) == 0)
                restart_tasks_on(e, a->host);
        } else {
            for (size_t t = 0; t < e->s->n_tasks; t++)
                if (e->s->tasks[t].host == a->host)
                    e->tasks[t].restart_pending = 0;
        }
        break;
    case FL_SCN_ACT_PARTITION:
        rc = fl_fabric_heal(e->fab, fr->rule_id, err, sizeof err);
        break;
    case FL_SCN_ACT_LINK:
        rc = fl_faults_link_heal(e, fr, err, sizeof err);
        break;
    case FL_SCN_ACT_LIMIT:
        rc = fl_limit_heal(e, fr, err, sizeof err);
        break;
    case FL_SCN_ACT_DISK:
        rc = fl_disk_heal(e, fr, err, sizeof err);
        break;
    case FL_SCN_ACT_CORRUPT:
    case FL_SCN_ACT_TRUNCATE:
        break;                  /* no for: (nothing to undo) */
    }
    if (rc < 0 && restart)
        eng_error(e, "healing fault %d (%s, line %d): %s", fr->index + 1,
                  fl_scn_action_kind_name(a->kind), fr->f->loc.line, err);
    fr->st = F_DONE;
    if (e->rec && fr->rec_no >= 0)
        fl_rec_fault_healed(e->rec, fr->rec_no, eng_now(e));
}

static void fire(struct engine *e, struct fault_rt *fr)
{
    if (fr->st != F_PENDING || e->stopping)
        return;
    char err[1024] = "", target[512], detail[1024] = "";
    target_text(e, fr->f, target, sizeof target);
    const struct fl_scn_action *a = &fr->f->action;
    if (a->kind == FL_SCN_ACT_KILL)
        snprintf(detail, sizeof detail, "signal=%s",
                 fl_scn_signal_name(a->signal ? a->signal : SIGKILL) ?: "?");
    else if (a->kind == FL_SCN_ACT_LIMIT)
        fl_limit_detail(a, detail, sizeof detail);
    else if (a->kind == FL_SCN_ACT_DISK)
        fl_disk_detail(fr, detail, sizeof detail);
    else if (a->kind == FL_SCN_ACT_LINK)
        fl_faults_link_detail(a, detail, sizeof detail);
    if (fr->f->for_ms > 0) {
        size_t n = strlen(detail);
        snprintf(detail + n, sizeof detail - n, "%sfor=%lldms", n ? " " : "",
                 (long long)fr->f->for_ms);
    }
    int64_t now = eng_now(e);
    /* a flap keeps turning until healed, or until the end without for: */
    bool flaps = a->kind == FL_SCN_ACT_LINK && a->link.flap_ms > 0;
    fr->st = fr->f->for_ms > 0 || flaps ? F_ACTIVE : F_DONE;
    fr->heal_at = fr->f->for_ms > 0 ? now + fr->f->for_ms : -1;
    fr->flap_next = -1;
    int rc = a->kind == FL_SCN_ACT_CORRUPT || a->kind == FL_SCN_ACT_TRUNCATE
                 ? fl_at_rest_apply(e, fr, detail, sizeof detail, err, sizeof err)
                 : apply(e, fr, detail, sizeof detail, err, sizeof err);
    if (rc < 0)
        eng_error(e, "fault %d (%s %s, line %d): %s", fr->index + 1,
                  fl_scn_action_kind_name(a->kind), target, fr->f->loc.line, err);
    if (e->rec) {
        struct fl_rec_fault rf = {.index = fr->index, .kind = fl_scn_action_kind_name(a->kind),
                                  .target = target, .detail = detail[0] ? detail : NULL,
                                  .applied_ms = now, .error = rc < 0 ? err : NULL};
        fr->rec_no = fl_rec_fault_applied(e->rec, &rf);
    }
}

void fl_faults_tick(struct engine *e)
{
    int64_t now = eng_now(e);
    for (size_t i = 0; i < e->nfaults; i++) {
        struct fault_rt *fr = &e->faults[i];
        if (fr->st == F_PENDING && fl_trig_due(&fr->f->trigger, now))
            fire(e, fr);
        else if (fr->st == F_ACTIVE && fr->heal_at >= 0 && now >= fr->heal_at)
            heal(e, fr, true);
        else if (fr->st == F_ACTIVE && fr->flap_next >= 0)
            fl_faults_link_flap(e, fr, now);
    }
}

void fl_faults_tick_setup(struct engine *e)
{
    int64_t now = eng_now(e);
    for (size_t i = 0; i < e->nfaults; i++) {
        struct fault_rt *fr = &e->faults[i];
        enum fl_scn_action_kind k = fr->f->action.kind;
        if (fr->st == F_PENDING && fr->f->trigger.kind == FL_SCN_TRIG_AT &&
            now >= fr->f->trigger.at_ms &&
            (k == FL_SCN_ACT_PARTITION || k == FL_SCN_ACT_LIMIT || k == FL_SCN_ACT_DISK ||
             k == FL_SCN_ACT_LINK))
            fire(e, fr);
    }
}

int64_t fl_faults_next_deadline(const struct engine *e)
{
    int64_t next = -1;
    for (size_t i = 0; i < e->nfaults; i++) {
        const struct fault_rt *fr = &e->faults[i];
        int64_t t = -1;
        if (fr->st == F_PENDING && fr->f->trigger.kind == FL_SCN_TRIG_AT)
            t = fr->f->trigger.at_ms;
        else if (fr->st == F_ACTIVE)
            t = fr->heal_at;
        if (t >= 0 && (next < 0 || t < next))
            next = t;
        if (fr->st == F_ACTIVE && fr->flap_next >= 0 && (next < 0 || fr->flap_next < next))
            next = fr->flap_next;
    }
    return next;
}

void fl_faults_on_event(struct engine *e, int host, int job, int task, const struct fl_ev *ev)
{
    for (size_t i = 0; i < e->nfaults; i++) {
        struct fault_rt *fr = &e->faults[i];
        const struct fl_scn_trigger *t = &fr->f->trigger;
        if (fr->st == F_PENDING && fl_trig_event_matches(t, host, job, task, ev) &&
            ++fr->matches >= (t->count ? t->count : 1))
            fire(e, fr);
    }
}

void fl_faults_on_line(struct engine *e, int host, int job, int task, const char *line)
{
    for (size_t i = 0; i < e->nfaults; i++) {
        struct fault_rt *fr = &e->faults[i];
        const struct fl_scn_trigger *t = &fr->f->trigger;
        if (fr->st == F_PENDING && fl_trig_line_matches(t, host, job, task, line) &&
            ++fr->matches >= (t->count ? t->count : 1))
            fire(e, fr);
    }
}

void fl_faults_heal_all(struct engine *e)
{
    for (size_t i = 0; i < e->nfaults; i++)
        if (e->faults[i].st == F_ACTIVE)
            heal(e, &e->faults[i], false);
}

void eng_detail_add(char *buf, size_t len, const char *fmt, ...)
{
    size_t n = strlen(buf);
    if (n + 4 >= len)
        return;
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(buf + n, len - n, fmt, ap);
    va_end(ap);
    if (w < 0 || (size_t)w >= len - n)
        snprintf(buf + len - 4, 4, "...");
}

/* The distinct event kinds that came, for a suggestion; at most n. */
static size_t seen_kinds(const struct engine *e, const char **kinds, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < e->nevents && k < n; i++) {
        size_t j = 0;
        while (j < k && strcmp(kinds[j], e->events[i].kind))
            j++;
        if (j == k)
            kinds[k++] = e->events[i].kind;
    }
    return k;
}

/* Why an EVENT trigger that never reached its count did not: appended. */
static void why_no_event(const struct engine *e, const struct fault_rt *fr, char *buf, size_t len)
{
    const struct fl_scn_trigger *t = &fr->f->trigger;
    unsigned want = t->count ? t->count : 1;
    if (fr->matches > 0) {
        eng_detail_add(buf, len, "only %u of the %u matching events came", fr->matches, want);
        return;
    }
    size_t same = 0;
    for (size_t i = 0; i < e->nevents; i++)
        same += !strcmp(e->events[i].kind, t->event);
    if (same) {
        eng_detail_add(buf, len, "%zu '%s' event%s came, none from the host, job or 'where' "
                       "it names", same, t->event, same == 1 ? "" : "s");
        return;
    }
    const char *kinds[16];
    size_t k = seen_kinds(e, kinds, 16);
    if (!k) {
        eng_detail_add(buf, len, "no process sent any event (a program sends them on "
                       "$FAULTLINE_EVENTS, e.g. with 'faultline emit %s')", t->event);
        return;
    }
    const char *near = fl_suggest(t->event, kinds, k);
    if (near) {
        eng_detail_add(buf, len, "no '%s' event came (did you mean '%s'?)", t->event, near);
        return;
    }
    eng_detail_add(buf, len, "no '%s' event came; events that came:", t->event);
    for (size_t i = 0; i < k; i++)
        eng_detail_add(buf, len, "%s %s", i ? "," : "", kinds[i]);
}

void fl_faults_unfired(const struct engine *e, char *buf, size_t len)
{
    buf[0] = 0;
    for (size_t i = 0; i < e->nfaults; i++) {
        const struct fault_rt *fr = &e->faults[i];
        if (fr->st != F_PENDING)
            continue;
        const struct fl_scn_fault *f = fr->f;
        const struct fl_scn_trigger *t = &f->trigger;
        char target[256];
        target_text(e, f, target, sizeof target);
        eng_detail_add(buf, len, "%sfault %d (%s:%d, %s %s) never fired: ", buf[0] ? "\n" : "",
                       fr->index + 1, e->s->path, f->loc.line,
                       fl_scn_action_kind_name(f->action.kind), target);
        unsigned want = t->count ? t->count : 1;
        if (t->kind == FL_SCN_TRIG_AT ? t->at_ms <= e->res->duration_ms : fr->matches >= want) {
            eng_detail_add(buf, len, "its trigger came only once the run was ending");
            continue;
        }
        switch (t->kind) {
        case FL_SCN_TRIG_AT:
            eng_detail_add(buf, len, "the run ended at %.1fs, before 'at: %lld%s'",
                           (double)e->res->duration_ms / 1000,
                           (long long)(t->at_ms % 1000 ? t->at_ms : t->at_ms / 1000),
                           t->at_ms % 1000 ? "ms" : "s");
            break;
        case FL_SCN_TRIG_EVENT:
            why_no_event(e, fr, buf, len);
            break;
        case FL_SCN_TRIG_LOG:
            if (fr->matches > 0)
                eng_detail_add(buf, len, "only %u of the %u matching lines came", fr->matches,
                               want);
            else
                eng_detail_add(buf, len, "no output line of %s matched '%s'", t->host >= 0 || t->job >= 0
                               ? "the host or job it names" : "any task", t->match.src);
            break;
        }
    }
}
