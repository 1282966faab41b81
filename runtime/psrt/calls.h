/*
 * calls.h: a worker's calls to its ps tasks (calls.c): one call to each of
 * several ps at once, in either thread model (--rpc_threads), the error a
 * ps's refusal becomes, Ping, which errors mean a peer went away, and the
 * device name that stands for a ps in TensorFlow's error text.
 *
 * The training loop (worker.c), the chief's checkpoint protocols
 * (save_legacy.c, save_robust.c, restore.c, export.c), the streamed push
 * (push.c) and `psrt bench` all reach the ps tasks through these.  calls.c
 * calls none of them: the protocols depend on it, not on worker.c, which
 * calls them.
 *
 * Errors: 0 or a negative errno; a failed call's message is in its err (the
 * ps's own text when it refused the call), naming the ps.
 *
 * Thread safety: one worker's calls must not run from two threads at once
 * (each ps's reply lands in the worker's one reply buffer for that ps).
 */
#ifndef PSRT_CALLS_H
#define PSRT_CALLS_H

#include "runtime/psrt/psrt.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

struct psrt_worker; /* worker.h */

/* ---- fan-out ------------------------------------------------------------ */

/* One call to one ps, for fan-out. */
struct psrt_call {
    int ps;
    int op;
    uint32_t flags;
    struct iovec iov[8];
    int niov;
    double timeout;
    int rc;              /* transport result */
    int32_t status;      /* peer's status */
    struct psrt_err err; /* rc or status != 0: the message */
    struct psrt_worker *w;
    struct psrt_latch *latch;
};
/* Runs the calls (one per distinct ps) concurrently: in pool mode on this
 * thread (send all, then receive all), in per_request mode one detached
 * thread per call.  Replies land in w->resp[call.ps].  Returns the index of
 * the first failed call, or -1 when all succeeded. */
int psrt_worker_calls(struct psrt_worker *w, struct psrt_call *calls, int n);
/* c->err from the ps's refusal (its message is the reply payload resp). */
void psrt_call_status_err(struct psrt_call *c, struct psrt_buf *resp);

/* ---- one ps ------------------------------------------------------------- */

/* Ping of ps p: *ready (0 uninitialized, 1 initialized, 2 open) and its
 * global step.  0, or -errno with err set (a transport error, the ps's
 * status, or a malformed reply), naming the ps. */
int psrt_worker_ping(struct psrt_worker *w, int p, int *ready, long long *step,
                     struct psrt_err *err);
/* Whether error r means a peer went away (or is restarting): the chief
 * recovers (reconnects, restores a relaunched ps) instead of failing. */
bool psrt_lost_peer(int r);
/* "/job:ps/replica:0/task:N/device:CPU:0" */
const char *psrt_ps_device(int p);

#endif
