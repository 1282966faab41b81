/*
 * test_record_schema_doc.c: keeps docs/schema.md honest.  Every ```sql
 * block of the page is run against a database recorded through the recorder
 * API, and the four questions the page promises to answer (faults of a run,
 * how often a scenario fails, verdicts changed since a revision, how long
 * saves take) must return the rows the recorded runs imply.  The tables the
 * page describes ("### name ..." and the backquoted names in the first
 * cell of each row) must be the database's, column for column, both ways.
 */
#include "harness/record/recorder.h"
#include "harness/tests/fl_test.h"
#include "harness/sys/rundir.h"

#include <errno.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define T0 1795258800000LL /* 2026-11-21 11:00:00 UTC */

static void record(struct fl_rec *rec, const char *id, const char *variant, const char *rev,
                   int64_t started, const char *verdict, bool details)
{
    struct fl_rec_run *run;
    struct fl_rec_run_info info = {.run_id = id,
                                   .scenario = "s001-2ps-3w",
                                   .variant = variant,
                                   .git_rev = rev,
                                   .seed = 1,
                                   .started_at_ms = started};
    FL_REQUIRE_EQ(fl_rec_run_begin(rec, &info, &run), 0);
    if (details) {
        int p = fl_rec_proc_start(run, &(struct fl_rec_proc){.host = "ps1",
                                                             .job = "ps",
                                                             .task = 1,
                                                             .pid = 7,
                                                             .command = "psrt",
                                                             .started_ms = 1});
        int w = fl_rec_proc_start(run, &(struct fl_rec_proc){.host = "w0",
                                                             .job = "worker",
                                                             .task = 0,
                                                             .pid = 8,
                                                             .command = "psrt",
                                                             .started_ms = 2});
        fl_rec_event(run, 100, "w0", "worker", 0, "save.begin", "step=50", true);
        fl_rec_event(run, 180, "w0", "worker", 0, "save.done", "step=50 prefix=./train_logs/m-50",
                     false);
        fl_rec_event(run, 300, "w0", "worker", 0, "save.begin", "step=100", false);
        fl_rec_event(run, 310, "w0", "worker", 0, "save.failed",
                     "step=100 error=\"NotFoundError: x\"", false);
        int f = fl_rec_fault_applied(run, &(struct fl_rec_fault){.index = 1,
                                                                 .kind = "partition",
                                                                 .target = "[ps0,w0]|[ps1]",
                                                                 .applied_ms = 200});
        fl_rec_fault_applied(run, &(struct fl_rec_fault){.index = 2,
                                                         .kind = "kill",
                                                         .target = "ps1",
                                                         .detail = "signal=SIGKILL",
                                                         .applied_ms = 250});
        fl_rec_fault_healed(run, f, 1200);
        fl_rec_proc_end(run, p, 251, -1, 9, false, false);
        fl_rec_proc_end(run, w, 400, 1, 0, false, false);
        fl_rec_check(run, &(struct fl_rec_check){.name = "exit",
                                                 .target = "all",
                                                 .passed = false,
                                                 .expected = "0",
                                                 .observed = "ps:1 SIGKILL",
                                                 .line = 20});
    }
    if (verdict)
        FL_REQUIRE_EQ(fl_rec_run_end(run, verdict, strcmp(verdict, "pass") ? "why" : NULL, 1000),
                      0);
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

/* docs/schema.md, whole (path gets its name); fails the test when absent. */
static char *read_schema_doc(char *path, size_t len)
{
    snprintf(path, len, "%s/docs/schema.md", fl_test_root());
    char *doc = NULL;
    FL_REQUIRE_MSG(fl_read_file(path, &doc, NULL) == 0, "cannot read %s", path);
    return doc;
}

FL_TEST(record_schema_doc, schema_doc_queries_run)
{
    char path[4096], dbpath[4096], err[256];
    char *doc = read_schema_doc(path, sizeof path);

    struct fl_rec *rec;
    snprintf(dbpath, sizeof dbpath, "%s/q.db", fl_test_dir());
    FL_REQUIRE_EQ(fl_rec_open(&rec, dbpath, NULL, err, sizeof err), 0);
    int64_t now = (int64_t)time(NULL) * 1000;
    record(rec, "20261121-114203-ab12cd", "protocol=legacy", "aaaa1111bbbb", now - 3000, "fail",
           true);
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
    FL_REQUIRE_EQ(sqlite3_prepare_v2(db,
                                     "SELECT (SELECT count(*) FROM runs) || ' ' ||"
                                     " (SELECT count(*) FROM events)",
                                     -1, &st, NULL),
                  SQLITE_OK);
    FL_REQUIRE_EQ(sqlite3_step(st), SQLITE_ROW);
    snprintf(buf, sizeof buf, "%s", sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    FL_ASSERT_STREQ(buf, "4 8");
    free(doc);
    fl_rec_close(rec);
}

/* Adds each `name` of a table row's first cell ("| `run`, `proc_no` | ...")
 * to cols (a space-separated list, " a b c "). */
static void doc_row_columns(const char *row, char *cols, size_t cap)
{
    const char *end = strchr(row + 1, '|');
    for (const char *p = row; end && (p = strchr(p, '`')) && p < end;) {
        const char *q = strchr(p + 1, '`');
        if (!q || q > end)
            break;
        size_t l = strlen(cols);
        snprintf(cols + l, cap - l, "%.*s ", (int)(q - p - 1), p + 1);
        p = q + 1;
    }
}

/* " a b " (the order does not matter) against the columns of table t. */
static void same_columns(sqlite3 *db, const char *t, const char *doc_cols, const char *skip)
{
    char sql[128], *real = calloc(1, 4096);
    snprintf(sql, sizeof sql, "SELECT name FROM pragma_table_info('%s')", t);
    sqlite3_stmt *st;
    FL_REQUIRE_EQ(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
    int n = 0;
    while (sqlite3_step(st) == SQLITE_ROW) {
        const char *c = (const char *)sqlite3_column_text(st, 0);
        char w[80];
        snprintf(w, sizeof w, " %s ", c);
        n++;
        if (skip && !strcmp(c, skip))
            continue;
        size_t l = strlen(real);
        snprintf(real + l, 4096 - l, "%s ", c);
        FL_ASSERT_MSG(strstr(doc_cols, w) != NULL,
                      "docs/schema.md: column %s.%s is not documented (documented:%s)", t, c,
                      doc_cols);
    }
    sqlite3_finalize(st);
    FL_ASSERT_MSG(n > 0, "docs/schema.md describes table %s, which the database lacks", t);
    for (const char *p = doc_cols; *p;) {
        while (*p == ' ')
            p++;
        size_t l = strcspn(p, " ");
        if (!l)
            break;
        char w[80];
        snprintf(w, sizeof w, " %.*s ", (int)l, p);
        char all[4200];
        snprintf(all, sizeof all, " %s", real);
        FL_ASSERT_MSG(strstr(all, w) != NULL || (skip && !strncmp(p, skip, l) && !skip[l]),
                      "docs/schema.md documents column %s.%.*s, which the database lacks", t,
                      (int)l, p);
        p += l;
    }
    free(real);
}

FL_TEST(record_schema_doc, schema_doc_tables_match_the_database)
{
    char path[4096], dbpath[4096], err[256];
    char *doc = read_schema_doc(path, sizeof path);
    struct fl_rec *rec;
    snprintf(dbpath, sizeof dbpath, "%s/t.db", fl_test_dir());
    FL_REQUIRE_EQ(fl_rec_open(&rec, dbpath, NULL, err, sizeof err), 0);
    sqlite3 *db = fl_rec_db(rec);

    /* Every "### <table> ..." section under "## Tables", up to the next "## ". */
    char *tables = strstr(doc, "\n## Tables\n");
    FL_REQUIRE(tables);
    char *tables_end = strstr(tables + 1, "\n## ");
    FL_REQUIRE(tables_end);
    *tables_end = '\0';
    char seen[512] = " ";
    int nsections = 0;
    for (char *sec = strstr(tables, "\n### "); sec;) {
        sec += 5;
        nsections++;
        char *next = strstr(sec, "\n### ");
        if (next)
            *next = '\0';
        char name[64];
        FL_REQUIRE(sscanf(sec, "%63[a-z_]", name) == 1);
        size_t sl = strlen(seen);
        snprintf(seen + sl, sizeof seen - sl, "%s ", name);
        char cols[2048] = " ";
        for (char *row = strstr(sec, "\n| `"); row; row = strstr(row + 1, "\n| `"))
            doc_row_columns(row + 1, cols, sizeof cols);
        same_columns(db, name, cols, NULL);
        /* the views beside ckpt_ops: "(same columns without `kind`)" */
        if (!strcmp(name, "ckpt_ops")) {
            FL_ASSERT_CONTAINS(sec, "columns without `kind`");
            static const char *const views[] = {"saves", "restores", "exports"};
            for (size_t v = 0; v < 3; v++)
                same_columns(db, views[v], cols, "kind");
        }
        if (!next)
            break;
        sec = next;
    }
    FL_ASSERT_GE(nsections, 6);
    /* and every table of the database has its section */
    sqlite3_stmt *st;
    FL_REQUIRE_EQ(sqlite3_prepare_v2(db,
                                     "SELECT name FROM sqlite_master WHERE type = 'table' "
                                     "AND name NOT LIKE 'sqlite_%'",
                                     -1, &st, NULL),
                  SQLITE_OK);
    while (sqlite3_step(st) == SQLITE_ROW) {
        char w[80];
        snprintf(w, sizeof w, " %s ", (const char *)sqlite3_column_text(st, 0));
        FL_ASSERT_MSG(strstr(seen, w) != NULL, "docs/schema.md has no section for table%s", w);
    }
    sqlite3_finalize(st);
    fl_rec_close(rec);
    free(doc);
}
