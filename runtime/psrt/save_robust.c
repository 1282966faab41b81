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
 *      durably and atomically (same writer rules): a complete, verifiable
 *      checkpoint that TensorFlow and `psrt inspect` can read.
 *   3. RobustCommit to every ps: each waits for its background write (a
 *      failed write fails the save) and adds model.ckpt-N to its own
 *      <train_dir>/ps<i>/checkpoint state file (atomic, fsynced) and drops
 *      its copies beyond max_to_keep.
 *   4. The chief updates <train_dir>/checkpoint (atomic, fsynced) and
 *      deletes its checkpoints beyond max_to_keep.
 *   5. Only now: save.done event and the "Saved checkpoint" log line.
 * Invariant: when save.done for step N is reported, shard i of N is
 * durable on ps i and on the chief, and both state files name N.  A crash
 * at any point before leaves the previous reported checkpoint intact
 * (nothing is overwritten in place: names carry the step).  Restore
 * (restore.c) uses whichever copy survives.
 */
#include "runtime/psrt/worker.h"
#include "runtime/ckpt/bundle.h"
#include "runtime/ckpt/state.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static void from_ckpt(struct psrt_err *err, const struct ckpt_err *ce, int r)
{
    char buf[PSRT_MSG_MAX];
    ckpt_err_tf(ce, buf, sizeof buf);
    err->code = r;
    snprintf(err->msg, sizeof err->msg, "%s", buf);
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
    uint64_t bytes = 0;

    int fe = psrt_fault("psrt/save/begin");
    if (fe) {
        psrt_err_set(err, -fe, "save of %s: %s (fault point psrt/save/begin)", prefix, strerror(fe));
        r = -fe;
        goto cleanup;
    }
    /* 1. every ps: durable local copy, bytes back */
    psrt_buf_u64(&req, (uint64_t)step);
    psrt_buf_str(&req, name);
    for (int i = 0; i < n; i++) {
        calls[i] = (struct psrt_call){.ps = order[i], .op = PSRT_OP_RSAVE,
                                      .timeout = f->rpc_timeout * 10};
        calls[i].iov[0] = (struct iovec){req.p, req.len};
        calls[i].niov = 1;
    }
    int bad = psrt_worker_calls(w, calls, n);
    if (bad >= 0) {
        *err = calls[bad].err;
        r = calls[bad].rc ? calls[bad].rc : calls[bad].status;
        goto cleanup;
    }
    double t_rsave = psrt_now();
    /* 2. the chief's complete copy */
    fe = psrt_fault("psrt/save/chief_write");
    if (fe) {
        char *d = ckpt_data_name(prefix, 0, 1);
        psrt_err_path(err, -fe, d ? d : prefix);
        free(d);
        r = -fe;
        goto cleanup;
    }
    struct ckpt_writer_opts o = {.flags = CKPT_W_MKDIR_P};
    r = ckpt_writer_open(&cw, prefix, &o, &ce);
    if (r) {
        from_ckpt(err, &ce, r);
        goto cleanup;
    }
    for (int i = 0; i < n; i++) {
        struct psrt_tl l;
        struct psrt_buf *b = &w->resp[order[i]];
        b->off = 0;
        r = psrt_tl_decode(&l, b);
        if (r) {
            psrt_err_set(err, r, "malformed RobustSave reply from %s",
                         psrt_conn_peer(w->conn[order[i]]));
            goto cleanup;
        }
        for (int t = 0; t < l.n && !r; t++) {
            r = ckpt_writer_add(cw, l.t[t].name, l.t[t].dtype, l.t[t].rank, l.t[t].dims,
                                l.t[t].data, l.t[t].len, &ce);
            bytes += l.t[t].len;
        }
        psrt_tl_free(&l);
        if (r) {
            from_ckpt(err, &ce, r);
            goto cleanup;
        }
    }
    r = ckpt_writer_finish(cw, CKPT_SYNC, &ce);
    cw = NULL;
    if (r) {
        from_ckpt(err, &ce, r);
        goto cleanup;
    }
    double t_chief = psrt_now();
    /* 3. every ps commits its copy */
    psrt_buf_reset(&req);
    psrt_buf_u64(&req, (uint64_t)step);
    psrt_buf_str(&req, name);
    psrt_buf_u32(&req, (uint32_t)f->max_to_keep);
    for (int i = 0; i < n; i++) {
        calls[i] = (struct psrt_call){.ps = order[i], .op = PSRT_OP_RCOMMIT,
                                      .timeout = f->rpc_timeout * 10};
        calls[i].iov[0] = (struct iovec){req.p, req.len};
        calls[i].niov = 1;
    }
    bad = psrt_worker_calls(w, calls, n);
    if (bad >= 0) {
        *err = calls[bad].err;
        r = calls[bad].rc ? calls[bad].rc : calls[bad].status;
        goto cleanup;
    }
    /* 4. the chief's state file, last */
    r = psrt_update_state(w, prefix, CKPT_SYNC, err);
    if (getenv("PSRT_BENCH_DEBUG"))
        psrt_log("robust save phases: shards to the chief %.3f s, chief's copy %.3f s, ps "
                 "commits %.3f s", t_rsave - t0, t_chief - t_rsave, psrt_now() - t_chief);
cleanup:
    if (cw)
        ckpt_writer_abort(cw);
    psrt_buf_free(&req);
    for (int p = 0; p < w->nps; p++)
        if (w->resp[p].cap > (64u << 20))
            psrt_buf_free(&w->resp[p]);
    if (r) {
        psrt_ev("save.failed", "step=%lld error=%s", step, psrt_ev_q(err->msg));
        return r;
    }
    psrt_log("Saved checkpoint for step %lld: %s (%.1f MB durable on the chief and on %d ps "
             "task%s, %.3f s)",
             step, prefix, (double)bytes / 1e6, n, n == 1 ? "" : "s", psrt_now() - t0);
    psrt_ev("save.done", "step=%lld prefix=%s", step, psrt_ev_q(prefix));
    return 0;
}
