/*
 * fuzz_evline.c: libFuzzer target for the event channel's line handling
 * (harness/run/evsrv.c: fl_evsrv_lines and the parser under it,
 * fl_ev_parse), the bytes a task writes to the harness's event socket.  An
 * input is one byte C, then the bytes a client sends.  They are fed to one
 * client twice: as reads of the most the client's buffer takes, and as
 * reads of sizes drawn from C (1 to 64 bytes, or as the first way when C is
 * 0), as the kernel may split them.  Every event handed on is checked (a
 * valid kind, its attributes within bounds, the raw attribute text re-parsed
 * to the same attributes), and the two feeds must hand on the same events
 * and identify the client the same way: any crash, sanitizer report or
 * abort() is a bug.  Built and run by ci/fuzz (`make fuzz`, target evline).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/run/evsrv.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* What a feed handed on, one record per event, to compare the two feeds. */
struct log {
    char *p;
    size_t len, cap;
};

static void log_put(struct log *l, const void *p, size_t n)
{
    if (l->len + n + 1 > l->cap) {
        size_t cap = l->cap ? l->cap : 1024;
        while (cap < l->len + n + 1)
            cap *= 2;
        char *q = realloc(l->p, cap);
        if (!q)
            abort();
        l->p = q;
        l->cap = cap;
    }
    memcpy(l->p + l->len, p, n);
    l->len += n;
}

static void log_str(struct log *l, const char *s)
{
    log_put(l, s, strlen(s) + 1);
}

static void on_event(void *ctx, struct fl_evsrv_client *c, const struct fl_ev *ev, char *raw)
{
    struct log *l = ctx;
    if (ev->type != FL_EV_EVENT && ev->type != FL_EV_SYNC)
        abort(); /* HELLO lines identify the client, they are not events */
    if (!ev->kind || !fl_ev_kind_valid(ev->kind) || ev->nattrs > FL_EV_MAX_ATTRS)
        abort();
    size_t rl = strlen(raw); /* ASan: raw must be a string of its own */
    if (memchr(raw, '\n', rl))
        abort();
    /* the raw text, parsed again, gives the same attributes */
    size_t kl = strlen(ev->kind);
    char *again = malloc(kl + rl + 8);
    if (!again)
        abort();
    snprintf(again, kl + rl + 8, "EVENT %s %s", ev->kind, raw);
    struct fl_ev ev2;
    char err[256];
    if (fl_ev_parse(again, &ev2, err, sizeof err) != 0 || ev2.nattrs != ev->nattrs)
        abort();
    for (size_t i = 0; i < ev->nattrs; i++)
        if (strcmp(ev->keys[i], ev2.keys[i]) || strcmp(ev->values[i], ev2.values[i]))
            abort();
    free(again);
    char head[64];
    snprintf(head, sizeof head, "%d %lu %zu %d", (int)ev->type, ev->seq, ev->nattrs, c->task);
    log_str(l, head);
    log_str(l, ev->kind);
    log_str(l, raw);
    for (size_t i = 0; i < ev->nattrs; i++) {
        log_str(l, ev->keys[i]);
        log_str(l, ev->values[i]);
    }
}

/* Feeds data to a fresh client in reads of at most step bytes (0: as much
 * as the buffer takes, as fl_evsrv_read asks for), sizes varied by seed. */
static void feed(const uint8_t *data, size_t size, unsigned seed, struct log *l)
{
    struct fl_evsrv_client *c = calloc(1, sizeof *c);
    if (!c)
        abort();
    c->fd = -1; /* a bad SYNC's answer goes nowhere */
    c->task = -1;
    uint32_t rng = seed * 2654435761u + 1;
    size_t off = 0;
    while (off < size) {
        size_t room = sizeof c->buf - c->len - 1, k = size - off;
        if (k > room)
            k = room;
        if (seed) {
            rng = rng * 1103515245u + 12345u;
            size_t want = 1 + ((rng >> 16) % 64);
            if (k > want)
                k = want;
        }
        memcpy(c->buf + c->len, data + off, k);
        c->len += k;
        c->buf[c->len] = 0;
        off += k;
        fl_evsrv_lines(c, on_event, l);
        if (c->len >= sizeof c->buf)
            abort();
    }
    char who[200];
    snprintf(who, sizeof who, "%s|%s|%d|%d", c->host, c->job, c->task, c->pid);
    log_str(l, who);
    free(c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    unsigned seed = data[0];
    struct log whole = {0}, split = {0};
    feed(data + 1, size - 1, 0, &whole);
    if (seed) {
        feed(data + 1, size - 1, seed, &split);
        if (whole.len != split.len || memcmp(whole.p, split.p, whole.len)) {
            fprintf(stderr, "fuzz_evline: the events depend on how the bytes were split\n");
            abort();
        }
    }
    free(whole.p);
    free(split.p);
    return 0;
}
