/*
 * test_cli_workdir.c: `faultline run` and `shell` refuse a workdir that
 * holds a directory the hosts need from the machine ({bin},
 * {scenario_dir}, the run directories): each host's disk would hide it.
 */
#include "harness/tests/fl_test.h"

#include <stdlib.h>
#include <string.h>

/* A workdir that holds a directory the hosts need from the machine (here
 * the scenario's own, {scenario_dir}) hides it behind each host's disk:
 * refused before anything runs (it failed as exit 127 of the task). */
FL_TEST(cli_workdir, run_refuses_workdir_over_scenario_dir)
{
    char dir[] = "/var/tmp/fl-test-wd-XXXXXX", *out;
    FL_REQUIRE(mkdtemp(dir) != NULL);
    FL_REQUIRE_EQ(fl_test_sh(NULL,
                             "printf '%%s\\n' 'name: t' 'workdir: %s' 'hosts: [a]' "
                             "'cluster: {ps: [a]}' 'run: {command: \"cat {scenario_dir}/s.yaml\"}' "
                             "> %s/s.yaml",
                             dir, dir),
                  0);
    int rc = fl_test_sh(&out,
                        "cd %s && %s run -q --no-db --out %s/out %s/s.yaml 2>&1; "
                        "echo rc=$?; %s shell --out %s/out %s/s.yaml a 2>&1",
                        fl_test_dir(), fl_test_bin("faultline"), fl_test_dir(), dir,
                        fl_test_bin("faultline"), fl_test_dir(), dir);
    FL_ASSERT_EQ(rc, 2);
    FL_ASSERT_CONTAINS(out, "rc=2");
    FL_ASSERT_CONTAINS(out, "would hide");
    FL_ASSERT_CONTAINS(out, "{scenario_dir}");
    free(out);
    FL_ASSERT_EQ(fl_test_sh(NULL, "test ! -e %s/out", fl_test_dir()), 0);
    fl_test_sh(NULL, "rm -rf %s", dir);
}
