/*
 * test_record_db.c: tests of the results database (harness/record/recorder.c) on real
 * SQLite files in the test's temporary directory: creation, migration from an
 * older schema, refusal of a newer one, a whole run written and read back,
 * checkpoint operations derived from events, flush thresholds, a killed run
 * and its abandoned marking, and two processes recording into one file at once.
 */
#include "harness/record/recorder.h"
#include "harness/base/monoclock.h"
#include "harness/tests/fl_test.h"

#include <errno.h>
#include <stdarg.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* First column of the first row of sql, as text ("(null)" for NULL, "(none)"
 * for no row).  Up to 8 results are alive at once. */
static const char *q1(sqlite3 *db, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static const char *q1(sqlite3 *db, const char *fmt, ...)
{
    static char bufs[8][512];
    static int k;
    char *out = bufs[k++ % 8];
    va_list ap;
    va_start(ap, fmt);
    char *sql = sqlite3_vmprintf(fmt, ap);
    va_end(ap);
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
        snprintf(out, 512, "(error: %s)", sqlite3_errmsg(db));
        sqlite3_free(sql);
        return out;
    }
    sqlite3_free(sql);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        const unsigned char *t = sqlite3_column_text(st, 0);
        snprintf(out, 512, "%s", t ? (const char *)t : "(null)");
    } else {
        snprintf(out, 512, "(none)");
    }
    sqlite3_finalize(st);
    return out;
}

static char *db_path(const char *name)
{
    static char p[4096];
    snprintf(p, sizeof p, "%s/%s", fl_test_dir(), name);
    return p;
}

static struct fl_rec *open_ok(const char *path, const struct fl_rec_opts *opts)
{
    struct fl_rec *rec = NULL;
    char err[512] = "";
    int rc = fl_rec_open(&rec, path, opts, err, sizeof err);
    FL_REQUIRE_MSG(rc == 0, "fl_rec_open(%s) = %d: %s", path, rc, err);
    return rec;
}

static struct fl_rec_run *begin(struct fl_rec *rec, const char *run_id, const char *scenario,
                                const char *variant, const char *rev, int64_t started)
{
    struct fl_rec_run *run = NULL;
    struct fl_rec_run_info info = {
        .run_id = run_id,
        .scenario = scenario,
        .scenario_file = "scenarios/x.yaml",
        .variant = variant,
        .scenario_hash = "abc123",
        .seed = 42,
        .git_rev = rev,
        .hostname = "testhost",
        .started_at_ms = started,
    };
    int rc = fl_rec_run_begin(rec, &info, &run);
    FL_REQUIRE_MSG(rc == 0, "fl_rec_run_begin(%s) = %d: %s", run_id, rc, fl_rec_errmsg(rec));
    return run;
}

FL_TEST(record_db, open_creates_db_and_parent_dirs)
{
    const char *path = db_path("out/sub/faultline.db");
    struct fl_rec *rec = open_ok(path, NULL);
    sqlite3 *db = fl_rec_db(rec);
    struct stat st;
    FL_ASSERT_EQ(stat(path, &st), 0);
    FL_ASSERT_STREQ(q1(db, "PRAGMA user_version"), "10");
    FL_ASSERT_STREQ(q1(db, "PRAGMA journal_mode"), "wal");
    FL_ASSERT_STREQ(q1(db, "PRAGMA foreign_keys"), "1");
    for (const char *const *t =
             (const char *const[]){"runs", "processes", "events", "faults", "checks", "ckpt_ops",
                                   "saves", "restores", "exports", "unfired_faults", NULL};
         *t; t++)
        FL_ASSERT_STREQ(q1(db, "SELECT count(*) FROM sqlite_master WHERE name = '%s'", *t), "1");
    FL_ASSERT_STREQ(fl_rec_path(rec), path);
    FL_ASSERT_EQ(fl_rec_close(rec), 0);

    /* Reopening an up-to-date database changes nothing. */
    rec = open_ok(path, NULL);
    FL_ASSERT_STREQ(q1(fl_rec_db(rec), "PRAGMA user_version"), "10");
    fl_rec_close(rec);
}

FL_TEST(record_db, open_migrates_version_1_keeping_rows)
{
    const char *path = db_path("v1.db");
    sqlite3 *db;
    char err[512] = "";
    FL_REQUIRE_EQ(sqlite3_open(path, &db), SQLITE_OK);
    FL_REQUIRE_EQ(fl_rec_schema_migrate(db, path, 1, err, sizeof err), 0);
    FL_ASSERT_STREQ(q1(db, "PRAGMA user_version"), "1");
    FL_ASSERT_STREQ(q1(db, "SELECT count(*) FROM sqlite_master WHERE name = 'ckpt_ops'"), "0");
    FL_REQUIRE_EQ(sqlite3_exec(db,
                               "INSERT INTO runs(run_id, scenario, started_at, verdict)"
                               " VALUES ('old-run', 'seed-000', 1000, 'fail')",
                               NULL, NULL, NULL),
                  SQLITE_OK);
    sqlite3_close(db);

    struct fl_rec *rec = open_ok(path, NULL);
    db = fl_rec_db(rec);
    FL_ASSERT_STREQ(q1(db, "PRAGMA user_version"), "10");
    FL_ASSERT_STREQ(q1(db, "SELECT verdict FROM runs WHERE run_id = 'old-run'"), "fail");
    FL_ASSERT_STREQ(q1(db, "SELECT count(*) FROM saves"), "0");
    /* The new table is usable for the old run. */
    struct fl_rec_run *run = begin(rec, "new-run", "seed-000", "", NULL, 0);
    FL_ASSERT_EQ(fl_rec_event(run, 5, "ps0", "ps", 0, "save.done", "step=7", false), 0);
    FL_ASSERT_EQ(fl_rec_run_end(run, "pass", NULL, 10), 0);
    FL_ASSERT_STREQ(q1(db, "SELECT step FROM saves"), "7");
    fl_rec_close(rec);
}

FL_TEST(record_db, open_refuses_newer_schema)
{
    const char *path = db_path("new.db");
    sqlite3 *db;
    FL_REQUIRE_EQ(sqlite3_open(path, &db), SQLITE_OK);
    FL_REQUIRE_EQ(sqlite3_exec(db, "PRAGMA user_version = 11", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);

    struct fl_rec *rec = (struct fl_rec *)1;
    char err[512] = "", want[5000];
    FL_ASSERT_EQ(fl_rec_open(&rec, path, NULL, err, sizeof err), -EPROTO);
    FL_ASSERT(rec == NULL);
    snprintf(want, sizeof want,
             "database %s has schema version 11, this faultline knows up to 10; "
             "use a newer faultline or another --db",
             path);
    FL_ASSERT_STREQ(err, want);
}

FL_TEST(record_db, open_refuses_file_that_is_not_a_database)
{
    const char *path = db_path("junk.db");
    FILE *f = fopen(path, "w");
    FL_REQUIRE(f);
    for (int i = 0; i < 200; i++)
        fputs("this is not an sqlite database at all\n", f);
    fclose(f);
    struct fl_rec *rec;
    char err[512] = "";
    int rc = fl_rec_open(&rec, path, NULL, err, sizeof err);
    FL_ASSERT(rc < 0);
    FL_ASSERT_CONTAINS(err, path);
    FL_ASSERT_CONTAINS(err, "not a database");
}

FL_TEST(record_db, open_reports_uncreatable_parent)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/file", fl_test_dir());
    FILE *f = fopen(path, "w");
    FL_REQUIRE(f);
    fclose(f);
    snprintf(path, sizeof path, "%s/file/sub/x.db", fl_test_dir());
    struct fl_rec *rec;
    char err[512] = "";
    FL_ASSERT_EQ(fl_rec_open(&rec, path, NULL, err, sizeof err), -ENOTDIR);
    FL_ASSERT_CONTAINS(err, "cannot create directory");
}

FL_TEST(record_db, run_roundtrip_all_tables)
{
    struct fl_rec *rec = open_ok(db_path("r.db"), NULL);
    sqlite3 *db = fl_rec_db(rec);
    struct fl_rec_run *run = begin(rec, "20261121-114203-ab12cd", "seed-001", "protocol=legacy",
                                   "0123456789ab", 1763725323000);
    int64_t id = fl_rec_run_rowid(run);
    FL_ASSERT_STREQ(fl_rec_run_id(run), "20261121-114203-ab12cd");
    /* The running row is committed at once: another connection sees it. */
    sqlite3 *other;
    FL_REQUIRE_EQ(sqlite3_open(db_path("r.db"), &other), SQLITE_OK);
    FL_ASSERT_STREQ(q1(other, "SELECT verdict FROM runs WHERE id = %lld", (long long)id),
                    "running");

    int p0 = fl_rec_proc_start(run, &(struct fl_rec_proc){.host = "ps0",
                                                          .job = "ps",
                                                          .task = 0,
                                                          .pid = 101,
                                                          .command = "psrt --job_name=ps",
                                                          .started_ms = 3,
                                                          .log_path = "/run/x/ps0.log",
                                                          .generation = 0});
    int p1 = fl_rec_proc_start(run, &(struct fl_rec_proc){.host = "w0",
                                                          .job = "worker",
                                                          .task = 0,
                                                          .pid = 102,
                                                          .command = "psrt --job_name=worker",
                                                          .started_ms = 4,
                                                          .generation = 1});
    FL_ASSERT_EQ(p0, 0);
    FL_ASSERT_EQ(p1, 1);
    FL_ASSERT_EQ(fl_rec_event(run, 100, "w0", "worker", 0, "save.begin", "step=50", true), 0);
    FL_ASSERT_EQ(fl_rec_event(run, 120, "ps0", "ps", 0, "save.shard_written", "shard=0", false), 0);
    FL_ASSERT_EQ(fl_rec_event(run, 350, "w0", "worker", 0, "save.done",
                              "step=50 prefix=./train_logs/model.ckpt-50", false),
                 0);
    FL_ASSERT_EQ(fl_rec_event(run, 400, "ps1", "ps", 1, "restore.failed",
                              "step=24 error=\"Unsuccessful TensorSliceReader constructor\"",
                              false),
                 0);
    FL_ASSERT_EQ(fl_rec_event(run, 500, "w0", "worker", 0, "export.begin", "prefix=model/1", false),
                 0);
    int f0 = fl_rec_fault_applied(run, &(struct fl_rec_fault){.index = 1,
                                                              .kind = "kill",
                                                              .target = "ps1",
                                                              .detail = "signal=SIGKILL",
                                                              .applied_ms = 200});
    int f1 = fl_rec_fault_applied(run, &(struct fl_rec_fault){.index = 2,
                                                              .kind = "partition",
                                                              .target = "[ps0,w0]|[ps1]",
                                                              .applied_ms = 300,
                                                              .error = "nft: No such file"});
    FL_ASSERT_EQ(f0, 0);
    FL_ASSERT_EQ(f1, 1);
    FL_ASSERT_EQ(fl_rec_fault_healed(run, f1, 3300), 0);
    FL_ASSERT_EQ(fl_rec_fault_healed(run, 5, 3300), -EINVAL);
    FL_ASSERT_EQ(fl_rec_proc_end(run, p0, 900, -1, 9, true, false), 0);
    FL_ASSERT_EQ(fl_rec_proc_end(run, p1, 950, 0, 0, false, false), 0);
    FL_ASSERT_EQ(fl_rec_proc_end(run, 7, 950, 0, 0, false, false), -EINVAL);
    FL_ASSERT_EQ(fl_rec_check(run, &(struct fl_rec_check){.name = "fails_with",
                                                          .target = "chief",
                                                          .passed = true,
                                                          .expected = "NotFoundError",
                                                          .observed = "NotFoundError: ./train_logs",
                                                          .line = 27}),
                 0);
    FL_ASSERT_EQ(fl_rec_check(run, &(struct fl_rec_check){.name = "exit",
                                                          .target = "ps:1",
                                                          .passed = false,
                                                          .expected = "0",
                                                          .observed = "SIGKILL"}),
                 0);
    FL_ASSERT_EQ(fl_rec_ckpt_op(run, &(struct fl_rec_ckpt_op){.kind = "restore",
                                                              .host = "checker",
                                                              .step = 50,
                                                              .outcome = "ok",
                                                              .started_ms = -1,
                                                              .duration_ms = 12}),
                 0);
    FL_ASSERT_EQ(fl_rec_ckpt_op(run, &(struct fl_rec_ckpt_op){.kind = "backup", .outcome = "ok"}),
                 -EINVAL);
    FL_ASSERT_EQ(fl_rec_run_end(run, "pass", "expected failure observed", 3200), 0);
    FL_ASSERT_EQ(fl_rec_pending(rec), 0);

    FL_ASSERT_STREQ(q1(db, "SELECT run_id||'|'||scenario||'|'||scenario_file||'|'||variant||'|'||"
                           "scenario_hash||'|'||seed||'|'||git_rev||'|'||hostname||'|'||"
                           "started_at||'|'||duration_ms||'|'||verdict||'|'||reason FROM runs"),
                    "20261121-114203-ab12cd|seed-001|scenarios/x.yaml|protocol=legacy|abc123|42|"
                    "0123456789ab|testhost|1763725323000|3200|pass|expected failure observed");
    FL_ASSERT_STREQ(q1(db,
                       "SELECT group_concat(proc_no||','||host||','||job||','||task||','||pid"
                       "||','||command||','||started_ms||','||ended_ms||','||"
                       "ifnull(exit_code,'-')||','||ifnull(signal,'-')||','||core_dumped||','||"
                       "ifnull(log_path,'-')||','||generation, ';') FROM "
                       "(SELECT * FROM processes WHERE run = %lld ORDER BY proc_no)",
                       (long long)id),
                    "0,ps0,ps,0,101,psrt --job_name=ps,3,900,-,9,1,/run/x/ps0.log,0;"
                    "1,w0,worker,0,102,psrt --job_name=worker,4,950,0,-,0,-,1");
    FL_ASSERT_STREQ(q1(db, "SELECT count(*) FROM events WHERE run = %lld", (long long)id), "5");
    FL_ASSERT_STREQ(q1(db, "SELECT t_ms||' '||host||' '||job||' '||task||' '||kind||' '||attrs||' '"
                           "||sync FROM events ORDER BY t_ms LIMIT 1"),
                    "100 w0 worker 0 save.begin step=50 1");
    FL_ASSERT_STREQ(q1(db, "SELECT group_concat(fault_no||','||idx||','||kind||','||target||','||"
                           "ifnull(detail,'-')||','||applied_ms||','||ifnull(healed_ms,'-')||','||"
                           "ifnull(error,'-'), ';') FROM (SELECT * FROM faults ORDER BY fault_no)"),
                    "0,1,kill,ps1,signal=SIGKILL,200,-,-;"
                    "1,2,partition,[ps0,w0]|[ps1],-,300,3300,nft: No such file");
    FL_ASSERT_STREQ(q1(db, "SELECT group_concat(name||','||target||','||passed||','||expected||','"
                           "||observed||','||ifnull(line,'-'), ';') FROM checks"),
                    "fails_with,chief,1,NotFoundError,NotFoundError: ./train_logs,27;"
                    "exit,ps:1,0,0,SIGKILL,-");
    /* Checkpoint operations derived from the events, plus the direct one. */
    FL_ASSERT_STREQ(q1(db, "SELECT host||' '||step||' '||prefix||' '||outcome||' '||started_ms||' '"
                           "||duration_ms FROM saves"),
                    "w0 50 ./train_logs/model.ckpt-50 ok 100 250");
    FL_ASSERT_STREQ(q1(db, "SELECT group_concat(host||' '||ifnull(step,'-')||' '||outcome||' '||"
                           "ifnull(error,'-')||' '||ifnull(duration_ms,'-'), ';') FROM restores"),
                    "ps1 24 failed Unsuccessful TensorSliceReader constructor -;"
                    "checker 50 ok - 12");
    FL_ASSERT_STREQ(q1(db, "SELECT host||' '||prefix||' '||outcome||' '||started_ms||' '||"
                           "ifnull(duration_ms,'-') FROM exports"),
                    "w0 model/1 unfinished 500 -");
    /* Foreign keys are on: a row for a run that does not exist is refused. */
    FL_ASSERT(sqlite3_exec(db, "INSERT INTO events(run, t_ms, kind) VALUES (999, 1, 'x')", NULL,
                           NULL, NULL) != SQLITE_OK);
    sqlite3_close(other);
    fl_rec_close(rec);
}

FL_TEST(record_db, run_begin_duplicate_id_is_eexist)
{
    struct fl_rec *rec = open_ok(db_path("d.db"), NULL);
    struct fl_rec_run *run = begin(rec, "dup", "s", "", NULL, 0), *run2 = NULL;
    struct fl_rec_run_info info = {.run_id = "dup", .scenario = "s"};
    FL_ASSERT_EQ(fl_rec_run_begin(rec, &info, &run2), -EEXIST);
    FL_ASSERT(run2 == NULL);
    FL_ASSERT_CONTAINS(fl_rec_errmsg(rec), "already recorded");
    FL_ASSERT_EQ(fl_rec_run_end(run, "bogus", NULL, 5), -EINVAL);
    FL_ASSERT_STREQ(q1(fl_rec_db(rec), "SELECT verdict||' '||reason FROM runs"),
                    "error recorder: invalid verdict");
    fl_rec_close(rec);
}

FL_TEST(record_db, flush_waits_for_row_threshold)
{
    const char *path = db_path("f.db");
    struct fl_rec_opts opts = {.flush_rows = 10, .flush_interval_ms = 600000};
    struct fl_rec *rec = open_ok(path, &opts);
    struct fl_rec_run *run = begin(rec, "f1", "s", "", NULL, 0);
    sqlite3 *other;
    FL_REQUIRE_EQ(sqlite3_open(path, &other), SQLITE_OK);
    FL_ASSERT_EQ(fl_rec_flush_due_ms(rec), -1);
    for (int i = 0; i < 9; i++)
        FL_REQUIRE_EQ(fl_rec_event(run, i, "h", NULL, -1, "tick", NULL, false), 0);
    FL_ASSERT_EQ(fl_rec_pending(rec), 9);
    FL_ASSERT_GT(fl_rec_flush_due_ms(rec), 500000);
    FL_ASSERT_STREQ(q1(other, "SELECT count(*) FROM events"), "0");
    FL_REQUIRE_EQ(fl_rec_event(run, 9, "h", NULL, -1, "tick", NULL, false), 0);
    FL_ASSERT_EQ(fl_rec_pending(rec), 0);
    FL_ASSERT_STREQ(q1(other, "SELECT count(*) FROM events"), "10");
    FL_REQUIRE_EQ(fl_rec_event(run, 10, "h", NULL, -1, "tick", NULL, false), 0);
    FL_ASSERT_EQ(fl_rec_flush(rec), 0);
    FL_ASSERT_STREQ(q1(other, "SELECT count(*) FROM events"), "11");
    FL_ASSERT_STREQ(q1(other, "SELECT count(*) FROM events WHERE job IS NULL AND task IS NULL"
                              " AND attrs IS NULL"),
                    "11");
    FL_ASSERT_EQ(fl_rec_run_end(run, "fail", "x", 1), 0);
    sqlite3_close(other);
    fl_rec_close(rec);
}

FL_TEST(record_db, flush_due_after_interval)
{
    struct fl_rec_opts opts = {.flush_rows = 1000000, .flush_interval_ms = 30};
    struct fl_rec *rec = open_ok(db_path("i.db"), &opts);
    struct fl_rec_run *run = begin(rec, "i1", "s", "", NULL, 0);
    FL_REQUIRE_EQ(fl_rec_event(run, 0, "h", NULL, -1, "tick", NULL, false), 0);
    int64_t due = fl_rec_flush_due_ms(rec);
    FL_ASSERT_GE(due, 0);
    FL_ASSERT_LE(due, 30);
    /* Wait for the deadline the recorder itself announced, then one more row
     * triggers the flush. */
    struct timespec ts = {0, (due + 20) * 1000000};
    nanosleep(&ts, NULL);
    FL_ASSERT_EQ(fl_rec_flush_due_ms(rec), 0);
    FL_REQUIRE_EQ(fl_rec_event(run, 1, "h", NULL, -1, "tick", NULL, false), 0);
    FL_ASSERT_EQ(fl_rec_pending(rec), 0);
    FL_ASSERT_EQ(fl_rec_run_end(run, "pass", NULL, 1), 0);
    fl_rec_close(rec);
}

FL_TEST(record_db, killed_run_stays_running_until_marked_abandoned)
{
    const char *path = db_path("k.db");
    pid_t pid = fork();
    FL_REQUIRE(pid >= 0);
    if (pid == 0) {
        struct fl_rec *rec;
        struct fl_rec_run *run;
        char err[256];
        struct fl_rec_run_info info = {.run_id = "killed-1", .scenario = "s"};
        if (fl_rec_open(&rec, path, NULL, err, sizeof err) || fl_rec_run_begin(rec, &info, &run))
            _exit(1);
        fl_rec_event(run, 1, "h", NULL, -1, "queued.never.written", NULL, false);
        raise(SIGKILL);
        _exit(2);
    }
    int status;
    FL_REQUIRE(waitpid(pid, &status, 0) == pid);
    FL_REQUIRE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);

    struct fl_rec *rec = open_ok(path, NULL);
    char v[16];
    FL_ASSERT_EQ(fl_rec_run_verdict(rec, "killed-1", v, sizeof v), 0);
    FL_ASSERT_STREQ(v, "running");
    FL_ASSERT_EQ(fl_rec_mark_abandoned(rec, "killed-1", NULL), 0);
    FL_ASSERT_EQ(fl_rec_run_verdict(rec, "killed-1", v, sizeof v), 0);
    FL_ASSERT_STREQ(v, "error");
    FL_ASSERT_STREQ(q1(fl_rec_db(rec), "SELECT reason FROM runs WHERE run_id = 'killed-1'"),
                    "harness killed");
    FL_ASSERT_EQ(fl_rec_mark_abandoned(rec, "killed-1", "again"), -EALREADY);
    FL_ASSERT_EQ(fl_rec_mark_abandoned(rec, "no-such-run", NULL), -ENOENT);
    /* gc cleaned up after it: when, in runs.gc_at */
    FL_ASSERT_STREQ(q1(fl_rec_db(rec), "SELECT quote(gc_at) FROM runs WHERE run_id = 'killed-1'"),
                    "NULL");
    FL_ASSERT_EQ(fl_rec_mark_collected(rec, "killed-1", 1795748429000), 0);
    FL_ASSERT_STREQ(q1(fl_rec_db(rec), "SELECT gc_at FROM runs WHERE run_id = 'killed-1'"),
                    "1795748429000");
    FL_ASSERT_EQ(fl_rec_mark_collected(rec, "no-such-run", 1), -ENOENT);
    FL_ASSERT_EQ(fl_rec_run_verdict(rec, "no-such-run", v, sizeof v), -ENOENT);
    fl_rec_close(rec);
}

/* Two processes open the same (new) database at once, migrate it, and each
 * records a run of many events in small batches. */
FL_TEST_T(record_db, concurrent_processes_both_record, 120)
{
    enum { NPROC = 2, NEVENTS = 20000 };
    const char *path = db_path("shared/c.db");
    int go[2];
    pid_t pids[NPROC];
    FL_REQUIRE(pipe(go) == 0);
    for (int i = 0; i < NPROC; i++) {
        pids[i] = fork();
        FL_REQUIRE(pids[i] >= 0);
        if (pids[i] == 0) {
            struct fl_rec *rec;
            struct fl_rec_run *run;
            struct fl_rec_opts opts = {.flush_rows = 50};
            char err[256], id[32], c;
            close(go[1]);
            if (read(go[0], &c, 1) != 0) /* released when the parent closes */
                _exit(10);
            if (fl_rec_open(&rec, path, &opts, err, sizeof err)) {
                fprintf(stderr, "child %d: %s\n", i, err);
                _exit(11);
            }
            snprintf(id, sizeof id, "par-%d", i);
            if (fl_rec_run_begin(rec, &(struct fl_rec_run_info){.run_id = id, .scenario = "par"},
                                 &run))
                _exit(12);
            for (int k = 0; k < NEVENTS; k++)
                if (fl_rec_event(run, k, "h", "worker", i, "train.step", "step=1 loss=0.5",
                                 false)) {
                    fprintf(stderr, "child %d: %s\n", i, fl_rec_errmsg(rec));
                    _exit(13);
                }
            if (fl_rec_run_end(run, "pass", NULL, 1) || fl_rec_close(rec))
                _exit(14);
            _exit(0);
        }
    }
    close(go[0]);
    close(go[1]);
    for (int i = 0; i < NPROC; i++) {
        int status;
        FL_REQUIRE(waitpid(pids[i], &status, 0) == pids[i]);
        FL_ASSERT_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child %d: status 0x%x", i,
                      status);
    }
    struct fl_rec *rec = open_ok(path, NULL);
    sqlite3 *db = fl_rec_db(rec);
    FL_ASSERT_STREQ(q1(db, "SELECT group_concat(run_id||':'||verdict, ' ') FROM "
                           "(SELECT run_id, verdict FROM runs ORDER BY run_id)"),
                    "par-0:pass par-1:pass");
    FL_ASSERT_STREQ(q1(db, "SELECT group_concat(n, ' ') FROM (SELECT count(*) AS n FROM events"
                           " GROUP BY run ORDER BY run)"),
                    "20000 20000");
    fl_rec_close(rec);
}

/* Cost of an event: the figure is printed; the bound is loose (a shared
 * 2-core machine), far above what a stall on every row would cost. */
FL_TEST_T(record_db, events_are_cheap, 120)
{
    enum { N = 200000 };
    struct fl_rec *rec = open_ok(db_path("b.db"), NULL);
    struct fl_rec_run *run = begin(rec, "bench", "s", "", NULL, 0);
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int i = 0; i < N; i++)
        FL_REQUIRE_EQ(
            fl_rec_event(run, i, "ps0", "ps", 0, "train.step", "step=12 loss=0.25", false), 0);
    FL_REQUIRE_EQ(fl_rec_run_end(run, "pass", NULL, 1), 0);
    clock_gettime(CLOCK_MONOTONIC, &b);
    double s = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9;
    fprintf(stderr, "recorder: %d events in %.3f s = %.0f events/s\n", N, s, N / s);
    FL_ASSERT_STREQ(q1(fl_rec_db(rec), "SELECT count(*) FROM events"), "200000");
    FL_ASSERT_MSG(N / s > 20000, "only %.0f events/s", N / s);
    fl_rec_close(rec);
}

FL_TEST(record_db, make_run_id_has_date_time_and_hex)
{
    char a[32], b[32];
    /* 2026-11-21 11:42:03 UTC */
    setenv("TZ", "UTC", 1);
    tzset();
    FL_REQUIRE_EQ(fl_rec_make_run_id(a, sizeof a, 1795261323000LL), 0);
    FL_REQUIRE_EQ(fl_rec_make_run_id(b, sizeof b, 1795261323000LL), 0);
    FL_ASSERT_EQ(strlen(a), 22);
    FL_ASSERT(!strncmp(a, "20261121-114203-", 16));
    FL_ASSERT_EQ(strspn(a + 16, "0123456789abcdef"), 6);
    FL_ASSERT(strcmp(a, b) != 0);
    FL_ASSERT_EQ(fl_rec_make_run_id(a, 10, 0), -ENOSPC);
}

FL_TEST(record_db, git_revision_of_tree_and_non_tree)
{
    char rev[64];
    int rc = fl_rec_git_revision(fl_test_root(), rev, sizeof rev);
    if (rc == -ENOENT)
        FL_SKIP("source tree is not a git checkout");
    FL_REQUIRE_EQ(rc, 0);
    FL_ASSERT_EQ(strspn(rev, "0123456789abcdef"), 12);
    FL_ASSERT(rev[12] == '\0' || !strcmp(rev + 12, "-dirty"));
    FL_ASSERT_EQ(fl_rec_git_revision(fl_test_dir(), rev, sizeof rev), -ENOENT);
}

/* Flushes rec while another connection holds the database: the flush must
 * say -EBUSY; how long it took, in ms. */
static int64_t busy_flush_ms(struct fl_rec *rec)
{
    int64_t t0 = fl_mono_ms();
    FL_ASSERT_EQ(fl_rec_flush(rec), -EBUSY);
    return fl_mono_ms() - t0;
}

/* A writer that cannot get the lock within busy_timeout_ms gets -EBUSY and
 * a message; the batch is dropped (recording never stalls a run for good),
 * and the next batch is written once the lock is free. */
FL_TEST(record_db, flush_busy_timeout_drops_batch)
{
    const char *path = db_path("busy.db");
    struct fl_rec_opts opts = {.busy_timeout_ms = 100, .flush_rows = 1000};
    struct fl_rec *rec = open_ok(path, &opts);
    struct fl_rec_run *run = begin(rec, "busy-1", "s", "", NULL, 0);
    sqlite3 *other;
    FL_REQUIRE_EQ(sqlite3_open(path, &other), SQLITE_OK);
    FL_REQUIRE_EQ(sqlite3_exec(other, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
    FL_REQUIRE_EQ(fl_rec_event(run, 1, "h", NULL, -1, "lost", NULL, false), 0);
    int64_t waited = busy_flush_ms(rec);
    FL_ASSERT_GE(waited, 90);
    FL_ASSERT_LT(waited, 2000);
    FL_ASSERT_CONTAINS(fl_rec_errmsg(rec), "database is locked");
    FL_ASSERT_CONTAINS(fl_rec_errmsg(rec), path);
    FL_ASSERT_EQ(fl_rec_pending(rec), 0);
    FL_REQUIRE_EQ(sqlite3_exec(other, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
    FL_REQUIRE_EQ(fl_rec_event(run, 2, "h", NULL, -1, "kept", NULL, false), 0);
    FL_ASSERT_EQ(fl_rec_run_end(run, "pass", NULL, 2), 0);
    FL_ASSERT_STREQ(q1(other, "SELECT group_concat(kind) FROM events"), "kept");
    FL_ASSERT_STREQ(q1(other, "SELECT verdict FROM runs"), "pass");
    sqlite3_close(other);
    fl_rec_close(rec);
}

/* During a run (nowait), a database another process holds is not waited
 * for: the flush returns at once, keeps every row, is not due again before
 * its retry time, and writes them all once the lock is free; the run's end
 * then records the verdict as usual. */
FL_TEST(record_db, flush_busy_during_run_keeps_rows_without_waiting)
{
    const char *path = db_path("busy-run.db");
    struct fl_rec_opts opts = {.busy_timeout_ms = 5000, .flush_rows = 1000};
    struct fl_rec *rec = open_ok(path, &opts);
    struct fl_rec_run *run = begin(rec, "busy-2", "s", "", NULL, 0);
    fl_rec_set_nowait(rec, true);
    sqlite3 *other;
    FL_REQUIRE_EQ(sqlite3_open(path, &other), SQLITE_OK);
    FL_REQUIRE_EQ(sqlite3_exec(other, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
    FL_REQUIRE_EQ(fl_rec_event(run, 1, "h", NULL, -1, "first", NULL, false), 0);
    int64_t waited = busy_flush_ms(rec);
    FL_ASSERT_LT(waited, 1000); /* not the busy timeout of 5 s */
    FL_ASSERT_EQ(fl_rec_pending(rec), 1);
    FL_ASSERT_GT(fl_rec_flush_due_ms(rec), 0); /* not at once again: no busy loop */
    /* a row call that would flush reports success and keeps its row too */
    int f = fl_rec_fault_applied(
        run, &(struct fl_rec_fault){.index = 1, .kind = "kill", .target = "h", .applied_ms = 2});
    FL_ASSERT_EQ(f, 0);
    FL_ASSERT_EQ(fl_rec_pending(rec), 2);
    FL_REQUIRE_EQ(sqlite3_exec(other, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
    FL_ASSERT_EQ(fl_rec_flush(rec), 0);
    FL_ASSERT_EQ(fl_rec_pending(rec), 0);
    FL_ASSERT_STREQ(q1(other, "SELECT group_concat(kind) FROM events"), "first");
    FL_ASSERT_STREQ(q1(other, "SELECT kind || ' ' || target FROM faults"), "kill h");
    fl_rec_set_nowait(rec, false);
    FL_ASSERT_EQ(fl_rec_run_end(run, "pass", NULL, 3), 0);
    FL_ASSERT_STREQ(q1(other, "SELECT verdict FROM runs"), "pass");
    sqlite3_close(other);
    fl_rec_close(rec);
}

/* A batch that cannot be written is reported, and the run's verdict is
 * still recorded on its own. */
FL_TEST(record_db, run_end_records_verdict_when_batch_fails)
{
    struct fl_rec *rec = open_ok(db_path("poison.db"), NULL);
    sqlite3 *db = fl_rec_db(rec);
    FL_REQUIRE_EQ(
        sqlite3_exec(db,
                     "CREATE TEMP TRIGGER poison BEFORE INSERT ON main.events"
                     " WHEN NEW.kind = 'poison' BEGIN SELECT RAISE(ABORT, 'poisoned'); END",
                     NULL, NULL, NULL),
        SQLITE_OK);
    struct fl_rec_run *run = begin(rec, "p1", "s", "", NULL, 0);
    FL_REQUIRE_EQ(fl_rec_event(run, 1, "h", NULL, -1, "poison", NULL, false), 0);
    FL_ASSERT(fl_rec_run_end(run, "fail", "ps:1 exited 1", 77) < 0);
    FL_ASSERT_CONTAINS(fl_rec_errmsg(rec), "poisoned");
    FL_ASSERT_STREQ(q1(db, "SELECT verdict||' '||reason||' '||duration_ms FROM runs"),
                    "fail ps:1 exited 1 77");
    FL_ASSERT_STREQ(q1(db, "SELECT count(*) FROM events"), "0");
    fl_rec_close(rec);
}

/* A batch that could not be written is counted, with the first reason, so
 * that a command can say its results are incomplete (exit 3). */
FL_TEST(record_db, lost_rows_are_counted_with_first_reason)
{
    struct fl_rec *rec = open_ok(db_path("lost.db"), NULL);
    const char *why = NULL;
    FL_ASSERT_EQ(fl_rec_lost(rec, &why), 0);
    FL_ASSERT_STREQ(why, "");
    sqlite3 *db = fl_rec_db(rec);
    FL_REQUIRE_EQ(sqlite3_exec(db,
                               "CREATE TEMP TRIGGER poison BEFORE INSERT ON main.checks"
                               " BEGIN SELECT RAISE(ABORT, 'checks refused'); END",
                               NULL, NULL, NULL),
                  SQLITE_OK);
    struct fl_rec_run *run = begin(rec, "l1", "s", "", NULL, 0);
    FL_REQUIRE_EQ(fl_rec_event(run, 1, "h", NULL, -1, "x", NULL, false), 0);
    FL_REQUIRE_EQ(fl_rec_check(run, &(struct fl_rec_check){.name = "exit", .passed = true}), 0);
    FL_ASSERT(fl_rec_flush(rec) < 0);
    FL_ASSERT_EQ(fl_rec_lost(rec, &why), 2); /* the event went with the batch */
    FL_ASSERT_CONTAINS(why, "checks refused");
    FL_ASSERT_EQ(fl_rec_run_end(run, "pass", NULL, 5), 0);
    FL_ASSERT_EQ(fl_rec_lost(rec, NULL), 2);
    fl_rec_close(rec);
}

/* Damage SQLite would find only when it reads the damaged page (maybe long
 * after rows were written into the file) is found at open. */
FL_TEST(record_db, open_refuses_damaged_database)
{
    const char *path = db_path("damaged.db");
    struct fl_rec *rec = open_ok(path, NULL);
    for (int i = 0; i < 40; i++) { /* rows up to the overwritten bytes of the runs table's page */
        char id[32];
        snprintf(id, sizeof id, "20261126-120000-%06d", i);
        struct fl_rec_run *run = begin(rec, id, "scenario", "", NULL, 0);
        FL_REQUIRE_EQ(fl_rec_run_end(run, "pass", NULL, 5), 0);
    }
    fl_rec_close(rec);
    FILE *f = fopen(path, "r+b");
    FL_REQUIRE(f);
    char junk[3000];
    memset(junk, 0xab, sizeof junk);
    FL_REQUIRE(fseek(f, 5000, SEEK_SET) == 0);
    FL_REQUIRE(fwrite(junk, 1, sizeof junk, f) == sizeof junk);
    fclose(f);
    char err[1024] = "";
    FL_ASSERT_EQ(fl_rec_open(&rec, path, NULL, err, sizeof err), -EUCLEAN);
    FL_ASSERT_CONTAINS(err, path);
    FL_ASSERT_CONTAINS(err, "is damaged");
    FL_ASSERT_CONTAINS(err, "--db NEW");
    FL_ASSERT_CONTAINS(err, ".recover");
    FL_ASSERT(!strchr(err, '\n'));
    /* reading it (faultline runs) is still allowed: queries say what fails */
    FL_ASSERT_EQ(fl_rec_open(&rec, path, &(struct fl_rec_opts){.read_only = true}, err, sizeof err),
                 0);
    fl_rec_close(rec);
}

FL_TEST_ROOT(record_db, open_refuses_database_it_cannot_write)
{
    const char *path = db_path("immutable.db");
    struct fl_rec *rec = open_ok(path, NULL);
    fl_rec_close(rec);
    if (fl_test_sh(NULL, "chattr +i %s 2>/dev/null", path) != 0)
        FL_SKIP("chattr +i is not supported on the test directory's filesystem");
    char err[1024] = "";
    int rc = fl_rec_open(&rec, path, NULL, err, sizeof err);
    fl_test_sh(NULL, "chattr -i %s", path);
    FL_ASSERT_EQ(rc, -EROFS);
    FL_ASSERT_CONTAINS(err, path);
    FL_ASSERT_CONTAINS(err, "cannot be written");
    FL_ASSERT_CONTAINS(err, "--db NEW");
}
