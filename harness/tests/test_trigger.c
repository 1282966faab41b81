/*
 * test_trigger.c: unit tests of trigger matching (harness/engine/trigger.c) on
 * scenarios loaded from memory, and of the event channel's line parser
 * (harness/run/evsrv.c).
 */
#include "harness/run/evsrv.h"
#include "harness/scenario/scenario.h"
#include "harness/tests/fl_test.h"
#include "harness/engine/trigger.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

FL_TEST(trigger, at_due_only_from_its_time)
{
    struct fl_scenario *s = load();
    const struct fl_scn_trigger *t = &s->faults[0].trigger;
    FL_ASSERT(!fl_trig_due(t, 0));
    FL_ASSERT(!fl_trig_due(t, 1499));
    FL_ASSERT(fl_trig_due(t, 1500));
    FL_ASSERT(fl_trig_due(t, 99999));
    FL_ASSERT(!fl_trig_due(&s->faults[1].trigger, 99999));  /* not a time trigger */
    fl_scenario_free(s);
}

FL_TEST(trigger, event_matches_kind_host_and_where)
{
    struct fl_scenario *s = load();
    const struct fl_scn_trigger *t = &s->faults[1].trigger;
    int a = fl_scn_host_find(s, "a"), b = fl_scn_host_find(s, "b"), ps = fl_scn_job_find(s, "ps");
    struct fl_ev ev;
    char l1[] = "EVENT save.shard_written shard=1 step=50";
    parse(l1, &ev);
    FL_ASSERT(fl_trig_event_matches(t, a, ps, 0, &ev));
    FL_ASSERT(!fl_trig_event_matches(t, b, ps, 1, &ev));      /* other host */
    char l2[] = "EVENT save.shard_written shard=0 step=50";
    parse(l2, &ev);
    FL_ASSERT(!fl_trig_event_matches(t, a, ps, 0, &ev));      /* other shard */
    char l3[] = "EVENT save.shard_written step=50";
    parse(l3, &ev);
    FL_ASSERT(!fl_trig_event_matches(t, a, ps, 0, &ev));      /* no shard at all */
    char l4[] = "SYNC 7 save.shard_written shard=\"1\"";
    parse(l4, &ev);
    FL_ASSERT(fl_trig_event_matches(t, a, ps, 0, &ev));       /* quoted value, sync */
    char l5[] = "EVENT save.shard_written_x shard=1";
    parse(l5, &ev);
    FL_ASSERT(!fl_trig_event_matches(t, a, ps, 0, &ev));      /* kind is exact */
    fl_scenario_free(s);
}

FL_TEST(trigger, event_filters_job_and_task)
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

FL_TEST(trigger, log_line_matches_regex_on_its_host)
{
    struct fl_scenario *s = load();
    const struct fl_scn_trigger *t = &s->faults[3].trigger;
    int a = fl_scn_host_find(s, "a"), b = fl_scn_host_find(s, "b"), w = fl_scn_job_find(s, "worker");
    FL_ASSERT(fl_trig_line_matches(t, b, w, 0, "step 100"));
    FL_ASSERT(!fl_trig_line_matches(t, b, w, 0, "step 101"));
    FL_ASSERT(!fl_trig_line_matches(t, a, w, 0, "step 100"));
    FL_ASSERT(!fl_trig_line_matches(&s->faults[1].trigger, b, w, 0, "step 100"));
    fl_scenario_free(s);
}

FL_TEST(evline, parse_hello_event_sync)
{
    struct fl_ev ev;
    char l1[] = "HELLO host=ps0 job=ps task=1 pid=42";
    parse(l1, &ev);
    FL_ASSERT_EQ(ev.type, FL_EV_HELLO);
    FL_ASSERT_STREQ(fl_ev_get(&ev, "host"), "ps0");
    FL_ASSERT_STREQ(fl_ev_get(&ev, "pid"), "42");
    char l2[] = "EVENT save.failed step=5 error=\"NotFoundError: a \\\"b\\\" c\"";
    parse(l2, &ev);
    FL_ASSERT_EQ(ev.type, FL_EV_EVENT);
    FL_ASSERT_STREQ(ev.kind, "save.failed");
    FL_ASSERT_EQ(ev.nattrs, 2);
    FL_ASSERT_STREQ(fl_ev_get(&ev, "error"), "NotFoundError: a \"b\" c");
    char l3[] = "SYNC 12 train.step";
    parse(l3, &ev);
    FL_ASSERT_EQ(ev.type, FL_EV_SYNC);
    FL_ASSERT_EQ(ev.seq, 12);
    FL_ASSERT_STREQ(ev.kind, "train.step");
    FL_ASSERT_EQ(ev.nattrs, 0);
}

FL_TEST(evline, parse_rejects_bad_lines_with_reason)
{
    static const char *bad[][2] = {
        {"BOGUS x", "unknown line type"},
        {"SYNC x train.step", "sequence number"},
        {"EVENT Bad!Kind", "bad event kind"},
        {"EVENT k novalue", "has no '=value'"},
        {"EVENT k a=\"open", "unterminated"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char line[128], err[256] = "";
        struct fl_ev ev;
        snprintf(line, sizeof line, "%s", bad[i][0]);
        FL_ASSERT_MSG(fl_ev_parse(line, &ev, err, sizeof err) < 0, "accepted '%s'", bad[i][0]);
        FL_ASSERT_CONTAINS(err, bad[i][1]);
    }
}
