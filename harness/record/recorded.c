/*
 * recorded.c: one recorded run read back whole, for `faultline replay`:
 * its runs row, the text of its scenario (scenario_texts, by the run's
 * scenario_hash) and the set of checks that failed, as "TARGET CHECK"
 * strings sorted so two runs' sets compare line by line.  Only reads.
 */
#include "harness/base/text.h"
#include "harness/record/recorded.h"
#include "harness/record/recorder.h"

#include <errno.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *dup_col(sqlite3_stmt *st, int i)
{
    const unsigned char *t = sqlite3_column_text(st, i);
    return t ? strdup((const char *)t) : NULL;
}

int fl_rec_recorded_failed(struct fl_rec *rec, const char *run_id, char ***failed, size_t *n,
                           char *err, size_t errlen)
{
    sqlite3 *db = fl_rec_db(rec);
    sqlite3_stmt *st;
    *failed = NULL;
    *n = 0;
    if (sqlite3_prepare_v2(db,
                           "SELECT DISTINCT coalesce(c.target, '-') || ' ' || c.name"
                           " FROM checks c JOIN runs r ON r.id = c.run"
                           " WHERE r.run_id = ?1 AND c.passed = 0 ORDER BY 1",
                           -1, &st, NULL) != SQLITE_OK) {
        fl_text_set(err, errlen, "database %s: reading checks: %s", fl_rec_path(rec),
                    sqlite3_errmsg(db));
        return -EIO;
    }
    sqlite3_bind_text(st, 1, run_id, -1, SQLITE_STATIC);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        char **grown = realloc(*failed, (*n + 1) * sizeof **failed);
        if (!grown)
            break;
        *failed = grown;
        (*failed)[(*n)++] = dup_col(st, 0);
    }
    if (rc != SQLITE_DONE) {
        fl_text_set(err, errlen, "database %s: reading checks: %s", fl_rec_path(rec),
                    sqlite3_errmsg(db));
        sqlite3_finalize(st);
        return -EIO;
    }
    sqlite3_finalize(st);
    return 0;
}

int fl_rec_recorded_get(struct fl_rec *rec, const char *run_id, struct fl_rec_recorded *out,
                        char *err, size_t errlen)
{
    sqlite3 *db = fl_rec_db(rec);
    sqlite3_stmt *st;
    memset(out, 0, sizeof *out);
    if (sqlite3_prepare_v2(db,
                           "SELECT r.run_id, r.scenario, r.scenario_file, r.variant,"
                           " r.scenario_hash, r.verdict, r.reason, r.git_rev, r.seed, t.text"
                           " FROM runs r LEFT JOIN scenario_texts t ON t.hash = r.scenario_hash"
                           " WHERE r.run_id = ?1",
                           -1, &st, NULL) != SQLITE_OK) {
        fl_text_set(err, errlen, "database %s: reading run %s: %s", fl_rec_path(rec), run_id,
                    sqlite3_errmsg(db));
        return -EIO;
    }
    sqlite3_bind_text(st, 1, run_id, -1, SQLITE_STATIC);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_DONE) {
        fl_text_set(err, errlen, "no run '%s' in database %s ('faultline runs --db %s' lists them)",
                    run_id, fl_rec_path(rec), fl_rec_path(rec));
        sqlite3_finalize(st);
        return -ENOENT;
    }
    if (rc != SQLITE_ROW) {
        fl_text_set(err, errlen, "database %s: reading run %s: %s", fl_rec_path(rec), run_id,
                    sqlite3_errmsg(db));
        sqlite3_finalize(st);
        return -EIO;
    }
    out->run_id = dup_col(st, 0);
    out->scenario = dup_col(st, 1);
    out->scenario_file = dup_col(st, 2);
    out->variant = dup_col(st, 3);
    out->hash = dup_col(st, 4);
    out->verdict = dup_col(st, 5);
    out->reason = dup_col(st, 6);
    out->git_rev = dup_col(st, 7);
    out->seed = (uint64_t)sqlite3_column_int64(st, 8);
    if (sqlite3_column_type(st, 9) != SQLITE_NULL) {
        out->text_len = (size_t)sqlite3_column_bytes(st, 9);
        out->text = malloc(out->text_len + 1);
        if (out->text) {
            memcpy(out->text, sqlite3_column_blob(st, 9), out->text_len);
            out->text[out->text_len] = 0;
        }
    }
    sqlite3_finalize(st);
    return fl_rec_recorded_failed(rec, run_id, &out->failed, &out->n_failed, err, errlen);
}

void fl_rec_recorded_free(struct fl_rec_recorded *r)
{
    free(r->run_id);
    free(r->scenario);
    free(r->scenario_file);
    free(r->variant);
    free(r->hash);
    free(r->verdict);
    free(r->reason);
    free(r->git_rev);
    free(r->text);
    for (size_t i = 0; i < r->n_failed; i++)
        free(r->failed[i]);
    free(r->failed);
    memset(r, 0, sizeof *r);
}
