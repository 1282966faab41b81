/*
 * stream.c: one request streamed to several ps tasks at once, for pushes too
 * big to build before sending.  A worker pushing 10 million pairs would
 * otherwise split them all (tens of ms), checksum them all, and only then
 * send the first byte, while every ps sits idle; streamed, each piece goes
 * out as soon as it is split and checksummed (still in cache), and the ps
 * tasks receive it while the worker splits the next piece.
 *
 * The request is a PSRT_KIND_STREAM frame: its header, then segments (each
 * with its own length, crc, sequence number and header crc: psrt.h), then
 * an empty segment.  The ps receives it into one buffer, as if a single
 * frame had carried the bytes, so handlers need not know.
 *
 * Use: psrt_stream_begin, psrt_stream_put (at most max_puts times per
 * connection; the bytes must stay valid until _end), psrt_stream_end.
 * _put checksums the segment on the caller's thread and queues it; a
 * sender thread writes the queues to the sockets (poll, idle timeout), so
 * the caller goes on producing the next piece while the kernel copies this
 * one.  Each connection's queue is a fixed array written only by the
 * caller and read only by the sender: the caller publishes its length with
 * a release store, the sender reads it with an acquire load, so neither
 * ever waits on a lock to move bytes.  Errors name the peer and the call,
 * as psrt_conn_call's; a connection that failed is closed and its later
 * puts are dropped.
 */
#include "runtime/psrt/psrt.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

/* one queued piece: caller's bytes, or a header held inline */
struct sitem {
    const uint8_t *p; /* NULL: inline */
    size_t len;
    uint8_t inl[PSRT_FRAME_HDR];
};

struct sconn {
    struct psrt_conn *c;
    struct sitem *q; /* cap items, never moved */
    size_t cap;
    _Atomic size_t qn;     /* published items (caller: store-release) */
    size_t head, head_off; /* sender: q[head] sent up to head_off */
    uint32_t seq;
    _Atomic int rc;
    struct psrt_err *err;
    double moved; /* sender: when a byte last went out */
};

struct psrt_stream {
    int n, op;
    double idle;
    pthread_t th;
    bool started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool ended;  /* under mu */
    bool queued; /* under mu: something was published since the sender looked */
    struct sconn k[];
};

/* The first failure of k wins (the caller and the sender may both fail
 * it); err is read only after the sender has been joined. */
static void fail(struct psrt_stream *s, struct sconn *k, int r)
{
    int none = 0;
    r = r == -EPIPE ? -ECONNRESET : r;
    if (atomic_compare_exchange_strong(&k->rc, &none, r))
        psrt_err_set(k->err, r, "%s: sending %s: %s", psrt_conn_peer(k->c), psrt_op_name(s->op),
                     strerror(-r));
}

/* Caller side: appends an item, unpublished. */
static int add_item(struct sconn *k, size_t *qn, const void *p, size_t len, const uint8_t *inl,
                    size_t ilen)
{
    if (*qn == k->cap)
        return -ENOBUFS;
    struct sitem *it = &k->q[(*qn)++];
    it->p = p;
    it->len = p ? len : ilen;
    if (!p)
        memcpy(it->inl, inl, ilen);
    return 0;
}

static void publish(struct psrt_stream *s, struct sconn *k, size_t qn)
{
    atomic_store_explicit(&k->qn, qn, memory_order_release);
    pthread_mutex_lock(&s->mu);
    s->queued = true;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

/* Sender side: writes what the socket takes of the published items.
 * 0, or -errno (not -EAGAIN). */
static int drain(struct sconn *k)
{
    int fd = psrt_conn_fd(k->c);
    size_t qn = atomic_load_explicit(&k->qn, memory_order_acquire);
    while (k->head < qn) {
        struct iovec v[64];
        int nv = 0;
        for (size_t i = k->head; i < qn && nv < 64; i++) {
            const struct sitem *it = &k->q[i];
            const uint8_t *b = it->p ? it->p : it->inl;
            size_t off = i == k->head ? k->head_off : 0;
            v[nv++] = (struct iovec){(void *)(b + off), it->len - off};
        }
        ssize_t w = writev(fd, v, nv);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return errno == EAGAIN ? 0 : -errno;
        }
        if (w > 0)
            k->moved = psrt_now();
        size_t adv = (size_t)w;
        while (k->head < qn && adv >= k->q[k->head].len - k->head_off) {
            adv -= k->q[k->head].len - k->head_off;
            k->head++;
            k->head_off = 0;
        }
        k->head_off += adv;
    }
    return 0;
}

static void *sender(void *arg)
{
    struct psrt_stream *s = arg;
    for (int i = 0; i < s->n; i++)
        s->k[i].moved = psrt_now();
    for (;;) {
        pthread_mutex_lock(&s->mu);
        bool ended = s->ended;
        s->queued = false;
        pthread_mutex_unlock(&s->mu);
        struct pollfd pfd[256];
        int np = 0;
        for (int i = 0; i < s->n; i++) {
            struct sconn *k = &s->k[i];
            if (atomic_load(&k->rc))
                continue;
            int e = drain(k);
            if (e) {
                fail(s, k, e);
                continue;
            }
            if (k->head < atomic_load_explicit(&k->qn, memory_order_acquire) && np < 256) {
                if (psrt_now() - k->moved > s->idle) {
                    fail(s, k, -ETIMEDOUT);
                    continue;
                }
                pfd[np] = (struct pollfd){.fd = psrt_conn_fd(k->c), .events = POLLOUT};
                np++;
            }
        }
        if (np > 0) { /* some socket is full: wait until one takes more */
            poll(pfd, (nfds_t)np, 100);
            continue;
        }
        if (ended) /* everything published after the end is out */
            return NULL;
        pthread_mutex_lock(&s->mu);
        while (!s->queued && !s->ended)
            pthread_cond_wait(&s->cv, &s->mu);
        pthread_mutex_unlock(&s->mu);
        /* the idle clock runs only while a peer leaves bytes unsent, not
         * while the caller is still producing them */
        for (int i = 0; i < s->n; i++)
            s->k[i].moved = psrt_now();
    }
}

int psrt_stream_begin(struct psrt_stream **sp, struct psrt_conn **c, int n, int op, uint32_t flags,
                      const uint64_t *size_hint, size_t max_puts, double idle, struct psrt_err *err)
{
    if (n > 256)
        return -EINVAL;
    struct psrt_stream *s = calloc(1, sizeof *s + (size_t)n * sizeof s->k[0]);
    if (!s)
        return -ENOMEM;
    s->n = n;
    s->op = op;
    s->idle = idle;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    *sp = s;
    for (int i = 0; i < n; i++) {
        struct sconn *k = &s->k[i];
        k->c = c[i];
        k->err = &err[i];
        /* the frame header, max_puts segments (a header and PSRT_STREAM_IOV
         * pieces each), the end */
        k->cap = 2 + max_puts * (1 + PSRT_STREAM_IOV);
        k->q = malloc(k->cap * sizeof *k->q);
        if (!k->q) {
            fail(s, k, -ENOMEM);
            continue;
        }
        if (psrt_conn_fd(k->c) < 0) {
            psrt_err_set(&err[i], -ENOTCONN, "%s: not connected", psrt_conn_peer(k->c));
            atomic_store(&k->rc, -ENOTCONN);
            continue;
        }
        if (psrt_fault("psrt/rpc/send")) {
            fail(s, k, -ECONNRESET);
            continue;
        }
        struct psrt_frame_hdr h = {.kind = PSRT_KIND_STREAM,
                                   .op = (uint16_t)op,
                                   .flags = flags,
                                   .id = psrt_conn_take_id(k->c),
                                   .len = size_hint ? size_hint[i] : 0};
        uint8_t hdr[PSRT_FRAME_HDR];
        psrt_frame_encode(hdr, &h);
        size_t qn = 0;
        add_item(k, &qn, NULL, 0, hdr, sizeof hdr);
        atomic_store_explicit(&k->qn, qn, memory_order_release);
    }
    if (pthread_create(&s->th, NULL, sender, s)) {
        for (int i = 0; i < n; i++)
            fail(s, &s->k[i], -EAGAIN);
        return -EAGAIN;
    }
    s->started = true;
    return 0;
}

int psrt_stream_put(struct psrt_stream *s, int i, const struct iovec *iov, int niov)
{
    struct sconn *k = &s->k[i];
    int rc = atomic_load(&k->rc);
    if (rc)
        return rc;
    size_t len = 0;
    uint32_t crc = 0;
    for (int j = 0; j < niov; j++) {
        len += iov[j].iov_len;
        crc = psrt_crc32c(crc, iov[j].iov_base, iov[j].iov_len);
    }
    if (len == 0)
        return 0; /* an empty segment would end the request */
    if (len > UINT32_MAX || niov > PSRT_STREAM_IOV) {
        fail(s, k, -EMSGSIZE);
        return -EMSGSIZE;
    }
    uint8_t sh[PSRT_SEG_HDR];
    psrt_seg_encode(sh, (uint32_t)len, crc, k->seq++);
    size_t qn = atomic_load_explicit(&k->qn, memory_order_relaxed);
    int r = add_item(k, &qn, NULL, 0, sh, sizeof sh);
    for (int j = 0; j < niov && !r; j++)
        if (iov[j].iov_len)
            r = add_item(k, &qn, iov[j].iov_base, iov[j].iov_len, NULL, 0);
    if (r) {
        fail(s, k, r);
        return r;
    }
    publish(s, k, qn);
    return 0;
}

int psrt_stream_end(struct psrt_stream *s, struct psrt_buf **resp, int32_t *status)
{
    for (int i = 0; i < s->n; i++) {
        struct sconn *k = &s->k[i];
        if (atomic_load(&k->rc))
            continue;
        uint8_t sh[PSRT_SEG_HDR];
        psrt_seg_encode(sh, 0, 0, k->seq++);
        size_t qn = atomic_load_explicit(&k->qn, memory_order_relaxed);
        if (add_item(k, &qn, NULL, 0, sh, sizeof sh))
            fail(s, k, -ENOBUFS);
        else
            atomic_store_explicit(&k->qn, qn, memory_order_release);
    }
    if (s->started) {
        pthread_mutex_lock(&s->mu);
        s->ended = true;
        pthread_cond_signal(&s->cv);
        pthread_mutex_unlock(&s->mu);
        pthread_join(s->th, NULL);
        s->started = false;
    }
    /* then every reply (each ps answers once it has applied the request) */
    int first = 0;
    for (int i = 0; i < s->n; i++) {
        struct sconn *k = &s->k[i];
        int rc = atomic_load(&k->rc);
        if (rc)
            psrt_conn_close(k->c);
        else
            rc = psrt_conn_recv(k->c, s->idle, resp[i], &status[i], k->err);
        atomic_store(&k->rc, rc);
        if (rc && !first)
            first = rc;
    }
    return first;
}

int psrt_stream_rc(const struct psrt_stream *s, int i)
{
    return atomic_load(&((struct psrt_stream *)s)->k[i].rc);
}

void psrt_stream_free(struct psrt_stream *s)
{
    if (!s)
        return;
    if (s->started) { /* never ended: stop the sender first */
        pthread_mutex_lock(&s->mu);
        s->ended = true;
        pthread_cond_signal(&s->cv);
        pthread_mutex_unlock(&s->mu);
        for (int i = 0; i < s->n; i++)
            fail(s, &s->k[i], -ECANCELED);
        pthread_join(s->th, NULL);
        for (int i = 0; i < s->n; i++)
            psrt_conn_close(s->k[i].c);
    }
    for (int i = 0; i < s->n; i++)
        free(s->k[i].q);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s);
}
