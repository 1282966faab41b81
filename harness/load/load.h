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

#endif
