/*
 * evsrv.c: the event channel: a unix stream socket in the run directory
 * (a filesystem path, so it crosses network namespaces), one connection per
 * process, one line per event.  The server parses lines and hands them to
 * the run engine; for a SYNC line the engine answers "OK <seq>" only after
 * applying every fault the event triggers, which is what pins a fault to an
 * exact point of a program's execution.
 *
 * A client is: connected (no HELLO yet: task -1) -> identified (HELLO seen)
 * -> gone (EOF or error: the engine drops it).  A line of FL_EV_LINE_MAX
 * bytes or more (the protocol allows 4096 with its newline) is discarded
 * whole, however the reads split it (a SYNC answered all the same), never
 * parsed in part: its tail is not a line of its own.  Invariant:
 * every client accepted and not yet dropped is on the server's list, so
 * closing the server frees them all.  The line handling (fl_evsrv_lines)
 * touches no socket but to answer a bad SYNC, so that the fuzz target
 * harness/fuzz/fuzz_evline.c can feed it bytes directly.
 */
#include "harness/run/evsrv.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

struct fl_evsrv {
    int fd;
    char path[108];
    struct fl_evsrv_client *clients; /* accepted, not yet dropped */
    void (*free_user)(void *user);
};

bool fl_ev_kind_valid(const char *k)
{
    if (!*k)
        return false;
    for (; *k; k++)
        if (!((*k >= 'a' && *k <= 'z') || (*k >= '0' && *k <= '9') || *k == '_' || *k == '.' ||
              *k == '-'))
            return false;
    return true;
}

/* Splits "k=v k2="quoted \" v"" in place. */
static int parse_attrs(char *p, struct fl_ev *ev, char *err, size_t errlen)
{
    ev->nattrs = 0;
    while (*p) {
        while (*p == ' ')
            p++;
        if (!*p)
            break;
        char *key = p;
        while (*p && *p != '=' && *p != ' ')
            p++;
        if (*p != '=') {
            snprintf(err, errlen, "attribute '%.*s' has no '=value'", (int)(p - key), key);
            return -EINVAL;
        }
        *p++ = 0;
        char *val = p;
        if (*p == '"') {
            char *w = ++p;
            val = w;
            while (*p && *p != '"') {
                if (*p == '\\' && p[1])
                    p++;
                *w++ = *p++;
            }
            if (*p != '"') {
                snprintf(err, errlen, "attribute '%s': unterminated quoted value", key);
                return -EINVAL;
            }
            p++;
            *w = 0;
            if (*p && *p != ' ') {
                snprintf(err, errlen, "attribute '%s': text after closing quote", key);
                return -EINVAL;
            }
            if (*p)
                p++;
        } else {
            while (*p && *p != ' ')
                p++;
            if (*p)
                *p++ = 0;
        }
        if (ev->nattrs < FL_EV_MAX_ATTRS) {
            ev->keys[ev->nattrs] = key;
            ev->values[ev->nattrs] = val;
            ev->nattrs++;
        }
    }
    return 0;
}

int fl_ev_parse(char *line, struct fl_ev *ev, char *err, size_t errlen)
{
    memset(ev, 0, sizeof *ev);
    size_t n = strlen(line);
    while (n && (line[n - 1] == '\r' || line[n - 1] == ' '))
        line[--n] = 0;
    char *sp = strchr(line, ' ');
    char *rest = sp ? sp + 1 : line + n;
    if (sp)
        *sp = 0;
    if (!strcmp(line, "HELLO")) {
        ev->type = FL_EV_HELLO;
        ev->attrs = rest;
        return parse_attrs(rest, ev, err, errlen);
    }
    if (!strcmp(line, "SYNC")) {
        ev->type = FL_EV_SYNC;
        char *end;
        errno = 0;
        ev->seq = strtoul(rest, &end, 10);
        if (end == rest || (*end != ' ' && *end) || errno) {
            snprintf(err, errlen, "SYNC needs a sequence number");
            return -EINVAL;
        }
        rest = *end ? end + 1 : end;
    } else if (!strcmp(line, "EVENT")) {
        ev->type = FL_EV_EVENT;
    } else {
        snprintf(err, errlen, "unknown line type '%.20s' (expected HELLO, EVENT or SYNC)", line);
        return -EINVAL;
    }
    char *kind = rest;
    sp = strchr(rest, ' ');
    if (sp) {
        *sp = 0;
        rest = sp + 1;
    } else {
        rest = kind + strlen(kind);
    }
    if (!fl_ev_kind_valid(kind)) {
        snprintf(err, errlen, "bad event kind '%.40s' (" FL_EV_KIND_CHARS ")", kind);
        return -EINVAL;
    }
    ev->kind = kind;
    ev->attrs = rest;
    return parse_attrs(rest, ev, err, errlen);
}

const char *fl_ev_get(const struct fl_ev *ev, const char *key)
{
    for (size_t i = 0; i < ev->nattrs; i++)
        if (!strcmp(ev->keys[i], key))
            return ev->values[i];
    return NULL;
}

int fl_evsrv_open(struct fl_evsrv **out, const char *path, void (*free_user)(void *user), char *err,
                  size_t errlen)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof sa.sun_path) {
        snprintf(err, errlen, "event socket path %s is longer than %zu bytes (use a shorter --out)",
                 path, sizeof sa.sun_path - 1);
        return -ENAMETOOLONG;
    }
    strcpy(sa.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        int e = errno;
        snprintf(err, errlen, "socket(AF_UNIX): %s", strerror(e));
        return -e;
    }
    unlink(path);
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(fd, 512) < 0) {
        int e = errno;
        snprintf(err, errlen, "bind/listen %s: %s", path, strerror(e));
        close(fd);
        return -e;
    }
    struct fl_evsrv *s = calloc(1, sizeof *s);
    if (!s) {
        close(fd);
        return -ENOMEM;
    }
    s->fd = fd;
    s->free_user = free_user;
    snprintf(s->path, sizeof s->path, "%s", path);
    *out = s;
    return 0;
}

int fl_evsrv_fd(const struct fl_evsrv *s)
{
    return s->fd;
}

struct fl_evsrv_client *fl_evsrv_accept(struct fl_evsrv *s)
{
    int fd = accept4(s->fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0)
        return NULL;
    struct fl_evsrv_client *c = calloc(1, sizeof *c);
    if (!c) {
        close(fd);
        return NULL;
    }
    c->fd = fd;
    c->task = -1;
    c->next = s->clients;
    if (s->clients)
        s->clients->prev = c;
    s->clients = c;
    return c;
}

/* A line of FL_EV_LINE_MAX bytes or more, whole or its first part (at
 * start, NUL-terminated): reported; a SYNC is answered all the same, so that
 * its sender does not block. */
static void overlong(struct fl_evsrv_client *c, const char *start)
{
    unsigned long seq = 0;
    if (!strncmp(start, "SYNC ", 5)) {
        char *end;
        errno = 0;
        seq = strtoul(start + 5, &end, 10);
        if (end == start + 5 || *end != ' ' || errno)
            seq = 0;
    }
    fprintf(stderr,
            "faultline: event channel: host %s pid %d: line of %d bytes or more discarded: "
            "%.80s\n",
            c->host[0] ? c->host : "?", c->pid, FL_EV_LINE_MAX, start);
    if (seq)
        fl_evsrv_reply(c, seq);
}

void fl_evsrv_lines(struct fl_evsrv_client *c, fl_evsrv_fn fn, void *ctx)
{
    char *start = c->buf, *nl;
    while ((nl = memchr(start, '\n', c->len - (size_t)(start - c->buf)))) {
        *nl = 0;
        if (c->skip || (size_t)(nl - start) >= FL_EV_LINE_MAX) {
            /* the end of an overlong line, or one that came whole */
            if (!c->skip)
                overlong(c, start);
            c->skip = false;
            start = nl + 1;
            continue;
        }
        char raw[FL_EV_LINE_MAX]; /* the whole line: it is shorter */
        snprintf(raw, sizeof raw, "%s", start);
        struct fl_ev ev;
        char err[256];
        if (fl_ev_parse(start, &ev, err, sizeof err) == 0) {
            if (ev.type == FL_EV_HELLO) {
                const char *v;
                if ((v = fl_ev_get(&ev, "host")))
                    snprintf(c->host, sizeof c->host, "%s", v);
                if ((v = fl_ev_get(&ev, "job")))
                    snprintf(c->job, sizeof c->job, "%s", v);
                if ((v = fl_ev_get(&ev, "task")))
                    c->task = atoi(v);
                if ((v = fl_ev_get(&ev, "pid")))
                    c->pid = atoi(v);
                if (c->task < 0)
                    c->task = -2; /* identified, not a task */
            } else {
                /* the attrs as sent, for recording: same offset in raw */
                fn(ctx, c, &ev, raw + (ev.attrs - start));
            }
        } else {
            fprintf(stderr, "faultline: event channel: host %s pid %d: %s: %.80s\n",
                    c->host[0] ? c->host : "?", c->pid, err, raw);
            if (ev.type == FL_EV_SYNC && ev.seq)
                fl_evsrv_reply(c, ev.seq); /* never leave a sender hanging */
        }
        start = nl + 1;
    }
    size_t left = c->len - (size_t)(start - c->buf);
    if (c->skip || left >= FL_EV_LINE_MAX) {
        /* an overlong line, or more of it: discarded up to its newline */
        if (!c->skip)
            overlong(c, start);
        c->skip = true;
        c->len = 0;
        return;
    }
    memmove(c->buf, start, left);
    c->len = left;
}

int fl_evsrv_read(struct fl_evsrv *s, struct fl_evsrv_client *c, fl_evsrv_fn fn, void *ctx)
{
    (void)s;
    for (;;) {
        ssize_t n = read(c->fd, c->buf + c->len, sizeof c->buf - c->len - 1);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN)
                return 0;
            return -EPIPE;
        }
        if (n == 0)
            return -EPIPE;
        c->len += (size_t)n;
        c->buf[c->len] = 0;
        fl_evsrv_lines(c, fn, ctx);
    }
}

void fl_evsrv_reply(struct fl_evsrv_client *c, unsigned long seq)
{
    char buf[64];
    int n = snprintf(buf, sizeof buf, "OK %lu\n", seq);
    if (send(c->fd, buf, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
        /* the client died (often: killed by the very fault it triggered) */
    }
}

void fl_evsrv_drop(struct fl_evsrv *s, struct fl_evsrv_client *c)
{
    if (!c)
        return;
    if (c->prev)
        c->prev->next = c->next;
    else
        s->clients = c->next;
    if (c->next)
        c->next->prev = c->prev;
    if (s->free_user && c->user)
        s->free_user(c->user);
    close(c->fd);
    free(c);
}

void fl_evsrv_drain(struct fl_evsrv *s, fl_evsrv_fn fn, void *ctx)
{
    while (fl_evsrv_accept(s))
        ;
    for (struct fl_evsrv_client *c = s->clients; c; c = c->next)
        fl_evsrv_read(s, c, fn, ctx); /* to EAGAIN or EOF; fl_evsrv_close drops them */
}

void fl_evsrv_close(struct fl_evsrv *s)
{
    if (!s)
        return;
    while (s->clients)
        fl_evsrv_drop(s, s->clients);
    close(s->fd);
    unlink(s->path);
    free(s);
}

/* ---- client --------------------------------------------------------------- */

int fl_evcli_connect(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (!path || strlen(path) >= sizeof sa.sun_path)
        return -EINVAL;
    strcpy(sa.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    char hello[512];
    const char *h = getenv("FAULTLINE_HOST"), *j = getenv("FAULTLINE_JOB"),
               *t = getenv("FAULTLINE_TASK");
    int n = snprintf(hello, sizeof hello, "HELLO host=%s job=%s task=%s pid=%d\n",
                     h && *h ? h : "-", j && *j ? j : "-", t && *t ? t : "-1", (int)getpid());
    if (write(fd, hello, (size_t)n) != n) {
        int e = errno;
        close(fd);
        return -e;
    }
    return fd;
}

int fl_evcli_send(int fd, const char *kind, const char *attrs, bool sync, unsigned long seq)
{
    char line[FL_EV_LINE_MAX];
    int n;
    if (sync)
        n = snprintf(line, sizeof line, "SYNC %lu %s%s%s\n", seq, kind, attrs && *attrs ? " " : "",
                     attrs ? attrs : "");
    else
        n = snprintf(line, sizeof line, "EVENT %s%s%s\n", kind, attrs && *attrs ? " " : "",
                     attrs ? attrs : "");
    if (n >= (int)sizeof line)
        return -E2BIG;
    if (write(fd, line, (size_t)n) != n)
        return -errno;
    if (!sync)
        return 0;
    char ans[64];
    size_t got = 0;
    while (got < sizeof ans - 1) {
        ssize_t r = read(fd, ans + got, 1);
        if (r <= 0)
            return r == 0 ? -EPIPE : -errno;
        if (ans[got++] == '\n')
            break;
    }
    ans[got] = 0;
    return strncmp(ans, "OK ", 3) == 0 ? 0 : -EPROTO;
}
