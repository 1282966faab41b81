/*
 * test_engine_interrupt.c: what `faultline run` does when it is interrupted
 * (SIGINT, SIGTERM) as a terminal or CI interrupts it: how fast it stops,
 * what it prints, what its exit status is and what the database says.
 * Each test writes its scenario into its own directory and runs the real
 * faultline binary with its own --out and --db there.
 */
#include "harness/sys/rundir.h"
#include "harness/tests/fl_test.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void require_setup(void)
{
    fl_test_need_root();
}

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Starts `faultline run [extra] SCENARIO` in the background with --out
 * <test dir>/o and --db <test dir>/fl.db; stdout and stderr go to
 * <test dir>/run.out.  Returns its pid. */
static pid_t start_run(const char *extra, const char *scenario)
{
    char out[4096], db[4096], log[4096];
    snprintf(out, sizeof out, "%s/o", fl_test_dir());
    snprintf(db, sizeof db, "%s/fl.db", fl_test_dir());
    snprintf(log, sizeof log, "%s/run.out", fl_test_dir());
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(fd, 1);
        dup2(fd, 2);
        if (extra[0])
            execl(fl_test_bin("faultline"), "faultline", "run", "-q", "--out", out, "--db", db,
                  extra, scenario, (char *)NULL);
        else
            execl(fl_test_bin("faultline"), "faultline", "run", "-q", "--out", out, "--db", db,
                  scenario, (char *)NULL);
        _exit(127);
    }
    return pid;
}

/* True once <test dir>/<rel> holds needle (rel may be "o/runs/ * /logs/F":
 * the one run directory is looked up). */
static bool file_has(const char *rel, const char *needle)
{
    char path[8192];
    const char *star = strstr(rel, "*");
    if (star) {
        char runs[4096];
        snprintf(runs, sizeof runs, "%s/%.*s", fl_test_dir(), (int)(star - rel - 1), rel);
        DIR *d = opendir(runs);
        if (!d)
            return false;
        struct dirent *e;
        path[0] = 0;
        while ((e = readdir(d)))
            if (e->d_name[0] != '.')
                snprintf(path, sizeof path, "%s/%s%s", runs, e->d_name, star + 1);
        closedir(d);
        if (!path[0])
            return false;
    } else {
        snprintf(path, sizeof path, "%s/%s", fl_test_dir(), rel);
    }
    char *text;
    if (fl_read_file(path, &text, NULL) < 0)
        return false;
    bool has = strstr(text, needle) != NULL;
    free(text);
    return has;
}

/* Polls (bounded) until file_has(rel, needle). */
static bool wait_for(const char *rel, const char *needle, int ms)
{
    for (int i = 0; i < ms / 10; i++) {
        if (file_has(rel, needle))
            return true;
        struct timespec ts = {0, 10 * 1000000};
        nanosleep(&ts, NULL);
    }
    return file_has(rel, needle);
}

static int db_count(const char *sql)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/fl.db", fl_test_dir());
    return fl_test_db_int(path, sql);
}

/* A run whose tasks ignore SIGTERM, with a long grace: the first Ctrl-C
 * asks them to stop and waits the grace; a second one must not wait it
 * out but kill them at once, as a terminal user expects. */
FL_TEST_ROOT_T(engine_interrupt, second_interrupt_skips_the_grace, 60)
{
    require_setup();
    const char *scn = fl_test_write(
        "stubborn.yaml", "name: it-stubborn\n"
                         "hosts: [a]\n"
                         "cluster:\n"
                         "  stubborn: [a]\n"
                         "timeout: 120s\n"
                         "run:\n"
                         "  grace: 40s\n"
                         "  command: \"trap '' TERM; echo UP; while :; do sleep 1; done\"\n");
    pid_t pid = start_run("", scn);
    if (!wait_for("o/runs/*/logs/a.stubborn.0.0.log", "UP", 20000)) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        char *out;
        fl_test_sh(&out, "cat %s/run.out", fl_test_dir());
        FL_REQUIRE_MSG(false, "the run did not come up: %s", out);
    }
    kill(pid, SIGINT);
    FL_REQUIRE_MSG(wait_for("run.out", "stopping the run", 10000),
                   "the harness did not say it is stopping");
    int64_t t0 = mono_ms();
    kill(pid, SIGINT);
    int ws;
    waitpid(pid, &ws, 0);
    int64_t took = mono_ms() - t0;
    FL_ASSERT_MSG(took < 15000,
                  "after a second interrupt the run took %lld ms to stop (grace 40 s)",
                  (long long)took);
    FL_ASSERT_MSG(WIFEXITED(ws) && WEXITSTATUS(ws) == 130, "faultline exit status %d", ws);
    FL_ASSERT_EQ(
        db_count("SELECT count(*) FROM runs WHERE verdict='error' AND reason='interrupted'"), 1);
    FL_ASSERT_EQ(db_count("SELECT count(*) FROM runs WHERE verdict='running'"), 0);
}

/* The pid of the one child of pid (strace's tracee), or -1. */
static pid_t only_child(pid_t pid)
{
    char path[64], *text;
    snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)pid, (int)pid);
    if (fl_read_file(path, &text, NULL) < 0)
        return -1;
    pid_t child = atoi(text) > 0 ? atoi(text) : -1;
    free(text);
    return child;
}

/* An interrupt that lands while a run is being torn down (held there by
 * strace at its first umount2, after the run's verdict is recorded) is
 * not lost: no further repeat is started (nor recorded as an errored
 * run), and the exit status is 130, also when it was the last run. */
FL_TEST_ROOT_T(engine_interrupt, interrupt_during_teardown_ends_the_repeats, 60)
{
    require_setup();
    if (system("strace -V >/dev/null 2>&1") != 0)
        FL_SKIP("needs strace (ci/install-deps installs it) to hold the harness in its teardown");
    /* LeakSanitizer stops a process's threads with ptrace at its exit,
     * which a process strace traces refuses */
    fl_test_asan_options("detect_leaks=0");
    const char *scn = fl_test_write("quick.yaml", "name: it-quick\n"
                                                  "hosts: [a]\n"
                                                  "cluster:\n"
                                                  "  quick: [a]\n"
                                                  "run:\n"
                                                  "  command: \"echo done\"\n");
    const char *repeats[] = {"3", "1"};
    for (int c = 0; c < 2; c++) {
        char trace[4096], out[4096], db[4096], log[4096];
        snprintf(trace, sizeof trace, "%s/strace%d.txt", fl_test_dir(), c);
        snprintf(out, sizeof out, "%s/o%d", fl_test_dir(), c);
        snprintf(db, sizeof db, "%s/fl%d.db", fl_test_dir(), c);
        snprintf(log, sizeof log, "%s/run.out", fl_test_dir());
        pid_t spid = fork();
        if (spid == 0) {
            int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
            dup2(fd, 1);
            dup2(fd, 2);
            execlp("strace", "strace", "-o", trace, "-e", "trace=umount2", "-e",
                   "inject=umount2:delay_enter=3000000:when=1", fl_test_bin("faultline"), "run",
                   "-q", "--out", out, "--db", db, "--repeat", repeats[c], scn, (char *)NULL);
            _exit(127);
        }
        char rel[64];
        snprintf(rel, sizeof rel, "strace%d.txt", c);
        FL_REQUIRE_MSG(wait_for(rel, "umount2(", 20000), "--repeat %s: no umount2 in teardown",
                       repeats[c]);
        pid_t fpid = only_child(spid);
        FL_REQUIRE_MSG(fpid > 0, "--repeat %s: faultline under strace not found", repeats[c]);
        kill(fpid, SIGINT);
        int ws;
        waitpid(spid, &ws, 0);
        char *text = NULL;
        fl_read_file(log, &text, NULL);
        FL_ASSERT_MSG(WIFEXITED(ws) && WEXITSTATUS(ws) == 130, "--repeat %s: exit status %d: %s",
                      repeats[c], ws, text ? text : "");
        free(text);
        FL_ASSERT_MSG(fl_test_db_int(db, "SELECT count(*) FROM runs") == 1 &&
                          fl_test_db_int(db, "SELECT count(*) FROM runs WHERE verdict='pass'") == 1,
                      "--repeat %s: %d runs recorded (%d passed), want only the torn-down one",
                      repeats[c], fl_test_db_int(db, "SELECT count(*) FROM runs"),
                      fl_test_db_int(db, "SELECT count(*) FROM runs WHERE verdict='pass'"));
    }
}

/* A Ctrl-C while the recorder waits for a database another process holds
 * locked (a long BEGIN EXCLUSIVE) stops the run within about a second of
 * waiting, not at the end of the 30 s busy timeout. */
FL_TEST_ROOT_T(engine_interrupt, interrupt_while_database_busy, 90)
{
    require_setup();
    const char *quick = fl_test_write("quick.yaml", "name: it-quick\n"
                                                    "hosts: [a]\n"
                                                    "cluster:\n"
                                                    "  quick: [a]\n"
                                                    "run:\n"
                                                    "  command: \"echo done\"\n");
    int ws;
    pid_t pid = start_run("", quick); /* creates the database */
    waitpid(pid, &ws, 0);
    FL_REQUIRE_MSG(WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "the first run failed: %d", ws);
    char db[4096];
    snprintf(db, sizeof db, "%s/fl.db", fl_test_dir());
    sqlite3 *h;
    FL_REQUIRE_EQ(sqlite3_open(db, &h), SQLITE_OK);
    FL_REQUIRE_EQ(sqlite3_exec(h, "BEGIN EXCLUSIVE", NULL, NULL, NULL), SQLITE_OK);
    char o[4096];
    snprintf(o, sizeof o, "%s/o/runs", fl_test_dir());
    fl_rm_rf(o);
    pid = start_run("", quick);
    /* its state file is written just before its database row */
    FL_REQUIRE_MSG(wait_for("o/runs/*/state", "running", 20000), "the second run did not start");
    int64_t t0 = mono_ms();
    kill(pid, SIGINT);
    waitpid(pid, &ws, 0);
    int64_t took = mono_ms() - t0;
    sqlite3_exec(h, "ROLLBACK", NULL, NULL, NULL);
    sqlite3_close(h);
    char *out;
    fl_test_sh(&out, "cat %s/run.out", fl_test_dir());
    FL_ASSERT_MSG(took < 10000, "the interrupted run took %lld ms to stop: %s", (long long)took,
                  out);
    FL_ASSERT_MSG(WIFEXITED(ws) && WEXITSTATUS(ws) == 130, "faultline exit status %d: %s", ws, out);
    free(out);
}
