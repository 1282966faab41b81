/*
 * test_psrt_unsharded.c: legacy --sharded_save=false, TensorFlow's
 * Saver(sharded=False) as the Supervisor of S004's report used it: on
 * separate disks the saves succeed (the whole bundle is written on the
 * chief's disk, no ps disk is touched), and a ps relaunched on its own disk
 * fails to restore with the report's error, because RestoreV2 still runs
 * on each ps against its own disk.
 */
#include "runtime/tests/psrt_cluster.h"

#include <regex.h>

/* Latest step in w0's `checkpoint` state file, or -1. */
static long long saved_step(void)
{
    char *s = pc_read("w0/train_logs/checkpoint");
    const char *p = strstr(s, "model_checkpoint_path: \"model.ckpt-");
    long long v = p ? atoll(p + strlen("model_checkpoint_path: \"model.ckpt-")) : -1;
    free(s);
    return v;
}

FL_TEST_CLUSTER_T(psrt_unsharded, s004_unsharded_saves_on_chief_relaunched_ps_fails, 40)
{
    struct pc c;
    pc_init(&c, 2, 2,
            "--model=linear --checkpoint_protocol=legacy --sharded_save=false "
            "--save_checkpoint_steps=20 --max_steps=100000 --step_delay=0.005 "
            "--connect_timeout_secs=10 --reconnect_timeout_secs=10");
    pc_start_all(&c, NULL, NULL);
    long long s = -1;
    for (int i = 0; i < 2000 && s <= 0; i++) {
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
        s = saved_step();
    }
    FL_REQUIRE_MSG(s > 0, "no checkpoint after step 0:\n%s", pc_read("w0.log"));
    char ix[128];
    snprintf(ix, sizeof ix, "w0/train_logs/model.ckpt-%lld.index", s);
    FL_ASSERT(pc_exists(ix));
    FL_ASSERT(!pc_exists("ps0/train_logs"));
    FL_ASSERT(!pc_exists("ps1/train_logs"));
    /* ps 1 dies and comes back on the same disk */
    kill(c.ps[1], SIGKILL);
    pc_wait(c.ps[1], 5);
    pc_start(&c, "ps", 1, "ps1", NULL);
    int r = pc_wait(c.w[0], 25);
    char *log = pc_read("w0.log");
    FL_ASSERT_EQ(r, 1);
    regex_t rx;
    FL_REQUIRE_EQ(
        regcomp(&rx,
                "InvalidArgumentError: Unsuccessful TensorSliceReader constructor: Failed "
                "to get matching files on \\./train_logs/model\\.ckpt-[0-9]+: Not found: "
                "\\./train_logs",
                REG_EXTENDED | REG_NOSUB),
        0);
    FL_ASSERT_MSG(regexec(&rx, log, 0, NULL, 0) == 0, "no S004 error in:\n%s", log);
    regfree(&rx);
    free(log);
    pc_kill_all(&c);
}

FL_TEST(psrt_unsharded, sharded_save_parses_and_defaults_on)
{
    char *out = NULL;
    int r = fl_test_sh(&out,
                       "%s --job_name=worker --ps_hosts=127.0.0.1:1 --worker_hosts=127.0.0.1:2 "
                       "--sharded_save=maybe 2>&1",
                       fl_test_bin("psrt"));
    FL_ASSERT_EQ(r, 2);
    FL_ASSERT_CONTAINS(out, "--sharded_save=maybe");
    free(out);
    r = fl_test_sh(&out, "%s --help", fl_test_bin("psrt"));
    FL_ASSERT_EQ(r, 0);
    FL_ASSERT_CONTAINS(out, "--sharded_save=true|false");
    free(out);
}
