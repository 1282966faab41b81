/*
 * test_engine_check_ckpt.c: the post-run checkpoint checks (harness/engine/check_ckpt.c)
 * through the real faultline binary and a real psrt job (robust protocol,
 * 2 ps and 1 worker on three hosts), each check made to pass once and to
 * fail for the reason it exists: a copy with other bytes (valid bundle,
 * right crcs: only a byte comparison can tell), a copy set that misses a
 * shard, a wrong latest step, no restore at all, a corrupted data file.
 * The verdicts are read back from the run's database rows.
 */
#include "harness/tests/fl_test.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *scenario =
    "name: check-ckpt\n"
    "hosts: [ps0, ps1, w0]\n"
    "variants: {p: [x]}                 # two expect blocks: all and x\n"
    "cluster:\n"
    "  ps: [ps0, ps1]\n"
    "  worker: [w0]\n"
    "run:\n"
    "  stop_when: [worker]\n"
    "  env:\n"
    "    FLAGS: >\n"
    "      --ps_hosts={ps_hosts} --worker_hosts={worker_hosts} --model=linear\n"
    "      --save_checkpoint_steps=20 --max_steps=100 --max_to_keep=100\n"
    "      --checkpoint_protocol=robust\n"
    "  ps: {command: \"{bin}/psrt --job_name=ps --task_index={task} $FLAGS\"}\n"
    "  worker:\n"
    "    # then damages the oldest checkpoint's data (global_step's bytes)\n"
    "    command: |\n"
    "      {bin}/psrt --job_name=worker --task_index=0 $FLAGS || exit $?\n"
    "      printf XXXX | dd of=train_logs/model.ckpt-0.data-00000-of-00001 bs=1 seek=4 "
    "conv=notrunc 2>/dev/null\n"
    "expect:\n"
    "  all:\n"
    "    checkpoint:\n"
    "      - host: w0\n"
    "        dir: train_logs\n"
    "        verify: true\n"
    "        restorable: true\n"
    "        copies: [{host: ps0, dir: train_logs/ps0}, {host: ps1, dir: train_logs/ps1}]\n"
    "        latest_step: last_reported\n"
    "      - {host: w0, dir: train_logs, restorable: true, copies: [{host: ps0, prefix: "
    "train_logs/ps0/model.ckpt-0}]}\n"
    "      - {host: w0, dir: train_logs, restorable: true, copies: [{host: ps0, dir: "
    "train_logs/ps0}]}\n"
    "      - {host: w0, dir: train_logs, latest_step: 7, restores_latest: true}\n"
    "  x:\n"
    "    checkpoint: {host: chief, prefix: train_logs/model.ckpt-0, verify: true}\n";

/* passed and observed of one check row; -1 when absent. */
static int check_row(const char *db, const char *name, int nth, char *obs, size_t len)
{
    sqlite3 *h;
    int passed = -1;
    if (sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK)
        return -1;
    sqlite3_stmt *st;
    if ((sqlite3_prepare_v2(h,
                            "SELECT passed, observed FROM checks WHERE name = ?1 ORDER BY rowid "
                            "LIMIT 1 OFFSET ?2",
                            -1, &st, NULL) == SQLITE_OK)) {
        sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
        sqlite3_bind_int(st, 2, nth);
        if (sqlite3_step(st) == SQLITE_ROW) {
            passed = sqlite3_column_int(st, 0);
            snprintf(obs, len, "%s", (const char *)sqlite3_column_text(st, 1) ?: "");
        }
        sqlite3_finalize(st);
    }
    sqlite3_close(h);
    return passed;
}

FL_TEST_ROOT_T(engine_check_ckpt, each_check_passes_and_fails, 90)
{
    fl_test_need_root();
    char path[4096], db[4096], obs[2048];
    snprintf(path, sizeof path, "%s/check-ckpt.yaml", fl_test_dir());
    snprintf(db, sizeof db, "%s/fl.db", fl_test_dir());
    FILE *f = fopen(path, "w");
    FL_REQUIRE(f != NULL);
    fputs(scenario, f);
    fclose(f);
    char *out;
    int rc = fl_test_sh(&out, "%s run -q --out %s/out --db %s %s 2>&1", fl_test_bin("faultline"),
                        fl_test_dir(), db, path);
    /* some checks are meant to fail: the run fails */
    FL_ASSERT_MSG(rc == 1, "faultline run exited %d:\n%s", rc, out);
    free(out);

    /* 1: the good checkpoint, every check passing */
    FL_ASSERT_EQ(check_row(db, "checkpoint.state", 0, obs, sizeof obs), 1);
    FL_ASSERT_STREQ(obs, "model.ckpt-100");
    FL_ASSERT_EQ(check_row(db, "checkpoint.verify", 0, obs, sizeof obs), 1);
    FL_ASSERT_CONTAINS(obs, "every crc matches");
    FL_ASSERT_EQ(check_row(db, "checkpoint.restore", 0, obs, sizeof obs), 1);
    FL_ASSERT_CONTAINS(obs, "global_step 100, bit-exact with 2 copies");
    FL_ASSERT_EQ(check_row(db, "checkpoint.latest_step", 0, obs, sizeof obs), 1);
    FL_ASSERT_CONTAINS(obs, "last save.done step=100");

    /* 2: a valid copy (right crcs) holding other bytes: step 0's */
    FL_ASSERT_EQ(check_row(db, "checkpoint.restore", 1, obs, sizeof obs), 0);
    FL_ASSERT_CONTAINS(obs, "differs from copy ps0:train_logs/ps0/model.ckpt-0");

    /* 3: the copies miss ps1's shard */
    FL_ASSERT_EQ(check_row(db, "checkpoint.restore", 2, obs, sizeof obs), 0);
    FL_ASSERT_CONTAINS(obs, "is in none of the 1 copies");

    /* 4: a wrong step, and no restore happened in this run */
    FL_ASSERT_EQ(check_row(db, "checkpoint.latest_step", 1, obs, sizeof obs), 0);
    FL_ASSERT_CONTAINS(obs, "model.ckpt-100");
    FL_ASSERT_EQ(check_row(db, "checkpoint.restores_latest", 0, obs, sizeof obs), 0);
    FL_ASSERT_STREQ(obs, "the chief reported no restore.done");

    /* 5: the damaged data file fails verification, naming the tensor */
    FL_ASSERT_EQ(check_row(db, "checkpoint.verify", 1, obs, sizeof obs), 0);
    FL_ASSERT_CONTAINS(obs, "global_step");
}

FL_TEST_ROOT_T(engine_check_ckpt, missing_state_and_steps_fail, 60)
{
    fl_test_need_root();
    char path[4096], db[4096], obs[2048];
    snprintf(path, sizeof path, "%s/states.yaml", fl_test_dir());
    snprintf(db, sizeof db, "%s/fl.db", fl_test_dir());
    FILE *f = fopen(path, "w");
    FL_REQUIRE(f != NULL);
    fputs("name: states\nhosts: [a]\ncluster: {w: [a]}\n"
          "run: {command: \"mkdir -p logs && echo 'model_checkpoint_path: \\\"model.ckpt-5\\\"' > "
          "logs/checkpoint\"}\n"
          "expect:\n  all:\n    checkpoint:\n"
          "      - {host: a, dir: nothing, verify: true}\n"
          "      - {host: a, dir: logs, latest_step: last_reported}\n",
          f);
    fclose(f);
    char *out;
    int rc = fl_test_sh(&out, "%s run -q --out %s/out --db %s %s 2>&1", fl_test_bin("faultline"),
                        fl_test_dir(), db, path);
    FL_ASSERT_MSG(rc == 1, "faultline run exited %d:\n%s", rc, out);
    free(out);
    FL_ASSERT_EQ(check_row(db, "checkpoint.state", 0, obs, sizeof obs), 0);
    FL_ASSERT_STREQ(obs, "no `checkpoint` state file");
    FL_ASSERT_EQ(check_row(db, "checkpoint.verify", 0, obs, sizeof obs), 0);
    FL_ASSERT_STREQ(obs, "no `checkpoint` state file");
    FL_ASSERT_EQ(check_row(db, "checkpoint.state", 1, obs, sizeof obs), 1);
    FL_ASSERT_STREQ(obs, "model.ckpt-5");
    FL_ASSERT_EQ(check_row(db, "checkpoint.latest_step", 0, obs, sizeof obs), 0);
    FL_ASSERT_STREQ(obs, "model.ckpt-5, but the chief reported no save.done");
    /* without a database the reported steps are still known (the engine
     * keeps them): the same verdict and reason as with one */
    snprintf(path, sizeof path, "%s/nodb.yaml", fl_test_dir());
    f = fopen(path, "w");
    FL_REQUIRE(f != NULL);
    fputs("name: nodb\nhosts: [a]\ncluster: {w: [a]}\n"
          "run: {command: \"mkdir -p logs && echo 'model_checkpoint_path: \\\"model.ckpt-5\\\"' > "
          "logs/checkpoint\"}\n"
          "expect:\n  all:\n    checkpoint: {host: a, dir: logs, latest_step: last_reported}\n",
          f);
    fclose(f);
    rc = fl_test_sh(&out,
                    "%s run -q --no-db --junit %s/j.xml --out %s/out %s >/dev/null 2>&1; "
                    "cat %s/j.xml",
                    fl_test_bin("faultline"), fl_test_dir(), fl_test_dir(), path, fl_test_dir());
    FL_ASSERT_CONTAINS(out,
                       "checkpoint.latest_step: expected the step of the chief&apos;s last "
                       "save.done, observed model.ckpt-5, but the chief reported no save.done");
    free(out);
}
