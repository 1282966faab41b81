/*
 * ps.c: the ps task.  Holds its partition of the variables (dense variables
 * placed on it round robin, its rows of every sparse variable, global_step
 * on ps 0), applies the optimizer to pushed gradients, serves pulls, and
 * runs its side of every checkpoint protocol on its own disk.
 *
 * States: UNINITIALIZED (fresh process: pulls and pushes answer -EAGAIN,
 * "not ready") -> INITIALIZED (after Init, a successful Restore or Load:
 * the chief may save, training may not start yet) -> OPEN (the chief's
 * Open, after its first save: every worker trains; TensorFlow's workers
 * start only once the chief's session is up) -> EXITING (after Shutdown).
 * Init, Restore and Load from any state go back to INITIALIZED.  A failed
 * Restore leaves the state as it was.
 * Invariants: pull/push hold the state lock shared and a variable's mutex
 * (or the table mutex) while touching it; Init, Restore, Load and every
 * snapshot hold the state lock exclusively (writer-preferring), so a saved
 * shard is a consistent cut of this ps; global_step never exceeds
 * --max_steps (Pull with RESERVE fails instead: the run is done).
 *
 * Checkpoint roles (the chief drives them, see save_legacy.c,
 * save_robust.c, restore.c, export.c):
 *   SaveV2 (legacy): non-recursive mkdir of the part's directory, errors
 *     ignored as TensorFlow 1.0 did, then the part bundle at the path the
 *     chief sent, relative to this process's working directory.
 *   MergeV2Checkpoints (legacy, last ps): ckpt_merge of every part, read
 *     from this ps's disk.
 *   RestoreV2: legacy reads the chief's prefix on this ps's disk and fails
 *     like TensorFlow's fallback TensorSliceReader when it is absent;
 *     robust reads this ps's own durable copy.
 *   RobustSave / RobustCommit / RobustQuery / Load: this ps's durable copy
 *     of its shard under <train_dir>/ps<task>/ and its own `checkpoint`
 *     state file there; RobustAbort drops the copy of a save the chief
 *     abandoned.
 */
#include "runtime/psrt/psrt.h"
#include "runtime/psrt/ps.h"
#include "runtime/ckpt/bundle.h"
#include "runtime/ckpt/state.h"

#include <errno.h>
#include <inttypes.h>
#include <libgen.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct ps_var {
    const struct psrt_var *spec;
    float *w;
    float *slot[2];
    struct psrt_adam_pow pw;
    pthread_mutex_t mu;
};

enum { PS_UNINITIALIZED = 0, PS_INITIALIZED = 1, PS_OPEN = 2 };

/* The big buffers of the last snapshot or restore, kept for the next one.
 * A save copies each variable into a fresh buffer; one above 64 MiB
 * allocated in a pool thread is mmapped, and unmapped again on free,
 * whatever thresholds main() sets (glibc serves such requests outside a
 * thread's arena), so every save faulted its snapshot in afresh: 0.2-1.4 s
 * of a 1 GiB save over 4 ps on 2 cores, with the disk idle meanwhile.  The
 * next snapshot copies into buffers of the same sizes instead, and a
 * restore reads its checkpoint into them.  Only buffers of the sizes a
 * snapshot asks for are kept (its dense variables and their slots; a sparse
 * table's export changes size as rows are added), at most one per such
 * tensor, so between saves a ps holds one extra copy of its dense
 * variables, as it does during a save anyway; newer buffers replace any
 * not taken. */
#define SPARE_MAX 64
#define SPARE_MIN (16u << 10) /* smaller ones come from malloc's own free lists */
struct spares {
    pthread_mutex_t mu;
    int n;
    struct {
        void *p;
        size_t len;
    } b[SPARE_MAX];
    int nsizes; /* the sizes worth keeping, one per tensor */
    size_t sizes[SPARE_MAX];
};

static bool spare_wanted(const struct spares *sp, size_t len)
{
    for (int i = 0; i < sp->nsizes; i++)
        if (sp->sizes[i] == len)
            return true;
    return false;
}

/* A kept buffer of exactly len bytes, or NULL (ctx: the spares). */
static void *spare_take(void *ctx, size_t len)
{
    struct spares *sp = ctx;
    void *p = NULL;
    if (len < SPARE_MIN)
        return NULL;
    pthread_mutex_lock(&sp->mu);
    for (int i = 0; i < sp->n; i++)
        if (sp->b[i].len == len) {
            p = sp->b[i].p;
            sp->b[i] = sp->b[--sp->n];
            break;
        }
    pthread_mutex_unlock(&sp->mu);
    return p;
}

/* Frees l (a snapshot, or a checkpoint read for a restore: tensors of the
 * same sizes), keeping its big buffers and freeing older ones. */
static void free_keeping_spares(struct spares *sp, struct psrt_tl *l)
{
    pthread_mutex_lock(&sp->mu);
    for (int i = 0; i < sp->n; i++)
        free(sp->b[i].p);
    sp->n = 0;
    for (int i = 0; l->owns && i < l->n && sp->n < sp->nsizes; i++)
        if (spare_wanted(sp, l->t[i].len)) {
            sp->b[sp->n].p = l->t[i].data;
            sp->b[sp->n++].len = l->t[i].len;
            l->t[i].data = NULL;
        }
    pthread_mutex_unlock(&sp->mu);
    psrt_tl_free(l);
}

/* A snapshot shared by the reply being sent and the background writer. */
struct shared_tl {
    struct psrt_tl l;
    struct spares *sp;
    atomic_int refs;
};

static void shared_put(void *arg)
{
    struct shared_tl *s = arg;
    if (atomic_fetch_sub(&s->refs, 1) == 1) {
        free_keeping_spares(s->sp, &s->l);
        free(s);
    }
}

struct ps {
    const struct psrt_flags *f;
    struct psrt_model model;
    struct psrt_optim opt;
    int task;
    uint64_t incarnation;
    pthread_rwlock_t state;
    atomic_int ready; /* PS_UNINITIALIZED, PS_INITIALIZED, PS_OPEN */
    atomic_bool done; /* the chief said training is over */
    /* the worker tasks (below 64) whose Ping named them: after Shutdown
     * the ps waits for each to call once and hear "done" */
    _Atomic uint64_t heard;
    pthread_mutex_t step_mu;
    int64_t global_step;
    int ndense;
    struct ps_var dense[PSRT_MAX_VARS];
    bool has_sparse;
    const struct psrt_var *sparse_spec;
    struct psrt_table table;
    struct psrt_adam_pow table_pw;
    pthread_mutex_t table_mu;
    char robust_dir[1200];
    struct psrt_server *srv;
    /* robust: the local copy being written in the background */
    pthread_mutex_t bg_mu;
    pthread_t bg;
    bool bg_active;
    int bg_rc;
    struct psrt_err bg_err;
    struct shared_tl *bg_l;
    char bg_name[512];
    int64_t bg_step;
    struct spares spare;
};

/* ---- naming ----------------------------------------------------------- */

bool psrt_tensor_on_ps(const struct psrt_model *m, const char *name, int p)
{
    if (!strcmp(name, "global_step"))
        return p == 0;
    for (int i = 0; i < m->nvars; i++) {
        const struct psrt_var *v = &m->vars[i];
        size_t l = strlen(v->name);
        if (strncmp(name, v->name, l) != 0 || (name[l] != 0 && name[l] != '/'))
            continue;
        if (v->kind == PSRT_VAR_DENSE)
            return v->ps == p;
        int k = -1;
        if (sscanf(name + l, "/part_%d/", &k) == 1)
            return k == p;
        return false;
    }
    return false;
}

static void set_not_ready(struct psrt_reply *rep, int task)
{
    rep->status = -EAGAIN;
    char msg[128];
    snprintf(msg, sizeof msg, "UnavailableError: ps task %d is not initialized yet", task);
    psrt_buf_put(&rep->out, msg, strlen(msg));
}

static void reply_err(struct psrt_reply *rep, const struct psrt_err *e)
{
    psrt_buf_reset(&rep->out);
    rep->status = e->code ? e->code : -EIO;
    psrt_buf_put(&rep->out, e->msg, strlen(e->msg));
}

/* ---- variables -------------------------------------------------------- */

static void init_values(struct ps *ps, uint64_t seed)
{
    for (int i = 0; i < ps->ndense; i++) {
        struct ps_var *v = &ps->dense[i];
        struct psrt_rng r;
        psrt_rng_seed(&r, psrt_rng_seed_for(seed, 0x1417, (uint64_t)(v->spec - ps->model.vars)));
        for (int64_t j = 0; j < v->spec->n; j++) {
            float x = 0;
            if (v->spec->init == PSRT_INIT_UNIFORM)
                x = (float)((psrt_rng_uniform(&r) * 2 - 1) * v->spec->init_a);
            else if (v->spec->init == PSRT_INIT_NORMAL)
                x = (float)(psrt_rng_normal(&r) * v->spec->init_a);
            v->w[j] = x;
        }
        for (int s = 0; s < psrt_optim_nslots(ps->opt.kind); s++)
            for (int64_t j = 0; j < v->spec->n; j++)
                v->slot[s][j] = psrt_optim_slot_init(&ps->opt, s);
        v->pw.b1p = ps->opt.beta1;
        v->pw.b2p = ps->opt.beta2;
    }
    if (ps->has_sparse)
        psrt_table_clear(&ps->table);
    ps->table_pw.b1p = ps->opt.beta1;
    ps->table_pw.b2p = ps->opt.beta2;
    ps->global_step = 0;
}

/* Copies every tensor of this ps into an owned list (state lock held). */
static int snapshot(struct ps *ps, struct psrt_tl *l)
{
    memset(l, 0, sizeof *l);
    l->owns = true;
    int nslots = psrt_optim_nslots(ps->opt.kind);
    char name[200];
#define ADD(nm, dt, rk, dims, src, len)                            \
    do {                                                           \
        size_t len_ = (len);                                       \
        void *c_ = spare_take(&ps->spare, len_);                   \
        if (!c_)                                                   \
            c_ = psrt_alloc_big(len_);                             \
        if (!c_)                                                   \
            goto oom;                                              \
        memcpy(c_, (src), len_);                                   \
        if (!psrt_tl_add(l, (nm), (dt), (rk), (dims), c_, len_)) { \
            free(c_);                                              \
            goto oom;                                              \
        }                                                          \
    } while (0)
    if (ps->task == 0) {
        int64_t gs = ps->global_step;
        ADD("global_step", CKPT_DT_INT64, 0, NULL, &gs, sizeof gs);
    }
    for (int i = 0; i < ps->ndense; i++) {
        struct ps_var *v = &ps->dense[i];
        size_t bytes = (size_t)v->spec->n * sizeof(float);
        ADD(v->spec->name, CKPT_DT_FLOAT, v->spec->rank, v->spec->dims, v->w, bytes);
        for (int s = 0; s < nslots; s++) {
            snprintf(name, sizeof name, "%s/%s", v->spec->name,
                     psrt_optim_slot_suffix(ps->opt.kind, s));
            ADD(name, CKPT_DT_FLOAT, v->spec->rank, v->spec->dims, v->slot[s], bytes);
        }
        if (ps->opt.kind == PSRT_OPT_ADAM) {
            snprintf(name, sizeof name, "%s/beta1_power", v->spec->name);
            ADD(name, CKPT_DT_FLOAT, 0, NULL, &v->pw.b1p, 4);
            snprintf(name, sizeof name, "%s/beta2_power", v->spec->name);
            ADD(name, CKPT_DT_FLOAT, 0, NULL, &v->pw.b2p, 4);
        }
    }
    if (ps->has_sparse) {
        const struct psrt_table *t = &ps->table;
        uint64_t *keys = NULL, nr64 = 0;
        float *vals = NULL, *sl[2] = {NULL, NULL};
        if (psrt_table_export(t, &keys, &vals, sl, &nr64))
            goto oom;
        int64_t nr = (int64_t)nr64, w = t->width;
        int64_t kd[1] = {nr}, vd[2] = {nr, w};
        const char *base = ps->sparse_spec->name;
        snprintf(name, sizeof name, "%s/part_%d/keys", base, ps->task);
        psrt_tl_add(l, name, CKPT_DT_INT64, 1, kd, keys, (size_t)nr * 8);
        snprintf(name, sizeof name, "%s/part_%d/values", base, ps->task);
        psrt_tl_add(l, name, CKPT_DT_FLOAT, 2, vd, vals, (size_t)(nr * w) * 4);
        for (int s = 0; s < nslots; s++) {
            snprintf(name, sizeof name, "%s/part_%d/%s", base, ps->task,
                     psrt_optim_slot_suffix(ps->opt.kind, s));
            psrt_tl_add(l, name, CKPT_DT_FLOAT, 2, vd, sl[s], (size_t)(nr * w) * 4);
        }
        if (ps->opt.kind == PSRT_OPT_ADAM) {
            snprintf(name, sizeof name, "%s/part_%d/beta1_power", base, ps->task);
            ADD(name, CKPT_DT_FLOAT, 0, NULL, &ps->table_pw.b1p, 4);
            snprintf(name, sizeof name, "%s/part_%d/beta2_power", base, ps->task);
            ADD(name, CKPT_DT_FLOAT, 0, NULL, &ps->table_pw.b2p, 4);
        }
    }
#undef ADD
    return 0;
oom:
    psrt_tl_free(l);
    return -ENOMEM;
}

static const struct psrt_tensor *need(const struct psrt_tl *l, const char *name, int dtype,
                                      size_t len, const char *from, struct psrt_err *err)
{
    const struct psrt_tensor *t = psrt_tl_find(l, name);
    if (!t) {
        psrt_err_set(err, -ENOENT, "Key %s not found in checkpoint %s", name, from);
        return NULL;
    }
    if (t->dtype != dtype || (len != (size_t)-1 && t->len != len)) {
        psrt_err_set(err, -EINVAL,
                     "tensor %s in checkpoint %s has dtype %d and %zu bytes; expected dtype %d "
                     "and %zu bytes",
                     name, from, t->dtype, t->len, dtype, len);
        return NULL;
    }
    return t;
}

/* Loads this ps's tensors from l (state lock held exclusively).  Checks
 * everything before changing anything. */
static int load(struct ps *ps, const struct psrt_tl *l, const char *from, struct psrt_err *err)
{
    int nslots = psrt_optim_nslots(ps->opt.kind);
    char name[200];
    const struct psrt_tensor *gs = NULL;
    if (ps->task == 0 && !(gs = need(l, "global_step", CKPT_DT_INT64, 8, from, err)))
        return err->code;
    const struct psrt_tensor *tv[PSRT_MAX_VARS][5];
    for (int i = 0; i < ps->ndense; i++) {
        struct ps_var *v = &ps->dense[i];
        size_t bytes = (size_t)v->spec->n * 4;
        if (!(tv[i][0] = need(l, v->spec->name, CKPT_DT_FLOAT, bytes, from, err)))
            return err->code;
        for (int s = 0; s < nslots; s++) {
            snprintf(name, sizeof name, "%s/%s", v->spec->name,
                     psrt_optim_slot_suffix(ps->opt.kind, s));
            if (!(tv[i][1 + s] = need(l, name, CKPT_DT_FLOAT, bytes, from, err)))
                return err->code;
        }
        if (ps->opt.kind == PSRT_OPT_ADAM) {
            snprintf(name, sizeof name, "%s/beta1_power", v->spec->name);
            if (!(tv[i][3] = need(l, name, CKPT_DT_FLOAT, 4, from, err)))
                return err->code;
            snprintf(name, sizeof name, "%s/beta2_power", v->spec->name);
            if (!(tv[i][4] = need(l, name, CKPT_DT_FLOAT, 4, from, err)))
                return err->code;
        }
    }
    const struct psrt_tensor *keys = NULL, *vals = NULL, *sl[2] = {NULL, NULL}, *pw[2] = {0};
    int64_t nr = 0;
    if (ps->has_sparse) {
        const char *base = ps->sparse_spec->name;
        snprintf(name, sizeof name, "%s/part_%d/keys", base, ps->task);
        if (!(keys = need(l, name, CKPT_DT_INT64, (size_t)-1, from, err)))
            return err->code;
        nr = (int64_t)(keys->len / 8);
        size_t vb = (size_t)(nr * ps->table.width) * 4;
        snprintf(name, sizeof name, "%s/part_%d/values", base, ps->task);
        if (!(vals = need(l, name, CKPT_DT_FLOAT, vb, from, err)))
            return err->code;
        for (int s = 0; s < nslots; s++) {
            snprintf(name, sizeof name, "%s/part_%d/%s", base, ps->task,
                     psrt_optim_slot_suffix(ps->opt.kind, s));
            if (!(sl[s] = need(l, name, CKPT_DT_FLOAT, vb, from, err)))
                return err->code;
        }
        if (ps->opt.kind == PSRT_OPT_ADAM) {
            snprintf(name, sizeof name, "%s/part_%d/beta1_power", base, ps->task);
            if (!(pw[0] = need(l, name, CKPT_DT_FLOAT, 4, from, err)))
                return err->code;
            snprintf(name, sizeof name, "%s/part_%d/beta2_power", base, ps->task);
            if (!(pw[1] = need(l, name, CKPT_DT_FLOAT, 4, from, err)))
                return err->code;
        }
    }
    /* Everything is there: apply. */
    if (gs)
        memcpy(&ps->global_step, gs->data, 8);
    for (int i = 0; i < ps->ndense; i++) {
        struct ps_var *v = &ps->dense[i];
        memcpy(v->w, tv[i][0]->data, tv[i][0]->len);
        for (int s = 0; s < nslots; s++)
            memcpy(v->slot[s], tv[i][1 + s]->data, tv[i][1 + s]->len);
        if (ps->opt.kind == PSRT_OPT_ADAM) {
            memcpy(&v->pw.b1p, tv[i][3]->data, 4);
            memcpy(&v->pw.b2p, tv[i][4]->data, 4);
        } else {
            v->pw.b1p = ps->opt.beta1;
            v->pw.b2p = ps->opt.beta2;
        }
    }
    if (ps->has_sparse) {
        struct psrt_table *t = &ps->table;
        psrt_table_clear(t);
        const uint64_t *k = keys->data;
        size_t w = (size_t)t->width;
        for (int64_t i = 0; i < nr; i++) {
            uint32_t row;
            float *v = psrt_table_insert(t, k[i], &row);
            if (!v) {
                psrt_err_set(err, -ENOMEM, "no memory for %lld sparse rows", (long long)nr);
                return -ENOMEM;
            }
            memcpy(v, (const float *)vals->data + (size_t)i * w, w * 4);
            for (int s = 0; s < nslots; s++)
                memcpy(t->slot[s] + (size_t)row * w, (const float *)sl[s]->data + (size_t)i * w,
                       w * 4);
        }
        if (pw[0]) {
            memcpy(&ps->table_pw.b1p, pw[0]->data, 4);
            memcpy(&ps->table_pw.b2p, pw[1]->data, 4);
        }
    }
    return 0;
}

/* ---- robust local copy -------------------------------------------------- */

static void robust_prefix(struct ps *ps, const char *name, char *out, size_t len)
{
    snprintf(out, len, "%s/%s", ps->robust_dir, name);
}

/* Adds name to this ps's own `checkpoint` state (durably) and deletes its
 * copies beyond max_to_keep, except reported (when not NULL or empty): the
 * chief's last reported checkpoint, which this commit's save does not
 * replace until the chief reports it (a save failing after this commit
 * must leave the reported checkpoint on two hosts). */
static int robust_commit(struct ps *ps, const char *name, int max_to_keep, const char *reported,
                         struct psrt_err *err)
{
    return psrt_state_commit_keep(ps->robust_dir, name, max_to_keep,
                                  reported && reported[0] ? reported : NULL, CKPT_SYNC,
                                  "psrt/save/commit", err);
}

/* Writes l durably as this ps's own copy `name`. */
static int robust_write(struct ps *ps, const struct psrt_tl *l, const char *name,
                        struct psrt_err *err)
{
    char prefix[1400];
    robust_prefix(ps, name, prefix, sizeof prefix);
    int fe = psrt_fault_bundle("psrt/save/shard_write", prefix, err);
    if (fe)
        return fe;
    fe = psrt_fault("psrt/save/shard_sync");
    if (fe) {
        psrt_err_set(err, -fe, "fsync %s: %s", prefix, strerror(fe));
        return -fe;
    }
    int r = psrt_tl_write_bundle(l, prefix, CKPT_W_MKDIR_P | CKPT_W_DIRECT, CKPT_SYNC, err);
    if (r)
        psrt_err_add_call(err);
    return r;
}

/* ---- handlers ----------------------------------------------------------- */

static void h_ping(struct ps *ps, struct psrt_reply *rep)
{
    pthread_mutex_lock(&ps->step_mu);
    int64_t gs = ps->global_step;
    pthread_mutex_unlock(&ps->step_mu);
    psrt_buf_u64(&rep->out, ps->incarnation);
    psrt_buf_u32(&rep->out, (uint32_t)atomic_load(&ps->ready));
    psrt_buf_u64(&rep->out, (uint64_t)gs);
    psrt_buf_u32(&rep->out, (uint32_t)ps->task);
    char layout[160];
    psrt_flags_layout(ps->f, layout, sizeof layout);
    psrt_buf_str(&rep->out, layout);
}

static void h_init(struct ps *ps, struct psrt_buf *req, struct psrt_reply *rep)
{
    uint64_t seed = psrt_buf_get_u64(req);
    pthread_rwlock_wrlock(&ps->state);
    pthread_mutex_lock(&ps->step_mu);
    init_values(ps, seed);
    pthread_mutex_unlock(&ps->step_mu);
    atomic_store(&ps->ready, PS_INITIALIZED);
    pthread_rwlock_unlock(&ps->state);
    psrt_log("variables initialized");
}

/* Pull request: u64 nkeys, pad, keys.  Reply: i64 step, u32 ndense, pad,
 * dense values (vars in order), sparse values (nkeys * width). */
static void h_pull(struct ps *ps, uint32_t flags, struct psrt_buf *req, struct psrt_reply *rep)
{
    uint64_t nkeys = psrt_buf_get_u64(req);
    psrt_buf_skip_align8(req);
    /* nkeys comes off the wire: bounded by the payload before any size is
     * computed from it */
    if (req->bad || nkeys > (req->len - req->off) / 8) {
        rep->status = -EBADMSG;
        return;
    }
    const uint64_t *keys = psrt_buf_get(req, nkeys * 8);
    pthread_rwlock_rdlock(&ps->state);
    if (atomic_load(&ps->ready) != PS_OPEN) {
        pthread_rwlock_unlock(&ps->state);
        set_not_ready(rep, ps->task);
        return;
    }
    int64_t step;
    pthread_mutex_lock(&ps->step_mu);
    if (flags & PSRT_PULL_RESERVE) {
        if (ps->global_step >= ps->f->max_steps)
            step = -1;
        else
            step = ++ps->global_step;
    } else {
        step = ps->global_step;
    }
    pthread_mutex_unlock(&ps->step_mu);
    size_t dense_bytes = 0;
    for (int i = 0; i < ps->ndense; i++)
        dense_bytes += (size_t)ps->dense[i].spec->n * 4;
    size_t sparse_bytes = ps->has_sparse ? nkeys * (size_t)ps->table.width * 4 : 0;
    if (psrt_buf_reserve(&rep->out, 16 + dense_bytes + sparse_bytes + 8)) {
        pthread_rwlock_unlock(&ps->state);
        rep->status = -ENOMEM;
        return;
    }
    psrt_buf_u64(&rep->out, (uint64_t)step);
    psrt_buf_u32(&rep->out, (uint32_t)ps->ndense);
    psrt_buf_align8(&rep->out);
    for (int i = 0; i < ps->ndense; i++) {
        struct ps_var *v = &ps->dense[i];
        pthread_mutex_lock(&v->mu);
        psrt_buf_put(&rep->out, v->w, (size_t)v->spec->n * 4);
        pthread_mutex_unlock(&v->mu);
    }
    if (ps->has_sparse && nkeys) {
        pthread_mutex_lock(&ps->table_mu);
        psrt_table_pull(&ps->table, keys, nkeys, (float *)(rep->out.p + rep->out.len));
        pthread_mutex_unlock(&ps->table_mu);
        rep->out.len += sparse_bytes;
    }
    pthread_rwlock_unlock(&ps->state);
}

/* The sparse blocks of a PSRT_PUSH_BLOCKS push, from req's cursor to its
 * end, each bounded by what is left of the payload before any size is
 * computed from its count.  *out (malloc'd) and *nout; -EBADMSG. */
static int push_blocks(struct ps *ps, struct psrt_buf *req, struct psrt_kv **out, size_t *nout)
{
    const size_t width = (size_t)ps->table.width, per_key = 8 + width * 4;
    size_t nb = 0, cap = 0;
    struct psrt_kv *b = NULL;
    while (req->off < req->len) {
        uint64_t cnt = psrt_buf_get_u64(req);
        if (req->bad || !ps->has_sparse || cnt > (req->len - req->off) / per_key)
            goto bad;
        if (nb == cap) {
            cap = cap ? cap * 2 : 64;
            struct psrt_kv *nbk = realloc(b, cap * sizeof *b);
            if (!nbk)
                goto bad;
            b = nbk;
        }
        b[nb].keys = psrt_buf_get(req, cnt * 8);
        b[nb].vals = psrt_buf_get(req, cnt * width * 4);
        b[nb++].n = cnt;
        psrt_buf_skip_align8(req);
        if (req->bad)
            goto bad;
    }
    *out = b;
    *nout = nb;
    return 0;
bad:
    free(b);
    return -EBADMSG;
}

/* Push request: u64 nkeys, u32 ndense (every dense variable of this ps, or 0:
 * sparse rows only), pad, dense grads, pad to 8, keys, sparse grads; with
 * PSRT_PUSH_BLOCKS, blocks of pairs instead of the keys and grads (ps.h). */
static void h_push(struct ps *ps, uint32_t flags, struct psrt_buf *req, struct psrt_reply *rep)
{
    uint64_t nkeys = psrt_buf_get_u64(req);
    uint32_t nd = psrt_buf_get_u32(req);
    psrt_buf_skip_align8(req);
    if (nd != 0 && nd != (uint32_t)ps->ndense) {
        rep->status = -EINVAL;
        return;
    }
    const float *dg[PSRT_MAX_VARS];
    for (int i = 0; i < (int)nd; i++)
        dg[i] = psrt_buf_get(req, (size_t)ps->dense[i].spec->n * 4);
    psrt_buf_skip_align8(req);
    /* nkeys comes off the wire: bounded by the payload (8 bytes of key and
     * width floats of gradient each) before any size is computed from it */
    size_t per_key = 8 + (ps->has_sparse ? (size_t)ps->table.width * 4 : 0);
    if (req->bad || (nkeys && !ps->has_sparse) || nkeys > (req->len - req->off) / per_key) {
        rep->status = -EBADMSG;
        return;
    }
    struct psrt_kv one, *blk = &one;
    size_t nblk = 1;
    if (flags & PSRT_PUSH_BLOCKS) {
        if (nkeys || push_blocks(ps, req, &blk, &nblk)) {
            rep->status = -EBADMSG;
            return;
        }
        for (size_t j = 0; j < nblk; j++)
            nkeys += blk[j].n;
    } else {
        one.n = nkeys;
        one.keys = psrt_buf_get(req, nkeys * 8);
        one.vals = psrt_buf_get(req, ps->has_sparse ? nkeys * (size_t)ps->table.width * 4 : 0);
        if (req->bad) {
            rep->status = -EBADMSG;
            return;
        }
    }
    pthread_rwlock_rdlock(&ps->state);
    if (atomic_load(&ps->ready) != PS_OPEN) {
        pthread_rwlock_unlock(&ps->state);
        set_not_ready(rep, ps->task);
        if (blk != &one)
            free(blk);
        return;
    }
    for (int i = 0; i < (int)nd; i++) {
        struct ps_var *v = &ps->dense[i];
        pthread_mutex_lock(&v->mu);
        psrt_optim_apply(&ps->opt, v->w, v->slot, dg[i], v->spec->n, &v->pw);
        pthread_mutex_unlock(&v->mu);
    }
    int r = 0;
    if (nkeys) {
        pthread_mutex_lock(&ps->table_mu);
        double t0 = psrt_now();
        r = psrt_table_push_blocks(&ps->table, &ps->opt, blk, nblk, &ps->table_pw);
        if (psrt_bench_debug())
            psrt_log("applied %llu sparse updates in %.1f ms", (unsigned long long)nkeys,
                     (psrt_now() - t0) * 1e3);
        psrt_optim_advance(&ps->opt, &ps->table_pw);
        pthread_mutex_unlock(&ps->table_mu);
    }
    pthread_rwlock_unlock(&ps->state);
    if (blk != &one)
        free(blk);
    if (r)
        rep->status = r;
}

/* SaveV2 (legacy): i64 step, str shard prefix. */
static void h_save_shard(struct ps *ps, struct psrt_buf *req, struct psrt_reply *rep)
{
    int64_t step = (int64_t)psrt_buf_get_u64(req);
    char prefix[2048];
    struct psrt_err err = {0};
    if (psrt_buf_get_str(req, prefix, sizeof prefix)) {
        rep->status = -EBADMSG;
        return;
    }
    struct psrt_tl l;
    pthread_rwlock_wrlock(&ps->state);
    int r = snapshot(ps, &l);
    pthread_rwlock_unlock(&ps->state);
    if (r) {
        psrt_err_set(&err, r, "snapshot of ps task %d: %s", ps->task, strerror(-r));
        reply_err(rep, &err);
        return;
    }
    /* TensorFlow 1.0's BundleWriter: CreateDir(dirname(prefix)), result ignored. */
    char *dcopy = strdup(prefix);
    if (dcopy) {
        if (mkdir(dirname(dcopy), 0755) < 0 && errno != EEXIST) {
        }
        free(dcopy);
    }
    r = psrt_fault_bundle("psrt/save/shard_write", prefix, &err);
    if (!r)
        r = psrt_tl_write_bundle(&l, prefix, 0, 0, &err);
    free_keeping_spares(&ps->spare, &l);
    if (r) {
        psrt_log("SaveV2 of %s failed: %s", prefix, err.msg);
        reply_err(rep, &err);
        return;
    }
    psrt_ev("save.shard_written", "shard=%d step=%lld path=%s", ps->task, (long long)step,
            psrt_ev_q(prefix));
}

/* MergeV2Checkpoints (legacy): i64 step, u32 n, n prefixes, merged prefix. */
static void h_merge(struct ps *ps, struct psrt_buf *req, struct psrt_reply *rep)
{
    int64_t step = (int64_t)psrt_buf_get_u64(req);
    uint32_t n = psrt_buf_get_u32(req);
    if (req->bad || n == 0 || n > 4096) {
        rep->status = -EBADMSG;
        return;
    }
    char **parts = calloc(n, sizeof *parts);
    char merged[2048];
    struct psrt_err err = {0};
    int r = 0;
    for (uint32_t i = 0; i < n && parts; i++) {
        parts[i] = malloc(2048);
        if (!parts[i] || psrt_buf_get_str(req, parts[i], 2048))
            r = -EBADMSG;
    }
    if (!parts || r || psrt_buf_get_str(req, merged, sizeof merged)) {
        rep->status = -EBADMSG;
        goto out;
    }
    psrt_ev("save.merge.begin", "step=%lld", (long long)step);
    int fe = psrt_fault("psrt/save/merge");
    if (fe) {
        char *ix = ckpt_index_name(parts[0]);
        psrt_err_path(&err, -fe, ix ? ix : parts[0]);
        free(ix);
        r = -fe;
    } else {
        struct ckpt_err ce = {0};
        r = ckpt_merge((const char *const *)parts, n, merged, CKPT_MERGE_DELETE_OLD_DIRS, &ce);
        if (r > 0)
            r = 0;
        if (r)
            psrt_err_from_ckpt(&err, r, &ce);
    }
    if (r) {
        psrt_log("MergeV2Checkpoints into %s failed: %s", merged, err.msg);
        reply_err(rep, &err);
    } else {
        psrt_ev("save.merge.done", "step=%lld", (long long)step);
    }
out:
    for (uint32_t i = 0; parts && i < n; i++)
        free(parts[i]);
    free(parts);
}

/* TensorFlow's RestoreV2 on a missing V2 checkpoint falls back to the V1
 * TensorSliceReader, whose GetMatchingPaths fails when the directory is
 * absent and finds nothing when only the files are. */
static int legacy_missing(const char *prefix, struct psrt_err *err)
{
    char *dcopy = strdup(prefix);
    if (!dcopy)
        return -ENOMEM;
    const char *dir = dirname(dcopy);
    struct stat st;
    int r;
    if (stat(dir, &st) < 0) {
        psrt_err_set(err, -EINVAL,
                     "Unsuccessful TensorSliceReader constructor: Failed to get matching files "
                     "on %s: Not found: %s",
                     prefix, dir);
        r = -EINVAL;
    } else if (stat(prefix, &st) < 0) {
        psrt_err_set(err, -ENOENT,
                     "Unsuccessful TensorSliceReader constructor: Failed to find any matching "
                     "files for %s",
                     prefix);
        r = -ENOENT;
    } else {
        psrt_err_set(err, -EBADMSG,
                     "Unable to open table file %s: Data loss: not an sstable (bad magic "
                     "number): perhaps your file is in a different file format and you need "
                     "to use a different restore operator?",
                     prefix);
        r = -EBADMSG;
    }
    free(dcopy);
    return r;
}

/* RestoreV2: u32 robust, i64 step, str prefix (legacy: the chief's path;
 * robust: the checkpoint name, read from this ps's own copy). */
static void h_restore(struct ps *ps, struct psrt_buf *req, struct psrt_reply *rep)
{
    uint32_t robust = psrt_buf_get_u32(req);
    int64_t step = (int64_t)psrt_buf_get_u64(req);
    char arg[2048], prefix[2048];
    struct psrt_err err = {0};
    if (psrt_buf_get_str(req, arg, sizeof arg)) {
        rep->status = -EBADMSG;
        return;
    }
    if (robust)
        robust_prefix(ps, arg, prefix, sizeof prefix);
    else
        snprintf(prefix, sizeof prefix, "%s", arg);
    int r;
    struct psrt_tl l = {0};
    int fe = psrt_fault("psrt/restore/read");
    char *ix = ckpt_index_name(prefix);
    struct stat st;
    if (fe) {
        psrt_err_path(&err, -fe, ix ? ix : prefix);
        r = -fe;
    } else if (!robust && ix && stat(ix, &st) < 0) {
        r = legacy_missing(prefix, &err);
    } else {
        r = psrt_tl_read_bundle_into(&l, prefix, spare_take, &ps->spare, &err);
    }
    free(ix);
    if (!r) {
        pthread_rwlock_wrlock(&ps->state);
        pthread_mutex_lock(&ps->step_mu);
        r = load(ps, &l, prefix, &err);
        pthread_mutex_unlock(&ps->step_mu);
        if (!r)
            atomic_store(&ps->ready, PS_INITIALIZED);
        pthread_rwlock_unlock(&ps->state);
    }
    free_keeping_spares(&ps->spare, &l);
    if (r) {
        psrt_log("RestoreV2 from %s failed: %s", prefix, err.msg);
        reply_err(rep, &err);
        return;
    }
    psrt_log("restored from %s (step %lld)", prefix, (long long)step);
}

static void h_snapshot(struct ps *ps, struct psrt_reply *rep)
{
    struct psrt_tl l;
    pthread_rwlock_wrlock(&ps->state);
    int r = atomic_load(&ps->ready) ? snapshot(ps, &l) : -EAGAIN;
    pthread_rwlock_unlock(&ps->state);
    if (r == -EAGAIN) {
        set_not_ready(rep, ps->task);
        return;
    }
    if (r) {
        rep->status = r;
        return;
    }
    psrt_tl_encode(&l, &rep->out);
    free_keeping_spares(&ps->spare, &l);
}

/* The background writer of this ps's own durable copy. */
static void *bg_write(void *arg)
{
    struct ps *ps = arg;
    double t0 = psrt_now();
    ps->bg_rc = robust_write(ps, &ps->bg_l->l, ps->bg_name, &ps->bg_err);
    if (psrt_bench_debug())
        psrt_log("robust save: local copy durable in %.3f s", psrt_now() - t0);
    shared_put(ps->bg_l);
    ps->bg_l = NULL;
    if (ps->bg_rc) {
        psrt_log("robust save of %s/%s failed: %s", ps->robust_dir, ps->bg_name, ps->bg_err.msg);
    } else {
        char prefix[1400];
        robust_prefix(ps, ps->bg_name, prefix, sizeof prefix);
        psrt_ev("save.shard_written", "shard=%d step=%lld path=%s", ps->task,
                (long long)ps->bg_step, psrt_ev_q(prefix));
    }
    return NULL;
}

/* Waits for the background writer; its result (0 when none ran). */
static int bg_join(struct ps *ps, const char *name, struct psrt_err *err)
{
    int r = 0;
    if (ps->bg_active) {
        pthread_join(ps->bg, NULL);
        ps->bg_active = false;
        if (name && strcmp(name, ps->bg_name) != 0) {
            psrt_err_set(err, -ESTALE, "ps task %d: commit of %s, but the last save here was %s",
                         ps->task, name, ps->bg_name);
            return -ESTALE;
        }
        r = ps->bg_rc;
        if (r && err)
            *err = ps->bg_err;
    } else if (name) {
        psrt_err_set(err, -ESTALE, "ps task %d: commit of %s, which was not saved here", ps->task,
                     name);
        r = -ESTALE;
    }
    return r;
}

/* RobustSave: i64 step, str name -> this ps's tensors.  The same snapshot is
 * written durably to this ps's own disk in the background; RobustCommit
 * waits for that write and fails if it failed. */
static void h_rsave(struct ps *ps, struct psrt_buf *req, struct psrt_reply *rep)
{
    int64_t step = (int64_t)psrt_buf_get_u64(req);
    char name[512];
    if (psrt_buf_get_str(req, name, sizeof name) || strchr(name, '/')) {
        rep->status = -EBADMSG;
        return;
    }
    pthread_mutex_lock(&ps->bg_mu);
    bg_join(ps, NULL, NULL); /* an abandoned save */
    struct psrt_tl l;
    double t0 = psrt_now();
    pthread_rwlock_wrlock(&ps->state);
    int r = atomic_load(&ps->ready) ? snapshot(ps, &l) : -EAGAIN;
    pthread_rwlock_unlock(&ps->state);
    if (psrt_bench_debug())
        psrt_log("robust save: snapshot in %.3f s", psrt_now() - t0);
    if (r) {
        pthread_mutex_unlock(&ps->bg_mu);
        if (r == -EAGAIN)
            set_not_ready(rep, ps->task);
        else
            rep->status = r;
        return;
    }
    struct shared_tl *sh = malloc(sizeof *sh);
    if (!sh) {
        free_keeping_spares(&ps->spare, &l);
        pthread_mutex_unlock(&ps->bg_mu);
        rep->status = -ENOMEM;
        return;
    }
    sh->l = l;
    sh->sp = &ps->spare;
    atomic_store(&sh->refs, 2); /* the reply and the writer */
    int n = psrt_tl_encode_iov(&sh->l, &rep->out, rep->ext, 64);
    if (n < 0) { /* too many tensors for one zero-copy reply: copy */
        psrt_buf_reset(&rep->out);
        psrt_tl_encode(&sh->l, &rep->out);
        atomic_store(&sh->refs, 1);
    } else {
        rep->next = n;
        rep->done = shared_put;
        rep->done_arg = sh;
    }
    ps->bg_l = sh;
    snprintf(ps->bg_name, sizeof ps->bg_name, "%s", name);
    ps->bg_step = step;
    ps->bg_rc = 0;
    r = pthread_create(&ps->bg, NULL, bg_write, ps);
    if (r) { /* no thread: write it here */
        bg_write(ps);
        ps->bg_active = false; /* done already: commit finds bg_name, no writer to join */
        if (ps->bg_rc) {
            reply_err(rep, &ps->bg_err);
            pthread_mutex_unlock(&ps->bg_mu);
            return;
        }
    } else {
        ps->bg_active = true;
    }
    pthread_mutex_unlock(&ps->bg_mu);
}

/* RobustCommit: i64 step, str name, u32 max_to_keep, then optionally str
 * reported (the chief's last reported checkpoint: kept beyond max_to_keep). */
static void h_rcommit(struct ps *ps, struct psrt_buf *req, struct psrt_reply *rep)
{
    long long step = (long long)psrt_buf_get_u64(req);
    char name[512];
    if (psrt_buf_get_str(req, name, sizeof name)) {
        rep->status = -EBADMSG;
        return;
    }
    uint32_t keep = psrt_buf_get_u32(req);
    /* then, optionally, the chief's last reported checkpoint: kept */
    char reported[512] = "";
    if (req->off < req->len && psrt_buf_get_str(req, reported, sizeof reported))
        reported[0] = 0;
    struct psrt_err err = {0};
    pthread_mutex_lock(&ps->bg_mu);
    bool written_inline = !ps->bg_active && !strcmp(ps->bg_name, name) && ps->bg_rc == 0;
    int r = written_inline ? 0 : bg_join(ps, name, &err);
    ps->bg_name[0] = 0;
    pthread_mutex_unlock(&ps->bg_mu);
    if (r || robust_commit(ps, name, keep ? (int)keep : 5, reported, &err)) {
        reply_err(rep, &err);
        return;
    }
    /* copies of earlier saves that failed after this ps wrote them (no
     * commit came), and temporary files of a write killed with this ps */
    int swept = psrt_state_sweep(ps->robust_dir, step);
    if (swept)
        psrt_log("removed %d file%s of uncommitted checkpoints in %s", swept, swept == 1 ? "" : "s",
                 ps->robust_dir);
}

/* RobustAbort: i64 step, str name, str keep.  The chief abandoned the save
 * of name (it failed somewhere, on this ps or elsewhere): waits for this
 * ps's background write of it, then drops this ps's copy, committed or not
 * (its state entry, its files, temporary files of a write that failed), so
 * that a failed save leaves nothing behind and frees what it took of a full
 * disk.  keep (the chief's last reported checkpoint) is never dropped: a
 * save of the same step again (after a restore) writes the same name. */
static void h_rabort(struct ps *ps, struct psrt_buf *req, struct psrt_reply *rep)
{
    long long step = (long long)psrt_buf_get_u64(req);
    char name[512], keep[512];
    if (psrt_buf_get_str(req, name, sizeof name) || !name[0] || strchr(name, '/') ||
        psrt_buf_get_str(req, keep, sizeof keep)) {
        rep->status = -EBADMSG;
        return;
    }
    struct psrt_err err = {0};
    int n = 0;
    pthread_mutex_lock(&ps->bg_mu);
    bg_join(ps, NULL, NULL); /* its write, failed or not, is over */
    if (!strcmp(ps->bg_name, name))
        ps->bg_name[0] = 0;
    if (strcmp(name, keep) != 0)
        n = psrt_state_drop(ps->robust_dir, name, CKPT_SYNC, &err);
    pthread_mutex_unlock(&ps->bg_mu);
    if (n < 0) {
        psrt_log("could not drop %s/%s of the abandoned save of step %lld: %s", ps->robust_dir,
                 name, step, err.msg);
        reply_err(rep, &err);
        return;
    }
    if (n)
        psrt_log("dropped %s/%s (%d file%s): the chief abandoned the save of step %lld",
                 ps->robust_dir, name, n, n == 1 ? "" : "s", step);
}

/* RobustQuery -> u32 n, then per committed checkpoint (oldest first): str
 * name, u32 present (its index file exists here). */
static void h_rquery(struct ps *ps, struct psrt_reply *rep)
{
    struct ckpt_state st;
    struct ckpt_err ce = {0};
    memset(&st, 0, sizeof st);
    if (ckpt_state_read(ps->robust_dir, &st, &ce)) {
        psrt_buf_u32(&rep->out, 0);
        return;
    }
    psrt_buf_u32(&rep->out, (uint32_t)st.n_all);
    for (size_t i = 0; i < st.n_all; i++) {
        char p[1400];
        robust_prefix(ps, st.all_model_checkpoint_paths[i], p, sizeof p);
        char *ix = ckpt_index_name(p);
        struct stat sb;
        psrt_buf_str(&rep->out, st.all_model_checkpoint_paths[i]);
        psrt_buf_u32(&rep->out, ix && stat(ix, &sb) == 0);
        free(ix);
    }
    ckpt_state_free(&st);
}

/* Load: i64 step, str name ("" = do not keep a local copy), u32 max_to_keep,
 * tensors.  With a name, the tensors are also written durably as this ps's
 * own copy and committed, restoring two copies of the shard. */
static void h_load(struct ps *ps, struct psrt_buf *req, struct psrt_reply *rep)
{
    int64_t step = (int64_t)psrt_buf_get_u64(req);
    char name[512];
    struct psrt_err err = {0};
    if (psrt_buf_get_str(req, name, sizeof name)) {
        rep->status = -EBADMSG;
        return;
    }
    uint32_t keep = psrt_buf_get_u32(req);
    psrt_buf_skip_align8(req);
    struct psrt_tl l;
    int r = psrt_tl_decode(&l, req);
    if (r) {
        rep->status = r;
        return;
    }
    int fe = psrt_fault("psrt/restore/load");
    if (fe) {
        psrt_err_set(&err, -fe, "loading tensors on ps task %d: %s", ps->task, strerror(fe));
        r = -fe;
    }
    if (!r) {
        pthread_rwlock_wrlock(&ps->state);
        pthread_mutex_lock(&ps->step_mu);
        r = load(ps, &l, "(sent by the chief)", &err);
        pthread_mutex_unlock(&ps->step_mu);
        if (!r)
            atomic_store(&ps->ready, PS_INITIALIZED);
        pthread_rwlock_unlock(&ps->state);
    }
    if (!r && name[0] && !strchr(name, '/')) {
        struct psrt_err werr = {0};
        if (robust_write(ps, &l, name, &werr) ||
            robust_commit(ps, name, keep ? (int)keep : 5, NULL, &werr))
            psrt_log("could not keep a local copy of %s: %s", name, werr.msg);
    }
    psrt_tl_free(&l);
    if (r) {
        reply_err(rep, &err);
        return;
    }
    psrt_log("loaded %s (step %lld) from the chief", name[0] ? name : "variables", (long long)step);
}

void psrt_ps_handle(void *ctx, int op, uint32_t flags, struct psrt_buf *req, struct psrt_reply *rep)
{
    struct ps *ps = ctx;
    /* a worker's Ping names its task (older workers send none) */
    if (op == PSRT_OP_PING && req->len >= 4) {
        uint32_t task;
        memcpy(&task, req->p, 4);
        if (task < 64)
            atomic_fetch_or(&ps->heard, UINT64_C(1) << task);
    }
    if (atomic_load(&ps->done) &&
        (op == PSRT_OP_PULL || op == PSRT_OP_PUSH || op == PSRT_OP_PING)) {
        static const char msg[] = "OutOfRangeError: training is done (the chief shut this ps down)";
        rep->status = -ESHUTDOWN;
        psrt_buf_put(&rep->out, msg, sizeof msg - 1);
        return;
    }
    switch (op) {
    case PSRT_OP_PING: h_ping(ps, rep); break;
    case PSRT_OP_INIT: h_init(ps, req, rep); break;
    case PSRT_OP_PULL: h_pull(ps, flags, req, rep); break;
    case PSRT_OP_PUSH: h_push(ps, flags, req, rep); break;
    case PSRT_OP_SAVE_SHARD: h_save_shard(ps, req, rep); break;
    case PSRT_OP_MERGE: h_merge(ps, req, rep); break;
    case PSRT_OP_RESTORE: h_restore(ps, req, rep); break;
    case PSRT_OP_SNAPSHOT: h_snapshot(ps, rep); break;
    case PSRT_OP_RSAVE: h_rsave(ps, req, rep); break;
    case PSRT_OP_RCOMMIT: h_rcommit(ps, req, rep); break;
    case PSRT_OP_RQUERY: h_rquery(ps, rep); break;
    case PSRT_OP_RABORT: h_rabort(ps, req, rep); break;
    case PSRT_OP_LOAD: h_load(ps, req, rep); break;
    case PSRT_OP_OPEN:
        if (atomic_load(&ps->ready) == PS_UNINITIALIZED) {
            set_not_ready(rep, ps->task);
        } else {
            atomic_store(&ps->ready, PS_OPEN);
        }
        break;
    case PSRT_OP_SHUTDOWN:
        psrt_log("chief reports training done: shutting down");
        atomic_store(&ps->done, true);
        rep->exit_after = ps->f->ps_exit_on_chief_done;
        break;
    case PSRT_OP_ECHO: psrt_buf_put(&rep->out, req->p, req->len); break;
    case PSRT_OP_BENCH_SINK: break;
    default: rep->status = -ENOSYS; break;
    }
}

int psrt_ps_setup(struct psrt_ps **out, const struct psrt_flags *f, struct psrt_err *err)
{
    struct ps *ps = calloc(1, sizeof *ps);
    if (!ps)
        return -ENOMEM;
    ps->f = f;
    ps->task = f->task;
    if (psrt_model_init(&ps->model, f->model, f->nps, psrt_flags_features(f))) {
        psrt_err_set(err, -EINVAL, "unknown model %s", f->model);
        free(ps);
        return -EINVAL;
    }
    psrt_optim_default(&ps->opt, psrt_optim_parse(f->optimizer), (float)f->learning_rate);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ps->incarnation =
        psrt_mix64((uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ ((uint64_t)getpid() << 40));
    pthread_rwlockattr_t ra;
    pthread_rwlockattr_init(&ra);
    pthread_rwlockattr_setkind_np(&ra, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&ps->state, &ra);
    pthread_mutex_init(&ps->step_mu, NULL);
    pthread_mutex_init(&ps->table_mu, NULL);
    pthread_mutex_init(&ps->bg_mu, NULL);
    pthread_mutex_init(&ps->spare.mu, NULL);
    int nslots = psrt_optim_nslots(ps->opt.kind);
    const struct psrt_var *v = NULL; /* the one being allocated: named when it fails */
    for (int i = 0; i < ps->model.nvars; i++) {
        v = &ps->model.vars[i];
        if (v->kind == PSRT_VAR_SPARSE) {
            float si[2] = {psrt_optim_slot_init(&ps->opt, 0), psrt_optim_slot_init(&ps->opt, 1)};
            ps->has_sparse = true;
            ps->sparse_spec = v;
            if (psrt_table_init(&ps->table, (int)v->n, nslots, si, 1 << 16))
                goto oom;
            continue;
        }
        if (v->ps != ps->task)
            continue;
        struct ps_var *pv = &ps->dense[ps->ndense++];
        pv->spec = v;
        for (int s = 0; s <= nslots && (size_t)v->n * 4 >= SPARE_MIN; s++)
            if (ps->spare.nsizes < SPARE_MAX)
                ps->spare.sizes[ps->spare.nsizes++] = (size_t)v->n * 4;
        pv->w = psrt_alloc_big((size_t)v->n * 4);
        if (!pv->w)
            goto oom;
        memset(pv->w, 0, (size_t)v->n * 4);
        for (int s = 0; s < nslots; s++) {
            if (!(pv->slot[s] = psrt_alloc_big((size_t)v->n * 4)))
                goto oom;
            memset(pv->slot[s], 0, (size_t)v->n * 4);
        }
        pthread_mutex_init(&pv->mu, NULL);
    }
    snprintf(ps->robust_dir, sizeof ps->robust_dir, "%s/ps%d", f->train_dir, f->task);
    *out = (struct psrt_ps *)ps;
    return 0;
oom:
    if (v && v->kind == PSRT_VAR_SPARSE)
        psrt_err_set(err, -ENOMEM,
                     "no memory for the variables of ps task %d: sparse table %s "
                     "(lower --sparse_features)",
                     f->task, v->name);
    else if (v)
        psrt_err_set(err, -ENOMEM,
                     "no memory for the variables of ps task %d: %s, %" PRId64
                     " floats (%.1f GiB with its %d slot%s)%s",
                     f->task, v->name, v->n, (double)v->n * 4 * (nslots + 1) / (1u << 30), nslots,
                     nslots == 1 ? "" : "s",
                     !strcmp(f->model, "bench_dense") ? "; lower --dense_floats" : "");
    else
        psrt_err_set(err, -ENOMEM, "no memory for the variables of ps task %d", f->task);
    return -ENOMEM;
}

int psrt_ps_serve(struct psrt_ps *p, int port, struct psrt_err *err)
{
    struct ps *ps = (struct ps *)p;
    int r = psrt_server_start(&ps->srv, NULL, port, ps->f->rpc_threads, ps->f->pool_threads,
                              psrt_ps_handle, ps, err);
    /* the chief reads RobustSave replies one ps after another while it
     * writes them to its disk, so a ps's reply may wait unread as long as
     * the chief's own bulk calls do: the same timeout */
    if (!r)
        psrt_server_set_timeout(ps->srv, psrt_flags_bulk_timeout(ps->f));
    return r;
}

int psrt_ps_port(struct psrt_ps *p)
{
    return psrt_server_port(((struct ps *)p)->srv);
}

void psrt_ps_wait(struct psrt_ps *p)
{
    psrt_server_wait(((struct ps *)p)->srv);
}

int psrt_ps_main(const struct psrt_flags *f)
{
    struct psrt_ps *ps;
    struct psrt_err err = {0};
    if (psrt_ps_setup(&ps, f, &err) || psrt_ps_serve(ps, f->ps[f->task].port, &err)) {
        psrt_log("%s", err.msg);
        psrt_ev("ps.failed", "error=%s", psrt_ev_q(err.msg));
        return 1;
    }
    psrt_log("serving %s variables on port %d (%s, %s threads)", f->model, psrt_ps_port(ps),
             f->protocol == PSRT_ROBUST ? "robust" : "legacy",
             f->rpc_threads == PSRT_POOL ? "pool" : "per_request");
    psrt_ev("ps.ready", "task=%d port=%d", f->task, psrt_ps_port(ps));
    psrt_ps_wait(ps);
    /* Linger while workers are still connected, at most 3 s: each gets a
     * "done" answer to its next call (a step, or the Ping of a worker
     * waiting for the model, which polls every 0.5 s) and exits 0, closing
     * its connection.  (Lingering only until 0.3 s without a request let a
     * waiting worker find the ps gone and retry for --reconnect_timeout_secs.)
     * A worker that has not called at all yet (started late, or slow on a
     * loaded machine, while the chief trained to the end) is waited for as
     * long as it would try to connect, --connect_timeout_secs: its first
     * Ping is answered "done" and it exits 0 instead of failing to find
     * the ps. */
    struct ps *s = (struct ps *)ps;
    int nw = f->nworkers < 64 ? f->nworkers : 0;
    uint64_t all = nw ? (UINT64_C(1) << nw) - 1 : 0;
    double start = psrt_now();
    for (;;) {
        double t = psrt_now() - start;
        bool conns = psrt_server_open_conns(s->srv) > 0 && t < 3;
        bool unheard = (atomic_load(&s->heard) & all) != all && t < f->connect_timeout;
        if (!conns && !unheard)
            break;
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    psrt_ev("ps.done", "task=%d", f->task);
    return 0;
}
