/*
 * profile.c: loading and validating a soak profile.
 *
 * A profile is a scenario file with a top-level `soak:` block and no
 * `faults:`.  The scenario part is loaded by the ordinary loader from the
 * file's text with the soak block blanked out (spaces, newlines kept), so
 * its errors keep their file:line:column.  Each entry of soak.faults is then
 * checked by the ordinary fault loader (fl_scn_load_faults): for every
 * target it may draw, a fault {at: 0, KIND: TARGET, signal:, unsynced:, for: MIN} is
 * built from the entry's own YAML nodes (with `after:` instead of `at:` when
 * the entry draws the N-th event: its mapping, count: MIN), so an error
 * points at the entry.
 * What the drawn faults become is text (soak/draw.c renders them); the
 * profile keeps each entry's value as flow YAML, and its text without the
 * soak: and seed: lines for the files it writes.
 */
#include "harness/load/load.h"
#include "harness/soak/soak.h"
#include "harness/faults/kind.h"
#include "harness/sys/rundir.h"
#include "harness/load/sections.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* An entry's keys: every kind (harness/faults/kinds.c) and the keys only it
 * reads, then how many and for how long; n at most max. */
static size_t entry_keys(const char **keys, size_t max)
{
    static const char *const howmany[] = {"after", "every", "rate", "count", "for"};
    size_t n = 0;
    for (int k = 1; k < FL_SCN_ACT_COUNT; k++)
        keys[n++] = fl_fault_kinds[k]->name;
    for (int k = 1; k < FL_SCN_ACT_COUNT; k++)
        for (size_t q = 0; fl_fault_kinds[k]->keys && fl_fault_kinds[k]->keys[q] && n < max - 5;
             q++)
            keys[n++] = fl_fault_kinds[k]->keys[q];
    for (size_t q = 0; q < ARRAY_LEN(howmany) && n < max; q++)
        keys[n++] = howmany[q];
    return n;
}
static const char *const soak_keys[] = {"duration", "start", "max_faults", "faults"};

#define DEFAULT_MAX_FAULTS 20
#define MAX_DRAWS_PER_ENTRY 1000

/* ---- flow YAML out of a node ------------------------------------------- */

struct sbuf {
    char *p;
    size_t n, cap;
    bool oom;
};

static void sb_add(struct sbuf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 128;
        while (cap < b->n + n + 1)
            cap *= 2;
        char *q = realloc(b->p, cap);
        if (!q) {
            b->oom = true;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

static void sb_str(struct sbuf *b, const char *s)
{
    sb_add(b, s, strlen(s));
}

/* A scalar as YAML: plain when it is safe everywhere (also inside a flow
 * collection), else single-quoted. */
static void sb_scalar(struct sbuf *b, const char *v, bool plain_style)
{
    bool safe = *v &&
                strspn(v, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                          "0123456789_./%+-") == strlen(v) &&
                v[0] != '-';
    if (plain_style && !*v) {
        sb_str(b, "null");
        return;
    }
    if (safe) {
        sb_str(b, v);
        return;
    }
    sb_str(b, "'");
    for (const char *s = v; *s; s++) {
        if (*s == '\'')
            sb_str(b, "''");
        else
            sb_add(b, s, 1);
    }
    sb_str(b, "'");
}

static void sb_node(struct sbuf *b, const ynode *n)
{
    if (n->type == FL_YN_SCALAR) {
        sb_scalar(b, n->value, n->style == FL_YS_PLAIN);
        return;
    }
    sb_str(b, n->type == FL_YN_SEQ ? "[" : "{");
    for (size_t i = 0; i < n->n; i++) {
        if (i)
            sb_str(b, ", ");
        if (n->type == FL_YN_MAP) {
            sb_scalar(b, n->keys[i]->value, false);
            sb_str(b, ": ");
        }
        sb_node(b, n->items[i]);
    }
    sb_str(b, n->type == FL_YN_SEQ ? "]" : "}");
}

static char *node_yaml(const ynode *n)
{
    struct sbuf b = {0};
    sb_node(&b, n);
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    return b.p;
}

/* ---- lines of a top-level key ------------------------------------------ */

/* The byte range [*from, *to) of the lines of the top-level key that starts
 * at line_start: its line and every following line that is indented, blank
 * or a comment. */
static void key_lines(const char *buf, size_t len, size_t line_start, size_t *from, size_t *to)
{
    size_t i = line_start;
    *from = line_start;
    while (i < len && buf[i] != '\n')
        i++;
    while (i < len) {
        size_t next = i + 1;
        if (next >= len || !strchr(" \t#\r\n", buf[next]))
            break;
        i = next;
        while (i < len && buf[i] != '\n')
            i++;
    }
    *to = i < len ? i + 1 : len;
}

static size_t line_start_of(const char *buf, size_t off)
{
    while (off > 0 && buf[off - 1] != '\n')
        off--;
    return off;
}

/* ---- the soak block ---------------------------------------------------- */

struct synth {
    ynode **v;
    size_t n;
};

static ynode *synth_scalar(struct synth *sy, const char *value, struct fl_scn_loc loc)
{
    ynode *n = calloc(1, sizeof *n), **v = realloc(sy->v, (sy->n + 1) * sizeof *v);
    if (v)
        sy->v = v;
    if (!n || !v || !(n->value = strdup(value))) {
        if (n)
            free(n->value);
        free(n);
        return NULL;
    }
    n->type = FL_YN_SCALAR;
    n->style = FL_YS_PLAIN;
    n->len = strlen(value);
    n->loc = loc;
    sy->v[sy->n++] = n;
    return n;
}

static void synth_free(struct synth *sy)
{
    for (size_t i = 0; i < sy->n; i++) {
        free(sy->v[i]->value);
        free(sy->v[i]->items);
        free(sy->v[i]->keys);
        free(sy->v[i]);
    }
    free(sy->v);
}

/* A mapping built of nodes: keys[i]: vals[i] (kept by sy, not the nodes). */
static ynode *synth_map(struct synth *sy, struct fl_scn_loc loc, ynode *const *keys,
                        ynode *const *vals, size_t n)
{
    ynode *m = calloc(1, sizeof *m), **v = realloc(sy->v, (sy->n + 1) * sizeof *v);
    if (v)
        sy->v = v;
    if (!m || !v) {
        free(m);
        return NULL;
    }
    sy->v[sy->n++] = m;
    m->type = FL_YN_MAP;
    m->loc = loc;
    if (!(m->keys = calloc(n ? n : 1, sizeof *m->keys)) ||
        !(m->items = calloc(n ? n : 1, sizeof *m->items)))
        return NULL;
    for (size_t i = 0; i < n; i++) {
        m->keys[m->n] = keys[i];
        m->items[m->n++] = vals[i];
    }
    return m;
}

/* A fault mapping built of nodes: trigger (at: 0 when NULL), kind: value,
 * and the optional rest (nx at most 8). */
static ynode *synth_fault(struct synth *sy, struct fl_scn_loc loc, const ynode *trig_key,
                          const ynode *trig_val, const ynode *kind_key, const ynode *value,
                          const ynode *const *xkeys, const ynode *const *xvals, size_t nx,
                          const ynode *for_key, const ynode *for_val)
{
    ynode *keys[12], *vals[12];
    size_t n = 0;
    keys[n] = trig_key ? (ynode *)trig_key : synth_scalar(sy, "at", loc);
    vals[n++] = trig_val ? (ynode *)trig_val : synth_scalar(sy, "0", loc);
    if (!keys[0] || !vals[0])
        return NULL;
    keys[n] = (ynode *)kind_key;
    vals[n++] = (ynode *)value;
    for (size_t i = 0; i < nx && n < ARRAY_LEN(keys) - 1; i++) {
        keys[n] = (ynode *)xkeys[i];
        vals[n++] = (ynode *)xvals[i];
    }
    if (for_val) {
        keys[n] = (ynode *)for_key;
        vals[n++] = (ynode *)for_val;
    }
    return synth_map(sy, loc, keys, vals, n);
}

/* for: D or for: [MIN, MAX] */
static int load_for(struct fl_scn_vctx *c, const ynode *n, struct fl_soak_entry *e)
{
    int rc;
    e->has_for = true;
    if (n->type == FL_YN_SEQ) {
        if (n->n != 2)
            return fl_scn_verr(c, n->loc,
                               "soak fault 'for' must be a duration or a range [MIN, MAX] "
                               "of two durations, not a list of %zu",
                               n->n);
        if ((rc = fl_scn_get_duration(c, n->items[0], "'for'", false, &e->for_min_ms)) < 0 ||
            (rc = fl_scn_get_duration(c, n->items[1], "'for'", false, &e->for_max_ms)) < 0)
            return rc;
        if (e->for_max_ms < e->for_min_ms)
            return fl_scn_verr(c, n->items[1]->loc,
                               "soak fault 'for' range [%s, %s] ends before it "
                               "starts",
                               n->items[0]->value, n->items[1]->value);
        return 0;
    }
    if ((rc = fl_scn_get_duration(c, n, "'for'", false, &e->for_min_ms)) < 0)
        return rc;
    e->for_max_ms = e->for_min_ms;
    return 0;
}

/* every: D | rate: N/s|N/m|N/h | count: N or [MIN, MAX]; with after:, every: N
 * is a number of events and rate has no meaning */
static int load_howmany(struct fl_scn_vctx *c, const ynode *m, struct fl_soak_entry *e)
{
    const ynode *every = fl_scn_yaml_get(m, "every", NULL),
                *rate = fl_scn_yaml_get(m, "rate", NULL),
                *count = fl_scn_yaml_get(m, "count", NULL);
    int given = !!every + !!rate + !!count, rc;
    if (given != 1)
        return fl_scn_verr(c, m->loc,
                           given ? "soak fault has %s: give one of 'every', 'rate' and 'count'"
                                 : "soak fault needs how often: 'every: 10s' (mean interval), "
                                   "'rate: 6/m' or 'count: 2'",
                           "more than one of 'every', 'rate' and 'count'");
    if (every && e->after) {
        long x;
        char *end;
        if ((rc = fl_scn_want(c, every, FL_YN_SCALAR, "'every'")) < 0)
            return rc;
        x = strtol(every->value, &end, 10);
        if (end == every->value || *end || x < 1 || x > 1000000000L)
            return fl_scn_verr(c, every->loc,
                               "with 'after', 'every' is the mean number of events between "
                               "faults, a whole number like 10, not '%s'",
                               every->value);
        e->every_ms = x;
        return 0;
    }
    if (every)
        return fl_scn_get_duration(c, every, "'every'", false, &e->every_ms);
    if (rate && e->after)
        return fl_scn_verr(c, rate->loc,
                           "'rate' is faults per time; with 'after' give 'every: N' (the mean "
                           "number of events between faults) or 'count'");
    if (rate) {
        char *end;
        if ((rc = fl_scn_want(c, rate, FL_YN_SCALAR, "'rate'")) < 0)
            return rc;
        double x = strtod(rate->value, &end);
        int64_t unit = !strcmp(end, "/s")   ? 1000
                       : !strcmp(end, "/m") ? 60000
                       : !strcmp(end, "/h") ? 3600000
                                            : 0;
        if (end == rate->value || !unit || !(x > 0) || x > 1e6 || unit / x < 1)
            return fl_scn_verr(c, rate->loc,
                               "'rate' must be a number of faults per time like 6/m, "
                               "0.5/s or 20/h (at most one per millisecond), not '%s'",
                               rate->value);
        e->every_ms = (int64_t)(unit / x + 0.5);
        return 0;
    }
    if (count->type == FL_YN_SEQ) {
        if (count->n != 2)
            return fl_scn_verr(c, count->loc,
                               "'count' must be a number or a range [MIN, MAX], "
                               "not a list of %zu",
                               count->n);
        if ((rc = fl_scn_get_long(c, count->items[0], "'count'", 0, MAX_DRAWS_PER_ENTRY,
                                  &e->count_min)) < 0 ||
            (rc = fl_scn_get_long(c, count->items[1], "'count'", 0, MAX_DRAWS_PER_ENTRY,
                                  &e->count_max)) < 0)
            return rc;
        if (e->count_max < e->count_min)
            return fl_scn_verr(c, count->items[1]->loc,
                               "'count' range [%ld, %ld] ends before it starts", e->count_min,
                               e->count_max);
        return 0;
    }
    if ((rc = fl_scn_get_long(c, count, "'count'", 0, MAX_DRAWS_PER_ENTRY, &e->count_min)) < 0)
        return rc;
    e->count_max = e->count_min;
    return 0;
}

/*
 * after: {event: KIND, host:, job:, where:, count: N or [MIN, MAX]}: the
 * entry's faults fire on the N-th such event, N drawn in [MIN, MAX].  Its
 * keys but count go to e->after as flow YAML; *tk, *tv become the probe's
 * trigger: the same mapping with count: MIN (the fault loader checks the
 * rest).
 */
static int load_after(struct fl_scn_vctx *c, const ynode *key, const ynode *v,
                      struct fl_soak_entry *e, struct synth *sy, const ynode **tk, const ynode **tv)
{
    char b[64];
    int rc;
    if (v->type != FL_YN_MAP)
        return fl_scn_verr(c, v->loc,
                           "soak fault 'after' must be a mapping like {event: save.done, "
                           "host: w0, count: [1, 40]}, not %s",
                           fl_scn_describe(v, b, sizeof b));
    const ynode *count = fl_scn_yaml_get(v, "count", NULL);
    if (!count)
        return fl_scn_verr(c, v->loc,
                           "soak fault 'after' needs 'count: [MIN, MAX]': the N-th event, "
                           "N drawn in that range");
    if (count->type == FL_YN_SEQ) {
        if (count->n != 2)
            return fl_scn_verr(c, count->loc,
                               "'after' 'count' must be a number or a range [MIN, MAX], "
                               "not a list of %zu",
                               count->n);
        if ((rc = fl_scn_get_long(c, count->items[0], "'count'", 1, 1000000000L, &e->after_min)) <
                0 ||
            (rc = fl_scn_get_long(c, count->items[1], "'count'", 1, 1000000000L, &e->after_max)) <
                0)
            return rc;
        if (e->after_max < e->after_min)
            return fl_scn_verr(c, count->items[1]->loc,
                               "'count' range [%ld, %ld] ends before it starts", e->after_min,
                               e->after_max);
    } else {
        if ((rc = fl_scn_get_long(c, count, "'count'", 1, 1000000000L, &e->after_min)) < 0)
            return rc;
        e->after_max = e->after_min;
    }
    struct sbuf t = {0};
    ynode *keys[16], *vals[16];
    size_t n = 0;
    sb_str(&t, "");
    for (size_t i = 0; i < v->n && n < ARRAY_LEN(keys) - 1; i++) {
        if (!strcmp(v->keys[i]->value, "count"))
            continue;
        if (n)
            sb_str(&t, ", ");
        sb_scalar(&t, v->keys[i]->value, false);
        sb_str(&t, ": ");
        sb_node(&t, v->items[i]);
        keys[n] = v->keys[i];
        vals[n++] = v->items[i];
    }
    if (t.oom)
        return -ENOMEM;
    e->after = t.p;
    char min[32];
    snprintf(min, sizeof min, "%ld", e->after_min);
    if (!(keys[n] = synth_scalar(sy, "count", count->loc)) ||
        !(vals[n] = synth_scalar(sy, min, count->loc)))
        return -ENOMEM;
    n++;
    *tk = key;
    if (!(*tv = synth_map(sy, v->loc, keys, vals, n)))
        return -ENOMEM;
    return 0;
}

static int add_target(struct fl_soak_entry *e, const char *t)
{
    char **v = realloc(e->targets, (e->n_targets + 1) * sizeof *v);
    if (!v)
        return -ENOMEM;
    e->targets = v;
    struct sbuf b = {0};
    sb_scalar(&b, t, false);
    if (b.oom)
        return -ENOMEM;
    e->targets[e->n_targets++] = b.p;
    return 0;
}

/*
 * One entry: its kind, targets or value, how many, for.  Every fault it may
 * draw is appended to probes (checked by the fault loader afterwards).
 */
static int load_entry(struct fl_scn_vctx *c, const struct fl_scenario *base, const ynode *m,
                      struct fl_soak_entry *e, struct synth *sy, ynode *probes)
{
    int rc;
    char b[64];
    e->loc = m->loc;
    if (m->type != FL_YN_MAP)
        return fl_scn_verr(c, m->loc,
                           "a soak fault must be a mapping like {kill: [ps0, worker], "
                           "every: 10s, for: [1s, 3s]}, not %s",
                           fl_scn_describe(m, b, sizeof b));
    const char *keys[64];
    if ((rc = fl_scn_check_keys(c, m, keys, entry_keys(keys, ARRAY_LEN(keys)), "soak fault")) < 0)
        return rc;
    const ynode *kk = NULL, *kv = NULL;
    bool targeted = false;
    for (size_t i = 0; i < m->n; i++) {
        const char *k = m->keys[i]->value;
        const struct fl_fault_kind *kd = fl_fault_kind_find(k);
        if (!kd)
            continue;
        if (kk)
            return fl_scn_verr(c, m->keys[i]->loc,
                               "soak fault has two kinds ('%s' and '%s'); "
                               "write one entry per kind",
                               kk->value, k);
        kk = m->keys[i];
        kv = m->items[i];
        targeted = kd->soak_target;
    }
    if (!kk) {
        char kinds[256];
        return fl_scn_verr(c, m->loc, "soak fault needs a kind: %s",
                           fl_fault_kind_list(kinds, sizeof kinds, " or "));
    }
    snprintf(e->kind, sizeof e->kind, "%s", kk->value);
    /* the keys only some kind reads (signal, unsynced), as written */
    const ynode *xk[8], *xv[8];
    size_t nx = 0;
    for (int k = 1; k < FL_SCN_ACT_COUNT; k++)
        for (size_t q = 0; fl_fault_kinds[k]->keys && fl_fault_kinds[k]->keys[q] && nx < 8; q++) {
            ynode *key = NULL, *val = fl_scn_yaml_get(m, fl_fault_kinds[k]->keys[q], &key);
            if (val) {
                xk[nx] = key;
                xv[nx++] = val;
            }
        }
    ynode *fk = NULL, *fv = fl_scn_yaml_get(m, "for", &fk);
    ynode *ak = NULL, *av = fl_scn_yaml_get(m, "after", &ak);
    const ynode *trig_key = NULL, *trig_val = NULL;
    if (av && (rc = load_after(c, ak, av, e, sy, &trig_key, &trig_val)) < 0)
        return rc;
    if ((rc = load_howmany(c, m, e)) < 0)
        return rc;
    ynode *probe_for = NULL;
    if (fv) {
        if ((rc = load_for(c, fv, e)) < 0)
            return rc;
        char d[32];
        snprintf(d, sizeof d, "%" PRId64 "ms", e->for_min_ms);
        if (!(probe_for = synth_scalar(sy, d, fv->loc)))
            return -ENOMEM;
    }
    struct sbuf extra = {0};
    sb_str(&extra, "");
    for (size_t i = 0; i < nx; i++) {
        sb_str(&extra, ", ");
        sb_str(&extra, xk[i]->value);
        sb_str(&extra, ": ");
        sb_node(&extra, xv[i]);
    }
    if (extra.oom)
        return -ENOMEM;
    e->extra = extra.p;

    /* the alternatives, each a probe */
    const ynode *alts[256];
    size_t n_alts = 0;
    if (targeted) {
        if (kv->type == FL_YN_SEQ) {
            if (kv->n == 0)
                return fl_scn_verr(c, kv->loc, "'%s' needs at least one target to draw from",
                                   kk->value);
            if (kv->n > ARRAY_LEN(alts))
                return fl_scn_verr(c, kv->loc, "'%s' lists %zu targets; at most %zu", kk->value,
                                   kv->n, ARRAY_LEN(alts));
            for (size_t i = 0; i < kv->n; i++)
                alts[n_alts++] = kv->items[i];
        } else {
            alts[n_alts++] = kv;
        }
    } else {
        alts[n_alts++] = kv;
        if (!(e->value = node_yaml(kv)))
            return -ENOMEM;
    }
    for (size_t i = 0; i < n_alts; i++) {
        const ynode *a = alts[i];
        int job = -1;
        if (targeted && a->type == FL_YN_SCALAR && fl_scn_host_find(base, a->value) < 0)
            job = fl_scn_job_find(base, a->value);
        size_t n_expand = job >= 0 ? base->jobs[job].n_tasks : 1;
        for (size_t k = 0; k < n_expand; k++) {
            const ynode *val = a;
            if (job >= 0) {
                char t[160];
                snprintf(t, sizeof t, "%s:%zu", base->jobs[job].name, k);
                if (!(val = synth_scalar(sy, t, a->loc)))
                    return -ENOMEM;
            }
            if (targeted && val->type == FL_YN_SCALAR && (rc = add_target(e, val->value)) < 0)
                return rc;
            ynode *f =
                synth_fault(sy, m->loc, trig_key, trig_val, kk, val, xk, xv, nx, fk, probe_for);
            ynode **items = f ? realloc(probes->items, (probes->n + 1) * sizeof *items) : NULL;
            if (!items)
                return -ENOMEM;
            probes->items = items;
            probes->items[probes->n++] = f;
        }
    }
    return 0;
}

static int no_duration(struct fl_scn_vctx *c, const ynode *key)
{
    return fl_scn_verr(c, key->loc,
                       "'soak' needs 'duration' (faults are drawn at times below it, "
                       "e.g. duration: 20s)");
}

static int load_soak(struct fl_scn_vctx *c, struct fl_soak_profile *p, const ynode *key,
                     const ynode *v, const char *blank)
{
    struct fl_scenario *base = p->base;
    int rc;
    char b[64];
    if (v->type != FL_YN_MAP)
        return fl_scn_verr(c, v->loc, "'soak' must be a mapping with duration and faults, not %s",
                           fl_scn_describe(v, b, sizeof b));
    if ((rc = fl_scn_check_keys(c, v, soak_keys, ARRAY_LEN(soak_keys), "soak")) < 0)
        return rc;
    const ynode *d = fl_scn_yaml_get(v, "duration", NULL), *st = fl_scn_yaml_get(v, "start", NULL),
                *mf = fl_scn_yaml_get(v, "max_faults", NULL),
                *fs = fl_scn_yaml_get(v, "faults", NULL);
    if (!d && st)
        return no_duration(c, key);
    if (d)
        p->duration_line = d->loc.line;
    if (d && (rc = fl_scn_get_duration(c, d, "soak 'duration'", false, &p->duration_ms)) < 0)
        return rc;
    if (d && p->duration_ms > base->timeout_ms)
        return fl_scn_verr(c, d->loc,
                           "soak 'duration' %s is longer than the scenario's timeout "
                           "(%" PRId64 "ms): faults would be drawn after the run is stopped",
                           d->value, base->timeout_ms);
    if (st && (rc = fl_scn_get_duration(c, st, "soak 'start'", true, &p->start_ms)) < 0)
        return rc;
    if (st && p->start_ms >= p->duration_ms)
        return fl_scn_verr(c, st->loc, "soak 'start' %s is not before its 'duration' %s", st->value,
                           d->value);
    p->max_faults = DEFAULT_MAX_FAULTS;
    if (mf) {
        long x;
        if ((rc = fl_scn_get_long(c, mf, "'max_faults'", 1, 10000, &x)) < 0)
            return rc;
        p->max_faults = (size_t)x;
    }
    if (!fs || fl_scn_yaml_is_null(fs) || (fs->type == FL_YN_SEQ && fs->n == 0))
        return fl_scn_verr(c, fs ? fs->loc : key->loc,
                           "'soak' needs 'faults': a list of the faults "
                           "it may draw, e.g. - {kill: [ps0, ps1], every: 10s, for: [1s, 3s]}");
    if ((rc = fl_scn_want(c, fs, FL_YN_SEQ, "soak 'faults'")) < 0)
        return rc;
    if (!(p->entries = calloc(fs->n, sizeof *p->entries)))
        return -ENOMEM;

    /* the probes go through the fault loader, on a copy of the scenario */
    struct synth sy = {0};
    ynode probes = {.type = FL_YN_SEQ, .loc = fs->loc};
    for (size_t i = 0; i < fs->n && rc == 0; i++) {
        p->n_entries++;
        rc = load_entry(c, base, fs->items[i], &p->entries[i], &sy, &probes);
    }
    if (rc == 0) {
        struct fl_scenario *saved = c->s;
        char err2[16];
        struct fl_scenario *scratch;
        /* a second copy: the fault loader fills scratch->faults */
        rc = fl_scenario_load_mem(base->path, blank, c->len, &scratch, err2, sizeof err2);
        (void)rc;
        rc = -ENOMEM;
        if (scratch) {
            c->s = scratch;
            rc = fl_scn_load_faults(c, &probes);
            c->s = saved;
            fl_scenario_free(scratch);
        }
    }
    free(probes.items);
    synth_free(&sy);
    /* an entry that draws times needs the range of times */
    for (size_t i = 0; i < p->n_entries && rc == 0 && !d; i++)
        if (!p->entries[i].after)
            rc = no_duration(c, key);
    return rc;
}

/* ---- entry points ------------------------------------------------------ */

void fl_soak_profile_free(struct fl_soak_profile *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->n_entries; i++) {
        struct fl_soak_entry *e = &p->entries[i];
        for (size_t k = 0; k < e->n_targets; k++)
            free(e->targets[k]);
        free(e->targets);
        free(e->value);
        free(e->extra);
        free(e->after);
    }
    free(p->entries);
    fl_scenario_free(p->base);
    free(p->text);
    free(p->path);
    free(p);
}

int fl_soak_profile_load(const char *path, struct fl_soak_profile **out, char *err, size_t errlen)
{
    struct fl_soak_profile *p = calloc(1, sizeof *p);
    struct fl_scn_ydoc doc = {0};
    char *buf = NULL, *blank = NULL;
    size_t len = 0;
    int rc;

    *out = NULL;
    if (!p || !(p->path = strdup(path))) {
        snprintf(err, errlen, "%s: out of memory", path);
        rc = -ENOMEM;
        goto cleanup;
    }
    if ((rc = fl_read_file(path, &buf, &len)) < 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(-rc));
        goto cleanup;
    }
    if ((rc = fl_scn_yaml_parse(path, buf, len, &doc, err, errlen)) < 0)
        goto cleanup;
    struct fl_scn_vctx c = {.file = path, .buf = buf, .len = len, .err = err, .errlen = errlen};
    const ynode *root = doc.root;
    if (!root || root->type != FL_YN_MAP) {
        rc = fl_scn_verr(&c, root ? root->loc : (struct fl_scn_loc){1, 1},
                         "a soak profile is a scenario mapping with a 'soak:' block");
        goto cleanup;
    }
    ynode *sk = NULL, *sv = fl_scn_yaml_get(root, "soak", &sk);
    ynode *fk = NULL, *seedk = NULL;
    fl_scn_yaml_get(root, "faults", &fk);
    fl_scn_yaml_get(root, "seed", &seedk);
    if (!sk) {
        rc = fl_scn_verr(&c, root->loc,
                         "not a soak profile: no 'soak:' block (what to draw: "
                         "scenarios/README.md, soak profiles)");
        goto cleanup;
    }
    if (fk) {
        rc = fl_scn_verr(&c, fk->loc,
                         "a soak profile draws its faults from 'soak:'; it cannot "
                         "have 'faults:'");
        goto cleanup;
    }
    if (sk->loc.col != 1 || (seedk && seedk->loc.col != 1)) {
        rc = fl_scn_verr(&c, sk->loc,
                         "a soak profile's top level must be a block mapping "
                         "(one key per line, at column 1)");
        goto cleanup;
    }
    /* the scenario: soak lines blanked (places stay), loaded as usual */
    size_t from, to;
    key_lines(buf, len, line_start_of(buf, sk->start), &from, &to);
    if (!(blank = malloc(len + 1))) {
        rc = -ENOMEM;
        goto cleanup;
    }
    memcpy(blank, buf, len);
    blank[len] = 0;
    for (size_t i = from; i < to; i++)
        if (blank[i] != '\n')
            blank[i] = ' ';
    if ((rc = fl_scenario_load_mem(path, blank, len, &p->base, err, errlen)) < 0)
        goto cleanup;
    /* the text of the files it writes: without the soak and seed lines */
    size_t sf = from, st = to, df = len, dt = len;
    if (seedk)
        key_lines(buf, len, line_start_of(buf, seedk->start), &df, &dt);
    if (!(p->text = malloc(len + 2))) {
        rc = -ENOMEM;
        goto cleanup;
    }
    size_t n = 0;
    for (size_t i = 0; i < len; i++)
        if (!(i >= sf && i < st) && !(i >= df && i < dt))
            p->text[n++] = buf[i];
    if (n && p->text[n - 1] != '\n')
        p->text[n++] = '\n';
    p->text[n] = 0;
    c.s = p->base;
    if ((rc = load_soak(&c, p, sk, sv, blank)) < 0)
        goto cleanup;
    *out = p;
    p = NULL;
    rc = 0;
cleanup:
    if (rc == -ENOMEM && !strstr(err, "memory"))
        snprintf(err, errlen, "%s: out of memory", path);
    fl_scn_yaml_free(&doc);
    free(buf);
    free(blank);
    fl_soak_profile_free(p);
    return rc;
}
