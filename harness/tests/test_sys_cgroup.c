/*
 * test_sys_cgroup.c: fl_cgroup_freeze (harness/sys/cgroup.c) on real cgroups:
 * a v1 freezer cgroup and a v2 cgroup (where a cgroup2 hierarchy is mounted,
 * also beside v1 at /sys/fs/cgroup/unified) stop a process that left its
 * session (setsid) and let it go on once thawed.
 */
#include "harness/sys/cgroup.h"
#include "harness/tests/fl_test.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <time.h>

#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

static bool counter_moved(void *arg)
{
    volatile unsigned long *c = ((volatile unsigned long **)arg)[0];
    unsigned long from = *((unsigned long **)arg)[1];
    return *c != from;
}

/* A child counting in shared memory joins a fresh cgroup under parent:
 * frozen, its counter stands still; thawed, it moves again; a SIGKILL
 * while frozen ends it once thawed; the cgroup is removed. */
static void freeze_stops_and_thaws(const char *parent)
{
    char cg[4096], procs[4200];
    snprintf(cg, sizeof cg, "%s/fl-test-freezer-%d", parent, (int)getpid());
    FL_REQUIRE_MSG(mkdir(cg, 0755) == 0, "mkdir %s: %s", cg, strerror(errno));
    volatile unsigned long *counter =
        mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    FL_REQUIRE(counter != MAP_FAILED);
    *counter = 0;
    snprintf(procs, sizeof procs, "%s/cgroup.procs", cg);
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(procs, O_WRONLY);
        if (fd < 0 || write(fd, "0\n", 2) != 2)
            _exit(1);
        close(fd);
        /* its own session: a pause must not depend on the process group */
        setsid();
        for (;;) {
            (*counter)++;
            sleep_ms(1);
        }
    }
    FL_REQUIRE(pid > 0);
    unsigned long zero = 0, at;
    void *arg0[2] = {(void *)counter, &zero};
    bool started = fl_test_wait_until(counter_moved, arg0, 5000);
    FL_ASSERT_MSG(started, "the child did not start counting");
    int rc = fl_cgroup_freeze(cg, true, 2000);
    FL_ASSERT_EQ(rc, 0);
    at = *counter;
    sleep_ms(200); /* the window in which it must not move */
    FL_ASSERT_MSG(*counter == at, "counter moved while frozen: %lu -> %lu", at, *counter);
    rc = fl_cgroup_freeze(cg, false, 0);
    FL_ASSERT_EQ(rc, 0);
    void *arg1[2] = {(void *)counter, &at};
    FL_ASSERT_MSG(fl_test_wait_until(counter_moved, arg1, 5000),
                  "counter still at %lu after the thaw", at);
    /* frozen again, then killed: it dies once thawed */
    FL_ASSERT_EQ(fl_cgroup_freeze(cg, true, 2000), 0);
    FL_ASSERT_EQ(fl_cgroup_signal(cg, SIGKILL), 1);
    FL_ASSERT_EQ(fl_cgroup_freeze(cg, false, 0), 0);
    int ws = 0;
    FL_ASSERT_EQ(waitpid(pid, &ws, 0), pid);
    FL_ASSERT_MSG(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL, "child status %d", ws);
    for (int i = 0; i < 100 && rmdir(cg) < 0 && errno == EBUSY; i++)
        sleep_ms(10);
    FL_ASSERT_MSG(access(cg, F_OK) != 0, "%s left", cg);
    munmap((void *)counter, 4096);
}

FL_TEST_ROOT_T(sys_cgroup, freeze_v1_stops_a_setsid_process_and_thaws_it, 30)
{
    fl_test_need_root();
    if (access("/sys/fs/cgroup/freezer/freezer.state", F_OK) != 0 &&
        access("/sys/fs/cgroup/freezer/tasks", F_OK) != 0)
        FL_SKIP("no v1 freezer hierarchy at /sys/fs/cgroup/freezer");
    freeze_stops_and_thaws("/sys/fs/cgroup/freezer");
}

/* The v2 path (cgroup.freeze, "frozen 1" in cgroup.events): where the
 * unified hierarchy is /sys/fs/cgroup, or mounted beside v1. */
FL_TEST_ROOT_T(sys_cgroup, freeze_v2_stops_a_setsid_process_and_thaws_it, 30)
{
    fl_test_need_root();
    const char *roots[] = {"/sys/fs/cgroup", "/sys/fs/cgroup/unified"};
    for (int i = 0; i < 2; i++) {
        struct statfs sf;
        char f[128];
        snprintf(f, sizeof f, "%s/cgroup.procs", roots[i]);
        if (statfs(roots[i], &sf) == 0 && sf.f_type == CGROUP2_SUPER_MAGIC &&
            access(f, W_OK) == 0) {
            freeze_stops_and_thaws(roots[i]);
            return;
        }
    }
    FL_SKIP("no cgroup2 hierarchy mounted");
}
