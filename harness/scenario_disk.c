/*
 * scenario_disk.c: validation of a `disk:` fault's mapping
 * ({host, call | point, errno, probability}) into struct fl_scn_disk: the
 * calls a scenario may fail and the libfiu POSIX-preload failure points they
 * map to, psrt's own named points, errno names, and probabilities written
 * as `50%` or `0.5`.  What the harness then does with it is in
 * disk_faults.c.
 */
#include "harness/scenario_load.h"
#include "harness/suggest.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* call: name -> libfiu POSIX preload point (fiu-utils' function_list).  The
 * preload fails the call with the errno given; buffered stdio calls have
 * points of their own (fwrite is not write). */
static const struct { const char *call, *point; } calls[] = {
    {"open", "posix/io/oc/open"},
    {"close", "posix/io/oc/close"},
    {"read", "posix/io/rw/read"},
    {"pread", "posix/io/rw/pread"},
    {"readv", "posix/io/rw/readv"},
    {"preadv", "posix/io/rw/preadv"},
    {"write", "posix/io/rw/write"},
    {"pwrite", "posix/io/rw/pwrite"},
    {"writev", "posix/io/rw/writev"},
    {"pwritev", "posix/io/rw/pwritev"},
    {"truncate", "posix/io/rw/truncate"},
    {"ftruncate", "posix/io/rw/ftruncate"},
    {"fsync", "posix/io/sync/fsync"},
    {"fdatasync", "posix/io/sync/fdatasync"},
    {"sync_file_range", "linux/io/sync_file_range"},
    {"opendir", "posix/io/dir/opendir"},
    {"readdir", "posix/io/dir/readdir"},
    {"unlink", "posix/io/dir/unlink"},
    {"rename", "posix/io/dir/rename"},
    {"mmap", "posix/mm/mmap"},
    {"fopen", "posix/stdio/oc/fopen"},
    {"fread", "posix/stdio/rw/fread"},
    {"fwrite", "posix/stdio/rw/fwrite"},
    {"fflush", "posix/stdio/fflush"},
    {"remove", "posix/stdio/remove"},
};

/* psrt's named points (runtime/psrt/README.md); a psrt/ name not listed
 * here would never fail, so it is an error. */
static const char *const psrt_points[] = {
    "psrt/save/begin", "psrt/save/shard_write", "psrt/save/shard_sync", "psrt/save/merge",
    "psrt/save/chief_write", "psrt/save/commit", "psrt/save/state", "psrt/save/gc",
    "psrt/restore/find", "psrt/restore/read", "psrt/restore/load", "psrt/export/write",
    "psrt/export/signature", "psrt/rpc/send", "psrt/rpc/recv",
};

static const struct { const char *name; int err; } errnos[] = {
    {"EIO", EIO}, {"ENOSPC", ENOSPC}, {"EROFS", EROFS}, {"EDQUOT", EDQUOT}, {"EACCES", EACCES},
    {"EPERM", EPERM}, {"ENOENT", ENOENT}, {"EEXIST", EEXIST}, {"EFBIG", EFBIG},
    {"EINTR", EINTR}, {"EAGAIN", EAGAIN}, {"EBADF", EBADF}, {"EINVAL", EINVAL},
    {"EMFILE", EMFILE}, {"ENFILE", ENFILE}, {"ENOMEM", ENOMEM}, {"ENOTDIR", ENOTDIR},
    {"EISDIR", EISDIR}, {"ENOTEMPTY", ENOTEMPTY}, {"EXDEV", EXDEV}, {"EBUSY", EBUSY},
    {"ETIMEDOUT", ETIMEDOUT}, {"ESTALE", ESTALE}, {"ENXIO", ENXIO}, {"ENODEV", ENODEV},
    {"EPIPE", EPIPE}, {"ENAMETOOLONG", ENAMETOOLONG}, {"ELOOP", ELOOP}, {"ETXTBSY", ETXTBSY},
    {"EMLINK", EMLINK}, {"ENOLCK", ENOLCK}, {"EOVERFLOW", EOVERFLOW},
    {"ECONNRESET", ECONNRESET}, {"ECONNREFUSED", ECONNREFUSED}, {"EBADMSG", EBADMSG},
};

const char *fl_scn_errno_name(int err)
{
    for (size_t i = 0; i < ARRAY_LEN(errnos); i++)
        if (errnos[i].err == err)
            return errnos[i].name;
    return NULL;
}

/* "open, close, read, ..." */
static void call_list(char *buf, size_t len)
{
    size_t n = 0;
    buf[0] = 0;
    for (size_t i = 0; i < ARRAY_LEN(calls) && n < len; i++)
        n += (size_t)snprintf(buf + n, len - n, "%s%s", i ? ", " : "", calls[i].call);
}

static int load_call(struct fl_scn_vctx *c, const ynode *n, struct fl_scn_disk *d)
{
    int rc;
    if ((rc = fl_scn_want(c, n, FL_YN_SCALAR, "disk 'call'")) < 0)
        return rc;
    for (size_t i = 0; i < ARRAY_LEN(calls); i++)
        if (strcmp(n->value, calls[i].call) == 0 || strcmp(n->value, calls[i].point) == 0) {
            snprintf(d->call, sizeof d->call, "%s", calls[i].call);
            snprintf(d->point, sizeof d->point, "%s", calls[i].point);
            return 0;
        }
    const char *names[ARRAY_LEN(calls)];
    for (size_t i = 0; i < ARRAY_LEN(calls); i++)
        names[i] = calls[i].call;
    const char *sug = fl_suggest(n->value, names, ARRAY_LEN(names));
    char list[512];
    call_list(list, sizeof list);
    if (sug)
        return fl_scn_verr(c, n->loc, "unknown call '%s' in disk (did you mean '%s'?); calls: %s",
                           n->value, sug, list);
    return fl_scn_verr(c, n->loc, "unknown call '%s' in disk; calls: %s", n->value, list);
}

static int load_point(struct fl_scn_vctx *c, const ynode *n, struct fl_scn_disk *d)
{
    int rc;
    if ((rc = fl_scn_want(c, n, FL_YN_SCALAR, "disk 'point'")) < 0)
        return rc;
    const char *v = n->value;
    size_t len = strlen(v);
    /* libfiu's remote control splits on spaces and ',', and '=' ends a
     * name in its parameters: a name with one could never be enabled. */
    if (len == 0 || len >= FL_SCN_DISK_POINT_MAX || v[strspn(v, "abcdefghijklmnopqrstuvwxyz"
                                                                "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                                                "0123456789_./-")])
        return fl_scn_verr(c, n->loc, "bad failure point '%s' (letters, digits, '_', '.', '/' and '-', at most %d)",
                           v, FL_SCN_DISK_POINT_MAX - 1);
    if (strncmp(v, "psrt/", 5) == 0) {
        bool known = false;
        for (size_t i = 0; i < ARRAY_LEN(psrt_points); i++)
            known |= strcmp(v, psrt_points[i]) == 0;
        if (!known) {
            fl_scn_verr(c, n->loc, "unknown psrt failure point '%s'", v);
            return fl_scn_vsuggest(c, v, psrt_points, ARRAY_LEN(psrt_points));
        }
    }
    snprintf(d->point, sizeof d->point, "%s", v);
    return 0;
}

static int load_errno(struct fl_scn_vctx *c, const ynode *n, int *err)
{
    int rc;
    if ((rc = fl_scn_want(c, n, FL_YN_SCALAR, "disk 'errno'")) < 0)
        return rc;
    for (size_t i = 0; i < ARRAY_LEN(errnos); i++)
        if (strcasecmp(n->value, errnos[i].name) == 0) {
            *err = errnos[i].err;
            return 0;
        }
    char *end;
    long v = strtol(n->value, &end, 10);
    if (n->value[0] >= '1' && n->value[0] <= '9' && !*end && v <= 4095) {
        *err = (int)v;
        return 0;
    }
    const char *names[ARRAY_LEN(errnos)];
    for (size_t i = 0; i < ARRAY_LEN(errnos); i++)
        names[i] = errnos[i].name;
    const char *sug = fl_suggest(n->value, names, ARRAY_LEN(names));
    if (sug)
        return fl_scn_verr(c, n->loc, "unknown errno '%s' (did you mean '%s'?)", n->value, sug);
    return fl_scn_verr(c, n->loc, "unknown errno '%s' (a name like ENOSPC, EIO or EROFS, or a number)",
                       n->value);
}

/* "50%", "0.5%", "0.25", "1" -> (0, 1] */
static int load_probability(struct fl_scn_vctx *c, const ynode *n, double *p)
{
    int rc;
    if ((rc = fl_scn_want(c, n, FL_YN_SCALAR, "disk 'probability'")) < 0)
        return rc;
    const char *v = n->value;
    char *end;
    double x = (*v >= '0' && *v <= '9') || *v == '.' ? strtod(v, &end) : -1;
    bool pct = x >= 0 && *end == '%' && end[1] == 0;
    if (x < 0 || (!pct && *end) || end == v)
        return fl_scn_verr(c, n->loc, "'probability' must be a percentage like 50%% or a fraction like 0.5, not '%s'",
                           v);
    if (pct)
        x /= 100;
    if (!(x > 0 && x <= 1))
        return fl_scn_verr(c, n->loc, "'probability' must be above 0 and at most 100%% (1), not '%s'", v);
    *p = x;
    return 0;
}

int fl_scn_load_disk(struct fl_scn_vctx *c, const ynode *v, struct fl_scn_action *a)
{
    static const char *const keys[] = {"host", "call", "point", "errno", "probability"};
    struct fl_scn_disk *d = &a->disk;
    int rc;

    a->kind = FL_SCN_ACT_DISK;
    d->err = EIO;
    d->probability = 1;
    if (v->type != FL_YN_MAP) {
        char b[64];
        return fl_scn_verr(c, v->loc, "'disk' must be a mapping like {host: ps1, call: write, errno: ENOSPC}, not %s",
                           fl_scn_describe(v, b, sizeof b));
    }
    if ((rc = fl_scn_check_keys(c, v, keys, ARRAY_LEN(keys), "disk")) < 0)
        return rc;
    const ynode *h = fl_scn_yaml_get(v, "host", NULL), *ca = fl_scn_yaml_get(v, "call", NULL);
    const ynode *pt = fl_scn_yaml_get(v, "point", NULL), *en = fl_scn_yaml_get(v, "errno", NULL);
    const ynode *pr = fl_scn_yaml_get(v, "probability", NULL);
    if (!h)
        return fl_scn_verr(c, v->loc, "disk needs 'host' (a host, job:task or chief)");
    if (ca && pt)
        return fl_scn_verr(c, pt->loc, "disk has both 'call' and 'point'; give one");
    if (!ca && !pt)
        return fl_scn_verr(c, v->loc, "disk needs 'call' (a call to fail, e.g. write) or 'point' (a failure point, e.g. psrt/save/shard_write)");
    if ((rc = fl_scn_resolve_target(c, h, "disk", &a->target)) < 0)
        return rc;
    a->host = a->target.host;
    if ((rc = ca ? load_call(c, ca, d) : load_point(c, pt, d)) < 0)
        return rc;
    if (en && (rc = load_errno(c, en, &d->err)) < 0)
        return rc;
    if (pr && (rc = load_probability(c, pr, &d->probability)) < 0)
        return rc;
    return 0;
}
