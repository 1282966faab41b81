/*
 * history_html.c: the HTML report's verdict history across runs, per
 * scenario and variant.
 *
 * For every scenario/variant that has a run in the report, from the whole
 * database (not only the runs the report shows): how many runs, passed,
 * failed and errored; the last FL_HTML_HISTORY_LAST verdicts, oldest on the
 * left, as coloured squares (a square of a run in this report links to its
 * section; each has a tooltip with the run, its revision, start and
 * reason); and where the current streak began: "failing since run R (rev
 * X, date)", the question a regression hunt starts from.  Pairs whose last
 * run did not pass come first, then by scenario and variant.
 */
#include "reports/html_int.h"

#include <errno.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

#define FL_HTML_HISTORY_LAST 30

enum { H_ID, H_RUN_ID, H_VERDICT, H_STARTED, H_REV, H_REASON };

static const char *square_fill(const char *v)
{
    return !v                    ? "#777"
           : !strcmp(v, "pass")  ? "#2e7d32"
           : !strcmp(v, "fail")  ? "#c62828"
           : !strcmp(v, "error") ? "#ef6c00"
                                 : "#777";
}

static bool shown(const struct fl_rows *runs, size_t id_col, int64_t id)
{
    for (size_t i = 0; i < runs->n; i++)
        if (fl_rows_i(runs, i, id_col) == id)
            return true;
    return false;
}

/* One pair: its counts, its last runs (newest first in h), the streak. */
struct pair {
    char *scenario, *variant;
    int64_t runs, pass, fail, error;
    struct fl_rows h;
};

/* sql prepared with ?1 bound to the pair's scenario and ?2 to its variant;
 * NULL on an SQLite error. */
static sqlite3_stmt *pair_query(sqlite3 *db, const struct pair *p, const char *sql)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
        sqlite3_finalize(st);
        return NULL;
    }
    sqlite3_bind_text(st, 1, p->scenario, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, p->variant, -1, SQLITE_STATIC);
    return st;
}

static int load_pair(sqlite3 *db, struct pair *p, char *err, size_t errlen)
{
    int ret = 0;
    sqlite3_stmt *st = pair_query(db, p,
                                  "SELECT count(*), sum(verdict='pass'), sum(verdict='fail'),"
                                  " sum(verdict='error') FROM runs"
                                  " WHERE scenario=?1 AND variant IS ?2");
    if (!st || sqlite3_step(st) != SQLITE_ROW)
        goto sqlerr;
    p->runs = sqlite3_column_int64(st, 0);
    p->pass = sqlite3_column_int64(st, 1);
    p->fail = sqlite3_column_int64(st, 2);
    p->error = sqlite3_column_int64(st, 3);
    sqlite3_finalize(st);
    /* newest first; a streak longer than the squares is followed below */
    st = pair_query(db, p,
                    "SELECT id, run_id, verdict, started_at, git_rev, reason FROM runs"
                    " WHERE scenario=?1 AND variant IS ?2 ORDER BY started_at DESC, id DESC");
    if (!st)
        goto sqlerr;
    ret = fl_rows_step(&p->h, st);
    if (ret == -EIO)
        goto sqlerr;
    sqlite3_finalize(st);
    return ret;
sqlerr:
    snprintf(err, errlen, "reading the verdict history of %s: %s", p->scenario, sqlite3_errmsg(db));
    sqlite3_finalize(st);
    return -EIO;
}

static bool is_pass(const char *v)
{
    return v && !strcmp(v, "pass");
}

static int by_state(const void *a, const void *b)
{
    const struct pair *x = a, *y = b;
    bool xb = x->h.n && !is_pass(fl_rows_s(&x->h, 0, H_VERDICT));
    bool yb = y->h.n && !is_pass(fl_rows_s(&y->h, 0, H_VERDICT));
    if (xb != yb)
        return xb ? -1 : 1;
    int c = strcmp(x->scenario, y->scenario);
    return c ? c : strcmp(x->variant ? x->variant : "", y->variant ? y->variant : "");
}

static void put_streak(FILE *f, const struct pair *p)
{
    const struct fl_rows *h = &p->h;
    if (!h->n)
        return;
    bool passing = is_pass(fl_rows_s(h, 0, H_VERDICT));
    size_t k = 0;
    while (k + 1 < h->n && is_pass(fl_rows_s(h, k + 1, H_VERDICT)) == passing)
        k++;
    char when[64];
    fl_html_fmt_time(fl_rows_i(h, k, H_STARTED), when, sizeof when);
    fprintf(f, "%s since %s", passing ? "passing" : "not passing",
            k + 1 == h->n ? "its first run, " : "");
    fl_html_put(f, fl_rows_s(h, k, H_RUN_ID));
    fputs(" (rev ", f);
    fl_html_put(f, fl_rows_s(h, k, H_REV) ? fl_rows_s(h, k, H_REV) : "-");
    fprintf(f, ", %s): %zu run%s", when, k + 1, k ? "s" : "");
}

static void put_squares(FILE *f, const struct pair *p, const struct fl_rows *runs, size_t id_col)
{
    size_t n = p->h.n < FL_HTML_HISTORY_LAST ? p->h.n : FL_HTML_HISTORY_LAST;
    fprintf(f,
            "<svg class=\"hist\" width=\"%zu\" height=\"12\" viewBox=\"0 0 %zu 12\" "
            "xmlns=\"http://www.w3.org/2000/svg\">",
            n * 12, n * 12);
    for (size_t j = 0; j < n; j++) {
        size_t i = n - 1 - j; /* oldest on the left */
        const char *v = fl_rows_s(&p->h, i, H_VERDICT);
        int64_t id = fl_rows_i(&p->h, i, H_ID);
        bool link = shown(runs, id_col, id);
        if (link)
            fprintf(f, "<a href=\"#run-%lld\">", (long long)id);
        fprintf(f, "<rect x=\"%zu\" y=\"1\" width=\"10\" height=\"10\" fill=\"%s\"><title>", j * 12,
                square_fill(v));
        char when[64];
        fl_html_fmt_time(fl_rows_i(&p->h, i, H_STARTED), when, sizeof when);
        fl_html_putf(f, "%s %s, rev %s, %s", fl_rows_s(&p->h, i, H_RUN_ID), v ? v : "?",
                     fl_rows_s(&p->h, i, H_REV) ? fl_rows_s(&p->h, i, H_REV) : "-", when);
        if (fl_rows_s(&p->h, i, H_REASON) && *fl_rows_s(&p->h, i, H_REASON)) {
            fputs(": ", f);
            fl_html_put(f, fl_rows_s(&p->h, i, H_REASON));
        }
        fputs("</title></rect>", f);
        if (link)
            fputs("</a>", f);
    }
    fputs("</svg>", f);
}

int fl_html_history(sqlite3 *db, FILE *f, const struct fl_rows *runs, size_t scenario_col,
                    size_t variant_col, size_t id_col, char *err, size_t errlen)
{
    struct pair *pairs = NULL;
    size_t np = 0;
    int ret = 0;
    for (size_t i = 0; i < runs->n; i++) {
        const char *sc = fl_rows_s(runs, i, scenario_col), *va = fl_rows_s(runs, i, variant_col);
        bool seen = false;
        for (size_t k = 0; k < np && !seen; k++)
            seen = !strcmp(pairs[k].scenario, sc ? sc : "") &&
                   !strcmp(pairs[k].variant ? pairs[k].variant : "\x01", va ? va : "\x01");
        if (seen || !sc)
            continue;
        struct pair *g = realloc(pairs, (np + 1) * sizeof *pairs);
        if (!g) {
            ret = -ENOMEM;
            goto cleanup;
        }
        pairs = g;
        pairs[np] = (struct pair){.scenario = strdup(sc), .variant = va ? strdup(va) : NULL};
        if (!pairs[np].scenario || (va && !pairs[np].variant)) {
            np++;
            ret = -ENOMEM;
            goto cleanup;
        }
        if ((ret = load_pair(db, &pairs[np++], err, errlen)) < 0)
            goto cleanup;
    }
    if (!np)
        goto cleanup;
    qsort(pairs, np, sizeof *pairs, by_state);
    fprintf(f,
            "<h2>Verdict history</h2>\n<p class=\"meta\">Every run recorded of the scenarios "
            "above, not only this report's: the last %d, oldest on the left (hover for the "
            "run; a square of a run in this report links to it).</p>\n"
            "<table class=\"history\"><tr><th>scenario</th><th>variant</th><th>runs</th>"
            "<th>pass</th><th>fail</th><th>error</th><th>last %d</th><th>streak</th></tr>\n",
            FL_HTML_HISTORY_LAST, FL_HTML_HISTORY_LAST);
    for (size_t k = 0; k < np; k++) {
        struct pair *p = &pairs[k];
        bool bad = p->h.n && !is_pass(fl_rows_s(&p->h, 0, H_VERDICT));
        fprintf(f, "<tr%s><td>", bad ? " class=\"bad\"" : "");
        fl_html_put(f, p->scenario);
        fputs("</td><td>", f);
        fl_html_put(f, p->variant && *p->variant ? p->variant : "-");
        fprintf(f,
                "</td><td class=\"num\">%lld</td><td class=\"num\">%lld</td>"
                "<td class=\"num\">%lld</td><td class=\"num\">%lld</td><td>",
                (long long)p->runs, (long long)p->pass, (long long)p->fail, (long long)p->error);
        put_squares(f, p, runs, id_col);
        fputs("</td><td>", f);
        put_streak(f, p);
        fputs("</td></tr>\n", f);
    }
    fputs("</table>\n", f);
cleanup:
    for (size_t k = 0; k < np; k++) {
        free(pairs[k].scenario);
        free(pairs[k].variant);
        fl_rows_free(&pairs[k].h);
    }
    free(pairs);
    if (ret == -ENOMEM && errlen && !err[0])
        snprintf(err, errlen, "out of memory");
    return ret;
}
