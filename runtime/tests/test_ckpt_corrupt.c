/*
 * test_ckpt_corrupt.c: damaged and foreign checkpoints end in a clear error
 * (negative errno, message naming the file, the tensor where there is one,
 * and what is wrong), never in a crash or in wrong data: index truncated at
 * every block boundary and at every byte, a bit flipped in every region of
 * the index and every bit of the data, truncated and missing data files,
 * foreign files, damaged string tensors, entries inconsistent with their
 * header.
 */
#include <errno.h>

#include "runtime/ckpt/crc.h"
#include "runtime/ckpt/internal.h"
#include "runtime/tests/test_ckpt_util.h"

/* Opens prefix and reads + verifies everything; returns the first error. */
static int open_and_read_all(const char *prefix, struct ckpt_err *e)
{
    struct ckpt_reader *r;
    int rc = ckpt_reader_open(&r, prefix, e);
    if (rc)
        return rc;
    for (size_t i = 0; i < ckpt_reader_count(r) && !rc; i++) {
        const struct ckpt_entry *en = ckpt_reader_entry(r, i);
        if (en->dtype == CKPT_DT_STRING) {
            struct ckpt_strings *s;
            rc = ckpt_reader_read_strings(r, en, &s, e);
            if (!rc)
                ckpt_strings_free(s);
        } else {
            void *buf = malloc(en->size ? (size_t)en->size : 1);
            rc = ckpt_reader_read(r, en, buf, (size_t)en->size, e);
            free(buf);
        }
    }
    if (!rc)
        rc = ckpt_reader_verify(r, e);
    ckpt_reader_close(r);
    return rc;
}

/* A bundle with several index blocks, strings and floats. */
static void write_multi(const char *prefix)
{
    struct ckpt_writer *w;
    struct ckpt_err e;
    struct ckpt_writer_opts o = {.block_size = 300};
    FL_REQUIRE_EQ(ckpt_writer_open(&w, prefix, &o, &e), 0);
    for (int i = 0; i < 80; i++) {
        char name[64];
        float v[4] = {(float)i, 1, 2, 3};
        int64_t d = 4;
        snprintf(name, sizeof name, "dense_%02d/kernel", i);
        FL_REQUIRE_EQ(ckpt_writer_add(w, name, CKPT_DT_FLOAT, 1, &d, v, sizeof v, &e), 0);
    }
    const char *strs[] = {"vocab", "words", ""};
    int64_t d = 3;
    FL_REQUIRE_EQ(ckpt_writer_add_strings(w, "vocab", 1, &d, strs, NULL, &e), 0);
    FL_REQUIRE_EQ(ckpt_writer_finish(w, 0, &e), 0);
}

static void expect_clear_error(int rc, const struct ckpt_err *e, const char *path, const char *what)
{
    FL_ASSERT_MSG(rc == -EBADMSG, "%s: got %d (%s), want -EBADMSG", what, rc,
                  rc ? e->msg : "success");
    if (rc) {
        FL_ASSERT_CONTAINS(e->msg, path);
        FL_ASSERT_EQ(e->code, rc);
        FL_ASSERT_MSG(strlen(e->msg) > strlen(path) + 10, "%s: message says too little: %s", what,
                      e->msg);
    }
}

FL_TEST(ckpt_corrupt, corrupt_index_truncated_at_every_block_boundary)
{
    const char *prefix = tpath("m");
    write_multi(prefix);
    size_t len;
    unsigned char *orig = slurp(tpath("m.index"), &len);
    FL_REQUIRE(orig != NULL);
    struct ckpt_tbl_block b[256];
    char why[256];
    int nb = ckpt_tbl_blocks(orig, len, b, 256, why, sizeof why);
    FL_REQUIRE_GE(nb, 5); /* >= 3 data blocks + metaindex + index */
    size_t cuts[1024], nc = 0;
    for (int i = 0; i < nb; i++) {
        cuts[nc++] = b[i].off;                 /* block start */
        cuts[nc++] = b[i].off + b[i].size;     /* before the trailer */
        cuts[nc++] = b[i].off + b[i].size + 1; /* inside the trailer */
        cuts[nc++] = b[i].off + b[i].size + 5; /* after the trailer */
    }
    cuts[nc++] = 0;
    cuts[nc++] = len - 48; /* footer start */
    cuts[nc++] = len - 8;  /* before the magic */
    cuts[nc++] = len - 1;
    for (size_t i = 0; i < nc; i++) {
        if (cuts[i] >= len)
            continue;
        FL_REQUIRE_EQ(spit(tpath("m.index"), orig, cuts[i]), 0);
        struct ckpt_err e;
        char what[128];
        snprintf(what, sizeof what, "index truncated to %zu of %zu bytes", cuts[i], len);
        expect_clear_error(open_and_read_all(prefix, &e), &e, tpath("m.index"), what);
    }
    free(orig);
}

FL_TEST(ckpt_corrupt, corrupt_index_truncated_at_every_byte)
{
    const char *prefix = tpath("v");
    FL_REQUIRE_EQ(write_hpt(prefix, 0), 0);
    size_t len;
    unsigned char *orig = slurp(tpath("v.index"), &len);
    FL_REQUIRE(orig != NULL);
    for (size_t cut = 0; cut < len; cut++) {
        FL_REQUIRE_EQ(spit(tpath("v.index"), orig, cut), 0);
        struct ckpt_err e;
        char what[128];
        snprintf(what, sizeof what, "index truncated to %zu bytes", cut);
        expect_clear_error(open_and_read_all(prefix, &e), &e, tpath("v.index"), what);
    }
    free(orig);
}

FL_TEST(ckpt_corrupt, corrupt_index_every_bit_flip_is_detected)
{
    /* every bit of a small index: blocks, trailers, handles, padding, magic */
    const char *prefix = tpath("v");
    FL_REQUIRE_EQ(write_hpt(prefix, 0), 0);
    size_t len;
    unsigned char *orig = slurp(tpath("v.index"), &len);
    FL_REQUIRE(orig != NULL);
    unsigned char *p = malloc(len);
    for (size_t bit = 0; bit < len * 8; bit++) {
        memcpy(p, orig, len);
        p[bit / 8] ^= (unsigned char)(1u << (bit % 8));
        FL_REQUIRE_EQ(spit(tpath("v.index"), p, len), 0);
        struct ckpt_err e;
        char what[128];
        snprintf(what, sizeof what, "index bit %zu flipped", bit);
        int rc = open_and_read_all(prefix, &e);
        expect_clear_error(rc, &e, tpath("v.index"), what);
    }
    free(p);
    free(orig);
}

FL_TEST(ckpt_corrupt, corrupt_index_bit_flip_in_every_region_of_a_large_index)
{
    const char *prefix = tpath("m");
    write_multi(prefix);
    size_t len;
    unsigned char *orig = slurp(tpath("m.index"), &len);
    FL_REQUIRE(orig != NULL);
    struct ckpt_tbl_block b[256];
    char why[256];
    int nb = ckpt_tbl_blocks(orig, len, b, 256, why, sizeof why);
    FL_REQUIRE_GE(nb, 5);
    unsigned char *p = malloc(len);
    size_t spots[2048], ns = 0;
    for (int i = 0; i < nb; i++) {
        /* first, middle, last content byte; the restart count; type; crc */
        spots[ns++] = b[i].off;
        spots[ns++] = b[i].off + b[i].size / 2;
        spots[ns++] = b[i].off + b[i].size - 1;
        spots[ns++] = b[i].off + b[i].size - 4;
        for (int k = 0; k < 5; k++)
            spots[ns++] = b[i].off + b[i].size + (size_t)k;
    }
    for (size_t k = len - 48; k < len; k++)
        spots[ns++] = k; /* the whole footer */
    for (size_t s = 0; s < ns; s++) {
        for (int bit = 0; bit < 8; bit += 3) {
            memcpy(p, orig, len);
            p[spots[s]] ^= (unsigned char)(1u << bit);
            FL_REQUIRE_EQ(spit(tpath("m.index"), p, len), 0);
            struct ckpt_err e;
            char what[128];
            snprintf(what, sizeof what, "byte %zu bit %d flipped", spots[s], bit);
            expect_clear_error(open_and_read_all(prefix, &e), &e, tpath("m.index"), what);
        }
    }
    /* messages say where: a data block's crc, the index block, the footer */
    memcpy(p, orig, len);
    p[b[1].off + 3] ^= 1;
    FL_REQUIRE_EQ(spit(tpath("m.index"), p, len), 0);
    struct ckpt_err e;
    FL_ASSERT_EQ(open_and_read_all(prefix, &e), -EBADMSG);
    FL_ASSERT_CONTAINS(e.msg, "data block 1");
    FL_ASSERT_CONTAINS(e.msg, "checksum mismatch");
    FL_ASSERT_CONTAINS(e.msg, "dense_");
    memcpy(p, orig, len);
    p[len - 1] ^= 0x10;
    FL_REQUIRE_EQ(spit(tpath("m.index"), p, len), 0);
    FL_ASSERT_EQ(open_and_read_all(prefix, &e), -EBADMSG);
    FL_ASSERT_CONTAINS(e.msg, "magic");
    free(p);
    free(orig);
}

FL_TEST(ckpt_corrupt, corrupt_data_every_bit_flip_names_the_tensor)
{
    const char *prefix = tpath("v");
    FL_REQUIRE_EQ(write_hpt(prefix, 0), 0);
    const char *data = tpath("v.data-00000-of-00001");
    size_t len;
    unsigned char *orig = slurp(data, &len);
    FL_REQUIRE_EQ(len, 12);
    unsigned char p[12];
    const char *names[3] = {"a", "b", "c"};
    for (size_t bit = 0; bit < len * 8; bit++) {
        memcpy(p, orig, len);
        p[bit / 8] ^= (unsigned char)(1u << (bit % 8));
        FL_REQUIRE_EQ(spit(data, p, len), 0);
        struct ckpt_reader *r;
        struct ckpt_err e;
        FL_REQUIRE_EQ(ckpt_reader_open(&r, prefix, &e), 0);
        for (int t = 0; t < 3; t++) {
            float v = 0;
            int rc = ckpt_reader_read(r, ckpt_reader_find(r, names[t]), &v, 4, &e);
            if (t == (int)(bit / 32)) {
                FL_ASSERT_EQ(rc, -EBADMSG);
                FL_ASSERT_CONTAINS(e.msg, data);
                char want[32];
                snprintf(want, sizeof want, "tensor '%s'", names[t]);
                FL_ASSERT_CONTAINS(e.msg, want);
                FL_ASSERT_CONTAINS(e.msg, "checksum mismatch");
                FL_ASSERT_STREQ(e.entry, names[t]);
            } else {
                FL_ASSERT_EQ(rc, 0);
            }
        }
        FL_ASSERT_EQ(ckpt_reader_verify(r, &e), -EBADMSG);
        ckpt_reader_close(r);
    }
    free(orig);
}

FL_TEST(ckpt_corrupt, corrupt_data_truncated_or_missing_names_the_file)
{
    const char *prefix = tpath("v");
    FL_REQUIRE_EQ(write_hpt(prefix, 0), 0);
    const char *data = tpath("v.data-00000-of-00001");
    size_t len;
    unsigned char *orig = slurp(data, &len);
    for (size_t cut = 0; cut < len; cut += 2) {
        FL_REQUIRE_EQ(spit(data, orig, cut), 0);
        struct ckpt_reader *r;
        struct ckpt_err e;
        FL_REQUIRE_EQ(ckpt_reader_open(&r, prefix, &e), 0);
        const struct ckpt_entry *c = ckpt_reader_find(r, "c");
        float v;
        FL_ASSERT_EQ(ckpt_reader_read(r, c, &v, 4, &e), -EBADMSG);
        FL_ASSERT_CONTAINS(e.msg, data);
        FL_ASSERT_CONTAINS(e.msg, "tensor 'c'");
        FL_ASSERT_CONTAINS(e.msg, "truncated");
        FL_ASSERT_EQ(ckpt_reader_verify(r, &e), -EBADMSG);
        ckpt_reader_close(r);
    }
    unlink(data);
    struct ckpt_reader *r;
    struct ckpt_err e;
    FL_REQUIRE_EQ(ckpt_reader_open(&r, prefix, &e), 0);
    float v;
    FL_ASSERT_EQ(ckpt_reader_read(r, ckpt_reader_find(r, "b"), &v, 4, &e), -ENOENT);
    FL_ASSERT_STREQ(e.path, data);
    FL_ASSERT_CONTAINS(e.msg, "tensor 'b'");
    FL_ASSERT_CONTAINS(e.msg, "No such file or directory");
    FL_ASSERT_EQ(ckpt_reader_verify(r, &e), -ENOENT);
    ckpt_reader_close(r);
    free(orig);
}

FL_TEST(ckpt_corrupt, corrupt_foreign_files_are_rejected)
{
    const char *prefix = tpath("f");
    const char *idx = tpath("f.index");
    struct ckpt_err e;
    /* empty, text, zeros, an ELF binary */
    FL_REQUIRE_EQ(spit(idx, "", 0), 0);
    expect_clear_error(open_and_read_all(prefix, &e), &e, idx, "empty file");
    FL_ASSERT_CONTAINS(e.msg, "shorter than a table footer");
    const char *text = "model_checkpoint_path: \"model.ckpt-1\"\n"
                       "all_model_checkpoint_paths: \"model.ckpt-1\"\n";
    FL_REQUIRE_EQ(spit(idx, text, strlen(text)), 0);
    expect_clear_error(open_and_read_all(prefix, &e), &e, idx, "text file");
    FL_ASSERT_CONTAINS(e.msg, "magic");
    unsigned char zeros[4096] = {0};
    FL_REQUIRE_EQ(spit(idx, zeros, sizeof zeros), 0);
    expect_clear_error(open_and_read_all(prefix, &e), &e, idx, "zeros");
    size_t n;
    unsigned char *elf = slurp("/bin/sh", &n);
    if (elf) {
        FL_REQUIRE_EQ(spit(idx, elf, n), 0);
        expect_clear_error(open_and_read_all(prefix, &e), &e, idx, "/bin/sh");
        free(elf);
    }
    /* a sound LevelDB table that is not a bundle: no header entry */
    struct ckpt_tbl_builder *t = ckpt_tbl_new(0, false);
    struct ckpt_buf out = {0};
    ckpt_tbl_add(t, "apple", 5, "red", 3);
    ckpt_tbl_add(t, "banana", 6, "yellow", 6);
    FL_REQUIRE_EQ(ckpt_tbl_finish(t, &out), 0);
    ckpt_tbl_free(t);
    FL_REQUIRE_EQ(spit(idx, out.p, out.len), 0);
    ckpt_buf_free(&out);
    expect_clear_error(open_and_read_all(prefix, &e), &e, idx, "table without header");
    FL_ASSERT_CONTAINS(e.msg, "not the bundle header");
    FL_ASSERT_CONTAINS(e.msg, "apple");
}

/* Writes an index holding a header and one hand-made entry named "w". */
static void write_entry_index(const char *idx, const struct ckpt_header *h,
                              const struct ckpt_entry *en)
{
    struct ckpt_tbl_builder *t = ckpt_tbl_new(0, false);
    struct ckpt_buf v = {0}, out = {0};
    ckpt_pb_encode_header(&v, h);
    ckpt_tbl_add(t, "", 0, v.p, v.len);
    v.len = 0;
    ckpt_pb_encode_entry(&v, en);
    ckpt_tbl_add(t, "w", 1, v.p, v.len);
    FL_REQUIRE_EQ(ckpt_tbl_finish(t, &out), 0);
    FL_REQUIRE_EQ(spit(idx, out.p, out.len), 0);
    ckpt_buf_free(&v);
    ckpt_buf_free(&out);
    ckpt_tbl_free(t);
}

FL_TEST(ckpt_corrupt, corrupt_entries_inconsistent_with_header_are_rejected)
{
    const char *prefix = tpath("h");
    const char *idx = tpath("h.index");
    struct ckpt_header h = {.num_shards = 1, .producer = 1};
    int64_t dims[2] = {2, 3}, negdim[1] = {-4};
    struct {
        struct ckpt_entry e;
        struct ckpt_header h;
        const char *want;
    } cases[] = {
        {{.dtype = CKPT_DT_FLOAT, .rank = 2, .dims = dims, .shard_id = 1, .size = 24},
         h,
         "shard 1 out of range"},
        {{.dtype = CKPT_DT_FLOAT, .rank = 2, .dims = dims, .size = 20}, h, "does not match"},
        {{.dtype = CKPT_DT_FLOAT, .rank = 1, .dims = negdim, .size = 0}, h, "dimension 0 is -4"},
        {{.dtype = 0, .rank = 0, .size = 4}, h, "DT_INVALID"},
        {{.dtype = CKPT_DT_STRING, .rank = 2, .dims = dims, .size = 5},
         h,
         "too small for 6 strings"},
        {{.dtype = CKPT_DT_FLOAT, .rank = 0, .offset = -5, .size = 4}, h, "bad offset"},
        {{.dtype = CKPT_DT_FLOAT, .rank = 0, .size = 4},
         (struct ckpt_header){.num_shards = 0, .producer = 1},
         "num_shards 0"},
        {{.dtype = CKPT_DT_FLOAT, .rank = 0, .size = 4},
         (struct ckpt_header){.num_shards = 1, .producer = 1, .min_consumer = 5},
         "min consumer"},
        {{.dtype = CKPT_DT_FLOAT, .rank = 0, .size = 4},
         (struct ckpt_header){.num_shards = 1, .endianness = 1},
         "big-endian"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_entry_index(idx, &cases[i].h, &cases[i].e);
        struct ckpt_reader *r;
        struct ckpt_err e;
        int rc = ckpt_reader_open(&r, prefix, &e);
        FL_ASSERT_MSG(rc < 0, "case %zu opened", i);
        if (rc < 0) {
            FL_ASSERT_CONTAINS(e.msg, idx);
            FL_ASSERT_CONTAINS(e.msg, cases[i].want);
        } else {
            ckpt_reader_close(r);
        }
    }
}

FL_TEST(ckpt_corrupt, corrupt_string_tensor_is_detected)
{
    const char *prefix = tpath("s");
    struct ckpt_writer *w;
    struct ckpt_err e;
    const char *strs[] = {"alpha", "beta", "gamma"};
    int64_t d = 3;
    FL_REQUIRE_EQ(ckpt_writer_open(&w, prefix, NULL, &e), 0);
    FL_REQUIRE_EQ(ckpt_writer_add_strings(w, "words", 1, &d, strs, NULL, &e), 0);
    FL_REQUIRE_EQ(ckpt_writer_finish(w, 0, &e), 0);
    const char *data = tpath("s.data-00000-of-00001");
    size_t len;
    unsigned char *orig = slurp(data, &len);
    FL_REQUIRE_EQ(len, 3 + 4 + 14);
    unsigned char p[64];
    for (size_t bit = 0; bit < len * 8; bit++) {
        memcpy(p, orig, len);
        p[bit / 8] ^= (unsigned char)(1u << (bit % 8));
        FL_REQUIRE_EQ(spit(data, p, len), 0);
        struct ckpt_reader *r;
        FL_REQUIRE_EQ(ckpt_reader_open(&r, prefix, &e), 0);
        struct ckpt_strings *s = NULL;
        int rc = ckpt_reader_read_strings(r, ckpt_reader_find(r, "words"), &s, &e);
        FL_ASSERT_MSG(rc == -EBADMSG, "bit %zu: rc %d", bit, rc);
        if (rc) {
            FL_ASSERT_CONTAINS(e.msg, "tensor 'words'");
            FL_ASSERT_CONTAINS(e.msg, data);
        } else {
            ckpt_strings_free(s);
        }
        ckpt_reader_close(r);
    }
    /* the reason is specific: a length byte changed -> the length checksum */
    memcpy(p, orig, len);
    p[0] ^= 1;
    FL_REQUIRE_EQ(spit(data, p, len), 0);
    FL_ASSERT_EQ(open_and_read_all(prefix, &e), -EBADMSG);
    FL_ASSERT_CONTAINS(e.msg, "length");
    memcpy(p, orig, len);
    p[len - 1] ^= 1;
    FL_REQUIRE_EQ(spit(data, p, len), 0);
    FL_ASSERT_EQ(open_and_read_all(prefix, &e), -EBADMSG);
    FL_ASSERT_CONTAINS(e.msg, "checksum mismatch");
    free(orig);
}
