/*
 * trigger.h: when a fault's trigger matches (pure functions, no side
 * effects; the scheduler in engine/schedule.c counts matches and fires).
 */
#ifndef FL_TRIGGER_H
#define FL_TRIGGER_H

#include "harness/run/evsrv.h"
#include "harness/scenario/scenario.h"

#include <stdbool.h>
#include <stdint.h>

/* Does an event from (host, job, task) match an `after:` trigger? */
bool fl_trig_event_matches(const struct fl_scn_trigger *t, int host, int job, int task,
                           const struct fl_ev *ev);
/* Does an output line of (host, job, task) match an `on_log:` trigger? */
bool fl_trig_line_matches(const struct fl_scn_trigger *t, int host, int job, int task,
                          const char *line);
/* Is an `at:` trigger due at time now_ms (since the run's start)? */
bool fl_trig_due(const struct fl_scn_trigger *t, int64_t now_ms);

#endif
