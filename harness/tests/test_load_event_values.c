/*
 * test_load_event_values.c: faults aimed by the event that fires them
 * (harness/load/event_values.c, scenario/values.c): '{event.KEY}' hosts and
 * targets accepted on `after:` faults only, their syntax checked at load; a
 * partition's `rest` group; `optional:`; and the fault read again with an
 * event's values put in (fl_scn_fault_resolve), with its errors.
 */
#include "harness/load/load.h"
#include "harness/scenario/scenario.h"
#include "harness/tests/fl_test.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#define BASE              \
    "name: t\n"           \
    "hosts: [a, b, c]\n"  \
    "cluster:\n"          \
    "  node: [a, b, c]\n" \
    "run:\n"              \
    "  command: \"sleep 1\"\n"

static struct fl_scenario *load_ok(const char *text)
{
    char err[1024] = "";
    struct fl_scenario *s = NULL;
    FL_REQUIRE_MSG(fl_scenario_load_mem("s.yaml", text, strlen(text), &s, err, sizeof err) == 0 &&
                       s,
                   "load failed: %s", err);
    return s;
}

static void load_fails(const char *text, const char *want)
{
    char err[1024] = "";
    struct fl_scenario *s = NULL;
    FL_ASSERT_NE(fl_scenario_load_mem("s.yaml", text, strlen(text), &s, err, sizeof err), 0);
    FL_ASSERT_MSG(strcmp(err, want) == 0, "got  '%s'\nwant '%s'", err, want);
    fl_scenario_free(s);
}

FL_TEST(load_event_values, accepted_on_after_faults_of_every_kind)
{
    struct fl_scenario *s = load_ok(
        BASE "faults:\n"
             "  - {after: {event: leader.is}, kill: '{event.node}'}\n"
             "  - {after: {event: leader.is}, partition: [['{event.node}'], rest], for: 1s}\n"
             "  - {after: {event: leader.is}, partition: {from: ['{event.node}'], to: rest}}\n"
             "  - {after: {event: leader.is}, link: {host: '{event.node}', down: true}}\n"
             "  - {after: {event: leader.is}, link: {hosts: [a, '{event.node}'], loss: 5%}}\n"
             "  - {after: {event: leader.is}, limit: {host: '{event.node}', threads: 64}}\n"
             "  - {after: {event: leader.is}, crash_host: '{event.host}', unsynced: lose}\n"
             "  - {after: {event: leader.is}, truncate: {host: '{event.n}', path: x, size: 1}}\n"
             "  - {at: 1s, partition: [[a], rest]}\n");
    FL_REQUIRE_EQ(s->n_faults, 9);
    for (size_t i = 0; i < 8; i++)
        FL_ASSERT_MSG(s->faults[i].from_event, "fault %zu", i + 1);
    FL_ASSERT(!s->faults[8].from_event);
    FL_ASSERT_EQ(s->faults[0].action.target.host, FL_SCN_HOST_EVENT);
    FL_ASSERT_STREQ(s->faults[0].as_written, "'{event.node}'");
    FL_ASSERT_STREQ(s->faults[1].as_written, "[['{event.node}'], rest]");
    FL_ASSERT_EQ(s->faults[5].action.host, FL_SCN_HOST_EVENT);
    /* without event values, rest is every host in no other group, at load */
    const struct fl_scn_action *p = &s->faults[8].action;
    FL_REQUIRE_EQ(p->n_groups, 2);
    FL_REQUIRE_EQ(p->groups[1].n, 2);
    FL_ASSERT_EQ(p->groups[1].hosts[0], 1);
    FL_ASSERT_EQ(p->groups[1].hosts[1], 2);
    FL_ASSERT(!s->faults[0].optional);
    fl_scenario_free(s);
    /* as written, in flow style whatever the file's style */
    s = load_ok(BASE "faults:\n"
                     "  - after: {event: e}\n"
                     "    partition:\n"
                     "      - ['{event.node}']\n"
                     "      - rest\n");
    FL_ASSERT_STREQ(s->faults[0].as_written, "[['{event.node}'], rest]");
    fl_scenario_free(s);
}

FL_TEST(load_event_values, refused_on_at_and_on_log_faults_naming_the_field)
{
    load_fails(BASE "faults:\n  - {at: 1s, kill: '{event.node}'}\n",
               "s.yaml:8:20: '{event.node}' in kill target takes a value from the event that "
               "triggers the fault: only a fault triggered by 'after:' has one (this one has "
               "'at:')");
    load_fails(BASE "faults:\n  - {on_log: {match: x}, partition: [[a], ['{event.node}']]}\n",
               "s.yaml:8:44: '{event.node}' in partition group takes a value from the event that "
               "triggers the fault: only a fault triggered by 'after:' has one (this one has "
               "'on_log:')");
}

FL_TEST(load_event_values, bad_syntax_is_a_load_error)
{
    const char *bad[] = {"'{event.}'", "'x{event.node}'", "'{evnt.node}'", "'{event.no de}'",
                         "'{event.node}x'"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char text[1024], want[1024];
        snprintf(text, sizeof text, BASE "faults:\n  - {after: {event: e}, kill: %s}\n", bad[i]);
        snprintf(want, sizeof want,
                 "s.yaml:8:31: bad value '%.*s' in kill target: a value taken from the "
                 "triggering event is written '{event.KEY}', the whole value (KEY an attribute "
                 "of the event, e.g. '{event.node}' for 'leader.is node=b')",
                 (int)strlen(bad[i]) - 2, bad[i] + 1);
        load_fails(text, want);
    }
}

FL_TEST(load_event_values, rest_groups_checked_at_load)
{
    load_fails("name: t\nhosts: [a, rest]\ncluster: {node: [a]}\nrun: {command: x}\n"
               "faults:\n  - {at: 1s, partition: [[a], rest]}\n",
               "s.yaml:6:31: 'rest' in a partition means every host in no other group, but this "
               "scenario has a host named 'rest': rename that host");
    load_fails(BASE "faults:\n  - {at: 1s, partition: [rest, [a], rest]}\n",
               "s.yaml:8:37: a partition has at most one 'rest' group (every host in no other "
               "group)");
    load_fails(BASE "faults:\n  - {at: 1s, partition: [[a, b, c], rest]}\n",
               "s.yaml:8:37: the partition's 'rest' is empty: every host is in another group");
}

FL_TEST(load_event_values, optional_is_a_boolean)
{
    struct fl_scenario *s =
        load_ok(BASE "faults:\n  - {after: {event: e}, kill: a, optional: true}\n");
    FL_ASSERT(s->faults[0].optional);
    fl_scenario_free(s);
    load_fails(BASE "faults:\n  - {after: {event: e}, kill: a, optional: maybe}\n",
               "s.yaml:8:44: 'optional' must be true or false, not 'maybe'");
}

/* An event's attributes, "k=v" strings, for fl_scn_fault_resolve. */
static const char *attr(void *ctx, const char *key)
{
    for (const char *const *kv = ctx; *kv; kv++) {
        size_t n = strlen(key);
        if (!strncmp(*kv, key, n) && (*kv)[n] == '=')
            return *kv + n + 1;
    }
    return NULL;
}

static int resolve(const struct fl_scenario *s, size_t fault, const char *const *attrs,
                   struct fl_scn_action *a, char *err, size_t errlen)
{
    err[0] = 0;
    return fl_scn_fault_resolve(s, fault, "leader.is", attr, (void *)attrs, a, err, errlen);
}

FL_TEST(load_event_values, resolved_with_the_events_values)
{
    struct fl_scenario *s =
        load_ok(BASE "faults:\n"
                     "  - {after: {event: leader.is}, kill: '{event.node}', signal: SIGTERM}\n"
                     "  - {after: {event: leader.is}, partition: [['{event.node}'], rest]}\n"
                     "  - {after: {event: leader.is}, partition: [['{event.x}'], ['{event.y}']]}\n"
                     "  - {after: {event: leader.is}, partition: [['{event.x}'], [a, c], rest]}\n");
    struct fl_scn_action a;
    char err[1024];
    FL_REQUIRE_EQ(resolve(s, 0, (const char *const[]){"node=b", NULL}, &a, err, sizeof err), 0);
    FL_ASSERT_EQ(a.target.kind, FL_SCN_TGT_HOST);
    FL_ASSERT_EQ(a.target.host, 1);
    FL_ASSERT_EQ(a.signal, SIGTERM);
    fl_scn_action_free(&a);
    /* a task where a target takes one */
    FL_REQUIRE_EQ(resolve(s, 0, (const char *const[]){"node=node:2", NULL}, &a, err, sizeof err),
                  0);
    FL_ASSERT_EQ(a.target.kind, FL_SCN_TGT_TASK);
    FL_ASSERT_EQ(a.target.task, 2);
    fl_scn_action_free(&a);
    FL_REQUIRE_EQ(resolve(s, 1, (const char *const[]){"node=c", NULL}, &a, err, sizeof err), 0);
    FL_REQUIRE_EQ(a.n_groups, 2);
    FL_ASSERT_EQ(a.groups[0].n, 1);
    FL_ASSERT_EQ(a.groups[0].hosts[0], 2);
    FL_REQUIRE_EQ(a.groups[1].n, 2);
    FL_ASSERT_EQ(a.groups[1].hosts[0], 0);
    FL_ASSERT_EQ(a.groups[1].hosts[1], 1);
    fl_scn_action_free(&a);

    /* the run's errors, in words that follow the fault's name */
    FL_ASSERT_EQ(resolve(s, 1, (const char *const[]){"node=r9", NULL}, &a, err, sizeof err),
                 -EINVAL);
    FL_ASSERT_STREQ(err, "event 'leader.is' gave node=r9, which is no host of this scenario");
    FL_ASSERT_EQ(resolve(s, 0, (const char *const[]){"nod=b", NULL}, &a, err, sizeof err), -EINVAL);
    FL_ASSERT_STREQ(err, "event 'leader.is' has no attribute 'node' (for '{event.node}')");
    FL_ASSERT_EQ(resolve(s, 2, (const char *const[]){"x=b", "y=b", NULL}, &a, err, sizeof err),
                 -EINVAL);
    FL_ASSERT_STREQ(err, "event 'leader.is' gave x=b, y=b: host 'b' is in two partition groups "
                         "(1 and 2)");
    FL_ASSERT_EQ(resolve(s, 3, (const char *const[]){"x=b", NULL}, &a, err, sizeof err), -EINVAL);
    FL_ASSERT_STREQ(err, "event 'leader.is' gave x=b: the partition's 'rest' is empty: every host "
                         "is in another group");
    /* a task where only hosts go */
    FL_ASSERT_EQ(resolve(s, 1, (const char *const[]){"node=node:0", NULL}, &a, err, sizeof err),
                 -EINVAL);
    FL_ASSERT_STREQ(err, "event 'leader.is' gave node=node:0: unknown host 'node:0' in partition "
                         "group");
    fl_scenario_free(s);
}
