/*
 * test_cli_replay.c: `faultline replay RUN_ID`: a recorded run runs again
 * from the scenario text the database kept (not the file as it is now, nor
 * where it is now), with the recorded variant and seed, and the command says
 * whether the verdict and the failed checks came out the same.  Every seed
 * scenario's recorded run replays to its verdict, from another clone's
 * paths too.
 */
#include "harness/tests/fl_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int fl(char **out, const char *args)
{
    return fl_test_sh(out, "cd %s && %s %s 2>&1", fl_test_dir(), fl_test_bin("faultline"), args);
}

/* run_id of the n-th run recorded in DB (0 = first) */
static char *nth_run(const char *db, int n)
{
    char *id;
    FL_REQUIRE_EQ(fl_test_sh(&id,
                             "cd %s && sqlite3 %s 'SELECT run_id FROM runs ORDER BY id LIMIT 1 "
                             "OFFSET %d'",
                             fl_test_dir(), db, n),
                  0);
    id[strcspn(id, "\n")] = 0;
    FL_REQUIRE(id[0]);
    return id;
}

/* The verdict depends on the seed (odd seeds fail) and on the variant; the
 * file is then rewritten and moved away: the replay still runs what ran. */
FL_TEST_ROOT_T(cli_replay, replays_recorded_text_variant_and_seed, 120)
{
    FL_REQUIRE_EQ(fl_test_sh(NULL, "mkdir -p %s/sub", fl_test_dir()), 0);
    fl_test_write("sub/r.yaml", "name: it-replay\n"
                                "hosts: [a]\n"
                                "cluster:\n"
                                "  w: [a]\n"
                                "variants:\n"
                                "  shift: [0, 1]\n"
                                "timeout: 30s\n"
                                "run:\n"
                                "  command: \"exit $(( ({seed} + {shift}) % 2 ))\"\n");
    char *out;
    int rc = fl(&out, "run -q --db r.db --seed 7 sub/r.yaml");
    FL_REQUIRE_MSG(rc == 1, "run: exit %d: %s", rc, out); /* shift=0 fails, shift=1 passes */
    free(out);
    char *plain = nth_run("r.db", 0), *shifted = nth_run("r.db", 1);
    /* the path is stored absolute, not as typed (sub/r.yaml) */
    char *file;
    FL_REQUIRE_EQ(fl_test_sh(&file,
                             "cd %s && sqlite3 r.db 'SELECT scenario_file FROM runs LIMIT 1'",
                             fl_test_dir()),
                  0);
    char want[4200];
    snprintf(want, sizeof want, "%s/sub/r.yaml\n", fl_test_dir());
    FL_ASSERT_STREQ(file, want);
    free(file);
    /* the file changes (every seed passes now) and then goes */
    fl_test_write("sub/r.yaml", "name: it-replay\nhosts: [a]\ncluster:\n  w: [a]\n"
                                "run:\n  command: \"true\"\n");
    FL_REQUIRE_EQ(fl_test_sh(NULL, "cd %s && mv sub gone", fl_test_dir()), 0);
    char args[512];
    snprintf(args, sizeof args, "replay -q --db r.db %s", plain);
    rc = fl(&out, args);
    FL_ASSERT_EQ(rc, 2);
    FL_ASSERT_CONTAINS(out, "/sub/r.yaml) is not here");
    FL_ASSERT_CONTAINS(out, "--scenario-dir DIR");
    free(out);
    snprintf(args, sizeof args, "replay -q --db r.db --scenario-dir gone --times 3 %s %s", plain,
             shifted);
    rc = fl(&out, args);
    FL_ASSERT_MSG(rc == 0, "replay: exit %d: %s", rc, out);
    FL_ASSERT_CONTAINS(out, "it-replay shift=0, seed 7");
    FL_ASSERT_CONTAINS(out, "recorded failed checks: w:0 exit");
    FL_ASSERT_CONTAINS(out, "3 of 3 replays of");
    FL_ASSERT_CONTAINS(out, "came out the same (verdict FAIL, 1 failed check)");
    FL_ASSERT_CONTAINS(out, "came out the same (verdict PASS, 0 failed checks)");
    FL_ASSERT_CONTAINS(out, "2 runs replayed: 2 the same, 0 different");
    free(out);
    /* the replays are recorded, with the recorded seed */
    char db[4200];
    snprintf(db, sizeof db, "%s/r.db", fl_test_dir());
    FL_ASSERT_EQ(fl_test_db_int(db, "SELECT count(*) FROM runs WHERE seed = 7"), 8);
    free(plain);
    free(shifted);
}

/* A different outcome is said, and is the exit status. */
FL_TEST_ROOT_T(cli_replay, a_different_outcome_exits_1, 60)
{
    fl_test_write("f.yaml", "name: it-flip\nhosts: [a]\ncluster:\n  w: [a]\ntimeout: 30s\n"
                            "run:\n  command: \"test ! -e {scenario_dir}/flip\"\n");
    char *out;
    int rc = fl(&out, "run -q --db f.db f.yaml");
    FL_REQUIRE_MSG(rc == 0, "run: exit %d: %s", rc, out);
    free(out);
    char *id = nth_run("f.db", 0);
    FL_REQUIRE_EQ(fl_test_sh(NULL, "touch %s/flip", fl_test_dir()), 0);
    char args[256];
    snprintf(args, sizeof args, "replay -q --db f.db %s", id);
    rc = fl(&out, args);
    FL_ASSERT_MSG(rc == 1, "replay: exit %d: %s", rc, out);
    FL_ASSERT_CONTAINS(out, "DIFFERENT");
    FL_ASSERT_CONTAINS(out, "failed checks: w:0 exit");
    FL_ASSERT_CONTAINS(out, "0 of 1 replay of");
    free(out);
    free(id);
    rc = fl(&out, "replay --db f.db 20990101-000000-000000");
    FL_ASSERT_EQ(rc, 2);
    FL_ASSERT_CONTAINS(out, "no run '20990101-000000-000000' in database f.db");
    free(out);
}

/* A run recorded before the text was kept: the file replays while it is
 * unchanged; once it has changed, the command says so and what to do. */
FL_TEST_ROOT_T(cli_replay, textless_run_replays_unchanged_file, 60)
{
    fl_test_write("o.yaml", "name: it-old\nhosts: [a]\ncluster:\n  w: [a]\ntimeout: 30s\n"
                            "run:\n  command: \"true\"\n");
    char *out;
    int rc = fl(&out, "run -q --db o.db o.yaml");
    FL_REQUIRE_MSG(rc == 0, "run: exit %d: %s", rc, out);
    free(out);
    FL_REQUIRE_EQ(
        fl_test_sh(NULL, "cd %s && sqlite3 o.db 'DELETE FROM scenario_texts'", fl_test_dir()), 0);
    char *id = nth_run("o.db", 0), args[256];
    snprintf(args, sizeof args, "replay -q --db o.db %s", id);
    rc = fl(&out, args);
    FL_ASSERT_MSG(rc == 0, "replay: exit %d: %s", rc, out);
    free(out);
    /* (that replay kept the text again: it was the same) */
    FL_REQUIRE_EQ(
        fl_test_sh(NULL, "cd %s && sqlite3 o.db 'DELETE FROM scenario_texts'", fl_test_dir()), 0);
    FL_REQUIRE_EQ(fl_test_sh(NULL, "echo '# changed' >> %s/o.yaml", fl_test_dir()), 0);
    rc = fl(&out, args);
    FL_ASSERT_EQ(rc, 2);
    FL_ASSERT_CONTAINS(out, "does not hold the text of run");
    FL_ASSERT_CONTAINS(out, "has changed since");
    FL_ASSERT_CONTAINS(out, "faultline run ");
    free(out);
    free(id);
}

/* Every run of the seed suite, replayed from the database, comes out as it
 * was recorded. */
FL_TEST_ROOT_T(cli_replay, every_seed_run_replays_to_its_verdict, 600)
{
    if (access(fl_test_bin("psrt"), X_OK) != 0)
        FL_SKIP("build/bin/psrt is not built");
    char *out, args[4200];
    snprintf(args, sizeof args, "run -q --db s.db %s/scenarios/seeds", fl_test_root());
    int rc = fl(&out, args);
    FL_REQUIRE_MSG(rc == 0, "the seed suite: exit %d: %s", rc, out);
    free(out);
    char db[4200];
    snprintf(db, sizeof db, "%s/s.db", fl_test_dir());
    int n = fl_test_db_int(db, "SELECT count(*) FROM runs");
    FL_REQUIRE(n >= 36);
    /* as if recorded in another clone: its files are found in this one */
    FL_REQUIRE_EQ(fl_test_sh(NULL,
                             "cd %s && sqlite3 s.db \"UPDATE runs SET scenario_file = "
                             "'/another/clone' || substr(scenario_file, instr(scenario_file, "
                             "'/scenarios/seeds/'))\"",
                             fl_test_dir()),
                  0);
    rc = fl_test_sh(&out,
                    "cd %s && %s replay -q --db s.db $(sqlite3 s.db 'SELECT run_id FROM runs "
                    "ORDER BY id') 2>&1 | tail -1",
                    fl_test_dir(), fl_test_bin("faultline"));
    char want[128];
    snprintf(want, sizeof want, "%d runs replayed: %d the same, 0 different, 0 could not", n, n);
    FL_ASSERT_CONTAINS(out, want);
    free(out);
}
