/*
 * test_runner_selftest.c: checks of the test runner itself that can run
 * anywhere: the temporary directory exists and is private to the test, and
 * the tree root is found.
 */
#include "harness/tests/fl_test.h"

#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

FL_TEST(runner_selftest, tmpdir_exists_for_each_test)
{
    struct stat st;
    FL_REQUIRE(fl_test_dir()[0] != 0);
    FL_ASSERT_EQ(stat(fl_test_dir(), &st), 0);
    FL_ASSERT(S_ISDIR(st.st_mode));
}

FL_TEST(runner_selftest, root_holds_makefile)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/Makefile", fl_test_root());
    FL_ASSERT_EQ(access(path, R_OK), 0);
}
