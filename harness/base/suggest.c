/*
 * suggest.c: closest-name suggestions for misspelt keys, fault kinds, hosts,
 * jobs and variant values, by optimal-string-alignment edit distance
 * (insertions, deletions, substitutions and swaps of neighbours cost 1).
 */
#include "harness/base/suggest.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

size_t fl_suggest_distance(const char *a, const char *b)
{
    size_t n = strlen(a), m = strlen(b);
    if (n > 256 || m > 256)
        return (size_t)-1;
    /* Three rows: i-2, i-1, i. */
    size_t rows[3][257];
    size_t *pp = rows[0], *p = rows[1], *c = rows[2];

    for (size_t j = 0; j <= m; j++)
        p[j] = j;
    for (size_t i = 1; i <= n; i++) {
        c[0] = i;
        for (size_t j = 1; j <= m; j++) {
            int ai = tolower((unsigned char)a[i - 1]), bj = tolower((unsigned char)b[j - 1]);
            size_t cost = ai != bj;
            size_t v = p[j] + 1;
            if (c[j - 1] + 1 < v)
                v = c[j - 1] + 1;
            if (p[j - 1] + cost < v)
                v = p[j - 1] + cost;
            if (i > 1 && j > 1 && ai == tolower((unsigned char)b[j - 2]) &&
                tolower((unsigned char)a[i - 2]) == bj && pp[j - 2] + 1 < v)
                v = pp[j - 2] + 1;
            c[j] = v;
        }
        size_t *t = pp;
        pp = p;
        p = c;
        c = t;
    }
    return p[m];
}

const char *fl_suggest(const char *word, const char *const *cands, size_t n)
{
    size_t wl = strlen(word);
    size_t limit = wl / 3 > 1 ? wl / 3 : 1;
    const char *best = NULL;
    size_t best_d = (size_t)-1;

    for (size_t i = 0; i < n; i++) {
        if (!cands[i] || strcmp(cands[i], word) == 0)
            continue;
        size_t d = fl_suggest_distance(word, cands[i]);
        if (d < best_d) {
            best_d = d;
            best = cands[i];
        }
    }
    if (best && best_d <= limit)
        return best;
    /* A prefix ("crash" for "crash_host") is a good guess too. */
    if (wl >= 3) {
        for (size_t i = 0; i < n; i++) {
            if (!cands[i])
                continue;
            size_t cl = strlen(cands[i]);
            if ((cl > wl && strncasecmp(cands[i], word, wl) == 0) ||
                (wl > cl && cl >= 3 && strncasecmp(word, cands[i], cl) == 0))
                return cands[i];
        }
    }
    return NULL;
}

char *fl_suggest_append(char *buf, size_t len, const char *word, const char *const *cands, size_t n)
{
    const char *s = fl_suggest(word, cands, n);
    if (s) {
        size_t used = strlen(buf);
        if (used < len)
            snprintf(buf + used, len - used, " (did you mean '%s'?)", s);
    }
    return buf;
}
