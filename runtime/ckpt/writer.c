/*
 * writer.c: writes a one-shard tensor bundle exactly as TensorFlow's
 * BundleWriter does: tensors appended to PREFIX.data-00000-of-00001 in the
 * order added (optionally padded to data_alignment), an entry per tensor
 * (dtype, shape, offset, size, masked crc32c), and at finish the index table
 * with the header entry under "" and the entries sorted by name.
 *
 * States:
 *   OPEN       accepting add / add_strings / begin
 *   IN_TENSOR  between begin and end: accepting append
 *   FAILED     an error happened: every call returns the saved error
 *   (finish and abort free the writer)
 * Invariants: `size` is the data file's logical length (written + buffered);
 * every entry's [offset, offset+size) lies below it, in add order; the data
 * and index are only under temporary names (".tempstate<N>") until finish
 * has written and (with CKPT_SYNC) fsynced both; then the data file is
 * renamed, then the index, then the directory fsynced, and with
 * CKPT_W_MKDIR or CKPT_W_MKDIR_P every directory above it along the prefix
 * (mkdir made new entries there, maybe in an earlier save that failed: a
 * crash would lose them, and the bundle with them).
 *
 * Data path: writes go through one large buffer (8 MiB); pieces at least
 * as large as the buffer are written straight from the caller's memory.  The
 * crc32c is computed on the bytes as written (hardware crc, ISA-L).  Every
 * 16 MiB written, writeback of those bytes is started (sync_file_range
 * SYNC_FILE_RANGE_WRITE, asynchronous), so the disk works while the caller
 * produces more and the final fsync has little left to do.
 *
 * Direct path (CKPT_W_DIRECT): the data file is opened O_DIRECT and every
 * byte goes through two 4 KiB-aligned buffers; a full buffer is submitted
 * as one asynchronous write (io_submit) at its aligned offset while the
 * other fills, so the page cache is never touched.  The last, partial
 * buffer is written padded to 4 KiB and the file truncated back to its
 * logical size before the fsync.  Invariant: at most one write in flight,
 * always of the buffer not being filled.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/aio_abi.h>
#include <stdbool.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "runtime/ckpt/bundle.h"
#include "runtime/ckpt/crc.h"
#include "runtime/ckpt/internal.h"

#define DEFAULT_BUFFER (8u << 20)
#define WRITEBACK_EVERY (16u << 20)

struct wentry {
    char *name;
    size_t nlen;
    int dtype;
    int rank;
    int64_t *dims;
    int64_t offset, size;
    uint32_t crc; /* masked */
};

enum { W_OPEN, W_IN_TENSOR, W_FAILED };

struct ckpt_writer {
    char *prefix, *data_final, *data_tmp, *index_final, *index_tmp;
    struct ckpt_writer_opts o;
    int fd;
    uint8_t *buf;
    size_t bufcap, buflen;
    uint64_t size;
    uint64_t flushed;    /* bytes handed to write(2) */
    uint64_t wb_started; /* writeback started up to here */
    struct wentry *ents;
    size_t n, cap;
    size_t *hash; /* open addressing: entry index + 1, 0 = empty */
    size_t hcap;
    int state;
    struct ckpt_err fail;
    /* direct path */
    bool direct;
    uint8_t *dbuf[2]; /* buf == dbuf[fill] */
    int fill;
    aio_context_t aio;
    bool inflight; /* dbuf[!fill] is being written */
    struct iocb cb;
    uint64_t sized;    /* the file's size is at least this (see direct_submit) */
    const char *dcall; /* the call a direct-path failure came from */
    /* the tensor being streamed */
    size_t cur;
    uint64_t cur_expected, cur_written;
    uint32_t cur_crc;
};

static uint64_t name_hash(const char *s, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        h ^= (uint8_t)s[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

static int fail(struct ckpt_writer *w, struct ckpt_err *err, int code, const char *call,
                const char *path, const char *entry, const char *fmt, ...)
    __attribute__((format(printf, 7, 8)));
static int fail(struct ckpt_writer *w, struct ckpt_err *err, int code, const char *call,
                const char *path, const char *entry, const char *fmt, ...)
{
    char what[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    ckpt_err_set(&w->fail, code, call, path, entry, entry ? strlen(entry) : 0, "%s", what);
    w->state = W_FAILED;
    if (err)
        *err = w->fail;
    return code;
}

/* A failure writing the data file: named by the call it came from (write,
 * or on the direct path io_submit, io_getevents, ftruncate). */
static int fail_data(struct ckpt_writer *w, struct ckpt_err *err, int rc, const char *entry)
{
    const char *call = w->direct && w->dcall ? w->dcall : "write";
    return fail(w, err, rc, call, w->data_final, entry, "%s (as %s): %s", call, w->data_tmp,
                strerror(-rc));
}

static int failed(struct ckpt_writer *w, struct ckpt_err *err)
{
    if (err)
        *err = w->fail;
    return w->fail.code;
}

/* Starts asynchronous writeback of what write(2) has accepted, in
 * WRITEBACK_EVERY steps.  Advisory: failures are ignored (fsync reports). */
static void start_writeback(struct ckpt_writer *w)
{
    if (w->o.flags & CKPT_W_NO_WRITEBACK)
        return;
    if (w->flushed - w->wb_started < WRITEBACK_EVERY)
        return;
    uint64_t upto = w->flushed - w->flushed % WRITEBACK_EVERY;
    sync_file_range(w->fd, (off_t)w->wb_started, (off_t)(upto - w->wb_started),
                    SYNC_FILE_RANGE_WRITE);
    w->wb_started = upto;
}

static int write_out(struct ckpt_writer *w, const void *p, size_t n)
{
    int rc = ckpt_write_all(w->fd, p, n);
    if (rc == 0) {
        w->flushed += n;
        start_writeback(w);
    }
    return rc;
}

#define DIRECT_ALIGN 4096u

/* Waits for the write in flight, if any. */
static int direct_wait(struct ckpt_writer *w)
{
    if (!w->inflight)
        return 0;
    struct io_event ev;
    long r;
    while ((r = syscall(SYS_io_getevents, w->aio, 1L, 1L, &ev, NULL)) < 0 && errno == EINTR)
        ;
    w->inflight = false;
    w->dcall = "io_getevents";
    if (r < 0)
        return -errno;
    if (r != 1)
        return -EIO;
    w->dcall = "write";
    if ((long long)ev.res < 0)
        return (int)(long long)ev.res;
    /* a short write (a full disk, typically): the rest synchronously, which
     * either completes or says why not */
    for (uint64_t done = (uint64_t)ev.res; done < w->cb.aio_nbytes;) {
        ssize_t k = pwrite(w->fd, (const uint8_t *)(uintptr_t)w->cb.aio_buf + done,
                           (size_t)(w->cb.aio_nbytes - done), (off_t)(w->cb.aio_offset + done));
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            return -errno;
        if (k == 0)
            return -ENOSPC;
        done += (uint64_t)k;
    }
    return 0;
}

/* Submits dbuf[fill] (n bytes, a multiple of DIRECT_ALIGN) at offset
 * w->flushed and switches to the other buffer.  The file is made longer
 * ahead of the writes (DIRECT_AHEAD at a time, cut back at finish): a
 * direct write past the end of file is done synchronously by some
 * filesystems (ext4), one inside it asynchronously.  The tail, waited for
 * at once, needs no room ahead. */
#define DIRECT_AHEAD (64u << 20)
static int direct_submit(struct ckpt_writer *w, size_t n, bool tail)
{
    int rc = direct_wait(w);
    if (rc)
        return rc;
    if (!tail && w->flushed + n > w->sized) {
        uint64_t to = w->flushed + n + DIRECT_AHEAD;
        /* allocated space where the filesystem can; a sparse length where
         * it cannot (a full disk then shows in the write itself) */
        w->dcall = "ftruncate";
        if (fallocate(w->fd, 0, (off_t)w->sized, (off_t)(to - w->sized)) < 0 &&
            ftruncate(w->fd, (off_t)to) < 0)
            return -errno;
        w->sized = to;
    }
    memset(&w->cb, 0, sizeof w->cb);
    w->cb.aio_lio_opcode = IOCB_CMD_PWRITE;
    w->cb.aio_fildes = (uint32_t)w->fd;
    w->cb.aio_buf = (uint64_t)(uintptr_t)w->dbuf[w->fill];
    w->cb.aio_nbytes = n;
    w->cb.aio_offset = (int64_t)w->flushed;
    struct iocb *list[1] = {&w->cb};
    long r;
    while ((r = syscall(SYS_io_submit, w->aio, 1L, list)) < 0 && errno == EINTR)
        ;
    w->dcall = "io_submit";
    if (r != 1)
        return r < 0 ? -errno : -EIO;
    w->inflight = true;
    w->flushed += n;
    w->fill = !w->fill;
    w->buf = w->dbuf[w->fill];
    w->buflen = 0;
    return 0;
}

/* Direct path, at finish: the last partial buffer, padded, then the file
 * cut back to its logical size. */
static int direct_flush_tail(struct ckpt_writer *w)
{
    uint64_t logical = w->flushed + w->buflen;
    int rc = 0;
    if (w->buflen) {
        size_t n = (w->buflen + DIRECT_ALIGN - 1) & ~(size_t)(DIRECT_ALIGN - 1);
        memset(w->buf + w->buflen, 0, n - w->buflen);
        rc = direct_submit(w, n, true);
    }
    if (!rc)
        rc = direct_wait(w);
    /* the file ends at the padded tail or the room made ahead */
    uint64_t end = w->sized > w->flushed ? w->sized : w->flushed;
    if (!rc && end != logical && ftruncate(w->fd, (off_t)logical) < 0) {
        rc = -errno;
        w->dcall = "ftruncate";
    }
    w->flushed = logical;
    return rc;
}

/* Buffered path only (the direct path submits full buffers, and its tail
 * at finish). */
static int flush_buf(struct ckpt_writer *w)
{
    if (!w->buflen)
        return 0;
    int rc = write_out(w, w->buf, w->buflen);
    w->buflen = 0;
    return rc;
}

/* Direct path of wr(): everything through the buffers. */
static int wr_direct(struct ckpt_writer *w, const uint8_t *p, size_t n, uint32_t *crc)
{
    while (n) {
        size_t k = w->bufcap - w->buflen < n ? w->bufcap - w->buflen : n;
        memcpy(w->buf + w->buflen, p, k);
        if (crc)
            *crc = ckpt_crc32c_extend(*crc, w->buf + w->buflen, k);
        w->buflen += k;
        p += k;
        n -= k;
        if (w->buflen == w->bufcap) {
            int rc = direct_submit(w, w->bufcap, false);
            if (rc)
                return rc;
        }
    }
    return 0;
}

/* Appends to the data file; extends *crc (if not NULL) over the bytes. */
static int wr(struct ckpt_writer *w, const void *p, size_t n, uint32_t *crc, const char *entry,
              struct ckpt_err *err)
{
    int rc = 0;
    if (n == 0)
        return 0;
    if (w->direct) {
        rc = wr_direct(w, p, n, crc);
    } else if (w->buflen + n <= w->bufcap) {
        memcpy(w->buf + w->buflen, p, n);
        if (crc)
            *crc = ckpt_crc32c_extend(*crc, w->buf + w->buflen, n);
        w->buflen += n;
    } else if (n < w->bufcap) {
        if ((rc = flush_buf(w)) == 0) {
            memcpy(w->buf, p, n);
            if (crc)
                *crc = ckpt_crc32c_extend(*crc, w->buf, n);
            w->buflen = n;
        }
    } else {
        /* large piece: straight from the caller's memory, in buffer-sized
         * steps so the crc runs on data still in cache */
        const uint8_t *q = p;
        if ((rc = flush_buf(w)) == 0) {
            for (size_t done = 0; done < n && !rc;) {
                size_t k = n - done < w->bufcap ? n - done : w->bufcap;
                if (crc)
                    *crc = ckpt_crc32c_extend(*crc, q + done, k);
                rc = write_out(w, q + done, k);
                done += k;
            }
        }
    }
    if (rc < 0)
        return fail_data(w, err, rc, entry);
    w->size += n;
    return 0;
}

static int pad(struct ckpt_writer *w, const char *entry, struct ckpt_err *err)
{
    static const uint8_t zeros[64];
    unsigned a = w->o.data_alignment;
    if (a <= 1)
        return 0;
    uint64_t over = w->size % a;
    if (!over)
        return 0;
    uint64_t need = a - over;
    while (need) {
        size_t k = need > sizeof zeros ? sizeof zeros : (size_t)need;
        int rc = wr(w, zeros, k, NULL, entry, err);
        if (rc)
            return rc;
        need -= k;
    }
    return 0;
}

int ckpt_writer_open(struct ckpt_writer **wp, const char *prefix,
                     const struct ckpt_writer_opts *opts, struct ckpt_err *err)
{
    struct ckpt_writer *w = NULL;
    char *dir = NULL;
    int rc = 0;

    *wp = NULL;
    if (!prefix || !*prefix)
        return ckpt_err_set(err, -EINVAL, NULL, NULL, NULL, 0, "bundle writer: empty prefix");
    w = calloc(1, sizeof *w);
    if (!w)
        return ckpt_err_set(err, -ENOMEM, NULL, prefix, NULL, 0, "out of memory");
    w->fd = -1;
    if (opts) {
        w->o = *opts;
    } else {
        w->o.flags = CKPT_W_MKDIR;
    }
    w->bufcap = w->o.buffer_size ? w->o.buffer_size : DEFAULT_BUFFER;
    if (w->bufcap < 4096)
        w->bufcap = 4096;
    if (w->o.flags & CKPT_W_DIRECT)
        w->bufcap = (w->bufcap + DIRECT_ALIGN - 1) & ~(size_t)(DIRECT_ALIGN - 1);
    w->prefix = strdup(prefix);
    w->data_final = ckpt_data_name(prefix, 0, 1);
    w->index_final = ckpt_index_name(prefix);
    if (!w->prefix || !w->data_final || !w->index_final ||
        asprintf(&w->data_tmp, "%s.tempstate%" PRIu64, w->data_final, ckpt_random64()) < 0 ||
        asprintf(&w->index_tmp, "%s.tempstate%" PRIu64, w->index_final, ckpt_random64()) < 0) {
        rc = ckpt_err_set(err, -ENOMEM, NULL, prefix, NULL, 0, "out of memory");
        goto cleanup;
    }
    w->buf = aligned_alloc(4096, (w->bufcap + 4095) & ~(size_t)4095);
    if (!w->buf) {
        rc =
            ckpt_err_set(err, -ENOMEM, NULL, prefix, NULL, 0, "out of memory for the write buffer");
        goto cleanup;
    }
    dir = ckpt_dirname(prefix);
    if (!dir) {
        rc = ckpt_err_set(err, -ENOMEM, NULL, prefix, NULL, 0, "out of memory");
        goto cleanup;
    }
    if (w->o.flags & CKPT_W_MKDIR_P) {
        char bad[CKPT_ERR_PATH_MAX];
        if ((rc = ckpt_mkdir_p(dir, bad, sizeof bad)) < 0) {
            ckpt_err_set(err, rc, "mkdir", bad, NULL, 0, "mkdir: %s", strerror(-rc));
            goto cleanup;
        }
    } else if (w->o.flags & CKPT_W_MKDIR) {
        if (mkdir(dir, 0777) < 0 && errno != EEXIST) {
            rc = -errno;
            ckpt_err_set(err, rc, "mkdir", dir, NULL, 0, "mkdir: %s", strerror(-rc));
            goto cleanup;
        }
    }
    struct statfs sfs;
    if ((w->o.flags & CKPT_W_DIRECT) && statfs(dir, &sfs) == 0 &&
        (sfs.f_type == TMPFS_MAGIC || sfs.f_type == RAMFS_MAGIC)) {
        /* memory, not a disk: O_DIRECT would only add work */
    } else if (w->o.flags & CKPT_W_DIRECT) {
        /* O_DIRECT where the filesystem takes it (EINVAL: it does not) and
         * an AIO context; otherwise the buffered path */
        w->fd = open(w->data_tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_DIRECT, 0666);
        if (w->fd < 0 && errno != EINVAL) {
            rc = -errno;
            ckpt_err_set(err, rc, "open", w->data_final, NULL, 0, "create (as %s): %s", w->data_tmp,
                         strerror(-rc));
            goto cleanup;
        }
        if (w->fd >= 0 && syscall(SYS_io_setup, 1U, &w->aio) == 0 &&
            (w->dbuf[1] = aligned_alloc(DIRECT_ALIGN, w->bufcap)) != NULL) {
            w->dbuf[0] = w->buf;
            w->direct = true;
        } else if (w->fd >= 0) {
            /* no AIO here: the same file, buffered */
            if (w->aio) {
                syscall(SYS_io_destroy, w->aio);
                w->aio = 0;
            }
            fcntl(w->fd, F_SETFL, fcntl(w->fd, F_GETFL) & ~O_DIRECT);
        }
    }
    if (w->fd < 0)
        w->fd = open(w->data_tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (w->fd < 0) {
        rc = -errno;
        ckpt_err_set(err, rc, "open", w->data_final, NULL, 0, "create (as %s): %s", w->data_tmp,
                     strerror(-rc));
        goto cleanup;
    }
    w->state = W_OPEN;
    *wp = w;
    w = NULL;
cleanup:
    free(dir);
    if (w)
        ckpt_writer_abort(w);
    return rc;
}

/* Registers a new entry; checks the name, dtype and shape. */
static int new_entry(struct ckpt_writer *w, const char *name, int dtype, int rank,
                     const int64_t *dims, int64_t *nelem, struct ckpt_err *err)
{
    if (w->state == W_FAILED)
        return failed(w, err);
    if (w->state != W_OPEN)
        return fail(w, err, -EINVAL, NULL, w->prefix, name,
                    "added while tensor '%s' is still being streamed", w->ents[w->cur].name);
    if (!name || !*name)
        return fail(w, err, -EINVAL, NULL, w->prefix, NULL,
                    "empty tensor name (the key \"\" is the bundle header)");
    if (!ckpt_dtype_name(dtype))
        return fail(w, err, -EINVAL, NULL, w->prefix, name, "unknown dtype %d", dtype);
    if (rank < 0 || rank > CKPT_MAX_RANK || (rank > 0 && !dims))
        return fail(w, err, -EINVAL, NULL, w->prefix, name, "bad rank %d", rank);
    *nelem = ckpt_shape_elements(rank, dims);
    if (*nelem < 0)
        return fail(w, err, -EINVAL, NULL, w->prefix, name,
                    "bad shape (negative dimension or too many elements)");

    size_t nlen = strlen(name);
    if (w->n * 2 >= w->hcap) {
        size_t hcap = w->hcap ? w->hcap * 2 : 64;
        size_t *h = calloc(hcap, sizeof *h);
        if (!h)
            return fail(w, err, -ENOMEM, NULL, w->prefix, name, "out of memory");
        for (size_t i = 0; i < w->n; i++) {
            size_t j = name_hash(w->ents[i].name, w->ents[i].nlen) & (hcap - 1);
            while (h[j])
                j = (j + 1) & (hcap - 1);
            h[j] = i + 1;
        }
        free(w->hash);
        w->hash = h;
        w->hcap = hcap;
    }
    size_t j = name_hash(name, nlen) & (w->hcap - 1);
    while (w->hash[j]) {
        struct wentry *o = &w->ents[w->hash[j] - 1];
        if (o->nlen == nlen && !memcmp(o->name, name, nlen))
            return fail(w, err, -EEXIST, NULL, w->prefix, name, "adding duplicate key");
        j = (j + 1) & (w->hcap - 1);
    }
    if (w->n == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 64;
        struct wentry *e = realloc(w->ents, cap * sizeof *e);
        if (!e)
            return fail(w, err, -ENOMEM, NULL, w->prefix, name, "out of memory");
        w->ents = e;
        w->cap = cap;
    }
    struct wentry *e = &w->ents[w->n];
    memset(e, 0, sizeof *e);
    e->name = strdup(name);
    e->dims = malloc((rank ? (size_t)rank : 1) * sizeof *e->dims);
    if (!e->name || !e->dims) {
        free(e->name);
        free(e->dims);
        return fail(w, err, -ENOMEM, NULL, w->prefix, name, "out of memory");
    }
    if (rank)
        memcpy(e->dims, dims, (size_t)rank * sizeof *dims);
    e->nlen = nlen;
    e->dtype = dtype;
    e->rank = rank;
    e->offset = (int64_t)w->size;
    w->hash[j] = w->n + 1;
    w->cur = w->n;
    w->n++;
    return 0;
}

int ckpt_writer_begin(struct ckpt_writer *w, const char *name, int dtype, int rank,
                      const int64_t *dims, struct ckpt_err *err)
{
    int64_t nelem;
    int rc;
    if (w->state == W_OPEN && dtype == CKPT_DT_STRING)
        return fail(w, err, -EINVAL, NULL, w->prefix, name,
                    "string tensors are added whole (ckpt_writer_add_strings)");
    if ((rc = new_entry(w, name, dtype, rank, dims, &nelem, err)))
        return rc;
    size_t es = ckpt_dtype_size(dtype);
    if ((uint64_t)nelem > UINT64_MAX / es)
        return fail(w, err, -EINVAL, NULL, w->prefix, name, "tensor too large");
    w->cur_expected = (uint64_t)nelem * es;
    w->cur_written = 0;
    w->cur_crc = 0;
    w->state = W_IN_TENSOR;
    return 0;
}

/* 0 when len more bytes of the current tensor may be appended. */
static int append_check(struct ckpt_writer *w, size_t len, struct ckpt_err *err)
{
    if (w->state == W_FAILED)
        return failed(w, err);
    if (w->state != W_IN_TENSOR)
        return fail(w, err, -EINVAL, NULL, w->prefix, NULL, "append without begin");
    if (len > w->cur_expected - w->cur_written)
        return fail(w, err, -EINVAL, NULL, w->prefix, w->ents[w->cur].name,
                    "appending %zu bytes after %llu of %llu: more than the shape holds", len,
                    (unsigned long long)w->cur_written, (unsigned long long)w->cur_expected);
    return 0;
}

int ckpt_writer_append(struct ckpt_writer *w, const void *data, size_t len, struct ckpt_err *err)
{
    int rc = append_check(w, len, err);
    if (rc)
        return rc;
    struct wentry *e = &w->ents[w->cur];
    rc = wr(w, data, len, &w->cur_crc, e->name, err);
    if (rc)
        return rc;
    w->cur_written += len;
    return 0;
}

int ckpt_writer_append_fill(struct ckpt_writer *w, size_t len, ckpt_fill_fn fill, void *ctx,
                            struct ckpt_err *err)
{
    int rc0 = append_check(w, len, err);
    if (rc0)
        return rc0;
    struct wentry *e = &w->ents[w->cur];
    while (len) {
        int rc;
        if (w->buflen == w->bufcap) {
            rc = w->direct ? direct_submit(w, w->bufcap, false) : flush_buf(w);
            if (rc)
                return fail_data(w, err, rc, e->name);
        }
        size_t k = w->bufcap - w->buflen < len ? w->bufcap - w->buflen : len;
        uint32_t crc = 0;
        rc = fill(ctx, w->buf + w->buflen, k, &crc);
        if (rc) {
            /* the caller's failure: the writer is unusable, err untouched */
            ckpt_err_set(&w->fail, rc, NULL, w->prefix, e->name, strlen(e->name),
                         "input failed while streaming the tensor");
            w->state = W_FAILED;
            return rc;
        }
        w->cur_crc = ckpt_crc32c_combine(w->cur_crc, crc, k);
        w->buflen += k;
        w->size += k;
        w->cur_written += k;
        len -= k;
    }
    return 0;
}

int ckpt_writer_end(struct ckpt_writer *w, struct ckpt_err *err)
{
    if (w->state == W_FAILED)
        return failed(w, err);
    if (w->state != W_IN_TENSOR)
        return fail(w, err, -EINVAL, NULL, w->prefix, NULL, "end without begin");
    struct wentry *e = &w->ents[w->cur];
    if (w->cur_written != w->cur_expected)
        return fail(w, err, -EINVAL, NULL, w->prefix, e->name,
                    "ended after %llu bytes; its shape and dtype need %llu",
                    (unsigned long long)w->cur_written, (unsigned long long)w->cur_expected);
    e->size = (int64_t)w->cur_written;
    e->crc = ckpt_crc_mask(w->cur_crc);
    w->state = W_OPEN;
    return pad(w, e->name, err);
}

int ckpt_writer_add(struct ckpt_writer *w, const char *name, int dtype, int rank,
                    const int64_t *dims, const void *data, size_t len, struct ckpt_err *err)
{
    int rc = ckpt_writer_begin(w, name, dtype, rank, dims, err);
    if (rc)
        return rc;
    if (len != w->cur_expected)
        return fail(w, err, -EINVAL, NULL, w->prefix, name,
                    "%zu bytes given; its shape and dtype need %llu", len,
                    (unsigned long long)w->cur_expected);
    if ((rc = ckpt_writer_append(w, data, len, err)))
        return rc;
    return ckpt_writer_end(w, err);
}

int ckpt_writer_add_strings(struct ckpt_writer *w, const char *name, int rank, const int64_t *dims,
                            const char *const *strs, const size_t *lens, struct ckpt_err *err)
{
    int64_t nelem;
    int rc;
    if ((rc = new_entry(w, name, CKPT_DT_STRING, rank, dims, &nelem, err)))
        return rc;
    struct wentry *e = &w->ents[w->cur];
    struct ckpt_buf lb = {0};
    uint32_t crc = 0;
    uint64_t total = 0;
    if (nelem && !strs) {
        return fail(w, err, -EINVAL, NULL, w->prefix, name, "no strings given");
    }
    for (int64_t i = 0; i < nelem; i++) {
        uint64_t l = lens ? lens[i] : strlen(strs[i]);
        ckpt_buf_varint(&lb, l);
        if (l <= UINT32_MAX) {
            uint8_t b[4];
            ckpt_put32le(b, (uint32_t)l);
            crc = ckpt_crc32c_extend(crc, b, 4);
        } else {
            uint8_t b[8];
            ckpt_put32le(b, (uint32_t)l);
            ckpt_put32le(b + 4, (uint32_t)(l >> 32));
            crc = ckpt_crc32c_extend(crc, b, 8);
        }
        total += l;
    }
    if (lb.oom) {
        ckpt_buf_free(&lb);
        return fail(w, err, -ENOMEM, NULL, w->prefix, name, "out of memory");
    }
    uint64_t start = w->size;
    rc = wr(w, lb.p, lb.len, NULL, name, err);
    ckpt_buf_free(&lb);
    if (rc)
        return rc;
    uint8_t lc[4];
    ckpt_put32le(lc, ckpt_crc_mask(crc));
    if ((rc = wr(w, lc, 4, &crc, name, err)))
        return rc;
    for (int64_t i = 0; i < nelem; i++) {
        size_t l = lens ? lens[i] : strlen(strs[i]);
        if ((rc = wr(w, strs[i], l, &crc, name, err)))
            return rc;
    }
    (void)total;
    e->size = (int64_t)(w->size - start);
    e->crc = ckpt_crc_mask(crc);
    return pad(w, name, err);
}

bool ckpt_writer_is_direct(const struct ckpt_writer *w)
{
    return w->direct;
}

uint64_t ckpt_writer_data_size(const struct ckpt_writer *w)
{
    return w->size;
}

static void free_writer(struct ckpt_writer *w)
{
    if (w->direct) {
        direct_wait(w); /* the kernel must be done with our buffers */
        syscall(SYS_io_destroy, w->aio);
        if (w->buf == w->dbuf[1])
            w->buf = w->dbuf[0];
        free(w->dbuf[1]);
        w->direct = false;
    }
    if (w->fd >= 0)
        close(w->fd);
    for (size_t i = 0; i < w->n; i++) {
        free(w->ents[i].name);
        free(w->ents[i].dims);
    }
    free(w->ents);
    free(w->hash);
    free(w->buf);
    free(w->prefix);
    free(w->data_final);
    free(w->data_tmp);
    free(w->index_final);
    free(w->index_tmp);
    free(w);
}

void ckpt_writer_abort(struct ckpt_writer *w)
{
    if (!w)
        return;
    if (w->fd >= 0) {
        close(w->fd);
        w->fd = -1;
    }
    if (w->data_tmp)
        unlink(w->data_tmp);
    if (w->index_tmp)
        unlink(w->index_tmp);
    free_writer(w);
}

/* Builds the index table bytes: header, then the entries sorted by name. */
static int build_index(struct ckpt_writer *w, struct ckpt_buf *out)
{
    struct ckpt_tbl_builder *t = ckpt_tbl_new(w->o.block_size, (w->o.flags & CKPT_W_SNAPPY) != 0);
    size_t *order = malloc((w->n ? w->n : 1) * sizeof *order);
    struct ckpt_buf v = {0};
    int rc = 0;
    if (!t || !order) {
        rc = -ENOMEM;
        goto cleanup;
    }
    struct ckpt_header h = {.num_shards = 1, .endianness = 0, .producer = 1, .min_consumer = 0};
    ckpt_pb_encode_header(&v, &h);
    if (v.oom || (rc = ckpt_tbl_add(t, "", 0, v.p, v.len))) {
        rc = rc ? rc : -ENOMEM;
        goto cleanup;
    }
    for (size_t i = 0; i < w->n; i++)
        order[i] = i;
    {
        /* bottom-up merge sort of the indices by name (qsort has no context
         * argument, and a global would race between writers in threads) */
        size_t *tmp = malloc((w->n ? w->n : 1) * sizeof *tmp);
        if (!tmp) {
            rc = -ENOMEM;
            goto cleanup;
        }
        for (size_t width = 1; width < w->n; width *= 2) {
            for (size_t lo = 0; lo < w->n; lo += 2 * width) {
                size_t mid = lo + width < w->n ? lo + width : w->n;
                size_t hi = lo + 2 * width < w->n ? lo + 2 * width : w->n;
                size_t a = lo, b = mid, k = lo;
                while (a < mid && b < hi) {
                    const struct wentry *x = &w->ents[order[a]], *y = &w->ents[order[b]];
                    size_t min = x->nlen < y->nlen ? x->nlen : y->nlen;
                    int c = memcmp(x->name, y->name, min);
                    if (!c)
                        c = x->nlen < y->nlen ? -1 : x->nlen > y->nlen;
                    tmp[k++] = c <= 0 ? order[a++] : order[b++];
                }
                while (a < mid)
                    tmp[k++] = order[a++];
                while (b < hi)
                    tmp[k++] = order[b++];
            }
            memcpy(order, tmp, w->n * sizeof *order);
        }
        free(tmp);
    }
    for (size_t i = 0; i < w->n; i++) {
        const struct wentry *we = &w->ents[order[i]];
        struct ckpt_entry e = {
            .name = we->name,
            .name_len = we->nlen,
            .dtype = we->dtype,
            .rank = we->rank,
            .dims = we->dims,
            .shard_id = 0,
            .offset = we->offset,
            .size = we->size,
            .crc32c = we->crc,
        };
        v.len = 0;
        ckpt_pb_encode_entry(&v, &e);
        if (v.oom) {
            rc = -ENOMEM;
            goto cleanup;
        }
        if ((rc = ckpt_tbl_add(t, we->name, we->nlen, v.p, v.len)))
            goto cleanup;
    }
    rc = ckpt_tbl_finish(t, out);
cleanup:
    ckpt_buf_free(&v);
    free(order);
    ckpt_tbl_free(t);
    return rc;
}

int ckpt_writer_finish(struct ckpt_writer *w, unsigned flags, struct ckpt_err *err)
{
    struct ckpt_buf idx = {0};
    char *dir = NULL;
    int ifd = -1, rc = 0;
    bool sync = flags & CKPT_SYNC;
    bool data_renamed = false;

    if (w->state == W_FAILED) {
        rc = failed(w, err);
        goto cleanup;
    }
    if (w->state == W_IN_TENSOR) {
        rc = fail(w, err, -EINVAL, NULL, w->prefix, w->ents[w->cur].name,
                  "finish while the tensor is still being streamed");
        goto cleanup;
    }
    if ((rc = w->direct ? direct_flush_tail(w) : flush_buf(w)) < 0) {
        fail_data(w, err, rc, NULL);
        goto cleanup;
    }
    if (sync && fsync(w->fd) < 0) {
        rc = -errno;
        fail(w, err, rc, "fsync", w->data_final, NULL, "fsync (as %s): %s", w->data_tmp,
             strerror(-rc));
        goto cleanup;
    }
    rc = close(w->fd);
    w->fd = -1;
    if (rc < 0) {
        rc = -errno;
        fail(w, err, rc, "close", w->data_final, NULL, "close (as %s): %s", w->data_tmp,
             strerror(-rc));
        goto cleanup;
    }
    if ((rc = build_index(w, &idx)) < 0) {
        fail(w, err, rc, NULL, w->index_final, NULL, "building the index: %s", strerror(-rc));
        goto cleanup;
    }
    ifd = open(w->index_tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (ifd < 0) {
        rc = -errno;
        fail(w, err, rc, "open", w->index_final, NULL, "create (as %s): %s", w->index_tmp,
             strerror(-rc));
        goto cleanup;
    }
    if ((rc = ckpt_write_all(ifd, idx.p, idx.len)) < 0) {
        fail(w, err, rc, "write", w->index_final, NULL, "write (as %s): %s", w->index_tmp,
             strerror(-rc));
        goto cleanup;
    }
    if (sync && fsync(ifd) < 0) {
        rc = -errno;
        fail(w, err, rc, "fsync", w->index_final, NULL, "fsync (as %s): %s", w->index_tmp,
             strerror(-rc));
        goto cleanup;
    }
    rc = close(ifd);
    ifd = -1;
    if (rc < 0) {
        rc = -errno;
        fail(w, err, rc, "close", w->index_final, NULL, "close (as %s): %s", w->index_tmp,
             strerror(-rc));
        goto cleanup;
    }
    if (rename(w->data_tmp, w->data_final) < 0) {
        rc = -errno;
        fail(w, err, rc, "rename", w->data_final, NULL, "rename from %s: %s", w->data_tmp,
             strerror(-rc));
        goto cleanup;
    }
    data_renamed = true;
    if (rename(w->index_tmp, w->index_final) < 0) {
        rc = -errno;
        fail(w, err, rc, "rename", w->index_final, NULL, "rename from %s: %s", w->index_tmp,
             strerror(-rc));
        goto cleanup;
    }
    if (sync) {
        dir = ckpt_dirname(w->prefix);
        if (!dir) {
            rc = fail(w, err, -ENOMEM, NULL, w->prefix, NULL, "out of memory");
        } else if ((rc = ckpt_fsync_dir(dir)) < 0) {
            fail(w, err, rc, "fsync", dir, NULL, "fsync directory: %s", strerror(-rc));
        } else if ((w->o.flags & (CKPT_W_MKDIR | CKPT_W_MKDIR_P)) &&
                   (rc = ckpt_fsync_ancestors(dir)) < 0) {
            fail(w, err, rc, "fsync", dir, NULL, "fsync the directories above: %s", strerror(-rc));
        }
        /* both files are in place and complete; only durability is in doubt */
        free(dir);
        dir = NULL;
        ckpt_buf_free(&idx);
        free_writer(w);
        return rc;
    }
cleanup:
    if (ifd >= 0)
        close(ifd);
    ckpt_buf_free(&idx);
    free(dir);
    if (rc < 0) {
        if (data_renamed)
            unlink(w->data_final); /* no index for it: not a bundle */
        ckpt_writer_abort(w);
    } else {
        free_writer(w);
    }
    return rc;
}
