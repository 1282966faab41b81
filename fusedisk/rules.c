/*
 * rules.c: a fusedisk's fault rules: op names, the path glob ("**" for any
 * number of components), and the table the FUSE threads consult on every
 * operation (a read lock and, for a rule that matches, an atomic draw and
 * count), which the harness changes as faults fire and heal.
 */
#include "fusedisk/rules.h"

#include <errno.h>
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

struct fl_fd_live {
    int id;
    struct fl_fd_rule r;
    uint64_t rng;  /* splitmix64 state, advanced atomically */
    uint64_t hits; /* atomic */
    /* where it hit, under the table's where_mu: the first FL_FD_WHERE_MAX
     * distinct (op, path), then only counted in more */
    struct fl_fd_where *where;
    size_t nwhere;
    uint64_t more;
};

static const char *const op_names[] = {"open",  "create",   "read",    "write",
                                       "fsync", "rename",   "unlink",  "mkdir",
                                       "rmdir", "truncate", "readdir", "statfs"};

int fl_fd_op_parse(const char *name, unsigned *mask)
{
    if (!strcmp(name, "all")) {
        *mask = FL_FD_OP_ALL;
        return 0;
    }
    for (size_t i = 0; i < sizeof op_names / sizeof *op_names; i++)
        if (!strcmp(name, op_names[i])) {
            *mask = 1u << i;
            return 0;
        }
    return -EINVAL;
}

const char *fl_fd_op_name(unsigned op)
{
    for (size_t i = 0; i < sizeof op_names / sizeof *op_names; i++)
        if (op == 1u << i)
            return op_names[i];
    return "?";
}

const char *fl_fd_op_names(void)
{
    return "open, create, read, write, fsync, rename, unlink, mkdir, rmdir, truncate, readdir, "
           "statfs, all";
}

/* glob and path: the rest of each, from a component's start */
static bool match_from(const char *g, const char *p)
{
    for (;;) {
        size_t gl = strcspn(g, "/"), pl = strcspn(p, "/");
        if (gl == 2 && g[0] == '*' && g[1] == '*') {
            const char *gn = g[2] ? g + 3 : g + 2; /* the glob after "**" */
            if (!*gn)
                return true;            /* "**" last: anything, nothing too */
            for (const char *q = p;;) { /* none, one, two... components */
                if (match_from(gn, q))
                    return true;
                if (!*q)
                    return false;
                q += strcspn(q, "/");
                if (*q == '/')
                    q++;
            }
        }
        if (!*g || !*p)
            return !*g && !*p;
        char gs[256], ps[256];
        if (gl >= sizeof gs || pl >= sizeof ps)
            return false;
        memcpy(gs, g, gl);
        gs[gl] = 0;
        memcpy(ps, p, pl);
        ps[pl] = 0;
        if (fnmatch(gs, ps, 0) != 0)
            return false;
        g += gl;
        p += pl;
        if (*g != *p) /* one ends where the other goes on */
            return false;
        if (!*g)
            return true;
        g++;
        p++;
    }
}

bool fl_fd_glob_match(const char *glob, const char *path)
{
    while (*path == '/')
        path++;
    while (*glob == '/')
        glob++;
    return match_from(glob, path);
}

void fl_fd_rules_init(struct fl_fd_rules *t)
{
    memset(t, 0, sizeof *t);
    pthread_rwlock_init(&t->lock, NULL);
    pthread_mutex_init(&t->where_mu, NULL);
}

static void live_free(struct fl_fd_live *l)
{
    free((char *)l->r.glob);
    free(l->where);
}

void fl_fd_rules_free(struct fl_fd_rules *t)
{
    for (size_t i = 0; i < t->n; i++)
        live_free(&t->rules[i]);
    free(t->rules);
    pthread_rwlock_destroy(&t->lock);
    pthread_mutex_destroy(&t->where_mu);
}

/* One more hit of l by op on path (with the read lock held). */
static void note_where(struct fl_fd_rules *t, struct fl_fd_live *l, unsigned op, const char *path)
{
    pthread_mutex_lock(&t->where_mu);
    size_t i = 0;
    while (i < l->nwhere && !(l->where[i].op == op && !strcmp(l->where[i].path, path)))
        i++;
    if (i < l->nwhere) {
        l->where[i].count++;
    } else if (l->nwhere < FL_FD_WHERE_MAX && strlen(path) < sizeof l->where[0].path &&
               (l->where || (l->where = calloc(FL_FD_WHERE_MAX, sizeof *l->where)))) {
        struct fl_fd_where *w = &l->where[l->nwhere++];
        w->op = op;
        memcpy(w->path, path, strlen(path) + 1);
        w->count = 1;
    } else {
        l->more++;
    }
    pthread_mutex_unlock(&t->where_mu);
}

size_t fl_fd_rules_where(struct fl_fd_rules *t, int id, struct fl_fd_where *out, size_t max,
                         uint64_t *more)
{
    size_t n = 0;
    *more = 0;
    pthread_rwlock_rdlock(&t->lock);
    pthread_mutex_lock(&t->where_mu);
    for (size_t i = 0; i < t->n; i++)
        if (t->rules[i].id == id) {
            struct fl_fd_live *l = &t->rules[i];
            for (; n < l->nwhere && n < max; n++)
                out[n] = l->where[n];
            *more = l->more;
            for (size_t k = n; k < l->nwhere; k++)
                *more += l->where[k].count;
        }
    pthread_mutex_unlock(&t->where_mu);
    pthread_rwlock_unlock(&t->lock);
    return n;
}

int fl_fd_rules_add(struct fl_fd_rules *t, const struct fl_fd_rule *r)
{
    if (!r->glob || !r->ops || (r->ops & ~(unsigned)FL_FD_OP_ALL) || r->err < 0 ||
        !(r->probability > 0 && r->probability <= 1))
        return -EINVAL;
    char *g = strdup(r->glob);
    if (!g)
        return -ENOMEM;
    pthread_rwlock_wrlock(&t->lock);
    if (t->n == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 8;
        struct fl_fd_live *n = realloc(t->rules, cap * sizeof *n);
        if (!n) {
            pthread_rwlock_unlock(&t->lock);
            free(g);
            return -ENOMEM;
        }
        t->rules = n;
        t->cap = cap;
    }
    int id = ++t->next_id;
    t->rules[t->n] = (struct fl_fd_live){.id = id, .r = *r, .rng = r->seed};
    t->rules[t->n].r.glob = g;
    /* atomic: fl_fd_rules_match reads the count without the lock */
    __atomic_store_n(&t->n, t->n + 1, __ATOMIC_RELEASE);
    pthread_rwlock_unlock(&t->lock);
    return id;
}

int fl_fd_rules_remove(struct fl_fd_rules *t, int id)
{
    int rc = -ENOENT;
    pthread_rwlock_wrlock(&t->lock);
    for (size_t i = 0; i < t->n; i++)
        if (t->rules[i].id == id) {
            live_free(&t->rules[i]);
            memmove(&t->rules[i], &t->rules[i + 1], (t->n - i - 1) * sizeof *t->rules);
            __atomic_store_n(&t->n, t->n - 1, __ATOMIC_RELEASE);
            rc = 0;
            break;
        }
    pthread_rwlock_unlock(&t->lock);
    return rc;
}

uint64_t fl_fd_rules_hits(struct fl_fd_rules *t, int id)
{
    uint64_t h = 0;
    pthread_rwlock_rdlock(&t->lock);
    for (size_t i = 0; i < t->n; i++)
        if (t->rules[i].id == id)
            h = __atomic_load_n(&t->rules[i].hits, __ATOMIC_RELAXED);
    pthread_rwlock_unlock(&t->lock);
    return h;
}

/* splitmix64 over an atomically advanced state: a rule's draws are the same
 * sequence for the same seed (their order among threads is the scheduler's) */
static double draw(uint64_t *state)
{
    uint64_t z = __atomic_add_fetch(state, 0x9e3779b97f4a7c15ull, __ATOMIC_RELAXED);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (double)(z >> 11) / (double)(1ull << 53);
}

bool fl_fd_rules_match(struct fl_fd_rules *t, unsigned op, const char *path, const char *path2,
                       struct fl_fd_hit *hit)
{
    bool found = false;
    if (!__atomic_load_n(&t->n, __ATOMIC_RELAXED))
        return false; /* no rule: no lock either (the common case) */
    pthread_rwlock_rdlock(&t->lock);
    for (size_t i = 0; i < t->n && !found; i++) {
        struct fl_fd_live *l = &t->rules[i];
        if (!(l->r.ops & op))
            continue;
        if (!fl_fd_glob_match(l->r.glob, path) && !(path2 && fl_fd_glob_match(l->r.glob, path2)))
            continue;
        if (l->r.probability < 1 && draw(&l->rng) >= l->r.probability)
            continue;
        __atomic_add_fetch(&l->hits, 1, __ATOMIC_RELAXED);
        note_where(t, l, op, path2 && !fl_fd_glob_match(l->r.glob, path) ? path2 : path);
        *hit = (struct fl_fd_hit){l->r.err, l->r.delay_us, l->r.err ? 0 : l->r.short_len};
        found = true;
    }
    pthread_rwlock_unlock(&t->lock);
    return found;
}
