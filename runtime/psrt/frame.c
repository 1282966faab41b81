/*
 * frame.c: psrt's wire frames and the byte buffers messages are built in.
 *
 * A frame is a 40-byte header (magic, version, kind, op, status, flags, id,
 * payload length, payload crc32c, header crc32c; layout in psrt.h) and the
 * payload.  Decoding rejects a wrong magic, version or kind (-EPROTO), a
 * header whose crc does not match (-EBADMSG) and a length above the
 * receiver's limit (-EMSGSIZE) before a single payload byte is read; the
 * payload crc is checked by the receiver after reading it (rpc.c).
 * A streamed request's payload comes in segments, each with a header of
 * its own (length, crc, sequence number, header crc): see psrt.h.
 * Buffers: little-endian put/get with a read cursor; a get past the end
 * sets `bad` instead of reading out of bounds, so parsers check once.
 */
#include "runtime/psrt/psrt.h"
#include "runtime/ckpt/crc.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void *psrt_alloc_big(size_t n)
{
    /* plain malloc: main() raises glibc's mmap and trim thresholds so that
     * freed big buffers stay mapped and are reused by the next save or
     * pull instead of being faulted in again */
    return malloc(n ? n : 1);
}

uint32_t psrt_crc32c(uint32_t crc, const void *p, size_t n)
{
    return ckpt_crc32c_extend(crc, p, n);
}

static void put32(uint8_t *p, uint32_t v)
{
    memcpy(p, &v, 4);
}
static void put64(uint8_t *p, uint64_t v)
{
    memcpy(p, &v, 8);
}
static uint32_t get32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}
static uint64_t get64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

void psrt_frame_encode(uint8_t out[PSRT_FRAME_HDR], const struct psrt_frame_hdr *h)
{
    put32(out, PSRT_FRAME_MAGIC);
    out[4] = h->version ? h->version : PSRT_FRAME_VERSION;
    out[5] = h->kind;
    uint16_t op = h->op;
    memcpy(out + 6, &op, 2);
    put32(out + 8, (uint32_t)h->status);
    put32(out + 12, h->flags);
    put64(out + 16, h->id);
    put64(out + 24, h->len);
    put32(out + 32, h->pcrc);
    put32(out + 36, psrt_crc32c(0, out, 36));
}

int psrt_frame_decode(const uint8_t in[PSRT_FRAME_HDR], struct psrt_frame_hdr *h, uint64_t max_len)
{
    if (get32(in) != PSRT_FRAME_MAGIC)
        return -EPROTO;
    if (psrt_crc32c(0, in, 36) != get32(in + 36))
        return -EBADMSG;
    if (in[4] != PSRT_FRAME_VERSION ||
        (in[5] != PSRT_KIND_REQ && in[5] != PSRT_KIND_RESP && in[5] != PSRT_KIND_STREAM))
        return -EPROTO;
    h->version = in[4];
    h->kind = in[5];
    memcpy(&h->op, in + 6, 2);
    h->status = (int32_t)get32(in + 8);
    h->flags = get32(in + 12);
    h->id = get64(in + 16);
    h->len = get64(in + 24);
    h->pcrc = get32(in + 32);
    if (h->len > max_len)
        return -EMSGSIZE;
    return 0;
}

void psrt_seg_encode(uint8_t out[PSRT_SEG_HDR], uint32_t len, uint32_t crc, uint32_t seq)
{
    put32(out, len);
    put32(out + 4, crc);
    put32(out + 8, seq);
    put32(out + 12, psrt_crc32c(0, out, 12));
}

int psrt_seg_decode(const uint8_t in[PSRT_SEG_HDR], uint32_t *len, uint32_t *crc, uint32_t seq)
{
    if (psrt_crc32c(0, in, 12) != get32(in + 12))
        return -EBADMSG;
    if (get32(in + 8) != seq)
        return -EPROTO;
    *len = get32(in);
    *crc = get32(in + 4);
    return 0;
}

void psrt_buf_free(struct psrt_buf *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}

void psrt_buf_reset(struct psrt_buf *b)
{
    b->len = b->off = 0;
    b->bad = false;
}

int psrt_buf_reserve(struct psrt_buf *b, size_t extra)
{
    if (b->len + extra <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra)
        cap *= 2;
    uint8_t *p;
    if (cap >= (4u << 20) && b->len < (1u << 20)) {
        p = psrt_alloc_big(cap);
        if (p && b->len)
            memcpy(p, b->p, b->len);
        if (p)
            free(b->p);
    } else {
        p = realloc(b->p, cap);
    }
    if (!p) {
        b->bad = true;
        return -ENOMEM;
    }
    b->p = p;
    b->cap = cap;
    return 0;
}

void psrt_buf_put(struct psrt_buf *b, const void *p, size_t n)
{
    if (!n || psrt_buf_reserve(b, n))
        return;
    memcpy(b->p + b->len, p, n);
    b->len += n;
}

void psrt_buf_u32(struct psrt_buf *b, uint32_t v)
{
    psrt_buf_put(b, &v, 4);
}
void psrt_buf_u64(struct psrt_buf *b, uint64_t v)
{
    psrt_buf_put(b, &v, 8);
}

void psrt_buf_str(struct psrt_buf *b, const char *s)
{
    size_t n = strlen(s);
    psrt_buf_u32(b, (uint32_t)n);
    psrt_buf_put(b, s, n);
}

void psrt_buf_align8(struct psrt_buf *b)
{
    static const uint8_t zero[8];
    size_t pad = (8 - (b->len & 7)) & 7;
    psrt_buf_put(b, zero, pad);
}

const void *psrt_buf_get(struct psrt_buf *b, size_t n)
{
    if (b->bad || n > b->len - b->off) {
        b->bad = true;
        return NULL;
    }
    const void *p = b->p + b->off;
    b->off += n;
    return p;
}

/* The next n bytes into v; v unchanged when they are not there. */
static void get_into(struct psrt_buf *b, void *v, size_t n)
{
    const void *p = psrt_buf_get(b, n);
    if (p)
        memcpy(v, p, n);
}

uint32_t psrt_buf_get_u32(struct psrt_buf *b)
{
    uint32_t v = 0;
    get_into(b, &v, 4);
    return v;
}

uint64_t psrt_buf_get_u64(struct psrt_buf *b)
{
    uint64_t v = 0;
    get_into(b, &v, 8);
    return v;
}

int psrt_buf_get_str(struct psrt_buf *b, char *out, size_t outlen)
{
    uint32_t n = psrt_buf_get_u32(b);
    const char *p = psrt_buf_get(b, n);
    if (!p || n >= outlen) {
        b->bad = true;
        if (outlen)
            out[0] = 0;
        return -EBADMSG;
    }
    memcpy(out, p, n);
    out[n] = 0;
    return 0;
}

void psrt_buf_skip_align8(struct psrt_buf *b)
{
    size_t pad = (8 - (b->off & 7)) & 7;
    psrt_buf_get(b, pad);
}
