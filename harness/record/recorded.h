/*
 * recorded.h: the read side of one recorded run, for `faultline replay`:
 * what was run (the scenario's text, its file, variant and seed) and what
 * came of it (verdict, reason, the checks that failed).
 */
#ifndef FL_RECORDED_H
#define FL_RECORDED_H

#include <stddef.h>
#include <stdint.h>

struct fl_rec;

struct fl_rec_recorded {
    char *run_id, *scenario, *scenario_file, *variant, *hash, *verdict, *reason, *git_rev;
    uint64_t seed;
    char *text; /* NULL when the database has not kept it (a run recorded before schema 3) */
    size_t text_len;
    char **failed; /* "TARGET CHECK" of every failed check, sorted, distinct */
    size_t n_failed;
};

/*
 * Reads run run_id of rec into *out (fl_rec_recorded_free frees it).  0, or
 * -ENOENT ("no run 'X' in database D ...") or -EIO with a message in err.
 */
int fl_rec_recorded_get(struct fl_rec *rec, const char *run_id, struct fl_rec_recorded *out,
                        char *err, size_t errlen);
void fl_rec_recorded_free(struct fl_rec_recorded *r);

/* The failed checks of run_id only (after a replay was recorded); 0 or -EIO. */
int fl_rec_recorded_failed(struct fl_rec *rec, const char *run_id, char ***failed, size_t *n,
                           char *err, size_t errlen);

#endif
