/*
 * test_soak.c: soak mode.  Schedules drawn from a seed (deterministic,
 * within the profile's kinds, targets and bounds, loadable as ordinary
 * scenarios), the profile loader's errors (data/soak/invalid/, first line
 * the exact message), the minimizer on a known predicate, and real soaks
 * through the faultline binary: a guilty profile yields a failure file and
 * a minimized file holding just the guilty fault, which `faultline run`
 * fails on the same way; a robust profile passes a short soak.
 */
#include "harness/tests/fl_test.h"
#include "harness/sys/rundir.h"
#include "harness/soak/soak.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *data(const char *name)
{
    static char buf[4][4096];
    static int k;
    char *b = buf[k++ % 4];
    snprintf(b, 4096, "%s/harness/tests/data/soak/%s", fl_test_root(), name);
    return b;
}

static struct fl_soak_profile *load(const char *path)
{
    struct fl_soak_profile *p = NULL;
    char err[2048] = "";
    int rc = fl_soak_profile_load(path, &p, err, sizeof err);
    FL_REQUIRE_MSG(rc == 0, "%s", err);
    return p;
}

static bool same_schedule(const struct fl_soak_schedule *a, const struct fl_soak_schedule *b)
{
    if (a->n != b->n)
        return false;
    for (size_t i = 0; i < a->n; i++)
        if (a->faults[i].entry != b->faults[i].entry || a->faults[i].at_ms != b->faults[i].at_ms ||
            a->faults[i].target != b->faults[i].target || a->faults[i].for_ms != b->faults[i].for_ms)
            return false;
    return true;
}

FL_TEST(soak, draw_same_seed_same_schedule_other_seeds_differ)
{
    struct fl_soak_profile *p = load(data("draw.yaml"));
    struct fl_soak_schedule a, b;
    FL_REQUIRE_EQ(fl_soak_draw(p, 42, &a), 0);
    FL_REQUIRE_EQ(fl_soak_draw(p, 42, &b), 0);
    FL_REQUIRE_GE(a.n, 3);
    FL_ASSERT(same_schedule(&a, &b));
    char *ta, *tb;
    FL_REQUIRE_EQ(fl_soak_render(p, &a, NULL, NULL, &ta), 0);
    FL_REQUIRE_EQ(fl_soak_render(p, &b, NULL, NULL, &tb), 0);
    FL_ASSERT_STREQ(ta, tb);
    free(ta);
    free(tb);
    fl_soak_schedule_free(&b);
    /* every other seed of 20 draws another schedule */
    for (uint64_t seed = 0; seed < 20; seed++) {
        if (seed == 42)
            continue;
        FL_REQUIRE_EQ(fl_soak_draw(p, seed, &b), 0);
        FL_ASSERT_MSG(!same_schedule(&a, &b), "seed %" PRIu64 " drew seed 42's schedule", seed);
        fl_soak_schedule_free(&b);
    }
    /* iteration seeds: a function of (soak seed, iteration), all different */
    FL_ASSERT_EQ(fl_soak_iter_seed(7, 3), fl_soak_iter_seed(7, 3));
    FL_ASSERT_NE(fl_soak_iter_seed(7, 3), fl_soak_iter_seed(7, 4));
    FL_ASSERT_NE(fl_soak_iter_seed(7, 3), fl_soak_iter_seed(8, 3));
    fl_soak_schedule_free(&a);
    fl_soak_profile_free(p);
}

FL_TEST(soak, draw_respects_kinds_targets_and_bounds)
{
    struct fl_soak_profile *p = load(data("draw.yaml"));
    FL_REQUIRE_EQ(p->n_entries, 4);
    /* kill: [ps, worker] -> the job's tasks */
    FL_REQUIRE_EQ(p->entries[0].n_targets, 3);
    FL_ASSERT_STREQ(p->entries[0].targets[0], "'ps:0'");
    FL_ASSERT_STREQ(p->entries[0].targets[2], "'worker:1'");
    size_t counts[4] = {0};
    size_t total = 0;
    for (uint64_t seed = 1; seed <= 200; seed++) {
        struct fl_soak_schedule sc;
        FL_REQUIRE_EQ(fl_soak_draw(p, seed, &sc), 0);
        FL_ASSERT_LE(sc.n, p->max_faults);
        size_t pauses = 0, partitions = 0;
        for (size_t i = 0; i < sc.n; i++) {
            const struct fl_soak_fault *f = &sc.faults[i];
            const struct fl_soak_entry *e = &p->entries[f->entry];
            FL_ASSERT_GE(f->at_ms, 1000);
            FL_ASSERT_LT(f->at_ms, 10000);
            if (i)
                FL_ASSERT_LE(sc.faults[i - 1].at_ms, f->at_ms);
            if (e->n_targets)
                FL_ASSERT_LT(f->target, e->n_targets);
            if (e->has_for) {
                FL_ASSERT_GE(f->for_ms, e->for_min_ms);
                FL_ASSERT_LE(f->for_ms, e->for_max_ms);
            }
            pauses += f->entry == 1;
            partitions += f->entry == 3;
            counts[f->entry]++;
        }
        FL_ASSERT_GE(pauses, 2);
        FL_ASSERT_LE(pauses, 4);
        FL_ASSERT_EQ(partitions, 1);
        total += sc.n;
        /* the schedule is an ordinary scenario: its faults load, each of a
         * kind and target the profile allows */
        char *text, err[2048] = "";
        struct fl_scenario *s = NULL;
        FL_REQUIRE_EQ(fl_soak_render(p, &sc, NULL, NULL, &text), 0);
        int rc = fl_scenario_load_mem("drawn.yaml", text, strlen(text), &s, err, sizeof err);
        FL_REQUIRE_MSG(rc == 0, "%s\n%s", err, text);
        FL_ASSERT_EQ(s->seed, seed);
        FL_REQUIRE_EQ(s->n_faults, sc.n);
        for (size_t i = 0; i < s->n_faults; i++) {
            const struct fl_scn_fault *f = &s->faults[i];
            FL_ASSERT_EQ(f->trigger.kind, FL_SCN_TRIG_AT);
            FL_ASSERT_EQ(f->trigger.at_ms, sc.faults[i].at_ms);
            static const enum fl_scn_action_kind kinds[] = {FL_SCN_ACT_KILL, FL_SCN_ACT_PAUSE,
                                                            FL_SCN_ACT_DISK, FL_SCN_ACT_PARTITION};
            FL_ASSERT_EQ(f->action.kind, kinds[sc.faults[i].entry]);
            if (f->action.kind == FL_SCN_ACT_KILL)
                FL_ASSERT_EQ(f->action.target.kind, FL_SCN_TGT_TASK);
            if (f->action.kind == FL_SCN_ACT_PAUSE)
                FL_ASSERT(f->action.target.host == 0 || f->action.target.host == 2);
            if (f->action.kind == FL_SCN_ACT_DISK) {
                FL_ASSERT_EQ(f->action.target.host, 1);
                FL_ASSERT_EQ(f->action.disk.err, ENOSPC);
                FL_ASSERT_EQ(f->for_ms, 0);
            }
            if (f->action.kind == FL_SCN_ACT_PAUSE)
                FL_ASSERT_EQ(f->for_ms, 300);
        }
        fl_scenario_free(s);
        free(text);
        fl_soak_schedule_free(&sc);
    }
    /* mean interval 1s over 9s: about 9 kills per schedule; 30/m: about 4.5 */
    FL_ASSERT_GT(counts[0], 200 * 6);
    FL_ASSERT_LT(counts[0], 200 * 12);
    FL_ASSERT_GT(counts[2], 200 * 3);
    FL_ASSERT_LT(counts[2], 200 * 6);
    FL_ASSERT_GT(total, 0);
    fl_soak_profile_free(p);
}

FL_TEST(soak, render_keep_leaves_faults_out)
{
    struct fl_soak_profile *p = load(data("guilty.yaml"));
    struct fl_soak_schedule sc;
    FL_REQUIRE_EQ(fl_soak_draw(p, 5, &sc), 0);
    FL_REQUIRE_EQ(sc.n, 5);
    bool keep[5] = {false};
    for (size_t i = 0; i < 5; i++)
        keep[i] = sc.faults[i].entry == 2;
    char *text;
    FL_REQUIRE_EQ(fl_soak_render(p, &sc, keep, "# hdr\n", &text), 0);
    FL_ASSERT(strncmp(text, "# hdr\nname: soak-guilty\n", 24) == 0);
    FL_ASSERT(strstr(text, "soak:") == NULL);
    FL_ASSERT_CONTAINS(text, "kill: 'worker:1', signal: SIGTERM}");
    FL_ASSERT(strstr(text, "pause: ") == NULL);
    memset(keep, 0, sizeof keep);
    free(text);
    FL_REQUIRE_EQ(fl_soak_render(p, &sc, keep, NULL, &text), 0);
    FL_ASSERT_CONTAINS(text, "\nfaults: []\n");
    free(text);
    fl_soak_schedule_free(&sc);
    fl_soak_profile_free(p);
}

/* The minimizer on a predicate: fails iff faults 2 and 5 are both in. */
static int needs_2_and_5(void *ctx, const bool *keep)
{
    (*(int *)ctx)++;
    return keep[2] && keep[5];
}

FL_TEST(soak, minimize_keeps_exactly_the_needed_faults_within_budget)
{
    bool keep[9];
    int calls = 0;
    memset(keep, 1, sizeof keep);
    int rc = fl_soak_minimize(9, keep, 100, needs_2_and_5, &calls);
    FL_ASSERT_EQ(rc, calls);
    for (int i = 0; i < 9; i++)
        FL_ASSERT_MSG(keep[i] == (i == 2 || i == 5), "fault %d kept=%d", i, keep[i]);
    FL_ASSERT_LE(calls, 30);
    /* a budget of 2 stops after two runs, keeping a set that still fails */
    memset(keep, 1, sizeof keep);
    calls = 0;
    rc = fl_soak_minimize(9, keep, 2, needs_2_and_5, &calls);
    FL_ASSERT_EQ(rc, 2);
    FL_ASSERT_EQ(calls, 2);
    FL_ASSERT(keep[2] && keep[5]);
}

FL_TEST(soak, failure_class_ignores_numbers_not_what_failed)
{
    char a[256], b[256];
    fl_soak_failure_class("fail", "worker:1: exit: expected exit 0, observed killed by SIGTERM (s.yaml:15)",
                          a, sizeof a);
    FL_ASSERT_STREQ(a, "fail worker:1: exit");
    fl_soak_failure_class("fail", "timed out after 20.0 s; x", b, sizeof b);
    FL_ASSERT_STREQ(b, "fail timed out");
    fl_soak_failure_class("error", "host w0: clone failed after 12 ms", a, sizeof a);
    fl_soak_failure_class("error", "host w0: clone failed after 3 ms", b, sizeof b);
    FL_ASSERT_STREQ(a, b);
    /* a path holding the run's id: the same failure in every run */
    fl_soak_failure_class("error", "host a: corrupt: no file matches 'x*' in its workdir "
                          "(o/runs/20261121-203137-cfa4b2/fs/hosts/a/disk)", a, sizeof a);
    fl_soak_failure_class("error", "host a: corrupt: no file matches 'x*' in its workdir "
                          "(o/runs/20261121-203139-0e5dd1/fs/hosts/a/disk)", b, sizeof b);
    FL_ASSERT_STREQ(a, b);
    /* but not another host's */
    fl_soak_failure_class("error", "host b: corrupt: no file matches 'x*' in its workdir "
                          "(o/runs/20261121-203139-0e5dd1/fs/hosts/b/disk)", b, sizeof b);
    FL_ASSERT(strcmp(a, b) != 0);
}

FL_TEST(soak, load_invalid_profiles_report_exact_place_and_message)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", data("invalid"));
    FL_REQUIRE_EQ(chdir(dir), 0);
    DIR *d = opendir(".");
    FL_REQUIRE(d != NULL);
    int n = 0;
    for (struct dirent *de; (de = readdir(d));) {
        if (!strstr(de->d_name, ".yaml"))
            continue;
        char want[2048] = "", err[2048] = "", *nl;
        FILE *f = fopen(de->d_name, "r");
        FL_REQUIRE(f != NULL);
        if (!fgets(want, sizeof want, f))
            want[0] = 0;
        fclose(f);
        if ((nl = strchr(want, '\n')))
            *nl = 0;
        FL_REQUIRE_MSG(strncmp(want, "# expect: ", 10) == 0, "%s: no '# expect: ' line", de->d_name);
        struct fl_soak_profile *p = NULL;
        int rc = fl_soak_profile_load(de->d_name, &p, err, sizeof err);
        FL_ASSERT_MSG(rc == -EINVAL, "%s: rc %d", de->d_name, rc);
        FL_ASSERT(p == NULL);
        FL_ASSERT_STREQ(err, want + 10);
        n++;
    }
    closedir(d);
    FL_ASSERT_GE(n, 12);
}

FL_TEST(soak, profiles_in_scenarios_soak_load)
{
    const char *names[] = {"shell-relaunch.yaml", "psrt-robust-relaunch.yaml"};
    for (size_t i = 0; i < 2; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/scenarios/soak/%s", fl_test_root(), names[i]);
        struct fl_soak_profile *p = load(path);
        FL_ASSERT_GE(p->n_entries, 2);
        fl_soak_profile_free(p);
    }
}

/* ---- real soaks ---------------------------------------------------------- */

/* The one file in dir whose name ends with suffix (and not .min.yaml when
 * suffix is plain .yaml). */
static bool find_file(const char *dir, bool min, char *out, size_t len)
{
    DIR *d = opendir(dir);
    int found = 0;
    if (!d)
        return false;
    for (struct dirent *de; (de = readdir(d));) {
        bool is_min = strstr(de->d_name, ".min.yaml") != NULL;
        if (!strstr(de->d_name, ".yaml") || is_min != min)
            continue;
        snprintf(out, len, "%s/%s", dir, de->d_name);
        found++;
    }
    closedir(d);
    return found == 1;
}

static size_t count_lines_with(const char *text, const char *needle)
{
    size_t n = 0;
    for (const char *s = text; (s = strstr(s, needle)); s++)
        n++;
    return n;
}

FL_TEST_ROOT_T(soak, guilty_fault_kept_minimized_and_replayed, 240)
{
    fl_test_need_root();
    const char *t = fl_test_dir();
    char *out = NULL;
    int rc = fl_test_sh(&out, "%s soak %s --iterations 1 --seed 11 --out %s/o --db %s/fl.db 2>&1",
                        fl_test_bin("faultline"), data("guilty.yaml"), t, t);
    FL_ASSERT_EQ(rc, 1);
    FL_ASSERT_CONTAINS(out, "1 iteration in");
    FL_ASSERT_CONTAINS(out, "0 passed, 1 failed");
    FL_ASSERT_CONTAINS(out, "failure kept: ");
    FL_ASSERT_CONTAINS(out, "minimized:    ");
    free(out);
    char dir[4096], orig[4096], min[4096];
    snprintf(dir, sizeof dir, "%s/o/soak-failures", t);
    FL_REQUIRE(find_file(dir, false, orig, sizeof orig));
    FL_REQUIRE(find_file(dir, true, min, sizeof min));
    char *otext, *mtext;
    FL_REQUIRE_EQ(fl_read_file(orig, &otext, NULL), 0);
    FL_REQUIRE_EQ(fl_read_file(min, &mtext, NULL), 0);
    /* the original: all five drawn faults, the seed of iteration 0 */
    char seedline[64];
    snprintf(seedline, sizeof seedline, "\nseed: %" PRIu64 "\n", fl_soak_iter_seed(11, 0));
    FL_ASSERT_CONTAINS(otext, seedline);
    FL_ASSERT_EQ(count_lines_with(otext, "\n  - {at: "), 5);
    FL_ASSERT_CONTAINS(otext, "# replay: faultline run ");
    /* the minimum: just the guilty kill */
    FL_ASSERT_CONTAINS(mtext, seedline);
    FL_ASSERT_EQ(count_lines_with(mtext, "\n  - {at: "), 1);
    FL_ASSERT_CONTAINS(mtext, "kill: 'worker:1', signal: SIGTERM}");
    /* the run's seed is recorded with it */
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM runs WHERE seed = %" PRId64,
             (int64_t)fl_soak_iter_seed(11, 0));
    char db[4096];
    snprintf(db, sizeof db, "%s/fl.db", t);
    FL_ASSERT_GE(fl_test_db_int(db, sql), 2);
    /* faultline run of the minimized file fails the same way */
    rc = fl_test_sh(&out, "%s run %s --out %s/o --no-db -q 2>&1", fl_test_bin("faultline"), min, t);
    FL_ASSERT_EQ(rc, 1);
    FL_ASSERT_CONTAINS(out, "worker:1: exit: expected exit 0, observed killed by SIGTERM");
    free(out);
    free(otext);
    free(mtext);
}

FL_TEST_ROOT_T(soak, short_soak_of_robust_profile_passes, 120)
{
    fl_test_need_root();
    const char *t = fl_test_dir();
    char *out = NULL;
    int rc = fl_test_sh(&out, "%s soak %s/scenarios/soak/shell-relaunch.yaml --iterations 2 "
                        "--seed 3 --out %s/o --db %s/fl.db 2>&1",
                        fl_test_bin("faultline"), fl_test_root(), t, t);
    FL_ASSERT_EQ(rc, 0);
    FL_ASSERT_CONTAINS(out, "seed 3, 2 iterations");
    FL_ASSERT_CONTAINS(out, "soak: iteration 1 pass");
    FL_ASSERT_CONTAINS(out, "soak: iteration 2 pass");
    FL_ASSERT_CONTAINS(out, "2 iterations in");
    FL_ASSERT_CONTAINS(out, "2 passed, 0 failed");
    free(out);
    char db[4096];
    snprintf(db, sizeof db, "%s/fl.db", t);
    FL_ASSERT_EQ(fl_test_db_int(db, "SELECT count(*) FROM runs WHERE verdict = 'pass'"), 2);
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM runs WHERE seed = %" PRId64,
             (int64_t)fl_soak_iter_seed(3, 1));
    FL_ASSERT_EQ(fl_test_db_int(db, sql), 1);
    char dir[4096], f[4096];
    snprintf(dir, sizeof dir, "%s/o/soak-failures", t);
    FL_ASSERT(!find_file(dir, false, f, sizeof f));
}

FL_TEST(soak, cli_help_and_bad_options)
{
    char *out = NULL;
    FL_ASSERT_EQ(fl_test_sh(&out, "%s --help", fl_test_bin("faultline")), 0);
    FL_ASSERT_CONTAINS(out, "  soak PROFILE ");
    free(out);
    FL_ASSERT_EQ(fl_test_sh(&out, "%s soak --help", fl_test_bin("faultline")), 0);
    FL_ASSERT_CONTAINS(out, "--iterations N");
    FL_ASSERT_CONTAINS(out, "--duration D");
    FL_ASSERT_CONTAINS(out, "soak-failures");
    free(out);
    FL_ASSERT_EQ(fl_test_sh(&out, "%s soak %s --iterations 1 --duration 1m 2>&1",
                            fl_test_bin("faultline"), data("guilty.yaml")), 2);
    FL_ASSERT_CONTAINS(out, "not both");
    free(out);
    FL_ASSERT_EQ(fl_test_sh(&out, "%s soak %s 2>&1", fl_test_bin("faultline"),
                            data("invalid/unknown_target.yaml")), 2);
    FL_ASSERT_CONTAINS(out, "unknown_target.yaml:12:18: ");
    free(out);
}
