/*
 * util.c: the parts of the scenario API that do not read YAML:
 * duration, size and signal syntax; lookups by name; listing scenario files;
 * variants (cartesian product, names), selectors and --variant filters; and
 * expansion of a task's command/env templates at run time.
 */
#include "harness/scenario/scenario.h"
#include "harness/scenario/yaml.h"
#include "harness/base/suggest.h"
#include "harness/scenario/template.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

/* ---- durations and sizes ----------------------------------------------- */

#define MAX_MS ((int64_t)1000 * 1000 * 1000 * 1000) /* ~31 years */

/* Parses "123" or "1.25" into integer and fraction parts; returns the end. */
static const char *parse_decimal(const char *p, uint64_t *ip, uint64_t *frac, int *fdigits)
{
    const char *start = p;
    *ip = 0;
    *frac = 0;
    *fdigits = 0;
    while (isdigit((unsigned char)*p)) {
        if (*ip > UINT64_MAX / 100)
            return NULL;
        *ip = *ip * 10 + (uint64_t)(*p++ - '0');
    }
    if (p == start)
        return NULL;
    if (*p == '.') {
        p++;
        if (!isdigit((unsigned char)*p))
            return NULL;
        while (isdigit((unsigned char)*p)) {
            if (*fdigits >= 9)
                return NULL;
            *frac = *frac * 10 + (uint64_t)(*p++ - '0');
            (*fdigits)++;
        }
    }
    return p;
}

/* ip.frac * mult, exactly; -EINVAL if not a whole number, -ERANGE if too big. */
static int scale(uint64_t ip, uint64_t frac, int fdigits, uint64_t mult, uint64_t max,
                 uint64_t *out)
{
    uint64_t pow10 = 1;
    for (int i = 0; i < fdigits; i++)
        pow10 *= 10;
    if (mult && ip > max / mult)
        return -ERANGE;
    uint64_t whole = ip * mult;
    if (frac && mult > UINT64_MAX / frac)
        return -ERANGE;
    uint64_t f = frac * mult;
    if (f % pow10)
        return -EINVAL;
    whole += f / pow10;
    if (whole > max)
        return -ERANGE;
    *out = whole;
    return 0;
}

int fl_scn_duration_parse(const char *s, int64_t *ms)
{
    uint64_t ip, frac, v;
    int fd, rc;
    const char *p = parse_decimal(s, &ip, &frac, &fd);
    uint64_t mult;

    if (!p)
        return -EINVAL;
    if (*p == 0 || strcmp(p, "s") == 0)
        mult = 1000;
    else if (strcmp(p, "ms") == 0)
        mult = 1;
    else if (strcmp(p, "m") == 0 || strcmp(p, "min") == 0)
        mult = 60000;
    else if (strcmp(p, "h") == 0)
        mult = 3600000;
    else
        return -EINVAL;
    if ((rc = scale(ip, frac, fd, mult, (uint64_t)MAX_MS, &v)) < 0)
        return rc;
    *ms = (int64_t)v;
    return 0;
}

int fl_scn_drift_parse(const char *s, int64_t *ppm)
{
    char *end;
    const char *p = s + (*s == '+' || *s == '-');
    if (!(*p >= '0' && *p <= '9') && *p != '.')
        return -EINVAL;
    double x = strtod(s, &end);
    if (end == s)
        return -EINVAL;
    if (strcmp(end, "%") == 0)
        x *= 10000;
    else if (strcmp(end, "ppm") != 0)
        return -EINVAL;
    if (!(x > -1e9 && x < 1e9))
        return -ERANGE;
    *ppm = (int64_t)(x < 0 ? x - 0.5 : x + 0.5);
    return 0;
}

int fl_scn_size_parse(const char *s, uint64_t *bytes)
{
    uint64_t ip, frac;
    int fd;
    const char *p = parse_decimal(s, &ip, &frac, &fd);
    uint64_t mult = 1;

    if (!p)
        return -EINVAL;
    switch (toupper((unsigned char)*p)) {
    case 0: break;
    case 'B': mult = 1; break;
    case 'K':
        mult = 1ull << 10;
        p++;
        break;
    case 'M':
        mult = 1ull << 20;
        p++;
        break;
    case 'G':
        mult = 1ull << 30;
        p++;
        break;
    case 'T':
        mult = 1ull << 40;
        p++;
        break;
    default: return -EINVAL;
    }
    if (mult > 1 && (*p == 'i' || *p == 'I'))
        p++;
    if (*p == 'B' || *p == 'b')
        p++;
    if (*p)
        return -EINVAL;
    return scale(ip, frac, fd, mult, UINT64_MAX / 2, bytes);
}

/* ---- signals ----------------------------------------------------------- */

static const struct {
    const char *name;
    int sig;
} signals[] = {
    {"SIGHUP", SIGHUP},       {"SIGINT", SIGINT},   {"SIGQUIT", SIGQUIT},   {"SIGILL", SIGILL},
    {"SIGTRAP", SIGTRAP},     {"SIGABRT", SIGABRT}, {"SIGBUS", SIGBUS},     {"SIGFPE", SIGFPE},
    {"SIGKILL", SIGKILL},     {"SIGUSR1", SIGUSR1}, {"SIGSEGV", SIGSEGV},   {"SIGUSR2", SIGUSR2},
    {"SIGPIPE", SIGPIPE},     {"SIGALRM", SIGALRM}, {"SIGTERM", SIGTERM},   {"SIGCHLD", SIGCHLD},
    {"SIGCONT", SIGCONT},     {"SIGSTOP", SIGSTOP}, {"SIGTSTP", SIGTSTP},   {"SIGTTIN", SIGTTIN},
    {"SIGTTOU", SIGTTOU},     {"SIGURG", SIGURG},   {"SIGXCPU", SIGXCPU},   {"SIGXFSZ", SIGXFSZ},
    {"SIGVTALRM", SIGVTALRM}, {"SIGPROF", SIGPROF}, {"SIGWINCH", SIGWINCH}, {"SIGIO", SIGIO},
    {"SIGSYS", SIGSYS},
};

const char *fl_scn_signal_name(int sig)
{
    for (size_t i = 0; i < sizeof signals / sizeof signals[0]; i++)
        if (signals[i].sig == sig)
            return signals[i].name;
    return NULL;
}

int fl_scn_signal_parse(const char *s)
{
    if (isdigit((unsigned char)s[0])) {
        char *end;
        long v = strtol(s, &end, 10);
        if (*end || v < 1 || v > 64)
            return -EINVAL;
        return (int)v;
    }
    for (size_t i = 0; i < sizeof signals / sizeof signals[0]; i++)
        if (strcasecmp(signals[i].name, s) == 0 || strcasecmp(signals[i].name + 3, s) == 0)
            return signals[i].sig;
    return -EINVAL;
}

/* Signal names for suggestions. */
size_t fl_scn_signal_names(const char **out, size_t max)
{
    size_t n = 0;
    for (size_t i = 0; i < sizeof signals / sizeof signals[0] && n < max; i++)
        out[n++] = signals[i].name;
    return n;
}

/* ---- names ------------------------------------------------------------- */

const char *fl_scn_trigger_kind_name(enum fl_scn_trigger_kind k)
{
    switch (k) {
    case FL_SCN_TRIG_AT: return "at";
    case FL_SCN_TRIG_EVENT: return "after";
    case FL_SCN_TRIG_LOG: return "on_log";
    }
    return "?";
}

int fl_scn_host_find(const struct fl_scenario *s, const char *name)
{
    for (size_t i = 0; i < s->n_hosts; i++)
        if (s->hosts[i].name && strcmp(s->hosts[i].name, name) == 0)
            return (int)i;
    return -1;
}

int fl_scn_job_find(const struct fl_scenario *s, const char *name)
{
    for (size_t i = 0; i < s->n_jobs; i++)
        if (s->jobs[i].name && strcmp(s->jobs[i].name, name) == 0)
            return (int)i;
    return -1;
}

int fl_scn_job_placeholder(const struct fl_scenario *s, const char *name, size_t len, bool *count)
{
    static const char *const suffix[2] = {"_hosts", "_count"};
    for (int w = 0; w < 2; w++) {
        size_t sl = strlen(suffix[w]);
        if (len <= sl || memcmp(name + len - sl, suffix[w], sl) != 0)
            continue;
        size_t jl = len - sl;
        for (size_t j = 0; j < s->n_jobs; j++) /* jobs of cluster: only, not finals */
            if (!s->jobs[j].final && strlen(s->jobs[j].name) == jl &&
                memcmp(s->jobs[j].name, name, jl) == 0) {
                if (count)
                    *count = w == 1;
                return (int)j;
            }
        return -1;
    }
    return -1;
}

int fl_scn_task_index(const struct fl_scenario *s, int job, int task)
{
    if (job < 0 || (size_t)job >= s->n_jobs || task < 0 || (size_t)task >= s->jobs[job].n_tasks)
        return -1;
    return (int)(s->jobs[job].first_task + (size_t)task);
}

const char *fl_scn_task_name(const struct fl_scenario *s, int task, char *buf, size_t len)
{
    if (task < 0 || (size_t)task >= s->n_tasks)
        snprintf(buf, len, "?");
    else
        snprintf(buf, len, "%s:%d", s->jobs[s->tasks[task].job].name, s->tasks[task].index);
    return buf;
}

bool fl_scn_check_covers(const struct fl_scenario *s, const struct fl_scn_check *c, int task)
{
    if (task < 0 || (size_t)task >= s->n_tasks)
        return false;
    switch (c->target) {
    case FL_SCN_EXP_ALL: return !s->tasks[task].final;
    case FL_SCN_EXP_CHIEF: return task == s->chief_task;
    case FL_SCN_EXP_JOB: return s->tasks[task].job == c->index;
    case FL_SCN_EXP_TASK: return task == c->index;
    case FL_SCN_EXP_HOST: return s->tasks[task].host == c->index && !s->tasks[task].final;
    }
    return false;
}

/* ---- listing ----------------------------------------------------------- */

struct strlist {
    char **v;
    size_t n, cap;
};

static int strlist_add(struct strlist *l, char *s)
{
    if (!s)
        return -ENOMEM;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        char **v = realloc(l->v, cap * sizeof *v);
        if (!v) {
            free(s);
            return -ENOMEM;
        }
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = s;
    return 0;
}

static bool is_yaml_name(const char *n)
{
    size_t l = strlen(n);
    return (l > 5 && strcmp(n + l - 5, ".yaml") == 0) || (l > 4 && strcmp(n + l - 4, ".yml") == 0);
}

static int walk(const char *dir, struct strlist *l, int depth, char *err, size_t errlen)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int rc = 0;

    if (!d) {
        rc = -errno;
        snprintf(err, errlen, "%s: %s", dir, strerror(errno));
        return rc;
    }
    if (depth > 32) {
        closedir(d);
        snprintf(err, errlen, "%s: directories nested too deep", dir);
        return -ELOOP;
    }
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char *p;
        struct stat st;
        if (asprintf(&p, "%s%s%s", dir, dir[strlen(dir) - 1] == '/' ? "" : "/", e->d_name) < 0) {
            rc = -ENOMEM;
            break;
        }
        if (stat(p, &st) < 0) {
            free(p);
            continue; /* dangling link: not a scenario */
        }
        if (S_ISDIR(st.st_mode)) {
            rc = walk(p, l, depth + 1, err, errlen);
            free(p);
            if (rc < 0)
                break;
        } else if (S_ISREG(st.st_mode) && is_yaml_name(e->d_name)) {
            if ((rc = strlist_add(l, p)) < 0)
                break;
        } else {
            free(p);
        }
    }
    closedir(d);
    return rc;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int fl_scenario_list(const char *path, char ***out, size_t *n, char *err, size_t errlen)
{
    struct strlist l = {0};
    struct stat st;
    int rc;

    *out = NULL;
    *n = 0;
    if (stat(path, &st) < 0) {
        rc = -errno;
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return rc;
    }
    if (S_ISDIR(st.st_mode)) {
        if ((rc = walk(path, &l, 0, err, errlen)) < 0) {
            fl_scenario_list_free(l.v, l.n);
            return rc;
        }
        qsort(l.v, l.n, sizeof *l.v, cmp_str);
    } else if ((rc = strlist_add(&l, strdup(path))) < 0) {
        snprintf(err, errlen, "%s: out of memory", path);
        return rc;
    }
    *out = l.v;
    *n = l.n;
    return 0;
}

void fl_scenario_list_free(char **list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(list[i]);
    free(list);
}

/* ---- variants ---------------------------------------------------------- */

size_t fl_scn_variant_count(const struct fl_scenario *s)
{
    size_t n = 1;
    for (size_t d = 0; d < s->n_dims; d++)
        n *= s->dims[d].n_values;
    return n;
}

int fl_scn_variant_value(const struct fl_scenario *s, size_t v, size_t dim)
{
    if (dim >= s->n_dims)
        return -1;
    for (size_t d = s->n_dims; d-- > dim + 1;)
        v /= s->dims[d].n_values;
    return (int)(v % s->dims[dim].n_values);
}

const char *fl_scn_variant_value_str(const struct fl_scenario *s, size_t v, size_t dim)
{
    int i = fl_scn_variant_value(s, v, dim);
    return i < 0 ? NULL : s->dims[dim].values[i];
}

const char *fl_scn_variant_lookup(const struct fl_scenario *s, size_t v, const char *key)
{
    for (size_t d = 0; d < s->n_dims; d++)
        if (strcmp(s->dims[d].key, key) == 0)
            return fl_scn_variant_value_str(s, v, d);
    return NULL;
}

const char *fl_scn_variant_name(const struct fl_scenario *s, size_t v, char *buf, size_t len)
{
    size_t used = 0;
    if (len == 0)
        return buf;
    buf[0] = 0;
    if (s->n_dims == 0) {
        snprintf(buf, len, "default");
        return buf;
    }
    for (size_t d = 0; d < s->n_dims && used < len; d++) {
        int w = snprintf(buf + used, len - used, "%s%s=%s", d ? "," : "", s->dims[d].key,
                         fl_scn_variant_value_str(s, v, d));
        if (w < 0)
            break;
        used += (size_t)w;
    }
    return buf;
}

/* ---- selectors --------------------------------------------------------- */

static int add_term(struct fl_scn_selector *sel, int dim, int value)
{
    for (size_t i = 0; i < sel->n_terms; i++)
        if (sel->terms[i].dim == dim && sel->terms[i].value == value)
            return 0;
    struct fl_scn_sel_term *t = realloc(sel->terms, (sel->n_terms + 1) * sizeof *t);
    if (!t)
        return -ENOMEM;
    sel->terms = t;
    t[sel->n_terms].dim = dim;
    t[sel->n_terms++].value = value;
    return 0;
}

static int find_dim(const struct fl_scenario *s, const char *key, size_t len)
{
    for (size_t d = 0; d < s->n_dims; d++)
        if (strlen(s->dims[d].key) == len && strncmp(s->dims[d].key, key, len) == 0)
            return (int)d;
    return -1;
}

static int find_value(const struct fl_scn_dim *d, const char *v, size_t len)
{
    for (size_t i = 0; i < d->n_values; i++)
        if (strlen(d->values[i]) == len && strncmp(d->values[i], v, len) == 0)
            return (int)i;
    return -1;
}

/*
 * Adds the terms of one selector text to sel.  'strict' (selectors in the
 * file) rejects naming a dimension twice.  Messages have no position.
 */
int fl_scn_selector_add_terms(const struct fl_scenario *s, const char *text,
                              struct fl_scn_selector *sel, bool strict, char *err, size_t errlen)
{
    const char *p = text;
    size_t start_terms = sel->n_terms;
    int rc;

    if (strcmp(text, "all") == 0 || (s->n_dims == 0 && strcmp(text, "default") == 0))
        return 0;
    if (!*text) {
        snprintf(err, errlen, "empty variant selector (write 'all', a value, or key=value)");
        return -EINVAL;
    }
    if (s->n_dims == 0) {
        snprintf(err, errlen, "variant selector '%s' but the scenario has no variants (use 'all')",
                 text);
        return -ENOENT;
    }
    for (;;) {
        size_t len = strcspn(p, ",");
        int d, vi;
        while (len && (*p == ' ')) {
            p++;
            len--;
        }
        while (len && p[len - 1] == ' ')
            len--;
        if (len == 0) {
            snprintf(err, errlen,
                     "bad variant selector '%s': empty term (expected key=value[,key=value])",
                     text);
            return -EINVAL;
        }
        const char *eq = memchr(p, '=', len);
        if (!eq) {
            /* A bare value: find the one dimension that has it. */
            d = -1;
            vi = -1;
            for (size_t k = 0; k < s->n_dims; k++) {
                int x = find_value(&s->dims[k], p, len);
                if (x < 0)
                    continue;
                if (d >= 0) {
                    snprintf(err, errlen,
                             "'%.*s' is a value of both '%s' and '%s'; write %s=%.*s or %s=%.*s",
                             (int)len, p, s->dims[d].key, s->dims[k].key, s->dims[d].key, (int)len,
                             p, s->dims[k].key, (int)len, p);
                    return -EINVAL;
                }
                d = (int)k;
                vi = x;
            }
            if (d < 0) {
                size_t nc = 0;
                for (size_t k = 0; k < s->n_dims; k++)
                    nc += s->dims[k].n_values;
                const char **cands = calloc(nc + 1, sizeof *cands);
                char word[256];
                snprintf(word, sizeof word, "%.*s", (int)len, p);
                nc = 0;
                for (size_t k = 0; k < s->n_dims && cands; k++)
                    for (size_t i = 0; i < s->dims[k].n_values; i++)
                        cands[nc++] = s->dims[k].values[i];
                snprintf(err, errlen, "'%s' is not a value of any variant key", word);
                if (cands)
                    fl_suggest_append(err, errlen, word, cands, nc);
                free(cands);
                return -ENOENT;
            }
        } else {
            size_t klen = (size_t)(eq - p), vlen = len - klen - 1;
            const char *v = eq + 1;
            while (klen && p[klen - 1] == ' ')
                klen--;
            while (vlen && *v == ' ') {
                v++;
                vlen--;
            }
            if (klen == 0 || vlen == 0) {
                snprintf(err, errlen, "bad variant selector '%s' (expected key=value[,key=value])",
                         text);
                return -EINVAL;
            }
            d = find_dim(s, p, klen);
            if (d < 0) {
                char word[256];
                const char **cands = calloc(s->n_dims + 1, sizeof *cands);
                snprintf(word, sizeof word, "%.*s", (int)klen, p);
                for (size_t i = 0; i < s->n_dims && cands; i++)
                    cands[i] = s->dims[i].key;
                snprintf(err, errlen, "unknown variant key '%s'", word);
                if (cands)
                    fl_suggest_append(err, errlen, word, cands, s->n_dims);
                free(cands);
                return -ENOENT;
            }
            vi = find_value(&s->dims[d], v, vlen);
            if (vi < 0) {
                char word[256];
                snprintf(word, sizeof word, "%.*s", (int)vlen, v);
                snprintf(err, errlen, "unknown value '%s' for variant key '%s'", word,
                         s->dims[d].key);
                if (!fl_suggest(word, (const char *const *)s->dims[d].values,
                                s->dims[d].n_values)) {
                    size_t used = strlen(err);
                    for (size_t i = 0; i < s->dims[d].n_values && used < errlen; i++) {
                        int w = snprintf(err + used, errlen - used, "%s%s%s",
                                         i ? ", " : " (values: ", s->dims[d].values[i],
                                         i + 1 == s->dims[d].n_values ? ")" : "");
                        if (w < 0)
                            break;
                        used += (size_t)w;
                    }
                } else {
                    fl_suggest_append(err, errlen, word, (const char *const *)s->dims[d].values,
                                      s->dims[d].n_values);
                }
                return -EINVAL;
            }
        }
        if (strict) {
            for (size_t i = start_terms; i < sel->n_terms; i++)
                if (sel->terms[i].dim == d) {
                    snprintf(err, errlen, "variant selector '%s' names '%s' twice", text,
                             s->dims[d].key);
                    return -EINVAL;
                }
        }
        if ((rc = add_term(sel, d, vi)) < 0)
            return rc;
        p += strcspn(p, ",");
        if (!*p)
            break;
        p++;
    }
    return 0;
}

int fl_scn_selector_parse(const struct fl_scenario *s, const char *text,
                          struct fl_scn_selector *sel, char *err, size_t errlen)
{
    int rc;
    memset(sel, 0, sizeof *sel);
    if (!(sel->text = strdup(text)))
        return -ENOMEM;
    if ((rc = fl_scn_selector_add_terms(s, text, sel, true, err, errlen)) < 0)
        fl_scn_selector_free(sel);
    return rc;
}

int fl_scn_variant_filter_add(const struct fl_scenario *s, struct fl_scn_selector *filter,
                              const char *spec, char *err, size_t errlen)
{
    char msg[512];
    int rc = fl_scn_selector_add_terms(s, spec, filter, false, msg, sizeof msg);
    if (rc < 0) {
        snprintf(err, errlen, "--variant %s: %s", spec, msg);
        return rc;
    }
    size_t old = filter->text ? strlen(filter->text) : 0;
    char *t = realloc(filter->text, old + strlen(spec) + 2);
    if (!t)
        return -ENOMEM;
    if (old)
        t[old++] = ' ';
    strcpy(t + old, spec);
    filter->text = t;
    return 0;
}

bool fl_scn_selector_match(const struct fl_scenario *s, const struct fl_scn_selector *sel, size_t v)
{
    if (!sel || sel->n_terms == 0)
        return true;
    for (size_t d = 0; d < s->n_dims; d++) {
        bool named = false, ok = false;
        int val = fl_scn_variant_value(s, v, d);
        for (size_t i = 0; i < sel->n_terms; i++) {
            if (sel->terms[i].dim != (int)d)
                continue;
            named = true;
            if (sel->terms[i].value == val)
                ok = true;
        }
        if (named && !ok)
            return false;
    }
    return true;
}

void fl_scn_selector_free(struct fl_scn_selector *sel)
{
    if (!sel)
        return;
    free(sel->terms);
    free(sel->text);
    memset(sel, 0, sizeof *sel);
}

bool fl_scn_fault_applies(const struct fl_scenario *s, const struct fl_scn_fault *f, size_t v)
{
    return !f->has_variant || fl_scn_selector_match(s, &f->variant, v);
}

bool fl_scn_final_applies(const struct fl_scenario *s, int task, size_t v)
{
    if (task < 0 || (size_t)task >= s->n_tasks || !s->tasks[task].final)
        return false;
    const struct fl_scn_final *f = s->jobs[s->tasks[task].job].final;
    return !f->has_variant || fl_scn_selector_match(s, &f->variant, v);
}

/* ---- expansion --------------------------------------------------------- */

struct xctx {
    const struct fl_scenario *s;
    int task;
    size_t v;
    const struct fl_scn_run_ctx *rc;
    char *scratch[8];
    int n_scratch;
    char num[64];
};

static const char *keep(struct xctx *x, char *p)
{
    if (!p)
        return NULL;
    if (x->n_scratch == (int)(sizeof x->scratch / sizeof x->scratch[0])) {
        free(x->scratch[0]);
        memmove(x->scratch, x->scratch + 1, sizeof x->scratch - sizeof x->scratch[0]);
        x->n_scratch--;
    }
    x->scratch[x->n_scratch++] = p;
    return p;
}

static bool name_is(const char *name, size_t len, const char *lit)
{
    return strlen(lit) == len && memcmp(name, lit, len) == 0;
}

static const char *x_lookup(void *vx, const char *name, size_t len)
{
    struct xctx *x = vx;
    const struct fl_scenario *s = x->s;
    const struct fl_scn_task *t = &s->tasks[x->task];
    int j;

    if (name_is(name, len, "job"))
        return s->jobs[t->job].name;
    if (name_is(name, len, "task")) {
        snprintf(x->num, sizeof x->num, "%d", t->index);
        return keep(x, strdup(x->num));
    }
    if (name_is(name, len, "host"))
        return s->hosts[t->host].name;
    if (name_is(name, len, "addr"))
        return x->rc && x->rc->host_addrs && x->rc->host_addrs[t->host] ? x->rc->host_addrs[t->host]
                                                                        : "";
    if (name_is(name, len, "port")) {
        snprintf(x->num, sizeof x->num, "%d", t->port);
        return keep(x, strdup(x->num));
    }
    if (name_is(name, len, "chief"))
        return t->chief ? "1" : "0";
    if (name_is(name, len, "run_id"))
        return x->rc && x->rc->run_id ? x->rc->run_id : "";
    if (name_is(name, len, "seed")) {
        snprintf(x->num, sizeof x->num, "%" PRIu64, x->rc ? x->rc->seed : s->seed);
        return keep(x, strdup(x->num));
    }
    if (name_is(name, len, "workdir"))
        return s->workdir;
    if (name_is(name, len, "bin"))
        return x->rc && x->rc->bin ? x->rc->bin : "";
    if (name_is(name, len, "scenario_dir"))
        return s->dir;
    int d = find_dim(s, name, len);
    if (d >= 0)
        return fl_scn_variant_value_str(s, x->v, (size_t)d);
    bool count;
    if ((j = fl_scn_job_placeholder(s, name, len, &count)) < 0)
        return NULL;
    if (count) {
        snprintf(x->num, sizeof x->num, "%zu", s->jobs[j].n_tasks);
        return keep(x, strdup(x->num));
    }
    const struct fl_scn_job *job = &s->jobs[j];
    size_t cap = 1;
    for (size_t i = 0; i < job->n_tasks; i++)
        cap += strlen(s->hosts[job->task_hosts[i]].name) + 8;
    char *out = malloc(cap), *p = out;
    if (!out)
        return NULL;
    for (size_t i = 0; i < job->n_tasks; i++) {
        const struct fl_scn_task *jt = &s->tasks[job->first_task + i];
        p += sprintf(p, "%s%s:%d", i ? "," : "", s->hosts[jt->host].name, jt->port);
    }
    *p = 0;
    return keep(x, out);
}

int fl_scn_expand(const struct fl_scenario *s, int task, size_t v, const struct fl_scn_run_ctx *ctx,
                  const char *tmpl, char **out, char *err, size_t errlen)
{
    struct xctx x = {.s = s, .task = task, .v = v, .rc = ctx};
    int rc;

    *out = NULL;
    if (task < 0 || (size_t)task >= s->n_tasks || v >= fl_scn_variant_count(s)) {
        snprintf(err, errlen, "no task %d / variant %zu in scenario '%s'", task, v, s->name);
        return -EINVAL;
    }
    rc = fl_tmpl_expand(tmpl, x_lookup, &x, out, err, errlen);
    for (int i = 0; i < x.n_scratch; i++)
        free(x.scratch[i]);
    return rc;
}
