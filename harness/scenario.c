/*
 * scenario.c: loads a scenario file and validates it into struct
 * fl_scenario (scenario.h; the format is documented in scenarios/README.md).
 *
 * Two passes over the file: scenario_yaml.c builds a node tree with line:
 * column marks, then the functions below walk it section by section, in an
 * order where every section only refers to sections already loaded:
 * top-level keys, name/about/seed/timeout/workdir, hosts, variants,
 * cluster, run (commands, env, ports, chief), shared, faults, expect.  The
 * first problem stops the load with "file:line:column: message"; nothing
 * outside the returned struct is touched, so the caller has created nothing
 * when validation fails.
 *
 * Invariant of a loaded scenario: every index is in range, every regex is
 * compiled, every template uses only known placeholders, and the struct
 * owns all its memory (fl_scenario_free releases a partly built one too).
 */
#include "harness/scenario.h"
#include "harness/scenario_yaml.h"
#include "harness/suggest.h"
#include "harness/template.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct fl_scn_ynode ynode;

struct vctx {
    const char *file;
    const char *buf;
    size_t len;
    char *err;
    size_t errlen;
    struct fl_scenario *s;
    const ynode *run;           /* the run: mapping (or NULL) */
};

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

static const char *const builtin_placeholders[] = {
    "job", "task", "host", "addr", "port", "chief", "run_id", "seed", "workdir", "bin",
    "scenario_dir",
};

static const char *const action_keys[] = {
    "kill", "pause", "restart", "replace", "crash_host", "partition", "limit", "disk", "link",
};

static const char *const trigger_keys[] = {"at", "after", "on_log"};

/* ---- errors and basic types -------------------------------------------- */

__attribute__((format(printf, 3, 4)))
static int verr(struct vctx *c, struct fl_scn_loc l, const char *fmt, ...)
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
static int vsuggest(struct vctx *c, const char *word, const char *const *cands, size_t n)
{
    fl_suggest_append(c->err, c->errlen, word, cands, n);
    return -EINVAL;
}

/* "a mapping", "a list", "'text'" for messages. */
static const char *describe(const ynode *n, char *buf, size_t len)
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

static int want(struct vctx *c, const ynode *n, enum fl_scn_ynode_type t, const char *what)
{
    char b[64];
    if (n->type == t && !(t == FL_YN_SCALAR && fl_scn_yaml_is_null(n)))
        return 0;
    return verr(c, n->loc, "%s must be %s, not %s", what,
                t == FL_YN_MAP ? "a mapping" : t == FL_YN_SEQ ? "a list" : "a single value",
                describe(n, b, sizeof b));
}

/* Rejects keys of map that are not in keys[0..n) (and not accepted by extra). */
static int check_keys(struct vctx *c, const ynode *map, const char *const *keys, size_t n,
                      const char *where)
{
    for (size_t i = 0; i < map->n; i++) {
        const char *k = map->keys[i]->value;
        bool ok = false;
        for (size_t j = 0; j < n && !ok; j++)
            ok = strcmp(k, keys[j]) == 0;
        if (!ok) {
            verr(c, map->keys[i]->loc, "unknown key '%s' in %s", k, where);
            if (fl_suggest(k, keys, n))
                return vsuggest(c, k, keys, n);
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

static int dup_str(struct vctx *c, const char *v, char **out)
{
    if (!(*out = strdup(v))) {
        snprintf(c->err, c->errlen, "%s: out of memory", c->file);
        return -ENOMEM;
    }
    return 0;
}

static void *zalloc(struct vctx *c, size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    if (!p)
        snprintf(c->err, c->errlen, "%s: out of memory", c->file);
    return p;
}

static int get_str(struct vctx *c, const ynode *n, const char *what, char **out)
{
    int rc = want(c, n, FL_YN_SCALAR, what);
    return rc < 0 ? rc : dup_str(c, n->value, out);
}

static int get_duration(struct vctx *c, const ynode *n, const char *what, bool allow_zero,
                        int64_t *ms)
{
    int rc;
    if ((rc = want(c, n, FL_YN_SCALAR, what)) < 0)
        return rc;
    rc = fl_scn_duration_parse(n->value, ms);
    if (rc == -ERANGE)
        return verr(c, n->loc, "%s '%s' is too long", what, n->value);
    if (rc < 0) {
        if (strchr(n->value, '.'))
            return verr(c, n->loc,
                        "%s must be a duration like 250ms, 2s, 1.5s or 1m (whole milliseconds), not '%s'",
                        what, n->value);
        return verr(c, n->loc, "%s must be a duration like 250ms, 2s, 1.5s or 1m, not '%s'",
                    what, n->value);
    }
    if (!allow_zero && *ms == 0)
        return verr(c, n->loc, "%s must be longer than 0", what);
    return 0;
}

static int get_long(struct vctx *c, const ynode *n, const char *what, long min, long max,
                    long *out)
{
    char *end;
    int rc;
    if ((rc = want(c, n, FL_YN_SCALAR, what)) < 0)
        return rc;
    errno = 0;
    long v = strtol(n->value, &end, 10);
    if (!isdigit((unsigned char)n->value[n->value[0] == '-']) || *end || errno)
        return verr(c, n->loc, "%s must be a whole number, not '%s'", what, n->value);
    if (v < min || v > max)
        return verr(c, n->loc, "%s must be between %ld and %ld, not %ld", what, min, max, v);
    *out = v;
    return 0;
}

static int get_bool(struct vctx *c, const ynode *n, const char *what, bool *out)
{
    int rc;
    if ((rc = want(c, n, FL_YN_SCALAR, what)) < 0)
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
    return verr(c, n->loc, "%s must be true or false, not '%s'", what, n->value);
}

/* Names: hosts [A-Za-z0-9][A-Za-z0-9_-]{0,62}; jobs [a-z][a-z0-9_]*. */
static bool valid_host_name(const char *n)
{
    size_t l = strlen(n);
    if (l == 0 || l > 63 || !isalnum((unsigned char)n[0]))
        return false;
    for (size_t i = 0; i < l; i++)
        if (!isalnum((unsigned char)n[i]) && n[i] != '-' && n[i] != '_')
            return false;
    return true;
}

static bool valid_ident(const char *n, bool upper_ok)
{
    if (!(islower((unsigned char)n[0]) || n[0] == '_' || (upper_ok && isupper((unsigned char)n[0]))))
        return false;
    for (const char *p = n; *p; p++)
        if (!(islower((unsigned char)*p) || isdigit((unsigned char)*p) || *p == '_' ||
              (upper_ok && isupper((unsigned char)*p))))
            return false;
    return strlen(n) <= 63;
}

/* A relative path without ".." components. */
static int check_rel_path(struct vctx *c, const ynode *n, const char *what)
{
    const char *p = n->value;
    if (p[0] == '/')
        return verr(c, n->loc, "%s '%s' must be relative to the workdir", what, p);
    for (const char *q = p; *q;) {
        size_t l = strcspn(q, "/");
        if (l == 2 && q[0] == '.' && q[1] == '.')
            return verr(c, n->loc, "%s '%s' must not contain '..'", what, p);
        q += l;
        while (*q == '/')
            q++;
    }
    return 0;
}

/* Line:column of a byte offset in the source. */
static struct fl_scn_loc loc_at(struct vctx *c, size_t off)
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
static struct fl_scn_loc loc_in_scalar(struct vctx *c, const ynode *n, size_t off, size_t len)
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
            return loc_at(c, i);
    }
    return n->loc;
}

/* ---- hosts ------------------------------------------------------------- */

static const char *const reserved_names[] = {"all", "chief", "files", "events", "checkpoint"};

static int host_names(struct vctx *c, const char ***out)
{
    const char **v = zalloc(c, c->s->n_hosts + 1, sizeof *v);
    if (!v)
        return -ENOMEM;
    for (size_t i = 0; i < c->s->n_hosts; i++)
        v[i] = c->s->hosts[i].name;
    *out = v;
    return 0;
}

/* Resolves a host name node; 'what' says where ("fault", "shared path"). */
static int resolve_host(struct vctx *c, const ynode *n, const char *what, int *out)
{
    int rc;
    if ((rc = want(c, n, FL_YN_SCALAR, what)) < 0)
        return rc;
    int h = fl_scn_host_find(c->s, n->value);
    if (h >= 0) {
        *out = h;
        return 0;
    }
    const char **names;
    if ((rc = host_names(c, &names)) < 0)
        return rc;
    verr(c, n->loc, "unknown host '%s' in %s", n->value, what);
    vsuggest(c, n->value, names, c->s->n_hosts);
    free(names);
    return -EINVAL;
}

static int load_host_options(struct vctx *c, struct fl_scn_host *h, const ynode *opt)
{
    static const char *const keys[] = {"disk", "clock_offset"};
    static const char *const disk_keys[] = {"size", "dirs", "files"};
    char where[128];
    int rc;

    if (fl_scn_yaml_is_null(opt))
        return 0;
    snprintf(where, sizeof where, "options of host '%s'", h->name);
    if ((rc = want(c, opt, FL_YN_MAP, where)) < 0 ||
        (rc = check_keys(c, opt, keys, ARRAY_LEN(keys), where)) < 0)
        return rc;
    const ynode *co = fl_scn_yaml_get(opt, "clock_offset", NULL);
    if (co) {
        bool neg = co->type == FL_YN_SCALAR && co->value[0] == '-';
        int64_t ms;
        if ((rc = want(c, co, FL_YN_SCALAR, "'clock_offset'")) < 0)
            return rc;
        if (fl_scn_duration_parse(co->value + neg, &ms) < 0)
            return verr(c, co->loc, "'clock_offset' must be a duration like 5s or -250ms, not '%s'",
                        co->value);
        h->clock_offset_ms = neg ? -ms : ms;
        h->clock_offset_set = true;
    }
    const ynode *disk = fl_scn_yaml_get(opt, "disk", NULL);
    if (!disk || fl_scn_yaml_is_null(disk))
        return 0;
    snprintf(where, sizeof where, "disk of host '%s'", h->name);
    if ((rc = want(c, disk, FL_YN_MAP, where)) < 0 ||
        (rc = check_keys(c, disk, disk_keys, ARRAY_LEN(disk_keys), where)) < 0)
        return rc;
    const ynode *size = fl_scn_yaml_get(disk, "size", NULL);
    if (size) {
        if ((rc = want(c, size, FL_YN_SCALAR, "'size'")) < 0)
            return rc;
        if (fl_scn_size_parse(size->value, &h->disk_size) < 0)
            return verr(c, size->loc, "disk 'size' must be a size like 4096, 512K, 64M or 1G, not '%s'",
                        size->value);
        if (h->disk_size == 0)
            return verr(c, size->loc, "disk size must be larger than 0 (omit it for no limit)");
        if (h->disk_size < 64 * 1024)
            return verr(c, size->loc, "disk size %s is too small (at least 64K)", size->value);
    }
    const ynode *dirs = fl_scn_yaml_get(disk, "dirs", NULL);
    if (dirs && !fl_scn_yaml_is_null(dirs)) {
        if ((rc = want(c, dirs, FL_YN_SEQ, "'dirs'")) < 0)
            return rc;
        if (!(h->dirs = zalloc(c, dirs->n, sizeof *h->dirs)))
            return -ENOMEM;
        h->n_dirs = dirs->n;
        for (size_t i = 0; i < dirs->n; i++) {
            const ynode *d = dirs->items[i];
            if ((rc = get_str(c, d, "a disk dir", &h->dirs[i].path)) < 0 ||
                (rc = check_rel_path(c, d, "disk dir")) < 0)
                return rc;
            h->dirs[i].loc = d->loc;
        }
    }
    const ynode *files = fl_scn_yaml_get(disk, "files", NULL);
    if (files && !fl_scn_yaml_is_null(files)) {
        if ((rc = want(c, files, FL_YN_MAP, "'files'")) < 0)
            return rc;
        if (!(h->files = zalloc(c, files->n, sizeof *h->files)))
            return -ENOMEM;
        h->n_files = files->n;
        for (size_t i = 0; i < files->n; i++) {
            const ynode *k = files->keys[i], *v = files->items[i];
            struct fl_scn_file *f = &h->files[i];
            f->loc = k->loc;
            if ((rc = check_rel_path(c, k, "disk file")) < 0 ||
                (rc = dup_str(c, k->value, &f->path)) < 0)
                return rc;
            if (!*k->value)
                return verr(c, k->loc, "disk file path must not be empty");
            if (fl_scn_yaml_is_null(v) && v->type == FL_YN_SCALAR) {
                if ((rc = dup_str(c, "", &f->content)) < 0)
                    return rc;
            } else {
                char what[300];
                snprintf(what, sizeof what, "content of file '%s'", k->value);
                if ((rc = get_str(c, v, what, &f->content)) < 0)
                    return rc;
                f->len = v->len;
            }
        }
    }
    return 0;
}

static int add_host(struct vctx *c, const ynode *name, const ynode *opt)
{
    struct fl_scenario *s = c->s;
    struct fl_scn_host *h = &s->hosts[s->n_hosts];
    int rc;

    if ((rc = want(c, name, FL_YN_SCALAR, "a host name")) < 0)
        return rc;
    if (!valid_host_name(name->value))
        return verr(c, name->loc,
                    "bad host name '%s' (letters, digits, '-' and '_', starting with a letter or digit, at most 63)",
                    name->value);
    for (size_t i = 0; i < ARRAY_LEN(reserved_names); i++)
        if (strcmp(name->value, reserved_names[i]) == 0)
            return verr(c, name->loc, "'%s' is reserved and cannot name a host", name->value);
    int prev = fl_scn_host_find(s, name->value);
    if (prev >= 0)
        return verr(c, name->loc, "duplicate host '%s' (first at line %d column %d)",
                    name->value, s->hosts[prev].loc.line, s->hosts[prev].loc.col);
    if ((rc = dup_str(c, name->value, &h->name)) < 0)
        return rc;
    h->loc = name->loc;
    s->n_hosts++;
    return load_host_options(c, h, opt);
}

static int load_hosts(struct vctx *c, const ynode *hosts, struct fl_scn_loc top)
{
    struct fl_scenario *s = c->s;
    char b[64];
    int rc;

    if (!hosts)
        return verr(c, top, "missing 'hosts' (a list of host names, e.g. hosts: [ps0, w0])");
    if (hosts->type == FL_YN_SCALAR)
        return verr(c, hosts->loc, "'hosts' must be a list of host names or a mapping, not %s",
                    describe(hosts, b, sizeof b));
    if (hosts->n == 0)
        return verr(c, hosts->loc, "'hosts' is empty: a scenario needs at least one host");
    if (!(s->hosts = zalloc(c, hosts->n, sizeof *s->hosts)))
        return -ENOMEM;
    for (size_t i = 0; i < hosts->n; i++) {
        if (hosts->type == FL_YN_SEQ)
            rc = add_host(c, hosts->items[i], NULL);
        else
            rc = add_host(c, hosts->keys[i], hosts->items[i]);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* ---- variants ---------------------------------------------------------- */

static bool is_builtin_placeholder(const char *n)
{
    for (size_t i = 0; i < ARRAY_LEN(builtin_placeholders); i++)
        if (strcmp(n, builtin_placeholders[i]) == 0)
            return true;
    return false;
}

static bool valid_value(const char *v)
{
    if (!*v)
        return false;
    for (const char *p = v; *p; p++)
        if (!isalnum((unsigned char)*p) && !strchr("._+-", *p))
            return false;
    return true;
}

static int load_variants(struct vctx *c, const ynode *vars)
{
    struct fl_scenario *s = c->s;
    int rc;

    if (!vars || fl_scn_yaml_is_null(vars))
        return 0;
    if ((rc = want(c, vars, FL_YN_MAP, "'variants'")) < 0)
        return rc;
    if (!(s->dims = zalloc(c, vars->n, sizeof *s->dims)))
        return -ENOMEM;
    size_t total = 1;
    for (size_t i = 0; i < vars->n; i++) {
        const ynode *k = vars->keys[i], *v = vars->items[i];
        struct fl_scn_dim *d = &s->dims[s->n_dims];
        if (!valid_ident(k->value, false))
            return verr(c, k->loc, "bad variant key '%s' (lower-case letters, digits and '_', not starting with a digit)",
                        k->value);
        if (is_builtin_placeholder(k->value))
            return verr(c, k->loc, "variant key '%s' is a built-in placeholder; choose another name",
                        k->value);
        if ((rc = dup_str(c, k->value, &d->key)) < 0)
            return rc;
        d->loc = k->loc;
        s->n_dims++;
        char what[128];
        snprintf(what, sizeof what, "variant '%s'", k->value);
        if ((rc = want(c, v, FL_YN_SEQ, what)) < 0)
            return rc;
        if (v->n == 0)
            return verr(c, v->loc, "variant '%s' has no values", k->value);
        if (!(d->values = zalloc(c, v->n, sizeof *d->values)))
            return -ENOMEM;
        for (size_t j = 0; j < v->n; j++) {
            const ynode *val = v->items[j];
            if ((rc = want(c, val, FL_YN_SCALAR, "a variant value")) < 0)
                return rc;
            if (!valid_value(val->value))
                return verr(c, val->loc, "bad variant value '%s' (letters, digits, '.', '_', '+', '-')",
                            val->value);
            if (strcmp(val->value, "all") == 0 || strcmp(val->value, "default") == 0)
                return verr(c, val->loc, "'%s' cannot be a variant value (it is a selector)",
                            val->value);
            for (size_t q = 0; q < d->n_values; q++)
                if (strcmp(d->values[q], val->value) == 0)
                    return verr(c, val->loc, "duplicate value '%s' in variant '%s'", val->value,
                                k->value);
            if ((rc = dup_str(c, val->value, &d->values[d->n_values])) < 0)
                return rc;
            d->n_values++;
        }
        total *= d->n_values;
        if (total > 4096)
            return verr(c, k->loc, "too many variants (more than 4096 combinations)");
    }
    return 0;
}

/* ---- cluster ----------------------------------------------------------- */

static int load_cluster(struct vctx *c, const ynode *cl, struct fl_scn_loc top)
{
    struct fl_scenario *s = c->s;
    int rc;

    if (!cl)
        return verr(c, top, "missing 'cluster' (job name -> list of hosts, e.g. cluster: {worker: [w0]})");
    if ((rc = want(c, cl, FL_YN_MAP, "'cluster'")) < 0)
        return rc;
    if (cl->n == 0)
        return verr(c, cl->loc, "'cluster' has no jobs");
    if (!(s->jobs = zalloc(c, cl->n, sizeof *s->jobs)))
        return -ENOMEM;
    size_t total = 0;
    for (size_t i = 0; i < cl->n; i++) {
        const ynode *k = cl->keys[i], *v = cl->items[i];
        struct fl_scn_job *j = &s->jobs[s->n_jobs];
        if (!valid_ident(k->value, false) || k->value[0] == '_')
            return verr(c, k->loc, "bad job name '%s' (lower-case letters, digits and '_', starting with a letter)",
                        k->value);
        for (size_t r = 0; r < ARRAY_LEN(reserved_names); r++)
            if (strcmp(k->value, reserved_names[r]) == 0 && strcmp(k->value, "chief") != 0)
                return verr(c, k->loc, "'%s' is reserved and cannot name a job", k->value);
        int h = fl_scn_host_find(s, k->value);
        if (h >= 0)
            return verr(c, k->loc, "job '%s' has the name of a host (line %d); names of jobs and hosts must differ",
                        k->value, s->hosts[h].loc.line);
        if ((rc = dup_str(c, k->value, &j->name)) < 0)
            return rc;
        j->loc = k->loc;
        s->n_jobs++;
        char what[128];
        snprintf(what, sizeof what, "job '%s'", k->value);
        if (fl_scn_yaml_is_null(v) || (v->type == FL_YN_SEQ && v->n == 0))
            return verr(c, fl_scn_yaml_is_null(v) ? k->loc : v->loc,
                        "job '%s' has no tasks (list its hosts, e.g. %s: [h0])", k->value, k->value);
        if ((rc = want(c, v, FL_YN_SEQ, what)) < 0)
            return rc;
        if (!(j->task_hosts = zalloc(c, v->n, sizeof *j->task_hosts)))
            return -ENOMEM;
        for (size_t t = 0; t < v->n; t++) {
            if ((rc = resolve_host(c, v->items[t], what, &j->task_hosts[t])) < 0)
                return rc;
            j->n_tasks++;
        }
        j->first_task = total;
        total += j->n_tasks;
    }
    /* Variant keys must not shadow <job>_hosts / <job>_count. */
    for (size_t d = 0; d < s->n_dims; d++)
        for (size_t j = 0; j < s->n_jobs; j++) {
            size_t jl = strlen(s->jobs[j].name);
            const char *k = s->dims[d].key;
            if (strncmp(k, s->jobs[j].name, jl) == 0 &&
                (strcmp(k + jl, "_hosts") == 0 || strcmp(k + jl, "_count") == 0))
                return verr(c, s->dims[d].loc,
                            "variant key '%s' is a built-in placeholder of job '%s'; choose another name",
                            k, s->jobs[j].name);
        }
    /* Flat tasks, chief. */
    if (!(s->tasks = zalloc(c, total, sizeof *s->tasks)))
        return -ENOMEM;
    s->n_tasks = total;
    for (size_t j = 0, t = 0; j < s->n_jobs; j++)
        for (size_t i = 0; i < s->jobs[j].n_tasks; i++, t++) {
            s->tasks[t].job = (int)j;
            s->tasks[t].index = (int)i;
            s->tasks[t].host = s->jobs[j].task_hosts[i];
        }
    int cj = fl_scn_job_find(s, "chief");
    if (cj < 0)
        cj = fl_scn_job_find(s, "worker");
    if (cj < 0)
        cj = 0;
    s->chief_task = (int)s->jobs[cj].first_task;
    s->tasks[s->chief_task].chief = true;
    return 0;
}

/* ---- templates --------------------------------------------------------- */

static bool known_placeholder(void *vc, const char *name, size_t len)
{
    struct vctx *c = vc;
    const struct fl_scenario *s = c->s;
    char n[128];
    if (len >= sizeof n)
        return false;
    memcpy(n, name, len);
    n[len] = 0;
    if (is_builtin_placeholder(n))
        return true;
    for (size_t d = 0; d < s->n_dims; d++)
        if (strcmp(s->dims[d].key, n) == 0)
            return true;
    for (size_t j = 0; j < s->n_jobs; j++) {
        size_t jl = strlen(s->jobs[j].name);
        if (strncmp(n, s->jobs[j].name, jl) == 0 &&
            (strcmp(n + jl, "_hosts") == 0 || strcmp(n + jl, "_count") == 0))
            return true;
    }
    return false;
}

static int check_template(struct vctx *c, const ynode *n)
{
    size_t off = 0, blen = 0;
    char msg[256];
    struct fl_scenario *s = c->s;

    if (fl_tmpl_check(n->value, known_placeholder, c, &off, &blen, msg, sizeof msg) == 0)
        return 0;
    struct fl_scn_loc l = loc_in_scalar(c, n, off, blen);
    verr(c, l, "%s", msg);
    if (blen > 2 && n->value[off] == '{') {
        /* Suggest the closest known placeholder. */
        size_t nc = ARRAY_LEN(builtin_placeholders) + s->n_dims + 2 * s->n_jobs;
        const char **cands = zalloc(c, nc, sizeof *cands);
        char **owned = zalloc(c, 2 * s->n_jobs + 1, sizeof *owned);
        char word[128];
        size_t k = 0;
        if (!cands || !owned) {
            free(cands);
            free(owned);
            return -ENOMEM;
        }
        for (size_t i = 0; i < ARRAY_LEN(builtin_placeholders); i++)
            cands[k++] = builtin_placeholders[i];
        for (size_t d = 0; d < s->n_dims; d++)
            cands[k++] = s->dims[d].key;
        for (size_t j = 0; j < s->n_jobs; j++) {
            if (asprintf(&owned[2 * j], "%s_hosts", s->jobs[j].name) < 0)
                owned[2 * j] = NULL;
            if (asprintf(&owned[2 * j + 1], "%s_count", s->jobs[j].name) < 0)
                owned[2 * j + 1] = NULL;
            cands[k++] = owned[2 * j];
            cands[k++] = owned[2 * j + 1];
        }
        snprintf(word, sizeof word, "%.*s", (int)(blen - 2), n->value + off + 1);
        const char *best = fl_suggest(word, cands, k);
        if (best) {
            size_t used = strlen(c->err);
            snprintf(c->err + used, c->errlen - used, " (did you mean '{%s}'?)", best);
        }
        for (size_t j = 0; j < 2 * s->n_jobs; j++)
            free(owned[j]);
        free(owned);
        free(cands);
    }
    return -EINVAL;
}

/* ---- run --------------------------------------------------------------- */

static int load_env(struct vctx *c, const ynode *env, struct fl_scn_job *j)
{
    int rc;
    if (!env || fl_scn_yaml_is_null(env))
        return 0;
    if ((rc = want(c, env, FL_YN_MAP, "'env'")) < 0)
        return rc;
    for (size_t i = 0; i < env->n; i++) {
        const ynode *k = env->keys[i], *v = env->items[i];
        if (!valid_ident(k->value, true))
            return verr(c, k->loc, "bad environment variable name '%s'", k->value);
        if (strncmp(k->value, "FAULTLINE_", 10) == 0)
            return verr(c, k->loc, "'%s': FAULTLINE_* variables are set by the harness", k->value);
        if (v->type != FL_YN_SCALAR)
            return want(c, v, FL_YN_SCALAR, "an env value");
        if ((rc = check_template(c, v)) < 0)
            return rc;
        /* Job env overrides the run-wide one with the same key. */
        struct fl_scn_env *e = NULL;
        for (size_t q = 0; q < j->n_env; q++)
            if (strcmp(j->env[q].key, k->value) == 0)
                e = &j->env[q];
        if (!e) {
            struct fl_scn_env *ne = realloc(j->env, (j->n_env + 1) * sizeof *ne);
            if (!ne)
                return -ENOMEM;
            j->env = ne;
            e = &j->env[j->n_env++];
            memset(e, 0, sizeof *e);
            if ((rc = dup_str(c, k->value, &e->key)) < 0)
                return rc;
        } else {
            free(e->value);
            e->value = NULL;
        }
        if ((rc = dup_str(c, fl_scn_yaml_is_null(v) ? "" : v->value, &e->value)) < 0)
            return rc;
        e->loc = v->loc;
    }
    return 0;
}

static int load_run(struct vctx *c, const ynode *run, struct fl_scn_loc top)
{
    struct fl_scenario *s = c->s;
    static const char *const base_keys[] = {"command", "env", "port", "stop_when", "grace"};
    int rc;

    s->run.base_port = FL_SCN_DEFAULT_PORT;
    s->run.grace_ms = FL_SCN_DEFAULT_GRACE_MS;
    s->run.stop_all = true;
    if (!run)
        return verr(c, top, "missing 'run' (at least run: {command: ...})");
    if ((rc = want(c, run, FL_YN_MAP, "'run'")) < 0)
        return rc;
    c->run = run;
    /* Valid keys: the base keys and every job name. */
    {
        size_t nk = ARRAY_LEN(base_keys) + s->n_jobs;
        const char **keys = zalloc(c, nk, sizeof *keys);
        if (!keys)
            return -ENOMEM;
        memcpy(keys, base_keys, sizeof base_keys);
        for (size_t j = 0; j < s->n_jobs; j++)
            keys[ARRAY_LEN(base_keys) + j] = s->jobs[j].name;
        rc = check_keys(c, run, keys, nk, "run");
        free(keys);
        if (rc < 0)
            return rc;
    }
    const ynode *cmd = fl_scn_yaml_get(run, "command", NULL);
    const ynode *env = fl_scn_yaml_get(run, "env", NULL);
    if (cmd) {
        if ((rc = want(c, cmd, FL_YN_SCALAR, "'command'")) < 0 ||
            (rc = check_template(c, cmd)) < 0)
            return rc;
    }
    for (size_t j = 0; j < s->n_jobs; j++) {
        struct fl_scn_job *job = &s->jobs[j];
        struct fl_scn_ynode *jk = NULL;
        const ynode *jo = fl_scn_yaml_get(run, job->name, &jk);
        const ynode *jcmd = NULL, *jenv = NULL;
        if (jo && !fl_scn_yaml_is_null(jo)) {
            static const char *const job_keys[] = {"command", "env"};
            char where[128];
            snprintf(where, sizeof where, "run.%s", job->name);
            if ((rc = want(c, jo, FL_YN_MAP, where)) < 0 ||
                (rc = check_keys(c, jo, job_keys, 2, where)) < 0)
                return rc;
            jcmd = fl_scn_yaml_get(jo, "command", NULL);
            jenv = fl_scn_yaml_get(jo, "env", NULL);
            if (jcmd && ((rc = want(c, jcmd, FL_YN_SCALAR, "'command'")) < 0 ||
                         (rc = check_template(c, jcmd)) < 0))
                return rc;
        }
        const ynode *use = jcmd ? jcmd : cmd;
        if (!use)
            return verr(c, jk ? jk->loc : run->loc,
                        "job '%s' has no command (set run.command or run.%s.command)", job->name,
                        job->name);
        if (!*use->value || strspn(use->value, " \t\n") == use->len)
            return verr(c, use->loc, "the command of job '%s' is empty", job->name);
        if ((rc = dup_str(c, use->value, &job->command)) < 0)
            return rc;
        /*
         * A folded (>) command is meant as one line, but YAML keeps the
         * newlines of more-indented continuation lines, which sh would read
         * as separate commands: join them.  Literal (|) commands are scripts
         * and keep their lines.  Trailing newlines go in every style.
         */
        if (use->style == FL_YS_FOLDED)
            for (char *p = job->command; *p; p++)
                if (*p == '\n')
                    *p = ' ';
        for (size_t l = strlen(job->command); l && strchr(" \t\n", job->command[l - 1]); l--)
            job->command[l - 1] = 0;
        job->command_loc = use->loc;
        if ((rc = load_env(c, env, job)) < 0 || (rc = load_env(c, jenv, job)) < 0)
            return rc;
    }
    const ynode *port = fl_scn_yaml_get(run, "port", NULL);
    if (port) {
        long p;
        if ((rc = get_long(c, port, "'port'", 1, 65535, &p)) < 0)
            return rc;
        s->run.base_port = (int)p;
    }
    /* Ports: base + index of the task among the tasks on its host. */
    {
        int *per_host = zalloc(c, s->n_hosts, sizeof *per_host);
        if (!per_host)
            return -ENOMEM;
        for (size_t t = 0; t < s->n_tasks; t++)
            s->tasks[t].port = s->run.base_port + per_host[s->tasks[t].host]++;
        for (size_t t = 0; t < s->n_tasks; t++)
            if (s->tasks[t].port > 65535) {
                int cnt = per_host[s->tasks[t].host];
                free(per_host);
                return verr(c, port ? port->loc : run->loc,
                            "run port %d leaves no room for %d tasks on host '%s' (ports above 65535)",
                            s->run.base_port, cnt, s->hosts[s->tasks[t].host].name);
            }
        free(per_host);
    }
    const ynode *grace = fl_scn_yaml_get(run, "grace", NULL);
    if (grace && (rc = get_duration(c, grace, "'grace'", true, &s->run.grace_ms)) < 0)
        return rc;
    const ynode *sw = fl_scn_yaml_get(run, "stop_when", NULL);
    if (sw && !(sw->type == FL_YN_SCALAR && strcmp(sw->value, "all") == 0)) {
        const ynode *one[1] = {sw};
        const ynode *const *items = one;
        size_t n = 1;
        if (sw->type == FL_YN_SEQ) {
            items = (const ynode *const *)sw->items;
            n = sw->n;
            if (n == 0)
                return verr(c, sw->loc, "'stop_when' is empty (omit it to wait for every job)");
        } else if ((rc = want(c, sw, FL_YN_SCALAR, "'stop_when'")) < 0) {
            return rc;
        }
        if (!(s->run.stop_jobs = zalloc(c, n, sizeof *s->run.stop_jobs)))
            return -ENOMEM;
        s->run.stop_all = false;
        for (size_t i = 0; i < n; i++) {
            if ((rc = want(c, items[i], FL_YN_SCALAR, "a stop_when job")) < 0)
                return rc;
            if (n > 1 && strcmp(items[i]->value, "all") == 0)
                return verr(c, items[i]->loc, "stop_when: 'all' cannot be mixed with job names");
            if (strcmp(items[i]->value, "all") == 0) {
                s->run.stop_all = true;
                break;
            }
            int j = fl_scn_job_find(s, items[i]->value);
            if (j < 0) {
                const char **names = zalloc(c, s->n_jobs, sizeof *names);
                if (!names)
                    return -ENOMEM;
                for (size_t q = 0; q < s->n_jobs; q++)
                    names[q] = s->jobs[q].name;
                verr(c, items[i]->loc, "unknown job '%s' in stop_when", items[i]->value);
                vsuggest(c, items[i]->value, names, s->n_jobs);
                free(names);
                return -EINVAL;
            }
            s->run.stop_jobs[s->run.n_stop_jobs++] = j;
        }
    }
    return 0;
}

/* ---- shared ------------------------------------------------------------ */

/* A list of host names (or a single name) into a hostset; no duplicates. */
static int load_hostset(struct vctx *c, const ynode *n, const char *what,
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
            return verr(c, n->loc, "%s is empty", what);
    } else if ((rc = want(c, n, FL_YN_SCALAR, what)) < 0) {
        return rc;
    }
    if (!(hs->hosts = zalloc(c, cnt, sizeof *hs->hosts)))
        return -ENOMEM;
    for (size_t i = 0; i < cnt; i++) {
        int h;
        if ((rc = resolve_host(c, items[i], what, &h)) < 0)
            return rc;
        for (size_t q = 0; q < hs->n; q++)
            if (hs->hosts[q] == h)
                return verr(c, items[i]->loc, "host '%s' is listed twice in %s", items[i]->value, what);
        hs->hosts[hs->n++] = h;
    }
    return 0;
}

static int load_shared(struct vctx *c, const ynode *sh)
{
    struct fl_scenario *s = c->s;
    static const char *const keys[] = {"path", "hosts"};
    int rc;

    if (!sh || fl_scn_yaml_is_null(sh))
        return 0;
    if ((rc = want(c, sh, FL_YN_SEQ, "'shared'")) < 0)
        return rc;
    if (!(s->shared = zalloc(c, sh->n, sizeof *s->shared)))
        return -ENOMEM;
    for (size_t i = 0; i < sh->n; i++) {
        const ynode *it = sh->items[i];
        struct fl_scn_shared *e = &s->shared[s->n_shared++];
        e->loc = it->loc;
        if ((rc = want(c, it, FL_YN_MAP, "a shared entry")) < 0 ||
            (rc = check_keys(c, it, keys, 2, "shared entry")) < 0)
            return rc;
        const ynode *p = fl_scn_yaml_get(it, "path", NULL);
        const ynode *h = fl_scn_yaml_get(it, "hosts", NULL);
        if (!p)
            return verr(c, it->loc, "shared entry has no 'path'");
        if (!h)
            return verr(c, it->loc, "shared entry has no 'hosts'");
        if ((rc = get_str(c, p, "'path'", &e->path)) < 0 ||
            (rc = check_rel_path(c, p, "shared path")) < 0)
            return rc;
        for (size_t q = 0; q + 1 < s->n_shared; q++)
            if (strcmp(s->shared[q].path, e->path) == 0)
                return verr(c, p->loc, "shared path '%s' is listed twice (first at line %d)",
                            e->path, s->shared[q].loc.line);
        struct fl_scn_hostset hs = {0};
        if (h->type == FL_YN_SCALAR && strcmp(h->value, "all") == 0) {
            if (!(hs.hosts = zalloc(c, s->n_hosts, sizeof *hs.hosts)))
                return -ENOMEM;
            for (size_t q = 0; q < s->n_hosts; q++)
                hs.hosts[hs.n++] = (int)q;
            rc = 0;
        } else {
            rc = load_hostset(c, h, "shared hosts", &hs);
        }
        e->hosts = hs.hosts;
        e->n_hosts = hs.n;
        if (rc < 0)
            return rc;
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
static int check_regex_shape(struct vctx *c, const ynode *n, const char *what, const char *re)
{
    enum { MAX_DEPTH = 32 };
    const double max_cost = 200000;
    double cost[MAX_DEPTH + 1] = {0}, last = 0;
    int depth = 0;
    bool prev_rep = false, in_bracket = false;

    if (strlen(re) > 4096)
        return verr(c, n->loc, "bad regex in %s: longer than 4096 characters", what);
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
                return verr(c, n->loc, "bad regex in %s: groups nested deeper than %d", what,
                            MAX_DEPTH);
            cost[++depth] = 0;
            break;
        case ')':
            if (depth > 0) {
                last = cost[depth] + 1;
                cost[--depth] += last;
            }
            break;
        case '*': case '?':
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
            last = 1;               /* a literal brace */
            cost[depth] += 1;
            break;
        default:
            last = 1;
            cost[depth] += 1;
            break;
        }
        if (rep) {
            if (prev_rep)
                return verr(c, n->loc,
                            "bad regex in %s: stacked repetition operators (like 'a+*') are not supported",
                            what);
            cost[depth] += last * (mult - 1);
            last *= mult;
        }
        prev_rep = rep;
        if (cost[depth] > max_cost || last > max_cost)
            return verr(c, n->loc, "bad regex in %s: too complex (nested repetitions expand too far)",
                        what);
    }
    return 0;
}

/*
 * Compiles a regex node into r (POSIX ERE with glibc's \w \W \s \S \b \B \< \>).
 * As people write them out of habit, \d and \D are rewritten to [0-9] and
 * [^0-9], and inside a bracket \d, \w, \s to 0-9, [:alnum:]_, [:space:].
 */
static int load_regex(struct vctx *c, const ynode *n, const char *what, struct fl_scn_regex *r)
{
    int rc;
    if ((rc = want(c, n, FL_YN_SCALAR, what)) < 0)
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
            return verr(c, n->loc, "bad regex in %s: '\\%c' is not supported inside [...]", what,
                        p[1]);
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
        return verr(c, n->loc, "bad regex in %s: %s", what, msg);
    }
    if (!(r->src = strdup(n->value))) {
        regfree(&r->re);
        return -ENOMEM;
    }
    r->loc = n->loc;
    return 0;
}

static void free_regex(struct fl_scn_regex *r)
{
    if (r->src) {
        regfree(&r->re);
        free(r->src);
        r->src = NULL;
    }
}

/* ---- faults ------------------------------------------------------------ */

static int job_names(struct vctx *c, const char ***out)
{
    const char **v = zalloc(c, c->s->n_jobs + 1, sizeof *v);
    if (!v)
        return -ENOMEM;
    for (size_t i = 0; i < c->s->n_jobs; i++)
        v[i] = c->s->jobs[i].name;
    *out = v;
    return 0;
}

static int unknown_job(struct vctx *c, struct fl_scn_loc l, const char *name, const char *where)
{
    const char **names;
    int rc;
    if ((rc = job_names(c, &names)) < 0)
        return rc;
    verr(c, l, "unknown job '%s' in %s", name, where);
    vsuggest(c, name, names, c->s->n_jobs);
    free(names);
    return -EINVAL;
}

/* "job" or "job:task" -> job index and task (-1 when not given). */
static int resolve_job_task(struct vctx *c, const ynode *n, const char *where, int *job, int *task)
{
    int rc;
    if ((rc = want(c, n, FL_YN_SCALAR, where)) < 0)
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
            return verr(c, n->loc, "bad task '%s' in %s (expected job:index, e.g. %s:0)", n->value,
                        where, name);
        if (t < 0 || (size_t)t >= c->s->jobs[j].n_tasks)
            return verr(c, n->loc, "task %ld out of range in '%s': job '%s' has %zu task%s (0..%zu)",
                        t, n->value, name, c->s->jobs[j].n_tasks,
                        c->s->jobs[j].n_tasks == 1 ? "" : "s", c->s->jobs[j].n_tasks - 1);
        *task = (int)t;
    }
    return 0;
}

/* A fault target: a host name, "job:task" or "chief". */
static int resolve_target(struct vctx *c, const ynode *n, const char *kind, struct fl_scn_target *t)
{
    struct fl_scenario *s = c->s;
    int rc;
    char what[64];
    snprintf(what, sizeof what, "%s target", kind);
    if ((rc = want(c, n, FL_YN_SCALAR, what)) < 0)
        return rc;
    t->loc = n->loc;
    if (strcmp(n->value, "chief") == 0) {
        t->kind = FL_SCN_TGT_TASK;
        t->task = s->chief_task;
        t->host = s->tasks[s->chief_task].host;
        t->chief = true;
        return 0;
    }
    if (strchr(n->value, ':')) {
        int j, k;
        if ((rc = resolve_job_task(c, n, what, &j, &k)) < 0)
            return rc;
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
    if (j >= 0)
        return verr(c, n->loc, "'%s' is a job; a %s target is a host, job:task (e.g. '%s:0') or 'chief'",
                    n->value, kind, n->value);
    const char **names = zalloc(c, s->n_hosts + 1, sizeof *names);
    if (!names)
        return -ENOMEM;
    for (size_t i = 0; i < s->n_hosts; i++)
        names[i] = s->hosts[i].name;
    names[s->n_hosts] = "chief";
    verr(c, n->loc, "unknown host '%s' in %s target", n->value, kind);
    vsuggest(c, n->value, names, s->n_hosts + 1);
    free(names);
    return -EINVAL;
}

static int load_count(struct vctx *c, const ynode *m, unsigned *count)
{
    const ynode *n = fl_scn_yaml_get(m, "count", NULL);
    long v;
    int rc;
    *count = 1;
    if (!n)
        return 0;
    if ((rc = get_long(c, n, "'count'", 1, 1000000000L, &v)) < 0)
        return rc;
    *count = (unsigned)v;
    return 0;
}

static bool valid_event_name(const char *e)
{
    if (!*e)
        return false;
    for (const char *p = e; *p; p++)
        if (!isalnum((unsigned char)*p) && !strchr("._-", *p))
            return false;
    return true;
}

static int load_trigger(struct vctx *c, const ynode *key, const ynode *v, struct fl_scn_trigger *t)
{
    struct fl_scenario *s = c->s;
    int rc;

    t->loc = key->loc;
    t->host = t->job = t->task = -1;
    t->count = 1;
    if (strcmp(key->value, "at") == 0) {
        t->kind = FL_SCN_TRIG_AT;
        if ((rc = get_duration(c, v, "'at'", true, &t->at_ms)) < 0)
            return rc;
        if (t->at_ms >= s->timeout_ms)
            return verr(c, v->loc, "fault at %s comes after the run's timeout (%" PRId64 "ms)",
                        v->value, s->timeout_ms);
        return 0;
    }
    bool ev = strcmp(key->value, "after") == 0;
    static const char *const ev_keys[] = {"event", "host", "job", "count", "where"};
    static const char *const log_keys[] = {"match", "host", "job", "count"};
    t->kind = ev ? FL_SCN_TRIG_EVENT : FL_SCN_TRIG_LOG;
    if (v->type != FL_YN_MAP) {
        char b[64];
        return verr(c, v->loc, "'%s' must be a mapping like %s, not %s", key->value,
                    ev ? "{event: save.done, host: w0}" : "{host: w0, match: 'step 100'}",
                    describe(v, b, sizeof b));
    }
    if ((rc = check_keys(c, v, ev ? ev_keys : log_keys, ev ? 5 : 4, ev ? "after" : "on_log")) < 0)
        return rc;
    const ynode *h = fl_scn_yaml_get(v, "host", NULL);
    const ynode *j = fl_scn_yaml_get(v, "job", NULL);
    if (h && (rc = resolve_host(c, h, ev ? "'after'" : "'on_log'", &t->host)) < 0)
        return rc;
    if (j && (rc = resolve_job_task(c, j, ev ? "'after'" : "'on_log'", &t->job, &t->task)) < 0)
        return rc;
    if ((rc = load_count(c, v, &t->count)) < 0)
        return rc;
    if (ev) {
        const ynode *e = fl_scn_yaml_get(v, "event", NULL);
        if (!e)
            return verr(c, v->loc, "'after' needs 'event' (the event kind, e.g. save.done)");
        if ((rc = get_str(c, e, "'event'", &t->event)) < 0)
            return rc;
        if (!valid_event_name(t->event))
            return verr(c, e->loc, "bad event kind '%s' (letters, digits, '.', '_', '-')", t->event);
        const ynode *w = fl_scn_yaml_get(v, "where", NULL);
        if (w && !fl_scn_yaml_is_null(w)) {
            if ((rc = want(c, w, FL_YN_MAP, "'where'")) < 0)
                return rc;
            if (!(t->where = zalloc(c, w->n, sizeof *t->where)))
                return -ENOMEM;
            for (size_t i = 0; i < w->n; i++) {
                struct fl_scn_kv *kv = &t->where[t->n_where++];
                if ((rc = dup_str(c, w->keys[i]->value, &kv->key)) < 0 ||
                    (rc = get_str(c, w->items[i], "a 'where' value", &kv->value)) < 0)
                    return rc;
            }
        }
    } else {
        const ynode *m = fl_scn_yaml_get(v, "match", NULL);
        if (!m)
            return verr(c, v->loc, "'on_log' needs 'match' (a regex)");
        if ((rc = load_regex(c, m, "'match'", &t->match)) < 0)
            return rc;
    }
    return 0;
}

static int load_partition(struct vctx *c, const ynode *v, struct fl_scn_action *a)
{
    struct fl_scenario *s = c->s;
    int rc = 0;

    if (v->type == FL_YN_MAP) {
        static const char *const keys[] = {"from", "to"};
        if ((rc = check_keys(c, v, keys, 2, "one-way partition")) < 0)
            return rc;
        const ynode *f = fl_scn_yaml_get(v, "from", NULL), *t = fl_scn_yaml_get(v, "to", NULL);
        if (!f || !t)
            return verr(c, v->loc, "a one-way partition needs both 'from' and 'to'");
        a->oneway = true;
        if ((rc = load_hostset(c, f, "partition 'from'", &a->from)) < 0 ||
            (rc = load_hostset(c, t, "partition 'to'", &a->to)) < 0)
            return rc;
        for (size_t i = 0; i < a->from.n; i++)
            for (size_t k = 0; k < a->to.n; k++)
                if (a->from.hosts[i] == a->to.hosts[k])
                    return verr(c, t->loc, "host '%s' is in both 'from' and 'to'",
                                s->hosts[a->from.hosts[i]].name);
        return 0;
    }
    if (v->type != FL_YN_SEQ)
        return verr(c, v->loc, "partition must be a list of host groups ([[a, b], [c]]) or {from: [...], to: [...]}");
    if (v->n < 2)
        return verr(c, v->loc, "a partition needs at least two groups of hosts");
    if (!(a->groups = zalloc(c, v->n, sizeof *a->groups)))
        return -ENOMEM;
    int *group_of = zalloc(c, s->n_hosts, sizeof *group_of);
    if (!group_of)
        return -ENOMEM;
    for (size_t g = 0; g < v->n; g++) {
        struct fl_scn_hostset *hs = &a->groups[a->n_groups++];
        if ((rc = load_hostset(c, v->items[g], "partition group", hs)) < 0)
            break;
        for (size_t i = 0; i < hs->n && rc == 0; i++) {
            int h = hs->hosts[i];
            if (group_of[h]) {
                const ynode *it = v->items[g]->type == FL_YN_SEQ ? v->items[g]->items[i] : v->items[g];
                rc = verr(c, it->loc, "host '%s' is in two partition groups (%d and %zu)",
                          s->hosts[h].name, group_of[h], g + 1);
            }
            group_of[h] = (int)g + 1;
        }
        if (rc < 0)
            break;
    }
    free(group_of);
    return rc;
}

static int load_fault(struct vctx *c, const ynode *it, struct fl_scn_fault *f)
{
    struct fl_scenario *s = c->s;
    static const char *const keys[] = {
        "at", "after", "on_log", "kill", "signal", "pause", "restart", "replace",
        "crash_host", "partition", "limit", "for", "variant", "disk", "link",
    };
    const ynode *tk = NULL, *tv = NULL, *ak = NULL, *av = NULL;
    int rc;

    f->loc = it->loc;
    f->action.host = -1;
    f->action.target.host = f->action.target.task = -1;
    if ((rc = want(c, it, FL_YN_MAP, "a fault")) < 0)
        return rc;
    for (size_t i = 0; i < it->n; i++) {
        const char *k = it->keys[i]->value;
        bool known = false, is_action = false, is_trigger = false;
        for (size_t q = 0; q < ARRAY_LEN(keys); q++)
            known |= strcmp(k, keys[q]) == 0;
        for (size_t q = 0; q < ARRAY_LEN(action_keys); q++)
            is_action |= strcmp(k, action_keys[q]) == 0;
        for (size_t q = 0; q < ARRAY_LEN(trigger_keys); q++)
            is_trigger |= strcmp(k, trigger_keys[q]) == 0;
        if (!known) {
            const char *sug = fl_suggest(k, keys, ARRAY_LEN(keys));
            bool kindish = false;
            for (size_t q = 0; q < ARRAY_LEN(action_keys) && sug; q++)
                kindish |= strcmp(sug, action_keys[q]) == 0;
            if (!sug) {
                bool has_action = false;
                for (size_t q = 0; q < it->n; q++)
                    for (size_t a = 0; a < ARRAY_LEN(action_keys); a++)
                        has_action |= strcmp(it->keys[q]->value, action_keys[a]) == 0;
                kindish = !has_action;
            }
            if (kindish) {
                verr(c, it->keys[i]->loc, "unknown fault kind '%s'", k);
                return vsuggest(c, k, action_keys, ARRAY_LEN(action_keys) - 2);
            }
            verr(c, it->keys[i]->loc, "unknown key '%s' in fault", k);
            return vsuggest(c, k, keys, ARRAY_LEN(keys));
        }
        if (is_trigger) {
            if (tk)
                return verr(c, it->keys[i]->loc, "fault has two triggers ('%s' and '%s'); use one",
                            tk->value, k);
            tk = it->keys[i];
            tv = it->items[i];
        }
        if (is_action) {
            if (strcmp(k, "disk") == 0 || strcmp(k, "link") == 0)
                return verr(c, it->keys[i]->loc,
                            "fault kind '%s' is not supported yet (it comes with a later version of faultline)",
                            k);
            if (ak)
                return verr(c, it->keys[i]->loc, "fault has two kinds ('%s' and '%s'); write two faults",
                            ak->value, k);
            ak = it->keys[i];
            av = it->items[i];
        }
    }
    if (!ak)
        return verr(c, it->loc, "fault has no kind (one of kill, pause, restart, replace, crash_host, partition, limit)");
    if (!tk)
        return verr(c, it->loc, "fault has no trigger (add at: <time>, after: {event: ...} or on_log: {match: ...})");
    if ((rc = load_trigger(c, tk, tv, &f->trigger)) < 0)
        return rc;

    struct fl_scn_action *a = &f->action;
    const char *kind = ak->value;
    a->loc = ak->loc;
    if (strcmp(kind, "kill") == 0 || strcmp(kind, "pause") == 0) {
        a->kind = kind[0] == 'k' ? FL_SCN_ACT_KILL : FL_SCN_ACT_PAUSE;
        if ((rc = resolve_target(c, av, kind, &a->target)) < 0)
            return rc;
        a->signal = SIGKILL;
    } else if (strcmp(kind, "restart") == 0 || strcmp(kind, "replace") == 0 ||
               strcmp(kind, "crash_host") == 0) {
        a->kind = kind[0] == 'c' ? FL_SCN_ACT_CRASH_HOST
                  : kind[2] == 's' ? FL_SCN_ACT_RESTART : FL_SCN_ACT_REPLACE;
        if ((rc = resolve_target(c, av, kind, &a->target)) < 0)
            return rc;
        a->host = a->target.host;
    } else if (strcmp(kind, "partition") == 0) {
        a->kind = FL_SCN_ACT_PARTITION;
        if ((rc = load_partition(c, av, a)) < 0)
            return rc;
    } else {
        static const char *const lkeys[] = {"host", "threads"};
        a->kind = FL_SCN_ACT_LIMIT;
        if (av->type != FL_YN_MAP) {
            char b[64];
            return verr(c, av->loc, "'limit' must be a mapping like {host: w0, threads: 64}, not %s",
                        describe(av, b, sizeof b));
        }
        if ((rc = check_keys(c, av, lkeys, 2, "limit")) < 0)
            return rc;
        const ynode *h = fl_scn_yaml_get(av, "host", NULL), *th = fl_scn_yaml_get(av, "threads", NULL);
        if (!h)
            return verr(c, av->loc, "limit needs 'host'");
        if (!th)
            return verr(c, av->loc, "limit needs 'threads' (the most tasks the host may run)");
        if ((rc = resolve_target(c, h, "limit", &a->target)) < 0 ||
            (rc = get_long(c, th, "'threads'", 1, 1L << 22, &a->threads)) < 0)
            return rc;
        a->host = a->target.host;
    }

    struct fl_scn_ynode *sk = NULL;
    const ynode *sig = fl_scn_yaml_get(it, "signal", &sk);
    if (sig) {
        if (a->kind != FL_SCN_ACT_KILL)
            return verr(c, sk->loc, "'signal' applies only to kill");
        if ((rc = want(c, sig, FL_YN_SCALAR, "'signal'")) < 0)
            return rc;
        int sn = fl_scn_signal_parse(sig->value);
        if (sn < 0) {
            const char *names[64];
            size_t nn = fl_scn_signal_names(names, 64);
            verr(c, sig->loc, "unknown signal '%s'", sig->value);
            return vsuggest(c, sig->value, names, nn);
        }
        a->signal = sn;
    }
    const ynode *fo = fl_scn_yaml_get(it, "for", &sk);
    if (fo) {
        if (a->kind == FL_SCN_ACT_KILL || a->kind == FL_SCN_ACT_RESTART ||
            a->kind == FL_SCN_ACT_REPLACE)
            return verr(c, sk->loc, "'for' does not apply to %s (it heals pause, crash_host, partition and limit)",
                        kind);
        if ((rc = get_duration(c, fo, "'for'", false, &f->for_ms)) < 0)
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
                return verr(c, va->loc, "%s", msg);
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
                    return verr(c, vals->loc, "variant '%s' must be a value or a list of values",
                                va->keys[i]->value);
                for (size_t q = 0; q < nv; q++) {
                    const ynode *one = vals->type == FL_YN_SEQ ? vals->items[q] : vals;
                    char term[512];
                    if ((rc = want(c, one, FL_YN_SCALAR, "a variant value")) < 0)
                        return rc;
                    snprintf(term, sizeof term, "%s=%s", va->keys[i]->value, one->value);
                    rc = fl_scn_selector_add_terms(s, term, &f->variant, false, msg, sizeof msg);
                    if (rc < 0)
                        return verr(c, rc == -ENOENT ? va->keys[i]->loc : one->loc, "%s", msg);
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
            return verr(c, va->loc, "'variant' must be a selector ('legacy', 'k=v') or a mapping {key: value}");
        }
        f->variant.loc = va->loc;
    }
    return 0;
}

static int load_faults(struct vctx *c, const ynode *fs)
{
    struct fl_scenario *s = c->s;
    int rc;
    if (!fs || fl_scn_yaml_is_null(fs))
        return 0;
    if ((rc = want(c, fs, FL_YN_SEQ, "'faults'")) < 0)
        return rc;
    if (!(s->faults = zalloc(c, fs->n, sizeof *s->faults)))
        return -ENOMEM;
    for (size_t i = 0; i < fs->n; i++) {
        s->n_faults++;
        if ((rc = load_fault(c, fs->items[i], &s->faults[i])) < 0)
            return rc;
    }
    return 0;
}

/* ---- expectations ------------------------------------------------------ */

static const char *const check_keys_list[] = {
    "exit", "signal", "fails_with", "log_matches", "log_not_matches", "core",
};

static int load_check(struct vctx *c, const ynode *k, const ynode *v, struct fl_scn_check *ck)
{
    int rc;
    char where[160];
    snprintf(where, sizeof where, "expectations of '%s'", k->value);
    ck->core = -1;
    ck->loc = k->loc;
    if (fl_scn_yaml_is_null(v))
        return 0;
    if ((rc = want(c, v, FL_YN_MAP, where)) < 0 ||
        (rc = check_keys(c, v, check_keys_list, ARRAY_LEN(check_keys_list), where)) < 0)
        return rc;
    const ynode *e = fl_scn_yaml_get(v, "exit", NULL);
    if (e) {
        if ((rc = want(c, e, FL_YN_SCALAR, "'exit'")) < 0)
            return rc;
        ck->exit_loc = e->loc;
        if (strcasecmp(e->value, "nonzero") == 0 || strcasecmp(e->value, "non-zero") == 0)
            ck->exit = FL_SCN_EXIT_NONZERO;
        else if (strcasecmp(e->value, "any") == 0)
            ck->exit = FL_SCN_EXIT_ANY;
        else {
            long x;
            if (!isdigit((unsigned char)e->value[0]))
                return verr(c, e->loc, "'exit' must be a number 0..255, 'nonzero' or 'any', not '%s'",
                            e->value);
            if ((rc = get_long(c, e, "'exit'", 0, 255, &x)) < 0)
                return rc;
            ck->exit = FL_SCN_EXIT_CODE;
            ck->exit_code = (int)x;
        }
    }
    const ynode *sg = fl_scn_yaml_get(v, "signal", NULL);
    if (sg) {
        if ((rc = want(c, sg, FL_YN_SCALAR, "'signal'")) < 0)
            return rc;
        ck->signal_loc = sg->loc;
        if (strcasecmp(sg->value, "any") == 0) {
            ck->signal = FL_SCN_SIG_ANY;
        } else {
            int sn = fl_scn_signal_parse(sg->value);
            if (sn < 0) {
                const char *names[64];
                size_t nn = fl_scn_signal_names(names, 64);
                verr(c, sg->loc, "unknown signal '%s'", sg->value);
                return vsuggest(c, sg->value, names, nn);
            }
            ck->signal = FL_SCN_SIG_NUMBER;
            ck->signal_number = sn;
        }
    }
    const ynode *r;
    if ((r = fl_scn_yaml_get(v, "fails_with", NULL)) &&
        (rc = load_regex(c, r, "'fails_with'", &ck->fails_with)) < 0)
        return rc;
    if ((r = fl_scn_yaml_get(v, "log_matches", NULL)) &&
        (rc = load_regex(c, r, "'log_matches'", &ck->log_matches)) < 0)
        return rc;
    if ((r = fl_scn_yaml_get(v, "log_not_matches", NULL)) &&
        (rc = load_regex(c, r, "'log_not_matches'", &ck->log_not_matches)) < 0)
        return rc;
    const ynode *co = fl_scn_yaml_get(v, "core", NULL);
    if (co) {
        bool b;
        if ((rc = get_bool(c, co, "'core'", &b)) < 0)
            return rc;
        ck->core = b;
        ck->core_loc = co->loc;
    }
    if (ck->exit == FL_SCN_EXIT_CODE && ck->signal != FL_SCN_SIG_UNSET)
        return verr(c, sg->loc, "a process cannot both exit with %d and be killed by a signal",
                    ck->exit_code);
    return 0;
}

static int load_file_checks(struct vctx *c, const ynode *v, struct fl_scn_expect *x)
{
    static const char *const keys[] = {"host", "path", "exists"};
    int rc;
    if (fl_scn_yaml_is_null(v))
        return 0;
    if ((rc = want(c, v, FL_YN_SEQ, "'files'")) < 0)
        return rc;
    if (!(x->files = zalloc(c, v->n, sizeof *x->files)))
        return -ENOMEM;
    for (size_t i = 0; i < v->n; i++) {
        const ynode *it = v->items[i];
        struct fl_scn_file_check *f = &x->files[x->n_files++];
        f->loc = it->loc;
        f->exists = true;
        if ((rc = want(c, it, FL_YN_MAP, "a file check")) < 0 ||
            (rc = check_keys(c, it, keys, 3, "file check")) < 0)
            return rc;
        const ynode *h = fl_scn_yaml_get(it, "host", NULL), *p = fl_scn_yaml_get(it, "path", NULL);
        const ynode *e = fl_scn_yaml_get(it, "exists", NULL);
        if (!h)
            return verr(c, it->loc, "file check needs 'host'");
        if (!p)
            return verr(c, it->loc, "file check needs 'path'");
        if ((rc = resolve_host(c, h, "file check", &f->host)) < 0 ||
            (rc = get_str(c, p, "'path'", &f->path)) < 0)
            return rc;
        if (p->value[0] != '/' && (rc = check_rel_path(c, p, "path")) < 0)
            return rc;
        if (e && (rc = get_bool(c, e, "'exists'", &f->exists)) < 0)
            return rc;
    }
    return 0;
}

static int load_event_checks(struct vctx *c, const ynode *v, struct fl_scn_expect *x)
{
    static const char *const keys[] = {"event", "host", "job", "min", "max"};
    int rc;
    if (fl_scn_yaml_is_null(v))
        return 0;
    if ((rc = want(c, v, FL_YN_SEQ, "'events'")) < 0)
        return rc;
    if (!(x->events = zalloc(c, v->n, sizeof *x->events)))
        return -ENOMEM;
    for (size_t i = 0; i < v->n; i++) {
        const ynode *it = v->items[i];
        struct fl_scn_event_check *e = &x->events[x->n_events++];
        e->loc = it->loc;
        e->host = e->job = -1;
        e->max = -1;
        if ((rc = want(c, it, FL_YN_MAP, "an event check")) < 0 ||
            (rc = check_keys(c, it, keys, ARRAY_LEN(keys), "event check")) < 0)
            return rc;
        const ynode *ev = fl_scn_yaml_get(it, "event", NULL), *h = fl_scn_yaml_get(it, "host", NULL);
        const ynode *j = fl_scn_yaml_get(it, "job", NULL), *mn = fl_scn_yaml_get(it, "min", NULL);
        const ynode *mx = fl_scn_yaml_get(it, "max", NULL);
        if (!ev)
            return verr(c, it->loc, "event check needs 'event'");
        if ((rc = get_str(c, ev, "'event'", &e->event)) < 0)
            return rc;
        if (!valid_event_name(e->event))
            return verr(c, ev->loc, "bad event kind '%s' (letters, digits, '.', '_', '-')", e->event);
        if (h && (rc = resolve_host(c, h, "event check", &e->host)) < 0)
            return rc;
        if (j) {
            int task;
            if ((rc = resolve_job_task(c, j, "event check", &e->job, &task)) < 0)
                return rc;
            if (task >= 0)
                return verr(c, j->loc, "event check 'job' takes a job name, not a task");
        }
        e->min = mx ? 0 : 1;
        if (mn && (rc = get_long(c, mn, "'min'", 0, LONG_MAX, &e->min)) < 0)
            return rc;
        if (mx && (rc = get_long(c, mx, "'max'", 0, LONG_MAX, &e->max)) < 0)
            return rc;
        if (mx && e->max < e->min)
            return verr(c, mx->loc, "max %ld is below min %ld", e->max, e->min);
    }
    return 0;
}

static int load_expect_block(struct vctx *c, const ynode *key, const ynode *blk,
                             struct fl_scn_expect *x)
{
    struct fl_scenario *s = c->s;
    int rc;
    char where[160];

    x->loc = key->loc;
    if (fl_scn_yaml_is_null(blk))
        return 0;
    snprintf(where, sizeof where, "expectations for '%s'", key->value);
    if ((rc = want(c, blk, FL_YN_MAP, where)) < 0)
        return rc;
    if (!(x->checks = zalloc(c, blk->n, sizeof *x->checks)))
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
        if (strcmp(n, "checkpoint") == 0)
            return verr(c, k->loc, "expectation 'checkpoint' is not supported yet (it comes with a later version of faultline)");
        struct fl_scn_check *ck = &x->checks[x->n_checks];
        ck->index = -1;
        ck->core = -1;
        if (strcmp(n, "all") == 0) {
            ck->target = FL_SCN_EXP_ALL;
        } else if (strcmp(n, "chief") == 0) {
            ck->target = FL_SCN_EXP_CHIEF;
        } else if (strchr(n, ':')) {
            int j, t;
            if ((rc = resolve_job_task(c, k, "expect", &j, &t)) < 0)
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
            size_t nc = 4 + s->n_jobs + s->n_hosts;
            const char **cands = zalloc(c, nc, sizeof *cands);
            size_t q = 0;
            if (!cands)
                return -ENOMEM;
            cands[q++] = "all";
            cands[q++] = "chief";
            cands[q++] = "files";
            cands[q++] = "events";
            for (size_t j = 0; j < s->n_jobs; j++)
                cands[q++] = s->jobs[j].name;
            for (size_t h = 0; h < s->n_hosts; h++)
                cands[q++] = s->hosts[h].name;
            bool is_field = false;
            for (size_t f = 0; f < ARRAY_LEN(check_keys_list); f++)
                is_field |= strcmp(n, check_keys_list[f]) == 0;
            if (is_field)
                verr(c, k->loc, "'%s' is not an expectation target: under a selector, name a target first (e.g. %s: {all: {%s: ...}})",
                     n, key->value, n);
            else if (fl_suggest(n, cands, q)) {
                verr(c, k->loc, "unknown expectation target '%s'", n);
                fl_suggest_append(c->err, c->errlen, n, cands, q);
            } else {
                verr(c, k->loc, "unknown expectation target '%s' (expected all, chief, a job, job:task, a host, files or events)", n);
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

static int load_expect(struct vctx *c, const ynode *ex)
{
    struct fl_scenario *s = c->s;
    int rc;
    if (!ex || fl_scn_yaml_is_null(ex))
        return 0;
    if ((rc = want(c, ex, FL_YN_MAP, "'expect' (variant selector -> expectations)")) < 0)
        return rc;
    if (!(s->expects = zalloc(c, ex->n, sizeof *s->expects)))
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
                strcmp(n, "events") == 0 || strchr(n, ':'))
                return verr(c, k->loc, "'%s' is a target, not a variant selector: write all: {%s: ...}",
                            n, n);
            return verr(c, k->loc, "%s", msg);
        }
        x->sel.loc = k->loc;
        if ((rc = load_expect_block(c, k, ex->items[i], x)) < 0)
            return rc;
    }
    return 0;
}

/* ---- top level --------------------------------------------------------- */

static bool valid_scenario_name(const char *n)
{
    if (!*n || strlen(n) > 128)
        return false;
    for (const char *p = n; *p; p++)
        if (!islower((unsigned char)*p) && !isdigit((unsigned char)*p) && !strchr("._-", *p))
            return false;
    return true;
}

static int load_top(struct vctx *c, const ynode *root)
{
    static const char *const keys[] = {
        "name", "about", "seed", "timeout", "hosts", "shared", "workdir",
        "cluster", "run", "variants", "faults", "expect",
    };
    struct fl_scenario *s = c->s;
    struct fl_scn_loc top = {1, 1};
    int rc;

    if (!root || fl_scn_yaml_is_null(root))
        return verr(c, top, "empty scenario (expected a mapping with name, hosts, cluster and run)");
    if (root->type != FL_YN_MAP)
        return want(c, root, FL_YN_MAP, "a scenario");
    top = root->loc;
    if ((rc = check_keys(c, root, keys, ARRAY_LEN(keys), "scenario")) < 0)
        return rc;

    const ynode *n = fl_scn_yaml_get(root, "name", NULL);
    if (!n)
        return verr(c, top, "missing 'name' (e.g. name: my-scenario)");
    if ((rc = get_str(c, n, "'name'", &s->name)) < 0)
        return rc;
    if (!valid_scenario_name(s->name))
        return verr(c, n->loc, "bad name '%s' (lower-case letters, digits, '.', '_' and '-')", s->name);
    n = fl_scn_yaml_get(root, "about", NULL);
    if (n && !fl_scn_yaml_is_null(n))
        rc = get_str(c, n, "'about'", &s->about);
    else
        rc = dup_str(c, "", &s->about);
    if (rc < 0)
        return rc;
    n = fl_scn_yaml_get(root, "seed", NULL);
    if (n) {
        char *end;
        if ((rc = want(c, n, FL_YN_SCALAR, "'seed'")) < 0)
            return rc;
        errno = 0;
        unsigned long long v = strtoull(n->value, &end, 10);
        if (!isdigit((unsigned char)n->value[0]) || *end || errno)
            return verr(c, n->loc, "'seed' must be a whole number 0..18446744073709551615, not '%s'",
                        n->value);
        s->seed = v;
        s->seed_set = true;
    }
    s->timeout_ms = FL_SCN_DEFAULT_TIMEOUT_MS;
    n = fl_scn_yaml_get(root, "timeout", NULL);
    if (n && (rc = get_duration(c, n, "'timeout'", false, &s->timeout_ms)) < 0)
        return rc;
    n = fl_scn_yaml_get(root, "workdir", NULL);
    if (n) {
        if ((rc = get_str(c, n, "'workdir'", &s->workdir)) < 0)
            return rc;
        if (s->workdir[0] != '/' || strcmp(s->workdir, "/") == 0 || strstr(s->workdir, "/../") ||
            (strlen(s->workdir) >= 3 && strcmp(s->workdir + strlen(s->workdir) - 3, "/..") == 0))
            return verr(c, n->loc, "'workdir' must be an absolute path below / (e.g. /srv/faultline), not '%s'",
                        s->workdir);
        static const char *const bad[] = {"/proc", "/sys", "/dev", "/etc", "/tmp", "/run"};
        for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
            size_t bl = strlen(bad[i]);
            if (strncmp(s->workdir, bad[i], bl) == 0 &&
                (s->workdir[bl] == 0 || s->workdir[bl] == '/'))
                return verr(c, n->loc, "workdir '%s' is inside %s, which the harness manages itself",
                            s->workdir, bad[i]);
        }
        size_t l = strlen(s->workdir);
        while (l > 1 && s->workdir[l - 1] == '/')
            s->workdir[--l] = 0;
    } else if ((rc = dup_str(c, FL_SCN_DEFAULT_WORKDIR, &s->workdir)) < 0) {
        return rc;
    }

    if ((rc = load_hosts(c, fl_scn_yaml_get(root, "hosts", NULL), top)) < 0 ||
        (rc = load_variants(c, fl_scn_yaml_get(root, "variants", NULL))) < 0 ||
        (rc = load_cluster(c, fl_scn_yaml_get(root, "cluster", NULL), top)) < 0 ||
        (rc = load_run(c, fl_scn_yaml_get(root, "run", NULL), top)) < 0 ||
        (rc = load_shared(c, fl_scn_yaml_get(root, "shared", NULL))) < 0 ||
        (rc = load_faults(c, fl_scn_yaml_get(root, "faults", NULL))) < 0 ||
        (rc = load_expect(c, fl_scn_yaml_get(root, "expect", NULL))) < 0)
        return rc;
    return 0;
}

/* ---- entry points ------------------------------------------------------ */

static void hash_bytes(const char *buf, size_t len, char out[FL_SCN_HASH_HEX_LEN + 1])
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)buf[i];
        h *= 0x100000001b3ull;
    }
    snprintf(out, FL_SCN_HASH_HEX_LEN + 1, "%016" PRIx64, h);
}

static char *dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    char *d, *abs;
    if (!slash)
        d = strdup(".");
    else if (slash == path)
        d = strdup("/");
    else
        d = strndup(path, (size_t)(slash - path));
    if (!d)
        return NULL;
    if ((abs = realpath(d, NULL))) {
        free(d);
        return abs;
    }
    if (d[0] == '/')
        return d;
    char cwd[PATH_MAX];
    if (!getcwd(cwd, sizeof cwd)) {
        free(d);
        return NULL;
    }
    if (asprintf(&abs, "%s/%s", cwd, d) < 0)
        abs = NULL;
    free(d);
    return abs;
}

int fl_scenario_load_mem(const char *path, const char *buf, size_t len,
                         struct fl_scenario **out, char *err, size_t errlen)
{
    struct fl_scn_ydoc doc;
    struct fl_scenario *s;
    struct vctx c = {.file = path, .buf = buf, .len = len, .err = err, .errlen = errlen};
    int rc;

    *out = NULL;
    if (errlen)
        err[0] = 0;
    if (!(s = calloc(1, sizeof *s))) {
        snprintf(err, errlen, "%s: out of memory", path);
        return -ENOMEM;
    }
    c.s = s;
    s->chief_task = -1;
    if (!(s->path = strdup(path)) || !(s->dir = dir_of(path))) {
        fl_scenario_free(s);
        snprintf(err, errlen, "%s: out of memory", path);
        return -ENOMEM;
    }
    hash_bytes(buf, len, s->hash);
    if (memchr(buf, 0, len)) {
        struct fl_scn_loc l = loc_at(&c, (size_t)((const char *)memchr(buf, 0, len) - buf));
        fl_scenario_free(s);
        return verr(&c, l, "the file contains a NUL byte (not a text file)");
    }
    if ((rc = fl_scn_yaml_parse(path, buf, len, &doc, err, errlen)) < 0) {
        fl_scenario_free(s);
        return rc;
    }
    rc = load_top(&c, doc.root);
    fl_scn_yaml_free(&doc);
    if (rc < 0) {
        if (rc == -ENOMEM && !strstr(err, "out of memory"))
            snprintf(err, errlen, "%s: out of memory", path);
        fl_scenario_free(s);
        return rc;
    }
    *out = s;
    return 0;
}

int fl_scenario_load(const char *path, struct fl_scenario **out, char *err, size_t errlen)
{
    struct stat st;
    char *buf = NULL;
    size_t len = 0;
    int fd, rc;

    *out = NULL;
    if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
        rc = -errno;
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return rc;
    }
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        rc = S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL;
        snprintf(err, errlen, "%s: not a regular file", path);
        goto cleanup;
    }
    if (st.st_size > 16 * 1024 * 1024) {
        rc = -EFBIG;
        snprintf(err, errlen, "%s: too large for a scenario file (%lld bytes)", path,
                 (long long)st.st_size);
        goto cleanup;
    }
    if (!(buf = malloc((size_t)st.st_size + 1))) {
        rc = -ENOMEM;
        snprintf(err, errlen, "%s: out of memory", path);
        goto cleanup;
    }
    while (len < (size_t)st.st_size) {
        ssize_t r = read(fd, buf + len, (size_t)st.st_size - len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            rc = -errno;
            snprintf(err, errlen, "%s: read: %s", path, strerror(errno));
            goto cleanup;
        }
        if (r == 0)
            break;
        len += (size_t)r;
    }
    buf[len] = 0;
    rc = fl_scenario_load_mem(path, buf, len, out, err, errlen);
cleanup:
    free(buf);
    close(fd);
    return rc;
}

static void free_hostset(struct fl_scn_hostset *h)
{
    free(h->hosts);
}

void fl_scenario_free(struct fl_scenario *s)
{
    if (!s)
        return;
    free(s->path);
    free(s->dir);
    free(s->name);
    free(s->about);
    free(s->workdir);
    for (size_t i = 0; i < s->n_hosts; i++) {
        struct fl_scn_host *h = &s->hosts[i];
        free(h->name);
        for (size_t j = 0; j < h->n_dirs; j++)
            free(h->dirs[j].path);
        free(h->dirs);
        for (size_t j = 0; j < h->n_files; j++) {
            free(h->files[j].path);
            free(h->files[j].content);
        }
        free(h->files);
    }
    free(s->hosts);
    for (size_t i = 0; i < s->n_shared; i++) {
        free(s->shared[i].path);
        free(s->shared[i].hosts);
    }
    free(s->shared);
    for (size_t i = 0; i < s->n_jobs; i++) {
        struct fl_scn_job *j = &s->jobs[i];
        free(j->name);
        free(j->task_hosts);
        free(j->command);
        for (size_t k = 0; k < j->n_env; k++) {
            free(j->env[k].key);
            free(j->env[k].value);
        }
        free(j->env);
    }
    free(s->jobs);
    free(s->tasks);
    free(s->run.stop_jobs);
    for (size_t i = 0; i < s->n_dims; i++) {
        free(s->dims[i].key);
        for (size_t k = 0; k < s->dims[i].n_values; k++)
            free(s->dims[i].values[k]);
        free(s->dims[i].values);
    }
    free(s->dims);
    for (size_t i = 0; i < s->n_faults; i++) {
        struct fl_scn_fault *f = &s->faults[i];
        free(f->trigger.event);
        for (size_t k = 0; k < f->trigger.n_where; k++) {
            free(f->trigger.where[k].key);
            free(f->trigger.where[k].value);
        }
        free(f->trigger.where);
        free_regex(&f->trigger.match);
        for (size_t k = 0; k < f->action.n_groups; k++)
            free_hostset(&f->action.groups[k]);
        free(f->action.groups);
        free_hostset(&f->action.from);
        free_hostset(&f->action.to);
        fl_scn_selector_free(&f->variant);
    }
    free(s->faults);
    for (size_t i = 0; i < s->n_expects; i++) {
        struct fl_scn_expect *x = &s->expects[i];
        fl_scn_selector_free(&x->sel);
        for (size_t k = 0; k < x->n_checks; k++) {
            free_regex(&x->checks[k].fails_with);
            free_regex(&x->checks[k].log_matches);
            free_regex(&x->checks[k].log_not_matches);
        }
        free(x->checks);
        for (size_t k = 0; k < x->n_files; k++)
            free(x->files[k].path);
        free(x->files);
        for (size_t k = 0; k < x->n_events; k++)
            free(x->events[k].event);
        free(x->events);
    }
    free(s->expects);
    free(s);
}
