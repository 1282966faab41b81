/*
 * faults.c: the loader's faults: section: each fault's trigger (at, after,
 * on_log), its kind (the key that names one in the table of kinds,
 * harness/faults/kinds.c, whose parser reads its value and its own keys),
 * for: and variant:.  Runs after hosts, variants, cluster and run are
 * loaded, so every reference resolves.
 */
#include "harness/base/text.h"
#include "harness/faults/kind.h"
#include "harness/load/sections.h"
#include "harness/run/evsrv.h"
#include "harness/base/suggest.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char *const trigger_keys[] = {"at", "after", "on_log"};

/* ---- faults ------------------------------------------------------------ */

static int load_count(struct fl_scn_vctx *c, const ynode *m, unsigned *count)
{
    const ynode *n = fl_scn_yaml_get(m, "count", NULL);
    long v;
    int rc;
    *count = 1;
    if (!n)
        return 0;
    if ((rc = fl_scn_get_long(c, n, "'count'", 1, 1000000000L, &v)) < 0)
        return rc;
    *count = (unsigned)v;
    return 0;
}

static int load_trigger(struct fl_scn_vctx *c, const ynode *key, const ynode *v,
                        struct fl_scn_trigger *t)
{
    struct fl_scenario *s = c->s;
    int rc;

    t->loc = key->loc;
    t->host = t->job = t->task = -1;
    t->count = 1;
    if (strcmp(key->value, "at") == 0) {
        t->kind = FL_SCN_TRIG_AT;
        if ((rc = fl_scn_get_duration(c, v, "'at'", true, &t->at_ms)) < 0)
            return rc;
        if (t->at_ms >= s->timeout_ms)
            return fl_scn_verr(c, v->loc,
                               "fault at %s comes after the run's timeout (%" PRId64
                               "%s): raise 'timeout:' or fire it earlier",
                               v->value,
                               s->timeout_ms % 1000 ? s->timeout_ms : s->timeout_ms / 1000,
                               s->timeout_ms % 1000 ? "ms" : "s");
        return 0;
    }
    bool ev = strcmp(key->value, "after") == 0;
    static const char *const ev_keys[] = {"event", "host", "job", "count", "where"};
    static const char *const log_keys[] = {"match", "host", "job", "count"};
    t->kind = ev ? FL_SCN_TRIG_EVENT : FL_SCN_TRIG_LOG;
    if (v->type != FL_YN_MAP) {
        char b[64];
        return fl_scn_verr(c, v->loc, "'%s' must be a mapping like %s, not %s", key->value,
                           ev ? "{event: save.done, host: w0}" : "{host: w0, match: 'step 100'}",
                           fl_scn_describe(v, b, sizeof b));
    }
    if ((rc = fl_scn_check_keys(c, v, ev ? ev_keys : log_keys, ev ? 5 : 4,
                                ev ? "after" : "on_log")) < 0)
        return rc;
    const ynode *h = fl_scn_yaml_get(v, "host", NULL);
    const ynode *j = fl_scn_yaml_get(v, "job", NULL);
    if (h && (rc = fl_scn_resolve_host(c, h, ev ? "'after'" : "'on_log'", &t->host)) < 0)
        return rc;
    if (j &&
        (rc = fl_scn_resolve_job_task(c, j, ev ? "'after'" : "'on_log'", &t->job, &t->task)) < 0)
        return rc;
    if (j && c->s->jobs[t->job].final)
        return fl_scn_final_not_here(c, j, t->job, ev ? "'after'" : "'on_log'");
    if ((rc = load_count(c, v, &t->count)) < 0)
        return rc;
    if (ev) {
        const ynode *e = fl_scn_yaml_get(v, "event", NULL);
        if (!e)
            return fl_scn_verr(c, v->loc, "'after' needs 'event' (the event kind, e.g. save.done)");
        if ((rc = fl_scn_get_str(c, e, "'event'", &t->event)) < 0)
            return rc;
        if (!fl_ev_kind_valid(t->event))
            return fl_scn_verr(c, e->loc, "bad event kind '%s' (" FL_EV_KIND_CHARS ")", t->event);
        const ynode *w = fl_scn_yaml_get(v, "where", NULL);
        if (w && !fl_scn_yaml_is_null(w)) {
            if ((rc = fl_scn_want(c, w, FL_YN_MAP, "'where'")) < 0)
                return rc;
            if (!(t->where = fl_scn_zalloc(c, w->n, sizeof *t->where)))
                return -ENOMEM;
            for (size_t i = 0; i < w->n; i++) {
                struct fl_scn_kv *kv = &t->where[t->n_where++];
                const char *wk = w->keys[i]->value;
                /* An event attribute is key=value: its key has no space or
                 * '=' (docs/events.md), so such a key could never match. */
                if (!*wk || wk[strcspn(wk, " =\t\n")])
                    return fl_scn_verr(c, w->keys[i]->loc,
                                       "bad 'where' key '%s' (an event attribute's key is one "
                                       "word: not empty, no spaces or '=')",
                                       wk);
                if ((rc = fl_scn_dup_str(c, wk, &kv->key)) < 0 ||
                    (rc = fl_scn_get_str(c, w->items[i], "a 'where' value", &kv->value)) < 0)
                    return rc;
            }
        }
    } else {
        const ynode *m = fl_scn_yaml_get(v, "match", NULL);
        if (!m)
            return fl_scn_verr(c, v->loc, "'on_log' needs 'match' (a regex)");
        if ((rc = fl_scn_load_regex(c, m, "'match'", &t->match)) < 0)
            return rc;
    }
    return 0;
}

/* The keys a fault may have: triggers, every kind (and the keys only it
 * reads), for and variant; n at most max. */
static size_t fault_keys(const char **keys, size_t max, const char **kinds, size_t *nkinds)
{
    size_t n = 0;
    *nkinds = 0;
    for (size_t q = 0; q < ARRAY_LEN(trigger_keys); q++)
        keys[n++] = trigger_keys[q];
    for (int k = 1; k < FL_SCN_ACT_COUNT; k++) {
        const struct fl_fault_kind *kd = fl_fault_kinds[k];
        keys[n++] = kinds[(*nkinds)++] = kd->name;
        for (size_t q = 0; kd->keys && kd->keys[q] && n < max - 2; q++)
            keys[n++] = kd->keys[q];
    }
    keys[n++] = "for";
    keys[n++] = "variant";
    keys[n++] = "optional";
    return n;
}

/* A key only another kind reads ('signal' on a pause): said at the key. */
static int foreign_keys(struct fl_scn_vctx *c, const ynode *it, const struct fl_fault_kind *kd)
{
    for (int k = 1; k < FL_SCN_ACT_COUNT; k++) {
        const struct fl_fault_kind *o = fl_fault_kinds[k];
        for (size_t q = 0; o != kd && o->keys && o->keys[q]; q++) {
            struct fl_scn_ynode *key = NULL;
            if (!fl_scn_yaml_get(it, o->keys[q], &key))
                continue;
            if (o->keys_note)
                return fl_scn_verr(c, key->loc, "'%s' applies only to %s (%s)", o->keys[q], o->name,
                                   o->keys_note);
            return fl_scn_verr(c, key->loc, "'%s' applies only to %s", o->keys[q], o->name);
        }
    }
    return 0;
}

/* A value as written, in flow style on one line ("[['{event.node}'], rest]"). */
static void put_flow(const ynode *v, char *buf, size_t len)
{
    if (v->type == FL_YN_SCALAR) {
        bool q = v->style == FL_YS_SINGLE || v->style == FL_YS_DOUBLE;
        fl_text_add(buf, len, q ? "'%s'" : "%s", v->value);
        return;
    }
    fl_text_add(buf, len, v->type == FL_YN_SEQ ? "[" : "{");
    for (size_t i = 0; i < v->n; i++) {
        fl_text_add(buf, len, i ? ", " : "");
        if (v->type == FL_YN_MAP)
            fl_text_add(buf, len, "%s: ", v->keys[i]->value);
        put_flow(v->items[i], buf, len);
    }
    fl_text_add(buf, len, v->type == FL_YN_SEQ ? "]" : "}");
}

static char *one_line(const ynode *v)
{
    char buf[512] = "";
    put_flow(v, buf, sizeof buf);
    return strdup(buf);
}

static int load_fault(struct fl_scn_vctx *c, const ynode *it, struct fl_scn_fault *f)
{
    struct fl_scenario *s = c->s;
    const char *keys[64], *action_keys[FL_SCN_ACT_COUNT];
    size_t n_action;
    size_t n_keys = fault_keys(keys, ARRAY_LEN(keys), action_keys, &n_action);
    char kinds[256];
    const ynode *tk = NULL, *tv = NULL, *ak = NULL, *av = NULL;
    int rc;

    f->loc = it->loc;
    f->action.host = -1;
    f->action.target.host = f->action.target.task = -1;
    if ((rc = fl_scn_want(c, it, FL_YN_MAP, "a fault")) < 0)
        return rc;
    for (size_t i = 0; i < it->n; i++) {
        const char *k = it->keys[i]->value;
        bool known = false, is_action = false, is_trigger = false;
        for (size_t q = 0; q < n_keys; q++)
            known |= strcmp(k, keys[q]) == 0;
        for (size_t q = 0; q < n_action; q++)
            is_action |= strcmp(k, action_keys[q]) == 0;
        for (size_t q = 0; q < ARRAY_LEN(trigger_keys); q++)
            is_trigger |= strcmp(k, trigger_keys[q]) == 0;
        if (!known) {
            const char *sug = fl_suggest(k, keys, n_keys);
            bool kindish = false;
            for (size_t q = 0; q < n_action && sug; q++)
                kindish |= strcmp(sug, action_keys[q]) == 0;
            if (!sug) {
                bool has_action = false;
                for (size_t q = 0; q < it->n; q++)
                    for (size_t a = 0; a < n_action; a++)
                        has_action |= strcmp(it->keys[q]->value, action_keys[a]) == 0;
                kindish = !has_action;
            }
            if (kindish) {
                if (sug) {
                    fl_scn_verr(c, it->keys[i]->loc, "unknown fault kind '%s'", k);
                    return fl_scn_vsuggest(c, k, action_keys, n_action);
                }
                return fl_scn_verr(c, it->keys[i]->loc, "unknown fault kind '%s' (expected %s)", k,
                                   fl_fault_kind_list(kinds, sizeof kinds, " or "));
            }
            if (sug) {
                fl_scn_verr(c, it->keys[i]->loc, "unknown key '%s' in fault", k);
                return fl_scn_vsuggest(c, k, keys, n_keys);
            }
            char extra[128] = "";
            for (int q = 1; q < FL_SCN_ACT_COUNT; q++)
                for (size_t x = 0; fl_fault_kinds[q]->keys && fl_fault_kinds[q]->keys[x]; x++)
                    fl_text_add(extra, sizeof extra, "%s, ", fl_fault_kinds[q]->keys[x]);
            return fl_scn_verr(c, it->keys[i]->loc,
                               "unknown key '%s' in fault (expected a trigger: at, after or "
                               "on_log; a kind: %s; and %sfor, variant, optional)",
                               k, fl_fault_kind_list(kinds, sizeof kinds, " or "), extra);
        }
        if (is_trigger) {
            if (tk)
                return fl_scn_verr(c, it->keys[i]->loc,
                                   "fault has two triggers ('%s' and '%s'); use one", tk->value, k);
            tk = it->keys[i];
            tv = it->items[i];
        }
        if (is_action) {
            if (ak)
                return fl_scn_verr(c, it->keys[i]->loc,
                                   "fault has two kinds ('%s' and '%s'); write two faults",
                                   ak->value, k);
            ak = it->keys[i];
            av = it->items[i];
        }
    }
    if (!ak)
        return fl_scn_verr(c, it->loc, "fault has no kind (one of %s)",
                           fl_fault_kind_list(kinds, sizeof kinds, ", "));
    if (!tk)
        return fl_scn_verr(
            c, it->loc,
            "fault has no trigger (add at: <time>, after: {event: ...} or on_log: {match: ...})");
    if ((rc = load_trigger(c, tk, tv, &f->trigger)) < 0)
        return rc;

    struct fl_scn_action *a = &f->action;
    const struct fl_fault_kind *kd = fl_fault_kind_find(ak->value);
    a->loc = ak->loc;
    a->kind = kd->kind;
    c->ev_field = true;
    c->ev_trigger = f->trigger.kind;
    c->ev_seen = false;
    rc = kd->parse(c, it, ak, av, a);
    c->ev_field = false;
    if (rc < 0 || (rc = foreign_keys(c, it, kd)) < 0)
        return rc;
    if ((f->from_event = c->ev_seen) && !(f->as_written = one_line(av)))
        return -ENOMEM;

    const ynode *op = fl_scn_yaml_get(it, "optional", NULL);
    if (op && (rc = fl_scn_get_bool(c, op, "'optional'", &f->optional)) < 0)
        return rc;

    struct fl_scn_ynode *sk = NULL;
    const ynode *fo = fl_scn_yaml_get(it, "for", &sk);
    if (fo) {
        if (kd->no_for)
            return fl_scn_verr(c, sk->loc, "'for' does not apply to %s (%s)", kd->name, kd->no_for);
        if ((rc = fl_scn_get_duration(c, fo, "'for'", false, &f->for_ms)) < 0)
            return rc;
    }
    const ynode *va = fl_scn_yaml_get(it, "variant", &sk);
    if (va) {
        char msg[512];
        f->has_variant = true;
        if (va->type == FL_YN_SCALAR) {
            if ((rc = fl_scn_selector_parse(s, va->value, &f->variant, msg, sizeof msg)) < 0) {
                if (rc == -ENOMEM)
                    return rc;
                return fl_scn_verr(c, va->loc, "%s", msg);
            }
        } else if (va->type == FL_YN_MAP) {
            /* {key: value} or {key: [v1, v2]} */
            if (!(f->variant.text = strdup("")))
                return -ENOMEM;
            f->variant.loc = va->loc;
            for (size_t i = 0; i < va->n; i++) {
                const ynode *vals = va->items[i];
                size_t nv = vals->type == FL_YN_SEQ ? vals->n : 1;
                if (vals->type == FL_YN_MAP || (vals->type == FL_YN_SEQ && nv == 0))
                    return fl_scn_verr(c, vals->loc,
                                       "variant '%s' must be a value or a list of values",
                                       va->keys[i]->value);
                for (size_t q = 0; q < nv; q++) {
                    const ynode *one = vals->type == FL_YN_SEQ ? vals->items[q] : vals;
                    char term[512];
                    if ((rc = fl_scn_want(c, one, FL_YN_SCALAR, "a variant value")) < 0)
                        return rc;
                    snprintf(term, sizeof term, "%s=%s", va->keys[i]->value, one->value);
                    rc = fl_scn_selector_add_terms(s, term, &f->variant, false, msg, sizeof msg);
                    if (rc < 0)
                        return fl_scn_verr(c, rc == -ENOENT ? va->keys[i]->loc : one->loc, "%s",
                                           msg);
                    size_t ol = strlen(f->variant.text);
                    char *nt = realloc(f->variant.text, ol + strlen(term) + 2);
                    if (!nt)
                        return -ENOMEM;
                    if (ol)
                        nt[ol++] = ',';
                    strcpy(nt + ol, term);
                    f->variant.text = nt;
                }
            }
        } else {
            return fl_scn_verr(
                c, va->loc,
                "'variant' must be a selector ('legacy', 'k=v') or a mapping {key: value}");
        }
        f->variant.loc = va->loc;
    }
    return 0;
}

int fl_scn_load_faults(struct fl_scn_vctx *c, const ynode *fs)
{
    struct fl_scenario *s = c->s;
    int rc;
    if (!fs || fl_scn_yaml_is_null(fs))
        return 0;
    if ((rc = fl_scn_want(c, fs, FL_YN_SEQ, "'faults'")) < 0)
        return rc;
    if (!(s->faults = fl_scn_zalloc(c, fs->n, sizeof *s->faults)))
        return -ENOMEM;
    for (size_t i = 0; i < fs->n; i++) {
        s->n_faults++;
        if ((rc = load_fault(c, fs->items[i], &s->faults[i])) < 0)
            return rc;
    }
    return 0;
}
