/*
 * test_engine_freezer.c: how a run uses the cgroup freezer, through the real
 * faultline binary on scenarios of harness/tests/scenarios/ whose task starts
 * a child that leaves its session (setsid): a pause must stop that child and
 * a kill reach it, a run without a pause makes no freezer cgroup, none of a
 * run's outlives it, nor a SIGKILLed harness once gc has run (gc kills and
 * thaws what it froze).
 */
#include "harness/sys/cgroup.h"
#include "harness/sys/rundir.h"
#include "harness/tests/fl_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

static void require_setup(void)
{
    fl_test_need_root();
    if (access(fl_test_bin("fl-probe"), X_OK) != 0)
        FL_SKIP("build/bin/fl-probe is not built");
}

static const char *scn(const char *name)
{
    static char path[4096];
    snprintf(path, sizeof path, "%s/harness/tests/scenarios/%s", fl_test_root(), name);
    return path;
}

static int db_int(const char *sql)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/fl.db", fl_test_dir());
    return fl_test_db_int(path, sql);
}

/* The run's freezer cgroup directory (<freezer root>/<run_id>). */
static void freezer_dir(const char *run_id, char *buf, size_t len)
{
    char root[4096];
    if (fl_cgroup_freezer_root(root, sizeof root) < 0)
        FL_SKIP("no cgroup freezer on this machine");
    snprintf(buf, len, "%s/%s", root, run_id);
}

static char *only_run_id(void)
{
    char *id;
    FL_REQUIRE_EQ(
        fl_test_sh(&id, "sqlite3 %s/fl.db 'SELECT run_id FROM runs' | tr -d '\\n'", fl_test_dir()),
        0);
    FL_REQUIRE(id[0] != 0);
    return id;
}

/* A paused task's setsid child makes no progress during the pause and does
 * after it: the child emits child.tick every ~20 ms, and no tick reaches
 * the harness between the pause and its heal (20 ms allowed for a tick
 * already sent when the pause landed).  The scenario itself checks its
 * tick file the same way (ctl). */
FL_TEST_ROOT_T(engine_freezer, pause_freezes_a_setsid_child, 60)
{
    require_setup();
    char *out;
    int rc =
        fl_test_sh(&out, "%s run -q --out %s/o --db %s/fl.db %s 2>&1", fl_test_bin("faultline"),
                   fl_test_dir(), fl_test_dir(), scn("pause-setsid.yaml"));
    FL_ASSERT_MSG(rc == 0, "faultline run exited %d:\n%s", rc, out);
    free(out);
    FL_REQUIRE_EQ(db_int("SELECT count(*) FROM faults WHERE kind='pause' AND error IS NULL "
                         "AND healed_ms IS NOT NULL"),
                  1);
    FL_ASSERT_GE(db_int("SELECT healed_ms - applied_ms FROM faults WHERE kind='pause'"), 1000);
    FL_ASSERT_GE(db_int("SELECT count(*) FROM events e, faults f WHERE e.kind='child.tick' "
                        "AND f.kind='pause' AND e.t_ms < f.applied_ms"),
                 3);
    FL_ASSERT_EQ(
        db_int("SELECT count(*) FROM events e, faults f WHERE e.kind='child.tick' "
               "AND f.kind='pause' AND e.t_ms > f.applied_ms + 20 AND e.t_ms < f.healed_ms"),
        0);
    FL_ASSERT_GE(db_int("SELECT count(*) FROM events e, faults f WHERE e.kind='child.tick' "
                        "AND f.kind='pause' AND e.t_ms >= f.healed_ms"),
                 2);
    /* the run's freezer cgroups are gone with it */
    char *id = only_run_id(), cg[4096];
    freezer_dir(id, cg, sizeof cg);
    FL_ASSERT_MSG(access(cg, F_OK) != 0, "freezer cgroup %s left after the run", cg);
    free(id);
}

/* kill reaches a task's setsid child through the task's cgroup, a paused
 * task's (killed, then thawed) and an unpaused one's: ctl checks that both
 * children's pids are gone.  Nothing is left after the run. */
FL_TEST_ROOT_T(engine_freezer, kill_reaches_a_setsid_child, 60)
{
    require_setup();
    char *out;
    int rc =
        fl_test_sh(&out, "%s run -q --out %s/o --db %s/fl.db %s 2>&1", fl_test_bin("faultline"),
                   fl_test_dir(), fl_test_dir(), scn("kill-setsid.yaml"));
    FL_ASSERT_MSG(rc == 0, "faultline run exited %d:\n%s", rc, out);
    free(out);
    FL_ASSERT_EQ(db_int("SELECT count(*) FROM processes WHERE job='node' AND signal=9"), 2);
    FL_ASSERT_EQ(db_int("SELECT count(*) FROM faults WHERE error IS NOT NULL"), 0);
    char *id = only_run_id(), cg[4096];
    freezer_dir(id, cg, sizeof cg);
    FL_ASSERT_MSG(access(cg, F_OK) != 0, "freezer cgroup %s left after the run", cg);
    free(id);
}

struct run_ctx {
    char runs[4096];
    char run_id[128];
    char dir[4096];
    const char *log;  /* log file name in the run's logs/ */
    const char *word; /* that it must hold */
};

static bool run_logged(void *arg)
{
    struct run_ctx *g = arg;
    DIR *d = opendir(g->runs);
    if (!d)
        return false;
    struct dirent *e;
    bool up = false;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(g->run_id, sizeof g->run_id, "%s", e->d_name);
        snprintf(g->dir, sizeof g->dir, "%s/%s", g->runs, e->d_name);
        char log[8192], *text;
        snprintf(log, sizeof log, "%s/logs/%s", g->dir, g->log);
        if (fl_read_file(log, &text, NULL) == 0) {
            up = strstr(text, g->word) != NULL;
            free(text);
        }
    }
    closedir(d);
    return up;
}

static bool run_processes_gone(void *arg)
{
    return fl_test_count_run_processes(((struct run_ctx *)arg)->run_id) == 0;
}

/* The harness SIGKILLed while a task and its setsid child are frozen: the
 * kernel cannot end them (a frozen process dies only once thawed), so they
 * outlive the harness; gc must kill and thaw them and remove every freezer
 * cgroup of the run.  Before that, a gc of another --out spares the live
 * run's freezer cgroups. */
FL_TEST_ROOT_T(engine_freezer, gc_thaws_and_removes_a_killed_paused_run, 60)
{
    require_setup();
    struct run_ctx g = {.log = "a.ctl.0.0.log", .word = "PAUSED"};
    snprintf(g.runs, sizeof g.runs, "%s/out/runs", fl_test_dir());
    pid_t pid = fl_test_scenario_start("pause-long.yaml");
    bool paused = fl_test_wait_until(run_logged, &g, 20000);
    if (!paused) {
        kill(pid, SIGTERM);
        waitpid(pid, NULL, 0);
    }
    FL_REQUIRE_MSG(paused, "the run did not pause its task");
    char cg[4096], task[4300], *state;
    freezer_dir(g.run_id, cg, sizeof cg);
    snprintf(task, sizeof task, "%s/a/node:0", cg);
    struct fl_state st;
    FL_REQUIRE_EQ(fl_state_read(g.dir, &st), 0);
    bool listed = false;
    for (size_t i = 0; i < st.ncgroups; i++)
        listed |= !strcmp(st.cgroups[i], cg);
    fl_state_free(&st);
    FL_ASSERT_MSG(listed, "the state file does not list %s", cg);
    char file[4400];
    snprintf(file, sizeof file, "%s/%s", task,
             access("/sys/fs/cgroup/cgroup.controllers", F_OK) == 0 ? "cgroup.events"
                                                                    : "freezer.state");
    FL_REQUIRE_EQ(fl_read_file(file, &state, NULL), 0);
    FL_ASSERT_MSG(strstr(state, "FROZEN") || strstr(state, "frozen 1"), "%s: %s", file, state);
    free(state);
    /* node's shell and its setsid child are in the task's cgroup */
    char procs[4400], *list;
    snprintf(procs, sizeof procs, "%s/cgroup.procs", task);
    FL_REQUIRE_EQ(fl_read_file(procs, &list, NULL), 0);
    int n = 0;
    for (char *p = list; *p; p++)
        n += *p == '\n';
    free(list);
    FL_ASSERT_GE(n, 2);
    /* a gc of another --out sees the freezer cgroup but no state file: the
     * owner mark in it must keep the live run from being taken for dead */
    char *out;
    int rc = fl_test_sh(&out, "%s gc --out %s/other 2>&1", fl_test_bin("faultline"), fl_test_dir());
    FL_ASSERT_MSG(rc == 0, "gc exited %d: %s", rc, out);
    FL_ASSERT_MSG(strstr(out, g.run_id) == NULL, "gc touched the live run %s: %s", g.run_id, out);
    free(out);
    FL_ASSERT_MSG(access(task, F_OK) == 0, "gc elsewhere removed %s", task);

    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    /* v1: frozen, they outlive the harness (a v2 frozen process dies of a
     * SIGKILL): gc is what ends them */
    if (access("/sys/fs/cgroup/cgroup.controllers", F_OK) != 0)
        FL_ASSERT_GE(fl_test_count_run_processes(g.run_id), 2);
    rc = fl_test_sh(&out, "%s gc --out %s/out 2>&1", fl_test_bin("faultline"), fl_test_dir());
    FL_ASSERT_MSG(rc == 0, "gc exited %d: %s", rc, out);
    FL_ASSERT_CONTAINS(out, g.run_id);
    free(out);
    FL_ASSERT_MSG(access(cg, F_OK) != 0, "freezer cgroup %s left after gc", cg);
    /* its logs stay (gc removes the disks only) */
    char log[4200];
    snprintf(log, sizeof log, "%s/logs/a.ctl.0.0.log", g.dir);
    FL_ASSERT_MSG(access(log, R_OK) == 0, "gc removed the log %s", log);
    snprintf(log, sizeof log, "%s/fs", g.dir);
    FL_ASSERT_MSG(access(log, F_OK) != 0, "gc left %s", log);
    FL_ASSERT_MSG(fl_test_wait_until(run_processes_gone, &g, 5000),
                  "processes of run %s outlived gc", g.run_id);
    char sql[512];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM runs WHERE run_id='%s' AND verdict='error'",
             g.run_id);
    FL_ASSERT_EQ(db_int(sql), 1);
}

/* A run without a pause fault makes no freezer cgroup (set-up cost stays
 * as it was): long.yaml has a limit fault, so a pids cgroup only. */
FL_TEST_ROOT_T(engine_freezer, run_without_pause_makes_no_freezer_cgroup, 60)
{
    require_setup();
    struct run_ctx g = {.log = "a.sleeper.0.0.log", .word = "UP"};
    snprintf(g.runs, sizeof g.runs, "%s/out/runs", fl_test_dir());
    pid_t pid = fl_test_scenario_start("long.yaml");
    bool up = fl_test_wait_until(run_logged, &g, 20000);
    char cg[4096], pids[4096];
    if (up) {
        freezer_dir(g.run_id, cg, sizeof cg);
        char task[4300];
        snprintf(task, sizeof task, "%s/a/sleeper:0", cg);
        FL_ASSERT_MSG(access(task, F_OK) != 0, "task cgroup %s made for a run without pause", task);
        /* v1: not even the run's directory in the freezer hierarchy (on v2
         * it is the pids cgroups' one) */
        if (fl_cgroup_root(pids, sizeof pids) > 0 && strncmp(pids, cg, strlen(pids)) != 0)
            FL_ASSERT_MSG(access(cg, F_OK) != 0, "freezer cgroup %s made for a run without pause",
                          cg);
        struct fl_state st;
        if (fl_state_read(g.dir, &st) == 0) {
            FL_ASSERT_EQ(st.ncgroups, 1);
            fl_state_free(&st);
        }
    }
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
    FL_REQUIRE_MSG(up, "the run did not come up");
}
