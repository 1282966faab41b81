/*
 * psrt.h: interfaces shared by psrt's modules (the ps/worker training
 * runtime under test, runtime/psrt/README.md).  Not a public API: the
 * harness talks to psrt through its command line, its exit status, its
 * output and the event channel (docs/events.md); only the checkpoint files
 * it writes are shared, through runtime/ckpt.
 *
 * Module map (one file each, exported names prefixed psrt_<module>_):
 *   flags.c     command line, --help               psrt_flags_*
 *   frame.c     wire frames, byte buffers, crc     psrt_frame_*, psrt_buf_*
 *   rpc.c       TCP client and server              psrt_conn_*, psrt_server_*
 *   stream.c    one request streamed to many ps    psrt_stream_*
 *   pool.c      bounded thread pool, SchedClosure  psrt_pool_*, psrt_sched_closure
 *   optim.c     SGD, Adagrad, FTRL, Adam           psrt_optim_*
 *   table.c     sparse rows: uint64 -> row hash    psrt_table_*
 *   split.c     keys split by ps                   psrt_split_keys*
 *   data.c      rng, synthetic data                psrt_rng_*, psrt_data_*
 *   models.c    the model registry: name -> model  psrt_model_find, psrt_model_init
 *   model.c     variable placement, batch keys     psrt_model_*, psrt_batch_*
 *   model_*.c   linear, softmax, sparse_lr, bench  psrt_model_<name>
 *   tensors.c   tensor lists moved between tasks   psrt_tl_*
 *   state.c     `checkpoint` state, kept checkpoints psrt_state_*, psrt_ckpt_prefix
 *   ps.c        the ps task: variables, handlers   psrt_ps_*
 *   worker.c    the worker task and the chief      psrt_worker_*
 *   calls.c     a worker's calls to its ps tasks   psrt_worker_calls, psrt_worker_ping
 *   save_legacy.c, save_robust.c, restore.c, export.c  checkpoint protocols
 *   predict.c   `psrt predict`                     psrt_predict_*
 *   events.c    event channel client               psrt_ev_*
 *   fault.c     libfiu fault points, errors        psrt_fault_*, psrt_err_*
 */
#ifndef PSRT_H
#define PSRT_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/uio.h>

/* ---- errors --------------------------------------------------------------
 * Inside a process: 0 / negative errno.  Across processes and to people: a
 * psrt_err holding the errno and a TensorFlow-shaped message
 * ("NotFoundError: PATH; No such file or directory"). */
#define PSRT_MSG_MAX 4096
struct psrt_err {
    int code;               /* negative errno, 0 = ok */
    char msg[PSRT_MSG_MAX]; /* "<Class>: text" */
    char call[16];          /* the failing system call of a runtime/ckpt error
                               ("write", "rename"...), or "" (not sent across) */
};
void psrt_err_set(struct psrt_err *e, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* "NotFoundError: PATH; No such file or directory" for a failed call on PATH. */
void psrt_err_path(struct psrt_err *e, int code, const char *path);
/* TensorFlow's Python error class for a negative errno. */
const char *psrt_err_class(int code);
/* e from a runtime/ckpt error: its TensorFlow-shaped text (ckpt_err_tf)
 * and code (or ce's own code when code is 0, -EIO when neither is set). */
struct ckpt_err;
void psrt_err_from_ckpt(struct psrt_err *e, int code, const struct ckpt_err *ce);
/* Appends " (CALL)" to e->msg when the failing call is known: where the
 * text need not be TensorFlow's own (the robust protocol). */
void psrt_err_add_call(struct psrt_err *e);

/* Logging: "psrt <job>:<task>: message" on stderr, one line. */
void psrt_log_init(const char *job, int task);
void psrt_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
double psrt_now(void); /* CLOCK_MONOTONIC seconds */
/* PSRT_BENCH_DEBUG is set: timing lines for the benchmarks (looked up once). */
bool psrt_bench_debug(void);

/* ---- flags ------------------------------------------------------------- */
enum { PSRT_LEGACY = 0, PSRT_ROBUST = 1 };
enum { PSRT_POOL = 0, PSRT_PER_REQUEST = 1 };

struct psrt_hostport {
    char host[256];
    int port;
};

struct psrt_flags {
    char job[16];
    int task;
    struct psrt_hostport *ps;
    int nps;
    struct psrt_hostport *workers;
    int nworkers;
    char train_dir[1024];
    char model[32];
    char optimizer[32];
    int batch_size;
    double learning_rate;
    long long max_steps;
    long long save_steps; /* 0 = off */
    double save_secs;     /* 0 = off */
    int max_to_keep;
    int max_failed_saves;     /* robust: the chief stops at this many in a row */
    double failed_saves_secs; /* robust: ...and the first of them this long ago */
    double finish_retry_secs; /* robust: final save and export retried this long */
    int protocol;             /* PSRT_LEGACY / PSRT_ROBUST */
    int rpc_threads;          /* PSRT_POOL / PSRT_PER_REQUEST */
    int pool_threads;
    char export_dir[1024]; /* "" = no export */
    int export_version;
    uint64_t seed;
    double rpc_timeout;       /* seconds, one call */
    double connect_timeout;   /* seconds, first contact with a peer */
    double reconnect_timeout; /* seconds, a peer lost during training */
    bool ps_exit_on_chief_done;
    bool sharded_save;       /* legacy: Saver(sharded=True) (default) or False */
    long long log_every;     /* chief logs/reports loss every N of its steps */
    int64_t sparse_features; /* hashed feature space of sparse_lr */
    int64_t dense_floats;    /* bench_dense: floats per variable */
    double step_delay;       /* seconds each worker sleeps per step (tests) */
};

/* Parses argv[0..argc) (argv[0] is not a flag).  0, or -EINVAL with a
 * one-line message in err. */
int psrt_flags_parse(struct psrt_flags *f, int argc, char **argv, char *err, size_t errlen);
void psrt_flags_free(struct psrt_flags *f);
void psrt_flags_usage(FILE *out);
/* The timeout of calls that move a whole shard or wait for a disk (saves,
 * restores, snapshots) and of a ps's reply writes: 10 x --rpc_timeout_secs. */
double psrt_flags_bulk_timeout(const struct psrt_flags *f);
/* The model's size parameter: --dense_floats for bench_dense, else
 * --sparse_features. */
int64_t psrt_flags_features(const struct psrt_flags *f);
/* The variable layout the model flags give, in words ("model sparse_lr over 2 ps
 * tasks, 33554432 features"): every task must agree on it.  A ps sends its
 * own in its Ping reply; a worker compares it with its own. */
void psrt_flags_layout(const struct psrt_flags *f, char *buf, size_t len);
/* "host:port" list parser (exported for tests). */
int psrt_flags_hostports(const char *s, struct psrt_hostport **out, int *n);

/* ---- frames and buffers (frame.c) --------------------------------------
 * A frame: 40-byte header, then len payload bytes.
 *   0 magic "PSRT" | 4 version | 5 kind | 6 op (u16) | 8 status (i32)
 *  12 flags (u32)  | 16 id (u64) | 24 len (u64) | 32 payload crc32c | 36 header crc32c
 * All little endian.  The header crc covers bytes 0..35. */
#define PSRT_FRAME_MAGIC 0x54525350u /* "PSRT" */
#define PSRT_FRAME_VERSION 1
#define PSRT_FRAME_HDR 40
#ifndef PSRT_FRAME_MAX /* the RPC fuzz target builds with a smaller one (ci/fuzz) */
#define PSRT_FRAME_MAX (8ull << 30)
#endif
/* PSRT_KIND_STREAM: a request whose payload follows in segments (below), so
 * that a sender can start before it knows the whole payload; its len field
 * is only the sender's estimate of the total (the receiver reserves that
 * much), its payload crc field is 0.  The receiver gets the segments'
 * bytes concatenated, exactly as if one frame had carried them. */
enum { PSRT_KIND_REQ = 1, PSRT_KIND_RESP = 2, PSRT_KIND_STREAM = 3 };

struct psrt_frame_hdr {
    uint8_t version;
    uint8_t kind;
    uint16_t op;
    int32_t status;
    uint32_t flags;
    uint64_t id;
    uint64_t len;
    uint32_t pcrc;
};
uint32_t psrt_crc32c(uint32_t crc, const void *p, size_t n); /* extend; 0 = empty */
/* malloc for big buffers (free() releases it); one place to tune them. */
void *psrt_alloc_big(size_t n);
void psrt_frame_encode(uint8_t out[PSRT_FRAME_HDR], const struct psrt_frame_hdr *h);
/* -EPROTO (magic/version/kind), -EBADMSG (header crc), -EMSGSIZE (len > max). */
int psrt_frame_decode(const uint8_t in[PSRT_FRAME_HDR], struct psrt_frame_hdr *h, uint64_t max_len);

/* A segment of a streamed request: a 16-byte header, then len bytes.
 *   0 len (u32) | 4 crc32c of the len bytes | 8 seq (u32: 0, 1, 2... within
 *   the request) | 12 header crc32c (of bytes 0..11)
 * A segment of len 0 ends the request.  Decoding: -EBADMSG (header crc),
 * -EPROTO (a segment out of sequence: lost, repeated or reordered). */
#define PSRT_SEG_HDR 16
void psrt_seg_encode(uint8_t out[PSRT_SEG_HDR], uint32_t len, uint32_t crc, uint32_t seq);
int psrt_seg_decode(const uint8_t in[PSRT_SEG_HDR], uint32_t *len, uint32_t *crc, uint32_t seq);

struct psrt_buf {
    uint8_t *p;
    size_t len, cap, off; /* off: read cursor */
    bool bad;             /* a get ran past the end */
};
void psrt_buf_free(struct psrt_buf *b);
void psrt_buf_reset(struct psrt_buf *b);
int psrt_buf_reserve(struct psrt_buf *b, size_t extra);
void psrt_buf_put(struct psrt_buf *b, const void *p, size_t n);
void psrt_buf_u32(struct psrt_buf *b, uint32_t v);
void psrt_buf_u64(struct psrt_buf *b, uint64_t v);
void psrt_buf_str(struct psrt_buf *b, const char *s);
void psrt_buf_align8(struct psrt_buf *b);
/* Getters: on underflow set b->bad and return 0 / NULL. */
uint32_t psrt_buf_get_u32(struct psrt_buf *b);
uint64_t psrt_buf_get_u64(struct psrt_buf *b);
const void *psrt_buf_get(struct psrt_buf *b, size_t n);
/* Copies a string (u32 length + bytes) into out (NUL-terminated, truncation = bad). */
int psrt_buf_get_str(struct psrt_buf *b, char *out, size_t outlen);
void psrt_buf_skip_align8(struct psrt_buf *b);

/* ---- RPC (rpc.c) -------------------------------------------------------- */
enum psrt_op {
    PSRT_OP_PING = 1,   /* -> incarnation u64, ready u32, step u64, task u32, layout str */
    PSRT_OP_INIT,       /* chief: initialise every variable */
    PSRT_OP_PULL,       /* dense values + sparse rows; may reserve a step */
    PSRT_OP_PUSH,       /* gradients, applied by the optimizer */
    PSRT_OP_SAVE_SHARD, /* legacy: SaveV2 of this ps's variables to a path */
    PSRT_OP_MERGE,      /* legacy: MergeV2Checkpoints on this ps */
    PSRT_OP_RESTORE,    /* restore from this ps's own disk (legacy or robust) */
    PSRT_OP_SNAPSHOT,   /* all of this ps's tensors, serialised */
    PSRT_OP_RSAVE,      /* robust: write shard locally, durable; return it */
    PSRT_OP_RCOMMIT,    /* robust: mark a step committed in the local state */
    PSRT_OP_RQUERY,     /* robust: committed steps held locally */
    PSRT_OP_LOAD,       /* load serialised tensors (restore from a replica) */
    PSRT_OP_SHUTDOWN,   /* chief done: exit 0 */
    PSRT_OP_ECHO,       /* bench/tests: returns the payload */
    PSRT_OP_BENCH_SINK, /* bench: discards the payload */
    PSRT_OP_OPEN,       /* chief: the model is ready, every worker may train */
    PSRT_OP_RABORT,     /* robust: drop the local copy of an abandoned save */
    PSRT_OP_MAX
};
const char *psrt_op_name(int op);

/* Client side: one TCP connection to one peer, one call at a time. */
struct psrt_conn;
struct psrt_conn *psrt_conn_new(const char *host, int port, const char *peer_name);
void psrt_conn_free(struct psrt_conn *c);
const char *psrt_conn_peer(const struct psrt_conn *c); /* "ps task 1 at h:p" */
/* Connects (retrying with backoff until timeout seconds pass); 0 or -errno
 * and err naming the peer. */
int psrt_conn_connect(struct psrt_conn *c, double timeout, struct psrt_err *err);
void psrt_conn_close(struct psrt_conn *c);
bool psrt_conn_is_open(const struct psrt_conn *c);
/* One request/response.  iov: payload pieces.  resp receives the payload;
 * *status the peer's status (its message is the payload when status != 0).
 * Returns 0 (then check *status), or a transport error (-ETIMEDOUT,
 * -ECONNRESET, -EBADMSG...) with err set; the connection is then closed.
 * timeout (here and below) is an idle timeout in seconds: -ETIMEDOUT only
 * when that long passes without a byte moving (the peer silent: busy or
 * gone), never because a transfer that keeps moving is long. */
int psrt_conn_call(struct psrt_conn *c, int op, uint32_t flags, const struct iovec *iov, int niov,
                   double timeout, struct psrt_buf *resp, int32_t *status, struct psrt_err *err);
/* The two halves of a call, to overlap calls to several peers. */
int psrt_conn_send(struct psrt_conn *c, int op, uint32_t flags, const struct iovec *iov, int niov,
                   double timeout, struct psrt_err *err);
int psrt_conn_recv(struct psrt_conn *c, double timeout, struct psrt_buf *resp, int32_t *status,
                   struct psrt_err *err);
/* A reply read in pieces, for payloads too big to hold: _begin reads the
 * header (*len payload bytes, *status); _part reads the next n of them
 * into buf (the caller takes exactly *len in all); _end checks the payload
 * crc, which covers every piece: until it returns 0 the bytes are not
 * verified.  timeout (_begin's) is the idle timeout of every piece.  Any
 * error closes c and names the peer in err. */
int psrt_conn_recv_begin(struct psrt_conn *c, double timeout, uint64_t *len, int32_t *status,
                         struct psrt_err *err);
int psrt_conn_recv_part(struct psrt_conn *c, void *buf, size_t n, struct psrt_err *err);
/* The same, and *crc = crc32c of the n bytes received (computed once, for
 * the frame's check and the caller's). */
int psrt_conn_recv_part_crc(struct psrt_conn *c, void *buf, size_t n, uint32_t *crc,
                            struct psrt_err *err);
int psrt_conn_recv_end(struct psrt_conn *c, struct psrt_err *err);

/* Several calls at once: every request is sent and every reply read as the
 * sockets allow (poll), so transfers to and from several ps overlap; calls
 * on the same connection are pipelined in array order (each needs its own
 * resp buffer).  Per call: rc (transport; the connection is then closed),
 * status and *resp as psrt_conn_call.  Returns the first rc, or 0.  At most
 * 256 calls.  timeout: idle, over all of them (any byte moving on any
 * connection restarts it). */
#define PSRT_MULTI_IOV 12
struct psrt_mcall {
    struct psrt_conn *c;
    int op;
    uint32_t flags;
    const struct iovec *iov;
    int niov;
    struct psrt_buf *resp;
    int32_t status;
    int rc;
    struct psrt_err *err;
};
int psrt_conn_multi(struct psrt_mcall *m, int n, double timeout);

/* One request streamed to n connections at once (stream.c): _begin sends
 * each a PSRT_KIND_STREAM header (size_hint[i]: the expected payload bytes,
 * which the receiver reserves; NULL for none) and starts the sender
 * thread; _put checksums one segment of connection i's payload (at most
 * PSRT_STREAM_IOV pieces, whose bytes must stay valid until _end; at most
 * max_puts per connection) and queues it for the sender, without waiting;
 * _end ends every request, waits until all is sent and reads every reply
 * into resp[i], status[i].  A failure of connection i sets err[i] naming
 * the peer (err: n entries, given to _begin), closes it by _end, and is
 * returned by _put and _end (the first).  idle: idle timeout in seconds,
 * as above.  _free also stops a stream that was never ended. */
#define PSRT_STREAM_IOV 4
struct psrt_stream;
int psrt_stream_begin(struct psrt_stream **s, struct psrt_conn **c, int n, int op, uint32_t flags,
                      const uint64_t *size_hint, size_t max_puts, double idle,
                      struct psrt_err *err);
int psrt_stream_put(struct psrt_stream *s, int i, const struct iovec *iov, int niov);
int psrt_stream_end(struct psrt_stream *s, struct psrt_buf **resp, int32_t *status);
/* Connection i's transport result: 0, or what failed it (err[i] says). */
int psrt_stream_rc(const struct psrt_stream *s, int i);
void psrt_stream_free(struct psrt_stream *s);
/* for stream.c: the socket (-1 when closed); a request id */
int psrt_conn_fd(const struct psrt_conn *c);
uint64_t psrt_conn_take_id(struct psrt_conn *c);

/* Server side. A handler gets the request payload and fills the reply
 * payload; a non-zero status sends the reply payload as an error message. */
struct psrt_reply {
    int32_t status;
    struct psrt_buf out;
    int exit_after; /* handler asks the server to stop after sending */
    /* Zero-copy replies: when next > 0 the payload is ext[0..next) (which
     * may point into out) instead of out; done(done_arg) runs after the
     * reply was sent (or failed). */
    struct iovec ext[64];
    int next;
    void (*done)(void *);
    void *done_arg;
};
typedef void (*psrt_handler)(void *ctx, int op, uint32_t flags, struct psrt_buf *req,
                             struct psrt_reply *rep);
struct psrt_server;
/* Listens on port (0 = any, see psrt_server_port); mode PSRT_POOL with
 * nthreads handler threads, or PSRT_PER_REQUEST (a detached thread per
 * request, abort() when it cannot be created). */
int psrt_server_start(struct psrt_server **sp, const char *bind_host, int port, int mode,
                      int nthreads, psrt_handler h, void *ctx, struct psrt_err *err);
int psrt_server_port(const struct psrt_server *s);
/* Idle timeout reading a request or writing a reply (default 600 s): a
 * peer that stalls mid-frame, or does not read its reply, releases its
 * handler thread after it. */
void psrt_server_set_timeout(struct psrt_server *s, double secs);
/* Blocks until a handler set exit_after.  The server is never torn down:
 * the process exits with it. */
void psrt_server_wait(struct psrt_server *s);
/* Number of requests served (tests). */
uint64_t psrt_server_served(const struct psrt_server *s);
/* Connections accepted and not closed yet (a peer's close is seen when its
 * connection is next served). */
int psrt_server_open_conns(const struct psrt_server *s);

/* ---- threads (pool.c) ---------------------------------------------------- */
struct psrt_pool;
int psrt_pool_create(struct psrt_pool **pp, int nthreads, int queue_cap);
/* Queues fn(arg); blocks while the queue is full. */
void psrt_pool_submit(struct psrt_pool *p, void (*fn)(void *), void *arg);
void psrt_pool_destroy(struct psrt_pool *p); /* runs what is queued, joins */
/* TensorFlow's PosixEnv::SchedClosure: one new detached thread for fn(arg).
 * When the thread cannot be created, prints why and abort()s (S003). */
void psrt_sched_closure(void (*fn)(void *), void *arg);

/* A countdown latch for fan-out calls. */
struct psrt_latch;
struct psrt_latch *psrt_latch_new(int n);
void psrt_latch_done(struct psrt_latch *l);
void psrt_latch_wait_free(struct psrt_latch *l);

/* ---- optimizers (optim.c) -------------------------------------------------- */
enum { PSRT_OPT_SGD, PSRT_OPT_ADAGRAD, PSRT_OPT_FTRL, PSRT_OPT_ADAM };
struct psrt_optim {
    int kind;
    float lr;
    float init_accum;        /* Adagrad 0.1, FTRL 0.1 */
    float l1, l2, lr_power;  /* FTRL */
    float beta1, beta2, eps; /* Adam */
};
int psrt_optim_parse(const char *name); /* -1 unknown */
void psrt_optim_default(struct psrt_optim *o, int kind, float lr);
int psrt_optim_nslots(int kind);
const char *psrt_optim_slot_suffix(int kind, int i); /* "Adagrad", "Ftrl_1", ... */
float psrt_optim_slot_init(const struct psrt_optim *o, int i);
/* Adam's non-slot state per variable: beta1^t, beta2^t (powers before this
 * step); other optimizers ignore pw.  pw updated in place. */
struct psrt_adam_pow {
    float b1p, b2p;
};
/* Dense: n elements of w with slots s[0..nslots) and gradient g. */
void psrt_optim_apply(const struct psrt_optim *o, float *w, float *const *s, const float *g,
                      int64_t n, struct psrt_adam_pow *pw);
/* One row of width n (sparse apply: lazy for Adam, uses the table's powers). */
void psrt_optim_apply_row(const struct psrt_optim *o, float *w, float *const *s, const float *g,
                          int64_t n, const struct psrt_adam_pow *pw);
void psrt_optim_advance(const struct psrt_optim *o, struct psrt_adam_pow *pw);

/* ---- sparse rows (table.c) ------------------------------------------------
 * Open addressing, linear probing, uint64 key -> {row, value}; width-1
 * values inline in the entry, wider values and optimizer slots in arrays
 * indexed by row.  Grows without a full rehash: while old is set, its
 * slots from omig on are still to move into e (table.c). */
struct psrt_entry {
    uint64_t key; /* ~key: 0 is a free slot */
    uint32_t row;
    float v; /* the value when width == 1 */
};
struct psrt_table {
    struct psrt_entry *e;
    uint64_t mask; /* nslots - 1 */
    int bits;
    struct psrt_entry *old; /* growing: the previous array (2^obits slots) */
    int obits;
    uint64_t omig; /* old slots [0, omig) have moved into e */
    uint64_t nrows, rowcap;
    int width, nslots_opt;
    float *val;     /* nrows * width (width > 1 only) */
    float *slot[2]; /* nrows * width per optimizer slot */
    bool has_empty_key;
    struct psrt_entry empty;
    float slot_init[2];
    void *scratch; /* bucketed batches */
    size_t scratch_cap;
};
#define PSRT_TABLE_EMPTY UINT64_MAX
/* Old slots moved into the new array per upsert while the table grows
 * (table.c: why this many). */
#define PSRT_TABLE_MOVE_STEP 8
int psrt_table_init(struct psrt_table *t, int width, int nslots, const float *slot_init,
                    uint64_t expect);
void psrt_table_free(struct psrt_table *t);
void psrt_table_clear(struct psrt_table *t);
/* Row of key, or -1. */
int64_t psrt_table_find(const struct psrt_table *t, uint64_t key);
/* Value (width floats) of key, or NULL. */
const float *psrt_table_lookup(const struct psrt_table *t, uint64_t key);
/* Value of key, created (zeros, initial slots) when absent; *row gets its
 * row.  NULL when out of memory. */
float *psrt_table_insert(struct psrt_table *t, uint64_t key, uint32_t *row);
/* Batched, with prefetching: out[i*width..] = value of keys[i] (0 if absent). */
void psrt_table_pull(const struct psrt_table *t, const uint64_t *keys, size_t n, float *out);
/* Batched apply of gradients grads[i*width..] to keys[i] (rows created). */
int psrt_table_push(struct psrt_table *t, const struct psrt_optim *o, const uint64_t *keys,
                    const float *grads, size_t n, const struct psrt_adam_pow *pw);
/* The same over blocks of pairs, applied as one batch in block order (a
 * streamed push arrives in blocks: ps.c). */
struct psrt_kv {
    const uint64_t *keys;
    const float *vals; /* n * width */
    size_t n;
};
int psrt_table_push_blocks(struct psrt_table *t, const struct psrt_optim *o,
                           const struct psrt_kv *blk, size_t nblk, const struct psrt_adam_pow *pw);
/* Every row sorted by key: malloc'd keys[n], vals[n*width], slots[s][n*width]. */
int psrt_table_export(const struct psrt_table *t, uint64_t **keys, float **vals, float **slots,
                      uint64_t *n);
/* Partition of a sparse row over nps ps tasks (the "mod" strategy on a
 * mixed key). */
static inline uint64_t psrt_mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}
static inline int psrt_row_ps(uint64_t key, int nps)
{
    return (int)(((unsigned __int128)psrt_mix64(key ^ 0x9e3779b97f4a7c15ull) * (uint64_t)nps) >>
                 64);
}
/* Splits keys[0..n) by ps (split.c): pk[p] (and pv[p] from vals, pi[p]
 * the input positions, each when non-NULL) get ps p's keys in input order,
 * pn[p] their count. */
void psrt_split_keys(const uint64_t *keys, const float *vals, size_t n, int nps, uint64_t **pk,
                     float **pv, uint32_t **pi, size_t *pn);
/* The same, appended after the pn[p] entries already there, with input
 * positions counted from base: splitting a batch piece by piece. */
void psrt_split_keys_append(const uint64_t *keys, const float *vals, size_t n, int nps,
                            uint64_t **pk, float **pv, uint32_t **pi, size_t *pn, size_t base);

/* ---- data (data.c) ---------------------------------------------------------- */
struct psrt_rng {
    uint64_t s[4];
};
void psrt_rng_seed(struct psrt_rng *r, uint64_t seed);
uint64_t psrt_rng_u64(struct psrt_rng *r);
double psrt_rng_uniform(struct psrt_rng *r); /* [0,1) */
double psrt_rng_normal(struct psrt_rng *r);
uint64_t psrt_rng_seed_for(uint64_t seed, uint64_t a, uint64_t b); /* derive */

/* ---- models (models.c, model.c, model_*.c) ----------------------------------- */
enum { PSRT_VAR_DENSE, PSRT_VAR_SPARSE };
enum { PSRT_INIT_ZERO, PSRT_INIT_UNIFORM, PSRT_INIT_NORMAL };
#define PSRT_MAX_VARS 8

struct psrt_var {
    char name[96];
    int kind;
    int rank;
    int64_t dims[2]; /* dense shape; sparse: [features, width] */
    int64_t n;       /* dense: elements; sparse: width */
    int init;
    float init_a;
    int ps; /* owning ps task (dense), -1 sparse (all) */
};

/* A batch of examples (layout depends on the model). */
struct psrt_batch {
    int n;
    int dim;         /* dense feature width */
    float *x;        /* n * dim */
    float *y;        /* n */
    int nnz;         /* sparse features per example */
    uint64_t *fkeys; /* n * nnz feature ids (hashed) */
    uint32_t *fidx;  /* n * nnz index into keys */
    uint64_t *keys;  /* unique feature ids */
    int64_t nkeys;
    size_t cap_n, cap_keys;
};
void psrt_batch_free(struct psrt_batch *b);
/* Fills keys/fidx from fkeys (unique, in first-seen order). */
int psrt_batch_unique(struct psrt_batch *b);

struct psrt_model;
struct psrt_model_ops {
    const char *name;
    const char *default_optimizer;
    double default_lr;
    int default_batch;
    double target_loss; /* the final variables' loss on the chief's held-out
                         * batch at the end ("reached" when at or below) */
    void (*define)(struct psrt_model *m);
    /* Batch of n examples of worker `worker` at its local step. */
    int (*batch)(const struct psrt_model *m, struct psrt_batch *b, int n, uint64_t seed);
    /* Loss and gradients: dense[i] values of var i (NULL for sparse),
     * sparse values for b->keys (width floats each); grads likewise. */
    double (*grad)(const struct psrt_model *m, const struct psrt_batch *b, float *const *dense,
                   const float *sparse, float **dgrad, float *sgrad);
    /* Predicts from one line of input; prints the answer to out.
     * lookup(key) gives a sparse row's value (0 when absent). */
    int (*predict)(const struct psrt_model *m, const char *line, float *const *dense,
                   float (*lookup)(void *ctx, uint64_t key), void *ctx, FILE *out, char *err,
                   size_t errlen);
    const char *input_doc; /* predict input format */
};

struct psrt_model {
    const struct psrt_model_ops *ops;
    int nvars;
    struct psrt_var vars[PSRT_MAX_VARS];
    int sparse; /* index of the sparse var or -1 */
    int nps;
    int64_t features; /* sparse_lr hashed feature space */
};
const struct psrt_model_ops *psrt_model_find(const char *name);
extern const struct psrt_model_ops psrt_model_linear, psrt_model_softmax, psrt_model_sparse_lr,
    psrt_model_bench_dense;
/* Defines the variables and places them on nps ps tasks: global_step on ps
 * 0, then each dense variable round robin (replica_device_setter order),
 * sparse variables on every ps by row. */
int psrt_model_init(struct psrt_model *m, const char *name, int nps, int64_t features);
int psrt_model_add_var(struct psrt_model *m, const char *name, int kind, int rank, int64_t d0,
                       int64_t d1, int init, float init_a);
/* Shard order of the sharded Saver: ps tasks that hold variables, sorted by
 * TensorFlow device name ("/job:ps/replica:0/task:N/device:CPU:0"). Returns
 * count; order[i] = ps task of shard i. */
int psrt_model_shards(const struct psrt_model *m, int *order);
bool psrt_model_ps_has_vars(const struct psrt_model *m, int ps);

/* ---- tensor lists (tensors.c): what a ps saves, restores and sends ---------- */
struct psrt_tensor {
    char name[160];
    int dtype; /* CKPT_DT_* */
    int rank;
    int64_t dims[2];
    void *data; /* owned when list->owns */
    size_t len;
};
struct psrt_tl {
    struct psrt_tensor *t;
    int n, cap;
    bool owns;
};
void psrt_tl_free(struct psrt_tl *l);
struct psrt_tensor *psrt_tl_add(struct psrt_tl *l, const char *name, int dtype, int rank,
                                const int64_t *dims, void *data, size_t len);
const struct psrt_tensor *psrt_tl_find(const struct psrt_tl *l, const char *name);
/* Serialise (count, then name, dtype, rank, dims, len, bytes 8-aligned). */
void psrt_tl_encode(const struct psrt_tl *l, struct psrt_buf *b);
/* The same encoding without copying tensor bytes: metadata goes to meta,
 * and iov[0..n) alternates metadata pieces and tensor data (valid while l
 * lives).  Returns n, or -ENOSPC when maxiov is too small. */
int psrt_tl_encode_iov(const struct psrt_tl *l, struct psrt_buf *meta, struct iovec *iov,
                       int maxiov);
/* Parses in place: tensors point into b (owns = false). */
int psrt_tl_decode(struct psrt_tl *l, struct psrt_buf *b);
/* Writes every tensor as one bundle prefix; flags CKPT_SYNC etc.
 * wflags: CKPT_W_*.  On error fills err (TensorFlow-shaped). */
int psrt_tl_write_bundle(const struct psrt_tl *l, const char *prefix, unsigned wflags,
                         unsigned fflags, struct psrt_err *err);
/* Reads every tensor of a bundle (owned copies, crc checked). */
int psrt_tl_read_bundle(struct psrt_tl *l, const char *prefix, struct psrt_err *err);
/* The same, each tensor read into take(ctx, its size) when that gives a
 * buffer (one the caller kept from before, already faulted in), else into
 * a new one; l owns them all either way. */
int psrt_tl_read_bundle_into(struct psrt_tl *l, const char *prefix,
                             void *(*take)(void *ctx, size_t len), void *ctx, struct psrt_err *err);

/* ---- kept checkpoints (state.c) ----------------------------------------------- */
/* Records checkpoint name (as the state lists it: relative to dir, or
 * absolute) last in dir's `checkpoint` state file, deletes the files of the
 * oldest others so that at most max_to_keep stay listed (failures logged),
 * and writes the state (fflags: CKPT_SYNC for durably).  An unreadable
 * state is logged and started afresh.  fault: the fault point that fails
 * the write (NULL for none).  0, or -errno with err set. */
int psrt_state_commit(const char *dir, const char *name, int max_to_keep, unsigned fflags,
                      const char *fault, struct psrt_err *err);
/* The same, but keep_too (when not NULL), if listed, is never dropped (it
 * stays listed, beyond max_to_keep if need be). */
int psrt_state_commit_keep(const char *dir, const char *name, int max_to_keep, const char *keep_too,
                           unsigned fflags, const char *fault, struct psrt_err *err);
/* The chief's checkpoint of a step: "<train_dir>/model.ckpt-<step>". */
void psrt_ckpt_prefix(const struct psrt_flags *f, long long step, char *out, size_t len);
/* Deletes every file of checkpoint prefix p (index, data shards, .meta);
 * failures are logged and ignored, as TensorFlow's Saver does. */
void psrt_delete_checkpoint(const char *p);
/* In a directory only psrt writes: deletes the files of every
 * model.ckpt-<step> below step `below` that dir's state does not list
 * (temporary files included).  The number deleted. */
int psrt_state_sweep(const char *dir, long long below);
/* In a directory only psrt writes: drops checkpoint name (as the state
 * lists it, relative to dir) of a save that was abandoned: first from dir's
 * state when it lists it (written again without it, fflags CKPT_SYNC for
 * durably; the file removed when name was all it listed), then every file
 * "<name>.*" (index, data, temporary files).  The number of files deleted,
 * or -errno with err set (then nothing is deleted). */
int psrt_state_drop(const char *dir, const char *name, unsigned fflags, struct psrt_err *err);

/* ---- events (events.c) -------------------------------------------------------- */
/* No-op unless FAULTLINE_EVENTS is set.  Attributes: "key=value" strings,
 * value quoted as needed.  Blocks for the harness's OK when kind is listed
 * in FAULTLINE_SYNC. */
void psrt_ev_open(const char *job, int task);
void psrt_ev(const char *kind, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void psrt_ev_close(void);
/* Quotes a value for an attribute (static buffer per thread). */
const char *psrt_ev_q(const char *v);

/* ---- fault points (fault.c) ----------------------------------------------------
 * Named libfiu points; compiled away without FIU_ENABLE. */
void psrt_fault_init(void);
/* Non-zero when the point is enabled (then returns the errno to fail with,
 * default EIO). */
int psrt_fault(const char *name);
/* Before writing a bundle at prefix: when point name is enabled, its errno
 * (negative), with err naming the bundle's data file as a failed write
 * would; else 0. */
int psrt_fault_bundle(const char *name, const char *prefix, struct psrt_err *err);
extern const char *const psrt_fault_points[];

/* ---- tasks ------------------------------------------------------------------------ */
int psrt_ps_main(const struct psrt_flags *f);
int psrt_worker_main(const struct psrt_flags *f);
int psrt_predict_main(int argc, char **argv);
int psrt_bench_main(int argc, char **argv);

#endif
