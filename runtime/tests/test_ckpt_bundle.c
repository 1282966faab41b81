/*
 * test_ckpt_bundle.c: the tensor bundle writer and reader: byte identity
 * with TensorFlow's own files, reading them, round trips of every dtype,
 * empty and large tensors, several index blocks (raw and snappy), streaming,
 * alignment, atomic and durable writes, argument errors, file names.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <sched.h>
#include <sys/mount.h>

#include "runtime/ckpt/crc.h"
#include "runtime/ckpt/internal.h"
#include "runtime/tests/test_ckpt_util.h"

static const char *shared_bundle(const char *name)
{
    static char p[4096];
    const char *s = fl_test_shared();
    if (!s)
        FL_SKIP("../shared is absent: no TensorFlow reference bundles");
    snprintf(p, sizeof p, "%s/testdata/tf-bundles/%s/variables", s, name);
    char idx[4200];
    snprintf(idx, sizeof idx, "%s.index", p);
    if (!exists(idx))
        FL_SKIP("%s is absent", idx);
    return p;
}

FL_TEST(ckpt_bundle, bundle_write_matches_tensorflow_half_plus_three)
{
    const char *ref = shared_bundle("half_plus_three");
    FL_REQUIRE_EQ(write_hpt(tpath("variables"), 0), 0);
    const char *suffixes[] = {".index", ".data-00000-of-00001"};
    for (int i = 0; i < 2; i++) {
        char refp[4200];
        size_t la, lb;
        snprintf(refp, sizeof refp, "%s%s", ref, suffixes[i]);
        unsigned char *a = slurp(tpath("variables%s", suffixes[i]), &la);
        unsigned char *b = slurp(refp, &lb);
        FL_REQUIRE(a && b);
        FL_ASSERT_EQ(la, lb);
        FL_ASSERT_MEMEQ(a, b, la < lb ? la : lb);
        free(a);
        free(b);
    }
}

FL_TEST(ckpt_bundle, bundle_read_tensorflow_half_plus_three_and_counter)
{
    struct ckpt_reader *r;
    struct ckpt_err e;
    FL_REQUIRE_EQ(ckpt_reader_open(&r, shared_bundle("half_plus_three"), &e), 0);
    FL_ASSERT_EQ(ckpt_reader_header(r)->num_shards, 1);
    FL_ASSERT_EQ(ckpt_reader_header(r)->producer, 1);
    FL_REQUIRE_EQ(ckpt_reader_count(r), 3);
    const char *names[] = {"a", "b", "c"};
    float want[] = {0.5f, 3, 3};
    for (int i = 0; i < 3; i++) {
        const struct ckpt_entry *en = ckpt_reader_entry(r, (size_t)i);
        FL_ASSERT_STREQ(en->name, names[i]);
        FL_ASSERT_EQ(en->dtype, CKPT_DT_FLOAT);
        FL_ASSERT_EQ(en->rank, 0);
        FL_ASSERT(ckpt_reader_find(r, names[i]) == en);
        float v = -1;
        FL_ASSERT_EQ(ckpt_reader_read(r, en, &v, sizeof v, &e), 0);
        FL_ASSERT(v == want[i]);
    }
    FL_ASSERT(ckpt_reader_find(r, "d") == NULL);
    FL_ASSERT_EQ(ckpt_reader_verify(r, &e), 0);
    ckpt_reader_close(r);

    FL_REQUIRE_EQ(ckpt_reader_open(&r, shared_bundle("counter"), &e), 0);
    FL_REQUIRE_EQ(ckpt_reader_count(r), 1);
    const struct ckpt_entry *c = ckpt_reader_find(r, "counter");
    FL_REQUIRE(c != NULL);
    float v = -1;
    FL_ASSERT_EQ(ckpt_reader_read(r, c, &v, 4, &e), 0);
    FL_ASSERT(v == 0.0f);
    ckpt_reader_close(r);
}

static void fill(uint8_t *p, size_t n, unsigned seed)
{
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        p[i] = (uint8_t)x;
    }
}

FL_TEST(ckpt_bundle, bundle_roundtrip_every_dtype)
{
    static const int dts[] = {CKPT_DT_FLOAT,    CKPT_DT_DOUBLE,    CKPT_DT_INT32,     CKPT_DT_INT64,
                              CKPT_DT_UINT8,    CKPT_DT_BOOL,      CKPT_DT_INT8,      CKPT_DT_INT16,
                              CKPT_DT_UINT16,   CKPT_DT_UINT32,    CKPT_DT_UINT64,    CKPT_DT_HALF,
                              CKPT_DT_BFLOAT16, CKPT_DT_COMPLEX64, CKPT_DT_COMPLEX128};
    const size_t nd = sizeof dts / sizeof dts[0];
    struct ckpt_writer *w;
    struct ckpt_err e;
    const char *prefix = tpath("all/model.ckpt-7");
    int64_t dims[3] = {3, 1, 5};
    uint8_t data[15 * 16], back[15 * 16];
    FL_REQUIRE_EQ(ckpt_writer_open(&w, prefix, NULL, &e), 0);
    for (size_t i = 0; i < nd; i++) {
        char name[64];
        snprintf(name, sizeof name, "var_%s", ckpt_dtype_name(dts[i]));
        fill(data, sizeof data, (unsigned)i);
        if (dts[i] == CKPT_DT_BOOL)
            for (size_t k = 0; k < sizeof data; k++)
                data[k] &= 1;
        FL_REQUIRE_EQ(
            ckpt_writer_add(w, name, dts[i], 3, dims, data, 15 * ckpt_dtype_size(dts[i]), &e), 0);
    }
    const char *strs[] = {"", "a", "hello, world", "with\0nul", "\xff\xfe"};
    size_t lens[] = {0, 1, 12, 8, 2};
    int64_t sdims[2] = {5, 1};
    FL_REQUIRE_EQ(ckpt_writer_add_strings(w, "strings", 2, sdims, strs, lens, &e), 0);
    const char *one[] = {"scalar string"};
    FL_REQUIRE_EQ(ckpt_writer_add_strings(w, "string_scalar", 0, NULL, one, NULL, &e), 0);
    FL_REQUIRE_EQ(ckpt_writer_finish(w, CKPT_SYNC, &e), 0);

    struct ckpt_reader *r;
    FL_REQUIRE_EQ(ckpt_reader_open(&r, prefix, &e), 0);
    FL_ASSERT_EQ(ckpt_reader_count(r), nd + 2);
    for (size_t i = 0; i < nd; i++) {
        char name[64];
        snprintf(name, sizeof name, "var_%s", ckpt_dtype_name(dts[i]));
        const struct ckpt_entry *en = ckpt_reader_find(r, name);
        FL_REQUIRE(en != NULL);
        FL_ASSERT_EQ(en->dtype, dts[i]);
        FL_REQUIRE_EQ(en->rank, 3);
        FL_ASSERT_EQ(en->dims[0], 3);
        FL_ASSERT_EQ(en->dims[2], 5);
        size_t n = 15 * ckpt_dtype_size(dts[i]);
        FL_ASSERT_EQ(en->size, (int64_t)n);
        fill(data, sizeof data, (unsigned)i);
        if (dts[i] == CKPT_DT_BOOL)
            for (size_t k = 0; k < sizeof data; k++)
                data[k] &= 1;
        memset(back, 0, sizeof back);
        FL_ASSERT_EQ(ckpt_reader_read(r, en, back, sizeof back, &e), 0);
        FL_ASSERT_MEMEQ(back, data, n);
    }
    struct ckpt_strings *s;
    const struct ckpt_entry *se = ckpt_reader_find(r, "strings");
    FL_REQUIRE(se != NULL);
    FL_ASSERT_EQ(se->dtype, CKPT_DT_STRING);
    /* TensorFlow layout: 5 one-byte varints + 4 byte length crc + 23 bytes */
    FL_ASSERT_EQ(se->size, 5 + 4 + 23);
    FL_REQUIRE_EQ(ckpt_reader_read_strings(r, se, &s, &e), 0);
    FL_REQUIRE_EQ(s->n, 5);
    for (int i = 0; i < 5; i++) {
        FL_ASSERT_EQ(s->lens[i], lens[i]);
        FL_ASSERT_MEMEQ(s->strs[i], strs[i], lens[i]);
        FL_ASSERT_EQ(s->strs[i][lens[i]], 0);
    }
    ckpt_strings_free(s);
    FL_REQUIRE_EQ(ckpt_reader_read_strings(r, ckpt_reader_find(r, "string_scalar"), &s, &e), 0);
    FL_ASSERT_STREQ(s->strs[0], "scalar string");
    ckpt_strings_free(s);
    FL_ASSERT_EQ(ckpt_reader_verify(r, &e), 0);
    ckpt_reader_close(r);
}

FL_TEST(ckpt_bundle, bundle_string_crc_follows_tensorflow)
{
    /* TensorFlow: crc over each length as uint32 LE, then the masked length
     * crc's 4 bytes, then the bytes; stored masked. */
    struct ckpt_writer *w;
    struct ckpt_err e;
    const char *strs[] = {"ab", "cde"};
    int64_t d = 2;
    FL_REQUIRE_EQ(ckpt_writer_open(&w, tpath("s"), NULL, &e), 0);
    FL_REQUIRE_EQ(ckpt_writer_add_strings(w, "s", 1, &d, strs, NULL, &e), 0);
    FL_REQUIRE_EQ(ckpt_writer_finish(w, 0, &e), 0);
    size_t n;
    unsigned char *p = slurp(tpath("s.data-00000-of-00001"), &n);
    FL_REQUIRE(p != NULL);
    FL_REQUIRE_EQ(n, 2 + 4 + 5);
    FL_ASSERT_EQ(p[0], 2);
    FL_ASSERT_EQ(p[1], 3);
    uint8_t l[8] = {2, 0, 0, 0, 3, 0, 0, 0};
    uint32_t crc = ckpt_crc32c(l, 8);
    FL_ASSERT_EQ(ckpt_get32le(p + 2), ckpt_crc_mask(crc));
    FL_ASSERT_MEMEQ(p + 6, "abcde", 5);
    crc = ckpt_crc32c_extend(crc, p + 2, 4);
    crc = ckpt_crc32c_extend(crc, "abcde", 5);
    struct ckpt_reader *r;
    FL_REQUIRE_EQ(ckpt_reader_open(&r, tpath("s"), &e), 0);
    FL_ASSERT_EQ(ckpt_reader_find(r, "s")->crc32c, ckpt_crc_mask(crc));
    ckpt_reader_close(r);
    free(p);
}

FL_TEST(ckpt_bundle, bundle_roundtrip_empty_tensors)
{
    struct ckpt_writer *w;
    struct ckpt_err e;
    int64_t z1[1] = {0}, z2[2] = {4, 0};
    FL_REQUIRE_EQ(ckpt_writer_open(&w, tpath("empty"), NULL, &e), 0);
    FL_REQUIRE_EQ(ckpt_writer_add(w, "f0", CKPT_DT_FLOAT, 1, z1, NULL, 0, &e), 0);
    FL_REQUIRE_EQ(ckpt_writer_add(w, "i40", CKPT_DT_INT64, 2, z2, NULL, 0, &e), 0);
    FL_REQUIRE_EQ(ckpt_writer_add_strings(w, "s0", 1, z1, NULL, NULL, &e), 0);
    const char *emptystr[] = {""};
    FL_REQUIRE_EQ(ckpt_writer_add_strings(w, "s_scalar_empty", 0, NULL, emptystr, NULL, &e), 0);
    FL_REQUIRE_EQ(ckpt_writer_finish(w, 0, &e), 0);

    struct ckpt_reader *r;
    FL_REQUIRE_EQ(ckpt_reader_open(&r, tpath("empty"), &e), 0);
    FL_REQUIRE_EQ(ckpt_reader_count(r), 4);
    const struct ckpt_entry *f0 = ckpt_reader_find(r, "f0");
    FL_REQUIRE(f0 != NULL);
    FL_ASSERT_EQ(f0->size, 0);
    FL_ASSERT_EQ(f0->rank, 1);
    FL_ASSERT_EQ(f0->dims[0], 0);
    char dummy;
    FL_ASSERT_EQ(ckpt_reader_read(r, f0, &dummy, 0, &e), 0);
    /* an empty string tensor still stores TensorFlow's 4-byte length crc */
    const struct ckpt_entry *s0 = ckpt_reader_find(r, "s0");
    FL_ASSERT_EQ(s0->size, 4);
    struct ckpt_strings *s;
    FL_REQUIRE_EQ(ckpt_reader_read_strings(r, s0, &s, &e), 0);
    FL_ASSERT_EQ(s->n, 0);
    ckpt_strings_free(s);
    FL_REQUIRE_EQ(ckpt_reader_read_strings(r, ckpt_reader_find(r, "s_scalar_empty"), &s, &e), 0);
    FL_ASSERT_EQ(s->n, 1);
    FL_ASSERT_EQ(s->lens[0], 0);
    ckpt_strings_free(s);
    FL_ASSERT_EQ(ckpt_reader_verify(r, &e), 0);
    ckpt_reader_close(r);
}

FL_TEST_T(ckpt_bundle, bundle_roundtrip_large_tensor_streamed, 120)
{
    /* 96 MiB + 3 bytes of uint8 written in odd-sized pieces (some larger than
     * the write buffer), read back whole and by ranges */
    const size_t n = (96u << 20) + 3;
    uint8_t *p = malloc(n), *q = malloc(n);
    FL_REQUIRE(p && q);
    fill(p, n, 42);
    struct ckpt_writer *w;
    struct ckpt_err e;
    struct ckpt_writer_opts o = {.flags = CKPT_W_MKDIR, .buffer_size = 1u << 20};
    int64_t dims[2] = {(int64_t)n, 1};
    float small = 1.25f;
    FL_REQUIRE_EQ(ckpt_writer_open(&w, tpath("big"), &o, &e), 0);
    FL_REQUIRE_EQ(ckpt_writer_add(w, "before", CKPT_DT_FLOAT, 0, NULL, &small, 4, &e), 0);
    FL_REQUIRE_EQ(ckpt_writer_begin(w, "big", CKPT_DT_UINT8, 2, dims, &e), 0);
    size_t off = 0, step = 1;
    while (off < n) {
        size_t k = step < n - off ? step : n - off;
        FL_REQUIRE_EQ(ckpt_writer_append(w, p + off, k, &e), 0);
        off += k;
        step = step * 7 + 13;
        if (step > (5u << 20))
            step = 3;
    }
    FL_REQUIRE_EQ(ckpt_writer_end(w, &e), 0);
    FL_REQUIRE_EQ(ckpt_writer_add(w, "after", CKPT_DT_FLOAT, 0, NULL, &small, 4, &e), 0);
    FL_ASSERT_EQ(ckpt_writer_data_size(w), n + 8);
    FL_REQUIRE_EQ(ckpt_writer_finish(w, CKPT_SYNC, &e), 0);

    struct ckpt_reader *r;
    FL_REQUIRE_EQ(ckpt_reader_open(&r, tpath("big"), &e), 0);
    const struct ckpt_entry *en = ckpt_reader_find(r, "big");
    FL_REQUIRE(en != NULL);
    FL_ASSERT_EQ(en->offset, 4);
    FL_ASSERT_EQ(en->size, (int64_t)n);
    FL_ASSERT_EQ(en->crc32c, ckpt_crc_mask(ckpt_crc32c(p, n)));
    FL_REQUIRE_EQ(ckpt_reader_read(r, en, q, n, &e), 0);
    FL_ASSERT(memcmp(p, q, n) == 0);
    uint8_t part[1000];
    FL_ASSERT_EQ(ckpt_reader_read_range(r, en, n - 1000, part, 1000, &e), 0);
    FL_ASSERT_MEMEQ(part, p + n - 1000, 1000);
    FL_ASSERT_EQ(ckpt_reader_read_range(r, en, n - 999, part, 1000, &e), -EINVAL);
    float v;
    FL_ASSERT_EQ(ckpt_reader_read(r, ckpt_reader_find(r, "after"), &v, 4, &e), 0);
    FL_ASSERT(v == 1.25f);
    ckpt_reader_close(r);
    free(p);
    free(q);
}

/* Writes nent int32 scalars named key_%06d; returns the data blocks count. */
static int write_many(const char *prefix, int nent, unsigned flags, size_t block_size)
{
    struct ckpt_writer *w;
    struct ckpt_err e;
    struct ckpt_writer_opts o = {.flags = flags, .block_size = block_size};
    FL_REQUIRE_EQ(ckpt_writer_open(&w, prefix, &o, &e), 0);
    for (int i = nent - 1; i >= 0; i--) { /* reverse order: the index sorts */
        char name[64];
        int32_t v = i * 3;
        snprintf(name, sizeof name, "scope_%d/layer/key_%06d", i % 7, i);
        FL_REQUIRE_EQ(ckpt_writer_add(w, name, CKPT_DT_INT32, 0, NULL, &v, 4, &e), 0);
    }
    FL_REQUIRE_EQ(ckpt_writer_finish(w, 0, &e), 0);
    size_t len;
    char idx[4200];
    snprintf(idx, sizeof idx, "%s.index", prefix);
    unsigned char *p = slurp(idx, &len);
    FL_REQUIRE(p != NULL);
    struct ckpt_tbl_block blocks[4096];
    char why[256];
    int nb = ckpt_tbl_blocks(p, len, blocks, 4096, why, sizeof why);
    FL_REQUIRE_GE(nb, 3);
    int data = 0, snappy = 0;
    for (int i = 0; i < nb && i < 4096; i++) {
        data += blocks[i].kind == 0;
        snappy += blocks[i].type == 1;
    }
    if (flags & CKPT_W_SNAPPY)
        FL_ASSERT_GT(snappy, 0);
    else
        FL_ASSERT_EQ(snappy, 0);
    free(p);
    return data;
}

static void check_many(const char *prefix, int nent)
{
    struct ckpt_reader *r;
    struct ckpt_err e;
    FL_REQUIRE_EQ(ckpt_reader_open(&r, prefix, &e), 0);
    FL_REQUIRE_EQ(ckpt_reader_count(r), (size_t)nent);
    for (size_t i = 1; i < ckpt_reader_count(r); i++)
        FL_REQUIRE(strcmp(ckpt_reader_entry(r, i - 1)->name, ckpt_reader_entry(r, i)->name) < 0);
    for (int i = 0; i < nent; i += 97) {
        char name[64];
        snprintf(name, sizeof name, "scope_%d/layer/key_%06d", i % 7, i);
        const struct ckpt_entry *en = ckpt_reader_find(r, name);
        FL_REQUIRE(en != NULL);
        int32_t v;
        FL_ASSERT_EQ(ckpt_reader_read(r, en, &v, 4, &e), 0);
        FL_ASSERT_EQ(v, i * 3);
    }
    FL_ASSERT_EQ(ckpt_reader_verify(r, &e), 0);
    ckpt_reader_close(r);
}

FL_TEST(ckpt_bundle, bundle_roundtrip_many_entries_several_index_blocks)
{
    /* TensorFlow's 256 KiB blocks: 30000 entries of ~45 bytes need several */
    int nb = write_many(tpath("many"), 30000, 0, 0);
    FL_ASSERT_GE(nb, 3);
    check_many(tpath("many"), 30000);
    /* tiny blocks: hundreds of blocks, restart points, separators */
    nb = write_many(tpath("tiny"), 3000, 0, 200);
    FL_ASSERT_GE(nb, 100);
    check_many(tpath("tiny"), 3000);
}

FL_TEST(ckpt_bundle, bundle_roundtrip_snappy_index_blocks)
{
    int nb = write_many(tpath("snappy"), 20000, CKPT_W_SNAPPY, 0);
    FL_ASSERT_GE(nb, 2);
    check_many(tpath("snappy"), 20000);
    nb = write_many(tpath("snappy_tiny"), 2000, CKPT_W_SNAPPY, 300);
    FL_ASSERT_GE(nb, 50);
    check_many(tpath("snappy_tiny"), 2000);
}

FL_TEST(ckpt_bundle, bundle_index_separators_are_shortest)
{
    /* one entry per block: TensorFlow's FindShortestSeparator turns "abcx"
     * (next block starts at "abez") into "abd"; the last block's index key is
     * FindShortSuccessor("abez") = "b" */
    struct ckpt_tbl_builder *t = ckpt_tbl_new(16, false);
    struct ckpt_buf out = {0};
    FL_REQUIRE(t != NULL);
    FL_REQUIRE_EQ(ckpt_tbl_add(t, "abcx", 4, "0123456789abcdef", 16), 0);
    FL_REQUIRE_EQ(ckpt_tbl_add(t, "abez", 4, "0123456789abcdef", 16), 0);
    FL_REQUIRE_EQ(ckpt_tbl_add(t, "abez", 4, "x", 1), -EINVAL); /* not increasing */
    FL_REQUIRE_EQ(ckpt_tbl_finish(t, &out), 0);
    /* index block entries are restart-interval-1: shared 0, key, handle */
    struct ckpt_tbl_block b[4];
    char why[256];
    FL_REQUIRE_EQ(ckpt_tbl_blocks(out.p, out.len, b, 4, why, sizeof why), 4);
    const unsigned char *ix = out.p + b[3].off;
    FL_ASSERT_EQ(ix[0], 0); /* shared */
    FL_ASSERT_EQ(ix[1], 3); /* "abd" */
    FL_ASSERT_MEMEQ(ix + 3, "abd", 3);
    const unsigned char *second = ix + 3 + 3 + ix[2];
    FL_ASSERT_EQ(second[0], 0);
    FL_ASSERT_EQ(second[1], 1); /* short successor of "abez": "b" */
    FL_ASSERT_EQ(second[3], 'b');
    ckpt_buf_free(&out);
    ckpt_tbl_free(t);
}

FL_TEST(ckpt_bundle, bundle_data_alignment_pads_between_tensors)
{
    struct ckpt_writer *w;
    struct ckpt_err e;
    struct ckpt_writer_opts o = {.data_alignment = 64};
    uint8_t three[3] = {1, 2, 3};
    int64_t d = 3;
    FL_REQUIRE_EQ(ckpt_writer_open(&w, tpath("al"), &o, &e), 0);
    FL_REQUIRE_EQ(ckpt_writer_add(w, "x", CKPT_DT_UINT8, 1, &d, three, 3, &e), 0);
    FL_REQUIRE_EQ(ckpt_writer_add(w, "y", CKPT_DT_UINT8, 1, &d, three, 3, &e), 0);
    FL_REQUIRE_EQ(ckpt_writer_finish(w, 0, &e), 0);
    struct ckpt_reader *r;
    FL_REQUIRE_EQ(ckpt_reader_open(&r, tpath("al"), &e), 0);
    FL_ASSERT_EQ(ckpt_reader_find(r, "y")->offset, 64);
    FL_ASSERT_EQ(ckpt_reader_verify(r, &e), 0);
    ckpt_reader_close(r);
}

FL_TEST(ckpt_bundle, bundle_write_is_atomic_until_finish)
{
    struct ckpt_writer *w;
    struct ckpt_err e;
    float v = 1;
    const char *dir = tpath("d");
    FL_REQUIRE_EQ(ckpt_writer_open(&w, tpath("d/p"), NULL, &e), 0);
    FL_REQUIRE_EQ(ckpt_writer_add(w, "v", CKPT_DT_FLOAT, 0, NULL, &v, 4, &e), 0);
    FL_ASSERT(!exists(tpath("d/p.index")));
    FL_ASSERT(!exists(tpath("d/p.data-00000-of-00001")));
    FL_ASSERT_EQ(count_names(dir, "tempstate"), 1);
    ckpt_writer_abort(w);
    FL_ASSERT_EQ(count_names(dir, "p"), 0);

    FL_REQUIRE_EQ(ckpt_writer_open(&w, tpath("d/p"), NULL, &e), 0);
    FL_REQUIRE_EQ(ckpt_writer_add(w, "v", CKPT_DT_FLOAT, 0, NULL, &v, 4, &e), 0);
    FL_REQUIRE_EQ(ckpt_writer_finish(w, CKPT_SYNC, &e), 0);
    FL_ASSERT(exists(tpath("d/p.index")));
    FL_ASSERT(exists(tpath("d/p.data-00000-of-00001")));
    FL_ASSERT_EQ(count_names(dir, "tempstate"), 0);

    /* a failed finish (tensor still streaming) leaves nothing new behind */
    int64_t d = 2;
    FL_REQUIRE_EQ(ckpt_writer_open(&w, tpath("d/q"), NULL, &e), 0);
    FL_REQUIRE_EQ(ckpt_writer_begin(w, "v", CKPT_DT_FLOAT, 1, &d, &e), 0);
    FL_REQUIRE_EQ(ckpt_writer_append(w, &v, 4, &e), 0);
    FL_ASSERT_EQ(ckpt_writer_finish(w, 0, &e), -EINVAL);
    FL_ASSERT_CONTAINS(e.msg, "still being streamed");
    FL_ASSERT_EQ(count_names(dir, "q"), 0);
    FL_ASSERT_EQ(count_names(dir, "tempstate"), 0);
}

struct fill_src {
    const uint8_t *p;
    int calls;
};

static int fill_from(void *ctx, void *dst, size_t n, uint32_t *crc)
{
    struct fill_src *f = ctx;
    memcpy(dst, f->p, n);
    *crc = ckpt_crc32c(dst, n);
    f->p += n;
    f->calls++;
    return 0;
}

/* Writes the same awkward tensors (sizes around the 4 KiB alignment and the
 * buffer, streamed in odd pieces, by append or by append_fill) with the
 * given flags; 1 if direct. */
static int write_awkward(const char *prefix, unsigned flags, bool by_fill)
{
    static uint8_t big[3 * 65536 + 4099];
    for (size_t i = 0; i < sizeof big; i++)
        big[i] = (uint8_t)(i * 131 + i / 977);
    struct ckpt_writer *w;
    struct ckpt_err e;
    struct ckpt_writer_opts o = {.flags = flags | CKPT_W_MKDIR_P, .buffer_size = 65536};
    FL_REQUIRE_MSG(ckpt_writer_open(&w, prefix, &o, &e) == 0, "%s", e.msg);
    int direct = ckpt_writer_is_direct(w);
    int64_t sizes[] = {1, 4095, 4096, 4097, 65535, 65536, 65537, (int64_t)sizeof big};
    for (size_t t = 0; t < sizeof sizes / sizeof *sizes; t++) {
        char name[32];
        snprintf(name, sizeof name, "t%zu", t);
        FL_REQUIRE_EQ(ckpt_writer_begin(w, name, CKPT_DT_UINT8, 1, &sizes[t], &e), 0);
        for (int64_t at = 0, step = 1; at < sizes[t]; at += step, step = step * 3 + 7) {
            if (step > sizes[t] - at)
                step = sizes[t] - at;
            if (by_fill) {
                struct fill_src f = {big + at, 0};
                FL_REQUIRE_MSG(ckpt_writer_append_fill(w, (size_t)step, fill_from, &f, &e) == 0,
                               "%s", e.msg);
                FL_REQUIRE(f.p == big + at + step);
            } else {
                FL_REQUIRE_MSG(ckpt_writer_append(w, big + at, (size_t)step, &e) == 0, "%s", e.msg);
            }
        }
        FL_REQUIRE_EQ(ckpt_writer_end(w, &e), 0);
    }
    FL_REQUIRE_EQ(ckpt_writer_add(w, "whole", CKPT_DT_UINT8, 1, &sizes[7], big, sizeof big, &e), 0);
    FL_REQUIRE_MSG(ckpt_writer_finish(w, CKPT_SYNC, &e) == 0, "%s", e.msg);
    return direct;
}

FL_TEST(ckpt_bundle, bundle_write_direct_and_fill_give_the_same_bytes)
{
    int d0 = write_awkward(tpath("b/p"), 0, false);
    int d1 = write_awkward(tpath("d/p"), CKPT_W_DIRECT, false);
    int d2 = write_awkward(tpath("f/p"), 0, true);
    int d3 = write_awkward(tpath("g/p"), CKPT_W_DIRECT, true);
    FL_ASSERT_EQ(d0, 0);
    FL_ASSERT_EQ(d2, 0);
    FL_ASSERT_EQ(d1, d3);
    const char *suf[] = {".index", ".data-00000-of-00001"}, *other[] = {"d", "f", "g"};
    for (int i = 0; i < 2; i++) {
        size_t la, lb;
        unsigned char *a = slurp(tpath("b/p%s", suf[i]), &la);
        FL_REQUIRE(a != NULL);
        for (int o = 0; o < 3; o++) {
            unsigned char *b = slurp(tpath("%s/p%s", other[o], suf[i]), &lb);
            FL_REQUIRE(b != NULL);
            FL_ASSERT_MSG(la == lb && memcmp(a, b, la) == 0, "%s/p%s differs from b/p%s", other[o],
                          suf[i], suf[i]);
            free(b);
        }
        free(a);
    }
    /* and it reads back */
    struct ckpt_reader *r;
    struct ckpt_err e;
    FL_REQUIRE_MSG(ckpt_reader_open(&r, tpath("d/p"), &e) == 0, "%s", e.msg);
    ckpt_reader_close(r);
    FL_ASSERT_EQ(count_names(tpath("d"), "tempstate"), 0);
    if (!d1)
        FL_SKIP("the test directory's filesystem refuses O_DIRECT: only the fallback was checked");
}

/* A real full disk on the direct path: a 4 MiB ext4 image on a loop device,
 * mounted in a private mount namespace of this test (gone with it, and the
 * loop device with its last mount). */
FL_TEST_ROOT_T(ckpt_bundle, bundle_write_direct_full_disk_says_enospc_and_leaves_nothing, 60)
{
    fl_test_need_root();
    if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
        FL_SKIP("needs a private mount namespace: %s", strerror(errno));
    char cmd[8192];
    const char *img = tpath("disk.img"), *mnt = tpath("mnt");
    mkdir(mnt, 0755);
    snprintf(cmd, sizeof cmd,
             "truncate -s 4M %s && mkfs.ext4 -q -F %s >/dev/null 2>&1 && mount -o loop %s %s", img,
             img, img, mnt);
    if (system(cmd) != 0)
        FL_SKIP("cannot make and loop-mount a small ext4 (mkfs.ext4, loop devices): %s", cmd);
    static uint8_t data[8 << 20];
    memset(data, 0x5a, sizeof data);
    struct ckpt_writer *w;
    struct ckpt_err e;
    struct ckpt_writer_opts o = {.flags = CKPT_W_DIRECT, .buffer_size = 1 << 20};
    int64_t n = (int64_t)sizeof data;
    FL_REQUIRE_MSG(ckpt_writer_open(&w, tpath("mnt/p"), &o, &e) == 0, "%s", e.msg);
    FL_ASSERT(ckpt_writer_is_direct(w));
    int rc = ckpt_writer_add(w, "t", CKPT_DT_UINT8, 1, &n, data, sizeof data, &e);
    if (rc == 0)
        rc = ckpt_writer_finish(w, CKPT_SYNC, &e);
    else
        ckpt_writer_abort(w);
    FL_ASSERT_EQ(rc, -ENOSPC);
    FL_ASSERT_CONTAINS(e.msg, "No space left on device");
    FL_ASSERT_EQ(count_names(mnt, "p"), 0);
    /* smaller than the buffer: the only write is the padded tail at finish,
     * and the error names that write, not the truncate after it */
    o.buffer_size = 0;
    n = 3 << 20;
    FL_REQUIRE_MSG(ckpt_writer_open(&w, tpath("mnt/q"), &o, &e) == 0, "%s", e.msg);
    FL_ASSERT(ckpt_writer_is_direct(w));
    FL_REQUIRE_EQ(ckpt_writer_add(w, "t", CKPT_DT_UINT8, 1, &n, data, (size_t)n, &e), 0);
    FL_ASSERT_EQ(ckpt_writer_finish(w, CKPT_SYNC, &e), -ENOSPC);
    FL_ASSERT_STREQ(e.call, "write");
    FL_ASSERT_CONTAINS(e.msg, "No space left on device");
    FL_ASSERT_EQ(count_names(mnt, "q"), 0);
    snprintf(cmd, sizeof cmd, "umount %s", mnt);
    FL_ASSERT_EQ(system(cmd), 0);
}

FL_TEST(ckpt_bundle, bundle_write_rejects_bad_arguments)
{
    struct ckpt_writer *w;
    struct ckpt_err e;
    float v[2] = {1, 2};
    int64_t d = 2, neg = -1;
    struct {
        int step;
        int want;
        const char *msg;
    } cases[] = {
        {0, -EEXIST, "duplicate"},           {1, -EINVAL, "8 bytes given"},
        {2, -EINVAL, "empty tensor name"},   {3, -EINVAL, "unknown dtype"},
        {4, -EINVAL, "bad shape"},           {5, -EINVAL, "more than the shape holds"},
        {6, -EINVAL, "ended after 4 bytes"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int rc;
        FL_REQUIRE_EQ(ckpt_writer_open(&w, tpath("bad%zu", i), NULL, &e), 0);
        FL_REQUIRE_EQ(ckpt_writer_add(w, "x", CKPT_DT_FLOAT, 1, &d, v, 8, &e), 0);
        switch (cases[i].step) {
        case 0: rc = ckpt_writer_add(w, "x", CKPT_DT_FLOAT, 1, &d, v, 8, &e); break;
        case 1: rc = ckpt_writer_add(w, "y", CKPT_DT_FLOAT, 0, NULL, v, 8, &e); break;
        case 2: rc = ckpt_writer_add(w, "", CKPT_DT_FLOAT, 0, NULL, v, 4, &e); break;
        case 3: rc = ckpt_writer_add(w, "y", 99, 0, NULL, v, 4, &e); break;
        case 4: rc = ckpt_writer_add(w, "y", CKPT_DT_FLOAT, 1, &neg, v, 4, &e); break;
        case 5:
            ckpt_writer_begin(w, "y", CKPT_DT_FLOAT, 0, NULL, &e);
            rc = ckpt_writer_append(w, v, 8, &e);
            break;
        default:
            ckpt_writer_begin(w, "y", CKPT_DT_FLOAT, 1, &d, &e);
            ckpt_writer_append(w, v, 4, &e);
            rc = ckpt_writer_end(w, &e);
        }
        FL_ASSERT_EQ(rc, cases[i].want);
        FL_ASSERT_CONTAINS(e.msg, cases[i].msg);
        FL_ASSERT_CONTAINS(e.msg, tpath("bad%zu", i));
        /* the writer stays failed: finish reports the same error, leaves nothing */
        FL_ASSERT_EQ(ckpt_writer_finish(w, 0, &e), cases[i].want);
        FL_ASSERT(!exists(tpath("bad%zu.index", i)));
    }
}

FL_TEST(ckpt_bundle, bundle_write_missing_directory_is_notfound)
{
    struct ckpt_writer *w;
    struct ckpt_err e;
    char tf[8192];
    /* TensorFlow's BundleWriter creates only the last component */
    FL_ASSERT_EQ(ckpt_writer_open(&w, tpath("no/such/dir/part-00000-of-00002"), NULL, &e), -ENOENT);
    FL_ASSERT_STREQ(e.call, "mkdir");
    FL_ASSERT_STREQ(e.path, tpath("no/such/dir"));
    FL_ASSERT_CONTAINS(ckpt_err_tf(&e, tf, sizeof tf), "NotFoundError: ");
    FL_ASSERT_CONTAINS(tf, "no/such/dir; No such file or directory");
    /* without directory creation the data file's open fails, naming it */
    struct ckpt_writer_opts o = {0};
    FL_ASSERT_EQ(ckpt_writer_open(&w, tpath("nodir/p"), &o, &e), -ENOENT);
    FL_ASSERT_STREQ(e.call, "open");
    FL_ASSERT_STREQ(e.path, tpath("nodir/p.data-00000-of-00001"));
    ckpt_err_tf(&e, tf, sizeof tf);
    FL_ASSERT_CONTAINS(tf, "NotFoundError: ");
    FL_ASSERT_CONTAINS(tf, "nodir/p.data-00000-of-00001; No such file or directory");
    /* CKPT_W_MKDIR_P creates the whole path */
    o.flags = CKPT_W_MKDIR_P;
    FL_REQUIRE_EQ(ckpt_writer_open(&w, tpath("a/b/c/p"), &o, &e), 0);
    FL_ASSERT_EQ(ckpt_writer_finish(w, CKPT_SYNC, &e), 0);
    FL_ASSERT(exists(tpath("a/b/c/p.index")));
}

FL_TEST(ckpt_bundle, bundle_names_follow_tensorflow)
{
    char *s = ckpt_data_name("/x/model.ckpt-24", 3, 12);
    FL_ASSERT_STREQ(s, "/x/model.ckpt-24.data-00003-of-00012");
    free(s);
    s = ckpt_index_name("/x/model.ckpt-24");
    FL_ASSERT_STREQ(s, "/x/model.ckpt-24.index");
    free(s);
    s = ckpt_shard_name("/x/m_temp_0123/part", 4, 6);
    FL_ASSERT_STREQ(s, "/x/m_temp_0123/part-00004-of-00006");
    free(s);
    s = ckpt_temp_prefix("./train_logs/model.ckpt-0", "0123456789abcdef0123456789abcdef");
    FL_ASSERT_STREQ(s, "./train_logs/model.ckpt-0_temp_0123456789abcdef0123456789abcdef/part");
    free(s);
    s = ckpt_temp_prefix("m", NULL);
    FL_REQUIRE(s != NULL);
    FL_ASSERT_EQ(strlen(s), strlen("m_temp_/part") + 32);
    for (int i = 7; i < 39; i++)
        FL_ASSERT(strchr("0123456789abcdef", s[i]) != NULL);
    free(s);
    FL_ASSERT_STREQ(ckpt_dtype_name(CKPT_DT_FLOAT), "float");
    FL_ASSERT_EQ(ckpt_dtype_from_name("float32"), CKPT_DT_FLOAT);
    FL_ASSERT_EQ(ckpt_dtype_from_name("int64"), CKPT_DT_INT64);
    FL_ASSERT_EQ(ckpt_dtype_size(CKPT_DT_COMPLEX128), 16);
    FL_ASSERT_EQ(ckpt_dtype_size(CKPT_DT_STRING), 0);
}

FL_TEST(ckpt_bundle, bundle_reader_missing_index_is_notfound)
{
    struct ckpt_reader *r;
    struct ckpt_err e;
    char tf[8192];
    FL_ASSERT_EQ(ckpt_reader_open(&r, tpath("nothing"), &e), -ENOENT);
    FL_ASSERT_STREQ(e.path, tpath("nothing.index"));
    FL_ASSERT_CONTAINS(ckpt_err_tf(&e, tf, sizeof tf), "NotFoundError: ");
}
