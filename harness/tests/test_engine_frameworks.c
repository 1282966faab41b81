/*
 * test_engine_frameworks.c: scenarios/frameworks/, the seed bug classes on
 * real training frameworks from Debian packages, run through the real
 * faultline binary on real hosts, in `make check`.  PyTorch (python3-torch,
 * gloo, CPU): scenarios/frameworks/pytorch/ckpt-rank0-disk, whose legacy
 * variant must fail with PyTorch's own FileNotFoundError, whose local
 * variant must diverge silently (every rank exits 0, the final check finds
 * the ranks' parameters differ) and whose fixed variant must resume every
 * rank from the same step with identical parameters.  The tests then read
 * the database to make sure the crash really landed at the chosen save
 * (the sync point sent by scenarios/frameworks/faultline_events.py) and
 * that the check saw what the expectations say.  And
 * scenarios/frameworks/pytorch/dataloader-thread-limit, a DataLoader with
 * worker processes on a host limited in threads, whose legacy variant must
 * fail with Python's "can't start new thread" and whose fixed variant must
 * train to its target loss.  And
 * scenarios/frameworks/pytorch/allreduce-partition, a host cut off right
 * before an allreduce (the partition pinned to a sync point of the training
 * loop): with gloo's default timeout the job waits it out silently, with a
 * 5 s timeout every rank dies of gloo's own error, and the fixed variant
 * re-initialises every rank's process group and resumes from a checkpoint.
 * Skipped when
 * /usr/bin/python3 cannot import torch.  Also the Python event helper
 * itself (scenarios/frameworks/faultline_events.py) on the real channel,
 * which needs /usr/bin/python3 only.
 */
#include "harness/tests/fl_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static void need_torch(void)
{
    fl_test_need_root();
    if (access("/usr/bin/python3", X_OK) != 0)
        FL_SKIP("/usr/bin/python3 is missing (ci/install-deps installs python3)");
    char *out;
    int rc = fl_test_sh(&out, "/usr/bin/python3 -c 'import torch.distributed as d; "
                              "assert d.is_available() and d.is_gloo_available()' 2>&1");
    if (rc != 0) {
        /* the message names the reason; out is not freed: FL_SKIP does not return */
        FL_SKIP("/usr/bin/python3 cannot import torch with gloo (ci/install-deps installs "
                "python3-torch): %.200s",
                out);
    }
    free(out);
}

/* SELECT count(*) FROM what, on the test's results database. */
static int count(const char *what)
{
    char sql[1024];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM %s", what);
    return fl_test_scenario_db_int(sql);
}

/* The three variants of ckpt-rank0-disk pass as shipped: legacy with the
 * FileNotFoundError of torch.load on ranks 1 and 2, local with a silent
 * divergence its final check reports, fixed with every rank resumed from
 * step 20 and identical digests. */
FL_TEST_ROOT_T(engine_frameworks, pytorch_ckpt_rank0_disk, 300)
{
    need_torch();
    char *out;
    int rc = fl_test_sh(&out,
                        "%s run --out %s/o --db %s/fl.db "
                        "%s/scenarios/frameworks/pytorch/ckpt-rank0-disk 2>&1",
                        fl_test_bin("faultline"), fl_test_dir(), fl_test_dir(), fl_test_root());
    FL_ASSERT_MSG(rc == 0,
                  "faultline run scenarios/frameworks/pytorch/ckpt-rank0-disk exited %d:\n%s", rc,
                  out);
    free(out);
    if (rc == 2)
        return;
    FL_ASSERT_EQ(fl_test_scenario_db_int("SELECT count(*) FROM runs WHERE scenario = "
                                         "'pytorch-ckpt-rank0-disk' AND verdict = 'pass'"),
                 3);
    FL_ASSERT_EQ(fl_test_scenario_db_int("SELECT count(*) FROM checks WHERE passed = 0"), 0);
    /* legacy: both other ranks' fails_with held (PyTorch's own text) */
    FL_ASSERT_EQ(count("checks c JOIN runs r ON r.id = c.run WHERE r.variant = "
                       "'protocol=legacy' AND c.name = 'fails_with' AND c.target "
                       "IN ('trainer:1', 'trainer:2') AND c.observed LIKE "
                       "'%FileNotFoundError%'"),
                 2);
    /* local and fixed: the crash came at rank 0's save of step 20, a sync point */
    FL_ASSERT_EQ(count("events e JOIN runs r ON r.id = e.run WHERE r.variant IN "
                       "('protocol=local', 'protocol=fixed') AND e.kind = "
                       "'save.done' AND e.host = 'n0' AND e.sync = 1 AND e.attrs "
                       "= 'step=20'"),
                 2);
    FL_ASSERT_EQ(count("faults f JOIN runs r ON r.id = f.run WHERE r.variant IN "
                       "('protocol=local', 'protocol=fixed') AND f.applied_ms IS "
                       "NOT NULL"),
                 6);
    /* every rank of the relaunched job ended in both (silent in local) */
    FL_ASSERT_EQ(count("processes p JOIN runs r ON r.id = p.run WHERE r.variant IN "
                       "('protocol=local', 'protocol=fixed') AND p.job = 'trainer' "
                       "AND p.generation = 1 AND p.exit_code = 0"),
                 6);
}

/* The two variants of dataloader-thread-limit pass as shipped: legacy, a
 * DataLoader with 8 workers on a host limited to 12 threads and processes,
 * dies with Python's "can't start new thread" inside the DataLoader; fixed
 * picks its worker count from the host's pids cgroup and trains to a loss
 * under 0.05.  The limit came at the data.ready sync point, before any
 * DataLoader existed. */
FL_TEST_ROOT_T(engine_frameworks, pytorch_dataloader_thread_limit, 120)
{
    need_torch();
    char *out;
    int rc = fl_test_sh(&out,
                        "%s run --out %s/o --db %s/fl.db "
                        "%s/scenarios/frameworks/pytorch/dataloader-thread-limit 2>&1",
                        fl_test_bin("faultline"), fl_test_dir(), fl_test_dir(), fl_test_root());
    FL_ASSERT_MSG(rc == 0,
                  "faultline run scenarios/frameworks/pytorch/dataloader-thread-limit "
                  "exited %d:\n%s",
                  rc, out);
    free(out);
    if (rc == 2)
        return;
    FL_ASSERT_EQ(fl_test_scenario_db_int("SELECT count(*) FROM runs WHERE scenario = "
                                         "'pytorch-dataloader-thread-limit' AND verdict = 'pass'"),
                 2);
    FL_ASSERT_EQ(count("checks WHERE passed = 0"), 0);
    /* legacy: the trainer failed with Python's own text */
    FL_ASSERT_EQ(count("checks c JOIN runs r ON r.id = c.run WHERE r.variant = "
                       "'protocol=legacy' AND c.name = 'fails_with' AND c.observed LIKE "
                       "'%can''t start new thread%'"),
                 1);
    /* both: the limit was applied, at the sync point data.ready */
    FL_ASSERT_EQ(count("events WHERE kind = 'data.ready' AND host = 'n0' AND sync = 1"), 2);
    FL_ASSERT_EQ(count("faults WHERE applied_ms IS NOT NULL"), 2);
    /* fixed: the trainer ended */
    FL_ASSERT_EQ(count("events e JOIN runs r ON r.id = e.run WHERE r.variant = "
                       "'protocol=fixed' AND e.kind = 'train.done'"),
                 1);
}

/* The three variants of allreduce-partition pass as shipped: n1 is cut from
 * the others for 6 s right before step 25's allreduce.  legacy (gloo's
 * default timeout) waits through it without a word and goes on; with a 5 s
 * timeout every rank dies of gloo's own "Timed out waiting 5000ms" error;
 * fixed catches that error on every rank, meets again once the network is
 * back and resumes from step 20, ending with the same losses as legacy. */
FL_TEST_ROOT_T(engine_frameworks, pytorch_allreduce_partition, 240)
{
    need_torch();
    char *out;
    int rc = fl_test_sh(&out,
                        "%s run --out %s/o --db %s/fl.db "
                        "%s/scenarios/frameworks/pytorch/allreduce-partition 2>&1",
                        fl_test_bin("faultline"), fl_test_dir(), fl_test_dir(), fl_test_root());
    FL_ASSERT_MSG(rc == 0,
                  "faultline run scenarios/frameworks/pytorch/allreduce-partition exited %d:\n%s",
                  rc, out);
    free(out);
    if (rc == 2)
        return;
    FL_ASSERT_EQ(fl_test_scenario_db_int("SELECT count(*) FROM runs WHERE scenario = "
                                         "'pytorch-allreduce-partition' AND verdict = 'pass'"),
                 3);
    FL_ASSERT_EQ(count("checks WHERE passed = 0"), 0);
    /* every variant: the partition was applied at the third rank's step 25,
     * a sync point (within 100 ms of that event), and healed 6 s later */
    FL_ASSERT_EQ(count("faults f WHERE f.target = '[n1]|[n0,n2]' AND f.healed_ms - "
                       "f.applied_ms BETWEEN 5900 AND 6500 AND f.applied_ms - (SELECT "
                       "max(t_ms) FROM (SELECT e.t_ms FROM events e WHERE e.run = f.run AND "
                       "e.kind = 'step.start' AND e.sync = 1 AND e.attrs = 'step=25' ORDER BY "
                       "e.t_ms LIMIT 3)) BETWEEN 0 AND 100"),
                 3);
    /* legacy: no error, and no rank began step 26 before the partition was
     * healed: every rank waited in step 25's allreduce for all of it */
    FL_ASSERT_EQ(count("events e JOIN runs r ON r.id = e.run JOIN faults f ON f.run = e.run "
                       "WHERE r.variant = 'protocol=legacy' AND e.kind = 'step.start' AND "
                       "e.attrs = 'step=26' AND e.t_ms >= f.healed_ms"),
                 3);
    /* short-timeout: every rank died of gloo's own text, none got past step 25 */
    FL_ASSERT_EQ(count("checks c JOIN runs r ON r.id = c.run WHERE r.variant = "
                       "'protocol=short-timeout' AND c.name = 'fails_with' AND c.observed "
                       "LIKE '%RuntimeError: [./gloo/transport/tcp/unbound_buffer.cc:%] Timed "
                       "out waiting 5000ms for %operation to complete'"),
                 3);
    FL_ASSERT_EQ(count("events e JOIN runs r ON r.id = e.run WHERE r.variant = "
                       "'protocol=short-timeout' AND (e.kind = 'train.done' OR (e.kind = "
                       "'step.start' AND CAST(substr(e.attrs, 6) AS INTEGER) > 25))"),
                 0);
    /* fixed: every rank caught the same error at step 25, and resumed from
     * step 20 only after the heal (the rendezvous waited for n1) */
    FL_ASSERT_EQ(count("checks c JOIN runs r ON r.id = c.run WHERE r.variant = "
                       "'protocol=fixed' AND c.name = 'log_matches' AND c.observed LIKE "
                       "'rank _: step 25 failed: %Timed out waiting 5000ms for %'"),
                 3);
    FL_ASSERT_EQ(count("events e JOIN runs r ON r.id = e.run WHERE r.variant = "
                       "'protocol=fixed' AND e.kind = 'pg.failed' AND e.attrs = 'step=25 "
                       "attempt=0'"),
                 3);
    FL_ASSERT_EQ(count("events e JOIN runs r ON r.id = e.run JOIN faults f ON f.run = e.run "
                       "WHERE r.variant = 'protocol=fixed' AND e.kind = 'restore.done' AND "
                       "e.attrs = 'step=20 attempt=1' AND e.t_ms >= f.healed_ms"),
                 3);
    /* ... and each rank ended with the loss the uninterrupted legacy run had */
    FL_ASSERT_EQ(count("events a JOIN runs ra ON ra.id = a.run JOIN events b ON b.host = "
                       "a.host JOIN runs rb ON rb.id = b.run WHERE ra.variant = "
                       "'protocol=legacy' AND rb.variant = 'protocol=fixed' AND a.kind = "
                       "'train.done' AND b.kind = 'train.done' AND b.attrs LIKE "
                       "'step=30 resumed_from=20 attempt=1 loss=%' AND substr(a.attrs, "
                       "instr(a.attrs, ' loss='), instr(a.attrs, ' digest=') - instr(a.attrs, "
                       "' loss=')) = substr(b.attrs, instr(b.attrs, ' loss='), instr(b.attrs, "
                       "' digest=') - instr(b.attrs, ' loss='))"),
                 3);
}

/* scenarios/frameworks/faultline_events.py on the real event channel
 * (harness/tests/scenarios/py-events.yaml): an event whose values need
 * quoting arrives as sent, two sync points arrive as SYNC and the second's
 * fault (killing a sleeper on the same host) is applied before the sender
 * goes on, a forked child sends on a connection of its own, and without
 * FAULTLINE_EVENTS a sync is a no-op. */
FL_TEST_ROOT_T(engine_frameworks, python_events_helper, 60)
{
    fl_test_need_root();
    if (access("/usr/bin/python3", X_OK) != 0)
        FL_SKIP("/usr/bin/python3 is missing (ci/install-deps installs python3)");
    fl_test_scenario_passes("py-events.yaml");
    FL_ASSERT_EQ(count("events WHERE kind = 'probe.hello' AND attrs = "
                       "'note=\"a b \\\"c\\\" \\\\ d\" eq=\"x=y\" n=3' AND sync = 0"),
                 1);
    FL_ASSERT_EQ(count("events WHERE kind = 'probe.point' AND sync = 1"), 2);
    FL_ASSERT_EQ(count("events WHERE kind = 'probe.child' AND sync = 0"), 1);
    FL_ASSERT_EQ(count("faults WHERE applied_ms IS NOT NULL"), 1);
}
