/*
 * test_reports_text.c: tests of the terminal and CI reports (reports/): the verdict
 * line, the end-of-run summary table (alignment, truncation, totals, colour
 * only on a terminal), JUnit XML (escaping, well-formedness checked with
 * xmllint), and the database reports (`faultline runs` with its filters,
 * verdict history, verdicts changed since a revision) on a real database
 * written through the recorder.
 */
#include "harness/record/recorder.h"
#include "harness/tests/fl_test.h"
#include "reports/report.h"
#include "reports/table.h"

#include <errno.h>
#include <fcntl.h>
#include <pty.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Output of fn(out) as a string (malloc'd). */
#define CAPTURE(var, stmt)                             \
    do {                                               \
        size_t cap_len_;                               \
        FILE *out = open_memstream(&(var), &cap_len_); \
        FL_REQUIRE(out);                               \
        stmt;                                          \
        fclose(out);                                   \
    } while (0)

static int nlines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

/* The idx-th line of s (0-based) in a static buffer. */
static const char *line(const char *s, int idx)
{
    static char buf[8][1024];
    static int k;
    char *b = buf[k++ % 8];
    for (int i = 0; i < idx && s; i++) {
        s = strchr(s, '\n');
        if (s)
            s++;
    }
    if (!s) {
        b[0] = '\0';
        return b;
    }
    size_t n = strcspn(s, "\n");
    if (n >= 1024)
        n = 1023;
    memcpy(b, s, n);
    b[n] = '\0';
    return b;
}

static const struct fl_report_row rows3[] = {
    {.scenario = "seed-001-merge-needs-shared-fs",
     .variant = "protocol=legacy",
     .expected = "chief fails_with NotFoundError",
     .observed = "NotFoundError: ./train_logs",
     .verdict = "pass",
     .duration_ms = 3200,
     .reason = "expected failure observed"},
    {.scenario = "seed-001-merge-needs-shared-fs",
     .variant = "protocol=robust",
     .expected = "all exit 0",
     .observed = "ps:1 exit 1",
     .verdict = "fail",
     .duration_ms = 2100,
     .reason = "ps:1 exited 1, expected 0"},
    {.scenario = "kill",
     .variant = "",
     .expected = "all exit 0",
     .observed = "-",
     .verdict = "error",
     .duration_ms = 200,
     .reason = "cannot create namespace: EPERM"},
};

FL_TEST(reports_text, verdict_line_format)
{
    char *s = NULL;
    fl_report_set_color(FL_REPORT_COLOR_NEVER);
    struct fl_report_row r = {.scenario = "seed-001",
                              .variant = "protocol=legacy",
                              .verdict = "pass",
                              .duration_ms = 3200,
                              .observed = "NotFoundError: x",
                              .reason = "expected failure observed: NotFoundError ..."};
    CAPTURE(s, fl_report_verdict_line(out, &r));
    FL_ASSERT_STREQ(s, "PASS  seed-001 protocol=legacy  3.2s  "
                       "(expected failure observed: NotFoundError ...)\n");
    free(s);

    /* No variant, no reason: the observed text; newlines flattened. */
    r = (struct fl_report_row){.scenario = "kill",
                               .verdict = "error",
                               .duration_ms = 65000,
                               .observed = "line one\nline two"};
    CAPTURE(s, fl_report_verdict_line(out, &r));
    FL_ASSERT_STREQ(s, "ERROR kill  1m05s  (line one line two)\n");
    free(s);

    /* A very long reason is cut. */
    char longr[400];
    memset(longr, 'x', sizeof longr - 1);
    longr[sizeof longr - 1] = '\0';
    r = (struct fl_report_row){
        .scenario = "s", .verdict = "fail", .duration_ms = 1, .reason = longr};
    CAPTURE(s, fl_report_verdict_line(out, &r));
    FL_ASSERT(strlen(s) < 130);
    FL_ASSERT_CONTAINS(s, "xxx...)\n");
    FL_ASSERT(!strncmp(s, "FAIL  s  0.0s  (", 16));
    free(s);
}

FL_TEST(reports_text, summary_table_aligned_with_totals)
{
    char *s = NULL;
    fl_report_set_color(FL_REPORT_COLOR_NEVER);
    CAPTURE(s, FL_ASSERT_EQ(fl_report_summary(out, rows3, 3), 0));
    FL_ASSERT_EQ(nlines(s), 5);
    const char *h = line(s, 0);
    FL_ASSERT(!strncmp(h, "SCENARIO", 8));
    const char *vcol = strstr(h, "VERDICT");
    FL_REQUIRE(vcol);
    size_t voff = (size_t)(vcol - h);
    const char *words[] = {"PASS", "FAIL", "ERROR"};
    for (int i = 1; i <= 3; i++) {
        const char *l = line(s, i);
        FL_ASSERT_MSG(strlen(l) > voff && !strncmp(l + voff, words[i - 1], strlen(words[i - 1])),
                      "line %d has no %s at column %zu: \"%s\"", i, words[i - 1], voff, l);
        FL_ASSERT_MSG(l[strlen(l) - 1] != ' ', "trailing blank on line %d: \"%s\"", i, l);
    }
    /* TIME is right-aligned: each time ends at the same column. */
    const char *tcol = strstr(h, "TIME");
    FL_REQUIRE(tcol);
    size_t tend = (size_t)(tcol - h) + 4;
    FL_ASSERT(!strncmp(line(s, 1) + tend - 4, "3.2s", 4));
    FL_ASSERT(!strncmp(line(s, 3) + tend - 4, "0.2s", 4));
    FL_ASSERT_CONTAINS(line(s, 3), "kill  ");
    FL_ASSERT_STREQ(line(s, 4), "3 runs: 1 passed, 1 failed, 1 error in 5.5s");
    FL_ASSERT(!strchr(s, '\033'));
    free(s);

    CAPTURE(s, FL_ASSERT_EQ(fl_report_summary(out, rows3, 1), 0));
    FL_ASSERT_STREQ(line(s, 2), "1 run: 1 passed, 0 failed, 0 errors in 3.2s");
    free(s);
}

FL_TEST(reports_text, summary_truncates_long_cells)
{
    char reason[300], *s = NULL;
    for (size_t i = 0; i < sizeof reason - 1; i++)
        reason[i] = (char)('a' + i % 26);
    reason[sizeof reason - 1] = '\0';
    /* Multibyte text is cut on a character boundary and measured in characters. */
    struct fl_report_row r[2] = {
        {.scenario = "s",
         .variant = "v=1",
         .expected = "e",
         .observed = "o",
         .verdict = "fail",
         .duration_ms = 10,
         .reason = reason},
        {.scenario = "s",
         .variant = "v=2",
         .expected = "é→ü",
         .observed = "o",
         .verdict = "pass",
         .duration_ms = 10},
    };
    fl_report_set_color(FL_REPORT_COLOR_NEVER);
    CAPTURE(s, FL_ASSERT_EQ(fl_report_summary(out, r, 2), 0));
    const char *l1 = line(s, 1);
    FL_ASSERT(strlen(l1) < 140);
    FL_ASSERT_EQ(strlen(l1) - (size_t)(strstr(l1, "abc") - l1), 60);
    FL_ASSERT(!strcmp(l1 + strlen(l1) - 3, "..."));
    /* The VERDICT column lines up although EXPECTED holds multibyte text. */
    size_t c1 = fl_report_text_width(line(s, 1)) - fl_report_text_width(strstr(line(s, 1), "FAIL"));
    size_t c2 = fl_report_text_width(line(s, 2)) - fl_report_text_width(strstr(line(s, 2), "PASS"));
    FL_ASSERT_EQ(c1, c2);
    free(s);

    char buf[64];
    FL_ASSERT_STREQ(fl_report_one_line("ééééééééé", 6, buf, sizeof buf), "ééé...");
    FL_ASSERT_STREQ(fl_report_one_line("abcdef", 6, buf, sizeof buf), "abcdef");
    FL_ASSERT_STREQ(fl_report_one_line("abcdefg", 6, buf, sizeof buf), "abc...");
    FL_ASSERT_STREQ(fl_report_one_line("a\tb\r\nc", 0, buf, sizeof buf), "a b  c");
    FL_ASSERT_STREQ(fl_report_one_line("abcdefghijklmnop", 0, buf, 8), "abcd...");
    FL_ASSERT_STREQ(fl_report_fmt_duration(420, buf, sizeof buf), "0.4s");
    FL_ASSERT_STREQ(fl_report_fmt_duration(3723000, buf, sizeof buf), "1h02m");
    FL_ASSERT_STREQ(fl_report_fmt_duration(-1, buf, sizeof buf), "-");
}

FL_TEST(reports_text, summary_colours_only_on_a_tty)
{
    int master, slave;
    char *s = NULL;
    fl_report_set_color(FL_REPORT_COLOR_AUTO);
    unsetenv("NO_COLOR");
    setenv("TERM", "xterm", 1);
    CAPTURE(s, fl_report_summary(out, rows3, 3));
    FL_ASSERT_MSG(!strchr(s, '\033'), "colour escape in non-tty output: %s", s);
    free(s);

    if (openpty(&master, &slave, NULL, NULL, NULL) < 0)
        FL_SKIP("no pseudo-terminal: %s", strerror(errno));
    FILE *tty = fdopen(slave, "w");
    FL_REQUIRE(tty);
    FL_ASSERT_EQ(fl_report_summary(tty, rows3, 3), 0);
    fclose(tty);
    char buf[8192];
    size_t got = 0;
    ssize_t n;
    while (got < sizeof buf - 1 && (n = read(master, buf + got, sizeof buf - 1 - got)) > 0)
        got += (size_t)n; /* read fails with EIO once the slave is closed and drained */
    buf[got] = '\0';
    close(master);
    FL_ASSERT_CONTAINS(buf, "\033[32mPASS\033[0m");
    FL_ASSERT_CONTAINS(buf, "\033[1;31mFAIL\033[0m");
    FL_ASSERT_CONTAINS(buf, "\033[1;35mERROR\033[0m");
    /* Only the verdict column is coloured: the header is plain. */
    FL_ASSERT(!strncmp(buf, "SCENARIO", 8));

    /* NO_COLOR wins over a terminal. */
    FL_REQUIRE(openpty(&master, &slave, NULL, NULL, NULL) == 0);
    setenv("NO_COLOR", "1", 1);
    tty = fdopen(slave, "w");
    FL_REQUIRE(tty);
    fl_report_verdict_line(tty, &rows3[0]);
    fclose(tty);
    got = 0;
    while (got < sizeof buf - 1 && (n = read(master, buf + got, sizeof buf - 1 - got)) > 0)
        got += (size_t)n;
    buf[got] = '\0';
    close(master);
    FL_ASSERT(!strncmp(buf, "PASS  seed-001", 14));
    unsetenv("NO_COLOR");

    fl_report_set_color(FL_REPORT_COLOR_ALWAYS);
    CAPTURE(s, fl_report_verdict_line(out, &rows3[1]));
    FL_ASSERT(!strncmp(s, "\033[1;31mFAIL\033[0m  seed-001", 24));
    free(s);
}

static int read_file(const char *path, char **out)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -errno;
    size_t cap = 65536, len = fread(*out = malloc(cap), 1, cap - 1, f);
    (*out)[len] = '\0';
    fclose(f);
    return 0;
}

FL_TEST(reports_text, junit_escaped_and_well_formed)
{
    char path[4096], *x = NULL, *o = NULL;
    snprintf(path, sizeof path, "%s/reports/ci/junit.xml", fl_test_dir());
    struct fl_report_row r[4] = {rows3[0],
                                 rows3[1],
                                 rows3[2],
                                 {.scenario = "seed-001-merge-needs-shared-fs",
                                  .variant = "protocol=<robust>&'x'",
                                  .verdict = "fail",
                                  .expected = "exit \"0\"",
                                  .observed = "bad\x01\xff\xfe byte ]]>",
                                  .duration_ms = 1500,
                                  .run_id = "20261121-114203-ab12cd",
                                  .run_dir = "out/runs/20261121-114203-ab12cd",
                                  .reason = "<tag> & \"quote\"\nsecond line é"}};
    FL_REQUIRE_EQ(fl_report_junit(path, r, 4), 0);
    FL_REQUIRE_EQ(read_file(path, &x), 0);
    FL_ASSERT(!strncmp(x, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n", 39));
    FL_ASSERT_CONTAINS(x, "<testsuites name=\"faultline\" tests=\"4\" failures=\"2\" errors=\"1\" "
                          "time=\"7.000\">");
    FL_ASSERT_CONTAINS(x, "<testsuite name=\"seed-001-merge-needs-shared-fs\" tests=\"3\" "
                          "failures=\"2\" errors=\"0\" skipped=\"0\" time=\"6.800\">");
    FL_ASSERT_CONTAINS(x, "<testsuite name=\"kill\" tests=\"1\" failures=\"0\" errors=\"1\"");
    FL_ASSERT_CONTAINS(x, "<testcase classname=\"kill\" name=\"kill\" time=\"0.200\">");
    FL_ASSERT_CONTAINS(x, "name=\"protocol=&lt;robust&gt;&amp;&apos;x&apos;\"");
    FL_ASSERT_CONTAINS(x, "<failure message=\"&lt;tag&gt; &amp; &quot;quote&quot;&#10;second "
                          "line é\" type=\"fail\">");
    FL_ASSERT_CONTAINS(x, "<error message=\"cannot create namespace: EPERM\" type=\"error\">");
    FL_ASSERT_CONTAINS(x, "observed: bad??? byte ]]&gt;");
    FL_ASSERT_CONTAINS(x, "<system-out>run id: 20261121-114203-ab12cd\n"
                          "run dir: out/runs/20261121-114203-ab12cd\n"
                          "logs: out/runs/20261121-114203-ab12cd/logs\n</system-out>");
    FL_ASSERT_CONTAINS(x, "second line é\nlogs: out/runs/20261121-114203-ab12cd/logs</failure>");
    /* The passing testcase has no failure element. */
    const char *pass = strstr(x, "name=\"protocol=legacy\"");
    FL_REQUIRE(pass);
    FL_ASSERT(strstr(pass, "</testcase>") < strstr(pass, "<failure"));
    /* No temp file left beside it. */
    char *ls = NULL;
    fl_test_sh(&ls, "ls -a '%s/reports/ci'", fl_test_dir());
    FL_ASSERT_STREQ(ls, ".\n..\njunit.xml\n");
    free(ls);

    if (fl_test_sh(NULL, "command -v xmllint >/dev/null") != 0)
        FL_SKIP("xmllint not installed (libxml2-utils, see ci/install-deps)");
    FL_ASSERT_EQ(fl_test_sh(&o, "xmllint --noout '%s' 2>&1", path), 0);
    FL_ASSERT_STREQ(o, "");
    free(o);
    FL_ASSERT_EQ(fl_test_sh(&o, "xmllint --xpath 'count(//testcase)' '%s'", path), 0);
    FL_ASSERT_STREQ(o, "4\n");
    free(o);
    FL_ASSERT_EQ(
        fl_test_sh(&o, "xmllint --xpath 'string((//testcase)[3]/failure/@message)' '%s'", path), 0);
    FL_ASSERT_STREQ(o, "<tag> & \"quote\"\nsecond line é\n");
    free(o);
    free(x);
}

FL_TEST(reports_text, junit_empty_and_unwritable)
{
    char path[4096], *o = NULL;
    snprintf(path, sizeof path, "%s/empty.xml", fl_test_dir());
    FL_REQUIRE_EQ(fl_report_junit(path, NULL, 0), 0);
    FL_REQUIRE_EQ(read_file(path, &o), 0);
    FL_ASSERT_CONTAINS(o, "<testsuites name=\"faultline\" tests=\"0\" failures=\"0\" errors=\"0\"");
    FL_ASSERT_CONTAINS(o, "</testsuites>\n");
    free(o);
    snprintf(path, sizeof path, "%s/empty.xml/sub/x.xml", fl_test_dir());
    FL_ASSERT_EQ(fl_report_junit(path, rows3, 3), -ENOTDIR);
}

/* A failing task's log: its last FL_REPORT_LOG_TAIL lines go into the
 * failure's text, escaped (markup, control characters, invalid UTF-8, a
 * "]]>"), with the run's log directory; a log that is gone says why. */
FL_TEST(reports_text, junit_failure_has_failing_task_log_tail)
{
    char dir[4096], log[4200], gone[4200], failing[9000], path[4200], *x = NULL, *o = NULL;
    snprintf(dir, sizeof dir, "%s/runs/R1", fl_test_dir());
    FL_REQUIRE_EQ(fl_test_sh(NULL, "mkdir -p '%s/logs'", dir), 0);
    snprintf(log, sizeof log, "%s/logs/b.worker.0.0.log", dir);
    snprintf(gone, sizeof gone, "%s/logs/a.ps.0.0.log", dir);
    FILE *f = fopen(log, "w");
    FL_REQUIRE(f);
    for (int i = 1; i <= 30; i++)
        fprintf(f, "line %d\n", i);
    fputs("esc \033[31mred\033[0m bad\xff <a&b> ]]> end", f); /* no newline at the end */
    fclose(f);
    snprintf(failing, sizeof failing, "worker:0\t%s\nps:0\t%s\n", log, gone);
    struct fl_report_row r = {.scenario = "ev",
                              .verdict = "fail",
                              .expected = "worker exit 0",
                              .observed = "worker:0 exit 3",
                              .reason = "worker:0: exit: expected exit 0, observed exit 3",
                              .run_id = "R1",
                              .run_dir = dir,
                              .failing = failing,
                              .duration_ms = 10};
    snprintf(path, sizeof path, "%s/j.xml", fl_test_dir());
    FL_REQUIRE_EQ(fl_report_junit(path, &r, 1), 0);
    FL_REQUIRE_EQ(read_file(path, &x), 0);
    char want[9000];
    snprintf(want, sizeof want,
             "\nlogs: %s/logs\n\n--- worker:0: the last lines of %s ---\nline 12\n", dir, log);
    FL_ASSERT_CONTAINS(x, want);
    FL_ASSERT_MSG(!strstr(x, "line 11\n"), "more than %d lines:\n%s", FL_REPORT_LOG_TAIL, x);
    FL_ASSERT_CONTAINS(x,
                       "line 30\nesc  [31mred [0m bad? &lt;a&amp;b&gt; ]]&gt; end\n\n--- ps:0: ");
    snprintf(want, sizeof want,
             "--- ps:0: %s ---\n(cannot be read: No such file or directory)</failure>", gone);
    FL_ASSERT_CONTAINS(x, want);
    if (fl_test_sh(NULL, "command -v xmllint >/dev/null") != 0)
        FL_SKIP("xmllint not installed (libxml2-utils, see ci/install-deps)");
    FL_ASSERT_EQ(fl_test_sh(&o, "xmllint --xpath 'string(//failure)' '%s'", path), 0);
    FL_ASSERT_CONTAINS(o, "line 29\nline 30\nesc  [31mred [0m bad? <a&b> ]]> end\n");
    free(o);
    free(x);
}

/* The tail of a big log: its last lines from its end only; one long line
 * with no newline is cut, not lost; an empty log is "". */
FL_TEST(reports_text, log_tail_of_big_and_odd_logs)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/big.log", fl_test_dir());
    FILE *f = fopen(path, "w");
    FL_REQUIRE(f);
    for (int i = 1; i <= 200000; i++) /* 2.5 MB */
        fprintf(f, "line %06d\n", i);
    fclose(f);
    bool more;
    char *t = fl_report_log_tail(path, 3, &more);
    FL_REQUIRE(t);
    FL_ASSERT_STREQ(t, "line 199998\nline 199999\nline 200000\n");
    FL_ASSERT(more);
    free(t);
    f = fopen(path, "w");
    FL_REQUIRE(f);
    for (int i = 0; i < 100000; i++)
        fputc('x', f);
    fclose(f);
    t = fl_report_log_tail(path, 20, &more);
    FL_REQUIRE(t);
    FL_ASSERT_EQ(fl_report_text_width(t), FL_REPORT_TAIL_LINE_MAX + 1); /* and '\n' */
    FL_ASSERT_CONTAINS(t, "xxx...\n");
    FL_ASSERT(more);
    free(t);
    f = fopen(path, "w");
    FL_REQUIRE(f);
    fputs("one\ntwo", f);
    fclose(f);
    t = fl_report_log_tail(path, 20, &more);
    FL_ASSERT_STREQ(t, "one\ntwo\n");
    FL_ASSERT(!more);
    free(t);
    fclose(fopen(path, "w"));
    t = fl_report_log_tail(path, 20, &more);
    FL_ASSERT_STREQ(t, "");
    free(t);
    snprintf(path, sizeof path, "%s/none.log", fl_test_dir());
    FL_ASSERT(fl_report_log_tail(path, 20, &more) == NULL && errno == ENOENT);
}

/* ---- database reports --------------------------------------------------------- */

struct fake_run {
    const char *id, *scenario, *variant, *rev, *verdict, *reason;
    int64_t started, duration;
};

/* 2026-11-21 11:00:00 UTC */
#define T0 1795258800000LL

static const struct fake_run fake[] = {
    {"r1", "seed-000", "protocol=legacy", "aaaa1111bbbb", "pass", NULL, T0 + 0, 3200},
    {"r2", "seed-000", "protocol=robust", "aaaa1111bbbb", "pass", NULL, T0 + 1000, 4100},
    {"r3", "seed-001", "protocol=legacy", "aaaa1111bbbb", "fail",
     "chief exited 0, expected NotFoundError", T0 + 2000, 2500},
    {"r4", "seed-000", "protocol=legacy", "cccc2222dddd", "fail", "merge: NotFoundError",
     T0 + 60000, 3300},
    {"r5", "seed-000", "protocol=robust", "cccc2222dddd", "pass", NULL, T0 + 61000, 4000},
    {"r6", "seed-001", "protocol=legacy", "cccc2222dddd", "pass", NULL, T0 + 62000, 2600},
    {"r7", "seed-000", "protocol=legacy", "eeee3333ffff", "error", "harness killed", T0 + 120000,
     -1},
    {"r8", "seed-000", "protocol=legacy", "eeee3333ffff", "running", NULL, T0 + 180000, -1},
};

static sqlite3 *fake_db(struct fl_rec **recp)
{
    char path[4096], err[256];
    snprintf(path, sizeof path, "%s/out/faultline.db", fl_test_dir());
    FL_REQUIRE_EQ(fl_rec_open(recp, path, NULL, err, sizeof err), 0);
    for (size_t i = 0; i < sizeof fake / sizeof fake[0]; i++) {
        const struct fake_run *f = &fake[i];
        struct fl_rec_run *run;
        struct fl_rec_run_info info = {.run_id = f->id,
                                       .scenario = f->scenario,
                                       .variant = f->variant,
                                       .git_rev = f->rev,
                                       .started_at_ms = f->started};
        FL_REQUIRE_EQ(fl_rec_run_begin(*recp, &info, &run), 0);
        /* A 'running' one is left as a killed harness leaves it (handle dropped). */
        if (strcmp(f->verdict, "running"))
            FL_REQUIRE_EQ(fl_rec_run_end(run, f->verdict, f->reason, f->duration), 0);
    }
    return fl_rec_db(*recp);
}

FL_TEST(reports_text, runs_table_newest_first_with_filters)
{
    struct fl_rec *rec;
    char *s = NULL;
    setenv("TZ", "UTC", 1);
    tzset();
    fl_report_set_color(FL_REPORT_COLOR_NEVER);
    sqlite3 *db = fake_db(&rec);
    int n = 0;

    CAPTURE(s, n = fl_report_runs(db, out, NULL));
    FL_ASSERT_EQ(n, 8);
    FL_ASSERT_EQ(nlines(s), 9);
    FL_ASSERT_STREQ(line(s, 0), "RUN ID  SCENARIO  VARIANT          VERDICT  DURATION  SEED  "
                                "STARTED              REASON");
    FL_ASSERT_STREQ(line(s, 1), "r8      seed-000  protocol=legacy  RUNNING         -     0  "
                                "2026-11-21 11:03:00  -");
    FL_ASSERT_STREQ(line(s, 2), "r7      seed-000  protocol=legacy  ERROR           -     0  "
                                "2026-11-21 11:02:00  harness killed");
    FL_ASSERT_STREQ(line(s, 8), "r1      seed-000  protocol=legacy  PASS         3.2s     0  "
                                "2026-11-21 11:00:00  -");
    free(s);

    struct fl_report_runs_opts o = {.scenario = "seed-000", .verdict = "fail"};
    CAPTURE(s, n = fl_report_runs(db, out, &o));
    FL_ASSERT_EQ(n, 1);
    FL_ASSERT(!strncmp(line(s, 1), "r4 ", 3));
    FL_ASSERT_CONTAINS(line(s, 1), "merge: NotFoundError");
    free(s);

    o = (struct fl_report_runs_opts){.since_rev = "cccc22", .limit = 2};
    CAPTURE(s, n = fl_report_runs(db, out, &o));
    FL_ASSERT_EQ(n, 2);
    FL_ASSERT(!strncmp(line(s, 1), "r8 ", 3));
    FL_ASSERT(!strncmp(line(s, 2), "r7 ", 3));
    free(s);

    o = (struct fl_report_runs_opts){.since_rev = "cccc22", .limit = -1};
    CAPTURE(s, n = fl_report_runs(db, out, &o));
    FL_ASSERT_EQ(n, 5);
    FL_ASSERT(!strncmp(line(s, 5), "r4 ", 3));
    free(s);

    o = (struct fl_report_runs_opts){.variant = "protocol=robust"};
    CAPTURE(s, n = fl_report_runs(db, out, &o));
    FL_ASSERT_EQ(n, 2);
    free(s);

    o = (struct fl_report_runs_opts){.scenario = "nope"};
    CAPTURE(s, n = fl_report_runs(db, out, &o));
    FL_ASSERT_EQ(n, 0);
    FL_ASSERT_STREQ(s, "no recorded run matches\n");
    free(s);

    o = (struct fl_report_runs_opts){.verdict = "passed"};
    CAPTURE(s, FL_ASSERT_EQ(fl_report_runs(db, out, &o), -EINVAL));
    free(s);
    o = (struct fl_report_runs_opts){.since_rev = "0000"};
    CAPTURE(s, FL_ASSERT_EQ(fl_report_runs(db, out, &o), -ENOENT));
    free(s);
    fl_rec_close(rec);

    /* An empty database. */
    char path[4096], err[256];
    snprintf(path, sizeof path, "%s/empty.db", fl_test_dir());
    FL_REQUIRE_EQ(fl_rec_open(&rec, path, NULL, err, sizeof err), 0);
    CAPTURE(s, FL_ASSERT_EQ(fl_report_runs(fl_rec_db(rec), out, NULL), 0));
    FL_ASSERT_STREQ(s, "no runs recorded in this database\n");
    free(s);
    fl_rec_close(rec);
}

FL_TEST(reports_text, history_counts_failures_per_variant)
{
    struct fl_rec *rec;
    char *s = NULL;
    int n = 0;
    fl_report_set_color(FL_REPORT_COLOR_NEVER);
    sqlite3 *db = fake_db(&rec);
    CAPTURE(s, n = fl_report_history(db, out, NULL));
    FL_ASSERT_EQ(n, 3);
    FL_ASSERT_STREQ(line(s, 0), "SCENARIO  VARIANT          RUNS  PASS  FAIL  ERROR  FAIL%  "
                                "LAST     HISTORY");
    FL_ASSERT_STREQ(line(s, 1), "seed-000  protocol=legacy     4     1     1      1    33%  "
                                "RUNNING  PFER");
    FL_ASSERT_STREQ(line(s, 2), "seed-000  protocol=robust     2     2     0      0     0%  "
                                "PASS     PP");
    FL_ASSERT_STREQ(line(s, 3), "seed-001  protocol=legacy     2     1     1      0    50%  "
                                "PASS     FP");
    free(s);

    struct fl_report_history_opts o = {
        .scenario = "seed-000", .variant = "protocol=legacy", .last = 2};
    CAPTURE(s, n = fl_report_history(db, out, &o));
    FL_ASSERT_EQ(n, 1);
    FL_ASSERT(!strcmp(line(s, 1) + strlen(line(s, 1)) - 4, "  ER"));
    free(s);
    fl_rec_close(rec);
}

FL_TEST(reports_text, changed_since_revision)
{
    struct fl_rec *rec;
    char *s = NULL;
    int n = 0;
    fl_report_set_color(FL_REPORT_COLOR_NEVER);
    sqlite3 *db = fake_db(&rec);

    /* At aaaa1111: seed-000/legacy pass -> latest finished error (r7);
     * seed-001/legacy fail -> pass; seed-000/robust pass -> pass. */
    CAPTURE(s, n = fl_report_changed(db, out, "aaaa1111"));
    FL_ASSERT_EQ(n, 2);
    FL_ASSERT_STREQ(line(s, 0), "SCENARIO  VARIANT          AT aaaa1111  NOW    NOW REV       "
                                "NOW RUN");
    FL_ASSERT_STREQ(line(s, 1), "seed-000  protocol=legacy  PASS         ERROR  eeee3333ffff  r7");
    FL_ASSERT_STREQ(line(s, 2), "seed-001  protocol=legacy  FAIL         PASS   cccc2222dddd  r6");
    free(s);

    CAPTURE(s, n = fl_report_changed(db, out, "cccc2222dddd"));
    FL_ASSERT_EQ(n, 1);
    FL_ASSERT_CONTAINS(line(s, 1), "FAIL");
    free(s);

    CAPTURE(s, n = fl_report_changed(db, out, "eeee3333"));
    FL_ASSERT_EQ(n, 0);
    FL_ASSERT_STREQ(s, "no scenario changed verdict since eeee3333\n");
    free(s);

    CAPTURE(s, FL_ASSERT_EQ(fl_report_changed(db, out, "9999"), -ENOENT));
    free(s);
    fl_rec_close(rec);
}

/* Display width of a line without its colour escapes. */
static size_t visible_width(const char *l)
{
    size_t w = 0;
    for (const unsigned char *p = (const unsigned char *)l; *p && *p != '\n'; p++) {
        if (*p == '\033') {
            while (*p && *p != 'm')
                p++;
            if (!*p)
                break;
            continue;
        }
        if ((*p & 0xc0) != 0x80 && *p != '\r')
            w++;
    }
    return w;
}

FL_TEST(reports_text, summary_fits_terminal_width)
{
    int master, slave;
    struct winsize ws = {.ws_row = 40, .ws_col = 100};
    char reason[200];
    memset(reason, 'r', sizeof reason - 1);
    reason[sizeof reason - 1] = '\0';
    struct fl_report_row r[2] = {rows3[0], rows3[1]};
    r[1].reason = reason;
    fl_report_set_color(FL_REPORT_COLOR_AUTO);
    unsetenv("NO_COLOR");
    setenv("TERM", "xterm", 1);
    if (openpty(&master, &slave, NULL, NULL, &ws) < 0)
        FL_SKIP("no pseudo-terminal: %s", strerror(errno));
    FILE *tty = fdopen(slave, "w");
    FL_REQUIRE(tty);
    FL_ASSERT_EQ(fl_report_summary(tty, r, 2), 0);
    fclose(tty);
    char buf[8192];
    size_t got = 0;
    ssize_t n;
    while (got < sizeof buf - 1 && (n = read(master, buf + got, sizeof buf - 1 - got)) > 0)
        got += (size_t)n;
    buf[got] = '\0';
    close(master);
    int lines = 0;
    for (const char *l = buf; *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : l + strlen(l)) {
        FL_ASSERT_MSG(visible_width(l) <= 100, "line wider than the terminal (%zu): %.200s",
                      visible_width(l), l);
        lines++;
    }
    FL_ASSERT_EQ(lines, 4);
    FL_ASSERT_CONTAINS(buf, "rrr...");
    FL_ASSERT_CONTAINS(buf, "\033[32mPASS\033[0m");
    /* The same table to a file is not narrowed. */
    char *s = NULL;
    CAPTURE(s, fl_report_summary(out, r, 2));
    FL_ASSERT_GT(visible_width(line(s, 2)), 150);
    free(s);
}
