/*
 * schedule.c: the fault scheduler: which faults fire when, and handing each
 * to its kind (harness/faults/kinds.c) to apply and heal.  Nothing here
 * names a kind: what a kind does is in its own file under harness/faults/.
 *
 * Each fault of the scenario that applies to the variant has a state:
 * PENDING (waiting for its trigger) -> ACTIVE (applied, waiting to heal after
 * for:, or turning on its kind's tick) -> DONE (healed, or applied with no
 * for:).  Triggers: `at` fires when the run's clock passes it (checked on
 * every loop turn and timer tick); `after` counts matching events and fires
 * on the count-th; `on_log` counts matching output lines likewise.  A fault
 * fires at most once.
 *
 * Applying happens synchronously inside the loop turn that saw the trigger,
 * before a SYNC event is answered, so a fault triggered by a sync point lands
 * at exactly that point of the sender's execution.  Kinds marked at_setup
 * (network, limits, disk) fire an `at: 0` fault before any task starts.
 *
 * The kinds' run-wide parts are called from here too: init (for the kinds
 * with a fault in the variant) before set-up, the run's hooks (a task's env,
 * a host starting or started) for every kind, and free at the end.
 *
 * Once stop_when is met no fault fires any more.  When the variant has
 * final: checks, fl_faults_heal_for_final first undoes every fault that
 * still holds, as its for: would have (a killed task starts again, a host
 * comes back with its tasks), and the lasting ones applied without for:
 * (a partition, a pause, a limit, a disk or link fault).
 *
 * A fault aimed by its event (a host '{event.KEY}', from_event) is read
 * again when that event fires it (aim: fl_scn_fault_resolve, with the
 * event's attributes and, for `host`, the sender's host); the result is
 * fr->own, and fr->f points to it from then on, so the kinds see an
 * ordinary fault.  An attribute missing or naming no host is the run's
 * error, naming the fault, the event and the value.
 *
 * A fault still PENDING when the run ends never fired: fl_faults_unfired
 * says which and why (the run's clock, the events and lines that came), so
 * that a misspelt event kind or a regex that matches nothing is not a
 * silent pass, and records each note (unfired_faults); a fault marked
 * optional: true gets none.
 */
#include "harness/base/suggest.h"
#include "harness/base/text.h"
#include "harness/engine/engine_int.h"
#include "harness/engine/trigger.h"
#include "harness/faults/kind.h"
#include "harness/load/load.h"
#include "harness/record/recorder.h"

#include <errno.h>
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
    const struct fl_scenario *s = e->r.s;
    e->r.faults = calloc(s->n_faults ? s->n_faults : 1, sizeof *e->r.faults);
    e->r.nfaults = 0;
    if (e->o->shell_host >= 0)
        return; /* a shell applies no faults: none armed, none fire */
    for (size_t i = 0; i < s->n_faults; i++) {
        if (!fl_scn_fault_applies(s, &s->faults[i], e->r.v))
            continue;
        struct fault_rt *fr = &e->r.faults[e->r.nfaults++];
        fr->f = &s->faults[i];
        fr->index = (int)i;
        fr->st = F_PENDING;
        fr->rec_no = -1;
        fr->tick_at = -1;
    }
}

/* heal: undo a fault.  During stop (restart=false) nothing is started again. */
static void heal(struct engine *e, struct fault_rt *fr, bool restart)
{
    const struct fl_scn_action *a = &fr->f->action;
    const struct fl_fault_kind *k = fl_fault_kind_of(a);
    char err[1024] = "";
    int rc = k->heal ? k->heal(&e->r, fr, restart, err, sizeof err) : 0;
    if (rc < 0 && restart)
        fl_run_error(&e->r, "healing fault %d (%s, line %d): %s", fr->index + 1, k->name,
                     fr->f->loc.line, err);
    fr->st = F_DONE;
    fr->tick_at = -1;
    if (e->r.rec && fr->rec_no >= 0)
        fl_rec_fault_healed(e->r.rec, fr->rec_no, fl_run_now(&e->r));
}

/* The triggering event's attribute KEY; `host` when it has none: the host
 * of the task that sent it. */
struct ev_ctx {
    const struct engine *e;
    const struct fl_ev *ev;
    int host;
};

static const char *ev_attr(void *ctx, const char *key)
{
    const struct ev_ctx *x = ctx;
    const char *v = fl_ev_get(x->ev, key);
    if (!v && !strcmp(key, "host") && x->host >= 0)
        v = x->e->r.s->hosts[x->host].name;
    return v;
}

/* A fault aimed by its event: the fault as the event makes it (fr->own, and
 * fr->f points to it), or a run error naming the fault, the event and what
 * it gave; recorded as a fault that failed to apply. */
static int aim(struct engine *e, struct fault_rt *fr, const struct fl_ev *ev, int host)
{
    const struct fl_scn_fault *f = fr->f;
    const struct fl_fault_kind *k = fl_fault_kind_of(&f->action);
    char err[1024] = "";
    struct ev_ctx x = {.e = e, .ev = ev, .host = host};
    struct fl_scn_fault *own = calloc(1, sizeof *own);
    if (!own)
        abort();
    *own = *f;
    int rc = ev ? fl_scn_fault_resolve(e->r.s, (size_t)fr->index, ev->kind, ev_attr, &x,
                                       &own->action, err, sizeof err)
                : (snprintf(err, sizeof err, "no event to take its hosts from"), -EINVAL);
    if (rc == 0) {
        own->from_event = false;
        fr->own = own;
        fr->f = own;
        return 0;
    }
    free(own);
    fl_run_error(&e->r, "fault %d (%s:%d, %s): %s", fr->index + 1, e->r.s->path, f->loc.line,
                 k->name, err);
    fr->st = F_DONE;
    if (e->r.rec) {
        struct fl_rec_fault rf = {.index = fr->index + 1,
                                  .kind = k->name,
                                  .target = f->as_written,
                                  .applied_ms = fl_run_now(&e->r),
                                  .error = err};
        fr->rec_no = fl_rec_fault_applied(e->r.rec, &rf);
    }
    return rc;
}

static void fire(struct engine *e, struct fault_rt *fr, const struct fl_ev *ev, int host)
{
    /* none once stop_when is met: not while the final: checks run either */
    if (fr->st != F_PENDING || e->state > RUN_RUNNING)
        return;
    if (fr->f->from_event && aim(e, fr, ev, host) < 0)
        return;
    char err[1024] = "", target[512], detail[1024] = "";
    const struct fl_scn_action *a = &fr->f->action;
    const struct fl_fault_kind *k = fl_fault_kind_of(a);
    eng_target_of(&e->r, fr->f, target, sizeof target);
    if (k->detail)
        k->detail(&e->r, fr, detail, sizeof detail);
    if (fr->f->for_ms > 0)
        fl_text_add(detail, sizeof detail, "%sfor=%lldms", detail[0] ? " " : "",
                    (long long)fr->f->for_ms);
    int64_t now = fl_run_now(&e->r);
    fr->st = fr->f->for_ms > 0 ? F_ACTIVE : F_DONE;
    fr->heal_at = fr->f->for_ms > 0 ? now + fr->f->for_ms : -1;
    fr->tick_at = -1;
    eng_reach_before_fire(e, fr); /* a preload's fault on a program it cannot enter */
    int rc = k->apply ? k->apply(&e->r, fr, detail, sizeof detail, err, sizeof err) : 0;
    if (fr->tick_at >= 0)
        fr->st = F_ACTIVE; /* it turns until healed, or until the end without for: */
    if (rc < 0)
        fl_run_error(&e->r, "fault %d (%s %s, line %d): %s", fr->index + 1, k->name, target,
                     fr->f->loc.line, err);
    if (e->r.rec) {
        struct fl_rec_fault rf = {.index = fr->index + 1,
                                  .kind = k->name,
                                  .target = target,
                                  .detail = detail[0] ? detail : NULL,
                                  .applied_ms = now,
                                  .error = rc < 0 ? err : NULL};
        fr->rec_no = fl_rec_fault_applied(e->r.rec, &rf);
    }
}

void fl_faults_tick(struct engine *e)
{
    int64_t now = fl_run_now(&e->r);
    for (size_t i = 0; i < e->r.nfaults; i++) {
        struct fault_rt *fr = &e->r.faults[i];
        const struct fl_fault_kind *k = fl_fault_kind_of(&fr->f->action);
        if (fr->st == F_PENDING && fl_trig_due(&fr->f->trigger, now))
            fire(e, fr, NULL, -1);
        else if (fr->st == F_ACTIVE && fr->heal_at >= 0 && now >= fr->heal_at)
            heal(e, fr, true);
        else if (fr->st == F_ACTIVE && fr->tick_at >= 0 && now >= fr->tick_at && k->tick)
            k->tick(&e->r, fr, now);
    }
}

void fl_faults_tick_setup(struct engine *e)
{
    int64_t now = fl_run_now(&e->r);
    for (size_t i = 0; i < e->r.nfaults; i++) {
        struct fault_rt *fr = &e->r.faults[i];
        if (fr->st == F_PENDING && fr->f->trigger.kind == FL_SCN_TRIG_AT &&
            now >= fr->f->trigger.at_ms && fl_fault_kind_of(&fr->f->action)->at_setup)
            fire(e, fr, NULL, -1);
    }
}

int64_t fl_faults_next_deadline(const struct engine *e)
{
    int64_t next = -1;
    for (size_t i = 0; i < e->r.nfaults; i++) {
        const struct fault_rt *fr = &e->r.faults[i];
        int64_t t = -1;
        if (fr->st == F_PENDING && fr->f->trigger.kind == FL_SCN_TRIG_AT)
            t = fr->f->trigger.at_ms;
        else if (fr->st == F_ACTIVE)
            t = fr->heal_at;
        if (t >= 0 && (next < 0 || t < next))
            next = t;
        if (fr->st == F_ACTIVE && fr->tick_at >= 0 && (next < 0 || fr->tick_at < next))
            next = fr->tick_at;
    }
    return next;
}

void fl_faults_on_event(struct engine *e, int host, int job, int task, const struct fl_ev *ev)
{
    for (size_t i = 0; i < e->r.nfaults; i++) {
        struct fault_rt *fr = &e->r.faults[i];
        const struct fl_scn_trigger *t = &fr->f->trigger;
        if (fr->st == F_PENDING && fl_trig_event_matches(t, host, job, task, ev) &&
            ++fr->matches >= (t->count ? t->count : 1))
            fire(e, fr, ev, host);
    }
}

void fl_faults_on_line(struct engine *e, int host, int job, int task, const char *line)
{
    for (size_t i = 0; i < e->r.nfaults; i++) {
        struct fault_rt *fr = &e->r.faults[i];
        const struct fl_scn_trigger *t = &fr->f->trigger;
        if (fr->st == F_PENDING && fl_trig_line_matches(t, host, job, task, line) &&
            ++fr->matches >= (t->count ? t->count : 1))
            fire(e, fr, NULL, -1);
    }
}

void fl_faults_heal_all(struct engine *e)
{
    for (size_t i = 0; i < e->r.nfaults; i++)
        if (e->r.faults[i].st == F_ACTIVE)
            heal(e, &e->r.faults[i], false);
}

void fl_faults_heal_for_final(struct engine *e)
{
    for (size_t i = 0; i < e->r.nfaults; i++) {
        struct fault_rt *fr = &e->r.faults[i];
        /* A fault without for: that is DONE was applied and never healed
         * (heal comes only to ACTIVE faults, by their for:). */
        bool holds =
            fr->st == F_DONE && fr->f->for_ms == 0 && fl_fault_kind_of(&fr->f->action)->lasting;
        if (fr->st == F_ACTIVE || holds)
            heal(e, fr, true);
    }
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
        fl_text_add(buf, len, "only %u of the %u matching events came", fr->matches, want);
        return;
    }
    size_t same = 0;
    for (size_t i = 0; i < e->nevents; i++)
        same += !strcmp(e->events[i].kind, t->event);
    if (same) {
        fl_text_add(buf, len,
                    "%zu '%s' event%s came, none from the host, job or 'where' "
                    "it names",
                    same, t->event, same == 1 ? "" : "s");
        return;
    }
    const char *kinds[16];
    size_t k = seen_kinds(e, kinds, 16);
    if (!k) {
        fl_text_add(buf, len,
                    "no process sent any event (a program sends them on "
                    "$FAULTLINE_EVENTS, e.g. with 'faultline emit %s')",
                    t->event);
        return;
    }
    const char *near = fl_suggest(t->event, kinds, k);
    if (near) {
        fl_text_add(buf, len, "no '%s' event came (did you mean '%s'?)", t->event, near);
        return;
    }
    fl_text_add(buf, len, "no '%s' event came; events that came:", t->event);
    for (size_t i = 0; i < k; i++)
        fl_text_add(buf, len, "%s %s", i ? "," : "", kinds[i]);
}

/* Why fr never fired, appended to buf. */
static void why_unfired(const struct engine *e, const struct fault_rt *fr, char *buf, size_t len)
{
    const struct fl_scn_trigger *t = &fr->f->trigger;
    unsigned want = t->count ? t->count : 1;
    if (t->kind == FL_SCN_TRIG_AT ? t->at_ms <= e->res->duration_ms : fr->matches >= want) {
        fl_text_add(buf, len, "its trigger came only once the run was ending");
        return;
    }
    switch (t->kind) {
    case FL_SCN_TRIG_AT:
        fl_text_add(buf, len, "the run ended at %.1fs, before 'at: %lld%s'",
                    (double)e->res->duration_ms / 1000,
                    (long long)(t->at_ms % 1000 ? t->at_ms : t->at_ms / 1000),
                    t->at_ms % 1000 ? "ms" : "s");
        break;
    case FL_SCN_TRIG_EVENT: why_no_event(e, fr, buf, len); break;
    case FL_SCN_TRIG_LOG:
        if (fr->matches > 0)
            fl_text_add(buf, len, "only %u of the %u matching lines came", fr->matches, want);
        else
            fl_text_add(buf, len, "no output line of %s matched '%s'",
                        t->host >= 0 || t->job >= 0 ? "the host or job it names" : "any task",
                        t->match.src);
        break;
    }
}

void fl_faults_unfired(const struct engine *e, char *buf, size_t len)
{
    buf[0] = 0;
    for (size_t i = 0; i < e->r.nfaults; i++) {
        const struct fault_rt *fr = &e->r.faults[i];
        const struct fl_scn_fault *f = fr->f;
        if (fr->st != F_PENDING || f->optional)
            continue; /* optional: true: not firing is one of its outcomes */
        const char *kind = fl_fault_kind_of(&f->action)->name;
        char target[256], note[1024];
        eng_target_of(&e->r, f, target, sizeof target);
        snprintf(note, sizeof note, "fault %d (%s:%d, %s %s) never fired: ", fr->index + 1,
                 e->r.s->path, f->loc.line, kind, target);
        why_unfired(e, fr, note, sizeof note);
        fl_text_add(buf, len, "%s%s", buf[0] ? "\n" : "", note);
        if (e->r.rec) {
            struct fl_rec_unfired u = {.index = fr->index + 1,
                                       .kind = kind,
                                       .target = target,
                                       .line = f->loc.line,
                                       .note = note};
            fl_rec_fault_unfired(e->r.rec, &u);
        }
    }
}

void fl_faults_fates(struct engine *e)
{
    const struct fl_engine_opts *o = e->o;
    if (o->fates)
        memset(o->fates, 0, o->n_fates * sizeof *o->fates);
    e->res->faults_armed = e->r.nfaults;
    e->res->faults_fired = 0;
    for (size_t i = 0; i < e->r.nfaults; i++) {
        const struct fault_rt *fr = &e->r.faults[i];
        bool fired = fr->st != F_PENDING;
        e->res->faults_fired += fired;
        if (o->fates && (size_t)fr->index < o->n_fates)
            o->fates[fr->index] = (struct fl_engine_fault_fate){
                .armed = true, .fired = fired, .matches = fr->matches};
    }
}

/* "1200ms", "3s" */
static const char *ms_text(int64_t ms, char *buf, size_t len)
{
    if (ms % 1000)
        snprintf(buf, len, "%lldms", (long long)ms);
    else
        snprintf(buf, len, "%llds", (long long)(ms / 1000));
    return buf;
}

/* " (host w0, job ps:1, step=50)": the filters of an after: or on_log: */
static void trigger_filters(const struct fl_scenario *s, const struct fl_scn_trigger *t, char *buf,
                            size_t len)
{
    char f[512] = "";
    if (t->host >= 0)
        fl_text_add(f, sizeof f, "host %s", s->hosts[t->host].name);
    if (t->job >= 0) {
        fl_text_add(f, sizeof f, "%sjob %s", f[0] ? ", " : "", s->jobs[t->job].name);
        if (t->task >= 0)
            fl_text_add(f, sizeof f, ":%d", t->task);
    }
    for (size_t i = 0; i < t->n_where; i++)
        fl_text_add(f, sizeof f, "%s%s=%s", f[0] ? ", " : "", t->where[i].key, t->where[i].value);
    if (f[0])
        fl_text_add(buf, len, " (%s)", f);
}

static const char *nth(unsigned n)
{
    return n % 100 >= 11 && n % 100 <= 13 ? "th"
           : n % 10 == 1                  ? "st"
           : n % 10 == 2                  ? "nd"
           : n % 10 == 3                  ? "rd"
                                          : "th";
}

void fl_engine_fault_text(const struct fl_scenario *s, size_t i, char *trigger, size_t tlen,
                          char *what, size_t wlen)
{
    const struct fl_scn_fault *f = &s->faults[i];
    const struct fl_scn_trigger *t = &f->trigger;
    unsigned count = t->count ? t->count : 1;
    char ms[32], target[512];
    trigger[0] = 0;
    switch (t->kind) {
    case FL_SCN_TRIG_AT: snprintf(trigger, tlen, "at %s", ms_text(t->at_ms, ms, sizeof ms)); break;
    case FL_SCN_TRIG_EVENT:
        if (count > 1)
            snprintf(trigger, tlen, "after the %u%s %s", count, nth(count), t->event);
        else
            snprintf(trigger, tlen, "after %s", t->event);
        trigger_filters(s, t, trigger, tlen);
        break;
    case FL_SCN_TRIG_LOG:
        snprintf(trigger, tlen, "on_log '%s'", t->match.src);
        if (count > 1)
            fl_text_add(trigger, tlen, " (the %u%s line)", count, nth(count));
        trigger_filters(s, t, trigger, tlen);
        break;
    }
    struct fl_run r = {.s = s};
    eng_target_of(&r, f, target, sizeof target);
    snprintf(what, wlen, "%s %s", fl_fault_kind_of(&f->action)->name, target);
    if (f->for_ms > 0)
        fl_text_add(what, wlen, " for=%s", ms_text(f->for_ms, ms, sizeof ms));
}

/* ---- the kinds' run-wide parts -------------------------------------------- */

static int hook_task_env(struct fl_run *r, int task, char **env, size_t *k, char *err,
                         size_t errlen)
{
    if (r->s->tasks[task].final)
        return 0; /* no fault reaches a final: none of their preloads */
    for (int i = 1; i < FL_SCN_ACT_COUNT; i++) {
        const struct fl_fault_kind *kd = fl_fault_kinds[i];
        int rc = kd->task_env ? kd->task_env(r, task, env, k, err, errlen) : 0;
        if (rc < 0)
            return rc;
    }
    return 0;
}

static int hook_host_starting(struct fl_run *r, int host, char *err, size_t errlen)
{
    for (int i = 1; i < FL_SCN_ACT_COUNT; i++) {
        const struct fl_fault_kind *kd = fl_fault_kinds[i];
        int rc = kd->host_starting ? kd->host_starting(r, host, err, errlen) : 0;
        if (rc < 0)
            return rc;
    }
    return 0;
}

static void hook_host_started(struct fl_run *r, int host)
{
    for (int i = 1; i < FL_SCN_ACT_COUNT; i++)
        if (fl_fault_kinds[i]->host_started)
            fl_fault_kinds[i]->host_started(r, host);
}

static int hook_spawned(struct fl_run *r, int host, pid_t pid, char *err, size_t errlen)
{
    for (int i = 1; i < FL_SCN_ACT_COUNT; i++) {
        const struct fl_fault_kind *kd = fl_fault_kinds[i];
        int rc = kd->spawned ? kd->spawned(r, host, pid, err, errlen) : 0;
        if (rc < 0)
            return rc;
    }
    return 0;
}

void fl_faults_kinds_stopping(struct engine *e)
{
    for (int i = 1; i < FL_SCN_ACT_COUNT; i++)
        if (fl_fault_kinds[i]->stopping)
            fl_fault_kinds[i]->stopping(&e->r);
}

int fl_faults_kinds_init(struct engine *e, char *err, size_t errlen)
{
    e->r.task_env = hook_task_env;
    e->r.host_starting = hook_host_starting;
    e->r.host_started = hook_host_started;
    for (int i = 1; i < FL_SCN_ACT_COUNT; i++) {
        const struct fl_fault_kind *kd = fl_fault_kinds[i];
        bool any = false;
        for (size_t f = 0; f < e->r.nfaults && !any; f++)
            any = e->r.faults[f].f->action.kind == kd->kind;
        any |= kd->needed && kd->needed(&e->r);
        int rc = any && kd->init ? kd->init(&e->r, err, errlen) : 0;
        if (rc < 0)
            return rc;
        if (any && kd->spawned)
            e->r.spawned = hook_spawned; /* only then: each spawn waits for it */
    }
    return 0;
}

void fl_faults_kinds_free(struct engine *e)
{
    for (int i = 1; i < FL_SCN_ACT_COUNT; i++)
        if (fl_fault_kinds[i]->free)
            fl_fault_kinds[i]->free(&e->r);
    for (size_t i = 0; i < e->r.nfaults; i++) {
        free(e->r.faults[i].priv);
        e->r.faults[i].priv = NULL;
    }
}
