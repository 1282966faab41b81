/*
 * timeline.c: one run's section of the HTML report (fl_html_timeline).
 * Reads the run's processes, events, faults and checks from the database
 * and draws an inline SVG timeline, times in ms since the run started:
 *
 *   axis     ticks at 1/2/5 x 10^k ms, grid lines down the whole picture
 *   faults   one row each: a bar from applied to healed; a dashed bar to the
 *            end when it was to heal (for=) and had not; a mark when it is
 *            instantaneous (kill, ...); red when applying it failed
 *   lanes    one per host/task (processes first, in start order; an event
 *            from a task with no process gets its own lane): each process
 *            a bar from start to exit (green exit 0, orange other exits, red
 *            signal, grey still running at the end) with "exit N" / "SIGX"
 *            after it (drawn over every bar, so that a relaunch right after
 *            does not hide it); the faults that name the lane's host or job:task
 *            shaded over it; events as marks (sync points filled diamonds);
 *            under each process's bar, its log lines by the time they
 *            arrived (log_lines.c), while its log is kept
 *
 * Details go in <title> elements (hover tooltips, no script).  Then the
 * checks with their outcomes; for a run that did not pass, where its logs
 * are and the last lines of each failing task's log (processes.failing);
 * the faults, the notes of the faults that never fired (unfired_faults),
 * processes (a command as written, its lines kept) and events as tables.
 * Every database string passes through fl_html_put.  Event marks and event
 * rows are capped (MAX_EVENT_MARKS, MAX_EVENT_ROWS) so a chatty run keeps
 * the file small; the cap is said on the page.
 */
#include "reports/html_int.h"
#include "reports/report.h"
#include "reports/table.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define LABEL_W 190.0
#define PLOT_W 760.0
#define RIGHT_W 90.0 /* room for the longest end label, "signal 64", in bold */
#define AXIS_H 22.0
#define FAULT_H 18.0
#define LANE_H 24.0
#define MAX_EVENT_MARKS 3000
#define MAX_EVENT_ROWS 2000

/* Column numbers of the queries below. */
enum {
    P_NO,
    P_HOST,
    P_JOB,
    P_TASK,
    P_PID,
    P_CMD,
    P_START,
    P_END,
    P_EXIT,
    P_SIG,
    P_CORE,
    P_LOG,
    P_GEN,
    P_STOPPED, /* stopped_at_end: the harness ended it at the run's end */
    P_FAILING  /* failing: the evidence of a run that did not pass */
};
enum { E_T, E_HOST, E_JOB, E_TASK, E_KIND, E_ATTRS, E_SYNC };
enum { F_NO, F_IDX, F_KIND, F_TARGET, F_DETAIL, F_APPLIED, F_HEALED, F_ERROR };
enum { C_NAME, C_TARGET, C_PASSED, C_EXPECTED, C_OBSERVED, C_LINE };
enum { U_IDX, U_KIND, U_TARGET, U_LINE, U_NOTE };

struct lane {
    const char *host, *job, *task;
};

struct tl {
    FILE *f;
    struct fl_rows procs, events, faults, checks, unfired;
    struct lane *lanes;
    size_t nlanes;
    size_t *proc_lane, *event_lane;
    double span;       /* ms shown across PLOT_W */
    double lanes_y;    /* top of the first lane */
    size_t logs_shown; /* processes whose log lines are drawn */
};

static bool eq(const char *a, const char *b)
{
    return (!a && !b) || (a && b && !strcmp(a, b));
}

static double x_of(const struct tl *t, int64_t ms)
{
    if (ms < 0)
        ms = 0;
    return LABEL_W + (double)ms * PLOT_W / t->span;
}

static const char *sig_name(int sig, char *buf, size_t len)
{
    static const char *names[] = {
        [1] = "SIGHUP",   [2] = "SIGINT",   [3] = "SIGQUIT",  [4] = "SIGILL",   [6] = "SIGABRT",
        [7] = "SIGBUS",   [8] = "SIGFPE",   [9] = "SIGKILL",  [10] = "SIGUSR1", [11] = "SIGSEGV",
        [12] = "SIGUSR2", [13] = "SIGPIPE", [14] = "SIGALRM", [15] = "SIGTERM", [19] = "SIGSTOP"};
    if (sig > 0 && sig < (int)(sizeof names / sizeof *names) && names[sig])
        snprintf(buf, len, "%s", names[sig]);
    else
        snprintf(buf, len, "signal %d", sig);
    return buf;
}

/* Index of the lane (host, job, task), appended when missing; SIZE_MAX when
 * out of memory. */
static size_t lane_of(struct tl *t, const char *host, const char *job, const char *task,
                      bool for_event)
{
    for (size_t i = 0; i < t->nlanes; i++)
        if (eq(t->lanes[i].host, host) && eq(t->lanes[i].job, job) && eq(t->lanes[i].task, task))
            return i;
    if (for_event && job) {
        /* A runtime may number its task its own way (psrt's worker 0 on w1
         * says task=1): the host's only lane of that job.  Otherwise the
         * event gets a lane of its own rather than a guessed one. */
        size_t found = SIZE_MAX, n = 0;
        for (size_t i = 0; i < t->nlanes; i++)
            if (eq(t->lanes[i].host, host) && eq(t->lanes[i].job, job)) {
                found = i;
                n++;
            }
        if (n == 1)
            return found;
    }
    struct lane *l = realloc(t->lanes, (t->nlanes + 1) * sizeof *l);
    if (!l)
        return SIZE_MAX;
    t->lanes = l;
    t->lanes[t->nlanes] = (struct lane){host, job, task};
    return t->nlanes++;
}

/* Whether a fault's target names the lane: targets are a host, "job:task",
 * a job, or several hosts joined by ",", "<->", "->", "|", brackets or blanks. */
static bool target_hits(const char *target, const struct lane *l)
{
    char jt[256] = "";
    if (l->job)
        snprintf(jt, sizeof jt, "%s:%s", l->job, l->task ? l->task : "");
    const char *p = target ? target : "";
    while (*p) {
        size_t sep = 0;
        if (!strncmp(p, "<->", 3))
            sep = 3;
        else if (!strncmp(p, "->", 2))
            sep = 2;
        else if (strchr(",|[]{}() \t", *p))
            sep = 1;
        if (sep) {
            p += sep;
            continue;
        }
        const char *s = p;
        while (*p && !strchr(",|[]{}() \t", *p) && strncmp(p, "<->", 3) && strncmp(p, "->", 2))
            p++;
        size_t n = (size_t)(p - s);
        if ((l->host && strlen(l->host) == n && !strncmp(s, l->host, n)) ||
            (*jt && strlen(jt) == n && !strncmp(s, jt, n)) ||
            (l->job && strlen(l->job) == n && !strncmp(s, l->job, n)))
            return true;
    }
    return false;
}

static void lane_label(const struct lane *l, char *buf, size_t len)
{
    if (l->job)
        snprintf(buf, len, "%s  %s:%s", l->host ? l->host : "-", l->job, l->task ? l->task : "-");
    else
        snprintf(buf, len, "%s", l->host ? l->host : "(harness)");
}

/* Text cut to max characters for the label column. */
static void put_cut(FILE *f, const char *s, size_t max)
{
    char buf[512];
    fl_html_put(f, fl_report_one_line(s ? s : "", max, buf, sizeof buf));
}

static void put_ms(FILE *f, int64_t ms)
{
    char b[32];
    fputs(fl_html_fmt_ms(ms, b, sizeof b), f);
}

static void put_outcome(FILE *f, const struct fl_rows *p, size_t i)
{
    char b[32];
    if (fl_rows_null(p, i, P_END))
        fputs("still running at the end", f);
    else if (!fl_rows_null(p, i, P_SIG) && fl_rows_i(p, i, P_STOPPED))
        fprintf(f, "stopped at the end (%s)", sig_name((int)fl_rows_i(p, i, P_SIG), b, sizeof b));
    else if (!fl_rows_null(p, i, P_SIG))
        fprintf(f, "killed by %s%s", sig_name((int)fl_rows_i(p, i, P_SIG), b, sizeof b),
                fl_rows_i(p, i, P_CORE) ? " (core dumped)" : "");
    else if (!fl_rows_null(p, i, P_EXIT))
        fprintf(f, "exit %lld", (long long)fl_rows_i(p, i, P_EXIT));
    else
        fputs("ended (status unknown)", f);
}

static void draw_axis(struct tl *t, double height)
{
    FILE *f = t->f;
    static const int mult[] = {1, 2, 5};
    double step = 1;
    for (double dec = 1;; dec *= 10) {
        int k;
        for (k = 0; k < 3 && mult[k] * dec < t->span / 8; k++)
            ;
        if (k < 3) {
            step = mult[k] * dec;
            break;
        }
    }
    for (double ms = 0; ms <= t->span + 0.5; ms += step) {
        double x = x_of(t, (int64_t)ms);
        fprintf(f, "<line class=\"grid\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>", x,
                AXIS_H - 4, x, height);
        fprintf(f, "<text class=\"tick\" x=\"%.1f\" y=\"%.1f\">", x, AXIS_H - 8);
        put_ms(f, (int64_t)ms);
        fputs("</text>\n", f);
    }
}

static void fault_title(FILE *f, const struct fl_rows *fr, size_t i)
{
    fputs("<title>fault ", f);
    fl_html_put(f, fl_rows_s(fr, i, F_KIND));
    fputs(" ", f);
    fl_html_put(f, fl_rows_s(fr, i, F_TARGET));
    if (!fl_rows_null(fr, i, F_DETAIL) && *fl_rows_s(fr, i, F_DETAIL)) {
        fputs(" (", f);
        fl_html_put(f, fl_rows_s(fr, i, F_DETAIL));
        fputs(")", f);
    }
    fputs(": applied at ", f);
    put_ms(f, fl_rows_i(fr, i, F_APPLIED));
    if (!fl_rows_null(fr, i, F_HEALED)) {
        fputs(", healed at ", f);
        put_ms(f, fl_rows_i(fr, i, F_HEALED));
    }
    if (!fl_rows_null(fr, i, F_ERROR)) {
        fputs("; FAILED to apply: ", f);
        fl_html_put(f, fl_rows_s(fr, i, F_ERROR));
    }
    fputs("</title>", f);
}

/* Whether fault i lasts (x1 < x2 drawn as an interval) and its end. */
static bool fault_interval(const struct tl *t, size_t i, int64_t *end, bool *unhealed)
{
    const struct fl_rows *fr = &t->faults;
    const char *detail = fl_rows_s(fr, i, F_DETAIL);
    *unhealed = false;
    if (!fl_rows_null(fr, i, F_HEALED)) {
        *end = fl_rows_i(fr, i, F_HEALED);
        return true;
    }
    if (detail && (!strncmp(detail, "for=", 4) || strstr(detail, " for=")) &&
        fl_rows_null(fr, i, F_ERROR)) {
        *end = (int64_t)t->span;
        *unhealed = true;
        return true;
    }
    *end = fl_rows_i(fr, i, F_APPLIED);
    return false;
}

static void draw_faults(struct tl *t, double y0)
{
    FILE *f = t->f;
    const struct fl_rows *fr = &t->faults;
    for (size_t i = 0; i < fr->n; i++) {
        double y = y0 + (double)i * FAULT_H;
        int64_t a = fl_rows_i(fr, i, F_APPLIED), end;
        bool unhealed, lasts = fault_interval(t, i, &end, &unhealed);
        bool failed = !fl_rows_null(fr, i, F_ERROR);
        char label[300];
        snprintf(label, sizeof label, "%s %s",
                 fl_rows_s(fr, i, F_KIND) ? fl_rows_s(fr, i, F_KIND) : "?",
                 fl_rows_s(fr, i, F_TARGET) ? fl_rows_s(fr, i, F_TARGET) : "");
        fprintf(f, "<g class=\"fault%s\"><text class=\"flabel\" x=\"4\" y=\"%.1f\">",
                failed ? " ffail" : "", y + 12);
        put_cut(f, label, 26);
        fputs("</text>", f);
        if (lasts)
            fprintf(f, "<rect class=\"fbar%s\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"12\">",
                    unhealed ? " unhealed" : "", x_of(t, a), y + 3,
                    x_of(t, end) - x_of(t, a) < 2 ? 2 : x_of(t, end) - x_of(t, a));
        else
            fprintf(f, "<path class=\"fmark\" d=\"M%.1f %.1fl5 -9h-10z\">", x_of(t, a), y + 14);
        fault_title(f, fr, i);
        fputs(lasts ? "</rect>" : "</path>", f);
        fputs("</g>\n", f);
    }
}

static void draw_lanes(struct tl *t)
{
    FILE *f = t->f;
    char b[600];
    for (size_t l = 0; l < t->nlanes; l++) {
        double y = t->lanes_y + (double)l * LANE_H;
        fprintf(f, "<rect class=\"lane%s\" x=\"0\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\"/>",
                l % 2 ? " odd" : "", y, LABEL_W + PLOT_W + RIGHT_W, LANE_H);
        lane_label(&t->lanes[l], b, sizeof b);
        fprintf(f, "<text class=\"llabel\" x=\"4\" y=\"%.1f\">", y + 16);
        put_cut(f, b, 28);
        fputs("<title>", f);
        fl_html_put(f, b);
        fputs("</title></text>\n", f);
    }
    /* processes */
    const struct fl_rows *p = &t->procs;
    for (size_t i = 0; i < p->n; i++) {
        double y = t->lanes_y + (double)t->proc_lane[i] * LANE_H;
        int64_t s = fl_rows_i(p, i, P_START);
        bool running = fl_rows_null(p, i, P_END);
        int64_t e = running ? (int64_t)t->span : fl_rows_i(p, i, P_END);
        const char *cls = running                      ? "prun"
                          : fl_rows_i(p, i, P_STOPPED) ? "pstop"
                          : !fl_rows_null(p, i, P_SIG) ? "psig"
                          : fl_rows_i(p, i, P_EXIT)    ? "pbad"
                                                       : "pok";
        double w = x_of(t, e) - x_of(t, s);
        fprintf(f,
                "<rect class=\"proc %s\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"12\">"
                "<title>",
                cls, x_of(t, s), y + 6, w < 1.5 ? 1.5 : w);
        fl_html_put(f, fl_rows_s(p, i, P_HOST));
        if (!fl_rows_null(p, i, P_JOB))
            fl_html_putf(f, " %s:%s", fl_rows_s(p, i, P_JOB),
                         fl_rows_s(p, i, P_TASK) ? fl_rows_s(p, i, P_TASK) : "-");
        fprintf(f, " pid %lld generation %lld: ", (long long)fl_rows_i(p, i, P_PID),
                (long long)fl_rows_i(p, i, P_GEN));
        put_ms(f, s);
        fputs(" to ", f);
        if (!running)
            put_ms(f, e);
        else
            fputs("the end", f);
        fputs(", ", f);
        put_outcome(f, p, i);
        fputs("\n", f);
        fl_html_put(f, fl_rows_s(p, i, P_CMD));
        fputs("</title></rect>", f);
        if (fl_rows_i(p, i, P_GEN) > 0)
            fprintf(f, "<text class=\"gen\" x=\"%.1f\" y=\"%.1f\">g%lld</text>", x_of(t, s) + 2,
                    y + 5, (long long)fl_rows_i(p, i, P_GEN));
        fputs("\n", f);
    }
    /* how each ended ("SIGTERM", "exit 1") after its bar, once every bar is
     * drawn: a relaunch's bar starting right after would hide it */
    for (size_t i = 0; i < p->n; i++) {
        double y = t->lanes_y + (double)t->proc_lane[i] * LANE_H;
        if (fl_rows_null(p, i, P_END) || fl_rows_i(p, i, P_STOPPED) ||
            (fl_rows_null(p, i, P_SIG) && !fl_rows_i(p, i, P_EXIT)))
            continue;
        bool sig = !fl_rows_null(p, i, P_SIG);
        fprintf(f, "<text class=\"pend %s\" x=\"%.1f\" y=\"%.1f\">", sig ? "psig" : "pbad",
                x_of(t, fl_rows_i(p, i, P_END)) + 3, y + 16);
        if (sig)
            fputs(sig_name((int)fl_rows_i(p, i, P_SIG), b, sizeof b), f);
        else
            fprintf(f, "exit %lld", (long long)fl_rows_i(p, i, P_EXIT));
        fputs("</text>\n", f);
    }
    /* faults over the lanes they hit, translucent over the processes */
    for (size_t l = 0; l < t->nlanes; l++) {
        double y = t->lanes_y + (double)l * LANE_H;
        for (size_t i = 0; i < t->faults.n; i++) {
            if (!target_hits(fl_rows_s(&t->faults, i, F_TARGET), &t->lanes[l]))
                continue;
            int64_t a = fl_rows_i(&t->faults, i, F_APPLIED), end;
            bool unhealed;
            if (fault_interval(t, i, &end, &unhealed))
                fprintf(f,
                        "<rect class=\"fband\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
                        "height=\"%.1f\">",
                        x_of(t, a), y, x_of(t, end) - x_of(t, a), LANE_H);
            else
                fprintf(f,
                        "<rect class=\"fline\" x=\"%.1f\" y=\"%.1f\" width=\"2\" "
                        "height=\"%.1f\">",
                        x_of(t, a) - 1, y, LANE_H);
            fault_title(f, &t->faults, i);
            fputs("</rect>\n", f);
        }
    }
    /* events */
    const struct fl_rows *ev = &t->events;
    for (size_t i = 0; i < ev->n && i < MAX_EVENT_MARKS; i++) {
        double x = x_of(t, fl_rows_i(ev, i, E_T));
        double y = t->lanes_y + (double)t->event_lane[i] * LANE_H + LANE_H / 2;
        const char *kind = fl_rows_s(ev, i, E_KIND) ? fl_rows_s(ev, i, E_KIND) : "";
        const char *cls = strstr(kind, "fail") || strstr(kind, "error") ? "ebad"
                          : !strncmp(kind, "save.", 5) || !strncmp(kind, "restore.", 8) ||
                                  !strncmp(kind, "export.", 7)
                              ? "eck"
                              : "ev";
        bool sync = fl_rows_i(ev, i, E_SYNC) != 0;
        if (sync)
            fprintf(f, "<path class=\"%s sync\" d=\"M%.1f %.1fl5 5l-5 5l-5 -5z\">", cls, x, y - 5);
        else
            fprintf(f, "<circle class=\"%s\" cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\">", cls, x, y);
        fputs("<title>", f);
        put_ms(f, fl_rows_i(ev, i, E_T));
        fputs(" ", f);
        fl_html_put(f, kind);
        if (fl_rows_s(ev, i, E_ATTRS) && *fl_rows_s(ev, i, E_ATTRS)) {
            fputs(" ", f);
            fl_html_put(f, fl_rows_s(ev, i, E_ATTRS));
        }
        fputs(" (from ", f);
        fl_html_put(f, fl_rows_s(ev, i, E_HOST) ? fl_rows_s(ev, i, E_HOST) : "the harness");
        if (!fl_rows_null(ev, i, E_JOB))
            fl_html_putf(f, " %s:%s", fl_rows_s(ev, i, E_JOB),
                         fl_rows_s(ev, i, E_TASK) ? fl_rows_s(ev, i, E_TASK) : "-");
        fputs(sync ? "; sync point)" : ")", f);
        fputs(sync ? "</title></path>\n" : "</title></circle>\n", f);
    }
    /* log lines, last: over the faults' bands, under the bars */
    for (size_t i = 0; i < p->n; i++) {
        double y = t->lanes_y + (double)t->proc_lane[i] * LANE_H;
        if (fl_html_log_marks(f, fl_rows_s(p, i, P_LOG), LABEL_W, PLOT_W, t->span, y + 19) > 0)
            t->logs_shown++;
    }
}

static void td(FILE *f, const char *s)
{
    fputs("<td>", f);
    fl_html_put(f, s ? s : "-");
    fputs("</td>", f);
}

static void td_ms(FILE *f, const struct fl_rows *r, size_t i, size_t j)
{
    fputs("<td class=\"num\">", f);
    if (fl_rows_null(r, i, j))
        fputs("-", f);
    else
        put_ms(f, fl_rows_i(r, i, j));
    fputs("</td>", f);
}

/* A run that did not pass: where its logs are, and the last lines of the
 * log of each failing task (processes.failing), as the JUnit XML has them. */
static void write_failing_logs(struct tl *t)
{
    FILE *f = t->f;
    const struct fl_rows *p = &t->procs;
    bool any = false;
    for (size_t i = 0; i < p->n; i++) {
        const char *log = fl_rows_s(p, i, P_LOG);
        if (!fl_rows_i(p, i, P_FAILING) || !log)
            continue;
        if (!any) {
            const char *slash = strrchr(log, '/');
            fputs("<h4>Logs of the failing tasks</h4>\n<p class=\"meta\">The run's logs: "
                  "<code>",
                  f);
            fl_html_putf(f, "%.*s", slash ? (int)(slash - log) : 0, log);
            fputs("</code></p>\n", f);
            any = true;
        }
        bool more;
        char *tail = fl_report_log_tail(log, FL_REPORT_LOG_TAIL, &more);
        int e = errno;
        fputs("<p><b>", f);
        fl_html_put(f, fl_rows_s(p, i, P_HOST));
        if (!fl_rows_null(p, i, P_JOB))
            fl_html_putf(f, " %s:%s", fl_rows_s(p, i, P_JOB),
                         fl_rows_s(p, i, P_TASK) ? fl_rows_s(p, i, P_TASK) : "-");
        fputs("</b> (", f);
        put_outcome(f, p, i);
        fputs(tail && more ? "): the last lines of <code>" : "): <code>", f);
        fl_html_put(f, log);
        fputs("</code></p>\n", f);
        if (!tail) {
            fputs("<p class=\"note\">", f);
            fl_html_putf(f,
                         "It cannot be read: %s (the report was written on another machine, "
                         "or the run directory was removed since: `faultline gc --all` "
                         "removes those of runs that did not pass).",
                         strerror(e));
            fputs("</p>\n", f);
            continue;
        }
        fputs("<pre class=\"log\">", f);
        fl_html_put(f, *tail ? tail : "(empty)\n");
        fputs("</pre>\n", f);
        free(tail);
    }
}

static void write_tables(struct tl *t)
{
    FILE *f = t->f;
    const struct fl_rows *c = &t->checks, *fr = &t->faults, *p = &t->procs, *ev = &t->events;
    size_t failed = 0;
    for (size_t i = 0; i < c->n; i++)
        failed += !fl_rows_i(c, i, C_PASSED);
    fprintf(f, "<h4>Checks: %zu of %zu passed</h4>\n", c->n - failed, c->n);
    if (c->n) {
        fputs("<table class=\"checks\"><tr><th>outcome</th><th>check</th><th>target</th>"
              "<th>expected</th><th>observed</th><th>line</th></tr>\n",
              f);
        for (size_t i = 0; i < c->n; i++) {
            bool ok = fl_rows_i(c, i, C_PASSED) != 0;
            fprintf(f, "<tr class=\"%s\"><td><span class=\"v %s\">%s</span></td>", ok ? "" : "bad",
                    ok ? "pass" : "fail", ok ? "PASS" : "FAIL");
            td(f, fl_rows_s(c, i, C_NAME));
            td(f, fl_rows_s(c, i, C_TARGET));
            td(f, fl_rows_s(c, i, C_EXPECTED));
            td(f, fl_rows_s(c, i, C_OBSERVED));
            td(f, fl_rows_s(c, i, C_LINE));
            fputs("</tr>\n", f);
        }
        fputs("</table>\n", f);
    }
    write_failing_logs(t);
    if (fr->n) {
        fprintf(f,
                "<h4>Faults (%zu)</h4>\n<table><tr><th>#</th><th>kind</th><th>target</th>"
                "<th>detail</th><th>applied</th><th>healed</th><th>error</th></tr>\n",
                fr->n);
        for (size_t i = 0; i < fr->n; i++) {
            fprintf(f, "<tr%s>", fl_rows_null(fr, i, F_ERROR) ? "" : " class=\"bad\"");
            td(f, fl_rows_s(fr, i, F_NO));
            td(f, fl_rows_s(fr, i, F_KIND));
            td(f, fl_rows_s(fr, i, F_TARGET));
            td(f, fl_rows_s(fr, i, F_DETAIL));
            td_ms(f, fr, i, F_APPLIED);
            td_ms(f, fr, i, F_HEALED);
            td(f, fl_rows_s(fr, i, F_ERROR));
            fputs("</tr>\n", f);
        }
        fputs("</table>\n", f);
    }
    const struct fl_rows *u = &t->unfired;
    if (u->n) {
        fprintf(f,
                "<h4>Faults that never fired (%zu)</h4>\n<table class=\"unfired\"><tr>"
                "<th>#</th><th>kind</th><th>target</th><th>line</th><th>note</th></tr>\n",
                u->n);
        for (size_t i = 0; i < u->n; i++) {
            fputs("<tr>", f);
            td(f, fl_rows_s(u, i, U_IDX));
            td(f, fl_rows_s(u, i, U_KIND));
            td(f, fl_rows_s(u, i, U_TARGET));
            td(f, fl_rows_s(u, i, U_LINE));
            td(f, fl_rows_s(u, i, U_NOTE));
            fputs("</tr>\n", f);
        }
        fputs("</table>\n", f);
    }
    fprintf(f,
            "<details><summary>Processes (%zu)</summary>\n<table><tr><th>host</th>"
            "<th>task</th><th>gen</th><th>pid</th><th>start</th><th>end</th><th>outcome</th>"
            "<th>command</th><th>log</th></tr>\n",
            p->n);
    for (size_t i = 0; i < p->n; i++) {
        fputs("<tr>", f);
        td(f, fl_rows_s(p, i, P_HOST));
        fputs("<td>", f);
        if (!fl_rows_null(p, i, P_JOB))
            fl_html_putf(f, "%s:%s", fl_rows_s(p, i, P_JOB),
                         fl_rows_s(p, i, P_TASK) ? fl_rows_s(p, i, P_TASK) : "-");
        else
            fputs("-", f);
        fputs("</td>", f);
        td(f, fl_rows_s(p, i, P_GEN));
        td(f, fl_rows_s(p, i, P_PID));
        td_ms(f, p, i, P_START);
        td_ms(f, p, i, P_END);
        fputs("<td>", f);
        put_outcome(f, p, i);
        /* as written: a multi-line command keeps its lines */
        fputs("</td><td class=\"cmd\"><pre>", f);
        fl_html_put(f, fl_rows_s(p, i, P_CMD));
        fputs("</pre></td>", f);
        td(f, fl_rows_s(p, i, P_LOG));
        fputs("</tr>\n", f);
    }
    fputs("</table></details>\n", f);
    fprintf(f, "<details><summary>Events (%zu)</summary>\n", ev->n);
    if (ev->n > MAX_EVENT_ROWS)
        fprintf(f,
                "<p class=\"note\">The first %d of %zu events; the database holds them "
                "all (docs/schema.md, table events).</p>\n",
                MAX_EVENT_ROWS, ev->n);
    fputs("<table><tr><th>t</th><th>from</th><th>kind</th><th>attributes</th><th>sync</th>"
          "</tr>\n",
          f);
    for (size_t i = 0; i < ev->n && i < MAX_EVENT_ROWS; i++) {
        fputs("<tr>", f);
        td_ms(f, ev, i, E_T);
        fputs("<td>", f);
        fl_html_put(f, fl_rows_s(ev, i, E_HOST) ? fl_rows_s(ev, i, E_HOST) : "harness");
        if (!fl_rows_null(ev, i, E_JOB))
            fl_html_putf(f, " %s:%s", fl_rows_s(ev, i, E_JOB),
                         fl_rows_s(ev, i, E_TASK) ? fl_rows_s(ev, i, E_TASK) : "-");
        fputs("</td>", f);
        td(f, fl_rows_s(ev, i, E_KIND));
        td(f, fl_rows_s(ev, i, E_ATTRS));
        td(f, fl_rows_i(ev, i, E_SYNC) ? "sync" : "");
        fputs("</tr>\n", f);
    }
    fputs("</table></details>\n", f);
}

int fl_html_timeline(struct sqlite3 *db, FILE *f, int64_t run, int64_t duration_ms, char *err,
                     size_t errlen)
{
    struct tl t = {.f = f};
    int ret;

    if ((ret = fl_rows_load(db, &t.procs,
                            "SELECT proc_no, host, job, task, pid, command, started_ms, ended_ms,"
                            " exit_code, signal, core_dumped, log_path, generation,"
                            " stopped_at_end, failing FROM processes WHERE run = ?1"
                            " ORDER BY proc_no",
                            run, err, errlen)) ||
        (ret = fl_rows_load(db, &t.events,
                            "SELECT t_ms, host, job, task, kind, attrs, sync FROM events"
                            " WHERE run = ?1 ORDER BY t_ms, rowid",
                            run, err, errlen)) ||
        (ret = fl_rows_load(db, &t.faults,
                            "SELECT fault_no, idx, kind, target, detail, applied_ms, healed_ms,"
                            " error FROM faults WHERE run = ?1 ORDER BY applied_ms, fault_no",
                            run, err, errlen)) ||
        (ret = fl_rows_load(db, &t.checks,
                            "SELECT name, target, passed, expected, observed, line FROM checks"
                            " WHERE run = ?1 ORDER BY rowid",
                            run, err, errlen)) ||
        (ret = fl_rows_load(db, &t.unfired,
                            "SELECT idx, kind, target, line, note FROM unfired_faults"
                            " WHERE run = ?1 ORDER BY idx",
                            run, err, errlen)))
        goto cleanup;

    /* the time span: the run's duration, or the last thing recorded */
    int64_t span = duration_ms > 0 ? duration_ms : 0;
    for (size_t i = 0; i < t.procs.n; i++) {
        if (fl_rows_i(&t.procs, i, P_END) > span)
            span = fl_rows_i(&t.procs, i, P_END);
        if (fl_rows_i(&t.procs, i, P_START) > span)
            span = fl_rows_i(&t.procs, i, P_START);
    }
    for (size_t i = 0; i < t.events.n; i++)
        if (fl_rows_i(&t.events, i, E_T) > span)
            span = fl_rows_i(&t.events, i, E_T);
    for (size_t i = 0; i < t.faults.n; i++) {
        if (fl_rows_i(&t.faults, i, F_APPLIED) > span)
            span = fl_rows_i(&t.faults, i, F_APPLIED);
        if (fl_rows_i(&t.faults, i, F_HEALED) > span)
            span = fl_rows_i(&t.faults, i, F_HEALED);
    }
    t.span = span > 0 ? (double)span : 1.0;

    t.proc_lane = calloc(t.procs.n + 1, sizeof *t.proc_lane);
    t.event_lane = calloc(t.events.n + 1, sizeof *t.event_lane);
    if (!t.proc_lane || !t.event_lane) {
        ret = -ENOMEM;
        goto cleanup;
    }
    for (size_t i = 0; i < t.procs.n; i++)
        if ((t.proc_lane[i] =
                 lane_of(&t, fl_rows_s(&t.procs, i, P_HOST), fl_rows_s(&t.procs, i, P_JOB),
                         fl_rows_s(&t.procs, i, P_TASK), false)) == SIZE_MAX) {
            ret = -ENOMEM;
            goto cleanup;
        }
    for (size_t i = 0; i < t.events.n; i++)
        if ((t.event_lane[i] =
                 lane_of(&t, fl_rows_s(&t.events, i, E_HOST), fl_rows_s(&t.events, i, E_JOB),
                         fl_rows_s(&t.events, i, E_TASK), true)) == SIZE_MAX) {
            ret = -ENOMEM;
            goto cleanup;
        }

    t.lanes_y = AXIS_H + (double)t.faults.n * FAULT_H + (t.faults.n ? 6 : 0);
    double height = t.lanes_y + (double)t.nlanes * LANE_H + 4;
    fprintf(f,
            "<svg class=\"tl\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 %.0f %.0f\" "
            "width=\"%.0f\" height=\"%.0f\" role=\"img\" aria-label=\"timeline\">\n",
            LABEL_W + PLOT_W + RIGHT_W, height, LABEL_W + PLOT_W + RIGHT_W, height);
    draw_axis(&t, height);
    draw_faults(&t, AXIS_H);
    draw_lanes(&t);
    if (duration_ms >= 0)
        fprintf(f,
                "<line class=\"end\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\">"
                "<title>run ended at %lldms</title></line>\n",
                x_of(&t, duration_ms), AXIS_H - 4, x_of(&t, duration_ms), height,
                (long long)duration_ms);
    fputs("</svg>\n", f);
    if (t.events.n > MAX_EVENT_MARKS)
        fprintf(f, "<p class=\"note\">The timeline marks the first %d of %zu events.</p>\n",
                MAX_EVENT_MARKS, t.events.n);
    if (t.logs_shown)
        fprintf(f,
                "<p class=\"note\">The grey strip under a process shows its output: hover it "
                "for the lines that arrived then (at most %d a slice of 1/%d of the run, its "
                "first and last, each "
                "cut to %d characters; the whole log is in its file, the times in LOG.times "
                "beside it).</p>\n",
                LOG_PER_BUCKET, LOG_BUCKETS, LOG_LINE_MAX);
    if (!t.nlanes && !t.faults.n)
        fputs("<p class=\"note\">Nothing was recorded for this run: no process, event or "
              "fault.</p>\n",
              f);
    write_tables(&t);
    ret = 0;
cleanup:
    free(t.proc_lane);
    free(t.event_lane);
    free(t.lanes);
    fl_rows_free(&t.procs);
    fl_rows_free(&t.events);
    fl_rows_free(&t.faults);
    fl_rows_free(&t.checks);
    fl_rows_free(&t.unfired);
    return ret;
}
