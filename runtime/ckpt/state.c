/*
 * state.c: the `checkpoint` state file (CheckpointState, text format), read
 * as protobuf's text_format.Merge reads it and written as
 * text_format.MessageToString prints it, atomically (TensorFlow's
 * atomic_write_string_to_file: "<file>.tmp<32 hex>", then rename).
 *
 * Grammar accepted (protobuf text format, restricted to this message):
 *   file   := { field [',' | ';'] }
 *   field  := NAME ':' value | NAME ':' '[' [value {',' value}] ']'
 *   value  := string {string}      (adjacent literals concatenate)
 *           | number               (doubles: also inf, -inf, nan, infinity)
 * with '#' comments, C escapes in strings (\n \t \" \' \\ \ooo \xhh \uhhhh
 * ...).  Fields: model_checkpoint_path (1), all_model_checkpoint_paths (2,
 * repeated), all_model_checkpoint_timestamps (3, repeated double),
 * last_preserved_timestamp (4).  Singular fields: the last one wins.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <unistd.h>

#include "runtime/ckpt/internal.h"
#include "runtime/ckpt/state.h"

#define MAX_STATE_FILE (64u << 20)

struct tk {
    const char *p, *end, *start, *line_start;
    int line;
    const char *name;
    struct ckpt_err *err;
};

static int perr(struct tk *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int perr(struct tk *t, const char *fmt, ...)
{
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return ckpt_err_set(t->err, -EBADMSG, NULL, t->name, NULL, 0, "line %d column %d: %s", t->line,
                        (int)(t->p - t->line_start) + 1, what);
}

static void skip_ws(struct tk *t)
{
    while (t->p < t->end) {
        char c = *t->p;
        if (c == '\n') {
            t->p++;
            t->line++;
            t->line_start = t->p;
        } else if (c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f') {
            t->p++;
        } else if (c == '#') {
            while (t->p < t->end && *t->p != '\n')
                t->p++;
        } else {
            break;
        }
    }
}

static bool is_ident(char c, bool first)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
           (!first && c >= '0' && c <= '9');
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static void put_utf8(struct ckpt_buf *b, uint32_t cp)
{
    if (cp < 0x80) {
        ckpt_buf_putc(b, (uint8_t)cp);
    } else if (cp < 0x800) {
        ckpt_buf_putc(b, (uint8_t)(0xc0 | cp >> 6));
        ckpt_buf_putc(b, (uint8_t)(0x80 | (cp & 0x3f)));
    } else if (cp < 0x10000) {
        ckpt_buf_putc(b, (uint8_t)(0xe0 | cp >> 12));
        ckpt_buf_putc(b, (uint8_t)(0x80 | ((cp >> 6) & 0x3f)));
        ckpt_buf_putc(b, (uint8_t)(0x80 | (cp & 0x3f)));
    } else {
        ckpt_buf_putc(b, (uint8_t)(0xf0 | cp >> 18));
        ckpt_buf_putc(b, (uint8_t)(0x80 | ((cp >> 12) & 0x3f)));
        ckpt_buf_putc(b, (uint8_t)(0x80 | ((cp >> 6) & 0x3f)));
        ckpt_buf_putc(b, (uint8_t)(0x80 | (cp & 0x3f)));
    }
}

/* One or more adjacent string literals; *out malloc'd. */
static int parse_string(struct tk *t, char **out)
{
    struct ckpt_buf b = {0};
    int rc = 0;
    if (t->p >= t->end || (*t->p != '"' && *t->p != '\'')) {
        return perr(t, "expected a string");
    }
    while (t->p < t->end && (*t->p == '"' || *t->p == '\'')) {
        char q = *t->p++;
        for (;;) {
            if (t->p >= t->end || *t->p == '\n') {
                rc = perr(t, "unterminated string");
                goto done;
            }
            char c = *t->p++;
            if (c == q)
                break;
            if (c != '\\') {
                ckpt_buf_putc(&b, (uint8_t)c);
                continue;
            }
            if (t->p >= t->end) {
                rc = perr(t, "unterminated string");
                goto done;
            }
            c = *t->p++;
            switch (c) {
            case 'a': ckpt_buf_putc(&b, '\a'); break;
            case 'b': ckpt_buf_putc(&b, '\b'); break;
            case 'f': ckpt_buf_putc(&b, '\f'); break;
            case 'n': ckpt_buf_putc(&b, '\n'); break;
            case 'r': ckpt_buf_putc(&b, '\r'); break;
            case 't': ckpt_buf_putc(&b, '\t'); break;
            case 'v': ckpt_buf_putc(&b, '\v'); break;
            case '\\':
            case '?':
            case '\'':
            case '"': ckpt_buf_putc(&b, (uint8_t)c); break;
            case '0':
            case '1':
            case '2':
            case '3':
            case '4':
            case '5':
            case '6':
            case '7': {
                int v = c - '0';
                for (int k = 0; k < 2 && t->p < t->end && *t->p >= '0' && *t->p <= '7'; k++)
                    v = v * 8 + (*t->p++ - '0');
                if (v > 255) {
                    rc = perr(t, "octal escape out of range");
                    goto done;
                }
                ckpt_buf_putc(&b, (uint8_t)v);
                break;
            }
            case 'x':
            case 'X': {
                int v = 0, k = 0;
                while (k < 2 && t->p < t->end && hexval(*t->p) >= 0) {
                    v = v * 16 + hexval(*t->p++);
                    k++;
                }
                if (!k) {
                    rc = perr(t, "\\x with no hex digits");
                    goto done;
                }
                ckpt_buf_putc(&b, (uint8_t)v);
                break;
            }
            case 'u':
            case 'U': {
                int want = c == 'u' ? 4 : 8;
                uint32_t v = 0;
                for (int k = 0; k < want; k++) {
                    if (t->p >= t->end || hexval(*t->p) < 0) {
                        rc = perr(t, "\\%c needs %d hex digits", c, want);
                        goto done;
                    }
                    v = v * 16 + (uint32_t)hexval(*t->p++);
                }
                if (v > 0x10ffff) {
                    rc = perr(t, "\\U escape out of range");
                    goto done;
                }
                put_utf8(&b, v);
                break;
            }
            default: rc = perr(t, "unknown escape \\%c", c); goto done;
            }
        }
        skip_ws(t);
    }
    if (memchr(b.p ? (char *)b.p : "", 0, b.len)) {
        rc = perr(t, "string holds a NUL byte");
        goto done;
    }
    ckpt_buf_putc(&b, 0);
    if (b.oom) {
        rc = ckpt_err_set(t->err, -ENOMEM, NULL, t->name, NULL, 0, "out of memory");
        goto done;
    }
    *out = (char *)b.p;
    return 0;
done:
    ckpt_buf_free(&b);
    return rc;
}

static int parse_double(struct tk *t, double *out)
{
    const char *s = t->p;
    while (t->p < t->end &&
           (is_ident(*t->p, false) || *t->p == '-' || *t->p == '+' || *t->p == '.'))
        t->p++;
    size_t n = (size_t)(t->p - s);
    char buf[64];
    if (n == 0 || n >= sizeof buf) {
        t->p = s;
        return perr(t, "expected a number");
    }
    memcpy(buf, s, n);
    buf[n] = 0;
    if (n > 1 && (buf[n - 1] == 'f' || buf[n - 1] == 'F') && strcasecmp(buf, "inf") &&
        strcasecmp(buf, "-inf") && !strchr(buf, 'x'))
        buf[--n] = 0;
    const char *num = buf[0] == '-' ? buf + 1 : buf;
    double sign = buf[0] == '-' ? -1.0 : 1.0;
    if (!strcasecmp(num, "inf") || !strcasecmp(num, "infinity")) {
        *out = sign * INFINITY;
        return 0;
    }
    if (!strcasecmp(num, "nan")) {
        *out = NAN;
        return 0;
    }
    char *e;
    errno = 0;
    *out = strtod(buf, &e);
    if (*e || e == buf) {
        t->p = s;
        return perr(t, "'%s' is not a number", buf);
    }
    return 0;
}

static int push_path(struct ckpt_state *st, char *s)
{
    char **v = realloc(st->all_model_checkpoint_paths, (st->n_all + 1) * sizeof *v);
    if (!v)
        return -ENOMEM;
    st->all_model_checkpoint_paths = v;
    v[st->n_all++] = s;
    return 0;
}

static int push_ts(struct ckpt_state *st, double d)
{
    double *v = realloc(st->all_model_checkpoint_timestamps, (st->n_timestamps + 1) * sizeof *v);
    if (!v)
        return -ENOMEM;
    st->all_model_checkpoint_timestamps = v;
    v[st->n_timestamps++] = d;
    return 0;
}

/* One value of field f (1..4). */
static int parse_value(struct tk *t, struct ckpt_state *st, int f)
{
    int rc;
    if (f <= 2) {
        char *s = NULL;
        if ((rc = parse_string(t, &s)))
            return rc;
        if (f == 1) {
            free(st->model_checkpoint_path);
            st->model_checkpoint_path = s;
        } else if (push_path(st, s) < 0) {
            free(s);
            return ckpt_err_set(t->err, -ENOMEM, NULL, t->name, NULL, 0, "out of memory");
        }
    } else {
        double d = 0;
        if ((rc = parse_double(t, &d)))
            return rc;
        if (f == 3) {
            if (push_ts(st, d) < 0)
                return ckpt_err_set(t->err, -ENOMEM, NULL, t->name, NULL, 0, "out of memory");
        } else {
            st->last_preserved_timestamp = d;
            st->has_last_preserved_timestamp = true;
        }
    }
    skip_ws(t);
    return 0;
}

int ckpt_state_parse(const char *text, size_t len, const char *name, struct ckpt_state *st,
                     struct ckpt_err *err)
{
    static const char *const fields[] = {
        NULL, "model_checkpoint_path", "all_model_checkpoint_paths",
        "all_model_checkpoint_timestamps", "last_preserved_timestamp"};
    struct tk t = {text, text + len, text, text, 1, name ? name : "checkpoint", err};
    int rc = 0;
    memset(st, 0, sizeof *st);
    skip_ws(&t);
    while (t.p < t.end) {
        const char *id = t.p;
        while (t.p < t.end && is_ident(*t.p, t.p == id))
            t.p++;
        size_t idlen = (size_t)(t.p - id);
        if (!idlen) {
            rc = perr(&t, "expected a field name");
            goto fail;
        }
        int f = 0;
        for (int i = 1; i <= 4; i++)
            if (strlen(fields[i]) == idlen && !memcmp(fields[i], id, idlen))
                f = i;
        if (!f) {
            t.p = id;
            rc = perr(&t, "message type \"tensorflow.CheckpointState\" has no field named \"%.*s\"",
                      (int)(idlen > 100 ? 100 : idlen), id);
            goto fail;
        }
        skip_ws(&t);
        if (t.p >= t.end || *t.p != ':') {
            rc = perr(&t, "expected ':' after %s", fields[f]);
            goto fail;
        }
        t.p++;
        skip_ws(&t);
        if (t.p < t.end && *t.p == '[' && (f == 2 || f == 3)) {
            t.p++;
            skip_ws(&t);
            if (t.p < t.end && *t.p == ']') {
                t.p++;
            } else {
                for (;;) {
                    if ((rc = parse_value(&t, st, f)))
                        goto fail;
                    if (t.p < t.end && *t.p == ',') {
                        t.p++;
                        skip_ws(&t);
                        continue;
                    }
                    if (t.p < t.end && *t.p == ']') {
                        t.p++;
                        break;
                    }
                    rc = perr(&t, "expected ',' or ']'");
                    goto fail;
                }
            }
            skip_ws(&t);
        } else if ((rc = parse_value(&t, st, f))) {
            goto fail;
        }
        if (t.p < t.end && (*t.p == ',' || *t.p == ';')) {
            t.p++;
            skip_ws(&t);
        }
    }
    return 0;
fail:
    ckpt_state_free(st);
    return rc;
}

int ckpt_state_read(const char *path, struct ckpt_state *st, struct ckpt_err *err)
{
    return ckpt_state_read_in(-1, path, st, err);
}

int ckpt_state_read_in(int root, const char *path, struct ckpt_state *st, struct ckpt_err *err)
{
    char *file = NULL, *text = NULL;
    int fd = -1, rc = 0;
    struct stat sb;

    memset(st, 0, sizeof *st);
    int dfd = ckpt_open_in(root, path, O_PATH | O_CLOEXEC);
    bool dir = dfd >= 0 && fstat(dfd, &sb) == 0 && S_ISDIR(sb.st_mode);
    if (dfd >= 0)
        close(dfd);
    if (dir) {
        if (asprintf(&file, "%s/%s", path, CKPT_STATE_FILENAME) < 0) {
            file = NULL;
            return ckpt_err_set(err, -ENOMEM, NULL, path, NULL, 0, "out of memory");
        }
    } else if (!(file = strdup(path))) {
        return ckpt_err_set(err, -ENOMEM, NULL, path, NULL, 0, "out of memory");
    }
    fd = ckpt_open_in(root, file, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        rc = -errno;
        ckpt_err_set(err, rc, "open", file, NULL, 0, NULL);
        goto cleanup;
    }
    if (fstat(fd, &sb) < 0) {
        rc = -errno;
        ckpt_err_set(err, rc, "fstat", file, NULL, 0, NULL);
        goto cleanup;
    }
    if (sb.st_size > MAX_STATE_FILE) {
        rc = ckpt_err_set(err, -EFBIG, NULL, file, NULL, 0,
                          "%lld bytes: too large for a checkpoint "
                          "state file",
                          (long long)sb.st_size);
        goto cleanup;
    }
    text = malloc((size_t)sb.st_size + 1);
    size_t got = 0;
    if (!text) {
        rc = ckpt_err_set(err, -ENOMEM, NULL, file, NULL, 0, "out of memory");
        goto cleanup;
    }
    if ((rc = ckpt_pread_all(fd, text, (size_t)sb.st_size, 0, &got)) < 0) {
        ckpt_err_set(err, rc, "read", file, NULL, 0, NULL);
        goto cleanup;
    }
    rc = ckpt_state_parse(text, got, file, st, err);
cleanup:
    if (fd >= 0)
        close(fd);
    free(text);
    free(file);
    return rc;
}

static void put_escaped(struct ckpt_buf *b, const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '\t': ckpt_buf_put(b, "\\t", 2); break;
        case '\n': ckpt_buf_put(b, "\\n", 2); break;
        case '\r': ckpt_buf_put(b, "\\r", 2); break;
        case '"': ckpt_buf_put(b, "\\\"", 2); break;
        case '\'': ckpt_buf_put(b, "\\'", 2); break;
        case '\\': ckpt_buf_put(b, "\\\\", 2); break;
        default:
            if (*p < 32 || *p >= 127) {
                char o[5];
                snprintf(o, sizeof o, "\\%03o", *p);
                ckpt_buf_put(b, o, 4);
            } else {
                ckpt_buf_putc(b, *p);
            }
        }
    }
}

/* Python's repr(float): shortest round-trip digits; fixed notation for
 * exponents in [-4, 16), else d.ddde+XX. */
static void put_double(struct ckpt_buf *b, double d)
{
    char s[64];
    if (isnan(d)) {
        ckpt_buf_put(b, "nan", 3);
        return;
    }
    if (isinf(d)) {
        if (d < 0)
            ckpt_buf_put(b, "-inf", 4);
        else
            ckpt_buf_put(b, "inf", 3);
        return;
    }
    int p;
    for (p = 1; p < 17; p++) {
        snprintf(s, sizeof s, "%.*e", p - 1, d);
        if (strtod(s, NULL) == d)
            break;
    }
    snprintf(s, sizeof s, "%.*e", p - 1, d);
    int x = atoi(strchr(s, 'e') + 1);
    if (x >= -4 && x < 16) {
        int dec = p - 1 - x;
        snprintf(s, sizeof s, "%.*f", dec > 0 ? dec : 0, d);
        if (!strchr(s, '.'))
            strcat(s, ".0");
    }
    ckpt_buf_put(b, s, strlen(s));
}

char *ckpt_state_format(const struct ckpt_state *st)
{
    struct ckpt_buf b = {0};
    if (st->model_checkpoint_path && *st->model_checkpoint_path) {
        ckpt_buf_put(&b, "model_checkpoint_path: \"", 24);
        put_escaped(&b, st->model_checkpoint_path);
        ckpt_buf_put(&b, "\"\n", 2);
    }
    for (size_t i = 0; i < st->n_all; i++) {
        ckpt_buf_put(&b, "all_model_checkpoint_paths: \"", 29);
        put_escaped(&b, st->all_model_checkpoint_paths[i]);
        ckpt_buf_put(&b, "\"\n", 2);
    }
    for (size_t i = 0; i < st->n_timestamps; i++) {
        ckpt_buf_put(&b, "all_model_checkpoint_timestamps: ", 33);
        put_double(&b, st->all_model_checkpoint_timestamps[i]);
        ckpt_buf_putc(&b, '\n');
    }
    if (st->has_last_preserved_timestamp && st->last_preserved_timestamp != 0) {
        ckpt_buf_put(&b, "last_preserved_timestamp: ", 26);
        put_double(&b, st->last_preserved_timestamp);
        ckpt_buf_putc(&b, '\n');
    }
    ckpt_buf_putc(&b, 0);
    if (b.oom) {
        ckpt_buf_free(&b);
        return NULL;
    }
    return (char *)b.p;
}

int ckpt_state_write(const char *dir, const struct ckpt_state *st, unsigned flags,
                     struct ckpt_err *err)
{
    char *file = NULL, *text = NULL;
    char suffix[40];
    int rc;
    if (asprintf(&file, "%s/%s", dir && *dir ? dir : ".", CKPT_STATE_FILENAME) < 0)
        return ckpt_err_set(err, -ENOMEM, NULL, dir, NULL, 0, "out of memory");
    text = ckpt_state_format(st);
    if (!text) {
        rc = ckpt_err_set(err, -ENOMEM, NULL, file, NULL, 0, "out of memory");
        goto cleanup;
    }
    memcpy(suffix, ".tmp", 4);
    ckpt_random_hex(suffix + 4, 32);
    rc = ckpt_write_file_atomic(file, suffix, text, strlen(text), flags & CKPT_SYNC, err);
cleanup:
    free(text);
    free(file);
    return rc;
}

int ckpt_state_add_path(struct ckpt_state *st, const char *path, double ts)
{
    char *s = strdup(path);
    if (!s || push_path(st, s) < 0) {
        free(s);
        return -ENOMEM;
    }
    if (ts >= 0 || st->n_timestamps) {
        if (push_ts(st, ts >= 0 ? ts : 0) < 0) {
            st->n_all--;
            free(s);
            return -ENOMEM;
        }
    }
    return 0;
}

int ckpt_state_set_model(struct ckpt_state *st, const char *path)
{
    char *s = strdup(path);
    if (!s)
        return -ENOMEM;
    free(st->model_checkpoint_path);
    st->model_checkpoint_path = s;
    return 0;
}

char *ckpt_state_resolve(const char *dir, const char *p)
{
    char *s;
    if (p[0] == '/' || !dir || !*dir)
        return strdup(p);
    size_t dl = strlen(dir);
    if (asprintf(&s, "%s%s%s", dir, dir[dl - 1] == '/' ? "" : "/", p) < 0)
        return NULL;
    return s;
}

void ckpt_state_free(struct ckpt_state *st)
{
    if (!st)
        return;
    free(st->model_checkpoint_path);
    for (size_t i = 0; i < st->n_all; i++)
        free(st->all_model_checkpoint_paths[i]);
    free(st->all_model_checkpoint_paths);
    free(st->all_model_checkpoint_timestamps);
    memset(st, 0, sizeof *st);
}
