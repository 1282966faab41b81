/*
 * test_disk_at_rest.c: the corrupt: and truncate: fault kinds (files at
 * rest on a host's disk changed when the fault fires, harness/faults/at_rest.c):
 * how they load, that on real hosts exactly the bytes asked for change in
 * every matching file of the target host only and what changed is recorded,
 * that a glob matching nothing is a run-time error naming host and glob, and
 * what psrt makes of a corrupt checkpoint: robust restores the shard from
 * its other copy, legacy fails naming the file.
 */
#include "harness/scenario/scenario.h"
#include "harness/tests/fl_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BASE                                                                   \
    "name: t\n"                                                                \
    "hosts: [ps0, w0]\n"                                                       \
    "cluster:\n"                                                               \
    "  ps: [ps0]\n"                                                            \
    "  worker: [w0]\n"                                                         \
    "run:\n"                                                                   \
    "  command: \"sleep 1\"\n"

FL_TEST(disk_at_rest, load_corrupt_and_truncate)
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

static void require_setup(void)
{
    fl_test_need_root();
    if (access(fl_test_bin("faultline"), X_OK) != 0)
        FL_SKIP("build/bin/faultline is not built");
}

/* corrupt 8 bytes of each .bin file under data/ and truncate t.log to 100 on host a at a
 * sync point: each .bin on a differs from its copy in exactly 8 bytes,
 * t.log has 100 bytes; b's files are untouched (the scenario); the faults'
 * rows name each file with its offsets or sizes. */
FL_TEST_ROOT_T(disk_at_rest, corrupt_and_truncate_change_target_files_only, 60)
{
    require_setup();
    fl_test_scenario_passes("disk-at-rest.yaml");
    FL_ASSERT_EQ(fl_test_scenario_db_int("SELECT count(*) FROM faults WHERE kind='corrupt' AND target='a' "
                        "AND detail GLOB 'path=data/[*].bin bytes=8: data/1.bin@*,*,*,*,*,*,*,* "
                        "data/2.bin@*,*,*,*,*,*,*,*' AND error IS NULL"), 1);
    FL_ASSERT_EQ(fl_test_scenario_db_int("SELECT count(*) FROM faults WHERE kind='truncate' AND target='a' "
                        "AND detail='path=t.log size=100: t.log 4096->100' AND error IS NULL"), 1);
}

/* A glob that matches nothing: the run ends in ERROR, the message names the
 * fault, the host and the glob, and the fault's row has it as its error. */
FL_TEST_ROOT_T(disk_at_rest, no_match_is_error_naming_host_and_glob, 60)
{
    require_setup();
    char *out = NULL;
    int rc = fl_test_sh(&out, "cd %s && %s run --out out --db fl.db %s/harness/tests/scenarios/disk-at-rest-nomatch.yaml 2>&1",
                        fl_test_dir(), fl_test_bin("faultline"), fl_test_root());
    FL_ASSERT_NE(rc, 0);
    FL_ASSERT_MSG(out && strstr(out, "ERROR") &&
                      strstr(out, "fault 1 (corrupt a, line 13): host a: corrupt: no file matches"),
                  "output: %s", out ? out : "");
    char *q = NULL;
    fl_test_sh(&q, "sqlite3 %s/fl.db \"SELECT error FROM faults WHERE kind='corrupt'\"", fl_test_dir());
    FL_ASSERT_MSG(q && strstr(q, "host a: corrupt: no file matches 'train_logs/model.ckpt-*.data-*' in its workdir ("),
                  "error row: %s", q ? q : "");
    free(out);
    free(q);
}

static void require_psrt(void)
{
    require_setup();
    if (access(fl_test_bin("psrt"), X_OK) != 0)
        FL_SKIP("build/bin/psrt is not built");
}

/* robust: ps0's own copies corrupted while the chief is down: the relaunched
 * chief restores shard 0 from its own copy and trains to the end. */
FL_TEST_ROOT_T(disk_at_rest, psrt_robust_restores_from_other_copy, 90)
{
    require_psrt();
    fl_test_scenario_passes("disk-corrupt-robust.yaml");
    FL_ASSERT_EQ(fl_test_scenario_db_int("SELECT count(*) FROM faults WHERE kind='corrupt' AND target='ps0' "
                        "AND detail LIKE 'path=train_logs/ps0/model.ckpt-*.data-* bytes=16: "
                        "train_logs/ps0/model.ckpt-%.data-00000-of-00001@%' AND error IS NULL"), 1);
}

/* legacy: the one copy corrupted: the relaunched chief's restore fails with
 * DataLossError naming the data file and the checksum (the scenario). */
FL_TEST_ROOT_T(disk_at_rest, psrt_legacy_fails_with_checksum_error, 90)
{
    require_psrt();
    fl_test_scenario_passes("disk-corrupt-legacy.yaml");
}
