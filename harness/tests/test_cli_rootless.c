/*
 * test_cli_rootless.c: faultline run by a user without root (issue 25,
 * harness/sys/rootless.c).  Each test makes a user of its own (useradd,
 * removed at its end with its home, and at the start of a later test if a
 * killed one left it), copies faultline's programs, preloads and scenarios
 * into that user's home (so the checkout's permissions do not matter) and
 * runs faultline there with su: the whole seed suite passes and is recorded
 * as rootless; `faultline exec` reaches a host of a user's running run; the
 * catalog scenarios whose faults can run rootless pass, the
 * rest are refused with a message that says what they need; a run killed
 * with SIGKILL leaves nothing that `faultline gc`, run by the same user,
 * does not remove; and nothing of a user's run is left on the machine: no
 * process of the user, no workdir, no runs lock.
 */
#include "harness/tests/fl_test.h"

#include <dirent.h>
#include <errno.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct rl_user {
    char name[32];
    char home[64];
    uid_t uid;
};

/* The pids of the processes whose real uid is uid (up to max): how many. */
static int user_processes(uid_t uid, pid_t *pids, int max)
{
    DIR *d = opendir("/proc");
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        int pid = atoi(e->d_name);
        if (pid <= 0)
            continue;
        char path[64], line[256];
        snprintf(path, sizeof path, "/proc/%d/status", pid);
        FILE *f = fopen(path, "re");
        unsigned ruid = 0;
        bool found = false;
        while (f && fgets(line, sizeof line, f))
            if (sscanf(line, "Uid: %u", &ruid) == 1) {
                found = true;
                break;
            }
        if (f)
            fclose(f);
        if (found && ruid == uid) {
            if (n < max)
                pids[n] = pid;
            n++;
        }
    }
    if (d)
        closedir(d);
    return n;
}

static bool no_user_processes(void *arg)
{
    pid_t pids[1];
    return user_processes(*(uid_t *)arg, pids, 1) == 0;
}

/* Removes a user a killed test left (fl-rl-PID, PID not alive). */
static void remove_stale_users(void)
{
    struct passwd *pw;
    setpwent();
    char stale[16][32];
    int n = 0;
    while ((pw = getpwent()) && n < 16) {
        int pid;
        if (sscanf(pw->pw_name, "fl-rl-%d", &pid) == 1 && kill(pid, 0) < 0 && errno == ESRCH)
            snprintf(stale[n++], sizeof stale[0], "%s", pw->pw_name);
    }
    endpwent();
    for (int i = 0; i < n; i++)
        fl_test_sh(NULL, "userdel -r %s >/dev/null 2>&1", stale[i]);
}

/* A user of the test's own, with faultline's programs, preloads and
 * scenarios in ~/fl (build/bin, build/lib, scenarios, and the tests'
 * scenarios in tests/scenarios). */
static void rl_make(struct rl_user *u)
{
    if (fl_test_sh(NULL, "command -v useradd >/dev/null && command -v su >/dev/null") != 0)
        FL_SKIP("useradd or su is not installed (Debian's passwd and util-linux)");
    remove_stale_users();
    snprintf(u->name, sizeof u->name, "fl-rl-%d", (int)getpid());
    snprintf(u->home, sizeof u->home, "/home/%s", u->name);
    char *out;
    int rc = fl_test_sh(&out, "useradd -m -d %s -s /bin/sh %s 2>&1", u->home, u->name);
    FL_REQUIRE_MSG(rc == 0, "useradd %s: %s", u->name, out);
    free(out);
    struct passwd *pw = getpwnam(u->name);
    FL_REQUIRE(pw != NULL);
    u->uid = pw->pw_uid;
    /* fl_test_bin("faultline") is <build>/bin/faultline */
    char bin[4096];
    snprintf(bin, sizeof bin, "%s", fl_test_bin("faultline"));
    *strrchr(bin, '/') = 0;
    rc = fl_test_sh(&out,
                    "set -e; mkdir -p %s/fl/build/bin %s/fl/build/lib; "
                    "cp %s/faultline %s/psrt %s/fl-probe %s/fl-disk-probe %s/fl/build/bin/; "
                    "cp %s/../lib/*.so %s/fl/build/lib/; cp -r %s/scenarios %s/fl/; "
                    "mkdir -p %s/fl/tests; cp -r %s/harness/tests/scenarios %s/fl/tests/; "
                    "chown -R %s: %s 2>&1",
                    u->home, u->home, bin, bin, bin, bin, u->home, bin, u->home, fl_test_root(),
                    u->home, u->home, fl_test_root(), u->home, u->name, u->home);
    FL_REQUIRE_MSG(rc == 0, "copying faultline into %s: %s", u->home, out);
    free(out);
}

/* Writes text to ~/name, the user's. */
static void rl_write(const struct rl_user *u, const char *name, const char *text)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", u->home, name);
    FILE *f = fopen(path, "w");
    FL_REQUIRE(f != NULL);
    fputs(text, f);
    fclose(f);
    FL_REQUIRE_EQ(chown(path, u->uid, (gid_t)-1), 0);
}

/* Runs cmd as the user in its home (su: HOME, USER and a login-less shell). */
static int rl_sh(const struct rl_user *u, char **out, const char *cmd)
{
    return fl_test_sh(out, "cd %s && su -s /bin/sh %s -c '%s' 2>&1", u->home, u->name, cmd);
}

/* Nothing of the user's runs is left: no process, no workdir, no lock. */
static void assert_nothing_left(const struct rl_user *u)
{
    uid_t uid = u->uid;
    FL_ASSERT_MSG(fl_test_wait_until(no_user_processes, &uid, 10000),
                  "processes of %s are still there 10 s after its runs ended", u->name);
    char path[256];
    struct stat st;
    snprintf(path, sizeof path, "%s/.cache/faultline", u->home);
    FL_ASSERT_MSG(lstat(path, &st) < 0, "%s is left", path);
    snprintf(path, sizeof path, "%s/.cache/faultline.lock", u->home);
    FL_ASSERT_MSG(lstat(path, &st) < 0, "%s is left", path);
}

static void rl_remove(struct rl_user *u)
{
    pid_t pids[64];
    int n = user_processes(u->uid, pids, 64);
    for (int i = 0; i < n && i < 64; i++) /* the user's, which this test made */
        kill(pids[i], SIGKILL);
    uid_t uid = u->uid;
    fl_test_wait_until(no_user_processes, &uid, 5000);
    fl_test_sh(NULL, "userdel -r %s >/dev/null 2>&1", u->name);
}

/* The 36 runs of the seed suite pass without root, each recorded as
 * rootless by the user's uid, and leave nothing behind. */
FL_TEST_ROOT_T(cli_rootless, seed_suite_passes_rootless, 300)
{
    struct rl_user u;
    rl_make(&u);
    char *out;
    int rc = rl_sh(&u, &out, "fl/build/bin/faultline run --out out fl/scenarios/seeds");
    FL_ASSERT_MSG(rc == 0, "the seed suite run by %s exited %d:\n%s", u.name, rc, out);
    FL_ASSERT_CONTAINS(out, "36 runs: 36 passed, 0 failed, 0 errors");
    free(out);
    char db[256], sql[256];
    snprintf(db, sizeof db, "%s/out/faultline.db", u.home);
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM runs WHERE verdict = 'pass' AND rootless = 1 AND uid = %u",
             (unsigned)u.uid);
    FL_ASSERT_EQ(fl_test_db_int(db, sql), 36);
    /* the threads limit of S003 held rootless: the legacy chief died of it */
    FL_ASSERT_EQ(fl_test_db_int(db, "SELECT count(*) FROM processes p JOIN runs r ON r.id = "
                                    "p.run WHERE r.scenario = 's003-12w-2ps-thread-limit' AND "
                                    "r.variant = 'protocol=legacy' AND p.job = 'chief' AND "
                                    "p.signal = 6"),
                 1);
    assert_nothing_left(&u);
    rl_remove(&u);
}

/* The catalog's fault and example scenarios run rootless: every fault kind
 * they use but the faultline filesystem's works without root; that one
 * needs /dev/fuse open to the user, and where it is not (mode 0600) its
 * runs are errors that say so and what to do. */
FL_TEST_ROOT_T(cli_rootless, catalog_runs_rootless_or_says_what_it_needs, 300)
{
    struct rl_user u;
    rl_make(&u);
    char *out;
    int rc = rl_sh(&u, &out, "test -r /dev/fuse && test -w /dev/fuse");
    bool fuse = rc == 0;
    free(out);
    rc = rl_sh(&u, &out,
               "fl/build/bin/faultline run --out out fl/scenarios/faults fl/scenarios/examples");
    char db[256];
    snprintf(db, sizeof db, "%s/out/faultline.db", u.home);
    int runs = fl_test_db_int(db, "SELECT count(*) FROM runs");
    FL_ASSERT_MSG(runs >= 18, "only %d runs recorded:\n%s", runs, out);
    /* the faultline filesystem's scenarios (disk-path, unsynced-torn-fs) */
    int fs_runs = fl_test_db_int(db, "SELECT count(*) FROM runs WHERE scenario IN ('disk-path', "
                                     "'unsynced-torn-fs')");
    FL_ASSERT_EQ(fs_runs, 3);
    if (fuse) {
        FL_ASSERT_MSG(rc == 0, "exit %d:\n%s", rc, out);
        FL_ASSERT_EQ(fl_test_db_int(db, "SELECT count(*) FROM runs WHERE verdict = 'pass'"), runs);
    } else {
        FL_ASSERT_EQ(rc, 1);
        FL_ASSERT_EQ(fl_test_db_int(db, "SELECT count(*) FROM runs WHERE verdict = 'pass'"),
                     runs - fs_runs);
        FL_ASSERT_EQ(fl_test_db_int(db, "SELECT count(*) FROM runs WHERE verdict = 'error' AND "
                                        "reason LIKE '%/dev/fuse: Permission denied (it is not "
                                        "open to this user: as root, `chmod 0666 /dev/fuse`%'"),
                     fs_runs);
    }
    free(out);
    assert_nothing_left(&u);
    rl_remove(&u);
}

/* A memory limit needs a cgroup, which a user without root has none of:
 * the run is refused before any host starts, naming the fault's line and
 * what to do. */
FL_TEST_ROOT_T(cli_rootless, memory_limit_is_refused_saying_what_to_do, 120)
{
    struct rl_user u;
    rl_make(&u);
    rl_write(&u, "mem.yaml",
             "name: rootless-memory\nhosts: [a]\ncluster:\n  t: [a]\nrun:\n  command: "
             "\"true\"\nfaults:\n  - {at: 0s, limit: {host: a, memory: 64M}}\n");
    char *out;
    int rc = rl_sh(&u, &out, "fl/build/bin/faultline run --out out mem.yaml");
    FL_ASSERT_EQ(rc, 1);
    FL_ASSERT_CONTAINS(out, "limit fault (mem.yaml:8): a memory limit needs a memory cgroup, and "
                            "a run without root has none of its own: run it as root, or leave "
                            "the memory limit out");
    free(out);
    char db[256];
    snprintf(db, sizeof db, "%s/out/faultline.db", u.home);
    FL_ASSERT_EQ(fl_test_db_int(db, "SELECT count(*) FROM runs WHERE verdict = 'error'"), 1);
    FL_ASSERT_EQ(fl_test_db_int(db, "SELECT count(*) FROM processes"), 0);
    assert_nothing_left(&u);
    rl_remove(&u);
}

/* A rootless run killed with SIGKILL takes its namespaces and processes
 * with it (its harness is PID 1 of its own); `faultline gc` by the same
 * user removes its disks, workdir and lock and marks it in the database. */
FL_TEST_ROOT_T(cli_rootless, killed_run_then_gc_leaves_nothing, 120)
{
    struct rl_user u;
    rl_make(&u);
    rl_write(&u, "long.yaml",
             "name: rootless-long\nhosts: [a, b]\ncluster:\n  t: [a, b]\nrun:\n  command: "
             "\"echo up; exec sleep 600\"\ntimeout: 10m\n");
    char *out;
    /* in the background; its pid (the process the user started) */
    int rc =
        rl_sh(&u, &out, "fl/build/bin/faultline run --out out long.yaml >run.log 2>&1 & echo $!");
    FL_REQUIRE_MSG(rc == 0, "%s", out);
    pid_t pid = atoi(out);
    free(out);
    FL_REQUIRE(pid > 0);
    /* both tasks said "up" in their logs */
    char cmd[512];
    snprintf(cmd, sizeof cmd,
             "for i in $(seq 1000); do n=$(cat %s/out/runs/*/logs/*.t.*.log 2>/dev/null | grep -c "
             "'^up$'); [ \"$n\" = 2 ] && exit 0; sleep 0.01; done; exit 1",
             u.home);
    FL_REQUIRE_MSG(fl_test_sh(NULL, "%s", cmd) == 0, "the tasks never started");
    /* exec joins the run's user namespace and host b's namespaces */
    rc = rl_sh(&u, &out,
               "fl/build/bin/faultline exec --out out $(ls out/runs) b -- sh -c \"hostname; "
               "ip -4 -o addr show eth0\"");
    FL_ASSERT_MSG(rc == 0, "exec exited %d:\n%s", rc, out);
    FL_ASSERT_CONTAINS(out, "b\n");
    FL_ASSERT_CONTAINS(out, "inet 198.18.0.2/15");
    free(out);
    FL_ASSERT_EQ(kill(pid, SIGKILL), 0);
    uid_t uid = u.uid;
    FL_ASSERT_MSG(fl_test_wait_until(no_user_processes, &uid, 10000),
                  "processes of the killed run are still there after 10 s");
    rc = rl_sh(&u, &out, "fl/build/bin/faultline gc --out out");
    FL_ASSERT_MSG(rc == 0, "gc exited %d:\n%s", rc, out);
    FL_ASSERT_CONTAINS(out, "removing its disks");
    FL_ASSERT_CONTAINS(out, "removed workdir");
    free(out);
    char db[256];
    snprintf(db, sizeof db, "%s/out/faultline.db", u.home);
    FL_ASSERT_EQ(fl_test_db_int(db, "SELECT count(*) FROM runs WHERE verdict = 'error' AND "
                                    "gc_at IS NOT NULL AND rootless = 1"),
                 1);
    FL_ASSERT_EQ(fl_test_sh(NULL, "ls -d %s/out/runs/*/fs >/dev/null 2>&1", u.home) == 0, 0);
    assert_nothing_left(&u);
    rl_remove(&u);
}

/* `faultline doctor` tries what a run needs, as root and as the user: both
 * can run here; the user's memory limit is refused and says why, and the
 * faultline filesystem is there for the user exactly when /dev/fuse is
 * open to it. */
FL_TEST_ROOT_T(cli_rootless, doctor_says_what_root_and_a_user_can_do, 120)
{
    char *out;
    int rc = fl_test_sh(&out, "%s doctor 2>&1", fl_test_bin("faultline"));
    FL_ASSERT_MSG(rc == 0, "doctor as root exited %d:\n%s", rc, out);
    FL_ASSERT_CONTAINS(out, "namespaces, bridge, nftables  yes a switch, a partition");
    FL_ASSERT_CONTAINS(out, "limit memory                  yes the host's memory cgroup");
    free(out);
    struct rl_user u;
    rl_make(&u);
    rc = rl_sh(&u, &out, "test -r /dev/fuse && test -w /dev/fuse");
    bool fuse = rc == 0;
    free(out);
    rc = rl_sh(&u, &out, "fl/build/bin/faultline doctor");
    FL_ASSERT_MSG(rc == 0, "doctor as %s exited %d:\n%s", u.name, rc, out);
    FL_ASSERT_CONTAINS(out, "not root: runs rootless");
    FL_ASSERT_CONTAINS(out, "namespaces, bridge, nftables  yes a switch, a partition");
    FL_ASSERT_CONTAINS(out, "mounts (tmpfs, overlay)       yes");
    FL_ASSERT_CONTAINS(out, "limit memory                  no  refused before the run");
    FL_ASSERT_CONTAINS(out, fuse ? "disk by path, unsynced: torn  yes"
                                 : "disk by path, unsynced: torn  no  needs /dev/fuse");
    free(out);
    assert_nothing_left(&u);
    rl_remove(&u);
}

/* A rootless host's root is its own as a root one's is: what it writes in
 * /var/tmp, /etc and /root stays in its layer (kept by a restart, gone with
 * a replace, never on the machine); it finds neither another host's disk
 * nor the run's files by any path; its /sys and /dev are its own. */
FL_TEST_ROOT_T(cli_rootless, host_roots_are_their_own_rootless, 300)
{
    static const char *const pats[] = {"/var/tmp/fl-it-root-private.*", "/etc/fl-it-root-private.*",
                                       "/root/fl-it-root-private.*"};
    struct rl_user u;
    rl_make(&u);
    char *out;
    int rc = rl_sh(&u, &out,
                   "fl/build/bin/faultline run --out out fl/tests/scenarios/root-private.yaml "
                   "fl/tests/scenarios/root-isolation.yaml fl/tests/scenarios/root-sys.yaml");
    FL_ASSERT_MSG(rc == 0, "exit %d:\n%s", rc, out);
    free(out);
    for (size_t i = 0; i < 3; i++) {
        char cmd[256];
        snprintf(cmd, sizeof cmd, "ls -d %s >/dev/null 2>&1", pats[i]);
        FL_ASSERT_MSG(fl_test_sh(NULL, "%s", cmd) != 0, "%s on the machine after the run", pats[i]);
    }
    assert_nothing_left(&u);
    rl_remove(&u);
}

/* pause without root: in a cgroup v2 directory delegated to the user (as
 * systemd's Delegate=yes makes one: the user owns it and its cgroup.procs)
 * a task's freezer cgroup stops a child that made a session of its own, as
 * as root; without one, pause stops the task's process group only and
 * that child runs on (pause-setsid's check fails: the difference the
 * reference states). */
FL_TEST_ROOT_T(cli_rootless, pause_freezes_a_setsid_child_in_a_delegated_cgroup, 180)
{
    char *out;
    if (fl_test_sh(&out, "findmnt -t cgroup2 -n -o TARGET | head -1") != 0 || !out[0]) {
        free(out);
        FL_SKIP("no cgroup v2 hierarchy mounted");
    }
    out[strcspn(out, "\n")] = 0;
    char deleg[512];
    snprintf(deleg, sizeof deleg, "%s/fl-rl-deleg-%d", out, (int)getpid());
    free(out);
    struct rl_user u;
    rl_make(&u);
    int rc = fl_test_sh(&out,
                        "mkdir %s && chown %s: %s %s/cgroup.procs %s/cgroup.threads "
                        "%s/cgroup.subtree_control 2>&1",
                        deleg, u.name, deleg, deleg, deleg, deleg);
    FL_REQUIRE_MSG(rc == 0, "delegating %s: %s", deleg, out);
    free(out);
    /* the user's faultline starts in the delegated cgroup */
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "cd %s && sh -c 'echo $$ > %s/cgroup.procs && exec su -s /bin/sh %s -c "
             "\"fl/build/bin/faultline run --out deleg fl/tests/scenarios/pause-setsid.yaml\"' "
             "2>&1",
             u.home, deleg, u.name);
    rc = fl_test_sh(&out, "%s", cmd);
    FL_ASSERT_MSG(rc == 0, "in a delegated cgroup, exit %d:\n%s", rc, out);
    free(out);
    /* the run's cgroups are gone with it: the delegated one is empty again */
    FL_ASSERT_EQ(fl_test_sh(NULL, "rmdir %s", deleg), 0);
    rc = rl_sh(&u, &out,
               "fl/build/bin/faultline run --out plain fl/tests/scenarios/pause-setsid.yaml");
    FL_ASSERT_EQ(rc, 1);
    FL_ASSERT_CONTAINS(out, "pause stops the task's process group with SIGSTOP instead");
    free(out);
    assert_nothing_left(&u);
    rl_remove(&u);
    fl_test_sh(NULL, "rmdir %s 2>/dev/null", deleg);
}
