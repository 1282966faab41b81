/*
 * events.c: the client side of the harness's event channel
 * (docs/events.md, wire protocol v1).
 *
 * FAULTLINE_EVENTS unset: every call is a no-op.  Otherwise one unix stream
 * connection per process, opened at start with a HELLO line; each event is
 * one line "EVENT kind k=v ..." or, when FAULTLINE_SYNC lists the kind (or
 * is "*"), "SYNC seq kind k=v ..." followed by a blocking read of "OK seq".
 * Writes are serialised by a mutex (ps handler threads emit events too).
 * States: OFF (unset or failed) | ON.  Any I/O failure logs one line and
 * turns the channel OFF for good: the harness going away never kills psrt.
 */
#include "runtime/psrt/psrt.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static pthread_mutex_t ev_mu = PTHREAD_MUTEX_INITIALIZER;
static int ev_fd = -1;
static unsigned long long ev_seq;
static char *ev_sync; /* comma list, or "*" */

static bool is_sync(const char *kind)
{
    if (!ev_sync)
        return false;
    if (!strcmp(ev_sync, "*"))
        return true;
    size_t kl = strlen(kind);
    for (const char *p = ev_sync; *p;) {
        const char *e = strchr(p, ',');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        while (l && p[0] == ' ') {
            p++;
            l--;
        }
        if (l == kl && !strncmp(p, kind, kl))
            return true;
        if (!e)
            break;
        p = e + 1;
    }
    return false;
}

static void ev_fail(const char *what, int err)
{
    psrt_log("event channel: %s: %s; carrying on without events", what, strerror(err));
    if (ev_fd >= 0)
        close(ev_fd);
    ev_fd = -1;
}

static int write_all(const char *s, size_t n)
{
    while (n) {
        ssize_t w = send(ev_fd, s, n, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        s += w;
        n -= (size_t)w;
    }
    return 0;
}

const char *psrt_ev_q(const char *v)
{
    static __thread char bufs[4][1024];
    static __thread int which;
    char *b = bufs[which++ & 3];
    bool plain = *v != 0;
    for (const char *p = v; *p; p++)
        if (*p == ' ' || *p == '"' || *p == '=' || *p == '\n' || *p == '\\')
            plain = false;
    if (plain) {
        snprintf(b, 1024, "%s", v);
        return b;
    }
    size_t o = 0;
    b[o++] = '"';
    for (const char *p = v; *p && o < 1020; p++) {
        if (*p == '"' || *p == '\\')
            b[o++] = '\\';
        b[o++] = *p == '\n' ? ' ' : *p;
    }
    b[o++] = '"';
    b[o] = 0;
    return b;
}

void psrt_ev_open(const char *job, int task)
{
    const char *path = getenv("FAULTLINE_EVENTS");
    if (!path || !*path)
        return;
    const char *sync = getenv("FAULTLINE_SYNC");
    if (sync && *sync)
        ev_sync = strdup(sync);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof a.sun_path) {
        ev_fail("socket path too long", ENAMETOOLONG);
        return;
    }
    strcpy(a.sun_path, path);
    ev_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (ev_fd < 0 || connect(ev_fd, (struct sockaddr *)&a, sizeof a) < 0) {
        char what[1200];
        snprintf(what, sizeof what, "connect %s", path);
        ev_fail(what, errno);
        return;
    }
    char host[256] = "";
    const char *h = getenv("FAULTLINE_HOST");
    if (h && *h)
        snprintf(host, sizeof host, "%s", h);
    else
        gethostname(host, sizeof host - 1);
    char line[512];
    int n = snprintf(line, sizeof line, "HELLO host=%s job=%s task=%d pid=%d\n", psrt_ev_q(host),
                     job, task, (int)getpid());
    int r = write_all(line, (size_t)n);
    if (r)
        ev_fail("HELLO", -r);
}

void psrt_ev(const char *kind, const char *fmt, ...)
{
    if (ev_fd < 0)
        return;
    char attrs[3000] = "";
    if (fmt && *fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(attrs, sizeof attrs, fmt, ap);
        va_end(ap);
    }
    pthread_mutex_lock(&ev_mu);
    if (ev_fd < 0) {
        pthread_mutex_unlock(&ev_mu);
        return;
    }
    char line[4096];
    bool sync = is_sync(kind);
    unsigned long long seq = ++ev_seq;
    int n;
    if (sync)
        n = snprintf(line, sizeof line, "SYNC %llu %s%s%s\n", seq, kind, *attrs ? " " : "", attrs);
    else
        n = snprintf(line, sizeof line, "EVENT %s%s%s\n", kind, *attrs ? " " : "", attrs);
    if (n >= (int)sizeof line) {
        line[sizeof line - 2] = '\n';
        n = (int)sizeof line - 1;
    }
    int r = write_all(line, (size_t)n);
    if (r) {
        ev_fail("send", -r);
    } else if (sync) {
        char ans[128];
        size_t got = 0;
        for (;;) {
            ssize_t k = recv(ev_fd, ans + got, 1, 0);
            if (k <= 0) {
                if (k < 0 && errno == EINTR)
                    continue;
                ev_fail("waiting for OK", k == 0 ? ECONNRESET : errno);
                break;
            }
            if (ans[got] == '\n') {
                ans[got] = 0;
                unsigned long long got_seq = 0;
                if (sscanf(ans, "OK %llu", &got_seq) == 1 && got_seq == seq)
                    break;
                got = 0; /* not ours: keep reading */
                continue;
            }
            if (++got >= sizeof ans - 1)
                got = 0;
        }
    }
    pthread_mutex_unlock(&ev_mu);
}

void psrt_ev_close(void)
{
    pthread_mutex_lock(&ev_mu);
    if (ev_fd >= 0)
        close(ev_fd);
    ev_fd = -1;
    pthread_mutex_unlock(&ev_mu);
}
