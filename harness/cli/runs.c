/*
 * runs.c: `faultline runs`: the recorded runs (most recent first), their
 * verdict history (--history) or the scenarios whose verdict changed since
 * a revision (--changed), or one run's fault schedule (RUN --faults: the
 * faults of the scenario text the database kept of it, loaded here, each
 * with what the database says became of it), read from the results
 * database, which this command never creates; the tables are written by
 * reports/.  `faultline runs merge OUT IN...` is the one that writes: it
 * copies the runs of other databases into OUT (harness/record/merge.c),
 * one transaction an input, and says what each added.
 */
#include "harness/cli/cli.h"
#include "harness/cli/common.h"
#include "harness/base/suggest.h"
#include "harness/engine/engine.h"
#include "harness/load/load.h"
#include "harness/record/merge.h"
#include "harness/record/recorded.h"
#include "harness/record/recorder.h"
#include "harness/scenario/scenario.h"
#include "harness/sys/rundir.h"
#include "reports/report.h"

#include <ctype.h>
#include <errno.h>
#include <sys/stat.h>
#include <libgen.h>
#include <dirent.h>
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
    "       faultline runs merge OUT.db IN.db...\n"
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
    "(--changed HEAD compares them with the commit's runs); REV-dirty names them.\n"
    "\n"
    "merge OUT.db IN.db...: copies every run of each IN database (shards of a\n"
    "suite or a soak, other machines') into OUT, created if missing, so that\n"
    "runs, --history, --changed and 'faultline report --db OUT' see them all.\n"
    "A run keeps its run id, its scenario's text and its rows in every table.\n"
    "A run OUT holds already adds nothing when it is the same (every column of\n"
    "its runs row, as many rows in each table): merging twice changes nothing.\n"
    "Otherwise it is a conflict: the run id and what differs are said, nothing\n"
    "of that IN is written (each IN is one transaction), the other INs are\n"
    "merged, and the exit status is 2.  A run still 'running' in an IN (going\n"
    "on, or its harness killed: 'faultline gc' marks those) is left out, said.\n"
    "An IN at an older schema is migrated in memory (its file is not written);\n"
    "a newer one, a missing or foreign file stop the merge before any write.\n"
    "The evidence travels too: from each IN's directory (a shard's --out), its\n"
    "soak's kept failures (soak-failures/*.yaml, 'faultline run FILE' replays\n"
    "one) and, of each run that did not pass, its logs, scenario.yaml, etc-hosts\n"
    "and state (runs/RUN/), copied beside OUT; OUT's log paths name the copies.\n"
    "Exit status: 0 merged, 2 bad usage, an IN that cannot be read, a conflict.\n";

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

/* Copies the regular files of directory from into to (made): how many, or
 * -errno. */
static int copy_files(const char *from, const char *to)
{
    DIR *d = opendir(from);
    if (!d)
        return -errno;
    int n = 0, rc = fl_mkdir_p(to, 0755);
    struct dirent *e;
    while (rc == 0 && (e = readdir(d))) {
        char a[PATH_MAX], b[PATH_MAX];
        struct stat st;
        if ((size_t)snprintf(a, sizeof a, "%s/%s", from, e->d_name) >= sizeof a ||
            (size_t)snprintf(b, sizeof b, "%s/%s", to, e->d_name) >= sizeof b ||
            lstat(a, &st) < 0 || !S_ISREG(st.st_mode))
            continue;
        if ((rc = fl_copy_file(a, b, st.st_mode & 0777)) == 0)
            n++;
    }
    closedir(d);
    return rc < 0 ? rc : n;
}

/* The evidence that travels with a merged database: from the directory of
 * in_path (a shard's --out), its soak's kept failures (soak-failures/:
 * replayable scenario files, minimized) and, of each run in it that did
 * not pass, what `faultline gc` keeps of a run (logs/, scenario.yaml,
 * etc-hosts, state), copied beside out_path; the merged processes.log_path
 * of those runs then names the copies.  Said on stdout; 0, or -1 after
 * saying what could not be copied. */
static int collect_evidence(const char *prog, const char *in_path, struct fl_rec *rec)
{
    char in_dir[PATH_MAX], out_dir[PATH_MAX], path[PATH_MAX], to[PATH_MAX];
    snprintf(path, sizeof path, "%s", in_path);
    if (!realpath(dirname(path), in_dir))
        return 0;
    snprintf(path, sizeof path, "%s", fl_rec_path(rec));
    if (!realpath(dirname(path), out_dir) || !strcmp(in_dir, out_dir))
        return 0;
    int failures = 0, runs = 0, bad = 0;
    snprintf(path, sizeof path, "%s/soak-failures", in_dir);
    snprintf(to, sizeof to, "%s/soak-failures", out_dir);
    struct stat st;
    if (stat(path, &st) == 0 && (failures = copy_files(path, to)) < 0) {
        fprintf(stderr, "%s: copying %s to %s: %s\n", prog, path, to, strerror(-failures));
        bad++;
    }
    sqlite3 *db = fl_rec_db(rec);
    sqlite3_stmt *q = NULL, *u = NULL;
    snprintf(path, sizeof path, "%s/runs", in_dir);
    DIR *d = opendir(path);
    if (d && (sqlite3_prepare_v2(db, "SELECT verdict FROM runs WHERE run_id = ?", -1, &q, NULL) ||
              sqlite3_prepare_v2(db,
                                 "UPDATE processes SET log_path = ?1 || substr(log_path, "
                                 "instr(log_path, '/runs/' || ?2 || '/')) WHERE run = (SELECT id "
                                 "FROM runs WHERE run_id = ?2) AND instr(log_path, '/runs/' || ?2 "
                                 "|| '/') > 0",
                                 -1, &u, NULL))) {
        fprintf(stderr, "%s: %s\n", prog, sqlite3_errmsg(db));
        bad++;
        closedir(d);
        d = NULL;
    }
    struct dirent *e;
    static const char *const files[] = {"scenario.yaml", "etc-hosts", "state"};
    while (d && (e = readdir(d))) {
        sqlite3_reset(q);
        sqlite3_bind_text(q, 1, e->d_name, -1, SQLITE_TRANSIENT);
        if (e->d_name[0] == '.' || sqlite3_step(q) != SQLITE_ROW ||
            !strcmp((const char *)sqlite3_column_text(q, 0), "pass"))
            continue;
        char from[PATH_MAX], dest[PATH_MAX];
        snprintf(from, sizeof from, "%s/runs/%s", in_dir, e->d_name);
        snprintf(dest, sizeof dest, "%s/runs/%s", out_dir, e->d_name);
        snprintf(path, sizeof path, "%s/logs", from);
        snprintf(to, sizeof to, "%s/logs", dest);
        int rc = copy_files(path, to);
        for (size_t i = 0; rc >= 0 && i < sizeof files / sizeof *files; i++) {
            snprintf(path, sizeof path, "%s/%s", from, files[i]);
            snprintf(to, sizeof to, "%s/%s", dest, files[i]);
            if (stat(path, &st) == 0)
                rc = fl_copy_file(path, to, 0644);
        }
        if (rc < 0) {
            fprintf(stderr, "%s: copying %s to %s: %s\n", prog, from, dest, strerror(-rc));
            bad++;
            continue;
        }
        sqlite3_reset(u);
        sqlite3_bind_text(u, 1, out_dir, -1, SQLITE_TRANSIENT);
        sqlite3_bind_text(u, 2, e->d_name, -1, SQLITE_TRANSIENT);
        sqlite3_step(u);
        runs++;
    }
    if (d)
        closedir(d);
    sqlite3_finalize(q);
    sqlite3_finalize(u);
    if (failures > 0 || runs > 0)
        printf("%s: %d kept soak failure file%s and the logs of %d run%s that did not pass, "
               "copied to %s\n",
               in_path, failures > 0 ? failures : 0, failures == 1 ? "" : "s", runs,
               runs == 1 ? "" : "s", out_dir);
    return bad ? -1 : 0;
}

/* `faultline runs merge OUT IN...` (argv[0] is "merge"). */
static int runs_merge(int argc, char **argv)
{
    static const char prog[] = "faultline runs merge";
    static const struct option opts[] = {{0, 0, 0, 0}};
    argv[0] = (char *)prog; /* getopt's messages: "faultline runs merge: ..." */
    optind = 1;
    if (getopt_long(argc, argv, "", opts, NULL) != -1 || argc - optind < 2) {
        if (argc - optind < 2)
            fprintf(stderr, "%s: an output database and at least one input: %s OUT.db IN.db...\n",
                    prog, prog);
        fputs(fl_cli_runs_usage, stderr);
        return 2;
    }
    struct fl_rec *rec;
    char err[4096];
    /* every input readable and of a schema this faultline knows, before
     * anything is written (or the output created) */
    int bad = 0, version;
    for (int i = optind + 1; i < argc; i++)
        if (fl_rec_merge_check(argv[optind], argv[i], &version, err, sizeof err) < 0) {
            fprintf(stderr, "%s: %s\n", prog, err);
            bad++;
        }
    if (bad) {
        fprintf(stderr, "%s: nothing merged\n", prog);
        return 2;
    }
    if (fl_cli_open_db(prog, argv[optind], &rec) < 0)
        return 2;
    int status = 0;
    for (int i = optind + 1; i < argc; i++) {
        struct fl_rec_merge_stats st;
        int rc = fl_rec_merge(rec, argv[i], &st, err, sizeof err);
        if (rc == -EEXIST) {
            fprintf(stderr, "%s: %s: conflict: %s; nothing of %s merged\n", prog, argv[i], err,
                    argv[i]);
            status = 2;
            continue;
        }
        if (rc < 0) {
            fprintf(stderr, "%s: %s: %s; nothing of %s merged\n", prog, argv[i], err, argv[i]);
            status = 2;
            continue;
        }
        printf("%s: %zu run%s added, %zu already in %s", argv[i], st.runs_added,
               st.runs_added == 1 ? "" : "s", st.runs_present, fl_rec_path(rec));
        if (st.in_version < FL_REC_SCHEMA_VERSION)
            printf(" (schema version %d, migrated in memory)", st.in_version);
        printf("\n");
        if (collect_evidence(prog, argv[i], rec) < 0)
            status = 2;
        if (st.runs_running)
            fprintf(stderr,
                    "%s: note: %s: %zu run%s still 'running' (%s%s) not merged: going on, or "
                    "its harness was killed ('faultline gc' where it ran marks those)\n",
                    prog, argv[i], st.runs_running, st.runs_running == 1 ? "" : "s", st.running_id,
                    st.runs_running > 1 ? ", ..." : "");
    }
    fl_rec_merge_done(rec);
    fl_rec_close(rec);
    return status;
}

int fl_cli_runs(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "merge"))
        return runs_merge(argc - 1, argv + 1);

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
