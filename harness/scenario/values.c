/*
 * values.c: the scenario validator's vocabulary, shared by
 * load/load.c (hosts, cluster, run) and load/faults.c (faults, expect):
 * error messages with file:line:column and suggestions, the scalar types
 * (strings, durations, whole numbers, booleans, signals, relative paths), places
 * inside scalars, host/job/task/target references, host sets and regexes.
 * Stateless; everything works on one struct fl_scn_vctx.
 */
#include "harness/scenario/load_ctx.h"
#include "harness/base/suggest.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- errors and basic types -------------------------------------------- */

__attribute__((format(printf, 3, 4))) int fl_scn_verr(struct fl_scn_vctx *c, struct fl_scn_loc l,
                                                      const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (l.line > 0)
        snprintf(c->err, c->errlen, "%s:%d:%d: %s", c->file, l.line, l.col, msg);
    else
        snprintf(c->err, c->errlen, "%s: %s", c->file, msg);
    return -EINVAL;
}

/* Appends " (did you mean 'x'?)" to the error already in c->err. */
int fl_scn_vsuggest(struct fl_scn_vctx *c, const char *word, const char *const *cands, size_t n)
{
    fl_suggest_append(c->err, c->errlen, word, cands, n);
    return -EINVAL;
}

/* "a mapping", "a list", "'text'" for messages. */
const char *fl_scn_describe(const ynode *n, char *buf, size_t len)
{
    if (!n || fl_scn_yaml_is_null(n))
        return "empty";
    if (n->type == FL_YN_MAP)
        return "a mapping";
    if (n->type == FL_YN_SEQ)
        return "a list";
    if (n->len > 40)
        snprintf(buf, len, "'%.37s...'", n->value);
    else
        snprintf(buf, len, "'%s'", n->value);
    return buf;
}

int fl_scn_want(struct fl_scn_vctx *c, const ynode *n, enum fl_scn_ynode_type t, const char *what)
{
    char b[64];
    if (n->type == t && !(t == FL_YN_SCALAR && fl_scn_yaml_is_null(n)))
        return 0;
    return fl_scn_verr(c, n->loc, "%s must be %s, not %s", what,
                       t == FL_YN_MAP   ? "a mapping"
                       : t == FL_YN_SEQ ? "a list"
                                        : "a single value",
                       fl_scn_describe(n, b, sizeof b));
}

int fl_scn_want_scalar(struct fl_scn_vctx *c, const ynode *n, const char *key)
{
    char q[64];
    snprintf(q, sizeof q, "'%s'", key);
    return fl_scn_want(c, n, FL_YN_SCALAR, q);
}

int fl_scn_get_signal(struct fl_scn_vctx *c, const ynode *n, int *sig)
{
    int sn = fl_scn_signal_parse(n->value);
    if (sn < 0) {
        const char *names[64];
        size_t nn = fl_scn_signal_names(names, 64);
        fl_scn_verr(c, n->loc, "unknown signal '%s'", n->value);
        return fl_scn_vsuggest(c, n->value, names, nn);
    }
    *sig = sn;
    return 0;
}

/* Rejects keys of map that are not in keys[0..n) (and not accepted by extra). */
int fl_scn_check_keys(struct fl_scn_vctx *c, const ynode *map, const char *const *keys, size_t n,
                      const char *where)
{
    for (size_t i = 0; i < map->n; i++) {
        const char *k = map->keys[i]->value;
        bool ok = false;
        for (size_t j = 0; j < n && !ok; j++)
            ok = strcmp(k, keys[j]) == 0;
        if (!ok) {
            fl_scn_verr(c, map->keys[i]->loc, "unknown key '%s' in %s", k, where);
            if (fl_suggest(k, keys, n))
                return fl_scn_vsuggest(c, k, keys, n);
            size_t used = strlen(c->err);
            for (size_t j = 0; j < n && used < c->errlen; j++) {
                int w = snprintf(c->err + used, c->errlen - used, "%s%s%s",
                                 j ? ", " : " (expected ", keys[j], j + 1 == n ? ")" : "");
                if (w < 0)
                    break;
                used += (size_t)w;
            }
            return -EINVAL;
        }
    }
    return 0;
}

int fl_scn_dup_str(struct fl_scn_vctx *c, const char *v, char **out)
{
    if (!(*out = strdup(v))) {
        snprintf(c->err, c->errlen, "%s: out of memory", c->file);
        return -ENOMEM;
    }
    return 0;
}

void *fl_scn_zalloc(struct fl_scn_vctx *c, size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    if (!p)
        snprintf(c->err, c->errlen, "%s: out of memory", c->file);
    return p;
}

int fl_scn_get_str(struct fl_scn_vctx *c, const ynode *n, const char *what, char **out)
{
    int rc = fl_scn_want(c, n, FL_YN_SCALAR, what);
    return rc < 0 ? rc : fl_scn_dup_str(c, n->value, out);
}

int fl_scn_get_duration(struct fl_scn_vctx *c, const ynode *n, const char *what, bool allow_zero,
                        int64_t *ms)
{
    int rc;
    if ((rc = fl_scn_want(c, n, FL_YN_SCALAR, what)) < 0)
        return rc;
    rc = fl_scn_duration_parse(n->value, ms);
    if (rc == -ERANGE)
        return fl_scn_verr(c, n->loc, "%s '%s' is too long", what, n->value);
    if (rc < 0) {
        if (strchr(n->value, '.'))
            return fl_scn_verr(
                c, n->loc,
                "%s must be a duration like 250ms, 2s, 1.5s or 1m (whole milliseconds), not '%s'",
                what, n->value);
        return fl_scn_verr(c, n->loc, "%s must be a duration like 250ms, 2s, 1.5s or 1m, not '%s'",
                           what, n->value);
    }
    if (!allow_zero && *ms == 0)
        return fl_scn_verr(c, n->loc, "%s must be longer than 0", what);
    return 0;
}

int fl_scn_get_either(struct fl_scn_vctx *c, const ynode *n, const char *what, const char *first,
                      const char *second, const char *choices, bool *is_second)
{
    int rc = fl_scn_want(c, n, FL_YN_SCALAR, what);
    if (rc < 0)
        return rc;
    if (strcmp(n->value, first) && strcmp(n->value, second))
        return fl_scn_verr(c, n->loc, "%s must be %s, not '%s'", what, choices, n->value);
    *is_second = !strcmp(n->value, second);
    return 0;
}

int fl_scn_get_signed_ms(struct fl_scn_vctx *c, const ynode *n, const char *what, int64_t *ms)
{
    int rc = fl_scn_want(c, n, FL_YN_SCALAR, what);
    if (rc < 0)
        return rc;
    bool neg = n->value[0] == '-';
    int64_t v;
    if (fl_scn_duration_parse(n->value + (neg || n->value[0] == '+'), &v) < 0)
        return fl_scn_verr(c, n->loc, "%s must be a duration like 5s or -250ms, not '%s'", what,
                           n->value);
    *ms = neg ? -v : v;
    return 0;
}

int fl_scn_get_drift(struct fl_scn_vctx *c, const ynode *n, const char *what, int64_t *ppm)
{
    int rc = fl_scn_want(c, n, FL_YN_SCALAR, what);
    if (rc < 0)
        return rc;
    if (fl_scn_drift_parse(n->value, ppm) < 0)
        return fl_scn_verr(c, n->loc, "%s must be a rate like 10%%, -0.5%% or 200ppm, not '%s'",
                           what, n->value);
    if (*ppm <= -500000 || *ppm > 10000000)
        return fl_scn_verr(c, n->loc, "%s must be above -50%% and at most 1000%%, not '%s'", what,
                           n->value);
    return 0;
}

int fl_scn_get_long(struct fl_scn_vctx *c, const ynode *n, const char *what, long min, long max,
                    long *out)
{
    char *end;
    int rc;
    if ((rc = fl_scn_want(c, n, FL_YN_SCALAR, what)) < 0)
        return rc;
    errno = 0;
    long v = strtol(n->value, &end, 10);
    if (!isdigit((unsigned char)n->value[n->value[0] == '-']) || *end || (errno && errno != ERANGE))
        return fl_scn_verr(c, n->loc, "%s must be a whole number, not '%s'", what, n->value);
    if (errno == ERANGE)
        return fl_scn_verr(c, n->loc, "%s must be between %ld and %ld, not %s", what, min, max,
                           n->value);
    if (v < min || v > max)
        return fl_scn_verr(c, n->loc, "%s must be between %ld and %ld, not %ld", what, min, max, v);
    *out = v;
    return 0;
}

int fl_scn_get_bool(struct fl_scn_vctx *c, const ynode *n, const char *what, bool *out)
{
    int rc;
    if ((rc = fl_scn_want(c, n, FL_YN_SCALAR, what)) < 0)
        return rc;
    static const char *const t[] = {"true", "yes", "on"}, *const f[] = {"false", "no", "off"};
    for (size_t i = 0; i < 3; i++) {
        if (strcasecmp(n->value, t[i]) == 0) {
            *out = true;
            return 0;
        }
        if (strcasecmp(n->value, f[i]) == 0) {
            *out = false;
            return 0;
        }
    }
    return fl_scn_verr(c, n->loc, "%s must be true or false, not '%s'", what, n->value);
}

/* The one normaliser of every path a scenario names (workdir, shared, disk
 * dirs and files, corrupt/truncate globs, expect files, checkpoint dir and
 * prefix): "//" and "." components collapse, a trailing '/' goes, and a
 * ".." component is refused (it could lead out of the place the path is
 * meant for, and "/srv/../sys" or "a/../.." would get past the rules that
 * look at the path's text).  The rules are then applied to what this
 * returns, so "//" is "/" and "/./sys" is "/sys" to them. */
int fl_scn_norm_path(struct fl_scn_vctx *c, const ynode *n, const char *what, unsigned how,
                     char *out, size_t len)
{
    int rc;
    if ((rc = fl_scn_want(c, n, FL_YN_SCALAR, what)) < 0)
        return rc;
    const char *p = n->value;
    bool abs = p[0] == '/';
    if (abs && (how & FL_SCN_PATH_REL))
        return fl_scn_verr(c, n->loc, "%s '%s' must be relative to the workdir", what, p);
    if (!abs && (how & FL_SCN_PATH_ABS))
        return fl_scn_verr(c, n->loc, "%s '%s' must be an absolute path", what, p);
    size_t o = 0;
    if (abs && len)
        out[o++] = '/';
    for (const char *q = p; *q;) {
        size_t l = strcspn(q, "/");
        if (l == 2 && q[0] == '.' && q[1] == '.')
            return fl_scn_verr(c, n->loc, "%s '%s' must not contain '..'", what, p);
        if (l && !(l == 1 && q[0] == '.')) {
            if (o + l + 2 > len)
                return fl_scn_verr(c, n->loc, "%s '%.40s...' is too long", what, p);
            if (o && out[o - 1] != '/')
                out[o++] = '/';
            memcpy(out + o, q, l);
            o += l;
        }
        q += l;
        while (*q == '/')
            q++;
    }
    if (o >= len)
        return fl_scn_verr(c, n->loc, "%s '%.40s...' is too long", what, p);
    out[o] = 0;
    if (*p && !o && !(how & FL_SCN_PATH_DOT))
        return fl_scn_verr(c, n->loc, "%s '%s' names the workdir itself, not a path inside it",
                           what, p);
    return 0;
}

int fl_scn_get_path(struct fl_scn_vctx *c, const ynode *n, const char *what, unsigned how,
                    char **out)
{
    char buf[PATH_MAX];
    int rc = fl_scn_norm_path(c, n, what, how, buf, sizeof buf);
    return rc < 0 ? rc : fl_scn_dup_str(c, buf, out);
}

/* Line:column of a byte offset in the source. */
struct fl_scn_loc fl_scn_loc_at(struct fl_scn_vctx *c, size_t off)
{
    struct fl_scn_loc l = {1, 1};
    for (size_t i = 0; i < off && i < c->len; i++) {
        if (c->buf[i] == '\n') {
            l.line++;
            l.col = 1;
        } else if (((unsigned char)c->buf[i] & 0xc0) != 0x80) {
            l.col++;
        }
    }
    return l;
}

/*
 * Where in the file is byte range [off, off+len) of scalar n's value?
 * Placeholders and braces are written the same in every scalar style, so
 * the k-th occurrence of that text in the value is the k-th occurrence in
 * the source between the scalar's marks.  Falls back to the scalar start.
 */
struct fl_scn_loc fl_scn_loc_in_scalar(struct fl_scn_vctx *c, const ynode *n, size_t off,
                                       size_t len)
{
    size_t k = 0;
    const char *needle = n->value + off;
    for (size_t i = 0; i < off; i++)
        if (strncmp(n->value + i, needle, len) == 0)
            k++;
    for (size_t i = n->start; i + len <= n->end && i + len <= c->len; i++) {
        if (strncmp(c->buf + i, needle, len) != 0)
            continue;
        if (k-- == 0)
            return fl_scn_loc_at(c, i);
    }
    return n->loc;
}

/* ---- hosts ------------------------------------------------------------- */

static int host_names(struct fl_scn_vctx *c, const char ***out)
{
    const char **v = fl_scn_zalloc(c, c->s->n_hosts + 1, sizeof *v);
    if (!v)
        return -ENOMEM;
    for (size_t i = 0; i < c->s->n_hosts; i++)
        v[i] = c->s->hosts[i].name;
    *out = v;
    return 0;
}

/* ---- values from the triggering event ------------------------------------ */

const char *fl_scn_event_value_key(const char *v, char *key, size_t keylen)
{
    static const char pre[] = "{event.";
    size_t n = strlen(v);
    if (strncmp(v, pre, sizeof pre - 1) || n < sizeof pre + 1 || v[n - 1] != '}')
        return NULL;
    const char *k = v + sizeof pre - 1;
    size_t kl = n - (sizeof pre - 1) - 1;
    /* an event attribute's key: one word, no space, '=' or brace (docs/events.md) */
    for (size_t i = 0; i < kl; i++)
        if (isspace((unsigned char)k[i]) || strchr("={}'\"", k[i]))
            return NULL;
    if (kl + 1 > keylen)
        return NULL;
    memcpy(key, k, kl);
    key[kl] = 0;
    return key;
}

bool fl_scn_event_value_like(const char *v)
{
    /* no host, job or task name has a brace: such a value means the event */
    return strchr(v, '{') || strchr(v, '}');
}

/* A host or target '{event.KEY}' in a fault's kind: 1 when n is one (the
 * fault's trigger allows it), 0 when n is something else, or an error. */
static int event_value(struct fl_scn_vctx *c, const ynode *n, const char *what)
{
    char key[128];
    if (!c->ev_field || n->type != FL_YN_SCALAR || !fl_scn_event_value_like(n->value))
        return 0;
    if (!fl_scn_event_value_key(n->value, key, sizeof key))
        return fl_scn_verr(c, n->loc,
                           "bad value '%s' in %s: a value taken from the triggering event is "
                           "written '{event.KEY}', the whole value (KEY an attribute of the "
                           "event, e.g. '{event.node}' for 'leader.is node=b')",
                           n->value, what);
    if (c->ev_trigger != FL_SCN_TRIG_EVENT)
        return fl_scn_verr(c, n->loc,
                           "'%s' in %s takes a value from the event that triggers the fault: "
                           "only a fault triggered by 'after:' has one (this one has '%s:')",
                           n->value, what, fl_scn_trigger_kind_name(c->ev_trigger));
    c->ev_seen = true;
    return 1;
}

/* Resolves a host name node; 'what' says where ("fault", "shared path"). */
int fl_scn_resolve_host(struct fl_scn_vctx *c, const ynode *n, const char *what, int *out)
{
    int rc;
    if ((rc = fl_scn_want(c, n, FL_YN_SCALAR, what)) < 0)
        return rc;
    if ((rc = event_value(c, n, what)) != 0) {
        *out = FL_SCN_HOST_EVENT;
        return rc < 0 ? rc : 0;
    }
    int h = fl_scn_host_find(c->s, n->value);
    if (h >= 0) {
        *out = h;
        return 0;
    }
    const char **names;
    if ((rc = host_names(c, &names)) < 0)
        return rc;
    fl_scn_verr(c, n->loc, "unknown host '%s' in %s", n->value, what);
    fl_scn_vsuggest(c, n->value, names, c->s->n_hosts);
    free(names);
    return -EINVAL;
}

/* A list of host names (or a single name) into a hostset; no duplicates. */
int fl_scn_load_hostset(struct fl_scn_vctx *c, const ynode *n, const char *what,
                        struct fl_scn_hostset *hs)
{
    const ynode *one[1] = {n};
    const ynode *const *items = one;
    size_t cnt = 1;
    int rc;

    if (n->type == FL_YN_SEQ) {
        items = (const ynode *const *)n->items;
        cnt = n->n;
        if (cnt == 0)
            return fl_scn_verr(c, n->loc, "%s is empty", what);
    } else if ((rc = fl_scn_want(c, n, FL_YN_SCALAR, what)) < 0) {
        return rc;
    }
    if (!(hs->hosts = fl_scn_zalloc(c, cnt, sizeof *hs->hosts)))
        return -ENOMEM;
    for (size_t i = 0; i < cnt; i++) {
        int h;
        if ((rc = fl_scn_resolve_host(c, items[i], what, &h)) < 0)
            return rc;
        for (size_t q = 0; q < hs->n && h >= 0; q++)
            if (hs->hosts[q] == h)
                return fl_scn_verr(c, items[i]->loc, "host '%s' is listed twice in %s",
                                   items[i]->value, what);
        hs->hosts[hs->n++] = h;
    }
    return 0;
}

/* ---- regexes ----------------------------------------------------------- */

/*
 * glibc's regcomp copies the tree of a repeated expression once per
 * repetition ("(a{200}){200}" holds 40000 copies of a), so nested counted
 * repetitions take memory exponential in their nesting.  Estimate the size
 * of the expanded tree and refuse expressions far beyond any log pattern;
 * also refuse stacked repetition operators ("a+*"), undefined in POSIX.
 */
static int check_regex_shape(struct fl_scn_vctx *c, const ynode *n, const char *what,
                             const char *re)
{
    enum { MAX_DEPTH = 32 };
    const double max_cost = 200000;
    double cost[MAX_DEPTH + 1] = {0}, last = 0;
    int depth = 0;
    bool prev_rep = false, in_bracket = false;

    if (strlen(re) > 4096)
        return fl_scn_verr(c, n->loc, "bad regex in %s: longer than 4096 characters", what);
    for (const char *p = re; *p; p++) {
        bool rep = false;
        double mult = 0;
        if (in_bracket) {
            if (*p == '[' && (p[1] == ':' || p[1] == '.' || p[1] == '=')) {
                char close[3] = {p[1], ']', 0};
                const char *e = strstr(p + 2, close);
                if (e)
                    p = e + 1;
            } else if (*p == ']') {
                in_bracket = false;
            }
            continue;
        }
        switch (*p) {
        case '\\':
            if (p[1])
                p++;
            last = 1;
            cost[depth] += 1;
            break;
        case '[':
            in_bracket = true;
            if (p[1] == '^')
                p++;
            if (p[1] == ']')
                p++;
            last = 1;
            cost[depth] += 1;
            break;
        case '(':
            if (depth == MAX_DEPTH)
                return fl_scn_verr(c, n->loc, "bad regex in %s: groups nested deeper than %d", what,
                                   MAX_DEPTH);
            cost[++depth] = 0;
            break;
        case ')':
            if (depth > 0) {
                last = cost[depth] + 1;
                cost[--depth] += last;
            }
            break;
        case '*':
        case '?':
            rep = true;
            mult = 1;
            break;
        case '+':
            rep = true;
            mult = 2;
            break;
        case '{':
            if (isdigit((unsigned char)p[1])) {
                char *end;
                long lo = strtol(p + 1, &end, 10), hi = lo;
                if (*end == ',')
                    hi = isdigit((unsigned char)end[1]) ? strtol(end + 1, &end, 10) : lo + 1;
                rep = true;
                mult = (double)(hi > lo ? hi : lo) + 1;
                const char *close = strchr(p, '}');
                if (close)
                    p = close;
                break;
            }
            last = 1; /* a literal brace */
            cost[depth] += 1;
            break;
        default:
            last = 1;
            cost[depth] += 1;
            break;
        }
        if (rep) {
            if (prev_rep)
                return fl_scn_verr(
                    c, n->loc,
                    "bad regex in %s: stacked repetition operators (like 'a+*') are not supported",
                    what);
            cost[depth] += last * (mult - 1);
            last *= mult;
        }
        prev_rep = rep;
        if (cost[depth] > max_cost || last > max_cost)
            return fl_scn_verr(c, n->loc,
                               "bad regex in %s: too complex (nested repetitions expand too far)",
                               what);
    }
    return 0;
}

/*
 * Compiles a regex node into r (POSIX ERE with glibc's \w \W \s \S \b \B \< \>).
 * As people write them out of habit, \d and \D are rewritten to [0-9] and
 * [^0-9], and inside a bracket \d, \w, \s to 0-9, [:alnum:]_, [:space:].
 */
int fl_scn_load_regex(struct fl_scn_vctx *c, const ynode *n, const char *what,
                      struct fl_scn_regex *r)
{
    int rc;
    if ((rc = fl_scn_want(c, n, FL_YN_SCALAR, what)) < 0)
        return rc;
    size_t len = strlen(n->value);
    char *tr = malloc(len * 6 + 1), *o = tr;
    bool in_bracket = false;
    if (!tr)
        return -ENOMEM;
    for (const char *p = n->value; *p; p++) {
        if (!in_bracket && p[0] == '\\' && (p[1] == 'd' || p[1] == 'D')) {
            o = stpcpy(o, p[1] == 'd' ? "[0-9]" : "[^0-9]");
            p++;
            continue;
        }
        if (!in_bracket && p[0] == '\\' && p[1]) {
            *o++ = *p++;
            *o++ = *p;
            continue;
        }
        if (!in_bracket && *p == '[') {
            in_bracket = true;
            *o++ = *p;
            if (p[1] == '^')
                *o++ = *++p;
            if (p[1] == ']')
                *o++ = *++p;
            continue;
        }
        if (in_bracket && p[0] == '\\' && strchr("dws", p[1]) && p[1]) {
            o = stpcpy(o, p[1] == 'd' ? "0-9" : p[1] == 'w' ? "[:alnum:]_" : "[:space:]");
            p++;
            continue;
        }
        if (in_bracket && p[0] == '\\' && strchr("DWS", p[1]) && p[1]) {
            free(tr);
            return fl_scn_verr(c, n->loc, "bad regex in %s: '\\%c' is not supported inside [...]",
                               what, p[1]);
        }
        if (in_bracket && *p == '[' && (p[1] == ':' || p[1] == '.' || p[1] == '=')) {
            char close = p[1];
            const char *e = p + 2;
            while (*e && !(e[0] == close && e[1] == ']'))
                e++;
            if (*e) {
                memcpy(o, p, (size_t)(e + 2 - p));
                o += e + 2 - p;
                p = e + 1;
                continue;
            }
        }
        if (in_bracket && *p == ']')
            in_bracket = false;
        *o++ = *p;
    }
    *o = 0;
    if ((rc = check_regex_shape(c, n, what, tr)) < 0) {
        free(tr);
        return rc;
    }
    rc = regcomp(&r->re, tr, REG_EXTENDED | REG_NEWLINE);
    free(tr);
    if (rc != 0) {
        char msg[256];
        regerror(rc, &r->re, msg, sizeof msg);
        regfree(&r->re);
        return fl_scn_verr(c, n->loc, "bad regex in %s: %s", what, msg);
    }
    if (!(r->src = strdup(n->value))) {
        regfree(&r->re);
        return -ENOMEM;
    }
    r->loc = n->loc;
    return 0;
}

void fl_scn_regex_free(struct fl_scn_regex *r)
{
    if (r->src) {
        regfree(&r->re);
        free(r->src);
        r->src = NULL;
    }
}

/* ---- jobs, tasks, targets, events --------------------------------------- */

static int job_names(struct fl_scn_vctx *c, const char ***out)
{
    const char **v = fl_scn_zalloc(c, c->s->n_jobs + 1, sizeof *v);
    if (!v)
        return -ENOMEM;
    for (size_t i = 0; i < c->s->n_jobs; i++)
        v[i] = c->s->jobs[i].name;
    *out = v;
    return 0;
}

static int unknown_job(struct fl_scn_vctx *c, struct fl_scn_loc l, const char *name,
                       const char *where)
{
    const char **names;
    int rc;
    if ((rc = job_names(c, &names)) < 0)
        return rc;
    fl_scn_verr(c, l, "unknown job '%s' in %s", name, where);
    fl_scn_vsuggest(c, name, names, c->s->n_jobs);
    free(names);
    return -EINVAL;
}

/* "job" or "job:task" -> job index and task (-1 when not given). */
int fl_scn_resolve_job_task(struct fl_scn_vctx *c, const ynode *n, const char *where, int *job,
                            int *task)
{
    int rc;
    if ((rc = fl_scn_want(c, n, FL_YN_SCALAR, where)) < 0)
        return rc;
    const char *colon = strchr(n->value, ':');
    char name[128];
    size_t nl = colon ? (size_t)(colon - n->value) : strlen(n->value);
    snprintf(name, sizeof name, "%.*s", (int)nl, n->value);
    int j = fl_scn_job_find(c->s, name);
    if (j < 0)
        return unknown_job(c, n->loc, name, where);
    *job = j;
    *task = -1;
    if (colon) {
        char *end;
        long t = strtol(colon + 1, &end, 10);
        if (!isdigit((unsigned char)colon[1]) || *end)
            return fl_scn_verr(c, n->loc, "bad task '%s' in %s (expected job:index, e.g. %s:0)",
                               n->value, where, name);
        if (t < 0 || (size_t)t >= c->s->jobs[j].n_tasks)
            return fl_scn_verr(c, n->loc,
                               "task %s out of range in '%s': job '%s' has %zu task%s (0..%zu)",
                               colon + 1, n->value, name, c->s->jobs[j].n_tasks,
                               c->s->jobs[j].n_tasks == 1 ? "" : "s", c->s->jobs[j].n_tasks - 1);
        *task = (int)t;
    }
    return 0;
}

int fl_scn_final_not_here(struct fl_scn_vctx *c, const ynode *n, int job, const char *where)
{
    return fl_scn_verr(c, n->loc,
                       "'%s' is a final check (final:, line %d), which runs once faults no "
                       "longer fire: name a host or a task of cluster: in %s",
                       n->value, c->s->jobs[job].loc.line, where);
}

/* A fault target: a host name, "job:task" or "chief". */
int fl_scn_resolve_target(struct fl_scn_vctx *c, const ynode *n, const char *kind,
                          struct fl_scn_target *t)
{
    struct fl_scenario *s = c->s;
    int rc;
    char what[64];
    snprintf(what, sizeof what, "%s target", kind);
    if ((rc = fl_scn_want(c, n, FL_YN_SCALAR, what)) < 0)
        return rc;
    t->loc = n->loc;
    if ((rc = event_value(c, n, what)) != 0) {
        t->kind = FL_SCN_TGT_HOST;
        t->host = FL_SCN_HOST_EVENT;
        t->task = -1;
        return rc < 0 ? rc : 0;
    }
    if (strcmp(n->value, "chief") == 0) {
        t->kind = FL_SCN_TGT_TASK;
        t->task = s->chief_task;
        t->host = s->tasks[s->chief_task].host;
        t->chief = true;
        return 0;
    }
    if (strchr(n->value, ':')) {
        int j, k;
        if ((rc = fl_scn_resolve_job_task(c, n, what, &j, &k)) < 0)
            return rc;
        if (s->jobs[j].final)
            return fl_scn_final_not_here(c, n, j, what);
        t->kind = FL_SCN_TGT_TASK;
        t->task = fl_scn_task_index(s, j, k);
        t->host = s->tasks[t->task].host;
        return 0;
    }
    int h = fl_scn_host_find(s, n->value);
    if (h >= 0) {
        t->kind = FL_SCN_TGT_HOST;
        t->host = h;
        t->task = -1;
        return 0;
    }
    int j = fl_scn_job_find(s, n->value);
    if (j >= 0 && s->jobs[j].final)
        return fl_scn_final_not_here(c, n, j, what);
    if (j >= 0)
        return fl_scn_verr(
            c, n->loc, "'%s' is a job; a %s target is a host, job:task (e.g. '%s:0') or 'chief'",
            n->value, kind, n->value);
    const char **names = fl_scn_zalloc(c, s->n_hosts + 1, sizeof *names);
    if (!names)
        return -ENOMEM;
    for (size_t i = 0; i < s->n_hosts; i++)
        names[i] = s->hosts[i].name;
    names[s->n_hosts] = "chief";
    fl_scn_verr(c, n->loc, "unknown host '%s' in %s target", n->value, kind);
    fl_scn_vsuggest(c, n->value, names, s->n_hosts + 1);
    free(names);
    return -EINVAL;
}
