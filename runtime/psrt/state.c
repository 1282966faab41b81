/*
 * state.c: a directory's `checkpoint` state file and the checkpoints it
 * keeps, as TensorFlow's Saver keeps them (update_checkpoint_state, then
 * the deletion of what falls beyond max_to_keep).  One algorithm for both
 * users: the chief's <train_dir>/checkpoint (save_legacy.c, save_robust.c)
 * and each ps's own <train_dir>/ps<i>/checkpoint of its robust copies
 * (ps.c).
 *
 * Invariant: the name being committed is counted once, whether or not the
 * state already lists it, so exactly max_to_keep checkpoints stay listed
 * (the newest, the committed one last) and only those beyond are deleted;
 * psrt_state_commit_keep also keeps one more named checkpoint listed (a
 * ps keeps the chief's last reported one until a newer save is reported).
 *
 * A directory that psrt alone writes (a ps's own copies) can also be swept
 * of checkpoints no state lists: those of saves that failed after this ps
 * had written its copy, and the temporary files of a write that was killed
 * (psrt_state_sweep); and a save the chief abandoned is dropped from it at
 * once, files, temporary files and state entry (psrt_state_drop).
 *
 * The chief's checkpoints are named here too, <train_dir>/model.ckpt-<step>
 * (psrt_ckpt_prefix), for the worker and every checkpoint protocol.
 */
#include "runtime/psrt/psrt.h"
#include "runtime/ckpt/bundle.h"
#include "runtime/ckpt/state.h"

#include <dirent.h>
#include <fcntl.h>
#include <errno.h>
#include <glob.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* (psrt.h) */
void psrt_ckpt_prefix(const struct psrt_flags *f, long long step, char *out, size_t len)
{
    snprintf(out, len, "%s/model.ckpt-%lld", f->train_dir, step);
}

/* (psrt.h) The glob covers every shard count. */
void psrt_delete_checkpoint(const char *p)
{
    char pat[2200];
    const char *sfx[] = {".index", ".data-\?\?\?\?\?-of-\?\?\?\?\?", ".meta"};
    for (int k = 0; k < 3; k++) {
        snprintf(pat, sizeof pat, "%s%s", p, sfx[k]);
        glob_t g;
        if (glob(pat, 0, NULL, &g) != 0)
            continue;
        for (size_t i = 0; i < g.gl_pathc; i++) {
            int fe = psrt_fault("psrt/save/gc");
            if (fe || unlink(g.gl_pathv[i]) < 0)
                psrt_log("Ignoring: %s; %s", g.gl_pathv[i], strerror(fe ? fe : errno));
        }
        globfree(&g);
    }
}

int psrt_state_commit(const char *dir, const char *name, int max_to_keep, unsigned fflags,
                      const char *fault, struct psrt_err *err)
{
    return psrt_state_commit_keep(dir, name, max_to_keep, NULL, fflags, fault, err);
}

int psrt_state_commit_keep(const char *dir, const char *name, int max_to_keep, const char *keep_too,
                           unsigned fflags, const char *fault, struct psrt_err *err)
{
    struct ckpt_state st, nst;
    struct ckpt_err ce = {0};
    memset(&st, 0, sizeof st);
    memset(&nst, 0, sizeof nst);
    int r = ckpt_state_read(dir, &st, &ce);
    if (r && r != -ENOENT)
        psrt_log("ignoring unreadable %s/checkpoint: %s", dir, ce.msg);
    if (r)
        memset(&st, 0, sizeof st);
    size_t total = 1; /* name, listed already or not */
    for (size_t i = 0; i < st.n_all; i++)
        total += strcmp(st.all_model_checkpoint_paths[i], name) != 0;
    size_t keep = max_to_keep > 0 ? (size_t)max_to_keep : 1;
    size_t drop = total > keep ? total - keep : 0;
    /* the oldest go first: st.all_model_checkpoint_paths[0..ndrop) minus
     * name, deleted only once the new state is durable, so that a state
     * write that fails leaves the old state naming files that still exist */
    size_t ndrop = 0;
    r = 0;
    for (size_t i = 0; i < st.n_all && !r; i++) {
        const char *p = st.all_model_checkpoint_paths[i];
        if (!strcmp(p, name))
            continue;
        if (drop && !(keep_too && !strcmp(p, keep_too))) {
            drop--;
            ndrop = i + 1;
            continue;
        }
        r = ckpt_state_add_path(&nst, p, -1);
    }
    if (!r)
        r = ckpt_state_add_path(&nst, name, -1);
    if (!r)
        r = ckpt_state_set_model(&nst, name);
    if (r) {
        psrt_err_set(err, r, "updating %s/checkpoint: %s", dir, strerror(-r));
        goto cleanup;
    }
    int fe = fault ? psrt_fault(fault) : 0;
    if (fe) {
        char p[1400];
        snprintf(p, sizeof p, "%s/checkpoint", dir);
        psrt_err_path(err, -fe, p);
        r = -fe;
    } else {
        r = ckpt_state_write(dir, &nst, fflags, &ce);
        if (r)
            psrt_err_from_ckpt(err, r, &ce);
    }
    for (size_t i = 0; i < ndrop && !r; i++) {
        const char *p = st.all_model_checkpoint_paths[i];
        if (!strcmp(p, name) || (keep_too && !strcmp(p, keep_too)))
            continue;
        char *full = ckpt_state_resolve(dir, p);
        if (full) {
            psrt_delete_checkpoint(full);
            free(full);
        }
    }
cleanup:
    ckpt_state_free(&st);
    ckpt_state_free(&nst);
    return r;
}

/* "model.ckpt-<digits>" at the start of f, followed by '.' (the files of a
 * checkpoint, temporary ones included): that step, else -1; *plen is the
 * prefix's length. */
static long long ckpt_file_step(const char *f, size_t *plen)
{
    static const char base[] = "model.ckpt-";
    if (strncmp(f, base, sizeof base - 1))
        return -1;
    const char *d = f + sizeof base - 1, *e = d;
    while (*e >= '0' && *e <= '9')
        e++;
    if (e == d || *e != '.' || e - d > 18)
        return -1;
    *plen = (size_t)(e - f);
    return atoll(d);
}

/* Deletes every file of dir that pick(name, arg) picks (one that cannot
 * be is logged and left): how many went. */
static int delete_picked(const char *dir, bool (*pick)(const char *name, const void *arg),
                         const void *arg)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (!pick(e->d_name, arg))
            continue;
        if (unlinkat(dirfd(d), e->d_name, 0) == 0)
            n++;
        else
            psrt_log("Ignoring: %s/%s; %s", dir, e->d_name, strerror(errno));
    }
    if (d)
        closedir(d);
    return n;
}

struct sweep {
    const struct ckpt_state *st;
    long long below;
};

/* A file of a checkpoint before step below that the state does not list. */
static bool unlisted_before(const char *f, const void *arg)
{
    const struct sweep *sw = arg;
    size_t plen;
    long long step = ckpt_file_step(f, &plen);
    if (step < 0 || step >= sw->below)
        return false;
    for (size_t i = 0; i < sw->st->n_all; i++)
        if (strlen(sw->st->all_model_checkpoint_paths[i]) == plen &&
            !strncmp(sw->st->all_model_checkpoint_paths[i], f, plen))
            return false;
    return true;
}

int psrt_state_sweep(const char *dir, long long below)
{
    struct ckpt_state st;
    struct ckpt_err ce = {0};
    memset(&st, 0, sizeof st);
    if (ckpt_state_read(dir, &st, &ce))
        return 0; /* without a state, nothing is known to be unlisted */
    struct sweep sw = {&st, below};
    int n = delete_picked(dir, unlisted_before, &sw);
    ckpt_state_free(&st);
    return n;
}

static int fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int r = fsync(fd) < 0 ? -errno : 0;
    close(fd);
    return r;
}

/* Whether file f belongs to checkpoint arg (its name): "<name>." then anything (its
 * index, data shards, and their temporary names). */
static bool file_of(const char *f, const void *arg)
{
    const char *name = arg;
    size_t l = strlen(name);
    return !strncmp(f, name, l) && f[l] == '.';
}

int psrt_state_drop(const char *dir, const char *name, unsigned fflags, struct psrt_err *err)
{
    struct ckpt_state st, nst;
    struct ckpt_err ce = {0};
    memset(&st, 0, sizeof st);
    memset(&nst, 0, sizeof nst);
    int r = ckpt_state_read(dir, &st, &ce);
    bool listed = false;
    for (size_t i = 0; !r && i < st.n_all; i++)
        listed |= !strcmp(st.all_model_checkpoint_paths[i], name);
    if (listed) {
        /* the state first: a state that names files which are gone would
         * be worse than files no state names */
        char path[1400];
        snprintf(path, sizeof path, "%s/" CKPT_STATE_FILENAME, dir);
        const char *last = NULL;
        for (size_t i = 0; !r && i < st.n_all; i++)
            if (strcmp(st.all_model_checkpoint_paths[i], name)) {
                last = st.all_model_checkpoint_paths[i];
                r = ckpt_state_add_path(&nst, last, -1);
            }
        if (!r && last) {
            bool model_dropped =
                !st.model_checkpoint_path || !strcmp(st.model_checkpoint_path, name);
            r = ckpt_state_set_model(&nst, model_dropped ? last : st.model_checkpoint_path);
            if (!r && (r = ckpt_state_write(dir, &nst, fflags, &ce)))
                psrt_err_from_ckpt(err, r, &ce);
        } else if (!r) { /* it was the only one: no state, as before it */
            if (unlink(path) < 0)
                r = -errno;
            else if (fflags & CKPT_SYNC)
                r = fsync_dir(dir);
            if (r)
                psrt_err_set(err, r, "removing %s: %s", path, strerror(-r));
        } else {
            psrt_err_set(err, r, "updating %s: %s", path, strerror(-r));
        }
        if (r)
            goto cleanup;
    }
    r = delete_picked(dir, file_of, name);
cleanup:
    ckpt_state_free(&st);
    ckpt_state_free(&nst);
    return r;
}
