/*
 * test_cli_gc.c: `faultline gc` on run directories that a host's task may
 * have written (issue 21, item 4), without real runs: a run entry that is a
 * symlink is not followed, a state file's database path is neither created
 * nor migrated, and the directory's entries are removed without following
 * a symlink out of it.  (The engine_run tests kill real runs and gc them.)
 */
#include "harness/sys/rundir.h"
#include "harness/tests/fl_test.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* A pid that was a process of ours and is gone (reaped). */
static pid_t dead_pid(void)
{
    pid_t pid = fork();
    if (pid == 0)
        _exit(0);
    waitpid(pid, NULL, 0);
    return pid;
}

/* <test dir>/out/runs/<id>/state saying "running", with a harness gone. */
static void write_run(const char *id, const char *db)
{
    char dir[4200], text[8192];
    snprintf(dir, sizeof dir, "%s/out/runs/%s", fl_test_dir(), id);
    FL_REQUIRE_EQ(fl_mkdir_p(dir, 0755), 0);
    snprintf(text, sizeof text,
             "run_id %s\nscenario s\nvariant default\ndb %s\nworkdir \nstatus running\n"
             "harness %d 1\n",
             id, db, (int)dead_pid());
    char state[4300];
    snprintf(state, sizeof state, "%s/state", dir);
    FL_REQUIRE_EQ(fl_write_file(state, text, strlen(text)), 0);
}

static int gc(char **out)
{
    return fl_test_sh(out, "FAULTLINE_RUNS_LOCK=%s/lock %s gc --out %s/out 2>&1", fl_test_dir(),
                      fl_test_bin("faultline"), fl_test_dir());
}

FL_TEST(cli_gc, state_file_database_is_not_created)
{
    char db[4200];
    snprintf(db, sizeof db, "%s/elsewhere/made.db", fl_test_dir());
    write_run("20260101-000000-aaaaaa", db);
    char *out;
    int rc = gc(&out);
    FL_ASSERT_MSG(rc == 0, "gc exited %d: %s", rc, out);
    FL_ASSERT_CONTAINS(out, "removing run 20260101-000000-aaaaaa");
    FL_ASSERT_CONTAINS(out, "not a faultline database that records it");
    free(out);
    snprintf(db, sizeof db, "%s/elsewhere", fl_test_dir());
    FL_ASSERT_MSG(access(db, F_OK) != 0, "gc created %s, named by a state file", db);
}

FL_TEST(cli_gc, symlinks_in_the_runs_are_not_followed)
{
    /* a directory outside the runs, with what a run directory holds */
    char victim[4200], path[4400];
    snprintf(victim, sizeof victim, "%s/victim", fl_test_dir());
    FL_REQUIRE_EQ(fl_mkdir_p(victim, 0755), 0);
    snprintf(path, sizeof path, "%s/precious", victim);
    FL_REQUIRE_EQ(fl_write_file(path, "x", 1), 0);
    char text[512];
    snprintf(text, sizeof text, "run_id x\nstatus running\nharness %d 1\n", (int)dead_pid());
    snprintf(path, sizeof path, "%s/state", victim);
    FL_REQUIRE_EQ(fl_write_file(path, text, strlen(text)), 0);
    /* a run entry that is a symlink to it, and a run whose disks are one */
    write_run("20260101-000000-bbbbbb", "");
    char link[4400];
    snprintf(link, sizeof link, "%s/out/runs/20260101-000000-cccccc", fl_test_dir());
    FL_REQUIRE_EQ(symlink(victim, link), 0);
    snprintf(link, sizeof link, "%s/out/runs/20260101-000000-bbbbbb/fs", fl_test_dir());
    FL_REQUIRE_EQ(symlink(victim, link), 0);
    char *out;
    int rc = gc(&out);
    FL_ASSERT_MSG(rc == 0, "gc exited %d: %s", rc, out);
    FL_ASSERT(strstr(out, "20260101-000000-cccccc") == NULL);
    snprintf(path, sizeof path, "%s/precious", victim);
    FL_ASSERT_MSG(access(path, F_OK) == 0, "gc removed %s through a symlink: %s", path, out);
    free(out);
    /* the symlink itself is gone with the run's disks */
    struct stat sb;
    FL_ASSERT(lstat(link, &sb) != 0);
}
