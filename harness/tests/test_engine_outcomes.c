/*
 * test_engine_outcomes.c: how a run tells how each of its processes ended.
 * A task faultline itself stops at the run's end (SIGTERM once the
 * stop_when tasks are done) is "stopped at the end", neutral in the
 * observed text, the database and the timeline; a signal that was a fault
 * (or a crash) stays "killed by", red; and every task that did not exit 0
 * is named, not only the first.
 */
#include "harness/tests/fl_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

FL_TEST_ROOT_T(engine_outcomes, stopped_at_end_is_not_killed_by_a_fault, 60)
{
    /* the chief is SIGKILLed by a fault once it is up; that ends the run
     * (stop_when), so both servers are stopped by faultline */
    const char *scn = fl_test_write("outcomes.yaml", "name: it-outcomes\n"
                                                     "hosts: [a, b, c]\n"
                                                     "cluster:\n"
                                                     "  server: [a, b]\n"
                                                     "  chief: [c]\n"
                                                     "timeout: 60s\n"
                                                     "run:\n"
                                                     "  stop_when: [chief]\n"
                                                     "  command: \"echo UP; exec sleep 600\"\n"
                                                     "faults:\n"
                                                     "  - {on_log: {host: c, match: UP}, kill: c}\n"
                                                     "expect:\n"
                                                     "  all:\n"
                                                     "    chief: {signal: SIGKILL}\n"
                                                     "    server: {exit: any}\n");
    char *out;
    const char *d = fl_test_dir();
    int rc = fl_test_sh(&out, "cd %s && %s run -q --db o.db --html o.html %s 2>&1", d,
                        fl_test_bin("faultline"), scn);
    FL_ASSERT_MSG(rc == 0, "faultline run: exit %d: %s", rc, out);
    FL_ASSERT_CONTAINS(out, "0/3 exit 0; server:0, server:1 stopped at the end (SIGTERM); chief:0 "
                            "killed by SIGKILL");
    free(out);
    char db[4200];
    snprintf(db, sizeof db, "%s/o.db", d);
    FL_ASSERT_EQ(fl_test_db_int(db, "SELECT count(*) FROM processes WHERE job = 'server'"
                                    " AND signal = 15 AND stopped_at_end = 1"),
                 2);
    FL_ASSERT_EQ(fl_test_db_int(db, "SELECT count(*) FROM processes WHERE job = 'chief'"
                                    " AND signal = 9 AND stopped_at_end = 0"),
                 1);
    /* the timeline: two neutral bars, one red one */
    FL_ASSERT_EQ(fl_test_sh(&out, "grep -o 'class=\"proc p[a-z]*\"' %s/o.html | sort | uniq -c", d),
                 0);
    FL_ASSERT_CONTAINS(out, "2 class=\"proc pstop\"");
    FL_ASSERT_CONTAINS(out, "1 class=\"proc psig\"");
    free(out);
}

/* Two tasks fail: the reason tells the first whole and names the second
 * (it named only the first, as if the other had passed). */
FL_TEST_ROOT_T(engine_outcomes, reason_names_every_failed_check, 60)
{
    const char *scn =
        fl_test_write("two-fail.yaml", "name: it-two-fail\n"
                                       "hosts: [a, b, c]\n"
                                       "cluster:\n"
                                       "  w: [a, b, c]\n"
                                       "timeout: 60s\n"
                                       "run:\n"
                                       "  command: \"exit $(( {task} == 1 ? 0 : 3 ))\"\n");
    char *out;
    int rc = fl_test_sh(&out, "cd %s && %s run -q --no-db %s 2>&1", fl_test_dir(),
                        fl_test_bin("faultline"), scn);
    FL_ASSERT_MSG(rc == 1, "faultline run: exit %d: %s", rc, out);
    FL_ASSERT_CONTAINS(out, "w:0: exit: expected exit 0, observed exit 3");
    FL_ASSERT_CONTAINS(out, "; also failed: w:2 exit");
    FL_ASSERT(!strstr(out, "w:1 exit"));
    free(out);
}

/* One numbering of faults: the note's "fault 2" is the database's idx 2
 * (it counted from 0 there). */
FL_TEST_ROOT_T(engine_outcomes, notes_and_database_number_faults_alike, 60)
{
    const char *scn =
        fl_test_write("numbers.yaml", "name: it-numbers\n"
                                      "hosts: [a, b]\n"
                                      "cluster:\n"
                                      "  chief: [a]\n"
                                      "  other: [b]\n"
                                      "timeout: 60s\n"
                                      "run:\n"
                                      "  stop_when: [chief]\n"
                                      "  chief: {command: \"{bin}/faultline emit --sync go\"}\n"
                                      "  other: {command: \"exec sleep 600\"}\n"
                                      "faults:\n"
                                      "  - {after: {event: go}, partition: [[a], [b]], for: 10ms}\n"
                                      "  - {after: {event: never}, partition: [[a], [b]]}\n"
                                      "expect:\n"
                                      "  all:\n"
                                      "    chief: {exit: 0}\n"
                                      "    other: {exit: any}\n");
    char *out;
    const char *d = fl_test_dir();
    int rc =
        fl_test_sh(&out, "cd %s && %s run -q --db n.db %s 2>&1", d, fl_test_bin("faultline"), scn);
    FL_ASSERT_MSG(rc == 0, "faultline run: exit %d: %s", rc, out);
    FL_ASSERT_CONTAINS(out, "note: fault 2 (");
    free(out);
    char db[4200];
    snprintf(db, sizeof db, "%s/n.db", d);
    FL_ASSERT_EQ(fl_test_db_int(db, "SELECT count(*) FROM faults"), 1);
    FL_ASSERT_EQ(fl_test_db_int(db, "SELECT idx FROM faults"), 1);
}
