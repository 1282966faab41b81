/*
 * test_cli_runs.c: `faultline runs`: its help documents its filters, a
 * verdict is taken as the table shows it and a scenario name is hinted, and
 * --since/--changed REV take a revision as git names it (a full hash, a
 * prefix, HEAD), on a database written through the recorder.
 */
#include "harness/record/recorder.h"
#include "harness/tests/fl_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

FL_TEST(cli_runs, runs_takes_verdict_as_shown_and_hints_scenario)
{
    char db[4200], err[1024];
    snprintf(db, sizeof db, "%s/fl.db", fl_test_dir());
    struct fl_rec *rec;
    FL_REQUIRE_EQ(fl_rec_open(&rec, db, NULL, err, sizeof err), 0);
    struct fl_rec_run *run;
    struct fl_rec_run_info ri = {.run_id = "20260101-000000-aaaaaa",
                                 .scenario = "example-tour",
                                 .scenario_file = "t.yaml",
                                 .variant = "default",
                                 .started_at_ms = 1000};
    FL_REQUIRE_EQ(fl_rec_run_begin(rec, &ri, &run), 0);
    fl_rec_run_end(run, "pass", NULL, 10);
    fl_rec_close(rec);
    char *out;
    /* PASS, as the VERDICT column shows it */
    int rc = fl_test_sh(&out, "%s runs --db %s --verdict PASS 2>&1", fl_test_bin("faultline"), db);
    FL_ASSERT_EQ(rc, 0);
    FL_ASSERT_CONTAINS(out, "20260101-000000-aaaaaa  example-tour");
    free(out);
    /* a misspelt --scenario: the closest recorded one */
    rc = fl_test_sh(&out, "%s runs --db %s --scenario example-tuor 2>&1", fl_test_bin("faultline"),
                    db);
    FL_ASSERT_EQ(rc, 0);
    FL_ASSERT_CONTAINS(out, "no run of scenario 'example-tuor' is recorded in ");
    FL_ASSERT_CONTAINS(out, "(did you mean 'example-tour'?)");
    FL_ASSERT_CONTAINS(out, "no recorded run matches");
    free(out);
    /* a recorded one: no hint */
    rc = fl_test_sh(&out, "%s runs --db %s --scenario example-tour --history 2>&1",
                    fl_test_bin("faultline"), db);
    FL_ASSERT_EQ(rc, 0);
    FL_ASSERT_MSG(!strstr(out, "no run of scenario"), "a hint for a recorded scenario:\n%s", out);
    free(out);
}

FL_TEST(cli_runs, runs_help_documents_its_filters)
{
    char *out;
    int rc = fl_test_sh(&out, "%s runs --help", fl_test_bin("faultline"));
    FL_ASSERT_EQ(rc, 0);
    FL_ASSERT_CONTAINS(out, "--scenario NAME");
    FL_ASSERT_CONTAINS(out, "--variant V");
    FL_ASSERT_CONTAINS(out, "protocol=legacy,threads=pool");
    FL_ASSERT_CONTAINS(out, "--verdict V");
    FL_ASSERT_CONTAINS(out, "pass, fail, error or running");
    FL_ASSERT_CONTAINS(out, "--db PATH");
    FL_ASSERT_CONTAINS(out, "out/faultline.db");
    free(out);
}

static void record_rev(struct fl_rec *rec, const char *id, const char *rev, int64_t at,
                       const char *verdict)
{
    struct fl_rec_run *run;
    struct fl_rec_run_info info = {.run_id = id,
                                   .scenario = "s",
                                   .variant = "default",
                                   .git_rev = rev,
                                   .seed = 1,
                                   .started_at_ms = at};
    FL_REQUIRE_EQ(fl_rec_run_begin(rec, &info, &run), 0);
    FL_REQUIRE_EQ(fl_rec_run_end(run, verdict, NULL, 10), 0);
}

/* A full hash (as `git log` prints it) and a name git resolves (HEAD) find
 * the runs recorded under the 12-digit revision; they used to be compared as
 * text prefixes of it and match nothing ("no run recorded at revision"). */
FL_TEST(cli_runs, runs_since_and_changed_take_revisions_as_git_names_them)
{
    char db[4096], err[256], *out, *head = NULL;
    snprintf(db, sizeof db, "%s/r.db", fl_test_dir());
    bool git =
        fl_test_sh(&head, "git -C %s rev-parse --short=12 HEAD 2>/dev/null", fl_test_root()) == 0 &&
        strlen(head) >= 12;
    if (git)
        head[strcspn(head, "\n")] = '\0';
    struct fl_rec *rec;
    FL_REQUIRE_EQ(fl_rec_open(&rec, db, NULL, err, sizeof err), 0);
    int64_t now = (int64_t)time(NULL) * 1000;
    record_rev(rec, "r-old", "aaaa1111bbbb", now - 2000, "fail");
    record_rev(rec, "r-new", git ? head : "cccc2222dddd", now - 1000, "pass");
    fl_rec_close(rec);

    const char *full = "aaaa1111bbbb0123456789abcdef0123456789ab";
    int rc =
        fl_test_sh(&out, "%s runs --db %s --since %s 2>&1", fl_test_bin("faultline"), db, full);
    FL_ASSERT_MSG(rc == 0, "runs --since FULL-HASH: exit %d: %s", rc, out);
    FL_ASSERT_CONTAINS(out, "r-old");
    FL_ASSERT_CONTAINS(out, "r-new");
    free(out);
    rc = fl_test_sh(&out, "%s runs --db %s --changed %s 2>&1", fl_test_bin("faultline"), db, full);
    FL_ASSERT_MSG(rc == 0, "runs --changed FULL-HASH: exit %d: %s", rc, out);
    FL_ASSERT_CONTAINS(out, "r-new");
    free(out);
    /* a prefix still works, an unknown revision is still said */
    rc = fl_test_sh(&out, "%s runs --db %s --since aaaa11 2>&1", fl_test_bin("faultline"), db);
    FL_ASSERT_EQ(rc, 0);
    FL_ASSERT_CONTAINS(out, "r-old");
    free(out);
    rc = fl_test_sh(&out, "%s runs --db %s --since 0000ffff 2>&1", fl_test_bin("faultline"), db);
    FL_ASSERT_EQ(rc, 2);
    FL_ASSERT_CONTAINS(out, "no run recorded at revision 0000ffff");
    free(out);
    if (git) {
        rc = fl_test_sh(&out, "%s runs --db %s --since HEAD 2>&1", fl_test_bin("faultline"), db);
        FL_ASSERT_MSG(rc == 0, "runs --since HEAD (%s): exit %d: %s", head, rc, out);
        FL_ASSERT_CONTAINS(out, "r-new");
        FL_ASSERT(strstr(out, "r-old") == NULL);
        free(out);
    }
    free(head);
}

/* "Did my local change break anything?": on an uncommitted tree runs are
 * recorded at "<HEAD>-dirty"; `runs --changed HEAD` compares them against the
 * runs of the commit.  The dirty failing run used to match HEAD as a prefix
 * and become the baseline itself: "no scenario changed verdict". */
FL_TEST(cli_runs, changed_since_head_on_a_dirty_tree_shows_pass_to_fail)
{
    char db[4096], err[256], *out, *head = NULL;
    snprintf(db, sizeof db, "%s/d.db", fl_test_dir());
    if (fl_test_sh(&head, "git -C %s rev-parse --short=12 HEAD 2>/dev/null", fl_test_root()) != 0 ||
        strlen(head) < 12) {
        free(head);
        FL_SKIP("the checkout is not a git tree");
    }
    head[strcspn(head, "\n")] = '\0';
    char dirty[64];
    snprintf(dirty, sizeof dirty, "%s-dirty", head);
    struct fl_rec *rec;
    FL_REQUIRE_EQ(fl_rec_open(&rec, db, NULL, err, sizeof err), 0);
    int64_t now = (int64_t)time(NULL) * 1000;
    record_rev(rec, "r-commit", head, now - 3000, "pass");
    record_rev(rec, "r-local", dirty, now - 1000, "fail");
    fl_rec_close(rec);
    int rc = fl_test_sh(&out, "%s runs --db %s --changed HEAD 2>&1", fl_test_bin("faultline"), db);
    FL_ASSERT_MSG(rc == 0, "runs --changed HEAD: exit %d: %s", rc, out);
    FL_ASSERT_CONTAINS(out, "PASS");
    FL_ASSERT_CONTAINS(out, "FAIL");
    FL_ASSERT_CONTAINS(out, dirty);
    FL_ASSERT_CONTAINS(out, "r-local");
    free(out);
    /* the dirty runs by their own name: the baseline is the dirty run */
    rc = fl_test_sh(&out, "%s runs --db %s --changed %s 2>&1", fl_test_bin("faultline"), db, dirty);
    FL_ASSERT_MSG(rc == 0, "runs --changed %s: exit %d: %s", dirty, rc, out);
    FL_ASSERT_CONTAINS(out, "no scenario changed verdict since");
    free(out);
    free(head);
}

/* A random seed is printed, stored and typed back as one number: seeds are
 * 63-bit, so SQLite's signed INTEGER keeps them as they are (a 64-bit seed
 * above 2^63 used to be stored, and shown by `runs`, as a negative number
 * that --seed refused).  Ten random seeds: each had one chance in two. */
FL_TEST_ROOT_T(cli_runs, random_seeds_round_trip_as_one_number, 60)
{
    char *out, db[4200];
    const char *d = fl_test_dir();
    snprintf(db, sizeof db, "%s/s.db", d);
    int rc = fl_test_sh(
        &out, "cd %s && %s run -q --repeat 10 --db s.db %s/scenarios/examples/hello.yaml 2>&1", d,
        fl_test_bin("faultline"), fl_test_root());
    FL_REQUIRE_MSG(rc == 0, "faultline run: exit %d: %s", rc, out);
    free(out);
    FL_ASSERT_EQ(fl_test_db_int(db, "SELECT count(*) FROM runs WHERE seed < 0"), 0);
    char *seed;
    FL_REQUIRE_EQ(
        fl_test_sh(&seed, "sqlite3 %s 'SELECT seed FROM runs ORDER BY id DESC LIMIT 1'", db), 0);
    seed[strcspn(seed, "\n")] = 0;
    rc = fl_test_sh(&out, "%s runs --db %s --limit 1", fl_test_bin("faultline"), db);
    FL_ASSERT_EQ(rc, 0);
    FL_ASSERT_CONTAINS(out, "SEED");
    FL_ASSERT_CONTAINS(out, seed);
    free(out);
    rc = fl_test_sh(&out,
                    "cd %s && %s run -q --seed %s --db s.db %s/scenarios/examples/hello.yaml 2>&1",
                    d, fl_test_bin("faultline"), seed, fl_test_root());
    FL_ASSERT_MSG(rc == 0, "run --seed %s: exit %d: %s", seed, rc, out);
    free(out);
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM runs WHERE seed = %s", seed);
    FL_ASSERT_EQ(fl_test_db_int(db, sql), 2);
    free(seed);
    rc = fl_test_sh(
        &out, "%s run --seed 9223372036854775808 --no-db %s/scenarios/examples/hello.yaml 2>&1",
        fl_test_bin("faultline"), fl_test_root());
    FL_ASSERT_EQ(rc, 2);
    FL_ASSERT_CONTAINS(out, "--seed wants a whole number 0..9223372036854775807");
    free(out);
}

/* `runs RUN --faults`: the run's schedule from the scenario text the
 * database kept, each fault with its applied row or why it never fired: a
 * fault applied and healed, one at a time after the run's end, one waiting
 * for the 3rd of an event the run had once, one waiting on a host's event
 * that came only from another; a run whose text is not kept lists what was
 * applied.  Without it, a passing soak iteration could not show which of
 * its drawn faults fired (issue 20, item 3). */
FL_TEST(cli_runs, faults_lists_the_schedule_fired_or_not)
{
    static const char text[] = "name: sched\n"
                               "hosts: [a, b]\n"
                               "cluster: {node: [a], peer: [b]}\n"
                               "run: {command: sleep 1}\n"
                               "faults:\n"
                               "  - {at: 200ms, kill: 'node:0', for: 300ms}\n"
                               "  - {at: 9s, pause: b, for: 1s}\n"
                               "  - {after: {event: ckpt.saved, count: 3}, restart: a, for: 1s}\n"
                               "  - {after: {event: ckpt.saved, host: b}, partition: [[a], [b]]}\n"
                               "expect: {all: {all: {exit: 0}}}\n";
    char db[4200], err[1024];
    snprintf(db, sizeof db, "%s/fl.db", fl_test_dir());
    struct fl_rec *rec;
    FL_REQUIRE_EQ(fl_rec_open(&rec, db, NULL, err, sizeof err), 0);
    struct fl_rec_run *run;
    struct fl_rec_run_info ri = {.run_id = "20260101-000000-aaaaaa",
                                 .scenario = "sched",
                                 .scenario_file = "/nowhere/sched.yaml",
                                 .variant = "default",
                                 .scenario_hash = "h1",
                                 .scenario_text = text,
                                 .scenario_text_len = sizeof text - 1,
                                 .seed = 7,
                                 .started_at_ms = 1000};
    FL_REQUIRE_EQ(fl_rec_run_begin(rec, &ri, &run), 0);
    struct fl_rec_fault f = {.index = 1,
                             .kind = "kill",
                             .target = "node:0",
                             .detail = "signal=SIGKILL for=300ms",
                             .applied_ms = 201};
    int no = fl_rec_fault_applied(run, &f);
    FL_REQUIRE(no >= 0);
    fl_rec_fault_healed(run, no, 503);
    fl_rec_event(run, 400, "a", "node", 0, "ckpt.saved", "", false);
    fl_rec_run_end(run, "pass", NULL, 1500);
    /* a run whose text is not kept */
    ri.run_id = "20260101-000001-bbbbbb";
    ri.scenario_hash = "h2";
    ri.scenario_text = NULL;
    ri.scenario_text_len = 0;
    FL_REQUIRE_EQ(fl_rec_run_begin(rec, &ri, &run), 0);
    f.applied_ms = 250;
    FL_REQUIRE(fl_rec_fault_applied(run, &f) >= 0);
    fl_rec_run_end(run, "pass", NULL, 1400);
    fl_rec_close(rec);

    char *out;
    int rc = fl_test_sh(&out, "%s runs 20260101-000000-aaaaaa --faults --db %s 2>&1",
                        fl_test_bin("faultline"), db);
    FL_ASSERT_MSG(rc == 0, "exit %d:\n%s", rc, out);
    FL_ASSERT_CONTAINS(out, "run 20260101-000000-aaaaaa: sched (default), seed 7, PASS in 1.5s: "
                            "1 of 4 faults applied\n");
    FL_ASSERT_CONTAINS(out, "#  TRIGGER");
    FL_ASSERT_CONTAINS(out, "1  at 200ms ");
    FL_ASSERT_CONTAINS(out, "kill node:0 signal=SIGKILL for=300ms");
    FL_ASSERT_CONTAINS(out, "201ms");
    FL_ASSERT_CONTAINS(out, "503ms");
    FL_ASSERT_CONTAINS(out, "2  at 9s ");
    FL_ASSERT_CONTAINS(out, "pause b for=1s");
    FL_ASSERT_CONTAINS(out, "never fired: the run ended at 1.5s, before it");
    FL_ASSERT_CONTAINS(out, "3  after the 3rd ckpt.saved ");
    FL_ASSERT_CONTAINS(out, "restart a for=1s");
    FL_ASSERT_CONTAINS(out, "never fired: it waits for the 3rd 'ckpt.saved' event, the run had 1");
    FL_ASSERT_CONTAINS(out, "4  after ckpt.saved (host b) ");
    FL_ASSERT_CONTAINS(out, "partition [a]|[b]");
    FL_ASSERT_CONTAINS(out, "never fired: the run had no 'ckpt.saved' event from b");
    free(out);

    rc = fl_test_sh(&out, "%s runs --faults 20260101-000001-bbbbbb --db %s 2>&1",
                    fl_test_bin("faultline"), db);
    FL_ASSERT_MSG(rc == 0, "exit %d:\n%s", rc, out);
    FL_ASSERT_CONTAINS(out, "does not hold the scenario text of run 20260101-000001-bbbbbb");
    FL_ASSERT_CONTAINS(out, "PASS in 1.4s: 1 fault applied\n");
    FL_ASSERT_CONTAINS(out, "250ms");
    free(out);

    /* a run not recorded; --faults without a run; a run without --faults */
    rc = fl_test_sh(&out, "%s runs 20260101-000002-cccccc --faults --db %s 2>&1",
                    fl_test_bin("faultline"), db);
    FL_ASSERT_EQ(rc, 2);
    FL_ASSERT_CONTAINS(out, "no run '20260101-000002-cccccc'");
    free(out);
    rc = fl_test_sh(&out, "%s runs --faults --db %s 2>&1", fl_test_bin("faultline"), db);
    FL_ASSERT_EQ(rc, 2);
    FL_ASSERT_CONTAINS(out, "faultline runs RUN_ID --faults");
    free(out);
    rc = fl_test_sh(&out, "%s runs 20260101-000000-aaaaaa --db %s 2>&1", fl_test_bin("faultline"),
                    db);
    FL_ASSERT_EQ(rc, 2);
    FL_ASSERT_CONTAINS(out, "a RUN_ID goes with --faults");
    free(out);
}
