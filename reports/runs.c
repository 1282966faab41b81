/*
 * runs.c: reports read from the results database (schema: docs/schema.md):
 *  - fl_report_runs:    `faultline runs`, the most recent runs as a table;
 *  - fl_report_history: per scenario/variant, how many runs passed, failed,
 *                       errored, and the last verdicts as a letter string;
 *  - fl_report_changed: scenarios/variants whose latest verdict differs from
 *                       their latest verdict at a given git revision.
 * Revisions match as FL_REPORT_REV_IS says (an abbreviated hash finds the
 * recorded one; a -dirty run is not its commit's).
 * "Since a revision" means since the first run recorded at it: the database
 * knows when runs happened, not how commits relate.
 */
#include "reports/report.h"
#include "reports/table.h"

#include <errno.h>
#include <inttypes.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int sql_fail(sqlite3 *db, const char *what)
{
    fprintf(stderr, "faultline: database %s: %s: %s\n",
            sqlite3_db_filename(db, "main") ? sqlite3_db_filename(db, "main") : "?", what,
            sqlite3_errmsg(db));
    return -EIO;
}

/* Prints the table, or `empty` when it has no rows; the number of rows
 * printed, or a negative errno. */
static int print_rows(struct fl_report_table *t, const char *empty, FILE *out)
{
    if (!fl_report_table_rows(t)) {
        fputs(empty, out);
        return 0;
    }
    int ret = fl_report_table_print(t, out);
    return ret ? ret : (int)fl_report_table_rows(t);
}

static const char *col_text(sqlite3_stmt *st, int i)
{
    return (const char *)sqlite3_column_text(st, i);
}

static bool valid_verdict(const char *v)
{
    return !strcmp(v, "pass") || !strcmp(v, "fail") || !strcmp(v, "error") || !strcmp(v, "running");
}

/* started_at (unix ms) of the first run at revision rev: 0 and *at set, or
 * -ENOENT when no run was recorded at rev. */
static int first_run_at(sqlite3 *db, const char *rev, int64_t *at)
{
    sqlite3_stmt *st;
    int ret = -ENOENT;
    if (sqlite3_prepare_v2(db,
                           "SELECT min(started_at) FROM runs WHERE length(?1) > 0"
                           " AND " FL_REPORT_REV_IS("?1"),
                           -1, &st, NULL) != SQLITE_OK)
        return sql_fail(db, "looking up a revision");
    sqlite3_bind_text(st, 1, rev, -1, SQLITE_STATIC);
    if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL) {
        *at = sqlite3_column_int64(st, 0);
        ret = 0;
    }
    sqlite3_finalize(st);
    return ret;
}

static const char *fmt_time(int64_t ms, char *buf, size_t len)
{
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    if (!localtime_r(&t, &tm) || !strftime(buf, len, "%Y-%m-%d %H:%M:%S", &tm))
        snprintf(buf, len, "-");
    return buf;
}

int fl_report_runs(sqlite3 *db, FILE *out, const struct fl_report_runs_opts *opts)
{
    static const struct fl_report_col cols[] = {
        {.title = "RUN ID"},
        {.title = "SCENARIO", .max_width = 40, .min_width = 28},
        {.title = "VARIANT", .max_width = 32, .min_width = 18},
        {.title = "VERDICT", .verdict = true},
        {.title = "DURATION", .right = true},
        {.title = "SEED", .right = true},
        {.title = "STARTED"},
        {.title = "REASON", .max_width = 50},
    };
    struct fl_report_runs_opts o = opts ? *opts : (struct fl_report_runs_opts){0};
    struct fl_report_table *t = NULL;
    sqlite3_stmt *st = NULL;
    int64_t since = 0;
    int ret = 0, rc;

    if (o.verdict && !valid_verdict(o.verdict))
        return -EINVAL;
    if (o.since_rev && (ret = first_run_at(db, o.since_rev, &since)) < 0)
        return ret;
    if (o.limit == 0)
        o.limit = 20;
    if (sqlite3_prepare_v2(db,
                           "SELECT run_id, scenario, variant, verdict, duration_ms, started_at,"
                           " reason, seed FROM runs"
                           " WHERE (?1 IS NULL OR scenario = ?1) AND (?2 IS NULL OR variant = ?2)"
                           " AND (?3 IS NULL OR verdict = ?3) AND started_at >= ?4"
                           " ORDER BY started_at DESC, id DESC LIMIT ?5",
                           -1, &st, NULL) != SQLITE_OK)
        return sql_fail(db, "listing runs");
    sqlite3_bind_text(st, 1, o.scenario, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, o.variant, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, o.verdict, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 4, since);
    sqlite3_bind_int(st, 5, o.limit);
    t = fl_report_table_new(cols, 8);
    if (!t) {
        ret = -ENOMEM;
        goto cleanup;
    }
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        char v[16], d[32], when[32], seed[24];
        const char *variant = col_text(st, 2);
        /* a seed recorded before seeds were 63-bit may be negative: it
         * was printed unsigned */
        snprintf(seed, sizeof seed, "%" PRIu64, (uint64_t)sqlite3_column_int64(st, 7));
        const char *cells[8] = {
            col_text(st, 0),
            col_text(st, 1),
            variant && *variant ? variant : "-",
            fl_report_verdict_upper(col_text(st, 3), v, sizeof v),
            sqlite3_column_type(st, 4) == SQLITE_NULL
                ? "-"
                : fl_report_fmt_duration(sqlite3_column_int64(st, 4), d, sizeof d),
            sqlite3_column_type(st, 7) == SQLITE_NULL ? "-" : seed,
            fmt_time(sqlite3_column_int64(st, 5), when, sizeof when),
            col_text(st, 6),
        };
        if ((ret = fl_report_table_add(t, cells)) < 0)
            goto cleanup;
    }
    if (rc != SQLITE_DONE) {
        ret = sql_fail(db, "listing runs");
        goto cleanup;
    }
    ret = print_rows(t,
                     o.scenario || o.variant || o.verdict || o.since_rev
                         ? "no recorded run matches\n"
                         : "no runs recorded in this database\n",
                     out);
cleanup:
    sqlite3_finalize(st);
    fl_report_table_free(t);
    return ret;
}

static char verdict_letter(const char *v)
{
    if (!v)
        return '?';
    if (!strcmp(v, "pass"))
        return 'P';
    if (!strcmp(v, "fail"))
        return 'F';
    if (!strcmp(v, "error"))
        return 'E';
    if (!strcmp(v, "running"))
        return 'R';
    return '?';
}

struct hist {
    char *scenario, *variant, *last;
    long runs, pass, fail, error;
    char *ring; /* last N letters, oldest first once unrolled */
    size_t nring;
};

static int hist_emit(struct fl_report_table *t, struct hist *h, int last)
{
    char runs[24], pass[24], fail[24], error[24], pct[16], v[16];
    long finished = h->pass + h->fail + h->error;
    size_t n = h->nring < (size_t)last ? h->nring : (size_t)last;
    char *letters = malloc(n + 1);
    if (!letters)
        return -ENOMEM;
    /* ring holds letters at index k % last; the oldest of the last n is at nring - n. */
    for (size_t i = 0; i < n; i++)
        letters[i] = h->ring[(h->nring - n + i) % (size_t)last];
    letters[n] = '\0';
    snprintf(runs, sizeof runs, "%ld", h->runs);
    snprintf(pass, sizeof pass, "%ld", h->pass);
    snprintf(fail, sizeof fail, "%ld", h->fail);
    snprintf(error, sizeof error, "%ld", h->error);
    if (finished)
        snprintf(pct, sizeof pct, "%.0f%%", 100.0 * (double)h->fail / (double)finished);
    else
        snprintf(pct, sizeof pct, "-");
    const char *cells[9] = {
        h->scenario, h->variant && *h->variant ? h->variant : "-",  runs,   pass, fail, error,
        pct,         fl_report_verdict_upper(h->last, v, sizeof v), letters};
    int ret = fl_report_table_add(t, cells);
    free(letters);
    return ret;
}

static void hist_reset(struct hist *h)
{
    free(h->scenario);
    free(h->variant);
    free(h->last);
    char *ring = h->ring;
    memset(h, 0, sizeof *h);
    h->ring = ring;
}

int fl_report_history(sqlite3 *db, FILE *out, const struct fl_report_history_opts *opts)
{
    static const struct fl_report_col cols[] = {
        {.title = "SCENARIO", .max_width = 40},
        {.title = "VARIANT", .max_width = 32},
        {.title = "RUNS", .right = true},
        {.title = "PASS", .right = true},
        {.title = "FAIL", .right = true},
        {.title = "ERROR", .right = true},
        {.title = "FAIL%", .right = true},
        {.title = "LAST", .verdict = true},
        {.title = "HISTORY"},
    };
    struct fl_report_history_opts o = opts ? *opts : (struct fl_report_history_opts){0};
    struct fl_report_table *t = NULL;
    sqlite3_stmt *st = NULL;
    struct hist h = {0};
    int ret = 0, rc;

    if (o.last <= 0)
        o.last = 20;
    h.ring = malloc((size_t)o.last);
    t = fl_report_table_new(cols, 9);
    if (!h.ring || !t) {
        ret = -ENOMEM;
        goto cleanup;
    }
    if (sqlite3_prepare_v2(db,
                           "SELECT scenario, variant, verdict FROM runs"
                           " WHERE (?1 IS NULL OR scenario = ?1) AND (?2 IS NULL OR variant = ?2)"
                           " ORDER BY scenario, variant, started_at, id",
                           -1, &st, NULL) != SQLITE_OK) {
        ret = sql_fail(db, "reading verdict history");
        goto cleanup;
    }
    sqlite3_bind_text(st, 1, o.scenario, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, o.variant, -1, SQLITE_STATIC);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        const char *sc = col_text(st, 0), *va = col_text(st, 1), *v = col_text(st, 2);
        if (h.scenario && (strcmp(h.scenario, sc) || strcmp(h.variant, va ? va : ""))) {
            if ((ret = hist_emit(t, &h, o.last)) < 0)
                goto cleanup;
            hist_reset(&h);
        }
        if (!h.scenario) {
            h.scenario = strdup(sc);
            h.variant = strdup(va ? va : "");
            if (!h.scenario || !h.variant) {
                ret = -ENOMEM;
                goto cleanup;
            }
        }
        h.runs++;
        h.pass += !strcmp(v, "pass");
        h.fail += !strcmp(v, "fail");
        h.error += !strcmp(v, "error");
        free(h.last);
        h.last = strdup(v);
        h.ring[h.nring++ % (size_t)o.last] = verdict_letter(v);
    }
    if (rc != SQLITE_DONE) {
        ret = sql_fail(db, "reading verdict history");
        goto cleanup;
    }
    if (h.scenario && (ret = hist_emit(t, &h, o.last)) < 0)
        goto cleanup;
    ret = print_rows(t,
                     o.scenario || o.variant ? "no recorded run matches\n"
                                             : "no runs recorded in this database\n",
                     out);
cleanup:
    sqlite3_finalize(st);
    hist_reset(&h);
    free(h.ring);
    fl_report_table_free(t);
    return ret;
}

int fl_report_changed(sqlite3 *db, FILE *out, const char *rev)
{
    sqlite3_stmt *st = NULL;
    struct fl_report_table *t = NULL;
    int64_t at;
    int ret, rc;
    char title[96];

    if (!rev || !*rev)
        return -EINVAL;
    if ((ret = first_run_at(db, rev, &at)) < 0)
        return ret;
    snprintf(title, sizeof title, "AT %.12s", rev);
    const struct fl_report_col cols[] = {
        {.title = "SCENARIO", .max_width = 40},
        {.title = "VARIANT", .max_width = 32},
        {.title = title, .verdict = true},
        {.title = "NOW", .verdict = true},
        {.title = "NOW REV"},
        {.title = "NOW RUN"},
    };
    /* base: latest finished run at rev per scenario/variant; now: latest
     * finished run after it. */
    if (sqlite3_prepare_v2(
            db,
            "WITH fin AS (SELECT * FROM runs WHERE verdict IN ('pass','fail','error')),"
            " base AS (SELECT id, scenario, variant, verdict, started_at, ROW_NUMBER() OVER"
            "   (PARTITION BY scenario, variant ORDER BY started_at DESC, id DESC) AS rn"
            "   FROM fin WHERE " FL_REPORT_REV_IS(
                "?1") "),"
                      " later AS (SELECT f.scenario, f.variant, f.verdict, f.git_rev, f.run_id,"
                      "   ROW_NUMBER() OVER (PARTITION BY f.scenario, f.variant"
                      "   ORDER BY f.started_at DESC, f.id DESC) AS rn"
                      "   FROM fin f JOIN base b ON b.rn = 1 AND b.scenario = f.scenario"
                      "   AND b.variant = f.variant"
                      "   WHERE f.started_at > b.started_at OR (f.started_at = b.started_at AND "
                      "f.id > b.id))"
                      " SELECT b.scenario, b.variant, b.verdict, l.verdict, l.git_rev, l.run_id"
                      " FROM base b JOIN later l ON l.rn = 1 AND l.scenario = b.scenario"
                      " AND l.variant = b.variant"
                      " WHERE b.rn = 1 AND l.verdict <> b.verdict ORDER BY b.scenario, b.variant",
            -1, &st, NULL) != SQLITE_OK)
        return sql_fail(db, "comparing verdicts");
    sqlite3_bind_text(st, 1, rev, -1, SQLITE_STATIC);
    t = fl_report_table_new(cols, 6);
    if (!t) {
        ret = -ENOMEM;
        goto cleanup;
    }
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        char v1[16], v2[16];
        const char *variant = col_text(st, 1);
        const char *cells[6] = {col_text(st, 0),
                                variant && *variant ? variant : "-",
                                fl_report_verdict_upper(col_text(st, 2), v1, sizeof v1),
                                fl_report_verdict_upper(col_text(st, 3), v2, sizeof v2),
                                col_text(st, 4),
                                col_text(st, 5)};
        if ((ret = fl_report_table_add(t, cells)) < 0)
            goto cleanup;
    }
    if (rc != SQLITE_DONE) {
        ret = sql_fail(db, "comparing verdicts");
        goto cleanup;
    }
    char empty[512];
    snprintf(empty, sizeof empty, "no scenario changed verdict since %s\n", rev);
    ret = print_rows(t, empty, out);
cleanup:
    sqlite3_finalize(st);
    fl_report_table_free(t);
    return ret;
}
