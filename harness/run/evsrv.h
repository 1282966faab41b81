/*
 * evsrv.h: the harness side of the event channel (docs/events.md has the
 * wire protocol; docs/architecture.md, "The event channel", its place in a run).
 */
#ifndef FL_EVSRV_H
#define FL_EVSRV_H

#include <stdbool.h>
#include <stddef.h>

#define FL_EV_MAX_ATTRS 32
#define FL_EV_LINE_MAX 4096

enum fl_ev_type { FL_EV_HELLO = 1, FL_EV_EVENT, FL_EV_SYNC };

/* One parsed line.  Strings point into the line buffer given to the parser. */
struct fl_ev {
    enum fl_ev_type type;
    unsigned long seq; /* SYNC */
    const char *kind;  /* EVENT, SYNC */
    const char *attrs; /* raw text after the kind ("" when none) */
    size_t nattrs;
    const char *keys[FL_EV_MAX_ATTRS];
    const char *values[FL_EV_MAX_ATTRS]; /* unquoted */
};

/* Parses one line (without its newline) in place.  Returns 0 or -EINVAL with
 * a message in err. */
int fl_ev_parse(char *line, struct fl_ev *ev, char *err, size_t errlen);
/* Value of attribute key, or NULL. */
const char *fl_ev_get(const struct fl_ev *ev, const char *key);

struct fl_evsrv;
struct fl_evsrv_client {
    int fd;
    char host[64], job[64];
    int task; /* -1 until HELLO */
    int pid;
    char buf[FL_EV_LINE_MAX * 2];
    size_t len;
    bool skip;  /* discarding the rest of a line of FL_EV_LINE_MAX bytes or more */
    void *user; /* for the engine: freed with free_user (see _open) */
    struct fl_evsrv_client *prev, *next; /* the server's list of clients */
};

typedef void (*fl_evsrv_fn)(void *ctx, struct fl_evsrv_client *c, const struct fl_ev *ev,
                            char *raw_attrs_copy);

/* Listens on a unix stream socket at path.  free_user (may be NULL) is
 * called with a client's user pointer when the client is dropped, by
 * fl_evsrv_drop or by fl_evsrv_close (which drops every client left). */
int fl_evsrv_open(struct fl_evsrv **out, const char *path, void (*free_user)(void *user), char *err,
                  size_t errlen);
int fl_evsrv_fd(const struct fl_evsrv *s);
/* Accepts one pending connection; NULL when none. */
struct fl_evsrv_client *fl_evsrv_accept(struct fl_evsrv *s);
/* Reads what the client sent and calls fn once per complete line.  Returns
 * 0, or -EPIPE when the client is gone (then free it with _drop). */
int fl_evsrv_read(struct fl_evsrv *s, struct fl_evsrv_client *c, fl_evsrv_fn fn, void *ctx);
/* fl_evsrv_read's line handling, apart from the socket: c->buf holds the
 * c->len bytes (NUL-terminated) the client sent that are not handled yet;
 * every complete line among them is handled (a HELLO identifies c, an
 * EVENT or SYNC goes to fn, a line that does not parse is reported on
 * stderr, and a bad SYNC answered so that its sender does not hang), and
 * the unfinished rest is kept at the start of c->buf.  A line of
 * FL_EV_LINE_MAX bytes or more is discarded whole (a SYNC answered all the
 * same), however it was split.  The event channel's
 * fuzz target (harness/fuzz/fuzz_evline.c) feeds it directly. */
void fl_evsrv_lines(struct fl_evsrv_client *c, fl_evsrv_fn fn, void *ctx);
/* For the end of a run, once no sender is left: accepts every pending
 * connection and reads every client to the end of what it sent (what a
 * process wrote just before it exited is in the kernel's buffers, possibly
 * on a connection not accepted yet).  Clients accepted here have user NULL. */
void fl_evsrv_drain(struct fl_evsrv *s, fl_evsrv_fn fn, void *ctx);
/* Answers a SYNC (ignores a client that is gone). */
void fl_evsrv_reply(struct fl_evsrv_client *c, unsigned long seq);
/* Unlinks a client, closes its socket, frees it (and its user pointer). */
void fl_evsrv_drop(struct fl_evsrv *s, struct fl_evsrv_client *c);
/* Drops every client still connected, closes and unlinks the socket. */
void fl_evsrv_close(struct fl_evsrv *s);

/* Client side (for `faultline emit` and tests): connects to $FAULTLINE_EVENTS,
 * says HELLO from the FAULTLINE_* variables.  Returns fd, or -errno. */
int fl_evcli_connect(const char *path);
/* Sends an event; with sync, waits for the answer.  attrs may be NULL. */
int fl_evcli_send(int fd, const char *kind, const char *attrs, bool sync, unsigned long seq);

/* An event kind: one or more of FL_EV_KIND_CHARS.  The one rule for the
 * event channel and for scenario files (triggers, expected events). */
#define FL_EV_KIND_CHARS "lower-case letters, digits, '.', '_', '-'"
bool fl_ev_kind_valid(const char *kind);

#endif
