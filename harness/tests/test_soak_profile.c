/*
 * test_soak_profile.c: soak profiles (harness/soak/profile.c, draw.c): the
 * loader's errors (data/soak/invalid/, first line the exact message), the
 * profiles in scenarios/soak/ loading, and schedules drawn from a seed:
 * deterministic, within the profile's kinds, targets and bounds, rendered as
 * ordinary scenarios (keep: leaves faults out); entries with after: drawn at
 * the N-th event of their range, rendered as after: triggers.
 */
#include "harness/load/load.h"
#include "harness/tests/fl_test.h"
#include "harness/soak/soak.h"
#include "harness/tests/scenario_fixture.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

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
            a->faults[i].nth != b->faults[i].nth || a->faults[i].target != b->faults[i].target ||
            a->faults[i].for_ms != b->faults[i].for_ms)
            return false;
    return true;
}

FL_TEST(soak_profile, draw_same_seed_same_schedule_other_seeds_differ)
{
    struct fl_soak_profile *p = load(soak_data("draw.yaml"));
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

FL_TEST(soak_profile, draw_respects_kinds_targets_and_bounds)
{
    struct fl_soak_profile *p = load(soak_data("draw.yaml"));
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

/* after: {event, host, job, where, count: [MIN, MAX]}: each fault fires on
 * the N-th event, N in the range (every: N events on average, or count:
 * faults); the file it renders is a scenario with those after: triggers;
 * no duration is needed when no entry draws times. */
FL_TEST(soak_profile, draw_after_fires_at_the_nth_event_of_its_range)
{
    struct fl_soak_profile *p = load(soak_data("after.yaml"));
    FL_REQUIRE_EQ(p->n_entries, 3);
    FL_ASSERT_EQ(p->duration_ms, 0);
    FL_ASSERT_STREQ(p->entries[0].after, "event: train.step, job: worker");
    FL_ASSERT_EQ(p->entries[0].after_min, 5);
    FL_ASSERT_EQ(p->entries[0].after_max, 60);
    FL_ASSERT_EQ(p->entries[0].every_ms, 10);
    FL_ASSERT_STREQ(p->entries[2].after, "event: save.begin, where: {step: 20}");
    size_t kills = 0;
    for (uint64_t seed = 1; seed <= 200; seed++) {
        struct fl_soak_schedule sc, again;
        FL_REQUIRE_EQ(fl_soak_draw(p, seed, &sc), 0);
        FL_REQUIRE_EQ(fl_soak_draw(p, seed, &again), 0);
        FL_ASSERT(same_schedule(&sc, &again));
        fl_soak_schedule_free(&again);
        size_t pauses = 0, disks = 0;
        for (size_t i = 0; i < sc.n; i++) {
            const struct fl_soak_fault *f = &sc.faults[i];
            const struct fl_soak_entry *e = &p->entries[f->entry];
            FL_ASSERT_EQ(f->at_ms, 0);
            FL_ASSERT_GE(f->nth, e->after_min);
            FL_ASSERT_LE(f->nth, e->after_max);
            FL_ASSERT_GE(f->place, 0);
            FL_ASSERT_LT(f->place, 1);
            if (i)
                FL_ASSERT_LE(sc.faults[i - 1].place, f->place);
            kills += f->entry == 0;
            pauses += f->entry == 1;
            disks += f->entry == 2;
        }
        FL_ASSERT_GE(pauses, 2);
        FL_ASSERT_LE(pauses, 4);
        FL_ASSERT_EQ(disks, 1);
        char *text, err[2048] = "";
        struct fl_scenario *s = NULL;
        FL_REQUIRE_EQ(fl_soak_render(p, &sc, NULL, NULL, &text), 0);
        FL_ASSERT(strstr(text, "at: ") == NULL);
        int rc = fl_scenario_load_mem("drawn.yaml", text, strlen(text), &s, err, sizeof err);
        FL_REQUIRE_MSG(rc == 0, "%s\n%s", err, text);
        FL_REQUIRE_EQ(s->n_faults, sc.n);
        for (size_t i = 0; i < s->n_faults; i++) {
            const struct fl_scn_trigger *t = &s->faults[i].trigger;
            FL_ASSERT_EQ(t->kind, FL_SCN_TRIG_EVENT);
            FL_ASSERT_EQ(t->count, (unsigned)sc.faults[i].nth);
            if (sc.faults[i].entry == 0) {
                FL_ASSERT_STREQ(t->event, "train.step");
                FL_ASSERT_EQ(t->job, fl_scn_job_find(s, "worker"));
            } else if (sc.faults[i].entry == 1) {
                FL_ASSERT_STREQ(t->event, "save.done");
                FL_ASSERT_EQ(t->host, 1);
            } else {
                FL_ASSERT_STREQ(t->event, "save.begin");
                FL_REQUIRE_EQ(t->n_where, 1);
                FL_ASSERT_STREQ(t->where[0].value, "20");
                FL_ASSERT_EQ(t->count, 7);
            }
        }
        fl_scenario_free(s);
        free(text);
        fl_soak_schedule_free(&sc);
    }
    /* a mean of one in 10 of the 56 numbers: about 5.6 kills a schedule */
    FL_ASSERT_GT(kills, 200 * 4);
    FL_ASSERT_LT(kills, 200 * 7);
    fl_soak_profile_free(p);
}

FL_TEST(soak_profile, render_keep_leaves_faults_out)
{
    struct fl_soak_profile *p = load(soak_data("guilty.yaml"));
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

FL_TEST(soak_profile, load_invalid_profiles_report_exact_place_and_message)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", soak_data("invalid"));
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
        FL_REQUIRE_MSG(strncmp(want, "# expect: ", 10) == 0, "%s: no '# expect: ' line",
                       de->d_name);
        struct fl_soak_profile *p = NULL;
        int rc = fl_soak_profile_load(de->d_name, &p, err, sizeof err);
        FL_ASSERT_MSG(rc == -EINVAL, "%s: rc %d", de->d_name, rc);
        FL_ASSERT(p == NULL);
        FL_ASSERT_STREQ(err, expand_kinds(want + 10));
        n++;
    }
    closedir(d);
    FL_ASSERT_GE(n, 12);
}

FL_TEST(soak_profile, profiles_in_scenarios_soak_load)
{
    const char *names[] = {"shell-relaunch.yaml", "psrt-robust-relaunch.yaml",
                           "psrt-robust-harsh.yaml"};
    for (size_t i = 0; i < 3; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/scenarios/soak/%s", fl_test_root(), names[i]);
        struct fl_soak_profile *p = load(path);
        FL_ASSERT_GE(p->n_entries, 2);
        fl_soak_profile_free(p);
    }
}

FL_TEST(soak_profile, draw_faults_aimed_by_their_event)
{
    struct fl_soak_profile *p = load(soak_data("event_values.yaml"));
    FL_REQUIRE_EQ(p->n_entries, 2);
    size_t aimed = 0;
    for (uint64_t seed = 1; seed <= 30; seed++) {
        struct fl_soak_schedule sc;
        FL_REQUIRE_EQ(fl_soak_draw(p, seed, &sc), 0);
        char *text, err[2048] = "";
        struct fl_scenario *s = NULL;
        FL_REQUIRE_EQ(fl_soak_render(p, &sc, NULL, NULL, &text), 0);
        int rc = fl_scenario_load_mem("drawn.yaml", text, strlen(text), &s, err, sizeof err);
        FL_REQUIRE_MSG(rc == 0, "%s\n%s", err, text);
        FL_REQUIRE_EQ(s->n_faults, sc.n);
        for (size_t i = 0; i < s->n_faults; i++) {
            const struct fl_scn_fault *f = &s->faults[i];
            FL_ASSERT_EQ(f->trigger.kind, FL_SCN_TRIG_EVENT);
            if (!f->from_event)
                continue;
            aimed++;
            /* rendered quoted, as a value (a bare {event.node} is a YAML mapping) */
            FL_ASSERT_MSG(!strcmp(f->as_written, "'{event.node}'") ||
                              !strcmp(f->as_written, "[['{event.node}'], rest]"),
                          "%s", f->as_written);
        }
        fl_scenario_free(s);
        free(text);
        fl_soak_schedule_free(&sc);
    }
    FL_ASSERT_GE(aimed, 30);
    fl_soak_profile_free(p);
}
