/*
 * test_services_restic.c: scenarios/services/restic-latest.yaml, Debian's
 * restic (a Go program: it reads the clock through the vDSO itself, so only
 * faultline's own vDSO moves its clock) under a clock_jump, run through the
 * real faultline binary.  A trainer saves steps 1-3 as restic snapshots;
 * its host's clock steps back a minute after step 2, so restic dates step
 * 3 before it, and a standby resuming from `restic restore latest` gets
 * step 2 while ordering by the step tag gets step 3.  Reads what each
 * variant's final phase printed (found through the results database) and
 * the dates restic wrote into the kept repository.
 */
#include "harness/tests/fl_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* The step of the "resuming from step=N" line of the final phase `resume`
 * in the run of this variant; -1 when there is none. */
static int resumed_step(const char *variant)
{
    char *out;
    int step = -1;
    int rc = fl_test_sh(&out,
                        "f=$(sqlite3 %s/fl.db \"SELECT p.log_path FROM processes p JOIN runs r "
                        "ON r.id = p.run WHERE r.variant = '%s' AND p.job = 'resume'\") && "
                        "grep -h '^resuming from ' $f",
                        fl_test_dir(), variant);
    if (rc != 0 || sscanf(out, "resuming from step=%d", &step) != 1)
        fl_test_fail(__FILE__, __LINE__, false, "no 'resuming from step=N' line for %s: %s",
                     variant, out);
    free(out);
    return step;
}

/* Both variants pass their own expectations; restic's `latest` resumes from
 * step 2, the step tag from step 3; and in the repository restic dated step
 * 3 up to a minute (the jump, less the time between the two saves) before
 * step 2, and step 2 after step 1. */
FL_TEST_ROOT_T(services_restic, clock_jump_back_makes_latest_an_older_checkpoint, 120)
{
    fl_test_need_root();
    const char *need[] = {"/usr/bin/restic", "/usr/bin/python3", "/usr/bin/sqlite3"};
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++)
        if (access(need[i], X_OK) != 0)
            FL_SKIP("%s is missing (ci/install-deps installs restic, python3 and sqlite3)",
                    need[i]);
    char *out;
    int rc = fl_test_sh(&out,
                        "%s run --keep --out %s/o --db %s/fl.db "
                        "%s/scenarios/services/restic-latest.yaml 2>&1",
                        fl_test_bin("faultline"), fl_test_dir(), fl_test_dir(), fl_test_root());
    FL_ASSERT_MSG(rc == 0, "faultline run restic-latest.yaml exited %d:\n%s", rc, out);
    free(out);
    if (rc == 2) /* not run at all: nothing more to look at */
        return;
    FL_ASSERT_EQ(fl_test_scenario_db_int("SELECT count(*) FROM runs WHERE verdict = 'pass'"), 2);
    FL_ASSERT_EQ(resumed_step("pick=latest"), 2);
    FL_ASSERT_EQ(resumed_step("pick=max_step"), 3);

    /* The dates restic gave the snapshots of the run of pick=latest, in ms:
     * step 2 minus step 3, step 2 minus step 1. */
    rc = fl_test_sh(&out,
                    "run=$(sqlite3 %s/fl.db \"SELECT run_id FROM runs WHERE variant = "
                    "'pick=latest'\") && "
                    "RESTIC_REPOSITORY=%s/o/runs/$run/shared/0/repo RESTIC_PASSWORD=faultline "
                    "restic --no-cache snapshots --json | /usr/bin/python3 -c '"
                    "import datetime, json, re, sys\n"
                    "def date(s):\n"
                    "    m = re.match(r\"([0-9-]+T[0-9:]+)([.][0-9]+)?\", s[\"time\"])\n"
                    "    return datetime.datetime.fromisoformat(m[1]).timestamp() + "
                    "float(m[2] or 0)\n"
                    "t = {s[\"tags\"][0]: date(s) for s in json.load(sys.stdin)}\n"
                    "print(round((t[\"step-2\"] - t[\"step-3\"]) * 1000), "
                    "round((t[\"step-2\"] - t[\"step-1\"]) * 1000))'",
                    fl_test_dir(), fl_test_dir());
    int back_ms = 0, fwd_ms = 0;
    FL_ASSERT_MSG(rc == 0 && sscanf(out, "%d %d", &back_ms, &fwd_ms) == 2,
                  "no snapshot dates from the kept repository: %s", out);
    free(out);
    FL_ASSERT_GT(back_ms, 30000);
    FL_ASSERT_LE(back_ms, 60000);
    FL_ASSERT_GT(fwd_ms, 0);
    FL_ASSERT_LT(fwd_ms, 30000);
}
