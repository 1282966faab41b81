/*
 * fault.c: psrt's error values, its log line, and its named libfiu fault
 * points.
 *
 * Errors cross process boundaries as TensorFlow would show them: a class
 * chosen from the errno the way TensorFlow's ErrnoToCode does it, then the
 * text ("NotFoundError: ./x/part-00000-of-00002.index; No such file or
 * directory").  Fault points are libfiu names checked at each step of save,
 * merge, restore and export; with FIU_ENABLE they are live (fiu_init at
 * start, remote control through fiu-ctrl when FIU_CTRL_FIFO or
 * PSRT_FIU_FIFO names a fifo basename, and PSRT_FIU="name[=errno][@FROM[-TO]],..."
 * enables points at start, every check or only the FROM-th to TO-th),
 * without it they compile to nothing.
 */
#include "runtime/psrt/psrt.h"
#include "runtime/ckpt/bundle.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef FIU_ENABLE
#include <fiu-control.h>
#include <fiu.h>
#endif

const char *psrt_err_class(int code)
{
    if (code == INT_MIN) /* a peer's status may be any int; this one has no negation */
        return "UnknownError";
    switch (-code) {
    case 0: return "OK";
    case EINVAL:
    case ENAMETOOLONG:
    case E2BIG:
    case EDESTADDRREQ:
    case EDOM:
    case EFAULT:
    case EILSEQ:
    case ENOPROTOOPT:
    case ENOTSOCK:
    case ENOTTY:
    case EPROTOTYPE:
    case ESPIPE: return "InvalidArgumentError";
    case ETIMEDOUT:
    case ETIME: return "DeadlineExceededError";
    case ENODEV:
    case ENOENT:
    case ENXIO:
    case ESRCH: return "NotFoundError";
    case EEXIST:
    case EADDRNOTAVAIL:
    case EALREADY: return "AlreadyExistsError";
    case EPERM:
    case EACCES:
    case EROFS: return "PermissionDeniedError";
    case ENOTEMPTY:
    case EISDIR:
    case ENOTDIR:
    case EADDRINUSE:
    case EBADF:
    case EBUSY:
    case ECHILD:
    case EISCONN:
    case ENOTBLK:
    case ENOTCONN:
    case EPIPE:
    case ESHUTDOWN:
    case ETXTBSY: return "FailedPreconditionError";
    case ENOSPC:
    case EMFILE:
    case EMLINK:
    case ENFILE:
    case ENOBUFS:
    case ENODATA:
    case ENOMEM:
    case ENOSR:
    case EUSERS:
    case EDQUOT: return "ResourceExhaustedError";
    case EFBIG:
    case EOVERFLOW:
    case ERANGE: return "OutOfRangeError";
    case ENOSYS:
    case ENOTSUP:
    case EAFNOSUPPORT:
    case EPFNOSUPPORT:
    case EPROTONOSUPPORT:
    case ESOCKTNOSUPPORT:
    case EXDEV: return "UnimplementedError";
    case EAGAIN:
    case ECONNREFUSED:
    case ECONNABORTED:
    case ECONNRESET:
    case EINTR:
    case EHOSTDOWN:
    case EHOSTUNREACH:
    case ENETDOWN:
    case ENETRESET:
    case ENETUNREACH:
    case ENOLCK:
    case ENOLINK: return "UnavailableError";
    case EDEADLK:
    case ESTALE: return "AbortedError";
    case ECANCELED: return "CancelledError";
    case EBADMSG: return "DataLossError";
    case EPROTO: return "InternalError";
    default: return "UnknownError";
    }
}

void psrt_err_set(struct psrt_err *e, int code, const char *fmt, ...)
{
    if (!e)
        return;
    e->code = code < 0 ? code : -EIO;
    e->call[0] = 0;
    int n = snprintf(e->msg, sizeof e->msg, "%s: ", psrt_err_class(e->code));
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg + n, sizeof e->msg - (size_t)n, fmt, ap);
    va_end(ap);
}

void psrt_err_path(struct psrt_err *e, int code, const char *path)
{
    psrt_err_set(e, code, "%s; %s", path, strerror(-code));
}

void psrt_err_from_ckpt(struct psrt_err *e, int code, const struct ckpt_err *ce)
{
    if (!e)
        return;
    ckpt_err_tf(ce, e->msg, sizeof e->msg);
    e->code = code < 0 ? code : ce->code < 0 ? ce->code : -EIO;
    snprintf(e->call, sizeof e->call, "%s", ce->call);
}

void psrt_err_add_call(struct psrt_err *e)
{
    if (!e || !e->call[0])
        return;
    size_t n = strlen(e->msg);
    snprintf(e->msg + n, sizeof e->msg - n, " (%s)", e->call);
    e->call[0] = 0;
}

/* ---- log -------------------------------------------------------------- */
static char log_who[64] = "psrt";
static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;

bool psrt_bench_debug(void)
{
    static atomic_int on = -1; /* -1: not looked up yet */
    int v = atomic_load_explicit(&on, memory_order_relaxed);
    if (v < 0) {
        v = getenv("PSRT_BENCH_DEBUG") != NULL;
        atomic_store_explicit(&on, v, memory_order_relaxed);
    }
    return v;
}

void psrt_log_init(const char *job, int task)
{
    snprintf(log_who, sizeof log_who, "psrt %s:%d", job, task);
}

void psrt_log(const char *fmt, ...)
{
    char line[PSRT_MSG_MAX + 128];
    int n = snprintf(line, sizeof line, "%s: ", log_who);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    size_t l = strlen(line);
    line[l++] = '\n';
    pthread_mutex_lock(&log_mu);
    fwrite(line, 1, l, stderr);
    fflush(stderr);
    pthread_mutex_unlock(&log_mu);
}

double psrt_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- fault points ------------------------------------------------------ */
const char *const psrt_fault_points[] = {
    "psrt/save/begin",       /* chief, before any shard is written */
    "psrt/save/shard_write", /* ps, writing its shard (legacy part, robust local shard) */
    "psrt/save/shard_sync",  /* ps, robust: fsync of its local shard */
    "psrt/save/merge",       /* last ps, legacy MergeV2Checkpoints */
    "psrt/save/chief_write", /* chief, robust: writing its full copy */
    "psrt/save/commit",      /* ps, robust: local state file update */
    "psrt/save/state",       /* chief: `checkpoint` state file */
    "psrt/save/gc",          /* deleting checkpoints beyond max_to_keep */
    "psrt/restore/find",     /* chief: choosing the checkpoint */
    "psrt/restore/read",     /* ps: reading its tensors */
    "psrt/restore/load",     /* ps: loading tensors sent by the chief */
    "psrt/export/write",     /* writing the export's variables */
    "psrt/export/signature", /* writing the signature file */
    "psrt/rpc/send",         /* any frame sent (fails the call) */
    "psrt/rpc/recv",         /* any frame received */
    NULL,
};

int psrt_fault(const char *name)
{
#ifdef FIU_ENABLE
    if (fiu_fail(name)) {
        void *info = fiu_failinfo();
        int e = (int)(intptr_t)info;
        return e > 0 ? e : EIO;
    }
#else
    (void)name;
#endif
    return 0;
}

int psrt_fault_bundle(const char *name, const char *prefix, struct psrt_err *err)
{
    int fe = psrt_fault(name);
    if (!fe)
        return 0;
    char *d = ckpt_data_name(prefix, 0, 1);
    psrt_err_path(err, -fe, d ? d : prefix);
    free(d);
    return -fe;
}

#ifdef FIU_ENABLE
/* PSRT_FIU's "name=errno@FROM-TO": the point fails only on its FROM-th to
 * TO-th check in this process (counted from 1), a transient fault at a
 * chosen save without a harness. */
static struct window {
    char name[64];
    long from, to;
    atomic_long seen;
} windows[16];
static int nwindows;

static int window_cb(const char *name, int *failnum, void **failinfo, unsigned *flags)
{
    (void)failnum;
    (void)failinfo;
    (void)flags;
    for (int i = 0; i < nwindows; i++)
        if (!strcmp(windows[i].name, name)) {
            long k = atomic_fetch_add(&windows[i].seen, 1) + 1;
            return k >= windows[i].from && k <= windows[i].to;
        }
    return 0;
}
#endif

void psrt_fault_init(void)
{
#ifdef FIU_ENABLE
    fiu_init(0);
    const char *fifo = getenv("PSRT_FIU_FIFO");
    if (!fifo || !*fifo)
        fifo = getenv("FIU_CTRL_FIFO");
    if (fifo && *fifo && fiu_rc_fifo(fifo) < 0)
        psrt_log("fault points: cannot open remote control fifo %s-%d: %s", fifo, (int)getpid(),
                 strerror(errno));
    const char *en = getenv("PSRT_FIU");
    if (en && *en) {
        char *copy = strdup(en), *save = NULL;
        for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
            char *at = strchr(tok, '@');
            if (at)
                *at = 0;
            char *eq = strchr(tok, '=');
            long e = EIO;
            if (eq) {
                *eq = 0;
                e = strtol(eq + 1, NULL, 10);
            }
            if (at && nwindows < 16 && strlen(tok) < sizeof windows[0].name) {
                struct window *wd = &windows[nwindows++];
                char *end;
                snprintf(wd->name, sizeof wd->name, "%s", tok);
                wd->from = strtol(at + 1, &end, 10);
                wd->to = *end == '-' ? strtol(end + 1, NULL, 10) : wd->from;
                fiu_enable_external(tok, 1, (void *)(intptr_t)e, 0, window_cb);
            } else {
                fiu_enable(tok, 1, (void *)(intptr_t)e, 0);
            }
        }
        free(copy);
    }
#endif
}
