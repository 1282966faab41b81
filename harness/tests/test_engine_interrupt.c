/*
 * test_engine_interrupt.c: what `faultline run` does when it is interrupted
 * (SIGINT, SIGTERM) as a terminal or CI interrupts it: how fast it stops,
 * what it prints, what its exit status is and what the database says.
 * Each test writes its scenario into its own directory and runs the real
 * faultline binary with its own --out and --db there.
 */
#include "harness/rundir.h"
#include "harness/tests/fl_test.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
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

/* Writes text to <test dir>/name; its path. */
static const char *write_scenario(const char *name, const char *text)
{
    static char path[4096];
    snprintf(path, sizeof path, "%s/%s", fl_test_dir(), name);
    FILE *f = fopen(path, "w");
    FL_REQUIRE(f != NULL);
    fputs(text, f);
    fclose(f);
    return path;
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
FL_TEST_T(engine, second_interrupt_skips_the_grace, 60)
{
    require_setup();
    const char *scn = write_scenario("stubborn.yaml",
        "name: it-stubborn\n"
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
    FL_ASSERT_MSG(took < 15000, "after a second interrupt the run took %lld ms to stop (grace 40 s)",
                  (long long)took);
    FL_ASSERT_MSG(WIFEXITED(ws) && WEXITSTATUS(ws) == 130, "faultline exit status %d", ws);
    FL_ASSERT_EQ(db_count("SELECT count(*) FROM runs WHERE verdict='error' AND reason='interrupted'"),
                 1);
    FL_ASSERT_EQ(db_count("SELECT count(*) FROM runs WHERE verdict='running'"), 0);
}
