/*
 * restore.c: the chief's restore, at start and whenever a ps comes back
 * without its variables.
 *
 * legacy (TensorFlow 1.x): the chief reads the `checkpoint` state file on
 * ITS disk and sends the prefix it names to every ps; each ps runs
 * RestoreV2 on its OWN disk (S004: a relaunched or replaced ps host does not
 * have the files: "Unsuccessful TensorSliceReader constructor: Failed to
 * get matching files on ...").
 *
 * robust: the latest checkpoint is the one the chief's state file names
 * (the record of reported saves); when the chief's disk was lost, the
 * newest step the ps tasks' own state files name.  For each shard: the ps's own
 * durable copy (RestoreV2 from <train_dir>/ps<i>/), else the chief's
 * complete copy (the chief reads the shard's tensors, crc-checked, and
 * sends them: Load; the ps also writes them back to its disk, so the shard
 * has two copies again); a copy that fails to read (missing, corrupt) falls
 * back to the other.  When neither copy of a shard survives, the restore
 * fails with an error naming the shard, its ps, and both places looked at;
 * it never falls back silently to an older step.
 */
#include "runtime/psrt/worker.h"
#include "runtime/ckpt/bundle.h"
#include "runtime/ckpt/state.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static long long step_of(const char *p)
{
    const char *d = strrchr(p, '-');
    return d ? atoll(d + 1) : -1;
}

/* The global step a robust checkpoint name ends in ("model.ckpt-300"), or
 * -1 when it does not end in "-<digits>". */
static long long step_of_name(const char *p)
{
    const char *d = strrchr(p, '-');
    if (!d || !d[1] || strspn(d + 1, "0123456789") != strlen(d + 1))
        return -1;
    return atoll(d + 1);
}

static int restore_legacy(struct psrt_worker *w, long long *step, struct psrt_err *err)
{
    const struct psrt_flags *f = w->f;
    struct ckpt_state st;
    struct ckpt_err ce = {0};
    memset(&st, 0, sizeof st);
    int r = ckpt_state_read(f->train_dir, &st, &ce);
    if (r == -ENOENT)
        return 0;
    if (r) {
        psrt_err_from_ckpt(err, r, &ce);
        return r;
    }
    if (!st.model_checkpoint_path) {
        ckpt_state_free(&st);
        return 0;
    }
    char *prefix = ckpt_state_resolve(f->train_dir, st.model_checkpoint_path);
    ckpt_state_free(&st);
    if (!prefix)
        return -ENOMEM;
    *step = step_of(prefix);
    psrt_log("Restoring parameters from %s", prefix);
    psrt_ev("restore.begin", "prefix=%s", psrt_ev_q(prefix));
    int order[256], n = psrt_model_shards(&w->m, order);
    struct psrt_buf req = {0};
    psrt_buf_u32(&req, 0);
    psrt_buf_u64(&req, (uint64_t)*step);
    psrt_buf_str(&req, prefix);
    struct psrt_call calls[256];
    for (int i = 0; i < n; i++) {
        calls[i] = (struct psrt_call){.ps = order[i], .op = PSRT_OP_RESTORE};
        calls[i].iov[0] = (struct iovec){req.p, req.len};
        calls[i].niov = 1;
    }
    int bad = psrt_worker_calls(w, calls, n);
    psrt_buf_free(&req);
    if (bad >= 0) {
        *err = calls[bad].err;
        r = calls[bad].rc ? calls[bad].rc : calls[bad].status;
        if (!calls[bad].rc) {
            size_t l = strlen(err->msg);
            char node[64];
            if (bad == 0)
                snprintf(node, sizeof node, "save/RestoreV2");
            else
                snprintf(node, sizeof node, "save/RestoreV2_%d", bad);
            snprintf(err->msg + l, sizeof err->msg - l,
                     "\n\t [[Node: %s = RestoreV2[_device=\"/job:ps/replica:0/task:%d/cpu:0\"]()]]",
                     node, order[bad]);
        }
        psrt_ev("restore.failed", "error=%s", psrt_ev_q(err->msg));
        free(prefix);
        return r;
    }
    psrt_ev("restore.done", "step=%lld prefix=%s", *step, psrt_ev_q(prefix));
    free(prefix);
    return 1;
}

/* Reads ps p's tensors of the chief's copy into an encoded Load request. */
static int chief_shard(struct psrt_worker *w, const char *prefix, int p, long long step,
                       const char *name, struct psrt_buf *out, struct psrt_err *err)
{
    struct psrt_tl all, mine = {0};
    int fe = psrt_fault("psrt/restore/read");
    if (fe) {
        char *ix = ckpt_index_name(prefix);
        psrt_err_path(err, -fe, ix ? ix : prefix);
        free(ix);
        return -fe;
    }
    int r = psrt_tl_read_bundle(&all, prefix, err);
    if (r)
        return r;
    for (int i = 0; i < all.n; i++)
        if (psrt_tensor_on_ps(&w->m, all.t[i].name, p))
            psrt_tl_add(&mine, all.t[i].name, all.t[i].dtype, all.t[i].rank, all.t[i].dims,
                        all.t[i].data, all.t[i].len);
    psrt_buf_reset(out);
    psrt_buf_u64(out, (uint64_t)step);
    psrt_buf_str(out, name);
    psrt_buf_u32(out, (uint32_t)w->f->max_to_keep);
    psrt_buf_align8(out);
    psrt_tl_encode(&mine, out);
    mine.owns = false;
    psrt_tl_free(&mine);
    psrt_tl_free(&all);
    return out->bad ? -ENOMEM : 0;
}

static int restore_robust(struct psrt_worker *w, long long *step, struct psrt_err *err)
{
    const struct psrt_flags *f = w->f;
    int order[256], n = psrt_model_shards(&w->m, order), r = 0;
    long long best = -1, ps_best = -1;
    struct ckpt_state st;
    struct ckpt_err ce = {0};
    memset(&st, 0, sizeof st);
    int fe = psrt_fault("psrt/restore/find");
    if (fe) {
        psrt_err_set(err, -fe, "finding the latest checkpoint in %s: %s", f->train_dir,
                     strerror(fe));
        return -fe;
    }
    /* a state file that is there but unusable: why, naming the file */
    char bad_state[1400] = "";
    r = ckpt_state_read(f->train_dir, &st, &ce);
    if (r == 0 && st.model_checkpoint_path) {
        best = step_of_name(st.model_checkpoint_path);
        if (best < 0)
            snprintf(bad_state, sizeof bad_state,
                     "%s/checkpoint: model_checkpoint_path \"%.200s\" is not model.ckpt-<step>",
                     f->train_dir, st.model_checkpoint_path);
    } else if (r == 0) {
        snprintf(bad_state, sizeof bad_state, "%s/checkpoint: no model_checkpoint_path",
                 f->train_dir);
    } else if (ce.code && ce.code != -ENOENT) {
        snprintf(bad_state, sizeof bad_state, "%s", ce.msg);
    }
    r = 0;
    if (bad_state[0])
        psrt_log("ignoring unreadable %s/checkpoint: %s", f->train_dir, bad_state);
    ckpt_state_free(&st);
    /* what every ps holds */
    struct psrt_call calls[256];
    for (int i = 0; i < n; i++)
        calls[i] = (struct psrt_call){.ps = order[i], .op = PSRT_OP_RQUERY};
    int bad = psrt_worker_calls(w, calls, n);
    if (bad >= 0) {
        *err = calls[bad].err;
        return calls[bad].rc ? calls[bad].rc : calls[bad].status;
    }
    /* The chief's state file is the record of reported saves: when it is
     * there, its checkpoint is the one.  Without it (the chief's disk was
     * lost), the newest step that every ps holding committed copies has
     * committed: a reported save is committed on every ps (they commit
     * before the chief's state is written), so that is the last reported
     * checkpoint or at most one save newer, complete on the ps tasks.  A
     * step only some ps committed is a save that failed in its commits (a
     * ps lost then): never reported, and not restorable without the
     * chief's copy.  When no step is on all of them (a ps's disk lost too,
     * or max_to_keep dropped the older ones), the newest step any ps
     * committed, whose missing shard the restore then names. */
    long long common = -1;
    if (best < 0) {
        int with = 0; /* ps tasks holding any committed copy */
        for (int i = 0; i < n; i++) {
            struct psrt_buf *b = &w->resp[order[i]];
            b->off = 0;
            uint32_t k = psrt_buf_get_u32(b);
            long long mine = -1;
            for (uint32_t j = 0; j < k && !b->bad; j++) {
                char nm[512];
                psrt_buf_get_str(b, nm, sizeof nm);
                uint32_t present = psrt_buf_get_u32(b);
                long long s = step_of(nm);
                if (present && s > mine)
                    mine = s;
            }
            if (mine > ps_best)
                ps_best = mine;
            with += mine >= 0;
        }
        /* the steps every ps with a list holds: count, per step of the
         * first such ps, the ps holding it */
        long long cand[256];
        int ncand = 0, holders[256] = {0};
        bool first = true;
        for (int i = 0; i < n && with > 0; i++) {
            struct psrt_buf *b = &w->resp[order[i]];
            b->off = 0;
            uint32_t k = psrt_buf_get_u32(b);
            bool any = false;
            for (uint32_t j = 0; j < k && !b->bad; j++) {
                char nm[512];
                psrt_buf_get_str(b, nm, sizeof nm);
                uint32_t present = psrt_buf_get_u32(b);
                long long s = step_of(nm);
                if (!present || s < 0)
                    continue;
                any = true;
                if (first && ncand < 256) {
                    holders[ncand] = 1;
                    cand[ncand++] = s;
                } else if (!first) {
                    for (int c = 0; c < ncand; c++)
                        if (cand[c] == s) {
                            holders[c]++;
                            break;
                        }
                }
            }
            first = first && !any;
        }
        for (int c = 0; c < ncand; c++)
            if (holders[c] == with && cand[c] > common)
                common = cand[c];
        if (common >= 0 && common < ps_best)
            psrt_log("model.ckpt-%lld is committed on only some ps tasks (a save that failed in "
                     "its commits, never reported): restoring model.ckpt-%lld, the newest "
                     "every ps holds",
                     ps_best, common);
        best = common >= 0 ? common : ps_best;
    }
    if (best < 0 && bad_state[0]) {
        /* checkpoints may be there, but which is the latest is unknown:
         * initialising would train from scratch over them */
        psrt_err_set(err, -EBADMSG,
                     "cannot tell the latest checkpoint: %s, and no ps task holds a committed "
                     "copy; make its model_checkpoint_path name one of the model.ckpt-<step> "
                     "checkpoints in %s and start the chief again",
                     bad_state, f->train_dir);
        psrt_ev("restore.failed", "error=%s", psrt_ev_q(err->msg));
        return -EBADMSG;
    }
    if (best < 0)
        return 0;
    *step = best;
    char prefix[1200], name[128];
    psrt_ckpt_prefix(f, best, prefix, sizeof prefix);
    snprintf(name, sizeof name, "model.ckpt-%lld", best);
    psrt_log("Restoring parameters from %s", prefix);
    psrt_ev("restore.begin", "prefix=%s", psrt_ev_q(prefix));
    bool local[256];
    for (int i = 0; i < n; i++) {
        local[i] = false;
        struct psrt_buf *b = &w->resp[order[i]];
        b->off = 0;
        uint32_t k = psrt_buf_get_u32(b);
        for (uint32_t j = 0; j < k && !b->bad; j++) {
            char nm[512];
            psrt_buf_get_str(b, nm, sizeof nm);
            uint32_t present = psrt_buf_get_u32(b);
            if (present && !strcmp(nm, name))
                local[i] = true;
        }
    }
    /* the ps that have their own copy restore from it, in parallel */
    struct psrt_buf req = {0};
    psrt_buf_u32(&req, 1);
    psrt_buf_u64(&req, (uint64_t)best);
    psrt_buf_str(&req, name);
    int nl = 0, idx[256];
    for (int i = 0; i < n; i++) {
        if (!local[i])
            continue;
        calls[nl] = (struct psrt_call){
            .ps = order[i], .op = PSRT_OP_RESTORE, .timeout = psrt_flags_bulk_timeout(f)};
        calls[nl].iov[0] = (struct iovec){req.p, req.len};
        calls[nl].niov = 1;
        idx[nl++] = i;
    }
    psrt_worker_calls(w, calls, nl);
    bool ok[256] = {false};
    char why_local[256][600];
    for (int i = 0; i < n; i++)
        snprintf(why_local[i], sizeof why_local[i], "ps task %d at %s:%d has no copy (%s/ps%d/%s)",
                 order[i], f->ps[order[i]].host, f->ps[order[i]].port, f->train_dir, order[i],
                 name);
    for (int j = 0; j < nl; j++) {
        if (calls[j].rc && calls[j].rc != -EBADMSG) {
            *err = calls[j].err; /* the ps went away again */
            psrt_buf_free(&req);
            psrt_ev("restore.failed", "error=%s", psrt_ev_q(err->msg));
            return calls[j].rc;
        }
        if (!calls[j].rc && !calls[j].status)
            ok[idx[j]] = true;
        else
            snprintf(why_local[idx[j]], sizeof why_local[idx[j]], "ps task %d's copy failed: %s",
                     order[idx[j]], calls[j].err.msg);
    }
    psrt_buf_free(&req);
    /* the others from the chief's copy */
    for (int i = 0; i < n && !r; i++) {
        if (ok[i])
            continue;
        struct psrt_err cerr = {0};
        struct psrt_buf lb = {0};
        r = chief_shard(w, prefix, order[i], best, name, &lb, &cerr);
        if (r) {
            psrt_err_set(err, -ENOENT,
                         "cannot restore %s: shard %d of %d (ps task %d, %s) has no surviving "
                         "copy: %s; the chief's copy: %s",
                         prefix, i, n, order[i], psrt_ps_device(order[i]), why_local[i], cerr.msg);
            r = -ENOENT;
            psrt_buf_free(&lb);
            break;
        }
        struct psrt_call c = {
            .ps = order[i], .op = PSRT_OP_LOAD, .timeout = psrt_flags_bulk_timeout(f)};
        c.iov[0] = (struct iovec){lb.p, lb.len};
        c.niov = 1;
        if (psrt_worker_calls(w, &c, 1) >= 0) {
            *err = c.err;
            r = c.rc ? c.rc : c.status;
        } else {
            psrt_log("shard %d (ps task %d) restored from the chief's copy %s", i, order[i],
                     prefix);
        }
        psrt_buf_free(&lb);
    }
    if (r) {
        psrt_ev("restore.failed", "error=%s", psrt_ev_q(err->msg));
        return r;
    }
    psrt_ev("restore.done", "step=%lld prefix=%s", best, psrt_ev_q(prefix));
    return 1;
}

int psrt_restore_latest(struct psrt_worker *w, long long *step, struct psrt_err *err)
{
    return w->f->protocol == PSRT_ROBUST ? restore_robust(w, step, err)
                                         : restore_legacy(w, step, err);
}
