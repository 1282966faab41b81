/*
 * test_ckpt_state.c: the `checkpoint` state file: TensorFlow's own file read
 * and reproduced byte for byte, atomic writes, text-format variants, escapes,
 * timestamps, errors with line and column, path resolution.
 */
#include <errno.h>

#include "runtime/ckpt/state.h"
#include "runtime/tests/test_ckpt_util.h"

static const char *shared_state(void)
{
    static char p[4096];
    const char *s = fl_test_shared();
    if (!s)
        FL_SKIP("../shared is absent: no TensorFlow checkpoint state file");
    snprintf(p, sizeof p, "%s/testdata/tf-bundles/checkpoint-state/checkpoint", s);
    if (!exists(p))
        FL_SKIP("%s is absent", p);
    return p;
}

FL_TEST(ckpt_state, state_read_tensorflow_file)
{
    const char *file = shared_state();
    struct ckpt_state st;
    struct ckpt_err e;
    /* the file itself and its directory */
    FL_REQUIRE_EQ(ckpt_state_read(file, &st, &e), 0);
    FL_ASSERT_STREQ(st.model_checkpoint_path, "/tmp/bad_half_plus_two/00000123/export");
    FL_REQUIRE_EQ(st.n_all, 1);
    FL_ASSERT_STREQ(st.all_model_checkpoint_paths[0], "/tmp/bad_half_plus_two/00000123/export");
    FL_ASSERT_EQ(st.n_timestamps, 0);
    ckpt_state_free(&st);
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", file);
    *strrchr(dir, '/') = 0;
    FL_REQUIRE_EQ(ckpt_state_read(dir, &st, &e), 0);
    FL_ASSERT_STREQ(st.model_checkpoint_path, "/tmp/bad_half_plus_two/00000123/export");
    ckpt_state_free(&st);
}

FL_TEST(ckpt_state, state_format_matches_tensorflow_file)
{
    const char *file = shared_state();
    size_t len;
    unsigned char *ref = slurp(file, &len);
    FL_REQUIRE(ref != NULL);
    struct ckpt_state st = {0};
    FL_REQUIRE_EQ(ckpt_state_set_model(&st, "/tmp/bad_half_plus_two/00000123/export"), 0);
    FL_REQUIRE_EQ(ckpt_state_add_path(&st, "/tmp/bad_half_plus_two/00000123/export", -1), 0);
    char *text = ckpt_state_format(&st);
    FL_REQUIRE(text != NULL);
    FL_ASSERT_EQ(strlen(text), len);
    FL_ASSERT_MEMEQ(text, ref, len);
    free(text);
    free(ref);
    ckpt_state_free(&st);
}

FL_TEST(ckpt_state, state_write_is_atomic_and_roundtrips)
{
    struct ckpt_state st = {0}, back;
    struct ckpt_err e;
    const char *weird = "dir with \"quotes\"/it's\\here\n\x01\xc3\xa9";
    FL_REQUIRE_EQ(ckpt_state_set_model(&st, "model.ckpt-24"), 0);
    FL_REQUIRE_EQ(ckpt_state_add_path(&st, "model.ckpt-20", 1577836800.5), 0);
    FL_REQUIRE_EQ(ckpt_state_add_path(&st, weird, 1577836900.25), 0);
    FL_REQUIRE_EQ(ckpt_state_add_path(&st, "model.ckpt-24", 1577837000.0), 0);
    st.last_preserved_timestamp = 1577836700.125;
    st.has_last_preserved_timestamp = true;
    FL_REQUIRE_EQ(ckpt_state_write(fl_test_dir(), &st, CKPT_SYNC, &e), 0);
    FL_ASSERT_EQ(count_names(fl_test_dir(), "tmp"), 0);
    char *text = (char *)slurp(tpath("checkpoint"), NULL);
    FL_REQUIRE(text != NULL);
    FL_ASSERT_CONTAINS(
        text,
        "model_checkpoint_path: \"model.ckpt-24\"\n"
        "all_model_checkpoint_paths: \"model.ckpt-20\"\n"
        "all_model_checkpoint_paths: \"dir with \\\"quotes\\\"/it\\'s\\\\here\\n\\001\\303\\251\"\n"
        "all_model_checkpoint_paths: \"model.ckpt-24\"\n"
        "all_model_checkpoint_timestamps: 1577836800.5\n"
        "all_model_checkpoint_timestamps: 1577836900.25\n"
        "all_model_checkpoint_timestamps: 1577837000.0\n"
        "last_preserved_timestamp: 1577836700.125\n");
    free(text);
    FL_REQUIRE_EQ(ckpt_state_read(fl_test_dir(), &back, &e), 0);
    FL_ASSERT_STREQ(back.model_checkpoint_path, "model.ckpt-24");
    FL_REQUIRE_EQ(back.n_all, 3);
    FL_ASSERT_STREQ(back.all_model_checkpoint_paths[1], weird);
    FL_REQUIRE_EQ(back.n_timestamps, 3);
    FL_ASSERT(back.all_model_checkpoint_timestamps[1] == 1577836900.25);
    FL_ASSERT(back.has_last_preserved_timestamp && back.last_preserved_timestamp == 1577836700.125);
    ckpt_state_free(&back);
    /* overwrite: the rename replaces the old file whole */
    ckpt_state_free(&st);
    FL_REQUIRE_EQ(ckpt_state_set_model(&st, "model.ckpt-30"), 0);
    FL_REQUIRE_EQ(ckpt_state_write(fl_test_dir(), &st, 0, &e), 0);
    FL_REQUIRE_EQ(ckpt_state_read(fl_test_dir(), &back, &e), 0);
    FL_ASSERT_STREQ(back.model_checkpoint_path, "model.ckpt-30");
    FL_ASSERT_EQ(back.n_all, 0);
    ckpt_state_free(&back);
    ckpt_state_free(&st);
}

FL_TEST(ckpt_state, state_parse_accepts_text_format_variants)
{
    const char *text = "# written by hand\n"
                       "model_checkpoint_path :'a\\x41\\101\\u00e9' \"b\" ;\n"
                       "all_model_checkpoint_paths: [\"p1\", 'p2'] ,\n"
                       "all_model_checkpoint_paths: \"p3\"  # trailing comment\n"
                       "all_model_checkpoint_timestamps: [1, 2.5e3, -inf]\n"
                       "last_preserved_timestamp: 7f\n"
                       "model_checkpoint_path: \"last wins\"\n";
    struct ckpt_state st;
    struct ckpt_err e;
    FL_REQUIRE_EQ(ckpt_state_parse(text, strlen(text), "t", &st, &e), 0);
    FL_ASSERT_STREQ(st.model_checkpoint_path, "last wins");
    FL_REQUIRE_EQ(st.n_all, 3);
    FL_ASSERT_STREQ(st.all_model_checkpoint_paths[0], "p1");
    FL_ASSERT_STREQ(st.all_model_checkpoint_paths[2], "p3");
    FL_REQUIRE_EQ(st.n_timestamps, 3);
    FL_ASSERT(st.all_model_checkpoint_timestamps[1] == 2500.0);
    FL_ASSERT(st.all_model_checkpoint_timestamps[2] < -1e308);
    FL_ASSERT(st.last_preserved_timestamp == 7.0);
    ckpt_state_free(&st);
    const char *esc = "model_checkpoint_path: 'a\\x41\\101\\u00e9' \"b\"";
    FL_REQUIRE_EQ(ckpt_state_parse(esc, strlen(esc), "t", &st, &e), 0);
    FL_ASSERT_STREQ(st.model_checkpoint_path, "aAA\xc3\xa9"
                                              "b");
    ckpt_state_free(&st);
    FL_REQUIRE_EQ(ckpt_state_parse("", 0, "t", &st, &e), 0);
    FL_ASSERT(st.model_checkpoint_path == NULL);
    ckpt_state_free(&st);
}

FL_TEST(ckpt_state, state_parse_errors_name_line_and_column)
{
    struct {
        const char *text;
        const char *want;
    } cases[] = {
        {"model_checkpoint_path: \"a\"\nbogus_field: \"x\"\n",
         "line 2 column 1: message type \"tensorflow.CheckpointState\" has no field named "
         "\"bogus_field\""},
        {"model_checkpoint_path \"a\"\n", "line 1 column 23: expected ':'"},
        {"model_checkpoint_path: \"abc\n", "line 1 column 28: unterminated string"},
        {"model_checkpoint_path: 12\n", "expected a string"},
        {"all_model_checkpoint_timestamps: abc\n", "'abc' is not a number"},
        {"all_model_checkpoint_paths: [\"a\" \"b\"\n", "expected ',' or ']'"},
        {"model_checkpoint_path: \"a\\qb\"\n", "unknown escape"},
        {"model_checkpoint_path: \"a\\000b\"\n", "NUL"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct ckpt_state st;
        struct ckpt_err e;
        FL_ASSERT_EQ(
            ckpt_state_parse(cases[i].text, strlen(cases[i].text), "dir/checkpoint", &st, &e),
            -EBADMSG);
        FL_ASSERT_CONTAINS(e.msg, "dir/checkpoint: ");
        FL_ASSERT_CONTAINS(e.msg, cases[i].want);
        FL_ASSERT(st.model_checkpoint_path == NULL && st.n_all == 0);
    }
}

FL_TEST(ckpt_state, state_read_missing_is_notfound)
{
    struct ckpt_state st;
    struct ckpt_err e;
    char tf[8192];
    FL_ASSERT_EQ(ckpt_state_read(fl_test_dir(), &st, &e), -ENOENT);
    FL_ASSERT_STREQ(e.path, tpath("checkpoint"));
    FL_ASSERT_CONTAINS(ckpt_err_tf(&e, tf, sizeof tf), "NotFoundError: ");
    FL_ASSERT_EQ(ckpt_state_write(tpath("no/such"), &st, 0, &e), -ENOENT);
    FL_ASSERT_CONTAINS(e.msg, "no/such/checkpoint");
}

FL_TEST(ckpt_state, state_resolve_joins_relative_paths)
{
    char *s = ckpt_state_resolve("/train", "model.ckpt-3");
    FL_ASSERT_STREQ(s, "/train/model.ckpt-3");
    free(s);
    s = ckpt_state_resolve("/train/", "model.ckpt-3");
    FL_ASSERT_STREQ(s, "/train/model.ckpt-3");
    free(s);
    s = ckpt_state_resolve("/train", "/abs/model.ckpt-3");
    FL_ASSERT_STREQ(s, "/abs/model.ckpt-3");
    free(s);
}

FL_TEST(ckpt_state, state_timestamps_print_like_python)
{
    struct ckpt_state st = {0};
    double v[] = {1.0, 0.1, 1e16, 1.5e-7, 123456789.123456};
    const char *want[] = {"1.0", "0.1", "1e+16", "1.5e-07", "123456789.123456"};
    for (size_t i = 0; i < 5; i++)
        FL_REQUIRE_EQ(ckpt_state_add_path(&st, "p", v[i]), 0);
    char *text = ckpt_state_format(&st);
    for (size_t i = 0; i < 5; i++) {
        char line[128];
        snprintf(line, sizeof line, "all_model_checkpoint_timestamps: %s\n", want[i]);
        FL_ASSERT_CONTAINS(text, line);
    }
    free(text);
    ckpt_state_free(&st);
}
