/*
 * test_faults_review.c: integration tests pinning down fixes from a
 * conformance review of the fault catalog (scenarios/README.md, "Kinds"):
 * each runs the real faultline binary on a scenario of harness/tests/scenarios/
 * with real hosts, and checks in the run's database what the scenario cannot
 * say about itself (when each generation of a task ran).
 */
#include "harness/tests/fl_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static void require_setup(void)
{
    fl_test_need_root();
    if (access(fl_test_bin("fl-probe"), X_OK) != 0)
        FL_SKIP("build/bin/fl-probe is not built");
}

/* "for: starts the killed tasks again": a task still shutting down when the
 * kill heals is relaunched once it has exited, never beside itself. */
FL_TEST_ROOT_T(faults, kill_for_relaunches_after_exit, 60)
{
    require_setup();
    fl_test_scenario_passes("relaunch-slow-exit.yaml");
    FL_ASSERT_EQ(fl_test_scenario_db_int("SELECT count(*) FROM processes WHERE job='node' AND generation=1"), 1);
    FL_ASSERT_EQ(fl_test_scenario_db_int("SELECT exit_code FROM processes WHERE job='node' AND generation=0"), 3);
    /* generation 1 started no earlier than generation 0 ended */
    FL_ASSERT_EQ(fl_test_scenario_db_int("SELECT count(*) FROM processes g0, processes g1 WHERE g0.job='node' "
                        "AND g1.job='node' AND g0.generation=0 AND g1.generation=1 "
                        "AND g1.started_ms < g0.ended_ms"), 0);
}

/* "replace: a new machine": its /tmp is as empty as its disk; a restart
 * (a reboot of the same machine) keeps both. */
FL_TEST_ROOT_T(faults, replace_empties_tmp_restart_keeps_it, 60)
{
    require_setup();
    fl_test_scenario_passes("replace-tmp.yaml");
    FL_ASSERT_EQ(fl_test_scenario_db_int("SELECT count(*) FROM processes WHERE job='node' AND generation=1"), 2);
}

/* "kill: sends signal": with SIGSTOP the task is stopped, and the end of
 * the run continues it like a paused task, so SIGTERM (not SIGKILL after
 * the grace) ends it. */
FL_TEST_ROOT_T(faults, kill_sigstop_task_gets_sigterm_at_end, 60)
{
    require_setup();
    fl_test_scenario_passes("kill-sigstop.yaml");
    FL_ASSERT_EQ(fl_test_scenario_db_int("SELECT signal FROM processes WHERE job='node'"), 15);
    FL_ASSERT(fl_test_scenario_db_int("SELECT duration_ms FROM runs") < 20000);
}

/* A kill with for: and a restart of the same host: the restart starts the
 * task again, and the kill's heal then finds it started already. */
FL_TEST_ROOT_T(faults, kill_for_heal_after_restart_starts_no_copy, 60)
{
    require_setup();
    fl_test_scenario_passes("kill-for-then-restart.yaml");
    FL_ASSERT_EQ(fl_test_scenario_db_int("SELECT count(*) FROM processes WHERE job='node' AND generation=1"), 1);
    FL_ASSERT_EQ(fl_test_scenario_db_int("SELECT count(*) FROM processes WHERE job='node' AND generation>1"), 0);
}

/* A kill's for: that ends while the host is down from a longer restart:
 * the task is started when the host is back (it was never started again
 * before: the heal found the host down and dropped the pending start). */
FL_TEST_ROOT_T(faults, kill_for_heal_while_host_down_starts_on_up, 60)
{
    require_setup();
    fl_test_scenario_passes("kill-for-heals-while-host-down.yaml");
    FL_ASSERT_EQ(fl_test_scenario_db_int("SELECT count(*) FROM processes WHERE job='node' AND generation=1"), 1);
    FL_ASSERT_EQ(fl_test_scenario_db_int("SELECT count(*) FROM processes WHERE job='node' AND generation>1"), 0);
}

/* Found by `faultline soak` (scenarios/soak/psrt-robust-relaunch.yaml): a
 * second ps lost while the robust chief restores the first one's variables
 * made the chief give up ("recovering from a lost ps failed"); it recovers
 * again now.  The kill of ps:1 is pinned to the chief's restore.begin. */
FL_TEST_ROOT_T(faults, psrt_second_ps_lost_in_restore, 60)
{
    require_setup();
    if (access(fl_test_bin("psrt"), X_OK) != 0)
        FL_SKIP("build/bin/psrt is not built");
    fl_test_scenario_passes("psrt-ps-lost-during-recovery.yaml");
    FL_ASSERT_EQ(fl_test_scenario_db_int("SELECT count(*) FROM processes WHERE job='ps' AND generation=1"), 2);
}

/* Found by `faultline soak`: a relaunched robust chief gave up when a ps
 * went away while it restored ("preparing the model (restore or init)
 * failed"); it starts again now.  The kill of ps:0 is pinned to the new
 * chief's restore.begin. */
FL_TEST_ROOT_T(faults, psrt_ps_lost_in_chief_start, 60)
{
    require_setup();
    if (access(fl_test_bin("psrt"), X_OK) != 0)
        FL_SKIP("build/bin/psrt is not built");
    fl_test_scenario_passes("psrt-ps-lost-during-chief-start.yaml");
    FL_ASSERT_EQ(fl_test_scenario_db_int("SELECT count(*) FROM processes WHERE job='chief' AND generation=1"), 1);
    FL_ASSERT_EQ(fl_test_scenario_db_int("SELECT count(*) FROM processes WHERE job='ps' AND generation=1"), 1);
}

/* Found while soaking psrt (a probe pinned at the final save): a ps lost
 * while the robust chief saved the final checkpoint made it exit 1
 * ("saving the final checkpoint failed"); it recovers, trains again to max_steps and saves now.  The kill of ps:1
 * is pinned to the chief's save.begin at step 200 (max_steps). */
FL_TEST_ROOT_T(faults, psrt_ps_lost_in_final_save, 60)
{
    require_setup();
    if (access(fl_test_bin("psrt"), X_OK) != 0)
        FL_SKIP("build/bin/psrt is not built");
    fl_test_scenario_passes("psrt-ps-lost-during-final-save.yaml");
    FL_ASSERT_EQ(fl_test_scenario_db_int("SELECT count(*) FROM processes WHERE job='ps' AND generation=1"), 1);
    FL_ASSERT_EQ(fl_test_scenario_db_int("SELECT count(*) FROM events WHERE kind='save.done' AND attrs LIKE '%step=200%'"), 1);
}

/* Found while soaking psrt (pinned by hand): a save whose commit reached
 * ps:0 but not ps:1 (ps:1 killed at its save.shard_written) left step 100
 * committed on ps:0 only; when the chief's disk was then lost, the new
 * chief picked that unreported step and failed ("has no surviving copy").
 * It restores the newest step every ps holds (80, the last reported). */
FL_TEST_ROOT_T(faults, psrt_chief_lost_after_bad_commit, 60)
{
    require_setup();
    if (access(fl_test_bin("psrt"), X_OK) != 0)
        FL_SKIP("build/bin/psrt is not built");
    fl_test_scenario_passes("psrt-chief-lost-after-failed-commit.yaml");
    FL_ASSERT_EQ(fl_test_scenario_db_int("SELECT count(*) FROM processes WHERE job='chief' AND generation=1"), 1);
    FL_ASSERT_EQ(fl_test_scenario_db_int("SELECT count(*) FROM events WHERE kind='restore.done' AND attrs LIKE 'step=80 %'"), 2);
}

/* Found while soaking psrt (pinned by hand): with --max_to_keep=1, a ps
 * committing an unreported save (its peer killed in the commit) deleted its
 * copy of the last reported checkpoint; the chief's host lost next, that
 * checkpoint's shard had no copy left.  A ps keeps the last reported
 * checkpoint until a newer one is reported. */
FL_TEST_ROOT_T(faults, psrt_chief_lost_keep_one, 60)
{
    require_setup();
    if (access(fl_test_bin("psrt"), X_OK) != 0)
        FL_SKIP("build/bin/psrt is not built");
    fl_test_scenario_passes("psrt-chief-lost-keep-one.yaml");
    FL_ASSERT_EQ(fl_test_scenario_db_int("SELECT count(*) FROM processes WHERE job='chief' AND generation=1"), 1);
    FL_ASSERT_EQ(fl_test_scenario_db_int("SELECT count(*) FROM events WHERE kind='restore.done' AND attrs LIKE 'step=80 %'"), 1);
}

/* Found while soaking psrt (pinned by hand): a robust chief that restored
 * from the ps tasks' copies alone (its host replaced after the final
 * save) left every shard on one host and no checkpoint on its disk; it
 * saves the restored checkpoint again now. */
FL_TEST_ROOT_T(faults, psrt_chief_replaced_at_end, 60)
{
    require_setup();
    if (access(fl_test_bin("psrt"), X_OK) != 0)
        FL_SKIP("build/bin/psrt is not built");
    fl_test_scenario_passes("psrt-chief-replaced-at-end.yaml");
    FL_ASSERT_EQ(fl_test_scenario_db_int("SELECT count(*) FROM processes WHERE job='chief' AND generation=1"), 1);
    FL_ASSERT_EQ(fl_test_scenario_db_int("SELECT count(*) FROM events WHERE kind='save.done' AND attrs LIKE 'step=200 %'"), 2);
}

/* scenarios/faults/: one scenario per fault kind, each measuring its own
 * effect (a slow fsync, a short write, a corrupt copy restored past, a
 * drifting clock, a delayed link); every one must pass as shipped. */
FL_TEST_ROOT_T(faults, catalog_scenarios_pass, 180)
{
    require_setup();
    if (access(fl_test_bin("psrt"), X_OK) != 0)
        FL_SKIP("build/bin/psrt is not built");
    char *out;
    int rc = fl_test_sh(&out, "%s run -q --out %s/o --db %s/fl.db %s/scenarios/faults 2>&1",
                        fl_test_bin("faultline"), fl_test_dir(), fl_test_dir(), fl_test_root());
    FL_ASSERT_MSG(rc == 0, "faultline run scenarios/faults exited %d:\n%s", rc, out);
    free(out);
    FL_ASSERT(fl_test_scenario_db_int("SELECT count(*) FROM runs WHERE verdict='pass'") >= 5);
}
