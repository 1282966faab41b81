/*
 * test_engine_seeds.c: the reproducer suite (scenarios/seeds/) in `make check`.
 * Each test runs one seed's scenario files through the real faultline
 * binary, on real hosts, with its own results database, and requires every
 * run to pass: each legacy variant fails with the seed's own error text
 * (the scenario's fails_with), each robust variant trains to the end and
 * its checkpoint checks hold.  The tests then read the database to make
 * sure what passed is what matters: the seed's error shape is what the
 * table shows in OBSERVED, no run failed, and the robust runs really ran
 * their checkpoint checks.
 */
#include "harness/tests/fl_test.h"

#include <glob.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int db_int(const char *sql)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/fl.db", fl_test_dir());
    return fl_test_db_int(path, sql);
}

/* Number of scenario files of a seed ("s000"). */
static int nfiles(const char *seed)
{
    char pat[4096];
    glob_t g;
    snprintf(pat, sizeof pat, "%s/scenarios/seeds/%s-*.yaml", fl_test_root(), seed);
    int n = glob(pat, 0, NULL, &g) == 0 ? (int)g.gl_pathc : 0;
    globfree(&g);
    return n;
}

/*
 * Runs every scenario file of one seed; requires all runs to pass and, for
 * each error text given, a line of the summary table (SEED column = the
 * seed) holding it in OBSERVED.  Returns the output (malloc'd).
 */
static char *run_seed(const char *seed, int min_runs, const char *const *errors)
{
    fl_test_need_root();
    if (nfiles(seed) == 0)
        FL_SKIP("no scenarios/seeds/%s-*.yaml", seed);
    char *out;
    int rc =
        fl_test_sh(&out, "%s run --out %s/out --db %s/fl.db %s/scenarios/seeds/%s-*.yaml 2>&1",
                   fl_test_bin("faultline"), fl_test_dir(), fl_test_dir(), fl_test_root(), seed);
    FL_ASSERT_MSG(rc == 0, "faultline run of %s exited %d:\n%s", seed, rc, out);
    int runs = db_int("SELECT count(*) FROM runs");
    FL_ASSERT_GE(runs, min_runs);
    FL_ASSERT_EQ(db_int("SELECT count(*) FROM runs WHERE verdict = 'pass'"), runs);
    FL_ASSERT_EQ(db_int("SELECT count(*) FROM checks WHERE passed = 0"), 0);
    /* every robust run checked a checkpoint (or an export) and every check held */
    FL_ASSERT_EQ(db_int("SELECT count(*) FROM runs r WHERE r.variant LIKE '%protocol=robust%' AND "
                        "NOT EXISTS (SELECT 1 FROM checks c WHERE c.run = r.id AND "
                        "c.name IN ('checkpoint.verify', 'event'))"),
                 0);
    /* the table: SEED column, and each seed error whole in one of its rows */
    char upper[8];
    snprintf(upper, sizeof upper, "S%s", seed + 1);
    for (size_t i = 0; errors && errors[i]; i++) {
        bool found = false;
        for (const char *l = out; l && *l && !found;
             l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
            size_t n = strcspn(l, "\n");
            char *line = strndup(l, n);
            found = !strncmp(line, upper, 4) && strstr(line, errors[i]) && strstr(line, "legacy") &&
                    strstr(line, "PASS");
            free(line);
        }
        FL_ASSERT_MSG(found, "no %s legacy row of the table shows \"%s\":\n%s", upper, errors[i],
                      out);
    }
    return out;
}

FL_TEST_ROOT_T(engine_seeds, s000_shard_save_on_ps_disk, 120)
{
    static const char *const errs[] = {
        "NotFoundError: ./train_logs/model.ckpt-0_temp_",
        "/part-00000-of-00002.data-00000-of-00001; No such file or directory",
        "/part-00000-of-00006.data-00000-of-00001; No such file or directory", NULL};
    char *out = run_seed("s000", 10, errs);
    /* legacy passes with one ps on the chief's disk and with a shared logdir */
    FL_ASSERT_EQ(db_int("SELECT count(*) FROM runs WHERE variant = 'protocol=legacy' AND "
                        "scenario IN ('s000-1ps-chief-host', 's000-2ps-shared-logdir') AND "
                        "verdict = 'pass'"),
                 2);
    free(out);
}

FL_TEST_ROOT_T(engine_seeds, s001_merge_on_last_ps, 120)
{
    static const char *const errs[] = {"/part-00000-of-00002.index; No such file or directory",
                                       NULL};
    char *out = run_seed("s001", 6, errs);
    /* the device of the merge is the last ps */
    FL_ASSERT_EQ(
        db_int("SELECT count(*) FROM checks WHERE name = 'log_matches' AND "
               "observed LIKE '%MergeV2Checkpoints[_device=\"/job:ps/replica:0/task:1/cpu:0\"]%'"),
        1);
    free(out);
}

FL_TEST_ROOT_T(engine_seeds, s002_export_four_layouts, 120)
{
    static const char *const errs[] = {
        "NotFoundError: model/1/variables/variables_temp_",
        "/part-00000-of-00001.data-00000-of-00001; No such file or directory", NULL};
    char *out = run_seed("s002", 10, errs);
    /* robust: predict answered from the export in every layout */
    FL_ASSERT_EQ(db_int("SELECT count(*) FROM checks WHERE name = 'log_matches' AND "
                        "observed LIKE 'predict: % of 20 held-out queries answered%'"),
                 2 + 2 + 3); /* both protocols in the 2 layouts legacy survives, robust in 3 more */
    free(out);
}

FL_TEST_ROOT_T(engine_seeds, s003_thread_limit_abort, 120)
{
    static const char *const errs[] = {
        "killed by SIGABRT (core dumped): F psrt/pool.c] PosixEnv::SchedClosure: pthread_create "
        "failed: Resource temporarily unavailable",
        NULL};
    /* LeakSanitizer starts a thread at exit, which the chief's limit of 2
     * refuses; ASan turns core dumps off, and the legacy chief must dump */
    fl_test_asan_options("detect_leaks=0:disable_coredump=0");
    char *out = run_seed("s003", 2, errs);
    FL_ASSERT_EQ(db_int("SELECT count(*) FROM processes WHERE job = 'chief' AND signal = 6 AND "
                        "core_dumped = 1"),
                 1);
    free(out);
}

FL_TEST_ROOT_T(engine_seeds, s004_relaunch_restore, 120)
{
    static const char *const errs[] = {
        "InvalidArgumentError: Unsuccessful TensorSliceReader constructor: Failed to get matching "
        "files on ./train_logs/model.ckpt-",
        NULL};
    char *out = run_seed("s004", 8, errs);
    /* robust: every relaunch restored from the last reported save */
    FL_ASSERT_EQ(db_int("SELECT count(*) FROM checks WHERE name = 'checkpoint.restores_latest' AND "
                        "passed = 1"),
                 4);
    free(out);
}

/* The S003 layout at scale: 2 ps and 254 workers, each on a machine of its
 * own (256 hosts), robust protocol, no fault: the job trains to the end,
 * its chief's checkpoint verifies and restores, and all 256 tasks ran and
 * ended as they should (the workers stopped with the chief). */
FL_TEST_ROOT_T(engine_seeds, s003_layout_on_256_hosts_trains_to_the_end, 240)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/s003-256.yaml", fl_test_dir());
    FILE *f = fopen(path, "w");
    FL_REQUIRE(f);
    fputs("name: s003-256-hosts\n"
          "hosts: [ps0, ps1",
          f);
    for (int w = 0; w < 254; w++)
        fprintf(f, ", w%d", w);
    fputs("]\ncluster:\n  ps: [ps0, ps1]\n  chief: [w0]\n  worker: [w1", f);
    for (int w = 2; w < 254; w++)
        fprintf(f, ", w%d", w);
    fputs("]\n"
          "timeout: 200s\n"
          "run:\n"
          "  stop_when: [chief]\n"
          "  env:\n"
          "    PSRT_FLAGS: >\n"
          "      --ps_hosts={ps_hosts} --worker_hosts={chief_hosts},{worker_hosts}\n"
          "      --train_dir=./train_logs --model=sparse_lr --optimizer=ftrl\n"
          "      --save_checkpoint_steps=50 --max_steps=300 --checkpoint_protocol=robust\n"
          "      --rpc_threads=pool\n"
          "  ps: {command: '{bin}/psrt --job_name=ps --task_index={task} $PSRT_FLAGS'}\n"
          "  chief: {command: 'exec {bin}/psrt --job_name=worker --task_index=0 $PSRT_FLAGS'}\n"
          "  worker: {command: 'exec {bin}/psrt --job_name=worker --task_index=$(({task} + 1)) "
          "$PSRT_FLAGS'}\n"
          "expect:\n"
          "  all:\n"
          "    chief: {exit: 0, log_matches: 'training done at global step 300'}\n"
          "    worker: {exit: any, log_not_matches: 'failed'}\n"
          "    ps: {exit: any, log_not_matches: 'failed|Error'}\n"
          "    checkpoint: {host: w0, dir: train_logs, verify: true, restorable: true,\n"
          "                 latest_step: last_reported}\n",
          f);
    FL_REQUIRE(fclose(f) == 0);
    char *out;
    int rc = fl_test_sh(&out, "%s run -q --out %s/out --db %s/fl.db %s 2>&1",
                        fl_test_bin("faultline"), fl_test_dir(), fl_test_dir(), path);
    FL_ASSERT_MSG(rc == 0, "faultline run of 256 hosts exited %d:\n%s", rc, out);
    free(out);
    FL_ASSERT_EQ(db_int("SELECT count(*) FROM runs WHERE verdict = 'pass'"), 1);
    FL_ASSERT_EQ(db_int("SELECT count(DISTINCT host) FROM processes"), 256);
    FL_ASSERT_EQ(db_int("SELECT count(*) FROM processes WHERE job = 'chief' AND exit_code = 0"), 1);
    FL_ASSERT_EQ(db_int("SELECT count(*) FROM checks WHERE name = 'checkpoint.verify' AND "
                        "passed = 1"),
                 1);
}
