/*
 * test_psrt_lost_tasks.c: robust psrt recovers when a ps or the chief is lost
 * at a bad moment (during a restore, the chief's start, the final save, a
 * commit reaching only some ps; with --max_to_keep=1; the chief's host
 * replaced at the end), each found by `faultline soak` or while soaking and
 * pinned to an event.  Each runs the real faultline binary on a scenario of
 * harness/tests/scenarios/ with real hosts, and checks the run's database.
 */
#include "harness/tests/fl_test.h"

#include <unistd.h>

static void require_setup(void)
{
    fl_test_need_root();
    if (access(fl_test_bin("fl-probe"), X_OK) != 0)
        FL_SKIP("build/bin/fl-probe is not built");
}

/* Found by `faultline soak` (scenarios/soak/psrt-robust-relaunch.yaml): a
 * second ps lost while the robust chief restores the first one's variables
 * made the chief give up ("recovering from a lost ps failed"); it recovers
 * again now.  The kill of ps:1 is pinned to the chief's restore.begin. */
FL_TEST_ROOT_T(psrt_lost_tasks, psrt_second_ps_lost_in_restore, 60)
{
    require_setup();
    if (access(fl_test_bin("psrt"), X_OK) != 0)
        FL_SKIP("build/bin/psrt is not built");
    fl_test_scenario_passes("psrt-ps-lost-during-recovery.yaml");
    FL_ASSERT_EQ(
        fl_test_scenario_db_int("SELECT count(*) FROM processes WHERE job='ps' AND generation=1"),
        2);
}

/* Found by `faultline soak`: a relaunched robust chief gave up when a ps
 * went away while it restored ("preparing the model (restore or init)
 * failed"); it starts again now.  The kill of ps:0 is pinned to the new
 * chief's restore.begin. */
FL_TEST_ROOT_T(psrt_lost_tasks, psrt_ps_lost_in_chief_start, 60)
{
    require_setup();
    if (access(fl_test_bin("psrt"), X_OK) != 0)
        FL_SKIP("build/bin/psrt is not built");
    fl_test_scenario_passes("psrt-ps-lost-during-chief-start.yaml");
    FL_ASSERT_EQ(fl_test_scenario_db_int(
                     "SELECT count(*) FROM processes WHERE job='chief' AND generation=1"),
                 1);
    FL_ASSERT_EQ(
        fl_test_scenario_db_int("SELECT count(*) FROM processes WHERE job='ps' AND generation=1"),
        1);
}

/* Found while soaking psrt (a probe pinned at the final save): a ps lost
 * while the robust chief saved the final checkpoint made it exit 1
 * ("saving the final checkpoint failed"); it recovers, trains again to max_steps and saves now. The
 * kill of ps:1 is pinned to the chief's save.begin at step 200 (max_steps). */
FL_TEST_ROOT_T(psrt_lost_tasks, psrt_ps_lost_in_final_save, 60)
{
    require_setup();
    if (access(fl_test_bin("psrt"), X_OK) != 0)
        FL_SKIP("build/bin/psrt is not built");
    fl_test_scenario_passes("psrt-ps-lost-during-final-save.yaml");
    FL_ASSERT_EQ(
        fl_test_scenario_db_int("SELECT count(*) FROM processes WHERE job='ps' AND generation=1"),
        1);
    FL_ASSERT_EQ(
        fl_test_scenario_db_int(
            "SELECT count(*) FROM events WHERE kind='save.done' AND attrs LIKE '%step=200%'"),
        1);
}

/* Found while soaking psrt (pinned by hand): a save whose commit reached
 * ps:0 but not ps:1 (ps:1 killed at the chief's save.commit.begin) left step 100
 * committed on ps:0 only; when the chief's disk was then lost, the new
 * chief picked that unreported step and failed ("has no surviving copy").
 * It restores the newest step every ps holds (80, the last reported). */
FL_TEST_ROOT_T(psrt_lost_tasks, psrt_chief_lost_after_bad_commit, 60)
{
    require_setup();
    if (access(fl_test_bin("psrt"), X_OK) != 0)
        FL_SKIP("build/bin/psrt is not built");
    fl_test_scenario_passes("psrt-chief-lost-after-failed-commit.yaml");
    /* ps:1 was lost in the commits of step 100, not before: the kill
     * comes at the chief's save.commit.begin (at ps1's save.shard_written
     * it could land before ps:1 had sent its RobustSave reply, under load:
     * the save then failed before any commit, nothing to pass over) */
    FL_ASSERT_EQ(fl_test_scenario_db_int("SELECT count(*) FROM events WHERE kind='save.failed' AND "
                                         "attrs LIKE 'step=100 on=ps:1 %RobustCommit%'"),
                 1);
    FL_ASSERT_EQ(fl_test_scenario_db_int(
                     "SELECT count(*) FROM processes WHERE job='chief' AND generation=1"),
                 1);
    FL_ASSERT_EQ(
        fl_test_scenario_db_int(
            "SELECT count(*) FROM events WHERE kind='restore.done' AND attrs LIKE 'step=80 %'"),
        2);
}

/* Found while soaking psrt (pinned by hand): with --max_to_keep=1, a ps
 * committing an unreported save (its peer killed in the commit) deleted its
 * copy of the last reported checkpoint; the chief's host lost next, that
 * checkpoint's shard had no copy left.  A ps keeps the last reported
 * checkpoint until a newer one is reported. */
FL_TEST_ROOT_T(psrt_lost_tasks, psrt_chief_lost_keep_one, 60)
{
    require_setup();
    if (access(fl_test_bin("psrt"), X_OK) != 0)
        FL_SKIP("build/bin/psrt is not built");
    fl_test_scenario_passes("psrt-chief-lost-keep-one.yaml");
    /* ps:1 was lost in the commits of step 100 (as above) */
    FL_ASSERT_EQ(fl_test_scenario_db_int("SELECT count(*) FROM events WHERE kind='save.failed' AND "
                                         "attrs LIKE 'step=100 on=ps:1 %RobustCommit%'"),
                 1);
    FL_ASSERT_EQ(fl_test_scenario_db_int(
                     "SELECT count(*) FROM processes WHERE job='chief' AND generation=1"),
                 1);
    FL_ASSERT_EQ(
        fl_test_scenario_db_int(
            "SELECT count(*) FROM events WHERE kind='restore.done' AND attrs LIKE 'step=80 %'"),
        1);
}

/* Found while soaking psrt (pinned by hand): a robust chief that restored
 * from the ps tasks' copies alone (its host replaced after the final
 * save) left every shard on one host and no checkpoint on its disk; it
 * saves the restored checkpoint again now. */
FL_TEST_ROOT_T(psrt_lost_tasks, psrt_chief_replaced_at_end, 60)
{
    require_setup();
    if (access(fl_test_bin("psrt"), X_OK) != 0)
        FL_SKIP("build/bin/psrt is not built");
    fl_test_scenario_passes("psrt-chief-replaced-at-end.yaml");
    FL_ASSERT_EQ(fl_test_scenario_db_int(
                     "SELECT count(*) FROM processes WHERE job='chief' AND generation=1"),
                 1);
    FL_ASSERT_EQ(
        fl_test_scenario_db_int(
            "SELECT count(*) FROM events WHERE kind='save.done' AND attrs LIKE 'step=200 %'"),
        2);
}
