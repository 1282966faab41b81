/*
 * tensors.c: a list of named tensors, the unit psrt moves between a ps, the
 * wire and the checkpoint library: what a ps saves, what a snapshot sends
 * to the chief, what a restore loads.  Bundles are written and read only
 * through runtime/ckpt (bundle.h).
 *
 * Wire form: u32 count, then per tensor: name (u32 len + bytes), u32 dtype,
 * u32 rank, i64 dims[rank], u64 nbytes, padding to 8, bytes, padding to 8.
 */
#include "runtime/psrt/psrt.h"
#include "runtime/ckpt/bundle.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void psrt_tl_free(struct psrt_tl *l)
{
    if (l->owns)
        for (int i = 0; i < l->n; i++)
            free(l->t[i].data);
    free(l->t);
    memset(l, 0, sizeof *l);
}

struct psrt_tensor *psrt_tl_add(struct psrt_tl *l, const char *name, int dtype, int rank,
                                const int64_t *dims, void *data, size_t len)
{
    if (l->n == l->cap) {
        int cap = l->cap ? l->cap * 2 : 16;
        struct psrt_tensor *t = realloc(l->t, sizeof *t * (size_t)cap);
        if (!t)
            return NULL;
        l->t = t;
        l->cap = cap;
    }
    struct psrt_tensor *t = &l->t[l->n++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->dtype = dtype;
    t->rank = rank;
    for (int i = 0; i < rank && i < 2; i++)
        t->dims[i] = dims[i];
    t->data = data;
    t->len = len;
    return t;
}

const struct psrt_tensor *psrt_tl_find(const struct psrt_tl *l, const char *name)
{
    for (int i = 0; i < l->n; i++)
        if (!strcmp(l->t[i].name, name))
            return &l->t[i];
    return NULL;
}

void psrt_tl_encode(const struct psrt_tl *l, struct psrt_buf *b)
{
    psrt_buf_u32(b, (uint32_t)l->n);
    for (int i = 0; i < l->n; i++) {
        const struct psrt_tensor *t = &l->t[i];
        psrt_buf_str(b, t->name);
        psrt_buf_u32(b, (uint32_t)t->dtype);
        psrt_buf_u32(b, (uint32_t)t->rank);
        for (int d = 0; d < t->rank; d++)
            psrt_buf_u64(b, (uint64_t)t->dims[d]);
        psrt_buf_u64(b, t->len);
        psrt_buf_align8(b);
        psrt_buf_put(b, t->data, t->len);
        psrt_buf_align8(b);
    }
}

int psrt_tl_encode_iov(const struct psrt_tl *l, struct psrt_buf *meta, struct iovec *iov,
                       int maxiov)
{
    static const uint8_t zero[8];
    size_t start[4096], end[4096];
    if (l->n + 1 > 4096 || 3 * l->n + 1 > maxiov)
        return -ENOSPC;
    uint64_t off = 0; /* offset in the stream */
    size_t chunk = meta->len;
    psrt_buf_u32(meta, (uint32_t)l->n);
    for (int i = 0; i < l->n; i++) {
        const struct psrt_tensor *t = &l->t[i];
        psrt_buf_str(meta, t->name);
        psrt_buf_u32(meta, (uint32_t)t->dtype);
        psrt_buf_u32(meta, (uint32_t)t->rank);
        for (int d = 0; d < t->rank; d++)
            psrt_buf_u64(meta, (uint64_t)t->dims[d]);
        psrt_buf_u64(meta, t->len);
        size_t here = off + (meta->len - chunk);
        psrt_buf_put(meta, zero, (8 - here % 8) % 8);
        start[i] = chunk;
        end[i] = meta->len;
        off += meta->len - chunk;
        off += t->len + (8 - t->len % 8) % 8;
        chunk = meta->len;
    }
    if (meta->bad)
        return -ENOMEM;
    int n = 0;
    for (int i = 0; i < l->n; i++) {
        iov[n++] = (struct iovec){meta->p + start[i], end[i] - start[i]};
        if (l->t[i].len)
            iov[n++] = (struct iovec){l->t[i].data, l->t[i].len};
        if (l->t[i].len % 8)
            iov[n++] = (struct iovec){(void *)zero, 8 - l->t[i].len % 8};
    }
    if (l->n == 0)
        iov[n++] = (struct iovec){meta->p, meta->len};
    return n;
}

int psrt_tl_decode(struct psrt_tl *l, struct psrt_buf *b)
{
    memset(l, 0, sizeof *l);
    uint32_t n = psrt_buf_get_u32(b);
    if (b->bad || n > 1000000)
        return -EBADMSG;
    for (uint32_t i = 0; i < n; i++) {
        char name[160];
        if (psrt_buf_get_str(b, name, sizeof name))
            goto bad;
        int dtype = (int)psrt_buf_get_u32(b);
        uint32_t rank = psrt_buf_get_u32(b);
        if (rank > 2)
            goto bad;
        int64_t dims[2] = {0, 0};
        for (uint32_t d = 0; d < rank; d++)
            dims[d] = (int64_t)psrt_buf_get_u64(b);
        uint64_t len = psrt_buf_get_u64(b);
        psrt_buf_skip_align8(b);
        void *data = (void *)psrt_buf_get(b, len);
        psrt_buf_skip_align8(b);
        if (b->bad)
            goto bad;
        /* shape x dtype size is len, the product not overflowing */
        int64_t el = ckpt_shape_elements((int)rank, dims);
        uint64_t es = ckpt_dtype_size(dtype);
        if (el < 0 || es == 0 || (uint64_t)el > len / es || (uint64_t)el * es != len)
            goto bad;
        if (!psrt_tl_add(l, name, dtype, (int)rank, dims, data, len))
            goto bad;
    }
    return 0;
bad:
    psrt_tl_free(l);
    return -EBADMSG;
}

int psrt_tl_write_bundle(const struct psrt_tl *l, const char *prefix, unsigned wflags,
                         unsigned fflags, struct psrt_err *err)
{
    struct ckpt_writer *w = NULL;
    struct ckpt_err ce = {0};
    struct ckpt_writer_opts o = {.flags = wflags};
    int r = ckpt_writer_open(&w, prefix, &o, &ce);
    if (r) {
        if (ce.call[0] && strcmp(ce.call, "mkdir") != 0) {
            /* TensorFlow 1.x names the data file it could not create. */
            char *d = ckpt_data_name(prefix, 0, 1);
            psrt_err_path(err, r, d ? d : prefix);
            free(d);
            if (err)
                snprintf(err->call, sizeof err->call, "%s", ce.call);
        } else {
            psrt_err_from_ckpt(err, 0, &ce);
        }
        return r;
    }
    for (int i = 0; i < l->n; i++) {
        const struct psrt_tensor *t = &l->t[i];
        r = ckpt_writer_add(w, t->name, t->dtype, t->rank, t->dims, t->data, t->len, &ce);
        if (r) {
            psrt_err_from_ckpt(err, 0, &ce);
            ckpt_writer_abort(w);
            return r;
        }
    }
    r = ckpt_writer_finish(w, fflags, &ce);
    if (r)
        psrt_err_from_ckpt(err, 0, &ce);
    return r;
}

int psrt_tl_read_bundle(struct psrt_tl *l, const char *prefix, struct psrt_err *err)
{
    return psrt_tl_read_bundle_into(l, prefix, NULL, NULL, err);
}

int psrt_tl_read_bundle_into(struct psrt_tl *l, const char *prefix,
                             void *(*take)(void *ctx, size_t len), void *ctx, struct psrt_err *err)
{
    memset(l, 0, sizeof *l);
    l->owns = true;
    struct ckpt_reader *rd = NULL;
    struct ckpt_err ce = {0};
    int r = ckpt_reader_open(&rd, prefix, &ce);
    if (r) {
        psrt_err_from_ckpt(err, 0, &ce);
        return r;
    }
    size_t n = ckpt_reader_count(rd);
    for (size_t i = 0; i < n; i++) {
        const struct ckpt_entry *e = ckpt_reader_entry(rd, i);
        if (e->rank < 0 || e->rank > 2 || ckpt_dtype_size(e->dtype) == 0) {
            psrt_err_set(err, -EBADMSG, "%s: tensor '%s' has a shape or dtype psrt does not use",
                         prefix, e->name);
            r = -EBADMSG;
            goto fail;
        }
        void *data = take ? take(ctx, (size_t)e->size) : NULL;
        if (!data)
            data = psrt_alloc_big((size_t)e->size);
        if (!data) {
            psrt_err_set(err, -ENOMEM, "%s: no memory for tensor '%s'", prefix, e->name);
            r = -ENOMEM;
            goto fail;
        }
        r = ckpt_reader_read(rd, e, data, (size_t)e->size, &ce);
        if (r || !psrt_tl_add(l, e->name, e->dtype, e->rank, e->dims, data, (size_t)e->size)) {
            free(data);
            if (r)
                psrt_err_from_ckpt(err, 0, &ce);
            else
                psrt_err_set(err, -ENOMEM, "no memory");
            r = r ? r : -ENOMEM;
            goto fail;
        }
    }
    ckpt_reader_close(rd);
    return 0;
fail:
    ckpt_reader_close(rd);
    psrt_tl_free(l);
    return r;
}
