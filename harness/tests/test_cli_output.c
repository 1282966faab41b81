/*
 * test_cli_output.c: what a developer sees of `faultline run`, on real runs
 * of the real binary: the summary table fits the terminal it is printed to
 * (a pseudo-terminal of a known width, as a person's), whole with --wide and
 * whole into a pipe (scripts and test_engine_seeds.c read it there); a
 * failed run's evidence, the last lines of each failing task's log and
 * where the run's logs are, in the JUnit XML and the HTML report, escaped;
 * and in the HTML report a multi-line command with its lines and the end
 * label of a task killed by SIGTERM, whole, over a relaunch that starts
 * right after it.
 */
#include "harness/tests/fl_test.h"

#include <errno.h>
#include <pty.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void need_root_and_binary(void)
{
    fl_test_need_root();
    if (access(fl_test_bin("faultline"), X_OK) != 0)
        FL_SKIP("build/bin/faultline is not built");
}

/* Runs the shell command on a pseudo-terminal cols wide (stdin, stdout and
 * stderr), COLUMNS unset and no colour; its output, without the terminal's
 * '\r', into *out (malloc'd).  Returns its exit status. */
static int sh_on_tty(char **out, unsigned short cols, const char *fmt, ...)
{
    char cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    struct winsize ws = {.ws_row = 50, .ws_col = cols};
    int master;
    pid_t pid = forkpty(&master, NULL, NULL, &ws);
    if (pid < 0)
        FL_SKIP("no pseudo-terminal: %s", strerror(errno));
    if (pid == 0) {
        unsetenv("COLUMNS");
        setenv("NO_COLOR", "1", 1);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    size_t cap = 1 << 20, got = 0;
    char *buf = malloc(cap);
    FL_REQUIRE(buf);
    ssize_t k;
    /* read until the terminal is closed: EIO once the command has ended */
    while (got < cap - 1 && (k = read(master, buf + got, cap - 1 - got)) != 0) {
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            break;
        got += (size_t)k;
    }
    close(master);
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    size_t o = 0;
    for (size_t i = 0; i < got; i++)
        if (buf[i] != '\r')
            buf[o++] = buf[i];
    buf[o] = 0;
    *out = buf;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* The lines of the summary table in s (its header line "SEED ..." through
 * the totals line "N run..."), malloc'd; NULL when there is none. */
static char *table_of(const char *s)
{
    const char *a = strstr(s, "\nSEED  ");
    const char *b = a ? strstr(a, " run: ") : NULL;
    if (!a || !b)
        return NULL;
    const char *e = strchr(b, '\n');
    return strndup(a + 1, (size_t)((e ? e : b + strlen(b)) - a - 1));
}

/* A reproducer-shaped scenario (its name sNNN-LAYOUT: the table with SEED
 * LAYOUT PROTOCOL and OBSERVED without maximum) whose task fails the way it
 * expects, with a 200-character error line that OBSERVED then shows. */
static const char long_error[] =
    "NotFoundError: ./train_logs/model.ckpt-0_temp_0123456789abcdef0123456789abcdef/"
    "part-00000-of-00002.data-00000-of-00001; No such file or directory; and then some "
    "more words to pass 200";

FL_TEST_ROOT_T(cli_output, run_table_fits_terminal_whole_when_wide_or_piped, 120)
{
    need_root_and_binary();
    char yaml[1024];
    snprintf(yaml, sizeof yaml,
             "name: s990-long-error\n"
             "hosts: [a]\n"
             "cluster: {worker: [a]}\n"
             "run: {command: 'echo \"%s\"; exit 1'}\n"
             "expect: {all: {chief: {fails_with: 'NotFoundError: .*No such file'}}}\n",
             long_error);
    fl_test_write("s990-long-error.yaml", yaml);
    const char *run = "cd %s && %s run -q --no-db --out o s990-long-error.yaml%s";
    char *out, *t;

    /* a terminal 100 columns wide: every line of the table fits, OBSERVED cut */
    int rc = sh_on_tty(&out, 100, run, fl_test_dir(), fl_test_bin("faultline"), "");
    FL_ASSERT_MSG(rc == 0, "faultline run exited %d:\n%s", rc, out);
    FL_REQUIRE_MSG((t = table_of(out)), "no table in:\n%s", out);
    size_t wide = fl_test_widest_line(t);
    FL_ASSERT_MSG(wide <= 100, "the table is wider (%zu) than the terminal (100):\n%s", wide,
                  t ? t : "");
    FL_ASSERT_CONTAINS(t, "S990  long-error  -         chief fails");
    FL_ASSERT_CONTAINS(t, "  worker:0 exit 1: NotFound");
    FL_ASSERT_CONTAINS(t, "...  PASS");
    FL_ASSERT_MSG(!strstr(t, long_error), "OBSERVED whole on a 100-column terminal:\n%s", t);
    free(t);
    free(out);

    /* --wide: whole on the terminal */
    rc = sh_on_tty(&out, 100, run, fl_test_dir(), fl_test_bin("faultline"), " --wide");
    FL_ASSERT_MSG(rc == 0, "faultline run --wide exited %d:\n%s", rc, out);
    FL_REQUIRE_MSG((t = table_of(out)), "no table in:\n%s", out);
    FL_ASSERT_CONTAINS(t, long_error);
    FL_ASSERT_CONTAINS(t, "chief fails_with /NotFoundError: .*No such file/");
    FL_ASSERT_GT(fl_test_widest_line(t), 200);
    free(t);
    free(out);

    /* into a pipe, as a script reads it: whole (not narrowed to any width) */
    rc = fl_test_sh(&out, run, fl_test_dir(), fl_test_bin("faultline"), " 2>&1");
    FL_ASSERT_MSG(rc == 0, "faultline run exited %d:\n%s", rc, out);
    FL_REQUIRE_MSG((t = table_of(out)), "no table in:\n%s", out);
    FL_ASSERT_CONTAINS(t, long_error);
    free(t);
    free(out);

    /* --help says so */
    FL_ASSERT_EQ(fl_test_sh(&out, "%s run --help", fl_test_bin("faultline")), 0);
    FL_ASSERT_CONTAINS(out, "  --wide ");
    FL_ASSERT_CONTAINS(out, "$COLUMNS");
    free(out);
}

static int read_all(const char *path, char **out)
{
    return fl_test_sh(out, "cat '%s'", path);
}

FL_TEST_ROOT_T(cli_output, failed_run_evidence_in_junit_and_html, 120)
{
    need_root_and_binary();
    /* worker:0 prints 30 lines (markup, a control character, invalid
     * UTF-8 among them) and exits 3; ps:0 runs until the run's end, which
     * stops it: only worker:0 is the failing task */
    fl_test_write("ev.yaml", "name: evidence\n"
                             "hosts: [a, b]\n"
                             "cluster: {ps: [a], worker: [b]}\n"
                             "run:\n"
                             "  stop_when: [worker]\n"
                             "  ps: {command: 'echo ps says hello; sleep 30'}\n"
                             "  worker:\n"
                             "    command: |\n"
                             "      for i in $(seq 1 29); do echo \"line $i <&> of {job}\"; done\n"
                             "      printf 'ctl \\001 \\033[31mred\\033[0m \\377 ]]> end\\n'\n"
                             "      exit 3\n"
                             "expect: {all: {worker: {exit: 0}}}\n");
    char *out, *x, *h;
    int rc = fl_test_sh(&out,
                        "cd %s && %s run -q --out o --db fl.db ev.yaml --junit o/j.xml "
                        "--html o/r.html 2>&1",
                        fl_test_dir(), fl_test_bin("faultline"));
    FL_ASSERT_MSG(rc == 1, "faultline run exited %d (not 1, a failed run):\n%s", rc, out);
    const char *logs = strstr(out, "logs of evidence: ");
    FL_REQUIRE_MSG(logs, "no 'logs of' line:\n%s", out);
    char dir[4096];
    snprintf(dir, sizeof dir, "%.*s", (int)strcspn(logs + 18, "\n"), logs + 18);
    free(out);

    char path[4200], want[9000];
    snprintf(path, sizeof path, "%s/o/j.xml", fl_test_dir());
    FL_REQUIRE_EQ(read_all(path, &x), 0);
    snprintf(want, sizeof want,
             "\nlogs: %s\n\n--- worker:0: the last lines of %s/b.worker.0.0.log ---\n"
             "line 11 &lt;&amp;&gt; of worker\n",
             dir, dir);
    FL_ASSERT_CONTAINS(x, want);
    FL_ASSERT_MSG(!strstr(x, "line 10 "), "more than 20 lines in:\n%s", x);
    FL_ASSERT_CONTAINS(
        x, "line 29 &lt;&amp;&gt; of worker\nctl    [31mred [0m ? ]]&gt; end</failure>");
    FL_ASSERT_MSG(!strstr(x, "ps says hello"), "ps:0, stopped at the run's end, as evidence:\n%s",
                  x);
    snprintf(want, sizeof want, "<system-out>run id: ");
    FL_ASSERT_CONTAINS(x, want);
    snprintf(want, sizeof want, "\nlogs: %s\n</system-out>", dir);
    FL_ASSERT_CONTAINS(x, want);
    if (fl_test_sh(NULL, "command -v xmllint >/dev/null") == 0) {
        FL_ASSERT_EQ(fl_test_sh(&out, "xmllint --noout '%s' 2>&1", path), 0);
        FL_ASSERT_STREQ(out, "");
        free(out);
    }
    free(x);

    /* the database says which process is the evidence */
    snprintf(path, sizeof path, "%s/fl.db", fl_test_dir());
    FL_ASSERT_EQ(fl_test_db_int(path, "SELECT count(*) FROM processes WHERE failing = 1"), 1);
    FL_ASSERT_EQ(fl_test_db_int(path, "SELECT count(*) FROM processes WHERE failing = 1 AND "
                                      "job = 'worker' AND task = 0"),
                 1);

    /* the HTML report: the same lines, HTML-escaped, and the log directory */
    snprintf(path, sizeof path, "%s/o/r.html", fl_test_dir());
    FL_REQUIRE_EQ(read_all(path, &h), 0);
    FL_ASSERT_CONTAINS(h, "<h4>Logs of the failing tasks</h4>");
    snprintf(want, sizeof want, "The run's logs: <code>%s</code>", dir);
    FL_ASSERT_CONTAINS(h, want);
    snprintf(want, sizeof want,
             "<b>b worker:0</b> (exit 3): the last lines of <code>%s/b.worker.0.0.log</code>", dir);
    FL_ASSERT_CONTAINS(h, want);
    FL_ASSERT_CONTAINS(h, "<pre class=\"log\">line 11 &lt;&amp;&gt; of worker\n");
    FL_ASSERT_CONTAINS(h,
                       "line 29 &lt;&amp;&gt; of worker\nctl    [31mred [0m ? ]]&gt; end\n</pre>");
    FL_ASSERT_MSG(!strstr(h, "<b>a ps:0</b>"), "ps:0 shown as failing");
    free(h);

    /* `faultline report` on the database writes the same section */
    FL_ASSERT_EQ(fl_test_sh(NULL, "cd %s && %s report --db fl.db --out r2.html >/dev/null",
                            fl_test_dir(), fl_test_bin("faultline")),
                 0);
    snprintf(path, sizeof path, "%s/r2.html", fl_test_dir());
    FL_REQUIRE_EQ(read_all(path, &h), 0);
    FL_ASSERT_CONTAINS(h, "<pre class=\"log\">line 11 &lt;&amp;&gt; of worker\n");
    free(h);
}

/* The number of the first character of needle in h after from, or -1. */
static long pos(const char *h, const char *from, const char *needle)
{
    const char *p = strstr(from, needle);
    return p ? (long)(p - h) : -1;
}

FL_TEST_ROOT_T(cli_output, report_keeps_command_lines_and_whole_signal_label, 120)
{
    need_root_and_binary();
    /* worker:0's first process is killed by SIGTERM and relaunched 1 ms
     * later, for a second: on the timeline its next bar starts a few
     * pixels after the first ends, where the first's end label goes */
    fl_test_write("sig.yaml",
                  "name: sigterm\n"
                  "hosts: [a]\n"
                  "cluster: {worker: [a]}\n"
                  "run:\n"
                  "  command: |\n"
                  "    echo first line of the command\n"
                  "    if [ \"$FAULTLINE_GENERATION\" = 0 ]; then {bin}/faultline emit --sync go; "
                  "sleep 10; else sleep 1; fi\n"
                  "    echo third line\n"
                  "faults:\n"
                  "  - {after: {event: go}, kill: 'worker:0', signal: SIGTERM, for: 1ms}\n"
                  "expect: {all: {all: {exit: 0}}}\n");
    char *out, *h;
    int rc = fl_test_sh(&out, "cd %s && %s run -q --out o --db fl.db sig.yaml --html r.html 2>&1",
                        fl_test_dir(), fl_test_bin("faultline"));
    FL_ASSERT_MSG(rc == 0, "faultline run exited %d:\n%s", rc, out);
    free(out);
    char path[4200];
    snprintf(path, sizeof path, "%s/fl.db", fl_test_dir());
    FL_REQUIRE_EQ(fl_test_db_int(path, "SELECT count(*) FROM processes WHERE signal = 15 AND "
                                       "generation = 0 AND stopped_at_end = 0"),
                  1);
    snprintf(path, sizeof path, "%s/r.html", fl_test_dir());
    FL_REQUIRE_EQ(read_all(path, &h), 0);

    /* the command as written, its three lines kept, in a <pre> */
    FL_ASSERT_CONTAINS(h, "<td class=\"cmd\"><pre>echo first line of the command\nif [ "
                          "&quot;$FAULTLINE_GENERATION&quot; = 0 ]; then ");
    FL_ASSERT_CONTAINS(h, "; sleep 10; else sleep 1; fi\necho third line</pre></td>");

    /* the end label: SIGTERM whole, drawn after every process bar (the
     * relaunch's bar would cover it), and inside the picture */
    const char *svg = strstr(h, "<svg class=\"tl\"");
    FL_REQUIRE(svg);
    long label = pos(h, svg, "<text class=\"pend psig\"");
    FL_REQUIRE_MSG(label >= 0, "no end label in the timeline");
    FL_ASSERT_CONTAINS(h + label, ">SIGTERM</text>");
    long last_bar = -1;
    for (long p = pos(h, svg, "<rect class=\"proc "); p >= 0;
         p = pos(h, h + p + 1, "<rect class=\"proc "))
        last_bar = p;
    FL_REQUIRE(last_bar >= 0);
    FL_ASSERT_MSG(label > last_bar,
                  "the SIGTERM label is drawn before a process bar (at %ld, "
                  "last bar at %ld): the relaunch's bar hides it",
                  label, last_bar);
    double x = -1, width = -1;
    FL_REQUIRE_EQ(sscanf(h + label, "<text class=\"pend psig\" x=\"%lf\"", &x), 1);
    const char *vb = strstr(svg, "viewBox=\"0 0 ");
    FL_REQUIRE(vb);
    FL_REQUIRE_EQ(sscanf(vb, "viewBox=\"0 0 %lf", &width), 1);
    /* 11px bold: at most 0.8em a capital letter, "signal 64" the longest label */
    FL_ASSERT_MSG(x + 9 * 0.8 * 11 <= width, "an end label at x=%.1f would be cut at %.0f", x,
                  width);
    free(h);
}
