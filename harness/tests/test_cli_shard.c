/*
 * test_cli_shard.c: `run --shard K/N` and `soak --shard K/N` (issue 26):
 * N shards, each a faultline process of its own with its own out directory
 * and database, together make exactly the runs of one invocation without
 * --shard: the same (scenario, variant, seed, verdict) for the seed suite,
 * and for a soak the same iterations with the same seeds and the same
 * drawn fault schedules; no run is made twice; and `faultline runs merge`
 * of the shards' databases holds exactly the runs of the one.
 */
#include "harness/tests/fl_test.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The rows of sql (one text column) over every database in dbs, sorted,
 * joined by newlines (malloc'd). */
static char *rows_of(const char *const *dbs, size_t ndbs, const char *sql)
{
    char **v = NULL;
    size_t n = 0;
    for (size_t i = 0; i < ndbs; i++) {
        sqlite3 *db;
        sqlite3_stmt *st;
        FL_REQUIRE_MSG(sqlite3_open_v2(dbs[i], &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK,
                       "open %s", dbs[i]);
        FL_REQUIRE_MSG(sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK, "%s: %s", dbs[i],
                       sqlite3_errmsg(db));
        while (sqlite3_step(st) == SQLITE_ROW) {
            v = realloc(v, (n + 1) * sizeof *v);
            v[n++] = strdup((const char *)sqlite3_column_text(st, 0));
        }
        sqlite3_finalize(st);
        sqlite3_close(db);
    }
    qsort(v, n, sizeof *v, cmp_str);
    size_t len = 1;
    for (size_t i = 0; i < n; i++)
        len += strlen(v[i]) + 1;
    char *out = calloc(1, len);
    for (size_t i = 0; i < n; i++) {
        strcat(out, v[i]);
        strcat(out, "\n");
        free(v[i]);
    }
    free(v);
    return out;
}

/* `faultline runs merge T/merged.db` of the four shards' databases. */
static void merge4(const char *t, char sh[4][4200])
{
    char *out;
    int rc = fl_test_sh(&out, "%s runs merge %s/merged.db %s %s %s %s 2>&1",
                        fl_test_bin("faultline"), t, sh[0], sh[1], sh[2], sh[3]);
    FL_ASSERT_MSG(rc == 0, "runs merge exited %d:\n%s", rc, out);
    free(out);
}

/* T/all/faultline.db (the whole work's) and T/sK/faultline.db (shard K's). */
static void db_paths(const char *t, char all[4200], char sh[4][4200], const char *shards[4])
{
    snprintf(all, 4200, "%s/all/faultline.db", t);
    for (int k = 0; k < 4; k++) {
        snprintf(sh[k], sizeof sh[k], "%s/s%d/faultline.db", t, k + 1);
        shards[k] = sh[k];
    }
}

static size_t lines(const char *s)
{
    size_t n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

/* The seed suite with --seed 11, whole and as 4 shards run at once. */
FL_TEST_ROOT_T(cli_shard, seed_suite_in_4_shards_makes_the_runs_of_one, 300)
{
    const char *t = fl_test_dir();
    char *out;
    int rc = fl_test_sh(&out, "%s run -q --seed 11 --out %s/all %s/scenarios/seeds 2>&1",
                        fl_test_bin("faultline"), t, fl_test_root());
    FL_ASSERT_MSG(rc == 0, "the whole suite exited %d:\n%s", rc, out);
    free(out);
    rc = fl_test_sh(&out,
                    "pids=; for k in 1 2 3 4; do %s run -q --seed 11 --shard $k/4 --out %s/s$k "
                    "%s/scenarios/seeds >%s/s$k.txt 2>&1 & pids=\"$pids $!\"; done; fail=0; "
                    "for p in $pids; do wait $p || fail=1; done; cat %s/s?.txt; exit $fail",
                    fl_test_bin("faultline"), t, fl_test_root(), t, t);
    FL_ASSERT_MSG(rc == 0, "a shard exited non-zero:\n%s", out);
    for (int k = 1; k <= 4; k++) {
        char want[64];
        snprintf(want, sizeof want, "shard %d/4: ", k);
        FL_ASSERT_CONTAINS(out, want);
    }
    FL_ASSERT_CONTAINS(out, "of the 36 runs of the whole work");
    free(out);
    char all[4200], sh[4][4200];
    const char *one[] = {all}, *shards[4];
    db_paths(t, all, sh, shards);
    const char *q = "SELECT scenario || ' ' || variant || ' seed=' || seed || ' ' || verdict "
                    "FROM runs";
    char *a = rows_of(one, 1, q), *b = rows_of(shards, 4, q);
    FL_ASSERT_EQ(lines(a), 36);
    FL_ASSERT_STREQ(b, a);
    free(b);
    /* merged into one database: the same runs, each once */
    char merged[4200];
    snprintf(merged, sizeof merged, "%s/merged.db", t);
    merge4(t, sh);
    const char *m[] = {merged};
    b = rows_of(m, 1, q);
    FL_ASSERT_STREQ(b, a);
    /* each shard made its own part: 9 runs each (36 in turn over 4) */
    for (int k = 0; k < 4; k++)
        FL_ASSERT_EQ(fl_test_db_int(sh[k], "SELECT count(*) FROM runs"), 9);
    free(a);
    free(b);
}

/* A soak of 40 iterations with seed 3, whole and as 4 shards: the same
 * iteration seeds, verdicts and drawn schedules (each run's faults). */
FL_TEST_ROOT_T(cli_shard, soak_in_4_shards_draws_the_schedules_of_one, 300)
{
    const char *t = fl_test_dir();
    char profile[4200];
    snprintf(profile, sizeof profile, "%s/harness/tests/data/soak/variants.yaml", fl_test_root());
    char *out;
    int rc = fl_test_sh(&out,
                        "%s soak %s --variant mode=good --iterations 40 --seed 3 -q --out %s/all "
                        "2>&1",
                        fl_test_bin("faultline"), profile, t);
    FL_ASSERT_MSG(rc == 0, "the whole soak exited %d:\n%s", rc, out);
    free(out);
    rc = fl_test_sh(&out,
                    "set -e; for k in 1 2 3 4; do %s soak %s --variant mode=good --iterations 40 "
                    "--seed 3 -q --shard $k/4 --out %s/s$k; done 2>&1",
                    fl_test_bin("faultline"), profile, t);
    FL_ASSERT_MSG(rc == 0, "a shard exited %d:\n%s", rc, out);
    FL_ASSERT_CONTAINS(out, "shard 3/4: iterations 3, 7, ... of the whole soak");
    free(out);
    char all[4200], sh[4][4200];
    const char *one[] = {all}, *shards[4];
    db_paths(t, all, sh, shards);
    const char *runs = "SELECT 'seed=' || seed || ' ' || verdict FROM runs";
    const char *faults = "SELECT 'seed=' || r.seed || ' ' || f.idx || ' ' || f.kind || ' ' || "
                         "f.target || ' ' || coalesce(f.detail, '') FROM faults f JOIN runs r "
                         "ON r.id = f.run";
    char merged[4200];
    snprintf(merged, sizeof merged, "%s/merged.db", t);
    merge4(t, sh);
    const char *m[] = {merged};
    char *a = rows_of(one, 1, runs), *b = rows_of(shards, 4, runs), *c = rows_of(m, 1, runs);
    FL_ASSERT_EQ(lines(a), 40);
    FL_ASSERT_STREQ(b, a);
    FL_ASSERT_STREQ(c, a);
    free(a);
    free(b);
    free(c);
    a = rows_of(one, 1, faults);
    b = rows_of(shards, 4, faults);
    c = rows_of(m, 1, faults);
    FL_ASSERT(lines(a) >= 40); /* a pause in every iteration */
    FL_ASSERT_STREQ(b, a);
    FL_ASSERT_STREQ(c, a);
    free(a);
    free(b);
    free(c);
}

/* A bad shard is a usage error that says what it wants; soak's wants a seed. */
FL_TEST(cli_shard, bad_shard_is_a_usage_error)
{
    char *out;
    int rc = fl_test_sh(&out, "%s run --shard 5/4 x.yaml 2>&1", fl_test_bin("faultline"));
    FL_ASSERT_EQ(rc, 2);
    FL_ASSERT_CONTAINS(out, "--shard wants K/N, the K-th of N parts (1 <= K <= N <= 100000), "
                            "like --shard 2/4, not '5/4'");
    free(out);
    rc = fl_test_sh(&out, "%s soak %s/harness/tests/data/soak/variants.yaml --shard 1/2 2>&1",
                    fl_test_bin("faultline"), fl_test_root());
    FL_ASSERT_EQ(rc, 2);
    FL_ASSERT_CONTAINS(out, "--shard needs --seed, the same for every shard");
    free(out);
}

/* What a failing shard found travels with the merged database: each
 * shard's kept soak failures and the logs of its failed runs are copied
 * beside it (the log paths in it name the copies), and both replay there:
 * `faultline run FILE` fails the same way, `faultline replay RUN` comes
 * out the same. */
FL_TEST_ROOT_T(cli_shard, failures_travel_with_the_merged_database, 240)
{
    const char *t = fl_test_dir();
    char *out;
    int rc = fl_test_sh(&out,
                        "for k in 1 2; do %s soak %s/harness/tests/data/soak/variants.yaml "
                        "--variant mode=bad --iterations 2 --seed 1 --budget 0 -q --shard $k/2 "
                        "--out %s/s$k; done 2>&1",
                        fl_test_bin("faultline"), fl_test_root(), t);
    FL_ASSERT_EQ(rc, 1);
    free(out);
    rc = fl_test_sh(&out,
                    "%s runs merge %s/m/faultline.db %s/s1/faultline.db %s/s2/faultline.db "
                    "2>&1",
                    fl_test_bin("faultline"), t, t, t);
    FL_ASSERT_MSG(rc == 0, "merge exited %d:\n%s", rc, out);
    FL_ASSERT_CONTAINS(out, "1 kept soak failure file and the logs of 1 run that did not pass");
    free(out);
    char db[4200];
    snprintf(db, sizeof db, "%s/m/faultline.db", t);
    FL_ASSERT_EQ(fl_test_db_int(db, "SELECT count(*) FROM runs WHERE verdict = 'fail'"), 2);
    char sql[8400];
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM processes WHERE log_path NOT LIKE '%s/m/runs/%%/logs/%%'", t);
    FL_ASSERT_EQ(fl_test_db_int(db, sql), 0);
    /* every log path names a file that is there */
    rc = fl_test_sh(&out,
                    "sqlite3 %s 'SELECT log_path FROM processes' | while read -r f; do "
                    "test -f \"$f\" || echo missing $f; done",
                    db);
    FL_ASSERT_MSG(rc == 0 && !out[0], "%s", out);
    free(out);
    /* the failures of iterations 1 and 2 (one a shard), and each replays */
    rc = fl_test_sh(&out, "ls %s/m/soak-failures/ | grep -c 'soak-variants-i[12]-s.*\\.yaml$'", t);
    FL_ASSERT_STREQ(out, "2\n");
    free(out);
    rc = fl_test_sh(&out, "%s run --out %s/again %s/m/soak-failures/soak-variants-i2-*.yaml 2>&1",
                    fl_test_bin("faultline"), t, t);
    FL_ASSERT_EQ(rc, 1);
    FL_ASSERT_CONTAINS(out, "exit: expected exit 7, observed exit 0");
    free(out);
    char *id = NULL;
    rc = fl_test_sh(&id, "sqlite3 %s \"SELECT run_id FROM runs LIMIT 1\"", db);
    id[strcspn(id, "\n")] = 0;
    rc = fl_test_sh(&out, "%s replay --db %s --out %s/other %s 2>&1", fl_test_bin("faultline"), db,
                    t, id);
    FL_ASSERT_CONTAINS(out, "came out the same");
    free(out);
    free(id);
}
