/*
 * test_cli_soak.c: `faultline soak` (harness/cli/soak.c) as a nightly user
 * meets it, through the real binary and real runs: a guilty profile yields a
 * failure file and a minimized file holding just the guilty fault, which
 * `faultline run` fails on the same way; a robust profile passes a short
 * soak; the replay command a failure file names replays the variant that
 * failed; a profile whose baseline already fails is said plainly and ends
 * the soak instead of minimizing every iteration; --duration bounds the
 * minimizing runs too; the lines on stdout and stderr come in the order
 * things happened when both go to one log; files at rest are drawn, kept
 * and replayed; a failure drawn at the program's events (after:) replays
 * to the same failure every time; its help, bad options, and ci/soak's.
 */
#include "harness/soak/soak.h"
#include "harness/tests/fl_test.h"
#include "harness/tests/scenario_fixture.h"
#include "harness/sys/rundir.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* The one file in dir ending in suffix (".min.yaml", or a plain ".yaml"
 * that is not a .min.yaml); its text (malloc'd), NULL when not exactly one. */
static char *one_file(const char *dir, bool min, char *path, size_t len)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    int found = 0;
    if (!d)
        return NULL;
    while ((de = readdir(d))) {
        size_t n = strlen(de->d_name);
        bool is_min = n > 9 && !strcmp(de->d_name + n - 9, ".min.yaml");
        bool is_yaml = n > 5 && !strcmp(de->d_name + n - 5, ".yaml");
        if (!is_yaml || is_min != min)
            continue;
        snprintf(path, len, "%s/%s", dir, de->d_name);
        found++;
    }
    closedir(d);
    char *text = NULL;
    if (found != 1 || fl_read_file(path, &text, NULL) < 0)
        return NULL;
    return text;
}

FL_TEST_ROOT_T(cli_soak, replay_line_names_variant, 120)
{
    fl_test_need_root();
    const char *t = fl_test_dir();
    char *out = NULL;
    int rc = fl_test_sh(&out,
                        "%s soak %s --variant mode=bad --iterations 1 --budget 0 --seed 1 "
                        "--out %s/o --no-db 2>&1",
                        fl_test_bin("faultline"), soak_data("variants.yaml"), t);
    FL_ASSERT_EQ(rc, 1);
    FL_ASSERT_CONTAINS(out, "failure kept: ");
    free(out);
    char dir[4096], path[4096];
    snprintf(dir, sizeof dir, "%s/o/soak-failures", t);
    char *text = one_file(dir, false, path, sizeof path);
    FL_REQUIRE(text);
    /* the command the file gives, run as it says (with our binary) */
    const char *line = strstr(text, "# replay: faultline ");
    FL_REQUIRE(line);
    line += strlen("# replay: faultline ");
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%.*s", (int)strcspn(line, "\n"), line);
    FL_ASSERT_CONTAINS(cmd, "--variant");
    rc = fl_test_sh(&out, "%s %s --out %s/o --no-db -q 2>&1", fl_test_bin("faultline"), cmd, t);
    FL_ASSERT_EQ(rc, 1);
    FL_ASSERT_CONTAINS(out, "1 run: 0 passed, 1 failed");
    FL_ASSERT_CONTAINS(out, "mode=bad");
    free(out);
    free(text);
}

/* An --out whose run directories cannot hold an event socket makes every
 * run an error: soak said so per iteration, kept each as a failure and
 * minimized it (all night, at full speed).  Now one usage error first. */
FL_TEST_ROOT(cli_soak, unusable_out_is_one_usage_error)
{
    fl_test_need_root();
    char out_dir[4096];
    snprintf(out_dir, sizeof out_dir, "%s/%0100d", fl_test_dir(), 0);
    char *out = NULL;
    int rc = fl_test_sh(&out,
                        "%s soak %s --variant mode=bad --iterations 3 --seed 1 --out %s "
                        "--no-db 2>&1",
                        fl_test_bin("faultline"), soak_data("variants.yaml"), out_dir);
    FL_ASSERT_EQ(rc, 2);
    FL_ASSERT_CONTAINS(out, "is too long a path for run directories");
    FL_ASSERT_CONTAINS(out, "--out DIR");
    FL_ASSERT(!strstr(out, "soak: iteration"));
    FL_ASSERT(!strstr(out, "failure kept"));
    free(out);
    char fails[4200];
    snprintf(fails, sizeof fails, "%s/soak-failures", out_dir);
    FL_ASSERT_EQ(access(fails, F_OK), -1);
}

/* A profile that fails without any fault: every iteration failed, was kept
 * and minimized down to no fault, all night.  Now the first minimization
 * that needs no fault ends the soak, saying so and how to see it. */
FL_TEST_ROOT_T(cli_soak, failing_baseline_stops_the_soak_plainly, 120)
{
    fl_test_need_root();
    const char *t = fl_test_dir();
    char *out = NULL;
    int rc = fl_test_sh(&out,
                        "%s soak %s --variant mode=bad --duration 8s --seed 1 --out %s/o "
                        "--no-db 2>&1",
                        fl_test_bin("faultline"), soak_data("variants.yaml"), t);
    FL_ASSERT_EQ(rc, 1);
    FL_ASSERT_CONTAINS(out, "it fails with no fault at all");
    FL_ASSERT_CONTAINS(out, "variants.yaml --variant mode=bad' runs it without faults");
    FL_ASSERT_CONTAINS(out, ": 1 iteration in ");
    FL_ASSERT_CONTAINS(out, "0 passed, 1 failed; stopped: it fails without faults");
    free(out);
    /* what was kept: the failure and its minimum, which has no fault */
    char dir[4096], path[4096];
    snprintf(dir, sizeof dir, "%s/o/soak-failures", t);
    char *min = one_file(dir, true, path, sizeof path);
    FL_REQUIRE(min);
    FL_ASSERT_CONTAINS(min, "\nfaults: []\n");
    free(min);
}

/* Where a needle first occurs in h, or -1. */
static long at(const char *h, const char *needle)
{
    const char *s = strstr(h, needle);
    return s ? (long)(s - h) : -1;
}

/* stdout and stderr into one pipe (as ci/soak's log): the lines come in
 * the order things happened. */
FL_TEST_ROOT_T(cli_soak, one_log_keeps_the_order_of_events, 120)
{
    fl_test_need_root();
    const char *t = fl_test_dir();
    char *out = NULL;
    int rc = fl_test_sh(&out,
                        "%s soak %s --variant mode=bad --iterations 1 --seed 1 --out %s/o "
                        "--no-db 2>&1 | cat",
                        fl_test_bin("faultline"), soak_data("variants.yaml"), t);
    FL_ASSERT_EQ(rc, 0);
    long it = at(out, "soak: iteration 1 fail"), kept = at(out, "failure kept: "),
         mini = at(out, "  minimizing 1 faults"), try1 = at(out, "  minimize try 1/"),
         done = at(out, "minimized:    "), sum = at(out, ": 1 iteration in ");
    FL_ASSERT_MSG(it >= 0 && it < kept && kept < mini && mini < try1 && try1 < done && done < sum,
                  "out of order (%ld %ld %ld %ld %ld %ld): %s", it, kept, mini, try1, done, sum,
                  out);
    free(out);
}

/* --duration D: minimizing a failure started no run after D either (a
 * nightly job's 2h soak could go on for budget x timeout more). */
FL_TEST_ROOT_T(cli_soak, duration_bounds_minimizing_runs, 120)
{
    fl_test_need_root();
    const char *t = fl_test_dir();
    char *out = NULL;
    /* each run takes about 200 ms: the first fails after the 100 ms are up */
    int rc = fl_test_sh(&out,
                        "%s soak %s --variant mode=bad --duration 100ms --seed 1 --out %s/o "
                        "--no-db 2>&1",
                        fl_test_bin("faultline"), soak_data("variants.yaml"), t);
    FL_ASSERT_EQ(rc, 1);
    FL_ASSERT_CONTAINS(out, "failure kept: ");
    FL_ASSERT_CONTAINS(out, "not minimized: the soak's --duration is up (the failure file holds "
                            "its 1 fault)");
    FL_ASSERT(!strstr(out, "minimize try"));
    FL_ASSERT_CONTAINS(out, ": 1 iteration in ");
    free(out);
    char dir[4096], path[4096];
    snprintf(dir, sizeof dir, "%s/o/soak-failures", t);
    char *text = one_file(dir, false, path, sizeof path);
    FL_ASSERT(text);
    free(text);
    FL_ASSERT(!one_file(dir, true, path, sizeof path));
}

/* corrupt: and truncate: (files at rest) can be drawn; the failure file
 * quotes their job:task hosts and globs, loads, and replays both faults. */
FL_TEST_ROOT_T(cli_soak, files_at_rest_drawn_kept_and_replayed, 120)
{
    fl_test_need_root();
    const char *t = fl_test_dir();
    char *out = NULL;
    int rc = fl_test_sh(&out,
                        "%s soak %s --iterations 1 --budget 0 --seed 2 --out %s/o --no-db "
                        "2>&1",
                        fl_test_bin("faultline"), soak_data("at_rest.yaml"), t);
    FL_ASSERT_EQ(rc, 1);
    FL_ASSERT_CONTAINS(out, "failure kept: ");
    free(out);
    char dir[4096], path[4096];
    snprintf(dir, sizeof dir, "%s/o/soak-failures", t);
    char *text = one_file(dir, false, path, sizeof path);
    FL_REQUIRE(text);
    FL_ASSERT_CONTAINS(text, "corrupt: {host: 'ps:0', path: 'f.[d]a*', bytes: 4}}");
    FL_ASSERT_CONTAINS(text, "truncate: {host: 'worker:0', path: '*.dat', size: 3}}");
    free(text);
    FL_ASSERT_EQ(fl_test_sh(&out, "%s validate %s 2>&1", fl_test_bin("faultline"), path), 0);
    free(out);
    rc = fl_test_sh(&out, "%s run %s --out %s/o --db %s/fl.db -q 2>&1", fl_test_bin("faultline"),
                    path, t, t);
    FL_ASSERT_EQ(rc, 1);
    FL_ASSERT_CONTAINS(out, "expected exit 7, observed exit 0");
    free(out);
    char db[4096];
    snprintf(db, sizeof db, "%s/fl.db", t);
    FL_ASSERT_EQ(fl_test_db_int(db, "SELECT count(*) FROM faults WHERE kind = 'corrupt' AND "
                                    "error IS NULL AND detail LIKE '%f.dat@%'"),
                 1);
    FL_ASSERT_EQ(fl_test_db_int(db, "SELECT count(*) FROM faults WHERE kind = 'truncate' AND "
                                    "error IS NULL AND detail LIKE '%f.dat 17->3%'"),
                 1);
}

/* ci/soak, the nightly job's script: --help is its comment (it printed a
 * line of the script too); without a build it says to run make (it
 * blamed the DURATION). */
FL_TEST(cli_soak, ci_soak_help_and_missing_build)
{
    char *out = NULL;
    FL_ASSERT_EQ(fl_test_sh(&out, "bash %s/ci/soak --help 2>&1", fl_test_root()), 2);
    FL_ASSERT_CONTAINS(out, "130 when interrupted");
    FL_ASSERT(!strstr(out, "set -"));
    free(out);
    const char *t = fl_test_dir();
    FL_REQUIRE_EQ(fl_test_sh(NULL, "mkdir -p %s/ci && cp %s/ci/soak %s/ci/", t, fl_test_root(), t),
                  0);
    FL_ASSERT_EQ(fl_test_sh(&out, "bash %s/ci/soak 2h 2>&1", t), 2);
    FL_ASSERT_CONTAINS(out, "no build/bin/faultline in ");
    FL_ASSERT_CONTAINS(out, "run 'make' first");
    FL_ASSERT(!strstr(out, "DURATION"));
    free(out);
}

/* The one file in dir whose name ends with suffix (and not .min.yaml when
 * suffix is plain .yaml). */
static bool find_file(const char *dir, bool min, char *out, size_t len)
{
    DIR *d = opendir(dir);
    int found = 0;
    if (!d)
        return false;
    for (struct dirent *de; (de = readdir(d));) {
        bool is_min = strstr(de->d_name, ".min.yaml") != NULL;
        if (!strstr(de->d_name, ".yaml") || is_min != min)
            continue;
        snprintf(out, len, "%s/%s", dir, de->d_name);
        found++;
    }
    closedir(d);
    return found == 1;
}

static size_t count_lines_with(const char *text, const char *needle)
{
    size_t n = 0;
    for (const char *s = text; (s = strstr(s, needle)); s++)
        n++;
    return n;
}

FL_TEST_ROOT_T(cli_soak, guilty_fault_kept_minimized_and_replayed, 240)
{
    fl_test_need_root();
    const char *t = fl_test_dir();
    char *out = NULL;
    int rc = fl_test_sh(&out, "%s soak %s --iterations 1 --seed 11 --out %s/o --db %s/fl.db 2>&1",
                        fl_test_bin("faultline"), soak_data("guilty.yaml"), t, t);
    FL_ASSERT_EQ(rc, 1);
    FL_ASSERT_CONTAINS(out, "1 iteration in");
    FL_ASSERT_CONTAINS(out, "0 passed, 1 failed");
    /* one numbering: the console's iteration 1 is the file's and header's */
    FL_ASSERT_CONTAINS(out, "soak: iteration 1 fail");
    FL_ASSERT_CONTAINS(out, "-i1-s");
    FL_ASSERT_CONTAINS(out, "failure kept: ");
    FL_ASSERT_CONTAINS(out, "minimized:    ");
    free(out);
    char dir[4096], orig[4096], min[4096];
    snprintf(dir, sizeof dir, "%s/o/soak-failures", t);
    FL_REQUIRE(find_file(dir, false, orig, sizeof orig));
    FL_REQUIRE(find_file(dir, true, min, sizeof min));
    char *otext, *mtext;
    FL_REQUIRE_EQ(fl_read_file(orig, &otext, NULL), 0);
    FL_REQUIRE_EQ(fl_read_file(min, &mtext, NULL), 0);
    FL_ASSERT_CONTAINS(otext, ", iteration 1 (run ");
    /* the original: all five drawn faults, the seed of iteration 1 (index 0) */
    char seedline[64];
    snprintf(seedline, sizeof seedline, "\nseed: %" PRIu64 "\n", fl_soak_iter_seed(11, 0));
    FL_ASSERT_CONTAINS(otext, seedline);
    FL_ASSERT_EQ(count_lines_with(otext, "\n  - {at: "), 5);
    FL_ASSERT_CONTAINS(otext, "# replay: faultline run ");
    /* the minimum: just the guilty kill */
    FL_ASSERT_CONTAINS(mtext, seedline);
    FL_ASSERT_EQ(count_lines_with(mtext, "\n  - {at: "), 1);
    FL_ASSERT_CONTAINS(mtext, "kill: 'worker:1', signal: SIGTERM}");
    /* the run's seed is recorded with it */
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM runs WHERE seed = %" PRId64,
             (int64_t)fl_soak_iter_seed(11, 0));
    char db[4096];
    snprintf(db, sizeof db, "%s/fl.db", t);
    FL_ASSERT_GE(fl_test_db_int(db, sql), 2);
    /* faultline run of the minimized file fails the same way */
    rc = fl_test_sh(&out, "%s run %s --out %s/o --no-db -q 2>&1", fl_test_bin("faultline"), min, t);
    FL_ASSERT_EQ(rc, 1);
    FL_ASSERT_CONTAINS(out, "worker:1: exit: expected exit 0, observed killed by SIGTERM");
    free(out);
    /* the failing iteration's run, replayed from the database alone (the
     * scenario soak drew is kept there), fails the same way */
    rc = fl_test_sh(&out,
                    "cd %s && %s replay -q --db fl.db --out o $(sqlite3 fl.db \"SELECT run_id FROM "
                    "runs WHERE verdict = 'fail' ORDER BY id LIMIT 1\") 2>&1",
                    t, fl_test_bin("faultline"));
    FL_ASSERT_MSG(rc == 0, "replay of the failing iteration: exit %d: %s", rc, out);
    FL_ASSERT_CONTAINS(out, "recorded failed checks: worker:1 exit");
    FL_ASSERT_CONTAINS(out, "1 of 1 replay of");
    free(out);
    free(otext);
    free(mtext);
}

/* A failure that needs a fault to hit a save: psrt with
 * --max_failed_saves=1, a write fault on the ps's disk.  Drawn at a time
 * (20 ms long), such a file replayed to the failure 6 times in 10; drawn at
 * the save (after: save.begin, a sync point) and held for 2 s, so that a ps
 * held up on a busy machine still writes under it, the kept file names the
 * save, and every replay fails the same way. */
FL_TEST_ROOT_T(cli_soak, failure_drawn_at_events_replays_the_same, 180)
{
    fl_test_need_root();
    const char *t = fl_test_dir();
    char *out = NULL;
    int rc =
        fl_test_sh(&out, "%s soak %s --iterations 1 --seed 5 --budget 0 --out %s/o --no-db 2>&1",
                   fl_test_bin("faultline"), soak_data("psrt_save_hit.yaml"), t);
    FL_ASSERT_EQ(rc, 1);
    FL_ASSERT_CONTAINS(out, "chief:0: exit: expected exit 0, observed exit 1");
    free(out);
    char dir[4096], path[4096];
    snprintf(dir, sizeof dir, "%s/o/soak-failures", t);
    char *text = one_file(dir, false, path, sizeof path);
    FL_REQUIRE(text);
    FL_ASSERT_CONTAINS(text, "\n  - {after: {event: save.begin, host: w0, count: ");
    FL_ASSERT_CONTAINS(text, "\n  - {after: {event: train.step, count: ");
    FL_ASSERT(strstr(text, "{at: ") == NULL);
    free(text);
    for (int i = 0; i < 3; i++) {
        rc = fl_test_sh(&out, "%s run %s --out %s/o --no-db -q 2>&1", fl_test_bin("faultline"),
                        path, t);
        FL_ASSERT_MSG(rc == 1, "replay %d of 3: exit %d\n%s", i + 1, rc, out);
        FL_ASSERT_CONTAINS(out, "chief:0: exit: expected exit 0, observed exit 1");
        free(out);
    }
}

FL_TEST_ROOT_T(cli_soak, short_soak_of_robust_profile_passes, 120)
{
    fl_test_need_root();
    const char *t = fl_test_dir();
    char *out = NULL;
    int rc = fl_test_sh(&out,
                        "%s soak %s/scenarios/soak/shell-relaunch.yaml --iterations 2 "
                        "--seed 3 --out %s/o --db %s/fl.db 2>&1",
                        fl_test_bin("faultline"), fl_test_root(), t, t);
    FL_ASSERT_EQ(rc, 0);
    FL_ASSERT_CONTAINS(out, "seed 3, 2 iterations");
    FL_ASSERT_CONTAINS(out, "soak: iteration 1 pass");
    FL_ASSERT_CONTAINS(out, "soak: iteration 2 pass");
    /* every fault is drawn before the shortest run's end: all applied */
    int lines = 0;
    for (const char *p = out; (p = strstr(p, "soak: iteration ")); p++) {
        const char *b = strstr(p, ", run ");
        FL_REQUIRE(b != NULL);
        b += strcspn(b + 2, ",") + 4; /* past ", run ID, " */
        unsigned applied, drawn;
        FL_REQUIRE_EQ(sscanf(b, "%u/%u", &applied, &drawn), 2);
        FL_ASSERT_EQ(applied, drawn);
        lines++;
    }
    FL_ASSERT_EQ(lines, 2);
    FL_ASSERT(!strstr(out, "warning"));
    FL_ASSERT_CONTAINS(out, "2 iterations in");
    FL_ASSERT_CONTAINS(out, "2 passed, 0 failed");
    free(out);
    char db[4096];
    snprintf(db, sizeof db, "%s/fl.db", t);
    FL_ASSERT_EQ(fl_test_db_int(db, "SELECT count(*) FROM runs WHERE verdict = 'pass'"), 2);
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM runs WHERE seed = %" PRId64,
             (int64_t)fl_soak_iter_seed(3, 1));
    FL_ASSERT_EQ(fl_test_db_int(db, sql), 1);
    char dir[4096], f[4096];
    snprintf(dir, sizeof dir, "%s/o/soak-failures", t);
    FL_ASSERT(!find_file(dir, false, f, sizeof f));
}

/* The soak said "6 faults" of an iteration that passed with none applied
 * (all drawn after the run's end).  Each iteration line now says
 * applied/drawn and names its run, whose schedule `runs RUN --faults`
 * shows; and once most draws come after the end, a warning says so, once,
 * with figures and what to change (issue 20, item 3). */
FL_TEST_ROOT_T(cli_soak, late_draws_said_applied_of_drawn_and_warned_once, 120)
{
    fl_test_need_root();
    const char *t = fl_test_dir();
    char *out = NULL;
    int rc = fl_test_sh(&out, "%s soak %s --iterations 3 --seed 1 --out %s/o --db %s/fl.db 2>&1",
                        fl_test_bin("faultline"), soak_data("late.yaml"), t, t);
    FL_ASSERT_MSG(rc == 0, "exit %d:\n%s", rc, out);
    FL_ASSERT_CONTAINS(out, "soak: iteration 1 pass (seed ");
    FL_ASSERT_CONTAINS(out, ", 0/4 faults applied, ");
    size_t lines = 0, warnings = 0;
    for (const char *p = out; (p = strstr(p, "faults applied")); p++)
        lines++;
    for (const char *p = out; (p = strstr(p, "warning: most faults drawn never fired")); p++)
        warnings++;
    FL_ASSERT_EQ(lines, 3);
    FL_ASSERT_EQ(warnings, 1);
    FL_ASSERT_CONTAINS(out, ": 4 of the 4 drawn in iteration 1 (a run of ");
    FL_ASSERT_CONTAINS(out, "late.yaml:13: soak 'duration' draws times in [10.0s, 20.0s), and runs "
                            "ended as early as ");
    FL_ASSERT_CONTAINS(out, "3 of the 3 faults drawn at times came after their run's end.  Set "
                            "'start' and 'duration' under ");
    FL_ASSERT_CONTAINS(out, "late.yaml:17: this entry draws the N-th event (event: never.sent), "
                            "N in [1, 5], and a run had none: 1 of its 1 faults never fired.");
    /* the warning comes right after the first iteration */
    FL_ASSERT(strstr(out, "warning: most") < strstr(out, "soak: iteration 2 "));
    /* the schedule of a passing iteration: its run, as the line names it */
    const char *r = strstr(out, "soak: iteration 1 pass (seed ");
    FL_REQUIRE(r && (r = strstr(r, ", run ")));
    char run_id[64];
    snprintf(run_id, sizeof run_id, "%.*s", (int)strcspn(r + 6, ","), r + 6);
    free(out);
    rc = fl_test_sh(&out, "%s runs %s --faults --db %s/fl.db 2>&1", fl_test_bin("faultline"),
                    run_id, t);
    FL_ASSERT_MSG(rc == 0, "exit %d:\n%s", rc, out);
    FL_ASSERT_CONTAINS(out, "soak-late (default)");
    FL_ASSERT_CONTAINS(out, "0 of 4 faults applied");
    FL_ASSERT_CONTAINS(out, "kill node:0 for=100ms");
    FL_ASSERT_CONTAINS(out, "never fired: the run ended at ");
    FL_ASSERT_CONTAINS(out, "never fired: it waits for the ");
    free(out);
}

FL_TEST(cli_soak, cli_help_and_bad_options)
{
    char *out = NULL;
    FL_ASSERT_EQ(fl_test_sh(&out, "%s --help", fl_test_bin("faultline")), 0);
    FL_ASSERT_CONTAINS(out, "  soak PROFILE ");
    free(out);
    FL_ASSERT_EQ(fl_test_sh(&out, "%s soak --help", fl_test_bin("faultline")), 0);
    FL_ASSERT_CONTAINS(out, "--iterations N");
    FL_ASSERT_CONTAINS(out, "--duration D");
    FL_ASSERT_CONTAINS(out, "soak-failures");
    free(out);
    FL_ASSERT_EQ(fl_test_sh(&out, "%s soak %s --iterations 1 --duration 1m 2>&1",
                            fl_test_bin("faultline"), soak_data("guilty.yaml")),
                 2);
    FL_ASSERT_CONTAINS(out, "not both");
    free(out);
    FL_ASSERT_EQ(fl_test_sh(&out, "%s soak %s 2>&1", fl_test_bin("faultline"),
                            soak_data("invalid/unknown_target.yaml")),
                 2);
    FL_ASSERT_CONTAINS(out, "unknown_target.yaml:12:18: ");
    free(out);
}
