/*
 * runs.c: `faultline runs`: the recorded runs (most recent first), their
 * verdict history (--history) or the scenarios whose verdict changed since
 * a revision (--changed), or one run's fault schedule (RUN --faults: the
 * faults of the scenario text the database kept of it, loaded here, each
 * with what the database says became of it), read from the results
 * database, which this command never creates; the tables are written by
 * reports/.
 */
#include "harness/cli/cli.h"
#include "harness/cli/common.h"
#include "harness/base/suggest.h"
#include "harness/engine/engine.h"
#include "harness/load/load.h"
#include "harness/record/recorded.h"
#include "harness/record/recorder.h"
#include "harness/scenario/scenario.h"
#include "reports/report.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char fl_cli_runs_usage[] =
    "usage: faultline runs [--db PATH] [--scenario NAME] [--variant V] [--verdict V]\n"
    "                      [--limit N] [--since REV] [--history] [--changed REV]\n"
    "       faultline runs RUN_ID --faults [--db PATH]\n"
    "\n"
    "Lists recorded runs, most recent first.\n"
    "  --db PATH        results database (default out/faultline.db)\n"
    "  --scenario NAME  only runs of this scenario (its exact name)\n"
    "  --variant V      only runs of this variant, the exact recorded string as\n"
    "                   'faultline runs' shows it (e.g. protocol=legacy,threads=pool;\n"
    "                   'default' for a scenario without variants)\n"
    "  --verdict V      only runs with this verdict: pass, fail, error or running\n"
    "                   (any case: PASS as shown works too)\n"
    "  --limit N        at most N runs (default 20; -1 for all)\n"
    "  --since REV      only runs since the first run at git revision REV\n"
    "  --history        verdict history per scenario and variant (how often it\n"
    "                   fails); takes --scenario and --variant\n"
    "  --changed REV    scenarios whose verdict changed since git revision REV\n"
    "  RUN_ID --faults  the run's fault schedule: each fault of its scenario (for a\n"
    "                   soak iteration, the faults it drew) with its trigger, when\n"
    "                   it was applied and healed, or why it never fired\n"
    "REV: anything git names in this checkout (HEAD~3, a branch, a full hash), or\n"
    "the first digits of a recorded revision (runs.git_rev, 12 hex digits).\n"
    "Runs on an uncommitted tree are recorded at REV-dirty: they are not REV's\n"
    "(--changed HEAD compares them with the commit's runs); REV-dirty names them.\n";

/* --scenario NAME that no run of the database has: says so on stderr, with
 * the closest recorded name (a typo otherwise reads "no recorded run
 * matches", as if the scenario had simply not run). */
static void hint_scenario(sqlite3 *db, const char *path, const char *name)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, "SELECT DISTINCT scenario FROM runs", -1, &st, NULL) != SQLITE_OK)
        return;
    char **names = NULL;
    size_t n = 0;
    bool found = false;
    while (!found && sqlite3_step(st) == SQLITE_ROW) {
        const char *sc = (const char *)sqlite3_column_text(st, 0);
        if (!sc)
            continue;
        found = !strcmp(sc, name);
        char **more = realloc(names, (n + 1) * sizeof *names);
        if (!more)
            break;
        names = more;
        names[n] = strdup(sc);
        n += names[n] != NULL;
    }
    sqlite3_finalize(st);
    if (!found) {
        char msg[512];
        snprintf(msg, sizeof msg, "faultline: no run of scenario '%s' is recorded in %s", name,
                 path);
        fl_suggest_append(msg, sizeof msg, name, (const char *const *)names, n);
        fprintf(stderr, "%s\n", msg);
    }
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

/* The planned faults of a recorded run: its kept scenario text, loaded. */
static int run_faults(struct fl_rec *rec, const char *run_id)
{
    struct fl_rec_recorded r;
    struct fl_scenario *s = NULL;
    struct fl_report_planned_fault *plan = NULL;
    char err[4096], (*texts)[2][1024] = NULL;
    size_t n = 0, v = 0;
    if (fl_rec_recorded_get(rec, run_id, &r, err, sizeof err) < 0) {
        fprintf(stderr, "faultline runs: %s\n", err);
        return 2;
    }
    if (!r.text)
        fprintf(stderr,
                "faultline runs: the database does not hold the scenario text of run %s "
                "(recorded before faultline kept it): only the faults applied are listed\n",
                run_id);
    else if (fl_scenario_load_mem(r.scenario_file ? r.scenario_file : "recorded.yaml", r.text,
                                  r.text_len, &s, err, sizeof err) < 0)
        fprintf(stderr,
                "faultline runs: the recorded scenario of run %s does not load (%s): only the "
                "faults applied are listed\n",
                run_id, err);
    else if (fl_cli_find_variant(s, r.variant, &v) < 0)
        fprintf(stderr,
                "faultline runs: the recorded scenario of run %s has no variant '%s': only the "
                "faults applied are listed\n",
                run_id, r.variant ? r.variant : "default");
    else if (s->n_faults) {
        plan = calloc(s->n_faults, sizeof *plan);
        texts = calloc(s->n_faults, sizeof *texts);
        if (!plan || !texts) {
            fprintf(stderr, "faultline runs: out of memory\n");
            free(plan);
            free(texts);
            fl_scenario_free(s);
            fl_rec_recorded_free(&r);
            return 2;
        }
        for (size_t i = 0; i < s->n_faults; i++) {
            const struct fl_scn_fault *f = &s->faults[i];
            if (!fl_scn_fault_applies(s, f, v))
                continue;
            const struct fl_scn_trigger *t = &f->trigger;
            fl_engine_fault_text(s, i, texts[n][0], sizeof texts[n][0], texts[n][1],
                                 sizeof texts[n][1]);
            plan[n] = (struct fl_report_planned_fault){
                .idx = (int)i + 1,
                .trigger = texts[n][0],
                .what = texts[n][1],
                .at_ms = t->kind == FL_SCN_TRIG_AT ? t->at_ms : -1,
                .event = t->kind == FL_SCN_TRIG_EVENT ? t->event : NULL,
                .count = t->count,
                .host =
                    t->kind == FL_SCN_TRIG_EVENT && t->host >= 0 ? s->hosts[t->host].name : NULL,
                .filtered = t->job >= 0 || t->n_where > 0};
            n++;
        }
    }
    int rc = fl_report_faults(fl_rec_db(rec), stdout, run_id, plan, n);
    free(plan);
    free(texts);
    if (s)
        fl_scenario_free(s);
    fl_rec_recorded_free(&r);
    return rc < 0 ? 2 : 0;
}

int fl_cli_runs(int argc, char **argv)
{
    const char *db = NULL;
    struct fl_report_runs_opts ro = {0};
    bool history = false, faults = false;
    const char *changed = NULL;
    static const struct option opts[] = {
        {"db", required_argument, 0, 'd'},      {"scenario", required_argument, 0, 's'},
        {"variant", required_argument, 0, 'v'}, {"verdict", required_argument, 0, 'V'},
        {"limit", required_argument, 0, 'l'},   {"since", required_argument, 0, 'S'},
        {"history", no_argument, 0, 'H'},       {"changed", required_argument, 0, 'C'},
        {"faults", no_argument, 0, 'F'},        {0, 0, 0, 0}};
    int ch;
    optind = 1;
    while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (ch) {
        case 'd': db = optarg; break;
        case 's': ro.scenario = optarg; break;
        case 'v': ro.variant = optarg; break;
        case 'V': /* as 'faultline runs' shows it (PASS) or as stored (pass) */
            for (char *q = optarg; *q; q++)
                *q = (char)tolower((unsigned char)*q);
            ro.verdict = optarg;
            break;
        case 'l':
            if (fl_cli_parse_limit("faultline", "--limit", optarg, &ro.limit) < 0)
                return 2;
            break;
        case 'S': ro.since_rev = optarg; break;
        case 'H': history = true; break;
        case 'C': changed = optarg; break;
        case 'F': faults = true; break;
        default: fputs(fl_cli_runs_usage, stderr); return 2;
        }
    }
    const char *run_id = optind < argc ? argv[optind] : NULL;
    if (argc - optind > 1 || (run_id && !faults) || (faults && !run_id)) {
        fprintf(stderr, "faultline runs: %s\n",
                argc - optind > 1 ? "one RUN_ID at most"
                : run_id          ? "a RUN_ID goes with --faults (faultline runs RUN_ID --faults)"
                         : "--faults lists one run's faults: faultline runs RUN_ID --faults");
        fputs(fl_cli_runs_usage, stderr);
        return 2;
    }
    if (faults) {
        struct fl_rec *rec;
        if (fl_cli_open_db_to_read("faultline", db, &rec) < 0)
            return 2;
        int rc = run_faults(rec, run_id);
        fl_rec_close(rec);
        return rc;
    }
    /* A revision as typed ("HEAD~3", a full hash) -> as recorded (12 digits). */
    char top[PATH_MAX], since_rev[64], changed_rev[64];
    fl_cli_top_dir(top, sizeof top);
    if (ro.since_rev) {
        fl_rec_git_resolve(top, ro.since_rev, since_rev, sizeof since_rev);
        ro.since_rev = since_rev;
    }
    if (changed) {
        fl_rec_git_resolve(top, changed, changed_rev, sizeof changed_rev);
        changed = changed_rev;
    }
    struct fl_rec *rec;
    if (fl_cli_open_db_to_read("faultline", db, &rec) < 0)
        return 2;
    if (ro.scenario)
        hint_scenario(fl_rec_db(rec), fl_rec_path(rec), ro.scenario);
    int rc;
    if (history) {
        struct fl_report_history_opts ho = {.scenario = ro.scenario, .variant = ro.variant};
        rc = fl_report_history(fl_rec_db(rec), stdout, &ho);
    } else if (changed) {
        rc = fl_report_changed(fl_rec_db(rec), stdout, changed);
        if (rc == -ENOENT)
            fprintf(stderr, "faultline: no run recorded at revision %s\n", changed);
    } else {
        rc = fl_report_runs(fl_rec_db(rec), stdout, &ro);
        if (rc == -ENOENT)
            fprintf(stderr, "faultline: no run recorded at revision %s\n", ro.since_rev);
        else if (rc == -EINVAL)
            fprintf(stderr, "faultline: --verdict is one of pass, fail, error, running\n");
    }
    fl_rec_close(rec);
    return rc < 0 ? 2 : 0;
}
