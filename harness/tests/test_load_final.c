/*
 * test_load_final.c: the loader's final: section (harness/load/load.c):
 * each entry becomes a job of one task after the jobs of cluster:, with
 * its host, command, env, timeout and variant; its name is a target of
 * expect (alone or as NAME:0) but not of all, chief or a host, and no
 * placeholder; faults cannot name it.  The messages of bad entries are the
 * files data/scenarios/invalid/final_*.yaml (load_scenario's test).
 */
#include "harness/tests/fl_test.h"

#include "harness/tests/scenario_fixture.h"

#include <errno.h>
#include <stdlib.h>

#define FINAL_BASE                                                                  \
    "name: t\n"                                                                     \
    "hosts: [a, b, c]\n"                                                            \
    "variants: {mode: [fast, slow]}\n"                                              \
    "cluster:\n"                                                                    \
    "  ps: [a, b]\n"                                                                \
    "  worker: [c]\n"                                                               \
    "run:\n"                                                                        \
    "  command: \"sleep 1\"\n"                                                      \
    "  env: {LEVEL: info, MODE: \"{mode}\"}\n"                                      \
    "final:\n"                                                                      \
    "  verify:\n"                                                                   \
    "    host: c\n"                                                                 \
    "    command: \"check {host} {job}:{task} {ps_hosts} {worker_count} {port}\"\n" \
    "    timeout: 5s\n"                                                             \
    "    env: {LEVEL: debug}\n"                                                     \
    "  again: {host: a, command: \"true\", variant: slow}\n"

static struct fl_scenario *load_ok(const char *text)
{
    char err[1024] = "";
    struct fl_scenario *s = NULL;
    int rc = load_str(text, &s, err, sizeof err);
    FL_REQUIRE_MSG(rc == 0, "rc %d: %s", rc, err);
    return s;
}

static const char *env_of(const struct fl_scn_job *j, const char *key)
{
    for (size_t i = 0; i < j->n_env; i++)
        if (!strcmp(j->env[i].key, key))
            return j->env[i].value;
    return NULL;
}

FL_TEST(load_final, entry_is_a_job_of_one_task_after_the_cluster)
{
    struct fl_scenario *s = load_ok(FINAL_BASE);
    FL_REQUIRE_EQ(s->n_jobs, 4);
    FL_REQUIRE_EQ(s->n_tasks, 5);
    FL_ASSERT_EQ(s->n_finals, 2);
    FL_ASSERT(s->jobs[0].final == NULL && s->jobs[1].final == NULL);
    const struct fl_scn_job *v = &s->jobs[2], *ag = &s->jobs[3];
    FL_ASSERT_STREQ(v->name, "verify");
    FL_REQUIRE(v->final != NULL);
    FL_ASSERT_EQ(v->final->loc.line, 11);
    FL_ASSERT_EQ(v->n_tasks, 1);
    FL_ASSERT_EQ(v->task_hosts[0], 2);
    FL_ASSERT_EQ(v->first_task, 3);
    FL_ASSERT_EQ(v->final->timeout_ms, 5000);
    FL_ASSERT(!v->final->has_variant);
    /* run.env under its own */
    FL_ASSERT_STREQ(env_of(v, "LEVEL"), "debug");
    FL_ASSERT_STREQ(env_of(v, "MODE"), "{mode}");
    FL_REQUIRE(ag->final != NULL);
    FL_ASSERT_EQ(ag->final->timeout_ms, FL_SCN_DEFAULT_FINAL_TIMEOUT_MS);
    FL_ASSERT(ag->final->has_variant);
    /* tasks: the cluster's unchanged, then one per final */
    FL_ASSERT(!s->tasks[0].final && !s->tasks[2].final);
    FL_ASSERT_EQ(s->tasks[2].port, 2222); /* worker:0 on c */
    FL_ASSERT(s->tasks[3].final);
    FL_ASSERT_EQ(s->tasks[3].job, 2);
    FL_ASSERT_EQ(s->tasks[3].index, 0);
    FL_ASSERT_EQ(s->tasks[3].host, 2);
    FL_ASSERT_EQ(s->tasks[3].port, 2223); /* the next port on c */
    FL_ASSERT(!s->tasks[3].chief);
    FL_ASSERT(s->tasks[4].final);
    FL_ASSERT_EQ(s->tasks[4].port, 2223); /* ps:0 has 2222 on a */
    FL_ASSERT_EQ(s->chief_task, 2);
    char name[64];
    FL_ASSERT_STREQ(fl_scn_task_name(s, 3, name, sizeof name), "verify:0");
    fl_scenario_free(s);
}

FL_TEST(load_final, command_expands_like_a_task)
{
    struct fl_scenario *s = load_ok(FINAL_BASE);
    char *cmd = NULL, err[256];
    FL_REQUIRE_EQ(fl_scn_expand(s, 3, 0, NULL, s->jobs[2].command, &cmd, err, sizeof err), 0);
    FL_ASSERT_STREQ(cmd, "check c verify:0 a:2222,b:2222 1 2223");
    free(cmd);
    fl_scenario_free(s);
}

FL_TEST(load_final, runs_in_the_variants_its_selector_matches)
{
    struct fl_scenario *s = load_ok(FINAL_BASE);
    FL_ASSERT(fl_scn_final_applies(s, 3, 0));
    FL_ASSERT(fl_scn_final_applies(s, 3, 1));
    FL_ASSERT(!fl_scn_final_applies(s, 4, 0)); /* mode=fast */
    FL_ASSERT(fl_scn_final_applies(s, 4, 1));  /* mode=slow */
    FL_ASSERT(!fl_scn_final_applies(s, 2, 0)); /* a task of cluster: */
    fl_scenario_free(s);
}

FL_TEST(load_final, expect_names_it_but_all_and_hosts_do_not_cover_it)
{
    struct fl_scenario *s = load_ok(FINAL_BASE "expect:\n"
                                               "  all:\n"
                                               "    all: {exit: 0}\n"
                                               "    c: {log_not_matches: x}\n"
                                               "    verify: {exit: 0, log_matches: 'lost=0'}\n"
                                               "    \"again:0\": {exit: any}\n");
    FL_REQUIRE_EQ(s->n_expects, 1);
    const struct fl_scn_expect *x = &s->expects[0];
    FL_REQUIRE_EQ(x->n_checks, 4);
    /* all: the cluster's three tasks */
    for (int t = 0; t < 3; t++)
        FL_ASSERT(fl_scn_check_covers(s, &x->checks[0], t));
    FL_ASSERT(!fl_scn_check_covers(s, &x->checks[0], 3));
    FL_ASSERT(!fl_scn_check_covers(s, &x->checks[0], 4));
    /* host c: worker:0, not verify:0 */
    FL_ASSERT(fl_scn_check_covers(s, &x->checks[1], 2));
    FL_ASSERT(!fl_scn_check_covers(s, &x->checks[1], 3));
    FL_ASSERT_EQ(x->checks[2].target, FL_SCN_EXP_JOB);
    FL_ASSERT(fl_scn_check_covers(s, &x->checks[2], 3));
    FL_ASSERT(!fl_scn_check_covers(s, &x->checks[2], 2));
    FL_ASSERT_EQ(x->checks[3].target, FL_SCN_EXP_TASK);
    FL_ASSERT(fl_scn_check_covers(s, &x->checks[3], 4));
    fl_scenario_free(s);
}

FL_TEST(load_final, no_placeholder_names_a_final)
{
    struct fl_scenario *s = load_ok(FINAL_BASE);
    FL_ASSERT_EQ(fl_scn_job_placeholder(s, "ps_hosts", 8, NULL), 0);
    FL_ASSERT_EQ(fl_scn_job_placeholder(s, "verify_hosts", 12, NULL), -1);
    FL_ASSERT_EQ(fl_scn_job_placeholder(s, "verify_count", 12, NULL), -1);
    fl_scenario_free(s);
}

/* The messages that name the section's own places (the rest are files of
 * data/scenarios/invalid/final_*.yaml). */
FL_TEST(load_final, faults_cannot_reach_a_final)
{
    char err[1024] = "";
    struct fl_scenario *s = NULL;
    int rc = load_str(FINAL_BASE "faults:\n"
                                 "  - {at: 1s, kill: c}\n"
                                 "  - {at: 1s, restart: \"verify:0\"}\n",
                      &s, err, sizeof err);
    FL_ASSERT_EQ(rc, -EINVAL);
    FL_ASSERT_STREQ(err, "s.yaml:19:23: 'verify:0' is a final check (final:, line 11), which runs "
                         "once faults no longer fire: name a host or a task of cluster: in "
                         "restart target");
    fl_scenario_free(s);
}
