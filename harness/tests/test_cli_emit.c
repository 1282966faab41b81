/*
 * test_cli_emit.c: `faultline emit`: its help and unknown options, and the
 * event it is given checked as the harness will read it, under the harness
 * or not: a bad kind, an attribute without '=' or longer than a line of the
 * channel holds is an error (exit 2), not an event silently dropped (or,
 * outside the harness, accepted) while a script is being written.
 */
#include "harness/tests/fl_test.h"

#include <stdlib.h>

FL_TEST(cli_emit, emit_refuses_bad_kinds_and_attributes_everywhere)
{
    static const struct {
        const char *args, *msg;
    } bad[] = {
        {"Save.Done", "bad event kind 'Save.Done'"},
        {"save.done step", "attribute 'step' has no '=value'"},
        {"save.done 'error=no such file'", "attribute 'such' has no '=value'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        for (int under = 0; under < 2; under++) {
            char *out;
            int rc = fl_test_sh(&out, "%s %s emit %s 2>&1",
                                under ? "FAULTLINE_EVENTS=/nonexistent/ev.sock"
                                      : "env -u FAULTLINE_EVENTS",
                                fl_test_bin("faultline"), bad[i].args);
            FL_ASSERT_MSG(rc == 2, "emit %s (%s the harness): exit %d", bad[i].args,
                          under ? "under" : "outside", rc);
            FL_ASSERT_CONTAINS(out, bad[i].msg);
            free(out);
        }
    /* a good event outside the harness: nothing to do, exit 0 */
    FL_ASSERT_EQ(fl_test_sh(NULL,
                            "env -u FAULTLINE_EVENTS %s emit save.done step=3 "
                            "'error=\"a b\"'",
                            fl_test_bin("faultline")),
                 0);
}

FL_TEST(cli_emit, emit_help_prints_usage)
{
    char *out;
    int rc = fl_test_sh(&out, "%s emit --help", fl_test_bin("faultline"));
    FL_ASSERT_EQ(rc, 0);
    FL_ASSERT_CONTAINS(out, "usage: faultline emit");
    free(out);
    rc = fl_test_sh(&out, "%s emit --sync -h", fl_test_bin("faultline"));
    FL_ASSERT_EQ(rc, 0);
    FL_ASSERT_CONTAINS(out, "usage: faultline emit");
    free(out);
    rc = fl_test_sh(&out, "%s emit --bogus k 2>&1", fl_test_bin("faultline"));
    FL_ASSERT_EQ(rc, 2);
    FL_ASSERT_CONTAINS(out, "unknown option '--bogus'");
    free(out);
}

FL_TEST(cli_emit, emit_rejects_attributes_longer_than_its_buffer)
{
    char *out;
    /* 5000 bytes of attribute: more than a line of the channel holds */
    int rc = fl_test_sh(&out,
                        "FAULTLINE_EVENTS=%s/none.sock %s emit k \"a=$(head -c 5000 "
                        "/dev/zero | tr '\\0' x)\" 2>&1",
                        fl_test_dir(), fl_test_bin("faultline"));
    FL_ASSERT_EQ(rc, 2);
    FL_ASSERT_CONTAINS(out, "longer than");
    free(out);
}
