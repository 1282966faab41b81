/*
 * suggest.h: "did you mean" suggestions by edit distance.
 */
#ifndef FL_SUGGEST_H
#define FL_SUGGEST_H

#include <stddef.h>

/* Damerau-Levenshtein distance (optimal string alignment), case-insensitive. */
size_t fl_suggest_distance(const char *a, const char *b);

/*
 * The candidate closest to 'word', or NULL when none is close enough
 * (distance at most max(1, strlen(word) / 3), or one is a prefix of the
 * other when word has at least 3 characters).  Ties go to the earlier
 * candidate.  NULL entries in cands are skipped.
 */
const char *fl_suggest(const char *word, const char *const *cands, size_t n);

/* Appends " (did you mean 'x'?)" to buf (NUL-terminated, size len) when
 * fl_suggest finds a candidate; returns buf. */
char *fl_suggest_append(char *buf, size_t len, const char *word, const char *const *cands,
                        size_t n);

#endif
