/*
 * template.c: "{name}" placeholder templates (syntax in template.h) and the
 * rule that turns an expanded command into the argv of /bin/sh -c.
 *
 * One scanner (scan()) walks a template and reports literal runs and
 * placeholders through a callback; checking, expanding and listing are thin
 * layers over it, so they can never disagree on the syntax.
 */
#include "harness/scenario/template.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool is_name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

enum piece { P_TEXT, P_NAME };

/* Syntax error details from scan(). */
struct scan_err {
    size_t off, len;
    const char *what;
};

/*
 * Calls fn(ctx, kind, ptr, len, off) for each piece: literal text (with
 * "{{"/"}}" already reduced to one brace) or a placeholder name.  Returns 0,
 * -EINVAL with *e filled on a syntax error, or fn's non-zero return.
 */
static int scan(const char *t, int (*fn)(void *, enum piece, const char *, size_t, size_t),
                void *ctx, struct scan_err *e)
{
    size_t i = 0, lit = 0;
    int rc;

    while (t[i]) {
        if (t[i] != '{' && t[i] != '}') {
            i++;
            continue;
        }
        if (i > lit && (rc = fn(ctx, P_TEXT, t + lit, i - lit, lit)) != 0)
            return rc;
        if (t[i] == t[i + 1]) { /* "{{" or "}}" */
            if ((rc = fn(ctx, P_TEXT, t + i, 1, i)) != 0)
                return rc;
            i += 2;
            lit = i;
            continue;
        }
        if (t[i] == '}') {
            e->off = i;
            e->len = 1;
            e->what = "unmatched '}' (write '}}' for a literal brace)";
            return -EINVAL;
        }
        size_t j = i + 1;
        while (is_name_char(t[j]))
            j++;
        if (j == i + 1 || t[j] != '}') {
            e->off = i;
            e->len = 1;
            e->what = "'{' does not start a placeholder (write '{{' for a literal brace)";
            return -EINVAL;
        }
        if ((rc = fn(ctx, P_NAME, t + i + 1, j - i - 1, i)) != 0)
            return rc;
        i = j + 1;
        lit = i;
    }
    if (i > lit && (rc = fn(ctx, P_TEXT, t + lit, i - lit, lit)) != 0)
        return rc;
    return 0;
}

/* ---- check ------------------------------------------------------------- */

struct check_ctx {
    fl_tmpl_known_fn known;
    void *ctx;
    size_t bad_off, bad_len;
    const char *bad_name;
    size_t bad_name_len;
};

static int check_piece(void *vc, enum piece k, const char *p, size_t len, size_t off)
{
    struct check_ctx *c = vc;
    if (k != P_NAME || !c->known || c->known(c->ctx, p, len))
        return 0;
    c->bad_off = off;
    c->bad_len = len + 2;
    c->bad_name = p;
    c->bad_name_len = len;
    return 1;
}

int fl_tmpl_check(const char *tmpl, fl_tmpl_known_fn known, void *ctx, size_t *bad_off,
                  size_t *bad_len, char *err, size_t errlen)
{
    struct check_ctx c = {.known = known, .ctx = ctx};
    struct scan_err e = {0};
    int rc = scan(tmpl, check_piece, &c, &e);

    if (rc == 0)
        return 0;
    if (rc == 1) {
        if (bad_off)
            *bad_off = c.bad_off;
        if (bad_len)
            *bad_len = c.bad_len;
        if (err && errlen)
            snprintf(err, errlen, "unknown placeholder '{%.*s}'", (int)c.bad_name_len, c.bad_name);
        return -EINVAL;
    }
    if (bad_off)
        *bad_off = e.off;
    if (bad_len)
        *bad_len = e.len;
    if (err && errlen)
        snprintf(err, errlen, "%s", e.what);
    return -EINVAL;
}

/* ---- expand ------------------------------------------------------------ */

struct buf {
    char *p;
    size_t len, cap;
};

static int buf_add(struct buf *b, const char *s, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p)
            return -ENOMEM;
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
    return 0;
}

struct expand_ctx {
    fl_tmpl_lookup_fn lookup;
    void *ctx;
    struct buf out;
    size_t bad_off;
    const char *bad_name;
    size_t bad_name_len;
};

static int expand_piece(void *vc, enum piece k, const char *p, size_t len, size_t off)
{
    struct expand_ctx *c = vc;
    if (k == P_TEXT)
        return buf_add(&c->out, p, len);
    const char *v = c->lookup(c->ctx, p, len);
    if (!v) {
        c->bad_off = off;
        c->bad_name = p;
        c->bad_name_len = len;
        return 1;
    }
    return buf_add(&c->out, v, strlen(v));
}

int fl_tmpl_expand(const char *tmpl, fl_tmpl_lookup_fn lookup, void *ctx, char **out, char *err,
                   size_t errlen)
{
    struct expand_ctx c = {.lookup = lookup, .ctx = ctx};
    struct scan_err e = {0};
    int rc;

    *out = NULL;
    if ((rc = buf_add(&c.out, "", 0)) < 0)
        return rc;
    rc = scan(tmpl, expand_piece, &c, &e);
    if (rc == 0) {
        *out = c.out.p;
        return 0;
    }
    free(c.out.p);
    if (rc == 1) {
        if (err && errlen)
            snprintf(err, errlen, "column %zu: unknown placeholder '{%.*s}'", c.bad_off + 1,
                     (int)c.bad_name_len, c.bad_name);
        return -EINVAL;
    }
    if (rc == -EINVAL && err && errlen)
        snprintf(err, errlen, "column %zu: %s", e.off + 1, e.what);
    return rc;
}

/* ---- foreach ----------------------------------------------------------- */

struct each_ctx {
    int (*fn)(void *, const char *, size_t, size_t);
    void *ctx;
};

static int each_piece(void *vc, enum piece k, const char *p, size_t len, size_t off)
{
    struct each_ctx *c = vc;
    return k == P_NAME ? c->fn(c->ctx, p, len, off) : 0;
}

int fl_tmpl_foreach(const char *tmpl,
                    int (*fn)(void *ctx, const char *name, size_t len, size_t off), void *ctx)
{
    struct each_ctx c = {fn, ctx};
    struct scan_err e;
    return scan(tmpl, each_piece, &c, &e);
}

/* ---- shell ------------------------------------------------------------- */

/*
 * A simple command: outside quotes no ; & | < > ( ) ` newline and no "$(";
 * and the first word is not an assignment NAME=... (exec would try to run
 * it).  Quotes and backslashes are followed the way sh reads them.
 */
bool fl_tmpl_is_simple_command(const char *cmd)
{
    const char *p = cmd;
    char q = 0;

    while (*p == ' ' || *p == '\t')
        p++;
    if (!*p)
        return false;
    /* Leading assignment? */
    {
        const char *w = p;
        if ((*w >= 'a' && *w <= 'z') || (*w >= 'A' && *w <= 'Z') || *w == '_') {
            while (is_name_char(*w))
                w++;
            if (*w == '=')
                return false;
        }
    }
    /* Reserved words that exec cannot run. */
    {
        static const char *const words[] = {"if", "for",  "while", "until",  "case", "{",
                                            "!",  "exec", "cd",    "export", NULL};
        size_t n = strcspn(p, " \t");
        for (int i = 0; words[i]; i++)
            if (strlen(words[i]) == n && strncmp(p, words[i], n) == 0)
                return false;
    }
    for (; *p; p++) {
        if (q == '\'') {
            if (*p == '\'')
                q = 0;
            continue;
        }
        if (*p == '\\') {
            if (!p[1])
                return false;
            p++;
            continue;
        }
        if (q == '"') {
            if (*p == '"')
                q = 0;
            else if (*p == '`' || (*p == '$' && p[1] == '('))
                return false;
            continue;
        }
        switch (*p) {
        case '\'':
        case '"': q = *p; break;
        case ';':
        case '&':
        case '|':
        case '<':
        case '>':
        case '(':
        case ')':
        case '`':
        case '\n': return false;
        case '$':
            if (p[1] == '(')
                return false;
            break;
        default: break;
        }
    }
    return q == 0;
}

int fl_tmpl_shell_argv(const char *cmd, char *argv[4], char **script)
{
    bool simple = fl_tmpl_is_simple_command(cmd);
    size_t n = strlen(cmd);
    char *s = malloc(n + 6);

    if (!s)
        return -ENOMEM;
    if (simple) {
        memcpy(s, "exec ", 5);
        memcpy(s + 5, cmd, n + 1);
    } else {
        memcpy(s, cmd, n + 1);
    }
    *script = s;
    argv[0] = (char *)"/bin/sh";
    argv[1] = (char *)"-c";
    argv[2] = s;
    argv[3] = NULL;
    return 0;
}
