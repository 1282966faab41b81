/*
 * inspect.c: `psrt inspect`, the command-line view of a checkpoint: lists
 * every tensor of a TensorFlow tensor bundle (name, dtype, shape, shard,
 * offset, size, crc status), prints values, verifies everything, or emits
 * JSON for scripts.  The target is a bundle prefix (or its .index file), a
 * directory holding a `checkpoint` state file (then the state is shown and
 * its model_checkpoint_path inspected; without one, every *.index in the
 * directory), or a state file itself.
 *
 * Exit status: 0 all inspected bundles opened and every tensor's crc and
 * data file checked out; 1 a bundle or state file could not be read, or a
 * tensor is corrupt or missing (with or without --verify), or (--verify
 * only) a tensor could not be checked (a dtype this reader does not know);
 * 2 usage error.  --verify adds that last case and a verdict line.
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/ckpt/bundle.h"
#include "runtime/ckpt/state.h"

int psrt_inspect_main(int argc, char **argv);

struct opts {
    bool values, verify, json;
    long long max_values; /* -1 = all */
};

static void usage(FILE *f)
{
    fprintf(f, "usage: psrt inspect [--values[=N]] [--verify] [--json] PREFIX|DIR|STATEFILE\n"
               "\n"
               "Lists the tensors of a TensorFlow V2 checkpoint (tensor bundle): name, dtype,\n"
               "shape, shard, offset, size and whether the stored crc32c matches.\n"
               "\n"
               "  PREFIX      a bundle prefix (PREFIX.index + PREFIX.data-*), or PREFIX.index\n"
               "  DIR         a directory: its `checkpoint` state file is shown and the\n"
               "              model_checkpoint_path it names is inspected; without one,\n"
               "              every *.index in DIR\n"
               "  STATEFILE   a `checkpoint` state file\n"
               "\n"
               "  --values[=N]  print tensor values (at most N elements per tensor)\n"
               "  --verify      also fail on a tensor that cannot be checked (unknown dtype)\n"
               "                and end with a verdict line per bundle\n"
               "  --json        one JSON document on stdout\n"
               "  -h, --help    this text\n"
               "\n"
               "Every tensor's crc, data file and string layout is checked either way.\n"
               "\n"
               "Exit status: 0 ok; 1 unreadable, or a tensor corrupt or missing (with or\n"
               "without --verify), or (--verify) a tensor that could not be checked; 2 usage.\n");
}

/* ---- output helpers ---- */

/* s[0..n) in double quotes, escaped for JSON (\n, \t, any other byte
 * outside printable ASCII as \u00XX) or for people (\xXX). */
static void quoted(FILE *f, const char *s, size_t n, bool json)
{
    fputc('"', f);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (json && c == '\n')
            fputs("\\n", f);
        else if (json && c == '\t')
            fputs("\\t", f);
        else if (c < 0x20 || c >= 0x7f)
            fprintf(f, json ? "\\u%04x" : "\\x%02x", c); /* bytes, not UTF-8 code points */
        else
            fputc(c, f);
    }
    fputc('"', f);
}

static void json_str(FILE *f, const char *s, size_t n)
{
    quoted(f, s, n, true);
}

static void print_name(FILE *f, const struct ckpt_entry *e, bool json)
{
    if (json) {
        json_str(f, e->name, e->name_len);
        return;
    }
    bool plain = true;
    for (size_t i = 0; i < e->name_len; i++)
        if ((unsigned char)e->name[i] < 0x20 || (unsigned char)e->name[i] >= 0x7f)
            plain = false;
    if (plain)
        fputs(e->name, f);
    else
        quoted(f, e->name, e->name_len, false);
}

static void shape_str(const struct ckpt_entry *e, char *buf, size_t len)
{
    size_t o = 0;
    o += (size_t)snprintf(buf + o, len - o, "[");
    for (int i = 0; i < e->rank && o < len; i++)
        o += (size_t)snprintf(buf + o, len - o, "%s%" PRId64, i ? "," : "", e->dims[i]);
    if (o < len)
        snprintf(buf + o, len - o, "]");
}

static float half_to_float(uint16_t h)
{
    int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    float v;
    if (e == 0)
        v = ldexpf((float)m, -24);
    else if (e == 31)
        v = m ? NAN : INFINITY;
    else
        v = ldexpf((float)(m | 1024), e - 25);
    return s ? -v : v;
}

static float bf16_to_float(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static void print_real(FILE *f, double v, bool json, bool single)
{
    if (isnan(v))
        fputs(json ? "\"NaN\"" : "nan", f);
    else if (isinf(v))
        fputs(v > 0 ? (json ? "\"Infinity\"" : "inf") : (json ? "\"-Infinity\"" : "-inf"), f);
    else
        fprintf(f, single ? "%.9g" : "%.17g", v);
}

/* Prints element i of a fixed-size-dtype buffer. */
static void print_elem(FILE *f, int dt, const uint8_t *p, bool json)
{
    union {
        float f32;
        double f64;
        int8_t i8;
        int16_t i16;
        int32_t i32;
        int64_t i64;
        uint8_t u8;
        uint16_t u16;
        uint32_t u32;
        uint64_t u64;
        float c64[2];
        double c128[2];
    } u;
    memcpy(&u, p, ckpt_dtype_size(dt));
    switch (dt) {
    case CKPT_DT_FLOAT: print_real(f, u.f32, json, true); break;
    case CKPT_DT_DOUBLE: print_real(f, u.f64, json, false); break;
    case CKPT_DT_HALF: print_real(f, half_to_float(u.u16), json, true); break;
    case CKPT_DT_BFLOAT16: print_real(f, bf16_to_float(u.u16), json, true); break;
    case CKPT_DT_INT8: fprintf(f, "%d", u.i8); break;
    case CKPT_DT_INT16: fprintf(f, "%d", u.i16); break;
    case CKPT_DT_INT32: fprintf(f, "%" PRId32, u.i32); break;
    case CKPT_DT_INT64: fprintf(f, "%" PRId64, u.i64); break;
    case CKPT_DT_UINT8: fprintf(f, "%u", u.u8); break;
    case CKPT_DT_UINT16: fprintf(f, "%u", u.u16); break;
    case CKPT_DT_UINT32: fprintf(f, "%" PRIu32, u.u32); break;
    case CKPT_DT_UINT64: fprintf(f, "%" PRIu64, u.u64); break;
    case CKPT_DT_BOOL: fputs(u.u8 ? "true" : "false", f); break;
    case CKPT_DT_COMPLEX64:
    case CKPT_DT_COMPLEX128: {
        bool s = dt == CKPT_DT_COMPLEX64;
        fputs("[", f);
        print_real(f, s ? u.c64[0] : u.c128[0], json, s);
        fputs(", ", f);
        print_real(f, s ? u.c64[1] : u.c128[1], json, s);
        fputs("]", f);
        break;
    }
    default: fputs(json ? "null" : "?", f);
    }
}

/* Prints up to max values of e as a flat list; returns 0 or the read error. */
static int print_values(FILE *f, struct ckpt_reader *r, const struct ckpt_entry *e,
                        const struct opts *o, struct ckpt_err *err)
{
    int64_t n = ckpt_shape_elements(e->rank, e->dims);
    int64_t show = o->max_values >= 0 && o->max_values < n ? o->max_values : n;
    int rc = 0;
    bool scalar = e->rank == 0;
    struct ckpt_strings *s = NULL;
    uint8_t *buf = NULL;
    size_t es = 0;
    if (e->dtype == CKPT_DT_STRING) {
        if ((rc = ckpt_reader_read_strings(r, e, &s, err)))
            return rc;
    } else {
        es = ckpt_dtype_size(e->dtype);
        size_t bytes = (size_t)show * es;
        if (!(buf = malloc(bytes ? bytes : 1)))
            return -ENOMEM;
        if (show == n)
            rc = ckpt_reader_read(r, e, buf, bytes, err);
        else
            rc = ckpt_reader_read_range(r, e, 0, buf, bytes, err);
    }
    if (!rc) {
        if (!scalar || o->json)
            fputs("[", f);
        for (int64_t i = 0; i < show; i++) {
            if (i)
                fputs(", ", f);
            if (s)
                quoted(f, s->strs[i], s->lens[i], o->json);
            else
                print_elem(f, e->dtype, buf + (size_t)i * es, o->json);
        }
        if (show < n && !o->json)
            fprintf(f, ", ... (%" PRId64 " more)", n - show);
        if (!scalar || o->json)
            fputs("]", f);
    }
    if (s)
        ckpt_strings_free(s);
    free(buf);
    return rc;
}

/* ---- one bundle ---- */

static bool first_bundle = true;

/* A bundle or state file that could not be read: with --json, its error
 * between before and after on stdout; the message on stderr; 1. */
static int unreadable(const struct opts *o, const char *before, const char *msg, const char *after)
{
    if (o->json) {
        fputs(before, stdout);
        json_str(stdout, msg, strlen(msg));
        fputs(after, stdout);
    }
    fprintf(stderr, "psrt inspect: %s\n", msg);
    return 1;
}

static int inspect_bundle(const char *prefix, const struct opts *o)
{
    struct ckpt_reader *r = NULL;
    struct ckpt_err err;
    int bad = 0;
    FILE *f = stdout;

    if (o->json) {
        fprintf(f, "%s\n    {\"prefix\": ", first_bundle ? "" : ",");
        json_str(f, prefix, strlen(prefix));
    }
    first_bundle = false;
    if (ckpt_reader_open(&r, prefix, &err))
        return unreadable(o, ", \"ok\": false, \"error\": ", err.msg, ", \"tensors\": []}");
    const struct ckpt_header *h = ckpt_reader_header(r);
    size_t n = ckpt_reader_count(r);
    if (o->json) {
        fprintf(f,
                ", \"num_shards\": %d, \"endianness\": \"%s\", \"version\": {\"producer\": %d, "
                "\"min_consumer\": %d}, \"tensors\": [",
                h->num_shards, h->endianness ? "big" : "little", h->producer, h->min_consumer);
    } else {
        fprintf(f, "bundle %s: %zu tensor%s, %d shard%s, %s-endian, format version %d\n", prefix, n,
                n == 1 ? "" : "s", h->num_shards, h->num_shards == 1 ? "" : "s",
                h->endianness ? "big" : "little", h->producer);
    }
    int w = 4;
    for (size_t i = 0; i < n; i++)
        if ((int)ckpt_reader_entry(r, i)->name_len > w && ckpt_reader_entry(r, i)->name_len < 60)
            w = (int)ckpt_reader_entry(r, i)->name_len;
    for (size_t i = 0; i < n; i++) {
        const struct ckpt_entry *e = ckpt_reader_entry(r, i);
        const char *dn = ckpt_dtype_name(e->dtype);
        char dtbuf[32], shape[512];
        if (!dn) {
            snprintf(dtbuf, sizeof dtbuf, "dtype%d", e->dtype);
            dn = dtbuf;
        }
        shape_str(e, shape, sizeof shape);
        const char *status = "ok";
        int rc = 0;
        if (e->nslices > 0) {
            status = "sliced";
        } else {
            rc = ckpt_reader_verify_entry(r, e, &err);
            if (rc == -ENOTSUP)
                status = "unchecked";
            else if (rc)
                status = rc == -ENOENT ? "missing" : "BAD";
            if (rc && (rc != -ENOTSUP || o->verify))
                bad = 1;
        }
        if (o->json) {
            fprintf(f, "%s\n      {\"name\": ", i ? "," : "");
            print_name(f, e, true);
            fprintf(f, ", \"dtype\": \"%s\", \"shape\": %s", dn, shape);
            if (e->nslices > 0) {
                fprintf(f, ", \"slices\": %d", e->nslices);
            } else {
                fprintf(f,
                        ", \"shard\": %d, \"offset\": %" PRId64 ", \"size\": %" PRId64
                        ", \"crc32c_stored\": \"0x%08x\"",
                        e->shard_id, e->offset, e->size, e->crc32c);
            }
            fprintf(f, ", \"crc\": \"%s\"", strcmp(status, "BAD") ? status : "bad");
            if (rc) {
                fputs(", \"error\": ", f);
                json_str(f, err.msg, strlen(err.msg));
            }
            if (o->values && !rc && e->nslices == 0) {
                struct ckpt_err verr;
                fputs(", \"values\": ", f);
                if (print_values(f, r, e, o, &verr)) {
                    fputs("null", f);
                    bad = 1;
                }
            }
            fputs("}", f);
        } else {
            fputs("  ", f);
            print_name(f, e, false);
            fprintf(f, "%*s  %-8s %-12s", w > (int)e->name_len ? w - (int)e->name_len : 0, "", dn,
                    shape);
            if (e->nslices > 0)
                fprintf(f, " partitioned: %d slices\n", e->nslices);
            else
                fprintf(f, " shard %d  offset %" PRId64 "  size %" PRId64 "  crc %s\n", e->shard_id,
                        e->offset, e->size, status);
            if (rc && rc != -ENOTSUP)
                fprintf(stderr, "psrt inspect: %s\n", err.msg);
            if (o->values && !rc && e->nslices == 0) {
                struct ckpt_err verr;
                fputs("      = ", f);
                if (print_values(f, r, e, o, &verr)) {
                    fputs("(unreadable)\n", f);
                    fprintf(stderr, "psrt inspect: %s\n", verr.msg);
                    bad = 1;
                } else {
                    fputc('\n', f);
                }
            }
        }
    }
    if (o->json)
        fprintf(f, "%s], \"ok\": %s}", n ? "\n    " : "", bad ? "false" : "true");
    else if (o->verify)
        fprintf(f, "%s: %s\n", prefix,
                bad ? "CORRUPT or incomplete" : "verified: every crc matches");
    ckpt_reader_close(r);
    return bad;
}

/* ---- targets ---- */

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int inspect_index_files(const char *dir, const struct opts *o)
{
    DIR *d = opendir(dir);
    char **names = NULL;
    size_t n = 0;
    int rc = 0;
    if (!d) {
        fprintf(stderr, "psrt inspect: %s: %s\n", dir, strerror(errno));
        return 1;
    }
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t l = strlen(de->d_name);
        if (l > 6 && !strcmp(de->d_name + l - 6, ".index")) {
            char **nn = realloc(names, (n + 1) * sizeof *nn);
            if (!nn)
                break;
            names = nn;
            if (asprintf(&names[n], "%s/%.*s", dir, (int)(l - 6), de->d_name) >= 0)
                n++;
        }
    }
    closedir(d);
    if (!n) {
        fprintf(stderr, "psrt inspect: %s: no `checkpoint` state file and no *.index files\n", dir);
        rc = 1;
    }
    qsort(names, n, sizeof *names, cmp_str);
    for (size_t i = 0; i < n; i++) {
        rc |= inspect_bundle(names[i], o);
        free(names[i]);
    }
    free(names);
    return rc;
}

static void print_state(const char *file, const struct ckpt_state *st, const struct opts *o)
{
    FILE *f = stdout;
    if (o->json) {
        fputs("\"state\": {\"file\": ", f);
        json_str(f, file, strlen(file));
        fputs(", \"model_checkpoint_path\": ", f);
        if (st->model_checkpoint_path)
            json_str(f, st->model_checkpoint_path, strlen(st->model_checkpoint_path));
        else
            fputs("null", f);
        fputs(", \"all_model_checkpoint_paths\": [", f);
        for (size_t i = 0; i < st->n_all; i++) {
            if (i)
                fputs(", ", f);
            json_str(f, st->all_model_checkpoint_paths[i],
                     strlen(st->all_model_checkpoint_paths[i]));
        }
        fputs("]}, ", f);
        return;
    }
    fprintf(f, "checkpoint state %s:\n  model_checkpoint_path: %s\n", file,
            st->model_checkpoint_path ? st->model_checkpoint_path : "(none)");
    for (size_t i = 0; i < st->n_all; i++)
        fprintf(f, "  all_model_checkpoint_paths[%zu]: %s\n", i, st->all_model_checkpoint_paths[i]);
    for (size_t i = 0; i < st->n_timestamps; i++)
        fprintf(f, "  all_model_checkpoint_timestamps[%zu]: %.6f\n", i,
                st->all_model_checkpoint_timestamps[i]);
}

static int inspect_state(const char *file, const char *dir, const struct opts *o)
{
    struct ckpt_state st;
    struct ckpt_err err;
    int rc = 0;
    if (ckpt_state_read(file, &st, &err))
        return unreadable(o, "\"state\": null, \"error\": ", err.msg, ", \"bundles\": [");
    print_state(file, &st, o);
    if (o->json)
        fputs("\"bundles\": [", stdout);
    if (!st.model_checkpoint_path || !*st.model_checkpoint_path) {
        fprintf(stderr, "psrt inspect: %s: names no model_checkpoint_path\n", file);
        rc = 1;
    } else {
        char *p = ckpt_state_resolve(dir, st.model_checkpoint_path);
        rc = p ? inspect_bundle(p, o) : 1;
        free(p);
    }
    ckpt_state_free(&st);
    return rc;
}

static int inspect_target(const char *path, const struct opts *o)
{
    struct stat sb;
    char *tmp = NULL;
    int rc;
    size_t l = strlen(path);

    if (o->json) {
        fputs("{\"target\": ", stdout);
        json_str(stdout, path, l);
        fputs(", ", stdout);
    }
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        if (asprintf(&tmp, "%s/%s", path, CKPT_STATE_FILENAME) < 0)
            return 1;
        if (access(tmp, F_OK) == 0) {
            rc = inspect_state(tmp, path, o);
        } else {
            if (o->json)
                fputs("\"state\": null, \"bundles\": [", stdout);
            rc = inspect_index_files(path, o);
        }
    } else if (l > 6 && !strcmp(path + l - 6, ".index")) {
        tmp = strndup(path, l - 6);
        if (o->json)
            fputs("\"state\": null, \"bundles\": [", stdout);
        rc = tmp ? inspect_bundle(tmp, o) : 1;
    } else {
        char *idx = ckpt_index_name(path);
        bool is_bundle = idx && access(idx, F_OK) == 0;
        free(idx);
        if (is_bundle || stat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) {
            if (o->json)
                fputs("\"state\": null, \"bundles\": [", stdout);
            rc = inspect_bundle(path, o); /* reports a missing PREFIX.index */
        } else {
            char *dir = strdup(path);
            char *slash = dir ? strrchr(dir, '/') : NULL;
            if (slash)
                *slash = 0;
            rc = inspect_state(path, slash ? dir : ".", o);
            free(dir);
        }
    }
    if (o->json)
        printf("\n  ], \"ok\": %s}\n", rc ? "false" : "true");
    free(tmp);
    return rc;
}

int psrt_inspect_main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"values", optional_argument, NULL, 'v'},
        {"verify", no_argument, NULL, 'V'},
        {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct opts o = {false, false, false, -1};
    int c;
    optind = 1;
    opterr = 0; /* one line of our own below, not getopt's and then the usage */
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case 'v':
            o.values = true;
            if (optarg) {
                char *end;
                o.max_values = strtoll(optarg, &end, 10);
                if (*end || o.max_values < 0) {
                    fprintf(stderr, "psrt inspect: --values=N needs a count, not '%s'\n", optarg);
                    return 2;
                }
            }
            break;
        case 'V': o.verify = true; break;
        case 'j': o.json = true; break;
        case 'h': usage(stdout); return 0;
        default:
            fprintf(stderr, "psrt inspect: unknown option '%s' (see psrt inspect --help)\n",
                    argv[optind - 1]);
            return 2;
        }
    }
    if (optind != argc - 1) {
        if (optind == argc)
            usage(stderr);
        else
            fprintf(stderr,
                    "psrt inspect: expected one PREFIX|DIR|STATEFILE, got %d: '%s' "
                    "and '%s'%s (see psrt inspect --help)\n",
                    argc - optind, argv[optind], argv[optind + 1], argc - optind > 2 ? "..." : "");
        return 2;
    }
    int rc = inspect_target(argv[optind], &o);
    fflush(stdout);
    return rc ? 1 : 0;
}
