/*
 * expect.c: the loader's expect: section: per-target checks (exit,
 * signal, log_matches, ...), file checks, event checks and checkpoint
 * checks, by variant selector, into struct fl_scn_expect.  Loaded after
 * hosts, jobs and variants, so every reference resolves.  What each check
 * observes and judges is harness/engine/check.c's (and check_ckpt.c's).
 */
#include "harness/load/sections.h"
#include "harness/base/suggest.h"
#include "harness/run/evsrv.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char *const check_keys_list[] = {
    "exit", "signal", "fails_with", "log_matches", "log_not_matches", "core",
};

static int load_check(struct fl_scn_vctx *c, const ynode *k, const ynode *v,
                      struct fl_scn_check *ck)
{
    int rc;
    char where[160];
    snprintf(where, sizeof where, "expectations of '%s'", k->value);
    ck->core = -1;
    ck->loc = k->loc;
    if (fl_scn_yaml_is_null(v))
        return 0;
    if ((rc = fl_scn_want(c, v, FL_YN_MAP, where)) < 0 ||
        (rc = fl_scn_check_keys(c, v, check_keys_list, ARRAY_LEN(check_keys_list), where)) < 0)
        return rc;
    const ynode *e = fl_scn_yaml_get(v, "exit", NULL);
    if (e) {
        if ((rc = fl_scn_want(c, e, FL_YN_SCALAR, "'exit'")) < 0)
            return rc;
        ck->exit_loc = e->loc;
        if (strcasecmp(e->value, "nonzero") == 0 || strcasecmp(e->value, "non-zero") == 0)
            ck->exit = FL_SCN_EXIT_NONZERO;
        else if (strcasecmp(e->value, "any") == 0)
            ck->exit = FL_SCN_EXIT_ANY;
        else {
            long x;
            if (!isdigit((unsigned char)e->value[0]))
                return fl_scn_verr(c, e->loc,
                                   "'exit' must be a number 0..255, 'nonzero' or 'any', not '%s'",
                                   e->value);
            if ((rc = fl_scn_get_long(c, e, "'exit'", 0, 255, &x)) < 0)
                return rc;
            ck->exit = FL_SCN_EXIT_CODE;
            ck->exit_code = (int)x;
        }
    }
    const ynode *sg = fl_scn_yaml_get(v, "signal", NULL);
    if (sg) {
        if ((rc = fl_scn_want(c, sg, FL_YN_SCALAR, "'signal'")) < 0)
            return rc;
        ck->signal_loc = sg->loc;
        if (strcasecmp(sg->value, "any") == 0) {
            ck->signal = FL_SCN_SIG_ANY;
        } else {
            if ((rc = fl_scn_get_signal(c, sg, &ck->signal_number)) < 0)
                return rc;
            ck->signal = FL_SCN_SIG_NUMBER;
        }
    }
    const ynode *r;
    if ((r = fl_scn_yaml_get(v, "fails_with", NULL)) &&
        (rc = fl_scn_load_regex(c, r, "'fails_with'", &ck->fails_with)) < 0)
        return rc;
    if ((r = fl_scn_yaml_get(v, "log_matches", NULL)) &&
        (rc = fl_scn_load_regex(c, r, "'log_matches'", &ck->log_matches)) < 0)
        return rc;
    if ((r = fl_scn_yaml_get(v, "log_not_matches", NULL)) &&
        (rc = fl_scn_load_regex(c, r, "'log_not_matches'", &ck->log_not_matches)) < 0)
        return rc;
    const ynode *co = fl_scn_yaml_get(v, "core", NULL);
    if (co) {
        bool b;
        if ((rc = fl_scn_get_bool(c, co, "'core'", &b)) < 0)
            return rc;
        ck->core = b;
        ck->core_loc = co->loc;
    }
    if (ck->exit == FL_SCN_EXIT_CODE && ck->signal != FL_SCN_SIG_UNSET)
        return fl_scn_verr(c, sg->loc,
                           "a process cannot both exit with %d and be killed by a signal",
                           ck->exit_code);
    return 0;
}

/* An absolute path a check reads must be one of the host's own: inside
 * the workdir (its disk, or a shared directory) or /tmp; any other is the
 * machine's file, which the check must not report on ("/etc/shadow").
 * p is normalised (fl_scn_norm_path). */
static int own_path(struct fl_scn_vctx *c, const ynode *n, const char *what, const char *p)
{
    const char *wd = c->s->workdir;
    size_t wl = strlen(wd);
    if (p[0] != '/' || (!strncmp(p, wd, wl) && (p[wl] == '/' || !p[wl])) ||
        (!strncmp(p, "/tmp", 4) && (p[4] == '/' || !p[4])))
        return 0;
    return fl_scn_verr(c, n->loc,
                       "%s '%s' is not one of the host's own files: an absolute path must be "
                       "inside the workdir (%s) or /tmp",
                       what, n->value, wd);
}

static int load_file_checks(struct fl_scn_vctx *c, const ynode *v, struct fl_scn_expect *x)
{
    static const char *const keys[] = {"host", "path", "exists"};
    int rc;
    if (fl_scn_yaml_is_null(v))
        return 0;
    if ((rc = fl_scn_want(c, v, FL_YN_SEQ, "'files'")) < 0)
        return rc;
    if (!(x->files = fl_scn_zalloc(c, v->n, sizeof *x->files)))
        return -ENOMEM;
    for (size_t i = 0; i < v->n; i++) {
        const ynode *it = v->items[i];
        struct fl_scn_file_check *f = &x->files[x->n_files++];
        f->loc = it->loc;
        f->exists = true;
        if ((rc = fl_scn_want(c, it, FL_YN_MAP, "a file check")) < 0 ||
            (rc = fl_scn_check_keys(c, it, keys, 3, "file check")) < 0)
            return rc;
        const ynode *h = fl_scn_yaml_get(it, "host", NULL), *p = fl_scn_yaml_get(it, "path", NULL);
        const ynode *e = fl_scn_yaml_get(it, "exists", NULL);
        if (!h)
            return fl_scn_verr(c, it->loc, "file check needs 'host'");
        if (!p)
            return fl_scn_verr(c, it->loc, "file check needs 'path'");
        if ((rc = fl_scn_resolve_host(c, h, "file check", &f->host)) < 0 ||
            (rc = fl_scn_want_scalar(c, p, "path")) < 0)
            return rc;
        if (!*p->value)
            return fl_scn_verr(c, p->loc, "file check 'path' must not be empty");
        if ((rc = fl_scn_get_path(c, p, "path", FL_SCN_PATH_DOT, &f->path)) < 0 ||
            (rc = own_path(c, p, "path", f->path)) < 0)
            return rc;
        if (!f->path[0]) { /* ".": the workdir itself */
            free(f->path);
            if ((rc = fl_scn_dup_str(c, ".", &f->path)) < 0)
                return rc;
        }
        if (e && (rc = fl_scn_get_bool(c, e, "'exists'", &f->exists)) < 0)
            return rc;
    }
    return 0;
}

static int load_event_checks(struct fl_scn_vctx *c, const ynode *v, struct fl_scn_expect *x)
{
    static const char *const keys[] = {"event", "host", "job", "min", "max"};
    int rc;
    if (fl_scn_yaml_is_null(v))
        return 0;
    if ((rc = fl_scn_want(c, v, FL_YN_SEQ, "'events'")) < 0)
        return rc;
    if (!(x->events = fl_scn_zalloc(c, v->n, sizeof *x->events)))
        return -ENOMEM;
    for (size_t i = 0; i < v->n; i++) {
        const ynode *it = v->items[i];
        struct fl_scn_event_check *e = &x->events[x->n_events++];
        e->loc = it->loc;
        e->host = e->job = -1;
        e->max = -1;
        if ((rc = fl_scn_want(c, it, FL_YN_MAP, "an event check")) < 0 ||
            (rc = fl_scn_check_keys(c, it, keys, ARRAY_LEN(keys), "event check")) < 0)
            return rc;
        const ynode *ev = fl_scn_yaml_get(it, "event", NULL),
                    *h = fl_scn_yaml_get(it, "host", NULL);
        const ynode *j = fl_scn_yaml_get(it, "job", NULL), *mn = fl_scn_yaml_get(it, "min", NULL);
        const ynode *mx = fl_scn_yaml_get(it, "max", NULL);
        if (!ev)
            return fl_scn_verr(c, it->loc, "event check needs 'event'");
        if ((rc = fl_scn_get_str(c, ev, "'event'", &e->event)) < 0)
            return rc;
        if (!fl_ev_kind_valid(e->event))
            return fl_scn_verr(c, ev->loc, "bad event kind '%s' (" FL_EV_KIND_CHARS ")", e->event);
        if (h && (rc = fl_scn_resolve_host(c, h, "event check", &e->host)) < 0)
            return rc;
        if (j) {
            int task;
            if ((rc = fl_scn_resolve_job_task(c, j, "event check", &e->job, &task)) < 0)
                return rc;
            if (task >= 0)
                return fl_scn_verr(c, j->loc, "event check 'job' takes a job name, not a task");
        }
        e->min = mx ? 0 : 1;
        if (mn && (rc = fl_scn_get_long(c, mn, "'min'", 0, LONG_MAX, &e->min)) < 0)
            return rc;
        if (mx && (rc = fl_scn_get_long(c, mx, "'max'", 0, LONG_MAX, &e->max)) < 0)
            return rc;
        if (mx && e->max < e->min)
            return fl_scn_verr(c, mx->loc, "max %ld is below min %ld", e->max, e->min);
    }
    return 0;
}

/* A path of a checkpoint check into a fixed buffer, normalised: relative
 * or absolute inside the workdir or /tmp, no '..', not empty, shorter than
 * FL_SCN_CKPT_PATH_MAX. */
static int ckpt_path(struct fl_scn_vctx *c, const ynode *n, const char *what, char *out)
{
    int rc;
    if ((rc = fl_scn_want_scalar(c, n, what)) < 0)
        return rc;
    if (!*n->value)
        return fl_scn_verr(c, n->loc, "checkpoint '%s' must not be empty", what);
    if (strlen(n->value) >= FL_SCN_CKPT_PATH_MAX)
        return fl_scn_verr(c, n->loc, "checkpoint '%s' is longer than %d characters", what,
                           FL_SCN_CKPT_PATH_MAX - 1);
    if ((rc = fl_scn_norm_path(c, n, what, FL_SCN_PATH_DOT, out, FL_SCN_CKPT_PATH_MAX)) < 0)
        return rc;
    if (!out[0]) /* "." : the workdir itself */
        snprintf(out, FL_SCN_CKPT_PATH_MAX, ".");
    return own_path(c, n, what, out);
}

/* dir: or prefix: (exactly one) of a checkpoint or copy mapping. */
static int ckpt_dir_or_prefix(struct fl_scn_vctx *c, const ynode *m, const char *what, char *dir,
                              char *prefix)
{
    const ynode *d = fl_scn_yaml_get(m, "dir", NULL), *p = fl_scn_yaml_get(m, "prefix", NULL);
    if (d && p)
        return fl_scn_verr(c, p->loc, "%s has both 'dir' and 'prefix'; give one", what);
    if (!d && !p)
        return fl_scn_verr(c, m->loc,
                           "%s needs 'dir' (a checkpoint directory with a `checkpoint` state file) "
                           "or 'prefix' (one bundle)",
                           what);
    return d ? ckpt_path(c, d, "dir", dir) : ckpt_path(c, p, "prefix", prefix);
}

static int load_ckpt_check(struct fl_scn_vctx *c, const ynode *m, struct fl_scn_ckpt_check *ck)
{
    static const char *const keys[] = {"host",       "dir",    "prefix",      "verify",
                                       "restorable", "copies", "latest_step", "restores_latest"};
    static const char *const copy_keys[] = {"host", "dir", "prefix"};
    struct fl_scn_target t;
    int rc;

    ck->loc = m->loc;
    ck->host = -1;
    if ((rc = fl_scn_want(c, m, FL_YN_MAP, "a checkpoint check")) < 0 ||
        (rc = fl_scn_check_keys(c, m, keys, ARRAY_LEN(keys), "checkpoint check")) < 0)
        return rc;
    const ynode *h = fl_scn_yaml_get(m, "host", NULL);
    if (!h)
        return fl_scn_verr(c, m->loc, "checkpoint check needs 'host' (a host, job:task or chief)");
    if ((rc = fl_scn_resolve_target(c, h, "checkpoint", &t)) < 0)
        return rc;
    ck->host = t.host;
    snprintf(ck->host_text, sizeof ck->host_text, "%s", h->value);
    if ((rc = ckpt_dir_or_prefix(c, m, "checkpoint check", ck->dir, ck->prefix)) < 0)
        return rc;
    const ynode *n;
    if ((n = fl_scn_yaml_get(m, "verify", NULL)) &&
        (rc = fl_scn_get_bool(c, n, "'verify'", &ck->verify)) < 0)
        return rc;
    if ((n = fl_scn_yaml_get(m, "restorable", NULL)) &&
        (rc = fl_scn_get_bool(c, n, "'restorable'", &ck->restorable)) < 0)
        return rc;
    if ((n = fl_scn_yaml_get(m, "restores_latest", NULL)) &&
        (rc = fl_scn_get_bool(c, n, "'restores_latest'", &ck->restores_latest)) < 0)
        return rc;
    if ((n = fl_scn_yaml_get(m, "latest_step", NULL))) {
        if ((rc = fl_scn_want(c, n, FL_YN_SCALAR, "'latest_step'")) < 0)
            return rc;
        if (!ck->dir[0])
            return fl_scn_verr(c, n->loc,
                               "'latest_step' needs 'dir' (the step is the one the `checkpoint` "
                               "state file names)");
        if (strcmp(n->value, "last_reported") == 0) {
            ck->latest_step = FL_SCN_CKPT_STEP_LAST_REPORTED;
        } else {
            long v;
            if (!isdigit((unsigned char)n->value[0]))
                return fl_scn_verr(c, n->loc,
                                   "'latest_step' must be last_reported or a step number, not '%s'",
                                   n->value);
            if ((rc = fl_scn_get_long(c, n, "'latest_step'", 0, LONG_MAX, &v)) < 0)
                return rc;
            ck->latest_step = FL_SCN_CKPT_STEP_NUMBER;
            ck->step = v;
        }
    }
    const ynode *cp = fl_scn_yaml_get(m, "copies", NULL);
    if (cp && !fl_scn_yaml_is_null(cp)) {
        if ((rc = fl_scn_want(c, cp, FL_YN_SEQ, "'copies'")) < 0)
            return rc;
        if (!ck->restorable)
            return fl_scn_verr(
                c, cp->loc,
                "'copies' are compared with the restored tensors: set 'restorable: true'");
        if (cp->n > FL_SCN_MAX_CKPT_COPIES)
            return fl_scn_verr(c, cp->items[FL_SCN_MAX_CKPT_COPIES]->loc,
                               "at most %d copies per checkpoint check", FL_SCN_MAX_CKPT_COPIES);
        for (size_t i = 0; i < cp->n; i++) {
            const ynode *it = cp->items[i];
            struct fl_scn_ckpt_copy *co = &ck->copies[ck->n_copies++];
            co->loc = it->loc;
            if ((rc = fl_scn_want(c, it, FL_YN_MAP, "a checkpoint copy")) < 0 ||
                (rc = fl_scn_check_keys(c, it, copy_keys, ARRAY_LEN(copy_keys),
                                        "checkpoint copy")) < 0)
                return rc;
            const ynode *ch = fl_scn_yaml_get(it, "host", NULL);
            if (!ch)
                return fl_scn_verr(c, it->loc, "checkpoint copy needs 'host'");
            if ((rc = fl_scn_resolve_target(c, ch, "checkpoint copy", &t)) < 0)
                return rc;
            co->host = t.host;
            if ((rc = ckpt_dir_or_prefix(c, it, "checkpoint copy", co->dir, co->prefix)) < 0)
                return rc;
        }
    }
    if (!ck->verify && !ck->restorable && !ck->latest_step && !ck->restores_latest)
        return fl_scn_verr(c, m->loc,
                           "checkpoint check checks nothing: set verify, restorable, latest_step "
                           "or restores_latest");
    return 0;
}

/* checkpoint: one mapping or a list of them. */
static int load_ckpt_checks(struct fl_scn_vctx *c, const ynode *k, const ynode *v,
                            struct fl_scn_expect *x)
{
    int rc;
    if (fl_scn_yaml_is_null(v))
        return 0;
    size_t n = v->type == FL_YN_SEQ ? v->n : 1;
    for (size_t i = 0; i < n; i++) {
        const ynode *m = v->type == FL_YN_SEQ ? v->items[i] : v;
        if (x->n_ckpts == FL_SCN_MAX_CKPT_CHECKS)
            return fl_scn_verr(c, m->loc, "at most %d checkpoint checks per expect block",
                               FL_SCN_MAX_CKPT_CHECKS);
        if (m->type != FL_YN_MAP) {
            char b[64];
            return fl_scn_verr(c, m->loc,
                               "'%s' must be a mapping like {host: w0, dir: train_logs, verify: "
                               "true} or a list of them, not %s",
                               k->value, fl_scn_describe(m, b, sizeof b));
        }
        if ((rc = load_ckpt_check(c, m, &x->ckpts[x->n_ckpts++])) < 0)
            return rc;
    }
    return 0;
}

static int load_expect_block(struct fl_scn_vctx *c, const ynode *key, const ynode *blk,
                             struct fl_scn_expect *x)
{
    struct fl_scenario *s = c->s;
    int rc;
    char where[160];

    x->loc = key->loc;
    if (fl_scn_yaml_is_null(blk))
        return 0;
    snprintf(where, sizeof where, "expectations for '%s'", key->value);
    if ((rc = fl_scn_want(c, blk, FL_YN_MAP, where)) < 0)
        return rc;
    if (!(x->checks = fl_scn_zalloc(c, blk->n, sizeof *x->checks)))
        return -ENOMEM;
    for (size_t i = 0; i < blk->n; i++) {
        const ynode *k = blk->keys[i], *v = blk->items[i];
        const char *n = k->value;
        if (strcmp(n, "files") == 0) {
            if ((rc = load_file_checks(c, v, x)) < 0)
                return rc;
            continue;
        }
        if (strcmp(n, "events") == 0) {
            if ((rc = load_event_checks(c, v, x)) < 0)
                return rc;
            continue;
        }
        if (strcmp(n, "checkpoint") == 0) {
            if ((rc = load_ckpt_checks(c, k, v, x)) < 0)
                return rc;
            continue;
        }
        struct fl_scn_check *ck = &x->checks[x->n_checks];
        ck->index = -1;
        ck->core = -1;
        if (strcmp(n, "all") == 0) {
            ck->target = FL_SCN_EXP_ALL;
        } else if (strcmp(n, "chief") == 0) {
            ck->target = FL_SCN_EXP_CHIEF;
        } else if (strchr(n, ':')) {
            int j, t;
            if ((rc = fl_scn_resolve_job_task(c, k, "expect", &j, &t)) < 0)
                return rc;
            ck->target = FL_SCN_EXP_TASK;
            ck->index = fl_scn_task_index(s, j, t);
        } else if (fl_scn_job_find(s, n) >= 0) {
            ck->target = FL_SCN_EXP_JOB;
            ck->index = fl_scn_job_find(s, n);
        } else if (fl_scn_host_find(s, n) >= 0) {
            ck->target = FL_SCN_EXP_HOST;
            ck->index = fl_scn_host_find(s, n);
        } else {
            size_t nc = 5 + s->n_jobs + s->n_hosts;
            const char **cands = fl_scn_zalloc(c, nc, sizeof *cands);
            size_t q = 0;
            if (!cands)
                return -ENOMEM;
            cands[q++] = "all";
            cands[q++] = "chief";
            cands[q++] = "files";
            cands[q++] = "events";
            cands[q++] = "checkpoint";
            for (size_t j = 0; j < s->n_jobs; j++)
                cands[q++] = s->jobs[j].name;
            for (size_t h = 0; h < s->n_hosts; h++)
                cands[q++] = s->hosts[h].name;
            bool is_field = false;
            for (size_t f = 0; f < ARRAY_LEN(check_keys_list); f++)
                is_field |= strcmp(n, check_keys_list[f]) == 0;
            if (is_field)
                fl_scn_verr(c, k->loc,
                            "'%s' is not an expectation target: under a selector, name a target "
                            "first (e.g. %s: {all: {%s: ...}})",
                            n, key->value, n);
            else if (fl_suggest(n, cands, q)) {
                fl_scn_verr(c, k->loc, "unknown expectation target '%s'", n);
                fl_suggest_append(c->err, c->errlen, n, cands, q);
            } else {
                fl_scn_verr(c, k->loc,
                            "unknown expectation target '%s' (expected all, chief, a job, "
                            "job:task, a host, files, events or checkpoint)",
                            n);
            }
            free(cands);
            return -EINVAL;
        }
        x->n_checks++;
        if ((rc = load_check(c, k, v, ck)) < 0)
            return rc;
    }
    return 0;
}

int fl_scn_load_expect(struct fl_scn_vctx *c, const ynode *ex)
{
    struct fl_scenario *s = c->s;
    int rc;
    if (!ex || fl_scn_yaml_is_null(ex))
        return 0;
    if ((rc = fl_scn_want(c, ex, FL_YN_MAP, "'expect' (variant selector -> expectations)")) < 0)
        return rc;
    if (!(s->expects = fl_scn_zalloc(c, ex->n, sizeof *s->expects)))
        return -ENOMEM;
    for (size_t i = 0; i < ex->n; i++) {
        const ynode *k = ex->keys[i];
        struct fl_scn_expect *x = &s->expects[s->n_expects++];
        char msg[512];
        if ((rc = fl_scn_selector_parse(s, k->value, &x->sel, msg, sizeof msg)) < 0) {
            if (rc == -ENOMEM)
                return rc;
            const char *n = k->value;
            if (strcmp(n, "chief") == 0 || fl_scn_job_find(s, n) >= 0 ||
                fl_scn_host_find(s, n) >= 0 || strcmp(n, "files") == 0 ||
                strcmp(n, "events") == 0 || strcmp(n, "checkpoint") == 0 || strchr(n, ':'))
                return fl_scn_verr(c, k->loc,
                                   "'%s' is a target, not a variant selector: write all: {%s: ...}",
                                   n, n);
            return fl_scn_verr(c, k->loc, "%s", msg);
        }
        x->sel.loc = k->loc;
        if ((rc = load_expect_block(c, k, ex->items[i], x)) < 0)
            return rc;
    }
    return 0;
}
