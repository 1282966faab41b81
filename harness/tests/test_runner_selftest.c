/*
 * test_runner_selftest.c: checks of the test runner itself that can run
 * anywhere: the temporary directory exists and is private to the test, the
 * tree root is found, the programs the tests run are the ones built beside
 * the runner, and a user's CFLAGS add to the build's own flags.
 */
#include "harness/tests/fl_test.h"

#include <stdio.h>
#include <stdlib.h>
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

/* The programs the tests run are the ones beside the runner: build-asan's
 * under `make asan` (they were build/bin's, whatever the runner). */
FL_TEST(runner_selftest, programs_are_the_ones_beside_the_runner)
{
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    FL_REQUIRE(n > 0);
    self[n] = 0;
    FL_ASSERT_STREQ(fl_test_bin("fl-tests"), self);
}

/* `make CFLAGS='-O1 -g -fsanitize=...'` adds to the project's flags (the
 * include path, the language, the warnings), never replaces them: a dry run
 * of one object's rule shows both. */
FL_TEST(runner_selftest, user_cflags_add_to_the_build_flags)
{
    char *out = NULL;
    int rc = fl_test_sh(&out,
                        "make -s -n -C %s CFLAGS='-O1 -g' -W harness/base/text.c "
                        "build/obj/harness/base/text.o 2>&1",
                        fl_test_root());
    FL_ASSERT_EQ(rc, 0);
    FL_ASSERT_CONTAINS(out, "-O1 -g");
    FL_ASSERT_CONTAINS(out, "-I.");
    FL_ASSERT_CONTAINS(out, "-std=gnu11");
    free(out);
}
