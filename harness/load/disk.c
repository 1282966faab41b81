/*
 * load/disk.c: validation of a `disk:` fault's mapping
 * ({host, call | point, errno | delay | short, probability}) into struct
 * fl_scn_disk: the calls a scenario may fail and the libfiu POSIX-preload
 * failure points they map to, psrt's own named points, errno names, the
 * calls that can be slowed (`delay: 50ms`) or cut short (`short: 1K`,
 * `short: 50%`) and the points of fl_fiu_preload.so that do it, and
 * probabilities written as `50%` or `0.5`.  What the harness then does with
 * it is in faults/disk.c.
 */
#include "harness/scenario/load_ctx.h"
#include "harness/base/suggest.h"

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
/* Calls fl_fiu_preload.so can delay (delay:) and cut short (short:). */
static const char *const delay_calls[] = {"read", "pread", "readv", "preadv", "write", "pwrite",
                                          "writev", "pwritev", "fsync", "fdatasync"};
static const char *const short_calls[] = {"write", "pwrite", "writev", "pwritev"};

static bool listed(const char *v, const char *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(v, list[i]) == 0)
            return true;
    return false;
}

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

/* delay: a duration, 1ms .. 1h */
static int load_delay(struct fl_scn_vctx *c, const ynode *n, struct fl_scn_disk *d)
{
    int64_t ms;
    int rc;
    if ((rc = fl_scn_get_duration(c, n, "disk 'delay'", false, &ms)) < 0)
        return rc;
    if (ms > 3600000)
        return fl_scn_verr(c, n->loc, "disk 'delay' must be at most 1h, not '%s'", n->value);
    d->delay_us = ms * 1000;
    return 0;
}

/* short: a size ("1K", "100": at most that many bytes per call) or a
 * percentage ("50%": that fraction of what the call was asked to write) */
static int load_short(struct fl_scn_vctx *c, const ynode *n, struct fl_scn_disk *d)
{
    int rc;
    if ((rc = fl_scn_want(c, n, FL_YN_SCALAR, "disk 'short'")) < 0)
        return rc;
    const char *v = n->value;
    size_t len = strlen(v);
    if (len > 1 && v[len - 1] == '%') {
        char *end;
        double x = (*v >= '0' && *v <= '9') || *v == '.' ? strtod(v, &end) : -1;
        if (x < 0 || end != v + len - 1)
            return fl_scn_verr(c, n->loc, "disk 'short' must be a size like 1K or 100 (bytes per call) or a percentage like 50%%, not '%s'",
                               v);
        if (!(x > 0 && x < 100))
            return fl_scn_verr(c, n->loc, "disk 'short' percentage must be above 0%% and below 100%%, not '%s'", v);
        d->short_ppm = (unsigned)(x * 10000 + 0.5);
        if (d->short_ppm == 0)
            d->short_ppm = 1;
        return 0;
    }
    uint64_t b;
    if (fl_scn_size_parse(v, &b) < 0)
        return fl_scn_verr(c, n->loc, "disk 'short' must be a size like 1K or 100 (bytes per call) or a percentage like 50%%, not '%s'",
                           v);
    if (b == 0 || b >= (1ULL << 40))
        return fl_scn_verr(c, n->loc, "disk 'short' must be at least 1 byte and below 1T, not '%s'", v);
    d->short_bytes = b;
    return 0;
}

int fl_scn_load_disk(struct fl_scn_vctx *c, const ynode *v, struct fl_scn_action *a)
{
    static const char *const keys[] = {"host", "call", "point", "errno", "delay", "short", "probability"};
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
    const ynode *de = fl_scn_yaml_get(v, "delay", NULL), *sh = fl_scn_yaml_get(v, "short", NULL);
    if (!h)
        return fl_scn_verr(c, v->loc, "disk needs 'host' (a host, job:task or chief)");
    if (ca && pt)
        return fl_scn_verr(c, pt->loc, "disk has both 'call' and 'point'; give one");
    if (!ca && !pt)
        return fl_scn_verr(c, v->loc, "disk needs 'call' (a call to fail, e.g. write) or 'point' (a failure point, e.g. psrt/save/shard_write)");
    const ynode *what[] = {en, de, sh};
    const char *what_name[] = {"errno", "delay", "short"};
    for (size_t i = 0; i < 3; i++)
        for (size_t j = i + 1; j < 3; j++)
            if (what[i] && what[j])
                return fl_scn_verr(c, what[j]->loc, "disk has both '%s' and '%s'; give one (a fault either fails, delays or shortens a call)",
                                   what_name[i], what_name[j]);
    if ((de || sh) && pt)
        return fl_scn_verr(c, (de ? de : sh)->loc, "disk '%s' needs 'call' (a call like %s), not 'point'",
                           de ? "delay" : "short", de ? "fsync" : "write");
    if ((rc = fl_scn_resolve_target(c, h, "disk", &a->target)) < 0)
        return rc;
    a->host = a->target.host;
    if ((rc = ca ? load_call(c, ca, d) : load_point(c, pt, d)) < 0)
        return rc;
    if (de && !listed(d->call, delay_calls, ARRAY_LEN(delay_calls)))
        return fl_scn_verr(c, ca->loc, "disk 'delay' works on read, pread, readv, preadv, write, pwrite, writev, pwritev, fsync and fdatasync, not '%s'",
                           d->call);
    if (sh && !listed(d->call, short_calls, ARRAY_LEN(short_calls)))
        return fl_scn_verr(c, ca->loc, "disk 'short' works on write, pwrite, writev and pwritev, not '%s'", d->call);
    if (en && (rc = load_errno(c, en, &d->err)) < 0)
        return rc;
    if (de && (rc = load_delay(c, de, d)) < 0)
        return rc;
    if (sh && (rc = load_short(c, sh, d)) < 0)
        return rc;
    if (de || sh) {
        d->err = 0;
        snprintf(d->point, sizeof d->point, "faultline/%s/%s", de ? "delay" : "short", d->call);
    }
    if (pr && (rc = load_probability(c, pr, &d->probability)) < 0)
        return rc;
    return 0;
}
