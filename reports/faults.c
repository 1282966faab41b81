/*
 * faults.c: `faultline runs RUN --faults`: one run's fault schedule, each
 * fault with whether and when it fired and healed.
 *
 * The database holds a row for every fault applied (faults), none for a
 * fault that never fired.  So the caller gives the schedule as the run's
 * scenario said it (struct fl_report_planned_fault, from the scenario text
 * the database kept: the command loads it), and this joins it with the
 * applied rows by the fault's number (faults.idx): a passing soak iteration
 * shows which of its drawn faults fired, and a fault that did not says why
 * when the database can tell (the run ended before its time; how many of
 * its events came).
 */
#include "reports/report.h"
#include "reports/table.h"

#include <errno.h>
#include <inttypes.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

static int sql_fail(sqlite3 *db, const char *what)
{
    fprintf(stderr, "faultline: database %s: %s: %s\n",
            sqlite3_db_filename(db, "main") ? sqlite3_db_filename(db, "main") : "?", what,
            sqlite3_errmsg(db));
    return -EIO;
}

static char *dup_col(sqlite3_stmt *st, int i)
{
    const char *s = (const char *)sqlite3_column_text(st, i);
    return s ? strdup(s) : NULL;
}

/* one applied row of faults */
struct applied {
    int64_t idx; /* -1: NULL */
    char *kind, *target, *detail, *error;
    int64_t applied_ms, healed_ms; /* -1: NULL */
    bool used;
};

static void applied_free(struct applied *a, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(a[i].kind);
        free(a[i].target);
        free(a[i].detail);
        free(a[i].error);
    }
    free(a);
}

static int64_t col_ms(sqlite3_stmt *st, int i)
{
    return sqlite3_column_type(st, i) == SQLITE_NULL ? -1 : sqlite3_column_int64(st, i);
}

static const char *ms_cell(int64_t ms, char *buf, size_t len)
{
    if (ms < 0)
        return "-";
    snprintf(buf, len, "%" PRId64 "ms", ms);
    return buf;
}

static const char *ordinal(unsigned n)
{
    return n % 100 >= 11 && n % 100 <= 13 ? "th"
           : n % 10 == 1                  ? "st"
           : n % 10 == 2                  ? "nd"
           : n % 10 == 3                  ? "rd"
                                          : "th";
}

/* how many events of kind the run had (from host, when not NULL) */
static long count_events(sqlite3 *db, int64_t run, const char *kind, const char *host)
{
    sqlite3_stmt *st;
    long n = -1;
    if (sqlite3_prepare_v2(db,
                           "SELECT count(*) FROM events WHERE run = ?1 AND kind = ?2"
                           " AND (?3 IS NULL OR host = ?3)",
                           -1, &st, NULL) != SQLITE_OK)
        return -1;
    sqlite3_bind_int64(st, 1, run);
    sqlite3_bind_text(st, 2, kind, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, host, -1, SQLITE_STATIC);
    if (sqlite3_step(st) == SQLITE_ROW)
        n = (long)sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return n;
}

/* Why planned fault p never fired, as far as the database tells. */
static void never_fired(sqlite3 *db, int64_t run, const char *verdict, int64_t duration_ms,
                        const struct fl_report_planned_fault *p, char *buf, size_t len)
{
    char d[32];
    if (!strcmp(verdict, "running") || duration_ms < 0) {
        snprintf(buf, len, "not fired (the run %s)",
                 strcmp(verdict, "running") ? "did not end" : "has not ended, or was killed");
        return;
    }
    if (p->at_ms >= 0) {
        if (p->at_ms > duration_ms)
            snprintf(buf, len, "never fired: the run ended at %s, before it",
                     fl_report_fmt_duration(duration_ms, d, sizeof d));
        else
            snprintf(buf, len, "never fired: its time came once the run was ending");
        return;
    }
    if (p->event) {
        long n = count_events(db, run, p->event, p->host);
        unsigned want = p->count ? p->count : 1;
        char from[128] = "";
        if (p->host)
            snprintf(from, sizeof from, " from %s", p->host);
        if (n < 0)
            snprintf(buf, len, "never fired");
        else if (want > 1)
            snprintf(buf, len, "never fired: it waits for the %u%s '%s' event, the run had %ld%s%s",
                     want, ordinal(want), p->event, n, from,
                     p->filtered ? " (of any job and values)" : "");
        else if (n == 0)
            snprintf(buf, len, "never fired: the run had no '%s' event%s", p->event, from);
        else
            snprintf(buf, len,
                     "never fired: the run had %ld '%s' event%s%s, none from the job or with "
                     "the values it names",
                     n, p->event, n == 1 ? "" : "s", from);
        return;
    }
    snprintf(buf, len, "never fired: no line matched");
}

int fl_report_faults(struct sqlite3 *db, FILE *out, const char *run_id,
                     const struct fl_report_planned_fault *plan, size_t n)
{
    static const struct fl_report_col cols[] = {
        {.title = "#", .right = true},
        {.title = "TRIGGER", .max_width = 48, .min_width = 20},
        {.title = "FAULT", .max_width = 60, .min_width = 24},
        {.title = "APPLIED", .right = true},
        {.title = "HEALED", .right = true},
        {.title = "NOTE", .max_width = 80, .min_width = 20},
    };
    sqlite3_stmt *st = NULL;
    struct fl_report_table *t = NULL;
    struct applied *a = NULL;
    size_t na = 0;
    int ret = 0, rc;
    char *scenario = NULL, *variant = NULL, *verdict = NULL;
    int64_t run = 0, duration_ms = -1;
    uint64_t seed = 0;

    if (sqlite3_prepare_v2(db,
                           "SELECT id, scenario, variant, verdict, duration_ms, seed FROM runs"
                           " WHERE run_id = ?1",
                           -1, &st, NULL) != SQLITE_OK)
        return sql_fail(db, "looking up a run");
    sqlite3_bind_text(st, 1, run_id, -1, SQLITE_STATIC);
    if ((rc = sqlite3_step(st)) != SQLITE_ROW) {
        ret = rc == SQLITE_DONE ? -ENOENT : sql_fail(db, "looking up a run");
        goto cleanup;
    }
    run = sqlite3_column_int64(st, 0);
    scenario = dup_col(st, 1);
    variant = dup_col(st, 2);
    verdict = dup_col(st, 3);
    duration_ms = col_ms(st, 4);
    seed = (uint64_t)sqlite3_column_int64(st, 5);
    sqlite3_finalize(st);
    st = NULL;
    if (!verdict) {
        ret = -ENOMEM;
        goto cleanup;
    }

    if (sqlite3_prepare_v2(db,
                           "SELECT idx, kind, target, detail, error, applied_ms, healed_ms"
                           " FROM faults WHERE run = ?1 ORDER BY applied_ms, fault_no",
                           -1, &st, NULL) != SQLITE_OK) {
        ret = sql_fail(db, "listing faults");
        goto cleanup;
    }
    sqlite3_bind_int64(st, 1, run);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        struct applied *more = realloc(a, (na + 1) * sizeof *a);
        if (!more) {
            ret = -ENOMEM;
            goto cleanup;
        }
        a = more;
        a[na++] = (struct applied){.idx = col_ms(st, 0),
                                   .kind = dup_col(st, 1),
                                   .target = dup_col(st, 2),
                                   .detail = dup_col(st, 3),
                                   .error = dup_col(st, 4),
                                   .applied_ms = col_ms(st, 5),
                                   .healed_ms = col_ms(st, 6)};
    }
    if (rc != SQLITE_DONE) {
        ret = sql_fail(db, "listing faults");
        goto cleanup;
    }

    char v[16], d[32];
    fprintf(out, "run %s: %s (%s), seed %" PRIu64 ", %s", run_id, scenario ? scenario : "?",
            variant && *variant ? variant : "default", seed,
            fl_report_verdict_upper(verdict, v, sizeof v));
    if (duration_ms >= 0)
        fprintf(out, " in %s", fl_report_fmt_duration(duration_ms, d, sizeof d));
    if (n)
        fprintf(out, ": %zu of %zu fault%s applied\n", na, n, n == 1 ? "" : "s");
    else
        fprintf(out, ": %zu fault%s applied\n", na, na == 1 ? "" : "s");
    if (!n && !na)
        goto cleanup;

    t = fl_report_table_new(cols, 6);
    if (!t) {
        ret = -ENOMEM;
        goto cleanup;
    }
    /* the schedule in its order, each with its applied row */
    for (size_t i = 0; i <= n; i++) {
        for (size_t j = 0; j < na; j++) {
            struct applied *x = &a[j];
            /* after the schedule: the rows no planned fault claimed */
            if (x->used || (i < n && x->idx != plan[i].idx))
                continue;
            x->used = true;
            char idx[24], what[1024], ap[32], he[32], note[1100] = "";
            snprintf(idx, sizeof idx, "%" PRId64, x->idx);
            snprintf(what, sizeof what, "%s %s%s%s", x->kind ? x->kind : "?",
                     x->target ? x->target : "", x->detail ? " " : "", x->detail ? x->detail : "");
            if (x->error)
                snprintf(note, sizeof note, "error: %s", x->error);
            const char *cells[6] = {x->idx >= 0 ? idx : "-",
                                    i < n ? plan[i].trigger : "-",
                                    what,
                                    ms_cell(x->applied_ms, ap, sizeof ap),
                                    ms_cell(x->healed_ms, he, sizeof he),
                                    note};
            if ((ret = fl_report_table_add(t, cells)) < 0)
                goto cleanup;
            if (i < n)
                break;
        }
        if (i == n)
            break;
        bool fired = false;
        for (size_t j = 0; j < na && !fired; j++)
            fired = a[j].idx == plan[i].idx;
        if (fired)
            continue;
        char idx[24], note[1024];
        snprintf(idx, sizeof idx, "%d", plan[i].idx);
        never_fired(db, run, verdict, duration_ms, &plan[i], note, sizeof note);
        const char *cells[6] = {idx, plan[i].trigger, plan[i].what, "-", "-", note};
        if ((ret = fl_report_table_add(t, cells)) < 0)
            goto cleanup;
    }
    ret = fl_report_table_print(t, out);
    if (ret == 0)
        ret = (int)fl_report_table_rows(t);
cleanup:
    sqlite3_finalize(st);
    fl_report_table_free(t);
    applied_free(a, na);
    free(scenario);
    free(variant);
    free(verdict);
    return ret;
}
