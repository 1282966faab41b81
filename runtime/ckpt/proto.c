/*
 * proto.c: protobuf wire encoding of the two messages a tensor bundle's index
 * holds (tensorflow/core/protobuf/tensor_bundle.proto), written the way
 * protobuf's C++ SerializeAsString does for proto3: fields in number order,
 * scalars equal to 0 left out, set sub-messages always present (an empty
 * shape is "12 00"), oneof `length` of a slice extent present even when 0.
 *
 *   BundleHeaderProto { int32 num_shards = 1; Endianness endianness = 2;
 *                       VersionDef version = 3; }
 *   VersionDef        { int32 producer = 1; int32 min_consumer = 2;
 *                       repeated int32 bad_consumers = 3; }
 *   BundleEntryProto  { DataType dtype = 1; TensorShapeProto shape = 2;
 *                       int32 shard_id = 3; int64 offset = 4; int64 size = 5;
 *                       fixed32 crc32c = 6; repeated TensorSliceProto slices = 7; }
 *   TensorShapeProto  { repeated Dim dim = 2; bool unknown_rank = 3; }
 *   Dim               { int64 size = 1; string name = 2; }
 *   TensorSliceProto  { repeated Extent extent = 1; }
 *   Extent            { int64 start = 1; oneof has_length { int64 length = 2; } }
 *
 * Decoding follows protobuf's rules (unknown fields skipped, last scalar
 * wins, repeated sub-messages accumulate, packed or unpacked repeated ints)
 * but rejects what only corruption produces: truncated varints and lengths,
 * a known field with the wrong wire type, group wire types, field number 0.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/ckpt/internal.h"

enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_I32 = 5 };

/* ---- encoding ---- */

static void put_tag(struct ckpt_buf *b, unsigned field, unsigned wt)
{
    ckpt_buf_varint(b, (uint64_t)field << 3 | wt);
}

static void put_varint_field(struct ckpt_buf *b, unsigned field, uint64_t v)
{
    if (!v)
        return;
    put_tag(b, field, WT_VARINT);
    ckpt_buf_varint(b, v);
}

/* int32 fields are sign-extended to 64 bits on the wire */
static uint64_t i32wire(int32_t v)
{
    return (uint64_t)(int64_t)v;
}

static size_t shape_len(const struct ckpt_entry *e)
{
    size_t n = 0;
    if (e->rank < 0)
        return 2; /* unknown_rank: true */
    for (int i = 0; i < e->rank; i++) {
        size_t dl = e->dims[i] ? 1 + (size_t)ckpt_varint_len((uint64_t)e->dims[i]) : 0;
        n += 1 + (size_t)ckpt_varint_len(dl) + dl;
    }
    return n;
}

static size_t extent_len(const struct ckpt_extent *x)
{
    if (x->length == -1)
        return 0;
    size_t n = 0;
    if (x->start)
        n += 1 + (size_t)ckpt_varint_len((uint64_t)x->start);
    n += 1 + (size_t)ckpt_varint_len((uint64_t)x->length);
    return n;
}

static size_t slice_len(const struct ckpt_slice *s)
{
    size_t n = 0;
    for (int i = 0; i < s->nextents; i++) {
        size_t xl = extent_len(&s->extents[i]);
        n += 1 + (size_t)ckpt_varint_len(xl) + xl;
    }
    return n;
}

void ckpt_pb_encode_entry(struct ckpt_buf *b, const struct ckpt_entry *e)
{
    put_varint_field(b, 1, i32wire(e->dtype));
    put_tag(b, 2, WT_LEN);
    ckpt_buf_varint(b, shape_len(e));
    if (e->rank < 0) {
        put_tag(b, 3, WT_VARINT);
        ckpt_buf_varint(b, 1);
    }
    for (int i = 0; i < e->rank; i++) {
        put_tag(b, 2, WT_LEN);
        size_t dl = e->dims[i] ? 1 + (size_t)ckpt_varint_len((uint64_t)e->dims[i]) : 0;
        ckpt_buf_varint(b, dl);
        put_varint_field(b, 1, (uint64_t)e->dims[i]);
    }
    put_varint_field(b, 3, i32wire(e->shard_id));
    put_varint_field(b, 4, (uint64_t)e->offset);
    put_varint_field(b, 5, (uint64_t)e->size);
    if (e->crc32c) {
        put_tag(b, 6, WT_I32);
        ckpt_buf_fixed32(b, e->crc32c);
    }
    for (int s = 0; s < e->nslices; s++) {
        const struct ckpt_slice *sl = &e->slices[s];
        put_tag(b, 7, WT_LEN);
        ckpt_buf_varint(b, slice_len(sl));
        for (int i = 0; i < sl->nextents; i++) {
            const struct ckpt_extent *x = &sl->extents[i];
            put_tag(b, 1, WT_LEN);
            ckpt_buf_varint(b, extent_len(x));
            if (x->length == -1)
                continue;
            put_varint_field(b, 1, (uint64_t)x->start);
            put_tag(b, 2, WT_VARINT);
            ckpt_buf_varint(b, (uint64_t)x->length);
        }
    }
}

void ckpt_pb_encode_header(struct ckpt_buf *b, const struct ckpt_header *h)
{
    put_varint_field(b, 1, i32wire(h->num_shards));
    put_varint_field(b, 2, i32wire(h->endianness));
    struct ckpt_buf v = {0};
    put_varint_field(&v, 1, i32wire(h->producer));
    put_varint_field(&v, 2, i32wire(h->min_consumer));
    if (h->nbad_consumers > 0) {
        size_t pl = 0;
        for (int i = 0; i < h->nbad_consumers; i++)
            pl += (size_t)ckpt_varint_len(i32wire(h->bad_consumers[i]));
        put_tag(&v, 3, WT_LEN);
        ckpt_buf_varint(&v, pl);
        for (int i = 0; i < h->nbad_consumers; i++)
            ckpt_buf_varint(&v, i32wire(h->bad_consumers[i]));
    }
    if (v.oom)
        b->oom = true;
    put_tag(b, 3, WT_LEN);
    ckpt_buf_varint(b, v.len);
    ckpt_buf_put(b, v.p, v.len);
    ckpt_buf_free(&v);
}

/* ---- decoding ---- */

struct pb {
    const uint8_t *p, *end;
    const char *msg; /* message name, for reasons */
    char *why;
    size_t whylen;
};

static int bad(struct pb *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int bad(struct pb *r, const char *fmt, ...)
{
    int n = snprintf(r->why, r->whylen, "%s: ", r->msg);
    if (n < 0 || (size_t)n >= r->whylen)
        n = 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->why + n, r->whylen - (size_t)n, fmt, ap);
    va_end(ap);
    return -EBADMSG;
}

/* Next field header; 1 at end of message, 0 with field and wire type set, <0 error. */
static int next_field(struct pb *r, uint32_t *field, unsigned *wt)
{
    uint64_t tag;
    if (r->p == r->end)
        return 1;
    if (ckpt_varint_get(&r->p, r->end, &tag) < 0)
        return bad(r, "truncated field tag");
    *wt = (unsigned)(tag & 7);
    if ((tag >> 3) == 0 || (tag >> 3) > 0x1fffffff)
        return bad(r, "invalid field number %llu", (unsigned long long)(tag >> 3));
    *field = (uint32_t)(tag >> 3);
    if (*wt == 3 || *wt == 4 || *wt > 5)
        return bad(r, "field %u: unsupported wire type %u", *field, *wt);
    return 0;
}

static int get_varint(struct pb *r, uint32_t field, uint64_t *v)
{
    if (ckpt_varint_get(&r->p, r->end, v) < 0)
        return bad(r, "field %u: truncated or overlong varint", field);
    return 0;
}

static int get_len(struct pb *r, uint32_t field, struct pb *sub, const char *subname)
{
    uint64_t n;
    if (ckpt_varint_get(&r->p, r->end, &n) < 0)
        return bad(r, "field %u: truncated length", field);
    if (n > (uint64_t)(r->end - r->p))
        return bad(r, "field %u: length %llu runs past the end (%zu bytes left)", field,
                   (unsigned long long)n, (size_t)(r->end - r->p));
    *sub = *r;
    sub->end = r->p + n;
    sub->msg = subname;
    r->p += n;
    return 0;
}

static int skip(struct pb *r, uint32_t field, unsigned wt)
{
    uint64_t v;
    struct pb sub;
    switch (wt) {
    case WT_VARINT: return get_varint(r, field, &v);
    case WT_I64:
        if (r->end - r->p < 8)
            return bad(r, "field %u: truncated fixed64", field);
        r->p += 8;
        return 0;
    case WT_I32:
        if (r->end - r->p < 4)
            return bad(r, "field %u: truncated fixed32", field);
        r->p += 4;
        return 0;
    case WT_LEN: return get_len(r, field, &sub, r->msg);
    }
    return bad(r, "field %u: unsupported wire type %u", field, wt);
}

static int want(struct pb *r, uint32_t field, unsigned wt, unsigned expected)
{
    if (wt != expected)
        return bad(r, "field %u has wire type %u, expected %u", field, wt, expected);
    return 0;
}

/* small growable arrays for decoding */
struct i64v {
    int64_t *v;
    size_t n, cap;
};
static int i64v_push(struct i64v *a, int64_t x)
{
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 8;
        int64_t *v = realloc(a->v, cap * sizeof *v);
        if (!v)
            return -ENOMEM;
        a->v = v;
        a->cap = cap;
    }
    a->v[a->n++] = x;
    return 0;
}

static int decode_shape(struct pb *r, struct i64v *dims, bool *unknown_rank)
{
    uint32_t f;
    unsigned wt;
    int rc;
    while ((rc = next_field(r, &f, &wt)) == 0) {
        if (f == 2) {
            struct pb d;
            if ((rc = want(r, f, wt, WT_LEN)) || (rc = get_len(r, f, &d, "TensorShapeProto.Dim")))
                return rc;
            int64_t size = 0;
            uint32_t df;
            unsigned dwt;
            while ((rc = next_field(&d, &df, &dwt)) == 0) {
                if (df == 1) {
                    uint64_t v;
                    if ((rc = want(&d, df, dwt, WT_VARINT)) || (rc = get_varint(&d, df, &v)))
                        return rc;
                    size = (int64_t)v;
                } else if ((rc = skip(&d, df, dwt))) {
                    return rc;
                }
            }
            if (rc < 0)
                return rc;
            if (dims->n >= CKPT_MAX_RANK)
                return bad(r, "more than %d dimensions", CKPT_MAX_RANK);
            if ((rc = i64v_push(dims, size)))
                return rc;
        } else if (f == 3) {
            uint64_t v;
            if ((rc = want(r, f, wt, WT_VARINT)) || (rc = get_varint(r, f, &v)))
                return rc;
            *unknown_rank = v != 0;
        } else if ((rc = skip(r, f, wt))) {
            return rc;
        }
    }
    return rc < 0 ? rc : 0;
}

struct slicev {
    struct ckpt_slice *v;
    size_t n, cap;
};

static int decode_slice(struct pb *r, struct ckpt_arena *a, struct ckpt_slice *out)
{
    struct i64v st = {0}, ln = {0};
    uint32_t f;
    unsigned wt;
    int rc;
    while ((rc = next_field(r, &f, &wt)) == 0) {
        if (f != 1) {
            if ((rc = skip(r, f, wt)))
                goto done;
            continue;
        }
        struct pb x;
        if ((rc = want(r, f, wt, WT_LEN)) || (rc = get_len(r, f, &x, "TensorSliceProto.Extent")))
            goto done;
        int64_t start = 0, length = -1;
        uint32_t xf;
        unsigned xwt;
        while ((rc = next_field(&x, &xf, &xwt)) == 0) {
            uint64_t v;
            if (xf == 1 || xf == 2) {
                if ((rc = want(&x, xf, xwt, WT_VARINT)) || (rc = get_varint(&x, xf, &v)))
                    goto done;
                if (xf == 1)
                    start = (int64_t)v;
                else
                    length = (int64_t)v;
            } else if ((rc = skip(&x, xf, xwt))) {
                goto done;
            }
        }
        if (rc < 0)
            goto done;
        if (st.n >= CKPT_MAX_RANK) {
            rc = bad(r, "more than %d extents", CKPT_MAX_RANK);
            goto done;
        }
        if ((rc = i64v_push(&st, start)) || (rc = i64v_push(&ln, length)))
            goto done;
    }
    if (rc < 0)
        goto done;
    rc = 0;
    out->nextents = (int)st.n;
    if (st.n) {
        struct ckpt_extent *x = ckpt_arena_alloc(a, st.n * sizeof *x);
        if (!x) {
            rc = -ENOMEM;
            goto done;
        }
        for (size_t i = 0; i < st.n; i++) {
            x[i].start = st.v[i];
            x[i].length = ln.v[i];
        }
        out->extents = x;
    }
done:
    free(st.v);
    free(ln.v);
    return rc;
}

int ckpt_pb_decode_entry(const uint8_t *p, size_t n, struct ckpt_arena *a, struct ckpt_entry *e,
                         char *why, size_t whylen)
{
    struct pb r = {p, p + n, "BundleEntryProto", why, whylen};
    struct i64v dims = {0};
    struct slicev sl = {0};
    bool unknown_rank = false, have_shape = false;
    uint32_t f;
    unsigned wt;
    uint64_t v;
    int rc;

    e->dtype = 0;
    e->rank = 0;
    e->dims = NULL;
    e->shard_id = 0;
    e->offset = e->size = 0;
    e->crc32c = 0;
    e->nslices = 0;
    e->slices = NULL;
    while ((rc = next_field(&r, &f, &wt)) == 0) {
        switch (f) {
        case 1:
        case 3:
        case 4:
        case 5:
            if ((rc = want(&r, f, wt, WT_VARINT)) || (rc = get_varint(&r, f, &v)))
                goto done;
            if (f == 1)
                e->dtype = (int)(int32_t)v;
            else if (f == 3)
                e->shard_id = (int32_t)v;
            else if (f == 4)
                e->offset = (int64_t)v;
            else
                e->size = (int64_t)v;
            break;
        case 2: {
            struct pb s;
            if ((rc = want(&r, f, wt, WT_LEN)) || (rc = get_len(&r, f, &s, "TensorShapeProto")))
                goto done;
            have_shape = true;
            if ((rc = decode_shape(&s, &dims, &unknown_rank)))
                goto done;
            break;
        }
        case 6:
            if ((rc = want(&r, f, wt, WT_I32)))
                goto done;
            if (r.end - r.p < 4) {
                rc = bad(&r, "field 6: truncated fixed32");
                goto done;
            }
            e->crc32c = ckpt_get32le(r.p);
            r.p += 4;
            break;
        case 7: {
            struct pb s;
            if ((rc = want(&r, f, wt, WT_LEN)) || (rc = get_len(&r, f, &s, "TensorSliceProto")))
                goto done;
            if (sl.n == sl.cap) {
                size_t cap = sl.cap ? sl.cap * 2 : 4;
                if (cap > (size_t)1 << 24) {
                    rc = bad(&r, "too many slices");
                    goto done;
                }
                struct ckpt_slice *nv = realloc(sl.v, cap * sizeof *nv);
                if (!nv) {
                    rc = -ENOMEM;
                    goto done;
                }
                sl.v = nv;
                sl.cap = cap;
            }
            memset(&sl.v[sl.n], 0, sizeof sl.v[sl.n]);
            if ((rc = decode_slice(&s, a, &sl.v[sl.n])))
                goto done;
            sl.n++;
            break;
        }
        default:
            if ((rc = skip(&r, f, wt)))
                goto done;
        }
    }
    if (rc < 0)
        goto done;
    rc = 0;
    (void)have_shape;
    if (unknown_rank) {
        e->rank = -1;
    } else {
        e->rank = (int)dims.n;
        if (dims.n) {
            int64_t *d = ckpt_arena_alloc(a, dims.n * sizeof *d);
            if (!d) {
                rc = -ENOMEM;
                goto done;
            }
            memcpy(d, dims.v, dims.n * sizeof *d);
            e->dims = d;
        }
    }
    if (sl.n) {
        struct ckpt_slice *s = ckpt_arena_alloc(a, sl.n * sizeof *s);
        if (!s) {
            rc = -ENOMEM;
            goto done;
        }
        memcpy(s, sl.v, sl.n * sizeof *s);
        e->slices = s;
        e->nslices = (int)sl.n;
    }
done:
    free(dims.v);
    free(sl.v);
    return rc;
}

/* One bad_consumers value read from q (the VersionDef s itself, or its
 * packed run) and kept in badc; errors name s. */
static int bad_consumer(struct pb *s, struct pb *q, uint32_t sf, struct i64v *badc)
{
    uint64_t v;
    int rc;
    if ((rc = get_varint(q, sf, &v)))
        return rc;
    if (badc->n >= 4096)
        return bad(s, "too many bad_consumers");
    return i64v_push(badc, (int32_t)v);
}

int ckpt_pb_decode_header(const uint8_t *p, size_t n, struct ckpt_arena *a, struct ckpt_header *h,
                          char *why, size_t whylen)
{
    struct pb r = {p, p + n, "BundleHeaderProto", why, whylen};
    struct i64v badc = {0};
    uint32_t f;
    unsigned wt;
    uint64_t v;
    int rc;

    memset(h, 0, sizeof *h);
    while ((rc = next_field(&r, &f, &wt)) == 0) {
        if (f == 1 || f == 2) {
            if ((rc = want(&r, f, wt, WT_VARINT)) || (rc = get_varint(&r, f, &v)))
                goto done;
            if (f == 1)
                h->num_shards = (int32_t)v;
            else
                h->endianness = (int)(int32_t)v;
        } else if (f == 3) {
            struct pb s;
            if ((rc = want(&r, f, wt, WT_LEN)) || (rc = get_len(&r, f, &s, "VersionDef")))
                goto done;
            uint32_t sf;
            unsigned swt;
            while ((rc = next_field(&s, &sf, &swt)) == 0) {
                if (sf == 1 || sf == 2) {
                    if ((rc = want(&s, sf, swt, WT_VARINT)) || (rc = get_varint(&s, sf, &v)))
                        goto done;
                    if (sf == 1)
                        h->producer = (int32_t)v;
                    else
                        h->min_consumer = (int32_t)v;
                } else if (sf == 3 && swt == WT_VARINT) {
                    if ((rc = bad_consumer(&s, &s, sf, &badc)))
                        goto done;
                } else if (sf == 3 && swt == WT_LEN) {
                    struct pb pk;
                    if ((rc = get_len(&s, sf, &pk, "VersionDef.bad_consumers")))
                        goto done;
                    while (pk.p < pk.end)
                        if ((rc = bad_consumer(&s, &pk, sf, &badc)))
                            goto done;
                } else if (sf == 3) {
                    rc = bad(&s, "field 3 has wire type %u, expected 0 or 2", swt);
                    goto done;
                } else if ((rc = skip(&s, sf, swt))) {
                    goto done;
                }
            }
            if (rc < 0)
                goto done;
        } else if ((rc = skip(&r, f, wt))) {
            goto done;
        }
    }
    if (rc < 0)
        goto done;
    rc = 0;
    if (badc.n) {
        int32_t *b = ckpt_arena_alloc(a, badc.n * sizeof *b);
        if (!b) {
            rc = -ENOMEM;
            goto done;
        }
        for (size_t i = 0; i < badc.n; i++)
            b[i] = (int32_t)badc.v[i];
        h->bad_consumers = b;
        h->nbad_consumers = (int)badc.n;
    }
done:
    free(badc.v);
    return rc;
}
