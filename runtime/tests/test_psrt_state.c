/*
 * test_psrt_state.c: the kept checkpoints (the chief's and each ps's state
 * file): a commit keeps exactly max_to_keep (and the one to keep too), a
 * failed commit deletes nothing, a sweep removes only unlisted older ones.
 */
#include "harness/tests/fl_test.h"
#include "runtime/ckpt/state.h"
#include "runtime/tests/test_psrt_fixture.h"

#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>
#ifdef FIU_ENABLE
#include <fiu-control.h>
#include <fiu.h>
#endif

static void touch_ckpt(const char *dir, const char *name)
{
    char p[1024];
    snprintf(p, sizeof p, "%s/%s.index", dir, name);
    FILE *f = fopen(p, "w");
    if (f)
        fclose(f);
    snprintf(p, sizeof p, "%s/%s.data-00000-of-00001", dir, name);
    f = fopen(p, "w");
    if (f)
        fclose(f);
}

static bool ckpt_exists(const char *dir, const char *name)
{
    char p[1024];
    struct stat sb;
    snprintf(p, sizeof p, "%s/%s.index", dir, name);
    return stat(p, &sb) == 0;
}

/* Committing a name the state lists already counts it once: nothing else
 * is deleted (it used to drop one checkpoint too many); a new name past
 * max_to_keep deletes exactly the oldest. */
FL_TEST(psrt_state, commit_keeps_exactly_max_to_keep)
{
    char dir[512];
    snprintf(dir, sizeof dir, "%s/keep", fl_test_dir());
    FL_REQUIRE_EQ(mkdir(dir, 0755), 0);
    struct psrt_err e = {0};
    static const char *const names[] = {"model.ckpt-1", "model.ckpt-2", "model.ckpt-3"};
    for (int i = 0; i < 3; i++) {
        touch_ckpt(dir, names[i]);
        FL_REQUIRE_MSG(psrt_state_commit(dir, names[i], 3, 0, NULL, &e) == 0, "%s", e.msg);
    }
    /* again, the newest: all three stay */
    FL_REQUIRE_MSG(psrt_state_commit(dir, "model.ckpt-3", 3, CKPT_SYNC, NULL, &e) == 0, "%s",
                   e.msg);
    for (int i = 0; i < 3; i++)
        FL_ASSERT_MSG(ckpt_exists(dir, names[i]), "%s deleted", names[i]);
    struct ckpt_state st;
    struct ckpt_err ce = {0};
    FL_REQUIRE_EQ(ckpt_state_read(dir, &st, &ce), 0);
    FL_ASSERT_EQ(st.n_all, 3);
    FL_ASSERT_STREQ(st.model_checkpoint_path, "model.ckpt-3");
    ckpt_state_free(&st);
    /* a fourth: the oldest goes, files and entry */
    touch_ckpt(dir, "model.ckpt-4");
    FL_REQUIRE_MSG(psrt_state_commit(dir, "model.ckpt-4", 3, 0, NULL, &e) == 0, "%s", e.msg);
    FL_ASSERT(!ckpt_exists(dir, "model.ckpt-1"));
    FL_ASSERT(ckpt_exists(dir, "model.ckpt-2"));
    FL_REQUIRE_EQ(ckpt_state_read(dir, &st, &ce), 0);
    FL_REQUIRE_EQ(st.n_all, 3);
    FL_ASSERT_STREQ(st.all_model_checkpoint_paths[0], "model.ckpt-2");
    FL_ASSERT_STREQ(st.all_model_checkpoint_paths[2], "model.ckpt-4");
    ckpt_state_free(&st);
    /* re-committing an older listed one moves it last, deletes nothing */
    FL_REQUIRE_MSG(psrt_state_commit(dir, "model.ckpt-2", 3, 0, NULL, &e) == 0, "%s", e.msg);
    FL_ASSERT(ckpt_exists(dir, "model.ckpt-2") && ckpt_exists(dir, "model.ckpt-3") &&
              ckpt_exists(dir, "model.ckpt-4"));
    FL_REQUIRE_EQ(ckpt_state_read(dir, &st, &ce), 0);
    FL_ASSERT_EQ(st.n_all, 3);
    FL_ASSERT_STREQ(st.model_checkpoint_path, "model.ckpt-2");
    ckpt_state_free(&st);
}

/* psrt_state_commit_keep: the checkpoint to keep too (a ps's copy of the
 * chief's last reported save) stays, beyond max_to_keep; once another is
 * named, it goes as usual. */
FL_TEST(psrt_state, commit_keep_too_survives_max_to_keep)
{
    char dir[512];
    snprintf(dir, sizeof dir, "%s/keeptoo", fl_test_dir());
    FL_REQUIRE_EQ(mkdir(dir, 0755), 0);
    struct psrt_err e = {0};
    touch_ckpt(dir, "model.ckpt-80");
    FL_REQUIRE_MSG(psrt_state_commit(dir, "model.ckpt-80", 1, 0, NULL, &e) == 0, "%s", e.msg);
    touch_ckpt(dir, "model.ckpt-100");
    FL_REQUIRE_MSG(psrt_state_commit_keep(dir, "model.ckpt-100", 1, "model.ckpt-80", 0, NULL, &e) ==
                       0,
                   "%s", e.msg);
    FL_ASSERT(ckpt_exists(dir, "model.ckpt-80") && ckpt_exists(dir, "model.ckpt-100"));
    struct ckpt_state st;
    struct ckpt_err ce = {0};
    FL_REQUIRE_EQ(ckpt_state_read(dir, &st, &ce), 0);
    FL_ASSERT_EQ(st.n_all, 2);
    FL_ASSERT_STREQ(st.model_checkpoint_path, "model.ckpt-100");
    ckpt_state_free(&st);
    /* the next save, 100 reported: 80 goes, 100 stays */
    touch_ckpt(dir, "model.ckpt-120");
    FL_REQUIRE_MSG(
        psrt_state_commit_keep(dir, "model.ckpt-120", 1, "model.ckpt-100", 0, NULL, &e) == 0, "%s",
        e.msg);
    FL_ASSERT(!ckpt_exists(dir, "model.ckpt-80"));
    FL_ASSERT(ckpt_exists(dir, "model.ckpt-100") && ckpt_exists(dir, "model.ckpt-120"));
    FL_REQUIRE_EQ(ckpt_state_read(dir, &st, &ce), 0);
    FL_ASSERT_EQ(st.n_all, 2);
    ckpt_state_free(&st);
}

/* A state write that fails (a full disk) deletes nothing: the old state
 * still names every checkpoint it listed, and they are all still there. */
FL_TEST(psrt_state, failed_commit_deletes_nothing)
{
#ifndef FIU_ENABLE
    FL_SKIP("built without FIU_ENABLE: no fault points");
#else
    char dir[512];
    snprintf(dir, sizeof dir, "%s/keepfail", fl_test_dir());
    FL_REQUIRE_EQ(mkdir(dir, 0755), 0);
    struct psrt_err e = {0};
    static const char *const names[] = {"model.ckpt-1", "model.ckpt-2"};
    for (int i = 0; i < 2; i++) {
        touch_ckpt(dir, names[i]);
        FL_REQUIRE_MSG(psrt_state_commit(dir, names[i], 2, 0, NULL, &e) == 0, "%s", e.msg);
    }
    touch_ckpt(dir, "model.ckpt-3");
    fiu_init(0);
    fiu_enable("test/state", 1, (void *)(intptr_t)ENOSPC, 0);
    FL_ASSERT_EQ(psrt_state_commit(dir, "model.ckpt-3", 2, 0, "test/state", &e), -ENOSPC);
    fiu_disable("test/state");
    FL_ASSERT_CONTAINS(e.msg, "No space left on device");
    for (int i = 0; i < 2; i++)
        FL_ASSERT_MSG(ckpt_exists(dir, names[i]), "%s deleted by a failed commit", names[i]);
    struct ckpt_state st;
    struct ckpt_err ce = {0};
    FL_REQUIRE_EQ(ckpt_state_read(dir, &st, &ce), 0);
    FL_ASSERT_STREQ(st.model_checkpoint_path, "model.ckpt-2");
    ckpt_state_free(&st);
    /* the retry succeeds and deletes the oldest then */
    FL_REQUIRE_MSG(psrt_state_commit(dir, "model.ckpt-3", 2, 0, "test/state", &e) == 0, "%s",
                   e.msg);
    FL_ASSERT(!ckpt_exists(dir, "model.ckpt-1"));
    FL_ASSERT(ckpt_exists(dir, "model.ckpt-2") && ckpt_exists(dir, "model.ckpt-3"));
#endif
}

/* A ps's own directory swept after a commit: the files of checkpoints below
 * the committed step that its state does not list go (a failed save's copy,
 * a killed write's temporary file); listed ones, newer ones and anything
 * not named model.ckpt-<step>.* stay. */
FL_TEST(psrt_state, sweep_removes_only_unlisted_older_checkpoints)
{
    char dir[512];
    snprintf(dir, sizeof dir, "%s/sweep", fl_test_dir());
    FL_REQUIRE_EQ(mkdir(dir, 0755), 0);
    struct psrt_err e = {0};
    FL_ASSERT_EQ(psrt_state_sweep(dir, 100), 0); /* no state: nothing is known unlisted */
    touch_ckpt(dir, "model.ckpt-10");
    touch_ckpt(dir, "model.ckpt-20");
    FL_REQUIRE_MSG(psrt_state_commit(dir, "model.ckpt-20", 5, 0, NULL, &e) == 0, "%s", e.msg);
    touch_ckpt(dir, "model.ckpt-30");
    const char *others[] = {"model.ckpt-15.data-00000-of-00001.tempstate123",
                            "model.ckpt-abc.index", "model.ckpt-5", "notes.txt"};
    for (int i = 0; i < 4; i++) {
        char p[1024];
        snprintf(p, sizeof p, "%s/%s", dir, others[i]);
        FILE *f = fopen(p, "w");
        FL_REQUIRE(f != NULL);
        fclose(f);
    }
    FL_ASSERT_EQ(psrt_state_sweep(dir, 30), 3); /* 10's index and data, 15's temporary file */
    FL_ASSERT(!ckpt_exists(dir, "model.ckpt-10"));
    FL_ASSERT(ckpt_exists(dir, "model.ckpt-20") && ckpt_exists(dir, "model.ckpt-30"));
    for (int i = 0; i < 4; i++) {
        char p[1024];
        snprintf(p, sizeof p, "%s/%s", dir, others[i]);
        FL_ASSERT_MSG(access(p, F_OK) == (i == 0 ? -1 : 0), "%s", others[i]);
    }
}
