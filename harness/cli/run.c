/*
 * run.c: `faultline run SCENARIO|DIR...`: every variant (or those --variant
 * picks) of every scenario, --repeat times, each through the engine and
 * recorded; a verdict line per run as it ends (with the whole reason and the
 * faults that never fired under it), then the summary table (cut to fit a
 * terminal, whole with --wide), where each
 * failed or kept run's logs are, and the JUnit XML and HTML report when
 * asked.  Every file, filter and path is checked before the first run, so a
 * mistake is one usage error, not a failure of every run.
 */
#include "harness/cli/cli.h"
#include "harness/cli/common.h"
#include "harness/engine/engine.h"
#include "harness/record/recorder.h"
#include "harness/scenario/scenario.h"
#include "reports/report.h"
#include "reports/table.h"

#include <errno.h>
#include <inttypes.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char fl_cli_run_usage[] =
    "usage: faultline run SCENARIO|DIR... [OPTIONS]\n"
    "\n"
    "Runs every variant of every scenario (a DIR means every *.yaml and *.yml below it),\n"
    "prints one verdict line per run and a summary table, records everything.\n"
    "\n"
    "  --variant K=V       only variants where K is V (repeatable; a bare value works;\n"
    "                      over several files, in those that have K)\n"
    "  --seed N            seed for every random decision (default: the file's, else random)\n"
    "  --repeat N          run each variant N times (default 1)\n"
    "  --shard K/N         run only the K-th of N disjoint parts of the work: of the\n"
    "                      runs this command would make (every file, variant and\n"
    "                      repeat, in order), those numbered K, K+N, K+2N, ...; N\n"
    "                      invocations with K = 1..N (and the same --seed) make\n"
    "                      exactly the runs of one without --shard ('faultline runs\n"
    "                      merge' joins their databases)\n"
    "  --db PATH           results database (default OUT/faultline.db, OUT as --out)\n"
    "  --no-db             record nothing\n"
    "  --out DIR           where run directories go (default out; runs in DIR/runs)\n"
    "  --keep              keep each run's directory (disks, logs) even when it passes\n"
    "  --disk-fs           serve every host's disk through the faultline filesystem, as\n"
    "                      'disk: {fs: true}' on every host does (every program's syncs\n"
    "                      seen by unsynced: lose; every disk a little slower)\n"
    "  --junit FILE        also write JUnit XML\n"
    "  --html FILE         also write the HTML report with timelines of these runs\n"
    "                      (as 'faultline report' does; needs the database)\n"
    "  -q, --quiet         no progress line\n"
    "  --wide              print the summary table whole, no cell cut\n"
    "\n"
    "The summary table fits a terminal: its long columns are cut with '...' to its\n"
    "width ($COLUMNS, when set, says the width); to a file or pipe it is not narrowed\n"
    "(but EXPECTED, REASON and the like are cut at a maximum; the reproducer table's\n"
    "OBSERVED is whole). --wide cuts nothing; the database, the JUnit XML and the\n"
    "HTML report hold every text whole.  For a run that did not pass, the JUnit XML\n"
    "and the HTML report show where its logs are and the last lines of each failing\n"
    "task's log.\n"
    "\n"
    "Under a verdict line, 'reason:' gives a failure's reason whole when the line\n"
    "cut it, and 'note:' names each fault whose trigger never came, and why, and\n"
    "each fault that cannot reach a program it targets (a disk fault, a clock_offset\n"
    "with clock_via: libc or unsynced: lose on a static or Go binary, which no\n"
    "preload enters; clock faults reach every program by default).\n"
    "\n"
    "Exit status: 0 when every run passed, 1 when any failed or errored (or the\n"
    "JUnit XML or HTML report could not be written), 2 for a bad scenario file or\n"
    "option or a database that is damaged or cannot be written, 3 when results\n"
    "could not all be recorded (the verdicts printed stand; not with --no-db), 130\n"
    "when interrupted (cleanup still happens).\n";

/* --junit FILE is written after every run: a path that cannot be a file
 * (a directory, or below a file) is refused before the first one. */
static int check_junit_path(const char *path)
{
    char p[PATH_MAX];
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        fprintf(stderr, "faultline: --junit %s is a directory; give a file path\n", path);
        return -1;
    }
    snprintf(p, sizeof p, "%s", path);
    for (char *slash; (slash = strrchr(p, '/')) && slash > p;) {
        *slash = 0;
        if (stat(p, &st) == 0) {
            if (S_ISDIR(st.st_mode))
                return 0;
            fprintf(stderr, "faultline: --junit %s: %s is not a directory\n", path, p);
            return -1;
        }
    }
    return 0;
}

/* The --variant filters of n scenarios (filters may be NULL). */
static void free_filters(struct fl_scn_selector *filters, size_t n)
{
    for (size_t i = 0; filters && i < n; i++)
        fl_scn_selector_free(&filters[i]);
    free(filters);
}

int fl_cli_run(int argc, char **argv)
{
    struct fl_cli_opts c = {0};
    uint64_t repeat = 1, seed = 0, shard_k = 1, shard_n = 1;
    const char *db = NULL, *junit = NULL, *html = NULL;
    bool no_db = false, seed_set = false, quiet = false, disk_fs = false, wide = false;
    static const struct option opts[] = {
        {"variant", required_argument, 0, 'v'}, {"seed", required_argument, 0, 's'},
        {"repeat", required_argument, 0, 'r'},  {"db", required_argument, 0, 'd'},
        {"no-db", no_argument, 0, 'D'},         {"out", required_argument, 0, 'o'},
        {"keep", no_argument, 0, 'k'},          {"disk-fs", no_argument, 0, 'F'},
        {"junit", required_argument, 0, 'j'},   {"quiet", no_argument, 0, 'q'},
        {"html", required_argument, 0, 'h'},    {"wide", no_argument, 0, 'W'},
        {"shard", required_argument, 0, 'S'},   {0, 0, 0, 0}};
    int ch;
    optind = 1;
    /* Short options only where --help shows them (-q): the rest are long. */
    while ((ch = getopt_long(argc, argv, "q", opts, NULL)) != -1) {
        switch (ch) {
        case 'v':
            if (fl_cli_add_variant(&c, optarg) < 0)
                return 2;
            break;
        case 's':
            if (fl_cli_parse_seed("faultline", optarg, &seed) < 0)
                return 2;
            seed_set = true;
            break;
        case 'r':
            if (fl_cli_parse_count("faultline", "--repeat", optarg, &repeat) < 0)
                return 2;
            break;
        case 'd': db = optarg; break;
        case 'D': no_db = true; break;
        case 'o': c.out = optarg; break;
        case 'k': c.keep = true; break;
        case 'F': disk_fs = true; break;
        case 'j': junit = optarg; break;
        case 'h': html = optarg; break;
        case 'q': quiet = true; break;
        case 'W': wide = true; break;
        case 'S':
            if (fl_cli_parse_shard("faultline", optarg, &shard_k, &shard_n) < 0)
                return 2;
            break;
        default: fputs(fl_cli_run_usage, stderr); return 2;
        }
    }
    if (optind >= argc) {
        fputs(fl_cli_run_usage, stderr);
        return 2;
    }
    if (html && no_db) {
        fprintf(stderr, "faultline: --html reads the runs back from the database; drop --no-db\n");
        return 2;
    }
    struct fl_scenario **v;
    size_t n;
    if (fl_cli_load_scenarios(argc - optind, argv + optind, &v, &n) || n == 0) {
        fl_cli_free_scenarios(v, n);
        return 2;
    }
    for (size_t i = 0; i < n; i++)
        if (fl_cli_check_workdir(v[i], c.out) < 0) {
            fl_cli_free_scenarios(v, n);
            return 2;
        }
    /* variant filters, checked against every scenario before running any:
     * each applies to the files that have its key (or bare value); a file
     * without it runs all its variants; one that no file has is an error,
     * and so is a value its key does not have (a typo) */
    struct fl_scn_selector *filters = calloc(n, sizeof *filters);
    char err[2048], first[2048];
    int rc = 0;
    if (!filters) {
        fprintf(stderr, "faultline: out of memory\n");
        rc = 2;
    }
    for (int k = 0; !rc && k < c.nvariants; k++) {
        size_t applies = 0;
        first[0] = 0;
        for (size_t i = 0; !rc && i < n; i++) {
            int frc = fl_scn_variant_filter_add(v[i], &filters[i], c.variants[k], err, sizeof err);
            if (frc == -ENOENT && !first[0])
                snprintf(first, sizeof first, "%s: %s", v[i]->path, err);
            if (frc < 0 && (frc != -ENOENT || n == 1)) {
                fprintf(stderr, "faultline: %s: %s\n", v[i]->path, err);
                rc = 2;
            }
            applies += frc == 0;
        }
        if (!rc && !applies) {
            fprintf(stderr, "faultline: --variant %s applies to none of the %zu files (%s)\n",
                    c.variants[k], n, first);
            rc = 2;
        }
    }
    if (!rc && ((junit && check_junit_path(junit) < 0) || fl_cli_prepare_out(c.out) < 0))
        rc = 2;
    if (!rc && fl_engine_global_init(err, sizeof err) < 0) {
        fprintf(stderr, "faultline: %s\n", err);
        rc = 1;
    }
    struct fl_rec *rec = NULL;
    char dbbuf[4096];
    if (!db)
        db = fl_cli_default_db(c.out, dbbuf, sizeof dbbuf);
    if (!rc && !no_db && fl_cli_open_db("faultline", db, &rec) < 0)
        rc = 2;
    if (rc) {
        free_filters(filters, n);
        fl_cli_free_scenarios(v, n);
        return rc;
    }
    char bin[PATH_MAX], top[PATH_MAX], rev[64] = "";
    fl_cli_bin_dir(bin, sizeof bin);
    fl_cli_top_dir(top, sizeof top);
    if (fl_rec_git_revision(top, rev, sizeof rev) < 0)
        rev[0] = 0;
    struct fl_engine_opts eo = {.out_dir = c.out,
                                .bin_dir = bin,
                                .seed = seed,
                                .seed_set = seed_set,
                                .keep = c.keep,
                                .disk_fs = disk_fs,
                                .rec = rec,
                                .git_rev = rev[0] ? rev : NULL,
                                .progress = !quiet && isatty(2),
                                .shell_host = -1};
    struct fl_report_row *rows = NULL;
    struct fl_engine_result **results = NULL;
    char **vnames = NULL;
    size_t nrows = 0;
    int failed = 0;
    bool interrupted = false;
    uint64_t item = 0; /* the work's runs in order, every shard's (--shard) */
    for (size_t i = 0; i < n && !interrupted; i++) {
        struct fl_scenario *s = v[i];
        for (size_t var = 0; var < fl_scn_variant_count(s) && !interrupted; var++) {
            if (filters[i].n_terms && !fl_scn_selector_match(s, &filters[i], var))
                continue;
            for (uint64_t r = 0; r < repeat && !interrupted; r++) {
                if (item++ % shard_n != shard_k - 1)
                    continue; /* another shard's */
                /* an interrupt while the last run was torn down */
                if ((interrupted = fl_engine_take_interrupt()))
                    break;
                results = realloc(results, (nrows + 1) * sizeof *results);
                rows = realloc(rows, (nrows + 1) * sizeof *rows);
                vnames = realloc(vnames, (nrows + 1) * sizeof *vnames);
                struct fl_engine_result *res = results[nrows] = malloc(sizeof *res);
                char vn[FL_SCN_VARIANT_NAME_MAX];
                vnames[nrows] = strdup(s->n_dims ? fl_scn_variant_name(s, var, vn, sizeof vn) : "");
                if (!quiet && !isatty(2))
                    fprintf(stderr, "running %s%s%s ...\n", s->name, vnames[nrows][0] ? " " : "",
                            vnames[nrows]);
                fl_engine_run(s, var, &eo, res);
                interrupted = res->interrupted;
                if (strcmp(res->verdict, "pass"))
                    failed++;
                rows[nrows] = (struct fl_report_row){
                    .scenario = s->name,
                    .variant = vnames[nrows],
                    .expected = res->expected,
                    .observed = res->observed,
                    .verdict = res->verdict,
                    .duration_ms = res->duration_ms,
                    .reason = res->reason[0] ? res->reason : NULL,
                    .run_id = res->run_id,
                    .run_dir = strcmp(res->verdict, "pass") || c.keep ? res->run_dir : NULL,
                    .failing = res->failing[0] ? res->failing : NULL};
                fl_report_verdict_line(stdout, &rows[nrows]);
                /* the verdict line cuts a long reason; nothing else on the
                 * terminal says it whole */
                if (strcmp(res->verdict, "pass") &&
                    fl_report_text_width(res->reason) > FL_REPORT_LINE_REASON) {
                    char whole[sizeof res->reason + 16];
                    printf("  reason: %s\n",
                           fl_report_one_line(res->reason, 0, whole, sizeof whole));
                }
                /* a fault that never fired is not what the file asked for,
                 * even when the run passed (a misspelt event, a regex
                 * that matches no line) */
                for (const char *l = res->unfired; *l;) {
                    size_t k = strcspn(l, "\n");
                    printf("  note: %.*s\n", (int)k, l);
                    l += k + (l[k] == '\n');
                }
                /* a fault that could not reach its target (a static or Go
                 * program and a preload) */
                for (const char *l = res->notes; *l;) {
                    size_t k = strcspn(l, "\n");
                    printf("  note: %.*s\n", (int)k, l);
                    l += k + (l[k] == '\n');
                }
                fflush(stdout);
                nrows++;
            }
        }
    }
    if (!interrupted)
        interrupted = fl_engine_take_interrupt();
    printf("\n");
    fl_report_set_wide(wide);
    fl_report_summary(stdout, rows, nrows);
    if (shard_n > 1 && !interrupted)
        printf("shard %" PRIu64 "/%" PRIu64 ": %zu of the %" PRIu64 " runs of the whole work\n",
               shard_k, shard_n, nrows, item);
    for (size_t i = 0; i < nrows; i++)
        if (rows[i].run_dir)
            printf("logs of %s%s%s: %s/logs\n", rows[i].scenario, rows[i].variant[0] ? " " : "",
                   rows[i].variant, rows[i].run_dir);
    int jrc;
    if (junit && (jrc = fl_report_junit(junit, rows, nrows)) < 0) {
        fprintf(stderr, "faultline: writing JUnit XML to %s: %s\n", junit, strerror(-jrc));
        failed++;
    }
    if (html && rec) {
        const char **ids = calloc(nrows + 1, sizeof *ids);
        for (size_t i = 0; ids && i < nrows; i++)
            ids[i] = rows[i].run_id;
        struct fl_report_html_opts ho = {.run_ids = ids, .n_run_ids = nrows, .skip_missing = true};
        if (!ids || fl_report_html(fl_rec_db(rec), html, &ho, err, sizeof err) < 0) {
            fprintf(stderr, "faultline: HTML report: %s\n", ids ? err : "out of memory");
            failed++;
        } else {
            printf("report: %s\n", html);
        }
        free(ids);
    }
    bool lost = false;
    if (rec) {
        fl_rec_flush(rec);
        lost = fl_cli_record_lost("faultline", rec) < 0;
        fl_rec_close(rec);
    }
    free_filters(filters, n);
    for (size_t i = 0; i < nrows; i++) {
        free(vnames[i]);
        free(results[i]);
    }
    free(vnames);
    free(rows);
    free(results);
    fl_cli_free_scenarios(v, n);
    if (interrupted)
        return 130;
    if (lost)
        return FL_CLI_EXIT_UNRECORDED;
    return failed ? 1 : 0;
}
