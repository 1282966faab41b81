/*
 * push.c: a worker's big sparse push, streamed.  Splitting 10 million keys
 * by ps takes tens of milliseconds; done first, it leaves every ps idle
 * meanwhile, and the whole payload is checksummed and copied to the socket
 * from memory long after it left the cache.  Here the keys are split a
 * piece at a time (PIECE pairs), and each ps's share of a piece is
 * checksummed while still in cache and queued as one block of a
 * PSRT_PUSH_BLOCKS request (stream.c), whose sender thread writes it to the
 * socket while this thread splits the next piece and the ps tasks receive.  The ps applies the
 * blocks as one batch once the whole request has arrived and checked out, so a push is still
 * applied entirely or not at all.
 */
#include "runtime/psrt/worker.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define PIECE                                                         \
    65536 /* pairs split per piece: about 1 MB of keys, gradients and \
           * positions written, so it is still in L2 when sent */

int psrt_worker_push_stream(struct psrt_worker *w, const uint64_t *keys, const float *grads,
                            size_t n, const struct iovec *dense, const uint32_t *nd, uint64_t **pk,
                            float **pg, uint32_t **pi, size_t *pn, struct psrt_call *calls)
{
    const int nps = w->nps;
    const size_t npieces = (n + PIECE - 1) / PIECE;
    static const uint64_t zero;
    struct psrt_push_hdr *hdr = calloc((size_t)nps, sizeof *hdr);
    uint64_t *counts = malloc((npieces ? npieces : 1) * (size_t)nps * sizeof *counts);
    uint64_t *hint = calloc((size_t)nps, sizeof *hint);
    int32_t *status = calloc((size_t)nps, sizeof *status);
    struct psrt_buf **resp = malloc((size_t)nps * sizeof *resp);
    struct psrt_err *err = calloc((size_t)nps, sizeof *err);
    size_t *prev = calloc((size_t)nps, sizeof *prev);
    struct psrt_stream *s = NULL;
    int r = -ENOMEM;
    for (int p = 0; p < nps; p++) {
        calls[p] = (struct psrt_call){.ps = p, .op = PSRT_OP_PUSH, .flags = PSRT_PUSH_BLOCKS};
        pn[p] = 0;
    }
    if (!hdr || !counts || !hint || !status || !resp || !err || !prev)
        goto out;
    for (int p = 0; p < nps; p++) {
        resp[p] = &w->resp[p];
        hdr[p].ndense = nd[p];
        /* the ps reserves this much: its share, generously (hashing
         * spreads keys evenly), and every block's header */
        hint[p] =
            16 + dense[p].iov_len + 8 + (n / (size_t)nps) * 12 / 16 * 17 + npieces * 16 + 4096;
    }
    r = psrt_stream_begin(&s, w->conn, nps, PSRT_OP_PUSH, PSRT_PUSH_BLOCKS, hint, npieces + 1,
                          w->f->rpc_timeout, err);
    if (r)
        goto out;
    for (int p = 0; p < nps; p++) {
        struct iovec v[3] = {
            {&hdr[p], 16}, dense[p], {(void *)&zero, (8 - dense[p].iov_len % 8) % 8}};
        psrt_stream_put(s, p, v, 3);
    }
    for (size_t c = 0; c < npieces; c++) {
        size_t off = c * PIECE, cnt = n - off < PIECE ? n - off : PIECE;
        psrt_split_keys_append(keys + off, grads + off, cnt, nps, pk, pg, pi, pn, off);
        for (int p = 0; p < nps; p++) {
            uint64_t *k = &counts[c * (size_t)nps + (size_t)p];
            *k = pn[p] - prev[p];
            if (*k == 0)
                continue;
            struct iovec v[4] = {{k, 8},
                                 {pk[p] + prev[p], *k * 8},
                                 {pg[p] + prev[p], *k * 4},
                                 {(void *)&zero, *k % 2 ? 4 : 0}};
            psrt_stream_put(s, p, v, 4);
            prev[p] = pn[p];
        }
    }
    psrt_stream_end(s, resp, status);
    r = 0;
out:
    for (int p = 0; p < nps; p++) {
        if (r) {
            calls[p].rc = r;
            psrt_err_set(&calls[p].err, r, "pushing to %s: %s", psrt_conn_peer(w->conn[p]),
                         strerror(-r));
            continue;
        }
        calls[p].rc = psrt_stream_rc(s, p);
        calls[p].status = calls[p].rc ? 0 : status[p];
        if (calls[p].rc)
            calls[p].err = err[p];
        else if (calls[p].status)
            psrt_call_status_err(&calls[p], &w->resp[p]);
    }
    psrt_stream_free(s);
    free(hdr);
    free(counts);
    free(hint);
    free(status);
    free(resp);
    free(err);
    free(prev);
    for (int p = 0; p < nps; p++)
        if (calls[p].rc || calls[p].status)
            return p;
    return -1;
}
