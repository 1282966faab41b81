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
 * Size: at most LOG_PER_BUCKET lines a slice (its first ones, "... N more
 * lines ...", its last LOG_TAIL), each cut to LOG_LINE_MAX characters, so
 * a process adds at most LOG_BUCKETS x LOG_PER_BUCKET lines to the page whatever it printed; the
 * page says so.  A run whose directory is gone (a pass without --keep, or
 * `faultline gc`) has no logs to show: nothing is drawn.
 */
#include "reports/html_int.h"
#include "reports/table.h"

#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#define LOG_TAIL 2 /* of the LOG_PER_BUCKET lines of a full slice, its last ones */

struct bucket {
    size_t n;   /* lines in the slice */
    char *head; /* "T  line\n" for its first LOG_PER_BUCKET - LOG_TAIL */
    size_t len, cap;
    char *tail[LOG_TAIL]; /* its last LOG_TAIL lines after those, a ring */
};

static char *entry(int64_t ms, const char *line)
{
    char cut[LOG_LINE_MAX * 4 + 8];
    fl_report_one_line(line, LOG_LINE_MAX, cut, sizeof cut);
    char *e = NULL;
    if (asprintf(&e, "%lld.%03llds  %s\n", (long long)(ms / 1000), (long long)(ms % 1000), cut) < 0)
        return NULL;
    return e;
}

static void add_line(struct bucket *b, int64_t ms, const char *line)
{
    size_t i = b->n++;
    char *e = entry(ms, line);
    if (!e)
        return;
    if (i >= LOG_PER_BUCKET - LOG_TAIL) {
        char **slot = &b->tail[(i - (LOG_PER_BUCKET - LOG_TAIL)) % LOG_TAIL];
        free(*slot);
        *slot = e;
        return;
    }
    size_t k = strlen(e);
    if (b->len + k + 1 > b->cap) {
        size_t cap = (b->len + k + 1) * 2;
        char *t = realloc(b->head, cap);
        if (!t) {
            free(e);
            return;
        }
        b->head = t;
        b->cap = cap;
    }
    memcpy(b->head + b->len, e, k + 1);
    b->len += k;
    free(e);
}

/* The slice's lines into a title, and its memory freed. */
static void put_bucket(FILE *f, struct bucket *b)
{
    fl_html_put(f, b->head);
    size_t first = LOG_PER_BUCKET - LOG_TAIL, after = b->n > first ? b->n - first : 0;
    size_t shown = after < LOG_TAIL ? after : LOG_TAIL;
    if (after > LOG_TAIL)
        fprintf(f, "... %zu more line%s ...\n", after - LOG_TAIL, after - LOG_TAIL == 1 ? "" : "s");
    for (size_t j = 0; j < shown; j++) /* the ring's oldest first */
        fl_html_put(f, b->tail[(after - shown + j) % LOG_TAIL]);
    free(b->head);
    for (size_t j = 0; j < LOG_TAIL; j++)
        free(b->tail[j]);
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
        add_line(&b[k], ms, line);
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
        put_bucket(f, &b[k]);
        fputs("</title></rect>", f);
    }
    fputs("\n", f);
    return lines;
}
