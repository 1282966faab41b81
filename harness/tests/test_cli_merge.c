/*
 * test_cli_merge.c: `faultline runs merge OUT IN...` on databases written
 * by real `faultline run`s (harness/tests/scenarios/merge-rows.yaml: rows
 * in every table, two variants) and, for what real runs do not make (an
 * old schema, a run left 'running', a newer schema, a scenario text that
 * differs), on databases written through the recorder and sqlite3: every
 * table's rows arrive under the output's ids, `runs`, `--history`,
 * `--changed` and `report` read the result, merging twice changes nothing,
 * a conflicting run exits 2 naming it and writes nothing of its input, and
 * an output's own runs stay as they were.
 */
#include "harness/record/recorder.h"
#include "harness/tests/fl_test.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Path of NAME in the test's directory (static: two at a time). */
static const char *tpath(const char *name)
{
    static char buf[2][4200];
    static int i;
    i ^= 1;
    snprintf(buf[i], sizeof buf[i], "%s/%s", fl_test_dir(), name);
    return buf[i];
}

/* `faultline run` of merge-rows.yaml (both variants) into NAME.db. */
static void record_real(const char *name)
{
    char *out;
    int rc =
        fl_test_sh(&out, "%s run -q --out %s/%s --db %s/%s.db %s/harness/tests/scenarios/%s 2>&1",
                   fl_test_bin("faultline"), fl_test_dir(), name, fl_test_dir(), name,
                   fl_test_root(), "merge-rows.yaml");
    FL_REQUIRE_MSG(rc == 0, "faultline run into %s.db exited %d:\n%s", name, rc, out);
    free(out);
}

/* `faultline runs merge` in the test's directory; its exit status, its
 * stdout and stderr in *out. */
static int merge(char **out, const char *args)
{
    return fl_test_sh(out, "cd %s && %s runs merge %s 2>&1", fl_test_dir(),
                      fl_test_bin("faultline"), args);
}

/* sqlite3 in the test's directory; fails the test unless it exits 0. */
static char *sql(const char *db, const char *q)
{
    char *out;
    int rc = fl_test_sh(&out, "cd %s && sqlite3 %s \"%s\" 2>&1", fl_test_dir(), db, q);
    FL_REQUIRE_MSG(rc == 0, "sqlite3 %s \"%s\": exit %d: %s", db, q, rc, out);
    return out;
}

/* Everything the database holds, as text: its dump's hash. */
static char *dump_hash(const char *db)
{
    char *out;
    FL_REQUIRE_EQ(fl_test_sh(&out, "cd %s && sqlite3 %s .dump | sha256sum", fl_test_dir(), db), 0);
    return out;
}

static int count(const char *db, const char *table)
{
    char q[256];
    snprintf(q, sizeof q, "SELECT count(*) FROM \"%s\"", table);
    return fl_test_db_int(tpath(db), q);
}

/* The tables of a database (type 'table'), and whether each has a run column. */
static size_t tables(const char *db, char names[][64], bool *child, size_t max)
{
    sqlite3 *h;
    sqlite3_stmt *st;
    size_t n = 0;
    FL_REQUIRE_EQ(sqlite3_open_v2(tpath(db), &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    FL_REQUIRE_EQ(sqlite3_prepare_v2(h,
                                     "SELECT s.name, (SELECT count(*) FROM"
                                     " pragma_table_info(s.name) p WHERE p.name = 'run')"
                                     " FROM sqlite_schema s WHERE s.type = 'table'"
                                     " ORDER BY s.name",
                                     -1, &st, NULL),
                  SQLITE_OK);
    while (n < max && sqlite3_step(st) == SQLITE_ROW) {
        snprintf(names[n], 64, "%s", (const char *)sqlite3_column_text(st, 0));
        child[n++] = sqlite3_column_int(st, 1) > 0;
    }
    sqlite3_finalize(st);
    sqlite3_close(h);
    return n;
}

FL_TEST_ROOT_T(cli_merge, two_real_databases_merge_with_every_table, 120)
{
    record_real("a");
    record_real("b");
    /* a revision of their own, for --changed below */
    free(sql("a.db", "UPDATE runs SET git_rev = 'aaaa1111aaaa'"));
    free(sql("b.db", "UPDATE runs SET git_rev = 'aaaa1111aaaa'"));
    char *out;
    int rc = merge(&out, "m.db a.db b.db");
    FL_ASSERT_MSG(rc == 0, "merge: exit %d: %s", rc, out);
    FL_ASSERT_CONTAINS(out, "a.db: 2 runs added, 0 already in m.db");
    FL_ASSERT_CONTAINS(out, "b.db: 2 runs added, 0 already in m.db");
    free(out);

    /* every table: the rows of both (the scenario's text: once, the same in both) */
    char names[32][64];
    bool child[32];
    size_t n = tables("m.db", names, child, 32);
    FL_ASSERT_MSG(n >= 8, "%zu tables in the merged database", n);
    for (size_t i = 0; i < n; i++) {
        int a = count("a.db", names[i]), b = count("b.db", names[i]), m = count("m.db", names[i]);
        FL_ASSERT_MSG(a > 0, "table %s: no rows in a real run's database", names[i]);
        if (child[i] || !strcmp(names[i], "runs"))
            FL_ASSERT_MSG(m == a + b, "table %s: %d rows merged from %d + %d", names[i], m, a, b);
        else
            FL_ASSERT_MSG(m == a && a == b, "table %s: %d rows merged from %d and %d", names[i], m,
                          a, b);
    }
    /* each run's rows are its own: the events of a.db's runs, by run id */
    out = sql("m.db", "ATTACH 'a.db' AS a; SELECT count(*) FROM ("
                      " SELECT r.run_id, e.t_ms, e.host, e.kind, e.attrs, e.sync FROM a.events e"
                      " JOIN a.runs r ON r.id = e.run EXCEPT"
                      " SELECT r.run_id, e.t_ms, e.host, e.kind, e.attrs, e.sync FROM main.events e"
                      " JOIN main.runs r ON r.id = e.run)");
    FL_ASSERT_EQ(atoi(out), 0);
    free(out);

    /* runs lists the four, --history counts two of each variant */
    char *ida = sql("a.db", "SELECT group_concat(run_id, ' ') FROM runs");
    char *idb = sql("b.db", "SELECT group_concat(run_id, ' ') FROM runs");
    rc = fl_test_sh(&out, "%s runs --db %s 2>&1", fl_test_bin("faultline"), tpath("m.db"));
    FL_ASSERT_EQ(rc, 0);
    for (char *list = ida; list; list = list == ida ? idb : NULL) {
        char *save = NULL;
        for (char *id = strtok_r(list, " \n", &save); id; id = strtok_r(NULL, " \n", &save))
            FL_ASSERT_CONTAINS(out, id);
    }
    free(out);
    rc =
        fl_test_sh(&out, "%s runs --db %s --history 2>&1", fl_test_bin("faultline"), tpath("m.db"));
    FL_ASSERT_EQ(rc, 0);
    FL_ASSERT_CONTAINS(out, "mode=one");
    FL_ASSERT_CONTAINS(out, "PASS  PP");
    free(out);

    /* report: an HTML file with every run */
    rc = fl_test_sh(&out, "cd %s && %s report --db m.db --out r.html --last -1 2>&1 && cat r.html",
                    fl_test_dir(), fl_test_bin("faultline"));
    FL_ASSERT_MSG(rc == 0, "report: exit %d: %s", rc, out);
    char *all = sql("m.db", "SELECT group_concat(run_id, ' ') FROM runs");
    char *save = NULL;
    for (char *id = strtok_r(all, " \n", &save); id; id = strtok_r(NULL, " \n", &save))
        FL_ASSERT_CONTAINS(out, id);
    free(all);
    free(out);

    /* a later shard at another revision where mode=one fails: --changed */
    FL_REQUIRE_EQ(fl_test_sh(NULL, "cp %s %s", tpath("b.db"), tpath("c.db")), 0);
    free(sql("c.db", "UPDATE runs SET run_id = run_id || '-later', git_rev = 'bbbb2222bbbb',"
                     " started_at = started_at + 3600000,"
                     " verdict = CASE variant WHEN 'mode=one' THEN 'fail' ELSE verdict END"));
    rc = merge(&out, "m.db c.db");
    FL_ASSERT_MSG(rc == 0, "merge: exit %d: %s", rc, out);
    free(out);
    rc = fl_test_sh(&out, "%s runs --db %s --changed aaaa1111aaaa 2>&1", fl_test_bin("faultline"),
                    tpath("m.db"));
    FL_ASSERT_MSG(rc == 0, "runs --changed: exit %d: %s", rc, out);
    FL_ASSERT_CONTAINS(out, "mode=one");
    FL_ASSERT_CONTAINS(out, "bbbb2222bbbb");
    FL_ASSERT_MSG(!strstr(out, "mode=two"), "mode=two did not change:\n%s", out);
    free(out);
    free(ida);
    free(idb);
}

/* a.db and b.db recorded by real runs and merged into m.db: the hash of
 * m.db's dump then (malloc'd). */
static char *merged_ab(void)
{
    record_real("a");
    record_real("b");
    char *out;
    int rc = merge(&out, "m.db a.db b.db");
    FL_ASSERT_MSG(rc == 0, "merge: exit %d: %s", rc, out);
    free(out);
    return dump_hash("m.db");
}

FL_TEST_ROOT_T(cli_merge, merging_twice_changes_nothing, 120)
{
    char *before = merged_ab(), *out;
    int rc;
    /* again, and each input twice in one command */
    rc = merge(&out, "m.db a.db b.db a.db");
    FL_ASSERT_MSG(rc == 0, "merge again: exit %d: %s", rc, out);
    FL_ASSERT_CONTAINS(out, "a.db: 0 runs added, 2 already in m.db");
    FL_ASSERT_CONTAINS(out, "b.db: 0 runs added, 2 already in m.db");
    free(out);
    char *after = dump_hash("m.db");
    FL_ASSERT_STREQ(after, before);
    FL_ASSERT_EQ(count("m.db", "runs"), 4);
    free(before);
    free(after);
}

FL_TEST_ROOT_T(cli_merge, conflicting_run_exits_2_writes_nothing, 120)
{
    char *before = merged_ab(), *out;
    int rc;

    /* c.db: b.db with another verdict for one run, and one more run */
    FL_REQUIRE_EQ(fl_test_sh(NULL, "cp %s %s", tpath("b.db"), tpath("c.db")), 0);
    free(sql("c.db", "UPDATE runs SET verdict = 'fail' WHERE variant = 'mode=one';"
                     " INSERT INTO runs(run_id, scenario, started_at, verdict)"
                     " VALUES ('c-only', 'x', 1, 'pass')"));
    char *id = sql("c.db", "SELECT run_id FROM runs WHERE variant = 'mode=one'");
    id[strcspn(id, "\n")] = '\0';
    rc = merge(&out, "m.db c.db");
    FL_ASSERT_EQ(rc, 2);
    FL_ASSERT_CONTAINS(out, id);
    FL_ASSERT_CONTAINS(out, "verdict 'pass' in m.db, 'fail' in c.db");
    FL_ASSERT_CONTAINS(out, "nothing of c.db merged");
    free(out);
    char *after = dump_hash("m.db");
    FL_ASSERT_STREQ(after, before);
    free(after);
    free(id);

    /* d.db: b.db less one event of a run; merged beside a new database,
     * which is merged all the same */
    FL_REQUIRE_EQ(fl_test_sh(NULL, "cp %s %s", tpath("b.db"), tpath("d.db")), 0);
    free(sql("d.db", "DELETE FROM events WHERE rowid = (SELECT max(rowid) FROM events)"));
    id = sql("d.db", "SELECT r.run_id FROM runs r JOIN events e ON e.run = r.id"
                     " ORDER BY e.rowid DESC LIMIT 1");
    id[strcspn(id, "\n")] = '\0';
    record_real("e");
    rc = merge(&out, "m.db d.db e.db");
    FL_ASSERT_EQ(rc, 2);
    FL_ASSERT_CONTAINS(out, id);
    FL_ASSERT_CONTAINS(out, "events: 3 rows in m.db, 2 in d.db");
    FL_ASSERT_CONTAINS(out, "nothing of d.db merged");
    FL_ASSERT_CONTAINS(out, "e.db: 2 runs added, 0 already in m.db");
    free(out);
    FL_ASSERT_EQ(count("m.db", "runs"), 6);
    FL_ASSERT_EQ(count("m.db", "events"), count("a.db", "events") * 3);
    free(id);
    free(before);
}

FL_TEST_ROOT_T(cli_merge, merging_into_a_database_with_runs_keeps_them, 120)
{
    record_real("m");
    record_real("b");
    /* m.db's own runs, whole, before */
    const char *own = "SELECT id, run_id, verdict, (SELECT count(*) FROM events WHERE run = r.id),"
                      " (SELECT count(*) FROM processes WHERE run = r.id) FROM runs r ORDER BY id";
    char *before = sql("m.db", own);
    char *out;
    int rc = merge(&out, "m.db b.db");
    FL_ASSERT_MSG(rc == 0, "merge: exit %d: %s", rc, out);
    free(out);
    FL_ASSERT_EQ(count("m.db", "runs"), 4);
    char *after =
        sql("m.db", "SELECT id, run_id, verdict, (SELECT count(*) FROM events WHERE run = r.id),"
                    " (SELECT count(*) FROM processes WHERE run = r.id) FROM runs r"
                    " WHERE id <= 2 ORDER BY id");
    FL_ASSERT_STREQ(after, before);
    free(after);
    /* b.db's runs after them, with their rows */
    char *ids =
        sql("m.db", "ATTACH 'b.db' AS b; SELECT group_concat(id, ',') FROM (SELECT r.id"
                    " FROM main.runs r JOIN b.runs x ON x.run_id = r.run_id ORDER BY r.id)");
    FL_ASSERT_STREQ(ids, "3,4\n");
    free(ids);
    FL_ASSERT_EQ(count("m.db", "processes"), count("b.db", "processes") * 2);
    /* and faultline records into it as before */
    record_real("m");
    FL_ASSERT_EQ(count("m.db", "runs"), 6);
    FL_ASSERT_EQ(count("m.db", "events"), count("b.db", "events") * 3);
    free(before);
}

/* Written through the recorder: a run that passed (with a fault and a
 * scenario text). */
static void record_api(const char *name, const char *id)
{
    char err[1024];
    struct fl_rec *rec;
    FL_REQUIRE_EQ(fl_rec_open(&rec, tpath(name), NULL, err, sizeof err), 0);
    struct fl_rec_run *run;
    struct fl_rec_run_info ri = {.run_id = id,
                                 .scenario = "s",
                                 .variant = "default",
                                 .scenario_hash = "h1",
                                 .scenario_text = "name: s\n",
                                 .scenario_text_len = 8,
                                 .started_at_ms = 1000};
    FL_REQUIRE_EQ(fl_rec_run_begin(rec, &ri, &run), 0);
    FL_REQUIRE(fl_rec_fault_applied(run, &(struct fl_rec_fault){.index = 1, .kind = "kill"}) >= 0);
    FL_REQUIRE_EQ(fl_rec_run_end(run, "pass", NULL, 10), 0);
    fl_rec_close(rec);
}

FL_TEST(cli_merge, an_older_schema_is_migrated_in_memory_a_newer_refused_running_left_out)
{
    /* old.db at schema version 3: faults.idx counted from 0 then */
    sqlite3 *db;
    char err[1024];
    FL_REQUIRE_EQ(sqlite3_open(tpath("old.db"), &db), SQLITE_OK);
    FL_REQUIRE_EQ(fl_rec_schema_migrate(db, tpath("old.db"), 3, err, sizeof err), 0);
    FL_REQUIRE_EQ(
        sqlite3_exec(db,
                     "INSERT INTO runs(id, run_id, scenario, started_at, verdict)"
                     " VALUES (7, 'old-1', 's', 500, 'fail');"
                     "INSERT INTO faults(run, fault_no, idx, kind) VALUES (7, 0, 0, 'kill');"
                     "INSERT INTO scenario_texts VALUES ('h0', 'name: s0\n')",
                     NULL, NULL, NULL),
        SQLITE_OK);
    sqlite3_close(db);
    record_api("cur.db", "cur-1");
    /* and a run a killed harness left 'running' */
    free(sql("cur.db", "INSERT INTO runs(run_id, scenario, started_at) VALUES ('cur-1-running',"
                       " 's', 2000)"));
    record_api("new.db", "new-1");
    free(sql("new.db", "PRAGMA user_version = 99"));
    FL_REQUIRE_EQ(fl_test_sh(NULL, "echo 'not a database' > %s", tpath("text.db")), 0);

    /* a newer schema, a missing file, a file that is no database: said,
     * and nothing written (no output created) */
    char *out;
    int rc = merge(&out, "m.db old.db new.db missing.db text.db");
    FL_ASSERT_EQ(rc, 2);
    FL_ASSERT_CONTAINS(out, "database new.db has schema version 99, this faultline knows up to");
    FL_ASSERT_CONTAINS(out, "cannot read database missing.db: No such file or directory");
    FL_ASSERT_CONTAINS(out, "cannot read database text.db: file is not a database");
    FL_ASSERT_CONTAINS(out, "nothing merged");
    free(out);
    FL_ASSERT_EQ(fl_test_sh(NULL, "test -e %s", tpath("m.db")), 1);
    rc = merge(&out, "m.db m.db");
    FL_ASSERT_EQ(rc, 2);
    free(out);

    rc = merge(&out, "m.db old.db cur.db");
    FL_ASSERT_MSG(rc == 0, "merge: exit %d: %s", rc, out);
    FL_ASSERT_CONTAINS(out, "old.db: 1 run added, 0 already in m.db (schema version 3, migrated in "
                            "memory)");
    FL_ASSERT_CONTAINS(out, "cur.db: 1 run added");
    FL_ASSERT_CONTAINS(out, "1 run still 'running' (cur-1-running) not merged");
    free(out);
    /* migrated: the fault counts from 1, the run has the later columns */
    FL_ASSERT_EQ(fl_test_db_int(tpath("m.db"), "SELECT f.idx FROM faults f JOIN runs r"
                                               " ON r.id = f.run WHERE r.run_id = 'old-1'"),
                 1);
    FL_ASSERT_EQ(fl_test_db_int(tpath("m.db"), "SELECT rootless FROM runs WHERE run_id = 'old-1'"),
                 0);
    FL_ASSERT_EQ(count("m.db", "scenario_texts"), 2);
    FL_ASSERT_EQ(fl_test_db_int(tpath("m.db"), "SELECT count(*) FROM runs WHERE run_id LIKE "
                                               "'%running'"),
                 0);
    /* ... in memory: the file is as it was */
    FL_ASSERT_EQ(fl_test_db_int(tpath("old.db"), "PRAGMA user_version"), 3);
    FL_ASSERT_EQ(fl_test_db_int(tpath("old.db"), "SELECT idx FROM faults"), 0);

    /* the same scenario hash with another text: a conflict naming it */
    FL_REQUIRE_EQ(fl_test_sh(NULL, "cp %s %s", tpath("cur.db"), tpath("k.db")), 0);
    free(sql("k.db", "UPDATE scenario_texts SET text = 'name: other' WHERE hash = 'h1'"));
    char *before = dump_hash("m.db");
    rc = merge(&out, "m.db k.db");
    FL_ASSERT_EQ(rc, 2);
    FL_ASSERT_CONTAINS(out, "the scenario_texts row 'h1' differs between m.db and k.db");
    free(out);
    char *after = dump_hash("m.db");
    FL_ASSERT_STREQ(after, before);
    free(before);
    free(after);
}

FL_TEST(cli_merge, runs_help_documents_merge)
{
    char *out;
    int rc = fl_test_sh(&out, "%s runs --help", fl_test_bin("faultline"));
    FL_ASSERT_EQ(rc, 0);
    FL_ASSERT_CONTAINS(out, "faultline runs merge OUT.db IN.db...");
    FL_ASSERT_CONTAINS(out, "merging twice changes nothing");
    FL_ASSERT_CONTAINS(out, "migrated in memory");
    free(out);
    rc = fl_test_sh(&out, "%s runs merge only.db 2>&1", fl_test_bin("faultline"));
    FL_ASSERT_EQ(rc, 2);
    FL_ASSERT_CONTAINS(out, "an output database and at least one input");
    free(out);
    rc = fl_test_sh(&out, "%s runs merge --bogus a.db b.db 2>&1", fl_test_bin("faultline"));
    FL_ASSERT_EQ(rc, 2);
    FL_ASSERT_CONTAINS(out, "faultline runs merge: unrecognized option '--bogus'");
    free(out);
}
