/*
 * test_faults_catalog.c: scenarios/faults/, one scenario per fault kind, each
 * measuring its own effect, passes as shipped through the real faultline
 * binary on real hosts.
 */
#include "harness/tests/fl_test.h"

#include <stdlib.h>
#include <unistd.h>

static void require_setup(void)
{
    fl_test_need_root();
    if (access(fl_test_bin("fl-probe"), X_OK) != 0)
        FL_SKIP("build/bin/fl-probe is not built");
}

/* scenarios/faults/: one scenario per fault kind, each measuring its own
 * effect (a slow fsync, a short write, a corrupt copy restored past, a
 * drifting clock, a delayed link); every one must pass as shipped. */
FL_TEST_ROOT_T(faults_catalog, catalog_scenarios_pass, 180)
{
    require_setup();
    if (access(fl_test_bin("psrt"), X_OK) != 0)
        FL_SKIP("build/bin/psrt is not built");
    char *out;
    int rc = fl_test_sh(&out, "%s run -q --out %s/o --db %s/fl.db %s/scenarios/faults 2>&1",
                        fl_test_bin("faultline"), fl_test_dir(), fl_test_dir(), fl_test_root());
    FL_ASSERT_MSG(rc == 0, "faultline run scenarios/faults exited %d:\n%s", rc, out);
    free(out);
    FL_ASSERT(fl_test_scenario_db_int("SELECT count(*) FROM runs WHERE verdict='pass'") >= 5);
}
