/*
 * html.c: the HTML report (fl_report_html, `faultline report`, `faultline run
 * --html`).  Picks the runs (given ids, the most recent N, or those since a
 * revision), orders them failing first (fail, error, running, then pass;
 * oldest first within each), and writes one self-contained page: inline CSS,
 * inline SVG, no script and no external asset, so it can be attached to a CI
 * job or mailed.  The page holds a summary table of the runs, the verdict
 * history of their scenarios across every recorded run (history_html.c),
 * and, per run, a <details> section (open unless it passed) whose body
 * timeline.c writes.
 *
 * Everything read from the database is escaped (fl_html_put); element ids
 * are made from the integer runs.id, never from text.  The file is written
 * beside its final path and renamed into place, so a browser or CI never
 * sees half a report.
 */
#include "reports/html_int.h"
#include "reports/report.h"
#include "reports/table.h"

#include <errno.h>
#include <limits.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum {
    R_ID,
    R_RUN_ID,
    R_SCENARIO,
    R_VARIANT,
    R_VERDICT,
    R_DURATION,
    R_STARTED,
    R_REASON,
    R_SEED,
    R_REV,
    R_HOST,
    R_FILE
};

#define RUN_COLS                                                                            \
    "SELECT id, run_id, scenario, variant, verdict, duration_ms, started_at, reason, seed," \
    " git_rev, hostname, scenario_file FROM runs"

static const char *css =
    "body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}"
    "h1{font-size:1.4em;margin:0 0 .2em}h2{font-size:1.15em;margin:1em 0 .3em}"
    "h4{margin:.8em 0 .3em}svg.hist{vertical-align:middle}"
    ".meta,.note{color:#555}.note{font-style:italic}"
    "table{border-collapse:collapse;margin:.3em 0}"
    "th,td{border:1px solid #ccc;padding:2px 6px;text-align:left;vertical-align:top}"
    "th{background:#f0f0f0}td.num{text-align:right;white-space:nowrap}"
    "td.cmd{font-family:monospace;font-size:12px;max-width:40em;word-break:break-all}"
    "td.cmd pre{margin:0;font:inherit;white-space:pre-wrap}"
    "pre.log{font-size:12px;background:#f7f7f7;border:1px solid #ddd;padding:4px 6px;"
    "margin:.2em 0 .6em;white-space:pre-wrap;word-break:break-all;max-height:32em;overflow:auto}"
    "tr.bad td{background:#fdecea}"
    ".v{font-weight:bold;padding:0 4px;border-radius:3px;color:#fff}"
    ".v.pass{background:#2e7d32}.v.fail{background:#c62828}.v.error{background:#ef6c00}"
    ".v.running,.v.other{background:#777}"
    "details.run{border:1px solid #ccc;border-radius:4px;margin:.8em 0;padding:.3em .6em}"
    "details.run.fail,details.run.error{border-color:#c62828}"
    "details.run>summary{cursor:pointer;font-size:1.05em}"
    "svg.tl{display:block;margin:.5em 0;max-width:100%;height:auto;font:11px sans-serif}"
    "svg .grid{stroke:#ddd}svg .tick{fill:#666;text-anchor:middle}"
    "svg .lane{fill:#fafafa;fill-opacity:.6}svg .lane.odd{fill:#f0f0f0}"
    "svg .llabel,svg .flabel{fill:#222}svg .ffail .flabel{fill:#c62828}"
    "svg .fbar{fill:#f9a825}svg .fbar.unhealed{fill:#fff3c4;stroke:#f9a825;"
    "stroke-dasharray:4 2}svg .ffail .fbar,svg .ffail .fmark{fill:#c62828}"
    "svg .fmark{fill:#e65100}svg .fband{fill:#f9a825;fill-opacity:.22}"
    "svg .fline{fill:#e65100;fill-opacity:.7}"
    "svg .proc.pok{fill:#66bb6a}svg .proc.pbad{fill:#ffa726}svg .proc.psig{fill:#e53935}"
    "svg .proc.pstop{fill:#90a4ae}"
    "svg .proc.prun{fill:#bdbdbd}svg text.pend{font-weight:bold}"
    "svg text.pend{paint-order:stroke;stroke:#fff;stroke-width:3px;stroke-linejoin:round}"
    "svg text.psig{fill:#c62828}svg text.pbad{fill:#e65100}svg .gen{fill:#333;font-size:9px}"
    "svg circle.ev,svg path.ev{fill:#fff;stroke:#1565c0;stroke-width:1.5}"
    "svg .eck{fill:#fff;stroke:#6a1b9a;stroke-width:1.5}"
    "svg .ebad{fill:#fff;stroke:#c62828;stroke-width:2}"
    "svg path.sync{fill:#1565c0}svg path.eck.sync{fill:#6a1b9a}svg path.ebad.sync{fill:#c62828}"
    "svg .end{stroke:#222;stroke-dasharray:3 3}svg .logm{fill:#78909c;fill-opacity:.55}"
    ".legend span{margin-right:1.2em}";

static int verdict_rank(const char *v)
{
    if (!v)
        return 3;
    if (!strcmp(v, "fail"))
        return 0;
    if (!strcmp(v, "error"))
        return 1;
    if (!strcmp(v, "running"))
        return 2;
    return strcmp(v, "pass") ? 3 : 4;
}

static const char *verdict_class(const char *v)
{
    if (v &&
        (!strcmp(v, "pass") || !strcmp(v, "fail") || !strcmp(v, "error") || !strcmp(v, "running")))
        return v;
    return "other";
}

static const struct fl_rows *sort_rows;

static int by_rank(const void *a, const void *b)
{
    size_t i = *(const size_t *)a, j = *(const size_t *)b;
    int ri = verdict_rank(fl_rows_s(sort_rows, i, R_VERDICT));
    int rj = verdict_rank(fl_rows_s(sort_rows, j, R_VERDICT));
    if (ri != rj)
        return ri - rj;
    int64_t si = fl_rows_i(sort_rows, i, R_STARTED), sj = fl_rows_i(sort_rows, j, R_STARTED);
    if (si != sj)
        return si < sj ? -1 : 1;
    int64_t ii = fl_rows_i(sort_rows, i, R_ID), ij = fl_rows_i(sort_rows, j, R_ID);
    return ii < ij ? -1 : ii > ij;
}

static const char *db_name(sqlite3 *db)
{
    const char *p = sqlite3_db_filename(db, "main");
    return p && *p ? p : "(memory)";
}

static int sql_err(sqlite3 *db, const char *what, char *err, size_t errlen)
{
    snprintf(err, errlen, "database %s: %s: %s", db_name(db), what, sqlite3_errmsg(db));
    return -EIO;
}

/* Fills runs with the selected runs (unordered).  0 or negative errno + err. */
static int select_runs(sqlite3 *db, const struct fl_report_html_opts *o, struct fl_rows *runs,
                       char *err, size_t errlen)
{
    sqlite3_stmt *st = NULL;
    int ret = 0;

    if (sqlite3_prepare_v2(db, "SELECT count(*) FROM runs", -1, &st, NULL) != SQLITE_OK ||
        sqlite3_step(st) != SQLITE_ROW) {
        ret = sql_err(db, "counting runs", err, errlen);
        goto cleanup;
    }
    if (sqlite3_column_int64(st, 0) == 0) {
        snprintf(err, errlen,
                 "database %s holds no runs yet: nothing to report ('faultline run "
                 "SCENARIO --db %s' records runs there)",
                 db_name(db), db_name(db));
        ret = -ENODATA;
        goto cleanup;
    }
    sqlite3_finalize(st);
    st = NULL;

    if (o->n_run_ids) {
        if (sqlite3_prepare_v2(db, RUN_COLS " WHERE run_id = ?1", -1, &st, NULL) != SQLITE_OK) {
            ret = sql_err(db, "reading runs", err, errlen);
            goto cleanup;
        }
        for (size_t i = 0; i < o->n_run_ids; i++) {
            size_t before = runs->n;
            bool dup = false;
            for (size_t k = 0; k < i; k++)
                dup |= !strcmp(o->run_ids[k], o->run_ids[i]);
            if (dup)
                continue;
            sqlite3_reset(st);
            sqlite3_bind_text(st, 1, o->run_ids[i], -1, SQLITE_STATIC);
            if ((ret = fl_rows_step(runs, st)) < 0) {
                if (ret == -EIO)
                    sql_err(db, "reading runs", err, errlen);
                goto cleanup;
            }
            if (runs->n == before && !o->skip_missing) {
                snprintf(err, errlen,
                         "no run '%s' in database %s ('faultline runs --db %s' "
                         "lists the recorded runs)",
                         o->run_ids[i], db_name(db), db_name(db));
                ret = -ENOENT;
                goto cleanup;
            }
        }
    } else {
        int64_t since = 0;
        if (o->since_rev) {
            if (sqlite3_prepare_v2(db,
                                   "SELECT min(started_at) FROM runs WHERE length(?1) > 0"
                                   " AND " FL_REPORT_REV_IS("?1"),
                                   -1, &st, NULL) != SQLITE_OK) {
                ret = sql_err(db, "looking up a revision", err, errlen);
                goto cleanup;
            }
            sqlite3_bind_text(st, 1, o->since_rev, -1, SQLITE_STATIC);
            if (sqlite3_step(st) != SQLITE_ROW || sqlite3_column_type(st, 0) == SQLITE_NULL) {
                snprintf(err, errlen,
                         "no run recorded at revision %s in database %s "
                         "('faultline runs --db %s' shows the recorded revisions' runs)",
                         o->since_rev, db_name(db), db_name(db));
                ret = -ENOENT;
                goto cleanup;
            }
            since = sqlite3_column_int64(st, 0);
            sqlite3_finalize(st);
            st = NULL;
        }
        if (sqlite3_prepare_v2(db,
                               RUN_COLS " WHERE started_at >= ?1"
                                        " ORDER BY started_at DESC, id DESC LIMIT ?2",
                               -1, &st, NULL) != SQLITE_OK) {
            ret = sql_err(db, "reading runs", err, errlen);
            goto cleanup;
        }
        sqlite3_bind_int64(st, 1, since);
        sqlite3_bind_int(st, 2, o->since_rev && !o->last ? -1 : o->last ? o->last : 20);
        if ((ret = fl_rows_step(runs, st)) < 0) {
            if (ret == -EIO)
                sql_err(db, "reading runs", err, errlen);
            goto cleanup;
        }
    }
    if (!runs->n) {
        snprintf(err, errlen, "none of the given runs is in database %s", db_name(db));
        ret = -ENODATA;
    }
cleanup:
    sqlite3_finalize(st);
    if (ret == -ENOMEM)
        snprintf(err, errlen, "out of memory reading the runs");
    return ret;
}

static void put_verdict(FILE *f, const char *v)
{
    char b[16];
    fprintf(f, "<span class=\"v %s\">", verdict_class(v));
    fl_html_put(f, fl_report_verdict_upper(v, b, sizeof b));
    fputs("</span>", f);
}

static void put_seed(FILE *f, const char *s)
{
    if (!s) {
        fputs("-", f);
        return;
    }
    /* seeds are unsigned 64-bit, stored in SQLite's signed integer */
    fprintf(f, "%llu", (unsigned long long)strtoll(s, NULL, 10));
}

static void put_started(FILE *f, int64_t ms)
{
    char b[64];
    fputs(fl_html_fmt_time(ms, b, sizeof b), f);
}

static void put_variant(FILE *f, const char *v)
{
    fl_html_put(f, v && *v ? v : "-");
}

static void put_duration(FILE *f, const struct fl_rows *r, size_t i)
{
    char b[32];
    if (fl_rows_null(r, i, R_DURATION))
        fputs("-", f);
    else
        fputs(fl_report_fmt_duration(fl_rows_i(r, i, R_DURATION), b, sizeof b), f);
}

static void write_summary(FILE *f, const struct fl_rows *r, const size_t *order)
{
    size_t pass = 0, fail = 0, error = 0, other = 0;
    for (size_t i = 0; i < r->n; i++) {
        int k = verdict_rank(fl_rows_s(r, i, R_VERDICT));
        pass += k == 4;
        fail += k == 0;
        error += k == 1;
        other += k == 2 || k == 3;
    }
    fprintf(f, "<p class=\"meta\">%zu run%s: %zu passed, %zu failed, %zu error%s", r->n,
            r->n == 1 ? "" : "s", pass, fail, error, error == 1 ? "" : "s");
    if (other)
        fprintf(f, ", %zu running or unknown", other);
    fputs(". Failing runs first; times on the timelines are from each run's start.</p>\n", f);
    fputs("<table class=\"summary\"><tr><th>verdict</th><th>scenario</th><th>variant</th>"
          "<th>time</th><th>reason</th><th>seed</th><th>git rev</th><th>started</th>"
          "<th>run</th></tr>\n",
          f);
    for (size_t k = 0; k < r->n; k++) {
        size_t i = order[k];
        bool bad = verdict_rank(fl_rows_s(r, i, R_VERDICT)) < 4;
        fprintf(f, "<tr%s><td>", bad ? " class=\"bad\"" : "");
        put_verdict(f, fl_rows_s(r, i, R_VERDICT));
        fputs("</td><td>", f);
        fl_html_put(f, fl_rows_s(r, i, R_SCENARIO));
        fputs("</td><td>", f);
        put_variant(f, fl_rows_s(r, i, R_VARIANT));
        fputs("</td><td class=\"num\">", f);
        put_duration(f, r, i);
        fputs("</td><td>", f);
        fl_html_put(f, fl_rows_s(r, i, R_REASON) ? fl_rows_s(r, i, R_REASON) : "");
        fputs("</td><td class=\"num\">", f);
        put_seed(f, fl_rows_s(r, i, R_SEED));
        fputs("</td><td>", f);
        fl_html_put(f, fl_rows_s(r, i, R_REV) ? fl_rows_s(r, i, R_REV) : "-");
        fputs("</td><td>", f);
        put_started(f, fl_rows_i(r, i, R_STARTED));
        fprintf(f, "</td><td><a href=\"#run-%lld\">", (long long)fl_rows_i(r, i, R_ID));
        fl_html_put(f, fl_rows_s(r, i, R_RUN_ID));
        fputs("</a></td></tr>\n", f);
    }
    fputs("</table>\n", f);
}

static const char *legend =
    "<p class=\"legend\"><span>Lanes: one per host/task</span>"
    "<span><svg width=\"22\" height=\"10\"><rect width=\"22\" height=\"10\" fill=\"#66bb6a\"/>"
    "</svg> process, exit 0</span>"
    "<span><svg width=\"22\" height=\"10\"><rect width=\"22\" height=\"10\" fill=\"#ffa726\"/>"
    "</svg> other exit</span>"
    "<span><svg width=\"22\" height=\"10\"><rect width=\"22\" height=\"10\" fill=\"#e53935\"/>"
    "</svg> killed by a signal (a fault, a crash)</span>"
    "<span><svg width=\"22\" height=\"10\"><rect width=\"22\" height=\"10\" fill=\"#90a4ae\"/>"
    "</svg> stopped by faultline at the run's end</span>"
    "<span><svg width=\"22\" height=\"10\"><rect width=\"22\" height=\"10\" fill=\"#bdbdbd\"/>"
    "</svg> running at the end</span>"
    "<span><svg width=\"22\" height=\"10\"><rect width=\"22\" height=\"10\" fill=\"#f9a825\"/>"
    "</svg> fault applied &#8594; healed</span>"
    "<span><svg width=\"10\" height=\"10\"><circle cx=\"5\" cy=\"5\" r=\"3.5\" fill=\"#fff\" "
    "stroke=\"#1565c0\" stroke-width=\"1.5\"/></svg> event</span>"
    "<span><svg width=\"10\" height=\"10\"><path d=\"M5 0l5 5l-5 5l-5 -5z\" fill=\"#1565c0\"/>"
    "</svg> sync point</span>"
    "<span><svg width=\"22\" height=\"10\"><rect y=\"5\" width=\"22\" height=\"5\" "
    "fill=\"#78909c\"/></svg> log lines (under a process, when its log is kept)</span>"
    "<span>purple: checkpoint events, red: failures. Hover for details.</span></p>\n";

static int write_doc(sqlite3 *db, FILE *f, const struct fl_rows *r, const size_t *order,
                     const char *title, char *err, size_t errlen)
{
    fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
          "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>",
          f);
    fl_html_put(f, title);
    fprintf(f, "</title>\n<style>%s</style>\n</head><body>\n<h1>", css);
    fl_html_put(f, title);
    fputs("</h1>\n<p class=\"meta\">From ", f);
    fl_html_put(f, db_name(db));
    fputs(", written ", f);
    put_started(f, (int64_t)time(NULL) * 1000);
    fputs(".</p>\n", f);
    write_summary(f, r, order);
    int hr = fl_html_history(db, f, r, R_SCENARIO, R_VARIANT, R_ID, err, errlen);
    if (hr < 0)
        return hr;
    fputs("<h2>Runs</h2>\n", f);
    fputs(legend, f);
    for (size_t k = 0; k < r->n; k++) {
        size_t i = order[k];
        const char *v = fl_rows_s(r, i, R_VERDICT);
        bool open = verdict_rank(v) < 4;
        fprintf(f, "<details class=\"run %s\" id=\"run-%lld\"%s><summary>", verdict_class(v),
                (long long)fl_rows_i(r, i, R_ID), open ? " open" : "");
        put_verdict(f, v);
        fputs(" <b>", f);
        fl_html_put(f, fl_rows_s(r, i, R_SCENARIO));
        fputs("</b> ", f);
        put_variant(f, fl_rows_s(r, i, R_VARIANT));
        fputs(" &#8212; ", f);
        put_duration(f, r, i);
        if (fl_rows_s(r, i, R_REASON) && *fl_rows_s(r, i, R_REASON)) {
            fputs(" &#8212; ", f);
            fl_html_put(f, fl_rows_s(r, i, R_REASON));
        }
        fputs("</summary>\n<p class=\"meta\">run ", f);
        fl_html_put(f, fl_rows_s(r, i, R_RUN_ID));
        fputs(", seed ", f);
        put_seed(f, fl_rows_s(r, i, R_SEED));
        fputs(", git rev ", f);
        fl_html_put(f, fl_rows_s(r, i, R_REV) ? fl_rows_s(r, i, R_REV) : "-");
        fputs(", started ", f);
        put_started(f, fl_rows_i(r, i, R_STARTED));
        fputs(" on ", f);
        fl_html_put(f, fl_rows_s(r, i, R_HOST) ? fl_rows_s(r, i, R_HOST) : "-");
        if (fl_rows_s(r, i, R_FILE)) {
            fputs(", scenario file ", f);
            fl_html_put(f, fl_rows_s(r, i, R_FILE));
        }
        fputs("</p>\n", f);
        int ret = fl_html_timeline(
            db, f, fl_rows_i(r, i, R_ID),
            fl_rows_null(r, i, R_DURATION) ? -1 : fl_rows_i(r, i, R_DURATION), err, errlen);
        if (ret)
            return ret;
        fputs("</details>\n", f);
    }
    fputs("</body></html>\n", f);
    return 0;
}

int fl_report_html(sqlite3 *db, const char *path, const struct fl_report_html_opts *opts, char *err,
                   size_t errlen)
{
    struct fl_report_html_opts o = opts ? *opts : (struct fl_report_html_opts){0};
    struct fl_rows runs = {0};
    size_t *order = NULL;
    char tmp[PATH_MAX] = "";
    FILE *f = NULL;
    bool sel_error = false;
    int ret;

    if (errlen)
        err[0] = '\0';
    if ((ret = select_runs(db, &o, &runs, err, errlen)) < 0) {
        sel_error = true;
        goto cleanup;
    }
    if (!(order = malloc(runs.n * sizeof *order))) {
        ret = -ENOMEM;
        snprintf(err, errlen, "out of memory");
        goto cleanup;
    }
    for (size_t i = 0; i < runs.n; i++)
        order[i] = i;
    sort_rows = &runs;
    qsort(order, runs.n, sizeof *order, by_rank);
    sort_rows = NULL;

    struct stat st;
    if (!*path || path[strlen(path) - 1] == '/' || (stat(path, &st) == 0 && S_ISDIR(st.st_mode))) {
        ret = -EISDIR;
        snprintf(err, errlen,
                 "%s is a directory; give the report a file path (e.g. %s%sreport.html)", path,
                 path, *path && path[strlen(path) - 1] == '/' ? "" : "/");
        goto cleanup;
    }
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid()) >= sizeof tmp) {
        ret = -ENAMETOOLONG;
        snprintf(err, errlen, "%s: path too long", path);
        tmp[0] = '\0';
        goto cleanup;
    }
    if ((ret = fl_report_mkdir_parents(path)) < 0) {
        snprintf(err, errlen, "cannot create the directory of %s: %s (give another path)", path,
                 strerror(-ret));
        tmp[0] = '\0';
        goto cleanup;
    }
    if (!(f = fopen(tmp, "w"))) {
        ret = -errno;
        snprintf(err, errlen, "cannot write the report beside %s (%s): %s (give another path)",
                 path, tmp, strerror(-ret));
        tmp[0] = '\0';
        goto cleanup;
    }
    if ((ret = write_doc(db, f, &runs, order, o.title ? o.title : "faultline report", err,
                         errlen)) < 0)
        goto cleanup;
    errno = 0;
    if (fflush(f) != 0 || ferror(f)) {
        ret = -(errno ? errno : EIO);
        snprintf(err, errlen, "writing %s: %s", tmp, strerror(-ret));
        goto cleanup;
    }
    if (fclose(f) != 0) {
        f = NULL;
        ret = -errno;
        snprintf(err, errlen, "writing %s: %s", tmp, strerror(-ret));
        goto cleanup;
    }
    f = NULL;
    if (rename(tmp, path) < 0) {
        ret = -errno;
        snprintf(err, errlen, "cannot rename %s to %s: %s", tmp, path, strerror(-ret));
        goto cleanup;
    }
    ret = (int)runs.n;
cleanup:
    /* the file's errors are not the selection's (-ENOENT: unknown run or revision) */
    if (ret == -ENOENT && !sel_error)
        ret = -EIO;
    if (f)
        fclose(f);
    if (ret < 0 && tmp[0])
        unlink(tmp);
    free(order);
    fl_rows_free(&runs);
    return ret;
}
