/*
 * test_cli_record.c: a command never records silently into a database that
 * loses what it is given.  A damaged database is refused before anything
 * runs (exit 2, naming the file and what to do); a run whose rows the
 * database refused says so and exits 3, its verdict unchanged; with --no-db
 * nothing is recorded and nothing is said.
 */
#include "harness/tests/fl_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int run_hello(char **out, const char *db_opt)
{
    return fl_test_sh(out, "cd %s && %s run -q %s %s/scenarios/examples/hello.yaml 2>&1",
                      fl_test_dir(), fl_test_bin("faultline"), db_opt, fl_test_root());
}

FL_TEST_ROOT_T(cli_record, run_refuses_a_damaged_database, 60)
{
    char *out;
    int rc = run_hello(&out, "--repeat 20 --db r.db");
    FL_REQUIRE_MSG(rc == 0, "first runs: exit %d: %s", rc, out);
    free(out);
    /* 3000 bytes overwritten at offset 5000: the runs table's rows */
    FL_REQUIRE_EQ(fl_test_sh(NULL,
                             "cd %s && head -c 3000 /dev/zero | tr '\\0' '\\253' | "
                             "dd of=r.db bs=1 seek=5000 conv=notrunc status=none",
                             fl_test_dir()),
                  0);
    rc = run_hello(&out, "--db r.db");
    FL_ASSERT_EQ(rc, 2);
    FL_ASSERT_CONTAINS(out, "database r.db is damaged");
    FL_ASSERT_CONTAINS(out, "--db NEW");
    FL_ASSERT_CONTAINS(out, "sqlite3 r.db .recover");
    FL_ASSERT(!strstr(out, "PASS")); /* nothing ran */
    free(out);
}

FL_TEST_ROOT_T(cli_record, run_whose_rows_are_refused_exits_3, 60)
{
    char *out;
    int rc = run_hello(&out, "--db t.db");
    FL_REQUIRE_MSG(rc == 0, "first run: exit %d: %s", rc, out);
    free(out);
    FL_REQUIRE_EQ(fl_test_sh(NULL,
                             "cd %s && sqlite3 t.db \"CREATE TRIGGER refuse BEFORE INSERT ON "
                             "checks BEGIN SELECT RAISE(ABORT, 'checks refused'); END\"",
                             fl_test_dir()),
                  0);
    rc = run_hello(&out, "--db t.db");
    FL_ASSERT_MSG(rc == 3, "exit %d: %s", rc, out);
    FL_ASSERT_CONTAINS(out, "PASS  example-hello"); /* the verdict stands */
    FL_ASSERT_CONTAINS(out, "could not be recorded in t.db");
    FL_ASSERT_CONTAINS(out, "checks refused");
    free(out);
    rc = run_hello(&out, "--no-db");
    FL_ASSERT_MSG(rc == 0, "--no-db: exit %d: %s", rc, out);
    FL_ASSERT(!strstr(out, "could not be recorded"));
    free(out);
}
