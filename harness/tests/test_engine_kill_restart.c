/*
 * test_engine_kill_restart.c: the kill, restart and replace faults as the
 * fault catalog (scenarios/README.md, "Kinds") describes them, applied and
 * healed by the engine's scheduler (harness/engine/schedule.c): a kill's
 * for: relaunches a task once it has exited, also after a restart or while
 * its host is down, SIGSTOP ends like a pause, replace empties /tmp and
 * restart keeps it.  Each runs the real faultline binary on a scenario of
 * harness/tests/scenarios/ with real hosts, and checks in the run's database
 * when each generation of a task ran.
 */
#include "harness/tests/fl_test.h"

#include <unistd.h>

static void require_setup(void)
{
    fl_test_need_root();
    if (access(fl_test_bin("fl-probe"), X_OK) != 0)
        FL_SKIP("build/bin/fl-probe is not built");
}

/* "for: starts the killed tasks again": a task still shutting down when the
 * kill heals is relaunched once it has exited, never beside itself. */
FL_TEST_ROOT_T(engine_kill_restart, kill_for_relaunches_after_exit, 60)
{
    require_setup();
    fl_test_scenario_passes("relaunch-slow-exit.yaml");
    FL_ASSERT_EQ(
        fl_test_scenario_db_int("SELECT count(*) FROM processes WHERE job='node' AND generation=1"),
        1);
    FL_ASSERT_EQ(fl_test_scenario_db_int(
                     "SELECT exit_code FROM processes WHERE job='node' AND generation=0"),
                 3);
    /* generation 1 started no earlier than generation 0 ended */
    FL_ASSERT_EQ(fl_test_scenario_db_int(
                     "SELECT count(*) FROM processes g0, processes g1 WHERE g0.job='node' "
                     "AND g1.job='node' AND g0.generation=0 AND g1.generation=1 "
                     "AND g1.started_ms < g0.ended_ms"),
                 0);
}

/* "replace: a new machine": its /tmp is as empty as its disk; a restart
 * (a reboot of the same machine) keeps both. */
FL_TEST_ROOT_T(engine_kill_restart, replace_empties_tmp_restart_keeps_it, 60)
{
    require_setup();
    fl_test_scenario_passes("replace-tmp.yaml");
    FL_ASSERT_EQ(
        fl_test_scenario_db_int("SELECT count(*) FROM processes WHERE job='node' AND generation=1"),
        2);
}

/* "kill: sends signal": with SIGSTOP the task is stopped, and the end of
 * the run continues it like a paused task, so SIGTERM (not SIGKILL after
 * the grace) ends it. */
FL_TEST_ROOT_T(engine_kill_restart, kill_sigstop_task_gets_sigterm_at_end, 60)
{
    require_setup();
    fl_test_scenario_passes("kill-sigstop.yaml");
    FL_ASSERT_EQ(fl_test_scenario_db_int("SELECT signal FROM processes WHERE job='node'"), 15);
    FL_ASSERT(fl_test_scenario_db_int("SELECT duration_ms FROM runs") < 20000);
}

/* A kill with for: and a restart of the same host: the restart starts the
 * task again, and the kill's heal then finds it started already. */
FL_TEST_ROOT_T(engine_kill_restart, kill_for_heal_after_restart_starts_no_copy, 60)
{
    require_setup();
    fl_test_scenario_passes("kill-for-then-restart.yaml");
    FL_ASSERT_EQ(
        fl_test_scenario_db_int("SELECT count(*) FROM processes WHERE job='node' AND generation=1"),
        1);
    FL_ASSERT_EQ(
        fl_test_scenario_db_int("SELECT count(*) FROM processes WHERE job='node' AND generation>1"),
        0);
}

/* A kill's for: that ends while the host is down from a longer restart:
 * the task is started when the host is back (it was never started again
 * before: the heal found the host down and dropped the pending start). */
FL_TEST_ROOT_T(engine_kill_restart, kill_for_heal_while_host_down_starts_on_up, 60)
{
    require_setup();
    fl_test_scenario_passes("kill-for-heals-while-host-down.yaml");
    FL_ASSERT_EQ(
        fl_test_scenario_db_int("SELECT count(*) FROM processes WHERE job='node' AND generation=1"),
        1);
    FL_ASSERT_EQ(
        fl_test_scenario_db_int("SELECT count(*) FROM processes WHERE job='node' AND generation>1"),
        0);
}
