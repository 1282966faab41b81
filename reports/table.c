/*
 * table.c: aligned text tables for the terminal reports (end-of-run summary,
 * `faultline runs`, verdict history), and the small formatting helpers they
 * share: durations, one-line truncation, verdict colours.
 *
 * A table collects its cells first (whole copies, made single-line), then
 * prints with each cell cut to its column's maximum width, each column as
 * wide as its widest cell (narrower on a terminal too narrow for them), two
 * spaces between columns and no trailing blanks; --wide (fl_report_set_wide)
 * cuts nothing.
 * Widths count UTF-8 characters, not bytes; colour escapes are added at print
 * time around verdict cells and never count toward a width.
 */
#include "reports/table.h"
#include "reports/report.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <unistd.h>

struct fl_report_table {
    struct fl_report_col *cols;
    int ncols;
    char **cells; /* nrows * ncols */
    size_t nrows, cap;
};

static enum fl_report_color color_mode = FL_REPORT_COLOR_AUTO;
static bool wide_mode;

void fl_report_set_wide(bool wide)
{
    wide_mode = wide;
}

void fl_report_set_color(enum fl_report_color mode)
{
    color_mode = mode;
}

bool fl_report_use_color(FILE *out)
{
    if (color_mode == FL_REPORT_COLOR_ALWAYS)
        return true;
    if (color_mode == FL_REPORT_COLOR_NEVER || !out)
        return false;
    const char *nc = getenv("NO_COLOR"), *term = getenv("TERM");
    if (nc && *nc)
        return false;
    if (term && !strcmp(term, "dumb"))
        return false;
    int fd = fileno(out);
    return fd >= 0 && isatty(fd);
}

const char *fl_report_verdict_color(const char *v)
{
    if (!v)
        return "";
    if (!strcasecmp(v, "pass"))
        return "\033[32m";
    if (!strcasecmp(v, "fail"))
        return "\033[1;31m";
    if (!strcasecmp(v, "error"))
        return "\033[1;35m";
    if (!strcasecmp(v, "running"))
        return "\033[36m";
    return "";
}

const char *fl_report_verdict_upper(const char *v, char *buf, size_t len)
{
    size_t i = 0;
    if (!len)
        return "";
    if (!v)
        v = "?";
    for (; v[i] && i + 1 < len; i++)
        buf[i] = (char)((v[i] >= 'a' && v[i] <= 'z') ? v[i] - 32 : v[i]);
    buf[i] = '\0';
    return buf;
}

const char *fl_report_fmt_duration(int64_t ms, char *buf, size_t len)
{
    if (ms < 0)
        snprintf(buf, len, "-");
    else if (ms < 60000)
        snprintf(buf, len, "%.1fs", (double)ms / 1000.0);
    else if (ms < 3600000)
        snprintf(buf, len, "%lldm%02llds", (long long)(ms / 60000), (long long)(ms / 1000 % 60));
    else
        snprintf(buf, len, "%lldh%02lldm", (long long)(ms / 3600000), (long long)(ms / 60000 % 60));
    return buf;
}

static bool is_cont(unsigned char c)
{
    return (c & 0xc0) == 0x80;
}

size_t fl_report_text_width(const char *s)
{
    size_t w = 0;
    for (; s && *s; s++)
        if (!is_cont((unsigned char)*s))
            w++;
    return w;
}

const char *fl_report_one_line(const char *s, size_t max, char *buf, size_t len)
{
    if (!len)
        return "";
    if (!s)
        s = "";
    if (max && max < 4)
        max = 4;
    bool cut = max && fl_report_text_width(s) > max;
    size_t limit = cut ? max - 3 : SIZE_MAX; /* characters to copy */
    size_t o = 0, chars = 0;
    const unsigned char *p = (const unsigned char *)s;
    while (*p && chars < limit) {
        size_t clen = 1;
        while (p[clen] && is_cont(p[clen]))
            clen++;
        if (o + clen + 4 > len) { /* keep room for "..." and NUL */
            cut = true;
            break;
        }
        if (clen == 1) {
            buf[o++] = (*p < 0x20 || *p == 0x7f) ? ' ' : (char)*p;
        } else {
            memcpy(buf + o, p, clen);
            o += clen;
        }
        p += clen;
        chars++;
    }
    if (cut && len >= 4) {
        if (o + 4 > len)
            o = len - 4;
        memcpy(buf + o, "...", 3);
        o += 3;
    }
    buf[o] = '\0';
    return buf;
}

struct fl_report_table *fl_report_table_new(const struct fl_report_col *cols, int ncols)
{
    struct fl_report_table *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->cols = malloc((size_t)ncols * sizeof *cols);
    if (!t->cols) {
        free(t);
        return NULL;
    }
    memcpy(t->cols, cols, (size_t)ncols * sizeof *cols);
    t->ncols = ncols;
    return t;
}

int fl_report_table_add(struct fl_report_table *t, const char *const *cells)
{
    if (t->nrows == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 16;
        char **c = realloc(t->cells, cap * (size_t)t->ncols * sizeof *c);
        if (!c)
            return -ENOMEM;
        t->cells = c;
        t->cap = cap;
    }
    char **row = &t->cells[t->nrows * (size_t)t->ncols];
    for (int i = 0; i < t->ncols; i++) {
        const char *s = cells[i] ? cells[i] : "-";
        size_t len = strlen(s) + 8;
        char *b = malloc(len);
        if (!b) {
            while (i-- > 0)
                free(row[i]);
            return -ENOMEM;
        }
        fl_report_one_line(s, 0, b, len);
        row[i] = b;
    }
    t->nrows++;
    return 0;
}

size_t fl_report_table_rows(const struct fl_report_table *t)
{
    return t->nrows;
}

static void pad(FILE *out, size_t n)
{
    while (n--)
        fputc(' ', out);
}

size_t fl_report_term_width(FILE *out)
{
    struct winsize ws;
    int fd = out ? fileno(out) : -1;
    if (fd < 0 || !isatty(fd))
        return 0;
    /* COLUMNS, as ls and git take it: for a terminal that reports no size
     * (a serial console says 0) or a narrower table on purpose */
    const char *env = getenv("COLUMNS");
    char *end;
    long cols = env ? strtol(env, &end, 10) : 0;
    if (env && *env && !*end && cols > 0 && cols < 100000)
        return (size_t)cols;
    if (ioctl(fd, TIOCGWINSZ, &ws) < 0)
        return 0;
    return ws.ws_col;
}

static size_t min_width(const struct fl_report_col *col)
{
    return col->min_width > 0 ? (size_t)col->min_width : 12;
}

/* On a terminal narrower than the table, narrows the columns that may be
 * cut (those with a max_width or fit), widest first, down to their
 * min_width. */
static void fit_width(const struct fl_report_table *t, size_t *w, size_t avail)
{
    size_t total = 0;
    for (int c = 0; c < t->ncols; c++)
        total += w[c] + (c ? 2 : 0);
    /* First down to each column's min_width, then, if that is not enough,
     * every truncatable column down to 8. */
    for (int pass = 0; pass < 2; pass++) {
        while (total > avail) {
            int widest = -1;
            for (int c = 0; c < t->ncols; c++) {
                size_t floor = pass ? 8 : min_width(&t->cols[c]);
                bool cuttable = t->cols[c].max_width || t->cols[c].fit;
                if (cuttable && w[c] > floor && (widest < 0 || w[c] > w[widest]))
                    widest = c;
            }
            if (widest < 0)
                break;
            w[widest]--;
            total--;
        }
    }
}

int fl_report_table_print(const struct fl_report_table *t, FILE *out)
{
    size_t *w = calloc((size_t)t->ncols, sizeof *w);
    bool color = fl_report_use_color(out);
    char *cut = NULL;
    size_t cutlen = 0;
    if (!w)
        return -ENOMEM;
    for (int c = 0; c < t->ncols; c++) {
        size_t most = wide_mode ? 0 : (size_t)t->cols[c].max_width;
        w[c] = fl_report_text_width(t->cols[c].title);
        for (size_t r = 0; r < t->nrows; r++) {
            const char *cell = t->cells[r * (size_t)t->ncols + c];
            size_t cw = fl_report_text_width(cell);
            if (most && cw > most)
                cw = most < 4 ? 4 : most; /* fl_report_one_line's cut */
            if (cw > w[c])
                w[c] = cw;
            if (strlen(cell) + 8 > cutlen)
                cutlen = strlen(cell) + 8;
        }
    }
    size_t avail = wide_mode ? 0 : fl_report_term_width(out);
    if (avail)
        fit_width(t, w, avail);
    cut = malloc(cutlen + 64);
    if (!cut) {
        free(w);
        return -ENOMEM;
    }
    for (size_t r = 0; r <= t->nrows; r++) {
        for (int c = 0; c < t->ncols; c++) {
            const char *s = r ? t->cells[(r - 1) * (size_t)t->ncols + c] : t->cols[c].title;
            size_t sw = fl_report_text_width(s);
            bool last = c == t->ncols - 1;
            if (sw > w[c]) { /* narrowed to fit the terminal */
                s = fl_report_one_line(s, w[c], cut, cutlen + 64);
                sw = fl_report_text_width(s);
            }
            if (c)
                fputs("  ", out);
            if (t->cols[c].right)
                pad(out, w[c] - sw);
            const char *col = r && color && t->cols[c].verdict ? fl_report_verdict_color(s) : "";
            fputs(col, out);
            fputs(s, out);
            if (*col)
                fputs("\033[0m", out);
            if (!t->cols[c].right && !last)
                pad(out, w[c] - sw);
        }
        fputc('\n', out);
    }
    free(cut);
    free(w);
    return ferror(out) ? -EIO : 0;
}

void fl_report_table_free(struct fl_report_table *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->nrows * (size_t)t->ncols; i++)
        free(t->cells[i]);
    free(t->cells);
    free(t->cols);
    free(t);
}
