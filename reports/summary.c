/*
 * summary.c: what a person sees at the end of `faultline run`: one verdict
 * line per run as it finishes (fl_report_verdict_line) and the table of all
 * runs with a totals line (fl_report_summary).  Both work from the rows the
 * run engine holds in memory, not from the database, so they print even when
 * recording failed.  Rows of the reproducer suite (scenarios named
 * sNNN-LAYOUT, scenarios/seeds/) get their own columns: seed, layout,
 * protocol.
 */
#include "reports/report.h"
#include "reports/table.h"

#include <ctype.h>
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
        fprintf(out, "  (%s)", fl_report_one_line(text, FL_REPORT_LINE_REASON, why, sizeof why));
    fputc('\n', out);
}

bool fl_report_seed_labels(const struct fl_report_row *row, char *seed, size_t seedlen,
                           char *layout, size_t layoutlen, char *protocol, size_t protolen)
{
    const char *nm = row->scenario;
    if (!nm || nm[0] != 's' || !isdigit((unsigned char)nm[1]) || !isdigit((unsigned char)nm[2]) ||
        !isdigit((unsigned char)nm[3]) || nm[4] != '-' || !nm[5])
        return false;
    snprintf(seed, seedlen, "S%.3s", nm + 1);
    snprintf(protocol, protolen, "-");
    size_t o = (size_t)snprintf(layout, layoutlen, "%s", nm + 5);
    /* variant terms: protocol=V is the protocol, the others extend the layout */
    const char *v = row->variant ? row->variant : "";
    while (*v) {
        size_t l = strcspn(v, ",");
        if (l > 9 && !strncmp(v, "protocol=", 9)) {
            snprintf(protocol, protolen, "%.*s", (int)(l - 9), v + 9);
        } else if (l && o < layoutlen) {
            o += (size_t)snprintf(layout + o, layoutlen - o, " %.*s", (int)l, v);
        }
        v += l;
        if (*v == ',')
            v++;
    }
    return true;
}

/* The reproducer suite's table: SEED LAYOUT PROTOCOL instead of SCENARIO
 * VARIANT, and the observed text whole (it carries the seed's error) but
 * on a terminal, where it is cut to fit rather than wrap every row: after
 * the other long columns, down to 60 characters (then all of them alike). */
static int seed_summary(struct fl_report_table **tp, const struct fl_report_row *rows, size_t n)
{
    static const struct fl_report_col cols[] = {
        {.title = "SEED"},
        {.title = "LAYOUT", .max_width = 40, .min_width = 16},
        {.title = "PROTOCOL"},
        {.title = "EXPECTED", .max_width = 36, .min_width = 16},
        {.title = "OBSERVED", .fit = true, .min_width = 60},
        {.title = "VERDICT", .verdict = true},
        {.title = "TIME", .right = true},
        {.title = "REASON", .max_width = 60},
    };
    struct fl_report_table *t = *tp = fl_report_table_new(cols, 8);
    if (!t)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        const struct fl_report_row *r = &rows[i];
        char seed[16], layout[256], proto[64], d[32], v[16];
        fl_report_seed_labels(r, seed, sizeof seed, layout, sizeof layout, proto, sizeof proto);
        const char *cells[8] = {
            seed,
            layout,
            proto,
            r->expected,
            r->observed,
            fl_report_verdict_upper(r->verdict ? r->verdict : "error", v, sizeof v),
            fl_report_fmt_duration(r->duration_ms, d, sizeof d),
            r->reason && *r->reason ? r->reason : "-",
        };
        int err = fl_report_table_add(t, cells);
        if (err)
            return err;
    }
    return 0;
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
    bool seeds = n > 0;
    char sb[16], lb[256], pb[64];
    for (size_t i = 0; i < n && seeds; i++)
        seeds = fl_report_seed_labels(&rows[i], sb, sizeof sb, lb, sizeof lb, pb, sizeof pb);
    if (seeds) {
        fl_report_table_free(t);
        t = NULL;
        err = seed_summary(&t, rows, n);
    }
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
        if (seeds)
            continue;
        const char *cells[7] = {
            r->scenario,
            r->variant && *r->variant ? r->variant : "-",
            r->expected,
            r->observed,
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
            pass, fail, error, error == 1 ? "" : "s", fl_report_fmt_duration(total, td, sizeof td));
    return ferror(out) ? -EIO : 0;
}
