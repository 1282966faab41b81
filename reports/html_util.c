/*
 * html_util.c: small helpers of the HTML report: escaping any text from the
 * database for HTML (the database holds whatever scenarios and processes
 * wrote, so nothing is trusted), formatting times relative to a run's start,
 * and loading a query's rows into memory (fl_rows) so the timeline can walk
 * them several times while drawing.
 */
#include "reports/html_int.h"
#include "reports/table.h"

#include <errno.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void fl_html_put(FILE *f, const char *s)
{
    static const char *const ent[128] = {
        ['&'] = "&amp;",  ['<'] = "&lt;",   ['>'] = "&gt;",
        ['"'] = "&quot;", ['\''] = "&#39;", ['\r'] = "?",
    };
    fl_report_xml_escape(f, s, ent);
}

void fl_html_putf(FILE *f, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fl_html_put(f, buf);
}

const char *fl_html_fmt_ms(int64_t ms, char *buf, size_t len)
{
    if (ms < 0)
        snprintf(buf, len, "-");
    else if (ms < 1000)
        snprintf(buf, len, "%lldms", (long long)ms);
    else if (ms < 60000)
        snprintf(buf, len, "%.3gs", (double)ms / 1000.0);
    else
        snprintf(buf, len, "%lldm%04.1fs", (long long)(ms / 60000), (double)(ms % 60000) / 1000.0);
    return buf;
}

const char *fl_html_fmt_time(int64_t unix_ms, char *buf, size_t len)
{
    time_t t = (time_t)(unix_ms / 1000);
    struct tm tm;
    if (!localtime_r(&t, &tm) || !strftime(buf, len, "%Y-%m-%d %H:%M:%S", &tm))
        snprintf(buf, len, "-");
    return buf;
}

int fl_rows_step(struct fl_rows *r, sqlite3_stmt *st)
{
    size_t ncol = (size_t)sqlite3_column_count(st);
    int rc;
    if (r->n && r->ncol != ncol)
        return -EINVAL;
    r->ncol = ncol;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        char **c = realloc(r->cell, (r->n + 1) * ncol * sizeof *c);
        if (!c)
            return -ENOMEM;
        r->cell = c;
        c += r->n * ncol;
        for (size_t j = 0; j < ncol; j++)
            c[j] = NULL;
        r->n++; /* counted now: fl_rows_free frees what is set */
        for (size_t j = 0; j < ncol; j++) {
            const char *t = (const char *)sqlite3_column_text(st, (int)j);
            if (t && !(c[j] = strdup(t)))
                return -ENOMEM;
        }
    }
    return rc == SQLITE_DONE ? 0 : -EIO;
}

int fl_rows_load(sqlite3 *db, struct fl_rows *r, const char *sql, int64_t run, char *err,
                 size_t errlen)
{
    sqlite3_stmt *st = NULL;
    int ret;

    memset(r, 0, sizeof *r);
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
        ret = -EIO;
    } else {
        sqlite3_bind_int64(st, 1, run);
        ret = fl_rows_step(r, st);
    }
    if (ret == -EIO)
        snprintf(err, errlen, "database %s: reading a run: %s",
                 sqlite3_db_filename(db, "main") ? sqlite3_db_filename(db, "main") : "?",
                 sqlite3_errmsg(db));
    else if (ret)
        snprintf(err, errlen, "out of memory reading a run");
    sqlite3_finalize(st);
    if (ret)
        fl_rows_free(r);
    return ret;
}

void fl_rows_free(struct fl_rows *r)
{
    for (size_t i = 0; i < r->n * r->ncol; i++)
        free(r->cell[i]);
    free(r->cell);
    memset(r, 0, sizeof *r);
}

int64_t fl_rows_i(const struct fl_rows *r, size_t i, size_t j)
{
    const char *s = fl_rows_s(r, i, j);
    return s ? strtoll(s, NULL, 10) : 0;
}
