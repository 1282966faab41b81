/*
 * test_reports_html.c: tests of the HTML report (reports/html.c, timeline.c,
 * `faultline report`, `faultline run --html`): the report of a run made by
 * the real engine holds one lane per host/task, the fault interval, the
 * events and the verdict; hostile text from the database is escaped and
 * the page fetches nothing; the timeline's marks for instantaneous,
 * unhealed and relaunch cases; an empty database and a missing one give
 * clear messages; the selection (--last N, run ids) picks the right runs,
 * failing runs first.
 */
#include "harness/record/recorder.h"
#include "harness/sys/rundir.h"
#include "harness/tests/fl_test.h"
#include "reports/report.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static char *slurp(const char *path)
{
    char *buf = NULL;
    size_t len;
    FL_REQUIRE_EQ(fl_read_file(path, &buf, &len), 0);
    return buf;
}

static int count(const char *h, const char *n)
{
    int k = 0;
    for (const char *p = h; (p = strstr(p, n)); p += strlen(n))
        k++;
    return k;
}

/* Nothing is fetched: no script, stylesheet link, image or frame source,
 * and the only URL is the SVG namespace name. */
static void assert_self_contained(const char *h)
{
    FL_ASSERT(!strstr(h, "<script"));
    FL_ASSERT(!strstr(h, "<link"));
    FL_ASSERT(!strstr(h, "<img"));
    FL_ASSERT(!strstr(h, " src=\""));
    FL_ASSERT(!strstr(h, "url("));
    FL_ASSERT_EQ(count(h, "http"), count(h, "xmlns=\"http://www.w3.org/2000/svg\""));
}

static const char *probe_yaml = "name: html-report-probe\n"
                                "about: a client on host a cuts itself off from b for a while\n"
                                "hosts: [a, b]\n"
                                "cluster:\n"
                                "  server: [b]\n"
                                "  client: [a]\n"
                                "run:\n"
                                "  stop_when: [client]\n"
                                "  server: {command: \"sleep 60\"}\n"
                                "  client:\n"
                                "    command: >\n"
                                "      {bin}/faultline emit --sync cut.now && sleep 0.3 &&\n"
                                "      {bin}/faultline emit step.done n=1 && echo CLIENT-DONE\n"
                                "faults:\n"
                                "  - {after: {event: cut.now}, partition: [[a], [b]], for: 100ms}\n"
                                "expect:\n"
                                "  all:\n"
                                "    client: {exit: 0, log_matches: '^CLIENT-DONE$'}\n"
                                "    events: [{event: step.done, host: a, min: 1, max: 1}]\n";

FL_TEST_ROOT_T(reports_html, real_run_has_lanes_fault_events_verdict, 120)
{
    fl_test_need_root();
    const char *d = fl_test_dir();
    char path[4096], *out = NULL;
    snprintf(path, sizeof path, "%s/probe.yaml", d);
    FILE *f = fopen(path, "w");
    FL_REQUIRE(f);
    fputs(probe_yaml, f);
    fclose(f);

    int rc = fl_test_sh(&out,
                        "cd %s && %s run -q --out o --db fl.db --html rep/run.html "
                        "probe.yaml 2>&1",
                        d, fl_test_bin("faultline"));
    FL_REQUIRE_MSG(rc == 0, "faultline run exited %d:\n%s", rc, out);
    FL_ASSERT_CONTAINS(out, "report: rep/run.html\n");
    free(out);
    snprintf(path, sizeof path, "%s/rep/run.html", d);
    char *h = slurp(path);

    /* the summary row and the run's section, closed since it passed */
    FL_ASSERT_CONTAINS(h, "<span class=\"v pass\">PASS</span></td><td>html-report-probe</td>");
    FL_ASSERT_EQ(count(h, "<details class=\"run pass\""), 1);
    FL_ASSERT(!strstr(h, "<details class=\"run pass\" id=\"run-1\" open"));
    /* one lane per host/task: the server on b, the client on a */
    FL_ASSERT_EQ(count(h, "class=\"llabel\""), 2);
    FL_ASSERT_CONTAINS(h, "<title>b  server:0</title>");
    FL_ASSERT_CONTAINS(h, "<title>a  client:0</title>");
    /* the server ran until stop_when ended it: neutral, not a red kill;
     * the client exited 0 */
    FL_ASSERT_CONTAINS(h, "<rect class=\"proc pstop\"");
    FL_ASSERT_CONTAINS(h, "stopped at the end (SIGTERM)");
    FL_ASSERT(!strstr(h, "<rect class=\"proc psig\""));
    FL_ASSERT_CONTAINS(h, "<rect class=\"proc pok\"");
    /* the partition: a healed interval, shaded on both lanes */
    FL_ASSERT_CONTAINS(h, ">partition [a]|[b]<");
    FL_ASSERT_EQ(count(h, "<rect class=\"fbar\""), 1);
    FL_ASSERT_EQ(count(h, "<rect class=\"fband\""), 2);
    FL_ASSERT_CONTAINS(h, "(for=100ms): applied at ");
    FL_ASSERT_CONTAINS(h, ", healed at ");
    /* the events: the sync point filled, the other a circle */
    FL_ASSERT_EQ(count(h, "<path class=\"ev sync\""), 1);
    FL_ASSERT_CONTAINS(h, " cut.now (from a client:0; sync point)</title>");
    FL_ASSERT_CONTAINS(h, " step.done n=1 (from a client:0)</title></circle>");
    /* the checks with their outcomes */
    FL_ASSERT_CONTAINS(h, "<h4>Checks: 3 of 3 passed</h4>");
    FL_ASSERT_CONTAINS(h, "<td>log_matches</td><td>client:0</td>");
    assert_self_contained(h);
    free(h);

    /* `faultline report` on the same database writes the same run */
    rc = fl_test_sh(&out, "cd %s && %s report --db fl.db --out rep/again.html 2>&1", d,
                    fl_test_bin("faultline"));
    FL_ASSERT_EQ(rc, 0);
    FL_ASSERT_CONTAINS(out, "wrote rep/again.html: 1 run (");
    free(out);
    snprintf(path, sizeof path, "%s/rep/again.html", d);
    h = slurp(path);
    FL_ASSERT_EQ(count(h, "class=\"llabel\""), 2);
    FL_ASSERT_EQ(count(h, "<rect class=\"fband\""), 2);
    free(h);
}

/* 2026-11-21 11:00:00 UTC */
#define T0 1795258800000LL

static struct fl_rec *open_rec(const char *name)
{
    char path[4096], err[256];
    struct fl_rec *rec;
    snprintf(path, sizeof path, "%s/%s", fl_test_dir(), name);
    FL_REQUIRE_EQ(fl_rec_open(&rec, path, NULL, err, sizeof err), 0);
    return rec;
}

static struct fl_rec_run *begin(struct fl_rec *rec, const char *id, const char *scenario,
                                const char *variant, int64_t started)
{
    struct fl_rec_run *run;
    struct fl_rec_run_info info = {.run_id = id,
                                   .scenario = scenario,
                                   .variant = variant,
                                   .git_rev = "aaaa1111bbbb",
                                   .seed = 42,
                                   .started_at_ms = started};
    FL_REQUIRE_EQ(fl_rec_run_begin(rec, &info, &run), 0);
    return run;
}

FL_TEST(reports_html, hostile_text_is_escaped)
{
    struct fl_rec *rec = open_rec("fl.db");
    struct fl_rec_run *run = begin(rec, "r-<x>", "<script>alert(1)</script>", "v=\"q\"&w", T0);
    struct fl_rec_proc p = {.host = "h<1>",
                            .job = "j&",
                            .task = 0,
                            .pid = 7,
                            .command = "echo '</title><script>'",
                            .started_ms = 5};
    int no = fl_rec_proc_start(run, &p);
    FL_REQUIRE(no >= 0);
    FL_REQUIRE_EQ(fl_rec_proc_end(run, no, 50, 3, 0, false, false), 0);
    FL_REQUIRE_EQ(
        fl_rec_event(run, 20, "h<1>", "j&", 0, "say<b>", "msg='<b>' bad=\xff\x01 ok=é", false), 0);
    struct fl_rec_fault fa = {.index = 1,
                              .kind = "kill",
                              .target = "h<1>",
                              .detail = "signal=\"<SIG>\"",
                              .applied_ms = 10};
    FL_REQUIRE(fl_rec_fault_applied(run, &fa) >= 0);
    struct fl_rec_check c = {.name = "log_matches",
                             .target = "j&:0",
                             .passed = false,
                             .expected = "output matching /<script>/",
                             .observed = "</td>"};
    FL_REQUIRE_EQ(fl_rec_check(run, &c), 0);
    FL_REQUIRE_EQ(fl_rec_run_end(run, "fail", "<img src=x onerror=alert(1)>", 60), 0);

    char path[4096], err[512];
    snprintf(path, sizeof path, "%s/r.html", fl_test_dir());
    struct fl_report_html_opts o = {.title = "<title>"};
    FL_ASSERT_EQ(fl_report_html(fl_rec_db(rec), path, &o, err, sizeof err), 1);
    fl_rec_close(rec);
    char *h = slurp(path);
    assert_self_contained(h);
    FL_ASSERT_CONTAINS(h, "<title>&lt;title&gt;</title>");
    FL_ASSERT_CONTAINS(h, "&lt;script&gt;alert(1)&lt;/script&gt;");
    FL_ASSERT_CONTAINS(h, "v=&quot;q&quot;&amp;w");
    FL_ASSERT_CONTAINS(h, "&lt;img src=x onerror=alert(1)&gt;");
    FL_ASSERT_CONTAINS(h, "echo &#39;&lt;/title&gt;&lt;script&gt;&#39;");
    FL_ASSERT_CONTAINS(h, "h&lt;1&gt;  j&amp;:0");
    FL_ASSERT_CONTAINS(h, "say&lt;b&gt; msg=&#39;&lt;b&gt;&#39; bad=?? ok=é");
    FL_ASSERT_CONTAINS(h, "signal=&quot;&lt;SIG&gt;&quot;");
    FL_ASSERT_CONTAINS(h, "<td>output matching /&lt;script&gt;/</td><td>&lt;/td&gt;</td>");
    FL_ASSERT_CONTAINS(h, "r-&lt;x&gt;");
    FL_ASSERT(!strchr(h, '\xff'));
    FL_ASSERT(!strchr(h, '\x01'));
    /* a failing run is open */
    FL_ASSERT_CONTAINS(h, "<details class=\"run fail\" id=\"run-1\" open>");
    free(h);
}

FL_TEST(reports_html, timeline_marks_instant_unhealed_running_and_relaunch)
{
    struct fl_rec *rec = open_rec("fl.db");
    struct fl_rec_run *run = begin(rec, "r1", "marks", "", T0);
    struct fl_rec_proc p = {
        .host = "w0", .job = "chief", .task = 0, .pid = 7, .command = "x", .started_ms = 0};
    int no = fl_rec_proc_start(run, &p);
    FL_REQUIRE_EQ(fl_rec_proc_end(run, no, 400, -1, 9, false, false), 0);
    p.generation = 1;
    p.started_ms = 500;
    FL_REQUIRE(fl_rec_proc_start(run, &p) >= 0); /* never reaped */
    struct fl_rec_proc q = {.host = "ps0", .job = "ps", .task = 0, .pid = 8, .command = "y"};
    no = fl_rec_proc_start(run, &q);
    FL_REQUIRE_EQ(fl_rec_proc_end(run, no, 900, 1, 0, false, false), 0);
    struct fl_rec_fault k = {.index = 1,
                             .kind = "kill",
                             .target = "chief:0",
                             .detail = "signal=SIGKILL",
                             .applied_ms = 400};
    FL_REQUIRE(fl_rec_fault_applied(run, &k) >= 0);
    struct fl_rec_fault l = {.index = 2,
                             .kind = "link",
                             .target = "ps0<->w0",
                             .detail = "down for=5000ms",
                             .applied_ms = 600};
    FL_REQUIRE(fl_rec_fault_applied(run, &l) >= 0);
    /* an event from a task with no process of its own gets its own lane */
    FL_REQUIRE_EQ(fl_rec_event(run, 700, "w0", "worker", 0, "save.begin", "step=1", true), 0);
    FL_REQUIRE_EQ(fl_rec_run_end(run, "pass", NULL, 1000), 0);

    char path[4096], err[512];
    snprintf(path, sizeof path, "%s/r.html", fl_test_dir());
    FL_ASSERT_EQ(fl_report_html(fl_rec_db(rec), path, NULL, err, sizeof err), 1);
    fl_rec_close(rec);
    char *h = slurp(path);
    FL_ASSERT_EQ(count(h, "class=\"llabel\""), 3); /* w0 chief:0, ps0 ps:0, w0 worker:0 */
    FL_ASSERT_CONTAINS(h, "<title>w0  worker:0</title>");
    FL_ASSERT_EQ(count(h, "<path class=\"fmark\""), 1);         /* the kill: a mark */
    FL_ASSERT_EQ(count(h, "<rect class=\"fline\""), 1);         /* ... over chief:0's lane */
    FL_ASSERT_EQ(count(h, "<rect class=\"fbar unhealed\""), 1); /* the link, never healed */
    FL_ASSERT_EQ(count(h, "<rect class=\"fband\""), 3);         /* over ps0's lane and w0's two */
    FL_ASSERT_CONTAINS(h, "<rect class=\"proc prun\"");
    FL_ASSERT_CONTAINS(h, "still running at the end");
    FL_ASSERT_CONTAINS(h, ">SIGKILL</text>");
    FL_ASSERT_CONTAINS(h, ">exit 1</text>");
    FL_ASSERT_CONTAINS(h, ">g1</text>");
    FL_ASSERT_EQ(count(h, "<path class=\"eck sync\""), 1);
    free(h);
}

FL_TEST(reports_html, empty_and_missing_database_say_so)
{
    const char *d = fl_test_dir();
    fl_rec_close(open_rec("empty.db"));
    char *out = NULL;
    int rc = fl_test_sh(&out, "%s report --db %s/empty.db --out %s/e.html 2>&1",
                        fl_test_bin("faultline"), d, d);
    FL_ASSERT_EQ(rc, 1);
    FL_ASSERT_CONTAINS(out, "empty.db holds no runs yet: nothing to report");
    free(out);
    char path[4096];
    struct stat st;
    snprintf(path, sizeof path, "%s/e.html", d);
    FL_ASSERT(stat(path, &st) < 0);

    rc = fl_test_sh(&out, "%s report --db %s/nope/fl.db --out %s/m.html 2>&1",
                    fl_test_bin("faultline"), d, d);
    FL_ASSERT_EQ(rc, 2);
    FL_ASSERT_CONTAINS(out, "no results database at ");
    FL_ASSERT_CONTAINS(out, "/nope/fl.db: No such file or directory");
    FL_ASSERT_CONTAINS(out, "--db PATH reads another");
    free(out);
    snprintf(path, sizeof path, "%s/nope", d);
    FL_ASSERT(stat(path, &st) < 0); /* reading creates nothing */
}

FL_TEST(reports_html, selection_last_ids_and_failing_first)
{
    const char *d = fl_test_dir();
    struct fl_rec *rec = open_rec("fl.db");
    FL_REQUIRE_EQ(fl_rec_run_end(begin(rec, "run-old", "sc-old", "", T0), "pass", NULL, 10), 0);
    FL_REQUIRE_EQ(
        fl_rec_run_end(begin(rec, "run-mid", "sc-mid", "", T0 + 1000), "fail", "it broke", 10), 0);
    FL_REQUIRE_EQ(fl_rec_run_end(begin(rec, "run-new", "sc-new", "", T0 + 2000), "pass", NULL, 10),
                  0);
    fl_rec_close(rec);
    const char *bin = fl_test_bin("faultline");
    char *out = NULL, path[4096];
    snprintf(path, sizeof path, "%s/r.html", d);

    FL_REQUIRE_EQ(fl_test_sh(&out, "%s report --db %s/fl.db --out %s --last 2", bin, d, path), 0);
    FL_ASSERT_CONTAINS(out, ": 2 runs (");
    free(out);
    char *h = slurp(path);
    FL_ASSERT(!strstr(h, "sc-old"));
    const char *mid = strstr(h, "<td>sc-mid</td>"), *nw = strstr(h, "<td>sc-new</td>");
    FL_REQUIRE(mid && nw);
    FL_ASSERT_MSG(mid < nw, "the failing run is not listed first");
    FL_ASSERT_CONTAINS(h, "<td>it broke</td>");
    FL_ASSERT_CONTAINS(h, "<td class=\"num\">42</td><td>aaaa1111bbbb</td>");
    free(h);

    FL_REQUIRE_EQ(fl_test_sh(NULL, "%s report --db %s/fl.db --out %s run-old", bin, d, path), 0);
    h = slurp(path);
    FL_ASSERT_CONTAINS(h, "<td>sc-old</td>");
    FL_ASSERT(!strstr(h, "sc-mid") && !strstr(h, "sc-new"));
    free(h);

    FL_ASSERT_EQ(
        fl_test_sh(&out, "%s report --db %s/fl.db --out %s run-old nope 2>&1", bin, d, path), 2);
    FL_ASSERT_CONTAINS(out, "no run 'nope' in database ");
    free(out);
    FL_ASSERT_EQ(fl_test_sh(&out, "%s report --db %s/fl.db --last 2 run-old 2>&1", bin, d), 2);
    FL_ASSERT_CONTAINS(out, "not both");
    free(out);
    FL_ASSERT_EQ(fl_test_sh(&out, "%s report --db %s/fl.db --last 0 2>&1", bin, d), 2);
    FL_ASSERT_CONTAINS(out, "--last wants a number");
    free(out);
    /* --since REV: every run since the first at that revision (all three here) */
    FL_REQUIRE_EQ(
        fl_test_sh(&out, "%s report --db %s/fl.db --out %s --since aaaa1111", bin, d, path), 0);
    FL_ASSERT_CONTAINS(out, ": 3 runs (");
    free(out);
    FL_ASSERT_EQ(
        fl_test_sh(&out, "%s report --db %s/fl.db --out %s --since 0123abcd 2>&1", bin, d, path),
        2);
    FL_ASSERT_CONTAINS(out, "no run recorded at revision 0123abcd in database ");
    free(out);
    /* --out naming a directory: said, and nothing left behind */
    FL_ASSERT_EQ(fl_test_sh(&out, "%s report --db %s/fl.db --out %s 2>&1", bin, d, d), 1);
    FL_ASSERT_CONTAINS(out, " is a directory; give the report a file path (e.g. ");
    free(out);
    FL_ASSERT_EQ(fl_test_sh(&out, "ls -a %s | grep -c tmp", d), 1);
    FL_ASSERT_STREQ(out, "0\n");
    free(out);
}

FL_TEST(reports_html, help_lists_the_command_and_its_options)
{
    char *out = NULL;
    FL_REQUIRE_EQ(fl_test_sh(&out, "%s --help", fl_test_bin("faultline")), 0);
    FL_ASSERT_CONTAINS(out, "  report  ");
    free(out);
    FL_REQUIRE_EQ(fl_test_sh(&out, "%s report --help", fl_test_bin("faultline")), 0);
    const char *opts[] = {"--db PATH", "--out FILE",  "RUN-ID...",
                          "--last N",  "--since REV", "run --html FILE"};
    for (size_t i = 0; i < sizeof opts / sizeof *opts; i++)
        FL_ASSERT_CONTAINS(out, opts[i]);
    free(out);
    FL_REQUIRE_EQ(fl_test_sh(&out, "%s run --help", fl_test_bin("faultline")), 0);
    FL_ASSERT_CONTAINS(out, "--html FILE");
    free(out);
}

/* The verdict history across runs: every recorded run of the report's
 * scenarios (not only the report's), oldest on the left, counts, where the
 * current streak began, failing scenarios first; only the report's own
 * runs link to their sections. */
FL_TEST(reports_html, history_counts_squares_and_streak)
{
    const char *d = fl_test_dir();
    struct fl_rec *rec = open_rec("fl.db");
    const char *verdicts[] = {"pass", "pass", "fail", "error"};
    const char *revs[] = {"rev1", "rev1", "rev2", "rev3"};
    for (int i = 0; i < 4; i++) {
        char id[16];
        snprintf(id, sizeof id, "a-%d", i);
        struct fl_rec_run *run;
        struct fl_rec_run_info info = {.run_id = id,
                                       .scenario = "sc-a",
                                       .variant = "p=1",
                                       .git_rev = revs[i],
                                       .seed = 1,
                                       .started_at_ms = T0 + i * 1000};
        FL_REQUIRE_EQ(fl_rec_run_begin(rec, &info, &run), 0);
        FL_REQUIRE_EQ(fl_rec_run_end(run, verdicts[i], i == 3 ? "it <broke>" : NULL, 10), 0);
    }
    FL_REQUIRE_EQ(fl_rec_run_end(begin(rec, "b-0", "sc-b", "", T0 + 500), "pass", NULL, 10), 0);
    FL_REQUIRE_EQ(fl_rec_run_end(begin(rec, "b-1", "sc-b", "", T0 + 600), "pass", NULL, 10), 0);
    char path[4096], err[512];
    snprintf(path, sizeof path, "%s/r.html", d);
    /* only the newest run (a-3): the history still shows all four of sc-a */
    struct fl_report_html_opts o = {.last = 1};
    FL_ASSERT_EQ(fl_report_html(fl_rec_db(rec), path, &o, err, sizeof err), 1);
    char *h = slurp(path);
    const char *hist = strstr(h, "<h2>Verdict history</h2>");
    FL_REQUIRE(hist);
    FL_ASSERT(!strstr(hist, "sc-b"));
    FL_ASSERT_CONTAINS(hist, "<td>sc-a</td><td>p=1</td><td class=\"num\">4</td><td class=\"num\">2"
                             "</td><td class=\"num\">1</td><td class=\"num\">1</td>");
    FL_ASSERT_EQ(count(hist, "<rect x="), 4);
    /* oldest on the left: a-0 at x=0, a-3 at x=36, linked (it is in the report) */
    const char *a0 = strstr(hist, "<title>a-0 pass"), *a3 = strstr(hist, "<title>a-3 error");
    FL_REQUIRE(a0 && a3);
    FL_ASSERT(a0 < a3);
    FL_ASSERT_CONTAINS(hist, "<a href=\"#run-4\"><rect x=\"36\"");
    FL_ASSERT_EQ(count(hist, "<a href="), 1);
    FL_ASSERT_CONTAINS(hist, "a-3 error, rev rev3, ");
    FL_ASSERT_CONTAINS(hist, ": it &lt;broke&gt;</title>");
    FL_ASSERT_CONTAINS(hist, "not passing since a-2 (rev rev2, ");
    FL_ASSERT_CONTAINS(hist, "): 2 runs");
    free(h);
    /* all runs: the failing scenario first, the passing one's streak */
    o.last = -1;
    FL_ASSERT_EQ(fl_report_html(fl_rec_db(rec), path, &o, err, sizeof err), 6);
    h = slurp(path);
    hist = strstr(h, "<h2>Verdict history</h2>");
    FL_REQUIRE(hist);
    const char *ra = strstr(hist, "<td>sc-a</td>"), *rb = strstr(hist, "<td>sc-b</td>");
    FL_REQUIRE(ra && rb);
    FL_ASSERT_MSG(ra < rb, "the failing scenario is not first");
    FL_ASSERT_CONTAINS(rb, "passing since its first run, b-0 (rev aaaa1111bbbb, ");
    FL_ASSERT_EQ(count(hist, "<a href="), 6);
    assert_self_contained(h);
    free(h);
    fl_rec_close(rec);
}

FL_TEST(reports_html, faults_that_never_fired_are_listed_with_their_notes)
{
    struct fl_rec *rec = open_rec("fl.db");
    struct fl_rec_run *run = begin(rec, "r1", "unfired", "", T0);
    struct fl_rec_unfired u = {.index = 2,
                               .kind = "kill",
                               .target = "'{event.node}'",
                               .line = 12,
                               .note = "fault 2 (f.yaml:12, kill '{event.node}') never fired: no "
                                       "'leader.is' event came (did you mean 'leader.was'?)"};
    FL_REQUIRE_EQ(fl_rec_fault_unfired(run, &u), 0);
    FL_REQUIRE_EQ(fl_rec_run_end(run, "pass", NULL, 1000), 0);
    char path[4096], err[512];
    snprintf(path, sizeof path, "%s/r.html", fl_test_dir());
    FL_ASSERT_EQ(fl_report_html(fl_rec_db(rec), path, NULL, err, sizeof err), 1);
    fl_rec_close(rec);
    char *h = slurp(path);
    FL_ASSERT_CONTAINS(h, "<h4>Faults that never fired (1)</h4>");
    FL_ASSERT_CONTAINS(h, "<td>2</td><td>kill</td><td>&#39;{event.node}&#39;</td><td>12</td>"
                          "<td>fault 2 (f.yaml:12, kill &#39;{event.node}&#39;) never fired: no "
                          "&#39;leader.is&#39; event came (did you mean &#39;leader.was&#39;?)"
                          "</td>");
    free(h);
}
