/*
 * calls.c: a worker's calls to its ps tasks (calls.h), for the training
 * loop (worker.c), the chief's checkpoint protocols (save_legacy.c,
 * save_robust.c, restore.c, export.c), the streamed push (push.c) and
 * `psrt bench`.  In pool mode (--rpc_threads=pool) a fan-out runs on the
 * caller's thread, one poll loop sending every request and reading every
 * reply as the sockets allow (psrt_conn_multi); in per_request mode each
 * call gets a detached thread of its own (psrt_sched_closure), as
 * TensorFlow's SchedClosure does.  A ps that refuses a call sends its error
 * text as the reply; with none, the text names the op and the ps's device.
 * Nothing here calls back into the worker or the protocols.
 */
#include "runtime/psrt/calls.h"
#include "runtime/psrt/worker.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

const char *psrt_ps_device(int p)
{
    static __thread char buf[4][64];
    static __thread int k;
    char *b = buf[k++ & 3];
    snprintf(b, 64, "/job:ps/replica:0/task:%d/device:CPU:0", p);
    return b;
}

void psrt_call_status_err(struct psrt_call *c, struct psrt_buf *resp)
{
    c->err.code = c->status;
    size_t n = resp->len < sizeof c->err.msg - 1 ? resp->len : sizeof c->err.msg - 1;
    if (n)
        memcpy(c->err.msg, resp->p, n);
    else
        n = (size_t)snprintf(c->err.msg, sizeof c->err.msg, "%s: %s failed on %s",
                             psrt_err_class(c->status), psrt_op_name(c->op), psrt_ps_device(c->ps));
    c->err.msg[n] = 0;
}

static void call_thread(void *arg)
{
    struct psrt_call *c = arg;
    struct psrt_worker *w = c->w;
    c->rc = psrt_conn_call(w->conn[c->ps], c->op, c->flags, c->iov, c->niov, c->timeout,
                           &w->resp[c->ps], &c->status, &c->err);
    if (!c->rc && c->status)
        psrt_call_status_err(c, &w->resp[c->ps]);
    psrt_latch_done(c->latch);
}

int psrt_worker_calls(struct psrt_worker *w, struct psrt_call *calls, int n)
{
    for (int i = 0; i < n; i++) {
        calls[i].w = w;
        calls[i].rc = 0;
        calls[i].status = 0;
        calls[i].err.code = 0;
        calls[i].err.msg[0] = 0;
        if (calls[i].timeout <= 0)
            calls[i].timeout = w->f->rpc_timeout;
    }
    if (w->f->rpc_threads == PSRT_PER_REQUEST) {
        struct psrt_latch *l = psrt_latch_new(n);
        for (int i = 0; i < n; i++) {
            calls[i].latch = l;
            psrt_sched_closure(call_thread, &calls[i]);
        }
        psrt_latch_wait_free(l);
    } else {
        struct psrt_mcall m[64];
        double timeout = 0;
        for (int done = 0; done < n; done += 64) {
            int k = n - done < 64 ? n - done : 64;
            for (int i = 0; i < k; i++) {
                struct psrt_call *c = &calls[done + i];
                m[i] = (struct psrt_mcall){.c = w->conn[c->ps],
                                           .op = c->op,
                                           .flags = c->flags,
                                           .iov = c->iov,
                                           .niov = c->niov,
                                           .resp = &w->resp[c->ps],
                                           .err = &c->err};
                if (c->timeout > timeout)
                    timeout = c->timeout;
            }
            psrt_conn_multi(m, k, timeout);
            for (int i = 0; i < k; i++) {
                struct psrt_call *c = &calls[done + i];
                c->rc = m[i].rc;
                c->status = m[i].status;
                if (!c->rc && c->status)
                    psrt_call_status_err(c, &w->resp[c->ps]);
            }
        }
    }
    for (int i = 0; i < n; i++)
        if (calls[i].rc || calls[i].status)
            return i;
    return -1;
}

int psrt_worker_ping(struct psrt_worker *w, int p, int *ready, long long *step,
                     struct psrt_err *err)
{
    /* the request names this worker's task: a ps that was told training
     * is done waits for every worker to have called once */
    uint32_t task = (uint32_t)w->f->task;
    struct psrt_call c = {.ps = p, .op = PSRT_OP_PING, .niov = 1};
    c.iov[0] = (struct iovec){&task, 4};
    if (psrt_worker_calls(w, &c, 1) >= 0) {
        *err = c.err;
        return c.rc ? c.rc : c.status;
    }
    struct psrt_buf *b = &w->resp[p];
    b->off = 0;
    (void)psrt_buf_get_u64(b);
    *ready = (int)psrt_buf_get_u32(b);
    *step = (long long)psrt_buf_get_u64(b);
    (void)psrt_buf_get_u32(b); /* its task index */
    char theirs[160], ours[160];
    int sr = psrt_buf_get_str(b, theirs, sizeof theirs);
    if (b->bad || sr) {
        psrt_err_set(err, -EBADMSG, "malformed Ping reply from %s", psrt_conn_peer(w->conn[p]));
        return -EBADMSG;
    }
    /* a ps started with other model flags serves other variables: every
     * Pull and Push would be malformed, so say so once, plainly */
    psrt_flags_layout(w->f, ours, sizeof ours);
    if (strcmp(theirs, ours)) {
        psrt_err_set(err, -EINVAL,
                     "%s serves %s; this worker has %s: give every task the same "
                     "--model, --ps_hosts and model size flags",
                     psrt_conn_peer(w->conn[p]), theirs, ours);
        return -EINVAL;
    }
    return 0;
}

/* (calls.h) */
bool psrt_lost_peer(int r)
{
    return r == -ECONNRESET || r == -EAGAIN || r == -ENOTCONN || r == -ETIMEDOUT ||
           r == -ECONNREFUSED || r == -EPIPE || r == -ESTALE || r == -ESHUTDOWN;
}
