/*
 * test_load_faults.c: how the loader reads fault kinds that need no file of
 * their own here: crash_host's unsynced: (harness/load/faults.c: lose or
 * keep, and where it may be given), and corrupt: and truncate:, files at
 * rest on a host's disk (harness/faults/at_rest.c, at_rest_parse).
 */
#include "harness/faults/kind.h"
#include "harness/load/load.h"
#include "harness/scenario/scenario.h"
#include "harness/tests/fl_test.h"

#define BASE             \
    "name: t\n"          \
    "hosts: [ps0, w0]\n" \
    "cluster:\n"         \
    "  ps: [ps0]\n"      \
    "  worker: [w0]\n"   \
    "run:\n"             \
    "  command: \"sleep 1\"\n"

FL_TEST(load_faults, load_unsynced)
{
    const char *text = BASE "faults:\n"
                            "  - {at: 1s, crash_host: ps0, unsynced: lose, for: 1s}\n"
                            "  - {at: 2s, crash_host: \"worker:0\", unsynced: keep}\n"
                            "  - {at: 3s, crash_host: w0}\n";
    char err[1024] = "";
    struct fl_scenario *s = NULL;
    FL_REQUIRE_MSG(fl_scenario_load_mem("s.yaml", text, strlen(text), &s, err, sizeof err) == 0 &&
                       s,
                   "load failed: %s", err);
    FL_REQUIRE_EQ(s->n_faults, 3);
    FL_ASSERT_EQ(s->faults[0].action.unsynced, FL_SCN_UNSYNCED_LOSE);
    FL_ASSERT_EQ(s->faults[0].action.host, 0);
    FL_ASSERT_EQ(s->faults[1].action.unsynced, FL_SCN_UNSYNCED_KEEP);
    FL_ASSERT_EQ(s->faults[1].action.host, 1);
    FL_ASSERT_EQ(s->faults[2].action.unsynced, FL_SCN_UNSYNCED_KEEP); /* the default */
    fl_scenario_free(s);
    /* only crash_host takes it, and only keep or lose: file:line:col */
    const char *bad[][2] = {
        {BASE "faults:\n  - {at: 1s, kill: ps0, unsynced: lose}\n",
         "s.yaml:9:25: 'unsynced' applies only to crash_host"},
        {BASE "faults:\n  - {at: 1s, crash_host: ps0, unsynced: [lose]}\n",
         "s.yaml:9:41: 'unsynced' must be"},
        {BASE "faults:\n  - {at: 1s, crash_host: ps0, unsynced: los}\n",
         "s.yaml:9:41: 'unsynced' must be keep (everything written survives the crash), lose "
         "(only what was synced) or torn (as lose, with a part of each file's unsynced writes "
         "kept), not 'los' (did you mean 'lose'?)"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        s = NULL;
        err[0] = 0;
        FL_ASSERT_NE(
            fl_scenario_load_mem("s.yaml", bad[i][0], strlen(bad[i][0]), &s, err, sizeof err), 0);
        FL_ASSERT_MSG(strncmp(err, bad[i][1], strlen(bad[i][1])) == 0,
                      "case %zu: got '%s', want '%s...'", i, err, bad[i][1]);
        fl_scenario_free(s);
    }
}

FL_TEST(load_faults, load_corrupt_and_truncate)
{
    const char *text =
        BASE "faults:\n"
             "  - {at: 1s, corrupt: {host: ps0, path: 'train_logs/ps0/*.data-*', bytes: 16}}\n"
             "  - {at: 2s, truncate: {host: \"worker:0\", path: t.log, size: 1K}}\n";
    char err[1024] = "";
    struct fl_scenario *s = NULL;
    FL_REQUIRE_MSG(fl_scenario_load_mem("s.yaml", text, strlen(text), &s, err, sizeof err) == 0 &&
                       s,
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
    FL_ASSERT_EQ(a->host, 1); /* the task's host */
    FL_ASSERT_EQ(a->rest.size, 1024);
    FL_ASSERT_STREQ(fl_scn_action_kind_name(a->kind), "truncate");
    fl_scenario_free(s);
}
