/*
 * test_sys_shared_leftovers.c: the workdir a run makes and the faultline/
 * parent cgroups are removed by the last run to end (and by gc after a
 * killed one), never while another run holds the runs lock, and a workdir
 * faultline did not make is never removed.  Each test uses a private runs
 * lock (FAULTLINE_RUNS_LOCK) so that runs of other checkouts on the same
 * machine do not decide what "last" means here.
 */
#include "harness/tests/fl_test.h"
#include "harness/sys/cgroup.h"
#include "harness/sys/rundir.h"
#include "harness/sys/shared_leftovers.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static void private_lock(void)
{
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/runs.lock", fl_test_dir());
    setenv("FAULTLINE_RUNS_LOCK", p, 1);
}

static bool exists(const char *fmt, const char *a)
{
    char p[PATH_MAX];
    snprintf(p, sizeof p, fmt, a);
    return access(p, F_OK) == 0;
}

FL_TEST(sys_shared_leftovers, workdir_mark_on_topmost_made)
{
    const char *d = fl_test_dir();
    char w[PATH_MAX], keep[PATH_MAX];
    snprintf(keep, sizeof keep, "%s/kept", d);
    FL_REQUIRE_EQ(mkdir(keep, 0755), 0);
    snprintf(w, sizeof w, "%s/kept/x/y/wd", d);
    FL_REQUIRE_EQ(fl_workdir_make(w), 0);
    FL_ASSERT(exists("%s/kept/x/" FL_WORKDIR_MARK, d));
    FL_ASSERT(!exists("%s/kept/" FL_WORKDIR_MARK, d));
    FL_ASSERT(!exists("%s/kept/x/y/wd/" FL_WORKDIR_MARK, d));
    /* making it again (another run) changes nothing */
    FL_REQUIRE_EQ(fl_workdir_make(w), 0);
    FL_ASSERT_EQ(fl_workdir_remove(w), 1);
    FL_ASSERT(!exists("%s/kept/x", d));
    FL_ASSERT(exists("%s/kept", d)); /* not ours */
}

FL_TEST(sys_shared_leftovers, workdir_not_made_is_kept)
{
    char w[PATH_MAX];
    snprintf(w, sizeof w, "%s/theirs", fl_test_dir());
    FL_REQUIRE_EQ(mkdir(w, 0755), 0);
    FL_REQUIRE_EQ(fl_workdir_make(w), 0);
    FL_ASSERT(!exists("%s/" FL_WORKDIR_MARK, w));
    FL_ASSERT_EQ(fl_workdir_remove(w), 0);
    FL_ASSERT(exists("%s", w));
}

FL_TEST(sys_shared_leftovers, workdir_with_files_is_kept_and_stays_marked)
{
    char w[PATH_MAX], f[PATH_MAX + 8];
    snprintf(w, sizeof w, "%s/m/wd", fl_test_dir());
    FL_REQUIRE_EQ(fl_workdir_make(w), 0);
    snprintf(f, sizeof f, "%s/file", w);
    FL_REQUIRE_EQ(fl_write_file(f, "x", 1), 0);
    FL_ASSERT_EQ(fl_workdir_remove(w), -ENOTEMPTY);
    FL_ASSERT(exists("%s", f));
    unlink(f);
    FL_ASSERT_EQ(fl_workdir_remove(w), 1); /* still ours: removed now */
    FL_ASSERT(!exists("%s/m", fl_test_dir()));
}

FL_TEST(sys_shared_leftovers, lock_last_only_without_other_holders)
{
    private_lock();
    int p[2];
    FL_REQUIRE_EQ(pipe(p), 0);
    pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        int fd = fl_runs_lock(false);
        if (write(p[1], "x", 1) != 1 || fd < 0)
            _exit(1);
        pause();
        _exit(0);
    }
    close(p[1]);
    char c;
    FL_REQUIRE_EQ(read(p[0], &c, 1), 1); /* the other "run" holds it */
    int fd = fl_runs_lock(false);
    FL_REQUIRE_GE(fd, 0);
    FL_ASSERT(!fl_runs_lock_try_last(fd)); /* closes fd */
    FL_ASSERT_EQ(fl_runs_lock(true), -EWOULDBLOCK);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    fd = fl_runs_lock(false);
    FL_REQUIRE_GE(fd, 0);
    FL_ASSERT(fl_runs_lock_try_last(fd));
    fl_runs_lock_release(fd, true);
    FL_ASSERT(access(getenv("FAULTLINE_RUNS_LOCK"), F_OK) != 0);
    close(p[0]);
}

static void rm_tree(const char *p)
{
    char *out = NULL;
    fl_test_sh(&out, "rm -rf '%s'", p);
    free(out);
}

FL_TEST_ROOT(sys_shared_leftovers, run_removes_its_workdir_and_parent_cgroup)
{
    fl_test_need_root();
    private_lock();
    rm_tree("/srv/fl-test-made");
    fl_test_scenario_passes("workdir-made.yaml");
    FL_ASSERT_MSG(access("/srv/fl-test-made", F_OK) != 0, "the workdir the run made is left");
    FL_ASSERT(access(getenv("FAULTLINE_RUNS_LOCK"), F_OK) != 0);
    /* the faultline/ parent cgroup: gone, unless another checkout's run
     * (not under this private lock) has cgroups in it right now */
    char root[PATH_MAX];
    if (fl_cgroup_root(root, sizeof root) > 0) {
        DIR *d = opendir(root);
        int n = 0;
        struct dirent *e;
        while (d && (e = readdir(d)))
            n += e->d_type == DT_DIR && e->d_name[0] != '.';
        if (d)
            closedir(d);
        FL_ASSERT_MSG(!d || n > 0, "%s is left empty", root);
    }
    rm_tree("/srv/fl-test-made");
}

FL_TEST_ROOT(sys_shared_leftovers, run_keeps_workdir_another_run_holds)
{
    fl_test_need_root();
    private_lock();
    rm_tree("/srv/fl-test-made");
    int fd = fl_runs_lock(false); /* "another run" */
    FL_REQUIRE_GE(fd, 0);
    fl_test_scenario_passes("workdir-made.yaml");
    FL_ASSERT_MSG(access("/srv/fl-test-made/" FL_WORKDIR_MARK, F_OK) == 0,
                  "the workdir was removed under another run");
    /* that run ends last: it removes it */
    FL_ASSERT(fl_runs_lock_try_last(fd));
    FL_ASSERT_EQ(fl_workdir_remove("/srv/fl-test-made/wd"), 1);
    fl_runs_lock_release(fd, true);
    FL_ASSERT(access("/srv/fl-test-made", F_OK) != 0);
    rm_tree("/srv/fl-test-made");
}

struct up_ctx {
    char runs[PATH_MAX];
};

static bool run_is_up(void *arg)
{
    struct up_ctx *u = arg;
    char *out = NULL;
    int rc = fl_test_sh(&out, "cat %s/*/logs/a.sleeper.0.0.log 2>/dev/null | grep -q UP", u->runs);
    free(out);
    return rc == 0;
}

FL_TEST_ROOT_T(sys_shared_leftovers, gc_removes_workdir_of_killed_run, 60)
{
    fl_test_need_root();
    private_lock();
    rm_tree("/srv/fl-test-gc");
    struct up_ctx u;
    snprintf(u.runs, sizeof u.runs, "%s/out/runs", fl_test_dir());
    pid_t pid = fl_test_scenario_start("long-workdir.yaml");
    FL_REQUIRE_MSG(fl_test_wait_until(run_is_up, &u, 20000), "the run did not come up");
    FL_ASSERT(access("/srv/fl-test-gc/" FL_WORKDIR_MARK, F_OK) == 0);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    FL_ASSERT(access("/srv/fl-test-gc/wd", F_OK) == 0); /* the killed run could not */
    char *out;
    int rc = fl_test_sh(&out, "%s gc --out %s/out 2>&1", fl_test_bin("faultline"), fl_test_dir());
    FL_ASSERT_MSG(rc == 0, "gc exited %d: %s", rc, out);
    FL_ASSERT_CONTAINS(out, "removed workdir /srv/fl-test-gc/wd");
    free(out);
    FL_ASSERT_MSG(access("/srv/fl-test-gc", F_OK) != 0, "gc left the workdir of the killed run");
    rm_tree("/srv/fl-test-gc");
}
