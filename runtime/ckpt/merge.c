/*
 * merge.c: TensorFlow's MergeBundles / MergeV2Checkpoints: the last step of
 * a sharded save, where each ps wrote a part bundle
 * "<prefix>_temp_<hex>/part-%05d-of-%05d" and one task merges them into
 * "<prefix>".
 *
 * Steps, as TensorFlow does them:
 *   1. mkdir dirname(merged) (last component only; EEXIST is fine);
 *   2. for each part in order: stat and read its .index (a missing one fails
 *      here: "NotFoundError: <part>.index; No such file or directory"), sum
 *      the header's num_shards, check endianness and version agree, and take
 *      each entry: a name seen before is an error unless both are sliced
 *      (then the slices are appended); otherwise the entry's data file
 *      (named with the part's num_shards) gets the next new shard id in
 *      order of first use;
 *   3. rename every used data file to merged.data-<id>-of-<files used>;
 *   4. write merged.index (header: summed num_shards, first part's
 *      endianness and version; entries sorted by name);
 *   5. delete the parts' .index files, ignoring errors;
 *   6. with CKPT_MERGE_DELETE_OLD_DIRS, rmdir each part's directory unless
 *      it is the merged prefix's, ignoring errors.
 * Unlike TensorFlow the merged index is written under a temporary name and
 * renamed, so it is never seen half-written; with CKPT_MERGE_SYNC the data
 * files' old and new directories and the index are fsynced.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <inttypes.h>

#include "runtime/ckpt/bundle.h"
#include "runtime/ckpt/internal.h"

struct mentry {
    char *name;
    size_t nlen;
    struct ckpt_entry e; /* name/dims point into this struct's allocations */
    int64_t *dims;
    struct ckpt_slice *slices;
    int cap_slices;
};

struct mfile {
    char *path;
    int id;
};

struct merge {
    struct mentry *ents;
    size_t n, cap;
    size_t *hash;
    size_t hcap;
    struct mfile *files;
    size_t nfiles, capfiles;
    int num_shards;
    bool seen_first;
    struct ckpt_header first;
    int32_t *first_bad;
    struct ckpt_arena arena; /* slice extents */
};

static uint64_t hname(const char *s, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        h ^= (uint8_t)s[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

static struct mentry *find(struct merge *m, const char *name, size_t nlen, size_t *slot)
{
    if (!m->hcap)
        return NULL;
    size_t j = hname(name, nlen) & (m->hcap - 1);
    while (m->hash[j]) {
        struct mentry *e = &m->ents[m->hash[j] - 1];
        if (e->nlen == nlen && !memcmp(e->name, name, nlen))
            return e;
        j = (j + 1) & (m->hcap - 1);
    }
    if (slot)
        *slot = j;
    return NULL;
}

static int grow_hash(struct merge *m)
{
    if (m->n * 2 < m->hcap)
        return 0;
    size_t hcap = m->hcap ? m->hcap * 2 : 64;
    size_t *h = calloc(hcap, sizeof *h);
    if (!h)
        return -ENOMEM;
    for (size_t i = 0; i < m->n; i++) {
        size_t j = hname(m->ents[i].name, m->ents[i].nlen) & (hcap - 1);
        while (h[j])
            j = (j + 1) & (hcap - 1);
        h[j] = i + 1;
    }
    free(m->hash);
    m->hash = h;
    m->hcap = hcap;
    return 0;
}

static int add_slices(struct merge *m, struct mentry *me, const struct ckpt_entry *e)
{
    int need = me->e.nslices + e->nslices;
    if (need > me->cap_slices) {
        int cap = me->cap_slices ? me->cap_slices : 4;
        while (cap < need)
            cap *= 2;
        struct ckpt_slice *s = realloc(me->slices, (size_t)cap * sizeof *s);
        if (!s)
            return -ENOMEM;
        me->slices = s;
        me->cap_slices = cap;
    }
    for (int i = 0; i < e->nslices; i++) {
        struct ckpt_slice *d = &me->slices[me->e.nslices++];
        d->nextents = e->slices[i].nextents;
        d->extents = NULL;
        if (d->nextents) {
            struct ckpt_extent *x = ckpt_arena_alloc(&m->arena, (size_t)d->nextents * sizeof *x);
            if (!x)
                return -ENOMEM;
            memcpy(x, e->slices[i].extents, (size_t)d->nextents * sizeof *x);
            d->extents = x;
        }
    }
    me->e.slices = me->slices;
    return 0;
}

static int file_id(struct merge *m, const char *path)
{
    for (size_t i = m->nfiles; i-- > 0;)
        if (!strcmp(m->files[i].path, path))
            return m->files[i].id;
    if (m->nfiles == m->capfiles) {
        size_t cap = m->capfiles ? m->capfiles * 2 : 16;
        struct mfile *f = realloc(m->files, cap * sizeof *f);
        if (!f)
            return -ENOMEM;
        m->files = f;
        m->capfiles = cap;
    }
    char *p = strdup(path);
    if (!p)
        return -ENOMEM;
    m->files[m->nfiles].path = p;
    m->files[m->nfiles].id = (int)m->nfiles;
    return (int)m->nfiles++;
}

static bool same_version(const struct ckpt_header *a, const struct ckpt_header *b)
{
    if (a->producer != b->producer || a->min_consumer != b->min_consumer ||
        a->nbad_consumers != b->nbad_consumers)
        return false;
    for (int i = 0; i < a->nbad_consumers; i++)
        if (a->bad_consumers[i] != b->bad_consumers[i])
            return false;
    return true;
}

static int merge_one(struct merge *m, const char *prefix, struct ckpt_err *err)
{
    struct ckpt_reader *r = NULL;
    char *index = ckpt_index_name(prefix);
    int rc = 0;
    struct stat st;

    if (!index)
        return ckpt_err_set(err, -ENOMEM, NULL, prefix, NULL, 0, "out of memory");
    if (stat(index, &st) < 0) {
        rc = -errno;
        ckpt_err_set(err, rc, "stat", index, NULL, 0, NULL);
        goto cleanup;
    }
    if ((rc = ckpt_reader_open(&r, prefix, err)))
        goto cleanup;
    const struct ckpt_header *h = ckpt_reader_header(r);
    m->num_shards += h->num_shards;
    if (!m->seen_first) {
        m->seen_first = true;
        m->first = *h;
        if (h->nbad_consumers) {
            m->first_bad = malloc((size_t)h->nbad_consumers * sizeof *m->first_bad);
            if (!m->first_bad) {
                rc = ckpt_err_set(err, -ENOMEM, NULL, index, NULL, 0, "out of memory");
                goto cleanup;
            }
            memcpy(m->first_bad, h->bad_consumers,
                   (size_t)h->nbad_consumers * sizeof *m->first_bad);
        }
        m->first.bad_consumers = m->first_bad;
    } else {
        if (h->endianness != m->first.endianness) {
            rc = ckpt_err_set(err, -EINVAL, NULL, index, NULL, 0,
                              "Merging bundles with conflicting endianness; inputs corrupted?");
            goto cleanup;
        }
        if (!same_version(h, &m->first)) {
            rc = ckpt_err_set(err, -EINVAL, NULL, index, NULL, 0,
                              "Merging bundles with different format versions: merged producer %d "
                              "vs. curr producer %d",
                              m->first.producer, h->producer);
            goto cleanup;
        }
    }
    for (size_t i = 0; i < ckpt_reader_count(r); i++) {
        const struct ckpt_entry *e = ckpt_reader_entry(r, i);
        size_t slot = 0;
        struct mentry *old = find(m, e->name, e->name_len, &slot);
        if (old && old->e.nslices == 0) {
            rc = ckpt_err_set(err, -EINVAL, NULL, index, e->name, e->name_len,
                              "Duplicate tensor keyed by %s encountered, when merging prefix: %s",
                              e->name, prefix);
            goto cleanup;
        }
        if (old) {
            if (e->nslices == 0) {
                rc =
                    ckpt_err_set(err, -EINVAL, NULL, index, e->name, e->name_len,
                                 "Duplicate tensor keyed by %s; attempting to merge in a non-slice "
                                 "bundle entry",
                                 e->name);
                goto cleanup;
            }
            bool same = old->e.dtype == e->dtype && old->e.rank == e->rank;
            for (int d = 0; same && d < e->rank; d++)
                same = old->e.dims[d] == e->dims[d];
            if (!same) {
                rc = ckpt_err_set(err, -EINVAL, NULL, index, e->name, e->name_len,
                                  "sliced tensor's dtype or shape differs between parts");
                goto cleanup;
            }
            if (add_slices(m, old, e) < 0) {
                rc = ckpt_err_set(err, -ENOMEM, NULL, index, NULL, 0, "out of memory");
                goto cleanup;
            }
            continue;
        }
        if (grow_hash(m) < 0) {
            rc = ckpt_err_set(err, -ENOMEM, NULL, index, NULL, 0, "out of memory");
            goto cleanup;
        }
        find(m, e->name, e->name_len, &slot); /* slot in the regrown table */
        if (m->n == m->cap) {
            size_t cap = m->cap ? m->cap * 2 : 64;
            struct mentry *ne = realloc(m->ents, cap * sizeof *ne);
            if (!ne) {
                rc = ckpt_err_set(err, -ENOMEM, NULL, index, NULL, 0, "out of memory");
                goto cleanup;
            }
            m->ents = ne;
            m->cap = cap;
        }
        struct mentry *me = &m->ents[m->n];
        memset(me, 0, sizeof *me);
        me->e = *e;
        me->e.slices = NULL;
        me->e.nslices = 0;
        me->name = malloc(e->name_len + 1);
        me->dims = malloc((e->rank > 0 ? (size_t)e->rank : 1) * sizeof *me->dims);
        if (!me->name || !me->dims) {
            free(me->name);
            free(me->dims);
            rc = ckpt_err_set(err, -ENOMEM, NULL, index, NULL, 0, "out of memory");
            goto cleanup;
        }
        memcpy(me->name, e->name, e->name_len);
        me->name[e->name_len] = 0;
        me->nlen = e->name_len;
        if (e->rank > 0)
            memcpy(me->dims, e->dims, (size_t)e->rank * sizeof *me->dims);
        me->e.name = me->name;
        me->e.dims = me->dims;
        m->hash[slot] = m->n + 1;
        m->n++;
        if (e->nslices && add_slices(m, me, e) < 0) {
            rc = ckpt_err_set(err, -ENOMEM, NULL, index, NULL, 0, "out of memory");
            goto cleanup;
        }
        /* DataFilename(prefix, shard_id, num_shards of this part) */
        char *df = ckpt_data_name(prefix, e->shard_id, h->num_shards);
        int id = df ? file_id(m, df) : -ENOMEM;
        free(df);
        if (id < 0) {
            rc = ckpt_err_set(err, -ENOMEM, NULL, index, NULL, 0, "out of memory");
            goto cleanup;
        }
        me->e.shard_id = id;
    }
cleanup:
    ckpt_reader_close(r);
    free(index);
    return rc;
}

static int by_name(const void *a, const void *b)
{
    const struct mentry *x = *(const struct mentry *const *)a,
                        *y = *(const struct mentry *const *)b;
    size_t min = x->nlen < y->nlen ? x->nlen : y->nlen;
    int c = memcmp(x->name, y->name, min);
    if (c)
        return c;
    return x->nlen < y->nlen ? -1 : x->nlen > y->nlen;
}

static void free_merge(struct merge *m)
{
    for (size_t i = 0; i < m->n; i++) {
        free(m->ents[i].name);
        free(m->ents[i].dims);
        free(m->ents[i].slices);
    }
    free(m->ents);
    free(m->hash);
    for (size_t i = 0; i < m->nfiles; i++)
        free(m->files[i].path);
    free(m->files);
    free(m->first_bad);
    ckpt_arena_free(&m->arena);
}

int ckpt_merge(const char *const *prefixes, size_t nprefixes, const char *merged_prefix,
               unsigned flags, struct ckpt_err *err)
{
    struct merge m = {0};
    struct ckpt_tbl_builder *t = NULL;
    struct ckpt_buf idx = {0}, v = {0};
    struct mentry **order = NULL;
    char *mdir = NULL, *mindex = NULL;
    char suffix[40];
    int rc = 0;

    if (!merged_prefix || !*merged_prefix || (nprefixes && !prefixes))
        return ckpt_err_set(err, -EINVAL, NULL, NULL, NULL, 0, "merge: bad arguments");
    mdir = ckpt_dirname(merged_prefix);
    mindex = ckpt_index_name(merged_prefix);
    if (!mdir || !mindex) {
        rc = ckpt_err_set(err, -ENOMEM, NULL, merged_prefix, NULL, 0, "out of memory");
        goto cleanup;
    }
    if (mkdir(mdir, 0777) < 0 && errno != EEXIST) {
        rc = -errno;
        ckpt_err_set(err, rc, "mkdir", mdir, NULL, 0, "mkdir: %s", strerror(-rc));
        goto cleanup;
    }
    for (size_t i = 0; i < nprefixes; i++)
        if ((rc = merge_one(&m, prefixes[i], err)))
            goto cleanup;

    for (size_t i = 0; i < m.nfiles; i++) {
        char *to = ckpt_data_name(merged_prefix, m.files[i].id, (int)m.nfiles);
        if (!to) {
            rc = ckpt_err_set(err, -ENOMEM, NULL, merged_prefix, NULL, 0, "out of memory");
            goto cleanup;
        }
        if (rename(m.files[i].path, to) < 0) {
            rc = -errno;
            ckpt_err_set(err, rc, "rename", m.files[i].path, NULL, 0, "rename to %s: %s", to,
                         strerror(-rc));
            free(to);
            goto cleanup;
        }
        free(to);
    }
    if (flags & CKPT_MERGE_SYNC) {
        for (size_t i = 0; i < nprefixes; i++) {
            char *d = ckpt_dirname(prefixes[i]);
            if (d && strcmp(d, mdir) && (rc = ckpt_fsync_dir(d)) < 0) {
                ckpt_err_set(err, rc, "fsync", d, NULL, 0, "fsync directory: %s", strerror(-rc));
                free(d);
                goto cleanup;
            }
            free(d);
        }
    }

    t = ckpt_tbl_new(0, false);
    order = malloc((m.n ? m.n : 1) * sizeof *order);
    if (!t || !order) {
        rc = ckpt_err_set(err, -ENOMEM, NULL, mindex, NULL, 0, "out of memory");
        goto cleanup;
    }
    struct ckpt_header h = m.first;
    h.num_shards = m.num_shards;
    if (!m.seen_first) {
        /* no parts: TensorFlow would write a header of zeros */
        memset(&h, 0, sizeof h);
    }
    ckpt_pb_encode_header(&v, &h);
    if (v.oom || ckpt_tbl_add(t, "", 0, v.p, v.len) < 0) {
        rc = ckpt_err_set(err, -ENOMEM, NULL, mindex, NULL, 0, "out of memory");
        goto cleanup;
    }
    for (size_t i = 0; i < m.n; i++)
        order[i] = &m.ents[i];
    qsort(order, m.n, sizeof *order, by_name);
    for (size_t i = 0; i < m.n; i++) {
        v.len = 0;
        ckpt_pb_encode_entry(&v, &order[i]->e);
        if (v.oom || ckpt_tbl_add(t, order[i]->name, order[i]->nlen, v.p, v.len) < 0) {
            rc = ckpt_err_set(err, -ENOMEM, NULL, mindex, NULL, 0, "out of memory");
            goto cleanup;
        }
    }
    if ((rc = ckpt_tbl_finish(t, &idx)) < 0) {
        ckpt_err_set(err, rc, NULL, mindex, NULL, 0, "building the index: %s", strerror(-rc));
        goto cleanup;
    }
    snprintf(suffix, sizeof suffix, ".tempstate%" PRIu64, ckpt_random64());
    if ((rc = ckpt_write_file_atomic(mindex, suffix, idx.p, idx.len, flags & CKPT_MERGE_SYNC, err)))
        goto cleanup;

    /* cleanup of the parts: best effort, errors ignored (as TensorFlow) */
    for (size_t i = 0; i < nprefixes; i++) {
        char *pi = ckpt_index_name(prefixes[i]);
        if (pi && strcmp(pi, mindex))
            unlink(pi);
        free(pi);
    }
    if (flags & CKPT_MERGE_DELETE_OLD_DIRS) {
        for (size_t i = 0; i < nprefixes; i++) {
            char *d = ckpt_dirname(prefixes[i]);
            if (d && strcmp(d, mdir)) {
                if (rmdir(d) == 0 && (flags & CKPT_MERGE_SYNC)) {
                    char *pd = ckpt_dirname(d);
                    if (pd)
                        ckpt_fsync_dir(pd);
                    free(pd);
                }
            }
            free(d);
        }
    }
    rc = (int)m.n;
cleanup:
    ckpt_tbl_free(t);
    ckpt_buf_free(&idx);
    ckpt_buf_free(&v);
    free(order);
    free(mdir);
    free(mindex);
    free_merge(&m);
    return rc;
}
