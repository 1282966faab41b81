/*
 * html_int.h: what the HTML report's pieces share (internal to reports/):
 * escaping, times, a small in-memory copy of query results, and the
 * per-run timeline section that html.c places in the document.
 */
#ifndef FL_REPORT_HTML_INT_H
#define FL_REPORT_HTML_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct sqlite3;
struct sqlite3_stmt;

/* Writes s HTML-escaped (& < > " ' as entities; invalid UTF-8 and control
 * characters other than tab/newline as '?'); NULL writes nothing. */
void fl_html_put(FILE *f, const char *s);
/* fl_html_put of a printf-formatted string. */
void fl_html_putf(FILE *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A wall-clock time (ms since the epoch) for people, local time:
 * "2026-11-21 11:00:00", or "-" when it cannot be shown. */
const char *fl_html_fmt_time(int64_t unix_ms, char *buf, size_t len);
/* Milliseconds since run start for people: "850ms", "1.25s", "2m03.4s". */
const char *fl_html_fmt_ms(int64_t ms, char *buf, size_t len);

/* All rows of one query, every column kept as text (NULL stays NULL). */
struct fl_rows {
    size_t n, ncol;
    char **cell; /* cell[row * ncol + col] */
};

/* Runs sql with ?1 bound to run (the runs.id); 0, -ENOMEM, or -EIO with
 * the SQLite message written to err. */
int fl_rows_load(struct sqlite3 *db, struct fl_rows *r, const char *sql, int64_t run, char *err,
                 size_t errlen);
/* Appends every row st yields (columns as in r, when r has rows already):
 * 0, -ENOMEM, -EINVAL (other columns), -EIO (SQLite error; see errmsg). */
int fl_rows_step(struct fl_rows *r, struct sqlite3_stmt *st);
void fl_rows_free(struct fl_rows *r);
static inline const char *fl_rows_s(const struct fl_rows *r, size_t i, size_t j)
{
    return r->cell[i * r->ncol + j];
}
static inline bool fl_rows_null(const struct fl_rows *r, size_t i, size_t j)
{
    return !r->cell[i * r->ncol + j];
}
int64_t fl_rows_i(const struct fl_rows *r, size_t i, size_t j); /* 0 for NULL */

/* The run's section body: the SVG timeline, then the checks, processes and
 * events tables.  duration_ms < 0 when the run has none recorded.  0, or
 * a negative errno with err set. */
int fl_html_timeline(struct sqlite3 *db, FILE *f, int64_t run, int64_t duration_ms, char *err,
                     size_t errlen);

/* log_lines.c: the lines of a process's log (log_path and log_path.times,
 * when they are still there) as marks in its lane: the plot (x0, plot_w
 * pixels for span ms) cut into LOG_BUCKETS slices, each slice that holds
 * lines a mark 5 pixels high at y whose title lists LOG_PER_BUCKET of
 * them (the first and the last; each cut to LOG_LINE_MAX characters) with
 * their times.  The number of lines the log holds, or -1 when it cannot be read. */
#define LOG_BUCKETS 60
#define LOG_PER_BUCKET 5
#define LOG_LINE_MAX 160
long fl_html_log_marks(FILE *f, const char *log_path, double x0, double plot_w, double span,
                       double y);

/* The verdict history section (history_html.c): for each scenario/variant
 * of the report's runs (columns of runs: scenario, variant, runs.id), its
 * recorded history from the whole database.  0, or a negative errno with
 * err set. */
int fl_html_history(struct sqlite3 *db, FILE *f, const struct fl_rows *runs, size_t scenario_col,
                    size_t variant_col, size_t id_col, char *err, size_t errlen);

#endif
