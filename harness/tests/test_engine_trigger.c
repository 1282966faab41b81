/*
 * test_engine_trigger.c: trigger matching (harness/engine/trigger.c) on a
 * scenario loaded from memory: at: times, after: events by kind, host,
 * job, task and attributes, and on_log: lines by regex and host; and a
 * psrt run whose worker's own step reports trigger a fault.
 */
#include "harness/load/load.h"
#include "harness/tests/fl_test.h"
#include "harness/engine/trigger.h"

static const char *scn_text =
    "name: t\n"
    "hosts: [a, b]\n"
    "cluster: {ps: [a, b], worker: [b]}\n"
    "run: {command: 'true'}\n"
    "faults:\n"
    "  - {at: 1500ms, kill: a}\n"
    "  - {after: {event: save.shard_written, host: a, where: {shard: '1'}}, kill: b}\n"
    "  - {after: {event: train.step, job: worker, count: 3}, kill: a}\n"
    "  - {on_log: {host: b, match: 'step [0-9]+0$'}, kill: a}\n"
    "  - {after: {event: x, job: 'ps:1'}, kill: a}\n";

static struct fl_scenario *load(void)
{
    struct fl_scenario *s;
    char err[1024];
    int rc = fl_scenario_load_mem("t.yaml", scn_text, strlen(scn_text), &s, err, sizeof err);
    FL_REQUIRE_MSG(rc == 0, "load: %s", err);
    return s;
}

static void parse(char *line, struct fl_ev *ev)
{
    char err[256];
    int rc = fl_ev_parse(line, ev, err, sizeof err);
    FL_REQUIRE_MSG(rc == 0, "parse '%s': %s", line, err);
}

FL_TEST(engine_trigger, at_due_only_from_its_time)
{
    struct fl_scenario *s = load();
    const struct fl_scn_trigger *t = &s->faults[0].trigger;
    FL_ASSERT(!fl_trig_due(t, 0));
    FL_ASSERT(!fl_trig_due(t, 1499));
    FL_ASSERT(fl_trig_due(t, 1500));
    FL_ASSERT(fl_trig_due(t, 99999));
    FL_ASSERT(!fl_trig_due(&s->faults[1].trigger, 99999)); /* not a time trigger */
    fl_scenario_free(s);
}

FL_TEST(engine_trigger, event_matches_kind_host_and_where)
{
    struct fl_scenario *s = load();
    const struct fl_scn_trigger *t = &s->faults[1].trigger;
    int a = fl_scn_host_find(s, "a"), b = fl_scn_host_find(s, "b"), ps = fl_scn_job_find(s, "ps");
    struct fl_ev ev;
    char l1[] = "EVENT save.shard_written shard=1 step=50";
    parse(l1, &ev);
    FL_ASSERT(fl_trig_event_matches(t, a, ps, 0, &ev));
    FL_ASSERT(!fl_trig_event_matches(t, b, ps, 1, &ev)); /* other host */
    char l2[] = "EVENT save.shard_written shard=0 step=50";
    parse(l2, &ev);
    FL_ASSERT(!fl_trig_event_matches(t, a, ps, 0, &ev)); /* other shard */
    char l3[] = "EVENT save.shard_written step=50";
    parse(l3, &ev);
    FL_ASSERT(!fl_trig_event_matches(t, a, ps, 0, &ev)); /* no shard at all */
    char l4[] = "SYNC 7 save.shard_written shard=\"1\"";
    parse(l4, &ev);
    FL_ASSERT(fl_trig_event_matches(t, a, ps, 0, &ev)); /* quoted value, sync */
    char l5[] = "EVENT save.shard_written_x shard=1";
    parse(l5, &ev);
    FL_ASSERT(!fl_trig_event_matches(t, a, ps, 0, &ev)); /* kind is exact */
    fl_scenario_free(s);
}

FL_TEST(engine_trigger, event_filters_job_and_task)
{
    struct fl_scenario *s = load();
    int a = fl_scn_host_find(s, "a"), b = fl_scn_host_find(s, "b");
    int ps = fl_scn_job_find(s, "ps"), worker = fl_scn_job_find(s, "worker");
    struct fl_ev ev;
    char l1[] = "EVENT train.step step=3";
    parse(l1, &ev);
    FL_ASSERT(fl_trig_event_matches(&s->faults[2].trigger, b, worker, 0, &ev));
    FL_ASSERT(!fl_trig_event_matches(&s->faults[2].trigger, b, ps, 1, &ev));
    FL_ASSERT_EQ(s->faults[2].trigger.count, 3);
    char l2[] = "EVENT x";
    parse(l2, &ev);
    FL_ASSERT(fl_trig_event_matches(&s->faults[4].trigger, b, ps, 1, &ev));
    FL_ASSERT(!fl_trig_event_matches(&s->faults[4].trigger, a, ps, 0, &ev));
    fl_scenario_free(s);
}

FL_TEST(engine_trigger, log_line_matches_regex_on_its_host)
{
    struct fl_scenario *s = load();
    const struct fl_scn_trigger *t = &s->faults[3].trigger;
    int a = fl_scn_host_find(s, "a"), b = fl_scn_host_find(s, "b"),
        w = fl_scn_job_find(s, "worker");
    FL_ASSERT(fl_trig_line_matches(t, b, w, 0, "step 100"));
    FL_ASSERT(!fl_trig_line_matches(t, b, w, 0, "step 101"));
    FL_ASSERT(!fl_trig_line_matches(t, a, w, 0, "step 100"));
    FL_ASSERT(!fl_trig_line_matches(&s->faults[1].trigger, b, w, 0, "step 100"));
    fl_scenario_free(s);
}

/* psrt's every worker reports its steps (train.step), not only the chief:
 * the worker's 4th report kills it. */
FL_TEST_ROOT_T(engine_trigger, psrt_workers_step_reports_trigger, 60)
{
    fl_test_need_root();
    fl_test_scenario_passes("psrt-step-reports.yaml");
}
