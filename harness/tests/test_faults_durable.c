/*
 * test_faults_durable.c: crash_host with unsynced: (harness/faults/durable.c)
 * on real hosts: which writes survive a crash with lose and with keep
 * (unsynced-writes.yaml), that changes at rest survive one
 * (unsynced-at-rest.yaml), that a failed fsync makes nothing durable; what
 * psrt makes of such a crash: robust keeps every reported save (its
 * directories are synced too: pinned by the ps's host crashing while the
 * chief's is replaced), legacy (TensorFlow 1.x, no fsync) loses its whole
 * train_logs and starts over; a crashed task paused then relaunched; and
 * that nothing of the layer is left after a run, failed, kept or killed.
 */
#include "harness/sys/rundir.h"
#include "harness/tests/fl_test.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

static void require_setup(void)
{
    fl_test_need_root();
    if (access(fl_test_bin("faultline"), X_OK) != 0)
        FL_SKIP("build/bin/faultline is not built");
}

static void require_psrt(void)
{
    require_setup();
    if (access(fl_test_bin("psrt"), X_OK) != 0)
        FL_SKIP("build/bin/psrt is not built");
}

/* What the crash of unsynced_writes.py's host lost, as its fault's row
 * says it (unsynced-writes.yaml and unsynced-writes-fs.yaml alike). */
static void assert_writes_lost_detail(void)
{
    FL_ASSERT_EQ(
        fl_test_scenario_db_int(
            "SELECT count(*) FROM faults f JOIN runs r ON r.id = f.run "
            "WHERE r.variant = 'unsynced=lose' AND f.kind = 'crash_host' AND f.error IS NULL "
            "AND f.detail = 'for=100ms unsynced=lose: 4 entries lost, 2 files rolled back, "
            "0 entries back, 16 bytes unsynced: -a.txt -b.txt ~e.txt 12->5 ~h.txt 1->0 -sub/'"),
        1);
}

/* The same writes on a disk the faultline filesystem serves (disk: {fs:
 * true}): the filesystem tells the syncs, no preload is in the task, and
 * the crash keeps and loses exactly the same files, said the same way. */
FL_TEST_ROOT_T(faults_durable, unsynced_writes_told_by_the_fs, 90)
{
    require_setup();
    if (access("/usr/bin/python3", X_OK) != 0)
        FL_SKIP("needs python3");
    if (access("/dev/fuse", R_OK | W_OK) != 0)
        FL_SKIP("no /dev/fuse");
    fl_test_scenario_passes("unsynced-writes-fs.yaml");
    assert_writes_lost_detail();
}

/* unsynced_writes.py's files after a crash: with lose only what was synced (the
 * scenario checks each file), with keep all of it; the fault's row says
 * what was lost. */
FL_TEST_ROOT_T(faults_durable, crash_loses_unsynced_writes, 90)
{
    require_setup();
    if (access("/usr/bin/python3", X_OK) != 0)
        FL_SKIP("needs python3");
    fl_test_scenario_passes("unsynced-writes.yaml");
    assert_writes_lost_detail();
    FL_ASSERT_EQ(
        fl_test_scenario_db_int("SELECT count(*) FROM faults f JOIN runs r ON r.id = f.run "
                                "WHERE r.variant = 'unsynced=keep' AND f.detail = 'for=100ms'"),
        1);
}

/* truncate: and corrupt: at rest change the synced copy too: they survive
 * the crash (the scenario); what was written after the sync does not, nor
 * what a process of its own session wrote up to the crash. */
FL_TEST_ROOT_T(faults_durable, crash_keeps_changes_at_rest, 60)
{
    require_setup();
    fl_test_scenario_passes("unsynced-at-rest.yaml");
    FL_ASSERT_EQ(
        fl_test_scenario_db_int(
            "SELECT count(*) FROM faults WHERE kind = 'crash_host' AND detail LIKE "
            "'for=100ms unsynced=lose: 2 entries lost, 0 files rolled back, 0 entries back, "
            "% bytes unsynced: -bg.log -notes.txt'"),
        1);
}

/* An fsync that fails (a disk: fault on fsync, libfiu's preload after
 * ours) makes nothing durable: the synced content comes back; a hard link
 * comes back as a link (the scenario). */
FL_TEST_ROOT_T(faults_durable, failed_fsync_makes_nothing_durable, 60)
{
    require_setup();
    if (access("/usr/bin/python3", X_OK) != 0)
        FL_SKIP("needs python3");
    fl_test_scenario_passes("unsynced-fsync-fails.yaml");
}

/* psrt robust: ps1's host crashes (unsynced: lose) right after the chief
 * reports step 100: nothing psrt had reported is lost (every file and
 * every directory above it synced), the run ends with a checkpoint that
 * restores.  It used to lose ps1's whole train_logs (the directories
 * mkdir -p made were never synced: "-train_logs/" in the detail). */
FL_TEST_ROOT_T(faults_durable, robust_ps_crash_keeps_reported, 90)
{
    require_psrt();
    fl_test_scenario_passes("unsynced-robust-ps.yaml");
    FL_ASSERT_EQ(fl_test_scenario_db_int(
                     "SELECT count(*) FROM faults WHERE kind = 'crash_host' AND target = 'ps1' AND "
                     "error IS NULL AND detail LIKE 'for=100ms unsynced=lose: 0 entries lost, "
                     "0 files rolled back, %'"),
                 1);
}

/* The same crash of ps1 while the chief's host is replaced (its disk
 * lost): the new chief restores step 100 from the ps tasks' copies alone,
 * ps1's included.  It failed with "shard 1 of 2 (ps task 1 ...) has no
 * surviving copy" while psrt's directories were not synced. */
FL_TEST_ROOT_T(faults_durable, robust_ps_crash_chief_replaced, 90)
{
    require_psrt();
    fl_test_scenario_passes("unsynced-robust-ps-replace.yaml");
}

/* An export reported done (export.done) into directories psrt made itself
 * survives a crash of the chief's host losing every unsynced write: before
 * the fix export_dir's parents were never synced, and the whole exports/
 * tree was lost. */
FL_TEST_ROOT_T(faults_durable, robust_export_survives_crash, 90)
{
    require_psrt();
    fl_test_scenario_passes("unsynced-robust-export.yaml");
}

/* The chief's host crashes the same way: its own reported checkpoint is
 * all there after the crash. */
FL_TEST_ROOT_T(faults_durable, robust_chief_crash_keeps_reported, 90)
{
    require_psrt();
    fl_test_scenario_passes("unsynced-robust-chief.yaml");
    FL_ASSERT_EQ(fl_test_scenario_db_int(
                     "SELECT count(*) FROM faults WHERE kind = 'crash_host' AND target = 'w0' AND "
                     "error IS NULL AND detail LIKE 'for=100ms unsynced=lose: 0 entries lost, "
                     "0 files rolled back, %'"),
                 1);
}

/* psrt legacy (TensorFlow 1.x: no fsync): a crash of the chief's machine
 * after its second save loses all of train_logs; the relaunched chief
 * finds no checkpoint and trains again from step 0 (the scenario counts
 * the saves; with keep it restores step 20). */
FL_TEST_ROOT_T(faults_durable, legacy_chief_crash_starts_over, 90)
{
    require_psrt();
    fl_test_scenario_passes("unsynced-legacy.yaml");
    FL_ASSERT_EQ(fl_test_scenario_db_int(
                     "SELECT count(*) FROM faults f JOIN runs r ON r.id = f.run "
                     "WHERE r.variant = 'unsynced=lose' AND f.kind = 'crash_host' AND "
                     "f.detail LIKE 'for=100ms unsynced=lose: 6 entries lost, 0 files rolled back, "
                     "0 entries back, % bytes unsynced: -train_logs/'"),
                 1);
}

/* Paths under dir whose name is durable or fl_sync_preload.so. */
static int count_layer_files(const char *dir)
{
    char *out = NULL;
    fl_test_sh(&out, "find %s \\( -name durable -o -name 'fl_sync_preload.so*' \\) | wc -l", dir);
    int n = out ? atoi(out) : -1;
    free(out);
    return n;
}

struct up_ctx {
    char runs[4096];
    char dir[4096];
    char run_id[128];
};

/* The run's task has said it is up (its log, on the real disk). */
static bool task_up(void *arg)
{
    struct up_ctx *u = arg;
    DIR *d = opendir(u->runs);
    if (!d)
        return false;
    bool up = false;
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.') {
            snprintf(u->run_id, sizeof u->run_id, "%s", e->d_name);
            snprintf(u->dir, sizeof u->dir, "%s/%s", u->runs, e->d_name);
            char log[8300], *text;
            snprintf(log, sizeof log, "%s/logs/h.node.0.0.log", u->dir);
            if (fl_read_file(log, &text, NULL) == 0) {
                up = strstr(text, "UP") != NULL;
                free(text);
            }
        }
    closedir(d);
    return up;
}

static bool run_gone(void *arg)
{
    return fl_test_count_run_processes(((struct up_ctx *)arg)->run_id) == 0;
}

/* A run that fails keeps its logs, not the layer's store or library; one
 * with --keep copies its disks, not the store; a harness killed mid-run
 * leaves nothing that gc does not remove but its logs. */
FL_TEST_ROOT_T(faults_durable, nothing_left_behind, 90)
{
    require_setup();
    const char *scn =
        "name: t\n"
        "hosts: [h]\n"
        "cluster: {node: [h]}\n"
        "run:\n"
        "  command: |\n"
        "    if [ \"$FAULTLINE_GENERATION\" = 0 ]; then echo x > f; sync; echo UP; sleep 30; fi\n"
        "    echo gen $FAULTLINE_GENERATION\n"
        "timeout: 30s\n"
        "faults:\n"
        "  - {%s, crash_host: h, unsynced: lose, for: 100ms}\n"
        "expect:\n"
        "  all:\n"
        "    all: {exit: 0, log_matches: '%s'}\n"
        "    files: [{host: h, path: f}]\n";
    char path[4096], out[4096], text[2048];
    /* fails: the log never says "never" */
    snprintf(path, sizeof path, "%s/fail.yaml", fl_test_dir());
    const char *crash_at_up = "on_log: {match: '^UP$'}";
    snprintf(text, sizeof text, scn, crash_at_up, "never");
    FILE *f = fopen(path, "w");
    FL_REQUIRE(f);
    fputs(text, f);
    fclose(f);
    snprintf(out, sizeof out, "%s/o1", fl_test_dir());
    char *o = NULL;
    int rc =
        fl_test_sh(&o, "%s run -q --out %s --no-db %s 2>&1", fl_test_bin("faultline"), out, path);
    FL_ASSERT_MSG(rc == 1 && o && strstr(o, "FAIL") && strstr(o, "host h crashed"), "exit %d: %s",
                  rc, o ? o : "");
    free(o);
    char logs[4200];
    snprintf(logs, sizeof logs, "%s/runs", out);
    FL_ASSERT_EQ(count_layer_files(logs), 0);
    o = NULL;
    fl_test_sh(&o, "ls %s/runs/*/logs/ | wc -l", out);
    /* gen 0 and 1, each with its .times */
    FL_ASSERT_MSG(o && atoi(o) == 4, "logs kept: %s", o ? o : "");
    free(o);

    /* passes with --keep: the disk is kept, the store is not */
    snprintf(path, sizeof path, "%s/keep.yaml", fl_test_dir());
    snprintf(text, sizeof text, scn, crash_at_up, "^gen 1$");
    f = fopen(path, "w");
    FL_REQUIRE(f);
    fputs(text, f);
    fclose(f);
    snprintf(out, sizeof out, "%s/o2", fl_test_dir());
    o = NULL;
    rc = fl_test_sh(&o, "%s run -q --keep --out %s --no-db %s 2>&1", fl_test_bin("faultline"), out,
                    path);
    FL_ASSERT_MSG(rc == 0, "exit %d: %s", rc, o ? o : "");
    free(o);
    snprintf(logs, sizeof logs, "%s/runs", out);
    FL_ASSERT_EQ(count_layer_files(logs), 0);
    o = NULL;
    fl_test_sh(&o, "cat %s/runs/*/hosts/h/disk/f", out);
    FL_ASSERT_MSG(o && !strcmp(o, "x\n"), "kept disk: %s", o ? o : "");
    free(o);

    /* killed while its host is tracked: gc removes the rest */
    struct up_ctx u = {0};
    snprintf(u.runs, sizeof u.runs, "%s/o3/runs", fl_test_dir());
    snprintf(text, sizeof text, scn, "at: 29s", "never"); /* the crash never comes */
    snprintf(path, sizeof path, "%s/long.yaml", fl_test_dir());
    f = fopen(path, "w");
    FL_REQUIRE(f);
    fputs(text, f);
    fclose(f);
    pid_t pid = fork();
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 1);
        dup2(null, 2);
        char o3[4200];
        snprintf(o3, sizeof o3, "%s/o3", fl_test_dir());
        execl(fl_test_bin("faultline"), "faultline", "run", "-q", "--no-db", "--out", o3, path,
              (char *)NULL);
        _exit(127);
    }
    FL_REQUIRE_MSG(fl_test_wait_until(task_up, &u, 20000), "the run did not come up");
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    FL_ASSERT_MSG(fl_test_wait_until(run_gone, &u, 5000),
                  "processes of run %s outlived the harness", u.run_id);
    /* the store lived on the run's tmpfs, in the harness's mount namespace */
    FL_ASSERT_EQ(count_layer_files(u.dir), 0);
    o = NULL;
    rc = fl_test_sh(&o, "%s gc --out %s/o3 2>&1", fl_test_bin("faultline"), fl_test_dir());
    FL_ASSERT_MSG(rc == 0 && o && strstr(o, u.run_id), "gc exited %d: %s", rc, o ? o : "");
    free(o);
    /* gc keeps the killed run's logs, nothing of its disks */
    FL_ASSERT_EQ(count_layer_files(u.dir), 0);
    char fs[4200];
    snprintf(fs, sizeof fs, "%s/fs", u.dir);
    FL_ASSERT_MSG(access(fs, F_OK) != 0, "gc left %s", fs);
}

/* Found soaking crash_host with pauses: a pause in the same turn as a crash
 * of its host froze the task's cgroup before its killed process was reaped,
 * and the relaunch, joining the frozen cgroup before its exec, hung the
 * harness for ever (its timeout included).  The relaunch now starts thawed
 * and runs to the end (the scenario).  A harness that hangs anyway is
 * killed after 40 s and its run collected. */
FL_TEST_ROOT_T(faults_durable, relaunch_after_pause_of_crashed_task, 90)
{
    require_setup();
    char *out = NULL;
    int rc = fl_test_sh(&out,
                        "timeout -s KILL 40 %s run -q --out %s/o --no-db "
                        "%s/harness/tests/scenarios/pause-after-crash.yaml 2>&1",
                        fl_test_bin("faultline"), fl_test_dir(), fl_test_root());
    if (rc != 0)
        fl_test_sh(NULL, "%s gc --out %s/o", fl_test_bin("faultline"), fl_test_dir());
    FL_ASSERT_MSG(rc == 0, "faultline run exited %d (137: hung, killed):\n%s", rc, out ? out : "");
    free(out);
}

/* unsynced: torn (unsynced-torn.yaml): f.txt keeps its synced A's and a
 * prefix of the B's appended after; the same seed tears the same bytes
 * (the same detail, twice), other seeds other lengths. */
static char *torn_detail(unsigned seed)
{
    static unsigned n; /* one database and out directory per run */
    char *out = NULL;
    n++;
    int rc = fl_test_sh(&out,
                        "%s run -q --seed %u --out %s/o%u --db %s/t%u.db "
                        "%s/harness/tests/scenarios/unsynced-torn.yaml 2>&1",
                        fl_test_bin("faultline"), seed, fl_test_dir(), n, fl_test_dir(), n,
                        fl_test_root());
    FL_ASSERT_MSG(rc == 0, "seed %u: exit %d:\n%s", seed, rc, out ? out : "");
    free(out);
    out = NULL;
    fl_test_sh(&out, "sqlite3 %s/t%u.db \"SELECT detail FROM faults WHERE kind='crash_host'\"",
               fl_test_dir(), n);
    return out;
}

FL_TEST_ROOT_T(faults_durable, torn_keeps_a_seeded_prefix_of_unsynced_writes, 120)
{
    require_setup();
    char *a = torn_detail(7), *b = torn_detail(7);
    FL_REQUIRE(a && b);
    FL_ASSERT_CONTAINS(a, "unsynced=torn: ");
    FL_ASSERT_CONTAINS(a, "-h.txt");
    FL_ASSERT_STREQ(a, b);
    /* f.txt: 24 live bytes back to 8..24; over six seeds, not one length */
    char *first = NULL;
    bool differ = false;
    for (unsigned s = 1; s <= 6; s++) {
        char *d = torn_detail(s);
        FL_REQUIRE(d);
        /* not listed: k drew every B, f.txt is as written (24 bytes) */
        const char *f = strstr(d, "~f.txt 24->");
        FL_ASSERT_MSG(f || !strstr(d, "f.txt"), "f.txt listed otherwise: %s", d);
        char *len = strdup(f ? f + 11 : "24");
        len[strcspn(len, " \n")] = 0;
        FL_ASSERT_MSG(atoi(len) >= 8 && atoi(len) <= 24, "%s", d);
        if (!first)
            first = strdup(len);
        else if (strcmp(first, len) != 0)
            differ = true;
        free(len);
        free(d);
    }
    FL_ASSERT_MSG(differ, "six seeds tore f.txt at the same length (%s)", first);
    free(first);
    free(a);
    free(b);
}
