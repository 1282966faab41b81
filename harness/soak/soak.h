/*
 * soak.h: soak mode — randomized fault schedules drawn from a soak profile,
 * run through the normal engine, with every failure kept as a replayable
 * scenario file and then minimized.
 *
 * A soak profile (scenarios/README.md, "Soak profiles") is a scenario
 * without `faults:` plus a `soak:` block that says which faults may be
 * drawn.  fl_soak_profile_load() validates it (errors as the scenario
 * loader's: file:line:column); fl_soak_draw() draws one concrete schedule
 * from a seed; fl_soak_render() turns a schedule (or a subset of it) into
 * the text of an ordinary scenario file with a trigger for every fault (an
 * `at:` time, or for an entry with `after:` the N-th of its events), which
 * is what each iteration runs and what a failure file holds.
 * fl_soak_minimize() shrinks a failing schedule (soak/min.c).
 */
#ifndef FL_SOAK_H
#define FL_SOAK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "harness/scenario/scenario.h"

/* One entry of soak.faults: a fault kind with what may be drawn for it. */
struct fl_soak_entry {
    char kind[16];             /* the fault key: "kill", "pause", "disk", ... */
    char **targets;            /* target kinds (kill, pause, restart, replace,
                                  crash_host): the alternatives, as YAML scalars */
    size_t n_targets;          /* 0 for the other kinds */
    char *value;               /* other kinds: their value as flow YAML, used as is */
    char *extra;               /* more keys of the fault as flow YAML (", signal: X"), or "" */
    char *after;               /* drawn on an event axis: the after: mapping's keys but count,
                                  as flow YAML ("event: save.done, host: w0"); NULL: drawn at
                                  times in [start, duration) */
    long after_min, after_max; /* after: the N-th event, N drawn in [after_min, after_max] */
    int64_t every_ms;          /* mean interval of a Poisson process (in events when after);
                                  0 when count is used */
    long count_min, count_max; /* exactly this many per iteration (uniform in [min, max]) */
    bool has_for;
    int64_t for_min_ms, for_max_ms; /* for: drawn uniformly in [min, max] */
    struct fl_scn_loc loc;
};

struct fl_soak_profile {
    char *path;
    char *text;               /* the profile without its soak: and seed: lines */
    struct fl_scenario *base; /* the profile loaded as a scenario (no faults) */
    int64_t start_ms;         /* faults are drawn at times in [start, duration) */
    int64_t duration_ms;      /* 0 when no entry draws times (every one has after:) */
    int duration_line;        /* where 'duration:' is (0: not given) */
    size_t max_faults;        /* at most this many per iteration (the earliest, each by its place
                                 in its own entry's range) */
    struct fl_soak_entry *entries;
    size_t n_entries;
};

/* One drawn fault. */
struct fl_soak_fault {
    size_t entry;   /* index in p->entries */
    int64_t at_ms;  /* when the entry draws times; else 0 */
    long nth;       /* when the entry has after: fire on the nth event; else 0 */
    double place;   /* where in its entry's range, in [0, 1): the order of the schedule */
    size_t target;  /* index in the entry's targets (0 when it has none) */
    int64_t for_ms; /* when the entry has for: */
};

struct fl_soak_schedule {
    uint64_t seed;                /* what it was drawn from (also the run's seed) */
    struct fl_soak_fault *faults; /* sorted by place */
    size_t n;
};

/* Loads and validates a profile.  On error *out is NULL and err holds
 * "file:line:column: message". */
int fl_soak_profile_load(const char *path, struct fl_soak_profile **out, char *err, size_t errlen);
void fl_soak_profile_free(struct fl_soak_profile *p);

/* The seed of iteration iter of a soak started with soak_seed (splitmix64). */
uint64_t fl_soak_iter_seed(uint64_t soak_seed, uint64_t iter);

/* Draws a schedule from seed: deterministic in (profile, seed). */
int fl_soak_draw(const struct fl_soak_profile *p, uint64_t seed, struct fl_soak_schedule *out);
void fl_soak_schedule_free(struct fl_soak_schedule *sc);

/*
 * The text of a scenario file: header (comment lines, may be NULL), the
 * profile's text, `seed:` and the `faults:` of the schedule, leaving out
 * fault i when keep && !keep[i].  *out is malloc'd.
 */
int fl_soak_render(const struct fl_soak_profile *p, const struct fl_soak_schedule *sc,
                   const bool *keep, const char *header, char **out);
/* One fault as a flow mapping: "{at: 1200ms, kill: 'ps:1', for: 800ms}", or
 * "{after: {event: save.done, host: w0, count: 7}, disk: {...}, for: 300ms}". */
int fl_soak_fault_text(const struct fl_soak_profile *p, const struct fl_soak_fault *f, char *buf,
                       size_t len);

/*
 * Minimization (soak/min.c).  reproduces(ctx, keep) runs the schedule with
 * the faults keep[i] and returns 1 when the failure reproduces, 0 when it
 * does not, negative to stop (interrupted).  Drops faults while the failure
 * reproduces: complements of halves, quarters, ... (ddmin), then one at a
 * time, at most budget calls.  keep[] (n entries, all true on entry) holds
 * the smallest failing set found.  Returns the number of calls made, or the
 * negative value reproduces returned.
 */
int fl_soak_minimize(size_t n, bool *keep, int budget,
                     int (*reproduces)(void *ctx, const bool *keep), void *ctx);

/*
 * Drawn faults that came after the run's end (soak/late.c).  Each passing
 * iteration is added with its schedule and what became of each of its
 * faults (fates[i] of sc->faults[i], as the engine filled them), its run's
 * duration and its number (from 1).  Once, when most faults of that
 * iteration, or of the last FL_SOAK_LATE_WINDOW passing ones, never fired,
 * *warn gets the warning to print (malloc'd; file:line of what to change,
 * with figures) and it returns 1; else 0 (or -ENOMEM).
 */
#define FL_SOAK_LATE_WINDOW 5
struct fl_soak_late;
struct fl_engine_fault_fate;
struct fl_soak_late *fl_soak_late_new(const struct fl_soak_profile *p);
void fl_soak_late_free(struct fl_soak_late *l);
int fl_soak_late_add(struct fl_soak_late *l, const struct fl_soak_schedule *sc,
                     const struct fl_engine_fault_fate *fates, int64_t duration_ms, uint64_t iter,
                     char **warn);

/* The class of a failure, for "the same failure": the verdict and what
 * failed ("fail worker:1: exit", "fail timed out", "error <text, digits
 * as #>"). */
void fl_soak_failure_class(const char *verdict, const char *reason, char *buf, size_t len);

#endif
