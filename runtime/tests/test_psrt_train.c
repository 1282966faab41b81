/*
 * test_psrt_train.c: real psrt clusters on loopback (2 ps + 3 workers,
 * separate processes, a separate working directory = disk per task) train
 * each model to its target loss with the robust protocol, every process
 * exits 0, the checkpoints are where the protocol says, and predictions
 * from the export match the true model.  A ps told by the chief that
 * training is done still answers "done" to a worker that was connected but
 * silent (waiting for the model) before it exits.
 */
#include "runtime/tests/psrt_cluster.h"
#include "runtime/psrt/psrt.h"

#include <math.h>

static double final_loss(const char *log)
{
    const char *p = strstr(log, "final loss ");
    return p ? atof(p + strlen("final loss ")) : NAN;
}

static void train(const char *model, const char *extra, double target)
{
    struct pc c;
    char common[512];
    snprintf(common, sizeof common,
             "--model=%s --checkpoint_protocol=robust --save_checkpoint_steps=100 "
             "--connect_timeout_secs=10 --export_dir=./export %s",
             model, extra);
    pc_init(&c, 2, 3, common);
    pc_start_all(&c, NULL, NULL);
    int r = pc_wait_all(&c, 25);
    char *log = pc_read("w0.log");
    FL_REQUIRE_MSG(r == 0, "chief exited %d:\n%s", r, log);
    double loss = final_loss(log);
    FL_ASSERT_MSG(loss <= target, "%s: final loss %g above target %g:\n%s", model, loss, target,
                  log);
    FL_ASSERT_CONTAINS(log, ": reached)");
    /* the chief's state names the last step; both ps keep their own copy */
    const char *done = strstr(log, "training done at global step ");
    FL_REQUIRE(done != NULL);
    char want[96];
    snprintf(want, sizeof want, "model_checkpoint_path: \"model.ckpt-%lld\"",
             atoll(done + strlen("training done at global step ")));
    char *st = pc_read("w0/train_logs/checkpoint");
    FL_ASSERT_CONTAINS(st, want);
    FL_ASSERT(pc_exists("ps0/train_logs/ps0/checkpoint"));
    FL_ASSERT(pc_exists("ps1/train_logs/ps1/checkpoint"));
    FL_ASSERT(pc_exists("w0/export/1/variables/variables.index"));
    free(st);
    free(log);
}

FL_TEST_CLUSTER_T(psrt_train, linear_2ps_3workers_reaches_target, 40)
{
    train("linear", "--max_steps=300", 1e-3);
    /* the export answers like the true model y = 0.1 x + 0.3 */
    char *out = NULL;
    int r = fl_test_sh(&out, "printf '0\\n1\\n2.5\\n' | %s predict --model %s/w0/export",
                       fl_test_bin("psrt"), fl_test_dir());
    FL_REQUIRE_EQ(r, 0);
    double y[3];
    FL_REQUIRE_EQ(sscanf(out, "%lf %lf %lf", &y[0], &y[1], &y[2]), 3);
    FL_ASSERT_MSG(fabs(y[0] - 0.3) < 0.03 && fabs(y[1] - 0.4) < 0.03 && fabs(y[2] - 0.55) < 0.05,
                  "predictions %g %g %g", y[0], y[1], y[2]);
    free(out);
}

FL_TEST_CLUSTER_T(psrt_train, softmax_2ps_3workers_reaches_target, 40)
{
    train("softmax", "--max_steps=300", 0.5);
}

FL_TEST_CLUSTER_T(psrt_train, sparse_lr_2ps_3workers_reaches_target, 40)
{
    train("sparse_lr", "--max_steps=2000", 0.55);
}

static int count_files(const char *rel_dir, const char *suffix)
{
    char *out = NULL;
    fl_test_sh(&out, "ls %s/%s 2>/dev/null | grep -c '%s$'", fl_test_dir(), rel_dir, suffix);
    int n = out ? atoi(out) : 0;
    free(out);
    return n;
}

FL_TEST_CLUSTER_T(psrt_train, max_to_keep_and_save_secs_are_honoured, 40)
{
    struct pc c;
    pc_init(&c, 2, 2,
            "--model=linear --checkpoint_protocol=robust --save_checkpoint_steps=30 "
            "--max_to_keep=2 --max_steps=300 --step_delay=0.002 --connect_timeout_secs=10");
    pc_start_all(&c, NULL, NULL);
    FL_REQUIRE_EQ(pc_wait_all(&c, 25), 0);
    char *st = pc_read("w0/train_logs/checkpoint");
    FL_ASSERT_CONTAINS(st, "model_checkpoint_path: \"model.ckpt-300\"");
    int listed = 0;
    for (const char *p = st; (p = strstr(p, "all_model_checkpoint_paths")); p++)
        listed++;
    FL_ASSERT_EQ(listed, 2);
    free(st);
    FL_ASSERT_EQ(count_files("w0/train_logs", ".index"), 2);
    FL_ASSERT_EQ(count_files("ps0/train_logs/ps0", ".index"), 2);
    FL_ASSERT_EQ(count_files("ps1/train_logs/ps1", ".index"), 2);

    /* time-based saving: several saves during a run of about a second */
    struct pc d;
    pc_init(&d, 1, 1,
            "--model=linear --checkpoint_protocol=legacy --save_checkpoint_secs=0.2 "
            "--max_steps=150 --step_delay=0.006 --connect_timeout_secs=10");
    pc_start(&d, "ps", 0, "t", NULL);
    pc_start(&d, "worker", 0, "t", NULL);
    FL_REQUIRE_EQ(pc_wait_all(&d, 25), 0);
    char *log = pc_read("t.log");
    int saves = 0;
    for (const char *p = log; (p = strstr(p, "checkpoint saved: ")); p++)
        saves++;
    FL_ASSERT_MSG(saves >= 3, "%d saves:\n%s", saves, log);
    free(log);
}

/* The chief's Shutdown, then a worker that has been connected all along but
 * silent for 1 s (a worker waiting for the model polls every 0.5 s, a loaded
 * machine delays it more): its next call gets the "done" answer, and the ps
 * exits 0 once it has gone.  The ps used to leave after 0.3 s without a
 * request, and such a worker then retried a gone ps for
 * --reconnect_timeout_secs. */
FL_TEST_CLUSTER_T(psrt_train, ps_answers_done_to_a_silent_connected_worker_before_exiting, 30)
{
    struct pc c;
    pc_init(&c, 1, 2, "--model=linear --connect_timeout_secs=10");
    FL_REQUIRE(pc_start(&c, "ps", 0, "ps0", NULL) > 0);
    int port = atoi(strrchr(c.ps_hosts, ':') + 1);
    struct psrt_conn *chief = psrt_conn_new("127.0.0.1", port, "ps task 0");
    struct psrt_conn *idle = psrt_conn_new("127.0.0.1", port, "ps task 0");
    struct psrt_err e = {0};
    struct psrt_buf resp = {0};
    int32_t st = -1;
    FL_REQUIRE_MSG(psrt_conn_connect(chief, 10, &e) == 0, "%s", e.msg);
    FL_REQUIRE_MSG(psrt_conn_connect(idle, 10, &e) == 0, "%s", e.msg);
    /* each names its task in a Ping, as workers do (the ps then waits for
     * no other worker) */
    uint32_t t0 = 0, t1 = 1;
    struct iovec i0 = {&t0, 4}, i1 = {&t1, 4};
    FL_REQUIRE_MSG(psrt_conn_call(chief, PSRT_OP_PING, 0, &i0, 1, 10, &resp, &st, &e) == 0, "%s",
                   e.msg);
    FL_REQUIRE_MSG(psrt_conn_call(chief, PSRT_OP_SHUTDOWN, 0, NULL, 0, 10, &resp, &st, &e) == 0,
                   "%s", e.msg);
    FL_ASSERT_EQ(st, 0);
    psrt_conn_free(chief);
    /* the silence under test, not a wait for something */
    struct timespec ts = {1, 0};
    nanosleep(&ts, NULL);
    int r = psrt_conn_call(idle, PSRT_OP_PING, 0, &i1, 1, 10, &resp, &st, &e);
    FL_ASSERT_MSG(r == 0, "the ps was gone for a worker still connected: %s\n%s", e.msg,
                  pc_read("ps0.log"));
    FL_ASSERT_EQ(st, -ESHUTDOWN);
    psrt_conn_free(idle);
    psrt_buf_free(&resp);
    r = pc_wait(c.ps[0], 10);
    FL_ASSERT_MSG(r == 0, "ps exited %d:\n%s", r, pc_read("ps0.log"));
    c.ps[0] = 0;
}

/* A worker started after the chief has trained to the end and shut the ps
 * down (a slow start on a loaded machine): the ps, which never heard from
 * it, is still there to answer "done", and the worker exits 0 ("cluster
 * already done") instead of failing to reach a ps that had left.  The ps
 * then exits 0 too.  (The ps used to leave once no worker was connected,
 * and psrt_seeds/s001 failed now and then under load this way.) */
FL_TEST_CLUSTER_T(psrt_train, worker_started_after_the_chief_finished_hears_done, 40)
{
    struct pc c;
    pc_init(&c, 1, 2,
            "--model=linear --max_steps=50 --save_checkpoint_secs=0 "
            "--connect_timeout_secs=15");
    FL_REQUIRE(pc_start(&c, "ps", 0, "ps0", NULL) > 0);
    FL_REQUIRE(pc_start(&c, "worker", 0, "w0", NULL) > 0);
    int r = pc_wait(c.w[0], 25);
    c.w[0] = 0;
    FL_REQUIRE_MSG(r == 0, "chief exited %d:\n%s", r, pc_read("w0.log"));
    /* the lateness under test, not a wait for something: 1 s after the
     * chief, whose connection closed as it exited */
    struct timespec ts = {1, 0};
    nanosleep(&ts, NULL);
    FL_REQUIRE(pc_start(&c, "worker", 1, "w1", NULL) > 0);
    r = pc_wait(c.w[1], 20);
    c.w[1] = 0;
    char *log = pc_read("w1.log");
    FL_ASSERT_MSG(r == 0, "late worker exited %d:\n%s\nps0.log:\n%s", r, log, pc_read("ps0.log"));
    FL_ASSERT_CONTAINS(log, "cluster already done");
    free(log);
    r = pc_wait(c.ps[0], 10);
    c.ps[0] = 0;
    FL_ASSERT_MSG(r == 0, "ps exited %d:\n%s", r, pc_read("ps0.log"));
}

/* A worker whose model flags differ from the ps tasks' fails at once, in
 * one line naming the ps, both layouts and the flags to align; it used to
 * train into "malformed Pull reply" errors. */
FL_TEST_CLUSTER_T(psrt_train, worker_with_other_model_flags_than_the_ps_fails_naming_both, 30)
{
    struct pc c;
    pc_init(&c, 1, 1, "--connect_timeout_secs=10 --train_dir=./train_logs --max_steps=5");
    FL_REQUIRE(pc_start(&c, "ps", 0, "ps0", "--model=linear") > 0);
    FL_REQUIRE(pc_start(&c, "worker", 0, "w0", "--model=softmax") > 0);
    int r = pc_wait(c.w[0], 20);
    char *log = pc_read("w0.log");
    FL_ASSERT_MSG(r == 1, "worker exited %d:\n%s", r, log);
    char want[256];
    snprintf(want, sizeof want,
             "InvalidArgumentError: ps task 0 at %s serves model linear over 1 "
             "ps task; this worker has model softmax over 1 ps task: give every task the same "
             "--model, --ps_hosts and model size flags\n",
             c.ps_hosts);
    FL_ASSERT_CONTAINS(log, want);
    FL_ASSERT_EQ(strstr(log, "malformed"), NULL);
    free(log);
    c.w[0] = 0;
    pc_kill_all(&c);
}
