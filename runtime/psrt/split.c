/*
 * split.c: sparse keys split by the ps task that holds their rows, the first
 * thing a worker does with a batch (pull the rows, push their gradients),
 * shared by the worker's training step, the streamed push (push.c) and
 * `psrt bench sparse`.
 *
 * One pass, in input order.  It is bound by memory bandwidth (for 10 M keys
 * it reads 120 MB and writes 160 MB), so more threads do not help on this
 * kind of machine: a two-pass parallel version (count, then scatter) was
 * measured at twice the time of this one on 2 cores.
 */
#include "runtime/psrt/psrt.h"

void psrt_split_keys_append(const uint64_t *keys, const float *vals, size_t n, int nps,
                            uint64_t **pk, float **pv, uint32_t **pi, size_t *pn, size_t base)
{
    for (size_t i = 0; i < n; i++) {
        int p = psrt_row_ps(keys[i], nps);
        size_t o = pn[p]++;
        pk[p][o] = keys[i];
        if (vals)
            pv[p][o] = vals[i];
        if (pi)
            pi[p][o] = (uint32_t)(base + i);
    }
}

void psrt_split_keys(const uint64_t *keys, const float *vals, size_t n, int nps, uint64_t **pk,
                     float **pv, uint32_t **pi, size_t *pn)
{
    for (int p = 0; p < nps; p++)
        pn[p] = 0;
    psrt_split_keys_append(keys, vals, n, nps, pk, pv, pi, pn, 0);
}
