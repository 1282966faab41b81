/*
 * gen_frame_seeds.c: writes the starting corpus for fuzz_frame: the bytes
 * psrt's own tasks send each other, caught by a recording proxy between a
 * real worker and a real ps (set up as fuzz_frame.h's ps A and worker) in
 * this process.  Three sessions: a streamed push (psrt_worker_push_stream);
 * a Snapshot, a Load of what it returned, a Pull before Open (refused) and
 * an Echo, sent with psrt_worker_calls; and a chief's whole run
 * (psrt_worker_main: Ping, Init, Open, training Pulls and Pushes, legacy
 * saves, Shutdown).  Each frame of either direction becomes a seed of its
 * own (requests for the server side, replies for the client side, each as
 * sent and in crc fix-up mode), and so do the first 48 KiB of each
 * direction of each session, into DIR/seed-N.
 * usage: gen-frame-seeds DIR
 */
#include "runtime/fuzz/fuzz_frame.h"
#include "runtime/psrt/calls.h"
#include "runtime/psrt/ps.h"
#include "runtime/psrt/worker.h"

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

static int nseed;
static atomic_int sessions; /* recorded and written by the proxy */
static const char *outdir;
static int lfd, ps_port;

static void die(const char *what, const char *why)
{
    fprintf(stderr, "gen-frame-seeds: %s: %s\n", what, why);
    exit(1);
}

static void emit(unsigned mode, const uint8_t *p, size_t n)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/seed-%03d", outdir, nseed++);
    FILE *f = fopen(path, "wb");
    if (!f)
        die(path, strerror(errno));
    fputc((int)mode, f);
    fwrite(p, 1, n, f);
    fclose(f);
}

/* Each frame of b[0..n) (a streamed one with its segments) as a seed of its
 * own, the first three of each op and kind only; then the start of the
 * whole stream. */
static void emit_frames(const struct psrt_buf *b, unsigned mode)
{
    static int count[2][4][PSRT_OP_MAX];
    size_t off = 0;
    while (b->len - off >= PSRT_FRAME_HDR) {
        struct psrt_frame_hdr h;
        size_t start = off;
        if (psrt_frame_decode(b->p + off, &h, PSRT_FRAME_MAX))
            die("recorded frame", "does not decode");
        off += PSRT_FRAME_HDR;
        if (h.kind == PSRT_KIND_STREAM) {
            for (uint32_t seq = 0;; seq++) {
                uint32_t len, crc;
                if (b->len - off < PSRT_SEG_HDR || psrt_seg_decode(b->p + off, &len, &crc, seq))
                    die("recorded segment", "does not decode");
                off += PSRT_SEG_HDR + len;
                if (len == 0)
                    break;
            }
        } else {
            off += h.len;
        }
        if (off > b->len)
            die("recorded frame", "cut short");
        if (h.op >= PSRT_OP_MAX || count[mode & FZ_CLIENT][h.kind][h.op]++ >= 3 ||
            off - start > 60000)
            continue;
        emit(mode, b->p + start, off - start);
        emit(mode | FZ_FIX_CRC, b->p + start, off - start);
    }
    size_t n = b->len < 48 * 1024 ? b->len : 48 * 1024;
    emit(mode & ~FZ_OTHER, b->p, n);
}

/* The proxy: one connection at a time from the worker, forwarded to the
 * ps, both directions recorded; emits each connection's seeds when the
 * worker closes it. */
static void *proxy(void *arg)
{
    (void)arg;
    for (;;) {
        int a = accept(lfd, NULL, NULL);
        if (a < 0)
            die("accept", strerror(errno));
        int b = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in sa = {.sin_family = AF_INET,
                                 .sin_port = htons((uint16_t)ps_port),
                                 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        if (b < 0 || connect(b, (struct sockaddr *)&sa, sizeof sa) < 0)
            die("connect to the ps", strerror(errno));
        struct psrt_buf req = {0}, rep = {0};
        bool a_open = true, b_open = true;
        while (a_open && b_open) {
            struct pollfd p[2] = {{.fd = a, .events = POLLIN}, {.fd = b, .events = POLLIN}};
            if (poll(p, 2, -1) < 0)
                continue;
            static uint8_t buf[1 << 16];
            if (p[0].revents) {
                ssize_t n = recv(a, buf, sizeof buf, 0);
                if (n <= 0)
                    a_open = false;
                else if (send(b, buf, (size_t)n, MSG_NOSIGNAL) == n)
                    psrt_buf_put(&req, buf, (size_t)n);
            }
            if (p[1].revents) {
                ssize_t n = recv(b, buf, sizeof buf, 0);
                if (n <= 0)
                    b_open = false;
                else if (send(a, buf, (size_t)n, MSG_NOSIGNAL) == n)
                    psrt_buf_put(&rep, buf, (size_t)n);
            }
        }
        close(a);
        close(b);
        emit_frames(&req, 0);
        emit_frames(&rep, FZ_CLIENT | FZ_OTHER);
        psrt_buf_free(&req);
        psrt_buf_free(&rep);
        printf("gen-frame-seeds: a session recorded (%d seeds so far)\n", nseed);
        fflush(stdout);
        atomic_fetch_add(&sessions, 1);
    }
    return NULL;
}

static void check(int r, const struct psrt_err *e, const char *what)
{
    if (r)
        die(what, e->msg[0] ? e->msg : strerror(-r));
}

/* Waits until the proxy has written the seeds of the session just closed. */
static void wait_session(int before)
{
    for (int i = 0; i < 500 && atomic_load(&sessions) == before; i++)
        usleep(10000);
    if (atomic_load(&sessions) == before)
        die("proxy", "the session was not recorded in 5 s");
}

int main(int argc, char **argv)
{
    static char dir[] = "/tmp/gen-frame-XXXXXX";
    static struct psrt_flags fp, fw;
    char line[1024], err[256];
    struct psrt_err e = {0};
    if (argc != 2) {
        fprintf(stderr, "usage: gen-frame-seeds DIR\n");
        return 2;
    }
    mkdir(argv[1], 0777);
    if (!(outdir = realpath(argv[1], NULL))) /* before the chdir below */
        die(argv[1], strerror(errno));
    if (!mkdtemp(dir))
        die("mkdtemp", strerror(errno));
    if (chdir(dir) < 0) /* the legacy saves' relative paths land here */
        die("chdir", strerror(errno));
    psrt_log_init("gen-seeds", 0);
    snprintf(line, sizeof line, FZ_PS_A, dir);
    if (fz_flags(line, &fp, err, sizeof err))
        die("ps flags", err);
    struct psrt_ps *ps;
    check(psrt_ps_setup(&ps, &fp, &e), &e, "ps");
    check(psrt_ps_serve(ps, 0, &e), &e, "ps");
    ps_port = psrt_ps_port(ps);
    lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof a) < 0 || listen(lfd, 16) < 0 ||
        getsockname(lfd, (struct sockaddr *)&a, &al) < 0)
        die("proxy", strerror(errno));
    pthread_t t;
    pthread_create(&t, NULL, proxy, NULL);

    /* 1: a streamed push; 2: Snapshot, Load, a refused Pull, Echo */
    char wline[1200];
    struct psrt_flags fw2;
    snprintf(wline, sizeof wline, FZ_WORKER, ntohs(a.sin_port), dir);
    if (fz_flags(wline, &fw2, err, sizeof err))
        die("worker flags", err);
    for (int session = 1; session <= 2; session++) {
        struct psrt_worker w;
        memset(&w, 0, sizeof w);
        check(psrt_worker_setup(&w, &fw2, &e), &e, "worker setup");
        check(psrt_worker_connect(&w, &e), &e, "connect");
        check(psrt_worker_init_all(&w, &e), &e, "init");
        if (session == 1) {
            check(psrt_worker_open_all(&w, &e), &e, "open");
            uint64_t keys[40];
            float grads[40];
            for (int i = 0; i < 40; i++) {
                keys[i] = (uint64_t)i * 7919u;
                grads[i] = 0.01f * (float)i;
            }
            float bias_grad = 0.5f;
            struct iovec dense = {&bias_grad, 4};
            uint32_t nd = 1;
            uint64_t *pk[1] = {malloc(40 * 8)}; /* room for every key (one ps) */
            float *pg[1] = {malloc(40 * 4)};
            uint32_t *pi[1] = {malloc(40 * 4)};
            size_t pn[1];
            struct psrt_call calls[1];
            if (psrt_worker_push_stream(&w, keys, grads, 40, &dense, &nd, pk, pg, pi, pn, calls) >=
                0)
                die("streamed push", calls[0].err.msg);
            free(pk[0]);
            free(pg[0]);
            free(pi[0]);
        } else {
            struct psrt_call c = {.ps = 0, .op = PSRT_OP_SNAPSHOT};
            if (psrt_worker_calls(&w, &c, 1) >= 0)
                die("snapshot", c.err.msg);
            struct psrt_buf load = {0};
            psrt_buf_u64(&load, 7);
            psrt_buf_str(&load, "");
            psrt_buf_u32(&load, 0);
            psrt_buf_align8(&load);
            psrt_buf_put(&load, w.resp[0].p, w.resp[0].len);
            c = (struct psrt_call){.ps = 0, .op = PSRT_OP_LOAD};
            c.iov[0] = (struct iovec){load.p, load.len};
            c.niov = 1;
            if (psrt_worker_calls(&w, &c, 1) >= 0)
                die("load", c.err.msg);
            psrt_buf_free(&load);
            uint64_t pull[3] = {2, 11, 13}; /* nkeys, keys: refused, not open */
            c = (struct psrt_call){.ps = 0, .op = PSRT_OP_PULL, .flags = PSRT_PULL_RESERVE};
            c.iov[0] = (struct iovec){pull, sizeof pull};
            c.niov = 1;
            psrt_worker_calls(&w, &c, 1);
            c = (struct psrt_call){.ps = 0, .op = PSRT_OP_ECHO};
            c.iov[0] = (struct iovec){"echo", 4};
            c.niov = 1;
            psrt_worker_calls(&w, &c, 1);
        }
        int before = atomic_load(&sessions);
        psrt_worker_free(&w);
        wait_session(before);
    }
    int before;
    /* 3: a chief's whole run, small (last: its Shutdown ends the ps's training) */
    snprintf(wline, sizeof wline,
             FZ_WORKER
             " --max_steps=4 --batch_size=4 --save_checkpoint_steps=2 --log_every_steps=1",
             ntohs(a.sin_port), dir);
    if (fz_flags(wline, &fw, err, sizeof err))
        die("worker flags", err);
    before = atomic_load(&sessions);
    if (psrt_worker_main(&fw) != 0)
        die("worker", "the chief's run failed");
    wait_session(before);

    printf("gen-frame-seeds: %d seeds in %s\n", nseed, outdir);
    fflush(stdout);
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "gen-frame-seeds: could not remove %s\n", dir);
    _exit(0); /* the ps and the proxy run on */
}
