/*
 * test_engine_log_times.c: every line of a task's output has a time.  A real
 * run prints lines before and after a sync point whose fault (a pause) holds
 * the task for a second; the log must be the program's bytes as written, and
 * LOG.times beside it one time a line, monotone, the lines after the pause
 * at least a second after the event; the HTML report must show the lines
 * with their times in the task's lane.
 */
#include "harness/tests/fl_test.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char scenario[] = "name: it-log-times\n"
                               "hosts: [a]\n"
                               "cluster: {w: [a]}\n"
                               "run:\n"
                               "  command: >-\n"
                               "    printf 'one\\ntwo\\npart' &&\n"
                               "    {bin}/faultline emit --sync mark.now &&\n"
                               "    printf 'ial\\nthree\\n' && printf 'no newline at the end'\n"
                               "faults:\n"
                               "  - {after: {event: mark.now}, pause: 'w:0', for: 1s}\n"
                               "expect:\n"
                               "  all:\n"
                               "    w: {exit: 0, log_matches: '^partial$'}\n";

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    char *buf = calloc(1, 1 << 16);
    size_t n = fread(buf, 1, (1 << 16) - 1, f);
    fclose(f);
    if (len)
        *len = n;
    return buf;
}

/* The first column of the first row of sql, as text (malloc'd), or NULL. */
static char *db_text(const char *db, const char *sql)
{
    sqlite3 *h;
    sqlite3_stmt *st = NULL;
    char *v = NULL;
    if (sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(h, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW &&
        sqlite3_column_text(st, 0))
        v = strdup((const char *)sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    sqlite3_close(h);
    return v;
}

FL_TEST_ROOT_T(engine_log_times, each_line_has_its_time_and_the_report_shows_it, 90)
{
    fl_test_need_root();
    const char *path = fl_test_write("t.yaml", scenario);
    char db[4200], *out;
    snprintf(db, sizeof db, "%s/fl.db", fl_test_dir());
    int rc = fl_test_sh(&out, "%s run -q --keep --out %s/o --db %s %s 2>&1",
                        fl_test_bin("faultline"), fl_test_dir(), db, path);
    FL_REQUIRE_MSG(rc == 0, "faultline run exited %d:\n%s", rc, out);
    free(out);

    char *log = db_text(db, "SELECT log_path FROM processes");
    FL_REQUIRE(log != NULL && *log);
    int ev = fl_test_db_int(db, "SELECT t_ms FROM events WHERE kind='mark.now'");
    FL_REQUIRE_GE(ev, 0);

    /* the log: the program's bytes as written, nothing added */
    size_t n = 0;
    char *text = slurp(log, &n);
    FL_REQUIRE(text != NULL);
    static const char want[] = "one\ntwo\npartial\nthree\nno newline at the end";
    FL_ASSERT_EQ(n, sizeof want - 1);
    FL_ASSERT_MEMEQ(text, want, sizeof want - 1);
    free(text);

    /* LOG.times: five lines (the last has no newline), monotone; "partial"
     * began before the sync point, so has the time of "part" */
    char tpath[4300];
    snprintf(tpath, sizeof tpath, "%s.times", log);
    FILE *tf = fopen(tpath, "r");
    FL_REQUIRE_MSG(tf != NULL, "no %s", tpath);
    long long t[16];
    int k = 0;
    while (k < 16 && fscanf(tf, "%lld\n", &t[k]) == 1)
        k++;
    fclose(tf);
    FL_REQUIRE_EQ(k, 5);
    for (int i = 1; i < k; i++)
        FL_ASSERT_LE(t[i - 1], t[i]);
    int healed = fl_test_db_int(db, "SELECT healed_ms FROM faults");
    FL_REQUIRE_GE(healed, ev + 1000);
    /* written before the sync point: read before the pause was healed */
    for (int i = 0; i < 3; i++)
        FL_ASSERT_MSG(t[i] <= healed, "line %d at %lld ms, the pause healed at %d ms", i + 1, t[i],
                      healed);
    /* written after the task was thawed: at least a second after the event */
    for (int i = 3; i < 5; i++)
        FL_ASSERT_MSG(t[i] >= ev + 1000, "line %d at %lld ms, the sync point at %d ms", i + 1, t[i],
                      ev);

    /* the report: the lines, with their times, in the task's lane */
    rc = fl_test_sh(&out, "%s report --db %s --out %s/r.html 2>&1", fl_test_bin("faultline"), db,
                    fl_test_dir());
    FL_REQUIRE_MSG(rc == 0, "faultline report exited %d:\n%s", rc, out);
    free(out);
    char rpath[4300];
    snprintf(rpath, sizeof rpath, "%s/r.html", fl_test_dir());
    char *html = slurp(rpath, NULL);
    FL_REQUIRE(html != NULL);
    char line[128];
    snprintf(line, sizeof line, "%lld.%03llds  three", t[3] / 1000, t[3] % 1000);
    FL_ASSERT_CONTAINS(html, line);
    snprintf(line, sizeof line, "%lld.%03llds  partial", t[2] / 1000, t[2] % 1000);
    FL_ASSERT_CONTAINS(html, line);
    FL_ASSERT_CONTAINS(html, "class=\"logm\"");
    free(html);
    free(log);
}
