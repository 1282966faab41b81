/*
 * test_services_redis.c: scenarios/services/redis-sentinel.yaml, Debian's
 * redis-server and redis-sentinel on three hosts, run through the real
 * faultline binary: with asynchronous replication a failover under a
 * partition loses hundreds of acknowledged writes, and min-replicas-to-write
 * bounds the loss.  Reads the counts its final phase printed (the `verify`
 * log of each variant, found through the results database).
 */
#include "harness/tests/fl_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* The "acked=N lost=M" line of the final phase of the run of this variant;
 * false when there is none. */
static bool verify_counts(const char *variant, int *acked, int *lost)
{
    char *out;
    int rc = fl_test_sh(&out,
                        "f=$(sqlite3 %s/fl.db \"SELECT p.log_path FROM processes p JOIN runs r "
                        "ON r.id = p.run WHERE r.variant = '%s' AND p.job = 'verify'\") && "
                        "grep -h '^acked=' $f",
                        fl_test_dir(), variant);
    bool ok = rc == 0 && sscanf(out, "acked=%d lost=%d", acked, lost) == 2;
    if (!ok)
        fl_test_fail(__FILE__, __LINE__, false, "no acked=N lost=M line for %s: %s", variant, out);
    free(out);
    return ok;
}

/* Both variants pass their own expectations (min_replicas=0: at least 100
 * acknowledged writes lost, over 5 s or more; min_replicas=1: at most 500),
 * and the loss with min-replicas-to-write is well under the loss without. */
FL_TEST_ROOT_T(services_redis, sentinel_failover_loses_acked_writes, 300)
{
    fl_test_need_root();
    const char *need[] = {"/usr/bin/redis-server", "/usr/bin/redis-sentinel", "/usr/bin/redis-cli",
                          "/usr/bin/python3", "/usr/bin/sqlite3"};
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++)
        if (access(need[i], X_OK) != 0)
            FL_SKIP("%s is missing (ci/install-deps installs redis-server, redis-sentinel, "
                    "python3 and sqlite3)",
                    need[i]);
    char *out;
    int rc = fl_test_sh(&out,
                        "%s run --keep --out %s/o --db %s/fl.db "
                        "%s/scenarios/services/redis-sentinel.yaml 2>&1",
                        fl_test_bin("faultline"), fl_test_dir(), fl_test_dir(), fl_test_root());
    FL_ASSERT_MSG(rc == 0, "faultline run redis-sentinel.yaml exited %d:\n%s", rc, out);
    free(out);
    if (rc == 2) /* not run at all: nothing more to look at */
        return;
    FL_ASSERT_EQ(fl_test_scenario_db_int("SELECT count(*) FROM runs WHERE verdict = 'pass'"), 2);

    int acked0, lost0, acked1, lost1;
    if (!verify_counts("min_replicas=0", &acked0, &lost0) ||
        !verify_counts("min_replicas=1", &acked1, &lost1))
        return;
    FL_ASSERT_GE(lost0, 100);
    FL_ASSERT_LE(lost0, acked0);
    FL_ASSERT_LE(lost1, 500);
    FL_ASSERT_LT(lost1 * 3, lost0);
}
