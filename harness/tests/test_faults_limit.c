/*
 * test_faults_limit.c: the `limit` fault's open-files and memory limits, through
 * the faultline binary on real hosts: an open-files limit reaches a process
 * already running on the host and lifts at the heal; a memory limit makes
 * the kernel's OOM killer end the process that wants more, only there; and
 * the memory cgroups are gone after the run.
 */
#include "harness/tests/fl_test.h"
#include "harness/sys/cgroup.h"

#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Disk faults applied and replaced in a process while its host's limit of
 * 3 open files holds, and after the heal (limit-fds-disk.yaml): each is
 * taken, none records an error.  libfiu's control thread used to open its
 * fifos again for each command and end at the first EMFILE: the first of
 * them then failed "did not take the failure point commands". */
FL_TEST_ROOT(faults_limit, fds_leave_disk_fault_control_working)
{
    fl_test_need_root();
    if (system("python3 -c '' 2>/dev/null") != 0)
        FL_SKIP("needs python3 for the probe");
    fl_test_scenario_passes("limit-fds-disk.yaml");
    FL_ASSERT_EQ(fl_test_scenario_db_int("SELECT count(*) FROM faults WHERE kind='disk' AND "
                                         "error IS NULL"),
                 3);
}

FL_TEST_ROOT(faults_limit, fds_reach_running_process_and_lift)
{
    fl_test_need_root();
    if (system("python3 -c '' 2>/dev/null") != 0)
        FL_SKIP("needs python3 for the probe");
    fl_test_scenario_passes("limit-fds.yaml");
    FL_ASSERT_EQ(
        fl_test_scenario_db_int("SELECT count(*) FROM faults WHERE kind='limit' AND "
                                "detail LIKE 'fds=32 for=1000ms%' AND healed_ms IS NOT NULL"),
        1);
}

/* Entries of dir that are directories (cgroups), -1 when dir is missing. */
static int subdirs(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        n += e->d_type == DT_DIR && e->d_name[0] != '.';
    closedir(d);
    return n;
}

FL_TEST_ROOT(faults_limit, memory_oom_kills_only_on_limited_host)
{
    fl_test_need_root();
    char root[PATH_MAX];
    if (fl_cgroup_memory_root(root, sizeof root) < 0)
        FL_SKIP("no memory cgroup controller on this machine");
    if (system("python3 -c '' 2>/dev/null") != 0)
        FL_SKIP("needs python3 for the probe");
    int before = subdirs(root);
    fl_test_scenario_passes("limit-memory.yaml");
    FL_ASSERT_EQ(fl_test_scenario_db_int("SELECT count(*) FROM faults WHERE kind='limit' AND "
                                         "detail = 'memory=67108864'"),
                 1);
    /* the run's memory cgroup is gone (another checkout's runs may have
     * theirs there: no more than before) */
    int after = subdirs(root);
    FL_ASSERT_MSG(after <= (before < 0 ? 0 : before), "%s: %d cgroups before the run, %d after",
                  root, before, after);
}

FL_TEST_ROOT(faults_limit, psrt_ps_out_of_fds_then_accepts)
{
    fl_test_need_root();
    fl_test_scenario_passes("psrt-ps-out-of-fds.yaml");
}
