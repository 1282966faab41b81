/*
 * test_faults_at_rest.c: the corrupt: and truncate: fault kinds at run time
 * (harness/faults/at_rest.c), on real hosts: exactly the bytes asked for
 * change in every matching file of the target host only and what changed is
 * recorded; a glob matching nothing is a run-time error naming host and
 * glob; and what psrt makes of a corrupt checkpoint: robust restores the
 * shard from its other copy, legacy fails naming the file.
 */
#include "harness/tests/fl_test.h"

#include <stdlib.h>
#include <unistd.h>

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
FL_TEST_ROOT_T(faults_at_rest, corrupt_and_truncate_change_target_files_only, 60)
{
    require_setup();
    fl_test_scenario_passes("disk-at-rest.yaml");
    FL_ASSERT_EQ(fl_test_scenario_db_int(
                     "SELECT count(*) FROM faults WHERE kind='corrupt' AND target='a' "
                     "AND detail GLOB 'path=data/[*].bin bytes=8: data/1.bin@*,*,*,*,*,*,*,* "
                     "data/2.bin@*,*,*,*,*,*,*,*' AND error IS NULL"),
                 1);
    FL_ASSERT_EQ(fl_test_scenario_db_int(
                     "SELECT count(*) FROM faults WHERE kind='truncate' AND target='a' "
                     "AND detail='path=t.log size=100: t.log 4096->100' AND error IS NULL"),
                 1);
}

/* A glob that matches nothing: the run ends in ERROR, the message names the
 * fault, the host and the glob, and the fault's row has it as its error. */
FL_TEST_ROOT_T(faults_at_rest, no_match_is_error_naming_host_and_glob, 60)
{
    require_setup();
    char *out = NULL;
    int rc = fl_test_sh(&out,
                        "cd %s && %s run --out out --db fl.db "
                        "%s/harness/tests/scenarios/disk-at-rest-nomatch.yaml 2>&1",
                        fl_test_dir(), fl_test_bin("faultline"), fl_test_root());
    FL_ASSERT_NE(rc, 0);
    FL_ASSERT_MSG(out && strstr(out, "ERROR") &&
                      strstr(out, "fault 1 (corrupt a, line 13): host a: corrupt: no file matches"),
                  "output: %s", out ? out : "");
    char *q = NULL;
    fl_test_sh(&q, "sqlite3 %s/fl.db \"SELECT error FROM faults WHERE kind='corrupt'\"",
               fl_test_dir());
    FL_ASSERT_MSG(q && strstr(q, "host a: corrupt: no file matches "
                                 "'train_logs/model.ckpt-*.data-*' in its workdir ("),
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
FL_TEST_ROOT_T(faults_at_rest, psrt_robust_restores_from_other_copy, 90)
{
    require_psrt();
    fl_test_scenario_passes("disk-corrupt-robust.yaml");
    FL_ASSERT_EQ(fl_test_scenario_db_int(
                     "SELECT count(*) FROM faults WHERE kind='corrupt' AND target='ps0' "
                     "AND detail LIKE 'path=train_logs/ps0/model.ckpt-*.data-* bytes=16: "
                     "train_logs/ps0/model.ckpt-%.data-00000-of-00001@%' AND error IS NULL"),
                 1);
}

/* legacy: the one copy corrupted: the relaunched chief's restore fails with
 * DataLossError naming the data file and the checksum (the scenario). */
FL_TEST_ROOT_T(faults_at_rest, psrt_legacy_fails_with_checksum_error, 90)
{
    require_psrt();
    fl_test_scenario_passes("disk-corrupt-legacy.yaml");
}
