/*
 * test_ckpt_merge.c: ckpt_merge with TensorFlow's MergeV2Checkpoints
 * semantics, on part bundles laid out as TensorFlow's sharded Saver does
 * ("<prefix>_temp_<hex>/part-%05d-of-%05d"): shard renumbering, data file
 * renames, removal of the part indexes and the temp directory, many shards,
 * slices, a missing part index (TensorFlow's NotFoundError), duplicates and
 * an empty part.
 */
#include <errno.h>

#include "runtime/ckpt/crc.h"
#include "runtime/ckpt/internal.h"
#include "runtime/tests/test_ckpt_util.h"

#define HEX "0123456789abcdef0123456789abcdef"

/* Writes part i of n under temp prefix: tensors "p<i>_w<k>" = i*100+k. */
static char *write_part(const char *temp, int i, int n, int ntensors)
{
    struct ckpt_writer *w;
    struct ckpt_err e;
    char *part = ckpt_shard_name(temp, i, n);
    FL_REQUIRE(part != NULL);
    FL_REQUIRE_EQ(ckpt_writer_open(&w, part, NULL, &e), 0);
    for (int k = 0; k < ntensors; k++) {
        char name[64];
        int64_t v[3] = {i * 100 + k, i, k};
        int64_t d = 3;
        snprintf(name, sizeof name, "p%02d_w%d", i, k);
        FL_REQUIRE_EQ(ckpt_writer_add(w, name, CKPT_DT_INT64, 1, &d, v, sizeof v, &e), 0);
    }
    FL_REQUIRE_EQ(ckpt_writer_finish(w, 0, &e), 0);
    return part;
}

static void check_merged(const char *prefix, int nparts, int ntensors)
{
    struct ckpt_reader *r;
    struct ckpt_err e;
    FL_REQUIRE_EQ(ckpt_reader_open(&r, prefix, &e), 0);
    FL_ASSERT_EQ(ckpt_reader_header(r)->num_shards, nparts);
    FL_ASSERT_EQ(ckpt_reader_count(r), (size_t)(nparts * ntensors));
    for (int i = 0; i < nparts; i++) {
        for (int k = 0; k < ntensors; k++) {
            char name[64];
            snprintf(name, sizeof name, "p%02d_w%d", i, k);
            const struct ckpt_entry *en = ckpt_reader_find(r, name);
            FL_REQUIRE(en != NULL);
            FL_ASSERT_EQ(en->shard_id, i); /* ids in order of first use = part order */
            int64_t v[3];
            FL_ASSERT_EQ(ckpt_reader_read(r, en, v, sizeof v, &e), 0);
            FL_ASSERT_EQ(v[0], i * 100 + k);
        }
    }
    FL_ASSERT_EQ(ckpt_reader_verify(r, &e), 0);
    ckpt_reader_close(r);
}

FL_TEST(ckpt_merge, merge_renumbers_shards_and_removes_temp_dir)
{
    const char *prefix = tpath("train/model.ckpt-0");
    FL_REQUIRE_EQ(mkdir(tpath("train"), 0777), 0);
    char *temp = ckpt_temp_prefix(prefix, HEX);
    const char *parts[3];
    for (int i = 0; i < 3; i++)
        parts[i] = write_part(temp, i, 3, 4);
    FL_ASSERT(exists(tpath("train/model.ckpt-0_temp_" HEX "/part-00001-of-00003.index")));
    FL_ASSERT(
        exists(tpath("train/model.ckpt-0_temp_" HEX "/part-00001-of-00003.data-00000-of-00001")));

    struct ckpt_err e;
    FL_ASSERT_EQ(ckpt_merge(parts, 3, prefix, CKPT_MERGE_DELETE_OLD_DIRS | CKPT_MERGE_SYNC, &e),
                 12);
    FL_ASSERT(exists(tpath("train/model.ckpt-0.index")));
    for (int i = 0; i < 3; i++)
        FL_ASSERT(exists(tpath("train/model.ckpt-0.data-%05d-of-00003", i)));
    FL_ASSERT(!exists(tpath("train/model.ckpt-0_temp_" HEX)));
    FL_ASSERT_EQ(count_names(tpath("train"), "."), 4 + 2); /* . and .. count */
    check_merged(prefix, 3, 4);
    free(temp);
}

FL_TEST(ckpt_merge, merge_keeps_temp_dir_without_delete_flag)
{
    const char *prefix = tpath("model.ckpt-5");
    char *temp = ckpt_temp_prefix(prefix, HEX);
    const char *parts[2] = {write_part(temp, 0, 2, 1), write_part(temp, 1, 2, 1)};
    struct ckpt_err e;
    FL_ASSERT_EQ(ckpt_merge(parts, 2, prefix, 0, &e), 2);
    /* part indexes are always deleted; the (now empty) directory stays */
    FL_ASSERT(exists(tpath("model.ckpt-5_temp_" HEX)));
    FL_ASSERT(!exists(tpath("model.ckpt-5_temp_" HEX "/part-00000-of-00002.index")));
    check_merged(prefix, 2, 1);
    free(temp);
}

FL_TEST_T(ckpt_merge, merge_many_shards_read_back, 120)
{
    enum { N = 40 };
    const char *prefix = tpath("many/model.ckpt-100");
    FL_REQUIRE_EQ(mkdir(tpath("many"), 0777), 0);
    char *temp = ckpt_temp_prefix(prefix, NULL);
    const char *parts[N];
    for (int i = 0; i < N; i++)
        parts[i] = write_part(temp, i, N, 3);
    struct ckpt_err e;
    FL_ASSERT_EQ(ckpt_merge(parts, N, prefix, CKPT_MERGE_DELETE_OLD_DIRS, &e), N * 3);
    FL_ASSERT(exists(tpath("many/model.ckpt-100.data-00039-of-00040")));
    check_merged(prefix, N, 3);
    free(temp);
}

FL_TEST(ckpt_merge, merge_missing_part_index_is_tensorflow_notfound)
{
    const char *prefix = tpath("train_logs/model.ckpt-0");
    FL_REQUIRE_EQ(mkdir(tpath("train_logs"), 0777), 0);
    char *temp = ckpt_temp_prefix(prefix, HEX);
    const char *parts[2] = {write_part(temp, 0, 2, 2), write_part(temp, 1, 2, 2)};
    /* S001: the part written on another host's disk is not here */
    char *idx0 = ckpt_index_name(parts[0]);
    FL_REQUIRE_EQ(unlink(idx0), 0);
    struct ckpt_err e;
    char tf[8192];
    FL_ASSERT_EQ(ckpt_merge(parts, 2, prefix, CKPT_MERGE_DELETE_OLD_DIRS, &e), -ENOENT);
    FL_ASSERT_STREQ(e.path, idx0);
    FL_ASSERT_STREQ(e.call, "stat");
    ckpt_err_tf(&e, tf, sizeof tf);
    char want[8192];
    snprintf(want, sizeof want, "NotFoundError: %s; No such file or directory", idx0);
    FL_ASSERT_STREQ(tf, want);
    FL_ASSERT_CONTAINS(e.msg, "part-00000-of-00002.index");
    /* nothing was renamed or written */
    FL_ASSERT(!exists(tpath("train_logs/model.ckpt-0.index")));
    FL_ASSERT(exists(tpath("train_logs/model.ckpt-0_temp_" HEX "/part-00001-of-00002.index")));
    FL_ASSERT(exists(
        tpath("train_logs/model.ckpt-0_temp_" HEX "/part-00001-of-00002.data-00000-of-00001")));
    free(idx0);
    free(temp);
}

FL_TEST(ckpt_merge, merge_duplicate_tensor_fails)
{
    const char *prefix = tpath("m");
    char *temp = ckpt_temp_prefix(prefix, HEX);
    /* the same part listed twice: every key is a duplicate */
    char *p0 = write_part(temp, 0, 2, 1);
    struct ckpt_err e;
    const char *twice[2] = {p0, p0};
    FL_ASSERT_EQ(ckpt_merge(twice, 2, prefix, 0, &e), -EINVAL);
    FL_ASSERT_CONTAINS(e.msg, "Duplicate tensor keyed by p00_w0 encountered, when merging prefix");
    FL_ASSERT_STREQ(e.entry, "p00_w0");
    FL_ASSERT(!exists(tpath("m.index")));
    free(p0);
    free(temp);
}

FL_TEST(ckpt_merge, merge_empty_part_counts_its_shard_like_tensorflow)
{
    const char *prefix = tpath("e");
    char *temp = ckpt_temp_prefix(prefix, HEX);
    const char *parts[2] = {write_part(temp, 0, 2, 0), write_part(temp, 1, 2, 2)};
    struct ckpt_err e;
    FL_ASSERT_EQ(ckpt_merge(parts, 2, prefix, CKPT_MERGE_DELETE_OLD_DIRS, &e), 2);
    /* header: the sum of the parts' num_shards; files: only those used */
    FL_ASSERT(exists(tpath("e.data-00000-of-00001")));
    FL_ASSERT(exists(tpath("e_temp_" HEX "/part-00000-of-00002.data-00000-of-00001")));
    size_t len;
    unsigned char *idx = slurp(tpath("e.index"), &len);
    FL_REQUIRE(idx != NULL);
    FL_ASSERT_EQ(idx[3], 0x08); /* header value starts "08 02": num_shards 2 */
    FL_ASSERT_EQ(idx[4], 0x02);
    free(idx);
    free(temp);
}

/* A part holding one slice of a partitioned tensor "emb" [4, 2] floats. */
static const char *write_slice_part(const char *dir, int i)
{
    const char *prefix = tpath("%s/part-%05d-of-00002", dir, i);
    const char *datap = tpath("%s/part-%05d-of-00002.data-00000-of-00001", dir, i);
    const char *indexp = tpath("%s/part-%05d-of-00002.index", dir, i);
    float d[4] = {(float)i, (float)i, (float)i + 0.5f, 1};
    FL_REQUIRE_EQ(spit(datap, d, sizeof d), 0);
    struct ckpt_tbl_builder *t = ckpt_tbl_new(0, false);
    struct ckpt_buf v = {0}, out = {0};
    struct ckpt_header h = {.num_shards = 1, .producer = 1};
    ckpt_pb_encode_header(&v, &h);
    ckpt_tbl_add(t, "", 0, v.p, v.len);
    int64_t full[2] = {4, 2}, part[2] = {2, 2};
    struct ckpt_extent x[2] = {{2 * i, 2}, {0, -1}};
    struct ckpt_slice sl = {2, x};
    struct ckpt_entry fe = {
        .dtype = CKPT_DT_FLOAT, .rank = 2, .dims = full, .nslices = 1, .slices = &sl};
    v.len = 0;
    ckpt_pb_encode_entry(&v, &fe);
    ckpt_tbl_add(t, "emb", 3, v.p, v.len);
    struct ckpt_entry se = {.dtype = CKPT_DT_FLOAT,
                            .rank = 2,
                            .dims = part,
                            .size = 16,
                            .crc32c = ckpt_crc_mask(ckpt_crc32c(d, 16))};
    char key[16];
    snprintf(key, sizeof key, "emb/s%d", i);
    v.len = 0;
    ckpt_pb_encode_entry(&v, &se);
    ckpt_tbl_add(t, key, strlen(key), v.p, v.len);
    FL_REQUIRE_EQ(ckpt_tbl_finish(t, &out), 0);
    FL_REQUIRE_EQ(spit(indexp, out.p, out.len), 0);
    ckpt_buf_free(&v);
    ckpt_buf_free(&out);
    ckpt_tbl_free(t);
    return prefix;
}

FL_TEST(ckpt_merge, merge_appends_slices_of_partitioned_tensors)
{
    FL_REQUIRE_EQ(mkdir(tpath("tmp_parts"), 0777), 0);
    const char *parts[2] = {write_slice_part("tmp_parts", 0), write_slice_part("tmp_parts", 1)};
    struct ckpt_err e;
    FL_ASSERT_EQ(ckpt_merge(parts, 2, tpath("sl"), CKPT_MERGE_DELETE_OLD_DIRS, &e), 3);
    FL_ASSERT(!exists(tpath("tmp_parts")));
    struct ckpt_reader *r;
    FL_REQUIRE_EQ(ckpt_reader_open(&r, tpath("sl"), &e), 0);
    const struct ckpt_entry *emb = ckpt_reader_find(r, "emb");
    FL_REQUIRE(emb != NULL);
    FL_REQUIRE_EQ(emb->nslices, 2);
    FL_ASSERT_EQ(emb->slices[0].extents[0].start, 0);
    FL_ASSERT_EQ(emb->slices[1].extents[0].start, 2);
    FL_ASSERT_EQ(emb->slices[1].extents[1].length, -1);
    float d[4];
    FL_ASSERT_EQ(ckpt_reader_read(r, emb, d, sizeof d, &e), -ENOTSUP);
    FL_ASSERT_CONTAINS(e.msg, "slices");
    const struct ckpt_entry *s1 = ckpt_reader_find(r, "emb/s1");
    FL_REQUIRE(s1 != NULL);
    FL_ASSERT_EQ(s1->shard_id, 1);
    FL_ASSERT_EQ(ckpt_reader_read(r, s1, d, sizeof d, &e), 0);
    FL_ASSERT(d[2] == 1.5f);
    FL_ASSERT_EQ(ckpt_reader_verify(r, &e), 0);
    ckpt_reader_close(r);
}
