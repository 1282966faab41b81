/*
 * test_engine_event_values.c: faults aimed by the event that fires them, in
 * real runs (harness/engine/schedule.c, harness/load/event_values.c): a kill
 * and a partition whose host is the event's attribute, an event naming no
 * host (the run's error, named), and the notes of faults that never fired
 * (none for an optional one) in the database and the HTML report.
 */
#include "harness/tests/fl_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *scn(const char *name)
{
    static char path[4096];
    snprintf(path, sizeof path, "%s/harness/tests/scenarios/%s", fl_test_root(), name);
    return path;
}

static int run(char **out, const char *name)
{
    return fl_test_sh(out, "%s run --out %s/o --db %s/fl.db %s 2>&1", fl_test_bin("faultline"),
                      fl_test_dir(), fl_test_dir(), scn(name));
}

static void require_setup(void)
{
    fl_test_need_root();
    if (access(fl_test_bin("fl-probe"), X_OK) != 0)
        FL_SKIP("build/bin/fl-probe is not built");
}

FL_TEST_ROOT_T(engine_event_values, kill_aimed_by_event, 60)
{
    require_setup();
    char *out;
    int rc = run(&out, "event-kill.yaml");
    FL_ASSERT_MSG(rc == 0, "faultline run exited %d:\n%s", rc, out);
    free(out);
    /* b's task died of the fault; a's and c's were stopped at the end */
    FL_ASSERT_EQ(fl_test_scenario_db_int("SELECT count(*) FROM processes WHERE signal = 9"), 1);
    FL_ASSERT_EQ(fl_test_scenario_db_int("SELECT count(*) FROM processes WHERE signal = 9 AND"
                                         " host = 'b' AND job = 'node' AND stopped_at_end = 0"),
                 1);
    FL_ASSERT_EQ(fl_test_scenario_db_int("SELECT count(*) FROM processes WHERE job = 'node' AND"
                                         " host <> 'b' AND stopped_at_end = 1"),
                 2);
    FL_ASSERT_EQ(fl_test_scenario_db_int("SELECT count(*) FROM faults WHERE idx = 1 AND"
                                         " kind = 'kill' AND target = 'b' AND error IS NULL"),
                 1);
    FL_ASSERT_EQ(fl_test_scenario_db_int("SELECT count(*) FROM faults WHERE idx = 2 AND"
                                         " target = 'a' AND detail = 'signal=SIGCONT'"),
                 1);
}

FL_TEST_ROOT_T(engine_event_values, partition_aimed_by_event, 60)
{
    require_setup();
    char *out;
    int rc = run(&out, "event-partition.yaml");
    FL_ASSERT_MSG(rc == 0, "faultline run exited %d:\n%s", rc, out);
    free(out);
    FL_ASSERT_EQ(fl_test_scenario_db_int("SELECT count(*) FROM faults WHERE kind = 'partition'"
                                         " AND target = '[b]|[a,c]'"),
                 1);
}

FL_TEST_ROOT_T(engine_event_values, event_naming_no_host_errs, 60)
{
    require_setup();
    char *out;
    int rc = run(&out, "event-unknown-host.yaml");
    FL_ASSERT_NE(rc, 0);
    char want[4200];
    snprintf(want, sizeof want,
             "reason: fault 1 (%s:12, kill): event 'leader.is' gave node=r9, which is no host of "
             "this scenario",
             scn("event-unknown-host.yaml"));
    FL_ASSERT_CONTAINS(out, want);
    FL_ASSERT_CONTAINS(out, "ERROR it-event-unknown-host");
    free(out);
    FL_ASSERT_EQ(fl_test_scenario_db_int("SELECT count(*) FROM runs WHERE verdict = 'error' AND"
                                         " reason LIKE '%gave node=r9, which is no host%'"),
                 1);
    FL_ASSERT_EQ(fl_test_scenario_db_int("SELECT count(*) FROM faults WHERE"
                                         " target = '''{event.node}''' AND error LIKE 'event%'"),
                 1);
    /* the task on b was not touched */
    FL_ASSERT_EQ(fl_test_scenario_db_int("SELECT count(*) FROM processes WHERE signal = 9"), 0);
}

FL_TEST_ROOT_T(engine_event_values, unfired_notes_db_report, 60)
{
    require_setup();
    char *out;
    int rc = run(&out, "event-unfired.yaml");
    FL_ASSERT_MSG(rc == 0, "faultline run exited %d:\n%s", rc, out);
    char note[4200];
    snprintf(note, sizeof note,
             "fault 1 (%s:9, kill '{event.node}') never fired: no 'leader.is' event came (did "
             "you mean 'leader.was'?)",
             scn("event-unfired.yaml"));
    FL_ASSERT_CONTAINS(out, note);
    FL_ASSERT_MSG(!strstr(out, "fault 2"), "the optional fault has a note:\n%s", out);
    free(out);
    FL_ASSERT_EQ(fl_test_scenario_db_int("SELECT count(*) FROM unfired_faults"), 1);
    FL_ASSERT_EQ(fl_test_scenario_db_int("SELECT count(*) FROM unfired_faults WHERE idx = 1 AND"
                                         " kind = 'kill' AND line = 9 AND"
                                         " note LIKE 'fault 1 (%never fired: no ''leader.is''%'"),
                 1);
    /* the report shows it */
    char *html = NULL;
    rc = fl_test_sh(NULL, "%s report --db %s/fl.db --last 1 --out %s/r.html",
                    fl_test_bin("faultline"), fl_test_dir(), fl_test_dir());
    FL_REQUIRE_EQ(rc, 0);
    rc = fl_test_sh(&html, "cat %s/r.html", fl_test_dir());
    FL_ASSERT_CONTAINS(html, "Faults that never fired (1)");
    FL_ASSERT_CONTAINS(html, "never fired: no &#39;leader.is&#39; event came (did you mean "
                             "&#39;leader.was&#39;?)");
    free(html);
}

FL_TEST_ROOT_T(engine_event_values, every_kind_aimed_by_event, 60)
{
    require_setup();
    char *out;
    int rc = run(&out, "event-kinds.yaml");
    FL_ASSERT_MSG(rc == 0, "faultline run exited %d:\n%s", rc, out);
    free(out);
    /* each applied to what the event named: b, or the task node:2 */
    FL_ASSERT_EQ(fl_test_scenario_db_int(
                     "SELECT count(*) FROM faults WHERE error IS NULL AND (idx, target) IN"
                     " (VALUES (1, 'b'), (2, 'b'), (3, 'node:2'), (4, 'b'), (5, 'a<->b'),"
                     " (6, 'b->a,c'), (7, 'b'), (8, 'node:2'), (9, 'b'))"),
                 9);
}
