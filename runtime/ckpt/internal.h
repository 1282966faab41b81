/*
 * internal.h: pieces shared by the files of runtime/ckpt and its fuzz
 * target; not part of the library's public API (see bundle.h, state.h,
 * crc.h).  Growable byte buffers, an allocation arena, varints, the
 * BundleHeaderProto/BundleEntryProto wire codec, the LevelDB-style table
 * builder and parser, error filling and small file-system helpers.
 */
#ifndef CKPT_INTERNAL_H
#define CKPT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime/ckpt/bundle.h"

/* ---- byte buffer: appends never fail; oom is sticky, checked once ---- */
struct ckpt_buf {
    uint8_t *p;
    size_t len, cap;
    bool oom;
};
void ckpt_buf_reserve(struct ckpt_buf *b, size_t extra);
void ckpt_buf_put(struct ckpt_buf *b, const void *d, size_t n);
void ckpt_buf_putc(struct ckpt_buf *b, uint8_t c);
void ckpt_buf_varint(struct ckpt_buf *b, uint64_t v);
void ckpt_buf_fixed32(struct ckpt_buf *b, uint32_t v);
void ckpt_buf_free(struct ckpt_buf *b);

/* Bytes a varint of v takes. */
int ckpt_varint_len(uint64_t v);
/* Decodes a varint at *p (< end), advancing *p.  -1 on truncation or > 10 bytes. */
int ckpt_varint_get(const uint8_t **p, const uint8_t *end, uint64_t *v);

static inline uint32_t ckpt_get32le(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline void ckpt_put32le(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

/* ---- arena: many small allocations freed at once ---- */
struct ckpt_arena {
    struct ckpt_arena_chunk *head;
};
void *ckpt_arena_alloc(struct ckpt_arena *a, size_t n); /* zeroed, 8-aligned; NULL on ENOMEM */
void *ckpt_arena_dup(struct ckpt_arena *a, const void *p, size_t n); /* plus a NUL */
void ckpt_arena_free(struct ckpt_arena *a);

/* ---- errors ---- */
/* Fills e (if not NULL): code, call (may be NULL), path (may be NULL), entry
 * (name/len, may be NULL; escaped for printing), and msg =
 * "PATH: tensor 'ENTRY': <fmt...>" (+ ": strerror" when call is set and
 * fmt is NULL, giving "PATH: call: strerror").  Returns code. */
int ckpt_err_set(struct ckpt_err *e, int code, const char *call, const char *path,
                 const char *entry, size_t entry_len, const char *fmt, ...)
    __attribute__((format(printf, 7, 8)));
/* Printable form of a key (non-printable bytes as \xNN), truncated to fit. */
void ckpt_escape_name(char *out, size_t outlen, const char *name, size_t len);

/* ---- protobuf codec for BundleHeaderProto / BundleEntryProto ---- */
void ckpt_pb_encode_header(struct ckpt_buf *b, const struct ckpt_header *h);
void ckpt_pb_encode_entry(struct ckpt_buf *b, const struct ckpt_entry *e);
/* Decoders: 0, or -EBADMSG with a reason in why; arrays come from the arena
 * (-ENOMEM when it fails). */
int ckpt_pb_decode_header(const uint8_t *p, size_t n, struct ckpt_arena *a, struct ckpt_header *h,
                          char *why, size_t whylen);
int ckpt_pb_decode_entry(const uint8_t *p, size_t n, struct ckpt_arena *a, struct ckpt_entry *e,
                         char *why, size_t whylen);

/* ---- LevelDB-style table (TensorFlow's lib/io/table) ---- */
#define CKPT_TBL_MAGIC 0xdb4775248b80fb57ull
#define CKPT_TBL_FOOTER_LEN 48
#define CKPT_TBL_TRAILER_LEN 5
#define CKPT_TBL_DEFAULT_BLOCK_SIZE 262144

struct ckpt_tbl_builder;
struct ckpt_tbl_builder *ckpt_tbl_new(size_t block_size, bool snappy);
/* Keys must be strictly increasing (bytewise).  -ENOMEM / -EINVAL. */
int ckpt_tbl_add(struct ckpt_tbl_builder *t, const void *key, size_t klen, const void *val,
                 size_t vlen);
/* Finishes the table; *out gets the whole file's bytes (caller frees). */
int ckpt_tbl_finish(struct ckpt_tbl_builder *t, struct ckpt_buf *out);
void ckpt_tbl_free(struct ckpt_tbl_builder *t);

/* Called for every key/value in order; non-zero return stops the walk and
 * is returned (the callback fills the error itself). */
typedef int (*ckpt_tbl_cb)(void *ctx, const uint8_t *key, size_t klen, const uint8_t *val,
                           size_t vlen);
/* Walks a table held in memory, checking footer, handles, block crcs,
 * block structure and key order.  -EBADMSG with why describing the place;
 * -ENOMEM. */
int ckpt_tbl_walk(const uint8_t *file, size_t len, ckpt_tbl_cb cb, void *ctx, char *why,
                  size_t whylen);

/* Lists a table's blocks: the data blocks in index order (kind 0), then the
 * metaindex (kind 1) and the index block (kind 2).  Fills up to max; returns
 * the total count or -EBADMSG (footer and index block must be sound). */
struct ckpt_tbl_block {
    uint64_t off, size; /* contents; the 5-byte trailer follows */
    uint8_t type;       /* 0 raw, 1 snappy */
    int kind;
};
int ckpt_tbl_blocks(const uint8_t *file, size_t len, struct ckpt_tbl_block *out, size_t max,
                    char *why, size_t whylen);

/* ---- reader internals (fuzz target, merge) ---- */
/* Opens a reader over an index held in memory (copied); every shard's data
 * is the same memory buffer `data` (not copied; may be NULL: reads fail).
 * name is used in messages as the prefix. */
int ckpt_reader_open_mem(struct ckpt_reader **rp, const char *name, const void *index,
                         size_t index_len, const void *data, size_t data_len, struct ckpt_err *err);

/* Checks a string tensor's stored bytes (TensorFlow layout) for n elements;
 * on success fills lens[] (if not NULL) and *data_off (start of the string
 * bytes).  0 or -EBADMSG with why. */
int ckpt_strings_check(const uint8_t *p, size_t size, uint64_t n, uint32_t masked_crc,
                       uint64_t *lens, size_t *data_off, char *why, size_t whylen);

/* ---- file-system helpers; -errno ---- */
int ckpt_write_all(int fd, const void *p, size_t n);
int ckpt_pread_all(int fd, void *p, size_t n, uint64_t off, size_t *got);
/* open(path, flags), or with root >= 0: path resolved inside the directory
 * root as if it were "/" (openat2 RESOLVE_IN_ROOT: "..", absolute paths and
 * symlinks never lead out of it).  fd, or -1 with errno. */
int ckpt_open_in(int root, const char *path, int flags);
int ckpt_fsync_dir(const char *dir);  /* dir "" means "." */
char *ckpt_dirname(const char *path); /* malloc'd, "." if none */
int ckpt_mkdir_p(const char *dir, char *failed, size_t failedlen);
void ckpt_random_hex(char *out, size_t nhex); /* nhex chars + NUL */
uint64_t ckpt_random64(void);
/* Writes a whole file atomically: final.tmp-name, write, [fsync], rename,
 * [fsync dir].  tmp_suffix is appended to final for the temp name. */
int ckpt_write_file_atomic(const char *final, const char *tmp_suffix, const void *p, size_t n,
                           bool sync, struct ckpt_err *err);

#endif
