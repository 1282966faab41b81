/*
 * gen_evline_seeds.c: writes the starting corpus for fuzz_evline: the bytes
 * the event channel's two real clients send, caught on a real server
 * socket: psrt's (runtime/psrt/events.c: HELLO, events with quoted values,
 * a SYNC answered in advance, a long error message) and faultline's own
 * (fl_evcli_connect and fl_evcli_send, as `faultline emit` uses them), each
 * written to DIR/seed-N with the leading byte fuzz_evline reads as its way
 * of splitting them (0: whole, else reads of varied sizes).
 * usage: gen-evline-seeds DIR
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness/run/evsrv.h"
#include "runtime/psrt/psrt.h"

static int nseed;
static const char *outdir;

static void die(const char *what)
{
    fprintf(stderr, "gen-evline-seeds: %s: %s\n", what, strerror(errno));
    exit(1);
}

/* Everything the client sent on fd (non-blocking; it has closed its end). */
static size_t slurp_fd(int fd, char *buf, size_t cap)
{
    size_t got = 0;
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 5000) != 1)
            die("poll");
        ssize_t n = read(fd, buf + got, cap - got);
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (n < 0)
            die("read");
        if (n == 0)
            return got;
        got += (size_t)n;
        if (got == cap)
            return got;
    }
}

static void emit(const char *bytes, size_t n)
{
    static const unsigned char splits[] = {0, 1, 23};
    for (size_t i = 0; i < sizeof splits; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/seed-%02d", outdir, nseed++);
        FILE *f = fopen(path, "wb");
        if (!f)
            die(path);
        fputc(splits[i], f);
        fwrite(bytes, 1, n, f);
        fclose(f);
    }
}

static struct fl_evsrv_client *accept_one(struct fl_evsrv *s)
{
    struct pollfd p = {.fd = fl_evsrv_fd(s), .events = POLLIN};
    if (poll(&p, 1, 5000) != 1)
        die("poll (accept)");
    struct fl_evsrv_client *c = fl_evsrv_accept(s);
    if (!c)
        die("accept");
    return c;
}

int main(int argc, char **argv)
{
    static char buf[1 << 16];
    char tmp[] = "/tmp/gen-evline-XXXXXX", path[4096], err[256];
    if (argc != 2) {
        fprintf(stderr, "usage: gen-evline-seeds DIR\n");
        return 2;
    }
    outdir = argv[1];
    mkdir(outdir, 0777);
    if (!mkdtemp(tmp))
        die("mkdtemp");
    snprintf(path, sizeof path, "%s/ev.sock", tmp);
    struct fl_evsrv *s;
    if (fl_evsrv_open(&s, path, NULL, err, sizeof err)) {
        fprintf(stderr, "gen-evline-seeds: %s\n", err);
        return 1;
    }

    /* 1: psrt's client */
    setenv("FAULTLINE_EVENTS", path, 1);
    setenv("FAULTLINE_HOST", "ps0", 1);
    setenv("FAULTLINE_SYNC", "save.begin", 1);
    psrt_ev_open("ps", 1);
    struct fl_evsrv_client *c = accept_one(s);
    /* the answer to its SYNC line (its second event), ahead of it */
    static const char oks[] = "OK 2\n";
    if (write(c->fd, oks, sizeof oks - 1) != (ssize_t)(sizeof oks - 1))
        die("write");
    psrt_ev("ps.ready", "task=%d port=%d", 1, 2222);
    psrt_ev("save.begin", "step=%lld prefix=%s", 100LL, psrt_ev_q("/train dir/model.ckpt-100"));
    psrt_ev("save.shard_written", "shard=%d step=%lld path=%s", 1, 100LL,
            psrt_ev_q("/train/model.ckpt-100_temp/part-00001-of-00002"));
    psrt_ev("restore.failed", "error=%s",
            psrt_ev_q("NotFoundError: \"model.ckpt-7\" \\ missing\nsecond line"));
    char longmsg[2900];
    memset(longmsg, 'x', sizeof longmsg - 1);
    longmsg[sizeof longmsg - 1] = 0;
    psrt_ev("train.done", "step=%d error=%s", 9, longmsg);
    psrt_ev("ps.done", "%s", "");
    psrt_ev_close();
    size_t n = slurp_fd(c->fd, buf, sizeof buf);
    emit(buf, n);
    fl_evsrv_drop(s, c);

    /* 2: faultline's client (`faultline emit`) */
    setenv("FAULTLINE_JOB", "worker", 1);
    setenv("FAULTLINE_TASK", "0", 1);
    int fd = fl_evcli_connect(path);
    if (fd < 0) {
        errno = -fd;
        die("fl_evcli_connect");
    }
    c = accept_one(s);
    if (write(c->fd, "OK 3\n", 5) != 5)
        die("write");
    if (fl_evcli_send(fd, "nap.begin", "secs=1", false, 0) ||
        fl_evcli_send(fd, "nap.end", NULL, false, 0) ||
        fl_evcli_send(fd, "train.step", "step=3 loss=0.5 msg=\"a \\\"b\\\" c\"", true, 3))
        die("fl_evcli_send");
    close(fd);
    n = slurp_fd(c->fd, buf, sizeof buf);
    emit(buf, n);
    fl_evsrv_drop(s, c);

    fl_evsrv_close(s);
    rmdir(tmp);
    printf("gen-evline-seeds: %d seeds in %s\n", nseed, outdir);
    return 0;
}
