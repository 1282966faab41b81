/*
 * load/at_rest.c: validation of the two fault kinds that change files at
 * rest on a host's disk, `corrupt: {host, path, bytes}` and
 * `truncate: {host, path, size}`, into struct fl_scn_rest.  `path` is a glob
 * relative to the host's workdir (no '..', not absolute); what matches is
 * only known when the fault fires (harness/faults/at_rest.c).
 */
#include "harness/scenario/load_ctx.h"

#include <stdio.h>
#include <string.h>

int fl_scn_load_at_rest(struct fl_scn_vctx *c, const char *kind, const ynode *v,
                        struct fl_scn_action *a)
{
    static const char *const ckeys[] = {"host", "path", "bytes"};
    static const char *const tkeys[] = {"host", "path", "size"};
    bool corrupt = strcmp(kind, "corrupt") == 0;
    struct fl_scn_rest *r = &a->rest;
    int rc;

    a->kind = corrupt ? FL_SCN_ACT_CORRUPT : FL_SCN_ACT_TRUNCATE;
    if (v->type != FL_YN_MAP) {
        char b[64];
        return corrupt
                   ? fl_scn_verr(c, v->loc, "'corrupt' must be a mapping like {host: ps0, path: 'train_logs/model.ckpt-*.data-*', bytes: 16}, not %s",
                                 fl_scn_describe(v, b, sizeof b))
                   : fl_scn_verr(c, v->loc, "'truncate' must be a mapping like {host: ps0, path: 'train_logs/model.ckpt-*.index', size: 100}, not %s",
                                 fl_scn_describe(v, b, sizeof b));
    }
    if ((rc = fl_scn_check_keys(c, v, corrupt ? ckeys : tkeys, 3, kind)) < 0)
        return rc;
    const ynode *h = fl_scn_yaml_get(v, "host", NULL), *p = fl_scn_yaml_get(v, "path", NULL);
    const ynode *n = fl_scn_yaml_get(v, corrupt ? "bytes" : "size", NULL);
    if (!h)
        return fl_scn_verr(c, v->loc, "%s needs 'host' (whose disk: a host, job:task or chief)", kind);
    if (!p)
        return fl_scn_verr(c, v->loc, "%s needs 'path' (a glob relative to the host's workdir, e.g. train_logs/model.ckpt-*.data-*)",
                           kind);
    if (!n)
        return corrupt ? fl_scn_verr(c, v->loc, "corrupt needs 'bytes' (how many bytes of each file to change)")
                       : fl_scn_verr(c, v->loc, "truncate needs 'size' (the size each file is cut to, e.g. 0 or 4K)");
    if ((rc = fl_scn_resolve_target(c, h, kind, &a->target)) < 0)
        return rc;
    a->host = a->target.host;
    char what[32];
    snprintf(what, sizeof what, "%s 'path'", kind);
    if ((rc = fl_scn_want(c, p, FL_YN_SCALAR, what)) < 0 || (rc = fl_scn_check_rel_path(c, p, what)) < 0)
        return rc;
    if (!p->value[0] || strlen(p->value) >= FL_SCN_REST_PATH_MAX)
        return fl_scn_verr(c, p->loc, "%s must be 1 to %d characters", what, FL_SCN_REST_PATH_MAX - 1);
    snprintf(r->path, sizeof r->path, "%s", p->value);
    snprintf(what, sizeof what, "%s '%s'", kind, corrupt ? "bytes" : "size");
    if ((rc = fl_scn_want(c, n, FL_YN_SCALAR, what)) < 0)
        return rc;
    uint64_t x;
    if (fl_scn_size_parse(n->value, &x) < 0)
        return fl_scn_verr(c, n->loc, "%s must be a size like 16, 4K or 1M, not '%s'", what, n->value);
    if (corrupt && (x == 0 || x > 65536))
        return fl_scn_verr(c, n->loc, "%s must be 1 to 64K, not '%s'", what, n->value);
    if (corrupt)
        r->bytes = x;
    else
        r->size = x;
    return 0;
}
