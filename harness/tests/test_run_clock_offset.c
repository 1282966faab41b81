/*
 * test_run_clock_offset.c: a host's clock_offset and clock_drift
 * (harness/run/clock_offset.c, libfaketime): the FAKETIME values given
 * for an offset and a drift, how a drift parses, and on real hosts, that
 * date on an offset host is ahead and a drifting host's clock runs fast or
 * slow by the rate asked.
 */
#include "harness/run/clock_offset.h"
#include "harness/scenario/scenario.h"
#include "harness/tests/fl_test.h"

#include <stdio.h>
#include <stdlib.h>

/* "now=N" of host H's clock.read event, as a number. */
static long long clock_read(const char *host)
{
    char sql[256];
    snprintf(sql, sizeof sql,
             "SELECT CAST(substr(attrs, 5) AS INTEGER) - 1700000000 FROM events "
             "WHERE kind='clock.read' AND host='%s'",
             host);
    return fl_test_scenario_db_int(sql) + 1700000000LL;
}

/* clock_offset: 1h on a, -1.5s on c, none on b: `date +%s` on a reads
 * about 3600 s more than on b, c about 1.5 s less; the FAKETIME each got,
 * and Python's time.sleep working on each, are in the scenario's
 * expectations. */
FL_TEST_ROOT_T(run_clock_offset, date_on_offset_host_is_ahead, 60)
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

/* Host H's clock reading of event KIND (clock.t1, clock.t2; "ms=N", the
 * epoch in ms) was taken between the harness's times of KIND.before (a sync
 * event: `date` ran once the harness had taken it) and of KIND itself (sent
 * after `date`): SQL for those, as parts of an expression over events r
 * (the reading), b (before) and run. */
#define READING "CAST(substr(r.attrs, 4) AS INTEGER)"
static int bracket_sql(const char *host, const char *kind, const char *expr)
{
    char sql[1024];
    snprintf(sql, sizeof sql,
             "SELECT %s FROM events r, events b, runs run WHERE r.kind='%s' AND "
             "b.kind='%s.before' AND r.host='%s' AND b.host='%s'",
             expr, kind, kind, host, host);
    return fl_test_scenario_db_int(sql);
}

/* For host H, asked to run at rate/1000 of real time: its clock's advance
 * between its two readings (ms), and the shortest and longest real time
 * that can have passed between them (from the brackets).  The advance
 * must lie between rate x shortest and rate x longest (2 ms for the
 * readings' and the harness's whole milliseconds). */
static void check_rate(const char *host, int rate_milli)
{
    char sql[1024];
    snprintf(sql, sizeof sql,
             "SELECT CAST(substr(r2.attrs, 4) AS INTEGER) - CAST(substr(r1.attrs, 4) AS INTEGER) "
             "FROM events r1, events r2 WHERE r1.kind='clock.t1' AND r2.kind='clock.t2' AND "
             "r1.host='%s' AND r2.host='%s'",
             host, host);
    int adv = fl_test_scenario_db_int(sql);
    snprintf(sql, sizeof sql,
             "SELECT b2.t_ms - r1.t_ms FROM events r1, events b2 WHERE r1.kind='clock.t1' AND "
             "b2.kind='clock.t2.before' AND r1.host='%s' AND b2.host='%s'",
             host, host);
    int shortest = fl_test_scenario_db_int(sql);
    snprintf(sql, sizeof sql,
             "SELECT r2.t_ms - b1.t_ms FROM events b1, events r2 WHERE b1.kind='clock.t1.before' "
             "AND r2.kind='clock.t2' AND b1.host='%s' AND r2.host='%s'",
             host, host);
    int longest = fl_test_scenario_db_int(sql);
    printf("host %s: its clock advanced %d ms in %d..%d ms (rate %.3f..%.3f, asked %.3f)\n", host,
           adv, shortest, longest, (double)adv / longest, (double)adv / shortest,
           rate_milli / 1000.0);
    FL_ASSERT_MSG(shortest > 0 && (long)adv * 1000 >= (long)rate_milli * shortest - 2000 &&
                      (long)adv * 1000 <= (long)rate_milli * longest + 2000,
                  "host %s: advanced %d ms in %d..%d ms of real time, at %d/1000", host, adv,
                  shortest, longest, rate_milli);
}

/* The reading of KIND on host H minus what an offset_ms offset and a
 * drift_pct drift (gathered since the start of the run) make of the real
 * time, at the start of its bracket (must be >= -2) and at its end (<= 2). */
static void check_reading(const char *host, const char *kind, int offset_ms, int drift_pct)
{
    char expr[512];
    snprintf(expr, sizeof expr, READING " - (run.started_at + b.t_ms) - %d - b.t_ms * %d / 100",
             offset_ms, drift_pct);
    int early = bracket_sql(host, kind, expr);
    snprintf(expr, sizeof expr, READING " - (run.started_at + r.t_ms) - %d - r.t_ms * %d / 100",
             offset_ms, drift_pct);
    int late = bracket_sql(host, kind, expr);
    printf("%s on %s: %+d ms from what the start of its bracket makes, %+d from its end\n", kind,
           host, early, late);
    FL_ASSERT_MSG(early >= -2 && late <= 2, "%s on %s: %d..%d ms off", kind, host, early, late);
}

/* clock_drift: a +50%, b -20% on a 1h offset, c none: over a second of
 * each host's clock (two `date` processes), the clock advances 1.5, 0.8
 * and 1 times the real time; and each reading carries the drift gathered
 * since the start of the run (every process of the host agrees).  The real
 * time of each reading is known to lie in a bracket of the harness's clock
 * (the scenario's sync events), so no bound depends on how fast a loaded
 * machine runs `date` and `faultline emit`. */
FL_TEST_ROOT_T(run_clock_offset, drift_runs_host_clock_fast_or_slow, 60)
{
    fl_test_need_root();
    if (!fl_clock_faketime_lib())
        FL_SKIP("libfaketime is not installed (Debian package libfaketime)");
    fl_test_scenario_passes("clock-drift.yaml");
    check_rate("a", 1500);
    check_rate("b", 800);
    check_rate("c", 1000);
    const char *kinds[] = {"clock.t1", "clock.t2"};
    for (int i = 0; i < 2; i++) {
        check_reading("a", kinds[i], 0, 50);
        check_reading("b", kinds[i], 3600000, -20);
    }
}

FL_TEST(run_clock_offset, drift_parse_and_faketime_value)
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

FL_TEST(run_clock_offset, faketime_value_is_signed_seconds_with_ms)
{
    char b[40];
    fl_clock_faketime_value(3600000, b, sizeof b);
    FL_ASSERT_STREQ(b, "+3600.000");
    fl_clock_faketime_value(-250, b, sizeof b);
    FL_ASSERT_STREQ(b, "-0.250");
    fl_clock_faketime_value(1500, b, sizeof b);
    FL_ASSERT_STREQ(b, "+1.500");
}
