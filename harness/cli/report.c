/*
 * report.c: `faultline report`, the HTML report of recorded runs.
 * Parses the selection (RUN-ID..., --last N, --since REV), checks that the
 * database exists (reading must not create an empty one at a mistyped
 * path), opens it through the recorder (so an old schema is migrated and a
 * newer one refused with a clear message) and hands the work to
 * fl_report_html (reports/html.c).
 */
#include "harness/base/monoclock.h"
#include "harness/cli/cli.h"
#include "harness/cli/common.h"
#include "harness/record/recorder.h"
#include "reports/report.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const char fl_cli_report_usage[] =
    "usage: faultline report [--db PATH] [--out FILE.html] [RUN-ID... | --last N | --since REV]\n"
    "\n"
    "Writes one self-contained HTML file (inline CSS and SVG, nothing fetched) on\n"
    "recorded runs: a table of the runs (verdict, scenario, variant, time, reason,\n"
    "seed, git rev), failing runs first; the verdict history of their scenarios\n"
    "across every recorded run (counts, the last 30 verdicts, where the current\n"
    "streak began: 'not passing since RUN (rev X)'); then per run a timeline from the run's\n"
    "start: one lane per host/task with its process lifetimes (exit code or signal),\n"
    "the faults (applied -> healed) as bars and shaded on the lanes they hit,\n"
    "events as marks (sync points filled), each process's output under its bar\n"
    "(when its run directory is still there: a run that did not pass, or --keep),\n"
    "and the checks with their outcomes; for a run that did not pass, where its\n"
    "logs are and the last 20 lines of each failing task's log; then the faults,\n"
    "processes (each command as written, line by line) and events.\n"
    "Failing runs are expanded; hover a mark for its details (a log mark: the lines\n"
    "that arrived then, with their times).\n"
    "\n"
    "  --db PATH      results database (default out/faultline.db)\n"
    "  --out FILE     where to write (default out/report.html; directories are created)\n"
    "  RUN-ID...      these runs (ids as 'faultline runs' shows them)\n"
    "  --last N       the N most recent runs (default 20; -1 for all)\n"
    "  --since REV    every run since the first run at git revision REV\n"
    "                 (REV as for 'faultline runs --since')\n"
    "\n"
    "'faultline run --html FILE' writes the same report on the runs it just made.\n"
    "Exit status: 0 written, 1 nothing to report or the file could not be\n"
    "written, 2 bad usage, a missing database or an unknown run id or revision.\n";

int fl_cli_report(int argc, char **argv)
{
    const char *db = "out/faultline.db", *out = "out/report.html", *since = NULL;
    int last = 0;
    static const struct option opts[] = {{"db", required_argument, 0, 'd'},
                                         {"out", required_argument, 0, 'o'},
                                         {"last", required_argument, 0, 'l'},
                                         {"since", required_argument, 0, 'S'},
                                         {0, 0, 0, 0}};
    int ch;
    optind = 1;
    while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (ch) {
        case 'd': db = optarg; break;
        case 'o': out = optarg; break;
        case 'S': since = optarg; break;
        case 'l':
            if (fl_cli_parse_limit("faultline report", "--last", optarg, &last) < 0)
                return 2;
            break;
        default: fputs(fl_cli_report_usage, stderr); return 2;
        }
    }
    int nids = argc - optind;
    if (nids > 0 && (last || since)) {
        fprintf(stderr, "faultline report: give run ids, or --last, or --since, not both\n");
        return 2;
    }
    struct fl_rec *rec;
    char err[1024];
    if (fl_cli_open_db_to_read("faultline report", db, &rec) < 0)
        return 2;
    char top[PATH_MAX], rev[64];
    if (since) {
        fl_cli_top_dir(top, sizeof top);
        fl_rec_git_resolve(top, since, rev, sizeof rev);
        since = rev;
    }
    struct fl_report_html_opts ho = {.run_ids = (const char *const *)argv + optind,
                                     .n_run_ids = (size_t)(nids > 0 ? nids : 0),
                                     .last = last,
                                     .since_rev = since};
    double t0 = fl_mono_s();
    int rc = fl_report_html(fl_rec_db(rec), out, &ho, err, sizeof err);
    double took_ms = (fl_mono_s() - t0) * 1e3;
    fl_rec_close(rec);
    if (rc < 0) {
        fprintf(stderr, "faultline report: %s\n", err);
        return rc == -ENOENT ? 2 : 1;
    }
    printf("wrote %s: %d run%s (%.0f ms)\n", out, rc, rc == 1 ? "" : "s", took_ms);
    return 0;
}
