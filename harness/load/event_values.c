/*
 * event_values.c: a fault aimed by the event that fires it.  A fault
 * triggered by `after:` may write a host or target as '{event.KEY}'
 * (`kill: '{event.node}'`, `partition: [['{event.node}'], rest]`): the value
 * of attribute KEY of that event.  At load the kind's parser read the fault
 * with FL_SCN_HOST_EVENT in those places, checking everything else
 * (harness/load/faults.c, scenario/values.c).  When the event comes the
 * scheduler calls fl_scn_fault_resolve: the scenario's text is parsed again,
 * each '{event.KEY}' in the fault's kind is replaced by the event's value,
 * and the kind's parser reads the result into a new action, with every check
 * a load makes (a host in two partition groups, a `rest` left empty).  A
 * missing attribute or a value that is no host of the scenario is said as
 * "event 'E' gave KEY=VALUE, which is no host of this scenario".
 */
#include "harness/faults/kind.h"
#include "harness/load/load.h"
#include "harness/scenario/load_ctx.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct subst {
    const struct fl_scenario *s;
    const char *ev_kind;
    fl_scn_ev_get_fn get;
    void *ctx;
    char gave[512]; /* "node=b, peer=c": what was put in, for messages */
    char *err;
    size_t errlen;
};

/* Is v a task as a target names one ("chief", "job:index")?  The kind's
 * parser says whether the field takes one. */
static bool task_like(const struct fl_scenario *s, const char *v)
{
    if (!strcmp(v, "chief"))
        return true;
    const char *colon = strchr(v, ':');
    char job[128];
    if (!colon || (size_t)(colon - v) >= sizeof job)
        return false;
    snprintf(job, sizeof job, "%.*s", (int)(colon - v), v);
    return fl_scn_job_find(s, job) >= 0;
}

/* Replaces every '{event.KEY}' below n by the event's value. */
static int substitute(struct subst *x, struct fl_scn_ynode *n)
{
    if (n->type != FL_YN_SCALAR) {
        for (size_t i = 0; i < n->n; i++) {
            int rc = substitute(x, n->items[i]);
            if (rc < 0)
                return rc;
        }
        return 0;
    }
    char key[128];
    if (!fl_scn_event_value_key(n->value, key, sizeof key))
        return 0;
    const char *v = x->get(x->ctx, key);
    if (!v) {
        snprintf(x->err, x->errlen, "event '%s' has no attribute '%s' (for '%s')", x->ev_kind, key,
                 n->value);
        return -EINVAL;
    }
    if (fl_scn_host_find(x->s, v) < 0 && !task_like(x->s, v)) {
        snprintf(x->err, x->errlen, "event '%s' gave %s=%s, which is no host of this scenario",
                 x->ev_kind, key, v);
        return -EINVAL;
    }
    size_t g = strlen(x->gave);
    snprintf(x->gave + g, sizeof x->gave - g, "%s%s=%s", g ? ", " : "", key, v);
    char *nv = strdup(v);
    if (!nv)
        return -ENOMEM;
    free(n->value);
    n->value = nv;
    n->len = strlen(nv);
    n->style = FL_YS_SINGLE; /* a value, never a word like `rest` */
    return 0;
}

int fl_scn_fault_resolve(const struct fl_scenario *s, size_t fault, const char *ev_kind,
                         fl_scn_ev_get_fn get, void *ctx, struct fl_scn_action *out, char *err,
                         size_t errlen)
{
    const struct fl_scn_fault *f = &s->faults[fault];
    const struct fl_fault_kind *kd = fl_fault_kind_of(&f->action);
    struct fl_scn_ydoc doc = {0};
    char perr[1024] = "";
    memset(out, 0, sizeof *out);
    int rc = fl_scn_yaml_parse(s->path, s->text, s->text_len, &doc, perr, sizeof perr);
    const struct fl_scn_ynode *fs = rc == 0 && doc.root && doc.root->type == FL_YN_MAP
                                        ? fl_scn_yaml_get(doc.root, "faults", NULL)
                                        : NULL;
    struct fl_scn_ynode *it =
        fs && fs->type == FL_YN_SEQ && fault < fs->n ? fs->items[fault] : NULL;
    struct fl_scn_ynode *key = NULL, *val = it ? fl_scn_yaml_get(it, kd->name, &key) : NULL;
    if (!val) {
        snprintf(err, errlen, "the scenario's text no longer holds the fault (%s)",
                 perr[0] ? perr : "no such item");
        fl_scn_yaml_free(&doc);
        return -EINVAL;
    }
    struct subst x = {
        .s = s, .ev_kind = ev_kind, .get = get, .ctx = ctx, .err = err, .errlen = errlen};
    if ((rc = substitute(&x, val)) < 0) {
        fl_scn_yaml_free(&doc);
        return rc;
    }
    /* The kind's parser reads the scenario (lookups) and never changes it. */
    struct fl_scn_vctx c = {.file = s->path,
                            .buf = s->text,
                            .len = s->text_len,
                            .err = perr,
                            .errlen = sizeof perr,
                            .s = (struct fl_scenario *)s};
    out->kind = f->action.kind;
    out->loc = key->loc;
    out->host = -1;
    out->target.host = out->target.task = -1;
    rc = kd->parse(&c, it, key, val, out);
    fl_scn_yaml_free(&doc);
    if (rc < 0) {
        fl_scn_action_free(out);
        /* "file:line:col: msg" -> "msg": the caller names the fault */
        const char *m = perr;
        size_t pl = strlen(s->path);
        if (!strncmp(m, s->path, pl) && m[pl] == ':') {
            const char *sp = strstr(m + pl, ": ");
            if (sp)
                m = sp + 2;
        }
        snprintf(err, errlen, "event '%s' gave %s: %s", ev_kind, x.gave, m);
        return rc;
    }
    return 0;
}
