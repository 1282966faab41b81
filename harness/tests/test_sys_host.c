/*
 * test_sys_host.c: bringing hosts up reports the failure that happened: an
 * init that fails a step of its own set-up (a mount) is named with that
 * step and path, not hidden behind the fabric's error about its vanished
 * namespaces.
 */
#include "harness/sys/host.h"
#include "harness/tests/fl_test.h"
#include "netem/fabric.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* An init that fails a mount of its own exits at once, and the fabric,
 * plugging in its namespaces meanwhile, may then fail too ("open
 * /proc/PID/ns/net: No such file or directory"): a race, so a few rounds.
 * The error must be the init's own: host, step, path. */
FL_TEST_ROOT(sys_host, up_batch_error_names_the_failed_mount_not_the_fabric)
{
    fl_test_need_root();
    char err[512] = "", tmp[4096], wd[4096], disk[4096];
    const char *d = fl_test_dir();
    snprintf(disk, sizeof disk, "%s/no-such-disk", d);
    snprintf(tmp, sizeof tmp, "%s/tmp", d);
    snprintf(wd, sizeof wd, "%s/wd", d);
    FL_REQUIRE(mkdir(tmp, 01777) == 0 && mkdir(wd, 0755) == 0);
    FL_REQUIRE_MSG(fl_host_global_init(err, sizeof err) == 0, "%s", err);
    struct fl_fabric *fab = NULL;
    FL_REQUIRE_MSG(fl_fabric_create(&fab, "t-upfail", err, sizeof err) == 0, "%s", err);
    for (int round = 0; round < 20; round++) {
        struct fl_host h = {
            .spec = {.name = "h0", .idx = 0, .disk_dir = disk, .tmp_dir = tmp, .workdir = wd},
            .pidfd = -1};
        struct fl_host *hp = &h;
        int rc = fl_host_up_batch(&hp, 1, fab, err, sizeof err);
        FL_ASSERT(rc < 0);
        FL_ASSERT_MSG(strstr(err, "host h0: mount disk at workdir ") &&
                          strstr(err, "No such file or directory"),
                      "round %d: %s", round, err);
        pid_t init = h.pid;
        fl_host_kill(&h);
        while (waitpid(init, NULL, 0) < 0 && errno == EINTR)
            ;
        fl_host_note_reaped(init);
    }
    fl_fabric_destroy(fab);
}
