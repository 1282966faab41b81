/*
 * test_engine_host_root.c: each host's root of its own (harness/sys/host.c,
 * "A root of its own"): what a host writes outside its disk is its own,
 * kept by a restart, gone with a replace, never on the machine; a host
 * finds neither another host's disk nor the run's files by any path; its
 * /sys shows its own network devices, its /dev is its own; root in it is
 * root of that host only (unless privileged: true).  Each runs the real
 * faultline binary on a scenario of harness/tests/scenarios/ with real hosts.
 */
#include "harness/tests/fl_test.h"

#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static void require_setup(void)
{
    fl_test_need_root();
    if (access(fl_test_bin("fl-probe"), X_OK) != 0)
        FL_SKIP("build/bin/fl-probe is not built");
}

static size_t machine_has(const char *pattern)
{
    glob_t g;
    size_t n = glob(pattern, 0, NULL, &g) == 0 ? g.gl_pathc : 0;
    for (size_t i = 0; i < n; i++)
        unlink(g.gl_pathv[i]); /* so that a failure leaves nothing either */
    globfree(&g);
    return n;
}

/* /var/tmp, /etc and /root written on host a: kept by restart, gone after
 * replace, never seen by host b, and not on the machine after the run. */
FL_TEST_ROOT_T(engine_host_root, files_outside_disk_are_the_hosts_own, 90)
{
    require_setup();
    static const char *const pats[] = {"/var/tmp/fl-it-root-private.*", "/etc/fl-it-root-private.*",
                                       "/root/fl-it-root-private.*"};
    for (size_t i = 0; i < 3; i++)
        machine_has(pats[i]); /* a failed run of an older build */
    fl_test_scenario_passes("root-private.yaml");
    for (size_t i = 0; i < 3; i++)
        FL_ASSERT_MSG(machine_has(pats[i]) == 0, "%s on the machine after the run", pats[i]);
}

/* Host a walks its whole mount table and filesystem: host b's disk is not
 * there, nor the run's state file (or logs, or tmpfs) beside the event
 * socket it is given. */
FL_TEST_ROOT_T(engine_host_root, host_finds_no_other_disk_nor_run_files, 180)
{
    require_setup();
    fl_test_scenario_passes("root-isolation.yaml");
}

/* /sys/class/net lists the host's own devices, not the machine's; /dev is
 * its own too. */
FL_TEST_ROOT_T(engine_host_root, sys_and_dev_are_the_hosts_own, 60)
{
    require_setup();
    machine_has("/dev/fl-it-root-dev.*");
    fl_test_scenario_passes("root-sys.yaml");
    FL_ASSERT_EQ(fl_test_scenario_db_int("SELECT count(*) FROM runs"), 1);
    FL_ASSERT_MSG(machine_has("/dev/fl-it-root-dev.*") == 0, "a host's /dev file on the machine");
}

/* A filesystem mounted right below / on the machine (an overlay of / does
 * not hold it) is seen, read-only.  The tmpfs at /mnt lives in a mount
 * namespace of the test's own. */
FL_TEST_ROOT_T(engine_host_root, machine_submounts_seen_read_only, 60)
{
    require_setup();
    char *o = NULL;
    int rc = fl_test_sh(&o,
                        "unshare -m sh -c 'mount --make-rprivate / && mount -t tmpfs fl-it /mnt && "
                        "echo sub > /mnt/fl-it-sub && %s run -q --no-db --out %s/o "
                        "%s/harness/tests/scenarios/root-submount.yaml' 2>&1",
                        fl_test_bin("faultline"), fl_test_dir(), fl_test_root());
    FL_ASSERT_MSG(rc == 0, "exit %d: %s", rc, o ? o : "");
    free(o);
}

/* Root in a host is root of that host only (harness/sys/userns.c): every
 * probe of root_probe.py fails on host a, and the machine is as it was
 * (no link, nothing planted beside the scenario, no /etc file); on a host
 * with privileged: true the same task is the machine's root. */
FL_TEST_ROOT_T(engine_host_root, root_in_a_host_is_root_of_that_host_only, 60)
{
    require_setup();
    char planted[4096];
    snprintf(planted, sizeof planted, "%s/harness/tests/scenarios/fl-it-planted", fl_test_root());
    unlink(planted);
    machine_has("/etc/fl-it-root-confined");
    fl_test_scenario_passes("root-confined.yaml");
    FL_ASSERT_MSG(access(planted, F_OK) != 0, "a host wrote %s", planted);
    FL_ASSERT_MSG(machine_has("/etc/fl-it-root-confined") == 0,
                  "a host's /etc file on the machine");
    FL_ASSERT_MSG(fl_test_sh(NULL, "ip link show flp0 >/dev/null 2>&1") != 0,
                  "link flp0 in the machine's network namespace");
}
