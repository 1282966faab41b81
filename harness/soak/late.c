/*
 * late.c: drawn faults that came after the run's end.
 *
 * A soak profile draws its faults at times in [start, duration) or at the
 * N-th of an event, N in [MIN, MAX]; the run itself ends when its scenario
 * says (stop_when, timeout), whatever was drawn.  A window reaching past
 * the run's usual length draws faults that never fire: an iteration said
 * "6 faults" and passed with none applied.  The soak counts, for each
 * passing iteration, its drawn faults that fired (the engine's fates), and
 * keeps the last FL_SOAK_LATE_WINDOW passing iterations.  When most faults
 * of one iteration (or of that window) never fired, it says so once, with
 * figures from the window: for times, how long the runs lasted against the
 * profile's 'duration'; for an entry drawn at events, how many of them the
 * runs had against its count's range; and what to change.  Failing
 * iterations are left out: a run that failed early ends before its
 * faults for a reason of its own.  The schedule is not clamped to what runs
 * lasted: the same profile and seed keep giving the same schedules.
 */
#include "harness/engine/engine.h"
#include "harness/soak/soak.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* one passing iteration */
struct late_iter {
    uint64_t iter;
    int64_t duration_ms;
    size_t drawn, unfired;
    size_t *e_drawn, *e_unfired; /* per entry */
    long *e_events;              /* per entry drawn at events: how many came (-1: unknown) */
};

struct fl_soak_late {
    const struct fl_soak_profile *p;
    struct late_iter it[FL_SOAK_LATE_WINDOW];
    size_t n, next; /* iterations held; where the next goes */
    bool warned;
};

struct fl_soak_late *fl_soak_late_new(const struct fl_soak_profile *p)
{
    struct fl_soak_late *l = calloc(1, sizeof *l);
    if (!l)
        return NULL;
    l->p = p;
    size_t n = p->n_entries ? p->n_entries : 1;
    for (size_t i = 0; i < FL_SOAK_LATE_WINDOW; i++) {
        struct late_iter *it = &l->it[i];
        it->e_drawn = calloc(n, sizeof *it->e_drawn);
        it->e_unfired = calloc(n, sizeof *it->e_unfired);
        it->e_events = calloc(n, sizeof *it->e_events);
        if (!it->e_drawn || !it->e_unfired || !it->e_events) {
            fl_soak_late_free(l);
            return NULL;
        }
    }
    return l;
}

void fl_soak_late_free(struct fl_soak_late *l)
{
    if (!l)
        return;
    for (size_t i = 0; i < FL_SOAK_LATE_WINDOW; i++) {
        free(l->it[i].e_drawn);
        free(l->it[i].e_unfired);
        free(l->it[i].e_events);
    }
    free(l);
}

/* "2.6s", "250ms" */
static const char *secs(int64_t ms, char *buf, size_t len)
{
    if (ms < 1000)
        snprintf(buf, len, "%" PRId64 "ms", ms);
    else
        snprintf(buf, len, "%.1fs", (double)ms / 1000);
    return buf;
}

static bool most(size_t unfired, size_t drawn)
{
    return drawn >= 2 && unfired * 2 > drawn;
}

/* The warning, from the window's iterations (cur the one just added). */
static char *warning(const struct fl_soak_late *l, const struct late_iter *cur)
{
    const struct fl_soak_profile *p = l->p;
    size_t drawn = 0, unfired = 0;
    int64_t dmin = -1, dmax = -1;
    uint64_t first = cur->iter;
    for (size_t i = 0; i < l->n; i++) {
        const struct late_iter *it = &l->it[i];
        drawn += it->drawn;
        unfired += it->unfired;
        if (dmin < 0 || it->duration_ms < dmin)
            dmin = it->duration_ms;
        if (it->duration_ms > dmax)
            dmax = it->duration_ms;
        if (it->iter < first)
            first = it->iter;
    }
    char *msg = NULL, a[32], b[32], c[32];
    size_t len = 0;
    FILE *f = open_memstream(&msg, &len);
    if (!f)
        return NULL;
    fprintf(f,
            "faultline soak: warning: most faults drawn never fired, their runs having ended "
            "first: %zu of the %zu drawn in iteration %" PRIu64,
            cur->unfired, cur->drawn, cur->iter);
    if (l->n > 1)
        fprintf(f, ", %zu of %zu in the %zu passing iterations %" PRIu64 "-%" PRIu64, unfired,
                drawn, l->n, first, cur->iter);
    if (dmin == dmax)
        fprintf(f, " (a run of %s)", secs(dmin, a, sizeof a));
    else
        fprintf(f, " (runs of %s to %s)", secs(dmin, a, sizeof a), secs(dmax, b, sizeof b));
    fputs(".\n", f);
    /* faults drawn at times */
    size_t t_drawn = 0, t_unfired = 0;
    for (size_t e = 0; e < p->n_entries; e++)
        for (size_t i = 0; !p->entries[e].after && i < l->n; i++) {
            t_drawn += l->it[i].e_drawn[e];
            t_unfired += l->it[i].e_unfired[e];
        }
    if (t_unfired)
        fprintf(f,
                "  %s:%d: soak 'duration' draws times in [%s, %s), and runs ended as early as "
                "%s: %zu of the %zu faults drawn at times came after their run's end.  Set "
                "%s under %s (the shortest run), or make the run last longer.\n",
                p->path, p->duration_line, secs(p->start_ms, a, sizeof a),
                secs(p->duration_ms, b, sizeof b), secs(dmin, c, sizeof c), t_unfired, t_drawn,
                p->start_ms >= dmin ? "'start' and 'duration'" : "'duration'",
                secs(dmin, c, sizeof c));
    /* each entry drawn at events */
    for (size_t e = 0; e < p->n_entries; e++) {
        const struct fl_soak_entry *en = &p->entries[e];
        size_t ed = 0, eu = 0;
        long fewest = -1;
        for (size_t i = 0; en->after && i < l->n; i++) {
            ed += l->it[i].e_drawn[e];
            eu += l->it[i].e_unfired[e];
            long ev = l->it[i].e_events[e];
            if (ev >= 0 && (fewest < 0 || ev < fewest))
                fewest = ev;
        }
        if (!eu)
            continue;
        fprintf(f, "  %s:%d: this entry draws the N-th event (%s), N in [%ld, %ld]", p->path,
                en->loc.line, en->after, en->after_min, en->after_max);
        if (fewest == 0) {
            fprintf(f,
                    ", and a run had none: %zu of its %zu faults never fired.  Check the "
                    "event's kind and filters ('faultline runs RUN --faults' of an iteration's "
                    "run says which events came).\n",
                    eu, ed);
            continue;
        }
        if (fewest > 0)
            fprintf(f, ", and a run had as few as %ld such events", fewest);
        fprintf(f, ": %zu of its %zu faults never fired.  Lower its count's MAX", eu, ed);
        if (fewest >= en->after_min)
            fprintf(f, " to %ld", fewest);
        fputs(", or make the run last longer.\n", f);
    }
    if (fclose(f) != 0) {
        free(msg);
        return NULL;
    }
    return msg;
}

int fl_soak_late_add(struct fl_soak_late *l, const struct fl_soak_schedule *sc,
                     const struct fl_engine_fault_fate *fates, int64_t duration_ms, uint64_t iter,
                     char **warn)
{
    const struct fl_soak_profile *p = l->p;
    *warn = NULL;
    struct late_iter *it = &l->it[l->next];
    l->next = (l->next + 1) % FL_SOAK_LATE_WINDOW;
    if (l->n < FL_SOAK_LATE_WINDOW)
        l->n++;
    it->iter = iter;
    it->duration_ms = duration_ms;
    it->drawn = sc->n;
    it->unfired = 0;
    for (size_t e = 0; e < p->n_entries; e++) {
        it->e_drawn[e] = it->e_unfired[e] = 0;
        it->e_events[e] = -1;
    }
    for (size_t i = 0; i < sc->n; i++) {
        size_t e = sc->faults[i].entry;
        it->e_drawn[e]++;
        if (fates[i].fired)
            continue;
        it->unfired++;
        it->e_unfired[e]++;
        /* a fault at the N-th event that never fired saw every such event */
        if (p->entries[e].after)
            it->e_events[e] = (long)fates[i].matches;
    }
    if (l->warned)
        return 0;
    size_t drawn = 0, unfired = 0;
    for (size_t i = 0; i < l->n; i++) {
        drawn += l->it[i].drawn;
        unfired += l->it[i].unfired;
    }
    if (!most(it->unfired, it->drawn) && !most(unfired, drawn))
        return 0;
    l->warned = true;
    *warn = warning(l, it);
    return *warn ? 1 : -ENOMEM;
}
