/*
 * check_ckpt.c: after a run, checks a checkpoint the runtime saved on a
 * host's disk (expect: checkpoint:, scenarios/README.md), with the
 * tensor-bundle library the runtime itself uses (runtime/ckpt):
 *
 *   state          (dir:) the `checkpoint` state file names the latest
 *                  checkpoint, whose step is the number after its last '-';
 *   verify         every index block crc, every data file, every tensor crc;
 *   restorable     every tensor reads back whole (what a restore reads), a
 *                  saved global_step equals the step in the name, and every
 *                  tensor equals, byte for byte, the same tensor in the
 *                  independent copies named by `copies:` (for psrt's robust
 *                  protocol: each ps's own durable copy of its shard), which
 *                  together must hold every tensor: a checkpoint assembled
 *                  wrongly cannot pass, even with its crcs right;
 *   latest_step    the state's step equals the last save.done the chief
 *                  reported (or a given number), and no reported step is
 *                  newer: no reported save was lost;
 *   restores_latest  the chief restored at least once, each time from the
 *                  step of the last save.done it reported before.
 *
 * The chief's save.done / restore.done steps come from the events the
 * engine kept in memory (so the checks work with --no-db too).
 * Every check is recorded through check.c's record() with target HOST:PATH.
 * Every file is read in the host's view only (view.c, and the library's
 * *_open_in / *_read_in): a symlink a task made that leads out of the
 * host's disk, /tmp or shared directory reads nothing of the machine's.
 */
#include "harness/engine/check_ckpt.h"
#include "harness/engine/engine_int.h"
#include "runtime/ckpt/bundle.h"
#include "runtime/ckpt/state.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* What an event of the run is to these checks: a save.done (EV_SAVED) or a
 * restore.done (EV_RESTORED) from the chief's host, else EV_OTHER. */
enum { EV_OTHER, EV_SAVED, EV_RESTORED };
static int chief_ckpt_event(const struct engine *e, const struct ev_seen *ev)
{
    if (ev->host != e->r.s->tasks[e->r.s->chief_task].host)
        return EV_OTHER;
    if (!strcmp(ev->kind, "save.done"))
        return EV_SAVED;
    if (!strcmp(ev->kind, "restore.done"))
        return EV_RESTORED;
    return EV_OTHER;
}

/* "model.ckpt-300" -> 300; -1 when the name does not end in -<digits>. */
static long long step_of(const char *base)
{
    const char *d = strrchr(base, '-');
    if (!d || !d[1])
        return -1;
    for (const char *p = d + 1; *p; p++)
        if (*p < '0' || *p > '9')
            return -1;
    return atoll(d + 1);
}

static const char *base_of(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

/* Where one check's bundle is: the directory of the host's view that holds
 * it (view.c; every file of the bundle is resolved inside it only), the
 * prefix inside that, its name and step.  0, or -1 with why. */
struct located {
    int root; /* -1 none */
    char prefix[PATH_MAX];
    char name[PATH_MAX]; /* basename, e.g. model.ckpt-300 */
    long long step;      /* -1 unknown */
};

/* The root of path in host's view (fl_host_view_at), or -1 with why. */
static int view_at(const struct fl_check_ckpt_ctx *cx, int host, const char *path, char *rel,
                   size_t len, char *why, size_t wlen)
{
    int root = fl_host_view_at(cx->e, host, path, rel, len);
    if (root == -EXDEV)
        snprintf(why, wlen, "%s is not one of the host's own files (outside the workdir and /tmp)",
                 path);
    else if (root < 0)
        snprintf(why, wlen, "%s: %s", path, strerror(-root));
    return root < 0 ? -1 : root;
}

static int locate(const struct fl_check_ckpt_ctx *cx, const struct fl_scn_ckpt_check *ck,
                  struct located *l, char *why, size_t len)
{
    char dir[PATH_MAX];
    l->root = -1;
    if (ck->prefix[0]) {
        l->root = view_at(cx, ck->host, ck->prefix, l->prefix, sizeof l->prefix, why, len);
        snprintf(l->name, sizeof l->name, "%s", base_of(ck->prefix));
        l->step = step_of(l->name);
        return l->root < 0 ? -1 : 0;
    }
    int droot = view_at(cx, ck->host, ck->dir, dir, sizeof dir, why, len);
    if (droot < 0)
        return -1;
    struct ckpt_state st;
    struct ckpt_err ce = {0};
    memset(&st, 0, sizeof st);
    int r = ckpt_state_read_in(droot, dir, &st, &ce);
    if (r < 0) {
        close(droot);
        snprintf(why, len, "%s", r == -ENOENT ? "no `checkpoint` state file" : ce.msg);
        return -1;
    }
    if (!st.model_checkpoint_path || !*st.model_checkpoint_path) {
        close(droot);
        ckpt_state_free(&st);
        snprintf(why, len, "the `checkpoint` state file names no checkpoint");
        return -1;
    }
    const char *m = st.model_checkpoint_path;
    if (m[0] == '/') {
        close(droot);
        l->root = view_at(cx, ck->host, m, l->prefix, sizeof l->prefix, why, len);
    } else {
        l->root = droot;
        snprintf(l->prefix, sizeof l->prefix, "%s/%s", dir, m);
    }
    snprintf(l->name, sizeof l->name, "%s", base_of(m));
    l->step = step_of(l->name);
    ckpt_state_free(&st);
    return l->root < 0 ? -1 : 0;
}

/* The stored bytes of a tensor (crc checked), malloc'd. */
static int read_all(struct ckpt_reader *r, const struct ckpt_entry *ent, void **buf,
                    struct ckpt_err *ce)
{
    *buf = malloc(ent->size > 0 ? (size_t)ent->size : 1);
    if (!*buf)
        return -ENOMEM;
    int rc = ckpt_reader_read(r, ent, *buf, (size_t)ent->size, ce);
    if (rc < 0) {
        free(*buf);
        *buf = NULL;
    }
    return rc;
}

static bool same_shape(const struct ckpt_entry *a, const struct ckpt_entry *b)
{
    if (a->dtype != b->dtype || a->rank != b->rank || a->size != b->size)
        return false;
    for (int i = 0; i < a->rank; i++)
        if (a->dims[i] != b->dims[i])
            return false;
    return true;
}

/* Reads every tensor; checks global_step; compares with the copies.
 * verified: ckpt_reader_verify already passed on r, which read every tensor
 * as a restore does (crc checked, strings decoded), so only global_step is
 * read again.  Returns true when restorable; *obs says what was seen. */
static bool restore_check(const struct fl_check_ckpt_ctx *cx, const struct fl_scn_ckpt_check *ck,
                          struct ckpt_reader *r, const struct located *l, bool verified, char *obs,
                          size_t len)
{
    struct ckpt_err ce = {0};
    size_t n = ckpt_reader_count(r), sliced = 0;
    long long gstep = -1;
    for (size_t i = 0; i < n; i++) {
        const struct ckpt_entry *ent = ckpt_reader_entry(r, i);
        if (ent->nslices > 0) {
            sliced++;
            continue;
        }
        if (verified && strcmp(ent->name, "global_step"))
            continue;
        if (ent->dtype == CKPT_DT_STRING) {
            struct ckpt_strings *ss;
            if (ckpt_reader_read_strings(r, ent, &ss, &ce) < 0) {
                snprintf(obs, len, "tensor '%s' does not read back: %s", ent->name, ce.msg);
                return false;
            }
            ckpt_strings_free(ss);
            continue;
        }
        void *buf;
        if (read_all(r, ent, &buf, &ce) < 0) {
            snprintf(obs, len, "tensor '%s' does not read back: %s", ent->name,
                     ce.msg[0] ? ce.msg : "out of memory");
            return false;
        }
        if (!strcmp(ent->name, "global_step") && ent->size == 8 &&
            (ent->dtype == CKPT_DT_INT64 || ent->dtype == CKPT_DT_UINT64))
            memcpy(&gstep, buf, 8);
        free(buf);
    }
    if (gstep >= 0 && l->step >= 0 && gstep != l->step) {
        snprintf(obs, len, "%s holds global_step %lld", l->name, gstep);
        return false;
    }
    size_t compared = 0;
    bool *covered = calloc(n ? n : 1, sizeof *covered);
    if (!covered) {
        snprintf(obs, len, "out of memory");
        return false;
    }
    bool ok = true;
    for (size_t c = 0; c < ck->n_copies && ok; c++) {
        const struct fl_scn_ckpt_copy *co = &ck->copies[c];
        char where[PATH_MAX], cpre[PATH_MAX + 64], why[PATH_MAX + 96];
        const char *hn = cx->e->r.s->hosts[co->host].name;
        int croot;
        if (co->prefix[0]) {
            croot = view_at(cx, co->host, co->prefix, cpre, sizeof cpre, why, sizeof why);
            snprintf(where, sizeof where, "%s:%s", hn, co->prefix);
        } else {
            croot = view_at(cx, co->host, co->dir, where, sizeof where, why, sizeof why);
            snprintf(cpre, sizeof cpre, "%s/%s", where, l->name);
            snprintf(where, sizeof where, "%s:%s/%s", hn, co->dir, l->name);
        }
        struct ckpt_reader *cr;
        if (croot < 0 || ckpt_reader_open_in(&cr, croot, cpre, &ce) < 0) {
            snprintf(obs, len, "copy %s does not open: %s", where, croot < 0 ? why : ce.msg);
            if (croot >= 0)
                close(croot);
            ok = false;
            break;
        }
        close(croot); /* the reader holds its own */
        for (size_t i = 0; i < ckpt_reader_count(cr) && ok; i++) {
            const struct ckpt_entry *ce2 = ckpt_reader_entry(cr, i);
            if (ce2->nslices > 0)
                continue;
            const struct ckpt_entry *me = ckpt_reader_find(r, ce2->name);
            if (!me) {
                snprintf(obs, len, "tensor '%s' of copy %s is not in the checkpoint", ce2->name,
                         where);
                ok = false;
                break;
            }
            if (!same_shape(me, ce2)) {
                snprintf(obs, len, "tensor '%s' has another dtype or shape in copy %s", ce2->name,
                         where);
                ok = false;
                break;
            }
            void *a = NULL, *b = NULL;
            if (read_all(r, me, &a, &ce) < 0 || read_all(cr, ce2, &b, &ce) < 0) {
                snprintf(obs, len, "tensor '%s' does not read back for the comparison with %s: %s",
                         ce2->name, where, ce.msg);
                ok = false;
            } else if (memcmp(a, b, (size_t)me->size) != 0) {
                size_t at = 0;
                while (((unsigned char *)a)[at] == ((unsigned char *)b)[at])
                    at++;
                snprintf(obs, len, "tensor '%s' differs from copy %s at byte %zu of %lld",
                         ce2->name, where, at, (long long)me->size);
                ok = false;
            } else {
                for (size_t k = 0; k < n; k++)
                    if (ckpt_reader_entry(r, k) == me)
                        covered[k] = true;
                compared++;
            }
            free(a);
            free(b);
        }
        ckpt_reader_close(cr);
    }
    if (ok && ck->n_copies) {
        for (size_t i = 0; i < n; i++) {
            const struct ckpt_entry *ent = ckpt_reader_entry(r, i);
            if (ent->nslices == 0 && !covered[i]) {
                snprintf(obs, len, "tensor '%s' is in none of the %zu copies", ent->name,
                         ck->n_copies);
                ok = false;
                break;
            }
        }
    }
    free(covered);
    if (!ok)
        return false;
    int o = snprintf(obs, len, "%zu tensors read back", n - sliced);
    if (gstep >= 0 && o > 0 && (size_t)o < len)
        o += snprintf(obs + o, len - (size_t)o, ", global_step %lld", gstep);
    if (ck->n_copies && o > 0 && (size_t)o < len)
        snprintf(obs + o, len - (size_t)o, ", bit-exact with %zu copies (%zu tensors compared)",
                 ck->n_copies, compared);
    return true;
}

void fl_check_ckpt(const struct fl_check_ckpt_ctx *cx, const struct fl_scn_ckpt_check *ck)
{
    struct engine *e = cx->e;
    const char *hn = e->r.s->hosts[ck->host].name;
    char target[PATH_MAX + 80], why[2048] = "", obs[2048], exp[256];
    int line = ck->loc.line;
    struct located L;
    snprintf(target, sizeof target, "%s:%s", hn, ck->dir[0] ? ck->dir : ck->prefix);

    /* summary of what is expected */
    if (*cx->nexp < 4) {
        fprintf(cx->expf, "%scheckpoint %s%s%s%s%s", (*cx->nexp)++ ? "; " : "", target,
                ck->verify ? " verified" : "", ck->restorable ? " restorable" : "",
                ck->n_copies ? " bit-exact" : "",
                ck->latest_step == FL_SCN_CKPT_STEP_LAST_REPORTED ? " at last reported step" : "");
    }
    bool found = locate(cx, ck, &L, why, sizeof why) == 0;
    if (ck->dir[0])
        cx->record(cx->j, "checkpoint.state", target, found,
                   "a state file naming the latest checkpoint", found ? L.name : why, line);
    struct ckpt_reader *r = NULL;
    struct ckpt_err ce = {0};
    if (found && ckpt_reader_open_in(&r, L.root, L.prefix, &ce) < 0) {
        snprintf(why, sizeof why, "%s does not open: %s", L.name, ce.msg);
        r = NULL;
    }
    if (found)
        snprintf(target, sizeof target, "%s:%s%s%s", hn, ck->dir[0] ? ck->dir : "",
                 ck->dir[0] ? "/" : "", ck->dir[0] ? L.name : ck->prefix);
    bool all_ok = found && r, verified = false;
    if (ck->verify) {
        bool ok = false;
        if (r) {
            ok = ckpt_reader_verify(r, &ce) == 0;
            if (ok)
                snprintf(obs, sizeof obs, "%zu tensors in %d data file%s, every crc matches",
                         ckpt_reader_count(r), ckpt_reader_header(r)->num_shards,
                         ckpt_reader_header(r)->num_shards == 1 ? "" : "s");
            else
                snprintf(obs, sizeof obs, "%s", ce.msg);
        } else {
            snprintf(obs, sizeof obs, "%s", why);
        }
        cx->record(cx->j, "checkpoint.verify", target, ok, "every crc and data file checks out",
                   obs, line);
        all_ok &= ok;
        verified = ok;
    }
    if (ck->restorable) {
        bool ok = r && restore_check(cx, ck, r, &L, verified, obs, sizeof obs);
        if (!r)
            snprintf(obs, sizeof obs, "%s", why);
        snprintf(exp, sizeof exp, "every tensor reads back%s",
                 ck->n_copies ? ", equal to its copies byte for byte" : "");
        cx->record(cx->j, "checkpoint.restore", target, ok, exp, obs, line);
        all_ok &= ok;
    }
    long long last_saved = -1, max_saved = -1;
    size_t nsaves = 0;
    for (size_t i = 0; i < e->nevents; i++)
        if (chief_ckpt_event(e, &e->events[i]) == EV_SAVED) {
            nsaves++;
            last_saved = e->events[i].step;
            if (last_saved > max_saved)
                max_saved = last_saved;
        }
    if (ck->latest_step) {
        bool ok = false;
        long long want = ck->step;
        if (ck->latest_step == FL_SCN_CKPT_STEP_LAST_REPORTED)
            snprintf(exp, sizeof exp, "the step of the chief's last save.done");
        else
            snprintf(exp, sizeof exp, "step %lld", ck->step);
        if (!found) {
            snprintf(obs, sizeof obs, "%s", why);
        } else if (ck->latest_step == FL_SCN_CKPT_STEP_LAST_REPORTED && nsaves == 0) {
            snprintf(obs, sizeof obs, "%s, but the chief reported no save.done", L.name);
        } else {
            if (ck->latest_step == FL_SCN_CKPT_STEP_LAST_REPORTED)
                want = last_saved;
            ok = L.step == want && (max_saved < 0 || max_saved <= L.step);
            if (nsaves)
                snprintf(obs, sizeof obs,
                         "%s; last save.done step=%lld (newest %lld, %zu reported)", L.name,
                         last_saved, max_saved, nsaves);
            else
                snprintf(obs, sizeof obs, "%s", L.name);
        }
        cx->record(cx->j, "checkpoint.latest_step", target, ok, exp, obs, line);
        all_ok &= ok;
    }
    if (ck->restores_latest) {
        bool ok = true;
        size_t nrest = 0;
        long long before = -1, bad_at = -1, bad_before = -1, first = -1;
        for (size_t i = 0; i < e->nevents; i++) {
            int kind = chief_ckpt_event(e, &e->events[i]);
            long long step = e->events[i].step;
            if (kind == EV_SAVED) {
                before = step;
                continue;
            }
            if (kind != EV_RESTORED)
                continue;
            nrest++;
            if (first < 0)
                first = step;
            if (before >= 0 && step != before && bad_at < 0) {
                bad_at = step;
                bad_before = before;
            }
        }
        if (nrest == 0) {
            ok = false;
            snprintf(obs, sizeof obs, "the chief reported no restore.done");
        } else if (bad_at >= 0) {
            ok = false;
            snprintf(obs, sizeof obs,
                     "restored step %lld after the chief had reported step %lld saved", bad_at,
                     bad_before);
        } else {
            snprintf(obs, sizeof obs, "%zu restore%s, from step %lld, the last reported before",
                     nrest, nrest == 1 ? "" : "s", first);
        }
        cx->record(cx->j, "checkpoint.restores_latest", target, ok,
                   "every restore from the last save.done reported before it", obs, line);
        all_ok &= ok;
    }
    if (r)
        ckpt_reader_close(r);
    if (L.root >= 0)
        close(L.root);
    /* observed summary: what the checkpoint is, when everything held */
    if (all_ok && *cx->nobs < 3) {
        fprintf(cx->obsf, "%s%s", (*cx->nobs)++ ? "; " : "", target);
        if (ck->verify)
            fprintf(cx->obsf, " verified");
        if (ck->restorable && ck->n_copies)
            fprintf(cx->obsf, "%s bit-exact with %zu cop%s", ck->verify ? "," : "", ck->n_copies,
                    ck->n_copies == 1 ? "y" : "ies");
        else if (ck->restorable)
            fprintf(cx->obsf, "%s restorable", ck->verify ? "," : "");
        if (ck->latest_step)
            fprintf(cx->obsf, ", step %lld = last save.done", L.step);
        if (ck->restores_latest)
            fprintf(cx->obsf, ", restores from the latest");
    }
}
