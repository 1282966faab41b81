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

/* For host H: 1000 x (its clock's advance between its two readings) / (the
 * harness's real time between the two events). */
static int drift_rate_milli(const char *host)
{
    char sql[512];
    snprintf(
        sql, sizeof sql,
        "SELECT (CAST(substr(b.attrs, 4) AS INTEGER) - CAST(substr(a.attrs, 4) AS INTEGER)) * 1000 "
        "/ (b.t_ms - a.t_ms) FROM events a, events b WHERE a.kind='clock.t1' AND b.kind='clock.t2' "
        "AND a.host='%s' AND b.host='%s'",
        host, host);
    return fl_test_scenario_db_int(sql);
}

/* For host H: its clock's reading minus the real time of the event, minus
 * what offset and drift should have made it by then (ms). */
static int drift_error_ms(const char *host, const char *kind, int offset_ms, int drift_pct)
{
    char sql[512];
    snprintf(sql, sizeof sql,
             "SELECT CAST(substr(e.attrs, 4) AS INTEGER) - (r.started_at + e.t_ms) - %d - e.t_ms * "
             "%d / 100 "
             "FROM events e, runs r WHERE e.kind='%s' AND e.host='%s'",
             offset_ms, drift_pct, kind, host);
    return fl_test_scenario_db_int(sql);
}

/* clock_drift: a +50%, b -20% on a 1h offset, c none: over a second of
 * each host's clock (two `date` processes), the clock advances 1.5, 0.8
 * and 1 times the real time; and each reading carries the drift gathered
 * since the start of the run (every process of the host agrees). */
FL_TEST_ROOT_T(run_clock_offset, drift_runs_host_clock_fast_or_slow, 60)
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
        int ea = drift_error_ms("a", kinds[i], 0, 50),
            eb = drift_error_ms("b", kinds[i], 3600000, -20);
        printf("%s: a off by %d ms, b off by %d ms\n", kinds[i], ea, eb);
        FL_ASSERT_LE(abs(ea), 60);
        FL_ASSERT_LE(abs(eb), 60);
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
