/*
 * test_faults_disk.c: the disk: fault kind at run time (harness/faults/disk.c),
 * on real hosts: a task of the target sees the errno on the chosen call while
 * the fault is on and success after its heal, a task of another host is
 * untouched, a paused task takes the fault when it runs again, an fsync
 * delay slows the target only, a short write truncates a careless writer,
 * and psrt's own named points fail a save that robust psrt survives.  They
 * run the real faultline binary on scenarios of harness/tests/scenarios/ and
 * read the run's database.
 */
#include "harness/tests/fl_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static void require_setup(void)
{
    fl_test_need_root();
    if (access(fl_test_bin("faultline"), X_OK) != 0)
        FL_SKIP("build/bin/faultline is not built");
    if (access("/usr/lib/fiu/fiu_posix_preload.so", R_OK) != 0)
        FL_SKIP("libfiu's fiu_posix_preload.so is not installed");
}

/* call: write, errno: ENOSPC on host a for 1s: dd started during the fault
 * and the task's shell (started before it) both fail with ENOSPC, succeed
 * after the heal; host b's task never fails and has no preload (the
 * scenario's expectations); the fault is recorded with its detail and heal. */
FL_TEST_ROOT_T(faults_disk, write_enospc_on_target_host_only, 60)
{
    require_setup();
    fl_test_scenario_passes("disk-write.yaml");
    FL_ASSERT_EQ(fl_test_scenario_db_int(
                     "SELECT count(*) FROM faults WHERE kind='disk' AND target='a' "
                     "AND detail='call=write errno=ENOSPC for=1000ms' AND error IS NULL"),
                 1);
    int held =
        fl_test_scenario_db_int("SELECT healed_ms - applied_ms FROM faults WHERE kind='disk'");
    FL_ASSERT_GE(held, 1000);
    FL_ASSERT_LT(held, 1500);
}

/* A disk fault applied while its task is paused (pause-disk.yaml) is taken
 * when the task runs again, and recorded without an error; the next one, to
 * the running task, is taken at once (the late reply read first).  It used
 * to wait 1 s for the frozen process and error "no answer (paused?)". */
FL_TEST_ROOT_T(faults_disk, fault_on_paused_task_taken_when_it_runs, 60)
{
    require_setup();
    if (system("python3 -c '' 2>/dev/null") != 0)
        FL_SKIP("needs python3 for the probe");
    fl_test_scenario_passes("pause-disk.yaml");
    FL_ASSERT_EQ(fl_test_scenario_db_int("SELECT count(*) FROM faults WHERE kind='disk' AND "
                                         "error IS NULL"),
                 2);
    /* the first disk fault came while the pause held */
    FL_ASSERT_EQ(fl_test_scenario_db_int("SELECT count(*) FROM faults d, faults p WHERE "
                                         "d.fault_no=1 AND p.fault_no=0 AND p.kind='pause' AND "
                                         "d.applied_ms >= p.applied_ms AND "
                                         "d.applied_ms < p.healed_ms"),
                 1);
}

/* point: psrt/save/shard_write on the ps host, applied at the chief's first
 * save.begin (a sync point): psrt's robust save fails there with the errno
 * given, and both tasks print psrt's one-line failure (the scenario). */
FL_TEST_ROOT_T(faults_disk, psrt_point_fails_robust_save, 60)
{
    require_setup();
    if (access(fl_test_bin("psrt"), X_OK) != 0)
        FL_SKIP("build/bin/psrt is not built");
    fl_test_scenario_passes("disk-psrt-point.yaml");
    FL_ASSERT_EQ(fl_test_scenario_db_int(
                     "SELECT count(*) FROM faults WHERE kind='disk' AND target='ps0' "
                     "AND detail='point=psrt/save/shard_write errno=ENOSPC' AND error IS NULL "
                     "AND healed_ms IS NULL"),
                 1);
}

static void require_probe(void)
{
    require_setup();
    if (access(fl_test_bin("fl-disk-probe"), X_OK) != 0)
        FL_SKIP("build/bin/fl-disk-probe is not built");
}

/* The average of an io.PHASE event's ms=A, in tenths of a ms. */
static int io_tenths(const char *phase)
{
    char sql[256];
    snprintf(sql, sizeof sql,
             "SELECT CAST(ROUND(CAST(substr(attrs, 4) AS REAL) * 10) AS INTEGER) FROM events "
             "WHERE kind='io.%s' AND host='a'",
             phase);
    return fl_test_scenario_db_int(sql);
}

/* call: fsync, delay: 50ms on host a for 1.5s: each fsync on a takes about
 * 50 ms more while the fault is on, is fast before and after its heal; host
 * b's fsyncs, all along, are never slowed (the scenario's expectations). */
FL_TEST_ROOT_T(faults_disk, fsync_delay_slows_target_host_only, 60)
{
    require_probe();
    fl_test_scenario_passes("disk-slow.yaml");
    int before = io_tenths("before"), during = io_tenths("during"), after = io_tenths("after");
    printf("fsync avg: before %.1f ms, during %.1f ms, after %.1f ms\n", before / 10.0,
           during / 10.0, after / 10.0);
    FL_ASSERT_LT(before, 100);
    FL_ASSERT_GE(during - before, 490); /* the delay, per call */
    FL_ASSERT_LT(during - before, 800);
    FL_ASSERT_LT(after, 100);
    FL_ASSERT_EQ(
        fl_test_scenario_db_int("SELECT count(*) FROM faults WHERE kind='disk' AND target='a' "
                                "AND detail='call=fsync delay=50ms for=1500ms' AND error IS NULL "
                                "AND healed_ms IS NOT NULL"),
        1);
}

/* call: write, short: 1K on host a: one write() of 10000 bytes writes
 * 1024 and the file has 1024 bytes; a loop on short writes gets all 10000
 * in 10 calls; host b, untouched, writes 10000 in one (the scenario). */
FL_TEST_ROOT_T(faults_disk, short_write_truncates_careless_writer, 60)
{
    require_probe();
    fl_test_scenario_passes("disk-short.yaml");
    FL_ASSERT_EQ(
        fl_test_scenario_db_int("SELECT count(*) FROM faults WHERE kind='disk' AND target='a' "
                                "AND detail='call=write short=1024B' AND error IS NULL"),
        1);
}

/* call: write, short: 1000 on psrt's ps and chief from the start (softmax:
 * its checkpoint data is written in 1000-byte pieces, as strace shows):
 * psrt's writers loop on short writes, so the robust saves succeed and the
 * checkpoint verifies, bit-exact with the ps's copy (the scenario). */
FL_TEST_ROOT_T(faults_disk, psrt_saves_survive_short_writes, 90)
{
    require_setup();
    if (access(fl_test_bin("psrt"), X_OK) != 0)
        FL_SKIP("build/bin/psrt is not built");
    fl_test_scenario_passes("disk-short-psrt.yaml");
    FL_ASSERT_EQ(fl_test_scenario_db_int("SELECT count(*) FROM faults WHERE kind='disk' "
                                         "AND detail='call=write short=1000B' AND error IS NULL"),
                 2);
    FL_ASSERT_GE(fl_test_scenario_db_int("SELECT count(*) FROM events WHERE kind='save.done'"), 2);
}
