/*
 * at_rest.c: the `corrupt:` and `truncate:` fault kinds at run time: files
 * at rest on a host's disk changed at the moment the fault fires, as a bad
 * sector, a torn copy or an operator's mistake would leave them between two
 * reads.  Nothing is undone (no heal), and no process of the host is told.
 *
 * The glob is matched in the host's disk directory (what the host sees at
 * its workdir; paths under a `shared:` mount point are not in it), in
 * sorted order; only regular files are changed, never through a symbolic
 * link, and never a file whose real path leaves the disk (a task could have
 * made `train_logs` a link to / : the harness runs as root outside the
 * host).  No match is an error naming the host, the glob and the directory.
 *
 * corrupt: in each file, min(bytes, size) distinct offsets drawn from a
 * generator seeded by the run's seed, the fault's index and the file's
 * path (the same seed changes the same bytes), each byte XORed with a
 * non-zero value (so it always changes).  truncate: each file cut to `size`
 * (a file already no longer than that is left alone and said so).
 * On a host the crash-consistency layer tracks (durable.c), the file's
 * synced copy changes the same way: a change at rest survives a crash.
 * What was done goes into the fault's detail (faults.detail in the DB):
 * each file, relative to the workdir, with its offsets or old and new sizes.
 *
 * Loading: `corrupt: {host, path, bytes}` and `truncate: {host, path,
 * size}` into struct fl_scn_rest.  `path` is a glob relative to the host's
 * workdir (no '..', not absolute); what matches is only known when the
 * fault fires.
 */
#include "harness/faults/durable.h"
#include "harness/faults/kind.h"
#include "harness/base/rng.h"
#include "harness/base/text.h"
#include "harness/scenario/load_ctx.h"

#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Each byte changed in the live file is changed in its durable copy too
 * (the crash-consistency layer's store, when the host is tracked): a change
 * at rest is on the disk, so it survives a crash. */
static int corrupt_file(struct fl_run *r, int host, uint64_t ino, int fd, uint64_t size,
                        uint64_t want, uint64_t seed, char *detail, size_t dlen)
{
    uint64_t k = want < size ? want : size;
    uint64_t *offs = malloc(k * sizeof *offs);
    if (!offs)
        return -ENOMEM;
    for (uint64_t i = 0; i < k;) {
        uint64_t o = k == size ? i : fl_splitmix64(&seed) % size;
        bool dup = false;
        for (uint64_t j = 0; j < i && !dup; j++)
            dup = offs[j] == o;
        if (!dup)
            offs[i++] = o;
    }
    qsort(offs, k, sizeof *offs, cmp_u64);
    int rc = 0;
    for (uint64_t i = 0; i < k && rc == 0; i++) {
        uint8_t b;
        if (pread(fd, &b, 1, (off_t)offs[i]) != 1)
            rc = -EIO;
        uint8_t x = (uint8_t)(1 + fl_splitmix64(&seed) % 255);
        b ^= x;
        if (rc == 0 && pwrite(fd, &b, 1, (off_t)offs[i]) != 1)
            rc = errno ? -errno : -EIO;
        if (rc == 0)
            rc = fl_durable_rest_corrupt(r, host, ino, offs[i], x);
        fl_text_add(detail, dlen, "%s%llu", i ? "," : "@", (unsigned long long)offs[i]);
    }
    free(offs);
    return rc;
}

static int at_rest_apply(struct fl_run *r, struct fault_rt *fr, char *detail, size_t dlen,
                         char *err, size_t errlen)
{
    const struct fl_scn_action *a = &fr->f->action;
    const struct fl_scn_rest *rest = &a->rest;
    const char *host = r->s->hosts[a->host].name;
    const char *disk = r->hosts[a->host].disk;
    bool corrupt = a->kind == FL_SCN_ACT_CORRUPT;
    char pattern[PATH_MAX * 2], *root = NULL;
    glob_t g = {0};
    int rc = 0, grc = GLOB_NOMATCH;
    size_t changed = 0;

    detail[0] = 0;
    if (corrupt)
        fl_text_add(detail, dlen, "path=%s bytes=%llu:", rest->path,
                    (unsigned long long)rest->bytes);
    else
        fl_text_add(detail, dlen, "path=%s size=%llu:", rest->path, (unsigned long long)rest->size);
    snprintf(pattern, sizeof pattern, "%s/%s", disk, rest->path);
    if (!(root = realpath(disk, NULL))) {
        rc = -errno;
        snprintf(err, errlen, "host %s: its disk %s: %s", host, disk, strerror(errno));
        goto cleanup;
    }
    grc = glob(pattern, 0, NULL, &g); /* sorted */
    for (size_t i = 0; grc == 0 && i < g.gl_pathc && rc == 0; i++) {
        const char *path = g.gl_pathv[i], *rel = path + strlen(disk) + 1;
        struct stat st;
        char *real = realpath(path, NULL);
        size_t rl = strlen(root);
        bool inside = real && strncmp(real, root, rl) == 0 && real[rl] == '/';
        free(real);
        if (lstat(path, &st) < 0 || !S_ISREG(st.st_mode) || !inside)
            continue;
        int fd = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) {
            rc = -errno;
            snprintf(err, errlen, "host %s: %s %s: open %s: %s", host,
                     corrupt ? "corrupt" : "truncate", rel, path, strerror(errno));
            break;
        }
        uint64_t size = (uint64_t)st.st_size;
        fl_text_add(detail, dlen, " %s", rel);
        if (corrupt && size == 0) {
            fl_text_add(detail, dlen, " (empty)");
        } else if (corrupt) {
            uint64_t seed =
                r->seed ^ ((uint64_t)(fr->index + 1) * 0xd1b54a32d192ed03ULL) ^ fl_str_hash(rel);
            rc = corrupt_file(r, a->host, st.st_ino, fd, size, rest->bytes, seed, detail, dlen);
            if (rc < 0)
                snprintf(err, errlen, "host %s: corrupt %s: %s", host, rel, strerror(-rc));
        } else if (size <= rest->size) {
            fl_text_add(detail, dlen, " %llu (already no longer)", (unsigned long long)size);
        } else {
            if (ftruncate(fd, (off_t)rest->size) < 0) {
                rc = -errno;
                snprintf(err, errlen, "host %s: truncate %s: %s", host, rel, strerror(errno));
            } else if ((rc = fl_durable_rest_truncate(r, a->host, st.st_ino, rest->size)) < 0) {
                snprintf(err, errlen, "host %s: truncate %s: its synced copy: %s", host, rel,
                         strerror(-rc));
            }
            fl_text_add(detail, dlen, " %llu->%llu", (unsigned long long)size,
                        (unsigned long long)rest->size);
        }
        close(fd);
        changed++;
    }
    if (rc == 0 && changed == 0) {
        rc = -ENOENT;
        snprintf(err, errlen, "host %s: %s: no file matches '%s' in its workdir (%s)", host,
                 corrupt ? "corrupt" : "truncate", rest->path, disk);
    }
cleanup:
    if (grc == 0)
        globfree(&g);
    free(root);
    return rc;
}

/* ---- loading ---------------------------------------------------------- */

static int at_rest_parse(struct fl_scn_vctx *c, const ynode *fault, const ynode *key,
                         const ynode *v, struct fl_scn_action *a)
{
    const char *kind = key->value;
    static const char *const ckeys[] = {"host", "path", "bytes"};
    static const char *const tkeys[] = {"host", "path", "size"};
    bool corrupt = strcmp(kind, "corrupt") == 0;
    struct fl_scn_rest *rest = &a->rest;
    int rc;

    a->kind = corrupt ? FL_SCN_ACT_CORRUPT : FL_SCN_ACT_TRUNCATE;
    if (v->type != FL_YN_MAP) {
        char b[64];
        return corrupt ? fl_scn_verr(c, v->loc,
                                     "'corrupt' must be a mapping like {host: ps0, path: "
                                     "'train_logs/model.ckpt-*.data-*', bytes: 16}, not %s",
                                     fl_scn_describe(v, b, sizeof b))
                       : fl_scn_verr(c, v->loc,
                                     "'truncate' must be a mapping like {host: ps0, path: "
                                     "'train_logs/model.ckpt-*.index', size: 100}, not %s",
                                     fl_scn_describe(v, b, sizeof b));
    }
    if ((rc = fl_scn_check_keys(c, v, corrupt ? ckeys : tkeys, 3, kind)) < 0)
        return rc;
    const ynode *h = fl_scn_yaml_get(v, "host", NULL), *p = fl_scn_yaml_get(v, "path", NULL);
    const ynode *n = fl_scn_yaml_get(v, corrupt ? "bytes" : "size", NULL);
    if (!h)
        return fl_scn_verr(c, v->loc, "%s needs 'host' (whose disk: a host, job:task or chief)",
                           kind);
    if (!p)
        return fl_scn_verr(c, v->loc,
                           "%s needs 'path' (a glob relative to the host's workdir, e.g. "
                           "train_logs/model.ckpt-*.data-*)",
                           kind);
    if (!n)
        return corrupt
                   ? fl_scn_verr(c, v->loc,
                                 "corrupt needs 'bytes' (how many bytes of each file to change)")
                   : fl_scn_verr(
                         c, v->loc,
                         "truncate needs 'size' (the size each file is cut to, e.g. 0 or 4K)");
    if ((rc = fl_scn_resolve_target(c, h, kind, &a->target)) < 0)
        return rc;
    a->host = a->target.host;
    char what[32];
    snprintf(what, sizeof what, "%s 'path'", kind);
    if ((rc = fl_scn_want(c, p, FL_YN_SCALAR, what)) < 0)
        return rc;
    if (!p->value[0] || strlen(p->value) >= FL_SCN_REST_PATH_MAX)
        return fl_scn_verr(c, p->loc, "%s must be 1 to %d characters", what,
                           FL_SCN_REST_PATH_MAX - 1);
    if ((rc = fl_scn_norm_path(c, p, what, FL_SCN_PATH_REL, rest->path, sizeof rest->path)) < 0)
        return rc;
    snprintf(what, sizeof what, "%s '%s'", kind, corrupt ? "bytes" : "size");
    if ((rc = fl_scn_want(c, n, FL_YN_SCALAR, what)) < 0)
        return rc;
    uint64_t x;
    if (fl_scn_size_parse(n->value, &x) < 0)
        return fl_scn_verr(c, n->loc, "%s must be a size like 16, 4K or 1M, not '%s'", what,
                           n->value);
    if (corrupt && (x == 0 || x > 65536))
        return fl_scn_verr(c, n->loc, "%s must be 1 to 64K, not '%s'", what, n->value);
    if (corrupt)
        rest->bytes = x;
    else
        rest->size = x;
    return 0;
}

const struct fl_fault_kind fl_kind_corrupt = {
    .kind = FL_SCN_ACT_CORRUPT,
    .name = "corrupt",
    .parse = at_rest_parse,
    .no_for = "a change to files at rest is not undone",
    .apply = at_rest_apply,
};

const struct fl_fault_kind fl_kind_truncate = {
    .kind = FL_SCN_ACT_TRUNCATE,
    .name = "truncate",
    .parse = at_rest_parse,
    .no_for = "a change to files at rest is not undone",
    .apply = at_rest_apply,
};
