/*
 * test_soak_min.c: the soak minimizer (harness/soak/min.c) on a known
 * predicate, within its budget, and the failure class that decides whether a
 * smaller schedule fails "the same way" (numbers ignored, not what failed).
 */
#include "harness/tests/fl_test.h"
#include "harness/soak/soak.h"

/* The minimizer on a predicate: fails iff faults 2 and 5 are both in. */
static int needs_2_and_5(void *ctx, const bool *keep)
{
    (*(int *)ctx)++;
    return keep[2] && keep[5];
}

FL_TEST(soak_min, minimize_keeps_exactly_the_needed_faults_within_budget)
{
    bool keep[9];
    int calls = 0;
    memset(keep, 1, sizeof keep);
    int rc = fl_soak_minimize(9, keep, 100, needs_2_and_5, &calls);
    FL_ASSERT_EQ(rc, calls);
    for (int i = 0; i < 9; i++)
        FL_ASSERT_MSG(keep[i] == (i == 2 || i == 5), "fault %d kept=%d", i, keep[i]);
    FL_ASSERT_LE(calls, 30);
    /* a budget of 2 stops after two runs, keeping a set that still fails */
    memset(keep, 1, sizeof keep);
    calls = 0;
    rc = fl_soak_minimize(9, keep, 2, needs_2_and_5, &calls);
    FL_ASSERT_EQ(rc, 2);
    FL_ASSERT_EQ(calls, 2);
    FL_ASSERT(keep[2] && keep[5]);
}

FL_TEST(soak_min, failure_class_ignores_numbers_not_what_failed)
{
    char a[256], b[256];
    fl_soak_failure_class("fail",
                          "worker:1: exit: expected exit 0, observed killed by SIGTERM (s.yaml:15)",
                          a, sizeof a);
    FL_ASSERT_STREQ(a, "fail worker:1: exit");
    fl_soak_failure_class("fail", "timed out after 20.0 s; x", b, sizeof b);
    FL_ASSERT_STREQ(b, "fail timed out");
    fl_soak_failure_class("error", "host w0: clone failed after 12 ms", a, sizeof a);
    fl_soak_failure_class("error", "host w0: clone failed after 3 ms", b, sizeof b);
    FL_ASSERT_STREQ(a, b);
    /* a path holding the run's id: the same failure in every run */
    fl_soak_failure_class("error",
                          "host a: corrupt: no file matches 'x*' in its workdir "
                          "(o/runs/20261121-203137-cfa4b2/fs/hosts/a/disk)",
                          a, sizeof a);
    fl_soak_failure_class("error",
                          "host a: corrupt: no file matches 'x*' in its workdir "
                          "(o/runs/20261121-203139-0e5dd1/fs/hosts/a/disk)",
                          b, sizeof b);
    FL_ASSERT_STREQ(a, b);
    /* but not another host's */
    fl_soak_failure_class("error",
                          "host b: corrupt: no file matches 'x*' in its workdir "
                          "(o/runs/20261121-203139-0e5dd1/fs/hosts/b/disk)",
                          b, sizeof b);
    FL_ASSERT(strcmp(a, b) != 0);
}
