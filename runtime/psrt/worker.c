/*
 * worker.c: the worker task.  Every worker loops: generate its batch of
 * synthetic data (a pure function of --seed, its task index and its local
 * step), pull the dense variables and the sparse rows it needs from every
 * ps (reserving the next global step on ps 0), compute the loss and the
 * gradients, push them.  Worker 0 is the chief: before training it creates
 * train_dir on its disk, restores the latest checkpoint or initialises
 * every variable, saves at the start, every --save_checkpoint_steps global
 * steps or --save_checkpoint_secs, and at the end; then exports and tells
 * every ps to shut down.
 *
 * States of a worker: CONNECTING (first contact, --connect_timeout_secs)
 * -> WAITING_FOR_MODEL (non-chief: until every ps is initialised; chief:
 * PREPARING: restore or init) -> TRAINING -> DONE (ps 0 refuses to reserve
 * a step past --max_steps, or a ps says it is shutting down) -> exit 0.
 * From TRAINING a lost ps leads to RECONNECTING (backoff, up to
 * --reconnect_timeout_secs; event rpc.reconnect); when it is back and not
 * initialised (a relaunched ps), the chief runs PREPARING again (restore
 * from the latest checkpoint, as TensorFlow's session recovery does) and
 * the others wait for the model.  A peer that stays away is fatal: one
 * line and exit 1.  A checkpoint error on the chief is fatal under legacy
 * (TensorFlow's saver hook error kills the chief); under robust a save
 * that fails (a disk error, a full disk, on a ps or on the chief) is
 * abandoned and training goes on, until --max_failed_saves saves in a row
 * have failed (over at least --failed_saves_secs), and the final save and
 * the export are tried again for up to --finish_retry_secs before they are
 * fatal.
 */
#include "runtime/psrt/worker.h"
#include "runtime/ckpt/bundle.h"
#include "runtime/ckpt/state.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define STEP_DONE (-2)
#define NEED_RECOVERY (-3)

static void sleep_s(double s)
{
    if (s <= 0)
        return;
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

/* ---- reconnecting (the calls themselves: calls.c) ------------------------ */

int psrt_worker_reconnect(struct psrt_worker *w, int p, struct psrt_err *err)
{
    psrt_log("lost %s; reconnecting (up to %g s)", psrt_conn_peer(w->conn[p]),
             w->f->reconnect_timeout);
    psrt_ev("rpc.reconnect", "peer=%s", psrt_ev_q(psrt_conn_peer(w->conn[p])));
    return psrt_conn_connect(w->conn[p], w->f->reconnect_timeout, err);
}

/* Makes sure every ps is connected (reconnecting lost ones). */
static int ensure_connected(struct psrt_worker *w, struct psrt_err *err)
{
    for (int p = 0; p < w->nps; p++)
        if (!psrt_conn_is_open(w->conn[p])) {
            int r = psrt_worker_reconnect(w, p, err);
            if (r)
                return r;
        }
    return 0;
}

/* ---- chief: preparing the model ------------------------------------------ */

int psrt_worker_init_all(struct psrt_worker *w, struct psrt_err *err)
{
    struct psrt_call calls[256];
    uint64_t seed = w->f->seed;
    int n = 0;
    for (int p = 0; p < w->nps && n < 256; p++) {
        calls[n] = (struct psrt_call){.ps = p, .op = PSRT_OP_INIT};
        calls[n].iov[0] = (struct iovec){&seed, 8};
        calls[n].niov = 1;
        n++;
    }
    int bad = psrt_worker_calls(w, calls, n);
    if (bad >= 0) {
        *err = calls[bad].err;
        return calls[bad].rc ? calls[bad].rc : calls[bad].status;
    }
    return 0;
}

int psrt_worker_open_all(struct psrt_worker *w, struct psrt_err *err)
{
    struct psrt_call calls[256];
    int n = 0;
    for (int p = 0; p < w->nps && n < 256; p++)
        calls[n++] = (struct psrt_call){.ps = p, .op = PSRT_OP_OPEN};
    int bad = psrt_worker_calls(w, calls, n);
    if (bad >= 0) {
        *err = calls[bad].err;
        return calls[bad].rc ? calls[bad].rc : calls[bad].status;
    }
    return 0;
}

static int save(struct psrt_worker *w, long long step, struct psrt_err *err);
static int save_or_abandon(struct psrt_worker *w, long long step, struct psrt_err *err);

static bool saving_enabled(const struct psrt_flags *f)
{
    return f->save_steps > 0 || f->save_secs > 0;
}

/* Whether the chief's own disk has checkpoint step as its latest: its
 * state file names it and its index file is there. */
static bool chief_has_copy(const struct psrt_flags *f, long long step)
{
    struct ckpt_state st;
    struct ckpt_err ce = {0};
    memset(&st, 0, sizeof st);
    if (ckpt_state_read(f->train_dir, &st, &ce))
        return false;
    char prefix[1200];
    psrt_ckpt_prefix(f, step, prefix, sizeof prefix);
    char *named = st.model_checkpoint_path
                      ? ckpt_state_resolve(f->train_dir, st.model_checkpoint_path)
                      : NULL;
    char *ix = ckpt_index_name(prefix);
    struct stat sb;
    bool ok = named && ix && !strcmp(named, prefix) && stat(ix, &sb) == 0;
    free(named);
    free(ix);
    ckpt_state_free(&st);
    return ok;
}

/* Restore the latest checkpoint or initialise: TensorFlow's
 * SessionManager.prepare_session on the chief.  Robust: a checkpoint
 * restored from the ps tasks' copies alone (the chief's disk was lost) is
 * saved again at once, so that its shards are on two hosts again and the
 * chief's state names it (restoring from the chief's copy writes the ps
 * copies back likewise). */
static int prepare(struct psrt_worker *w, struct psrt_err *err)
{
    long long step = -1;
    int r = psrt_restore_latest(w, &step, err);
    if (r < 0)
        return r;
    if (r == 1) {
        w->restored_step = step;
        w->last_save_step = w->save_try_step = step;
        w->last_save_time = w->save_try_time = psrt_now();
        if (w->f->protocol == PSRT_ROBUST && saving_enabled(w->f) && !chief_has_copy(w->f, step)) {
            psrt_log("restored model.ckpt-%lld from the ps tasks' copies alone (none in %s "
                     "here): saving it again, so that every shard is on two hosts",
                     step, w->f->train_dir);
            return save_or_abandon(w, step, err);
        }
        return 0;
    }
    w->restored_step = -1;
    r = psrt_worker_init_all(w, err);
    if (!r)
        psrt_log("initialized all variables (no checkpoint in %s)", w->f->train_dir);
    return r;
}

/* ---- one training step ---------------------------------------------------- */

static int grow_sparse(struct psrt_worker *w, size_t nkeys)
{
    if (nkeys <= w->scap)
        return 0;
    size_t cap = nkeys * 2;
    float *v = realloc(w->svals, cap * 4), *g = realloc(w->sgrad, cap * 4);
    if (v)
        w->svals = v;
    if (g)
        w->sgrad = g;
    if (!v || !g)
        return -ENOMEM;
    for (int p = 0; p < w->nps; p++) {
        uint64_t *k = realloc(w->pkeys[p], cap * 8);
        uint32_t *ix = realloc(w->pidx[p], cap * 4);
        float *pg = realloc(w->pgrad[p], cap * 4);
        if (k)
            w->pkeys[p] = k;
        if (ix)
            w->pidx[p] = ix;
        if (pg)
            w->pgrad[p] = pg;
        if (!k || !ix || !pg)
            return -ENOMEM;
    }
    w->scap = cap;
    return 0;
}

static bool ps_in_step(const struct psrt_worker *w, int p)
{
    return psrt_model_ps_has_vars(&w->m, p);
}

/* Splits a batch's sparse keys by the ps that holds their rows (pkeys,
 * pidx, pn per ps); *nkeys is the batch's number of sparse keys. */
static int split_keys(struct psrt_worker *w, const struct psrt_batch *b, int64_t *nkeys)
{
    *nkeys = w->m.sparse >= 0 ? b->nkeys : 0;
    if (grow_sparse(w, (size_t)*nkeys + 1))
        return -ENOMEM;
    psrt_split_keys(b->keys, NULL, (size_t)*nkeys, w->nps, w->pkeys, NULL, w->pidx, w->pn);
    return 0;
}

/* One Pull per ps that holds variables of this step, for the keys
 * split_keys() gave it (nk holds the key counts the calls point to);
 * flags0 goes to ps 0's call.  Returns the number of calls. */
static int build_pulls(struct psrt_worker *w, struct psrt_call *calls, uint64_t *nk,
                       uint32_t flags0)
{
    int n = 0;
    for (int p = 0; p < w->nps && n < 256; p++) {
        if (!ps_in_step(w, p))
            continue;
        nk[p] = (uint64_t)w->pn[p];
        calls[n] = (struct psrt_call){.ps = p, .op = PSRT_OP_PULL, .flags = p == 0 ? flags0 : 0};
        calls[n].iov[0] = (struct iovec){&nk[p], 8};
        calls[n].iov[1] = (struct iovec){w->pkeys[p], (size_t)w->pn[p] * 8};
        calls[n].niov = 2;
        n++;
    }
    return n;
}

/* Reads the Pull replies into the dense variables and sparse values;
 * *gstep is ps 0's global step.  0, or -EBADMSG naming the peer. */
static int read_pulls(struct psrt_worker *w, const struct psrt_call *calls, int n, long long *gstep,
                      struct psrt_err *err)
{
    *gstep = 0;
    for (int i = 0; i < n; i++) {
        int p = calls[i].ps;
        struct psrt_buf *rb = &w->resp[p];
        rb->off = 0;
        long long s = (long long)psrt_buf_get_u64(rb);
        if (p == 0)
            *gstep = s;
        uint32_t nd = psrt_buf_get_u32(rb);
        psrt_buf_skip_align8(rb);
        uint32_t seen = 0;
        for (int v = 0; v < w->m.nvars; v++) {
            const struct psrt_var *var = &w->m.vars[v];
            if (var->kind != PSRT_VAR_DENSE || var->ps != p)
                continue;
            const void *src = psrt_buf_get(rb, (size_t)var->n * 4);
            if (src)
                memcpy(w->dense[v], src, (size_t)var->n * 4);
            seen++;
        }
        const float *sv = psrt_buf_get(rb, (size_t)w->pn[p] * 4);
        if (rb->bad || seen != nd) {
            psrt_err_set(err, -EBADMSG, "malformed Pull reply from %s", psrt_conn_peer(w->conn[p]));
            return -EBADMSG;
        }
        for (size_t i2 = 0; i2 < w->pn[p]; i2++)
            w->svals[w->pidx[p][i2]] = sv[i2];
    }
    return 0;
}

/* The next batch (size examples, drawn from seed) in w->batch, its keys
 * split by ps. */
static int draw_batch(struct psrt_worker *w, int size, uint64_t seed)
{
    int r = w->m.ops->batch(&w->m, &w->batch, size, seed);
    if (r)
        return r;
    int64_t nkeys;
    return split_keys(w, &w->batch, &nkeys) ? -ENOMEM : 0;
}

/* The calls of one training step: 0, or as do_step for the first that
 * failed (err set): STEP_DONE, NEED_RECOVERY or its status. */
static long long step_calls(struct psrt_worker *w, struct psrt_call *calls, int n,
                            struct psrt_err *err)
{
    int bad = psrt_worker_calls(w, calls, n);
    if (bad < 0)
        return 0;
    *err = calls[bad].err;
    if (calls[bad].status == -ESHUTDOWN)
        return STEP_DONE;
    if (calls[bad].rc || calls[bad].status == -EAGAIN)
        return NEED_RECOVERY;
    return calls[bad].status;
}

/* Returns the global step this step was, STEP_DONE, or NEED_RECOVERY (err
 * set, a transport error or a ps not ready), or another negative errno. */
static long long do_step(struct psrt_worker *w, long long local_step, double *loss,
                         struct psrt_err *err)
{
    const struct psrt_flags *f = w->f;
    struct psrt_batch *b = &w->batch;
    int r = draw_batch(w, f->batch_size,
                       psrt_rng_seed_for(f->seed, (uint64_t)f->task, (uint64_t)local_step));
    if (r)
        return r;
    /* Pull */
    struct psrt_call calls[256];
    uint64_t nk[256];
    int n = build_pulls(w, calls, nk, PSRT_PULL_RESERVE);
    long long failed = step_calls(w, calls, n, err);
    if (failed)
        return failed;
    long long gstep = 0;
    if ((r = read_pulls(w, calls, n, &gstep, err)) < 0)
        return r;
    if (gstep < 0)
        return STEP_DONE;
    *loss = w->m.ops->grad(&w->m, b, w->dense, w->svals, w->dgrad, w->sgrad);
    /* Push */
    struct psrt_push_hdr hdr[256];
    n = 0;
    for (int p = 0; p < w->nps && n < 256; p++) {
        if (!ps_in_step(w, p))
            continue;
        hdr[p].nkeys = (uint64_t)w->pn[p];
        hdr[p].ndense = 0;
        hdr[p].pad = 0;
        calls[n] = (struct psrt_call){.ps = p, .op = PSRT_OP_PUSH};
        calls[n].iov[0] = (struct iovec){&hdr[p], 16};
        int k = 1;
        for (int v = 0; v < w->m.nvars && k < 5; v++) {
            const struct psrt_var *var = &w->m.vars[v];
            if (var->kind != PSRT_VAR_DENSE || var->ps != p)
                continue;
            calls[n].iov[k++] = (struct iovec){w->dgrad[v], (size_t)var->n * 4};
            hdr[p].ndense++;
        }
        for (size_t i = 0; i < w->pn[p]; i++)
            w->pgrad[p][i] = w->sgrad[w->pidx[p][i]];
        size_t dense_bytes = 0;
        for (int j = 1; j < k; j++)
            dense_bytes += calls[n].iov[j].iov_len;
        static const uint64_t zero_pad = 0;
        if (dense_bytes % 8)
            calls[n].iov[k++] = (struct iovec){(void *)&zero_pad, 8 - dense_bytes % 8};
        calls[n].iov[k++] = (struct iovec){w->pkeys[p], (size_t)w->pn[p] * 8};
        calls[n].iov[k++] = (struct iovec){w->pgrad[p], (size_t)w->pn[p] * 4};
        calls[n].niov = k;
        n++;
    }
    failed = step_calls(w, calls, n, err);
    return failed ? failed : gstep;
}

/* ---- setup ------------------------------------------------------------------ */

int psrt_worker_setup(struct psrt_worker *w, const struct psrt_flags *f, struct psrt_err *err)
{
    memset(w, 0, sizeof *w);
    w->f = f;
    w->nps = f->nps;
    w->chief = f->task == 0;
    w->restored_step = -1;
    w->last_save_step = -1; /* none reported yet */
    if (psrt_model_init(&w->m, f->model, f->nps, psrt_flags_features(f)))
        return -EINVAL;
    w->conn = calloc((size_t)w->nps, sizeof *w->conn);
    w->resp = calloc((size_t)w->nps, sizeof *w->resp);
    w->pkeys = calloc((size_t)w->nps, sizeof *w->pkeys);
    w->pidx = calloc((size_t)w->nps, sizeof *w->pidx);
    w->pgrad = calloc((size_t)w->nps, sizeof *w->pgrad);
    w->pn = calloc((size_t)w->nps, sizeof *w->pn);
    if (!w->conn || !w->resp || !w->pkeys || !w->pidx || !w->pgrad || !w->pn)
        return -ENOMEM;
    for (int v = 0; v < w->m.nvars; v++) {
        if (w->m.vars[v].kind != PSRT_VAR_DENSE)
            continue;
        w->dense[v] = calloc((size_t)w->m.vars[v].n, 4);
        w->dgrad[v] = calloc((size_t)w->m.vars[v].n, 4);
        if (!w->dense[v] || !w->dgrad[v])
            return -ENOMEM;
    }
    for (int p = 0; p < w->nps; p++) {
        char name[64];
        snprintf(name, sizeof name, "ps task %d", p);
        w->conn[p] = psrt_conn_new(f->ps[p].host, f->ps[p].port, name);
        if (!w->conn[p])
            return -ENOMEM;
    }
    (void)err;
    return 0;
}

/* Connects to every ps and checks, with a Ping, that it serves the model
 * this worker's flags describe (psrt_worker_ping fails -EINVAL otherwise). */
int psrt_worker_connect(struct psrt_worker *w, struct psrt_err *err)
{
    for (int p = 0; p < w->nps; p++) {
        int ready;
        long long step;
        int r = psrt_conn_connect(w->conn[p], w->f->connect_timeout, err);
        if (r)
            return r;
        /* only a model mismatch fails here: a ps that shut down or a
         * connection lost again is the training loop's to handle */
        if (psrt_worker_ping(w, p, &ready, &step, err) == -EINVAL)
            return -EINVAL;
    }
    return 0;
}

/* Non-chief: wait until every ps is initialised (TensorFlow: "Waiting for
 * model to be ready"). */
static int wait_for_model(struct psrt_worker *w, struct psrt_err *err)
{
    double deadline = psrt_now() + w->f->reconnect_timeout, back = 0.02;
    /* the last round's Ping that failed (the connection closed): a peer that
     * keeps failing is named, and its reconnects logged once */
    int failed = -1;
    struct psrt_err last = {0};
    bool said[256] = {false};
    for (;;) {
        int all = 1;
        failed = -1;
        for (int p = 0; p < w->nps; p++) {
            if (!psrt_conn_is_open(w->conn[p])) {
                int r = p < 256 && said[p]
                            ? psrt_conn_connect(w->conn[p], w->f->reconnect_timeout, err)
                            : psrt_worker_reconnect(w, p, err);
                if (p < 256)
                    said[p] = true;
                if (r)
                    return r;
            }
            int ready = 0;
            long long step;
            int r = psrt_worker_ping(w, p, &ready, &step, err);
            if (r == -ESHUTDOWN)
                return STEP_DONE;
            if (r && psrt_conn_is_open(w->conn[p]))
                return r;
            if (r) {
                failed = p;
                last = *err;
            }
            if (r || ready != 2)
                all = 0;
        }
        if (all)
            return 0;
        if (psrt_now() > deadline) {
            if (failed >= 0) {
                const char *cls = psrt_err_class(last.code), *m = last.msg;
                size_t cl = strlen(cls);
                if (!strncmp(m, cls, cl) && !strncmp(m + cl, ": ", 2))
                    m += cl + 2; /* the class once */
                psrt_err_set(err, last.code, "model not ready after %g s: %s",
                             w->f->reconnect_timeout, m);
            } else
                psrt_err_set(err, -ETIMEDOUT,
                             "model not ready after %g s: the chief did not "
                             "initialize or restore the variables",
                             w->f->reconnect_timeout);
            return failed >= 0 ? last.code : -ETIMEDOUT;
        }
        sleep_s(back);
        back = back * 2 > 0.5 ? 0.5 : back * 2;
    }
}

/* After NEED_RECOVERY: reconnect lost ps; the chief restores or initialises
 * when any ps lost its variables; others wait for the model. */
static int recover_once(struct psrt_worker *w, struct psrt_err *err)
{
    int r = ensure_connected(w, err);
    if (r)
        return r;
    if (!w->chief)
        return wait_for_model(w, err);
    for (int p = 0; p < w->nps; p++) {
        int ready = 0;
        long long step;
        r = psrt_worker_ping(w, p, &ready, &step, err);
        if (r == -ESHUTDOWN)
            return STEP_DONE;
        if (r == -EINVAL) /* a ps relaunched with other model flags */
            return r;
        if (r)
            return ensure_connected(w, err) ? r : 0; /* retry the step */
        if (!ready) {
            psrt_log("ps task %d lost its variables (relaunched): preparing the model again", p);
            r = prepare(w, err);
            return r ? r : psrt_worker_open_all(w, err);
        }
    }
    return psrt_worker_open_all(w, err); /* e.g. a restore by an earlier chief */
}

/* recover_once again while peers keep going away during the recovery
 * itself (a second ps lost while the chief restores the first one's
 * variables), for up to --reconnect_timeout from the first loss seen in
 * it; each attempt starts over: reconnect, ping, restore. */
static int recover(struct psrt_worker *w, struct psrt_err *err)
{
    double t0 = psrt_now();
    for (;;) {
        int r = recover_once(w, err);
        if (!w->chief || r == STEP_DONE || !psrt_lost_peer(r) ||
            psrt_now() - t0 >= w->f->reconnect_timeout)
            return r;
        psrt_log("lost a ps again while recovering (%s); recovering again", err->msg);
    }
}

/* ---- chief: saving ------------------------------------------------------------ */

static int save(struct psrt_worker *w, long long step, struct psrt_err *err)
{
    int r = w->f->protocol == PSRT_ROBUST ? psrt_save_robust(w, step, err)
                                          : psrt_save_legacy(w, step, err);
    if (!r) {
        w->last_save_step = w->save_try_step = step;
        w->last_save_time = w->save_try_time = psrt_now();
        w->failed_saves = 0;
    }
    return r;
}

/* A save the run can go on without: the first, one after a restore, one
 * every interval.  Robust: a save that failed for another reason than a
 * lost ps (a disk error or a full disk, on a ps or on the chief) has been
 * abandoned by every participant (save_robust.c: nothing of it is left,
 * nothing reported); one line, and training goes on, the next save due an
 * interval (steps or secs) after this one.  Only the --max_failed_saves-th
 * save failing in a row ends the run (0 or 1: the first, as legacy), and
 * only once the first of them is --failed_saves_secs old.
 * 0 when the save was done or abandoned; else its error (err set): a lost
 * ps (the caller recovers), legacy's, or the bound's. */
static int save_or_abandon(struct psrt_worker *w, long long step, struct psrt_err *err)
{
    const struct psrt_flags *f = w->f;
    int r = save(w, step, err);
    if (!r || f->protocol != PSRT_ROBUST || psrt_lost_peer(r))
        return r;
    w->save_try_step = step;
    w->save_try_time = psrt_now();
    if (w->failed_saves++ == 0)
        w->first_failed_time = w->save_try_time;
    double failing_for = w->save_try_time - w->first_failed_time;
    if (w->failed_saves >= f->max_failed_saves && failing_for >= f->failed_saves_secs) {
        if (f->max_failed_saves > 1) { /* 0 or 1: the error as it is */
            char last[sizeof err->msg], over[32] = "", secs[48] = "";
            snprintf(last, sizeof last, "%s%s", err->msg,
                     w->save_failed_on < 0 ? " on the chief" : "");
            if (f->failed_saves_secs > 0) {
                snprintf(over, sizeof over, " over %.1f s", failing_for);
                snprintf(secs, sizeof secs, ", --failed_saves_secs=%g", f->failed_saves_secs);
            }
            snprintf(err->msg, sizeof err->msg,
                     "%d saves in a row failed%s (--max_failed_saves=%d%s); the last, of step "
                     "%lld: %s",
                     w->failed_saves, over, f->max_failed_saves, secs, step, last);
        }
        return r;
    }
    char next[96];
    if (f->save_steps > 0 && f->save_secs > 0)
        snprintf(next, sizeof next, "at step %lld or in %g s", step + f->save_steps, f->save_secs);
    else if (f->save_steps > 0)
        snprintf(next, sizeof next, "at step %lld", step + f->save_steps);
    else
        snprintf(next, sizeof next, "in %g s", f->save_secs);
    psrt_log("save at step %lld failed and was abandoned (%d in a row; --max_failed_saves=%d): "
             "%s%s; training goes on, next save %s",
             step, w->failed_saves, f->max_failed_saves, err->msg,
             w->save_failed_on < 0 ? " on the chief" : "", next);
    return 0;
}

/* An error no second attempt can cure: a path that is not what it must
 * be, a bad argument, an operation the filesystem lacks. */
static bool config_error(int r)
{
    return r == -ENOTDIR || r == -EISDIR || r == -ENAMETOOLONG || r == -EINVAL || r == -ENOSYS ||
           r == -EOPNOTSUPP || r == -ELOOP || r == -EXDEV;
}

/* The final save (export false) or the export, robust: tried again after
 * a failure that is not a lost ps (the caller recovers from that) nor a
 * configuration error, after 0.5 s, then doubling up to 5 s, for up to
 * --finish_retry_secs, so that a transient disk fault while finishing does
 * not lose the run; then the last error, with the number of attempts. */
static int finish_retrying(struct psrt_worker *w, const char *what, long long step, bool export,
                           struct psrt_err *err)
{
    const struct psrt_flags *f = w->f;
    double t0 = psrt_now(), back = 0.5;
    for (int attempt = 1;; attempt++) {
        int r = export ? psrt_export(w, err) : save(w, step, err);
        if (!r || f->protocol != PSRT_ROBUST || psrt_lost_peer(r) || config_error(r))
            return r;
        if (!export && w->save_failed_on < 0) {
            size_t l = strlen(err->msg);
            snprintf(err->msg + l, sizeof err->msg - l, " on the chief");
        }
        double left = f->finish_retry_secs - (psrt_now() - t0);
        if (left <= 0) {
            if (attempt > 1) {
                char last[sizeof err->msg];
                snprintf(last, sizeof last, "%s", err->msg);
                snprintf(err->msg, sizeof err->msg,
                         "%d attempts in %.1f s failed (--finish_retry_secs=%g); the last: %s",
                         attempt, psrt_now() - t0, f->finish_retry_secs, last);
            }
            return r;
        }
        double d = back < left ? back : left;
        psrt_log("%s failed (attempt %d): %s; trying again in %.1f s (for %.1f s more)", what,
                 attempt, err->msg, d, left);
        sleep_s(d);
        back = back * 2 > 5 ? 5 : back * 2;
    }
}

static void print_fatal(const char *what, const struct psrt_err *err)
{
    /* One line: what was being done, then the error itself, TensorFlow-shaped
     * (legacy errors keep TensorFlow's node line after it). */
    psrt_log("%s failed: %s", what, err->msg);
}

static void shutdown_ps(struct psrt_worker *w)
{
    struct psrt_call calls[256];
    int n = 0;
    for (int p = 0; p < w->nps && n < 256; p++) {
        if (!psrt_conn_is_open(w->conn[p])) {
            struct psrt_err e;
            if (psrt_conn_connect(w->conn[p], 2, &e))
                continue;
        }
        calls[n++] = (struct psrt_call){.ps = p, .op = PSRT_OP_SHUTDOWN, .timeout = 10};
    }
    psrt_worker_calls(w, calls, n);
}

static double mean_loss(const struct psrt_worker *w)
{
    int n = w->nloss < 20 ? w->nloss : 20;
    double s = 0;
    for (int i = 0; i < n; i++)
        s += w->losses[i];
    return n ? s / n : NAN;
}

/* Loss of the final variables on a held-out batch (pull without reserving
 * a step; nothing pushed). */
static int eval_loss(struct psrt_worker *w, double *loss, struct psrt_err *err)
{
    const struct psrt_flags *f = w->f;
    struct psrt_batch *b = &w->batch;
    int r = draw_batch(w, 1000, psrt_rng_seed_for(f->seed ^ 0xe7a1, 999999, 0));
    if (r)
        return r;
    struct psrt_call calls[256];
    uint64_t nk[256];
    int n = build_pulls(w, calls, nk, 0);
    int bad = psrt_worker_calls(w, calls, n);
    if (bad >= 0) {
        *err = calls[bad].err;
        return calls[bad].rc ? calls[bad].rc : calls[bad].status;
    }
    long long gstep;
    if ((r = read_pulls(w, calls, n, &gstep, err)) < 0)
        return r;
    *loss = w->m.ops->grad(&w->m, b, w->dense, w->svals, w->dgrad, w->sgrad);
    return 0;
}

void psrt_worker_free(struct psrt_worker *w)
{
    for (int p = 0; p < w->nps; p++) {
        if (w->conn)
            psrt_conn_free(w->conn[p]);
        if (w->resp)
            psrt_buf_free(&w->resp[p]);
        if (w->pkeys)
            free(w->pkeys[p]);
        if (w->pidx)
            free(w->pidx[p]);
        if (w->pgrad)
            free(w->pgrad[p]);
    }
    free(w->conn);
    free(w->resp);
    free(w->pkeys);
    free(w->pidx);
    free(w->pgrad);
    free(w->pn);
    for (int v = 0; v < PSRT_MAX_VARS; v++) {
        free(w->dense[v]);
        free(w->dgrad[v]);
    }
    free(w->svals);
    free(w->sgrad);
    psrt_batch_free(&w->batch);
    memset(w, 0, sizeof *w);
}

static int worker_run(struct psrt_worker *w, const struct psrt_flags *f);

int psrt_worker_main(const struct psrt_flags *f)
{
    struct psrt_worker W;
    int r = worker_run(&W, f);
    psrt_worker_free(&W);
    return r;
}

/* The chief's start: restore or initialise, read the global step, save the
 * first checkpoint (unless it is the one just restored), open the model to
 * the workers.  *what names the stage an error came from. */
static int chief_start(struct psrt_worker *w, long long *gstep, const char **what,
                       struct psrt_err *err)
{
    const struct psrt_flags *f = w->f;
    *what = "preparing the model (restore or init)";
    int r = prepare(w, err);
    if (r)
        return r;
    /* the step the model is at (a restore's): the first save is named
     * after it, so it must be known, not guessed */
    int ready;
    long long s0 = 0;
    *what = "reading the global step before training";
    r = psrt_worker_ping(w, 0, &ready, &s0, err);
    if (r)
        return r;
    *gstep = s0;
    if (saving_enabled(f) && !(w->restored_step >= 0 && w->restored_step == s0)) {
        *what = "saving the first checkpoint";
        r = save_or_abandon(w, s0, err);
        if (r)
            return r;
    }
    w->last_save_time = w->save_try_time = psrt_now();
    *what = "opening the model to the workers";
    return psrt_worker_open_all(w, err);
}

/* The chief's end: the final global step, the final loss, the final
 * checkpoint (unless the last save was at that step) and the export.  A
 * ps lost here is recovered by the caller like one lost while training;
 * *what names the stage an error came from. */
static int chief_finish(struct psrt_worker *w, long long gstep, double dt, const char **what,
                        struct psrt_err *err)
{
    const struct psrt_flags *f = w->f;
    int ready;
    long long final = gstep;
    *what = "reading the final global step";
    int r = ensure_connected(w, err);
    if (!r)
        r = psrt_worker_ping(w, 0, &ready, &final, err);
    if (r)
        return r;
    double ml = NAN;
    *what = "evaluating the final loss";
    r = eval_loss(w, &ml, err);
    if (r)
        return r;
    psrt_log("training done at global step %lld: %lld chief steps in %.2f s, final loss %.6g "
             "on a held-out batch (target %.3g: %s)",
             final, w->chief_steps, dt, ml, w->m.ops->target_loss,
             ml <= w->m.ops->target_loss ? "reached" : "NOT reached");
    psrt_ev("train.done", "step=%lld loss=%.6g", final, ml);
    if (saving_enabled(f) && w->last_save_step != final) {
        *what = "saving the final checkpoint";
        r = finish_retrying(w, *what, final, false, err);
        if (r)
            return r;
    }
    if (f->export_dir[0]) {
        *what = "export";
        r = finish_retrying(w, *what, final, true, err);
        if (r)
            return r;
    }
    return 0;
}

/* The task itself; psrt_worker_main frees w whichever way it returns. */
static int worker_run(struct psrt_worker *w, const struct psrt_flags *f)
{
    struct psrt_err err = {0};
    int r = psrt_worker_setup(w, f, &err);
    if (r) {
        psrt_log("setup failed: %s", strerror(-r));
        return 1;
    }
    r = psrt_worker_connect(w, &err);
    if (r) {
        print_fatal("connecting to the ps tasks", &err);
        return 1;
    }
    psrt_ev("worker.ready", "task=%d", f->task);
    if (w->chief) {
        /* MonitoredTrainingSession/Supervisor create the log dir on the chief. */
        char cmd_dir[1100];
        snprintf(cmd_dir, sizeof cmd_dir, "%s", f->train_dir);
        /* the first directory that cannot be made is the one to name (those
         * after it then fail with ENOENT) */
        int me = 0;
        for (char *p = cmd_dir + 1; *p && !me; p++)
            if (*p == '/') {
                *p = 0;
                if (mkdir(cmd_dir, 0777) < 0 && errno != EEXIST)
                    me = -errno;
                else
                    *p = '/';
            }
        if (!me && mkdir(cmd_dir, 0777) < 0 && errno != EEXIST)
            me = -errno;
        struct stat tst;
        if (me) {
            psrt_err_set(&err, me, "mkdir %s: %s", cmd_dir, strerror(-me));
        } else if (stat(cmd_dir, &tst) < 0 || !S_ISDIR(tst.st_mode)) {
            me = -ENOTDIR;
            psrt_err_set(&err, me,
                         "%s exists and is not a directory: give --train_dir a "
                         "directory",
                         cmd_dir);
        }
        if (me) {
            print_fatal("creating train_dir", &err);
            return 1;
        }
    } else {
        r = wait_for_model(w, &err);
        if (r == STEP_DONE) {
            psrt_log("cluster already done");
            return 0;
        }
        if (r) {
            print_fatal("waiting for the model", &err);
            return 1;
        }
    }
    long long local = 0, gstep = 0;
    if (w->chief) {
        /* a ps lost while the chief starts (a relaunched chief restoring,
         * say) is recovered like one lost while training: start again */
        double t_start = psrt_now();
        const char *what;
        while ((r = chief_start(w, &gstep, &what, &err))) {
            if (!psrt_lost_peer(r) || psrt_now() - t_start >= f->reconnect_timeout) {
                print_fatal(what, &err);
                return 1;
            }
            psrt_log("lost a ps while starting (%s); starting again", err.msg);
            r = ensure_connected(w, &err);
            if (r) {
                print_fatal("reconnecting to the ps tasks", &err);
                return 1;
            }
        }
    }
    psrt_ev("train.start", "job=worker task=%d", f->task);
    double t0 = psrt_now();
    double t_fin = 0; /* when a ps was first lost while finishing */
    for (;;) {
        for (;;) {
            double loss = 0;
            long long s = do_step(w, local, &loss, &err);
            if (s == STEP_DONE)
                break;
            if (s == NEED_RECOVERY) {
                r = recover(w, &err);
                if (r == STEP_DONE)
                    break;
                if (r) {
                    print_fatal(w->chief ? "recovering from a lost ps" : "waiting for the model",
                                &err);
                    return 1;
                }
                continue;
            }
            if (s < 0) {
                print_fatal("training step", &err);
                return 1;
            }
            local++;
            gstep = s;
            if (w->chief) {
                w->losses[w->nloss++ % 20] = loss;
                w->chief_steps++;
            }
            /* every worker reports every log_every of its steps (event
             * train.step: how far the job got, whoever does the steps), the
             * chief also logs its loss; at most 100 a second, however fast
             * the steps */
            if ((w->chief ? w->chief_steps : local) % f->log_every == 0) {
                static double last_report;
                double now = psrt_now();
                if (now - last_report >= 0.01) {
                    last_report = now;
                    if (w->chief)
                        psrt_log("step %lld: loss = %.6g (mean of last 20: %.6g)", gstep, loss,
                                 mean_loss(w));
                    psrt_ev("train.step", "step=%lld loss=%.6g", gstep, loss);
                }
            }
            if (w->chief) {
                /* an interval after the last save attempted, done or
                 * abandoned (a lost ps's is retried at once) */
                bool due = (f->save_steps > 0 && gstep >= w->save_try_step + f->save_steps) ||
                           (f->save_secs > 0 && psrt_now() - w->save_try_time >= f->save_secs);
                if (due && gstep < f->max_steps) {
                    r = save_or_abandon(w, gstep, &err);
                    if (psrt_lost_peer(r)) {
                        /* a ps went away mid-save: recover, the save is not reported */
                        psrt_log("save at step %lld abandoned: %s", gstep, err.msg);
                        int rr = recover(w, &err);
                        if (rr == STEP_DONE)
                            break;
                        if (rr) {
                            print_fatal("recovering from a lost ps", &err);
                            return 1;
                        }
                    } else if (r) {
                        print_fatal("saving a checkpoint", &err);
                        return 1;
                    }
                }
            }
            sleep_s(f->step_delay);
        }
        double dt = psrt_now() - t0;
        if (!w->chief) {
            psrt_log("done: %lld local steps in %.2f s", local, dt);
            psrt_ev("train.done", "step=%lld", gstep);
            return 0;
        }
        /* chief: final checkpoint at the last global step, export, shut
         * down.  Robust: a ps lost meanwhile (killed during the final save,
         * say) is recovered as during training, for up to
         * --reconnect_timeout (legacy exits, as TensorFlow's chief does): a
         * relaunched ps gets the latest checkpoint back, and training goes
         * on from there to max_steps before finishing again. */
        const char *what;
        r = chief_finish(w, gstep, dt, &what, &err);
        if (!r)
            break;
        if (f->protocol != PSRT_ROBUST || !psrt_lost_peer(r) || r == -ESHUTDOWN ||
            (t_fin > 0 && psrt_now() - t_fin >= f->reconnect_timeout)) {
            print_fatal(what, &err);
            return 1;
        }
        if (t_fin == 0)
            t_fin = psrt_now();
        psrt_log("lost a ps while finishing (%s failed: %s); recovering", what, err.msg);
        r = recover(w, &err);
        if (r && r != STEP_DONE) {
            print_fatal("recovering from a lost ps", &err);
            return 1;
        }
    }
    shutdown_ps(w);
    return 0;
}
