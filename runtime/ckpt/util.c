/*
 * util.c: the small shared pieces of the checkpoint library: growable
 * buffers, an arena, varints, error filling (struct ckpt_err and the
 * TensorFlow-shaped rendering), dtype tables, TensorFlow's file names and
 * file-system helpers (atomic whole-file writes, directory fsync, mkdir -p).
 * No state beyond what callers pass in.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/openat2.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "runtime/ckpt/bundle.h"
#include "runtime/ckpt/crc.h"
#include "runtime/ckpt/internal.h"

/* ---- buffers ---- */

void ckpt_buf_reserve(struct ckpt_buf *b, size_t extra)
{
    if (b->oom)
        return;
    if (b->len + extra < b->len) {
        b->oom = true;
        return;
    }
    if (b->len + extra <= b->cap)
        return;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra) {
        if (cap > SIZE_MAX / 2) {
            cap = b->len + extra;
            break;
        }
        cap *= 2;
    }
    uint8_t *p = realloc(b->p, cap);
    if (!p) {
        b->oom = true;
        return;
    }
    b->p = p;
    b->cap = cap;
}

void ckpt_buf_put(struct ckpt_buf *b, const void *d, size_t n)
{
    if (!n)
        return;
    ckpt_buf_reserve(b, n);
    if (b->oom)
        return;
    memcpy(b->p + b->len, d, n);
    b->len += n;
}

void ckpt_buf_putc(struct ckpt_buf *b, uint8_t c)
{
    ckpt_buf_put(b, &c, 1);
}

void ckpt_buf_varint(struct ckpt_buf *b, uint64_t v)
{
    uint8_t tmp[10];
    int n = 0;
    while (v >= 0x80) {
        tmp[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    tmp[n++] = (uint8_t)v;
    ckpt_buf_put(b, tmp, (size_t)n);
}

void ckpt_buf_fixed32(struct ckpt_buf *b, uint32_t v)
{
    uint8_t tmp[4];
    ckpt_put32le(tmp, v);
    ckpt_buf_put(b, tmp, 4);
}

void ckpt_buf_free(struct ckpt_buf *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}

int ckpt_varint_len(uint64_t v)
{
    int n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

int ckpt_varint_get(const uint8_t **pp, const uint8_t *end, uint64_t *v)
{
    const uint8_t *p = *pp;
    uint64_t r = 0;
    for (int shift = 0; shift < 70 && p < end; shift += 7) {
        uint8_t c = *p++;
        if (shift == 63 && c > 1)
            return -1; /* more than 64 bits */
        r |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80)) {
            *pp = p;
            *v = r;
            return 0;
        }
    }
    return -1;
}

/* ---- arena ---- */

struct ckpt_arena_chunk {
    struct ckpt_arena_chunk *next;
    size_t used, cap;
    _Alignas(16) uint8_t data[];
};

void *ckpt_arena_alloc(struct ckpt_arena *a, size_t n)
{
    n = (n + 7) & ~(size_t)7;
    if (n == 0)
        n = 8;
    struct ckpt_arena_chunk *c = a->head;
    if (!c || c->cap - c->used < n) {
        size_t cap = n > 65536 ? n : 65536;
        c = malloc(sizeof *c + cap);
        if (!c)
            return NULL;
        c->used = 0;
        c->cap = cap;
        c->next = a->head;
        a->head = c;
    }
    void *p = c->data + c->used;
    c->used += n;
    memset(p, 0, n);
    return p;
}

void *ckpt_arena_dup(struct ckpt_arena *a, const void *p, size_t n)
{
    if (n == SIZE_MAX)
        return NULL;
    uint8_t *q = ckpt_arena_alloc(a, n + 1);
    if (q && n)
        memcpy(q, p, n);
    return q;
}

void ckpt_arena_free(struct ckpt_arena *a)
{
    struct ckpt_arena_chunk *c = a->head;
    while (c) {
        struct ckpt_arena_chunk *next = c->next;
        free(c);
        c = next;
    }
    a->head = NULL;
}

/* ---- errors ---- */

void ckpt_escape_name(char *out, size_t outlen, const char *name, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0, i;
    if (outlen < 8) {
        if (outlen)
            out[0] = 0;
        return;
    }
    size_t room = outlen - 4; /* keep space for "..." and NUL */
    for (i = 0; i < len; i++) {
        unsigned char c = (unsigned char)name[i];
        bool plain = c >= 0x20 && c < 0x7f && c != '\\' && c != '\'';
        if (o + (plain ? 1 : 4) > room)
            break;
        if (plain) {
            out[o++] = (char)c;
        } else {
            out[o++] = '\\';
            out[o++] = 'x';
            out[o++] = hex[c >> 4];
            out[o++] = hex[c & 15];
        }
    }
    if (i < len) {
        memcpy(out + o, "...", 3);
        o += 3;
    }
    out[o] = 0;
}

int ckpt_err_set(struct ckpt_err *e, int code, const char *call, const char *path,
                 const char *entry, size_t entry_len, const char *fmt, ...)
{
    if (!e)
        return code;
    e->code = code;
    snprintf(e->call, sizeof e->call, "%s", call ? call : "");
    snprintf(e->path, sizeof e->path, "%s", path ? path : "");
    if (entry)
        ckpt_escape_name(e->entry, sizeof e->entry, entry, entry_len);
    else
        e->entry[0] = 0;

    size_t o = 0, cap = sizeof e->msg;
    int n;
#define ADD(...)                                               \
    do {                                                       \
        n = snprintf(e->msg + o, cap - o, __VA_ARGS__);        \
        if (n > 0)                                             \
            o = (size_t)n < cap - o ? o + (size_t)n : cap - 1; \
    } while (0)
    e->msg[0] = 0;
    if (path && *path)
        ADD("%s: ", path);
    if (entry)
        ADD("tensor '%s': ", e->entry);
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        n = vsnprintf(e->msg + o, cap - o, fmt, ap);
        va_end(ap);
        if (n > 0)
            o = (size_t)n < cap - o ? o + (size_t)n : cap - 1;
    } else if (call) {
        ADD("%s: %s", call, strerror(-code));
    } else {
        ADD("%s", strerror(-code));
    }
#undef ADD
    return code;
}

const char *ckpt_err_tf_class(int code)
{
    switch (-code) {
    case 0: return "OK";
    case ENOENT:
    case ENOTDIR:
    case ENODEV:
    case ENXIO: return "NotFoundError";
    case EEXIST: return "AlreadyExistsError";
    case EACCES:
    case EPERM:
    case EROFS: return "PermissionDeniedError";
    case ENOSPC:
    case EDQUOT:
    case EMFILE:
    case ENFILE:
    case ENOMEM:
    case EFBIG: return "ResourceExhaustedError";
    case EINVAL:
    case ENAMETOOLONG:
    case EISDIR:
    case E2BIG:
    case ERANGE: return "InvalidArgumentError";
    case EBADMSG: return "DataLossError";
    case ENOTSUP: return "UnimplementedError";
    case EAGAIN:
    case EBUSY:
    case ETIMEDOUT:
    case EIO:
    case ECONNREFUSED: return "UnavailableError";
    case ENOTEMPTY:
    case EXDEV:
    case ESPIPE: return "FailedPreconditionError";
    default: return "UnknownError";
    }
}

char *ckpt_err_tf(const struct ckpt_err *e, char *buf, size_t len)
{
    if (!len)
        return buf;
    if (!e) {
        buf[0] = 0;
        return buf;
    }
    if (e->call[0] && e->path[0])
        snprintf(buf, len, "%s: %s; %s", ckpt_err_tf_class(e->code), e->path, strerror(-e->code));
    else
        snprintf(buf, len, "%s: %s", ckpt_err_tf_class(e->code), e->msg);
    return buf;
}

/* ---- dtypes ---- */

static const struct {
    int dt;
    const char *name;
    size_t size;
} dtypes[] = {
    {CKPT_DT_FLOAT, "float", 4},
    {CKPT_DT_DOUBLE, "double", 8},
    {CKPT_DT_INT32, "int32", 4},
    {CKPT_DT_UINT8, "uint8", 1},
    {CKPT_DT_INT16, "int16", 2},
    {CKPT_DT_INT8, "int8", 1},
    {CKPT_DT_STRING, "string", 0},
    {CKPT_DT_COMPLEX64, "complex64", 8},
    {CKPT_DT_INT64, "int64", 8},
    {CKPT_DT_BOOL, "bool", 1},
    {CKPT_DT_BFLOAT16, "bfloat16", 2},
    {CKPT_DT_UINT16, "uint16", 2},
    {CKPT_DT_COMPLEX128, "complex128", 16},
    {CKPT_DT_HALF, "half", 2},
    {CKPT_DT_UINT32, "uint32", 4},
    {CKPT_DT_UINT64, "uint64", 8},
};

const char *ckpt_dtype_name(int dt)
{
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
        if (dtypes[i].dt == dt)
            return dtypes[i].name;
    return NULL;
}

int ckpt_dtype_from_name(const char *name)
{
    if (!name)
        return CKPT_DT_INVALID;
    if (!strcmp(name, "float32"))
        return CKPT_DT_FLOAT;
    if (!strcmp(name, "float64"))
        return CKPT_DT_DOUBLE;
    if (!strcmp(name, "float16"))
        return CKPT_DT_HALF;
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
        if (!strcmp(dtypes[i].name, name))
            return dtypes[i].dt;
    return CKPT_DT_INVALID;
}

size_t ckpt_dtype_size(int dt)
{
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
        if (dtypes[i].dt == dt)
            return dtypes[i].size;
    return 0;
}

int64_t ckpt_shape_elements(int rank, const int64_t *dims)
{
    int64_t n = 1;
    if (rank < 0)
        return -1;
    for (int i = 0; i < rank; i++) {
        if (dims[i] < 0)
            return -1;
        if (dims[i] == 0)
            n = 0;
        else if (n > INT64_MAX / dims[i])
            return -1;
        else
            n *= dims[i];
    }
    /* a zero dimension anywhere gives 0, but later dims must still be valid */
    return n;
}

/* ---- TensorFlow file names ---- */

static char *fmt_alloc(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *fmt_alloc(const char *fmt, ...)
{
    va_list ap;
    char *s = NULL;
    va_start(ap, fmt);
    int n = vasprintf(&s, fmt, ap);
    va_end(ap);
    return n < 0 ? NULL : s;
}

char *ckpt_index_name(const char *prefix)
{
    return fmt_alloc("%s.index", prefix);
}

char *ckpt_data_name(const char *prefix, int shard, int nshards)
{
    return fmt_alloc("%s.data-%05d-of-%05d", prefix, shard, nshards);
}

char *ckpt_shard_name(const char *prefix, int shard, int nshards)
{
    return fmt_alloc("%s-%05d-of-%05d", prefix, shard, nshards);
}

char *ckpt_temp_prefix(const char *prefix, const char *hex32)
{
    char hex[33];
    if (!hex32) {
        ckpt_random_hex(hex, 32);
        hex32 = hex;
    }
    return fmt_alloc("%s_temp_%s/part", prefix, hex32);
}

/* ---- file system ---- */

int ckpt_write_all(int fd, const void *p, size_t n)
{
    const uint8_t *q = p;
    while (n) {
        size_t chunk = n > (1u << 30) ? (1u << 30) : n;
        ssize_t w = write(fd, q, chunk);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (w == 0)
            return -EIO;
        q += w;
        n -= (size_t)w;
    }
    return 0;
}

int ckpt_pread_all(int fd, void *p, size_t n, uint64_t off, size_t *got)
{
    uint8_t *q = p;
    size_t done = 0;
    while (done < n) {
        size_t chunk = n - done > (1u << 30) ? (1u << 30) : n - done;
        ssize_t r = pread(fd, q + done, chunk, (off_t)(off + done));
        if (r < 0) {
            if (errno == EINTR)
                continue;
            *got = done;
            return -errno;
        }
        if (r == 0)
            break;
        done += (size_t)r;
    }
    *got = done;
    return 0;
}

char *ckpt_dirname(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        return strdup(".");
    if (slash == path)
        return strdup("/");
    return strndup(path, (size_t)(slash - path));
}

int ckpt_fsync_dir(const char *dir)
{
    int fd = open(dir && *dir ? dir : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int rc = fsync(fd) < 0 ? -errno : 0;
    close(fd);
    return rc;
}

int ckpt_fsync_ancestors(const char *dir)
{
    char *p = strdup(dir && *dir ? dir : ".");
    int rc = 0;
    if (!p)
        return -ENOMEM;
    while (rc == 0 && strcmp(p, ".") != 0) {
        char *slash = strrchr(p, '/');
        if (!slash) { /* "a": its parent is "." */
            rc = ckpt_fsync_dir(".");
            break;
        }
        if (slash == p) /* "/a": the root's entries are the system's */
            break;
        *slash = 0;
        if (slash[-1] == '/') /* "a//b": the same directory again */
            continue;
        rc = ckpt_fsync_dir(p);
    }
    free(p);
    return rc;
}

int ckpt_mkdir_p(const char *dir, char *failed, size_t failedlen)
{
    char *p = strdup(dir);
    int rc = 0;
    if (!p)
        return -ENOMEM;
    size_t len = strlen(p);
    for (size_t i = 1; i <= len; i++) {
        if (p[i] != '/' && p[i] != 0)
            continue;
        char save = p[i];
        p[i] = 0;
        if (mkdir(p, 0777) < 0 && errno != EEXIST) {
            rc = -errno;
            if (failed)
                snprintf(failed, failedlen, "%s", p);
            break;
        }
        p[i] = save;
    }
    if (!rc) {
        struct stat st;
        if (stat(dir, &st) < 0)
            rc = -errno;
        else if (!S_ISDIR(st.st_mode))
            rc = -ENOTDIR;
        if (rc && failed)
            snprintf(failed, failedlen, "%s", dir);
    }
    free(p);
    return rc;
}

uint64_t ckpt_random64(void)
{
    uint64_t v;
    if (getrandom(&v, sizeof v, 0) != sizeof v) {
        static uint64_t ctr;
        v = ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)&v ^ ++ctr * 0x9e3779b97f4a7c15ull;
    }
    return v;
}

void ckpt_random_hex(char *out, size_t nhex)
{
    static const char hex[] = "0123456789abcdef";
    size_t i = 0;
    while (i < nhex) {
        uint64_t v = ckpt_random64();
        for (int k = 0; k < 16 && i < nhex; k++, v >>= 4)
            out[i++] = hex[v & 15];
    }
    out[nhex] = 0;
}

int ckpt_write_file_atomic(const char *final, const char *tmp_suffix, const void *p, size_t n,
                           bool sync, struct ckpt_err *err)
{
    char *tmp = NULL, *dir = NULL;
    int fd = -1, rc = 0;
    if (asprintf(&tmp, "%s%s", final, tmp_suffix) < 0) {
        tmp = NULL;
        rc = ckpt_err_set(err, -ENOMEM, NULL, final, NULL, 0, "out of memory");
        goto cleanup;
    }
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0) {
        rc = -errno;
        ckpt_err_set(err, rc, "open", final, NULL, 0, "create (as %s): %s", tmp, strerror(-rc));
        goto cleanup;
    }
    if ((rc = ckpt_write_all(fd, p, n)) < 0) {
        ckpt_err_set(err, rc, "write", final, NULL, 0, "write (as %s): %s", tmp, strerror(-rc));
        goto cleanup;
    }
    if (sync && fsync(fd) < 0) {
        rc = -errno;
        ckpt_err_set(err, rc, "fsync", final, NULL, 0, "fsync (as %s): %s", tmp, strerror(-rc));
        goto cleanup;
    }
    if (close(fd) < 0) {
        fd = -1;
        rc = -errno;
        ckpt_err_set(err, rc, "close", final, NULL, 0, "close (as %s): %s", tmp, strerror(-rc));
        goto cleanup;
    }
    fd = -1;
    if (rename(tmp, final) < 0) {
        rc = -errno;
        ckpt_err_set(err, rc, "rename", final, NULL, 0, "rename from %s: %s", tmp, strerror(-rc));
        goto cleanup;
    }
    if (sync) {
        dir = ckpt_dirname(final);
        if (!dir) {
            rc = ckpt_err_set(err, -ENOMEM, NULL, final, NULL, 0, "out of memory");
        } else if ((rc = ckpt_fsync_dir(dir)) < 0) {
            ckpt_err_set(err, rc, "fsync", dir, NULL, 0, "fsync directory: %s", strerror(-rc));
        }
        /* the file is in place either way; report the fsync failure */
        free(tmp);
        free(dir);
        return rc;
    }
cleanup:
    if (fd >= 0)
        close(fd);
    if (rc < 0 && tmp)
        unlink(tmp);
    free(tmp);
    free(dir);
    return rc;
}

int ckpt_open_in(int root, const char *path, int flags)
{
    if (root < 0)
        return open(path, flags);
    struct open_how how = {.flags = (uint64_t)flags,
                           .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS};
    long fd = syscall(SYS_openat2, root, path, &how, sizeof how);
    return fd < 0 ? -1 : (int)fd;
}
