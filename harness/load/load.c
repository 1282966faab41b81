/*
 * load.c: loads a scenario file and validates it into struct
 * fl_scenario (scenario.h; the format is documented in scenarios/README.md).
 *
 * Two passes over the file: scenario/yaml.c builds a node tree with line:
 * column marks, then the functions below walk it section by section, in an
 * order where every section only refers to sections already loaded:
 * top-level keys, name/about/seed/timeout/workdir, hosts, variants,
 * cluster, run (commands, env, ports, chief), shared, final (each entry a
 * job of one task after those of cluster:), then faults and expect
 * (faults.c, expect.c).  The checks of single values (types,
 * durations, references, regexes, messages) are in scenario/values.c.  The
 * first problem stops the load with "file:line:column: message"; nothing
 * outside the returned struct is touched, so the caller has created nothing
 * when validation fails.
 *
 * Invariant of a loaded scenario: every index is in range, every regex is
 * compiled, every template uses only known placeholders, and the struct
 * owns all its memory (fl_scenario_free releases a partly built one too).
 */
#include "harness/base/rng.h"
#include "harness//load/load.h"
#include "harness/scenario/scenario.h"
#include "harness/load/sections.h"
#include "harness/scenario/yaml.h"
#include "harness/base/suggest.h"
#include "harness/scenario/template.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const builtin_placeholders[] = {
    "job",    "task", "host",    "addr", "port",         "chief",
    "run_id", "seed", "workdir", "bin",  "scenario_dir",
};

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
    if (!(islower((unsigned char)n[0]) || n[0] == '_' ||
          (upper_ok && isupper((unsigned char)n[0]))))
        return false;
    for (const char *p = n; *p; p++)
        if (!(islower((unsigned char)*p) || isdigit((unsigned char)*p) || *p == '_' ||
              (upper_ok && isupper((unsigned char)*p))))
            return false;
    return strlen(n) <= 63;
}

/* ---- hosts ------------------------------------------------------------- */

static const char *const reserved_names[] = {"all", "chief", "files", "events", "checkpoint"};

/*
 * Paths on a host's disk, compared as the filesystem sees them: a copy of
 * relative path p without empty and "." components ("a//./b/" -> "a/b",
 * "." -> "").  path_inside(a, b): a lies strictly below directory b.
 */
static char *norm_rel(struct fl_scn_vctx *c, const char *p)
{
    char *out = fl_scn_zalloc(c, strlen(p) + 1, 1), *o = out;
    if (!out)
        return NULL;
    while (*p) {
        size_t l = strcspn(p, "/");
        if (l && !(l == 1 && p[0] == '.')) {
            if (o != out)
                *o++ = '/';
            memcpy(o, p, l);
            o += l;
        }
        p += l;
        while (*p == '/')
            p++;
    }
    *o = 0;
    return out;
}

static bool path_inside(const char *a, const char *b)
{
    size_t l = strlen(b);
    if (!*a)
        return false;
    return !l || (strncmp(a, b, l) == 0 && a[l] == '/');
}

/* Every disk file can be written as a file: it names a file, not a
 * directory, and no other file or dir of the disk lies inside it. */
static int check_disk_paths(struct fl_scn_vctx *c, const struct fl_scn_host *h)
{
    char **nf = fl_scn_zalloc(c, h->n_files, sizeof *nf);
    char **nd = fl_scn_zalloc(c, h->n_dirs, sizeof *nd);
    int rc = nf && nd ? 0 : -ENOMEM;

    for (size_t i = 0; i < h->n_files && rc == 0; i++)
        if (!(nf[i] = norm_rel(c, h->files[i].path)))
            rc = -ENOMEM;
    for (size_t i = 0; i < h->n_dirs && rc == 0; i++)
        if (!(nd[i] = norm_rel(c, h->dirs[i].path)))
            rc = -ENOMEM;
    for (size_t i = 0; i < h->n_files && rc == 0; i++) {
        const struct fl_scn_file *f = &h->files[i];
        const char *last = strrchr(f->path, '/');
        last = last ? last + 1 : f->path;
        if (!*nf[i] || !*last || strcmp(last, ".") == 0) {
            rc = fl_scn_verr(
                c, f->loc,
                "disk file '%s' names a directory, not a file (list directories in 'dirs')",
                f->path);
            break;
        }
        for (size_t j = 0; j < h->n_files && rc == 0; j++) {
            if (j < i && strcmp(nf[i], nf[j]) == 0)
                rc = fl_scn_verr(c, f->loc,
                                 "disk file '%s' is listed twice (first as '%s' at line %d)",
                                 f->path, h->files[j].path, h->files[j].loc.line);
            else if (path_inside(nf[j], nf[i]))
                rc = fl_scn_verr(c, f->loc,
                                 "disk file '%s' cannot also be a directory: disk file '%s' (line "
                                 "%d) is inside it",
                                 f->path, h->files[j].path, h->files[j].loc.line);
        }
        for (size_t d = 0; d < h->n_dirs && rc == 0; d++) {
            if (strcmp(nf[i], nd[d]) == 0)
                rc = fl_scn_verr(
                    c, f->loc,
                    "disk file '%s' cannot also be a directory: it is listed in 'dirs' (line %d)",
                    f->path, h->dirs[d].loc.line);
            else if (path_inside(nd[d], nf[i]))
                rc = fl_scn_verr(c, f->loc,
                                 "disk file '%s' cannot also be a directory: disk dir '%s' (line "
                                 "%d) is inside it",
                                 f->path, h->dirs[d].path, h->dirs[d].loc.line);
        }
    }
    for (size_t i = 0; nf && i < h->n_files; i++)
        free(nf[i]);
    for (size_t i = 0; nd && i < h->n_dirs; i++)
        free(nd[i]);
    free(nf);
    free(nd);
    return rc;
}

static int load_host_options(struct fl_scn_vctx *c, struct fl_scn_host *h, const ynode *opt)
{
    static const char *const keys[] = {"disk", "clock_offset", "clock_drift", "clock_via",
                                       "privileged"};
    static const char *const disk_keys[] = {"size", "dirs", "files", "fs"};
    char where[128];
    int rc;

    if (fl_scn_yaml_is_null(opt))
        return 0;
    snprintf(where, sizeof where, "options of host '%s'", h->name);
    if ((rc = fl_scn_want(c, opt, FL_YN_MAP, where)) < 0 ||
        (rc = fl_scn_check_keys(c, opt, keys, ARRAY_LEN(keys), where)) < 0)
        return rc;
    const ynode *pv = fl_scn_yaml_get(opt, "privileged", NULL);
    if (pv && (rc = fl_scn_get_bool(c, pv, "'privileged'", &h->privileged)) < 0)
        return rc;
    const ynode *co = fl_scn_yaml_get(opt, "clock_offset", NULL);
    if (co) {
        if ((rc = fl_scn_get_signed_ms(c, co, "'clock_offset'", &h->clock_offset_ms)) < 0)
            return rc;
        h->clock_offset_set = true;
    }
    const ynode *cd = fl_scn_yaml_get(opt, "clock_drift", NULL);
    if (cd) {
        if ((rc = fl_scn_get_drift(c, cd, "'clock_drift'", &h->clock_drift_ppm)) < 0)
            return rc;
        h->clock_drift_set = true;
    }
    const ynode *cv = fl_scn_yaml_get(opt, "clock_via", NULL);
    bool libc = false;
    if (cv && (rc = fl_scn_get_either(c, cv, "'clock_via'", "vdso", "libc",
                                      "vdso (faultline's vDSO: every program, the default) or "
                                      "libc (libfaketime: programs that read the clock through "
                                      "the dynamic C library)",
                                      &libc)) < 0)
        return rc;
    h->clock_via = libc ? FL_SCN_CLOCK_LIBC : FL_SCN_CLOCK_VDSO;
#if !defined(__x86_64__)
    /* faultline's vDSO is x86-64's: elsewhere libfaketime is what there is */
    if ((h->clock_offset_set || h->clock_drift_set) && h->clock_via != FL_SCN_CLOCK_LIBC)
        return fl_scn_verr(c, (co ? co : cd)->loc,
                           "host '%s': clocks moved for every program (faultline's vDSO) work "
                           "on x86-64 only; on this machine write clock_via: libc (libfaketime: "
                           "programs that read the clock through the dynamic C library, not Go "
                           "or static ones)",
                           h->name);
#endif
    const ynode *disk = fl_scn_yaml_get(opt, "disk", NULL);
    if (!disk || fl_scn_yaml_is_null(disk))
        return 0;
    snprintf(where, sizeof where, "disk of host '%s'", h->name);
    if ((rc = fl_scn_want(c, disk, FL_YN_MAP, where)) < 0 ||
        (rc = fl_scn_check_keys(c, disk, disk_keys, ARRAY_LEN(disk_keys), where)) < 0)
        return rc;
    const ynode *fsn = fl_scn_yaml_get(disk, "fs", NULL);
    if (fsn && (rc = fl_scn_get_bool(c, fsn, "disk 'fs'", &h->disk_fs)) < 0)
        return rc;
    const ynode *size = fl_scn_yaml_get(disk, "size", NULL);
    if (size) {
        if ((rc = fl_scn_want(c, size, FL_YN_SCALAR, "'size'")) < 0)
            return rc;
        if (fl_scn_size_parse(size->value, &h->disk_size) < 0)
            return fl_scn_verr(c, size->loc,
                               "disk 'size' must be a size like 4096, 512K, 64M or 1G, not '%s'",
                               size->value);
        if (h->disk_size == 0)
            return fl_scn_verr(c, size->loc,
                               "disk size must be larger than 0 (omit it for no limit)");
        if (h->disk_size < 64 * 1024)
            return fl_scn_verr(c, size->loc, "disk size %s is too small (at least 64K)",
                               size->value);
    }
    const ynode *dirs = fl_scn_yaml_get(disk, "dirs", NULL);
    if (dirs && !fl_scn_yaml_is_null(dirs)) {
        if ((rc = fl_scn_want(c, dirs, FL_YN_SEQ, "'dirs'")) < 0)
            return rc;
        if (!(h->dirs = fl_scn_zalloc(c, dirs->n, sizeof *h->dirs)))
            return -ENOMEM;
        h->n_dirs = dirs->n;
        for (size_t i = 0; i < dirs->n; i++) {
            const ynode *d = dirs->items[i];
            if ((rc = fl_scn_get_path(c, d, "disk dir", FL_SCN_PATH_REL, &h->dirs[i].path)) < 0)
                return rc;
            h->dirs[i].loc = d->loc;
        }
    }
    const ynode *files = fl_scn_yaml_get(disk, "files", NULL);
    if (files && !fl_scn_yaml_is_null(files)) {
        if ((rc = fl_scn_want(c, files, FL_YN_MAP, "'files'")) < 0)
            return rc;
        if (!(h->files = fl_scn_zalloc(c, files->n, sizeof *h->files)))
            return -ENOMEM;
        h->n_files = files->n;
        for (size_t i = 0; i < files->n; i++) {
            const ynode *k = files->keys[i], *v = files->items[i];
            struct fl_scn_file *f = &h->files[i];
            f->loc = k->loc;
            if (!*k->value)
                return fl_scn_verr(c, k->loc, "disk file path must not be empty");
            /* "logs/" or "logs/." names a directory: seen before the
             * normalisation takes the end away */
            size_t kl = strlen(k->value);
            if (k->value[kl - 1] == '/' || !strcmp(k->value, ".") ||
                (kl >= 2 && !strcmp(k->value + kl - 2, "/.")))
                return fl_scn_verr(
                    c, k->loc,
                    "disk file '%s' names a directory, not a file (list directories in 'dirs')",
                    k->value);
            if ((rc = fl_scn_get_path(c, k, "disk file", FL_SCN_PATH_REL, &f->path)) < 0)
                return rc;
            if (fl_scn_yaml_is_null(v) && v->type == FL_YN_SCALAR) {
                if ((rc = fl_scn_dup_str(c, "", &f->content)) < 0)
                    return rc;
            } else {
                char what[300];
                snprintf(what, sizeof what, "content of file '%s'", k->value);
                if ((rc = fl_scn_get_str(c, v, what, &f->content)) < 0)
                    return rc;
                f->len = v->len;
            }
        }
    }
    return check_disk_paths(c, h);
}

static int add_host(struct fl_scn_vctx *c, const ynode *name, const ynode *opt)
{
    struct fl_scenario *s = c->s;
    struct fl_scn_host *h = &s->hosts[s->n_hosts];
    int rc;

    if ((rc = fl_scn_want(c, name, FL_YN_SCALAR, "a host name")) < 0)
        return rc;
    if (!valid_host_name(name->value))
        return fl_scn_verr(c, name->loc,
                           "bad host name '%s' (letters, digits, '-' and '_', starting with a "
                           "letter or digit, at most 63)",
                           name->value);
    for (size_t i = 0; i < ARRAY_LEN(reserved_names); i++)
        if (strcmp(name->value, reserved_names[i]) == 0)
            return fl_scn_verr(c, name->loc, "'%s' is reserved and cannot name a host",
                               name->value);
    int prev = fl_scn_host_find(s, name->value);
    if (prev >= 0)
        return fl_scn_verr(c, name->loc, "duplicate host '%s' (first at line %d column %d)",
                           name->value, s->hosts[prev].loc.line, s->hosts[prev].loc.col);
    if ((rc = fl_scn_dup_str(c, name->value, &h->name)) < 0)
        return rc;
    h->loc = name->loc;
    s->n_hosts++;
    return load_host_options(c, h, opt);
}

static int load_hosts(struct fl_scn_vctx *c, const ynode *hosts, struct fl_scn_loc top)
{
    struct fl_scenario *s = c->s;
    char b[64];
    int rc;

    if (!hosts)
        return fl_scn_verr(c, top, "missing 'hosts' (a list of host names, e.g. hosts: [ps0, w0])");
    if (hosts->type == FL_YN_SCALAR)
        return fl_scn_verr(c, hosts->loc,
                           "'hosts' must be a list of host names or a mapping, not %s",
                           fl_scn_describe(hosts, b, sizeof b));
    if (hosts->n == 0)
        return fl_scn_verr(c, hosts->loc, "'hosts' is empty: a scenario needs at least one host");
    if (hosts->n > FL_SCN_MAX_HOSTS)
        return fl_scn_verr(
            c, hosts->loc,
            "too many hosts (%zu): a run has at most %d (what its network switch takes)", hosts->n,
            FL_SCN_MAX_HOSTS);
    if (!(s->hosts = fl_scn_zalloc(c, hosts->n, sizeof *s->hosts)))
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

static int load_variants(struct fl_scn_vctx *c, const ynode *vars)
{
    struct fl_scenario *s = c->s;
    int rc;

    if (!vars || fl_scn_yaml_is_null(vars))
        return 0;
    if ((rc = fl_scn_want(c, vars, FL_YN_MAP, "'variants'")) < 0)
        return rc;
    if (!(s->dims = fl_scn_zalloc(c, vars->n, sizeof *s->dims)))
        return -ENOMEM;
    size_t total = 1, name_len = 0;
    for (size_t i = 0; i < vars->n; i++) {
        const ynode *k = vars->keys[i], *v = vars->items[i];
        struct fl_scn_dim *d = &s->dims[s->n_dims];
        if (!valid_ident(k->value, false))
            return fl_scn_verr(c, k->loc,
                               "bad variant key '%s' (lower-case letters, digits and '_', not "
                               "starting with a digit)",
                               k->value);
        if (is_builtin_placeholder(k->value))
            return fl_scn_verr(c, k->loc,
                               "variant key '%s' is a built-in placeholder; choose another name",
                               k->value);
        if ((rc = fl_scn_dup_str(c, k->value, &d->key)) < 0)
            return rc;
        d->loc = k->loc;
        s->n_dims++;
        char what[128];
        snprintf(what, sizeof what, "variant '%s'", k->value);
        if ((rc = fl_scn_want(c, v, FL_YN_SEQ, what)) < 0)
            return rc;
        if (v->n == 0)
            return fl_scn_verr(c, v->loc, "variant '%s' has no values", k->value);
        if (!(d->values = fl_scn_zalloc(c, v->n, sizeof *d->values)))
            return -ENOMEM;
        for (size_t j = 0; j < v->n; j++) {
            const ynode *val = v->items[j];
            if ((rc = fl_scn_want(c, val, FL_YN_SCALAR, "a variant value")) < 0)
                return rc;
            if (!valid_value(val->value))
                return fl_scn_verr(c, val->loc,
                                   "bad variant value '%s' (letters, digits, '.', '_', '+', '-')",
                                   val->value);
            if (strcmp(val->value, "all") == 0 || strcmp(val->value, "default") == 0)
                return fl_scn_verr(c, val->loc, "'%s' cannot be a variant value (it is a selector)",
                                   val->value);
            for (size_t q = 0; q < d->n_values; q++)
                if (strcmp(d->values[q], val->value) == 0)
                    return fl_scn_verr(c, val->loc, "duplicate value '%s' in variant '%s'",
                                       val->value, k->value);
            if ((rc = fl_scn_dup_str(c, val->value, &d->values[d->n_values])) < 0)
                return rc;
            d->n_values++;
        }
        total *= d->n_values;
        if (total > 4096)
            return fl_scn_verr(c, k->loc, "too many variants (more than 4096 combinations)");
        /* The longest name, "k=v,k2=v2": it is recorded and reported, and
         * two variants must never share a name cut at the same place. */
        size_t longest = 0;
        for (size_t q = 0; q < d->n_values; q++)
            if (strlen(d->values[q]) > longest)
                longest = strlen(d->values[q]);
        name_len += (i ? 1 : 0) + strlen(d->key) + 1 + longest;
        if (name_len >= FL_SCN_VARIANT_NAME_MAX)
            return fl_scn_verr(c, k->loc,
                               "variant names would be longer than %d characters (like k=v,k2=v2); "
                               "use shorter keys or values",
                               FL_SCN_VARIANT_NAME_MAX - 1);
    }
    return 0;
}

/* ---- cluster ----------------------------------------------------------- */

/* run's own keys; every other key of run: is a job name (run.<job>). */
static const char *const run_base_keys[] = {"command", "env", "port", "stop_when", "grace"};

static int load_cluster(struct fl_scn_vctx *c, const ynode *cl, struct fl_scn_loc top)
{
    struct fl_scenario *s = c->s;
    int rc;

    if (!cl)
        return fl_scn_verr(
            c, top, "missing 'cluster' (job name -> list of hosts, e.g. cluster: {worker: [w0]})");
    if ((rc = fl_scn_want(c, cl, FL_YN_MAP, "'cluster'")) < 0)
        return rc;
    if (cl->n == 0)
        return fl_scn_verr(c, cl->loc, "'cluster' has no jobs");
    if (!(s->jobs = fl_scn_zalloc(c, cl->n, sizeof *s->jobs)))
        return -ENOMEM;
    size_t total = 0;
    for (size_t i = 0; i < cl->n; i++) {
        const ynode *k = cl->keys[i], *v = cl->items[i];
        struct fl_scn_job *j = &s->jobs[s->n_jobs];
        if (!valid_ident(k->value, false) || k->value[0] == '_')
            return fl_scn_verr(
                c, k->loc,
                "bad job name '%s' (lower-case letters, digits and '_', starting with a letter)",
                k->value);
        for (size_t r = 0; r < ARRAY_LEN(reserved_names); r++)
            if (strcmp(k->value, reserved_names[r]) == 0 && strcmp(k->value, "chief") != 0)
                return fl_scn_verr(c, k->loc, "'%s' is reserved and cannot name a job", k->value);
        /* run.<job> sits beside run's own keys: a job may not take one's name. */
        for (size_t r = 0; r < ARRAY_LEN(run_base_keys); r++)
            if (strcmp(k->value, run_base_keys[r]) == 0)
                return fl_scn_verr(
                    c, k->loc,
                    "'%s' is a key of run: and cannot name a job (run.%s would be ambiguous)",
                    k->value, k->value);
        int h = fl_scn_host_find(s, k->value);
        if (h >= 0)
            return fl_scn_verr(
                c, k->loc,
                "job '%s' has the name of a host (line %d); names of jobs and hosts must differ",
                k->value, s->hosts[h].loc.line);
        if ((rc = fl_scn_dup_str(c, k->value, &j->name)) < 0)
            return rc;
        j->loc = k->loc;
        s->n_jobs++;
        char what[128];
        snprintf(what, sizeof what, "job '%s'", k->value);
        if (fl_scn_yaml_is_null(v) || (v->type == FL_YN_SEQ && v->n == 0))
            return fl_scn_verr(c, fl_scn_yaml_is_null(v) ? k->loc : v->loc,
                               "job '%s' has no tasks (list its hosts, e.g. %s: [h0])", k->value,
                               k->value);
        if ((rc = fl_scn_want(c, v, FL_YN_SEQ, what)) < 0)
            return rc;
        if (!(j->task_hosts = fl_scn_zalloc(c, v->n, sizeof *j->task_hosts)))
            return -ENOMEM;
        for (size_t t = 0; t < v->n; t++) {
            if ((rc = fl_scn_resolve_host(c, v->items[t], what, &j->task_hosts[t])) < 0)
                return rc;
            j->n_tasks++;
        }
        j->first_task = total;
        total += j->n_tasks;
    }
    /* Variant keys must not shadow <job>_hosts / <job>_count. */
    for (size_t d = 0; d < s->n_dims; d++) {
        const char *k = s->dims[d].key;
        int j = fl_scn_job_placeholder(s, k, strlen(k), NULL);
        if (j >= 0)
            return fl_scn_verr(
                c, s->dims[d].loc,
                "variant key '%s' is a built-in placeholder of job '%s'; choose another name", k,
                s->jobs[j].name);
    }
    /* Flat tasks, chief. */
    if (!(s->tasks = fl_scn_zalloc(c, total, sizeof *s->tasks)))
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
    struct fl_scn_vctx *c = vc;
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
    return fl_scn_job_placeholder(s, name, len, NULL) >= 0;
}

static int check_template(struct fl_scn_vctx *c, const ynode *n)
{
    size_t off = 0, blen = 0;
    char msg[256];
    struct fl_scenario *s = c->s;

    if (fl_tmpl_check(n->value, known_placeholder, c, &off, &blen, msg, sizeof msg) == 0)
        return 0;
    struct fl_scn_loc l = fl_scn_loc_in_scalar(c, n, off, blen);
    fl_scn_verr(c, l, "%s", msg);
    if (blen > 2 && n->value[off] == '{') {
        /* Suggest the closest known placeholder. */
        size_t nc = ARRAY_LEN(builtin_placeholders) + s->n_dims + 2 * s->n_jobs;
        const char **cands = fl_scn_zalloc(c, nc, sizeof *cands);
        char **owned = fl_scn_zalloc(c, 2 * s->n_jobs + 1, sizeof *owned);
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
            if (s->jobs[j].final) /* a final has no {NAME_hosts} */
                continue;
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

static int load_env(struct fl_scn_vctx *c, const ynode *env, struct fl_scn_job *j)
{
    int rc;
    if (!env || fl_scn_yaml_is_null(env))
        return 0;
    if ((rc = fl_scn_want(c, env, FL_YN_MAP, "'env'")) < 0)
        return rc;
    for (size_t i = 0; i < env->n; i++) {
        const ynode *k = env->keys[i], *v = env->items[i];
        if (!valid_ident(k->value, true))
            return fl_scn_verr(c, k->loc, "bad environment variable name '%s'", k->value);
        if (strncmp(k->value, "FAULTLINE_", 10) == 0)
            return fl_scn_verr(c, k->loc, "'%s': FAULTLINE_* variables are set by the harness",
                               k->value);
        if (v->type != FL_YN_SCALAR)
            return fl_scn_want(c, v, FL_YN_SCALAR, "an env value");
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
            if ((rc = fl_scn_dup_str(c, k->value, &e->key)) < 0)
                return rc;
        } else {
            free(e->value);
            e->value = NULL;
        }
        if ((rc = fl_scn_dup_str(c, fl_scn_yaml_is_null(v) ? "" : v->value, &e->value)) < 0)
            return rc;
        e->loc = v->loc;
    }
    return 0;
}

/* A job's (or final's) command from its node, a checked template: not
 * empty; a folded (>) one joined into one line. */
static int take_command(struct fl_scn_vctx *c, const ynode *use, const char *what,
                        struct fl_scn_job *job)
{
    int rc;
    if (!*use->value || strspn(use->value, " \t\n") == use->len)
        return fl_scn_verr(c, use->loc, "the command of %s '%s' is empty", what, job->name);
    if ((rc = fl_scn_dup_str(c, use->value, &job->command)) < 0)
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
    return 0;
}

static int load_run(struct fl_scn_vctx *c, const ynode *run, struct fl_scn_loc top)
{
    struct fl_scenario *s = c->s;
    int rc;

    s->run.base_port = FL_SCN_DEFAULT_PORT;
    s->run.grace_ms = FL_SCN_DEFAULT_GRACE_MS;
    s->run.stop_all = true;
    if (!run)
        return fl_scn_verr(c, top, "missing 'run' (at least run: {command: ...})");
    if ((rc = fl_scn_want(c, run, FL_YN_MAP, "'run'")) < 0)
        return rc;
    c->run = run;
    /* Valid keys: the base keys and every job name. */
    {
        size_t nk = ARRAY_LEN(run_base_keys) + s->n_jobs;
        const char **keys = fl_scn_zalloc(c, nk, sizeof *keys);
        if (!keys)
            return -ENOMEM;
        memcpy(keys, run_base_keys, sizeof run_base_keys);
        for (size_t j = 0; j < s->n_jobs; j++)
            keys[ARRAY_LEN(run_base_keys) + j] = s->jobs[j].name;
        rc = fl_scn_check_keys(c, run, keys, nk, "run");
        free(keys);
        if (rc < 0)
            return rc;
    }
    const ynode *cmd = fl_scn_yaml_get(run, "command", NULL);
    const ynode *env = fl_scn_yaml_get(run, "env", NULL);
    if (cmd) {
        if ((rc = fl_scn_want(c, cmd, FL_YN_SCALAR, "'command'")) < 0 ||
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
            if ((rc = fl_scn_want(c, jo, FL_YN_MAP, where)) < 0 ||
                (rc = fl_scn_check_keys(c, jo, job_keys, 2, where)) < 0)
                return rc;
            jcmd = fl_scn_yaml_get(jo, "command", NULL);
            jenv = fl_scn_yaml_get(jo, "env", NULL);
            if (jcmd && ((rc = fl_scn_want(c, jcmd, FL_YN_SCALAR, "'command'")) < 0 ||
                         (rc = check_template(c, jcmd)) < 0))
                return rc;
        }
        const ynode *use = jcmd ? jcmd : cmd;
        if (!use)
            return fl_scn_verr(c, jk ? jk->loc : run->loc,
                               "job '%s' has no command (set run.command or run.%s.command)",
                               job->name, job->name);
        if ((rc = take_command(c, use, "job", job)) < 0 || (rc = load_env(c, env, job)) < 0 ||
            (rc = load_env(c, jenv, job)) < 0)
            return rc;
    }
    const ynode *port = fl_scn_yaml_get(run, "port", NULL);
    if (port) {
        long p;
        if ((rc = fl_scn_get_long(c, port, "'port'", 1, 65535, &p)) < 0)
            return rc;
        s->run.base_port = (int)p;
    }
    /* Ports: base + index of the task among the tasks on its host. */
    {
        int *per_host = fl_scn_zalloc(c, s->n_hosts, sizeof *per_host);
        if (!per_host)
            return -ENOMEM;
        for (size_t t = 0; t < s->n_tasks; t++)
            s->tasks[t].port = s->run.base_port + per_host[s->tasks[t].host]++;
        for (size_t t = 0; t < s->n_tasks; t++)
            if (s->tasks[t].port > 65535) {
                int cnt = per_host[s->tasks[t].host];
                free(per_host);
                return fl_scn_verr(
                    c, port ? port->loc : run->loc,
                    "run port %d leaves no room for %d tasks on host '%s' (ports above 65535)",
                    s->run.base_port, cnt, s->hosts[s->tasks[t].host].name);
            }
        free(per_host);
    }
    const ynode *grace = fl_scn_yaml_get(run, "grace", NULL);
    if (grace && (rc = fl_scn_get_duration(c, grace, "'grace'", true, &s->run.grace_ms)) < 0)
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
                return fl_scn_verr(c, sw->loc,
                                   "'stop_when' is empty (omit it to wait for every job)");
        } else if ((rc = fl_scn_want(c, sw, FL_YN_SCALAR, "'stop_when'")) < 0) {
            return rc;
        }
        if (!(s->run.stop_jobs = fl_scn_zalloc(c, n, sizeof *s->run.stop_jobs)))
            return -ENOMEM;
        s->run.stop_all = false;
        for (size_t i = 0; i < n; i++) {
            if ((rc = fl_scn_want(c, items[i], FL_YN_SCALAR, "a stop_when job")) < 0)
                return rc;
            if (n > 1 && strcmp(items[i]->value, "all") == 0)
                return fl_scn_verr(c, items[i]->loc,
                                   "stop_when: 'all' cannot be mixed with job names");
            if (strcmp(items[i]->value, "all") == 0) {
                s->run.stop_all = true;
                break;
            }
            int j = fl_scn_job_find(s, items[i]->value);
            int h = j < 0 ? fl_scn_host_find(s, items[i]->value) : -1;
            if (h >= 0) { /* a host: say which job(s) it runs */
                char jobs[256] = "";
                size_t l = 0;
                for (size_t q = 0; q < s->n_jobs; q++)
                    for (size_t t = 0; t < s->jobs[q].n_tasks; t++)
                        if (s->jobs[q].task_hosts[t] == h && l < sizeof jobs) {
                            l += (size_t)snprintf(jobs + l, sizeof jobs - l, "%s'%s'",
                                                  l ? ", " : "", s->jobs[q].name);
                            break;
                        }
                if (l)
                    return fl_scn_verr(c, items[i]->loc,
                                       "stop_when: '%s' is a host; stop_when takes job names "
                                       "(host %s runs job %s)",
                                       items[i]->value, items[i]->value, jobs);
                return fl_scn_verr(c, items[i]->loc,
                                   "stop_when: '%s' is a host; stop_when takes job names (and "
                                   "no job runs on %s)",
                                   items[i]->value, items[i]->value);
            }
            if (j < 0) {
                const char **names = fl_scn_zalloc(c, s->n_jobs, sizeof *names);
                if (!names)
                    return -ENOMEM;
                for (size_t q = 0; q < s->n_jobs; q++)
                    names[q] = s->jobs[q].name;
                fl_scn_verr(c, items[i]->loc, "unknown job '%s' in stop_when", items[i]->value);
                fl_scn_vsuggest(c, items[i]->value, names, s->n_jobs);
                free(names);
                return -EINVAL;
            }
            s->run.stop_jobs[s->run.n_stop_jobs++] = j;
        }
    }
    return 0;
}

/* ---- final ------------------------------------------------------------- */

/* One final: entry, NAME: {host, command, timeout, env, variant}, as a job
 * of one task appended to s->jobs (its task is added by the caller). */
static int load_final(struct fl_scn_vctx *c, const ynode *k, const ynode *v)
{
    static const char *const keys[] = {"host", "command", "timeout", "env", "variant"};
    struct fl_scenario *s = c->s;
    struct fl_scn_job *j = &s->jobs[s->n_jobs];
    char where[128];
    int rc;

    if (!valid_ident(k->value, false) || k->value[0] == '_')
        return fl_scn_verr(
            c, k->loc,
            "bad final name '%s' (lower-case letters, digits and '_', starting with a letter)",
            k->value);
    for (size_t r = 0; r < ARRAY_LEN(reserved_names); r++)
        if (strcmp(k->value, reserved_names[r]) == 0)
            return fl_scn_verr(c, k->loc, "'%s' is reserved and cannot name a final", k->value);
    int other = fl_scn_job_find(s, k->value);
    if (other >= 0)
        return fl_scn_verr(c, k->loc,
                           "final '%s' has the name of a job of cluster: (line %d); a final's "
                           "name must differ from every job and host",
                           k->value, s->jobs[other].loc.line);
    int h = fl_scn_host_find(s, k->value);
    if (h >= 0)
        return fl_scn_verr(c, k->loc,
                           "final '%s' has the name of a host (line %d); a final's name must "
                           "differ from every job and host",
                           k->value, s->hosts[h].loc.line);
    if ((rc = fl_scn_dup_str(c, k->value, &j->name)) < 0)
        return rc;
    j->loc = k->loc;
    s->n_jobs++;
    if (!(j->final = fl_scn_zalloc(c, 1, sizeof *j->final)))
        return -ENOMEM;
    j->final->loc = k->loc;
    j->final->timeout_ms = FL_SCN_DEFAULT_FINAL_TIMEOUT_MS;
    snprintf(where, sizeof where, "final '%s'", k->value);
    if (v->type != FL_YN_MAP) {
        char b[64];
        return fl_scn_verr(c, fl_scn_yaml_is_null(v) ? k->loc : v->loc,
                           "final '%s' must be a mapping like {host: h0, command: ...}, not %s",
                           k->value, fl_scn_describe(v, b, sizeof b));
    }
    if ((rc = fl_scn_check_keys(c, v, keys, ARRAY_LEN(keys), where)) < 0)
        return rc;
    const ynode *host = fl_scn_yaml_get(v, "host", NULL),
                *cmd = fl_scn_yaml_get(v, "command", NULL);
    const ynode *to = fl_scn_yaml_get(v, "timeout", NULL), *env = fl_scn_yaml_get(v, "env", NULL);
    const ynode *va = fl_scn_yaml_get(v, "variant", NULL);
    if (!host)
        return fl_scn_verr(c, v->loc, "final '%s' needs 'host' (the host it runs on)", k->value);
    if (!cmd)
        return fl_scn_verr(c, v->loc, "final '%s' needs 'command'", k->value);
    if (!(j->task_hosts = fl_scn_zalloc(c, 1, sizeof *j->task_hosts)))
        return -ENOMEM;
    if ((rc = fl_scn_resolve_host(c, host, where, &j->task_hosts[0])) < 0)
        return rc;
    j->n_tasks = 1;
    if ((rc = fl_scn_want(c, cmd, FL_YN_SCALAR, "'command'")) < 0 ||
        (rc = check_template(c, cmd)) < 0 || (rc = take_command(c, cmd, "final", j)) < 0)
        return rc;
    if (to && (rc = fl_scn_get_duration(c, to, "'timeout'", false, &j->final->timeout_ms)) < 0)
        return rc;
    /* run.env first, its own env over it (as a job's run.<job>.env) */
    if ((rc = load_env(c, c->run ? fl_scn_yaml_get(c->run, "env", NULL) : NULL, j)) < 0 ||
        (rc = load_env(c, env, j)) < 0)
        return rc;
    if (va) {
        char msg[512];
        if (va->type != FL_YN_SCALAR)
            return fl_scn_verr(c, va->loc,
                               "a final's 'variant' must be one selector ('legacy', 'k=v' or "
                               "'k=v,k2=v2')");
        if ((rc = fl_scn_selector_parse(s, va->value, &j->final->variant, msg, sizeof msg)) < 0)
            return rc == -ENOMEM ? rc : fl_scn_verr(c, va->loc, "%s", msg);
        j->final->variant.loc = va->loc;
        j->final->has_variant = true;
    }
    return 0;
}

/* final: NAME -> {host, command, ...}: a job of one task each, after the
 * jobs of cluster: (and its task after theirs). */
static int load_finals(struct fl_scn_vctx *c, const ynode *fin)
{
    struct fl_scenario *s = c->s;
    int rc;

    if (!fin || fl_scn_yaml_is_null(fin))
        return 0;
    if ((rc = fl_scn_want(c, fin, FL_YN_MAP, "'final' (name -> {host, command})")) < 0)
        return rc;
    struct fl_scn_job *jobs = realloc(s->jobs, (s->n_jobs + fin->n) * sizeof *jobs);
    if (!jobs)
        return -ENOMEM;
    s->jobs = jobs;
    memset(jobs + s->n_jobs, 0, fin->n * sizeof *jobs);
    struct fl_scn_task *tasks = realloc(s->tasks, (s->n_tasks + fin->n) * sizeof *tasks);
    if (!tasks)
        return -ENOMEM;
    s->tasks = tasks;
    for (size_t i = 0; i < fin->n; i++) {
        if ((rc = load_final(c, fin->keys[i], fin->items[i])) < 0)
            return rc;
        struct fl_scn_job *j = &s->jobs[s->n_jobs - 1];
        struct fl_scn_task *t = &s->tasks[s->n_tasks];
        *t = (struct fl_scn_task){
            .job = (int)(s->n_jobs - 1), .host = j->task_hosts[0], .final = true};
        /* its port: the next one on its host, as a task's */
        t->port = s->run.base_port;
        for (size_t q = 0; q < s->n_tasks; q++)
            t->port += s->tasks[q].host == t->host;
        if (t->port > 65535)
            return fl_scn_verr(c, fin->keys[i]->loc,
                               "run port %d leaves no port for final '%s' on host '%s' (ports "
                               "above 65535)",
                               s->run.base_port, j->name, s->hosts[t->host].name);
        j->first_task = s->n_tasks++;
        s->n_finals++;
    }
    return 0;
}

/* ---- shared ------------------------------------------------------------ */

/* Shared paths are mount points on each disk: one may not lie in another
 * (the outer mount hides the inner one's mount point). */
static int check_shared_path(struct fl_scn_vctx *c, const ynode *p, const struct fl_scn_shared *e)
{
    struct fl_scenario *s = c->s;
    char *me = norm_rel(c, e->path);
    int rc = me ? 0 : -ENOMEM;
    for (size_t q = 0; q + 1 < s->n_shared && rc == 0; q++) {
        char *other = norm_rel(c, s->shared[q].path);
        if (!other)
            rc = -ENOMEM;
        else if (strcmp(me, other) == 0)
            rc = fl_scn_verr(c, p->loc, "shared path '%s' is listed twice (first at line %d)",
                             e->path, s->shared[q].loc.line);
        else if (path_inside(me, other))
            rc = fl_scn_verr(
                c, p->loc,
                "shared path '%s' is inside shared path '%s' (line %d); shared paths cannot nest",
                e->path, s->shared[q].path, s->shared[q].loc.line);
        else if (path_inside(other, me))
            rc = fl_scn_verr(
                c, p->loc,
                "shared path '%s' (line %d) is inside shared path '%s'; shared paths cannot nest",
                s->shared[q].path, s->shared[q].loc.line, e->path);
        free(other);
    }
    free(me);
    return rc;
}

/* A host's disk dirs and files inside one of its shared paths would be
 * hidden by the mount, and a disk file cannot hold a mount point. */
static int check_shared_disks(struct fl_scn_vctx *c, const struct fl_scn_shared *e)
{
    struct fl_scenario *s = c->s;
    char *sp = norm_rel(c, e->path);
    int rc = sp ? 0 : -ENOMEM;
    for (size_t k = 0; k < e->n_hosts && rc == 0; k++) {
        const struct fl_scn_host *h = &s->hosts[e->hosts[k]];
        for (size_t i = 0; i < h->n_dirs + h->n_files && rc == 0; i++) {
            bool file = i >= h->n_dirs;
            const char *path = file ? h->files[i - h->n_dirs].path : h->dirs[i].path;
            struct fl_scn_loc loc = file ? h->files[i - h->n_dirs].loc : h->dirs[i].loc;
            char *np = norm_rel(c, path);
            if (!np)
                rc = -ENOMEM;
            else if (path_inside(np, sp) || (file && strcmp(np, sp) == 0))
                rc = fl_scn_verr(c, loc,
                                 "disk %s '%s' of host '%s' is in shared path '%s' (line %d), "
                                 "whose mount would hide it",
                                 file ? "file" : "dir", path, h->name, e->path, e->loc.line);
            else if (file && path_inside(sp, np))
                rc = fl_scn_verr(c, loc,
                                 "disk file '%s' of host '%s' cannot also be a directory: shared "
                                 "path '%s' (line %d) is inside it",
                                 path, h->name, e->path, e->loc.line);
            free(np);
        }
    }
    free(sp);
    return rc;
}

static int load_shared(struct fl_scn_vctx *c, const ynode *sh)
{
    struct fl_scenario *s = c->s;
    static const char *const keys[] = {"path", "hosts"};
    int rc;

    if (!sh || fl_scn_yaml_is_null(sh))
        return 0;
    if ((rc = fl_scn_want(c, sh, FL_YN_SEQ, "'shared'")) < 0)
        return rc;
    if (!(s->shared = fl_scn_zalloc(c, sh->n, sizeof *s->shared)))
        return -ENOMEM;
    for (size_t i = 0; i < sh->n; i++) {
        const ynode *it = sh->items[i];
        struct fl_scn_shared *e = &s->shared[s->n_shared++];
        e->loc = it->loc;
        if ((rc = fl_scn_want(c, it, FL_YN_MAP, "a shared entry")) < 0 ||
            (rc = fl_scn_check_keys(c, it, keys, 2, "shared entry")) < 0)
            return rc;
        const ynode *p = fl_scn_yaml_get(it, "path", NULL);
        const ynode *h = fl_scn_yaml_get(it, "hosts", NULL);
        if (!p)
            return fl_scn_verr(c, it->loc, "shared entry has no 'path'");
        if (!h)
            return fl_scn_verr(c, it->loc, "shared entry has no 'hosts'");
        if ((rc = fl_scn_get_path(c, p, "shared path", FL_SCN_PATH_REL, &e->path)) < 0)
            return rc;
        if ((rc = check_shared_path(c, p, e)) < 0)
            return rc;
        struct fl_scn_hostset hs = {0};
        if (h->type == FL_YN_SCALAR && strcmp(h->value, "all") == 0) {
            if (!(hs.hosts = fl_scn_zalloc(c, s->n_hosts, sizeof *hs.hosts)))
                return -ENOMEM;
            for (size_t q = 0; q < s->n_hosts; q++)
                hs.hosts[hs.n++] = (int)q;
            rc = 0;
        } else {
            rc = fl_scn_load_hostset(c, h, "shared hosts", &hs);
        }
        e->hosts = hs.hosts;
        e->n_hosts = hs.n;
        if (rc < 0 || (rc = check_shared_disks(c, e)) < 0)
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

static int load_top(struct fl_scn_vctx *c, const ynode *root)
{
    static const char *const keys[] = {
        "name", "about",    "seed",   "timeout", "hosts", "shared", "workdir", "cluster",
        "run",  "variants", "faults", "expect",  "final", "soak", /* a soak profile's block: read by
                                                                     soak/profile.c, not here */
    };
    struct fl_scenario *s = c->s;
    struct fl_scn_loc top = {1, 1};
    int rc;

    if (!root || fl_scn_yaml_is_null(root))
        return fl_scn_verr(c, top,
                           "empty scenario (expected a mapping with name, hosts, cluster and run)");
    if (root->type != FL_YN_MAP)
        return fl_scn_want(c, root, FL_YN_MAP, "a scenario");
    top = root->loc;
    if ((rc = fl_scn_check_keys(c, root, keys, ARRAY_LEN(keys), "scenario")) < 0)
        return rc;

    s->has_soak = fl_scn_yaml_get(root, "soak", NULL) != NULL;
    const ynode *n = fl_scn_yaml_get(root, "name", NULL);
    if (!n)
        return fl_scn_verr(c, top, "missing 'name' (e.g. name: my-scenario)");
    if ((rc = fl_scn_get_str(c, n, "'name'", &s->name)) < 0)
        return rc;
    if (!valid_scenario_name(s->name)) {
        /* the nearest valid name: lower case, anything else a '-' */
        char fix[129];
        size_t k = 0;
        for (const char *p = s->name; *p && k < sizeof fix - 1; p++) {
            unsigned char ch = (unsigned char)tolower((unsigned char)*p);
            fix[k++] = islower(ch) || isdigit(ch) || strchr("._-", ch) ? (char)ch : '-';
        }
        fix[k] = 0;
        return fl_scn_verr(c, n->loc,
                           "bad name '%s': at most 128 lower-case letters, digits, "
                           "'.', '_' and '-' (e.g. '%s')",
                           s->name, k ? fix : "my-scenario");
    }
    n = fl_scn_yaml_get(root, "about", NULL);
    if (n && !fl_scn_yaml_is_null(n))
        rc = fl_scn_get_str(c, n, "'about'", &s->about);
    else
        rc = fl_scn_dup_str(c, "", &s->about);
    if (rc < 0)
        return rc;
    n = fl_scn_yaml_get(root, "seed", NULL);
    if (n) {
        char *end;
        if ((rc = fl_scn_want(c, n, FL_YN_SCALAR, "'seed'")) < 0)
            return rc;
        errno = 0;
        unsigned long long v = strtoull(n->value, &end, 10);
        if (!isdigit((unsigned char)n->value[0]) || *end || errno || v > FL_SEED_MAX)
            return fl_scn_verr(c, n->loc,
                               "'seed' must be a whole number 0..%llu (63 bits), not '%s'",
                               (unsigned long long)FL_SEED_MAX, n->value);
        s->seed = v;
        s->seed_set = true;
    }
    s->timeout_ms = FL_SCN_DEFAULT_TIMEOUT_MS;
    n = fl_scn_yaml_get(root, "timeout", NULL);
    if (n && (rc = fl_scn_get_duration(c, n, "'timeout'", false, &s->timeout_ms)) < 0)
        return rc;
    n = fl_scn_yaml_get(root, "workdir", NULL);
    if (n) {
        /* the rules below see the normalised path: "//" is "/", "/./sys"
         * is "/sys"; messages show it when it differs from the text */
        char wd[PATH_MAX], as[PATH_MAX + 16] = "";
        if ((rc = fl_scn_norm_path(c, n, "workdir", 0, wd, sizeof wd)) < 0)
            return rc;
        if (strcmp(wd, n->value) != 0)
            snprintf(as, sizeof as, " (that is %s)", wd);
        if (wd[0] != '/' || strcmp(wd, "/") == 0)
            return fl_scn_verr(
                c, n->loc,
                "'workdir' must be an absolute path below / (e.g. /srv/faultline), not '%s'%s",
                n->value, as);
        static const char *const bad[] = {"/proc", "/sys", "/dev", "/etc", "/tmp", "/run"};
        for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
            size_t bl = strlen(bad[i]);
            if (strncmp(wd, bad[i], bl) == 0 && (wd[bl] == 0 || wd[bl] == '/'))
                return fl_scn_verr(c, n->loc,
                                   "workdir '%s'%s is inside %s, which the harness manages itself",
                                   n->value, as, bad[i]);
        }
        if ((rc = fl_scn_dup_str(c, wd, &s->workdir)) < 0)
            return rc;
        /* The disk is mounted over the workdir: over a directory of programs
         * or anywhere in a library tree it hides /bin/sh or what it needs
         * (every exec failed at run time). */
        static const char *const progs[] = {"/usr", "/bin", "/sbin", "/usr/bin", "/usr/sbin"};
        static const char *const libs[] = {"/lib",     "/lib32",     "/lib64",     "/libx32",
                                           "/usr/lib", "/usr/lib32", "/usr/lib64", "/usr/libx32"};
        for (size_t i = 0; i < ARRAY_LEN(progs); i++)
            if (strcmp(s->workdir, progs[i]) == 0)
                return fl_scn_verr(c, n->loc,
                                   "workdir '%s' would hide the system's programs (the host's disk "
                                   "is mounted there)",
                                   s->workdir);
        for (size_t i = 0; i < ARRAY_LEN(libs); i++) {
            size_t bl = strlen(libs[i]);
            if (strncmp(s->workdir, libs[i], bl) == 0 &&
                (s->workdir[bl] == 0 || s->workdir[bl] == '/'))
                return fl_scn_verr(c, n->loc,
                                   "workdir '%s' is inside %s: the host's disk mounted there would "
                                   "hide the system's libraries",
                                   s->workdir, libs[i]);
        }
    } else if ((rc = fl_scn_dup_str(c, FL_SCN_DEFAULT_WORKDIR, &s->workdir)) < 0) {
        return rc;
    }

    if ((rc = load_hosts(c, fl_scn_yaml_get(root, "hosts", NULL), top)) < 0 ||
        (rc = load_variants(c, fl_scn_yaml_get(root, "variants", NULL))) < 0 ||
        (rc = load_cluster(c, fl_scn_yaml_get(root, "cluster", NULL), top)) < 0 ||
        (rc = load_run(c, fl_scn_yaml_get(root, "run", NULL), top)) < 0 ||
        (rc = load_shared(c, fl_scn_yaml_get(root, "shared", NULL))) < 0 ||
        (rc = load_finals(c, fl_scn_yaml_get(root, "final", NULL))) < 0 ||
        (rc = fl_scn_load_faults(c, fl_scn_yaml_get(root, "faults", NULL))) < 0 ||
        (rc = fl_scn_load_expect(c, fl_scn_yaml_get(root, "expect", NULL))) < 0)
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

int fl_scenario_load_mem(const char *path, const char *buf, size_t len, struct fl_scenario **out,
                         char *err, size_t errlen)
{
    struct fl_scn_ydoc doc;
    struct fl_scenario *s;
    struct fl_scn_vctx c = {.file = path, .buf = buf, .len = len, .err = err, .errlen = errlen};
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
    if (!(s->text = malloc(len + 1))) {
        fl_scenario_free(s);
        snprintf(err, errlen, "%s: out of memory", path);
        return -ENOMEM;
    }
    memcpy(s->text, buf, len);
    s->text[len] = 0;
    s->text_len = len;
    if (memchr(buf, 0, len)) {
        struct fl_scn_loc l = fl_scn_loc_at(&c, (size_t)((const char *)memchr(buf, 0, len) - buf));
        fl_scenario_free(s);
        return fl_scn_verr(&c, l, "the file contains a NUL byte (not a text file)");
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
