/*
 * test_engine_leftovers.c: what a run leaves on the machine: files its tasks
 * made in places that every mount namespace shares unless the host covers
 * them (/dev/shm), and a cgroup its end could not remove (said, and left
 * to `faultline gc`); and what it must not remove: the default workdir
 * under a private runs lock.
 * Each test runs the real faultline binary on a scenario it writes into its
 * own directory, with names that carry the test's pid, so that runs of
 * others on the machine are never mistaken for ours.
 */
#include "harness/sys/cgroup.h"
#include "harness/scenario/scenario.h"
#include "harness/sys/shared_leftovers.h"
#include "harness/tests/fl_test.h"

#include <errno.h>
#include <sched.h>
#include <sys/mount.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A task that makes a file in /dev/shm and is then killed (as libfaketime's
 * faketime_shm_PID is left by every process that dies without exit()): the
 * file must vanish with the host, not stay in the machine's /dev/shm.  The
 * host's /dev/shm is its own, so another host does not see the file. */
FL_TEST_ROOT_T(engine_leftovers, dev_shm_of_a_host_vanishes_with_it, 60)
{
    fl_test_need_root();
    if (access("/dev/shm", F_OK) != 0)
        FL_SKIP("this machine has no /dev/shm");
    char name[64], machine[128];
    snprintf(name, sizeof name, "fl-test-shm-%d", (int)getpid());
    snprintf(machine, sizeof machine, "/dev/shm/%s", name);
    unlink(machine);
    char text[2048];
    snprintf(text, sizeof text,
             "name: shm-left\n"
             "hosts: [a]\n"
             "cluster:\n"
             "  maker: [a]\n"
             "run:\n"
             "  command: |\n"
             "    echo x > /dev/shm/%s\n"
             "    echo \"a sees $(ls -A /dev/shm | wc -l)\"\n"
             "    kill -KILL $$\n"
             "expect:\n"
             "  all:\n"
             "    maker: {signal: SIGKILL, log_matches: '^a sees 1$'}\n",
             name);
    const char *path = fl_test_write("shm.yaml", text);
    char *out;
    int rc = fl_test_sh(&out, "%s run -q --out %s/out --db %s/fl.db %s 2>&1",
                        fl_test_bin("faultline"), fl_test_dir(), fl_test_dir(), path);
    bool left = access(machine, F_OK) == 0;
    unlink(machine);
    FL_ASSERT_MSG(rc == 0, "faultline run exited %d:\n%s", rc, out);
    free(out);
    FL_ASSERT_MSG(!left, "%s made on host a is left in the machine's /dev/shm", machine);
}

/* A cgroup of the run that cannot be removed at its end (every rmdir of the
 * harness fails here, by strace's fault injection) is named on stderr with
 * what removes it, and `faultline gc` does, once the harness has ended. */
FL_TEST_ROOT_T(engine_leftovers, cgroup_left_at_end_named_gc_removes, 90)
{
    fl_test_need_root();
    if (system("strace -V >/dev/null 2>&1") != 0)
        FL_SKIP("needs strace (ci/install-deps installs it) to make the harness's rmdir fail");
    /* LeakSanitizer stops a process's threads with ptrace at its exit,
     * which a process strace traces refuses */
    fl_test_asan_options("detect_leaks=0");
    char root[4096];
    if (fl_cgroup_root(root, sizeof root) <= 0)
        FL_SKIP("no pids cgroup hierarchy on this machine");
    char *out;
    int rc =
        fl_test_sh(&out,
                   "strace -o /dev/null -e inject=rmdir:error=EIO:when=1+ "
                   "%s run --out %s/o --db %s/fl.db %s/harness/tests/scenarios/limit.yaml 2>&1",
                   fl_test_bin("faultline"), fl_test_dir(), fl_test_dir(), fl_test_root());
    char *id = NULL;
    FL_REQUIRE_EQ(
        fl_test_sh(&id, "sqlite3 %s/fl.db 'SELECT run_id FROM runs' | tr -d '\\n'", fl_test_dir()),
        0);
    char cg[4096];
    snprintf(cg, sizeof cg, "%s/%s", root, id);
    FL_ASSERT_MSG(rc == 0, "the run exited %d:\n%s", rc, out);
    char want[4200];
    snprintf(want, sizeof want,
             "removing cgroup %s: Input/output error (left behind: `faultline gc`", cg);
    FL_ASSERT_CONTAINS(out, want);
    free(out);
    FL_ASSERT_MSG(access(cg, F_OK) == 0, "cgroup %s was removed though rmdir failed", cg);
    rc = fl_test_sh(&out, "%s gc --out %s/o 2>&1", fl_test_bin("faultline"), fl_test_dir());
    FL_ASSERT_MSG(rc == 0, "gc exited %d: %s", rc, out);
    FL_ASSERT_CONTAINS(out, cg);
    free(out);
    FL_ASSERT_MSG(access(cg, F_OK) != 0, "gc left cgroup %s", cg);
    free(id);
}

/* Under a private runs lock (FAULTLINE_RUNS_LOCK, as tests use) the default
 * workdir is not removed: runs of other checkouts hold the machine's lock,
 * not this one, and an rmdir of their workdir detaches their hosts' disks.
 * The test works on a tmpfs over /srv in a mount namespace of its own, so
 * the machine's /srv/faultline is never touched. */
FL_TEST_ROOT(engine_leftovers, private_lock_spares_default_workdir)
{
    fl_test_need_root();
    FL_REQUIRE_MSG(unshare(CLONE_NEWNS) == 0, "unshare(CLONE_NEWNS): %s", strerror(errno));
    FL_REQUIRE(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0);
    if (mount("fl-test-srv", "/srv", "tmpfs", 0, "mode=755") < 0)
        FL_SKIP("cannot mount a tmpfs at /srv: %s", strerror(errno));
    FL_REQUIRE_EQ(fl_workdir_make(FL_SCN_DEFAULT_WORKDIR), 0);
    char lock[4096];
    snprintf(lock, sizeof lock, "%s/runs.lock", fl_test_dir());
    setenv("FAULTLINE_RUNS_LOCK", lock, 1);
    FL_ASSERT_EQ(fl_workdir_remove(FL_SCN_DEFAULT_WORKDIR), 0);
    FL_ASSERT_MSG(access(FL_SCN_DEFAULT_WORKDIR, F_OK) == 0,
                  "the default workdir was removed under a private lock");
    unsetenv("FAULTLINE_RUNS_LOCK");
    FL_ASSERT_EQ(fl_workdir_remove(FL_SCN_DEFAULT_WORKDIR), 1); /* the machine's lock may */
    FL_ASSERT(access(FL_SCN_DEFAULT_WORKDIR, F_OK) != 0);
    umount2("/srv", MNT_DETACH);
}
