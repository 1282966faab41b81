/*
 * test_load_at_rest.c: how the corrupt: and truncate: fault kinds (files at
 * rest on a host's disk) load (harness/load/at_rest.c).
 */
#include "harness/scenario/scenario.h"
#include "harness/tests/fl_test.h"

#define BASE                                                                   \
    "name: t\n"                                                                \
    "hosts: [ps0, w0]\n"                                                       \
    "cluster:\n"                                                               \
    "  ps: [ps0]\n"                                                            \
    "  worker: [w0]\n"                                                         \
    "run:\n"                                                                   \
    "  command: \"sleep 1\"\n"

FL_TEST(load_at_rest, load_corrupt_and_truncate)
{
    const char *text = BASE "faults:\n"
                            "  - {at: 1s, corrupt: {host: ps0, path: 'train_logs/ps0/*.data-*', bytes: 16}}\n"
                            "  - {at: 2s, truncate: {host: \"worker:0\", path: t.log, size: 1K}}\n";
    char err[1024] = "";
    struct fl_scenario *s = NULL;
    FL_REQUIRE_MSG(fl_scenario_load_mem("s.yaml", text, strlen(text), &s, err, sizeof err) == 0 && s,
                   "load failed: %s", err);
    FL_REQUIRE_EQ(s->n_faults, 2);
    const struct fl_scn_action *a = &s->faults[0].action;
    FL_ASSERT_EQ(a->kind, FL_SCN_ACT_CORRUPT);
    FL_ASSERT_EQ(a->host, 0);
    FL_ASSERT_STREQ(a->rest.path, "train_logs/ps0/*.data-*");
    FL_ASSERT_EQ(a->rest.bytes, 16);
    FL_ASSERT_STREQ(fl_scn_action_kind_name(a->kind), "corrupt");
    a = &s->faults[1].action;
    FL_ASSERT_EQ(a->kind, FL_SCN_ACT_TRUNCATE);
    FL_ASSERT_EQ(a->host, 1);                   /* the task's host */
    FL_ASSERT_EQ(a->rest.size, 1024);
    FL_ASSERT_STREQ(fl_scn_action_kind_name(a->kind), "truncate");
    fl_scenario_free(s);
}
