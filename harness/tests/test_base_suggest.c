/*
 * test_base_suggest.c: "did you mean" suggestions used by the scenario
 * loader: edit distance with swaps, the closeness limit, prefixes, ties.
 */
#include "harness/tests/fl_test.h"

#include "harness/base/suggest.h"

#include <string.h>

FL_TEST(base_suggest, distance_counts_edits_and_swaps)
{
    FL_ASSERT_EQ(fl_suggest_distance("kill", "kill"), 0);
    FL_ASSERT_EQ(fl_suggest_distance("kil", "kill"), 1);
    FL_ASSERT_EQ(fl_suggest_distance("partiton", "partition"), 1);
    FL_ASSERT_EQ(fl_suggest_distance("wroker", "worker"), 1); /* swap */
    FL_ASSERT_EQ(fl_suggest_distance("HOSTS", "hosts"), 0);   /* case-insensitive */
    FL_ASSERT_EQ(fl_suggest_distance("", "abc"), 3);
    FL_ASSERT_EQ(fl_suggest_distance("abc", "xyz"), 3);
}

FL_TEST(base_suggest, closest_within_limit)
{
    static const char *const keys[] = {"kill",       "pause",     "restart", "replace",
                                       "crash_host", "partition", "limit"};
    size_t n = sizeof keys / sizeof keys[0];
    FL_ASSERT_STREQ(fl_suggest("partiton", keys, n), "partition");
    FL_ASSERT_STREQ(fl_suggest("restrat", keys, n), "restart");
    FL_ASSERT_STREQ(fl_suggest("crash", keys, n), "crash_host"); /* prefix */
    FL_ASSERT_STREQ(fl_suggest("crash_hosts", keys, n), "crash_host");
    FL_ASSERT(fl_suggest("zzzzzz", keys, n) == NULL);
    FL_ASSERT(fl_suggest("kill", keys, n) == NULL); /* exact: nothing to suggest */
    FL_ASSERT(fl_suggest("xy", keys, n) == NULL);
    static const char *const hosts[] = {"w0", "w1", NULL, "ps0"};
    FL_ASSERT_STREQ(fl_suggest("w2", hosts, 4), "w0"); /* tie: the first */
    FL_ASSERT_STREQ(fl_suggest("ps", hosts, 4), "ps0");
    char buf[64] = "unknown 'x'";
    fl_suggest_append(buf, sizeof buf, "w9", hosts, 4);
    FL_ASSERT_STREQ(buf, "unknown 'x' (did you mean 'w0'?)");
    char small[16] = "abc";
    fl_suggest_append(small, sizeof small, "w9", hosts, 4);
    FL_ASSERT_EQ(strlen(small), 15);
}
