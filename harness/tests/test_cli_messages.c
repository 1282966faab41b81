/*
 * test_cli_messages.c: what `faultline run`, `shell`, `validate` and `exec`
 * tell a developer whose scenario does not do what they meant: a fault whose
 * trigger never came (a misspelt event kind, a regex that matches no line, a
 * time after the end), a command that is not there (the shell's exit 127), a
 * timeout naming the tasks waited for, a bare program name, an unknown host
 * for the shell, a bad soak: block, an unknown run for exec.  Each test runs
 * the real binary on a scenario written into its own directory.
 */
#include "harness/sys/rundir.h"
#include "harness/tests/fl_test.h"
#include "harness/tests/scenario_fixture.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* faultline run -q with the test's --out and no database, from the test's
 * directory (so messages name the file as the developer typed it; a short
 * --out, as a unix socket path lies below it). */
static int run_in_dir(char **out, const char *file)
{
    return fl_test_sh(out, "cd %s && %s run -q --no-db --out o %s 2>&1", fl_test_dir(),
                      fl_test_bin("faultline"), file);
}

static void need_root_and_probe(void)
{
    fl_test_need_root();
    if (access(fl_test_bin("faultline"), X_OK) != 0)
        FL_SKIP("build/bin/faultline is not built");
}

FL_TEST_ROOT_T(cli_messages, run_notes_faults_that_never_fired, 60)
{
    need_root_and_probe();
    fl_test_write(
        "never.yaml",
        "name: never\n"
        "hosts: [a, b]\n"
        "cluster: {ps: [a], worker: [b]}\n"
        "run:\n"
        "  command: '{bin}/faultline emit save.done step=1; {bin}/faultline emit save.begin'\n"
        "faults:\n"
        "  - {after: {event: save.dne}, kill: a}\n"
        "  - {after: {event: save.done, host: a, count: 3}, kill: b}\n"
        "  - {after: {event: save.done, where: {step: '2'}}, kill: b}\n"
        "  - {after: {event: xyz.zzz}, pause: b}\n"
        "  - {at: 100s, kill: b}\n"
        "  - {on_log: {match: 'never printed'}, kill: b}\n"
        "expect: {all: {all: {exit: 0}}}\n");
    char *out;
    int rc = run_in_dir(&out, "never.yaml");
    /* nothing fired, so the run passes: the notes are all that says so */
    FL_ASSERT_MSG(rc == 0, "faultline run exited %d:\n%s", rc, out);
    FL_ASSERT_CONTAINS(out, "PASS  never");
    FL_ASSERT_CONTAINS(out, "  note: fault 1 (never.yaml:7, kill a) never fired: no 'save.dne' "
                            "event came (did you mean 'save.done'?)\n");
    FL_ASSERT_CONTAINS(out, "  note: fault 2 (never.yaml:8, kill b) never fired: only 1 of the 3 "
                            "matching events came\n");
    FL_ASSERT_CONTAINS(out, "  note: fault 3 (never.yaml:9, kill b) never fired: 2 'save.done' "
                            "events came, none from the host, job or 'where' it names\n");
    FL_ASSERT_CONTAINS(out, "  note: fault 4 (never.yaml:10, pause b) never fired: no 'xyz.zzz' "
                            "event came; events that came: save.done, save.begin\n");
    FL_ASSERT_CONTAINS(out,
                       "  note: fault 5 (never.yaml:11, kill b) never fired: the run ended at ");
    FL_ASSERT_CONTAINS(out, "s, before 'at: 100s'\n");
    FL_ASSERT_CONTAINS(out, "  note: fault 6 (never.yaml:12, kill b) never fired: no output line "
                            "of any task matched 'never printed'\n");
    free(out);
}

FL_TEST_ROOT_T(cli_messages, run_says_nothing_when_every_fault_fired, 60)
{
    need_root_and_probe();
    fl_test_write("fired.yaml", "name: fired\n"
                                "hosts: [a]\n"
                                "cluster: {worker: [a]}\n"
                                "run: {command: '{bin}/faultline emit go; sleep 5'}\n"
                                "faults:\n"
                                "  - {after: {event: go}, kill: a}\n"
                                "expect: {all: {all: {signal: SIGKILL}}}\n");
    char *out;
    int rc = run_in_dir(&out, "fired.yaml");
    FL_ASSERT_MSG(rc == 0, "faultline run exited %d:\n%s", rc, out);
    FL_ASSERT_MSG(!strstr(out, "note:"), "a note although the fault fired:\n%s", out);
    free(out);
}

FL_TEST_ROOT_T(cli_messages, run_names_missing_command, 60)
{
    need_root_and_probe();
    fl_test_write("nocmd.yaml", "name: nocmd\n"
                                "hosts: [a]\n"
                                "cluster: {worker: [a]}\n"
                                "run: {command: no-such-program-fl-ux --flag}\n");
    char *out;
    int rc = run_in_dir(&out, "nocmd.yaml");
    FL_ASSERT_EQ(rc, 1);
    /* the shell's own words, not a bare "exit 127" */
    FL_ASSERT_CONTAINS(out,
                       "observed exit 127: /bin/sh: 1: exec: no-such-program-fl-ux: not found");
    /* no expect: block: no ":0" line, but what the check was */
    FL_ASSERT_MSG(!strstr(out, "nocmd.yaml:0"), "a line 0 in:\n%s", out);
    FL_ASSERT_CONTAINS(out, "(nocmd.yaml has no expect: block for this variant: every task must "
                            "exit 0)");
    /* the verdict line cut the reason; the whole one follows it */
    FL_ASSERT_CONTAINS(out, "\n  reason: worker:0: exit: expected exit 0, observed exit 127: ");
    /* no variant: no double space */
    FL_ASSERT_CONTAINS(out, "\nlogs of nocmd: ");
    free(out);
}

FL_TEST(cli_messages, shell_unknown_host_suggests_and_lists_hosts)
{
    fl_test_write("two.yaml", "name: two\nhosts: [ps0, w0]\ncluster: {ps: [ps0], worker: [w0]}\n"
                              "run: {command: 'true'}\nvariants: {mode: [a, b]}\n");
    char *out;
    int rc = fl_test_sh(&out, "cd %s && %s shell two.yaml w1 2>&1", fl_test_dir(),
                        fl_test_bin("faultline"));
    FL_ASSERT_EQ(rc, 2);
    FL_ASSERT_STREQ(out, "faultline: two.yaml has no host 'w1' (did you mean 'w0'?); its hosts: "
                         "ps0 w0\n");
    free(out);
    /* a bad --variant names the file, as 'run' does */
    rc = fl_test_sh(&out, "cd %s && %s shell two.yaml w0 --variant mode=c 2>&1", fl_test_dir(),
                    fl_test_bin("faultline"));
    FL_ASSERT_EQ(rc, 2);
    FL_ASSERT_CONTAINS(out, "faultline: two.yaml: --variant mode=c: unknown value 'c'");
    free(out);
}

FL_TEST_ROOT_T(cli_messages, run_timeout_names_tasks_waited_for, 60)
{
    need_root_and_probe();
    fl_test_write("slow.yaml",
                  "name: slow\n"
                  "timeout: 1s\n"
                  "hosts: [a, b]\n"
                  "cluster: {ps: [a], worker: [b, b]}\n"
                  "run: {command: 'true', worker: {command: 'exec sleep {task}0'}, grace: 100ms}\n"
                  "expect: {all: {all: {exit: any}}}\n");
    char *out;
    int rc = run_in_dir(&out, "slow.yaml");
    FL_ASSERT_EQ(rc, 1);
    /* ps:0 and worker:0 (sleep 0) ended; worker:1 (sleep 10) kept the run */
    FL_ASSERT_CONTAINS(out, "(timed out after 1.0 s waiting for worker:1)");
    free(out);
}

FL_TEST_ROOT_T(cli_messages, run_bare_own_program_says_write_bin, 60)
{
    need_root_and_probe();
    if (access(fl_test_bin("psrt"), X_OK) != 0)
        FL_SKIP("build/bin/psrt is not built");
    if (fl_test_sh(NULL, "command -v psrt >/dev/null") == 0)
        FL_SKIP("a psrt is on PATH here");
    /* a command written as 'psrt --job_name=...': psrt is not on PATH */
    fl_test_write("bare.yaml", "name: bare\nhosts: [a]\ncluster: {worker: [a]}\n"
                               "run: {command: 'psrt --job_name={job}'}\n");
    char *out;
    int rc = run_in_dir(&out, "bare.yaml");
    FL_ASSERT_EQ(rc, 1);
    FL_ASSERT_CONTAINS(out, "observed exit 127: /bin/sh: 1: exec: psrt: not found (faultline's own "
                            "psrt is not on PATH: write {bin}/psrt)");
    free(out);
}

/* validate checks a soak profile's soak: block too: each of the profile
 * loader's test files fails 'faultline validate' with its own message
 * (but no_soak.yaml, which is an ordinary scenario). */
FL_TEST(cli_messages, validate_checks_soak_block)
{
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/harness/tests/data/soak/invalid", fl_test_root());
    DIR *d = opendir(dir);
    FL_REQUIRE(d != NULL);
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t l = strlen(de->d_name);
        if (l < 6 || strcmp(de->d_name + l - 5, ".yaml") || !strcmp(de->d_name, "no_soak.yaml"))
            continue;
        char path[8400], *text, *out;
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        FL_REQUIRE_EQ(fl_read_file(path, &text, NULL), 0);
        FL_REQUIRE(!strncmp(text, "# expect: ", 10));
        char *nl = strchr(text, '\n');
        *nl = 0;
        int rc = fl_test_sh(&out, "cd %s && %s validate %s 2>&1", dir, fl_test_bin("faultline"),
                            de->d_name);
        FL_ASSERT_MSG(rc == 2, "%s: exit %d", de->d_name, rc);
        char want[1100];
        snprintf(want, sizeof want, "%s\n", expand_kinds(text + 10));
        FL_ASSERT_STREQ(out, want);
        free(out);
        free(text);
        n++;
    }
    closedir(d);
    FL_ASSERT_GE(n, 10);
    char *out;
    int rc = fl_test_sh(&out, "%s validate %s/scenarios/soak/shell-relaunch.yaml 2>&1",
                        fl_test_bin("faultline"), fl_test_root());
    FL_ASSERT_EQ(rc, 0);
    FL_ASSERT_CONTAINS(out, "(soak-shell-relaunch, 1 variant, soak profile)\n");
    free(out);
}

FL_TEST(cli_messages, exec_unknown_run_points_at_out)
{
    char *out;
    int rc = fl_test_sh(&out, "cd %s && %s exec 20260101-000000-zzzzzz a -- true 2>&1",
                        fl_test_dir(), fl_test_bin("faultline"));
    FL_ASSERT_EQ(rc, 2);
    FL_ASSERT_CONTAINS(out, "faultline exec: no run 20260101-000000-zzzzzz (reading "
                            "out/runs/20260101-000000-zzzzzz/state: No such file or directory); "
                            "--out DIR names where the run directories are");
    free(out);
}
