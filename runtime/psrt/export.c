/*
 * export.c: the chief's export of a servable model to
 * --export_dir/<version>/: variables/variables.{index,data-00000-of-00001}
 * (a TensorFlow bundle of every variable, slots and global_step included,
 * as SavedModelBuilder saves them) and signature.txt (model name, step,
 * feature space, input format: what `psrt predict` needs).
 *
 * legacy (TensorFlow 1.x SavedModelBuilder, S002): fails if the version
 * directory exists on the chief's disk; creates <dir>/variables/ on the
 * chief's disk; the variables are saved by the sharded Saver, so every ps
 * writes <dir>/variables/variables_temp_<hex>/part-i-of-n on ITS disk and
 * the last ps merges there (NotFoundError on the ps when its host lacks the
 * directory); the signature is written on the chief's disk.
 * robust: the chief snapshots every ps and writes the whole export on its
 * own disk under a temporary directory (files and directories fsynced),
 * then renames it into place (replacing an older export of the same
 * version atomically) and fsyncs export_dir and the directories above it: it
 * works from any layout, a reader never sees a partial export, and an
 * export reported done survives a crash.
 */
#include "runtime/psrt/worker.h"
#include "runtime/ckpt/bundle.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* mkdir -p path: 0, or -errno and the directory that could not be made in
 * failed (-ENOTDIR with failed = path when path exists as a non-directory). */
static int mkdir_p(const char *path, char *failed, size_t flen)
{
    char tmp[2048];
    int r = 0;
    snprintf(tmp, sizeof tmp, "%s", path);
    for (char *p = tmp + 1; *p && !r; p++)
        if (*p == '/') {
            *p = 0;
            if (mkdir(tmp, 0777) < 0 && errno != EEXIST)
                r = -errno;
            else
                *p = '/';
        }
    struct stat st;
    if (!r && mkdir(tmp, 0777) < 0 && errno != EEXIST)
        r = -errno;
    if (!r && (stat(tmp, &st) < 0 || !S_ISDIR(st.st_mode)))
        r = -ENOTDIR;
    if (r)
        snprintf(failed, flen, "%s", tmp);
    return r;
}

/* "creating export directory D: mkdir X: why" for a mkdir_p failure. */
static void mkdir_err(struct psrt_err *err, int r, const char *dir, const char *failed)
{
    struct stat st;
    if (r == -ENOTDIR && !strcmp(failed, dir) && stat(dir, &st) == 0 && !S_ISDIR(st.st_mode))
        psrt_err_set(err, r, "creating export directory %s: it exists and is not a directory", dir);
    else
        psrt_err_set(err, r, "creating export directory %s: mkdir %s: %s", dir, failed,
                     strerror(-r));
}

static int fsync_path(const char *p)
{
    int fd = open(p, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int r = fsync(fd) < 0 ? -errno : 0;
    close(fd);
    return r;
}

static int write_signature(struct psrt_worker *w, const char *dir, long long step, bool sync,
                           struct psrt_err *err)
{
    char path[2100];
    snprintf(path, sizeof path, "%s/signature.txt", dir);
    int fe = psrt_fault("psrt/export/signature");
    if (fe) {
        psrt_err_path(err, -fe, path);
        return -fe;
    }
    FILE *fp = fopen(path, "w");
    if (!fp) {
        int r = -errno;
        psrt_err_path(err, r, path);
        return r;
    }
    fprintf(fp,
            "# psrt export signature (read by `psrt predict --model DIR`)\n"
            "model: %s\n"
            "step: %lld\n"
            "sparse_features: %lld\n"
            "variables: variables/variables\n"
            "inputs: %s\n",
            w->m.ops->name, step, (long long)w->m.features, w->m.ops->input_doc);
    int r = fflush(fp) ? -errno : 0;
    if (!r && sync && fsync(fileno(fp)) < 0)
        r = -errno;
    if (fclose(fp) && !r)
        r = -errno;
    if (r)
        psrt_err_path(err, r, path);
    return r;
}

static int export_legacy(struct psrt_worker *w, const char *dir, struct psrt_err *err)
{
    struct stat st;
    if (stat(dir, &st) == 0) {
        psrt_err_set(err, -EEXIST,
                     "Export directory already exists. Please specify a different export "
                     "directory: %s",
                     dir);
        snprintf(err->msg, sizeof err->msg,
                 "AssertionError: Export directory already exists. Please specify a different "
                 "export directory: %s",
                 dir);
        return -EEXIST;
    }
    char vdir[2100], prefix[2200];
    snprintf(vdir, sizeof vdir, "%s/variables", dir);
    char failed[2200];
    int r = mkdir_p(vdir, failed, sizeof failed);
    if (r) {
        psrt_err_path(err, r, failed);
        return r;
    }
    snprintf(prefix, sizeof prefix, "%s/variables", vdir);
    int ready;
    long long step;
    r = psrt_worker_ping(w, 0, &ready, &step, err); /* the step the signature names */
    if (r)
        return r;
    r = psrt_legacy_sharded_save(w, "save_1", prefix, step, err); /* the builder's own Saver */
    if (r)
        return r;
    return write_signature(w, dir, step, false, err);
}

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    remove(p);
    return 0;
}

static int export_robust(struct psrt_worker *w, const char *dir, struct psrt_err *err)
{
    const struct psrt_flags *f = w->f;
    char tmp[2100], vdir[2200], prefix[2300], old[2100];
    unsigned long long tag = psrt_mix64((uint64_t)getpid() ^ (uint64_t)(psrt_now() * 1e9));
    snprintf(tmp, sizeof tmp, "%s/.%d.tmp-%016llx", f->export_dir, f->export_version, tag);
    snprintf(old, sizeof old, "%s/.%d.old-%016llx", f->export_dir, f->export_version, tag);
    snprintf(vdir, sizeof vdir, "%s/variables", tmp);
    snprintf(prefix, sizeof prefix, "%s/variables", vdir);
    /* export_dir first, so that its problems are named, not the temporary's */
    char failed[2300];
    int r = mkdir_p(f->export_dir, failed, sizeof failed);
    if (!r)
        r = mkdir_p(vdir, failed, sizeof failed);
    if (r) {
        mkdir_err(err, r, f->export_dir, failed);
        goto fail; /* the temporary directory, if it was made */
    }
    /* every ps's variables */
    int order[256], n = psrt_model_shards(&w->m, order);
    struct psrt_call calls[256];
    for (int i = 0; i < n; i++)
        calls[i] = (struct psrt_call){
            .ps = order[i], .op = PSRT_OP_SNAPSHOT, .timeout = psrt_flags_bulk_timeout(f)};
    int bad = psrt_worker_calls(w, calls, n);
    if (bad >= 0) {
        *err = calls[bad].err;
        r = calls[bad].rc ? calls[bad].rc : calls[bad].status;
        goto fail;
    }
    struct psrt_tl all = {0}, parts[256];
    long long step = -1;
    for (int i = 0; i < n; i++) {
        w->resp[order[i]].off = 0;
        r = psrt_tl_decode(&parts[i], &w->resp[order[i]]);
        if (r) {
            for (int j = 0; j < i; j++)
                psrt_tl_free(&parts[j]);
            psrt_err_set(err, r, "malformed Snapshot reply from ps task %d", order[i]);
            goto fail;
        }
        for (int t = 0; t < parts[i].n; t++) {
            struct psrt_tensor *x = &parts[i].t[t];
            psrt_tl_add(&all, x->name, x->dtype, x->rank, x->dims, x->data, x->len);
            if (!strcmp(x->name, "global_step"))
                memcpy(&step, x->data, 8);
        }
    }
    r = psrt_fault_bundle("psrt/export/write", prefix, err);
    if (!r)
        r = psrt_tl_write_bundle(&all, prefix, 0, CKPT_SYNC, err);
    all.owns = false;
    psrt_tl_free(&all);
    for (int i = 0; i < n; i++)
        psrt_tl_free(&parts[i]);
    if (r)
        goto fail;
    r = write_signature(w, tmp, step, true, err);
    if (r)
        goto fail;
    if ((r = fsync_path(vdir)) || (r = fsync_path(tmp))) {
        psrt_err_set(err, r, "fsync %s: %s", tmp, strerror(-r));
        goto fail;
    }
    struct stat st;
    bool had_old = stat(dir, &st) == 0;
    if (had_old && rename(dir, old) < 0) {
        r = -errno;
        psrt_err_set(err, r, "rename %s to %s: %s", dir, old, strerror(-r));
        goto fail;
    }
    if (rename(tmp, dir) < 0) {
        r = -errno;
        psrt_err_set(err, r, "rename %s to %s: %s", tmp, dir, strerror(-r));
        if (had_old)
            rename(old, dir);
        goto fail;
    }
    /* export_dir, and every directory above it (mkdir_p may have made
     * them): a crash keeps the export only once their entries are synced */
    if ((r = fsync_path(f->export_dir)) || (r = ckpt_fsync_ancestors(f->export_dir))) {
        psrt_err_set(err, r, "fsync %s and the directories above it: %s", f->export_dir,
                     strerror(-r));
        return r;
    }
    if (had_old)
        nftw(old, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
    return 0;
fail:
    nftw(tmp, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
    return r;
}

int psrt_export(struct psrt_worker *w, struct psrt_err *err)
{
    const struct psrt_flags *f = w->f;
    char dir[2048];
    snprintf(dir, sizeof dir, "%s/%d", f->export_dir, f->export_version);
    psrt_log("Exporting trained model to %s", dir);
    psrt_ev("export.begin", "dir=%s", psrt_ev_q(dir));
    int r = f->protocol == PSRT_ROBUST ? export_robust(w, dir, err) : export_legacy(w, dir, err);
    if (r) {
        psrt_ev("export.failed", "error=%s", psrt_ev_q(err->msg));
        return r;
    }
    psrt_log("exported %s", dir);
    psrt_ev("export.done", "dir=%s", psrt_ev_q(dir));
    return 0;
}
