/*
 * rpc.c: psrt's TCP RPC: a client connection (one call at a time, connect
 * with retry and backoff, errors naming the peer) and a server (an epoll
 * dispatcher handing each readable connection to a bounded thread pool, or,
 * in per_request mode, to one new detached thread per request as
 * TensorFlow's SchedClosure does).
 *
 * Every timeout on a transfer, client or server, is an idle timeout: it
 * runs out only when that long passes without a byte moving, so a large
 * request or reply that keeps moving is never cut off however long it
 * takes in all, and a peer that stalls mid-frame (or never answers) is
 * given up after it.
 *
 * Client connection states: CLOSED (fd -1) -> OPEN (after connect) ->
 * CLOSED on any transport error (timeout, reset, bad frame), so a call
 * never reads the answer of an earlier call; the caller reconnects.
 * Server connection states: WAITING (armed in epoll, EPOLLONESHOT) ->
 * HANDLING (one thread owns it: read one request, run the handler, write
 * the reply) -> WAITING again, or CLOSED on EOF or error.  Invariant: at
 * most one thread touches a connection at a time (ONESHOT gives that).
 * Out of file descriptors (EMFILE, ENFILE), the server refuses new
 * connections (accepts and closes them, through a spare descriptor) instead
 * of spinning on a listening socket it cannot accept from.
 */
#include "runtime/psrt/psrt.h"
#include "runtime/ckpt/crc.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

const char *psrt_op_name(int op)
{
    static const char *const names[] = {
        [PSRT_OP_PING] = "Ping",          [PSRT_OP_INIT] = "Init",
        [PSRT_OP_PULL] = "Pull",          [PSRT_OP_PUSH] = "Push",
        [PSRT_OP_SAVE_SHARD] = "SaveV2",  [PSRT_OP_MERGE] = "MergeV2Checkpoints",
        [PSRT_OP_RESTORE] = "RestoreV2",  [PSRT_OP_SNAPSHOT] = "Snapshot",
        [PSRT_OP_RSAVE] = "RobustSave",   [PSRT_OP_RCOMMIT] = "RobustCommit",
        [PSRT_OP_RQUERY] = "RobustQuery", [PSRT_OP_LOAD] = "Load",
        [PSRT_OP_SHUTDOWN] = "Shutdown",  [PSRT_OP_ECHO] = "Echo",
        [PSRT_OP_BENCH_SINK] = "Sink",    [PSRT_OP_OPEN] = "Open",
        [PSRT_OP_RABORT] = "RobustAbort",
    };
    if (op <= 0 || op >= PSRT_OP_MAX || !names[op])
        return "?";
    return names[op];
}

/* ---- blocking I/O with a timeout on non-blocking sockets ---------------- */

static int wait_fd(int fd, short ev, double deadline)
{
    for (;;) {
        double left = deadline - psrt_now();
        if (left <= 0)
            return -ETIMEDOUT;
        struct pollfd p = {.fd = fd, .events = ev};
        int ms = left > 1e6 ? 1000000000 : (int)(left * 1000) + 1;
        int r = poll(&p, 1, ms);
        if (r > 0) {
            if (p.revents & (POLLERR | POLLNVAL))
                return -ECONNRESET;
            return 0;
        }
        if (r < 0 && errno != EINTR)
            return -errno;
    }
}

/* After a send or receive on fd failed (errno set): 0 to try again (EINTR,
 * or EAGAIN and fd became ready for ev before deadline), or a negative
 * errno. */
static int io_retry(int fd, short ev, double deadline)
{
    if (errno == EINTR)
        return 0;
    if (errno == EAGAIN)
        return wait_fd(fd, ev, deadline);
    return -errno;
}

/* Writes every byte of iov.  idle is an idle timeout: it fails with
 * -ETIMEDOUT only when idle seconds pass without a byte going out, so a
 * large transfer that keeps moving is never cut off, however long it takes
 * in all, while a stalled peer is given up after idle seconds. */
static int send_iov(int fd, struct iovec *iov, int niov, double idle)
{
    double deadline = psrt_now() + idle;
    while (niov > 0) {
        ssize_t w = writev(fd, iov, niov > IOV_MAX ? IOV_MAX : niov);
        if (w < 0) {
            int r = io_retry(fd, POLLOUT, deadline);
            if (r)
                return r;
            continue;
        }
        if (w > 0)
            deadline = psrt_now() + idle;
        size_t left = (size_t)w;
        while (niov > 0 && left >= iov->iov_len) {
            left -= iov->iov_len;
            iov++;
            niov--;
        }
        if (niov > 0) {
            iov->iov_base = (char *)iov->iov_base + left;
            iov->iov_len -= left;
        }
    }
    return 0;
}

/* Reads exactly n bytes, with send_iov's idle timeout; with crc, extends
 * *crc over them as they arrive (while they are still in cache, instead of
 * in a pass of its own). */
static int recv_full_crc(int fd, void *buf, size_t n, double idle, bool *eof_at_start,
                         uint32_t *crc)
{
    double deadline = psrt_now() + idle;
    size_t got = 0;
    while (got < n) {
        ssize_t r = recv(fd, (char *)buf + got, n - got, 0);
        if (r > 0) {
            if (crc)
                *crc = psrt_crc32c(*crc, (char *)buf + got, (size_t)r);
            got += (size_t)r;
            deadline = psrt_now() + idle;
            continue;
        }
        if (r == 0) {
            if (eof_at_start)
                *eof_at_start = got == 0;
            return -ECONNRESET;
        }
        int e = io_retry(fd, POLLIN, deadline);
        if (e)
            return e;
    }
    return 0;
}

static int recv_full(int fd, void *buf, size_t n, double idle, bool *eof_at_start)
{
    return recv_full_crc(fd, buf, n, idle, eof_at_start, NULL);
}

static int send_frame(int fd, int kind, int op, int32_t status, uint32_t flags, uint64_t id,
                      const struct iovec *iov, int niov, double idle)
{
    if (psrt_fault("psrt/rpc/send"))
        return -ECONNRESET;
    struct psrt_frame_hdr h = {
        .kind = (uint8_t)kind, .op = (uint16_t)op, .status = status, .flags = flags, .id = id};
    uint32_t crc = 0;
    for (int i = 0; i < niov; i++) {
        h.len += iov[i].iov_len;
        crc = psrt_crc32c(crc, iov[i].iov_base, iov[i].iov_len);
    }
    h.pcrc = crc;
    uint8_t hdr[PSRT_FRAME_HDR];
    psrt_frame_encode(hdr, &h);
    struct iovec stackv[72], *v = stackv;
    if (niov + 1 > 72) {
        v = malloc(sizeof *v * (size_t)(niov + 1));
        if (!v)
            return -ENOMEM;
    }
    v[0].iov_base = hdr;
    v[0].iov_len = sizeof hdr;
    int n = 1;
    for (int i = 0; i < niov; i++)
        if (iov[i].iov_len)
            v[n++] = iov[i];
    int r = send_iov(fd, v, n, idle);
    if (v != stackv)
        free(v);
    return r;
}

/* Reads the segments of a streamed request into buf, appended; each
 * segment's crc is checked as it completes.  -EBADMSG, -EPROTO (see
 * psrt_seg_decode), -EMSGSIZE past PSRT_FRAME_MAX in all. */
static int recv_segments(int fd, struct psrt_buf *buf, double idle)
{
    for (uint32_t seq = 0;; seq++) {
        uint8_t sh[PSRT_SEG_HDR];
        uint32_t len, want, crc = 0;
        int r = recv_full(fd, sh, sizeof sh, idle, NULL);
        if (!r)
            r = psrt_seg_decode(sh, &len, &want, seq);
        if (r)
            return r;
        if (len == 0)
            return 0;
        if (len > PSRT_FRAME_MAX - buf->len)
            return -EMSGSIZE;
        if (psrt_buf_reserve(buf, len))
            return -ENOMEM;
        r = recv_full_crc(fd, buf->p + buf->len, len, idle, NULL, &crc);
        if (r)
            return r;
        if (crc != want)
            return -EBADMSG;
        buf->len += len;
    }
}

/* Reads one frame into buf (replacing its contents); a streamed request's
 * segments arrive concatenated, and h->len is then their total. */
static int recv_frame(int fd, struct psrt_frame_hdr *h, struct psrt_buf *buf, double idle,
                      bool *eof_at_start)
{
    uint8_t hdr[PSRT_FRAME_HDR];
    int r = recv_full(fd, hdr, sizeof hdr, idle, eof_at_start);
    if (r)
        return r;
    r = psrt_frame_decode(hdr, h, PSRT_FRAME_MAX);
    if (r)
        return r;
    psrt_buf_reset(buf);
    if (psrt_buf_reserve(buf, h->len ? h->len : 1))
        return -ENOMEM;
    if (h->kind == PSRT_KIND_STREAM) {
        r = recv_segments(fd, buf, idle);
        if (r)
            return r;
        h->len = buf->len;
    } else {
        uint32_t crc = 0;
        r = recv_full_crc(fd, buf->p, h->len, idle, NULL, &crc);
        if (r)
            return r;
        buf->len = h->len;
        if (crc != h->pcrc)
            return -EBADMSG;
    }
    if (psrt_fault("psrt/rpc/recv"))
        return -ECONNRESET;
    return 0;
}

static void tune_socket(int fd)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

/* ---- client -------------------------------------------------------------- */

struct psrt_conn {
    char host[256];
    int port;
    char peer[400];
    char resolve_err[128]; /* the last connect's name lookup failure, or "" */
    int fd;
    uint64_t next_id;
    /* a reply being streamed (psrt_conn_recv_begin ... _end) */
    uint64_t st_left;
    uint32_t st_crc, st_want;
    double st_idle;
    /* A connection lost before it brought a single reply (a peer that
     * accepts and closes at once, e.g. one out of descriptors) makes the
     * next connect wait first, doubling up to 1 s, so that a caller that
     * reconnects and retries on every transport error does not spin. */
    bool answered;        /* this connection brought a reply */
    double quick_backoff; /* wait before the next connect, s (0: none) */
};

struct psrt_conn *psrt_conn_new(const char *host, int port, const char *peer_name)
{
    struct psrt_conn *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    snprintf(c->host, sizeof c->host, "%s", host);
    c->port = port;
    if (peer_name)
        snprintf(c->peer, sizeof c->peer, "%s at %s:%d", peer_name, host, port);
    else
        snprintf(c->peer, sizeof c->peer, "%s:%d", host, port);
    c->fd = -1;
    c->next_id = 1;
    return c;
}

void psrt_conn_close(struct psrt_conn *c)
{
    if (c && c->fd >= 0) {
        close(c->fd);
        c->fd = -1;
        c->quick_backoff = c->answered                  ? 0
                           : c->quick_backoff < 0.02    ? 0.02
                           : c->quick_backoff * 2 > 1.0 ? 1.0
                                                        : c->quick_backoff * 2;
    }
}

void psrt_conn_free(struct psrt_conn *c)
{
    if (!c)
        return;
    psrt_conn_close(c);
    free(c);
}

const char *psrt_conn_peer(const struct psrt_conn *c)
{
    return c->peer;
}
int psrt_conn_fd(const struct psrt_conn *c)
{
    return c->fd;
}
uint64_t psrt_conn_take_id(struct psrt_conn *c)
{
    return c->next_id++;
}
bool psrt_conn_is_open(const struct psrt_conn *c)
{
    return c->fd >= 0;
}

static int connect_once(struct psrt_conn *c, double deadline)
{
    char port[16];
    snprintf(port, sizeof port, "%d", c->port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai = NULL;
    int g = getaddrinfo(c->host, port, &hints, &ai);
    if (g) {
        int e = g == EAI_SYSTEM ? -errno : -EHOSTUNREACH;
        snprintf(c->resolve_err, sizeof c->resolve_err, "cannot resolve host name '%.60s': %s",
                 c->host, g == EAI_SYSTEM ? strerror(-e) : gai_strerror(g));
        return e;
    }
    c->resolve_err[0] = 0;
    int err = -ECONNREFUSED;
    for (struct addrinfo *a = ai; a; a = a->ai_next) {
        int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0) {
            err = -errno;
            continue;
        }
        int r = connect(fd, a->ai_addr, a->ai_addrlen);
        if (r < 0 && errno == EINPROGRESS) {
            r = wait_fd(fd, POLLOUT, deadline);
            if (r != -ETIMEDOUT) {
                int soerr = 0;
                socklen_t sl = sizeof soerr;
                getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
                r = soerr ? -soerr : r;
            }
        } else if (r < 0) {
            r = -errno;
        }
        if (r == 0) {
            tune_socket(fd);
            c->fd = fd;
            c->answered = false;
            freeaddrinfo(ai);
            return 0;
        }
        err = r;
        close(fd);
    }
    freeaddrinfo(ai);
    return err;
}

int psrt_conn_connect(struct psrt_conn *c, double timeout, struct psrt_err *err)
{
    psrt_conn_close(c);
    double start = psrt_now(), deadline = start + timeout;
    double backoff = 0.02, next_say = start + 2;
    int r;
    if (c->quick_backoff > 0) {
        /* the last connection was lost before any reply: not at once again */
        double d = c->quick_backoff < timeout ? c->quick_backoff : timeout;
        struct timespec ts = {(time_t)d, (long)((d - (double)(time_t)d) * 1e9)};
        nanosleep(&ts, NULL);
    }
    for (;;) {
        double left = deadline - psrt_now();
        r = connect_once(c, psrt_now() + (left < 2 ? (left > 0.05 ? left : 0.05) : 2));
        if (r == 0)
            return 0;
        if (psrt_now() >= next_say && deadline - psrt_now() > 1) {
            /* a long wait shows (TensorFlow: "CreateSession still waiting") */
            psrt_log("still waiting for %s (%s); giving up in %.0f s", c->peer,
                     c->resolve_err[0] ? c->resolve_err : strerror(-r), deadline - psrt_now());
            next_say = psrt_now() + 10;
        }
        if (psrt_now() + backoff > deadline)
            break;
        struct timespec ts = {(time_t)backoff, (long)((backoff - (double)(time_t)backoff) * 1e9)};
        nanosleep(&ts, NULL);
        backoff = backoff * 2 > 1.0 ? 1.0 : backoff * 2;
    }
    int code = r == -ETIMEDOUT ? -EHOSTUNREACH : r;
    psrt_err_set(err, code, "cannot reach %s within %g s: %s", c->peer, timeout,
                 c->resolve_err[0] ? c->resolve_err : strerror(-r));
    return code;
}

int psrt_conn_send(struct psrt_conn *c, int op, uint32_t flags, const struct iovec *iov, int niov,
                   double timeout, struct psrt_err *err)
{
    if (c->fd < 0) {
        psrt_err_set(err, -ENOTCONN, "%s: not connected", c->peer);
        err->code = -ENOTCONN;
        return -ENOTCONN;
    }
    int r = send_frame(c->fd, PSRT_KIND_REQ, op, 0, flags, c->next_id++, iov, niov, timeout);
    if (r) {
        psrt_err_set(err, r == -EPIPE ? -ECONNRESET : r, "%s: sending %s: %s", c->peer,
                     psrt_op_name(op), strerror(-r));
        psrt_conn_close(c);
    }
    return r;
}

/* A reply that could not be received: err names the peer and what went
 * wrong, the connection is closed; returns r. */
static int recv_fail(struct psrt_conn *c, int r, struct psrt_err *err)
{
    const char *what = r == -EBADMSG    ? "corrupt frame (crc mismatch)"
                       : r == -EPROTO   ? "bad frame (magic, version or kind)"
                       : r == -EMSGSIZE ? "frame too large"
                                        : strerror(-r);
    psrt_err_set(err, r, "%s: receiving reply: %s", c->peer, what);
    psrt_conn_close(c);
    return r;
}

int psrt_conn_recv(struct psrt_conn *c, double timeout, struct psrt_buf *resp, int32_t *status,
                   struct psrt_err *err)
{
    if (c->fd < 0) {
        psrt_err_set(err, -ENOTCONN, "%s: not connected", c->peer);
        return -ENOTCONN;
    }
    struct psrt_frame_hdr h;
    int r = recv_frame(c->fd, &h, resp, timeout, NULL);
    if (!r && h.kind != PSRT_KIND_RESP)
        r = -EPROTO;
    if (r)
        return recv_fail(c, r, err);
    c->answered = true;
    *status = h.status;
    return 0;
}

int psrt_conn_recv_begin(struct psrt_conn *c, double timeout, uint64_t *len, int32_t *status,
                         struct psrt_err *err)
{
    if (c->fd < 0) {
        psrt_err_set(err, -ENOTCONN, "%s: not connected", c->peer);
        return -ENOTCONN;
    }
    c->st_idle = timeout;
    uint8_t hdr[PSRT_FRAME_HDR];
    struct psrt_frame_hdr h;
    int r = recv_full(c->fd, hdr, sizeof hdr, c->st_idle, NULL);
    if (!r)
        r = psrt_frame_decode(hdr, &h, PSRT_FRAME_MAX);
    if (!r && h.kind != PSRT_KIND_RESP)
        r = -EPROTO;
    if (r)
        return recv_fail(c, r, err);
    c->st_left = h.len;
    c->st_want = h.pcrc;
    c->st_crc = 0;
    c->answered = true;
    *len = h.len;
    *status = h.status;
    return 0;
}

/* The next n bytes of a streamed reply into buf; *crc extended over them. */
static int recv_span(struct psrt_conn *c, void *buf, size_t n, uint32_t *crc, struct psrt_err *err)
{
    if (c->fd < 0) {
        psrt_err_set(err, -ENOTCONN, "%s: not connected", c->peer);
        return -ENOTCONN;
    }
    if (n > c->st_left)
        return recv_fail(c, -EBADMSG, err);
    int r = recv_full_crc(c->fd, buf, n, c->st_idle, NULL, crc);
    if (r)
        return recv_fail(c, r, err);
    c->st_left -= n;
    return 0;
}

int psrt_conn_recv_part(struct psrt_conn *c, void *buf, size_t n, struct psrt_err *err)
{
    return recv_span(c, buf, n, &c->st_crc, err);
}

int psrt_conn_recv_part_crc(struct psrt_conn *c, void *buf, size_t n, uint32_t *crc,
                            struct psrt_err *err)
{
    *crc = 0;
    int r = recv_span(c, buf, n, crc, err);
    if (!r)
        c->st_crc = ckpt_crc32c_combine(c->st_crc, *crc, n);
    return r;
}

int psrt_conn_recv_end(struct psrt_conn *c, struct psrt_err *err)
{
    if (c->fd < 0) {
        psrt_err_set(err, -ENOTCONN, "%s: not connected", c->peer);
        return -ENOTCONN;
    }
    if (c->st_left != 0 || c->st_crc != c->st_want)
        return recv_fail(c, -EBADMSG, err);
    if (psrt_fault("psrt/rpc/recv"))
        return recv_fail(c, -ECONNRESET, err);
    return 0;
}

int psrt_conn_call(struct psrt_conn *c, int op, uint32_t flags, const struct iovec *iov, int niov,
                   double timeout, struct psrt_buf *resp, int32_t *status, struct psrt_err *err)
{
    int r = psrt_conn_send(c, op, flags, iov, niov, timeout, err);
    if (r)
        return r;
    return psrt_conn_recv(c, timeout, resp, status, err);
}

/* ---- several calls at once, multiplexed with poll -----------------------
 * Calls on distinct connections proceed in parallel; calls on the same
 * connection are pipelined: sent back to back in array order, their
 * replies read in the same order (the server answers a connection's
 * requests in order).  Per connection: a send cursor (call, iovec
 * progress) and a receive cursor (call, header or body progress); it is
 * polled for POLLOUT while requests remain and POLLIN while replies are
 * owed, so a big request to one peer never waits behind a big reply from
 * another. */

#define MULTI_MAX 256

struct mcall_state {
    uint8_t hdr_out[PSRT_FRAME_HDR];
    struct iovec v[PSRT_MULTI_IOV + 1];
    int nv;
};

struct mconn {
    struct psrt_conn *c;
    int calls[MULTI_MAX];
    int ncalls;
    int send_i, vi; /* call being sent, its iovec */
    int recv_i;     /* call whose reply is being read */
    uint8_t hdr_in[PSRT_FRAME_HDR];
    size_t got;
    struct psrt_frame_hdr h;
    uint32_t crc; /* over the reply body read so far */
    bool in_body, dead;
};

static void mfail(struct psrt_mcall *m, int r, const char *what)
{
    const char *why = r == -EBADMSG    ? "corrupt frame (crc mismatch)"
                      : r == -EPROTO   ? "bad frame (magic, version or kind)"
                      : r == -EMSGSIZE ? "frame too large"
                                       : strerror(-r);
    psrt_err_set(m->err, r == -EPIPE ? -ECONNRESET : r, "%s: %s %s: %s", m->c->peer, what,
                 psrt_op_name(m->op), why);
    m->rc = m->err->code;
}

/* Fails every call of k not answered yet and closes its connection. */
static void mconn_fail(struct psrt_mcall *m, struct mconn *k, int r, const char *what)
{
    for (int j = k->recv_i; j < k->ncalls; j++)
        mfail(&m[k->calls[j]], r, what);
    k->recv_i = k->send_i = k->ncalls;
    k->dead = true;
    psrt_conn_close(k->c);
}

/* One recv on k of at most n bytes into p: how many came (> 0), or 0 when
 * none are there yet or k failed (mconn_fail). */
static size_t mconn_recv_some(struct psrt_mcall *m, struct mconn *k, void *p, size_t n)
{
    for (;;) {
        ssize_t g = recv(k->c->fd, p, n, 0);
        if (g > 0)
            return (size_t)g;
        if (g < 0 && errno == EINTR)
            continue;
        if (g == 0 || errno != EAGAIN)
            mconn_fail(m, k, g == 0 ? -ECONNRESET : -errno, "receiving reply to");
        return 0;
    }
}

/* Reads what is available on k (a reply's payload crc extended over each
 * chunk as it arrives); true when any byte came in. */
static bool mconn_recv(struct psrt_mcall *m, struct mconn *k)
{
    bool moved = false;
    while (k->recv_i < k->send_i) {
        struct psrt_mcall *c = &m[k->calls[k->recv_i]];
        if (!k->in_body) {
            size_t g = mconn_recv_some(m, k, k->hdr_in + k->got, sizeof k->hdr_in - k->got);
            if (!g)
                return moved;
            moved = true;
            k->got += g;
            if (k->got < sizeof k->hdr_in)
                continue;
            int e = psrt_frame_decode(k->hdr_in, &k->h, PSRT_FRAME_MAX);
            if (!e && k->h.kind != PSRT_KIND_RESP)
                e = -EPROTO;
            psrt_buf_reset(c->resp);
            if (!e && psrt_buf_reserve(c->resp, k->h.len ? k->h.len : 1))
                e = -ENOMEM;
            if (e) {
                mconn_fail(m, k, e, "receiving reply to");
                return moved;
            }
            k->in_body = true;
            k->got = 0;
            k->crc = 0;
        }
        if (k->got < k->h.len) {
            size_t g = mconn_recv_some(m, k, c->resp->p + k->got, k->h.len - k->got);
            if (!g)
                return moved;
            moved = true;
            k->crc = psrt_crc32c(k->crc, c->resp->p + k->got, g);
            k->got += g;
            if (k->got < k->h.len)
                continue;
        }
        c->resp->len = k->h.len;
        c->resp->off = 0;
        if (k->crc != k->h.pcrc) {
            mconn_fail(m, k, -EBADMSG, "receiving reply to");
            return moved;
        }
        if (psrt_fault("psrt/rpc/recv")) {
            mconn_fail(m, k, -ECONNRESET, "receiving reply to");
            return moved;
        }
        c->status = k->h.status;
        k->c->answered = true;
        k->recv_i++;
        k->in_body = false;
        k->got = 0;
    }
    return moved;
}

/* Sends what the socket takes; true when any byte went out. */
static bool mconn_send(struct psrt_mcall *m, struct mcall_state *st, struct mconn *k)
{
    int fd = k->c->fd;
    bool moved = false;
    while (k->send_i < k->ncalls) {
        struct mcall_state *s = &st[k->calls[k->send_i]];
        ssize_t w = writev(fd, s->v + k->vi, s->nv - k->vi);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN)
                mconn_fail(m, k, -errno, "sending");
            return moved;
        }
        moved |= w > 0;
        size_t adv = (size_t)w;
        while (k->vi < s->nv && adv >= s->v[k->vi].iov_len)
            adv -= s->v[k->vi++].iov_len;
        if (k->vi < s->nv) {
            s->v[k->vi].iov_base = (char *)s->v[k->vi].iov_base + adv;
            s->v[k->vi].iov_len -= adv;
            continue;
        }
        k->send_i++;
        k->vi = 0;
    }
    return moved;
}

int psrt_conn_multi(struct psrt_mcall *m, int n, double timeout)
{
    /* an idle timeout, as send_iov's: any byte moving on any of the
     * connections restarts it */
    double deadline = psrt_now() + timeout;
    if (n > MULTI_MAX)
        return -EINVAL;
    struct mcall_state *st = malloc(sizeof *st * (size_t)(n ? n : 1));
    struct mconn *k = calloc((size_t)(n ? n : 1), sizeof *k);
    struct pollfd pfd[MULTI_MAX];
    int idx[MULTI_MAX], nk = 0;
    if (!st || !k) {
        free(st);
        free(k);
        return -ENOMEM;
    }
    for (int i = 0; i < n; i++) {
        m[i].rc = 0;
        m[i].status = 0;
        int j = 0;
        while (j < nk && k[j].c != m[i].c)
            j++;
        if (j == nk)
            k[nk++].c = m[i].c;
        k[j].calls[k[j].ncalls++] = i;
        struct psrt_frame_hdr h = {.kind = PSRT_KIND_REQ,
                                   .op = (uint16_t)m[i].op,
                                   .flags = m[i].flags,
                                   .id = m[i].c->next_id++};
        uint32_t crc = 0;
        struct mcall_state *s = &st[i];
        s->nv = 1;
        for (int q = 0; q < m[i].niov && q < PSRT_MULTI_IOV; q++) {
            h.len += m[i].iov[q].iov_len;
            crc = psrt_crc32c(crc, m[i].iov[q].iov_base, m[i].iov[q].iov_len);
            if (m[i].iov[q].iov_len)
                s->v[s->nv++] = m[i].iov[q];
        }
        h.pcrc = crc;
        psrt_frame_encode(s->hdr_out, &h);
        s->v[0] = (struct iovec){s->hdr_out, sizeof s->hdr_out};
    }
    for (int j = 0; j < nk; j++) {
        if (k[j].c->fd < 0)
            mconn_fail(m, &k[j], -ENOTCONN, "sending");
        else if (psrt_fault("psrt/rpc/send"))
            mconn_fail(m, &k[j], -ECONNRESET, "sending");
    }
    for (;;) {
        int np = 0;
        for (int j = 0; j < nk; j++) {
            if (k[j].dead || k[j].recv_i == k[j].ncalls)
                continue;
            short ev = 0;
            if (k[j].send_i < k[j].ncalls)
                ev |= POLLOUT;
            if (k[j].recv_i < k[j].send_i)
                ev |= POLLIN;
            pfd[np] = (struct pollfd){.fd = k[j].c->fd, .events = ev};
            idx[np++] = j;
        }
        if (np == 0)
            break;
        double rem = deadline - psrt_now();
        if (rem <= 0) {
            for (int q = 0; q < np; q++)
                mconn_fail(m, &k[idx[q]], -ETIMEDOUT, "waiting on");
            break;
        }
        int r = poll(pfd, (nfds_t)np, rem > 1e6 ? 1000000000 : (int)(rem * 1000) + 1);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            int e = -errno; /* every call still owed an answer fails, none is left unread */
            for (int q = 0; q < np; q++)
                mconn_fail(m, &k[idx[q]], e, "waiting on");
            break;
        }
        bool moved = false;
        for (int q = 0; q < np && r > 0; q++) {
            struct mconn *kk = &k[idx[q]];
            if (!pfd[q].revents)
                continue;
            if (pfd[q].revents & (POLLIN | POLLERR | POLLHUP | POLLNVAL))
                moved |= mconn_recv(m, kk);
            if (!kk->dead && (pfd[q].revents & (POLLOUT | POLLERR)))
                moved |= mconn_send(m, st, kk);
            if (!kk->dead && kk->recv_i < kk->send_i)
                moved |= mconn_recv(m, kk);
        }
        if (moved)
            deadline = psrt_now() + timeout;
    }
    free(st);
    free(k);
    for (int i = 0; i < n; i++)
        if (m[i].rc)
            return m[i].rc;
    return 0;
}

/* ---- server ---------------------------------------------------------------- */

struct srv_conn {
    int fd;
    struct psrt_server *s;
    struct psrt_buf in;
    struct psrt_reply rep;
};

struct psrt_server {
    int lfd, epfd, port, mode;
    int spare;             /* /dev/null held open for the EMFILE refusal, or -1 */
    bool lfd_off;          /* out of descriptors with no spare: accepts paused */
    double lfd_on_at;      /* when lfd_off: when to accept again (monotonic s) */
    double refused_logged; /* when a refusal was last logged (monotonic s) */
    unsigned long long refused;
    psrt_handler h;
    void *ctx;
    struct psrt_pool *pool;
    pthread_t disp;
    atomic_ullong served;
    atomic_int open; /* accepted connections not yet closed */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
    double io_timeout; /* idle timeout reading a request or writing a reply */
};

void psrt_server_set_timeout(struct psrt_server *s, double secs)
{
    s->io_timeout = secs > 0 ? secs : 600;
}

/* The socket is closed last: a peer that sees the connection closed knows
 * that every buffer of it is freed (the RPC fuzz target counts on it). */
static void conn_close(struct srv_conn *sc)
{
    int fd = sc->fd;
    atomic_fetch_sub(&sc->s->open, 1);
    psrt_buf_free(&sc->in);
    psrt_buf_free(&sc->rep.out);
    free(sc);
    close(fd);
}

static void handle_one(void *arg)
{
    struct srv_conn *sc = arg;
    struct psrt_server *s = sc->s;
    struct psrt_frame_hdr h;
    bool eof = false;
    int r = recv_frame(sc->fd, &h, &sc->in, s->io_timeout, &eof);
    if (r) {
        if (!eof && r != -ECONNRESET)
            psrt_log("rpc: dropping connection: bad request frame: %s", strerror(-r));
        conn_close(sc);
        return;
    }
    psrt_buf_reset(&sc->rep.out);
    sc->rep.status = 0;
    sc->rep.exit_after = 0;
    sc->in.off = 0;
    s->h(s->ctx, h.op, h.flags, &sc->in, &sc->rep);
    atomic_fetch_add(&s->served, 1);
    struct iovec iov = {sc->rep.out.p, sc->rep.out.len};
    if (sc->rep.next > 0)
        r = send_frame(sc->fd, PSRT_KIND_RESP, h.op, sc->rep.status, 0, h.id, sc->rep.ext,
                       sc->rep.next, s->io_timeout);
    else
        r = send_frame(sc->fd, PSRT_KIND_RESP, h.op, sc->rep.status, 0, h.id, &iov, 1,
                       s->io_timeout);
    if (sc->rep.done)
        sc->rep.done(sc->rep.done_arg);
    sc->rep.done = NULL;
    sc->rep.next = 0;
    int exit_after = sc->rep.exit_after;
    if (sc->in.cap > (64u << 20)) /* do not keep huge buffers per idle connection */
        psrt_buf_free(&sc->in);
    if (sc->rep.out.cap > (64u << 20))
        psrt_buf_free(&sc->rep.out);
    if (exit_after) {
        pthread_mutex_lock(&s->mu);
        s->done = true;
        pthread_cond_broadcast(&s->cv);
        pthread_mutex_unlock(&s->mu);
    }
    if (r) {
        conn_close(sc);
        return;
    }
    struct epoll_event ev = {.events = EPOLLIN | EPOLLONESHOT | EPOLLRDHUP, .data.ptr = sc};
    if (epoll_ctl(s->epfd, EPOLL_CTL_MOD, sc->fd, &ev) < 0)
        conn_close(sc);
}

/* accept4 failed with EMFILE or ENFILE: the listening socket stays
 * readable, and a level-triggered epoll would return at once, for ever (a
 * busy loop) while the connection waits in the backlog and its client hangs.
 * Instead the connection is refused: the spare descriptor is given up for a
 * moment to accept it and close it at once, so the client sees it closed and
 * retries with its backoff.  When even that gives no descriptor (the limit
 * is below the spare's number, or the spare could not be opened again),
 * accepting pauses for 100 ms (the listening socket leaves the epoll set)
 * and connections wait in the backlog.  Logged at most once a second. */
static bool refuse_one(struct psrt_server *s, int err)
{
    /* accept4 fails EMFILE before it looks at the backlog: whether a
     * connection waits is known only once a descriptor is free */
    int fd = -1;
    if (s->spare >= 0) {
        close(s->spare);
        fd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd >= 0)
            close(fd);
        s->spare = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (fd < 0 && s->spare >= 0)
            return false; /* nothing waits */
    }
    double now = psrt_now();
    if (fd < 0) {
        /* no descriptor even with the spare given up (the limit is below
         * the spare's number): connections wait in the backlog */
        struct epoll_event ev = {.events = 0, .data.ptr = NULL};
        epoll_ctl(s->epfd, EPOLL_CTL_MOD, s->lfd, &ev);
        s->lfd_off = true;
        s->lfd_on_at = now + 0.1;
    } else {
        s->refused++;
    }
    if (now - s->refused_logged >= 1.0) {
        if (fd >= 0)
            psrt_log("rpc: out of file descriptors (%s): refusing connections (%llu so far)",
                     strerror(err), s->refused);
        else
            psrt_log("rpc: out of file descriptors (%s): cannot accept connections; trying "
                     "again every 100 ms",
                     strerror(err));
        s->refused_logged = now;
    }
    return fd >= 0;
}

static void *dispatcher(void *arg)
{
    struct psrt_server *s = arg;
    struct epoll_event evs[64];
    for (;;) { /* the process exits with the server running */
        int wait_ms = -1;
        if (s->lfd_off) {
            double left = s->lfd_on_at - psrt_now();
            wait_ms = left > 0 ? (int)(left * 1000) + 1 : 0;
        }
        int n = epoll_wait(s->epfd, evs, 64, wait_ms);
        if (s->lfd_off && psrt_now() >= s->lfd_on_at) {
            /* time to try again (other connections' traffic may never let
             * the wait time out) */
            if (s->spare < 0)
                s->spare = open("/dev/null", O_RDONLY | O_CLOEXEC);
            struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
            epoll_ctl(s->epfd, EPOLL_CTL_MOD, s->lfd, &ev);
            s->lfd_off = false;
        }
        for (int i = 0; i < n; i++) {
            if (evs[i].data.ptr == NULL) {
                for (;;) {
                    int fd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
                    if (fd < 0 && (errno == EMFILE || errno == ENFILE) && !s->lfd_off) {
                        if (refuse_one(s, errno))
                            continue;
                        break;
                    }
                    if (fd < 0)
                        break;
                    tune_socket(fd);
                    struct srv_conn *sc = calloc(1, sizeof *sc);
                    if (!sc) {
                        close(fd);
                        continue;
                    }
                    sc->fd = fd;
                    sc->s = s;
                    atomic_fetch_add(&s->open, 1);
                    struct epoll_event ev = {.events = EPOLLIN | EPOLLONESHOT | EPOLLRDHUP,
                                             .data.ptr = sc};
                    if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
                        conn_close(sc);
                }
                continue;
            }
            struct srv_conn *sc = evs[i].data.ptr;
            if (s->mode == PSRT_PER_REQUEST)
                psrt_sched_closure(handle_one, sc);
            else
                psrt_pool_submit(s->pool, handle_one, sc);
        }
    }
    return NULL;
}

int psrt_server_start(struct psrt_server **sp, const char *bind_host, int port, int mode,
                      int nthreads, psrt_handler h, void *ctx, struct psrt_err *err)
{
    struct psrt_server *s = calloc(1, sizeof *s);
    if (!s)
        return -ENOMEM;
    s->lfd = s->epfd = -1;
    s->spare = open("/dev/null", O_RDONLY | O_CLOEXEC);
    s->mode = mode;
    s->io_timeout = 600;
    s->h = h;
    s->ctx = ctx;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    int r;
    struct sockaddr_in6 a6 = {
        .sin6_family = AF_INET6, .sin6_port = htons((uint16_t)port), .sin6_addr = in6addr_any};
    struct sockaddr_in a4 = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_ANY)};
    const char *what = "socket";
    s->lfd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    int one = 1, zero = 0;
    if (s->lfd >= 0) {
        setsockopt(s->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        setsockopt(s->lfd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
        what = "bind";
        if (bind(s->lfd, (struct sockaddr *)&a6, sizeof a6) < 0) {
            r = -errno;
            close(s->lfd);
            s->lfd = -1;
            if (r == -EADDRINUSE)
                goto fail;
        }
    }
    if (s->lfd < 0) { /* no IPv6 here */
        what = "socket";
        s->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (s->lfd < 0) {
            r = -errno;
            goto fail;
        }
        setsockopt(s->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        what = "bind";
        if (bind(s->lfd, (struct sockaddr *)&a4, sizeof a4) < 0) {
            r = -errno;
            goto fail;
        }
    }
    what = "listen";
    if (listen(s->lfd, 512) < 0) {
        r = -errno;
        goto fail;
    }
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    getsockname(s->lfd, (struct sockaddr *)&ss, &sl);
    s->port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                             : ((struct sockaddr_in *)&ss)->sin_port);
    what = "epoll";
    s->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (s->epfd < 0) {
        r = -errno;
        goto fail;
    }
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
    epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->lfd, &ev);
    if (mode == PSRT_POOL) {
        what = "thread pool";
        r = psrt_pool_create(&s->pool, nthreads, 4096);
        if (r)
            goto fail;
    }
    what = "pthread_create";
    r = -pthread_create(&s->disp, NULL, dispatcher, s);
    if (r)
        goto fail;
    *sp = s;
    return 0;
fail:
    psrt_err_set(err, r, "cannot serve on %s:%d: %s: %s", bind_host ? bind_host : "0.0.0.0", port,
                 what, strerror(-r));
    if (s->pool)
        psrt_pool_destroy(s->pool);
    if (s->lfd >= 0)
        close(s->lfd);
    if (s->epfd >= 0)
        close(s->epfd);
    if (s->spare >= 0)
        close(s->spare);
    free(s);
    return r;
}

int psrt_server_port(const struct psrt_server *s)
{
    return s->port;
}
uint64_t psrt_server_served(const struct psrt_server *s)
{
    return atomic_load(&s->served);
}

int psrt_server_open_conns(const struct psrt_server *s)
{
    return atomic_load(&s->open);
}

void psrt_server_wait(struct psrt_server *s)
{
    pthread_mutex_lock(&s->mu);
    while (!s->done)
        pthread_cond_wait(&s->cv, &s->mu);
    pthread_mutex_unlock(&s->mu);
}
