/*
 * test_recorder_schema_doc.c: keeps docs/schema.md honest.  Every ```sql
 * block of the page is run against a database recorded through the recorder
 * API, and the four questions the page promises to answer (faults of a run,
 * how often a scenario fails, verdicts changed since a revision, how long
 * saves take) must return the rows the recorded runs imply.
 */
#include "harness/recorder.h"
#include "harness/tests/fl_test.h"

#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define T0 1795258800000LL   /* 2026-11-21 11:00:00 UTC */

static void record(struct fl_rec *rec, const char *id, const char *variant, const char *rev,
                   int64_t started, const char *verdict, bool details)
{
    struct fl_rec_run *run;
    struct fl_rec_run_info info = {.run_id = id, .scenario = "seed-001-merge-needs-shared-fs",
                                   .variant = variant, .git_rev = rev, .seed = 1,
                                   .started_at_ms = started};
    FL_REQUIRE_EQ(fl_rec_run_begin(rec, &info, &run), 0);
    if (details) {
        int p = fl_rec_proc_start(run, &(struct fl_rec_proc){
            .host = "ps1", .job = "ps", .task = 1, .pid = 7, .command = "psrt", .started_ms = 1});
        int w = fl_rec_proc_start(run, &(struct fl_rec_proc){
            .host = "w0", .job = "worker", .task = 0, .pid = 8, .command = "psrt", .started_ms = 2});
        fl_rec_event(run, 100, "w0", "worker", 0, "save.begin", "step=50", true);
        fl_rec_event(run, 180, "w0", "worker", 0, "save.done", "step=50 prefix=./train_logs/m-50", false);
        fl_rec_event(run, 300, "w0", "worker", 0, "save.begin", "step=100", false);
        fl_rec_event(run, 310, "w0", "worker", 0, "save.failed", "step=100 error=\"NotFoundError: x\"", false);
        int f = fl_rec_fault_applied(run, &(struct fl_rec_fault){
            .index = 0, .kind = "partition", .target = "[ps0,w0]|[ps1]", .applied_ms = 200});
        fl_rec_fault_applied(run, &(struct fl_rec_fault){
            .index = 1, .kind = "kill", .target = "ps1", .detail = "signal=SIGKILL", .applied_ms = 250});
        fl_rec_fault_healed(run, f, 1200);
        fl_rec_proc_end(run, p, 251, -1, 9, false);
        fl_rec_proc_end(run, w, 400, 1, 0, false);
        fl_rec_check(run, &(struct fl_rec_check){.name = "exit", .target = "all", .passed = false,
                                                 .expected = "0", .observed = "ps:1 SIGKILL", .line = 20});
    }
    if (verdict)
        FL_REQUIRE_EQ(fl_rec_run_end(run, verdict, strcmp(verdict, "pass") ? "why" : NULL, 1000), 0);
}

/* Runs every statement of sql; returns the number of result rows of the last
 * statement that produced rows, or -1 on error (message in *err). */
static int run_block(sqlite3 *db, const char *sql, const char **err)
{
    int rows = 0;
    while (sql && *sql) {
        sqlite3_stmt *st;
        const char *tail;
        if (sqlite3_prepare_v2(db, sql, -1, &st, &tail) != SQLITE_OK) {
            *err = sqlite3_errmsg(db);
            return -1;
        }
        if (!st)
            break;
        int rc, n = 0;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW)
            n++;
        sqlite3_finalize(st);
        if (rc != SQLITE_DONE) {
            *err = sqlite3_errmsg(db);
            return -1;
        }
        if (n)
            rows = n;
        sql = tail;
    }
    return rows;
}

FL_TEST(recorder, schema_doc_queries_run)
{
    char path[4096], dbpath[4096], err[256];
    snprintf(path, sizeof path, "%s/docs/schema.md", fl_test_root());
    FILE *f = fopen(path, "r");
    FL_REQUIRE_MSG(f, "cannot open %s", path);
    char *doc = NULL;
    size_t cap = 0;
    ssize_t len = getdelim(&doc, &cap, '\0', f);
    fclose(f);
    FL_REQUIRE(len > 0);

    struct fl_rec *rec;
    snprintf(dbpath, sizeof dbpath, "%s/q.db", fl_test_dir());
    FL_REQUIRE_EQ(fl_rec_open(&rec, dbpath, NULL, err, sizeof err), 0);
    int64_t now = (int64_t)time(NULL) * 1000;
    record(rec, "20261121-114203-ab12cd", "protocol=legacy", "aaaa1111bbbb", now - 3000, "fail", true);
    record(rec, "r-robust", "protocol=robust", "aaaa1111bbbb", now - 2000, "pass", true);
    record(rec, "r-later", "protocol=legacy", "cccc2222dddd", now - 1000, "pass", false);
    record(rec, "r-running", "protocol=legacy", "cccc2222dddd", now, NULL, false);
    record(rec, "r-old", "protocol=legacy", "00000000", T0 - 90LL * 86400000, "error", true);
    sqlite3 *db = fl_rec_db(rec);

    int results[32], nblocks = 0;
    for (char *p = doc; (p = strstr(p, "```sql\n")) && nblocks < 32;) {
        p += 7;
        char *end = strstr(p, "```");
        FL_REQUIRE(end);
        *end = '\0';
        const char *msg = NULL;
        results[nblocks] = run_block(db, p, &msg);
        FL_ASSERT_MSG(results[nblocks] >= 0, "docs/schema.md sql block %d fails: %s\n%s",
                      nblocks + 1, msg ? msg : "", p);
        nblocks++;
        p = end + 3;
    }
    FL_ASSERT_GE(nblocks, 8);
    /* 1: faults of the run, 2: fail rate per variant, 3: changed since
     * aaaa1111 (legacy fail -> pass), 4: save durations (one group per
     * variant with details, r-old's too). */
    FL_ASSERT_EQ(results[0], 2);
    FL_ASSERT_EQ(results[1], 2);
    FL_ASSERT_EQ(results[2], 1);
    FL_ASSERT_EQ(results[3], 2);
    /* The last block deletes runs older than 30 days, with cascades. */
    char buf[64];
    sqlite3_stmt *st;
    FL_REQUIRE_EQ(sqlite3_prepare_v2(db, "SELECT (SELECT count(*) FROM runs) || ' ' ||"
                                         " (SELECT count(*) FROM events)", -1, &st, NULL),
                  SQLITE_OK);
    FL_REQUIRE_EQ(sqlite3_step(st), SQLITE_ROW);
    snprintf(buf, sizeof buf, "%s", sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    FL_ASSERT_STREQ(buf, "4 8");
    free(doc);
    fl_rec_close(rec);
}
