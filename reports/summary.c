/*
 * summary.c: what a person sees at the end of `faultline run`: one verdict
 * line per run as it finishes (fl_report_verdict_line) and the table of all
 * runs with a totals line (fl_report_summary).  Both work from the rows the
 * run engine holds in memory, not from the database, so they print even when
 * recording failed.
 */
#include "reports/report.h"
#include "reports/table.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void fl_report_verdict_line(FILE *out, const struct fl_report_row *row)
{
    char v[16], d[32], why[160];
    const char *text = row->reason && *row->reason ? row->reason : row->observed;
    bool color = fl_report_use_color(out);

    fl_report_verdict_upper(row->verdict, v, sizeof v);
    if (color)
        fprintf(out, "%s%s\033[0m", fl_report_verdict_color(row->verdict), v);
    else
        fputs(v, out);
    int gap = 6 - (int)strlen(v);
    fprintf(out, "%*s%s", gap < 1 ? 1 : gap, "", row->scenario ? row->scenario : "?");
    if (row->variant && *row->variant)
        fprintf(out, " %s", row->variant);
    fprintf(out, "  %s", fl_report_fmt_duration(row->duration_ms, d, sizeof d));
    if (text && *text)
        fprintf(out, "  (%s)", fl_report_one_line(text, 100, why, sizeof why));
    fputc('\n', out);
}

int fl_report_summary(FILE *out, const struct fl_report_row *rows, size_t n)
{
    static const struct fl_report_col cols[] = {
        {.title = "SCENARIO", .max_width = 40, .min_width = 28},
        {.title = "VARIANT", .max_width = 32, .min_width = 18},
        {.title = "EXPECTED", .max_width = 32},
        {.title = "OBSERVED", .max_width = 40},
        {.title = "VERDICT", .verdict = true},
        {.title = "TIME", .right = true},
        {.title = "REASON", .max_width = 60},
    };
    struct fl_report_table *t = fl_report_table_new(cols, 7);
    size_t pass = 0, fail = 0, error = 0;
    int64_t total = 0;
    int err = 0;
    char d[32], td[32], v[16];

    if (!t)
        return -ENOMEM;
    for (size_t i = 0; i < n && !err; i++) {
        const struct fl_report_row *r = &rows[i];
        const char *verdict = r->verdict ? r->verdict : "error";
        if (!strcmp(verdict, "pass"))
            pass++;
        else if (!strcmp(verdict, "fail"))
            fail++;
        else
            error++;
        if (r->duration_ms > 0)
            total += r->duration_ms;
        const char *cells[7] = {
            r->scenario, r->variant && *r->variant ? r->variant : "-", r->expected, r->observed,
            fl_report_verdict_upper(verdict, v, sizeof v),
            fl_report_fmt_duration(r->duration_ms, d, sizeof d),
            r->reason && *r->reason ? r->reason : "-",
        };
        err = fl_report_table_add(t, cells);
    }
    if (!err)
        err = fl_report_table_print(t, out);
    fl_report_table_free(t);
    if (err)
        return err;
    fprintf(out, "%zu run%s: %zu passed, %zu failed, %zu error%s in %s\n", n, n == 1 ? "" : "s",
            pass, fail, error, error == 1 ? "" : "s",
            fl_report_fmt_duration(total, td, sizeof td));
    return ferror(out) ? -EIO : 0;
}
