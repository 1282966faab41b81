/*
 * log_lines.c: a process's output on its lane of the HTML timeline.  The
 * harness keeps each task's output as it was written (LOG) and, beside it,
 * when each of its lines arrived (LOG.times: one decimal ms since the run's
 * start a line, the clock of events and faults; docs/schema.md).  Both are
 * read here, line by line together, and drawn as a thin strip under the
 * process's bar: the lane is cut into LOG_BUCKETS slices of time, and each
 * slice that holds lines is a mark whose <title> (hover, no script) lists
 * them with their times.
 *
 * Size: at most LOG_PER_BUCKET lines a slice (then "... and N more lines
 * until T"), each cut to LOG_LINE_MAX characters, so a process adds at most
 * LOG_BUCKETS x LOG_PER_BUCKET lines to the page whatever it printed; the
 * page says so.  A run whose directory is gone (a pass without --keep, or
 * `faultline gc`) has no logs to show: nothing is drawn.
 */
#include "reports/html_int.h"
#include "reports/table.h"

#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

struct bucket {
    size_t n;     /* lines in the slice */
    size_t shown; /* of them in text */
    int64_t last; /* time of the last line */
    char *text;   /* "T  line\n" for the first LOG_PER_BUCKET */
    size_t len, cap;
};

static void add_text(struct bucket *b, int64_t ms, const char *line)
{
    char cut[LOG_LINE_MAX * 4 + 8];
    fl_report_one_line(line, LOG_LINE_MAX, cut, sizeof cut);
    char entry[sizeof cut + 48];
    int n = snprintf(entry, sizeof entry, "%lld.%03llds  %s\n", (long long)(ms / 1000),
                     (long long)(ms % 1000), cut);
    if (n < 0)
        return;
    size_t k = (size_t)n < sizeof entry ? (size_t)n : sizeof entry - 1;
    if (b->len + k + 1 > b->cap) {
        size_t cap = (b->len + k + 1) * 2;
        char *t = realloc(b->text, cap);
        if (!t)
            return;
        b->text = t;
        b->cap = cap;
    }
    memcpy(b->text + b->len, entry, k);
    b->len += k;
    b->text[b->len] = 0;
}

long fl_html_log_marks(FILE *f, const char *log_path, double x0, double plot_w, double span,
                       double y)
{
    if (!log_path || !*log_path || span <= 0)
        return -1;
    char tpath[4200];
    snprintf(tpath, sizeof tpath, "%s.times", log_path);
    FILE *lf = fopen(log_path, "r"), *tf = lf ? fopen(tpath, "r") : NULL;
    if (!lf || !tf) {
        if (lf)
            fclose(lf);
        return -1;
    }
    struct bucket b[LOG_BUCKETS];
    memset(b, 0, sizeof b);
    char *line = NULL, *tl = NULL;
    size_t lcap = 0, tcap = 0;
    ssize_t n;
    long lines = 0;
    while ((n = getline(&line, &lcap, lf)) >= 0 && getline(&tl, &tcap, tf) >= 0) {
        if (n > 0 && line[n - 1] == '\n')
            line[n - 1] = 0;
        int64_t ms = strtoll(tl, NULL, 10);
        if (ms < 0)
            ms = 0;
        size_t k = (size_t)((double)ms * LOG_BUCKETS / span);
        if (k >= LOG_BUCKETS)
            k = LOG_BUCKETS - 1;
        struct bucket *x = &b[k];
        if (x->n++ < LOG_PER_BUCKET) {
            add_text(x, ms, line);
            x->shown++;
        }
        x->last = ms;
        lines++;
    }
    free(line);
    free(tl);
    fclose(lf);
    fclose(tf);
    double w = plot_w / LOG_BUCKETS;
    for (size_t k = 0; k < LOG_BUCKETS; k++) {
        if (!b[k].n)
            continue;
        fprintf(f,
                "<rect class=\"logm\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"5\">"
                "<title>",
                x0 + (double)k * w, y, w - 1 > 1 ? w - 1 : 1);
        fl_html_put(f, b[k].text);
        if (b[k].n > b[k].shown)
            fprintf(f, "... and %zu more line%s until %lld.%03llds", b[k].n - b[k].shown,
                    b[k].n - b[k].shown == 1 ? "" : "s", (long long)(b[k].last / 1000),
                    (long long)(b[k].last % 1000));
        fputs("</title></rect>", f);
        free(b[k].text);
    }
    fputs("\n", f);
    return lines;
}
