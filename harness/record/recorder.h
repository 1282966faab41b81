/*
 * recorder.h: faultline's results database (SQLite), the write side.
 *
 * One database file (default out/faultline.db, WAL mode) holds every run of
 * every scenario.  The schema is documented in docs/schema.md; its version is
 * kept in PRAGMA user_version and brought up to date on open.
 *
 * Life of a run, as the run engine drives it:
 *
 *   struct fl_rec *rec;  char err[512];
 *   if (fl_rec_open(&rec, "out/faultline.db", NULL, err, sizeof err) < 0)
 *       { fprintf(stderr, "faultline: %s\n", err); exit(2); }
 *   struct fl_rec_run *run;
 *   fl_rec_run_begin(rec, &(struct fl_rec_run_info){ .run_id = id, ... }, &run);
 *       -> the runs row exists now, verdict 'running', committed at once
 *   int p = fl_rec_proc_start(run, &(struct fl_rec_proc){ ... });
 *   fl_rec_event(run, t_ms, "ps0", "ps", 0, "save.begin", "step=50", false);
 *   int f = fl_rec_fault_applied(run, &(struct fl_rec_fault){ ... });
 *   fl_rec_fault_healed(run, f, t_ms);
 *   fl_rec_proc_end(run, p, t_ms, 0, 0, false);
 *   fl_rec_check(run, &(struct fl_rec_check){ ... });
 *   fl_rec_run_end(run, "pass", NULL, duration_ms);   (frees run)
 *   fl_rec_close(rec);
 *
 * Cheap writes: every row call only copies its values into an in-memory queue
 * (no SQLite call, no lock).  The queue is written in one transaction, with
 * cached prepared statements, by fl_rec_flush(), automatically when it holds
 * opts.flush_rows rows or its oldest row is opts.flush_interval_ms old (checked
 * on each call), and always by fl_rec_run_begin/fl_rec_run_end/fl_rec_close.
 * The database write lock is held only for that burst, so several faultline
 * processes can record into one database at once (busy timeout).  An event
 * loop that wants a flush even when no rows arrive arms a timer with
 * fl_rec_flush_due_ms().
 *
 * Times: runs.started_at is unix ms; every other time (t_ms, started_ms,
 * applied_ms, ...) is milliseconds since the run's start.
 *
 * Threads: a struct fl_rec and its runs are used by one thread at a time.
 * Errors: 0 (or a non-negative value) on success, negative errno on failure.
 * A failed flush keeps nothing: the rows are dropped (counted by
 * fl_rec_lost) and the error returned; fl_rec_errmsg() tells what failed.
 * Recording never stalls a run: while a run is on (fl_rec_set_nowait), a
 * database that another process holds is not waited for; the queue is kept, -EBUSY returned, and
 * the flush tried again a tenth of a second later.  Outside it (fl_rec_run_begin, _end, _close), a
 * busy database is waited for, said on stderr after a second.
 */
#ifndef FL_RECORDER_H
#define FL_RECORDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct sqlite3;
struct fl_rec;
struct fl_rec_run;

/* Latest schema version this build knows (PRAGMA user_version). */
#define FL_REC_SCHEMA_VERSION 10

struct fl_rec_opts {
    int busy_timeout_ms;   /* wait this long for another writer; 0 -> 30000 */
    int flush_rows;        /* auto-flush at this many queued rows; 0 -> 1024 */
    int flush_interval_ms; /* auto-flush when the oldest queued row is this old; 0 -> 250 */
    bool read_only;        /* for queries only: no check that it can be written or is whole */
};

/*
 * Opens (creating it and its parent directories if missing) the database at
 * path, sets WAL mode, foreign keys and the busy timeout, and applies every
 * pending migration in one transaction.  On failure returns negative errno,
 * *out = NULL, and writes a message for people into err (if errlen > 0), e.g.
 *   "database out/faultline.db has schema version 7, this faultline knows up
 *    to 2; use a newer faultline or another --db"        (-EPROTO)
 *   "cannot create directory out: Permission denied"      (-EACCES)
 *   "database x.db cannot be written (...): record into another with --db
 *    NEW, or make it writable"                             (-EROFS)
 *   "database x.db is damaged (...): record into another with --db NEW, or
 *    recover what it holds with: sqlite3 x.db .recover | sqlite3 NEW.db"
 *                                                          (-EUCLEAN)
 * The last two are checked unless opts->read_only (PRAGMA quick_check reads
 * every page: damage found later would lose the rows written into it).
 * opts may be NULL (defaults).
 */
int fl_rec_open(struct fl_rec **out, const char *path, const struct fl_rec_opts *opts, char *err,
                size_t errlen);

/* Flushes queued rows and closes.  Runs not ended stay 'running' in the
 * database (that is what a killed harness looks like too); their handles
 * must not be used afterwards.  NULL is fine. */
int fl_rec_close(struct fl_rec *rec);

/* The SQLite handle, for queries (reports/report.h takes it). */
struct sqlite3 *fl_rec_db(struct fl_rec *rec);
/* The first column of sql's first row, an int, in *v: SQLITE_OK, or
 * SQLite's code (SQLITE_DONE: no row). */
int fl_rec_int_query(struct sqlite3 *db, const char *sql, int *v);

/* Path the database was opened with. */
const char *fl_rec_path(const struct fl_rec *rec);

/* The message for the last failure on rec ("" if none). */
const char *fl_rec_errmsg(const struct fl_rec *rec);

/* Writes every queued row now (one transaction). */
int fl_rec_flush(struct fl_rec *rec);

/* Milliseconds until an automatic flush is due (0 = now), or -1 when nothing
 * is queued.  For an event loop's timer. */
int64_t fl_rec_flush_due_ms(const struct fl_rec *rec);
/* nowait: a busy database is not waited for (see above); off again, the
 * next flush waits as usual. */
void fl_rec_set_nowait(struct fl_rec *rec, bool nowait);

/* Rows that could not be written since the database was opened (a failed
 * flush drops its batch; a runs row that could not be inserted counts one),
 * and in *why (may be NULL) the message of the first failure ("" if none).
 * A caller that must not lose results checks it at the end. */
size_t fl_rec_lost(const struct fl_rec *rec, const char **why);

/* Rows queued and not yet written. */
size_t fl_rec_pending(const struct fl_rec *rec);

/* ---- runs ---------------------------------------------------------------- */

struct fl_rec_run_info {
    const char *run_id;        /* required, unique: "20261121-114203-ab12cd" */
    const char *scenario;      /* required: scenario name */
    const char *scenario_file; /* path as given, may be NULL */
    const char *variant;       /* canonical "k=v,k2=v2" ("" when no variants) */
    const char *scenario_hash; /* hash of the scenario file's bytes, may be NULL */
    const char *scenario_text; /* those bytes (kept once per hash, for replay), may be NULL */
    size_t scenario_text_len;
    uint64_t seed;
    const char *git_rev;   /* revision of the project, may be NULL */
    const char *hostname;  /* NULL -> gethostname() */
    int64_t started_at_ms; /* unix ms; 0 -> now */
    bool rootless;         /* run without root (harness/sys/rootless.c) */
    unsigned uid;          /* the machine's uid that ran it */
};

/* Inserts the runs row (verdict 'running') and commits it at once.
 * -EEXIST if run_id is already recorded. */
int fl_rec_run_begin(struct fl_rec *rec, const struct fl_rec_run_info *info,
                     struct fl_rec_run **out);

/* runs.id of the run (the key every other table refers to). */
int64_t fl_rec_run_rowid(const struct fl_rec_run *run);
const char *fl_rec_run_id(const struct fl_rec_run *run);

/*
 * Sets verdict ("pass", "fail" or "error"; -EINVAL otherwise), reason (may be
 * NULL) and duration, writes everything queued and commits.  Checkpoint
 * operations begun and never finished (a save.begin without save.done/failed)
 * are recorded with outcome 'unfinished'.  Frees run, even on failure.
 */
int fl_rec_run_end(struct fl_rec_run *run, const char *verdict, const char *reason,
                   int64_t duration_ms);
/* runs.notes: what is printed under the run's verdict as "note:" lines (a
 * fault that could not reach a program), one a line. */
int fl_rec_run_notes(struct fl_rec_run *run, const char *notes);

/*
 * Marks a run that is still 'running' as 'error' with reason (NULL ->
 * "harness killed"); for `faultline gc`.  0 when marked, -ENOENT when no such
 * run, -EALREADY when it already has a verdict.  Commits at once.
 */
int fl_rec_mark_abandoned(struct fl_rec *rec, const char *run_id, const char *reason);

/* Sets the run's gc_at (unix ms): `faultline gc` cleaned up after its killed
 * harness, keeping its logs and removing its disks.  0, or -ENOENT when no
 * such run.  Commits at once. */
int fl_rec_mark_collected(struct fl_rec *rec, const char *run_id, int64_t gc_at_ms);

/* Is path an existing regular file (not a symlink), a SQLite database
 * holding a runs row for run_id?  Opened read-only, never created nor
 * migrated: for `gc`, which takes the path from a state file that a host may
 * have written. */
bool fl_rec_db_has_run(const char *path, const char *run_id);

/* Copies the run's verdict ("running", "pass", ...) into buf; -ENOENT if none. */
int fl_rec_run_verdict(struct fl_rec *rec, const char *run_id, char *buf, size_t len);

/* Writes a fresh run id "YYYYMMDD-HHMMSS-xxxxxx" (local time of unix_ms, 6
 * random hex digits from getrandom) into buf (>= 23 bytes). */
int fl_rec_make_run_id(char *buf, size_t len, int64_t unix_ms);

/* `git -C dir rev-parse --short=12 HEAD`, with "-dirty" appended when the work
 * tree has changes to tracked files; -ENOENT when dir is not in a git tree. */
int fl_rec_git_revision(const char *dir, char *buf, size_t len);

/* The recorded form of a revision a person typed (--since, --changed): what
 * `git -C dir rev-parse --short=12 REV^{commit}` says ("HEAD~2", "main", a
 * full hash -> 12 hex digits); when git cannot resolve it (another checkout's
 * commit, no git tree), a hash longer than 12 digits is cut to 12 (its
 * recorded prefix) and anything else is kept as typed (a prefix, "...-dirty").
 * Always fills buf. */
void fl_rec_git_resolve(const char *dir, const char *rev, char *buf, size_t len);

/* ---- rows of a run (queued; see above) ------------------------------------ */

struct fl_rec_proc {
    const char *host;
    const char *job; /* may be NULL (a command that is not a role) */
    int task;        /* -1 if none */
    int pid;         /* pid as the harness sees it */
    const char *command;
    int64_t started_ms;
    const char *log_path; /* captured stdout/stderr, may be NULL */
    int generation;       /* 0 first start, +1 per restart/replace */
};

/* Returns the process's number in this run (>= 0, processes.proc_no) for
 * fl_rec_proc_end, or negative errno. */
int fl_rec_proc_start(struct fl_rec_run *run, const struct fl_rec_proc *p);

/* exit_code: the exit status, or -1 when killed by a signal (signal > 0).
 * stopped_at_end: the harness sent that signal to end the run (SIGTERM, or
 * SIGKILL after the grace), as opposed to a fault or a crash. */
int fl_rec_proc_end(struct fl_rec_run *run, int proc_no, int64_t ended_ms, int exit_code,
                    int signal, bool core_dumped, bool stopped_at_end);

/* Marks the process as a failed run's evidence (processes.failing): the
 * last process of a task the verdict blames, whose log's last lines the
 * JUnit XML and the HTML report show. */
int fl_rec_proc_failing(struct fl_rec_run *run, int proc_no);

/*
 * One event from the event channel (or one the harness makes itself).  attrs
 * is the event's text after the kind, as received ("step=50 prefix=./x"), may
 * be NULL.  job may be NULL and task -1 when unknown.
 *
 * Checkpoint operations are derived from events: `save.begin`, `restore.begin`,
 * `export.begin` open an operation on (host, kind); `X.done` closes it with
 * outcome 'ok', `X.failed` with 'failed' and the attrs' error=; duration from
 * the begin's t_ms (NULL when no begin was seen).  step= and prefix= are taken
 * from the attrs of the done/failed event, or else of the begin.
 */
int fl_rec_event(struct fl_rec_run *run, int64_t t_ms, const char *host, const char *job, int task,
                 const char *kind, const char *attrs, bool sync);

struct fl_rec_fault {
    int index;          /* position in the scenario's faults: list, from 1 (as messages
                           say "fault 2"); 0 if none */
    const char *kind;   /* "kill", "partition", ... */
    const char *target; /* "ps1", "ps:1", "[ps0,w0]|[ps1]" ... */
    const char *detail; /* e.g. "signal=SIGKILL", may be NULL */
    int64_t applied_ms;
    const char *error; /* NULL when applied; the failure text otherwise */
};

/* Returns the fault's number in this run (>= 0, faults.fault_no). */
int fl_rec_fault_applied(struct fl_rec_run *run, const struct fl_rec_fault *f);
int fl_rec_fault_healed(struct fl_rec_run *run, int fault_no, int64_t healed_ms);
/* Where the fault hit so far (faults.hits; each call replaces the last). */
int fl_rec_fault_hits(struct fl_rec_run *run, int fault_no, const char *hits);

/* A fault of the scenario that never fired in the run (an unfired_faults
 * row): index from 1, its kind, what it aims at as the note says, the line
 * of the fault in the file, and the note as the terminal prints it. */
struct fl_rec_unfired {
    int index;
    const char *kind;
    const char *target;
    int line;
    const char *note; /* "fault 2 (f.yaml:12, kill b) never fired: no 'x' event came" */
};
int fl_rec_fault_unfired(struct fl_rec_run *run, const struct fl_rec_unfired *u);

struct fl_rec_check {
    const char *name;   /* "exit", "fails_with", "file", "event", ... */
    const char *target; /* "chief", "ps:1", "w0:train_logs/checkpoint", ... */
    bool passed;
    const char *expected; /* short text, may be NULL */
    const char *observed; /* short text, may be NULL */
    int line;             /* line in the scenario file, 0 if unknown */
};

int fl_rec_check(struct fl_rec_run *run, const struct fl_rec_check *c);

/* A checkpoint operation recorded directly (for one not seen as events, e.g.
 * a restore the checkers do).  kind: "save", "restore" or "export"; outcome:
 * "ok", "failed" or "unfinished". */
struct fl_rec_ckpt_op {
    const char *kind;
    const char *host;
    int64_t step;       /* -1 if unknown */
    const char *prefix; /* may be NULL */
    const char *outcome;
    const char *error;   /* may be NULL */
    int64_t started_ms;  /* -1 if unknown */
    int64_t duration_ms; /* -1 if unknown */
};

int fl_rec_ckpt_op(struct fl_rec_run *run, const struct fl_rec_ckpt_op *op);

/* ---- schema (for tests and tools) ------------------------------------------ */

/* Applies migrations on db up to target_version (<= FL_REC_SCHEMA_VERSION) in
 * one transaction.  Same errors and message as fl_rec_open. */
int fl_rec_schema_migrate(struct sqlite3 *db, const char *path, int target_version, char *err,
                          size_t errlen);

#endif
