/*
 * test_ckpt_inspect.c: `psrt inspect` end to end: TensorFlow's real bundles
 * and state file, a directory with a `checkpoint` file, --values (all dtypes
 * the printer knows, strings, a limit), --verify on a corrupted bundle,
 * --json parsed by Python's json module, usage.
 */
#include "runtime/ckpt/state.h"
#include "runtime/tests/test_ckpt_util.h"

static const char *psrt(void)
{
    const char *b = fl_test_bin("psrt");
    if (access(b, X_OK) != 0)
        FL_SKIP("%s is not built", b);
    return b;
}

FL_TEST(ckpt_inspect, inspect_tensorflow_half_plus_three_prints_values)
{
    const char *s = fl_test_shared();
    if (!s)
        FL_SKIP("../shared is absent: no TensorFlow reference bundles");
    char *out = NULL;
    int rc = fl_test_sh(&out,
                        "%s inspect --values %s/testdata/tf-bundles/half_plus_three/variables 2>&1",
                        psrt(), s);
    FL_ASSERT_EQ(rc, 0);
    FL_ASSERT_CONTAINS(out, "3 tensors, 1 shard, little-endian");
    FL_ASSERT_CONTAINS(
        out, "  a     float    []           shard 0  offset 0  size 4  crc ok\n      = 0.5\n");
    FL_ASSERT_CONTAINS(
        out, "  b     float    []           shard 0  offset 4  size 4  crc ok\n      = 3\n");
    FL_ASSERT_CONTAINS(
        out, "  c     float    []           shard 0  offset 8  size 4  crc ok\n      = 3\n");
    free(out);
    /* the directory form finds variables.index; --verify passes */
    rc = fl_test_sh(&out, "%s inspect --verify %s/testdata/tf-bundles/counter 2>&1", psrt(), s);
    FL_ASSERT_EQ(rc, 0);
    FL_ASSERT_CONTAINS(out, "counter  float    []");
    FL_ASSERT_CONTAINS(out, "verified: every crc matches");
    free(out);
}

FL_TEST(ckpt_inspect, inspect_tensorflow_checkpoint_state_dir)
{
    const char *s = fl_test_shared();
    if (!s)
        FL_SKIP("../shared is absent: no TensorFlow checkpoint state file");
    char *out = NULL;
    int rc = fl_test_sh(&out, "%s inspect %s/testdata/tf-bundles/checkpoint-state 2>&1", psrt(), s);
    /* the state is read and shown; the checkpoint it names is not on this disk */
    FL_ASSERT_EQ(rc, 1);
    FL_ASSERT_CONTAINS(out, "model_checkpoint_path: /tmp/bad_half_plus_two/00000123/export\n");
    FL_ASSERT_CONTAINS(out,
                       "all_model_checkpoint_paths[0]: /tmp/bad_half_plus_two/00000123/export\n");
    FL_ASSERT_CONTAINS(
        out, "/tmp/bad_half_plus_two/00000123/export.index: open: No such file or directory");
    free(out);
}

static void write_sample(const char *dir)
{
    struct ckpt_writer *w;
    struct ckpt_err e;
    char prefix[4200];
    snprintf(prefix, sizeof prefix, "%s/model.ckpt-24", dir);
    FL_REQUIRE_EQ(ckpt_writer_open(&w, prefix, NULL, &e), 0);
    int64_t d2[2] = {2, 3}, d1 = 5;
    double dv[6] = {0.5, -1.25, 1e300, 0, 3, 4};
    int64_t iv[5] = {1, -2, 3, 1LL << 40, 5};
    uint8_t bv[5] = {1, 0, 1, 1, 0};
    FL_REQUIRE_EQ(ckpt_writer_add(w, "global_step", CKPT_DT_INT64, 0, NULL, iv + 3, 8, &e), 0);
    FL_REQUIRE_EQ(ckpt_writer_add(w, "dense/kernel", CKPT_DT_DOUBLE, 2, d2, dv, sizeof dv, &e), 0);
    FL_REQUIRE_EQ(ckpt_writer_add(w, "ids", CKPT_DT_INT64, 1, &d1, iv, sizeof iv, &e), 0);
    FL_REQUIRE_EQ(ckpt_writer_add(w, "mask", CKPT_DT_BOOL, 1, &d1, bv, sizeof bv, &e), 0);
    const char *strs[] = {"the", "quick \"brown\"", "fox"};
    int64_t d3 = 3;
    FL_REQUIRE_EQ(ckpt_writer_add_strings(w, "vocab", 1, &d3, strs, NULL, &e), 0);
    FL_REQUIRE_EQ(ckpt_writer_finish(w, 0, &e), 0);
    struct ckpt_state st = {0};
    FL_REQUIRE_EQ(ckpt_state_set_model(&st, "model.ckpt-24"), 0);
    FL_REQUIRE_EQ(ckpt_state_add_path(&st, "model.ckpt-24", -1), 0);
    FL_REQUIRE_EQ(ckpt_state_write(dir, &st, 0, &e), 0);
    ckpt_state_free(&st);
}

FL_TEST(ckpt_inspect, inspect_dir_with_state_file_prints_every_dtype)
{
    write_sample(fl_test_dir());
    char *out = NULL;
    int rc = fl_test_sh(&out, "%s inspect --values %s 2>&1", psrt(), fl_test_dir());
    FL_ASSERT_EQ(rc, 0);
    FL_ASSERT_CONTAINS(out, "model_checkpoint_path: model.ckpt-24\n");
    FL_ASSERT_CONTAINS(out, "5 tensors, 1 shard");
    FL_ASSERT_CONTAINS(out, "dense/kernel  double   [2,3]");
    FL_ASSERT_CONTAINS(out, "= [0.5, -1.25, 1.0000000000000001e+300, 0, 3, 4]\n");
    FL_ASSERT_CONTAINS(out, "= [1, -2, 3, 1099511627776, 5]\n");
    FL_ASSERT_CONTAINS(out, "= [true, false, true, true, false]\n");
    FL_ASSERT_CONTAINS(out, "= 1099511627776\n");
    FL_ASSERT_CONTAINS(out, "vocab         string   [3]");
    FL_ASSERT_CONTAINS(out, "= [\"the\", \"quick \\\"brown\\\"\", \"fox\"]\n");
    free(out);
    rc = fl_test_sh(&out, "%s inspect --values=2 %s/model.ckpt-24.index 2>&1", psrt(),
                    fl_test_dir());
    FL_ASSERT_EQ(rc, 0);
    FL_ASSERT_CONTAINS(out, "= [1, -2, ... (3 more)]\n");
    FL_ASSERT_CONTAINS(out, "= [\"the\", \"quick \\\"brown\\\"\", ... (1 more)]\n");
    free(out);
}

FL_TEST(ckpt_inspect, inspect_verify_fails_on_corruption)
{
    write_sample(fl_test_dir());
    const char *data = tpath("model.ckpt-24.data-00000-of-00001");
    size_t len;
    unsigned char *p = slurp(data, &len);
    FL_REQUIRE(p && len > 20);
    p[12] ^= 0x40; /* inside dense/kernel (after the 8-byte global_step) */
    FL_REQUIRE_EQ(spit(data, p, len), 0);
    free(p);
    char *out = NULL;
    int rc = fl_test_sh(&out, "%s inspect --verify %s/model.ckpt-24 2>&1", psrt(), fl_test_dir());
    FL_ASSERT_EQ(rc, 1);
    FL_ASSERT_CONTAINS(out,
                       "dense/kernel  double   [2,3]        shard 0  offset 8  size 48  crc BAD");
    FL_ASSERT_CONTAINS(out, "tensor 'dense/kernel': checksum mismatch");
    FL_ASSERT_CONTAINS(out, data);
    FL_ASSERT_CONTAINS(out, "CORRUPT");
    FL_ASSERT_CONTAINS(out,
                       "ids           int64    [5]          shard 0  offset 56  size 40  crc ok");
    free(out);
    /* a missing data file */
    unlink(data);
    rc = fl_test_sh(&out, "%s inspect --verify %s/model.ckpt-24 2>&1", psrt(), fl_test_dir());
    FL_ASSERT_EQ(rc, 1);
    FL_ASSERT_CONTAINS(out, "crc missing");
    FL_ASSERT_CONTAINS(out, "No such file or directory");
    free(out);
    /* a missing index */
    rc = fl_test_sh(&out, "%s inspect %s/nothing 2>&1", psrt(), fl_test_dir());
    FL_ASSERT_EQ(rc, 1);
    FL_ASSERT_CONTAINS(out, "nothing.index: open: No such file or directory");
    free(out);
}

FL_TEST(ckpt_inspect, inspect_json_parses_with_python)
{
    write_sample(fl_test_dir());
    if (fl_test_sh(NULL, "python3 -c 'import json' 2>/dev/null") != 0)
        FL_SKIP("python3 is not available to parse the JSON");
    char *out = NULL;
    int rc = fl_test_sh(
        &out,
        "%s inspect --json --values %s | python3 -c '"
        "import json,sys\n"
        "d=json.load(sys.stdin)\n"
        "b=d[\"bundles\"][0]\n"
        "t={x[\"name\"]: x for x in b[\"tensors\"]}\n"
        "print(d[\"ok\"], d[\"state\"][\"model_checkpoint_path\"], b[\"num_shards\"], len(t),"
        " t[\"dense/kernel\"][\"shape\"], t[\"dense/kernel\"][\"values\"][1], "
        "t[\"vocab\"][\"values\"][1],"
        " t[\"mask\"][\"values\"], t[\"ids\"][\"crc\"])'",
        psrt(), fl_test_dir());
    FL_ASSERT_EQ(rc, 0);
    FL_ASSERT_STREQ(out, "True model.ckpt-24 1 5 [2, 3] -1.25 quick \"brown\" [True, False, True, "
                         "True, False] ok\n");
    free(out);
}

FL_TEST(ckpt_inspect, inspect_usage)
{
    char *out = NULL;
    FL_ASSERT_EQ(fl_test_sh(&out, "%s inspect --help", psrt()), 0);
    FL_ASSERT_CONTAINS(
        out, "usage: psrt inspect [--values[=N]] [--verify] [--json] PREFIX|DIR|STATEFILE");
    free(out);
    FL_ASSERT_EQ(fl_test_sh(&out, "%s inspect 2>&1", psrt()), 2);
    free(out);
    FL_ASSERT_EQ(fl_test_sh(&out, "%s inspect --bogus x 2>&1", psrt()), 2);
    free(out);
    FL_ASSERT_EQ(fl_test_sh(&out, "%s --help", psrt()), 0);
    FL_ASSERT_CONTAINS(out, "inspect");
    free(out);
}
