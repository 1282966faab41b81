/*
 * test_psrt_seeds.c: the seed bugs' mechanics in psrt without the harness.
 * Each task runs in its own directory (its own "disk", see psrt_cluster.h);
 * the legacy protocol must fail with the seed's error shape (S000, S001,
 * S002, S004) and pass in the layouts the reports say work; the robust
 * protocol must pass in the same layouts, survive a relaunched ps (fresh or
 * same disk), worker or chief, and fail with a clear error naming the shard
 * when too few copies survive.
 */
#include "runtime/tests/psrt_cluster.h"
#include "runtime/psrt/psrt.h"

#include <regex.h>

static void assert_matches(const char *text, const char *re)
{
    regex_t rx;
    FL_REQUIRE_EQ(regcomp(&rx, re, REG_EXTENDED | REG_NOSUB), 0);
    int r = regexec(&rx, text, 0, NULL, 0);
    regfree(&rx);
    FL_ASSERT_MSG(r == 0, "output does not match /%s/:\n%s", re, text);
}

/* ---- S000: sharded save on ps hosts without the chief's log directory ---- */

static void s000(int nps, int nw, const char *shard_re)
{
    struct pc c;
    pc_init(&c, nps, nw,
            "--model=sparse_lr --optimizer=ftrl --checkpoint_protocol=legacy "
            "--save_checkpoint_steps=50 --max_steps=300 --connect_timeout_secs=10");
    pc_start_all(&c, NULL, NULL);
    int r = pc_wait_all(&c, 25);
    char *log = pc_read("w0.log");
    FL_ASSERT_EQ(r, 1);
    char re[512];
    snprintf(
        re, sizeof re,
        "NotFoundError: \\./train_logs/model\\.ckpt-0_temp_[0-9a-f]{32}/%s\\.data-00000-of-00001; "
        "No such file or directory",
        shard_re);
    assert_matches(log, re);
    assert_matches(
        log,
        "Node: save/SaveV2(_[0-9]+)? = SaveV2\\[_device=\"/job:ps/replica:0/task:[0-9]+/cpu:0\"");
    free(log);
}

FL_TEST_CLUSTER_T(psrt_seeds, s000_legacy_2ps_shard_save_fails_on_ps_disk, 30)
{
    s000(2, 5, "part-0000[01]-of-00002");
}

FL_TEST_CLUSTER_T(psrt_seeds, s000_legacy_6ps_shard_save_fails_on_ps_disk, 30)
{
    s000(6, 5, "part-0000[0-5]-of-00006");
}

FL_TEST_CLUSTER_T(psrt_seeds, s000_robust_same_layout_passes, 30)
{
    struct pc c;
    pc_init(&c, 6, 5,
            "--model=sparse_lr --optimizer=ftrl --checkpoint_protocol=robust "
            "--save_checkpoint_steps=50 --max_steps=300 --connect_timeout_secs=10");
    pc_start_all(&c, NULL, NULL);
    int r = pc_wait_all(&c, 25);
    char *log = pc_read("w0.log");
    FL_ASSERT_MSG(r == 0, "chief exited %d:\n%s", r, log);
    FL_ASSERT_CONTAINS(log, "Saved checkpoint for step 300");
    char *st = pc_read("w0/train_logs/checkpoint");
    FL_ASSERT_CONTAINS(st, "model_checkpoint_path: \"model.ckpt-300\"");
    FL_ASSERT(pc_exists("ps5/train_logs/ps5/model.ckpt-300.index"));
    free(st);
    free(log);
}

/* ---- S001: the merge on the last ps needs every part on its disk -------- */

FL_TEST_CLUSTER_T(psrt_seeds, s001_legacy_merge_fails_on_last_ps, 30)
{
    struct pc c;
    pc_init(&c, 2, 3,
            "--model=linear --optimizer=adagrad --checkpoint_protocol=legacy "
            "--save_checkpoint_steps=50 --max_steps=300 --connect_timeout_secs=10");
    /* each ps host has a ./train_logs (SaveV2 succeeds), none is shared */
    pc_dir("ps0/train_logs");
    pc_dir("ps1/train_logs");
    pc_start_all(&c, NULL, NULL);
    int r = pc_wait_all(&c, 25);
    char *log = pc_read("w0.log");
    FL_ASSERT_EQ(r, 1);
    assert_matches(log, "NotFoundError: \\./train_logs/model\\.ckpt-0_temp_[0-9a-f]{32}/"
                        "part-00000-of-00002\\.index; No such file or directory");
    FL_ASSERT_CONTAINS(log, "[[Node: save/MergeV2Checkpoints = MergeV2Checkpoints"
                            "[_device=\"/job:ps/replica:0/task:1/cpu:0\"]");
    /* ps 1 wrote its own part on its own disk; ps 0's part is on ps 0's */
    free(log);
}

FL_TEST_CLUSTER_T(psrt_seeds, s001_legacy_passes_with_one_ps_and_without_saving, 30)
{
    struct pc c;
    pc_init(&c, 1, 3,
            "--model=linear --checkpoint_protocol=legacy --save_checkpoint_steps=50 "
            "--max_steps=300 --connect_timeout_secs=10");
    pc_dir("ps0/train_logs");
    pc_start_all(&c, NULL, NULL);
    int r = pc_wait_all(&c, 25);
    char *log = pc_read("w0.log");
    FL_ASSERT_MSG(r == 0, "1 ps: chief exited %d:\n%s", r, log);
    /* merged on ps 0's disk; the state file on the chief's */
    FL_ASSERT(pc_exists("ps0/train_logs/model.ckpt-300.index"));
    FL_ASSERT(pc_exists("w0/train_logs/checkpoint"));
    free(log);

    struct pc d;
    pc_init(&d, 2, 3,
            "--model=linear --checkpoint_protocol=legacy --save_checkpoint_secs=0 "
            "--max_steps=300 --connect_timeout_secs=10");
    pc_start(&d, "ps", 0, "b_ps0", NULL);
    pc_start(&d, "ps", 1, "b_ps1", NULL);
    pc_start(&d, "worker", 1, "b_w1", NULL);
    pc_start(&d, "worker", 2, "b_w2", NULL);
    pc_start(&d, "worker", 0, "b_w0", NULL);
    r = pc_wait_all(&d, 25);
    log = pc_read("b_w0.log");
    FL_ASSERT_MSG(r == 0, "saving disabled: chief exited %d:\n%s", r, log);
    free(log);
}

/* ---- S002: export from the chief, variables written on the ps ------------ */

FL_TEST_CLUSTER_T(psrt_seeds, s002_legacy_export_fails_on_ps_disk_and_leftover_hides_it, 40)
{
    const char *flags = "--model=softmax --checkpoint_protocol=legacy --save_checkpoint_secs=0 "
                        "--max_steps=100 --export_dir=model --connect_timeout_secs=10";
    /* layout 2: ps on A, workers on B and C */
    struct pc c;
    pc_init(&c, 1, 2, flags);
    pc_start_all(&c, NULL, NULL);
    int r = pc_wait_all(&c, 25);
    char *log = pc_read("w0.log");
    FL_ASSERT_EQ(r, 1);
    assert_matches(log, "NotFoundError: model/1/variables/variables_temp_[0-9a-f]{32}/"
                        "part-00000-of-00001\\.data-00000-of-00001; No such file or directory");
    FL_ASSERT_CONTAINS(
        log, "[[Node: save_1/SaveV2 = SaveV2[_device=\"/job:ps/replica:0/task:0/cpu:0\"]");
    free(log);
    /* layout 1/3: ps and chief share a machine (directory): works */
    struct pc d;
    pc_init(&d, 1, 2, flags);
    pc_start(&d, "ps", 0, "A", NULL);
    pc_start(&d, "worker", 1, "B", NULL);
    pc_start(&d, "worker", 0, "A", NULL);
    r = pc_wait_all(&d, 25);
    log = pc_read("A.log");
    FL_ASSERT_MSG(r == 0, "shared machine: chief exited %d:\n%s", r, log);
    FL_ASSERT(pc_exists("A/model/1/variables/variables.index"));
    free(log);
    /* layout 4: ps on C, workers on D; C still holds model/1/variables from an
     * earlier run: "also works", only because of the leftover */
    pc_dir("C/model/1/variables");
    struct pc e;
    pc_init(&e, 1, 2, flags);
    pc_start(&e, "ps", 0, "C", NULL);
    pc_start(&e, "worker", 1, "D", NULL);
    pc_start(&e, "worker", 0, "D", NULL);
    r = pc_wait_all(&e, 25);
    log = pc_read("D.log");
    FL_ASSERT_MSG(r == 0, "leftover: chief exited %d:\n%s", r, log);
    /* ... and the export is split across two machines: variables on C,
     * signature on D */
    FL_ASSERT(pc_exists("C/model/1/variables/variables.index"));
    FL_ASSERT(!pc_exists("D/model/1/variables/variables.index"));
    free(log);
}

int psrt_softmax_true_class(const float *x);

FL_TEST_CLUSTER_T(psrt_seeds, s002_robust_export_works_and_predict_answers, 40)
{
    struct pc c;
    pc_init(&c, 1, 2,
            "--model=softmax --checkpoint_protocol=robust --save_checkpoint_secs=0 "
            "--max_steps=300 --export_dir=model --connect_timeout_secs=10");
    pc_dir("w0/model");
    pc_dir("w0/model/1"); /* a stale export of the same version is replaced */
    pc_start_all(&c, NULL, NULL);
    int r = pc_wait_all(&c, 25);
    char *log = pc_read("w0.log");
    FL_REQUIRE_MSG(r == 0, "chief exited %d:\n%s", r, log);
    free(log);
    FL_ASSERT(pc_exists("w0/model/1/variables/variables.index"));
    FL_ASSERT(pc_exists("w0/model/1/signature.txt"));
    /* 50 fresh examples; predictions must match the true class mostly */
    struct psrt_model m;
    FL_REQUIRE_EQ(psrt_model_init(&m, "softmax", 1, 0), 0);
    struct psrt_batch b = {0};
    FL_REQUIRE_EQ(m.ops->batch(&m, &b, 50, 4242), 0);
    char in[PATH_MAX];
    snprintf(in, sizeof in, "%s/in.txt", fl_test_dir());
    FILE *f = fopen(in, "w");
    for (int i = 0; i < 50; i++) {
        for (int j = 0; j < 784; j++)
            fprintf(f, "%s%g", j ? " " : "", b.x[i * 784 + j]);
        fputc('\n', f);
    }
    fclose(f);
    char *out = NULL;
    r = fl_test_sh(&out, "%s predict --model %s/w0/model < %s", fl_test_bin("psrt"), fl_test_dir(),
                   in);
    FL_REQUIRE_EQ(r, 0);
    int right = 0, n = 0;
    char *save = NULL;
    for (char *line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save), n++)
        right += n < 50 && atoi(line) == (int)b.y[n] &&
                 (int)b.y[n] == psrt_softmax_true_class(b.x + n * 784);
    FL_ASSERT_EQ(n, 50);
    FL_ASSERT_MSG(right >= 45, "only %d of 50 predictions right", right);
    free(out);
    psrt_batch_free(&b);
}

/* ---- S004: relaunch a ps mid-training ------------------------------------ */

/* Latest step in a `checkpoint` state file, or -1. */
static long long latest_step(const char *rel)
{
    char *s = pc_read(rel);
    const char *p = strstr(s, "model_checkpoint_path: \"model.ckpt-");
    long long v = p ? atoll(p + strlen("model_checkpoint_path: \"model.ckpt-")) : -1;
    free(s);
    return v;
}

static long long wait_saved_after(const char *rel, long long after, double timeout)
{
    for (double t = 0; t < timeout; t += 0.01) {
        long long s = latest_step(rel);
        if (s > after)
            return s;
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return -1;
}

FL_TEST_CLUSTER_T(psrt_seeds, s004_legacy_relaunched_ps_fails_to_restore, 40)
{
    struct pc c;
    pc_init(&c, 2, 2,
            "--model=linear --checkpoint_protocol=legacy --save_checkpoint_steps=20 "
            "--max_steps=100000 --step_delay=0.005 --connect_timeout_secs=10 "
            "--reconnect_timeout_secs=10");
    /* saves work while every task shares one disk */
    pc_start(&c, "ps", 0, "shared", NULL);
    pc_start(&c, "ps", 1, "shared", NULL);
    pc_start(&c, "worker", 1, "shared", NULL);
    pc_start(&c, "worker", 0, "shared", NULL);
    long long s = wait_saved_after("shared/train_logs/checkpoint", 0, 20);
    FL_REQUIRE_MSG(s > 0, "no checkpoint after step 0:\n%s", pc_read("shared.log"));
    /* ps 1's machine dies; it comes back as a new machine (fresh disk) */
    kill(c.ps[1], SIGKILL);
    pc_wait(c.ps[1], 5);
    pc_start(&c, "ps", 1, "ps1_new", NULL);
    int r = pc_wait(c.w[0], 25);
    char *log = pc_read("shared.log");
    FL_ASSERT_EQ(r, 1);
    assert_matches(log, "InvalidArgumentError: Unsuccessful TensorSliceReader constructor: Failed "
                        "to get matching files on \\./train_logs/model\\.ckpt-[0-9]+: Not found: "
                        "\\./train_logs");
    FL_ASSERT_CONTAINS(log, "RestoreV2[_device=\"/job:ps/replica:0/task:1/cpu:0\"]");
    free(log);
    pc_kill_all(&c);
}

static void robust_relaunch(const char *new_dir, const char *expect)
{
    struct pc c;
    pc_init(&c, 2, 2,
            "--model=linear --checkpoint_protocol=robust --save_checkpoint_steps=40 "
            "--max_steps=1500 --step_delay=0.003 --connect_timeout_secs=10 "
            "--reconnect_timeout_secs=10");
    pc_start_all(&c, NULL, NULL);
    long long s = wait_saved_after("w0/train_logs/checkpoint", 0, 20);
    FL_REQUIRE_MSG(s > 0, "no checkpoint after step 0:\n%s", pc_read("w0.log"));
    kill(c.ps[1], SIGKILL);
    pc_wait(c.ps[1], 5);
    pc_start(&c, "ps", 1, new_dir, NULL);
    int r = pc_wait_all(&c, 30);
    char *log = pc_read("w0.log");
    FL_ASSERT_MSG(r == 0, "chief exited %d:\n%s", r, log);
    FL_ASSERT_CONTAINS(log, "lost its variables (relaunched)");
    /* restored from a reported checkpoint at least as new as the one seen */
    const char *p = strstr(log, "Restoring parameters from ./train_logs/model.ckpt-");
    FL_REQUIRE(p != NULL);
    long long restored = atoll(p + strlen("Restoring parameters from ./train_logs/model.ckpt-"));
    FL_ASSERT_GE(restored, s);
    FL_ASSERT_CONTAINS(log, "Saved checkpoint for step 1500");
    FL_ASSERT_CONTAINS(log, "target 0.001: reached");
    char nl[256];
    snprintf(nl, sizeof nl, "%s.log", new_dir);
    char *pl = pc_read(nl);
    FL_ASSERT_CONTAINS(pl, expect);
    free(pl);
    free(log);
}

FL_TEST_CLUSTER_T(psrt_seeds, s004_robust_relaunched_ps_fresh_disk_restores_from_chief, 40)
{
    robust_relaunch("ps1_new", "loaded model.ckpt-");
}

FL_TEST_CLUSTER_T(psrt_seeds, s004_robust_relaunched_ps_same_disk_restores_own_copy, 40)
{
    robust_relaunch("ps1", "restored from ./train_logs/ps1/model.ckpt-");
}

FL_TEST_CLUSTER_T(psrt_seeds, s004_robust_relaunched_worker_and_chief_finish, 40)
{
    struct pc c;
    pc_init(&c, 2, 3,
            "--model=linear --checkpoint_protocol=robust --save_checkpoint_steps=40 "
            "--max_steps=1500 --step_delay=0.003 --connect_timeout_secs=10 "
            "--reconnect_timeout_secs=10");
    pc_start_all(&c, NULL, NULL);
    long long s = wait_saved_after("w0/train_logs/checkpoint", 0, 20);
    FL_REQUIRE_MSG(s > 0, "no checkpoint after step 0:\n%s", pc_read("w0.log"));
    /* a worker dies and rejoins */
    kill(c.w[1], SIGKILL);
    pc_wait(c.w[1], 5);
    pc_start(&c, "worker", 1, "w1", NULL);
    /* the chief's machine is replaced (fresh disk): restore from the ps copies */
    kill(c.w[0], SIGKILL);
    pc_wait(c.w[0], 5);
    pc_start(&c, "worker", 0, "w0_new", NULL);
    int r = pc_wait_all(&c, 30);
    char *log = pc_read("w0_new.log");
    FL_ASSERT_MSG(r == 0, "new chief exited %d:\n%s", r, log);
    const char *p = strstr(log, "Restoring parameters from ./train_logs/model.ckpt-");
    FL_REQUIRE_MSG(p != NULL, "no restore:\n%s", log);
    FL_ASSERT_GE(atoll(p + strlen("Restoring parameters from ./train_logs/model.ckpt-")), s);
    FL_ASSERT_CONTAINS(log, "Saved checkpoint for step 1500");
    free(log);
}
