/*
 * test_load_scenario.c: the scenario loader (harness/load/load.c and
 * load/faults.c).  Valid files load into exactly the model they describe
 * (data/scenarios/valid/full.yaml uses every feature); every file in
 * data/scenarios/invalid/ fails with exactly the message on its first line
 * ("# expect: file:line:column: message"); inline cases check errors that
 * need no file.
 */
#include "harness/load/load.h"
#include "harness/tests/fl_test.h"

#include "harness/tests/scenario_fixture.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>

static void expect_error(const char *text, const char *msg)
{
    char err[1024] = "";
    struct fl_scenario *s = NULL;
    int rc = load_str(text, &s, err, sizeof err);
    FL_ASSERT_EQ(rc, -EINVAL);
    FL_ASSERT(s == NULL);
    FL_ASSERT_STREQ(err, msg);
    fl_scenario_free(s);
}

#define BASE                      \
    "name: t\n"                   \
    "hosts: [ps0, ps1, w0, w1]\n" \
    "cluster:\n"                  \
    "  ps: [ps0, ps1]\n"          \
    "  worker: [w0, w1]\n"        \
    "run:\n"                      \
    "  command: \"sleep 1\"\n"

/* BASE is 7 lines: what follows starts on line 8. */

FL_TEST(load_scenario, load_full_hosts_and_disks)
{
    struct fl_scenario *s = load_valid("full.yaml");
    FL_ASSERT_STREQ(s->name, "full-feature.v1");
    FL_ASSERT_STREQ(s->about, "Every key of the format.\n");
    FL_ASSERT_STREQ(s->path, "full.yaml");
    FL_ASSERT_STREQ(s->dir, data_dir("valid"));
    FL_ASSERT(s->seed_set);
    FL_ASSERT_EQ(s->seed, 42);
    FL_ASSERT_EQ(s->timeout_ms, 90000);
    FL_ASSERT_STREQ(s->workdir, "/srv/work");
    FL_REQUIRE_EQ(s->n_hosts, 4);
    FL_ASSERT_STREQ(s->hosts[0].name, "ps0");
    FL_ASSERT_EQ(s->hosts[0].loc.line, 10);
    FL_ASSERT_EQ(s->hosts[0].loc.col, 3);
    FL_ASSERT_EQ(s->hosts[0].disk_size, 0);
    FL_ASSERT_EQ(s->hosts[1].disk_size, 64ull << 20);
    FL_REQUIRE_EQ(s->hosts[1].n_dirs, 2);
    FL_ASSERT_STREQ(s->hosts[1].dirs[0].path, "model/1/variables");
    FL_ASSERT_STREQ(s->hosts[1].dirs[1].path, "train_logs");
    FL_REQUIRE_EQ(s->hosts[1].n_files, 2);
    FL_ASSERT_STREQ(s->hosts[1].files[0].path, "notes.txt");
    FL_ASSERT_STREQ(s->hosts[1].files[0].content, "hello\n");
    FL_ASSERT_EQ(s->hosts[1].files[0].len, 6);
    FL_ASSERT_STREQ(s->hosts[1].files[1].content, "");
    FL_ASSERT(s->hosts[2].clock_offset_set);
    FL_ASSERT_EQ(s->hosts[2].clock_offset_ms, -250);
    FL_ASSERT(!s->hosts[3].clock_offset_set);
    FL_ASSERT(!s->hosts[2].privileged);
    FL_ASSERT(s->hosts[3].privileged);
    FL_REQUIRE_EQ(s->n_shared, 2);
    FL_ASSERT_STREQ(s->shared[0].path, "train_logs");
    FL_REQUIRE_EQ(s->shared[0].n_hosts, 3);
    FL_ASSERT_EQ(s->shared[0].hosts[2], 2);
    FL_ASSERT_EQ(s->shared[1].n_hosts, 4);
    FL_ASSERT_EQ(strlen(s->hash), FL_SCN_HASH_HEX_LEN);
    fl_scenario_free(s);
}

FL_TEST(load_scenario, load_full_jobs_tasks_ports_chief)
{
    struct fl_scenario *s = load_valid("full.yaml");
    FL_REQUIRE_EQ(s->n_jobs, 2);
    FL_ASSERT_STREQ(s->jobs[0].name, "ps");
    FL_ASSERT_STREQ(s->jobs[1].name, "worker");
    FL_ASSERT_EQ(s->jobs[1].n_tasks, 3);
    FL_ASSERT_EQ(s->jobs[1].first_task, 2);
    FL_ASSERT_STREQ(s->jobs[0].command, "cat --ps {task} {port} {{literal}}");
    /* Folded command: continuation lines joined with spaces, no trailing newline. */
    FL_ASSERT_STREQ(s->jobs[1].command,
                    "sh -c 'echo {job}:{task}'   --ps={ps_hosts} --workers={worker_hosts} "
                    "--n={worker_count}   --proto={protocol} --threads={threads}");
    FL_ASSERT_EQ(s->jobs[1].command_loc.line, 29);
    FL_REQUIRE_EQ(s->n_tasks, 5);
    /* w0 runs worker:0 and worker:2: ports 3000 and 3001. */
    FL_ASSERT_EQ(s->tasks[2].host, 2);
    FL_ASSERT_EQ(s->tasks[2].port, 3000);
    FL_ASSERT_EQ(s->tasks[4].host, 2);
    FL_ASSERT_EQ(s->tasks[4].port, 3001);
    FL_ASSERT_EQ(s->tasks[4].job, 1);
    FL_ASSERT_EQ(s->tasks[4].index, 2);
    FL_ASSERT_EQ(s->chief_task, 2);
    FL_ASSERT(s->tasks[2].chief);
    FL_ASSERT(!s->tasks[0].chief);
    /* env: run.env merged with run.ps.env, the job's value wins. */
    FL_REQUIRE_EQ(s->jobs[0].n_env, 3);
    FL_ASSERT_STREQ(s->jobs[0].env[0].key, "MODE");
    FL_ASSERT_STREQ(s->jobs[0].env[0].value, "ps-{protocol}");
    FL_ASSERT_STREQ(s->jobs[1].env[0].value, "{protocol}");
    FL_ASSERT_STREQ(s->jobs[1].env[2].key, "PLAIN");
    FL_ASSERT_EQ(s->run.base_port, 3000);
    FL_ASSERT(!s->run.stop_all);
    FL_REQUIRE_EQ(s->run.n_stop_jobs, 1);
    FL_ASSERT_EQ(s->run.stop_jobs[0], 1);
    FL_ASSERT_EQ(s->run.grace_ms, 500);
    FL_ASSERT_EQ(fl_scn_host_find(s, "w1"), 3);
    FL_ASSERT_EQ(fl_scn_host_find(s, "nope"), -1);
    FL_ASSERT_EQ(fl_scn_job_find(s, "worker"), 1);
    FL_ASSERT_EQ(fl_scn_task_index(s, 1, 2), 4);
    FL_ASSERT_EQ(fl_scn_task_index(s, 1, 3), -1);
    char b[32];
    FL_ASSERT_STREQ(fl_scn_task_name(s, 4, b, sizeof b), "worker:2");
    fl_scenario_free(s);
}

FL_TEST(load_scenario, load_full_faults)
{
    struct fl_scenario *s = load_valid("full.yaml");
    FL_REQUIRE_EQ(s->n_faults, 10);
    const struct fl_scn_fault *f = s->faults;

    FL_ASSERT_EQ(f[0].trigger.kind, FL_SCN_TRIG_AT);
    FL_ASSERT_EQ(f[0].trigger.at_ms, 2000);
    FL_ASSERT_EQ(f[0].action.kind, FL_SCN_ACT_KILL);
    FL_ASSERT_EQ(f[0].action.target.kind, FL_SCN_TGT_HOST);
    FL_ASSERT_EQ(f[0].action.target.host, 1);
    FL_ASSERT_EQ(f[0].action.signal, SIGKILL);
    FL_ASSERT_EQ(f[0].for_ms, 0);
    FL_ASSERT(!f[0].has_variant);
    FL_ASSERT_EQ(f[0].loc.line, 46);
    FL_ASSERT_EQ(f[0].loc.col, 5);

    FL_ASSERT_EQ(f[1].trigger.at_ms, 2500);
    FL_ASSERT_EQ(f[1].action.target.kind, FL_SCN_TGT_TASK);
    FL_ASSERT_EQ(f[1].action.target.task, 1);
    FL_ASSERT_EQ(f[1].action.target.host, 1);
    FL_ASSERT_EQ(f[1].action.signal, SIGTERM);

    FL_ASSERT_EQ(f[2].action.target.kind, FL_SCN_TGT_TASK);
    FL_ASSERT(f[2].action.target.chief);
    FL_ASSERT_EQ(f[2].action.target.task, 2);
    FL_ASSERT_EQ(f[2].action.signal, 6);

    FL_ASSERT_EQ(f[3].trigger.kind, FL_SCN_TRIG_EVENT);
    FL_ASSERT_STREQ(f[3].trigger.event, "save.shard_written");
    FL_ASSERT_EQ(f[3].trigger.host, 0);
    FL_ASSERT_EQ(f[3].trigger.job, 0);
    FL_ASSERT_EQ(f[3].trigger.task, -1);
    FL_ASSERT_EQ(f[3].trigger.count, 2);
    FL_REQUIRE_EQ(f[3].trigger.n_where, 1);
    FL_ASSERT_STREQ(f[3].trigger.where[0].key, "shard");
    FL_ASSERT_STREQ(f[3].trigger.where[0].value, "1");
    FL_ASSERT_EQ(f[3].action.kind, FL_SCN_ACT_CRASH_HOST);
    FL_ASSERT_EQ(f[3].action.host, 1);
    FL_ASSERT_EQ(f[3].for_ms, 1000);

    FL_ASSERT_EQ(f[4].trigger.kind, FL_SCN_TRIG_LOG);
    FL_ASSERT_EQ(f[4].trigger.host, 2);
    FL_ASSERT_EQ(f[4].trigger.job, 1);
    FL_ASSERT_EQ(f[4].trigger.task, 0);
    FL_ASSERT_EQ(f[4].trigger.count, 3);
    FL_ASSERT_STREQ(f[4].trigger.match.src, "step \\d+ done");
    FL_ASSERT_EQ(regexec(&f[4].trigger.match.re, "w0: step 120 done", 0, NULL, 0), 0);
    FL_ASSERT_NE(regexec(&f[4].trigger.match.re, "step x done", 0, NULL, 0), 0);
    FL_ASSERT_EQ(f[4].action.kind, FL_SCN_ACT_PARTITION);
    FL_ASSERT(!f[4].action.oneway);
    FL_REQUIRE_EQ(f[4].action.n_groups, 2);
    FL_REQUIRE_EQ(f[4].action.groups[1].n, 2);
    FL_ASSERT_EQ(f[4].action.groups[1].hosts[0], 1);
    FL_ASSERT_EQ(f[4].action.groups[1].hosts[1], 3);

    FL_ASSERT(f[5].action.oneway);
    FL_REQUIRE_EQ(f[5].action.from.n, 1);
    FL_ASSERT_EQ(f[5].action.from.hosts[0], 2);
    FL_REQUIRE_EQ(f[5].action.to.n, 1);
    FL_ASSERT_EQ(f[5].action.to.hosts[0], 0);
    FL_ASSERT(f[5].has_variant);

    FL_ASSERT_EQ(f[6].action.kind, FL_SCN_ACT_PAUSE);
    FL_ASSERT_EQ(f[6].action.target.host, 3);
    FL_ASSERT_EQ(f[6].for_ms, 2000);
    FL_ASSERT_EQ(f[7].action.kind, FL_SCN_ACT_RESTART);
    FL_ASSERT_EQ(f[7].action.host, 0);
    FL_ASSERT_EQ(f[8].action.kind, FL_SCN_ACT_REPLACE);
    FL_ASSERT_EQ(f[8].action.host, 1); /* "ps:1" names its host */
    FL_ASSERT_EQ(f[8].action.target.task, 1);
    FL_ASSERT_EQ(f[9].action.kind, FL_SCN_ACT_LIMIT);
    FL_ASSERT_EQ(f[9].action.host, 2);
    FL_ASSERT_EQ(f[9].action.threads, 64);
    FL_ASSERT_EQ(f[9].trigger.at_ms, 0);
    FL_ASSERT_EQ(f[9].for_ms, 10000);
    fl_scenario_free(s);
}

FL_TEST(load_scenario, load_full_fault_variants_apply)
{
    struct fl_scenario *s = load_valid("full.yaml");
    char name[128];
    /* 2 x 3 variants: protocol slowest, threads fastest. */
    FL_REQUIRE_EQ(fl_scn_variant_count(s), 6);
    FL_ASSERT_STREQ(fl_scn_variant_name(s, 0, name, sizeof name), "protocol=legacy,threads=pool");
    FL_ASSERT_STREQ(fl_scn_variant_name(s, 4, name, sizeof name),
                    "protocol=robust,threads=per_request");
    /* f[5]: variant: legacy -> 0,1,2 */
    for (size_t v = 0; v < 6; v++)
        FL_ASSERT_EQ(fl_scn_fault_applies(s, &s->faults[5], v), v < 3);
    /* f[6]: {protocol: robust, threads: [pool, one]} -> 3 and 5 */
    for (size_t v = 0; v < 6; v++)
        FL_ASSERT_EQ(fl_scn_fault_applies(s, &s->faults[6], v), v == 3 || v == 5);
    /* f[8]: "protocol=robust,threads=pool" -> 3 */
    for (size_t v = 0; v < 6; v++)
        FL_ASSERT_EQ(fl_scn_fault_applies(s, &s->faults[8], v), v == 3);
    FL_ASSERT(fl_scn_fault_applies(s, &s->faults[0], 4));
    fl_scenario_free(s);
}

FL_TEST(load_scenario, load_full_expectations)
{
    struct fl_scenario *s = load_valid("full.yaml");
    FL_REQUIRE_EQ(s->n_expects, 4);
    const struct fl_scn_expect *x = s->expects;

    FL_ASSERT_STREQ(x[0].sel.text, "legacy");
    FL_REQUIRE_EQ(x[0].n_checks, 2);
    FL_ASSERT_EQ(x[0].checks[0].target, FL_SCN_EXP_CHIEF);
    FL_ASSERT_STREQ(x[0].checks[0].fails_with.src, "NotFoundError: .*_temp_[0-9a-f]{32}");
    FL_ASSERT_EQ(x[0].checks[0].fails_with.loc.line, 63);
    FL_ASSERT_EQ(x[0].checks[0].fails_with.loc.col, 25);
    FL_ASSERT_EQ(x[0].checks[0].exit, FL_SCN_EXIT_UNSET);
    FL_ASSERT_EQ(x[0].checks[0].core, -1);
    FL_ASSERT_EQ(x[0].checks[1].target, FL_SCN_EXP_JOB);
    FL_ASSERT_EQ(x[0].checks[1].index, 0);
    FL_ASSERT_EQ(x[0].checks[1].exit, FL_SCN_EXIT_ANY);

    FL_REQUIRE_EQ(x[1].n_checks, 1);
    FL_ASSERT_EQ(x[1].checks[0].target, FL_SCN_EXP_ALL);
    FL_ASSERT_EQ(x[1].checks[0].exit, FL_SCN_EXIT_CODE);
    FL_ASSERT_EQ(x[1].checks[0].exit_code, 0);
    FL_REQUIRE_EQ(x[1].n_files, 2);
    FL_ASSERT_EQ(x[1].files[0].host, 2);
    FL_ASSERT_STREQ(x[1].files[0].path, "train_logs/checkpoint");
    FL_ASSERT(x[1].files[0].exists);
    FL_ASSERT(!x[1].files[1].exists);
    FL_REQUIRE_EQ(x[1].n_events, 3);
    FL_ASSERT_STREQ(x[1].events[0].event, "save.done");
    FL_ASSERT_EQ(x[1].events[0].host, 2);
    FL_ASSERT_EQ(x[1].events[0].min, 1);
    FL_ASSERT_EQ(x[1].events[0].max, -1);
    FL_ASSERT_EQ(x[1].events[1].host, -1);
    FL_ASSERT_EQ(x[1].events[1].min, 0); /* only max given */
    FL_ASSERT_EQ(x[1].events[1].max, 0);
    FL_ASSERT_EQ(x[1].events[2].job, 0);
    FL_ASSERT_EQ(x[1].events[2].min, 2);
    FL_ASSERT_EQ(x[1].events[2].max, 4);

    FL_REQUIRE_EQ(x[2].n_checks, 3);
    FL_ASSERT_EQ(x[2].checks[0].target, FL_SCN_EXP_TASK);
    FL_ASSERT_EQ(x[2].checks[0].index, 4);
    FL_ASSERT_EQ(x[2].checks[0].exit, FL_SCN_EXIT_NONZERO);
    FL_ASSERT_STREQ(x[2].checks[0].log_matches.src, "retry");
    FL_ASSERT_STREQ(x[2].checks[0].log_not_matches.src, "panic");
    FL_ASSERT_EQ(x[2].checks[1].target, FL_SCN_EXP_HOST);
    FL_ASSERT_EQ(x[2].checks[1].index, 3);
    FL_ASSERT_EQ(x[2].checks[1].signal, FL_SCN_SIG_NUMBER);
    FL_ASSERT_EQ(x[2].checks[1].signal_number, SIGKILL);
    FL_ASSERT_EQ(x[2].checks[1].core, 0);
    FL_ASSERT_EQ(x[2].checks[2].signal, FL_SCN_SIG_ANY);
    FL_ASSERT_EQ(x[3].checks[0].core, 1);

    /* Which blocks apply to which variant. */
    for (size_t v = 0; v < 6; v++) {
        FL_ASSERT_EQ(fl_scn_selector_match(s, &x[0].sel, v), v < 3);
        FL_ASSERT_EQ(fl_scn_selector_match(s, &x[1].sel, v), v >= 3);
        FL_ASSERT_EQ(fl_scn_selector_match(s, &x[2].sel, v), v == 4);
        FL_ASSERT(fl_scn_selector_match(s, &x[3].sel, v));
    }
    /* Coverage of targets. */
    FL_ASSERT(fl_scn_check_covers(s, &x[0].checks[0], 2));
    FL_ASSERT(!fl_scn_check_covers(s, &x[0].checks[0], 3));
    FL_ASSERT(fl_scn_check_covers(s, &x[0].checks[1], 1));
    FL_ASSERT(!fl_scn_check_covers(s, &x[0].checks[1], 2));
    FL_ASSERT(fl_scn_check_covers(s, &x[2].checks[1], 3)); /* w1 runs worker:1 */
    FL_ASSERT(!fl_scn_check_covers(s, &x[2].checks[1], 4));
    fl_scenario_free(s);
}

FL_TEST(load_scenario, load_minimal_defaults)
{
    struct fl_scenario *s = load_valid("minimal.yaml");
    FL_ASSERT_STREQ(s->about, "");
    FL_ASSERT(!s->seed_set);
    FL_ASSERT_EQ(s->timeout_ms, FL_SCN_DEFAULT_TIMEOUT_MS);
    FL_ASSERT_STREQ(s->workdir, "/srv/faultline");
    FL_ASSERT_EQ(s->run.base_port, 2222);
    FL_ASSERT_EQ(s->run.grace_ms, 2000);
    FL_ASSERT(s->run.stop_all);
    FL_ASSERT_EQ(s->n_dims, 0);
    FL_ASSERT_EQ(fl_scn_variant_count(s), 1);
    char name[32];
    FL_ASSERT_STREQ(fl_scn_variant_name(s, 0, name, sizeof name), "default");
    /* No "worker" or "chief" job: the chief is task 0 of the first job. */
    FL_ASSERT_EQ(s->chief_task, 0);
    FL_ASSERT_EQ(s->n_faults, 0);
    FL_ASSERT_EQ(s->n_expects, 0);
    fl_scenario_free(s);
}

FL_TEST(load_scenario, load_aliases_share_anchored_nodes)
{
    struct fl_scenario *s = load_valid("aliases.yaml");
    FL_REQUIRE_EQ(s->n_tasks, 2);
    FL_ASSERT_STREQ(s->jobs[0].command, "sleep 1");
    FL_REQUIRE_EQ(s->n_faults, 2);
    FL_ASSERT_EQ(s->faults[1].action.kind, FL_SCN_ACT_PAUSE);
    FL_ASSERT_EQ(s->faults[1].for_ms, 1000);
    fl_scenario_free(s);
}

FL_TEST(load_scenario, load_every_valid_file_and_example)
{
    const char *dirs[] = {data_dir("valid"), NULL};
    char ex[4096];
    snprintf(ex, sizeof ex, "%s/scenarios", fl_test_root());
    dirs[1] = ex;
    for (int d = 0; d < 2; d++) {
        char **list = NULL, err[1024] = "";
        size_t n = 0;
        char dir[4096];
        snprintf(dir, sizeof dir, "%s", dirs[d]);
        FL_REQUIRE_EQ(fl_scenario_list(dir, &list, &n, err, sizeof err), 0);
        FL_ASSERT_GE(n, d == 0 ? 3 : 1);
        for (size_t i = 0; i < n; i++) {
            struct fl_scenario *s = NULL;
            int rc = fl_scenario_load(list[i], &s, err, sizeof err);
            FL_ASSERT_MSG(rc == 0, "%s", err);
            fl_scenario_free(s);
        }
        fl_scenario_list_free(list, n);
    }
}

FL_TEST(load_scenario, load_invalid_files_report_exact_place_and_message)
{
    char **list = NULL, err[1024];
    size_t n = 0;

    FL_REQUIRE_EQ(chdir(data_dir("invalid")), 0);
    FL_REQUIRE_EQ(fl_scenario_list(".", &list, &n, err, sizeof err), 0);
    FL_REQUIRE_GE(n, 60);
    for (size_t i = 0; i < n; i++) {
        const char *name = list[i] + 2; /* "./x.yaml" */
        char want[1024] = "", *nl;
        FILE *f = fopen(name, "r");
        FL_REQUIRE(f != NULL);
        if (!fgets(want, sizeof want, f))
            want[0] = 0;
        fclose(f);
        if ((nl = strchr(want, '\n')))
            *nl = 0;
        FL_REQUIRE_MSG(strncmp(want, "# expect: ", 10) == 0,
                       "%s: first line is not '# expect: ...'", name);
        struct fl_scenario *s = NULL;
        err[0] = 0;
        int rc = fl_scenario_load(name, &s, err, sizeof err);
        FL_ASSERT_MSG(rc == -EINVAL, "%s: rc %d", name, rc);
        FL_ASSERT(s == NULL);
        FL_ASSERT_STREQ(err, expand_kinds(want + 10));
        fl_scenario_free(s);
    }
    fl_scenario_list_free(list, n);
}

FL_TEST(load_scenario, load_error_bad_yaml_names_place)
{
    expect_error("name: t\nhosts: [a, b\n",
                 "s.yaml:3:1: invalid YAML: did not find expected ',' or ']' "
                 "(while parsing a flow sequence at line 2 column 8)");
    expect_error("name: t\n  bad: indent\n",
                 "s.yaml:2:6: invalid YAML: mapping values are not allowed in this context");
}

/* The fabric attaches at most FL_SCN_MAX_HOSTS hosts: one more failed the
 * run only after every host's namespaces had been made. */
FL_TEST(load_scenario, load_error_too_many_hosts)
{
    size_t cap = 64 + 8 * (FL_SCN_MAX_HOSTS + 1), n = 0;
    char *text = malloc(cap);
    FL_REQUIRE(text != NULL);
    n += (size_t)snprintf(text + n, cap - n, "name: t\nhosts: [");
    for (int i = 0; i <= FL_SCN_MAX_HOSTS; i++)
        n += (size_t)snprintf(text + n, cap - n, "%sh%d", i ? "," : "", i);
    n += (size_t)snprintf(text + n, cap - n, "]\ncluster: {ps: [h0]}\nrun: {command: x}\n");
    char want[128], lastname[32];
    snprintf(want, sizeof want,
             "s.yaml:2:8: too many hosts (%d): a run has at most %d (what its network switch "
             "takes)",
             FL_SCN_MAX_HOSTS + 1, FL_SCN_MAX_HOSTS);
    expect_error(text, want);
    /* one fewer loads */
    snprintf(lastname, sizeof lastname, ",h%d]", FL_SCN_MAX_HOSTS);
    char *last = strstr(text, lastname);
    FL_REQUIRE(last != NULL);
    size_t cut = strlen(lastname) - 1;
    memmove(last, last + cut, strlen(last + cut) + 1);
    struct fl_scenario *sc = NULL;
    char err[1024] = "";
    FL_ASSERT_MSG(load_str(text, &sc, err, sizeof err) == 0, "%s", err);
    FL_ASSERT(sc && sc->n_hosts == FL_SCN_MAX_HOSTS);
    fl_scenario_free(sc);
    free(text);
}

FL_TEST(load_scenario, load_error_empty_buffer)
{
    expect_error(
        "", "s.yaml:1:1: empty scenario (expected a mapping with name, hosts, cluster and run)");
}

FL_TEST(load_scenario, load_error_nul_byte)
{
    char err[256];
    struct fl_scenario *s = NULL;
    static const char text[] = "name: t\nab\0c\n";
    FL_ASSERT_EQ(fl_scenario_load_mem("s.yaml", text, sizeof text - 1, &s, err, sizeof err),
                 -EINVAL);
    FL_ASSERT_STREQ(err, "s.yaml:2:3: the file contains a NUL byte (not a text file)");
}

FL_TEST(load_scenario, load_error_unknown_key_suggests)
{
    expect_error(BASE "faults:\n  - {at: 1s, kil: ps0}\n",
                 "s.yaml:9:14: unknown fault kind 'kil' (did you mean 'kill'?)");
    expect_error(BASE "faults:\n  - {at: 1s, crash: ps0}\n",
                 "s.yaml:9:14: unknown fault kind 'crash' (did you mean 'crash_host'?)");
    expect_error(
        BASE "expect:\n  all:\n    chief: {exti: 0}\n",
        "s.yaml:10:13: unknown key 'exti' in expectations of 'chief' (did you mean 'exit'?)");
    /* No close key: the valid ones are listed. */
    expect_error(BASE "shared:\n  - {path: x, hosts: [ps0], zzzzzz: 1}\n",
                 "s.yaml:9:29: unknown key 'zzzzzz' in shared entry (expected path, hosts)");
}

FL_TEST(load_scenario, load_error_unknown_names_suggest)
{
    expect_error(BASE "faults:\n  - {at: 1s, kill: w11}\n",
                 "s.yaml:9:20: unknown host 'w11' in kill target (did you mean 'w1'?)");
    expect_error(BASE "faults:\n  - {at: 1s, kill: 'wrker:1'}\n",
                 "s.yaml:9:20: unknown job 'wrker' in kill target (did you mean 'worker'?)");
    expect_error(BASE "faults:\n  - {at: 1s, partition: [[ps0, w0], [ps1, w2]]}\n",
                 "s.yaml:9:43: unknown host 'w2' in partition group (did you mean 'w0'?)");
    expect_error(BASE "faults:\n  - {on_log: {job: wrker, match: x}, kill: ps0}\n",
                 "s.yaml:9:20: unknown job 'wrker' in 'on_log' (did you mean 'worker'?)");
    expect_error(BASE "expect:\n  all:\n    events:\n      - {event: a, host: pss0}\n",
                 "s.yaml:11:26: unknown host 'pss0' in event check (did you mean 'ps0'?)");
}

FL_TEST(load_scenario, load_error_regex_syntax_and_shape)
{
    expect_error(BASE "expect:\n  all:\n    all: {log_matches: 'a(b'}\n",
                 "s.yaml:10:24: bad regex in 'log_matches': Unmatched ( or \\(");
    /* Stacked repetitions are undefined in POSIX and explode in glibc. */
    expect_error(BASE "expect:\n  all:\n    all: {log_matches: 'a++'}\n",
                 "s.yaml:10:24: bad regex in 'log_matches': stacked repetition operators (like "
                 "'a+*') are not supported");
    expect_error(BASE "expect:\n  all:\n    all: {log_not_matches: '((a{99}){99}){99}'}\n",
                 "s.yaml:10:28: bad regex in 'log_not_matches': too complex (nested repetitions "
                 "expand too far)");
    /* \d is rewritten to [0-9]; GNU \w, \s and \b work as in grep -E. */
    char err[512];
    struct fl_scenario *s = NULL;
    FL_REQUIRE_EQ(
        load_str(
            BASE
            "expect:\n  all:\n    all: {log_matches: '^\\d{4}-\\d{2} \\w+\\s[[:digit:]\\d]\\b'}\n",
            &s, err, sizeof err),
        0);
    const regex_t *re = &s->expects[0].checks[0].log_matches.re;
    FL_ASSERT_EQ(regexec(re, "2024-05 step 7", 0, NULL, 0), 0);
    FL_ASSERT_NE(regexec(re, "2024-0x step 7", 0, NULL, 0), 0);
    FL_ASSERT_NE(regexec(re, "2024-05 step d", 0, NULL, 0), 0);
    fl_scenario_free(s);
}

FL_TEST(load_scenario, load_error_template_columns)
{
    /* Plain scalar: column of the '{'. */
    expect_error(BASE "  ps:\n    command: echo {bogus}\n",
                 "s.yaml:9:19: unknown placeholder '{bogus}'");
    /* Second occurrence of the same text is found, not the first. */
    expect_error("name: t\nhosts: [a]\ncluster: {x: [a]}\nrun:\n  command: \"{{nope}} {nope}\"\n",
                 "s.yaml:5:22: unknown placeholder '{nope}'");
    /* Literal block: the line inside the block. */
    expect_error(
        "name: t\nhosts: [a]\ncluster: {x: [a]}\nrun:\n  command: |\n    a {job}\n    b {x_hots}\n",
        "s.yaml:7:7: unknown placeholder '{x_hots}' (did you mean '{x_hosts}'?)");
    /* {<job>_count} and variant keys are known. */
    char err[512];
    struct fl_scenario *s = NULL;
    FL_ASSERT_EQ(load_str("name: t\nhosts: [a]\ncluster: {x: [a]}\nvariants: {mode: [m1]}\n"
                          "run: {command: 'echo {x_count} {x_hosts} {mode} {run_id} {seed} {bin} "
                          "{scenario_dir} {workdir} {addr} {chief}'}\n",
                          &s, err, sizeof err),
                 0);
    fl_scenario_free(s);
}

FL_TEST(load_scenario, load_error_hosts_and_jobs)
{
    expect_error("name: t\nhosts:\n  a: {}\n  b: {}\n  a: {}\n",
                 "s.yaml:5:3: duplicate key 'a' (first at line 3 column 3)");
    expect_error("name: t\nhosts: [a, b]\ncluster: {x: [a], y: []}\n",
                 "s.yaml:3:22: job 'y' has no tasks (list its hosts, e.g. y: [h0])");
    expect_error("name: t\nhosts: [a]\ncluster: {x: a}\n",
                 "s.yaml:3:14: job 'x' must be a list, not 'a'");
    expect_error("name: t\nhosts: [a]\ncluster: {Bad: [a]}\n",
                 "s.yaml:3:11: bad job name 'Bad' (lower-case letters, digits and '_', starting "
                 "with a letter)");
}

FL_TEST(load_scenario, load_error_link_jitter_needs_delay)
{
    expect_error(
        BASE "faults:\n  - {at: 1s, link: {from: w0, to: ps0, jitter: 5ms}}\n",
        "s.yaml:9:40: 'jitter' varies a delay: set 'delay' too (e.g. delay: 20ms, jitter: 5ms)");
}

FL_TEST(load_scenario, load_error_missing_file)
{
    char err[512];
    struct fl_scenario *s = NULL;
    char path[4096];
    snprintf(path, sizeof path, "%s/nope.yaml", fl_test_dir());
    FL_ASSERT_EQ(fl_scenario_load(path, &s, err, sizeof err), -ENOENT);
    char want[4200];
    snprintf(want, sizeof want, "%s: No such file or directory", path);
    FL_ASSERT_STREQ(err, want);
    FL_ASSERT_EQ(fl_scenario_load(fl_test_dir(), &s, err, sizeof err), -EISDIR);
}
