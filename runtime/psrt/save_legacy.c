/*
 * save_legacy.c: TensorFlow 1.x's sharded Saver, driven by the chief,
 * exactly as TensorFlow places it (docs/seed-bugs.md):
 *   1. SaveV2 on every ps holding variables (shards numbered by sorted
 *      device name): each writes <prefix>_temp_<32 hex>/part-i-of-n on its
 *      OWN disk, relative to its own working directory, after a
 *      non-recursive mkdir of the temp directory (S000 when the ps host has
 *      no train_dir);
 *   2. MergeV2Checkpoints on the last ps: opens every part's .index on its
 *      own disk (S001 when parts are on other hosts), renames the data
 *      files to <prefix>.data-i-of-n, writes <prefix>.index, deletes the
 *      temp directories;
 *   3. the chief deletes checkpoints beyond max_to_keep from its own disk
 *      (errors only logged) and writes the `checkpoint` state file there.
 * With --sharded_save=false, TensorFlow's Saver(sharded=False), the
 * Supervisor's default: one SaveV2 on the chief's own device, so the chief
 * gathers every variable and writes the whole bundle <prefix>.index and
 * .data-00000-of-00001 on ITS disk (non-recursive mkdir, no fsync), then
 * the state file.  Restore is unchanged (restore.c): RestoreV2 still runs
 * on each ps against its own disk, where the files are not (S004).
 * Errors come back as TensorFlow prints them: the status text, then the
 * failing node and its device.  No fsync anywhere (TensorFlow 1.x did not).
 */
#include "runtime/psrt/worker.h"
#include "runtime/ckpt/bundle.h"
#include "runtime/ckpt/state.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void add_node(struct psrt_err *err, const char *node, const char *op, int ps)
{
    size_t l = strlen(err->msg);
    snprintf(err->msg + l, sizeof err->msg - l,
             "\n\t [[Node: %s = %s[_device=\"/job:ps/replica:0/task:%d/cpu:0\"]()]]", node, op, ps);
}

int psrt_legacy_sharded_save(struct psrt_worker *w, const char *saver, const char *prefix,
                             long long step, struct psrt_err *err)
{
    int order[256];
    int n = psrt_model_shards(&w->m, order);
    char *tmp = ckpt_temp_prefix(prefix, NULL);
    char *parts[256] = {0};
    struct psrt_buf req[256];
    struct psrt_call calls[256];
    int r = -ENOMEM;
    memset(req, 0, sizeof req);
    if (!tmp)
        goto cleanup;
    for (int i = 0; i < n; i++) {
        if (!(parts[i] = ckpt_shard_name(tmp, i, n)))
            goto cleanup;
        psrt_buf_u64(&req[i], (uint64_t)step);
        psrt_buf_str(&req[i], parts[i]);
        calls[i] = (struct psrt_call){.ps = order[i], .op = PSRT_OP_SAVE_SHARD};
        calls[i].iov[0] = (struct iovec){req[i].p, req[i].len};
        calls[i].niov = 1;
    }
    int bad = psrt_worker_calls(w, calls, n);
    if (bad >= 0) {
        /* TensorFlow reports the first failure; with several, the lowest shard. */
        *err = calls[bad].err;
        r = calls[bad].rc ? calls[bad].rc : calls[bad].status;
        if (!calls[bad].rc) {
            char node[64];
            if (bad == 0)
                snprintf(node, sizeof node, "%s/SaveV2", saver);
            else
                snprintf(node, sizeof node, "%s/SaveV2_%d", saver, bad);
            add_node(err, node, "SaveV2", order[bad]);
        }
        goto cleanup;
    }
    /* MergeV2Checkpoints on the last device. */
    struct psrt_buf m = {0};
    psrt_buf_u64(&m, (uint64_t)step);
    psrt_buf_u32(&m, (uint32_t)n);
    for (int i = 0; i < n; i++)
        psrt_buf_str(&m, parts[i]);
    psrt_buf_str(&m, prefix);
    struct psrt_call mc = {.ps = order[n - 1], .op = PSRT_OP_MERGE};
    mc.iov[0] = (struct iovec){m.p, m.len};
    mc.niov = 1;
    bad = psrt_worker_calls(w, &mc, 1);
    psrt_buf_free(&m);
    if (bad >= 0) {
        *err = mc.err;
        r = mc.rc ? mc.rc : mc.status;
        if (!mc.rc) {
            char node[64];
            snprintf(node, sizeof node, "%s/MergeV2Checkpoints", saver);
            add_node(err, node, "MergeV2Checkpoints", order[n - 1]);
        }
        goto cleanup;
    }
    r = 0;
cleanup:
    if (r == -ENOMEM && !err->msg[0])
        psrt_err_set(err, r, "out of memory");
    for (int i = 0; i < 256; i++) {
        free(parts[i]);
        psrt_buf_free(&req[i]);
    }
    free(tmp);
    return r;
}

/* The path TensorFlow's update_checkpoint_state records: relative to the
 * directory when the directory is relative. */
static const char *recorded(const struct psrt_flags *f, const char *prefix)
{
    if (f->train_dir[0] == '/')
        return prefix;
    const char *b = strrchr(prefix, '/');
    return b ? b + 1 : prefix;
}

int psrt_update_state(struct psrt_worker *w, const char *prefix, unsigned flags,
                      struct psrt_err *err)
{
    const struct psrt_flags *f = w->f;
    return psrt_state_commit(f->train_dir, recorded(f, prefix), f->max_to_keep, flags,
                             "psrt/save/state", err);
}

/* Saver(sharded=False): every variable through the chief, one bundle on
 * the chief's disk. */
static int unsharded_save(struct psrt_worker *w, const char *prefix, struct psrt_err *err)
{
    int order[256], n = psrt_model_shards(&w->m, order), r = 0;
    struct psrt_call calls[256];
    struct psrt_tl all = {0}, parts[256];
    int nparts = 0;
    for (int i = 0; i < n; i++)
        calls[i] = (struct psrt_call){
            .ps = order[i], .op = PSRT_OP_SNAPSHOT, .timeout = psrt_flags_bulk_timeout(w->f)};
    int bad = psrt_worker_calls(w, calls, n);
    if (bad >= 0) {
        *err = calls[bad].err;
        return calls[bad].rc ? calls[bad].rc : calls[bad].status;
    }
    for (int i = 0; i < n && !r; i++) {
        w->resp[order[i]].off = 0;
        r = psrt_tl_decode(&parts[i], &w->resp[order[i]]);
        if (r) {
            psrt_err_set(err, r, "malformed Snapshot reply from ps task %d", order[i]);
            break;
        }
        nparts++;
        for (int t = 0; t < parts[i].n; t++) {
            struct psrt_tensor *x = &parts[i].t[t];
            psrt_tl_add(&all, x->name, x->dtype, x->rank, x->dims, x->data, x->len);
        }
    }
    if (!r && !(r = psrt_fault_bundle("psrt/save/chief_write", prefix, err))) {
        r = psrt_tl_write_bundle(&all, prefix, CKPT_W_MKDIR, 0, err);
        if (r) {
            size_t l = strlen(err->msg);
            snprintf(err->msg + l, sizeof err->msg - l,
                     "\n\t [[Node: save/SaveV2 = SaveV2[_device="
                     "\"/job:worker/replica:0/task:%d/cpu:0\"]()]]",
                     w->f->task);
        }
    }
    all.owns = false;
    psrt_tl_free(&all);
    for (int i = 0; i < nparts; i++)
        psrt_tl_free(&parts[i]);
    return r;
}

int psrt_save_legacy(struct psrt_worker *w, long long step, struct psrt_err *err)
{
    char prefix[1200];
    psrt_ckpt_prefix(w->f, step, prefix, sizeof prefix);
    psrt_log("Saving checkpoints for %lld into %s/model.ckpt.", step, w->f->train_dir);
    psrt_ev("save.begin", "step=%lld prefix=%s", step, psrt_ev_q(prefix));
    int r = 0, fe = psrt_fault("psrt/save/begin");
    if (fe) {
        psrt_err_set(err, -fe, "save of %s: %s (fault point psrt/save/begin)", prefix,
                     strerror(fe));
        r = -fe;
    }
    if (!r)
        r = w->f->sharded_save ? psrt_legacy_sharded_save(w, "save", prefix, step, err)
                               : unsharded_save(w, prefix, err);
    if (!r)
        r = psrt_update_state(w, prefix, 0, err);
    if (r) {
        psrt_ev("save.failed", "step=%lld error=%s", step, psrt_ev_q(err->msg));
        return r;
    }
    psrt_log("checkpoint saved: %s", prefix);
    psrt_ev("save.done", "step=%lld prefix=%s", step, psrt_ev_q(prefix));
    return 0;
}
