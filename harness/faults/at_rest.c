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
 */
#include "harness/engine/engine_int.h"

#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint64_t str_hash(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 0x100000001b3ULL;
    return h;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}


/* Each byte changed in the live file is changed in its durable copy too
 * (the crash-consistency layer's store, when the host is tracked): a change
 * at rest is on the disk, so it survives a crash. */
static int corrupt_file(struct engine *e, int host, uint64_t ino, int fd, uint64_t size,
                        uint64_t want, uint64_t seed, char *detail, size_t dlen)
{
    uint64_t k = want < size ? want : size;
    uint64_t *offs = malloc(k * sizeof *offs);
    if (!offs)
        return -ENOMEM;
    for (uint64_t i = 0; i < k;) {
        uint64_t o = k == size ? i : splitmix64(&seed) % size;
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
        uint8_t x = (uint8_t)(1 + splitmix64(&seed) % 255);
        b ^= x;
        if (rc == 0 && pwrite(fd, &b, 1, (off_t)offs[i]) != 1)
            rc = errno ? -errno : -EIO;
        if (rc == 0)
            rc = fl_durable_rest_corrupt(e, host, ino, offs[i], x);
        eng_detail_add(detail, dlen, "%s%llu", i ? "," : "@", (unsigned long long)offs[i]);
    }
    free(offs);
    return rc;
}

int fl_at_rest_apply(struct engine *e, struct fault_rt *fr, char *detail, size_t dlen, char *err,
                     size_t errlen)
{
    const struct fl_scn_action *a = &fr->f->action;
    const struct fl_scn_rest *r = &a->rest;
    const char *host = e->s->hosts[a->host].name;
    const char *disk = e->hosts[a->host].disk;
    bool corrupt = a->kind == FL_SCN_ACT_CORRUPT;
    char pattern[PATH_MAX * 2], *root = NULL;
    glob_t g = {0};
    int rc = 0, grc = GLOB_NOMATCH;
    size_t changed = 0;

    detail[0] = 0;
    if (corrupt)
        eng_detail_add(detail, dlen, "path=%s bytes=%llu:", r->path, (unsigned long long)r->bytes);
    else
        eng_detail_add(detail, dlen, "path=%s size=%llu:", r->path, (unsigned long long)r->size);
    snprintf(pattern, sizeof pattern, "%s/%s", disk, r->path);
    if (!(root = realpath(disk, NULL))) {
        rc = -errno;
        snprintf(err, errlen, "host %s: its disk %s: %s", host, disk, strerror(errno));
        goto cleanup;
    }
    grc = glob(pattern, 0, NULL, &g);  /* sorted */
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
            snprintf(err, errlen, "host %s: %s %s: open %s: %s", host, corrupt ? "corrupt" : "truncate",
                     rel, path, strerror(errno));
            break;
        }
        uint64_t size = (uint64_t)st.st_size;
        eng_detail_add(detail, dlen, " %s", rel);
        if (corrupt && size == 0) {
            eng_detail_add(detail, dlen, " (empty)");
        } else if (corrupt) {
            uint64_t seed = e->seed ^ ((uint64_t)(fr->index + 1) * 0xd1b54a32d192ed03ULL) ^ str_hash(rel);
            rc = corrupt_file(e, a->host, st.st_ino, fd, size, r->bytes, seed, detail, dlen);
            if (rc < 0)
                snprintf(err, errlen, "host %s: corrupt %s: %s", host, rel, strerror(-rc));
        } else if (size <= r->size) {
            eng_detail_add(detail, dlen, " %llu (already no longer)", (unsigned long long)size);
        } else {
            if (ftruncate(fd, (off_t)r->size) < 0) {
                rc = -errno;
                snprintf(err, errlen, "host %s: truncate %s: %s", host, rel, strerror(errno));
            } else if ((rc = fl_durable_rest_truncate(e, a->host, st.st_ino, r->size)) < 0) {
                snprintf(err, errlen, "host %s: truncate %s: its synced copy: %s", host, rel,
                         strerror(-rc));
            }
            eng_detail_add(detail, dlen, " %llu->%llu", (unsigned long long)size, (unsigned long long)r->size);
        }
        close(fd);
        changed++;
    }
    if (rc == 0 && changed == 0) {
        rc = -ENOENT;
        snprintf(err, errlen, "host %s: %s: no file matches '%s' in its workdir (%s)", host,
                 corrupt ? "corrupt" : "truncate", r->path, disk);
    }
cleanup:
    if (grc == 0)
        globfree(&g);
    free(root);
    return rc;
}
