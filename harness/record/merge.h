/*
 * merge.h: the runs of one results database copied into another
 * (`faultline runs merge OUT.db IN.db...`), so that databases recorded
 * apart (shards of a suite or a soak, on other machines) become one that
 * `faultline runs`, `--history`, `--changed` and `report` read as if every
 * run had been recorded there.
 *
 *   int version;
 *   fl_rec_merge_check("all.db", "shard1.db", &version, err, sizeof err);  (before any write)
 *   struct fl_rec *out;  fl_rec_open(&out, "all.db", NULL, err, sizeof err);
 *   struct fl_rec_merge_stats st;
 *   int rc = fl_rec_merge(out, "shard1.db", &st, err, sizeof err);
 *       -> 0: merged (st says how much); -EEXIST: a conflict, nothing of the
 *          input written, err names the run and what differs
 *
 * Each input is merged in one transaction of the output: all of its runs or
 * none.  A run is its runs row (every column but the integer id) and its
 * rows in every table that refers to runs(id); the output gives each new
 * run an id of its own (after its highest) and its rows that id.  A run
 * whose run_id the output already holds, with the same columns and as many
 * rows in each table, adds nothing (so merging twice changes nothing); with
 * anything else different it is a conflict.  Tables keyed otherwise (the
 * scenario texts, by hash) add the rows the output lacks; a row with the
 * same key and other values is a conflict too.  A run still 'running' in
 * the input (going on, or its harness killed: `faultline gc` marks those) is
 * left out and counted.
 *
 * Schema: an input at an older version is read into memory and migrated
 * there (its file is not touched); one at a newer version is refused.
 *
 * The output is written with a rollback journal while no other connection
 * has it open (each page once, not to the WAL and then the file), and put
 * back in WAL mode by fl_rec_merge_done; when another connection has it,
 * WAL stays, with its autocheckpoint off: what is merged is copied from the
 * WAL into the file once, when it is closed (fl_rec_close, the last
 * connection to it), not after every input.
 */
#ifndef FL_REC_MERGE_H
#define FL_REC_MERGE_H

#include <stddef.h>

struct fl_rec;

struct fl_rec_merge_stats {
    int in_version;      /* the input's schema version (older: migrated in memory) */
    size_t runs_added;   /* runs the output did not hold */
    size_t runs_present; /* runs it held already, the same */
    size_t runs_running; /* runs still 'running' in the input: not merged */
    char running_id[64]; /* the first of those (by run_id) */
    size_t rows_added;   /* rows added to every table, runs and scenario texts included */
    size_t conflicts;    /* runs (or keyed rows) that differ; err names the first */
};

/*
 * Can the database at in_path be merged into the one at out_path (which
 * need not exist yet): an existing regular file, not out_path itself, a faultline results database
 * (a runs table, schema version 1 to FL_REC_SCHEMA_VERSION)?  Reads only.  0 and *version, or
 * negative errno with a message in err (-ENOENT, -EINVAL, -EPROTO for a newer schema, -EIO).
 */
int fl_rec_merge_check(const char *out_path, const char *in_path, int *version, char *err,
                       size_t errlen);

/*
 * Merges every finished run of the database at in_path into out, in one
 * transaction (see above), after fl_rec_merge_check; st may be NULL.  0 when merged; -EEXIST on a
 * conflict (nothing written; err: "run R differs between OUT and IN:
 * verdict 'pass' in OUT, 'fail' in IN; events: 12 rows in OUT, 10 in IN"
 * and how many more differ); other negative errno with a message in err.
 */
int fl_rec_merge(struct fl_rec *out, const char *in_path, struct fl_rec_merge_stats *st, char *err,
                 size_t errlen);

/* After the last fl_rec_merge into out: the output back in WAL mode, as
 * every results database is (a merge writes with a rollback journal when
 * it has the output to itself). */
void fl_rec_merge_done(struct fl_rec *out);

#endif
