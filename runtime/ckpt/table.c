/*
 * table.c: the LevelDB-style sorted table that a bundle's .index file is,
 * byte for byte as TensorFlow's tensorflow/core/lib/io/table_builder.cc
 * writes it, and a strict parser for it.
 *
 * File layout:
 *   data block 0 | trailer ... data block N-1 | trailer
 *   metaindex block (empty) | trailer
 *   index block (restart interval 1; key = shortest separator >= last key of
 *                the block and < first key of the next; for the last block
 *                the short successor of its last key; value = varint64
 *                offset, varint64 size of the block) | trailer
 *   footer: metaindex handle, index handle, zero padding to 40 bytes,
 *           magic 0xdb4775248b80fb57 (little-endian)
 * A block: entries (varint32 shared, varint32 non_shared, varint32
 * value_len, key delta, value), restart offsets (fixed32 each; every 16th
 * entry starts with shared = 0), fixed32 count.  A trailer: type byte (0 raw,
 * 1 snappy) and the masked crc32c of block contents + type byte.
 * A data block is cut when its size estimate reaches block_size (262144),
 * or before an entry of key+value >= 2 * block_size.
 *
 * Builder states: ADDING (pending_index_entry true only while the data block
 * is empty, after a flush) -> finished.  Keys strictly increasing.
 * The parser trusts nothing: every offset, length, varint, restart point,
 * crc and the key order is checked before use.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <snappy-c.h>

#include "runtime/ckpt/crc.h"
#include "runtime/ckpt/internal.h"

/* ---- block builder ---- */

struct blockb {
    struct ckpt_buf buf;
    uint32_t *restarts;
    size_t nr, cr;
    int counter, interval;
    struct ckpt_buf last;
    bool oom;
};

static void bb_reset(struct blockb *b)
{
    b->buf.len = 0;
    b->last.len = 0;
    b->nr = 1;
    b->restarts[0] = 0;
    b->counter = 0;
}

static int bb_init(struct blockb *b, int interval)
{
    memset(b, 0, sizeof *b);
    b->interval = interval;
    b->cr = 16;
    b->restarts = malloc(b->cr * sizeof *b->restarts);
    if (!b->restarts)
        return -ENOMEM;
    bb_reset(b);
    return 0;
}

static void bb_free(struct blockb *b)
{
    ckpt_buf_free(&b->buf);
    ckpt_buf_free(&b->last);
    free(b->restarts);
    b->restarts = NULL;
}

static bool bb_empty(const struct blockb *b)
{
    return b->buf.len == 0;
}

static size_t bb_estimate(const struct blockb *b)
{
    return b->buf.len + b->nr * 4 + 4;
}

static void bb_add(struct blockb *b, const uint8_t *key, size_t klen, const uint8_t *val,
                   size_t vlen)
{
    static const uint8_t empty[1];
    size_t shared = 0;
    if (!key) /* an empty key held in a never-grown buffer */
        key = empty;
    if (b->counter < b->interval) {
        size_t min = klen < b->last.len ? klen : b->last.len;
        while (shared < min && b->last.p[shared] == key[shared])
            shared++;
    } else {
        if (b->nr == b->cr) {
            uint32_t *r = realloc(b->restarts, b->cr * 2 * sizeof *r);
            if (!r) {
                b->oom = true;
                return;
            }
            b->restarts = r;
            b->cr *= 2;
        }
        b->restarts[b->nr++] = (uint32_t)b->buf.len;
        b->counter = 0;
    }
    ckpt_buf_varint(&b->buf, shared);
    ckpt_buf_varint(&b->buf, klen - shared);
    ckpt_buf_varint(&b->buf, vlen);
    ckpt_buf_put(&b->buf, key + shared, klen - shared);
    ckpt_buf_put(&b->buf, val, vlen);
    b->last.len = shared;
    ckpt_buf_put(&b->last, key + shared, klen - shared);
    b->counter++;
}

static void bb_finish(struct blockb *b)
{
    for (size_t i = 0; i < b->nr; i++)
        ckpt_buf_fixed32(&b->buf, b->restarts[i]);
    ckpt_buf_fixed32(&b->buf, (uint32_t)b->nr);
}

/* ---- table builder ---- */

struct ckpt_tbl_builder {
    size_t block_size;
    bool snappy;
    struct ckpt_buf out;
    struct blockb data, index;
    struct ckpt_buf last_key;
    int64_t nentries;
    bool pending;
    uint64_t pend_off, pend_size;
    int err;
};

struct ckpt_tbl_builder *ckpt_tbl_new(size_t block_size, bool snappy)
{
    struct ckpt_tbl_builder *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->block_size = block_size ? block_size : CKPT_TBL_DEFAULT_BLOCK_SIZE;
    t->snappy = snappy;
    if (bb_init(&t->data, 16) < 0 || bb_init(&t->index, 1) < 0) {
        ckpt_tbl_free(t);
        return NULL;
    }
    return t;
}

void ckpt_tbl_free(struct ckpt_tbl_builder *t)
{
    if (!t)
        return;
    bb_free(&t->data);
    bb_free(&t->index);
    ckpt_buf_free(&t->out);
    ckpt_buf_free(&t->last_key);
    free(t);
}

static void write_block(struct ckpt_tbl_builder *t, struct blockb *b, uint64_t *off, uint64_t *size)
{
    bb_finish(b);
    if (b->buf.oom || b->oom) {
        t->err = -ENOMEM;
        return;
    }
    const uint8_t *contents = b->buf.p;
    size_t n = b->buf.len;
    uint8_t type = 0;
    char *comp = NULL;
    if (t->snappy) {
        size_t clen = snappy_max_compressed_length(n);
        comp = malloc(clen ? clen : 1);
        if (!comp) {
            t->err = -ENOMEM;
            return;
        }
        if (snappy_compress((const char *)contents, n, comp, &clen) == SNAPPY_OK &&
            clen < n - n / 8) {
            contents = (const uint8_t *)comp;
            n = clen;
            type = 1;
        }
    }
    *off = t->out.len;
    *size = n;
    ckpt_buf_put(&t->out, contents, n);
    uint32_t crc = ckpt_crc32c(contents, n);
    crc = ckpt_crc32c_extend(crc, &type, 1);
    ckpt_buf_putc(&t->out, type);
    ckpt_buf_fixed32(&t->out, ckpt_crc_mask(crc));
    free(comp);
    if (t->out.oom)
        t->err = -ENOMEM;
    bb_reset(b);
}

static void flush(struct ckpt_tbl_builder *t)
{
    if (t->err || bb_empty(&t->data))
        return;
    write_block(t, &t->data, &t->pend_off, &t->pend_size);
    t->pending = true;
}

static void add_index_entry(struct ckpt_tbl_builder *t)
{
    uint8_t h[20];
    struct ckpt_buf hb = {0};
    ckpt_buf_varint(&hb, t->pend_off);
    ckpt_buf_varint(&hb, t->pend_size);
    if (hb.oom) {
        t->err = -ENOMEM;
        return;
    }
    memcpy(h, hb.p, hb.len);
    bb_add(&t->index, t->last_key.p, t->last_key.len, h, hb.len);
    ckpt_buf_free(&hb);
    t->pending = false;
}

/* TensorFlow's FindShortestSeparator on t->last_key against limit */
static void shortest_separator(struct ckpt_buf *start, const uint8_t *limit, size_t llen)
{
    size_t min = start->len < llen ? start->len : llen;
    size_t i = 0;
    while (i < min && start->p[i] == limit[i])
        i++;
    if (i >= min)
        return; /* one is a prefix of the other */
    uint8_t d = start->p[i];
    if (d < 0xff && d + 1 < limit[i]) {
        start->p[i]++;
        start->len = i + 1;
    }
}

static void short_successor(struct ckpt_buf *key)
{
    for (size_t i = 0; i < key->len; i++) {
        if (key->p[i] != 0xff) {
            key->p[i]++;
            key->len = i + 1;
            return;
        }
    }
}

int ckpt_tbl_add(struct ckpt_tbl_builder *t, const void *key, size_t klen, const void *val,
                 size_t vlen)
{
    if (t->err)
        return t->err;
    if (t->nentries > 0) {
        size_t min = klen < t->last_key.len ? klen : t->last_key.len;
        int c = min ? memcmp(key, t->last_key.p, min) : 0;
        if (c < 0 || (c == 0 && klen <= t->last_key.len))
            return -EINVAL;
        if (klen + vlen >= 2 * t->block_size)
            flush(t);
    }
    if (t->pending) {
        shortest_separator(&t->last_key, key, klen);
        add_index_entry(t);
    }
    t->last_key.len = 0;
    ckpt_buf_put(&t->last_key, key, klen);
    t->nentries++;
    bb_add(&t->data, key, klen, val, vlen);
    if (t->last_key.oom)
        t->err = -ENOMEM;
    if (bb_estimate(&t->data) >= t->block_size)
        flush(t);
    return t->err;
}

int ckpt_tbl_finish(struct ckpt_tbl_builder *t, struct ckpt_buf *out)
{
    uint64_t moff = 0, msize = 0, ioff = 0, isize = 0;
    flush(t);
    if (!t->err) {
        struct blockb meta;
        if (bb_init(&meta, 16) < 0) {
            t->err = -ENOMEM;
        } else {
            write_block(t, &meta, &moff, &msize);
            bb_free(&meta);
        }
    }
    if (!t->err) {
        if (t->pending) {
            short_successor(&t->last_key);
            add_index_entry(t);
        }
        write_block(t, &t->index, &ioff, &isize);
    }
    if (!t->err) {
        size_t start = t->out.len;
        ckpt_buf_varint(&t->out, moff);
        ckpt_buf_varint(&t->out, msize);
        ckpt_buf_varint(&t->out, ioff);
        ckpt_buf_varint(&t->out, isize);
        while (!t->out.oom && t->out.len < start + 40)
            ckpt_buf_putc(&t->out, 0);
        ckpt_buf_fixed32(&t->out, (uint32_t)CKPT_TBL_MAGIC);
        ckpt_buf_fixed32(&t->out, (uint32_t)(CKPT_TBL_MAGIC >> 32));
        if (t->out.oom)
            t->err = -ENOMEM;
    }
    if (t->err)
        return t->err;
    *out = t->out;
    memset(&t->out, 0, sizeof t->out);
    return 0;
}

/* ---- parser ---- */

struct walk {
    const uint8_t *file;
    size_t len;
    char *why;
    size_t whylen;
    ckpt_tbl_cb cb;
    void *ctx;
    struct ckpt_buf prev; /* last key handed to cb */
    bool have_prev;
};

static int wbad(struct walk *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int wbad(struct walk *w, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->why, w->whylen, fmt, ap);
    va_end(ap);
    return -EBADMSG;
}

struct handle {
    uint64_t off, size;
};

/* Two varints; only canonical (shortest) encodings, as every writer emits,
 * so that a flipped continuation bit in the footer cannot go unnoticed. */
static int decode_handle(const uint8_t **p, const uint8_t *end, struct handle *h)
{
    const uint8_t *s = *p;
    if (ckpt_varint_get(p, end, &h->off) < 0 || *p - s != ckpt_varint_len(h->off))
        return -1;
    s = *p;
    if (ckpt_varint_get(p, end, &h->size) < 0 || *p - s != ckpt_varint_len(h->size))
        return -1;
    return 0;
}

/* Reads and checks a block; *contents points into the file or into *owned. */
static int read_block(struct walk *w, const struct handle *h, const char *what,
                      const uint8_t **contents, size_t *n, uint8_t **owned)
{
    size_t limit = w->len - CKPT_TBL_FOOTER_LEN;
    *owned = NULL;
    if (h->off > limit || h->size > limit - h->off ||
        CKPT_TBL_TRAILER_LEN > limit - h->off - h->size)
        return wbad(w,
                    "%s: handle (offset %llu, size %llu) points past the blocks area "
                    "(%zu bytes before the footer): file truncated or corrupt",
                    what, (unsigned long long)h->off, (unsigned long long)h->size, limit);
    const uint8_t *b = w->file + h->off;
    uint8_t type = b[h->size];
    uint32_t stored = ckpt_crc_unmask(ckpt_get32le(b + h->size + 1));
    uint32_t crc = ckpt_crc32c_extend(ckpt_crc32c(b, h->size), &type, 1);
    if (crc != stored)
        return wbad(w,
                    "%s (offset %llu, %llu bytes): block checksum mismatch "
                    "(stored 0x%08x, computed 0x%08x)",
                    what, (unsigned long long)h->off, (unsigned long long)h->size, stored, crc);
    if (type == 0) {
        *contents = b;
        *n = h->size;
        return 0;
    }
    if (type != 1)
        return wbad(w, "%s (offset %llu): unknown block compression type %u", what,
                    (unsigned long long)h->off, type);
    size_t ulen;
    if (snappy_uncompressed_length((const char *)b, h->size, &ulen) != SNAPPY_OK)
        return wbad(w, "%s (offset %llu): snappy block has no valid length header", what,
                    (unsigned long long)h->off);
    if (ulen > ((size_t)1 << 30) || ulen > 32 * h->size + 64)
        return wbad(w, "%s (offset %llu): snappy block claims %zu bytes from %llu", what,
                    (unsigned long long)h->off, ulen, (unsigned long long)h->size);
    uint8_t *u = malloc(ulen ? ulen : 1);
    if (!u)
        return -ENOMEM;
    size_t got = ulen;
    if (snappy_uncompress((const char *)b, h->size, (char *)u, &got) != SNAPPY_OK || got != ulen) {
        free(u);
        return wbad(w, "%s (offset %llu): snappy data does not decompress", what,
                    (unsigned long long)h->off);
    }
    *owned = u;
    *contents = u;
    *n = ulen;
    return 0;
}

typedef int (*entry_fn)(struct walk *w, void *arg, const uint8_t *key, size_t klen,
                        const uint8_t *val, size_t vlen);

/* Walks the entries of one block's contents, checking structure. */
static int walk_block(struct walk *w, const char *what, const uint8_t *b, size_t n, entry_fn fn,
                      void *arg)
{
    struct ckpt_buf key = {0};
    int rc = 0;
    if (n < 4)
        return wbad(w, "%s: %zu bytes, too short for a block", what, n);
    uint32_t nr = ckpt_get32le(b + n - 4);
    if (nr > (n - 4) / 4)
        return wbad(w, "%s: restart count %u does not fit in %zu bytes", what, nr, n);
    size_t rstart = n - 4 - 4 * (size_t)nr;
    if (nr == 0 && rstart != 0)
        return wbad(w, "%s: no restart points but %zu bytes of entries", what, rstart);
    const uint8_t *p = b, *end = b + rstart;
    uint32_t ri = 0;
    size_t idx = 0;
    while (p < end) {
        size_t at = (size_t)(p - b);
        uint64_t shared, nonshared, vlen;
        if (ckpt_varint_get(&p, end, &shared) < 0 || ckpt_varint_get(&p, end, &nonshared) < 0 ||
            ckpt_varint_get(&p, end, &vlen) < 0) {
            rc = wbad(w, "%s: entry %zu at byte %zu: truncated entry header", what, idx, at);
            goto done;
        }
        if (shared > key.len) {
            rc = wbad(w, "%s: entry %zu at byte %zu: shares %llu key bytes with a %zu byte key",
                      what, idx, at, (unsigned long long)shared, key.len);
            goto done;
        }
        if (nonshared > (uint64_t)(end - p) || vlen > (uint64_t)(end - p) - nonshared) {
            rc = wbad(w,
                      "%s: entry %zu at byte %zu: key/value (%llu + %llu bytes) overruns the block",
                      what, idx, at, (unsigned long long)nonshared, (unsigned long long)vlen);
            goto done;
        }
        if (ri < nr && ckpt_get32le(b + rstart + 4 * ri) == at) {
            if (shared != 0) {
                rc = wbad(w, "%s: entry %zu at restart point %u shares key bytes", what, idx, ri);
                goto done;
            }
            ri++;
        }
        key.len = shared;
        ckpt_buf_put(&key, p, nonshared);
        if (key.oom) {
            rc = -ENOMEM;
            goto done;
        }
        p += nonshared;
        if ((rc = fn(w, arg, key.p, key.len, p, vlen)))
            goto done;
        p += vlen;
        idx++;
    }
    if (ri != nr && !(idx == 0 && nr == 1 && ckpt_get32le(b + rstart) == 0))
        rc = wbad(w, "%s: restart point %u (offset %u) is not at an entry boundary", what, ri,
                  ckpt_get32le(b + rstart + 4 * ri));
done:
    ckpt_buf_free(&key);
    return rc;
}

static int key_cmp(const uint8_t *a, size_t al, const uint8_t *b, size_t bl)
{
    size_t min = al < bl ? al : bl;
    int c = min ? memcmp(a, b, min) : 0;
    if (c)
        return c;
    return al < bl ? -1 : al > bl;
}

/* Reads the block at h and walks its entries. */
static int walk_at(struct walk *w, const struct handle *h, const char *what, entry_fn fn, void *arg)
{
    const uint8_t *contents = NULL;
    size_t n = 0;
    uint8_t *owned;
    int rc = read_block(w, h, what, &contents, &n, &owned);
    if (rc)
        return rc;
    rc = walk_block(w, what, contents, n, fn, arg);
    free(owned);
    return rc;
}

struct dctx {
    const uint8_t *sep;
    size_t seplen;
    const char *what;
};

static int data_entry(struct walk *w, void *arg, const uint8_t *key, size_t klen,
                      const uint8_t *val, size_t vlen)
{
    struct dctx *d = arg;
    char a[128], b[128];
    if (w->have_prev && key_cmp(key, klen, w->prev.p, w->prev.len) <= 0) {
        ckpt_escape_name(a, sizeof a, (const char *)key, klen);
        ckpt_escape_name(b, sizeof b, (const char *)w->prev.p, w->prev.len);
        return wbad(w, "%s: key '%s' does not sort after the previous key '%s'", d->what, a, b);
    }
    if (key_cmp(key, klen, d->sep, d->seplen) > 0) {
        ckpt_escape_name(a, sizeof a, (const char *)key, klen);
        ckpt_escape_name(b, sizeof b, (const char *)d->sep, d->seplen);
        return wbad(w, "%s: key '%s' sorts after its index key '%s'", d->what, a, b);
    }
    w->prev.len = 0;
    ckpt_buf_put(&w->prev, key, klen);
    if (w->prev.oom)
        return -ENOMEM;
    w->have_prev = true;
    return w->cb(w->ctx, key, klen, val, vlen);
}

struct ictx {
    size_t nblocks;
    struct ckpt_buf lastsep;
};

static int index_entry(struct walk *w, void *arg, const uint8_t *key, size_t klen,
                       const uint8_t *val, size_t vlen)
{
    struct ictx *ic = arg;
    struct handle h;
    const uint8_t *p = val;
    char what[400], after[128], upto[128];
    int rc;

    ckpt_escape_name(upto, sizeof upto, (const char *)key, klen);
    if (w->have_prev)
        ckpt_escape_name(after, sizeof after, (const char *)w->prev.p, w->prev.len);
    snprintf(what, sizeof what, "data block %zu (keys %s%s%s up to '%s')", ic->nblocks,
             w->have_prev ? "after '" : "from the first", w->have_prev ? after : "",
             w->have_prev ? "'" : "", upto);
    if (ic->nblocks && key_cmp(key, klen, ic->lastsep.p, ic->lastsep.len) <= 0)
        return wbad(w, "index block: entry %zu: key '%s' does not sort after the previous one",
                    ic->nblocks, upto);
    if (decode_handle(&p, val + vlen, &h) < 0 || p != val + vlen)
        return wbad(w, "index block: entry %zu ('%s'): malformed block handle", ic->nblocks, upto);
    ic->lastsep.len = 0;
    ckpt_buf_put(&ic->lastsep, key, klen);
    if (ic->lastsep.oom)
        return -ENOMEM;

    struct dctx d = {key, klen, what};
    rc = walk_at(w, &h, what, data_entry, &d);
    ic->nblocks++;
    return rc;
}

static int meta_entry(struct walk *w, void *arg, const uint8_t *key, size_t klen,
                      const uint8_t *val, size_t vlen)
{
    (void)w;
    (void)arg;
    (void)key;
    (void)klen;
    (void)val;
    (void)vlen;
    return 0; /* TensorFlow writes none; other meta blocks are ignored */
}

int ckpt_tbl_walk(const uint8_t *file, size_t len, ckpt_tbl_cb cb, void *ctx, char *why,
                  size_t whylen)
{
    struct walk w = {file, len, why, whylen, cb, ctx, {0}, false};
    struct ictx ic = {0, {0}};
    struct handle mh, ih;
    int rc;

    if (len < CKPT_TBL_FOOTER_LEN)
        return wbad(&w,
                    "file is %zu bytes, shorter than a table footer (48 bytes): truncated "
                    "or not a tensor bundle index",
                    len);
    const uint8_t *foot = file + len - CKPT_TBL_FOOTER_LEN;
    uint64_t magic = (uint64_t)ckpt_get32le(foot + 40) | (uint64_t)ckpt_get32le(foot + 44) << 32;
    if (magic != CKPT_TBL_MAGIC)
        return wbad(&w,
                    "bad table magic number 0x%016llx at the end of the file (expected "
                    "0x%016llx): truncated or not a tensor bundle index",
                    (unsigned long long)magic, (unsigned long long)CKPT_TBL_MAGIC);
    const uint8_t *p = foot;
    if (decode_handle(&p, foot + 40, &mh) < 0 || decode_handle(&p, foot + 40, &ih) < 0)
        return wbad(&w, "footer: malformed block handles");
    for (; p < foot + 40; p++)
        if (*p)
            return wbad(&w, "footer: padding byte %zu is 0x%02x, not zero: corrupt footer",
                        (size_t)(p - foot), *p);

    if (!(rc = walk_at(&w, &mh, "metaindex block", meta_entry, NULL)))
        rc = walk_at(&w, &ih, "index block", index_entry, &ic);
    ckpt_buf_free(&w.prev);
    ckpt_buf_free(&ic.lastsep);
    return rc;
}

/* ---- block listing (tests, inspect) ---- */

struct lctx {
    struct ckpt_tbl_block *out;
    size_t max, n;
    const uint8_t *file;
};

static int list_entry(struct walk *w, void *arg, const uint8_t *key, size_t klen,
                      const uint8_t *val, size_t vlen)
{
    struct lctx *l = arg;
    struct handle h;
    const uint8_t *p = val;
    (void)key;
    (void)klen;
    if (decode_handle(&p, val + vlen, &h) < 0 || p != val + vlen)
        return wbad(w, "index block: malformed block handle");
    if (h.off > w->len || h.size > w->len - h.off || w->len - h.off - h.size < CKPT_TBL_TRAILER_LEN)
        return wbad(w, "index block: handle points past the end");
    if (l->n < l->max)
        l->out[l->n] = (struct ckpt_tbl_block){h.off, h.size, l->file[h.off + h.size], 0};
    l->n++;
    return 0;
}

int ckpt_tbl_blocks(const uint8_t *file, size_t len, struct ckpt_tbl_block *out, size_t max,
                    char *why, size_t whylen)
{
    struct walk w = {file, len, why, whylen, NULL, NULL, {0}, false};
    struct lctx l = {out, max, 0, file};
    struct handle mh, ih;
    int rc;
    if (len < CKPT_TBL_FOOTER_LEN)
        return wbad(&w, "too short");
    const uint8_t *foot = file + len - CKPT_TBL_FOOTER_LEN, *p = foot;
    if (decode_handle(&p, foot + 40, &mh) < 0 || decode_handle(&p, foot + 40, &ih) < 0)
        return wbad(&w, "footer: malformed block handles");
    if ((rc = walk_at(&w, &ih, "index block", list_entry, &l)))
        return rc;
    struct ckpt_tbl_block extra[2] = {
        {mh.off, mh.size, mh.off + mh.size < len ? file[mh.off + mh.size] : 0, 1},
        {ih.off, ih.size, file[ih.off + ih.size], 2},
    };
    for (int i = 0; i < 2; i++) {
        if (l.n < max)
            out[l.n] = extra[i];
        l.n++;
    }
    return (int)l.n;
}
