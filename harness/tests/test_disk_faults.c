/*
 * test_disk_faults.c: the disk: fault kind (scenarios/README.md, "Kinds"):
 * how a disk: mapping loads, and, on real hosts, that a task of the target
 * sees the errno on the chosen call while the fault is on and success after
 * its heal, that a task of another host is untouched, and that psrt's own
 * named points fail a save; and a host's clock_offset applied (libfaketime).
 * The integration tests run the real faultline
 * binary on scenarios of harness/tests/scenarios/ and read the run's database.
 */
#include "harness/faults/clock_offset.h"
#include "harness/scenario/scenario.h"
#include "harness/tests/fl_test.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BASE                                                                   \
    "name: t\n"                                                                \
    "hosts: [ps0, ps1, w0]\n"                                                  \
    "cluster:\n"                                                               \
    "  ps: [ps0, ps1]\n"                                                       \
    "  worker: [w0]\n"                                                         \
    "run:\n"                                                                   \
    "  command: \"sleep 1\"\n"

static struct fl_scenario *load(const char *text)
{
    char err[1024] = "";
    struct fl_scenario *s = NULL;
    int rc = fl_scenario_load_mem("s.yaml", text, strlen(text), &s, err, sizeof err);
    FL_REQUIRE_MSG(rc == 0 && s, "load failed: %s", err);
    return s;
}

FL_TEST(disk_faults, load_call_point_errno_probability)
{
    struct fl_scenario *s = load(BASE "faults:\n"
                                 "  - {at: 1s, disk: {host: ps1, call: write, errno: ENOSPC, probability: 50%}, for: 2s}\n"
                                 "  - {at: 1s, disk: {host: \"ps:0\", point: psrt/save/shard_write}}\n"
                                 "  - {at: 1s, disk: {host: chief, call: posix/io/sync/fsync, errno: 5, probability: 0.25}}\n");
    FL_REQUIRE_EQ(s->n_faults, 3);
    const struct fl_scn_action *a = &s->faults[0].action;
    FL_ASSERT_EQ(a->kind, FL_SCN_ACT_DISK);
    FL_ASSERT_EQ(a->target.kind, FL_SCN_TGT_HOST);
    FL_ASSERT_EQ(a->host, 1);
    FL_ASSERT_STREQ(a->disk.call, "write");
    FL_ASSERT_STREQ(a->disk.point, "posix/io/rw/write");
    FL_ASSERT_EQ(a->disk.err, ENOSPC);
    FL_ASSERT(a->disk.probability > 0.499 && a->disk.probability < 0.501);
    FL_ASSERT_EQ(s->faults[0].for_ms, 2000);
    a = &s->faults[1].action;
    FL_ASSERT_EQ(a->target.kind, FL_SCN_TGT_TASK);
    FL_ASSERT_STREQ(a->disk.call, "");
    FL_ASSERT_STREQ(a->disk.point, "psrt/save/shard_write");
    FL_ASSERT_EQ(a->disk.err, EIO);             /* the default */
    FL_ASSERT(a->disk.probability == 1);
    a = &s->faults[2].action;
    FL_ASSERT_EQ(a->target.task, s->chief_task);
    FL_ASSERT_STREQ(a->disk.call, "fsync");     /* a point name is taken as its call */
    FL_ASSERT_EQ(a->disk.err, 5);
    FL_ASSERT(a->disk.probability > 0.249 && a->disk.probability < 0.251);
    FL_ASSERT_STREQ(fl_scn_action_kind_name(a->kind), "disk");
    FL_ASSERT_STREQ(fl_scn_errno_name(ENOSPC), "ENOSPC");
    fl_scenario_free(s);
}

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
FL_TEST_ROOT_T(disk_faults, write_enospc_on_target_host_only, 60)
{
    require_setup();
    fl_test_scenario_passes("disk-write.yaml");
    FL_ASSERT_EQ(fl_test_scenario_db_int("SELECT count(*) FROM faults WHERE kind='disk' AND target='a' "
                        "AND detail='call=write errno=ENOSPC for=1000ms' AND error IS NULL"), 1);
    int held = fl_test_scenario_db_int("SELECT healed_ms - applied_ms FROM faults WHERE kind='disk'");
    FL_ASSERT_GE(held, 1000);
    FL_ASSERT_LT(held, 1500);
}

/* A disk fault applied while its task is paused (pause-disk.yaml) is taken
 * when the task runs again, and recorded without an error; the next one, to
 * the running task, is taken at once (the late reply read first).  It used
 * to wait 1 s for the frozen process and error "no answer (paused?)". */
FL_TEST_ROOT_T(disk_faults, fault_on_paused_task_taken_when_it_runs, 60)
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
FL_TEST_ROOT_T(disk_faults, psrt_point_fails_robust_save, 60)
{
    require_setup();
    if (access(fl_test_bin("psrt"), X_OK) != 0)
        FL_SKIP("build/bin/psrt is not built");
    fl_test_scenario_passes("disk-psrt-point.yaml");
    FL_ASSERT_EQ(fl_test_scenario_db_int("SELECT count(*) FROM faults WHERE kind='disk' AND target='ps0' "
                        "AND detail='point=psrt/save/shard_write errno=ENOSPC' AND error IS NULL "
                        "AND healed_ms IS NULL"), 1);
}

FL_TEST(disk_faults, load_delay_and_short)
{
    struct fl_scenario *s = load(BASE "faults:\n"
                                 "  - {at: 1s, disk: {host: ps1, call: fsync, delay: 50ms, probability: 10%}, for: 2s}\n"
                                 "  - {at: 1s, disk: {host: ps0, call: write, short: 1K}}\n"
                                 "  - {at: 1s, disk: {host: w0, call: pwrite, short: 12.5%}}\n");
    FL_REQUIRE_EQ(s->n_faults, 3);
    const struct fl_scn_disk *d = &s->faults[0].action.disk;
    FL_ASSERT_STREQ(d->call, "fsync");
    FL_ASSERT_STREQ(d->point, "faultline/delay/fsync");
    FL_ASSERT_EQ(d->delay_us, 50000);
    FL_ASSERT_EQ(d->err, 0);
    FL_ASSERT(d->probability > 0.099 && d->probability < 0.101);
    d = &s->faults[1].action.disk;
    FL_ASSERT_STREQ(d->point, "faultline/short/write");
    FL_ASSERT_EQ(d->short_bytes, 1024);
    FL_ASSERT_EQ(d->short_ppm, 0);
    FL_ASSERT_EQ(d->delay_us, 0);
    d = &s->faults[2].action.disk;
    FL_ASSERT_STREQ(d->point, "faultline/short/pwrite");
    FL_ASSERT_EQ(d->short_ppm, 125000);
    FL_ASSERT_EQ(d->short_bytes, 0);
    fl_scenario_free(s);
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
             "WHERE kind='io.%s' AND host='a'", phase);
    return fl_test_scenario_db_int(sql);
}

/* call: fsync, delay: 50ms on host a for 1.5s: each fsync on a takes about
 * 50 ms more while the fault is on, is fast before and after its heal; host
 * b's fsyncs, all along, are never slowed (the scenario's expectations). */
FL_TEST_ROOT_T(disk_faults, fsync_delay_slows_target_host_only, 60)
{
    require_probe();
    fl_test_scenario_passes("disk-slow.yaml");
    int before = io_tenths("before"), during = io_tenths("during"), after = io_tenths("after");
    printf("fsync avg: before %.1f ms, during %.1f ms, after %.1f ms\n", before / 10.0, during / 10.0,
                after / 10.0);
    FL_ASSERT_LT(before, 100);
    FL_ASSERT_GE(during - before, 490);         /* the delay, per call */
    FL_ASSERT_LT(during - before, 800);
    FL_ASSERT_LT(after, 100);
    FL_ASSERT_EQ(fl_test_scenario_db_int("SELECT count(*) FROM faults WHERE kind='disk' AND target='a' "
                        "AND detail='call=fsync delay=50ms for=1500ms' AND error IS NULL "
                        "AND healed_ms IS NOT NULL"), 1);
}

/* call: write, short: 1K on host a: one write() of 10000 bytes writes
 * 1024 and the file has 1024 bytes; a loop on short writes gets all 10000
 * in 10 calls; host b, untouched, writes 10000 in one (the scenario). */
FL_TEST_ROOT_T(disk_faults, short_write_truncates_careless_writer, 60)
{
    require_probe();
    fl_test_scenario_passes("disk-short.yaml");
    FL_ASSERT_EQ(fl_test_scenario_db_int("SELECT count(*) FROM faults WHERE kind='disk' AND target='a' "
                        "AND detail='call=write short=1024B' AND error IS NULL"), 1);
}

/* call: write, short: 1000 on psrt's ps and chief from the start (softmax:
 * its checkpoint data is written in 1000-byte pieces, as strace shows):
 * psrt's writers loop on short writes, so the robust saves succeed and the
 * checkpoint verifies, bit-exact with the ps's copy (the scenario). */
FL_TEST_ROOT_T(disk_faults, psrt_saves_survive_short_writes, 90)
{
    require_setup();
    if (access(fl_test_bin("psrt"), X_OK) != 0)
        FL_SKIP("build/bin/psrt is not built");
    fl_test_scenario_passes("disk-short-psrt.yaml");
    FL_ASSERT_EQ(fl_test_scenario_db_int("SELECT count(*) FROM faults WHERE kind='disk' "
                        "AND detail='call=write short=1000B' AND error IS NULL"), 2);
    FL_ASSERT_GE(fl_test_scenario_db_int("SELECT count(*) FROM events WHERE kind='save.done'"), 2);
}

/* "now=N" of host H's clock.read event, as a number. */
static long long clock_read(const char *host)
{
    char sql[256];
    snprintf(sql, sizeof sql,
             "SELECT CAST(substr(attrs, 5) AS INTEGER) - 1700000000 FROM events "
             "WHERE kind='clock.read' AND host='%s'", host);
    return fl_test_scenario_db_int(sql) + 1700000000LL;
}

/* clock_offset: 1h on a, -1.5s on c, none on b: `date +%s` on a reads
 * about 3600 s more than on b, c about 1.5 s less; the FAKETIME each got,
 * and Python's time.sleep working on each, are in the scenario's
 * expectations. */
FL_TEST_ROOT_T(clock_offset, date_on_offset_host_is_ahead, 60)
{
    fl_test_need_root();
    if (!fl_clock_faketime_lib())
        FL_SKIP("libfaketime is not installed (Debian package libfaketime)");
    if (system("python3 -c '' 2>/dev/null") != 0)
        FL_SKIP("needs python3 (its time.sleep on an offset host)");
    fl_test_scenario_passes("clock-offset.yaml");
    long long a = clock_read("a"), b = clock_read("b"), c = clock_read("c");
    FL_ASSERT_GE(a - b, 3599);
    FL_ASSERT_LE(a - b, 3601);
    FL_ASSERT_GE(b - c, 1);
    FL_ASSERT_LE(b - c, 3);
}

/* For host H: 1000 x (its clock's advance between its two readings) / (the
 * harness's real time between the two events). */
static int drift_rate_milli(const char *host)
{
    char sql[512];
    snprintf(sql, sizeof sql,
             "SELECT (CAST(substr(b.attrs, 4) AS INTEGER) - CAST(substr(a.attrs, 4) AS INTEGER)) * 1000 "
             "/ (b.t_ms - a.t_ms) FROM events a, events b WHERE a.kind='clock.t1' AND b.kind='clock.t2' "
             "AND a.host='%s' AND b.host='%s'", host, host);
    return fl_test_scenario_db_int(sql);
}

/* For host H: its clock's reading minus the real time of the event, minus
 * what offset and drift should have made it by then (ms). */
static int drift_error_ms(const char *host, const char *kind, int offset_ms, int drift_pct)
{
    char sql[512];
    snprintf(sql, sizeof sql,
             "SELECT CAST(substr(e.attrs, 4) AS INTEGER) - (r.started_at + e.t_ms) - %d - e.t_ms * %d / 100 "
             "FROM events e, runs r WHERE e.kind='%s' AND e.host='%s'", offset_ms, drift_pct, kind, host);
    return fl_test_scenario_db_int(sql);
}

/* clock_drift: a +50%, b -20% on a 1h offset, c none: over a second of
 * each host's clock (two `date` processes), the clock advances 1.5, 0.8
 * and 1 times the real time; and each reading carries the drift gathered
 * since the start of the run (every process of the host agrees). */
FL_TEST_ROOT_T(clock_offset, drift_runs_host_clock_fast_or_slow, 60)
{
    fl_test_need_root();
    if (!fl_clock_faketime_lib())
        FL_SKIP("libfaketime is not installed (Debian package libfaketime)");
    fl_test_scenario_passes("clock-drift.yaml");
    int a = drift_rate_milli("a"), b = drift_rate_milli("b"), c = drift_rate_milli("c");
    printf("clock rates: a %.3f, b %.3f, c %.3f\n", a / 1000.0, b / 1000.0, c / 1000.0);
    FL_ASSERT_GE(a, 1440);
    FL_ASSERT_LE(a, 1560);
    FL_ASSERT_GE(b, 760);
    FL_ASSERT_LE(b, 840);
    FL_ASSERT_GE(c, 960);
    FL_ASSERT_LE(c, 1040);
    /* the reading minus the expected drift: within the latency of a `date`
     * and an emit (a few ms; 60 ms allowed on a loaded machine) */
    const char *kinds[] = {"clock.t1", "clock.t2"};
    for (int i = 0; i < 2; i++) {
        int ea = drift_error_ms("a", kinds[i], 0, 50), eb = drift_error_ms("b", kinds[i], 3600000, -20);
        printf("%s: a off by %d ms, b off by %d ms\n", kinds[i], ea, eb);
        FL_ASSERT_LE(abs(ea), 60);
        FL_ASSERT_LE(abs(eb), 60);
    }
}

FL_TEST(clock_offset, drift_parse_and_faketime_value)
{
    int64_t ppm;
    FL_ASSERT_EQ(fl_scn_drift_parse("10%", &ppm), 0);
    FL_ASSERT_EQ(ppm, 100000);
    FL_ASSERT_EQ(fl_scn_drift_parse("-0.5%", &ppm), 0);
    FL_ASSERT_EQ(ppm, -5000);
    FL_ASSERT_EQ(fl_scn_drift_parse("+200ppm", &ppm), 0);
    FL_ASSERT_EQ(ppm, 200);
    FL_ASSERT(fl_scn_drift_parse("fast", &ppm) < 0);
    FL_ASSERT(fl_scn_drift_parse("10", &ppm) < 0);
    FL_ASSERT(fl_scn_drift_parse("%", &ppm) < 0);
    char b[64];
    fl_clock_faketime_drift_value(3600000, -200000, 1000, b, sizeof b);
    FL_ASSERT_STREQ(b, "+3599.800000 x0.800000000");
    fl_clock_faketime_drift_value(0, 500000, 2000, b, sizeof b);
    FL_ASSERT_STREQ(b, "+1.000000 x1.500000000");
}

FL_TEST(clock_offset, faketime_value_is_signed_seconds_with_ms)
{
    char b[40];
    fl_clock_faketime_value(3600000, b, sizeof b);
    FL_ASSERT_STREQ(b, "+3600.000");
    fl_clock_faketime_value(-250, b, sizeof b);
    FL_ASSERT_STREQ(b, "-0.250");
    fl_clock_faketime_value(1500, b, sizeof b);
    FL_ASSERT_STREQ(b, "+1.500");
}
