/*
 * test_sys_fiu_ctl.c: the harness's side of libfiu's remote control
 * (harness/sys/fiu_ctl.c) against a real process under fl_fiu_preload.so:
 * commands still reach it while its soft RLIMIT_NOFILE is below the
 * descriptors it holds (the preload holds its fifos open, so libfiu's
 * thread never opens them again), and a reply that came late, from a
 * session that gave up on a stopped process, is not taken for the answer
 * to the next session's command.
 */
#include "harness/sys/fiu_ctl.h"
#include "harness/tests/fl_test.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

/* Whether pid holds BASE.in open read-write: the preload's hold_fifos,
 * the last thing its constructor does with the fifos.  Before it, libfiu's
 * thread alone reads .in, and closes and opens it again after each session:
 * a process stopped then (SIGSTOP interrupts the open) has no reader on .in,
 * and a command gets ENXIO instead of waiting for it. */
static bool holds_fifos(pid_t pid, const char *base)
{
    char dir[64], in[4200], path[4300], link[4300], info[8192];
    snprintf(dir, sizeof dir, "/proc/%d/fd", (int)pid);
    snprintf(in, sizeof in, "%s.in", base);
    DIR *d = opendir(dir);
    if (!d)
        return false;
    bool held = false;
    struct dirent *de;
    while (!held && (de = readdir(d))) {
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        ssize_t n = readlink(path, link, sizeof link - 1);
        if (n <= 0)
            continue;
        link[n] = 0;
        if (strcmp(link, in) != 0)
            continue;
        snprintf(path, sizeof path, "/proc/%d/fdinfo/%s", (int)pid, de->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        while (fgets(info, sizeof info, f)) {
            unsigned long flags;
            if (sscanf(info, "flags: %lo", &flags) == 1 && (flags & O_ACCMODE) == O_RDWR)
                held = true;
        }
        fclose(f);
    }
    closedir(d);
    return held;
}

/* Waits (up to 10 s) until the preload's constructor holds the fifos. */
static void wait_held(pid_t pid, const char *base)
{
    for (int i = 0; i < 10000 && !holds_fifos(pid, base); i++)
        usleep(1000); /* polling /proc: the constructor sends no event */
    FL_REQUIRE_MSG(holds_fifos(pid, base), "pid %d never held %s.in", (int)pid, base);
}

/* `sleep 60` under the preload, its fifos under the test's directory;
 * returns its pid, and its fifo base in base. */
static pid_t start_sleeper(char *base, size_t len)
{
    char preload[4096];
    snprintf(preload, sizeof preload, "%s", fl_test_bin("../lib/fl_fiu_preload.so"));
    if (access(preload, R_OK) != 0)
        FL_SKIP("build/lib/fl_fiu_preload.so is not built");
    char fifo[4096];
    snprintf(fifo, sizeof fifo, "%s/c", fl_test_dir());
    pid_t pid = fork();
    FL_REQUIRE(pid >= 0);
    if (pid == 0) {
        setenv("LD_PRELOAD", preload, 1);
        setenv("FAULTLINE_FIU_FIFO", fifo, 1);
        execlp("sleep", "sleep", "60", (char *)NULL);
        _exit(127);
    }
    snprintf(base, len, "%s-%d", fifo, (int)pid);
    wait_held(pid, base);
    return pid;
}

/* Sends one command; retries while the process is not listening yet (its
 * fifos are made by the preload's constructor), up to 5 s. */
static int send1(const char *base, const char *cmd, int *reply, int timeout_ms, int *owed)
{
    int rc = -ENOENT;
    for (int i = 0; i < 5000 && (rc == -ENOENT || rc == -ENXIO); i++) {
        int keep[2];
        rc = fl_fiu_ctl_send(base, &cmd, 1, reply, timeout_ms, keep, owed);
        for (int k = 0; k < 2; k++)
            if (keep[k] >= 0)
                close(keep[k]);
        if (rc == -ENOENT || rc == -ENXIO)
            usleep(1000);
    }
    return rc;
}

/* The lowest descriptor number the process has not open (its fd table). */
static int lowest_free_fd(pid_t pid)
{
    char dir[64];
    snprintf(dir, sizeof dir, "/proc/%d/fd", (int)pid);
    bool used[1024] = {false};
    DIR *d = opendir(dir);
    FL_REQUIRE(d != NULL);
    struct dirent *de;
    while ((de = readdir(d))) {
        int fd = atoi(de->d_name);
        if (de->d_name[0] != '.' && fd >= 0 && fd < 1024)
            used[fd] = true;
    }
    closedir(d);
    int n = 0;
    while (n < 1024 && used[n])
        n++;
    return n;
}

static void stop_sleeper(pid_t pid)
{
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

FL_TEST(sys_fiu_ctl, commands_reach_a_process_out_of_descriptors)
{
    char base[4200];
    pid_t pid = start_sleeper(base, sizeof base);
    int reply = 1, owed = 0;
    FL_REQUIRE_EQ(send1(base, "enable name=t/one,failnum=1,failinfo=5", &reply, 2000, &owed), 0);
    FL_ASSERT_EQ(reply, 0);
    /* the soft limit only, as `limit: {fds}` sets it, at the lowest free
     * descriptor number: every descriptor it asks for now fails EMFILE */
    struct rlimit low;
    FL_REQUIRE_EQ(prlimit(pid, RLIMIT_NOFILE, NULL, &low), 0);
    low.rlim_cur = (rlim_t)lowest_free_fd(pid);
    FL_REQUIRE_EQ(prlimit(pid, RLIMIT_NOFILE, &low, NULL), 0);
    reply = 1;
    FL_ASSERT_EQ(send1(base, "disable name=t/one", &reply, 2000, &owed), 0);
    FL_ASSERT_EQ(reply, 0);
    reply = 1;
    FL_ASSERT_EQ(send1(base, "enable name=t/two,failnum=1,failinfo=5", &reply, 2000, &owed), 0);
    FL_ASSERT_EQ(reply, 0);
    FL_ASSERT_EQ(owed, 0);
    stop_sleeper(pid);
}

FL_TEST(sys_fiu_ctl, late_reply_is_not_taken_for_the_next)
{
    char base[4200];
    pid_t pid = start_sleeper(base, sizeof base);
    int reply = 1, owed = 0;
    FL_REQUIRE_EQ(send1(base, "enable name=t/one,failnum=1,failinfo=5", &reply, 2000, &owed), 0);
    FL_REQUIRE_EQ(kill(pid, SIGSTOP), 0);
    int st; /* stopped: every thread of it (the stop is asynchronous) */
    FL_REQUIRE_EQ(waitpid(pid, &st, WUNTRACED), pid);
    FL_REQUIRE(WIFSTOPPED(st));
    /* libfiu answers -1 to disabling a point that is not enabled */
    int r = send1(base, "disable name=t/never", &reply, 100, &owed);
    FL_ASSERT_MSG(r == -ETIMEDOUT, "a stopped process answered: %d, reply %d", r, reply);
    FL_ASSERT_EQ(owed, 1);
    FL_REQUIRE_EQ(kill(pid, SIGCONT), 0);
    reply = 1;
    FL_ASSERT_EQ(send1(base, "disable name=t/one", &reply, 2000, &owed), 0);
    FL_ASSERT_EQ(owed, 0);
    FL_ASSERT_EQ(reply, 0); /* the late -1 was read first and dropped */
    stop_sleeper(pid);
}
