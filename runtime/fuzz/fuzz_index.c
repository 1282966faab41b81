/*
 * fuzz_index.c: libFuzzer target for the tensor bundle reader.  An input is
 * a 4-byte little-endian word W, then L = W & 0x7fffffff bytes of .index
 * file, then the bytes of the data file (every shard reads the same bytes).
 * When W's top bit is set, the target first rewrites every block trailer's
 * crc to match the (mutated) block, so that mutations reach the block and
 * protobuf parsers instead of stopping at the checksum.  The target
 * opens the index from memory (footer, block crcs, snappy blocks, restart
 * arrays, key order, header and entry protobufs, entry checks) and, when it
 * opens, reads, verifies and decodes every tensor, looks each name up and
 * reads byte ranges: any crash, hang, leak or sanitizer report is a bug.
 * Built and run by ci/fuzz (`make fuzz`).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/ckpt/bundle.h"
#include "runtime/ckpt/crc.h"
#include "runtime/ckpt/internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fix_crc(uint8_t *idx, size_t il, uint64_t off, uint64_t n)
{
    if (off > il || n > il - off || il - off - n < CKPT_TBL_TRAILER_LEN)
        return;
    uint32_t crc = ckpt_crc32c_extend(ckpt_crc32c(idx + off, n), idx + off + n, 1);
    ckpt_put32le(idx + off + n + 1, ckpt_crc_mask(crc));
}

/* Makes every block crc of a mutated index right again (best effort). */
static void fix_crcs(uint8_t *idx, size_t il)
{
    uint64_t h[4];
    struct ckpt_tbl_block blocks[64];
    char why[256];
    if (il < CKPT_TBL_FOOTER_LEN)
        return;
    const uint8_t *p = idx + il - CKPT_TBL_FOOTER_LEN, *end = p + 40;
    for (int i = 0; i < 4; i++)
        if (ckpt_varint_get(&p, end, &h[i]) < 0)
            return;
    fix_crc(idx, il, h[0], h[1]);
    fix_crc(idx, il, h[2], h[3]);
    int n = ckpt_tbl_blocks(idx, il, blocks, 64, why, sizeof why);
    for (int i = 0; i < n && i < 64; i++)
        if (blocks[i].kind == 0)
            fix_crc(idx, il, blocks[i].off, blocks[i].size);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct ckpt_reader *r;
    struct ckpt_err err;
    if (size < 4)
        return 0;
    uint32_t word = ckpt_get32le(data);
    size_t il = word & 0x7fffffff;
    if (il > size - 4)
        il = size - 4;
    const uint8_t *dat = data + 4 + il;
    size_t dl = size - 4 - il;
    uint8_t *index = malloc(il ? il : 1);
    if (!index)
        return 0;
    memcpy(index, data + 4, il);
    if (word & 0x80000000u)
        fix_crcs(index, il);
    int rc = ckpt_reader_open_mem(&r, "fuzz/bundle", index, il, dat, dl, &err);
    free(index);
    if (rc)
        return 0;
    for (size_t i = 0; i < ckpt_reader_count(r); i++) {
        const struct ckpt_entry *e = ckpt_reader_entry(r, i);
        if (ckpt_reader_find(r, e->name) == NULL && strlen(e->name) == e->name_len)
            abort(); /* every listed name must be found again */
        ckpt_reader_verify_entry(r, e, &err);
        if (e->size >= 0 && (uint64_t)e->size <= dl) {
            void *buf = malloc(e->size ? (size_t)e->size : 1);
            if (buf) {
                ckpt_reader_read(r, e, buf, (size_t)e->size, &err);
                if (e->size > 2)
                    ckpt_reader_read_range(r, e, 1, buf, (size_t)e->size - 2, &err);
                free(buf);
            }
        }
        if (e->dtype == CKPT_DT_STRING) {
            struct ckpt_strings *s;
            if (ckpt_reader_read_strings(r, e, &s, &err) == 0) {
                for (size_t k = 0; k < s->n; k++)
                    if (strlen(s->strs[k]) > s->lens[k])
                        abort();
                ckpt_strings_free(s);
            }
        }
    }
    ckpt_reader_verify(r, &err);
    ckpt_reader_close(r);
    return 0;
}
