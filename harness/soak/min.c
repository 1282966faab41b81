/*
 * min.c: shrinking a failing fault schedule to the faults the failure
 * needs.
 *
 * Delta debugging over the set of faults: with the current set split into
 * k chunks (k = 2 first), try the set without each chunk; when the failure
 * still reproduces keep that smaller set (and k - 1 chunks), else split
 * finer (2k), until chunks are single faults and none can go.  Every try is
 * one run (the caller's reproduces()), so the whole search stops after
 * `budget` tries with the smallest failing set found so far.  The empty
 * set is tried only when one fault is left (a failure that needs no fault
 * at all ends with `faults: []`).
 */
#include "harness/soak/soak.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int fl_soak_minimize(size_t n, bool *keep, int budget,
                     int (*reproduces)(void *ctx, const bool *keep), void *ctx)
{
    size_t *cur = malloc((n ? n : 1) * sizeof *cur);
    bool *trial = malloc(n ? n : 1);
    size_t m = 0, k = 2;
    int calls = 0, rc = 0;
    if (!cur || !trial) {
        free(cur);
        free(trial);
        return -ENOMEM;
    }
    for (size_t i = 0; i < n; i++)
        if (keep[i])
            cur[m++] = i;
    while (m > 0 && calls < budget) {
        if (k > m)
            k = m;
        bool reduced = false;
        for (size_t c = 0; c < k && calls < budget; c++) {
            /* chunk c is cur[lo, hi) */
            size_t lo = c * m / k, hi = (c + 1) * m / k;
            memset(trial, 0, n);
            for (size_t i = 0; i < m; i++)
                trial[cur[i]] = i < lo || i >= hi;
            calls++;
            if ((rc = reproduces(ctx, trial)) < 0)
                goto done;
            if (rc == 1) {
                memmove(cur + lo, cur + hi, (m - hi) * sizeof *cur);
                m -= hi - lo;
                k = k > 2 ? k - 1 : 2;
                reduced = true;
                break;
            }
        }
        if (!reduced) {
            if (k >= m)
                break; /* single faults, none can go */
            k = 2 * k;
        }
    }
    rc = 0;
done:
    memset(keep, 0, n);
    for (size_t i = 0; i < m; i++)
        keep[cur[i]] = true;
    free(cur);
    free(trial);
    return rc < 0 ? rc : calls;
}
