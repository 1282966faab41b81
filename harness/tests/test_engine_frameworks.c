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
 * train to its target loss.  And scenarios/frameworks/pytorch/sharded-save, a
 * row-sharded layer checkpointed one file per shard on each rank's own disk:
 * its legacy variant must fail in rank 0's merge with torch.load's
 * FileNotFoundError for rank 1's shard, its nomerge variant on the restart
 * (rank 2 on a replaced machine cannot load its shard) and in the final
 * merge on n0, and its fixed variant must resume every rank from step 10 and
 * end with a merged checkpoint equal to an uninterrupted run.  And
 * scenarios/frameworks/pytorch/rpc-parameter-server, a parameter server
 * over torch.distributed.rpc whose machine dies mid-training: legacy's
 * trainers must fail with PyTorch's own RPC timeout text, local must end
 * silently with a ps restarted from scratch (its final check fails) and
 * fixed must restore the ps from a shared path and reach its target loss.
 * And scenarios/frameworks/pytorch/allreduce-partition, a host cut off
 * during an allreduce: with gloo's default timeout every rank stalls
 * silently through the partition and goes on, with a 5 s timeout every
 * rank dies with gloo's own "Timed out waiting 5000ms" text, and the fixed
 * variant meets again and resumes from the newest verified checkpoint.
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

/* The three variants of sharded-save pass as shipped: legacy, where rank 0
 * merges the shards it listed in its index, fails in torch.load with
 * FileNotFoundError for rank 1's shard at the first checkpoint; nomerge
 * saves, but after the crash at that checkpoint rank 2, on a replaced
 * machine, cannot load its shard and the final check's merge on n0 fails as
 * legacy's did; fixed gathers the shards on rank 0 and scatters them on
 * restore: every rank resumes from step 10 and the final check finds the
 * merged checkpoint of step 20 equal to an uninterrupted run. */
FL_TEST_ROOT_T(engine_frameworks, pytorch_sharded_save, 300)
{
    need_torch();
    char *out;
    int rc = fl_test_sh(&out,
                        "%s run --out %s/o --db %s/fl.db "
                        "%s/scenarios/frameworks/pytorch/sharded-save 2>&1",
                        fl_test_bin("faultline"), fl_test_dir(), fl_test_dir(), fl_test_root());
    FL_ASSERT_MSG(rc == 0, "faultline run scenarios/frameworks/pytorch/sharded-save exited %d:\n%s",
                  rc, out);
    free(out);
    if (rc == 2)
        return;
    FL_ASSERT_EQ(fl_test_scenario_db_int("SELECT count(*) FROM runs WHERE scenario = "
                                         "'pytorch-sharded-save' AND verdict = 'pass'"),
                 3);
    FL_ASSERT_EQ(count("checks WHERE passed = 0"), 0);
    /* legacy: rank 0's merge, in torch.load, for rank 1's shard */
    FL_ASSERT_EQ(count("checks c JOIN runs r ON r.id = c.run WHERE r.variant = "
                       "'protocol=legacy' AND c.name = 'fails_with' AND c.target = "
                       "'trainer:0' AND c.observed LIKE '%FileNotFoundError: [Errno 2] No such "
                       "file or directory: ''ckpt/step-10/shard-1.pt''%'"),
                 1);
    FL_ASSERT_EQ(count("events e JOIN runs r ON r.id = e.run WHERE r.variant = "
                       "'protocol=legacy' AND e.kind = 'save.done'"),
                 0);
    /* nomerge: rank 2 of the relaunched job, on the replaced n2, for its own shard */
    FL_ASSERT_EQ(count("checks c JOIN runs r ON r.id = c.run WHERE r.variant = "
                       "'protocol=nomerge' AND c.name = 'fails_with' AND c.target = "
                       "'trainer:2' AND c.observed LIKE '%FileNotFoundError: [Errno 2] No such "
                       "file or directory: ''ckpt/step-10/shard-2.pt''%'"),
                 1);
    FL_ASSERT_EQ(count("processes p JOIN runs r ON r.id = p.run WHERE r.variant = "
                       "'protocol=nomerge' AND p.job = 'trainer' AND p.task = 2 AND "
                       "p.generation = 1 AND p.exit_code = 1"),
                 1);
    /* legacy and nomerge: the final merge on n0 fails the same way */
    FL_ASSERT_EQ(count("checks c JOIN runs r ON r.id = c.run WHERE r.variant IN "
                       "('protocol=legacy', 'protocol=nomerge') AND c.target = 'check:0' AND "
                       "c.name = 'fails_with' AND c.observed LIKE '%FileNotFoundError%"
                       "ckpt/step-10/shard-1.pt%'"),
                 2);
    /* nomerge and fixed: the crash came at rank 0's first checkpoint, a sync point */
    FL_ASSERT_EQ(count("events e JOIN runs r ON r.id = e.run WHERE r.variant IN "
                       "('protocol=nomerge', 'protocol=fixed') AND e.kind = 'save.done' AND "
                       "e.host = 'n0' AND e.sync = 1 AND e.attrs = 'step=10'"),
                 2);
    FL_ASSERT_EQ(count("faults f JOIN runs r ON r.id = f.run WHERE r.variant IN "
                       "('protocol=nomerge', 'protocol=fixed') AND f.applied_ms IS NOT NULL"),
                 6);
    /* fixed: every rank of the relaunched job restored step 10 and ended */
    FL_ASSERT_EQ(count("events e JOIN runs r ON r.id = e.run WHERE r.variant = "
                       "'protocol=fixed' AND e.kind = 'restore.done' AND e.attrs = 'step=10'"),
                 3);
    FL_ASSERT_EQ(count("processes p JOIN runs r ON r.id = p.run WHERE r.variant = "
                       "'protocol=fixed' AND p.job = 'trainer' AND p.generation = 1 AND "
                       "p.exit_code = 0"),
                 3);
    FL_ASSERT_EQ(count("checks c JOIN runs r ON r.id = c.run WHERE r.variant = "
                       "'protocol=fixed' AND c.target = 'check:0' AND c.name = 'log_matches' "
                       "AND c.observed LIKE 'consistent: ckpt/step-20 merges 3 shards%'"),
                 1);
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

/* The three variants of rpc-parameter-server pass as shipped: right after
 * the ps's 60th update (a sync point) its machine is cut off and dies.
 * legacy: both trainers fail in rpc_sync with PyTorch's own timeout text;
 * local: the ps's machine is replaced, the new ps has no checkpoint, every
 * trainer rejoins and ends, the check finds the loss above its target;
 * fixed: the new ps restores update 60 from the shared path, the trainers
 * resume where it says, the check finds the loss under its target. */
FL_TEST_ROOT_T(engine_frameworks, pytorch_rpc_parameter_server, 180)
{
    need_torch();
    char *out;
    int rc = fl_test_sh(&out,
                        "%s run --out %s/o --db %s/fl.db "
                        "%s/scenarios/frameworks/pytorch/rpc-parameter-server 2>&1",
                        fl_test_bin("faultline"), fl_test_dir(), fl_test_dir(), fl_test_root());
    FL_ASSERT_MSG(rc == 0,
                  "faultline run scenarios/frameworks/pytorch/rpc-parameter-server exited %d:\n%s",
                  rc, out);
    free(out);
    if (rc == 2)
        return;
    FL_ASSERT_EQ(fl_test_scenario_db_int("SELECT count(*) FROM runs WHERE scenario = "
                                         "'pytorch-rpc-parameter-server' AND verdict = 'pass'"),
                 3);
    FL_ASSERT_EQ(count("checks WHERE passed = 0"), 0);
    /* legacy: both trainers failed in rpc_sync with PyTorch's own text */
    FL_ASSERT_EQ(count("checks c JOIN runs r ON r.id = c.run WHERE r.variant = "
                       "'protocol=legacy' AND c.name = 'fails_with' AND c.target IN "
                       "('trainer:0', 'trainer:1') AND c.observed LIKE '%RuntimeError: "
                       "RPCErr:1:RPC ran for more than set timeout (2000 ms)%'"),
                 2);
    /* every variant: the machine went at the ps's 60th update, a sync
     * point, by a partition and a crash (legacy) or a replace, applied
     * after it and before the ps told any other count of updates (local's
     * new ps, from scratch, reaches its own 60th update later) */
    FL_ASSERT_EQ(count("(SELECT DISTINCT e.run FROM events e JOIN faults f ON f.run = e.run "
                       "WHERE e.kind = 'ps.updates' AND e.host = 'ps0' AND e.sync = 1 AND "
                       "e.attrs LIKE 'n=60 %' AND f.kind IN ('crash_host', 'replace') AND "
                       "f.applied_ms >= e.t_ms AND NOT EXISTS (SELECT 1 FROM events o WHERE "
                       "o.run = e.run AND o.kind = 'ps.updates' AND o.t_ms > e.t_ms AND "
                       "o.t_ms < f.applied_ms))"),
                 3);
    FL_ASSERT_EQ(count("faults WHERE applied_ms IS NOT NULL AND kind IN ('partition', "
                       "'crash_host', 'replace')"),
                 6);
    /* local and fixed: both trainers lost the ps, rejoined the new one and
     * ended; the new ps ended too */
    FL_ASSERT_EQ(count("events e JOIN runs r ON r.id = e.run WHERE r.variant IN "
                       "('protocol=local', 'protocol=fixed') AND e.kind = 'trainer.rejoined'"),
                 4);
    FL_ASSERT_EQ(count("processes p JOIN runs r ON r.id = p.run WHERE r.variant IN "
                       "('protocol=local', 'protocol=fixed') AND p.job = 'ps' AND "
                       "p.generation = 1 AND p.exit_code = 0"),
                 2);
    /* local: the new ps had nothing (ps_step=0), and the check says so */
    FL_ASSERT_EQ(count("events e JOIN runs r ON r.id = e.run WHERE r.variant = "
                       "'protocol=local' AND e.kind = 'trainer.rejoined' AND e.attrs LIKE "
                       "'% ps_step=0'"),
                 2);
    FL_ASSERT_EQ(count("checks c JOIN runs r ON r.id = c.run WHERE r.variant = "
                       "'protocol=local' AND c.target = 'check:0' AND c.observed LIKE "
                       "'FAILED: held-out loss %resumed from update 0'"),
                 1);
    /* fixed: restored update 60; the check's loss is under the target */
    FL_ASSERT_EQ(count("events e JOIN runs r ON r.id = e.run WHERE r.variant = "
                       "'protocol=fixed' AND e.kind = 'ps.restored' AND e.attrs = 'n=60'"),
                 1);
    FL_ASSERT_EQ(count("checks c JOIN runs r ON r.id = c.run WHERE r.variant = "
                       "'protocol=fixed' AND c.target = 'check:0' AND c.observed LIKE "
                       "'ok: held-out loss %after 120 updates on the ps, resumed from update "
                       "60'"),
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
     * a sync point (after that event, before any rank began step 26), and
     * healed no sooner than 6 s later (how much later is the machine's) or,
     * in short-timeout, where every rank dies of gloo's 5 s timeout inside
     * it, when the run ended: after the last rank died, before the check */
    FL_ASSERT_EQ(count("faults f JOIN runs r ON r.id = f.run WHERE f.target = '[n1]|[n0,n2]' "
                       "AND (f.healed_ms - f.applied_ms >= 5900 OR (r.variant = "
                       "'protocol=short-timeout' AND f.healed_ms >= (SELECT max(p.ended_ms) "
                       "FROM processes p WHERE p.run = f.run AND p.job = 'trainer') AND "
                       "f.healed_ms <= (SELECT p.started_ms FROM processes p WHERE p.run = "
                       "f.run AND p.job = 'check'))) AND f.applied_ms >= (SELECT "
                       "max(t_ms) FROM (SELECT e.t_ms FROM events e WHERE e.run = f.run AND "
                       "e.kind = 'step.start' AND e.sync = 1 AND e.attrs = 'step=25' ORDER BY "
                       "e.t_ms LIMIT 3)) AND NOT EXISTS (SELECT 1 FROM events e WHERE e.run = "
                       "f.run AND e.kind = 'step.start' AND e.attrs = 'step=26' AND e.t_ms < "
                       "f.applied_ms)"),
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
