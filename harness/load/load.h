/*
 * load.h: the scenario loader: a YAML file (or buffer) read and validated
 * completely into struct fl_scenario (harness/scenario/scenario.h) before
 * the caller creates anything.  Free the result with fl_scenario_free().
 */
#ifndef FL_LOAD_H
#define FL_LOAD_H

#include "harness/scenario/scenario.h"

/* Loads and validates a scenario file.  On error *out is NULL and err holds
 * "file:line:column: message" (or "file: message" when there is no place). */
int fl_scenario_load(const char *path, struct fl_scenario **out, char *err, size_t errlen);
/* Same from memory; 'path' names the buffer in messages and sets s->dir. */
int fl_scenario_load_mem(const char *path, const char *buf, size_t len, struct fl_scenario **out,
                         char *err, size_t errlen);

/*
 * A fault whose hosts come from its event (from_event, '{event.KEY}'): its
 * kind's value read again with the event's attributes put in
 * (event_values.c).  get(ctx, KEY) is the event's attribute KEY, or NULL.
 * On success *out is the action to apply (free it with
 * fl_scn_action_free); else -EINVAL and err says why, in words that follow
 * the fault's name: "event 'leader.is' gave node=r9, which is no host of
 * this scenario".
 */
typedef const char *(*fl_scn_ev_get_fn)(void *ctx, const char *key);
int fl_scn_fault_resolve(const struct fl_scenario *s, size_t fault, const char *ev_kind,
                         fl_scn_ev_get_fn get, void *ctx, struct fl_scn_action *out, char *err,
                         size_t errlen);

#endif
