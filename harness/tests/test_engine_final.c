/*
 * test_engine_final.c: the final: checks (harness/engine/final.c): once
 * stop_when is met, every fault still holding is undone and every host is
 * up before the checks run, on their hosts, beside the cluster's tasks; a
 * check is judged like a task (exit 0 unless expect says otherwise, its
 * log_matches), a check past its timeout is killed and fails, and a run
 * that timed out runs none.
 */
#include "harness/tests/fl_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A partition without for: holds until the end; the check on b reads a's
 * file over the network, which works only once it was healed; a fault
 * triggered by the check's own output does not fire. */
FL_TEST_ROOT_T(engine_final, check_reads_across_a_healed_partition, 90)
{
    fl_test_scenario_passes("final-partition.yaml");
    FL_ASSERT_EQ(fl_test_scenario_db_int("SELECT count(*) FROM faults WHERE kind = 'partition'"
                                         " AND healed_ms IS NOT NULL"),
                 1);
    /* the check ran after the client ended, and after the heal */
    FL_ASSERT_EQ(fl_test_scenario_db_int(
                     "SELECT count(*) FROM processes v, processes c, faults f"
                     " WHERE v.job = 'verify' AND v.task = 0 AND v.host = 'b' AND v.exit_code = 0"
                     " AND c.job = 'client' AND v.started_ms >= c.ended_ms"
                     " AND v.started_ms >= f.healed_ms"),
                 1);
    FL_ASSERT_EQ(fl_test_scenario_db_int("SELECT count(*) FROM checks WHERE target = 'verify:0'"
                                         " AND passed = 1 AND name IN ('exit', 'log_matches')"),
                 2);
    /* its lane in the report's timeline */
    char *out;
    const char *d = fl_test_dir();
    int rc = fl_test_sh(&out,
                        "cd %s && %s report --db fl.db --out r.html 2>&1 && grep -c "
                        "'b  verify:0' r.html",
                        d, fl_test_bin("faultline"));
    FL_ASSERT_MSG(rc == 0, "report: exit %d: %s", rc, out);
    free(out);
}

/* a is restarted for 10 minutes and b crashed for good: a comes back with
 * its server relaunched, b comes back (without its task), before the
 * checks run; one reads a's file from c, the other runs on b. */
FL_TEST_ROOT_T(engine_final, every_host_is_up_for_the_checks, 90)
{
    fl_test_scenario_passes("final-host-down.yaml");
    FL_ASSERT_EQ(fl_test_scenario_db_int("SELECT count(*) FROM processes WHERE job = 'server'"
                                         " AND generation = 1"),
                 1);
    FL_ASSERT_EQ(fl_test_scenario_db_int("SELECT count(*) FROM processes WHERE job = 'idle'"),
                 1); /* a crash without for: starts nothing again */
    FL_ASSERT_EQ(fl_test_scenario_db_int("SELECT count(*) FROM processes WHERE job IN "
                                         "('fetch', 'on_b') AND exit_code = 0"),
                 2);
}

/* Runs `faultline run` on an inline scenario in the test's directory;
 * returns its exit status, its output in *out. */
static int run_inline(const char *name, const char *text, char **out)
{
    const char *scn = fl_test_write(name, text);
    return fl_test_sh(out, "cd %s && %s run -q --db fl.db %s 2>&1", fl_test_dir(),
                      fl_test_bin("faultline"), scn);
}

/* A check's non-zero exit fails the run, naming it and its line; another
 * check allowed any exit does not fail; log_matches reads a check's log. */
FL_TEST_ROOT_T(engine_final, nonzero_exit_fails_the_run_naming_the_check, 60)
{
    char *out;
    int rc = run_inline("final-exit.yaml",
                        "name: it-final-exit\n"
                        "hosts: [a, b]\n"
                        "cluster: {client: [a]}\n"
                        "run: {command: \"true\"}\n"
                        "final:\n"
                        "  verify: {host: b, command: \"echo lost=2; exit 3\"}\n"
                        "  lenient: {host: a, command: \"echo ok; exit 5\"}\n"
                        "expect:\n"
                        "  all:\n"
                        "    lenient: {exit: any, log_matches: '^ok$'}\n"
                        "    verify: {log_matches: '^lost=0$'}\n",
                        &out);
    FL_ASSERT_MSG(rc == 1, "faultline run: exit %d: %s", rc, out);
    FL_ASSERT_CONTAINS(out, "verify:0: log_matches: expected output matching /^lost=0$/, observed "
                            "no matching line (");
    FL_ASSERT_CONTAINS(out, "/final-exit.yaml:11); also failed: verify:0 exit");
    FL_ASSERT(!strstr(out, "lenient:0 exit"));
    free(out);
    char db[4200];
    snprintf(db, sizeof db, "%s/fl.db", fl_test_dir());
    FL_ASSERT_EQ(fl_test_db_int(db, "SELECT count(*) FROM checks WHERE name = 'exit' AND "
                                    "target = 'verify:0' AND passed = 0 AND expected = 'exit 0'"
                                    " AND observed = 'exit 3' AND line = 6"),
                 1);
    FL_ASSERT_EQ(fl_test_db_int(db, "SELECT count(*) FROM checks WHERE target = 'lenient:0' AND "
                                    "passed = 1"),
                 2);

    /* the exit alone: its reason names the check and the final's line */
    rc = run_inline("final-exit0.yaml",
                    "name: it-final-exit0\n"
                    "hosts: [a, b]\n"
                    "cluster: {client: [a]}\n"
                    "run: {command: \"true\"}\n"
                    "final:\n"
                    "  verify: {host: b, command: \"echo no; exit 3\"}\n",
                    &out);
    FL_ASSERT_MSG(rc == 1, "faultline run: exit %d: %s", rc, out);
    FL_ASSERT_CONTAINS(out, "verify:0: exit: expected exit 0, observed exit 3 (");
    FL_ASSERT_CONTAINS(out, "/final-exit0.yaml:6)");
    free(out);
}

/* A check still running at its timeout is killed and fails; the run does
 * not wait for it. */
FL_TEST_ROOT_T(engine_final, check_past_its_timeout_is_killed_and_fails, 60)
{
    char *out;
    int rc = run_inline("final-slow.yaml",
                        "name: it-final-slow\n"
                        "hosts: [a]\n"
                        "cluster: {client: [a]}\n"
                        "run: {command: \"true\"}\n"
                        "final:\n"
                        "  slow: {host: a, command: \"sleep 60\", timeout: 300ms}\n"
                        "expect: {all: {slow: {exit: any}}}\n",
                        &out);
    FL_ASSERT_MSG(rc == 1, "faultline run: exit %d: %s", rc, out);
    FL_ASSERT_CONTAINS(out, "slow:0: timeout: expected an end within its timeout (0.3 s), observed "
                            "killed at its timeout (0.3 s) (");
    FL_ASSERT_CONTAINS(out, "/final-slow.yaml:6)");
    free(out);
    char db[4200];
    snprintf(db, sizeof db, "%s/fl.db", fl_test_dir());
    FL_ASSERT_EQ(fl_test_db_int(db, "SELECT count(*) FROM processes WHERE job = 'slow' AND "
                                    "signal = 9 AND ended_ms - started_ms < 20000"),
                 1);
}

/* A run that times out runs no check: each fails as not run. */
FL_TEST_ROOT_T(engine_final, timed_out_run_runs_no_check, 60)
{
    char *out;
    int rc = run_inline("final-late.yaml",
                        "name: it-final-late\n"
                        "hosts: [a]\n"
                        "timeout: 500ms\n"
                        "cluster: {client: [a]}\n"
                        "run: {command: \"sleep 60\"}\n"
                        "final:\n"
                        "  verify: {host: a, command: \"true\"}\n",
                        &out);
    FL_ASSERT_MSG(rc == 1, "faultline run: exit %d: %s", rc, out);
    FL_ASSERT_CONTAINS(out, "timed out after 0.5 s waiting for client:0; ");
    free(out);
    char db[4200];
    snprintf(db, sizeof db, "%s/fl.db", fl_test_dir());
    FL_ASSERT_EQ(fl_test_db_int(db, "SELECT count(*) FROM checks WHERE target = 'verify:0' AND "
                                    "passed = 0 AND observed = 'not run (the run timed out before "
                                    "its stop_when jobs ended)'"),
                 1);
    FL_ASSERT_EQ(fl_test_db_int(db, "SELECT count(*) FROM processes WHERE job = 'verify'"), 0);
}

/* A check with variant: runs, and is judged, only in its variants. */
FL_TEST_ROOT_T(engine_final, check_runs_only_in_its_variants, 60)
{
    char *out;
    int rc = run_inline("final-variant.yaml",
                        "name: it-final-variant\n"
                        "hosts: [a]\n"
                        "variants: {mode: [fast, slow]}\n"
                        "cluster: {client: [a]}\n"
                        "run: {command: \"true\"}\n"
                        "final:\n"
                        "  only_slow: {host: a, command: \"echo {mode}\","
                        " variant: slow}\n"
                        "expect: {all: {only_slow: {log_matches: '^slow$'}}}\n",
                        &out);
    FL_ASSERT_MSG(rc == 0, "faultline run: exit %d: %s", rc, out);
    free(out);
    char db[4200];
    snprintf(db, sizeof db, "%s/fl.db", fl_test_dir());
    FL_ASSERT_EQ(fl_test_db_int(db, "SELECT count(*) FROM processes WHERE job = 'only_slow'"), 1);
    FL_ASSERT_EQ(fl_test_db_int(db, "SELECT count(*) FROM checks WHERE target = 'only_slow:0'"), 2);
}
