/*
 * test_psrt_save_fail.c: robust saves that fail are abandoned, not fatal
 * (runtime/psrt/save_robust.c, worker.c): every participant drops what the
 * save wrote (psrt_state_drop, the ps's RobustAbort), the chief trains on,
 * the last reported checkpoint stays whole; --max_failed_saves saves in a
 * row end the chief, a save that succeeds resets the count; the final save
 * and the export are tried again for --finish_retry_secs.  Transient faults
 * come from psrt's own fault points with a window (PSRT_FIU=name=errno@N:
 * only the N-th check fails), so each test fails exactly the save it means.
 */
#include "runtime/tests/psrt_cluster.h"
#include "runtime/tests/test_psrt_fixture.h"
#include "runtime/psrt/psrt.h"
#include "runtime/ckpt/bundle.h"
#include "runtime/ckpt/state.h"

#include <dirent.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/statvfs.h>

/* ---- flags -------------------------------------------------------------------------- */

FL_TEST(psrt_save_fail, failed_save_flags_parse_default_and_show_in_help)
{
    struct psrt_flags f;
    char err[256];
    const char *base = "--job_name=worker --ps_hosts=a:1 --worker_hosts=b:2";
    FL_REQUIRE_EQ(parse(base, &f, err), 0);
    FL_ASSERT_EQ(f.max_failed_saves, 3);
    FL_ASSERT(f.finish_retry_secs == 10);
    psrt_flags_free(&f);
    char line[256];
    FL_ASSERT(f.failed_saves_secs == 0);
    snprintf(line, sizeof line,
             "%s --max_failed_saves=0 --finish_retry_secs=2.5 "
             "--failed_saves_secs=30",
             base);
    FL_REQUIRE_EQ(parse(line, &f, err), 0);
    FL_ASSERT_EQ(f.max_failed_saves, 0);
    FL_ASSERT(f.finish_retry_secs == 2.5);
    FL_ASSERT(f.failed_saves_secs == 30);
    psrt_flags_free(&f);
    snprintf(line, sizeof line, "%s --max_failed_saves=-1", base);
    FL_ASSERT_EQ(parse(line, &f, err), -EINVAL);
    FL_ASSERT_STREQ(err, "--max_failed_saves=-1: bad value: expected an integer from 0");
    snprintf(line, sizeof line, "%s --finish_retry_secs=soon", base);
    FL_ASSERT_EQ(parse(line, &f, err), -EINVAL);
    FL_ASSERT_STREQ(err, "--finish_retry_secs=soon: bad value: expected a number of seconds "
                         "from 0 to 1e9");
    char *out = NULL;
    FL_ASSERT_EQ(fl_test_sh(&out, "%s --help", fl_test_bin("psrt")), 0);
    FL_ASSERT_CONTAINS(out, "--max_failed_saves=N");
    FL_ASSERT_CONTAINS(out, "--finish_retry_secs=S");
    FL_ASSERT_CONTAINS(out, "--failed_saves_secs=S");
    FL_ASSERT_CONTAINS(out, "@FROM[-TO]");
    free(out);
}

/* ---- psrt_state_drop ---------------------------------------------------------- */

static void touch(const char *dir, const char *file)
{
    char p[1024];
    snprintf(p, sizeof p, "%s/%s", dir, file);
    FILE *f = fopen(p, "w");
    FL_REQUIRE_MSG(f != NULL, "%s", p);
    fclose(f);
}

static bool there(const char *dir, const char *file)
{
    char p[1024];
    snprintf(p, sizeof p, "%s/%s", dir, file);
    return access(p, F_OK) == 0;
}

/* The state's paths, "a,b,c" (model path last after '|'). */
static char *state_list(const char *dir)
{
    struct ckpt_state st;
    struct ckpt_err ce = {0};
    memset(&st, 0, sizeof st);
    static char out[1024];
    if (ckpt_state_read(dir, &st, &ce))
        return strcpy(out, "(none)");
    out[0] = 0;
    for (size_t i = 0; i < st.n_all; i++)
        snprintf(out + strlen(out), sizeof out - strlen(out), "%s%s", i ? "," : "",
                 st.all_model_checkpoint_paths[i]);
    snprintf(out + strlen(out), sizeof out - strlen(out), "|%s",
             st.model_checkpoint_path ? st.model_checkpoint_path : "");
    ckpt_state_free(&st);
    return out;
}

/* Dropping a listed checkpoint: the state lists the others (the newest
 * left is the model path), its files and temporary files are gone, the
 * files of others (model.ckpt-30 shares 3's digits) and foreign files stay.
 * An unlisted one: only its files go.  The only one listed: no state. */
FL_TEST(psrt_save_fail, drop_unlists_and_deletes_only_that_checkpoint)
{
    char dir[512];
    snprintf(dir, sizeof dir, "%s/drop", fl_test_dir());
    FL_REQUIRE_EQ(mkdir(dir, 0755), 0);
    struct psrt_err e = {0};
    const char *files[] = {"model.ckpt-1.index",
                           "model.ckpt-1.data-00000-of-00001",
                           "model.ckpt-2.index",
                           "model.ckpt-2.data-00000-of-00001",
                           "model.ckpt-3.index",
                           "model.ckpt-3.data-00000-of-00001",
                           "model.ckpt-3.index.tempstate77",
                           "model.ckpt-30.index",
                           "model.ckpt-4.data-00000-of-00001.tempstate9",
                           "notes.txt"};
    for (int i = 0; i < 10; i++)
        touch(dir, files[i]);
    for (int k = 1; k <= 3; k++) {
        char n[32];
        snprintf(n, sizeof n, "model.ckpt-%d", k);
        FL_REQUIRE_MSG(psrt_state_commit(dir, n, 5, 0, NULL, &e) == 0, "%s", e.msg);
    }
    FL_ASSERT_EQ(psrt_state_drop(dir, "model.ckpt-3", CKPT_SYNC, &e), 3);
    FL_ASSERT_STREQ(state_list(dir), "model.ckpt-1,model.ckpt-2|model.ckpt-2");
    FL_ASSERT(!there(dir, "model.ckpt-3.index") && !there(dir, "model.ckpt-3.index.tempstate77") &&
              !there(dir, "model.ckpt-3.data-00000-of-00001"));
    FL_ASSERT(there(dir, "model.ckpt-30.index") && there(dir, "notes.txt") &&
              there(dir, "model.ckpt-2.index") && there(dir, "model.ckpt-1.index"));
    /* not listed (a save that failed before its commit): its files only */
    FL_ASSERT_EQ(psrt_state_drop(dir, "model.ckpt-4", CKPT_SYNC, &e), 1);
    FL_ASSERT_STREQ(state_list(dir), "model.ckpt-1,model.ckpt-2|model.ckpt-2");
    FL_ASSERT_EQ(psrt_state_drop(dir, "model.ckpt-4", CKPT_SYNC, &e), 0);
    /* the last one listed: the state goes with it */
    FL_ASSERT_EQ(psrt_state_drop(dir, "model.ckpt-1", 0, &e), 2);
    FL_ASSERT_EQ(psrt_state_drop(dir, "model.ckpt-2", 0, &e), 2);
    FL_ASSERT_STREQ(state_list(dir), "(none)");
    FL_ASSERT(there(dir, "model.ckpt-30.index") && there(dir, "notes.txt"));
}

/* ---- RobustAbort on a ps, in process --------------------------------------------- */

static int32_t rsave(struct ps_fixture *x, long long step)
{
    struct psrt_buf b = {0};
    char name[32];
    snprintf(name, sizeof name, "model.ckpt-%lld", step);
    psrt_buf_u64(&b, (uint64_t)step);
    psrt_buf_str(&b, name);
    int32_t st = call(x, PSRT_OP_RSAVE, 0, b.p, b.len);
    psrt_buf_free(&b);
    return st;
}

static int32_t rcommit(struct ps_fixture *x, long long step, const char *reported)
{
    struct psrt_buf b = {0};
    char name[32];
    snprintf(name, sizeof name, "model.ckpt-%lld", step);
    psrt_buf_u64(&b, (uint64_t)step);
    psrt_buf_str(&b, name);
    psrt_buf_u32(&b, 1); /* max_to_keep */
    psrt_buf_str(&b, reported);
    int32_t st = call(x, PSRT_OP_RCOMMIT, 0, b.p, b.len);
    psrt_buf_free(&b);
    return st;
}

static int32_t rabort(struct ps_fixture *x, long long step, const char *keep)
{
    struct psrt_buf b = {0};
    char name[32];
    snprintf(name, sizeof name, "model.ckpt-%lld", step);
    psrt_buf_u64(&b, (uint64_t)step);
    psrt_buf_str(&b, name);
    psrt_buf_str(&b, keep);
    int32_t st = call(x, PSRT_OP_RABORT, 0, b.p, b.len);
    psrt_buf_free(&b);
    return st;
}

/* A ps drops the copy of an abandoned save whether it committed it or not
 * (a save failing in another ps's commit), never the chief's last reported
 * checkpoint (keep), and keeps serving saves after. */
FL_TEST(psrt_save_fail, abort_drops_the_copy_committed_or_not_never_keep)
{
    struct ps_fixture x;
    fixture(&x, "linear", PSRT_POOL, 100);
    uint64_t seed = 1;
    FL_REQUIRE_EQ(call(&x, PSRT_OP_INIT, 0, &seed, 8), 0);
    char dir[1200];
    snprintf(dir, sizeof dir, "%s/tl0/ps0", fl_test_dir());
    FL_REQUIRE_EQ(rsave(&x, 10), 0);
    FL_REQUIRE_EQ(rcommit(&x, 10, ""), 0);
    /* committed here, abandoned by the chief (max_to_keep 1: 10 is kept
     * beyond it as the reported one) */
    FL_REQUIRE_EQ(rsave(&x, 20), 0);
    FL_REQUIRE_EQ(rcommit(&x, 20, "model.ckpt-10"), 0);
    FL_ASSERT_STREQ(state_list(dir), "model.ckpt-10,model.ckpt-20|model.ckpt-20");
    FL_ASSERT_EQ(rabort(&x, 20, "model.ckpt-10"), 0);
    FL_ASSERT_STREQ(state_list(dir), "model.ckpt-10|model.ckpt-10");
    FL_ASSERT(!there(dir, "model.ckpt-20.index") &&
              !there(dir, "model.ckpt-20.data-00000-of-00001"));
    FL_ASSERT(there(dir, "model.ckpt-10.index") && there(dir, "model.ckpt-10.data-00000-of-00001"));
    /* written, never committed (the abort waits for the background write) */
    FL_REQUIRE_EQ(rsave(&x, 30), 0);
    FL_ASSERT_EQ(rabort(&x, 30, "model.ckpt-10"), 0);
    FL_ASSERT(!there(dir, "model.ckpt-30.index") &&
              !there(dir, "model.ckpt-30.data-00000-of-00001"));
    /* the reported one itself (saved again after a restore): kept */
    FL_ASSERT_EQ(rabort(&x, 10, "model.ckpt-10"), 0);
    FL_ASSERT(there(dir, "model.ckpt-10.index"));
    FL_ASSERT_STREQ(state_list(dir), "model.ckpt-10|model.ckpt-10");
    /* and the next save commits as usual */
    FL_REQUIRE_EQ(rsave(&x, 40), 0);
    FL_ASSERT_EQ(rcommit(&x, 40, "model.ckpt-10"), 0);
    FL_ASSERT(there(dir, "model.ckpt-40.index"));
    FL_ASSERT_STREQ(state_list(dir), "model.ckpt-10,model.ckpt-40|model.ckpt-40");
    psrt_buf_free(&x.resp);
    psrt_conn_free(x.c);
}

/* ---- whole clusters on loopback ---------------------------------------------------- */

/* How many files of checkpoint step (final or temporary) are in rel. */
static int files_of_step(const char *rel, long long step)
{
    char p[PATH_MAX], pre[64];
    snprintf(p, sizeof p, "%s/%s", fl_test_dir(), rel);
    snprintf(pre, sizeof pre, "model.ckpt-%lld.", step);
    DIR *d = opendir(p);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        n += !strncmp(e->d_name, pre, strlen(pre));
    if (d)
        closedir(d);
    return n;
}

/* The chief's state names step; its copy verifies; every tensor of each
 * ps's copy equals the chief's, byte for byte. */
static void assert_reported_whole(int nps, long long step)
{
    char dir[PATH_MAX], prefix[PATH_MAX], want[64];
    snprintf(dir, sizeof dir, "%s/w0/train_logs", fl_test_dir());
    snprintf(want, sizeof want, "model.ckpt-%lld", step);
    struct ckpt_state st;
    struct ckpt_err ce = {0};
    FL_REQUIRE_EQ(ckpt_state_read(dir, &st, &ce), 0);
    FL_ASSERT_STREQ(st.model_checkpoint_path, want);
    ckpt_state_free(&st);
    snprintf(prefix, sizeof prefix, "%s/%s", dir, want);
    struct ckpt_reader *rd;
    FL_REQUIRE_MSG(ckpt_reader_open(&rd, prefix, &ce) == 0, "%s", ce.msg);
    FL_ASSERT_EQ(ckpt_reader_verify(rd, &ce), 0);
    ckpt_reader_close(rd);
    struct psrt_tl chief;
    struct psrt_err e = {0};
    FL_REQUIRE_MSG(psrt_tl_read_bundle(&chief, prefix, &e) == 0, "%s", e.msg);
    int seen = 0;
    for (int p = 0; p < nps; p++) {
        char pp[PATH_MAX];
        snprintf(pp, sizeof pp, "%s/ps%d/train_logs/ps%d/%s", fl_test_dir(), p, p, want);
        struct psrt_tl mine;
        FL_REQUIRE_MSG(psrt_tl_read_bundle(&mine, pp, &e) == 0, "%s", e.msg);
        for (int i = 0; i < mine.n; i++) {
            const struct psrt_tensor *t = psrt_tl_find(&chief, mine.t[i].name);
            FL_ASSERT_MSG(t && t->len == mine.t[i].len && !memcmp(t->data, mine.t[i].data, t->len),
                          "ps %d's %s differs from the chief's", p, mine.t[i].name);
            seen++;
        }
        psrt_tl_free(&mine);
    }
    FL_ASSERT_EQ(seen, chief.n); /* the copies together hold every tensor */
    psrt_tl_free(&chief);
}

#define FLAGS                                                                 \
    "--model=linear --checkpoint_protocol=robust --save_checkpoint_steps=20 " \
    "--max_steps=100 --connect_timeout_secs=10 "

/* Starts 2 ps and the chief (the only worker: steps are exactly the
 * global steps, saves at 0, 20, 40, 60, 80 and the final one at 100),
 * with PSRT_FIU settings for ps 0, ps 1 and the chief (NULL: none). */
static int run3(const char *flags, const char *fiu0, const char *fiu1, const char *fiuw)
{
    struct pc c;
    pc_init(&c, 2, 1, flags);
    const char *fiu[3] = {fiu0, fiu1, fiuw};
    struct pc_opts o[3];
    char env[3][256];
    for (int i = 0; i < 3; i++) {
        snprintf(env[i], sizeof env[i], "PSRT_FIU=%s", fiu[i] ? fiu[i] : "");
        o[i] = (struct pc_opts){.env = env[i]};
    }
    pc_start_opts(&c, "ps", 0, "ps0", NULL, &o[0]);
    pc_start_opts(&c, "ps", 1, "ps1", NULL, &o[1]);
    pc_start_opts(&c, "worker", 0, "w0", NULL, &o[2]);
    return pc_wait_all(&c, 30);
}

/* ps 1 cannot make its copy of the third save (step 40) durable: the save
 * is abandoned; ps 0's copy and the chief's complete copy of step 40 are
 * dropped; the next saves succeed, the run ends well, and the final
 * checkpoint is whole on all three hosts. */
FL_TEST_CLUSTER_T(psrt_save_fail, robust_failed_save_is_dropped_and_training_goes_on, 40)
{
    int r = run3(FLAGS, NULL, "psrt/save/shard_sync=5@3", NULL);
    char *log = pc_read("w0.log");
    FL_ASSERT_MSG(r == 0, "chief exited %d:\n%s", r, log);
    FL_ASSERT_CONTAINS(log, "save at step 40 failed and was abandoned (1 in a row; "
                            "--max_failed_saves=3): ");
    FL_ASSERT_CONTAINS(log,
                       "fsync ./train_logs/ps1/model.ckpt-40: Input/output error on ps task 1");
    FL_ASSERT_CONTAINS(log, "training goes on, next save at step 60");
    FL_ASSERT_CONTAINS(log, "Saved checkpoint for step 60");
    FL_ASSERT(strstr(log, "Saved checkpoint for step 41:") == NULL); /* not at once again */
    FL_ASSERT_EQ(files_of_step("w0/train_logs", 40), 0);
    FL_ASSERT_EQ(files_of_step("ps0/train_logs/ps0", 40), 0);
    FL_ASSERT_EQ(files_of_step("ps1/train_logs/ps1", 40), 0);
    char *ps0 = pc_read("ps0.log");
    FL_ASSERT_CONTAINS(ps0, "dropped ./train_logs/ps0/model.ckpt-40 (2 files)");
    free(ps0);
    assert_reported_whole(2, 100);
    free(log);
}

/* ps 1's commit fails from the second save on, for good; ps 0 commits
 * each of them.  With --max_failed_saves=2 the chief exits 1 at step 40,
 * saying how many failed in a row and the last error; ps 0 dropped the
 * commits of steps 20 and 40 again, and step 0, the last reported, is
 * whole everywhere. */
FL_TEST_CLUSTER_T(psrt_save_fail, robust_failed_saves_in_a_row_end_the_chief, 40)
{
    int r = run3(FLAGS "--max_failed_saves=2", NULL, "psrt/save/commit=5@2-1000", NULL);
    char *log = pc_read("w0.log");
    FL_ASSERT_EQ(r, 1);
    FL_ASSERT_CONTAINS(log, "save at step 20 failed and was abandoned (1 in a row; "
                            "--max_failed_saves=2)");
    FL_ASSERT_CONTAINS(log, "saving a checkpoint failed: 2 saves in a row failed "
                            "(--max_failed_saves=2); the last, of step 40: ");
    FL_ASSERT_CONTAINS(log, "train_logs/ps1/checkpoint; Input/output error on ps task 1 at");
    char ps0[PATH_MAX];
    snprintf(ps0, sizeof ps0, "%s/ps0/train_logs/ps0", fl_test_dir());
    FL_ASSERT_STREQ(state_list(ps0), "model.ckpt-0|model.ckpt-0");
    for (int s = 20; s <= 40; s += 20) {
        FL_ASSERT_EQ(files_of_step("w0/train_logs", s), 0);
        FL_ASSERT_EQ(files_of_step("ps0/train_logs/ps0", s), 0);
        FL_ASSERT_EQ(files_of_step("ps1/train_logs/ps1", s), 0);
    }
    assert_reported_whole(2, 0);
    free(log);
}

/* --failed_saves_secs: the count alone no longer ends the chief.  ps 1's
 * commit fails from the second save on, for good; with
 * --max_failed_saves=2 but a minute to go, the saves at 40, 60 and 80 are
 * abandoned too (4 in a row), and only the final save, not retried
 * (--finish_retry_secs=0), ends the chief. */
FL_TEST_CLUSTER_T(psrt_save_fail, robust_failed_saves_secs_outlasts_the_count, 40)
{
    int r = run3(FLAGS "--max_failed_saves=2 --failed_saves_secs=60 --finish_retry_secs=0", NULL,
                 "psrt/save/commit=5@2-1000", NULL);
    char *log = pc_read("w0.log");
    FL_ASSERT_EQ(r, 1);
    FL_ASSERT_CONTAINS(log, "save at step 80 failed and was abandoned (4 in a row; "
                            "--max_failed_saves=2)");
    FL_ASSERT_CONTAINS(log, "saving the final checkpoint failed: ");
    FL_ASSERT(strstr(log, "saves in a row failed") == NULL);
    assert_reported_whole(2, 0);
    free(log);
}

/* ...and once the first of the failed saves is old enough, the count ends
 * it: 20 steps of at least 20 ms lie between the saves at 20 and 40, more
 * than --failed_saves_secs=0.2, so the chief exits at step 40 and says over
 * how long they failed. */
FL_TEST_CLUSTER_T(psrt_save_fail, robust_failed_saves_secs_then_count_ends_the_chief, 40)
{
    int r = run3(FLAGS "--max_failed_saves=2 --failed_saves_secs=0.2 --step_delay=0.02", NULL,
                 "psrt/save/commit=5@2-1000", NULL);
    char *log = pc_read("w0.log");
    FL_ASSERT_EQ(r, 1);
    FL_ASSERT_CONTAINS(log, "saving a checkpoint failed: 2 saves in a row failed over ");
    FL_ASSERT_CONTAINS(log, " s (--max_failed_saves=2, --failed_saves_secs=0.2); the last, of "
                            "step 40: ");
    const char *over = strstr(log, "failed over ");
    FL_REQUIRE(over != NULL);
    double secs = strtod(over + strlen("failed over "), NULL);
    FL_ASSERT_MSG(secs >= 0.4, "failed over %.2f s, 20 steps of 20 ms", secs);
    assert_reported_whole(2, 0);
    free(log);
}

/* --max_failed_saves=0: the first failed save ends the chief with the
 * error as it is (as legacy, and as psrt did before it abandoned saves). */
FL_TEST_CLUSTER_T(psrt_save_fail, robust_max_failed_saves_0_fails_at_once, 40)
{
    int r = run3(FLAGS "--max_failed_saves=0", NULL, "psrt/save/shard_write=5@2", NULL);
    char *log = pc_read("w0.log");
    FL_ASSERT_EQ(r, 1);
    FL_ASSERT_CONTAINS(log, "saving a checkpoint failed: UnknownError: "
                            "./train_logs/ps1/model.ckpt-20.data-00000-of-00001; Input/output "
                            "error on ps task 1 at");
    FL_ASSERT(strstr(log, "abandoned") == NULL);
    free(log);
}

/* Two failed saves that are not in a row (ps 1's second, step 20; ps 0's
 * fourth, step 60) with --max_failed_saves=2: the save between resets the
 * count, the run ends well. */
FL_TEST_CLUSTER_T(psrt_save_fail, robust_save_that_succeeds_resets_the_count, 40)
{
    int r = run3(FLAGS "--max_failed_saves=2", "psrt/save/shard_write=28@4",
                 "psrt/save/shard_write=5@2", NULL);
    char *log = pc_read("w0.log");
    FL_ASSERT_MSG(r == 0, "chief exited %d:\n%s", r, log);
    FL_ASSERT_CONTAINS(log, "save at step 20 failed and was abandoned (1 in a row");
    FL_ASSERT_CONTAINS(log, "save at step 60 failed and was abandoned (1 in a row");
    FL_ASSERT_CONTAINS(log, "No space left on device on ps task 0 at");
    assert_reported_whole(2, 100);
    free(log);
}

/* The final save (ps 1's sixth, step 100) and the export (the chief's
 * first) each fail once: both are tried again and the run ends well. */
FL_TEST_CLUSTER_T(psrt_save_fail, robust_final_save_and_export_are_retried, 40)
{
    int r = run3(FLAGS "--export_dir=./exp", NULL, "psrt/save/shard_write=5@6",
                 "psrt/export/write=5@1");
    char *log = pc_read("w0.log");
    FL_ASSERT_MSG(r == 0, "chief exited %d:\n%s", r, log);
    FL_ASSERT_CONTAINS(log, "saving the final checkpoint failed (attempt 1): ");
    FL_ASSERT_CONTAINS(log, "export failed (attempt 1): ");
    FL_ASSERT_CONTAINS(log, "Saved checkpoint for step 100");
    FL_ASSERT_CONTAINS(log, "exported ./exp/1");
    FL_ASSERT(pc_exists("w0/exp/1/variables/variables.index"));
    assert_reported_whole(2, 100);
    free(log);
}

/* A final save that keeps failing: after --finish_retry_secs the chief
 * exits 1 saying how many attempts failed and the last error. */
FL_TEST_CLUSTER_T(psrt_save_fail, robust_final_save_fault_that_stays_fails, 40)
{
    int r = run3(FLAGS "--finish_retry_secs=1", NULL, "psrt/save/shard_write=5@6-1000", NULL);
    char *log = pc_read("w0.log");
    FL_ASSERT_EQ(r, 1);
    FL_ASSERT_CONTAINS(log, "saving the final checkpoint failed: ");
    FL_ASSERT_CONTAINS(log, " attempts in ");
    FL_ASSERT_CONTAINS(log, "(--finish_retry_secs=1); the last: ");
    FL_ASSERT_CONTAINS(log, "model.ckpt-100.data-00000-of-00001; Input/output error on ps task 1");
    assert_reported_whole(2, 80);
    free(log);
}

/* A real full disk on ps 1 (a small tmpfs, in a private mount namespace of
 * this test, filled up by a file): every save fails there with ENOSPC and
 * is abandoned, leaving nothing of it on any disk (no temporary file keeps
 * space); once the file is removed, the next save succeeds and the run
 * ends with a whole final checkpoint. */
FL_TEST_ROOT_T(psrt_save_fail, robust_full_ps_disk_abandons_then_recovers, 60)
{
    if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
        FL_SKIP("needs a private mount namespace (root): %s", strerror(errno));
    const char *ps1 = pc_dir("ps1");
    if (mount("tmpfs", ps1, "tmpfs", 0, "size=256k") < 0)
        FL_SKIP("cannot mount a tmpfs: %s", strerror(errno));
    char filler[PATH_MAX];
    snprintf(filler, sizeof filler, "%s/filler", ps1);
    FILE *f = fopen(filler, "w");
    FL_REQUIRE(f != NULL);
    static char block[4096];
    while (fwrite(block, 1, sizeof block, f) == sizeof block && fflush(f) == 0)
        ;
    fclose(f);
    struct statvfs sv;
    FL_REQUIRE_EQ(statvfs(ps1, &sv), 0);
    FL_REQUIRE_MSG(sv.f_bavail == 0, "%lu blocks still free", (unsigned long)sv.f_bavail);
    struct pc c;
    pc_init(&c, 2, 1, FLAGS "--max_failed_saves=1000 --step_delay=0.01 --max_steps=200");
    pc_start_all(&c, NULL, NULL);
    bool abandoned = pc_wait_for("w0.log", "save at step 20 failed and was abandoned", 20);
    char *log = pc_read("w0.log");
    FL_REQUIRE_MSG(abandoned, "no abandoned save at step 20:\n%s", log);
    free(log);
    /* nothing of the failed saves of steps 0 and 20 stays anywhere */
    for (int s = 0; s <= 20; s += 20) {
        FL_ASSERT_EQ(files_of_step("ps1/train_logs/ps1", s), 0);
        FL_ASSERT_EQ(files_of_step("ps0/train_logs/ps0", s), 0);
        FL_ASSERT_EQ(files_of_step("w0/train_logs", s), 0);
    }
    FL_REQUIRE_EQ(unlink(filler), 0);
    int r = pc_wait_all(&c, 30);
    log = pc_read("w0.log");
    FL_ASSERT_MSG(r == 0, "chief exited %d:\n%s", r, log);
    FL_ASSERT_CONTAINS(log, "No space left on device (write) on ps task 1 at");
    assert_reported_whole(2, 200);
    free(log);
    umount2(ps1, MNT_DETACH);
}

/* Legacy is TensorFlow's: a failed save ends the chief (its saver hook's
 * error), whatever --max_failed_saves says, and the final save is not
 * tried again. */
FL_TEST_CLUSTER_T(psrt_save_fail, legacy_failed_save_still_ends_the_chief, 40)
{
    const char *legacy = "--model=linear --checkpoint_protocol=legacy --sharded_save=false "
                         "--save_checkpoint_steps=20 --max_steps=100 --connect_timeout_secs=10 ";
    int r = run3(legacy, NULL, NULL, "psrt/save/chief_write=5@2");
    char *log = pc_read("w0.log");
    FL_ASSERT_EQ(r, 1);
    FL_ASSERT_CONTAINS(log, "saving a checkpoint failed: ");
    FL_ASSERT(strstr(log, "abandoned") == NULL);
    free(log);
    FL_REQUIRE_EQ(fl_test_sh(NULL, "rm -rf %s/ps0 %s/ps1 %s/w0 %s/w0.log", fl_test_dir(),
                             fl_test_dir(), fl_test_dir(), fl_test_dir()),
                  0);
    char flags[512];
    snprintf(flags, sizeof flags, "%s--finish_retry_secs=30", legacy);
    r = run3(flags, NULL, NULL, "psrt/save/chief_write=5@6");
    log = pc_read("w0.log");
    FL_ASSERT_EQ(r, 1);
    FL_ASSERT_CONTAINS(log, "saving the final checkpoint failed: ");
    FL_ASSERT(strstr(log, "attempt") == NULL);
    free(log);
}
