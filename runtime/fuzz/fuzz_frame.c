/*
 * fuzz_frame.c: libFuzzer target for psrt's RPC wire: the bytes a peer
 * sends, through the real sockets and the real code that reads them.  An
 * input is one byte of FZ_* bits (fuzz_frame.h), then those bytes.
 *
 * Server side: the bytes are what a worker sends to a ps.  They go over a
 * new TCP connection to a psrt server (rpc.c: frame headers, payload crcs,
 * the segments of streamed requests) serving a real ps (ps.c's handler:
 * Ping, Init, Pull, Push with and without blocks, Snapshot, Load with its
 * tensor list, Open, Echo...) reset to fresh variables first; requests that
 * would write to the disk or end the ps (SaveV2, Merge, Restore, the robust
 * protocol's, Shutdown, a Load that keeps a copy) are refused before the
 * handler, so a fuzzed path never reaches the file system.  The target
 * reads the replies until the server closes the connection.
 * Client side: the bytes are what a ps sends back.  A worker connected to
 * the target's fake ps reads them as the reply to its Ping (psrt_conn_multi's
 * incremental reader, the Ping reply's parser), then as replies read whole
 * (psrt_conn_recv, each payload decoded as a tensor list, psrt_tl_decode:
 * every tensor it gives must lie inside the payload and be as long as its
 * shape and dtype say) and streamed (psrt_conn_recv_begin/_part/_end),
 * until the connection fails.
 * With FZ_FIX_CRC the target first rewrites every header, payload and
 * segment crc to match, so that mutations get past the checksums.  Any
 * crash, hang, leak or sanitizer report is a bug; the target's own failures
 * (a socket it cannot open, a ps it cannot reset) abort() with a report of
 * their own.  Built and run by ci/fuzz (`make fuzz`, target frame), with
 * PSRT_FRAME_MAX at 1 MiB (ci/fuzz says why).
 */
#include "runtime/fuzz/fuzz_frame.h"
#include "runtime/ckpt/bundle.h"
#include "runtime/psrt/calls.h"
#include "runtime/psrt/ps.h"
#include "runtime/psrt/worker.h"

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <sanitizer/common_interface_defs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct psrt_flags fa, fb, fw;
static struct psrt_ps *ps_a, *ps_b;
static struct psrt_server *srv_a, *srv_b;
static struct psrt_worker w;
static int fake_fd = -1, fake_port;

/* The target's own failure: said where libFuzzer's reports go (ci/fuzz
 * closes stderr), then abort(). */
static void die(const char *what, const char *why)
{
    char msg[512];
    snprintf(msg, sizeof msg, "fuzz_frame: %s: %s", what, why);
    __sanitizer_report_error_summary(msg);
    abort();
}

/* ---- the server side's filter ---------------------------------------------- */

/* A Load that names a copy to keep writes it to the disk. */
static bool load_keeps_a_copy(const struct psrt_buf *req)
{
    struct psrt_buf b = *req;
    char name[512];
    (void)psrt_buf_get_u64(&b);
    return psrt_buf_get_str(&b, name, sizeof name) == 0 && name[0];
}

static void filter(void *ctx, int op, uint32_t flags, struct psrt_buf *req, struct psrt_reply *rep)
{
    switch (op) {
    case PSRT_OP_SAVE_SHARD:
    case PSRT_OP_MERGE:
    case PSRT_OP_RESTORE:
    case PSRT_OP_RSAVE:
    case PSRT_OP_RCOMMIT:
    case PSRT_OP_RQUERY:
    case PSRT_OP_RABORT:
    case PSRT_OP_SHUTDOWN: rep->status = -EPERM; return;
    case PSRT_OP_LOAD:
        if (load_keeps_a_copy(req)) {
            rep->status = -EPERM;
            return;
        }
        break;
    }
    psrt_ps_handle(ctx, op, flags, req, rep);
}

static void setup_ps(const char *fmt, const char *dir, struct psrt_flags *f, struct psrt_ps **ps,
                     struct psrt_server **srv)
{
    char line[1024], err[256];
    struct psrt_err e = {0};
    snprintf(line, sizeof line, fmt, dir);
    if (fz_flags(line, f, err, sizeof err))
        die("ps flags", err);
    if (psrt_ps_setup(ps, f, &e) || psrt_server_start(srv, NULL, 0, PSRT_POOL, 1, filter, *ps, &e))
        die("ps", e.msg);
    psrt_server_set_timeout(*srv, 10);
}

/* ---- once -------------------------------------------------------------------- */

static void setup(void)
{
    /* a train_dir where nothing can be made: the filter keeps requests
     * away from the disk, and one that got past it would fail there */
    static const char dir[] = "/proc/fuzz-frame/train";
    char line[1024], err[256];
    struct psrt_err e = {0};
    psrt_log_init("fuzz", 0);
    setup_ps(FZ_PS_A, dir, &fa, &ps_a, &srv_a);
    setup_ps(FZ_PS_B, dir, &fb, &ps_b, &srv_b);
    /* the fake ps the worker talks to */
    fake_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    if (fake_fd < 0 || bind(fake_fd, (struct sockaddr *)&a, sizeof a) < 0 ||
        listen(fake_fd, 16) < 0 || getsockname(fake_fd, (struct sockaddr *)&a, &al) < 0)
        die("fake ps", strerror(errno));
    fake_port = ntohs(a.sin_port);
    snprintf(line, sizeof line, FZ_WORKER, fake_port, dir);
    if (fz_flags(line, &fw, err, sizeof err))
        die("worker flags", err);
    if (psrt_worker_setup(&w, &fw, &e))
        die("worker", e.msg);
}

/* ---- crc fix-up ---------------------------------------------------------------- */

static uint32_t get32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

static void put32(uint8_t *p, uint32_t v)
{
    memcpy(p, &v, 4);
}

/* Walks the frames in b[0..n) as a receiver would and makes each header
 * crc, payload crc, segment crc and segment sequence number right. */
static void fix_crcs(uint8_t *b, size_t n)
{
    size_t off = 0;
    while (n - off >= PSRT_FRAME_HDR) {
        uint8_t *h = b + off;
        uint64_t len;
        memcpy(&len, h + 24, 8);
        off += PSRT_FRAME_HDR;
        if (h[5] == PSRT_KIND_STREAM) {
            put32(h + 32, 0);
            put32(h + 36, psrt_crc32c(0, h, 36));
            for (uint32_t seq = 0; n - off >= PSRT_SEG_HDR; seq++) {
                uint8_t *s = b + off;
                uint32_t sl = get32(s);
                off += PSRT_SEG_HDR;
                size_t k = sl < n - off ? sl : n - off;
                put32(s + 4, psrt_crc32c(0, b + off, k));
                put32(s + 8, seq);
                put32(s + 12, psrt_crc32c(0, s, 12));
                off += k;
                if (sl == 0)
                    break;
            }
            continue;
        }
        size_t k = len < n - off ? (size_t)len : n - off;
        put32(h + 32, psrt_crc32c(0, b + off, k));
        put32(h + 36, psrt_crc32c(0, h, 36));
        off += k;
    }
}

/* ---- sockets ----------------------------------------------------------------------- */

/* Closes fd with a reset, leaving no TIME_WAIT behind: two connections an
 * input, thousands a second, would use up the ephemeral ports. */
static void close_now(int fd)
{
    struct linger lg = {.l_onoff = 1, .l_linger = 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    close(fd);
}

/* A connection to port on the loopback.  libFuzzer's timeout timer
 * (SIGALRM) may interrupt connect, which then goes on in the background;
 * ports are shared with the rest of the machine: a moment, if none is free. */
static int connect_lo(int port, const char *what)
{
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    for (int tries = 0;; tries++) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
            die("socket", strerror(errno));
        int r = connect(fd, (struct sockaddr *)&a, sizeof a);
        if (r < 0 && errno == EINTR) {
            struct pollfd p = {.fd = fd, .events = POLLOUT};
            while (poll(&p, 1, 5000) < 0 && errno == EINTR)
                ;
            int soerr = 0;
            socklen_t sl = sizeof soerr;
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
            r = soerr ? -1 : 0;
            errno = soerr;
        }
        if (r == 0)
            return fd;
        if (errno != EADDRNOTAVAIL || tries == 100)
            die(what, strerror(errno));
        close(fd);
        usleep(10000);
    }
}

/* ---- server side ----------------------------------------------------------------- */

static void direct(struct psrt_ps *ps, int op, const void *p, size_t n)
{
    struct psrt_buf req = {.p = (uint8_t *)p, .len = n, .cap = n};
    struct psrt_reply rep;
    memset(&rep, 0, sizeof rep);
    psrt_ps_handle(ps, op, 0, &req, &rep);
    if (rep.status)
        die("resetting the ps", psrt_op_name(op));
    psrt_buf_free(&rep.out);
}

static void serve(const uint8_t *b, size_t n, unsigned mode)
{
    struct psrt_ps *ps = mode & FZ_OTHER ? ps_b : ps_a;
    struct psrt_server *srv = mode & FZ_OTHER ? srv_b : srv_a;
    uint64_t seed = 1;
    direct(ps, PSRT_OP_INIT, &seed, sizeof seed); /* fresh variables, step 0, no rows */
    if (!(mode & FZ_NOT_OPEN))
        direct(ps, PSRT_OP_OPEN, NULL, 0);
    int fd = connect_lo(psrt_server_port(srv), "connect to the ps");
    /* write the requests while reading the replies (a ps blocked writing a
     * reply no one reads would stop reading requests), then read to the
     * server's close */
    size_t off = 0;
    bool shut = n == 0;
    if (shut)
        shutdown(fd, SHUT_WR);
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN | (shut ? 0 : POLLOUT)};
        int r = poll(&p, 1, 30000);
        if (r == 0)
            die("server side", "the ps neither answered nor closed in 30 s");
        if (r < 0)
            continue;
        if (p.revents & POLLOUT) {
            ssize_t wr = send(fd, b + off, n - off, MSG_DONTWAIT | MSG_NOSIGNAL);
            if (wr > 0)
                off += (size_t)wr;
            if (wr < 0 && errno != EAGAIN && errno != EINTR)
                off = n; /* the ps closed (a bad frame): what is left goes nowhere */
            if (off == n) {
                shutdown(fd, SHUT_WR);
                shut = true;
            }
        }
        if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
            char sink[65536];
            ssize_t rd = recv(fd, sink, sizeof sink, MSG_DONTWAIT);
            if (rd == 0 || (rd < 0 && errno != EAGAIN && errno != EINTR))
                break;
        }
    }
    close_now(fd);
}

/* ---- client side ------------------------------------------------------------------ */

static void read_replies(const uint8_t *b, size_t n, unsigned mode)
{
    struct psrt_err e = {0};
    /* a connection of its own each time (a connection that never brought
     * a reply makes the same psrt_conn wait before its next connect) */
    struct psrt_conn *c = psrt_conn_new("127.0.0.1", fake_port, "ps task 0");
    if (psrt_conn_connect(c, 5, &e))
        die("connect to the fake ps", e.msg);
    int fd;
    while ((fd = accept(fake_fd, NULL, NULL)) < 0 && errno == EINTR)
        ;
    if (fd < 0)
        die("accept", strerror(errno));
    int big = 1 << 20;
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
    for (size_t off = 0; off < n;) {
        ssize_t wr = send(fd, b + off, n - off, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (wr < 0 && errno == EINTR)
            continue;
        if (wr <= 0)
            break; /* more than the socket buffers hold: the rest is cut */
        off += (size_t)wr;
    }
    shutdown(fd, SHUT_WR);
    psrt_conn_free(w.conn[0]);
    w.conn[0] = c;

    if (!(mode & FZ_OTHER)) {
        int ready;
        long long step;
        psrt_worker_ping(&w, 0, &ready, &step, &e);
    }
    struct psrt_buf resp = {0};
    static uint8_t part[4096];
    for (int i = 0; i < 64 && psrt_conn_is_open(c); i++) {
        int32_t status = 0;
        if (i % 2 == 0) {
            if (psrt_conn_recv(c, 5, &resp, &status, &e))
                break;
            if (status) {
                struct psrt_call call = {.ps = 0, .op = PSRT_OP_SNAPSHOT, .status = status};
                psrt_call_status_err(&call, &resp);
                continue;
            }
            resp.off = 0;
            struct psrt_tl l;
            if (psrt_tl_decode(&l, &resp) == 0) {
                for (int t = 0; t < l.n; t++) {
                    const struct psrt_tensor *x = &l.t[t];
                    if (x->len && ((const uint8_t *)x->data < resp.p ||
                                   (const uint8_t *)x->data + x->len > resp.p + resp.len))
                        abort(); /* a tensor lies inside the payload */
                    uint64_t bytes;
                    int64_t el = ckpt_shape_elements(x->rank, x->dims);
                    if (el < 0 ||
                        __builtin_mul_overflow((uint64_t)el, ckpt_dtype_size(x->dtype), &bytes) ||
                        bytes != x->len)
                        abort(); /* and its shape and dtype say how long it is */
                }
                psrt_tl_free(&l);
            }
        } else {
            uint64_t len;
            if (psrt_conn_recv_begin(c, 5, &len, &status, &e))
                break;
            bool ok = true;
            for (uint64_t got = 0; ok && got < len;) {
                size_t k = len - got < sizeof part ? (size_t)(len - got) : sizeof part;
                uint32_t crc;
                ok = ((got / sizeof part) % 2 ? psrt_conn_recv_part_crc(c, part, k, &crc, &e)
                                              : psrt_conn_recv_part(c, part, k, &e)) == 0;
                got += k;
            }
            if (ok)
                psrt_conn_recv_end(c, &e);
        }
    }
    psrt_buf_free(&resp);
    close_now(fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static bool ready;
    if (!ready) {
        setup();
        ready = true;
    }
    if (size < 1)
        return 0;
    unsigned mode = data[0];
    size_t n = size - 1;
    uint8_t *b = malloc(n ? n : 1);
    if (!b)
        return 0;
    memcpy(b, data + 1, n);
    if (mode & FZ_FIX_CRC)
        fix_crcs(b, n);
    if (mode & FZ_CLIENT)
        read_replies(b, n, mode);
    else
        serve(b, n, mode);
    free(b);
    return 0;
}
