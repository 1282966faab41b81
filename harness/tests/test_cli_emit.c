/*
 * test_cli_emit.c: `faultline emit` checks the event it is given as the
 * harness will read it, under the harness or not: a bad kind or an
 * attribute without '=' is an error (exit 2), not an event silently dropped
 * (or, outside the harness, accepted) while a script is being written.
 */
#include "harness/tests/fl_test.h"

#include <stdlib.h>
#include <string.h>

FL_TEST(cli, emit_refuses_bad_kinds_and_attributes_everywhere)
{
    static const struct { const char *args, *msg; } bad[] = {
        {"Save.Done", "bad event kind 'Save.Done'"},
        {"save.done step", "attribute 'step' has no '=value'"},
        {"save.done 'error=no such file'", "attribute 'such' has no '=value'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        for (int under = 0; under < 2; under++) {
            char *out;
            int rc = fl_test_sh(&out, "%s %s emit %s 2>&1",
                                under ? "FAULTLINE_EVENTS=/nonexistent/ev.sock" : "env -u FAULTLINE_EVENTS",
                                fl_test_bin("faultline"), bad[i].args);
            FL_ASSERT_MSG(rc == 2, "emit %s (%s the harness): exit %d", bad[i].args,
                          under ? "under" : "outside", rc);
            FL_ASSERT_CONTAINS(out, bad[i].msg);
            free(out);
        }
    /* a good event outside the harness: nothing to do, exit 0 */
    FL_ASSERT_EQ(fl_test_sh(NULL, "env -u FAULTLINE_EVENTS %s emit save.done step=3 "
                            "'error=\"a b\"'", fl_test_bin("faultline")), 0);
}
