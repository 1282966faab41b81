/*
 * report.h: turning faultline's results into text for people and CI.
 *
 * Two kinds of input:
 *  - the end-of-run rows the run engine holds in memory (struct fl_report_row):
 *    fl_report_verdict_line (one line per run, as it finishes),
 *    fl_report_summary (the table after all runs), fl_report_junit (CI);
 *  - the results database (an sqlite3 handle, from fl_rec_db() of
 *    harness/record/recorder.h, already opened and migrated): fl_report_runs
 *    (`faultline runs`), fl_report_history (verdict history per
 *    scenario/variant), fl_report_changed (verdicts changed since a revision).
 *
 * Colour: verdict words are coloured only when the FILE is a terminal and
 * NO_COLOR is not set, unless fl_report_set_color() says otherwise.
 * Errors: 0 (or a count) on success, negative errno on failure; database
 * errors are -EIO with the SQLite message printed to stderr.
 */
#ifndef FL_REPORT_H
#define FL_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct sqlite3;

/* ---- end-of-run rows --------------------------------------------------------- */

struct fl_report_row {
    const char *scenario; /* scenario name */
    const char *variant;  /* "protocol=legacy" ("" or NULL when none) */
    const char *expected; /* short text: "chief fails_with NotFoundError", "all exit 0" */
    const char *observed; /* short text: what happened */
    const char *verdict;  /* "pass" | "fail" | "error" */
    int64_t duration_ms;
    const char *reason;  /* why (the first failed check, the harness error), may be NULL */
    const char *run_id;  /* may be NULL */
    const char *run_dir; /* run directory with the logs, may be NULL (JUnit system-out) */
    /* A run that did not pass: its failing tasks, "TASK<tab>LOG" lines
     * (fl_engine_result.failing), whose logs' last lines the JUnit XML
     * shows; may be NULL. */
    const char *failing;
};

/* How many of a failing task's last log lines the JUnit XML and the HTML
 * report show. */
#define FL_REPORT_LOG_TAIL 20

enum fl_report_color { FL_REPORT_COLOR_AUTO, FL_REPORT_COLOR_NEVER, FL_REPORT_COLOR_ALWAYS };
/* Process-wide; default AUTO (tty and no NO_COLOR). */
void fl_report_set_color(enum fl_report_color mode);
/* Process-wide (`faultline run --wide`): the text tables (summary, `runs`)
 * print every cell whole, neither cut to a column's maximum nor to the
 * terminal's width.  Default false. */
void fl_report_set_wide(bool wide);

/*
 * One line per finished run:
 *   PASS  seed-001 protocol=legacy  3.2s  (expected failure observed: NotFoundError ...)
 * The parenthesis holds the reason, or else the observed text, on one line,
 * truncated to FL_REPORT_LINE_REASON characters to keep the line readable.
 */
#define FL_REPORT_LINE_REASON 100
void fl_report_verdict_line(FILE *out, const struct fl_report_row *row);

/*
 * The end-of-run table: columns SCENARIO VARIANT EXPECTED OBSERVED VERDICT
 * TIME REASON, aligned (long cells truncated with "...", and narrowed to the
 * terminal's width when out is a terminal; neither under fl_report_set_wide),
 * then a totals line
 *   "5 runs: 4 passed, 1 failed, 0 errors in 12.3s"   (time: sum of the runs' durations)
 * Returns 0, or -EIO when writing failed.
 */
int fl_report_summary(FILE *out, const struct fl_report_row *rows, size_t n);

/*
 * Reproducer rows.  A scenario named sNNN-LAYOUT (scenarios/seeds/) is the
 * reproducer of seed bug SNNN in that layout.  When every row given to
 * fl_report_summary is one, its columns are SEED LAYOUT PROTOCOL EXPECTED
 * OBSERVED VERDICT TIME REASON, and OBSERVED has no maximum (it holds the
 * seed's error text): whole in a file or pipe, cut only to fit a terminal.  fl_report_seed_labels()
 * splits a row: seed "S000", layout = the name after "sNNN-" plus every variant term other than
 * protocol=V ("relaunch-ps disk=fresh"), protocol = V or "-".  Returns
 * false (buffers unspecified) when the scenario is not named so.
 */
bool fl_report_seed_labels(const struct fl_report_row *row, char *seed, size_t seedlen,
                           char *layout, size_t layoutlen, char *protocol, size_t protolen);

/*
 * Writes JUnit XML to path (atomically: a temp file renamed into place; the
 * parent directory is created if missing): one <testsuite> per scenario (in
 * order of first appearance), one <testcase name=VARIANT classname=SCENARIO
 * time=SECONDS> per row, with <failure message=REASON> for 'fail' and <error
 * message=REASON> for 'error' (and anything else), expected/observed/reason
 * in the element text, then the run's log directory (RUN_DIR/logs) and,
 * for each failing task (row->failing), the last FL_REPORT_LOG_TAIL lines
 * of its log; run id, run dir and log directory in <system-out>.
 * Everything is XML-escaped; characters XML 1.0 cannot hold (control
 * characters, invalid UTF-8) are replaced by '?' (in log lines, control
 * characters by spaces).
 */
int fl_report_junit(const char *path, const struct fl_report_row *rows, size_t n);

/* ---- from the database ------------------------------------------------------- */

/*
 * SQL for "runs.git_rev is revision ?1 as a person typed it": the same text,
 * or a longer hash it abbreviates (a prefix) of a clean tree.  A run recorded
 * on an uncommitted tree ("<rev>-dirty") is at ?1 only when ?1 says -dirty
 * too: it is not the commit's baseline (`runs --changed HEAD` on a dirty tree
 * compares the dirty runs against the commit's).
 */
#define FL_REPORT_REV_IS(rev)                                                                   \
    "(git_rev = " rev " OR (length(" rev ") > 0 AND substr(git_rev, 1, length(" rev ")) = " rev \
    " AND git_rev NOT LIKE '%-dirty' AND " rev " NOT LIKE '%-dirty'))"

struct fl_report_runs_opts {
    const char *scenario;  /* only this scenario (exact name), NULL = all */
    const char *variant;   /* only this variant (exact), NULL = all */
    const char *verdict;   /* only this verdict, NULL = all */
    const char *since_rev; /* only runs started at or after the first run recorded
                              with this git revision (FL_REPORT_REV_IS); NULL = all */
    int limit;             /* most recent N; 0 -> 20, < 0 -> no limit */
};

/*
 * `faultline runs`: most recent runs first, as an aligned table:
 *   RUN ID  SCENARIO  VARIANT  VERDICT  DURATION  SEED  STARTED  REASON
 * (STARTED in local time "YYYY-MM-DD HH:MM:SS", reason truncated).  Prints
 * "no runs recorded in this database" for an empty database, "no recorded
 * run matches" when the filters leave nothing.  Returns the
 * number of runs printed, -ENOENT when since_rev names no recorded revision,
 * -EINVAL for a bad verdict, -EIO on a database error.
 */
int fl_report_runs(struct sqlite3 *db, FILE *out, const struct fl_report_runs_opts *opts);

struct fl_report_history_opts {
    const char *scenario; /* NULL = all */
    const char *variant;  /* NULL = all */
    int last;             /* verdict string over the last N runs; 0 -> 20 */
};

/*
 * "How often does it fail": one line per scenario/variant with
 *   SCENARIO VARIANT RUNS PASS FAIL ERROR FAIL% LAST HISTORY
 * HISTORY is the last N verdicts oldest first, one letter each (P F E R for
 * running).  Finished runs only count in FAIL%.  Returns the number of lines.
 */
int fl_report_history(struct sqlite3 *db, FILE *out, const struct fl_report_history_opts *opts);

/*
 * "Which scenarios changed verdict since revision X": for each
 * scenario/variant, the latest finished verdict among runs at revision rev
 * (FL_REPORT_REV_IS: not its -dirty runs) against the latest finished verdict of any later run;
 * prints those that differ:
 *   SCENARIO VARIANT VERDICT AT <rev> NOW NOW REV NOW RUN
 * or "no scenario changed verdict since <rev>".
 * Returns the number of changed lines, -ENOENT when rev was never recorded.
 */
int fl_report_changed(struct sqlite3 *db, FILE *out, const char *rev);

/* One fault of a run's schedule, as its scenario says it (the caller loads
 * the scenario text the database kept). */
struct fl_report_planned_fault {
    int idx;             /* its number in the scenario's faults:, from 1 (faults.idx) */
    const char *trigger; /* "at 1200ms", "after the 7th save.done (host w0)" */
    const char *what;    /* "kill worker:1 for=300ms" */
    int64_t at_ms;       /* an at: trigger's time; -1 for the others */
    const char *event;   /* an after: trigger's event kind; NULL for the others */
    unsigned count;      /* after: the count-th event (0: 1) */
    const char *host;    /* after: the host it names, or NULL */
    bool filtered;       /* after: names a job or values too */
};

/*
 * `faultline runs RUN --faults`: a line on the run (scenario, variant, seed,
 * verdict, duration, "A of N faults applied"), then its schedule as a table
 *   # TRIGGER FAULT APPLIED HEALED NOTE
 * one row per planned fault in plan's order, with its faults row joined by
 * number (FAULT then as applied: kind, target, detail); a fault with no row
 * says in NOTE why it never fired, as far as the database tells (the run
 * ended before its at: time; how many of its events came); applied rows no
 * planned fault claims come last.  plan may be empty (n 0: the scenario's
 * text is not kept): the applied rows alone.  Returns the number of rows,
 * -ENOENT when run_id is not recorded, -EIO on a database error.
 */
int fl_report_faults(struct sqlite3 *db, FILE *out, const char *run_id,
                     const struct fl_report_planned_fault *plan, size_t n);

/* ---- the HTML report (reports/html.c, timeline.c) ----------------------------- */

struct fl_report_html_opts {
    const char *const *run_ids; /* these runs (runs.run_id, exact); n_run_ids of them */
    size_t n_run_ids;
    bool skip_missing;     /* with run_ids: ids not in the database are left out
                              (a run that failed before it was recorded), not -ENOENT */
    int last;              /* without run_ids: the most recent N runs; 0 -> 20, < 0 all */
    const char *since_rev; /* without run_ids: runs since the first run at this
                              recorded revision (prefix match), newest first */
    const char *title;     /* <title> and heading; NULL -> "faultline report" */
};

/*
 * Writes ONE self-contained HTML file to path (atomically: temp file renamed
 * into place; missing parent directories are created): inline CSS and SVG,
 * no script, nothing fetched.  A summary table of the selected runs
 * (scenario, variant, verdict, time, reason, seed, git rev, started), failing
 * runs first, then for each run a <details> section (open when it did not
 * pass) with its timeline: a time axis from the run's start, one row per
 * fault (applied -> healed), one lane per host/task with its process
 * lifetimes (exit code or signal at the end, relaunches as further bars),
 * fault intervals shaded on the lanes they hit, events as marks (sync points
 * filled); then the checks with their outcomes, the processes and the events
 * as tables.  Every string from the database is HTML-escaped (invalid UTF-8
 * and forbidden control characters become '?').
 *
 * Returns the number of runs written (>= 1), or a negative errno with a
 * message for people in err: -ENODATA the database holds no runs (or none
 * matches), -ENOENT a run id or since_rev is not recorded (only then), -EIO a
 * database error, -EISDIR path is a directory, other values when the file
 * could not be written.
 */
int fl_report_html(struct sqlite3 *db, const char *path, const struct fl_report_html_opts *opts,
                   char *err, size_t errlen);

#endif
