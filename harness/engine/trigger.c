/*
 * trigger.c: matching of fault triggers against what a run sees: the run's
 * clock (`at:`), events on the event channel (`after:`: kind, optional host,
 * job, task and attribute values), and output lines (`on_log:`: a regex and
 * the same optional filters).  Counting matches and firing is the
 * scheduler's job (engine/schedule.c); these functions only answer "does this match".
 */
#include "harness/engine/trigger.h"

#include <string.h>

static bool who_matches(const struct fl_scn_trigger *t, int host, int job, int task)
{
    if (t->host >= 0 && t->host != host)
        return false;
    if (t->job >= 0 && t->job != job)
        return false;
    if (t->task >= 0 && t->task != task)
        return false;
    return true;
}

bool fl_trig_event_matches(const struct fl_scn_trigger *t, int host, int job, int task,
                           const struct fl_ev *ev)
{
    if (t->kind != FL_SCN_TRIG_EVENT || !ev->kind || strcmp(t->event, ev->kind))
        return false;
    if (!who_matches(t, host, job, task))
        return false;
    for (size_t k = 0; k < t->n_where; k++) {
        const char *v = fl_ev_get(ev, t->where[k].key);
        if (!v || strcmp(v, t->where[k].value))
            return false;
    }
    return true;
}

bool fl_trig_line_matches(const struct fl_scn_trigger *t, int host, int job, int task,
                          const char *line)
{
    if (t->kind != FL_SCN_TRIG_LOG || !t->match.src)
        return false;
    if (!who_matches(t, host, job, task))
        return false;
    return regexec(&t->match.re, line, 0, NULL, 0) == 0;
}

bool fl_trig_due(const struct fl_scn_trigger *t, int64_t now_ms)
{
    return t->kind == FL_SCN_TRIG_AT && now_ms >= t->at_ms;
}
