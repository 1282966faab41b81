/*
 * test_cli_paths.c: the paths faultline writes to or reads from are checked
 * before anything runs: `runs` never creates a database, and an --out or
 * --junit that cannot be used is one usage error (exit 2) with nothing
 * created, not a failure of every run; without --db, a run records beside
 * its --out.
 */
#include "harness/tests/fl_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* `runs` only reads: with no database where it looks (a fresh checkout, a
 * mistyped --db) it says so and creates nothing (it used to create an empty
 * out/faultline.db and report "no runs recorded in this database"). */
FL_TEST(cli_paths, runs_without_a_database_creates_nothing)
{
    char *out;
    const char *d = fl_test_dir();
    int rc = fl_test_sh(&out, "cd %s && %s runs 2>&1", d, fl_test_bin("faultline"));
    FL_ASSERT_EQ(rc, 2);
    FL_ASSERT_CONTAINS(out, "no results database at out/faultline.db");
    free(out);
    rc = fl_test_sh(&out, "cd %s && %s runs --db typo.db 2>&1", d, fl_test_bin("faultline"));
    FL_ASSERT_EQ(rc, 2);
    FL_ASSERT_CONTAINS(out, "no results database at typo.db");
    free(out);
    FL_ASSERT_EQ(fl_test_sh(NULL, "test ! -e %s/out && test ! -e %s/typo.db", d, d), 0);
}

/* An --out or --junit that cannot be used is a usage error found before the
 * first run: exit 2, no database row, no run directory.  (An --out too long
 * for the runs' event sockets failed every run, late, the same way.) */
FL_TEST(cli_paths, run_checks_out_and_junit_first)
{
    static const char *const bad[] = {
        "--out file",
        "--out file/sub",
        "--junit .",
        "--junit file/j.xml",
        "--out long-enough-for-the-event-socket-path-of-a-run-to-go-past-107-bytes",
    };
    const char *d = fl_test_dir();
    FL_REQUIRE_EQ(fl_test_sh(NULL,
                             "cd %s && echo x > file && printf '%%s\\n' 'name: t' "
                             "'hosts: [a]' 'cluster: {ps: [a]}' 'run: {command: true}' > s.yaml",
                             d),
                  0);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *out;
        int rc = fl_test_sh(&out, "cd %s && %s run -q --db fl.db %s s.yaml 2>&1", d,
                            fl_test_bin("faultline"), bad[i]);
        FL_ASSERT_MSG(rc == 2, "%s: exit %d: %s", bad[i], rc, out);
        FL_ASSERT_MSG(strstr(out, "not a directory") || strstr(out, "Not a directory") ||
                          strstr(out, "is a directory") || strstr(out, "too long a path"),
                      "%s: %s", bad[i], out);
        free(out);
    }
    FL_ASSERT_EQ(
        fl_test_sh(NULL, "test ! -e %s/fl.db && test ! -e %s/out && test ! -e %s/long-*", d, d, d),
        0);
}

/* Without --db a run records beside its --out: runs kept apart by --out keep
 * their results apart too (they all went to ./out/faultline.db). */
FL_TEST_ROOT_T(cli_paths, run_records_into_its_out_dir_by_default, 60)
{
    char *out;
    const char *d = fl_test_dir();
    int rc =
        fl_test_sh(&out, "cd %s && %s run -q --out elsewhere %s/scenarios/examples/hello.yaml 2>&1",
                   d, fl_test_bin("faultline"), fl_test_root());
    FL_ASSERT_MSG(rc == 0, "faultline run: exit %d: %s", rc, out);
    free(out);
    char db[4200];
    snprintf(db, sizeof db, "%s/elsewhere/faultline.db", d);
    FL_ASSERT_EQ(fl_test_db_int(db, "SELECT count(*) FROM runs WHERE verdict = 'pass'"), 1);
    FL_ASSERT_EQ(fl_test_sh(NULL, "test ! -e %s/out", d), 0);
}
