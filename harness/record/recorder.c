/*
 * recorder.c: faultline's results database (SQLite), the write side.
 *
 * Everything a run does ends up here: the runs row, its processes, the event
 * stream, the faults applied and healed, the checks, and the checkpoint
 * operations (saves, restores, exports) derived from the event stream.  The
 * schema is the ordered list `migrations` below (PRAGMA user_version counts
 * how many are applied); docs/schema.md documents it for people and sqlite3.
 *
 * Writes are meant to be cheap enough for thousands of events a second from
 * an event loop: a row call copies its values into an in-memory queue
 * (struct qrow array + a text arena) and returns; fl_rec_flush writes the
 * queue in one BEGIN IMMEDIATE ... COMMIT with prepared statements that are
 * compiled once per connection.  Holding the database's write lock only for
 * that burst is what lets several faultline processes record into the same
 * file at once (WAL, busy timeout).
 *
 * States of a struct fl_rec:  open (queue may hold rows) -> closed (freed).
 * Invariants: every queued row refers to a runs row that is already committed
 * (run_begin commits its row before returning a run handle); the queue is empty
 * after every flush, successful or not (a failed batch is dropped and reported,
 * so that a broken disk cannot stall a run); a run's proc_no/fault_no are
 * assigned here, in call order, so updates (proc_end, fault_healed) can be
 * queued before the row they update is written.
 *
 * States of a struct fl_rec_run: begun (row verdict 'running', committed) ->
 * ended (verdict set, queue flushed, handle freed).  A run whose process dies
 * in between stays 'running' until fl_rec_mark_abandoned.
 */
#include "harness/base/text.h"
#include "harness/base/monoclock.h"
#include "harness/record/recorder.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- schema ------------------------------------------------------------------ */

/* migrations[i] takes the schema from version i to version i+1. Append only. */
static const char *const migrations[] = {
    /* 1: runs, processes, events, faults, checks */
    "CREATE TABLE runs (\n"
    "  id            INTEGER PRIMARY KEY,\n"
    "  run_id        TEXT NOT NULL UNIQUE,\n"
    "  scenario      TEXT NOT NULL,\n"
    "  scenario_file TEXT,\n"
    "  variant       TEXT NOT NULL DEFAULT '',\n"
    "  scenario_hash TEXT,\n"
    "  seed          INTEGER NOT NULL DEFAULT 0,\n"
    "  git_rev       TEXT,\n"
    "  hostname      TEXT,\n"
    "  started_at    INTEGER NOT NULL,\n"
    "  duration_ms   INTEGER,\n"
    "  verdict       TEXT NOT NULL DEFAULT 'running'\n"
    "                CHECK (verdict IN ('pass','fail','error','running')),\n"
    "  reason        TEXT\n"
    ");\n"
    "CREATE INDEX runs_by_scenario ON runs(scenario, variant, started_at);\n"
    "CREATE INDEX runs_by_start ON runs(started_at);\n"
    "CREATE INDEX runs_by_rev ON runs(git_rev);\n"
    "CREATE TABLE processes (\n"
    "  run         INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,\n"
    "  proc_no     INTEGER NOT NULL,\n"
    "  host        TEXT NOT NULL,\n"
    "  job         TEXT,\n"
    "  task        INTEGER,\n"
    "  pid         INTEGER,\n"
    "  command     TEXT,\n"
    "  started_ms  INTEGER,\n"
    "  ended_ms    INTEGER,\n"
    "  exit_code   INTEGER,\n"
    "  signal      INTEGER,\n"
    "  core_dumped INTEGER NOT NULL DEFAULT 0,\n"
    "  log_path    TEXT,\n"
    "  generation  INTEGER NOT NULL DEFAULT 0,\n"
    "  PRIMARY KEY (run, proc_no)\n"
    ");\n"
    "CREATE TABLE events (\n"
    "  run   INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,\n"
    "  t_ms  INTEGER NOT NULL,\n"
    "  host  TEXT,\n"
    "  job   TEXT,\n"
    "  task  INTEGER,\n"
    "  kind  TEXT NOT NULL,\n"
    "  attrs TEXT,\n"
    "  sync  INTEGER NOT NULL DEFAULT 0\n"
    ");\n"
    "CREATE INDEX events_by_run ON events(run, t_ms);\n"
    "CREATE TABLE faults (\n"
    "  run        INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,\n"
    "  fault_no   INTEGER NOT NULL,\n"
    "  idx        INTEGER,\n"
    "  kind       TEXT NOT NULL,\n"
    "  target     TEXT,\n"
    "  detail     TEXT,\n"
    "  applied_ms INTEGER,\n"
    "  healed_ms  INTEGER,\n"
    "  error      TEXT,\n"
    "  PRIMARY KEY (run, fault_no)\n"
    ");\n"
    "CREATE TABLE checks (\n"
    "  run      INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,\n"
    "  name     TEXT NOT NULL,\n"
    "  target   TEXT,\n"
    "  passed   INTEGER NOT NULL,\n"
    "  expected TEXT,\n"
    "  observed TEXT,\n"
    "  line     INTEGER\n"
    ");\n"
    "CREATE INDEX checks_by_run ON checks(run);\n",

    /* 2: checkpoint operations (from save.* / restore.* / export.* events) */
    "CREATE TABLE ckpt_ops (\n"
    "  run         INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,\n"
    "  kind        TEXT NOT NULL CHECK (kind IN ('save','restore','export')),\n"
    "  host        TEXT,\n"
    "  step        INTEGER,\n"
    "  prefix      TEXT,\n"
    "  outcome     TEXT NOT NULL CHECK (outcome IN ('ok','failed','unfinished')),\n"
    "  error       TEXT,\n"
    "  started_ms  INTEGER,\n"
    "  duration_ms INTEGER\n"
    ");\n"
    "CREATE INDEX ckpt_ops_by_run ON ckpt_ops(run, kind);\n"
    "CREATE VIEW saves AS\n"
    "  SELECT run, host, step, prefix, outcome, error, started_ms, duration_ms\n"
    "  FROM ckpt_ops WHERE kind = 'save';\n"
    "CREATE VIEW restores AS\n"
    "  SELECT run, host, step, prefix, outcome, error, started_ms, duration_ms\n"
    "  FROM ckpt_ops WHERE kind = 'restore';\n"
    "CREATE VIEW exports AS\n"
    "  SELECT run, host, step, prefix, outcome, error, started_ms, duration_ms\n"
    "  FROM ckpt_ops WHERE kind = 'export';\n",

    /* 3: a process the harness ended at the run's end (not a fault, not a
     * crash); the text of every scenario run (faultline replay) */
    "ALTER TABLE processes ADD COLUMN stopped_at_end INTEGER NOT NULL DEFAULT 0;\n"
    "CREATE TABLE scenario_texts (\n"
    "  hash TEXT PRIMARY KEY,\n"
    "  text TEXT NOT NULL\n"
    ");\n",

    /* 4: faults.idx counts from 1, as faultline's messages number faults */
    "UPDATE faults SET idx = idx + 1 WHERE idx IS NOT NULL;\n",

    /* 5: the notes printed under a run's verdict (a fault that could not
     * reach a program), one a line */
    "ALTER TABLE runs ADD COLUMN notes TEXT;\n",

    /* 6: the faults of a run that never fired, with the note said of each */
    "CREATE TABLE unfired_faults (\n"
    "  run     INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,\n"
    "  idx     INTEGER NOT NULL,\n"
    "  kind    TEXT NOT NULL,\n"
    "  target  TEXT,\n"
    "  line    INTEGER,\n"
    "  note    TEXT NOT NULL,\n"
    "  PRIMARY KEY (run, idx)\n"
    ");\n",

    /* 7: when `faultline gc` cleaned up after a run whose harness was killed
     * (its logs kept, its disks removed) */
    "ALTER TABLE runs ADD COLUMN gc_at INTEGER;\n",

    /* 8: where a fault hit, where the harness can tell (a disk fault by
     * path: each operation and path, how many times) */
    "ALTER TABLE faults ADD COLUMN hits TEXT;\n",

    /* 9: the processes whose logs are a failed run's evidence (the last
     * generation of each failing task), as the JUnit XML and the HTML
     * report show their last lines */
    "ALTER TABLE processes ADD COLUMN failing INTEGER NOT NULL DEFAULT 0;\n",

    /* 10: the run ran without root, in a user namespace of the harness's
     * own (harness/sys/rootless.c), and as which user of the machine */
    "ALTER TABLE runs ADD COLUMN rootless INTEGER NOT NULL DEFAULT 0;\n"
    "ALTER TABLE runs ADD COLUMN uid INTEGER;\n",
};

_Static_assert(sizeof migrations / sizeof migrations[0] == FL_REC_SCHEMA_VERSION,
               "FL_REC_SCHEMA_VERSION must equal the number of migrations");

/* ---- queued rows ------------------------------------------------------------- */

enum qstmt {
    Q_PROC_START,
    Q_PROC_END,
    Q_PROC_FAILING,
    Q_EVENT,
    Q_FAULT,
    Q_FAULT_HEAL,
    Q_FAULT_HITS,
    Q_UNFIRED,
    Q_CHECK,
    Q_OP,
    Q_RUN_END,
    Q_RUN_NOTES,
    Q_NSTMT,
};

static const char *const qsql[Q_NSTMT] = {
    [Q_PROC_START] = "INSERT INTO processes(run, proc_no, host, job, task, pid, command,"
                     " started_ms, log_path, generation) VALUES (?,?,?,?,?,?,?,?,?,?)",
    [Q_PROC_END] = "UPDATE processes SET ended_ms = ?3, exit_code = ?4, signal = ?5,"
                   " core_dumped = ?6, stopped_at_end = ?7 WHERE run = ?1 AND proc_no = ?2",
    [Q_PROC_FAILING] = "UPDATE processes SET failing = 1 WHERE run = ?1 AND proc_no = ?2",
    [Q_EVENT] = "INSERT INTO events(run, t_ms, host, job, task, kind, attrs, sync)"
                " VALUES (?,?,?,?,?,?,?,?)",
    [Q_FAULT] = "INSERT INTO faults(run, fault_no, idx, kind, target, detail, applied_ms, error)"
                " VALUES (?,?,?,?,?,?,?,?)",
    [Q_FAULT_HEAL] = "UPDATE faults SET healed_ms = ?3 WHERE run = ?1 AND fault_no = ?2",
    [Q_FAULT_HITS] = "UPDATE faults SET hits = ?3 WHERE run = ?1 AND fault_no = ?2",
    [Q_UNFIRED] = "INSERT INTO unfired_faults(run, idx, kind, target, line, note)"
                  " VALUES (?,?,?,?,?,?)",
    [Q_CHECK] = "INSERT INTO checks(run, name, target, passed, expected, observed, line)"
                " VALUES (?,?,?,?,?,?,?)",
    [Q_OP] = "INSERT INTO ckpt_ops(run, kind, host, step, prefix, outcome, error, started_ms,"
             " duration_ms) VALUES (?,?,?,?,?,?,?,?,?)",
    [Q_RUN_END] = "UPDATE runs SET verdict = ?2, reason = ?3, duration_ms = ?4 WHERE id = ?1",
    [Q_RUN_NOTES] = "UPDATE runs SET notes = ?2 WHERE id = ?1",
};

/* how long a busy database is waited for before it is said on stderr */
#define FL_REC_BUSY_SAY_MS 1000
/* with nowait, how long after a busy flush the next one is tried */
#define FL_REC_BUSY_RETRY_MS 100
/* how long a busy database is waited for once an interrupt is pending */
#define FL_REC_BUSY_INTERRUPTED_MS 1000

#define QMAXV 10

enum qtype { QV_NULL, QV_INT, QV_TEXT };

struct qval {
    enum qtype type;
    int64_t i;  /* QV_INT: value; QV_TEXT: offset into the arena */
    size_t len; /* QV_TEXT */
};

struct qrow {
    enum qstmt stmt;
    int n;
    struct qval v[QMAXV];
};

struct open_op { /* a save/restore/export begun, not yet done */
    char *host, *kind, *step, *prefix;
    int64_t t_ms;
    struct open_op *next;
};

struct fl_rec {
    sqlite3 *db;
    char *path;
    struct fl_rec_opts opts;
    sqlite3_stmt *stmt[Q_NSTMT];
    struct qrow *rows;
    size_t nrows, caprows;
    char *arena;
    size_t arena_len, arena_cap;
    int64_t oldest_ms;     /* monotonic ms of the first queued row */
    int nruns;             /* run handles alive */
    int64_t busy_since_ms; /* busy_wait: when the current wait began */
    bool busy_said;        /* busy_wait: said on stderr that it waits */
    bool nowait;           /* fl_rec_set_nowait: a busy database is not waited for */
    int64_t retry_ms;      /* nowait: the queue was kept, busy; no flush before this */
    size_t lost;           /* rows (and runs rows) that could not be written */
    char errmsg[512];
    char lost_msg[512]; /* why the first of them was lost */
};

struct fl_rec_run {
    struct fl_rec *rec;
    int64_t rowid;
    char *run_id;
    int next_proc, next_fault;
    struct open_op *ops;
};

static int64_t unix_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* SQLite result code -> negative errno. */
static int sqlite_errno(int rc)
{
    switch (rc & 0xff) {
    case SQLITE_OK: return 0;
    case SQLITE_BUSY:
    case SQLITE_LOCKED: return -EBUSY;
    case SQLITE_NOMEM: return -ENOMEM;
    case SQLITE_READONLY: return -EROFS;
    case SQLITE_FULL: return -ENOSPC;
    case SQLITE_PERM:
    case SQLITE_AUTH: return -EACCES;
    case SQLITE_CANTOPEN: return -ENOENT;
    case SQLITE_NOTADB:
    case SQLITE_CORRUPT: return -EINVAL;
    case SQLITE_CONSTRAINT: return -EEXIST;
    default: return -EIO;
    }
}

static int db_fail(struct fl_rec *rec, int rc, const char *what)
{
    fl_text_set(rec->errmsg, sizeof rec->errmsg, "database %s: %s: %s", rec->path, what,
                sqlite3_errmsg(rec->db));
    return sqlite_errno(rc);
}

/* ---- the queue ----------------------------------------------------------------- */

struct qbuild {
    struct fl_rec *rec;
    struct qrow *row;
    int err;
};

static struct qbuild q_begin(struct fl_rec *rec, enum qstmt s)
{
    struct qbuild b = {rec, NULL, 0};
    if (rec->nrows == rec->caprows) {
        size_t cap = rec->caprows ? rec->caprows * 2 : 256;
        struct qrow *r = realloc(rec->rows, cap * sizeof *r);
        if (!r) {
            b.err = -ENOMEM;
            return b;
        }
        rec->rows = r;
        rec->caprows = cap;
    }
    b.row = &rec->rows[rec->nrows];
    b.row->stmt = s;
    b.row->n = 0;
    return b;
}

static void q_int(struct qbuild *b, int64_t v)
{
    if (b->err)
        return;
    b->row->v[b->row->n++] = (struct qval){QV_INT, v, 0};
}

static void q_null(struct qbuild *b)
{
    if (b->err)
        return;
    b->row->v[b->row->n++] = (struct qval){QV_NULL, 0, 0};
}

static void q_text(struct qbuild *b, const char *s)
{
    if (b->err)
        return;
    if (!s) {
        q_null(b);
        return;
    }
    struct fl_rec *rec = b->rec;
    size_t len = strlen(s);
    if (rec->arena_len + len > rec->arena_cap) {
        size_t cap = rec->arena_cap ? rec->arena_cap : 16384;
        while (cap < rec->arena_len + len)
            cap *= 2;
        char *a = realloc(rec->arena, cap);
        if (!a) {
            b->err = -ENOMEM;
            return;
        }
        rec->arena = a;
        rec->arena_cap = cap;
    }
    memcpy(rec->arena + rec->arena_len, s, len);
    b->row->v[b->row->n++] = (struct qval){QV_TEXT, (int64_t)rec->arena_len, len};
    rec->arena_len += len;
}

static bool flush_due(const struct fl_rec *rec)
{
    if (!rec->nrows || (rec->retry_ms && fl_mono_ms() < rec->retry_ms))
        return false;
    return rec->nrows >= (size_t)rec->opts.flush_rows ||
           fl_mono_ms() - rec->oldest_ms >= rec->opts.flush_interval_ms;
}

/* Queues the row; flushes when a threshold is reached. */
static int q_end(struct qbuild *b, bool may_flush)
{
    struct fl_rec *rec = b->rec;
    if (b->err) {
        fl_text_set(rec->errmsg, sizeof rec->errmsg, "database %s: out of memory queueing a row",
                    rec->path);
        return b->err;
    }
    if (rec->nrows == 0)
        rec->oldest_ms = fl_mono_ms();
    rec->nrows++;
    if (!may_flush || !flush_due(rec))
        return 0;
    int rc = fl_rec_flush(rec);
    return rc == -EBUSY && rec->nrows ? 0 : rc; /* busy: kept, written later */
}

static int get_stmt(struct fl_rec *rec, enum qstmt s, sqlite3_stmt **out)
{
    if (!rec->stmt[s]) {
        int rc = sqlite3_prepare_v3(rec->db, qsql[s], -1, SQLITE_PREPARE_PERSISTENT, &rec->stmt[s],
                                    NULL);
        if (rc != SQLITE_OK)
            return db_fail(rec, rc, "preparing a statement");
    }
    *out = rec->stmt[s];
    return 0;
}

static int write_row(struct fl_rec *rec, const struct qrow *row)
{
    sqlite3_stmt *st = NULL;
    int err = get_stmt(rec, row->stmt, &st);
    if (err)
        return err;
    for (int i = 0; i < row->n; i++) {
        const struct qval *v = &row->v[i];
        switch (v->type) {
        case QV_NULL: sqlite3_bind_null(st, i + 1); break;
        case QV_INT: sqlite3_bind_int64(st, i + 1, v->i); break;
        case QV_TEXT:
            sqlite3_bind_text(st, i + 1, rec->arena + v->i, (int)v->len, SQLITE_STATIC);
            break;
        }
    }
    int rc = sqlite3_step(st);
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    if (rc != SQLITE_DONE)
        return db_fail(rec, rc, "writing a row");
    return 0;
}

static int exec(struct fl_rec *rec, const char *sql)
{
    int rc = sqlite3_exec(rec->db, sql, NULL, NULL, NULL);
    if (rc != SQLITE_OK)
        return db_fail(rec, rc, sql);
    return 0;
}

/* Writes the queue, then calls extra (if any), in one transaction.  The queue
 * is empty afterwards whatever happens. */
static int flush_with(struct fl_rec *rec, int (*extra)(struct fl_rec *, void *), void *arg)
{
    int err = 0;
    if (!rec->nrows && !extra)
        return 0;
    err = exec(rec, "BEGIN IMMEDIATE");
    if (err == -EBUSY && rec->nowait && !extra) {
        /* another writer holds the database: keep the queue, try later */
        rec->retry_ms = fl_mono_ms() + FL_REC_BUSY_RETRY_MS;
        return err;
    }
    if (err)
        goto cleanup;
    for (size_t i = 0; i < rec->nrows && !err; i++)
        err = write_row(rec, &rec->rows[i]);
    if (!err && extra)
        err = extra(rec, arg);
    if (!err)
        err = exec(rec, "COMMIT");
    if (err && !sqlite3_get_autocommit(rec->db))
        sqlite3_exec(rec->db, "ROLLBACK", NULL, NULL, NULL);
cleanup:
    if (err) {
        if (!rec->lost)
            snprintf(rec->lost_msg, sizeof rec->lost_msg, "%s", rec->errmsg);
        rec->lost += rec->nrows + (extra != NULL);
    }
    rec->nrows = 0;
    rec->arena_len = 0;
    rec->retry_ms = 0;
    return err;
}

int fl_rec_flush(struct fl_rec *rec)
{
    return flush_with(rec, NULL, NULL);
}

size_t fl_rec_lost(const struct fl_rec *rec, const char **why)
{
    if (why)
        *why = rec->lost ? rec->lost_msg : "";
    return rec->lost;
}

int64_t fl_rec_flush_due_ms(const struct fl_rec *rec)
{
    if (!rec->nrows)
        return -1;
    int64_t now = fl_mono_ms();
    if (rec->retry_ms && now < rec->retry_ms)
        return rec->retry_ms - now;
    if (rec->nrows >= (size_t)rec->opts.flush_rows)
        return 0;
    int64_t left = rec->oldest_ms + rec->opts.flush_interval_ms - now;
    return left < 0 ? 0 : left;
}

void fl_rec_set_nowait(struct fl_rec *rec, bool nowait)
{
    rec->nowait = nowait;
    if (!nowait)
        rec->retry_ms = 0;
}

size_t fl_rec_pending(const struct fl_rec *rec)
{
    return rec->nrows;
}

/* ---- open, migrate, close --------------------------------------------------------- */

static int mkdir_parents(const char *path, char *err, size_t errlen)
{
    char buf[PATH_MAX];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) {
        fl_text_set(err, errlen, "database path too long: %s", path);
        return -ENAMETOOLONG;
    }
    char *slash = strrchr(buf, '/');
    if (!slash || slash == buf)
        return 0;
    *slash = '\0';
    for (char *p = buf + 1;; p++) {
        if (*p == '/' || *p == '\0') {
            char c = *p;
            *p = '\0';
            if (mkdir(buf, 0777) < 0 && errno != EEXIST) {
                int e = errno;
                fl_text_set(err, errlen, "cannot create directory %s for database %s: %s", buf,
                            path, strerror(e));
                return -e;
            }
            if (!c)
                break;
            *p = c;
        }
    }
    return 0;
}

int fl_rec_int_query(sqlite3 *db, const char *sql, int *v)
{
    sqlite3_stmt *st;
    int rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
    if (rc != SQLITE_OK)
        return rc;
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        *v = sqlite3_column_int(st, 0);
        rc = SQLITE_OK;
    }
    sqlite3_finalize(st);
    return rc;
}

static int user_version(sqlite3 *db, int *v)
{
    return fl_rec_int_query(db, "PRAGMA user_version", v);
}

static int too_new(const char *path, int v, char *err, size_t errlen)
{
    fl_text_set(err, errlen,
                "database %s has schema version %d, this faultline knows up to %d; "
                "use a newer faultline or another --db",
                path, v, FL_REC_SCHEMA_VERSION);
    return -EPROTO;
}

int fl_rec_schema_migrate(sqlite3 *db, const char *path, int target, char *err, size_t errlen)
{
    int v = 0, rc, ret = 0;
    if (target < 0 || target > FL_REC_SCHEMA_VERSION) {
        fl_text_set(err, errlen, "no schema version %d (this faultline knows up to %d)", target,
                    FL_REC_SCHEMA_VERSION);
        return -EINVAL;
    }
    rc = user_version(db, &v);
    if (rc != SQLITE_OK)
        goto sqlerr;
    if (v > FL_REC_SCHEMA_VERSION)
        return too_new(path, v, err, errlen);
    if (v >= target)
        return 0;
    rc = sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
    if (rc != SQLITE_OK)
        goto sqlerr;
    /* Another process may have migrated while we waited for the lock. */
    rc = user_version(db, &v);
    if (rc != SQLITE_OK)
        goto rollback;
    if (v > FL_REC_SCHEMA_VERSION) {
        sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
        return too_new(path, v, err, errlen);
    }
    for (; v < target; v++) {
        char pragma[64];
        rc = sqlite3_exec(db, migrations[v], NULL, NULL, NULL);
        if (rc != SQLITE_OK) {
            fl_text_set(err, errlen, "database %s: migrating schema from version %d to %d: %s",
                        path, v, v + 1, sqlite3_errmsg(db));
            ret = sqlite_errno(rc);
            sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
            return ret;
        }
        snprintf(pragma, sizeof pragma, "PRAGMA user_version = %d", v + 1);
        rc = sqlite3_exec(db, pragma, NULL, NULL, NULL);
        if (rc != SQLITE_OK)
            goto rollback;
    }
    rc = sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
    if (rc != SQLITE_OK)
        goto rollback;
    return 0;
rollback:
    fl_text_set(err, errlen, "database %s: schema migration: %s", path, sqlite3_errmsg(db));
    ret = sqlite_errno(rc);
    sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    return ret;
sqlerr:
    fl_text_set(err, errlen, "database %s: reading schema version: %s", path, sqlite3_errmsg(db));
    return sqlite_errno(rc);
}

/* SIGINT, SIGTERM or SIGHUP is pending: the engine blocks them and takes
 * them from its loop, so a wait here would otherwise hold them back. */
static bool interrupt_pending(void)
{
    sigset_t set;
    return sigpending(&set) == 0 &&
           (sigismember(&set, SIGINT) || sigismember(&set, SIGTERM) || sigismember(&set, SIGHUP));
}

/* Busy handler: SQLite's default one sleeps in growing steps (up to 100 ms)
 * while another process holds the write lock, which makes a flush wait far
 * longer than the few milliseconds a batch holds the lock.  This one retries
 * every 0.25 ms at first, then every 1 ms, until busy_timeout_ms has passed,
 * or FL_REC_BUSY_INTERRUPTED_MS once an interrupt is pending (a Ctrl-C is
 * then seen within about a second, not at the end of a 30 s wait). */
static int busy_wait(void *arg, int count)
{
    struct fl_rec *rec = arg;
    int64_t now = fl_mono_ms();
    if (rec->nowait)
        return 0; /* during a run: the queue is kept and written later */
    if (count == 0) {
        rec->busy_since_ms = now;
        rec->busy_said = false;
    }
    if (!rec->busy_said && now - rec->busy_since_ms >= FL_REC_BUSY_SAY_MS) {
        fprintf(stderr,
                "faultline: database %s is busy (another process is writing it); waiting up to "
                "%d s\n",
                rec->path, rec->opts.busy_timeout_ms / 1000);
        rec->busy_said = true;
    }
    int64_t limit = rec->opts.busy_timeout_ms;
    if (limit > FL_REC_BUSY_INTERRUPTED_MS && interrupt_pending())
        limit = FL_REC_BUSY_INTERRUPTED_MS;
    if (now - rec->busy_since_ms >= limit)
        return 0;
    usleep(count < 40 ? 250 : 1000);
    return 1;
}

/* PRAGMA journal_mode=WAL; a concurrent opener may hold a lock briefly. */
static int set_wal(sqlite3 *db, int timeout_ms)
{
    int waited = 0, rc;
    for (;;) {
        rc = sqlite3_exec(db, "PRAGMA journal_mode=WAL", NULL, NULL, NULL);
        if ((rc & 0xff) != SQLITE_BUSY || waited >= timeout_ms ||
            (waited >= FL_REC_BUSY_INTERRUPTED_MS && interrupt_pending()))
            return rc;
        usleep(10000);
        waited += 10;
    }
}

/* Before recording into it: a database that cannot be written, or whose
 * pages are damaged, would take the rows and lose them (SQLite finds damage
 * only when it reads the damaged page, maybe long after).  PRAGMA quick_check
 * reads every page once (a quarter of a second for 170 MB here). */
static int check_writable(struct fl_rec *rec, char *err, size_t errlen)
{
    if (sqlite3_db_readonly(rec->db, "main") == 1) {
        fl_text_set(err, errlen,
                    "database %s cannot be written (read-only file or directory, or an immutable "
                    "file): record into another with --db NEW, or make it writable",
                    rec->path);
        return -EROFS;
    }
    sqlite3_stmt *st;
    int rc = sqlite3_prepare_v2(rec->db, "PRAGMA quick_check(1)", -1, &st, NULL);
    const char *what = NULL;
    char first[256] = "";
    if (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        const char *t = (const char *)sqlite3_column_text(st, 0);
        if (t && strcmp(t, "ok")) {
            /* "*** in database main ***\nOn tree page 2 cell 1: ..." */
            const char *nl = strchr(t, '\n');
            snprintf(first, sizeof first, "%s", !strncmp(t, "***", 3) && nl ? nl + 1 : t);
            for (char *c = first; *c; c++)
                if (*c == '\n')
                    *c = ' ';
        }
        rc = SQLITE_OK;
    }
    if (rc != SQLITE_OK)
        what = sqlite3_errmsg(rec->db);
    else if (first[0])
        what = first;
    sqlite3_finalize(st);
    if (!what)
        return 0;
    fl_text_set(
        err, errlen,
        "database %s is damaged (%s): record into another with --db NEW, or recover what it "
        "holds with: sqlite3 %s .recover | sqlite3 NEW.db",
        rec->path, what, rec->path);
    return -EUCLEAN;
}

int fl_rec_open(struct fl_rec **out, const char *path, const struct fl_rec_opts *opts, char *err,
                size_t errlen)
{
    struct fl_rec *rec = NULL;
    int ret, rc;

    *out = NULL;
    if (err && errlen)
        err[0] = '\0';
    if (!path || !*path) {
        fl_text_set(err, errlen, "no database path given");
        return -EINVAL;
    }
    ret = mkdir_parents(path, err, errlen);
    if (ret)
        return ret;
    rec = calloc(1, sizeof *rec);
    if (!rec || !(rec->path = strdup(path))) {
        fl_text_set(err, errlen, "database %s: out of memory", path);
        ret = -ENOMEM;
        goto cleanup;
    }
    if (opts)
        rec->opts = *opts;
    if (rec->opts.busy_timeout_ms <= 0)
        rec->opts.busy_timeout_ms = 30000;
    if (rec->opts.flush_rows <= 0)
        rec->opts.flush_rows = 1024;
    if (rec->opts.flush_interval_ms <= 0)
        rec->opts.flush_interval_ms = 250;

    rc = sqlite3_open_v2(path, &rec->db,
                         SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc != SQLITE_OK) {
        int e = rec->db ? sqlite3_system_errno(rec->db) : 0;
        fl_text_set(err, errlen, "cannot open database %s: %s%s%s", path,
                    rec->db ? sqlite3_errmsg(rec->db) : sqlite3_errstr(rc), e ? ": " : "",
                    e ? strerror(e) : "");
        ret = e ? -e : sqlite_errno(rc);
        goto cleanup;
    }
    sqlite3_extended_result_codes(rec->db, 0);
    sqlite3_busy_handler(rec->db, busy_wait, rec);
    rc = set_wal(rec->db, rec->opts.busy_timeout_ms);
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(rec->db, "PRAGMA foreign_keys=ON; PRAGMA synchronous=NORMAL", NULL, NULL,
                          NULL);
    if (rc != SQLITE_OK) {
        fl_text_set(err, errlen, "cannot use database %s: %s", path, sqlite3_errmsg(rec->db));
        ret = sqlite_errno(rc);
        goto cleanup;
    }
    ret = fl_rec_schema_migrate(rec->db, path, FL_REC_SCHEMA_VERSION, err, errlen);
    if (ret)
        goto cleanup;
    if (!rec->opts.read_only && (ret = check_writable(rec, err, errlen)) < 0)
        goto cleanup;
    *out = rec;
    return 0;
cleanup:
    fl_rec_close(rec);
    return ret;
}

int fl_rec_close(struct fl_rec *rec)
{
    int err = 0;
    if (!rec)
        return 0;
    if (rec->db && rec->nrows)
        err = fl_rec_flush(rec);
    for (int i = 0; i < Q_NSTMT; i++)
        sqlite3_finalize(rec->stmt[i]);
    if (rec->db)
        sqlite3_close_v2(rec->db);
    free(rec->rows);
    free(rec->arena);
    free(rec->path);
    free(rec);
    return err;
}

struct sqlite3 *fl_rec_db(struct fl_rec *rec)
{
    return rec->db;
}

const char *fl_rec_path(const struct fl_rec *rec)
{
    return rec->path;
}

const char *fl_rec_errmsg(const struct fl_rec *rec)
{
    return rec->errmsg;
}

/* ---- runs -------------------------------------------------------------------------- */

struct begin_ctx {
    const struct fl_rec_run_info *info;
    const char *hostname;
    int64_t started;
    int64_t rowid;
};

/* The scenario's text, once per distinct text (keyed by its hash). */
static int insert_text(struct fl_rec *rec, const struct fl_rec_run_info *in)
{
    if (!in->scenario_text || !in->scenario_hash)
        return 0;
    sqlite3_stmt *st;
    int rc = sqlite3_prepare_v2(rec->db,
                                "INSERT INTO scenario_texts(hash, text) VALUES (?,?)"
                                " ON CONFLICT(hash) DO NOTHING",
                                -1, &st, NULL);
    if (rc != SQLITE_OK)
        return db_fail(rec, rc, "preparing the scenario text insert");
    sqlite3_bind_text(st, 1, in->scenario_hash, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, in->scenario_text, (int)in->scenario_text_len, SQLITE_STATIC);
    rc = sqlite3_step(st);
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? 0 : db_fail(rec, rc, "recording the scenario's text");
}

static int insert_run(struct fl_rec *rec, void *arg)
{
    struct begin_ctx *c = arg;
    const struct fl_rec_run_info *in = c->info;
    sqlite3_stmt *st;
    int e0 = insert_text(rec, in);
    if (e0)
        return e0;
    int rc = sqlite3_prepare_v2(rec->db,
                                "INSERT INTO runs(run_id, scenario, scenario_file, variant,"
                                " scenario_hash, seed, git_rev, hostname, started_at,"
                                " rootless, uid) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                                -1, &st, NULL);
    if (rc != SQLITE_OK)
        return db_fail(rec, rc, "preparing the run insert");
    sqlite3_bind_text(st, 1, in->run_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, in->scenario, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, in->scenario_file, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 4, in->variant ? in->variant : "", -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 5, in->scenario_hash, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 6, (int64_t)in->seed);
    sqlite3_bind_text(st, 7, in->git_rev, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 8, c->hostname, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 9, c->started);
    sqlite3_bind_int(st, 10, in->rootless);
    sqlite3_bind_int64(st, 11, in->uid);
    rc = sqlite3_step(st);
    if (rc != SQLITE_DONE) {
        int e = db_fail(rec, rc, "recording the start of a run");
        if (rc == SQLITE_CONSTRAINT)
            fl_text_set(rec->errmsg, sizeof rec->errmsg, "database %s: run %s is already recorded",
                        rec->path, in->run_id);
        sqlite3_finalize(st);
        return e;
    }
    sqlite3_finalize(st);
    c->rowid = sqlite3_last_insert_rowid(rec->db);
    return 0;
}

int fl_rec_run_begin(struct fl_rec *rec, const struct fl_rec_run_info *info,
                     struct fl_rec_run **out)
{
    char host[256];
    struct begin_ctx c = {info, info->hostname, info->started_at_ms, 0};
    struct fl_rec_run *run;
    int err;

    *out = NULL;
    if (!info->run_id || !*info->run_id || !info->scenario) {
        fl_text_set(rec->errmsg, sizeof rec->errmsg, "run without run id or scenario name");
        return -EINVAL;
    }
    if (!c.hostname) {
        if (gethostname(host, sizeof host) < 0)
            snprintf(host, sizeof host, "unknown");
        host[sizeof host - 1] = '\0';
        c.hostname = host;
    }
    if (!c.started)
        c.started = unix_ms();
    run = calloc(1, sizeof *run);
    if (!run || !(run->run_id = strdup(info->run_id))) {
        free(run);
        return -ENOMEM;
    }
    err = flush_with(rec, insert_run, &c);
    if (err) {
        free(run->run_id);
        free(run);
        return err;
    }
    run->rec = rec;
    run->rowid = c.rowid;
    rec->nruns++;
    *out = run;
    return 0;
}

int64_t fl_rec_run_rowid(const struct fl_rec_run *run)
{
    return run->rowid;
}

const char *fl_rec_run_id(const struct fl_rec_run *run)
{
    return run->run_id;
}

static void free_op(struct open_op *op)
{
    free(op->host);
    free(op->kind);
    free(op->step);
    free(op->prefix);
    free(op);
}

static int queue_op(struct fl_rec_run *run, const char *kind, const char *host, const char *step,
                    const char *prefix, const char *outcome, const char *error, int64_t started_ms,
                    int64_t duration_ms, bool may_flush);

int fl_rec_run_end(struct fl_rec_run *run, const char *verdict, const char *reason,
                   int64_t duration_ms)
{
    struct fl_rec *rec = run->rec;
    int err = 0;

    if (!verdict ||
        (strcmp(verdict, "pass") && strcmp(verdict, "fail") && strcmp(verdict, "error"))) {
        fl_text_set(rec->errmsg, sizeof rec->errmsg,
                    "run %s: verdict '%s' is not pass, fail or error", run->run_id,
                    verdict ? verdict : "(null)");
        verdict = "error";
        reason = "recorder: invalid verdict";
        err = -EINVAL;
    }
    while (run->ops) {
        struct open_op *op = run->ops;
        run->ops = op->next;
        int e = queue_op(run, op->kind, op->host, op->step, op->prefix, "unfinished", NULL,
                         op->t_ms, -1, false);
        if (e && !err)
            err = e;
        free_op(op);
    }
    /* Twice at most: when the batch with the verdict fails (a bad row, a
     * lock held too long), the verdict alone is tried once more, so that a
     * finished run does not stay 'running'. */
    for (int attempt = 0; attempt < 2; attempt++) {
        struct qbuild b = q_begin(rec, Q_RUN_END);
        q_int(&b, run->rowid);
        q_text(&b, verdict);
        q_text(&b, reason);
        if (duration_ms >= 0)
            q_int(&b, duration_ms);
        else
            q_null(&b);
        int e = q_end(&b, false);
        if (!e)
            e = fl_rec_flush(rec);
        if (e && !err)
            err = e;
        if (!e)
            break;
    }
    rec->nruns--;
    free(run->run_id);
    free(run);
    return err;
}

int fl_rec_mark_abandoned(struct fl_rec *rec, const char *run_id, const char *reason)
{
    char v[16];
    sqlite3_stmt *st;
    int rc, err;

    err = fl_rec_flush(rec);
    if (err)
        return err;
    rc = sqlite3_prepare_v2(rec->db,
                            "UPDATE runs SET verdict = 'error', reason = ?2"
                            " WHERE run_id = ?1 AND verdict = 'running'",
                            -1, &st, NULL);
    if (rc != SQLITE_OK)
        return db_fail(rec, rc, "preparing mark abandoned");
    sqlite3_bind_text(st, 1, run_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, reason ? reason : "harness killed", -1, SQLITE_STATIC);
    rc = sqlite3_step(st);
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE)
        return db_fail(rec, rc, "marking a run abandoned");
    if (sqlite3_changes(rec->db) == 1)
        return 0;
    err = fl_rec_run_verdict(rec, run_id, v, sizeof v);
    return err ? err : -EALREADY;
}

int fl_rec_mark_collected(struct fl_rec *rec, const char *run_id, int64_t gc_at_ms)
{
    sqlite3_stmt *st;
    int err = fl_rec_flush(rec);
    if (err)
        return err;
    int rc =
        sqlite3_prepare_v2(rec->db, "UPDATE runs SET gc_at = ?2 WHERE run_id = ?1", -1, &st, NULL);
    if (rc != SQLITE_OK)
        return db_fail(rec, rc, "preparing mark collected");
    sqlite3_bind_text(st, 1, run_id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, gc_at_ms);
    rc = sqlite3_step(st);
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE)
        return db_fail(rec, rc, "marking a run collected");
    return sqlite3_changes(rec->db) == 1 ? 0 : -ENOENT;
}

bool fl_rec_db_has_run(const char *path, const char *run_id)
{
    struct stat sb;
    if (!path[0] || lstat(path, &sb) < 0 || !S_ISREG(sb.st_mode))
        return false;
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    bool found = false;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, NULL) == SQLITE_OK &&
        sqlite3_busy_timeout(db, 30000) == SQLITE_OK &&
        sqlite3_prepare_v2(db, "SELECT 1 FROM runs WHERE run_id = ?", -1, &st, NULL) == SQLITE_OK &&
        sqlite3_bind_text(st, 1, run_id, -1, SQLITE_STATIC) == SQLITE_OK)
        found = sqlite3_step(st) == SQLITE_ROW;
    sqlite3_finalize(st);
    sqlite3_close(db);
    return found;
}

int fl_rec_run_verdict(struct fl_rec *rec, const char *run_id, char *buf, size_t len)
{
    sqlite3_stmt *st;
    int rc =
        sqlite3_prepare_v2(rec->db, "SELECT verdict FROM runs WHERE run_id = ?", -1, &st, NULL);
    if (rc != SQLITE_OK)
        return db_fail(rec, rc, "preparing a verdict query");
    sqlite3_bind_text(st, 1, run_id, -1, SQLITE_STATIC);
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        snprintf(buf, len, "%s", (const char *)sqlite3_column_text(st, 0));
        sqlite3_finalize(st);
        return 0;
    }
    sqlite3_finalize(st);
    if (rc == SQLITE_DONE)
        return -ENOENT;
    return db_fail(rec, rc, "reading a verdict");
}

int fl_rec_make_run_id(char *buf, size_t len, int64_t ms)
{
    unsigned char r[3];
    struct tm tm;
    time_t t = (time_t)(ms / 1000);
    if (len < 23)
        return -ENOSPC;
    if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r) {
        uint64_t x = (uint64_t)unix_ms() ^ ((uint64_t)getpid() << 20);
        r[0] = (unsigned char)x;
        r[1] = (unsigned char)(x >> 8);
        r[2] = (unsigned char)(x >> 16);
    }
    if (!localtime_r(&t, &tm))
        return -EINVAL;
    snprintf(buf, len, "%04d%02d%02d-%02d%02d%02d-%02x%02x%02x", tm.tm_year + 1900, tm.tm_mon + 1,
             tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, r[0], r[1], r[2]);
    return 0;
}

/* Runs argv, captures up to len-1 bytes of stdout; returns exit status or -errno. */
static int capture(char *const argv[], char *buf, size_t len)
{
    int fds[2], status;
    size_t got = 0;
    pid_t pid;

    if (pipe2(fds, O_CLOEXEC) < 0)
        return -errno;
    pid = fork();
    if (pid < 0) {
        int e = errno;
        close(fds[0]);
        close(fds[1]);
        return -e;
    }
    if (pid == 0) {
        int devnull = open("/dev/null", O_RDWR);
        dup2(fds[1], 1);
        if (devnull >= 0) {
            dup2(devnull, 0);
            dup2(devnull, 2);
        }
        execvp(argv[0], argv);
        _exit(127);
    }
    close(fds[1]);
    for (;;) {
        char tmp[256];
        ssize_t n = read(fds[0], got + 1 < len ? buf + got : tmp,
                         got + 1 < len ? len - 1 - got : sizeof tmp);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        if (got + 1 < len)
            got += (size_t)n;
    }
    close(fds[0]);
    if (len)
        buf[got] = '\0';
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return -errno;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int fl_rec_git_revision(const char *dir, char *buf, size_t len)
{
    char rev[64], status[8];
    char *rev_argv[] = {"git", "-C", (char *)dir, "rev-parse", "--short=12", "HEAD", NULL};
    char *st_argv[] = {"git", "-C", (char *)dir, "status", "--porcelain", "--untracked-files=no",
                       NULL};
    int rc = capture(rev_argv, rev, sizeof rev);
    if (rc < 0)
        return rc;
    rev[strcspn(rev, "\r\n")] = '\0';
    if (rc != 0 || !rev[0])
        return -ENOENT;
    rc = capture(st_argv, status, sizeof status);
    if ((size_t)snprintf(buf, len, "%s%s", rev, rc == 0 && status[0] ? "-dirty" : "") >= len)
        return -ENOSPC;
    return 0;
}

void fl_rec_git_resolve(const char *dir, const char *rev, char *buf, size_t len)
{
    char spec[512], out[64];
    size_t n = strlen(rev), hex = strspn(rev, "0123456789abcdefABCDEF");
    snprintf(buf, len, "%s", rev);
    if (!n || (size_t)snprintf(spec, sizeof spec, "%s^{commit}", rev) >= sizeof spec)
        return;
    char *argv[] = {"git",     "-C",         (char *)dir, "rev-parse", "--verify",
                    "--quiet", "--short=12", spec,        NULL};
    if (capture(argv, out, sizeof out) == 0) {
        out[strcspn(out, "\r\n")] = '\0';
        if (out[0]) {
            snprintf(buf, len, "%s", out);
            return;
        }
    }
    if (hex == n && n > 12 && len > 12)
        buf[12] = '\0';
}

/* ---- rows of a run ----------------------------------------------------------------- */

static void q_int_or_null(struct qbuild *b, int64_t v, bool null)
{
    if (null)
        q_null(b);
    else
        q_int(b, v);
}

int fl_rec_proc_start(struct fl_rec_run *run, const struct fl_rec_proc *p)
{
    int no = run->next_proc;
    struct qbuild b = q_begin(run->rec, Q_PROC_START);
    q_int(&b, run->rowid);
    q_int(&b, no);
    q_text(&b, p->host ? p->host : "");
    q_text(&b, p->job);
    q_int_or_null(&b, p->task, p->task < 0);
    q_int(&b, p->pid);
    q_text(&b, p->command);
    q_int(&b, p->started_ms);
    q_text(&b, p->log_path);
    q_int(&b, p->generation);
    int err = q_end(&b, true);
    if (err && b.err)
        return err;
    run->next_proc++;
    return err ? err : no;
}

int fl_rec_run_notes(struct fl_rec_run *run, const char *notes)
{
    struct qbuild b = q_begin(run->rec, Q_RUN_NOTES);
    q_int(&b, run->rowid);
    q_text(&b, notes);
    return q_end(&b, true);
}

int fl_rec_proc_end(struct fl_rec_run *run, int proc_no, int64_t ended_ms, int exit_code,
                    int signal, bool core_dumped, bool stopped_at_end)
{
    if (proc_no < 0 || proc_no >= run->next_proc)
        return -EINVAL;
    struct qbuild b = q_begin(run->rec, Q_PROC_END);
    q_int(&b, run->rowid);
    q_int(&b, proc_no);
    q_int(&b, ended_ms);
    q_int_or_null(&b, exit_code, exit_code < 0);
    q_int_or_null(&b, signal, signal <= 0);
    q_int(&b, core_dumped);
    q_int(&b, stopped_at_end);
    return q_end(&b, true);
}

int fl_rec_proc_failing(struct fl_rec_run *run, int proc_no)
{
    if (proc_no < 0 || proc_no >= run->next_proc)
        return -EINVAL;
    struct qbuild b = q_begin(run->rec, Q_PROC_FAILING);
    q_int(&b, run->rowid);
    q_int(&b, proc_no);
    return q_end(&b, true);
}

/* Finds key=value in attrs ("k=v k2=\"a b\""); returns a malloc'd value or NULL. */
static char *attr_get(const char *attrs, const char *key)
{
    size_t klen = strlen(key);
    const char *p = attrs;
    if (!attrs)
        return NULL;
    while (*p) {
        while (*p == ' ' || *p == '\t')
            p++;
        if (!*p)
            break;
        const char *k = p;
        while (*p && *p != '=' && *p != ' ' && *p != '\t')
            p++;
        size_t kl = (size_t)(p - k);
        bool match = kl == klen && !memcmp(k, key, klen);
        if (*p != '=')
            continue; /* a bare word */
        p++;
        char *val = malloc(strlen(p) + 1), *o = val;
        if (!val)
            return NULL;
        if (*p == '"') {
            p++;
            while (*p && *p != '"') {
                if (*p == '\\' && p[1]) {
                    p++;
                    switch (*p) {
                    case 'n': *o++ = '\n'; break;
                    case 't': *o++ = '\t'; break;
                    default: *o++ = *p;
                    }
                    p++;
                } else {
                    *o++ = *p++;
                }
            }
            if (*p == '"')
                p++;
        } else {
            while (*p && *p != ' ' && *p != '\t')
                *o++ = *p++;
        }
        *o = '\0';
        if (match)
            return val;
        free(val);
    }
    return NULL;
}

static int queue_op(struct fl_rec_run *run, const char *kind, const char *host, const char *step,
                    const char *prefix, const char *outcome, const char *error, int64_t started_ms,
                    int64_t duration_ms, bool may_flush)
{
    char *end = NULL;
    long long st = step ? strtoll(step, &end, 10) : 0;
    struct qbuild b = q_begin(run->rec, Q_OP);
    q_int(&b, run->rowid);
    q_text(&b, kind);
    q_text(&b, host);
    q_int_or_null(&b, st, !step || end == step);
    q_text(&b, prefix);
    q_text(&b, outcome);
    q_text(&b, error);
    q_int_or_null(&b, started_ms, started_ms < 0);
    q_int_or_null(&b, duration_ms, duration_ms < 0);
    return q_end(&b, may_flush);
}

static bool streq0(const char *a, const char *b)
{
    return strcmp(a ? a : "", b ? b : "") == 0;
}

/* Opens or closes a checkpoint operation from a save./restore./export. event. */
static int derive_op(struct fl_rec_run *run, int64_t t_ms, const char *host, const char *kind,
                     const char *attrs)
{
    static const char *const kinds[] = {"save", "restore", "export"};
    const char *dot = strchr(kind, '.');
    const char *okind = NULL;
    if (!dot)
        return 0;
    for (size_t i = 0; i < 3; i++)
        if ((size_t)(dot - kind) == strlen(kinds[i]) && !memcmp(kind, kinds[i], dot - kind))
            okind = kinds[i];
    const char *what = dot + 1;
    if (!okind || (strcmp(what, "begin") && strcmp(what, "done") && strcmp(what, "failed")))
        return 0;

    struct open_op **pp = &run->ops, *op = NULL;
    for (; *pp; pp = &(*pp)->next)
        if (!strcmp((*pp)->kind, okind) && streq0((*pp)->host, host)) {
            op = *pp;
            *pp = op->next; /* unlink; relinked below for a begin */
            break;
        }
    int err = 0;
    if (!strcmp(what, "begin")) {
        if (op) { /* a second begin: the first never finished */
            err = queue_op(run, okind, op->host, op->step, op->prefix, "unfinished", NULL, op->t_ms,
                           -1, false);
            free_op(op);
        }
        op = calloc(1, sizeof *op);
        if (!op)
            return -ENOMEM;
        op->kind = strdup(okind);
        op->host = host ? strdup(host) : NULL;
        op->step = attr_get(attrs, "step");
        op->prefix = attr_get(attrs, "prefix");
        op->t_ms = t_ms;
        op->next = run->ops;
        run->ops = op;
        return err;
    }
    char *step = attr_get(attrs, "step"), *prefix = attr_get(attrs, "prefix");
    char *error = strcmp(what, "failed") ? NULL : attr_get(attrs, "error");
    if (!strcmp(what, "failed") && !error)
        error = strdup(attrs ? attrs : "");
    err = queue_op(run, okind, host,
                   step ? step
                   : op ? op->step
                        : NULL,
                   prefix ? prefix
                   : op   ? op->prefix
                          : NULL,
                   strcmp(what, "done") ? "failed" : "ok", error, op ? op->t_ms : -1,
                   op ? t_ms - op->t_ms : -1, false);
    free(step);
    free(prefix);
    free(error);
    if (op)
        free_op(op);
    return err;
}

int fl_rec_event(struct fl_rec_run *run, int64_t t_ms, const char *host, const char *job, int task,
                 const char *kind, const char *attrs, bool sync)
{
    if (!kind)
        return -EINVAL;
    struct qbuild b = q_begin(run->rec, Q_EVENT);
    q_int(&b, run->rowid);
    q_int(&b, t_ms);
    q_text(&b, host);
    q_text(&b, job);
    q_int_or_null(&b, task, task < 0);
    q_text(&b, kind);
    q_text(&b, attrs && *attrs ? attrs : NULL);
    q_int(&b, sync);
    int err = q_end(&b, false);
    if (!err)
        err = derive_op(run, t_ms, host, kind, attrs);
    if (!err && flush_due(run->rec))
        err = fl_rec_flush(run->rec);
    return err;
}

int fl_rec_fault_applied(struct fl_rec_run *run, const struct fl_rec_fault *f)
{
    int no = run->next_fault;
    if (!f->kind)
        return -EINVAL;
    struct qbuild b = q_begin(run->rec, Q_FAULT);
    q_int(&b, run->rowid);
    q_int(&b, no);
    q_int_or_null(&b, f->index, f->index <= 0);
    q_text(&b, f->kind);
    q_text(&b, f->target);
    q_text(&b, f->detail);
    q_int(&b, f->applied_ms);
    q_text(&b, f->error);
    int err = q_end(&b, true);
    if (err && b.err)
        return err;
    run->next_fault++;
    return err ? err : no;
}

int fl_rec_fault_healed(struct fl_rec_run *run, int fault_no, int64_t healed_ms)
{
    if (fault_no < 0 || fault_no >= run->next_fault)
        return -EINVAL;
    struct qbuild b = q_begin(run->rec, Q_FAULT_HEAL);
    q_int(&b, run->rowid);
    q_int(&b, fault_no);
    q_int(&b, healed_ms);
    return q_end(&b, true);
}

int fl_rec_fault_hits(struct fl_rec_run *run, int fault_no, const char *hits)
{
    if (fault_no < 0 || fault_no >= run->next_fault || !hits)
        return -EINVAL;
    struct qbuild b = q_begin(run->rec, Q_FAULT_HITS);
    q_int(&b, run->rowid);
    q_int(&b, fault_no);
    q_text(&b, hits);
    return q_end(&b, true);
}

int fl_rec_fault_unfired(struct fl_rec_run *run, const struct fl_rec_unfired *u)
{
    if (!u->kind || !u->note || u->index <= 0)
        return -EINVAL;
    struct qbuild b = q_begin(run->rec, Q_UNFIRED);
    q_int(&b, run->rowid);
    q_int(&b, u->index);
    q_text(&b, u->kind);
    q_text(&b, u->target);
    q_int_or_null(&b, u->line, u->line <= 0);
    q_text(&b, u->note);
    return q_end(&b, true);
}

int fl_rec_check(struct fl_rec_run *run, const struct fl_rec_check *c)
{
    if (!c->name)
        return -EINVAL;
    struct qbuild b = q_begin(run->rec, Q_CHECK);
    q_int(&b, run->rowid);
    q_text(&b, c->name);
    q_text(&b, c->target);
    q_int(&b, c->passed);
    q_text(&b, c->expected);
    q_text(&b, c->observed);
    q_int_or_null(&b, c->line, c->line <= 0);
    return q_end(&b, true);
}

int fl_rec_ckpt_op(struct fl_rec_run *run, const struct fl_rec_ckpt_op *op)
{
    char step[32];
    if (!op->kind || !op->outcome ||
        (strcmp(op->kind, "save") && strcmp(op->kind, "restore") && strcmp(op->kind, "export")) ||
        (strcmp(op->outcome, "ok") && strcmp(op->outcome, "failed") &&
         strcmp(op->outcome, "unfinished")))
        return -EINVAL;
    snprintf(step, sizeof step, "%lld", (long long)op->step);
    return queue_op(run, op->kind, op->host, op->step >= 0 ? step : NULL, op->prefix, op->outcome,
                    op->error, op->started_ms, op->duration_ms, true);
}
