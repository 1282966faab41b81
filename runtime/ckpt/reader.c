/*
 * reader.c: reads and verifies tensor bundles written by TensorFlow or by
 * writer.c.  Opening parses the whole .index (it is small: one entry per
 * tensor) with table.c, which checks every block crc; each entry is decoded
 * and checked against the header (shard in range, sizes consistent with dtype
 * and shape) so that later reads never trust a bad field.  Data files are
 * opened on first use; reads check the tensor's crc (for strings, the length
 * checksum and TensorFlow's crc over the decoded lengths as well).
 *
 * States: OPEN (entries valid, shards not yet opened or opened) -> closed.
 * Invariants: ents[] sorted bytewise by name, header entry excluded; every
 * non-sliced entry has 0 <= shard_id < num_shards, offset >= 0, size >= 0,
 * offset + size without overflow; entry memory lives in the arena.
 * A reader may instead hold its index and data in memory (fuzzing).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/ckpt/bundle.h"
#include "runtime/ckpt/crc.h"
#include "runtime/ckpt/internal.h"

#ifndef READ_CHUNK
#define READ_CHUNK (2u << 20) /* read, then crc while it is in cache */
#endif
#define MAX_SHARDS (1 << 20)

struct shard {
    int fd;
    bool tried;
    int err;
    char *path;
};

struct ckpt_reader {
    char *prefix, *index_path;
    struct ckpt_header hdr;
    bool have_header;
    struct ckpt_entry *ents;
    size_t n, cap;
    struct ckpt_arena arena;
    struct shard *shards;
    int nshards;
    bool mem;
    const uint8_t *memdata;
    size_t memlen;
    struct ckpt_err *err; /* during open */
    int root;             /* files resolved inside it (ckpt_reader_open_in), else -1 */
};

static int entry_err(struct ckpt_reader *r, struct ckpt_err *err, int code, const char *path,
                     const struct ckpt_entry *e, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
static int entry_err(struct ckpt_reader *r, struct ckpt_err *err, int code, const char *path,
                     const struct ckpt_entry *e, const char *fmt, ...)
{
    char what[1536];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return ckpt_err_set(err, code, NULL, path ? path : r->index_path, e ? e->name : NULL,
                        e ? e->name_len : 0, "%s", what);
}

/* ---- opening ---- */

static int check_entry(struct ckpt_reader *r, struct ckpt_entry *e)
{
    const char *dn = ckpt_dtype_name(e->dtype);
    if (e->dtype == CKPT_DT_INVALID)
        return entry_err(r, r->err, -EBADMSG, NULL, e,
                         "entry has dtype 0 (DT_INVALID): corrupt index");
    if (e->rank < 0)
        return entry_err(r, r->err, -EBADMSG, NULL, e,
                         "entry has an unknown-rank shape: corrupt index");
    for (int i = 0; i < e->rank; i++)
        if (e->dims[i] < 0)
            return entry_err(r, r->err, -EBADMSG, NULL, e, "dimension %d is %lld: corrupt index", i,
                             (long long)e->dims[i]);
    int64_t nelem = ckpt_shape_elements(e->rank, e->dims);
    if (nelem < 0)
        return entry_err(r, r->err, -EBADMSG, NULL, e,
                         "shape has too many elements: corrupt index");
    if (e->nslices > 0) {
        for (int s = 0; s < e->nslices; s++) {
            const struct ckpt_slice *sl = &e->slices[s];
            if (sl->nextents != e->rank)
                return entry_err(r, r->err, -EBADMSG, NULL, e,
                                 "slice %d has %d extents for a rank %d tensor", s, sl->nextents,
                                 e->rank);
            for (int i = 0; i < sl->nextents; i++) {
                const struct ckpt_extent *x = &sl->extents[i];
                if (x->length == -1 && x->start == 0)
                    continue;
                if (x->start < 0 || x->length < 0 || x->start > e->dims[i] ||
                    x->length > e->dims[i] - x->start)
                    return entry_err(r, r->err, -EBADMSG, NULL, e,
                                     "slice %d extent %d [%lld, +%lld) is outside dimension %lld",
                                     s, i, (long long)x->start, (long long)x->length,
                                     (long long)e->dims[i]);
            }
        }
        return 0;
    }
    if (e->shard_id < 0 || e->shard_id >= r->hdr.num_shards)
        return entry_err(r, r->err, -EBADMSG, NULL, e,
                         "shard %d out of range (bundle has %d shards)", e->shard_id,
                         r->hdr.num_shards);
    if (e->offset < 0 || e->size < 0 || e->size > INT64_MAX - e->offset)
        return entry_err(r, r->err, -EBADMSG, NULL, e, "bad offset %lld / size %lld",
                         (long long)e->offset, (long long)e->size);
    if (dn && e->dtype != CKPT_DT_STRING) {
        size_t es = ckpt_dtype_size(e->dtype);
        if (nelem > INT64_MAX / (int64_t)es || e->size != nelem * (int64_t)es)
            return entry_err(r, r->err, -EBADMSG, NULL, e,
                             "stored size %lld does not match %lld %s elements (%lld bytes)",
                             (long long)e->size, (long long)nelem, dn,
                             nelem > INT64_MAX / (int64_t)es ? -1LL
                                                             : (long long)(nelem * (int64_t)es));
    } else if (e->dtype == CKPT_DT_STRING) {
        if (!(e->size == 0 && nelem == 0) && (nelem > INT64_MAX - 4 || e->size < nelem + 4))
            return entry_err(r, r->err, -EBADMSG, NULL, e,
                             "stored size %lld is too small for %lld strings", (long long)e->size,
                             (long long)nelem);
    }
    return 0;
}

static int check_header(struct ckpt_reader *r)
{
    struct ckpt_header *h = &r->hdr;
    if (h->num_shards < 1 || h->num_shards > MAX_SHARDS)
        return entry_err(r, r->err, -EBADMSG, NULL, NULL, "header: num_shards %d out of range",
                         h->num_shards);
    if (h->endianness == 1)
        return entry_err(r, r->err, -ENOTSUP, NULL, NULL,
                         "header: bundle is big-endian; byte swapping is not supported");
    if (h->endianness != 0)
        return entry_err(r, r->err, -EBADMSG, NULL, NULL, "header: unknown endianness %d",
                         h->endianness);
    /* TensorFlow's CheckVersions(version, kTensorBundleVersion = 1, min producer 0) */
    if (h->producer < 0)
        return entry_err(r, r->err, -EBADMSG, NULL, NULL,
                         "header: checkpoint producer version %d below min producer 0 supported",
                         h->producer);
    if (h->min_consumer > 1)
        return entry_err(r, r->err, -ENOTSUP, NULL, NULL,
                         "header: checkpoint min consumer version %d above current version 1: "
                         "written by a newer format",
                         h->min_consumer);
    for (int i = 0; i < h->nbad_consumers; i++)
        if (h->bad_consumers[i] == 1)
            return entry_err(r, r->err, -ENOTSUP, NULL, NULL,
                             "header: checkpoint disallows consumer version 1");
    return 0;
}

static int on_kv(void *ctx, const uint8_t *key, size_t klen, const uint8_t *val, size_t vlen)
{
    struct ckpt_reader *r = ctx;
    char why[512];
    int rc;
    if (!r->have_header) {
        if (klen != 0) {
            struct ckpt_entry fake = {.name = (const char *)key, .name_len = klen};
            return entry_err(
                r, r->err, -EBADMSG, NULL, &fake,
                "first key is not the bundle header (key \"\"): not a tensor bundle index");
        }
        if ((rc = ckpt_pb_decode_header(val, vlen, &r->arena, &r->hdr, why, sizeof why)))
            return rc == -ENOMEM
                       ? ckpt_err_set(r->err, rc, NULL, r->index_path, NULL, 0, "out of memory")
                       : entry_err(r, r->err, rc, NULL, NULL, "header entry: %s", why);
        r->have_header = true;
        return check_header(r);
    }
    if (r->n == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 64;
        struct ckpt_entry *e = realloc(r->ents, cap * sizeof *e);
        if (!e)
            return ckpt_err_set(r->err, -ENOMEM, NULL, r->index_path, NULL, 0, "out of memory");
        r->ents = e;
        r->cap = cap;
    }
    struct ckpt_entry *e = &r->ents[r->n];
    memset(e, 0, sizeof *e);
    e->name = ckpt_arena_dup(&r->arena, key, klen);
    if (!e->name)
        return ckpt_err_set(r->err, -ENOMEM, NULL, r->index_path, NULL, 0, "out of memory");
    e->name_len = klen;
    if ((rc = ckpt_pb_decode_entry(val, vlen, &r->arena, e, why, sizeof why))) {
        struct ckpt_entry named = {.name = (const char *)key, .name_len = klen};
        return rc == -ENOMEM
                   ? ckpt_err_set(r->err, rc, NULL, r->index_path, NULL, 0, "out of memory")
                   : entry_err(r, r->err, rc, NULL, &named, "entry not parseable: %s", why);
    }
    if ((rc = check_entry(r, e)))
        return rc;
    r->n++;
    return 0;
}

static int finish_open(struct ckpt_reader *r, const uint8_t *index, size_t len,
                       struct ckpt_err *err)
{
    char why[1024] = "";
    r->err = err;
    int rc = ckpt_tbl_walk(index, len, on_kv, r, why, sizeof why);
    if (rc && why[0])
        return ckpt_err_set(err, rc, NULL, r->index_path, NULL, 0, "%s", why);
    if (rc)
        return rc; /* filled by on_kv */
    if (!r->have_header)
        return ckpt_err_set(
            err, -EBADMSG, NULL, r->index_path, NULL, 0,
            "table has no bundle header entry (key \"\"): not a tensor bundle index");
    r->nshards = r->hdr.num_shards;
    r->shards = calloc((size_t)r->nshards, sizeof *r->shards);
    if (!r->shards)
        return ckpt_err_set(err, -ENOMEM, NULL, r->index_path, NULL, 0, "out of memory");
    for (int i = 0; i < r->nshards; i++)
        r->shards[i].fd = -1;
    r->err = NULL;
    return 0;
}

int ckpt_reader_open(struct ckpt_reader **rp, const char *prefix, struct ckpt_err *err)
{
    return ckpt_reader_open_in(rp, -1, prefix, err);
}

int ckpt_reader_open_in(struct ckpt_reader **rp, int root, const char *prefix, struct ckpt_err *err)
{
    struct ckpt_reader *r = NULL;
    uint8_t *index = NULL;
    int fd = -1, rc = 0;
    size_t got = 0;

    *rp = NULL;
    if (!prefix || !*prefix)
        return ckpt_err_set(err, -EINVAL, NULL, NULL, NULL, 0, "bundle reader: empty prefix");
    r = calloc(1, sizeof *r);
    if (r)
        r->root = -1;
    if (!r || !(r->prefix = strdup(prefix)) || !(r->index_path = ckpt_index_name(prefix))) {
        rc = ckpt_err_set(err, -ENOMEM, NULL, prefix, NULL, 0, "out of memory");
        goto cleanup;
    }
    if (root >= 0 && (r->root = fcntl(root, F_DUPFD_CLOEXEC, 0)) < 0) {
        rc = -errno;
        ckpt_err_set(err, rc, "dup", prefix, NULL, 0, NULL);
        goto cleanup;
    }
    fd = ckpt_open_in(r->root, r->index_path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        rc = -errno;
        ckpt_err_set(err, rc, "open", r->index_path, NULL, 0, NULL);
        goto cleanup;
    }
    struct stat st;
    if (fstat(fd, &st) < 0) {
        rc = -errno;
        ckpt_err_set(err, rc, "fstat", r->index_path, NULL, 0, NULL);
        goto cleanup;
    }
    if (!S_ISREG(st.st_mode)) {
        rc = ckpt_err_set(err, -EINVAL, NULL, r->index_path, NULL, 0, "not a regular file");
        goto cleanup;
    }
    index = malloc(st.st_size ? (size_t)st.st_size : 1);
    if (!index) {
        rc = ckpt_err_set(err, -ENOMEM, NULL, r->index_path, NULL, 0, "out of memory (%lld bytes)",
                          (long long)st.st_size);
        goto cleanup;
    }
    if ((rc = ckpt_pread_all(fd, index, (size_t)st.st_size, 0, &got)) < 0) {
        ckpt_err_set(err, rc, "read", r->index_path, NULL, 0, NULL);
        goto cleanup;
    }
    if ((rc = finish_open(r, index, got, err)))
        goto cleanup;
    *rp = r;
    r = NULL;
cleanup:
    if (fd >= 0)
        close(fd);
    free(index);
    ckpt_reader_close(r);
    return rc;
}

int ckpt_reader_open_mem(struct ckpt_reader **rp, const char *name, const void *index,
                         size_t index_len, const void *data, size_t data_len, struct ckpt_err *err)
{
    struct ckpt_reader *r = calloc(1, sizeof *r);
    int rc;
    *rp = NULL;
    if (!r || !(r->prefix = strdup(name)) || !(r->index_path = ckpt_index_name(name))) {
        ckpt_reader_close(r);
        return ckpt_err_set(err, -ENOMEM, NULL, name, NULL, 0, "out of memory");
    }
    r->root = -1;
    r->mem = true;
    r->memdata = data;
    r->memlen = data ? data_len : 0;
    if ((rc = finish_open(r, index, index_len, err))) {
        ckpt_reader_close(r);
        return rc;
    }
    *rp = r;
    return 0;
}

void ckpt_reader_close(struct ckpt_reader *r)
{
    if (!r)
        return;
    for (int i = 0; i < r->nshards; i++) {
        if (r->shards[i].fd >= 0)
            close(r->shards[i].fd);
        free(r->shards[i].path);
    }
    free(r->shards);
    free(r->ents);
    ckpt_arena_free(&r->arena);
    free(r->prefix);
    free(r->index_path);
    if (r->root >= 0)
        close(r->root);
    free(r);
}

const char *ckpt_reader_prefix(const struct ckpt_reader *r)
{
    return r->prefix;
}

const struct ckpt_header *ckpt_reader_header(const struct ckpt_reader *r)
{
    return &r->hdr;
}

size_t ckpt_reader_count(const struct ckpt_reader *r)
{
    return r->n;
}

const struct ckpt_entry *ckpt_reader_entry(const struct ckpt_reader *r, size_t i)
{
    return i < r->n ? &r->ents[i] : NULL;
}

const struct ckpt_entry *ckpt_reader_find(const struct ckpt_reader *r, const char *name)
{
    size_t lo = 0, hi = r->n, nl = strlen(name);
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const struct ckpt_entry *e = &r->ents[mid];
        size_t min = nl < e->name_len ? nl : e->name_len;
        int c = memcmp(e->name, name, min);
        if (!c)
            c = e->name_len < nl ? -1 : e->name_len > nl;
        if (!c)
            return e;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* ---- data access ---- */

static const char *shard_path(struct ckpt_reader *r, int shard)
{
    struct shard *s = &r->shards[shard];
    if (!s->path)
        s->path = ckpt_data_name(r->prefix, shard, r->nshards);
    return s->path ? s->path : r->prefix;
}

static int shard_fd(struct ckpt_reader *r, const struct ckpt_entry *e, struct ckpt_err *err)
{
    struct shard *s = &r->shards[e->shard_id];
    const char *path = shard_path(r, e->shard_id);
    if (!s->path)
        return ckpt_err_set(err, -ENOMEM, NULL, r->prefix, NULL, 0, "out of memory");
    if (!s->tried) {
        s->tried = true;
        s->fd = ckpt_open_in(r->root, path, O_RDONLY | O_CLOEXEC);
        s->err = s->fd < 0 ? -errno : 0;
        if (s->fd >= 0)
            posix_fadvise(s->fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    }
    if (s->fd < 0) {
        ckpt_err_set(err, s->err, "open", path, e->name, e->name_len, "open: %s",
                     strerror(-s->err));
        return s->err;
    }
    return s->fd;
}

/* Reads stored bytes [off, off+len) of e (off relative to the tensor). */
static int read_at(struct ckpt_reader *r, const struct ckpt_entry *e, uint64_t off, void *buf,
                   size_t len, struct ckpt_err *err)
{
    uint64_t abs = (uint64_t)e->offset + off;
    if (r->mem) {
        const char *path = shard_path(r, e->shard_id);
        if (abs > r->memlen || len > r->memlen - abs)
            return entry_err(r, err, -EBADMSG, path, e,
                             "data file is %zu bytes; tensor needs bytes [%lld, %lld): truncated",
                             r->memlen, (long long)e->offset, (long long)(e->offset + e->size));
        memcpy(buf, r->memdata + abs, len);
        return 0;
    }
    int fd = shard_fd(r, e, err);
    if (fd < 0)
        return fd;
    size_t got;
    int rc = ckpt_pread_all(fd, buf, len, abs, &got);
    if (rc < 0) {
        const char *path = shard_path(r, e->shard_id);
        return ckpt_err_set(err, rc, "pread", path, e->name, e->name_len, "read: %s",
                            strerror(-rc));
    }
    if (got < len) {
        struct stat st;
        long long fsz = fstat(fd, &st) == 0 ? (long long)st.st_size : -1;
        return entry_err(r, err, -EBADMSG, shard_path(r, e->shard_id), e,
                         "data file is %lld bytes; tensor needs bytes [%lld, %lld): truncated", fsz,
                         (long long)e->offset, (long long)(e->offset + e->size));
    }
    return 0;
}

/* The tensor's bytes must lie inside its data file: checked before any
 * allocation sized by the (possibly corrupt) entry. */
static int check_extent(struct ckpt_reader *r, const struct ckpt_entry *e, struct ckpt_err *err)
{
    uint64_t fsz;
    if (r->mem) {
        fsz = r->memlen;
    } else {
        int fd = shard_fd(r, e, err);
        if (fd < 0)
            return fd;
        struct stat st;
        if (fstat(fd, &st) < 0)
            return ckpt_err_set(err, -errno, "fstat", shard_path(r, e->shard_id), e->name,
                                e->name_len, "fstat: %s", strerror(errno));
        fsz = (uint64_t)st.st_size;
    }
    if ((uint64_t)e->offset > fsz || (uint64_t)e->size > fsz - (uint64_t)e->offset)
        return entry_err(r, err, -EBADMSG, shard_path(r, e->shard_id), e,
                         "data file is %llu bytes; tensor needs bytes [%lld, %lld): truncated",
                         (unsigned long long)fsz, (long long)e->offset,
                         (long long)((uint64_t)e->offset + (uint64_t)e->size));
    return 0;
}

static int readable(struct ckpt_reader *r, const struct ckpt_entry *e, struct ckpt_err *err)
{
    if (e->nslices > 0)
        return entry_err(r, err, -ENOTSUP, NULL, e,
                         "partitioned tensor saved as %d slices: read the slice entries",
                         e->nslices);
    if (!ckpt_dtype_name(e->dtype))
        return entry_err(r, err, -ENOTSUP, NULL, e, "dtype %d is not supported by this reader",
                         e->dtype);
    return check_extent(r, e, err);
}

int ckpt_strings_check(const uint8_t *p, size_t size, uint64_t n, uint32_t masked_crc,
                       uint64_t *lens, size_t *data_off, char *why, size_t whylen)
{
    const uint8_t *q = p, *end = p + size;
    uint32_t crc = 0;
    uint64_t total = 0;
    if (size == 0 && n == 0) {
        if (data_off)
            *data_off = 0;
        return 0;
    }
    if (n > size) {
        snprintf(why, whylen, "%llu strings cannot fit in %zu bytes", (unsigned long long)n, size);
        return -EBADMSG;
    }
    for (uint64_t i = 0; i < n; i++) {
        uint64_t l;
        if (ckpt_varint_get(&q, end, &l) < 0) {
            snprintf(why, whylen, "string length %llu of %llu is truncated or malformed",
                     (unsigned long long)i, (unsigned long long)n);
            return -EBADMSG;
        }
        uint8_t b[8];
        ckpt_put32le(b, (uint32_t)l);
        ckpt_put32le(b + 4, (uint32_t)(l >> 32));
        crc = ckpt_crc32c_extend(crc, b, l <= UINT32_MAX ? 4 : 8);
        if (l > size || total + l > size) {
            snprintf(why, whylen, "string %llu claims %llu bytes, more than the %zu stored",
                     (unsigned long long)i, (unsigned long long)l, size);
            return -EBADMSG;
        }
        total += l;
        if (lens)
            lens[i] = l;
    }
    if (end - q < 4) {
        snprintf(why, whylen, "string lengths run into the length checksum");
        return -EBADMSG;
    }
    uint32_t stored = ckpt_crc_unmask(ckpt_get32le(q));
    if (stored != crc) {
        snprintf(why, whylen, "string length checksum mismatch (stored 0x%08x, computed 0x%08x)",
                 stored, crc);
        return -EBADMSG;
    }
    crc = ckpt_crc32c_extend(crc, q, 4);
    q += 4;
    if ((uint64_t)(end - q) != total) {
        snprintf(why, whylen, "string bytes: %zu stored, the lengths say %llu", (size_t)(end - q),
                 (unsigned long long)total);
        return -EBADMSG;
    }
    crc = ckpt_crc32c_extend(crc, q, (size_t)(end - q));
    if (crc != ckpt_crc_unmask(masked_crc)) {
        snprintf(why, whylen, "checksum mismatch (stored 0x%08x, computed 0x%08x over %zu bytes)",
                 ckpt_crc_unmask(masked_crc), crc, size);
        return -EBADMSG;
    }
    if (data_off)
        *data_off = (size_t)(q - p);
    return 0;
}

static int check_read_strings(struct ckpt_reader *r, const struct ckpt_entry *e, const uint8_t *buf,
                              uint64_t *lens, size_t *data_off, struct ckpt_err *err)
{
    char why[256];
    uint64_t n = (uint64_t)ckpt_shape_elements(e->rank, e->dims);
    int rc =
        ckpt_strings_check(buf, (size_t)e->size, n, e->crc32c, lens, data_off, why, sizeof why);
    if (rc)
        return entry_err(r, err, rc, shard_path(r, e->shard_id), e, "%s", why);
    return 0;
}

/* Reads e's stored bytes in pieces of at most chunk bytes into buf (whole:
 * each piece at its offset, for all of them; else each over the last) and
 * checks their crc32c against the one stored. */
static int read_crc(struct ckpt_reader *r, const struct ckpt_entry *e, uint8_t *buf, size_t chunk,
                    bool whole, struct ckpt_err *err)
{
    uint32_t crc = 0;
    int rc;
    for (uint64_t off = 0; off < (uint64_t)e->size;) {
        size_t k = (uint64_t)e->size - off < chunk ? (size_t)((uint64_t)e->size - off) : chunk;
        uint8_t *p = whole ? buf + off : buf;
        if ((rc = read_at(r, e, off, p, k, err)))
            return rc;
        crc = ckpt_crc32c_extend(crc, p, k);
        off += k;
    }
    if (crc != ckpt_crc_unmask(e->crc32c))
        return entry_err(r, err, -EBADMSG, shard_path(r, e->shard_id), e,
                         "checksum mismatch (stored 0x%08x, computed 0x%08x over %lld bytes at "
                         "offset %lld)",
                         ckpt_crc_unmask(e->crc32c), crc, (long long)e->size, (long long)e->offset);
    return 0;
}

int ckpt_reader_read(struct ckpt_reader *r, const struct ckpt_entry *e, void *buf, size_t buflen,
                     struct ckpt_err *err)
{
    int rc;
    if ((rc = readable(r, e, err)))
        return rc;
    if ((uint64_t)e->size > buflen)
        return entry_err(r, err, -EINVAL, NULL, e, "buffer of %zu bytes for a %lld byte tensor",
                         buflen, (long long)e->size);
    if (e->dtype == CKPT_DT_STRING) {
        if ((rc = read_at(r, e, 0, buf, (size_t)e->size, err)))
            return rc;
        return check_read_strings(r, e, buf, NULL, NULL, err);
    }
    return read_crc(r, e, buf, READ_CHUNK, true, err);
}

int ckpt_reader_read_range(struct ckpt_reader *r, const struct ckpt_entry *e, uint64_t off,
                           void *buf, size_t len, struct ckpt_err *err)
{
    int rc;
    if ((rc = readable(r, e, err)))
        return rc;
    if (off > (uint64_t)e->size || len > (uint64_t)e->size - off)
        return entry_err(r, err, -EINVAL, NULL, e,
                         "range [%llu, +%zu) is outside the %lld stored bytes",
                         (unsigned long long)off, len, (long long)e->size);
    return read_at(r, e, off, buf, len, err);
}

int ckpt_reader_read_strings(struct ckpt_reader *r, const struct ckpt_entry *e,
                             struct ckpt_strings **out, struct ckpt_err *err)
{
    uint8_t *raw = NULL;
    uint64_t *lens = NULL;
    int rc;
    *out = NULL;
    if ((rc = readable(r, e, err)))
        return rc;
    if (e->dtype != CKPT_DT_STRING)
        return entry_err(r, err, -EINVAL, NULL, e, "is %s, not string", ckpt_dtype_name(e->dtype));
    uint64_t n = (uint64_t)ckpt_shape_elements(e->rank, e->dims);
    raw = malloc(e->size ? (size_t)e->size : 1);
    lens = malloc(n ? n * sizeof *lens : 1);
    if (!raw || !lens) {
        rc = entry_err(r, err, -ENOMEM, NULL, e, "out of memory");
        goto cleanup;
    }
    if ((rc = read_at(r, e, 0, raw, (size_t)e->size, err)))
        goto cleanup;
    size_t doff;
    if ((rc = check_read_strings(r, e, raw, lens, &doff, err)))
        goto cleanup;
    size_t bytes = (size_t)e->size - doff;
    size_t hdr = (sizeof(struct ckpt_strings) + 7) & ~(size_t)7;
    struct ckpt_strings *s = malloc(hdr + n * (sizeof(char *) + sizeof(uint64_t)) + bytes + n + 1);
    if (!s) {
        rc = entry_err(r, err, -ENOMEM, NULL, e, "out of memory");
        goto cleanup;
    }
    const char **strs = (const char **)((char *)s + hdr);
    uint64_t *ls = (uint64_t *)(strs + n);
    char *d = (char *)(ls + n);
    const uint8_t *src = raw + doff;
    for (uint64_t i = 0; i < n; i++) {
        memcpy(d, src, lens[i]);
        d[lens[i]] = 0;
        strs[i] = d;
        ls[i] = lens[i];
        d += lens[i] + 1;
        src += lens[i];
    }
    s->n = n;
    s->strs = strs;
    s->lens = ls;
    *out = s;
cleanup:
    free(raw);
    free(lens);
    return rc;
}

void ckpt_strings_free(struct ckpt_strings *s)
{
    free(s);
}

int ckpt_reader_verify_entry(struct ckpt_reader *r, const struct ckpt_entry *e,
                             struct ckpt_err *err)
{
    int rc;
    if ((rc = readable(r, e, err)))
        return rc;
    if (e->dtype == CKPT_DT_STRING) {
        struct ckpt_strings *s;
        rc = ckpt_reader_read_strings(r, e, &s, err);
        ckpt_strings_free(s);
        return rc;
    }
    size_t bl = (uint64_t)e->size < READ_CHUNK ? (size_t)e->size : READ_CHUNK;
    uint8_t *buf = malloc(bl ? bl : 1);
    if (!buf)
        return entry_err(r, err, -ENOMEM, NULL, e, "out of memory");
    rc = read_crc(r, e, buf, bl, false, err);
    free(buf);
    return rc;
}

int ckpt_reader_verify(struct ckpt_reader *r, struct ckpt_err *err)
{
    for (size_t i = 0; i < r->n; i++) {
        const struct ckpt_entry *e = &r->ents[i];
        if (e->nslices > 0)
            continue; /* metadata only; its slices are entries of their own */
        int rc = ckpt_reader_verify_entry(r, e, err);
        if (rc)
            return rc;
    }
    return 0;
}
