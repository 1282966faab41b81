/*
 * main.c: the faultline command line.  Parses the subcommand and its
 * options, prints help, and hands the work to the engine (run, shell), the
 * loader (validate, list), gc.c (gc), exec.c (exec), the recorder and
 * reports (runs).  Exit status: 0 all runs passed / command succeeded,
 * 1 a run failed or errored, 2 bad usage or a bad scenario file, 130 when
 * interrupted.
 */
#include "harness/cli/cli.h"
#include "harness/cli/common.h"
#include "harness/engine/engine.h"
#include "harness/record/recorder.h"
#include "harness/sys/rundir.h"
#include "harness/scenario/scenario.h"
#include "harness/soak/soak.h"
#include "harness/base/suggest.h"
#include "reports/report.h"
#include "reports/table.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

static const char *usage_main =
    "usage: faultline COMMAND [OPTIONS] ...\n"
    "\n"
    "Runs multi-host ps/worker scenarios on one machine: each host is a set of\n"
    "namespaces with its own address and disk; faults are injected from the\n"
    "scenario file; every outcome is recorded in SQLite.\n"
    "\n"
    "Commands:\n"
    "  run SCENARIO|DIR...      run scenarios (every variant), print verdicts and a table\n"
    "  validate SCENARIO|DIR... check scenario files without running anything\n"
    "  list SCENARIO|DIR...     list scenarios and their variants\n"
    "  soak PROFILE             randomized fault schedules; failures kept, minimized\n"
    "  shell SCENARIO HOST      bring the hosts up and open a shell on HOST\n"
    "  exec RUN HOST -- CMD...  run a command on a host of a running run\n"
    "  gc                       remove what killed runs left behind\n"
    "  runs                     list recorded runs (also --history, --changed REV)\n"
    "  report                   write an HTML report with timelines of recorded runs\n"
    "  emit [--sync] KIND [K=V...]  send an event from a process under faultline\n"
    "  help [COMMAND]           this text, or a command's options\n"
    "  --version                the version\n"
    "\n"
    "'faultline COMMAND --help' shows a command's options. Scenario format:\n"
    "scenarios/README.md. Results database schema: docs/schema.md.\n";

static const char *usage_run =
    "usage: faultline run SCENARIO|DIR... [OPTIONS]\n"
    "\n"
    "Runs every variant of every scenario (a DIR means every *.yaml and *.yml below it),\n"
    "prints one verdict line per run and a summary table, records everything.\n"
    "\n"
    "  --variant K=V       only variants where K is V (repeatable; a bare value works)\n"
    "  --seed N            seed for every random decision (default: the file's, else random)\n"
    "  --repeat N          run each variant N times (default 1)\n"
    "  --db PATH           results database (default out/faultline.db)\n"
    "  --no-db             record nothing\n"
    "  --out DIR           where run directories go (default out; runs in DIR/runs)\n"
    "  --keep              keep each run's directory (disks, logs) even when it passes\n"
    "  --junit FILE        also write JUnit XML\n"
    "  --html FILE         also write the HTML report with timelines of these runs\n"
    "                      (as 'faultline report' does; needs the database)\n"
    "  -q, --quiet         no progress line\n"
    "\n"
    "Under a verdict line, 'reason:' gives a failure's reason whole when the line\n"
    "cut it, and 'note:' names each fault whose trigger never came, and why.\n"
    "\n"
    "Exit status: 0 when every run passed, 1 when any failed or errored (or the\n"
    "JUnit XML or HTML report could not be written), 2 for a bad scenario file or option, 130\n"
    "when interrupted (cleanup still happens).\n";

static const char *usage_validate =
    "usage: faultline validate SCENARIO|DIR...\n"
    "\n"
    "Loads and checks every scenario file without creating anything (a soak\n"
    "profile's soak: block too). Errors are printed as file:line:column: message.\n"
    "Exit 0 when all are valid, else 2.\n";

static const char *usage_list =
    "usage: faultline list SCENARIO|DIR...\n"
    "\n"
    "Prints each scenario's name, file, hosts and variants.\n";

static const char *usage_shell =
    "usage: faultline shell SCENARIO HOST [--variant K=V]... [--start] [--out DIR] [--keep]\n"
    "\n"
    "Brings every host of the scenario up (namespaces, disks, network) and opens\n"
    "an interactive shell on HOST ($SHELL, else /bin/sh), in its working\n"
    "directory. The commands each role would run are printed; --start starts\n"
    "them too. Faults are not applied. The variant is the first one --variant\n"
    "matches (without --variant, the scenario's first). Another terminal can run\n"
    "'faultline exec RUN HOST -- CMD' (the line to type is printed). Everything is\n"
    "removed when the shell exits.\n"
    "Exit status is the shell's (1 when the hosts could not be brought up).\n";

static const char *usage_exec =
    "usage: faultline exec RUN HOST [--] [CMD [ARGS...]]\n"
    "\n"
    "Runs CMD inside HOST of the running run RUN (a run id, as printed by\n"
    "'faultline shell' or found under out/runs/), with the host's network,\n"
    "mounts, hostname and PID namespace, in its working directory; without CMD,\n"
    "/bin/sh. Exit status is CMD's. CMD gets none of the run's preloads: on a host a crash_host with\n"
    "'unsynced: lose' targets, what it syncs is not recorded (lost at the crash).\n"
    "  --out DIR   where run directories are (default out)\n";

static const char *usage_gc =
    "usage: faultline gc [--out DIR] [--all] [--dry-run]\n"
    "\n"
    "Finds runs whose faultline process is gone (killed, crashed) and removes what\n"
    "they left: processes (host inits, the switch), cgroups, mounts, the run\n"
    "directory; marks them 'error: harness killed' in the database each run was\n"
    "recorded in (named in its state file). Runs still going are left alone.\n"
    "When no run is alive on the machine, it also removes the workdirs faultline\n"
    "made (the default /srv/faultline, and those of the runs it collected) and\n"
    "the empty faultline/ parent cgroups, as the last run to end does.\n"
    "  --out DIR   where run directories are (default out; runs in DIR/runs)\n"
    "  --all       also remove the kept directories of finished runs\n"
    "  --dry-run   only say what would be removed\n";

static const char *usage_runs =
    "usage: faultline runs [--db PATH] [--scenario NAME] [--variant V] [--verdict V]\n"
    "                      [--limit N] [--since REV] [--history] [--changed REV]\n"
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
    "REV: anything git names in this checkout (HEAD~3, a branch, a full hash), or\n"
    "the first digits of a recorded revision (runs.git_rev, 12 hex digits).\n";

static const char *usage_emit =
    "usage: faultline emit [--sync] KIND [KEY=VALUE...]\n"
    "\n"
    "Sends one event on the event channel of the run this process belongs to\n"
    "($FAULTLINE_EVENTS). With --sync, waits until the harness has applied every\n"
    "fault the event triggers (which may kill the caller). A bad KIND or\n"
    "KEY=VALUE is an error (exit 2) everywhere; without FAULTLINE_EVENTS it\n"
    "does nothing else and exits 0. Exit 1 when the channel cannot be reached or\n"
    "breaks before the answer (the run is over), with one line on stderr.\n";

static int help_for(const char *cmd)
{
    const char *u = NULL;
    if (!cmd)
        u = usage_main;
    else if (!strcmp(cmd, "run")) u = usage_run;
    else if (!strcmp(cmd, "validate")) u = usage_validate;
    else if (!strcmp(cmd, "list")) u = usage_list;
    else if (!strcmp(cmd, "shell")) u = usage_shell;
    else if (!strcmp(cmd, "exec")) u = usage_exec;
    else if (!strcmp(cmd, "gc")) u = usage_gc;
    else if (!strcmp(cmd, "runs")) u = usage_runs;
    else if (!strcmp(cmd, "report")) u = fl_cli_report_usage;
    else if (!strcmp(cmd, "emit")) u = usage_emit;
    else if (!strcmp(cmd, "soak")) u = fl_soak_usage;
    if (!u) {
        fprintf(stderr, "faultline: no command '%s'; see 'faultline --help'\n", cmd);
        return 2;
    }
    fputs(u, stdout);
    return 0;
}

static bool want_help(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--"))
            return false;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
            return true;
    }
    return false;
}

/* ---- validate / list ---------------------------------------------------------------- */

/* validate and list take no options: "--bogus" is an unknown option, not a
 * file; a first "--" ends options (for a file named "-x"). */
static int check_no_options(int argc, char **argv, const char *cmd, const char *usage, int *first)
{
    *first = 1;
    if (argc > 1 && !strcmp(argv[1], "--")) {
        *first = 2;
        return 0;
    }
    for (int i = 1; i < argc; i++)
        if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "faultline %s: unknown option '%s'\n", cmd, argv[i]);
            fputs(usage, stderr);
            return -1;
        }
    return 0;
}

static int load_all(int argc, char **argv, struct fl_scenario ***out, size_t *n)
{
    *out = NULL;
    *n = 0;
    int bad = 0;
    char err[2048];
    for (int i = 0; i < argc; i++) {
        char **files;
        size_t nf;
        if (fl_scenario_list(argv[i], &files, &nf, err, sizeof err) < 0) {
            fprintf(stderr, "%s\n", err);
            bad++;
            continue;
        }
        if (nf == 0) {
            fprintf(stderr, "%s: no scenario files (*.yaml, *.yml) found\n", argv[i]);
            bad++;
        }
        for (size_t k = 0; k < nf; k++) {
            struct fl_scenario *s;
            if (fl_scenario_load(files[k], &s, err, sizeof err) < 0) {
                fprintf(stderr, "%s\n", err);
                bad++;
                continue;
            }
            *out = realloc(*out, (*n + 1) * sizeof **out);
            (*out)[(*n)++] = s;
        }
        fl_scenario_list_free(files, nf);
    }
    return bad;
}

static void free_all(struct fl_scenario **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        fl_scenario_free(v[i]);
    free(v);
}

static int cmd_validate(int argc, char **argv)
{
    int first;
    if (check_no_options(argc, argv, "validate", usage_validate, &first) < 0)
        return 2;
    if (argc <= first) {
        fputs(usage_validate, stderr);
        return 2;
    }
    struct fl_scenario **v;
    size_t n;
    int bad = load_all(argc - first, argv + first, &v, &n);
    for (size_t i = 0; i < n; i++) {
        /* a soak profile: its soak: block too, as 'faultline soak' reads it */
        if (v[i]->has_soak) {
            struct fl_soak_profile *p;
            char err[2048];
            if (fl_soak_profile_load(v[i]->path, &p, err, sizeof err) < 0) {
                fprintf(stderr, "%s\n", err);
                bad++;
                continue;
            }
            fl_soak_profile_free(p);
        }
        printf("ok  %s  (%s, %zu variant%s%s)\n", v[i]->path, v[i]->name,
               fl_scn_variant_count(v[i]), fl_scn_variant_count(v[i]) == 1 ? "" : "s",
               v[i]->has_soak ? ", soak profile" : "");
    }
    free_all(v, n);
    return bad ? 2 : 0;
}

static int cmd_list(int argc, char **argv)
{
    int first;
    if (check_no_options(argc, argv, "list", usage_list, &first) < 0)
        return 2;
    if (argc <= first) {
        fputs(usage_list, stderr);
        return 2;
    }
    struct fl_scenario **v;
    size_t n;
    int bad = load_all(argc - first, argv + first, &v, &n);
    for (size_t i = 0; i < n; i++) {
        struct fl_scenario *s = v[i];
        printf("%s  (%s)\n", s->name, s->path);
        if (s->about[0])
            printf("  %s\n", s->about);
        printf("  hosts:");
        for (size_t h = 0; h < s->n_hosts; h++)
            printf(" %s", s->hosts[h].name);
        printf("\n  variants:");
        char name[FL_SCN_VARIANT_NAME_MAX];
        for (size_t k = 0; k < fl_scn_variant_count(s); k++)
            printf("%s %s", k ? "," : "", fl_scn_variant_name(s, k, name, sizeof name));
        printf("\n");
    }
    free_all(v, n);
    return bad ? 2 : 0;
}

/* ---- run ------------------------------------------------------------------------------ */

/*
 * Each host's disk is mounted over the workdir, so inside a host everything
 * below it is the disk's.  Directories the hosts need from the machine
 * ({bin}, {scenario_dir}, the run directories with the event socket) must
 * not lie there ("/bin/sh: {bin}/fl-probe: not found", exit 127, was all a
 * run said).  Under /tmp they are safe: the harness binds them again.
 */
static int check_workdir_hides(const struct fl_scenario *s, const char *out)
{
    char bin[PATH_MAX], outp[PATH_MAX], cwd[PATH_MAX];
    fl_cli_bin_dir(bin, sizeof bin);
    out = out ? out : "out";
    if (!realpath(out, outp)) {
        if (out[0] != '/' && getcwd(cwd, sizeof cwd))
            snprintf(outp, sizeof outp, "%s/%s", cwd, out);
        else
            snprintf(outp, sizeof outp, "%s", out);
    }
    const char *paths[] = {bin, s->dir, outp};
    const char *what[] = {"faultline's programs ({bin})", "the scenario's directory ({scenario_dir})",
                          "the run directories (--out)"};
    size_t wl = strlen(s->workdir);
    for (size_t i = 0; i < 3; i++)
        if (!strncmp(paths[i], s->workdir, wl) && (paths[i][wl] == '/' || !paths[i][wl])) {
            fprintf(stderr, "faultline: %s: workdir %s would hide %s, %s, inside every host "
                    "(their disks are mounted there); choose a workdir outside it%s\n", s->path,
                    s->workdir, paths[i], what[i], i == 2 ? " or another --out" : "");
            return -1;
        }
    return 0;
}

struct common {
    const char *db;
    bool no_db;
    const char *out;
    bool keep;
    uint64_t seed;
    bool seed_set;
    const char *variants[64];
    int nvariants;
};

/* One more --variant filter; -1 (said) past the 64 kept. */
static int add_variant(struct common *c, const char *v)
{
    if (c->nvariants == (int)(sizeof c->variants / sizeof c->variants[0])) {
        fprintf(stderr, "faultline: at most %d --variant options\n",
                (int)(sizeof c->variants / sizeof c->variants[0]));
        return -1;
    }
    c->variants[c->nvariants++] = v;
    return 0;
}

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

static int open_db(const struct common *c, struct fl_rec **rec)
{
    *rec = NULL;
    if (c->no_db)
        return 0;
    char err[1024];
    if (fl_rec_open(rec, c->db ? c->db : "out/faultline.db", NULL, err, sizeof err) < 0) {
        fprintf(stderr, "faultline: %s\n", err);
        return -1;
    }
    return 0;
}

static int cmd_run(int argc, char **argv)
{
    struct common c = {0};
    uint64_t repeat = 1;
    const char *junit = NULL, *html = NULL;
    bool quiet = false;
    static const struct option opts[] = {
        {"variant", required_argument, 0, 'v'}, {"seed", required_argument, 0, 's'},
        {"repeat", required_argument, 0, 'r'},  {"db", required_argument, 0, 'd'},
        {"no-db", no_argument, 0, 'D'},         {"out", required_argument, 0, 'o'},
        {"keep", no_argument, 0, 'k'},          {"junit", required_argument, 0, 'j'},
        {"quiet", no_argument, 0, 'q'},         {"html", required_argument, 0, 'h'},
        {0, 0, 0, 0}};
    int ch;
    optind = 1;
    /* Short options only where --help shows them (-q): the rest are long. */
    while ((ch = getopt_long(argc, argv, "q", opts, NULL)) != -1) {
        switch (ch) {
        case 'v':
            if (add_variant(&c, optarg) < 0)
                return 2;
            break;
        case 's':
            if (fl_cli_parse_u64("faultline", "--seed", optarg, &c.seed) < 0)
                return 2;
            c.seed_set = true;
            break;
        case 'r':
            if (fl_cli_parse_u64("faultline", "--repeat", optarg, &repeat) < 0)
                return 2;
            if (repeat == 0) {
                fprintf(stderr, "faultline: --repeat wants a number >= 1\n");
                return 2;
            }
            break;
        case 'd': c.db = optarg; break;
        case 'D': c.no_db = true; break;
        case 'o': c.out = optarg; break;
        case 'k': c.keep = true; break;
        case 'j': junit = optarg; break;
        case 'h': html = optarg; break;
        case 'q': quiet = true; break;
        default:
            fputs(usage_run, stderr);
            return 2;
        }
    }
    if (optind >= argc) {
        fputs(usage_run, stderr);
        return 2;
    }
    if (html && c.no_db) {
        fprintf(stderr, "faultline: --html reads the runs back from the database; drop --no-db\n");
        return 2;
    }
    struct fl_scenario **v;
    size_t n;
    if (load_all(argc - optind, argv + optind, &v, &n) || n == 0) {
        free_all(v, n);
        return 2;
    }
    for (size_t i = 0; i < n; i++)
        if (check_workdir_hides(v[i], c.out) < 0) {
            free_all(v, n);
            return 2;
        }
    /* variant filters, checked against every scenario before running any */
    struct fl_scn_selector *filters = calloc(n, sizeof *filters);
    char err[2048];
    for (size_t i = 0; i < n; i++)
        for (int k = 0; k < c.nvariants; k++)
            if (fl_scn_variant_filter_add(v[i], &filters[i], c.variants[k], err, sizeof err) < 0) {
                fprintf(stderr, "faultline: %s: %s\n", v[i]->path, err);
                free_all(v, n);
                return 2;
            }
    if ((junit && check_junit_path(junit) < 0) || fl_cli_prepare_out(c.out) < 0) {
        free_all(v, n);
        return 2;
    }
    if (fl_engine_global_init(err, sizeof err) < 0) {
        fprintf(stderr, "faultline: %s\n", err);
        return 1;
    }
    struct fl_rec *rec;
    if (open_db(&c, &rec) < 0)
        return 2;
    char bin[PATH_MAX], rev[64] = "";
    fl_cli_bin_dir(bin, sizeof bin);
    char top[PATH_MAX];
    snprintf(top, sizeof top, "%s/../..", bin);
    if (fl_rec_git_revision(top, rev, sizeof rev) < 0)
        rev[0] = 0;
    struct fl_engine_opts eo = {.out_dir = c.out, .bin_dir = bin, .seed = c.seed,
                                .seed_set = c.seed_set, .keep = c.keep, .rec = rec,
                                .git_rev = rev[0] ? rev : NULL,
                                .progress = !quiet && isatty(2), .shell_host = -1};
    struct fl_report_row *rows = NULL;
    struct fl_engine_result **results = NULL;
    char **vnames = NULL;
    size_t nrows = 0;
    int failed = 0;
    bool interrupted = false;
    for (size_t i = 0; i < n && !interrupted; i++) {
        struct fl_scenario *s = v[i];
        for (size_t var = 0; var < fl_scn_variant_count(s) && !interrupted; var++) {
            if (filters[i].n_terms && !fl_scn_selector_match(s, &filters[i], var))
                continue;
            for (uint64_t r = 0; r < repeat && !interrupted; r++) {
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
                    .scenario = s->name, .variant = vnames[nrows],
                    .expected = res->expected, .observed = res->observed,
                    .verdict = res->verdict, .duration_ms = res->duration_ms,
                    .reason = res->reason[0] ? res->reason : NULL, .run_id = res->run_id,
                    .run_dir = strcmp(res->verdict, "pass") || c.keep ? res->run_dir : NULL};
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
                fflush(stdout);
                nrows++;
            }
        }
    }
    if (!interrupted)
        interrupted = fl_engine_take_interrupt();
    printf("\n");
    fl_report_summary(stdout, rows, nrows);
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
        struct fl_report_html_opts ho = {.run_ids = ids, .n_run_ids = nrows,
                                         .skip_missing = true};
        if (!ids || fl_report_html(fl_rec_db(rec), html, &ho, err, sizeof err) < 0) {
            fprintf(stderr, "faultline: HTML report: %s\n", ids ? err : "out of memory");
            failed++;
        } else {
            printf("report: %s\n", html);
        }
        free(ids);
    }
    if (rec)
        fl_rec_close(rec);
    for (size_t i = 0; i < n; i++)
        fl_scn_selector_free(&filters[i]);
    free(filters);
    for (size_t i = 0; i < nrows; i++) {
        free(vnames[i]);
        free(results[i]);
    }
    free(vnames);
    free(rows);
    free(results);
    free_all(v, n);
    if (interrupted)
        return 130;
    return failed ? 1 : 0;
}

static int cmd_shell(int argc, char **argv)
{
    struct common c = {0};
    bool start = false;
    static const struct option opts[] = {{"variant", required_argument, 0, 'v'},
                                         {"out", required_argument, 0, 'o'},
                                         {"keep", no_argument, 0, 'k'},
                                         {"start", no_argument, 0, 'S'},
                                         {0, 0, 0, 0}};
    int ch;
    optind = 1;
    while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (ch) {
        case 'v':
            if (add_variant(&c, optarg) < 0)
                return 2;
            break;
        case 'o': c.out = optarg; break;
        case 'k': c.keep = true; break;
        case 'S': start = true; break;
        default: fputs(usage_shell, stderr); return 2;
        }
    }
    if (argc - optind != 2) {
        fputs(usage_shell, stderr);
        return 2;
    }
    char err[2048];
    struct fl_scenario *s;
    if (fl_scenario_load(argv[optind], &s, err, sizeof err) < 0) {
        fprintf(stderr, "%s\n", err);
        return 2;
    }
    int host = fl_scn_host_find(s, argv[optind + 1]);
    if (host < 0) {
        const char **names = calloc(s->n_hosts, sizeof *names);
        for (size_t i = 0; names && i < s->n_hosts; i++)
            names[i] = s->hosts[i].name;
        char msg[512];
        snprintf(msg, sizeof msg, "faultline: %s has no host '%s'", s->path, argv[optind + 1]);
        if (names)
            fl_suggest_append(msg, sizeof msg, argv[optind + 1], names, s->n_hosts);
        fprintf(stderr, "%s; its hosts:", msg);
        for (size_t i = 0; i < s->n_hosts; i++)
            fprintf(stderr, " %s", s->hosts[i].name);
        fprintf(stderr, "\n");
        free(names);
        fl_scenario_free(s);
        return 2;
    }
    if (check_workdir_hides(s, c.out) < 0) {
        fl_scenario_free(s);
        return 2;
    }
    struct fl_scn_selector f = {0};
    int rc = 0;
    for (int k = 0; k < c.nvariants && rc == 0; k++)
        if (fl_scn_variant_filter_add(s, &f, c.variants[k], err, sizeof err) < 0) {
            fprintf(stderr, "faultline: %s: %s\n", s->path, err);
            rc = 2;
        }
    size_t var = 0;
    while (rc == 0 && var < fl_scn_variant_count(s) && f.n_terms &&
           !fl_scn_selector_match(s, &f, var))
        var++;
    if (rc == 0 && var == fl_scn_variant_count(s)) {
        fprintf(stderr, "faultline: no variant of %s matches\n", s->path);
        rc = 2;
    }
    if (rc == 0 && fl_cli_prepare_out(c.out) < 0)
        rc = 2;
    if (rc == 0 && fl_engine_global_init(err, sizeof err) < 0) {
        fprintf(stderr, "faultline: %s\n", err);
        rc = 1;
    }
    if (rc) {
        fl_scn_selector_free(&f);
        fl_scenario_free(s);
        return rc;
    }
    char bin[PATH_MAX];
    fl_cli_bin_dir(bin, sizeof bin);
    struct fl_engine_opts eo = {.out_dir = c.out, .bin_dir = bin, .keep = c.keep,
                                .shell_host = host, .shell_start_roles = start};
    struct fl_engine_result res;
    fl_engine_run(s, var, &eo, &res);
    if (!strcmp(res.verdict, "error"))
        fprintf(stderr, "faultline: %s\n", res.reason);
    fl_scn_selector_free(&f);
    fl_scenario_free(s);
    if (!strcmp(res.verdict, "error"))
        return 1;
    return res.shell_status >= 0 ? res.shell_status : 0; /* the shell's, as exec gives CMD's */
}

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

static int cmd_runs(int argc, char **argv)
{
    struct common c = {0};
    struct fl_report_runs_opts ro = {0};
    bool history = false;
    const char *changed = NULL;
    static const struct option opts[] = {
        {"db", required_argument, 0, 'd'},      {"scenario", required_argument, 0, 's'},
        {"variant", required_argument, 0, 'v'}, {"verdict", required_argument, 0, 'V'},
        {"limit", required_argument, 0, 'l'},   {"since", required_argument, 0, 'S'},
        {"history", no_argument, 0, 'H'},       {"changed", required_argument, 0, 'C'},
        {0, 0, 0, 0}};
    int ch;
    optind = 1;
    while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (ch) {
        case 'd': c.db = optarg; break;
        case 's': ro.scenario = optarg; break;
        case 'v': ro.variant = optarg; break;
        case 'V':       /* as 'faultline runs' shows it (PASS) or as stored (pass) */
            for (char *q = optarg; *q; q++)
                *q = (char)tolower((unsigned char)*q);
            ro.verdict = optarg;
            break;
        case 'l': {
            char *end;
            errno = 0;
            long l = strtol(optarg, &end, 10);
            if (errno || end == optarg || *end || l == 0 || l < -1 || l > INT_MAX) {
                fprintf(stderr, "faultline: --limit wants a number >= 1, or -1 for all, not '%s'\n",
                        optarg);
                return 2;
            }
            ro.limit = (int)l;
            break;
        }
        case 'S': ro.since_rev = optarg; break;
        case 'H': history = true; break;
        case 'C': changed = optarg; break;
        default: fputs(usage_runs, stderr); return 2;
        }
    }
    /* A revision as typed ("HEAD~3", a full hash) -> as recorded (12 digits). */
    char bin[PATH_MAX], top[PATH_MAX], since_rev[64], changed_rev[64];
    fl_cli_bin_dir(bin, sizeof bin);
    snprintf(top, sizeof top, "%s/../..", bin);
    if (ro.since_rev) {
        fl_rec_git_resolve(top, ro.since_rev, since_rev, sizeof since_rev);
        ro.since_rev = since_rev;
    }
    if (changed) {
        fl_rec_git_resolve(top, changed, changed_rev, sizeof changed_rev);
        changed = changed_rev;
    }
    /* Reading only: a mistyped --db (or no out/ here) is not a new database. */
    struct stat st;
    const char *path = c.db ? c.db : "out/faultline.db";
    if (stat(path, &st) < 0) {
        int e = errno;
        fprintf(stderr, "faultline: no results database at %s: %s ('faultline run' records "
                "there; --db PATH reads another)\n", path, strerror(e));
        return 2;
    }
    struct fl_rec *rec;
    if (open_db(&c, &rec) < 0)
        return 2;
    if (ro.scenario)
        hint_scenario(fl_rec_db(rec), path, ro.scenario);
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

static int cmd_emit(int argc, char **argv)
{
    bool sync = false;
    int i = 1;
    /* options come before KIND (a kind or KEY=VALUE never starts with '-') */
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (!strcmp(argv[i], "--sync")) {
            sync = true;
        } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(usage_emit, stdout);
            return 0;
        } else {
            fprintf(stderr, "faultline emit: unknown option '%s'\n", argv[i]);
            fputs(usage_emit, stderr);
            return 2;
        }
    }
    if (i >= argc) {
        fputs(usage_emit, stderr);
        return 2;
    }
    char attrs[4000] = "";
    size_t n = 0;
    for (int k = i + 1; k < argc; k++) {
        int w = snprintf(attrs + n, sizeof attrs - n, "%s%s", n ? " " : "", argv[k]);
        if (w < 0 || (size_t)w >= sizeof attrs - n) {
            fprintf(stderr, "faultline emit: the attributes of event '%s' are longer than %zu "
                    "bytes\n", argv[i], sizeof attrs - 1);
            return 2;
        }
        n += (size_t)w;
    }
    return fl_cli_emit(getenv("FAULTLINE_EVENTS"), argv[i], attrs, sync);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fputs(usage_main, stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h"))
        return help_for(NULL);
    if (!strcmp(cmd, "help"))
        return help_for(argc > 2 ? argv[2] : NULL);
    if (!strcmp(cmd, "--version")) {
        printf("faultline 0.1\n");
        return 0;
    }
    /* emit reads its own options: its KEY=VALUE arguments are not ours */
    if (strcmp(cmd, "emit") && want_help(argc - 1, argv + 1))
        return help_for(cmd);
    /* getopt names argv[0] in its messages: "faultline run: unrecognized
     * option '--bogus'", not "run: ..." */
    char prog[64];
    snprintf(prog, sizeof prog, "faultline %s", cmd);
    argv[1] = prog;
    if (!strcmp(cmd, "run")) return cmd_run(argc - 1, argv + 1);
    if (!strcmp(cmd, "validate")) return cmd_validate(argc - 1, argv + 1);
    if (!strcmp(cmd, "list")) return cmd_list(argc - 1, argv + 1);
    if (!strcmp(cmd, "shell")) return cmd_shell(argc - 1, argv + 1);
    if (!strcmp(cmd, "exec")) return fl_cli_exec(argc - 1, argv + 1, usage_exec);
    if (!strcmp(cmd, "gc")) return fl_cli_gc(argc - 1, argv + 1, usage_gc);
    if (!strcmp(cmd, "runs")) return cmd_runs(argc - 1, argv + 1);
    if (!strcmp(cmd, "report")) return fl_cli_report(argc - 1, argv + 1);
    if (!strcmp(cmd, "emit")) return cmd_emit(argc - 1, argv + 1);
    if (!strcmp(cmd, "soak")) return fl_cli_soak(argc - 1, argv + 1);
    if (!strcmp(cmd, "_bench-hosts")) return fl_cli_bench_hosts(argc - 1, argv + 1);
    fprintf(stderr, "faultline: unknown command '%s'; see 'faultline --help'\n", cmd);
    return 2;
}
