/*
 * yaml.c: reads a YAML buffer with libyaml's event parser into a
 * tree of fl_scn_ynode that keeps 1-based line:column marks and byte ranges,
 * so that the validator (load/load.c) can point at the exact place of any
 * problem.  Anchors and aliases are supported (an alias shares the anchored
 * node), merge keys ('<<') are not; mapping keys must be scalars and unique;
 * exactly one document.
 */
#include "harness/scenario/yaml.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#define MAX_DEPTH 64

struct anchor {
    char *name;
    struct fl_scn_ynode *node;
};

struct pctx {
    yaml_parser_t parser;
    const char *name;
    const char *buf;
    size_t len;
    struct fl_scn_ydoc *doc;
    struct anchor *anchors;
    size_t n_anchors;
    char *err;
    size_t errlen;
};

static struct fl_scn_loc loc_of(yaml_mark_t m)
{
    struct fl_scn_loc l = {(int)m.line + 1, (int)m.column + 1};
    return l;
}

__attribute__((format(printf, 3, 4))) static int fail(struct pctx *c, struct fl_scn_loc l,
                                                      const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(c->err, c->errlen, "%s:%d:%d: %s", c->name, l.line, l.col, msg);
    return -EINVAL;
}

/* Line:column (1-based, column in characters) of a byte offset. */
static struct fl_scn_loc loc_at_offset(const char *buf, size_t len, size_t off)
{
    struct fl_scn_loc l = {1, 1};
    for (size_t i = 0; i < off && i < len; i++) {
        if (buf[i] == '\n') {
            l.line++;
            l.col = 1;
        } else if (((unsigned char)buf[i] & 0xc0) != 0x80) {
            l.col++;
        }
    }
    return l;
}

static int parser_error(struct pctx *c)
{
    yaml_parser_t *p = &c->parser;
    struct fl_scn_loc l;
    const char *problem = p->problem ? p->problem : "unknown error";

    if (p->error == YAML_MEMORY_ERROR) {
        snprintf(c->err, c->errlen, "%s: out of memory reading YAML", c->name);
        return -ENOMEM;
    }
    if (p->error == YAML_READER_ERROR) {
        l = loc_at_offset(c->buf, c->len, p->problem_offset);
        snprintf(c->err, c->errlen, "%s:%d:%d: invalid YAML: %s", c->name, l.line, l.col, problem);
        return -EINVAL;
    }
    l = loc_of(p->problem_mark);
    /* libyaml's words for a tab where indentation goes do not say "tab". */
    if (p->problem_mark.index < c->len && c->buf[p->problem_mark.index] == '\t' &&
        strstr(problem, "cannot start any token")) {
        snprintf(c->err, c->errlen,
                 "%s:%d:%d: invalid YAML: a tab character; YAML indents with spaces only (replace "
                 "it with spaces)",
                 c->name, l.line, l.col);
        return -EINVAL;
    }
    if (p->context)
        snprintf(c->err, c->errlen, "%s:%d:%d: invalid YAML: %s (%s at line %d column %d)", c->name,
                 l.line, l.col, problem, p->context, (int)p->context_mark.line + 1,
                 (int)p->context_mark.column + 1);
    else
        snprintf(c->err, c->errlen, "%s:%d:%d: invalid YAML: %s", c->name, l.line, l.col, problem);
    return -EINVAL;
}

static struct fl_scn_ynode *new_node(struct pctx *c, enum fl_scn_ynode_type t, yaml_mark_t m)
{
    struct fl_scn_ydoc *d = c->doc;
    if (d->n_all == d->cap_all) {
        size_t cap = d->cap_all ? d->cap_all * 2 : 64;
        struct fl_scn_ynode **a = realloc(d->all, cap * sizeof *a);
        if (!a)
            return NULL;
        d->all = a;
        d->cap_all = cap;
    }
    struct fl_scn_ynode *n = calloc(1, sizeof *n);
    if (!n)
        return NULL;
    n->type = t;
    n->loc = loc_of(m);
    n->start = m.index;
    d->all[d->n_all++] = n;
    return n;
}

static int push_child(struct fl_scn_ynode *parent, struct fl_scn_ynode *key,
                      struct fl_scn_ynode *val, size_t *cap)
{
    if (parent->n == *cap) {
        size_t nc = *cap ? *cap * 2 : 4;
        struct fl_scn_ynode **it = realloc(parent->items, nc * sizeof *it);
        if (!it)
            return -ENOMEM;
        parent->items = it;
        if (parent->type == FL_YN_MAP) {
            struct fl_scn_ynode **k = realloc(parent->keys, nc * sizeof *k);
            if (!k)
                return -ENOMEM;
            parent->keys = k;
        }
        *cap = nc;
    }
    if (parent->type == FL_YN_MAP)
        parent->keys[parent->n] = key;
    parent->items[parent->n++] = val;
    return 0;
}

static int add_anchor(struct pctx *c, const yaml_char_t *name, struct fl_scn_ynode *n)
{
    if (!name)
        return 0;
    struct anchor *a = realloc(c->anchors, (c->n_anchors + 1) * sizeof *a);
    if (!a)
        return -ENOMEM;
    c->anchors = a;
    a[c->n_anchors].name = strdup((const char *)name);
    if (!a[c->n_anchors].name)
        return -ENOMEM;
    a[c->n_anchors++].node = n;
    return 0;
}

static int next_event(struct pctx *c, yaml_event_t *ev)
{
    if (!yaml_parser_parse(&c->parser, ev))
        return parser_error(c);
    return 0;
}

static int parse_node(struct pctx *c, yaml_event_t *ev, int depth, struct fl_scn_ynode **out);

/* Parses children until the matching end event; ev is the start event. */
static int parse_collection(struct pctx *c, struct fl_scn_ynode *n, int depth)
{
    size_t cap = 0;
    yaml_event_t ev;
    int rc;

    for (;;) {
        struct fl_scn_ynode *key = NULL, *val = NULL;
        if ((rc = next_event(c, &ev)) < 0)
            return rc;
        if (ev.type == YAML_SEQUENCE_END_EVENT || ev.type == YAML_MAPPING_END_EVENT) {
            n->end = ev.end_mark.index;
            yaml_event_delete(&ev);
            return 0;
        }
        if (n->type == FL_YN_MAP) {
            rc = parse_node(c, &ev, depth + 1, &key);
            yaml_event_delete(&ev);
            if (rc < 0)
                return rc;
            if (key->type != FL_YN_SCALAR)
                return fail(c, key->loc, "a mapping key must be a plain name, not a %s",
                            key->type == FL_YN_MAP ? "mapping" : "list");
            if (key->style == FL_YS_PLAIN && strcmp(key->value, "<<") == 0)
                return fail(c, key->loc,
                            "YAML merge keys ('<<') are not supported: write the "
                            "keys out, or share a whole value with an anchor and alias");
            for (size_t i = 0; i < n->n; i++)
                if (strcmp(n->keys[i]->value, key->value) == 0)
                    return fail(c, key->loc, "duplicate key '%.300s' (first at line %d column %d)",
                                key->value, n->keys[i]->loc.line, n->keys[i]->loc.col);
            if ((rc = next_event(c, &ev)) < 0)
                return rc;
        }
        rc = parse_node(c, &ev, depth + 1, &val);
        yaml_event_delete(&ev);
        if (rc < 0)
            return rc;
        if ((rc = push_child(n, key, val, &cap)) < 0)
            return rc;
    }
}

static int parse_node(struct pctx *c, yaml_event_t *ev, int depth, struct fl_scn_ynode **out)
{
    struct fl_scn_ynode *n;
    int rc;

    if (depth > MAX_DEPTH)
        return fail(c, loc_of(ev->start_mark), "nesting deeper than %d levels", MAX_DEPTH);
    switch (ev->type) {
    case YAML_SCALAR_EVENT:
        if (!(n = new_node(c, FL_YN_SCALAR, ev->start_mark)))
            return -ENOMEM;
        n->end = ev->end_mark.index;
        n->len = ev->data.scalar.length;
        n->value = malloc(n->len + 1);
        if (!n->value)
            return -ENOMEM;
        memcpy(n->value, ev->data.scalar.value, n->len);
        n->value[n->len] = 0;
        switch (ev->data.scalar.style) {
        case YAML_SINGLE_QUOTED_SCALAR_STYLE: n->style = FL_YS_SINGLE; break;
        case YAML_DOUBLE_QUOTED_SCALAR_STYLE: n->style = FL_YS_DOUBLE; break;
        case YAML_LITERAL_SCALAR_STYLE: n->style = FL_YS_LITERAL; break;
        case YAML_FOLDED_SCALAR_STYLE: n->style = FL_YS_FOLDED; break;
        default: n->style = FL_YS_PLAIN; break;
        }
        if ((rc = add_anchor(c, ev->data.scalar.anchor, n)) < 0)
            return rc;
        *out = n;
        return 0;
    case YAML_SEQUENCE_START_EVENT:
    case YAML_MAPPING_START_EVENT: {
        bool seq = ev->type == YAML_SEQUENCE_START_EVENT;
        if (!(n = new_node(c, seq ? FL_YN_SEQ : FL_YN_MAP, ev->start_mark)))
            return -ENOMEM;
        const yaml_char_t *anchor =
            seq ? ev->data.sequence_start.anchor : ev->data.mapping_start.anchor;
        if ((rc = add_anchor(c, anchor, n)) < 0)
            return rc;
        if ((rc = parse_collection(c, n, depth)) < 0)
            return rc;
        *out = n;
        return 0;
    }
    case YAML_ALIAS_EVENT:
        for (size_t i = c->n_anchors; i-- > 0;)
            if (strcmp(c->anchors[i].name, (const char *)ev->data.alias.anchor) == 0) {
                *out = c->anchors[i].node;
                return 0;
            }
        return fail(c, loc_of(ev->start_mark), "unknown alias '*%s'",
                    (const char *)ev->data.alias.anchor);
    default: return fail(c, loc_of(ev->start_mark), "unexpected YAML event");
    }
}

int fl_scn_yaml_parse(const char *name, const char *buf, size_t len, struct fl_scn_ydoc *doc,
                      char *err, size_t errlen)
{
    struct pctx c = {
        .name = name, .buf = buf, .len = len, .doc = doc, .err = err, .errlen = errlen};
    yaml_event_t ev;
    int rc = 0, ndocs = 0;
    bool done = false;

    memset(doc, 0, sizeof *doc);
    if (!yaml_parser_initialize(&c.parser)) {
        snprintf(err, errlen, "%s: out of memory reading YAML", name);
        return -ENOMEM;
    }
    yaml_parser_set_input_string(&c.parser, (const unsigned char *)buf, len);
    while (!done) {
        if ((rc = next_event(&c, &ev)) < 0)
            goto cleanup;
        switch (ev.type) {
        case YAML_STREAM_END_EVENT: done = true; break;
        case YAML_DOCUMENT_START_EVENT:
            if (++ndocs > 1) {
                rc = fail(&c, loc_of(ev.start_mark),
                          "a scenario file holds one YAML document; found a second one");
                yaml_event_delete(&ev);
                goto cleanup;
            }
            break;
        case YAML_STREAM_START_EVENT:
        case YAML_DOCUMENT_END_EVENT: break;
        default:
            rc = parse_node(&c, &ev, 0, &doc->root);
            if (rc < 0) {
                yaml_event_delete(&ev);
                goto cleanup;
            }
            break;
        }
        yaml_event_delete(&ev);
    }
cleanup:
    for (size_t i = 0; i < c.n_anchors; i++)
        free(c.anchors[i].name);
    free(c.anchors);
    yaml_parser_delete(&c.parser);
    if (rc < 0)
        fl_scn_yaml_free(doc);
    return rc;
}

void fl_scn_yaml_free(struct fl_scn_ydoc *doc)
{
    for (size_t i = 0; i < doc->n_all; i++) {
        free(doc->all[i]->value);
        free(doc->all[i]->items);
        free(doc->all[i]->keys);
        free(doc->all[i]);
    }
    free(doc->all);
    memset(doc, 0, sizeof *doc);
}

bool fl_scn_yaml_is_null(const struct fl_scn_ynode *n)
{
    if (!n)
        return true;
    if (n->type != FL_YN_SCALAR || n->style != FL_YS_PLAIN)
        return false;
    return n->len == 0 || strcmp(n->value, "~") == 0 || strcmp(n->value, "null") == 0 ||
           strcmp(n->value, "Null") == 0 || strcmp(n->value, "NULL") == 0;
}

struct fl_scn_ynode *fl_scn_yaml_get(const struct fl_scn_ynode *map, const char *key,
                                     struct fl_scn_ynode **key_out)
{
    if (!map || map->type != FL_YN_MAP)
        return NULL;
    for (size_t i = 0; i < map->n; i++)
        if (strcmp(map->keys[i]->value, key) == 0) {
            if (key_out)
                *key_out = map->keys[i];
            return map->items[i];
        }
    return NULL;
}
