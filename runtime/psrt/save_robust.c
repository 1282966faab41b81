/*
 * save_robust.c: the robust checkpoint protocol.  No shared filesystem is
 * assumed; every shard ends up durable on two hosts: its own ps and the
 * chief.
 *
 *   1. save.begin.  RobustSave to every ps holding variables: each takes a
 *      consistent snapshot of its variables (state lock), returns it to the
 *      chief, and writes the same snapshot durably to its OWN disk as
 *      <train_dir>/ps<i>/model.ckpt-N in the background (temp names, fsync
 *      of files and directory, rename: ckpt_writer_finish with CKPT_SYNC;
 *      mkdir -p, so any layout works; save.shard_written on the ps when
 *      durable), overlapping with step 2.
 *   2. The chief writes every ps's tensors as ONE TensorFlow bundle
 *      <train_dir>/model.ckpt-N.{index,data-00000-of-00001} on its disk,
 *      durably and atomically (same writer rules; O_DIRECT where the disk
 *      takes it, see CKPT_W_DIRECT): a complete, verifiable
 *      checkpoint that TensorFlow and `psrt inspect` can read.
 *   3. save.commit.begin, then RobustCommit to every ps: each waits for
 *      its background write (a failed write fails the save) and adds
 *      model.ckpt-N to its own <train_dir>/ps<i>/checkpoint state file
 *      (atomic, fsynced) and drops its copies beyond max_to_keep.
 *   4. The chief updates <train_dir>/checkpoint (atomic, fsynced) and
 *      deletes its checkpoints beyond max_to_keep.
 *   5. Only now: save.done event and the "Saved checkpoint" log line.
 * Invariant: when save.done for step N is reported, shard i of N is
 * durable on ps i and on the chief, and both state files name N.  A crash
 * at any point before leaves the previous reported checkpoint intact
 * (nothing is overwritten in place: names carry the step).  Restore
 * (restore.c) uses whichever copy survives.
 *
 * A save that fails is abandoned by every participant: the chief's writer
 * removes its temporary files (and a complete copy no state names is
 * deleted); unless a ps was lost (the chief then recovers, and each ps
 * sweeps what is left at its next commit), every ps the save reached drops
 * its copy, committed or not (RobustAbort), so that nothing of it stays on
 * any disk and a full disk gets back what the save took.  The last
 * reported checkpoint is never touched.  Only then save.failed (step, on:
 * ps:<i> or chief, error).  Whether the run goes on is worker.c's call
 * (--max_failed_saves).
 */
#include "runtime/psrt/worker.h"
#include "runtime/ckpt/bundle.h"
#include "runtime/ckpt/state.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* One RobustSave reply, streamed into the chief's bundle: the tensor list
 * (psrt_tl_encode's layout) is read piece by piece from the connection,
 * each tensor's bytes straight into the writer's buffer (sr_fill) and
 * checksummed once for both the frame's crc and the tensor's.  The frame's
 * crc is checked at the end, before anything is finished: a corrupt reply
 * fails the save and the writer's temporary files are removed. */

struct sreader {
    struct psrt_conn *c;
    uint64_t off, len;
    struct psrt_err *err;
};

static int sr_read(struct sreader *sr, void *buf, size_t n)
{
    if (n > sr->len - sr->off)
        return -EBADMSG;
    int r = psrt_conn_recv_part(sr->c, buf, n, sr->err);
    sr->off += n;
    return r;
}

/* The writer's fill: socket bytes straight into its buffer, checksummed
 * once for both the frame and the tensor. */
static int sr_fill(void *ctx, void *dst, size_t n, uint32_t *crc)
{
    struct sreader *sr = ctx;
    if (n > sr->len - sr->off)
        return -EBADMSG;
    int r = psrt_conn_recv_part_crc(sr->c, dst, n, crc, sr->err);
    sr->off += n;
    return r;
}

static int sr_align8(struct sreader *sr)
{
    uint8_t pad[8];
    return sr_read(sr, pad, (8 - sr->off % 8) % 8);
}

/* 0, a transport error (the connection is closed, err set), -EBADMSG for
 * a reply that does not parse, or a ckpt error (ce set). */
static int stream_shard(struct sreader *sr, struct ckpt_writer *cw, uint64_t *bytes,
                        struct ckpt_err *ce)
{
    uint32_t n, u;
    int r = sr_read(sr, &n, 4);
    if (r || n > 1000000)
        return r ? r : -EBADMSG;
    for (uint32_t i = 0; i < n; i++) {
        char name[160];
        uint32_t dtype, rank;
        int64_t dims[2] = {0, 0};
        uint64_t len;
        if ((r = sr_read(sr, &u, 4)) || u >= sizeof name || (r = sr_read(sr, name, u)))
            return r ? r : -EBADMSG;
        name[u] = 0;
        if ((r = sr_read(sr, &dtype, 4)) || (r = sr_read(sr, &rank, 4)) || rank > 2 ||
            (r = sr_read(sr, dims, 8 * rank)) || (r = sr_read(sr, &len, 8)) || (r = sr_align8(sr)))
            return r ? r : -EBADMSG;
        int64_t el = ckpt_shape_elements((int)rank, dims);
        if (el < 0 || ckpt_dtype_size((int)dtype) == 0 ||
            (uint64_t)el * ckpt_dtype_size((int)dtype) != len || len > sr->len - sr->off)
            return -EBADMSG;
        r = ckpt_writer_begin(cw, name, (int)dtype, (int)rank, dims, ce);
        if (!r)
            r = ckpt_writer_append_fill(cw, (size_t)len, sr_fill, sr, ce);
        if (r || (r = ckpt_writer_end(cw, ce)))
            return r;
        *bytes += len;
        if ((r = sr_align8(sr)))
            return r;
    }
    return sr->off == sr->len ? 0 : -EBADMSG;
}

/* Appends which ps reported err (its message names a path on its disk). */
static void on_ps(struct psrt_err *err, struct psrt_worker *w, int p)
{
    size_t l = strlen(err->msg);
    snprintf(err->msg + l, sizeof err->msg - l, " on %s", psrt_conn_peer(w->conn[p]));
}

/* The save of step (name) failed and is abandoned: every ps it reached,
 * order[0..nsent), drops its copy (RobustAbort; reconnecting to those whose
 * connection the failure closed).  One that cannot keeps it, logged: its
 * next commit sweeps it, and a restore passes over a step not every ps
 * holds. */
static void drop_on_ps(struct psrt_worker *w, long long step, const char *name, const int *order,
                       int nsent)
{
    const struct psrt_flags *f = w->f;
    char reported[128] = "";
    if (w->last_save_step >= 0)
        snprintf(reported, sizeof reported, "model.ckpt-%lld", w->last_save_step);
    struct psrt_buf req = {0};
    psrt_buf_u64(&req, (uint64_t)step);
    psrt_buf_str(&req, name);
    psrt_buf_str(&req, reported);
    struct psrt_call calls[256];
    int n = 0;
    for (int i = 0; i < nsent && n < 256; i++) {
        int p = order[i];
        struct psrt_err e = {0};
        if (!psrt_conn_is_open(w->conn[p]) && psrt_conn_connect(w->conn[p], f->rpc_timeout, &e)) {
            psrt_log("abandoned save of step %lld: ps task %d keeps its copy (%s)", step, p, e.msg);
            continue;
        }
        calls[n] = (struct psrt_call){
            .ps = p, .op = PSRT_OP_RABORT, .timeout = psrt_flags_bulk_timeout(f)};
        calls[n].iov[0] = (struct iovec){req.p, req.len};
        calls[n].niov = 1;
        n++;
    }
    if (psrt_worker_calls(w, calls, n) >= 0)
        for (int i = 0; i < n; i++)
            if (calls[i].rc || calls[i].status)
                psrt_log("abandoned save of step %lld: ps task %d keeps its copy (%s)", step,
                         calls[i].ps, calls[i].err.msg);
    psrt_buf_free(&req);
}

/* Whether dir's state file lists the checkpoint, by name or by prefix (as
 * it records it under an absolute train_dir): a state write that failed
 * after its rename does. */
static bool state_lists(const char *dir, const char *name, const char *prefix)
{
    struct ckpt_state st;
    struct ckpt_err ce = {0};
    memset(&st, 0, sizeof st);
    if (ckpt_state_read(dir, &st, &ce))
        return false;
    bool found = false;
    for (size_t i = 0; i < st.n_all && !found; i++)
        found = !strcmp(st.all_model_checkpoint_paths[i], name) ||
                !strcmp(st.all_model_checkpoint_paths[i], prefix);
    ckpt_state_free(&st);
    return found;
}

int psrt_save_robust(struct psrt_worker *w, long long step, struct psrt_err *err)
{
    const struct psrt_flags *f = w->f;
    char prefix[1200], name[128];
    psrt_ckpt_prefix(f, step, prefix, sizeof prefix);
    snprintf(name, sizeof name, "model.ckpt-%lld", step);
    psrt_ev("save.begin", "step=%lld prefix=%s", step, psrt_ev_q(prefix));
    double t0 = psrt_now();
    int order[256], n = psrt_model_shards(&w->m, order), r = 0;
    struct ckpt_writer *cw = NULL;
    struct ckpt_err ce = {0};
    struct psrt_buf req = {0};
    struct psrt_call calls[256];
    int nsent = 0, nread = 0, fe;
    bool finished = false; /* the chief's copy is complete on its disk */
    int on = -1;           /* the ps an error came from (-1: the chief) */
    uint64_t bytes = 0;

    fe = psrt_fault("psrt/save/begin");
    if (fe) {
        psrt_err_set(err, -fe, "save of %s: %s (fault point psrt/save/begin)", prefix,
                     strerror(fe));
        r = -fe;
        goto cleanup;
    }
    /* 1. every ps: snapshot, durable local copy in the background, bytes
     * back.  Every request goes out at once; the replies are read one ps at
     * a time and streamed into the chief's copy (2.) as they arrive
     * (stream_shard), so the chief's copy goes to the disk while the ps
     * tasks write theirs (the other replies wait in their sockets), and the
     * chief holds the writer's two buffers of it in memory, not the whole
     * model. */
    psrt_buf_u64(&req, (uint64_t)step);
    psrt_buf_str(&req, name);
    struct iovec riov = {req.p, req.len};
    for (nsent = 0; nsent < n; nsent++) {
        struct psrt_conn *c = w->conn[order[nsent]];
        r = psrt_conn_send(c, PSRT_OP_RSAVE, 0, &riov, 1, psrt_flags_bulk_timeout(f), err);
        if (r) {
            on = order[nsent];
            goto cleanup;
        }
    }
    /* 2. the chief's complete copy */
    if ((r = psrt_fault_bundle("psrt/save/chief_write", prefix, err)))
        goto cleanup;
    /* O_DIRECT with asynchronous writes where the disk takes them: the
     * bytes skip the page cache and the disk writes one buffer while the
     * next arrives from the network */
    struct ckpt_writer_opts o = {.flags = CKPT_W_MKDIR_P | CKPT_W_DIRECT};
    r = ckpt_writer_open(&cw, prefix, &o, &ce);
    if (r) {
        psrt_err_from_ckpt(err, r, &ce);
        psrt_err_add_call(err);
        goto cleanup;
    }
    for (; nread < n; nread++) {
        int p = order[nread];
        struct sreader sr = {.c = w->conn[p], .err = err};
        int32_t status = 0;
        on = p; /* until the reply is in the chief's copy, an error is likely the ps's */
        r = psrt_conn_recv_begin(sr.c, psrt_flags_bulk_timeout(f), &sr.len, &status, err);
        if (r)
            goto cleanup;
        if (status) { /* the payload is the message */
            size_t k = sr.len < sizeof err->msg - 1 ? (size_t)sr.len : sizeof err->msg - 1;
            char msg[sizeof err->msg];
            if ((r = sr_read(&sr, msg, k)))
                goto cleanup;
            if (sr.len > k) { /* an overlong message: the rest is dropped */
                psrt_conn_close(sr.c);
            } else if ((r = psrt_conn_recv_end(sr.c, err))) {
                goto cleanup;
            }
            if (k)
                memcpy(err->msg, msg, k);
            else
                k = (size_t)snprintf(err->msg, sizeof err->msg, "%s: %s failed on %s",
                                     psrt_err_class(status), psrt_op_name(PSRT_OP_RSAVE),
                                     psrt_ps_device(p));
            err->msg[k] = 0;
            err->code = status;
            on_ps(err, w, p);
            r = status;
            nread++;
            goto cleanup;
        }
        r = stream_shard(&sr, cw, &bytes, &ce);
        if (!r)
            r = psrt_conn_recv_end(sr.c, err); /* the crc over everything read */
        else if (ce.msg[0]) {                  /* the writer's error */
            psrt_err_from_ckpt(err, r, &ce);
            psrt_err_add_call(err);
            on = -1;
        } else if (psrt_conn_is_open(sr.c)) /* not a transport error (those close it) */
            psrt_err_set(err, r, "malformed RobustSave reply from %s", psrt_conn_peer(sr.c));
        if (r) {
            psrt_conn_close(sr.c); /* unread bytes, or closed already */
            nread++;
            goto cleanup;
        }
        on = -1;
    }
    double t_rsave = psrt_now();
    r = ckpt_writer_finish(cw, CKPT_SYNC, &ce);
    cw = NULL;
    finished = r == 0;
    if (r) {
        psrt_err_from_ckpt(err, r, &ce);
        psrt_err_add_call(err);
        goto cleanup;
    }
    double t_chief = psrt_now();
    /* 3. every ps commits its copy.  save.commit.begin first: every ps's
     * reply is in the chief's copy, durable, and no commit has gone out (a
     * fault on it, a sync point, lands between the two phases) */
    psrt_ev("save.commit.begin", "step=%lld", step);
    psrt_buf_reset(&req);
    psrt_buf_u64(&req, (uint64_t)step);
    psrt_buf_str(&req, name);
    psrt_buf_u32(&req, (uint32_t)f->max_to_keep);
    /* the last reported checkpoint (or the one restored): each ps keeps its
     * copy beyond max_to_keep until this save is reported, so that a save
     * failing after some commits leaves it on two hosts */
    char reported[128] = "";
    if (w->last_save_step >= 0 && w->last_save_step != step)
        snprintf(reported, sizeof reported, "model.ckpt-%lld", w->last_save_step);
    psrt_buf_str(&req, reported);
    for (int i = 0; i < n; i++) {
        calls[i] = (struct psrt_call){
            .ps = order[i], .op = PSRT_OP_RCOMMIT, .timeout = psrt_flags_bulk_timeout(f)};
        calls[i].iov[0] = (struct iovec){req.p, req.len};
        calls[i].niov = 1;
    }
    int bad = psrt_worker_calls(w, calls, n);
    if (bad >= 0) {
        *err = calls[bad].err;
        r = calls[bad].rc ? calls[bad].rc : calls[bad].status;
        if (!calls[bad].rc) /* the ps's own error: say which ps (transport errors do) */
            on_ps(err, w, calls[bad].ps);
        on = calls[bad].ps;
        goto cleanup;
    }
    /* 4. the chief's state file, last */
    r = psrt_update_state(w, prefix, CKPT_SYNC, err);
    if (psrt_bench_debug())
        psrt_log("robust save phases: shards received and written %.3f s, chief's copy durable "
                 "%.3f s, ps commits %.3f s",
                 t_rsave - t0, t_chief - t_rsave, psrt_now() - t_chief);
cleanup:
    /* replies never read would answer the next call on those connections */
    for (int i = nread; i < nsent; i++)
        psrt_conn_close(w->conn[order[i]]);
    if (cw)
        ckpt_writer_abort(cw);
    psrt_buf_free(&req);
    for (int p = 0; p < w->nps; p++)
        if (w->resp[p].cap > (64u << 20))
            psrt_buf_free(&w->resp[p]);
    /* a state write that failed after its rename names the step: then it
     * is kept everywhere (a restart restores it) */
    bool listed = r && state_lists(f->train_dir, name, prefix);
    if (r && finished && !listed) {
        /* never reported: the chief's copy would stay on its disk for good
         * (no state names it, so max_to_keep never deletes it) */
        psrt_delete_checkpoint(prefix);
    }
    /* a save of the last reported step again (after a restore) wrote the
     * very files restored: nothing of it to drop */
    if (r && !listed && !psrt_lost_peer(r) && step != w->last_save_step)
        drop_on_ps(w, step, name, order, nsent);
    w->save_failed_on = on;
    if (r) {
        if (r == -ENOSPC || r == -EDQUOT) {
            size_t l = strlen(err->msg);
            snprintf(err->msg + l, sizeof err->msg - l,
                     "; free space on that disk or lower --max_to_keep (the checkpoints "
                     "already saved are intact)");
        }
        char where[32] = "chief";
        if (on >= 0)
            snprintf(where, sizeof where, "ps:%d", on);
        psrt_ev("save.failed", "step=%lld on=%s error=%s", step, where, psrt_ev_q(err->msg));
        return r;
    }
    psrt_log("Saved checkpoint for step %lld: %s (%.1f MB durable on the chief and on %d ps "
             "task%s, %.3f s)",
             step, prefix, (double)bytes / 1e6, n, n == 1 ? "" : "s", psrt_now() - t0);
    psrt_ev("save.done", "step=%lld prefix=%s", step, psrt_ev_q(prefix));
    return 0;
}
