/*
 * test_psrt_save_faults.c: psrt's robust protocol survives disk faults
 * during a save (runtime/psrt/save_robust.c, worker.c): a save that fails
 * on a ps's or on the chief's disk (EIO, ENOSPC) is abandoned, every host
 * drops what it wrote of it, training goes on, the next save succeeds and
 * the final checkpoint restores; a fault that stays ends the chief after
 * --max_failed_saves saves in a row, naming the count and the ps.  Each
 * runs the real faultline binary on a scenario of harness/tests/scenarios/
 * whose fault is pinned to the chief's save.begin of one step (a sync
 * point), then checks the run's database.
 */
#include "harness/tests/fl_test.h"

#include <unistd.h>

static void require_setup(void)
{
    fl_test_need_root();
    if (access(fl_test_bin("psrt"), X_OK) != 0)
        FL_SKIP("build/bin/psrt is not built");
}

/* disk: {host: ps1, call: write, errno: EIO} from save.begin of step 60
 * for 500ms: that save is abandoned (the chief went on, exit 0), the next
 * ones succeed, the final checkpoint restores bit-exactly from both
 * copies (the scenario's checks). */
FL_TEST_ROOT_T(psrt_save_faults, ps_eio_save_abandoned, 60)
{
    require_setup();
    fl_test_scenario_passes("psrt-save-eio.yaml");
    FL_ASSERT_EQ(fl_test_scenario_db_int("SELECT count(*) FROM events WHERE kind='save.failed' "
                                         "AND attrs LIKE 'step=60 on=ps:1 %'"),
                 1);
    FL_ASSERT_EQ(fl_test_scenario_db_int("SELECT count(*) FROM events WHERE kind='save.done' "
                                         "AND attrs LIKE 'step=80 %'"),
                 1);
}

/* The same with ENOSPC (a full disk). */
FL_TEST_ROOT_T(psrt_save_faults, ps_enospc_save_abandoned, 60)
{
    require_setup();
    fl_test_scenario_passes("psrt-save-enospc.yaml");
    FL_ASSERT_EQ(fl_test_scenario_db_int("SELECT count(*) FROM events WHERE kind='save.failed' "
                                         "AND attrs LIKE 'step=60 on=ps:1 %No space left%'"),
                 1);
}

/* EIO on ps1 for good from step 40: the chief exits 1 at the third failed
 * save in a row (step 80), naming the count and the ps; step 20, the last
 * reported, is intact on every host. */
FL_TEST_ROOT_T(psrt_save_faults, ps_eio_stays_ends_chief, 60)
{
    require_setup();
    fl_test_scenario_passes("psrt-save-eio-stays.yaml");
    FL_ASSERT_EQ(fl_test_scenario_db_int("SELECT count(*) FROM events WHERE kind='save.failed' "
                                         "AND attrs LIKE 'step=80 on=ps:1 %'"),
                 1);
    FL_ASSERT_EQ(fl_test_scenario_db_int("SELECT exit_code FROM processes WHERE job='chief'"), 1);
}

/* EIO on the chief's own disk from save.begin of step 60 for 500ms: its
 * copy fails, the ps copies already written are dropped, training goes on. */
FL_TEST_ROOT_T(psrt_save_faults, chief_eio_save_abandoned, 60)
{
    require_setup();
    fl_test_scenario_passes("psrt-save-chief-eio.yaml");
    FL_ASSERT_EQ(fl_test_scenario_db_int("SELECT count(*) FROM events WHERE kind='save.failed' "
                                         "AND attrs LIKE 'step=60 on=chief %'"),
                 1);
    FL_ASSERT_EQ(fl_test_scenario_db_int("SELECT count(*) FROM events WHERE kind='save.done' "
                                         "AND attrs LIKE 'step=80 %'"),
                 1);
}
