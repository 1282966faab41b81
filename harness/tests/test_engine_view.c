/*
 * test_engine_view.c: the checks after a run look at a host's own files
 * only (harness/engine/view.c): a symlink a task made in its workdir that
 * leads to the machine's files (`etclink -> /etc`, `uplink -> ../../..`,
 * a checkpoint dir linked to a directory of the machine) is resolved
 * inside the host's disk, so `expect: files:` does not report the
 * machine's /etc/shadow as present and `checkpoint:` does not read the
 * machine's state file.  Run through the real faultline binary; the
 * results are read back from the run's database.
 */
#include "harness/tests/fl_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* passed (0/1) of the check named name on target; -1 when absent. */
static int passed(const char *db, const char *name, const char *target)
{
    char sql[512];
    snprintf(sql, sizeof sql, "SELECT passed FROM checks WHERE name = '%s' AND target = '%s'", name,
             target);
    return fl_test_db_int(db, sql);
}

FL_TEST_ROOT_T(engine_view, checks_stay_in_host, 60)
{
    fl_test_need_root();
    char machine[4096], text[8192], db[4096];
    struct stat st;
    FL_REQUIRE_EQ(stat("/etc/shadow", &st), 0);
    /* a directory of the machine holding a checkpoint state file */
    snprintf(machine, sizeof machine, "%s/machine-ckpt", fl_test_dir());
    FL_REQUIRE_EQ(mkdir(machine, 0755), 0);
    FL_REQUIRE_EQ(
        fl_test_sh(NULL, "echo 'model_checkpoint_path: \"model.ckpt-5\"' > %s/checkpoint", machine),
        0);
    snprintf(text, sizeof text,
             "name: view\n"
             "hosts: [a]\n"
             "cluster: {worker: [a]}\n"
             "run:\n"
             "  worker:\n"
             "    command: >\n"
             "      ln -s /etc etclink && ln -s "
             "../../../../../../../../../../../../../../../../etc uplink &&\n"
             "      ln -s %s ckptlink && echo x > real && echo y > /tmp/t\n"
             "expect:\n"
             "  all:\n"
             "    files:\n"
             "      - {host: a, path: etclink/shadow, exists: false}\n"
             "      - {host: a, path: uplink/shadow, exists: false}\n"
             "      - {host: a, path: etclink, exists: true}\n"
             "      - {host: a, path: real, exists: true}\n"
             "      - {host: a, path: /tmp/t, exists: true}\n"
             "    checkpoint: {host: a, dir: ckptlink, verify: true}\n",
             machine);
    const char *path = fl_test_write("view.yaml", text);
    snprintf(db, sizeof db, "%s/fl.db", fl_test_dir());
    char *out;
    int rc = fl_test_sh(&out, "%s run -q --out %s/out --db %s %s 2>&1", fl_test_bin("faultline"),
                        fl_test_dir(), db, path);
    /* the checkpoint check fails: no state file in the host's view */
    FL_ASSERT_MSG(rc == 1, "faultline run exited %d:\n%s", rc, out);
    free(out);
    FL_ASSERT_EQ(passed(db, "file", "a:etclink/shadow"), 1);
    FL_ASSERT_EQ(passed(db, "file", "a:uplink/shadow"), 1);
    FL_ASSERT_EQ(passed(db, "file", "a:etclink"), 1);
    FL_ASSERT_EQ(passed(db, "file", "a:real"), 1);
    FL_ASSERT_EQ(passed(db, "file", "a:/tmp/t"), 1);
    FL_ASSERT_EQ(passed(db, "checkpoint.state", "a:ckptlink"), 0);
    FL_ASSERT_EQ(fl_test_db_int(db, "SELECT count(*) FROM checks WHERE name = 'checkpoint.state' "
                                    "AND observed = 'no `checkpoint` state file'"),
                 1);
}
